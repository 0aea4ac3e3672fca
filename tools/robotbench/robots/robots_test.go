package robots

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// A stand-in with the server's contract (/info's megakernel.slo, X-TT-Device, X-TT-Batched-As,
// 503 for a robot beyond capacity): two robots are served, the third is retired by its 503.
func TestSessionAgainstAStandIn(t *testing.T) {
	var mu sync.Mutex
	admitted := map[string]string{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/info" {
			_, _ = w.Write([]byte(`{"status": "ok", "config": {"PI05_NUM_IMAGES": 1}, "megakernel": {"slo": {"slo_ms": 1000, "slo_p99_ms": 1000, "r_max": 2, "robot_idle_s": 0.01}}}`))
			return
		}
		var body struct {
			RobotID string   `json:"robot_id"`
			Images  []string `json:"images"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Images) != 1 {
			w.WriteHeader(400)
			return
		}
		mu.Lock()
		dev, ok := admitted[body.RobotID]
		if !ok && len(admitted) < 2 {
			dev = []string{"0", "1"}[len(admitted)]
			admitted[body.RobotID], ok = dev, true
		}
		mu.Unlock()
		if !ok {
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(503)
			_, _ = w.Write([]byte(`{"detail": "capacity: 2 of 2 robot slots are taken"}`))
			return
		}
		time.Sleep(5 * time.Millisecond)
		w.Header().Set("X-TT-Device", dev)
		w.Header().Set("X-TT-Batched-As", "1")
		_, _ = w.Write([]byte(`{"actions": [[0]]}`))
	}))
	defer ts.Close()
	var table bytes.Buffer
	sessions, err := Run(context.Background(), Options{URL: ts.URL, Robots: []int{3}, Duration: 300 * time.Millisecond, Side: 8}, &table)
	if err != nil || len(sessions) != 1 {
		t.Fatal(sessions, err)
	}
	s := sessions[0]
	if s.Rejected != 1 || s.Completed < 2 || len(s.PerDevice) != 2 || s.WithinSLO == nil || !*s.WithinSLO || s.RMax != 2 {
		t.Errorf("session %+v", s)
	}
	for _, want := range []string{"3 robots", "robot-0", "503 after ms", "mean batch"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}
