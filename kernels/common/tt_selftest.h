/* tt_selftest: every fast kernel of kernels/common checked against its scalar
 * reference (and the scalar one against a float64 reference), on every ISA
 * this CPU supports. Driven from Go tests through native/. */
#ifndef TT_SELFTEST_H
#define TT_SELFTEST_H

#include <stddef.h>

/* Number of named tests, and the name of test i. */
int tt_selftest_count(void);
const char *tt_selftest_name(int i);

/* Runs test i; returns 0 on success, else writes why into msg and returns -1. */
int tt_selftest_run(int i, char *msg, size_t msglen);

#endif
