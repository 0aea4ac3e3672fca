package pi05

import (
	"context"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"testing"

	"github.com/ttmodel/tt-model/internal/pi05golden"
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

// Loading through this package (names, dims from shapes + config.json, streaming) must give the
// reference's actions: the fp32 kernels within 1e-4 of PyTorch's fp32 run, the bf16 kernels (the
// F32 checkpoint converted while loading) within 2e-2 of PyTorch's bf16 run.
func TestPolicyMatchesReference(t *testing.T) {
	cases, err := pi05golden.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range cases {
		for _, tc := range []struct {
			prec native.Pi05Precision
			want []float32
			tol  float64
		}{{native.Pi05F32, g.Actions, 1e-4}, {native.Pi05BF16, g.ActionsBF16, 2e-2}} {
			t.Run(g.Name+"/"+tc.prec.String(), func(t *testing.T) {
				p := loadTiny(t, len(g.CamMask), g.Horizon, tc.prec)
				res, err := p.Run(context.Background(), &Prepared{
					Images: g.Images, CameraMask: g.CamMask, Tokens: g.Tokens, TokenMask: g.TokMask,
					Noise: g.Noise, Steps: g.Steps,
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
				if len(res.Actions) != g.Horizon || worst > tc.tol {
					t.Errorf("%d rows, max |diff| %g vs the reference, want <= %g", len(res.Actions), worst, tc.tol)
				}
			})
		}
	}
}
