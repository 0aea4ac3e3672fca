/* EXPERT: the whole flow-matching loop for nb requests in one call.
 *
 * Before the loop (the timesteps t_s = 1 + s*dt are known up front; the result depends only on
 * `steps`, so a program keeps it for the next call with the same number of steps):
 *   cond_s = silu(time_out(silu(time_in(sinusoid(t_s)))))                     [steps][ew], fp32
 *   every adaRMSNorm modulation [scale | shift | gate] = dense(cond_s)          one GEMM per norm
 * Each Euler step, for the H action rows of every request (rows stacked [nb*H]):
 *   h = action_in(x)
 *   per layer: y = RMS(h)(1+scale)+shift; q,k,v; RoPE at P_r + i; attention over the request's slab
 *              prefix K/V plus its own suffix rows; h += o(attn) * gate;
 *              y = adaRMS(h); h += down(gelu_tanh(gate y) * up y) * gate
 *   v = action_out(adaRMS_final(h)); [guided requests: v -= w_t * W (*) (prev - (x - t v))]; x += dt * v
 * pack = 1 runs each linear once over all nb*H rows (weights streamed once per step); pack = 0 runs
 * it per request. Both give every request bit for bit what a single-request call gives: a GEMM row's
 * result depends on its own A row only (K blocks summed in order, row groups independent, on every
 * isa; tt_gemm.h), the row ops are per row, and RoPE and attention run per request.
 * Must not: write a slab (the prefix K/V are read-only here, so one prefix serves many expert calls).
 */
#include <math.h>
#include <string.h>

#include "../common/tt_ops.h"
#include "pi05_internal.h"

/* torch.linspace(0, 1, n, float64): the first half counts up from 0, the second down from 1. */
static double linspace01(int i, int n)
{
    if (n == 1) return 0.0;
    double step = 1.0 / (double)(n - 1);
    return i < n / 2 ? (double)i * step : 1.0 - (double)(n - 1 - i) * step;
}

/* Sinusoidal time embedding [e_width] of timestep t, half = e_width/2, in float64 as the reference:
 *   period_i = min_period (max_period / min_period)^(i / (half - 1)),  a_i = 2 pi t / period_i
 *   emb = [sin(a_0..a_{half-1}) | cos(a_0..a_{half-1})] */
static void time_embedding(const pi05_dims *d, float t, float *emb)
{
    int half = d->e_width / 2;
    for (int i = 0; i < half; i++) {
        double period = d->min_period * pow(d->max_period / d->min_period, linspace01(i, half));
        double a = 1.0 / period * 2.0 * M_PI * (double)t;
        emb[i] = (float)sin(a);
        emb[half + i] = (float)cos(a);
    }
}

/* mods[(2l + j) * PI05_MAX_STEPS + s] for layer l norm j (0 input, 1 post), [2L] the final norm. */
static float *mod_at(pi05_program *p, int norm, int step)
{
    return p->e_mods + ((long)norm * PI05_MAX_STEPS + step) * 3L * p->m->d.e_width;
}

/* The step conditioning, before the Euler loop (see the file comment):
 *   emb [steps][ew] = sinusoid(t_s); cond = silu(time_out(silu(time_in(emb))))
 *   mods of every adaRMSNorm [steps][3 ew] = dense(cond) */
static void conditioning(pi05_program *p, int steps)
{
    const pi05_model *m = p->m;
    const pi05_dims *d = &m->d;
    int ew = d->e_width;
    float *emb = p->e_cond, *c = p->e_cond + (long)PI05_MAX_STEPS * ew;
    double dt = -1.0 / steps;
    for (int s = 0; s < steps; s++) time_embedding(d, (float)(1.0 + s * dt), emb + (long)s * ew);
    p5_linear(p, &m->time_in, emb, ew, c, ew, steps, 0);
    tt_act_inplace(TT_ISA_SCALAR, TT_ACT_SILU, c, (long)steps * ew); /* fp32 libm, as the reference */
    p5_linear(p, &m->time_out, c, ew, emb, ew, steps, 0);
    tt_act_inplace(TT_ISA_SCALAR, TT_ACT_SILU, emb, (long)steps * ew);
    for (int l = 0; l < d->l_layers; l++) {
        p5_linear(p, &m->el[l].ada_in, emb, ew, mod_at(p, 2 * l, 0), 3L * ew, steps, 0);
        p5_linear(p, &m->el[l].ada_post, emb, ew, mod_at(p, 2 * l + 1, 0), 3L * ew, steps, 0);
    }
    p5_linear(p, &m->ada_final, emb, ew, mod_at(p, 2 * d->l_layers, 0), 3L * ew, steps, 0);
}

/* y = x W^T (+b) over the stacked rows: once (pack) or per request. */
static void lin_rows(pi05_program *p, const p5_lin *l, const float *x, long ldx, float *y, long ldy,
                     int nb, int H, int pack)
{
    if (pack) {
        p5_linear(p, l, x, ldx, y, ldy, nb * H, 0);
        return;
    }
    for (int r = 0; r < nb; r++) p5_linear(p, l, x + (long)r * H * ldx, ldx, y + (long)r * H * ldy, ldy, H, 0);
}

