package native

/*
#include <stdlib.h>
#include "tt_cpu.h"
#include "tt_gemm.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// The shape of the cgo boundary, the same for every model: a kernel family (ISA) checked against
// this CPU once, a precision, tensors handed over by name with a dtype, and C error messages
// through one buffer type.

// ISA names a kernel family. The zero value is the best this CPU has (capped by TT_ISA).
type ISA string

// The kernel families (tt_cpu.h).
const (
	ISABest       ISA = ""
	ISAScalar     ISA = "scalar"
	ISAAVX2       ISA = "avx2"
	ISAAVX512     ISA = "avx512"
	ISAAVX512BF16 ISA = "avx512bf16"
	// ISAAMXBF16 runs the bf16 GEMM on AMX tiles (tdpbf16ps); everything else as ISAAVX512BF16.
	ISAAMXBF16 ISA = "amxbf16"
)

// ParseISA checks a kernel family name and that this CPU can run it ("" is the best it has).
func ParseISA(s string) (ISA, error) {
	isa := ISA(s)
	_, err := isa.code()
	return isa, err
}

// ISACapEnv caps the kernel family (tt_cpu_best_isa reads it).
const ISACapEnv = "TT_ISA"

// CheckISACap checks a value of ISACapEnv ("" is no cap): the kernels skip a name they do not know,
// so a typo would leave the cap off in silence. A cap above what this CPU has is no error: the
// kernels take the best family at or below it.
func CheckISACap(value string) error {
	if value == "" {
		return nil
	}
	if _, err := ISA(value).lookup(); err != nil {
		return fmt.Errorf("%s=%q: want scalar, avx2, avx512, avx512bf16 or amxbf16 (a cap on the kernel family)", ISACapEnv, value)
	}
	return nil
}

// code resolves the family to its tt_isa value; a family this CPU lacks is an error.
func (i ISA) code() (C.tt_isa, error) {
	if i == ISABest {
		return C.tt_cpu_best_isa(), nil
	}
	c, err := i.lookup()
	if err != nil {
		return 0, err
	}
	if C.tt_cpu_supports(c) == 0 {
		return 0, fmt.Errorf("isa %s: not supported by this CPU (%s)", i, DetectCPU())
	}
	return c, nil
}

// lookup finds the tt_isa value of a family name, whatever this CPU has.
func (i ISA) lookup() (C.tt_isa, error) {
	for c := C.tt_isa(C.TT_ISA_SCALAR); c <= C.TT_ISA_LAST; c++ {
		if C.GoString(C.tt_isa_name(c)) == string(i) {
			return c, nil
		}
	}
	return 0, fmt.Errorf("isa %q: want scalar, avx2, avx512, avx512bf16 or amxbf16", string(i))
}

// Precision selects a model's arithmetic.
type Precision string

const (
	// Ref is pi0.5's scalar fp32 reference path: plain loops, one thread, fp32 weights (small
	// checkpoints and tests). RF-DETR's reference is its scalar ISA instead.
	Ref Precision = "ref"
	// FP32 runs the fast kernels in fp32.
	FP32 Precision = "fp32"
	// BF16 rounds weights and matmul inputs to bf16 and accumulates in fp32.
	BF16 Precision = "bf16"
)

// ParsePrecision reads the value of the precision variable named variable ("" is def); allowed
// lists what the model has.
func ParsePrecision(variable, value string, def Precision, allowed ...Precision) (Precision, error) {
	if value == "" {
		return def, nil
	}
	for _, p := range allowed {
		if Precision(value) == p {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s=%q: want one of %v", variable, value, allowed)
}

// DType is the element type of a tensor handed to a model, by its safetensors name.
type DType string

// The dtypes the kernels take (tt_dtype).
const (
	DTypeF32  DType = "F32"
	DTypeBF16 DType = "BF16"
)

// elem returns the tt_dtype value and the element size of d.
func (d DType) elem() (C.int, int, error) {
	switch d {
	case DTypeF32:
		return C.TT_F32, 4, nil
	case DTypeBF16:
		return C.TT_BF16, 2, nil
	}
	return 0, 0, fmt.Errorf("dtype %s (want F32 or BF16)", string(d))
}

// tensorArgs checks raw against shape and dtype and returns what the C setters take.
func tensorArgs(name string, dtype DType, shape []int, raw []byte) (dt C.int, cshape []C.int64_t, data unsafe.Pointer, err error) {
	dt, size, err := dtype.elem()
	if err != nil {
		return 0, nil, nil, fmt.Errorf("tensor %s: %w", name, err)
	}
	n := 1
	cshape = make([]C.int64_t, len(shape)+1)
	for i, s := range shape {
		n *= s
		cshape[i] = C.int64_t(s)
	}
	if n*size != len(raw) {
		return 0, nil, nil, fmt.Errorf("tensor %s: %d bytes for shape %v of %s", name, len(raw), shape, dtype)
	}
	if len(raw) > 0 {
		data = unsafe.Pointer(&raw[0])
	}
	return dt, cshape, data, nil
}

// F32Bytes views float32 values as the raw little-endian bytes SetTensor takes (no copy).
func F32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

const errLen = 1024

// cerr is a C buffer for the error message of one C call.
type cerr struct{ p *C.char }

func newCerr() cerr           { return cerr{(*C.char)(C.malloc(errLen))} }
func (e cerr) free()          { C.free(unsafe.Pointer(e.p)) }
func (e cerr) String() string { return C.GoString(e.p) }
