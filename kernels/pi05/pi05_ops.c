/* pi05_ops.c: the ops the pi0.5 stages are written in (linear, norms, GEGLU, RoPE, attention over
 * slabs). Each has the plain-loop reference (PI05_REF: one thread, fp32, libm) and the fast version
 * (packed tt_gemm, the thread pool, kernels/common's vector ops for the model's isa).
 * Must not: allocate (scratch comes from the program), hold vector code of its own (generic vector
 * ops belong in kernels/common, with their self-tests), or know which stage calls it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../common/tt_attention.h"
#include "../common/tt_cpu.h"
#include "../common/tt_ops.h"
#include "pi05_internal.h"

tt_dtype p5_att_dtype(const pi05_model *m) { return m->prec == PI05_BF16 ? TT_BF16 : TT_F32; }

void p5_err(char *err, size_t n, const char *fmt, ...)
{
    if (err == NULL || n == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

static int is_ref(const pi05_program *p) { return p->m->prec == PI05_REF; }

/* ---------------------------------------------------------------- rows in parallel */

typedef void (*rows_fn)(void *arg, int r0, int r1);
typedef struct {
    rows_fn fn;
    void *arg;
    int rows, chunk;
} rows_job;

static void rows_task(void *a, int task, int thread)
{
    (void)thread;
    rows_job *j = a;
    int r0 = task * j->chunk, r1 = r0 + j->chunk < j->rows ? r0 + j->chunk : j->rows;
    if (r0 < r1) j->fn(j->arg, r0, r1);
}

/* Runs fn over [0, rows) in chunks on the pool (serially for PI05_REF). */
static void par_rows(pi05_program *p, int rows, rows_fn fn, void *arg)
{
    if (p->pool == NULL || rows < 2) {
        if (rows > 0) fn(arg, 0, rows);
        return;
    }
    int tasks = p->nthreads * 4 < rows ? p->nthreads * 4 : rows;
    rows_job j = {fn, arg, rows, (rows + tasks - 1) / tasks};
    tt_pool_run(p->pool, (rows + j.chunk - 1) / j.chunk, rows_task, &j);
}

/* ---------------------------------------------------------------- linear */

void p5_linear(pi05_program *p, const p5_lin *l, const float *x, long ldx, float *y, long ldy, int m,
               int accum)
{
    if (!is_ref(p)) {
        tt_gemm(p->pool, &p->plan, &l->mat, x, ldx, y, ldy, m, accum ? TT_GEMM_ACCUM : 0, p->gemm_ws);
        return;
    }
    for (int i = 0; i < m; i++) {
        const float *xr = x + (long)i * ldx;
        float *yr = y + (long)i * ldy;
        for (int o = 0; o < l->n; o++) {
            const float *wr = l->w + (long)o * l->k;
            float s = 0.0f;
            for (int k = 0; k < l->k; k++) s += xr[k] * wr[k];
            if (l->b) s += l->b[o];
            yr[o] = accum ? yr[o] + s : s;
        }
    }
}

void p5_linear_fused(pi05_program *p, const p5_fused *f, const float *x, long ldx, float *y, int m)
{
    if (!is_ref(p)) {
        tt_gemm(p->pool, &p->plan, &f->mat, x, ldx, y, f->ld, m, 0, p->gemm_ws);
        return;
    }
    for (int i = 0; i < f->nparts; i++) p5_linear(p, f->part[i], x, ldx, y + f->off[i], f->ld, m, 0);
}

/* ---------------------------------------------------------------- norms */

/* Gemma's RMSNorm scales by (1 + w) (its checkpoints store w - 1), and so does adaRMS by (1 + scale). */
#define P5_NORM_ONE_PLUS 1.0f

/* The isa an op runs with: scalar for PI05_REF, else the model's. */
static tt_isa op_isa(const pi05_program *p) { return is_ref(p) ? TT_ISA_SCALAR : p->m->isa; }

