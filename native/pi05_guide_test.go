package native

import (
	"math"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/models/pi05/golden"
)

// goldenNamed returns the committed golden case of that name.
func goldenNamed(t *testing.T, name string) golden.Case {
	t.Helper()
	for _, g := range pi05Goldens(t) {
		if g.Name == name {
			return g
		}
	}
	t.Fatalf("golden %s missing", name)
	return golden.Case{}
}

// rowDistance is the RMS distance of rows [0, rows) of two [horizon][ad] chunks.
func rowDistance(a, b []float32, rows, ad int) float64 {
	s := 0.0
	for i := 0; i < rows*ad; i++ {
		d := float64(a[i]) - float64(b[i])
		s += d * d
	}
	return math.Sqrt(s / float64(rows*ad))
}

// Real-time chunking inside the EXPERT loop, on every path: without a guide (or with zero weights)
// the actions are bit-identical to Expert's; with a guide the first d rows move toward the previous
// chunk; the reference and the fast fp32 path agree.
func TestPi05ExpertGuided(t *testing.T) {
	g := goldenNamed(t, "c2_t50_h50_s5")
	ad := tinyDims(t).ActionDim
	const d = 5
	// The previous chunk: a far-off constant, so the pull is unmistakable.
	prev := make([]float32, g.Horizon*ad)
	for i := range prev {
		prev[i] = 0.75
	}
	weights := make([]float32, len(prev))
	for r := 0; r < 10; r++ { // 1 for the first d rows, then down to 0 at row 10 (lerobot's LINEAR)
		w := float32(1)
		if r >= d {
			w = float32(10-r) / float32(10-d+1)
		}
		for c := 0; c < ad; c++ {
			weights[r*ad+c] = w
		}
	}
	guided := map[Precision][]float32{}
	for _, prec := range []Precision{Ref, FP32, BF16} {
		t.Run(string(prec), func(t *testing.T) {
			m := loadTiny(t, prec, "")
			slab, plain := runGolden(t, m, g)
			prog := slab.p
			none, err := prog.ExpertGuided(slab, g.Noise, g.Horizon, g.Steps, nil)
			if err != nil {
				t.Fatal(err)
			}
			zero, err := prog.ExpertGuided(slab, g.Noise, g.Horizon, g.Steps,
				&Pi05Guide{Prev: prev, Weights: make([]float32, len(prev)), MaxGuidance: 10})
			if err != nil {
				t.Fatal(err)
			}
			for i := range plain {
				if math.Float32bits(none[i]) != math.Float32bits(plain[i]) || math.Float32bits(zero[i]) != math.Float32bits(plain[i]) {
					t.Fatalf("value %d: plain %v, no guide %v, zero weights %v: want bit-identical", i, plain[i], none[i], zero[i])
				}
			}
			on, err := prog.ExpertGuided(slab, g.Noise, g.Horizon, g.Steps, &Pi05Guide{Prev: prev, Weights: weights, MaxGuidance: 10})
			if err != nil {
				t.Fatal(err)
			}
			before, after := rowDistance(plain, prev, d, ad), rowDistance(on, prev, d, ad)
			t.Logf("first %d rows: RMS distance to the previous chunk %.4f unguided, %.4f guided", d, before, after)
			if after > 0.5*before {
				t.Errorf("guidance moved the first %d rows from %.4f to %.4f of the previous chunk, want at least halfway", d, before, after)
			}
			tail := g.Horizon - 10 // rows with weight 0 move only through attention to the guided rows
			if dt := rowDistance(on[10*ad:], plain[10*ad:], tail, ad); dt > before {
				t.Errorf("unguided rows moved by %.4f, more than the guided pull %.4f", dt, before)
			}
			guided[prec] = on
		})
	}
	if a, b := guided[Ref], guided[FP32]; a != nil && b != nil {
		if diff := maxAbsDiff(a, b); diff > 1e-4 {
			t.Errorf("guided actions: reference vs fast fp32 differ by %.3g", diff)
		}
	}
}

