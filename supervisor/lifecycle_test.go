package supervisor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
)

// Exit 75: one reset with the chips, the marker gone, the server ready
// again, and READY=1 only ever sent after the server said it was ready.
func TestHangExitResetsAndStartsAgain(t *testing.T) {
	h := newHarness(t)
	h.tickHeartbeats()
	envDump := filepath.Join(h.dir, "env")
	h.server("-plan", "exit:75,ready", "-exit-after", "300ms", "-env-dump", envDump)
	h.cfg.Env = map[string]string{"HF_MODEL": "lerobot/pi05_base"}
	h.cfg.StatusAddr = "127.0.0.1:" + strconv.Itoa(servertest.FreePort(t))
	n := h.listenNotify(false)
	var readyOrder []int // server "ready" events seen when each READY=1 arrived
	n.onReady = func() { readyOrder = append(readyOrder, h.count("ready")) }

	s := h.start("WATCHDOG_USEC=", "LISTEN_FDS=3", "LISTEN_PID=1")
	eventually(t, s, "the second start to be ready", func() bool { return n.has("READY=1\nSTATUS=ready: server ready (start 2)") })
	st, err := status(t, h.cfg.StatusAddr)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateReady || st.Restarts != 1 || st.Starts != 2 || st.LastExit == nil || st.LastExit.Code != 75 ||
		st.LastReset == nil || !st.LastReset.OK || st.LastReset.Attempts != 1 {
		t.Errorf("status = %+v (last exit %+v, last reset %+v)", st, st.LastExit, st.LastReset)
	}
	s.signal(t, syscall.SIGTERM)
	if code := s.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0 (the server's on SIGTERM)", code)
	}

	h.wantEvents(t, "start", "ready", "exit 75", "reset 0,1", "start", "ready", "signal SIGTERM", "exit 0")
	if fileExists(h.cfg.HangMarker) {
		t.Error("hang marker still exists after a good reset")
	}
	n.wantMessages(t,
		"STATUS=starting: server started (start 1)\nEXTEND_TIMEOUT_USEC=N",
		"READY=1\nSTATUS=ready: server ready (start 1)",
		"STATUS=resetting: resetting chips 0,1: server exited 75 (hang)",
		"STATUS=starting: server started (start 2)",
		"READY=1\nSTATUS=ready: server ready (start 2)",
		"STOPPING=1\nSTATUS=stopping: stopping the server: received SIGTERM",
	)
	if !slices.Equal(readyOrder, []int{1, 2}) {
		t.Errorf("READY=1 arrived when the server had been ready %v times, want [1 2]", readyOrder)
	}
	env, _ := os.ReadFile(envDump)
	for _, bad := range []string{"NOTIFY_SOCKET=", "WATCHDOG_USEC=", "LISTEN_FDS=", "LISTEN_PID="} {
		if strings.Contains(string(env), bad) {
			t.Errorf("server environment has %s", bad)
		}
	}
	if !strings.Contains(string(env), "HF_MODEL=lerobot/pi05_base") {
		t.Error("server environment lacks the configured HF_MODEL")
	}
}

// A server that never gets ready is stopped at the start timeout and
// handled as a hang; readiness here is a log line, over an abstract socket.
func TestStartTimeoutIsAHang(t *testing.T) {
	h := newHarness(t)
	h.tickHeartbeats()
	h.server("-plan", "hang,ready", "-ready-line", "server listening")
	h.cfg.ReadyLine = "server listening"
	h.cfg.StartTimeout = 300 * time.Millisecond
	n := h.listenNotify(true)

	s := h.start()
	eventually(t, s, "the second start to be ready", func() bool { return n.has("READY=1") })
	s.signal(t, syscall.SIGTERM)
	if code := s.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	h.wantEvents(t, "start", "signal SIGTERM", "exit 0", "reset 0,1", "start", "ready", "signal SIGTERM", "exit 0")
	n.wantMessages(t,
		"STATUS=starting: server started (start 1)\nEXTEND_TIMEOUT_USEC=N",
		"STATUS=stopping: stopping the server: not ready within the start timeout 300ms",
		"STATUS=resetting: resetting chips 0,1: not ready within the start timeout 300ms\nEXTEND_TIMEOUT_USEC=N",
		"STATUS=starting: server started (start 2)\nEXTEND_TIMEOUT_USEC=N",
		"READY=1\nSTATUS=ready: server ready (start 2)",
		"STOPPING=1\nSTATUS=stopping: stopping the server: received SIGTERM",
	)
	if fileExists(h.cfg.HangMarker) {
		t.Error("hang marker still exists after a good reset")
	}
}

