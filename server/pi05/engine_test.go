package pi05

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tinylib/msgp/msgp"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/server"
)

// A hang in sp (or pd, or one device): the request gets a 503 with a Retry-After, /health answers
// 503 "hung" with the hang named, /info records it, and the model delivers the exit code. (The
// handler runs without Server.Run here, so the process-level exit does not end the test; the
// binary's tests check the exit.)
func TestPI05HealthHung(t *testing.T) {
	m := loadPI05(t, map[string]string{"PI05_LAYOUT": "sp", "PI05_HANG_S": "2.5", "PI05_HANG_DRAIN_S": "0",
		"PI05_HANG_MARKER": filepath.Join(t.TempDir(), "marker")}, server.Fault{Kind: "hang", Device: 0, After: 1})
	ts := pi05Handler(t, m)
	img, _ := pi05Frame(t, 16, 16, 1)
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/predict", strings.NewReader(fmt.Sprintf(`{"images": [%q], "robot_id": 7}`, img)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("request on the hung device: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	status, h := servertest.GetJSON(t, ts.URL+"/health")
	if status != 503 || h["status"] != "hung" || !strings.Contains(fmt.Sprint(h["hangs"]), "device 0") {
		t.Errorf("/health: %d %v, want 503 hung naming device 0", status, h)
	}
	_, info := servertest.GetJSON(t, ts.URL+"/info")
	if info["status"] != "hung" || !strings.Contains(fmt.Sprint(info["megakernel"]), "device 0 (serve) stuck") {
		t.Errorf("/info: status %v, megakernel %v", info["status"], info["megakernel"])
	}
	select {
	case code := <-m.Exit():
		if code != 75 {
			t.Errorf("exit code %d, want 75", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the model never asked to exit")
	}
	if status, out := postJSON(t, ts.URL+"/predict", fmt.Sprintf(`{"images": [%q]}`, img)); status != 503 || !strings.Contains(fmt.Sprint(out["detail"]), "exits for a chip reset") {
		t.Errorf("a request after the hang: %d %v", status, out)
	}
}

// robot_id in the body (string or integer) or X-Robot-Id names the robot; /info's megakernel.slo
// lists the robots the scheduler knows.
func TestPI05RobotIdentity(t *testing.T) {
	ts := newPI05TestServer(t, map[string]string{"PI05_ROUTING": "robot", "PI05_ROBOT_IDLE_S": "60"})
	img, _ := pi05Frame(t, 16, 16, 1)
	for _, tc := range []struct{ body, header string }{
		{fmt.Sprintf(`{"images": [%q], "robot_id": "arm-1"}`, img), ""},
		{fmt.Sprintf(`{"images": [%q], "robot_id": 42}`, img), ""},
		{fmt.Sprintf(`{"images": [%q]}`, img), "arm-2"},
		{fmt.Sprintf(`{"input": {"observation": {"images": [%q]}}, "robot_id": "arm-3"}`, img), ""},
	} {
		path := "/predict"
		if strings.Contains(tc.body, "input") {
			path = "/v1/actions/generations"
		}
		var hdr []string
		if tc.header != "" {
			hdr = []string{"X-Robot-Id", tc.header}
		}
		if status, out := postJSON(t, ts.URL+path, tc.body, hdr...); status != 200 {
			t.Fatalf("%s: %d %v", tc.body[:40], status, out)
		}
	}
	if status, out := postJSON(t, ts.URL+"/predict", fmt.Sprintf(`{"images": [%q], "robot_id": [1]}`, img)); status != 400 || !strings.Contains(fmt.Sprint(out["detail"]), "robot_id") {
		t.Errorf("a list as robot_id: %d %v", status, out)
	}
	// msgpack: SGLang's envelope and a bare observation, over HTTP and as a websocket frame.
	o := newTestObservation(t)
	envelope := o.msgpackEnvelope(t, nil)
	envelope = append(msgp.AppendMapHeader(nil, 2), envelope[1:]...) // the map header gains robot_id
	envelope = msgp.AppendString(msgp.AppendString(envelope, "robot_id"), "arm-4")
	for _, body := range [][]byte{envelope, mustPack(t, o.bareObservation(t, map[string]any{"robot_id": "arm-5"}))} {
		if status, _, out := postBody(t, ts.URL+"/v1/actions/generations", body, "Content-Type", "application/msgpack"); status != 200 {
			t.Fatalf("msgpack body: %d %s", status, out)
		}
	}
	conn := dialWS(t, ts.URL+"/openpi/policy")
	readMsgpackFrame(t, conn)
	send(t, conn, websocket.MessageBinary, mustPack(t, o.bareObservation(t, map[string]any{"robot_id": 6})))
	if reply := readMsgpackFrame(t, conn); reply["actions"] == nil {
		t.Fatalf("websocket reply %v", reply)
	}
	if status, _, out := postBody(t, ts.URL+"/v1/actions/generations", mustPack(t, o.bareObservation(t, map[string]any{"robot_id": []int{1}})),
		"Content-Type", "application/msgpack"); status != 400 || !strings.Contains(string(out), "robot_id") {
		t.Errorf("a list as a bare observation's robot_id: %d %s", status, out)
	}
	_, info := servertest.GetJSON(t, ts.URL+"/info")
	robots := fmt.Sprint(info["megakernel"].(map[string]any)["slo"].(map[string]any)["robots"])
	for _, want := range []string{"arm-1", "42", "arm-2", "arm-3", "arm-4", "arm-5", " 6"} {
		if !strings.Contains(robots, want) {
			t.Errorf("megakernel.slo.robots %s lacks %s", robots, want)
		}
	}
}
