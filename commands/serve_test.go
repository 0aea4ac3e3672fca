package commands

import (
	"context"
	"fmt"
	"github.com/ttmodel/tt-model/internal/testenv"
	"os"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/runner"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// TestServeOnDocker drives serve, a refused second serve, ps, logs and stop
// through the CLI on the Docker engine, then serves again with the Hub gone
// (the pinned weights are complete in the cache).
func TestServeOnDocker(t *testing.T) {
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
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	name := fmt.Sprintf("clitest-%d", os.Getpid())
	dir, tag := runnertest.StagedPackage(t, name, server, commit)
	instance := runner.InstanceName(name, "default")
	t.Cleanup(func() {
		c, err := client.New(client.FromEnv)
		if err != nil {
			return
		}
		defer c.Close()
		c.ContainerRemove(ctx, instance, client.ContainerRemoveOptions{Force: true})
		c.ImageRemove(ctx, tag, client.ImageRemoveOptions{Force: true})
	})
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
