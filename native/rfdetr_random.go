package native

import (
	"encoding/json"
	"fmt"
	"os"
)

// The deterministic random RF-DETR checkpoint shared with the PyTorch
// reference (tools/reference/rfdetr.py, which documents the generator): a
// counter-based splitmix64 stream keyed by the tensor name and a seed, so Go
// and Python produce bit-identical float32 tensors without committing them.

const golden64 = 0x9E3779B97F4A7C15

// RandomSpec is one tensor of the random checkpoint: uniform values in
// [center-scale, center+scale).
type RandomSpec struct {
	Name   string  `json:"name"`
	Shape  []int   `json:"shape"`
	Center float64 `json:"center"`
	Scale  float64 `json:"scale"`
}

// RandomCheckpointSpec is the file tools/reference/rfdetr.py writes as
// rfdetr_checkpoint.json: every tensor of the real checkpoint with its init
// rule, and the input image tensor.
type RandomCheckpointSpec struct {
	Tensors []RandomSpec `json:"tensors"`
	Pixels  RandomSpec   `json:"pixels"`
}

// ReadRandomCheckpointSpec parses an rfdetr_checkpoint.json.
func ReadRandomCheckpointSpec(path string) (*RandomCheckpointSpec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read random checkpoint spec: %w", err)
	}
	var s RandomCheckpointSpec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if len(s.Tensors) == 0 {
		return nil, fmt.Errorf("parse %s: no tensors", path)
	}
	return &s, nil
}

func fnv1a64(s string) uint64 {
	h := uint64(0xCBF29CE484222325)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 0x100000001B3
	}
	return h
}

// RandomTensor fills spec's tensor for seed.
func RandomTensor(spec RandomSpec, seed uint64) Tensor {
	n := 1
	for _, d := range spec.Shape {
		n *= d
	}
	key := fnv1a64(spec.Name) ^ (seed * golden64)
	data := make([]float32, n)
	for i := range data {
		z := key + uint64(i+1)*golden64
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		z ^= z >> 31
		u := float64(z>>40) / float64(1<<24)
		data[i] = float32(spec.Center + spec.Scale*(2*u-1))
	}
	return Tensor{Shape: append([]int(nil), spec.Shape...), Data: data}
}

// Lookup returns a LoadRFDETRFunc lookup that generates each
// requested tensor of the random checkpoint on demand.
func (s *RandomCheckpointSpec) Lookup(seed uint64) func(name string) (Tensor, bool) {
	byName := make(map[string]RandomSpec, len(s.Tensors))
	for _, t := range s.Tensors {
		byName[t.Name] = t
	}
	return func(name string) (Tensor, bool) {
		t, ok := byName[name]
		if !ok {
			return Tensor{}, false
		}
		return RandomTensor(t, seed), true
	}
}
