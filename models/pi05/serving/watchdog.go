package serving

import (
	"fmt"
	"time"

	"github.com/ttmodel/tt-model/internal/hangmarker"
)

// The hang watchdog: a device call running longer than PI05_HANG_S is a hang. The marker is
// written at once. In dp with a healthy device left the stuck device is quarantined (its requests
// get 503 + Retry-After, its robots are re-bound at their next request, capacity is recomputed,
// /health says degraded) and, with PI05_HANG_ACTION=exit, the server drains and exits; otherwise
// (sp, pd, one device, none healthy left) /health says hung and the server exits. The stuck call
// is abandoned, never waited for: its OS thread stays blocked until the process exits.

func (e *Engine) watchdog() {
	e.every(min(max(e.cfg.Hang.After/20, 10*time.Millisecond), 250*time.Millisecond), func(now time.Time) {
		for _, d := range e.devs {
			if d.busy() && !d.quarantined && now.Sub(d.jobStart) > e.cfg.Hang.After {
				e.hang(d, now)
			}
		}
	})
}

// hang quarantines d (under e.mu) and decides between degrading and exiting.
func (e *Engine) hang(d *device, now time.Time) {
	what := fmt.Sprintf("device %d (%s) stuck in a call for %s", d.id, d.role, now.Sub(d.jobStart).Round(time.Millisecond))
	d.quarantined = true
	e.hangs = append(e.hangs, what)
	if err := hangmarker.Write(e.cfg.Hang.Marker, "tt-model-server: "+what); err != nil {
		e.log.Error("hang marker", "err", err)
	}
	e.met.state.WithLabelValues(d.label()).Set(1)
	e.met.hangs.Inc()

	degrade := e.cfg.Layout == DP && e.healthyServe() > 0
	var err *Error
	if degrade {
		e.health = "degraded"
		err = e.unavailable("hang", time.Second, "pi05: %s; quarantined, this robot is re-bound to a healthy device at its next request", what)
	} else {
		e.health = "hung"
		err = e.unavailable("hung", e.restartEstimate(), "pi05: %s; the server exits for a chip reset and restart", what)
	}
	for _, r := range d.job {
		e.releaseSlot(r)
		e.finish(r, nil, err)
	}
	for _, r := range d.queue {
		e.finish(r, nil, err)
	}
	d.queue = nil
	e.met.queue.WithLabelValues(d.label()).Set(0)
	for _, rb := range e.robots {
		if rb.dev == d {
			e.unbind(rb)
		}
	}
	if e.cfg.SLO.On() {
		e.recompute()
	}
	e.cond.Broadcast()
	switch {
	case !degrade:
		e.log.Error("device hang: the server exits", "hang", what, "exit_code", e.cfg.Hang.ExitCode, "marker", e.cfg.Hang.Marker)
		e.failAll(err)
		e.drain()
	case e.cfg.Hang.Action == HangExit:
		e.log.Error("device hang: quarantined; draining, then exiting (PI05_HANG_ACTION=exit)", "hang", what,
			"drain_s", e.cfg.Hang.Drain.Seconds(), "exit_code", e.cfg.Hang.ExitCode, "marker", e.cfg.Hang.Marker)
		e.drain()
	default:
		e.log.Error("device hang: quarantined; serving on the healthy devices", "hang", what, "healthy", e.healthyServe(),
			"r_max", e.rmax, "marker", e.cfg.Hang.Marker)
	}
}

// drain stops taking requests, lets the healthy devices finish what they hold for up to
// PI05_HANG_DRAIN_S, answers the rest with 503, then delivers the exit code (under e.mu).
func (e *Engine) drain() {
	if e.draining {
		return
	}
	e.draining = true
	deadline := time.Now().Add(e.cfg.Hang.Drain)
	go func() {
		for {
			e.mu.Lock()
			idle := e.idle()
			if idle || !time.Now().Before(deadline) {
				if !idle {
					err := e.unavailable("draining", e.restartEstimate(), "pi05: the server exits for a chip reset after a device hang (%s); the drain time is over", e.hangs[0])
					e.failAll(err)
					for _, d := range e.devs {
						for _, r := range d.job {
							e.finish(r, nil, err)
						}
					}
				}
				e.mu.Unlock()
				e.exitOnce.Do(func() { e.exit <- e.cfg.Hang.ExitCode })
				return
			}
			e.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	}()
}

// idle reports whether no healthy device holds a request and nothing waits.
func (e *Engine) idle() bool {
	if len(e.prefixQ) > 0 || len(e.expertQ) > 0 {
		return false
	}
	for _, d := range e.devs {
		if !d.quarantined && (d.busy() || len(d.queue) > 0) {
			return false
		}
	}
	return true
}
