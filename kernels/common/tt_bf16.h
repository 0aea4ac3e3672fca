/* tt_bf16: the scalar fp32 <-> bf16 conversions every kernel shares (the packers, the ops that
 * write bf16 rows, the models' loaders). The lowest layer of kernels/common beside tt_cpu and
 * tt_pool: it includes nothing of the others.
 *   bf16(x) = the top 16 bits of x rounded to nearest even; a NaN stays a NaN, made quiet.
 *   fp32(h) = h << 16 (exact). */
#ifndef TT_BF16_H
#define TT_BF16_H

#include <stdint.h>

uint16_t tt_f32_to_bf16(float x); /* round to nearest even */
float tt_bf16_to_f32(uint16_t x);

#endif
