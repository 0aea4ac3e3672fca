/* tt_pool.c: the persistent worker pool of tt_pool.h (pthreads, a job generation counter, dynamic
 * task hand-out). Must not: create a thread or allocate in tt_pool_run: only create/destroy do. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "tt_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Workers spin briefly on the job generation (jobs in a forward come back to
 * back, microseconds apart), then sleep on a condition variable so an idle
 * server costs no CPU. */
enum { SPIN_ITERS = 4000 };

struct tt_pool {
    int nthreads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    atomic_uint generation; /* bumped once per job */
    atomic_int next_task;
    atomic_int remaining; /* workers still inside the current job */
    atomic_int stop;
    int ntasks;
    tt_task_fn fn;
    void *arg;
};

typedef struct {
    tt_pool *pool;
    int id;
} worker_arg;

int tt_default_threads(void)
{
    const char *env = getenv("TT_NUM_THREADS");
    if (env != NULL) {
        char *end = NULL;
        long v = strtol(env, &end, 10);
        if (end != env && *end == '\0' && v > 0 && v <= 1024) return (int)v;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    return 1;
}

static void run_tasks(tt_pool *p, int thread)
{
    for (;;) {
        int t = atomic_fetch_add_explicit(&p->next_task, 1, memory_order_relaxed);
        if (t >= p->ntasks) break;
        p->fn(p->arg, t, thread);
    }
}

static void *worker_main(void *varg)
{
    worker_arg *wa = varg;
    tt_pool *p = wa->pool;
    int id = wa->id;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
               !atomic_load(&p->stop)) {
            if (++spins < SPIN_ITERS) {
                __builtin_ia32_pause();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        run_tasks(p, id);
        atomic_fetch_sub_explicit(&p->remaining, 1, memory_order_release);
    }
}

tt_pool *tt_pool_create(int nthreads)
{
    if (nthreads <= 0) nthreads = tt_default_threads();
    tt_pool *p = calloc(1, sizeof *p);
    if (p == NULL) return NULL;
    p->nthreads = nthreads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->threads = calloc((size_t)nthreads, sizeof *p->threads);
    if (p->threads == NULL) {
        free(p);
        return NULL;
    }
    for (int i = 1; i < nthreads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (wa == NULL) goto fail;
        wa->pool = p;
        wa->id = i;
        if (pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
            free(wa);
            goto fail;
        }
        continue;
    fail:
        p->nthreads = i; /* destroy joins only the workers that exist */
        tt_pool_destroy(p);
        return NULL;
    }
    return p;
}

void tt_pool_destroy(tt_pool *p)
{
    if (p == NULL) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->nthreads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p->threads);
    free(p);
}

int tt_pool_threads(const tt_pool *p) { return p == NULL ? 1 : p->nthreads; }

int tt_pool_pin(tt_pool *p, const int *cpus, int ncpus)
{
    if (p == NULL || cpus == NULL || ncpus <= 0) return 0;
    for (int i = 1; i < p->nthreads; i++) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpus[i % ncpus], &set);
        int rc = pthread_setaffinity_np(p->threads[i], sizeof set, &set);
        if (rc != 0) return rc;
    }
    return 0;
}

void tt_pool_run(tt_pool *p, int ntasks, tt_task_fn fn, void *arg)
{
    if (ntasks <= 0) return;
    if (p == NULL || p->nthreads == 1 || ntasks == 1) {
        for (int t = 0; t < ntasks; t++) fn(arg, t, 0);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    p->ntasks = ntasks;
    atomic_store_explicit(&p->next_task, 0, memory_order_relaxed);
    atomic_store_explicit(&p->remaining, p->nthreads - 1, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, 0);
    int spins = 0;
    while (atomic_load_explicit(&p->remaining, memory_order_acquire) > 0) {
        if (++spins < SPIN_ITERS) __builtin_ia32_pause();
        else sched_yield();
    }
}