// A crash loop backs off and gives up after --max-restarts with the
// server's code, without resetting anything.
func TestCrashLoopGivesUpWithServerCode(t *testing.T) {
	h := newHarness(t)
	h.server("-plan", "early:3")
	h.cfg.MaxRestarts = 2
	n := h.listenNotify(false)

	if code := h.start().wait(t); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	h.wantEvents(t, "start", "exit 3", "start", "exit 3", "start", "exit 3")
	n.wantMessages(t,
		"STATUS=starting: server started (start 1)\nEXTEND_TIMEOUT_USEC=N",
		"STATUS=backoff: restarting in 10ms after server exit 3",
		"STATUS=starting: server started (start 2)\nEXTEND_TIMEOUT_USEC=N",
		"STATUS=backoff: restarting in 20ms after server exit 3",
		"STATUS=starting: server started (start 3)\nEXTEND_TIMEOUT_USEC=N",
		"STATUS=failed: giving up after 2 restarts in 30m0s; last: server exit 3",
	)
}

// Server exit 0 ends the supervisor with 0 and no restart.
func TestCleanExitEndsSupervisor(t *testing.T) {
	h := newHarness(t)
	h.server("-plan", "exit:0")
	if code := h.start().wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	h.wantEvents(t, "start", "ready", "exit 0")
}

// SIGTERM reaches the server and the supervisor exits with its code.
func TestSIGTERMReachesServer(t *testing.T) {
	h := newHarness(t)
	h.server("-term-exit", "7")
	h.cfg.StatusAddr = "127.0.0.1:" + strconv.Itoa(servertest.FreePort(t))
	s := h.start()
	eventually(t, s, "ready", func() bool { st, err := status(t, h.cfg.StatusAddr); return err == nil && st.State == StateReady })
	s.signal(t, syscall.SIGUSR1)
	eventually(t, s, "SIGUSR1 to be forwarded", func() bool { return h.count("signal SIGUSR1") == 1 })
	s.signal(t, syscall.SIGTERM)
	if code := s.wait(t); code != 7 {
		t.Errorf("exit code %d, want the server's 7", code)
	}
	h.wantEvents(t, "start", "ready", "signal SIGUSR1", "signal SIGTERM", "exit 7")
	if fileExists(h.cfg.HangMarker) {
		t.Error("a server that stopped on SIGTERM left a hang marker")
	}
}

