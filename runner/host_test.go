package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/internal/procfs"
	"github.com/ttmodel/tt-model/manifest"
)

func TestHostArgv(t *testing.T) {
	h := &Host{RunDir: "/run/tt", Supervisor: []string{"/opt/tt-model", "supervise"}, Server: "/opt/tt-model-server"}
	spec := &Spec{Name: "tt-model-x-p", Port: 20003, Chips: []int{2, 3}, Launch: manifest.Launch{
		Argv: []string{"tt-model-server", "--host", "0.0.0.0", "--port", "20003"}, ReadyPath: "/health"}}
	got := h.argv(spec, h.serverArgv(spec))
	want := []string{"/opt/tt-model", "supervise", "--ready-url", "http://127.0.0.1:20003/health", "--chips", "2,3",
		"--stop-grace", "2m0s", "--state-file", "/run/tt/tt-model-x-p/supervisor.json", "--", "/opt/tt-model-server", "--host", "0.0.0.0", "--port", "20003"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("argv =\n%q\nwant\n%q", got, want)
	}
	spec.Launch = manifest.Launch{Argv: []string{"python", "-m", "srv"}, ReadyLine: "Application startup complete"}
	spec.Chips = nil
	got = h.argv(spec, h.serverArgv(spec))
	want = []string{"/opt/tt-model", "supervise", "--ready-line", "Application startup complete", "--stop-grace", "2m0s", "--state-file", "/run/tt/tt-model-x-p/supervisor.json", "--", "python", "-m", "srv"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("argv =\n%q\nwant\n%q", got, want)
	}
}

// recordProcess writes the state of a running process as a host instance,
// the way Start records its supervisor.
func recordProcess(t *testing.T, h *Host, name string, cmd *exec.Cmd, tick string) {
	t.Helper()
	if err := os.MkdirAll(h.dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	st := hostState{Name: name, Package: "pkg", Profile: "default", PID: cmd.Process.Pid, StartTick: tick, Port: 20001, Started: time.Now()}
	b, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(h.dir(name), "state.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestHostFindStopLogs(t *testing.T) {
	ctx := context.Background()
	h := &Host{RunDir: t.TempDir()}
	// A process in its own session that prints and then waits, like a supervisor.
	cmd := exec.Command("sh", "-c", "echo started; exec sleep 300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	name := "tt-model-pkg-default"
	if err := os.MkdirAll(h.dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(h.logPath(name))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	// Until it has printed, a SIGTERM could reach the shell before its echo.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(h.logPath(name)); strings.Contains(string(b), "started") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the process never printed")
		}
	}
	recordProcess(t, h, name, cmd, procfs.Self(cmd.Process.Pid).StartTick)

	inst, err := h.Find(ctx, name)
	if err != nil || inst == nil || !inst.Running || inst.ID != strconv.Itoa(cmd.Process.Pid) {
		t.Fatalf("Find = %+v, %v; want the running process", inst, err)
	}
	// The same pid with another start tick is another process.
	recordProcess(t, h, "tt-model-pkg-other", cmd, "1")
	if other, _ := h.Find(ctx, "tt-model-pkg-other"); other == nil || other.Running {
		t.Errorf("a recorded pid with a different start tick reads as running: %+v", other)
	}
	list, err := h.List(ctx)
	if err != nil || len(list) != 2 {
		t.Errorf("List = %+v, %v", list, err)
	}

	// Following stops by itself once the process is gone.
	var out bytes.Buffer
	followed := make(chan error, 1)
	go func() { followed <- h.Logs(ctx, inst, true, &out) }()
	res, err := h.Stop(ctx, inst, 10*time.Second, io.Discard)
	if err != nil || res.Killed {
		t.Fatalf("Stop = %+v, %v; want SIGTERM to end it", res, err)
	}
	<-done
	if err := <-followed; !errors.As(err, new(*FollowEnded)) || !strings.Contains(out.String(), "started") {
		t.Errorf("Logs -f = %q, %v", out.String(), err)
	}
	if _, err := os.Stat(h.dir(name)); !os.IsNotExist(err) {
		t.Errorf("state folder kept after stop: %v", err)
	}
}

func TestHostStartNeedsServer(t *testing.T) {
	h := &Host{RunDir: t.TempDir(), Supervisor: []string{"true"}}
	spec := &Spec{
		Name: "tt-model-x-default", StateDir: t.TempDir(), HF: hub.Config{},
		Package: &Package{Path: "x.json", Wire: &manifest.Wire{Name: "x"}},
		Profile: manifest.Profile{Name: "default"},
		Launch:  manifest.Launch{Argv: []string{"tt-model-server-that-does-not-exist"}},
	}
	if _, err := h.Start(context.Background(), spec, io.Discard); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("err = %v, want a hint to build the server", err)
	}
}

// On the host the server is given the API key file itself, and the
// caches' host folders, as the container is given their mounts.
func TestHostEnv(t *testing.T) {
	spec := &Spec{
		Package: &Package{Wire: &manifest.Wire{Name: "m"}}, StateDir: "/s/m", APIKeyFile: "/etc/tt-model/key",
		HF: hub.Config{HFHome: "/hf-home", CacheDir: "/hf-home/hub"},
	}
	env := hostEnv(spec)
	for k, want := range map[string]string{"TT_API_KEY_FILE": "/etc/tt-model/key", "TT_WEIGHT_CACHE": "/s/m/weights", "TT_METAL_CACHE": "/s/m/cache", "HF_HOME": "/hf-home"} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q (env %v)", k, env[k], want, env)
		}
	}
	spec.APIKeyFile = ""
	if _, ok := hostEnv(spec)["TT_API_KEY_FILE"]; ok {
		t.Errorf("TT_API_KEY_FILE set without a key file")
	}
	if line := (&Host{Supervisor: []string{"tt-model", "supervise"}}).Command(spec); !strings.Contains(line, "TT_WEIGHT_CACHE=/s/m/weights") {
		t.Errorf("--print shows the container's paths, not the host's: %s", line)
	}
}

func TestHostPaths(t *testing.T) {
	env := hostPaths(map[string]string{
		"PI05_HANG_MARKER": "/cache/pi05_hang_marker", "X": "/cachex/y", "W": "/weight-cache", "HF_MODEL": "/hf/hub/m", "N": "2",
	}, map[string]string{"/cache": "/home/u/.cache/tt-model/p/cache", "/weight-cache": "/w", "/hf": "/home/u/hf"})
	want := map[string]string{
		"PI05_HANG_MARKER": "/home/u/.cache/tt-model/p/cache/pi05_hang_marker", "X": "/cachex/y", "W": "/w", "HF_MODEL": "/home/u/hf/hub/m", "N": "2",
	}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("hostPaths = %v\nwant %v", env, want)
	}
}
