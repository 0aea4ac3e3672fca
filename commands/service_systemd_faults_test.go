package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/systemdtest"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/supervisor"
)

// installTestServer installs unit name for the supervisor's test server on
// port: extra supervise/service flags, then the server's own flags. Each
// unit has its own hang marker. The unit is uninstalled when t ends.
func installTestServer(t *testing.T, u liveUnit, port int, flags []string, serverFlags ...string) {
	t.Helper()
	home := "/var/lib/tt-model-test"
	if u.user {
		home = "/home/" + systemdtest.TestUser
	}
	args := []string{"service", "install", "--name", u.name, "--hang-marker", home + "/" + u.name + "/hang_marker",
		"--ready-url", fmt.Sprintf("http://127.0.0.1:%d/health", port)}
	if u.user {
		args = append(args, "--user")
	}
	args = append(append(args, flags...), "--", liveTestSrv, "--port", fmt.Sprint(port))
	u.ttModel(t, 0, append(args, serverFlags...)...)
	t.Cleanup(func() {
		uninstall := []string{"service", "uninstall", "--name", u.name}
		if u.user {
			uninstall = append(uninstall, "--user")
		}
		u.run(t, append([]string{"env", "PATH=" + liveUserPath, "tt-model"}, uninstall...)...)
	})
}

// WatchdogSec fires when the server stops answering its readiness probe
// (the supervisor withholds its pings) and when the supervisor itself is
// frozen; both times systemd stops the unit with WatchdogSignal=SIGTERM and
// Restart=on-failure starts it again.
func testLiveWatchdog(t *testing.T, h *systemdtest.Host) {
	u := liveUnit{h: h, name: "tt-model-watchdog"}
	unhealthy := "/run/tt-model-watchdog-unhealthy"
	installTestServer(t, u, 8103, []string{"--watchdog", "4s"}, "--unhealthy-if", unhealthy)
	u.systemctl(t, 0, "start", u.name)
	if st := u.show(t, "WatchdogUSec"); st["WatchdogUSec"] != "4s" {
		t.Fatalf("WatchdogUSec: %v", st)
	}

	h.Must(t, "touch", unhealthy)
	j := u.waitJournal(t, "Watchdog timeout (limit 4s)!", 1, time.Minute)
	if !strings.Contains(j, "withholding the watchdog ping") {
		t.Errorf("the supervisor did not say why it stopped pinging:\n%s", j)
	}
	h.Must(t, "rm", unhealthy)
	first := u.waitShow(t, "the restart after the first watchdog timeout", time.Minute, func(m map[string]string) bool {
		return m["ActiveState"] == "active" && m["NRestarts"] == "1"
	}, "ActiveState", "NRestarts", "MainPID")

	freeze(t, h, first["MainPID"])
	u.waitJournal(t, "Watchdog timeout (limit 4s)!", 2, time.Minute)
	second := u.waitShow(t, "the restart after the second watchdog timeout", time.Minute, func(m map[string]string) bool {
		return m["ActiveState"] == "active" && m["NRestarts"] == "2"
	}, "ActiveState", "NRestarts", "MainPID")
	if second["MainPID"] == first["MainPID"] {
		t.Errorf("the frozen supervisor %s is still the main process", first["MainPID"])
	}
	// systemd sends SIGCONT after WatchdogSignal, so the frozen supervisor
	// wakes to the SIGTERM and stops its server itself.
	if j := u.journal(t); strings.Count(j, "received SIGTERM") < 2 {
		t.Errorf("the supervisor did not handle both watchdog SIGTERMs:\n%s", j)
	}
	u.systemctl(t, 0, "stop", u.name)
}

