/* tt_ops.c: the row operations of tt_ops.h. Each op has its scalar
 * reference first, then its vector versions, then one dispatch function that
 * picks by isa; tt_selftest.c holds each fast version to its reference. */
#include "tt_ops.h"

#include <immintrin.h>
#include <math.h>

#include "tt_bf16.h"
#include "tt_bf16_avx512.h"
#include "tt_exp.h"

#define TT_INV_SQRT2 0.70710678118654752f      /* 1/sqrt(2), exact-erf GELU */
#define TT_SQRT_2_OVER_PI 0.7978845608028654f  /* sqrt(2/pi), GELU-tanh */
#define TT_GELU_TANH_CUBIC 0.044715f           /* GELU-tanh's x^3 coefficient */

/* ---------- scalar references ---------- */

static float act_scalar(tt_act act, float v)
{
    switch (act) {
    case TT_ACT_NONE: return v;
    case TT_ACT_RELU: return v > 0.0f ? v : 0.0f;
    case TT_ACT_GELU: return 0.5f * v * (1.0f + erff(v * TT_INV_SQRT2));
    case TT_ACT_SILU: return v / (1.0f + expf(-v));
    }
    return v;
}

static void layernorm_row_scalar(const float *x, float *y, int n, const float *g, const float *b,
                                 float eps)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += x[i];
    float mean = (float)(s / n);
    double v = 0.0;
    for (int i = 0; i < n; i++) v += (double)(x[i] - mean) * (x[i] - mean);
    float inv = 1.0f / sqrtf((float)(v / n) + eps);
    for (int i = 0; i < n; i++) y[i] = (x[i] - mean) * inv * g[i] + b[i];
}

static void softmax_row_scalar(float *x, int n, float scale)
{
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = fmaxf(mx, x[i] * scale);
    double s = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] * scale - mx);
        s += x[i];
    }
    float inv = (float)(1.0 / s);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

static float softmax_unnorm_row_scalar(float *x, uint16_t *bf, int n, float scale)
{
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = fmaxf(mx, x[i] * scale);
    double s = 0.0;
    for (int i = 0; i < n; i++) {
        float e = expf(x[i] * scale - mx);
        s += e;
        if (bf) bf[i] = tt_f32_to_bf16(e);
        else x[i] = e;
    }
    if (bf && (n & 1)) bf[n] = 0;
    return (float)s;
}

static float rms_inv_scalar(const float *x, int n, float eps)
{
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    return 1.0f / sqrtf(ss / (float)n + eps);
}

static float gelu_tanh_scalar(float x)
{
    return 0.5f * x * (1.0f + tanhf(TT_SQRT_2_OVER_PI * (x + TT_GELU_TANH_CUBIC * x * x * x)));
}

/* ---------- AVX-512 ---------- */

/* erf(x) by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7):
 * erf(x) = 1 - (a1 t + ... + a5 t^5) e^{-x^2}, t = 1/(1 + p|x|), odd symmetry. */
#define AS_P 0.3275911f
#define AS_A1 0.254829592f
#define AS_A2 (-0.284496736f)
#define AS_A3 1.421413741f
#define AS_A4 (-1.453152027f)
#define AS_A5 1.061405429f
TT_TARGET_AVX512 static inline __m512 erf512(__m512 x)
{
    __m512 ax = _mm512_abs_ps(x);
    __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f),
                             _mm512_fmadd_ps(ax, _mm512_set1_ps(AS_P), _mm512_set1_ps(1.0f)));
    __m512 p = _mm512_set1_ps(AS_A5);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(AS_A4));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(AS_A3));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(AS_A2));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(AS_A1));
    p = _mm512_mul_ps(p, t);
    __m512 e = tt_exp512(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), ax), ax));
    __m512 y = _mm512_fnmadd_ps(p, e, _mm512_set1_ps(1.0f));
    /* copy the sign of x */
    return _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_castps_si512(y),
        _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
}

TT_TARGET_AVX512 static inline __m512 act512(tt_act act, __m512 v)
{
    switch (act) {
    case TT_ACT_NONE: return v;
    case TT_ACT_RELU: return _mm512_max_ps(v, _mm512_setzero_ps());
    case TT_ACT_GELU:
        return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v),
                             _mm512_add_ps(_mm512_set1_ps(1.0f),
                                           erf512(_mm512_mul_ps(v, _mm512_set1_ps(TT_INV_SQRT2)))));
    case TT_ACT_SILU:
        return _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f),
                                              tt_exp512(_mm512_sub_ps(_mm512_setzero_ps(), v))));
    }
    return v;
}

TT_TARGET_AVX512 static void act_avx512(tt_act act, float *x, long n)
{
    long i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, act512(act, _mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(x + i, m, act512(act, _mm512_maskz_loadu_ps(m, x + i)));
    }
}

