/* rfdetr.c: the RF-DETR-base program of rfdetr.h: weight packing at load,
 * then the forward as five stages (backbone, projector, query selection,
 * decoder, heads), each opening with its shapes and math.
 *
 * Activations are token-major fp32 ([tokens][channels], i.e. NHWC for feature
 * maps); every linear / convolution is a tt_gemm on weights packed at load.
 * Must not: allocate or start threads after rfdetr_new (all scratch lives in
 * struct rfdetr), or hold vector code of its own: the fast kernels are
 * kernels/common's, so the scalar reference and every ISA share this file. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif
#include "rfdetr.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rfdetr_weights.h"
#include "tt_arena.h"
#include "tt_attention.h"
#include "tt_gemm.h"
#include "tt_gemm_plan.h"
#include "tt_ops.h"
#include "tt_pool.h"

enum {
    GRID = 40,                 /* patches per side */
    PATCH = 14,
    NWIN = 4,                  /* windows per side */
    WIN = GRID / NWIN,         /* 10 patches per window side */
    WTOK = WIN * WIN + 1,      /* tokens per window incl. its CLS copy */
    SEQ = NWIN * NWIN * WTOK,  /* 1616 rows of the windowed sequence */
    HEADS = 6,
    HD = 64,
    MLP = 1536,
    POS_SIDE = 37,             /* the checkpoint's position grid (518 / 14) */
    POS_ROWS = POS_SIDE * POS_SIDE + 1, /* 1370: CLS + grid */
    C_HALF = 128,              /* C2f hidden channels */
    C2F_CAT = 640,             /* 5 x 128 */
    DFF = 2048,
    SA_HEADS = 8,
    CA_HEADS = 16,
    CA_POINTS = 2,
    OFFAW = CA_HEADS * CA_POINTS * 3, /* 64 sampling offsets (x, y) + 32 attention logits per query */
};

/* The reference's numeric constants, named. */
#define BB_LN_EPS 1e-6f          /* DINOv2's LayerNorms and the projector's channel LayerNorms */
#define DEC_LN_EPS 1e-5f         /* nn.LayerNorm's default: encoder output norm, decoder norms */
#define BB_ATT_SCALE 0.125f      /* 1/sqrt(HD), HD = 64 */
#define PROPOSAL_WH 0.05f        /* width and height of a two-stage proposal (normalized) */
#define SINE_TEMPERATURE 10000.0f
#define TWO_PI 6.283185307179586f

static const int tap_layers[4] = {1, 4, 7, 10};
static int is_global(int layer) { return layer % 3 == 2; } /* layers 2, 5, 8, (11) */

typedef struct {
    float *w, *b;
} ln_p;

typedef struct {
    ln_p n1, n2;
    tt_mat qkv, dense, fc1, fc2;
    float ls1[RFDETR_DIM], ls2[RFDETR_DIM];
} bb_layer;

typedef struct {
    tt_mat sa_qk, sa_v, sa_out, off_aw, value, out, l1, l2;
    ln_p n1, n2, n3;
} dec_layer;

struct rfdetr {
    rfdetr_precision precision;
    tt_dtype dtype;
    tt_isa isa;
    tt_pool *pool;
    int nthreads;
    tt_gemm_plan plan; /* the GEMM blocking by row count (tt_gemm_plan.h) */
    unsigned char *set; /* per flat weight index */
    int finished;

    /* weights: every buffer is a piece of one arena (tt_arena), allocated here or attached from
     * packed weights (the packed-weights cache); mats lists the packed matrices for their headers */
    tt_arena arena;
    struct {
        tt_mat *m;
        int n, k;
    } mats[128];
    int nmats;
    float *cls;     /* [384] */
    float *pos_raw; /* [POS_ROWS][384] */
    float *pos;     /* [1601][384] resized at finish */
    tt_mat patch;
    bb_layer L[NBL];
    ln_p bb_ln;
    tt_mat cv1, m[3][2], cv2;
    ln_p cv1n, mn[3][2], cv2n, pln;
    tt_mat enc_out, enc_cls, enc_bb[3];
    ln_p enc_norm;
    tt_mat rph[2];
    dec_layer D[NDL];
    ln_p dnorm;
    tt_mat cls_head, bb_head[3];
    float *refpoint; /* [300][4] */
    float *query;    /* [300][256] */

    /* scratch, scratch_bytes in all (rfdetr_bytes) */
    size_t scratch_bytes;
    float *im2col;   /* [1600][max(588, 1152)] */
    float *x, *xn;   /* [1616][384] */
    float *qkv;      /* [1616][1152] */
    float *att;      /* [1616][384] */
    float *mlp;      /* [1616][1536] (also decoder FFN [300][2048]) */
    float *taps;     /* [1600][1536] */
    float *y;        /* [1600][640] */
    float *t128;     /* [1600][128] */
    float *mem;      /* [1600][256] */
    float *enc_q, *enc_t1, *enc_t2; /* [1600][256] */
    float *enc_cls_out; /* [1600][91] */
    float *enc_box;  /* [1600][4] */
    float *score;    /* [1600] */
    int *order;      /* [1600] */
    int *forced;     /* [300] selection forced by rfdetr_force_selection */
    int use_forced;
    float *topk;     /* [300] */
    float *ref;      /* [300][4] */
    float *sine;     /* [300][512] */
    float dim_t[RFDETR_HIDDEN / 2]; /* sine embedding temperatures */
    float *qpos, *tgt, *tq, *sa, *ca, *hs, *t300; /* [300][256] */
    float *dqkv;     /* [300][768] */
    float *val;      /* [1600][256] */
    float *offaw;    /* [300][OFFAW] */
    float *delta;    /* [300][4] */
    void *gemm_ws;
    void *attn_ws;
    tt_attn_shape attn_win, attn_glob, attn_dec;
    rfdetr_timing timing;
};

/* ---------- weight table ---------- */

static int flat_count(void)
{
    int n = 0;
    for (int k = 0; k < W_KINDS; k++) n += wtable[k].count;
    return n;
}

static int flat_lookup(int i, wkind *kind, int *layer)
{
    for (int k = 0; k < W_KINDS; k++) {
        if (i < wtable[k].count) {
            *kind = (wkind)k;
            *layer = i;
            return 0;
        }
        i -= wtable[k].count;
    }
    return -1;
}

int rfdetr_weight_count(void) { return flat_count(); }

int rfdetr_weight_name(int i, char *buf, size_t len)
{
    wkind k;
    int layer;
    if (flat_lookup(i, &k, &layer) != 0) return -1;
    if (wtable[k].count > 1) snprintf(buf, len, wtable[k].fmt, layer);
    else snprintf(buf, len, "%s", wtable[k].fmt);
    return 0;
}

int rfdetr_weight_shape(int i, int dims[4])
{
    wkind k;
    int layer;
    if (flat_lookup(i, &k, &layer) != 0) return -1;
    for (int d = 0; d < 4; d++) dims[d] = wtable[k].dims[d];
    return wtable[k].rank;
}

int rfdetr_weight_min_rows(int i)
{
    wkind k;
    int layer;
    if (flat_lookup(i, &k, &layer) != 0) return -1;
    return wtable[k].min_rows;
}

/* ---------- creation ---------- */

/* A zeroed scratch buffer of n floats, counted in *total. */
static float *falloc(long n, size_t *total)
{
    size_t bytes = ((size_t)n * sizeof(float) + 63) & ~(size_t)63;
    float *p = aligned_alloc(64, bytes);
    if (p) memset(p, 0, bytes);
    *total += bytes;
    return p;
}

/* Weight pieces of the arena: a packed matrix (panels, and its bias), a LayerNorm, a vector. */
static void mat_reserve(rfdetr *p, tt_mat *m, int n, int k, int bias, const char *name)
{
    tt_arena_reserve(&p->arena, &m->panels, tt_mat_bytes(p->dtype, n, k), name);
    if (bias) tt_arena_reserve(&p->arena, (void **)&m->bias, (size_t)n * sizeof(float), name);
    if (p->nmats < (int)(sizeof p->mats / sizeof p->mats[0])) p->mats[p->nmats].m = m, p->mats[p->nmats].n = n, p->mats[p->nmats].k = k;
    p->nmats++;
}

static void ln_reserve(rfdetr *p, ln_p *l, int n, const char *name)
{
    tt_arena_reserve(&p->arena, (void **)&l->w, (size_t)n * sizeof(float), name);
    tt_arena_reserve(&p->arena, (void **)&l->b, (size_t)n * sizeof(float), name);
}

