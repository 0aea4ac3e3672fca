package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/runner/runnertest"

	"github.com/ttmodel/tt-model/internal/readiness"
)

// buildTTModel compiles this module's tt-model (the supervisor host mode runs).
func buildTTModel(t *testing.T) string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	out := filepath.Join(t.TempDir(), "tt-model")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/tt-model")
	cmd.Dir = filepath.Join(filepath.Dir(self), "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build tt-model: %v\n%s", err, b)
	}
	return out
}

// TestHostServeStop runs a package on the bare host under the real
// `tt-model supervise`, with the stand-in server reading its pinned
// snapshot from the host HF cache.
func TestHostServeStop(t *testing.T) {
	ctx := context.Background()
	h := &Host{RunDir: t.TempDir(), Supervisor: []string{buildTTModel(t), "supervise"}, Server: runnertest.BuildHealthServer(t)}
	t.Setenv("PI05_HANG_MARKER", filepath.Join(t.TempDir(), "hang_marker")) // no reset before the first start
	cfg, commit := weightsCache(t)
	dir, _ := runnertest.StagedPackage(t, "hosttest", h.Server, commit)
	pkg, err := LoadPackage(dir)
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := PullWeights(ctx, hub.NewClient(cfg), pkg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	opts := PlanOptions{CacheRoot: t.TempDir(), DevDir: filepath.Join(t.TempDir(), "none")}
	prepare := func(s *Spec) error { s.HF, s.Weights = cfg, snaps; return nil }
	spec, inst, err := Serve(ctx, h, pkg, nil, opts, prepare, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop(ctx, inst, 5*time.Second, io.Discard)
	var logs bytes.Buffer
	if err := WaitReady(ctx, h, inst, spec.Launch, 2*time.Minute, &logs); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	if want := "HF_MODEL=" + snaps[0].Dir; !strings.Contains(logs.String(), want) {
		t.Errorf("server output lacks %q:\n%s", want, logs.String())
	}
	if _, err := h.Start(ctx, spec, io.Discard); !errors.As(err, new(*RunningError)) {
		t.Errorf("second start: err = %v, want a RunningError", err)
	}
	list, err := h.List(ctx)
	if err != nil || len(list) != 1 || list[0].Port != spec.Port || !list[0].Running {
		t.Errorf("List = %+v, %v", list, err)
	}
	res, err := h.Stop(ctx, inst, 30*time.Second, io.Discard)
	if err != nil || res.Killed {
		t.Fatalf("Stop = %+v, %v", res, err)
	}
	if cur, err := h.Find(ctx, inst.Name); err != nil || cur != nil {
		t.Errorf("after stop: %+v, %v; want no instance", cur, err)
	}
	if readiness.Probe(ctx, &http.Client{Timeout: time.Second}, fmt.Sprintf("http://127.0.0.1:%d/health", spec.Port)) == nil {
		t.Error("the server still answers after stop")
	}
}
