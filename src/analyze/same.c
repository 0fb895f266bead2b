/* Weights read by value to judge a parameter count (analyze/same.h). */
#include "analyze/same.h"

#include "load/load.h"
#include "load/pb.h"
#include "ops/kernel.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static bool mp__dtype_ok(int dt) {
    return dt == MP_DT_FLOAT || dt == MP_DT_DOUBLE || dt == MP_DT_FLOAT16 || dt == MP_DT_BFLOAT16;
}

bool mp_tensor_has_values(const mp_tensor *t) {
    return t && mp__dtype_ok(t->dtype) && t->numel > 0 &&
           (t->loc == MP_DATA_RAW || t->loc == MP_DATA_TYPED || t->loc == MP_DATA_EXTERNAL);
}

static void mp__put(void *ctx, int64_t k, int64_t iv, double fv, bool isf) {
    ((double *)ctx)[k] = isf ? fv : (double)iv;
}

void mp_tview_close(mp_tview *v) {
    if (v->map) munmap(v->map, v->map_len);
    free(v->dec);
    memset(v, 0, sizeof *v);
}

bool mp_tview_open(const mp_model *m, const mp_tensor *t, mp_tview *v) {
    memset(v, 0, sizeof *v);
    bool boolean = t && t->dtype == MP_DT_BOOL && t->numel > 0 &&
                   (t->loc == MP_DATA_RAW || t->loc == MP_DATA_TYPED || t->loc == MP_DATA_EXTERNAL);
    if (!boolean && !mp_tensor_has_values(t)) return false;
    v->dtype = t->dtype;
    v->n = t->numel;
    uint64_t need = mp_dtype_bytes(t->dtype, t->numel);
    switch (t->loc) {
    case MP_DATA_RAW: {
        if (t->size != need) return false;
        v->raw = t->data;
        /* the model is mapped for random access (its weights are not read):
         * these are, all of them, so ask for their pages in one go rather
         * than one fault each */
        long page = sysconf(_SC_PAGESIZE);
        if (page > 0) {
            uintptr_t a = (uintptr_t)t->data / (uintptr_t)page * (uintptr_t)page;
            (void)madvise((void *)a, (size_t)((uintptr_t)t->data + t->size - a), MADV_WILLNEED);
        }
        return true;
    }
    case MP_DATA_TYPED:
        /* every element takes a byte of the payload at least: a count the
         * payload cannot hold is refused before anything is allocated */
        if ((uint64_t)t->numel > t->size || (uint64_t)t->numel > SIZE_MAX / sizeof(double))
            return false;
        v->dec = malloc((size_t)t->numel * sizeof(double));
        if (!v->dec || !mp_tensor_typed_walk(t, mp__put, v->dec)) {
            mp_tview_close(v);
            return false;
        }
        return true;
    case MP_DATA_EXTERNAL: {
        if (t->ext_length != need || t->ext_offset > (uint64_t)INT64_MAX - need) return false;
        int fd = mp_external_open(m, t->ext_path);
        if (fd < 0) return false;
        struct stat st;
        long page = sysconf(_SC_PAGESIZE);
        uint64_t at = page > 0 ? t->ext_offset / (uint64_t)page * (uint64_t)page : 0;
        bool ok = page > 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size >= t->ext_offset + need &&
                  need <= SIZE_MAX - (t->ext_offset - at);
        if (ok) {
            v->map_len = (size_t)(need + (t->ext_offset - at));
            v->map = mmap(NULL, v->map_len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, (off_t)at);
            if (v->map == MAP_FAILED) {
                v->map = NULL;
                ok = false;
            } else {
                v->raw = (const uint8_t *)v->map + (t->ext_offset - at);
            }
        }
        close(fd);
        return ok;
    }
    default:
        return false;
    }
}

