package imagemem_test

import (
	"bytes"
	"image"
	"image/jpeg"
	"image/png"
	"runtime"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/models/imagemem"
	"github.com/ttmodel/tt-model/models/imagemem/imagememtest"
)

func goJPEG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 80}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func goPNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// allocated decodes data with the standard library and returns the bytes it allocated.
func allocated(t *testing.T, data []byte) int64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err := image.Decode(bytes.NewReader(data))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("the standard decoder refuses the test picture: %v", err)
	}
	return int64(after.TotalAlloc - before.TotalAlloc)
}

// Every layout's estimate is what image/png or image/jpeg really allocates to decode the picture,
// give or take the decoders' fixed buffers (rows, Huffman tables, the inflater).
func TestDecodeBytesMatchTheDecoders(t *testing.T) {
	const w, h = 1000, 700 // not a whole number of MCUs, so the padding counts
	gray := image.NewGray(image.Rect(0, 0, w, h))
	rgba := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range rgba.Pix {
		rgba.Pix[i] = uint8(i * 7)
	}
	cases := []struct {
		name, layout string
		data         []byte
	}{
		{"png gray 8", "8-bit gray", imagememtest.PNG{Width: w, Height: h, Depth: 8, ColorType: 0}.Encode()},
		{"png gray 2", "2-bit gray", imagememtest.PNG{Width: w, Height: h, Depth: 2, ColorType: 0}.Encode()},
		{"png gray 8 tRNS", "8-bit gray", imagememtest.PNG{Width: w, Height: h, Depth: 8, ColorType: 0, Transparent: true}.Encode()},
		{"png gray 16", "16-bit gray", imagememtest.PNG{Width: w, Height: h, Depth: 16, ColorType: 0}.Encode()},
		{"png gray 16 tRNS", "16-bit gray", imagememtest.PNG{Width: w, Height: h, Depth: 16, ColorType: 0, Transparent: true}.Encode()},
		{"png rgb 8", "8-bit RGB", imagememtest.PNG{Width: w, Height: h, Depth: 8, ColorType: 2}.Encode()},
		{"png rgb 16 tRNS", "16-bit RGB", imagememtest.PNG{Width: w, Height: h, Depth: 16, ColorType: 2, Transparent: true}.Encode()},
		{"png paletted 4", "4-bit paletted", imagememtest.PNG{Width: w, Height: h, Depth: 4, ColorType: 3}.Encode()},
		{"png gray+alpha 16", "16-bit gray+alpha", imagememtest.PNG{Width: w, Height: h, Depth: 16, ColorType: 4}.Encode()},
		{"png rgba 8 (image/png's encoder)", "8-bit RGBA", goPNG(t, rgba)},
		{"png rgba 16", "16-bit RGBA", imagememtest.PNG{Width: w, Height: h, Depth: 16, ColorType: 6}.Encode()},
		{"png interlaced rgba 16", "interlaced 16-bit RGBA", imagememtest.PNG{Width: w, Height: h, Depth: 16, ColorType: 6, Interlaced: true}.Encode()},
		{"png interlaced gray 1", "interlaced 1-bit gray", imagememtest.PNG{Width: w, Height: h, Depth: 1, ColorType: 0, Interlaced: true}.Encode()},
		{"jpeg baseline gray", "baseline gray", imagememtest.JPEG{Width: w, Height: h, Gray: true}.Encode()},
		{"jpeg baseline gray (image/jpeg's encoder)", "baseline gray", goJPEG(t, gray)},
		{"jpeg baseline 4:2:0 (image/jpeg's encoder)", "baseline 4:2:0", goJPEG(t, rgba)},
		{"jpeg baseline 4:4:4", "baseline 4:4:4", imagememtest.JPEG{Width: w, Height: h}.Encode()},
		{"jpeg baseline RGB", "baseline 4:4:4 RGB", imagememtest.JPEG{Width: w, Height: h, RGB: true}.Encode()},
		{"jpeg baseline CMYK", "baseline 4:4:4 CMYK", imagememtest.JPEG{Width: w, Height: h, CMYK: true}.Encode()},
		{"jpeg progressive gray", "progressive gray", imagememtest.JPEG{Width: w, Height: h, Gray: true, Progressive: true}.Encode()},
		{"jpeg progressive 4:2:0", "progressive 4:2:0", imagememtest.JPEG{Width: w, Height: h, Subsample420: true, Progressive: true}.Encode()},
		{"jpeg progressive 4:4:4", "progressive 4:4:4", imagememtest.JPEG{Width: w, Height: h, Progressive: true}.Encode()},
		{"jpeg progressive CMYK", "progressive 4:4:4 CMYK", imagememtest.JPEG{Width: w, Height: h, CMYK: true, Progressive: true}.Encode()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hd, err := imagemem.ReadHeader(c.data)
			if err != nil {
				t.Fatal(err)
			}
			if hd.Width != w || hd.Height != h || hd.Layout != c.layout {
				t.Errorf("header %dx%d %q, want %dx%d %q", hd.Width, hd.Height, hd.Layout, w, h, c.layout)
			}
			got := allocated(t, c.data)
			// The fixed buffers: up to two rows of 16-bit RGBA and the inflater's window (PNG),
			// Huffman tables and the bit reader (JPEG).
			const fixed = 160 << 10
			if d := got - hd.DecodeBytes; d < -8<<10 || d > fixed {
				t.Errorf("estimated %d bytes, the decoder allocated %d (%+d)", hd.DecodeBytes, got, d)
			}
		})
	}
}

