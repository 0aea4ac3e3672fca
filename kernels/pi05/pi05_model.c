/* pi05_model.c: the model, program and slab lifecycles: the checkpoint tensor table, packing at
 * load, every scratch buffer. All allocation of kernels/pi05 happens here.
 * Must not: run a stage, or allocate after pi05_program_new / pi05_slab_new returned. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/tt_attention.h"
#include "../common/tt_arena.h"
#include "../common/tt_cpu.h"
#include "../common/tt_gemm_plan.h"
#include "pi05_internal.h"

_Static_assert(PI05_DT_F32 == (int)TT_F32 && PI05_DT_BF16 == (int)TT_BF16, "pi05 tensor dtypes are tt_dtype values");

#define VIS "paligemma_with_expert.paligemma.model.vision_tower.vision_model."
#define PROJ "paligemma_with_expert.paligemma.model.multi_modal_projector.linear."
#define LM "paligemma_with_expert.paligemma.model.language_model."
#define EMBED "paligemma_with_expert.paligemma.lm_head.weight"
#define EX "paligemma_with_expert.gemma_expert.model."

void pi05_dims_default(pi05_dims *d)
{
    *d = (pi05_dims){.image = 224, .patch = 14, .v_width = 1152, .v_layers = 27, .v_heads = 16,
                     .v_mlp = 4304, .v_eps = 1e-6f, .l_width = 2048, .l_layers = 18, .l_heads = 8,
                     .kv_heads = 1, .head_dim = 256, .l_mlp = 16384, .vocab = 257152, .e_width = 1024,
                     .e_heads = 8, .e_mlp = 4096, .l_eps = 1e-6f, .e_eps = 1e-6f, .rope_theta = 10000.0f,
                     .min_period = 4e-3, .max_period = 4.0, .action_dim = 32};
}

/* ---------------------------------------------------------------- tensor table */

