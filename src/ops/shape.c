/* Shape arithmetic and data movement: operators that move, select, relabel
 * or generate elements without arithmetic on them.
 *
 * Cost rule (GUIDE §2): data movement is 0 MACs and 0 FLOPs; the driver
 * counts the bytes read and written. The few exceptions say so on the op
 * (CumSum: 1 FLOP per element; Scatter* with a reduction: 1 FLOP per update
 * element).
 *
 * Shape rule: each op sets its outputs' dtype and shape. Unknown dims (< 0)
 * flow through without error; a symbolic dim that passes through unchanged
 * stays symbolic; a dim that cannot be derived becomes MP_DIM_ANON (never a
 * guess). Only contradictions (bad ranks, mismatched known dims, invalid
 * attributes or index values) are errors.
 *
 * Contents: the small integer tensors of shape arithmetic are evaluated.
 * Where every input an output depends on has known contents and the output
 * is small (<= MP_KNOWN_MAX elements, shape fully known), the output's
 * contents are set, so that models exported with dynamic axes resolve
 * (Shape -> Gather -> Unsqueeze -> Concat -> Reshape). Contents are real
 * numbers only: a symbolic dim leaves the contents that depend on it
 * unknown.
 *
 * This file holds the rules and the descriptor table; the reference
 * kernels are in shape_kernels.c. The file is over 1,500 lines for one job: the shape, content and cost rules of about
 * eighty data-movement operators, each a few dozen lines beside the rule in
 * its comment; splitting them by family would separate rules that share
 * the content-evaluation helpers above them. */
#include "ops/kernel.h"
#include "load/load.h"

#include <math.h>
#include <stdlib.h>
#include <strings.h>
#include "ops/shape_int.h"

/* Slice bounds at or beyond 2^31-1 (INT_MAX, INT64_MAX, ...) are the
 * exporters' way of saying "to the end": a full-range slice of a symbolic
 * dim keeps the dim. */
#define SH_BIG ((int64_t)2147483647)

/* ------------------------------------------------------------------ */
/* helpers                                                             */
/* ------------------------------------------------------------------ */

/* Required input i: NULL (with *st set) when omitted or of absurd rank. */
static mp_value *sh_in(mp_ctx *c, int i, mp_status *st) {
    mp_value *v = NULL;
    *st = mp_need_in(c, i, NULL, &v);
    return *st ? NULL : v;
}

/* Copy rank dims (dims may be NULL for a scalar). */
static void sh_copy_dims(int64_t *to, const int64_t *from, int rank) {
    if (rank > 0) memcpy(to, from, sizeof(int64_t) * (size_t)rank);
}

static int64_t sh_clamp(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* Value of a dim: a symbolic dim the user gave a value counts as known. */
static int64_t sh_dim_value(const mp_ctx *c, int64_t d) {
    if (d >= 0 || d == MP_DIM_ANON || d < -(int64_t)c->m->n_syms) return d;
    int s = MP_DIM_SYM(d);
    if (c->m->syms[s].value >= 0) return c->m->syms[s].value;
    return d;
}

/* Element count when known and small enough to track contents, else -1. */
static int64_t sh_small(const int64_t *dims, int rank) {
    if (rank < 0) return -1;
    int64_t p = mp_dims_product(dims, rank);
    return (p >= 0 && p <= MP_KNOWN_MAX) ? p : -1;
}

/* Row-major strides of known dims. */
static void sh_strides(const int64_t *dims, int rank, int64_t *strides) {
    int64_t s = 1;
    for (int a = rank - 1; a >= 0; a--) {
        strides[a] = s;
        s *= dims[a] > 0 ? dims[a] : 1;
    }
}

/* Known integer contents of input i (converted from floats when needed);
 * false when absent, unknown, or inconsistent with the value's shape. */
static bool sh_ints(mp_ctx *c, int i, const int64_t **v, int64_t *n) {
    mp_value *x = mp_in(c, i);
    if (!x || x->rank < 0 || x->dtype == MP_DT_STRING) return false;
    if (!mp_ints(c, i, v, n)) return false;
    return mp_value_numel(x) == *n;
}

/* Known contents of an input, kept in its own kind (ints or floats). */
typedef struct sh_data {
    const int64_t *iv;
    const double *fv;
    int64_t n;
} sh_data;

static bool sh_data_get(mp_ctx *c, int i, sh_data *d) {
    mp_value *v = mp_in(c, i);
    d->iv = NULL;
    d->fv = NULL;
    d->n = 0;
    if (!v || v->rank < 0 || v->dtype == MP_DT_STRING) return false;
    int64_t numel = mp_value_numel(v);
    if (numel < 0 || numel > MP_KNOWN_MAX) return false;
    bool ok = mp_dtype_is_float(v->dtype) ? mp_floats(c, i, &d->fv, &d->n)
                                          : mp_ints(c, i, &d->iv, &d->n);
    return ok && d->n == numel;
}

static double sh_get_f(const sh_data *s, int64_t j) {
    return s->fv ? s->fv[j] : (double)s->iv[j];
}

static int64_t sh_get_i(const sh_data *s, int64_t j) {
    if (s->iv) return s->iv[j];
    double x = s->fv[j];
    return (x > -9.2e18 && x < 9.2e18) ? (int64_t)x : 0;
}

/* Output contents under construction, in the output dtype's kind. Shape
 * tensors are small: those fit in the struct, without a malloc per node. */
#define SH_BUF_INLINE 64
typedef struct sh_buf {
    bool is_float;
    int64_t *iv;
    double *fv;
    union {
        int64_t i[SH_BUF_INLINE];
        double f[SH_BUF_INLINE];
    } small;
} sh_buf;

static mp_status sh_buf_init(sh_buf *b, int dtype, int64_t n) {
    size_t cnt = (size_t)(n > 0 ? n : 1);
    b->is_float = mp_dtype_is_float(dtype);
    b->iv = NULL;
    b->fv = NULL;
    if (b->is_float)
        b->fv = cnt <= SH_BUF_INLINE ? b->small.f : malloc(cnt * sizeof *b->fv);
    else
        b->iv = cnt <= SH_BUF_INLINE ? b->small.i : malloc(cnt * sizeof *b->iv);
    if (!b->iv && !b->fv) return mp_error(MP_ERR_NOMEM, "out of memory");
    return MP_OK;
}

static void sh_buf_put(sh_buf *b, int64_t k, const sh_data *s, int64_t j) {
    if (b->is_float)
        b->fv[k] = sh_get_f(s, j);
    else
        b->iv[k] = sh_get_i(s, j);
}

static void sh_buf_free(sh_buf *b) {
    if (b->iv != b->small.i) free(b->iv);
    if (b->fv != b->small.f) free(b->fv);
    b->iv = NULL;
    b->fv = NULL;
}

/* Set output o's contents from the buffer (when its shape holds n elements)
 * and free the buffer. */
static mp_status sh_buf_emit(mp_ctx *c, int o, sh_buf *b, int64_t n) {
    mp_status st = MP_OK;
    mp_value *y = mp_out(c, o);
    if (y && mp_value_numel(y) == n)
        st = b->is_float ? mp_set_floats(c, o, b->fv, n) : mp_set_ints(c, o, b->iv, n);
    sh_buf_free(b);
    return st;
}

/* Output o (dims odims, rank) takes src[base + sum_a i_a * coef[a]] at
 * output position (i_0, ..., i_{rank-1}): covers Slice, Transpose, Split and
 * Expand. Skipped when the output is unknown, large, or the map would step
 * outside the source. */
static mp_status sh_emit_affine(mp_ctx *c, int o, const sh_data *s, int rank,
                                const int64_t *odims, int64_t base, const int64_t *coef) {
    mp_value *y = mp_out(c, o);
    int64_t n = sh_small(odims, rank);
    if (!y || n < 0 || mp_value_numel(y) != n) return MP_OK;
    sh_buf b;
    mp_status st = sh_buf_init(&b, y->dtype, n);
    if (st) return st;
    int64_t idx[MP_MAX_RANK] = {0};
    int64_t src = base;
    for (int64_t k = 0; k < n; k++) {
        if (src < 0 || src >= s->n) {
            sh_buf_free(&b);
            return MP_OK;
        }
        sh_buf_put(&b, k, s, src);
        for (int a = rank - 1; a >= 0; a--) {
            idx[a]++;
            src += coef[a];
            if (idx[a] < odims[a]) break;
            src -= coef[a] * odims[a];
            idx[a] = 0;
        }
    }
    return sh_buf_emit(c, o, &b, n);
}

/* Output o gets input i's contents unchanged (Identity, Reshape, ...). */
static mp_status sh_pass(mp_ctx *c, int i, int o) {
    sh_data s;
    mp_value *y = mp_out(c, o);
    if (!y || !sh_data_get(c, i, &s) || mp_value_numel(y) != s.n) return MP_OK;
    /* a value's contents never change once set: share the input's */
    return s.fv ? mp_keep_floats(c, o, (double *)s.fv, s.n)
                : mp_keep_ints(c, o, (int64_t *)s.iv, s.n);
}

/* Normalise n axes against rank into out; fails on out-of-range or repeated
 * axes. */
static mp_status sh_axes(mp_ctx *c, const int64_t *ax, int64_t n, int rank, int *out,
                         const char *what) {
    bool seen[MP_MAX_RANK] = {false};
    if (n > rank)
        return mp_fail(c, "%lld %s for rank %d", (long long)n, what, rank);
    for (int64_t k = 0; k < n; k++) {
        int a = mp_axis(ax[k], rank);
        if (a < 0)
            return mp_fail(c, "%s value %lld is out of range for rank %d", what,
                           (long long)ax[k], rank);
        if (seen[a]) return mp_fail(c, "%s repeats axis %d", what, a);
        seen[a] = true;
        out[k] = a;
    }
    return MP_OK;
}

/* Output 0 with the input's dtype and an unknown shape. */
static mp_status sh_unknown(mp_ctx *c, const mp_value *x) {
    return mp_set_out(c, 0, x ? x->dtype : MP_DT_UNDEFINED, -1, NULL);
}

/* Output 0 of rank r with all dims anonymous. */
static mp_status sh_anon(mp_ctx *c, int o, int dtype, int64_t r) {
    int64_t d[MP_MAX_RANK];
    if (r < 0 || r > MP_MAX_RANK) return mp_set_out(c, o, dtype, -1, NULL);
    for (int64_t k = 0; k < r; k++) d[k] = MP_DIM_ANON;
    return mp_set_out(c, o, dtype, (int)r, d);
}

/* Count of a 1-D input whose contents are unknown but whose shape [k] is
 * known; -1 otherwise. */
static int64_t sh_len1(mp_ctx *c, int i) {
    mp_value *v = mp_in(c, i);
    if (!v || v->rank != 1 || v->dims[0] < 0) return -1;
    return v->dims[0];
}

/* ------------------------------------------------------------------ */
/* Shape, Size                                                         */
/* ------------------------------------------------------------------ */

/* Shape (1; start/end attrs since 15). Shape: int64 [end - start], the
 * input's dims in [start, end) (negative values count from the back, both
 * clamped to [0, rank]). Contents: those dims when each is known (a symbol
 * with a user value counts as known). Cost 0. */
static mp_status shape_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    if (x->rank < 0) return sh_anon(c, 0, MP_DT_INT64, 1);
    int64_t r = x->rank;
    int64_t s = mp_attr_i(c->n, "start", 0), e = mp_attr_i(c->n, "end", r);
    if (s < 0) s += r;
    if (e < 0) e += r;
    s = sh_clamp(s, 0, r);
    e = sh_clamp(e, 0, r);
    int64_t len = e > s ? e - s : 0;
    st = mp_set_out(c, 0, MP_DT_INT64, 1, &len);
    if (st) return st;
    int64_t v[MP_MAX_RANK];
    for (int64_t k = 0; k < len; k++) {
        v[k] = sh_dim_value(c, x->dims[s + k]);
        if (v[k] < 0) return MP_OK;
    }
    return mp_set_ints(c, 0, v, len);
}

/* Shape, Size and EyeLike read only the input's metadata: 0 FLOPs and 0
 * bytes read; an unknown input shape does not make their cost unknown. */
static void meta_cost(mp_ctx *c, mp_cost *k) {
    k->macs = 0;
    k->flops = 0;
    k->bytes_read = 0;
    mp_value *y = mp_out(c, 0);
    if (!y || mp_value_numel(y) >= 0) k->flags &= ~(uint32_t)MP_COST_UNKNOWN;
}

/* CastLike reads input 1's dtype only: bytes read are input 0's. */
static void cast_like_cost(mp_ctx *c, mp_cost *k) {
    k->macs = 0;
    k->flops = 0;
    mp_value *x = mp_in(c, 0);
    k->bytes_read = x ? mp_value_bytes(x) : 0;
}

/* Size (1): int64 scalar, the input's element count; contents when every
 * dim is known. Cost 0. */
static mp_status size_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    st = mp_set_out(c, 0, MP_DT_INT64, 0, NULL);
    if (st || x->rank < 0) return st;
    int64_t p = 1;
    for (int a = 0; a < x->rank; a++) {
        int64_t d = sh_dim_value(c, x->dims[a]);
        if (d < 0) return MP_OK;
        if (__builtin_mul_overflow(p, d, &p))
            return mp_fail(c, "element count of '%s' overflows int64", x->name);
    }
    return mp_set_ints(c, 0, &p, 1);
}

/* ------------------------------------------------------------------ */
/* Gather family                                                       */
/* ------------------------------------------------------------------ */