func TestPi05ExpertGuideErrors(t *testing.T) {
	g := goldenNamed(t, "c2_t50_h50_s5")
	m := loadTiny(t, FP32, "")
	slab, _ := runGolden(t, m, g)
	n := g.Horizon * m.Dims().ActionDim
	bad := make([]float32, n)
	bad[7] = float32(math.NaN())
	for _, tc := range []struct {
		guide *Pi05Guide
		want  string
	}{
		{&Pi05Guide{Prev: make([]float32, n-1), Weights: make([]float32, n), MaxGuidance: 10}, "want"},
		{&Pi05Guide{Prev: bad, Weights: make([]float32, n), MaxGuidance: 10}, "not finite"},
		{&Pi05Guide{Prev: make([]float32, n), Weights: make([]float32, n), MaxGuidance: 0}, "max_guidance"},
	} {
		if _, err := slab.p.ExpertGuided(slab, g.Noise, g.Horizon, g.Steps, tc.guide); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("guide error %v, want %q", err, tc.want)
		}
	}
}

// A saved prefix loaded into a slab of another program of the same model and preset (another
// "device") gives bit-identical actions; a blob of another model's layout is refused by name.
func TestPi05SlabSaveLoad(t *testing.T) {
	g := goldenNamed(t, "c3_mid_masked_t100_h20_s10")
	for _, prec := range []Precision{Ref, BF16} {
		t.Run(string(prec), func(t *testing.T) {
			m := loadTiny(t, prec, "")
			src, want := runGolden(t, m, g)
			blob, err := src.SavePrefix()
			if err != nil {
				t.Fatal(err)
			}
			other := testProgram(t, m, presetFor(g, 1), 1)
			dst := testSlab(t, other)
			if err := dst.LoadPrefix(blob); err != nil {
				t.Fatal(err)
			}
			if dst.PrefixLen() != src.PrefixLen() {
				t.Fatalf("prefix length %d after load, %d saved", dst.PrefixLen(), src.PrefixLen())
			}
			got, err := other.Expert(dst, g.Noise, g.Horizon, g.Steps)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("value %d: %v from the loaded prefix, %v from the computed one", i, got[i], want[i])
				}
			}
			// A slab copy across the two programs (same model, same preset) is bit-identical too; a
			// program of another preset is refused.
			copied := testSlab(t, other)
			if err := copied.CopyFrom(src); err != nil {
				t.Fatal(err)
			}
			if got, err := other.Expert(copied, g.Noise, g.Horizon, g.Steps); err != nil || maxAbsDiff(got, want) != 0 {
				t.Errorf("expert on a slab copied from another program: %v, max |diff| %v", err, maxAbsDiff(got, want))
			}
			wider := presetFor(g, 1)
			wider.TextBucket = 224
			third := testProgram(t, m, wider, 1)
			elsewhere := testSlab(t, third)
			if err := elsewhere.CopyFrom(src); err == nil || !strings.Contains(err.Error(), "preset") {
				t.Errorf("copy into a program of another preset: %v", err)
			}
			// The loaded slab has no image tokens: a PREFIX needs a VISION first.
			if err := other.Prefix(dst, g.Tokens, g.TokMask); err == nil || !strings.Contains(err.Error(), "vision") {
				t.Errorf("prefix after load: %v", err)
			}
			if err := dst.LoadPrefix(blob[:len(blob)-1]); err == nil || !strings.Contains(err.Error(), "bytes") {
				t.Errorf("truncated blob: %v", err)
			}
		})
	}
	// Across precisions the packed layouts differ: refused, naming the field.
	ref := loadTiny(t, Ref, "")
	src, _ := runGolden(t, ref, g)
	blob, err := src.SavePrefix()
	if err != nil {
		t.Fatal(err)
	}
	fast := loadTiny(t, BF16, "")
	prog := testProgram(t, fast, presetFor(g, 1), 1)
	dst := testSlab(t, prog)
	if err := dst.LoadPrefix(blob); err == nil || !strings.Contains(err.Error(), "precision") {
		t.Errorf("reference blob into a bf16 slab: %v", err)
	}
}
