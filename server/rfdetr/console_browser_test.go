package rfdetr

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/ttmodel/tt-model/internal/demopicture"
	"github.com/ttmodel/tt-model/internal/testing/browsertest"
	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/server/modeltest"
)

// The RF-DETR console in a real browser (headless chromium, one for all the subtests): the form
// draws what POST /predict answers and follows the threshold slider, bad files show the server's
// own message; the page works without JavaScript and behind a path prefix. No page requests
// anything outside its server.
func TestConsoleInBrowser(t *testing.T) {
	b := browsertest.Start(t)
	t.Run("rfdetr", func(t *testing.T) { rfdetrConsole(t, b) })
	t.Run("rfdetr-bad-input", func(t *testing.T) { rfdetrConsoleBadInput(t, b) })
	t.Run("no-javascript", func(t *testing.T) { consoleWithoutJavaScript(t, b) })
	t.Run("behind-a-prefix", func(t *testing.T) { consoleBehindAPrefix(t, b) })
}

// Behind a proxy that serves the server under a path prefix (kubectl
// proxy's /api/v1/namespaces/NS/pods/POD:PORT/proxy/), every URL of the
// console stays under the prefix.
func consoleBehindAPrefix(t *testing.T, b *browsertest.Browser) {
	ts := newRFDETRTestServer(t, sampleScene())
	const prefix = "/api/v1/namespaces/ns/pods/rf-detr-0:8000/proxy"
	inner := ts.Config.Handler
	proxy := httptest.NewServer(http.StripPrefix(prefix, inner))
	defer proxy.Close()
	p := b.Page(t, time.Minute)
	p.Do(chromedp.Navigate(proxy.URL+prefix+"/"), chromedp.WaitVisible(chromedp.ID("use-sample")), chromedp.Click(chromedp.ID("use-sample")))
	modeltest.WaitDrawn(p, 0)
	sameBoxes(t, browsertest.Eval[[]drawnBox](p, readBoxes), predictAnswer(t, ts.URL, demopicture.PNG(), 0.5))
	if cmd := browsertest.Eval[string](p, `document.getElementById('curl').textContent`); !strings.Contains(cmd, proxy.URL+prefix+"/predict") {
		t.Errorf("the curl command does not go through the prefix:\n%s", cmd)
	}
	for _, r := range p.Requests() {
		if !strings.HasPrefix(r, proxy.URL+prefix+"/") && !strings.HasPrefix(r, "blob:") {
			t.Errorf("the page requested %s, outside %s", r, prefix)
		}
	}
}

// With JavaScript off, the status is all there: it is rendered by the
// server, charts included.
func consoleWithoutJavaScript(t *testing.T, b *browsertest.Browser) {
	ts := newRFDETRTestServer(t, sampleScene())
	predictAnswer(t, ts.URL, demopicture.PNG(), 0.5) // something to chart
	p := b.Page(t, time.Minute)
	if _, err := chromedp.Call(p.Context(), emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	p.Do(chromedp.Navigate(ts.URL + "/"))
	for sel, want := range map[string]string{"#state": "ok", "#requests": "1 (200 × 1)", "#status dl": "cpu test"} {
		if got := browsertest.Run(p, chromedp.Text(chromedp.CSS(sel))); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}
	if n := len(browsertest.Run(p, chromedp.Nodes(chromedp.CSS("#latency-chart circle.p50")))); n != 1 {
		t.Errorf("the latency chart has %d p50 points, want 1", n)
	}
	// The form needs its script: with scripts off, its button does nothing.
	p.Do(chromedp.Click(chromedp.ID("use-sample")), chromedp.Sleep(300*time.Millisecond))
	for _, r := range p.Requests() {
		if strings.HasSuffix(r, "/predict") || strings.HasSuffix(r, "/sample.png") {
			t.Errorf("a script ran: the page requested %s", r)
		}
	}
	p.CheckSameOrigin(ts.URL)
}

// drawnBox is a box as the page drew it over the picture.
type drawnBox struct {
	Label                             string
	Score                             float64
	X, Y, W, H                        float64
	LabelText, TableLabel, TableScore string
	// OnScreen is the box's rendered width in CSS pixels: 0 when the
	// overlay is in the DOM but not drawn (hidden, or outside the picture).
	OnScreen float64
}

const readBoxes = `[...document.querySelectorAll('#boxes rect')].map((r, i) => ({
	Label: r.dataset.label, Score: Number(r.dataset.score),
	X: r.x.baseVal.value, Y: r.y.baseVal.value, W: r.width.baseVal.value, H: r.height.baseVal.value,
	LabelText: r.parentNode.querySelector('text').textContent,
	TableLabel: document.querySelectorAll('#detections tbody tr')[i]?.cells[1].textContent,
	TableScore: document.querySelectorAll('#detections tbody tr')[i]?.cells[2].textContent,
	OnScreen: r.getBoundingClientRect().width,
}))`

// predictAnswer is what POST /predict answers for a picture and threshold.
func predictAnswer(t *testing.T, url string, picture []byte, threshold float64) predictResponse {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"image": base64.StdEncoding.EncodeToString(picture), "threshold": threshold})
	resp, err := http.Post(url+"/predict", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out predictResponse
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		t.Fatalf("POST /predict: %s", resp.Status)
	}
	return out
}

