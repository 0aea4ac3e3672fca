package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ttmodel/tt-model/internal/demopicture"
	"github.com/ttmodel/tt-model/internal/testing/browsertest"
)

// The supervisor's status page in a real browser after a night's worth of
// trouble, in short: `tt-model supervise` runs tt-model-server on the tiny
// pi0.5 checkpoint with the test-only fault switch; the first prediction
// makes the server exit 75; the supervisor runs the reset command (a
// site's own: this host has no chips), starts the server again, and the
// page shows the exit, the reset with its duration and output, and the
// counts, the server's own console is back, and neither page requests
// anything outside its server.
func TestSupervisorPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tt-model and tt-model-server: skipped with -short")
	}
	b := browsertest.Start(t)
	bin := t.TempDir()
	ttModel := buildBinary(t, bin, "./cmd/tt-model", "tt-model")
	server := buildBinary(t, bin, "./cmd/tt-model-server", "tt-model-server")
	work := t.TempDir()
	marker, reset := filepath.Join(work, "hang_marker"), filepath.Join(work, "site-reset")
	script := "#!/bin/sh\necho \"site-reset: resetting the chips (none on this test host)\"\nsleep 0.3\necho \"site-reset: done\"\n"
	if err := os.WriteFile(reset, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	port, status := freePort(t), "127.0.0.1:"+freePort(t)
	base := "http://127.0.0.1:" + port
	_, exited := superviseTinyPI05(t, ttModel, server, port,
		[]string{"--ready-url", base + "/health", "--hang-marker", marker, "--reset-cmd", reset + " {chips}", "--status-addr", status},
		"PI05_HANG_MARKER="+marker, "TT_MODEL_FAULT=exit:after=1")

	// waitStatus polls the supervisor's JSON until cond holds.
	waitStatus := func(what string, cond func(st map[string]any) bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			select {
			case err := <-exited:
				t.Fatalf("supervise exited (%v) while waiting for %s", err, what)
			default:
			}
			resp, err := http.Get("http://" + status + "/status")
			if err != nil {
				continue
			}
			var st map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if cond(st) {
				return
			}
		}
		t.Fatalf("gave up waiting for %s", what)
	}
	ready := func(starts float64) func(map[string]any) bool {
		return func(st map[string]any) bool { return st["state"] == "ready" && st["starts"] == starts }
	}
	waitStatus("the server to be ready", ready(1))
	frame := base64.StdEncoding.EncodeToString(demopicture.PNG())
	resp, err := http.Post(base+"/predict", "application/json", strings.NewReader(fmt.Sprintf(`{"images": [%q], "prompt": "stack the blocks"}`, frame)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the prediction that fires the fault switch: %s", resp.Status)
	}
	waitStatus("the restarted server to be ready", ready(2))

	p := b.Page(t, time.Minute)
	p.Do(chromedp.Navigate("http://"+status+"/"), chromedp.WaitVisible(chromedp.ID("timeline")))
	text := func(id string) string {
		return browsertest.Eval[string](p, fmt.Sprintf(`document.getElementById(%q).textContent.trim()`, id))
	}
	if got := text("state"); got != "ready" {
		t.Errorf("state %q", got)
	}
	if got, want := text("restarts")+" "+text("resets")+" "+text("starts"), "1 1 2"; got != want {
		t.Errorf("restarts resets starts: %s, want %s", got, want)
	}
	if got := text("marker"); !strings.HasSuffix(got, "absent") {
		t.Errorf("hang marker: %q", got)
	}
	timeline := text("timeline")
	for _, want := range []string{"exit 75 (hang", "hang marker written", "site-reset: resetting the chips", "site-reset: done",
		"chip check skipped (no chips on this host)", "hang marker removed", "server ready (start 2)"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("the timeline lacks %q:\n%s", want, timeline)
		}
	}
	shot := p.Screenshot("supervisor-status")
	browsertest.DocImage(t, shot, "../../docs/images/supervisor-status.png", 200<<10)
	p.CheckSameOrigin("http://" + status)

	// The restarted server's console, reached from the same browser.
	c := b.Page(t, time.Minute)
	c.Do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("pi05-form")))
	if got := browsertest.Eval[string](c, `document.getElementById('state').textContent`); got != "ok" {
		t.Errorf("the restarted server's console says %q", got)
	}
	c.CheckSameOrigin(base)
}
