package rfdetr

import (
	"fmt"
	"math"
	"sort"
)

// Detection is one (query, label) pair above the threshold.
type Detection struct {
	Label   string
	LabelID int // COCO category id, 0..90
	Score   float32
	Query   int        // decoder query the box comes from
	Box     [4]float32 // x1, y1, x2, y2 in pixels of the original image, clamped to it
	BoxNorm [4]float32 // the model's cx, cy, w, h, normalised to the original image
}

// Postprocess turns raw outputs into detections as upstream's PostProcess
// does: sigmoid of every logit, the top NumQueries of the 300×91
// (query, label) pairs by score — so one query can carry several labels —,
// query = idx / 91, label = idx % 91, cxcywh → xyxy scaled by the original
// width and height; then keep score > threshold, clamp boxes to the image,
// and keep at most maxDetections, highest score first. Equal scores keep
// the lower pair index first, which makes the order deterministic.
func Postprocess(logits, boxes []float32, width, height int, threshold float32, maxDetections int, labels *[NumClasses]string) ([]Detection, error) {
	if len(logits) != NumQueries*NumClasses || len(boxes) != NumQueries*4 {
		return nil, fmt.Errorf("postprocess: got %d logits and %d box values, want %d and %d",
			len(logits), len(boxes), NumQueries*NumClasses, NumQueries*4)
	}
	type pair struct {
		idx   int
		score float32
	}
	var kept []pair
	for i, l := range logits {
		s := sigmoid(l)
		if s > threshold { // NaN never passes
			kept = append(kept, pair{i, s})
		}
	}
	sort.Slice(kept, func(a, b int) bool {
		if kept[a].score != kept[b].score {
			return kept[a].score > kept[b].score
		}
		return kept[a].idx < kept[b].idx
	})
	kept = kept[:min(len(kept), NumQueries, max(maxDetections, 0))]

	w, h := float32(width), float32(height)
	out := make([]Detection, len(kept))
	for i, p := range kept {
		q, label := p.idx/NumClasses, p.idx%NumClasses
		cx, cy, bw, bh := boxes[4*q], boxes[4*q+1], boxes[4*q+2], boxes[4*q+3]
		out[i] = Detection{
			Label:   labels[label],
			LabelID: label,
			Score:   p.score,
			Query:   q,
			Box: [4]float32{
				clamp((cx-0.5*bw)*w, w), clamp((cy-0.5*bh)*h, h),
				clamp((cx+0.5*bw)*w, w), clamp((cy+0.5*bh)*h, h),
			},
			BoxNorm: [4]float32{cx, cy, bw, bh},
		}
	}
	return out, nil
}

// sigmoid in float64, rounded once to float32.
func sigmoid(x float32) float32 {
	return float32(1 / (1 + math.Exp(-float64(x))))
}

// clamp limits v to [0, hi]; NaN becomes 0 so a box is always inside the image.
func clamp(v, hi float32) float32 {
	switch {
	case v > hi:
		return hi
	case v >= 0:
		return v
	}
	return 0
}
