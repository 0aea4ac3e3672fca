/* tt_attention: multi-head softmax(Q K^T * scale) V over independent batches.
 *
 * Row r of batch b of Q, K, V starts at q/k/v + (b*seq + r)*ld; head h uses
 * columns [h*hd, (h+1)*hd). The output uses the same layout with stride ldo.
 * No mask. The matmuls run through tt_gemm panels in `dtype` (bf16 rounds Q,
 * K, V and the probabilities; softmax is fp32 either way).
 * Must not: allocate: the caller gives tt_attention_ws_bytes() of scratch.
 */
#ifndef TT_ATTENTION_H
#define TT_ATTENTION_H

#include <stddef.h>

#include "tt_gemm.h"
#include "tt_pool.h"

typedef struct {
    int batch, seq, heads, hd, nthreads;
    tt_dtype dtype;
    tt_isa isa;
} tt_attn_shape;

/* Scratch bytes (64-byte aligned buffer expected) for tt_attention. */
size_t tt_attention_ws_bytes(const tt_attn_shape *s);

void tt_attention(tt_pool *pool, const tt_attn_shape *s, const float *q, const float *k,
                  const float *v, long ld, float *out, long ldo, float scale, void *ws);

#endif
