package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/server/console"
)

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// GET / is the console for a browser and, on pi0.5, still OpenPI's policy
// websocket for a websocket client (stock OpenPI clients connect there).
func TestConsoleAndOpenPIShareTheRoot(t *testing.T) {
	ts := newPI05TestServer(t, nil)
	resp, body := get(t, ts.URL+"/")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(body, `id="pi05-form"`) || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("GET /: %s %s CSP %q\n%.400s", resp.Status, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Security-Policy"), body)
	}
	conn := dialWS(t, ts.URL+"/")
	if meta := readMsgpackFrame(t, conn); meta["object"] != "action.metadata" {
		t.Errorf("websocket on /: first frame %v", meta)
	}
	// A websocket asked of an RF-DETR server's / is not one: the console answers.
	rf := newRFDETRTestServer(t, sampleScene())
	req, _ := http.NewRequest(http.MethodGet, rf.URL+"/", nil)
	req.Header.Set("Connection", "keep-alive, Upgrade")
	req.Header.Set("Upgrade", "websocket")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusOK || !strings.HasPrefix(r2.Header.Get("Content-Type"), "text/html") {
		t.Errorf("an upgrade on RF-DETR's /: %s %s", r2.Status, r2.Header.Get("Content-Type"))
	}
}

// While the model loads, the console shows its state and no form; the
// status section and the feed answer; the model route's 503 is counted.
func TestConsoleWhileStarting(t *testing.T) {
	m := NewRFDETR(RFDETROptions{Getenv: func(string) string { return "" }, Device: "cpu test", Version: "test"})
	s := New(m, Options{Log: discardLog()})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	resp, body := get(t, ts.URL+"/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-state="starting"`) || strings.Contains(body, `id="rfdetr-form"`) ||
		!strings.Contains(body, "The form appears once the model is ready") {
		t.Errorf("GET / while starting: %s\n%s", resp.Status, body)
	}
	if r, err := http.Post(ts.URL+"/predict", "application/json", strings.NewReader("{}")); err != nil || r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("POST /predict while starting: %v %v", r.Status, err)
	}
	resp, body = get(t, ts.URL+"/console/status")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, `<section class="panel" id="status"`) || !strings.Contains(body, "loading") {
		t.Errorf("GET /console/status: %s\n%s", resp.Status, body)
	}
	var st console.Stats
	resp, body = get(t, ts.URL+"/console/stats")
	if err := json.Unmarshal([]byte(body), &st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /console/stats: %s %v\n%s", resp.Status, err, body)
	}
	if st.Status != "starting" || st.ReadyS != nil || st.Requests.Total != 1 || st.Requests.ByCode["503"] != 1 || len(st.Minutes) != 1 || st.Minutes[0].Errors != 1 {
		t.Errorf("stats while starting: %+v", st)
	}
}

// The feed counts every model request by code and gives each minute's
// latency percentiles and the mean of each stage.
func TestConsoleStatsFeed(t *testing.T) {
	ts := newRFDETRTestServer(t, sampleScene())
	for _, body := range []string{predictBodyOf(t, 0.5), predictBodyOf(t, 0.7), `{"image": 3}`} {
		r, err := http.Post(ts.URL+"/predict", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
	}
	get(t, ts.URL+"/health") // not a model route: not counted
	var st console.Stats
	_, body := get(t, ts.URL+"/console/stats")
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	last := st.Minutes[len(st.Minutes)-1]
	if st.Status != "ok" || st.Requests.Total != 3 || st.Requests.ByCode["200"] != 2 || st.Requests.ByCode["422"] != 1 ||
		last.Requests != 3 || last.Errors != 1 || last.P50MS == nil || *last.P99MS < *last.P50MS {
		t.Errorf("stats: %s", body)
	}
	for _, stage := range []string{"decode", "preprocess", "inference", "postprocess"} {
		if _, ok := last.StagesMS[stage]; !ok {
			t.Errorf("stage %s missing: %v (stages %v)", stage, last.StagesMS, st.Stages)
		}
	}
	_, page := get(t, ts.URL+"/console/status")
	if !strings.Contains(page, "3 (200 × 2, 422 × 1)") || !strings.Contains(page, `<path class="p50"`) && !strings.Contains(page, `<circle class="p50"`) {
		t.Errorf("the status section does not show the requests:\n%s", page)
	}
}

func predictBodyOf(t *testing.T, threshold float64) string {
	b, _ := json.Marshal(map[string]any{"image": pngB64(t, 64, 48), "threshold": threshold})
	return string(b)
}

// The console's files are served from the binary; nothing else under
// /console/ is.
func TestConsoleAssets(t *testing.T) {
	ts := newRFDETRTestServer(t, sampleScene())
	for path, ctype := range map[string]string{
		"/console/style.css": "text/css", "/console/console.js": "text/javascript", "/console/rfdetr.js": "text/javascript",
		"/console/pi05.js": "text/javascript", "/console/sample.png": "image/png",
	} {
		resp, body := get(t, ts.URL+path)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(body) < 100 {
			t.Errorf("%s: %s %s, %d bytes", path, resp.Status, resp.Header.Get("Content-Type"), len(body))
		}
	}
	for _, path := range []string{"/console/nope.js", "/console/page.html", "/console/x/console.js", "/consolex"} {
		if resp, _ := get(t, ts.URL+path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %s, want 404", path, resp.Status)
		}
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(ts.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/" {
		t.Errorf("/console/: %s to %q, want a redirect to /", resp.Status, resp.Header.Get("Location"))
	}
}

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
		s := New(&healthModel{health: h}, Options{Log: discardLog()})
		s.ready.Store(true)
		ts := httptest.NewServer(s.Handler())
		_, page := get(t, ts.URL+"/")
		_, stats := get(t, ts.URL+"/console/stats")
		resp, _ := get(t, ts.URL+"/health")
		ts.Close()
		if !strings.Contains(page, `<span class="state state-`+h+`" id="state">`+h+`</span>`) || !strings.Contains(stats, `"status":"`+h+`"`) {
			t.Errorf("%s: the console does not say so:\n%s\n%s", h, page, stats)
		}
		if want := map[string]int{"degraded": 200, "hung": 503}[h]; resp.StatusCode != want {
			t.Errorf("%s: /health %d, want %d", h, resp.StatusCode, want)
		}
	}
}
