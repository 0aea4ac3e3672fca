// Package pi05 is the model side of the pi0.5 policy (lerobot/pi05_base): server configuration,
// checkpoint loading and validation, the PaliGemma prompt and tokenizer, image pre-processing,
// state/action normalization and request validation. The compute runs in package native.
package pi05

import (
	"path/filepath"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/internal/envvar"
)

// Fixed sizes of the pi0.5 interface.
const (
	MaxCameras    = 4
	MaxActionDim  = 32 // actions and state are padded to 32
	MaxTokenLen   = 224
	DefaultHFRepo = hub.PI05Repo
)

// ServerConfig is the environment of the original pi0.5 package's server (PI05_* table, HF_MODEL, ...).
type ServerConfig struct {
	NumImages     int    // PI05_NUM_IMAGES, 1-4: the cameras of every request
	ActionHorizon int    // PI05_ACTION_HORIZON, 1-64: the action chunk H
	NumSteps      int    // PI05_NUM_STEPS, 1-10: default flow-matching steps
	TokenLen      int    // PI05_TOKEN_LEN, 1-224: longer prompts are truncated; 0 = the checkpoint's (see EffectiveTokenLen)
	HFModel       string // the served model id: HF_MODEL's repo (also when HF_MODEL is its snapshot folder)
	Source        string // HF_MODEL as given: a repo id or a weights folder ("" = DefaultHFRepo)
	Revision      string // TT_WEIGHTS_REVISION: the pinned revision ("" = main)
	WeightsDir    string // PI05_WEIGHTS_DIR: overrides the HF cache lookup
	Tokenizer     string // PI05_TOKENIZER: tokenizer.model path (default: beside the weights)
	PrefixCacheMB int    // PI05_PREFIX_CACHE_MB: the exact prefix cache's bound; 0 = off
}

// ServerConfigFromEnv reads the configuration; getenv is os.Getenv in production. Every bad value
// is reported with its variable name.
func ServerConfigFromEnv(getenv func(string) string) (ServerConfig, error) {
	r := envvar.New(getenv)
	c := ServerConfig{
		HFModel:       hub.ModelID(r.Get("HF_MODEL"), DefaultHFRepo),
		Source:        r.Get("HF_MODEL"),
		Revision:      r.Get("TT_WEIGHTS_REVISION"),
		WeightsDir:    r.Get("PI05_WEIGHTS_DIR"),
		Tokenizer:     r.Get("PI05_TOKENIZER"),
		NumImages:     r.Int("PI05_NUM_IMAGES", 2, 1, MaxCameras),
		ActionHorizon: r.Int("PI05_ACTION_HORIZON", 50, 1, 64),
		NumSteps:      r.Int("PI05_NUM_STEPS", 10, 1, 10),
		TokenLen:      r.Int("PI05_TOKEN_LEN", 0, 1, MaxTokenLen),
		PrefixCacheMB: r.Int("PI05_PREFIX_CACHE_MB", 0, 0, 1<<20),
	}
	return c, r.Err()
}

// ResolveWeightsDir finds the weights by tt-model's one rule (hub.ServerWeights.Locate):
// PI05_WEIGHTS_DIR, else HF_MODEL as a folder (the pinned snapshot folder `tt-model serve` passes)
// or as a repo id in the local Hugging Face cache at TT_WEIGHTS_REVISION (default main). It never
// touches the network; the error names every place it looked.
func (c ServerConfig) ResolveWeightsDir(getenv func(string) string) (string, error) {
	w, _ := hub.WeightsFor("pi05")
	loc, err := w.Locate(func(k string) string {
		switch k {
		case "PI05_WEIGHTS_DIR":
			return c.WeightsDir
		case "HF_MODEL":
			return c.Source
		case "TT_WEIGHTS_REVISION":
			return c.Revision
		}
		return getenv(k)
	}, "")
	return loc.Dir, err
}

// EffectiveTokenLen is PI05_TOKEN_LEN, else the checkpoint's tokenizer_max_length (200 for
// lerobot/pi05_base: lerobot truncates there, so longer prompts give the reference's tokens) capped
// at the largest prompt bucket, else 224 (the original package's buffer).
func (c ServerConfig) EffectiveTokenLen(cfg PolicyConfig) int {
	switch {
	case c.TokenLen > 0:
		return c.TokenLen
	case cfg.TokenizerMaxLength > 0:
		return min(cfg.TokenizerMaxLength, MaxTokenLen)
	}
	return MaxTokenLen
}

// TokenizerPath is PI05_TOKENIZER, else tokenizer.model beside the weights.
func (c ServerConfig) TokenizerPath(weightsDir string) string {
	if c.Tokenizer != "" {
		return c.Tokenizer
	}
	return filepath.Join(weightsDir, "tokenizer.model")
}
