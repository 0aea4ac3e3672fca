package pi05

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/models/safetensors"
)

// tinyDims is a small pi0.5 with every structural feature of the full one.
func tinyDims() Dims {
	return Dims{
		Image: 28, Patch: 14, VWidth: 16, VLayers: 2, VHeads: 16, VMLP: 24, VEps: 1e-6,
		LWidth: 32, LLayers: 2, LHeads: 8, LMLP: 48, KVHeads: 1, HeadDim: 256, Vocab: 64,
		EWidth: 16, EHeads: 8, EMLP: 24, LEps: 1e-6, EEps: 1e-6, RopeTheta: 10000,
		MinPeriod: 4e-3, MaxPeriod: 4, ActionDim: 32,
	}
}

// writeCheckpoint builds an in-memory checkpoint; edit may rename (return a new name), reshape or
// drop (return "") tensors.
func writeCheckpoint(t *testing.T, d Dims, dtype safetensors.DType, edit func(e *safetensors.Entry) string) *safetensors.File {
	t.Helper()
	var entries []safetensors.Entry
	for _, e := range ExpectedTensors(d) {
		entry := safetensors.Entry{Name: e.Name, DType: dtype, Shape: e.Shape}
		if edit != nil {
			entry.Name = edit(&entry)
			if entry.Name == "" {
				continue
			}
		}
		n := 1
		for _, s := range entry.Shape {
			n *= s
		}
		entry.Data = func() []float32 { return make([]float32, n) }
		entries = append(entries, entry)
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, entries, nil); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.FromBytes("tiny.safetensors", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func tinyConfig() PolicyConfig {
	return PolicyConfig{MaxActionDim: 32, MaxStateDim: 32, MinPeriod: 4e-3, MaxPeriod: 4}
}

func TestInferDimsAndResolve(t *testing.T) {
	want := tinyDims()
	cfg := tinyConfig()
	cfg.Vision = &SubConfig{NumAttentionHeads: 16}
	for _, dt := range []safetensors.DType{safetensors.F32, safetensors.BF16} {
		f := writeCheckpoint(t, want, dt, func(e *safetensors.Entry) string {
			if e.Name == "time_mlp_in.weight" {
				return "action_time_mlp_in.weight" // older checkpoints
			}
			return e.Name
		})
		got, err := InferDims(f, cfg, "tiny")
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("InferDims = %+v\nwant %+v", got, want)
		}
		names, err := ResolveTensors(f, got, "tiny")
		if err != nil {
			t.Fatal(err)
		}
		if names["time_mlp_in.weight"] != "action_time_mlp_in.weight" {
			t.Errorf("legacy name not mapped: %q", names["time_mlp_in.weight"])
		}
		if len(names) != len(ExpectedTensors(want)) {
			t.Errorf("%d tensors resolved, want %d", len(names), len(ExpectedTensors(want)))
		}
	}
}

func TestFullSizeTensorCount(t *testing.T) {
	d := Dims{Image: 224, Patch: 14, VWidth: 1152, VLayers: 27, VHeads: 16, VMLP: 4304, LWidth: 2048,
		LLayers: 18, LHeads: 8, LMLP: 16384, KVHeads: 1, HeadDim: 256, Vocab: 257152, EWidth: 1024,
		EHeads: 8, EMLP: 4096, ActionDim: 32}
	var params int64
	ts := ExpectedTensors(d)
	for _, e := range ts {
		n := int64(1)
		for _, s := range e.Shape {
			n *= int64(s)
		}
		params += n
	}
	// The real file has 811 tensors and 3,353,433,872 parameters, including the prefix's final
	// norm (2048 values) that the model never uses.
	if len(ts) != 810 || params != 3353433872-2048 {
		t.Errorf("%d tensors, %d parameters", len(ts), params)
	}
}

func TestCheckpointErrorsNameTensors(t *testing.T) {
	d := tinyDims()
	const dropped = "paligemma_with_expert.gemma_expert.model.layers.1.mlp.up_proj.weight"
	const reshaped = "paligemma_with_expert.paligemma.model.language_model.layers.0.self_attn.k_proj.weight"
	f := writeCheckpoint(t, d, safetensors.F32, func(e *safetensors.Entry) string {
		switch e.Name {
		case dropped, "time_mlp_out.bias":
			return ""
		case reshaped:
			e.Shape = []int{128, 32}
		}
		return e.Name
	})
	got, err := InferDims(f, tinyConfig(), "tiny")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ResolveTensors(f, got, "tiny")
	if err == nil {
		t.Fatal("ResolveTensors accepted a broken checkpoint")
	}
	for _, name := range []string{dropped, "time_mlp_out.bias", reshaped + ": shape [128 32], want [256 32]"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s:\n%v", name, err)
		}
	}
}

func TestInferDimsErrors(t *testing.T) {
	d := tinyDims()
	tests := []struct {
		name string
		edit func(e *safetensors.Entry) string
		cfg  func(c *PolicyConfig)
		want string
	}{
		{"missing anchor", func(e *safetensors.Entry) string {
			if strings.HasSuffix(e.Name, "patch_embedding.weight") {
				return ""
			}
			return e.Name
		}, nil, "patch_embedding.weight"},
		{"expert depth", func(e *safetensors.Entry) string {
			if strings.HasPrefix(e.Name, expertPrefix+"layers.1.") {
				return ""
			}
			return e.Name
		}, nil, "the expert has 1 layers, the prefix 2"},
		{"heads", nil, func(c *PolicyConfig) { c.Vision = &SubConfig{NumAttentionHeads: 5} }, "not a multiple of vision_config.num_attention_heads 5"},
		{"head_dim", nil, func(c *PolicyConfig) { c.Expert = &SubConfig{HeadDim: 128} }, "expert_config.head_dim 128"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tinyConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			_, err := InferDims(writeCheckpoint(t, d, safetensors.F32, tc.edit), cfg, "tiny")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
