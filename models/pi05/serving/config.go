// Package serving is the pi0.5 serving engine: N CPU devices sharing one copy of the weights, the
// layouts sp / dp / pd, the multi-robot scheduler (routing, batching, the SLO policy with its
// calibration, admission and binding) and the hang watchdog. A device here plays the role of one
// chip of the seed package; the policy a robot sees (latencies, 503s, /health, exit codes) is the
// seed's, only the cycle times are the CPU's. It is free of cgo: devices come in through the
// Device interface (a *pi05.Device, or a fake whose cycle time a test sets).
package serving

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttmodel/tt-model/internal/envvar"
	"github.com/ttmodel/tt-model/internal/hangmarker"
)

// Layout is how the devices share the work (PI05_LAYOUT).
type Layout string

// The layouts.
const (
	// SP is the single-robot layout: one device holding every thread, requests in arrival order.
	SP Layout = "sp"
	// DP is data parallel: every device runs the whole model for its own robots and batches their
	// EXPERT steps.
	DP Layout = "dp"
	// PD is disaggregated: prefix devices run VISION+PREFIX and hand each request's K/V to one
	// expert device that batches EXPERTs.
	PD Layout = "pd"
)

// Routing chooses a request's device (PI05_ROUTING).
type Routing string

// The routings.
const (
	RouteRobot Routing = "robot" // bind each robot to a device at its first request
	RouteLeast Routing = "least" // every request to the least-loaded device
)

// Join is the batch join rule (PI05_JOIN).
type Join string

// The join rules.
const (
	JoinWork     Join = "work"     // a free device starts a batch with everything waiting
	JoinLateness Join = "lateness" // it waits for bound robots expected within their deadline
)

// HangAction is what dp does after a quarantine (PI05_HANG_ACTION).
type HangAction string

// The hang actions.
const (
	HangDegrade HangAction = "degrade"
	HangExit    HangAction = "exit"
)

// SLO is the latency target of the multi-robot policy; the zero value means no SLO.
type SLO struct {
	P50, P99   time.Duration // PI05_SLO_MS, PI05_SLO_P99_MS (default P50)
	Margin     time.Duration // PI05_SLO_MARGIN_MS (5 ms): p99 margin over the calibrated cycle
	ClockGuard float64       // PI05_SLO_CLOCK_GUARD (1): factor on every device's calibrated cycle
	// Guards are per-device factors (PI05_MR_GUARD "<device>:<factor>,..."), on top of ClockGuard.
	Guards map[int]float64
	// Host is the per-request host time added to the predictions (PI05_SLO_HOST_MS); HostSet false
	// means it is measured at start.
	Host    time.Duration
	HostSet bool
}

// On reports whether an SLO is set.
func (s SLO) On() bool { return s.P50 > 0 }

// Hang configures the watchdog.
type Hang struct {
	After    time.Duration // PI05_HANG_S (10 s); 0 = off
	Action   HangAction    // PI05_HANG_ACTION (degrade)
	Drain    time.Duration // PI05_HANG_DRAIN_S (5 s)
	ExitCode int           // PI05_HANG_EXIT_CODE (75)
	Marker   string        // PI05_HANG_MARKER (~/.cache/pi05/hang_marker)
}

// Config is the engine's configuration, read from the environment by FromEnv.
type Config struct {
	Layout  Layout
	Devices int // devices the engine runs (sp: 1)
	// Threads is each device's pool; CPUs, when not nil, pins device i to CPUs[i].
	Threads       int
	CPUs          [][]int
	PrefixDevices int // pd: devices running VISION+PREFIX (the last device runs EXPERT)
	MaxBatch      int // requests per batched EXPERT
	BatchWindow   time.Duration
	SLO           SLO
	Routing       Routing
	RobotIdle     time.Duration
	Join          Join
	Steal         bool
	Pack          bool   // PI05_EXPERT_PACK != 0: the EXPERT GEMMs of a batch are shared
	PackSetting   string // the variable's value, for /info
	HTTPThreads   int    // concurrent requests being decoded, prepared or run
	Hang          Hang
	// ChipOnly holds the variables that describe chip programs (PI05_MC_LOOP, …) with their
	// values: accepted, recorded on /info, and without effect on the CPU.
	ChipOnly map[string]string
	// Notices are said at start: settings without effect here and what this build does instead.
	Notices []string
	// Info is said at start as information: the chips' program settings a package carries
	// (ChipOnly), which are no mistake.
	Info []string
}