/* The version of what RF-DETR packs into its arena: bump it when the bytes packed for the same
 * tensors change (rounding, panel order, folding) while every piece keeps its name, offset and size. */
enum { RFDETR_PACK_VERSION = 1 };

/* Lays out every weight in a fixed order (the arena's pieces). */
static int lay_out(rfdetr *p)
{
    tt_arena_init(&p->arena, (uint64_t)RFDETR_PACK_VERSION << 32 | (uint64_t)p->precision << 16 | TT_NR);
#define MAT(m, n, k, bias) mat_reserve(p, &(m), (n), (k), (bias), #m)
#define LN(l, n) ln_reserve(p, &(l), (n), #l)
#define VEC(b, n) tt_arena_reserve(&p->arena, (void **)&(b), (size_t)(n) * sizeof(float), #b)
    VEC(p->cls, RFDETR_DIM);
    VEC(p->pos_raw, (long)POS_ROWS * RFDETR_DIM);
    VEC(p->pos, (RFDETR_TOKENS + 1L) * RFDETR_DIM);
    MAT(p->patch, RFDETR_DIM, 3 * PATCH * PATCH, 1);
    for (int l = 0; l < NBL; l++) {
        bb_layer *L = &p->L[l];
        LN(L->n1, RFDETR_DIM);
        LN(L->n2, RFDETR_DIM);
        MAT(L->qkv, 3 * RFDETR_DIM, RFDETR_DIM, 1);
        MAT(L->dense, RFDETR_DIM, RFDETR_DIM, 1);
        MAT(L->fc1, MLP, RFDETR_DIM, 1);
        MAT(L->fc2, RFDETR_DIM, MLP, 1);
    }
    LN(p->bb_ln, RFDETR_DIM);
    MAT(p->cv1, RFDETR_HIDDEN, 4 * RFDETR_DIM, 0);
    LN(p->cv1n, RFDETR_HIDDEN);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            MAT(p->m[i][j], C_HALF, 9 * C_HALF, 0);
            LN(p->mn[i][j], C_HALF);
        }
    MAT(p->cv2, RFDETR_HIDDEN, C2F_CAT, 0);
    LN(p->cv2n, RFDETR_HIDDEN);
    LN(p->pln, RFDETR_HIDDEN);
    MAT(p->enc_out, RFDETR_HIDDEN, RFDETR_HIDDEN, 1);
    LN(p->enc_norm, RFDETR_HIDDEN);
    MAT(p->enc_cls, RFDETR_CLASSES, RFDETR_HIDDEN, 1);
    MAT(p->enc_bb[0], RFDETR_HIDDEN, RFDETR_HIDDEN, 1);
    MAT(p->enc_bb[1], RFDETR_HIDDEN, RFDETR_HIDDEN, 1);
    MAT(p->enc_bb[2], 4, RFDETR_HIDDEN, 1);
    MAT(p->rph[0], RFDETR_HIDDEN, 2 * RFDETR_HIDDEN, 1);
    MAT(p->rph[1], RFDETR_HIDDEN, RFDETR_HIDDEN, 1);
    for (int l = 0; l < NDL; l++) {
        dec_layer *D = &p->D[l];
        MAT(D->sa_qk, 2 * RFDETR_HIDDEN, RFDETR_HIDDEN, 1);
        MAT(D->sa_v, RFDETR_HIDDEN, RFDETR_HIDDEN, 1);
        MAT(D->sa_out, RFDETR_HIDDEN, RFDETR_HIDDEN, 1);
        MAT(D->off_aw, OFFAW, RFDETR_HIDDEN, 1);
        MAT(D->value, RFDETR_HIDDEN, RFDETR_HIDDEN, 1);
        MAT(D->out, RFDETR_HIDDEN, RFDETR_HIDDEN, 1);
        MAT(D->l1, DFF, RFDETR_HIDDEN, 1);
        MAT(D->l2, RFDETR_HIDDEN, DFF, 1);
        LN(D->n1, RFDETR_HIDDEN);
        LN(D->n2, RFDETR_HIDDEN);
        LN(D->n3, RFDETR_HIDDEN);
    }
    LN(p->dnorm, RFDETR_HIDDEN);
    MAT(p->cls_head, RFDETR_CLASSES, RFDETR_HIDDEN, 1);
    MAT(p->bb_head[0], RFDETR_HIDDEN, RFDETR_HIDDEN, 1);
    MAT(p->bb_head[1], RFDETR_HIDDEN, RFDETR_HIDDEN, 1);
    MAT(p->bb_head[2], 4, RFDETR_HIDDEN, 1);
    VEC(p->refpoint, RFDETR_QUERIES * 4L);
    VEC(p->query, RFDETR_QUERIES * (long)RFDETR_HIDDEN);
#undef MAT
#undef LN
#undef VEC
    return p->arena.oom || p->nmats > (int)(sizeof p->mats / sizeof p->mats[0]) ? -1 : 0;
}

/* Once the arena has an address: every packed matrix's header (its bias piece kept). */
static void bind_mats(rfdetr *p)
{
    for (int i = 0; i < p->nmats; i++) {
        tt_mat *m = p->mats[i].m;
        float *bias = m->bias;
        tt_mat_view(m, m->panels, p->dtype, p->isa, p->mats[i].n, p->mats[i].k);
        m->bias = bias;
    }
}

/* A program with its pool, scratch and weight layout, the weights not yet allocated. */
static rfdetr *create(rfdetr_precision precision, int nthreads, tt_isa isa)
{
    rfdetr *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->precision = precision;
    p->dtype = precision == RFDETR_BF16 ? TT_BF16 : TT_F32;
    p->isa = isa;
    p->pool = tt_pool_create(nthreads);
    if (!p->pool) {
        free(p);
        return NULL;
    }
    p->nthreads = tt_pool_threads(p->pool);
    tt_gemm_plan_default(&p->plan);
    for (int k = 0; k < RFDETR_HIDDEN / 2; k++)
        p->dim_t[k] = powf(SINE_TEMPERATURE, (float)(2 * (k / 2)) / (RFDETR_HIDDEN / 2));
    int ok = lay_out(p) == 0;
    tt_dtype dt = p->dtype;
#define BUF(b, n) ok &= ((b) = falloc((n), &p->scratch_bytes)) != NULL
    p->set = calloc((size_t)flat_count(), 1);
    ok &= p->set != NULL;
    const long T = RFDETR_TOKENS, Q = RFDETR_QUERIES, H = RFDETR_HIDDEN;
    BUF(p->im2col, T * 9 * C_HALF);
    BUF(p->x, (long)SEQ * RFDETR_DIM);
    BUF(p->xn, (long)SEQ * RFDETR_DIM);
    BUF(p->qkv, (long)SEQ * 3 * RFDETR_DIM);
    BUF(p->att, (long)SEQ * RFDETR_DIM);
    BUF(p->mlp, (long)SEQ * MLP);
    BUF(p->taps, T * 4 * RFDETR_DIM);
    BUF(p->y, T * C2F_CAT);
    BUF(p->t128, T * C_HALF);
    BUF(p->mem, T * H);
    BUF(p->enc_q, T * H);
    BUF(p->enc_t1, T * H);
    BUF(p->enc_t2, T * H);
    BUF(p->enc_cls_out, T * RFDETR_CLASSES);
    BUF(p->enc_box, T * 4);
    BUF(p->score, T);
    ok &= (p->order = calloc((size_t)T, sizeof(int))) != NULL;
    ok &= (p->forced = calloc((size_t)Q, sizeof(int))) != NULL;
    BUF(p->topk, Q);
    BUF(p->ref, Q * 4);
    BUF(p->sine, Q * 2 * H);
    BUF(p->qpos, Q * H);
    BUF(p->tgt, Q * H);
    BUF(p->tq, Q * H);
    BUF(p->sa, Q * H);
    BUF(p->ca, Q * H);
    BUF(p->hs, Q * H);
    BUF(p->t300, Q * H);
    BUF(p->dqkv, Q * 3 * H);
    BUF(p->val, T * H);
    BUF(p->offaw, Q * OFFAW);
    BUF(p->delta, Q * 4);
    /* the widest GEMM input: [1616][1536] */
    size_t gws = (tt_gemm_ws_bound(SEQ, MLP) + 63) & ~(size_t)63;
    p->gemm_ws = aligned_alloc(64, gws);
    ok &= p->gemm_ws != NULL;
    p->scratch_bytes += gws;
    p->attn_win = (tt_attn_shape){NWIN * NWIN, WTOK, HEADS, HD, p->nthreads, dt, isa};
    p->attn_glob = (tt_attn_shape){1, SEQ, HEADS, HD, p->nthreads, dt, isa};
    p->attn_dec = (tt_attn_shape){1, RFDETR_QUERIES, SA_HEADS, RFDETR_HIDDEN / SA_HEADS, p->nthreads, dt, isa};
    size_t aws = tt_attention_ws_bytes(&p->attn_win);
    if (tt_attention_ws_bytes(&p->attn_glob) > aws) aws = tt_attention_ws_bytes(&p->attn_glob);
    if (tt_attention_ws_bytes(&p->attn_dec) > aws) aws = tt_attention_ws_bytes(&p->attn_dec);
    p->attn_ws = aligned_alloc(64, (aws + 63) & ~(size_t)63);
    ok &= p->attn_ws != NULL;
    p->scratch_bytes += (aws + 63) & ~(size_t)63;
#undef BUF
    if (!ok) {
        rfdetr_free(p);
        return NULL;
    }
    return p;
}

