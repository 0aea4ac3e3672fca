package readiness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbe(t *testing.T) {
	for body, want := range map[string]bool{`{"status":"ok"}`: true, `{"status":"starting"}`: false, `not json`: false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(body))
		}))
		err := Probe(context.Background(), srv.Client(), srv.URL+"/health")
		srv.Close()
		if (err == nil) != want {
			t.Errorf("body %q: probe error %v, want ok=%v", body, err, want)
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
