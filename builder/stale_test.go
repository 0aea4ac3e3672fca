package builder

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The temporary folders of a package run that was
// killed are removed by a later run; those of a run still going are kept.
func TestRemoveStaleTempDirs(t *testing.T) {
	dir := t.TempDir()
	const prefix = ".demo.partial-"
	live, err := ownedTempDir(dir, prefix)
	if err != nil {
		t.Fatal(err)
	}
	// A folder made by a process that has ended, as a SIGKILLed run leaves it.
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "TT_MAKE_OWNED_DIR="+dir)
	out, err := child.Output()
	if err != nil {
		t.Fatal(err)
	}
	dead := strings.TrimSpace(string(out))
	if !strings.HasPrefix(filepath.Base(dead), prefix+strconv.Itoa(child.Process.Pid)+"-") {
		t.Fatalf("the child made %q", dead)
	}
	other := filepath.Join(dir, ".other.partial-1-1-x") // another package's
	foreign := filepath.Join(dir, prefix+"abc")         // not one of ours
	for _, d := range []string{other, foreign} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removed := removeStaleTempDirs(dir, prefix)
	if len(removed) != 1 || removed[0] != dead {
		t.Errorf("removed %v, want only %s", removed, dead)
	}
	for _, keep := range []string{live, other, foreign} {
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s removed: %v", keep, err)
		}
	}
}

func init() {
	// The child of TestRemoveStaleTempDirs: make one folder and exit.
	if dir := os.Getenv("TT_MAKE_OWNED_DIR"); dir != "" {
		d, err := ownedTempDir(dir, ".demo.partial-")
		if err != nil {
			os.Exit(1)
		}
		os.Stdout.WriteString(d + "\n")
		os.Exit(0)
	}
}
