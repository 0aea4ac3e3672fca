package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/internal/testing/syncbuf"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/internal/version"
	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/models/safetensors"
	"github.com/ttmodel/tt-model/server/api"
)

// freePort is servertest.FreePort as the --port flag takes it.
func freePort(t *testing.T) string { return strconv.Itoa(servertest.FreePort(t)) }

type running struct {
	base string
	code chan int
	log  *syncbuf.Buffer
}

// mapEnv is an environment holding exactly m.
func mapEnv(m map[string]string) environment {
	return environment{get: func(k string) string { return m[k] }, list: func() []string {
		var out []string
		for k, v := range m {
			out = append(out, k+"="+v)
		}
		return out
	}}
}

func start(t *testing.T, ctx context.Context, env map[string]string) running {
	t.Helper()
	port := freePort(t)
	r := running{base: "http://127.0.0.1:" + port, code: make(chan int, 1), log: &syncbuf.Buffer{}}
	go func() {
		r.code <- run(ctx, []string{"--host", "127.0.0.1", "--port", port}, mapEnv(env), io.Discard, r.log)
	}()
	return r
}

// waitExit waits up to a minute for the server to exit with code; after
// names what should have made it exit.
func (r running) waitExit(t *testing.T, code int, after string) {
	t.Helper()
	select {
	case c := <-r.code:
		if c != code {
			t.Errorf("exit %d after %s, want %d:\n%s", c, after, code, r.log.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("no exit after %s:\n%s", after, r.log.String())
	}
}

// waitOK polls /health until it says ok, then checks that it names model on
// the CPU; the server exiting first fails.
func (r running) waitOK(t *testing.T, model string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case c := <-r.code:
			t.Fatalf("server exited %d while starting:\n%s", c, r.log.String())
		default:
		}
		resp, err := http.Get(r.base + "/health")
		if err == nil {
			var h map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h["status"] == "ok" {
				if device, _ := h["device"].(string); !strings.HasPrefix(device, "cpu ") || h["model"] != model {
					t.Errorf("health %v, want model %s on a cpu device", h, model)
				}
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("not ready in time:\n%s", r.log.String())
}

func predictBody(t *testing.T, extra string) string {
	img := image.NewNRGBA(image.Rect(0, 0, 640, 480))
	for i := range img.Pix {
		img.Pix[i] = uint8(i*13 + i/2560)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return `{"image":"` + base64.StdEncoding.EncodeToString(b.Bytes()) + `"` + extra + `}`
}

// TestServeRandomCheckpointEndToEnd runs the real server — weights
// discovery, safetensors mmap, the native forward, warm-up — on a random
// full-size checkpoint, answers predictions, then exits 75 when the fault
// switch fires after two of them; a second server stops cleanly on a signal
// once its packed weights are in the cache; a third maps them and answers the
// first prediction exactly as the first server did.
func TestServeRandomCheckpointEndToEnd(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "full-size checkpoint: skipped with -short")
	}
	dir := t.TempDir()
	if err := (rfdetr.RandomCheckpoint{Seed: 3}).Write(dir); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	r := start(t, context.Background(), map[string]string{"TT_RF_DETR_WEIGHTS": dir, "TT_MODEL_FAULT": "exit:after=2", "TT_WEIGHT_CACHE": cache})
	r.waitOK(t, "RF-DETR-base")

	var firstDetections string
	for i, extra := range []string{`,"threshold":0.0,"max_detections":300`, `,"return_raw":true`} {
		resp, err := http.Post(r.base+"/predict", "application/json", strings.NewReader(predictBody(t, extra)))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Detections    []map[string]any
			NumDetections int                `json:"num_detections"`
			ImageSize     map[string]int     `json:"image_size"`
			TimingMS      map[string]float64 `json:"timing_ms"`
			Raw           *struct {
				Logits    [][]float32
				PredBoxes [][]float32 `json:"pred_boxes"`
			}
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil {
			t.Fatalf("predict %d: %d %.300s", i, resp.StatusCode, body)
		}
		if out.ImageSize["width"] != 640 || out.TimingMS["inference"] <= 0 {
			t.Errorf("predict %d: image_size %v, timing %v", i, out.ImageSize, out.TimingMS)
		}
		// Threshold 0 keeps every one of the top 300 (query, label) pairs.
		if i == 0 && (out.NumDetections != 300 || len(out.Detections) != 300) {
			t.Errorf("threshold 0: %d detections, want 300", out.NumDetections)
		}
		if i == 0 {
			b, _ := json.Marshal(out.Detections)
			firstDetections = string(b)
		}
		if i == 1 && (out.Raw == nil || len(out.Raw.Logits) != 300 || len(out.Raw.PredBoxes[299]) != 4) {
			t.Errorf("return_raw: raw missing or mis-shaped")
		}
	}
	if code := <-r.code; code != 75 {
		t.Fatalf("exit code %d after the fault switch, want 75:\n%s", code, r.log.String())
	}

	// Without the switch, a stop signal (context cancel, as SIGTERM does in
	// main) after readiness exits 0.
	ctx, cancel := context.WithCancel(context.Background())
	r = start(t, ctx, map[string]string{"TT_RF_DETR_WEIGHTS": dir, "TT_WEIGHT_CACHE": cache})
	r.waitOK(t, "RF-DETR-base")
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if l := r.log.String(); strings.Contains(l, "packed weights kept") || strings.Contains(l, "packed weights mapped") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the packed weights never reached the cache:\n%s", r.log.String())
		}
	}
	cancel()
	if code := <-r.code; code != 0 {
		t.Fatalf("exit code %d after a stop signal, want 0:\n%s", code, r.log.String())
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	r = start(t, ctx, map[string]string{"TT_RF_DETR_WEIGHTS": dir, "TT_WEIGHT_CACHE": cache})
	r.waitOK(t, "RF-DETR-base")
	if !strings.Contains(r.log.String(), "rf-detr packed weights mapped") {
		t.Fatalf("the third start did not map the packed weights:\n%s", r.log.String())
	}
	resp, err := http.Post(r.base+"/predict", "application/json", strings.NewReader(predictBody(t, `,"threshold":0.0,"max_detections":300`)))
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Detections []map[string]any }
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if b, _ := json.Marshal(out.Detections); err != nil || string(b) != firstDetections {
		t.Errorf("detections from the mapped weights differ from the first server's (%v)", err)
	}
	cancel()
	<-r.code
}

