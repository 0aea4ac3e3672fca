package kubetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/manifest"
)

// FakeDigest stands for the image digest `tt-model package` records: the
// renderer only copies it, so tests need no image.
const FakeDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// StagedPackage writes what `tt-model package` writes into build/<name>/,
// less the image (the tt_kernel_manifest.json is all a render reads), for
// the repository's models/<model>/tt-model.yaml (root is the repository
// root), with fixed build facts so renders are reproducible. edit, when
// given, changes the manifest first. It returns the package folder.
func StagedPackage(t testing.TB, root, model string, edit func(w *manifest.Wire)) string {
	t.Helper()
	m, err := manifest.Load(filepath.Join(root, "models", model, "tt-model.yaml"), manifest.Options{WorkDir: root})
	if err != nil {
		t.Fatalf("load %s: %v", model, err)
	}
	w := m.ToWire(manifest.WireInfo{
		ImageTag:    "tt-model/" + m.Name + ":" + strings.TrimPrefix(FakeDigest, "sha256:")[:12],
		Digest:      FakeDigest,
		ToolVersion: "test", CreatedAt: "2026-01-01T00:00:00Z", Hostname: "builder",
	})
	if edit != nil {
		edit(w)
	}
	dir := filepath.Join(t.TempDir(), m.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(filepath.Join(dir, manifest.WireFile)); err != nil {
		t.Fatal(err)
	}
	return dir
}