rfdetr *rfdetr_new(rfdetr_precision precision, int nthreads, tt_isa isa)
{
    rfdetr *p = create(precision, nthreads, isa);
    if (p == NULL) return NULL;
    if (tt_arena_alloc(&p->arena) != 0) {
        rfdetr_free(p);
        return NULL;
    }
    bind_mats(p);
    return p;
}

rfdetr *rfdetr_new_packed(rfdetr_precision precision, int nthreads, tt_isa isa, const void *packed, size_t bytes,
                          uint64_t layout_id, char *err, size_t errlen)
{
    rfdetr *p = create(precision, nthreads, isa);
    if (p == NULL) {
        snprintf(err, errlen, "out of memory or cannot start threads");
        return NULL;
    }
    if (p->arena.layout_id != layout_id) {
        snprintf(err, errlen, "packed weights of layout %016llx, this build packs layout %016llx",
                 (unsigned long long)layout_id, (unsigned long long)p->arena.layout_id);
        rfdetr_free(p);
        return NULL;
    }
    if (tt_arena_attach(&p->arena, (void *)packed, bytes) != 0) {
        snprintf(err, errlen, "packed weights of %zu bytes, want %zu bytes 64-byte aligned", bytes,
                 (p->arena.bytes + 4095) & ~(size_t)4095);
        rfdetr_free(p);
        return NULL;
    }
    bind_mats(p);
    memset(p->set, 1, (size_t)flat_count());
    p->finished = 1; /* the resized position table is part of the packed weights */
    return p;
}

uint64_t rfdetr_layout_id_for(rfdetr_precision precision)
{
    rfdetr *p = calloc(1, sizeof *p);
    if (!p) return 0;
    p->precision = precision;
    p->dtype = precision == RFDETR_BF16 ? TT_BF16 : TT_F32;
    uint64_t id = lay_out(p) == 0 ? p->arena.layout_id : 0;
    tt_arena_free(&p->arena);
    free(p);
    return id;
}

const void *rfdetr_packed(const rfdetr *p, size_t *bytes)
{
    *bytes = p->arena.bytes;
    return p->arena.base;
}

uint64_t rfdetr_layout_id(const rfdetr *p) { return p->arena.layout_id; }

void rfdetr_free(rfdetr *p)
{
    if (!p) return;
    tt_pool_destroy(p->pool);
    tt_arena_free(&p->arena);
    float *bufs[] = {p->im2col, p->x, p->xn, p->qkv, p->att, p->mlp, p->taps, p->y, p->t128, p->mem, p->enc_q,
                     p->enc_t1, p->enc_t2, p->enc_cls_out, p->enc_box, p->score, p->topk, p->ref, p->sine, p->qpos,
                     p->tgt, p->tq, p->sa, p->ca, p->hs, p->t300, p->dqkv, p->val, p->offaw, p->delta};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(p->order);
    free(p->forced);
    free(p->gemm_ws);
    free(p->attn_ws);
    free(p->set);
    free(p);
}

int rfdetr_threads(const rfdetr *p) { return p->nthreads; }

size_t rfdetr_bytes(const rfdetr *p) { return p->arena.bytes + p->scratch_bytes; }

/* ---------- loading ---------- */

static void copy_vec(float *dst, const float *src, int n, const float *scale)
{
    for (int i = 0; i < n; i++) dst[i] = scale ? src[i] * scale[i] : src[i];
}

/* A 3x3 convolution weight [o][c][ky][kx] packed with K = (ky*3 + kx)*C + c,
 * so im2col copies whole channel vectors. */
static int set_conv3x3(tt_mat *m, const float *w)
{
    float *perm = malloc(sizeof(float) * C_HALF * 9 * C_HALF);
    if (!perm) return -1;
    for (int o = 0; o < C_HALF; o++)
        for (int c = 0; c < C_HALF; c++)
            for (int t = 0; t < 9; t++) perm[(long)o * 9 * C_HALF + t * C_HALF + c] = w[((long)o * C_HALF + c) * 9 + t];
    tt_mat_set_rows(m, 0, C_HALF, perm, 9 * C_HALF, 0, NULL);
    free(perm);
    return 0;
}

