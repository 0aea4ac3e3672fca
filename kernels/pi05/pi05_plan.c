/* pi05_plan.c: a program's GEMM blocking plan (pi05.h): its text form, and tuning it on the model's
 * own weights at the preset's row counts.
 * Must not: change what a stage computes (every blocking is bit-identical), or run during a stage. */
#include <stdio.h>

#include "../common/tt_gemm_plan.h"
#include "pi05_internal.h"

int pi05_program_plan(const pi05_program *p, char *buf, size_t len)
{
    return tt_gemm_plan_format(&p->plan, buf, len);
}

int pi05_program_set_plan(pi05_program *p, const char *plan, char *err, size_t errlen)
{
    tt_gemm_plan pl;
    char why[160];
    if (tt_gemm_plan_parse(&pl, plan, why, sizeof why) != 0) {
        p5_err(err, errlen, "gemm plan %s: %s", plan, why);
        return PI05_EINVAL;
    }
    p->plan = pl;
    return 0;
}

/* A timed GEMM is cut to its first panels so it does about TUNE_FLOPS of work (at least
 * TUNE_MIN_PANELS panels): a class then tunes in a few hundred ms at 2 threads. The blocking acts per
 * panel slice and task, not per matrix width. */
#define TUNE_FLOPS 2e9
enum { TUNE_MIN_PANELS = 8 };

static tt_tune_gemm tune_gemm(const tt_mat *w, int rows, tt_mat *view, const float *a, long lda, float *c,
                              long ldc, void *ws)
{
    *view = *w;
    double per_panel = 2.0 * rows * (double)w->kp * TT_NR;
    int np = (int)(TUNE_FLOPS / per_panel);
    if (np < TUNE_MIN_PANELS) np = TUNE_MIN_PANELS;
    if (np < view->npanels) {
        view->npanels = np;
        view->n = np * TT_NR;
    }
    return (tt_tune_gemm){view, a, lda, c, ldc, ws};
}

/* Two classes: m <= 128 (one or two requests' expert rows: 4-11 row groups, so the task tile and
 * the per-call costs dominate), tuned on the expert's first layer (fused q/k/v, gate/up and the
 * down projection) at the preset's action rows; and every larger m (vision, prefix, batched
 * experts), tuned on the prefix's first layer (fused q/k/v and gate/up, K = 2048) at its rows. */
int pi05_program_tune(pi05_program *p, int reps, char *err, size_t errlen)
{
    const pi05_model *m = p->m;
    if (m->prec == PI05_REF) return 0;
    if (reps < 1) reps = 3;
    tt_mat views[3];
    tt_tune_gemm g[3];
    tt_gemm_plan plan = {.n = 2, .max_rows = {128}};
    plan.b[0] = plan.b[1] = p->plan.b[p->plan.n - 1];

    const p5_ex_layer *E = &m->el[0];
    int er = p->preset.action_rows;
    g[0] = tune_gemm(&E->qkv.mat, er, &views[0], p->e_y, m->d.e_width, p->e_qkv, E->qkv.ld, p->gemm_ws);
    g[1] = tune_gemm(&E->gu.mat, er, &views[1], p->e_y, m->d.e_width, p->e_gu, E->gu.ld, p->gemm_ws);
    g[2] = tune_gemm(&E->down.mat, er, &views[2], p->e_gu, E->gu.ld, p->e_h, m->d.e_width, p->gemm_ws);
    int timed = tt_gemm_tune(p->pool, &plan.b[0], g, 3, er, reps);

    const p5_lm_layer *L = &m->ll[0];
    int pr = p->max_prefix;
    g[0] = tune_gemm(&L->qkv.mat, pr, &views[0], p->l_h, m->d.l_width, p->l_qkv, L->qkv.ld, p->gemm_ws);
    g[1] = tune_gemm(&L->gu.mat, pr, &views[1], p->l_h, m->d.l_width, p->l_gu, L->gu.ld, p->gemm_ws);
    timed += tt_gemm_tune(p->pool, &plan.b[1], g, 2, pr, reps);
    p->plan = plan;
    (void)err, (void)errlen;
    return timed;
}
