// Package systemdtest boots a Debian container whose PID 1 is a real
// systemd on the Docker engine and runs commands in it, for tests of
// `tt-model service` and `tt-model supervise` under a live service manager.
// scripts/systemd-testhost-image.sh builds (and caches) its image.
package systemdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/internal/engine"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
)

// TestUser is the account of the image whose user manager runs at boot
// (lingering), for `--user` units; its runtime dir is /run/user/<uid>.
const (
	TestUser    = "tester"
	TestUserUID = 1000
)

// Host is one booted container with systemd as PID 1.
type Host struct {
	c    *client.Client
	ID   string
	Name string
	IP   string // on the engine's bridge network, reachable from this machine
}

// Result is what a command run in the container printed and how it ended.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Boot builds or finds the image, starts a container of it with systemd as
// PID 1, waits until systemd has finished booting, and removes the
// container when t ends. binds are "HOST:CONTAINER[:ro]" mounts (the
// binaries and files a test puts in). The test needs the Docker engine and,
// while the image is not built yet, root, debootstrap and Debian's mirror.
func Boot(t testing.TB, binds ...string) *Host {
	t.Helper()
	testenv.Require(t, "docker")
	ctx := context.Background()
	img := Image(t)
	c, err := engine.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	hc, err := hostConfig(binds)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("systemd-testhost-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	created, err := c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:    img,
			Hostname: "systemd-testhost",
			// systemd's "halt" signal: a `docker stop` shuts it down cleanly
			// (`docker import` cannot record a stop signal in the image).
			StopSignal: "SIGRTMIN+3",
			Labels:     map[string]string{"org.tt-model.test": "systemd"},
		},
		HostConfig: hc,
	})
	if err != nil {
		t.Fatalf("create the systemd test host: %v", err)
	}
	h := &Host{c: c, ID: created.ID, Name: name}
	t.Cleanup(func() {
		if t.Failed() {
			r, _ := h.Run(context.Background(), "journalctl", "-b", "--no-pager", "-n", "300")
			t.Logf("journal of %s (last 300 lines):\n%s", name, r.Stdout)
		}
		if _, err := c.ContainerRemove(context.Background(), h.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Logf("remove %s: %v", name, err)
		}
	})
	if _, err := c.ContainerStart(ctx, h.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start the systemd test host: %v", err)
	}
	info, err := c.ContainerInspect(ctx, h.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Container.NetworkSettings != nil {
		for _, ep := range info.Container.NetworkSettings.Networks {
			if ep != nil && ep.IPAddress.IsValid() {
				h.IP = ep.IPAddress.String()
				break
			}
		}
	}
	if h.IP == "" {
		t.Fatalf("%s has no IP address on the engine's network", name)
	}
	h.waitBooted(t)
	return h
}

// waitBooted waits until systemd says the boot is over and fails the test
// unless every unit started ("running"; "degraded" names the failed ones).
func (h *Host) waitBooted(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last Result
	for ctx.Err() == nil {
		// Early on, systemctl cannot reach the manager yet: retry.
		r, err := h.Run(ctx, "systemctl", "is-system-running", "--wait")
		if err != nil {
			t.Fatal(err)
		}
		last = r
		switch strings.TrimSpace(r.Stdout) {
		case "running":
			return
		case "degraded":
			failed, _ := h.Run(ctx, "systemctl", "--failed", "--no-pager")
			t.Fatalf("systemd booted with failed units:\n%s", failed.Stdout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("systemd did not finish booting in 2 min: %q %q", last.Stdout, last.Stderr)
}

// Run runs argv as root in the container.
func (h *Host) Run(ctx context.Context, argv ...string) (Result, error) {
	return h.exec(ctx, client.ExecCreateOptions{Cmd: argv})
}

// RunUser runs argv as TestUser with what a login session of it would
// have: its home, and the runtime dir where its user manager listens.
func (h *Host) RunUser(ctx context.Context, argv ...string) (Result, error) {
	return h.exec(ctx, client.ExecCreateOptions{
		Cmd:  argv,
		User: TestUser,
		Env: []string{
			"HOME=/home/" + TestUser,
			fmt.Sprintf("XDG_RUNTIME_DIR=/run/user/%d", TestUserUID),
		},
		WorkingDir: "/home/" + TestUser,
	})
}

func (h *Host) exec(ctx context.Context, opts client.ExecCreateOptions) (Result, error) {
	opts.AttachStdout, opts.AttachStderr = true, true
	created, err := h.c.ExecCreate(ctx, h.ID, opts)
	if err != nil {
		return Result{}, fmt.Errorf("exec %q in %s: %w", opts.Cmd, h.Name, err)
	}
	att, err := h.c.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return Result{}, fmt.Errorf("exec %q in %s: %w", opts.Cmd, h.Name, err)
	}
	defer att.Close()
	var out, errOut bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errOut, att.Reader); err != nil {
		return Result{}, fmt.Errorf("exec %q in %s: read its output: %w", opts.Cmd, h.Name, err)
	}
	info, err := h.c.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
	if err != nil {
		return Result{}, fmt.Errorf("exec %q in %s: %w", opts.Cmd, h.Name, err)
	}
	return Result{Stdout: out.String(), Stderr: errOut.String(), Code: info.ExitCode}, nil
}

// Must runs argv as root and fails the test unless it exits 0; it returns
// the standard output.
func (h *Host) Must(t testing.TB, argv ...string) string {
	t.Helper()
	r, err := h.Run(context.Background(), argv...)
	if err != nil {
		t.Fatal(err)
	}
	if r.Code != 0 {
		t.Fatalf("%q in %s: exit %d\nstdout: %s\nstderr: %s", argv, h.Name, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// Image returns the tag of the systemd test host image, building it with
// scripts/systemd-testhost-image.sh when the engine does not have it yet.
// A machine that cannot build it (no debootstrap, not root) misses the
// "debootstrap" requirement.
func Image(t testing.TB) string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(self), "..", "..", "..", "scripts", "systemd-testhost-image.sh")
	var stderr bytes.Buffer
	cmd := exec.Command(script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		testenv.Missing(t, "debootstrap", errors.New(strings.TrimSpace(stderr.String())))
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	tag := lines[len(lines)-1]
	if stderr.Len() > 0 {
		t.Logf("%s", strings.TrimSpace(stderr.String()))
	}
	return tag
}
