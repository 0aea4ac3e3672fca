package rfdetr

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/server"
)

// scriptedNetwork returns outputs fixed by the test, to check how the HTTP
// layer maps network outputs to the original server's JSON (which detections, boxes in
// pixels, raw arrays) and how it reports failures. It tests the contract,
// not inference: the real forward is exercised in rfdetr_native_test.go.
type scriptedNetwork struct {
	logits, boxes []float32
	err           error
	panics        bool
	calls         int
}

func (n *scriptedNetwork) Forward(_ context.Context, pixels, logits, boxes []float32) error {
	n.calls++
	if len(pixels) != rfdetr.PixelCount {
		return errors.New("wrong pixel count")
	}
	if n.panics {
		var s []int
		_ = s[3] // a real runtime panic
	}
	if n.err != nil {
		return n.err
	}
	copy(logits, n.logits)
	copy(boxes, n.boxes)
	return nil
}

func (n *scriptedNetwork) Close() error { return nil }

// twoLabelOutputs: query 4 is a cat (logit 3) and a couch (logit 1) with box
// cxcywh (0.25, 0.5, 0.5, 1.2) — taller than the image, so it gets clamped;
// query 7 is a remote (logit 0.5). Everything else is far below any threshold.
func twoLabelOutputs() *scriptedNetwork {
	n := &scriptedNetwork{logits: make([]float32, rfdetr.NumQueries*rfdetr.NumClasses), boxes: make([]float32, rfdetr.NumQueries*4)}
	for i := range n.logits {
		n.logits[i] = -12
	}
	for q := 0; q < rfdetr.NumQueries; q++ {
		copy(n.boxes[4*q:], []float32{0.5, 0.5, 0.1, 0.1})
	}
	n.logits[4*rfdetr.NumClasses+17] = 3
	n.logits[4*rfdetr.NumClasses+63] = 1
	n.logits[7*rfdetr.NumClasses+75] = 0.5
	copy(n.boxes[16:], []float32{0.25, 0.5, 0.5, 1.2})
	return n
}

// newRFDETRTestModel is the RF-DETR model, loaded, with net as its network.
func newRFDETRTestModel(net rfdetr.Network) *Model {
	m := New(Options{Getenv: func(string) string { return "" }, Device: "cpu test", Version: "test"})
	m.log = servertest.DiscardLog()
	m.det = newDetectorForTest(net)
	return m
}

