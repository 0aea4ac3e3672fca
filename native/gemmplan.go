package native

/*
#include <stdlib.h>
#include "tt_gemm_plan.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// GEMM blocking plans (kernels/common/tt_gemm_plan.h): how the packed GEMM walks K, rows and
// panels. A program starts with the plan derived from the CPU's L1 data cache; Tune times
// candidates on the program's real shapes; every plan gives bit-identical results.

// planString reads a plan's text form from a C formatter (as snprintf).
func planString(format func(buf *C.char, n C.size_t) C.int) string {
	buf := (*C.char)(C.malloc(512))
	defer C.free(unsafe.Pointer(buf))
	format(buf, 512)
	return C.GoString(buf)
}

// DefaultGEMMPlan is the plan a program starts with on this CPU: one class, the K block derived
// from the L1 data cache size.
func DefaultGEMMPlan() string {
	var p C.tt_gemm_plan
	C.tt_gemm_plan_default(&p)
	return planString(func(buf *C.char, n C.size_t) C.int { return C.tt_gemm_plan_format(&p, buf, n) })
}

// GEMMBlockingCandidates lists every blocking the tuner may choose (every combination of the
// values it tries per coordinate), each as a one-class plan, so that tests can force each variant.
func GEMMBlockingCandidates() []string {
	var c [256]C.tt_blocking
	n := int(C.tt_blocking_candidates(&c[0], 256))
	out := make([]string, n)
	for i := range out {
		p := C.tt_gemm_plan{n: 1}
		p.b[0] = c[i]
		out[i] = planString(func(buf *C.char, n C.size_t) C.int { return C.tt_gemm_plan_format(&p, buf, n) })
	}
	return out
}

// CheckGEMMPlan parses a plan's text form and names what is wrong with it.
func CheckGEMMPlan(plan string) error {
	cs := C.CString(plan)
	defer C.free(unsafe.Pointer(cs))
	e := newCerr()
	defer e.free()
	var p C.tt_gemm_plan
	if C.tt_gemm_plan_parse(&p, cs, e.p, errLen) != 0 {
		return fmt.Errorf("gemm plan: %s", e)
	}
	return nil
}

// L1DataCacheBytes is one core's L1 data cache as the CPU reports it (0 when unknown).
func L1DataCacheBytes() int { return int(C.tt_l1d_bytes()) }
