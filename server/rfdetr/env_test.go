package rfdetr

import (
	"strings"
	"testing"
)

// Every PI05_* and TT_* variable is acted on, refused, or named at start with what acts instead;
// the chip settings a package sets (RF-DETR's: MESH_DEVICE, TT_MESH_SHAPE, TT_METAL_VISIBLE_DEVICES)
// are named in one line of information, and so are the settings the supervisor reads: neither is a
// warning. (pi0.5's rules: TestEnvironmentRules in server/pi05.)
func TestEnvironmentRules(t *testing.T) {
	env := []string{"TT_METAL_VISIBLE_DEVICES=0", "MESH_DEVICE=P150", "TT_MESH_SHAPE=1x1", "PI05_HANG_MARKER=/cache/m", "PI05_RESET_ON_START=auto", "TT_WEIGHTS_REVISION=abc",
		"PI05_LAYOUT=dp", "TT_SOMETHING=1", "HOME=/root", "TT_WEIGHT_CACHE=/cache/packed-weights", "TT_GEMM_TUNE=auto",
		"TT_GEMM_PLAN=kc=128,mb=8,nb=4,pf=1"}
	rep, err := Environment(env)
	if err != nil {
		t.Fatal(err)
	}
	notices, chips := rep.Notices, rep.Chips
	if want := "MESH_DEVICE=P150 TT_MESH_SHAPE=1x1 TT_METAL_VISIBLE_DEVICES=0: this build computes on the CPU"; !strings.HasPrefix(chips, want) {
		t.Errorf("RF-DETR chip settings %q, want them in one line starting %q", chips, want)
	}
	if n := strings.Join(notices, "\n"); strings.Contains(n, "read by tt-model supervise") {
		t.Errorf("a setting the supervisor reads is a warning, not information:\n%s", n)
	}
	got := strings.Join(append(notices, rep.Info...), "\n")
	if strings.Contains(got, "MESH") || strings.Contains(got, "TT_METAL") || strings.Contains(got, "pi0.5's devices") {
		t.Errorf("a chip setting of the package is a notice:\n%s", got)
	}
	for _, want := range []string{"PI05_HANG_MARKER=/cache/m is read by tt-model supervise",
		"PI05_RESET_ON_START=auto is read by tt-model supervise", "PI05_LAYOUT=dp has no effect: it is a pi0.5 setting",
		"TT_SOMETHING=1 has no effect"} {
		if !strings.Contains(got, want) {
			t.Errorf("RF-DETR notices lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "TT_WEIGHTS_REVISION") || strings.Contains(got, "HOME") || strings.Contains(got, "TT_WEIGHT_CACHE") ||
		strings.Contains(got, "TT_GEMM_") {
		t.Errorf("a variable RF-DETR reads (or no PI05_/TT_ one) was named:\n%s", got)
	}
	if _, err := Environment([]string{"PI05_RESET_ON_START=yes"}); err == nil || !strings.Contains(err.Error(), "PI05_RESET_ON_START") {
		t.Errorf("PI05_RESET_ON_START=yes: %v", err)
	}
}
