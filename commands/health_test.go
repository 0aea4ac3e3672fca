package commands

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHealth: `tt-model health` passes only on "status": "ok", though the
// server answers 200 either way (the readiness probe of k8s render).
func TestHealth(t *testing.T) {
	status := "starting"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"status": "` + status + `", "model": "RF-DETR-base", "device": null}`)) //nolint:errcheck // test server
	}))
	defer srv.Close()
	code, _, errOut := run(t, "health", srv.URL+"/health")
	if code != 1 || !strings.Contains(errOut, `HTTP 200, status "starting"`) {
		t.Errorf("starting: exit %d, %q", code, errOut)
	}
	status = "ok"
	if code, out, errOut := run(t, "health", srv.URL+"/health"); code != 0 || out != "ok\n" {
		t.Errorf("ok: exit %d, %q %q", code, out, errOut)
	}
	srv.Close()
	if code, _, errOut := run(t, "health", srv.URL+"/health", "--timeout", "1s"); code != 1 || !strings.Contains(errOut, "connect") {
		t.Errorf("down: exit %d, %q", code, errOut)
	}
}
