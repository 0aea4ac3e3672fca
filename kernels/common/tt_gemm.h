/* tt_gemm: C[m][n] (+)= A[m][k] . W[n][k]^T + bias[n], then an activation.
 *
 * W is a weight in PyTorch Linear layout ([out][in]); it is packed once into
 * column panels of TT_NR outputs so the micro-kernels stream it linearly:
 *   fp32: panel p, row k, lane j      -> W[p*TT_NR + j][k]
 *   bf16: panel p, pair kk, lane j, e -> W[p*TT_NR + j][2*kk + e]  (k padded to even)
 * Lanes past n and k past the end are zero, so kernels never branch on them.
 * A and C are row-major fp32 with arbitrary row strides. A bf16 GEMM rounds A
 * to bf16 (round to nearest even) and accumulates in fp32, like vdpbf16ps.
 * bf16 semantics per isa, against the scalar reference (tile_bf16_scalar: C starts at bias (+ C),
 * then per pair acc += a1*b1, acc += a0*b0, each product and sum rounded to fp32):
 *   - avx2, avx512bf16: the same operands and fp32 accumulation; vdpbf16ps sums a pair in its own
 *     order (and, like the reference, honours denormals), so results agree within fp32 rounding.
 *   - amxbf16 (tdpbf16ps, the bf16 GEMM only; fp32 and the other kernels run avx512bf16 code):
 *     C rows in groups of TT_AMX_MR, K in steps of TT_AMX_KS pairs, each step's pairs accumulated
 *     into the fp32 C tile in the instruction's order. bf16 denormal inputs count as zero and fp32
 *     denormal results are flushed to zero (DAZ/FTZ, whatever MXCSR says); rounding is to nearest
 *     even. So |C_amx - C_ref| stays within fp32 rounding of sum |a*b| plus the size of the
 *     denormal operands dropped (below 2^-126 each, nothing for weights and activations of models).
 *     Within the amxbf16 path every blocking and task split gives bit-identical results.
 * Must not: allocate on the hot path: tt_gemm, tt_gemm_block, tt_mat_pack_into
 * and tt_to_bf16_rows work in caller memory; only tt_mat_pack/alloc allocate.
 */
#ifndef TT_GEMM_H
#define TT_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "tt_bf16.h"
#include "tt_cpu.h"
#include "tt_ops.h"
#include "tt_pool.h"

/* TT_NR columns per panel; row groups of TT_MR rows (vector kernels) or TT_AMX_MR (AMX: 2 x 16-row
 * tiles), K steps of TT_AMX_KS bf16 pairs on AMX. */
enum { TT_NR = 32, TT_MR = 12, TT_AMX_MR = 32, TT_AMX_KS = 16 };

typedef enum { TT_F32 = 0, TT_BF16 = 1 } tt_dtype;

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

/* Same for a bf16 source already rounded (src[i*ld + j] the bf16 bits of W[i][j], row-major): the
 * pairs are copied, bit-identical to widening src to fp32 and packing that (a signalling NaN comes
 * out quiet, as tt_f32_to_bf16 makes it). For checkpoints stored in bf16: no fp32 copy. */
void tt_mat_pack_bf16_into(tt_mat *m, void *buf, tt_isa isa, const uint16_t *src, long ld, int n, int k);

/* The header of an n x k matrix of dtype whose panels are already packed at buf (e.g. mapped from
 * a file of packed weights); no bias. */
void tt_mat_view(tt_mat *m, void *buf, tt_dtype dtype, tt_isa isa, int n, int k);

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

/* Scratch bytes tt_gemm needs for m rows of A (the bf16 copy of A, tiled on AMX; 0 for fp32). */
size_t tt_gemm_ws_bytes(const tt_mat *w, int m);

/* An upper bound of tt_gemm_ws_bytes for any matrix of at most k columns and any isa: for callers
 * that size one scratch for all their GEMMs. */
size_t tt_gemm_ws_bound(int m, int k);

/* How the driver walks a GEMM; what fits a CPU differs (L1 size, 512-bit ops in one or two halves),
 * so a program carries a plan chosen at load (tt_gemm_plan.h: derived from the cache sizes, or
 * timed on the real shapes). Every blocking gives bit-identical results: the K blocks of a tile are
 * summed into C in order, exactly as one block would (C + 0 is C), and the tasks only split rows
 * and columns. */