/* Gather (1; negative indices since 11). data [d0..d{r-1}], indices of rank
 * q, axis a: output data.shape[:a] + indices.shape + data.shape[a+1:] (rank
 * q + r - 1), dtype of data. Known indices must lie in [-d_a, d_a).
 * Contents gathered when data and indices are known. Cost 0.
 * Input 0 can be an embedding table: a float table is a parameter by the
 * driver's float-initializer rule; no param_inputs bit is set, so that an
 * integer table gathered by shape arithmetic (GUIDE §3: "integer
 * shape/index tensors are not parameters") is never counted. A quantized
 * table reaches Gather through DequantizeLinear, whose input 0 is a
 * param slot. */
static mp_status gather_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    mp_value *ind = sh_in(c, 1, &st);
    if (!ind) return st;
    if (x->rank == 0) return mp_fail(c, "data '%s' is a scalar", x->name);
    if (x->rank < 0 || ind->rank < 0) return sh_unknown(c, x);
    int r = x->rank, q = ind->rank;
    int a = mp_axis(mp_attr_i(c->n, "axis", 0), r);
    if (a < 0)
        return mp_fail(c, "axis %lld is out of range for rank %d",
                       (long long)mp_attr_i(c->n, "axis", 0), r);
    int orank = r - 1 + q;
    if (orank > MP_MAX_RANK) return mp_fail(c, "output rank %d exceeds the limit", orank);
    int64_t od[2 * MP_MAX_RANK];
    int k = 0;
    for (int i = 0; i < a; i++) od[k++] = x->dims[i];
    for (int i = 0; i < q; i++) od[k++] = ind->dims[i];
    for (int i = a + 1; i < r; i++) od[k++] = x->dims[i];
    st = mp_set_out(c, 0, x->dtype, orank, od);
    if (st) return st;

    const int64_t *iv;
    int64_t ni;
    if (!sh_ints(c, 1, &iv, &ni)) return MP_OK;
    int64_t da = x->dims[a];
    if (da >= 0)
        for (int64_t j = 0; j < ni; j++)
            if (iv[j] < -da || iv[j] >= da)
                return mp_fail(c, "index %lld is out of range for axis %d of size %lld",
                               (long long)iv[j], a, (long long)da);
    sh_data s;
    if (da < 0 || !sh_data_get(c, 0, &s)) return MP_OK;
    int64_t n = sh_small(od, orank);
    if (n < 0) return MP_OK;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < a; i++) outer *= x->dims[i];
    for (int i = a + 1; i < r; i++) inner *= x->dims[i];
    sh_buf b;
    st = sh_buf_init(&b, x->dtype, n);
    if (st) return st;
    int64_t o = 0;
    for (int64_t p = 0; p < outer; p++)
        for (int64_t j = 0; j < ni; j++) {
            int64_t ix = iv[j] < 0 ? iv[j] + da : iv[j];
            for (int64_t t = 0; t < inner; t++) sh_buf_put(&b, o++, &s, (p * da + ix) * inner + t);
        }
    return sh_buf_emit(c, 0, &b, n);
}

/* GatherElements (11). data and indices of the same rank r >= 1: output has
 * the indices' shape and the data's dtype; out[i] = data[i with i_axis
 * replaced by indices[i]]. Known indices must lie in [-d_axis, d_axis).
 * Contents when both are known. Cost 0. */
static mp_status gather_elements_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    mp_value *ind = sh_in(c, 1, &st);
    if (!ind) return st;
    if (x->rank < 0 || ind->rank < 0) {
        if (ind->rank >= 0) return mp_set_out(c, 0, x->dtype, ind->rank, ind->dims);
        return sh_unknown(c, x);
    }
    if (x->rank != ind->rank || x->rank == 0)
        return mp_fail(c, "data has rank %d and indices rank %d: they must be equal and >= 1",
                       x->rank, ind->rank);
    int r = x->rank;
    int a = mp_axis(mp_attr_i(c->n, "axis", 0), r);
    if (a < 0) return mp_fail(c, "axis is out of range for rank %d", r);
    st = mp_set_out(c, 0, x->dtype, r, ind->dims);
    if (st) return st;
    const int64_t *iv;
    int64_t ni;
    if (!sh_ints(c, 1, &iv, &ni)) return MP_OK;
    int64_t da = x->dims[a];
    if (da >= 0)
        for (int64_t j = 0; j < ni; j++)
            if (iv[j] < -da || iv[j] >= da)
                return mp_fail(c, "index %lld is out of range for axis %d of size %lld",
                               (long long)iv[j], a, (long long)da);
    sh_data s;
    if (da < 0 || !sh_data_get(c, 0, &s) || sh_small(ind->dims, r) != ni) return MP_OK;
    for (int i = 0; i < r; i++)
        if (i != a && ind->dims[i] > x->dims[i]) return MP_OK;
    int64_t xs[MP_MAX_RANK], pos[MP_MAX_RANK] = {0};
    sh_strides(x->dims, r, xs);
    sh_buf b;
    st = sh_buf_init(&b, x->dtype, ni);
    if (st) return st;
    for (int64_t k = 0; k < ni; k++) {
        int64_t src = 0;
        for (int i = 0; i < r; i++) {
            int64_t p = i == a ? (iv[k] < 0 ? iv[k] + da : iv[k]) : pos[i];
            src += p * xs[i];
        }
        sh_buf_put(&b, k, &s, src);
        for (int i = r - 1; i >= 0; i--) {
            if (++pos[i] < ind->dims[i]) break;
            pos[i] = 0;
        }
    }
    return sh_buf_emit(c, 0, &b, ni);
}

/* GatherND (11; batch_dims since 12). data rank r, indices rank q, last
 * indices dim k, batch dims b: output indices.shape[:-1] +
 * data.shape[b+k:] (rank q - 1 + r - k - b), dtype of data. Needs k known
 * (else the rank is unknown); b + k <= r. Cost 0. */
static mp_status gather_nd_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    mp_value *ind = sh_in(c, 1, &st);
    if (!ind) return st;
    int64_t b = mp_attr_i(c->n, "batch_dims", 0);
    if (x->rank < 0 || ind->rank < 0) return sh_unknown(c, x);
    int r = x->rank, q = ind->rank;
    if (r < 1 || q < 1) return mp_fail(c, "data and indices must have rank >= 1");
    if (b < 0 || b >= r || b >= q)
        return mp_fail(c, "batch_dims %lld must be below both ranks (%d, %d)", (long long)b, r, q);
    int64_t k = ind->dims[q - 1];
    if (k < 0) return sh_unknown(c, x);
    if (k < 1 || b + k > r)
        return mp_fail(c, "index tuples of length %lld with batch_dims %lld exceed data rank %d",
                       (long long)k, (long long)b, r);
    int64_t od[2 * MP_MAX_RANK];
    int n = 0;
    for (int i = 0; i < q - 1; i++) {
        od[n] = ind->dims[i];
        if (i < b && !mp_dim_merge(ind->dims[i], x->dims[i], &od[n]))
            return mp_fail(c, "batch dim %d differs: %lld in indices, %lld in data", i,
                           (long long)ind->dims[i], (long long)x->dims[i]);
        n++;
    }
    for (int64_t i = b + k; i < r; i++) od[n++] = x->dims[i];
    return mp_set_out(c, 0, x->dtype, n, od);
}

/* ------------------------------------------------------------------ */
/* Concat                                                              */
/* ------------------------------------------------------------------ */

/* Concat (1: axis default 1; 4: axis required; negative axis since 11).
 * Inputs of one rank r >= 1; the output dim along the axis is the sum of
 * the inputs' (unknown when one is unknown, except a single unknown dim
 * among zeros, which is kept); the other dims must agree (a known dim wins
 * over a symbolic one; two different known dims are an error). Contents
 * concatenated when all are known. Cost 0. */
static mp_status concat_core(mp_ctx *c, int64_t axis) {
    mp_status st = MP_OK;
    int nin = c->n->n_in;
    if (nin < 1) return mp_fail(c, "no inputs");
    int r = -1, first = -1;
    for (int i = 0; i < nin; i++) {
        mp_value *v = sh_in(c, i, &st);
        if (!v) return st;
        if (v->rank < 0) continue;
        if (r < 0) {
            r = v->rank;
            first = i;
        } else if (v->rank != r) {
            return mp_fail(c, "input %d ('%s') has rank %d but input %d ('%s') has rank %d", i,
                           v->name, v->rank, first, mp_in(c, first)->name, r);
        }
    }
    mp_value *x0 = mp_in(c, 0);
    if (r < 0) return sh_unknown(c, x0);
    if (r == 0) return mp_fail(c, "cannot concatenate scalars");
    int a = mp_axis(axis, r);
    if (a < 0) return mp_fail(c, "axis %lld is out of range for rank %d", (long long)axis, r);
    int64_t od[MP_MAX_RANK];
    int64_t sum = 0; /* the concatenated dim */
    bool all_ranked = true;
    for (int d = 0; d < r; d++) od[d] = MP_DIM_ANON;
    bool seeded = false;
    for (int i = 0; i < nin; i++) {
        mp_value *v = mp_in(c, i);
        if (v->rank < 0) {
            all_ranked = false;
            continue;
        }
        for (int d = 0; d < r; d++) {
            if (d == a) continue;
            int64_t m = v->dims[d];
            if (seeded && !mp_dim_merge(od[d], v->dims[d], &m))
                return mp_fail(c, "dim %d differs: %lld in '%s' vs %lld in an earlier input", d,
                               (long long)v->dims[d], v->name, (long long)od[d]);
            od[d] = m;
        }
        seeded = true;
        sum = mp_dim_add(sum, v->dims[a]);
    }
    od[a] = all_ranked ? sum : MP_DIM_ANON;
    st = mp_set_out(c, 0, x0->dtype, r, od);
    if (st) return st;

    /* contents */
    int64_t n = sh_small(od, r);
    if (n < 0) return MP_OK;
    sh_data src_small[8];
    sh_data *src = nin <= 8 ? src_small : malloc(sizeof *src * (size_t)nin);
    if (!src) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < nin; i++)
        if (!sh_data_get(c, i, &src[i])) {
            if (src != src_small) free(src);
            return MP_OK;
        }
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < a; d++) outer *= od[d];
    for (int d = a + 1; d < r; d++) inner *= od[d];
    sh_buf b;
    st = sh_buf_init(&b, x0->dtype, n);
    if (st) {
        if (src != src_small) free(src);
        return st;
    }
    int64_t k = 0;
    for (int64_t p = 0; p < outer; p++)
        for (int i = 0; i < nin; i++) {
            int64_t chunk = mp_in(c, i)->dims[a] * inner;
            for (int64_t t = 0; t < chunk; t++) sh_buf_put(&b, k++, &src[i], p * chunk + t);
        }
    if (src != src_small) free(src);
    return sh_buf_emit(c, 0, &b, n);
}

static mp_status concat_infer_v1(mp_ctx *c) {
    return concat_core(c, mp_attr_i(c->n, "axis", 1));
}

static mp_status concat_infer_v4(mp_ctx *c) {
    if (!mp_node_attr(c->n, "axis")) return mp_fail(c, "attribute 'axis' is required");
    return concat_core(c, mp_attr_i(c->n, "axis", 0));
}

/* ------------------------------------------------------------------ */
/* Slice                                                               */
/* ------------------------------------------------------------------ */

/* One sliced axis of known size d: output length and first index.
 * step > 0: start, end += d when negative, clamped to [0, d];
 *           length = ceil((end - start) / step) when end > start, else 0.
 * step < 0: start clamped to [0, d-1], end to [-1, d-1];
 *           length = ceil((start - end) / -step) when start > end, else 0. */
static int64_t sh_slice_axis(int64_t d, int64_t s, int64_t e, int64_t step, int64_t *first) {
    if (s < 0) s += d;
    if (e < 0) e += d;
    if (step > 0) {
        s = sh_clamp(s, 0, d);
        e = sh_clamp(e, 0, d);
        *first = s;
        return e > s ? (e - s - 1) / step + 1 : 0;
    }
    s = sh_clamp(s, 0, d - 1);
    e = sh_clamp(e, -1, d - 1);
    *first = s;
    int64_t ns = step < -INT64_MAX ? INT64_MAX : -step;
    return s > e ? (s - e - 1) / ns + 1 : 0;
}

/* A slice of an unknown dim that provably covers it all keeps the dim:
 * [0, >= 2^31-1) step 1, or [-1 or >= 2^31-1, <= -(2^31-1)) step -1
 * (the full reversal x[::-1]). */
static bool sh_slice_full(int64_t s, int64_t e, int64_t step) {
    if (step == 1) return s == 0 && e >= SH_BIG;
    if (step == -1) return (s == -1 || s >= SH_BIG) && e <= -SH_BIG;
    return false;
}

/* Slice with known starts/ends (axes, steps optional): output dims per
 * sh_slice_axis; contents sliced when the data is known. */