// An exit 75 whose restart takes longer than WatchdogSec stays inside the
// unit: the supervisor keeps pinging while it resets and starts the server
// again, so systemd sees neither a watchdog timeout nor a restart.
func testLiveRestartOutlastsWatchdog(t *testing.T, h *systemdtest.Host) {
	u := liveUnit{h: h, name: "tt-model-slow-restart"}
	record := "/run/" + u.name + ".record"
	installTestServer(t, u, 8108, []string{"--watchdog", "4s"},
		"--record", record, "--plan", "exit:75,ready", "--exit-after", "1s", "--ready-after", "10s")
	u.systemctl(t, 0, "start", u.name)
	first := u.show(t, "MainPID")
	st := u.waitShow(t, "the second server", 2*time.Minute, func(m map[string]string) bool {
		return m["StatusText"] == "ready: server ready (start 2)" || m["ActiveState"] != "active"
	}, "ActiveState", "StatusText", "MainPID", "NRestarts")
	if st["ActiveState"] != "active" || st["MainPID"] != first["MainPID"] || st["NRestarts"] != "0" {
		t.Errorf("systemd saw the in-unit restart: %v (main PID was %s)", st, first["MainPID"])
	}
	if j := u.journal(t); strings.Contains(j, "Watchdog timeout") || !strings.Contains(j, `status="exit 75"`) {
		t.Errorf("want an exit 75 and no watchdog timeout:\n%s", j)
	}
	u.systemctl(t, 0, "stop", u.name)
}

// A server that never gets ready makes the supervisor give up after
// --max-restarts restarts and exit with the server's code; systemd then
// restarts the supervisor (Restart=on-failure, after RestartSec) until the
// unit has started StartLimitBurst (= --max-restarts) times within
// StartLimitIntervalSec (= --restart-window), and leaves it failed. The
// result stays the first failure's (systemd keeps a result that is not
// "success" over start-limit-hit), and the refused restart still counts in
// NRestarts. Run alone: systemd before 255 forgets the start count on
// `systemctl daemon-reload` (a parallel install made it start a third time).
func testLiveGivesUp(t *testing.T, h *systemdtest.Host) {
	u := liveUnit{h: h, name: "tt-model-gives-up"}
	installTestServer(t, u, 8104, []string{"--max-restarts", "2", "--restart-window", "2m"}, "--plan", "early:3")
	u.systemctl(t, 0, "start", "--no-block", u.name)
	st := u.waitShow(t, "the start limit", 2*time.Minute, func(m map[string]string) bool {
		return m["ActiveState"] == "failed"
	}, "ActiveState", "Result", "NRestarts", "StatusText")
	if st["Result"] != "exit-code" || st["NRestarts"] != "2" || st["StatusText"] != "failed: giving up after 2 restarts in 2m0s; last: server exit 3" {
		t.Errorf("after the supervisor gave up twice: %v", st)
	}
	j := u.journal(t)
	for want, n := range map[string]int{
		"giving up after 2 restarts in 2m0s":          2,
		`msg="server spawned"`:                        6, // 1 + 2 restarts, per supervisor run
		"Main process exited, code=exited, status=3/": 2,
		"Scheduled restart job":                       2, // the second one is refused:
		"Start request repeated too quickly.":         1,
	} {
		if got := strings.Count(j, want); got != n {
			t.Errorf("the journal holds %q %d times, want %d", want, got, n)
		}
	}
	if t.Failed() {
		t.Log(j)
	}
}

// A server that exits 2 (a bad flag or setting) ends the supervisor with 2
// once its restarts are spent (none here); RestartPreventExitStatus keeps
// systemd from starting it again.
func testLiveBadSettings(t *testing.T, h *systemdtest.Host) {
	u := liveUnit{h: h, name: "tt-model-bad-settings"}
	installTestServer(t, u, 8107, []string{"--max-restarts", "0"}, "--plan", "early:2")
	u.systemctl(t, 0, "start", "--no-block", u.name)
	u.waitShow(t, "the failure", time.Minute, func(m map[string]string) bool {
		return m["ActiveState"] == "failed"
	}, "ActiveState")
	// RestartSec is 5 s: a restart would have been scheduled by now.
	time.Sleep(6 * time.Second)
	st := u.show(t, "ActiveState", "Result", "NRestarts", "ExecMainStatus")
	if st["ActiveState"] != "failed" || st["NRestarts"] != "0" || st["ExecMainStatus"] != "2" {
		t.Errorf("after exit 2: %v", st)
	}
	if j := u.journal(t); strings.Contains(j, "Scheduled restart job") {
		t.Errorf("systemd restarted a unit that exited 2:\n%s", j)
	}
}

