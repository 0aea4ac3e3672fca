package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
)

// writePicture draws a few flat shapes on a gradient: enough structure for a
// detector to look at, made here because no photo can be downloaded.
func writePicture(path string) error {
	img := image.NewRGBA(image.Rect(0, 0, 640, 480))
	for y := 0; y < 480; y++ {
		for x := 0; x < 640; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 255 / 640), uint8(y * 255 / 480), 160, 255})
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
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return f.Close()
}
