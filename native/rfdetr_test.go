package native

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
)

// Parity of the C program with the PyTorch reference (tools/reference/rfdetr.py)
// on random full-size checkpoints regenerated from the committed spec.

const rfCheckpointSpec = "testdata/rfdetr_checkpoint.json"

func loadRandomRFDETR(t *testing.T, seed uint64, opts RFDETROptions) (*RFDETR, []float32) {
	t.Helper()
	spec, err := ReadRandomCheckpointSpec(rfCheckpointSpec)
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadRFDETRFunc(spec.Lookup(seed), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, RandomTensor(spec.Pixels, seed).Data
}

type rfDetection struct {
	query, label int
	score        float64
	box          [4]float32
}

// rfDetections post-processes like upstream: sigmoid over all 300x91 pairs,
// the 300 best (sorted), kept above threshold.
func rfDetections(logits [][RFDETRClasses]float32, boxes [][4]float32, threshold float64) []rfDetection {
	var all []rfDetection
	for q := range logits {
		for c, l := range logits[q] {
			all = append(all, rfDetection{q, c, 1 / (1 + math.Exp(-float64(l))), boxes[q]})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].score > all[j].score })
	var out []rfDetection
	for _, d := range all[:RFDETRQueries] {
		if d.score > threshold {
			out = append(out, d)
		}
	}
	return out
}