// sameBoxes checks the drawn boxes are the answer's: as many, same labels,
// scores and pixel boxes, in the answer's order.
func sameBoxes(t *testing.T, drawn []drawnBox, want predictResponse) {
	t.Helper()
	if len(drawn) != want.NumDetections || len(drawn) != len(want.Detections) {
		t.Fatalf("%d boxes drawn, /predict answers %d detections", len(drawn), want.NumDetections)
	}
	for i, d := range want.Detections {
		g := drawn[i]
		box := [4]float64{g.X, g.Y, g.X + g.W, g.Y + g.H}
		for k := range 4 {
			if math.Abs(box[k]-float64(d.Box[k])) > 0.01 {
				t.Errorf("box %d drawn at %v, /predict says %v", i, box, d.Box)
				break
			}
		}
		if d.Box[2] > d.Box[0] && g.OnScreen <= 0 {
			t.Errorf("box %d is in the page but not drawn on screen (rendered width %v)", i, g.OnScreen)
		}
		score := strconv.FormatFloat(float64(d.Score), 'f', 2, 64)
		if g.Label != d.Label || math.Abs(g.Score-float64(d.Score)) > 1e-6 || g.LabelText != d.Label+" "+score ||
			g.TableLabel != d.Label || g.TableScore != strconv.FormatFloat(float64(d.Score), 'f', 3, 64) {
			t.Errorf("box %d: drawn %q (%v) labelled %q, table %q %s; /predict says %s %.4f", i, g.Label, g.Score, g.LabelText, g.TableLabel, g.TableScore, d.Label, d.Score)
		}
	}
}

// sampleScene is a scripted detector that sees what the sample picture
// shows (demopicture): a suitcase (the orange block, score 0.92), a tv (the
// dark one, 0.77) and a remote (the white bar, 0.57), boxes as cxcywh of the
// picture. The README's screenshot shows it.
func sampleScene() *scriptedNetwork {
	n := &scriptedNetwork{logits: make([]float32, rfdetr.NumQueries*rfdetr.NumClasses), boxes: make([]float32, rfdetr.NumQueries*4)}
	for i := range n.logits {
		n.logits[i] = -12
	}
	for q, o := range []struct {
		label int
		logit float32
		box   [4]float32
	}{
		{33, 2.5, [4]float32{170.0 / 640, 240.0 / 480, 260.0 / 640, 360.0 / 480}},
		{72, 1.2, [4]float32{480.0 / 640, 195.0 / 480, 280.0 / 640, 330.0 / 480}},
		{75, 0.3, [4]float32{115.0 / 640, 95.0 / 480, 110.0 / 640, 30.0 / 480}},
	} {
		n.logits[q*rfdetr.NumClasses+o.label] = o.logit
		copy(n.boxes[4*q:], o.box[:])
	}
	return n
}

