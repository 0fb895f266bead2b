/* Internal basics shared by every part of modelprof: arena allocation,
 * the one error path, a string hash map and checked arithmetic. */
#ifndef MP_BASE_H
#define MP_BASE_H

#include "modelprof.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MP_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define MP_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MP_MAX(a, b) ((a) > (b) ? (a) : (b))

#if defined(__GNUC__)
#define MP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define MP_PRINTF(f, a)
#endif

/* ---- errors: one path. Set the thread's message and return the code. */
mp_status mp_error(mp_status st, const char *fmt, ...) MP_PRINTF(2, 3);
mp_status mp_verror(mp_status st, const char *fmt, va_list ap);
void mp_error_clear(void);

/* ---- writing files (file.c) ----
 * mp_write_stream: write(ud, f), then f flushed and its error flag read: a
 * failed write anywhere in it is MP_ERR_IO "cannot write NAME: <reason>"
 * (a writer's own status otherwise). mp_write_file_atomic: a temporary file
 * next to path, written through mp_write_stream, synced, closed and renamed
 * over path; on any failure the old file stays and the temporary is
 * removed. A device or pipe is written in place. */
mp_status mp_write_stream(FILE *f, const char *name, mp_status (*write)(void *ud, FILE *f), void *ud);
mp_status mp_write_file_atomic(const char *path, mp_status (*write)(void *ud, FILE *f), void *ud);

/* ---- option structs (include/modelprof.h): each begins with `size_t
 * size`. A library knows the sizes from `min`, the struct's first
 * versioned size (the end of its last field then: it stays when fields are
 * appended), to its own sizeof (`have`). */
/* mp_X_init: the defaults `def` (`have` bytes, its size field set) written
 * into the caller's first `size` bytes; MP_ERR_USAGE, nothing written, for
 * a size out of range. */
mp_status mp_opts_init(void *o, size_t size, const void *def, size_t have, size_t min,
                       const char *what);
/* A function taking options: `dst` holds the defaults (`have` bytes); the
 * caller's options `src` (NULL: the defaults stand) replace its first
 * src->size bytes. MP_ERR_USAGE naming the struct for a size out of range. */
mp_status mp_opts_take(void *dst, size_t have, const void *src, size_t min, const char *what);
/* The end of a struct's field: the `min` of the struct whose last field
 * it was. */
#define MP_FIELD_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* Equal C strings, without a library call: the names compared on hot
 * paths (op types, attribute names) are short, often the same pointer
 * (interned) and often empty (the default domain). */
static inline bool mp_streq(const char *a, const char *b) {
    if (a == b) return true;
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

/* ---- arena: many small allocations freed in one call. */
typedef struct mp_arena_block mp_arena_block;
typedef struct mp_arena {
    mp_arena_block *head;
    size_t used_total;  /* bytes handed out, for limits and tests */
    size_t reserved;    /* bytes of blocks taken from the heap */
    size_t limit;       /* 0: none; else allocations that would take
                         * `reserved` past it fail and set limit_hit */
    bool limit_hit;
} mp_arena;

void mp_arena_init(mp_arena *a);
void mp_arena_free(mp_arena *a);
/* Returns zeroed memory aligned to 16 bytes, NULL when out of memory. */
void *mp_arena_alloc(mp_arena *a, size_t size);
void *mp_arena_calloc(mp_arena *a, size_t n, size_t size);
char *mp_arena_strndup(mp_arena *a, const char *s, size_t n);
char *mp_arena_strdup(mp_arena *a, const char *s);
char *mp_arena_printf(mp_arena *a, const char *fmt, ...) MP_PRINTF(2, 3);
/* Grow an array kept in the arena (old storage is abandoned to the arena). */
void *mp_arena_grow(mp_arena *a, void *old, size_t elem, int *cap, int need);

/* ---- growable arrays on the heap (freed by the owner). */
void *mp_grow(void *old, size_t elem, int *cap, int need);

/* ---- string -> int map (open addressing). Keys are not copied. */
typedef struct mp_strmap_slot {
    const char *key;
    uint32_t hash;  /* 0: empty slot */
    uint32_t len;
    int val;
} mp_strmap_slot;

typedef struct mp_strmap {
    mp_strmap_slot *slots;  /* one probe reads one slot: one cache line */
    int cap, n;
} mp_strmap;

void mp_strmap_free(mp_strmap *m);
/* Returns -1 when absent. */
int mp_strmap_get(const mp_strmap *m, const char *key);
int mp_strmap_getn(const mp_strmap *m, const char *key, size_t len);
/* Insert or overwrite; returns MP_OK or MP_ERR_NOMEM. */
mp_status mp_strmap_put(mp_strmap *m, const char *key, int val);
/* The same with the hash computed once by the caller (find, then insert). */
uint32_t mp_strmap_hash(const char *key, size_t len);
/* The same hash, also telling whether the key holds a NUL byte. */
uint32_t mp_strmap_hash_checked(const char *key, size_t len, bool *has_nul);
int mp_strmap_getn_h(const mp_strmap *m, const char *key, size_t len, uint32_t h);
mp_status mp_strmap_put_h(mp_strmap *m, const char *key, size_t len, uint32_t h, int val);
/* The one stored copy of a string: equal strings give the same pointer.
 * The copy lives in `a`; the map's value is unused. NULL when out of memory. */
const char *mp_strmap_intern(mp_strmap *m, mp_arena *a, const char *s, size_t len);
/* Room for n keys without growing. */
mp_status mp_strmap_reserve(mp_strmap *m, int n);

/* ---- checked arithmetic on counts. Saturate at UINT64_MAX and raise the
 * flag so callers can say "overflow" instead of printing a wrong number. */
static inline uint64_t mp_umul(uint64_t a, uint64_t b, bool *ovf) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) {
        *ovf = true;
        return UINT64_MAX;
    }
    return r;
}
static inline uint64_t mp_uadd(uint64_t a, uint64_t b, bool *ovf) {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) {
        *ovf = true;
        return UINT64_MAX;
    }
    return r;
}
/* ---- statistics of timings: v[0..n) (n >= 1; sorted in place by the
 * first two). Median: the mean of the middle two for an even n; quantile:
 * nearest rank. */
double mp_median(double *v, int n);
double mp_quantile(double *v, int n, double q);
double mp_min(const double *v, int n);
double mp_mean(const double *v, int n);

/* Product of dims; -1 when any dim is unknown (< 0); -2 on overflow past
 * INT64_MAX. Inline: operators ask it of every input and output. */
static inline int64_t mp_dims_product(const int64_t *dims, int rank) {
    int64_t p = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0) return -1;
        if (__builtin_mul_overflow(p, dims[i], &p)) return -2;
    }
    return p;
}

#endif
