package native

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// rfGolden is one rfdetr_golden_seed<N>.json.gz of tools/reference/rfdetr.py:
// each stage flattened, every stride-th value kept.
type rfGolden struct {
	Seed   uint64 `json:"seed"`
	Stages map[string]struct {
		Shape  []int     `json:"shape"`
		Stride int       `json:"stride"`
		Values []float32 `json:"values"`
	} `json:"stages"`
}

func readRFDETRGolden(seed int) (*rfGolden, error) {
	path := filepath.Join("testdata", fmt.Sprintf("rfdetr_golden_seed%d.json.gz", seed))
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open rfGolden: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("gunzip %s: %w", path, err)
	}
	var g rfGolden
	if err := json.NewDecoder(zr).Decode(&g); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return &g, nil
}

// rfSubsample keeps every stride-th value, like the rfGolden file.
func rfSubsample(x []float32, stride int) []float32 {
	out := make([]float32, 0, len(x)/stride+1)
	for i := 0; i < len(x); i += stride {
		out = append(out, x[i])
	}
	return out
}

// rfRelL2 is ||a-b|| / ||b||.
func rfRelL2(a, b []float32) float64 {
	var num, den float64
	for i := range b {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(num / den)
}
