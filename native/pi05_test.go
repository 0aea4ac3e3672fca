package native

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/testenv"

	"github.com/ttmodel/tt-model/models/pi05/arch"
	"github.com/ttmodel/tt-model/models/pi05/golden"
	"github.com/ttmodel/tt-model/models/safetensors"
)

// The goldens come from tools/reference/pi05.py (PyTorch, from the spec) on a tiny random
// checkpoint with the real lerobot tensor names: `pi05.py goldens --out kernels/pi05/testdata`.
const pi05Testdata = "../" + golden.Dir

func pi05Goldens(t *testing.T) []golden.Case {
	t.Helper()
	cases, err := golden.All(pi05Testdata)
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

func readGolden(t *testing.T, path string) golden.Case {
	t.Helper()
	c, err := golden.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tinyDims reads the tiny checkpoint's config.json (HF key names) over the defaults, as models/pi05
// does for a real one. (Depths come from config.json here; a loader takes them from the tensors.)
func tinyDims(t *testing.T) arch.Dims {
	t.Helper()
	return configDims(t, filepath.Join(pi05Testdata, "tiny", "config.json"))
}

// configDims reads the sub-configs of a config.json written by tools/reference/pi05.py.
func configDims(t *testing.T, path string) arch.Dims {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type sub struct {
		Hidden    int     `json:"hidden_size"`
		Layers    int     `json:"num_hidden_layers"`
		Heads     int     `json:"num_attention_heads"`
		KV        int     `json:"num_key_value_heads"`
		HeadDim   int     `json:"head_dim"`
		MLP       int     `json:"intermediate_size"`
		Vocab     int     `json:"vocab_size"`
		Patch     int     `json:"patch_size"`
		Image     int     `json:"image_size"`
		LNEps     float64 `json:"layer_norm_eps"`
		RMSEps    float64 `json:"rms_norm_eps"`
		RopeTheta float64 `json:"rope_theta"`
	}
	var c struct {
		Vision    sub     `json:"vision_config"`
		Text      sub     `json:"text_config"`
		Expert    sub     `json:"expert_config"`
		MinPeriod float64 `json:"min_period"`
		MaxPeriod float64 `json:"max_period"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	d := Pi05DefaultDims()
	d.Image, d.Patch = c.Vision.Image, c.Vision.Patch
	d.VWidth, d.VLayers, d.VHeads, d.VMLP, d.VEps =
		c.Vision.Hidden, c.Vision.Layers, c.Vision.Heads, c.Vision.MLP, c.Vision.LNEps
	d.LWidth, d.LLayers, d.LHeads, d.KVHeads, d.HeadDim, d.LMLP, d.Vocab, d.LEps, d.RopeTheta =
		c.Text.Hidden, c.Text.Layers, c.Text.Heads, c.Text.KV, c.Text.HeadDim, c.Text.MLP, c.Text.Vocab,
		c.Text.RMSEps, c.Text.RopeTheta
	d.EWidth, d.EHeads, d.EMLP, d.EEps = c.Expert.Hidden, c.Expert.Heads, c.Expert.MLP, c.Expert.RMSEps
	d.MinPeriod, d.MaxPeriod = c.MinPeriod, c.MaxPeriod
	return d
}

func loadTiny(t *testing.T, prec Precision, isa ISA) *Pi05Model {
	t.Helper()
	return loadTinyFrom(t, prec, isa, false, 1)
}

// loadTinyFrom sets the tiny checkpoint's tensors in name order (or reversed) from `workers`
// goroutines at once.
func loadTinyFrom(t *testing.T, prec Precision, isa ISA, reverse bool, workers int) *Pi05Model {
	t.Helper()
	m, err := NewPi05Model(tinyDims(t), prec, isa)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	f, err := safetensors.Open(filepath.Join(pi05Testdata, "tiny", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := f.Names()
	if reverse {
		slices.Reverse(names)
	}
	work := make(chan string)
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range work {
				info, _ := f.Info(name)
				raw, err := f.Bytes(name)
				used := false
				if err == nil {
					used, err = m.SetTensor(name, DType(info.DType), info.Shape, raw)
				}
				// the prefix's final norm is never needed: only its per-layer K/V leave the prefix
				if err == nil && !used && name != "paligemma_with_expert.paligemma.model.language_model.norm.weight" {
					err = fmt.Errorf("tensor %s of the tiny checkpoint was not used", name)
				}
				errs <- err
			}
		}()
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Ready(); err != nil {
		t.Fatal(err)
	}
	return m
}

func presetFor(g golden.Case, batch int) arch.Preset {
	rows := 64
	if g.Horizon <= 32 {
		rows = 32
	}
	return arch.Preset{Cams: len(g.CamMask), TextBucket: len(g.Tokens), ActionRows: rows, MaxBatch: batch}
}

func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if d > m || math.IsNaN(d) {
			m = d
			if math.IsNaN(d) {
				return math.Inf(1)
			}
		}
	}
	return m
}

// runGolden runs the three stages on a fresh program and slab of g's preset.
func runGolden(t *testing.T, m *Pi05Model, g golden.Case) (*Pi05Slab, []float32) {
	t.Helper()
	return runGoldenPlanned(t, m, g, "")
}

// runGoldenPlanned is runGolden on a program given the GEMM plan ("" keeps the derived one).
func runGoldenPlanned(t *testing.T, m *Pi05Model, g golden.Case, plan string) (*Pi05Slab, []float32) {
	t.Helper()
	prog := testProgram(t, m, presetFor(g, 1), 2)
	if plan != "" {
		if err := prog.SetPlan(plan); err != nil {
			t.Fatal(err)
		}
		if got := prog.Plan(); got != plan {
			t.Fatalf("plan %q reads back as %q", plan, got)
		}
	}
	slab := testSlab(t, prog)
	if err := prog.Vision(slab, g.Images, g.CamMask); err != nil {
		t.Fatal(err)
	}
	if err := prog.Prefix(slab, g.Tokens, g.TokMask); err != nil {
		t.Fatal(err)
	}
	act, err := prog.Expert(slab, g.Noise, g.Horizon, g.Steps)
	if err != nil {
		t.Fatal(err)
	}
	return slab, act
}

// checkStages compares the image tokens, every layer's K/V and the actions with the fp32 reference.
func checkStages(t *testing.T, m *Pi05Model, g golden.Case, slab *Pi05Slab, act []float32, tol float64) {
	t.Helper()
	img, _, err := slab.ImageTokens()
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(img, g.ImageTokens); d > tol {
		t.Errorf("image tokens: max |diff| %.3g > %.g", d, tol)
	}
	if slab.PrefixLen() != g.PrefixLen {
		t.Fatalf("prefix length %d, reference %d", slab.PrefixLen(), g.PrefixLen)
	}
	d := m.Dims()
	per := d.KVHeads * g.PrefixLen * d.HeadDim
	for l := 0; l < d.LLayers; l++ {
		k, v, err := slab.KV(l)
		if err != nil {
			t.Fatal(err)
		}
		if dk, dv := maxAbsDiff(k, g.PK[l*per:(l+1)*per]), maxAbsDiff(v, g.PV[l*per:(l+1)*per]); dk > tol || dv > tol {
			t.Errorf("layer %d K/V: max |diff| %.3g / %.3g > %.g", l, dk, dv, tol)
		}
	}
	if dd := maxAbsDiff(act, g.Actions); dd > tol {
		t.Errorf("actions: max |diff| %.3g > %.g", dd, tol)
	} else {
		t.Logf("actions: max |diff| %.3g vs the fp32 reference", dd)
	}
}

// The scalar fp32 reference path and the fast fp32 path of each kernel family (AVX-512, AVX2,
// scalar) against the PyTorch fp32 run: 1e-4. A family this CPU cannot run is a visible skip.
func TestPi05ParityFP32(t *testing.T) {
	goldens := pi05Goldens(t)
	for _, pth := range []struct {
		prec Precision
		isa  ISA
	}{{Ref, ISABest}, {FP32, ISAAVX512}, {FP32, ISAAVX2}, {FP32, ISAScalar}} {
		name := string(pth.prec)
		if pth.isa != ISABest {
			name += "-" + string(pth.isa)
		}
		t.Run(name, func(t *testing.T) {
			requireISA(t, pth.isa)
			m := loadTiny(t, pth.prec, pth.isa)
			for _, g := range goldens {
				t.Run(g.Name, func(t *testing.T) {
					slab, act := runGolden(t, m, g)
					checkStages(t, m, g, slab, act, 1e-4)
				})
			}
		})
	}
}

// The bf16 fast path of each kernel family (AMX-BF16, AVX-512 BF16, AVX-512, AVX2, scalar) against the
// PyTorch bf16 run: 2e-2. A family this CPU cannot run is a visible skip.
func TestPi05ParityBF16(t *testing.T) {
	goldens := pi05Goldens(t)
	for _, isa := range []ISA{ISAAMXBF16, ISAAVX512BF16, ISAAVX512, ISAAVX2, ISAScalar} {
		t.Run(string(isa), func(t *testing.T) {
			requireISA(t, isa)
			m := loadTiny(t, BF16, isa)
			for _, g := range goldens {
				t.Run(g.Name, func(t *testing.T) {
					_, act := runGolden(t, m, g)
					if d := maxAbsDiff(act, g.ActionsBF16); d > 2e-2 {
						t.Errorf("actions: max |diff| %.3g > 2e-2 vs the bf16 reference", d)
					} else {
						t.Logf("actions: max |diff| %.3g vs the bf16 reference, %.3g vs fp32", d, maxAbsDiff(act, g.Actions))
					}
				})
			}
		})
	}
}

// Batched EXPERT: up to eight requests with their own slabs (different images, prompts, noise) in
// one call equal the single-request calls bit for bit, for every batch size 1..8, packed (the rows of
// all requests stacked into each linear's GEMM, every weight read once per step) and per request
// (pack=false, PI05_EXPERT_PACK=0), on the reference and on every kernel family this CPU runs. The
// horizon (50 rows) is no multiple of a row group (12 rows, 32 on AMX), so groups straddle requests.
func TestPi05ExpertBatch(t *testing.T) {
	var base golden.Case
	for _, g := range pi05Goldens(t) {
		if g.Name == "c2_t50_h50_s5" {
			base = g
		}
	}
	if base.Name == "" {
		t.Fatal("golden c2_t50_h50_s5 missing")
	}
	const maxNB = arch.MaxBatch
	for _, pth := range []struct {
		prec Precision
		isa  ISA
	}{
		{Ref, ISABest},
		{BF16, ISAAMXBF16}, {BF16, ISAAVX512BF16}, {BF16, ISAAVX512}, {BF16, ISAAVX2}, {BF16, ISAScalar},
		{FP32, ISAAVX512}, {FP32, ISAAVX2}, {FP32, ISAScalar},
	} {
		name := string(pth.prec)
		if pth.isa != ISABest {
			name += "-" + string(pth.isa)
		}
		t.Run(name, func(t *testing.T) {
			requireISA(t, pth.isa)
			m := loadTiny(t, pth.prec, pth.isa)
			prog := testProgram(t, m, presetFor(base, maxNB), 2)
			var slabs []*Pi05Slab
			var noise []float32
			for r := range maxNB {
				s := testSlab(t, prog)
				img := append([]float32(nil), base.Images...)
				for i := range img {
					img[i] *= 1 - 0.1*float32(r)
				}
				tok, mask := append([]int32(nil), base.Tokens...), append([]bool(nil), base.TokMask...)
				for i := 0; i < 3*r; i++ { // request r drops its last 3r real tokens: its own prefix length
					mask[30-i] = false
				}
				if err := prog.Vision(s, img, base.CamMask); err != nil {
					t.Fatal(err)
				}
				if err := prog.Prefix(s, tok, mask); err != nil {
					t.Fatal(err)
				}
				slabs = append(slabs, s)
				for _, v := range base.Noise {
					noise = append(noise, v*(1+0.1*float32(r)))
				}
			}
			per := base.Horizon * m.Dims().ActionDim
			const steps = 2 // each step runs the same code; two keep the scalar families quick
			var single []float32
			for r, s := range slabs {
				a, err := prog.Expert(s, noise[r*per:(r+1)*per], base.Horizon, steps)
				if err != nil {
					t.Fatal(err)
				}
				single = append(single, a...)
			}
			if maxAbsDiff(single[:per], single[per:2*per]) == 0 {
				t.Fatal("requests 0 and 1 gave the same actions: the test inputs do not differ")
			}
			for nb := 1; nb <= maxNB; nb++ {
				for _, pack := range []bool{true, false} {
					got, err := prog.ExpertBatch(slabs[:nb], noise[:nb*per], base.Horizon, steps, pack)
					if err != nil {
						t.Fatal(err)
					}
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(single[i]) {
							t.Fatalf("nb=%d pack=%v: action %d (request %d) is %v, single request %v", nb, pack, i, i/per, got[i], single[i])
						}
					}
				}
			}
			// a copied slab gives the same actions as its source
			cp := testSlab(t, prog)
			if err := cp.CopyFrom(slabs[1]); err != nil {
				t.Fatal(err)
			}
			if a, err := prog.Expert(cp, noise[per:2*per], base.Horizon, steps); err != nil || maxAbsDiff(a, single[per:2*per]) != 0 {
				t.Fatalf("copied slab: err %v, max |diff| %.3g", err, maxAbsDiff(a, single[per:2*per]))
			}
		})
	}
}

func TestPi05Errors(t *testing.T) {
	d := tinyDims(t)
	m, err := NewPi05Model(d, BF16, ISABest)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const q = "paligemma_with_expert.paligemma.model.language_model.layers.1.self_attn.q_proj.weight"
	if _, err := m.SetF32(q, []int{3, 64}, make([]float32, 192)); err == nil || !strings.Contains(err.Error(), q) ||
		!strings.Contains(err.Error(), "[128, 64]") {
		t.Errorf("mis-shaped tensor: %v, want its name and the wanted shape", err)
	}
	if used, err := m.SetF32("paligemma_with_expert.gemma_expert.lm_head.weight", []int{2}, make([]float32, 2)); used || err != nil {
		t.Errorf("unknown tensor: used=%v err=%v, want ignored", used, err)
	}
	if err := m.Ready(); err == nil || !strings.Contains(err.Error(), "embeddings.patch_embedding.weight") {
		t.Errorf("Ready on an empty model: %v, want the missing names", err)
	}
	if _, err := m.NewProgram(arch.Preset{Cams: 2, TextBucket: 64, ActionRows: 64, MaxBatch: 1}, 1); err == nil {
		t.Error("a program of an incomplete model was created")
	}
	if Pi05PresetValid(arch.Preset{Cams: 2, TextBucket: 192, ActionRows: 64, MaxBatch: 1}) {
		t.Error("bucket 192 is for one camera only")
	}
	if !Pi05PresetValid(arch.Preset{Cams: 4, TextBucket: 96, ActionRows: 32, MaxBatch: 8}) {
		t.Error("c4 bucket 96 is a preset")
	}

	tiny := loadTiny(t, BF16, ISABest)
	if _, err := tiny.NewProgram(arch.Preset{Cams: 5, TextBucket: 64, ActionRows: 64, MaxBatch: 1}, 1); err == nil {
		t.Error("5 cameras accepted")
	}
	prog := testProgram(t, tiny, arch.Preset{Cams: 1, TextBucket: 32, ActionRows: 32, MaxBatch: 2}, 1)
	s := testSlab(t, prog)
	img := make([]float32, 3*d.Image*d.Image)
	noise := make([]float32, 32*d.ActionDim)
	if err := prog.Prefix(s, []int32{2}, []bool{true}); err == nil {
		t.Error("prefix before vision accepted")
	}
	if _, err := prog.Expert(s, noise, 32, 10); err == nil {
		t.Error("expert before prefix accepted")
	}
	if err := prog.Vision(s, img[:10], []bool{true}); err == nil {
		t.Error("short image accepted")
	}
	if err := prog.Vision(s, img, []bool{true}); err != nil {
		t.Fatal(err)
	}
	if err := prog.Prefix(s, make([]int32, 33), make([]bool, 33)); err == nil || !strings.Contains(err.Error(), "bucket") {
		t.Errorf("33 tokens in a 32 bucket: %v", err)
	}
	if err := prog.Prefix(s, []int32{2, 512}, []bool{true, true}); err == nil || !strings.Contains(err.Error(), "vocabulary") {
		t.Errorf("token id 512 of a 512 vocabulary: %v", err)
	}
	if err := prog.Prefix(s, []int32{2, 511}, []bool{true, true}); err != nil {
		t.Fatal(err)
	}
	if _, err := prog.Expert(s, make([]float32, 33*d.ActionDim), 33, 10); err == nil {
		t.Error("horizon 33 in a 32-row program accepted")
	}
	if _, err := prog.Expert(s, noise, 32, 0); err == nil {
		t.Error("0 steps accepted")
	}
	bad := append([]float32(nil), noise...)
	bad[7] = float32(math.NaN())
	if _, err := prog.Expert(s, bad, 32, 10); err == nil || !strings.Contains(err.Error(), "noise[7]") {
		t.Errorf("NaN noise: %v", err)
	}
	if _, err := prog.ExpertBatch([]*Pi05Slab{s, s, s}, make([]float32, 3*32*d.ActionDim), 32, 10, true); err == nil {
		t.Error("batch of 3 in a program of 2 accepted")
	}
	other := testProgram(t, tiny, arch.Preset{Cams: 1, TextBucket: 32, ActionRows: 32, MaxBatch: 1}, 1)
	if _, err := other.Expert(s, noise, 32, 10); err == nil {
		t.Error("a slab of another program accepted")
	}
	// after all the refusals the program still works
	if _, err := prog.Expert(s, noise, 32, 10); err != nil {
		t.Fatal(err)
	}
}

// Checkpoints may be BF16 (decoded by the kernels) and F32 tensors may sit at any byte offset of a
// file: a BF16 checkpoint gives exactly what its values given as F32 give, and misaligned F32 data
// loads like aligned data.
func TestPi05CheckpointDTypes(t *testing.T) {
	f, err := safetensors.Open(filepath.Join(pi05Testdata, "tiny", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var g golden.Case
	for _, c := range pi05Goldens(t) {
		if c.Name == "c3_mid_masked_t100_h20_s10" {
			g = c
		}
	}
	load := func(prec Precision, set func(m *Pi05Model, name string, shape []int, vals []float32) error) []float32 {
		m, err := NewPi05Model(tinyDims(t), prec, "")
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		for _, name := range f.Names() {
			info, _ := f.Info(name)
			vals, err := f.Float32(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := set(m, name, info.Shape, vals); err != nil {
				t.Fatal(err)
			}
		}
		_, act := runGolden(t, m, g)
		return act
	}
	fromBF16 := load(Ref, func(m *Pi05Model, name string, shape []int, vals []float32) error {
		raw := make([]byte, 2*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint16(raw[2*i:], safetensors.Float32ToBF16(v))
		}
		_, err := m.SetTensor(name, DTypeBF16, shape, raw)
		return err
	})
	fromRounded := load(Ref, func(m *Pi05Model, name string, shape []int, vals []float32) error {
		r := make([]float32, len(vals))
		for i, v := range vals {
			r[i] = math.Float32frombits(uint32(safetensors.Float32ToBF16(v)) << 16)
		}
		_, err := m.SetF32(name, shape, r)
		return err
	})
	for i := range fromBF16 {
		if math.Float32bits(fromBF16[i]) != math.Float32bits(fromRounded[i]) {
			t.Fatalf("BF16 checkpoint: action %d is %v, the same values as F32 give %v", i, fromBF16[i], fromRounded[i])
		}
	}
	misaligned := load(FP32, func(m *Pi05Model, name string, shape []int, vals []float32) error {
		buf := make([]byte, 4*len(vals)+1)
		for i, v := range vals {
			binary.LittleEndian.PutUint32(buf[1+4*i:], math.Float32bits(v))
		}
		_, err := m.SetTensor(name, DTypeF32, shape, buf[1:])
		return err
	})
	if d := maxAbsDiff(misaligned, g.Actions); d > 1e-4 {
		t.Errorf("misaligned F32 checkpoint (fast fp32 path, packed in place): max |diff| %.3g from the reference", d)
	}
}

// A program keeps the adaRMS modulations of the last step count: changing the count between calls
// must give what a fresh program gives.
func TestPi05StepCountChanges(t *testing.T) {
	var g golden.Case
	for _, c := range pi05Goldens(t) {
		if c.Name == "c1_t20_h50_s10" {
			g = c
		}
	}
	m := loadTiny(t, BF16, ISABest)
	slab, ten := runGolden(t, m, g) // 10 steps on a fresh program
	prog := slab.p
	five, err := prog.Expert(slab, g.Noise, g.Horizon, 5)
	if err != nil {
		t.Fatal(err)
	}
	again, err := prog.Expert(slab, g.Noise, g.Horizon, 10)
	if err != nil {
		t.Fatal(err)
	}
	if maxAbsDiff(again, ten) != 0 {
		t.Errorf("10 steps after 5: max |diff| %.3g from the first 10-step call", maxAbsDiff(again, ten))
	}
	g5 := g
	g5.Steps = 5
	_, fresh5 := runGolden(t, m, g5)
	if maxAbsDiff(five, fresh5) != 0 {
		t.Errorf("5 steps after 10: max |diff| %.3g from a fresh program", maxAbsDiff(five, fresh5))
	}
	if maxAbsDiff(five, ten) == 0 {
		t.Error("5 and 10 steps gave the same actions")
	}
}

// TestPi05ExternalGolden checks the fp32 fast path stage by stage (1e-3) and the bf16 path (2e-2)
// on a golden made by `pi05.py golden` for another checkpoint, e.g. a full-width one too large to
// commit: PI05_GOLDEN=case.safetensors PI05_GOLDEN_WEIGHTS=dir (with config.json) go test ./native
// -run TestPi05ExternalGolden. Skipped when PI05_GOLDEN is unset.
func TestPi05ExternalGolden(t *testing.T) {
	path, dir := os.Getenv("PI05_GOLDEN"), os.Getenv("PI05_GOLDEN_WEIGHTS")
	if path == "" || dir == "" {
		testenv.Skip(t, "opt-in: PI05_GOLDEN and PI05_GOLDEN_WEIGHTS not set")
	}
	g := readGolden(t, path)
	f, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := configDims(t, filepath.Join(dir, "config.json"))
	d.VLayers, d.LLayers = countLayers(f.Names(), "vision_model.encoder.layers."), countLayers(f.Names(), "language_model.layers.")
	for _, prec := range []Precision{FP32, BF16} {
		m, err := NewPi05Model(d, prec, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range f.Names() {
			info, _ := f.Info(name)
			raw, err := f.Bytes(name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.SetTensor(name, DType(info.DType), info.Shape, raw); err != nil {
				t.Fatal(err)
			}
		}
		slab, act := runGolden(t, m, g)
		if prec == FP32 {
			checkStages(t, m, g, slab, act, 1e-3)
		} else if dd := maxAbsDiff(act, g.ActionsBF16); dd > 2e-2 {
			t.Errorf("bf16 actions: max |diff| %.3g > 2e-2", dd)
		} else {
			t.Logf("bf16 actions: max |diff| %.3g vs the bf16 reference", dd)
		}
		m.Close()
	}
}

// countLayers counts the distinct layer indices after prefix in tensor names.
func countLayers(names []string, prefix string) int {
	seen := map[string]bool{}
	for _, n := range names {
		if i := strings.Index(n, prefix); i >= 0 {
			rest := n[i+len(prefix):]
			if j := strings.IndexByte(rest, '.'); j > 0 {
				seen[rest[:j]] = true
			}
		}
	}
	return len(seen)
}

// A prefix handed from one program to another of the same model (disaggregated serving) gives the
// expert program exactly what the prefix program's own expert gives, pinned threads included; a
// program of other cameras cannot take the slab.
func TestPi05SlabAcrossPrograms(t *testing.T) {
	m := loadTiny(t, BF16, ISABest)
	g := pi05Goldens(t)[0]
	slab, want := runGolden(t, m, g)
	expert := testProgram(t, m, presetFor(g, 2), 2)
	if err := expert.Pin([]int{0}); err != nil {
		t.Fatal(err)
	}
	dst := testSlab(t, expert)
	if err := dst.CopyFrom(slab); err != nil {
		t.Fatal(err)
	}
	got, err := expert.Expert(dst, g.Noise, g.Horizon, g.Steps)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Error("the expert program's actions on a copied prefix differ from the prefix program's own")
	}
	p := presetFor(g, 1)
	p.Cams = p.Cams%4 + 1
	if p.Cams == 2 && p.TextBucket == 192 {
		p.TextBucket = 160
	}
	other := testProgram(t, m, p, 1)
	o := testSlab(t, other)
	if err := o.CopyFrom(slab); err == nil {
		t.Error("a slab copied into a program of other cameras")
	}
}

// testProgram is m.NewProgram(p, threads), closed when the test ends.
func testProgram(t testing.TB, m *Pi05Model, p arch.Preset, threads int) *Pi05Program {
	t.Helper()
	prog, err := m.NewProgram(p, threads)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prog.Close)
	return prog
}

// testSlab is prog.NewSlab(), closed when the test ends.
func testSlab(t testing.TB, prog *Pi05Program) *Pi05Slab {
	t.Helper()
	s, err := prog.NewSlab()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
