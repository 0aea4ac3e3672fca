/* tt_ops: row-wise fp32 operations shared by the models: activations,
 * LayerNorm, RMSNorm, GELU-tanh (with its GEGLU product) and softmax.
 *
 * Each has a scalar version (libm: the reference) and fast versions chosen by
 * isa: AVX-512 for all, AVX2 for RMSNorm and GELU-tanh (the others fall back
 * to scalar on AVX2). The vector exp/erf are polynomials (~1e-7 relative; see
 * tt_exp.h). All work on rows with strides, in place or out of place.
 *
 * Must not: allocate, create threads (tt_layernorm uses the caller's pool),
 * or know a model: model-specific wiring (Gemma's 1 + w, adaRMS modulation
 * layout) is expressed through the arguments.
 */
#ifndef TT_OPS_H
#define TT_OPS_H

#include <stdint.h>

#include "tt_cpu.h"
#include "tt_pool.h"

typedef enum { TT_ACT_NONE = 0, TT_ACT_RELU = 1, TT_ACT_GELU = 2, TT_ACT_SILU = 3 } tt_act;

/* x[0:n] = act(x[0:n]). GELU is the exact-erf one: x/2 (1 + erf(x/sqrt 2)). */
void tt_act_inplace(tt_isa isa, tt_act act, float *x, long n);

/* y[r] = (x[r] - mean) / sqrt(var + eps) * g + b over n columns, rows [0, rows). */
void tt_layernorm_rows(tt_isa isa, const float *x, long ldx, float *y, long ldy, int rows, int n,
                       const float *g, const float *b, float eps);

/* The same, parallel over rows. */
void tt_layernorm(tt_pool *pool, tt_isa isa, const float *x, long ldx, float *y, long ldy,
                  int rows, int n, const float *g, const float *b, float eps);

/* 1 / sqrt(mean(x[0:n]^2) + eps): the scale of an RMSNorm row. */
float tt_rms_inv(tt_isa isa, const float *x, int n, float eps);

/* RMSNorm of rows [0, rows) over n columns:
 *   y[r][i] = x[r][i] * tt_rms_inv(x[r]) * (w_add + w[i])  (+ shift[i] when shift != NULL)
 * w_add = 1 for Gemma, whose checkpoints store the weight as w - 1; 0 for a
 * plain RMSNorm. shift is the additive term of an adaptive (adaRMS) norm. */
void tt_rmsnorm_rows(tt_isa isa, const float *x, long ldx, float *y, long ldy, int rows, int n,
                     const float *w, float w_add, const float *shift, float eps);

/* g[0:n] = gelu_tanh(g[0:n]) * u[0:n] (GEGLU), or gelu_tanh(g) alone when u is NULL:
 *   gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void tt_gelu_tanh_mul(tt_isa isa, float *g, const float *u, long n);

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
