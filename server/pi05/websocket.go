package pi05

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/ttmodel/tt-model/server"
)

// The pi0.5 server's msgpack websockets (/v1/actions/realtime and OpenPI's /openpi/policy) share one
// connection loop, read from OpenPI's WebsocketPolicyServer and SGLang's websocket routes: the
// metadata frame on connect, then one reply per binary frame, in order, each with server_timing
// {infer_ms, prev_total_ms (from the 2nd reply on)}; a request that fails gets a text frame with the
// error and the connection is closed with 1011 (the server keeps serving others).

// wsWriteTimeout bounds one frame's write: a client that stops reading cannot hold its handler.
const wsWriteTimeout = 30 * time.Second

// wsProtocol is one websocket route.
type wsProtocol struct {
	name        string // "realtime", "openpi": labels metrics, logs, default robot ids
	closeReason string // the close reason after an error frame
	// handle answers one binary frame of robot's connection; prevTotal is the previous request's
	// receive-to-sent time (0 on the first); mem holds the frame in the memory budget. An error
	// becomes the error frame.
	handle func(ctx context.Context, robot string, frame []byte, prevTotal time.Duration, mem *server.Reservation, rec server.Recorder) ([]byte, *server.APIError)
}

// wsHub tracks the open websockets: a count per protocol for /metrics, and a channel closed at
// shutdown that ends every connection with 1001 once its request in progress is answered.
type wsHub struct {
	open      sync.Map // protocol name -> *atomic.Int64
	seq       atomic.Int64
	done      chan struct{}
	closeOnce sync.Once
	running   sync.WaitGroup // the connection loops
}

func newWSHub() *wsHub { return &wsHub{done: make(chan struct{})} }

func (h *wsHub) counter(name string) *atomic.Int64 {
	c, _ := h.open.LoadOrStore(name, new(atomic.Int64))
	return c.(*atomic.Int64)
}

func (h *wsHub) shutdown() { h.closeOnce.Do(func() { close(h.done) }) }

// wait waits up to limit for every connection loop to end; false when some still run.
func (h *wsHub) wait(limit time.Duration) bool {
	ended := make(chan struct{})
	go func() {
		h.running.Wait()
		close(ended)
	}()
	select {
	case <-ended:
		return true
	case <-time.After(limit):
		return false
	}
}

// countPrediction counts an answered request when rec counts them (PredictionCounter); tests pass
// plain Recorders.
func countPrediction(rec server.Recorder) {
	if c, ok := rec.(server.PredictionCounter); ok {
		c.Predicted()
	}
}

// robotID is the identity of the robot behind a connection: the client's own (header X-Robot-ID or
// query robot_id), else one per connection ("openpi-3").
func (h *wsHub) robotID(r *http.Request, proto string) string {
	if id := r.Header.Get("X-Robot-ID"); id != "" {
		return id
	}
	if id := r.URL.Query().Get("robot_id"); id != "" {
		return id
	}
	return fmt.Sprintf("%s-%d", proto, h.seq.Add(1))
}

// wsFrame is a frame received whole: held in the memory budget by mem from before it was read
// until it is answered, or refused by it (refused: the connection ends after the error frame).
type wsFrame struct {
	typ     websocket.MessageType
	data    []byte
	mem     *server.Reservation
	refused *server.APIError
}

