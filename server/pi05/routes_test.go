package pi05

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/models/pi05/pi05native"
	"github.com/ttmodel/tt-model/native"
	"github.com/ttmodel/tt-model/server"
)

// The tiny random pi0.5 checkpoint of the kernel tests and a SentencePiece model with fewer pieces
// than its vocabulary: the routes below run real inference on them (tiny sizes, CPU).
var pi05TestEnv = map[string]string{
	"PI05_WEIGHTS_DIR":    filepath.Join("..", "..", "kernels", "pi05", "testdata", "tiny"),
	"PI05_TOKENIZER":      filepath.Join("..", "..", "models", "pi05", "spm", "testdata", "bpe_tiny.model"),
	"PI05_NUM_IMAGES":     "2",
	"PI05_ACTION_HORIZON": "10",
	"PI05_NUM_STEPS":      "4",
	"PI05_PRECISION":      "fp32",
	"HF_MODEL":            "lerobot/pi05_base",
}

// newPI05TestModel loads the tiny checkpoint (fp32 kernels) under pi05TestEnv with overrides; its
// websockets are ended at cleanup.
func newPI05TestModel(t testing.TB, overrides map[string]string) *Model {
	t.Helper()
	return loadPI05(t, overrides, server.Fault{Device: -1})
}

// loadPI05 is newPI05TestModel with a fault switch.
func loadPI05(t testing.TB, overrides map[string]string, fault server.Fault) *Model {
	t.Helper()
	env := map[string]string{}
	for k, v := range pi05TestEnv {
		env[k] = v
	}
	for k, v := range overrides {
		env[k] = v
	}
	m, err := New(Options{Getenv: func(k string) string { return env[k] }, Version: "test",
		Build: pi05native.Builder(pi05native.Options{Precision: native.FP32}), Precision: "fp32", Fault: fault})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Load(context.Background(), servertest.DiscardLog()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !m.Hung() { // a stuck device is never closed
			_ = m.Close()
		}
	})
	return m
}

func newPI05TestServer(t *testing.T, overrides map[string]string) *httptest.Server {
	t.Helper()
	ts, _ := startPI05(t, overrides)
	return ts
}

// startPI05 serves the tiny checkpoint through the handler alone (no Run: a hang ends nothing and
// /health can be watched); the websockets are ended before the model is closed.
func startPI05(t testing.TB, overrides map[string]string) (*httptest.Server, *Model) {
	t.Helper()
	m := newPI05TestModel(t, overrides)
	return pi05Handler(t, m), m
}

func pi05Handler(t testing.TB, m *Model) *httptest.Server {
	t.Helper()
	s := server.New(m, server.Options{Log: servertest.DiscardLog()})
	s.MarkLoaded()
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(m.ws.shutdown)
	return ts
}

// loadedPI05 is a loaded pi0.5 model: Run's Load has nothing to do.
type loadedPI05 struct{ *Model }

func (loadedPI05) Load(context.Context, *slog.Logger) error { return nil }

// runPI05 serves the tiny checkpoint through Server.Run on a real socket.
func runPI05(t *testing.T, overrides map[string]string, opts server.Options) (string, *server.Server) {
	t.Helper()
	m := newPI05TestModel(t, overrides)
	opts.Log = servertest.DiscardLog()
	s := server.New(loadedPI05{m}, opts)
	s.MarkLoaded()
	ctx, cancel := context.WithCancel(context.Background())
	base, done := servertest.Run(t, ctx, s.Run)
	t.Cleanup(func() { cancel(); <-done })
	return base, s
}