// `systemctl stop` on a server that ignores SIGTERM: the supervisor
// SIGKILLs it after --stop-grace, well inside TimeoutStopSec (which the
// unit derives from the same settings), writes the hang marker and exits
// 137, which leaves the unit failed; `service status` says deactivating
// meanwhile (kardianos' status called that "not installed"). The journal
// stores the supervisor's lines at their own priority: its warning is
// found by `journalctl -p warning`, its info lines are not.
func testLiveStopGrace(t *testing.T, h *systemdtest.Host) {
	u := liveUnit{h: h, name: "tt-model-stop-grace"}
	installTestServer(t, u, 8105, []string{"--stop-grace", "4s"}, "--ignore-term")
	u.systemctl(t, 0, "start", u.name)
	timeoutStop := u.stopTimeout(t, 4*time.Second)
	began := time.Now()
	u.systemctl(t, 0, "stop", "--no-block", u.name)
	// The grace gives `service status` 4 s to see the stop in progress.
	u.waitShow(t, "the stop to begin", 10*time.Second, func(m map[string]string) bool {
		return m["ActiveState"] == "deactivating"
	}, "ActiveState")
	if s := u.ttModel(t, 0, "service", "status", "--name", u.name); !strings.Contains(s, "deactivating (stop-sigterm); stopping: stopping the server: received SIGTERM") {
		t.Errorf("service status during the stop: %q", s)
	}
	st := u.waitShow(t, "the stop", time.Minute, func(m map[string]string) bool {
		return m["ActiveState"] != "deactivating" && m["ActiveState"] != "active"
	}, "ActiveState", "Result", "ExecMainStatus")
	if took := time.Since(began); took >= timeoutStop {
		t.Errorf("the stop took %s, not inside TimeoutStopSec=%s", took, timeoutStop)
	}
	j := u.journal(t)
	for _, want := range []string{"server ignored SIGTERM for the stop grace: SIGKILL", "hang marker written"} {
		if !strings.Contains(j, want) {
			t.Errorf("the journal lacks %q", want)
		}
	}
	if strings.Contains(j, "timed out") {
		t.Errorf("systemd's stop timeout fired: the supervisor should have finished first:\n%s", j)
	}
	// The supervisor exits 128+SIGKILL: the unit is failed, on purpose (the
	// chips may be hung; `systemctl start` resets first, the marker says so).
	if st["ActiveState"] != "failed" || st["Result"] != "exit-code" || st["ExecMainStatus"] != "137" {
		t.Errorf("after a stop that needed SIGKILL: %v", st)
	}
	marker := "/var/lib/tt-model-test/" + u.name + "/hang_marker"
	if r, _ := h.Run(context.Background(), "test", "-s", marker); r.Code != 0 {
		t.Errorf("no hang marker at %s after the SIGKILL", marker)
	}

	u.wantPriority(t, `msg="server ignored SIGTERM for the stop grace: SIGKILL"`, "4")
	u.wantPriority(t, `msg="state ready"`, "6")
	warnings := u.run(t, "journalctl", "--no-pager", "-o", "cat", "-u", u.name, "-p", "warning").Stdout
	if !strings.Contains(warnings, `msg="server ignored SIGTERM for the stop grace: SIGKILL"`) || strings.Contains(warnings, `msg="state ready"`) {
		t.Errorf("journalctl -p warning: want the supervisor's warning and none of its info lines:\n%s", warnings)
	}
}