// Env is what FromEnv reads: a variable lookup and the machine's CPUs.
type Env struct {
	Getenv func(string) string
	// CPUs are the CPUs this process may run on (its affinity mask).
	CPUs []int
	// ActionRows is the preset's action rows (32 or 64), which sets the SLO's default batch cap.
	ActionRows int
}

// The seed's chip-program variables and the values it documents.
var chipOnly = map[string]func(string) bool{
	"PI05_MEGAKERNEL":   func(v string) bool { return v == "mc" },
	"PI05_MC_LOOP":      func(v string) bool { return v == "v2" || v == "v1" },
	"PI05_SP_PLACEMENT": func(v string) bool { return v == "auto" || v == "legacy" },
	"PI05_SP_HOT":       func(v string) bool { return v == "none" || listRe.MatchString(v) },
	"PI05_PE_DEFINES":   func(v string) bool { return definesRe.MatchString(v) },
}

var (
	listRe    = regexp.MustCompile(`^[A-Za-z0-9:._-]+(,[A-Za-z0-9:._-]+)*$`)
	definesRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=[^,]*(,[A-Za-z_][A-Za-z0-9_]*=[^,]*)*$`)
	meshRe    = regexp.MustCompile(`^([1-9][0-9]*)x([1-9][0-9]*)$`)
)

// MaxDevices bounds the devices of TT_MESH_SHAPE and TT_CPU_DEVICES.
const MaxDevices = 64

// FromEnv reads and checks every engine variable; each bad value is reported with its name.
func FromEnv(env Env) (Config, error) {
	r := envvar.New(env.Getenv)
	var c Config

	// Devices: TT_CPU_DEVICES, else the chips of TT_MESH_SHAPE.
	devices := 1
	if v := r.Get("TT_MESH_SHAPE"); v != "" {
		m := meshRe.FindStringSubmatch(v)
		var rows, cols int
		var err error
		if m != nil {
			if rows, err = strconv.Atoi(m[1]); err == nil {
				cols, err = strconv.Atoi(m[2])
			}
		}
		// Each side is bounded before the product, which could wrap.
		if m == nil || err != nil || rows > MaxDevices || cols > MaxDevices || rows*cols > MaxDevices {
			r.Bad("TT_MESH_SHAPE=%q: want ROWSxCOLS of 1 to %d devices in all, e.g. 1x1 or 1x4", v, MaxDevices)
		} else {
			devices = rows * cols
		}
	}
	if v := r.Get("TT_CPU_DEVICES"); v != "" {
		devices = r.Int("TT_CPU_DEVICES", 1, 1, MaxDevices)
	}
	devices = max(devices, 1)

	c.Layout = Layout(r.Choice("PI05_LAYOUT", string(DP), string(SP), string(DP), string(PD)))
	switch c.Layout {
	case SP:
		if devices > 1 {
			c.Notices = append(c.Notices, fmt.Sprintf("PI05_LAYOUT=sp: the %d devices of the mesh run as one device holding every thread (the single-robot mesh)", devices))
		}
		devices = 1
	case PD:
		if devices < 2 {
			r.Bad("PI05_LAYOUT=pd needs at least 2 devices (TT_MESH_SHAPE or TT_CPU_DEVICES): prefix devices and one expert device")
		}
	}
	c.Devices = devices

	// Threads: TT_NUM_THREADS (default every CPU) split between the devices, at least 1 each;
	// devices are pinned to their share of the CPUs when every device gets CPUs of its own.
	total := len(env.CPUs)
	if v := r.Get("TT_NUM_THREADS"); v != "" {
		total = r.Int("TT_NUM_THREADS", total, 1, 1024)
	}
	c.Threads = max(total/devices, 1)
	if devices*c.Threads > len(env.CPUs) {
		c.Notices = append(c.Notices, fmt.Sprintf("%d devices x %d threads outnumber the %d CPUs this process may use: devices share cores and are not pinned", devices, c.Threads, len(env.CPUs)))
	} else if devices > 1 {
		for i := range devices {
			c.CPUs = append(c.CPUs, env.CPUs[i*c.Threads:(i+1)*c.Threads])
		}
	}

	c.PrefixDevices = devices - 1
	if r.Get("PI05_PREFIX_CHIPS") != "" {
		if c.Layout != PD {
			c.Notices = append(c.Notices, "PI05_PREFIX_CHIPS has no effect outside PI05_LAYOUT=pd")
		} else {
			c.PrefixDevices = r.Int("PI05_PREFIX_CHIPS", devices-1, 1, max(devices-1, 1))
			if c.PrefixDevices != devices-1 {
				c.Notices = append(c.Notices, fmt.Sprintf("PI05_PREFIX_CHIPS=%d: %d of the %d devices stay idle (one expert device)", c.PrefixDevices, devices-1-c.PrefixDevices, devices))
			}
		}
	}

	// The SLO: dp's policy. In sp and pd (which have no admission control, as on chips) the SLO's
	// settings are named as without effect rather than ignored in silence: a user who sets them for
	// another layout (docker run -e, a unit's drop-in) learns that they do nothing there.
	sloVars := []string{"PI05_SLO_MS", "PI05_SLO_P99_MS", "PI05_SLO_MARGIN_MS", "PI05_SLO_CLOCK_GUARD", "PI05_SLO_HOST_MS", "PI05_MR_GUARD",
		"PI05_ROUTING", "PI05_JOIN", "PI05_STEAL"}
	if c.Layout != DP {
		for _, v := range sloVars {
			if r.Get(v) != "" {
				c.Notices = append(c.Notices, fmt.Sprintf("%s=%s has no effect with PI05_LAYOUT=%s: robot binding and the SLO are dp's", v, r.Get(v), c.Layout))
			}
		}
	} else if r.Get("PI05_SLO_MS") != "" {
		c.SLO.P50 = r.Millis("PI05_SLO_MS", 0, 1)
		c.SLO.P99 = r.Millis("PI05_SLO_P99_MS", c.SLO.P50, c.SLO.P50)
		c.SLO.Margin = r.Millis("PI05_SLO_MARGIN_MS", 5*time.Millisecond, 0)
		c.SLO.ClockGuard = r.Float("PI05_SLO_CLOCK_GUARD", 1, 1)
		if r.Get("PI05_SLO_HOST_MS") != "" {
			c.SLO.Host, c.SLO.HostSet = r.Millis("PI05_SLO_HOST_MS", 0, 0), true
		}
		c.SLO.Guards = guards(r, devices)
	} else {
		for _, v := range sloVars[1:6] {
			if r.Get(v) != "" {
				c.Notices = append(c.Notices, v+" has no effect without PI05_SLO_MS")
			}
		}
	}

	// Batching.
	defBatch := 1
	switch {
	case c.Layout == PD:
		defBatch = 4
	case c.SLO.On() && env.ActionRows <= 32:
		defBatch = 8
	case c.SLO.On():
		defBatch = 4
	}
	c.MaxBatch = r.Int("PI05_MAX_BATCH", defBatch, 1, 8)
	if c.Layout == SP && c.MaxBatch > 1 {
		c.Notices = append(c.Notices, fmt.Sprintf("PI05_MAX_BATCH=%d has no effect with PI05_LAYOUT=sp: one request at a time", c.MaxBatch))
		c.MaxBatch = 1
	}
	c.BatchWindow = r.Millis("PI05_BATCH_WINDOW_MS", 4*time.Millisecond, 0)
	c.PackSetting = r.Choice("PI05_EXPERT_PACK", "auto", "auto", "0", "1")
	c.Pack = c.PackSetting != "0"

	defRouting := RouteLeast
	if c.SLO.On() {
		defRouting = RouteRobot
	}
	c.Routing = Routing(r.Choice("PI05_ROUTING", string(defRouting), string(RouteRobot), string(RouteLeast)))
	c.RobotIdle = r.Seconds("PI05_ROBOT_IDLE_S", 5*time.Second, time.Millisecond)
	c.Join = Join(r.Choice("PI05_JOIN", string(JoinWork), string(JoinWork), string(JoinLateness)))
	c.Steal = r.Choice("PI05_STEAL", "0", "0", "1") == "1"
	if c.Layout != DP { // named above; sp and pd run one queue
		c.Routing, c.Join, c.Steal = RouteLeast, JoinWork, false
	}
	if c.Join == JoinLateness && !c.SLO.On() {
		r.Bad("PI05_JOIN=lateness needs PI05_SLO_MS (it waits for robots expected within their deadline)")
	}
	if c.Steal && !c.SLO.On() {
		r.Bad("PI05_STEAL=1 needs PI05_SLO_MS (it moves requests that would miss their deadline)")
	}
	c.HTTPThreads = r.Int("PI05_HTTP_THREADS", 128, 1, 100000)

	// The watchdog.
	c.Hang.After = r.Seconds("PI05_HANG_S", 10*time.Second, 0)
	if c.Hang.After > 0 && c.Hang.After <= c.BatchWindow+2*time.Second {
		r.Bad("PI05_HANG_S=%s must exceed PI05_BATCH_WINDOW_MS + 2 s (%s)", r.Get("PI05_HANG_S"), c.BatchWindow+2*time.Second)
	}
	c.Hang.Action = HangAction(r.Choice("PI05_HANG_ACTION", string(HangDegrade), string(HangDegrade), string(HangExit)))
	c.Hang.Drain = r.Seconds("PI05_HANG_DRAIN_S", 5*time.Second, 0)
	c.Hang.ExitCode = r.Int("PI05_HANG_EXIT_CODE", 75, 1, 255)
	c.Hang.Marker = hangmarker.Default(r.Get)
	if c.Layout != DP && r.Get("PI05_HANG_ACTION") != "" {
		c.Notices = append(c.Notices, fmt.Sprintf("PI05_HANG_ACTION has no effect with PI05_LAYOUT=%s: a hang always exits", c.Layout))
	}

	// Variables of the chip programs: the seed's values are accepted and recorded.
	c.ChipOnly = map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(chipOnly)) {
		v := r.Get(name)
		if v == "" {
			continue
		}
		if !chipOnly[name](v) {
			r.Bad("%s=%q is not a value the seed documents", name, v)
			continue
		}
		c.ChipOnly[name] = v
		c.Info = append(c.Info, fmt.Sprintf("%s=%s describes the chips' programs: recorded on /info, no effect on CPU execution", name, v))
	}
	return c, r.Err()
}

// guards reads PI05_MR_GUARD: unset or "none", or "<device>:<factor>,..." with CPU device indices
// (the seed names chips by asic id or PCI address, which a CPU device does not have).
func guards(r *envvar.Reader, devices int) map[int]float64 {
	v := r.Get("PI05_MR_GUARD")
	out := map[int]float64{}
	switch v {
	case "", "none":
		return out
	case "hot":
		r.Bad("PI05_MR_GUARD=hot needs the chips' thermal rank, which CPU devices do not have: give <device>:<factor>,... (devices 0..%d)", devices-1)
		return out
	}
	for _, part := range strings.Split(v, ",") {
		id, f, ok := strings.Cut(part, ":")
		d, err1 := strconv.Atoi(id)
		g, err2 := strconv.ParseFloat(f, 64)
		if !ok || err1 != nil || err2 != nil || d < 0 || d >= devices || !(g >= 1) || math.IsInf(g, 0) { // !(g >= 1): NaN too
			r.Bad("PI05_MR_GUARD=%q: %q is not <device 0..%d>:<factor >= 1>", v, part, devices-1)
			continue
		}
		out[d] = g
	}
	return out
}

// DeviceShape is what device i of the layout needs: used false for a device the layout leaves
// idle (pd beyond PI05_PREFIX_CHIPS); maxBatch is its batched EXPERT's size (1 for a prefix
// device) and slots the requests it holds between PREFIX and EXPERT.
func (c Config) DeviceShape(i int) (used bool, maxBatch, slots int) {
	switch roleOf(c, i) {
	case rolePrefix:
		return true, 1, c.MaxBatch
	case roleIdle:
		return false, 0, 0
	}
	return true, c.MaxBatch, c.MaxBatch
}

// roleOf is device i's role in c's layout: pd runs VISION+PREFIX on devices 0..PrefixDevices-1
// and the batched EXPERT on the last one.
func roleOf(c Config, i int) role {
	switch {
	case c.Layout != PD:
		return roleServe
	case i == c.Devices-1:
		return roleExpert
	case i < c.PrefixDevices:
		return rolePrefix
	}
	return roleIdle
}

// Variables are the environment variables FromEnv reads.
var Variables = []string{
	"TT_MESH_SHAPE", "TT_CPU_DEVICES", "TT_NUM_THREADS",
	"PI05_LAYOUT", "PI05_PREFIX_CHIPS", "PI05_MAX_BATCH", "PI05_BATCH_WINDOW_MS", "PI05_EXPERT_PACK",
	"PI05_SLO_MS", "PI05_SLO_P99_MS", "PI05_SLO_MARGIN_MS", "PI05_SLO_CLOCK_GUARD", "PI05_SLO_HOST_MS", "PI05_MR_GUARD",
	"PI05_ROUTING", "PI05_ROBOT_IDLE_S", "PI05_JOIN", "PI05_STEAL", "PI05_HTTP_THREADS",
	"PI05_HANG_S", "PI05_HANG_ACTION", "PI05_HANG_DRAIN_S", "PI05_HANG_EXIT_CODE", "PI05_HANG_MARKER",
	"PI05_MEGAKERNEL", "PI05_MC_LOOP", "PI05_SP_PLACEMENT", "PI05_SP_HOT", "PI05_PE_DEFINES",
}
