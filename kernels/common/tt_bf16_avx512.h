/* tt_bf16_avx512: fp32 -> bf16 rounding on AVX-512 lanes, bit-identical to
 * tt_f32_to_bf16 (round to nearest even, NaN kept a quiet NaN). Internal to
 * kernels/common: included by the .c files that vectorise conversions.
 * Must not: round differently from tt_f32_to_bf16 (bf16_convert/avx512 and
 * pack/avx512 check it bit for bit). */
#ifndef TT_BF16_AVX512_H
#define TT_BF16_AVX512_H

#include <immintrin.h>

#include "tt_cpu.h"

/* 32-bit lanes holding bf16(v) in their high 16 bits (low bits undefined). */
TT_TARGET_AVX512 static inline __m512i tt_bf16_hi512(__m512 v)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)));
}

/* The 16 bf16 values of v, in order. */
TT_TARGET_AVX512 static inline __m256i tt_bf16x16(__m512 v)
{
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(tt_bf16_hi512(v), 16));
}

/* Lane j = bf16(lo[j]) | bf16(hi[j]) << 16: the k-pair layout of the panels. */
TT_TARGET_AVX512 static inline __m512i tt_bf16_pairs(__m512 lo, __m512 hi)
{
    return _mm512_or_si512(_mm512_srli_epi32(tt_bf16_hi512(lo), 16),
                           _mm512_and_si512(tt_bf16_hi512(hi), _mm512_set1_epi32((int)0xffff0000u)));
}

#endif
