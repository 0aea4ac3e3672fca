package pi05

import "math/rand/v2"

// GaussianNoise returns rows x cols standard normal values from a generator seeded with seed, so
// a request that names its seed is reproducible.
func GaussianNoise(seed uint64, rows, cols int) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	out := make([]float32, rows*cols)
	for i := range out {
		out[i] = float32(r.NormFloat64())
	}
	return out
}
