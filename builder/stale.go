package builder

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ttmodel/tt-model/internal/procfs"
)

// A package run works in two temporary folders: <out>/.NAME.partial-… (the
// staged package, renamed into place at the end) and $TMPDIR/tt-model-
// package-… (scratch). Both are removed when the run ends, but a run that
// is SIGKILLed cannot; their names carry the run's pid and start tick so a
// later run removes those of runs that are gone.

// scratchPrefix names a package run's scratch folder under $TMPDIR.
const scratchPrefix = "tt-model-package-"

// ownedTempDir makes a temporary folder in dir named prefix-<pid>-<tick>-….
func ownedTempDir(dir, prefix string) (string, error) {
	self := procfs.Self(os.Getpid())
	return os.MkdirTemp(dir, fmt.Sprintf("%s%d-%s-", prefix, self.PID, self.StartTick))
}

// removeStaleTempDirs removes the folders in dir that ownedTempDir made with
// prefix for a process that no longer runs, and returns what it removed.
func removeStaleTempDirs(dir, prefix string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		parts := strings.SplitN(rest, "-", 3)
		if len(parts) < 3 {
			continue // not ours, or from a tt-model that did not record its pid
		}
		pid, err := strconv.Atoi(parts[0])
		if err != nil || (procfs.Process{PID: pid, StartTick: parts[1]}).Alive() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if os.RemoveAll(path) == nil {
			removed = append(removed, path)
		}
	}
	return removed
}
