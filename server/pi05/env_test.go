package pi05

import (
	"strings"
	"testing"
)

// pi0.5's rules for its PI05_* and TT_* variables: another model's variable is named as having no
// effect, a chip setting goes in the chip line, and a PI05_* variable nobody reads is refused.
// (RF-DETR's rules: TestEnvironmentRules in server/rfdetr.)
func TestEnvironmentRules(t *testing.T) {
	read := map[string]bool{"PI05_LAYOUT": true}
	rep, err := envRules(read).Check([]string{"PI05_LAYOUT=dp", "PI05_PRECISION=fp32", "TT_RF_DETR_WEIGHTS=/w", "MESH_DEVICE=P300x2",
		"TT_WEIGHT_CACHE=off", "TT_GEMM_TUNE=always", "TT_GEMM_PLAN=kc=128,mb=8,nb=4,pf=1"})
	if err != nil || len(rep.Notices) != 1 || !strings.HasPrefix(rep.Chips, "MESH_DEVICE=P300x2:") {
		t.Errorf("pi0.5: %q, chips %q, %v; want the RF-DETR weights named and MESH_DEVICE in the chip line", rep.Notices, rep.Chips, err)
	}
	if _, err := envRules(read).Check([]string{"PI05_SLO=100"}); err == nil || !strings.Contains(err.Error(), "PI05_SLO=100") {
		t.Errorf("pi0.5 PI05_SLO=100: %v, want refused", err)
	}
}
