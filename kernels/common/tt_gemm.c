/* tt_gemm.c: the packed GEMM of tt_gemm.h: packing, the
 * micro-kernels per isa (scalar reference, AVX2 strips, AVX-512 tiles, AVX-512
 * BF16 vdpbf16ps tiles, AMX-BF16 tdpbf16ps tiles with their own walk), the
 * blocked drivers, and the peak-FLOPS benchmarks.
 * Must not: change a kernel's summation order per isa without the self-test
 * (gemm/<isa> against float64) and the models' parity tests agreeing. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif
#include "tt_gemm.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tt_bf16_avx512.h"
#include "tt_ops.h"

/* Before plans: K blocks of 256 panel rows (a 32 KiB slice, L1 of a Zen 5 core), tasks of 8 row
 * groups x 4 panels, each row-group tile prefetching its share of the next slice. */
const tt_blocking tt_blocking_builtin = {.kc = 256, .mb = 8, .nb = 4, .pf = 1};


static int kpad(tt_dtype dtype, int k) { return dtype == TT_BF16 ? (k + 1) & ~1 : k; }

size_t tt_mat_bytes(tt_dtype dtype, int n, int k)
{
    size_t np = (size_t)(n + TT_NR - 1) / TT_NR;
    return np * (size_t)kpad(dtype, k) * TT_NR * (dtype == TT_BF16 ? 2 : 4);
}

static void mat_init(tt_mat *m, void *buf, tt_dtype dtype, tt_isa isa, int n, int k)
{
    m->n = n;
    m->k = k;
    m->npanels = (n + TT_NR - 1) / TT_NR;
    m->kp = kpad(dtype, k);
    m->dtype = dtype;
    m->isa = isa;
    m->panels = buf;
    m->bias = NULL;
    m->owned = 0;
}

/* Stores W[i][kk] = v at its panel position. */
static inline void mat_put(tt_mat *m, int i, int kk, float v)
{
    int p = i / TT_NR, j = i % TT_NR;
    if (m->dtype == TT_F32) {
        ((float *)m->panels)[((long)p * m->kp + kk) * TT_NR + j] = v;
    } else {
        long idx = (((long)p * (m->kp / 2) + kk / 2) * TT_NR + j) * 2 + (kk & 1);
        ((uint16_t *)m->panels)[idx] = tt_f32_to_bf16(v);
    }
}

void tt_mat_set_rows(tt_mat *m, int row0, int nrows, const float *src, long ld, int trans,
                     const float *row_scale)
{
    for (int r = 0; r < nrows; r++) {
        float s = row_scale ? row_scale[r] : 1.0f;
        for (int kk = 0; kk < m->k; kk++) {
            float v = trans ? src[(long)kk * ld + r] : src[(long)r * ld + kk];
            mat_put(m, row0 + r, kk, row_scale ? v * s : v);
        }
    }
}

/* AVX-512 packers for the hot path (attention packs K and V per head),
 * bit-identical to tt_mat_set_rows (the selftest compares them). */

/* W[i][kk] = src[kk*ld + i]: a panel row is a contiguous piece of a source row. */
TT_TARGET_AVX512 static void pack_trans_avx512(tt_mat *m, const float *src, long ld)
{
    for (int p = 0; p < m->npanels; p++) {
        int c0 = p * TT_NR, nc = m->n - c0 < TT_NR ? m->n - c0 : TT_NR;
        __mmask16 mk[2] = {nc >= 16 ? 0xffff : (__mmask16)((1u << nc) - 1),
                           nc >= 32 ? 0xffff : nc > 16 ? (__mmask16)((1u << (nc - 16)) - 1) : 0};
        if (m->dtype == TT_F32) {
            float *dst = (float *)m->panels + (long)p * m->kp * TT_NR;
            for (int kk = 0; kk < m->k; kk++)
                for (int h = 0; h < 2; h++)
                    _mm512_storeu_ps(dst + kk * TT_NR + 16 * h,
                                     _mm512_maskz_loadu_ps(mk[h], src + (long)kk * ld + c0 + 16 * h));
        } else {
            uint32_t *dst = (uint32_t *)m->panels + (long)p * (m->kp / 2) * TT_NR;
            for (int k2 = 0; k2 < m->kp / 2; k2++) {
                const float *a = src + (long)(2 * k2) * ld + c0;
                int has_b = 2 * k2 + 1 < m->k; /* else the zero pad of an odd k */
                for (int h = 0; h < 2; h++) {
                    __m512 lo = _mm512_maskz_loadu_ps(mk[h], a + 16 * h);
                    __m512 hi = has_b ? _mm512_maskz_loadu_ps(mk[h], a + ld + 16 * h) : _mm512_setzero_ps();
                    _mm512_storeu_si512(dst + k2 * TT_NR + 16 * h, tt_bf16_pairs(lo, hi));
                }
            }
        }
    }
}

/* bf16, W[i][kk] = src[i*ld + kk]: a source row converts to consecutive
 * pairs, which go to lane i of successive pair rows. */
TT_TARGET_AVX512 static void pack_rows_bf16_avx512(tt_mat *m, const float *src, long ld)
{
    for (int i = 0; i < m->n; i++) {
        uint32_t *dst = (uint32_t *)m->panels + (long)(i / TT_NR) * (m->kp / 2) * TT_NR + i % TT_NR;
        const float *row = src + (long)i * ld;
        for (int k0 = 0; k0 < m->k; k0 += 16) {
            int left = m->k - k0;
            __mmask16 mk = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
            uint32_t pairs[8];
            _mm256_storeu_si256((__m256i *)pairs, tt_bf16x16(_mm512_maskz_loadu_ps(mk, row + k0)));
            int np = (left + 1) / 2 < 8 ? (left + 1) / 2 : 8;
            for (int q = 0; q < np; q++) dst[(long)(k0 / 2 + q) * TT_NR] = pairs[q];
        }
    }
}

void tt_mat_pack_into(tt_mat *m, void *buf, tt_dtype dtype, tt_isa isa, const float *src, long ld,
                      int trans, int n, int k)
{
    mat_init(m, buf, dtype, isa, n, k);
    memset(buf, 0, tt_mat_bytes(dtype, n, k));
    if (isa >= TT_ISA_AVX512 && trans) pack_trans_avx512(m, src, ld);
    else if (isa >= TT_ISA_AVX512 && dtype == TT_BF16) pack_rows_bf16_avx512(m, src, ld);
    else tt_mat_set_rows(m, 0, n, src, ld, trans, NULL);
}

void tt_mat_view(tt_mat *m, void *buf, tt_dtype dtype, tt_isa isa, int n, int k)
{
    mat_init(m, buf, dtype, isa, n, k);
}

