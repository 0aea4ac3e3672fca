package commands

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/readiness"
	"github.com/ttmodel/tt-model/internal/testing/systemdtest"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/internal/version"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// Paths inside the systemd test host. The binaries sit where `make build`
// leaves them for a user, off systemd's PATH: only the installing shell has
// them on its PATH.
const (
	liveBin      = "/opt/tt-model/bin"
	liveData     = "/srv/tt-model"
	liveTTModel  = liveBin + "/tt-model"
	liveTestSrv  = liveBin + "/testserver"
	liveRFDETR   = liveData + "/rf-detr/" + manifest.WireFile
	liveUserPath = liveBin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// TestServiceUnderSystemd installs units with the real tt-model in a
// container whose PID 1 is systemd and checks what systemd does with them:
// readiness, start-timeout extension, the supervisor's in-unit restarts,
// systemd's own Restart= after the supervisor gives up, the watchdog, the
// stop grace, the journal, `service status`/`uninstall`, and a user unit.
// One booted host serves every subtest; each has its own unit, port and
// hang marker, so most run in parallel.
func TestServiceUnderSystemd(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "boots a systemd container and serves RF-DETR: skipped with -short")
	}
	bin, data := t.TempDir(), t.TempDir()
	buildLiveBinaries(t, bin)
	writeRFDETRFixture(t, data)
	h := systemdtest.Boot(t, bin+":"+liveBin+":ro", data+":"+liveData+":ro")
	// As a user would: the weights go into root's Hugging Face cache.
	h.Must(t, liveTTModel, "weights", "import", liveData+"/checkpoint", "Roboflow/rf-detr-base@"+runnertest.RFDETRPin)

	t.Run("units", func(t *testing.T) {
		for name, f := range map[string]func(*testing.T, *systemdtest.Host){
			"rfdetr-ready-hang-stop":    testLiveRFDETR,
			"watchdog":                  testLiveWatchdog,
			"restart-outlasts-watchdog": testLiveRestartOutlastsWatchdog,
			"stop-grace":                testLiveStopGrace,
			"stop-stuck":                testLiveStopStuck,
			"bad-settings":              testLiveBadSettings,
			"user-unit":                 testLiveUserUnit,
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				f(t, h)
			})
		}
	})
	// Alone, one after the other: installs and uninstalls reload systemd,
	// and a reload resets the start limit and drops start extensions (see
	// each test).
	t.Run("supervisor-gives-up", func(t *testing.T) { testLiveGivesUp(t, h) })
	t.Run("start-timeout", func(t *testing.T) { testLiveStartTimeout(t, h) })
}

// buildLiveBinaries builds tt-model, tt-model-server and the supervisor's
// test server into dir. The test host is Debian bookworm: cgo binaries
// built on a bookworm-or-older host run there as they are.
func buildLiveBinaries(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/tt-model", "./cmd/tt-model-server", "./supervisor/internal/testserver")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the binaries: %v\n%s", err, out)
	}
}

