/* tt_selftest.c: the self-tests of kernels/common, one (kernel, isa) case at
 * a time: every fast version against its scalar reference or a float64
 * reference, and the scalar references themselves against float64.
 *
 * Holds: test data generators, the float64 references, the case table.
 * Must not: be linked into a hot path (it allocates freely), or report a case
 * whose isa this CPU cannot run as passed: tt_selftest_run says SKIP. */
#include "tt_selftest.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_attention.h"
#include "tt_exp.h"
#include "tt_gemm.h"
#include "tt_gemm_plan.h"
#include "tt_ops.h"
#include "tt_pool.h"

/* The scale and eps the tests use, named as the kernels name theirs. */
#define TEST_SOFTMAX_SCALE 0.125f /* 1/sqrt(64): an attention head of 64 */
#define TEST_NORM_EPS 1e-6f

/* xorshift32: deterministic test data in [-1, 1). */
static float rnd(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return (float)(*s >> 8) / 8388608.0f - 1.0f;
}

static void fill(float *x, long n, uint32_t seed, float scale)
{
    uint32_t s = seed * 2654435761u + 1u;
    for (long i = 0; i < n; i++) x[i] = rnd(&s) * scale;
}

static double act_ref(tt_act act, double v)
{
    switch (act) {
    case TT_ACT_NONE: return v;
    case TT_ACT_RELU: return v > 0 ? v : 0;
    case TT_ACT_GELU: return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    case TT_ACT_SILU: return v / (1.0 + exp(-v));
    }
    return v;
}

/* Every candidate blocking (tt_blocking_candidates) on the packed mat must give exactly c_want
 * (== per value: the blockings sum in the same order). */
static int gemm_variants_match(tt_pool *pool, const tt_mat *mat, const float *a, long lda, const float *c0,
                               const float *c_want, float *c, long ldc, int m, int flags, void *ws, char *msg,
                               size_t len)
{
    tt_blocking cands[256];
    int nc = tt_blocking_candidates(cands, 256);
    for (int v = 0; v < nc; v++) {
        tt_gemm_plan plan = {.n = 1, .b = {cands[v]}};
        memcpy(c, c0, sizeof(float) * m * ldc);
        tt_gemm(pool, &plan, mat, a, lda, c, ldc, m, flags, ws);
        for (long i = 0; i < (long)m * ldc; i++)
            if (!(c[i] == c_want[i])) {
                char pl[96];
                tt_gemm_plan_format(&plan, pl, sizeof pl);
                return snprintf(msg, len, "%s %s m=%d n=%d k=%d flags=%#x: blocking %s gives C[%ld][%ld]=%.9g, the builtin one %.9g",
                                mat->dtype ? "bf16" : "f32", tt_isa_name(mat->isa), m, mat->n, mat->k, flags, pl,
                                i / ldc, i % ldc, c[i], c_want[i]),
                       -1;
            }
    }
    return 0;
}

