package pi05

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/server"
	"github.com/ttmodel/tt-model/server/modeltest"
)

// panickyPI05 is a loaded pi0.5 model whose handlers panic once a request has run, while armed.
type panickyPI05 struct {
	loadedPI05
	armed *atomic.Bool
}

func (m panickyPI05) Routes() []server.Route {
	return modeltest.Panicking(m.Model.Routes(), "queue", m.armed)
}

// bigObservation is the test observation with both cameras 480x640: a body of 1.8 MB and as much
// again in frames.
func bigObservation(t *testing.T) testObservation {
	o := newTestObservation(t)
	for i := range o.frames {
		o.h[i], o.w[i] = 480, 640
		o.frames[i] = make([]uint8, 480*640*3)
		for j := range o.frames[i] {
			o.frames[i][j] = uint8(j * (i + 3))
		}
	}
	return o
}

// A panic in any handler is a 500 (HTTP) or the error frame and close 1011 (websocket) and gives
// back everything the request held: after a panic on every route, each with a request of 3.7 MB
// (msgpack) or 7.4 MB (JSON) in a budget of 10 MiB and one request slot, valid large requests still
// run and /metrics shows the budget at zero. (A panicking websocket frame once kept its reservation for good.)
func TestPanickingHandlersGiveEverythingBack(t *testing.T) {
	var armed atomic.Bool
	m := newPI05TestModel(t, map[string]string{"PI05_HTTP_THREADS": "1"})
	s := server.New(panickyPI05{loadedPI05{m}, &armed}, server.Options{Log: servertest.DiscardLog(), RequestMemory: 10 << 20})
	s.MarkLoaded()
	ctx, cancel := context.WithCancel(context.Background())
	base, done := servertest.Run(t, ctx, s.Run)
	t.Cleanup(func() { cancel(); <-done })

	o := bigObservation(t)
	envelope := o.msgpackEnvelope(t, nil)
	bare := mustPack(t, o.bareObservation(t, nil))
	armed.Store(true)
	for _, c := range []struct {
		name, path, ctype string
		body              []byte
	}{
		{"predict", "/predict", "application/json", []byte(predictJSON(o))},
		{"generations json", "/v1/actions/generations", "application/json", []byte(o.jsonBody(""))},
		{"generations msgpack", "/v1/actions/generations", "application/msgpack", envelope},
		{"generations bare msgpack", "/v1/actions/generations", "application/msgpack", bare},
	} {
		status, _, out := postBody(t, base+c.path, c.body, "Content-Type", c.ctype)
		if status != http.StatusInternalServerError || !strings.Contains(string(out), "internal error: test: handler panics at queue") {
			t.Errorf("%s: %d %s, want a 500 naming the panic", c.name, status, out)
		}
		servertest.WaitMetric(t, base, "tt_model_request_memory_bytes", 0)
	}
	for _, c := range []struct {
		path, reason string
		frame        []byte
	}{
		{"/v1/actions/realtime", "Internal server error", envelope},
		{"/openpi/policy", openpiCloseReason, bare},
		{"/", openpiCloseReason, bare},
	} {
		conn := dialWS(t, base+c.path)
		readMsgpackFrame(t, conn)
		send(t, conn, websocket.MessageBinary, c.frame)
		expectErrorClose(t, conn, "500 Internal Server Error: internal error: test: handler panics at queue", c.reason)
		servertest.WaitMetric(t, base, "tt_model_request_memory_bytes", 0)
	}
	for _, proto := range []string{"openpi", "realtime"} {
		servertest.WaitMetric(t, base, `tt_model_websocket_connections{model="lerobot/pi05_base",protocol="`+proto+`"}`, 0)
	}

	armed.Store(false)
	if status, _, out := postBody(t, base+"/predict", []byte(predictJSON(o)), "Content-Type", "application/json"); status != http.StatusOK {
		t.Fatalf("a valid large request after the panics: %d %s", status, out)
	}
	conn := dialWS(t, base+"/openpi/policy")
	readMsgpackFrame(t, conn)
	send(t, conn, websocket.MessageBinary, bare)
	if reply := readMsgpackFrame(t, conn); reply["actions"] == nil {
		t.Fatalf("a valid large frame after the panics: %v", reply)
	}
	conn.Close(websocket.StatusNormalClosure, "")
	servertest.WaitMetric(t, base, "tt_model_request_memory_bytes", 0)
}

