package rfdetr

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/server"
)

// multipartBody is a multipart/form-data body with the picture as the file of field and the
// given fields, and its Content-Type.
func multipartBody(t *testing.T, field string, picture []byte, fields map[string]string) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	if picture != nil {
		fw, err := mw.CreateFormFile(field, "photo.png")
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(picture)
	}
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// TestPredictTakesThePictureItself: POST /predict answers a PNG or JPEG body (with or without an
// image Content-Type: curl --data-binary sends application/x-www-form-urlencoded) with the options
// in the query, and multipart/form-data with the file in "image"; a body none of the forms reads
// gets an error naming them all.
func TestPredictTakesThePictureItself(t *testing.T) {
	ts := newRFDETRTestServer(t, twoLabelOutputs())
	pngData, _ := base64.StdEncoding.DecodeString(pngB64(t, 64, 48))
	jpegData, _ := base64.StdEncoding.DecodeString(jpegB64(t, 64, 48))
	formType, form := multipartBody(t, "image", pngData, map[string]string{"threshold": "0.7", "max_detections": "5"})
	noImageType, noImage := multipartBody(t, "picture", pngData, nil)
	badFieldType, badField := multipartBody(t, "image", pngData, map[string]string{"threshold": "high"})
	cases := []struct {
		name, ctype, query string
		body               []byte
		status             int
		threshold          float64
		contains           string
	}{
		{"png body", "image/png", "?threshold=0.6", pngData, 200, 0.6, ""},
		{"jpeg body, curl's default type", "application/x-www-form-urlencoded", "", jpegData, 200, defaultThreshold, ""},
		{"multipart", formType, "", form, 200, 0.7, ""},
		{"multipart without image", noImageType, "", noImage, 422, 0, `"type":"missing"`},
		{"multipart bad threshold", badFieldType, "", badField, 422, 0, `"type":"float_type"`},
		{"bad query option", "image/png", "?max_detections=many", pngData, 422, 0, `"loc":["query","max_detections"]`},
		{"image type, not an image", "image/jpeg", "", []byte("hello"), 400, 0, "POST /predict takes a JSON object"},
		{"unreadable JSON", "application/json", "", []byte("{not json"), 422, 0, "multipart/form-data with the file in the field"},
		{"multipart without boundary", "multipart/form-data", "", form, 400, 0, "no boundary"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(ts.URL+"/predict"+tc.query, tc.ctype, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(raw), tc.contains) {
				t.Fatalf("HTTP %d %s; want %d containing %q", resp.StatusCode, raw, tc.status, tc.contains)
			}
			if tc.status != 200 {
				return
			}
			var p struct {
				NumDetections int                         `json:"num_detections"`
				Threshold     float64                     `json:"threshold"`
				ImageSize     struct{ Width, Height int } `json:"image_size"`
			}
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			if p.Threshold != tc.threshold || p.ImageSize.Width != 64 || p.ImageSize.Height != 48 || p.NumDetections == 0 {
				t.Errorf("answer %s; want threshold %v on a 64x48 picture with detections", raw, tc.threshold)
			}
		})
	}
}

// TestPredictMultipartStaysInTheBudget: the copy of a multipart picture is reserved from the
// request memory budget, so a budget that holds the body alone refuses it (413) instead of
// growing the process.
func TestPredictMultipartStaysInTheBudget(t *testing.T) {
	pngData, _ := base64.StdEncoding.DecodeString(pngB64(t, 64, 48))
	ctype, form := multipartBody(t, "image", pngData, nil)
	base, _ := runRFDETR(t, twoLabelOutputs(), server.Options{RequestMemory: int64(len(form)) + 16})
	resp, err := http.Post(base+"/predict", ctype, bytes.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(raw), "request memory budget") {
		t.Errorf("HTTP %d %s; want 413 naming the budget", resp.StatusCode, raw)
	}
}

// TestPredictCurlCommandsOfTheCard runs the two /predict commands the ready card prints (the file
// as a multipart field, and as the body from stdin) with the real curl, on a picture whose base64
// would not fit in one command-line argument (over 128 KiB).
func TestPredictCurlCommandsOfTheCard(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl on PATH")
	}
	ts := newRFDETRTestServer(t, twoLabelOutputs())
	img := image.NewNRGBA(image.Rect(0, 0, 400, 300))
	r := rand.New(rand.NewPCG(1, 2))
	for i := range img.Pix {
		img.Pix[i] = uint8(r.Uint32())
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	pngData := b.Bytes()
	if len(pngData)*4/3 <= 128<<10 {
		t.Fatalf("the picture is %d bytes: too small to show the argument limit", len(pngData))
	}
	photo := filepath.Join(t.TempDir(), "photo.png")
	if err := os.WriteFile(photo, pngData, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-s", ts.URL + "/predict", "-F", "image=@" + photo},
		{"-s", ts.URL + "/predict", "-H", "Content-Type: image/png", "--data-binary", "@-"},
	} {
		cmd := exec.Command(curl, args...)
		cmd.Stdin = bytes.NewReader(pngData)
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), `"image_size":{"width":400,"height":300}`) {
			t.Errorf("curl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
