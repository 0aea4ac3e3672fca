package pi05

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttmodel/tt-model/models/pi05"
)

// Collectors are pi0.5's own /metrics series: the serving engine's per device (once loaded), the
// prefix cache (PI05_PREFIX_CACHE_MB; all zero when off) and the open websockets, read at scrape
// time.
func (m *Model) Collectors() []prometheus.Collector {
	labels := prometheus.Labels{"model": m.srv.HFModel}
	stats := func() pi05.PrefixCacheStats {
		if p, _ := m.current(); p != nil && p.Cache != nil {
			return p.Cache.Stats()
		}
		return pi05.PrefixCacheStats{}
	}
	counter := func(name, help string, v func(pi05.PrefixCacheStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(v(stats())) })
	}
	gauge := func(name, help string, v func(pi05.PrefixCacheStats) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(v(stats())) })
	}
	out := []prometheus.Collector{
		counter("tt_model_pi05_prefix_cache_hits_total", "Requests whose prefix K/V came from the prefix cache (VISION and PREFIX skipped).",
			func(s pi05.PrefixCacheStats) uint64 { return s.Hits }),
		counter("tt_model_pi05_prefix_cache_misses_total", "Requests that looked the prefix cache up and computed their prefix.",
			func(s pi05.PrefixCacheStats) uint64 { return s.Misses }),
		counter("tt_model_pi05_prefix_cache_evictions_total", "Prefixes dropped to stay within PI05_PREFIX_CACHE_MB.",
			func(s pi05.PrefixCacheStats) uint64 { return s.Evictions }),
		gauge("tt_model_pi05_prefix_cache_entries", "Prefixes held by the prefix cache.",
			func(s pi05.PrefixCacheStats) int64 { return int64(s.Entries) }),
		gauge("tt_model_pi05_prefix_cache_bytes", "Bytes held by the prefix cache.",
			func(s pi05.PrefixCacheStats) int64 { return s.Bytes }),
	}
	out = append(out, engineCollector{m})
	for _, proto := range []string{"realtime", "openpi"} {
		open := m.ws.counter(proto)
		out = append(out, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tt_model_websocket_connections", Help: "Open websocket connections by protocol.",
			ConstLabels: prometheus.Labels{"model": m.srv.HFModel, "protocol": proto},
		}, func() float64 { return float64(open.Load()) }))
	}
	return out
}

// engineCollector hands on the serving engine's series once Load has made the engine. It describes
// nothing up front (an unchecked collector): the devices are only known after loading.
type engineCollector struct{ m *Model }

func (engineCollector) Describe(chan<- *prometheus.Desc) {}

func (c engineCollector) Collect(ch chan<- prometheus.Metric) {
	if e := c.m.running(); e != nil {
		for _, col := range e.Collectors() {
			col.Collect(ch)
		}
	}
}
