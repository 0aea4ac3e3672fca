package pi05

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/ttmodel/tt-model/internal/testing/browsertest"
	"github.com/ttmodel/tt-model/server/modeltest"
)

// The pi0.5 console in a real browser (headless chromium): its form plots the chunk the action
// API answers. No page requests anything outside its server.
func TestConsoleInBrowser(t *testing.T) {
	b := browsertest.Start(t)
	t.Run("pi05", func(t *testing.T) { pi05Console(t, b) })
}

// chunkPlot is the chunk as the page plotted it: the y of each point mapped
// back through the plot's scale, per action dimension.
const readChunk = `(() => {
	const svg = document.getElementById('chunk');
	const vmin = Number(svg.dataset.vmin), vmax = Number(svg.dataset.vmax);
	const top = Number(svg.dataset.ytop), bottom = Number(svg.dataset.ybottom);
	const lines = [...svg.querySelectorAll('polyline')].sort((a, b) => a.dataset.dim - b.dataset.dim);
	return {
		Dims: lines.map((l) => l.points.length ? [...l.points].map((pt) => vmin + (bottom - pt.y) * (vmax - vmin) / (bottom - top)) : []),
		Classes: lines.map((l) => l.getAttribute('class')),
		Step: (vmax - vmin) / (bottom - top),
		Table: [...document.querySelectorAll('#chunk-values tbody tr')].map((tr) => [...tr.cells].map((c) => c.textContent)),
	};
})()`

func pi05Console(t *testing.T, b *browsertest.Browser) {
	ts := newPI05TestServer(t, nil)
	p := b.Page(t, 2*time.Minute)
	var files []string
	for i := range 2 {
		frame, _ := pi05Frame(t, 64, 48, 40*i)
		png, _ := base64.StdEncoding.DecodeString(frame)
		files = append(files, modeltest.WriteFile(t, fmt.Sprintf("camera%d.png", i), png))
	}
	p.Do(chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(chromedp.ID("camera-0")),
		chromedp.SetUploadFiles(chromedp.ID("camera-0"), files[:1]),
		chromedp.SetUploadFiles(chromedp.ID("camera-1"), files[1:]),
		chromedp.SetValue(chromedp.ID("prompt"), "stack the blocks"),
		chromedp.SendKeys(chromedp.ID("robot-state"), "0.25, -0.5, 1"), // typed, as a person would
		chromedp.SetValue(chromedp.ID("seed"), "7"),
	)
	p.WaitFor(`[...document.querySelectorAll('.cameras img')].length === 2`)
	// Keyboard: Enter in the prompt submits the form.
	p.Do(chromedp.SendKeys(chromedp.ID("prompt"), kb.Enter))
	modeltest.WaitDrawn(p, 0)
	if e := browsertest.Eval[string](p, `document.getElementById('error').hidden ? '' : document.getElementById('error').textContent`); e != "" {
		t.Fatalf("the page shows an error: %s", e)
	}

	// The body the page sent (its download link), sent again by the test.
	body := browsertest.Eval[string](p, `fetch(document.querySelector('#body-link a').href).then((r) => r.text())`, chromedp.EvalAwaitPromise)
	var sent map[string]any
	if err := json.Unmarshal([]byte(body), &sent); err != nil {
		t.Fatalf("the body the page sent: %v", err)
	}
	if in := sent["input"].(map[string]any); in["task"] != "stack the blocks" || fmt.Sprint(in["observation"].(map[string]any)["state"]) != "[0.25 -0.5 1]" {
		t.Errorf("the page sent %v", in)
	}
	status, env := postJSON(t, ts.URL+"/v1/actions/generations", body)
	if status != http.StatusOK {
		t.Fatalf("the page's body sent again: %d %v", status, env)
	}
	var want [][]float64
	raw, _ := json.Marshal(env["data"].([]any)[0].(map[string]any)["action"].(map[string]any)["values"])
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}

	var got struct {
		Dims    [][]float64
		Classes []string
		Step    float64
		Table   [][]string
	}
	raw = browsertest.Eval[[]byte](p, readChunk)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Dims) != len(want[0]) {
		t.Fatalf("%d lines plotted, the chunk has %d dimensions", len(got.Dims), len(want[0]))
	}
	for d, line := range got.Dims {
		if len(line) != len(want) {
			t.Fatalf("dim %d: %d points, the horizon is %d", d, len(line), len(want))
		}
		for h, v := range line {
			// Points are written with 2 decimals of a pixel.
			if math.Abs(v-want[h][d]) > 0.01*got.Step+1e-9 {
				t.Fatalf("dim %d step %d plotted at %.5f, the API answers %.5f", d, h, v, want[h][d])
			}
		}
		wantClass := "line faint"
		if d < 7 {
			wantClass = fmt.Sprintf("line c%d", d)
		}
		if got.Classes[d] != wantClass {
			t.Errorf("dim %d drawn as %q, want %q", d, got.Classes[d], wantClass)
		}
	}
	for h, row := range got.Table {
		for d, cell := range row[1:] {
			if w := strconv.FormatFloat(want[h][d], 'f', 4, 64); cell != w && !(cell == "-0.0000" && w == "0.0000") {
				t.Fatalf("table step %d dim %d: %s, the API answers %s", h, d, cell, w)
			}
		}
	}
	if len(got.Table) != len(want) {
		t.Errorf("the table has %d rows, the horizon is %d", len(got.Table), len(want))
	}
	timings := browsertest.Eval[string](p, `document.getElementById('timings').textContent`)
	for _, stage := range []string{"preprocess", "vision", "prefix", "denoise", "inference"} {
		if !strings.Contains(timings, stage) {
			t.Errorf("timings %q lack %s", timings, stage)
		}
	}
	if cmd := browsertest.Eval[string](p, `document.getElementById('curl').textContent`); !strings.Contains(cmd, ts.URL+"/v1/actions/generations") ||
		!strings.Contains(cmd, "base64 -w0 'camera1.png'") {
		t.Errorf("the curl command:\n%s", cmd)
	}
	modeltest.UniqueIDs(t, p)
	p.Screenshot("pi05-console")
	p.CheckSameOrigin(ts.URL)
}
