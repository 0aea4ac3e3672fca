package commands

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/hub/hubtest"
	"github.com/ttmodel/tt-model/internal/testing/testenv"

	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/runner"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// TestServeOnDocker drives serve, a refused second serve, ps, logs and stop
// through the CLI on the Docker engine, then serves again with the Hub gone
// (the pinned weights are complete in the cache).
func TestServeOnDocker(t *testing.T) {
	st := cliStandIn(t, "clitest")
	dir, name, srv, commit := st.dir, st.name, st.hub, st.commit
	instance := runner.InstanceName(name, "default")
	code, out, errOut := runCLI("serve", dir, "--timeout", "2m")
	if code != 0 || !strings.Contains(out, name+" is ready: profile default, container "+instance) || !strings.Contains(out, "url      http://127.0.0.1:") {
		t.Fatalf("serve: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, _, errOut = runCLI("serve", dir)
	if code != exitRunning || !strings.Contains(errOut, instance+" is already running") {
		t.Errorf("second serve: exit %d, stderr %q; want exit %d naming %s", code, errOut, exitRunning, instance)
	}
	code, out, _ = runCLI("ps")
	if code != 0 || !strings.Contains(out, name) || !strings.Contains(out, "docker") || !strings.Contains(out, "running") {
		t.Errorf("ps: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI("logs", name)
	if want := "HF_MODEL=/hf/hub/models--org--weights/snapshots/" + commit; code != 0 || !strings.Contains(out, want) {
		t.Errorf("logs: exit %d, want %q in\n%s", code, want, out)
	}
	code, out, errOut = runCLI("stop", name)
	if code != 0 || !strings.Contains(out, instance+": stopped (exit 0) and removed") {
		t.Errorf("stop: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut = runCLI("stop", name); code != 1 || !strings.Contains(errOut, "no tt-model server") {
		t.Errorf("stop of a stopped server: exit %d, %q", code, errOut)
	}

	srv.Close() // the pin is complete in the cache: no network needed
	code, out, errOut = runCLI("serve", dir, "--timeout", "2m")
	if code != 0 {
		t.Fatalf("serve without the Hub: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut = runCLI("stop", name, "--profile", "default"); code != 0 {
		t.Errorf("stop: exit %d\n%s%s", code, out, errOut)
	}
}

// One package profile runs once whichever
// runner is asked (serve --host is refused while the engine runs it, exit
// 3); of two concurrent serves the loser gets exit 3, not the engine's
// "Conflict"; when instances of one name exist under both runners (made
// here by hand), stop says how to pick one and --runner does; --bind
// publishes the port on that address only.
func TestServeTwinsAndBind(t *testing.T) {
	ctx := context.Background()
	st := cliStandIn(t, "twintest")
	dir, name, cacheHome := st.dir, st.name, st.cacheHome
	d, err := runner.ConnectDocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	code, out, errOut := runCLI("serve", dir, "--bind", "127.0.0.1", "--timeout", "2m")
	if code != 0 || !strings.Contains(out, "exposed  port") || !strings.Contains(out, "on 127.0.0.1 only") {
		t.Fatalf("serve --bind: exit %d\n%s%s", code, out, errOut)
	}
	inst, err := d.Find(ctx, runner.InstanceName(name, "default"))
	if err != nil || inst == nil || inst.Bind != "127.0.0.1" {
		t.Fatalf("container binding: %+v, %v; want the port on 127.0.0.1", inst, err)
	}
	if code, _, errOut = runCLI("serve", dir, "--host"); code != exitRunning || !strings.Contains(errOut, "is already running (docker") {
		t.Errorf("serve --host while the engine runs it: exit %d, %s", code, errOut)
	}

	// Two serves at once: one starts, the other is refused with exit 3.
	codes := make(chan int, 2)
	errs := make(chan string, 2)
	for range 2 {
		go func() {
			c, _, e := runCLI("serve", dir, "--profile", "stubborn", "--detach")
			codes <- c
			errs <- e
		}()
	}
	got := []int{<-codes, <-codes}
	msgs := <-errs + <-errs
	if !(got[0] == 0 && got[1] == exitRunning || got[0] == exitRunning && got[1] == 0) || strings.Contains(msgs, "Conflict") {
		t.Errorf("concurrent serves: exits %v, want 0 and %d; stderr:\n%s", got, exitRunning, msgs)
	}

	// A twin on the host runner (an older tt-model could make one): a live
	// process recorded as the host instance of the same name.
	twin := exec.Command("sleep", "300")
	if err := twin.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { twin.Process.Kill(); twin.Wait() })
	runDir := filepath.Join(cacheHome, "tt-model", "run", runner.InstanceName(name, "default"))
	state := fmt.Sprintf(`{"name": %q, "package": %q, "profile": "default", "pid": %d, "port": 1}`, runner.InstanceName(name, "default"), name, twin.Process.Pid)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runDir, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI("stop", name, "--profile", "default")
	if code != 2 || !strings.Contains(errOut, "--profile default --runner docker") || !strings.Contains(errOut, "--profile default --runner host") {
		t.Errorf("stop of twins: exit %d, %s; want the two ways to pick one", code, errOut)
	}
	if code, out, errOut = runCLI("stop", name, "--profile", "default", "--runner", "host", "--grace", "5s"); code != 0 || !strings.Contains(out, "stopped") {
		t.Errorf("stop --runner host: exit %d\n%s%s", code, out, errOut)
	}
	for _, p := range []string{"default", "stubborn"} {
		if code, out, errOut = runCLI("stop", name, "--profile", p, "--runner", "docker", "--grace", "5s"); code != 0 {
			t.Errorf("stop --runner docker --profile %s: exit %d\n%s%s", p, code, out, errOut)
		}
	}
}

// cliStandIn stages the runner's stand-in package (runnertest) as
// <tag>-<pid> for the CLI on the Docker engine: a local Hub with its
// weights, a fresh HF_HOME and tt-model cache (XDG_CACHE_HOME). Its
// containers and image are removed when the test ends.
type standInPackage struct {
	dir, name, commit string
	hub               *hubtest.Server
	cacheHome         string
}

func cliStandIn(t *testing.T, tag string) standInPackage {
	t.Helper()
	ctx := context.Background()
	testenv.Require(t, "docker")
	d, err := runner.ConnectDocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	server := runnertest.BuildHealthServer(t) // before XDG_CACHE_HOME moves the Go build cache
	srv, commit := runnertest.WeightsHub(t)
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	cacheHome := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cacheHome)
	name := fmt.Sprintf("%s-%d", tag, os.Getpid())
	dir, imageTag := runnertest.StagedPackage(t, name, server, commit)
	t.Cleanup(func() {
		c, err := client.New(client.FromEnv)
		if err != nil {
			return
		}
		defer c.Close()
		for _, p := range []string{"default", "stubborn", "broken", "flaky"} {
			c.ContainerRemove(ctx, runner.InstanceName(name, p), client.ContainerRemoveOptions{Force: true})
		}
		c.ImageRemove(ctx, imageTag, client.ImageRemoveOptions{Force: true})
	})
	return standInPackage{dir: dir, name: name, commit: commit, hub: srv, cacheHome: cacheHome}
}

// Through the CLI: serve of a profile whose server exits
// at start ends with exit 1 and the server's own message on stderr, with
// and without --detach, instead of waiting out --timeout; the container is
// stopped and removed rather than left restarting, unless --keep.
func TestServeReportsCrash(t *testing.T) {
	st := cliStandIn(t, "crashtest")
	for _, extra := range [][]string{nil, {"--detach"}, {"--keep"}} {
		args := append([]string{"serve", st.dir, "--profile", "broken", "--timeout", "5m"}, extra...)
		code, out, errOut := runCLI(args...)
		keep := len(extra) > 0 && extra[0] == "--keep"
		if code != 1 || !strings.Contains(errOut, runnertest.BrokenMessage) || !strings.Contains(errOut, "crashed while starting") ||
			keep != strings.Contains(errOut, "tt-model logs "+st.name+" --profile broken --runner docker") ||
			keep == strings.Contains(errOut, "stopped and removed rather than left restarting") {
			t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
		}
		code, out, errOut = runCLI("stop", st.name, "--profile", "broken", "--grace", "5s")
		if keep && code != 0 {
			t.Fatalf("stop after --keep: exit %d\n%s%s", code, out, errOut)
		}
		if !keep && (code != 1 || !strings.Contains(errOut, "no tt-model server")) {
			t.Errorf("stop after %v: exit %d, want 1: the crashed container was left\n%s%s", args, code, out, errOut)
		}
	}
}
