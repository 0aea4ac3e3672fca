/* tt_gemm_plan: choosing the GEMM blocking (tt_blocking, tt_gemm_plan of tt_gemm.h) for the CPU
 * at hand, once at load:
 *   - derived: the K block from the L1 data cache size the CPU reports (a Zen 4 core has 32 KiB,
 *     a Zen 5 core 48 KiB), the rest as before;
 *   - tuned: a few candidate blockings timed on the model's real weights and row counts, one
 *     coordinate at a time (K block, then prefetch distance, then the task tile), the fastest kept;
 *   - given: a plan in its text form (what a cache of tuned plans stores, or TT_GEMM_PLAN).
 * Text form, one class per ';'-separated item, the last without a row limit:
 *   "m<=64:kc=128,mb=8,nb=4,pf=1;kc=192,mb=8,nb=4,pf=1"
 * Must not: run on a hot path (tuning allocates nothing but takes tens of milliseconds per class),
 * or offer a candidate the self-tests and parity tests do not cover (they iterate
 * tt_blocking_candidates). */
#ifndef TT_GEMM_PLAN_H
#define TT_GEMM_PLAN_H

#include <stddef.h>

#include "tt_gemm.h"
#include "tt_pool.h"

/* The L1 data cache of one core in bytes as the CPU reports it (0 when unknown). */
long tt_l1d_bytes(void);

/* The blocking derived from l1d_bytes (<= 0: the builtin one): the K block keeps a panel slice in
 * about two thirds of L1. */
tt_blocking tt_blocking_derived(long l1d_bytes);

/* A one-class plan of the derived blocking for this CPU. */
void tt_gemm_plan_default(tt_gemm_plan *p);

/* Every blocking the tuner may pick (every combination of the values it tries per coordinate,
 * 108), for tests that force each variant. Returns how many were written (at most max). */
int tt_blocking_candidates(tt_blocking *out, int max);

/* Writes plan's text form into buf; returns the length it needs (as snprintf). */
int tt_gemm_plan_format(const tt_gemm_plan *p, char *buf, size_t len);

/* Parses the text form; 0, or -1 with the reason in err. */
int tt_gemm_plan_parse(tt_gemm_plan *p, const char *s, char *err, size_t errlen);

/* One GEMM the tuner times: weight w (it may time only its first panels) over `rows` rows of a
 * (fp32, stride lda) into c (stride ldc), ws the bf16 scratch of tt_gemm. */
typedef struct {
    const tt_mat *w;
    const float *a;
    long lda;
    float *c;
    long ldc;
    void *ws;
} tt_tune_gemm;

/* Tunes the blocking of one row class: starting from *b, times each candidate value of one
 * coordinate at a time on the GEMMs given (all with `rows` rows), best of `reps` runs each, and keeps
 * the fastest. Writes the winner into *b and returns the number of timings made. */
int tt_gemm_tune(tt_pool *pool, tt_blocking *b, const tt_tune_gemm *g, int ng, int rows, int reps);

#endif