// The worst cases a small file can declare within the 8192-pixel side: the estimate is known
// before a pixel is read, and MaxPixels says what such a layout may have under the limit.
func TestWorstCases(t *testing.T) {
	cases := []struct {
		name      string
		data      []byte
		wantBytes int64
		wantMaxMP float64 // megapixels under MaxDecodeBytes
	}{
		{"progressive 4:4:4 jpeg", imagememtest.JPEG{Width: 8192, Height: 8192, Progressive: true}.Encode(), 8192 * 8192 * (3 + 3*4), 8.9},
		{"progressive CMYK jpeg", imagememtest.JPEG{Width: 8192, Height: 8192, Progressive: true, CMYK: true}.Encode(), 8192 * 8192 * (4 + 4 + 4*4), 5.6},
		{"interlaced 16-bit RGBA png", imagememtest.PNG{Width: 8192, Height: 8192, Depth: 16, ColorType: 6, Interlaced: true}.Encode(), 8192 * 8192 * 16, 8.4},
		{"baseline 4:2:0 jpeg", imagememtest.JPEG{Width: 8192, Height: 8192, Subsample420: true}.Encode(), 8192 * 8192 * 3 / 2, 89.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hd, err := imagemem.ReadHeader(c.data)
			if err != nil {
				t.Fatal(err)
			}
			mp := float64(hd.MaxPixels(imagemem.MaxDecodeBytes, 0)) / 1e6
			t.Logf("%d-byte file: %s %dx%d decodes into %d MiB; at most %.1f megapixels under %d MiB",
				len(c.data), hd.Layout, hd.Width, hd.Height, hd.DecodeBytes>>20, mp, imagemem.MaxDecodeBytes>>20)
			if hd.DecodeBytes != c.wantBytes || mp < c.wantMaxMP-0.05 || mp > c.wantMaxMP+0.05 {
				t.Errorf("%d bytes, %.2f megapixels at most; want %d, %.1f", hd.DecodeBytes, mp, c.wantBytes, c.wantMaxMP)
			}
		})
	}
}

func TestBrokenHeaders(t *testing.T) {
	good := imagememtest.JPEG{Width: 16, Height: 16}.Encode()
	sos := bytes.Index(good, []byte{0xff, 0xda})
	sof := bytes.Index(good, []byte{0xff, 0xc0})
	arith := bytes.Clone(good)
	arith[sof+1] = 0xc9 // SOF9: arithmetic coding
	zeroHigh := bytes.Clone(good)
	zeroHigh[sof+5], zeroHigh[sof+6] = 0, 0
	pngGood := imagememtest.PNG{Width: 4, Height: 4, Depth: 8, ColorType: 2}.Encode()
	badType := bytes.Clone(pngGood)
	badType[8+8+9] = 5
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"gif", []byte("GIF89a"), "not a PNG or JPEG file"},
		{"jpeg without SOF", append(append([]byte{0xff, 0xd8}, good[sos:sos+20]...), 0xff, 0xd9), "scan (SOS) before the frame header"},
		{"jpeg cut in a segment", good[:sof+10], "runs past the end"},
		{"jpeg arithmetic", arith, "unsupported coding process (SOF9)"},
		{"jpeg zero height", zeroHigh, "non-positive dimension 16x0"},
		{"png without IHDR", append([]byte("\x89PNG\r\n\x1a\n"), pngGood[8+25:]...), "no IHDR chunk first"},
		{"png bad color type", badType, "unknown color type 5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := imagemem.ReadHeader(c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}