/* The bf16 bits tt_f32_to_bf16 gives for the fp32 widening of bf16 x: x itself, a NaN made quiet. */
static inline uint16_t bf16_canonical(uint16_t x)
{
    return (x & 0x7fffu) > 0x7f80u ? (uint16_t)(x | 0x40u) : x;
}

void tt_mat_pack_bf16_into(tt_mat *m, void *buf, tt_isa isa, const uint16_t *src, long ld, int n, int k)
{
    mat_init(m, buf, TT_BF16, isa, n, k);
    memset(buf, 0, tt_mat_bytes(TT_BF16, n, k));
    int k2 = m->kp / 2;
    for (int i = 0; i < n; i++) {
        uint16_t *dst = (uint16_t *)m->panels + ((long)(i / TT_NR) * k2 * TT_NR + i % TT_NR) * 2;
        const uint16_t *row = src + (long)i * ld;
        for (int kk = 0; kk < k2; kk++) {
            dst[(long)kk * TT_NR * 2] = bf16_canonical(row[2 * kk]);
            dst[(long)kk * TT_NR * 2 + 1] = 2 * kk + 1 < k ? bf16_canonical(row[2 * kk + 1]) : 0;
        }
    }
}

int tt_mat_alloc(tt_mat *m, tt_dtype dtype, tt_isa isa, int n, int k, int with_bias)
{
    size_t bytes = (tt_mat_bytes(dtype, n, k) + 63) & ~(size_t)63;
    void *buf = aligned_alloc(64, bytes > 0 ? bytes : 64);
    if (buf == NULL) return -1;
    memset(buf, 0, bytes);
    mat_init(m, buf, dtype, isa, n, k);
    m->owned = 1;
    if (with_bias) {
        m->bias = calloc((size_t)n, sizeof(float));
        if (m->bias == NULL) {
            free(buf);
            m->panels = NULL;
            return -1;
        }
    }
    return 0;
}

int tt_mat_pack(tt_mat *m, tt_dtype dtype, tt_isa isa, const float *src, long ld, int trans, int n,
                int k, const float *bias)
{
    if (tt_mat_alloc(m, dtype, isa, n, k, bias != NULL) != 0) return -1;
    tt_mat_set_rows(m, 0, n, src, ld, trans, NULL);
    if (bias != NULL) memcpy(m->bias, bias, (size_t)n * sizeof(float));
    return 0;
}

void tt_mat_free(tt_mat *m)
{
    if (m->owned) {
        free(m->panels);
        free(m->bias);
    }
    memset(m, 0, sizeof *m);
}

/* ---------- fp32 <-> bf16 rows ---------- */

TT_TARGET_AVX512 static void to_bf16_row_avx512(const float *src, uint16_t *dst, int k)
{
    int i = 0;
    for (; i + 16 <= k; i += 16) _mm256_storeu_si256((__m256i *)(dst + i), tt_bf16x16(_mm512_loadu_ps(src + i)));
    for (; i < k; i++) dst[i] = tt_f32_to_bf16(src[i]);
}

void tt_to_bf16_rows(tt_isa isa, const float *src, long lds, uint16_t *dst, long ldd, int rows, int k)
{
    for (int r = 0; r < rows; r++) {
        const float *s = src + (long)r * lds;
        uint16_t *d = dst + (long)r * ldd;
        if (isa >= TT_ISA_AVX512) to_bf16_row_avx512(s, d, k);
        else
            for (int i = 0; i < k; i++) d[i] = tt_f32_to_bf16(s[i]);
        if (k & 1) d[k] = 0;
    }
}

/* ---------- micro-kernels ----------
 * A tile is mr (<= TT_MR) rows x one panel (TT_NR columns, `ncols` valid) of
 * C over kc steps of K. `init` selects the start value: C itself (later K
 * blocks, or accumulation) or zero; bias is added when non-NULL. */

/* The scalar reference of the fp32 kernels: c = bias (+ c) + a . b, one product at a time. */
static void tile_f32_scalar(int mr, int kc, const float *a, long lda, const float *b, float *c,
                            long ldc, int ncols, int from_c, const float *bias)
{
    for (int i = 0; i < mr; i++) {
        float acc[TT_NR];
        for (int j = 0; j < TT_NR; j++)
            acc[j] = (from_c && j < ncols ? c[i * ldc + j] : 0.0f) + (bias && j < ncols ? bias[j] : 0.0f);
        for (int k = 0; k < kc; k++) {
            float av = a[i * lda + k];
            for (int j = 0; j < TT_NR; j++) acc[j] += av * b[k * TT_NR + j];
        }
        for (int j = 0; j < ncols; j++) c[i * ldc + j] = acc[j];
    }
}

/* The scalar reference of the bf16 kernels, on pairs: acc += a1*b1, then acc += a0*b0, each
 * product and sum rounded to fp32 (the order tt_gemm.h states). */
static void tile_bf16_scalar(int mr, int kc2, const uint16_t *a, long lda, const uint16_t *b, float *c,
                             long ldc, int ncols, int from_c, const float *bias)
{
    for (int i = 0; i < mr; i++) {
        float acc[TT_NR];
        for (int j = 0; j < TT_NR; j++)
            acc[j] = (from_c && j < ncols ? c[i * ldc + j] : 0.0f) + (bias && j < ncols ? bias[j] : 0.0f);
        for (int kk = 0; kk < kc2; kk++) {
            float a0 = tt_bf16_to_f32(a[i * lda + 2 * kk]), a1 = tt_bf16_to_f32(a[i * lda + 2 * kk + 1]);
            for (int j = 0; j < TT_NR; j++) {
                acc[j] += a1 * tt_bf16_to_f32(b[(kk * TT_NR + j) * 2 + 1]);
                acc[j] += a0 * tt_bf16_to_f32(b[(kk * TT_NR + j) * 2]);
            }
        }
        for (int j = 0; j < ncols; j++) c[i * ldc + j] = acc[j];
    }
}

