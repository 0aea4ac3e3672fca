package server

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ttmodel/tt-model/models/imagemem"
	"github.com/ttmodel/tt-model/models/imagemem/imagememtest"
)

func TestRequestMemoryFromEnv(t *testing.T) {
	for _, c := range []struct {
		value string
		want  int64
		err   string
	}{
		{"", DefaultRequestMemory, ""},
		{"512", 512 << 20, ""},
		{" 64 ", 64 << 20, ""},
		{"0", 0, ""},
		{"1048576", 1 << 40, ""},
		{"1048577", 0, `TT_REQUEST_MEMORY_MB="1048577": want MiB from 0 (no budget) to 1048576`},
		{"-1", 0, "want MiB"},
		{"1GiB", 0, "want MiB"},
	} {
		got, err := RequestMemoryFromEnv(func(k string) string {
			if k == RequestMemoryEnv {
				return c.value
			}
			return ""
		})
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: %d, %v; want %d, %q", c.value, got, err, c.want, c.err)
		}
	}
}

// waitHeld polls /metrics until the request memory budget holds something: a request is past its
// decode and waiting for (or in) the model.
func waitHeld(t *testing.T, base string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); metricValue(t, base, "tt_model_request_memory_bytes") == "0"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no request ever held memory")
		}
	}
}

// RF-DETR through Server.Run on a socket: a request holds its body and its decoded picture while it
// waits for the forward; another that does not fit beside it gets a 503 with Retry-After, one that
// could never fit a 413, and everything is given back once answered.
func TestRFDETRRequestMemoryBudget(t *testing.T) {
	pic := imagememtest.JPEG{Width: 600, Height: 600, Progressive: true}.Encode() // 5.4 MB to decode
	hd, _ := imagemem.ReadHeader(pic)
	budget := hd.DecodeBytes * 3 / 2
	base, _ := runRFDETR(t, &slowNetwork{delay: 2 * time.Second}, Options{RequestMemory: budget})
	body := fmt.Sprintf(`{"image": %q}`, base64.StdEncoding.EncodeToString(pic))

	first := make(chan int, 1)
	go func() {
		code, _ := post(t, base+"/predict", body)
		first <- code
	}()
	waitHeld(t, base)
	resp, err := http.Post(base+"/predict", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("beside a held request: %d, Retry-After %q; want 503 with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if code := <-first; code != http.StatusOK {
		t.Errorf("the held request: %d", code)
	}

	big := imagememtest.JPEG{Width: 1000, Height: 1000, Progressive: true}.Encode() // 15 MB to decode
	code, answer := post(t, base+"/predict", fmt.Sprintf(`{"image": %q}`, base64.StdEncoding.EncodeToString(big)))
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(answer, "more than the server's whole request memory budget") {
		t.Errorf("a request larger than the budget: %d %s", code, answer)
	}
	if held := metricValue(t, base, "tt_model_request_memory_bytes"); held != "0" {
		t.Errorf("%s bytes still held after every answer", held)
	}
}

// A websocket frame is held from the moment it is received whole, the one read ahead too: a frame
// that does not fit is answered with the error frame and the close, and a frame read ahead of it
// is given back when the connection ends.
func TestPI05WebsocketFrameMemory(t *testing.T) {
	o := newTestObservation(t)
	frame := mustPack(t, o.bareObservation(t, nil))
	// Room for the body but not for its decoded camera frames.
	base, _ := runPI05(t, nil, Options{RequestMemory: int64(len(frame)) + 1024})
	conn := dialWS(t, base+"/openpi/policy")
	readMsgpackFrame(t, conn)
	send(t, conn, websocket.MessageBinary, frame)
	send(t, conn, websocket.MessageBinary, frame)
	expectErrorClose(t, conn, "413 Request Entity Too Large: this request needs", openpiCloseReason)
	for deadline := time.Now().Add(10 * time.Second); metricValue(t, base, "tt_model_request_memory_bytes") != "0"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s bytes still held after the connection ended", metricValue(t, base, "tt_model_request_memory_bytes"))
		}
	}
}
