package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus series, on a registry of its own (no
// global state: two servers in one test process do not collide).
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec   // by route and status code
	latency  *prometheus.HistogramVec // request seconds by route
	stages   *prometheus.HistogramVec // handler-reported stage seconds
	ready    prometheus.Gauge
	loadSecs prometheus.Gauge
	// disconnects counts requests whose client went away before the answer
	// (labelled 499 in requests, never 500).
	disconnects *prometheus.CounterVec
	// window is the last hour per minute, for the console.
	window *minuteWindow
}

func newMetrics(model string) *metrics {
	labels := prometheus.Labels{"model": model}
	m := &metrics{
		window:   newMinuteWindow(),
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tt_model_http_requests_total", Help: "HTTP requests by route and status code.", ConstLabels: labels,
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tt_model_http_request_duration_seconds", Help: "Request wall time, queueing included.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"route"}),
		stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tt_model_stage_duration_seconds", Help: "Time per request stage (decode, preprocess, inference, postprocess).", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"stage"}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tt_model_ready", Help: "1 once weights are loaded and warmed up.", ConstLabels: labels,
		}),
		loadSecs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tt_model_load_seconds", Help: "Seconds spent loading and warming up the model.", ConstLabels: labels,
		}),
		disconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tt_model_client_disconnects_total", Help: "Requests whose client went away before its answer (counted as code 499).", ConstLabels: labels,
		}, []string{"route"}),
	}
	m.registry.MustRegister(m.requests, m.latency, m.stages, m.ready, m.loadSecs, m.disconnects,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// stageRecorder feeds a handler's stage timings to the histogram and to the
// console's window.
type stageRecorder struct{ m *metrics }

func (r stageRecorder) Stage(name string, d time.Duration) {
	r.m.stages.WithLabelValues(name).Observe(d.Seconds())
	r.m.window.stage(time.Now(), name, d)
}
