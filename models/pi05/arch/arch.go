// Package arch holds the sizes of a pi0.5 network and of a compiled preset: the one Go home of the
// shapes that models/pi05 reads from a checkpoint and that package native hands to the kernels'
// C structs (pi05_dims, pi05_preset). It has no dependencies, so both can import it and models/pi05
// stays free of cgo.
package arch

// Dims are a checkpoint's shapes: widths, depths, MLP sizes, vocab, patch and positions come from
// the tensors; head counts, eps and RoPE theta from config.json's sub-configs (default: full size).
type Dims struct {
	Image, Patch                  int // input side (224) and patch side (14)
	VWidth, VLayers, VHeads, VMLP int // SigLIP 1152, 27, 16, 4304
	VEps                          float64
	LWidth, LLayers, LHeads, LMLP int // Gemma prefix 2048, 18, 8, 16384
	KVHeads, HeadDim              int // 1, 256: shared by prefix and expert, which attend jointly
	Vocab                         int // 257152
	EWidth, EHeads, EMLP          int // expert 1024, 8, 4096; as many layers as the prefix
	LEps, EEps                    float64
	RopeTheta                     float64
	MinPeriod, MaxPeriod          float64 // time embedding 4e-3, 4.0
	ActionDim                     int     // 32
}

// Preset is one compiled configuration of the original pi0.5 package: Cams 1-4; TextBucket 32/64/128/224, or
// 192 with 1 camera, 160 with 2, 96 with 4; ActionRows 32 (H <= 32) or 64; MaxBatch 1-8 requests
// per batched EXPERT.
type Preset struct {
	Cams, TextBucket, ActionRows, MaxBatch int
}

// MaxBatch is the most requests one batched EXPERT takes (the C ABI's limit).
const MaxBatch = 8
