/* tt_exp: e^x on AVX-512 and AVX2 lanes, shared by the kernels' softmax,
 * SiLU, erf and GELU-tanh. Header-only (static inline) so each unity build
 * inlines it into its callers.
 *
 * Holds: the two vector exps, with one argument clamp and one polynomial.
 * Must not: hold a scalar exp (the scalar references use libm's expf) or any
 * state; both versions must keep the same clamps and coefficients, so that a
 * kernel's AVX2 and AVX-512 paths agree to the last few ulps.
 */
#ifndef TT_EXP_H
#define TT_EXP_H

#include <immintrin.h>

#include "tt_cpu.h"

/* The argument clamp: over [TT_EXP_MIN, TT_EXP_MAX] fp32 e^x stays normal and
 * finite, so neither version has to handle infinities or subnormals. */
#define TT_EXP_MIN (-87.3f)
#define TT_EXP_MAX 88.7f

/* x = n ln2 + r: log2(e), and ln2 split in a high part exact in fp32 and the
 * low remainder (Cody-Waite), so r keeps full precision. */
#define TT_LOG2E 1.44269504088896341f
#define TT_LN2_HI 0.693145751953125f
#define TT_LN2_LO 1.428606765330187045e-06f

/* exp(x): x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6 Taylor polynomial
 * (truncation < 2e-8 relative), then 2^n applied with scalef. tt_exp256 is the
 * same clamp, split and polynomial on 8 lanes, so both widths give the same results. */
TT_TARGET_AVX512 static inline __m512 tt_exp512(__m512 x)
{
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(TT_EXP_MIN)), _mm512_set1_ps(TT_EXP_MAX));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(TT_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(TT_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(TT_LN2_LO), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* tt_exp512 for 256-bit lanes (the same clamp, split and polynomial, so both give
 * the same bits; the exp/avx2 self-test checks it). AVX2 has no scalef: 2^n is built in the exponent bits.
 * n reaches 128 at TT_EXP_MAX, one past the largest fp32 exponent, so it is
 * applied in two halves 2^(n>>1) * 2^(n - (n>>1)), each a normal number;
 * both multiplications by powers of two are exact, as scalef is. */
TT_TARGET_AVX2 static inline __m256 tt_exp256(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(TT_EXP_MIN)), _mm256_set1_ps(TT_EXP_MAX));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(TT_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(TT_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(TT_LN2_LO), r);
    __m256 p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

#endif
