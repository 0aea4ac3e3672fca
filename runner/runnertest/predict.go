package runnertest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"time"
)

// PredictRFDETR posts a small generated PNG to an RF-DETR server's
// /predict URL and returns the number of detections (on a random
// checkpoint they are meaningless, but there are some).
func PredictRFDETR(url string) (int, error) {
	det, err := PredictRFDETRDetections(url)
	if err != nil {
		return 0, err
	}
	var list []json.RawMessage
	if err := json.Unmarshal(det, &list); err != nil {
		return 0, fmt.Errorf("decode %s: %w", det, err)
	}
	return len(list), nil
}

// PredictRFDETRDetections posts PredictRFDETR's request and returns the
// answer's "detections" as the server wrote them, for comparing two servers.
func PredictRFDETRDetections(url string) ([]byte, error) {
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for y := range 48 {
		for x := range 64 {
			img.Set(x, y, color.RGBA{uint8(x * 4), uint8(y * 5), 128, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	body, err := json.Marshal(map[string]any{"image": base64.StdEncoding.EncodeToString(buf.Bytes()), "threshold": 0.0, "max_detections": 5})
	if err != nil {
		return nil, err
	}
	// A forward on two busy cores can take several seconds.
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	var out struct {
		Detections json.RawMessage `json:"detections"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Detections == nil {
		return nil, fmt.Errorf("decode %s: %v", b, err)
	}
	return out.Detections, nil
}