static mp_status slice_apply(mp_ctx *c, mp_value *x, const int64_t *st_, const int64_t *en,
                             const int64_t *ax, const int64_t *sp, int64_t n) {
    if (x->rank < 0) return sh_unknown(c, x);
    int r = x->rank;
    int axn[MP_MAX_RANK];
    if (n > r) return mp_fail(c, "%lld slice entries for rank %d", (long long)n, r);
    if (ax) {
        mp_status st = sh_axes(c, ax, n, r, axn, "axes");
        if (st) return st;
    } else {
        for (int k = 0; k < n; k++) axn[k] = k;
    }
    /* od zeroed: gcc cannot see that a rank-0 slice reads none of it */
    int64_t od[MP_MAX_RANK] = {0}, first[MP_MAX_RANK], step[MP_MAX_RANK];
    for (int a = 0; a < r; a++) {
        od[a] = x->dims[a];
        first[a] = 0;
        step[a] = 1;
    }
    for (int k = 0; k < n; k++) {
        int a = axn[k];
        int64_t s = sp ? sp[k] : 1;
        if (s == 0) return mp_fail(c, "step is 0 on axis %d", a);
        if (x->dims[a] >= 0) {
            od[a] = sh_slice_axis(x->dims[a], st_[k], en[k], s, &first[a]);
            step[a] = s;
        } else {
            od[a] = sh_slice_full(st_[k], en[k], s) ? x->dims[a] : MP_DIM_ANON;
        }
    }
    mp_status st = mp_set_out(c, 0, x->dtype, r, od);
    if (st) return st;
    sh_data s;
    if (sh_small(od, r) < 0 || !sh_data_get(c, 0, &s)) return MP_OK;
    int64_t xs[MP_MAX_RANK], coef[MP_MAX_RANK], base = 0;
    sh_strides(x->dims, r, xs);
    for (int a = 0; a < r; a++) {
        base += od[a] > 0 ? first[a] * xs[a] : 0;
        coef[a] = od[a] > 1 ? step[a] * xs[a] : 0;
    }
    return sh_emit_affine(c, 0, &s, r, od, base, coef);
}

/* Slice with unknown starts/ends: the sliced axes (all when not known)
 * become anonymous, the others pass through. */
static mp_status slice_unknown(mp_ctx *c, mp_value *x, const int64_t *ax, int64_t nax) {
    if (x->rank < 0) return sh_unknown(c, x);
    int r = x->rank;
    int64_t od[MP_MAX_RANK];
    for (int a = 0; a < r; a++) od[a] = ax || nax >= 0 ? x->dims[a] : MP_DIM_ANON;
    if (ax) {
        int axn[MP_MAX_RANK];
        mp_status st = sh_axes(c, ax, nax, r, axn, "axes");
        if (st) return st;
        for (int k = 0; k < nax; k++) od[axn[k]] = MP_DIM_ANON;
    } else if (nax >= 0) {
        if (nax > r) return mp_fail(c, "%lld slice entries for rank %d", (long long)nax, r);
        for (int k = 0; k < nax; k++) od[k] = MP_DIM_ANON;
    }
    return mp_set_out(c, 0, x->dtype, r, od);
}

/* Slice (1): starts, ends, axes as attributes. */
static mp_status slice_infer_v1(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    const int64_t *s, *e, *ax = NULL;
    int ns = mp_attr_ints(c->n, "starts", &s), ne = mp_attr_ints(c->n, "ends", &e);
    if (ns < 0 || ne < 0) return mp_fail(c, "attributes 'starts' and 'ends' are required");
    int na = mp_attr_ints(c->n, "axes", &ax);
    if (ns != ne || (na >= 0 && na != ns))
        return mp_fail(c, "starts, ends and axes lengths differ (%d, %d, %d)", ns, ne, na);
    return slice_apply(c, x, s, e, na >= 0 ? ax : NULL, NULL, ns);
}

/* Slice (10): starts, ends, axes, steps as inputs 1-4. */
static mp_status slice_infer_v10(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    if (!mp_in(c, 1) || !mp_in(c, 2)) return mp_fail(c, "inputs starts and ends are required");
    const int64_t *s = NULL, *e = NULL, *ax = NULL, *sp = NULL;
    int64_t ns = 0, ne = 0, na = -1, nsp = -1;
    bool ks = sh_ints(c, 1, &s, &ns), ke = sh_ints(c, 2, &e, &ne);
    bool has_ax = mp_in(c, 3) != NULL, has_sp = mp_in(c, 4) != NULL;
    bool ka = has_ax && sh_ints(c, 3, &ax, &na);
    bool ksp = has_sp && sh_ints(c, 4, &sp, &nsp);
    if (ks && ke && ns != ne) return mp_fail(c, "starts has %lld entries, ends %lld",
                                             (long long)ns, (long long)ne);
    if (ks && ka && na != ns) return mp_fail(c, "axes has %lld entries, starts %lld",
                                             (long long)na, (long long)ns);
    if (ks && ksp && nsp != ns) return mp_fail(c, "steps has %lld entries, starts %lld",
                                               (long long)nsp, (long long)ns);
    if (ks && ke && (!has_ax || ka) && (!has_sp || ksp))
        return slice_apply(c, x, s, e, ax, sp, ns);
    if (ka) return slice_unknown(c, x, ax, na);
    if (!has_ax) {
        int64_t k = ks ? ns : sh_len1(c, 1);
        return slice_unknown(c, x, NULL, k);
    }
    return slice_unknown(c, x, NULL, -1);
}

/* ------------------------------------------------------------------ */
/* Tracing shape vectors whose contents are unknown                    */
/* ------------------------------------------------------------------ */

/* Contents are real numbers only, so Shape(x) of an x with a symbolic dim
 * has unknown contents. The ops that take a shape vector (Reshape, Expand,
 * ConstantOfShape) then trace it back through the exporters' pattern
 * Shape -> Gather / Slice -> Unsqueeze / Squeeze / Cast / Identity ->
 * Concat to learn, entry by entry, a known number, a dim of some tensor
 * (kept symbolic), or nothing. A traced dim is taken as the dim itself
 * (Reshape's special values 0 and -1 come only from known numbers). */
enum { SH_T_UNKNOWN = 0, SH_T_NUM = 1, SH_T_DIM = 2 };
#define SH_TRACE_DEPTH 16
#define SH_TRACE_BUDGET 4096 /* producer visits per trace: bounds pathological DAGs */

/* Entries of input i of c's node (1-D, or a scalar as one entry) into
 * val/kind; returns the entry count, or -1 when even that is unknown. */
static int sh_trace(mp_ctx *c, int i, int64_t *val, uint8_t *kind, int depth, int *budget) {
    mp_value *v = mp_in(c, i);
    if (!v || v->rank < 0 || v->rank > 1) return -1;
    int64_t n = v->rank == 0 ? 1 : v->dims[0];
    if (n < 0 || n > MP_MAX_RANK) return -1;
    for (int k = 0; k < n; k++) {
        val[k] = MP_DIM_ANON;
        kind[k] = SH_T_UNKNOWN;
    }
    const int64_t *iv;
    int64_t kn;
    if (v->dtype != MP_DT_STRING && mp_ints(c, i, &iv, &kn) && kn == n) {
        for (int k = 0; k < n; k++) {
            val[k] = iv[k];
            kind[k] = SH_T_NUM;
        }
        return (int)n;
    }
    if (depth <= 0 || --*budget < 0 || v->producer < 0 || v->producer >= c->g->n_nodes)
        return (int)n;
    mp_node *p = &c->g->nodes[v->producer];
    mp_ctx pc = {c->m, c->g, p, v->producer, c->infer_graph};
    const char *op = p->op;
    if (p->domain[0]) return (int)n;
    if (strcmp(op, "Shape") == 0) {
        mp_value *x = mp_in(&pc, 0);
        if (!x || x->rank < 0) return (int)n;
        int64_t r = x->rank;
        int64_t st = mp_attr_i(p, "start", 0), en = mp_attr_i(p, "end", r);
        if (st < 0) st += r;
        if (en < 0) en += r;
        st = sh_clamp(st, 0, r);
        en = sh_clamp(en, 0, r);
        if ((en > st ? en - st : 0) != n) return (int)n;
        for (int k = 0; k < n; k++) {
            int64_t d = sh_dim_value(c, x->dims[st + k]);
            val[k] = d;
            kind[k] = d >= 0 ? SH_T_NUM : d == MP_DIM_ANON ? SH_T_UNKNOWN : SH_T_DIM;
        }
        return (int)n;
    }
    if (strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0 ||
        strcmp(op, "Identity") == 0 ||
        (strcmp(op, "Cast") == 0 && mp_dtype_is_int((int)mp_attr_i(p, "to", 0)))) {
        int64_t tv[MP_MAX_RANK];
        uint8_t tk[MP_MAX_RANK];
        if (sh_trace(&pc, 0, tv, tk, depth - 1, budget) != n) return (int)n;
        memcpy(val, tv, sizeof(int64_t) * (size_t)n);
        memcpy(kind, tk, (size_t)n);
        return (int)n;
    }
    if (strcmp(op, "Concat") == 0) {
        int64_t tv[MP_MAX_RANK];
        uint8_t tk[MP_MAX_RANK];
        int o = 0;
        for (int j = 0; j < p->n_in; j++) {
            int len = sh_trace(&pc, j, tv, tk, depth - 1, budget);
            if (len < 0 || o + len > n) return (int)n;
            memcpy(val + o, tv, sizeof(int64_t) * (size_t)len);
            memcpy(kind + o, tk, (size_t)len);
            o += len;
        }
        if (o != n) {
            for (int k = 0; k < n; k++) {
                val[k] = MP_DIM_ANON;
                kind[k] = SH_T_UNKNOWN;
            }
        }
        return (int)n;
    }
    if (strcmp(op, "Gather") == 0 && mp_attr_i(p, "axis", 0) == 0) {
        int64_t tv[MP_MAX_RANK];
        uint8_t tk[MP_MAX_RANK];
        mp_value *x = mp_in(&pc, 0);
        int len = x && x->rank == 1 ? sh_trace(&pc, 0, tv, tk, depth - 1, budget) : -1;
        if (!sh_ints(&pc, 1, &iv, &kn) || kn != n || len < 0) return (int)n;
        for (int k = 0; k < n; k++) {
            int64_t ix = iv[k] < 0 ? iv[k] + len : iv[k];
            if (ix < 0 || ix >= len) return (int)n;
            val[k] = tv[ix];
            kind[k] = tk[ix];
        }
        return (int)n;
    }
    if (strcmp(op, "Slice") == 0 && p->n_in >= 3) {
        int64_t tv[MP_MAX_RANK];
        uint8_t tk[MP_MAX_RANK];
        const int64_t *sv, *ev, *av = NULL, *pv = NULL;
        int64_t ns, ne, na = 1, np = 1;
        mp_value *x = mp_in(&pc, 0);
        int len = x && x->rank == 1 ? sh_trace(&pc, 0, tv, tk, depth - 1, budget) : -1;
        if (len < 0 || !sh_ints(&pc, 1, &sv, &ns) || !sh_ints(&pc, 2, &ev, &ne) || ns != 1 ||
            ne != 1)
            return (int)n;
        if (mp_in(&pc, 3) && (!sh_ints(&pc, 3, &av, &na) || na != 1 || mp_axis(av[0], 1) != 0))
            return (int)n;
        if (mp_in(&pc, 4) && (!sh_ints(&pc, 4, &pv, &np) || np != 1 || pv[0] == 0)) return (int)n;
        int64_t step = pv ? pv[0] : 1, first;
        if (sh_slice_axis(len, sv[0], ev[0], step, &first) != n) return (int)n;
        for (int k = 0; k < n; k++) {
            val[k] = tv[first + k * step];
            kind[k] = tk[first + k * step];
        }
        return (int)n;
    }
    return (int)n;
}

/* Dims named by a traced shape vector (input i): known numbers (must be
 * >= 0), symbolic dims, or anonymous. *n = -1 when the length is unknown. */
static mp_status sh_traced_dims(mp_ctx *c, int i, int64_t *od, int64_t *n) {
    int64_t tv[MP_MAX_RANK];
    uint8_t tk[MP_MAX_RANK];
    mp_value *v = mp_in(c, i);
    int budget = SH_TRACE_BUDGET;
    int len = v && v->rank == 1 ? sh_trace(c, i, tv, tk, SH_TRACE_DEPTH, &budget) : -1;
    *n = len;
    for (int k = 0; k < len; k++) {
        if (tk[k] == SH_T_NUM && tv[k] < 0)
            return mp_fail(c, "shape entry %d is negative (%lld)", k, (long long)tv[k]);
        od[k] = tk[k] == SH_T_UNKNOWN ? MP_DIM_ANON : tv[k];
    }
    return MP_OK;
}

/* ------------------------------------------------------------------ */
/* Unsqueeze, Squeeze, Reshape, Flatten                                */
/* ------------------------------------------------------------------ */

/* Unsqueeze (1: axes attr; 13: axes input; negative axes since 11): output
 * rank r + len(axes); axes are positions in the output and get dim 1, the
 * input dims fill the rest in order (symbols kept). Contents pass through.
 * Cost 0. */
static mp_status unsqueeze_core(mp_ctx *c, mp_value *x, const int64_t *ax, int64_t n) {
    if (x->rank < 0) return sh_unknown(c, x);
    int64_t orank = x->rank + n;
    if (orank > MP_MAX_RANK) return mp_fail(c, "output rank %lld exceeds the limit", (long long)orank);
    int axn[MP_MAX_RANK];
    mp_status st = sh_axes(c, ax, n, (int)orank, axn, "axes");
    if (st) return st;
    bool ins[MP_MAX_RANK] = {false};
    for (int64_t k = 0; k < n; k++) ins[axn[k]] = true;
    int64_t od[MP_MAX_RANK];
    int j = 0;
    for (int a = 0; a < orank; a++) od[a] = ins[a] ? 1 : x->dims[j++];
    st = mp_set_out(c, 0, x->dtype, (int)orank, od);
    if (st) return st;
    return sh_pass(c, 0, 0);
}

static mp_status unsqueeze_infer_v1(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    const int64_t *ax;
    int n = mp_attr_ints(c->n, "axes", &ax);
    if (n < 0) return mp_fail(c, "attribute 'axes' is required");
    return unsqueeze_core(c, x, ax, n);
}