// writeRFDETRFixture writes a random full-size RF-DETR checkpoint (its
// detections are meaningless) and the published manifest of a copy of
// models/rf-detr with the hang profile.
func writeRFDETRFixture(t *testing.T, dir string) {
	t.Helper()
	if err := (rfdetr.RandomCheckpoint{Seed: 7}).Write(filepath.Join(dir, "checkpoint")); err != nil {
		t.Fatal(err)
	}
	yaml, err := os.ReadFile("../models/rf-detr/tt-model.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(yaml, []byte("\nserve_profiles:")) {
		t.Fatal("models/rf-detr/tt-model.yaml has serve_profiles now; merge the hang profile into them")
	}
	src := filepath.Join(t.TempDir(), "tt-model.yaml")
	if err := os.WriteFile(src, append(yaml, runnertest.RFDETRHangProfile()...), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Load(src, manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "rf-detr", manifest.WireFile)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.ToWire(manifest.WireInfo{ImageTag: "test", ToolVersion: version.Version}).WriteFile(out); err != nil {
		t.Fatal(err)
	}
}

// testLiveRFDETR: `service install --manifest` → `systemctl enable --now`;
// the unit is active only once RF-DETR answers /health, with the
// supervisor's STATUS=; a prediction makes the server exit 75 and the
// supervisor resets and restarts it inside the unit (systemd sees no
// restart); `systemctl stop` ends it cleanly; the journal holds both
// programs' lines; `service status` and `uninstall` work on the live unit.
func testLiveRFDETR(t *testing.T, h *systemdtest.Host) {
	u := liveUnit{h: h, name: "tt-model-rf-detr"}
	// --run-as tt-model creates the system user, then refuses a cache it
	// cannot reach, by name, before writing any unit.
	if out := u.ttModel(t, 1, "service", "install", "--manifest", liveRFDETR, "--name", "tt-model-run-as", "--run-as", "tt-model"); !strings.Contains(out, "cannot pass through /root") {
		t.Errorf("--run-as with root's cache: %q", out)
	}
	h.Must(t, "id", "tt-model")
	if r, _ := h.Run(context.Background(), "test", "-e", "/etc/systemd/system/tt-model-run-as.service"); r.Code == 0 {
		t.Error("a refused --run-as install left a unit")
	}
	// The unit's own marker, in the state folder systemd makes for it.
	marker := "/var/lib/tt-model-rf-detr/hang_marker"
	out := u.ttModel(t, 0, "service", "install", "--manifest", liveRFDETR,
		"--reset-cmd", "/bin/echo test-reset chips={chips}")
	if !strings.Contains(out, "installed and enabled tt-model-rf-detr.service") {
		t.Errorf("install said %q", out)
	}
	unitText := h.Must(t, "cat", "/etc/systemd/system/tt-model-rf-detr.service")
	t.Logf("the installed unit:\n%s", unitText)
	// It runs the copies under the prefix, not the files it was installed from.
	const prefix = "/usr/local/lib/tt-model/tt-model-rf-detr"
	if !strings.Contains(unitText, "ExecStart="+prefix+"/bin/tt-model supervise --manifest "+prefix+"/"+manifest.WireFile+" ") ||
		!strings.Contains(unitText, "Environment=PATH="+prefix+"/bin:/usr/local/sbin:") || strings.Contains(unitText, liveBin) || strings.Contains(unitText, liveData) {
		t.Errorf("the unit does not run its copies under %s", prefix)
	}
	// Everything below runs under the sandbox: the weights in root's home
	// (read-only homes, the cache writable), the marker, the chip locks.
	if st := u.show(t, "ProtectSystem", "ProtectHome", "PrivateTmp", "NoNewPrivileges", "StateDirectory"); st["ProtectSystem"] != "strict" ||
		st["ProtectHome"] != "read-only" || st["PrivateTmp"] != "yes" || st["NoNewPrivileges"] != "yes" || st["StateDirectory"] != u.name {
		t.Errorf("the unit is not sandboxed: %v", st)
	}
	u.systemctl(t, 0, "enable", "--now", "--no-block", u.name)

	// Watch the start: while systemd says activating, /health must not be
	// ok yet at least once (the model loads for seconds), and the first
	// time it says active, /health must already answer ok.
	health := fmt.Sprintf("http://%s:8000/health", h.IP)
	sawUnready := false
	deadline := time.Now().Add(3 * time.Minute)
	for {
		st := u.show(t, "ActiveState", "SubState")
		ok := healthOK(health)
		if st["ActiveState"] == "active" {
			if !ok {
				t.Fatalf("the unit is active (%s) but %s does not answer ok", st["SubState"], health)
			}
			break
		}
		// inactive: the start job is queued but has not run yet (--no-block).
		if (st["ActiveState"] != "activating" && st["ActiveState"] != "inactive") || time.Now().After(deadline) {
			t.Fatalf("waiting for active: unit is %s (%s)\n%s", st["ActiveState"], st["SubState"], u.journal(t))
		}
		if !ok {
			sawUnready = true
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !sawUnready {
		t.Error("never saw the unit activating while the model was still loading")
	}
	st := u.show(t, "StatusText", "MainPID", "NRestarts", "SubState")
	if st["StatusText"] != "ready: server ready (start 1)" || st["SubState"] != "running" {
		t.Errorf("after the start: %v", st)
	}
	j := u.journal(t)
	for _, want := range []string{
		"Started tt-model-rf-detr.service",                                // systemd, on READY=1
		"msg=\"warm-up complete\"",                                        // the server
		`msg="state ready" from=starting detail="server ready (start 1)"`, // the supervisor
	} {
		if !strings.Contains(j, want) {
			t.Errorf("the journal lacks %q:\n%s", want, j)
		}
	}
	if s := u.ttModel(t, 0, "service", "status", "--manifest", liveRFDETR); !strings.Contains(s, "tt-model-rf-detr.service: active (running)") ||
		!strings.Contains(s, "ready: server ready (start 1)") {
		t.Errorf("service status: %q", s)
	}

	// Exit 75: the supervisor resets (the test reset command) and starts the
	// server again; systemd's unit stays active with the same main process.
	if n, err := runnertest.PredictRFDETR(fmt.Sprintf("http://%s:8000/predict", h.IP)); err != nil || n < 1 {
		t.Fatalf("/predict: %d detections, %v", n, err)
	}
	deadline = time.Now().Add(3 * time.Minute)
	for {
		now := u.show(t, "ActiveState", "StatusText")
		if now["ActiveState"] != "active" {
			t.Fatalf("systemd saw the hang: the unit is %s\n%s", now["ActiveState"], u.journal(t))
		}
		if now["StatusText"] == "ready: server ready (start 2)" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not come back: %v\n%s", now, u.journal(t))
		}
		time.Sleep(200 * time.Millisecond)
	}
	after := u.show(t, "MainPID", "NRestarts")
	if after["MainPID"] != st["MainPID"] || after["NRestarts"] != "0" {
		t.Errorf("systemd restarted the unit: before %v, after %v", st, after)
	}
	if !healthOK(health) {
		t.Errorf("%s is not ok after the restart", health)
	}
	j = u.journal(t)
	for _, want := range []string{
		"fault switch: simulated device hang",                                                   // the server
		`status="exit 75"`, "hang marker written", `msg="state resetting"`, "test-reset chips=", // the supervisor and its reset command
		`msg="state ready" from=starting detail="server ready (start 2)"`,
	} {
		if !strings.Contains(j, want) {
			t.Errorf("the journal lacks %q", want)
		}
	}
	if r, _ := h.Run(context.Background(), "test", "-e", marker); r.Code == 0 {
		t.Errorf("the hang marker %s is still there after a good reset", marker)
	}

	u.systemctl(t, 0, "stop", u.name)
	if st := u.show(t, "ActiveState", "Result"); st["ActiveState"] != "inactive" || st["Result"] != "success" {
		t.Errorf("after systemctl stop: %v\n%s", st, u.journal(t))
	}
	j = u.journal(t)
	for _, want := range []string{`msg="state stopping"`, "received SIGTERM", `msg=stopped`, "Deactivated successfully"} {
		if !strings.Contains(j, want) {
			t.Errorf("the journal lacks %q after the stop", want)
		}
	}
	if s := u.ttModel(t, 0, "service", "status", "--manifest", liveRFDETR); !strings.Contains(s, "inactive (dead)") {
		t.Errorf("service status after the stop: %q", s)
	}
	u.ttModel(t, 0, "service", "uninstall", "--manifest", liveRFDETR)
	if r, _ := h.Run(context.Background(), "test", "-e", "/etc/systemd/system/tt-model-rf-detr.service"); r.Code == 0 {
		t.Error("uninstall left the unit file")
	}
	if r, _ := h.Run(context.Background(), "test", "-e", prefix); r.Code == 0 {
		t.Errorf("uninstall left %s", prefix)
	}
	if s := u.ttModel(t, 3, "service", "status", "--manifest", liveRFDETR); !strings.Contains(s, "not installed") {
		t.Errorf("service status after uninstall: %q", s)
	}
}

// liveUnit is one unit in the test host, a system unit or TestUser's.
type liveUnit struct {
	h    *systemdtest.Host
	name string
	user bool
}

func (u liveUnit) run(t *testing.T, argv ...string) systemdtest.Result {
	t.Helper()
	var r systemdtest.Result
	var err error
	if u.user {
		r, err = u.h.RunUser(context.Background(), argv...)
	} else {
		r, err = u.h.Run(context.Background(), argv...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ttModel runs tt-model as the unit's owner, with the binaries on PATH as
// in the installing user's shell, and checks its exit code; it returns the
// output.
func (u liveUnit) ttModel(t *testing.T, wantCode int, args ...string) string {
	t.Helper()
	r := u.run(t, append([]string{"env", "PATH=" + liveUserPath, "tt-model"}, args...)...)
	if r.Code != wantCode {
		t.Fatalf("tt-model %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, wantCode, r.Stdout, r.Stderr)
	}
	return r.Stdout + r.Stderr
}

// systemctl runs systemctl [--user] args and checks its exit code.
func (u liveUnit) systemctl(t *testing.T, wantCode int, args ...string) string {
	t.Helper()
	argv := []string{"systemctl"}
	if u.user {
		argv = append(argv, "--user")
	}
	r := u.run(t, append(argv, args...)...)
	if r.Code != wantCode {
		t.Fatalf("systemctl %s: exit %d, want %d\n%s%s\n%s", strings.Join(args, " "), r.Code, wantCode, r.Stdout, r.Stderr, u.journal(t))
	}
	return r.Stdout
}

// show reads unit properties with `systemctl show`.
func (u liveUnit) show(t *testing.T, props ...string) map[string]string {
	t.Helper()
	args := []string{"show", u.name + ".service"}
	for _, p := range props {
		args = append(args, "-p", p)
	}
	out := u.systemctl(t, 0, args...)
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// waitShow polls props until cond holds or timeout passes (then fails).
func (u liveUnit) waitShow(t *testing.T, what string, timeout time.Duration, cond func(map[string]string) bool, props ...string) map[string]string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := u.show(t, props...)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last %v\n%s", what, timeout, st, u.journal(t))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// journal is the unit's journal, read by its owner: `journalctl -u NAME`,
// or `journalctl --user -u NAME` for a user unit.
func (u liveUnit) journal(t *testing.T) string {
	t.Helper()
	argv := []string{"journalctl", "--no-pager", "-o", "short-precise", "-u", u.name}
	if u.user {
		argv = append(argv, "--user")
	}
	return u.run(t, argv...).Stdout
}

// waitJournal polls the journal until it holds want n times.
func (u liveUnit) waitJournal(t *testing.T, want string, n int, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j := u.journal(t)
		if strings.Count(j, want) >= n {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("the journal does not hold %q %d times within %s:\n%s", want, n, timeout, j)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// healthOK is the one readiness rule (readiness.Probe) on url.
func healthOK(url string) bool {
	return readiness.Probe(context.Background(), &http.Client{Timeout: 2 * time.Second}, url) == nil
}