/* ---- GEMM against a float64 reference on the (bf16-rounded) operands ---- */
static int test_gemm(tt_isa isa, char *msg, size_t len)
{
    /* row, column and K tails of every kernel: AMX's 16-row halves and 32-row groups (m 16, 25,
     * 33, 37, 50, 100), its 16-pair K steps (k 48: one step and a tail of 8 pairs; 515: 16 steps
     * and 2 pairs; 1100: 34 steps and 6), the vector kernels' 12-row groups and odd k */
    static const int shapes[][3] = {{1, 1, 1}, {13, 33, 7}, {25, 91, 384}, {100, 64, 101},
                                    {37, 130, 515}, {12, 32, 600}, {5, 4, 256},
                                    {100, 130, 300}, {33, 65, 48}, {16, 32, 32}, {50, 33, 1100}};
    static const int flagsets[] = {0, TT_ACT_RELU, TT_ACT_GELU, TT_ACT_SILU, TT_GEMM_ACCUM,
                                   TT_GEMM_ACCUM | TT_ACT_GELU};
    tt_pool *pool = tt_pool_create(3);
    if (!pool) return snprintf(msg, len, "pool"), -1;
    int rc = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0] && rc == 0; si++) {
        int m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
        long lda = k + 3, ldc = n + 5;
        float *a = malloc(sizeof(float) * m * lda), *w = malloc(sizeof(float) * n * k);
        float *bias = malloc(sizeof(float) * n), *c0 = malloc(sizeof(float) * m * ldc);
        float *c = malloc(sizeof(float) * m * ldc), *cv = malloc(sizeof(float) * m * ldc);
        void *ws = aligned_alloc(64, (size_t)m * (k + 2) * 2 + 64);
        fill(a, m * lda, 1 + si, 1.0f);
        fill(w, (long)n * k, 2 + si, 0.5f);
        fill(bias, n, 3 + si, 0.5f);
        fill(c0, m * ldc, 4 + si, 1.0f);
        for (int dt = 0; dt < 2 && rc == 0; dt++) {
            {
                for (size_t fi = 0; fi < sizeof flagsets / sizeof flagsets[0] && rc == 0; fi++) {
                    int flags = flagsets[fi];
                    const float *bp = fi % 2 ? bias : NULL;
                    tt_mat mat;
                    if (tt_mat_pack(&mat, (tt_dtype)dt, isa, w, k, 0, n, k, bp) != 0) {
                        rc = -1;
                        snprintf(msg, len, "pack: out of memory");
                        break;
                    }
                    memcpy(c, c0, sizeof(float) * m * ldc);
                    tt_gemm(pool, NULL, &mat, a, lda, c, ldc, m, flags, ws);
                    for (int i = 0; i < m && rc == 0; i++) {
                        for (int jn = 0; jn < ldc && rc == 0; jn++) {
                            double want, scale = 1.0;
                            if (jn >= n) {
                                want = c0[i * ldc + jn]; /* untouched beyond n */
                            } else {
                                double s = bp ? bp[jn] : 0.0;
                                for (int kk = 0; kk < k; kk++) {
                                    float av = a[i * lda + kk], wv = w[(long)jn * k + kk];
                                    if (dt == TT_BF16) {
                                        av = tt_bf16_to_f32(tt_f32_to_bf16(av));
                                        wv = tt_bf16_to_f32(tt_f32_to_bf16(wv));
                                    }
                                    s += (double)av * wv;
                                    scale += fabs((double)av * wv);
                                }
                                if (flags & TT_GEMM_ACCUM) s += c0[i * ldc + jn];
                                want = act_ref((tt_act)(flags & 0xff), s);
                            }
                            double got = c[i * ldc + jn];
                            if (!(fabs(got - want) <= 2e-6 * scale + 2e-6 * fabs(want))) {
                                snprintf(msg, len, "%s %s m=%d n=%d k=%d flags=%#x C[%d][%d]=%g want %g",
                                         dt ? "bf16" : "f32", tt_isa_name(isa), m, n, k, flags, i, jn,
                                         got, want);
                                rc = -1;
                            }
                        }
                    }
                    /* every blocking variant, on two flag sets (a plain and an accumulating one) */
                    if (rc == 0 && (flags == 0 || flags == (TT_GEMM_ACCUM | TT_ACT_GELU)))
                        rc = gemm_variants_match(pool, &mat, a, lda, c0, c, cv, ldc, m, flags, ws, msg, len);
                    tt_mat_free(&mat);
                }
            }
        }
        free(a), free(w), free(bias), free(c0), free(c), free(cv), free(ws);
    }
    tt_pool_destroy(pool);
    return rc;
}

/* A GEMM's tails read nothing outside their operands: an infinity in one row of A and in one
 * weight row makes that row and that column of C non-finite and nothing else, though the row
 * follows its neighbour in the bf16 copy of A and the weight row's panel follows panel 0 (a K tail
 * that read past its row or its panel would pick them up: inf x 0 is NaN). The rest must match
 * float64 as in test_gemm. */
static int test_gemm_tails(tt_isa isa, char *msg, size_t len)
{
    enum { M = 40, N = 64, BAD_ROW = 20, BAD_COL = 40 };
    static const int ks[] = {20, 52};
    tt_pool *pool = tt_pool_create(2);
    if (!pool) return snprintf(msg, len, "pool"), -1;
    int rc = 0;
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0] && rc == 0; ki++) {
        int k = ks[ki];
        float *a = malloc(sizeof(float) * M * k), *w = malloc(sizeof(float) * N * k), *c = malloc(sizeof(float) * M * N);
        void *ws = aligned_alloc(64, ((size_t)M * (k + 2) * 2 + 63) & ~(size_t)63);
        fill(a, (long)M * k, 71 + ki, 1.0f);
        fill(w, (long)N * k, 72 + ki, 0.5f);
        for (int j = 0; j < k; j++) a[BAD_ROW * k + j] = INFINITY, w[BAD_COL * k + j] = INFINITY;
        for (int dt = 0; dt < 2 && rc == 0; dt++) {
            tt_mat mat;
            if (tt_mat_pack(&mat, (tt_dtype)dt, isa, w, k, 0, N, k, NULL) != 0) {
                snprintf(msg, len, "pack: out of memory");
                rc = -1;
                break;
            }
            tt_gemm(pool, NULL, &mat, a, k, c, N, M, 0, ws);
            for (int i = 0; i < M && rc == 0; i++)
                for (int j = 0; j < N && rc == 0; j++) {
                    if (i == BAD_ROW || j == BAD_COL) continue;
                    double want = 0, scale = 0;
                    for (int kk = 0; kk < k; kk++) {
                        float av = a[i * k + kk], wv = w[(long)j * k + kk];
                        if (dt == TT_BF16) av = tt_bf16_to_f32(tt_f32_to_bf16(av)), wv = tt_bf16_to_f32(tt_f32_to_bf16(wv));
                        want += (double)av * wv;
                        scale += fabs((double)av * wv);
                    }
                    double got = c[i * N + j];
                    if (!(fabs(got - want) <= 2e-6 * scale + 2e-6 * fabs(want))) {
                        snprintf(msg, len, "%s %s k=%d C[%d][%d]=%g want %g (a tail read outside its operand?)",
                                 dt ? "bf16" : "f32", tt_isa_name(isa), k, i, j, got, want);
                        rc = -1;
                    }
                }
            tt_mat_free(&mat);
        }
        free(a), free(w), free(c), free(ws);
    }
    tt_pool_destroy(pool);
    return rc;
}

