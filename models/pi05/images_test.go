package pi05

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/models/imagemem"
	"github.com/ttmodel/tt-model/models/imagemem/imagememtest"
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

// countBudget counts what a decode reserves and gives back.
type countBudget struct{ held, peak int64 }

func (b *countBudget) Reserve(n int64) error {
	b.held += n
	b.peak = max(b.peak, b.held)
	return nil
}

func (b *countBudget) Release(n int64) { b.held -= n }

// A frame is checked from its header before a pixel is decoded; a decoded one reserved its decode
// and its RGB copy, and keeps only the copy (3 bytes a pixel) once decoded.
func TestDecodeImageMemory(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
		err  string
	}{
		{"png", imagememtest.PNG{Width: 64, Height: 48, Depth: 16, ColorType: 6}.Encode(), ""},
		{"progressive jpeg", imagememtest.JPEG{Width: 64, Height: 48, Progressive: true}.Encode(), ""},
		{"over the pixel count", imagememtest.PNG{Width: 5000, Height: 5000, Depth: 8}.Encode(), "png image of 5000x5000 pixels is larger than 16777216 pixels"},
		{"over the decode budget", imagememtest.JPEG{Width: 4000, Height: 4000, Progressive: true}.Encode(),
			"jpeg image is 4000x4000 progressive 4:4:4: decoding it takes 275 MiB, more than the 128 MiB allowed per image (progressive 4:4:4 JPEG pictures may have at most 7.5 megapixels)"},
		{"gif", []byte("GIF89a\x01\x00\x01\x00"), "not a PNG or JPEG image"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mem countBudget
			img, err := DecodeImage(c.data, &mem)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || mem.peak != 0 {
					t.Fatalf("error %v (reserved %d), want %q before anything is reserved", err, mem.peak, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			hd, _ := imagemem.ReadHeader(c.data)
			if mem.peak != hd.Cost(3) || mem.held != int64(len(img.Pix)) || len(img.Pix) != 3*64*48 {
				t.Errorf("reserved %d at the peak, %d after; want %d, then the %d-byte frame", mem.peak, mem.held, hd.Cost(3), len(img.Pix))
			}
		})
	}
}

// A raw frame's h*w is checked without wrapping: 2^32 x 2^32 is 2^64 pixels, 0 in an int, and
// would pass with no data as a frame the resize then indexes far out of bounds.
func TestNewRGBRefusesWrappingSizes(t *testing.T) {
	for _, c := range []struct{ h, w int }{{1 << 32, 1 << 32}, {1 << 62, 4}, {4, 1 << 62}, {5000, 5000}, {0, 3}} {
		if img, err := NewRGB(c.h, c.w, nil); err == nil || !strings.Contains(err.Error(), "empty or larger than 16777216 pixels") {
			t.Errorf("%dx%d: %v, %v; want refused", c.h, c.w, img.H, err)
		}
	}
	if _, err := NewRGB(2, 3, make([]uint8, 18)); err != nil {
		t.Errorf("a 2x3 frame: %v", err)
	}
}
