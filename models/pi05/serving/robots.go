package serving

import (
	"fmt"
	"math"
	"net/http"
	"time"
)

// robot is one client: a robot_id (or X-Robot-Id, or a websocket connection), or an anonymous
// robot of one request. Guarded by Engine.mu.
type robot struct {
	id        string
	anonymous bool
	admitted  bool    // holds an SLO slot
	dev       *device // bound device (routing robot); nil = routed per request
	inFlight  int
	lastSeen  time.Time     // its last arrival or answer: idle release counts from here
	lastDone  time.Time     // its last answer
	gap       time.Duration // smoothed time from an answer to its next request (lateness join)
}

// done records an answer.
func (rb *robot) done(now time.Time) { rb.lastSeen, rb.lastDone = now, now }

// arrived records a request, learning the robot's think time for the lateness join.
func (rb *robot) arrived(now time.Time) {
	if !rb.lastDone.IsZero() && rb.inFlight == 0 {
		g := now.Sub(rb.lastDone)
		if rb.gap == 0 {
			rb.gap = g
		} else {
			rb.gap = (3*rb.gap + g) / 4
		}
	}
	rb.lastSeen = now
}

// Error is a request the engine did not serve, with the HTTP status and Retry-After a client
// gets (websockets map it to their frames).
type Error struct {
	Status     int
	RetryAfter time.Duration
	Reason     string // capacity, hang, draining, hung, stopped: the 503s' label on /metrics
	Msg        string
}

func (e *Error) Error() string { return e.Msg }

// RetryAfterSeconds is Retry-After as the header's whole seconds (at least 1).
func (e *Error) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(e.RetryAfter.Seconds())))
}