static mp_status unsqueeze_infer_v13(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    if (!mp_in(c, 1)) return mp_fail(c, "input axes is required");
    const int64_t *ax;
    int64_t n;
    if (sh_ints(c, 1, &ax, &n)) return unsqueeze_core(c, x, ax, n);
    int64_t k = sh_len1(c, 1);
    if (x->rank >= 0 && k >= 0) return sh_anon(c, 0, x->dtype, x->rank + k);
    return sh_unknown(c, x);
}

/* Squeeze (1: axes attr; 13: axes input; negative axes since 11): removes
 * the listed axes, each of which must be 1 (a known other size is an
 * error; an unknown one is taken as 1). Without axes, removes every dim
 * equal to 1; an unknown dim then makes the rank unknown. Contents pass
 * through. Cost 0. */
static mp_status squeeze_core(mp_ctx *c, mp_value *x, const int64_t *ax, int64_t n) {
    if (x->rank < 0) return sh_unknown(c, x);
    int r = x->rank;
    bool rm[MP_MAX_RANK] = {false};
    if (ax) {
        int axn[MP_MAX_RANK];
        mp_status st = sh_axes(c, ax, n, r, axn, "axes");
        if (st) return st;
        for (int64_t k = 0; k < n; k++) {
            int64_t d = x->dims[axn[k]];
            if (d >= 0 && d != 1)
                return mp_fail(c, "cannot squeeze axis %d of size %lld", axn[k], (long long)d);
            rm[axn[k]] = true;
        }
    } else {
        for (int a = 0; a < r; a++) {
            if (x->dims[a] < 0) return sh_unknown(c, x);
            rm[a] = x->dims[a] == 1;
        }
    }
    int64_t od[MP_MAX_RANK];
    int j = 0;
    for (int a = 0; a < r; a++)
        if (!rm[a]) od[j++] = x->dims[a];
    mp_status st = mp_set_out(c, 0, x->dtype, j, od);
    if (st) return st;
    return sh_pass(c, 0, 0);
}

static mp_status squeeze_infer_v1(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    const int64_t *ax = NULL;
    int n = mp_attr_ints(c->n, "axes", &ax);
    return squeeze_core(c, x, n >= 0 ? ax : NULL, n);
}

static mp_status squeeze_infer_v13(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    if (!mp_in(c, 1)) return squeeze_core(c, x, NULL, 0);
    const int64_t *ax;
    int64_t n;
    if (sh_ints(c, 1, &ax, &n)) return squeeze_core(c, x, ax, n);
    int64_t k = sh_len1(c, 1);
    if (x->rank >= 0 && k >= 0 && k <= x->rank) return sh_anon(c, 0, x->dtype, x->rank - k);
    return sh_unknown(c, x);
}

/* Reshape (1: shape attr; 5: shape input; 14: allowzero). Each entry of
 * the target shape: a positive value is the dim; 0 copies the input's dim
 * at that position (symbol kept), or is a real 0 with allowzero=1; -1 (at
 * most one) is inferred so the element count is unchanged. Inference and
 * the count check cancel symbolic dims present on both sides: [b, s, 768]
 * -> [0, 0, 12, -1] gives [b, s, 12, 64], and [b, 768] -> [-1, 768] gives
 * [b, 768]. Known counts that differ are an error. Unknown target contents
 * with a known target length k give rank k, each dim traced (a symbolic
 * dim from Shape -> Gather -> Unsqueeze -> Concat) or anonymous. Contents
 * pass through. Cost 0. */
static mp_status reshape_core(mp_ctx *c, mp_value *x, const int64_t *s, const uint8_t *kind,
                              int64_t n, bool allowzero) {
    if (n > MP_MAX_RANK) return mp_fail(c, "target rank %lld exceeds the limit", (long long)n);
    int64_t od[MP_MAX_RANK];
    int infer = -1;
    bool has_zero = false;
    for (int k = 0; k < n; k++) {
        int64_t v = s[k];
        if (kind && kind[k] != SH_T_NUM) {
            /* traced: a symbolic dim, or unknown (which might be 0 or -1) */
            od[k] = kind[k] == SH_T_DIM ? v : MP_DIM_ANON;
        } else if (v == -1) {
            if (infer >= 0) return mp_fail(c, "shape has more than one -1");
            infer = k;
            od[k] = MP_DIM_ANON;
        } else if (v == 0 && !allowzero) {
            if (x->rank >= 0 && k >= x->rank)
                return mp_fail(c, "shape entry %d is 0 but input '%s' has rank %d", k, x->name,
                               x->rank);
            od[k] = x->rank >= 0 ? x->dims[k] : MP_DIM_ANON;
        } else if (v < -1) {
            return mp_fail(c, "shape entry %d is %lld", k, (long long)v);
        } else {
            has_zero |= v == 0;
            od[k] = v;
        }
    }
    if (allowzero && has_zero && infer >= 0)
        return mp_fail(c, "shape has both 0 and -1 with allowzero=1");
    if (x->rank >= 0) {
        /* known products and lists of unknown dims on each side */
        int64_t in_k = 1, out_k = 1, in_u[MP_MAX_RANK], out_u[MP_MAX_RANK];
        int n_in_u = 0, n_out_u = 0;
        for (int a = 0; a < x->rank; a++) {
            if (x->dims[a] < 0)
                in_u[n_in_u++] = x->dims[a];
            else if (__builtin_mul_overflow(in_k, x->dims[a], &in_k))
                return mp_fail(c, "element count of '%s' overflows int64", x->name);
        }
        for (int k = 0; k < n; k++) {
            if (k == infer) continue;
            if (od[k] < 0)
                out_u[n_out_u++] = od[k];
            else if (__builtin_mul_overflow(out_k, od[k], &out_k))
                return mp_fail(c, "target element count overflows int64");
        }
        bool cancelled = false;
        for (int i = 0; i < n_in_u; i++) {
            if (in_u[i] == MP_DIM_ANON) continue;
            for (int j = 0; j < n_out_u; j++)
                if (out_u[j] == in_u[i]) {
                    in_u[i] = in_u[--n_in_u];
                    out_u[j] = out_u[--n_out_u];
                    i--;
                    cancelled = true;
                    break;
                }
        }
        if (infer >= 0) {
            if (n_in_u == 0 && n_out_u == 0) {
                if (out_k == 0) {
                    if (in_k != 0) return mp_fail(c, "cannot infer -1: other dims multiply to 0");
                } else if (in_k % out_k != 0) {
                    return mp_fail(c, "cannot reshape %lld elements of '%s' with -1 and the rest "
                                      "multiplying to %lld", (long long)in_k, x->name,
                                   (long long)out_k);
                } else {
                    od[infer] = in_k / out_k;
                }
            } else if (n_in_u == 1 && n_out_u == 0 && in_k == out_k) {
                od[infer] = in_u[0];
            }
        } else if (n_in_u == 0 && n_out_u == 0 && in_k != out_k && !cancelled) {
            return mp_fail(c, "cannot reshape '%s' of %lld elements into %lld elements", x->name,
                           (long long)in_k, (long long)out_k);
        }
    }
    mp_status st = mp_set_out(c, 0, x->dtype, (int)n, od);
    if (st) return st;
    return sh_pass(c, 0, 0);
}

static mp_status reshape_infer_v1(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    const int64_t *s;
    int n = mp_attr_ints(c->n, "shape", &s);
    if (n < 0) return mp_fail(c, "attribute 'shape' is required");
    return reshape_core(c, x, s, NULL, n, false);
}

static mp_status reshape_infer_v5(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    if (!mp_in(c, 1)) return mp_fail(c, "input shape is required");
    const int64_t *s;
    int64_t n;
    bool allowzero = mp_attr_i(c->n, "allowzero", 0) != 0;
    if (sh_ints(c, 1, &s, &n)) return reshape_core(c, x, s, NULL, n, allowzero);
    int64_t tv[MP_MAX_RANK];
    uint8_t tk[MP_MAX_RANK];
    int budget = SH_TRACE_BUDGET;
    int len = sh_trace(c, 1, tv, tk, SH_TRACE_DEPTH, &budget);
    if (len < 0 || mp_in(c, 1)->rank != 1) return sh_unknown(c, x);
    return reshape_core(c, x, tv, tk, len, allowzero);
}

/* Flatten (1; negative axis since 11): axis in [-r, r]; output 2-D
 * [prod(d[:axis]), prod(d[axis:])] by mp_dim_mul: an empty product is 1, a
 * symbol times dims of 1 is that symbol, another product with an unknown
 * dim is anonymous. Contents pass through. Cost 0. */
static int64_t sh_flat_dim(const int64_t *d, int from, int to, bool *ovf) {
    if (mp_dims_product(d + from, to - from) == -2) *ovf = true;
    int64_t p = 1;
    for (int a = from; a < to; a++) p = mp_dim_mul(p, d[a]);
    return p;
}

static mp_status flatten_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    int64_t axis = mp_attr_i(c->n, "axis", 1);
    if (x->rank < 0) return sh_anon(c, 0, x->dtype, 2);
    int r = x->rank;
    if (axis < -r || axis > r) return mp_fail(c, "axis %lld is out of range for rank %d",
                                              (long long)axis, r);
    int a = (int)(axis < 0 ? axis + r : axis);
    bool ovf = false;
    int64_t od[2] = {sh_flat_dim(x->dims, 0, a, &ovf), sh_flat_dim(x->dims, a, r, &ovf)};
    if (ovf) return mp_fail(c, "element count of '%s' overflows int64", x->name);
    st = mp_set_out(c, 0, x->dtype, 2, od);
    if (st) return st;
    return sh_pass(c, 0, 0);
}

/* ------------------------------------------------------------------ */
/* Range, ConstantOfShape, Constant, EyeLike                           */
/* ------------------------------------------------------------------ */

/* Range (11): scalars start, limit, delta (delta != 0): output 1-D
 * [max(ceil((limit - start) / delta), 0)] of start's dtype, contents
 * start + k * delta (ints exact; floats in double). Unknown inputs give
 * [?]. Cost 0 (generated values, no arithmetic on data). */
static mp_status range_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *v[3];
    for (int i = 0; i < 3; i++) {
        v[i] = sh_in(c, i, &st);
        if (!v[i]) return st;
        if (v[i]->rank > 1 || (v[i]->rank == 1 && v[i]->dims[0] >= 0 && v[i]->dims[0] != 1))
            return mp_fail(c, "input %d must be a scalar", i);
    }
    int dt = v[0]->dtype;
    int64_t anon = MP_DIM_ANON;
    if (mp_dtype_is_float(dt)) {
        const double *f[3];
        int64_t n[3];
        for (int i = 0; i < 3; i++)
            if (!mp_floats(c, i, &f[i], &n[i]) || n[i] != 1) return mp_set_out(c, 0, dt, 1, &anon);
        double s = f[0][0], l = f[1][0], d = f[2][0];
        if (!isfinite(s) || !isfinite(l) || !isfinite(d)) return mp_fail(c, "non-finite range bounds");
        if (d == 0) return mp_fail(c, "delta is 0");
        double cnt = ceil((l - s) / d);
        if (cnt < 0) cnt = 0;
        if (!(cnt < 9.0e18)) return mp_fail(c, "range of %g elements is too large", cnt);
        int64_t len = (int64_t)cnt;
        st = mp_set_out(c, 0, dt, 1, &len);
        if (st || len > MP_KNOWN_MAX) return st;
        double out[MP_KNOWN_MAX];
        for (int64_t k = 0; k < len; k++) out[k] = s + (double)k * d;
        return mp_set_floats(c, 0, out, len);
    }
    const int64_t *iv[3];
    int64_t n[3];
    for (int i = 0; i < 3; i++)
        if (!mp_ints(c, i, &iv[i], &n[i]) || n[i] != 1) return mp_set_out(c, 0, dt, 1, &anon);
    int64_t s = iv[0][0], l = iv[1][0], d = iv[2][0], diff;
    if (d == 0) return mp_fail(c, "delta is 0");
    if (__builtin_sub_overflow(l, s, &diff)) return mp_fail(c, "range bounds overflow int64");
    int64_t q = diff / d, rem = diff % d;
    int64_t len = q + ((rem != 0 && ((rem > 0) == (d > 0))) ? 1 : 0);
    if (len < 0) len = 0;
    st = mp_set_out(c, 0, dt, 1, &len);
    if (st || len > MP_KNOWN_MAX) return st;
    int64_t out[MP_KNOWN_MAX];
    for (int64_t k = 0; k < len; k++) out[k] = s + k * d;
    return mp_set_ints(c, 0, out, len);
}

/* Decode a one-element tensor attribute (value of ConstantOfShape):
 * false when its data cannot be read (weightless), error cleared. */
static bool sh_read_scalar(mp_ctx *c, const mp_tensor *t, double *f, int64_t *i) {
    int64_t *iv = NULL;
    double *fv = NULL;
    if (t->numel != 1 || mp_tensor_read(c->m, t, &iv, &fv) != MP_OK) {
        mp_error_clear();
        return false;
    }
    if (fv) {
        *f = fv[0];
        *i = (fv[0] > -9.2e18 && fv[0] < 9.2e18) ? (int64_t)fv[0] : 0;
    } else if (iv) {
        *i = iv[0];
        *f = (double)iv[0];
    } else {
        return false;
    }
    return true;
}

/* ConstantOfShape (9): input 0 is a 1-D int64 shape; output has that shape
 * (every entry must be >= 0) and the dtype of the `value` tensor attribute
 * (one element; default fp32 0). Unknown shape contents with known length k
 * give rank k, dims traced (symbolic) where possible, else anonymous. Contents (the value repeated) when small.
 * Cost 0. */
