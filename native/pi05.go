package native

/*
#cgo CFLAGS: -I${SRCDIR}/../kernels/pi05
#include <stdlib.h>
#include "tt_cpu.h"
#include "pi05.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ttmodel/tt-model/models/pi05/arch"
)

// pi0.5 on the CPU (kernels/pi05/pi05.h): VISION, PREFIX and EXPERT megakernels, one cgo call each.
//
// Loading (models/pi05 maps the checkpoint; this package only takes named tensors):
//
//	dims := native.Pi05DefaultDims()           // an arch.Dims; models/pi05 reads it from the checkpoint
//	m, err := native.NewPi05Model(dims, native.BF16, native.ISABest)
//	for each tensor of model.safetensors:      // lerobot names, e.g.
//	    // "paligemma_with_expert.paligemma.model.language_model.layers.0.self_attn.q_proj.weight"
//	    used, err := m.SetTensor(name, native.DTypeF32 or native.DTypeBF16, shape, rawLittleEndianBytes)
//	    // the bytes may be unmapped (madvise DONTNEED) right after: the model keeps its own packed
//	    // copy, so an F32 checkpoint streams to bf16 one tensor at a time. used=false: not a pi0.5
//	    // tensor (e.g. an expert lm_head), ignore it.
//	err = m.Ready()                            // names every missing tensor
//
// Serving one request:
//
//	prog, _ := m.NewProgram(arch.Preset{Cams: 2, TextBucket: 64, ActionRows: 64, MaxBatch: 4}, 0)
//	slab, _ := prog.NewSlab()                  // allocate a few at start, reuse them
//	prog.Vision(slab, images, camMask)         // images [cams][3][224][224] in [-1, 1]
//	prog.Prefix(slab, tokens, tokenMask)       // len(tokens) <= TextBucket; padding masked false
//	actions, _ := prog.Expert(slab, noise, horizon, steps) // noise [horizon][32] -> actions [horizon][32]
//	actions, _ = prog.ExpertBatch([]*native.Pi05Slab{a, b}, noise2, horizon, steps, pack)
//
// Dims that shapes cannot give (heads, head_dim, eps, rope theta, periods) come from config.json's
// vision_config / text_config / expert_config; checkpoint tensors are checked against the dims and a
// mismatch names the tensor with both shapes.

// Pi05DefaultDims returns the full-size lerobot/pi05_base shapes.
func Pi05DefaultDims() arch.Dims {
	var c C.pi05_dims
	C.pi05_dims_default(&c)
	return arch.Dims{
		Image: int(c.image), Patch: int(c.patch),
		VWidth: int(c.v_width), VLayers: int(c.v_layers), VHeads: int(c.v_heads), VMLP: int(c.v_mlp),
		VEps:   float64(c.v_eps),
		LWidth: int(c.l_width), LLayers: int(c.l_layers), LHeads: int(c.l_heads), LMLP: int(c.l_mlp),
		KVHeads: int(c.kv_heads), HeadDim: int(c.head_dim), Vocab: int(c.vocab),
		EWidth: int(c.e_width), EHeads: int(c.e_heads), EMLP: int(c.e_mlp),
		LEps: float64(c.l_eps), EEps: float64(c.e_eps), RopeTheta: float64(c.rope_theta),
		MinPeriod: float64(c.min_period), MaxPeriod: float64(c.max_period), ActionDim: int(c.action_dim),
	}
}

// dimsToC is the one conversion between the Go and the C shapes (eps and theta are floats in C).
func dimsToC(d arch.Dims) C.pi05_dims {
	return C.pi05_dims{
		image: C.int(d.Image), patch: C.int(d.Patch),
		v_width: C.int(d.VWidth), v_layers: C.int(d.VLayers), v_heads: C.int(d.VHeads),
		v_mlp: C.int(d.VMLP), v_eps: C.float(d.VEps),
		l_width: C.int(d.LWidth), l_layers: C.int(d.LLayers), l_heads: C.int(d.LHeads), kv_heads: C.int(d.KVHeads),
		head_dim: C.int(d.HeadDim), l_mlp: C.int(d.LMLP), vocab: C.int(d.Vocab),
		e_width: C.int(d.EWidth), e_heads: C.int(d.EHeads), e_mlp: C.int(d.EMLP),
		l_eps: C.float(d.LEps), e_eps: C.float(d.EEps), rope_theta: C.float(d.RopeTheta),
		min_period: C.double(d.MinPeriod), max_period: C.double(d.MaxPeriod), action_dim: C.int(d.ActionDim),
	}
}

// pi05Precision maps a Precision to the kernels' path.
func pi05Precision(p Precision) (C.pi05_precision, error) {
	switch p {
	case Ref:
		return C.PI05_REF, nil
	case FP32:
		return C.PI05_F32, nil
	case BF16, "":
		return C.PI05_BF16, nil
	}
	return 0, fmt.Errorf("pi05 precision %q: want ref, fp32 or bf16", p)
}

// pi05Args resolves a precision ("" is BF16) and the kernel family (the Ref precision is scalar).
func pi05Args(prec Precision, isa ISA) (Precision, C.pi05_precision, C.tt_isa, error) {
	if prec == "" {
		prec = BF16
	}
	cp, err := pi05Precision(prec)
	if err != nil {
		return "", 0, 0, err
	}
	code := C.tt_isa(C.TT_ISA_SCALAR)
	if prec != Ref {
		if code, err = isa.code(); err != nil {
			return "", 0, 0, err
		}
	}
	return prec, cp, code, nil
}

// Pi05Model holds the packed weights. Its methods are not for concurrent use while loading; once
// Ready, programs of it run concurrently (the weights are read only).
type Pi05Model struct {
	c    *C.pi05_model
	prec Precision
	dims arch.Dims
	// release frees the memory the packed weights were attached from (NewPi05ModelPacked), after
	// the model is freed.
	release func() error
}

// NewPi05Model creates an empty model. isa forces a kernel family (tests); ISABest uses the best
// the CPU has (capped by TT_ISA). The Ref precision ignores it.
func NewPi05Model(d arch.Dims, prec Precision, isa ISA) (*Pi05Model, error) {
	prec, cp, code, err := pi05Args(prec, isa)
	if err != nil {
		return nil, err
	}
	e := newCerr()
	defer e.free()
	cd := dimsToC(d)
	m := C.pi05_model_new(&cd, cp, C.int(code), e.p, errLen)
	if m == nil {
		return nil, fmt.Errorf("pi05 model: %s", e)
	}
	return &Pi05Model{c: m, prec: prec, dims: d}, nil
}

// NewPi05ModelPacked makes a ready model over packed weights already in memory: packed must hold
// what Packed returned for a model of the same dims and precision, and layoutID what LayoutID said
// then; a different layout (another build's packing) is an error naming both. The memory is never
// written; release (may be nil) is called after the model is freed by Close, e.g. to unmap a file.
func NewPi05ModelPacked(d arch.Dims, prec Precision, isa ISA, packed []byte, layoutID uint64, release func() error) (*Pi05Model, error) {
	prec, cp, code, err := pi05Args(prec, isa)
	if err != nil {
		return nil, err
	}
	if len(packed) == 0 {
		return nil, fmt.Errorf("pi05 packed model: no packed weights")
	}
	e := newCerr()
	defer e.free()
	cd := dimsToC(d)
	m := C.pi05_model_new_packed(&cd, cp, C.int(code), unsafe.Pointer(&packed[0]), C.size_t(len(packed)),
		C.uint64_t(layoutID), e.p, errLen)
	if m == nil {
		return nil, fmt.Errorf("pi05 packed model: %s", e)
	}
	return &Pi05Model{c: m, prec: prec, dims: d, release: release}, nil
}

// Packed views the packed weights of the model (valid until Close): the bytes a packed-weights
// cache stores. They are the same whatever order the tensors were set in.
func (m *Pi05Model) Packed() []byte {
	var n C.size_t
	p := C.pi05_model_packed(m.c, &n)
	return unsafe.Slice((*byte)(p), int(n))
}

// LayoutID names the layout of Packed's bytes (NewPi05ModelPacked checks it).
func (m *Pi05Model) LayoutID() uint64 { return uint64(C.pi05_model_layout_id(m.c)) }

// SetTensor hands one checkpoint tensor (raw little-endian bytes of dtype F32 or BF16) to the
// model under its lerobot name; it is copied and packed at once. used is false for names that are
// not part of pi0.5. Calls for different tensors may run concurrently (parallel loading).
func (m *Pi05Model) SetTensor(name string, dtype DType, shape []int, raw []byte) (used bool, err error) {
	dt, cshape, data, err := tensorArgs(name, dtype, shape, raw)
	if err != nil {
		return false, fmt.Errorf("pi05 %w", err)
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	e := newCerr()
	defer e.free()
	rc := C.pi05_model_set(m.c, cname, dt, &cshape[0], C.int(len(shape)), data, e.p, errLen)
	switch {
	case rc == 1:
		return false, nil
	case rc != 0:
		return false, fmt.Errorf("pi05: %s", e)
	}
	return true, nil
}

// SetF32 is SetTensor for float32 values.
func (m *Pi05Model) SetF32(name string, shape []int, data []float32) (bool, error) {
	return m.SetTensor(name, DTypeF32, shape, F32Bytes(data))
}

// Ready reports every expected tensor not yet set (the first few by name, then a count).
func (m *Pi05Model) Ready() error {
	e := newCerr()
	defer e.free()
	if C.pi05_model_ready(m.c, e.p, errLen) != 0 {
		return fmt.Errorf("pi05: %s", e)
	}
	return nil
}

// TensorNames lists the lerobot names the model expects, in load order.
func (m *Pi05Model) TensorNames() []string {
	n := int(C.pi05_model_tensor_count(m.c))
	out := make([]string, n)
	for i := range out {
		out[i] = C.GoString(C.pi05_model_tensor_name(m.c, C.int(i)))
	}
	return out
}

// Bytes is the memory of the packed weights.
func (m *Pi05Model) Bytes() int64 { return int64(C.pi05_model_bytes(m.c)) }

// ISA names the kernel family ("reference" for Pi05Ref).
func (m *Pi05Model) ISA() string { return C.GoString(C.pi05_model_isa(m.c)) }

// Precision is the path the model was created for.
func (m *Pi05Model) Precision() Precision { return m.prec }

// Dims are the model's shapes.
func (m *Pi05Model) Dims() arch.Dims { return m.dims }

// Close frees the weights (and releases memory they were attached from); programs of this model
// must be closed first.
func (m *Pi05Model) Close() error {
	if m.c == nil {
		return nil
	}
	C.pi05_model_free(m.c)
	m.c = nil
	if m.release != nil {
		return m.release()
	}
	return nil
}

// FLOPs of one call (a multiply-add counts 2), for GFLOP/s reports.
func (m *Pi05Model) FlopsVision(cams int) float64 {
	return float64(C.pi05_flops_vision(m.c, C.int(cams)))
}

// FlopsPrefix counts the PREFIX over prefixLen valid tokens.
func (m *Pi05Model) FlopsPrefix(prefixLen int) float64 {
	return float64(C.pi05_flops_prefix(m.c, C.int(prefixLen)))
}

// FlopsExpertStep counts one Euler step of one request.
func (m *Pi05Model) FlopsExpertStep(prefixLen, horizon int) float64 {
	return float64(C.pi05_flops_expert_step(m.c, C.int(prefixLen), C.int(horizon)))
}

func presetToC(p arch.Preset) C.pi05_preset {
	return C.pi05_preset{cams: C.int(p.Cams), text_bucket: C.int(p.TextBucket),
		action_rows: C.int(p.ActionRows), max_batch: C.int(p.MaxBatch)}
}

// Pi05PresetValid reports whether p is one of the original pi0.5 package's presets.
func Pi05PresetValid(p arch.Preset) bool {
	c := presetToC(p)
	return C.pi05_preset_valid(&c) != 0
}

// Pi05Program is a model specialised for one preset, with its scratch and thread pool. Calls on
// one program are serialized (it has one set of scratch buffers); use several for concurrency.
type Pi05Program struct {
	mu     sync.Mutex
	c      *C.pi05_program
	m      *Pi05Model
	preset arch.Preset
}

// NewProgram allocates the preset's scratch and starts threads (<= 0: DefaultThreads()).
func (m *Pi05Model) NewProgram(p arch.Preset, threads int) (*Pi05Program, error) {
	e := newCerr()
	defer e.free()
	cp := presetToC(p)
	c := C.pi05_program_new(m.c, &cp, C.int(threads), e.p, errLen)
	if c == nil {
		return nil, fmt.Errorf("pi05: %s", e)
	}
	return &Pi05Program{c: c, m: m, preset: p}, nil
}

// Preset is the program's preset.
func (p *Pi05Program) Preset() arch.Preset { return p.preset }

// Threads is the size of the program's thread pool.
func (p *Pi05Program) Threads() int { return int(C.pi05_program_threads(p.c)) }

// ScratchBytes is the memory of the program's scratch.
func (p *Pi05Program) ScratchBytes() int64 { return int64(C.pi05_program_bytes(p.c)) }

// Pin pins the program's pool thread i (1..Threads()-1) to cpus[i % len(cpus)]; thread 0 is the
// one that calls the stages, which pins itself (golang.org/x/sys/unix.SchedSetaffinity on a locked
// OS thread).
func (p *Pi05Program) Pin(cpus []int) error {
	if len(cpus) == 0 {
		return nil
	}
	cc := make([]C.int, len(cpus))
	for i, c := range cpus {
		cc[i] = C.int(c)
	}
	e := newCerr()
	defer e.free()
	p.mu.Lock()
	defer p.mu.Unlock()
	if C.pi05_program_pin(p.c, &cc[0], C.int(len(cc)), e.p, errLen) != 0 {
		return fmt.Errorf("pi05: %s", e)
	}
	return nil
}

// Plan is the program's GEMM blocking plan in its text form ("m<=128:kc=...;kc=...").
func (p *Pi05Program) Plan() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return planString(func(buf *C.char, n C.size_t) C.int { return C.pi05_program_plan(p.c, buf, n) })
}

// SetPlan sets the GEMM blocking plan (text form); results are bit-identical under every plan.
func (p *Pi05Program) SetPlan(plan string) error {
	cs := C.CString(plan)
	defer C.free(unsafe.Pointer(cs))
	e := newCerr()
	defer e.free()
	p.mu.Lock()
	defer p.mu.Unlock()
	if C.pi05_program_set_plan(p.c, cs, e.p, errLen) != 0 {
		return fmt.Errorf("pi05: %s", e)
	}
	return nil
}

// Tune times candidate blockings on the model's weights at the preset's row counts (best of reps
// runs each) and keeps the fastest per row class; it returns how many timings it made.
func (p *Pi05Program) Tune(reps int) (int, error) {
	e := newCerr()
	defer e.free()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := int(C.pi05_program_tune(p.c, C.int(reps), e.p, errLen))
	if n < 0 {
		return 0, fmt.Errorf("pi05 tune: %s", e)
	}
	return n, nil
}

// Close stops the threads and frees the scratch; its slabs must be closed first.
func (p *Pi05Program) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c != nil {
		C.pi05_program_free(p.c)
		p.c = nil
	}
}

// Pi05Slab is one request's state: image tokens after Vision, per-layer K/V after Prefix.
type Pi05Slab struct {
	c *C.pi05_slab
	p *Pi05Program
}

// NewSlab allocates a slab for requests of this program.
func (p *Pi05Program) NewSlab() (*Pi05Slab, error) {
	e := newCerr()
	defer e.free()
	c := C.pi05_slab_new(p.c, e.p, errLen)
	if c == nil {
		return nil, fmt.Errorf("pi05: %s", e)
	}
	return &Pi05Slab{c: c, p: p}, nil
}

// Close frees the slab.
func (s *Pi05Slab) Close() {
	if s.c != nil {
		C.pi05_slab_free(s.c)
		s.c = nil
	}
}

// Bytes is the slab's memory.
func (s *Pi05Slab) Bytes() int64 { return int64(C.pi05_slab_bytes(s.c)) }

// CopyFrom copies src's image tokens and prefix K/V into s: slabs of one program, or of two programs
// of the same model and preset (the C side checks; other pairs are refused), e.g. a prefix handed
// from a prefix program to an expert program. Only s's program is locked: src's program may be
// running on its other slabs (a disaggregated prefix device keeps working), but nothing may write
// src meanwhile.
func (s *Pi05Slab) CopyFrom(src *Pi05Slab) error {
	if src == nil || src.c == nil || s.c == nil {
		return fmt.Errorf("pi05 slab copy: closed slab")
	}
	e := newCerr()
	defer e.free()
	s.p.mu.Lock() // not while a run of this program uses s
	defer s.p.mu.Unlock()
	if C.pi05_slab_copy(s.c, src.c, e.p, errLen) != 0 {
		return fmt.Errorf("pi05: %s", e)
	}
	return nil
}

// PrefixLen is the number of valid prefix tokens after Prefix (-1 before).
func (s *Pi05Slab) PrefixLen() int { return int(C.pi05_slab_prefix_len(s.c)) }

func boolsToC(b []bool) []C.uint8_t {
	out := make([]C.uint8_t, len(b)+1)
	for i, v := range b {
		if v {
			out[i] = 1
		}
	}
	return out
}

func (p *Pi05Program) own(s *Pi05Slab) error {
	if s == nil || s.c == nil || s.p != p {
		return fmt.Errorf("pi05: the slab does not belong to this program")
	}
	return nil
}

// Vision runs SigLIP + the projector: images [Cams][3][Image][Image] in [-1, 1], camMask[Cams]
// (false: camera missing, skipped).
func (p *Pi05Program) Vision(s *Pi05Slab, images []float32, camMask []bool) error {
	d := p.m.dims
	if err := p.own(s); err != nil {
		return err
	}
	want := p.preset.Cams * 3 * d.Image * d.Image
	if len(images) != want || len(camMask) != p.preset.Cams {
		return fmt.Errorf("pi05 vision: %d image values and %d camera flags, want %d and %d (%d cameras of 3x%dx%d)",
			len(images), len(camMask), want, p.preset.Cams, p.preset.Cams, d.Image, d.Image)
	}
	cm := boolsToC(camMask)
	e := newCerr()
	defer e.free()
	p.mu.Lock()
	defer p.mu.Unlock()
	if C.pi05_vision(p.c, s.c, (*C.float)(&images[0]), &cm[0], e.p, errLen) != 0 {
		return fmt.Errorf("pi05: %s", e)
	}
	return nil
}

// Prefix runs the Gemma prefix over the slab's image tokens and the real text tokens
// (tokens[i] with mask[i] true; len(tokens) <= TextBucket) and keeps the per-layer K/V.
func (p *Pi05Program) Prefix(s *Pi05Slab, tokens []int32, mask []bool) error {
	if err := p.own(s); err != nil {
		return err
	}
	if len(tokens) != len(mask) {
		return fmt.Errorf("pi05 prefix: %d tokens but %d mask flags", len(tokens), len(mask))
	}
	tk := make([]C.int32_t, len(tokens)+1)
	for i, t := range tokens {
		tk[i] = C.int32_t(t)
	}
	cm := boolsToC(mask)
	e := newCerr()
	defer e.free()
	p.mu.Lock()
	defer p.mu.Unlock()
	if C.pi05_prefix(p.c, s.c, &tk[0], &cm[0], C.int(len(tokens)), e.p, errLen) != 0 {
		return fmt.Errorf("pi05: %s", e)
	}
	return nil
}

// Expert runs the whole denoising loop for one request: noise [horizon][ActionDim] -> actions.
func (p *Pi05Program) Expert(s *Pi05Slab, noise []float32, horizon, steps int) ([]float32, error) {
	return p.ExpertBatch([]*Pi05Slab{s}, noise, horizon, steps, true)
}

// ExpertGuided is Expert with real-time chunking guidance (g nil: none).
func (p *Pi05Program) ExpertGuided(s *Pi05Slab, noise []float32, horizon, steps int, g *Pi05Guide) ([]float32, error) {
	return p.ExpertBatchGuided([]*Pi05Slab{s}, noise, horizon, steps, true, []*Pi05Guide{g})
}

// ExpertBatch runs len(slabs) requests in one call; noise and the result are
// [len(slabs)][horizon][ActionDim]. pack=true shares each linear layer's GEMM across the requests
// (each weight read once per step); pack=false (PI05_EXPERT_PACK=0) runs them per request. Both are
// bit-identical to Expert on each request.
func (p *Pi05Program) ExpertBatch(slabs []*Pi05Slab, noise []float32, horizon, steps int, pack bool) ([]float32, error) {
	return p.ExpertBatchGuided(slabs, noise, horizon, steps, pack, nil)
}

// Pi05Guide is real-time chunking for one request of an EXPERT call (pi05.h, pi05_guide): Prev and
// Weights are [horizon][ActionDim] in model space; a weight of 0 leaves that value unguided.
type Pi05Guide struct {
	Prev, Weights []float32
	MaxGuidance   float32
}

// ExpertBatchGuided is ExpertBatch with a guide per request (guides nil, or a nil entry: unguided).
func (p *Pi05Program) ExpertBatchGuided(slabs []*Pi05Slab, noise []float32, horizon, steps int, pack bool, guides []*Pi05Guide) ([]float32, error) {
	ad := p.m.dims.ActionDim
	if len(slabs) == 0 {
		return nil, fmt.Errorf("pi05 expert: no request")
	}
	if horizon < 1 || len(noise) != len(slabs)*horizon*ad {
		return nil, fmt.Errorf("pi05 expert: noise has %d values, want %d (%d requests x horizon %d x %d)",
			len(noise), len(slabs)*max(horizon, 0)*ad, len(slabs), horizon, ad)
	}
	if guides != nil && len(guides) != len(slabs) {
		return nil, fmt.Errorf("pi05 expert: %d guides for %d requests", len(guides), len(slabs))
	}
	cs := make([]*C.pi05_slab, len(slabs)) // C pointers only: may be passed to C
	for i, s := range slabs {
		if err := p.own(s); err != nil {
			return nil, fmt.Errorf("pi05 expert: request %d: %w", i, err)
		}
		cs[i] = s.c
	}
	// The guides point at Go memory: pinned for the call, as cgo requires of Go memory holding Go pointers.
	var pin runtime.Pinner
	defer pin.Unpin()
	var cg **C.pi05_guide
	if guides != nil {
		structs := make([]C.pi05_guide, len(guides))
		ptrs := make([]*C.pi05_guide, len(guides))
		for i, g := range guides {
			if g == nil {
				continue
			}
			if len(g.Prev) != horizon*ad || len(g.Weights) != horizon*ad {
				return nil, fmt.Errorf("pi05 expert: guide %d has %d prev and %d weight values, want %d (horizon %d x %d)",
					i, len(g.Prev), len(g.Weights), horizon*ad, horizon, ad)
			}
			pin.Pin(&g.Prev[0])
			pin.Pin(&g.Weights[0])
			structs[i] = C.pi05_guide{prev: (*C.float)(&g.Prev[0]), weights: (*C.float)(&g.Weights[0]), max_guidance: C.float(g.MaxGuidance)}
			pin.Pin(&structs[i])
			ptrs[i] = &structs[i]
		}
		pin.Pin(&ptrs[0])
		cg = &ptrs[0]
	}
	out := make([]float32, len(noise))
	e := newCerr()
	defer e.free()
	pk := C.int(0)
	if pack {
		pk = 1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if C.pi05_expert_batch_guided(p.c, &cs[0], C.int(len(slabs)), (*C.float)(&noise[0]), C.int(horizon), C.int(steps),
		pk, cg, (*C.float)(&out[0]), e.p, errLen) != 0 {
		return nil, fmt.Errorf("pi05: %s", e)
	}
	return out, nil
}

// SavePrefix returns the slab's prefix (its valid length and per-layer K/V) as a blob that
// LoadPrefix puts into a slab of any program of a model with the same shapes, precision and kernel
// family (pi05.h, pi05_slab_save).
func (s *Pi05Slab) SavePrefix() ([]byte, error) {
	s.p.mu.Lock() // not while a run of the program writes the slab
	defer s.p.mu.Unlock()
	n := int(C.pi05_slab_save_bytes(s.c))
	if n == 0 {
		return nil, fmt.Errorf("pi05 slab save: the slab has no prefix")
	}
	blob := make([]byte, n)
	e := newCerr()
	defer e.free()
	if C.pi05_slab_save(s.c, unsafe.Pointer(&blob[0]), C.size_t(n), e.p, errLen) != 0 {
		return nil, fmt.Errorf("pi05: %s", e)
	}
	return blob, nil
}

// LoadPrefix replaces the slab's state with a saved prefix; Expert on it then gives what Expert on
// the saved slab gave, bit for bit. A blob of another model's layout is refused, naming the field.
func (s *Pi05Slab) LoadPrefix(blob []byte) error {
	if len(blob) == 0 {
		return fmt.Errorf("pi05 slab load: empty blob")
	}
	e := newCerr()
	defer e.free()
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if C.pi05_slab_load(s.c, unsafe.Pointer(&blob[0]), C.size_t(len(blob)), e.p, errLen) != 0 {
		return fmt.Errorf("pi05: %s", e)
	}
	return nil
}

// KV returns one layer's prefix K (after RoPE) and V, each [KVHeads][PrefixLen][HeadDim] (tests).
func (s *Pi05Slab) KV(layer int) (k, v []float32, err error) {
	d := s.p.m.dims
	n := s.PrefixLen()
	if n < 0 {
		return nil, nil, fmt.Errorf("pi05: no prefix in the slab")
	}
	k = make([]float32, d.KVHeads*n*d.HeadDim+1)
	v = make([]float32, len(k))
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if C.pi05_slab_kv(s.c, C.int(layer), (*C.float)(&k[0]), (*C.float)(&v[0])) != 0 {
		return nil, nil, fmt.Errorf("pi05: slab layer %d: no K/V", layer)
	}
	return k[:len(k)-1], v[:len(v)-1], nil
}

// ImageTokens returns the projected image tokens of the present cameras [rows][Width] (tests).
func (s *Pi05Slab) ImageTokens() ([]float32, int, error) {
	d := s.p.m.dims
	out := make([]float32, s.p.preset.Cams*(d.Image/d.Patch)*(d.Image/d.Patch)*d.LWidth+1)
	var rows C.int
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if C.pi05_slab_image_tokens(s.c, (*C.float)(&out[0]), &rows) != 0 {
		return nil, 0, fmt.Errorf("pi05: no image tokens in the slab (run Vision)")
	}
	return out[:int(rows)*d.LWidth], int(rows), nil
}

// Pi05LayoutID is the layout id a model of these dims and precision packs (what packed weights
// written by this build carry), without packing anything.
func Pi05LayoutID(d arch.Dims, prec Precision) (uint64, error) {
	m, err := NewPi05Model(d, prec, ISABest)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	return m.LayoutID(), nil
}
