package server

import (
	"strings"
	"testing"
)

// Every PI05_* and TT_* variable is acted on, refused, or named at start with what acts instead.
func TestEnvironmentRules(t *testing.T) {
	env := []string{"TT_METAL_VISIBLE_DEVICES=0", "PI05_HANG_MARKER=/cache/m", "PI05_RESET_ON_START=auto", "TT_WEIGHTS_REVISION=abc",
		"PI05_LAYOUT=dp", "TT_SOMETHING=1", "HOME=/root"}
	notices, err := RFDETREnvironment(env)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(notices, "\n")
	for _, want := range []string{"TT_METAL_VISIBLE_DEVICES=0 has no effect", "PI05_HANG_MARKER=/cache/m is read by tt-model supervise",
		"PI05_RESET_ON_START=auto is read by tt-model supervise", "PI05_LAYOUT=dp has no effect: it is a pi0.5 setting",
		"TT_SOMETHING=1 has no effect"} {
		if !strings.Contains(got, want) {
			t.Errorf("RF-DETR notices lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "TT_WEIGHTS_REVISION") || strings.Contains(got, "HOME") {
		t.Errorf("a variable RF-DETR reads (or no PI05_/TT_ one) was named:\n%s", got)
	}
	if _, err := RFDETREnvironment([]string{"PI05_RESET_ON_START=yes"}); err == nil || !strings.Contains(err.Error(), "PI05_RESET_ON_START") {
		t.Errorf("PI05_RESET_ON_START=yes: %v", err)
	}
	read := map[string]bool{"PI05_LAYOUT": true}
	notices, err = pi05Env(read).check([]string{"PI05_LAYOUT=dp", "PI05_PRECISION=fp32", "TT_RF_DETR_WEIGHTS=/w", "MESH_DEVICE=P300x2"})
	if err != nil || len(notices) != 2 {
		t.Errorf("pi0.5: %q, %v; want the RF-DETR weights and MESH_DEVICE named", notices, err)
	}
	if _, err := pi05Env(read).check([]string{"PI05_SLO=100"}); err == nil || !strings.Contains(err.Error(), "PI05_SLO=100") {
		t.Errorf("pi0.5 PI05_SLO=100: %v, want refused", err)
	}
}
