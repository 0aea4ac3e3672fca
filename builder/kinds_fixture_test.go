package builder

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ttmodel/tt-model/manifest"
)

// staticTool is this module's tt-model built once per test binary with
// CGO_ENABLED=0, as the Python kinds' images need it, in a folder (removed
// by TestMain) where Package finds it under its own name.
var staticTool struct {
	once sync.Once
	dir  string
	err  error
}

func buildStaticTool() {
	staticTool.dir, staticTool.err = os.MkdirTemp("", "tt-model-kinds-tool-")
	if staticTool.err != nil {
		return
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-buildid=", "-o", filepath.Join(staticTool.dir, "tt-model"), "./cmd/tt-model")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		staticTool.err = fmt.Errorf("%v\n%s", err, out)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if staticTool.dir != "" {
		os.RemoveAll(staticTool.dir)
	}
	os.Exit(code)
}

func toolDir(t *testing.T) string {
	t.Helper()
	staticTool.once.Do(buildStaticTool)
	if staticTool.err != nil {
		t.Fatalf("build a static tt-model: %v", staticTool.err)
	}
	return staticTool.dir
}

// kindPackage copies testdata/kinds/<name> to a temp dir (its working
// directory), adds runtime.base, applies edits (pairs of old, new text) to
// its tt-model.yaml and loads it.
func kindPackage(t *testing.T, name, base string, edits ...string) (*manifest.Manifest, string) {
	t.Helper()
	work := t.TempDir()
	if err := os.CopyFS(work, os.DirFS(filepath.Join("testdata", "kinds", name))); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(work, "tt-model.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	y := string(b)
	if base != "" {
		y = strings.Replace(y, "\nruntime:\n", "\nruntime:\n  base: "+base+"\n", 1)
	}
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(y, edits[i]) {
			t.Fatalf("testdata/kinds/%s/tt-model.yaml has no %q", name, edits[i])
		}
		y = strings.Replace(y, edits[i], edits[i+1], 1)
	}
	if err := os.WriteFile(file, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Load(file, manifest.Options{CheckSources: true, WorkDir: work})
	if err != nil {
		t.Fatalf("load %s: %v", file, err)
	}
	return m, work
}

// kindOpts are the options of a test build of a Python kind.
func kindOpts(t *testing.T, m *manifest.Manifest, work, verify string) Options {
	return Options{
		Manifest: m, OutDir: filepath.Join(work, "out"), ToolVersion: "0.0.0-test", Executable: filepath.Join(toolDir(t), "tt-model"),
		WorkDir: work, SourceDateEpoch: "1700000000", Verify: verify, Log: testLog{},
	}
}

// writeWheel writes a pure-Python wheel holding one module, with a RECORD
// pip accepts, and returns its file name.
func writeWheel(t *testing.T, dir, dist, version, module, source string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%s-py3-none-any.whl", dist, version)
	info := fmt.Sprintf("%s-%s.dist-info", dist, version)
	files := [][2]string{
		{module + "/__init__.py", source},
		{info + "/METADATA", fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", strings.ReplaceAll(dist, "_", "-"), version)},
		{info + "/WHEEL", "Wheel-Version: 1.0\nGenerator: tt-model-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", info)
	files = append(files, [2]string{info + "/RECORD", record.String()})
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, file := range files {
		w, err := zw.Create(file[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(file[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return name
}