static mp_status constant_of_shape_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *s = sh_in(c, 0, &st);
    if (!s) return st;
    const mp_attr *va = mp_node_attr(c->n, "value");
    int dt = MP_DT_FLOAT;
    if (va) {
        if (va->type != MP_ATTR_TENSOR || !va->t) return mp_fail(c, "attribute 'value' must be a tensor");
        if (va->t->numel != 1) return mp_fail(c, "attribute 'value' must hold one element, not %lld",
                                              (long long)va->t->numel);
        dt = va->t->dtype;
    }
    const int64_t *sv;
    int64_t n;
    if (s->rank >= 0 && s->rank != 1) return mp_fail(c, "shape input must be 1-D, not rank %d", s->rank);
    if (!sh_ints(c, 0, &sv, &n)) {
        int64_t od[MP_MAX_RANK];
        st = sh_traced_dims(c, 0, od, &n);
        if (st) return st;
        return mp_set_out(c, 0, dt, (int)n, n >= 0 ? od : NULL);
    }
    if (n > MP_MAX_RANK) return mp_fail(c, "output rank %lld exceeds the limit", (long long)n);
    for (int64_t k = 0; k < n; k++)
        if (sv[k] < 0) return mp_fail(c, "shape entry %lld is negative (%lld)", (long long)k,
                                      (long long)sv[k]);
    st = mp_set_out(c, 0, dt, (int)n, sv);
    if (st) return st;
    int64_t cnt = sh_small(sv, (int)n);
    if (cnt < 0) return MP_OK;
    double f = 0;
    int64_t iv = 0;
    if (va && !sh_read_scalar(c, va->t, &f, &iv)) return MP_OK;
    sh_data one = {NULL, NULL, 1};
    one.iv = mp_dtype_is_float(dt) ? NULL : &iv;
    one.fv = mp_dtype_is_float(dt) ? &f : NULL;
    sh_buf b;
    st = sh_buf_init(&b, dt, cnt);
    if (st) return st;
    for (int64_t k = 0; k < cnt; k++) sh_buf_put(&b, k, &one, 0);
    return sh_buf_emit(c, 0, &b, cnt);
}

/* Constant (1; value_* attributes since 12): the output is the attribute's
 * value. value: tensor dims and dtype, contents decoded when small (not
 * when weightless); value_float / value_int: fp32 / int64 scalar;
 * value_floats / value_ints: 1-D; value_string(s): string scalar / 1-D (no
 * contents); sparse_value: its dense dims when given. Cost 0. */
static mp_status constant_infer(mp_ctx *c) {
    const mp_node *n = c->n;
    for (int i = 0; i < n->n_attr; i++) {
        const mp_attr *a = &n->attr[i];
        const char *nm = a->name;
        if (mp_streq(nm, "value") || mp_streq(nm, "sparse_value")) {
            const mp_tensor *t = a->t;
            if ((a->type != MP_ATTR_TENSOR && a->type != MP_ATTR_SPARSE_TENSOR) || !t) {
                if (a->type == MP_ATTR_SPARSE_TENSOR) return mp_set_out_dtype(c, 0, MP_DT_UNDEFINED);
                return mp_fail(c, "attribute '%s' holds no tensor", nm);
            }
            if (t->rank < 0 || t->rank > MP_MAX_RANK)
                return mp_fail(c, "constant tensor of rank %d", t->rank);
            for (int d = 0; d < t->rank; d++)
                if (t->dims[d] < 0) return mp_fail(c, "constant tensor has a negative dim");
            mp_status st = mp_set_out_keep(c, 0, t->dtype, t->rank, t->dims);
            if (st || a->type != MP_ATTR_TENSOR || t->dtype == MP_DT_STRING) return st;
            int64_t cnt = sh_small(t->dims, t->rank);
            if (cnt < 0) return MP_OK;
            int64_t *iv = NULL;
            double *fv = NULL;
            if (mp_tensor_read(c->m, t, &iv, &fv) != MP_OK) {
                mp_error_clear();
                return MP_OK;
            }
            if (fv) return mp_keep_floats(c, 0, fv, cnt);
            if (iv) return mp_keep_ints(c, 0, iv, cnt);
            return MP_OK;
        }
        if (strcmp(nm, "value_float") == 0) {
            mp_status st = mp_set_out(c, 0, MP_DT_FLOAT, 0, NULL);
            if (st) return st;
            double f = a->type == MP_ATTR_INT ? (double)a->i : a->f;
            return mp_set_floats(c, 0, &f, 1);
        }
        if (strcmp(nm, "value_int") == 0) {
            mp_status st = mp_set_out(c, 0, MP_DT_INT64, 0, NULL);
            if (st) return st;
            return mp_set_ints(c, 0, &a->i, 1);
        }
        if (strcmp(nm, "value_floats") == 0 || strcmp(nm, "value_ints") == 0) {
            bool fl = nm[6] == 'f';
            if (a->n < 0) return mp_fail(c, "attribute '%s' is malformed", nm);
            int64_t len = a->n;
            mp_status st = mp_set_out(c, 0, fl ? MP_DT_FLOAT : MP_DT_INT64, 1, &len);
            if (st) return st;
            if (fl) return a->floats || !len ? mp_set_floats(c, 0, a->floats, len) : MP_OK;
            return a->ints || !len ? mp_set_ints(c, 0, a->ints, len) : MP_OK;
        }
        if (strcmp(nm, "value_string") == 0) return mp_set_out(c, 0, MP_DT_STRING, 0, NULL);
        if (strcmp(nm, "value_strings") == 0) {
            int64_t len = a->n;
            return mp_set_out(c, 0, MP_DT_STRING, 1, &len);
        }
    }
    return mp_fail(c, "no value attribute");
}

/* EyeLike (9): a 2-D output shaped like the input, dtype from the `dtype`
 * attribute or the input's. Cost 0. */
static mp_status eye_like_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    if (x->rank >= 0 && x->rank != 2) return mp_fail(c, "input must be 2-D, not rank %d", x->rank);
    int64_t dt = mp_attr_i(c->n, "dtype", x->dtype);
    if (dt < 0 || dt >= MP_DT_COUNT) return mp_fail(c, "unknown dtype %lld", (long long)dt);
    return mp_set_out(c, 0, (int)dt, x->rank, x->dims);
}

/* ------------------------------------------------------------------ */
/* Expand, Tile, Pad                                                   */
/* ------------------------------------------------------------------ */

/* Expand (8): output = numpy broadcast of the input's shape and the shape
 * given by input 1's contents (either side may be 1). Unknown contents with
 * known length k: rank max(r, k), an input dim > 1 survives, others are
 * anonymous (traced target entries may name symbolic dims). Contents
 * broadcast when known. Cost 0. */
static mp_status expand_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    if (!mp_in(c, 1)) return mp_fail(c, "input shape is required");
    const int64_t *sv;
    int64_t n;
    int64_t od[MP_MAX_RANK];
    if (!sh_ints(c, 1, &sv, &n)) {
        /* traced target: an input dim > 1 survives an unknown entry */
        int64_t td[MP_MAX_RANK];
        st = sh_traced_dims(c, 1, td, &n);
        if (st) return st;
        if (x->rank < 0 || n < 0) return sh_unknown(c, x);
        mp_value tgt = {0};
        tgt.name = mp_in(c, 1)->name;
        tgt.rank = (int)n;
        tgt.dims = td;
        int r;
        st = mp_broadcast(c, x, &tgt, &r, od);
        if (st) return st;
        return mp_set_out(c, 0, x->dtype, r, od);
    }
    if (n > MP_MAX_RANK) return mp_fail(c, "target rank %lld exceeds the limit", (long long)n);
    for (int64_t k = 0; k < n; k++)
        if (sv[k] < 0) return mp_fail(c, "shape entry %lld is negative (%lld)", (long long)k,
                                      (long long)sv[k]);
    mp_value tgt = {0};
    tgt.name = mp_in(c, 1)->name;
    tgt.rank = (int)n;
    tgt.dims = (int64_t *)sv;
    int r;
    st = mp_broadcast(c, x, &tgt, &r, od);
    if (st) return st;
    st = mp_set_out(c, 0, x->dtype, r, od);
    if (st || r < 0) return st;
    sh_data s;
    if (sh_small(od, r) < 0 || !sh_data_get(c, 0, &s)) return MP_OK;
    int64_t xs[MP_MAX_RANK], coef[MP_MAX_RANK];
    sh_strides(x->dims, x->rank, xs);
    for (int a = 0; a < r; a++) {
        int ia = a - (r - x->rank);
        coef[a] = (ia >= 0 && x->dims[ia] != 1) ? xs[ia] : 0;
    }
    return sh_emit_affine(c, 0, &s, r, od, 0, coef);
}

/* Tile (6): repeats (1-D, one per axis, >= 0): out dim = dim * repeat (an
 * unknown dim survives a repeat of 1; anything else unknown is anonymous).
 * Tile (1): inputs tiles and axis (scalars) multiply one dim. Contents
 * tiled when known. Cost 0. */
static mp_status tile_infer_v6(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    if (!mp_in(c, 1)) return mp_fail(c, "input repeats is required");
    if (x->rank < 0) return sh_unknown(c, x);
    int r = x->rank;
    const int64_t *rep;
    int64_t n;
    if (!sh_ints(c, 1, &rep, &n)) return sh_anon(c, 0, x->dtype, r);
    if (n != r) return mp_fail(c, "repeats has %lld entries for rank %d", (long long)n, r);
    int64_t od[MP_MAX_RANK];
    for (int a = 0; a < r; a++) {
        if (rep[a] < 0) return mp_fail(c, "repeat %lld on axis %d", (long long)rep[a], a);
        od[a] = mp_dim_mul(x->dims[a], rep[a]);
    }
    st = mp_set_out(c, 0, x->dtype, r, od);
    if (st) return st;
    sh_data s;
    int64_t cnt = sh_small(od, r);
    if (cnt < 0 || !sh_data_get(c, 0, &s)) return MP_OK;
    int64_t xs[MP_MAX_RANK], pos[MP_MAX_RANK] = {0};
    sh_strides(x->dims, r, xs);
    sh_buf b;
    st = sh_buf_init(&b, x->dtype, cnt);
    if (st) return st;
    for (int64_t k = 0; k < cnt; k++) {
        int64_t src = 0;
        for (int a = 0; a < r; a++) src += (pos[a] % x->dims[a]) * xs[a];
        sh_buf_put(&b, k, &s, src);
        for (int a = r - 1; a >= 0; a--) {
            if (++pos[a] < od[a]) break;
            pos[a] = 0;
        }
    }
    return sh_buf_emit(c, 0, &b, cnt);
}

static mp_status tile_infer_v1(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    if (x->rank < 0) return sh_unknown(c, x);
    const int64_t *t, *ax;
    int64_t nt, na;
    if (!sh_ints(c, 1, &t, &nt) || !sh_ints(c, 2, &ax, &na) || nt != 1 || na != 1)
        return sh_anon(c, 0, x->dtype, x->rank);
    int a = mp_axis(ax[0], x->rank);
    if (a < 0 || t[0] < 0) return mp_fail(c, "invalid tiles %lld or axis %lld", (long long)t[0],
                                          (long long)ax[0]);
    int64_t od[MP_MAX_RANK];
    sh_copy_dims(od, x->dims, x->rank);
    if (od[a] >= 0) {
        if (__builtin_mul_overflow(od[a], t[0], &od[a])) return mp_fail(c, "tiled dim overflows");
    } else if (t[0] != 1) {
        od[a] = MP_DIM_ANON;
    }
    return mp_set_out(c, 0, x->dtype, x->rank, od);
}

/* Pad (1: paddings attr; 2: pads attr; 11: pads input; 18: axes input).
 * pads = [b_1..b_k, e_1..e_k] for the padded axes (all axes when none
 * given): out dim = dim + b + e (negative pads crop; a negative result is an
 * error). An unknown dim survives b + e == 0. Unknown pads make the padded
 * axes anonymous. The mode (constant/reflect/edge/wrap) does not change the
 * shape. Cost 0 (copy and fill). */
static mp_status pad_core(mp_ctx *c, mp_value *x, const int64_t *pads, int64_t np,
                          const int64_t *ax, int64_t nax) {
    if (x->rank < 0) return sh_unknown(c, x);
    int r = x->rank;
    int axn[MP_MAX_RANK];
    if (ax) {
        mp_status st = sh_axes(c, ax, nax, r, axn, "axes");
        if (st) return st;
    } else {
        nax = r;
        for (int a = 0; a < r; a++) axn[a] = a;
    }
    int64_t od[MP_MAX_RANK];
    sh_copy_dims(od, x->dims, r);
    if (!pads) {
        for (int64_t k = 0; k < nax; k++) od[axn[k]] = MP_DIM_ANON;
        return mp_set_out(c, 0, x->dtype, r, od);
    }
    if (np != 2 * nax)
        return mp_fail(c, "pads has %lld entries for %lld axes", (long long)np, (long long)nax);
    for (int64_t k = 0; k < nax; k++) {
        int a = axn[k];
        int64_t be, d = x->dims[a];
        if (__builtin_add_overflow(pads[k], pads[k + nax], &be))
            return mp_fail(c, "pads overflow int64");
        if (d < 0) {
            od[a] = be == 0 ? d : MP_DIM_ANON;
            continue;
        }
        if (__builtin_add_overflow(d, be, &od[a])) return mp_fail(c, "padded dim overflows int64");
        if (od[a] < 0)
            return mp_fail(c, "pads %lld, %lld make axis %d of size %lld negative",
                           (long long)pads[k], (long long)pads[k + nax], a, (long long)d);
    }
    return mp_set_out(c, 0, x->dtype, r, od);
}