int rfdetr_set_weight(rfdetr *p, int i, const float *d, int rows, char *err, size_t errlen)
{
    wkind k;
    int l;
    if (flat_lookup(i, &k, &l) != 0) {
        snprintf(err, errlen, "weight index %d out of range", i);
        return -1;
    }
    if (!p->arena.owned) {
        char name[160];
        rfdetr_weight_name(i, name, sizeof name);
        snprintf(err, errlen, "%s: the program was made from packed weights, it takes no tensors", name);
        return -1;
    }
    if (wtable[k].min_rows && rows < wtable[k].min_rows) {
        snprintf(err, errlen, "%s: %d rows, want at least %d", wtable[k].fmt, rows, wtable[k].min_rows);
        return -1;
    }
    const int C = RFDETR_DIM, H = RFDETR_HIDDEN;
    bb_layer *L = l < NBL ? &p->L[l] : NULL;
    dec_layer *D = l < NDL ? &p->D[l] : NULL;
    switch (k) {
    case W_CLS: copy_vec(p->cls, d, C, NULL); break;
    case W_POS: copy_vec(p->pos_raw, d, POS_ROWS * C, NULL); break;
    case W_PATCH_W: tt_mat_set_rows(&p->patch, 0, C, d, 3 * PATCH * PATCH, 0, NULL); break;
    case W_PATCH_B: copy_vec(p->patch.bias, d, C, NULL); break;
    case W_N1W: copy_vec(L->n1.w, d, C, NULL); break;
    case W_N1B: copy_vec(L->n1.b, d, C, NULL); break;
    case W_QW: tt_mat_set_rows(&L->qkv, 0, C, d, C, 0, NULL); break;
    case W_QB: copy_vec(L->qkv.bias, d, C, NULL); break;
    case W_KW: tt_mat_set_rows(&L->qkv, C, C, d, C, 0, NULL); break;
    case W_KB: copy_vec(L->qkv.bias + C, d, C, NULL); break;
    case W_VW: tt_mat_set_rows(&L->qkv, 2 * C, C, d, C, 0, NULL); break;
    case W_VB: copy_vec(L->qkv.bias + 2 * C, d, C, NULL); break;
    /* LayerScale folded: lambda * (W x + b) = (lambda W) x + lambda b */
    case W_LS1: copy_vec(L->ls1, d, C, NULL); break;
    case W_DW: tt_mat_set_rows(&L->dense, 0, C, d, C, 0, L->ls1); break;
    case W_DB: copy_vec(L->dense.bias, d, C, L->ls1); break;
    case W_N2W: copy_vec(L->n2.w, d, C, NULL); break;
    case W_N2B: copy_vec(L->n2.b, d, C, NULL); break;
    case W_FC1W: tt_mat_set_rows(&L->fc1, 0, MLP, d, C, 0, NULL); break;
    case W_FC1B: copy_vec(L->fc1.bias, d, MLP, NULL); break;
    case W_LS2: copy_vec(L->ls2, d, C, NULL); break;
    case W_FC2W: tt_mat_set_rows(&L->fc2, 0, C, d, MLP, 0, L->ls2); break;
    case W_FC2B: copy_vec(L->fc2.bias, d, C, L->ls2); break;
    case W_BBLN_W: copy_vec(p->bb_ln.w, d, C, NULL); break;
    case W_BBLN_B: copy_vec(p->bb_ln.b, d, C, NULL); break;
    case W_CV1: tt_mat_set_rows(&p->cv1, 0, H, d, 4 * C, 0, NULL); break;
    case W_CV1_W: copy_vec(p->cv1n.w, d, H, NULL); break;
    case W_CV1_B: copy_vec(p->cv1n.b, d, H, NULL); break;
    case W_M1: if (set_conv3x3(&p->m[l][0], d)) goto oom; break;
    case W_M1_W: copy_vec(p->mn[l][0].w, d, C_HALF, NULL); break;
    case W_M1_B: copy_vec(p->mn[l][0].b, d, C_HALF, NULL); break;
    case W_M2: if (set_conv3x3(&p->m[l][1], d)) goto oom; break;
    case W_M2_W: copy_vec(p->mn[l][1].w, d, C_HALF, NULL); break;
    case W_M2_B: copy_vec(p->mn[l][1].b, d, C_HALF, NULL); break;
    case W_CV2: tt_mat_set_rows(&p->cv2, 0, H, d, C2F_CAT, 0, NULL); break;
    case W_CV2_W: copy_vec(p->cv2n.w, d, H, NULL); break;
    case W_CV2_B: copy_vec(p->cv2n.b, d, H, NULL); break;
    case W_PLN_W: copy_vec(p->pln.w, d, H, NULL); break;
    case W_PLN_B: copy_vec(p->pln.b, d, H, NULL); break;
    case W_ENC_OUT_W: tt_mat_set_rows(&p->enc_out, 0, H, d, H, 0, NULL); break;
    case W_ENC_OUT_B: copy_vec(p->enc_out.bias, d, H, NULL); break;
    case W_ENC_NORM_W: copy_vec(p->enc_norm.w, d, H, NULL); break;
    case W_ENC_NORM_B: copy_vec(p->enc_norm.b, d, H, NULL); break;
    case W_ENC_CLS_W: tt_mat_set_rows(&p->enc_cls, 0, RFDETR_CLASSES, d, H, 0, NULL); break;
    case W_ENC_CLS_B: copy_vec(p->enc_cls.bias, d, RFDETR_CLASSES, NULL); break;
    case W_ENC_BB0_W: tt_mat_set_rows(&p->enc_bb[0], 0, H, d, H, 0, NULL); break;
    case W_ENC_BB0_B: copy_vec(p->enc_bb[0].bias, d, H, NULL); break;
    case W_ENC_BB1_W: tt_mat_set_rows(&p->enc_bb[1], 0, H, d, H, 0, NULL); break;
    case W_ENC_BB1_B: copy_vec(p->enc_bb[1].bias, d, H, NULL); break;
    case W_ENC_BB2_W: tt_mat_set_rows(&p->enc_bb[2], 0, 4, d, H, 0, NULL); break;
    case W_ENC_BB2_B: copy_vec(p->enc_bb[2].bias, d, 4, NULL); break;
    case W_RPH0_W: tt_mat_set_rows(&p->rph[0], 0, H, d, 2 * H, 0, NULL); break;
    case W_RPH0_B: copy_vec(p->rph[0].bias, d, H, NULL); break;
    case W_RPH1_W: tt_mat_set_rows(&p->rph[1], 0, H, d, H, 0, NULL); break;
    case W_RPH1_B: copy_vec(p->rph[1].bias, d, H, NULL); break;
    case W_SA_IN_W:
        tt_mat_set_rows(&D->sa_qk, 0, 2 * H, d, H, 0, NULL);
        tt_mat_set_rows(&D->sa_v, 0, H, d + 2L * H * H, H, 0, NULL);
        break;
    case W_SA_IN_B:
        copy_vec(D->sa_qk.bias, d, 2 * H, NULL);
        copy_vec(D->sa_v.bias, d + 2 * H, H, NULL);
        break;
    case W_SA_OUT_W: tt_mat_set_rows(&D->sa_out, 0, H, d, H, 0, NULL); break;
    case W_SA_OUT_B: copy_vec(D->sa_out.bias, d, H, NULL); break;
    case W_DN1_W: copy_vec(D->n1.w, d, H, NULL); break;
    case W_DN1_B: copy_vec(D->n1.b, d, H, NULL); break;
    case W_OFF_W: tt_mat_set_rows(&D->off_aw, 0, 64, d, H, 0, NULL); break;
    case W_OFF_B: copy_vec(D->off_aw.bias, d, 64, NULL); break;
    case W_AW_W: tt_mat_set_rows(&D->off_aw, 64, 32, d, H, 0, NULL); break;
    case W_AW_B: copy_vec(D->off_aw.bias + 64, d, 32, NULL); break;
    case W_VAL_W: tt_mat_set_rows(&D->value, 0, H, d, H, 0, NULL); break;
    case W_VAL_B: copy_vec(D->value.bias, d, H, NULL); break;
    case W_OUT_W: tt_mat_set_rows(&D->out, 0, H, d, H, 0, NULL); break;
    case W_OUT_B: copy_vec(D->out.bias, d, H, NULL); break;
    case W_DN2_W: copy_vec(D->n2.w, d, H, NULL); break;
    case W_DN2_B: copy_vec(D->n2.b, d, H, NULL); break;
    case W_L1_W: tt_mat_set_rows(&D->l1, 0, DFF, d, H, 0, NULL); break;
    case W_L1_B: copy_vec(D->l1.bias, d, DFF, NULL); break;
    case W_L2_W: tt_mat_set_rows(&D->l2, 0, H, d, DFF, 0, NULL); break;
    case W_L2_B: copy_vec(D->l2.bias, d, H, NULL); break;
    case W_DN3_W: copy_vec(D->n3.w, d, H, NULL); break;
    case W_DN3_B: copy_vec(D->n3.b, d, H, NULL); break;
    case W_DNORM_W: copy_vec(p->dnorm.w, d, H, NULL); break;
    case W_DNORM_B: copy_vec(p->dnorm.b, d, H, NULL); break;
    case W_CLS_W: tt_mat_set_rows(&p->cls_head, 0, RFDETR_CLASSES, d, H, 0, NULL); break;
    case W_CLS_B: copy_vec(p->cls_head.bias, d, RFDETR_CLASSES, NULL); break;
    case W_BB0_W: tt_mat_set_rows(&p->bb_head[0], 0, H, d, H, 0, NULL); break;
    case W_BB0_B: copy_vec(p->bb_head[0].bias, d, H, NULL); break;
    case W_BB1_W: tt_mat_set_rows(&p->bb_head[1], 0, H, d, H, 0, NULL); break;
    case W_BB1_B: copy_vec(p->bb_head[1].bias, d, H, NULL); break;
    case W_BB2_W: tt_mat_set_rows(&p->bb_head[2], 0, 4, d, H, 0, NULL); break;
    case W_BB2_B: copy_vec(p->bb_head[2].bias, d, 4, NULL); break;
    case W_REFPOINT: copy_vec(p->refpoint, d, RFDETR_QUERIES * 4, NULL); break;
    case W_QUERY: copy_vec(p->query, d, RFDETR_QUERIES * H, NULL); break;
    case W_KINDS: break;
    }
    p->set[i] = 1;
    p->finished = 0;
    return 0;
oom:
    snprintf(err, errlen, "out of memory packing weight %d", i);
    return -1;
}

static int flat_index(wkind kind, int layer)
{
    int i = 0;
    for (int k = 0; k < (int)kind; k++) i += wtable[k].count;
    return i + layer;
}

/* The LayerScale a folded weight needs already set (see rfdetr_set_weight), or -1. */
static int fold_source(wkind k, int layer)
{
    switch (k) {
    case W_DW:
    case W_DB: return flat_index(W_LS1, layer);
    case W_FC2W:
    case W_FC2B: return flat_index(W_LS2, layer);
    default: return -1;
    }
}

