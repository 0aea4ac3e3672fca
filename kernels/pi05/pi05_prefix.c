/* PREFIX: the PaliGemma Gemma-2B layers over the valid prefix tokens, writing the slab's K/V.
 *
 *   x [P][lw] = valid image tokens (from VISION), then embed[id] * sqrt(lw) for the real text tokens;
 *   positions 0..P-1 (= cumsum(mask) - 1 of the padded sequence); attention bidirectional over all P.
 *   per layer: h = RMS(x)(1+w_in); q,k,v; RoPE(q,k); K,V -> slab; x += o(attn);
 *              h = RMS(x)(1+w_post); x += down(gelu_tanh(gate h) * up h)   (skipped in the last layer:
 *              only K/V leave the prefix, so its last MLP, final norm and LM head are never needed)
 * Must not: keep padded text tokens (they never enter the sequence) or write anything but the slab.
 */
#include <math.h>
#include <string.h>

#include "../common/tt_gemm.h"
#include "pi05_internal.h"

static void embed_text(const pi05_model *m, int id, float *dst)
{
    int lw = m->d.l_width;
    float sc = sqrtf((float)lw);
    if (m->embed16 != NULL) {
        const uint16_t *r = m->embed16 + (long)id * lw;
        for (int i = 0; i < lw; i++) dst[i] = tt_bf16_to_f32(r[i]) * sc;
    } else {
        const float *r = m->embed32 + (long)id * lw;
        for (int i = 0; i < lw; i++) dst[i] = r[i] * sc;
    }
}

int p5_prefix_run(pi05_program *p, pi05_slab *s, const int32_t *tokens, const uint8_t *mask, int ntok)
{
    const pi05_model *m = p->m;
    const pi05_dims *d = &m->d;
    int lw = d->l_width, lq = d->l_heads * d->head_dim;
    memcpy(p->l_x, s->img, (size_t)s->nimg * (size_t)lw * sizeof(float));
    int P = s->nimg;
    for (int i = 0; i < ntok; i++)
        if (mask[i]) embed_text(m, tokens[i], p->l_x + (long)P++ * lw);
    s->prefix_len = P;

    for (int l = 0; l < d->l_layers; l++) {
        const p5_lm_layer *L = &m->ll[l];
        const p5_fused *qkv = &L->qkv, *gu = &L->gu;
        float *q = p->l_qkv, *k = q + qkv->off[1], *v = q + qkv->off[2];
        p5_rmsnorm(p, p->l_x, p->l_h, P, lw, L->in_norm, d->l_eps);
        if (l == d->l_layers - 1) { /* the last layer only contributes its K/V */
            p5_linear(p, &L->k, p->l_h, lw, k, qkv->ld, P, 0);
            p5_linear(p, &L->v, p->l_h, lw, v, qkv->ld, P, 0);
            p5_rope(p, k, qkv->ld, P, d->kv_heads, 0);
            p5_slab_store(p, s, l, k, v, qkv->ld, P);
            break;
        }
        p5_linear_fused(p, qkv, p->l_h, lw, p->l_qkv, P);
        p5_rope(p, q, qkv->ld, P, d->l_heads, 0);
        p5_rope(p, k, qkv->ld, P, d->kv_heads, 0);
        p5_slab_store(p, s, l, k, v, qkv->ld, P);
        p5_attend_slabs(p, &s, 1, l, q, qkv->ld, P, d->l_heads, NULL, NULL, 0, 0, p->l_a, lq);
        p5_linear(p, &L->o, p->l_a, lq, p->l_x, lw, P, 1);
        p5_rmsnorm(p, p->l_x, p->l_h, P, lw, L->post_norm, d->l_eps);
        p5_linear_fused(p, gu, p->l_h, lw, p->l_gu, P);
        p5_geglu(p, p->l_gu, gu->ld, P, d->l_mlp, gu->off[1]);
        p5_linear(p, &L->down, p->l_gu, gu->ld, p->l_x, lw, P, 1);
    }
    return 0;
}