/* The arguments of every row-parallel op below (norms, gated add, GEGLU, RoPE): each reads the fields
 * it needs, rows [r0, r1) at a time, through par_rows. */
typedef struct {
    pi05_program *p;
    const float *x, *w, *mod, *g, *b, *t;
    float *y;
    int n;
    float eps;
    long ld;        /* GEGLU, RoPE: row stride of y */
    int up;         /* GEGLU: column of the up half in each row, < 0 for none */
    int heads, pos0; /* RoPE */
} row_job;

/* Gemma RMSNorm, y = RMS(x) (1 + w); adaRMS when mod is set, y = RMS(x) (1 + scale) + shift. */
static void rms_rows(void *a, int r0, int r1)
{
    row_job *j = a;
    long n = j->n;
    const float *w = j->mod ? j->mod : j->w, *shift = j->mod ? j->mod + n : NULL;
    tt_rmsnorm_rows(op_isa(j->p), j->x + r0 * n, n, j->y + r0 * n, n, r1 - r0, j->n, w, P5_NORM_ONE_PLUS, shift,
                    j->eps);
}

void p5_rmsnorm(pi05_program *p, const float *x, float *y, int rows, int n, const float *w, float eps)
{
    row_job j = {.p = p, .x = x, .w = w, .y = y, .n = n, .eps = eps};
    par_rows(p, rows, rms_rows, &j);
}

void p5_adarms(pi05_program *p, const float *x, float *y, int rows, int n, const float *mod, float eps)
{
    row_job j = {.p = p, .x = x, .mod = mod, .y = y, .n = n, .eps = eps};
    par_rows(p, rows, rms_rows, &j);
}

static void gated_rows(void *a, int r0, int r1)
{
    row_job *j = a;
    for (int r = r0; r < r1; r++) {
        float *x = j->y + (long)r * j->n;
        const float *t = j->t + (long)r * j->n;
        for (int i = 0; i < j->n; i++) x[i] += t[i] * j->g[i];
    }
}

void p5_gated_add(pi05_program *p, float *x, const float *t, int rows, int n, const float *gate)
{
    row_job j = {.p = p, .y = x, .t = t, .g = gate, .n = n};
    par_rows(p, rows, gated_rows, &j);
}

static void ln_rows(void *a, int r0, int r1)
{
    row_job *j = a;
    tt_layernorm_rows(op_isa(j->p), j->x + (long)r0 * j->n, j->n, j->y + (long)r0 * j->n, j->n, r1 - r0, j->n,
                      j->g, j->b, j->eps);
}

void p5_layernorm(pi05_program *p, const float *x, float *y, int rows, int n, const float *g,
                  const float *b, float eps)
{
    row_job j = {.p = p, .x = x, .y = y, .n = n, .g = g, .b = b, .eps = eps};
    par_rows(p, rows, ln_rows, &j);
}

/* ---------------------------------------------------------------- GELU (tanh) */

static void geglu_rows(void *a, int r0, int r1)
{
    row_job *j = a;
    for (int r = r0; r < r1; r++) {
        float *g = j->y + (long)r * j->ld;
        tt_gelu_tanh_mul(op_isa(j->p), g, j->up >= 0 ? g + j->up : NULL, j->n);
    }
}

void p5_geglu(pi05_program *p, float *gu, long ld, int rows, int n, int up)
{
    row_job j = {.p = p, .y = gu, .ld = ld, .n = n, .up = up};
    par_rows(p, rows, geglu_rows, &j);
}

/* ---------------------------------------------------------------- RoPE */

/* Rotate-half RoPE on rows [r0, r1) of heads [rows][heads][hd] at position pos0 + row, half = hd/2:
 *   x'[i] = x[i] cos(a_i) - x[i + half] sin(a_i),  x'[i + half] = x[i + half] cos(a_i) + x[i] sin(a_i)
 *   a_i = pos * theta^(-2i/hd) (the program's tables). */
