package pi05

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const lerobotConfig = `{
 "type": "pi05", "chunk_size": 50, "max_state_dim": 32, "max_action_dim": 32,
 "tokenizer_max_length": 200,
 "normalization_mapping": {"VISUAL": "IDENTITY", "STATE": "QUANTILES", "ACTION": "QUANTILES"},
 "input_features": {
  "observation.images.right_wrist_0_rgb": {"type": "VISUAL", "shape": [3, 224, 224]},
  "observation.state": {"type": "STATE", "shape": [8]},
  "observation.images.base_0_rgb": {"type": "VISUAL", "shape": [3, 224, 224]},
  "observation.images.left_wrist_0_rgb": {"type": "VISUAL", "shape": [3, 224, 224]}
 },
 "output_features": {"action": {"type": "ACTION", "shape": [7]}}
}`

func TestPolicyConfigAndCameras(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(lerobotConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadPolicyConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The file's order, as lerobot iterates config.image_features.
	if got := cfg.Cameras(); !slices.Equal(got, []string{"right_wrist_0_rgb", "base_0_rgb", "left_wrist_0_rgb"}) {
		t.Errorf("Cameras = %v", got)
	}
	if cfg.ActionDim() != 7 || cfg.MinPeriod != 4e-3 || cfg.MaxPeriod != 4 || cfg.NumInferenceSteps != 10 {
		t.Errorf("config %+v", cfg)
	}
	p := &Policy{Config: cfg}
	got, err := p.ResolveCameras([]string{"left_wrist_0_rgb", "observation.images.right_wrist_0_rgb"})
	if err != nil || len(got) != 2 || got[0].Key != "observation.images.right_wrist_0_rgb" || got[1].Key != "left_wrist_0_rgb" {
		t.Errorf("ResolveCameras = %+v, %v", got, err)
	}
	for _, names := range [][]string{{"front"}, {"base_0_rgb", "observation.images.base_0_rgb"}} {
		var re *RequestError
		if _, err := p.ResolveCameras(names); !errors.As(err, &re) || re.Field != "images" {
			t.Errorf("ResolveCameras(%v): %v", names, err)
		}
	}

	for bad, want := range map[string]string{
		`{"type": "act"}`: `type "act" is not a pi05 policy`,
		`{"normalization_mapping": {"STATE": "MEAN_STD"}}`: "normalization_mapping.STATE",
		`{"max_state_dim": 64}`:                            "max_state_dim 64",
		`{"input_features": []}`:                           "features: want an object",
	} {
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPolicyConfig(dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", bad, err, want)
		}
	}
}
