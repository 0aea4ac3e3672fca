/* The weight table of rfdetr.c: checkpoint names, shapes and load order.
 * Private to kernels/rfdetr (included by rfdetr.c only). */
#ifndef RFDETR_WEIGHTS_H
#define RFDETR_WEIGHTS_H

/* A kind is one tensor, or one tensor per layer when `count` > 1: the name's
 * %d is the layer. Order matters: the LayerScale lambdas come before the
 * projections they are folded into. */
typedef enum {
    W_CLS, W_POS, W_PATCH_W, W_PATCH_B,
    W_N1W, W_N1B, W_QW, W_QB, W_KW, W_KB, W_VW, W_VB, W_LS1, W_DW, W_DB,
    W_N2W, W_N2B, W_FC1W, W_FC1B, W_LS2, W_FC2W, W_FC2B,
    W_BBLN_W, W_BBLN_B,
    W_CV1, W_CV1_W, W_CV1_B, W_M1, W_M1_W, W_M1_B, W_M2, W_M2_W, W_M2_B,
    W_CV2, W_CV2_W, W_CV2_B, W_PLN_W, W_PLN_B,
    W_ENC_OUT_W, W_ENC_OUT_B, W_ENC_NORM_W, W_ENC_NORM_B, W_ENC_CLS_W, W_ENC_CLS_B,
    W_ENC_BB0_W, W_ENC_BB0_B, W_ENC_BB1_W, W_ENC_BB1_B, W_ENC_BB2_W, W_ENC_BB2_B,
    W_RPH0_W, W_RPH0_B, W_RPH1_W, W_RPH1_B,
    W_SA_IN_W, W_SA_IN_B, W_SA_OUT_W, W_SA_OUT_B, W_DN1_W, W_DN1_B,
    W_OFF_W, W_OFF_B, W_AW_W, W_AW_B, W_VAL_W, W_VAL_B, W_OUT_W, W_OUT_B, W_DN2_W, W_DN2_B,
    W_L1_W, W_L1_B, W_L2_W, W_L2_B, W_DN3_W, W_DN3_B,
    W_DNORM_W, W_DNORM_B,
    W_CLS_W, W_CLS_B, W_BB0_W, W_BB0_B, W_BB1_W, W_BB1_B, W_BB2_W, W_BB2_B,
    W_REFPOINT, W_QUERY,
    W_KINDS
} wkind;

typedef struct {
    const char *fmt; /* printf format with at most one %d */
    int count;       /* layers (1 for a single tensor) */
    int rank;
    int dims[4];
    int min_rows;
} wdesc;

#define BB "backbone.0.encoder.encoder."
#define BL BB "encoder.layer.%d."
#define PJ "backbone.0.projector.stages.0."
#define DL "transformer.decoder.layers.%d."
enum { NBL = 11, NDL = 3 }; /* backbone layers used (layer 11 is skipped), decoder layers */

