package native

import "testing"

func TestKernelSelfTests(t *testing.T) {
	t.Logf("cpu: %s, default threads %d", DetectCPU(), DefaultThreads())
	names := KernelSelfTests()
	if len(names) == 0 {
		t.Fatal("no kernel self-tests registered")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			if err := RunKernelSelfTest(name); err != nil {
				t.Fatal(err)
			}
		})
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
	cpu := DetectCPU()
	avx512 := cpu.AVX2 && cpu.FMA && cpu.AVX512F && cpu.AVX512BW && cpu.AVX512VL && cpu.AVX512DQ
	for _, c := range []struct {
		precision string
		has       bool
	}{{"fp32", avx512}, {"bf16", avx512 && cpu.AVX512BF16}} {
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
