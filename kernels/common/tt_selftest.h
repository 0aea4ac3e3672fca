/* tt_selftest: the self-tests of kernels/common, as cases of one kernel on
 * one isa ("gemm/avx2", "rmsnorm/scalar"; "pool" has no isa): every fast
 * version against its scalar reference or float64, the scalar references
 * against float64. Driven from Go tests through native/.
 *
 * Must not: pass a case it did not run. A case whose isa this CPU cannot run,
 * or that TT_ISA caps away (tt_cpu_best_isa), reports TT_SELFTEST_SKIP with
 * the reason. */
#ifndef TT_SELFTEST_H
#define TT_SELFTEST_H

#include <stddef.h>

enum { TT_SELFTEST_PASS = 0, TT_SELFTEST_SKIP = 1, TT_SELFTEST_FAIL = -1 };

/* Number of cases, and the name of case i written into buf (-1: no such case). */
int tt_selftest_count(void);
int tt_selftest_name(int i, char *buf, size_t len);

/* Runs case i: TT_SELFTEST_PASS; TT_SELFTEST_FAIL with why in msg; or
 * TT_SELFTEST_SKIP with why (this CPU lacks the isa) in msg. */
int tt_selftest_run(int i, char *msg, size_t msglen);

#endif