static void rope_rows(void *a, int r0, int r1)
{
    row_job *j = a;
    int hd = j->p->m->d.head_dim, half = hd / 2;
    for (int r = r0; r < r1; r++) {
        const float *c = j->p->rope_cos + (long)(j->pos0 + r) * half;
        const float *s = j->p->rope_sin + (long)(j->pos0 + r) * half;
        for (int h = 0; h < j->heads; h++) {
            float *x = j->y + (long)r * j->ld + (long)h * hd;
            for (int i = 0; i < half; i++) {
                float x1 = x[i], x2 = x[i + half];
                x[i] = x1 * c[i] - x2 * s[i];
                x[i + half] = x2 * c[i] + x1 * s[i];
            }
        }
    }
}

void p5_rope(pi05_program *p, float *x, long ld, int rows, int heads, int pos0)
{
    row_job j = {.p = p, .y = x, .ld = ld, .heads = heads, .pos0 = pos0};
    par_rows(p, rows, rope_rows, &j);
}

/* ---------------------------------------------------------------- attention */

/* Plain attention: queries [nq][ldq] (head h at h*hd), keys/values [nk][ldkv] (kv head g at g*hd);
 * query head h reads kv head h / (heads / kvh):  out_h = softmax(q_h K_g^T / sqrt(hd)) V_g. */
static void attend_ref(const float *q, long ldq, int nq, int heads, const float *k, const float *v,
                       long ldkv, int nk, int kvh, int hd, float *out, long ldo, float *sc)
{
    float scale = 1.0f / sqrtf((float)hd);
    int group = heads / kvh;
    for (int i = 0; i < nq; i++)
        for (int h = 0; h < heads; h++) {
            const float *qi = q + (long)i * ldq + (long)h * hd;
            int g = h / group;
            float mx = -INFINITY;
            for (int j = 0; j < nk; j++) {
                const float *kj = k + (long)j * ldkv + (long)g * hd;
                float s = 0.0f;
                for (int e = 0; e < hd; e++) s += qi[e] * kj[e];
                sc[j] = s * scale;
                if (sc[j] > mx) mx = sc[j];
            }
            float sum = 0.0f;
            for (int j = 0; j < nk; j++) {
                sc[j] = expf(sc[j] - mx);
                sum += sc[j];
            }
            float *o = out + (long)i * ldo + (long)h * hd;
            for (int e = 0; e < hd; e++) o[e] = 0.0f;
            for (int j = 0; j < nk; j++) {
                float w = sc[j] / sum;
                const float *vj = v + (long)j * ldkv + (long)g * hd;
                for (int e = 0; e < hd; e++) o[e] += w * vj[e];
            }
        }
}

void p5_slab_store(pi05_program *p, pi05_slab *s, int layer, const float *k, const float *v, long ld, int P)
{
    const pi05_dims *d = &p->m->d;
    int hd = d->head_dim;
    for (int h = 0; h < d->kv_heads; h++) {
        size_t slot = (size_t)layer * (size_t)d->kv_heads + (size_t)h;
        if (is_ref(p)) {
            for (int r = 0; r < P; r++) {
                size_t o = (slot * (size_t)s->max_prefix + (size_t)r) * (size_t)hd;
                memcpy(s->k32 + o, k + (long)r * ld + (long)h * hd, (size_t)hd * sizeof(float));
                memcpy(s->v32 + o, v + (long)r * ld + (long)h * hd, (size_t)hd * sizeof(float));
            }
            continue;
        }
        tt_dtype dt = p5_att_dtype(p->m);
        tt_mat_pack_into(&s->kmat[slot], (char *)s->kbuf + slot * s->kstride, dt, p->m->isa, k + h * hd, ld, 0,
                         P, hd);
        tt_mat_pack_into(&s->vmat[slot], (char *)s->vbuf + slot * s->vstride, dt, p->m->isa, v + h * hd, ld, 1,
                         hd, P);
    }
}

