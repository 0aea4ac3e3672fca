package serving

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ttmodel/tt-model/models/pi05"
	"golang.org/x/sys/unix"
)

// Device is what the engine schedules: one program with its slots (a *pi05.Device through
// PolicyDevice, or a fake in tests). The engine calls a device from one OS thread of its own.
type Device interface {
	// Prefix leaves one request's prefix in a slot (VISION and PREFIX, or a prefix cache hit).
	Prefix(slot int, in *pi05.Prepared) (t pi05.Timing, cacheHit bool, err error)
	// Expert runs the batched EXPERT over the requests in slots (results in the order of ins).
	Expert(slots []int, ins []*pi05.Prepared, pack bool) ([]*pi05.Result, error)
	// Adopt copies the prefix in src's slot srcSlot into slot dst of this device (pd).
	Adopt(dst int, src Device, srcSlot int) error
	// Slots is how many requests the device holds between PREFIX and EXPERT.
	Slots() int
}

// PolicyDevice adapts a *pi05.Device to Device.
func PolicyDevice(d *pi05.Device) Device { return policyDevice{d} }

type policyDevice struct{ *pi05.Device }

func (p policyDevice) Adopt(dst int, src Device, srcSlot int) error {
	s, ok := src.(policyDevice)
	if !ok {
		return fmt.Errorf("pi05: cannot adopt a prefix from a %T", src)
	}
	return p.Device.Adopt(dst, s.Device, srcSlot)
}

// role is what a device does in its layout.
type role int

const (
	roleServe  role = iota // sp, dp: the whole model
	rolePrefix             // pd: VISION + PREFIX
	roleExpert             // pd: the batched EXPERT
	roleIdle               // pd: beyond PI05_PREFIX_CHIPS
)

func (r role) String() string {
	return [...]string{"serve", "prefix", "expert", "idle"}[r]
}

// device is the engine's state of one Device; every field after dev is guarded by Engine.mu.
type device struct {
	id   int
	role role
	dev  Device
	cpus []int

	queue       []*request // dp/sp: waiting for this device
	job         []*request // running now
	jobStart    time.Time  // when the running call started (the watchdog's clock)
	quarantined bool
	calls       int             // serving calls started (the fault switch counts them)
	freeSlots   []int           // pd prefix devices: slots not holding a prefix
	cycle       []time.Duration // calibrated cycle of a batch of b+1 requests (SLO)
	guard       float64         // the device's factor on its calibrated cycle
	capacity    int             // robots it holds under the SLO
	bound       int             // robots bound to it
	timer       *time.Timer     // wakes the device when a batch window or a lateness wait ends
	wakeAt      time.Time
}

func (d *device) busy() bool { return len(d.job) > 0 }

// request is one submitted request, from Submit to its answer.
type request struct {
	robot    *robot
	in       *pi05.Prepared
	arrived  time.Time
	deadline time.Time
	done     chan struct{}
	res      *pi05.Result
	err      error
	finished bool
	dev      *device // the device it ran on (pd: the expert device)
	waiting  *device // dp: whose queue holds it
	prefix   *device // pd: the prefix device holding its slab
	slot     int     // pd: the slot on prefix
	pre      pi05.Timing
	hit      bool          // its prefix came from the prefix cache
	started  time.Time     // its (last) call started
	took     time.Duration // that call's duration
	pin      *device       // warm-up and calibration: the device that must run it
	internal bool          // warm-up and calibration: no batch window, not in the metrics
}

// Answer is a served request.
type Answer struct {
	Result *pi05.Result
	Device int           // the device that ran it (pd: the expert device)
	Queued time.Duration // from arrival to the start of its call
}

