package kube

import (
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/kubetest"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/runner"
)

// models are the repository's two packages, by their tt-model.yaml.
var models = []string{"rf-detr", "pi05"}

const fakeDigest = kubetest.FakeDigest

// stagedPackage is the staged package of models/<model> (kubetest.StagedPackage).
func stagedPackage(t testing.TB, model string, edit func(w *manifest.Wire)) *runner.Package {
	t.Helper()
	pkg, err := runner.LoadPackage(kubetest.StagedPackage(t, "..", model, edit))
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

// testRegistry is where the tests say the image was pushed: without one a
// render of a Hub-only package is refused.
const testRegistry = "registry.example/ml"
