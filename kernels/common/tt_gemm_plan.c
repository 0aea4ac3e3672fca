/* tt_gemm_plan.c: the derived blocking (L1 size), the candidate list, the plan's text form and the
 * tuner (tt_gemm_plan.h). */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif
#include "tt_gemm_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The values the tuner tries per coordinate. K blocks: slices of 12-64 KiB; prefetch: none, the
 * next slice or the one after; task tiles: rows x panels around the builtin 8 x 4. */
static const int kc_values[] = {96, 128, 160, 192, 256, 384};
static const int pf_values[] = {0, 1, 2};
static const int tile_values[][2] = {{8, 4}, {4, 4}, {16, 4}, {8, 2}, {8, 8}, {4, 8}};
enum {
    N_KC = sizeof kc_values / sizeof kc_values[0],
    N_PF = sizeof pf_values / sizeof pf_values[0],
    N_TILE = sizeof tile_values / sizeof tile_values[0],
};

long tt_l1d_bytes(void)
{
#ifdef _SC_LEVEL1_DCACHE_SIZE
    long v = sysconf(_SC_LEVEL1_DCACHE_SIZE); /* glibc: cpuid leaf 4 / 0x8000001d */
    if (v > 0) return v;
#endif
    return 0;
}

tt_blocking tt_blocking_derived(long l1d)
{
    tt_blocking b = tt_blocking_builtin;
    if (l1d <= 0) return b;
    /* the slice (kc x 128 bytes) in about two thirds of L1, the rest for the A rows streaming
     * through and C; the nearest candidate value at or below (48 KiB -> 256, 32 KiB -> 160) */
    long want = l1d * 2 / 3 / 128;
    b.kc = kc_values[0];
    for (int i = 0; i < N_KC; i++)
        if (kc_values[i] <= want) b.kc = kc_values[i];
    return b;
}

void tt_gemm_plan_default(tt_gemm_plan *p)
{
    memset(p, 0, sizeof *p);
    p->n = 1;
    p->b[0] = tt_blocking_derived(tt_l1d_bytes());
}

static int same_blocking(const tt_blocking *a, const tt_blocking *b)
{
    return a->kc == b->kc && a->mb == b->mb && a->nb == b->nb && a->pf == b->pf;
}

int tt_blocking_candidates(tt_blocking *out, int max)
{
    int n = 0;
    for (int i = 0; i < N_KC; i++)
        for (int j = 0; j < N_PF; j++)
            for (int t = 0; t < N_TILE; t++)
                if (n < max) out[n++] = (tt_blocking){kc_values[i], tile_values[t][0], tile_values[t][1], pf_values[j]};
    return n;
}

int tt_gemm_plan_format(const tt_gemm_plan *p, char *buf, size_t len)
{
    size_t o = 0;
    int need = 0;
    for (int i = 0; i < p->n; i++) {
        char item[96];
        const tt_blocking *b = &p->b[i];
        int w = i < p->n - 1 ? snprintf(item, sizeof item, "m<=%d:", p->max_rows[i]) : 0;
        w += snprintf(item + w, sizeof item - (size_t)w, "kc=%d,mb=%d,nb=%d,pf=%d%s", b->kc, b->mb, b->nb, b->pf,
                      i < p->n - 1 ? ";" : "");
        if (o + (size_t)w < len) memcpy(buf + o, item, (size_t)w), o += (size_t)w;
        need += w;
    }
    if (len > 0) buf[o < len ? o : len - 1] = '\0';
    return need;
}

static int parse_int(const char **s, int *v)
{
    char *end;
    long x = strtol(*s, &end, 10);
    if (end == *s || x < 0 || x > 1 << 20) return -1;
    *v = (int)x;
    *s = end;
    return 0;
}

int tt_gemm_plan_parse(tt_gemm_plan *p, const char *s, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    const char *c = s;
    for (;;) {
        if (p->n == TT_PLAN_CLASSES) return snprintf(err, errlen, "more than %d classes", TT_PLAN_CLASSES), -1;
        tt_blocking *b = &p->b[p->n];
        *b = tt_blocking_builtin;
        int limited = strncmp(c, "m<=", 3) == 0;
        if (limited) {
            c += 3;
            if (parse_int(&c, &p->max_rows[p->n]) != 0 || *c != ':')
                return snprintf(err, errlen, "class %d: want m<=ROWS: at %.20s", p->n + 1, c), -1;
            c++;
        }
        for (;;) {
            int *field = strncmp(c, "kc=", 3) == 0 ? &b->kc : strncmp(c, "mb=", 3) == 0 ? &b->mb
                       : strncmp(c, "nb=", 3) == 0 ? &b->nb : strncmp(c, "pf=", 3) == 0 ? &b->pf : NULL;
            if (field == NULL) return snprintf(err, errlen, "class %d: want kc=, mb=, nb= or pf= at %.20s", p->n + 1, c), -1;
            c += 3;
            if (parse_int(&c, field) != 0) return snprintf(err, errlen, "class %d: a number at %.20s", p->n + 1, c), -1;
            if (*c != ',') break;
            c++;
        }
        if (b->kc < 1 || b->mb < 1 || b->nb < 1 || b->pf > 8)
            return snprintf(err, errlen, "class %d: kc, mb and nb must be >= 1 and pf <= 8", p->n + 1), -1;
        p->n++;
        if (*c == '\0') {
            if (limited) return snprintf(err, errlen, "the last class must have no row limit"), -1;
            return 0;
        }
        if (*c != ';' || !limited) return snprintf(err, errlen, "class %d: want ';' and a row limit before it", p->n), -1;
        if (p->n > 1 && p->max_rows[p->n - 1] <= p->max_rows[p->n - 2])
            return snprintf(err, errlen, "row limits must increase"), -1;
        c++;
    }
}

static double tune_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Best of reps runs of every GEMM of g with blocking b, in seconds. */
static double time_blocking(tt_pool *pool, const tt_blocking *b, const tt_tune_gemm *g, int ng, int rows, int reps)
{
    tt_gemm_plan plan = {.n = 1, .b = {*b}};
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = tune_now_s();
        for (int i = 0; i < ng; i++) tt_gemm(pool, &plan, g[i].w, g[i].a, g[i].lda, g[i].c, g[i].ldc, rows, 0, g[i].ws);
        double t = tune_now_s() - t0;
        if (t < best) best = t;
    }
    return best;
}

int tt_gemm_tune(tt_pool *pool, tt_blocking *b, const tt_tune_gemm *g, int ng, int rows, int reps)
{
    if (ng <= 0 || rows <= 0) return 0;
    time_blocking(pool, b, g, ng, rows, 1); /* warm up: weights into cache, threads awake */
    tt_blocking best = *b;
    double tbest = time_blocking(pool, &best, g, ng, rows, reps);
    int timed = 1;
    for (int coord = 0; coord < 3; coord++) {
        int nv = coord == 0 ? N_KC : coord == 1 ? N_PF : N_TILE;
        tt_blocking start = best;
        for (int v = 0; v < nv; v++) {
            tt_blocking c = start;
            if (coord == 0) c.kc = kc_values[v];
            else if (coord == 1) c.pf = pf_values[v];
            else c.mb = tile_values[v][0], c.nb = tile_values[v][1];
            if (same_blocking(&c, &start)) continue;
            double t = time_blocking(pool, &c, g, ng, rows, reps);
            timed++;
            if (t < tbest) tbest = t, best = c;
        }
    }
    *b = best;
    return timed;
}
