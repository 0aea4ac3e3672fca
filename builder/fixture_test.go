package builder

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ttmodel/tt-model/manifest"
)

// fixtureBin is a directory holding the miniserver fixture installed as
// tt-model and tt-model-server, the way a user installs the two binaries.
func fixtureBin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	server := filepath.Join(dir, "tt-model-server")
	cmd := exec.Command("go", "build", "-buildvcs=false", "-trimpath", "-ldflags=-buildid=", "-o", server, "./testdata/miniserver")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build miniserver: %v\n%s", err, out)
	}
	b, err := os.ReadFile(server)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tt-model"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// testPackage copies testdata/pkg to a temp dir (its working directory) and
// loads its manifest, optionally rewritten by edit.
func testPackage(t *testing.T, edit func(yaml string) string) (*manifest.Manifest, string) {
	t.Helper()
	work := t.TempDir()
	if err := os.CopyFS(work, os.DirFS("testdata/pkg")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(work, "tt-model.yaml")
	if edit != nil {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(edit(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := manifest.Load(file, manifest.Options{CheckSources: true, WorkDir: work})
	if err != nil {
		t.Fatalf("load %s: %v", file, err)
	}
	return m, work
}

func packageOpts(m *manifest.Manifest, work, bin, out, verify string) Options {
	return Options{
		Manifest: m, OutDir: out, ToolVersion: "0.0.0-test", Executable: filepath.Join(bin, "tt-model"),
		WorkDir: work, SourceDateEpoch: "1700000000", Verify: verify, Log: testLog{},
	}
}

// testLog discards progress unless -v is set.
type testLog struct{}

func (testLog) Write(p []byte) (int, error) {
	if testing.Verbose() {
		return os.Stderr.Write(p)
	}
	return io.Discard.Write(p)
}

func mustPackage(t *testing.T, opts Options) *Result {
	t.Helper()
	res, err := Package(context.Background(), opts)
	if err != nil {
		t.Fatalf("Package: %v", err)
	}
	return res
}
