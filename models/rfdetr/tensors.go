package rfdetr

import "fmt"

// Architecture constants of RF-DETR-base (docs/rfdetr.md, "The network").
// The network is shape-locked: these are checked against the checkpoint,
// never read from it.
const (
	InputSize      = 560 // the model's square input side in pixels
	NumQueries     = 300 // decoder queries, one box each
	NumClasses     = 91  // class logits per query: COCO category ids 0..90
	hidden         = 384 // DINOv2-small width
	mlpHidden      = 1536
	patch          = 14
	posTable       = 1370 // 1 + 37*37 stored position embeddings
	usedEncLayers  = 11   // layers 0..10; layer 11's output is never used
	model          = 256  // decoder width
	decLayers      = 3
	decFFN         = 2048
	caHeads        = 16
	caPoints       = 2
	projHalf       = 128
	bottlenecks    = 3
	boxMLPLayers   = 3
	queryTableRows = NumQueries // rows of refpoint_embed / query_feat used at inference
)

// Spec is one tensor the forward needs, under its canonical (original
// rfdetr) name. A zero in MinRows means Shape must match exactly; otherwise
// the first dimension may be any value >= MinRows and only the first MinRows
// rows are used (the 13 query groups of refpoint_embed and query_feat).
type Spec struct {
	Name    string
	Shape   []int
	MinRows int
}

// Canonical name prefixes.
const (
	prefixEncoder   = "backbone.0.encoder.encoder."
	prefixProjector = "backbone.0.projector.stages."
	prefixDecoder   = "transformer.decoder."
)

// Specs lists every tensor the inference forward reads, in a stable order:
// backbone, projector, two-stage selection, decoder, heads. Tensors the
// forward never reads (mask_token, layer 11, query groups 1..12) are not
// listed and are ignored when present.
func Specs() []Spec {
	var s []Spec
	add := func(name string, shape ...int) { s = append(s, Spec{Name: name, Shape: shape}) }
	linear := func(name string, out, in int) {
		add(name+".weight", out, in)
		add(name+".bias", out)
	}
	norm := func(name string, n int) {
		add(name+".weight", n)
		add(name+".bias", n)
	}

	e := prefixEncoder
	add(e+"embeddings.cls_token", 1, 1, hidden)
	add(e+"embeddings.position_embeddings", 1, posTable, hidden)
	add(e+"embeddings.patch_embeddings.projection.weight", hidden, 3, patch, patch)
	add(e+"embeddings.patch_embeddings.projection.bias", hidden)
	for i := 0; i < usedEncLayers; i++ {
		l := fmt.Sprintf("%sencoder.layer.%d.", e, i)
		norm(l+"norm1", hidden)
		for _, p := range []string{"query", "key", "value"} {
			linear(l+"attention.attention."+p, hidden, hidden)
		}
		linear(l+"attention.output.dense", hidden, hidden)
		add(l+"layer_scale1.lambda1", hidden)
		norm(l+"norm2", hidden)
		linear(l+"mlp.fc1", mlpHidden, hidden)
		linear(l+"mlp.fc2", hidden, mlpHidden)
		add(l+"layer_scale2.lambda1", hidden)
	}
	norm(e+"layernorm", hidden)

	p := prefixProjector + "0."
	add(p+"0.cv1.conv.weight", model, 4*hidden, 1, 1)
	norm(p+"0.cv1.bn", model)
	for m := 0; m < bottlenecks; m++ {
		for _, cv := range []string{"cv1", "cv2"} {
			b := fmt.Sprintf("%s0.m.%d.%s.", p, m, cv)
			add(b+"conv.weight", projHalf, projHalf, 3, 3)
			norm(b+"bn", projHalf)
		}
	}
	add(p+"0.cv2.conv.weight", model, (2+bottlenecks)*projHalf, 1, 1)
	norm(p+"0.cv2.bn", model)
	norm(p+"1", model)

	linear("transformer.enc_output.0", model, model)
	norm("transformer.enc_output_norm.0", model)
	linear("transformer.enc_out_class_embed.0", NumClasses, model)
	boxMLP(linear, "transformer.enc_out_bbox_embed.0")
	s = append(s, Spec{Name: "refpoint_embed.weight", Shape: []int{queryTableRows, 4}, MinRows: queryTableRows})
	s = append(s, Spec{Name: "query_feat.weight", Shape: []int{queryTableRows, model}, MinRows: queryTableRows})

	d := prefixDecoder
	linear(d+"ref_point_head.layers.0", model, 2*model)
	linear(d+"ref_point_head.layers.1", model, model)
	for i := 0; i < decLayers; i++ {
		l := fmt.Sprintf("%slayers.%d.", d, i)
		add(l+"self_attn.in_proj_weight", 3*model, model)
		add(l+"self_attn.in_proj_bias", 3*model)
		linear(l+"self_attn.out_proj", model, model)
		norm(l+"norm1", model)
		linear(l+"cross_attn.sampling_offsets", caHeads*caPoints*2, model)
		linear(l+"cross_attn.attention_weights", caHeads*caPoints, model)
		linear(l+"cross_attn.value_proj", model, model)
		linear(l+"cross_attn.output_proj", model, model)
		norm(l+"norm2", model)
		linear(l+"linear1", decFFN, model)
		linear(l+"linear2", model, decFFN)
		norm(l+"norm3", model)
	}
	norm(d+"norm", model)

	linear("class_embed", NumClasses, model)
	boxMLP(linear, "bbox_embed")
	return s
}

// boxMLP adds a 256-256-256-4 box MLP (ReLU between layers).
func boxMLP(linear func(string, int, int), name string) {
	for i := 0; i < boxMLPLayers; i++ {
		out := model
		if i == boxMLPLayers-1 {
			out = 4
		}
		linear(fmt.Sprintf("%s.layers.%d", name, i), out, model)
	}
}