static p5_slot *add_slot(pi05_model *m, int kind, void *dst, int ndim, const int64_t *shape,
                         const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static p5_slot *add_slot(pi05_model *m, int kind, void *dst, int ndim, const int64_t *shape,
                         const char *fmt, ...)
{
    p5_slot *s = &m->slots[m->nslots++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->name, sizeof s->name, fmt, ap);
    va_end(ap);
    s->kind = kind;
    s->dst = dst;
    s->ndim = ndim;
    for (int i = 0; i < ndim; i++) s->shape[i] = shape[i];
    return s;
}

/* A Linear "<prefix>weight" [n][k] and, when bias, "<prefix>bias" [n]. */
static void add_lin(pi05_model *m, p5_lin *l, int n, int k, int bias, int keep_f32, const char *prefix)
{
    l->n = n;
    l->k = k;
    l->keep_f32 = keep_f32;
    int64_t ws[2] = {n, k}, bs[1] = {n};
    add_slot(m, P5_SLOT_LIN_W, l, 2, ws, "%sweight", prefix);
    if (bias) add_slot(m, P5_SLOT_LIN_B, l, 1, bs, "%sbias", prefix);
}

static void add_vec(pi05_model *m, float **dst, int ndim, const int64_t *shape, const char *name)
{
    add_slot(m, P5_SLOT_VEC, dst, ndim, shape, "%s", name);
}

static void build_table(pi05_model *m)
{
    const pi05_dims *d = &m->d;
    char pre[200];
    int64_t vw[1] = {d->v_width}, lw[1] = {d->l_width};
    int hd = d->head_dim, kvd = d->kv_heads * d->head_dim;

    int64_t pw[4] = {d->v_width, 3, d->patch, d->patch};
    m->patch.n = d->v_width;
    m->patch.k = 3 * d->patch * d->patch;
    m->patch.keep_f32 = 1;
    add_slot(m, P5_SLOT_LIN_W, &m->patch, 4, pw, VIS "embeddings.patch_embedding.weight");
    add_slot(m, P5_SLOT_LIN_B, &m->patch, 1, vw, VIS "embeddings.patch_embedding.bias");
    int64_t ps[2] = {m->v_tokens, d->v_width};
    add_vec(m, &m->pos, 2, ps, VIS "embeddings.position_embedding.weight");
    for (int i = 0; i < d->v_layers; i++) {
        p5_vis_layer *L = &m->vl[i];
        snprintf(pre, sizeof pre, VIS "encoder.layers.%d.", i);
        char nm[240];
        snprintf(nm, sizeof nm, "%slayer_norm1.weight", pre), add_vec(m, &L->ln1_w, 1, vw, nm);
        snprintf(nm, sizeof nm, "%slayer_norm1.bias", pre), add_vec(m, &L->ln1_b, 1, vw, nm);
        snprintf(nm, sizeof nm, "%slayer_norm2.weight", pre), add_vec(m, &L->ln2_w, 1, vw, nm);
        snprintf(nm, sizeof nm, "%slayer_norm2.bias", pre), add_vec(m, &L->ln2_b, 1, vw, nm);
        snprintf(nm, sizeof nm, "%sself_attn.q_proj.", pre), add_lin(m, &L->q, d->v_width, d->v_width, 1, 0, nm);
        snprintf(nm, sizeof nm, "%sself_attn.k_proj.", pre), add_lin(m, &L->k, d->v_width, d->v_width, 1, 0, nm);
        snprintf(nm, sizeof nm, "%sself_attn.v_proj.", pre), add_lin(m, &L->v, d->v_width, d->v_width, 1, 0, nm);
        snprintf(nm, sizeof nm, "%sself_attn.out_proj.", pre), add_lin(m, &L->o, d->v_width, d->v_width, 1, 0, nm);
        snprintf(nm, sizeof nm, "%smlp.fc1.", pre), add_lin(m, &L->fc1, d->v_mlp, d->v_width, 1, 0, nm);
        snprintf(nm, sizeof nm, "%smlp.fc2.", pre), add_lin(m, &L->fc2, d->v_width, d->v_mlp, 1, 0, nm);
    }
    add_vec(m, &m->post_w, 1, vw, VIS "post_layernorm.weight");
    add_vec(m, &m->post_b, 1, vw, VIS "post_layernorm.bias");
    add_lin(m, &m->proj, d->l_width, d->v_width, 1, 0, PROJ);

    int64_t es[2] = {d->vocab, d->l_width};
    add_slot(m, P5_SLOT_EMBED, NULL, 2, es, EMBED);
    for (int i = 0; i < d->l_layers; i++) {
        p5_lm_layer *L = &m->ll[i];
        char nm[240];
        snprintf(pre, sizeof pre, LM "layers.%d.", i);
        snprintf(nm, sizeof nm, "%sself_attn.q_proj.", pre), add_lin(m, &L->q, d->l_heads * hd, d->l_width, 0, 0, nm);
        snprintf(nm, sizeof nm, "%sself_attn.k_proj.", pre), add_lin(m, &L->k, kvd, d->l_width, 0, 0, nm);
        snprintf(nm, sizeof nm, "%sself_attn.v_proj.", pre), add_lin(m, &L->v, kvd, d->l_width, 0, 0, nm);
        snprintf(nm, sizeof nm, "%sself_attn.o_proj.", pre), add_lin(m, &L->o, d->l_width, d->l_heads * hd, 0, 0, nm);
        snprintf(nm, sizeof nm, "%smlp.gate_proj.", pre), add_lin(m, &L->gate, d->l_mlp, d->l_width, 0, 0, nm);
        snprintf(nm, sizeof nm, "%smlp.up_proj.", pre), add_lin(m, &L->up, d->l_mlp, d->l_width, 0, 0, nm);
        snprintf(nm, sizeof nm, "%smlp.down_proj.", pre), add_lin(m, &L->down, d->l_width, d->l_mlp, 0, 0, nm);
        snprintf(nm, sizeof nm, "%sinput_layernorm.weight", pre), add_vec(m, &L->in_norm, 1, lw, nm);
        snprintf(nm, sizeof nm, "%spost_attention_layernorm.weight", pre), add_vec(m, &L->post_norm, 1, lw, nm);
    }
    int ew = d->e_width;
    for (int i = 0; i < d->l_layers; i++) {
        p5_ex_layer *L = &m->el[i];
        char nm[240];
        snprintf(pre, sizeof pre, EX "layers.%d.", i);
        snprintf(nm, sizeof nm, "%sself_attn.q_proj.", pre), add_lin(m, &L->q, d->e_heads * hd, ew, 0, 0, nm);
        snprintf(nm, sizeof nm, "%sself_attn.k_proj.", pre), add_lin(m, &L->k, kvd, ew, 0, 0, nm);
        snprintf(nm, sizeof nm, "%sself_attn.v_proj.", pre), add_lin(m, &L->v, kvd, ew, 0, 0, nm);
        snprintf(nm, sizeof nm, "%sself_attn.o_proj.", pre), add_lin(m, &L->o, ew, d->e_heads * hd, 0, 0, nm);
        snprintf(nm, sizeof nm, "%smlp.gate_proj.", pre), add_lin(m, &L->gate, d->e_mlp, ew, 0, 0, nm);
        snprintf(nm, sizeof nm, "%smlp.up_proj.", pre), add_lin(m, &L->up, d->e_mlp, ew, 0, 0, nm);
        snprintf(nm, sizeof nm, "%smlp.down_proj.", pre), add_lin(m, &L->down, ew, d->e_mlp, 0, 0, nm);
        snprintf(nm, sizeof nm, "%sinput_layernorm.dense.", pre), add_lin(m, &L->ada_in, 3 * ew, ew, 1, 1, nm);
        snprintf(nm, sizeof nm, "%spost_attention_layernorm.dense.", pre), add_lin(m, &L->ada_post, 3 * ew, ew, 1, 1, nm);
    }
    add_lin(m, &m->ada_final, 3 * ew, ew, 1, 1, EX "norm.dense.");
    add_lin(m, &m->act_in, ew, d->action_dim, 1, 1, "action_in_proj.");
    add_lin(m, &m->act_out, d->action_dim, ew, 1, 1, "action_out_proj.");
    add_lin(m, &m->time_in, ew, ew, 1, 1, "time_mlp_in.");
    add_lin(m, &m->time_out, ew, ew, 1, 1, "time_mlp_out.");
}

static int fused_tt_dtype(const pi05_model *m, const p5_lin *l)
{
    return (m->prec == PI05_BF16 && !l->keep_f32) ? TT_BF16 : TT_F32;
}

/* Groups layers sharing one input (see p5_fused): their columns in the group's panels. */
static void fuse(p5_fused *f, p5_lin *a, p5_lin *b, p5_lin *c, int bias)
{
    p5_lin *parts[3] = {a, b, c};
    f->nparts = c ? 3 : 2;
    f->has_bias = bias;
    int col = 0;
    for (int i = 0; i < f->nparts; i++) {
        f->part[i] = parts[i];
        f->off[i] = col;
        parts[i]->fused = f;
        parts[i]->part = i;
        f->ld = col + parts[i]->n;
        col += (parts[i]->n + TT_NR - 1) / TT_NR * TT_NR;
    }
}

static void fuse_all(pi05_model *m)
{
    for (int i = 0; i < m->d.v_layers; i++) fuse(&m->vl[i].qkv, &m->vl[i].q, &m->vl[i].k, &m->vl[i].v, 1);
    for (int i = 0; i < m->d.l_layers; i++) {
        fuse(&m->ll[i].qkv, &m->ll[i].q, &m->ll[i].k, &m->ll[i].v, 0);
        fuse(&m->ll[i].gu, &m->ll[i].gate, &m->ll[i].up, NULL, 0);
        fuse(&m->el[i].qkv, &m->el[i].q, &m->el[i].k, &m->el[i].v, 0);
        fuse(&m->el[i].gu, &m->el[i].gate, &m->el[i].up, NULL, 0);
    }
}

/* Whether a layer runs inside its group's panels (the fast paths; PI05_REF runs parts one by one). */
static int in_group(const pi05_model *m, const p5_lin *l) { return l->fused != NULL && m->prec != PI05_REF; }

static size_t tensor_elems(const p5_slot *s)
{
    size_t count = 1;
    for (int i = 0; i < s->ndim; i++) count *= (size_t)s->shape[i];
    return count;
}

/* The version of what pi0.5 packs into its arena: bump it when the bytes packed for the same
 * tensors change (rounding, panel order) while every piece keeps its name, offset and size. */
enum { PI05_PACK_VERSION = 1 };

/* Reserves every weight buffer in table order (tt_arena): a group's panels (and bias) at its first
 * part, everything else at its own slot. */
static void lay_out(pi05_model *m)
{
    tt_arena *a = &m->arena;
    tt_arena_init(a, (uint64_t)PI05_PACK_VERSION << 32 | (uint64_t)m->prec << 16 | TT_NR);
    for (int i = 0; i < m->nslots; i++) {
        p5_slot *s = &m->slots[i];
        size_t count = tensor_elems(s);
        if (s->kind == P5_SLOT_EMBED) {
            if (m->prec == PI05_BF16) tt_arena_reserve(a, (void **)&m->embed16, count * 2, s->name);
            else tt_arena_reserve(a, (void **)&m->embed32, count * 4, s->name);
        } else if (s->kind == P5_SLOT_VEC) {
            tt_arena_reserve(a, (void **)s->dst, count * 4, s->name);
        } else if (s->kind == P5_SLOT_LIN_B) {
            p5_lin *l = s->dst;
            if (!in_group(m, l)) tt_arena_reserve(a, (void **)&l->b, count * 4, s->name);
        } else { /* LIN_W */
            p5_lin *l = s->dst;
            tt_dtype dt = (tt_dtype)fused_tt_dtype(m, l);
            if (m->prec == PI05_REF) {
                tt_arena_reserve(a, (void **)&l->w, count * 4, s->name);
            } else if (l->fused) {
                p5_fused *f = l->fused;
                if (l->part == 0) {
                    int cols = f->off[f->nparts - 1] + (f->part[f->nparts - 1]->n + TT_NR - 1) / TT_NR * TT_NR;
                    tt_arena_reserve(a, &f->buf, tt_mat_bytes(dt, cols, l->k), s->name);
                    if (f->has_bias) tt_arena_reserve(a, (void **)&f->bias, (size_t)f->ld * 4, s->name);
                }
            } else {
                tt_arena_reserve(a, &l->mat.panels, tt_mat_bytes(dt, l->n, l->k), s->name);
            }
        }
    }
}

/* Once the arena has an address: every packed matrix's header (a group's and each part's view of
 * its columns), and each grouped part's bias inside its group's. */
static void bind_mats(pi05_model *m)
{
    if (m->prec == PI05_REF) return;
    for (int i = 0; i < m->nslots; i++) {
        if (m->slots[i].kind != P5_SLOT_LIN_W) continue;
        p5_lin *l = m->slots[i].dst;
        tt_dtype dt = (tt_dtype)fused_tt_dtype(m, l);
        if (l->fused) {
            p5_fused *f = l->fused;
            if (l->part == 0) {
                tt_mat_view(&f->mat, f->buf, dt, m->isa, f->ld, l->k);
                f->mat.bias = f->bias;
            }
            size_t off = (size_t)f->off[l->part] / TT_NR * (size_t)f->mat.kp * TT_NR * (dt == TT_BF16 ? 2 : 4);
            tt_mat_view(&l->mat, (char *)f->buf + off, dt, m->isa, l->n, l->k);
            if (f->has_bias) l->b = f->bias + f->off[l->part];
        } else {
            tt_mat_view(&l->mat, l->mat.panels, dt, m->isa, l->n, l->k);
        }
        l->mat.bias = l->b;
    }
}

static int dims_ok(const pi05_dims *d, char *err, size_t n)
{
#define NEED(c, what)                      \
    if (!(c)) {                            \
        p5_err(err, n, "dims: %s", what); \
        return 0;                          \
    }
    NEED(d->image > 0 && d->patch > 0 && d->image % d->patch == 0, "image must be a multiple of patch");
    NEED(d->v_width > 0 && d->v_heads > 0 && d->v_width % d->v_heads == 0, "v_width % v_heads != 0");
    NEED(d->v_layers > 0 && d->v_mlp > 0, "vision layers/mlp");
    NEED(d->l_width > 0 && d->l_layers > 0 && d->l_mlp > 0 && d->vocab > 0, "prefix width/layers/mlp/vocab");
    NEED(d->kv_heads > 0 && d->l_heads % d->kv_heads == 0 && d->e_heads % d->kv_heads == 0,
         "heads must be multiples of kv_heads");
    NEED(d->head_dim > 0 && d->head_dim % 2 == 0, "head_dim must be even");
    NEED(d->e_width > 0 && d->e_width % 2 == 0 && d->e_mlp > 0, "expert width must be even");
    NEED(d->action_dim > 0, "action_dim");
    NEED(d->min_period > 0 && d->max_period > 0 && d->rope_theta > 0, "periods / rope_theta");
#undef NEED
    return 1;
}

/* A model laid out (tensor table, groups, arena pieces) but without weight memory yet. */
static pi05_model *model_layout(const pi05_dims *d, pi05_precision prec, int isa, char *err, size_t errlen)
{
    if (!dims_ok(d, err, errlen)) return NULL;
    if (prec != PI05_REF && prec != PI05_F32 && prec != PI05_BF16) {
        p5_err(err, errlen, "unknown precision %d", (int)prec);
        return NULL;
    }
    pi05_model *m = calloc(1, sizeof *m);
    if (m == NULL) goto oom;
    m->d = *d;
    m->prec = prec;
    m->isa = prec == PI05_REF ? TT_ISA_SCALAR : (isa < 0 ? tt_cpu_best_isa() : (tt_isa)isa);
    if (!tt_cpu_supports(m->isa)) {
        p5_err(err, errlen, "this CPU cannot run isa %s", tt_isa_name(m->isa));
        free(m);
        return NULL;
    }
    int g = d->image / d->patch;
    m->v_tokens = g * g;
    m->v_hd = d->v_width / d->v_heads;
    m->vl = calloc((size_t)d->v_layers, sizeof *m->vl);
    m->ll = calloc((size_t)d->l_layers, sizeof *m->ll);
    m->el = calloc((size_t)d->l_layers, sizeof *m->el);
    int nmax = 8 + 16 * d->v_layers + 9 * d->l_layers + 11 * d->l_layers + 16;
    m->slots = calloc((size_t)nmax, sizeof *m->slots);
    if (!m->vl || !m->ll || !m->el || !m->slots) goto oom;
    build_table(m);
    fuse_all(m);
    lay_out(m);
    if (m->arena.oom) goto oom;
    return m;
oom:
    p5_err(err, errlen, "out of memory");
    pi05_model_free(m);
    return NULL;
}

pi05_model *pi05_model_new(const pi05_dims *d, pi05_precision prec, int isa, char *err, size_t errlen)
{
    pi05_model *m = model_layout(d, prec, isa, err, errlen);
    if (m == NULL) return NULL;
    if (tt_arena_alloc(&m->arena) != 0) {
        p5_err(err, errlen, "out of memory for %zu bytes of weights", m->arena.bytes);
        pi05_model_free(m);
        return NULL;
    }
    m->bytes = m->arena.bytes;
    bind_mats(m);
    return m;
}

pi05_model *pi05_model_new_packed(const pi05_dims *d, pi05_precision prec, int isa, const void *packed,
                                  size_t bytes, uint64_t layout_id, char *err, size_t errlen)
{
    pi05_model *m = model_layout(d, prec, isa, err, errlen);
    if (m == NULL) return NULL;
    if (m->arena.layout_id != layout_id) {
        p5_err(err, errlen, "packed weights of layout %016llx, this build packs layout %016llx",
               (unsigned long long)layout_id, (unsigned long long)m->arena.layout_id);
        pi05_model_free(m);
        return NULL;
    }
    if (tt_arena_attach(&m->arena, (void *)packed, bytes) != 0) {
        p5_err(err, errlen, "packed weights of %zu bytes at %p, want %zu bytes 64-byte aligned", bytes, packed,
               (m->arena.bytes + 4095) & ~(size_t)4095);
        pi05_model_free(m);
        return NULL;
    }
    m->bytes = m->arena.bytes;
    bind_mats(m);
    for (int i = 0; i < m->nslots; i++) m->slots[i].set = 1;
    return m;
}

const void *pi05_model_packed(const pi05_model *m, size_t *bytes)
{
    *bytes = m->arena.bytes;
    return m->arena.base;
}

uint64_t pi05_model_layout_id(const pi05_model *m) { return m->arena.layout_id; }

void pi05_model_free(pi05_model *m)
{
    if (m == NULL) return;
    tt_arena_free(&m->arena);
    free(m->vl);
    free(m->ll);
    free(m->el);
    free(m->slots);
    free(m);
}

int pi05_model_tensor_count(const pi05_model *m) { return m->nslots; }
const char *pi05_model_tensor_name(const pi05_model *m, int i)
{
    return i >= 0 && i < m->nslots ? m->slots[i].name : NULL;
}
size_t pi05_model_bytes(const pi05_model *m) { return m->bytes; }
const char *pi05_model_isa(const pi05_model *m)
{
    return m->prec == PI05_REF ? "reference" : tt_isa_name(m->isa);
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

/* dst[0:count] = the tensor as fp32 (F32 copied, BF16 widened). */
static void to_f32_into(float *dst, int dtype, const void *data, size_t count)
{
    if (dtype == PI05_DT_F32) memcpy(dst, data, count * sizeof(float));
    else
        for (size_t i = 0; i < count; i++) dst[i] = tt_bf16_to_f32(((const uint16_t *)data)[i]);
}

/* Packs a Linear weight into its panels (its own, or its columns of the group's). */
static int pack_weight(pi05_model *m, p5_lin *l, int dtype, const void *data, size_t count)
{
    tt_dtype dt = (tt_dtype)fused_tt_dtype(m, l);
    void *panels = l->mat.panels;
    if (dt == TT_BF16 && dtype == PI05_DT_BF16) {
        tt_mat_pack_bf16_into(&l->mat, panels, m->isa, data, l->k, l->n, l->k);
    } else {
        /* F32 sources are read in place unless misaligned (a file may put an F32 tensor at any byte) */
        int direct = dtype == PI05_DT_F32 && ((uintptr_t)data & 3) == 0;
        float *tmp = direct ? (float *)data : malloc(count * sizeof(float) + 1);
        if (tmp == NULL) return -1;
        if (!direct) to_f32_into(tmp, dtype, data, count);
        tt_mat_pack_into(&l->mat, panels, dt, m->isa, tmp, l->k, 0, l->n, l->k);
        if (!direct) free(tmp);
    }
    l->mat.bias = l->b;
    return 0;
}

/* Tensors go to disjoint pieces of the arena, so calls for different tensors may run concurrently
 * (the loader packs in parallel); `set` is written per slot only. */
int pi05_model_set(pi05_model *m, const char *name, int dtype, const int64_t *shape, int ndim,
                   const void *data, char *err, size_t errlen)
{
    char alias[200];
    if (strncmp(name, "action_time_mlp_", 16) == 0) { /* older checkpoints */
        snprintf(alias, sizeof alias, "time_mlp_%s", name + 16);
        name = alias;
    }
    p5_slot *s = NULL;
    for (int i = 0; i < m->nslots; i++)
        if (strcmp(m->slots[i].name, name) == 0) {
            s = &m->slots[i];
            break;
        }
    if (s == NULL) return 1;
    int same = ndim == s->ndim;
    for (int i = 0; same && i < ndim; i++) same = shape[i] == s->shape[i];
    if (!same) {
        char got[96], want[96];
        shape_str(got, sizeof got, ndim, shape);
        shape_str(want, sizeof want, s->ndim, s->shape);
        p5_err(err, errlen, "tensor %s: shape %s, want %s", name, got, want);
        return PI05_ESHAPE;
    }
    if (dtype != PI05_DT_F32 && dtype != PI05_DT_BF16) {
        p5_err(err, errlen, "tensor %s: dtype %d is neither F32 nor BF16", name, dtype);
        return PI05_ESHAPE;
    }
    if (!m->arena.owned) {
        p5_err(err, errlen, "tensor %s: the model was made from packed weights, it takes no tensors", name);
        return PI05_EINVAL;
    }
    if (s->set) {
        p5_err(err, errlen, "tensor %s given twice", name);
        return PI05_EINVAL;
    }
    size_t count = tensor_elems(s);

    if (s->kind == P5_SLOT_EMBED) {
        if (m->prec != PI05_BF16) to_f32_into(m->embed32, dtype, data, count);
        else if (dtype == PI05_DT_BF16) memcpy(m->embed16, data, count * 2);
        else
            for (size_t i = 0; i < count; i++) m->embed16[i] = tt_f32_to_bf16(((const float *)data)[i]);
    } else if (s->kind == P5_SLOT_VEC) {
        to_f32_into(*(float **)s->dst, dtype, data, count);
    } else if (s->kind == P5_SLOT_LIN_B) {
        to_f32_into(((p5_lin *)s->dst)->b, dtype, data, count);
    } else { /* LIN_W */
        p5_lin *l = s->dst;
        if (m->prec == PI05_REF) to_f32_into(l->w, dtype, data, count);
        else if (pack_weight(m, l, dtype, data, count) != 0) {
            p5_err(err, errlen, "tensor %s: out of memory", name);
            return PI05_ENOMEM;
        }
    }
    s->set = 1;
    return 0;
}

int pi05_model_ready(pi05_model *m, char *err, size_t errlen)
{
    int missing = 0;
    size_t o = 0;
    for (int i = 0; i < m->nslots; i++) {
        if (m->slots[i].set) continue;
        if (missing == 0) o = (size_t)snprintf(err, errlen, "missing tensors: %s", m->slots[i].name);
        else if (missing < 8 && o < errlen) o += (size_t)snprintf(err + o, errlen - o, ", %s", m->slots[i].name);
        missing++;
    }
    if (missing == 0) return 0;
    if (missing > 8 && o < errlen) snprintf(err + o, errlen - o, " (and %d more)", missing - 8);
    return PI05_EMISSING;
}

/* ---------------------------------------------------------------- presets and programs */

int pi05_preset_valid(const pi05_preset *p)
{
    if (p->cams < 1 || p->cams > PI05_MAX_CAMS) return 0;
    if (p->action_rows != 32 && p->action_rows != 64) return 0;
    if (p->max_batch < 1 || p->max_batch > 8) return 0;
    switch (p->text_bucket) {
    case 32: case 64: case 128: case 224: return 1;
    case 192: return p->cams == 1;
    case 160: return p->cams == 2;
    case 96: return p->cams == 4;
    }
    return 0;
}

void *p5_alloc(size_t bytes, size_t *total)
{
    size_t b = (bytes + 63) & ~(size_t)63;
    if (b == 0) b = 64;
    void *x = aligned_alloc(64, b);
    if (x != NULL) {
        memset(x, 0, b);
        *total += b;
    }
    return x;
}

static size_t lin_max_k(const pi05_model *m)
{
    size_t k = 0;
    for (int i = 0; i < m->nslots; i++)
        if (m->slots[i].kind == P5_SLOT_LIN_W) {
            const p5_lin *l = m->slots[i].dst;
            if ((size_t)l->k > k) k = (size_t)l->k;
        }
    return k;
}

static size_t maxz(size_t a, size_t b) { return a > b ? a : b; }

pi05_program *pi05_program_new(pi05_model *m, const pi05_preset *pr, int threads, char *err,
                                size_t errlen)
{
    if (!pi05_preset_valid(pr)) {
        p5_err(err, errlen, "preset: %d cameras, text bucket %d, %d action rows, batch %d is not a pi0.5 preset",
               pr->cams, pr->text_bucket, pr->action_rows, pr->max_batch);
        return NULL;
    }
    if (pi05_model_ready(m, err, errlen) != 0) return NULL;
    pi05_program *p = calloc(1, sizeof *p);
    if (p == NULL) {
        p5_err(err, errlen, "out of memory");
        return NULL;
    }
    const pi05_dims *d = &m->d;
    p->m = m;
    p->preset = *pr;
    if (m->prec != PI05_REF) {
        p->pool = tt_pool_create(threads);
        if (p->pool == NULL) {
            p5_err(err, errlen, "cannot start %d threads", threads);
            free(p);
            return NULL;
        }
    }
    p->nthreads = tt_pool_threads(p->pool);
    tt_gemm_plan_default(&p->plan);
    size_t T = (size_t)m->v_tokens, V = (size_t)pr->cams * T;
    size_t P = V + (size_t)pr->text_bucket, R = (size_t)pr->action_rows * (size_t)pr->max_batch;
    size_t hd = (size_t)d->head_dim, kvd = (size_t)d->kv_heads * hd, nsteps = PI05_MAX_STEPS;
    size_t lq = (size_t)d->l_heads * hd, eq = (size_t)d->e_heads * hd, ew = (size_t)d->e_width;
    p->max_prefix = (int)P;
    p->max_pos = (int)(P + (size_t)pr->action_rows);
    size_t *t = &p->bytes;
    const size_t F = sizeof(float);
    p->rope_cos = p5_alloc((size_t)p->max_pos * hd / 2 * F, t);
    p->rope_sin = p5_alloc((size_t)p->max_pos * hd / 2 * F, t);
    size_t vw = (size_t)d->v_width, lw = (size_t)d->l_width;
    size_t vqkv = (size_t)m->vl[0].qkv.ld, lqkv = (size_t)m->ll[0].qkv.ld, lgu = (size_t)m->ll[0].gu.ld;
    size_t eqkv = (size_t)m->el[0].qkv.ld, egu = (size_t)m->el[0].gu.ld;
    p->v_patch = p5_alloc(V * (size_t)m->patch.k * F, t);
    p->v_x = p5_alloc(V * vw * F, t);
    p->v_h = p5_alloc(V * vw * F, t);
    p->v_qkv = p5_alloc(V * vqkv * F, t);
    p->v_a = p5_alloc(V * vw * F, t);
    p->v_m = p5_alloc(V * (size_t)d->v_mlp * F, t);
    p->l_x = p5_alloc(P * lw * F, t);
    p->l_h = p5_alloc(P * lw * F, t);
    p->l_qkv = p5_alloc(P * lqkv * F, t);
    p->l_a = p5_alloc(P * lq * F, t);
    p->l_gu = p5_alloc(P * lgu * F, t);
    p->e_x = p5_alloc(R * (size_t)d->action_dim * F, t);
    p->e_vel = p5_alloc(R * (size_t)d->action_dim * F, t);
    p->e_h = p5_alloc(R * ew * F, t);
    p->e_y = p5_alloc(R * ew * F, t);
    p->e_t = p5_alloc(R * ew * F, t);
    p->e_qkv = p5_alloc(R * eqkv * F, t);
    p->e_a = p5_alloc(R * eq * F, t);
    p->e_gu = p5_alloc(R * egu * F, t);
    p->e_cond = p5_alloc(2 * nsteps * ew * F, t);
    p->e_mods = p5_alloc((size_t)(2 * d->l_layers + 1) * nsteps * 3 * ew * F, t);
    size_t keys = P + (size_t)pr->action_rows;
    size_t qrows = maxz(maxz(P, T), (size_t)pr->action_rows);
    if (m->prec == PI05_REF) {
        p->scores = p5_alloc(maxz(keys, T) * F, t);
        p->e_k32 = p5_alloc(keys * kvd * F, t);
        p->e_v32 = p5_alloc(keys * kvd * F, t);
    } else {
        size_t nt = (size_t)p->nthreads, kp = (keys + 1) & ~(size_t)1;
        size_t rows = maxz(maxz(V, P), maxz(R, qrows));
        p->gemm_ws = p5_alloc(tt_gemm_ws_bound((int)rows, (int)lin_max_k(m)), t);
        p->att_sc_ld = (long)kp;
        p->att_abf_ld = (long)maxz(kp, hd + 2);
        p->att_sc = p5_alloc(nt * P5_QB * kp * F, t);
        p->att_abf = p5_alloc(nt * P5_QB * (size_t)p->att_abf_ld * 2, t);
        size_t na = (size_t)pr->action_rows;
        p->att_ws_half = maxz(tt_mat_bytes(TT_F32, (int)na, (int)hd), tt_mat_bytes(TT_F32, (int)hd, (int)na));
        p->att_ws_half = (p->att_ws_half + 63) & ~(size_t)63;
        size_t nsm = (size_t)pr->max_batch * (size_t)d->kv_heads;
        p->att_ws = p5_alloc(nsm * 2 * p->att_ws_half, t);
        p->suf_mats = p5_alloc(2 * nsm * sizeof(tt_mat), t);
        tt_attn_shape vs = {pr->cams, (int)T, d->v_heads, m->v_hd, p->nthreads, p5_att_dtype(m), m->isa};
        p->vis_att_ws = p5_alloc(tt_attention_ws_bytes(&vs), t);
    }
    void *need[] = {p->rope_cos, p->rope_sin, p->v_patch, p->v_x, p->v_h, p->v_qkv, p->v_a, p->v_m, p->l_x,
                    p->l_h, p->l_qkv, p->l_a, p->l_gu, p->e_x, p->e_vel, p->e_h, p->e_y, p->e_t, p->e_qkv,
                    p->e_a, p->e_gu, p->e_cond, p->e_mods};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (need[i] == NULL) goto oom;
    if (m->prec == PI05_REF ? (!p->scores || !p->e_k32 || !p->e_v32)
                            : (!p->gemm_ws || !p->att_ws || !p->att_sc || !p->att_abf || !p->suf_mats || !p->vis_att_ws))
        goto oom;
    /* RoPE tables, fp32 angles as the reference: inv_freq[i] = theta^(-2i/hd), angle = pos * inv_freq */
    int half = d->head_dim / 2;
    for (int i = 0; i < half; i++) {
        float inv = powf(d->rope_theta, -(float)(2 * i) / (float)d->head_dim);
        for (int pos = 0; pos < p->max_pos; pos++) {
            float a = (float)pos * inv;
            p->rope_cos[(size_t)pos * half + i] = cosf(a);
            p->rope_sin[(size_t)pos * half + i] = sinf(a);
        }
    }
    return p;
oom:
    p5_err(err, errlen, "program: out of memory (%zu bytes of scratch)", p->bytes);
    pi05_program_free(p);
    return NULL;
}

size_t pi05_program_bytes(const pi05_program *p) { return p->bytes; }

int pi05_program_pin(pi05_program *p, const int *cpus, int ncpus, char *err, size_t errlen)
{
    int rc = tt_pool_pin(p->pool, cpus, ncpus);
    if (rc != 0) {
        p5_err(err, errlen, "pin %d threads to %d CPUs: error %d", p->nthreads, ncpus, rc);
        return PI05_EINVAL;
    }
    return 0;
}
int pi05_program_threads(const pi05_program *p) { return p->nthreads; }

void pi05_program_free(pi05_program *p)
{
    if (p == NULL) return;
    void *all[] = {p->rope_cos, p->rope_sin, p->v_patch, p->v_x, p->v_h, p->v_qkv, p->v_a, p->v_m, p->l_x,
                   p->l_h, p->l_qkv, p->l_a, p->l_gu, p->e_x, p->e_vel, p->e_h, p->e_y, p->e_t, p->e_qkv,
                   p->e_a, p->e_gu, p->e_cond, p->e_mods, p->scores, p->gemm_ws, p->att_ws, p->e_k32, p->e_v32,
                   p->att_sc, p->att_abf, p->suf_mats, p->vis_att_ws};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    tt_pool_destroy(p->pool);
    free(p);
}

/* ---------------------------------------------------------------- slabs */

pi05_slab *pi05_slab_new(pi05_program *p, char *err, size_t errlen)
{
    const pi05_model *m = p->m;
    const pi05_dims *d = &m->d;
    pi05_slab *s = calloc(1, sizeof *s);
    if (s == NULL) goto oom;
    s->prog = p;
    s->max_prefix = p->max_prefix;
    s->prefix_len = -1;
    size_t hd = (size_t)d->head_dim, nkv = (size_t)d->l_layers * (size_t)d->kv_heads;
    s->img = p5_alloc((size_t)p->preset.cams * (size_t)m->v_tokens * (size_t)d->l_width * sizeof(float), &s->bytes);
    if (s->img == NULL) goto oom;
    if (m->prec == PI05_REF) {
        size_t n = nkv * (size_t)s->max_prefix * hd * sizeof(float);
        s->k32 = p5_alloc(n, &s->bytes);
        s->v32 = p5_alloc(n, &s->bytes);
        if (!s->k32 || !s->v32) goto oom;
    } else {
        tt_dtype dt = p5_att_dtype(m);
        s->kstride = (tt_mat_bytes(dt, s->max_prefix, (int)hd) + 63) & ~(size_t)63;
        s->vstride = (tt_mat_bytes(dt, (int)hd, s->max_prefix) + 63) & ~(size_t)63;
        s->kbuf = p5_alloc(nkv * s->kstride, &s->bytes);
        s->vbuf = p5_alloc(nkv * s->vstride, &s->bytes);
        s->kmat = calloc(nkv, sizeof *s->kmat);
        s->vmat = calloc(nkv, sizeof *s->vmat);
        if (!s->kbuf || !s->vbuf || !s->kmat || !s->vmat) goto oom;
    }
    return s;
oom:
    p5_err(err, errlen, "slab: out of memory");
    pi05_slab_free(s);
    return NULL;
}

size_t pi05_slab_bytes(const pi05_slab *s) { return s->bytes; }
int pi05_slab_prefix_len(const pi05_slab *s) { return s->prefix_len; }

void pi05_slab_free(pi05_slab *s)
{
    if (s == NULL) return;
    free(s->img);
    free(s->k32);
    free(s->v32);
    free(s->kbuf);
    free(s->vbuf);
    free(s->kmat);
    free(s->vmat);
    free(s);
}

int pi05_slab_copy(pi05_slab *dst, const pi05_slab *src, char *err, size_t errlen)
{
    if (dst == NULL || src == NULL) {
        p5_err(err, errlen, "slab copy: no slab");
        return PI05_EINVAL;
    }
    const pi05_preset *ps = &src->prog->preset, *pd = &dst->prog->preset;
    /* Same model and preset: the same buffer sizes, strides and packed layouts on both sides. */
    if (dst->prog->m != src->prog->m || ps->cams != pd->cams || ps->text_bucket != pd->text_bucket ||
        ps->action_rows != pd->action_rows || dst->max_prefix != src->max_prefix) {
        p5_err(err, errlen, "slab copy: the slabs' programs differ in model or preset (cams %d/%d, text %d/%d)",
               ps->cams, pd->cams, ps->text_bucket, pd->text_bucket);
        return PI05_EINVAL;
    }
    if (dst == src) return 0;
    const pi05_program *p = src->prog;
    const pi05_dims *d = &p->m->d;
    memcpy(dst->img, src->img, (size_t)src->nimg * (size_t)d->l_width * sizeof(float));
    dst->nimg = src->nimg;
    dst->vision_done = src->vision_done;
    dst->prefix_len = src->prefix_len;
    size_t nkv = (size_t)d->l_layers * (size_t)d->kv_heads;
    if (p->m->prec == PI05_REF) {
        size_t n = nkv * (size_t)src->max_prefix * (size_t)d->head_dim * sizeof(float);
        memcpy(dst->k32, src->k32, n);
        memcpy(dst->v32, src->v32, n);
        return 0;
    }
    memcpy(dst->kbuf, src->kbuf, nkv * src->kstride);
    memcpy(dst->vbuf, src->vbuf, nkv * src->vstride);
    for (size_t i = 0; i < nkv; i++) {
        dst->kmat[i] = src->kmat[i];
        dst->vmat[i] = src->vmat[i];
        dst->kmat[i].panels = (char *)dst->kbuf + i * dst->kstride;
        dst->vmat[i].panels = (char *)dst->vbuf + i * dst->vstride;
    }
    return 0;
}

/* Reads element (i, j) of a packed tt_mat (layout in tt_gemm.h). */
static float mat_at(const tt_mat *w, int i, int j)
{
    int p = i / TT_NR, lane = i % TT_NR;
    if (w->dtype == TT_F32) return ((const float *)w->panels)[((long)p * w->kp + j) * TT_NR + lane];
    long idx = (((long)p * (w->kp / 2) + j / 2) * TT_NR + lane) * 2 + (j & 1);
    return tt_bf16_to_f32(((const uint16_t *)w->panels)[idx]);
}

int pi05_slab_kv(const pi05_slab *s, int layer, float *k, float *v)
{
    const pi05_model *m = s->prog->m;
    const pi05_dims *d = &m->d;
    if (s->prefix_len < 0 || layer < 0 || layer >= d->l_layers) return PI05_ESTATE;
    int P = s->prefix_len, hd = d->head_dim;
    for (int h = 0; h < d->kv_heads; h++) {
        size_t slot = (size_t)layer * (size_t)d->kv_heads + (size_t)h;
        for (int r = 0; r < P; r++)
            for (int j = 0; j < hd; j++) {
                size_t o = ((size_t)h * (size_t)P + (size_t)r) * (size_t)hd + (size_t)j;
                if (m->prec == PI05_REF) {
                    size_t i = (slot * (size_t)s->max_prefix + (size_t)r) * (size_t)hd + (size_t)j;
                    k[o] = s->k32[i];
                    v[o] = s->v32[i];
                } else {
                    k[o] = mat_at(&s->kmat[slot], r, j);
                    v[o] = mat_at(&s->vmat[slot], j, r);
                }
            }
    }
    return 0;
}

int pi05_slab_image_tokens(const pi05_slab *s, float *out, int *rows)
{
    if (!s->vision_done) return PI05_ESTATE;
    *rows = s->nimg;
    memcpy(out, s->img, (size_t)s->nimg * (size_t)s->prog->m->d.l_width * sizeof(float));
    return 0;
}

/* ---------------------------------------------------------------- flop counts */

double pi05_flops_vision(const pi05_model *m, int cams)
{
    const pi05_dims *d = &m->d;
    double T = m->v_tokens * (double)cams, vw = d->v_width;
    double per = T * (4 * vw * vw + 2 * vw * d->v_mlp) + 2.0 * cams * m->v_tokens * (double)m->v_tokens * vw;
    return 2.0 * (T * m->patch.k * vw + d->v_layers * per + T * vw * d->l_width);
}

double pi05_flops_prefix(const pi05_model *m, int P)
{
    const pi05_dims *d = &m->d;
    double lw = d->l_width, hd = d->head_dim, q = d->l_heads * hd, kv = d->kv_heads * hd;
    /* every layer: k, v; all but the last: q, attention, o and the MLP */
    double kv_lin = (double)P * lw * kv * 2;
    double rest = (double)P * (lw * q * 2 + 3 * lw * d->l_mlp) + 2.0 * P * (double)P * q;
    return 2.0 * (d->l_layers * kv_lin + (d->l_layers - 1) * rest);
}

double pi05_flops_expert_step(const pi05_model *m, int P, int H)
{
    const pi05_dims *d = &m->d;
    double ew = d->e_width, hd = d->head_dim, q = d->e_heads * hd, kv = d->kv_heads * hd;
    double lin = (double)H * (ew * q * 2 + ew * kv * 2 + 3 * ew * d->e_mlp);
    double att = 2.0 * H * (double)(P + H) * q;
    return 2.0 * (d->l_layers * (lin + att) + (double)H * (2 * ew * d->action_dim));
}
