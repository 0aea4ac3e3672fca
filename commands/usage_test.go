package commands

import (
	"strings"
	"testing"
)

// TestUsageErrors: a command line that does not parse exits 2 with the
// error, the nearest commands or flags for a mistyped one, and the
// command's usage; serve refuses server arguments tt-model-server lacks
// before it starts anything.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"serv", "build/rf-detr"}, []string{`unknown command "serv" for "tt-model"`, "Did you mean this?\n\tserve", "Usage:\n  tt-model [command]"}},
		{[]string{"weights", "pul", "build/rf-detr"}, []string{`unknown command "pul" for "tt-model weights"`, "\tpull", "Usage:\n  tt-model weights"}},
		{[]string{"serve", "build/rf-detr", "--prot", "3"}, []string{"unknown flag: --prot", "Did you mean this?\n\t--port", "Usage:\n  tt-model serve MANIFEST"}},
		{[]string{"validate"}, []string{"accepts 1 arg(s), received 0", "Usage:\n  tt-model validate FILE", "Examples:\n  tt-model validate"}},
		{[]string{"serve"}, []string{"serve takes one MANIFEST", "Usage:\n  tt-model serve"}},
		{[]string{"serve", "../models/rf-detr/tt-model.yaml", "--host", "--", "--threads", "4"}, []string{`server arguments ["--threads" "4"]: flag provided but not defined: -threads`, "--log-level"}},
	} {
		code, out, errOut := runCLI(c.args...)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d\n%s%s", c.args, code, exitUsage, out, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%q: stderr lacks %q:\n%s", c.args, w, errOut)
			}
		}
	}
	if code, out, _ := runCLI("weights"); code != 0 || !strings.Contains(out, "Available Commands:") {
		t.Errorf("weights alone: exit %d, want 0 and its help:\n%s", code, out)
	}
}
