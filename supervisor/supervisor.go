// Package supervisor keeps a model server alive on a Tenstorrent host: under
// systemd (Type=notify), as a container's PID 1, and across chip hangs. The
// server exits 75 on a hang; the supervisor then resets the chips (the reset
// command, then a sysfs check that never opens a device) and starts it again.
// It must not import server or model code: it knows a server only by its
// command line, its exit code and its readiness probe.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"github.com/ttmodel/tt-model/internal/chips"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ttmodel/tt-model/internal/hangmarker"
	"github.com/ttmodel/tt-model/internal/procfs"
	"github.com/ttmodel/tt-model/internal/readiness"
)

// Supervisor runs one server under the policy of its Config. Run owns every
// field below the config; only the status board is shared (with the status
// server).
type Supervisor struct {
	cfg    Config
	log    *slog.Logger
	stdout *os.File // where the server's output goes
	stderr *os.File
	notify notifier
	board  statusBoard
	client *http.Client

	host     chipHost
	chips    []int
	locks    *chipLocks // inherited by every server, so they outlive a killed supervisor as long as it does
	policy   *restartPolicy
	reaper   *reaper
	sigs     chan os.Signal
	pid1     bool
	watchdog time.Duration

	state     State
	everReady bool // READY=1 was sent once: systemd left the start timeout
	// firstReady is closed with the first READY=1, when systemd arms its
	// watchdog (pingWatchdog waits for it).
	firstReady chan struct{}
	lastCode   int // the code to give up with
	// shuttingDown and reloading add STOPPING=1 / RELOADING=1 to the next
	// "stopping" datagram.
	shuttingDown, reloading bool
	// stopSignal is a stop signal that arrived while a server was being
	// stopped for a restart: once it is gone the supervisor exits instead.
	stopSignal os.Signal
}

// New checks cfg and prepares a supervisor whose server writes to stdout
// and stderr.
func New(cfg Config, log *slog.Logger, stdout, stderr *os.File) (*Supervisor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Supervisor{
		cfg:        cfg,
		log:        log,
		stdout:     stdout,
		stderr:     stderr,
		notify:     notifier{log: log},
		client:     &http.Client{Timeout: cfg.ProbeTimeout},
		host:       chipHost{devDir: cfg.DevDir, sysfsDir: cfg.SysfsDir},
		policy:     newRestartPolicy(cfg),
		state:      -1,
		firstReady: make(chan struct{}),
	}, nil
}

