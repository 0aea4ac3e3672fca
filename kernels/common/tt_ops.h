/* tt_ops: row-wise fp32 operations (activations, LayerNorm, softmax).
 *
 * Each has a scalar version (libm, the reference) and an AVX-512 version
 * (polynomial exp / erf, ~1e-7 relative), chosen by isa; AVX2 machines use
 * the scalar one. All work in place or out of place on rows with strides.
 */
#ifndef TT_OPS_H
#define TT_OPS_H

#include <stdint.h>

#include "tt_cpu.h"
#include "tt_gemm.h"
#include "tt_pool.h"

/* x[0:n] = act(x[0:n]). GELU is the exact-erf one: x/2 (1 + erf(x/sqrt 2)). */
void tt_act_inplace(tt_isa isa, tt_act act, float *x, long n);

/* y[r] = (x[r] - mean) / sqrt(var + eps) * g + b over n columns, rows [0, rows). */
void tt_layernorm_rows(tt_isa isa, const float *x, long ldx, float *y, long ldy, int rows, int n,
                       const float *g, const float *b, float eps);

/* The same, parallel over rows. */
void tt_layernorm(tt_pool *pool, tt_isa isa, const float *x, long ldx, float *y, long ldy,
                  int rows, int n, const float *g, const float *b, float eps);

/* x[r][0:n] = softmax(scale * x[r][0:n]) for rows [0, rows). */
void tt_softmax_rows(tt_isa isa, float *x, long ldx, int rows, int n, float scale);

/* The unnormalised softmax of attention: e = exp(scale * x - rowmax) for
 * rows [0, rows) over n columns, and sums[r] = sum of the row's e (computed
 * in fp32 from the fp32 values). e goes back into x, or, when bf != NULL,
 * into bf (rounded to bf16, row stride ldb, a zero at column n when n is odd)
 * and x is only read. The caller divides its P.V rows by sums. */
void tt_softmax_unnorm_rows(tt_isa isa, float *x, long ldx, uint16_t *bf, long ldb, int rows, int n,
                            float scale, float *sums);

#endif