/* fp32 -> bf16 rows: the fast version bit for bit against the scalar one;
 * the scalar one against a rounding tie and the zero pad. */
static int test_bf16_convert(tt_isa isa, char *msg, size_t len)
{
    enum { K = 77, R = 3 };
    float src[R * K];
    uint16_t want[R * 80], got[R * 80];
    fill(src, R * K, 9, 100.0f);
    src[5] = 1.0f + 1.0f / 256.0f; /* a tie: rounds to even */
    uint32_t snan = 0x7f800001u; /* a NaN whose rounding would carry into infinity */
    memcpy(&src[7], &snan, 4);
    tt_to_bf16_rows(TT_ISA_SCALAR, src, K, want, 80, R, K);
    if (isa == TT_ISA_SCALAR) {
        if (want[5] != 0x3f80 || want[K] != 0) return snprintf(msg, len, "scalar rounding/padding wrong"), -1;
        return 0;
    }
    memset(got, 0xff, sizeof got);
    tt_to_bf16_rows(isa, src, K, got, 80, R, K);
    for (int r = 0; r < R; r++)
        for (int i = 0; i <= K; i++)
            if (got[r * 80 + i] != want[r * 80 + i])
                return snprintf(msg, len, "%s: row %d col %d %#x want %#x", tt_isa_name(isa), r, i, got[r * 80 + i],
                                want[r * 80 + i]),
                       -1;
    return 0;
}

/* The fast packers of tt_mat_pack_into against the generic one, bit for bit
 * (NaN and rounding ties included). */
static int test_pack(tt_isa isa, char *msg, size_t len)
{
    static const int shapes[][2] = {{101, 64}, {64, 101}, {37, 7}, {33, 1}, {1, 33}, {70, 515}};
    enum { LD = 530 };
    float *src = malloc(sizeof(float) * 600 * LD);
    fill(src, 600L * LD, 41, 3.0f);
    src[5] = NAN;
    src[LD + 3] = 1.0f + 1.0f / 256.0f;
    int rc = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0] && rc == 0; si++) {
        int n = shapes[si][0], k = shapes[si][1];
        for (int dt = 0; dt < 2 && rc == 0; dt++) {
            for (int trans = 0; trans < 2 && rc == 0; trans++) {
                size_t bytes = tt_mat_bytes((tt_dtype)dt, n, k);
                unsigned char *want = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
                unsigned char *got = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
                tt_mat mw, mg;
                tt_mat_pack_into(&mw, want, (tt_dtype)dt, TT_ISA_SCALAR, src, LD, trans, n, k);
                memset(got, 0xab, bytes);
                tt_mat_pack_into(&mg, got, (tt_dtype)dt, isa, src, LD, trans, n, k);
                for (size_t b = 0; b < bytes && rc == 0; b++)
                    if (got[b] != want[b]) {
                        snprintf(msg, len, "pack %s %s trans=%d n=%d k=%d: byte %zu is %#x, want %#x", dt ? "bf16" : "f32",
                                 tt_isa_name(isa), trans, n, k, b, got[b], want[b]);
                        rc = -1;
                    }
                free(want), free(got);
            }
        }
    }
    free(src);
    return rc;
}

/* A bf16 source packed as its pairs, bit for bit the same panels as its fp32 widening packed
 * (odd k, a signalling NaN, padding rows). */
