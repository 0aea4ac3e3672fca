package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

type detection struct {
	Label   string    `json:"label"`
	LabelID int       `json:"label_id"`
	Score   float64   `json:"score"`
	Box     []float64 `json:"box"`
}

type prediction struct {
	Detections    []detection        `json:"detections"`
	NumDetections int                `json:"num_detections"`
	ImageSize     map[string]int     `json:"image_size"`
	TimingMS      map[string]float64 `json:"timing_ms"`
}

// Detections asked of /predict (its most, so the count is the number above
// the threshold) and shown in the table.
const (
	askDetections  = 300
	showDetections = 10
)

// postPicture sends the picture to url/predict as the /predict JSON contract
// says and prints how many detections there are above threshold, and the
// top ones as a table.
func postPicture(w io.Writer, url, picture string, threshold float64) error {
	data, err := os.ReadFile(picture)
	if err != nil {
		return err
	}
	var p prediction
	body := map[string]any{"image": base64.StdEncoding.EncodeToString(data), "threshold": threshold, "max_detections": askDetections}
	if err := postJSON(url, "/predict", body, &p); err != nil {
		return err
	}
	printPrediction(w, p, threshold)
	return nil
}

// printPrediction is the count line, then the top detections.
func printPrediction(w io.Writer, p prediction, threshold float64) {
	count := fmt.Sprint(p.NumDetections)
	if p.NumDetections >= askDetections {
		count = fmt.Sprintf("%d or more", askDetections) // /predict returns at most that many
	}
	fmt.Fprintf(w, "%s detection(s) above %.2f on a %dx%d picture; timing (ms): decode %.1f, preprocess %.1f, inference %.1f, postprocess %.1f, total %.1f\n",
		count, threshold, p.ImageSize["width"], p.ImageSize["height"],
		p.TimingMS["decode"], p.TimingMS["preprocess"], p.TimingMS["inference"], p.TimingMS["postprocess"], p.TimingMS["total"])
	if len(p.Detections) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "  LABEL\tID\tSCORE\tBOX (x1, y1, x2, y2)")
	for _, d := range p.Detections[:min(len(p.Detections), showDetections)] {
		fmt.Fprintf(tw, "  %s\t%d\t%.3f\t%.1f\n", d.Label, d.LabelID, d.Score, d.Box)
	}
	tw.Flush()
	if more := len(p.Detections) - showDetections; more > 0 {
		fmt.Fprintf(w, "  … and %d more (the %d with the highest scores are shown)\n", more, showDetections)
	}
}

// postJSON POSTs body as JSON to url+path and decodes a 200 answer into out.
func postJSON(url, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	endpoint := strings.TrimRight(url, "/") + path
	client := &http.Client{Timeout: 5 * time.Minute}
	resp, err := client.Post(endpoint, "application/json", bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("POST %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("POST %s: %w", endpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", endpoint, resp.Status, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode the answer of %s: %w: %.200s", endpoint, err, raw)
	}
	return nil
}
