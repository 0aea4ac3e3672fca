package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// weightsCache serves the package's weights from a local Hub and returns a
// config for a fresh HF_HOME.
func weightsCache(t *testing.T) (hub.Config, string) {
	t.Helper()
	srv, commit := runnertest.WeightsHub(t)
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
	dir, _ := runnertest.StagedPackage(t, name, runnertest.BuildHealthServer(t), commit)
	pkg, err := LoadPackage(dir)
	if err != nil {
		t.Fatal(err)
	}
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
		opts := PlanOptions{Profile: profile, CacheRoot: t.TempDir(), DevDir: filepath.Join(t.TempDir(), "none")}
		spec, inst, err := Serve(ctx, d, pkg, others, opts, func(s *Spec) error {
			s.HF, s.Weights = cfg, snaps
			return nil
		}, io.Discard)
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