static mp_status pad_infer_attr(mp_ctx *c, const char *name) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    const int64_t *p;
    int n = mp_attr_ints(c->n, name, &p);
    if (n < 0) return mp_fail(c, "attribute '%s' is required", name);
    return pad_core(c, x, p, n, NULL, 0);
}

static mp_status pad_infer_v1(mp_ctx *c) { return pad_infer_attr(c, "paddings"); }
static mp_status pad_infer_v2(mp_ctx *c) { return pad_infer_attr(c, "pads"); }

static mp_status pad_infer_v11(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    if (!mp_in(c, 1)) return mp_fail(c, "input pads is required");
    const int64_t *p = NULL, *ax = NULL;
    int64_t np = 0, na = 0;
    bool has_ax = mp_in(c, 3) != NULL;
    bool kp = sh_ints(c, 1, &p, &np);
    bool ka = has_ax && sh_ints(c, 3, &ax, &na);
    if (has_ax && !ka) return x->rank < 0 ? sh_unknown(c, x) : sh_anon(c, 0, x->dtype, x->rank);
    return pad_core(c, x, kp ? p : NULL, np, ka ? ax : NULL, na);
}

/* ------------------------------------------------------------------ */
/* Cast, CastLike, Identity                                            */
/* ------------------------------------------------------------------ */

/* Integer value v converted to integer dtype dt (wrapping like C casts;
 * bool is v != 0). */
static int64_t sh_narrow(int dt, int64_t v) {
    uint64_t u = (uint64_t)v;
    switch (dt) {
    case MP_DT_BOOL: return v != 0;
    case MP_DT_INT8: return (int8_t)(uint8_t)(u & 0xff);
    case MP_DT_UINT8: return (int64_t)(u & 0xff);
    case MP_DT_INT16: return (int16_t)(uint16_t)(u & 0xffff);
    case MP_DT_UINT16: return (int64_t)(u & 0xffff);
    case MP_DT_INT32: return (int32_t)(uint32_t)(u & 0xffffffffu);
    case MP_DT_UINT32: return (int64_t)(u & 0xffffffffu);
    case MP_DT_INT4: return (int64_t)((u & 0xf) ^ 0x8) - 8;
    case MP_DT_UINT4: return (int64_t)(u & 0xf);
    default: return v;
    }
}

/* Cast (1: `to` a type name; 6: `to` a dtype number) / CastLike (15; dtype of input 1): same shape, new
 * dtype. Contents converted: int -> float exactly (in double), float ->
 * int truncated toward zero then wrapped to the target width (a NaN or
 * out-of-range float leaves contents unknown), anything -> bool is != 0.
 * Cost 0. */
static mp_status cast_core(mp_ctx *c, mp_value *x, int to) {
    mp_status st = mp_set_out(c, 0, to, x->rank, x->dims);
    if (st || to == MP_DT_STRING || x->dtype == MP_DT_STRING) return st;
    sh_data s;
    if (!sh_data_get(c, 0, &s) || mp_value_numel(mp_out(c, 0) ? mp_out(c, 0) : x) != s.n)
        return MP_OK;
    sh_buf b;
    st = sh_buf_init(&b, to, s.n);
    if (st) return st;
    for (int64_t k = 0; k < s.n; k++) {
        if (b.is_float) {
            b.fv[k] = sh_get_f(&s, k);
        } else if (s.iv) {
            b.iv[k] = sh_narrow(to, s.iv[k]);
        } else {
            double f = s.fv[k];
            if (to == MP_DT_BOOL) {
                b.iv[k] = f != 0;
            } else if (f > -9.2e18 && f < 9.2e18) {
                b.iv[k] = sh_narrow(to, (int64_t)f);
            } else {
                sh_buf_free(&b);
                return MP_OK;
            }
        }
    }
    return sh_buf_emit(c, 0, &b, s.n);
}

/* Cast (1-5) names the target type as a string ("FLOAT", "INT64", ...):
 * the TensorProto names, which the dtype table's identifiers spell. */
static int sh_dtype_by_name(const char *s) {
    static const char *const names[] = {
#define SH__DTNAME(id, name, bits) #id,
        MP_DTYPE_LIST(SH__DTNAME)
#undef SH__DTNAME
    };
    for (int i = 1; i < (int)MP_ARRAY_LEN(names); i++)
        if (strcasecmp(s, names[i]) == 0) return i;
    return -1;
}

static mp_status cast_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    const mp_attr *ta = mp_node_attr(c->n, "to");
    if (!ta) return mp_fail(c, "attribute 'to' is required");
    int64_t to = ta->type == MP_ATTR_STRING ? sh_dtype_by_name(ta->s ? ta->s : "")
                 : ta->type == MP_ATTR_INT  ? ta->i
                                            : -1;
    if (to <= 0 || to >= MP_DT_COUNT) return mp_fail(c, "unknown target dtype %lld", (long long)to);
    return cast_core(c, x, (int)to);
}

static mp_status cast_like_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    mp_value *like = sh_in(c, 1, &st);
    if (!like) return st;
    return cast_core(c, x, like->dtype);
}

/* Identity (1): the input unchanged, contents passed through. Cost 0. */
static mp_status identity_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    st = mp_set_out_like(c, 0, x);
    if (st) return st;
    return sh_pass(c, 0, 0);
}

/* ------------------------------------------------------------------ */
/* Transpose, Split                                                    */
/* ------------------------------------------------------------------ */

/* Transpose (1): out dim i = in dim perm[i] (symbols kept); perm defaults
 * to the reversed axes and must be a permutation of 0..r-1. Contents
 * permuted when known. Cost 0. */
static mp_status transpose_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    const int64_t *perm;
    int np = mp_attr_ints(c->n, "perm", &perm);
    if (x->rank < 0) {
        if (np >= 0) return sh_anon(c, 0, x->dtype, np);
        return sh_unknown(c, x);
    }
    int r = x->rank;
    int p[MP_MAX_RANK];
    if (np >= 0) {
        if (np != r) return mp_fail(c, "perm has %d entries for rank %d", np, r);
        bool seen[MP_MAX_RANK] = {false};
        for (int i = 0; i < r; i++) {
            if (perm[i] < 0 || perm[i] >= r || seen[perm[i]])
                return mp_fail(c, "perm is not a permutation of 0..%d", r - 1);
            seen[perm[i]] = true;
            p[i] = (int)perm[i];
        }
    } else {
        for (int i = 0; i < r; i++) p[i] = r - 1 - i;
    }
    int64_t od[MP_MAX_RANK];
    for (int i = 0; i < r; i++) od[i] = x->dims[p[i]];
    st = mp_set_out(c, 0, x->dtype, r, od);
    if (st) return st;
    sh_data s;
    if (sh_small(od, r) < 0 || !sh_data_get(c, 0, &s)) return MP_OK;
    int64_t xs[MP_MAX_RANK], coef[MP_MAX_RANK];
    sh_strides(x->dims, r, xs);
    for (int i = 0; i < r; i++) coef[i] = xs[p[i]];
    return sh_emit_affine(c, 0, &s, r, od, 0, coef);
}

/* Split (1: split attr or input 1; 2: split attr; 13: split input; 18:
 * split input or num_outputs attr). Output i has the input's shape with
 * the axis dim replaced by its part: the `split` sizes (one per output,
 * >= 0, summing to the dim); else with num_outputs, ceil(d / n) each and
 * the remainder last; else d / n_outputs (must divide). An unknown dim
 * gives anonymous parts (a single output keeps the dim). Contents split
 * when known. Cost 0. */
static mp_status split_core(mp_ctx *c, const int64_t *sizes, int64_t ns, bool use_num) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    int no = c->n->n_out;
    if (no < 1) return mp_fail(c, "no outputs");
    if (x->rank < 0) {
        for (int i = 0; i < no; i++)
            if ((st = mp_set_out(c, i, x->dtype, -1, NULL))) return st;
        return MP_OK;
    }
    int r = x->rank;
    if (r == 0) return mp_fail(c, "cannot split a scalar");
    int a = mp_axis(mp_attr_i(c->n, "axis", 0), r);
    if (a < 0) return mp_fail(c, "axis is out of range for rank %d", r);
    int64_t d = x->dims[a];
    int64_t *sz = malloc(sizeof *sz * (size_t)no);
    if (!sz) return mp_error(MP_ERR_NOMEM, "out of memory");
    if (sizes) {
        int64_t sum = 0;
        if (ns != no) {
            free(sz);
            return mp_fail(c, "split has %lld entries for %d outputs", (long long)ns, no);
        }
        for (int i = 0; i < no; i++) {
            if (sizes[i] < 0 || __builtin_add_overflow(sum, sizes[i], &sum)) {
                free(sz);
                return mp_fail(c, "split entry %d is invalid (%lld)", i, (long long)sizes[i]);
            }
            sz[i] = sizes[i];
        }
        if (d >= 0 && sum != d) {
            free(sz);
            return mp_fail(c, "split sizes sum to %lld but axis %d has size %lld",
                           (long long)sum, a, (long long)d);
        }
    } else if (d < 0) {
        for (int i = 0; i < no; i++) sz[i] = no == 1 ? d : MP_DIM_ANON;
    } else if (use_num) {
        int64_t num = mp_attr_i(c->n, "num_outputs", no);
        if (num != no) {
            free(sz);
            return mp_fail(c, "num_outputs is %lld but the node has %d outputs", (long long)num, no);
        }
        int64_t chunk = d / no + (d % no != 0);
        int64_t last = d - chunk * (no - 1);
        if (last < 0) {
            free(sz);
            return mp_fail(c, "cannot split size %lld into %d parts of %lld", (long long)d, no,
                           (long long)chunk);
        }
        for (int i = 0; i < no; i++) sz[i] = i == no - 1 ? last : chunk;
    } else {
        if (d % no != 0) {
            free(sz);
            return mp_fail(c, "axis %d of size %lld does not split evenly into %d outputs", a,
                           (long long)d, no);
        }
        for (int i = 0; i < no; i++) sz[i] = d / no;
    }
    sh_data s;
    bool known = sh_data_get(c, 0, &s);
    int64_t xs[MP_MAX_RANK], coef[MP_MAX_RANK], od[MP_MAX_RANK], off = 0;
    sh_strides(x->dims, r, xs);
    for (int i = 0; i < no && !st; i++) {
        sh_copy_dims(od, x->dims, r);
        od[a] = sz[i];
        st = mp_set_out(c, i, x->dtype, r, od);
        if (st || !known || sz[i] < 0) continue;
        for (int k = 0; k < r; k++) coef[k] = od[k] > 1 ? xs[k] : 0;
        st = sh_emit_affine(c, i, &s, r, od, off * xs[a], coef);
        off += sz[i];
    }
    free(sz);
    return st;
}

/* split sizes from input 1: true when absent (*have = false) or known. */
static bool split_input(mp_ctx *c, const int64_t **v, int64_t *n, bool *have) {
    *have = mp_in(c, 1) != NULL;
    return !*have || sh_ints(c, 1, v, n);
}

/* Outputs when the split sizes are unknown: the axis dim is anonymous. */
static mp_status split_unknown(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    int a = x->rank > 0 ? mp_axis(mp_attr_i(c->n, "axis", 0), x->rank) : -1;
    if (x->rank > 0 && a < 0) return mp_fail(c, "axis is out of range for rank %d", x->rank);
    for (int i = 0; i < c->n->n_out && !st; i++) {
        int64_t od[MP_MAX_RANK];
        sh_copy_dims(od, x->dims, x->rank);
        if (a >= 0) od[a] = MP_DIM_ANON;
        st = mp_set_out(c, i, x->dtype, x->rank, od);
    }
    return st;
}

static mp_status split_infer_v1(mp_ctx *c) {
    const int64_t *v;
    int n = mp_attr_ints(c->n, "split", &v);
    if (n >= 0) return split_core(c, v, n, false);
    int64_t n2 = 0;
    bool have;
    if (!split_input(c, &v, &n2, &have)) return split_unknown(c);
    return split_core(c, have ? v : NULL, n2, false);
}

static mp_status split_infer_v2(mp_ctx *c) {
    const int64_t *v;
    int n = mp_attr_ints(c->n, "split", &v);
    return split_core(c, n >= 0 ? v : NULL, n, false);
}

static mp_status split_infer_v13(mp_ctx *c) {
    const int64_t *v = NULL;
    int64_t n = 0;
    bool have;
    if (!split_input(c, &v, &n, &have)) return split_unknown(c);
    return split_core(c, have ? v : NULL, n, false);
}

static mp_status split_infer_v18(mp_ctx *c) {
    const int64_t *v = NULL;
    int64_t n = 0;
    bool have;
    bool has_num = mp_node_attr(c->n, "num_outputs") != NULL;
    if (has_num && mp_in(c, 1)) return mp_fail(c, "both split and num_outputs are given");
    if (!split_input(c, &v, &n, &have)) return split_unknown(c);
    return split_core(c, have ? v : NULL, n, has_num);
}

/* ------------------------------------------------------------------ */
/* Trilu, Scatter*, OneHot, CumSum                                     */
/* ------------------------------------------------------------------ */

/* Trilu (14): same shape, rank >= 2. Cost 0 (masking copy). Its contents
 * when the input and k are known and small: a causal mask built from a
 * constant (torch.triu/tril of ones or of -inf, a sliding window's band)
 * is then read by the pattern layer like a folded one. */
