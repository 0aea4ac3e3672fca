package pi05native_test

import (
	"context"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ttmodel/tt-model/models/pi05"
	"github.com/ttmodel/tt-model/models/pi05/golden"
	"github.com/ttmodel/tt-model/models/pi05/pi05native"
	"github.com/ttmodel/tt-model/native"
)

const root = "../../.."

var tinyTokenizer = filepath.Join(root, "models", "pi05", "spm", "testdata", "bpe_tiny.model")

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// loadTiny loads the tiny checkpoint through models/pi05 (names, dims from shapes + config.json,
// streaming) into the native kernels, and makes one device of it.
func loadTiny(t *testing.T, cams, horizon int, prec native.Precision) (*pi05.Policy, *pi05.Device) {
	t.Helper()
	srv, err := pi05.ServerConfigFromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	srv.NumImages, srv.ActionHorizon, srv.Tokenizer = cams, horizon, tinyTokenizer
	p, err := pi05.LoadPolicy(context.Background(), srv, filepath.Join(root, golden.TinyDir),
		pi05native.Builder(pi05native.Options{Precision: prec}), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	d, err := p.NewDevice(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return p, d
}

// The policy must give the reference's actions: the fp32 kernels within 1e-4 of PyTorch's fp32
// run, the bf16 kernels (the F32 checkpoint converted while loading) within 2e-2 of its bf16 run.
func TestPolicyMatchesReference(t *testing.T) {
	cases, err := golden.All(filepath.Join(root, golden.Dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range cases {
		for _, tc := range []struct {
			prec native.Precision
			want []float32
			tol  float64
		}{{native.FP32, g.Actions, 1e-4}, {native.BF16, g.ActionsBF16, 2e-2}} {
			t.Run(g.Name+"/"+string(tc.prec), func(t *testing.T) {
				p, d := loadTiny(t, g.Cams(), g.Horizon, tc.prec)
				if k := p.Kernels(); k.Precision != string(tc.prec) || k.PackedBytes <= 0 {
					t.Errorf("kernels %+v", k)
				}
				res, err := d.Run(context.Background(), &pi05.Prepared{
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

func grayFrame(h, w int, v uint8) pi05.RGB {
	pix := make([]uint8, h*w*3)
	for i := range pix {
		pix[i] = v
	}
	return pi05.RGB{H: h, W: w, Pix: pix}
}

// Real inference on the tiny checkpoint: the same seed gives the same chunk, another seed another.
func TestRunIsDeterministicPerSeed(t *testing.T) {
	p, d := loadTiny(t, 2, 20, native.FP32)
	run := func(seed uint64) [][]float32 {
		in, err := p.Prepare(&pi05.Request{Images: []pi05.RGB{grayFrame(60, 80, 40), grayFrame(56, 56, 200)}, Prompt: "open the drawer", Seed: &seed})
		if err != nil {
			t.Fatal(err)
		}
		res, err := d.Run(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Actions) != 20 || len(res.Actions[0]) != 32 {
			t.Fatalf("actions %dx%d", len(res.Actions), len(res.Actions[0]))
		}
		return res.Actions
	}
	a, b, c := run(3), run(3), run(4)
	if !slices.EqualFunc(a, b, slices.Equal) {
		t.Error("same seed, different actions")
	}
	if slices.EqualFunc(a, c, slices.Equal) {
		t.Error("different seeds, same actions")
	}
}
