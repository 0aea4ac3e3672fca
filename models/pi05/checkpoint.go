package pi05

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ttmodel/tt-model/models/pi05/arch"
	"github.com/ttmodel/tt-model/models/safetensors"
)

// Tensor name prefixes of lerobot/pi05_base model.safetensors.
const (
	visionPrefix    = "paligemma_with_expert.paligemma.model.vision_tower.vision_model."
	projectorPrefix = "paligemma_with_expert.paligemma.model.multi_modal_projector.linear."
	prefixLMPrefix  = "paligemma_with_expert.paligemma.model.language_model."
	embedName       = "paligemma_with_expert.paligemma.lm_head.weight" // tied token embedding
	expertPrefix    = "paligemma_with_expert.gemma_expert.model."
)

// Dims are the model's shapes (one type with the kernels': arch.Dims).
type Dims = arch.Dims

// TensorTable is the part of a safetensors file the loader inspects.
type TensorTable interface {
	Info(name string) (safetensors.TensorInfo, bool)
	Names() []string
}

// ExpectedTensor is one tensor the model needs, with its shape.
type ExpectedTensor struct {
	Name  string
	Shape []int
}

// TensorError lists every missing and mis-shaped tensor of a checkpoint, by name.
type TensorError struct {
	Path         string
	Missing      []string
	Misshaped    []string // "name: shape [..], want [..]" or a bad dtype
	Inconsistent []string
}

func (e *TensorError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, fmt.Sprintf("%d missing tensors: %s", len(e.Missing), strings.Join(e.Missing, ", ")))
	}
	if len(e.Misshaped) > 0 {
		parts = append(parts, fmt.Sprintf("%d mis-shaped tensors: %s", len(e.Misshaped), strings.Join(e.Misshaped, "; ")))
	}
	if len(e.Inconsistent) > 0 {
		parts = append(parts, strings.Join(e.Inconsistent, "; "))
	}
	return fmt.Sprintf("checkpoint %s: %s", e.Path, strings.Join(parts, "; "))
}

// shapeOf returns the shape of name when it exists with ndim dimensions; problems are recorded.
func shapeOf(t TensorTable, name string, ndim int, te *TensorError) []int {
	info, ok := t.Info(name)
	if !ok {
		te.Missing = append(te.Missing, name)
		return nil
	}
	if len(info.Shape) != ndim {
		te.Misshaped = append(te.Misshaped, fmt.Sprintf("%s: shape %v, want %d dimensions", name, info.Shape, ndim))
		return nil
	}
	return info.Shape
}

// countLayers counts consecutive layers i = 0, 1, ... that have prefix+"layers.i."+probe.
func countLayers(t TensorTable, prefix, probe string) int {
	n := 0
	for {
		if _, ok := t.Info(fmt.Sprintf("%slayers.%d.%s", prefix, n, probe)); !ok {
			return n
		}
		n++
	}
}

