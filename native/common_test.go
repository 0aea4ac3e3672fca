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
