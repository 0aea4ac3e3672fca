package supervisor

import (
	"context"
	"errors"
	"fmt"
	"github.com/ttmodel/tt-model/internal/chips"
	"os"
	"strings"
	"syscall"
	"time"
)

// reset brings the chips back after a hang: the reset command, then the
// chip check, up to ResetAttempts times; the hang marker is removed only
// after a check passed. stopped is true when a stop signal arrived, which
// ends the supervisor with the marker left in place. Without chips there is
// nothing to check, and the reset command runs only when it is a site's own
// (see Config.resetsWithoutChips).
func (s *Supervisor) reset(ctx context.Context, why string) (ok, stopped bool) {
	info := &ResetInfo{At: time.Now(), Reason: why}
	defer func() {
		info.DurationS = time.Since(info.At).Seconds()
		s.board.update(func(st *Status) { st.LastReset = info })
	}()
	noChips := len(s.chips) == 0
	if noChips && !s.cfg.resetsWithoutChips() {
		s.log.Info("no chips and the default reset command: skipping the reset and the chip check", "reason", why, "reset_cmd", s.cfg.ResetCmd)
		s.clearMarker()
		info.OK, info.Skipped = true, true
		return true, false
	}
	if noChips {
		s.enter(StateResetting, "running the reset command (no chips on this host): %s", why)
	} else {
		s.enter(StateResetting, "resetting %s: %s", s.chipsName(), why)
	}
	extend := s.extendTicker()
	defer extend.Stop()

	pauses := backoff{first: s.cfg.ResetBackoff}
	for attempt := 1; attempt <= s.cfg.ResetAttempts; attempt++ {
		info.Attempts = attempt
		stop, output, err := s.runReset(ctx, extend)
		info.Output = output
		if stop {
			info.Error = "stopped during the reset"
			return false, true
		}
		info.ChipCheck = ""
		if err == nil && noChips {
			info.ChipCheck = "skipped (no chips on this host)"
		}
		if err == nil && !noChips {
			if stop, err = s.checkChips(ctx, extend); stop {
				info.Error = "stopped during the chip check"
				return false, true
			}
			s.noteCheck(err)
			info.ChipCheck = "passed"
			if err != nil {
				info.ChipCheck = "failed: " + err.Error()
			}
		}
		if err == nil {
			s.clearMarker()
			if noChips {
				s.log.Info("reset command done; no chips on this host, so the chip check is skipped", "attempt", attempt)
			} else {
				s.log.Info("chips reset and checked", "chips", chips.Format(s.chips), "attempt", attempt)
			}
			info.OK, info.Error = true, ""
			return true, false
		}
		info.Error = err.Error()
		s.log.Warn("chip reset failed", "attempt", attempt, "of", s.cfg.ResetAttempts, "err", err)
		if attempt < s.cfg.ResetAttempts && s.pauseBeforeReset(ctx, extend, pauses.next()) {
			info.Error = "stopped between reset attempts"
			return false, true
		}
	}
	return false, false
}

// pauseBeforeReset waits d before the next reset attempt (a chip that just
// failed a reset often needs a moment: the attempts back off, doubling);
// stopped is true when a stop signal came or ctx ended (SIGHUP only cuts the
// pause short).
func (s *Supervisor) pauseBeforeReset(ctx context.Context, extend *time.Ticker, d time.Duration) (stopped bool) {
	s.log.Info("next reset attempt after a pause", "pause", d)
	sig, cancelled := s.pause(ctx, d, extend)
	if cancelled || (sig != nil && isStopSignal(sig)) {
		s.log.Warn("stop requested between reset attempts: the hang marker stays")
		return true
	}
	return false
}

