package runner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/testenv"

	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// TestRFDETREndToEnd packages models/rf-detr with this tree's tt-model and
// tt-model-server, puts a random full-size checkpoint in the HF cache at the
// pinned revision (its detections are meaningless), serves it on the Docker
// engine, posts an image to /predict and stops it. The hang chain on the
// same package, with a test reset command, is TestRFDETRHangChain.
func TestRFDETREndToEnd(t *testing.T) {
	e := packageRFDETR(t, e2eDocker(t), "e2e", "", "")
	ctx := context.Background()
	inst := e.serve(t, "default", nil)
	if n, err := predict(inst.Port); err != nil || n < 1 {
		t.Fatalf("/predict: %d detections, %v", n, err)
	}
	if res, err := e.d.Stop(ctx, inst, 2*time.Minute, io.Discard); err != nil || res.ExitCode != 0 {
		t.Fatalf("stop: %+v, %v", res, err)
	}
}

// rfdetrE2E is a packaged copy of models/rf-detr ready to serve on the
// Docker engine, with a random full-size checkpoint in a test HF cache.
type rfdetrE2E struct {
	d         *Docker
	pkg       *Package
	hf        hub.Config
	snaps     []*hub.Snapshot
	work      string // the test's folder: the manifest copy, build/, the checkpoint
	cacheRoot string // PlanOptions.CacheRoot: <cacheRoot>/<name>/cache is the container's /cache
}

// e2eDocker connects to the Docker engine, skipping the test without one
// or with -short.
func e2eDocker(t *testing.T) *Docker {
	t.Helper()
	if testing.Short() {
		testenv.Skip(t, "packages and serves the real server: skipped with -short")
	}
	testenv.Require(t, "docker")
	d, err := ConnectDocker(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// repoRoot is the repository's root folder, absolute.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// packageRFDETR packages a copy of models/rf-detr/tt-model.yaml named
// rf-detr-<tag>-<pid> (so the test never touches a real rf-detr server),
// with runtime.base replaced by base when given and extra (YAML keys)
// appended, and imports a random checkpoint at the pinned revision. The
// package's containers and images are removed when the test ends, passed
// or not.
func packageRFDETR(t *testing.T, d *Docker, tag, base, extra string) *rfdetrE2E {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("rf-detr-%s-%d", tag, os.Getpid())
	edits := [][2]string{{"\nname: rf-detr\n", "\nname: " + name + "\n"}}
	if base != "" {
		edits = append(edits, [2]string{"\n  base: scratch\n", "\n  base: " + base + "\n"})
	}
	root := repoRoot(t)
	yaml := runnertest.EditedManifest(t, root, "rf-detr", edits...)
	t.Cleanup(func() { removeE2EArtifacts(t, d, name) })

	work := t.TempDir()
	manifestPath := filepath.Join(work, "tt-model.yaml")
	if err := os.WriteFile(manifestPath, append(yaml, extra...), 0o644); err != nil {
		t.Fatal(err)
	}
	pkgCmd := exec.Command(buildTTModel(t), "package", "--container", manifestPath, "--out", filepath.Join(work, "build"))
	pkgCmd.Dir = root // source.extra_code roots resolve against the working directory
	if out, err := pkgCmd.CombinedOutput(); err != nil {
		t.Fatalf("tt-model package: %v\n%s", err, out)
	}
	pkg, err := LoadPackage(filepath.Join(work, "build", name))
	if err != nil {
		t.Fatal(err)
	}

	// The real weights cannot be downloaded here: a random checkpoint stands in.
	ckpt := filepath.Join(work, "checkpoint")
	if err := (rfdetr.RandomCheckpoint{Seed: 7}).Write(ckpt); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cfg := hub.Config{Endpoint: "http://127.0.0.1:1", HFHome: home, CacheDir: filepath.Join(home, "hub")}
	if _, err := (hub.Cache{Dir: cfg.CacheDir}).Import("Roboflow/rf-detr-base", runnertest.RFDETRPin, ckpt); err != nil {
		t.Fatal(err)
	}
	snaps, err := PullWeights(ctx, hub.NewClient(cfg), pkg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return &rfdetrE2E{d: d, pkg: pkg, hf: cfg, snaps: snaps, work: work, cacheRoot: t.TempDir()}
}

// removeE2EArtifacts force-removes the containers and images of package
// name: the builder loads its image into the engine while packaging, so
// this runs even when packaging failed.
func removeE2EArtifacts(t *testing.T, d *Docker, name string) {
	ctx := context.Background()
	insts, err := d.List(ctx)
	if err != nil {
		t.Logf("cleanup: %v", err)
	}
	for _, inst := range insts {
		if inst.Package == name {
			if _, err := d.c.ContainerRemove(ctx, inst.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
				t.Logf("cleanup: remove container %s: %v", inst.Name, err)
			}
		}
	}
	imgs, err := d.c.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("reference", "tt-model/"+name)})
	if err != nil {
		t.Logf("cleanup: list images: %v", err)
		return
	}
	for _, img := range imgs.Items {
		for _, ref := range img.RepoTags {
			if _, err := d.c.ImageRemove(ctx, ref, client.ImageRemoveOptions{Force: true}); err != nil {
				t.Logf("cleanup: remove image %s: %v", ref, err)
			}
		}
	}
}

// serve starts profile on the engine with no chips (whatever the host has),
// passing supervisorFlags as `tt-model serve --reset-cmd` does, and waits
// until the server is ready.
func (e *rfdetrE2E) serve(t *testing.T, profile string, supervisorFlags []string) *Instance {
	t.Helper()
	ctx := context.Background()
	opts := PlanOptions{Profile: profile, CacheRoot: e.cacheRoot, DevDir: filepath.Join(e.work, "no-chips")}
	spec, inst, err := Serve(ctx, e.d, e.pkg, e.d.List, opts, func(s *Spec) error {
		s.HF, s.Weights, s.SupervisorFlags = e.hf, e.snaps, supervisorFlags
		return nil
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	if err := WaitReady(ctx, e.d, inst, spec.Launch, 5*time.Minute, &logs); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	return inst
}

// predict posts a picture to the server on port (see runnertest.PredictRFDETR).
func predict(port int) (int, error) {
	return runnertest.PredictRFDETR(fmt.Sprintf("http://127.0.0.1:%d/predict", port))
}