func TestBrokenCheckpointFailsAtStartWithTheTensorName(t *testing.T) {
	dir := t.TempDir()
	if err := safetensors.WriteFile(filepath.Join(dir, rfdetr.WeightsFile), []safetensors.Entry{{Name: "class_embed.weight",
		DType: safetensors.F32, Shape: []int{80, 256}, Data: func() []float32 { return make([]float32, 80*256) }}}, nil); err != nil {
		t.Fatal(err)
	}
	r := start(t, context.Background(), map[string]string{"TT_RF_DETR_WEIGHTS": dir})
	if code := <-r.code; code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{"class_embed.weight: shape [80 256], want [91 256]", "query_feat.weight: missing"} {
		if !strings.Contains(r.log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, r.log.String())
		}
	}
}

func TestFlags(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		code int
		out  string
	}{
		{[]string{"--version"}, nil, 0, "tt-model-server " + version.Version},
		{[]string{"--verify"}, map[string]string{"HF_MODEL": "Roboflow/rf-detr-base"}, 0, "model:     rf-detr"},
		{[]string{"--verify"}, nil, 0, "weights:   not opened"},
		{[]string{"--verify", "--model", "yolo"}, nil, 2, `--model "yolo"`},
		{[]string{"--verify"}, map[string]string{"RFDETR_PRECISION": "int8"}, 2, "RFDETR_PRECISION"},
		{[]string{"--verify"}, map[string]string{"PI05_PRECISION": "fp8"}, 2, "PI05_PRECISION"},
		{[]string{"--verify", "--model", "pi05"}, map[string]string{"PI05_PRECISION": "fp32"}, 0, "precision: fp32 (PI05_PRECISION)"},
		{[]string{"--verify", "--model", "pi05"}, nil, 0, "precision: bf16 (PI05_PRECISION)"},
		{[]string{"--verify", "--model", "rf-detr"}, nil, 0, "precision: fp32 (RFDETR_PRECISION)"},
		{[]string{"--port", "x"}, nil, 2, "--port"},
		{[]string{"--threads", "4"}, nil, 2, "flag provided but not defined: -threads"},
		{[]string{"--verify"}, nil, 0, "auth:      none: every route answers anyone"},
		{[]string{"--verify"}, map[string]string{"TT_API_KEY": "k"}, 0, "auth:      API key required on every route but /health and /healthz (from TT_API_KEY)"},
		{[]string{"--verify", "--api-key-file", "/nonexistent/key"}, nil, 2, "--api-key-file: open /nonexistent/key"},
		{[]string{"--verify", "4"}, nil, 2, `unexpected argument "4"`},
		{[]string{}, map[string]string{"TT_RF_DETR_WEIGHTS": "/w", "TT_MODEL_FAULT_EXIT_AFTER": "1"}, 2, "replaced by TT_MODEL_FAULT=exit:after=N"},
		{[]string{}, map[string]string{"TT_RF_DETR_WEIGHTS": "/w", "TT_MODEL_FAULT": "exit:after=0"}, 2, "TT_MODEL_FAULT"},
		{[]string{}, map[string]string{"TT_RF_DETR_WEIGHTS": "/w", "TT_MODEL_FAULT": "hang:after=1"}, 2, "needs the pi0.5 serving engine"},
		{[]string{"--verify"}, map[string]string{"TT_WEIGHT_CACHE": "/srv/packed"}, 0, "cache:     /srv/packed"},
		{[]string{"--verify"}, map[string]string{"TT_WEIGHT_CACHE": "off"}, 0, "cache:     none (TT_WEIGHT_CACHE=off)"},
		{[]string{"--verify"}, map[string]string{"TT_WEIGHT_CACHE": "packed"}, 2, "TT_WEIGHT_CACHE"},
		{[]string{"--verify"}, map[string]string{"TT_GEMM_TUNE": "maybe"}, 2, "TT_GEMM_TUNE"},
		{[]string{"--verify"}, map[string]string{"TT_GEMM_PLAN": "kc=1,mb=0"}, 2, "TT_GEMM_PLAN"},
		{[]string{"--verify"}, map[string]string{"TT_GEMM_PLAN": "kc=128,mb=8,nb=4,pf=1"}, 0, "gemm:      plan kc=128"},
		{[]string{"--verify"}, nil, 0, "requests:  256 MiB memory budget for bodies and decoded images (TT_REQUEST_MEMORY_MB)"},
		{[]string{"--verify"}, map[string]string{"TT_REQUEST_MEMORY_MB": "0"}, 0, "requests:  no memory budget (TT_REQUEST_MEMORY_MB=0)"},
		{[]string{"--verify"}, map[string]string{"TT_REQUEST_MEMORY_MB": "64MB"}, 2, `TT_REQUEST_MEMORY_MB="64MB": want MiB from 0`},
		{[]string{"--verify"}, map[string]string{"TT_REQUEST_MEMORY_MB": "-1"}, 2, "TT_REQUEST_MEMORY_MB"},
		{[]string{"--verify"}, map[string]string{"GOMEMLIMIT": "1GiB"}, 0, "go memory: GOMEMLIMIT=1GiB (left as set)"},
		{[]string{}, nil, 2, "no model to serve"},
		{[]string{"--verify"}, map[string]string{"TT_ISA": "avx9"}, 2, `TT_ISA="avx9": want scalar, avx2, avx512, avx512bf16 or amxbf16`},
		{[]string{"--verify"}, map[string]string{"TT_ISA": "AVX2"}, 2, "TT_ISA"},
		{[]string{"--verify"}, map[string]string{"TT_ISA": "scalar"}, 0, "weights:   not opened"},
		{[]string{"--model", "pi05", "--port", "0"}, map[string]string{"TT_MESH_SHAPE": "1000x1000"}, 2, `TT_MESH_SHAPE=\"1000x1000\": want ROWSxCOLS of 1 to 64 devices`},
		{[]string{"--model", "pi05", "--port", "0"}, map[string]string{"PI05_SLO_MS": "100", "PI05_MR_GUARD": "0:NaN"}, 2, "PI05_MR_GUARD"},
	}
	for _, c := range cases {
		var out bytes.Buffer
		code := run(context.Background(), c.args, mapEnv(c.env), &out, &out)
		if code != c.code || !strings.Contains(out.String(), c.out) {
			t.Errorf("%v %v: exit %d, output %q; want %d containing %q", c.args, c.env, code, out.String(), c.code, c.out)
		}
	}
}

