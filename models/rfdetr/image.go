package rfdetr

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
)

// MaxImageSide is the largest width or height accepted (the original server's limit):
// the header is checked before any pixel is decoded, so an oversized image
// costs no memory.
const MaxImageSide = 8192

// BadImageError is an image that cannot be used: not PNG/JPEG, corrupt, or
// too large. Servers answer it with 400.
type BadImageError struct{ Reason string }

func (e *BadImageError) Error() string { return e.Reason }

func badImage(format string, args ...any) error {
	return &BadImageError{Reason: fmt.Sprintf(format, args...)}
}

var (
	pngMagic  = []byte("\x89PNG\r\n\x1a\n")
	jpegMagic = []byte{0xff, 0xd8}
)

// DecodeImage decodes a PNG or JPEG file. The format is chosen by its magic
// bytes, and the declared size is checked against MaxImageSide before the
// pixels are decoded.
func DecodeImage(data []byte) (image.Image, string, error) {
	var (
		format       string
		decodeConfig func([]byte) (image.Config, error)
		decode       func([]byte) (image.Image, error)
	)
	switch {
	case bytes.HasPrefix(data, pngMagic):
		format = "png"
		decodeConfig = func(b []byte) (image.Config, error) { return png.DecodeConfig(bytes.NewReader(b)) }
		decode = func(b []byte) (image.Image, error) { return png.Decode(bytes.NewReader(b)) }
	case bytes.HasPrefix(data, jpegMagic):
		format = "jpeg"
		decodeConfig = func(b []byte) (image.Config, error) { return jpeg.DecodeConfig(bytes.NewReader(b)) }
		decode = func(b []byte) (image.Image, error) { return jpeg.Decode(bytes.NewReader(b)) }
	case len(data) == 0:
		return nil, "", badImage("image is empty")
	default:
		return nil, "", badImage("image is not a PNG or JPEG file (first bytes % x)", data[:min(len(data), 8)])
	}
	cfg, err := decodeConfig(data)
	if err != nil {
		return nil, format, badImage("cannot decode %s header: %v", format, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, format, badImage("%s image has no pixels (%dx%d)", format, cfg.Width, cfg.Height)
	}
	if cfg.Width > MaxImageSide || cfg.Height > MaxImageSide {
		return nil, format, badImage("%s image is %dx%d; the largest side allowed is %d", format, cfg.Width, cfg.Height, MaxImageSide)
	}
	img, err := decode(data)
	if err != nil {
		return nil, format, badImage("cannot decode %s image: %v", format, err)
	}
	return img, format, nil
}