// A server stuck in the driver (frozen: it stays in the kernel after
// SIGKILL) makes `systemctl stop` take the supervisor's longest stop: the
// grace, the marker and SIGKILL, then the kill timeout, after which it exits
// 75. That is still inside TimeoutStopSec: systemd never has to kill the
// supervisor, and the journal's error line says why it gave up. (systemd
// then waits, as it must, for the unkillable server to leave the cgroup:
// the test thaws it.)
func testLiveStopStuck(t *testing.T, h *systemdtest.Host) {
	testenv.Require(t, "freezer")
	u := liveUnit{h: h, name: "tt-model-stop-stuck"}
	record := "/run/" + u.name + ".record"
	installTestServer(t, u, 8109, []string{"--stop-grace", "4s"}, "--ignore-term", "--record", record)
	u.systemctl(t, 0, "start", u.name)
	timeoutStop := u.stopTimeout(t, 4*time.Second)
	start := strings.Fields(h.Must(t, "head", "-n1", record))
	if len(start) < 2 || start[0] != "start" {
		t.Fatalf("record %s: %q", record, start)
	}
	// From inside the container: the pid is the container's, and the
	// freezer hierarchy is bound in read-write.
	group := testenv.FreezerDir + "/" + u.name
	thaw := func() {
		h.Run(context.Background(), "sh", "-c", `echo THAWED > "$1/freezer.state"; while [ -s "$1/cgroup.procs" ]; do sleep 0.1; done; rmdir "$1"`, "sh", group)
	}
	h.Must(t, "sh", "-c", `mkdir "$1" && echo "$2" > "$1/cgroup.procs" && echo FROZEN > "$1/freezer.state"`, "sh", group, start[1])
	t.Cleanup(thaw)

	began := time.Now()
	u.systemctl(t, 0, "stop", "--no-block", u.name)
	st := u.waitShow(t, "the supervisor's exit", 2*time.Minute, func(m map[string]string) bool {
		return m["ExecMainExitTimestampMonotonic"] != "0"
	}, "ExecMainExitTimestampMonotonic", "ExecMainStatus", "SubState")
	took := time.Since(began)
	budget := 4*time.Second + supervisor.Defaults(0).KillTimeout
	if took < budget || took >= timeoutStop {
		t.Errorf("the supervisor exited %s after the stop began: want the grace and the kill timeout (%s), inside TimeoutStopSec=%s", took, budget, timeoutStop)
	}
	if st["ExecMainStatus"] != "75" {
		t.Errorf("the supervisor exited %s, want 75: %v", st["ExecMainStatus"], st)
	}
	if j := u.journal(t); strings.Contains(j, "State 'stop-sigterm' timed out") {
		t.Errorf("systemd killed the supervisor at TimeoutStopSec:\n%s", j)
	}
	marker := "/var/lib/tt-model-test/" + u.name + "/hang_marker"
	if r, _ := h.Run(context.Background(), "test", "-s", marker); r.Code != 0 {
		t.Errorf("no hang marker at %s for a server stuck after SIGKILL", marker)
	}
	failed := `msg="state failed" from=stopping detail="server pid ` + start[1] + ` survived SIGKILL for ` +
		supervisor.Defaults(0).KillTimeout.String() + ` (stuck in the driver?)"`
	u.wantPriority(t, failed, "3")
	if errs := u.run(t, "journalctl", "--no-pager", "-o", "cat", "-u", u.name, "-p", "err").Stdout; !strings.Contains(errs, failed) {
		t.Errorf("journalctl -p err lacks %s:\n%s", failed, errs)
	}

	thaw() // the server takes its SIGKILL; systemd's stop completes
	end := u.waitShow(t, "the stop", time.Minute, func(m map[string]string) bool {
		return m["ActiveState"] != "deactivating" && m["ActiveState"] != "active"
	}, "ActiveState", "Result")
	if end["ActiveState"] != "failed" || end["Result"] != "exit-code" {
		t.Errorf("after the stop: %v", end)
	}
}

// stopTimeout checks that the unit's TimeoutStopSec is the one derived
// from --stop-grace and the supervisor's kill timeout, and returns it.
func (u liveUnit) stopTimeout(t *testing.T, stopGrace time.Duration) time.Duration {
	t.Helper()
	shown := u.show(t, "TimeoutStopUSec")["TimeoutStopUSec"]
	got, err := parseTimespan(shown)
	if err != nil {
		t.Fatalf("TimeoutStopUSec: %v", err)
	}
	if want := stopGrace + supervisor.Defaults(0).KillTimeout + supervisor.StopMargin; got != want {
		t.Errorf("TimeoutStopUSec=%s (%s), want %s: the stop grace, the kill timeout and the margin", shown, got, want)
	}
	return got
}

