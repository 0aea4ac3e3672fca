package server

import (
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ttmodel/tt-model/server/console"
)

// minuteWindow keeps the last hour of model requests, a slot per minute,
// for the console's charts (GET /console/stats): p50/p99 per minute and
// where the time went. /metrics has the same requests as cumulative
// histograms; per-minute percentiles need the minute's own latencies.
type minuteWindow struct {
	mu     sync.Mutex
	slots  [windowMinutes]minuteSlot // by unix minute modulo windowMinutes
	total  int64
	byCode map[int]int64
	stages []string // stage names in the order they were first reported
}

const (
	windowMinutes = 60
	// maxMinuteSamples bounds a minute's memory (80 KB): beyond it the
	// minute's percentiles come from its first requests (marked sampled).
	maxMinuteSamples = 10000
)

type minuteSlot struct {
	start     time.Time // the minute held; zero: never used
	requests  int
	errors    int
	latencies []float64 // ms
	stageSum  map[string]float64
	stageN    map[string]int
}

func newMinuteWindow() *minuteWindow { return &minuteWindow{byCode: map[int]int64{}} }

// slot is now's minute, emptied when it last held an older one. The caller
// holds mu.
func (w *minuteWindow) slot(now time.Time) *minuteSlot {
	m := now.Truncate(time.Minute)
	s := &w.slots[(m.Unix()/60)%windowMinutes]
	if !s.start.Equal(m) {
		*s = minuteSlot{start: m, latencies: s.latencies[:0]}
	}
	return s
}

// request records one model request answered at now.
func (w *minuteWindow) request(now time.Time, d time.Duration, code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.total++
	w.byCode[code]++
	s := w.slot(now)
	s.requests++
	if code >= 400 {
		s.errors++
	}
	if len(s.latencies) < maxMinuteSamples {
		s.latencies = append(s.latencies, float64(d.Microseconds())/1000)
	}
}

// stage records one stage time reported at now.
func (w *minuteWindow) stage(now time.Time, name string, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.Contains(w.stages, name) {
		w.stages = append(w.stages, name)
	}
	s := w.slot(now)
	if s.stageSum == nil {
		s.stageSum, s.stageN = map[string]float64{}, map[string]int{}
	}
	s.stageSum[name] += float64(d.Microseconds()) / 1000
	s.stageN[name]++
}

// snapshot is the counts and the minutes from the later of started and an
// hour ago up to now's, oldest first.
func (w *minuteWindow) snapshot(now, started time.Time) (console.Requests, []string, []console.Minute) {
	w.mu.Lock()
	defer w.mu.Unlock()
	req := console.Requests{Total: w.total, ByCode: map[string]int64{}}
	for code, n := range w.byCode {
		req.ByCode[strconv.Itoa(code)] = n
	}
	last := now.Truncate(time.Minute)
	first := last.Add(-(windowMinutes - 1) * time.Minute)
	if st := started.Truncate(time.Minute); st.After(first) {
		first = st
	}
	var minutes []console.Minute
	for m := first; !m.After(last); m = m.Add(time.Minute) {
		out := console.Minute{Start: m, StagesMS: map[string]float64{}}
		s := &w.slots[(m.Unix()/60)%windowMinutes]
		if s.start.Equal(m) {
			out.Requests, out.Errors, out.Sampled = s.requests, s.errors, s.requests > len(s.latencies)
			out.P50MS, out.P99MS = percentile(s.latencies, 0.50), percentile(s.latencies, 0.99)
			for name, sum := range s.stageSum {
				out.StagesMS[name] = sum / float64(s.stageN[name])
			}
		}
		minutes = append(minutes, out)
	}
	return req, append([]string{}, w.stages...), minutes
}

// percentile is the nearest-rank q-quantile of v (nil for none).
func percentile(v []float64, q float64) *float64 {
	if len(v) == 0 {
		return nil
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	r := s[max(0, min(i, len(s)-1))]
	return &r
}