/* AVX-512: TT_MR x 32 accumulators in 24 zmm; A is broadcast from memory. */
#define TILE512_BODY(MRC, LOADB, FMA, STEP)                                                       \
    do {                                                                                         \
        __mmask16 m0 = ncols >= 16 ? 0xffff : (__mmask16)((1u << ncols) - 1);                    \
        __mmask16 m1 = ncols >= 32 ? 0xffff : ncols > 16 ? (__mmask16)((1u << (ncols - 16)) - 1) : 0; \
        __m512 c0[MRC], c1[MRC];                                                                 \
        __m512 bi0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();               \
        __m512 bi1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();          \
        _Pragma("GCC unroll 12") for (int i = 0; i < MRC; i++) {                                 \
            c0[i] = from_c ? _mm512_add_ps(bi0, _mm512_maskz_loadu_ps(m0, c + i * ldc)) : bi0;   \
            c1[i] = from_c ? _mm512_add_ps(bi1, _mm512_maskz_loadu_ps(m1, c + i * ldc + 16)) : bi1; \
        }                                                                                        \
        for (int k = 0; k < kc; k++) {                                                           \
            LOADB;                                                                               \
            _Pragma("GCC unroll 12") for (int i = 0; i < MRC; i++) { FMA; }                      \
        }                                                                                        \
        _Pragma("GCC unroll 12") for (int i = 0; i < MRC; i++) {                                 \
            _mm512_mask_storeu_ps(c + i * ldc, m0, c0[i]);                                       \
            _mm512_mask_storeu_ps(c + i * ldc + 16, m1, c1[i]);                                  \
        }                                                                                        \
        (void)(STEP);                                                                            \
    } while (0)

#define F32_LOADB                                                                                \
    __m512 b0 = _mm512_load_ps(b + k * TT_NR), b1 = _mm512_load_ps(b + k * TT_NR + 16)
#define F32_FMA                                                                                  \
    __m512 av = _mm512_set1_ps(a[i * lda + k]);                                                  \
    c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);                                                      \
    c1[i] = _mm512_fmadd_ps(av, b1, c1[i])

#define DEF_TILE_F32_512(MRC)                                                                    \
    TT_TARGET_AVX512 static void tile_f32_avx512_##MRC(int kc, const float *a, long lda,         \
                                                       const float *b, float *c, long ldc,       \
                                                       int ncols, int from_c, const float *bias) \
    {                                                                                            \
        TILE512_BODY(MRC, F32_LOADB, F32_FMA, 0);                                                \
    }

#define BF16_LOADB                                                                               \
    __m512bh b0 = (__m512bh)_mm512_load_si512(b + k * 2 * TT_NR),                                \
             b1 = (__m512bh)_mm512_load_si512(b + k * 2 * TT_NR + 32)
#define BF16_FMA                                                                                 \
    int32_t pair;                                                                                \
    memcpy(&pair, a + i * lda + 2 * k, 4);                                                       \
    __m512bh av = (__m512bh)_mm512_set1_epi32(pair);                                             \
    c0[i] = _mm512_dpbf16_ps(c0[i], av, b0);                                                     \
    c1[i] = _mm512_dpbf16_ps(c1[i], av, b1)

#define DEF_TILE_BF16_512(MRC)                                                                   \
    TT_TARGET_AVX512BF16 static void tile_bf16_avx512_##MRC(int kc, const uint16_t *a, long lda, \
                                                            const uint16_t *b, float *c, long ldc, \
                                                            int ncols, int from_c,               \
                                                            const float *bias)                   \
    {                                                                                            \
        TILE512_BODY(MRC, BF16_LOADB, BF16_FMA, 0);                                              \
    }

#define FOR_MR(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12)
FOR_MR(DEF_TILE_F32_512)
FOR_MR(DEF_TILE_BF16_512)

typedef void (*tile_f32_fn)(int, const float *, long, const float *, float *, long, int, int,
                            const float *);
typedef void (*tile_bf16_fn)(int, const uint16_t *, long, const uint16_t *, float *, long, int, int,
                             const float *);
#define LIST_F32(MRC) tile_f32_avx512_##MRC,
#define LIST_BF16(MRC) tile_bf16_avx512_##MRC,
static const tile_f32_fn tiles_f32_512[TT_MR] = {FOR_MR(LIST_F32)};
static const tile_bf16_fn tiles_bf16_512[TT_MR] = {FOR_MR(LIST_BF16)};

/* AVX2: 16 ymm registers, so a tile is done as strips of up to 6 rows x 16
 * columns (12 accumulators). bf16 values are widened to fp32 by shifting:
 * a 32-bit pair (lo, hi) gives lo << 16 and hi & 0xffff0000. */
TT_TARGET_AVX2 static inline __m256 mask8(int valid)
{
    const int idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(valid), _mm256_loadu_si256((const __m256i *)idx)));
}

#define DEF_STRIP_AVX2(NAME, ATYPE, BTYPE, KSTEPS, ...)                                           \
    TT_TARGET_AVX2 static void NAME(int rows, int kc, const ATYPE *a, long lda, const BTYPE *b,   \
                                    float *c, long ldc, int ncols, int from_c, const float *bias) \
    {                                                                                            \
        __m256i mk0 = _mm256_castps_si256(mask8(ncols)), mk1 = _mm256_castps_si256(mask8(ncols - 8)); \
        __m256 bi0 = bias ? _mm256_maskload_ps(bias, mk0) : _mm256_setzero_ps();                 \
        __m256 bi1 = bias ? _mm256_maskload_ps(bias + 8, mk1) : _mm256_setzero_ps();             \
        __m256 acc0[6], acc1[6];                                                                 \
        for (int i = 0; i < 6; i++) {                                                            \
            acc0[i] = bi0;                                                                       \
            acc1[i] = bi1;                                                                       \
            if (from_c && i < rows) {                                                            \
                acc0[i] = _mm256_add_ps(acc0[i], _mm256_maskload_ps(c + i * ldc, mk0));          \
                acc1[i] = _mm256_add_ps(acc1[i], _mm256_maskload_ps(c + i * ldc + 8, mk1));      \
            }                                                                                    \
        }                                                                                        \
        for (int k = 0; k < KSTEPS; k++) { __VA_ARGS__ }                                             \
        for (int i = 0; i < rows; i++) {                                                         \
            _mm256_maskstore_ps(c + i * ldc, mk0, acc0[i]);                                      \
            _mm256_maskstore_ps(c + i * ldc + 8, mk1, acc1[i]);                                  \
        }                                                                                        \
    }

DEF_STRIP_AVX2(strip_f32_avx2, float, float, kc, {
    __m256 b0 = _mm256_loadu_ps(b + k * TT_NR), b1 = _mm256_loadu_ps(b + k * TT_NR + 8);
    for (int i = 0; i < 6; i++) {
        if (i < rows) {
            __m256 av = _mm256_broadcast_ss(a + i * lda + k);
            acc0[i] = _mm256_fmadd_ps(av, b0, acc0[i]);
            acc1[i] = _mm256_fmadd_ps(av, b1, acc1[i]);
        }
    }
})

