/* pi05_api.c: the run calls of pi05.h: argument checks (each failure named in err), then the stage.
 * Must not: compute (the stages live in pi05_vision/prefix/expert.c) or let a bad argument reach a
 * stage: the stages trust their inputs. */
#include <math.h>

#include "pi05_internal.h"

int pi05_vision(pi05_program *p, pi05_slab *s, const float *images, const uint8_t *cam_mask, char *err,
                size_t errlen)
{
    if (s == NULL || s->prog != p || images == NULL || cam_mask == NULL) {
        p5_err(err, errlen, "vision: missing images, camera mask or a slab of this program");
        return PI05_EINVAL;
    }
    return p5_vision_run(p, s, images, cam_mask);
}

int pi05_prefix(pi05_program *p, pi05_slab *s, const int32_t *tokens, const uint8_t *tok_mask, int ntok,
                char *err, size_t errlen)
{
    if (s == NULL || s->prog != p) {
        p5_err(err, errlen, "prefix: a slab of this program is required");
        return PI05_EINVAL;
    }
    if (!s->vision_done) {
        p5_err(err, errlen, "prefix: run vision on this slab first");
        return PI05_ESTATE;
    }
    if (ntok < 0 || ntok > p->preset.text_bucket || (ntok > 0 && (tokens == NULL || tok_mask == NULL))) {
        p5_err(err, errlen, "prefix: %d tokens do not fit the %d-token bucket", ntok, p->preset.text_bucket);
        return PI05_EINVAL;
    }
    int valid = s->nimg;
    for (int i = 0; i < ntok; i++) {
        if (!tok_mask[i]) continue;
        if (tokens[i] < 0 || tokens[i] >= p->m->d.vocab) {
            p5_err(err, errlen, "prefix: token %d is id %d, outside the vocabulary [0, %d)", i, (int)tokens[i],
                   p->m->d.vocab);
            return PI05_EINVAL;
        }
        valid++;
    }
    if (valid == 0) {
        p5_err(err, errlen, "prefix: no valid token (every camera and every text token is masked)");
        return PI05_EINVAL;
    }
    return p5_prefix_run(p, s, tokens, tok_mask, ntok);
}

static int check_expert(pi05_program *p, pi05_slab *const *slabs, int nb, const float *noise, int horizon,
                        int steps, const float *actions, char *err, size_t errlen)
{
    if (nb < 1 || nb > p->preset.max_batch) {
        p5_err(err, errlen, "expert: batch of %d, the program takes 1..%d", nb, p->preset.max_batch);
        return PI05_EINVAL;
    }
    if (horizon < 1 || horizon > p->preset.action_rows) {
        p5_err(err, errlen, "expert: horizon %d outside 1..%d (the preset's action rows)", horizon,
               p->preset.action_rows);
        return PI05_EINVAL;
    }
    if (steps < 1 || steps > PI05_MAX_STEPS) {
        p5_err(err, errlen, "expert: %d steps outside 1..%d", steps, PI05_MAX_STEPS);
        return PI05_EINVAL;
    }
    if (noise == NULL || actions == NULL) {
        p5_err(err, errlen, "expert: noise and actions are required");
        return PI05_EINVAL;
    }
    long n = (long)nb * horizon * p->m->d.action_dim;
    for (long i = 0; i < n; i++)
        if (!isfinite(noise[i])) {
            p5_err(err, errlen, "expert: noise[%ld] is not finite", i);
            return PI05_EINVAL;
        }
    for (int r = 0; r < nb; r++) {
        if (slabs[r] == NULL || slabs[r]->prog != p) {
            p5_err(err, errlen, "expert: slab %d does not belong to this program", r);
            return PI05_EINVAL;
        }
        if (slabs[r]->prefix_len < 1) {
            p5_err(err, errlen, "expert: slab %d has no prefix (run vision and prefix first)", r);
            return PI05_ESTATE;
        }
    }
    return 0;
}

int pi05_expert(pi05_program *p, pi05_slab *s, const float *noise, int horizon, int steps,
                float *actions, char *err, size_t errlen)
{
    return pi05_expert_batch(p, &s, 1, noise, horizon, steps, 1, actions, err, errlen);
}

int pi05_expert_batch(pi05_program *p, pi05_slab *const *slabs, int nb, const float *noise,
                      int horizon, int steps, int pack, float *actions, char *err, size_t errlen)
{
    return pi05_expert_batch_guided(p, slabs, nb, noise, horizon, steps, pack, NULL, actions, err, errlen);
}

static int check_guide(const pi05_guide *g, int r, long n, char *err, size_t errlen)
{
    if (g->prev == NULL || g->weights == NULL || !isfinite(g->max_guidance) || g->max_guidance <= 0) {
        p5_err(err, errlen, "expert: guide %d needs prev, weights and a positive finite max_guidance", r);
        return PI05_EINVAL;
    }
    for (long i = 0; i < n; i++)
        if (!isfinite(g->prev[i]) || !isfinite(g->weights[i])) {
            p5_err(err, errlen, "expert: guide %d: prev or weights [%ld] is not finite", r, i);
            return PI05_EINVAL;
        }
    return 0;
}

int pi05_expert_batch_guided(pi05_program *p, pi05_slab *const *slabs, int nb, const float *noise,
                             int horizon, int steps, int pack, const pi05_guide *const *guides,
                             float *actions, char *err, size_t errlen)
{
    int rc = check_expert(p, slabs, nb, noise, horizon, steps, actions, err, errlen);
    if (rc != 0) return rc;
    for (int r = 0; guides != NULL && r < nb; r++) {
        if (guides[r] == NULL) continue;
        rc = check_guide(guides[r], r, (long)horizon * p->m->d.action_dim, err, errlen);
        if (rc != 0) return rc;
    }
    p5_expert_run(p, slabs, nb, noise, horizon, steps, pack != 0, guides, actions);
    return 0;
}
