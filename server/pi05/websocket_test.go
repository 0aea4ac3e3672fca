package pi05

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
)

func dialWS(t testing.TB, url string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadLimit(64 << 20)
	t.Cleanup(func() { conn.CloseNow() })
	return conn
}

func readWS(t testing.TB, conn *websocket.Conn) (websocket.MessageType, []byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return conn.Read(ctx)
}

func readMsgpackFrame(t testing.TB, conn *websocket.Conn) map[string]any {
	t.Helper()
	typ, b, err := readWS(t, conn)
	if err != nil {
		t.Fatal(err)
	}
	if typ != websocket.MessageBinary {
		t.Fatalf("a %v frame: %s", typ, b)
	}
	return unpack(t, b)
}

func send(t *testing.T, conn *websocket.Conn, typ websocket.MessageType, b []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.Write(ctx, typ, b); err != nil {
		t.Fatal(err)
	}
}

// expectErrorClose reads the error text frame and the close that follows it.
func expectErrorClose(t *testing.T, conn *websocket.Conn, wantText, wantReason string) {
	t.Helper()
	typ, b, err := readWS(t, conn)
	if err != nil || typ != websocket.MessageText || !strings.Contains(string(b), wantText) {
		t.Fatalf("error frame: %v %q %v, want text with %q", typ, b, err, wantText)
	}
	_, _, err = readWS(t, conn)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusInternalError || ce.Reason != wantReason {
		t.Fatalf("after the error frame: %v, want close 1011 %q", err, wantReason)
	}
}

// scaledNoise is the observation with its noise scaled: a distinct request per k.
func (o testObservation) scaled(k int) testObservation {
	c := o
	c.noise = make([]float32, len(o.noise))
	for i, v := range o.noise {
		c.noise[i] = v * (1 + 0.25*float32(k))
	}
	return c
}

// OpenPI's protocol: /healthz, the metadata frame first, replies in request order equal to the JSON
// API's for the same observation, server_timing, and an error frame + 1011 on a bad observation
// while the server keeps serving, on /openpi/policy and on / (where stock clients connect).
func TestPI05OpenPIWebsocket(t *testing.T) {
	ts := newPI05TestServer(t, nil)
	resp, err := http.Get(ts.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "OK\n" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("/healthz: %d %q %s", resp.StatusCode, body, resp.Header.Get("Content-Type"))
	}
	o := newTestObservation(t)
	var want [][]uint32
	for k := range 3 {
		_, env := postJSON(t, ts.URL+"/v1/actions/generations", o.scaled(k).jsonBody(""))
		want = append(want, envelopeActions(t, env))
	}
	for _, path := range []string{"/openpi/policy", "/"} {
		t.Run(path, func(t *testing.T) {
			conn := dialWS(t, ts.URL+path+"?robot_id=arm-7")
			meta := readMsgpackFrame(t, conn)
			if meta["object"] != "action.metadata" || meta["robot_id"] != "arm-7" {
				t.Fatalf("metadata frame %v", meta)
			}
			openpi := meta["websocket"].(map[string]any)["openpi"].(map[string]any)
			if !strings.Contains(fmt.Sprint(openpi["camera_keys"]), "observation/wrist_image") {
				t.Errorf("metadata camera keys %v", openpi["camera_keys"])
			}
			// Three observations sent before reading any reply: answered in order.
			for k := range 3 {
				send(t, conn, websocket.MessageBinary, mustPack(t, o.scaled(k).bareObservation(t, nil)))
			}
			for k := range 3 {
				reply := readMsgpackFrame(t, conn)
				if fmt.Sprint(actionBits(t, reply["actions"])) != fmt.Sprint(want[k]) {
					t.Errorf("reply %d: actions differ from the JSON API's for request %d", k, k)
				}
				timing := reply["server_timing"].(map[string]any)
				if _, ok := timing["infer_ms"]; !ok || (k == 0) != (timing["prev_total_ms"] == nil) {
					t.Errorf("reply %d server_timing %v", k, timing)
				}
				if reply["policy_timing"] == nil {
					t.Errorf("reply %d without policy_timing", k)
				}
			}
			nan := float32Array([]float32{0.5, float32(math.NaN())}, 2)
			send(t, conn, websocket.MessageBinary, mustPack(t, o.bareObservation(t, map[string]any{"observation.state": nan})))
			expectErrorClose(t, conn, "observation.state: state[1] is NaN", openpiCloseReason)
		})
	}
	// The server is up: a new connection is served, a text frame is an error.
	conn := dialWS(t, ts.URL+"/openpi/policy")
	readMsgpackFrame(t, conn)
	send(t, conn, websocket.MessageBinary, mustPack(t, o.bareObservation(t, nil)))
	if reply := readMsgpackFrame(t, conn); fmt.Sprint(actionBits(t, reply["actions"])) != fmt.Sprint(want[0]) {
		t.Error("after the errors: actions differ")
	}
	send(t, conn, websocket.MessageText, []byte(`{"prompt": "json"}`))
	expectErrorClose(t, conn, "binary msgpack frame", openpiCloseReason)
	// A plain GET is not an upgrade.
	if resp, err := http.Get(ts.URL + "/openpi/policy"); err != nil || resp.StatusCode != http.StatusUpgradeRequired {
		t.Errorf("plain GET: %v %v", resp.StatusCode, err)
	}
}

