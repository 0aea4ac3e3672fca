// Package golden reads the pi0.5 reference goldens that tools/reference/pi05.py writes (PyTorch,
// from the spec, on a random checkpoint with the real lerobot tensor names): the one reader of
// every pi0.5 test that compares against the reference.
package golden

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ttmodel/tt-model/models/safetensors"
)

// Dir is the committed goldens' folder, relative to the repository root; TinyDir their tiny
// checkpoint (config.json, model.safetensors).
const (
	Dir     = "kernels/pi05/testdata"
	TinyDir = "kernels/pi05/testdata/tiny"
)

// Case is one golden: the kernels' inputs and the reference's outputs.
type Case struct {
	Name             string
	Images, Noise    []float32 // [cams][3][S][S] in [-1, 1]; [horizon][32]
	CamMask, TokMask []bool
	Tokens           []int32
	Steps, Horizon   int
	ImageTokens      []float32 // fp32 reference: the valid cameras' image tokens
	PK, PV           []float32 // fp32 reference: prefix K (after RoPE) and V [layers][kv heads][PrefixLen][head_dim]
	PrefixLen        int
	Actions          []float32 // the fp32 run's actions [horizon][32]
	ActionsBF16      []float32 // the bf16 run's
}

// Cams is the case's camera count.
func (c Case) Cams() int { return len(c.CamMask) }

// Read reads one case file.
func Read(path string) (Case, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return Case{}, err
	}
	defer f.Close()
	var errs []string
	raw := func(n string) []byte {
		b, err := f.Bytes(n)
		if err != nil {
			errs = append(errs, err.Error())
		}
		return b
	}
	f32 := func(n string) []float32 {
		v, err := f.Float32(n)
		if err != nil {
			errs = append(errs, err.Error())
		}
		return append([]float32(nil), v...)
	}
	bools := func(n string) []bool {
		b := raw(n)
		out := make([]bool, len(b))
		for i, v := range b {
			out[i] = v != 0
		}
		return out
	}
	i32 := func(n string) []int32 {
		b := raw(n)
		out := make([]int32, len(b)/4)
		for i := range out {
			out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out
	}
	c := Case{Name: strings.TrimSuffix(filepath.Base(path), ".safetensors"),
		Images: f32("images"), Noise: f32("noise"), CamMask: bools("image_masks"), TokMask: bools("token_masks"),
		Tokens: i32("tokens"), ImageTokens: f32("image_tokens"), PK: f32("prefix_k"), PV: f32("prefix_v"),
		Actions: f32("actions"), ActionsBF16: f32("actions_bf16")}
	if steps := i32("steps"); len(steps) == 1 {
		c.Steps = int(steps[0])
	}
	if info, ok := f.Info("noise"); ok && len(info.Shape) == 2 {
		c.Horizon = info.Shape[0]
	}
	if info, ok := f.Info("prefix_k"); ok && len(info.Shape) == 4 {
		c.PrefixLen = info.Shape[2]
	}
	if len(errs) > 0 || c.Steps == 0 || c.Horizon == 0 {
		return Case{}, fmt.Errorf("golden %s: %s (want steps [1], noise [H][32], prefix_k of rank 4)", path, strings.Join(errs, "; "))
	}
	return c, nil
}

// All reads every case in dir (the files named c*.safetensors).
func All(dir string) ([]Case, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "c*.safetensors"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("no goldens in %s: %v", dir, err)
	}
	var out []Case
	for _, p := range paths {
		c, err := Read(p)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