DEF_STRIP_AVX2(strip_bf16_avx2, uint16_t, uint16_t, kc, {
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    __m256i p0 = _mm256_loadu_si256((const __m256i *)(b + k * 2 * TT_NR));
    __m256i p1 = _mm256_loadu_si256((const __m256i *)(b + k * 2 * TT_NR + 16));
    __m256 b0l = _mm256_castsi256_ps(_mm256_slli_epi32(p0, 16)), b0h = _mm256_castsi256_ps(_mm256_and_si256(p0, hi));
    __m256 b1l = _mm256_castsi256_ps(_mm256_slli_epi32(p1, 16)), b1h = _mm256_castsi256_ps(_mm256_and_si256(p1, hi));
    for (int i = 0; i < 6; i++) {
        if (i < rows) {
            int32_t pair;
            memcpy(&pair, a + i * lda + 2 * k, 4);
            __m256i ap = _mm256_set1_epi32(pair);
            __m256 al = _mm256_castsi256_ps(_mm256_slli_epi32(ap, 16)), ah = _mm256_castsi256_ps(_mm256_and_si256(ap, hi));
            acc0[i] = _mm256_fmadd_ps(ah, b0h, acc0[i]);
            acc0[i] = _mm256_fmadd_ps(al, b0l, acc0[i]);
            acc1[i] = _mm256_fmadd_ps(ah, b1h, acc1[i]);
            acc1[i] = _mm256_fmadd_ps(al, b1l, acc1[i]);
        }
    }
})

/* One tile through the chosen ISA. For AVX2 the 32-column panel is split in
 * two 16-column halves (the panel row stride stays TT_NR). */
static void tile_f32(tt_isa isa, int mr, int kc, const float *a, long lda, const float *b, float *c,
                     long ldc, int ncols, int from_c, const float *bias)
{
    if (isa >= TT_ISA_AVX512) {
        tiles_f32_512[mr - 1](kc, a, lda, b, c, ldc, ncols, from_c, bias);
    } else if (isa == TT_ISA_AVX2) {
        for (int h = 0; h < 2 && h * 16 < ncols; h++)
            for (int r = 0; r < mr; r += 6)
                strip_f32_avx2(mr - r < 6 ? mr - r : 6, kc, a + r * lda, lda, b + h * 16, c + r * ldc + h * 16,
                               ldc, ncols - h * 16, from_c, bias ? bias + h * 16 : NULL);
    } else {
        tile_f32_scalar(mr, kc, a, lda, b, c, ldc, ncols, from_c, bias);
    }
}

static void tile_bf16(tt_isa isa, int mr, int kc2, const uint16_t *a, long lda, const uint16_t *b,
                      float *c, long ldc, int ncols, int from_c, const float *bias)
{
    if (isa >= TT_ISA_AVX512BF16) {
        tiles_bf16_512[mr - 1](kc2, a, lda, b, c, ldc, ncols, from_c, bias);
    } else if (isa >= TT_ISA_AVX2) {
        for (int h = 0; h < 2 && h * 16 < ncols; h++)
            for (int r = 0; r < mr; r += 6)
                strip_bf16_avx2(mr - r < 6 ? mr - r : 6, kc2, a + r * lda, lda, b + h * 32, c + r * ldc + h * 16,
                                ldc, ncols - h * 16, from_c, bias ? bias + h * 16 : NULL);
    } else {
        tile_bf16_scalar(mr, kc2, a, lda, b, c, ldc, ncols, from_c, bias);
    }
}

/* ---------- drivers ---------- */

/* The panel slice (kc K steps of panel p from K step k0) as bytes: kc fp32
 * rows or bf16 pairs of TT_NR lanes, 4 bytes each either way. */
static const char *slice_at(const tt_mat *w, int p, int k0)
{
    long elem = w->dtype == TT_F32 ? (long)p * w->kp + k0 : ((long)p * (w->kp / 2) + k0) * 2;
    return (const char *)w->panels + elem * TT_NR * (w->dtype == TT_F32 ? 4 : 2);
}

/* Weights come from L3 or memory the first time a task touches a slice, and
 * the tile then stalls on its B loads. Each row-group tile of the current
 * slice prefetches its share (part of nparts) of a later slice instead. */
static inline void prefetch_share(const char *next, long bytes, int part, int nparts)
{
    long lines = (bytes + 63) / 64, per = (lines + nparts - 1) / nparts;
    long l0 = (long)part * per, l1 = l0 + per < lines ? l0 + per : lines;
    for (long l = l0; l < l1; l++) __builtin_prefetch(next + l * 64, 0, 3);
}

/* The slice `ahead` slices after (panel p, K block k0) in the walk order of tt_gemm_block_with
 * (panels p0..p1-1 of one K block, then the next K block), or NULL past the end. */
static const char *slice_ahead(const tt_mat *w, int p, int k0, int p0, int p1, int kcb, int ksteps, int ahead,
                               int *kc_out)
{
    int span = p1 - p0, idx = p - p0 + ahead;
    int nk0 = k0 + idx / span * kcb, np_ = p0 + idx % span;
    if (nk0 >= ksteps) return NULL;
    *kc_out = ksteps - nk0 < kcb ? ksteps - nk0 : kcb;
    return slice_at(w, np_, nk0);
}

/* ---------- AMX-BF16 (tdpbf16ps) ----------
 * A row group of up to TT_AMX_MR = 32 rows x one panel is 4 C tiles of 16 x 16 fp32: tiles 0, 1
 * hold rows 0-15 (columns 0-15, 16-31), tiles 2, 3 rows 16-31; tile 4 and 5 are A (rows 0-15,
 * 16-31; 16 pairs = 64 bytes a row, from tt_gemm's tiled copy of A or a caller's bf16 rows), tiles 6 and 7 are B: the
 * panel's pair rows are 128 bytes (32 columns x one pair), so 16 pair rows of columns 0-15 are a
 * tile of stride 128 at the slice, columns 16-31 the same at +64 bytes. The packed layout is the
 * vdpbf16ps one unchanged.
 * Tails: a row group of fewer rows gets a tile configuration with that many rows (tile loads and
 * stores then touch only valid rows of A and C); a panel of fewer columns goes through a stack
 * buffer (the panel's lanes past n are zero); the K pairs past the last multiple of 16 are one
 * more step from zero-padded copies of A's and B's tail (past the panel's last row lies the next
 * panel, or the end of the buffer). K blocks are multiples of 16 pairs, so every blocking runs the
 * same steps in the same order. */

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

/* GCC's tile intrinsics do not tell the compiler they read memory, so stores to a staging buffer
 * could be moved past them; these do ("memory"). */
#define AMX_LOAD(t, base, stride) \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"((const void *)(base)), "r"((long)(stride)) : "memory")
#define AMX_STORE(t, base, stride) \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"((void *)(base)), "r"((long)(stride)) : "memory")
#define AMX_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::)
#define AMX_DP(c, a, b) __asm__ volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)

TT_TARGET_AMXBF16 static void amx_configure(int r0, int r1)
{
    amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    const int rows[8] = {r0, r0, r1, r1, r0, r1, TT_AMX_KS, TT_AMX_KS};
    for (int t = 0; t < 8; t++)
        if (rows[t] > 0) cfg.rows[t] = (uint8_t)rows[t], cfg.colsb[t] = 64;
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg) : "memory");
}