func rfdetrConsole(t *testing.T, b *browsertest.Browser) {
	ts := newRFDETRTestServer(t, sampleScene())
	p := b.Page(t, time.Minute)
	sample := demopicture.PNG()
	p.Do(chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(chromedp.ID("picture")),
		chromedp.SetUploadFiles(chromedp.ID("picture"), []string{modeltest.WriteFile(t, "sample.png", sample)}))
	n := modeltest.WaitDrawn(p, 0)
	sameBoxes(t, browsertest.Eval[[]drawnBox](p, readBoxes), predictAnswer(t, ts.URL, sample, 0.5))
	if cmd := browsertest.Eval[string](p, `document.getElementById('curl').textContent`); !strings.Contains(cmd, ts.URL+"/predict") ||
		!strings.Contains(cmd, `"threshold":0.5`) || !strings.Contains(cmd, "base64 -w0 'sample.png'") {
		t.Errorf("the curl command:\n%s", cmd)
	}

	// Keyboard: the slider moves by 0.01 per arrow key; the page asks again
	// once it rests, and draws the new answer.
	p.Do(chromedp.Focus(chromedp.ID("threshold")))
	for range 20 {
		p.Do(chromedp.KeyEvent(kb.ArrowRight))
	}
	p.WaitFor(`document.getElementById('result').dataset.threshold === '0.7'`)
	modeltest.WaitDrawn(p, n)
	at07 := predictAnswer(t, ts.URL, sample, 0.7)
	sameBoxes(t, browsertest.Eval[[]drawnBox](p, readBoxes), at07)
	if at07.NumDetections != 2 {
		t.Errorf("the scripted detector gives %d detections at 0.7, want 2: the slider test would not see a change", at07.NumDetections)
	}
	p.WaitFor(`parseInt(document.getElementById('requests').textContent) >= 2`) // the status caught up
	modeltest.UniqueIDs(t, p)
	shot := p.Screenshot("rfdetr-console")
	browsertest.DocImage(t, shot, "../../docs/images/console-rfdetr.png", 200<<10)
	if n := p.CheckSameOrigin(ts.URL); n < 5 {
		t.Errorf("the network log holds %d requests: not recorded?", n)
	}
}

func rfdetrConsoleBadInput(t *testing.T, b *browsertest.Browser) {
	ts := newRFDETRTestServer(t, sampleScene())
	p := b.Page(t, 2*time.Minute)
	p.Do(chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(chromedp.ID("picture")))
	drawn := 0
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"notes.txt", []byte("this is not a picture\n")},
		{"huge.png", make([]byte, 50<<20)},
	} {
		t.Run(c.name, func(t *testing.T) {
			// What the server says about this file, asked directly.
			body, _ := json.Marshal(map[string]any{"image": base64.StdEncoding.EncodeToString(c.body), "threshold": 0.5})
			resp, err := http.Post(ts.URL+"/predict", "application/json", strings.NewReader(string(body)))
			if err != nil {
				t.Fatal(err)
			}
			var answer struct{ Detail string }
			_ = json.NewDecoder(resp.Body).Decode(&answer)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || answer.Detail == "" {
				t.Fatalf("POST /predict of %s: %s %q, want a 400 with a detail", c.name, resp.Status, answer.Detail)
			}
			p.Do(chromedp.SetUploadFiles(chromedp.ID("picture"), []string{modeltest.WriteFile(t, c.name, c.body)}))
			drawn = modeltest.WaitDrawn(p, drawn)
			shown := browsertest.Eval[string](p, `document.getElementById('error').hidden ? '' : document.getElementById('error').textContent`)
			if !strings.Contains(shown, "400") || !strings.Contains(shown, answer.Detail) {
				t.Errorf("the page shows %q; the server's message is %q", shown, answer.Detail)
			}
			if n := browsertest.Eval[int](p, `document.querySelectorAll('#boxes rect').length`); n != 0 {
				t.Errorf("%d boxes drawn after an error", n)
			}
			p.Screenshot("rfdetr-error-" + strings.TrimSuffix(c.name, filepath.Ext(c.name)))
		})
	}
	// The sample button recovers.
	p.Do(chromedp.Click(chromedp.ID("use-sample")))
	modeltest.WaitDrawn(p, drawn)
	if shown := browsertest.Eval[bool](p, `document.getElementById('error').hidden`); !shown {
		t.Error("the error stays after a good picture")
	}
	sameBoxes(t, browsertest.Eval[[]drawnBox](p, readBoxes), predictAnswer(t, ts.URL, demopicture.PNG(), 0.5))
	p.CheckSameOrigin(ts.URL)
}
