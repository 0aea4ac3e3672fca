// Package modeltest holds the checks the tests of every model's routes (server/pi05,
// server/rfdetr) run against their own server: the model card lists exactly the routes the server
// answers, a route that panics half way, the notice of generated test weights, and the console
// page's helpers for the browser tests.
package modeltest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/builder/card"
	"github.com/ttmodel/tt-model/internal/testing/browsertest"
	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/server"
)

// cardRow is one row of a card's endpoint table: `| GET | `/health` | … |`.
var cardRow = regexp.MustCompile("^\\| (GET|HEAD|POST|PUT|PATCH|DELETE) \\| `([^`]+)` \\|")

// cardEndpoints renders the model card of the manifest at path, as `tt-model
// package` does, and returns its endpoint table as "METHOD /path" lines.
func cardEndpoints(t *testing.T, path string) []string {
	t.Helper()
	m, err := manifest.Load(path, manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	text, _, err := card.Render(m.ToWire(manifest.WireInfo{ToolVersion: "test"}))
	if err != nil {
		t.Fatal(err)
	}
	_, using, ok := strings.Cut(text, "## Using it")
	if !ok {
		t.Fatalf("the card of %s has no \"Using it\" section:\n%s", path, text)
	}
	using, _, _ = strings.Cut(using, "\n## ")
	var rows []string
	for _, line := range strings.Split(using, "\n") {
		if m := cardRow.FindStringSubmatch(line); m != nil {
			rows = append(rows, m[1]+" "+m[2])
		}
	}
	if len(rows) == 0 {
		t.Fatalf("the card of %s lists no endpoint:\n%s", path, using)
	}
	return rows
}

// CheckCard checks that the model card of the package whose manifest is at path lists exactly the
// routes a server of model answers: every row of the card is served (neither 404 nor 405), every
// route the server registered is on the card, and GET /info lists the same.
func CheckCard(t *testing.T, path string, model server.Model) {
	t.Helper()
	card := cardEndpoints(t, path)
	s := server.New(model, server.Options{Log: servertest.DiscardLog()})
	s.MarkLoaded()
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	for _, row := range card {
		method, path, _ := strings.Cut(row, " ")
		req, err := http.NewRequest(method, ts.URL+path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			t.Errorf("the card lists %s, the server answers %d", row, resp.StatusCode)
		}
	}

	var served []string
	for _, r := range s.Routes() {
		served = append(served, r.Method+" "+r.Path)
	}
	sameSet(t, "the server's route table", served, "the card", card)

	resp, err := http.Get(ts.URL + "/info")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct {
		Routes []struct{ Method, Path string } `json:"routes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range info.Routes {
		listed = append(listed, r.Method+" "+r.Path)
	}
	sameSet(t, "GET /info's routes", listed, "the card", card)

	if resp, err := http.Get(ts.URL + "/v1/actions/unknown"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("a path on no card (/v1/actions/unknown): %v %v, want 404", resp.Status, err)
	}
}

func sameSet(t *testing.T, aName string, a []string, bName string, b []string) {
	t.Helper()
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("%s:\n  %s\n%s:\n  %s", aName, strings.Join(a, "\n  "), bName, strings.Join(b, "\n  "))
	}
}

// panicRecorder panics at a stage while armed: a handler that panics half way, after it took its
// memory, its request slot and (pi0.5) its device time.
type panicRecorder struct {
	server.Recorder
	stage string
	armed *atomic.Bool
}

func (r panicRecorder) Stage(name string, d time.Duration) {
	if name == r.stage && r.armed.Load() {
		panic("test: handler panics at " + name)
	}
	r.Recorder.Stage(name, d)
}

// Predicted keeps a websocket's prediction count (PredictionCounter) through the wrapper.
func (r panicRecorder) Predicted() {
	if c, ok := r.Recorder.(server.PredictionCounter); ok {
		c.Predicted()
	}
}

// Panicking makes every route's handler panic when it reports stage, while armed.
func Panicking(routes []server.Route, stage string, armed *atomic.Bool) []server.Route {
	for i, rt := range routes {
		h := rt.Handler
		routes[i].Handler = func(w http.ResponseWriter, r *http.Request, rec server.Recorder) {
			h(w, r, panicRecorder{rec, stage, armed})
		}
	}
	return routes
}

// CheckTestWeightsNotice: /health carries the notice as "weights", /info as weights.notice, and
// the console shows it as a banner; want "" checks that none of them says anything.
func CheckTestWeightsNotice(t *testing.T, base, want string) {
	t.Helper()
	var health struct {
		Weights string `json:"weights"`
	}
	if err := json.Unmarshal([]byte(servertest.Body(t, base+"/health")), &health); err != nil || health.Weights != want {
		t.Errorf("/health weights = %q (%v), want %q", health.Weights, err, want)
	}
	var info struct {
		Weights struct {
			Notice string `json:"notice"`
			Test   bool   `json:"test_weights"`
		} `json:"weights"`
	}
	if err := json.Unmarshal([]byte(servertest.Body(t, base+"/info")), &info); err != nil || info.Weights.Notice != want || info.Weights.Test != (want != "") {
		t.Errorf("/info weights = %+v (%v), want notice %q", info.Weights, err, want)
	}
	page := servertest.Body(t, base+"/")
	if banner := strings.Contains(page, `id="weights-warning"`); banner != (want != "") || !strings.Contains(page, want) {
		t.Errorf("console banner shown %v, want %v with %q", banner, want != "", want)
	}
}

// UniqueIDs fails the test for every id the page uses twice (a label, a
// script or a test would reach the wrong element).
func UniqueIDs(t *testing.T, p *browsertest.Page) {
	t.Helper()
	if dup := browsertest.Eval[[]string](p, `(() => {
		const ids = [...document.querySelectorAll('[id]')].map((e) => e.id);
		return ids.filter((id, i) => ids.indexOf(id) !== i);
	})()`); len(dup) > 0 {
		t.Errorf("ids used twice on the page: %v", dup)
	}
}

// WaitDrawn waits until the console has drawn the answer to a request after
// the n-th, and returns that count.
func WaitDrawn(p *browsertest.Page, after int) int {
	p.WaitFor(fmt.Sprintf(`Number(document.getElementById('result').dataset.drawn || 0) > %d && !document.querySelector('form[data-busy]')`, after))
	return browsertest.Eval[int](p, `Number(document.getElementById('result').dataset.drawn)`)
}

// WriteFile writes b to a file name in a temporary folder and returns its path (a file for the
// page's file input).
func WriteFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// CheckStalledClients checks that a slow or silent client never holds the model of the server at
// base: five clients send the headers of a POST /predict and "{" and stall; good, a request after
// them, is answered (its status code is 200) while they still hang (no answer has reached any of
// them), and each stalled one is then cut off with a 408 by the body idle timeout.
func CheckStalledClients(t *testing.T, base string, good func() int) {
	t.Helper()
	var stalled []net.Conn
	for range 5 {
		stalled = append(stalled, servertest.Stall(t, base, "/predict"))
	}
	time.Sleep(100 * time.Millisecond) // the stalled bodies are being read
	if code := good(); code != http.StatusOK {
		t.Fatalf("the good request after 5 stalled clients: %d", code)
	}
	for i, c := range stalled {
		if got, line := servertest.Answered(c, 10*time.Millisecond); got {
			t.Fatalf("stalled client %d was answered (%q) before the good request: the good one waited for it", i, line)
		}
	}
	for i, c := range stalled {
		if got, line := servertest.Answered(c, 10*time.Second); !got || !strings.Contains(line, "408") {
			t.Errorf("stalled client %d: %q, want a 408 once the body idle timeout passed", i, line)
		}
	}
}
