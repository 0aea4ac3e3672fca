package readiness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbe(t *testing.T) {
	cases := []struct {
		body           string
		status         int
		ready, serving bool // Probe's answer, Serving's
	}{
		{`{"status":"ok"}`, 200, true, true},
		{`{"status":"starting"}`, 200, false, false},
		{`{"status":"degraded"}`, 200, false, true},
		{`{"status":"hung"}`, 503, false, false},
		{`not json`, 200, false, false},
	}
	for _, tc := range cases {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(tc.status)
			w.Write([]byte(tc.body))
		}))
		ready := Probe(context.Background(), srv.Client(), srv.URL+"/health")
		serving := Serving(context.Background(), srv.Client(), srv.URL+"/health")
		srv.Close()
		if (ready == nil) != tc.ready || (serving == nil) != tc.serving {
			t.Errorf("body %q: Probe %v, Serving %v; want ok=%v and %v", tc.body, ready, serving, tc.ready, tc.serving)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	if err := Probe(context.Background(), srv.Client(), srv.URL); err == nil {
		t.Error("a 503 with status ok was taken as ready")
	}
}

// The ready text is found when it straddles writes, and the output passes
// through unchanged.
func TestWatcherAcrossWrites(t *testing.T) {
	var out, errOut strings.Builder
	w := NewWatcher("Application startup complete")
	stdout, stderr := w.Stream(&out), w.Stream(&errOut)
	stderr.Write([]byte("Application startup")) // the other stream: no match across streams
	parts := []string{" complete? no.\nINFO: Applica", "tion start", "up complete.\n", "more\n"}
	for i, part := range parts {
		if i <= 2 {
			select {
			case <-w.Seen():
				t.Fatalf("ready before part %d (%q) was written", i, part)
			default:
			}
		}
		stdout.Write([]byte(part))
		if i == 2 {
			select {
			case <-w.Seen():
			default:
				t.Fatal("ready text not found once its last part was written")
			}
		}
	}
	if out.String() != strings.Join(parts, "") || errOut.String() != "Application startup" {
		t.Errorf("output passed through = %q", out.String())
	}
	never := NewWatcher("")
	never.Stream(&out).Write([]byte("anything"))
	select {
	case <-never.Seen():
		t.Error("an empty ready text matched")
	default:
	}
}
