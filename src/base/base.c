#include "base/base.h"
#include "base/arrays.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

/* ---- errors ---- */

static _Thread_local char mp__errbuf[1024];

static const char *const mp__status_names[] = {
#define MP__NAME(code, name, msg) name,
    MP_STATUS_LIST(MP__NAME)
#undef MP__NAME
};
_Static_assert(MP_ARRAY_LEN(mp__status_names) == MP_STATUS_COUNT,
               "status name table out of step with the enum");

const char *mp_status_name(mp_status st) {
    if ((unsigned)st >= MP_STATUS_COUNT) return "unknown";
    return mp__status_names[st];
}

const char *mp_last_error(void) { return mp__errbuf; }

void mp_error_clear(void) { mp__errbuf[0] = 0; }

const char *mp_version(void) { return MP_VERSION_STRING; }

void mp_free(void *p) { free(p); }

static mp_status opts_size(size_t size, size_t have, size_t min, const char *what) {
    if (size >= min && size <= have) return MP_OK;
    if (size == 0)
        return mp_error(MP_ERR_USAGE, "%s: size 0: the options were never set (fill them with "
                        "%s_default first)", what, what);
    return mp_error(MP_ERR_USAGE, "%s: size %zu, this library (modelprof %s) takes %zu to %zu "
                    "bytes: the program was built against another modelprof.h, or the options "
                    "were not set with %s_default", what, size, MP_VERSION_STRING, min, have, what);
}

mp_status mp_opts_init(void *o, size_t size, const void *def, size_t have, size_t min,
                       const char *what) {
    if (!o) return mp_error(MP_ERR_USAGE, "%s_init: no options", what);
    mp_status st = opts_size(size, have, min, what);
    if (st) return st;
    memcpy(o, def, size);
    *(size_t *)o = size;
    return MP_OK;
}

mp_status mp_opts_take(void *dst, size_t have, const void *src, size_t min, const char *what) {
    if (!src) return MP_OK;
    size_t size = *(const size_t *)src;
    mp_status st = opts_size(size, have, min, what);
    if (st) return st;
    memcpy((char *)dst + sizeof size, (const char *)src + sizeof size, size - sizeof size);
    return MP_OK;
}

mp_status mp_verror(mp_status st, const char *fmt, va_list ap) {
    vsnprintf(mp__errbuf, sizeof mp__errbuf, fmt, ap);
    return st;
}

mp_status mp_error(mp_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mp_verror(st, fmt, ap);
    va_end(ap);
    return st;
}

/* ---- arena ---- */

