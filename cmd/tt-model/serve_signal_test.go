package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/hub/hubtest"
	"github.com/ttmodel/tt-model/internal/testing/syncbuf"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// serveFixture is a tt-model binary with the stand-in server beside it, a
// staged package whose weights never satisfy the server's /health (no
// config.json), so a serve waits, and the environment of a fresh host.
type serveFixture struct {
	bin, dir, name string
	env            []string
}

func newServeFixture(t *testing.T, tag string) serveFixture {
	t.Helper()
	bin := buildTool(t)
	server := runnertest.BuildHealthServer(t)
	data, err := os.ReadFile(server)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(bin), "tt-model-server"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	hub := hubtest.New()
	t.Cleanup(hub.Close)
	commit := hub.AddCommit(runnertest.WeightsRepo, "main", []hubtest.File{{Path: "model.safetensors", Data: []byte("weights"), LFS: true}})
	name := fmt.Sprintf("%s-%d", tag, os.Getpid())
	dir, _ := runnertest.StagedPackage(t, name, server, commit)
	home := t.TempDir()
	env := append(os.Environ(), "HF_ENDPOINT="+hub.URL, "HF_HOME="+filepath.Join(home, "hf"), "HF_HUB_CACHE=", "HF_HUB_OFFLINE=",
		"XDG_CACHE_HOME="+filepath.Join(home, "cache"), "HOME="+home)
	return serveFixture{bin: bin, dir: dir, name: name, env: env}
}

// run runs tt-model with args and returns its exit code and output.
func (f serveFixture) run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(f.bin, args...)
	cmd.Env = f.env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// TestServeCtrlCStops: SIGINT to a foreground `tt-model serve` that waits
// for its server stops what it started (the supervisor and the server are
// gone, ps lists nothing) and exits 130, as `docker run` does.
func TestServeCtrlCStops(t *testing.T) {
	f := newServeFixture(t, "sigint")
	cmd := exec.Command(f.bin, "serve", f.dir, "--host", "--timeout", "5m")
	cmd.Env = f.env
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = f.run(t, "stop", f.name, "--grace", "5s") })
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(out.String(), "waiting up to 5m0s") {
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			t.Fatalf("serve never started waiting:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	code, ps := f.run(t, "ps")
	if code != 0 || !strings.Contains(ps, f.name) {
		t.Fatalf("ps while serve waits: exit %d\n%s", code, ps)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("serve ignored SIGINT:\n%s", out.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(out.String(), "interrupted: stopping tt-model-"+f.name+"-default") ||
		!strings.Contains(out.String(), "stopped (exit") {
		t.Errorf("serve after SIGINT: exit %d, want 130 and the stop:\n%s", code, out.String())
	}
	if code, ps := f.run(t, "ps"); code != 0 || strings.Contains(ps, f.name) {
		t.Errorf("ps after Ctrl-C still lists the server: exit %d\n%s", code, ps)
	}
}

// TestServeCrashIsStopped: a start that crash-loops is stopped and removed,
// not left restarting; --keep leaves it for its logs.
func TestServeCrashIsStopped(t *testing.T) {
	f := newServeFixture(t, "crashstop")
	code, out := f.run(t, "serve", f.dir, "--host", "--profile", "broken", "--timeout", "2m")
	if code != 1 || !strings.Contains(out, runnertest.BrokenMessage) || !strings.Contains(out, "it was stopped and removed rather than left restarting") {
		t.Errorf("serve of a crashing profile: exit %d\n%s", code, out)
	}
	if _, ps := f.run(t, "ps"); strings.Contains(ps, f.name) {
		t.Errorf("the crashed server is still listed:\n%s", ps)
	}
	code, out = f.run(t, "serve", f.dir, "--host", "--profile", "broken", "--timeout", "2m", "--keep")
	if code != 1 || !strings.Contains(out, "it keeps being restarted until you stop it") {
		t.Errorf("serve --keep of a crashing profile: exit %d\n%s", code, out)
	}
	if _, ps := f.run(t, "ps"); !strings.Contains(ps, f.name) {
		t.Errorf("--keep: the crashed server is gone:\n%s", ps)
	}
	if code, out := f.run(t, "stop", f.name, "--profile", "broken", "--grace", "5s"); code != 0 {
		t.Errorf("stop: exit %d\n%s", code, out)
	}
}
