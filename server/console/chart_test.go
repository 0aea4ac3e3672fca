package console

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestScale(t *testing.T) {
	for _, c := range []struct{ v, step, top float64 }{
		{0, 0.2, 1}, {37, 10, 40}, {40, 10, 40}, {0.06, 0.02, 0.06}, {812.5, 500, 1000}, {3.2, 1, 4},
	} {
		step, top := scale(c.v)
		if (step-c.step) > 1e-12 || (c.step-step) > 1e-12 || (top-c.top) > 1e-9 || (c.top-top) > 1e-9 {
			t.Errorf("scale(%v) = %v, %v; want %v, %v", c.v, step, top, c.step, c.top)
		}
	}
}

// Each minute's p50/p99 land in its slot (59 is now's minute), consecutive
// minutes are joined and a minute without requests breaks the line; the y
// labels have the step's decimals.
func TestLatencyChart(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 30, 20, 0, time.UTC)
	v := func(f float64) *float64 { return &f }
	minute := func(ago int) time.Time { return now.Truncate(time.Minute).Add(-time.Duration(ago) * time.Minute) }
	s := Stats{Now: now, Minutes: []Minute{
		{Start: minute(3), Requests: 2, P50MS: v(10), P99MS: v(30)},
		{Start: minute(2), Requests: 1, P50MS: v(12), P99MS: v(12)},
		{Start: minute(1)},
		{Start: minute(0), Requests: 1, P50MS: v(20), P99MS: v(20)},
	}}
	svg := string(latencyChart(s))
	x := func(ago int) string { return fmt.Sprintf("%.1f", slotX(slots-1-ago)) }
	want := `<path class="p50" d="M` + x(3) + ` 108.7 L` + x(2) + ` 98.8 M` + x(0) + ` 59.3"/>`
	if !strings.Contains(svg, want) {
		t.Errorf("the p50 line is not %s:\n%s", want, svg)
	}
	if strings.Count(svg, `<circle class="p99"`) != 3 || !strings.Contains(svg, "<title>12:27 p99: 30.0 ms</title>") {
		t.Errorf("want 3 p99 points with their titles:\n%s", svg)
	}
	for _, label := range []string{">0<", ">10<", ">20<", ">30<"} {
		if !strings.Contains(svg, label) {
			t.Errorf("y label %s missing:\n%s", label, svg)
		}
	}
	if x := slotX(slotOf(now, now)); x < float64(chartW-padR)-slotW {
		t.Errorf("now's slot at x=%v, not at the right edge", x)
	}
}