func (e *Engine) unavailable(reason string, retry time.Duration, format string, args ...any) *Error {
	e.met.rejected.WithLabelValues(reason).Inc()
	return &Error{Status: http.StatusServiceUnavailable, RetryAfter: retry, Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// refuse says why no request can be taken now (nil: it can).
func (e *Engine) refuse() error {
	switch {
	case e.stopped:
		return e.unavailable("stopped", e.restartEstimate(), "pi05: the server is shutting down")
	case e.health == "hung":
		return e.unavailable("hung", e.restartEstimate(), "pi05: a device hung (%s); the server exits for a chip reset and restart", e.hangs[0])
	case e.draining:
		return e.unavailable("draining", e.restartEstimate(), "pi05: a device hung (%s); the server is draining before it exits for a chip reset and restart", e.hangs[0])
	}
	return nil
}

// restartEstimate is how long until a restarted server answers: the drain plus this one's start.
func (e *Engine) restartEstimate() time.Duration { return e.cfg.Hang.Drain + e.startup }

// admit finds or creates the robot of a request and binds it when the policy says so; a new robot
// beyond the SLO's capacity is refused.
func (e *Engine) admit(id string, now time.Time) (*robot, error) {
	if id == "" {
		e.anon++
		id = fmt.Sprintf("anonymous-%d", e.anon)
		rb := &robot{id: id, anonymous: true}
		if err := e.bind(rb, now); err != nil {
			return nil, err
		}
		e.robots[id] = rb
		rb.arrived(now)
		return rb, nil
	}
	rb := e.robots[id]
	if rb == nil {
		rb = &robot{id: id}
	}
	if !rb.bound() {
		if err := e.bind(rb, now); err != nil {
			return nil, err
		}
		e.robots[id] = rb
	}
	rb.arrived(now)
	return rb, nil
}

// bound reports whether the robot holds what the policy gives a robot (a slot, a device).
func (rb *robot) bound() bool { return rb.admitted && (rb.dev == nil || !rb.dev.quarantined) }

// bind gives rb a slot: under the SLO with routing robot, a healthy device with a free robot slot
// (the most free first); with routing least, one of the R_max slots; without an SLO, routing robot
// binds to the device with the fewest robots and routing least binds nothing.
func (e *Engine) bind(rb *robot, now time.Time) error {
	rb.dev = nil
	best, err := e.pick(rb, now)
	if err != nil {
		return err
	}
	if e.cfg.Layout == DP && e.cfg.Routing == RouteRobot {
		rb.dev = best
		best.bound++
		e.met.robots.WithLabelValues(rb.dev.label()).Set(float64(rb.dev.bound))
	}
	rb.admitted = true
	return nil
}

// pick is the device bind would give a new robot (nil outside data parallelism), or the 503 of a
// robot beyond capacity; it changes nothing.
func (e *Engine) pick(rb *robot, now time.Time) (*device, error) {
	if e.cfg.Layout != DP {
		return nil, nil
	}
	// the device with the most free SLO slots, or without an SLO the fewest robots
	score := func(d *device) int {
		if e.cfg.SLO.On() {
			return d.capacity - d.bound
		}
		return -d.bound
	}
	var best *device
	for _, d := range e.devs {
		if d.role == roleServe && !d.quarantined && (best == nil || score(d) > score(best)) {
			best = d
		}
	}
	if best == nil {
		return nil, e.unavailable("hang", e.restartEstimate(), "pi05: no healthy device is left")
	}
	switch {
	case e.cfg.SLO.On() && e.cfg.Routing == RouteRobot && best.capacity-best.bound <= 0:
		return nil, e.capacityError(rb, now)
	case e.cfg.SLO.On() && e.cfg.Routing != RouteRobot && e.admittedRobots() >= e.rmax:
		return nil, e.capacityError(rb, now)
	}
	return best, nil
}

// Admits tells, without queuing or binding anything, the 503 a request of robotID would get now
// (stopping, hung, draining, a new robot beyond capacity), or nil. The HTTP routes ask it before
// decoding a large body, so an over-capacity robot's refusal does not wait on its frames; Submit
// decides again when the request is ready.
func (e *Engine) Admits(robotID string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.refuse(); err != nil {
		return err
	}
	if robotID == "" {
		return nil
	}
	if rb := e.robots[robotID]; rb != nil && rb.bound() {
		return nil
	}
	_, err := e.pick(&robot{id: robotID}, time.Now())
	return err
}

func (e *Engine) admittedRobots() int {
	n := 0
	for _, rb := range e.robots {
		if rb.admitted {
			n++
		}
	}
	return n
}

// capacityError is the 503 of a robot beyond R_max: it names the capacity, and Retry-After is
// when the first bound robot could be released for idleness.
func (e *Engine) capacityError(rb *robot, now time.Time) *Error {
	retry := e.cfg.RobotIdle
	for _, o := range e.robots {
		if o.admitted && o.inFlight == 0 {
			retry = min(retry, max(0, o.lastSeen.Add(e.cfg.RobotIdle).Sub(now)))
		}
	}
	who := "robot " + rb.id
	if rb.anonymous {
		who = "an anonymous request (no robot_id / X-Robot-Id)"
	}
	return e.unavailable("capacity", retry,
		"capacity: %d of %d robot slots are taken (R_max %d at PI05_SLO_MS=%g / PI05_SLO_P99_MS=%g on %d healthy devices); %s is not admitted; a robot silent for %s frees its slot",
		e.admittedRobots(), e.rmax, e.rmax, ms(e.cfg.SLO.P50), ms(e.cfg.SLO.P99), e.healthyServe(), who, e.cfg.RobotIdle)
}

func (e *Engine) healthyServe() int {
	n := 0
	for _, d := range e.devs {
		if d.role == roleServe && !d.quarantined {
			n++
		}
	}
	return n
}

// unbind frees rb's slot and forgets it.
func (e *Engine) unbind(rb *robot) {
	if rb.dev != nil {
		rb.dev.bound--
		e.met.robots.WithLabelValues(rb.dev.label()).Set(float64(rb.dev.bound))
		rb.dev = nil
	}
	rb.admitted = false
	delete(e.robots, rb.id)
}

// janitor releases robots silent for PI05_ROBOT_IDLE_S.
func (e *Engine) janitor() {
	e.every(max(10*time.Millisecond, min(time.Second, e.cfg.RobotIdle/4)), func(now time.Time) {
		for _, rb := range e.robots {
			if rb.inFlight == 0 && now.Sub(rb.lastSeen) >= e.cfg.RobotIdle {
				e.unbind(rb)
			}
		}
	})
}

// every runs f under e.mu each period until the engine stops.
func (e *Engine) every(period time.Duration, f func(now time.Time)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			e.mu.Lock()
			f(now)
			e.mu.Unlock()
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