// Engine schedules requests on devices; see the package comment.
type Engine struct {
	cfg   Config
	log   *slog.Logger
	fault Fault
	met   *metrics
	devs  []*device

	mu       sync.Mutex
	cond     *sync.Cond
	serving  bool // warm-up and calibration are done (the fault switch counts from here)
	stopped  bool
	health   string // ok, degraded, hung
	draining bool
	robots   map[string]*robot
	anon     int
	prefixQ  []*request // pd: waiting for a prefix device
	expertQ  []*request // pd: prefixed, waiting for the expert device
	rmax     int
	host     time.Duration
	startup  time.Duration
	hangs    []string
	calls    callStats
	stop     chan struct{}
	exit     chan int
	exitOnce sync.Once
}

// callStats are the longest device calls seen while warming up (the watchdog's sanity check).
type callStats struct{ longest time.Duration }

// New builds an engine over devs (len(devs) == cfg.Devices) and starts one worker per device,
// each on its own OS thread, pinned to cfg.CPUs when given. Nothing is served until Start.
func New(cfg Config, devs []Device, fault Fault, log *slog.Logger) (*Engine, error) {
	if len(devs) != cfg.Devices {
		return nil, fmt.Errorf("serving: %d devices for a configuration of %d", len(devs), cfg.Devices)
	}
	if fault.HangDevice >= len(devs) || fault.DelayDevice >= len(devs) {
		return nil, fmt.Errorf("TT_MODEL_FAULT: device %d does not exist (devices 0..%d)", max(fault.HangDevice, fault.DelayDevice), len(devs)-1)
	}
	e := &Engine{cfg: cfg, log: log, fault: fault, health: "ok", robots: map[string]*robot{},
		stop: make(chan struct{}), exit: make(chan int, 1)}
	e.cond = sync.NewCond(&e.mu)
	e.met = newMetrics(len(devs))
	for i, d := range devs {
		dv := &device{id: i, dev: d, guard: 1, role: roleOf(cfg, i)}
		if cfg.CPUs != nil {
			dv.cpus = cfg.CPUs[i]
		}
		if dv.role != roleIdle && d == nil {
			return nil, fmt.Errorf("serving: device %d (%s) is missing", i, dv.role)
		}
		if dv.role == rolePrefix {
			for s := range d.Slots() {
				dv.freeSlots = append(dv.freeSlots, s)
			}
		}
		if g, ok := cfg.SLO.Guards[i]; ok {
			dv.guard = g
		}
		e.devs = append(e.devs, dv)
	}
	for _, d := range e.devs {
		if d.role != roleIdle {
			go e.worker(d)
		}
	}
	if cfg.Hang.After > 0 {
		go e.watchdog()
	}
	go e.janitor()
	return e, nil
}

// Close stops the workers (a stuck one is abandoned). Requests still queued get an error.
func (e *Engine) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	e.stopped = true
	close(e.stop)
	e.failAll(e.unavailable("stopped", e.restartEstimate(), "pi05: the server is shutting down"))
	e.cond.Broadcast()
}

// Exit delivers the exit code once a hang makes the server exit (after the drain).
func (e *Engine) Exit() <-chan int { return e.exit }

// Quarantined reports whether a device ever hung: the process must then exit with the hang code
// and must not close the devices (a stuck call never returns).
func (e *Engine) Quarantined() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.hangs) > 0
}

// Health is "ok", "degraded" (dp lost a device, still serving) or "hung" (about to exit).
func (e *Engine) Health() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.health
}

