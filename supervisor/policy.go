package supervisor

import "time"

// restartPolicy decides whether and when a crashed server starts again:
// at most max restarts within window (then the supervisor gives up and
// lets systemd or the container policy decide), and an exponential backoff
// from min to max that starts over after a server stayed ready for reset.
type restartPolicy struct {
	max      int
	window   time.Duration
	reset    time.Duration
	restarts []time.Time
	delay    backoff
}

func newRestartPolicy(c Config) *restartPolicy {
	return &restartPolicy{max: c.MaxRestarts, window: c.RestartWindow, reset: c.BackoffReset,
		delay: backoff{first: c.BackoffMin, cap: c.BackoffMax}}
}

// backoff is the supervisor's one retry schedule, for restarts after a
// crash and for reset attempts alike: first, then twice the last wait,
// never above cap (0: no cap).
type backoff struct {
	first, cap time.Duration
	last       time.Duration // 0 before the first wait
}

// next is the next wait.
func (b *backoff) next() time.Duration {
	if b.last == 0 {
		b.last = b.first
	} else {
		b.last *= 2
	}
	if b.cap > 0 && b.last > b.cap {
		b.last = b.cap
	}
	return b.last
}

// restart makes the next wait first again.
func (b *backoff) restart() { b.last = 0 }

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
	if readyFor >= p.reset {
		p.delay.restart()
	}
	return p.delay.next()
}