static int test_pack_bf16(tt_isa isa, char *msg, size_t len)
{
    (void)isa;
    static const int shapes[][2] = {{101, 64}, {37, 7}, {33, 1}, {70, 515}};
    enum { LD = 520 };
    uint16_t *src = malloc(sizeof(uint16_t) * 101 * LD);
    float *wide = malloc(sizeof(float) * 101 * LD);
    float tmp[LD];
    for (int r = 0; r < 101; r++) {
        fill(tmp, LD, 43 + r, 3.0f);
        for (int j = 0; j < LD; j++) src[r * LD + j] = tt_f32_to_bf16(tmp[j]);
    }
    src[5] = 0x7f81;  /* a signalling NaN */
    src[LD + 2] = 0xff80; /* -inf */
    for (long i = 0; i < 101L * LD; i++) wide[i] = tt_bf16_to_f32(src[i]);
    int rc = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0] && rc == 0; si++) {
        int n = shapes[si][0], k = shapes[si][1];
        size_t bytes = tt_mat_bytes(TT_BF16, n, k);
        unsigned char *want = malloc(bytes), *got = malloc(bytes);
        tt_mat mw, mg;
        tt_mat_pack_into(&mw, want, TT_BF16, TT_ISA_SCALAR, wide, LD, 0, n, k);
        memset(got, 0xab, bytes);
        tt_mat_pack_bf16_into(&mg, got, TT_ISA_SCALAR, src, LD, n, k);
        for (size_t b = 0; b < bytes && rc == 0; b++)
            if (got[b] != want[b]) {
                snprintf(msg, len, "pack_bf16 n=%d k=%d: byte %zu is %#x, want %#x", n, k, b, got[b], want[b]);
                rc = -1;
            }
        if (rc == 0 && (mg.n != mw.n || mg.k != mw.k || mg.kp != mw.kp || mg.npanels != mw.npanels))
            snprintf(msg, len, "pack_bf16 n=%d k=%d: header differs", n, k), rc = -1;
        free(want), free(got);
    }
    free(src), free(wide);
    return rc;
}

static int test_act(tt_isa isa, char *msg, size_t len)
{
    enum { N = 1003 };
    float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = -12.0f + 24.0f * i / (N - 1);
    for (int act = TT_ACT_RELU; act <= TT_ACT_SILU; act++) {
        memcpy(y, x, sizeof x);
        tt_act_inplace(isa, (tt_act)act, y, N);
        for (int i = 0; i < N; i++) {
            double want = act_ref((tt_act)act, x[i]);
            if (!(fabs(y[i] - want) <= 1e-6 * fmax(1.0, fabs(x[i]))))
                return snprintf(msg, len, "act %d %s x=%g got %g want %g", act, tt_isa_name(isa), x[i], y[i], want),
                       -1;
        }
    }
    return 0;
}

static int test_layernorm(tt_isa isa, char *msg, size_t len)
{
    enum { R = 5, LD = 400 };
    static const int widths[] = {7, 128, 256, 384, 391};
    float x[R * LD], g[LD], b[LD], y[R * LD];
    fill(x, R * LD, 11, 3.0f);
    fill(g, LD, 12, 1.0f);
    fill(b, LD, 13, 1.0f);
    for (int r = 0; r < R; r++) x[r * LD] += 50.0f; /* a large mean */
    for (size_t wi = 0; wi < 5; wi++) {
        int n = widths[wi];
        tt_layernorm_rows(isa, x, LD, y, LD, R, n, g, b, TEST_NORM_EPS);
        for (int r = 0; r < R; r++) {
            double mean = 0, var = 0;
            for (int i = 0; i < n; i++) mean += x[r * LD + i];
            mean /= n;
            for (int i = 0; i < n; i++) var += (x[r * LD + i] - mean) * (x[r * LD + i] - mean);
            var /= n;
            for (int i = 0; i < n; i++) {
                double want = (x[r * LD + i] - mean) / sqrt(var + (double)TEST_NORM_EPS) * g[i] + b[i];
                if (!(fabs(y[r * LD + i] - want) <= 1e-5 * (1 + fabs(want))))
                    return snprintf(msg, len, "layernorm %s n=%d [%d][%d] %g want %g", tt_isa_name(isa), n, r, i,
                                    y[r * LD + i], want),
                           -1;
            }
        }
    }
    return 0;
}

