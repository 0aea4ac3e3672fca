package pi05

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/server"
)

// With an API key, every route but /health and /healthz answers 401 without
// it, a wrong one, or another scheme; "Bearer KEY" (vLLM's, SGLang's) and
// "Api-Key KEY" (OpenPI's client) pass; a websocket upgrade is refused
// before it happens and accepted with the header on connect.
func TestAPIKeyGuardsEveryRouteButHealth(t *testing.T) {
	const key = "s3cret-key"
	m := newPI05TestModel(t, nil)
	s := server.New(m, server.Options{Log: servertest.DiscardLog(), APIKey: key})
	s.MarkLoaded()
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(m.ws.shutdown)

	do := func(method, path, auth string) int {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader("{}"))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s %s: 401 without WWW-Authenticate: Bearer", method, path)
		}
		return resp.StatusCode
	}
	for _, r := range s.Routes() {
		path := strings.TrimSuffix(r.Path, "/") + "/"
		if !r.Prefix {
			path = r.Path
		}
		for _, auth := range []string{"", "Bearer wrong", "Bearer " + key + "x", "Basic " + key, key} {
			got := do(r.Method, path, auth)
			if r.Open && got == http.StatusUnauthorized {
				t.Errorf("%s %s (open) with %q: 401", r.Method, path, auth)
			}
			if !r.Open && got != http.StatusUnauthorized {
				t.Errorf("%s %s with %q: %d, want 401", r.Method, path, auth, got)
			}
		}
		for _, auth := range []string{"Bearer " + key, "bearer " + key, "Api-Key " + key} {
			if got := do(r.Method, path, auth); got == http.StatusUnauthorized {
				t.Errorf("%s %s with %q: 401", r.Method, path, auth)
			}
		}
	}
	for _, path := range []string{"/health", "/healthz"} {
		if got := do(http.MethodGet, path, ""); got != http.StatusOK {
			t.Errorf("GET %s without a key: %d, want 200", path, got)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws := "ws" + strings.TrimPrefix(ts.URL, "http") + "/openpi/policy"
	if _, resp, err := websocket.Dial(ctx, ws, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("websocket without the key: %v %v, want a refused upgrade (401)", resp, err)
	}
	conn, _, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Api-Key " + key}}})
	if err != nil {
		t.Fatalf("websocket with OpenPI's Api-Key header: %v", err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(64 << 20)
	if meta := readMsgpackFrame(t, conn); meta["object"] != "action.metadata" {
		t.Errorf("websocket with the key: first frame %v", meta)
	}
}
