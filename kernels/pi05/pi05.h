/* pi05: the pi0.5 (lerobot/pi05_base) megakernels on the host CPU, one C ABI.
 *
 * Three stages, one call each (docs/pi05.md has the math):
 *   VISION  SigLIP + projector for 1-4 cameras -> image tokens in the request's slab;
 *   PREFIX  the Gemma prefix over the valid image and text tokens -> the slab's per-layer K/V;
 *   EXPERT  the whole flow-matching loop (time embedding, adaRMSNorm, action in/out projections,
 *           attention over prefix K/V + suffix, N Euler steps) -> actions; a batched EXPERT runs nb
 *           requests, each with its own slab and noise, in one call.
 *
 * Lifecycle (all allocation happens here, never in a run call):
 *   pi05_model_new(dims, precision)            empty model for these shapes
 *   pi05_model_set(model, name, ...) per tensor  copied and packed at once (the source may be unmapped
 *                                              right after the call: streams an F32 checkpoint to bf16);
 *                                              calls for different tensors may run concurrently
 *   or pi05_model_new_packed(dims, ..., packed) the packed weights of an earlier load, mapped
 *   pi05_model_ready(model)                    every expected tensor present? (names the missing ones)
 *   pi05_program_new(model, preset, threads)   scratch for one preset + the thread pool
 *   pi05_slab_new(program)                     one request's state (image tokens, K/V); reusable
 *   pi05_vision / pi05_prefix / pi05_expert / pi05_expert_batch
 *
 * Masked cameras and padded text tokens are dropped before compute: a masked key gets weight exactly 0
 * in the reference, and the valid tokens keep positions cumsum(mask)-1, which is their index in the
 * compacted sequence, so the result is the same (docs/pi05.md, "Masks and positions").
 *
 * A program is used by one thread at a time (its scratch is shared by its calls); run several programs
 * for concurrency. Errors: functions return 0, or a negative PI05_E* code with a message in err.
 *
 * This header is the whole ABI of kernels/pi05: it must not expose the internal types
 * (pi05_internal.h) nor anything of kernels/common.
 */
#ifndef PI05_H
#define PI05_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Shapes. What the checkpoint's tensor shapes say is checked against these at pi05_model_set. */
typedef struct {
    int image, patch;                   /* input image side (224) and patch side (14) */
    int v_width, v_layers, v_heads;     /* SigLIP 1152, 27, 16 (head_dim = v_width / v_heads) */
    int v_mlp;                          /* 4304 */
    float v_eps;                        /* LayerNorm eps 1e-6 */
    int l_width, l_layers, l_heads;     /* Gemma prefix 2048, 18, 8 */
    int kv_heads, head_dim;             /* 1, 256 (shared by prefix and expert: they attend jointly) */
    int l_mlp, vocab;                   /* 16384, 257152 */
    int e_width, e_heads, e_mlp;        /* expert 1024, 8, 4096 (layers = l_layers) */
    float l_eps, e_eps;                 /* RMSNorm eps 1e-6 */
    float rope_theta;                   /* 10000 */
    double min_period, max_period;      /* time embedding 4e-3, 4.0 (double: the reference computes it in float64) */
    int action_dim;                     /* 32 */
} pi05_dims;

/* Fills d with the full-size lerobot/pi05_base shapes. */
void pi05_dims_default(pi05_dims *d);

typedef enum {
    PI05_REF = 0,  /* the scalar fp32 reference path: plain loops, one thread, fp32 weights */
    PI05_F32 = 1,  /* the fast path (packed GEMMs, thread pool, runtime ISA dispatch) in fp32 */
    PI05_BF16 = 2, /* the fast path with bf16 weights and matmul inputs, fp32 accumulate; fp32 for
                      the patch/position embeddings, norms, softmax, time MLP, adaRMS modulation and
                      the action in/out projections */
} pi05_precision;

enum {
    PI05_OK = 0,
    PI05_EINVAL = -1,   /* a bad argument or input (message names it) */
    PI05_ENOMEM = -2,
    PI05_ESHAPE = -3,   /* a tensor of the wrong shape or dtype */
    PI05_EMISSING = -4, /* pi05_model_ready: tensors missing */
    PI05_ESTATE = -5,   /* called in the wrong order (e.g. EXPERT before PREFIX on this slab) */
};

enum { PI05_DT_F32 = 0, PI05_DT_BF16 = 1 }; /* tensor dtypes of pi05_model_set: tt_dtype's TT_F32, TT_BF16 */

enum { PI05_MAX_CAMS = 4, PI05_MAX_STEPS = 32 };

typedef struct pi05_model pi05_model;
typedef struct pi05_program pi05_program;
typedef struct pi05_slab pi05_slab;