static int test_softmax(tt_isa isa, char *msg, size_t len)
{
    enum { R = 4, LD = 1700 };
    static const int widths[] = {1, 2, 17, 101, 300, 1616};
    float *x = malloc(sizeof(float) * R * LD), *y = malloc(sizeof(float) * R * LD);
    fill(x, R * LD, 21, 20.0f);
    int rc = 0;
    for (size_t wi = 0; wi < 6 && rc == 0; wi++) {
        int n = widths[wi];
        {
            memcpy(y, x, sizeof(float) * R * LD);
            tt_softmax_rows(isa, y, LD, R, n, TEST_SOFTMAX_SCALE);
            for (int r = 0; r < R && rc == 0; r++) {
                double mx = -1e30, s = 0;
                for (int i = 0; i < n; i++) mx = fmax(mx, x[r * LD + i] * (double)TEST_SOFTMAX_SCALE);
                for (int i = 0; i < n; i++) s += exp(x[r * LD + i] * (double)TEST_SOFTMAX_SCALE - mx);
                for (int i = 0; i < n && rc == 0; i++) {
                    double want = exp(x[r * LD + i] * (double)TEST_SOFTMAX_SCALE - mx) / s;
                    if (!(fabs(y[r * LD + i] - want) <= 1e-6 * want + 1e-9)) {
                        snprintf(msg, len, "softmax %s n=%d [%d][%d] %g want %g", tt_isa_name(isa), n, r, i,
                                 y[r * LD + i], want);
                        rc = -1;
                    }
                }
            }
        }
    }
    /* the unnormalised variant: e / sum is the softmax; its bf16 output is the
     * rounding of its fp32 output, with the zero pad of an odd width */
    uint16_t *bf = malloc(sizeof(uint16_t) * R * LD);
    float sums[R];
    for (size_t wi = 0; wi < 6 && rc == 0; wi++) {
        int n = widths[wi];
        {
            memcpy(y, x, sizeof(float) * R * LD);
            tt_softmax_unnorm_rows(isa, y, LD, NULL, 0, R, n, TEST_SOFTMAX_SCALE, sums);
            memset(bf, 0xff, sizeof(uint16_t) * R * LD);
            float sums2[R];
            tt_softmax_unnorm_rows(isa, x, LD, bf, LD, R, n, TEST_SOFTMAX_SCALE, sums2);
            for (int r = 0; r < R && rc == 0; r++) {
                double mx = -1e30, s = 0;
                for (int i = 0; i < n; i++) mx = fmax(mx, x[r * LD + i] * (double)TEST_SOFTMAX_SCALE);
                for (int i = 0; i < n; i++) s += exp(x[r * LD + i] * (double)TEST_SOFTMAX_SCALE - mx);
                if (sums2[r] != sums[r]) {
                    snprintf(msg, len, "softmax_unnorm %s n=%d row %d: sums differ with bf16 output", tt_isa_name(isa), n, r);
                    rc = -1;
                }
                for (int i = 0; i < n && rc == 0; i++) {
                    double want = exp(x[r * LD + i] * (double)TEST_SOFTMAX_SCALE - mx) / s;
                    if (!(fabs(y[r * LD + i] / sums[r] - want) <= 1e-6 * want + 1e-9) ||
                        bf[r * LD + i] != tt_f32_to_bf16(y[r * LD + i])) {
                        snprintf(msg, len, "softmax_unnorm %s n=%d [%d][%d] %g (bf16 %#x) want %g", tt_isa_name(isa),
                                 n, r, i, y[r * LD + i] / sums[r], bf[r * LD + i], want);
                        rc = -1;
                    }
                }
                if (rc == 0 && (n & 1) && bf[r * LD + n] != 0) {
                    snprintf(msg, len, "softmax_unnorm %s n=%d: no zero pad after an odd row", tt_isa_name(isa), n);
                    rc = -1;
                }
            }
        }
    }
    free(bf);
    free(x), free(y);
    return rc;
}

/* Attention of every ISA against float64 math on the same operands. */
static int test_attention(tt_isa isa, char *msg, size_t len)
{
    static const int cases[][4] = {{2, 37, 3, 16}, {3, 101, 2, 64}, {1, 300, 1, 32}};
    tt_pool *pool = tt_pool_create(2);
    if (!pool) return snprintf(msg, len, "pool"), -1;
    int rc = 0;
    for (size_t ci = 0; ci < 3 && rc == 0; ci++) {
        int B = cases[ci][0], S = cases[ci][1], H = cases[ci][2], D = cases[ci][3];
        long ld = 3L * H * D + 1, ldo = (long)H * D + 3, rows = (long)B * S;
        float *qkv = malloc(sizeof(float) * rows * ld), *out = malloc(sizeof(float) * rows * ldo);
        double *want = malloc(sizeof(double) * rows * ldo), *p = malloc(sizeof(double) * S);
        fill(qkv, rows * ld, 31 + ci, 1.0f);
        float scale = 1.0f / sqrtf((float)D);
        for (int dt = 0; dt < 2 && rc == 0; dt++) {
            for (int b = 0; b < B; b++)
                for (int h = 0; h < H; h++)
                    for (int i = 0; i < S; i++) {
                        const float *qr = qkv + ((long)b * S + i) * ld + h * D;
                        double mx = -1e300, sum = 0;
                        for (int j = 0; j < S; j++) {
                            const float *kr = qkv + ((long)b * S + j) * ld + H * D + h * D;
                            double s = 0;
                            for (int d = 0; d < D; d++) s += (double)qr[d] * kr[d];
                            p[j] = s * scale;
                            mx = fmax(mx, p[j]);
                        }
                        for (int j = 0; j < S; j++) sum += (p[j] = exp(p[j] - mx));
                        for (int d = 0; d < D; d++) {
                            double o = 0;
                            for (int j = 0; j < S; j++) o += p[j] / sum * qkv[((long)b * S + j) * ld + 2 * H * D + h * D + d];
                            want[((long)b * S + i) * ldo + h * D + d] = o;
                        }
                    }
            {
                tt_attn_shape sh = {B, S, H, D, tt_pool_threads(pool), (tt_dtype)dt, isa};
                void *ws = aligned_alloc(64, (tt_attention_ws_bytes(&sh) + 63) & ~(size_t)63);
                tt_attention(pool, &sh, qkv, qkv + H * D, qkv + 2 * H * D, ld, out, ldo, scale, ws);
                double tol = dt == TT_F32 ? 2e-5 : 2e-2; /* bf16 rounds q, k, v and p */
                for (long r = 0; r < rows && rc == 0; r++)
                    for (int c = 0; c < H * D && rc == 0; c++)
                        if (!(fabs(out[r * ldo + c] - want[r * ldo + c]) <= tol)) {
                            snprintf(msg, len, "attention %s %s B=%d S=%d H=%d D=%d out[%ld][%d]=%g want %g",
                                     dt ? "bf16" : "f32", tt_isa_name(isa), B, S, H, D, r, c, out[r * ldo + c],
                                     want[r * ldo + c]);
                            rc = -1;
                        }
                free(ws);
            }
        }
        free(qkv), free(out), free(want), free(p);
    }
    tt_pool_destroy(pool);
    return rc;
}