typedef struct {
    int kc; /* K block in panel rows (fp32 values or bf16 pairs, 128 bytes each): a panel slice of
               kc x 128 bytes is reused by every row group of a task, so it should stay in L1 */
    int mb; /* row groups per task (tt_gemm_group_rows rows each: TT_MR, TT_AMX_MR on AMX) */
    int nb; /* panels (of TT_NR columns) per task */
    int pf; /* prefetch the panel slice this many slices ahead (0: no prefetch); on AMX into L2,
               with the next row group's A on a task's first panel */
} tt_blocking;

enum { TT_PLAN_CLASSES = 4 };

/* Blockings by row count: class i serves m <= max_rows[i] (the first that fits), the last class
 * every m. A GEMM's row count tells the stage apart (pi0.5's 50-row expert vs its ~700-row
 * prefix), so the ops never need to know which stage calls them. */
typedef struct {
    int n;
    int max_rows[TT_PLAN_CLASSES];
    tt_blocking b[TT_PLAN_CLASSES];
} tt_gemm_plan;

/* The blocking the kernels used before plans existed (K block 256, 8 row groups x 4 panels per
 * task, prefetch 1 slice ahead): tt_gemm_block's, and tt_gemm's when plan is NULL. */
extern const tt_blocking tt_blocking_builtin;

/* C[0:m][0:n] (+)= A . W^T + bias, activation; parallel over pool, blocked as plan says for m
 * (NULL: tt_blocking_builtin). */
void tt_gemm(tt_pool *pool, const tt_gemm_plan *plan, const tt_mat *w, const float *a, long lda, float *c,
             long ldc, int m, int flags, void *ws);

/* Serial building block for callers that parallelise themselves: rows
 * [m0, m1) and panels [p0, p1). A must already be in w->dtype: float for fp32,
 * bf16 pairs (uint16_t, lda even, zero past k) for bf16 (see tt_to_bf16_rows).
 * tt_gemm_block uses tt_blocking_builtin; tt_gemm_block_with the given blocking (b->kc, b->pf).
 * A bf16 matrix of isa amxbf16 runs on AMX here too, for any m0, m1 and lda (no padding asked of
 * the caller: tails go through configuration and stack buffers); the tiles are released before
 * returning, so a thread carries no AMX state between calls. On AMX, K blocks are rounded up to
 * multiples of TT_AMX_KS pairs. */
void tt_gemm_block(const tt_mat *w, const void *a, long lda, float *c, long ldc, int m0, int m1,
                   int p0, int p1, int flags);
void tt_gemm_block_with(const tt_blocking *b, const tt_mat *w, const void *a, long lda, float *c, long ldc,
                        int m0, int m1, int p0, int p1, int flags);

/* Rows of one row group of w's kernel: TT_AMX_MR for bf16 on amxbf16, else TT_MR. */
int tt_gemm_group_rows(const tt_mat *w);

/* dst[r][0:kp] = bf16(src[r][0:k]) with a zero in column k when k is odd. */
void tt_to_bf16_rows(tt_isa isa, const float *src, long lds, uint16_t *dst, long ldd, int rows,
                     int k);

/* Peak multiply-add throughput microbenchmark of one thread: runs a register blocked loop of the
 * best instruction the GEMM of dtype uses here (tt_peak_isa: FMA for fp32; tdpbf16ps on 4 C tiles
 * from 2 A and 2 B tiles for bf16 on amxbf16, else vdpbf16ps) for about as long as `iters`
 * iterations of the vector loop, and returns GFLOP/s (a multiply-add counts 2). 0 when the CPU
 * lacks the ISA. */
double tt_peak_gflops(tt_dtype dtype, long iters);

/* The ISA whose peak tt_peak_gflops(dtype) measures (TT_ISA_SCALAR: none). */
tt_isa tt_peak_isa(tt_dtype dtype);

/* The peak of one given ISA's loop: TT_ISA_AVX512BF16 for vdpbf16ps on an AMX machine. */
double tt_peak_gflops_isa(tt_isa isa, tt_dtype dtype, long iters);

/* The same loop on every thread of pool at once; returns the summed GFLOP/s
 * (what those threads can do together right now, e.g. on a shared machine). */
double tt_peak_gflops_pool(tt_pool *pool, tt_dtype dtype, long iters);
double tt_peak_gflops_pool_isa(tt_pool *pool, tt_isa isa, tt_dtype dtype, long iters);

#endif