/* Fast attention over slabs: one pool run for all (request, query head, block of P5_QB query rows)
 * tasks; each computes S = Q_h K^T over the slab's prefix keys and the request's suffix keys, the
 * fp32 softmax, and O_h = S V, with the serial tt_gemm_block on per-thread scratch. */
typedef struct {
    pi05_program *p;
    pi05_slab *const *slabs;
    int layer, nq, heads, group, hd, nsuf, qblocks;
    const float *q;
    long ldq, ldo;
    float *out;
    const tt_mat *ksuf, *vsuf; /* [request][kv head] */
    float scale;
    tt_dtype dt;
} slab_att_job;

static int kpad2(int k) { return (k + 1) & ~1; }

static void slab_att_task(void *arg, int task, int thread)
{
    slab_att_job *j = arg;
    pi05_program *p = j->p;
    const pi05_dims *d = &p->m->d;
    int per = j->heads * j->qblocks, qrows = (j->nq + j->qblocks - 1) / j->qblocks;
    int r = task / per, h = (task % per) / j->qblocks, qb = task % j->qblocks;
    int r0 = qb * qrows, rows = j->nq - r0 < qrows ? j->nq - r0 : qrows;
    if (rows <= 0) return;
    const pi05_slab *s = j->slabs[r];
    int g = h / j->group, n1 = s->prefix_len, n2 = j->nsuf;
    size_t slot = (size_t)j->layer * (size_t)d->kv_heads + (size_t)g;
    long lds = kpad2(n1 + n2);
    float *sc = p->att_sc + (size_t)thread * P5_QB * (size_t)p->att_sc_ld;
    uint16_t *abf = p->att_abf + (size_t)thread * P5_QB * (size_t)p->att_abf_ld;
    const float *qp = j->q + ((long)r * j->nq + r0) * j->ldq + (long)h * j->hd;
    float *op = j->out + ((long)r * j->nq + r0) * j->ldo + (long)h * j->hd;
    tt_isa isa = p->m->isa;
    const tt_mat *ks = j->ksuf ? &j->ksuf[r * d->kv_heads + g] : NULL;
    const tt_mat *vs = j->vsuf ? &j->vsuf[r * d->kv_heads + g] : NULL;
    int bf = j->dt == TT_BF16;

    const void *a = qp;
    long lda = j->ldq;
    if (bf) {
        tt_to_bf16_rows(isa, qp, j->ldq, abf, kpad2(j->hd), rows, j->hd);
        a = abf, lda = kpad2(j->hd);
    }
    tt_gemm_block(&s->kmat[slot], a, lda, sc, lds, 0, rows, 0, s->kmat[slot].npanels, 0);
    if (n2 > 0) tt_gemm_block(ks, a, lda, sc + n1, lds, 0, rows, 0, ks->npanels, 0);
    tt_softmax_rows(isa, sc, lds, rows, n1 + n2, j->scale);
    a = sc, lda = lds;
    if (bf) {
        tt_to_bf16_rows(isa, sc, lds, abf, kpad2(n1), rows, n1);
        a = abf, lda = kpad2(n1);
    }
    tt_gemm_block(&s->vmat[slot], a, lda, op, j->ldo, 0, rows, 0, s->vmat[slot].npanels, 0);
    if (n2 > 0) {
        a = sc + n1, lda = lds;
        if (bf) {
            tt_to_bf16_rows(isa, sc + n1, lds, abf, kpad2(n2), rows, n2);
            a = abf, lda = kpad2(n2);
        }
        tt_gemm_block(vs, a, lda, op, j->ldo, 0, rows, 0, vs->npanels, TT_GEMM_ACCUM);
    }
}