// pi05Frame is a w x h frame as a base64 PNG and as the HxWx3 array SGLang clients send.
func pi05Frame(t testing.TB, w, h, salt int) (string, [][][3]int) {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	arr := make([][][3]int, h)
	for y := range h {
		arr[y] = make([][3]int, w)
		for x := range w {
			for c := range 3 {
				v := (x*5 + y*11 + c*70 + salt) % 256
				img.Pix[img.PixOffset(x, y)+c] = uint8(v)
				arr[y][x][c] = v
			}
			img.Pix[img.PixOffset(x, y)+3] = 255
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes()), arr
}

func postJSON(t *testing.T, url, body string, header ...string) (int, map[string]any) {
	t.Helper()
	status, _, raw := postBody(t, url, []byte(body), append([]string{"Content-Type", "application/json"}, header...)...)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("status %d, body %q is not a JSON object", status, raw)
	}
	return status, out
}

func matrix(t *testing.T, v any) [][]float64 {
	t.Helper()
	rows, ok := v.([]any)
	if !ok {
		t.Fatalf("not a matrix: %T", v)
	}
	out := make([][]float64, len(rows))
	for i, r := range rows {
		for _, x := range r.([]any) {
			out[i] = append(out[i], x.(float64))
		}
	}
	return out
}

func noiseJSON(rows, cols int) string {
	var b strings.Builder
	b.WriteByte('[')
	for r := range rows {
		if r > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for c := range cols {
			if c > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%g", float64((r*cols+c)%7-3)/3)
		}
		b.WriteByte(']')
	}
	b.WriteByte(']')
	return b.String()
}

func TestPI05PredictContract(t *testing.T) {
	ts := newPI05TestServer(t, nil)
	img, _ := pi05Frame(t, 40, 30, 1)
	body := fmt.Sprintf(`{"images": [%q], "prompt": "pick_up the cup", "state": [0.5, -0.25], "seed": 11}`, img)
	status, out := postJSON(t, ts.URL+"/predict", body)
	if status != http.StatusOK {
		t.Fatalf("status %d: %v", status, out)
	}
	acts := matrix(t, out["actions"])
	if len(acts) != 10 || len(acts[0]) != 32 || out["action_horizon"] != 10.0 || out["action_dim"] != 32.0 {
		t.Errorf("actions %dx%d, horizon %v, dim %v", len(acts), len(acts[0]), out["action_horizon"], out["action_dim"])
	}
	want := map[string]any{"normalized": true, "denoising_steps": 4.0, "images_used": 1.0, "images_padded": 1.0,
		"image_size": 56.0, "seed": 11.0, "batched_as": 1.0, "prompt_truncated": false}
	for k, v := range want {
		if out[k] != v {
			t.Errorf("%s = %v, want %v", k, out[k], v)
		}
	}
	if n, b := out["num_tokens"].(float64), out["token_len"].(float64); n < 10 || b != smallestBucket(n) {
		t.Errorf("num_tokens %v in bucket %v", n, b)
	}
	if p, _ := out["prompt"].(string); !strings.HasPrefix(p, "Task: pick up the cup, State: 192 96 128") {
		t.Errorf("prompt %q", out["prompt"])
	}
	if sz := fmt.Sprint(out["original_sizes"]); sz != "[[30 40]]" {
		t.Errorf("original_sizes %s", sz)
	}
	timing, _ := out["timing_ms"].(map[string]any)
	for _, k := range []string{"preprocess", "inference", "total"} {
		if _, ok := timing[k]; !ok {
			t.Errorf("timing_ms has no %s: %v", k, timing)
		}
	}
	// Same seed, same chunk; the server keeps serving after bad requests in between.
	if status, bad := postJSON(t, ts.URL+"/predict", `{"images": []}`); status != http.StatusBadRequest {
		t.Errorf("empty images: %d %v", status, bad)
	}
	_, again := postJSON(t, ts.URL+"/predict", body)
	if fmt.Sprint(again["actions"]) != fmt.Sprint(out["actions"]) {
		t.Error("same seed gave different actions")
	}
}

// smallestBucket is the prompt bucket a request with n tokens runs in, with 2 cameras.
func smallestBucket(n float64) float64 {
	for _, b := range []float64{32, 64, 128, 160, 224} {
		if n <= b {
			return b
		}
	}
	return -1
}

