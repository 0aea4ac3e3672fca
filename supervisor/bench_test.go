package supervisor

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkHangRestart measures the time from a server's exit 75 to the
// next server's start, over 20 restarts per iteration, without the reset
// itself (no chips and the default reset command: the reset and the chip
// check are skipped, the hang marker is still written and removed). Each server stamps its exit just
// before exit(2) and its start first thing in main, so the figure includes
// the reap, the restart decision, fork+exec and the Go runtime start of the
// test server.
//
//	go test ./supervisor -run '^$' -bench HangRestart -benchtime 1x
func BenchmarkHangRestart(b *testing.B) {
	const restarts = 20
	var lat []time.Duration
	for b.Loop() {
		h := newHarness(b)
		h.cfg.Chips = nil
		h.cfg.DevDir = h.dir + "/no-chips"
		h.cfg.ResetCmd = DefaultResetCmd
		h.cfg.MaxRestarts = restarts
		h.cfg.Argv = []string{testServerBin, "-record", h.record, "-plan", "early:75"}
		s := h.start()
		<-s.done
		if s.code != HangExitCode {
			b.Fatalf("supervisor exit %d, want 75; output:\n%s", s.code, s.stderr.String())
		}
		var exitAt int64
		for _, e := range h.events() {
			f := strings.Fields(e)
			switch f[0] {
			case "exit":
				exitAt, _ = strconv.ParseInt(f[2], 10, 64)
			case "start":
				at, _ := strconv.ParseInt(f[2], 10, 64)
				if exitAt != 0 {
					lat = append(lat, time.Duration(at-exitAt))
				}
			}
		}
	}
	if len(lat) == 0 {
		b.Fatal("no restarts measured")
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.9), "p90-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(len(lat)), "restarts")
}
