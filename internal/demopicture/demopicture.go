// Package demopicture draws the sample picture of `make demo` and of the
// server's console: a few flat shapes on a gradient, enough structure for a
// detector to look at, drawn here because no photo can be downloaded.
package demopicture

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
)

// Width and Height are the picture's size.
const Width, Height = 640, 480

// Image draws the picture.
func Image() *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, Width, Height))
	for y := 0; y < Height; y++ {
		for x := 0; x < Width; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 255 / Width), uint8(y * 255 / Height), 160, 255})
		}
	}
	fill := func(r image.Rectangle, c color.RGBA) {
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				img.Set(x, y, c)
			}
		}
	}
	fill(image.Rect(40, 60, 300, 420), color.RGBA{200, 120, 40, 255})
	fill(image.Rect(340, 30, 620, 360), color.RGBA{30, 30, 30, 255})
	fill(image.Rect(60, 80, 170, 110), color.RGBA{240, 240, 240, 255})
	return img
}

// PNG is the picture encoded as PNG.
func PNG() []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, Image()); err != nil {
		panic("demopicture: encoding to memory cannot fail: " + err.Error())
	}
	return b.Bytes()
}
