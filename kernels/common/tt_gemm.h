/* tt_gemm: C[m][n] (+)= A[m][k] . W[n][k]^T + bias[n], then an activation.
 *
 * W is a weight in PyTorch Linear layout ([out][in]); it is packed once into
 * column panels of TT_NR outputs so the micro-kernels stream it linearly:
 *   fp32: panel p, row k, lane j      -> W[p*TT_NR + j][k]
 *   bf16: panel p, pair kk, lane j, e -> W[p*TT_NR + j][2*kk + e]  (k padded to even)
 * Lanes past n and k past the end are zero, so kernels never branch on them.
 * A and C are row-major fp32 with arbitrary row strides. A bf16 GEMM rounds A
 * to bf16 (round to nearest even) and accumulates in fp32, like vdpbf16ps.
 * Must not: allocate on the hot path: tt_gemm, tt_gemm_block, tt_mat_pack_into
 * and tt_to_bf16_rows work in caller memory; only tt_mat_pack/alloc allocate.
 */
#ifndef TT_GEMM_H
#define TT_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "tt_cpu.h"
#include "tt_pool.h"

enum { TT_NR = 32, TT_MR = 12 };

typedef enum { TT_F32 = 0, TT_BF16 = 1 } tt_dtype;

typedef enum { TT_ACT_NONE = 0, TT_ACT_RELU = 1, TT_ACT_GELU = 2, TT_ACT_SILU = 3 } tt_act;

/* Flags for tt_gemm: TT_GEMM_ACCUM adds into C instead of overwriting it;
 * the activation (tt_act) goes in the low byte. */
enum { TT_GEMM_ACCUM = 1 << 8 };

typedef struct {
    int n, k;       /* logical W is [n][k] */
    int npanels;    /* ceil(n / TT_NR) */
    int kp;         /* k, rounded up to even for bf16 */
    tt_dtype dtype;
    tt_isa isa;     /* kernel family that runs this matrix */
    void *panels;   /* npanels * kp * TT_NR elements of dtype */
    float *bias;    /* [n] or NULL */
    int owned;      /* panels/bias were allocated by tt_mat_pack */
} tt_mat;

uint16_t tt_f32_to_bf16(float x); /* round to nearest even */
float tt_bf16_to_f32(uint16_t x);

/* Bytes of packed panels for an n x k matrix. */
size_t tt_mat_bytes(tt_dtype dtype, int n, int k);

/* Packs W (W[i][j] = trans ? src[j*ld + i] : src[i*ld + j], i < n, j < k) into
 * freshly allocated panels (and copies bias when non-NULL). Returns 0 or -1
 * when out of memory. Use at load time only. */
int tt_mat_pack(tt_mat *m, tt_dtype dtype, tt_isa isa, const float *src, long ld, int trans,
                int n, int k, const float *bias);

/* Same, into caller memory of tt_mat_bytes() bytes (no bias); no allocation,
 * usable on a hot path (attention packs K and V this way). */
void tt_mat_pack_into(tt_mat *m, void *buf, tt_dtype dtype, tt_isa isa, const float *src, long ld,
                      int trans, int n, int k);

/* Allocates a zero matrix (and a zero bias of n when with_bias) to be filled
 * with tt_mat_set_rows: for weights assembled from several tensors. */
int tt_mat_alloc(tt_mat *m, tt_dtype dtype, tt_isa isa, int n, int k, int with_bias);

/* Packs rows [row0, row0+nrows) of W from src (row r, column j at
 * trans ? src[j*ld + r] : src[r*ld + j]), each row multiplied by
 * row_scale[r] when row_scale is non-NULL. */
void tt_mat_set_rows(tt_mat *m, int row0, int nrows, const float *src, long ld, int trans,
                     const float *row_scale);

/* Frees what tt_mat_pack / tt_mat_alloc allocated; no-op for pack_into. */
void tt_mat_free(tt_mat *m);

/* Scratch bytes tt_gemm needs for m rows of A (the bf16 copy of A; 0 for fp32). */
size_t tt_gemm_ws_bytes(const tt_mat *w, int m);

/* C[0:m][0:n] (+)= A . W^T + bias, activation; parallel over pool. */
void tt_gemm(tt_pool *pool, const tt_mat *w, const float *a, long lda, float *c, long ldc, int m,
             int flags, void *ws);

/* Serial building block for callers that parallelise themselves: rows
 * [m0, m1) and panels [p0, p1). A must already be in w->dtype: float for fp32,
 * bf16 pairs (uint16_t, lda even, zero past k) for bf16 (see tt_to_bf16_rows). */
void tt_gemm_block(const tt_mat *w, const void *a, long lda, float *c, long ldc, int m0, int m1,
                   int p0, int p1, int flags);

/* dst[r][0:kp] = bf16(src[r][0:k]) with a zero in column k when k is odd. */
void tt_to_bf16_rows(tt_isa isa, const float *src, long lds, uint16_t *dst, long ldd, int rows,
                     int k);

/* Peak multiply-add throughput microbenchmark of one thread: runs a register
 * blocked FMA (fp32) or vdpbf16ps (bf16) loop for about `iters` iterations and
 * returns GFLOP/s (a multiply-add counts 2). 0 when the CPU lacks the ISA. */
double tt_peak_gflops(tt_dtype dtype, long iters);

/* The same loop on every thread of pool at once; returns the summed GFLOP/s
 * (what those threads can do together right now, e.g. on a shared machine). */
double tt_peak_gflops_pool(tt_pool *pool, tt_dtype dtype, long iters);

#endif
