/* tt_exp_avx512: e^x on AVX-512 lanes, shared by the kernels' softmax, SiLU,
 * erf and GELU-tanh. Header-only (static inline) so each unity build inlines
 * it into its callers. */
#ifndef TT_EXP_AVX512_H
#define TT_EXP_AVX512_H

#include <immintrin.h>

#include "tt_cpu.h"

/* exp(x): x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6 Taylor polynomial
 * (truncation < 2e-8 relative), 2^n applied with scalef; x is clamped to
 * [-87.3, 88.7], where fp32 e^x stays normal and finite. */
TT_TARGET_AVX512 static inline __m512 tt_exp512(__m512 x)
{
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.7f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

#endif