// checkChips runs the chip check while still answering stop signals and
// extending systemd's start timeout.
func (s *Supervisor) checkChips(ctx context.Context, extend *time.Ticker) (stopped bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.host.check(ctx, s.chips, s.cfg.HeartbeatInterval, s.cfg.ChipCheckTimeout) }()
	for {
		select {
		case err := <-done:
			return false, err
		case <-extend.C:
			s.notify.send(extendTimeout(2 * s.cfg.ExtendInterval))
		case sig := <-s.sigs:
			if isStopSignal(sig) {
				s.log.Warn("stop requested during the chip check: the hang marker stays")
				cancel()
				// A sysfs read of a hung chip may not return: the stop
				// does not wait for it longer than for a killed process.
				select {
				case <-done:
				case <-time.After(s.cfg.KillTimeout):
				}
				return true, nil
			}
		}
	}
}

// resetArgv is the reset command split on blanks (no shell: a scratch image
// has none), {chips} replaced by the chip list. Without chips, an argument
// that is just {chips} is left out rather than passed empty.
func resetArgv(cmd string, ids []int) []string {
	var argv []string
	for _, a := range strings.Fields(cmd) {
		if a == "{chips}" && len(ids) == 0 {
			continue
		}
		argv = append(argv, strings.ReplaceAll(a, "{chips}", chips.Format(ids)))
	}
	return argv
}

// runReset runs the reset command once in its own process group under
// ResetTimeout, killing the group on expiry. Signals that arrive meanwhile
// are held back except stop signals, which abort the reset.
func (s *Supervisor) runReset(ctx context.Context, extend *time.Ticker) (stopped bool, output string, err error) {
	argv := resetArgv(s.cfg.ResetCmd, s.chips)
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return false, "", fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer devNull.Close()
	out, err := newOutputTail(s.stderr)
	if err != nil {
		return false, "", fmt.Errorf("reset command output: %w", err)
	}
	c, err := s.reaper.start(argv, childEnv(os.Environ(), nil), [3]*os.File{devNull, out.w, out.w})
	out.started()
	if err != nil {
		return false, out.text(), fmt.Errorf("reset command: %w", err)
	}
	stopped, err = s.waitReset(ctx, extend, c, argv)
	return stopped, out.text(), err
}

// waitReset waits for the reset command c under ResetTimeout. Once it is
// SIGKILLed (at the timeout or on a stop) it gets KillTimeout to be reaped:
// a reset tool stuck in the driver must not hold a stop past the service
// manager's stop timeout.
func (s *Supervisor) waitReset(ctx context.Context, extend *time.Ticker, c *child, argv []string) (stopped bool, err error) {
	s.log.Info("reset command started", "pid", c.pid, "argv", argv)
	timeout := time.NewTimer(s.cfg.ResetTimeout)
	defer timeout.Stop()
	var expired, stop bool
	var reap <-chan time.Time // runs from the SIGKILL on
	kill := func() {
		c.signalGroup(syscall.SIGKILL) //nolint:errcheck // ESRCH is handled, nothing else can fail
		if reap == nil {
			reap = time.After(s.cfg.KillTimeout)
		}
	}
	done := ctx.Done()
	for {
		select {
		case st := <-c.exit:
			c.signalGroup(syscall.SIGKILL) //nolint:errcheck // leftovers of the reset tool
			switch {
			case stop:
				return true, errors.New("reset aborted")
			case expired:
				return false, fmt.Errorf("reset command %q did not finish within %s: killed", strings.Join(argv, " "), s.cfg.ResetTimeout)
			case st.Code() != 0:
				return false, fmt.Errorf("reset command %q: %s", strings.Join(argv, " "), st)
			}
			return false, nil
		case <-timeout.C:
			expired = true
			kill()
		case <-reap:
			return stop, fmt.Errorf("reset command %q (pid %d) survived SIGKILL for %s (stuck in the driver?)", strings.Join(argv, " "), c.pid, s.cfg.KillTimeout)
		case <-extend.C:
			s.notify.send(extendTimeout(2 * s.cfg.ExtendInterval))
		case <-done:
			done, stop = nil, true
			kill()
		case sig := <-s.sigs:
			if isStopSignal(sig) {
				s.log.Warn("stop requested during a chip reset: aborting it; the hang marker stays")
				stop = true
				kill()
			}
		}
	}
}
