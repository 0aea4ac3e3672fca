package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/server/api"
)

// routesJSON is routes as GET /info lists them.
func routesJSON(routes []api.Route) string {
	var list []map[string]string
	for _, r := range routes {
		list = append(list, map[string]string{"method": r.Method, "path": r.Path, "what": r.What})
	}
	b, _ := json.Marshal(list)
	return string(b)
}

// echoModel is a minimal Model for the server's own behaviour: its Load
// waits for a signal, /echo answers with the request count, /boom panics.
type echoModel struct {
	release chan struct{}
	loadErr error
	closed  atomic.Bool
}

func (m *echoModel) Name() string { return "echo" }

func (m *echoModel) Load(ctx context.Context, _ *slog.Logger) error {
	select {
	case <-m.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return m.loadErr
}

func (m *echoModel) Device() string { return "test device" }

func (m *echoModel) Info() map[string]any { return map[string]any{"model": "echo"} }

func (m *echoModel) ModelCards() []ModelCard {
	return []ModelCard{{ID: "test/echo", Object: "model", OwnedBy: "tt-model"}}
}

func (m *echoModel) Close() error { m.closed.Store(true); return nil }

func (m *echoModel) Routes() []Route {
	return []Route{
		{Route: api.Route{Method: http.MethodPost, Path: "/echo", Name: "echo", What: "answers ok", Counts: true}, Handler: func(w http.ResponseWriter, r *http.Request, _ Recorder) {
			WriteJSON(w, http.StatusOK, map[string]string{"ok": "yes"})
		}},
		{Route: api.Route{Method: http.MethodPost, Path: "/boom", Name: "boom", What: "panics"}, Handler: func(http.ResponseWriter, *http.Request, Recorder) {
			var m map[string]int
			m["x"]++ // nil map write: a real runtime panic
		}},
	}
}

func waitReady(t *testing.T, s *Server) {
	t.Helper()
	for i := 0; i < 500 && !s.Ready(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if !s.Ready() {
		t.Fatal("server never became ready")
	}
}

func TestStartingThenReadyThenGracefulStop(t *testing.T) {
	m := &echoModel{release: make(chan struct{})}
	s := New(m, Options{Log: servertest.DiscardLog()})
	ctx, cancel := context.WithCancel(context.Background())
	base, done := servertest.Run(t, ctx, s.Run)

	code, body := servertest.GetJSON(t, base+"/health")
	if code != 200 || body["status"] != "starting" || body["model"] != "echo" || body["device"] != nil {
		t.Fatalf("health while starting: %d %v", code, body)
	}
	if code, b := servertest.Post(t, base+"/echo", "{}"); code != 503 || !strings.Contains(b, "echo is starting") {
		t.Fatalf("model route while starting: %d %s", code, b)
	}
	close(m.release)
	waitReady(t, s)
	code, body = servertest.GetJSON(t, base+"/health")
	if code != 200 || body["status"] != "ok" || body["device"] != "test device" {
		t.Fatalf("health when ready: %d %v", code, body)
	}
	if code, body := servertest.GetJSON(t, base+"/v1/models"); code != 200 || body["object"] != "list" {
		t.Fatalf("/v1/models: %d %v", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after stop = %v, want nil", err)
	}
	if !m.closed.Load() {
		t.Error("model not closed on shutdown")
	}
}

func TestLoadFailureEndsRun(t *testing.T) {
	m := &echoModel{release: make(chan struct{}), loadErr: errors.New("no weights here")}
	close(m.release)
	_, done := servertest.Run(t, context.Background(), New(m, Options{Log: servertest.DiscardLog()}).Run)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "load echo: no weights here") {
		t.Fatalf("Run = %v", err)
	}
}

func TestRoutingPanicsAndMetrics(t *testing.T) {
	m := &echoModel{release: make(chan struct{})}
	close(m.release)
	s := New(m, Options{Log: servertest.DiscardLog()})
	s.ready.Store(true)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	cases := []struct {
		method, path string
		want         int
		body         string
	}{
		{"GET", "/nope", 404, `{"detail":"Not Found"}`},
		{"GET", "/echo", 405, `{"detail":"Method Not Allowed"}`},
		{"POST", "/health", 405, `{"detail":"Method Not Allowed"}`},
		{"POST", "/boom", 500, `{"detail":"internal error: assignment to entry in nil map"}`},
		{"GET", "/info", 200, `{"model":"echo","routes":` + routesJSON(append(api.Common(),
			api.Route{Method: "POST", Path: "/echo", What: "answers ok"}, api.Route{Method: "POST", Path: "/boom", What: "panics"})) + `}`},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, ts.URL+c.path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || strings.TrimSpace(string(b)) != c.body {
			t.Errorf("%s %s: %d %s, want %d %s", c.method, c.path, resp.StatusCode, b, c.want, c.body)
		}
	}

	// Eight concurrent requests are all answered (the model, not the server, decides how many run
	// at once).
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, b := servertest.Post(t, ts.URL+"/echo", "{}"); code != 200 {
				t.Errorf("echo: %d %s", code, b)
			}
		}()
	}
	wg.Wait()

	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`tt_model_http_requests_total{code="200",model="echo",route="echo"} 8`, `route="boom"`, "go_goroutines"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestFaultSwitchExitsAfterN(t *testing.T) {
	m := &echoModel{release: make(chan struct{})}
	close(m.release)
	s := New(m, Options{Log: servertest.DiscardLog(), Fault: Fault{Kind: "exit", After: 2}})
	base, done := servertest.Run(t, context.Background(), s.Run)
	waitReady(t, s)
	for i := 0; i < 2; i++ {
		if code, b := servertest.Post(t, base+"/echo", "{}"); code != 200 {
			t.Fatalf("prediction %d: %d %s (the answer must still be sent)", i+1, code, b)
		}
	}
	err := <-done
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitFault || !strings.Contains(ee.Reason, "after 2 predictions") {
		t.Fatalf("Run = %v, want an exit 75 after 2 predictions", err)
	}
}
