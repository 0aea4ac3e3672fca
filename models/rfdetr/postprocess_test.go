package rfdetr

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"testing"
)

func readFloats(t *testing.T, path string) []float32 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return out
}

// TestPostprocessMatchesPyTorch compares against upstream's PostProcess run
// in PyTorch on the same outputs (testdata/make_goldens.py).
func TestPostprocessMatchesPyTorch(t *testing.T) {
	logits := readFloats(t, "testdata/postprocess_logits.bin")
	boxes := readFloats(t, "testdata/postprocess_boxes.bin")
	data, err := os.ReadFile("testdata/postprocess_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Cases []struct {
			Width, Height int
			Threshold     float32
			MaxDetections int `json:"max_detections"`
			Detections    []struct {
				Query   int
				LabelID int `json:"label_id"`
				Score   float32
				Box     [4]float32
			}
		}
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	labels := Labels(nil)
	for _, c := range golden.Cases {
		got, err := Postprocess(logits, boxes, c.Width, c.Height, c.Threshold, c.MaxDetections, &labels)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(c.Detections) {
			t.Fatalf("%+v: %d detections, PyTorch %d", c.Threshold, len(got), len(c.Detections))
		}
		twoLabels := map[int]int{}
		for i, want := range c.Detections {
			g := got[i]
			if g.Query != want.Query || g.LabelID != want.LabelID {
				t.Fatalf("thr %v #%d: query %d label %d, PyTorch query %d label %d", c.Threshold, i, g.Query, g.LabelID, want.Query, want.LabelID)
			}
			if math.Abs(float64(g.Score-want.Score)) > 1e-6 {
				t.Errorf("thr %v #%d: score %v, PyTorch %v", c.Threshold, i, g.Score, want.Score)
			}
			for k := range 4 {
				if math.Abs(float64(g.Box[k]-want.Box[k])) > 1e-3 {
					t.Errorf("thr %v #%d: box %v, PyTorch %v", c.Threshold, i, g.Box, want.Box)
					break
				}
			}
			if g.Label != labels[g.LabelID] {
				t.Errorf("label %q for id %d", g.Label, g.LabelID)
			}
			twoLabels[g.Query]++
		}
		if c.Threshold == 0.5 && twoLabels[299] != 2 {
			t.Errorf("query 299 carries %d labels at threshold 0.5, want 2 (cat and couch)", twoLabels[299])
		}
	}
}

func TestPostprocessTiesAndLimits(t *testing.T) {
	logits := make([]float32, NumQueries*NumClasses)
	for i := range logits {
		logits[i] = -20
	}
	boxes := make([]float32, NumQueries*4)
	for q := 0; q < NumQueries; q++ {
		copy(boxes[4*q:], []float32{0.5, 0.5, 2, 2}) // covers more than the image
	}
	logits[5*NumClasses+17] = 3 // equal scores: the lower pair index first
	logits[2*NumClasses+63] = 3
	logits[9*NumClasses+1] = 1
	labels := Labels(map[int]string{63: "sofa"})
	got, err := Postprocess(logits, boxes, 100, 50, 0.5, 2, &labels)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Query != 2 || got[0].Label != "sofa" || got[1].Query != 5 || got[1].Label != "cat" {
		t.Fatalf("got %+v", got)
	}
	if got[0].Box != [4]float32{0, 0, 100, 50} {
		t.Errorf("box %v not clamped to the 100x50 image", got[0].Box)
	}
	if got[0].BoxNorm != [4]float32{0.5, 0.5, 2, 2} {
		t.Errorf("normalised box %v, want the raw cxcywh", got[0].BoxNorm)
	}
	if _, err := Postprocess(logits[:10], boxes, 1, 1, 0.5, 1, &labels); err == nil {
		t.Error("short logits accepted")
	}
	logits[0] = float32(math.NaN())
	got, _ = Postprocess(logits, boxes, 1, 1, 0, 300, &labels)
	for _, d := range got {
		if d.Query == 0 && d.LabelID == 0 {
			t.Error("NaN logit produced a detection")
		}
	}
}
