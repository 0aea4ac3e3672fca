package rfdetr

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/server"
	"github.com/ttmodel/tt-model/server/console"
)

// GET / is the console, also for a request that asks for a websocket: on RF-DETR's server / is
// no websocket (pi0.5's is OpenPI's too: TestConsoleAndOpenPIShareTheRoot in server/pi05).
func TestRootIsNoWebsocket(t *testing.T) {
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
	m := New(Options{Getenv: func(string) string { return "" }, Device: "cpu test", Version: "test"})
	s := server.New(m, server.Options{Log: servertest.DiscardLog()})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	resp, body := servertest.Fetch(t, ts.URL+"/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-state="starting"`) || strings.Contains(body, `id="rfdetr-form"`) ||
		!strings.Contains(body, "The form appears once the model is ready") {
		t.Errorf("GET / while starting: %s\n%s", resp.Status, body)
	}
	if r, err := http.Post(ts.URL+"/predict", "application/json", strings.NewReader("{}")); err != nil || r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("POST /predict while starting: %v %v", r.Status, err)
	}
	resp, body = servertest.Fetch(t, ts.URL+"/console/status")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, `<section class="panel" id="status"`) || !strings.Contains(body, "loading") {
		t.Errorf("GET /console/status: %s\n%s", resp.Status, body)
	}
	var st console.Stats
	resp, body = servertest.Fetch(t, ts.URL+"/console/stats")
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
	servertest.Fetch(t, ts.URL+"/health") // not a model route: not counted
	var st console.Stats
	_, body := servertest.Fetch(t, ts.URL+"/console/stats")
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
	_, page := servertest.Fetch(t, ts.URL+"/console/status")
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
		resp, body := servertest.Fetch(t, ts.URL+path)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(body) < 100 {
			t.Errorf("%s: %s %s, %d bytes", path, resp.Status, resp.Header.Get("Content-Type"), len(body))
		}
	}
	for _, path := range []string{"/console/nope.js", "/console/page.html", "/console/x/console.js", "/consolex"} {
		if resp, _ := servertest.Fetch(t, ts.URL+path); resp.StatusCode != http.StatusNotFound {
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
