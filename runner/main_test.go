package runner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// The runner's end-to-end tests run this module's tt-model (the host
// supervisor, `package`, the CLI) and tt-model-server: built once per test
// binary, into a folder TestMain makes and removes, as `make build` lays
// them out (the server beside tt-model, where `package` and `serve --host`
// look for it).
var testBin struct {
	dir  string
	once sync.Once
	err  error
	out  []byte
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "runner-test-bin-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testBin.dir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildBinaries returns the path of tt-model, with tt-model-server beside it.
func buildBinaries(t *testing.T) string {
	t.Helper()
	testBin.once.Do(func() {
		_, self, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-trimpath", "-o", testBin.dir+"/", "./cmd/tt-model", "./cmd/tt-model-server")
		cmd.Dir = filepath.Join(filepath.Dir(self), "..")
		testBin.out, testBin.err = cmd.CombinedOutput()
	})
	if testBin.err != nil {
		t.Fatalf("build tt-model and tt-model-server: %v\n%s", testBin.err, testBin.out)
	}
	return filepath.Join(testBin.dir, "tt-model")
}

// buildTTModel is buildBinaries, for the tests that need only tt-model.
func buildTTModel(t *testing.T) string { return buildBinaries(t) }
