/* rfdetr: the whole RF-DETR-base forward (Roboflow/rf-detr-base at 560x560)
 * as one C program: DINOv2-small windowed backbone, C2f projector, two-stage
 * top-300 query selection, 3-layer deformable decoder, heads. The math is
 * docs/rfdetr.md; the PyTorch twin is tools/reference/rfdetr.py.
 *
 * Life cycle (all allocation happens here, none per forward):
 *   p = rfdetr_new(precision, nthreads, isa)
 *   for i in 0..rfdetr_weight_count()-1:  rfdetr_set(p, name, dtype, shape, data)
 *       (by name, or rfdetr_set_weight(p, i, fp32 data) by index; in this order:
 *        a weight may be folded with an earlier one, e.g. the LayerScale lambdas
 *        into the projections they scale; data is copied or packed at once, the
 *        caller's buffer is not kept)
 *   rfdetr_finish(p)          derived tables (resized position embedding)
 *   rfdetr_forward(p, ...)    any number of times, one at a time
 *   rfdetr_free(p)
 */
#ifndef RFDETR_H
#define RFDETR_H

#include <stddef.h>
#include <stdint.h>

#include "tt_cpu.h"

enum {
    RFDETR_RES = 560,     /* input side in pixels */
    RFDETR_QUERIES = 300, /* decoder queries = output rows */
    RFDETR_CLASSES = 91,  /* COCO category ids 0..90 */
    RFDETR_TOKENS = 1600, /* 40 x 40 patches */
    RFDETR_DIM = 384,     /* backbone width */
    RFDETR_HIDDEN = 256,  /* projector / decoder width */
};

typedef enum { RFDETR_FP32 = 0, RFDETR_BF16 = 1 } rfdetr_precision;

/* Intermediate results kept after a forward, for tests (row-major). */
typedef enum {
    RFDETR_STAGE_TAP0 = 0, /* [1600][384] backbone tap after layer 1, final LN applied, token y*40+x */
    RFDETR_STAGE_TAP1,     /* after layer 4 */
    RFDETR_STAGE_TAP2,     /* after layer 7 */
    RFDETR_STAGE_TAP3,     /* after layer 10 */
    RFDETR_STAGE_MEMORY,   /* [1600][256] projector output */
    RFDETR_STAGE_TOPK,     /* [300] selected token indices (as floats), best first */
    RFDETR_STAGE_REF,      /* [300][4] decoder reference boxes (cx, cy, w, h) */
    RFDETR_STAGE_HS,       /* [300][256] decoder output after decoder.norm */
    RFDETR_STAGE_SCORE,    /* [1600] encoder score per token: its best class logit */
    RFDETR_STAGE_COUNT
} rfdetr_stage;

typedef struct rfdetr rfdetr;

/* The weights the program needs, by their original rfdetr checkpoint names
 * (no prefix). Shapes are PyTorch's; min_rows != 0 means dimension 0 may be
 * any size >= min_rows (only the first rows are used). */
int rfdetr_weight_count(void);
int rfdetr_weight_name(int i, char *buf, size_t len); /* 0, or -1 out of range */
int rfdetr_weight_shape(int i, int dims[4]); /* returns the rank */
int rfdetr_weight_min_rows(int i);

/* NULL when out of memory or threads cannot start. nthreads <= 0: default
 * (TT_NUM_THREADS, else usable CPUs). isa: the kernels to use (normally
 * tt_cpu_best_isa(); TT_ISA_SCALAR gives the reference path). */
rfdetr *rfdetr_new(rfdetr_precision precision, int nthreads, tt_isa isa);

/* A finished program over packed weights already in memory (a mapped cache file): `packed` holds
 * the `bytes` bytes rfdetr_packed gave for a program of the same precision, layout_id the id it was
 * written with; they are never written and must outlive the program. No weight is set. NULL with
 * the reason in err on a layout or size mismatch (or out of memory). */
