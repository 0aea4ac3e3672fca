/* pi05_internal.h: the types and op signatures kernels/pi05's .c files share: the model's layers, a
 * request's slab, a program's scratch, and the ops of pi05_ops.c the stages are written in.
 * Must not: be included outside kernels/pi05 (native sees pi05.h only), or declare an op that
 * allocates: every buffer an op touches is sized in pi05_program_new / pi05_slab_new. */
#ifndef PI05_INTERNAL_H
#define PI05_INTERNAL_H

#include <stdarg.h>

#include "../common/tt_arena.h"
#include "../common/tt_gemm.h"
#include "../common/tt_pool.h"
#include "pi05.h"

typedef struct p5_fused p5_fused;

/* One Linear layer y = x W^T + b, W [n][k] (PyTorch layout).
 * PI05_REF keeps W in fp32 as given; the fast paths keep it packed in `mat` (dtype per layer: bf16
 * for the big matmuls in PI05_BF16, fp32 for the layers the reference keeps in fp32). */
typedef struct {
    int n, k;
    int keep_f32;     /* fp32 even in PI05_BF16 */
    float *w;         /* PI05_REF */
    float *b;         /* [n] or NULL (mat.bias points at it; a grouped part's is in its group's bias) */
    tt_mat mat;       /* fast paths (inside fused->buf when fused) */
    p5_fused *fused;  /* the group this layer is part of, or NULL */
    int part;
} p5_lin;

/* Linear layers that read the same input (q/k/v, gate/up), run as one GEMM in the fast paths:
 * their packed panels lie back to back, part i writing columns [off[i], off[i] + n_i) of a
 * [rows][ld] output (off[i] a multiple of TT_NR; padding columns come out 0). PI05_REF runs the
 * parts one by one into the same layout. */
struct p5_fused {
    int nparts, ld, off[3];
    int has_bias;
    p5_lin *part[3];
    tt_mat mat;
    void *buf;
    float *bias; /* [ld] when the parts have biases */
};

typedef struct {
    float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    p5_lin q, k, v, o, fc1, fc2;
    p5_fused qkv;
} p5_vis_layer;

typedef struct {
    float *in_norm, *post_norm; /* Gemma RMSNorm weights, applied as (1 + w) */
    p5_lin q, k, v, o, gate, up, down;
    p5_fused qkv, gu;
} p5_lm_layer;

typedef struct {
    p5_lin ada_in, ada_post; /* adaRMSNorm modulation dense layers [3*width][width] */
    p5_lin q, k, v, o, gate, up, down;
    p5_fused qkv, gu;
} p5_ex_layer;

/* An expected checkpoint tensor. */
typedef struct {
    char name[160];
    int ndim;
    int64_t shape[4];
    int kind;  /* P5_SLOT_* */
    void *dst; /* p5_lin* or float** */
    int set;
} p5_slot;

enum { P5_SLOT_LIN_W, P5_SLOT_LIN_B, P5_SLOT_VEC, P5_SLOT_EMBED };

struct pi05_model {
    pi05_dims d;
    pi05_precision prec;
    tt_isa isa;
    int v_tokens, v_hd; /* tokens per camera, vision head dim */
    p5_lin patch;       /* [v_width][3*patch*patch], fp32 */
    float *pos;         /* [v_tokens][v_width] */
    p5_vis_layer *vl;
    float *post_w, *post_b;
    p5_lin proj;
    float *embed32;    /* PI05_REF / PI05_F32: [vocab][l_width] */
    uint16_t *embed16; /* PI05_BF16: bf16 rows */
    p5_lm_layer *ll;
    p5_ex_layer *el;
    p5_lin ada_final, act_in, act_out, time_in, time_out;
    p5_slot *slots;
    int nslots;
    /* Every weight buffer above (panels, biases, norm vectors, the embedding) is a piece of this one
     * arena, allocated here or attached from packed weights (the packed-weights cache). */
    tt_arena arena;
    size_t bytes;
};

/* One request's state: image tokens, then the per-layer K/V of its valid prefix. */
struct pi05_slab {
    const pi05_program *prog;
    int max_prefix;    /* cams * v_tokens + text_bucket */
    int nimg;          /* valid image token rows in img (after VISION) */
    int prefix_len;    /* valid prefix rows (after PREFIX); -1 before */
    int vision_done;
    float *img;        /* [cams * v_tokens][l_width] */
    /* PI05_REF: K and V fp32 [layers][kv_heads][max_prefix][head_dim] */
    float *k32, *v32;
    /* fast paths: per layer and KV head, K packed as a GEMM weight [prefix][head_dim] and V as
     * V^T [head_dim][prefix], so attention is two tt_gemm calls over the slab */
    tt_mat *kmat, *vmat;
    void *kbuf, *vbuf;
    size_t kstride, vstride; /* bytes per (layer, kv head) */
    size_t bytes;
};

