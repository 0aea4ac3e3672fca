package supervisor

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
)

// After an exit 75 the status JSON has the whole story on its timeline (the
// exit, the marker, the reset with its duration and output, the chip
// check, the new start) and the counts; / gives a browser the page and
// every other client the JSON, as before.
func TestStatusTimelineAndPage(t *testing.T) {
	h := newHarness(t)
	h.tickHeartbeats()
	h.server("-plan", "exit:75,ready", "-exit-after", "300ms")
	h.cfg.StatusAddr = "127.0.0.1:" + strconv.Itoa(servertest.FreePort(t))
	h.cfg.Env = map[string]string{"HF_MODEL": "Roboflow/rf-detr-base"}
	s := h.start()
	var st Status
	eventually(t, s, "the second start to be ready", func() bool {
		var err error
		st, err = status(t, h.cfg.StatusAddr)
		return err == nil && st.State == StateReady && st.Starts == 2
	})
	if st.Restarts != 1 || st.Resets != 1 || st.HangMarker == nil || st.HangMarker.Present || st.HangMarker.Path != h.cfg.HangMarker {
		t.Errorf("counts and marker: restarts %d resets %d marker %+v", st.Restarts, st.Resets, st.HangMarker)
	}
	var kinds []string
	var reset *Event
	for i, e := range st.Timeline {
		k := e.Kind
		switch e.Kind {
		case EventState:
			k += " " + e.State.String()
		case EventExit:
			k += " " + strconv.Itoa(*e.Code)
		case EventReset:
			reset = &st.Timeline[i]
		}
		kinds = append(kinds, k)
	}
	want := "state starting,state ready,exit 75,marker,state resetting,check,marker,reset,state starting,state ready"
	if strings.Join(kinds, ",") != want {
		t.Errorf("timeline:\n got %s\nwant %s", strings.Join(kinds, ","), want)
	}
	if reset == nil || reset.OK == nil || !*reset.OK || reset.DurationS <= 0 ||
		reset.Output != "fake-reset: resetting chips 0,1\nfake-reset: done" || !strings.Contains(reset.Detail, "chip check passed") {
		t.Errorf("the reset entry: %+v", reset)
	}

	get := func(accept string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+h.cfg.StatusAddr+"/", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	for _, accept := range []string{"", "*/*", "application/json"} {
		resp, body := get(accept)
		var got Status
		if err := json.Unmarshal([]byte(body), &got); err != nil || resp.Header.Get("Content-Type") != "application/json" || got.Starts != 2 {
			t.Errorf("GET / with Accept %q: %s %v\n%.200s", accept, resp.Header.Get("Content-Type"), err, body)
		}
	}
	resp, page := get("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "style-src 'sha256-") {
		t.Fatalf("a browser's GET /: %s, CSP %q", resp.Header.Get("Content-Type"), resp.Header.Get("Content-Security-Policy"))
	}
	for _, want := range []string{`<meta http-equiv="refresh" content="5">`, `id="state">ready<`,
		"<title>ready · Roboflow/rf-detr-base · tt-model supervise</title>", "<h1>Roboflow/rf-detr-base <span", `<dd id="resets">1</dd>`,
		"exit 75 (hang: the chips are reset before the next start)", "fake-reset: resetting chips 0,1", "chip check passed",
		`<dd id="chips">0, 1 (locked by this supervisor)</dd>`, "absent"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if _, page := get("text/html"); strings.Contains(page, "<script") {
		t.Error("the status page has a script: it must work without JavaScript")
	}
}
