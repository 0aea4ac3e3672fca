package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/models/safetensors"
)

var (
	pi05TinyDir   = filepath.Join("..", "..", "kernels", "pi05", "testdata", "tiny")
	pi05Tokenizer = filepath.Join("..", "..", "models", "pi05", "spm", "testdata", "bpe_tiny.model")
)

// The real binary path on the tiny checkpoint: selection from PI05_WEIGHTS_DIR, loading, warm-up,
// one prediction, a bad request, then a clean stop.
func TestServePI05TinyCheckpoint(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := start(t, ctx, map[string]string{
		"PI05_WEIGHTS_DIR": pi05TinyDir, "PI05_TOKENIZER": pi05Tokenizer, "PI05_PRECISION": "fp32",
		"PI05_ACTION_HORIZON": "6", "PI05_NUM_STEPS": "3",
	})
	r.waitOK(t, "lerobot/pi05_base")
	img := image.NewRGBA(image.Rect(0, 0, 24, 16))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 11)
	}
	var frame bytes.Buffer
	if err := png.Encode(&frame, img); err != nil {
		t.Fatal(err)
	}
	body := `{"images": ["` + base64.StdEncoding.EncodeToString(frame.Bytes()) + `"], "prompt": "wipe the table", "seed": 5}`
	resp, err := http.Post(r.base+"/predict", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Actions [][]float32 `json:"actions"`
		Steps   int         `json:"denoising_steps"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(out.Actions) != 6 || len(out.Actions[0]) != 32 || out.Steps != 3 {
		t.Fatalf("predict: %d %v, %d actions, %d steps", resp.StatusCode, err, len(out.Actions), out.Steps)
	}
	resp, err = http.Post(r.base+"/predict", "application/json", strings.NewReader(`{"images": [], "state": [NaN]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad request: %d", resp.StatusCode)
	}
	cancel()
	if code := <-r.code; code != 0 {
		t.Errorf("exit %d after a stop signal:\n%s", code, r.log.String())
	}
}

// A checkpoint with a missing and a mis-shaped tensor stops the server at start (exit 1) with both
// names; a bad PI05_* value is exit 2 with the variable's name.
func TestPI05StartupFailures(t *testing.T) {
	src, err := safetensors.Open(filepath.Join(pi05TinyDir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	const dropped = "paligemma_with_expert.gemma_expert.model.layers.1.mlp.down_proj.weight"
	const reshaped = "action_out_proj.bias"
	var entries []safetensors.Entry
	for _, name := range src.Names() {
		info, _ := src.Info(name)
		if name == dropped {
			continue
		}
		shape := info.Shape
		vals, err := src.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		if name == reshaped {
			shape, vals = []int{16}, vals[:16]
		}
		entries = append(entries, safetensors.Entry{Name: name, DType: safetensors.F32, Shape: shape, Data: func() []float32 { return vals }})
	}
	dir := t.TempDir()
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), entries, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(pi05TinyDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	r := start(t, context.Background(), map[string]string{"PI05_WEIGHTS_DIR": dir, "PI05_TOKENIZER": pi05Tokenizer})
	if code := <-r.code; code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, r.log.String())
	}
	for _, want := range []string{dropped, reshaped + ": shape [16], want [32]"} {
		if !strings.Contains(r.log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, r.log.String())
		}
	}

	r = start(t, context.Background(), map[string]string{"PI05_WEIGHTS_DIR": pi05TinyDir, "PI05_ACTION_HORIZON": "65"})
	if code := <-r.code; code != 2 || !strings.Contains(r.log.String(), "PI05_ACTION_HORIZON") {
		t.Errorf("PI05_ACTION_HORIZON=65: exit %d:\n%s", code, r.log.String())
	}
}