/* isa: -1 = the best this CPU has (capped by TT_ISA), else a tt_isa value (tests force each path).
 * Ignored by PI05_REF. */
pi05_model *pi05_model_new(const pi05_dims *d, pi05_precision prec, int isa, char *err, size_t errlen);

/* Hands one checkpoint tensor to the model under its lerobot name (older `action_time_mlp_*` names
 * are accepted). Returns 1 when the name is not part of the model (ignored, e.g. an expert lm_head),
 * 0 when taken, PI05_ESHAPE when its shape or dtype is wrong (err names the tensor and both shapes). */
int pi05_model_set(pi05_model *m, const char *name, int dtype, const int64_t *shape, int ndim,
                   const void *data, char *err, size_t errlen);

/* 0 when every expected tensor was set, else PI05_EMISSING with the first missing names in err. */
int pi05_model_ready(pi05_model *m, char *err, size_t errlen);

/* The packed weights of a ready model as one block of memory, the same bytes whatever order the
 * tensors were set in: what a packed-weights cache file holds. layout_id names the block's layout
 * (every piece's name, offset and size, the precision and the pack version): a block written by a
 * build with another layout never loads. */
const void *pi05_model_packed(const pi05_model *m, size_t *bytes);
uint64_t pi05_model_layout_id(const pi05_model *m);

/* A ready model over packed weights already in memory (a mapped cache file): `packed` holds
 * `bytes` bytes that pi05_model_packed gave for a model of the same dims and precision, and
 * layout_id the id it was written with; the model never writes them and they must outlive it.
 * Packing is skipped entirely (no tensor is set). NULL with the reason in err on a layout or size
 * mismatch. */
pi05_model *pi05_model_new_packed(const pi05_dims *d, pi05_precision prec, int isa, const void *packed,
                                  size_t bytes, uint64_t layout_id, char *err, size_t errlen);

/* Number of expected tensors and the name of the i-th (for loaders that report by name). */
int pi05_model_tensor_count(const pi05_model *m);
const char *pi05_model_tensor_name(const pi05_model *m, int i);

/* Bytes of packed weights the model holds. */
size_t pi05_model_bytes(const pi05_model *m);
const char *pi05_model_isa(const pi05_model *m);
void pi05_model_free(pi05_model *m);

/* A preset, one of the compiled configurations of the pi0.5 server: cams 1-4; text_bucket
 * 32/64/128/224, or 192 with 1 camera, 160 with 2, 96 with 4; action_rows 32 (H <= 32) or 64;
 * max_batch requests per pi05_expert_batch (1-8). threads <= 0: TT_NUM_THREADS or the CPUs of this
 * process. */
typedef struct {
    int cams, text_bucket, action_rows, max_batch;
} pi05_preset;

/* 1 when p is one of those presets. */
int pi05_preset_valid(const pi05_preset *p);

pi05_program *pi05_program_new(pi05_model *m, const pi05_preset *p, int threads, char *err,
                                size_t errlen);
size_t pi05_program_bytes(const pi05_program *p); /* scratch bytes */
/* Pins the program's pool thread i (1..threads-1) to cpus[i % ncpus]; thread 0 is the caller's, which
 * pins itself. At start-up, never during a run. */
int pi05_program_pin(pi05_program *p, const int *cpus, int ncpus, char *err, size_t errlen);

/* GEMM blocking. A program starts with the blocking derived from this CPU's L1 data cache;
 * pi05_program_tune times a few candidate blockings on the model's own weights at this preset's row
 * counts (the expert's action rows; the prefix's rows, which vision's are close to) and keeps the
 * fastest per class, taking a few hundred milliseconds; the plan's text form (pi05_program_plan)
 * carries a tuned plan to the next start (a cache per CPU model). Results are bit-identical under
 * every plan. set_plan: 0, or PI05_EINVAL naming what is wrong; tune: the number of timings made. */
int pi05_program_plan(const pi05_program *p, char *buf, size_t len);
int pi05_program_set_plan(pi05_program *p, const char *plan, char *err, size_t errlen);
int pi05_program_tune(pi05_program *p, int reps, char *err, size_t errlen);
int pi05_program_threads(const pi05_program *p);
void pi05_program_free(pi05_program *p);

pi05_slab *pi05_slab_new(pi05_program *p, char *err, size_t errlen);
size_t pi05_slab_bytes(const pi05_slab *s);
void pi05_slab_free(pi05_slab *s);

/* Copies src's state (image tokens, prefix K/V) into dst, a slab of the same program or of another
 * program of the same model and preset (several programs of one model run concurrently): one
 * prefix, several expert runs. Slabs of two models or presets are refused (PI05_EINVAL). */
