package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/internal/testing/syncbuf"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/manifest"
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
	d, si := dockerStandIn(t, "rtest")
	name := si.pkg.Wire.Name
	start := func(profile string) (*Spec, *Instance, string) {
		t.Helper()
		spec, inst := si.start(t, profile)
		var logs bytes.Buffer
		if err := WaitReady(ctx, d, inst, spec.Launch, 2*time.Minute, &logs); err != nil {
			t.Fatalf("%v\n%s", err, logs.String())
		}
		return spec, inst, logs.String()
	}

	spec, inst, logs := start("default")
	wantModel := "HF_MODEL=/hf/hub/models--org--weights/snapshots/" + si.snaps[0].Commit
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

	// A container someone else killed is reported as already exited (137),
	// not as killed by this stop after its grace.
	_, inst, _ = start("default")
	if _, err := d.c.ContainerKill(ctx, inst.ID, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	waitNotRunning(t, d, inst)
	res, err = d.Stop(ctx, inst, 5*time.Second, io.Discard)
	if err != nil || res.Killed || !res.AlreadyExited || res.ExitCode != 137 {
		t.Errorf("stop after docker kill = %+v, %v; want already exited (137), not killed by the stop", res, err)
	}
}

func waitNotRunning(t *testing.T, d *Docker, inst *Instance) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		cur, err := d.Find(context.Background(), inst.Name)
		if err != nil {
			t.Fatal(err)
		}
		if cur == nil || !cur.Running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still runs: %+v", inst.Name, cur)
		}
	}
}

// A server that cannot start makes WaitReady return a CrashError with the
// server's own message as soon as the engine restarts it (this stand-in
// image has no supervisor), not a timeout. Following the logs of a server
// the engine restarts goes on across the restart, and ends saying why when
// the container stops for good.
func TestDockerCrashLoopAndFollow(t *testing.T) {
	ctx := context.Background()
	d, si := dockerStandIn(t, "rcrash")
	name := si.pkg.Wire.Name
	start := func(profile string) (*Spec, *Instance) { return si.start(t, profile) }

	spec, inst := start("broken")
	began := time.Now()
	err := WaitReady(ctx, d, inst, spec.Launch, 2*time.Minute, io.Discard)
	var crash *CrashError
	if !errors.As(err, &crash) || !strings.Contains(err.Error(), runnertest.BrokenMessage) || !strings.Contains(err.Error(), "tt-model logs "+name+" --profile broken") {
		t.Fatalf("WaitReady = %v; want a CrashError with the server's message and the logs command", err)
	}
	t.Logf("crash noticed after %s:\n%v", time.Since(began).Round(time.Millisecond), err)

	_, inst = start("flaky")
	var out syncbuf.Buffer
	followed := make(chan error, 1)
	go func() { followed <- d.Logs(ctx, inst, true, &out) }()
	for deadline := time.Now().Add(2 * time.Minute); strings.Count(out.String(), "listening on") < 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("logs -f did not follow the engine's restart:\n%s", out.String())
		}
	}
	if _, err := d.c.ContainerStop(ctx, inst.ID, client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-followed:
		var ended *FollowEnded
		if !errors.As(err, &ended) || !strings.Contains(ended.Reason, "does not restart it") {
			t.Errorf("follow ended with %v; want a FollowEnded saying the engine does not restart it", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("logs -f did not end after the container stopped for good")
	}
	if n := strings.Count(out.String(), "HF_MODEL="); n < 2 || strings.Count(out.String(), "listening on") != n {
		t.Errorf("each life's lines exactly once, got:\n%s", out.String())
	}
}

// TestContainerConfig checks the container upstream's serve composes, for a
// two-chip profile on a host with hugepages and a separate HF_HUB_CACHE.
func TestContainerConfig(t *testing.T) {
	ctx := context.Background()
	testenv.Require(t, "docker") // for the rootless check
	d, err := ConnectDocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rev := "0123456789012345678901234567890123456789"
	pkg := &Package{Wire: &manifest.Wire{Name: "m", Weights: &manifest.WireWeights{Repo: "org/w", Revision: &rev}}}
	state := t.TempDir()
	spec := &Spec{
		Package: pkg, Profile: manifest.Profile{Name: "p300"}, Name: "tt-model-m-p300", Port: 20005, Chips: []int{2, 3},
		Launch:   manifest.Launch{Argv: []string{"tt-model-server", "--port", "20005"}, Env: map[string]string{"HF_MODEL": "org/w", "MESH_DEVICE": "P300"}, Port: 20005, ReadyPath: "/health"},
		Weights:  []*hub.Snapshot{{Commit: rev}},
		HF:       hub.Config{HFHome: filepath.Join(state, "hf"), CacheDir: filepath.Join(state, "hubcache"), Token: "secret"},
		StateDir: filepath.Join(state, "m"), Hugepages: true, APIKeyFile: "/etc/tt-model/key",
	}
	spec.WeightsDir = filepath.Join(spec.HF.CacheDir, "models--org--w", "snapshots", rev)
	cfg, host, err := d.containerConfig(ctx, spec, "tt-model/m:1", []string{"/usr/local/bin/tt-model", "supervise", "--"})
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := []string{
		"HF_HOME=/hf", "HF_MODEL=/hf/hub/models--org--w/snapshots/" + rev, "HF_TOKEN=secret", "MESH_DEVICE=P300",
		"TT_API_KEY_FILE=/run/secrets/tt-api-key", "TT_METAL_CACHE=/cache", "TT_WEIGHT_CACHE=/weight-cache",
	}
	if strings.Join(cfg.Env, " ") != strings.Join(wantEnv, " ") {
		t.Errorf("env = %q\nwant %q", cfg.Env, wantEnv)
	}
	wantBinds := []string{
		spec.HF.HFHome + ":/hf", spec.HF.CacheDir + ":/hf/hub", filepath.Join(state, "m", "cache") + ":/cache",
		filepath.Join(state, "m", "weights") + ":/weight-cache", "/etc/tt-model/key:/run/secrets/tt-api-key:ro",
		"/dev/hugepages-1G:/dev/hugepages-1G",
	}
	if strings.Join(host.Binds, " ") != strings.Join(wantBinds, " ") {
		t.Errorf("binds = %q\nwant %q", host.Binds, wantBinds)
	}
	if len(host.Devices) != 2 || host.Devices[1].PathOnHost != "/dev/tenstorrent/3" || host.IpcMode != "host" {
		t.Errorf("devices %+v, ipc %q; want chips 2 and 3 and --ipc host", host.Devices, host.IpcMode)
	}
	if host.RestartPolicy.Name != "on-failure" || len(host.PortBindings) != 1 {
		t.Errorf("restart %+v, ports %+v", host.RestartPolicy, host.PortBindings)
	}
	if cfg.Labels[LabelName] != "m" || cfg.Labels[LabelProfile] != "p300" || cfg.Labels[LabelDevices] != "2,3" || cfg.Labels[LabelPort] != "20005" {
		t.Errorf("labels = %v", cfg.Labels)
	}
	if strings.Join(cfg.Entrypoint, " ") != "/usr/local/bin/tt-model supervise --ready-url http://127.0.0.1:20005/health --" {
		t.Errorf("entrypoint = %q", cfg.Entrypoint)
	}
}
