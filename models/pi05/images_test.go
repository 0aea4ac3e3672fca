package pi05

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// testImageSize is the full-size model's input side.
const testImageSize = 224

// testFrame rebuilds the synthetic frame of testdata/gen_images.py.
func testFrame(h, w int) RGB {
	img := RGB{H: h, W: w, Pix: make([]uint8, h*w*3)}
	for y := range h {
		for x := range w {
			for c := range 3 {
				t := int64((y*w+x)*3 + c)
				img.Pix[t] = uint8((int64(x*7+y*13+c*29) + (t * 2654435761 >> 7)) % 256)
			}
		}
	}
	return img
}

// The goldens are PyTorch's F.interpolate(bilinear, align_corners=False) + pad + x*2-1.
func TestResizeWithPadMatchesPyTorch(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "golden_images.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Index []int `json:"index"`
		Cases []struct {
			H, W  int
			Value []float32
			Sum   float64
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 6 {
		t.Fatalf("only %d cases", len(g.Cases))
	}
	dst := make([]float32, 3*testImageSize*testImageSize)
	for _, c := range g.Cases {
		ResizeWithPad(dst, testFrame(c.H, c.W), testImageSize)
		worst := 0.0
		for k, i := range g.Index {
			worst = max(worst, math.Abs(float64(dst[i]-c.Value[k])))
		}
		var sum float64
		for _, v := range dst {
			sum += float64(v)
		}
		if worst > 5e-7 || math.Abs(sum-c.Sum) > 1e-2 {
			t.Errorf("%dx%d: max |diff| %g at sampled pixels, sum %f want %f", c.H, c.W, worst, sum, c.Sum)
		}
	}
}

func TestDiscretizeState(t *testing.T) {
	tests := []struct {
		in   []float32
		dim  int
		want []int
	}{
		{[]float32{-1, -0.9921875, 0, 0.5, 0.9921875, 1, 2, -1.0001}, 8, []int{0, 1, 128, 192, 255, 255, 255, -1}},
		{[]float32{0.99}, 3, []int{254, 128, 128}},
		{nil, 2, []int{128, 128}},
	}
	for _, tc := range tests {
		got := DiscretizeState(tc.in, tc.dim)
		if len(got) != len(tc.want) {
			t.Fatalf("DiscretizeState(%v) = %v, want %v", tc.in, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("DiscretizeState(%v) = %v, want %v", tc.in, got, tc.want)
				break
			}
		}
	}
}
