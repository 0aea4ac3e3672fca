/* tt_arena: a model's packed weights as one block of memory, so that they can be written to a
 * file once and mapped from it at the next start instead of being packed again.
 *
 * A model reserves every weight buffer (a pointer field and its size) in a fixed order while it
 * lays itself out, then either allocates the arena (zero pages, packed into afterwards) or attaches
 * memory that already holds it (a mapped cache file); binding points each field at its piece.
 * Pieces are 64-byte aligned and the gaps are zero, so packing the same tensors gives the same
 * bytes whatever the order the tensors arrive in. The layout id hashes every piece's name, offset
 * and size (and a version the model passes): a cache written by another layout never matches.
 * Must not: be written to after the model is ready (an attached arena is read-only memory), or
 * change a piece's bytes for the same tensors without the model bumping its version. */
#ifndef TT_ARENA_H
#define TT_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    void **field; /* where the piece's address goes */
    size_t off, bytes;
} tt_piece;

typedef struct {
    tt_piece *pieces;
    int n, cap;
    size_t bytes;       /* the arena's size: every piece, 64-byte aligned, rounded to 4 KiB */
    char *base;
    int owned;          /* allocated by tt_arena_alloc (else attached) */
    uint64_t layout_id;
    int oom;            /* a reservation failed */
} tt_arena;

/* Starts an empty layout; version seeds the layout id. */
void tt_arena_init(tt_arena *a, uint64_t version);

/* Reserves bytes for *field under name. Failure (out of memory) is remembered: tt_arena_alloc and
 * tt_arena_attach then fail. */
void tt_arena_reserve(tt_arena *a, void **field, size_t bytes, const char *name);

/* Allocates the arena as zero pages (anonymous mapping) and binds every field. 0 or -1. */
int tt_arena_alloc(tt_arena *a);

/* Binds every field into `base`, memory of `bytes` bytes (64-byte aligned) that already holds an
 * arena of this layout. 0, or -1 when the size differs. */
int tt_arena_attach(tt_arena *a, void *base, size_t bytes);

/* Frees the arena when allocated here, and the piece table. */
void tt_arena_free(tt_arena *a);

#endif