// SGLang's realtime websocket: action.metadata, then one action.generation envelope (numpy actions)
// per request in order, with server_timing; errors close with 1011.
func TestPI05RealtimeWebsocket(t *testing.T) {
	ts := newPI05TestServer(t, nil)
	o := newTestObservation(t)
	_, env := postJSON(t, ts.URL+"/v1/actions/generations", o.jsonBody(""))
	want := envelopeActions(t, env)
	conn := dialWS(t, ts.URL+"/v1/actions/realtime")
	if meta := readMsgpackFrame(t, conn); meta["object"] != "action.metadata" || !strings.HasPrefix(fmt.Sprint(meta["robot_id"]), "realtime-") {
		t.Fatalf("metadata frame %v", meta)
	}
	for k := range 2 {
		send(t, conn, websocket.MessageBinary, o.msgpackEnvelope(t, nil))
		reply := readMsgpackFrame(t, conn)
		if reply["object"] != "action.generation" || fmt.Sprint(envelopeActions(t, reply)) != fmt.Sprint(want) {
			t.Errorf("reply %d: %v", k, reply["object"])
		}
		if _, isMap := reply["data"].([]any)[0].(map[string]any)["action"].(map[string]any)["values"].(map[string]any); !isMap {
			t.Errorf("reply %d: actions are not a numpy array", k)
		}
		if timing := reply["server_timing"].(map[string]any); (k == 0) != (timing["prev_total_ms"] == nil) {
			t.Errorf("reply %d server_timing %v", k, timing)
		}
	}
	send(t, conn, websocket.MessageBinary, mustPack(t, map[string]any{"input": map[string]any{}, "parameters": map[string]any{"action_horizon": 50}}))
	expectErrorClose(t, conn, "parameters.action_horizon: 50 differs", "Internal server error")
}