func newRFDETRTestServer(t *testing.T, net rfdetr.Network) *httptest.Server {
	t.Helper()
	s := server.New(newRFDETRTestModel(net), server.Options{Log: servertest.DiscardLog()})
	s.MarkLoaded()
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func newDetectorForTest(net rfdetr.Network) *rfdetr.Detector {
	return rfdetr.NewDetector(net, rfdetr.Config{}, rfdetr.Source{Dir: "/test", Via: "test"}, rfdetr.SchemeRFDETR)
}

func pngB64(t testing.TB, w, h int) string {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func jpegB64(t testing.TB, w, h int) string {
	img := image.NewGray(image.Rect(0, 0, w, h))
	img.Set(1, 1, color.Gray{200})
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func jsonBody(fields map[string]any) string {
	b, _ := json.Marshal(fields)
	return string(b)
}

func TestPredictContract(t *testing.T) {
	img := pngB64(t, 64, 48)
	wrapped := ""
	for i := 0; i < len(img); i += 60 {
		wrapped += img[i:min(i+60, len(img))] + "\n"
	}
	cases := []struct {
		name     string
		body     string
		want     int
		contains []string // substrings of the body
		check    func(t *testing.T, r predictResponse)
	}{
		{name: "defaults", body: jsonBody(map[string]any{"image": img}), want: 200, check: func(t *testing.T, r predictResponse) {
			// threshold 0.5: cat 0.9526 and couch 0.7311 of query 4; remote (0.622) also passes
			if r.NumDetections != 3 || len(r.Detections) != 3 || r.Threshold != 0.5 {
				t.Fatalf("%+v", r)
			}
			cat := r.Detections[0]
			if cat.Label != "cat" || cat.LabelID != 17 || math.Abs(float64(cat.Score)-0.95257413) > 1e-6 {
				t.Errorf("first detection %+v", cat)
			}
			// cx .25 w .5 → x 0..32 of 64; cy .5 h 1.2 → y -4.8..52.8 clamped to 0..48
			if cat.Box != [4]float32{0, 0, 32, 48} || cat.BoxNorm != [4]float32{0.25, 0.5, 0.5, 1.2} {
				t.Errorf("box %v norm %v", cat.Box, cat.BoxNorm)
			}
			if r.Detections[1].Label != "couch" || r.Detections[2].Label != "remote" {
				t.Errorf("order %v", r.Detections)
			}
			if r.ImageSize.Width != 64 || r.ImageSize.Height != 48 || r.InputSize != [2]int{560, 560} || r.Raw != nil {
				t.Errorf("sizes %+v %v raw %v", r.ImageSize, r.InputSize, r.Raw != nil)
			}
		}},
		{name: "threshold and max_detections", body: jsonBody(map[string]any{"image": img, "threshold": 0.7, "max_detections": 1}), want: 200,
			check: func(t *testing.T, r predictResponse) {
				if r.NumDetections != 1 || r.Detections[0].Label != "cat" || r.Threshold != 0.7 {
					t.Errorf("%+v", r)
				}
			}},
		{name: "nothing above threshold", body: jsonBody(map[string]any{"image": img, "threshold": 1}), want: 200, contains: []string{`"detections":[]`, `"num_detections":0`}},
		{name: "return_raw", body: jsonBody(map[string]any{"image": img, "return_raw": true, "max_detections": 2.0}), want: 200,
			check: func(t *testing.T, r predictResponse) {
				if r.Raw == nil || len(r.Raw.Logits) != 300 || len(r.Raw.Logits[0]) != 91 || len(r.Raw.PredBoxes) != 300 || len(r.Raw.PredBoxes[4]) != 4 {
					t.Fatalf("raw shape wrong")
				}
				if r.Raw.Logits[4][17] != 3 || r.Raw.PredBoxes[4][3] != 1.2 || r.NumDetections != 2 {
					t.Errorf("raw values %v %v", r.Raw.Logits[4][17], r.Raw.PredBoxes[4])
				}
			}},
		{name: "data URL and wrapped base64", body: jsonBody(map[string]any{"image": "data:image/png;base64," + wrapped}), want: 200},
		{name: "jpeg, unpadded", body: jsonBody(map[string]any{"image": strings.TrimRight(jpegB64(t, 9, 9), "=")}), want: 200},
		{name: "extra fields ignored", body: jsonBody(map[string]any{"image": img, "model": "x"}), want: 200},

		{name: "missing image", body: `{"threshold":0.5}`, want: 422, contains: []string{`"loc":["body","image"]`, `"type":"missing"`}},
		{name: "image not a string", body: `{"image":42}`, want: 422, contains: []string{`"type":"string_type"`}},
		{name: "threshold above 1", body: jsonBody(map[string]any{"image": img, "threshold": 1.5}), want: 422, contains: []string{`"loc":["body","threshold"]`, "less than or equal to 1"}},
		{name: "threshold negative", body: jsonBody(map[string]any{"image": img, "threshold": -0.1}), want: 422, contains: []string{"greater than or equal to 0"}},
		{name: "threshold a string", body: jsonBody(map[string]any{"image": img, "threshold": "0.5"}), want: 422, contains: []string{`"type":"float_type"`}},
		{name: "max_detections fractional", body: jsonBody(map[string]any{"image": img, "max_detections": 2.5}), want: 422, contains: []string{`"type":"int_type"`}},
		{name: "max_detections 0", body: jsonBody(map[string]any{"image": img, "max_detections": 0}), want: 422, contains: []string{"greater than or equal to 1"}},
		{name: "max_detections 301", body: jsonBody(map[string]any{"image": img, "max_detections": 301}), want: 422, contains: []string{"less than or equal to 300"}},
		{name: "return_raw a string", body: jsonBody(map[string]any{"image": img, "return_raw": "yes"}), want: 422, contains: []string{`"type":"bool_type"`}},
		{name: "all violations at once", body: `{"threshold":2,"max_detections":"x"}`, want: 422, contains: []string{`"image"`, `"threshold"`, `"max_detections"`}},
		{name: "not JSON", body: `image=abc`, want: 422, contains: []string{`"type":"json_invalid"`}},
		{name: "JSON array", body: `[1]`, want: 422, contains: []string{`"type":"json_invalid"`}},
		{name: "JSON null", body: `null`, want: 422, contains: []string{"must be a JSON object"}},

		{name: "bad base64", body: jsonBody(map[string]any{"image": "!!!not base64"}), want: 400, contains: []string{"not valid base64"}},
		{name: "data URL not base64", body: jsonBody(map[string]any{"image": "data:image/png," + img}), want: 400, contains: []string{"is not base64"}},
		{name: "not an image", body: jsonBody(map[string]any{"image": base64.StdEncoding.EncodeToString([]byte("hello world"))}), want: 400, contains: []string{"not a PNG or JPEG"}},
		{name: "empty image", body: jsonBody(map[string]any{"image": ""}), want: 400, contains: []string{"image is empty"}},
		{name: "oversized side", body: jsonBody(map[string]any{"image": pngB64(t, 8193, 1)}), want: 400, contains: []string{"8193x1; the largest side allowed is 8192"}},
	}
	ts := newRFDETRTestServer(t, twoLabelOutputs())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := servertest.Post(t, ts.URL+"/predict", c.body)
			if code != c.want {
				t.Fatalf("status %d, want %d: %s", code, c.want, body)
			}
			for _, s := range c.contains {
				if !strings.Contains(body, s) {
					t.Errorf("body lacks %s: %s", s, body)
				}
			}
			if c.check != nil {
				var r predictResponse
				if err := json.Unmarshal([]byte(body), &r); err != nil {
					t.Fatal(err)
				}
				c.check(t, r)
			}
			if code == 200 && !strings.Contains(body, `"timing_ms":{"decode":`) {
				t.Errorf("no timing_ms: %s", body)
			}
		})
	}
}

