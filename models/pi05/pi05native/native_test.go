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
	d, err := p.NewDevice(2, 1, 1)
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

// sameBits fails at the first value where two action chunks differ in any bit.
func sameBits(t *testing.T, a, b [][]float32) {
	t.Helper()
	for r := range a {
		for c := range a[r] {
			if math.Float32bits(a[r][c]) != math.Float32bits(b[r][c]) {
				t.Fatalf("action [%d][%d]: %v vs %v, want bit-identical", r, c, a[r][c], b[r][c])
			}
		}
	}
}

func cacheRequest(salt uint8, prompt string) *pi05.Request {
	pix := make([]uint8, 30*40*3)
	for i := range pix {
		pix[i] = uint8(i*7) + salt
	}
	seed := uint64(5)
	return &pi05.Request{Images: []pi05.RGB{{H: 30, W: 40, Pix: pix}}, Prompt: prompt, State: []float32{0.2, -0.4}, Seed: &seed, PrefixCache: true}
}

func run(t *testing.T, p *pi05.Policy, d *pi05.Device, req *pi05.Request) *pi05.Result {
	t.Helper()
	in, err := p.Prepare(req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A prefix-cache hit gives the miss's actions bit for bit, on the reference and the bf16 paths, also
// on another device (program) of the same kernels; a different frame or prompt is a miss; a request
// may opt out.
func TestPrefixCacheHitEqualsMiss(t *testing.T) {
	for _, prec := range []native.Precision{native.Ref, native.BF16} {
		t.Run(string(prec), func(t *testing.T) {
			p, d := loadTiny(t, 2, 10, prec)
			p.Cache = pi05.NewPrefixCache(64 << 20)
			other, err := p.NewDevice(1, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			miss := run(t, p, d, cacheRequest(0, "pick"))
			hit := run(t, p, d, cacheRequest(0, "pick"))
			elsewhere := run(t, p, other, cacheRequest(0, "pick"))
			if miss.PrefixCacheHit || !hit.PrefixCacheHit || !elsewhere.PrefixCacheHit {
				t.Fatalf("hits: first %v, second %v, on another device %v", miss.PrefixCacheHit, hit.PrefixCacheHit, elsewhere.PrefixCacheHit)
			}
			sameBits(t, miss.Actions, hit.Actions)
			sameBits(t, miss.Actions, elsewhere.Actions)
			if hit.Timing.Vision != 0 {
				t.Errorf("a hit ran VISION for %v", hit.Timing.Vision)
			}
			for _, req := range []*pi05.Request{cacheRequest(1, "pick"), cacheRequest(0, "place")} {
				if run(t, p, d, req).PrefixCacheHit {
					t.Error("a different frame or prompt hit the cache")
				}
			}
			off := cacheRequest(0, "pick")
			off.PrefixCache = false
			if run(t, p, d, off).PrefixCacheHit {
				t.Error("a request that opted out hit the cache")
			}
			s := p.Cache.Stats()
			if s.Hits != 2 || s.Misses != 3 || s.Entries != 3 || s.Bytes <= 0 {
				t.Errorf("stats %+v, want 2 hits, 3 misses, 3 entries", s)
			}
		})
	}
}

// Without RTC a request's actions are what they were; with it the first d rows move toward the
// previous chunk (measured: the squared distance over those rows).
func TestRTCThroughDevice(t *testing.T) {
	p, d := loadTiny(t, 2, 10, native.BF16)
	base := run(t, p, d, cacheRequest(3, "stack"))
	const delay = 3
	prev := make([]float32, 10*32)
	for i := range prev {
		prev[i] = 0.5
	}
	req := cacheRequest(3, "stack")
	req.RTC = &pi05.RTC{Prev: prev, PrevRows: 10, PrevCols: 32, InferenceDelay: delay, ExecutionHorizon: 6}
	guided := run(t, p, d, req)
	dist := func(a [][]float32) float64 {
		s := 0.0
		for r := range delay {
			for c := range a[r] {
				x := float64(a[r][c] - 0.5)
				s += x * x
			}
		}
		return s
	}
	if b, g := dist(base.Actions), dist(guided.Actions); g > 0.25*b {
		t.Errorf("squared distance of the first %d rows to the previous chunk: %.4f unguided, %.4f guided", delay, b, g)
	} else {
		t.Logf("squared distance of the first %d rows to the previous chunk: %.4f unguided, %.4f guided", delay, b, g)
	}
	sameBits(t, base.Actions, run(t, p, d, cacheRequest(3, "stack")).Actions)
}