// Submit runs one prepared request for robot ("" is an anonymous robot of one request) and waits
// for its answer. A request beyond capacity, on a hung device or while draining gets an *Error
// (503 with Retry-After); ctx ending (a client gone) abandons it.
func (e *Engine) Submit(ctx context.Context, robotID string, in *pi05.Prepared) (*Answer, error) {
	now := time.Now()
	e.mu.Lock()
	if err := e.refuse(); err != nil {
		e.mu.Unlock()
		return nil, err
	}
	rb, err := e.admit(robotID, now)
	if err != nil {
		e.mu.Unlock()
		return nil, err
	}
	req := &request{robot: rb, in: in, arrived: now, done: make(chan struct{})}
	if e.cfg.SLO.On() {
		req.deadline = now.Add(e.cfg.SLO.P50 - e.host)
	}
	rb.inFlight++
	e.enqueue(req)
	e.mu.Unlock()

	select {
	case <-req.done:
	case <-ctx.Done():
		e.mu.Lock()
		if !req.finished {
			e.withdraw(req)
			e.finish(req, nil, ctx.Err())
		}
		e.mu.Unlock()
		<-req.done
	}
	if req.err != nil {
		return nil, req.err
	}
	return &Answer{Result: req.res, Device: req.dev.id, Queued: req.started.Sub(req.arrived)}, nil
}

// enqueue puts req where a device will take it.
func (e *Engine) enqueue(req *request) {
	switch e.cfg.Layout {
	case PD:
		e.prefixQ = append(e.prefixQ, req)
	default:
		d := e.route(req.robot)
		req.waiting = d
		d.queue = append(d.queue, req)
		e.met.queue.WithLabelValues(d.label()).Set(float64(len(d.queue)))
	}
	e.cond.Broadcast()
}

// route picks a request's device: its robot's device, else the least-loaded healthy one.
func (e *Engine) route(rb *robot) *device {
	if rb.dev != nil {
		return rb.dev
	}
	var best *device
	for _, d := range e.devs {
		if d.role != roleServe || d.quarantined {
			continue
		}
		if best == nil || len(d.queue)+len(d.job) < len(best.queue)+len(best.job) {
			best = d
		}
	}
	return best
}

// withdraw removes a request that has not started from its queue.
func (e *Engine) withdraw(req *request) {
	drop := func(q []*request) []*request {
		return slices.DeleteFunc(q, func(r *request) bool { return r == req })
	}
	if req.waiting != nil {
		req.waiting.queue = drop(req.waiting.queue)
		e.met.queue.WithLabelValues(req.waiting.label()).Set(float64(len(req.waiting.queue)))
	}
	e.prefixQ = drop(e.prefixQ)
	if i := slices.Index(e.expertQ, req); i >= 0 {
		e.expertQ = slices.Delete(e.expertQ, i, i+1)
		e.releaseSlot(req)
	}
}

// finish answers req once; the robot's request count and last-seen time are updated.
func (e *Engine) finish(req *request, res *pi05.Result, err error) {
	if req.finished {
		return
	}
	req.finished, req.res, req.err = true, res, err
	rb := req.robot
	rb.inFlight--
	rb.done(time.Now())
	if rb.anonymous && rb.inFlight == 0 {
		e.unbind(rb)
	}
	close(req.done)
}

// failAll answers every queued request with err (running ones are answered by their worker, or
// by the watchdog when their device hangs).
func (e *Engine) failAll(err error) {
	for _, d := range e.devs {
		for _, r := range d.queue {
			e.finish(r, nil, err)
		}
		d.queue = nil
		e.met.queue.WithLabelValues(d.label()).Set(0)
	}
	for _, r := range e.prefixQ {
		e.finish(r, nil, err)
	}
	for _, r := range e.expertQ {
		e.finish(r, nil, err)
		e.releaseSlot(r)
	}
	e.prefixQ, e.expertQ = nil, nil
}

// releaseSlot gives a pd request's prefix slot back to its prefix device.
func (e *Engine) releaseSlot(req *request) {
	if req.prefix != nil {
		req.prefix.freeSlots = append(req.prefix.freeSlots, req.slot)
		req.prefix = nil
		e.cond.Broadcast()
	}
}

func (d *device) label() string { return strconv.Itoa(d.id) }

