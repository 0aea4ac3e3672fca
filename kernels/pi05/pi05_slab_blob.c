/* A slab's prefix as a blob (pi05.h: pi05_slab_save / pi05_slab_load).
 *
 * Layout: one p5_blob_head, then per (layer, kv head) slot, in slot order:
 *   PI05_REF:   K fp32 [P][head_dim], V fp32 [P][head_dim]          (the slab's k32/v32 rows)
 *   fast paths: K packed as a GEMM weight [P][head_dim], V^T packed [head_dim][P]: exactly the bytes
 *               p5_slab_store wrote (tt_mat_bytes of each), so a loaded slab holds the same panels.
 * P is the valid prefix length. The head records everything the byte layout depends on; a slab of any
 * program whose model matches it can take the blob. Plain memcpy both ways: no allocation. */
#include <string.h>

#include "pi05_internal.h"

enum { P5_BLOB_MAGIC = 0x564b3550 /* "P5KV" */, P5_BLOB_VERSION = 1 };

typedef struct {
    uint32_t magic, version;
    int32_t prec, isa, att_dtype, nr;
    int32_t layers, kv_heads, head_dim, width, prefix_len;
    int32_t k_n, k_k, k_npanels, k_kp; /* the packed K and V^T matrices of every slot (fast paths) */
    int32_t v_n, v_k, v_npanels, v_kp;
    uint64_t k_bytes, v_bytes;         /* per slot */
} p5_blob_head;

static size_t slot_count(const pi05_dims *d) { return (size_t)d->l_layers * (size_t)d->kv_heads; }

/* The head a slab of model m with prefix P would save; its K/V matrices from the slab when it has them. */
static void blob_head(const pi05_slab *s, int P, p5_blob_head *h)
{
    const pi05_model *m = s->prog->m;
    const pi05_dims *d = &m->d;
    memset(h, 0, sizeof *h);
    h->magic = P5_BLOB_MAGIC;
    h->version = P5_BLOB_VERSION;
    h->prec = m->prec;
    h->isa = m->prec == PI05_REF ? -1 : (int32_t)m->isa;
    h->att_dtype = m->prec == PI05_REF ? -1 : (int32_t)p5_att_dtype(m);
    h->nr = TT_NR;
    h->layers = d->l_layers;
    h->kv_heads = d->kv_heads;
    h->head_dim = d->head_dim;
    h->width = d->l_width;
    h->prefix_len = P;
    if (m->prec == PI05_REF) {
        h->k_bytes = h->v_bytes = (uint64_t)P * (uint64_t)d->head_dim * sizeof(float);
        return;
    }
    tt_dtype dt = p5_att_dtype(m);
    h->k_bytes = tt_mat_bytes(dt, P, d->head_dim);
    h->v_bytes = tt_mat_bytes(dt, d->head_dim, P);
}

size_t pi05_slab_save_bytes(const pi05_slab *s)
{
    if (s == NULL || s->prefix_len < 1) return 0;
    p5_blob_head h;
    blob_head(s, s->prefix_len, &h);
    return sizeof h + slot_count(&s->prog->m->d) * (size_t)(h.k_bytes + h.v_bytes);
}

int pi05_slab_save(const pi05_slab *s, void *buf, size_t len, char *err, size_t errlen)
{
    size_t need = pi05_slab_save_bytes(s);
    if (need == 0) {
        p5_err(err, errlen, "slab save: the slab has no prefix (run vision and prefix first)");
        return PI05_ESTATE;
    }
    if (buf == NULL || len != need) {
        p5_err(err, errlen, "slab save: buffer of %zu bytes, the prefix needs %zu", len, need);
        return PI05_EINVAL;
    }
    const pi05_dims *d = &s->prog->m->d;
    p5_blob_head h;
    blob_head(s, s->prefix_len, &h);
    if (s->prog->m->prec != PI05_REF) {
        const tt_mat *k = &s->kmat[0], *v = &s->vmat[0];
        h.k_n = k->n, h.k_k = k->k, h.k_npanels = k->npanels, h.k_kp = k->kp;
        h.v_n = v->n, h.v_k = v->k, h.v_npanels = v->npanels, h.v_kp = v->kp;
    }
    char *out = buf;
    memcpy(out, &h, sizeof h);
    out += sizeof h;
    size_t hd = (size_t)d->head_dim;
    for (size_t i = 0; i < slot_count(d); i++) {
        if (s->prog->m->prec == PI05_REF) {
            size_t row0 = i * (size_t)s->max_prefix * hd; /* slot i, row 0 of k32/v32 */
            memcpy(out, s->k32 + row0, h.k_bytes);
            memcpy(out + h.k_bytes, s->v32 + row0, h.v_bytes);
        } else {
            memcpy(out, s->kmat[i].panels, h.k_bytes);
            memcpy(out + h.k_bytes, s->vmat[i].panels, h.v_bytes);
        }
        out += h.k_bytes + h.v_bytes;
    }
    return 0;
}

