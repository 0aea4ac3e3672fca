package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// standIn is the stand-in package (runnertest.StagedPackage around
// testdata/healthserver) with its pinned weights pulled into a fresh HF
// cache, ready to serve on one runner.
type standIn struct {
	r     Runner
	pkg   *Package
	hf    hub.Config
	snaps []*hub.Snapshot
}

func newStandIn(t *testing.T, r Runner, name, server string) *standIn {
	t.Helper()
	cfg, commit := weightsCache(t)
	dir, _ := runnertest.StagedPackage(t, name, server, commit)
	pkg, err := LoadPackage(dir)
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := PullWeights(context.Background(), hub.NewClient(cfg), pkg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return &standIn{r: r, pkg: pkg, hf: cfg, snaps: snaps}
}

// dockerStandIn stages the stand-in as tag-<pid> on the Docker engine; its
// containers and image are removed when the test ends.
func dockerStandIn(t *testing.T, tag string) (*Docker, *standIn) {
	t.Helper()
	testenv.Require(t, "docker")
	ctx := context.Background()
	d, err := ConnectDocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s := newStandIn(t, d, fmt.Sprintf("%s-%d", tag, os.Getpid()), runnertest.BuildHealthServer(t))
	t.Cleanup(func() {
		for _, p := range s.pkg.Wire.Container.Profiles() {
			d.c.ContainerRemove(ctx, InstanceName(s.pkg.Wire.Name, p.Name), client.ContainerRemoveOptions{Force: true})
		}
		d.c.ImageRemove(ctx, s.pkg.Wire.Container.Image.Tag, client.ImageRemoveOptions{Force: true})
	})
	return d, s
}

// hostStandIn stages the stand-in for the bare host under the real
// `tt-model supervise`.
func hostStandIn(t *testing.T) (*Host, *standIn) {
	t.Helper()
	h := &Host{RunDir: t.TempDir(), Supervisor: []string{buildTTModel(t), "supervise"}, Server: runnertest.BuildHealthServer(t)}
	t.Setenv("PI05_HANG_MARKER", filepath.Join(t.TempDir(), "hang_marker")) // no reset before the first start
	return h, newStandIn(t, h, "hosttest", h.Server)
}

// start serves profile without chips and returns at once (no wait for
// ready); an instance still there when the test ends is stopped.
func (s *standIn) start(t *testing.T, profile string) (*Spec, *Instance) {
	t.Helper()
	ctx := context.Background()
	opts := PlanOptions{Profile: profile, CacheRoot: t.TempDir(), DevDir: filepath.Join(t.TempDir(), "none")}
	spec, inst, err := Serve(ctx, s.r, s.pkg, s.r.List, opts, func(sp *Spec) error { sp.HF, sp.Weights = s.hf, s.snaps; return nil }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cur, _ := s.r.Find(ctx, inst.Name); cur != nil {
			s.r.Stop(ctx, cur, 5*time.Second, io.Discard)
		}
	})
	return spec, inst
}
