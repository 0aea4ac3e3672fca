package console

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/ttmodel/tt-model/internal/webui"
)

// The status charts are SVG drawn here, on the server, so they show without
// JavaScript. Both span the last hour, one slot per minute, newest at the
// right; y is milliseconds from 0.

const (
	chartW, chartH                 = 400, 180
	padL, padR, padT, padB         = 40, 8, 10, 22
	slots                          = 60
	paletteSize                    = 8 // the .c0 … .c7 colours of the stylesheet
	plotW, plotH                   = chartW - padL - padR, chartH - padT - padB
	slotW                  float64 = float64(plotW) / slots
)

// slotOf places a minute on the x axis: 59 is the minute of now.
func slotOf(now, start time.Time) int {
	return slots - 1 - int(now.Truncate(time.Minute).Sub(start.Truncate(time.Minute))/time.Minute)
}

func slotX(i int) float64 { return padL + (float64(i)+0.5)*slotW }

// scale picks the y axis for values up to v: a tick step of 1, 2 or 5 times
// a power of ten, and the top, a whole number of steps at or above v.
func scale(v float64) (step, top float64) {
	if v <= 0 {
		return 0.2, 1
	}
	raw := v / 4
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * p
	for _, m := range []float64{1, 2, 5} {
		if m*p >= raw {
			step = m * p
			break
		}
	}
	return step, math.Ceil(v/step-1e-9) * step
}

// frame draws the axes, the y grid with its labels (ms), and the x labels.
func frame(b *strings.Builder, step, top float64) {
	decimals := max(0, int(-math.Floor(math.Log10(step))))
	for v := 0.0; v <= top+step/2; v += step {
		y := padT + plotH - plotH*v/top
		class := "grid"
		if v == 0 {
			class = "axis"
		}
		fmt.Fprintf(b, `<line class="%s" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, class, padL, chartW-padR, y, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%.*f</text>`, padL-5, y, decimals, v)
	}
	for _, m := range []int{60, 45, 30, 15} {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">−%d min</text>`, slotX(slots-m), chartH-6, m)
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="end">now</text>`, float64(chartW-padR), chartH-6)
}

func svgOpen(b *strings.Builder, id, title, desc string) {
	fmt.Fprintf(b, `<svg class="chart" id="%s" viewBox="0 0 %d %d" role="img" aria-labelledby="%s-t %s-d">`, id, chartW, chartH, id, id)
	fmt.Fprintf(b, `<title id="%s-t">%s</title><desc id="%s-d">%s</desc>`, id, html.EscapeString(title), id, html.EscapeString(desc))
}

func noData(b *strings.Builder, what string) {
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`, padL+plotW/2, padT+plotH/2, what)
}

// latencyChart draws p50 and p99 per minute as two lines (broken where a
// minute had no request) with a dot per minute.
func latencyChart(s Stats) template.HTML {
	highest := 0.0
	var last *Minute
	for i := range s.Minutes {
		if m := s.Minutes[i]; m.P99MS != nil {
			highest = max(highest, *m.P99MS)
			last = &s.Minutes[i]
		}
	}
	step, top := scale(highest)
	desc := "No model requests in the last hour."
	if last != nil {
		desc = fmt.Sprintf("Latency of the model's requests per minute over the last hour; latest minute with requests (%s): p50 %s ms, p99 %s ms.",
			last.Start.Local().Format("15:04"), webui.Millis(*last.P50MS), webui.Millis(*last.P99MS))
	}
	var b strings.Builder
	svgOpen(&b, "latency-chart", "Request latency per minute: p50 and p99", desc)
	frame(&b, step, top)
	if last == nil {
		noData(&b, "no model requests in the last hour")
	}
	y := func(v float64) float64 { return padT + plotH - plotH*v/top }
	for _, series := range []struct {
		class string
		v     func(Minute) *float64
	}{{"p50", func(m Minute) *float64 { return m.P50MS }}, {"p99", func(m Minute) *float64 { return m.P99MS }}} {
		var d strings.Builder
		prev := -2
		for _, m := range s.Minutes {
			v := series.v(m)
			i := slotOf(s.Now, m.Start)
			if v == nil || i < 0 {
				continue
			}
			cmd := "L"
			if i != prev+1 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, slotX(i), y(*v))
			fmt.Fprintf(&b, `<circle class="%s" cx="%.1f" cy="%.1f" r="2.8"><title>%s %s: %s ms</title></circle>`,
				series.class, slotX(i), y(*v), m.Start.Local().Format("15:04"), series.class, webui.Millis(*v))
			prev = i
		}
		if d.Len() > 0 {
			fmt.Fprintf(&b, `<path class="%s" d="%s"/>`, series.class, strings.TrimSpace(d.String()))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// stageChart draws each minute's mean stage times as a stacked bar.
func stageChart(s Stats) template.HTML {
	highest := 0.0
	for _, m := range s.Minutes {
		sum := 0.0
		for _, v := range m.StagesMS {
			sum += v
		}
		highest = max(highest, sum)
	}
	desc := "No stage times in the last hour."
	if highest > 0 {
		desc = "Mean time per request of each stage (" + strings.Join(s.Stages, ", ") + "), stacked, per minute over the last hour."
	}
	step, top := scale(highest)
	var b strings.Builder
	svgOpen(&b, "stage-chart", "Where a request's time goes, per minute", desc)
	frame(&b, step, top)
	if highest == 0 {
		noData(&b, "no stage times in the last hour")
	}
	for _, m := range s.Minutes {
		i := slotOf(s.Now, m.Start)
		if i < 0 {
			continue
		}
		base := 0.0
		for k, st := range s.Stages {
			v, ok := m.StagesMS[st]
			if !ok || v <= 0 {
				continue
			}
			h := plotH * v / top
			fmt.Fprintf(&b, `<rect class="bar c%d" x="%.1f" y="%.1f" width="%.1f" height="%.2f"><title>%s %s: %s ms</title></rect>`,
				k%paletteSize, slotX(i)-slotW*0.35, padT+plotH-base-h, slotW*0.7, h, m.Start.Local().Format("15:04"), html.EscapeString(st), webui.Millis(v))
			base += h
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
