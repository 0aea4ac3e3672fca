package rfdetr

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/server"
)

// fuzzHandler serves /predict over twoLabelOutputs. Any answer other than
// 200, 400 or 422 means the request or image path misbehaved: a panic is
// recovered as a 500, which fails the fuzz run.
func fuzzHandler(t testing.TB) http.Handler {
	m := New(Options{Getenv: func(string) string { return "" }})
	m.log = servertest.DiscardLog()
	m.det = newDetectorForTest(twoLabelOutputs())
	s := server.New(m, server.Options{Log: servertest.DiscardLog()})
	s.MarkLoaded()
	return s.Handler()
}

func checkAnswer(t *testing.T, h http.Handler, body []byte) { checkAnswerAs(t, h, "", body) }

// checkAnswerAs is checkAnswer for a body of the given Content-Type ("" for none).
func checkAnswerAs(t *testing.T, h http.Handler, contentType string, body []byte) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/predict", bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	h.ServeHTTP(rec, req)
	switch rec.Code {
	case http.StatusOK, http.StatusBadRequest, http.StatusUnprocessableEntity:
	default:
		t.Fatalf("status %d for body %q: %s", rec.Code, truncate(body), rec.Body.String())
	}
	if !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("answer is not JSON: %q", rec.Body.String())
	}
}

func truncate(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}

func seedImages(f *testing.F) [][]byte {
	var p, j bytes.Buffer
	img := image.NewNRGBA(image.Rect(0, 0, 5, 3))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 37)
	}
	if err := png.Encode(&p, img); err != nil {
		f.Fatal(err)
	}
	if err := jpeg.Encode(&j, img, nil); err != nil {
		f.Fatal(err)
	}
	return [][]byte{p.Bytes(), j.Bytes()}
}

// FuzzPredictImage fuzzes the image bytes (and the knobs) of a well-formed
// request: base64 → PNG/JPEG decode → pre-processing → response.
func FuzzPredictImage(f *testing.F) {
	for _, img := range seedImages(f) {
		f.Add(img, 0.5, 100, false, false)
		f.Add(img, 0.0, 300, true, true)
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, img []byte, threshold float64, maxDet int, raw, dataURL bool) {
		b64 := base64.StdEncoding.EncodeToString(img)
		if dataURL {
			b64 = "data:image/png;base64," + b64
		}
		body, err := json.Marshal(map[string]any{"image": b64, "threshold": threshold, "max_detections": maxDet, "return_raw": raw})
		if err != nil {
			return // NaN/Inf threshold: not expressible in JSON
		}
		checkAnswer(t, h, body)
	})
}

// FuzzPredictBody fuzzes the raw request body: JSON schema checks, base64.
func FuzzPredictBody(f *testing.F) {
	for _, img := range seedImages(f) {
		f.Add([]byte(`{"image":"` + base64.StdEncoding.EncodeToString(img) + `","threshold":0.3,"max_detections":5,"return_raw":false}`))
	}
	f.Add([]byte(`{"image":"data:image/jpeg;base64,/9j/"}`))
	f.Add([]byte(`{"threshold":"x","max_detections":1e400}`))
	f.Add([]byte(`[]`))
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAnswer(t, h, body)
	})
}

// FuzzPredictMultipart: any multipart/form-data body (the boundary fixed) is answered 200, 400 or
// 422 with JSON, never a panic or a 500.
func FuzzPredictMultipart(f *testing.F) {
	const boundary = "fuzzboundary"
	part := func(name, file string, data []byte) []byte {
		head := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\""
		if file != "" {
			head += "; filename=\"" + file + "\"\r\nContent-Type: application/octet-stream"
		}
		return append(append([]byte(head+"\r\n\r\n"), data...), "\r\n"...)
	}
	for _, img := range seedImages(f) {
		body := append(part("image", "x.png", img), part("threshold", "", []byte("0.3"))...)
		f.Add(append(body, "--"+boundary+"--\r\n"...))
	}
	f.Add([]byte("--" + boundary + "--\r\n"))
	f.Add(append(part("max_detections", "", []byte("many")), "--"+boundary+"--\r\n"...))
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAnswerAs(t, h, "multipart/form-data; boundary="+boundary, body)
	})
}