int rfdetr_set(rfdetr *p, const char *name, int dtype, const int64_t *shape, int ndim, const void *data,
               char *err, size_t errlen)
{
    char want[160];
    int n = flat_count(), i = 0;
    for (; i < n; i++) {
        rfdetr_weight_name(i, want, sizeof want);
        if (strcmp(want, name) == 0) break;
    }
    if (i == n) return 1;
    wkind k = W_KINDS;
    int layer = 0;
    flat_lookup(i, &k, &layer);
    const wdesc *w = &wtable[k];
    int ok = ndim == w->rank;
    long count = 1;
    for (int d = 0; ok && d < ndim; d++) {
        ok = d == 0 && w->min_rows ? shape[0] >= w->min_rows : shape[d] == w->dims[d];
        count *= (long)shape[d];
    }
    if (!ok) {
        char got[96] = "", exp[96] = "";
        for (int d = 0; d < ndim && d < 4; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? " " : "", (long long)shape[d]);
        for (int d = 0; d < w->rank; d++)
            snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%s%d", d ? " " : "", d == 0 && w->min_rows ? ">=" : "",
                     d == 0 && w->min_rows ? w->min_rows : w->dims[d]);
        snprintf(err, errlen, "%s: shape [%s], want [%s]", name, got, exp);
        return -1;
    }
    if (dtype != TT_F32 && dtype != TT_BF16) {
        snprintf(err, errlen, "%s: dtype %d is neither F32 nor BF16", name, dtype);
        return -1;
    }
    int src = fold_source(k, layer);
    if (src >= 0 && !p->set[src]) {
        char ls[160];
        rfdetr_weight_name(src, ls, sizeof ls);
        snprintf(err, errlen, "%s: set %s first (it is folded into this weight)", name, ls);
        return -1;
    }
    if (dtype == TT_F32 && ((uintptr_t)data & 3) == 0)
        return rfdetr_set_weight(p, i, data, (int)shape[0], err, errlen);
    /* BF16, or F32 bytes at an address a float may not be read from: widen into an aligned copy */
    float *f = malloc(sizeof(float) * (size_t)count);
    if (f == NULL) {
        snprintf(err, errlen, "%s: out of memory", name);
        return -1;
    }
    if (dtype == TT_BF16) {
        const uint16_t *h = data;
        for (long j = 0; j < count; j++) f[j] = tt_bf16_to_f32(h[j]);
    } else {
        memcpy(f, data, sizeof(float) * (size_t)count);
    }
    int rc = rfdetr_set_weight(p, i, f, (int)shape[0], err, errlen);
    free(f);
    return rc;
}

/* PIL / PyTorch antialiased bicubic kernel, a = -0.5. */
static double cubic_aa(double x)
{
    const double a = -0.5;
    x = fabs(x);
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

/* Resample weights of one axis from `in` to `out` samples (upsampling, so the
 * support is 2): w[o][j] for taps j in [lo[o], hi[o]). */
static void aa_weights(int in, int out, int *lo, int *hi, double w[][8])
{
    double scale = (double)in / out;
    double support = 2.0 * (scale >= 1.0 ? scale : 1.0);
    double inv = scale >= 1.0 ? 1.0 / scale : 1.0;
    for (int o = 0; o < out; o++) {
        double center = scale * (o + 0.5);
        int a = (int)(center - support + 0.5), b = (int)(center + support + 0.5);
        if (a < 0) a = 0;
        if (b > in) b = in;
        double sum = 0.0;
        for (int j = a; j < b; j++) sum += (w[o][j - a] = cubic_aa((j - center + 0.5) * inv));
        for (int j = a; j < b; j++) w[o][j - a] /= sum;
        lo[o] = a;
        hi[o] = b;
    }
}

/* Position table: CLS row as is, the 37x37 patch grid resized to 40x40
 * (width pass, then height pass, like PyTorch's separable AA kernel). */
static void resize_pos(rfdetr *p)
{
    const int C = RFDETR_DIM;
    int lo[GRID], hi[GRID];
    double w[GRID][8];
    aa_weights(POS_SIDE, GRID, lo, hi, w);
    float *tmp = p->taps; /* [37][40][C], free scratch at load */
    const float *src = p->pos_raw + C;
    for (int y = 0; y < POS_SIDE; y++)
        for (int x = 0; x < GRID; x++)
            for (int c = 0; c < C; c++) {
                double s = 0.0;
                for (int j = lo[x]; j < hi[x]; j++) s += w[x][j - lo[x]] * src[((long)y * POS_SIDE + j) * C + c];
                tmp[((long)y * GRID + x) * C + c] = (float)s;
            }
    memcpy(p->pos, p->pos_raw, sizeof(float) * C);
    for (int y = 0; y < GRID; y++)
        for (int x = 0; x < GRID; x++)
            for (int c = 0; c < C; c++) {
                double s = 0.0;
                for (int j = lo[y]; j < hi[y]; j++) s += w[y][j - lo[y]] * tmp[((long)j * GRID + x) * C + c];
                p->pos[(1L + y * GRID + x) * C + c] = (float)s;
            }
}

int rfdetr_finish(rfdetr *p, char *err, size_t errlen)
{
    if (!p->arena.owned) return 0; /* packed weights: finished when made */
    int n = flat_count();
    for (int i = 0; i < n; i++) {
        if (!p->set[i]) {
            char name[160];
            rfdetr_weight_name(i, name, sizeof name);
            snprintf(err, errlen, "weight %s was not set", name);
            return -1;
        }
    }
    resize_pos(p);
    p->finished = 1;
    return 0;
}

/* ---------- forward ---------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A GEMM whose time counts as "backbone GEMM" in the timing report. */
static void bb_gemm(rfdetr *p, const tt_mat *w, const float *a, long lda, float *c, long ldc, int m, int flags)
{
    double t0 = now_s();
    tt_gemm(p->pool, &p->plan, w, a, lda, c, ldc, m, flags, p->gemm_ws);
    p->timing.backbone_gemm += now_s() - t0;
    p->timing.backbone_gemm_flops += 2.0 * m * w->n * w->k;
    p->timing.flops += 2.0 * m * w->n * w->k;
}

static void gemm(rfdetr *p, const tt_mat *w, const float *a, long lda, float *c, long ldc, int m, int flags)
{
    tt_gemm(p->pool, &p->plan, w, a, lda, c, ldc, m, flags, p->gemm_ws);
    p->timing.flops += 2.0 * m * w->n * w->k;
}

static void attention(rfdetr *p, const tt_attn_shape *sh, const float *q, long ld, float *out, long ldo, float scale)
{
    tt_attention(p->pool, sh, q, q + sh->heads * sh->hd, q + 2 * sh->heads * sh->hd, ld, out, ldo, scale, p->attn_ws);
    p->timing.flops += 4.0 * sh->batch * sh->heads * (double)sh->seq * sh->seq * sh->hd;
}

/* Generic row-parallel job: fn(p, row0, row1). */
typedef struct {
    rfdetr *p;
    int rows, per;
    void (*fn)(rfdetr *, int, int, const void *);
    const void *ctx;
} rows_job;

static void rows_task(void *arg, int task, int thread)
{
    (void)thread;
    rows_job *j = arg;
    int r0 = task * j->per, r1 = r0 + j->per < j->rows ? r0 + j->per : j->rows;
    j->fn(j->p, r0, r1, j->ctx);
}

static void parallel_rows(rfdetr *p, int rows, int per, void (*fn)(rfdetr *, int, int, const void *), const void *ctx)
{
    rows_job j = {p, rows, per, fn, ctx};
    tt_pool_run(p->pool, (rows + per - 1) / per, rows_task, &j);
}

/* im2col of the 14x14/14 patch embedding: row t = y*40 + x holds
 * pixels[c][y*14 + ky][x*14 + kx] at column c*196 + ky*14 + kx. */
static void patch_im2col(rfdetr *p, int r0, int r1, const void *ctx)
{
    const float *pix = ctx;
    const int K = 3 * PATCH * PATCH;
    for (int t = r0; t < r1; t++) {
        int y = t / GRID, x = t % GRID;
        float *dst = p->im2col + (long)t * K;
        for (int c = 0; c < 3; c++)
            for (int ky = 0; ky < PATCH; ky++)
                memcpy(dst + c * PATCH * PATCH + ky * PATCH,
                       pix + ((long)c * RFDETR_RES + y * PATCH + ky) * RFDETR_RES + x * PATCH, sizeof(float) * PATCH);
    }
}

/* Windowed sequence row for patch token t (y*40 + x). */
static inline int win_row(int t)
{
    int y = t / GRID, x = t % GRID;
    return ((y / WIN) * NWIN + x / WIN) * WTOK + 1 + (y % WIN) * WIN + x % WIN;
}

/* x[window rows] = patch embedding + position; CLS + pos[0] in every window. */
static void embed_rows(rfdetr *p, int r0, int r1, const void *ctx)
{
    (void)ctx;
    const int C = RFDETR_DIM;
    for (int t = r0; t < r1; t++) {
        float *dst = p->x + (long)win_row(t) * C;
        const float *e = p->att + (long)t * C, *pos = p->pos + (1L + t) * C;
        for (int c = 0; c < C; c++) dst[c] = e[c] + pos[c];
    }
    if (r0 == 0)
        for (int w = 0; w < NWIN * NWIN; w++)
            for (int c = 0; c < C; c++) p->x[(long)w * WTOK * C + c] = p->cls[c] + p->pos[c];
}

/* Final backbone LayerNorm of the patch tokens into tap column block `tap`. */
static void tap_rows(rfdetr *p, int r0, int r1, const void *ctx)
{
    int tap = *(const int *)ctx;
    const int C = RFDETR_DIM;
    for (int t = r0; t < r1; t++)
        tt_layernorm_rows(p->isa, p->x + (long)win_row(t) * C, C, p->taps + (long)t * 4 * C + tap * C, C, 1, C,
                          p->bb_ln.w, p->bb_ln.b, BB_LN_EPS);
}

/* BACKBONE: DINOv2-small with windows, pixels [3][560][560] -> taps [1600][4 x 384].
 *   x [SEQ = 16 windows x (1 CLS + 100 patches)][384] = patch_embed(pixels) + pos (CLS + pos[0] per window)
 *   11 x { x += LS1 . dense(attn(LN1 x)); x += LS2 . fc2(gelu(fc1(LN2 x))) }
 *        (attention within each window, over the whole sequence in layers 2, 5, 8; LayerScale is folded
 *         into dense and fc2 at load)
 *   after layers 1, 4, 7, 10: tap i = LN_final(x) of the 1600 patch tokens, in image order */
static void backbone(rfdetr *p, const float *pixels)
{
    const int C = RFDETR_DIM;
    parallel_rows(p, RFDETR_TOKENS, 64, patch_im2col, pixels);
    bb_gemm(p, &p->patch, p->im2col, 3 * PATCH * PATCH, p->att, C, RFDETR_TOKENS, 0);
    parallel_rows(p, RFDETR_TOKENS, 64, embed_rows, NULL);
    int tap = 0;
    for (int l = 0; l < NBL; l++) {
        bb_layer *L = &p->L[l];
        tt_layernorm(p->pool, p->isa, p->x, C, p->xn, C, SEQ, C, L->n1.w, L->n1.b, BB_LN_EPS);
        bb_gemm(p, &L->qkv, p->xn, C, p->qkv, 3 * C, SEQ, 0);
        const tt_attn_shape *sh = is_global(l) ? &p->attn_glob : &p->attn_win;
        attention(p, sh, p->qkv, 3 * C, p->att, C, BB_ATT_SCALE);
        bb_gemm(p, &L->dense, p->att, C, p->x, C, SEQ, TT_GEMM_ACCUM);
        tt_layernorm(p->pool, p->isa, p->x, C, p->xn, C, SEQ, C, L->n2.w, L->n2.b, BB_LN_EPS);
        bb_gemm(p, &L->fc1, p->xn, C, p->mlp, MLP, SEQ, TT_ACT_GELU);
        bb_gemm(p, &L->fc2, p->mlp, MLP, p->x, C, SEQ, TT_GEMM_ACCUM);
        if (tap < 4 && l == tap_layers[tap]) {
            parallel_rows(p, RFDETR_TOKENS, 64, tap_rows, &tap);
            tap++;
        }
    }
}

/* im2col of a 3x3 / pad 1 convolution over a [40][40][128] map with row
 * stride lds: column (ky*3 + kx)*128 + c, zero outside the map. */
typedef struct {
    const float *src;
    long lds;
} conv_src;

static void conv_im2col(rfdetr *p, int r0, int r1, const void *ctx)
{
    const conv_src *cs = ctx;
    for (int t = r0; t < r1; t++) {
        int y = t / GRID, x = t % GRID;
        float *dst = p->im2col + (long)t * 9 * C_HALF;
        for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
                int yy = y + ky - 1, xx = x + kx - 1;
                float *d = dst + (ky * 3 + kx) * C_HALF;
                if (yy < 0 || yy >= GRID || xx < 0 || xx >= GRID) memset(d, 0, sizeof(float) * C_HALF);
                else memcpy(d, cs->src + (long)(yy * GRID + xx) * cs->lds, sizeof(float) * C_HALF);
            }
    }
}

