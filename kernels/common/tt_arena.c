/* tt_arena.c: the layout, allocation and binding of a model's weight arena (tt_arena.h). */
#include "tt_arena.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { PIECE_ALIGN = 64, ARENA_ALIGN = 4096 };

/* FNV-1a, 64 bits. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

void tt_arena_init(tt_arena *a, uint64_t version)
{
    memset(a, 0, sizeof *a);
    a->layout_id = fnv(14695981039346656037ull, &version, sizeof version);
}

void tt_arena_reserve(tt_arena *a, void **field, size_t bytes, const char *name)
{
    if (a->oom) return;
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 256;
        tt_piece *p = realloc(a->pieces, (size_t)cap * sizeof *p);
        if (p == NULL) {
            a->oom = 1;
            return;
        }
        a->pieces = p;
        a->cap = cap;
    }
    size_t off = (a->bytes + PIECE_ALIGN - 1) & ~(size_t)(PIECE_ALIGN - 1);
    a->pieces[a->n++] = (tt_piece){field, off, bytes};
    a->bytes = off + bytes;
    uint64_t rec[2] = {off, bytes};
    a->layout_id = fnv(fnv(a->layout_id, name, strlen(name) + 1), rec, sizeof rec);
}

static size_t total(const tt_arena *a)
{
    size_t b = (a->bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    return b > 0 ? b : ARENA_ALIGN;
}

static void bind(tt_arena *a)
{
    for (int i = 0; i < a->n; i++) *a->pieces[i].field = a->pieces[i].bytes ? a->base + a->pieces[i].off : NULL;
}

int tt_arena_alloc(tt_arena *a)
{
    if (a->oom) return -1;
    size_t b = total(a);
    void *m = mmap(NULL, b, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -1;
    a->base = m;
    a->bytes = b;
    a->owned = 1;
    bind(a);
    return 0;
}

int tt_arena_attach(tt_arena *a, void *base, size_t bytes)
{
    if (a->oom || bytes != total(a) || ((uintptr_t)base & (PIECE_ALIGN - 1)) != 0) return -1;
    a->base = base;
    a->bytes = bytes;
    a->owned = 0;
    bind(a);
    return 0;
}

void tt_arena_free(tt_arena *a)
{
    if (a->owned && a->base != NULL) munmap(a->base, a->bytes);
    free(a->pieces);
    memset(a, 0, sizeof *a);
}
