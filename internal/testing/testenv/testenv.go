// Package testenv decides what a test does when this machine lacks
// something it needs (a Docker engine, skopeo, a PID namespace, …): skip
// visibly, or fail when TT_REQUIRE names that requirement. CI sets
// TT_REQUIRE to everything .ci/run installs, so a tool that should be there
// and is not turns the run red instead of quietly green.
//
// Every skip is also appended to the file TT_SKIP_LOG names (the Makefile
// sets it), so `make test` ends with one line per skipped test and reason.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/engine"
	"github.com/ttmodel/tt-model/internal/testing/kubebin"
)

// RequireEnv names the requirements that must be present: a comma list of
// requirement names, or "all".
const RequireEnv = "TT_REQUIRE"

// SkipLogEnv names the file each skip is appended to.
const SkipLogEnv = "TT_SKIP_LOG"

// Python is Debian's interpreter, where the apt python3-* modules (.ci/run installs them) live; a
// python3 earlier on PATH (pyenv, a venv) may not have them.
const Python = "/usr/bin/python3"

// checks are the requirements with a check beyond "a program of that name
// is on PATH". Each returns nil when the requirement is met.
var checks = map[string]func() error{
	"docker":   dockerEngine,
	"registry": func() error { return onPath("docker-registry") },
	"pidns":    pidNamespace,
	"freezer":  cgroupFreezer,
	"python3-msgpack": func() error {
		return pythonImports("msgpack")
	},
	"python3-websockets": func() error {
		return pythonImports("websockets")
	},
	// kube-apiserver and etcd, built by scripts/kube-apiserver.sh.
	kubebin.Requirement: func() error {
		_, err := kubebin.Dir()
		return err
	},
	// The above plus the node: kubelet, controller manager, containerd, CNI, root.
	kubebin.NodeRequirement: func() error {
		dir, err := kubebin.Dir()
		if err != nil {
			return err
		}
		_, err = kubebin.Node(dir)
		return err
	},
}

// Require makes t depend on the named requirement: a known name of this
// package (docker, registry, pidns, python3-msgpack, …) or any program that
// must be on PATH (skopeo, umoci, systemd-analyze, chromium, …). When it is
// missing the test skips, or fails when TT_REQUIRE names it.
func Require(t testing.TB, name string) {
	t.Helper()
	check := checks[name]
	if check == nil {
		check = func() error { return onPath(name) }
	}
	if err := check(); err != nil {
		Missing(t, name, err)
	}
}

// Missing reports that requirement name is not met for the reason err:
// t.Fatalf when TT_REQUIRE names it, t.Skipf otherwise, recorded in the
// skip log either way.
func Missing(t testing.TB, name string, err error) {
	t.Helper()
	msg := fmt.Sprintf("needs %s: %v", name, err)
	if Required(name) {
		t.Fatalf("%s (required here: %s=%s)", msg, RequireEnv, os.Getenv(RequireEnv))
	}
	logSkip(t, msg)
	t.Skip(msg)
}

// Skip skips t for a reason that is not a missing requirement (an opt-in
// test whose inputs were not given, a platform without a kernel), visibly:
// the reason lands in the skip log like any other.
func Skip(t testing.TB, reason string) {
	t.Helper()
	logSkip(t, reason)
	t.Skip(reason)
}

// Required reports whether TT_REQUIRE names requirement name (or is "all").
func Required(name string) bool {
	for _, r := range strings.Split(os.Getenv(RequireEnv), ",") {
		r = strings.TrimSpace(r)
		if r == name || r == "all" {
			return true
		}
	}
	return false
}

func logSkip(t testing.TB, reason string) {
	appendLine(t, SkipLogEnv, fmt.Sprintf("SKIP %s: %s", t.Name(), reason))
}

// RecordLogEnv names the file Record appends to (the Makefile sets it and
// prints it after the tests, so CI's log shows what ran on real components).
const RecordLogEnv = "TT_RECORD_LOG"

// Record notes a fact a passing test established on a real component (a
// pod Ready on the test node, and in how long) in t's log and in the file
// TT_RECORD_LOG names, one line each.
func Record(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Log(msg)
	appendLine(t, RecordLogEnv, fmt.Sprintf("%s: %s", t.Name(), msg))
}

// appendLine appends line (its newlines flattened) to the file env names,
// if any; O_APPEND keeps lines of parallel test binaries whole.
func appendLine(t testing.TB, env, line string) {
	path := os.Getenv(env)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Logf("%s %s: %v", env, path, err)
		return
	}
	defer f.Close()
	fmt.Fprintln(f, strings.ReplaceAll(line, "\n", " "))
}

func onPath(name string) error {
	if _, err := exec.LookPath(name); err != nil {
		return fmt.Errorf("%s is not on PATH (.ci/run installs it)", name)
	}
	return nil
}

func dockerEngine() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := engine.Connect(ctx)
	if err != nil {
		return err
	}
	return c.Close()
}

func pidNamespace() error {
	if err := onPath("unshare"); err != nil {
		return err
	}
	out, err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "true").CombinedOutput()
	if err != nil {
		return fmt.Errorf("cannot create a PID namespace (needs root or CAP_SYS_ADMIN): %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// FreezerDir is the cgroup v1 freezer hierarchy. A process frozen there
// stays in the kernel after SIGKILL until it is thawed, as one stuck in a
// driver does: tests of what a supervisor does about such a process use it.
// (cgroup v2's freezer lets SIGKILL through.)
const FreezerDir = "/sys/fs/cgroup/freezer"

func cgroupFreezer() error {
	probe, err := os.MkdirTemp(FreezerDir, "tt-model-probe-")
	if err != nil {
		return fmt.Errorf("cannot create a cgroup v1 freezer group (needs root and the freezer hierarchy at %s): %w", FreezerDir, err)
	}
	return os.Remove(probe)
}

func pythonImports(module string) error {
	out, err := exec.Command(Python, "-c", "import "+module).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s cannot import %s: %v: %s", Python, module, err, strings.TrimSpace(string(out)))
	}
	return nil
}