/* One row per checkpoint tensor: its name (a printf pattern over the layer), layers, rank and shape. */
static const wdesc wtable[W_KINDS] = {
    [W_CLS] = {BB "embeddings.cls_token", 1, 3, {1, 1, 384}, 0},
    [W_POS] = {BB "embeddings.position_embeddings", 1, 3, {1, 1370, 384}, 0},
    [W_PATCH_W] = {BB "embeddings.patch_embeddings.projection.weight", 1, 4, {384, 3, 14, 14}, 0},
    [W_PATCH_B] = {BB "embeddings.patch_embeddings.projection.bias", 1, 1, {384}, 0},
    [W_N1W] = {BL "norm1.weight", NBL, 1, {384}, 0},
    [W_N1B] = {BL "norm1.bias", NBL, 1, {384}, 0},
    [W_QW] = {BL "attention.attention.query.weight", NBL, 2, {384, 384}, 0},
    [W_QB] = {BL "attention.attention.query.bias", NBL, 1, {384}, 0},
    [W_KW] = {BL "attention.attention.key.weight", NBL, 2, {384, 384}, 0},
    [W_KB] = {BL "attention.attention.key.bias", NBL, 1, {384}, 0},
    [W_VW] = {BL "attention.attention.value.weight", NBL, 2, {384, 384}, 0},
    [W_VB] = {BL "attention.attention.value.bias", NBL, 1, {384}, 0},
    [W_LS1] = {BL "layer_scale1.lambda1", NBL, 1, {384}, 0},
    [W_DW] = {BL "attention.output.dense.weight", NBL, 2, {384, 384}, 0},
    [W_DB] = {BL "attention.output.dense.bias", NBL, 1, {384}, 0},
    [W_N2W] = {BL "norm2.weight", NBL, 1, {384}, 0},
    [W_N2B] = {BL "norm2.bias", NBL, 1, {384}, 0},
    [W_FC1W] = {BL "mlp.fc1.weight", NBL, 2, {1536, 384}, 0},
    [W_FC1B] = {BL "mlp.fc1.bias", NBL, 1, {1536}, 0},
    [W_LS2] = {BL "layer_scale2.lambda1", NBL, 1, {384}, 0},
    [W_FC2W] = {BL "mlp.fc2.weight", NBL, 2, {384, 1536}, 0},
    [W_FC2B] = {BL "mlp.fc2.bias", NBL, 1, {384}, 0},
    [W_BBLN_W] = {BB "layernorm.weight", 1, 1, {384}, 0},
    [W_BBLN_B] = {BB "layernorm.bias", 1, 1, {384}, 0},
    [W_CV1] = {PJ "0.cv1.conv.weight", 1, 4, {256, 1536, 1, 1}, 0},
    [W_CV1_W] = {PJ "0.cv1.bn.weight", 1, 1, {256}, 0},
    [W_CV1_B] = {PJ "0.cv1.bn.bias", 1, 1, {256}, 0},
    [W_M1] = {PJ "0.m.%d.cv1.conv.weight", 3, 4, {128, 128, 3, 3}, 0},
    [W_M1_W] = {PJ "0.m.%d.cv1.bn.weight", 3, 1, {128}, 0},
    [W_M1_B] = {PJ "0.m.%d.cv1.bn.bias", 3, 1, {128}, 0},
    [W_M2] = {PJ "0.m.%d.cv2.conv.weight", 3, 4, {128, 128, 3, 3}, 0},
    [W_M2_W] = {PJ "0.m.%d.cv2.bn.weight", 3, 1, {128}, 0},
    [W_M2_B] = {PJ "0.m.%d.cv2.bn.bias", 3, 1, {128}, 0},
    [W_CV2] = {PJ "0.cv2.conv.weight", 1, 4, {256, 640, 1, 1}, 0},
    [W_CV2_W] = {PJ "0.cv2.bn.weight", 1, 1, {256}, 0},
    [W_CV2_B] = {PJ "0.cv2.bn.bias", 1, 1, {256}, 0},
    [W_PLN_W] = {PJ "1.weight", 1, 1, {256}, 0},
    [W_PLN_B] = {PJ "1.bias", 1, 1, {256}, 0},
    [W_ENC_OUT_W] = {"transformer.enc_output.0.weight", 1, 2, {256, 256}, 0},
    [W_ENC_OUT_B] = {"transformer.enc_output.0.bias", 1, 1, {256}, 0},
    [W_ENC_NORM_W] = {"transformer.enc_output_norm.0.weight", 1, 1, {256}, 0},
    [W_ENC_NORM_B] = {"transformer.enc_output_norm.0.bias", 1, 1, {256}, 0},
    [W_ENC_CLS_W] = {"transformer.enc_out_class_embed.0.weight", 1, 2, {91, 256}, 0},
    [W_ENC_CLS_B] = {"transformer.enc_out_class_embed.0.bias", 1, 1, {91}, 0},
    [W_ENC_BB0_W] = {"transformer.enc_out_bbox_embed.0.layers.0.weight", 1, 2, {256, 256}, 0},
    [W_ENC_BB0_B] = {"transformer.enc_out_bbox_embed.0.layers.0.bias", 1, 1, {256}, 0},
    [W_ENC_BB1_W] = {"transformer.enc_out_bbox_embed.0.layers.1.weight", 1, 2, {256, 256}, 0},
    [W_ENC_BB1_B] = {"transformer.enc_out_bbox_embed.0.layers.1.bias", 1, 1, {256}, 0},
    [W_ENC_BB2_W] = {"transformer.enc_out_bbox_embed.0.layers.2.weight", 1, 2, {4, 256}, 0},
    [W_ENC_BB2_B] = {"transformer.enc_out_bbox_embed.0.layers.2.bias", 1, 1, {4}, 0},
    [W_RPH0_W] = {"transformer.decoder.ref_point_head.layers.0.weight", 1, 2, {256, 512}, 0},
    [W_RPH0_B] = {"transformer.decoder.ref_point_head.layers.0.bias", 1, 1, {256}, 0},
    [W_RPH1_W] = {"transformer.decoder.ref_point_head.layers.1.weight", 1, 2, {256, 256}, 0},
    [W_RPH1_B] = {"transformer.decoder.ref_point_head.layers.1.bias", 1, 1, {256}, 0},
    [W_SA_IN_W] = {DL "self_attn.in_proj_weight", NDL, 2, {768, 256}, 0},
    [W_SA_IN_B] = {DL "self_attn.in_proj_bias", NDL, 1, {768}, 0},
    [W_SA_OUT_W] = {DL "self_attn.out_proj.weight", NDL, 2, {256, 256}, 0},
    [W_SA_OUT_B] = {DL "self_attn.out_proj.bias", NDL, 1, {256}, 0},
    [W_DN1_W] = {DL "norm1.weight", NDL, 1, {256}, 0},
    [W_DN1_B] = {DL "norm1.bias", NDL, 1, {256}, 0},
    [W_OFF_W] = {DL "cross_attn.sampling_offsets.weight", NDL, 2, {64, 256}, 0},
    [W_OFF_B] = {DL "cross_attn.sampling_offsets.bias", NDL, 1, {64}, 0},
    [W_AW_W] = {DL "cross_attn.attention_weights.weight", NDL, 2, {32, 256}, 0},
    [W_AW_B] = {DL "cross_attn.attention_weights.bias", NDL, 1, {32}, 0},
    [W_VAL_W] = {DL "cross_attn.value_proj.weight", NDL, 2, {256, 256}, 0},
    [W_VAL_B] = {DL "cross_attn.value_proj.bias", NDL, 1, {256}, 0},
    [W_OUT_W] = {DL "cross_attn.output_proj.weight", NDL, 2, {256, 256}, 0},
    [W_OUT_B] = {DL "cross_attn.output_proj.bias", NDL, 1, {256}, 0},
    [W_DN2_W] = {DL "norm2.weight", NDL, 1, {256}, 0},
    [W_DN2_B] = {DL "norm2.bias", NDL, 1, {256}, 0},
    [W_L1_W] = {DL "linear1.weight", NDL, 2, {2048, 256}, 0},
    [W_L1_B] = {DL "linear1.bias", NDL, 1, {2048}, 0},
    [W_L2_W] = {DL "linear2.weight", NDL, 2, {256, 2048}, 0},
    [W_L2_B] = {DL "linear2.bias", NDL, 1, {256}, 0},
    [W_DN3_W] = {DL "norm3.weight", NDL, 1, {256}, 0},
    [W_DN3_B] = {DL "norm3.bias", NDL, 1, {256}, 0},
    [W_DNORM_W] = {"transformer.decoder.norm.weight", 1, 1, {256}, 0},
    [W_DNORM_B] = {"transformer.decoder.norm.bias", 1, 1, {256}, 0},
    [W_CLS_W] = {"class_embed.weight", 1, 2, {91, 256}, 0},
    [W_CLS_B] = {"class_embed.bias", 1, 1, {91}, 0},
    [W_BB0_W] = {"bbox_embed.layers.0.weight", 1, 2, {256, 256}, 0},
    [W_BB0_B] = {"bbox_embed.layers.0.bias", 1, 1, {256}, 0},
    [W_BB1_W] = {"bbox_embed.layers.1.weight", 1, 2, {256, 256}, 0},
    [W_BB1_B] = {"bbox_embed.layers.1.bias", 1, 1, {256}, 0},
    [W_BB2_W] = {"bbox_embed.layers.2.weight", 1, 2, {4, 256}, 0},
    [W_BB2_B] = {"bbox_embed.layers.2.bias", 1, 1, {4}, 0},
    [W_REFPOINT] = {"refpoint_embed.weight", 1, 2, {3900, 4}, 300},
    [W_QUERY] = {"query_feat.weight", 1, 2, {3900, 256}, 300},
};

#undef BB
#undef BL
#undef PJ
#undef DL

#endif