// A server that ignores SIGTERM is killed after the grace, the supervisor
// reports SIGKILL (137) and leaves the hang marker for the next start; the
// marker is written before the SIGKILL goes out.
//
// What the server's process group received is told by two witnesses (see
// groupWitness), not by the server's own record: the server writes "signal
// SIGTERM" only once its signal goroutine runs, which on a loaded machine
// can come after the 200 ms grace, and a SIGKILLed supervisor that took the
// grace for the reap's bound called a slow reap "stuck in the driver".
func TestIgnoredSIGTERMIsKilledAndMarked(t *testing.T) {
	h := newHarness(t)
	h.server("-ignore-term")
	h.cfg.StopGrace = 200 * time.Millisecond
	h.cfg.StateFile = filepath.Join(h.dir, "state.json")
	n := h.listenNotify(false)
	s := h.start()
	eventually(t, s, "ready", func() bool { return n.has("READY=1") })
	pgid := h.serverPID(t, 1)
	termWitness := groupWitness(t, pgid, false)
	killWitness := groupWitness(t, pgid, true)

	stopAt := time.Now()
	s.signal(t, syscall.SIGINT)
	if sig := killWitness.killedBy(t); sig != syscall.SIGKILL {
		t.Errorf("the SIGTERM-ignoring witness died of %s, want SIGKILL", signalName(sig))
	}
	if !fileExists(h.cfg.HangMarker) {
		t.Error("the SIGKILL went out before the hang marker was written")
	}
	if sig := termWitness.killedBy(t); sig != syscall.SIGTERM {
		t.Errorf("the group's first signal was %s, want SIGTERM", signalName(sig))
	}
	if code := s.wait(t); code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit code %d, want 137", code)
	}
	// The server never exited by itself; its record of the SIGTERM may be
	// missing (see above).
	if got := h.kinds(); !slices.Equal(got, []string{"start", "ready", "signal SIGTERM"}) && !slices.Equal(got, []string{"start", "ready"}) {
		t.Errorf("events %q, want start, ready and perhaps signal SIGTERM", got)
	}
	st := readStateFile(t, h.cfg.StateFile)
	if st.LastExit == nil || st.LastExit.Signal != "SIGKILL" {
		t.Fatalf("last exit %+v, want SIGKILL", st.LastExit)
	}
	// A lower bound only: load can only make the kill later.
	if d := st.LastExit.At.Sub(stopAt); d < h.cfg.StopGrace {
		t.Errorf("the server was killed %s after the stop began, within the stop grace %s", d, h.cfg.StopGrace)
	}
	if b, _ := os.ReadFile(h.cfg.HangMarker); !strings.Contains(string(b), "server ignored SIGTERM for the stop grace 200ms (received SIGINT): killed") {
		t.Errorf("hang marker %q", b)
	}
	// Datagrams arrive on the test's socket in order, but are read by its
	// goroutine whenever that runs.
	stopping := "STOPPING=1\nSTATUS=stopping: stopping the server: received SIGINT"
	eventually(t, nil, "the STOPPING=1 datagram", func() bool { return n.has(stopping) })
	if msgs := n.messages(); msgs[len(msgs)-1] != stopping {
		t.Errorf("last datagram %q, want %q", msgs[len(msgs)-1], stopping)
	}
}

// A stop signal that arrives while the supervisor stops a server for a
// restart (here: SIGHUP; a start timeout takes the same path) is kept: it
// tells systemd STOPPING=1 at once and, once the server is gone, exits with
// its code, starting no other. The server ignores SIGTERM (it is ready, so
// its handler is in place) and the grace is long, so the stop is still
// under way when the SIGTERM comes; the test ends it by killing the server
// itself, as the OOM killer could.
func TestStopSignalDuringRestartStopIsKept(t *testing.T) {
	h := newHarness(t)
	h.server("-ignore-term")
	h.cfg.StopGrace = time.Minute
	h.cfg.StateFile = filepath.Join(h.dir, "state.json")
	n := h.listenNotify(false)
	s := h.start()
	eventually(t, s, "ready", func() bool { return n.has("READY=1") })
	s.signal(t, syscall.SIGHUP)
	reloading := "RELOADING=1\nSTATUS=stopping: stopping the server: SIGHUP"
	eventually(t, s, "the stop for the restart", func() bool { return n.has(reloading) })
	s.signal(t, syscall.SIGTERM)
	kept := "STOPPING=1\nSTATUS=stopping: received SIGTERM while stopping the server (SIGHUP): exiting once it is gone"
	eventually(t, s, "the supervisor to take the SIGTERM", func() bool { return n.has(kept) })
	if err := syscall.Kill(h.serverPID(t, 1), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := s.wait(t); code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit code %d, want the server's 137", code)
	}
	if st := readStateFile(t, h.cfg.StateFile); st.Starts != 1 || st.LastReset != nil {
		t.Errorf("starts %d, last reset %+v: want one start and no reset", st.Starts, st.LastReset)
	}
	want := []string{
		"STATUS=starting: server started (start 1)\nEXTEND_TIMEOUT_USEC=N",
		"READY=1\nSTATUS=ready: server ready (start 1)",
		reloading, kept,
	}
	if got := n.messages(); !slices.Equal(got, want) {
		t.Errorf("datagrams:\n got %q\nwant %q", got, want)
	}
}