TT_TARGET_AVX512 static void layernorm_row_avx512(const float *x, float *y, int n, const float *g,
                                                  const float *b, float eps)
{
    __m512 s = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) s = _mm512_add_ps(s, _mm512_loadu_ps(x + i));
    __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
    if (i < n) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(tail, x + i));
    float mean = _mm512_reduce_add_ps(s) / (float)n;
    __m512 vm = _mm512_set1_ps(mean);
    __m512 v = _mm512_setzero_ps();
    for (i = 0; i + 16 <= n; i += 16) {
        __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + i), vm);
        v = _mm512_fmadd_ps(d, d, v);
    }
    if (i < n) {
        __m512 d = _mm512_maskz_sub_ps(tail, _mm512_maskz_loadu_ps(tail, x + i), vm);
        v = _mm512_fmadd_ps(d, d, v);
    }
    float inv = 1.0f / sqrtf(_mm512_reduce_add_ps(v) / (float)n + eps);
    __m512 vi = _mm512_set1_ps(inv);
    for (i = 0; i + 16 <= n; i += 16) {
        __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm), vi);
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(d, _mm512_loadu_ps(g + i), _mm512_loadu_ps(b + i)));
    }
    if (i < n) {
        __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + i), vm), vi);
        _mm512_mask_storeu_ps(y + i, tail,
                              _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(tail, g + i),
                                              _mm512_maskz_loadu_ps(tail, b + i)));
    }
}

TT_TARGET_AVX512 static float softmax_unnorm_row_avx512(float *x, uint16_t *bf, int n, float scale)
{
    __m512 vs = _mm512_set1_ps(scale);
    __m512 mx = _mm512_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 16 <= n; i += 16) mx = _mm512_max_ps(mx, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
    __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
    if (i < n)
        mx = _mm512_mask_max_ps(mx, tail, mx, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), vs));
    __m512 vmx = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (i = 0; i + 16 <= n; i += 16) {
        __m512 e = tt_exp512(_mm512_fmsub_ps(_mm512_loadu_ps(x + i), vs, vmx));
        sum = _mm512_add_ps(sum, e);
        if (bf) _mm256_storeu_si256((__m256i *)(bf + i), tt_bf16x16(e));
        else _mm512_storeu_ps(x + i, e);
    }
    if (i < n) {
        __m512 e = _mm512_maskz_mov_ps(tail, tt_exp512(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(tail, x + i), vs, vmx)));
        sum = _mm512_add_ps(sum, e);
        if (bf) {
            /* the zero pad of an odd n comes with the masked-off lanes */
            __mmask16 st = (__mmask16)((1u << (n - i + (n & 1))) - 1);
            _mm256_mask_storeu_epi16(bf + i, st, tt_bf16x16(e));
        } else {
            _mm512_mask_storeu_ps(x + i, tail, e);
        }
    }
    return _mm512_reduce_add_ps(sum);
}

/* softmax(scale x) in place: the unnormalised row, then one scale by 1/sum. */
TT_TARGET_AVX512 static void softmax_row_avx512(float *x, int n, float scale)
{
    __m512 inv = _mm512_set1_ps(1.0f / softmax_unnorm_row_avx512(x, NULL, n, scale));
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
    __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
    if (i < n) _mm512_mask_storeu_ps(x + i, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), inv));
}


TT_TARGET_AVX512 static float rms_inv_avx512(const float *x, int n, float eps)
{
    __m512 acc = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        acc = _mm512_fmadd_ps(v, v, acc);
    }
    float ss = _mm512_reduce_add_ps(acc);
    for (; i < n; i++) ss += x[i] * x[i];
    return 1.0f / sqrtf(ss / (float)n + eps);
}

/* gelu_tanh(x) = x * sigmoid(2u) = x / (1 + e^{-2u}), u = sqrt(2/pi) (x + 0.044715 x^3). */
TT_TARGET_AVX512 static inline __m512 gelu_tanh512(__m512 x)
{
    __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
    __m512 u = _mm512_mul_ps(_mm512_set1_ps(TT_SQRT_2_OVER_PI),
                             _mm512_fmadd_ps(_mm512_set1_ps(TT_GELU_TANH_CUBIC), x3, x));
    __m512 e = tt_exp512(_mm512_mul_ps(_mm512_set1_ps(-2.0f), u));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

TT_TARGET_AVX512 static void gelu_tanh_mul_avx512(float *g, const float *u, long n)
{
    long i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = gelu_tanh512(_mm512_loadu_ps(g + i));
        if (u) v = _mm512_mul_ps(v, _mm512_loadu_ps(u + i));
        _mm512_storeu_ps(g + i, v);
    }
    for (; i < n; i++) g[i] = gelu_tanh_scalar(g[i]) * (u ? u[i] : 1.0f);
}

/* ---------- AVX2 (the ops whose AVX2 machines would otherwise run scalar on a hot path) ---------- */

TT_TARGET_AVX2 static float rms_inv_avx2(const float *x, int n, float eps)
{
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        acc = _mm256_fmadd_ps(v, v, acc);
    }
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float ss = _mm_cvtss_f32(h);
    for (; i < n; i++) ss += x[i] * x[i];
    return 1.0f / sqrtf(ss / (float)n + eps);
}

