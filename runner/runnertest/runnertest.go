// Package runnertest builds what the runner and serve tests start: a small
// static stand-in for tt-model-server (testdata/healthserver), a staged
// package around it (build/<name>/{image/, tt_kernel_manifest.json}), and a
// local Hub holding its pinned weights.
package runnertest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/ttmodel/tt-model/builtpkg"
	"github.com/ttmodel/tt-model/hub/hubtest"
	"github.com/ttmodel/tt-model/internal/ocilayout"
	"github.com/ttmodel/tt-model/internal/testing/imagetest"
	"github.com/ttmodel/tt-model/manifest"
)

// WeightsRepo is the repo the staged package pins.
const WeightsRepo = "org/weights"

// BrokenMessage is what the "broken" profile's server prints before it exits 1.
const BrokenMessage = "PI05_LAYOUT=xx: refused (a test server that cannot start)"

// BuildHealthServer compiles runner/testdata/healthserver as a static
// binary: it answers /health with "ok" only when $HF_MODEL/config.json is
// readable and /env with its environment, prints HF_MODEL, and ignores
// SIGTERM when IGNORE_SIGTERM=1.
func BuildHealthServer(t testing.TB) string {
	t.Helper()
	return BuildStatic(t, "healthserver", "tt-model-server")
}

// BuildStatic compiles the program in runner/testdata/<src> as a static
// linux/amd64 binary named name (the only platform the builder makes).
func BuildStatic(t testing.TB, src, name string) string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, ".")
	cmd.Dir = filepath.Join(filepath.Dir(self), "..", "testdata", src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", src, err, b)
	}
	return out
}

// BinImage is a linux/amd64 image of one layer holding the binary bin at
// /usr/local/bin/<name>, with env.
func BinImage(t testing.TB, bin, name string, env []string) v1.Image {
	t.Helper()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"usr/", "usr/local/", "usr/local/bin/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "usr/local/bin/" + name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layerData := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerData)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = imagetest.Linux(img, func(cf *v1.ConfigFile) { cf.Config.Env = env }); err != nil {
		t.Fatal(err)
	}
	return img
}

// WriteLayout writes an OCI layout holding one image with server at
// /usr/local/bin/tt-model-server, its index entry named tag.
func WriteLayout(t testing.TB, dir, server, tag string) {
	t.Helper()
	img := BinImage(t, server, "tt-model-server", []string{"PATH=/usr/local/bin"})
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{
		Add: img, Descriptor: v1.Descriptor{Annotations: map[string]string{ocilayout.RefName: tag}},
	})
	if _, err := layout.Write(dir, idx); err != nil {
		t.Fatal(err)
	}
}

// StagedPackage writes <tmp>/<name>/{image/, tt_kernel_manifest.json} for
// kind tt-go-server with the weights pinned at commit and four profiles:
// "default", "stubborn" (a server that ignores SIGTERM), "broken" (exits 1
// at start with BrokenMessage) and "flaky" (exits 3 two seconds after each
// start). It returns the folder and the image tag.
func StagedPackage(t testing.TB, name, server, commit string) (dir, tag string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), name)
	tag = fmt.Sprintf("tt-model/%s:test", name)
	WriteLayout(t, builtpkg.At(dir).LayoutPath(), server, tag)
	rev := commit
	w := &manifest.Wire{
		SchemaVersion: "5.1", Name: name, Arch: "blackhole", DeviceCount: 1,
		Weights: &manifest.WireWeights{Repo: WeightsRepo, Revision: &rev, RepoType: "model"},
		Container: &manifest.Container{
			Image: manifest.ImageRef{Registry: "hf", Repository: name, Tag: tag},
			Kind:  manifest.KindGoServer, Runtime: map[string]any{"model": "rf-detr"},
			Serve: manifest.ServeSettings{Hardware: "p150", MeshDevice: "P150"},
			ServeProfiles: []manifest.Profile{
				{Name: "default"},
				{Name: "stubborn", ServeSettings: manifest.ServeSettings{Env: map[string]string{"IGNORE_SIGTERM": "1"}}},
				{Name: "broken", ServeSettings: manifest.ServeSettings{Env: map[string]string{"FAIL_START": BrokenMessage}}},
				{Name: "flaky", ServeSettings: manifest.ServeSettings{Env: map[string]string{"EXIT_AFTER": "2s"}}},
			},
			DefaultProfile: "default",
		},
	}
	if err := w.WriteFile(builtpkg.At(dir).Path); err != nil {
		t.Fatal(err)
	}
	return dir, tag
}

// WeightsHub starts a local Hub holding WeightsRepo and returns it with the
// commit the package pins.
func WeightsHub(t testing.TB) (*hubtest.Server, string) {
	t.Helper()
	srv := hubtest.New()
	t.Cleanup(srv.Close)
	commit := srv.AddCommit(WeightsRepo, "main", []hubtest.File{
		{Path: "config.json", Data: []byte(`{"num_queries": 300}`)},
		{Path: "model.safetensors", Data: bytes.Repeat([]byte{1, 2, 3, 4}, 10_000), LFS: true},
	})
	return srv, commit
}

// Reset is one line of test-reset's record (runner/testdata/hang/testreset): its argv, when it ran
// and whether the hang marker existed then.
type Reset struct {
	Argv   []string `json:"argv"`
	At     string   `json:"at"`
	Marker bool     `json:"marker"`
}

// ReadResets reads test-reset's record; none when it does not exist yet.
func ReadResets(t testing.TB, path string) []Reset {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []Reset
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		var r Reset
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s line %d: %v", path, n, err)
		}
		out = append(out, r)
	}
	return out
}
