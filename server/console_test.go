package server

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
)

// The window keeps an hour: a slot is reused for the same minute an hour
// later, percentiles are nearest-rank, and a minute over the sample bound
// says its percentiles are sampled.
func TestMinuteWindow(t *testing.T) {
	w := newMinuteWindow()
	t0 := time.Date(2026, 1, 1, 12, 0, 30, 0, time.UTC)
	for i := 1; i <= 100; i++ {
		w.request(t0, time.Duration(i)*time.Millisecond, 200)
	}
	w.stage(t0, "inference", 10*time.Millisecond)
	w.stage(t0, "inference", 30*time.Millisecond)
	_, stages, minutes := w.snapshot(t0.Add(2*time.Minute), t0)
	if len(minutes) != 3 || minutes[0].Requests != 100 || *minutes[0].P50MS != 50 || *minutes[0].P99MS != 99 ||
		minutes[0].StagesMS["inference"] != 20 || minutes[1].Requests != 0 || minutes[1].P50MS != nil || stages[0] != "inference" {
		t.Errorf("minutes %+v, stages %v", minutes, stages)
	}
	// An hour later the same slot holds the new minute only.
	later := t0.Add(time.Hour)
	w.request(later, 5*time.Millisecond, 500)
	req, _, minutes := w.snapshot(later, t0)
	if len(minutes) != windowMinutes || minutes[0].Start.Equal(t0.Truncate(time.Minute)) {
		t.Errorf("an hour later: %d minutes from %v", len(minutes), minutes[0].Start)
	}
	if m := minutes[len(minutes)-1]; m.Requests != 1 || m.Errors != 1 || *m.P99MS != 5 || req.Total != 101 || req.ByCode["500"] != 1 {
		t.Errorf("the reused slot: %+v, requests %+v", m, req)
	}
	for range maxMinuteSamples + 5 {
		w.request(later, time.Millisecond, 200)
	}
	if _, _, minutes := w.snapshot(later, t0); !minutes[len(minutes)-1].Sampled {
		t.Error("a minute over the sample bound is not marked sampled")
	}
}

// healthModel is a model whose devices can fail (HealthReporter).
type healthModel struct {
	tableModel
	health string
}

func (m *healthModel) Health() string { return m.health }

func (m *healthModel) HealthDetail() map[string]any {
	return map[string]any{"devices": "1 quarantined"}
}

// The console reports the model's own health, as /health does: degraded,
// and hung (which /health answers with a 503).
func TestConsoleShowsTheModelsHealth(t *testing.T) {
	for _, h := range []string{"degraded", "hung"} {
		s := New(&healthModel{health: h}, Options{Log: servertest.DiscardLog()})
		s.ready.Store(true)
		ts := httptest.NewServer(s.Handler())
		_, page := servertest.Fetch(t, ts.URL+"/")
		_, stats := servertest.Fetch(t, ts.URL+"/console/stats")
		resp, _ := servertest.Fetch(t, ts.URL+"/health")
		ts.Close()
		if !strings.Contains(page, `<span class="state state-`+h+`" id="state">`+h+`</span>`) || !strings.Contains(stats, `"status":"`+h+`"`) {
			t.Errorf("%s: the console does not say so:\n%s\n%s", h, page, stats)
		}
		if want := map[string]int{"degraded": 200, "hung": 503}[h]; resp.StatusCode != want {
			t.Errorf("%s: /health %d, want %d", h, resp.StatusCode, want)
		}
	}
}