// --help names every model this binary serves, read from servedModels, so a
// model added there cannot be left out of the help; servedModels and the
// route tables (api.Kinds) list the same models, and each name the help gives
// is one --model takes.
func TestHelpNamesEveryModel(t *testing.T) {
	kinds := slices.Sorted(slices.Values(servedKinds()))
	if want := slices.Sorted(slices.Values(api.Kinds())); !slices.Equal(kinds, want) {
		t.Fatalf("servedModels serves %q, the route tables (api.Kinds) list %q", kinds, want)
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, mapEnv(nil), &out, &out); code != 0 {
		t.Fatalf("--help: exit %d, want 0:\n%s", code, out.String())
	}
	help := out.String()
	_, modelHelp, ok := strings.Cut(help, "-model string")
	if !ok {
		t.Fatalf("--help has no --model flag:\n%s", help)
	}
	modelHelp, _, _ = strings.Cut(modelHelp, "\n  -")
	for _, kind := range kinds {
		if !strings.Contains(modelHelp, kind) {
			t.Errorf("--model's help does not name %q:\n%s", kind, modelHelp)
		}
		var verify bytes.Buffer
		if code := run(context.Background(), []string{"--verify", "--model", kind}, mapEnv(nil), &verify, &verify); code != 0 ||
			!strings.Contains(verify.String(), "model:     "+kind+"\n") {
			t.Errorf("--verify --model %s: exit %d:\n%s", kind, code, verify.String())
		}
	}
	if !strings.Contains(help, "Example:\n  ") {
		t.Errorf("--help has no example:\n%s", help)
	}
}

