package rfdetr

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"

	"github.com/ttmodel/tt-model/models/imagemem"
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

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// Picture is a checked PNG or JPEG, ready for Detect. A non-interlaced PNG
// keeps only its compressed data and is decoded row by row while it is
// pre-processed (pngrows.go); a JPEG or an interlaced PNG is decoded whole
// here (image/jpeg and Adam7 need the whole picture), within
// imagemem.MaxDecodeBytes.
type Picture struct {
	Width, Height int
	Format        string // "png" or "jpeg"
	img           image.Image
	png           *pngHeader
}

// PictureOf wraps an already decoded image.
func PictureOf(img image.Image) *Picture {
	b := img.Bounds()
	return &Picture{Width: b.Dx(), Height: b.Dy(), img: img}
}

// Streamed reports whether the picture is decoded row by row.
func (p *Picture) Streamed() bool { return p.png != nil }

// DecodePicture checks a PNG or JPEG file: the format by its magic bytes,
// the declared size against MaxImageSide before any pixel is decoded, and
// for a PNG every chunk (lengths, CRCs, order). A picture decoded whole
// must fit in imagemem.MaxDecodeBytes, and takes what it needs from mem
// (nil: no budget) before a pixel is decoded; mem's error is returned as
// is. Pixel data that turns out corrupt while a streamed PNG is
// pre-processed is a *BadImageError from Detect.
func DecodePicture(data []byte, mem imagemem.Budget) (*Picture, error) {
	var (
		decodeConfig func([]byte) (image.Config, error)
		decode       func([]byte) (image.Image, error)
	)
	format := imagemem.Format(data)
	switch format {
	case "png":
		decodeConfig = func(b []byte) (image.Config, error) { return png.DecodeConfig(bytes.NewReader(b)) }
		decode = func(b []byte) (image.Image, error) { return png.Decode(bytes.NewReader(b)) }
	case "jpeg":
		decodeConfig = func(b []byte) (image.Config, error) { return jpeg.DecodeConfig(bytes.NewReader(b)) }
		decode = func(b []byte) (image.Image, error) { return jpeg.Decode(bytes.NewReader(b)) }
	default:
		if len(data) == 0 {
			return nil, badImage("image is empty")
		}
		return nil, badImage("image is not a PNG or JPEG file (first bytes % x)", data[:min(len(data), 8)])
	}
	cfg, err := decodeConfig(data)
	if err != nil {
		return nil, badImage("cannot decode %s header: %v", format, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, badImage("%s image has no pixels (%dx%d)", format, cfg.Width, cfg.Height)
	}
	if cfg.Width > MaxImageSide || cfg.Height > MaxImageSide {
		return nil, badImage("%s image is %dx%d; the largest side allowed is %d", format, cfg.Width, cfg.Height, MaxImageSide)
	}
	pic := &Picture{Width: cfg.Width, Height: cfg.Height, Format: format}
	if format == "png" {
		h, err := parsePNG(data)
		if err != nil {
			return nil, badImage("cannot decode png image: %v", err)
		}
		if !h.interlaced {
			pic.png = h
			return pic, nil
		}
	}
	hd, err := imagemem.ReadHeader(data)
	if err != nil {
		return nil, badImage("cannot decode %s header: %v", format, err)
	}
	if err := hd.CheckCost(0); err != nil {
		if hd.Interlaced {
			return nil, badImage("%v; a non-interlaced PNG is read row by row and may be %dx%d", err, MaxImageSide, MaxImageSide)
		}
		return nil, badImage("%v", err)
	}
	if mem != nil {
		if err := mem.Reserve(hd.DecodeBytes); err != nil {
			return nil, err
		}
	}
	if pic.img, err = decode(data); err != nil {
		return nil, badImage("cannot decode %s image: %v", format, err)
	}
	return pic, nil
}
