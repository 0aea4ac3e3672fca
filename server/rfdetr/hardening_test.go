package rfdetr

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/server"
	"github.com/ttmodel/tt-model/server/modeltest"
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
type loadedRFDETR struct{ *Model }

func (loadedRFDETR) Load(context.Context, *slog.Logger) error { return nil }

// runRFDETR serves an RF-DETR model on net through Server.Run on a real socket.
func runRFDETR(t *testing.T, net rfdetr.Network, opts server.Options) (base string, s *server.Server) {
	t.Helper()
	m := New(Options{Getenv: func(string) string { return "" }, Device: "cpu test", Version: "test"})
	m.log = servertest.DiscardLog()
	m.det = newDetectorForTest(net)
	opts.Log = servertest.DiscardLog()
	s = server.New(loadedRFDETR{m}, opts)
	s.MarkLoaded()
	ctx, cancel := context.WithCancel(context.Background())
	base, done := servertest.Run(t, ctx, s.Run)
	t.Cleanup(func() { cancel(); <-done })
	return base, s
}

// Issue: a slow or silent client must never hold the model (modeltest.CheckStalledClients), with an
// RF-DETR request as the good one.
func TestStalledClientsDoNotHoldTheModel(t *testing.T) {
	limits := server.BodyLimits{Idle: 2 * time.Second, MinRate: 1, Grace: time.Hour}
	base, _ := runRFDETR(t, &slowNetwork{delay: 50 * time.Millisecond}, server.Options{Body: limits})
	modeltest.CheckStalledClients(t, base, func() int {
		code, _ := servertest.Post(t, base+"/predict", fmt.Sprintf(`{"image": %q}`, pngB64(t, 32, 24)))
		return code
	})
}

// RF-DETR runs one forward at a time (one set of buffers), now that the server core no longer
// serialises requests.
func TestRFDETRForwardsOneAtATime(t *testing.T) {
	net := &slowNetwork{delay: 30 * time.Millisecond}
	base, _ := runRFDETR(t, net, server.Options{})
	body := fmt.Sprintf(`{"image": %q}`, pngB64(t, 16, 16))
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, b := servertest.Post(t, base+"/predict", body); code != 200 {
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
	base, _ := runRFDETR(t, &slowNetwork{delay: 400 * time.Millisecond}, server.Options{})
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