func boxDist(a, b [4]float32) float64 {
	m := 0.0
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

// The best kernels on three seeds, and the AVX2 fallback and the scalar
// reference path (every kernel in plain C) of the whole forward on one.
var rfParityCases = []struct {
	isa   ISA
	seeds []int
}{{ISABest, []int{1, 2, 3}}, {ISAAVX2, []int{1}}, {ISAScalar, []int{1}}}

func TestRFDETRParityFP32(t *testing.T) {
	for _, c := range rfParityCases {
		for _, seed := range c.seeds {
			name := string(c.isa)
			if name == "" {
				name = "best"
			}
			t.Run(fmt.Sprintf("%s/seed%d", name, seed), func(t *testing.T) {
				requireISA(t, c.isa)
				rfParity(t, c.isa, seed)
			})
		}
	}
}

func rfParity(t *testing.T, isa ISA, seed int) {
	g, err := readRFDETRGolden(seed)
	if err != nil {
		t.Fatal(err)
	}
	m, pix := loadRandomRFDETR(t, uint64(seed), RFDETROptions{Precision: FP32, ISA: isa})
	out, err := m.Forward(pix)
	if err != nil {
		t.Fatal(err)
	}
	// Backbone taps and memory: fp32 vs fp32, only summation order differs.
	for name, st := range map[string]RFDETRStage{"tap0": StageTap0, "tap1": StageTap1, "tap2": StageTap2,
		"tap3": StageTap3, "memory": StageMemory} {
		got, err := m.Stage(st)
		if err != nil {
			t.Fatal(err)
		}
		gs := g.Stages[name]
		sub := rfSubsample(got, gs.Stride)
		if len(sub) != len(gs.Values) {
			t.Fatalf("%s: %d subsampled values, golden has %d", name, len(sub), len(gs.Values))
		}
		if e := rfRelL2(sub, gs.Values); e > 1e-4 {
			t.Errorf("%s: relative L2 error %.3g > 1e-4", name, e)
		}
	}
	// Two-stage selection: the same 300 tokens in the same order, except
	// where two encoder scores are so close that fp32 summation order
	// alone swaps them. Then the decoder is compared on the reference's
	// selection (forced), since a swap changes which learned reference
	// point each query gets.
	tk, err := m.Stage(StageTopK)
	if err != nil {
		t.Fatal(err)
	}
	score, err := m.Stage(StageScore)
	if err != nil {
		t.Fatal(err)
	}
	wantTK := g.Stages["topk"].Values
	forced := make([]int, RFDETRQueries)
	swaps := 0
	for q := range tk {
		forced[q] = int(wantTK[q])
		if tk[q] == wantTK[q] {
			continue
		}
		swaps++
		a, b := score[int(tk[q])], score[int(wantTK[q])]
		if math.Abs(float64(a-b)) > 5e-4 {
			t.Errorf("selection slot %d: token %v (score %g), reference token %v (score %g): not a near tie", q, tk[q], a, wantTK[q], b)
		}
	}
	if swaps > 0 {
		t.Logf("%d selection slots differ by near-tied scores; comparing the decoder on the reference's selection", swaps)
		if err := m.ForceSelection(forced); err != nil {
			t.Fatal(err)
		}
		if out, err = m.Forward(pix); err != nil {
			t.Fatal(err)
		}
	}
	// Queries matched by box: every reference query must have a C query
	// with the same box (2e-3) and logits (0.05).
	gl, gb := g.Stages["logits"].Values, g.Stages["boxes"].Values
	wantLogits := make([][RFDETRClasses]float32, RFDETRQueries)
	wantBoxes := make([][4]float32, RFDETRQueries)
	for q := 0; q < RFDETRQueries; q++ {
		copy(wantLogits[q][:], gl[q*RFDETRClasses:])
		copy(wantBoxes[q][:], gb[q*4:])
	}
	worstBox, worstLogit := 0.0, 0.0
	for q := 0; q < RFDETRQueries; q++ {
		best, bestD := -1, math.Inf(1)
		for j := 0; j < RFDETRQueries; j++ {
			if d := boxDist(out.Boxes[j], wantBoxes[q]); d < bestD {
				best, bestD = j, d
			}
		}
		worstBox = math.Max(worstBox, bestD)
		if bestD > 2e-3 {
			t.Errorf("reference query %d (box %v): nearest C box %v differs by %.3g > 2e-3", q, wantBoxes[q], out.Boxes[best], bestD)
			continue
		}
		for c := 0; c < RFDETRClasses; c++ {
			d := math.Abs(float64(out.Logits[best][c] - wantLogits[q][c]))
			worstLogit = math.Max(worstLogit, d)
			if d > 0.05 {
				t.Errorf("query %d class %d: logit %g, reference %g", q, c, out.Logits[best][c], wantLogits[q][c])
			}
		}
	}
	// Same detections above 0.5.
	want := rfDetections(wantLogits, wantBoxes, 0.5)
	got := rfDetections(out.Logits[:], out.Boxes[:], 0.5)
	if len(got) != len(want) {
		t.Errorf("%d detections above 0.5, reference has %d", len(got), len(want))
	}
	var missing []string
	for _, w := range want {
		found := false
		for _, d := range got {
			if d.label == w.label && boxDist(d.box, w.box) <= 2e-3 {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, fmt.Sprintf("label %d score %.3f box %v", w.label, w.score, w.box))
		}
	}
	if len(missing) > 0 {
		t.Errorf("reference detections not found: %s", strings.Join(missing, "; "))
	}
	if len(want) == 0 {
		t.Errorf("the reference has no detection above 0.5: the golden cannot check detections")
	}
	t.Logf("%d detections; worst matched box diff %.3g, logit diff %.3g", len(want), worstBox, worstLogit)
}

// The bf16 program against the fp32 one, stage by stage: on a random network
// the two-stage top-k amplifies rounding, so final outputs are not comparable.
func TestRFDETRBF16Stages(t *testing.T) {
	ref, pix := loadRandomRFDETR(t, 1, RFDETROptions{Precision: FP32})
	bf, _ := loadRandomRFDETR(t, 1, RFDETROptions{Precision: BF16})
	if _, err := ref.Forward(pix); err != nil {
		t.Fatal(err)
	}
	if _, err := bf.Forward(pix); err != nil {
		t.Fatal(err)
	}
	for _, st := range []RFDETRStage{StageTap0, StageTap1, StageTap2, StageTap3, StageMemory} {
		want, err := ref.Stage(st)
		if err != nil {
			t.Fatal(err)
		}
		got, err := bf.Stage(st)
		if err != nil {
			t.Fatal(err)
		}
		e := rfRelL2(got, want)
		t.Logf("stage %d: bf16 relative L2 error %.3g", st, e)
		if e > 2e-2 {
			t.Errorf("stage %d: bf16 relative L2 error %.3g > 2e-2", st, e)
		}
		if e == 0 {
			t.Errorf("stage %d: bf16 equals fp32 exactly: the bf16 path did not run", st)
		}
	}
	// The decoder on the same queries: both programs decode fp32's selection.
	tk, err := ref.Stage(StageTopK)
	if err != nil {
		t.Fatal(err)
	}
	sel := make([]int, len(tk))
	for i, v := range tk {
		sel[i] = int(v)
	}
	if err := bf.ForceSelection(sel); err != nil {
		t.Fatal(err)
	}
	if _, err := bf.Forward(pix); err != nil {
		t.Fatal(err)
	}
	want, _ := ref.Stage(StageHS)
	got, _ := bf.Stage(StageHS)
	e := rfRelL2(got, want)
	t.Logf("decoder output on the same selection: bf16 relative L2 error %.3g", e)
	if e > 5e-2 {
		t.Errorf("decoder output on the same selection: bf16 relative L2 error %.3g > 5e-2", e)
	}
}

func TestLoadRFDETRReportsBadTensors(t *testing.T) {
	spec, err := ReadRandomCheckpointSpec(rfCheckpointSpec)
	if err != nil {
		t.Fatal(err)
	}
	lookup := spec.Lookup(1)
	const missing = "transformer.decoder.layers.1.linear1.weight"
	const bad = "backbone.0.encoder.encoder.encoder.layer.3.mlp.fc2.weight"
	_, err = LoadRFDETRFunc(func(name string) (Tensor, bool) {
		switch name {
		case missing:
			return Tensor{}, false
		case bad:
			return Tensor{Shape: []int{384, 1535}, Data: make([]float32, 384*1535)}, true
		}
		return lookup(name)
	}, RFDETROptions{Threads: 1})
	if err == nil {
		t.Fatal("want an error for a missing and a mis-shaped tensor")
	}
	for _, want := range []string{missing + ": missing (want shape [2048 256])", bad + ": shape [384 1535], want [384 1536]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestRFDETRForwardRejectsBadInput(t *testing.T) {
	m, _ := loadRandomRFDETR(t, 2, RFDETROptions{Threads: 1})
	if _, err := m.Forward(make([]float32, 10)); err == nil {
		t.Fatal("want an error for 10 pixels")
	}
	pix := make([]float32, 3*560*560)
	if err := m.ForwardInto(pix, make([]float32, 300*91), make([]float32, 3)); err == nil {
		t.Fatal("want an error for a 3-value box buffer")
	}
	// ForwardInto and Forward agree.
	out, err := m.Forward(pix)
	if err != nil {
		t.Fatal(err)
	}
	logits, boxes := make([]float32, 300*91), make([]float32, 300*4)
	if err := m.ForwardInto(pix, logits, boxes); err != nil {
		t.Fatal(err)
	}
	if logits[5*91+7] != out.Logits[5][7] || boxes[299*4+3] != out.Boxes[299][3] {
		t.Fatal("ForwardInto and Forward disagree")
	}
	m.Close()
	if _, err := m.Forward(make([]float32, 3*560*560)); err == nil {
		t.Fatal("want an error after Close")
	}
}

func TestParsePrecision(t *testing.T) {
	for _, c := range []struct {
		value string
		want  Precision
		ok    bool
	}{{"", FP32, true}, {"fp32", FP32, true}, {"bf16", BF16, true}, {"ref", "", false}, {"fp16", "", false}} {
		got, err := ParsePrecision("RFDETR_PRECISION", c.value, FP32, FP32, BF16)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("RFDETR_PRECISION=%q: got %q, %v", c.value, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), "RFDETR_PRECISION") {
			t.Errorf("error %q does not name the variable", err)
		}
	}
}

func TestParseISA(t *testing.T) {
	if _, err := ParseISA("avx9"); err == nil || !strings.Contains(err.Error(), "avx9") {
		t.Errorf("ParseISA(avx9) = %v, want an error naming it", err)
	}
	if isa, err := ParseISA("scalar"); err != nil || isa != ISAScalar {
		t.Errorf("ParseISA(scalar) = %q, %v", isa, err)
	}
	if !DetectCPU().AVX512BF16 {
		if _, err := ParseISA("avx512bf16"); err == nil || !strings.Contains(err.Error(), "not supported by this CPU") {
			t.Errorf("ParseISA(avx512bf16) on a CPU without it = %v, want 'not supported by this CPU'", err)
		}
	}
}

// Loading by name: a BF16 tensor is widened (the same program as from its F32 values), names the
// program does not use are ignored, a wrong shape is named with both shapes, and a projection a
// LayerScale is folded into cannot be set before it.
func TestRFDETRSetTensorByName(t *testing.T) {
	spec, err := ReadRandomCheckpointSpec(rfCheckpointSpec)
	if err != nil {
		t.Fatal(err)
	}
	lookup := spec.Lookup(1)
	m, err := NewRFDETR(RFDETROptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if used, err := m.SetTensor("mask_token", DTypeF32, []int{1}, F32Bytes([]float32{0})); used || err != nil {
		t.Errorf("an unused name: used %v, err %v; want ignored", used, err)
	}
	const dense = "backbone.0.encoder.encoder.encoder.layer.0.attention.output.dense.weight"
	d, _ := lookup(dense)
	if _, err := m.SetTensor(dense, DTypeF32, d.Shape, F32Bytes(d.Data)); err == nil || !strings.Contains(err.Error(), "layer_scale1") {
		t.Errorf("dense before its LayerScale: %v, want an error naming the LayerScale", err)
	}
	const fc1 = "backbone.0.encoder.encoder.encoder.layer.0.mlp.fc1.weight"
	if _, err := m.SetTensor(fc1, DTypeF32, []int{1536, 383}, make([]byte, 4*1536*383)); err == nil ||
		!strings.Contains(err.Error(), "shape [1536 383], want [1536 384]") {
		t.Errorf("a mis-shaped tensor: %v, want both shapes named", err)
	}
	if err := m.Ready(); err == nil {
		t.Error("Ready with no weights set: want an error naming the first missing weight")
	}
	// Every weight as BF16 bytes gives the same program as their bf16-rounded F32 values.
	rounded, err := NewRFDETR(RFDETROptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rounded.Close()
	for _, w := range RFDETRWeights() {
		v, _ := lookup(w.Name)
		half := make([]byte, 2*len(v.Data))
		back := make([]float32, len(v.Data))
		for i, x := range v.Data {
			h := uint16(math.Float32bits(x) >> 16)
			half[2*i], half[2*i+1] = byte(h), byte(h>>8)
			back[i] = math.Float32frombits(uint32(h) << 16)
		}
		if _, err := m.SetTensor(w.Name, DTypeBF16, v.Shape, half); err != nil {
			t.Fatal(err)
		}
		if _, err := rounded.SetTensor(w.Name, DTypeF32, v.Shape, F32Bytes(back)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*RFDETR{m, rounded} {
		if err := p.Ready(); err != nil {
			t.Fatal(err)
		}
	}
	pix := RandomTensor(spec.Pixels, 1).Data
	a, err := m.Forward(pix)
	if err != nil {
		t.Fatal(err)
	}
	b, err := rounded.Forward(pix)
	if err != nil {
		t.Fatal(err)
	}
	if a.Logits != b.Logits || a.Boxes != b.Boxes {
		t.Error("a program loaded from BF16 bytes differs from one loaded from the same values as F32")
	}
}

// BenchmarkRFDETRForward times one forward per precision with the default
// thread count (make bench-rfdetr gives the full table against the peaks
// and PyTorch).
func BenchmarkRFDETRForward(b *testing.B) {
	spec, err := ReadRandomCheckpointSpec(rfCheckpointSpec)
	if err != nil {
		b.Fatal(err)
	}
	pix := RandomTensor(spec.Pixels, 1).Data
	for _, p := range []Precision{FP32, BF16} {
		b.Run(string(p), func(b *testing.B) {
			m, err := LoadRFDETRFunc(spec.Lookup(1), RFDETROptions{Precision: p})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			if _, err := m.Forward(pix); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := m.Forward(pix); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(m.LastTiming().Flops*1e-9*float64(b.N)/b.Elapsed().Seconds(), "GFLOP/s")
		})
	}
}