/* ConvX tail: channel LayerNorm then SiLU, in place on n channels. */
typedef struct {
    float *buf;
    long ld;
    int n;
    const ln_p *ln;
} lnsilu_ctx;

static void ln_silu_rows(rfdetr *p, int r0, int r1, const void *ctx)
{
    const lnsilu_ctx *c = ctx;
    for (int t = r0; t < r1; t++) {
        float *row = c->buf + (long)t * c->ld;
        tt_layernorm_rows(p->isa, row, c->ld, row, c->ld, 1, c->n, c->ln->w, c->ln->b, BB_LN_EPS);
        tt_act_inplace(p->isa, TT_ACT_SILU, row, c->n);
    }
}

static void ln_silu(rfdetr *p, float *buf, long ld, int n, const ln_p *ln)
{
    lnsilu_ctx c = {buf, ld, n, ln};
    parallel_rows(p, RFDETR_TOKENS, 64, ln_silu_rows, &c);
}

/* PROJECTOR: a C2f block at the single P4 scale, taps [1600][1536] -> memory [1600][256].
 *   y = ConvX_1x1(taps) [1600][256], split into y0 | y1 (128 each)
 *   3 x { y_{b+2} = ConvX_3x3(ConvX_3x3(y_{b+1})) }       (bottlenecks without shortcut)
 *   memory = LN(ConvX_1x1(y0 | y1 | y2 | y3 | y4))       ConvX = conv, channel LayerNorm, SiLU */
static void projector(rfdetr *p)
{
    const int T = RFDETR_TOKENS, H = RFDETR_HIDDEN;
    gemm(p, &p->cv1, p->taps, 4 * RFDETR_DIM, p->y, C2F_CAT, T, 0);
    ln_silu(p, p->y, C2F_CAT, H, &p->cv1n);
    for (int b = 0; b < 3; b++) {
        conv_src in = {p->y + C_HALF * (1 + b), C2F_CAT};
        parallel_rows(p, T, 64, conv_im2col, &in);
        gemm(p, &p->m[b][0], p->im2col, 9 * C_HALF, p->t128, C_HALF, T, 0);
        ln_silu(p, p->t128, C_HALF, C_HALF, &p->mn[b][0]);
        conv_src mid = {p->t128, C_HALF};
        parallel_rows(p, T, 64, conv_im2col, &mid);
        float *outp = p->y + C_HALF * (2 + b);
        gemm(p, &p->m[b][1], p->im2col, 9 * C_HALF, outp, C2F_CAT, T, 0);
        ln_silu(p, outp, C2F_CAT, C_HALF, &p->mn[b][1]);
    }
    gemm(p, &p->cv2, p->y, C2F_CAT, p->mem, H, T, 0);
    ln_silu(p, p->mem, H, H, &p->cv2n);
    tt_layernorm(p->pool, p->isa, p->mem, H, p->mem, H, T, H, p->pln.w, p->pln.b, BB_LN_EPS);
}

/* Indices of the k largest scores, best first (ties: lower index first). */
static void top_k(const float *score, int n, int k, int *idx)
{
    /* a min-heap of the best k seen so far, ordered by (score, -index) */
#define WORSE(a, b) (score[a] < score[b] || (score[a] == score[b] && (a) > (b)))
    int size = 0;
    for (int i = 0; i < n; i++) {
        if (size < k) {
            int c = size++;
            idx[c] = i;
            while (c > 0 && WORSE(idx[c], idx[(c - 1) / 2])) {
                int t = idx[c]; idx[c] = idx[(c - 1) / 2]; idx[(c - 1) / 2] = t;
                c = (c - 1) / 2;
            }
        } else if (WORSE(idx[0], i)) {
            idx[0] = i;
            for (int c = 0;;) {
                int l = 2 * c + 1, r = l + 1, m = c;
                if (l < size && WORSE(idx[l], idx[m])) m = l;
                if (r < size && WORSE(idx[r], idx[m])) m = r;
                if (m == c) break;
                int t = idx[c]; idx[c] = idx[m]; idx[m] = t;
                c = m;
            }
        }
    }
    /* heap sort: repeatedly move the worst to the end */
    for (int end = size - 1; end > 0; end--) {
        int t = idx[0]; idx[0] = idx[end]; idx[end] = t;
        for (int c = 0;;) {
            int l = 2 * c + 1, r = l + 1, m = c;
            if (l < end && WORSE(idx[l], idx[m])) m = l;
            if (r < end && WORSE(idx[r], idx[m])) m = r;
            if (m == c) break;
            int t2 = idx[c]; idx[c] = idx[m]; idx[m] = t2;
            c = m;
        }
    }
#undef WORSE
}

