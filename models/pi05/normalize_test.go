package pi05

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/models/safetensors"
)

func writeStats(t *testing.T, path string, stats map[string][]float32) {
	t.Helper()
	var entries []safetensors.Entry
	for name, v := range stats {
		entries = append(entries, safetensors.Entry{Name: name, DType: safetensors.F32, Shape: []int{len(v)}, Data: func() []float32 { return v }})
	}
	if err := safetensors.WriteFile(path, entries, nil); err != nil {
		t.Fatal(err)
	}
}

func TestQuantileNormalization(t *testing.T) {
	dir := t.TempDir()
	writeStats(t, filepath.Join(dir, "policy_preprocessor_step_3_normalizer_processor.safetensors"), map[string][]float32{
		"observation.state.q01": {0, -2, 5}, "observation.state.q99": {10, 2, 5},
		"action.q01": {-1, 0}, "action.q99": {3, 4},
		"observation.state.mean": {1, 1, 1}, // other statistics are ignored
	})
	cfg := PolicyConfig{MaxStateDim: 32, MaxActionDim: 32, Normalization: map[string]string{"STATE": "QUANTILES", "ACTION": "QUANTILES"}}
	n, err := LoadNormalizer(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := n.NormalizeState([]float32{5, 2, 5})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 0 || got[1] != 1 || got[2] != -1 { // a zero span uses lerobot's eps
		t.Errorf("NormalizeState = %v", got)
	}
	if _, err := n.NormalizeState([]float32{1}); err == nil || !strings.Contains(err.Error(), "1 values") {
		t.Errorf("short state: %v", err)
	}
	acts := [][]float32{{-1, 1, 0.5}, {1, -1, 0.5}}
	if !n.UnnormalizeActions(acts) || acts[0][0] != -1 || acts[0][1] != 4 || acts[1][0] != 3 || acts[1][1] != 0 || acts[0][2] != 0.5 {
		t.Errorf("UnnormalizeActions = %v", acts)
	}

	// IDENTITY in config.json, or no files: values pass through and actions stay normalized.
	for _, c := range []struct {
		dir string
		cfg PolicyConfig
	}{{dir, PolicyConfig{MaxStateDim: 32, MaxActionDim: 32}}, {t.TempDir(), cfg}} {
		n, err := LoadNormalizer(c.dir, c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if n.UnnormalizeActions([][]float32{{0}}) || n.State != nil {
			t.Error("statistics applied without QUANTILES files")
		}
	}
}

func TestServerConfigFromEnv(t *testing.T) {
	env := map[string]string{"PI05_NUM_IMAGES": "5", "PI05_ACTION_HORIZON": "x", "PI05_NUM_STEPS": "4", "PI05_TOKEN_LEN": "0"}
	c, err := ServerConfigFromEnv(func(k string) string { return env[k] })
	for _, v := range []string{"PI05_NUM_IMAGES", "PI05_ACTION_HORIZON", "PI05_TOKEN_LEN"} {
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("error %v does not name %s", err, v)
		}
	}
	if c.NumSteps != 4 {
		t.Errorf("NumSteps = %d", c.NumSteps)
	}
	c, err = ServerConfigFromEnv(func(string) string { return "" })
	if err != nil || c.NumImages != 2 || c.ActionHorizon != 50 || c.NumSteps != 10 || c.TokenLen != 0 || c.EffectiveTokenLen(PolicyConfig{TokenizerMaxLength: 200}) != 200 || c.EffectiveTokenLen(PolicyConfig{}) != 224 || c.HFModel != "lerobot/pi05_base" {
		t.Errorf("defaults %+v, %v", c, err)
	}
}

func TestResolveWeightsDir(t *testing.T) {
	cache := t.TempDir()
	commit := strings.Repeat("ab", 20)
	snap := filepath.Join(cache, "models--lerobot--pi05_base", "snapshots", commit)
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "model.safetensors"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(cache, "models--lerobot--pi05_base", "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, "models--lerobot--pi05_base", "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HF_HUB_CACHE": cache}
	getenv := func(k string) string { return env[k] }
	for _, rev := range []string{"", "main", commit} {
		c, _ := ServerConfigFromEnv(getenv)
		c.Revision = rev
		dir, err := c.ResolveWeightsDir(getenv)
		if err != nil || dir != snap {
			t.Errorf("revision %q: %q, %v", rev, dir, err)
		}
	}
	c, _ := ServerConfigFromEnv(getenv)
	c.Revision = "v2"
	if _, err := c.ResolveWeightsDir(getenv); err == nil || !strings.Contains(err.Error(), `TT_WEIGHTS_REVISION "v2" in the HF cache`) {
		t.Errorf("unknown revision: %v", err)
	}
	c.WeightsDir = filepath.Join(cache, "nope")
	if _, err := c.ResolveWeightsDir(getenv); err == nil || !strings.Contains(err.Error(), "PI05_WEIGHTS_DIR") {
		t.Errorf("bad PI05_WEIGHTS_DIR: %v", err)
	}
	// `tt-model serve` passes the pinned snapshot folder as HF_MODEL; the served id stays
	// the repo.
	env["HF_MODEL"] = snap
	c, _ = ServerConfigFromEnv(getenv)
	if dir, err := c.ResolveWeightsDir(getenv); err != nil || dir != snap || c.HFModel != "lerobot/pi05_base" {
		t.Errorf("HF_MODEL=%s: %q, %v, model id %q", snap, dir, err, c.HFModel)
	}
}