func TestPI05BadRequestsNameTheField(t *testing.T) {
	ts := newPI05TestServer(t, map[string]string{"PI05_TOKEN_LEN": "24"})
	img, _ := pi05Frame(t, 8, 8, 2)
	tests := []struct {
		name, path, body string
		status           int
		detail           string
	}{
		{"three cameras", "/predict", fmt.Sprintf(`{"images": [%q, %q, %q]}`, img, img, img), 400, "images: got 3 images, this server takes 1 to 2"},
		{"NaN state", "/predict", fmt.Sprintf(`{"images": [%q], "state": [0.1, NaN]}`, img), 400, "state: state[1] is NaN"},
		{"Infinity state", "/predict", fmt.Sprintf(`{"images": [%q], "state": [-Infinity]}`, img), 400, "state: state[0] is -Inf"},
		{"state type", "/predict", fmt.Sprintf(`{"images": [%q], "state": "high"}`, img), 400, "state: want a list of numbers"},
		{"noise shape", "/predict", fmt.Sprintf(`{"images": [%q], "noise": %s}`, img, noiseJSON(5, 32)), 400, "noise: shape [5, 32], want [10, 32]"},
		{"ragged noise", "/predict", fmt.Sprintf(`{"images": [%q], "noise": [[1, 2], [3]]}`, img), 400, "noise: row 1 has 1 values"},
		{"bad base64", "/predict", `{"images": ["not base64!"]}`, 400, "images[0]: invalid base64"},
		{"not an image", "/predict", `{"images": ["aGVsbG8="]}`, 400, "images[0]: not a PNG or JPEG"},
		{"token id", "/predict", fmt.Sprintf(`{"images": [%q], "tokens": [2, 99999]}`, img), 400, "tokens: token 99999 at index 1"},
		{"steps", "/predict", fmt.Sprintf(`{"images": [%q], "num_steps": 12}`, img), 400, "num_steps: 12 is outside 1..10"},
		{"not JSON", "/predict", `{"images": [`, 400, "invalid JSON body"},
		{"wrong type", "/predict", `{"images": "x"}`, 400, "invalid JSON body"},
		{"SGLang noise", "/v1/actions/generations", fmt.Sprintf(`{"input": {"task": "x", "observation": {"images": {"a": %q}, "noise": %s}}}`, img, noiseJSON(10, 8)), 400, "input.observation.noise: shape [10, 8], want [10, 32]"},
		{"SGLang NaN", "/v1/actions/generations", fmt.Sprintf(`{"input": {"task": "x", "observation": {"images": {"a": %q}, "state": [NaN]}}}`, img), 400, "input.observation.state: state[0] is NaN"},
		{"SGLang cameras", "/v1/actions/generations", fmt.Sprintf(`{"input": {"observation": {"images": {"a": %q, "b": %q, "c": %q}}}}`, img, img, img), 400, "input.observation.images: got 3 images"},
		{"SGLang array", "/v1/actions/generations", `{"input": {"observation": {"images": {"a": [[[1, 2, 3], [4, 5]]]}}}}`, 400, "input.observation.images.a: pixel [0][1]"},
		{"SGLang pixel", "/v1/actions/generations", `{"input": {"observation": {"images": {"a": [[[1, 2, 300]]]}}}}`, 400, `"300" is not an integer in 0..255`},
		{"SGLang horizon", "/v1/actions/generations", fmt.Sprintf(`{"input": {"observation": {"images": {"a": %q}}}, "parameters": {"action_horizon": 50}}`, img), 400, "parameters.action_horizon: 50 differs"},
		{"SGLang numpy", "/v1/actions/generations", `{"runtime": {"output_format": "numpy"}}`, 400, "runtime.output_format"},
		{"SGLang model", "/v1/actions/generations", `{"model": "other/model"}`, 404, `model: "other/model" is not served here`},
		{"SGLang no images", "/v1/actions/generations", `{"input": {"task": "x"}}`, 400, "input.observation.images: missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, out := postJSON(t, ts.URL+tc.path, tc.body)
			detail, _ := out["detail"].(string)
			if status != tc.status || !strings.Contains(detail, tc.detail) {
				t.Errorf("status %d detail %q, want %d with %q", status, detail, tc.status, tc.detail)
			}
		})
	}
	status, out := postJSON(t, ts.URL+"/predict", `{}`, "Content-Type", "application/msgpack")
	if status != http.StatusUnsupportedMediaType {
		t.Errorf("msgpack body to /predict: %d %v", status, out)
	}

	// An over-long prompt is truncated to PI05_TOKEN_LEN and reported, not refused.
	status, out = postJSON(t, ts.URL+"/predict", fmt.Sprintf(`{"images": [%q], "prompt": %q, "seed": 1}`, img, strings.Repeat("stack the cubes ", 30)))
	if status != http.StatusOK || out["prompt_truncated"] != true || out["num_tokens"] != 24.0 || out["token_len"] != 32.0 {
		t.Errorf("long prompt: %d truncated %v num_tokens %v token_len %v", status, out["prompt_truncated"], out["num_tokens"], out["token_len"])
	}
}

