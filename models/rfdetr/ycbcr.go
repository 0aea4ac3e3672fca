package rfdetr

import "image"

// JPEG colour, the way libjpeg gives it to PIL (upstream decodes with PIL):
// chroma planes upsampled with libjpeg's "fancy" triangle filter (its
// default; Go's image/jpeg would replicate each chroma sample instead),
// then libjpeg's fixed-point YCbCr → RGB (jdcolor.c). Both are integer
// arithmetic, reproduced exactly; what remains different from libjpeg is
// the IDCT of Go's decoder (a level or two on some samples, up to 3 after
// colour conversion; testdata/libjpeg_goldens.c).

// ycbcrRows converts rows of a decoded JPEG. Not safe for concurrent use:
// each worker has its own.
type ycbcrRows struct {
	m      *image.YCbCr
	cb, cr []uint8 // one upsampled chroma row (2× the chroma width)
}

// newYCbCrRows returns a converter for m, or nil when m does not start at
// the origin (never the case for a decoded file).
func newYCbCrRows(m *image.YCbCr) *ycbcrRows {
	if m.Rect.Min != (image.Point{}) {
		return nil
	}
	cw, _ := chromaSize(m)
	n := 2 * cw
	return &ycbcrRows{m: m, cb: make([]uint8, n), cr: make([]uint8, n)}
}

// chromaSize is the size of m's chroma planes: halved (rounding up) along each axis its subsampling
// ratio halves.
func chromaSize(m *image.YCbCr) (w, h int) {
	w, h = m.Rect.Dx(), m.Rect.Dy()
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio420:
		w, h = (w+1)/2, (h+1)/2
	case image.YCbCrSubsampleRatio422:
		w = (w + 1) / 2
	case image.YCbCrSubsampleRatio440:
		h = (h + 1) / 2
	}
	return w, h
}

// row writes image row y as interleaved RGB. libjpeg interpolates 4:2:2
// and 4:2:0 chroma when there are more than 2 chroma columns, and 4:4:0
// always; otherwise it replicates samples, as Go's COffset does.
func (r *ycbcrRows) row(y int, dst []uint8) {
	m := r.m
	w := m.Rect.Dx()
	cw, ch := chromaSize(m)
	for p, plane := range [][]uint8{m.Cb, m.Cr} {
		out := r.cb
		if p == 1 {
			out = r.cr
		}
		switch {
		case m.SubsampleRatio == image.YCbCrSubsampleRatio422 && cw > 2:
			h2v1(out, plane[y*m.CStride:y*m.CStride+cw])
		case m.SubsampleRatio == image.YCbCrSubsampleRatio420 && cw > 2:
			near, far := verticalPair(y, ch)
			h2v2(out, plane[near*m.CStride:near*m.CStride+cw], plane[far*m.CStride:far*m.CStride+cw])
		case m.SubsampleRatio == image.YCbCrSubsampleRatio440:
			near, far := verticalPair(y, ch)
			h1v2(out, plane[near*m.CStride:near*m.CStride+cw], plane[far*m.CStride:far*m.CStride+cw], y%2)
		default:
			for x := 0; x < w; x++ {
				out[x] = plane[m.COffset(x, y)]
			}
		}
	}
	yrow := m.Y[y*m.YStride:]
	for x := 0; x < w; x++ {
		dst[3*x], dst[3*x+1], dst[3*x+2] = libjpegRGB(yrow[x], r.cb[x], r.cr[x])
	}
}

// verticalPair is the chroma row nearest to image row y and the next
// nearest (above for even y, below for odd), with the edge rows repeated as
// libjpeg's context rows are.
func verticalPair(y, ch int) (near, far int) {
	near = y / 2
	if y%2 == 0 {
		return near, max(near-1, 0)
	}
	return near, min(near+1, ch-1)
}

// h2v1 is libjpeg's h2v1_fancy_upsample: 3/4 nearer + 1/4 further sample,
// rounding alternately down and up; the end columns are copied.
func h2v1(out, in []uint8) {
	n := len(in)
	out[0] = in[0]
	out[1] = uint8((int(in[0])*3 + int(in[1]) + 2) >> 2)
	for i := 1; i < n-1; i++ {
		v := int(in[i]) * 3
		out[2*i] = uint8((v + int(in[i-1]) + 1) >> 2)
		out[2*i+1] = uint8((v + int(in[i+1]) + 2) >> 2)
	}
	out[2*n-2] = uint8((int(in[n-1])*3 + int(in[n-2]) + 1) >> 2)
	out[2*n-1] = in[n-1]
}

// h2v2 is libjpeg's h2v2_fancy_upsample: the vertical 3:1 column sums of
// the nearer and further rows, then the horizontal 3:1 filter (weights
// 9/3/3/1 in all), rounding by 8 and 7 alternately.
func h2v2(out, near, far []uint8) {
	n := len(near)
	col := func(i int) int { return int(near[i])*3 + int(far[i]) }
	this, next := col(0), col(1)
	out[0] = uint8((this*4 + 8) >> 4)
	out[1] = uint8((this*3 + next + 7) >> 4)
	last := this
	this = next
	for i := 1; i < n-1; i++ {
		next = col(i + 1)
		out[2*i] = uint8((this*3 + last + 8) >> 4)
		out[2*i+1] = uint8((this*3 + next + 7) >> 4)
		last, this = this, next
	}
	out[2*n-2] = uint8((this*3 + last + 8) >> 4)
	out[2*n-1] = uint8((this*4 + 7) >> 4)
}

// h1v2 is libjpeg-turbo's h1v2_fancy_upsample: 3/4 nearer + 1/4 further
// row, rounding bias 1 for the upper output row and 2 for the lower.
func h1v2(out, near, far []uint8, lower int) {
	bias := 1 + lower
	for i := range near {
		out[i] = uint8((int(near[i])*3 + int(far[i]) + bias) >> 2)
	}
}

// libjpegRGB is jdcolor.c's ycc_rgb_convert with its 16-bit fixed-point
// tables: R = Y + round(1.402 Cr'), B = Y + round(1.772 Cb'),
// G = Y + ⌊(−0.34414 Cb' − 0.71414 Cr') + ½⌋, clamped to 0..255.
func libjpegRGB(y, cb, cr uint8) (uint8, uint8, uint8) {
	const half = 1 << 15
	c, r := int32(cb)-128, int32(cr)-128
	yy := int32(y)
	return clamp8(yy + (91881*r+half)>>16), clamp8(yy + (-22554*c-46802*r+half)>>16), clamp8(yy + (116130*c+half)>>16)
}

func clamp8(v int32) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}
