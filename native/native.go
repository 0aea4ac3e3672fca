// Package native is the only package that imports "C": it compiles the C
// megakernels of kernels/ (through the *_unity.c files of this folder) and
// exposes them as Go types. It holds no model policy: checkpoint name
// mapping, pre- and post-processing live in models/.
package native

/*
#cgo CFLAGS: -O3 -std=c11 -D_GNU_SOURCE -Wall -Wextra -I${SRCDIR}/../kernels/common -I${SRCDIR}/../kernels/rfdetr
#cgo LDFLAGS: -lm -lpthread
#include <stdlib.h>
#include "tt_cpu.h"
#include "tt_pool.h"
#include "tt_gemm.h"
#include "tt_selftest.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// CPUFeatures reports what the host CPU offers the kernels.
type CPUFeatures struct {
	AVX2, FMA, AVX512F, AVX512BW, AVX512VL, AVX512DQ, AVX512BF16, AVX512VNNI bool
	// AMXTile and AMXBF16: the CPU has them and the OS saves tile state (the process's
	// permission to use it is part of BestISA's amxbf16).
	AMXTile, AMXBF16 bool
	// BestISA is the kernel family the kernels use by default: scalar, avx2,
	// avx512, avx512bf16 or amxbf16 (capped by the TT_ISA environment variable).
	BestISA string
}

// DetectCPU reads the CPU feature flags (cpuid) once per call.
func DetectCPU() CPUFeatures {
	f := int(C.tt_cpu_features())
	has := func(bit C.int) bool { return f&int(bit) != 0 }
	return CPUFeatures{
		AVX2: has(C.TT_CPU_AVX2), FMA: has(C.TT_CPU_FMA),
		AVX512F: has(C.TT_CPU_AVX512F), AVX512BW: has(C.TT_CPU_AVX512BW),
		AVX512VL: has(C.TT_CPU_AVX512VL), AVX512DQ: has(C.TT_CPU_AVX512DQ),
		AVX512BF16: has(C.TT_CPU_AVX512BF16), AVX512VNNI: has(C.TT_CPU_AVX512VNNI),
		AMXTile: has(C.TT_CPU_AMXTILE), AMXBF16: has(C.TT_CPU_AMXBF16),
		BestISA: C.GoString(C.tt_isa_name(C.tt_cpu_best_isa())),
	}
}

// String lists the features present, e.g. "avx512bf16 (avx2 fma avx512f ...)".
func (c CPUFeatures) String() string {
	var names []string
	for _, f := range []struct {
		on   bool
		name string
	}{{c.AVX2, "avx2"}, {c.FMA, "fma"}, {c.AVX512F, "avx512f"}, {c.AVX512BW, "avx512bw"},
		{c.AVX512VL, "avx512vl"}, {c.AVX512DQ, "avx512dq"}, {c.AVX512BF16, "avx512bf16"},
		{c.AVX512VNNI, "avx512vnni"}, {c.AMXTile, "amx-tile"}, {c.AMXBF16, "amx-bf16"}} {
		if f.on {
			names = append(names, f.name)
		}
	}
	return fmt.Sprintf("%s (%s)", c.BestISA, strings.Join(names, " "))
}

// DefaultThreads is the thread count kernels use when none is given:
// TT_NUM_THREADS when set to a positive integer, else the CPUs this process
// may run on (sched_getaffinity).
func DefaultThreads() int { return int(C.tt_default_threads()) }

// peakArgs resolves a peak measurement's instruction family and dtype: ISABest is the one the
// GEMM of that precision uses here (PeakISA).
func peakArgs(isa ISA, precision string) (C.tt_isa, C.tt_dtype, error) {
	var dt C.tt_dtype
	switch precision {
	case "fp32":
		dt = C.TT_F32
	case "bf16":
		dt = C.TT_BF16
	default:
		return 0, 0, fmt.Errorf("peak: precision %q: want fp32 or bf16", precision)
	}
	if isa == ISABest {
		return C.tt_peak_isa(dt), dt, nil
	}
	c, err := isa.lookup()
	if err != nil {
		return 0, 0, fmt.Errorf("peak: %w", err)
	}
	return c, dt, nil
}

// PeakISA names the instructions PeakGFLOPS(ISABest, precision, ...) runs here: avx512 (FMA) for
// fp32; amxbf16 (tdpbf16ps on tiles) or avx512bf16 (vdpbf16ps) for bf16, whichever the bf16 GEMM
// uses; scalar when the CPU has none of them.
func PeakISA(precision string) (ISA, error) {
	c, _, err := peakArgs(ISABest, precision)
	if err != nil {
		return "", err
	}
	return ISA(C.GoString(C.tt_isa_name(c))), nil
}

// PeakGFLOPS measures one thread's multiply-add peak with the register-blocked loop of isa
// (ISABest: PeakISA's; avx512bf16 for vdpbf16ps on an AMX machine too) over about iters
// iterations of the vector loop; 0 when the CPU lacks the instructions.
func PeakGFLOPS(isa ISA, precision string, iters int) (float64, error) {
	c, dt, err := peakArgs(isa, precision)
	if err != nil {
		return 0, err
	}
	return float64(C.tt_peak_gflops_isa(c, dt, C.long(iters))), nil
}

// PeakGFLOPSThreads runs the PeakGFLOPS loop on `threads` threads at once
// and returns their summed GFLOP/s: the peak those threads reach together
// now (on a shared machine, less than threads x the 1-thread peak).
func PeakGFLOPSThreads(isa ISA, precision string, threads, iters int) (float64, error) {
	c, dt, err := peakArgs(isa, precision)
	if err != nil {
		return 0, err
	}
	pool := C.tt_pool_create(C.int(threads))
	if pool == nil {
		return 0, fmt.Errorf("peak: cannot start %d threads", threads)
	}
	defer C.tt_pool_destroy(pool)
	return float64(C.tt_peak_gflops_pool_isa(pool, c, dt, C.long(iters))), nil
}

// ErrISAUnsupported is wrapped by RunKernelSelfTest for a case whose ISA
// this CPU cannot run: the case did not run, and is not a pass.
var ErrISAUnsupported = errors.New("ISA not supported by this CPU")

// KernelSelfTests names the C self-test cases of kernels/common: one per
// kernel and ISA it has an implementation for ("gemm/avx512bf16"), or one
// for a kernel without ISA ("pool").
func KernelSelfTests() []string {
	n := int(C.tt_selftest_count())
	buf := (*C.char)(C.malloc(128))
	defer C.free(unsafe.Pointer(buf))
	names := make([]string, n)
	for i := range names {
		C.tt_selftest_name(C.int(i), buf, 128)
		names[i] = C.GoString(buf)
	}
	return names
}

// RunKernelSelfTest runs the named self-test case. A case this CPU cannot
// run returns an error wrapping ErrISAUnsupported.
func RunKernelSelfTest(name string) error {
	for i, n := range KernelSelfTests() {
		if n != name {
			continue
		}
		buf := (*C.char)(C.malloc(1024))
		defer C.free(unsafe.Pointer(buf))
		switch C.tt_selftest_run(C.int(i), buf, 1024) {
		case C.TT_SELFTEST_PASS:
			return nil
		case C.TT_SELFTEST_SKIP:
			return fmt.Errorf("kernel self-test %s: %s: %w", name, C.GoString(buf), ErrISAUnsupported)
		default:
			return fmt.Errorf("kernel self-test %s: %s", name, C.GoString(buf))
		}
	}
	return fmt.Errorf("kernel self-test %q: no such test", name)
}
