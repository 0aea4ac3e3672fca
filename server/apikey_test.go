package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// With an API key, every route but /health and /healthz answers 401 without
// it, a wrong one, or another scheme; "Bearer KEY" (vLLM's, SGLang's) and
// "Api-Key KEY" (OpenPI's client) pass; a websocket upgrade is refused
// before it happens and accepted with the header on connect.
func TestAPIKeyGuardsEveryRouteButHealth(t *testing.T) {
	const key = "s3cret-key"
	m := newPI05TestModel(t, nil)
	s := New(m, Options{Log: discardLog(), APIKey: key})
	s.ready.Store(true)
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

func TestLoadAPIKey(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flag      string
		env       map[string]string
		key, from string
		err       string
	}{
		{"", nil, "", "", ""},
		{file, map[string]string{"TT_API_KEY": "env"}, "from-file", "--api-key-file " + file, ""},
		{"", map[string]string{"TT_API_KEY_FILE": file, "TT_API_KEY": "env"}, "from-file", "TT_API_KEY_FILE " + file, ""},
		{"", map[string]string{"TT_API_KEY": " env "}, "env", "TT_API_KEY", ""},
		{"", map[string]string{"TT_API_KEY": " "}, "", "", "TT_API_KEY is blank"},
		{empty, nil, "", "", "the file is empty"},
		{filepath.Join(dir, "missing"), nil, "", "", "--api-key-file"},
	} {
		key, from, err := LoadAPIKey(c.flag, func(k string) string { return c.env[k] })
		if key != c.key || from != c.from || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("LoadAPIKey(%q, %v) = %q, %q, %v; want %q, %q, %q", c.flag, c.env, key, from, err, c.key, c.from, c.err)
		}
		if err != nil && strings.Contains(err.Error(), "from-file") {
			t.Errorf("the error shows the key: %v", err)
		}
	}
}
