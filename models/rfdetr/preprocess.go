package rfdetr

import (
	"fmt"
	"image"
	"image/color"
	"runtime"
	"sync"
)

// ImageNet statistics (docs/rfdetr.md, "The model package").
var (
	imagenetMean = [3]float32{0.485, 0.456, 0.406}
	imagenetStd  = [3]float32{0.229, 0.224, 0.225}
)

// PixelCount is the length of a pre-processed input: CHW 3×560×560.
const PixelCount = 3 * InputSize * InputSize

// Preprocess turns a picture into the network input, as upstream's
// predict does with torchvision: RGB bytes /255, ImageNet mean/std, then an
// antialiased bilinear resize of the whole image to 560×560 (squashed, no
// letterbox). dst must hold PixelCount values (CHW, row-major).
//
// The resize is separable and runs horizontally first, then vertically, as
// PyTorch does; the horizontal pass consumes source rows one at a time, so
// an 8192×8192 picture needs only a 3×8192×560 intermediate, never a float
// copy of itself, and a streamed PNG is never decoded whole.
func Preprocess(pic *Picture, dst []float32) error {
	if len(dst) != PixelCount {
		return fmt.Errorf("preprocess: output holds %d values, want %d", len(dst), PixelCount)
	}
	w, h := pic.Width, pic.Height
	if w <= 0 || h <= 0 {
		return fmt.Errorf("preprocess: image has no pixels (%dx%d)", w, h)
	}
	var lut [3][256]float32 // normalised value of each byte per channel
	for c := range lut {
		for v := range lut[c] {
			x := float32(v) / 255
			lut[c][v] = (x - imagenetMean[c]) / imagenetStd[c]
		}
	}
	hTaps := aaTaps(w, InputSize)
	vTaps := aaTaps(h, InputSize)

	// Horizontal pass: mid[c][y] is source row y resampled to 560 columns.
	mid := make([]float32, 3*h*InputSize)
	resampleRow := func(y int, rgb []uint8, line []float32) {
		for c := 0; c < 3; c++ {
			for x := 0; x < w; x++ {
				line[x] = lut[c][rgb[3*x+c]]
			}
			hTaps.apply(mid[(c*h+y)*InputSize:(c*h+y+1)*InputSize], line)
		}
	}
	if pic.png != nil {
		// Inflating is sequential: one pass, rows in order.
		rows, err := pic.png.rows()
		if err != nil {
			return err
		}
		rgb, line := make([]uint8, 3*w), make([]float32, w)
		for y := 0; y < h; y++ {
			if err := rows.next(rgb); err != nil {
				rows.zr.Close()
				return err
			}
			resampleRow(y, rgb, line)
		}
		if err := rows.finish(); err != nil {
			return err
		}
	} else {
		// Decoded rows are independent, so large images split them across the CPUs.
		img := pic.img
		b := img.Bounds()
		workers := max(1, min(runtime.GOMAXPROCS(0), h/64))
		var wg sync.WaitGroup
		for k := 0; k < workers; k++ {
			wg.Add(1)
			go func(y0, y1 int) {
				defer wg.Done()
				rgb, line := make([]uint8, 3*w), make([]float32, w)
				readRow := rowReader(img)
				for y := y0; y < y1; y++ {
					readRow(b.Min.Y+y, rgb)
					resampleRow(y, rgb, line)
				}
			}(k*h/workers, (k+1)*h/workers)
		}
		wg.Wait()
	}
	// Vertical pass, a whole output row at a time (same per-pixel sum order).
	for c := 0; c < 3; c++ {
		plane := mid[c*h*InputSize : (c+1)*h*InputSize]
		for oy := 0; oy < InputSize; oy++ {
			out := dst[(c*InputSize+oy)*InputSize : (c*InputSize+oy+1)*InputSize]
			wts := vTaps.weight[oy*vTaps.stride:]
			y0 := vTaps.start[oy]
			src := plane[y0*InputSize : (y0+1)*InputSize]
			for x := range out {
				out[x] = float32(src[x] * wts[0])
			}
			for j := 1; j < vTaps.count[oy]; j++ {
				src = plane[(y0+j)*InputSize : (y0+j+1)*InputSize]
				wj := wts[j]
				for x := range out {
					out[x] += float32(src[x] * wj)
				}
			}
		}
	}
	return nil
}

// rowReader returns a function writing row y of img as interleaved 8-bit
// RGB; each worker gets its own (it may hold scratch rows).
func rowReader(img image.Image) func(y int, dst []uint8) {
	if m, ok := img.(*image.YCbCr); ok {
		if r := newYCbCrRows(m); r != nil {
			return r.row
		}
	}
	return func(y int, dst []uint8) { rowRGB(img, y, dst) }
}

// rowRGB writes row y of img as interleaved 8-bit RGB, the way PIL's
// convert("RGB") sees it: alpha is dropped (not composited), 16-bit samples
// keep their high byte, palette entries are looked up, gray is replicated.
func rowRGB(img image.Image, y int, dst []uint8) {
	b := img.Bounds()
	switch m := img.(type) {
	case *image.Gray:
		row := m.Pix[m.PixOffset(b.Min.X, y):]
		for x := 0; x < b.Dx(); x++ {
			dst[3*x], dst[3*x+1], dst[3*x+2] = row[x], row[x], row[x]
		}
	case *image.NRGBA:
		row := m.Pix[m.PixOffset(b.Min.X, y):]
		for x := 0; x < b.Dx(); x++ {
			copy(dst[3*x:3*x+3], row[4*x:4*x+3])
		}
	case *image.RGBA: // the PNG decoder's type for opaque truecolor
		row := m.Pix[m.PixOffset(b.Min.X, y):]
		for x := 0; x < b.Dx(); x++ {
			copy(dst[3*x:3*x+3], row[4*x:4*x+3])
		}
	case *image.Paletted: // palette colours are straight RGB even when transparent
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBAModel.Convert(m.Palette[m.ColorIndexAt(x, y)]).(color.NRGBA)
			i := 3 * (x - b.Min.X)
			dst[i], dst[i+1], dst[i+2] = c.R, c.G, c.B
		}
	default:
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBA64Model.Convert(img.At(x, y)).(color.NRGBA64)
			i := 3 * (x - b.Min.X)
			dst[i], dst[i+1], dst[i+2] = uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8)
		}
	}
}
