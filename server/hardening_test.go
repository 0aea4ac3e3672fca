package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/models/rfdetr"
)

// slowNetwork is an RF-DETR network that takes a while and counts overlapping forwards.
type slowNetwork struct {
	delay             time.Duration
	inFlight, maxSeen atomic.Int32
}

func (n *slowNetwork) Forward(_ context.Context, _, _, _ []float32) error {
	if c := n.inFlight.Add(1); c > n.maxSeen.Load() {
		n.maxSeen.Store(c)
	}
	time.Sleep(n.delay)
	n.inFlight.Add(-1)
	return nil
}

func (n *slowNetwork) Close() error { return nil }

// loadedRFDETR is an RF-DETR model whose detector the test set: Run's Load has nothing to do.
type loadedRFDETR struct{ *RFDETR }

func (loadedRFDETR) Load(context.Context, *slog.Logger) error { return nil }

// runRFDETR serves an RF-DETR model on net through Server.Run on a real socket.
func runRFDETR(t *testing.T, net rfdetr.Network, opts Options) (base string, s *Server) {
	t.Helper()
	m := NewRFDETR(RFDETROptions{Getenv: func(string) string { return "" }, Device: "cpu test", Version: "test"})
	m.log = discardLog()
	m.det = newDetectorForTest(net)
	opts.Log = discardLog()
	s = New(loadedRFDETR{m}, opts)
	s.ready.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	base, done := startRun(t, ctx, s)
	t.Cleanup(func() { cancel(); <-done })
	return base, s
}

// stall opens a connection, sends the headers of a POST with a 1 MB body and its first byte,
// then nothing: a slow or silent client.
func stall(t *testing.T, base, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{", path)
	return c
}

// answered reports whether c has received any bytes within wait, and the status line if so.
func answered(c net.Conn, wait time.Duration) (bool, string) {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil || line != "", strings.TrimSpace(line)
}

// Issue: a slow or silent client must never hold the model. Five clients send headers and "{"
// and stall; a good request after them is answered while they still hang (no answer has reached
// any of them), and each stalled one is then cut off with a 408 by the body idle timeout.
func TestStalledClientsDoNotHoldTheModel(t *testing.T) {
	limits := BodyLimits{Idle: 2 * time.Second, MinRate: 1, Grace: time.Hour}
	for _, tc := range []struct {
		name string
		base func(t *testing.T) string
		good func(t *testing.T, base string) int
	}{
		{"rf-detr", func(t *testing.T) string {
			base, _ := runRFDETR(t, &slowNetwork{delay: 50 * time.Millisecond}, Options{Body: limits})
			return base
		}, func(t *testing.T, base string) int {
			code, _ := post(t, base+"/predict", fmt.Sprintf(`{"image": %q}`, pngB64(t, 32, 24)))
			return code
		}},
		{"pi05", func(t *testing.T) string {
			base, _ := runPI05(t, nil, Options{Body: limits})
			return base
		}, func(t *testing.T, base string) int {
			img, _ := pi05Frame(t, 16, 16, 1)
			code, _ := post(t, base+"/predict", fmt.Sprintf(`{"images": [%q], "prompt": "go", "seed": 1}`, img))
			return code
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.base(t)
			var stalled []net.Conn
			for range 5 {
				stalled = append(stalled, stall(t, base, "/predict"))
			}
			time.Sleep(100 * time.Millisecond) // the stalled bodies are being read
			if code := tc.good(t, base); code != http.StatusOK {
				t.Fatalf("the good request after 5 stalled clients: %d", code)
			}
			for i, c := range stalled {
				if got, line := answered(c, 10*time.Millisecond); got {
					t.Fatalf("stalled client %d was answered (%q) before the good request: the good one waited for it", i, line)
				}
			}
			for i, c := range stalled {
				if got, line := answered(c, 10*time.Second); !got || !strings.Contains(line, "408") {
					t.Errorf("stalled client %d: %q, want a 408 once the body idle timeout passed", i, line)
				}
			}
		})
	}
}

// RF-DETR runs one forward at a time (one set of buffers), now that the server core no longer
// serialises requests.
func TestRFDETRForwardsOneAtATime(t *testing.T) {
	net := &slowNetwork{delay: 30 * time.Millisecond}
	base, _ := runRFDETR(t, net, Options{})
	body := fmt.Sprintf(`{"image": %q}`, pngB64(t, 16, 16))
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, b := post(t, base+"/predict", body); code != 200 {
				t.Errorf("predict: %d %s", code, b)
			}
		}()
	}
	wg.Wait()
	if n := net.maxSeen.Load(); n != 1 {
		t.Errorf("%d forwards overlapped, want 1", n)
	}
}

// A client that disconnects before its answer is its own outcome on /metrics (499), not a 500.
func TestClientDisconnectCountedAs499(t *testing.T) {
	base, _ := runRFDETR(t, &slowNetwork{delay: 400 * time.Millisecond}, Options{})
	body := fmt.Sprintf(`{"image": %q}`, pngB64(t, 16, 16))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/predict", strings.NewReader(body))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("the request was answered within 100 ms; the network takes 400")
	}
	var m string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if m = string(b); strings.Contains(m, `tt_model_client_disconnects_total{model="RF-DETR-base",route="predict"} 1`) {
			break
		}
	}
	if !strings.Contains(m, `code="499"`) || !strings.Contains(m, `tt_model_client_disconnects_total{model="RF-DETR-base",route="predict"} 1`) {
		t.Errorf("/metrics after a client left:\n%s", servertest.GrepLines(m, "predict"))
	}
	if strings.Contains(m, `code="500"`) {
		t.Errorf("a disconnect was counted as a 500:\n%s", servertest.GrepLines(m, "predict"))
	}
}
