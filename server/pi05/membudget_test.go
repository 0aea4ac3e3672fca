package pi05

import (
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/server"
)

// A websocket frame is held from the moment it is received whole, the one read ahead too: a frame
// that does not fit is answered with the error frame and the close, and a frame read ahead of it
// is given back when the connection ends.
func TestPI05WebsocketFrameMemory(t *testing.T) {
	o := newTestObservation(t)
	frame := mustPack(t, o.bareObservation(t, nil))
	// Room for the body but not for its decoded camera frames.
	base, _ := runPI05(t, nil, server.Options{RequestMemory: int64(len(frame)) + 1024})
	conn := dialWS(t, base+"/openpi/policy")
	readMsgpackFrame(t, conn)
	send(t, conn, websocket.MessageBinary, frame)
	send(t, conn, websocket.MessageBinary, frame)
	expectErrorClose(t, conn, "413 Request Entity Too Large: this request needs", openpiCloseReason)
	for deadline := time.Now().Add(10 * time.Second); servertest.MetricValue(t, base, "tt_model_request_memory_bytes") != "0"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s bytes still held after the connection ended", servertest.MetricValue(t, base, "tt_model_request_memory_bytes"))
		}
	}
}
