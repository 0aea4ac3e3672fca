package runner

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/hub/hubtest"
	"github.com/ttmodel/tt-model/manifest"
)

// buildHealthServer compiles testdata/healthserver as a static binary.
func buildHealthServer(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "tt-model-server")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./testdata/healthserver")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build healthserver: %v\n%s", err, b)
	}
	return out
}

// writeTestLayout writes an OCI layout holding one image with the server at
// /usr/local/bin/tt-model-server, its index entry named tag.
func writeTestLayout(t *testing.T, dir, server, tag string) {
	t.Helper()
	bin, err := os.ReadFile(server)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"usr/", "usr/local/", "usr/local/bin/"} {
		tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755})
	}
	tw.WriteHeader(&tar.Header{Name: "usr/local/bin/tt-model-server", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin))})
	tw.Write(bin)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Env = []string{"PATH=/usr/local/bin"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{
		Add: img, Descriptor: v1.Descriptor{Annotations: map[string]string{refNameAnnotation: tag}},
	})
	if _, err := layout.Write(dir, idx); err != nil {
		t.Fatal(err)
	}
}

// stagedPackage writes build/<name>/{image/, tt_kernel_manifest.json} with
// weights pinned at commit and two profiles.
func stagedPackage(t *testing.T, name, server, commit string) *Package {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	tag := fmt.Sprintf("tt-model/%s:test", name)
	writeTestLayout(t, filepath.Join(dir, "image"), server, tag)
	rev := commit
	w := &manifest.Wire{
		SchemaVersion: "5.1", Name: name, Arch: "blackhole", DeviceCount: 1,
		Weights: &manifest.WireWeights{Repo: "org/weights", Revision: &rev, RepoType: "model"},
		Container: &manifest.Container{
			Image: manifest.ImageRef{Registry: "hf", Repository: name, Tag: tag},
			Kind:  manifest.KindGoServer, Runtime: map[string]any{"model": "rf-detr"},
			Serve: manifest.ServeSettings{Hardware: "p150", MeshDevice: "P150"},
			ServeProfiles: []manifest.Profile{
				{Name: "default"},
				{Name: "stubborn", ServeSettings: manifest.ServeSettings{Env: map[string]string{"IGNORE_SIGTERM": "1"}}},
			},
			DefaultProfile: "default",
		},
	}
	if err := w.WriteFile(filepath.Join(dir, manifest.WireFile)); err != nil {
		t.Fatal(err)
	}
	pkg, err := LoadPackage(dir)
	if err != nil {
		t.Fatal(err)
	}
	return pkg
}

// weightsCache serves org/weights from a local Hub and pulls the package's
// pin into a fresh HF_HOME.
func weightsCache(t *testing.T) (hub.Config, string) {
	t.Helper()
	srv := hubtest.New()
	t.Cleanup(srv.Close)
	commit := srv.AddCommit("org/weights", "main", []hubtest.File{
		{Path: "config.json", Data: []byte(`{"num_queries": 300}`)},
		{Path: "model.safetensors", Data: bytes.Repeat([]byte{1, 2, 3, 4}, 10_000), LFS: true},
	})
	home := t.TempDir()
	return hub.Config{Endpoint: srv.URL, HFHome: home, CacheDir: filepath.Join(home, "hub")}, commit
}

func TestDockerServeStop(t *testing.T) {
	ctx := context.Background()
	d, err := ConnectDocker(ctx)
	if err != nil {
		t.Skipf("needs a Docker engine: %v", err)
	}
	defer d.Close()
	cfg, commit := weightsCache(t)
	name := fmt.Sprintf("rtest-%d", os.Getpid())
	pkg := stagedPackage(t, name, buildHealthServer(t), commit)
	t.Cleanup(func() {
		for _, p := range []string{"default", "stubborn"} {
			d.c.ContainerRemove(ctx, InstanceName(name, p), client.ContainerRemoveOptions{Force: true})
		}
		d.c.ImageRemove(ctx, pkg.Wire.Container.Image.Tag, client.ImageRemoveOptions{Force: true})
	})
	snaps, err := PullWeights(ctx, hub.NewClient(cfg), pkg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	start := func(profile string) (*Spec, *Instance, string) {
		t.Helper()
		others, err := d.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := Plan(pkg, others, PlanOptions{Profile: profile, CacheRoot: t.TempDir(), DevDir: filepath.Join(t.TempDir(), "none")})
		if err != nil {
			t.Fatal(err)
		}
		spec.HF, spec.Weights = cfg, snaps
		inst, err := d.Start(ctx, spec, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		if err := WaitReady(ctx, d, inst, spec.Launch, 2*time.Minute, &logs); err != nil {
			t.Fatalf("%v\n%s", err, logs.String())
		}
		return spec, inst, logs.String()
	}

	spec, inst, logs := start("default")
	wantModel := "HF_MODEL=/hf/hub/models--org--weights/snapshots/" + commit
	if !strings.Contains(logs, wantModel) {
		t.Errorf("server output lacks %q:\n%s", wantModel, logs)
	}
	if inst.Name != "tt-model-"+name+"-default" || inst.Port < FirstPort || !inst.Running || inst.Profile != "default" {
		t.Errorf("instance = %+v", inst)
	}
	if _, err := d.Start(ctx, spec, io.Discard); !errors.As(err, new(*RunningError)) || !strings.Contains(err.Error(), inst.Name) {
		t.Errorf("second start: err = %v, want a RunningError naming %s", err, inst.Name)
	}
	var out bytes.Buffer
	if err := d.Logs(ctx, inst, false, &out); err != nil || !strings.Contains(out.String(), "listening on") {
		t.Errorf("logs = %q, %v", out.String(), err)
	}
	res, err := d.Stop(ctx, inst, 30*time.Second, io.Discard)
	if err != nil || res.Killed || res.ExitCode != 0 {
		t.Errorf("stop = %+v, %v; want a clean exit 0", res, err)
	}
	if cur, err := d.Find(ctx, inst.Name); err != nil || cur != nil {
		t.Errorf("after stop: %+v, %v; want the container removed", cur, err)
	}

	// A server that ignores SIGTERM is killed after the grace; no chips, no reset.
	_, inst, _ = start("stubborn")
	res, err = d.Stop(ctx, inst, time.Second, io.Discard)
	if err != nil || !res.Killed || res.ExitCode != 137 || !strings.Contains(res.Reset, "no chips") {
		t.Errorf("stop stubborn = %+v, %v; want killed (137) with no chips to reset", res, err)
	}
}
