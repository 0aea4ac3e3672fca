package native

import (
	"errors"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/testenv"
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
	// TT_ISA caps the kernels: avx512bf16 keeps an AMX machine on vdpbf16ps (tests force both)
	for _, c := range []struct{ cap, name string }{{"avx512bf16", "gemm/amxbf16"}, {"scalar", "gemm/avx512"}} {
		t.Setenv("TT_ISA", c.cap)
		if err := RunKernelSelfTest(c.name); !errors.Is(err, ErrISAUnsupported) {
			t.Fatalf("%s under TT_ISA=%s: %v, want an error wrapping ErrISAUnsupported", c.name, c.cap, err)
		}
		if got := DetectCPU().BestISA; got == string(ISAAMXBF16) {
			t.Fatalf("best isa under TT_ISA=%s: %s", c.cap, got)
		}
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
	if _, err := PeakGFLOPS(ISABest, "fp16", 10); err == nil {
		t.Fatal("want an error for fp16")
	}
	if _, err := PeakGFLOPS("avx1024", "bf16", 10); err == nil {
		t.Fatal("want an error for an unknown isa")
	}
}

// The peak of each instruction family: positive where the CPU has it, 0 where not; the best
// (ISABest) is the one PeakISA names: tdpbf16ps for bf16 on an AMX machine, vdpbf16ps beside it.
func TestPeakGFLOPS(t *testing.T) {
	bf16Best := ISAAVX512BF16
	if DetectCPU().BestISA == string(ISAAMXBF16) { // not when TT_ISA caps it
		bf16Best = ISAAMXBF16
	}
	for _, c := range []struct {
		isa       ISA
		precision string
		has       bool
	}{
		{ISABest, "fp32", cpuCanRun(ISAAVX512)},
		{ISABest, "bf16", cpuCanRun(ISAAVX512BF16)},
		{ISAAVX512BF16, "bf16", cpuCanRun(ISAAVX512BF16)},
		{ISAAMXBF16, "bf16", cpuCanRun(ISAAMXBF16)},
	} {
		one, err := PeakGFLOPS(c.isa, c.precision, 100000)
		if err != nil {
			t.Fatal(err)
		}
		two, err := PeakGFLOPSThreads(c.isa, c.precision, 2, 100000)
		if err != nil {
			t.Fatal(err)
		}
		if c.has && (one <= 0 || two <= 0) {
			t.Errorf("%s %q peak: %g (1 thread), %g (2 threads) on a CPU that has the instructions", c.precision, c.isa, one, two)
		}
		if !c.has && (one != 0 || two != 0) {
			t.Errorf("%s %q peak: %g, %g on a CPU without the instructions: want 0", c.precision, c.isa, one, two)
		}
	}
	if got, err := PeakISA("bf16"); err != nil || (cpuCanRun(ISAAVX512BF16) && got != bf16Best) {
		t.Errorf("PeakISA(bf16) = %q, %v; want %q", got, err, bf16Best)
	}
	if _, err := PeakGFLOPSThreads(ISABest, "int8", 2, 10); err == nil {
		t.Error("want an error for int8")
	}
}
