package supervisor

import "time"

// restartPolicy decides whether and when a crashed server starts again:
// at most max restarts within window (then the supervisor gives up and
// lets systemd or the container policy decide), and an exponential backoff
// from min to max that starts over after a server stayed ready for reset.
type restartPolicy struct {
	max      int
	window   time.Duration
	min      time.Duration
	cap      time.Duration
	reset    time.Duration
	restarts []time.Time
	delay    time.Duration
}

func newRestartPolicy(c Config) *restartPolicy {
	return &restartPolicy{max: c.MaxRestarts, window: c.RestartWindow, min: c.BackoffMin,
		cap: c.BackoffMax, reset: c.BackoffReset}
}

// allow records a restart at now when the budget has room for it.
func (p *restartPolicy) allow(now time.Time) bool {
	kept := p.restarts[:0]
	for _, t := range p.restarts {
		if now.Sub(t) < p.window {
			kept = append(kept, t)
		}
	}
	p.restarts = kept
	if len(p.restarts) >= p.max {
		return false
	}
	p.restarts = append(p.restarts, now)
	return true
}

// backoff is the wait before restarting a server that crashed after being
// ready for readyFor (0 if it never was).
func (p *restartPolicy) backoff(readyFor time.Duration) time.Duration {
	if readyFor >= p.reset || p.delay == 0 {
		p.delay = p.min
	} else {
		p.delay = min(2*p.delay, p.cap)
	}
	return p.delay
}
