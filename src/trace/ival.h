/* Time intervals of one trace (internal to src/trace): sorted, merged,
 * measured against a window. */
#ifndef MP_TRACE_IVAL_H
#define MP_TRACE_IVAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef struct ival {
    int64_t a, b;
    int32_t first;   /* device event that opens it */
} ival;

static inline int64_t overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
    int64_t lo = MP_MAX(a0, b0), hi = MP_MIN(a1, b1);
    return hi > lo ? hi - lo : 0;
}

/* First interval whose end is after t. */
static inline size_t ival_after(const ival *v, size_t n, int64_t t) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].b <= t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static inline int64_t ival_overlap(const ival *v, size_t n, int64_t a, int64_t b) {
    int64_t s = 0;
    for (size_t i = ival_after(v, n, a); i < n && v[i].a < b; i++) s += overlap(v[i].a, v[i].b, a, b);
    return s;
}

static inline size_t merge_ivals(ival *v, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (o && v[i].a <= v[o - 1].b) {
            if (v[i].b > v[o - 1].b) v[o - 1].b = v[i].b;
        } else {
            v[o++] = v[i];
        }
    }
    return o;
}

static inline int ival_cmp(const void *x, const void *y) {
    const ival *a = x, *b = y;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

/* The length of the intersection of two merged, sorted interval lists,
 * clipped to [a, b]. */
static inline int64_t ival_common(const ival *x, size_t nx, const ival *y, size_t ny, int64_t a,
                                  int64_t b) {
    int64_t s = 0;
    size_t i = ival_after(x, nx, a), j = ival_after(y, ny, a);
    while (i < nx && j < ny && x[i].a < b && y[j].a < b) {
        int64_t lo = MP_MAX(MP_MAX(x[i].a, y[j].a), a), hi = MP_MIN(MP_MIN(x[i].b, y[j].b), b);
        if (hi > lo) s += hi - lo;
        if (x[i].b < y[j].b) i++;
        else j++;
    }
    return s;
}

#endif