struct mp_arena_block {
    mp_arena_block *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void mp_arena_init(mp_arena *a) { memset(a, 0, sizeof *a); }

/* Large blocks come straight from mmap, 2 MB aligned, with transparent
 * huge pages asked for: a big graph touches a few huge pages instead of
 * thousands of small ones (each first touch is a page fault). */
#define MP__HUGE MP_PAGES_HUGE_SIZE

/* Every block comes zeroed (calloc, or fresh pages from mmap), so the
 * arena hands out zeroed memory without clearing it a second time. */
static void *mp__block_alloc(size_t n) {
    return n < MP__HUGE ? calloc(1, n) : mp_pages_alloc(n, MP_PAGES_HUGE);
}

static void mp__block_free(void *b, size_t n) {
    if (n < MP__HUGE)
        free(b);
    else
        mp_pages_free(b, n, MP_PAGES_HUGE);
}

void mp_arena_free(mp_arena *a) {
    mp_arena_block *b = a->head;
    while (b) {
        mp_arena_block *n = b->next;
        mp__block_free(b, sizeof *b + b->size);
        b = n;
    }
    a->head = NULL;
    a->used_total = 0;
    a->reserved = 0;
    a->limit_hit = false;
}

void *mp_arena_alloc(mp_arena *a, size_t size) {
    if (size > SIZE_MAX / 2) return NULL; /* no rounding past SIZE_MAX */
    size = (size + 15) & ~(size_t)15;
    if (size == 0) size = 16;
    mp_arena_block *b = a->head;
    if (!b || b->size - b->used < size) {
        /* a small first block for small models, then huge-page blocks
         * (blocks between would each take hundreds of small page faults) */
        size_t bs = 64 * 1024;
        if (b) {
            size_t whole = sizeof *b + b->size;
            bs = (whole < MP__HUGE ? MP__HUGE : MP_MIN(whole * 2, 16 * MP__HUGE)) - sizeof *b;
        }
        if (bs < size) bs = size;
        if (a->limit && a->reserved + bs > a->limit) {
            bs = size; /* the last bytes under the limit: no slack */
            if (a->reserved + bs > a->limit || a->reserved + bs < bs) {
                a->limit_hit = true;
                return NULL;
            }
        }
        b = mp__block_alloc(sizeof *b + bs);
        if (!b) return NULL;
        a->reserved += bs;
        b->size = bs;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += size;
    a->used_total += size;
    return p;
}

void *mp_arena_calloc(mp_arena *a, size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    return mp_arena_alloc(a, n * size);
}

char *mp_arena_strndup(mp_arena *a, const char *s, size_t n) {
    char *p = mp_arena_alloc(a, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *mp_arena_strdup(mp_arena *a, const char *s) {
    return mp_arena_strndup(a, s, strlen(s));
}

char *mp_arena_printf(mp_arena *a, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        va_end(ap2);
        return NULL;
    }
    char *p = mp_arena_alloc(a, (size_t)n + 1);
    if (p) vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

void *mp_arena_grow(mp_arena *a, void *old, size_t elem, int *cap, int need) {
    if (need <= *cap) return old;
    int nc = *cap ? *cap : 8;
    while (nc < need) {
        if (nc > INT32_MAX / 2) return NULL;
        nc *= 2;
    }
    void *p = mp_arena_calloc(a, (size_t)nc, elem);
    if (!p) return NULL;
    if (old && *cap) memcpy(p, old, (size_t)*cap * elem);
    *cap = nc;
    return p;
}

void *mp_grow(void *old, size_t elem, int *cap, int need) {
    if (need <= *cap) return old;
    int nc = *cap ? *cap : 8;
    while (nc < need) {
        if (nc > INT32_MAX / 2) return NULL;
        nc *= 2;
    }
    void *p = realloc(old, (size_t)nc * elem);
    if (!p) return NULL;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *cap = nc;
    return p;
}

/* ---- string map ---- */

/* Names are long and share prefixes ("/model/layers.12/self_attn/..."):
 * hash 16 bytes per step in two independent multiply lanes (a lane's
 * step waits on its own multiply only), then fold and mix. `zero` collects
 * the has-a-zero-byte test of every word, so checking a name for NUL bytes
 * rides along with hashing it. */
#define MP__K1 0x9e3779b97f4a7c15ull
#define MP__K2 0xc2b2ae3d27d4eb4full
#define MP__ONES 0x0101010101010101ull
#define MP__HIGHS 0x8080808080808080ull

static inline uint64_t mp__rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint32_t mp__hash_z(const char *s, size_t n, uint64_t *zero) {
    uint64_t a = 0x243f6a8885a308d3ull ^ n, b = 0x13198a2e03707344ull, z = 0;
    while (n >= 16) {
        uint64_t w0, w1;
        memcpy(&w0, s, 8);
        memcpy(&w1, s + 8, 8);
        z |= ((w0 - MP__ONES) & ~w0) | ((w1 - MP__ONES) & ~w1);
        a = (mp__rotl(a, 23) ^ w0) * MP__K1;
        b = (mp__rotl(b, 29) ^ w1) * MP__K2;
        s += 16;
        n -= 16;
    }
    if (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        z |= (w - MP__ONES) & ~w;
        a = (mp__rotl(a, 23) ^ w) * MP__K1;
        s += 8;
        n -= 8;
    }
    if (n) {
        /* the tail's missing bytes are set, so they never look like NUL */
        uint64_t t = ~0ull;
        memcpy(&t, s, n);
        z |= (t - MP__ONES) & ~t;
        b = (mp__rotl(b, 29) ^ t) * MP__K2;
    }
    *zero = z & MP__HIGHS;
    uint64_t h = a ^ mp__rotl(b, 32);
    h ^= h >> 32;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    return (uint32_t)h | 1u; /* 0 marks an empty slot */
}

static uint32_t mp__hash(const char *s, size_t n) {
    uint64_t z;
    return mp__hash_z(s, n, &z);
}

uint32_t mp_strmap_hash_checked(const char *key, size_t len, bool *has_nul) {
    uint64_t z;
    uint32_t h = mp__hash_z(key, len, &z);
    *has_nul = z != 0;
    return h;
}

/* A large table's pages are mapped in one call (MAP_POPULATE): touched
 * one by one, each would fault twice, first read by a probe (the zero
 * page) and then written by an insert (copy on write). */
#define MP__TABLE_MMAP ((size_t)64 << 10)

static void *mp__table_alloc(size_t n) {
    if (n < MP__TABLE_MMAP) return calloc(1, n);
    return mp_pages_alloc(n, MP_PAGES_POPULATE);
}

static void mp__table_free(void *p, size_t n) {
    if (!p) return;
    if (n < MP__TABLE_MMAP) free(p);
    else mp_pages_free(p, n, MP_PAGES_POPULATE);
}

void mp_strmap_free(mp_strmap *m) {
    mp__table_free(m->slots, (size_t)m->cap * sizeof *m->slots);
    memset(m, 0, sizeof *m);
}

uint32_t mp_strmap_hash(const char *key, size_t len) { return mp__hash(key, len); }

/* Slot of key (len bytes, hash h), or -1. Lengths are compared first, so a
 * name with a NUL byte inside never matches a shorter stored key. */
static int mp__strmap_slot(const mp_strmap *m, const char *key, size_t len, uint32_t h) {
    if (!m->cap) return -1;
    uint32_t mask = (uint32_t)(m->cap - 1);
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        const mp_strmap_slot *s = &m->slots[i];
        if (!s->hash) return -1;
        /* no memcmp of 0 bytes: an absent name is a NULL view, and a masked
         * vector load from NULL costs a fault-suppression assist */
        if (s->hash == h && s->len == len && (len == 0 || memcmp(s->key, key, len) == 0))
            return (int)i;
    }
}

int mp_strmap_getn_h(const mp_strmap *m, const char *key, size_t len, uint32_t h) {
    int i = mp__strmap_slot(m, key, len, h);
    return i < 0 ? -1 : m->slots[i].val;
}

int mp_strmap_getn(const mp_strmap *m, const char *key, size_t len) {
    return mp_strmap_getn_h(m, key, len, mp__hash(key, len));
}

int mp_strmap_get(const mp_strmap *m, const char *key) {
    return mp_strmap_getn(m, key, strlen(key));
}

static void mp__strmap_insert(mp_strmap *m, const char *key, uint32_t len, uint32_t h,
                              int val) {
    uint32_t mask = (uint32_t)(m->cap - 1);
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        mp_strmap_slot *s = &m->slots[i];
        if (!s->hash) {
            s->hash = h;
            s->key = key;
            s->len = len;
            s->val = val;
            m->n++;
            return;
        }
        if (s->hash == h && s->len == len && (len == 0 || memcmp(s->key, key, len) == 0)) {
            s->val = val;
            return;
        }
    }
}

mp_status mp_strmap_reserve(mp_strmap *m, int n) {
    if (n < 0 || n > INT32_MAX / 4) return mp_error(MP_ERR_NOMEM, "name table too large");
    if (n * 2 <= m->cap) return MP_OK;
    int nc = m->cap ? m->cap : 64;
    while (nc < n * 2) nc *= 2;
    mp_strmap nm = {0};
    nm.cap = nc;
    nm.slots = mp__table_alloc((size_t)nc * sizeof *nm.slots);
    if (!nm.slots) return mp_error(MP_ERR_NOMEM, "out of memory growing a name table");
    for (int i = 0; i < m->cap; i++) {
        const mp_strmap_slot *s = &m->slots[i];
        if (s->hash) mp__strmap_insert(&nm, s->key, s->len, s->hash, s->val);
    }
    mp_strmap_free(m);
    *m = nm;
    return MP_OK;
}

mp_status mp_strmap_put_h(mp_strmap *m, const char *key, size_t len, uint32_t h, int val) {
    if (len > UINT32_MAX) return mp_error(MP_ERR_LIMIT, "a name is longer than 4 GB");
    if ((m->n + 1) * 2 > m->cap) {
        mp_status st = mp_strmap_reserve(m, m->n + 1 > 32 ? (m->n + 1) * 2 : 32);
        if (st) return st;
    }
    mp__strmap_insert(m, key, (uint32_t)len, h, val);
    return MP_OK;
}

const char *mp_strmap_intern(mp_strmap *m, mp_arena *a, const char *s, size_t len) {
    uint32_t h = mp__hash(s, len);
    int i = mp__strmap_slot(m, s, len, h);
    if (i >= 0) return m->slots[i].key;
    char *copy = mp_arena_strndup(a, s, len);
    if (!copy || mp_strmap_put_h(m, copy, len, h, 0) != MP_OK) return NULL;
    return copy;
}

mp_status mp_strmap_put(mp_strmap *m, const char *key, int val) {
    size_t len = strlen(key);
    return mp_strmap_put_h(m, key, len, mp__hash(key, len), val);
}

/* ---- statistics of timings ---- */

static int mp__dcmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double mp_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, mp__dcmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mp_quantile(double *v, int n, double q) {
    qsort(v, (size_t)n, sizeof *v, mp__dcmp);
    int r = (int)ceil(q * n);
    if (r < 1) r = 1;
    if (r > n) r = n;
    return v[r - 1];
}

double mp_min(const double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] < m) m = v[i];
    return m;
}

double mp_mean(const double *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    return s / n;
}
