package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The count line is the number of detections above the threshold, not the
// max_detections the demo asked for: /predict caps its answer at
// max_detections, as the server does (here a stand-in with 42 above it, and
// one with more than /predict ever returns); the table shows the top ten.
func TestPostPictureCountsAboveThreshold(t *testing.T) {
	picture := filepath.Join(t.TempDir(), "p.png")
	if err := os.WriteFile(picture, []byte("png"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		above int
		want  []string
	}{
		{42, []string{"42 detection(s) above 0.50", "… and 32 more"}},
		{3, []string{"3 detection(s) above 0.50"}},
		{5000, []string{"300 or more detection(s) above 0.50", "… and 290 more"}},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				MaxDetections int `json:"max_detections"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			n := min(c.above, req.MaxDetections, askDetections)
			p := prediction{NumDetections: n, ImageSize: map[string]int{"width": 64, "height": 48}}
			for range n {
				p.Detections = append(p.Detections, detection{Label: "cup", LabelID: 47, Score: 0.9, Box: []float64{1, 2, 3, 4}})
			}
			json.NewEncoder(w).Encode(p)
		}))
		var out strings.Builder
		err := postPicture(&out, srv.URL, picture, 0.5)
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%d above: output lacks %q:\n%s", c.above, w, out.String())
			}
		}
		if rows := strings.Count(out.String(), "  cup "); rows != min(c.above, showDetections) {
			t.Errorf("%d above: %d rows, want %d:\n%s", c.above, rows, min(c.above, showDetections), out.String())
		}
	}
}
