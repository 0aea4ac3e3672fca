package rfdetrnative

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/models/safetensors"
	"github.com/ttmodel/tt-model/native"

	"github.com/ttmodel/tt-model/internal/testing/testenv"
)

// The PyTorch reference's random checkpoint and goldens (tools/reference/rfdetr.py).
const (
	checkpointSpec = "../../../native/testdata/rfdetr_checkpoint.json"
	goldenSeed1    = "../../../native/testdata/rfdetr_golden_seed1.json.gz"
)

// TestSpecsMatchNative: the tensors models/rfdetr checks are exactly the ones
// the native program asks for, with the same shapes.
func TestSpecsMatchNative(t *testing.T) {
	ours := rfdetr.Specs()
	theirs := native.RFDETRWeights()
	byName := map[string]native.WeightSpec{}
	for _, s := range theirs {
		byName[s.Name] = s
	}
	for _, s := range ours {
		n, ok := byName[s.Name]
		if !ok {
			t.Errorf("%s: checked by models/rfdetr, not used by native", s.Name)
			continue
		}
		// Row tables: native states the real file's 3900 rows, we the 300 used.
		same := slices.Equal(n.Shape, s.Shape)
		if s.MinRows > 0 {
			same = slices.Equal(n.Shape[1:], s.Shape[1:])
		}
		if !same || n.MinRows != s.MinRows {
			t.Errorf("%s: models/rfdetr %v (min rows %d), native %v (min rows %d)", s.Name, s.Shape, s.MinRows, n.Shape, n.MinRows)
		}
		delete(byName, s.Name)
	}
	for name := range byName {
		t.Errorf("%s: needed by native, not checked by models/rfdetr", name)
	}
}

// writeReferenceCheckpoint writes the reference's random checkpoint for seed
// as model.safetensors under scheme (F32, so values are exact).
func writeReferenceCheckpoint(t *testing.T, spec *native.RandomCheckpointSpec, seed uint64, scheme string) string {
	t.Helper()
	dir := t.TempDir()
	lookup := spec.Lookup(seed)
	var entries []safetensors.Entry
	for _, ts := range spec.Tensors {
		parts := rfdetr.SourceNames(scheme, ts.Name)
		for p, name := range parts {
			shape := append([]int{ts.Shape[0] / len(parts)}, ts.Shape[1:]...)
			n := 1
			for _, d := range shape {
				n *= d
			}
			name, p, tsName := name, p, ts.Name
			entries = append(entries, safetensors.Entry{Name: name, DType: safetensors.F32, Shape: shape, Data: func() []float32 {
				full, _ := lookup(tsName)
				return full.Data[p*n : (p+1)*n]
			}})
		}
	}
	if err := safetensors.WriteFile(filepath.Join(dir, rfdetr.WeightsFile), entries, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func forward(t *testing.T, dir string, pixels []float32) (logits, boxes []float32) {
	t.Helper()
	w, err := rfdetr.OpenWeights(filepath.Join(dir, rfdetr.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	net, err := Builder(Options{RFDETROptions: native.RFDETROptions{Precision: native.FP32, Threads: 2}})(context.Background(), w, quietLog())
	if cerr := w.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	logits = make([]float32, rfdetr.NumQueries*rfdetr.NumClasses)
	boxes = make([]float32, rfdetr.NumQueries*4)
	if err := net.Forward(context.Background(), pixels, logits, boxes); err != nil {
		t.Fatal(err)
	}
	return logits, boxes
}

type golden struct {
	Stages map[string]struct {
		Shape  []int
		Stride int
		Values []float32
	}
}

func readGolden(t *testing.T, path string) golden {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.NewDecoder(zr).Decode(&g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestCheckpointThroughModelPackageMatchesPyTorch loads the reference's
// random full-size checkpoint the way the server does (safetensors mmap →
// name mapping → native program) under both naming schemes and compares
// the detections with the PyTorch reference's outputs post-processed by
// the same code: same (label, query box) pairs above 0.5, scores within
// 0.01, boxes within 2e-3 (normalised). The two schemes must agree bit for bit.
func TestCheckpointThroughModelPackageMatchesPyTorch(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "full-size checkpoint: skipped with -short")
	}
	spec, err := native.ReadRandomCheckpointSpec(checkpointSpec)
	if err != nil {
		t.Fatal(err)
	}
	const seed = 1
	pixels := native.RandomTensor(spec.Pixels, seed).Data
	logits, boxes := forward(t, writeReferenceCheckpoint(t, spec, seed, rfdetr.SchemeRFDETR), pixels)

	g := readGolden(t, goldenSeed1)
	wantLogits, wantBoxes := g.Stages["logits"].Values, g.Stages["boxes"].Values
	if len(wantLogits) != len(logits) || len(wantBoxes) != len(boxes) {
		t.Fatalf("golden holds %d logits and %d box values", len(wantLogits), len(wantBoxes))
	}
	labels := rfdetr.Labels(nil)
	got, _ := rfdetr.Postprocess(logits, boxes, 1000, 1000, 0.5, 300, &labels)
	want, _ := rfdetr.Postprocess(wantLogits, wantBoxes, 1000, 1000, 0.5, 300, &labels)
	if len(got) != len(want) {
		t.Fatalf("%d detections above 0.5, PyTorch %d", len(got), len(want))
	}
	for _, w := range want {
		i := slices.IndexFunc(got, func(d rfdetr.Detection) bool {
			return d.LabelID == w.LabelID && maxAbs(d.BoxNorm[:], w.BoxNorm[:]) < 2e-3
		})
		if i < 0 {
			t.Errorf("PyTorch detection %s %.4f box %v not found", w.Label, w.Score, w.BoxNorm)
			continue
		}
		if math.Abs(float64(got[i].Score-w.Score)) > 0.01 {
			t.Errorf("%s: score %.4f, PyTorch %.4f", w.Label, got[i].Score, w.Score)
		}
	}
	t.Logf("%d detections above 0.5 match PyTorch", len(want))

	logits2, boxes2 := forward(t, writeReferenceCheckpoint(t, spec, seed, rfdetr.SchemeTransformers), pixels)
	if !slices.Equal(logits, logits2) || !slices.Equal(boxes, boxes2) {
		t.Errorf("transformers-named checkpoint gives different outputs (max |Δlogit| %g)", maxAbs(logits, logits2))
	}
}

func maxAbs(a, b []float32) float32 {
	var m float32
	for i := range a {
		m = max(m, float32(math.Abs(float64(a[i]-b[i]))))
	}
	return m
}