// --model, or the environment when it is auto, picks a model of the registry (servedModels).
func TestSelectModel(t *testing.T) {
	cases := []struct {
		flag    string
		env     map[string]string
		want    string
		wantErr string
	}{
		{"rf-detr", nil, api.KindRFDETR, ""},
		{"auto", map[string]string{"TT_RF_DETR_WEIGHTS": "/w"}, api.KindRFDETR, ""},
		{"", map[string]string{"HF_MODEL": "Roboflow/rf-detr-base"}, api.KindRFDETR, ""},
		{"", map[string]string{"HF_MODEL": "/hf/hub/models--Roboflow--rf-detr-base/snapshots/abc"}, api.KindRFDETR, ""},
		{"", map[string]string{"HF_MODEL": "lerobot/pi05_base"}, api.KindPI05, ""},
		{"pi0.5", nil, api.KindPI05, ""},
		{"auto", map[string]string{"PI05_WEIGHTS_DIR": "/w"}, api.KindPI05, ""},
		{"", map[string]string{"HF_MODEL": "openai/whisper-small"}, "", "does not name a model this server knows"},
		{"", nil, "", "no model to serve"},
		{"yolo", nil, "", `--model "yolo"`},
	}
	for _, c := range cases {
		got, err := selectModel(c.flag, func(k string) string { return c.env[k] })
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q %v: error %v, want %q", c.flag, c.env, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q %v: %q %v", c.flag, c.env, got, err)
		}
	}
}
