/* tt_bench: a GEMM micro-bench of kernels/common without Go. For each shape M x K x N (the
 * activations A[M][K] times a packed weight W[N][K]^T, in fp32 and bf16 on the best isa here, or
 * TT_ISA's), the best of a few runs on a pool of TT_NUM_THREADS threads (default: every CPU of the
 * process) and its share of the peak measured in the same run on the same pool
 * (tt_peak_gflops_pool: the GEMM's own multiply-add instruction in a register-blocked loop).
 *   tt_bench [M K N]...   default: pi0.5's PREFIX (768 x 2048 x 2048, x 16384), its EXPERT step
 *                          (50 x 1024 x 4096) and an RF-DETR backbone GEMM (1369 x 384 x 1536). */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tt_cpu.h"
#include "tt_gemm.h"
#include "tt_pool.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Deterministic values in [-1, 1): the bench reads no files. */
static void fill(float *x, long n, unsigned seed)
{
    for (long i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / (float)(1u << 23) - 1.0f;
    }
}

static int bench(tt_pool *pool, tt_isa isa, tt_dtype dt, int m, int k, int n, double peak)
{
    float *a = malloc(sizeof(float) * (size_t)m * (size_t)k);
    float *w = malloc(sizeof(float) * (size_t)n * (size_t)k);
    float *c = malloc(sizeof(float) * (size_t)m * (size_t)n);
    tt_mat mat;
    int packed = 0;
    if (a != NULL && w != NULL && c != NULL) {
        fill(a, (long)m * k, 1);
        fill(w, (long)n * k, 2);
        packed = tt_mat_pack(&mat, dt, isa, w, k, 0, n, k, NULL) == 0;
    }
    void *ws = packed ? malloc(tt_gemm_ws_bytes(&mat, m) + 64) : NULL;
    if (ws == NULL) {
        fprintf(stderr, "tt_bench: out of memory for %d x %d x %d\n", m, k, n);
        if (packed) tt_mat_free(&mat);
        free(a), free(w), free(c);
        return -1;
    }
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        tt_gemm(pool, NULL, &mat, a, k, c, n, m, 0, ws);
        double t = now_s() - t0;
        if (t < best) best = t;
    }
    double gflops = 2.0 * m * k * n / best / 1e9;
    printf("%-5s %6d x %5d x %5d  %8.2f ms  %8.1f GFLOP/s  %5.1f%% of peak\n", dt == TT_BF16 ? "bf16" : "fp32", m,
           k, n, best * 1e3, gflops, peak > 0 ? 100.0 * gflops / peak : 0.0);
    tt_mat_free(&mat);
    free(ws), free(a), free(w), free(c);
    return 0;
}

int main(int argc, char **argv)
{
    int def[][3] = {{768, 2048, 2048}, {768, 2048, 16384}, {50, 1024, 4096}, {1369, 384, 1536}};
    int (*shapes)[3] = def, nshapes = 4;
    int custom[64][3];
    if (argc > 1) {
        if ((argc - 1) % 3 != 0 || (argc - 1) / 3 > 64) {
            fprintf(stderr, "usage: tt_bench [M K N]...\n");
            return 2;
        }
        nshapes = (argc - 1) / 3;
        for (int i = 0; i < nshapes; i++)
            for (int j = 0; j < 3; j++)
                if ((custom[i][j] = atoi(argv[1 + 3 * i + j])) <= 0) {
                    fprintf(stderr, "tt_bench: %s is not a positive size\n", argv[1 + 3 * i + j]);
                    return 2;
                }
        shapes = custom;
    }
    tt_pool *pool = tt_pool_create(0);
    if (pool == NULL) {
        fprintf(stderr, "tt_bench: cannot create the thread pool\n");
        return 1;
    }
    tt_isa isa = tt_cpu_best_isa();
    printf("isa %s, %d threads\n", tt_isa_name(isa), tt_pool_threads(pool));
    for (int d = 0; d < 2; d++) {
        tt_dtype dt = d == 0 ? TT_F32 : TT_BF16;
        double peak = tt_peak_gflops_pool(pool, dt, 20000000);
        printf("peak %s: %.1f GFLOP/s (%s)\n", dt == TT_BF16 ? "bf16" : "fp32", peak, tt_isa_name(tt_peak_isa(dt)));
        for (int i = 0; i < nshapes; i++)
            if (bench(pool, isa, dt, shapes[i][0], shapes[i][1], shapes[i][2], peak) != 0) return 1;
    }
    tt_pool_destroy(pool);
    return 0;
}
