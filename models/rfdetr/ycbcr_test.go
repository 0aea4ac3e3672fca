package rfdetr

import (
	"image"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJPEGColourMatchesLibjpeg decodes JPEGs of every chroma layout and
// compares the RGB rows with libjpeg's decode of the same files
// (testdata/libjpeg_goldens.c), which is what PIL, and so upstream, sees.
// Go's IDCT differs from libjpeg's by ±1 on some samples, which the
// colour conversion can stretch to ±3; anything like replicated chroma
// (Go's own conversion) is far off at these images' colour edges.
func TestJPEGColourMatchesLibjpeg(t *testing.T) {
	files, _ := filepath.Glob("testdata/jpeg_*.jpg")
	if len(files) != 12 {
		t.Fatalf("found %d golden JPEGs, want 12", len(files))
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(strings.TrimSuffix(path, ".jpg") + ".rgb")
		if err != nil {
			t.Fatal(err)
		}
		pic, err := DecodePicture(data, nil)
		if err != nil {
			t.Fatal(err)
		}
		img := pic.img
		b := img.Bounds()
		got := make([]uint8, 3*b.Dx()*b.Dy())
		read := rowReader(img)
		for y := 0; y < b.Dy(); y++ {
			read(y, got[3*y*b.Dx():])
		}
		ours, goNative := diff(got, want), diff(goRGB(img.(*image.YCbCr)), want)
		t.Logf("%s: max |Δ| %d mean %.3f (Go's own conversion: max %d mean %.3f)", filepath.Base(path), ours.max, ours.mean, goNative.max, goNative.mean)
		if ours.max > 3 || ours.mean > 0.2 {
			t.Errorf("%s: max |Δ| %d, mean %.3f against libjpeg; want <= 3 and <= 0.2", path, ours.max, ours.mean)
		}
	}
}

type diffStats struct {
	max  int
	mean float64
}

func diff(a, b []uint8) diffStats {
	var s diffStats
	sum := 0
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d < 0 {
			d = -d
		}
		s.max = max(s.max, d)
		sum += d
	}
	s.mean = float64(sum) / float64(len(a))
	return s
}

func goRGB(m *image.YCbCr) []uint8 {
	b := m.Bounds()
	out := make([]uint8, 0, 3*b.Dx()*b.Dy())
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < b.Dx(); x++ {
			c := m.YCbCrAt(x, y)
			r, g, bl := color.YCbCrToRGB(c.Y, c.Cb, c.Cr)
			out = append(out, r, g, bl)
		}
	}
	return out
}