typedef struct {
    int *hits;
    int *bad_thread;
    int nthreads;
} pool_probe;

static void probe_task(void *arg, int task, int thread)
{
    pool_probe *pp = arg;
    __atomic_add_fetch(&pp->hits[task], 1, __ATOMIC_RELAXED);
    if (thread < 0 || thread >= pp->nthreads) __atomic_store_n(pp->bad_thread, 1, __ATOMIC_RELAXED);
}

static int test_pool(tt_isa isa, char *msg, size_t len)
{
    (void)isa;
    enum { TASKS = 257, JOBS = 2000 };
    for (int nt = 1; nt <= 4; nt++) {
        tt_pool *pool = tt_pool_create(nt);
        if (!pool || tt_pool_threads(pool) != nt) return snprintf(msg, len, "create %d threads", nt), -1;
        int hits[TASKS] = {0}, bad = 0;
        pool_probe pp = {hits, &bad, nt};
        for (int j = 0; j < JOBS; j++) tt_pool_run(pool, 1 + j % TASKS, probe_task, &pp);
        tt_pool_destroy(pool);
        for (int t = 0; t < TASKS; t++) {
            int want = 0;
            for (int j = 0; j < JOBS; j++) want += t < 1 + j % TASKS;
            if (hits[t] != want) return snprintf(msg, len, "%d threads: task %d ran %d times, want %d", nt, t, hits[t], want), -1;
        }
        if (bad) return snprintf(msg, len, "%d threads: thread index out of range", nt), -1;
    }
    return 0;
}

/* RMSNorm against float64, for a plain weight (w_add 0), Gemma's 1 + w, and
 * the adaRMS shift. */
static int test_rmsnorm(tt_isa isa, char *msg, size_t len)
{
    enum { R = 4, LD = 1040 };
    static const int widths[] = {7, 128, 1024, 1031};
    static float x[R * LD], w[LD], shift[LD], y[R * LD];
    fill(x, R * LD, 51, 3.0f);
    fill(w, LD, 52, 1.0f);
    fill(shift, LD, 53, 1.0f);
    for (int r = 0; r < R; r++) x[r * LD + 3] += 40.0f; /* one large value */
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        int n = widths[wi];
        for (int variant = 0; variant < 3; variant++) {
            float w_add = variant == 0 ? 0.0f : 1.0f;
            const float *sh = variant == 2 ? shift : NULL;
            tt_rmsnorm_rows(isa, x, LD, y, LD, R, n, w, w_add, sh, TEST_NORM_EPS);
            for (int r = 0; r < R; r++) {
                double ss = 0;
                for (int i = 0; i < n; i++) ss += (double)x[r * LD + i] * x[r * LD + i];
                double inv = 1.0 / sqrt(ss / n + (double)TEST_NORM_EPS);
                for (int i = 0; i < n; i++) {
                    double want = x[r * LD + i] * inv * (w_add + (double)w[i]) + (sh ? sh[i] : 0.0);
                    if (!(fabs(y[r * LD + i] - want) <= 1e-5 * (1 + fabs(want))))
                        return snprintf(msg, len, "rmsnorm %s n=%d w_add=%g shift=%d [%d][%d] %g want %g",
                                        tt_isa_name(isa), n, w_add, sh != NULL, r, i, y[r * LD + i], want),
                               -1;
                }
            }
        }
    }
    return 0;
}