// readMessage reads the next message inside a reservation of its own, grown as the message arrives
// (server.BodyBuffer): a message being received counts against the budget as one received does. A
// refusal comes back as the frame's refused, with nothing held; the reader then reads no more.
// hint is the size of the connection's previous message: robots send messages of one size, so the
// buffer is reserved and allocated at that size once instead of doubling up to it (when the budget
// cannot hold the hint now, the message is read as if there were none).
func readMessage(ctx context.Context, conn *websocket.Conn, hint int) (wsFrame, error) {
	typ, r, err := conn.Reader(ctx)
	if err != nil {
		return wsFrame{}, err
	}
	mem := server.RequestMemory(ctx)
	buf := server.NewBodyBuffer(MaxBodyBytes, mem)
	if hint > 0 {
		_ = buf.Grow(min(hint+1, MaxBodyBytes))
	}
	for {
		_, rerr, err := buf.ReadChunk(r)
		if rerr != nil {
			mem.Done()
			// The rest is read and dropped: closing with it unread would reset the connection
			// and could lose the error frame on its way to the client.
			_, _ = io.Copy(io.Discard, r)
			return wsFrame{typ: typ, refused: server.MemoryAPIError(rerr)}, nil
		}
		if errors.Is(err, io.EOF) {
			return wsFrame{typ: typ, data: buf.Bytes(), mem: mem}, nil
		}
		if err != nil {
			mem.Done()
			return wsFrame{}, err
		}
	}
}

// serveWebsocket upgrades the request and runs proto's loop until the client leaves, a request
// fails, or the server shuts down.
func (m *Model) serveWebsocket(w http.ResponseWriter, r *http.Request, rec server.Recorder, proto wsProtocol) {
	// The server's read timeout is meant for request bodies: a robot stays connected for hours.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return // Accept answered the client (426 for a plain GET, 403 for a foreign Origin)
	}
	defer conn.CloseNow()
	m.ws.running.Add(1)
	defer m.ws.running.Done()
	conn.SetReadLimit(MaxBodyBytes)
	robot := m.ws.robotID(r, proto.name)
	open := m.ws.counter(proto.name)
	open.Add(1)
	defer open.Add(-1)
	log := m.log.With("protocol", proto.name, "robot", robot, "remote", r.RemoteAddr)
	log.Info("websocket opened")
	defer log.Info("websocket closed")

	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	meta := m.actionMetadata()
	meta["robot_id"] = robot
	if err := m.writeFrame(ctx, conn, websocket.MessageBinary, meta); err != nil {
		log.Warn("websocket metadata frame not sent", "err", err)
		return
	}
	// One reader ahead of the handler: a client that disconnects cancels ctx, so a request still
	// waiting for the model is dropped; replies stay in request order.
	frames := make(chan wsFrame, 1)
	go func() {
		defer close(frames)
		defer cancel()
		hint := 0
		for {
			f, err := readMessage(ctx, conn, hint)
			if err != nil {
				return
			}
			hint = len(f.data)
			select {
			case frames <- f:
			case <-ctx.Done():
				f.mem.Done()
				return
			}
			if f.refused != nil { // the connection ends once the loop has answered it
				<-ctx.Done() // returning now would cancel ctx under the frame ahead of it
				return
			}
		}
	}()
	defer func() { // a frame read ahead and never answered gives its memory back
		cancel()
		for f := range frames {
			f.mem.Done()
		}
	}()
	var prevTotal time.Duration
	for {
		var f wsFrame
		var ok bool
		select {
		case <-m.ws.done:
		case f, ok = <-frames:
			if !ok {
				return
			}
		}
		select {
		case <-m.ws.done: // also when a frame was ready at the same moment
			f.mem.Done()
			_ = conn.Close(websocket.StatusGoingAway, "server shutting down")
			return
		default:
		}
		start := time.Now()
		reply, aerr := m.answerFrame(ctx, log, robot, f, prevTotal, rec, proto)
		if aerr != nil {
			if ctx.Err() != nil { // the client left while its request waited
				return
			}
			log.Warn("websocket request failed", "status", aerr.Status, "error", aerr.Detail)
			wctx, done := context.WithTimeout(ctx, wsWriteTimeout)
			_ = conn.Write(wctx, websocket.MessageText, []byte(fmt.Sprintf("%d %s: %s", aerr.Status, http.StatusText(aerr.Status), aerr.Detail)))
			done()
			_ = conn.Close(websocket.StatusInternalError, proto.closeReason)
			return
		}
		wctx, done := context.WithTimeout(ctx, wsWriteTimeout)
		err := conn.Write(wctx, websocket.MessageBinary, reply)
		done()
		if err != nil {
			return
		}
		prevTotal = time.Since(start)
	}
}

