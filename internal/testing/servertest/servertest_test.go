package servertest

import (
	"net"
	"net/http"
	"strconv"
	"testing"
)

func TestAgainstARealServer(t *testing.T) {
	port := FreePort(t)
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("the free port %d cannot be listened on: %v", port, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			_, _ = w.Write([]byte(`{"status": "ok"}`))
		case "/metrics":
			_, _ = w.Write([]byte("# HELP a_total A.\n# TYPE a_total counter\na_total 3\nb_total 1\n"))
		default:
			http.Error(w, "no such page", http.StatusNotFound)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := "http://127.0.0.1:" + strconv.Itoa(port)

	if code, h := GetJSON(t, base+"/health"); code != 200 || h["status"] != "ok" {
		t.Errorf("/health: %d %v", code, h)
	}
	if code, h := GetJSON(t, base+"/nowhere"); code != 404 || h != nil {
		t.Errorf("/nowhere: %d %v, want 404 and no object", code, h)
	}
	code, text := Get(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	if got := GrepLines(text, "a_total"); got != "a_total 3" {
		t.Errorf("GrepLines(a_total) = %q", got)
	}
}
