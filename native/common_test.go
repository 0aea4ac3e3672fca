package native

import (
	"errors"
	"testing"

	"github.com/ttmodel/tt-model/internal/testenv"
)

// cpuCanRun says whether this CPU can run the kernel family isa (ParseISA's check).
func cpuCanRun(isa ISA) bool {
	_, err := ParseISA(string(isa))
	return err == nil
}

// requireISA skips t, visibly, when this CPU cannot run the kernel family isa.
func requireISA(t *testing.T, isa ISA) {
	t.Helper()
	if _, err := ParseISA(string(isa)); err != nil {
		testenv.Skip(t, err.Error())
	}
}

func TestKernelSelfTests(t *testing.T) {
	t.Logf("cpu: %s, default threads %d", DetectCPU(), DefaultThreads())
	names := KernelSelfTests()
	if len(names) == 0 {
		t.Fatal("no kernel self-tests registered")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			err := RunKernelSelfTest(name)
			if errors.Is(err, ErrISAUnsupported) {
				testenv.Skip(t, err.Error())
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A case above the ISA the kernels may use is reported as not run, never as
// a pass: TT_ISA caps the ISA the way a CPU without AVX-512 does.
func TestKernelSelfTestSkipsAnISAItCannotRun(t *testing.T) {
	t.Setenv("TT_ISA", "scalar")
	err := RunKernelSelfTest("gemm/avx512")
	if !errors.Is(err, ErrISAUnsupported) {
		t.Fatalf("gemm/avx512 under TT_ISA=scalar: %v, want an error wrapping ErrISAUnsupported", err)
	}
	if err := RunKernelSelfTest("gemm/scalar"); err != nil {
		t.Fatalf("gemm/scalar under TT_ISA=scalar: %v", err)
	}
}

func TestRunKernelSelfTestUnknown(t *testing.T) {
	if err := RunKernelSelfTest("no-such-test"); err == nil {
		t.Fatal("want an error for an unknown test name")
	}
}

func TestPeakGFLOPSRejectsUnknownPrecision(t *testing.T) {
	if _, err := PeakGFLOPS("fp16", 10); err == nil {
		t.Fatal("want an error for fp16")
	}
}

func TestPeakGFLOPS(t *testing.T) {
	for _, c := range []struct {
		precision string
		has       bool
	}{{"fp32", cpuCanRun(ISAAVX512)}, {"bf16", cpuCanRun(ISAAVX512BF16)}} {
		one, err := PeakGFLOPS(c.precision, 100000)
		if err != nil {
			t.Fatal(err)
		}
		two, err := PeakGFLOPSThreads(c.precision, 2, 100000)
		if err != nil {
			t.Fatal(err)
		}
		if c.has && (one <= 0 || two <= 0) {
			t.Errorf("%s peak: %g (1 thread), %g (2 threads) on a CPU that has the instructions", c.precision, one, two)
		}
		if !c.has && (one != 0 || two != 0) {
			t.Errorf("%s peak: %g, %g on a CPU without the instructions: want 0", c.precision, one, two)
		}
	}
	if _, err := PeakGFLOPSThreads("int8", 2, 10); err == nil {
		t.Error("want an error for int8")
	}
}