// A server that survives SIGKILL (frozen here, as one stuck in the driver)
// ends the stop after the stop grace and the kill timeout, not later: the
// supervisor exits 75 with the hang marker written before the SIGKILL.
// Config.StopBudget, which TimeoutStopSec outlasts, is this stop.
func TestServerStuckAfterSIGKILLEndsTheStop(t *testing.T) {
	h := newHarness(t)
	h.server("-ignore-term")
	h.cfg.StopGrace = 200 * time.Millisecond
	h.cfg.KillTimeout = time.Second
	n := h.listenNotify(false)
	s := h.start()
	eventually(t, s, "ready", func() bool { return n.has("READY=1") })
	pid := h.serverPID(t, 1)
	freeze(t, pid)

	stopAt := time.Now()
	s.signal(t, syscall.SIGTERM)
	if code := s.wait(t); code != HangExitCode {
		t.Errorf("exit code %d, want 75", code)
	}
	if d := time.Since(stopAt); d < h.cfg.StopBudget() {
		t.Errorf("the supervisor gave up %s after the stop began, before the stop grace and the kill timeout (%s)", d, h.cfg.StopBudget())
	}
	if !fileExists(h.cfg.HangMarker) {
		t.Error("no hang marker for a server stuck after SIGKILL")
	}
	failed := fmt.Sprintf("STATUS=failed: server pid %d survived SIGKILL for 1s (stuck in the driver?)", pid)
	eventually(t, nil, "the failed datagram", func() bool { return n.has(failed) })
}

// SIGHUP restarts the server gracefully: RELOADING=1, then READY=1 when the
// new one is ready; no reset, no restart counted.
func TestSIGHUPRestartsServer(t *testing.T) {
	h := newHarness(t)
	h.server()
	n := h.listenNotify(false)
	s := h.start()
	eventually(t, s, "ready", func() bool { return n.has("READY=1") })
	s.signal(t, syscall.SIGHUP)
	eventually(t, s, "ready again", func() bool { return n.has("READY=1\nSTATUS=ready: server ready (start 2)") })
	s.signal(t, syscall.SIGTERM)
	s.wait(t)
	n.wantMessages(t,
		"STATUS=starting: server started (start 1)\nEXTEND_TIMEOUT_USEC=N",
		"READY=1\nSTATUS=ready: server ready (start 1)",
		"RELOADING=1\nSTATUS=stopping: stopping the server: SIGHUP",
		"STATUS=starting: server started (start 2)",
		"READY=1\nSTATUS=ready: server ready (start 2)",
		"STOPPING=1\nSTATUS=stopping: stopping the server: received SIGTERM",
	)
	if h.count("reset 0,1") != 0 {
		t.Error("a graceful restart reset the chips")
	}
}

// With the marker present (auto), the chips are reset before the first
// start; chips whose heartbeat never moves are unrecoverable: three
// attempts, exit 75, marker kept, server never started.
func TestUnrecoverableChipsExit75(t *testing.T) {
	h := newHarness(t) // heartbeats do not tick
	h.server()
	h.cfg.ChipCheckTimeout = 100 * time.Millisecond
	mustWrite(t, h.cfg.HangMarker, "hung\n")
	n := h.listenNotify(false)
	if code := h.start().wait(t); code != HangExitCode {
		t.Errorf("exit code %d, want 75", code)
	}
	h.wantEvents(t, "reset 0,1", "reset 0,1", "reset 0,1")
	if !fileExists(h.cfg.HangMarker) {
		t.Error("hang marker removed although the chips did not come back")
	}
	n.wantMessages(t,
		"STATUS=resetting: resetting chips 0,1: hang marker "+h.cfg.HangMarker+" exists\nEXTEND_TIMEOUT_USEC=N",
		"STATUS=failed: chips 0,1 cannot be recovered",
	)
}

// A reset command that hangs is killed (its whole group) at the reset
// timeout and counts as a failed attempt; a good second attempt recovers.
func TestResetTimeoutKillsGroupAndRetries(t *testing.T) {
	h := newHarness(t)
	h.tickHeartbeats()
	h.server("-plan", "exit:0")
	// The first attempt hangs, later ones succeed: the script's mode comes
	// from a file the test rewrites once the first attempt has started.
	mode := filepath.Join(h.dir, "mode")
	mustWrite(t, mode, "hang")
	script := filepath.Join(h.dir, "reset.sh")
	mustWrite(t, script, "#!/bin/sh\nexec "+fakeReset(t)+" "+h.record+" \"$(cat "+mode+")\" \"$@\"\n")
	os.Chmod(script, 0o755)
	h.cfg.ResetCmd = script + " {chips}"
	h.cfg.ResetTimeout = 300 * time.Millisecond
	h.cfg.ResetOnStart = ResetAlways
	s := h.start()
	eventually(t, s, "the first reset", func() bool { return h.count("reset 0,1") == 1 })
	mustWrite(t, mode, "ok")
	if code := s.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	h.wantEvents(t, "reset 0,1", "reset 0,1", "start", "ready", "exit 0")
	if !strings.Contains(s.stderr.String(), "did not finish within 300ms: killed") {
		t.Error("the log does not say the reset command was killed")
	}
}

