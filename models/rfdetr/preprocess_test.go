package rfdetr

import (
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"math"
	"os"
	"testing"
)

// testImage is the formula make_goldens.py's test_image computes.
func testImage(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			var px [3]uint8
			for c := 0; c < 3; c++ {
				px[c] = uint8((x*7 + y*13 + c*29 + ((x*y+c)%17)*5) % 256)
			}
			img.SetNRGBA(x, y, color.NRGBA{px[0], px[1], px[2], 255})
		}
	}
	return img
}

type preprocessGolden struct {
	w, h   int
	idx    []uint32
	val    []float32
	sumsCh [3]float64
}

func readPreprocessGoldens(t *testing.T) []preprocessGolden {
	t.Helper()
	data, err := os.ReadFile("testdata/preprocess_golden.bin")
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	off := 0
	next := func(n int) []byte { b := data[off : off+n]; off += n; return b }
	count := int(int32(le.Uint32(next(4))))
	out := make([]preprocessGolden, count)
	for i := range out {
		g := &out[i]
		g.w, g.h = int(int32(le.Uint32(next(4)))), int(int32(le.Uint32(next(4))))
		n := int(int32(le.Uint32(next(4))))
		for j := 0; j < n; j++ {
			g.idx = append(g.idx, le.Uint32(next(4)))
			g.val = append(g.val, math.Float32frombits(le.Uint32(next(4))))
		}
		for c := 0; c < 3; c++ {
			g.sumsCh[c] = math.Float64frombits(le.Uint64(next(8)))
		}
	}
	return out
}

// TestPreprocessMatchesPyTorch compares against F.interpolate(antialias=True)
// on normalised tensors (testdata/make_goldens.py): sampled pixels and
// per-channel sums.
func TestPreprocessMatchesPyTorch(t *testing.T) {
	pixels := make([]float32, PixelCount)
	for _, g := range readPreprocessGoldens(t) {
		if err := Preprocess(PictureOf(testImage(g.w, g.h)), pixels); err != nil {
			t.Fatal(err)
		}
		var maxErr float64
		for j, i := range g.idx {
			maxErr = math.Max(maxErr, math.Abs(float64(pixels[i]-g.val[j])))
		}
		// float32 sums of ~20 products: a few ulps of values of magnitude ~2.
		if maxErr > 2e-6 {
			t.Errorf("%dx%d: max |Δ| over %d samples = %g, want <= 2e-6", g.w, g.h, len(g.idx), maxErr)
		}
		for c := 0; c < 3; c++ {
			var sum float64
			for _, v := range pixels[c*InputSize*InputSize : (c+1)*InputSize*InputSize] {
				sum += float64(v)
			}
			if d := math.Abs(sum - g.sumsCh[c]); d > 1e-6*InputSize*InputSize {
				t.Errorf("%dx%d channel %d: sum %f, PyTorch %f", g.w, g.h, c, sum, g.sumsCh[c])
			}
		}
		t.Logf("%dx%d: max |Δ| = %g", g.w, g.h, maxErr)
	}
}

// TestRowRGBImageTypes checks every decoder image type yields the bytes PIL's
// convert("RGB") would (JPEG colour in detail: ycbcr_test.go).
func TestRowRGBImageTypes(t *testing.T) {
	ycc := image.NewYCbCr(image.Rect(0, 0, 2, 1), image.YCbCrSubsampleRatio444)
	ycc.Y[0], ycc.Cb[0], ycc.Cr[0] = 81, 90, 240 // ≈ pure red
	pal := image.NewPaletted(image.Rect(0, 0, 1, 1), color.Palette{color.NRGBA{10, 20, 30, 0}})
	nrgba := image.NewNRGBA(image.Rect(0, 0, 1, 1))
	nrgba.Pix = []uint8{200, 100, 50, 7} // alpha is dropped, colour kept
	gray16 := image.NewGray16(image.Rect(0, 0, 1, 1))
	gray16.SetGray16(0, 0, color.Gray16{Y: 0xabcd})
	cases := []struct {
		name string
		img  image.Image
		want []uint8
	}{
		{"ycbcr (libjpeg's conversion)", ycc, []uint8{238, 14, 14}},
		{"gray", &image.Gray{Pix: []uint8{77}, Stride: 1, Rect: image.Rect(0, 0, 1, 1)}, []uint8{77, 77, 77}},
		{"nrgba", nrgba, []uint8{200, 100, 50}},
		{"paletted transparent", pal, []uint8{10, 20, 30}},
		{"gray16 high byte", gray16, []uint8{0xab, 0xab, 0xab}},
		{"cmyk", &image.CMYK{Pix: []uint8{0, 255, 255, 0}, Stride: 4, Rect: image.Rect(0, 0, 1, 1)}, []uint8{255, 0, 0}},
	}
	for _, c := range cases {
		dst := make([]uint8, 3*c.img.Bounds().Dx())
		rowReader(c.img)(0, dst)
		for i := range c.want {
			if dst[i] != c.want[i] {
				t.Errorf("%s: got %v, want %v", c.name, dst[:len(c.want)], c.want)
				break
			}
		}
	}
}

func TestAATapsSumToOne(t *testing.T) {
	for _, sz := range [][2]int{{8192, 560}, {560, 560}, {37, 560}, {1, 560}, {561, 560}} {
		tp := aaTaps(sz[0], sz[1])
		for i := 0; i < sz[1]; i++ {
			var s float64
			for j := 0; j < tp.count[i]; j++ {
				s += float64(tp.weight[i*tp.stride+j])
				if tp.start[i]+j >= sz[0] {
					t.Fatalf("%v: output %d reads source %d", sz, i, tp.start[i]+j)
				}
			}
			if math.Abs(s-1) > 1e-6 {
				t.Fatalf("%v: output %d weights sum to %v", sz, i, s)
			}
		}
	}
}

func TestPreprocessRejectsBadBuffer(t *testing.T) {
	if err := Preprocess(PictureOf(testImage(4, 4)), make([]float32, 10)); err == nil {
		t.Error("short output buffer accepted")
	}
}

func BenchmarkPreprocess(b *testing.B) {
	for _, sz := range [][2]int{{640, 480}, {4032, 3024}, {8192, 8192}} {
		img := image.NewYCbCr(image.Rect(0, 0, sz[0], sz[1]), image.YCbCrSubsampleRatio420)
		for i := range img.Y {
			img.Y[i] = uint8(i)
		}
		pixels := make([]float32, PixelCount)
		b.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := Preprocess(PictureOf(img), pixels); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