// answerFrame answers one frame and gives its memory back, whatever happens: a panic in the
// handler is logged with its stack and answered as a 500 (the error frame and close 1011), and
// every hold it had (memory, a request slot) was released by the defers on its way up.
func (m *Model) answerFrame(ctx context.Context, log *slog.Logger, robot string, f wsFrame, prevTotal time.Duration, rec server.Recorder, proto wsProtocol) (reply []byte, aerr *server.APIError) {
	defer f.mem.Done()
	defer func() {
		if p := recover(); p != nil {
			log.Error("websocket request panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			reply, aerr = nil, &server.APIError{Status: http.StatusInternalServerError, Detail: fmt.Sprintf("internal error: %v", p)}
		}
	}()
	switch {
	case f.refused != nil:
		return nil, f.refused
	case f.typ != websocket.MessageBinary:
		return nil, &server.APIError{Status: http.StatusBadRequest, Detail: "a text frame: send each request as a binary msgpack frame"}
	}
	if reply, aerr = proto.handle(ctx, robot, f.data, prevTotal, f.mem, rec); aerr == nil {
		countPrediction(rec)
	}
	return reply, aerr
}

// writeFrame packs v and writes it within wsWriteTimeout.
func (m *Model) writeFrame(ctx context.Context, conn *websocket.Conn, typ websocket.MessageType, v any) error {
	b, err := packMsgpack(v)
	if err != nil {
		return err
	}
	wctx, done := context.WithTimeout(ctx, wsWriteTimeout)
	defer done()
	return conn.Write(wctx, typ, b)
}

// serverTiming is OpenPI's server_timing: this request's inference and the previous request's total.
func serverTiming(infer, prevTotal time.Duration) map[string]float64 {
	t := map[string]float64{"infer_ms": server.Millis(infer)}
	if prevTotal > 0 {
		t["prev_total_ms"] = server.Millis(prevTotal)
	}
	return t
}

// realtime serves /v1/actions/realtime: each binary frame is a /v1/actions/generations body in
// msgpack; each reply the action.generation envelope (numpy actions unless output_format is list)
// with server_timing.
func (m *Model) realtime(w http.ResponseWriter, r *http.Request, rec server.Recorder) {
	m.serveWebsocket(w, r, rec, wsProtocol{name: "realtime", closeReason: "Internal server error", handle: m.realtimeFrame})
}

func (m *Model) realtimeFrame(ctx context.Context, robot string, frame []byte, prevTotal time.Duration, mem *server.Reservation, rec server.Recorder) ([]byte, *server.APIError) {
	return m.actOnFrame(ctx, robot, frame, mem, rec, func(ar *actionRequest, inf *inference, start time.Time) map[string]any {
		out := m.envelope(ar, inf, start)
		out["server_timing"] = serverTiming(time.Since(start), prevTotal)
		return out
	})
}

// actOnFrame decodes one websocket frame as an action request (msgpack out), runs it for the
// connection's robot and packs the reply that reply builds.
func (m *Model) actOnFrame(ctx context.Context, robot string, frame []byte, mem *server.Reservation, rec server.Recorder, reply func(*actionRequest, *inference, time.Time) map[string]any) ([]byte, *server.APIError) {
	start := time.Now()
	ar, aerr := m.decodeActionMsgpack(frame, true, mem)
	if aerr != nil {
		return nil, aerr
	}
	if ar.robot == "" {
		ar.robot = robot
	}
	inf, aerr := m.act(ctx, start, ar, rec)
	if aerr != nil {
		return nil, aerr
	}
	b, err := packMsgpack(reply(ar, inf, start))
	if err != nil {
		return nil, &server.APIError{Status: http.StatusInternalServerError, Detail: "cannot encode response: " + err.Error()}
	}
	return b, nil
}