// Without chips the chip check is always skipped with a log line; the
// default reset command (tt-smi) is skipped too, a site's own runs with an
// empty {chips}, and the marker goes only after a reset that succeeded.
func TestNoChipsReset(t *testing.T) {
	for _, tc := range []struct {
		name       string
		resetCmd   func(h *harness) string
		wantCode   int
		wantEvents []string
		wantLog    string
		wantMarker bool
	}{
		{
			name:       "default tt-smi is skipped",
			resetCmd:   func(*harness) string { return DefaultResetCmd },
			wantEvents: []string{"start", "ready", "exit 75", "start", "ready", "exit 0"},
			wantLog:    "no chips and the default reset command: skipping the reset and the chip check",
		},
		{
			name:       "a site's command runs, the check is skipped",
			resetCmd:   func(h *harness) string { return fakeReset(h.t) + " " + h.record + " ok {chips}" },
			wantEvents: []string{"start", "ready", "exit 75", "reset", "start", "ready", "exit 0"},
			wantLog:    "no chips on this host, so the chip check is skipped",
		},
		{
			name:       "a site's command that fails keeps the marker",
			resetCmd:   func(h *harness) string { return fakeReset(h.t) + " " + h.record + " fail {chips}" },
			wantCode:   HangExitCode,
			wantEvents: []string{"start", "ready", "exit 75", "reset", "reset", "reset"},
			wantLog:    `msg="chip reset failed" attempt=3 of=3`,
			wantMarker: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.server("-plan", "exit:75,exit:0", "-exit-after", "200ms")
			h.cfg.Chips = nil
			h.cfg.DevDir = filepath.Join(h.dir, "no-such-dev")
			h.cfg.ResetCmd = tc.resetCmd(h)
			s := h.start()
			if code := s.wait(t); code != tc.wantCode {
				t.Errorf("exit code %d, want %d", code, tc.wantCode)
			}
			h.wantEvents(t, tc.wantEvents...)
			for _, want := range []string{"no Tenstorrent chips on this host", tc.wantLog} {
				if !strings.Contains(s.stderr.String(), want) {
					t.Errorf("the log lacks %q", want)
				}
			}
			if fileExists(h.cfg.HangMarker) != tc.wantMarker {
				t.Errorf("hang marker exists: %v, want %v", fileExists(h.cfg.HangMarker), tc.wantMarker)
			}
		})
	}
}

// A second supervisor on the same chips refuses and names the holder.
func TestSecondSupervisorRefuses(t *testing.T) {
	h := newHarness(t)
	h.server()
	n := h.listenNotify(false)
	first := h.start()
	eventually(t, first, "the first supervisor to be ready", func() bool { return n.has("READY=1") })

	h.notify = nil
	second := h.start()
	if code := second.wait(t); code != 1 {
		t.Errorf("second supervisor exit code %d, want 1", code)
	}
	want := "chip 0 is in use by PID " + strconv.Itoa(first.cmd.Process.Pid)
	if !strings.Contains(second.stderr.String(), want) {
		t.Errorf("second supervisor said %q, want it to contain %q", second.stderr.String(), want)
	}
	if h.count("start") != 1 {
		t.Errorf("%d servers started, want 1", h.count("start"))
	}
	first.signal(t, syscall.SIGTERM)
	first.wait(t)
}