TT_TARGET_AMXBF16 static void amx_release(void) { __asm__ volatile("tilerelease" ::: "memory"); }

/* One row group x one panel over a K block: C from ci (stride ldi floats; NULL: zero), nsteps steps
 * of 16 pairs from a (stride lda bf16) and b (the slice, 128 bytes a pair row), then one step from
 * the staged tails at (32 rows x 64 bytes) and bt (16 pair rows x 128 bytes) when at != NULL;
 * stored to co (stride ldo floats). TWO: the configuration has rows 16-31 (tiles 2, 3, 5). */
#define AMX_TILE_BODY(TWO)                                                                        \
    do {                                                                                          \
        if (ci != NULL) {                                                                         \
            AMX_LOAD(0, ci, ldi * 4);                                                             \
            AMX_LOAD(1, ci + 16, ldi * 4);                                                        \
            if (TWO) { AMX_LOAD(2, ci + 16 * ldi, ldi * 4); AMX_LOAD(3, ci + 16 * ldi + 16, ldi * 4); }\
        } else {                                                                                  \
            AMX_ZERO(0);                                                                          \
            AMX_ZERO(1);                                                                          \
            if (TWO) { AMX_ZERO(2); AMX_ZERO(3); }                                                \
        }                                                                                         \
        for (int s = 0; s <= nsteps; s++) {                                                       \
            const uint16_t *as = a + (long)s * astep, *bs = b + (long)s * TT_AMX_KS * 2 * TT_NR;  \
            long sa = lda * 2;                                                                    \
            if (s == nsteps) {                                                                    \
                if (at == NULL) break;                                                            \
                as = at, bs = bt, sa = 64;                                                        \
            }                                                                                     \
            if (s < nsteps) {                                                                     \
                for (long o = 0; o < pfa_step; o += 64) __builtin_prefetch(pfa + s * pfa_step + o, 0, 2); \
                for (long o = 0; o < pfb_step; o += 64) __builtin_prefetch(pfb + s * pfb_step + o, 0, 2); \
            }                                                                                     \
            AMX_LOAD(4, as, sa);                                                                  \
            if (TWO) AMX_LOAD(5, as + 16 * sa / 2, sa);                                           \
            AMX_LOAD(6, bs, 128);                                                                 \
            AMX_LOAD(7, bs + 32, 128);                                                            \
            AMX_DP(0, 4, 6);                                                                      \
            AMX_DP(1, 4, 7);                                                                      \
            if (TWO) { AMX_DP(2, 5, 6); AMX_DP(3, 5, 7); }                                        \
        }                                                                                         \
        AMX_STORE(0, co, ldo * 4);                                                                \
        AMX_STORE(1, co + 16, ldo * 4);                                                           \
        if (TWO) { AMX_STORE(2, co + 16 * ldo, ldo * 4); AMX_STORE(3, co + 16 * ldo + 16, ldo * 4); }\
    } while (0)

TT_TARGET_AMXBF16 static void amx_tile32(int nsteps, const uint16_t *a, long lda, long astep, const uint16_t *b,
                                          const uint16_t *at, const uint16_t *bt, const float *ci, long ldi,
                                          float *co, long ldo, const char *pfa, long pfa_step, const char *pfb,
                                          long pfb_step)
{
    AMX_TILE_BODY(1);
}

TT_TARGET_AMXBF16 static void amx_tile16(int nsteps, const uint16_t *a, long lda, long astep, const uint16_t *b,
                                          const uint16_t *at, const uint16_t *bt, const float *ci, long ldi,
                                          float *co, long ldo, const char *pfa, long pfa_step, const char *pfb,
                                          long pfb_step)
{
    AMX_TILE_BODY(0);
}

/* dst[0:rows][0:32] (stride 32) = (from ? from[i][j] : 0) + (bias ? bias[j] : 0) for j < ncols, 0 past. */
static void amx_stage_init(float *dst, int rows, int ncols, const float *from, long ldf, const float *bias)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < TT_NR; j++)
            dst[i * TT_NR + j] = j < ncols ? (from ? from[i * ldf + j] : 0.0f) + (bias ? bias[j] : 0.0f) : 0.0f;
}