double mp_tview_get(const mp_tview *v, int64_t i) {
    if (v->dec) return v->dec[i];
    const uint8_t *p = v->raw;
    switch (v->dtype) {
    case MP_DT_FLOAT: {
        uint32_t u;
        memcpy(&u, p + 4 * i, 4);
        return pb_f32(u);
    }
    case MP_DT_DOUBLE: {
        uint64_t u;
        memcpy(&u, p + 8 * i, 8);
        return pb_f64(u);
    }
    case MP_DT_FLOAT16:
        return mp_half_to_float((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
    case MP_DT_BOOL:
        return p[i] != 0;
    default: /* bf16 */
        return mp_bf16_to_float((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
    }
}

/* x as a cast to dtype dt rounds it. */
static double mp__round_to(double x, int dt) {
    switch (dt) {
    case MP_DT_FLOAT: return (float)x;
    case MP_DT_FLOAT16: return mp_half_to_float(mp_float_to_half((float)x));
    case MP_DT_BFLOAT16: return mp_bf16_to_float(mp_float_to_bf16((float)x));
    default: return x;
    }
}

#define MP__MAXR 8

/* a[i] == cast(b[j]) for every element (or every step-th first, as a
 * quick refusal), j being a's index i mapped through perm onto b's dims
 * (perm NULL: the same flat index). */
static bool mp__match(const mp_tview *a, const mp_tview *b, const mp_tensor *ta,
                      const mp_tensor *tb, const int *perm, int64_t step) {
    int r = ta->rank;
    int64_t sb[MP__MAXR], idx[MP__MAXR] = {0};
    if (perm) {
        int64_t s = 1;
        for (int d = tb->rank - 1; d >= 0; d--) {
            sb[d] = s;
            s *= tb->dims[d];
        }
    }
    if (perm && step == 1 && r == 2 && perm[0] == 1 && a->dtype == MP_DT_FLOAT &&
        b->dtype == MP_DT_FLOAT && a->raw && b->raw) {
        /* the common case, a tied head: fp32 [n, m] against fp32 [m, n],
         * bit for bit, in tiles so that neither side is read a row apart */
        int64_t n = ta->dims[0], mm = ta->dims[1];
        const uint8_t *pa = a->raw, *pbr = b->raw;
        for (int64_t i0 = 0; i0 < n; i0 += 32)
            for (int64_t j0 = 0; j0 < mm; j0 += 32)
                for (int64_t i = i0; i < n && i < i0 + 32; i++)
                    for (int64_t j = j0; j < mm && j < j0 + 32; j++)
                        if (memcmp(pa + 4 * (i * mm + j), pbr + 4 * (j * n + i), 4) != 0) {
                            /* equal values in other bits (0 and -0): the general rule decides */
                            if (mp_tview_get(a, i * mm + j) != mp_tview_get(b, j * n + i)) return false;
                        }
        return true;
    }
    if (perm && step == 1) { /* every element: j follows i as an odometer */
        int64_t j = 0;
        for (int64_t i = 0; i < a->n; i++) {
            if (mp_tview_get(a, i) != mp__round_to(mp_tview_get(b, j), a->dtype)) return false;
            for (int d = r - 1; d >= 0; d--) {
                j += sb[perm[d]];
                if (++idx[d] < ta->dims[d]) break;
                j -= idx[d] * sb[perm[d]];
                idx[d] = 0;
            }
        }
        return true;
    }
    for (int64_t i = 0; i < a->n; i += step) {
        int64_t j = i;
        if (perm) {
            int64_t rest = i;
            j = 0;
            for (int d = r - 1; d >= 0; d--) {
                idx[d] = rest % ta->dims[d];
                rest /= ta->dims[d];
                j += idx[d] * sb[perm[d]];
            }
        }
        if (mp_tview_get(a, i) != mp__round_to(mp_tview_get(b, j), a->dtype)) return false;
    }
    return true;
}

/* Try the permutations of b's dims that give a's (depth d onwards). */
static bool mp__perms(const mp_tview *a, const mp_tview *b, const mp_tensor *ta,
                      const mp_tensor *tb, int *perm, unsigned used, int d, bool *identity) {
    if (d == ta->rank) {
        int64_t step = a->n > 4096 ? a->n / 1024 : 1;
        if (!mp__match(a, b, ta, tb, perm, step) || (step > 1 && !mp__match(a, b, ta, tb, perm, 1)))
            return false;
        *identity = true;
        for (int i = 0; i < ta->rank; i++)
            if (perm[i] != i) *identity = false;
        return true;
    }
    for (int k = 0; k < tb->rank; k++) {
        if ((used & (1u << k)) || tb->dims[k] != ta->dims[d]) continue;
        perm[d] = k;
        if (mp__perms(a, b, ta, tb, perm, used | (1u << k), d + 1, identity)) return true;
    }
    return false;
}

bool mp_tensor_same(const mp_model *m, const mp_tensor *a, const mp_tensor *b,
                    const char **how) {
    *how = NULL;
    if (!a || !b || a->numel != b->numel || a->numel <= 0 || a->rank > MP__MAXR ||
        b->rank > MP__MAXR)
        return false;
    mp_tview va, vb;
    if (!mp_tview_open(m, a, &va)) return false;
    if (!mp_tview_open(m, b, &vb)) {
        mp_tview_close(&va);
        return false;
    }
    bool cast = a->dtype != b->dtype, same = false, identity = false;
    int perm[MP__MAXR];
    if (a->rank == b->rank && mp__perms(&va, &vb, a, b, perm, 0, 0, &identity)) {
        same = true;
        *how = identity ? (cast ? "cast" : "copy") : (cast ? "transpose+cast" : "transpose");
    } else {
        int64_t step = va.n > 4096 ? va.n / 1024 : 1;
        if (mp__match(&va, &vb, a, b, NULL, step) && (step == 1 || mp__match(&va, &vb, a, b, NULL, 1))) {
            same = true;
            *how = cast ? "reshape+cast" : "reshape";
        }
    }
    mp_tview_close(&va);
    mp_tview_close(&vb);
    return same;
}

int64_t mp_tensor_broadcast_source(const mp_model *m, const mp_tensor *t) {
    mp_tview v;
    if (!mp_tview_open(m, t, &v)) return -1;
    int64_t elems = t->numel, stride = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        int64_t size = t->dims[d];
        bool repeated = size > 1;
        /* every element of slice k > 0 equals the one k slices back */
        for (int64_t i = 0; repeated && i < v.n; i++) {
            int64_t k = (i / stride) % size;
            if (k && mp_tview_get(&v, i) != mp_tview_get(&v, i - k * stride)) repeated = false;
        }
        if (repeated) elems /= size;
        stride *= size;
    }
    mp_tview_close(&v);
    return elems;
}

static int mp__cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

int64_t mp_tensor_distinct(const mp_model *m, const mp_tensor *t, bool *mask) {
    *mask = false;
    if (!t || t->numel <= 0) return -1;
    mp_tview v;
    if (!mp_tview_open(m, t, &v)) return -1;
    int64_t n = v.n;
    /* a mask first, in place: any size */
    bool only_mask = true;
    for (int64_t i = 0; i < n && only_mask; i++) {
        double x = mp_tview_get(&v, i);
        only_mask = x == 0 || x <= -1e4;
    }
    if (only_mask) {
        mp_tview_close(&v);
        *mask = true;
        return 2;
    }
    double *d = n <= ((int64_t)1 << 24) ? malloc(sizeof *d * (size_t)n) : NULL;
    if (!d) {
        mp_tview_close(&v);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        d[i] = mp_tview_get(&v, i);
        if (d[i] != d[i]) d[i] = HUGE_VAL; /* a NaN sorts as one value */
    }
    mp_tview_close(&v);
    qsort(d, (size_t)n, sizeof *d, mp__cmp_double);
    int64_t k = n > 0;
    for (int64_t i = 1; i < n; i++) k += d[i] != d[i - 1];
    free(d);
    return k;
}