// worker runs d's calls on one locked OS thread, pinned to d.cpus[0] (the pool's other threads
// are pinned by the device itself).
func (e *Engine) worker(d *device) {
	runtime.LockOSThread() // never unlocked: a stuck call keeps its thread, which is abandoned
	if len(d.cpus) > 0 {
		var set unix.CPUSet
		set.Set(d.cpus[0])
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			e.log.Warn("pin device thread", "device", d.id, "cpu", d.cpus[0], "err", err)
		}
	}
	for {
		job := e.next(d)
		if job == nil {
			return
		}
		e.run(d, job)
	}
}

// job is one device call: a batch (serve, expert) or one request's prefix.
type job struct {
	reqs []*request
	slot int // prefix: the slot it fills
	// expert: where each request's prefix is (read under the lock when the job starts)
	from     []Device
	fromSlot []int
}

// next blocks until d has a call to make and marks it running; nil when the engine stops or d is
// quarantined.
func (e *Engine) next(d *device) *job {
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		if e.stopped || d.quarantined {
			return nil
		}
		var j *job
		switch d.role {
		case roleServe:
			j = e.nextBatch(d, &d.queue)
		case roleExpert:
			j = e.nextBatch(d, &e.expertQ)
		case rolePrefix:
			i := slices.IndexFunc(e.prefixQ, func(r *request) bool { return r.pin == nil || r.pin == d })
			if i >= 0 && len(d.freeSlots) > 0 {
				j = &job{reqs: []*request{e.prefixQ[i]}, slot: d.freeSlots[0]}
				e.prefixQ, d.freeSlots = slices.Delete(e.prefixQ, i, i+1), d.freeSlots[1:]
			}
		}
		if j != nil {
			e.start(d, j)
			return j
		}
		e.cond.Wait()
	}
}

// nextBatch takes the next batch from q for d, or nil when d should wait (nothing there, a batch
// window or a lateness wait still open; d's timer wakes it).
func (e *Engine) nextBatch(d *device, q *[]*request) *job {
	if len(*q) == 0 && e.cfg.Steal && d.role == roleServe {
		if r := e.steal(d, time.Now()); r != nil {
			return &job{reqs: []*request{r}}
		}
	}
	if len(*q) == 0 {
		return nil
	}
	now := time.Now()
	n := min(len(*q), e.cfg.MaxBatch)
	if wake := e.waitUntil(d, *q, n, now); wake.After(now) {
		e.wakeAt(d, wake)
		return nil
	}
	j := &job{reqs: slices.Clone((*q)[:n])}
	*q = (*q)[n:]
	if d.role == roleServe {
		e.met.queue.WithLabelValues(d.label()).Set(float64(len(*q)))
	}
	if d.role == roleExpert {
		for _, r := range j.reqs {
			j.from, j.fromSlot = append(j.from, r.prefix.dev), append(j.fromSlot, r.slot)
		}
	}
	return j
}

// waitUntil is when a batch of n (of what waits in q) should start: now, unless the batch window
// or the lateness rule says to wait for company.
func (e *Engine) waitUntil(d *device, q []*request, n int, now time.Time) time.Time {
	if n >= e.cfg.MaxBatch || q[0].internal {
		return now
	}
	wake := now
	if e.cfg.BatchWindow > 0 {
		wake = q[0].arrived.Add(e.cfg.BatchWindow)
	}
	if e.cfg.Join == JoinLateness && d.role == roleServe {
		if t := e.lateness(d, q, n, now); t.After(wake) {
			wake = t
		}
	}
	return wake
}

// wakeAt makes d look again at t.
func (e *Engine) wakeAt(d *device, t time.Time) {
	if d.timer != nil && !d.wakeAt.IsZero() && !d.wakeAt.After(t) && d.wakeAt.After(time.Now()) {
		return // an earlier wake is pending
	}
	if d.timer != nil {
		d.timer.Stop()
	}
	d.wakeAt = t
	d.timer = time.AfterFunc(time.Until(t), func() {
		e.mu.Lock()
		e.cond.Broadcast()
		e.mu.Unlock()
	})
}