/* SELECTION (two-stage): memory [1600][256] -> 300 queries.
 *   q = LN(enc_out(memory)); score[t] = max_c enc_cls(q)[t][c]; delta = enc_bbox_mlp(q) [1600][4]
 *   proposal of token t = (cell center, PROPOSAL_WH): ts = (delta.xy * wh + xy, exp(delta.wh) * wh)
 *   the top 300 tokens by score (ties: lower index): ref = (r.xy * ts.wh + ts.xy, exp(r.wh) * ts.wh)
 *   with r = refpoint_embed; target = query_feat */
static void select_queries(rfdetr *p)
{
    const int T = RFDETR_TOKENS, H = RFDETR_HIDDEN, Q = RFDETR_QUERIES;
    gemm(p, &p->enc_out, p->mem, H, p->enc_q, H, T, 0);
    tt_layernorm(p->pool, p->isa, p->enc_q, H, p->enc_q, H, T, H, p->enc_norm.w, p->enc_norm.b, DEC_LN_EPS);
    gemm(p, &p->enc_cls, p->enc_q, H, p->enc_cls_out, RFDETR_CLASSES, T, 0);
    gemm(p, &p->enc_bb[0], p->enc_q, H, p->enc_t1, H, T, TT_ACT_RELU);
    gemm(p, &p->enc_bb[1], p->enc_t1, H, p->enc_t2, H, T, TT_ACT_RELU);
    gemm(p, &p->enc_bb[2], p->enc_t2, H, p->enc_box, 4, T, 0);
    for (int t = 0; t < T; t++) {
        const float *row = p->enc_cls_out + (long)t * RFDETR_CLASSES;
        float m = row[0];
        for (int c = 1; c < RFDETR_CLASSES; c++) m = row[c] > m ? row[c] : m;
        p->score[t] = m;
    }
    if (p->use_forced) memcpy(p->order, p->forced, sizeof(int) * Q);
    else top_k(p->score, T, Q, p->order);
    for (int q = 0; q < Q; q++) {
        int t = p->order[q];
        float prop[4] = {((t % GRID) + 0.5f) / GRID, ((t / GRID) + 0.5f) / GRID, PROPOSAL_WH, PROPOSAL_WH};
        const float *d = p->enc_box + (long)t * 4;
        float ts[4] = {d[0] * prop[2] + prop[0], d[1] * prop[3] + prop[1], expf(d[2]) * prop[2], expf(d[3]) * prop[3]};
        const float *r0 = p->refpoint + (long)q * 4;
        float *ref = p->ref + (long)q * 4;
        ref[0] = r0[0] * ts[2] + ts[0];
        ref[1] = r0[1] * ts[3] + ts[1];
        ref[2] = expf(r0[2]) * ts[2];
        ref[3] = expf(r0[3]) * ts[3];
        p->topk[q] = (float)t;
    }
    memcpy(p->tgt, p->query, sizeof(float) * Q * H);
}

/* Sine embedding of the reference boxes, coordinates in the order (y, x, w, h),
 * 128 values each: [sin(e0), cos(e1), sin(e2), ...], e_k = c*2pi / dim_t[k],
 * dim_t[k] = 10000^(2*(k/2)/128) (a table made at load). */
static void sine_rows(rfdetr *p, int r0, int r1, const void *ctx)
{
    (void)ctx;
    static const int coord[4] = {1, 0, 2, 3};
    const int NF = RFDETR_HIDDEN / 2;
    for (int q = r0; q < r1; q++)
        for (int c = 0; c < 4; c++) {
            float v = p->ref[q * 4 + coord[c]] * TWO_PI;
            float *dst = p->sine + (long)q * 2 * RFDETR_HIDDEN + c * NF;
            for (int k = 0; k < NF; k++) {
                float e = v / p->dim_t[k];
                dst[k] = k % 2 == 0 ? sinf(e) : cosf(e);
            }
        }
}

/* Deformable cross-attention sampling for queries [r0, r1): per head the
 * softmax over the 2 points weights a bilinear sample (zero padding,
 * align_corners False) of that head's 40x40 value map. */
static void deform_rows(rfdetr *p, int r0, int r1, const void *ctx)
{
    (void)ctx;
    const int H = RFDETR_HIDDEN, HD16 = H / CA_HEADS;
    for (int q = r0; q < r1; q++) {
        const float *oa = p->offaw + (long)q * OFFAW, *ref = p->ref + (long)q * 4;
        float *out = p->ca + (long)q * H;
        memset(out, 0, sizeof(float) * H);
        for (int h = 0; h < CA_HEADS; h++) {
            float l0 = oa[64 + h * 2], l1 = oa[64 + h * 2 + 1];
            float mx = l0 > l1 ? l0 : l1;
            float e0 = expf(l0 - mx), e1 = expf(l1 - mx);
            float aw[2] = {e0 / (e0 + e1), e1 / (e0 + e1)};
            for (int pt = 0; pt < CA_POINTS; pt++) {
                float ox = oa[h * 4 + pt * 2], oy = oa[h * 4 + pt * 2 + 1];
                float lx = ref[0] + ox / CA_POINTS * ref[2] * 0.5f;
                float ly = ref[1] + oy / CA_POINTS * ref[3] * 0.5f;
                float px = lx * GRID - 0.5f, py = ly * GRID - 0.5f;
                /* Far outside the map every corner reads zero padding; clamping
                 * keeps the float -> int conversion defined (NaN included). */
                px = fminf(fmaxf(px, -2.0f), GRID + 1.0f);
                py = fminf(fmaxf(py, -2.0f), GRID + 1.0f);
                float fx = floorf(px), fy = floorf(py);
                int x0 = (int)fx, y0 = (int)fy;
                float wx1 = px - fx, wy1 = py - fy, wx0 = 1.0f - wx1, wy0 = 1.0f - wy1;
                const int xs[2] = {x0, x0 + 1}, ys[2] = {y0, y0 + 1};
                const float wxs[2] = {wx0, wx1}, wys[2] = {wy0, wy1};
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 2; b++) {
                        int yy = ys[a], xx = xs[b];
                        if (yy < 0 || yy >= GRID || xx < 0 || xx >= GRID) continue;
                        float w = aw[pt] * wys[a] * wxs[b];
                        const float *v = p->val + (long)(yy * GRID + xx) * H + h * HD16;
                        for (int d = 0; d < HD16; d++) out[h * HD16 + d] += w * v[d];
                    }
            }
        }
    }
}

static void add_rows(float *dst, const float *a, const float *b, long n)
{
    for (long i = 0; i < n; i++) dst[i] = a[i] + b[i];
}

/* DECODER: 3 layers over the 300 queries, tgt [300][256], memory [1600][256].
 *   qpos = MLP(sine(ref)) [300][256]
 *   per layer: tgt = LN1(tgt + out(attn(q = k = tgt + qpos, v = tgt)))      8 heads of 32
 *              tgt = LN2(tgt + out(deform(tgt + qpos, value(memory), ref)))  16 heads, 2 points
 *              tgt = LN3(tgt + l2(relu(l1(tgt))))
 *   hs = LN(tgt). The reference boxes stay those of the selection (no per-layer refinement). */