/* Names the first field where blob head b differs from what dst's model would save. */
static int head_mismatch(const p5_blob_head *b, const p5_blob_head *want, char *err, size_t errlen)
{
    static const char *const names[] = {"precision", "kernel family", "attention dtype", "panel width",
                                        "layers", "kv heads", "head_dim", "width"};
    const int32_t got[] = {b->prec, b->isa, b->att_dtype, b->nr, b->layers, b->kv_heads, b->head_dim, b->width};
    const int32_t exp[] = {want->prec, want->isa, want->att_dtype, want->nr, want->layers, want->kv_heads,
                           want->head_dim, want->width};
    for (size_t i = 0; i < sizeof got / sizeof got[0]; i++)
        if (got[i] != exp[i]) {
            p5_err(err, errlen, "slab load: the blob's %s is %d, this model's %d (a prefix of another model)",
                   names[i], (int)got[i], (int)exp[i]);
            return PI05_ESHAPE;
        }
    return 0;
}

int pi05_slab_load(pi05_slab *dst, const void *buf, size_t len, char *err, size_t errlen)
{
    p5_blob_head b;
    if (dst == NULL || buf == NULL || len < sizeof b) {
        p5_err(err, errlen, "slab load: no slab, or a blob of %zu bytes (shorter than its head)", len);
        return PI05_EINVAL;
    }
    memcpy(&b, buf, sizeof b);
    if (b.magic != P5_BLOB_MAGIC || b.version != P5_BLOB_VERSION) {
        p5_err(err, errlen, "slab load: not a pi05 prefix blob (magic %08x version %u)", b.magic, b.version);
        return PI05_EINVAL;
    }
    const pi05_dims *d = &dst->prog->m->d;
    if (b.prefix_len < 1 || b.prefix_len > dst->max_prefix) {
        p5_err(err, errlen, "slab load: prefix of %d rows, the slab holds 1..%d", (int)b.prefix_len, dst->max_prefix);
        return PI05_ESHAPE;
    }
    p5_blob_head want;
    blob_head(dst, b.prefix_len, &want);
    int rc = head_mismatch(&b, &want, err, errlen);
    if (rc != 0) return rc;
    size_t need = sizeof b + slot_count(d) * (size_t)(want.k_bytes + want.v_bytes);
    if (b.k_bytes != want.k_bytes || b.v_bytes != want.v_bytes || len != need) {
        p5_err(err, errlen, "slab load: blob of %zu bytes, a %d-row prefix of this model is %zu", len,
               (int)b.prefix_len, need);
        return PI05_ESHAPE;
    }
    if (dst->prog->m->prec != PI05_REF && (want.k_bytes > dst->kstride || want.v_bytes > dst->vstride)) {
        p5_err(err, errlen, "slab load: the prefix does not fit the slab's K/V buffers");
        return PI05_ESHAPE;
    }
    const char *in = (const char *)buf + sizeof b;
    size_t hd = (size_t)d->head_dim;
    tt_dtype dt = dst->prog->m->prec == PI05_REF ? TT_F32 : p5_att_dtype(dst->prog->m);
    for (size_t i = 0; i < slot_count(d); i++) {
        if (dst->prog->m->prec == PI05_REF) {
            size_t row0 = i * (size_t)dst->max_prefix * hd;
            memcpy(dst->k32 + row0, in, b.k_bytes);
            memcpy(dst->v32 + row0, in + b.k_bytes, b.v_bytes);
        } else {
            void *kp = (char *)dst->kbuf + i * dst->kstride, *vp = (char *)dst->vbuf + i * dst->vstride;
            memcpy(kp, in, b.k_bytes);
            memcpy(vp, in + b.k_bytes, b.v_bytes);
            dst->kmat[i] = (tt_mat){.n = b.k_n, .k = b.k_k, .npanels = b.k_npanels, .kp = b.k_kp, .dtype = dt,
                                    .isa = (tt_isa)b.isa, .panels = kp, .bias = NULL, .owned = 0};
            dst->vmat[i] = (tt_mat){.n = b.v_n, .k = b.v_k, .npanels = b.v_npanels, .kp = b.v_kp, .dtype = dt,
                                    .isa = (tt_isa)b.isa, .panels = vp, .bias = NULL, .owned = 0};
        }
        in += b.k_bytes + b.v_bytes;
    }
    dst->prefix_len = b.prefix_len;
    dst->nimg = 0; /* the image tokens are not part of a prefix: VISION must run before another PREFIX */
    dst->vision_done = 0;
    return 0;
}
