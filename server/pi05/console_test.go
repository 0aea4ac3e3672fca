package pi05

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
)

// GET / is the console for a browser and, on pi0.5, still OpenPI's policy
// websocket for a websocket client (stock OpenPI clients connect there); RF-DETR's own check is
// TestRootIsNoWebsocket in server/rfdetr.
func TestConsoleAndOpenPIShareTheRoot(t *testing.T) {
	ts := newPI05TestServer(t, nil)
	resp, body := servertest.Fetch(t, ts.URL+"/")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(body, `id="pi05-form"`) || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("GET /: %s %s CSP %q\n%.400s", resp.Status, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Security-Policy"), body)
	}
	conn := dialWS(t, ts.URL+"/")
	if meta := readMsgpackFrame(t, conn); meta["object"] != "action.metadata" {
		t.Errorf("websocket on /: first frame %v", meta)
	}
}