func orDefault[T int | float64](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// InferDims reads the shapes of a few anchor tensors and the optional sub-configs. It fails only
// when an anchor is missing or malformed; every other tensor is checked by CheckTensors.
func InferDims(t TensorTable, cfg PolicyConfig, path string) (Dims, error) {
	te := &TensorError{Path: path}
	var d Dims
	vis := cfg.Vision
	if vis == nil {
		vis = &SubConfig{}
	}
	txt := cfg.Text
	if txt == nil {
		txt = &SubConfig{}
	}
	exp := cfg.Expert
	if exp == nil {
		exp = &SubConfig{}
	}

	if s := shapeOf(t, visionPrefix+"embeddings.patch_embedding.weight", 4, te); s != nil {
		d.VWidth, d.Patch = s[0], s[2]
		if s[1] != 3 || s[2] != s[3] {
			te.Misshaped = append(te.Misshaped, fmt.Sprintf("%sembeddings.patch_embedding.weight: shape %v, want [width 3 p p]", visionPrefix, s))
		}
	}
	if s := shapeOf(t, visionPrefix+"embeddings.position_embedding.weight", 2, te); s != nil && d.Patch > 0 {
		side := int(math.Round(math.Sqrt(float64(s[0]))))
		if side*side != s[0] {
			te.Inconsistent = append(te.Inconsistent, fmt.Sprintf("%d vision positions are not a square grid", s[0]))
		}
		d.Image = side * d.Patch
	}
	if s := shapeOf(t, visionPrefix+"encoder.layers.0.mlp.fc1.weight", 2, te); s != nil {
		d.VMLP = s[0]
	}
	d.VLayers = countLayers(t, visionPrefix+"encoder.", "layer_norm1.weight")
	d.VHeads = orDefault(vis.NumAttentionHeads, 16)
	d.VEps = orDefault(vis.LayerNormEps, 1e-6)

	if s := shapeOf(t, prefixLMPrefix+"layers.0.self_attn.q_proj.weight", 2, te); s != nil {
		d.LWidth = s[1]
	}
	if s := shapeOf(t, prefixLMPrefix+"layers.0.mlp.gate_proj.weight", 2, te); s != nil {
		d.LMLP = s[0]
	}
	if s := shapeOf(t, embedName, 2, te); s != nil {
		d.Vocab = s[0]
	}
	d.LLayers = countLayers(t, prefixLMPrefix, "self_attn.q_proj.weight")
	d.LHeads = orDefault(txt.NumAttentionHeads, 8)
	d.HeadDim = orDefault(txt.HeadDim, 256)
	d.KVHeads = orDefault(txt.NumKeyValueHeads, 1)
	d.LEps = orDefault(txt.RMSNormEps, 1e-6)
	d.RopeTheta = orDefault(txt.RopeTheta, 10000)

	if s := shapeOf(t, expertPrefix+"layers.0.self_attn.q_proj.weight", 2, te); s != nil {
		d.EWidth = s[1]
	}
	if s := shapeOf(t, expertPrefix+"layers.0.mlp.gate_proj.weight", 2, te); s != nil {
		d.EMLP = s[0]
	}
	if s := shapeOf(t, "action_in_proj.weight", 2, te); s != nil {
		d.ActionDim = s[1]
	}
	d.EHeads = orDefault(exp.NumAttentionHeads, 8)
	d.EEps = orDefault(exp.RMSNormEps, 1e-6)
	if exp.HeadDim != 0 && exp.HeadDim != d.HeadDim {
		te.Inconsistent = append(te.Inconsistent, fmt.Sprintf("expert_config.head_dim %d differs from the prefix's %d (they attend jointly)", exp.HeadDim, d.HeadDim))
	}
	if exp.NumKeyValueHeads != 0 && exp.NumKeyValueHeads != d.KVHeads {
		te.Inconsistent = append(te.Inconsistent, fmt.Sprintf("expert_config.num_key_value_heads %d differs from the prefix's %d", exp.NumKeyValueHeads, d.KVHeads))
	}
	if exp.RopeTheta != 0 && exp.RopeTheta != d.RopeTheta {
		te.Inconsistent = append(te.Inconsistent, fmt.Sprintf("expert_config.rope_theta %g differs from the prefix's %g", exp.RopeTheta, d.RopeTheta))
	}
	d.MinPeriod, d.MaxPeriod = cfg.MinPeriod, cfg.MaxPeriod

	if el := countLayers(t, expertPrefix, "self_attn.q_proj.weight"); el != d.LLayers {
		te.Inconsistent = append(te.Inconsistent, fmt.Sprintf("the expert has %d layers, the prefix %d (they are paired)", el, d.LLayers))
	}
	switch {
	case d.VLayers == 0 || d.LLayers == 0:
		te.Inconsistent = append(te.Inconsistent, fmt.Sprintf("no layers found (vision %d, prefix %d)", d.VLayers, d.LLayers))
	case d.VWidth%d.VHeads != 0:
		te.Inconsistent = append(te.Inconsistent, fmt.Sprintf("vision width %d is not a multiple of vision_config.num_attention_heads %d", d.VWidth, d.VHeads))
	case d.LHeads%d.KVHeads != 0 || d.EHeads%d.KVHeads != 0:
		te.Inconsistent = append(te.Inconsistent, fmt.Sprintf("query heads (%d prefix, %d expert) must be multiples of num_key_value_heads %d", d.LHeads, d.EHeads, d.KVHeads))
	case d.ActionDim != cfg.MaxActionDim:
		te.Inconsistent = append(te.Inconsistent, fmt.Sprintf("action_in_proj takes %d values, config.json max_action_dim is %d", d.ActionDim, cfg.MaxActionDim))
	}
	if len(te.Missing)+len(te.Misshaped)+len(te.Inconsistent) > 0 {
		return d, te
	}
	return d, nil
}

// ExpectedTensors lists every tensor the model needs, with its lerobot name and shape (PyTorch
// Linear weights are [out, in]).
func ExpectedTensors(d Dims) []ExpectedTensor {
	var out []ExpectedTensor
	add := func(name string, shape ...int) { out = append(out, ExpectedTensor{name, shape}) }
	linear := func(prefix string, outDim, inDim int, bias bool) {
		add(prefix+"weight", outDim, inDim)
		if bias {
			add(prefix+"bias", outDim)
		}
	}
	v, hd := d.VWidth, d.HeadDim
	add(visionPrefix+"embeddings.patch_embedding.weight", v, 3, d.Patch, d.Patch)
	add(visionPrefix+"embeddings.patch_embedding.bias", v)
	side := d.Image / max(d.Patch, 1)
	add(visionPrefix+"embeddings.position_embedding.weight", side*side, v)
	for i := range d.VLayers {
		p := fmt.Sprintf("%sencoder.layers.%d.", visionPrefix, i)
		for _, ln := range []string{"layer_norm1.", "layer_norm2."} {
			add(p+ln+"weight", v)
			add(p+ln+"bias", v)
		}
		for _, proj := range []string{"q_proj.", "k_proj.", "v_proj.", "out_proj."} {
			linear(p+"self_attn."+proj, v, v, true)
		}
		linear(p+"mlp.fc1.", d.VMLP, v, true)
		linear(p+"mlp.fc2.", v, d.VMLP, true)
	}
	add(visionPrefix+"post_layernorm.weight", v)
	add(visionPrefix+"post_layernorm.bias", v)
	linear(projectorPrefix, d.LWidth, v, true)
	add(embedName, d.Vocab, d.LWidth)
	gemma := func(prefix string, layers, width, heads, mlp int, ada bool) {
		for i := range layers {
			p := fmt.Sprintf("%slayers.%d.", prefix, i)
			linear(p+"self_attn.q_proj.", heads*hd, width, false)
			linear(p+"self_attn.k_proj.", d.KVHeads*hd, width, false)
			linear(p+"self_attn.v_proj.", d.KVHeads*hd, width, false)
			linear(p+"self_attn.o_proj.", width, heads*hd, false)
			linear(p+"mlp.gate_proj.", mlp, width, false)
			linear(p+"mlp.up_proj.", mlp, width, false)
			linear(p+"mlp.down_proj.", width, mlp, false)
			for _, n := range []string{"input_layernorm.", "post_attention_layernorm."} {
				if ada {
					linear(p+n+"dense.", 3*width, width, true)
				} else {
					add(p+n+"weight", width)
				}
			}
		}
	}
	gemma(prefixLMPrefix, d.LLayers, d.LWidth, d.LHeads, d.LMLP, false)
	gemma(expertPrefix, d.LLayers, d.EWidth, d.EHeads, d.EMLP, true)
	linear(expertPrefix+"norm.dense.", 3*d.EWidth, d.EWidth, true)
	linear("action_in_proj.", d.EWidth, d.ActionDim, true)
	linear("action_out_proj.", d.ActionDim, d.EWidth, true)
	linear("time_mlp_in.", d.EWidth, d.EWidth, true)
	linear("time_mlp_out.", d.EWidth, d.EWidth, true)
	return out
}

// legacyName maps the names older checkpoints used to the current ones.
func legacyName(name string) (string, bool) {
	if rest, ok := strings.CutPrefix(name, "action_time_mlp_"); ok {
		return "time_mlp_" + rest, true
	}
	return "", false
}

// ResolveTensors maps every expected tensor to the file's name for it (current or legacy) and
// reports every missing, mis-shaped or non-float tensor by name. Unknown tensors are ignored.
func ResolveTensors(t TensorTable, d Dims, path string) (map[string]string, error) {
	alias := map[string]string{}
	for _, n := range t.Names() {
		if cur, ok := legacyName(n); ok {
			alias[cur] = n
		}
	}
	te := &TensorError{Path: path}
	files := map[string]string{}
	for _, e := range ExpectedTensors(d) {
		fileName := e.Name
		info, ok := t.Info(fileName)
		if !ok {
			if old, has := alias[e.Name]; has {
				fileName = old
				info, ok = t.Info(old)
			}
		}
		if !ok {
			te.Missing = append(te.Missing, e.Name)
			continue
		}
		switch {
		case info.DType != safetensors.F32 && info.DType != safetensors.BF16:
			te.Misshaped = append(te.Misshaped, fmt.Sprintf("%s: dtype %s, want F32 or BF16", fileName, info.DType))
		case !slices.Equal(info.Shape, e.Shape):
			te.Misshaped = append(te.Misshaped, fmt.Sprintf("%s: shape %v, want %v", fileName, info.Shape, e.Shape))
		default:
			files[e.Name] = fileName
		}
	}
	if len(te.Missing)+len(te.Misshaped) > 0 {
		return nil, te
	}
	return files, nil
}
