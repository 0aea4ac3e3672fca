package rfdetr

import (
	"bytes"
	"errors"
	"image"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"
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
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pic, err := DecodePicture(c.data)
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
		})
	}
}
