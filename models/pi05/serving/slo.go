package serving

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ttmodel/tt-model/models/pi05"
)

// The SLO policy, as the seed's multi-robot scheduler states it: every device's cycle c(b) (a batch
// of b requests: VISION + PREFIX each, then one batched EXPERT) is measured at start and multiplied
// by PI05_SLO_CLOCK_GUARD and the device's PI05_MR_GUARD factor; PI05_SLO_HOST_MS (or the measured
// host time) is added. A robot waits at most for one cycle in progress (the other robots') plus
// its own, so with r robots on a device (r <= PI05_MAX_BATCH):
//
//	p99(r) = host + c(r) + c(r-1)        p50(r) = host + c(r) + c(r-1)/2        (c(0) = 0)
//
// and the device holds the largest r with p50(r) <= SLO and p99(r) + margin <= SLO_P99. R_max is
// the sum over the healthy devices; robot R_max+1 gets a 503 at once.

// calibrationReps is how many calls measure each c(b) (the median is taken).
const calibrationReps = 3

// Start warms every device up with sample, calibrates them when an SLO is set, checks the hang
// threshold against the longest call seen, and opens the engine to requests. host is the measured
// host time of one request (used when PI05_SLO_HOST_MS is unset); startup is how long this
// server took to load, for the Retry-After of the 503s a hang causes.
func (e *Engine) Start(ctx context.Context, sample *pi05.Prepared, host, startup time.Duration) error {
	e.mu.Lock()
	e.startup = startup
	e.host = host
	if e.cfg.SLO.HostSet {
		e.host = e.cfg.SLO.Host
	}
	e.mu.Unlock()
	start := time.Now()
	if err := e.warmUp(ctx, sample); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	e.log.Info("devices warmed up", "devices", e.cfg.Devices, "layout", e.cfg.Layout, "seconds", time.Since(start).Seconds())
	if e.cfg.SLO.On() {
		if err := e.calibrate(ctx, sample); err != nil {
			return err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if longest, after := e.calls.longest, e.cfg.Hang.After; after > 0 {
		switch {
		case longest >= after:
			return fmt.Errorf("PI05_HANG_S=%g: a device call took %s while warming up; every call would count as a hang (raise PI05_HANG_S)", after.Seconds(), longest.Round(time.Millisecond))
		case 2*longest >= after:
			e.log.Warn("PI05_HANG_S is less than twice the longest device call seen at start: a slow call under load may count as a hang",
				"PI05_HANG_S", after.Seconds(), "longest_call_s", longest.Seconds())
		}
	}
	e.serving = true
	return nil
}

// internal runs batches of b copies of sample on every given device at once (each its own batch)
// and returns each call's duration per device.
func (e *Engine) internal(ctx context.Context, devs []*device, sample *pi05.Prepared, b int) ([]time.Duration, error) {
	var wg sync.WaitGroup
	took := make([]time.Duration, len(devs))
	errs := make([]error, len(devs))
	for i, d := range devs {
		reqs := make([]*request, b)
		e.mu.Lock()
		for k := range reqs {
			rb := &robot{id: "warm-up", anonymous: true, admitted: true, inFlight: 1}
			reqs[k] = &request{robot: rb, in: sample, arrived: time.Now(), done: make(chan struct{}), pin: d, internal: true}
			switch d.role {
			case roleServe:
				reqs[k].waiting = d
				d.queue = append(d.queue, reqs[k])
			case rolePrefix:
				e.prefixQ = append(e.prefixQ, reqs[k])
			}
		}
		e.cond.Broadcast()
		e.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, r := range reqs {
				select {
				case <-r.done:
				case <-ctx.Done():
					errs[i] = ctx.Err()
					return
				}
				if r.err != nil {
					errs[i] = r.err
					return
				}
				took[i] = max(took[i], r.took)
			}
		}()
	}
	wg.Wait()
	return took, errors.Join(errs...)
}

// warmUp runs one request through every device (pd: through every prefix device and the expert).
func (e *Engine) warmUp(ctx context.Context, sample *pi05.Prepared) error {
	var devs []*device
	for _, d := range e.devs {
		if d.role == roleServe || d.role == rolePrefix {
			devs = append(devs, d)
		}
	}
	_, err := e.internal(ctx, devs, sample, 1)
	return err
}

// calibrate measures c(b) for b = 1..MaxBatch on every device at once, then sets the devices'
// robot counts and R_max. No robot fitting is an error naming the settings to change.
func (e *Engine) calibrate(ctx context.Context, sample *pi05.Prepared) error {
	devs := e.serveDevices()
	for _, d := range devs {
		d.cycle = make([]time.Duration, e.cfg.MaxBatch)
	}
	for b := 1; b <= e.cfg.MaxBatch; b++ {
		runs := make([][]time.Duration, len(devs))
		for range calibrationReps {
			took, err := e.internal(ctx, devs, sample, b)
			if err != nil {
				return fmt.Errorf("SLO calibration: %w", err)
			}
			for i, t := range took {
				runs[i] = append(runs[i], t)
			}
		}
		for i, d := range devs {
			slices.Sort(runs[i])
			d.cycle[b-1] = runs[i][len(runs[i])/2]
			if b > 1 { // a batch is never cheaper than a smaller one: that is measurement noise
				d.cycle[b-1] = max(d.cycle[b-1], d.cycle[b-2])
			}
			e.log.Info(fmt.Sprintf("SLO calibration k=%d device=%d", b, d.id), "cycle_ms", ms(d.cycle[b-1]),
				"min_ms", ms(runs[i][0]), "max_ms", ms(runs[i][len(runs[i])-1]), "predicted_ms", ms(e.cyc(d, b)))
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.recompute()
	for _, d := range devs {
		p50, p99 := e.predict(d, max(d.capacity, 1))
		e.log.Info("SLO device", "device", d.id, "robots", d.capacity, "guard", e.cfg.SLO.ClockGuard*d.guard,
			"predicted_p50_ms", ms(p50), "predicted_p99_ms", ms(p99))
	}
	if e.rmax == 0 {
		p50, p99 := e.predict(devs[0], 1)
		return fmt.Errorf("SLO: no robot fits: one robot alone is predicted at p50 %.1f ms / p99 %.1f ms (+%g ms margin) against PI05_SLO_MS=%g / PI05_SLO_P99_MS=%g; raise PI05_SLO_MS / PI05_SLO_P99_MS, lower PI05_SLO_CLOCK_GUARD or PI05_SLO_MARGIN_MS, or use fewer devices (more threads each)",
			ms(p50), ms(p99), ms(e.cfg.SLO.Margin), ms(e.cfg.SLO.P50), ms(e.cfg.SLO.P99))
	}
	e.log.Info("SLO capacity", "r_max", e.rmax, "slo_ms", ms(e.cfg.SLO.P50), "slo_p99_ms", ms(e.cfg.SLO.P99), "host_ms", ms(e.host))
	return nil
}

func (e *Engine) serveDevices() []*device {
	var out []*device
	for _, d := range e.devs {
		if d.role == roleServe {
			out = append(out, d)
		}
	}
	return out
}

// cyc is d's predicted cycle for a batch of b (guards applied); 0 for b <= 0 or before calibration.
func (e *Engine) cyc(d *device, b int) time.Duration {
	if b <= 0 || len(d.cycle) == 0 {
		return 0
	}
	b = min(b, len(d.cycle))
	return time.Duration(float64(d.cycle[b-1]) * e.cfg.SLO.ClockGuard * d.guard)
}

// predict is the predicted p50 and p99 latency of a robot when d holds r robots.
func (e *Engine) predict(d *device, r int) (p50, p99 time.Duration) {
	own, prev := e.cyc(d, r), e.cyc(d, r-1)
	return e.host + own + prev/2, e.host + own + prev
}

// capacityOf is the largest robot count d holds within the SLO (every smaller count fitting too).
func (e *Engine) capacityOf(d *device) int {
	r := 0
	for n := 1; n <= e.cfg.MaxBatch; n++ {
		p50, p99 := e.predict(d, n)
		if p50 > e.cfg.SLO.P50 || p99+e.cfg.SLO.Margin > e.cfg.SLO.P99 {
			break
		}
		r = n
	}
	return r
}

// recompute sets every healthy device's robot count and R_max (after calibration and after a
// quarantine).
func (e *Engine) recompute() {
	e.rmax = 0
	for _, d := range e.devs {
		if d.role != roleServe {
			continue
		}
		d.capacity = 0
		if !d.quarantined {
			d.capacity = e.capacityOf(d)
		}
		e.rmax += d.capacity
		e.met.capacity.WithLabelValues(d.label()).Set(float64(d.capacity))
	}
}

// lateness is when a batch of n (< MaxBatch) waiting on d should start under PI05_JOIN=lateness:
// once the bound robots expected back (their last answer plus their usual think time, give or take
// a quarter of it) before the earliest waiting request must start to make its deadline have
// arrived, else now.
func (e *Engine) lateness(d *device, q []*request, n int, now time.Time) time.Time {
	latest := q[0].deadline.Add(-e.cyc(d, min(n+1, e.cfg.MaxBatch)))
	if !latest.After(now) {
		return now
	}
	wake := now
	for _, rb := range e.robots {
		if rb.dev != d || rb.inFlight > 0 || rb.gap == 0 {
			continue
		}
		t := rb.lastDone.Add(rb.gap + max(rb.gap/4, 5*time.Millisecond))
		if rb.lastDone.Add(rb.gap).After(latest) || !t.After(now) {
			continue // not expected in time, or overdue
		}
		if t.After(latest) {
			t = latest
		}
		wake = later(wake, t)
	}
	return wake
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// steal finds, for the idle device d, a request waiting on another device that is predicted to
// miss its deadline there and that d would answer sooner (PI05_STEAL=1); it is taken off its queue.
func (e *Engine) steal(d *device, now time.Time) *request {
	B := e.cfg.MaxBatch
	for _, x := range e.devs {
		if x == d || x.role != roleServe || x.quarantined || len(x.queue) == 0 {
			continue
		}
		free := now
		if x.busy() {
			if t := x.jobStart.Add(e.cyc(x, len(x.job))); t.After(now) {
				free = t
			}
		}
		for i, r := range x.queue {
			if r.internal {
				continue
			}
			ahead := i / B
			finish := free.Add(time.Duration(ahead+1) * e.cyc(x, min(B, len(x.queue)-ahead*B)))
			if finish.After(r.deadline) && now.Add(e.cyc(d, 1)).Before(finish) {
				x.queue = slices.Delete(x.queue, i, i+1)
				e.met.queue.WithLabelValues(x.label()).Set(float64(len(x.queue)))
				e.met.stolen.WithLabelValues(d.label()).Inc()
				return r
			}
		}
	}
	return nil
}
