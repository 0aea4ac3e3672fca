package commands

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/internal/testing/syncbuf"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// TestServiceUnitProfileEnv renders, for every profile of models/pi05, the
// unit `tt-model service install --print --manifest … --profile P` writes
// (the real tt-model, the stand-in server as its tt-model-server), then runs
// the unit's ExecStart with only the unit's Environment=, as systemd starts
// it, and asks the server for its environment (GET /env): exactly the
// unit's variables and profile P's launch environment, none that only
// another profile sets. The unit names no image, so nothing of another
// profile can come from one; the test keeps it that way.
func TestServiceUnitProfileEnv(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "builds tt-model and runs its supervisor: skipped with -short")
	}
	tool := runnertest.StandInTools(t, "..")
	port := servertest.FreePort(t)
	wire := pi05Wire(t, func(w *manifest.Wire) { w.Container.Serve.Port = &port })
	w, err := manifest.ReadWire(wire)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	installEnv := []string{"PATH=" + filepath.Dir(tool) + ":/usr/bin:/bin", "HOME=" + home, "HF_HOME=" + filepath.Join(home, "hf")}
	for _, c := range w.Container.Profiles() {
		t.Run(c.Name, func(t *testing.T) {
			prefix := filepath.Join(home, "prefix-"+c.Name)
			cmd := exec.Command(tool, "service", "install", "--print", "--manifest", wire, "--profile", c.Name,
				"--hang-marker", filepath.Join(home, "hang_marker"), "--prefix", prefix)
			cmd.Env = installEnv
			unit, err := cmd.Output()
			if err != nil {
				t.Fatalf("service install --print: %v", err)
			}
			// What install would copy under the prefix, which the unit runs.
			if err := copyPrefix(prefix, "tt-model-pi05", []prefixCopy{
				{tool, filepath.Join(prefix, "bin", "tt-model")},
				{filepath.Join(filepath.Dir(tool), "tt-model-server"), filepath.Join(prefix, "bin", "tt-model-server")},
				{wire, filepath.Join(prefix, manifest.WireFile)},
			}); err != nil {
				t.Fatal(err)
			}
			argv, unitEnv := execStart(t, unit)
			got := runUnit(t, argv, unitEnv, port)

			own, foreign := runnertest.ProfileEnv(t, w, c.Name)
			want := map[string]string{}
			for _, kv := range unitEnv {
				k, v, _ := strings.Cut(kv, "=")
				want[k] = v
			}
			for k, v := range own {
				want[k] = v
			}
			for _, k := range foreign {
				if v, ok := got[k]; ok {
					t.Errorf("%s=%s reached the %s server: only other profiles set it", k, v, c.Name)
				}
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s=%q, want %q", k, got[k], v)
				}
			}
			for k, v := range got {
				if _, ok := want[k]; !ok && !slices.Contains(foreign, k) {
					t.Errorf("%s=%s reached the server from neither the unit nor the profile", k, v)
				}
			}
		})
	}
}

// execStart reads the unit's ExecStart= words and Environment= assignments
// (the test's paths need no quoting; a quoted word fails the test).
func execStart(t *testing.T, unit []byte) (argv, env []string) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(unit))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			argv = strings.Fields(v)
		}
		if v, ok := strings.CutPrefix(line, "Environment="); ok {
			env = append(env, v)
		}
		if strings.HasPrefix(line, "ExecStart=") || strings.HasPrefix(line, "Environment=") {
			if strings.ContainsAny(line, `"\`) {
				t.Fatalf("the test cannot split the quoted line %q", line)
			}
		}
	}
	if len(argv) == 0 {
		t.Fatalf("no ExecStart= in\n%s", unit)
	}
	return argv, env
}

// runUnit starts argv with env alone and returns the environment the server
// answers on port; the supervisor is stopped when the test ends.
func runUnit(t *testing.T, argv, env []string, port int) map[string]string {
	t.Helper()
	var out syncbuf.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }() //nolint:errcheck // the exit is the test's own doing
	t.Cleanup(func() {
		syscall.Kill(cmd.Process.Pid, syscall.SIGTERM) //nolint:errcheck // already gone is fine
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // already gone is fine
			<-done
		}
	})
	return runnertest.ServerEnv(t, fmt.Sprintf("http://127.0.0.1:%d", port), out.String)
}
