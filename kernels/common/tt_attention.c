/* tt_attention.c: tt_attention as two pool runs: pack K and V^T of every (batch, head) as GEMM
 * weights, then one task per (batch, head, block of QB query rows) on per-thread score scratch. */
#include "tt_attention.h"

#include <stdint.h>

#include "tt_ops.h"

/* Query rows per task: the score block (QB x seq) stays in L2. */
enum { QB = 48 };

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

typedef struct {
    size_t kmat, vmat; /* bytes of one packed K / V */
    size_t scores;     /* fp32 scores per thread */
    size_t abf16;      /* bf16 copy of Q block or of the scores, per thread */
    int seqp;          /* score row stride: seq rounded up to a whole panel */
} attn_layout;

static attn_layout layout(const tt_attn_shape *s)
{
    attn_layout l;
    l.seqp = (s->seq + TT_NR - 1) / TT_NR * TT_NR;
    l.kmat = align64(tt_mat_bytes(s->dtype, s->seq, s->hd));
    l.vmat = align64(tt_mat_bytes(s->dtype, s->hd, s->seq));
    l.scores = align64((size_t)QB * l.seqp * sizeof(float));
    int widest = l.seqp > s->hd ? l.seqp : s->hd;
    l.abf16 = s->dtype == TT_BF16 ? align64((size_t)QB * (widest + 2) * 2) : 0;
    return l;
}

size_t tt_attention_ws_bytes(const tt_attn_shape *s)
{
    attn_layout l = layout(s);
    size_t bh = (size_t)s->batch * s->heads;
    int nt = s->nthreads > 0 ? s->nthreads : 1;
    return bh * (l.kmat + l.vmat) + (size_t)nt * (l.scores + l.abf16) + bh * 2 * sizeof(tt_mat);
}

typedef struct {
    const tt_attn_shape *s;
    attn_layout l;
    const float *q, *k, *v;
    long ld;
    float *out;
    long ldo;
    float scale;
    char *ws;
    tt_mat *mats; /* [bh][2]: K, V */
    int qblocks;
} attn_job;

static void pack_task(void *arg, int task, int thread)
{
    (void)thread;
    attn_job *j = arg;
    const tt_attn_shape *s = j->s;
    int b = task / s->heads, h = task % s->heads;
    long row0 = (long)b * s->seq;
    char *base = j->ws + (size_t)task * (j->l.kmat + j->l.vmat);
    /* K as a weight [seq][hd]; V^T as a weight [hd][seq] (transposed source). */
    tt_mat_pack_into(&j->mats[2 * task], base, s->dtype, s->isa, j->k + row0 * j->ld + h * s->hd, j->ld, 0,
                     s->seq, s->hd);
    tt_mat_pack_into(&j->mats[2 * task + 1], base + j->l.kmat, s->dtype, s->isa,
                     j->v + row0 * j->ld + h * s->hd, j->ld, 1, s->hd, s->seq);
}

/* One (batch b, head h, query rows [r0, r0 + rows)) task, rows <= QB, S = seq:
 *   sc [rows][S] = Q_h K_h^T;  e = exp(scale sc - rowmax), sums = sum_j e   (tt_softmax_unnorm_rows)
 *   out_h [rows][hd] = (e V_h) / sums */
static void compute_task(void *arg, int task, int thread)
{
    attn_job *j = arg;
    const tt_attn_shape *s = j->s;
    int bh = task / j->qblocks, qb = task % j->qblocks;
    int b = bh / s->heads, h = bh % s->heads;
    int r0 = qb * QB, rows = s->seq - r0 < QB ? s->seq - r0 : QB;
    const tt_mat *km = &j->mats[2 * bh], *vm = &j->mats[2 * bh + 1];
    size_t bhn = (size_t)s->batch * s->heads;
    char *tws = j->ws + bhn * (j->l.kmat + j->l.vmat) + (size_t)thread * (j->l.scores + j->l.abf16);
    float *sc = (float *)tws;
    uint16_t *abf = (uint16_t *)(tws + j->l.scores);
    const float *qp = j->q + ((long)b * s->seq + r0) * j->ld + h * s->hd;
    float *op = j->out + ((long)b * s->seq + r0) * j->ldo + h * s->hd;

    if (s->dtype == TT_F32) {
        tt_gemm_block(km, qp, j->ld, sc, j->l.seqp, 0, rows, 0, km->npanels, 0);
    } else {
        tt_to_bf16_rows(s->isa, qp, j->ld, abf, km->kp, rows, s->hd);
        tt_gemm_block(km, abf, km->kp, sc, j->l.seqp, 0, rows, 0, km->npanels, 0);
    }
    /* Unnormalised probabilities (bf16 mode: straight into the bf16 operand);
     * the 1/sum is applied to the P.V rows, seq/hd times fewer values. */
    float sums[QB];
    if (s->dtype == TT_F32) {
        tt_softmax_unnorm_rows(s->isa, sc, j->l.seqp, NULL, 0, rows, s->seq, j->scale, sums);
        tt_gemm_block(vm, sc, j->l.seqp, op, j->ldo, 0, rows, 0, vm->npanels, 0);
    } else {
        tt_softmax_unnorm_rows(s->isa, sc, j->l.seqp, abf, vm->kp, rows, s->seq, j->scale, sums);
        tt_gemm_block(vm, abf, vm->kp, op, j->ldo, 0, rows, 0, vm->npanels, 0);
    }
    for (int r = 0; r < rows; r++) {
        float inv = 1.0f / sums[r];
        float *o = op + (long)r * j->ldo;
        for (int d = 0; d < s->hd; d++) o[d] *= inv;
    }
}

void tt_attention(tt_pool *pool, const tt_attn_shape *s, const float *q, const float *k,
                  const float *v, long ld, float *out, long ldo, float scale, void *ws)
{
    attn_job j;
    j.s = s;
    j.l = layout(s);
    j.q = q;
    j.k = k;
    j.v = v;
    j.ld = ld;
    j.out = out;
    j.ldo = ldo;
    j.scale = scale;
    j.ws = ws;
    size_t bh = (size_t)s->batch * s->heads;
    int nt = s->nthreads > 0 ? s->nthreads : 1;
    j.mats = (tt_mat *)((char *)ws + bh * (j.l.kmat + j.l.vmat) + (size_t)nt * (j.l.scores + j.l.abf16));
    j.qblocks = (s->seq + QB - 1) / QB;
    tt_pool_run(pool, (int)bh, pack_task, &j);
    tt_pool_run(pool, (int)bh * j.qblocks, compute_task, &j);
}