// Watchdog pings flow only after READY=1 and only while /health answers.
func TestWatchdogFollowsReadinessProbe(t *testing.T) {
	h := newHarness(t)
	unhealthy := filepath.Join(h.dir, "unhealthy")
	h.server("-unhealthy-if", unhealthy)
	n := h.listenNotify(false)
	var pingsBeforeReady int
	n.onReady = func() { pingsBeforeReady = countPings(n.msgs) }
	s := h.start("WATCHDOG_USEC=100000")
	eventually(t, s, "watchdog pings", func() bool { return n.pings() >= 3 })
	if pingsBeforeReady != 0 {
		t.Errorf("%d watchdog pings before READY=1", pingsBeforeReady)
	}
	mustWrite(t, unhealthy, "")
	// Once the server has answered 503 twice after this point, at most one
	// ping that was already in flight may follow.
	base := h.unhealthyAnswers()
	eventually(t, s, "a failing probe", func() bool { return h.unhealthyAnswers() >= base+1 })
	after := n.pings()
	eventually(t, s, "more failing probes", func() bool { return h.unhealthyAnswers() >= base+3 })
	if extra := n.pings() - after; extra > 1 {
		t.Errorf("%d watchdog pings while the server failed its probe", extra)
	}
	s.signal(t, syscall.SIGTERM)
	s.wait(t)
}

// An in-unit restart (exit 75, reset, a slow start) keeps the watchdog
// pings coming: it is the supervisor at work, not a hang, and systemd must
// not stop the unit when it outlasts WatchdogSec.
func TestWatchdogPingsThroughARestart(t *testing.T) {
	h := newHarness(t)
	h.tickHeartbeats()
	// The first life stays ready 300 ms: long enough for the supervisor to
	// call it ready (a probe, then the /proc scan for who owns the port)
	// on a loaded machine before it exits 75.
	h.server("-plan", "exit:75,ready", "-exit-after", "300ms", "-ready-after", "400ms")
	n := h.listenNotify(false)
	s := h.start("WATCHDOG_USEC=100000")
	eventually(t, s, "the second READY=1", func() bool {
		return len(slices.DeleteFunc(n.all(), func(m string) bool { return !strings.HasPrefix(m, "READY=1") })) == 2
	})
	s.signal(t, syscall.SIGTERM)
	s.wait(t)
	msgs := n.all()
	// Pings between leaving the first ready state and the second READY=1.
	left := slices.IndexFunc(msgs, func(m string) bool { return strings.Contains(m, "STATUS=resetting:") })
	again := slices.IndexFunc(msgs, func(m string) bool { return strings.HasPrefix(m, "READY=1\nSTATUS=ready: server ready (start 2)") })
	if left < 0 || again < left {
		t.Fatalf("no reset between the two READY=1: %q", msgs)
	}
	// The second start alone takes 400 ms: pings every 50 ms.
	if pings := countPings(msgs[left:again]); pings < 4 {
		t.Errorf("%d watchdog pings during a restart of more than 400 ms, want one every 50 ms: %q", pings, msgs[left:again])
	}
}

func countPings(msgs []string) int {
	n := 0
	for _, m := range msgs {
		if m == "WATCHDOG=1" {
			n++
		}
	}
	return n
}

// While the first start runs, EXTEND_TIMEOUT_USEC is repeated every
// extend interval (asking for twice that), and never after READY=1.
func TestExtendTimeoutRepeatsUntilReady(t *testing.T) {
	h := newHarness(t)
	h.server("-ready-after", "400ms")
	h.cfg.ExtendInterval = 50 * time.Millisecond
	n := h.listenNotify(false)
	s := h.start()
	eventually(t, s, "ready", func() bool { return n.has("READY=1") })
	s.signal(t, syscall.SIGTERM)
	s.wait(t)
	msgs := n.all()
	ready := slices.IndexFunc(msgs, func(m string) bool { return strings.HasPrefix(m, "READY=1") })
	extends := 0
	for i, m := range msgs {
		if strings.Contains(m, "EXTEND_TIMEOUT_USEC=") {
			if i > ready {
				t.Errorf("EXTEND_TIMEOUT_USEC after READY=1: %q", m)
			}
			if !strings.Contains(m, "EXTEND_TIMEOUT_USEC=100000") {
				t.Errorf("datagram %q: want EXTEND_TIMEOUT_USEC=100000", m)
			}
			extends++
		}
	}
	if extends < 2 {
		t.Errorf("%d EXTEND_TIMEOUT_USEC datagrams before READY=1 in a 400ms start, want the first and repeats: %q", extends, msgs)
	}
}

// readStateFile reads the status JSON the supervisor keeps in --state-file.
func readStateFile(t *testing.T, path string) Status {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return st
}
