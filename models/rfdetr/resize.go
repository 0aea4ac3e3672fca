package rfdetr

// taps are the per-output-pixel source ranges and weights of a 1-D
// antialiased bilinear resize, as PyTorch's F.interpolate(mode="bilinear",
// align_corners=False, antialias=True) computes them on CPU for float32
// (aten/src/ATen/native/cpu/UpSampleKernel.cpp, _compute_weights_aa): a
// triangle filter whose support is the scale when downscaling (so every
// source pixel contributes) and 1 when upscaling (plain half-pixel
// bilinear, edges clamped), weights normalised to sum to 1. The float32 /
// float64 mix below follows the C++ expression types so the weights match
// bit for bit.
type taps struct {
	start  []int     // first source index per output
	count  []int     // number of source indices per output
	weight []float32 // stride per output = stride
	stride int
}

func aaTaps(in, out int) taps {
	scale := float32(in) / float32(out)
	support := float32(1)
	invscale := float32(1)
	if scale >= 1 {
		support = float32(float64(scale)) // (interp_size * 0.5) * scale with interp_size 2
		invscale = float32(1 / float64(scale))
	}
	stride := int(ceil32(support))*2 + 1
	t := taps{start: make([]int, out), count: make([]int, out), weight: make([]float32, out*stride), stride: stride}
	for i := 0; i < out; i++ {
		center := float32(float64(scale) * (float64(i) + 0.5))
		xmin := max(int(float64(center-support)+0.5), 0)
		xmax := min(int(float64(center+support)+0.5), in)
		w := t.weight[i*stride : (i+1)*stride]
		var total float32
		for j := 0; j < xmax-xmin; j++ {
			x := float32((float64(float32(j+xmin)-center) + 0.5) * float64(invscale))
			w[j] = triangle(x)
			total += w[j]
		}
		if total != 0 {
			for j := 0; j < xmax-xmin; j++ {
				w[j] /= total
			}
		}
		t.start[i], t.count[i] = xmin, xmax-xmin
	}
	return t
}

func triangle(x float32) float32 {
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return 1 - x
	}
	return 0
}

func ceil32(x float32) float32 {
	c := float32(int(x))
	if c < x {
		c++
	}
	return c
}

// apply resamples one line: dst[i] = Σ_j weight[i][j] · src[start[i]+j].
// The products are rounded before the sum (explicit float32 conversion) so
// the compiler cannot fuse them into FMAs that PyTorch's loop does not use.
func (t *taps) apply(dst []float32, src []float32) {
	for i := range dst {
		n := t.count[i]
		w := t.weight[i*t.stride : i*t.stride+n]
		s := src[t.start[i] : t.start[i]+n]
		acc := float32(s[0] * w[0])
		for j := 1; j < len(w); j++ {
			acc += float32(s[j] * w[j])
		}
		dst[i] = acc
	}
}
