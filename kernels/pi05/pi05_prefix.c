/* PREFIX: the PaliGemma Gemma-2B layers over the valid prefix tokens, writing the slab's K/V.
 *
 *   x [P][lw] = valid image tokens (from VISION), then embed[id] * sqrt(lw) for the real text tokens;
 *   positions 0..P-1 (= cumsum(mask) - 1 of the padded sequence); attention bidirectional over all P.
 *   per layer: h = RMS(x)(1+w_in); q,k,v; RoPE(q,k); K,V -> slab; x += o(attn);
 *              h = RMS(x)(1+w_post); x += down(gelu_tanh(gate h) * up h)   (skipped in the last layer:
 *              only K/V leave the prefix, so its last MLP, final norm and LM head are never needed)
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
    int lw = d->l_width, hd = d->head_dim, kvd = d->kv_heads * hd, lq = d->l_heads * hd;
    memcpy(p->l_x, s->img, (size_t)s->nimg * (size_t)lw * sizeof(float));
    int P = s->nimg;
    for (int i = 0; i < ntok; i++)
        if (mask[i]) embed_text(m, tokens[i], p->l_x + (long)P++ * lw);
    s->prefix_len = P;

    for (int l = 0; l < d->l_layers; l++) {
        const p5_lm_layer *L = &m->ll[l];
        p5_rmsnorm(p, p->l_x, p->l_h, P, lw, L->in_norm, d->l_eps);
        p5_linear(p, &L->k, p->l_h, lw, p->l_k, kvd, P, 0);
        p5_linear(p, &L->v, p->l_h, lw, p->l_v, kvd, P, 0);
        p5_rope(p, p->l_k, kvd, P, d->kv_heads, 0);
        p5_slab_store(p, s, l, p->l_k, p->l_v, P);
        if (l == d->l_layers - 1) break; /* the last layer only contributes its K/V */
        p5_linear(p, &L->q, p->l_h, lw, p->l_q, lq, P, 0);
        p5_rope(p, p->l_q, lq, P, d->l_heads, 0);
        p5_attend_slabs(p, &s, 1, l, p->l_q, P, d->l_heads, NULL, NULL, 0, p->l_a);
        p5_linear(p, &L->o, p->l_a, lq, p->l_x, lw, P, 1);
        p5_rmsnorm(p, p->l_x, p->l_h, P, lw, L->post_norm, d->l_eps);
        p5_linear(p, &L->gate, p->l_h, lw, p->l_g, d->l_mlp, P, 0);
        p5_linear(p, &L->up, p->l_h, lw, p->l_u, d->l_mlp, P, 0);
        p5_geglu(p, p->l_g, p->l_u, (long)P * d->l_mlp);
        p5_linear(p, &L->down, p->l_g, d->l_mlp, p->l_x, lw, P, 1);
    }
    return 0;
}