// The SGLang route and /predict run the same policy: the same frames (PNG vs HxWx3 array), prompt,
// state and noise give the same actions.
func TestPI05GenerationsMatchesPredict(t *testing.T) {
	ts := newPI05TestServer(t, nil)
	b64a, arrA := pi05Frame(t, 33, 21, 3)
	b64b, arrB := pi05Frame(t, 16, 16, 9)
	noise := noiseJSON(10, 32)
	status, pred := postJSON(t, ts.URL+"/predict", fmt.Sprintf(`{"images": [%q, %q], "prompt": "open the drawer", "state": [0.3], "noise": %s}`, b64a, b64b, noise))
	if status != http.StatusOK {
		t.Fatalf("/predict: %d %v", status, pred)
	}
	if pred["seed"] != nil {
		t.Errorf("seed %v reported for caller noise", pred["seed"])
	}
	ja, _ := json.Marshal(arrA)
	jb, _ := json.Marshal(arrB)
	// No image features in the tiny config.json: cameras are taken in name order.
	body := fmt.Sprintf(`{"model": "lerobot/pi05_base", "input": {"task": "open the drawer", "observation": {"images": {"wrist": %s, "base": %s}, "state": [0.3], "noise": %s}}, "runtime": {"return_timing": true}}`, jb, ja, noise)
	status, gen := postJSON(t, ts.URL+"/v1/actions/generations", body)
	if status != http.StatusOK {
		t.Fatalf("generations: %d %v", status, gen)
	}
	data := gen["data"].([]any)[0].(map[string]any)
	values := data["action"].(map[string]any)["values"]
	if fmt.Sprint(values) != fmt.Sprint(pred["actions"]) {
		t.Errorf("SGLang actions differ from /predict's")
	}
	if timings, ok := gen["timings"].(map[string]any); !ok || timings["total_ms"] == nil {
		t.Errorf("timings: %v", gen["timings"])
	}
	status, raw := postJSON(t, ts.URL+"/v1/actions/generations", strings.Replace(body, `"return_timing": true`, `"response_format": "raw", "return_timing": false`, 1))
	if status != http.StatusOK || fmt.Sprint(raw["actions"]) != fmt.Sprint(pred["actions"]) || raw["policy_timing"] != nil {
		t.Errorf("raw: %d %v", status, raw)
	}
}