/* GELU-tanh, alone and times a second operand (GEGLU), against float64. */
static int test_gelu_tanh(tt_isa isa, char *msg, size_t len)
{
    enum { N = 1003 };
    static float x[N], u[N], y[N];
    for (int i = 0; i < N; i++) x[i] = -12.0f + 24.0f * i / (N - 1);
    fill(u, N, 61, 2.0f);
    for (int with_u = 0; with_u < 2; with_u++) {
        memcpy(y, x, sizeof x);
        tt_gelu_tanh_mul(isa, y, with_u ? u : NULL, N);
        for (int i = 0; i < N; i++) {
            double v = x[i];
            double want = 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))) * (with_u ? u[i] : 1.0);
            if (!(fabs(y[i] - want) <= 1e-6 * fmax(1.0, fabs(x[i]))))
                return snprintf(msg, len, "gelu_tanh %s u=%d x=%g got %g want %g", tt_isa_name(isa), with_u, x[i],
                                y[i], want),
                       -1;
        }
    }
    return 0;
}

enum { EXP_N = 4096 };

TT_TARGET_AVX512 static void exp_rows512(const float *x, float *y)
{
    for (int i = 0; i < EXP_N; i += 16) _mm512_storeu_ps(y + i, tt_exp512(_mm512_loadu_ps(x + i)));
}

TT_TARGET_AVX2 static void exp_rows256(const float *x, float *y)
{
    for (int i = 0; i < EXP_N; i += 8) _mm256_storeu_ps(y + i, tt_exp256(_mm256_loadu_ps(x + i)));
}

/* The vector exps against float64 exp of the clamped argument, over
 * [-100, 100] (the clamps included). The AVX2 one must also equal the
 * AVX-512 one bit for bit where this CPU can run both: same clamps, same
 * polynomial, exact power-of-two scaling. */
static int test_exp(tt_isa isa, char *msg, size_t len)
{
    static float x[EXP_N], y[EXP_N], y512[EXP_N];
    for (int i = 0; i < EXP_N; i++) x[i] = -100.0f + 200.0f * i / (EXP_N - 1);
    x[0] = TT_EXP_MIN, x[1] = TT_EXP_MAX, x[2] = 0.0f, x[3] = -0.0f;
    if (isa == TT_ISA_AVX2) exp_rows256(x, y);
    else exp_rows512(x, y);
    for (int i = 0; i < EXP_N; i++) {
        double c = fmin(fmax(x[i], (double)TT_EXP_MIN), (double)TT_EXP_MAX);
        double want = exp(c);
        if (!(fabs(y[i] - want) <= 3e-7 * want))
            return snprintf(msg, len, "exp %s x=%.9g got %.9g want %.9g", tt_isa_name(isa), x[i], y[i], want), -1;
    }
    if (isa == TT_ISA_AVX2 && tt_cpu_supports(TT_ISA_AVX512)) {
        exp_rows512(x, y512);
        for (int i = 0; i < EXP_N; i++)
            if (memcmp(&y[i], &y512[i], sizeof(float)) != 0)
                return snprintf(msg, len, "exp avx2 x=%.9g is %.9g, avx512 gives %.9g", x[i], y[i], y512[i]), -1;
    }
    return 0;
}