struct pi05_program {
    pi05_model *m;
    pi05_preset preset;
    tt_pool *pool;
    int nthreads;
    tt_gemm_plan plan; /* the GEMM blocking by row count (tt_gemm_plan.h) */
    int max_prefix;
    int max_pos;
    float *rope_cos, *rope_sin; /* [max_pos][head_dim/2] */
    /* scratch (allocated once) */
    float *v_patch, *v_x, *v_h, *v_qkv, *v_a, *v_m; /* *_qkv, *_gu: fused outputs, ld = fused.ld */
    float *l_x, *l_h, *l_qkv, *l_a, *l_gu;
    float *e_x, *e_h, *e_y, *e_qkv, *e_a, *e_gu, *e_t, *e_vel, *e_cond, *e_mods;
    int mods_steps; /* the step count e_mods holds the adaRMS modulations for (0: none) */
    float *scores;    /* PI05_REF: one row of attention probabilities */
    void *gemm_ws;    /* bf16 copy of a GEMM's A */
    /* fast attention: per-thread score blocks [P5_QB][att_sc_ld] and their bf16 copies, the packed
     * suffix K / V^T of every request ([request][kv head], att_ws_half bytes each), vision scratch */
    float *att_sc;
    uint16_t *att_abf;
    long att_sc_ld, att_abf_ld;
    void *att_ws;
    size_t att_ws_half;
    tt_mat *suf_mats;
    void *vis_att_ws;
    float *e_k32;     /* PI05_REF expert keys/values: prefix + suffix rows */
    float *e_v32;
    size_t bytes;
};

/* ---- pi05_ops.c ---- */
/* The dtype of attention matmuls: bf16 in PI05_BF16 (like the reference's bf16 run), else fp32. */
tt_dtype p5_att_dtype(const pi05_model *m);
void p5_err(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void *p5_alloc(size_t bytes, size_t *total);
/* y[m][n] (+)= x[m][k] W^T + b; ACCUM adds into y. */
void p5_linear(pi05_program *p, const p5_lin *l, const float *x, long ldx, float *y, long ldy, int m,
               int accum);
/* All parts of f: y [m][f->ld]. */
void p5_linear_fused(pi05_program *p, const p5_fused *f, const float *x, long ldx, float *y, int m);
/* y = x * rsqrt(mean(x^2) + eps) * (1 + w) per row. */
void p5_rmsnorm(pi05_program *p, const float *x, float *y, int rows, int n, const float *w, float eps);
/* y = RMS(x) * (1 + scale) + shift with mod = [scale | shift | gate] per row group. */
void p5_adarms(pi05_program *p, const float *x, float *y, int rows, int n, const float *mod, float eps);
/* x += gate (*) t, per row. */
void p5_gated_add(pi05_program *p, float *x, const float *t, int rows, int n, const float *gate);
/* Per row of gu [rows][ld]: gu[0:n] = gelu_tanh(gu[0:n]) * gu[up:up+n] (up < 0: no product). */
void p5_geglu(pi05_program *p, float *gu, long ld, int rows, int n, int up);
void p5_layernorm(pi05_program *p, const float *x, float *y, int rows, int n, const float *g,
                  const float *b, float eps);
/* Rotate-half RoPE on heads [rows][heads*hd] (row stride ld) at positions pos0 + row. */
void p5_rope(pi05_program *p, float *x, long ld, int rows, int heads, int pos0);
/* At most this many query rows per attention task (a score block stays in L2); the rows are split
 * into equal blocks, so a 50-row suffix is one block and reads its keys once. */
enum { P5_QB = 64 };

/* Attention for nb requests: request r's nq query rows q[r*nq ..] ([heads*hd] each) over its slab's
 * prefix K/V of `layer` plus its own nsuf suffix rows ksuf/vsuf[r*nsuf ..] ([kv*hd] each; nsuf may
 * be 0) -> out[r*nq ..]. Masked tokens are not in the slab, so there is no mask. */
void p5_attend_slabs(pi05_program *p, pi05_slab *const *slabs, int nb, int layer, const float *q, long ldq,
                     int nq, int heads, const float *ksuf, const float *vsuf, long ldkv, int nsuf, float *out,
                     long ldo);
/* Bidirectional attention within each of nb blocks of T rows (vision): q/k/v rows of stride ld,
 * out [nb*T][heads*hd]. */
void p5_attend_blocks(pi05_program *p, const float *q, const float *k, const float *v, long ld, float *out,
                      int nb, int T, int heads, int hd);
/* Writes the prefix K / V (fp32 rows of stride ld) of one layer into the slab. */
void p5_slab_store(pi05_program *p, pi05_slab *s, int layer, const float *k, const float *v, long ld, int P);

/* ---- stages ---- */
int p5_vision_run(pi05_program *p, pi05_slab *s, const float *images, const uint8_t *cam_mask);
int p5_prefix_run(pi05_program *p, pi05_slab *s, const int32_t *tokens, const uint8_t *mask, int ntok);
void p5_expert_run(pi05_program *p, pi05_slab *const *slabs, int nb, const float *noise, int horizon,
                   int steps, int pack, const pi05_guide *const *guides, float *actions);

#endif
