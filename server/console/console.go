// Package console renders tt-model-server's web console: the page at /, its
// status section (server-rendered: it works without JavaScript) with the
// latency and stage charts, and the embedded stylesheet, scripts and sample
// picture of the model forms. Package server collects the data and serves
// it; everything a page loads comes from the same server.
package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/ttmodel/tt-model/internal/demopicture"
	"github.com/ttmodel/tt-model/internal/webui"
)

//go:embed *.html *.js
var files embed.FS

// Stats is the console's feed (GET /console/stats): what the status section
// shows beyond the model's facts.
type Stats struct {
	Model   string    `json:"model"`
	Status  string    `json:"status"` // starting, ok, degraded or hung: /health's
	Now     time.Time `json:"now"`
	Started time.Time `json:"started"`
	UptimeS float64   `json:"uptime_s"`
	// ReadyS is how long the model has been ready; null while starting.
	ReadyS   *float64 `json:"ready_s"`
	Requests Requests `json:"requests"`
	// Stages are the stage names the model reported, in a fixed order.
	Stages []string `json:"stages"`
	// Minutes are the last hour's minutes since the server started, oldest
	// first; a minute without requests has no latency.
	Minutes []Minute `json:"minutes"`
}

// Requests counts the model's HTTP requests since start (websocket frames
// are not among them).
type Requests struct {
	Total  int64            `json:"total"`
	ByCode map[string]int64 `json:"by_code"`
}

// Minute is one minute of model requests.
type Minute struct {
	Start    time.Time `json:"start"`
	Requests int       `json:"requests"`
	Errors   int       `json:"errors"` // answered with a status >= 400
	P50MS    *float64  `json:"p50_ms"`
	P99MS    *float64  `json:"p99_ms"`
	// Sampled is true when the minute had more requests than the window
	// keeps latencies of: its percentiles come from the first ones.
	Sampled bool `json:"sampled,omitempty"`
	// StagesMS is each stage's mean time over the requests that reported it
	// (websocket requests included).
	StagesMS map[string]float64 `json:"stages_ms"`
}

// Fact is one row of the status: "Weights", "Roboflow/rf-detr-base @ 7b95b08".
type Fact struct{ Label, Value string }

// Status is the status section.
type Status struct {
	Stats
	Facts []Fact
}

// RFDETRForm configures the RF-DETR form: the route's defaults and limits.
type RFDETRForm struct {
	Threshold     float64
	MaxDetections int
	MaxBodyBytes  int64
}

// PI05Form configures the pi0.5 form.
type PI05Form struct {
	Cameras      []string // input.observation.images keys, in slot order
	StateDim     int
	ActionDim    int
	Horizon      int
	Steps        int
	MaxBodyBytes int64
}

// Model is what a model shows on the console.
type Model struct {
	Kind   string // api.Kind*
	Facts  []Fact
	RFDETR *RFDETRForm // the form that tries the model: at most one is set,
	PI05   *PI05Form   // none while the model is starting

	// Warning is a banner above everything else: the server runs generated test weights.
	Warning string
}

// Page is the console page.
type Page struct {
	Status Status
	Model  Model
}

// Renderer renders the console's pages.
type Renderer struct {
	t *template.Template
}

// NewRenderer parses the templates (they are embedded: an error is a bug).
func NewRenderer() (*Renderer, error) {
	funcs := webui.Funcs()
	funcs["latencyChart"] = latencyChart
	funcs["stageChart"] = stageChart
	funcs["stageColor"] = func(stages []string, name string) int {
		for i, s := range stages {
			if s == name {
				return i % paletteSize
			}
		}
		return paletteSize - 1
	}
	funcs["sinceStart"] = func(s Stats) string { return webui.Duration(time.Duration(s.UptimeS * float64(time.Second))) }
	funcs["readyFor"] = func(s Stats) string {
		if s.ReadyS == nil {
			return ""
		}
		return webui.Duration(time.Duration(*s.ReadyS * float64(time.Second)))
	}
	funcs["hhmm"] = func(t time.Time) string { return t.Local().Format("15:04") }
	funcs["mib"] = func(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }
	funcs["codes"] = func(by map[string]int64) string {
		codes := slices.Sorted(maps.Keys(by))
		parts := make([]string, len(codes))
		for i, c := range codes {
			parts[i] = fmt.Sprintf("%s × %d", c, by[c])
		}
		return strings.Join(parts, ", ")
	}
	t, err := template.New("console").Funcs(funcs).ParseFS(files, "*.html")
	if err != nil {
		return nil, fmt.Errorf("console templates: %w", err)
	}
	return &Renderer{t: t}, nil
}

// Page writes the whole console page.
func (r *Renderer) Page(w io.Writer, p Page) error { return r.exec(w, "page", p) }

// Status writes the status section alone (what the page reloads).
func (r *Renderer) Status(w io.Writer, s Status) error { return r.exec(w, "status", s) }

// exec renders into a buffer first: a template error becomes the caller's
// error, never half a page.
func (r *Renderer) exec(w io.Writer, name string, data any) error {
	var b bytes.Buffer
	if err := r.t.ExecuteTemplate(&b, name, data); err != nil {
		return fmt.Errorf("console %s: %w", name, err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// Asset is a file under /console/: the stylesheet, a script or the sample
// picture; ok is false for any other name.
func Asset(name string) (body []byte, contentType string, ok bool) {
	switch name {
	case "style.css":
		return []byte(webui.Style), "text/css; charset=utf-8", true
	case "sample.png":
		return demopicture.PNG(), "image/png", true
	}
	if path.Ext(name) != ".js" || path.Base(name) != name {
		return nil, "", false
	}
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, "", false
	}
	return b, "text/javascript; charset=utf-8", true
}
