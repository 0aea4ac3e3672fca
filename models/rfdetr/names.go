package rfdetr

import "strings"

// Naming schemes a checkpoint can use. Canonical names are the original
// rfdetr ones; a transformers-native export (RfDetrForObjectDetection) is
// mapped onto them, with the decoder's split q/k/v projections concatenated
// back into nn.MultiheadAttention's in_proj.
const (
	SchemeRFDETR       = "rfdetr"
	SchemeTransformers = "transformers"
)

// SourceNames returns the file tensor(s) holding canonical tensor name under
// scheme; several names are concatenated along the first dimension.
func SourceNames(scheme, name string) []string {
	if scheme == SchemeRFDETR {
		return []string{name}
	}
	return transformersNames(name)
}

// projectorRenames maps the C2f projector's pieces (after the
// "backbone.0.projector.stages.0." prefix) to transformers' names.
var projectorRenames = strings.NewReplacer(
	"cv1.", "conv1.", "cv2.", "conv2.", "bn.", "norm.", "m.", "bottlenecks.",
)

// decoderLayerRenames maps a decoder layer's modules (after
// "transformer.decoder.layers.N.") to transformers' names.
var decoderLayerRenames = []struct{ from, to string }{
	{"self_attn.out_proj.", "self_attn.o_proj."},
	{"norm1.", "self_attn_layer_norm."},
	{"norm2.", "cross_attn_layer_norm."},
	{"norm3.", "layer_norm."},
	{"linear1.", "mlp.fc1."},
	{"linear2.", "mlp.fc2."},
}

func transformersNames(name string) []string {
	switch {
	case strings.HasPrefix(name, prefixEncoder):
		return []string{"model.backbone.backbone." + strings.TrimPrefix(name, prefixEncoder)}
	case strings.HasPrefix(name, prefixProjector):
		rest := strings.TrimPrefix(name, prefixProjector) // "0.0.cv1.conv.weight" or "0.1.weight"
		stage, rest, _ := strings.Cut(rest, ".")
		base := "model.backbone.projector.scale_layers." + stage + "."
		if after, ok := strings.CutPrefix(rest, "1."); ok {
			return []string{base + "layer_norm." + after}
		}
		return []string{base + "projector_layer." + projectorRenames.Replace(strings.TrimPrefix(rest, "0."))}
	case strings.HasPrefix(name, prefixDecoder+"layers."):
		rest := strings.TrimPrefix(name, prefixDecoder+"layers.")
		layer, rest, _ := strings.Cut(rest, ".")
		base := "model.decoder.layers." + layer + "."
		switch rest {
		case "self_attn.in_proj_weight":
			return []string{base + "self_attn.q_proj.weight", base + "self_attn.k_proj.weight", base + "self_attn.v_proj.weight"}
		case "self_attn.in_proj_bias":
			return []string{base + "self_attn.q_proj.bias", base + "self_attn.k_proj.bias", base + "self_attn.v_proj.bias"}
		}
		for _, r := range decoderLayerRenames {
			if after, ok := strings.CutPrefix(rest, r.from); ok {
				return []string{base + r.to + after}
			}
		}
		return []string{base + rest}
	case strings.HasPrefix(name, prefixDecoder+"norm."):
		return []string{"model.decoder.layernorm." + strings.TrimPrefix(name, prefixDecoder+"norm.")}
	case strings.HasPrefix(name, "transformer."):
		return []string{"model." + strings.TrimPrefix(name, "transformer.")}
	case name == "refpoint_embed.weight":
		return []string{"model.reference_point_embed.weight"}
	case name == "query_feat.weight":
		return []string{"model.query_feat.weight"}
	}
	return []string{name} // class_embed.*, bbox_embed.* keep their names
}