/* ---- GEMM plans: the text form round trip, bad plans refused, the derived blocking ---- */
static int test_gemm_plan(tt_isa isa, char *msg, size_t len)
{
    (void)isa;
    const char *good = "m<=64:kc=128,mb=8,nb=4,pf=1;m<=300:kc=96,mb=4,nb=8,pf=0;kc=256,mb=16,nb=2,pf=2";
    tt_gemm_plan p;
    char err[160], back[256];
    if (tt_gemm_plan_parse(&p, good, err, sizeof err) != 0) return snprintf(msg, len, "parse %s: %s", good, err), -1;
    if (p.n != 3 || p.max_rows[1] != 300 || p.b[1].kc != 96 || p.b[2].nb != 2 || p.b[2].pf != 2)
        return snprintf(msg, len, "parse %s: wrong fields", good), -1;
    tt_gemm_plan_format(&p, back, sizeof back);
    if (strcmp(back, good) != 0) return snprintf(msg, len, "format gives %s, want %s", back, good), -1;
    static const char *bad[] = {"", "kc=0", "m<=64:kc=128", "kc=128;kc=96", "m<=64:kc=1;m<=32:kc=1;kc=1",
                                "kc=12,zz=3", "m<=a:kc=1;kc=1", "kc=128,", "mb=-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (tt_gemm_plan_parse(&p, bad[i], err, sizeof err) == 0) return snprintf(msg, len, "plan %s accepted", bad[i]), -1;
    tt_blocking z5 = tt_blocking_derived(48 * 1024), z4 = tt_blocking_derived(32 * 1024), none = tt_blocking_derived(0);
    if (z5.kc != 256 || z4.kc != 160 || none.kc != tt_blocking_builtin.kc)
        return snprintf(msg, len, "derived K blocks %d (48 KiB), %d (32 KiB), %d (unknown)", z5.kc, z4.kc, none.kc), -1;
    tt_blocking c[256];
    int n = tt_blocking_candidates(c, 256);
    if (n != 108) return snprintf(msg, len, "%d candidate blockings, want 6 K blocks x 3 prefetch distances x 6 task tiles", n), -1;
    tt_blocking d = tt_blocking_derived(tt_l1d_bytes());
    int found_builtin = 0, found_derived = 0;
    for (int i = 0; i < n; i++) {
        found_builtin |= memcmp(&c[i], &tt_blocking_builtin, sizeof d) == 0;
        found_derived |= memcmp(&c[i], &d, sizeof d) == 0;
    }
    if (!found_builtin || !found_derived) return snprintf(msg, len, "the builtin or the derived blocking is not a candidate"), -1;
    return 0;
}

/* ---- the case table ---- */

typedef int (*test_fn)(tt_isa isa, char *, size_t);

/* The isas a test covers: those with their own implementation of the kernel
 * (an isa that runs another one's code adds no case). NO_ISA: one case. */
#define ON(isa) (1u << (isa))
enum {
    NO_ISA = 0,
    ALL_ISAS = ON(TT_ISA_SCALAR) | ON(TT_ISA_AVX2) | ON(TT_ISA_AVX512) | ON(TT_ISA_AVX512BF16) | ON(TT_ISA_AMXBF16),
    SCALAR_AVX2_AVX512 = ON(TT_ISA_SCALAR) | ON(TT_ISA_AVX2) | ON(TT_ISA_AVX512),
    SCALAR_AVX512 = ON(TT_ISA_SCALAR) | ON(TT_ISA_AVX512),
};

static const struct {
    const char *name;
    test_fn fn;
    unsigned isas;
} tests[] = {
    {"gemm", test_gemm, ALL_ISAS},
    {"gemm_tails", test_gemm_tails, ALL_ISAS},
    {"pack", test_pack, ON(TT_ISA_AVX512)},
    {"pack_bf16", test_pack_bf16, NO_ISA},
    {"bf16_convert", test_bf16_convert, SCALAR_AVX512},
    {"activations", test_act, SCALAR_AVX512},
    {"layernorm", test_layernorm, SCALAR_AVX512},
    {"rmsnorm", test_rmsnorm, SCALAR_AVX2_AVX512},
    {"gelu_tanh", test_gelu_tanh, SCALAR_AVX2_AVX512},
    {"exp", test_exp, ON(TT_ISA_AVX2) | ON(TT_ISA_AVX512)},
    {"softmax", test_softmax, SCALAR_AVX512},
    {"attention", test_attention, ALL_ISAS},
    {"pool", test_pool, NO_ISA},
    {"gemm_plan", test_gemm_plan, NO_ISA},
};
enum { NTESTS = sizeof tests / sizeof tests[0] };

/* Case i as (test, isa); has_isa 0 for a NO_ISA test. Returns -1 when out of range. */
static int case_at(int i, int *test, tt_isa *isa, int *has_isa)
{
    for (int t = 0; t < NTESTS && i >= 0; t++) {
        if (tests[t].isas == NO_ISA) {
            if (i-- == 0) return *test = t, *isa = TT_ISA_SCALAR, *has_isa = 0, 0;
            continue;
        }
        for (int a = TT_ISA_SCALAR; a <= TT_ISA_LAST; a++)
            if ((tests[t].isas & ON(a)) && i-- == 0) return *test = t, *isa = (tt_isa)a, *has_isa = 1, 0;
    }
    return -1;
}

int tt_selftest_count(void)
{
    int n = 0, t, h;
    tt_isa a;
    while (case_at(n, &t, &a, &h) == 0) n++;
    return n;
}

int tt_selftest_name(int i, char *buf, size_t len)
{
    int t, h;
    tt_isa a;
    if (case_at(i, &t, &a, &h) != 0) return -1;
    if (h) snprintf(buf, len, "%s/%s", tests[t].name, tt_isa_name(a));
    else snprintf(buf, len, "%s", tests[t].name);
    return 0;
}

int tt_selftest_run(int i, char *msg, size_t msglen)
{
    int t, h;
    tt_isa a;
    if (case_at(i, &t, &a, &h) != 0) return snprintf(msg, msglen, "no test case %d", i), TT_SELFTEST_FAIL;
    msg[0] = '\0';
    if (h && !tt_cpu_supports(a))
        return snprintf(msg, msglen, "this CPU cannot run %s (its best is %s)", tt_isa_name(a),
                        tt_isa_name(tt_cpu_best_isa())),
               TT_SELFTEST_SKIP;
    if (h && a > tt_cpu_best_isa())
        return snprintf(msg, msglen, "TT_ISA caps the kernels at %s, below %s", tt_isa_name(tt_cpu_best_isa()),
                        tt_isa_name(a)),
               TT_SELFTEST_SKIP;
    return tests[t].fn(a, msg, msglen) == 0 ? TT_SELFTEST_PASS : TT_SELFTEST_FAIL;
}
