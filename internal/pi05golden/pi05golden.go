// Package pi05golden reads the pi0.5 reference goldens: one safetensors file
// per case (tools/reference/pi05.py goldens), holding a request's inputs and
// what the PyTorch reference computed for it. It is the one reader of that
// format, shared by the kernel tests (native) and the policy tests
// (models/pi05).
package pi05golden

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ttmodel/tt-model/models/safetensors"
)

// Case is one golden: the inputs, then the fp32 reference's intermediate
// results and the actions of its fp32 and bf16 runs.
type Case struct {
	Name             string    // the file name without .safetensors
	Images           []float32 // [cams][3][side][side] in [-1, 1]
	CamMask, TokMask []bool    // present cameras; real (not padded) text tokens
	Tokens           []int32   // the prompt bucket's token ids
	Noise            []float32 // [Horizon][action dim]
	Steps, Horizon   int       // Euler steps; action rows
	ImageTokens      []float32 // valid image tokens after the projector
	PrefixK, PrefixV []float32 // [layers][kv heads][PrefixLen][head dim], K after RoPE
	PrefixLen        int       // valid prefix tokens (images + real text)
	Actions          []float32 // the fp32 run's actions [Horizon][action dim]
	ActionsBF16      []float32 // the bf16 run's actions
}

// Read reads the golden at path.
func Read(path string) (Case, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return Case{}, err
	}
	defer f.Close()
	var firstErr error
	keep := func(err error, name string) {
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%s: tensor %s: %w", path, name, err)
		}
	}
	f32 := func(name string) []float32 {
		v, err := f.Float32(name)
		keep(err, name)
		return append([]float32(nil), v...)
	}
	raw := func(name string) []byte {
		b, err := f.Bytes(name)
		keep(err, name)
		return b
	}
	bools := func(name string) []bool {
		var out []bool
		for _, b := range raw(name) {
			out = append(out, b != 0)
		}
		return out
	}
	i32 := func(name string) []int32 {
		b := raw(name)
		out := make([]int32, len(b)/4)
		for i := range out {
			out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out
	}
	dim := func(name string, axis int) int {
		info, ok := f.Info(name)
		if !ok || axis >= len(info.Shape) {
			keep(fmt.Errorf("missing, or fewer than %d axes", axis+1), name)
			return 0
		}
		return info.Shape[axis]
	}
	c := Case{
		Name:   strings.TrimSuffix(filepath.Base(path), ".safetensors"),
		Images: f32("images"), Noise: f32("noise"), CamMask: bools("image_masks"), TokMask: bools("token_masks"),
		Tokens: i32("tokens"), ImageTokens: f32("image_tokens"), PrefixK: f32("prefix_k"), PrefixV: f32("prefix_v"),
		Actions: f32("actions"), ActionsBF16: f32("actions_bf16"),
		Horizon: dim("noise", 0), PrefixLen: dim("prefix_k", 2),
	}
	if steps := i32("steps"); len(steps) == 1 {
		c.Steps = int(steps[0])
	} else {
		keep(fmt.Errorf("want one int32, got %d", len(steps)), "steps")
	}
	return c, firstErr
}

// ReadDir reads every golden (*.safetensors) of dir, in name order.
func ReadDir(dir string) ([]Case, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no goldens (*.safetensors) in %s", dir)
	}
	sort.Strings(paths)
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