static mp_status trilu_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    if (x->rank >= 0 && x->rank < 2) return mp_fail(c, "input must have rank >= 2, not %d", x->rank);
    if ((st = mp_set_out_like(c, 0, x))) return st;
    sh_data d, kd;
    int64_t k = 0;
    if (mp_in(c, 1)) {
        if (!sh_data_get(c, 1, &kd) || kd.n != 1) return MP_OK;
        k = sh_get_i(&kd, 0);
    }
    if (x->rank < 2 || !sh_data_get(c, 0, &d)) return MP_OK;
    bool upper = mp_attr_i(c->n, "upper", 1) != 0;
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
    if (rows <= 0 || cols <= 0 || d.n % (rows * cols)) return MP_OK;
    sh_buf b;
    if ((st = sh_buf_init(&b, x->dtype, d.n))) return st;
    for (int64_t e = 0; e < d.n; e++) {
        int64_t i = e / cols % rows, j = e % cols;
        bool keep = upper ? j - i >= k : j - i <= k;
        if (keep) sh_buf_put(&b, e, &d, e);
        else if (b.is_float) b.fv[e] = 0.0;
        else b.iv[e] = 0;
    }
    return sh_buf_emit(c, 0, &b, d.n);
}

/* ScatterElements' contents when data, indices and updates are known and
 * small: PyTorch exports `index_fill`/`index_put` on a shape as a scatter
 * into Shape's output (one dim replaced), which an Expand then reads. An
 * index out of range leaves the contents unknown (the kernel says so). */
static mp_status scatter_elements_contents(mp_ctx *c, const mp_value *x, const mp_value *ind) {
    sh_data d, id, u;
    if (x->rank < 1 || x->rank != ind->rank || !sh_data_get(c, 0, &d) || !sh_data_get(c, 1, &id) || id.fv ||
        !sh_data_get(c, 2, &u) || id.n != u.n)
        return MP_OK;
    const char *red = mp_attr_s(c->n, "reduction", "none");
    int r = x->rank, red_k = !strcmp(red, "none") ? 0 : !strcmp(red, "add") ? 1 : !strcmp(red, "mul") ? 2
                          : !strcmp(red, "max") ? 3 : !strcmp(red, "min") ? 4 : -1;
    int axis = mp_axis(mp_attr_i(c->n, "axis", 0), r);
    if (red_k < 0 || axis < 0) return MP_OK;
    int64_t xs[MP_MAX_RANK], is[MP_MAX_RANK];
    sh_strides(x->dims, r, xs);
    sh_strides(ind->dims, r, is);
    sh_buf b;
    mp_status st = sh_buf_init(&b, x->dtype, d.n);
    if (st) return st;
    for (int64_t k = 0; k < d.n; k++) sh_buf_put(&b, k, &d, k);
    for (int64_t j = 0; j < id.n; j++) {
        int64_t pos = 0, rem = j;
        for (int a = 0; a < r; a++) {
            int64_t ca = rem / is[a];
            rem -= ca * is[a];
            if (a == axis) {
                ca = id.iv[j] < 0 ? id.iv[j] + x->dims[a] : id.iv[j];
                if (ca < 0 || ca >= x->dims[a]) {
                    sh_buf_free(&b);
                    return MP_OK;
                }
            } else if (ca >= x->dims[a]) {
                sh_buf_free(&b);
                return MP_OK;
            }
            pos += ca * xs[a];
        }
        if (b.is_float) {
            double v = sh_get_f(&u, j), o = b.fv[pos];
            b.fv[pos] = red_k == 0 ? v : red_k == 1 ? o + v : red_k == 2 ? o * v : red_k == 3 ? fmax(o, v) : fmin(o, v);
        } else {
            int64_t v = sh_get_i(&u, j), o = b.iv[pos];
            b.iv[pos] = red_k == 0 ? v : red_k == 1 ? (int64_t)((uint64_t)o + (uint64_t)v)
                      : red_k == 2 ? (int64_t)((uint64_t)o * (uint64_t)v) : red_k == 3 ? (o > v ? o : v) : (o < v ? o : v);
        }
    }
    return sh_buf_emit(c, 0, &b, d.n);
}

/* ScatterElements (11) / Scatter (9): output shaped like data; data,
 * indices and updates have one rank, indices and updates one shape. */
static mp_status scatter_elements_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st), *ind, *upd;
    if (!x) return st;
    if (!(ind = sh_in(c, 1, &st)) || !(upd = sh_in(c, 2, &st))) return st;
    if ((x->rank >= 0 && ind->rank >= 0 && x->rank != ind->rank) ||
        (ind->rank >= 0 && upd->rank >= 0 && ind->rank != upd->rank))
        return mp_fail(c, "data, indices and updates ranks differ (%d, %d, %d)", x->rank,
                       ind->rank, upd->rank);
    if (ind->rank >= 0 && upd->rank == ind->rank)
        for (int a = 0; a < ind->rank; a++) {
            int64_t m;
            if (!mp_dim_merge(ind->dims[a], upd->dims[a], &m))
                return mp_fail(c, "indices and updates differ on dim %d", a);
        }
    if (x->rank >= 0 && mp_axis(mp_attr_i(c->n, "axis", 0), x->rank < 1 ? 1 : x->rank) < 0)
        return mp_fail(c, "axis is out of range for rank %d", x->rank);
    if ((st = mp_set_out_like(c, 0, x))) return st;
    return scatter_elements_contents(c, x, ind);
}

/* ScatterND (11; reduction since 16): output shaped like data (rank r);
 * indices rank q with last dim k <= r; updates must have rank
 * q - 1 + r - k. */
static mp_status scatter_nd_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st), *ind, *upd;
    if (!x) return st;
    if (!(ind = sh_in(c, 1, &st)) || !(upd = sh_in(c, 2, &st))) return st;
    if (x->rank >= 0 && ind->rank >= 1 && ind->dims[ind->rank - 1] >= 0) {
        int64_t k = ind->dims[ind->rank - 1];
        if (k > x->rank) return mp_fail(c, "index tuples of length %lld for data rank %d",
                                        (long long)k, x->rank);
        int64_t ur = ind->rank - 1 + x->rank - k;
        if (upd->rank >= 0 && upd->rank != ur)
            return mp_fail(c, "updates has rank %d, expected %lld", upd->rank, (long long)ur);
    }
    return mp_set_out_like(c, 0, x);
}

/* Scatter* cost: 0 FLOPs without a reduction (a copy); with reduction
 * add/mul/max/min (16+) 1 FLOP per update element. */
static void scatter_cost(mp_ctx *c, mp_cost *k) {
    const char *red = mp_attr_s(c->n, "reduction", "none");
    k->macs = 0;
    k->flops = strcmp(red, "none") == 0 ? 0 : mp_cnumel(mp_in(c, 2), k);
}

/* OneHot (9; negative axis since 11): indices of rank r, depth (scalar),
 * values [off, on]: output rank r + 1 with the depth inserted at `axis`
 * (default -1 = last), dtype of values. Depth must be >= 0; unknown depth
 * is anonymous. Cost 0. */
static mp_status one_hot_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *ind = sh_in(c, 0, &st), *dep, *val;
    if (!ind) return st;
    if (!(dep = sh_in(c, 1, &st)) || !(val = sh_in(c, 2, &st))) return st;
    if (ind->rank < 0) return mp_set_out(c, 0, val->dtype, -1, NULL);
    int orank = ind->rank + 1;
    if (orank > MP_MAX_RANK) return mp_fail(c, "output rank exceeds the limit");
    int a = mp_axis(mp_attr_i(c->n, "axis", -1), orank);
    if (a < 0) return mp_fail(c, "axis is out of range for output rank %d", orank);
    int64_t depth = MP_DIM_ANON;
    const int64_t *dv;
    int64_t n;
    if (sh_ints(c, 1, &dv, &n) && n == 1) {
        if (dv[0] < 0) return mp_fail(c, "depth is negative (%lld)", (long long)dv[0]);
        depth = dv[0];
    }
    int64_t od[MP_MAX_RANK];
    for (int i = 0, j = 0; i < orank; i++) od[i] = i == a ? depth : ind->dims[j++];
    return mp_set_out(c, 0, val->dtype, orank, od);
}

/* CumSum (11): same shape; contents (running sums along `axis`, with the
 * exclusive and reverse attributes) when known. Cost: 1 FLOP per element
 * (one add each; the first of each run is counted too, an upper bound
 * by one add per run). */
static mp_status cumsum_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    if (!mp_in(c, 1)) return mp_fail(c, "input axis is required");
    st = mp_set_out_like(c, 0, x);
    if (st || x->rank < 0) return st;
    const int64_t *axv;
    int64_t na;
    if (!sh_ints(c, 1, &axv, &na) || na != 1) return MP_OK;
    int r = x->rank < 1 ? 1 : x->rank;
    int a = mp_axis(axv[0], r);
    if (a < 0) return mp_fail(c, "axis %lld is out of range for rank %d", (long long)axv[0], r);
    sh_data s;
    if (x->rank < 1 || !sh_data_get(c, 0, &s)) return MP_OK;
    bool excl = mp_attr_i(c->n, "exclusive", 0) != 0, rev = mp_attr_i(c->n, "reverse", 0) != 0;
    int64_t outer = 1, inner = 1, len = x->dims[a];
    for (int i = 0; i < a; i++) outer *= x->dims[i];
    for (int i = a + 1; i < x->rank; i++) inner *= x->dims[i];
    sh_buf b;
    st = sh_buf_init(&b, x->dtype, s.n);
    if (st) return st;
    for (int64_t p = 0; p < outer; p++)
        for (int64_t t = 0; t < inner; t++) {
            int64_t isum = 0;
            double fsum = 0;
            for (int64_t j = 0; j < len; j++) {
                int64_t jj = rev ? len - 1 - j : j;
                int64_t idx = (p * len + jj) * inner + t;
                if (excl) {
                    if (b.is_float) b.fv[idx] = fsum; else b.iv[idx] = isum;
                }
                if (b.is_float)
                    fsum += sh_get_f(&s, idx);
                else
                    isum = (int64_t)((uint64_t)isum + (uint64_t)sh_get_i(&s, idx));
                if (!excl) {
                    if (b.is_float) b.fv[idx] = fsum; else b.iv[idx] = isum;
                }
            }
        }
    return sh_buf_emit(c, 0, &b, s.n);
}

/* ------------------------------------------------------------------ */
/* DepthToSpace, SpaceToDepth, ReverseSequence                         */
/* ------------------------------------------------------------------ */

/* DepthToSpace (1; mode since 11): [N, C, H, W] -> [N, C/b^2, H*b, W*b]
 * (C must divide by b^2). SpaceToDepth (1): [N, C, H, W] ->
 * [N, C*b^2, H/b, W/b] (H, W must divide by b). blocksize b > 0.
 * Unknown dims stay unknown (N keeps its symbol). Cost 0. */
static mp_status space_depth_core(mp_ctx *c, bool to_space) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    int64_t b = mp_attr_i(c->n, "blocksize", 0);
    if (b <= 0 || b > 0x7fffffff) return mp_fail(c, "blocksize must be positive, not %lld", (long long)b);
    if (x->rank < 0) return sh_anon(c, 0, x->dtype, 4);
    if (x->rank != 4) return mp_fail(c, "input must be 4-D, not rank %d", x->rank);
    int64_t bb = b * b, od[4] = {x->dims[0], MP_DIM_ANON, MP_DIM_ANON, MP_DIM_ANON};
    int64_t ch = x->dims[1];
    if (to_space) {
        if (ch >= 0) {
            if (ch % bb) return mp_fail(c, "channels %lld do not divide by blocksize^2 = %lld",
                                        (long long)ch, (long long)bb);
            od[1] = ch / bb;
        }
        for (int a = 2; a < 4; a++)
            if (x->dims[a] >= 0 && __builtin_mul_overflow(x->dims[a], b, &od[a]))
                return mp_fail(c, "output dim overflows int64");
    } else {
        if (ch >= 0 && __builtin_mul_overflow(ch, bb, &od[1]))
            return mp_fail(c, "output dim overflows int64");
        for (int a = 2; a < 4; a++)
            if (x->dims[a] >= 0) {
                if (x->dims[a] % b)
                    return mp_fail(c, "dim %d of size %lld does not divide by blocksize %lld", a,
                                   (long long)x->dims[a], (long long)b);
                od[a] = x->dims[a] / b;
            }
    }
    return mp_set_out(c, 0, x->dtype, 4, od);
}

static mp_status depth_to_space_infer(mp_ctx *c) { return space_depth_core(c, true); }
static mp_status space_to_depth_infer(mp_ctx *c) { return space_depth_core(c, false); }

/* ReverseSequence (10): same shape as the input. Cost 0. */
static mp_status reverse_sequence_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    if (!sh_in(c, 1, &st)) return st;
    if (x->rank >= 0 && x->rank < 2) return mp_fail(c, "input must have rank >= 2, not %d", x->rank);
    int64_t ba = mp_attr_i(c->n, "batch_axis", 1), ta = mp_attr_i(c->n, "time_axis", 0);
    if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
        return mp_fail(c, "batch_axis %lld and time_axis %lld must be 0 and 1, one each", (long long)ba,
                       (long long)ta);
    return mp_set_out_like(c, 0, x);
}

/* ------------------------------------------------------------------ */
/* Data-dependent output sizes: Compress, NonZero, Unique              */
/* ------------------------------------------------------------------ */

/* Compress (9; negative axis since 11): with `axis`, the input's shape
 * with that dim replaced by the number of true conditions among the first
 * min(len, dim); without, 1-D of that count over the flattened input. The
 * count is known only when the condition's contents are; otherwise it is
 * an anonymous dim (never a guess). Cost 0. */
