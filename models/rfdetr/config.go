package rfdetr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
)

// Config is what config.json contributes; everything else is fixed by the
// architecture or read from tensor shapes.
type Config struct {
	// ModelType is config.json's model_type, when it has one.
	ModelType string
	// ID2Label names class ids; ids it leaves out fall back to COCO-91.
	ID2Label map[int]string
	// Present is false when the weights directory has no config.json.
	Present bool
}

// LoadConfig reads config.json. A missing file is not an error (the labels
// fall back to COCO-91); a malformed one is, naming the file and key.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("read config %s: %w", path, err)
	}
	return parseConfig(path, data)
}

func parseConfig(path string, data []byte) (Config, error) {
	var raw struct {
		ModelType string          `json:"model_type"`
		ID2Label  json.RawMessage `json:"id2label"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	cfg := Config{ModelType: raw.ModelType, Present: true}
	if len(raw.ID2Label) == 0 || string(raw.ID2Label) == "null" {
		return cfg, nil
	}
	var labels map[string]string
	if err := json.Unmarshal(raw.ID2Label, &labels); err != nil {
		return Config{}, fmt.Errorf("config %s: id2label must map class ids to names: %w", path, err)
	}
	cfg.ID2Label = make(map[int]string, len(labels))
	for k, v := range labels {
		id, err := strconv.Atoi(k)
		if err != nil || id < 0 || id >= NumClasses {
			return Config{}, fmt.Errorf("config %s: id2label key %q is not a class id in 0..%d", path, k, NumClasses-1)
		}
		cfg.ID2Label[id] = v
	}
	return cfg, nil
}