// Run supervises until the server exits 0, the supervisor is stopped (a
// signal or ctx), or it gives up; it returns the exit code the supervisor
// should end with. Run must be the only code in the process that waits for
// child processes (see reaper).
func (s *Supervisor) Run(ctx context.Context) (code int, err error) {
	s.board.file, s.board.log = s.cfg.StateFile, s.log
	s.board.update(func(st *Status) { st.Supervisor = procfs.Self(os.Getpid()) })
	defer func() {
		final := code
		s.board.update(func(st *Status) { st.ExitCode = &final })
	}()
	ids, err := s.chipsToHold()
	if err != nil {
		return 1, err
	}
	s.chips = ids
	s.board.update(func(st *Status) { st.Chips = ids })
	if len(ids) > 0 {
		locks, err := lockChips(s.cfg.LockDir, ids)
		if err != nil {
			return 1, err
		}
		defer locks.release()
		s.locks = locks
	} else {
		s.log.Info("no Tenstorrent chips on this host: chip locks and checks are skipped, and the reset too unless --reset-cmd is a site's own", "dev", s.cfg.DevDir)
	}

	s.pid1 = os.Getpid() == 1
	s.sigs = make(chan os.Signal, 16)
	signal.Notify(s.sigs, append(forwardedSignals(s.pid1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)...)
	defer signal.Stop(s.sigs)
	s.reaper = newReaper(s.log)
	defer s.reaper.stop()

	if s.cfg.StatusAddr != "" {
		stop, err := s.serveStatus(s.cfg.StatusAddr)
		if err != nil {
			return 1, err
		}
		defer stop()
	}
	s.watchdog = watchdogInterval(s.log)
	if s.watchdog > 0 {
		wctx, stopWatchdog := context.WithCancel(ctx)
		defer stopWatchdog()
		go s.pingWatchdog(wctx)
	}

	return s.loop(ctx)
}

// chipsToHold is --chips, checked against the host's device nodes before
// anything is created for them, or every chip of the host.
func (s *Supervisor) chipsToHold() ([]int, error) {
	found, err := chips.Discover(s.cfg.DevDir)
	if err != nil {
		return nil, err
	}
	if s.cfg.Chips == nil {
		return found, nil
	}
	if missing := chips.Missing(s.cfg.Chips, found); len(found) > 0 && len(missing) > 0 {
		return nil, fmt.Errorf("--chips %s: chip %s is not on this host (%s has %s)",
			chips.Format(s.cfg.Chips), chips.Format(missing), s.cfg.DevDir, chips.Format(found))
	}
	return s.cfg.Chips, nil
}

// outcome is how one server's life ended, as far as the restart policy cares.
type outcome int

const (
	outDone    outcome = iota // exit 0: the supervisor exits 0
	outHang                   // exit 75, start timeout, SIGKILL: reset, then start again
	outCrash                  // other failure: backoff, then start again
	outStopped                // the supervisor was told to stop
	outRestart                // SIGHUP: start again now
	outStuck                  // the server survived SIGKILL: give up
)

// loop is the state machine: reset when needed, start, and decide what the
// server's end means.
func (s *Supervisor) loop(ctx context.Context) (int, error) {
	resetWhy := ""
	switch {
	case s.cfg.ResetOnStart == ResetAlways:
		resetWhy = "--reset-on-start always"
	case s.cfg.ResetOnStart == ResetAuto && hangmarker.Exists(s.cfg.HangMarker):
		resetWhy = "hang marker " + s.cfg.HangMarker + " exists"
	}
	for {
		if resetWhy != "" {
			ok, stopped := s.reset(ctx, resetWhy)
			if stopped {
				s.shuttingDown = true
				s.enter(StateStopping, "stop requested during the chip reset; the hang marker stays")
				return s.lastCode, nil
			}
			if !ok {
				s.enter(StateFailed, "%s cannot be recovered", s.chipsName())
				return HangExitCode, nil
			}
			resetWhy = ""
		}

		out, code, why, readyFor, err := s.serve(ctx)
		if err != nil {
			s.enter(StateFailed, "%v", err)
			return code, err
		}
		switch out {
		case outDone, outStopped:
			return code, nil
		case outStuck:
			s.enter(StateFailed, "%s", why)
			return HangExitCode, nil
		case outRestart:
			resetWhy = why
			continue
		}
		s.lastCode = code
		if !s.policy.allow(time.Now()) {
			s.enter(StateFailed, "giving up after %d restarts in %s; last: %s", s.cfg.MaxRestarts, s.cfg.RestartWindow, why)
			return code, nil
		}
		s.board.update(func(st *Status) { st.Restarts++ })
		if out == outHang {
			resetWhy = why
			continue
		}
		if stopped := s.backoff(ctx, s.policy.backoff(readyFor), why); stopped {
			return code, nil
		}
	}
}

// serve runs one server from spawn to exit. It returns the outcome, the code
// the supervisor would exit with because of it, a reason (for a hang: why
// to reset), and how long the server was ready.
func (s *Supervisor) serve(ctx context.Context) (out outcome, code int, why string, readyFor time.Duration, err error) {
	if held := s.portHolder(); held != "" {
		s.log.Error("not starting the server: "+held, "ready_url", s.cfg.ReadyURL)
		return outCrash, 1, held, 0, nil
	}
	srv, err := s.spawn()
	if err != nil {
		return outStuck, 127, "", 0, err
	}
	s.enter(StateStarting, "server started (start %d)", s.board.snapshot().Starts)

	pctx, cancelProbe := context.WithCancel(ctx)
	defer cancelProbe()
	var ready <-chan struct{}
	if srv.lines != nil {
		ready = srv.lines.Seen()
	} else {
		probed := make(chan struct{})
		go waitURL(pctx, s.client, s.cfg.ReadyURL, s.cfg.ProbeInterval, func() bool { return s.ownsReadyPort(srv) }, probed)
		ready = probed
	}
	startTimer := time.NewTimer(s.cfg.StartTimeout)
	defer startTimer.Stop()
	extend := s.extendTicker()
	defer extend.Stop()

	for srv.readyAt.IsZero() {
		select {
		case st := <-srv.exit:
			out, code, why := s.exited(srv, st)
			return out, code, why, 0, nil
		case <-ready:
			cancelProbe()
			srv.readyAt = time.Now()
		case <-startTimer.C:
			s.log.Warn("server not ready within the start timeout: counting it as a hang", "start_timeout", s.cfg.StartTimeout)
			return s.stopForRestart(srv, fmt.Sprintf("not ready within the start timeout %s", s.cfg.StartTimeout), true)
		case <-extend.C:
			s.notify.send(extendTimeout(2 * s.cfg.ExtendInterval))
		case sig := <-s.sigs:
			if out, code, why, stop := s.onSignal(srv, sig); stop {
				return out, code, why, 0, nil
			}
		case <-ctx.Done():
			return s.shutdown(srv, "context cancelled")
		}
	}

	first := !s.everReady
	s.everReady = true
	s.enter(StateReady, "server ready (start %d)", s.board.snapshot().Starts)
	if first {
		close(s.firstReady) // after READY=1 went out: no ping precedes it
	}
	for {
		select {
		case st := <-srv.exit:
			out, code, why := s.exited(srv, st)
			return out, code, why, time.Since(srv.readyAt), nil
		case sig := <-s.sigs:
			if out, code, why, stop := s.onSignal(srv, sig); stop {
				return out, code, why, time.Since(srv.readyAt), nil
			}
		case <-ctx.Done():
			return s.shutdown(srv, "context cancelled")
		}
	}
}

// onSignal forwards sig to the server or turns it into a stop or restart;
// stop is true when the server is gone and serve must return.
func (s *Supervisor) onSignal(srv *server, sig os.Signal) (out outcome, code int, why string, stop bool) {
	switch {
	case isStopSignal(sig):
		out, code, why, _, _ = s.shutdown(srv, "received "+signalName(sig.(syscall.Signal)))
		return out, code, why, true
	case sig == syscall.SIGHUP:
		s.log.Info("SIGHUP: restarting the server")
		s.reloading = true
		out, code, why, _, _ = s.stopForRestart(srv, "SIGHUP", false)
		switch out {
		case outHang: // it had to be killed: reset before the next start
			out = outRestart
		case outCrash:
			out, why = outRestart, ""
		}
		return out, code, why, true
	default:
		if err := srv.signalGroup(sig.(syscall.Signal)); err != nil {
			s.log.Warn("forwarding a signal failed", "signal", sig, "err", err)
		}
		return 0, 0, "", false
	}
}

// shutdown stops the server for good: the supervisor then exits with the
// server's code. A server that needed SIGKILL leaves the hang marker behind
// (stop writes it), so the next start resets its chips.
func (s *Supervisor) shutdown(srv *server, why string) (outcome, int, string, time.Duration, error) {
	st, _, err := s.stop(srv, why, true)
	if err != nil {
		return outStuck, HangExitCode, err.Error(), 0, nil
	}
	s.recordExit(st)
	return outStopped, st.Code(), why, 0, nil
}

// stopForRestart stops the server so that another can start: after a start
// timeout (hang is true: the marker is written) or on SIGHUP. A stop signal
// that arrives meanwhile turns the restart into the supervisor's exit; the
// marker, if written, stays for the next start.
func (s *Supervisor) stopForRestart(srv *server, why string, hang bool) (outcome, int, string, time.Duration, error) {
	st, killed, err := s.stop(srv, why, false)
	if err != nil {
		return outStuck, HangExitCode, err.Error(), 0, nil
	}
	s.recordExit(st)
	if hang && !killed { // a killed server's marker is already written
		s.markHang(why)
	}
	if s.stopSignal != nil {
		return outStopped, st.Code(), "received " + signalName(s.stopSignal.(syscall.Signal)), 0, nil
	}
	if hang || killed {
		if killed {
			why += "; killed after the stop grace"
		}
		return outHang, HangExitCode, why, 0, nil
	}
	return outCrash, st.Code(), why, 0, nil
}

// exited classifies a server that ended on its own.
func (s *Supervisor) exited(srv *server, st exitStatus) (outcome, int, string) {
	srv.killStragglers(s.log)
	s.recordExit(st)
	s.log.Info(LogExited, "pid", srv.pid, "status", st.String())
	switch {
	case st.Code() == 0:
		return outDone, 0, "server exited 0"
	case st.Code() == HangExitCode:
		why := fmt.Sprintf("server exited %d (hang)", HangExitCode)
		s.markHang(why)
		return outHang, HangExitCode, why
	case st.ws.Signaled() && st.ws.Signal() == syscall.SIGKILL:
		why := "server was killed with SIGKILL (chips left open)"
		s.markHang(why)
		return outHang, st.Code(), why
	}
	return outCrash, st.Code(), "server " + st.String()
}

// stop sends SIGTERM to the server's process group and SIGKILL after the
// stop grace, then waits up to KillTimeout for the reap: the whole stop
// takes at most Config.StopBudget. final says the supervisor itself is
// shutting down (STOPPING=1); otherwise a stop signal that arrives is kept
// in stopSignal (and said to systemd) for the caller.
func (s *Supervisor) stop(srv *server, why string, final bool) (st exitStatus, killed bool, err error) {
	s.shuttingDown = final
	s.enter(StateStopping, "stopping the server: %s", why)
	if err := srv.signalGroup(syscall.SIGTERM); err != nil {
		s.log.Warn("SIGTERM to the server failed", "err", err)
	}
	grace := time.NewTimer(s.cfg.StopGrace)
	defer grace.Stop()
	for {
		select {
		case st := <-srv.exit:
			srv.killStragglers(s.log)
			s.log.Info("server stopped", "pid", srv.pid, "status", st.String(), "killed", killed)
			return st, killed, nil
		case <-grace.C:
			if killed {
				return st, true, fmt.Errorf("server pid %d survived SIGKILL for %s (stuck in the driver?)", srv.pid, s.cfg.KillTimeout)
			}
			s.log.Warn("server ignored SIGTERM for the stop grace: SIGKILL", "pid", srv.pid, "stop_grace", s.cfg.StopGrace)
			// The marker goes first: whatever ends this supervisor next
			// (a server stuck in the driver, systemd's own SIGKILL at
			// TimeoutStopSec), the next start resets the chips.
			s.markHang(fmt.Sprintf("server ignored SIGTERM for the stop grace %s (%s): killed", s.cfg.StopGrace, why))
			srv.signalGroup(syscall.SIGKILL) //nolint:errcheck // ESRCH is handled, nothing else can fail
			killed = true
			grace.Reset(s.cfg.KillTimeout)
		case sig := <-s.sigs:
			switch {
			case isStopSignal(sig) && !final && s.stopSignal == nil:
				s.stopSignal, s.shuttingDown = sig, true
				s.enter(StateStopping, "received %s while stopping the server (%s): exiting once it is gone", signalName(sig.(syscall.Signal)), why)
			case !isStopSignal(sig) && sig != syscall.SIGHUP:
				srv.signalGroup(sig.(syscall.Signal)) //nolint:errcheck // best effort while stopping
			}
		}
	}
}

// backoff waits d before the next start; a stop ends the supervisor, SIGHUP
// starts at once.
func (s *Supervisor) backoff(ctx context.Context, d time.Duration, why string) (stopped bool) {
	s.enter(StateBackoff, "restarting in %s after %s", d, why)
	sig, cancelled := s.pause(ctx, d, nil)
	switch {
	case cancelled:
		s.shuttingDown = true
		s.enter(StateStopping, "context cancelled; no server running")
		return true
	case sig != nil && isStopSignal(sig):
		s.shuttingDown = true
		s.enter(StateStopping, "received %s; no server running", signalName(sig.(syscall.Signal)))
		return true
	}
	return false
}

// pause waits d while no server runs (a backoff, a pause between reset
// attempts), sending EXTEND_TIMEOUT_USEC on extend's ticks (nil: none). It
// ends early on a stop signal or SIGHUP (returned) or when ctx ends
// (cancelled); other signals have no server to go to and are dropped.
func (s *Supervisor) pause(ctx context.Context, d time.Duration, extend *time.Ticker) (sig os.Signal, cancelled bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	var ticks <-chan time.Time
	if extend != nil {
		ticks = extend.C
	}
	for {
		select {
		case <-t.C:
			return nil, false
		case <-ctx.Done():
			return nil, true
		case <-ticks:
			s.notify.send(extendTimeout(2 * s.cfg.ExtendInterval))
		case sig := <-s.sigs:
			if isStopSignal(sig) || sig == syscall.SIGHUP {
				return sig, false
			}
		}
	}
}

// chipsName is "chips 0,1" for messages, or "the chips" when there are none.
func (s *Supervisor) chipsName() string {
	if len(s.chips) == 0 {
		return "the chips"
	}
	return "chips " + chips.Format(s.chips)
}

// enter moves to state: one log line (at error level for failed, info
// otherwise), one STATUS= datagram (with READY=1 on ready and
// EXTEND_TIMEOUT_USEC while systemd still runs the start timeout), and the
// status JSON.
func (s *Supervisor) enter(state State, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	from := "none"
	if s.state >= 0 {
		from = s.state.String()
	}
	s.state = state
	level := slog.LevelInfo
	if state == StateFailed { // the supervisor gives up: `journalctl -p err` shows why
		level = slog.LevelError
	}
	s.log.Log(context.Background(), level, LogState(state), "from", from, "detail", detail)
	s.board.update(func(st *Status) {
		st.State, st.Detail, st.Since = state, detail, time.Now()
	})
	msg := []string{statusLine(state.String() + ": " + detail)}
	switch {
	case state == StateReady:
		msg = append([]string{"READY=1"}, msg...)
		s.reloading = false
	case state == StateStopping && s.shuttingDown:
		msg = append([]string{"STOPPING=1"}, msg...)
	case state == StateStopping && s.reloading:
		msg = append([]string{"RELOADING=1"}, msg...)
	case (state == StateStarting || state == StateResetting) && !s.everReady:
		msg = append(msg, extendTimeout(2*s.cfg.ExtendInterval))
	}
	s.notify.send(msg...)
}

// extendTicker ticks every ExtendInterval while systemd still counts the
// start timeout, and never after the first READY=1.
func (s *Supervisor) extendTicker() *time.Ticker {
	t := time.NewTicker(s.cfg.ExtendInterval)
	if s.everReady {
		t.Stop()
	}
	return t
}

func (s *Supervisor) recordExit(st exitStatus) {
	info := &ExitInfo{Code: st.Code(), At: time.Now()}
	if st.ws.Signaled() {
		info.Signal = signalName(st.ws.Signal())
	}
	s.lastCode = st.Code()
	s.board.update(func(b *Status) { b.LastExit, b.ServerPID, b.ServerStartTick = info, 0, "" })
}

func (s *Supervisor) markHang(why string) {
	if err := hangmarker.Write(s.cfg.HangMarker, "tt-model supervise: "+why); err != nil {
		s.log.Error("cannot write the hang marker", "err", err)
		return
	}
	s.log.Info("hang marker written", "path", s.cfg.HangMarker, "reason", why)
	written := false // the chips may be hung
	s.board.note(Event{Kind: EventMarker, Detail: "hang marker written: " + why, OK: &written})
}

// pingWatchdog sends WATCHDOG=1 at half the systemd interval for the
// supervisor's whole run. While a server is ready it pings only when the
// server answers its readiness probe (with --ready-line, while it runs): a
// server that hangs while serving stops the pings and systemd steps in. In
// every other state the supervisor is itself resetting, starting or
// stopping a server under its own timeouts, and pings: an in-unit restart
// longer than WatchdogSec is not a hang. Pings start with the first
// READY=1, when systemd arms the watchdog; a frozen supervisor sends none.
func (s *Supervisor) pingWatchdog(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-s.firstReady:
	}
	t := time.NewTicker(s.watchdog / 2)
	defer t.Stop()
	for {
		if s.board.snapshot().State != StateReady || s.cfg.ReadyLine != "" || readiness.Probe(ctx, s.client, s.cfg.ReadyURL) == nil {
			s.notify.send("WATCHDOG=1")
		} else if ctx.Err() == nil {
			s.log.Warn("server does not answer its readiness probe: withholding the watchdog ping")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// serveStatus serves the status JSON on addr until the returned stop.
func (s *Supervisor) serveStatus(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--status-addr %s: %w", addr, err)
	}
	hs := &http.Server{Handler: statusHandler(&s.board, s.cfg), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("status server stopped", "err", err)
		}
	}()
	s.log.Info("status served: JSON on /status, the page on / in a browser", "addr", ln.Addr().String())
	return func() { hs.Close() }, nil
}
