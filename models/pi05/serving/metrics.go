package serving

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the engine's series, per device where it matters; the server registers them
// (Collectors) on its own registry.
type metrics struct {
	queue     *prometheus.GaugeVec     // requests waiting, by device
	busy      *prometheus.GaugeVec     // 1 while the device is in a call
	state     *prometheus.GaugeVec     // 0 healthy, 1 quarantined
	robots    *prometheus.GaugeVec     // robots bound, by device
	capacity  *prometheus.GaugeVec     // robots the device holds under the SLO
	batch     *prometheus.HistogramVec // requests per call, by device
	call      *prometheus.HistogramVec // device call seconds, by device
	latency   *prometheus.HistogramVec // request seconds from arrival to answer, by device
	rejected  *prometheus.CounterVec   // 503s by reason
	stolen    *prometheus.CounterVec   // requests taken by an idle device, by that device
	hangs     prometheus.Counter
	busyPeak  prometheus.Gauge // most devices in a call at the same time since start
	peak, now int
}

func newMetrics(devices int) *metrics {
	dev := []string{"device"}
	m := &metrics{
		queue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tt_model_pi05_device_queue",
			Help: "Requests waiting for a device."}, dev),
		busy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tt_model_pi05_device_busy",
			Help: "1 while the device is in a call."}, dev),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tt_model_pi05_device_quarantined",
			Help: "1 once the watchdog quarantined the device after a hang."}, dev),
		robots: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tt_model_pi05_device_robots",
			Help: "Robots bound to the device."}, dev),
		capacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tt_model_pi05_device_robot_capacity",
			Help: "Robots the device holds within the SLO (calibrated at start)."}, dev),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tt_model_pi05_device_batch_size",
			Help: "Requests per device call.", Buckets: prometheus.LinearBuckets(1, 1, 8)}, dev),
		call: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tt_model_pi05_device_call_seconds",
			Help: "Device call time (a batch, a prefix or a batched expert).", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, dev),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tt_model_pi05_request_seconds",
			Help: "Request time from its arrival at the scheduler to its answer, by the device that ran it.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, dev),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tt_model_pi05_rejected_total",
			Help: "Requests answered 503 by the scheduler, by reason (capacity, hang, hung, draining, stopped)."}, []string{"reason"}),
		stolen: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tt_model_pi05_stolen_total",
			Help: "Requests an idle device took from another's queue (PI05_STEAL=1)."}, dev),
		hangs: prometheus.NewCounter(prometheus.CounterOpts{Name: "tt_model_pi05_hangs_total",
			Help: "Device calls the watchdog declared hung."}),
		busyPeak: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tt_model_pi05_devices_busy_peak",
			Help: "The most devices in a call at the same time since start."}),
	}
	for i := range devices {
		l := strconv.Itoa(i)
		for _, g := range []*prometheus.GaugeVec{m.queue, m.busy, m.state, m.robots, m.capacity} {
			g.WithLabelValues(l).Set(0)
		}
	}
	for _, r := range []string{"capacity", "hang", "hung", "draining", "stopped"} {
		m.rejected.WithLabelValues(r)
	}
	return m
}

// Collectors are the engine's series, for the server's registry.
func (e *Engine) Collectors() []prometheus.Collector {
	m := e.met
	return []prometheus.Collector{m.queue, m.busy, m.state, m.robots, m.capacity, m.batch, m.call, m.latency,
		m.rejected, m.stolen, m.hangs, m.busyPeak}
}

// callStarted counts a device entering a call (under Engine.mu); the busy peak counts serving
// calls only (calibration keeps every device busy at once).
func (m *metrics) callStarted(d *device, devs []*device, serving bool) {
	m.busy.WithLabelValues(d.label()).Set(1)
	if !serving {
		return
	}
	m.now = 0
	for _, x := range devs {
		if x.busy() && !x.quarantined {
			m.now++
		}
	}
	if m.now > m.peak {
		m.peak = m.now
		m.busyPeak.Set(float64(m.peak))
	}
}

// callDone counts a device leaving a call of n requests (under Engine.mu).
func (m *metrics) callDone(d *device, took time.Duration, n int) {
	m.busy.WithLabelValues(d.label()).Set(0)
	m.batch.WithLabelValues(d.label()).Observe(float64(n))
	m.call.WithLabelValues(d.label()).Observe(took.Seconds())
}

func (m *metrics) request(d *device, took time.Duration) {
	m.latency.WithLabelValues(d.label()).Observe(took.Seconds())
}
