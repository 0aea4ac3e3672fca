package rfdetr

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/models/safetensors"
)

// GeneratorKey is the safetensors metadata key naming what made a file;
// randomGenerator starts its value in the checkpoints RandomCheckpoint writes.
const (
	GeneratorKey    = "generator"
	randomGenerator = "tt-model random RF-DETR-base"
)

// RandomCheckpoint describes a full-size checkpoint of random weights: every
// tensor of Specs, under the chosen naming scheme. Its detections are
// meaningless; it exists so tests and demos can run the real forward where
// the real weights cannot be downloaded.
type RandomCheckpoint struct {
	Seed   uint64
	DType  safetensors.DType // F32 (default), BF16 or F16
	Scheme string            // SchemeRFDETR (default) or SchemeTransformers
}

// Write creates dir/model.safetensors, dir/config.json (COCO id2label) and
// the marker that says they are generated (hub.TestWeightsFile), so every
// copy of them is reported as test weights.
func (rc RandomCheckpoint) Write(dir string) error {
	if rc.DType == "" {
		rc.DType = safetensors.F32
	}
	if rc.Scheme == "" {
		rc.Scheme = SchemeRFDETR
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("random checkpoint: %w", err)
	}
	var entries []safetensors.Entry
	for _, s := range Specs() {
		parts := SourceNames(rc.Scheme, s.Name)
		for p, name := range parts {
			shape := append([]int{s.Shape[0] / len(parts)}, s.Shape[1:]...)
			s, p, n := s, p, numElements(shape)
			entries = append(entries, safetensors.Entry{Name: name, DType: rc.DType, Shape: shape,
				Data: func() []float32 { return rc.values(s)[p*n : (p+1)*n] }})
		}
	}
	path := filepath.Join(dir, WeightsFile)
	generator := randomGenerator + ", seed " + strconv.FormatUint(rc.Seed, 10)
	meta := map[string]string{"format": "pt", GeneratorKey: generator}
	if err := safetensors.WriteFile(path, entries, meta); err != nil {
		return fmt.Errorf("random checkpoint: %w", err)
	}
	id2label := make(map[string]string, NumClasses)
	for id, name := range coco91 {
		id2label[strconv.Itoa(id)] = name
	}
	cfg, _ := json.MarshalIndent(map[string]any{"model_type": "rf_detr", "id2label": id2label}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), cfg, 0o644); err != nil {
		return fmt.Errorf("random checkpoint: %w", err)
	}
	return hub.WriteTestWeightsMarker(dir, generator)
}

// values draws one canonical tensor. Each tensor has its own stream (seeded
// by the checkpoint seed and its name), so values do not depend on order.
// Scales follow PyTorch's default initialisation, so activations stay O(1):
// weights uniform in ±1/sqrt(fan_in), norm scales near 1, layer scales 0.1.
func (rc RandomCheckpoint) values(s Spec) []float32 {
	h := fnv.New64a()
	h.Write([]byte(s.Name))
	state := rc.Seed ^ h.Sum64()
	next := func() float32 { // splitmix64 → uniform in [-1, 1)
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		return float32(z>>40)/float32(1<<23) - 1
	}
	out := make([]float32, numElements(s.Shape))
	fanIn := 1
	for _, d := range s.Shape[1:] {
		fanIn *= d
	}
	scale, offset := float32(1/math.Sqrt(float64(fanIn))), float32(0)
	switch {
	case strings.Contains(s.Name, "lambda1"):
		scale, offset = 0.02, 0.1
	case isNormWeight(s.Name):
		scale, offset = 0.1, 1
	case strings.HasSuffix(s.Name, "bias") || strings.HasSuffix(s.Name, "in_proj_bias"):
		scale = 0.02
	case strings.HasSuffix(s.Name, "cls_token") || strings.HasSuffix(s.Name, "position_embeddings") || s.Name == "query_feat.weight":
		scale = 0.5
	case s.Name == "refpoint_embed.weight":
		scale = 0.3
	}
	for i := range out {
		out[i] = offset + scale*next()
	}
	return out
}

func isNormWeight(name string) bool {
	if !strings.HasSuffix(name, ".weight") || strings.Contains(name, "conv") {
		return false
	}
	for _, n := range []string{"norm", "layernorm", ".bn.", "stages.0.1."} {
		if strings.Contains(name, n) {
			return true
		}
	}
	return false
}