// predictJSON is the observation as a /predict body (frames as nested lists).
func predictJSON(o testObservation) string {
	var b strings.Builder
	b.WriteString(`{"prompt": "go", "images": [`)
	for i := range o.frames {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('[')
		for y := range o.h[i] {
			if y > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('[')
			for x := range o.w[i] {
				if x > 0 {
					b.WriteByte(',')
				}
				p := o.frames[i][(y*o.w[i]+x)*3:]
				fmt.Fprintf(&b, "[%d,%d,%d]", p[0], p[1], p[2])
			}
			b.WriteByte(']')
		}
		b.WriteByte(']')
	}
	b.WriteString(`]}`)
	return b.String()
}

// sendHead opens a connection and sends a POST's headers and the first bytes of its body (chunked
// when length is -1), then nothing: a body being received.
func sendHead(t *testing.T, base string, length int, first []byte) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := "POST /v1/actions/generations HTTP/1.1\r\nHost: x\r\nContent-Type: application/msgpack\r\n"
	if length < 0 {
		fmt.Fprintf(c, "%sTransfer-Encoding: chunked\r\n\r\n%x\r\n", head, len(first))
	} else {
		fmt.Fprintf(c, "%sContent-Length: %d\r\n\r\n", head, length)
	}
	if _, err := c.Write(first); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// Bodies still being received are inside the memory budget: a declared length is reserved before
// the body is read, so a body that does not fit beside them is refused at once (503 with
// Retry-After, its body never read), and a chunked body holds what it has received so far. Once the
// senders go away everything is given back. (Bodies in flight were outside the budget: eight 60 MB
// ones took a server with a 256 MiB budget to 513 MB.)
func TestBodiesInFlightAreInTheBudget(t *testing.T) {
	const mib = 1 << 20
	base, _ := runPI05(t, nil, server.Options{RequestMemory: 8 * mib, Body: server.BodyLimits{Idle: 20 * time.Second, MinRate: 1, Grace: time.Hour}})
	c1, _ := sendHead(t, base, 3*mib, []byte{0x80})
	servertest.WaitMetric(t, base, "tt_model_request_memory_bytes", 3*mib)
	c2, _ := sendHead(t, base, 3*mib, []byte{0x80})
	servertest.WaitMetric(t, base, "tt_model_request_memory_bytes", 6*mib)

	c3, r3 := sendHead(t, base, 3*mib, nil)
	_ = c3.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(r3, nil)
	if err != nil {
		t.Fatalf("a body that does not fit beside two being received: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("a body that does not fit beside two being received: %d, Retry-After %q; want 503, 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	c1.Close()
	c2.Close()
	servertest.WaitMetric(t, base, "tt_model_request_memory_bytes", 0)

	// A chunked body is held as it arrives: once all of it is in, at least its 3 MiB (its buffer
	// doubles; while a buffer is copied into the next both are held, so the value is read settled).
	c4, _ := sendHead(t, base, -1, make([]byte, 3*mib))
	for deadline, last := time.Now().Add(10*time.Second), -1.0; ; time.Sleep(100 * time.Millisecond) {
		held := servertest.MetricNumber(t, base, "tt_model_request_memory_bytes")
		if held >= 3*mib && held == last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a chunked body of 3 MiB being received holds %v bytes", held)
		}
		last = held
	}
	if code, out := postBytes(t, base, make([]byte, 6*mib)); code != http.StatusServiceUnavailable {
		t.Errorf("6 MiB beside a 3 MiB chunked body being received: %d %s, want 503", code, out)
	}
	c4.Close()
	servertest.WaitMetric(t, base, "tt_model_request_memory_bytes", 0)

	o := newTestObservation(t)
	if code, out := postBytes(t, base, o.msgpackEnvelope(t, nil)); code != http.StatusOK {
		t.Errorf("a valid request after: %d %s", code, out)
	}
	servertest.WaitMetric(t, base, "tt_model_request_memory_bytes", 0)
}

func postBytes(t *testing.T, base string, body []byte) (int, string) {
	t.Helper()
	status, _, out := postBody(t, base+"/v1/actions/generations", body, "Content-Type", "application/msgpack")
	return status, string(out)
}