static void fused_rows(pi05_program *p, const p5_fused *f, const float *x, long ldx, float *y, int nb, int H,
                       int pack)
{
    if (pack) {
        p5_linear_fused(p, f, x, ldx, y, nb * H);
        return;
    }
    for (int r = 0; r < nb; r++) p5_linear_fused(p, f, x + (long)r * H * ldx, ldx, y + (long)r * H * f->ld, H);
}

/* Real-time chunking's guidance weight at time t (pi05.h): t/(1-t) * (t^2 + (1-t)^2)/t^2, capped; the
 * cap at t = 1, where it is infinite. In double, as lerobot computes it from Python floats. */
static float guidance_weight(float t, float max_guidance)
{
    double tt = t, tau = 1.0 - tt;
    if (tau <= 0.0) return max_guidance;
    double w = tt / tau * (tt * tt + tau * tau) / (tt * tt);
    return w < (double)max_guidance ? (float)w : max_guidance;
}

/* v [nb][H][ad] of the guided requests: v -= w * W (*) (prev - (x - t v)). One pass over 50x32 values per
 * request and step, the same loop for the reference and the fast paths. */
static void guide_velocity(const float *x, float *v, const pi05_guide *const *guides, int nb, int H, int ad,
                           float t)
{
    long n = (long)H * ad;
    for (int r = 0; r < nb; r++) {
        const pi05_guide *g = guides[r];
        if (g == NULL) continue;
        float w = guidance_weight(t, g->max_guidance);
        const float *xr = x + r * n;
        float *vr = v + r * n;
        for (long i = 0; i < n; i++) {
            float x0 = xr[i] - t * vr[i];
            vr[i] -= w * (g->weights[i] * (g->prev[i] - x0));
        }
    }
}

void p5_expert_run(pi05_program *p, pi05_slab *const *slabs, int nb, const float *noise, int H,
                   int steps, int pack, const pi05_guide *const *guides, float *actions)
{
    const pi05_model *m = p->m;
    const pi05_dims *d = &m->d;
    int ew = d->e_width, eq = d->e_heads * d->head_dim;
    int ad = d->action_dim, R = nb * H, L = d->l_layers;
    if (p->mods_steps != steps) { /* the modulations depend only on the step grid: reuse them */
        conditioning(p, steps);
        p->mods_steps = steps;
    }
    memcpy(p->e_x, noise, (size_t)R * (size_t)ad * sizeof(float));
    float dt = (float)(-1.0 / steps);
    double dtd = -1.0 / steps;
    for (int s = 0; s < steps; s++) {
        lin_rows(p, &m->act_in, p->e_x, ad, p->e_h, ew, nb, H, pack);
        for (int l = 0; l < L; l++) {
            const p5_ex_layer *E = &m->el[l];
            const float *mod = mod_at(p, 2 * l, s);
            p5_adarms(p, p->e_h, p->e_y, R, ew, mod, d->e_eps);
            const p5_fused *qkv = &E->qkv, *gu = &E->gu;
            float *q = p->e_qkv, *k = q + qkv->off[1], *v = q + qkv->off[2];
            fused_rows(p, qkv, p->e_y, ew, p->e_qkv, nb, H, pack);
            for (int r = 0; r < nb; r++) { /* suffix positions start after the request's valid prefix */
                int P = slabs[r]->prefix_len;
                p5_rope(p, q + (long)r * H * qkv->ld, qkv->ld, H, d->e_heads, P);
                p5_rope(p, k + (long)r * H * qkv->ld, qkv->ld, H, d->kv_heads, P);
            }
            p5_attend_slabs(p, slabs, nb, l, q, qkv->ld, H, d->e_heads, k, v, qkv->ld, H, p->e_a, eq);
            lin_rows(p, &E->o, p->e_a, eq, p->e_t, ew, nb, H, pack);
            p5_gated_add(p, p->e_h, p->e_t, R, ew, mod + 2L * ew);
            mod = mod_at(p, 2 * l + 1, s);
            p5_adarms(p, p->e_h, p->e_y, R, ew, mod, d->e_eps);
            fused_rows(p, gu, p->e_y, ew, p->e_gu, nb, H, pack);
            p5_geglu(p, p->e_gu, gu->ld, R, d->e_mlp, gu->off[1]);
            lin_rows(p, &E->down, p->e_gu, gu->ld, p->e_t, ew, nb, H, pack);
            p5_gated_add(p, p->e_h, p->e_t, R, ew, mod + 2L * ew);
        }
        p5_adarms(p, p->e_h, p->e_y, R, ew, mod_at(p, 2 * L, s), d->e_eps);
        lin_rows(p, &m->act_out, p->e_y, ew, p->e_vel, ad, nb, H, pack);
        if (guides != NULL) guide_velocity(p->e_x, p->e_vel, guides, nb, H, ad, (float)(1.0 + s * dtd));
        for (long i = 0; i < (long)R * ad; i++) p->e_x[i] += dt * p->e_vel[i];
    }
    memcpy(actions, p->e_x, (size_t)R * (size_t)ad * sizeof(float));
}