/* tt_gemm_block_with for bf16 on AMX (see the section comment); the caller applies the activation. */
TT_TARGET_AMXBF16 static void block_amx(const tt_blocking *bk, const tt_mat *w, const uint16_t *a, long lda,
                                         int tiled, float *c, long ldc, int m0, int m1, int p0, int p1, int accum)
{
    enum { KS = TT_AMX_KS, MR = TT_AMX_MR };
    _Alignas(64) float stage[MR * TT_NR], binit[MR * TT_NR];
    _Alignas(64) uint16_t atail[MR * 2 * KS], btail[KS * 2 * TT_NR];
    int ksteps = w->kp / 2;
    int kcmax = ((bk->kc > 0 ? bk->kc : tt_blocking_builtin.kc) + KS - 1) / KS * KS;
    int nkb = (ksteps + kcmax - 1) / kcmax;
    int kcb = nkb > 1 ? ((ksteps + nkb - 1) / nkb + KS - 1) / KS * KS : kcmax;
    int kfull = ksteps / KS * KS, kt = ksteps - kfull;
    int mfull = m0 + (m1 - m0) / MR * MR, edge = m1 - mfull;
    int cur = -1; /* the loaded configuration: rows of the first half * 64 + rows of the second */
    if (kt > 0) memset(btail, 0, sizeof btail);
    for (int k0 = 0; k0 < ksteps || k0 == 0; k0 += kcb) {
        int kc = ksteps - k0 < kcb ? ksteps - k0 : kcb;
        int first = k0 == 0, last = k0 + kc >= ksteps;
        int nsteps = (last ? kfull - k0 : kc) / KS, tail = last && kt > 0;
        for (int pass = 0; pass < 2; pass++) {
            int r0 = pass == 0 ? m0 : mfull, r1 = pass == 0 ? mfull : m1;
            if (r0 >= r1) continue;
            int h0 = pass == 0 ? 16 : edge < 16 ? edge : 16, h1 = pass == 0 ? 16 : edge - h0;
            if (cur != h0 * 64 + h1) amx_configure(h0, h1), cur = h0 * 64 + h1;
            for (int p = p0; p < p1; p++) {
                int col = p * TT_NR, ncols = w->n - col < TT_NR ? w->n - col : TT_NR;
                const float *bias = first && w->bias ? w->bias + col : NULL;
                const uint16_t *bp = (const uint16_t *)w->panels + ((long)p * ksteps + k0) * 2 * TT_NR;
                if (tail) memcpy(btail, bp + (long)nsteps * KS * 2 * TT_NR, (size_t)kt * 2 * TT_NR * 2);
                if (bias && !accum) amx_stage_init(binit, MR, ncols, NULL, 0, bias);
                int nkc = 0;
                const char *next = bk->pf > 0 ? slice_ahead(w, p, k0, p0, p1, kcb, ksteps, bk->pf, &nkc) : NULL;
                int ngroups = (r1 - r0 + MR - 1) / MR;
                for (int r = r0; r < r1; r += MR) {
                    int mr = r1 - r < MR ? r1 - r : MR;
                    /* into L2, spread over the steps: this group's share of a later panel slice and,
                     * from the first panel, the next group's A (tiled: one run of memory) */
                    const char *pfa = NULL, *pfb = NULL;
                    long pfa_step = 0, pfb_step = 0;
                    if (next != NULL && nsteps > 0) {
                        long share = ((long)nkc * TT_NR * 4 / ngroups + 63) / 64 * 64;
                        pfb = next + (long)((r - r0) / MR) * share, pfb_step = (share / nsteps + 63) / 64 * 64;
                    }
                    if (bk->pf > 0 && tiled && p == p0 && r + MR < r1 && nsteps > 0) {
                        int mrn = r1 - r - MR < MR ? r1 - r - MR : MR;
                        pfa = (const char *)(a + (long)(r + MR) * lda + (long)(k0 / KS) * mrn * 2 * KS);
                        pfa_step = (long)mrn * 2 * KS * 2;
                    }
                    float *cp = c + (long)r * ldc + col;
                    /* tiled: lda is the row length of the layout, a row group's steps follow each other */
                    const uint16_t *ap = tiled ? a + (long)r * lda + (long)(k0 / KS) * mr * 2 * KS
                                               : a + (long)r * lda + 2 * k0;
                    long astep = tiled ? (long)mr * 2 * KS : 2 * KS, ald = tiled ? 2 * KS : lda;
                    const uint16_t *at = !tail ? NULL : tiled ? ap + nsteps * astep : atail;
                    const float *ci = cp;
                    long ldi = ldc;
                    if (first && !accum && !bias) ci = NULL;
                    else if (bias && !accum) ci = binit, ldi = TT_NR;
                    else if (bias || ncols < TT_NR) {
                        amx_stage_init(stage, mr, ncols, cp, ldc, bias);
                        ci = stage, ldi = TT_NR;
                    }
                    if (tail && !tiled) {
                        memset(atail, 0, sizeof atail);
                        for (int i = 0; i < mr; i++)
                            memcpy(atail + i * 2 * KS, a + (long)(r + i) * lda + 2 * kfull, (size_t)kt * 4);
                    }
                    float *co = ncols < TT_NR ? stage : cp;
                    long ldo = ncols < TT_NR ? TT_NR : ldc;
                    if (h1 > 0)
                        amx_tile32(nsteps, ap, ald, astep, bp, at, btail, ci, ldi, co, ldo, pfa, pfa_step, pfb, pfb_step);
                    else
                        amx_tile16(nsteps, ap, ald, astep, bp, at, btail, ci, ldi, co, ldo, pfa, pfa_step, pfb, pfb_step);
                    if (co == stage)
                        for (int i = 0; i < mr; i++) memcpy(cp + (long)i * ldc, stage + i * TT_NR, sizeof(float) * ncols);
                }
            }
        }
        if (kc == 0) break;
    }
    amx_release();
}

void tt_gemm_block(const tt_mat *w, const void *a, long lda, float *c, long ldc, int m0, int m1,
                   int p0, int p1, int flags)
{
    tt_gemm_block_with(&tt_blocking_builtin, w, a, lda, c, ldc, m0, m1, p0, p1, flags);
}

/* The vector walk (scalar, AVX2, AVX-512, vdpbf16ps): K in equal blocks of at most bk->kc steps (a
 * panel slice stays in L1), each block over every panel and row group of TT_MR rows. */
static void block_vec(const tt_blocking *bk, const tt_mat *w, const void *a, long lda, float *c, long ldc,
                      int m0, int m1, int p0, int p1, int accum)
{
    int f32 = w->dtype == TT_F32;
    int ksteps = f32 ? w->kp : w->kp / 2; /* fp32 rows or bf16 pairs */
    int kcmax = bk->kc > 0 ? bk->kc : tt_blocking_builtin.kc;
    /* equal K blocks (no short last one): e.g. 576 pairs as 2 x 288, not 256 + 256 + 64 */
    int nkb = (ksteps + kcmax - 1) / kcmax, kcb = nkb > 1 ? (ksteps + nkb - 1) / nkb : kcmax;
    for (int k0 = 0; k0 < ksteps || k0 == 0; k0 += kcb) {
        int kc = ksteps - k0 < kcb ? ksteps - k0 : kcb;
        int first = k0 == 0;
        for (int p = p0; p < p1; p++) {
            int col = p * TT_NR;
            int ncols = w->n - col < TT_NR ? w->n - col : TT_NR;
            const float *bias = first && w->bias ? w->bias + col : NULL;
            int nkc = 0;
            const char *next = bk->pf > 0 ? slice_ahead(w, p, k0, p0, p1, kcb, ksteps, bk->pf, &nkc) : NULL;
            int ngroups = (m1 - m0 + TT_MR - 1) / TT_MR;
            for (int r = m0; r < m1; r += TT_MR) {
                int mr = m1 - r < TT_MR ? m1 - r : TT_MR;
                if (next != NULL) prefetch_share(next, (long)nkc * TT_NR * 4, (r - m0) / TT_MR, ngroups);
                float *cp = c + (long)r * ldc + col;
                if (f32) {
                    const float *bp = (const float *)w->panels + ((long)p * w->kp + k0) * TT_NR;
                    tile_f32(w->isa, mr, kc, (const float *)a + (long)r * lda + k0, lda, bp, cp, ldc,
                             ncols, accum || !first, bias);
                } else {
                    const uint16_t *bp = (const uint16_t *)w->panels + ((long)p * (w->kp / 2) + k0) * 2 * TT_NR;
                    tile_bf16(w->isa, mr, kc, (const uint16_t *)a + (long)r * lda + 2 * k0, lda, bp, cp,
                              ldc, ncols, accum || !first, bias);
                }
            }
        }
        if (kc == 0) break;
    }
}

static int runs_amx(const tt_mat *w) { return w->dtype == TT_BF16 && w->isa >= TT_ISA_AMXBF16 && tt_cpu_amx_permitted(); }