func TestPI05InfoMetadataModels(t *testing.T) {
	ts := newPI05TestServer(t, nil)
	status, md := servertest.GetJSON(t, ts.URL+"/v1/actions/metadata")
	if status != http.StatusOK || md["action_horizon"] != 10.0 || md["action_dim"] != 32.0 || md["num_cameras"] != 2.0 || fmt.Sprint(md["prompt_buckets"]) != "[32 64 128 160 224]" {
		t.Errorf("metadata %d %v", status, md)
	}
	status, info := servertest.GetJSON(t, ts.URL+"/info")
	if status != http.StatusOK || info["status"] != "ok" || info["model"] != "lerobot/pi05_base" || info["dims"] == nil {
		t.Errorf("info %d %v", status, info)
	}
	status, models := servertest.GetJSON(t, ts.URL+"/v1/models")
	if status != http.StatusOK || fmt.Sprint(models["data"]) != "[map[id:lerobot/pi05_base object:model owned_by:lerobot]]" {
		t.Errorf("models %d %v", status, models)
	}
	status, health := servertest.GetJSON(t, ts.URL+"/health")
	if status != http.StatusOK || health["status"] != "ok" || health["model"] != "lerobot/pi05_base" {
		t.Errorf("health %d %v", status, health)
	}
}

func TestPI05StartupErrors(t *testing.T) {
	env := func(extra map[string]string) func(string) string {
		return func(k string) string {
			if v, ok := extra[k]; ok {
				return v
			}
			return pi05TestEnv[k]
		}
	}
	if _, err := New(Options{Getenv: env(map[string]string{"PI05_NUM_IMAGES": "7"})}); err == nil || !strings.Contains(err.Error(), "PI05_NUM_IMAGES") {
		t.Errorf("PI05_NUM_IMAGES=7: %v", err)
	}
	m, err := New(Options{Getenv: env(map[string]string{"PI05_TOKENIZER": "/nonexistent/tokenizer.model"})})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Load(context.Background(), servertest.DiscardLog()); err == nil || !strings.Contains(err.Error(), "tokenizer") {
		t.Errorf("missing tokenizer: %v", err)
	}
}

func TestQuoteNonFinite(t *testing.T) {
	in := `{"a": [NaN, -Infinity, Infinity, 1], "s": "NaN \" Infinity", "b": NaN}`
	want := `{"a": ["NaN", "-Infinity", "Infinity", 1], "s": "NaN \" Infinity", "b": "NaN"}`
	if got := string(quoteNonFinite([]byte(in))); got != want {
		t.Errorf("quoteNonFinite:\n got %s\nwant %s", got, want)
	}
}

func TestParseUint8Image(t *testing.T) {
	img, err := parseUint8Image([]byte(` [ [ [0, 1, 2], [3, 4, 5.0] ], [[6,7,8],[9,10,255]] ] `))
	if err != nil || img.H != 2 || img.W != 2 || fmt.Sprint(img.Pix) != "[0 1 2 3 4 5 6 7 8 9 10 255]" {
		t.Fatalf("%+v %v", img, err)
	}
	for _, bad := range []string{`[]`, `[[[1,2]]]`, `[[[1,2,3,4]]]`, `[[[1,2,3]],[[1,2,3],[4,5,6]]]`, `[[[1,2,-1]]]`, `[[[1,2,3]]] x`, `[[[1,2,3.5]]]`} {
		if _, err := parseUint8Image([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// Arbitrary request bytes never panic the JSON helpers; a parsed frame is consistent.
func FuzzPI05JSONHelpers(f *testing.F) {
	for _, s := range []string{`[[[1,2,3]]]`, `[[[0,0,0],[255,255,255]],[[1,2,3],[4,5,6]]]`, `[NaN, Infinity]`, `"\"NaN\""`, `[[[1e400,2,3]]]`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if img, err := parseUint8Image(b); err == nil && len(img.Pix) != img.H*img.W*3 {
			t.Fatalf("%q: %dx%d frame with %d values", b, img.H, img.W, len(img.Pix))
		}
		q := quoteNonFinite(b)
		_, _ = floatList(q)
		_, _, _, _ = floatMatrix(q)
	})
}
