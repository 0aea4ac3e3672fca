package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// missingTool is a program no machine has.
const missingTool = "tt-model-testenv-no-such-tool"

// TestChildRequiresMissingTool is the test the parent runs in a child
// process with TT_REQUIRE set or not.
func TestChildRequiresMissingTool(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") != "1" {
		t.Skip("runs only as the child of TestRequire")
	}
	Require(t, missingTool)
	t.Log("reached past Require")
}

func TestRequire(t *testing.T) {
	tests := []struct {
		name       string
		require    string
		wantFail   bool
		wantOutput string
	}{
		{"not required: skipped and logged", "", false, "--- SKIP: TestChildRequiresMissingTool"},
		{"required by name: fails", "docker," + missingTool, true, "required here: TT_REQUIRE=docker," + missingTool},
		{"required by all: fails", "all", true, "--- FAIL: TestChildRequiresMissingTool"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "skips")
			cmd := exec.Command(os.Args[0], "-test.run", "^TestChildRequiresMissingTool$", "-test.v")
			cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", RequireEnv+"="+tc.require, SkipLogEnv+"="+log)
			out, err := cmd.CombinedOutput()
			if failed := err != nil; failed != tc.wantFail {
				t.Fatalf("child failed = %v, want %v\n%s", failed, tc.wantFail, out)
			}
			if !strings.Contains(string(out), tc.wantOutput) {
				t.Fatalf("child output lacks %q:\n%s", tc.wantOutput, out)
			}
			if strings.Contains(string(out), "reached past Require") {
				t.Fatalf("the test went on past a missing requirement:\n%s", out)
			}
			logged, _ := os.ReadFile(log)
			if wantLogged := !tc.wantFail; strings.Contains(string(logged), missingTool) != wantLogged {
				t.Fatalf("skip log = %q, want the skip logged = %v", logged, wantLogged)
			}
		})
	}
}

func TestRequirePresentToolPasses(t *testing.T) {
	t.Setenv(RequireEnv, "all")
	Require(t, "go") // the test runs under the go tool, so it is on PATH
}
