package pi05

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// PolicyConfig is what the server uses from lerobot's config.json (a PreTrainedConfig with
// "type": "pi05"), plus the optional Hugging Face style sub-configs that say what tensor shapes
// cannot (head counts, eps, RoPE theta).
type PolicyConfig struct {
	Type               string            `json:"type"`
	ChunkSize          int               `json:"chunk_size"`
	MaxStateDim        int               `json:"max_state_dim"`
	MaxActionDim       int               `json:"max_action_dim"`
	NumInferenceSteps  int               `json:"num_inference_steps"`
	MinPeriod          float64           `json:"min_period"`
	MaxPeriod          float64           `json:"max_period"`
	TokenizerMaxLength int               `json:"tokenizer_max_length"`
	Normalization      map[string]string `json:"normalization_mapping"`
	InputFeatures      Features          `json:"input_features"`
	OutputFeatures     Features          `json:"output_features"`
	Vision             *SubConfig        `json:"vision_config"`
	Text               *SubConfig        `json:"text_config"`
	Expert             *SubConfig        `json:"expert_config"`
}

// FeatureSpec is one lerobot policy feature.
type FeatureSpec struct {
	Name  string `json:"-"`
	Type  string `json:"type"`
	Shape []int  `json:"shape"`
}

// Features keeps the file's order: lerobot feeds cameras to the model in config order.
type Features []FeatureSpec

// UnmarshalJSON decodes a JSON object of features in key order.
func (f *Features) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("features: want an object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("features: %w", err)
		}
		spec := FeatureSpec{Name: t.(string)}
		if err := dec.Decode(&spec); err != nil {
			return fmt.Errorf("feature %q: %w", spec.Name, err)
		}
		*f = append(*f, spec)
	}
	return nil
}

// Get returns the feature called name.
func (f Features) Get(name string) (FeatureSpec, bool) {
	for _, s := range f {
		if s.Name == name {
			return s, true
		}
	}
	return FeatureSpec{}, false
}

// SubConfig holds the Hugging Face keys we read; zero values mean "use the default".
type SubConfig struct {
	NumAttentionHeads int     `json:"num_attention_heads"`
	HeadDim           int     `json:"head_dim"`
	NumKeyValueHeads  int     `json:"num_key_value_heads"`
	RMSNormEps        float64 `json:"rms_norm_eps"`
	LayerNormEps      float64 `json:"layer_norm_eps"`
	RopeTheta         float64 `json:"rope_theta"`
}

// The lerobot names of the features the server fills.
const (
	StateFeature  = "observation.state"
	ActionFeature = "action"
	imagePrefix   = "observation.images."
)

// LoadPolicyConfig reads dir/config.json; a missing file gives the pi05_base defaults.
func LoadPolicyConfig(dir string) (PolicyConfig, error) {
	c := PolicyConfig{}
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return c, fmt.Errorf("read %s: %w", path, err)
	}
	if err == nil {
		if err := json.Unmarshal(raw, &c); err != nil {
			return c, fmt.Errorf("%s: %w", path, err)
		}
		if c.Type != "" && c.Type != "pi05" {
			return c, fmt.Errorf("%s: type %q is not a pi05 policy", path, c.Type)
		}
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = 50
	}
	if c.MaxStateDim == 0 {
		c.MaxStateDim = MaxActionDim
	}
	if c.MaxActionDim == 0 {
		c.MaxActionDim = MaxActionDim
	}
	if c.NumInferenceSteps == 0 {
		c.NumInferenceSteps = 10
	}
	if c.MinPeriod == 0 {
		c.MinPeriod = 4e-3
	}
	if c.MaxPeriod == 0 {
		c.MaxPeriod = 4.0
	}
	if c.MaxStateDim > MaxActionDim || c.MaxStateDim < 1 {
		return c, fmt.Errorf("%s: max_state_dim %d outside 1..%d", path, c.MaxStateDim, MaxActionDim)
	}
	for _, k := range []string{"STATE", "ACTION"} {
		switch m := c.Normalization[k]; m {
		case "", "IDENTITY", "QUANTILES":
		default:
			return c, fmt.Errorf("%s: normalization_mapping.%s %q is not supported (IDENTITY or QUANTILES)", path, k, m)
		}
	}
	return c, nil
}

// Cameras lists the camera names of the image features (without "observation.images.") in the
// config's order, which is the order lerobot feeds them to the model.
func (c PolicyConfig) Cameras() []string {
	var cams []string
	for _, f := range c.InputFeatures {
		if f.Type == "VISUAL" && strings.HasPrefix(f.Name, imagePrefix) {
			cams = append(cams, strings.TrimPrefix(f.Name, imagePrefix))
		}
	}
	return cams
}

// ActionDim is the real action width the policy returns (output_features.action), else max_action_dim.
func (c PolicyConfig) ActionDim() int {
	if f, ok := c.OutputFeatures.Get(ActionFeature); ok && len(f.Shape) == 1 && f.Shape[0] > 0 && f.Shape[0] <= c.MaxActionDim {
		return f.Shape[0]
	}
	return c.MaxActionDim
}