void p5_attend_slabs(pi05_program *p, pi05_slab *const *slabs, int nb, int layer, const float *q, long ldq,
                     int nq, int heads, const float *ksuf, const float *vsuf, long ldkv, int nsuf, float *out,
                     long ldo)
{
    const pi05_dims *d = &p->m->d;
    int hd = d->head_dim, kvd = d->kv_heads * hd;
    if (is_ref(p)) {
        for (int r = 0; r < nb; r++) {
            const pi05_slab *s = slabs[r];
            int P = s->prefix_len;
            /* keys = the slab's prefix rows, then the suffix rows */
            for (int h = 0; h < d->kv_heads; h++) {
                size_t slot = (size_t)layer * (size_t)d->kv_heads + (size_t)h;
                for (int i = 0; i < P; i++) {
                    size_t o = (slot * (size_t)s->max_prefix + (size_t)i) * (size_t)hd;
                    memcpy(p->e_k32 + (long)i * kvd + h * hd, s->k32 + o, (size_t)hd * sizeof(float));
                    memcpy(p->e_v32 + (long)i * kvd + h * hd, s->v32 + o, (size_t)hd * sizeof(float));
                }
            }
            for (int i = 0; i < nsuf; i++) {
                memcpy(p->e_k32 + (long)(P + i) * kvd, ksuf + ((long)r * nsuf + i) * ldkv, (size_t)kvd * sizeof(float));
                memcpy(p->e_v32 + (long)(P + i) * kvd, vsuf + ((long)r * nsuf + i) * ldkv, (size_t)kvd * sizeof(float));
            }
            attend_ref(q + (long)r * nq * ldq, ldq, nq, heads, p->e_k32, p->e_v32, kvd, P + nsuf, d->kv_heads, hd,
                       out + (long)r * nq * ldo, ldo, p->scores);
        }
        return;
    }
    tt_dtype dt = p5_att_dtype(p->m);
    tt_mat *km = NULL, *vm = NULL;
    if (nsuf > 0) { /* pack every request's suffix K and V^T (small: nsuf x head_dim) */
        km = p->suf_mats;
        vm = p->suf_mats + (size_t)nb * (size_t)d->kv_heads;
        for (int r = 0; r < nb; r++)
            for (int g = 0; g < d->kv_heads; g++) {
                int i = r * d->kv_heads + g;
                char *base = (char *)p->att_ws + (size_t)i * 2 * p->att_ws_half;
                const float *k = ksuf + (long)r * nsuf * ldkv + g * hd, *v = vsuf + (long)r * nsuf * ldkv + g * hd;
                tt_mat_pack_into(&km[i], base, dt, p->m->isa, k, ldkv, 0, nsuf, hd);
                tt_mat_pack_into(&vm[i], base + p->att_ws_half, dt, p->m->isa, v, ldkv, 1, hd, nsuf);
            }
    }
    slab_att_job j = {p, slabs, layer, nq, heads, heads / d->kv_heads, hd, nsuf, (nq + P5_QB - 1) / P5_QB,
                      q, ldq, ldo, out, km, vm, 1.0f / sqrtf((float)hd), dt};
    tt_pool_run(p->pool, nb * heads * j.qblocks, slab_att_task, &j);
}

void p5_attend_blocks(pi05_program *p, const float *q, const float *k, const float *v, long ld, float *out,
                      int nb, int T, int heads, int hd)
{
    long ldo = (long)heads * hd;
    if (is_ref(p)) {
        for (int b = 0; b < nb; b++) {
            long o = (long)b * T * ld;
            attend_ref(q + o, ld, T, heads, k + o, v + o, ld, T, heads, hd, out + (long)b * T * ldo, ldo, p->scores);
        }
        return;
    }
    tt_attn_shape sh = {nb, T, heads, hd, p->nthreads, p5_att_dtype(p->m), p->m->isa};
    tt_attention(p->pool, &sh, q, k, v, ld, out, ldo, 1.0f / sqrtf((float)hd), p->vis_att_ws);
}