int pi05_slab_copy(pi05_slab *dst, const pi05_slab *src, char *err, size_t errlen);

/* A slab's prefix (its valid prefix length and the per-layer K/V) as a self-describing blob, so that one
 * prefix can serve many EXPERT runs on other slabs: of this program, or of another program whose model
 * has the same shapes, precision and kernel family (a prefix cache keeps these blobs; the engine may
 * run several programs of one model). pi05_slab_save_bytes is 0 when the slab has no prefix.
 * pi05_slab_load checks the blob against dst (PI05_ESHAPE names the first difference) and leaves dst
 * with the prefix and no image tokens: EXPERT runs on it bit-identically to the saved slab. */
size_t pi05_slab_save_bytes(const pi05_slab *s);
int pi05_slab_save(const pi05_slab *s, void *buf, size_t len, char *err, size_t errlen);
int pi05_slab_load(pi05_slab *dst, const void *buf, size_t len, char *err, size_t errlen);

/* VISION. images: [cams][3][image][image] float in [-1, 1] (cams = the preset's); cam_mask[cams]:
 * nonzero = present. Masked cameras are skipped. */
int pi05_vision(pi05_program *p, pi05_slab *s, const float *images, const uint8_t *cam_mask, char *err,
                size_t errlen);

/* PREFIX. tokens[ntok] with tok_mask[ntok] (nonzero = real token), ntok <= the preset's bucket; ids
 * must be < vocab. Uses the image tokens of the last pi05_vision on this slab. */
int pi05_prefix(pi05_program *p, pi05_slab *s, const int32_t *tokens, const uint8_t *tok_mask, int ntok,
                char *err, size_t errlen);

/* Valid prefix length of the slab after pi05_prefix. */
int pi05_slab_prefix_len(const pi05_slab *s);

/* The slab's K and V of one layer as fp32 [kv_heads][prefix_len][head_dim] (K after RoPE): for tests. */
int pi05_slab_kv(const pi05_slab *s, int layer, float *k, float *v);

/* The slab's image tokens as fp32 [valid cameras * tokens per camera][l_width]: for tests. */
int pi05_slab_image_tokens(const pi05_slab *s, float *out, int *rows);

/* EXPERT: noise [horizon][action_dim] -> actions [horizon][action_dim] after `steps` Euler steps
 * (1 <= steps <= PI05_MAX_STEPS, horizon <= the preset's action_rows). */
int pi05_expert(pi05_program *p, pi05_slab *s, const float *noise, int horizon, int steps,
                float *actions, char *err, size_t errlen);

/* Batched EXPERT: nb slabs (1 <= nb <= max_batch), noise and actions [nb][horizon][action_dim].
 * pack = 1 runs the linear layers of all requests as one GEMM over their stacked rows (weights
 * streamed once per step); pack = 0 runs them per request (weights streamed once per request).
 * Either way every request is bit-identical to pi05_expert on it: each output row of a GEMM is
 * summed in the same order whatever rows lie beside it, and attention runs per request. */
int pi05_expert_batch(pi05_program *p, pi05_slab *const *slabs, int nb, const float *noise,
                      int horizon, int steps, int pack, float *actions, char *err, size_t errlen);

/* Real-time chunking (guided inpainting of the previous chunk's unexecuted actions) for one request of
 * an EXPERT call. At each Euler step, with t the step's time (1 = noise) and v the velocity:
 *   x0 = x - t v;  e = weights (*) (prev - x0);  w = min(t/(1-t) * (t^2 + (1-t)^2)/t^2, max_guidance)
 *   (w = max_guidance at t = 1);  v' = v - w e;  x += dt v'
 * prev and weights are [horizon][action_dim] in model (normalized) space; weights 0 leave an element
 * unguided. Without a guide the loop is unchanged bit for bit. */
typedef struct {
    const float *prev;
    const float *weights;
    float max_guidance; /* > 0; lerobot's default is 10 */
} pi05_guide;

/* pi05_expert_batch with guides[nb] (a NULL entry, or guides NULL: that request is not guided). */
int pi05_expert_batch_guided(pi05_program *p, pi05_slab *const *slabs, int nb, const float *noise,
                             int horizon, int steps, int pack, const pi05_guide *const *guides,
                             float *actions, char *err, size_t errlen);

/* Multiply-add counts of one call, for GFLOP/s reports (a multiply-add counts 2 flops). */
double pi05_flops_vision(const pi05_model *m, int cams);
double pi05_flops_prefix(const pi05_model *m, int prefix_len);
double pi05_flops_expert_step(const pi05_model *m, int prefix_len, int horizon);

#ifdef __cplusplus
}
#endif

#endif