// wantPriority checks that the unit's journal entries whose MESSAGE holds
// text exist, carry PRIORITY prio and no "<N>" prefix (journald took it).
func (u liveUnit) wantPriority(t *testing.T, text, prio string) {
	t.Helper()
	found := 0
	for _, line := range strings.Split(u.run(t, "journalctl", "--no-pager", "-o", "json", "-u", u.name).Stdout, "\n") {
		var e struct{ MESSAGE, PRIORITY any }
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		msg, _ := e.MESSAGE.(string)
		if !strings.Contains(msg, text) {
			continue
		}
		found++
		if e.PRIORITY != prio || !strings.HasPrefix(msg, "time=") {
			t.Errorf("journal entry %q: PRIORITY=%v, want %s and the line without its prefix", msg, e.PRIORITY, prio)
		}
	}
	if found == 0 {
		t.Errorf("no journal entry holds %s", text)
	}
}

// parseTimespan reads a duration as systemctl show prints one ("1min 4s").
func parseTimespan(s string) (time.Duration, error) {
	units := map[string]time.Duration{"h": time.Hour, "min": time.Minute, "s": time.Second, "ms": time.Millisecond, "us": time.Microsecond}
	var total time.Duration
	for _, part := range strings.Fields(s) {
		i := strings.IndexFunc(part, func(r rune) bool { return r < '0' || r > '9' })
		n, err := strconv.Atoi(part[:max(i, 0)])
		if i <= 0 || err != nil || units[part[i:]] == 0 {
			return 0, fmt.Errorf("timespan %q: cannot read %q", s, part)
		}
		total += time.Duration(n) * units[part[i:]]
	}
	if total == 0 {
		return 0, fmt.Errorf("timespan %q: empty", s)
	}
	return total, nil
}

// A `--user` unit in TestUser's manager: install, start, status, journal,
// uninstall, all as that user.
func testLiveUserUnit(t *testing.T, h *systemdtest.Host) {
	u := liveUnit{h: h, name: "tt-model-user-unit", user: true}
	installTestServer(t, u, 8106, nil)
	unitFile := "/home/" + systemdtest.TestUser + "/.config/systemd/user/" + u.name + ".service"
	if r := u.run(t, "test", "-f", unitFile); r.Code != 0 {
		t.Fatalf("no user unit at %s", unitFile)
	}
	u.systemctl(t, 0, "enable", "--now", u.name)
	st := u.show(t, "ActiveState", "StatusText")
	if st["ActiveState"] != "active" || st["StatusText"] != "ready: server ready (start 1)" {
		t.Errorf("user unit: %v\n%s", st, u.journal(t))
	}
	if s := u.ttModel(t, 0, "service", "status", "--user", "--name", u.name); !strings.Contains(s, "active (running)") {
		t.Errorf("service status --user: %q", s)
	}
	if j := u.journal(t); !strings.Contains(j, `msg="state ready"`) {
		t.Errorf("the user unit's journal lacks the ready state:\n%s", j)
	}
	u.ttModel(t, 0, "service", "uninstall", "--user", "--name", u.name)
	if r := u.run(t, "test", "-e", unitFile); r.Code == 0 {
		t.Error("uninstall --user left the unit file")
	}
	if st := u.show(t, "LoadState", "ActiveState"); st["ActiveState"] != "inactive" {
		t.Errorf("after uninstall --user: %v", st)
	}
}

// freeze stops process pid with SIGSTOP (the image has no kill program:
// the shell's builtin sends it).
func freeze(t *testing.T, h *systemdtest.Host, pid string) {
	t.Helper()
	h.Must(t, "sh", "-c", `kill -STOP "$1"`, "sh", pid)
}
