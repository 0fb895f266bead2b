/* General-purpose arrays, maps and sorts (arrays.h). */
#include "base/arrays.h"
#include "base/base.h"

#include <stdlib.h>
#include <sys/mman.h>

void *mp_pages_alloc(size_t len, unsigned flags) {
    if (flags & MP_PAGES_HUGE) {
        const size_t hp = MP_PAGES_HUGE_SIZE;
        if (len > SIZE_MAX - 2 * hp) return NULL;
        len = (len + hp - 1) & ~(hp - 1);
        /* one huge page more than asked, then the unaligned ends given back */
        void *p = mmap(NULL, len + hp, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
        uintptr_t start = ((uintptr_t)p + hp - 1) & ~(uintptr_t)(hp - 1);
        size_t head = start - (uintptr_t)p, tail = hp - head;
        if (head) munmap(p, head);
        if (tail) munmap((void *)(start + len), tail);
#ifdef MADV_HUGEPAGE
        madvise((void *)start, len, MADV_HUGEPAGE);
#endif
        return (void *)start;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | ((flags & MP_PAGES_POPULATE) ? MAP_POPULATE : 0), -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_NOHUGEPAGE
    if (flags & MP_PAGES_NOHUGE) madvise(p, len, MADV_NOHUGEPAGE);
#endif
    return p;
}

void mp_pages_free(void *p, size_t len, unsigned flags) {
    if (!p) return;
    if (flags & MP_PAGES_HUGE) len = (len + MP_PAGES_HUGE_SIZE - 1) & ~(MP_PAGES_HUGE_SIZE - 1);
    munmap(p, len);
}

void *mp_big_alloc(size_t n, bool zero) {
    if (n > SIZE_MAX - sizeof(mp_big_head) - 4096) return NULL;
    size_t total = n + sizeof(mp_big_head);
    mp_big_head *h;
    if (total >= MP_BIG_MAP) {
        void *p = mp_pages_alloc(total, 0);
        if (!p) return NULL;
        h = p;   /* mapped memory is zero already */
        h->mapped = 1;
    } else {
        h = zero ? calloc(1, total) : malloc(total);
        if (!h) return NULL;
        h->mapped = 0;
    }
    h->size = n;
    return h + 1;
}

void mp_big_free(void *p) {
    if (!p) return;
    mp_big_head *h = (mp_big_head *)p - 1;
    if (h->mapped) mp_pages_free(h, h->size + sizeof *h, 0);
    else free(h);
}

static bool mp_imap_alloc(mp_imap *m, size_t cap) {
    m->keys = mp_big_alloc(cap * sizeof *m->keys, false);
    m->vals = mp_big_alloc(cap * sizeof *m->vals, false);
    m->mask = cap - 1;
    m->n = 0;
    if (!m->keys || !m->vals) return false;
    memset(m->vals, 0xff, cap * sizeof *m->vals);
    return true;
}

/* A map for about n keys (it grows past them). When every key is known to
 * lie in 0..max_key and that range is not much larger than n (External ids
 * and correlations are counters, so they are dense), the map is a plain
 * array indexed by the key: no hashing, 4 bytes a slot. max_key < 0: keys
 * of any value. */
bool mp_imap_init_range(mp_imap *m, size_t n, int64_t max_key) {
    memset(m, 0, sizeof *m);
    if (max_key >= 0 && (uint64_t)max_key < 4 * (uint64_t)n + 4096) {
        m->dense = (size_t)max_key + 1;
        m->vals = mp_big_alloc(m->dense * sizeof *m->vals, false);
        if (!m->vals) return false;
        memset(m->vals, 0xff, m->dense * sizeof *m->vals);
        return true;
    }
    size_t cap = 16;
    while (cap - cap / 4 < n + 16) cap *= 2;
    return mp_imap_alloc(m, cap);
}

bool mp_imap_init(mp_imap *m, size_t n) { return mp_imap_init_range(m, n, -1); }

void mp_imap_free(mp_imap *m) {
    mp_big_free(m->keys);
    mp_big_free(m->vals);
    memset(m, 0, sizeof *m);
}

static void mp_imap_put_slot(mp_imap *m, int64_t k, int32_t v) {
    size_t i = mp_mix64((uint64_t)k) & m->mask;
    while (m->vals[i] >= 0) {
        if (m->keys[i] == k) return;
        i = (i + 1) & m->mask;
    }
    m->keys[i] = k;
    m->vals[i] = v;
    m->n++;
}

/* Insert when absent (the first value stays). False when out of memory
 * (a full map grows to twice its size). */
bool mp_imap_put(mp_imap *m, int64_t k, int32_t v) {
    if (m->dense) {
        if (k >= 0 && (uint64_t)k < m->dense && m->vals[k] < 0) m->vals[k] = v;
        return true;
    }
    if (!m->vals) return false;
    if (m->n + 1 > m->mask - m->mask / 4) {
        mp_imap old = *m;
        if (!mp_imap_alloc(m, (old.mask + 1) * 2)) {
            mp_imap_free(m);
            *m = old;
            return false;
        }
        for (size_t s = 0; s <= old.mask; s++)
            if (old.vals[s] >= 0) mp_imap_put_slot(m, old.keys[s], old.vals[s]);
        mp_imap_free(&old);
    }
    mp_imap_put_slot(m, k, v);
    return true;
}

/* Natural merge sort of the indices a[lo, hi) by cmp: the ascending runs
 * already there, merged pairwise (linear when sorted, n log(runs)
 * otherwise). tmp: scratch as long as a; *runs, *cap: a run list it may
 * grow. False when out of memory. */
bool mp_idx_msort(int32_t *a, int32_t *tmp, size_t lo, size_t hi, mp_idx_cmp cmp, const void *ctx,
                      uint32_t **runs, size_t *cap) {
    if (hi - lo < 2) return true;
    size_t nr = 0;
    for (size_t i = lo; i < hi;) {
        size_t j = i + 1;
        while (j < hi && cmp(ctx, a[j - 1], a[j]) <= 0) j++;
        if (nr + 2 > *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            uint32_t *nrun = realloc(*runs, nc * sizeof **runs);
            if (!nrun) return false;
            *runs = nrun;
            *cap = nc;
        }
        (*runs)[nr++] = (uint32_t)i;
        i = j;
    }
    uint32_t *r = *runs;
    r[nr] = (uint32_t)hi;
    int32_t *src = a, *dst = tmp;
    while (nr > 1) {
        size_t out = 0;
        for (size_t q = 0; q < nr; q += 2) {
            size_t l = r[q], mid = r[MP_MIN(q + 1, nr)], h = r[MP_MIN(q + 2, nr)];
            size_t i = l, j = mid, k = l;
            while (i < mid && j < h) dst[k++] = cmp(ctx, src[j], src[i]) < 0 ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < h) dst[k++] = src[j++];
            r[out++] = (uint32_t)l;
        }
        r[out] = (uint32_t)hi;
        nr = out;
        int32_t *x = src;
        src = dst;
        dst = x;
    }
    if (src != a) memcpy(a + lo, src + lo, (hi - lo) * sizeof *a);
    return true;
}

/* The first i in [0, n) where before(ctx, i) is false (it holds on a
 * prefix), galloping from *hint, where the last search ended, and left
 * there: lookups that come in order, or near it, take a few steps. */
size_t mp_gallop(size_t n, size_t *hint, bool (*before)(const void *ctx, size_t i), const void *ctx) {
    if (!n) return 0;
    size_t h = *hint < n ? *hint : n / 2, lo, hi, step = 1;
    if (before(ctx, h)) {   /* after h */
        lo = h + 1;
        while (lo + step <= n && before(ctx, lo + step - 1)) {
            lo += step;
            step *= 2;
        }
        hi = MP_MIN(n, lo + step - 1);
    } else {                /* at h or before */
        hi = h;
        while (hi >= step && !before(ctx, hi - step)) {
            hi -= step;
            step *= 2;
        }
        lo = hi >= step ? hi - step + 1 : 0;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (before(ctx, mid)) lo = mid + 1;
        else hi = mid;
    }
    *hint = lo;
    return lo;
}

/* Rotate the bytes [x y] (nx, then ny bytes) to [y x] in place, with
 * buf (nb bytes) as scratch: through buf when either part fits, else by
 * swapping equal blocks (Gries and Mills) until one does. Sequential
 * copies only. */
void mp_swap_bytes(char *a, char *b, size_t n, char *buf, size_t nb) {
    while (n) {
        size_t k = MP_MIN(n, nb);
        memcpy(buf, a, k);
        memcpy(a, b, k);
        memcpy(b, buf, k);
        a += k, b += k, n -= k;
    }
}

void mp_rotate_bytes(char *a, size_t nx, size_t ny, char *buf, size_t nb) {
    while (nx && ny) {
        if (ny <= nb) {
            memcpy(buf, a + nx, ny);
            memmove(a + ny, a, nx);
            memcpy(a, buf, ny);
            return;
        }
        if (nx <= nb) {
            memcpy(buf, a, nx);
            memmove(a, a + nx, ny);
            memcpy(a + ny, buf, nx);
            return;
        }
        if (nx <= ny) {   /* [x y1 y2], |y2| = |x| -> [y2 y1 x]: rotate [y2 y1] */
            mp_swap_bytes(a, a + ny, nx, buf, nb);
            ny -= nx;
        } else {          /* [x1 x2 y], |x1| = |y| -> [y x2 x1]: rotate [x2 x1] */
            mp_swap_bytes(a, a + nx, ny, buf, nb);
            a += ny;
            nx -= ny;
        }
    }
}
