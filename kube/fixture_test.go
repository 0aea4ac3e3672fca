package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/runner"
)

// models are the repository's two packages, by their tt-model.yaml.
var models = []string{"rf-detr", "pi05"}

// fakeDigest stands for the image digest `tt-model package` records: the
// renderer only copies it, so the tests need no image.
const fakeDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// stagedPackage writes what `tt-model package` writes into build/<name>/
// (the tt_kernel_manifest.json; the image itself is not needed to render)
// for the repository's models/<model>/tt-model.yaml, with fixed build facts
// so the rendered objects are reproducible.
func stagedPackage(t testing.TB, model string, edit func(w *manifest.Wire)) *runner.Package {
	t.Helper()
	m, err := manifest.Load(filepath.Join("..", "models", model, "tt-model.yaml"), manifest.Options{WorkDir: ".."})
	if err != nil {
		t.Fatalf("load %s: %v", model, err)
	}
	w := m.ToWire(manifest.WireInfo{
		ImageTag:    "tt-model/" + m.Name + ":" + strings.TrimPrefix(fakeDigest, "sha256:")[:12],
		Digest:      fakeDigest,
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
	pkg, err := runner.LoadPackage(dir)
	if err != nil {
		t.Fatalf("load the staged %s: %v", model, err)
	}
	return pkg
}

// profiles are every profile name of a package.
func profiles(pkg *runner.Package) []string {
	var names []string
	for _, p := range pkg.Wire.Container.Profiles() {
		names = append(names, p.Name)
	}
	return names
}