// start marks j running on d (the watchdog's clock starts) and counts the call.
func (e *Engine) start(d *device, j *job) {
	now := time.Now()
	d.job, d.jobStart = j.reqs, now
	if e.serving {
		d.calls++
	}
	for _, r := range j.reqs {
		r.waiting, r.started = nil, now
		if d.role != rolePrefix {
			r.dev = d
		}
	}
	e.met.callStarted(d, e.devs, e.serving)
}

// run makes the call of j on d, outside the lock, then hands the results on.
func (e *Engine) run(d *device, j *job) {
	e.mu.Lock()
	serving, call := e.serving, d.calls
	e.mu.Unlock()
	if serving {
		if blocked := e.fault.apply(d.id, call, e.stop); blocked {
			return // the engine stopped while this call was stuck
		}
	}
	start := time.Now()
	var results []*pi05.Result
	var pt pi05.Timing
	var hit bool
	err := guard(func() (err error) {
		if d.role == rolePrefix {
			pt, hit, err = d.dev.Prefix(j.slot, j.reqs[0].in)
		} else {
			results, err = e.batch(d, j)
		}
		return err
	})
	took := time.Since(start)

	e.mu.Lock()
	defer e.mu.Unlock()
	d.job = nil
	e.met.callDone(d, took, len(j.reqs))
	for _, r := range j.reqs {
		r.took = took
	}
	if d.quarantined {
		return // the watchdog answered these requests already
	}
	if !e.serving && took > e.calls.longest {
		e.calls.longest = took
	}
	if d.role == rolePrefix {
		r := j.reqs[0]
		if r.finished || err != nil {
			d.freeSlots = append(d.freeSlots, j.slot)
			if err != nil {
				e.finish(r, nil, fmt.Errorf("prefix on device %d: %w", d.id, err))
			}
		} else {
			r.prefix, r.slot = d, j.slot
			r.timing(pt, hit)
			e.expertQ = append(e.expertQ, r)
		}
		e.cond.Broadcast()
		return
	}
	for i, r := range j.reqs {
		e.releaseSlot(r) // a failed adoption leaves it held
		if err != nil {
			e.finish(r, nil, fmt.Errorf("device %d: %w", d.id, err))
			continue
		}
		res := results[i]
		res.Timing.Vision, res.Timing.Prefix, res.PrefixCacheHit = r.pre.Vision, r.pre.Prefix, r.hit
		if !r.internal {
			e.met.request(d, time.Since(r.arrived))
		}
		e.finish(r, res, nil)
	}
	e.cond.Broadcast()
}

// batch runs a serve or expert call: each request's prefix into slot i (serve) or adopted from its
// prefix device (expert), then one batched EXPERT.
func (e *Engine) batch(d *device, j *job) ([]*pi05.Result, error) {
	slots := make([]int, len(j.reqs))
	ins := make([]*pi05.Prepared, len(j.reqs))
	for i, r := range j.reqs {
		slots[i], ins[i] = i, r.in
		if d.role == roleExpert {
			if err := d.dev.Adopt(i, j.from[i], j.fromSlot[i]); err != nil {
				return nil, err
			}
			e.mu.Lock()
			e.releaseSlot(r) // copied: the prefix device may fill that slot again
			e.mu.Unlock()
			continue
		}
		t, hit, err := d.dev.Prefix(i, r.in)
		if err != nil {
			return nil, err
		}
		r.timing(t, hit)
	}
	return d.dev.Expert(slots, ins, e.cfg.Pack)
}

// timing records a request's VISION and PREFIX times and whether its prefix was cached, for its
// result.
func (r *request) timing(t pi05.Timing, hit bool) { r.pre, r.hit = t, hit }

// guard turns a panic inside a device call into an error for that call's requests: the worker,
// and the server, keep going.
func guard(call func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in a device call: %v\n%s", p, debug.Stack())
		}
	}()
	return call()
}
