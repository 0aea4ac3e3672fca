package pi05

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"testing"

	"github.com/ttmodel/tt-model/models/safetensors"
	"github.com/ttmodel/tt-model/native"
)

// The tiny random checkpoint and the PyTorch reference goldens of the kernel tests
// (tools/reference/pi05.py).
var (
	tinyDir       = filepath.Join("..", "..", "kernels", "pi05", "testdata", "tiny")
	goldenDir     = filepath.Join("..", "..", "kernels", "pi05", "testdata")
	tinyTokenizer = filepath.Join("spm", "testdata", "bpe_tiny.model")
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func loadTiny(t *testing.T, cams, horizon int, prec native.Pi05Precision) *Policy {
	t.Helper()
	srv, err := ServerConfigFromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	srv.NumImages, srv.ActionHorizon, srv.Tokenizer = cams, horizon, tinyTokenizer
	p, err := LoadPolicy(context.Background(), srv, tinyDir, LoadOptions{Precision: prec, Threads: 2}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

type goldenCase struct {
	images         []float32
	camMask        []bool
	tokens         []int32
	tokMask        []bool
	noise, actions []float32
	actionsBF16    []float32
	cams, horizon  int
	steps          int
}

func readGoldenCase(t *testing.T, path string) goldenCase {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	floats := func(name string) []float32 {
		v, err := f.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), v...)
	}
	raw := func(name string) []byte {
		b, err := f.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var g goldenCase
	g.images, g.noise, g.actions, g.actionsBF16 = floats("images"), floats("noise"), floats("actions"), floats("actions_bf16")
	for _, b := range raw("image_masks") {
		g.camMask = append(g.camMask, b != 0)
	}
	for _, b := range raw("token_masks") {
		g.tokMask = append(g.tokMask, b != 0)
	}
	tk := raw("tokens")
	for i := 0; i < len(tk); i += 4 {
		g.tokens = append(g.tokens, int32(binary.LittleEndian.Uint32(tk[i:])))
	}
	g.steps = int(binary.LittleEndian.Uint32(raw("steps")))
	info, _ := f.Info("noise")
	g.cams, g.horizon = len(g.camMask), info.Shape[0]
	return g
}

// Loading through this package (names, dims from shapes + config.json, streaming) must give the
// reference's actions: the fp32 kernels within 1e-4 of PyTorch's fp32 run, the bf16 kernels (the
// F32 checkpoint converted while loading) within 2e-2 of PyTorch's bf16 run.
func TestPolicyMatchesReference(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join(goldenDir, "c*.safetensors"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("no golden cases in %s: %v", goldenDir, err)
	}
	for _, path := range cases {
		g := readGoldenCase(t, path)
		for _, tc := range []struct {
			prec native.Pi05Precision
			want []float32
			tol  float64
		}{{native.Pi05F32, g.actions, 1e-4}, {native.Pi05BF16, g.actionsBF16, 2e-2}} {
			t.Run(filepath.Base(path)+"/"+tc.prec.String(), func(t *testing.T) {
				p := loadTiny(t, g.cams, g.horizon, tc.prec)
				res, err := p.Run(context.Background(), &Prepared{
					Images: g.images, CameraMask: g.camMask, Tokens: g.tokens, TokenMask: g.tokMask,
					Noise: g.noise, Steps: g.steps,
				})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Normalized {
					t.Error("no statistics were loaded, but the result is not marked normalized")
				}
				worst := 0.0
				for r, row := range res.Actions {
					for c, v := range row {
						worst = max(worst, math.Abs(float64(v-tc.want[r*32+c])))
					}
				}
				if len(res.Actions) != g.horizon || worst > tc.tol {
					t.Errorf("%d rows, max |diff| %g vs the reference, want <= %g", len(res.Actions), worst, tc.tol)
				}
			})
		}
	}
}
