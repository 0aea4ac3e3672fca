/* VISION: SigLIP So400m/14 + the multi-modal projector over the present cameras.
 *
 *   patches [V = cams*T][3*p*p] -> patch embedding (fp32) + positions      -> x [V][vw]
 *   27 x { x += out(attn(LN1 x)); x += fc2(gelu_tanh(fc1(LN2 x))) }          (per camera attention)
 *   post LayerNorm -> projector                                               -> slab img [V][lw]
 * Must not: touch the slab's K/V (PREFIX owns them) or read masked cameras: they are dropped here.
 */
#include <string.h>

#include "pi05_internal.h"

/* dst[t][c*p*p + ky*p + kx] = img[c][py*p + ky][px*p + kx] for patch t = py*g + px (row-major, the
 * flattening order of the conv weight [vw][3][p][p]). */
static void patchify(const pi05_model *m, const float *img, float *dst)
{
    int S = m->d.image, pz = m->d.patch, g = S / pz, K = 3 * pz * pz;
    for (int py = 0; py < g; py++)
        for (int px = 0; px < g; px++) {
            float *row = dst + (long)(py * g + px) * K;
            for (int c = 0; c < 3; c++)
                for (int ky = 0; ky < pz; ky++)
                    memcpy(row + (c * pz + ky) * pz, img + ((long)c * S + py * pz + ky) * S + px * pz,
                           (size_t)pz * sizeof(float));
        }
}

int p5_vision_run(pi05_program *p, pi05_slab *s, const float *images, const uint8_t *cam_mask)
{
    const pi05_model *m = p->m;
    const pi05_dims *d = &m->d;
    int T = m->v_tokens, vw = d->v_width, S = d->image;
    long img_elems = 3L * S * S;
    int nc = 0;
    for (int c = 0; c < p->preset.cams; c++) {
        if (!cam_mask[c]) continue;
        patchify(m, images + c * img_elems, p->v_patch + (long)nc * T * m->patch.k);
        nc++;
    }
    int V = nc * T;
    s->nimg = V;
    s->vision_done = 1;
    s->prefix_len = -1;
    if (V == 0) return 0;

    p5_linear(p, &m->patch, p->v_patch, m->patch.k, p->v_x, vw, V, 0);
    for (int c = 0; c < nc; c++)
        for (int t = 0; t < T; t++) {
            float *x = p->v_x + ((long)c * T + t) * vw;
            const float *pe = m->pos + (long)t * vw;
            for (int i = 0; i < vw; i++) x[i] += pe[i];
        }
    for (int l = 0; l < d->v_layers; l++) {
        const p5_vis_layer *L = &m->vl[l];
        p5_layernorm(p, p->v_x, p->v_h, V, vw, L->ln1_w, L->ln1_b, d->v_eps);
        const p5_fused *f = &L->qkv;
        p5_linear_fused(p, f, p->v_h, vw, p->v_qkv, V);
        p5_attend_blocks(p, p->v_qkv, p->v_qkv + f->off[1], p->v_qkv + f->off[2], f->ld, p->v_a, nc, T,
                         d->v_heads, m->v_hd);
        p5_linear(p, &L->o, p->v_a, vw, p->v_x, vw, V, 1);
        p5_layernorm(p, p->v_x, p->v_h, V, vw, L->ln2_w, L->ln2_b, d->v_eps);
        p5_linear(p, &L->fc1, p->v_h, vw, p->v_m, d->v_mlp, V, 0);
        p5_geglu(p, p->v_m, d->v_mlp, V, d->v_mlp, -1);
        p5_linear(p, &L->fc2, p->v_m, d->v_mlp, p->v_x, vw, V, 1);
    }
    p5_layernorm(p, p->v_x, p->v_h, V, vw, m->post_w, m->post_b, d->v_eps);
    p5_linear(p, &m->proj, p->v_h, vw, s->img, d->l_width, V, 0);
    return 0;
}
