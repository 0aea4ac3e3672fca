package pi05

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"

	"github.com/ttmodel/tt-model/models/imagemem"
)

// maxImagePixels bounds a decoded camera frame so that a hostile header cannot make the server
// allocate gigabytes (a 4K frame is 8.3 MP).
const maxImagePixels = 16 << 20

// RGB is a camera frame: H x W x 3 uint8, row-major, channels last.
type RGB struct {
	H, W int
	Pix  []uint8
}

// DecodeBase64Image decodes a base64 PNG or JPEG (an optional data: URL prefix is accepted), as
// DecodeImage.
func DecodeBase64Image(s string, mem imagemem.Budget) (RGB, error) {
	if strings.HasPrefix(s, "data:") {
		if i := strings.Index(s, ","); i >= 0 {
			s = s[i+1:]
		}
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return RGB{}, fmt.Errorf("invalid base64: %w", err)
	}
	return DecodeImage(raw, mem)
}

// DecodeImage decodes PNG or JPEG bytes to RGB; alpha is dropped as PIL's convert("RGB") does.
// The header is checked before any pixel is decoded: at most maxImagePixels, and the decode plus
// the RGB copy within imagemem.MaxDecodeBytes. mem (nil: no budget) is asked for both before the
// decode (its error is returned as is); the decoded picture is given back once copied, so the
// frame keeps its RGB bytes (3 per pixel) reserved.
func DecodeImage(raw []byte, mem imagemem.Budget) (RGB, error) {
	hd, err := imagemem.ReadHeader(raw)
	if err != nil {
		return RGB{}, fmt.Errorf("not a PNG or JPEG image: %w", err)
	}
	if int64(hd.Width)*int64(hd.Height) > maxImagePixels {
		return RGB{}, fmt.Errorf("%s image of %dx%d pixels is larger than %d pixels", hd.Format, hd.Width, hd.Height, maxImagePixels)
	}
	if err := hd.CheckCost(3); err != nil {
		return RGB{}, err
	}
	if mem != nil {
		if err := mem.Reserve(hd.Cost(3)); err != nil {
			return RGB{}, err
		}
	}
	var img image.Image
	if hd.Format == "png" {
		img, err = png.Decode(bytes.NewReader(raw))
	} else {
		img, err = jpeg.Decode(bytes.NewReader(raw))
	}
	if err != nil {
		return RGB{}, fmt.Errorf("decode %s: %w", hd.Format, err)
	}
	out := toRGB(img)
	if mem != nil {
		mem.Release(hd.DecodeBytes)
	}
	return out, nil
}

func toRGB(img image.Image) RGB {
	b := img.Bounds()
	out := RGB{H: b.Dy(), W: b.Dx(), Pix: make([]uint8, 3*b.Dx()*b.Dy())}
	i := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			var r, g, bl uint8
			switch m := img.(type) {
			case *image.NRGBA:
				p := m.Pix[m.PixOffset(x, y):]
				r, g, bl = p[0], p[1], p[2]
			case *image.RGBA:
				p := m.Pix[m.PixOffset(x, y):]
				c := color.NRGBAModel.Convert(color.RGBA{p[0], p[1], p[2], p[3]}).(color.NRGBA)
				r, g, bl = c.R, c.G, c.B
			case *image.Gray:
				v := m.Pix[m.PixOffset(x, y)]
				r, g, bl = v, v, v
			default:
				c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
				r, g, bl = c.R, c.G, c.B
			}
			out.Pix[i], out.Pix[i+1], out.Pix[i+2] = r, g, bl
			i += 3
		}
	}
	return out
}

// NewRGB checks a raw HxWx3 uint8 frame.
func NewRGB(h, w int, pix []uint8) (RGB, error) {
	if h <= 0 || w <= 0 || h > maxImagePixels || w > maxImagePixels/h { // h*w could wrap
		return RGB{}, fmt.Errorf("image of %dx%d pixels is empty or larger than %d pixels", h, w, maxImagePixels)
	}
	if len(pix) != h*w*3 {
		return RGB{}, fmt.Errorf("image has %d values, want %dx%dx3", len(pix), h, w)
	}
	return RGB{H: h, W: w, Pix: pix}, nil
}

// linearTaps are PyTorch's bilinear source indices and weights for one output coordinate
// (F.interpolate, align_corners=False, no antialias). The scale in/out is a float32, but the source
// position (o+0.5)*scale-0.5 and its fraction are formed in float64 before the weight is rounded to
// float32: that is what Debian's PyTorch computes, bit for bit (checked against it on 0/1 patterns).
type linearTaps struct {
	i0, i1 int
	w0, w1 float32
}

func bilinearTaps(in, out int) []linearTaps {
	scale := float64(float32(in) / float32(out))
	taps := make([]linearTaps, out)
	for o := range taps {
		src := max(scale*(float64(o)+0.5)-0.5, 0)
		i0 := min(int(src), in-1)
		l1 := float32(min(max(src-float64(i0), 0), 1))
		i1 := i0
		if i0 < in-1 {
			i1 = i0 + 1
		}
		taps[o] = linearTaps{i0: i0, i1: i1, w0: 1 - l1, w1: l1}
	}
	return taps
}

// ResizeWithPad writes the frame into dst (3 x size x size, channels first) as lerobot/openpi's
// PyTorch preprocessing does: pixels to [0, 1], bilinear resize keeping the aspect ratio
// (F.interpolate, align_corners=False, no antialias) unless the frame already has the target size,
// clamp, centered padding, then x*2-1. Padding is -1 (black), the openpi behaviour; lerobot pads
// [0,1] images with -1 before the *2-1 (giving -3), which we do not copy.
func ResizeWithPad(dst []float32, img RGB, size int) {
	plane := size * size
	if img.H == size && img.W == size {
		for p := range plane {
			for c := range 3 {
				dst[c*plane+p] = float32(img.Pix[3*p+c])/255*2 - 1
			}
		}
		return
	}
	ratio := max(float64(img.W)/float64(size), float64(img.H)/float64(size))
	rh, rw := int(float64(img.H)/ratio), int(float64(img.W)/ratio)
	rh, rw = max(rh, 1), max(rw, 1)
	padTop, padLeft := (size-rh)/2, (size-rw)/2
	for i := range dst[:3*plane] {
		dst[i] = -1
	}
	ys, xs := bilinearTaps(img.H, rh), bilinearTaps(img.W, rw)
	px := func(y, x, c int) float32 { return float32(img.Pix[(y*img.W+x)*3+c]) / 255 }
	for oy, ty := range ys {
		for ox, tx := range xs {
			for c := range 3 {
				// Explicit float32 conversions keep each product rounded (no fused multiply-add).
				top := float32(tx.w0*px(ty.i0, tx.i0, c)) + float32(tx.w1*px(ty.i0, tx.i1, c))
				bot := float32(tx.w0*px(ty.i1, tx.i0, c)) + float32(tx.w1*px(ty.i1, tx.i1, c))
				v := float32(ty.w0*top) + float32(ty.w1*bot)
				v = min(max(v, 0), 1)
				dst[c*plane+(padTop+oy)*size+padLeft+ox] = v*2 - 1
			}
		}
	}
}