// A client that disconnects while its request runs leaves nothing behind: the handler ends, the
// connection gauge returns to 0, and the next client is served.
func TestPI05WebsocketClientDisconnect(t *testing.T) {
	ts := newPI05TestServer(t, nil)
	o := newTestObservation(t)
	for range 3 {
		conn := dialWS(t, ts.URL+"/openpi/policy")
		readMsgpackFrame(t, conn)
		send(t, conn, websocket.MessageBinary, mustPack(t, o.bareObservation(t, nil)))
		send(t, conn, websocket.MessageBinary, mustPack(t, o.bareObservation(t, nil)))
		conn.CloseNow() // before either reply
	}
	deadline := time.Now().Add(10 * time.Second)
	for servertest.MetricValue(t, ts.URL, `tt_model_websocket_connections{model="lerobot/pi05_base",protocol="openpi"}`) != "0" {
		if time.Now().After(deadline) {
			t.Fatalf("open openpi connections: %s after the clients left", servertest.MetricValue(t, ts.URL, `tt_model_websocket_connections{model="lerobot/pi05_base",protocol="openpi"}`))
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn := dialWS(t, ts.URL+"/openpi/policy")
	readMsgpackFrame(t, conn)
	send(t, conn, websocket.MessageBinary, mustPack(t, o.bareObservation(t, nil)))
	if reply := readMsgpackFrame(t, conn); reply["actions"] == nil {
		t.Errorf("next client: %v", reply)
	}
}

// At shutdown every websocket is closed with 1001.
func TestPI05WebsocketShutdown(t *testing.T) {
	ts, m := startPI05(t, nil)
	conn := dialWS(t, ts.URL+"/v1/actions/realtime")
	readMsgpackFrame(t, conn)
	m.ws.shutdown()
	_, _, err := readWS(t, conn)
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("after shutdown: %v, want close 1001", err)
	}
}

// Python robot clients written from the protocol descriptions (testdata/robot_clients.py, Debian's
// python3-msgpack and python3-websockets): SGLang msgpack over HTTP, OpenPI over / and
// /openpi/policy in four robot families' keys, the realtime websocket; all get the JSON API's actions
// bit for bit, and a bad observation gets OpenPI's error frame and close.
func TestPI05PythonRobotClients(t *testing.T) {
	testenv.Require(t, "python3-msgpack")
	testenv.Require(t, "python3-websockets")
	ts := newPI05TestServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, testenv.Python, filepath.Join("testdata", "robot_clients.py"), ts.URL).CombinedOutput()
	t.Logf("robot_clients.py:\n%s", out)
	if err != nil {
		t.Fatalf("robot_clients.py: %v", err)
	}
	if n := strings.Count(string(out), `"ok": true`); n != 18 {
		t.Errorf("%d checks passed, want 18", n)
	}
}

// Websocket and HTTP requests at once go through the one scheduler to the device: every reply is
// the observation's own (a request running over another's would mix their prefixes).
func TestPI05WebsocketAndHTTPShareTheScheduler(t *testing.T) {
	ts := newPI05TestServer(t, nil)
	o := newTestObservation(t)
	var want [][]uint32
	for k := range 2 {
		_, env := postJSON(t, ts.URL+"/v1/actions/generations", o.scaled(k).jsonBody(""))
		want = append(want, envelopeActions(t, env))
	}
	errs := make(chan string, 64)
	var wg sync.WaitGroup
	for c := range 2 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			conn := dialWS(t, ts.URL+"/openpi/policy")
			readMsgpackFrame(t, conn)
			for range 4 {
				send(t, conn, websocket.MessageBinary, mustPack(t, o.scaled(c).bareObservation(t, nil)))
				if got := actionBits(t, readMsgpackFrame(t, conn)["actions"]); fmt.Sprint(got) != fmt.Sprint(want[c]) {
					errs <- fmt.Sprintf("websocket %d: another request's actions", c)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 4 {
				status, _, body := postBody(t, ts.URL+"/v1/actions/generations", []byte(o.scaled(1-c).jsonBody("")), "Content-Type", "application/json")
				var env map[string]any
				if status != http.StatusOK || json.Unmarshal(body, &env) != nil || fmt.Sprint(envelopeActions(t, env)) != fmt.Sprint(want[1-c]) {
					errs <- fmt.Sprintf("HTTP %d: status %d or another request's actions", c, status)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// Messages of changing sizes on one connection are read whole, whatever the previous message's
// size (the buffer readMessage reserves from it) says: larger, smaller, empty, equal.
func TestReadMessageSizes(t *testing.T) {
	sizes := []int{300 << 10, 10, 1 << 20, 0, 1 << 20, 64 << 10, 64<<10 + 1}
	got := make(chan []byte, len(sizes))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		conn.SetReadLimit(MaxBodyBytes)
		hint := 0
		for range sizes {
			f, err := readMessage(r.Context(), conn, hint)
			if err != nil {
				close(got)
				return
			}
			got <- f.data
			hint = len(f.data)
		}
	}))
	defer ts.Close()
	conn := dialWS(t, ts.URL)
	for i, n := range sizes {
		msg := make([]byte, n)
		for j := range msg {
			msg[j] = byte(i + j)
		}
		send(t, conn, websocket.MessageBinary, msg)
		if b, ok := <-got; !ok || !bytes.Equal(b, msg) {
			t.Fatalf("message %d of %d bytes read as %d bytes (equal: %v)", i, n, len(b), bytes.Equal(b, msg))
		}
	}
}
