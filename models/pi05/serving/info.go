package serving

import (
	"sort"
	"strconv"
	"time"
)

// Info is the engine's part of /info: the layout, the devices and megakernel.slo.
type Info struct {
	Layout      Layout            `json:"layout"`
	Health      string            `json:"health"`
	Devices     []DeviceInfo      `json:"devices"`
	MaxBatch    int               `json:"max_batch"`
	BatchWindow float64           `json:"batch_window_ms"`
	ExpertPack  string            `json:"expert_pack"`
	HTTPThreads int               `json:"http_threads"`
	SLO         SLOInfo           `json:"slo"`
	Watchdog    WatchdogInfo      `json:"watchdog"`
	ChipOnly    map[string]string `json:"chip_program_settings,omitempty"`
}

// DeviceInfo is one device.
type DeviceInfo struct {
	ID          int                `json:"id"`
	Role        string             `json:"role"`
	State       string             `json:"state"` // ok, quarantined
	CPUs        []int              `json:"cpus,omitempty"`
	Queue       int                `json:"queue"`
	Busy        bool               `json:"busy"`
	Calls       int                `json:"serving_calls"`
	Robots      int                `json:"robots"`
	RobotsMax   *int               `json:"robots_max,omitempty"`
	CyclesMS    map[string]float64 `json:"calibrated_cycle_ms,omitempty"` // batch size -> c(b)
	PredictedMS map[string]float64 `json:"predicted_cycle_ms,omitempty"`  // with the guards
	Guard       float64            `json:"guard,omitempty"`
}

// SLOInfo is megakernel.slo.
type SLOInfo struct {
	Enabled   bool                 `json:"enabled"`
	P50MS     float64              `json:"slo_ms,omitempty"`
	P99MS     float64              `json:"slo_p99_ms,omitempty"`
	MarginMS  float64              `json:"margin_ms,omitempty"`
	Clock     float64              `json:"clock_guard,omitempty"`
	HostMS    float64              `json:"host_ms,omitempty"`
	HostFrom  string               `json:"host_ms_from,omitempty"` // PI05_SLO_HOST_MS or measured
	RMax      int                  `json:"r_max"`
	Routing   Routing              `json:"routing"`
	Join      Join                 `json:"join"`
	Steal     bool                 `json:"steal"`
	IdleS     float64              `json:"robot_idle_s"`
	Robots    map[string]RobotInfo `json:"robots"`
	Predicted []Prediction         `json:"predicted,omitempty"` // per device and robot count
}

// RobotInfo is one known robot.
type RobotInfo struct {
	Device   *int    `json:"device"` // nil: routed per request
	InFlight int     `json:"in_flight"`
	IdleS    float64 `json:"idle_s"`
}

// Prediction is a device's predicted latency with r robots.
type Prediction struct {
	Device int     `json:"device"`
	Robots int     `json:"robots"`
	P50MS  float64 `json:"p50_ms"`
	P99MS  float64 `json:"p99_ms"`
}

// WatchdogInfo is the hang watchdog's settings and what it saw.
type WatchdogInfo struct {
	HangS    float64  `json:"hang_s"`
	Action   string   `json:"action"`
	DrainS   float64  `json:"drain_s"`
	ExitCode int      `json:"exit_code"`
	Marker   string   `json:"marker"`
	Hangs    []string `json:"hangs"`
}

// Info snapshots the engine.
func (e *Engine) Info() Info {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.cfg
	in := Info{Layout: c.Layout, Health: e.health, MaxBatch: c.MaxBatch, BatchWindow: ms(c.BatchWindow),
		ExpertPack: c.PackSetting, HTTPThreads: c.HTTPThreads, ChipOnly: c.ChipOnly,
		Watchdog: WatchdogInfo{HangS: c.Hang.After.Seconds(), Action: string(c.Hang.Action), DrainS: c.Hang.Drain.Seconds(),
			ExitCode: c.Hang.ExitCode, Marker: c.Hang.Marker, Hangs: append([]string{}, e.hangs...)},
		SLO: SLOInfo{Enabled: c.SLO.On(), RMax: e.rmax, Routing: c.Routing, Join: c.Join, Steal: c.Steal,
			IdleS: c.RobotIdle.Seconds(), Robots: map[string]RobotInfo{}}}
	if c.SLO.On() {
		in.SLO.P50MS, in.SLO.P99MS, in.SLO.MarginMS, in.SLO.Clock = ms(c.SLO.P50), ms(c.SLO.P99), ms(c.SLO.Margin), c.SLO.ClockGuard
		in.SLO.HostMS, in.SLO.HostFrom = ms(e.host), "measured"
		if c.SLO.HostSet {
			in.SLO.HostFrom = "PI05_SLO_HOST_MS"
		}
	}
	now := time.Now()
	for _, d := range e.devs {
		di := DeviceInfo{ID: d.id, Role: d.role.String(), State: "ok", CPUs: d.cpus, Queue: len(d.queue), Busy: d.busy(),
			Calls: d.calls, Robots: d.bound}
		if d.quarantined {
			di.State = "quarantined"
		}
		if c.SLO.On() && d.role == roleServe {
			r := d.capacity
			di.RobotsMax, di.Guard = &r, c.SLO.ClockGuard*d.guard
			di.CyclesMS, di.PredictedMS = map[string]float64{}, map[string]float64{}
			for b := range d.cycle {
				di.CyclesMS[strconv.Itoa(b+1)] = ms(d.cycle[b])
				di.PredictedMS[strconv.Itoa(b+1)] = ms(e.cyc(d, b+1))
				p50, p99 := e.predict(d, b+1)
				in.SLO.Predicted = append(in.SLO.Predicted, Prediction{Device: d.id, Robots: b + 1, P50MS: ms(p50), P99MS: ms(p99)})
			}
		}
		in.Devices = append(in.Devices, di)
	}
	ids := make([]string, 0, len(e.robots))
	for id := range e.robots {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		rb := e.robots[id]
		ri := RobotInfo{InFlight: rb.inFlight, IdleS: now.Sub(rb.lastSeen).Seconds()}
		if rb.dev != nil {
			dev := rb.dev.id
			ri.Device = &dev
		}
		in.SLO.Robots[id] = ri
	}
	return in
}
