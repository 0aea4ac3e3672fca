package native

/*
#include <stdlib.h>
#include "rfdetr.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// RF-DETR-base dimensions fixed by the program.
const (
	RFDETRResolution = C.RFDETR_RES
	RFDETRQueries    = C.RFDETR_QUERIES
	RFDETRClasses    = C.RFDETR_CLASSES
	RFDETRTokens     = C.RFDETR_TOKENS
)

// Tensor is a row-major float32 tensor with its PyTorch shape.
type Tensor struct {
	Shape []int
	Data  []float32
}

// WeightSpec names one tensor the RF-DETR program needs, by its original
// rfdetr checkpoint name, with the shape it must have. MinRows != 0 means
// Shape[0] may be any value >= MinRows (only the first MinRows rows are used).
type WeightSpec struct {
	Name    string
	Shape   []int
	MinRows int
}

// RFDETRWeights lists the tensors LoadRFDETR needs, in load order.
func RFDETRWeights() []WeightSpec {
	n := int(C.rfdetr_weight_count())
	specs := make([]WeightSpec, n)
	buf := (*C.char)(C.malloc(256))
	defer C.free(unsafe.Pointer(buf))
	var dims [4]C.int
	for i := range specs {
		C.rfdetr_weight_name(C.int(i), buf, 256)
		rank := int(C.rfdetr_weight_shape(C.int(i), &dims[0]))
		shape := make([]int, rank)
		for d := range shape {
			shape[d] = int(dims[d])
		}
		specs[i] = WeightSpec{Name: C.GoString(buf), Shape: shape, MinRows: int(C.rfdetr_weight_min_rows(C.int(i)))}
	}
	return specs
}

// RFDETROptions configure NewRFDETR.
type RFDETROptions struct {
	Precision Precision // FP32 (the default, "") or BF16
	Threads   int       // <= 0: DefaultThreads()
	// ISA forces a kernel family (tests and triage); ISABest picks the best the CPU supports.
	// ISAScalar is RF-DETR's reference path.
	ISA ISA
}

// RFDETROutput is one forward's result.
type RFDETROutput struct {
	Logits [RFDETRQueries][RFDETRClasses]float32 // raw class logits, COCO ids 0..90
	Boxes  [RFDETRQueries][4]float32             // normalized cx, cy, w, h
}

// RFDETRStage names an intermediate result kept after a forward.
type RFDETRStage int

// Stages, with their float counts in the comments.
const (
	StageTap0   RFDETRStage = C.RFDETR_STAGE_TAP0   // [1600][384] after layer 1, final LN, token y*40+x
	StageTap1   RFDETRStage = C.RFDETR_STAGE_TAP1   // after layer 4
	StageTap2   RFDETRStage = C.RFDETR_STAGE_TAP2   // after layer 7
	StageTap3   RFDETRStage = C.RFDETR_STAGE_TAP3   // after layer 10
	StageMemory RFDETRStage = C.RFDETR_STAGE_MEMORY // [1600][256] projector output
	StageTopK   RFDETRStage = C.RFDETR_STAGE_TOPK   // [300] selected token indices, best first
	StageRef    RFDETRStage = C.RFDETR_STAGE_REF    // [300][4] reference boxes cx, cy, w, h
	StageHS     RFDETRStage = C.RFDETR_STAGE_HS     // [300][256] decoder output
	StageScore  RFDETRStage = C.RFDETR_STAGE_SCORE  // [1600] encoder score (best class logit) per token
)

// RFDETR is the program: packed weights, scratch and a thread pool. Load it with NewRFDETR, one
// SetTensor per weight (in RFDETRWeights order: LayerScales are folded into the projections after
// them), then Ready.
type RFDETR struct {
	mu        sync.Mutex
	p         *C.rfdetr
	precision Precision
	threads   int
	release   func() error // frees what NewRFDETRPacked's weights came from, after the program
}

// rfdetrArgs resolves the options' precision and ISA.
func rfdetrArgs(opts RFDETROptions) (Precision, C.rfdetr_precision, C.tt_isa, error) {
	prec := opts.Precision
	if prec == "" {
		prec = FP32
	}
	var cprec C.rfdetr_precision
	switch prec {
	case FP32:
		cprec = C.RFDETR_FP32
	case BF16:
		cprec = C.RFDETR_BF16
	default:
		return "", 0, 0, fmt.Errorf("rf-detr precision %q: want fp32 or bf16 (the scalar ISA is its reference path)", prec)
	}
	isa, err := opts.ISA.code()
	return prec, cprec, isa, err
}

// NewRFDETR creates an empty program.
func NewRFDETR(opts RFDETROptions) (*RFDETR, error) {
	prec, cprec, isa, err := rfdetrArgs(opts)
	if err != nil {
		return nil, err
	}
	p := C.rfdetr_new(cprec, C.int(opts.Threads), isa)
	if p == nil {
		return nil, errors.New("rf-detr: out of memory or cannot start threads")
	}
	return &RFDETR{p: p, precision: prec, threads: int(C.rfdetr_threads(p))}, nil
}

// NewRFDETRPacked makes a finished program over packed weights already in memory: packed must
// hold what Packed returned for a program of the same precision, and layoutID what LayoutID said
// then (another build's layout is an error naming both). The memory is never written; release
// (may be nil) is called after the program is freed by Close, e.g. to unmap a file.
func NewRFDETRPacked(opts RFDETROptions, packed []byte, layoutID uint64, release func() error) (*RFDETR, error) {
	prec, cprec, isa, err := rfdetrArgs(opts)
	if err != nil {
		return nil, err
	}
	if len(packed) == 0 {
		return nil, errors.New("rf-detr packed program: no packed weights")
	}
	e := newCerr()
	defer e.free()
	p := C.rfdetr_new_packed(cprec, C.int(opts.Threads), isa, unsafe.Pointer(&packed[0]), C.size_t(len(packed)),
		C.uint64_t(layoutID), e.p, errLen)
	if p == nil {
		return nil, fmt.Errorf("rf-detr packed program: %s", e)
	}
	return &RFDETR{p: p, precision: prec, threads: int(C.rfdetr_threads(p)), release: release}, nil
}

// Packed views the packed weights of a finished program (valid until Close): the bytes a
// packed-weights cache stores, the same whatever order the tensors were set in.
func (m *RFDETR) Packed() []byte {
	var n C.size_t
	p := C.rfdetr_packed(m.p, &n)
	return unsafe.Slice((*byte)(p), int(n))
}

// LayoutID names the layout of Packed's bytes (NewRFDETRPacked checks it).
func (m *RFDETR) LayoutID() uint64 { return uint64(C.rfdetr_layout_id(m.p)) }

// SetTensor hands one checkpoint tensor (raw little-endian bytes of dtype F32 or BF16) to the
// program under its rfdetr name; it is copied and packed at once. used is false for names that are
// not weights of the program.
func (m *RFDETR) SetTensor(name string, dtype DType, shape []int, raw []byte) (used bool, err error) {
	dt, cshape, data, err := tensorArgs(name, dtype, shape, raw)
	if err != nil {
		return false, fmt.Errorf("rf-detr %w", err)
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	e := newCerr()
	defer e.free()
	m.mu.Lock()
	defer m.mu.Unlock()
	switch rc := C.rfdetr_set(m.p, cname, dt, &cshape[0], C.int(len(shape)), data, e.p, errLen); rc {
	case 0:
		return true, nil
	case 1:
		return false, nil
	}
	return false, fmt.Errorf("rf-detr weight %s", e)
}

// Ready finishes loading; it names the first weight not set.
func (m *RFDETR) Ready() error {
	e := newCerr()
	defer e.free()
	m.mu.Lock()
	defer m.mu.Unlock()
	if C.rfdetr_finish(m.p, e.p, errLen) != 0 {
		return fmt.Errorf("rf-detr: %s", e)
	}
	return nil
}

// LoadRFDETRFunc builds a program from a lookup: each weight of RFDETRWeights is requested once,
// in order, handed over with SetTensor and not referenced after the lookup's next call. Every
// missing or mis-shaped weight is reported, not just the first.
func LoadRFDETRFunc(lookup func(name string) (Tensor, bool), opts RFDETROptions) (*RFDETR, error) {
	m, err := NewRFDETR(opts)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, s := range RFDETRWeights() {
		t, ok := lookup(s.Name)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: missing (want shape %v)", s.Name, s.Shape))
			continue
		}
		if err := checkShape(s, t); err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if len(problems) > 0 {
			continue
		}
		if _, err := m.SetTensor(s.Name, DTypeF32, t.Shape, F32Bytes(t.Data)); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) == 0 {
		if err := m.Ready(); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		m.Close()
		return nil, fmt.Errorf("rf-detr weights: %d problem(s): %s", len(problems), strings.Join(problems, "; "))
	}
	return m, nil
}

func checkShape(s WeightSpec, t Tensor) error {
	ok := len(t.Shape) == len(s.Shape)
	n := 1
	for i := 0; ok && i < len(s.Shape); i++ {
		if i == 0 && s.MinRows > 0 {
			ok = t.Shape[0] >= s.MinRows
		} else {
			ok = t.Shape[i] == s.Shape[i]
		}
	}
	for _, d := range t.Shape {
		n *= d
	}
	if !ok {
		if s.MinRows > 0 {
			return fmt.Errorf("%s: shape %v, want %v (first dimension at least %d)", s.Name, t.Shape, s.Shape, s.MinRows)
		}
		return fmt.Errorf("%s: shape %v, want %v", s.Name, t.Shape, s.Shape)
	}
	if len(t.Data) != n {
		return fmt.Errorf("%s: %d values for shape %v (want %d)", s.Name, len(t.Data), t.Shape, n)
	}
	return nil
}

// Forward runs the network once on pixels [3][560][560] (normalized CHW).
func (m *RFDETR) Forward(pixels []float32) (*RFDETROutput, error) {
	out := new(RFDETROutput)
	if err := m.ForwardInto(pixels, unsafe.Slice(&out.Logits[0][0], RFDETRQueries*RFDETRClasses),
		unsafe.Slice(&out.Boxes[0][0], RFDETRQueries*4)); err != nil {
		return nil, err
	}
	return out, nil
}

// ForwardInto is Forward writing into caller buffers (no allocation):
// logits [300*91] and boxes [300*4], row-major.
func (m *RFDETR) ForwardInto(pixels, logits, boxes []float32) error {
	const want = 3 * RFDETRResolution * RFDETRResolution
	if len(pixels) != want {
		return fmt.Errorf("rf-detr forward: %d pixels, want %d (3x560x560)", len(pixels), want)
	}
	if len(logits) != RFDETRQueries*RFDETRClasses || len(boxes) != RFDETRQueries*4 {
		return fmt.Errorf("rf-detr forward: output buffers of %d logits and %d box values, want %d and %d",
			len(logits), len(boxes), RFDETRQueries*RFDETRClasses, RFDETRQueries*4)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.p == nil {
		return errors.New("rf-detr forward: program is closed")
	}
	rc := C.rfdetr_forward(m.p, (*C.float)(unsafe.Pointer(&pixels[0])),
		(*C.float)(unsafe.Pointer(&logits[0])), (*C.float)(unsafe.Pointer(&boxes[0])))
	if rc != 0 {
		return errors.New("rf-detr forward: program not finished")
	}
	return nil
}

// Stage returns a copy of an intermediate result of the last Forward.
func (m *RFDETR) Stage(s RFDETRStage) ([]float32, error) {
	n := int(C.rfdetr_stage_size(C.rfdetr_stage(s)))
	if n <= 0 {
		return nil, fmt.Errorf("rf-detr stage %d: unknown", s)
	}
	out := make([]float32, n)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.p == nil {
		return nil, errors.New("rf-detr stage: program is closed")
	}
	C.rfdetr_stage_copy(m.p, C.rfdetr_stage(s), (*C.float)(unsafe.Pointer(&out[0])))
	return out, nil
}

// ForceSelection makes later forwards use these 300 memory tokens (best
// first) as the two-stage selection instead of the top-k of the encoder
// scores; nil restores top-k. For tests: fp32 summation order alone can swap
// two near-tied scores, after which the decoders of two programs see
// different queries; forcing one selection compares them on the same ones.
func (m *RFDETR) ForceSelection(tokens []int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.p == nil {
		return errors.New("rf-detr force selection: program is closed")
	}
	if tokens == nil {
		C.rfdetr_force_selection(m.p, nil)
		return nil
	}
	if len(tokens) != RFDETRQueries {
		return fmt.Errorf("rf-detr force selection: %d tokens, want %d", len(tokens), RFDETRQueries)
	}
	ct := make([]C.int, len(tokens))
	for i, v := range tokens {
		ct[i] = C.int(v)
	}
	if C.rfdetr_force_selection(m.p, &ct[0]) != 0 {
		return fmt.Errorf("rf-detr force selection: a token index is outside [0, %d)", RFDETRTokens)
	}
	return nil
}

// RFDETRTiming is the time split of the last forward, in seconds.
type RFDETRTiming struct {
	Total, Backbone, BackboneGEMM, Projector, Decoder float64
	BackboneGEMMFlops                                 float64 // multiply-adds x 2
	Flops                                             float64 // all GEMMs and attention matmuls
}

// LastTiming reports where the last Forward spent its time.
func (m *RFDETR) LastTiming() RFDETRTiming {
	m.mu.Lock()
	defer m.mu.Unlock()
	var t C.rfdetr_timing
	if m.p != nil {
		C.rfdetr_last_timing(m.p, &t)
	}
	return RFDETRTiming{Total: float64(t.total), Backbone: float64(t.backbone), BackboneGEMM: float64(t.backbone_gemm),
		Projector: float64(t.projector), Decoder: float64(t.decoder), BackboneGEMMFlops: float64(t.backbone_gemm_flops),
		Flops: float64(t.flops)}
}

// Plan is the program's GEMM blocking plan in its text form.
func (m *RFDETR) Plan() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return planString(func(buf *C.char, n C.size_t) C.int { return C.rfdetr_plan(m.p, buf, n) })
}

// SetPlan sets the GEMM blocking plan (text form); results are bit-identical under every plan.
func (m *RFDETR) SetPlan(plan string) error {
	cs := C.CString(plan)
	defer C.free(unsafe.Pointer(cs))
	e := newCerr()
	defer e.free()
	m.mu.Lock()
	defer m.mu.Unlock()
	if C.rfdetr_set_plan(m.p, cs, e.p, errLen) != 0 {
		return fmt.Errorf("rf-detr gemm plan %s: %s", plan, e)
	}
	return nil
}

// Tune times candidate blockings on the program's weights at the decoder's and the backbone's row
// counts (best of reps runs each) and keeps the fastest per class; it returns the timings made.
func (m *RFDETR) Tune(reps int) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.p == nil {
		return 0, errors.New("rf-detr tune: program is closed")
	}
	return int(C.rfdetr_tune(m.p, C.int(reps))), nil
}

// Threads is the size of the program's thread pool.
func (m *RFDETR) Threads() int { return m.threads }

// Precision is the GEMM precision the program was loaded with.
func (m *RFDETR) Precision() Precision { return m.precision }

// Bytes is the memory the program holds outside the Go heap: its packed weights (allocated, or the
// mapping it was given) and its scratch buffers.
func (m *RFDETR) Bytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.p == nil {
		return 0
	}
	return int64(C.rfdetr_bytes(m.p))
}

// Close frees the program's memory and stops its threads (and releases what its packed weights
// came from). Idempotent.
func (m *RFDETR) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.p == nil {
		return nil
	}
	C.rfdetr_free(m.p)
	m.p = nil
	if m.release != nil {
		return m.release()
	}
	return nil
}

// RFDETRLayoutID is the layout id a program of these options packs (what packed weights written by
// this build carry), without making one.
func RFDETRLayoutID(opts RFDETROptions) (uint64, error) {
	_, cprec, _, err := rfdetrArgs(opts)
	if err != nil {
		return 0, err
	}
	id := uint64(C.rfdetr_layout_id_for(cprec))
	if id == 0 {
		return 0, errors.New("rf-detr layout: out of memory")
	}
	return id, nil
}
