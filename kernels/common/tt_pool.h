/* tt_pool: a persistent pool of worker threads.
 *
 * Threads are created once (tt_pool_create) and parked between jobs; a job is
 * a function applied to task indices 0..ntasks-1, handed out dynamically so
 * uneven tasks balance. The calling thread works too, so a pool of n threads
 * spawns n-1 workers. No allocation and no thread creation per job.
 * Must not: know what a task computes: kernels hand it functions.
 */
#ifndef TT_POOL_H
#define TT_POOL_H

typedef struct tt_pool tt_pool;

/* fn(arg, task, thread): thread is 0..nthreads-1, stable for the job, so a
 * task may use per-thread scratch indexed by it. */
typedef void (*tt_task_fn)(void *arg, int task, int thread);

/* TT_NUM_THREADS when set to a positive integer, else the number of CPUs in
 * this process's affinity mask (sched_getaffinity), at least 1. */
int tt_default_threads(void);

/* Returns NULL when threads cannot be created. nthreads <= 0 means default. */
tt_pool *tt_pool_create(int nthreads);
void tt_pool_destroy(tt_pool *p);
int tt_pool_threads(const tt_pool *p);

/* Pins worker i (1..nthreads-1) to cpus[i % ncpus]; thread 0 is the caller's, which pins itself.
 * Returns 0, or the errno of the first pthread_setaffinity_np that failed. At start-up only. */
int tt_pool_pin(tt_pool *p, const int *cpus, int ncpus);

/* Runs fn on every task and returns when all are done. Not reentrant: a task
 * must not call tt_pool_run on the same pool. p == NULL runs serially. */
void tt_pool_run(tt_pool *p, int ntasks, tt_task_fn fn, void *arg);

#endif