/* gelu_tanh_mul_avx512 on 8 lanes: the same formula and the same exp, so both give the same bits. */
TT_TARGET_AVX2 static void gelu_tanh_mul_avx2(float *g, const float *u, long n)
{
    long i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
        __m256 t = _mm256_mul_ps(_mm256_set1_ps(TT_SQRT_2_OVER_PI),
                                 _mm256_fmadd_ps(_mm256_set1_ps(TT_GELU_TANH_CUBIC), x3, x));
        __m256 e = tt_exp256(_mm256_mul_ps(_mm256_set1_ps(-2.0f), t));
        __m256 v = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        if (u) v = _mm256_mul_ps(v, _mm256_loadu_ps(u + i));
        _mm256_storeu_ps(g + i, v);
    }
    for (; i < n; i++) g[i] = gelu_tanh_scalar(g[i]) * (u ? u[i] : 1.0f);
}
/* ---------- dispatch ---------- */

static int use512(tt_isa isa) { return isa >= TT_ISA_AVX512; }

void tt_act_inplace(tt_isa isa, tt_act act, float *x, long n)
{
    if (act == TT_ACT_NONE) return;
    if (use512(isa)) {
        act_avx512(act, x, n);
        return;
    }
    for (long i = 0; i < n; i++) x[i] = act_scalar(act, x[i]);
}

void tt_layernorm_rows(tt_isa isa, const float *x, long ldx, float *y, long ldy, int rows, int n,
                       const float *g, const float *b, float eps)
{
    for (int r = 0; r < rows; r++) {
        if (use512(isa)) layernorm_row_avx512(x + r * ldx, y + r * ldy, n, g, b, eps);
        else layernorm_row_scalar(x + r * ldx, y + r * ldy, n, g, b, eps);
    }
}

typedef struct {
    tt_isa isa;
    const float *x;
    long ldx;
    float *y;
    long ldy;
    int rows, n, per;
    const float *g, *b;
    float eps;
} ln_job;

static void ln_task(void *arg, int task, int thread)
{
    (void)thread;
    ln_job *j = arg;
    int r0 = task * j->per, r1 = r0 + j->per < j->rows ? r0 + j->per : j->rows;
    tt_layernorm_rows(j->isa, j->x + r0 * j->ldx, j->ldx, j->y + r0 * j->ldy, j->ldy, r1 - r0, j->n,
                      j->g, j->b, j->eps);
}

void tt_layernorm(tt_pool *pool, tt_isa isa, const float *x, long ldx, float *y, long ldy,
                  int rows, int n, const float *g, const float *b, float eps)
{
    ln_job j = {isa, x, ldx, y, ldy, rows, n, 64, g, b, eps};
    tt_pool_run(pool, (rows + j.per - 1) / j.per, ln_task, &j);
}

float tt_rms_inv(tt_isa isa, const float *x, int n, float eps)
{
    if (isa >= TT_ISA_AVX512) return rms_inv_avx512(x, n, eps);
    if (isa >= TT_ISA_AVX2) return rms_inv_avx2(x, n, eps);
    return rms_inv_scalar(x, n, eps);
}

void tt_rmsnorm_rows(tt_isa isa, const float *x, long ldx, float *y, long ldy, int rows, int n,
                     const float *w, float w_add, const float *shift, float eps)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + r * ldx;
        float *yr = y + r * ldy;
        float inv = tt_rms_inv(isa, xr, n, eps);
        if (shift) {
            for (int i = 0; i < n; i++) yr[i] = xr[i] * inv * (w_add + w[i]) + shift[i];
        } else {
            for (int i = 0; i < n; i++) yr[i] = xr[i] * inv * (w_add + w[i]);
        }
    }
}

void tt_gelu_tanh_mul(tt_isa isa, float *g, const float *u, long n)
{
    if (isa >= TT_ISA_AVX512) {
        gelu_tanh_mul_avx512(g, u, n);
        return;
    }
    if (isa >= TT_ISA_AVX2) {
        gelu_tanh_mul_avx2(g, u, n);
        return;
    }
    for (long i = 0; i < n; i++) g[i] = gelu_tanh_scalar(g[i]) * (u ? u[i] : 1.0f);
}

void tt_softmax_rows(tt_isa isa, float *x, long ldx, int rows, int n, float scale)
{
    for (int r = 0; r < rows; r++) {
        if (use512(isa)) softmax_row_avx512(x + r * ldx, n, scale);
        else softmax_row_scalar(x + r * ldx, n, scale);
    }
}

void tt_softmax_unnorm_rows(tt_isa isa, float *x, long ldx, uint16_t *bf, long ldb, int rows, int n,
                            float scale, float *sums)
{
    for (int r = 0; r < rows; r++) {
        uint16_t *b = bf ? bf + r * ldb : NULL;
        sums[r] = use512(isa) ? softmax_unnorm_row_avx512(x + r * ldx, b, n, scale)
                              : softmax_unnorm_row_scalar(x + r * ldx, b, n, scale);
    }
}