/* tt_gemm's bf16 copy of A on AMX: per row group of TT_AMX_MR rows (mr in the last one), per K step
 * of TT_AMX_KS pairs, the group's mr rows of that step one after the other (64 bytes each, zero past
 * kp): every A tile is 1 KiB of consecutive memory. Row-major rows of 4 KiB (k = 2048) would put
 * the 16 rows of a tile in one L1 set; this way a tile load is 16 consecutive cache lines.
 * tiled_ld: the elements a row takes, so row group r starts at r * tiled_ld. */
static long tiled_ld(const tt_mat *w) { return ((long)w->kp + 2 * TT_AMX_KS - 1) / (2 * TT_AMX_KS) * (2 * TT_AMX_KS); }

/* C[m0:m1][panels p0:p1] (+)= A[m0:m1][0:k] . W^T + bias, then act: bf16 on AMX in row groups of
 * TT_AMX_MR rows, everything else in row groups of TT_MR rows. tiled: A is tt_gemm's tiled copy
 * (AMX only), lda its tiled_ld, m0 a multiple of TT_AMX_MR and m1 the end of A or of a group. */
static void block_dispatch(const tt_blocking *bk, const tt_mat *w, const void *a, long lda, int tiled, float *c,
                           long ldc, int m0, int m1, int p0, int p1, int flags)
{
    int accum = (flags & TT_GEMM_ACCUM) != 0;
    tt_act act = (tt_act)(flags & 0xff);
    if (runs_amx(w))
        block_amx(bk, w, (const uint16_t *)a, lda, tiled, c, ldc, m0, m1, p0, p1, accum);
    else
        block_vec(bk, w, a, lda, c, ldc, m0, m1, p0, p1, accum);
    if (act != TT_ACT_NONE) {
        int c0 = p0 * TT_NR, c1 = p1 * TT_NR < w->n ? p1 * TT_NR : w->n;
        for (int r = m0; r < m1; r++) tt_act_inplace(w->isa, act, c + (long)r * ldc + c0, c1 - c0);
    }
}

void tt_gemm_block_with(const tt_blocking *bk, const tt_mat *w, const void *a, long lda, float *c, long ldc,
                        int m0, int m1, int p0, int p1, int flags)
{
    block_dispatch(bk, w, a, lda, 0, c, ldc, m0, m1, p0, p1, flags);
}

int tt_gemm_group_rows(const tt_mat *w)
{
    return w->dtype == TT_BF16 && w->isa >= TT_ISA_AMXBF16 ? TT_AMX_MR : TT_MR;
}

size_t tt_gemm_ws_bytes(const tt_mat *w, int m)
{
    if (w->dtype != TT_BF16) return 0;
    return (size_t)m * (size_t)(runs_amx(w) ? tiled_ld(w) : w->kp) * 2;
}

size_t tt_gemm_ws_bound(int m, int k) { return (size_t)m * (((size_t)k + 2 * TT_AMX_KS - 1) & ~(size_t)(2 * TT_AMX_KS - 1)) * 2; }

typedef struct {
    const tt_mat *w;
    const tt_blocking *bk;
    const void *a;
    long lda;
    float *c;
    long ldc;
    int m, flags, rows, mblocks, nblocks; /* rows: per task (bk->mb row groups) */
    int tiled;                            /* a is the tiled copy of A (AMX) */
    const float *a32; /* bf16 conversion source */
    long lda32;
} gemm_job;

static void gemm_task(void *arg, int task, int thread)
{
    (void)thread;
    gemm_job *j = arg;
    /* AMX: the tasks of one row block follow each other, so its A (tiled, the whole K) stays in L2
     * while the weights stream past once per row block; at ~2 TFLOP/s a row block of A re-read from
     * L3 for every column block cost more than the weights. Vector kernels: column blocks outer. */
    int mb = j->tiled ? task / j->nblocks : task % j->mblocks, nb = j->tiled ? task % j->nblocks : task / j->mblocks;
    int m0 = mb * j->rows, m1 = m0 + j->rows < j->m ? m0 + j->rows : j->m;
    int p0 = nb * j->bk->nb, p1 = p0 + j->bk->nb < j->w->npanels ? p0 + j->bk->nb : j->w->npanels;
    block_dispatch(j->bk, j->w, j->a, j->lda, j->tiled, j->c, j->ldc, m0, m1, p0, p1, j->flags);
}

/* Rows [m0, m1) of A (fp32, stride lds) into the tiled layout of runs_amx at dst (row length ld), A
 * having m rows in all (the last row group may be short); m0 is a multiple of TT_AMX_MR. The same
 * rounding as tt_to_bf16_rows (tt_bf16x16), zeros past k. AMX implies AVX-512. */
TT_TARGET_AVX512 static void to_bf16_tiled(const float *src, long lds, uint16_t *dst, long ld, int m0, int m1,
                                           int m, int k)
{
    enum { S = 2 * TT_AMX_KS }; /* bf16 values of a step */
    for (int g = m0; g < m1; g += TT_AMX_MR) {
        int mr = m - g < TT_AMX_MR ? m - g : TT_AMX_MR;
        uint16_t *gd = dst + (long)g * ld;
        for (int i = 0; i < mr; i++) {
            const float *row = src + (long)(g + i) * lds;
            for (long s = 0; s < ld / S; s++) {
                int n = k - (int)s * S;
                __mmask16 lo = n >= 16 ? 0xffff : n > 0 ? (__mmask16)((1u << n) - 1) : 0;
                __mmask16 hi = n >= 32 ? 0xffff : n > 16 ? (__mmask16)((1u << (n - 16)) - 1) : 0;
                uint16_t *d = gd + (s * mr + i) * S;
                _mm256_storeu_si256((__m256i *)d, tt_bf16x16(_mm512_maskz_loadu_ps(lo, row + s * S)));
                _mm256_storeu_si256((__m256i *)(d + 16), tt_bf16x16(_mm512_maskz_loadu_ps(hi, row + s * S + 16)));
            }
        }
    }
}

static void convert_task(void *arg, int task, int thread)
{
    (void)thread;
    gemm_job *j = arg;
    int m0 = task * j->rows, m1 = m0 + j->rows < j->m ? m0 + j->rows : j->m;
    if (j->tiled) to_bf16_tiled(j->a32, j->lda32, (uint16_t *)j->a, j->lda, m0, m1, j->m, j->w->k);
    else
        tt_to_bf16_rows(j->w->isa, j->a32 + (long)m0 * j->lda32, j->lda32, (uint16_t *)j->a + (long)m0 * j->lda,
                        j->lda, m1 - m0, j->w->k);
}

static const tt_blocking *plan_pick(const tt_gemm_plan *plan, int m)
{
    if (plan == NULL || plan->n <= 0) return &tt_blocking_builtin;
    for (int i = 0; i < plan->n - 1; i++)
        if (m <= plan->max_rows[i]) return &plan->b[i];
    return &plan->b[plan->n - 1];
}

