/* tt_selftest: runs the self-test table of kernels/common (tt_selftest.h, the cases native's Go
 * tests run) without Go: one line per case, PASS, SKIP (with why: this CPU or TT_ISA lacks the
 * isa) or FAIL (with what differed). Exit 1 when a case failed, 0 otherwise.
 *   tt_selftest [substring]   runs the cases whose name contains substring (all by default). */
#include <stdio.h>
#include <string.h>

#include "tt_cpu.h"
#include "tt_selftest.h"

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : "";
    int pass = 0, skip = 0, fail = 0;
    char name[128], msg[1024];
    printf("kernels self-test, best isa here: %s\n", tt_isa_name(tt_cpu_best_isa()));
    for (int i = 0; i < tt_selftest_count(); i++) {
        if (tt_selftest_name(i, name, sizeof name) < 0 || strstr(name, only) == NULL) continue;
        msg[0] = 0;
        switch (tt_selftest_run(i, msg, sizeof msg)) {
        case TT_SELFTEST_PASS:
            pass++;
            printf("PASS %s\n", name);
            break;
        case TT_SELFTEST_SKIP:
            skip++;
            printf("SKIP %s: %s\n", name, msg);
            break;
        default:
            fail++;
            printf("FAIL %s: %s\n", name, msg);
        }
    }
    printf("%d passed, %d skipped, %d failed\n", pass, skip, fail);
    return fail > 0;
}
