package rfdetr

import (
	"bytes"
	"errors"
	"image"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/models/imagemem"
	"github.com/ttmodel/tt-model/models/imagemem/imagememtest"
)

func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeJPEG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestDecodeImage(t *testing.T) {
	small := testImage(40, 30)
	pngBytes := encodePNG(t, small)
	cases := []struct {
		name       string
		data       []byte
		wantFormat string
		wantErr    string
	}{
		{"png", pngBytes, "png", ""},
		{"jpeg", encodeJPEG(t, small), "jpeg", ""},
		{"gray png", encodePNG(t, image.NewGray(image.Rect(0, 0, 3, 2))), "png", ""},
		{"empty", nil, "", "image is empty"},
		{"gif", []byte("GIF89a\x01\x00\x01\x00"), "", "not a PNG or JPEG file (first bytes 47 49 46 38 39 61 01 00)"},
		{"truncated png", pngBytes[:len(pngBytes)/2], "png", "cannot decode png image"},
		{"png header only", pngBytes[:12], "png", "cannot decode png header"},
		{"too wide", encodePNG(t, image.NewGray(image.Rect(0, 0, MaxImageSide+1, 1))), "png", "png image is 8193x1; the largest side allowed is 8192"},
		{"too tall jpeg", encodeJPEG(t, image.NewGray(image.Rect(0, 0, 8, MaxImageSide+8))), "jpeg", "jpeg image is 8x8200"},
		// Pictures decoded whole: within imagemem.MaxDecodeBytes, by their layout.
		{"interlaced png", imagememtest.PNG{Width: 300, Height: 200, Depth: 8, ColorType: 2, Interlaced: true}.Encode(), "png", ""},
		{"progressive jpeg", imagememtest.JPEG{Width: 2000, Height: 2000, Progressive: true}.Encode(), "jpeg", ""},
		{"interlaced 16-bit png bomb", imagememtest.PNG{Width: 4096, Height: 4096, Depth: 16, ColorType: 6, Interlaced: true}.Encode(), "png",
			"png image is 4096x4096 interlaced 16-bit RGBA: decoding it takes 256 MiB, more than the 128 MiB allowed per image (interlaced 16-bit RGBA PNG pictures may have at most 8.4 megapixels); a non-interlaced PNG is read row by row and may be 8192x8192"},
		{"progressive jpeg bomb", imagememtest.JPEG{Width: 8192, Height: 8192, Progressive: true}.Encode(), "jpeg",
			"jpeg image is 8192x8192 progressive 4:4:4: decoding it takes 960 MiB, more than the 128 MiB allowed per image (progressive 4:4:4 JPEG pictures may have at most 8.9 megapixels)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mem recordBudget
			pic, err := DecodePicture(c.data, &mem)
			if c.wantErr != "" {
				var bad *BadImageError
				if !errors.As(err, &bad) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error = %v, want a BadImageError containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pic.Format != c.wantFormat || pic.Width == 0 {
				t.Errorf("format %s, size %dx%d", pic.Format, pic.Width, pic.Height)
			}
			// A picture decoded whole took its decode from the budget first; a streamed one nothing.
			hd, _ := imagemem.ReadHeader(c.data)
			if want := hd.DecodeBytes; pic.Streamed() && mem.reserved != 0 || !pic.Streamed() && mem.reserved != want {
				t.Errorf("reserved %d bytes (streamed %v), want %d", mem.reserved, pic.Streamed(), want)
			}
		})
	}
}

// recordBudget takes everything and counts it, or refuses with full.
type recordBudget struct {
	reserved int64
	full     error
}

func (b *recordBudget) Reserve(n int64) error {
	if b.full != nil {
		return b.full
	}
	b.reserved += n
	return nil
}

func (b *recordBudget) Release(n int64) { b.reserved -= n }

// A budget that refuses stops the decode before a pixel is decoded, and its error comes back as is.
func TestDecodePictureBudgetRefusal(t *testing.T) {
	full := errors.New("budget full")
	_, err := DecodePicture(encodeJPEG(t, testImage(64, 48)), &recordBudget{full: full})
	if err != full {
		t.Fatalf("error %v, want the budget's own", err)
	}
	if _, err := DecodePicture(encodePNG(t, testImage(64, 48)), &recordBudget{full: full}); err != nil {
		t.Fatalf("a streamed PNG asked the budget: %v", err)
	}
}