rfdetr *rfdetr_new_packed(rfdetr_precision precision, int nthreads, tt_isa isa, const void *packed, size_t bytes,
                          uint64_t layout_id, char *err, size_t errlen);

/* The packed weights of a finished program as one block (the same bytes whatever the order they
 * were set in, the resized position table included), and the id of their layout: what a
 * packed-weights cache file holds. */
const void *rfdetr_packed(const rfdetr *p, size_t *bytes);
uint64_t rfdetr_layout_id(const rfdetr *p);
/* The layout id a program of this precision packs, without making one (0: out of memory). */
uint64_t rfdetr_layout_id_for(rfdetr_precision precision);

/* data holds the tensor in row-major fp32 with the shape of the table (for a
 * min_rows tensor, `rows` rows). Returns 0, or -1 with a message in err. */
int rfdetr_set_weight(rfdetr *p, int i, const float *data, int rows, char *err, size_t errlen);

/* The same by name: one checkpoint tensor under its rfdetr name, dtype a tt_dtype (TT_F32 or
 * TT_BF16, bf16 is widened), little-endian data of shape[ndim]. Returns 1 when the name is not a
 * weight of the program (ignored), 0 when taken, -1 with a message in err for a wrong shape or
 * dtype, or a folded weight set before the LayerScale it folds in (set in table order). */
int rfdetr_set(rfdetr *p, const char *name, int dtype, const int64_t *shape, int ndim, const void *data,
               char *err, size_t errlen);

/* Returns 0, or -1 with the first weight not set named in err. */
int rfdetr_finish(rfdetr *p, char *err, size_t errlen);

/* pixels: [3][560][560] normalized CHW. logits: [300][91], boxes: [300][4]
 * normalized (cx, cy, w, h). Returns 0, or -1 when the program is not finished. */
int rfdetr_forward(rfdetr *p, const float *pixels, float *logits, float *boxes);

/* Forces the two-stage selection to the given 300 token indices (best
 * first) instead of the top-k of the encoder scores; NULL restores top-k.
 * For tests: the decoder of two programs compared on the same queries (fp32
 * summation order alone can swap near-tied scores). Returns -1 when an
 * index is out of range. */
int rfdetr_force_selection(rfdetr *p, const int *tokens);

/* Number of floats of a stage, and a copy of it from the last forward. */
long rfdetr_stage_size(rfdetr_stage s);
int rfdetr_stage_copy(const rfdetr *p, rfdetr_stage s, float *out);

/* Forward seconds spent per phase in the last forward (backbone GEMMs,
 * backbone total, projector, decoder incl. selection); for benchmarks. */
typedef struct {
    double backbone_gemm, backbone, projector, decoder, total;
    double backbone_gemm_flops; /* multiply-adds x 2 in the backbone GEMMs */
    double flops;               /* multiply-adds x 2 in all GEMMs and attention matmuls */
} rfdetr_timing;
void rfdetr_last_timing(const rfdetr *p, rfdetr_timing *t);

/* GEMM blocking, as pi0.5's (kernels/common/tt_gemm_plan.h): the program starts with the blocking
 * derived from this CPU's L1 data cache; rfdetr_tune times candidate blockings on its own weights at
 * the decoder's 300 rows and the backbone's 1616 and keeps the fastest per class (a few hundred ms);
 * the text form carries a tuned plan to the next start. Results are bit-identical under every plan.
 * set_plan: 0, or -1 with the reason in err; tune: the number of timings made. */
int rfdetr_plan(const rfdetr *p, char *buf, size_t len);
int rfdetr_set_plan(rfdetr *p, const char *plan, char *err, size_t errlen);
int rfdetr_tune(rfdetr *p, int reps);

int rfdetr_threads(const rfdetr *p);
/* The memory the program holds: its packed weights (allocated, or the mapping it was given) and
 * its scratch buffers. */
size_t rfdetr_bytes(const rfdetr *p);
void rfdetr_free(rfdetr *p);

#endif
