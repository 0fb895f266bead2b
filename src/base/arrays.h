/* General-purpose arrays, maps and sorts for large data (the trace
 * analysis's, and anyone's who needs them): big arrays mapped from the
 * system and given back whole, bit sets, an int64 -> int32 map, a natural
 * merge sort of indices, a galloping search, and in-place permutation and
 * rotation of records. */
#ifndef MP_BASE_ARRAYS_H
#define MP_BASE_ARRAYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- big arrays: mapped from the system and given back whole when
 * freed (the heap keeps freed memory for reuse: the analysis frees
 * megabytes between its steps and would hold them all at once) ---- */

/* Pages from the system, the one place modelprof maps anonymous memory:
 * zeroed, len bytes (rounded up to the page, or to 2 MB with
 * MP_PAGES_HUGE). MP_PAGES_POPULATE maps every page now (a table probed
 * then written would fault twice a page); MP_PAGES_HUGE aligns to 2 MB and
 * asks for transparent huge pages (a big arena touches few pages);
 * MP_PAGES_NOHUGE asks for none (records given back piece by piece).
 * mp_pages_free takes the same len and flags. NULL when out of memory. */
enum { MP_PAGES_POPULATE = 1, MP_PAGES_HUGE = 2, MP_PAGES_NOHUGE = 4 };
#define MP_PAGES_HUGE_SIZE ((size_t)2 << 20)
void *mp_pages_alloc(size_t len, unsigned flags);
void mp_pages_free(void *p, size_t len, unsigned flags);

#define MP_BIG_MAP ((size_t)1 << 20)

typedef struct mp_big_head {
    size_t size;     /* bytes after the header */
    size_t mapped;   /* 1: mmap, 0: malloc */
} mp_big_head;

/* n bytes (zeroed when zero), from mmap at MP_BIG_MAP and above: given
 * back to the system when freed. NULL when out of memory. */
void *mp_big_alloc(size_t n, bool zero);
void mp_big_free(void *p);

/* Bit sets over spans or events (S / 64 + 1 words). */
static inline bool mp_bit_get(const uint64_t *b, size_t i) { return (b[i / 64] >> (i % 64)) & 1; }

static inline void mp_bit_set(uint64_t *b, size_t i) { b[i / 64] |= UINT64_C(1) << (i % 64); }

static inline uint64_t mp_mix64(uint64_t x) {
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

/* ---- an int64 -> int32 map (open addressing) ---- */

typedef struct mp_imap {
    int64_t *keys;   /* NULL in a dense map */
    int32_t *vals;   /* -1: empty */
    size_t mask, n;
    size_t dense;    /* > 0: vals is indexed by the key, keys 0..dense-1 */
} mp_imap;

bool mp_imap_init_range(mp_imap *m, size_t n, int64_t max_key);
bool mp_imap_init(mp_imap *m, size_t n);
void mp_imap_free(mp_imap *m);
bool mp_imap_put(mp_imap *m, int64_t k, int32_t v);

/* k's value, to be changed in place; NULL when k is absent. */
static inline int32_t *mp_imap_ref(mp_imap *m, int64_t k) {
    if (!m->vals) return NULL;
    if (m->dense) return k >= 0 && (uint64_t)k < m->dense && m->vals[k] >= 0 ? &m->vals[k] : NULL;
    size_t i = mp_mix64((uint64_t)k) & m->mask;
    while (m->vals[i] >= 0) {
        if (m->keys[i] == k) return &m->vals[i];
        i = (i + 1) & m->mask;
    }
    return NULL;
}

static inline int32_t mp_imap_get(const mp_imap *m, int64_t k) {
    if (!m->vals) return -1;
    if (m->dense) return k >= 0 && (uint64_t)k < m->dense ? m->vals[k] : -1;
    size_t i = mp_mix64((uint64_t)k) & m->mask;
    while (m->vals[i] >= 0) {
        if (m->keys[i] == k) return m->vals[i];
        i = (i + 1) & m->mask;
    }
    return -1;
}

typedef int (*mp_idx_cmp)(const void *ctx, int32_t x, int32_t y);
bool mp_idx_msort(int32_t *a, int32_t *tmp, size_t lo, size_t hi, mp_idx_cmp cmp, const void *ctx,
                      uint32_t **runs, size_t *cap);
size_t mp_gallop(size_t n, size_t *hint, bool (*before)(const void *ctx, size_t i), const void *ctx);
void mp_swap_bytes(char *a, char *b, size_t n, char *buf, size_t nb);
void mp_rotate_bytes(char *a, size_t nx, size_t ny, char *buf, size_t nb);

enum { MP_PERM_AHEAD = 32 };
static inline void mp_permute_records(void *base, size_t elem, int32_t *perm, size_t n) {
    char *r = base, keep[64];
#define MP_PERM_PREFETCH(i)                                                         \
    do {                                                                         \
        __builtin_prefetch(r + (i) * elem);                                      \
        __builtin_prefetch(r + (i) * elem + elem - 1);   /* it may cross a line */ \
    } while (0)
    for (size_t k = 0; k < n; k++) {
        if (perm[k] == (int32_t)k) continue;
        memcpy(keep, r + k * elem, elem);
        size_t ahead = k;
        for (int a = 0; a < MP_PERM_AHEAD; a++) {
            ahead = (size_t)perm[ahead];
            MP_PERM_PREFETCH(ahead);
            if (ahead == k) break;
        }
        size_t j = k;
        for (;;) {
            size_t src = (size_t)perm[j];
            perm[j] = (int32_t)j;
            if (src == k) {
                memcpy(r + j * elem, keep, elem);
                break;
            }
            if (ahead != k) {
                ahead = (size_t)perm[ahead];
                MP_PERM_PREFETCH(ahead);
            }
            memcpy(r + j * elem, r + src * elem, elem);
            j = src;
        }
    }
#undef MP_PERM_PREFETCH
}

#endif