static void decoder(rfdetr *p)
{
    const int Q = RFDETR_QUERIES, H = RFDETR_HIDDEN, T = RFDETR_TOKENS;
    parallel_rows(p, Q, 32, sine_rows, NULL);
    gemm(p, &p->rph[0], p->sine, 2 * H, p->t300, H, Q, TT_ACT_RELU);
    gemm(p, &p->rph[1], p->t300, H, p->qpos, H, Q, 0);
    for (int l = 0; l < NDL; l++) {
        dec_layer *D = &p->D[l];
        /* self-attention: q = k = tgt + pos, v = tgt */
        add_rows(p->tq, p->tgt, p->qpos, (long)Q * H);
        gemm(p, &D->sa_qk, p->tq, H, p->dqkv, 3 * H, Q, 0);
        gemm(p, &D->sa_v, p->tgt, H, p->dqkv + 2 * H, 3 * H, Q, 0);
        attention(p, &p->attn_dec, p->dqkv, 3 * H, p->sa, H, 1.0f / sqrtf((float)(H / SA_HEADS)));
        gemm(p, &D->sa_out, p->sa, H, p->tgt, H, Q, TT_GEMM_ACCUM);
        tt_layernorm(p->pool, p->isa, p->tgt, H, p->tgt, H, Q, H, D->n1.w, D->n1.b, DEC_LN_EPS);
        /* deformable cross-attention into the memory */
        add_rows(p->tq, p->tgt, p->qpos, (long)Q * H);
        gemm(p, &D->value, p->mem, H, p->val, H, T, 0);
        gemm(p, &D->off_aw, p->tq, H, p->offaw, OFFAW, Q, 0);
        parallel_rows(p, Q, 16, deform_rows, NULL);
        gemm(p, &D->out, p->ca, H, p->tgt, H, Q, TT_GEMM_ACCUM);
        tt_layernorm(p->pool, p->isa, p->tgt, H, p->tgt, H, Q, H, D->n2.w, D->n2.b, DEC_LN_EPS);
        /* FFN */
        gemm(p, &D->l1, p->tgt, H, p->mlp, DFF, Q, TT_ACT_RELU);
        gemm(p, &D->l2, p->mlp, DFF, p->tgt, H, Q, TT_GEMM_ACCUM);
        tt_layernorm(p->pool, p->isa, p->tgt, H, p->tgt, H, Q, H, D->n3.w, D->n3.b, DEC_LN_EPS);
    }
    tt_layernorm(p->pool, p->isa, p->tgt, H, p->hs, H, Q, H, p->dnorm.w, p->dnorm.b, DEC_LN_EPS);
}

/* HEADS: hs [300][256] -> logits [300][91] = cls(hs); boxes [300][4] from delta = bbox_mlp(hs):
 *   box = (delta.xy * ref.wh + ref.xy, exp(delta.wh) * ref.wh)      (normalized cx, cy, w, h) */
static void heads(rfdetr *p, float *logits, float *boxes)
{
    const int Q = RFDETR_QUERIES, H = RFDETR_HIDDEN;
    gemm(p, &p->cls_head, p->hs, H, logits, RFDETR_CLASSES, Q, 0);
    gemm(p, &p->bb_head[0], p->hs, H, p->t300, H, Q, TT_ACT_RELU);
    gemm(p, &p->bb_head[1], p->t300, H, p->sa, H, Q, TT_ACT_RELU);
    gemm(p, &p->bb_head[2], p->sa, H, p->delta, 4, Q, 0);
    for (int q = 0; q < Q; q++) {
        const float *d = p->delta + q * 4, *r = p->ref + q * 4;
        float *b = boxes + q * 4;
        b[0] = d[0] * r[2] + r[0];
        b[1] = d[1] * r[3] + r[1];
        b[2] = expf(d[2]) * r[2];
        b[3] = expf(d[3]) * r[3];
    }
}

int rfdetr_forward(rfdetr *p, const float *pixels, float *logits, float *boxes)
{
    if (!p->finished) return -1;
    memset(&p->timing, 0, sizeof p->timing);
    double t0 = now_s();
    backbone(p, pixels);
    double t1 = now_s();
    projector(p);
    double t2 = now_s();
    select_queries(p);
    decoder(p);
    heads(p, logits, boxes);
    double t3 = now_s();
    p->timing.backbone = t1 - t0;
    p->timing.projector = t2 - t1;
    p->timing.decoder = t3 - t2;
    p->timing.total = t3 - t0;
    return 0;
}

int rfdetr_force_selection(rfdetr *p, const int *tokens)
{
    if (tokens == NULL) {
        p->use_forced = 0;
        return 0;
    }
    for (int q = 0; q < RFDETR_QUERIES; q++)
        if (tokens[q] < 0 || tokens[q] >= RFDETR_TOKENS) return -1;
    memcpy(p->forced, tokens, sizeof(int) * RFDETR_QUERIES);
    p->use_forced = 1;
    return 0;
}

void rfdetr_last_timing(const rfdetr *p, rfdetr_timing *t) { *t = p->timing; }

/* ---------- GEMM plan ---------- */

int rfdetr_plan(const rfdetr *p, char *buf, size_t len) { return tt_gemm_plan_format(&p->plan, buf, len); }

int rfdetr_set_plan(rfdetr *p, const char *plan, char *err, size_t errlen)
{
    tt_gemm_plan pl;
    if (tt_gemm_plan_parse(&pl, plan, err, errlen) != 0) return -1;
    p->plan = pl;
    return 0;
}

/* Two classes: m <= 300 (the decoder and heads over the 300 queries), tuned on the first decoder
 * layer's FFN; every larger m (the backbone's 1616 rows, the projector's 1600), tuned on the first
 * backbone layer's MLP. Both GEMMs of a class whole: RF-DETR's are small enough. */
int rfdetr_tune(rfdetr *p, int reps)
{
    if (reps < 1) reps = 3;
    const int C = RFDETR_DIM, H = RFDETR_HIDDEN;
    tt_gemm_plan plan = {.n = 2, .max_rows = {RFDETR_QUERIES}};
    plan.b[0] = plan.b[1] = p->plan.b[p->plan.n - 1];
    const dec_layer *D = &p->D[0];
    tt_tune_gemm dec[2] = {{&D->l1, p->tgt, H, p->mlp, DFF, p->gemm_ws}, {&D->l2, p->mlp, DFF, p->t300, H, p->gemm_ws}};
    int timed = tt_gemm_tune(p->pool, &plan.b[0], dec, 2, RFDETR_QUERIES, reps);
    const bb_layer *L = &p->L[0];
    tt_tune_gemm bb[2] = {{&L->fc1, p->xn, C, p->mlp, MLP, p->gemm_ws}, {&L->fc2, p->mlp, MLP, p->x, C, p->gemm_ws}};
    timed += tt_gemm_tune(p->pool, &plan.b[1], bb, 2, SEQ, reps);
    p->plan = plan;
    return timed;
}

long rfdetr_stage_size(rfdetr_stage s)
{
    switch (s) {
    case RFDETR_STAGE_TAP0:
    case RFDETR_STAGE_TAP1:
    case RFDETR_STAGE_TAP2:
    case RFDETR_STAGE_TAP3: return (long)RFDETR_TOKENS * RFDETR_DIM;
    case RFDETR_STAGE_MEMORY: return (long)RFDETR_TOKENS * RFDETR_HIDDEN;
    case RFDETR_STAGE_TOPK: return RFDETR_QUERIES;
    case RFDETR_STAGE_REF: return RFDETR_QUERIES * 4L;
    case RFDETR_STAGE_HS: return (long)RFDETR_QUERIES * RFDETR_HIDDEN;
    case RFDETR_STAGE_SCORE: return RFDETR_TOKENS;
    case RFDETR_STAGE_COUNT: break;
    }
    return -1;
}

int rfdetr_stage_copy(const rfdetr *p, rfdetr_stage s, float *out)
{
    const int C = RFDETR_DIM;
    switch (s) {
    case RFDETR_STAGE_TAP0:
    case RFDETR_STAGE_TAP1:
    case RFDETR_STAGE_TAP2:
    case RFDETR_STAGE_TAP3:
        for (int t = 0; t < RFDETR_TOKENS; t++)
            memcpy(out + (long)t * C, p->taps + (long)t * 4 * C + (s - RFDETR_STAGE_TAP0) * C, sizeof(float) * C);
        return 0;
    case RFDETR_STAGE_MEMORY: memcpy(out, p->mem, sizeof(float) * rfdetr_stage_size(s)); return 0;
    case RFDETR_STAGE_TOPK: memcpy(out, p->topk, sizeof(float) * rfdetr_stage_size(s)); return 0;
    case RFDETR_STAGE_REF: memcpy(out, p->ref, sizeof(float) * rfdetr_stage_size(s)); return 0;
    case RFDETR_STAGE_HS: memcpy(out, p->hs, sizeof(float) * rfdetr_stage_size(s)); return 0;
    case RFDETR_STAGE_SCORE: memcpy(out, p->score, sizeof(float) * rfdetr_stage_size(s)); return 0;
    case RFDETR_STAGE_COUNT: break;
    }
    return -1;
}