/* C[m][n] (+)= A[m][k] . W^T + bias, act: (bf16: A rounded into ws first, in parallel) then tasks of
 * mb row groups x nb panels on the pool, each a tt_gemm_block_with. */
void tt_gemm(tt_pool *pool, const tt_gemm_plan *plan, const tt_mat *w, const float *a, long lda, float *c,
             long ldc, int m, int flags, void *ws)
{
    if (m <= 0) return;
    const tt_blocking *bk = plan_pick(plan, m);
    int rows = (bk->mb > 0 ? bk->mb : tt_blocking_builtin.mb) * tt_gemm_group_rows(w);
    int nbp = bk->nb > 0 ? bk->nb : tt_blocking_builtin.nb;
    tt_blocking eff = *bk;
    eff.nb = nbp;
    gemm_job j = {w, &eff, a, lda, c, ldc, m, flags, rows, (m + rows - 1) / rows, (w->npanels + nbp - 1) / nbp,
                  runs_amx(w), a, lda};
    if (w->dtype == TT_BF16) {
        j.a = ws;
        j.lda = j.tiled ? tiled_ld(w) : w->kp;
        tt_pool_run(pool, j.mblocks, convert_task, &j);
    }
    tt_pool_run(pool, j.mblocks * j.nblocks, gemm_task, &j);
}

/* ---------- peak microbenchmark ---------- */

/* The peak loop of vfmadd231ps: 16 independent accumulators hide the FMA latency. */
TT_TARGET_AVX512 static double peak_f32(long iters)
{
    __m512 acc[16], x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
    for (int i = 0; i < 16; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
        __asm__ volatile("" : "+v"(x));
    }
    float s = 0;
    for (int i = 0; i < 16; i++) s += _mm512_reduce_add_ps(acc[i]);
    return (double)s;
}

/* The peak loop of vdpbf16ps (2 multiply-adds per fp32 lane). */
TT_TARGET_AVX512BF16 static double peak_bf16(long iters)
{
    __m512 acc[16];
    __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x3f803f80);
    for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) acc[i] = _mm512_dpbf16_ps(acc[i], x, y);
        __asm__ volatile("" : "+v"(x));
    }
    float s = 0;
    for (int i = 0; i < 16; i++) s += _mm512_reduce_add_ps(acc[i]);
    return (double)s;
}

/* tdpbf16ps on register tiles: 4 C tiles (16 x 16 fp32) from 2 A and 2 B tiles of 16 x 32 bf16,
 * the AMX micro-kernel's shape without its loads. */
TT_TARGET_AMXBF16 static double peak_amx(long iters)
{
    _Alignas(64) uint16_t one[16 * 32];
    _Alignas(64) float out[16 * 16];
    for (int i = 0; i < 16 * 32; i++) one[i] = 0x3f80; /* 1.0: the sums stay exact and finite */
    amx_configure(16, 16);
    AMX_ZERO(0);
    AMX_ZERO(1);
    AMX_ZERO(2);
    AMX_ZERO(3);
    AMX_LOAD(4, one, 64);
    AMX_LOAD(5, one, 64);
    AMX_LOAD(6, one, 64);
    AMX_LOAD(7, one, 64);
    for (long it = 0; it < iters; it++) {
        AMX_DP(0, 4, 6);
        AMX_DP(1, 4, 7);
        AMX_DP(2, 5, 6);
        AMX_DP(3, 5, 7);
    }
    AMX_STORE(0, out, 64);
    amx_release();
    return (double)out[0];
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

tt_isa tt_peak_isa(tt_dtype dtype)
{
    tt_isa best = tt_cpu_best_isa();
    if (dtype == TT_BF16 && best >= TT_ISA_AMXBF16) return TT_ISA_AMXBF16;
    if (dtype == TT_BF16) return best >= TT_ISA_AVX512BF16 ? TT_ISA_AVX512BF16 : TT_ISA_SCALAR;
    return best >= TT_ISA_AVX512 ? TT_ISA_AVX512 : TT_ISA_SCALAR;
}

double tt_peak_gflops_isa(tt_isa isa, tt_dtype dtype, long iters)
{
    double t0, t1, flops;
    volatile double sink;
    if (!tt_cpu_supports(isa)) return 0.0;
    if (dtype == TT_F32 && isa >= TT_ISA_AVX512) {
        t0 = now_s();
        sink = peak_f32(iters);
        t1 = now_s();
        flops = (double)iters * 16 * 16 * 2;
    } else if (dtype == TT_BF16 && isa >= TT_ISA_AMXBF16) {
        long n = iters / 8 > 0 ? iters / 8 : 1; /* about as long as the vdpbf16ps loop of iters */
        t0 = now_s();
        sink = peak_amx(n);
        t1 = now_s();
        flops = (double)n * 4 * 16 * 16 * 32 * 2;
    } else if (dtype == TT_BF16 && isa >= TT_ISA_AVX512BF16) {
        t0 = now_s();
        sink = peak_bf16(iters);
        t1 = now_s();
        flops = (double)iters * 16 * 32 * 2;
    } else {
        return 0.0;
    }
    (void)sink;
    return flops / (t1 - t0) * 1e-9;
}

double tt_peak_gflops(tt_dtype dtype, long iters) { return tt_peak_gflops_isa(tt_peak_isa(dtype), dtype, iters); }

typedef struct {
    tt_isa isa;
    tt_dtype dtype;
    long iters;
    int n;
    int started; /* atomic: tasks that reached the start line */
    double gflops[256];
} peak_job;

static void peak_task(void *arg, int task, int thread)
{
    (void)thread;
    peak_job *j = arg;
    /* Start together: a thread holds at most one task while it waits here, so
     * the other tasks are necessarily running on other threads. */
    __atomic_add_fetch(&j->started, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(&j->started, __ATOMIC_ACQUIRE) < j->n) __builtin_ia32_pause();
    j->gflops[task] = tt_peak_gflops_isa(j->isa, j->dtype, j->iters);
}

double tt_peak_gflops_pool(tt_pool *pool, tt_dtype dtype, long iters)
{
    return tt_peak_gflops_pool_isa(pool, tt_peak_isa(dtype), dtype, iters);
}

double tt_peak_gflops_pool_isa(tt_pool *pool, tt_isa isa, tt_dtype dtype, long iters)
{
    peak_job j;
    memset(&j, 0, sizeof j);
    j.isa = isa;
    j.dtype = dtype;
    j.iters = iters;
    int n = tt_pool_threads(pool);
    if (n > 256) n = 256;
    j.n = n;
    tt_pool_run(pool, n, peak_task, &j);
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += j.gflops[i];
    return sum;
}