func TestPredictBodyLimit(t *testing.T) {
	ts := newRFDETRTestServer(t, twoLabelOutputs())
	big := `{"image":"` + strings.Repeat("A", MaxBodyBytes) + `"}`
	code, body := servertest.Post(t, ts.URL+"/predict", big)
	if code != 400 || !strings.Contains(body, "the limit is 33554432") {
		t.Errorf("declared oversize: %d %s", code, body)
	}
	// Without a Content-Length (chunked), the limit is enforced while reading.
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/predict", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "exceeds the limit of 33554432 bytes") {
		t.Errorf("chunked oversize: %d %s", resp.StatusCode, b)
	}
}

func TestPredictInferenceFailuresKeepServing(t *testing.T) {
	img := pngB64(t, 8, 8)
	body := jsonBody(map[string]any{"image": img})
	nan := twoLabelOutputs()
	nan.boxes[16] = float32(math.NaN())
	cases := []struct {
		name string
		net  *scriptedNetwork
		want string
	}{
		{"forward error", &scriptedNetwork{err: &forwardError{msg: "program not finished"}}, `inference failed: rfdetr.forwardError: program not finished`},
		{"forward panic", &scriptedNetwork{panics: true}, `inference failed: server.PanicError: runtime error: index out of range [3] with length 0`},
		{"non-finite box", nan, `inference failed: NonFiniteOutput`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := newRFDETRTestServer(t, c.net)
			for i := 0; i < 2; i++ { // the second request proves the server survived
				code, b := servertest.Post(t, ts.URL+"/predict", body)
				if code != 500 || !strings.Contains(b, c.want) {
					t.Fatalf("request %d: %d %s, want 500 %q", i, code, b, c.want)
				}
			}
			if code, _ := servertest.GetJSON(t, ts.URL+"/health"); code != 200 {
				t.Errorf("health after failures: %d", code)
			}
		})
	}
}

type forwardError struct{ msg string }

func (e *forwardError) Error() string { return e.msg }

func TestRFDETRInfoAndModels(t *testing.T) {
	ts := newRFDETRTestServer(t, twoLabelOutputs())
	code, info := servertest.GetJSON(t, ts.URL+"/info")
	if code != 200 || info["model"] != Name || info["status"] != "ok" || info["device"] != "cpu test" {
		t.Fatalf("info %d %v", code, info)
	}
	labels, _ := info["labels"].([]any)
	if len(labels) != 91 || labels[17] != "cat" || labels[12] != "N/A" {
		t.Errorf("labels %v", labels)
	}
	code, models := servertest.GetJSON(t, ts.URL+"/v1/models")
	data, _ := models["data"].([]any)
	if code != 200 || len(data) != 1 || data[0].(map[string]any)["id"] != rfdetr.DefaultRepo {
		t.Errorf("models %d %v", code, models)
	}
}