static mp_status compress_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    if (!sh_in(c, 1, &st)) return st;
    const mp_attr *ax = mp_node_attr(c->n, "axis");
    int a = -1;
    int64_t lim = -1;
    if (ax) {
        if (x->rank < 0) return sh_unknown(c, x);
        a = mp_axis(ax->i, x->rank);
        if (a < 0) return mp_fail(c, "axis %lld is out of range for rank %d", (long long)ax->i, x->rank);
        lim = x->dims[a];
    } else if (x->rank >= 0) {
        lim = mp_value_numel(x);
    }
    int64_t cnt = MP_DIM_ANON;
    const int64_t *cv;
    int64_t n;
    if (lim >= 0 && sh_ints(c, 1, &cv, &n)) {
        if (n > lim) return mp_fail(c, "condition has %lld entries for %lld slices", (long long)n,
                                    (long long)lim);
        cnt = 0;
        for (int64_t k = 0; k < n; k++) cnt += cv[k] != 0;
    }
    if (!ax) return mp_set_out(c, 0, x->dtype, 1, &cnt);
    int64_t od[MP_MAX_RANK];
    sh_copy_dims(od, x->dims, x->rank);
    od[a] = cnt;
    return mp_set_out(c, 0, x->dtype, x->rank, od);
}

/* NonZero (9): int64 [rank, count]; the count is known only when the
 * input's contents are, else anonymous. Cost 0. */
static mp_status non_zero_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    int64_t od[2] = {x->rank >= 0 ? (x->rank == 0 ? 1 : x->rank) : MP_DIM_ANON, MP_DIM_ANON};
    sh_data s;
    if (sh_data_get(c, 0, &s)) {
        od[1] = 0;
        for (int64_t k = 0; k < s.n; k++) od[1] += sh_get_f(&s, k) != 0;
    }
    return mp_set_out(c, 0, MP_DT_INT64, 2, od);
}

/* Unique (11): Y has the unique count (anonymous) in place of the axis
 * dim, or is 1-D of it without axis; indices and counts are int64
 * [count]; inverse_indices is int64 [dim along axis] or [numel]. Cost 0. */
static mp_status unique_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = sh_in(c, 0, &st);
    if (!x) return st;
    const mp_attr *ax = mp_node_attr(c->n, "axis");
    int64_t anon = MP_DIM_ANON, inv = MP_DIM_ANON;
    if (ax && x->rank >= 0) {
        int a = mp_axis(ax->i, x->rank);
        if (a < 0) return mp_fail(c, "axis %lld is out of range for rank %d", (long long)ax->i, x->rank);
        int64_t od[MP_MAX_RANK];
        sh_copy_dims(od, x->dims, x->rank);
        od[a] = MP_DIM_ANON;
        inv = x->dims[a];
        st = mp_set_out(c, 0, x->dtype, x->rank, od);
    } else if (ax) {
        st = mp_set_out(c, 0, x->dtype, -1, NULL);
    } else {
        st = mp_set_out(c, 0, x->dtype, 1, &anon);
        if (x->rank == 1)
            inv = x->dims[0];
        else if (x->rank >= 0 && mp_value_numel(x) >= 0)
            inv = mp_value_numel(x);
    }
    if (!st) st = mp_set_out(c, 1, MP_DT_INT64, 1, &anon);
    if (!st) st = mp_set_out(c, 2, MP_DT_INT64, 1, &inv);
    if (!st) st = mp_set_out(c, 3, MP_DT_INT64, 1, &anon);
    return st;
}

/* ------------------------------------------------------------------ */
/* kernels                                                             */
/* ------------------------------------------------------------------ */
/* Data movement: the output shapes are the static inference's, so most
 * kernels only compute where each output element comes from. Elements are
 * moved as bytes (any dtype of 8 bits or more). */

/* Element size of dt (an error for sub-byte and string types). */
size_t shk_esize(mp_kctx *k, int dt, mp_status *st) {
    size_t es = mp_kesize(dt);
    if (!es) *st = mp_kfail(k, MP_ERR_UNSUPPORTED, "dtype %s", mp_dtype_name(dt));
    return es;
}

/* ------------------------------------------------------------------ */
/* the table                                                           */
/* ------------------------------------------------------------------ */

/* Data movement keeps nothing for the backward; views share their input's
 * storage (PyTorch's view, reshape of a contiguous tensor, transpose, and
 * basic indexing: slices, splits, a scalar index). */
#define SH_OP(name, since, infer, run) \
    {"", name, since, infer, mp_cost_zero, 0, 0, NULL, run, .train = mp_bwd_none}
#define SH_VIEW(name, since, infer, run) \
    {"", name, since, infer, mp_cost_zero, 0, 0, NULL, run, .train = mp_bwd_view}

/* One FLOP per output element (a backward that scatters or sums the
 * output's gradient). */
static uint64_t out_elems(mp_ctx *c) {
    const mp_value *y = mp_out(c, 0);
    int64_t n = y ? mp_value_numel(y) : -1;
    return n > 0 ? (uint64_t)n : 0;
}

/* Gather keeps its indices (an embedding's backward scatters the output's
 * gradient into the table's rows). */
static void sh_train_gather(mp_ctx *c, mp_bwd *t) {
    /* a scalar index selects one slice: PyTorch's select, a view */
    const mp_value *ix = mp_in(c, 1);
    if (ix && ix->rank == 0 && ix->kn >= 0) {
        t->view = true;
        return;
    }
    if (!(t->rg & 1u)) return;
    t->save_in = 2u;
    t->bwd_flops = out_elems(c);
}

/* ScatterND, ScatterElements and Scatter (PyTorch's index_put_, scatter,
 * scatter_add_, index_add_): the updates' gradient is the output's gathered
 * at the indices (derivatives.yaml: grad.gather(dim, index), index_select),
 * the data's the output's own, zeroed at the indices when they replace
 * (no reduction): either keeps the indices. Data movement: no FLOPs. */
static void sh_train_scatter(mp_ctx *c, mp_bwd *t) {
    const char *red = mp_attr_s(c->n, "reduction", "none");
    bool replace = !red || strcmp(red, "none") == 0;
    if ((t->rg & 4u) || ((t->rg & 1u) && replace)) t->save_in = 2u;
    /* index_add_ as the TorchScript exporter writes it: its 1-D index
     * unsqueezed and expanded to the source's shape. IndexAddBackward keeps
     * the source too (derivatives.yaml: grad.index_select(dim,
     * index).expand_as(source)) */
    int ix = c->n->n_in > 1 ? c->n->in[1] : -1;
    const mp_value *e = ix >= 0 ? &c->g->values[ix] : NULL;
    const mp_node *pe = e && e->producer >= 0 ? &c->g->nodes[e->producer] : NULL;
    /* (scatter_add's own idiom, index.unsqueeze(-1).expand_as(src), reads
     * the source as it is: the exporter expands index_add's source too) */
    int sx = c->n->n_in > 2 ? c->n->in[2] : -1;
    const mp_node *ps = sx >= 0 && c->g->values[sx].producer >= 0 ? &c->g->nodes[c->g->values[sx].producer] : NULL;
    if ((t->rg & 4u) && pe && strcmp(pe->op, "Expand") == 0 && pe->n_in > 0 && pe->in[0] >= 0 && ps &&
        strcmp(ps->op, "Expand") == 0) {
        const mp_value *u = &c->g->values[pe->in[0]];
        const mp_node *pu = u->producer >= 0 ? &c->g->nodes[u->producer] : NULL;
        if (pu && strcmp(pu->op, "Unsqueeze") == 0 && pu->n_in > 0 && pu->in[0] >= 0 &&
            c->g->values[pu->in[0]].rank == 1)
            t->save_in |= 4u;
    }
}

/* Slice: a view (basic indexing), except a negative step: the exporter's
 * form of torch.flip, which copies. */
static void sh_train_slice(mp_ctx *c, mp_bwd *t) {
    const mp_value *st = c->n->n_in > 4 ? mp_in(c, 4) : NULL;
    if (st && st->kn > 0 && st->iv)
        for (int64_t i = 0; i < st->kn; i++)
            if (st->iv[i] < 0) return;   /* a copy that keeps nothing */
    t->view = true;
}

/* GatherElements (torch.gather): gather_backward(grad, self, dim, index)
 * keeps the input and the index (autograd saves self, read for its sizes),
 * a scatter-add of the output's elements. */
static void sh_train_gather_elements(mp_ctx *c, mp_bwd *t) {
    if (!(t->rg & 1u)) return;
    t->save_in = 3u;
    t->bwd_flops = out_elems(c);
}

/* CumSum: cumsum_backward(grad, dim), a reversed cumulative sum, keeps no
 * tensor; autocast runs cumsum in fp32 (CUDA's fp32 list). */
static void sh_train_cumsum(mp_ctx *c, mp_bwd *t) {
    t->amp = MP_AMP_FP32;
    if (t->rg & 1u) t->bwd_flops = out_elems(c);
}

/* Cast's output type is its own; Shape, Size and the rest give integers. */
static void sh_train_keep(mp_ctx *c, mp_bwd *t) {
    (void)c;
    t->amp = MP_AMP_KEEP;
}

const mp_op mp_ops_shape[] = {
    {"", "Shape", 1, shape_infer, meta_cost, 0, 0, NULL, shk_shape, .train = sh_train_keep},
    {"", "Size", 1, size_infer, meta_cost, 0, 0, NULL, shk_size, .train = sh_train_keep},
    {"", "Gather", 1, gather_infer, mp_cost_zero, 0, 0, NULL, shk_gather, .train = sh_train_gather},
    {"", "GatherElements", 11, gather_elements_infer, mp_cost_zero, 0, 0, NULL, shk_gather_elements,
     .train = sh_train_gather_elements},
    SH_OP("GatherND", 11, gather_nd_infer, shk_gather_nd),
    SH_OP("Concat", 1, concat_infer_v1, shk_concat),
    SH_OP("Concat", 4, concat_infer_v4, shk_concat),
    SH_VIEW("Slice", 1, slice_infer_v1, shk_slice),
    {"", "Slice", 10, slice_infer_v10, mp_cost_zero, 0, 0, NULL, shk_slice, .train = sh_train_slice},
    SH_VIEW("Unsqueeze", 1, unsqueeze_infer_v1, shk_copy),
    SH_VIEW("Unsqueeze", 13, unsqueeze_infer_v13, shk_copy),
    SH_VIEW("Squeeze", 1, squeeze_infer_v1, shk_copy),
    SH_VIEW("Squeeze", 13, squeeze_infer_v13, shk_copy),
    SH_VIEW("Reshape", 1, reshape_infer_v1, shk_copy),
    SH_VIEW("Reshape", 5, reshape_infer_v5, shk_copy),
    SH_VIEW("Reshape", 14, reshape_infer_v5, shk_copy),
    SH_VIEW("Flatten", 1, flatten_infer, shk_copy),
    SH_OP("Range", 11, range_infer, shk_range),
    SH_OP("ConstantOfShape", 9, constant_of_shape_infer, shk_constant_of_shape),
    SH_OP("Constant", 1, constant_infer, shk_constant),
    {"", "EyeLike", 9, eye_like_infer, meta_cost, 0, 0, NULL, shk_eye_like, .train = mp_bwd_none},
    SH_VIEW("Expand", 8, expand_infer, shk_expand),
    SH_OP("Tile", 1, tile_infer_v1, shk_tile),
    SH_OP("Tile", 6, tile_infer_v6, shk_tile),
    SH_OP("Pad", 1, pad_infer_v1, shk_pad),
    SH_OP("Pad", 2, pad_infer_v2, shk_pad),
    SH_OP("Pad", 11, pad_infer_v11, shk_pad),
    SH_OP("Pad", 18, pad_infer_v11, shk_pad),
    {"", "Cast", 1, cast_infer, mp_cost_zero, 0, 0, NULL, shk_cast, .train = sh_train_keep},
    {"", "CastLike", 15, cast_like_infer, cast_like_cost, 0, 0, NULL, shk_cast, .train = sh_train_keep},
    SH_VIEW("Identity", 1, identity_infer, shk_copy),
    SH_VIEW("Transpose", 1, transpose_infer, shk_transpose),
    SH_VIEW("Split", 1, split_infer_v1, shk_split),
    SH_VIEW("Split", 2, split_infer_v2, shk_split),
    SH_VIEW("Split", 13, split_infer_v13, shk_split),
    SH_VIEW("Split", 18, split_infer_v18, shk_split),
    SH_OP("Trilu", 14, trilu_infer, mp_ktrilu),
    {"", "ScatterND", 11, scatter_nd_infer, scatter_cost, 0, 0, NULL, shk_scatter_nd, shk_scatter_prepare,
     .train = sh_train_scatter},
    {"", "ScatterElements", 11, scatter_elements_infer, scatter_cost, 0, 0, NULL,
     shk_scatter_elements, shk_scatter_prepare, .train = sh_train_scatter},
    {"", "Scatter", 9, scatter_elements_infer, scatter_cost, 0, 0, NULL, shk_scatter_elements, shk_scatter_prepare,
     .train = sh_train_scatter},
    SH_OP("OneHot", 9, one_hot_infer, shk_one_hot),
    {"", "CumSum", 11, cumsum_infer, mp_cost_in1, 0, 0, NULL, shk_cumsum, .train = sh_train_cumsum},
    SH_OP("DepthToSpace", 1, depth_to_space_infer, shk_depth_to_space),
    SH_OP("SpaceToDepth", 1, space_to_depth_infer, shk_space_to_depth),
    SH_OP("ReverseSequence", 10, reverse_sequence_infer, shk_reverse_sequence),
    SH_OP("Compress", 9, compress_infer, shk_compress),
    SH_OP("NonZero", 9, non_zero_infer, shk_non_zero),
    SH_OP("Unique", 11, unique_infer, shk_unique),
};
const int mp_ops_shape_count = (int)MP_ARRAY_LEN(mp_ops_shape);
