/* The reference kernels of the operators whose shape, cost and training
 * rules are in shape.c (see its opening comment); shape_int.h is what the two
 * files share. */
#include "ops/kernel.h"
#include "load/load.h"
#include <math.h>
#include <stdlib.h>
#include <strings.h>
#include "ops/shape_int.h"

/* The same, checking first that the outputs are shaped. */
static size_t shk_es(mp_kctx *k, int dt, mp_status *st) {
    if ((*st = mp_kout_known(k))) return 0;
    return shk_esize(k, dt, st);
}

static int shk_axis(const mp_kctx *k, int64_t axis, int rank, mp_status *st) {
    int a = mp_axis(axis, rank);
    if (a < 0) *st = mp_kfail(k, MP_ERR_SHAPE, "axis %lld out of range for rank %d", (long long)axis, rank);
    return a;
}

/* Identity, Reshape, Flatten, Squeeze, Unsqueeze, Dropout (inference):
 * output 0 holds input 0's bytes. */
mp_status shk_copy(mp_kctx *k) {
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    if (y->numel != x->numel || y->dtype != x->dtype)
        return mp_kfail(k, MP_ERR_SHAPE, "output does not match the input");
    size_t bytes = (size_t)mp_dtype_bytes(x->dtype, x->numel);
    if (y->data != x->data && bytes) memmove(y->data, x->data, bytes);
    return MP_OK;
}

mp_status shk_shape(mp_kctx *k) {
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    int r = k->in[0].rank;
    int64_t s = mp_attr_i(k->n, "start", 0);
    if (s < 0) s += r;
    s = s < 0 ? 0 : s > r ? r : s;
    for (int64_t i = 0; i < k->out[0].numel; i++) ((int64_t *)k->out[0].data)[i] = k->in[0].dims[s + i];
    return MP_OK;
}

mp_status shk_size(mp_kctx *k) {
    *(int64_t *)k->out[0].data = k->in[0].numel;
    return MP_OK;
}

mp_status shk_cast(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    if (!mp_kdtype_ok(x->dtype) || !mp_kdtype_ok(y->dtype))
        return mp_kfail(k, MP_ERR_UNSUPPORTED, "cast from %s to %s", mp_dtype_name(x->dtype),
                        mp_dtype_name(y->dtype));
    bool sat = mp_attr_i(k->n, "saturate", 1) != 0;
    bool fp8 = y->dtype >= MP_DT_FLOAT8E4M3FN && y->dtype <= MP_DT_FLOAT8E5M2FNUZ;
    if (fp8 && !sat) {
        for (int64_t i = 0; i < x->numel; i++)
            ((uint8_t *)y->data)[i] = mp_float_to_fp8((float)mp_kget_f(x->data, x->dtype, i), y->dtype, false);
        return MP_OK;
    }
    mp_kconvert(y->data, y->dtype, x->data, x->dtype, x->numel);
    return MP_OK;
}

mp_status shk_transpose(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_status st = MP_OK;
    size_t es = shk_es(k, x->dtype, &st);
    if (st) return st;
    int r = x->rank;
    int64_t xs[MP_MAX_RANK], istr[MP_MAX_RANK];
    mp_kstrides(r, x->dims, xs);
    const int64_t *perm = NULL;
    int np = mp_attr_ints(k->n, "perm", &perm);
    for (int i = 0; i < r; i++) {
        int64_t p = np == r ? perm[i] : r - 1 - i;
        if (p < 0 || p >= r) return mp_kfail(k, MP_ERR_SHAPE, "bad perm");
        istr[i] = xs[p];
    }
    mp_kcopy_strided(k->out[0].data, x->data, es, r, k->out[0].dims, istr, 0);
    return MP_OK;
}

/* Concat: each input's block of (its axis extent * inner) per outer index. */
mp_status shk_concat(mp_kctx *k) {
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    size_t es = shk_es(k, y->dtype, &st);
    /* the shape rule's default: 1 before opset 4, else required (a typeless
     * 'axis' reads as 0 there) */
    int axis = st ? 0 : shk_axis(k, mp_attr_i(k->n, "axis", k->n->opset < 4 ? 1 : 0), y->rank, &st);
    if (st) return st;
    int64_t outer, inner;
    mp_kouter_inner(y->rank, y->dims, axis, &outer, &inner);
    size_t orow = (size_t)(y->dims[axis] * inner) * es, pos = 0;
    int64_t along = 0;
    for (int i = 0; i < k->n_in; i++) {
        const mp_rtensor *x = &k->in[i];
        if (!x->data || x->rank != y->rank) continue;
        if (x->dtype != y->dtype) /* its rows would be copied at the output's element size */
            return mp_kfail(k, MP_ERR_SHAPE, "input %d is %s, the output %s", i, mp_dtype_name(x->dtype),
                            mp_dtype_name(y->dtype));
        for (int d = 0; d < y->rank; d++)
            if (d != axis && x->dims[d] != y->dims[d])
                return mp_kfail(k, MP_ERR_SHAPE, "input %d: dim %d is %lld, the output's %lld", i, d,
                                (long long)x->dims[d], (long long)y->dims[d]);
        along += x->dims[axis];
    }
    if (along != y->dims[axis])
        return mp_kfail(k, MP_ERR_SHAPE, "the inputs give %lld along axis %d, the output has %lld", (long long)along,
                        axis, (long long)y->dims[axis]);
    for (int i = 0; i < k->n_in; i++) {
        const mp_rtensor *x = &k->in[i];
        if (!x->data || x->rank != y->rank) continue;
        size_t row = (size_t)(x->dims[axis] * inner) * es;
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)y->data + (size_t)o * orow + pos, (const char *)x->data + (size_t)o * row, row);
        pos += row;
    }
    return MP_OK;
}

mp_status shk_split(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_status st = MP_OK;
    size_t es = shk_es(k, x->dtype, &st);
    int axis = st ? 0 : shk_axis(k, mp_attr_i(k->n, "axis", 0), x->rank, &st);
    if (st) return st;
    int64_t outer, inner;
    mp_kouter_inner(x->rank, x->dims, axis, &outer, &inner);
    size_t irow = (size_t)(x->dims[axis] * inner) * es, pos = 0;
    for (int i = 0; i < k->n_out; i++) {
        mp_rtensor *y = &k->out[i];
        if (!y->data && y->numel) continue;
        size_t row = (size_t)(y->dims[axis] * inner) * es;
        for (int64_t o = 0; o < outer && row; o++)
            memcpy((char *)y->data + (size_t)o * row, (const char *)x->data + (size_t)o * irow + pos, row);
        pos += row;
    }
    return MP_OK;
}

/* Slice: output index i on axis a reads start[a] + i * step[a]. */
mp_status shk_slice(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_status st = MP_OK;
    size_t es = shk_es(k, x->dtype, &st);
    if (st) return st;
    int r = x->rank;
    int64_t starts[MP_MAX_RANK], axes[MP_MAX_RANK], steps[MP_MAX_RANK];
    int64_t ns, na, nst;
    if (k->n->opset < 10) {
        const int64_t *v;
        ns = mp_attr_ints(k->n, "starts", &v);
        for (int64_t i = 0; i < ns && i < MP_MAX_RANK; i++) starts[i] = v[i];
        na = mp_attr_ints(k->n, "axes", &v);
        for (int64_t i = 0; i < na && i < MP_MAX_RANK; i++) axes[i] = v[i];
        nst = -1;
    } else {
        ns = mp_kints(mp_kin(k, 1), starts, MP_MAX_RANK);
        na = mp_kints(mp_kin(k, 3), axes, MP_MAX_RANK);
        nst = mp_kints(mp_kin(k, 4), steps, MP_MAX_RANK);
    }
    if (ns < 0 || ns > r) return mp_kfail(k, MP_ERR_SHAPE, "bad starts");
    int64_t first[MP_MAX_RANK], step[MP_MAX_RANK], xs[MP_MAX_RANK], istr[MP_MAX_RANK];
    for (int i = 0; i < r; i++) first[i] = 0, step[i] = 1;
    for (int64_t i = 0; i < ns; i++) {
        int a = shk_axis(k, na >= 0 ? axes[i] : i, r, &st);
        if (st) return st;
        int64_t s = nst > i ? steps[i] : 1, d = x->dims[a], b = starts[i];
        if (s == 0) return mp_kfail(k, MP_ERR_SHAPE, "step 0");
        if (b < 0) b += d;
        if (s > 0) b = b < 0 ? 0 : b > d ? d : b;
        else b = b < 0 ? -1 : b > d - 1 ? d - 1 : b;
        first[a] = b;
        step[a] = s;
    }
    mp_kstrides(r, x->dims, xs);
    int64_t base = 0;
    for (int i = 0; i < r; i++) {
        istr[i] = xs[i] * step[i];
        base += first[i] * xs[i];
    }
    if (k->out[0].numel) mp_kcopy_strided(k->out[0].data, x->data, es, r, k->out[0].dims, istr, base);
    return MP_OK;
}

/* Expand: a broadcast copy. */
mp_status shk_expand(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    size_t es = shk_es(k, x->dtype, &st);
    if (st) return st;
    int64_t xs[MP_MAX_RANK], istr[MP_MAX_RANK];
    mp_kstrides(x->rank, x->dims, xs);
    for (int i = 0; i < y->rank; i++) {
        int j = i - (y->rank - x->rank);
        istr[i] = j < 0 || x->dims[j] == 1 ? 0 : xs[j];
    }
    mp_kcopy_strided(y->data, x->data, es, y->rank, y->dims, istr, 0);
    return MP_OK;
}

/* Tile: output index i on each axis reads i mod the input's extent. */
mp_status shk_tile(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    size_t es = shk_es(k, x->dtype, &st);
    if (st) return st;
    int r = y->rank;
    if (y->numel == 0) return MP_OK;
    int64_t xs[MP_MAX_RANK], idx[MP_MAX_RANK] = {0};
    mp_kstrides(r, x->dims, xs);
    int64_t inner = r ? x->dims[r - 1] : 1;
    char *o = y->data;
    for (int64_t e = 0; e < y->numel; e += r ? y->dims[r - 1] : 1) {
        int64_t off = 0;
        for (int d = 0; d + 1 < r; d++) off += (idx[d] % x->dims[d]) * xs[d];
        int64_t len = r ? y->dims[r - 1] : 1;
        for (int64_t j = 0; j < len; j += inner) {
            int64_t n = len - j < inner ? len - j : inner;
            memcpy(o, (const char *)x->data + (size_t)off * es, (size_t)n * es);
            o += (size_t)n * es;
        }
        for (int d = r - 2; d >= 0; d--) {
            if (++idx[d] < y->dims[d]) break;
            idx[d] = 0;
        }
    }
    return MP_OK;
}

/* Gather: out[outer, idx..., inner] = x[outer, indices[idx...], inner]. */
mp_status shk_gather(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *ix = &k->in[1];
    mp_status st = MP_OK;
    size_t es = shk_es(k, x->dtype, &st);
    int axis = st ? 0 : shk_axis(k, mp_attr_i(k->n, "axis", 0), x->rank, &st);
    if (st) return st;
    int64_t outer, inner, d = x->dims[axis];
    mp_kouter_inner(x->rank, x->dims, axis, &outer, &inner);
    size_t row = (size_t)inner * es;
    char *o = k->out[0].data;
    for (int64_t a = 0; a < outer; a++)
        for (int64_t j = 0; j < ix->numel; j++) {
            int64_t i = mp_kget_i(ix->data, ix->dtype, j);
            if (i < 0) i += d;
            if (i < 0 || i >= d)
                return mp_kfail(k, MP_ERR_USAGE, "index %lld out of range [0, %lld)",
                                (long long)mp_kget_i(ix->data, ix->dtype, j), (long long)d);
            memcpy(o, (const char *)x->data + (size_t)((a * d + i) * inner) * es, row);
            o += row;
        }
    return MP_OK;
}

/* Index along `axis` of an element-wise index tensor, checked. */
static mp_status shk_index(mp_kctx *k, const mp_rtensor *ix, int64_t j, int64_t d, int64_t *i) {
    *i = mp_kget_i(ix->data, ix->dtype, j);
    if (*i < 0) *i += d;
    if (*i < 0 || *i >= d)
        return mp_kfail(k, MP_ERR_USAGE, "index %lld out of range [0, %lld)",
                        (long long)mp_kget_i(ix->data, ix->dtype, j), (long long)d);
    return MP_OK;
}

/* The next element of a walk over a tensor of dims `idims` in order: its
 * coordinates c and *base, the offset of those coordinates in a tensor of
 * strides xs without the one on `axis` (where an index value goes). One
 * add per element instead of a division per dimension. */
static inline void shk_ewalk_next(int r, const int64_t *idims, const int64_t *xs, int axis, int64_t *c,
                                  int64_t *base) {
    for (int d = r - 1; d >= 0; d--) {
        int64_t s = d == axis ? 0 : xs[d];
        if (++c[d] < idims[d]) {
            *base += s;
            return;
        }
        *base -= (c[d] - 1) * s;
        c[d] = 0;
    }
}

/* GatherElements / ScatterElements: indices (and updates, u) of data's
 * rank, no longer than data along any axis but `axis` (where the index
 * values choose): an element's coordinates then address data. */
static mp_status shk_elements_fit(mp_kctx *k, const mp_rtensor *x, const mp_rtensor *ix,
                                  const mp_rtensor *u, int axis) {
    if (ix->rank != x->rank || (u && (u->rank != ix->rank)))
        return mp_error(MP_ERR_SHAPE, "node %s (%s): indices of rank %d for data of rank %d",
                        k->n->name, k->n->op, ix->rank, x->rank);
    for (int d = 0; d < x->rank; d++) {
        if (u && u->dims[d] != ix->dims[d])
            return mp_error(MP_ERR_SHAPE, "node %s (%s): updates and indices differ in dim %d",
                            k->n->name, k->n->op, d);
        if (d != axis && ix->dims[d] > x->dims[d])
            return mp_error(MP_ERR_SHAPE, "node %s (%s): indices dim %d is %lld, data has %lld",
                            k->n->name, k->n->op, d, (long long)ix->dims[d], (long long)x->dims[d]);
    }
    return MP_OK;
}

mp_status shk_gather_elements(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *ix = &k->in[1];
    mp_status st = MP_OK;
    size_t es = shk_es(k, x->dtype, &st);
    int axis = st ? 0 : shk_axis(k, mp_attr_i(k->n, "axis", 0), x->rank, &st);
    if (!st) st = shk_elements_fit(k, x, ix, NULL, axis);
    if (st) return st;
    int64_t xs[MP_MAX_RANK], c[MP_MAX_RANK] = {0}, base = 0;
    mp_kstrides(x->rank, x->dims, xs);
    for (int64_t e = 0; e < ix->numel; e++, shk_ewalk_next(x->rank, ix->dims, xs, axis, c, &base)) {
        int64_t i;
        if ((st = shk_index(k, ix, e, x->dims[axis], &i))) return st;
        int64_t at = base + i * xs[axis];
        if (es == 4) ((uint32_t *)k->out[0].data)[e] = ((const uint32_t *)x->data)[at];
        else mp_kcopy1(k->out[0].data, e, x->data, at, es);
    }
    return MP_OK;
}

/* Reduction of ScatterElements / ScatterND: none, add, mul, max, min. */
static int shk_reduction(const mp_node *n) {
    const char *r = mp_attr_s(n, "reduction", "none");
    return !strcmp(r, "add") ? 1 : !strcmp(r, "mul") ? 2 : !strcmp(r, "max") ? 3 : !strcmp(r, "min") ? 4 : 0;
}

static void shk_scatter1(void *y, int dt, int64_t at, const void *u, int64_t ui, int red, size_t es) {
    if (!red) {
        mp_kcopy1(y, at, u, ui, es);
        return;
    }
    if (mp_kis_float(dt)) {
        double a = mp_kget_f(y, dt, at), b = mp_kget_f(u, dt, ui);
        mp_kset_f(y, dt, at, red == 1 ? a + b : red == 2 ? a * b : red == 3 ? fmax(a, b) : fmin(a, b));
    } else {
        int64_t a = mp_kget_i(y, dt, at), b = mp_kget_i(u, dt, ui);
        mp_kset_i(y, dt, at, red == 1 ? a + b : red == 2 ? a * b : red == 3 ? (a > b ? a : b) : (a < b ? a : b));
    }
}

/* ScatterElements on axis 0 whose indices hold one value along each whole
 * row (an index expanded over the inner dims: `result[idx] = rows` as
 * PyTorch exports it, torchvision's multi-scale RoI pooling): a row copy
 * per index, after one pass checking that every row is so. False (nothing
 * written) when some row is not, or the rows are not whole. */
static bool shk_scatter_rows(mp_kctx *k, const mp_rtensor *x, const mp_rtensor *ix, const mp_rtensor *u,
                             mp_rtensor *y, size_t es, mp_status *st) {
    if (ix->dtype != MP_DT_INT64 || x->rank < 2) return false;
    int64_t inner = 1;
    for (int d = 1; d < x->rank; d++) {
        if (ix->dims[d] != x->dims[d]) return false;
        inner *= x->dims[d];
    }
    int64_t rows = ix->dims[0];
    if (inner == 0 || rows == 0) return false;
    const int64_t *iv = ix->data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 1; j < inner; j++)
            if (iv[r * inner + j] != iv[r * inner]) return false;
    for (int64_t r = 0; r < rows; r++) {
        int64_t i;
        if ((*st = shk_index(k, ix, r * inner, x->dims[0], &i))) return true;
        memcpy((char *)y->data + (size_t)(i * inner) * es, (const char *)u->data + (size_t)(r * inner) * es,
               (size_t)inner * es);
    }
    return true;
}

mp_status shk_scatter_elements(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *ix = &k->in[1], *u = &k->in[2];
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    size_t es = shk_es(k, x->dtype, &st);
    int axis = st ? 0 : shk_axis(k, mp_attr_i(k->n, "axis", 0), x->rank, &st);
    if (!st) st = shk_elements_fit(k, x, ix, u, axis);
    if (st) return st;
    if (y->data != x->data) memcpy(y->data, x->data, (size_t)x->numel * es);
    int64_t xs[MP_MAX_RANK], c[MP_MAX_RANK] = {0}, base = 0;
    mp_kstrides(x->rank, x->dims, xs);
    int red = shk_reduction(k->n);
    if (!red && axis == 0 && shk_scatter_rows(k, x, ix, u, y, es, &st)) return st;
    for (int64_t e = 0; e < ix->numel; e++, shk_ewalk_next(x->rank, ix->dims, xs, axis, c, &base)) {
        int64_t i;
        if ((st = shk_index(k, ix, e, x->dims[axis], &i))) return st;
        int64_t at = base + i * xs[axis];
        if (!red && es == 4) ((uint32_t *)y->data)[at] = ((const uint32_t *)u->data)[e];
        else shk_scatter1(y->data, x->dtype, at, u->data, e, red, es);
    }
    return MP_OK;
}

/* ScatterND without a reduction, int64 tuples: each tuple's slice of
 * `inner` elements copied whole, and tuples whose offsets follow one
 * another (the same leading indices, the last one up by one) copied as one
 * run. PyTorch's slice assignment (`attn[:, :, a:, a:] = u`, torchvision's
 * MViT-V2 relative positions) exports as a tuple per element, consecutive
 * along the last dim: one memcpy a row where the element loop read and
 * converted each index through the generic accessors. In order, as the
 * loop below: a tuple given twice keeps the later update. */
typedef struct {
    const mp_rtensor *x, *u;
    mp_rtensor *y;
    const int64_t *iv, *xs;
    int64_t q, inner;
    size_t es;
    int64_t bad; /* the first tuple found out of range, -1 none */
} shk_runs;

static void shk_runs_range(void *arg, int64_t lo, int64_t hi) {
    shk_runs *r = arg;
    const int64_t q = r->q, inner = r->inner, last = q ? r->x->dims[q - 1] : 0;
    for (int64_t t = lo; t < hi;) {
        const int64_t *p0 = r->iv + t * q;
        int64_t off = 0;
        for (int64_t j = 0; j < q; j++) {
            int64_t i = p0[j], d = r->x->dims[j];
            if (i < -d || i >= d) {
                int64_t none = -1;
                __atomic_compare_exchange_n(&r->bad, &none, t, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
                return;
            }
            off += (i < 0 ? i + d : i) * r->xs[j];
        }
        int64_t n = 1;
        if (inner == 1 && q > 0 && p0[q - 1] >= 0) {
            for (; t + n < hi; n++) {
                const int64_t *p = r->iv + (t + n) * q;
                if (p[q - 1] != p0[q - 1] + n || p[q - 1] >= last || memcmp(p, p0, (size_t)(q - 1) * sizeof *p))
                    break;
            }
        }
        memcpy((char *)r->y->data + (size_t)off * r->es, (const char *)r->u->data + (size_t)(t * inner) * r->es,
               (size_t)(n * inner) * r->es);
        t += n;
    }
}

/* ScatterND without a reduction, int64 tuples: each tuple's slice of
 * `inner` elements copied whole, and tuples whose offsets follow one
 * another (the same leading indices, the last one up by one) copied as one
 * run. PyTorch's slice assignment (`attn[:, :, a:, a:] = u`, torchvision's
 * MViT-V2 relative positions) exports as a tuple per element, consecutive
 * along the last dim: one memcpy a row where the element loop read and
 * converted each index through the generic accessors. The tuples are split
 * over the plan's threads: a tuple given twice (ONNX leaves which update
 * wins undefined, as ONNX Runtime's parallel kernel and PyTorch's
 * index_put_ do) may keep either. */
static mp_status shk_scatter_runs(mp_kctx *k, const mp_rtensor *x, const int64_t *xs, const mp_rtensor *ix,
                                  const mp_rtensor *u, mp_rtensor *y, int64_t tuples, int64_t q, int64_t inner,
                                  size_t es) {
    shk_runs r = {x, u, y, ix->data, xs, q, inner, es, -1};
    if (tuples * inner < (1 << 16)) shk_runs_range(&r, 0, tuples);
    else mp_kparallel(k, tuples, shk_runs_range, &r);
    if (r.bad >= 0) {
        for (int64_t j = 0; j < q; j++) {
            int64_t i = r.iv[r.bad * q + j], d = x->dims[j];
            if (i < -d || i >= d)
                return mp_kfail(k, MP_ERR_USAGE, "index %lld out of range [0, %lld)", (long long)i, (long long)d);
        }
    }
    return MP_OK;
}

/* GatherND / ScatterND: index tuples of length q over data's leading dims
 * (after batch_dims), each selecting a slice of `inner` elements. */
static mp_status shk_nd(mp_kctx *k, bool scatter) {
    const mp_rtensor *x = &k->in[0], *ix = &k->in[1];
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    size_t es = shk_es(k, x->dtype, &st);
    if (st) return st;
    int b = scatter ? 0 : (int)mp_attr_i(k->n, "batch_dims", 0);
    if (ix->rank < 1) return mp_kfail(k, MP_ERR_SHAPE, "indices must have rank >= 1");
    int64_t q = ix->dims[ix->rank - 1];
    if (b < 0 || b + q > x->rank) return mp_kfail(k, MP_ERR_SHAPE, "index tuple too long");
    int64_t batch = 1, inner = 1, xs[MP_MAX_RANK];
    for (int i = 0; i < b; i++) batch *= x->dims[i];
    for (int i = b + (int)q; i < x->rank; i++) inner *= x->dims[i];
    mp_kstrides(x->rank, x->dims, xs);
    int64_t tuples = 1; /* index tuples: the product of the indices' dims but the last */
    for (int i = 0; i < ix->rank - 1; i++) tuples *= ix->dims[i];
    int64_t per_batch = batch ? tuples / batch : 0, bstride = b ? xs[b - 1] : 0;
    const mp_rtensor *upd = scatter ? mp_kin(k, 2) : NULL;
    if (per_batch * batch != tuples || (scatter ? !upd || upd->numel != tuples * inner || upd->dtype != x->dtype
                                                : y->numel != tuples * inner))
        return mp_kfail(k, MP_ERR_SHAPE, "%s do not fit %lld index tuples of %lld elements each",
                        scatter ? "updates" : "output", (long long)tuples, (long long)inner);
    int red = scatter ? shk_reduction(k->n) : 0;
    if (scatter && y->data != x->data) memcpy(y->data, x->data, (size_t)x->numel * es);
    if (scatter && !red && b == 0 && ix->dtype == MP_DT_INT64) return shk_scatter_runs(k, x, xs, ix, upd, y, tuples, q, inner, es);
    for (int64_t bi = 0; bi < batch; bi++)
        for (int64_t t = 0; t < per_batch; t++) {
            int64_t tup = bi * per_batch + t, off = bi * bstride;
            for (int64_t j = 0; j < q; j++) {
                int64_t i;
                if ((st = shk_index(k, ix, tup * q + j, x->dims[b + j], &i))) return st;
                off += i * xs[b + j];
            }
            if (!scatter) {
                memcpy((char *)y->data + (size_t)(tup * inner) * es, (const char *)x->data + (size_t)off * es,
                       (size_t)inner * es);
            } else {
                for (int64_t j = 0; j < inner; j++)
                    shk_scatter1(y->data, x->dtype, off + j, upd->data, tup * inner + j, red, es);
            }
        }
    return MP_OK;
}

mp_status shk_gather_nd(mp_kctx *k) { return shk_nd(k, false); }
mp_status shk_scatter_nd(mp_kctx *k) { return shk_nd(k, true); }

/* Scatter*: the output may be the data's buffer (the kernels copy the data
 * only when it is not), saving a copy of the whole tensor a run. */
mp_status shk_scatter_prepare(mp_kctx *k, size_t *scratch) {
    (void)scratch;
    if (k->n->n_in > 2 && k->n->in[2] != k->n->in[0]) mp_kshare(k, 0); /* not when the updates are the data */
    return MP_OK;
}

typedef struct shk_padrows {
    const mp_rtensor *x;
    mp_rtensor *y;
    size_t es;
    const int64_t *begin, *xs;
    const uint8_t *cbytes;
} shk_padrows;

static void shk_pad_rows(void *arg, int64_t lo, int64_t hi) {
    const shk_padrows *p = arg;
    const mp_rtensor *x = p->x;
    mp_rtensor *y = p->y;
    int r = x->rank;
    int64_t ow = y->dims[r - 1], iw = x->dims[r - 1], left = p->begin[r - 1];
    for (int64_t row = lo; row < hi; row++) {
        char *dst = (char *)y->data + (size_t)(row * ow) * p->es;
        int64_t rem = row, off = 0;
        bool in = iw > 0;
        for (int d = r - 2; d >= 0 && in; d--) {
            int64_t c = rem % y->dims[d] - p->begin[d];
            rem /= y->dims[d];
            if (c < 0 || c >= x->dims[d]) in = false;
            else off += c * p->xs[d];
        }
        if (!in) {
            mp_kfill(dst, ow, p->cbytes, p->es);
            continue;
        }
        mp_kfill(dst, left, p->cbytes, p->es);
        memcpy(dst + (size_t)left * p->es, (const char *)x->data + (size_t)off * p->es, (size_t)iw * p->es);
        mp_kfill(dst + (size_t)(left + iw) * p->es, ow - left - iw, p->cbytes, p->es);
    }
}

/* Pad: constant, reflect, edge, wrap. */
mp_status shk_pad(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    size_t es = shk_es(k, x->dtype, &st);
    if (st) return st;
    int r = x->rank;
    int64_t pads[2 * MP_MAX_RANK], np, axes[MP_MAX_RANK], na = -1, begin[MP_MAX_RANK] = {0};
    double cval = 0;
    if (k->n->opset < 11) {
        const int64_t *v;
        np = mp_attr_ints(k->n, k->n->opset < 2 ? "paddings" : "pads", &v);
        for (int64_t i = 0; i < np && i < 2 * MP_MAX_RANK; i++) pads[i] = v[i];
        cval = mp_attr_f(k->n, "value", 0.0);
    } else {
        np = mp_kints(mp_kin(k, 1), pads, 2 * MP_MAX_RANK);
        const mp_rtensor *cv = mp_kin(k, 2);
        if (cv && cv->numel) cval = mp_kget_f(cv->data, cv->dtype, 0);
        na = mp_kints(mp_kin(k, 3), axes, MP_MAX_RANK);
    }
    int64_t nax = na >= 0 ? na : r;
    if (np != 2 * nax) return mp_kfail(k, MP_ERR_SHAPE, "pads has %lld values for %lld axes", (long long)np, (long long)nax);
    for (int64_t i = 0; i < nax; i++) {
        int a = na >= 0 ? shk_axis(k, axes[i], r, &st) : (int)i;
        if (st) return st;
        /* a pad beyond +-2^40 cannot give a tensor that fits in memory */
        if (pads[i] > (INT64_C(1) << 40) || pads[i] < -(INT64_C(1) << 40) || pads[i + nax] > (INT64_C(1) << 40) ||
            pads[i + nax] < -(INT64_C(1) << 40))
            return mp_kfail(k, MP_ERR_SHAPE, "pads (%lld, %lld) for axis %d are out of range", (long long)pads[i],
                            (long long)pads[i + nax], a);
        begin[a] = pads[i];
    }
    const char *mode = mp_attr_s(k->n, "mode", "constant");
    int m = !strcmp(mode, "reflect") ? 1 : !strcmp(mode, "edge") ? 2 : !strcmp(mode, "wrap") ? 3 : 0;
    uint8_t cbytes[16];
    mp_kset_f(cbytes, x->dtype, 0, cval);
    int64_t xs[MP_MAX_RANK];
    mp_kstrides(r, x->dims, xs);
    bool grow = m == 0 && r >= 1;
    for (int d = 0; d < r && grow; d++) grow = begin[d] >= 0 && y->dims[d] - begin[d] >= x->dims[d];
    if (grow) {
        /* constant padding that only grows: whole rows of the last axis,
         * the input's row copied between the fill (every row a row of
         * fill where a leading index falls in the padding) */
        shk_padrows p = {x, y, es, begin, xs, cbytes};
        int64_t rows = y->dims[r - 1] ? y->numel / y->dims[r - 1] : 0;
        mp_kparallel(k, rows, shk_pad_rows, &p);
        return MP_OK;
    }
    for (int64_t e = 0; e < y->numel; e++) {
        int64_t rem = e, off = 0;
        bool out = false;
        for (int d = r - 1; d >= 0; d--) {
            int64_t c = rem % y->dims[d] - begin[d], n = x->dims[d];
            rem /= y->dims[d];
            if (c < 0 || c >= n) {
                if (m == 0 || n == 0) { out = true; break; }
                if (m == 2) c = c < 0 ? 0 : n - 1;
                else if (m == 3) c = ((c % n) + n) % n;
                else if (n == 1) c = 0;
                else {
                    int64_t p = 2 * (n - 1);
                    c = ((c % p) + p) % p;
                    if (c >= n) c = p - c;
                }
            }
            off += c * xs[d];
        }
        if (out) memcpy((char *)y->data + (size_t)e * es, cbytes, es);
        else mp_kcopy1(y->data, e, x->data, off, es);
    }
    return MP_OK;
}

mp_status shk_range(mp_kctx *k) {
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    mp_rtensor *y = &k->out[0];
    if (mp_kis_float(y->dtype)) {
        double s = mp_kget_f(k->in[0].data, k->in[0].dtype, 0), d = mp_kget_f(k->in[2].data, k->in[2].dtype, 0);
        for (int64_t i = 0; i < y->numel; i++) mp_kset_f(y->data, y->dtype, i, s + (double)i * d);
    } else {
        int64_t s = mp_kget_i(k->in[0].data, k->in[0].dtype, 0), d = mp_kget_i(k->in[2].data, k->in[2].dtype, 0);
        for (int64_t i = 0; i < y->numel; i++) mp_kset_i(y->data, y->dtype, i, s + i * d);
    }
    return MP_OK;
}

/* The value of a one-element tensor attribute as the output dtype's bytes. */
static mp_status shk_attr_scalar(mp_kctx *k, const mp_tensor *t, int dt, uint8_t *bytes) {
    memset(bytes, 0, 16);
    if (!t) return MP_OK;
    int64_t *iv = NULL;
    double *fv = NULL;
    if (mp_tensor_read(k->g->model, t, &iv, &fv) != MP_OK) return mp_kfail(k, MP_ERR_FORMAT, "cannot read the value attribute");
    if (fv) mp_kset_f(bytes, dt, 0, fv[0]);
    else if (iv) mp_kset_i(bytes, dt, 0, iv[0]);
    return MP_OK;
}

mp_status shk_constant_of_shape(mp_kctx *k) {
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    size_t es = shk_es(k, y->dtype, &st);
    uint8_t v[16];
    if (!st) {
        const mp_attr *va = mp_node_attr(k->n, "value");
        st = shk_attr_scalar(k, va ? va->t : NULL, y->dtype, v);
    }
    if (st) return st;
    mp_kfill(y->data, y->numel, v, es);
    return MP_OK;
}

mp_status shk_constant(mp_kctx *k) {
    mp_rtensor *y = &k->out[0];
    for (int i = 0; i < k->n->n_attr; i++) {
        const mp_attr *a = &k->n->attr[i];
        if (mp_streq(a->name, "value") && a->t) {
            const mp_tensor *t = a->t;
            if (t->loc == MP_DATA_RAW && t->size == mp_dtype_bytes(t->dtype, t->numel) &&
                t->dtype == y->dtype) {
                memcpy(y->data, t->data, t->size);
                return MP_OK;
            }
            int64_t *iv = NULL;
            double *fv = NULL;
            if (mp_tensor_read(k->g->model, t, &iv, &fv) != MP_OK)
                return mp_kfail(k, MP_ERR_UNSUPPORTED, "cannot read the constant's contents");
            for (int64_t j = 0; j < y->numel; j++)
                if (fv) mp_kset_f(y->data, y->dtype, j, fv[j]);
                else mp_kset_i(y->data, y->dtype, j, iv[j]);
            return MP_OK;
        }
        if (mp_streq(a->name, "value_float")) mp_kset_f(y->data, y->dtype, 0, a->type == MP_ATTR_INT ? (double)a->i : a->f);
        else if (mp_streq(a->name, "value_int")) mp_kset_i(y->data, y->dtype, 0, a->i);
        else if (mp_streq(a->name, "value_floats"))
            for (int j = 0; j < a->n; j++) mp_kset_f(y->data, y->dtype, j, a->floats[j]);
        else if (mp_streq(a->name, "value_ints"))
            for (int j = 0; j < a->n; j++) mp_kset_i(y->data, y->dtype, j, a->ints[j]);
        else continue;
        return MP_OK;
    }
    return mp_kfail(k, MP_ERR_UNSUPPORTED, "constant of this kind");
}

mp_status shk_eye_like(mp_kctx *k) {
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    mp_rtensor *y = &k->out[0];
    int64_t kk = mp_attr_i(k->n, "k", 0), rows = y->dims[0], cols = y->dims[1];
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) mp_kset_i(y->data, y->dtype, i * cols + j, j - i == kk);
    return MP_OK;
}

mp_status mp_ktrilu(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    size_t es = shk_es(k, x->dtype, &st);
    if (st) return st;
    int64_t kk = 0;
    mp_kints(mp_kin(k, 1), &kk, 1);
    bool upper = mp_attr_i(k->n, "upper", 1) != 0;
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
    for (int64_t e = 0; e < x->numel; e++) {
        int64_t j = e % cols, i = (e / cols) % rows;
        bool keep = upper ? j - i >= kk : j - i <= kk;
        if (keep) mp_kcopy1(y->data, e, x->data, e, es);
        else memset((char *)y->data + (size_t)e * es, 0, es);
    }
    return MP_OK;
}

mp_status shk_one_hot(mp_kctx *k) {
    const mp_rtensor *ix = &k->in[0], *vals = &k->in[2];
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    size_t es = shk_es(k, y->dtype, &st);
    int axis = st ? 0 : shk_axis(k, mp_attr_i(k->n, "axis", -1), y->rank, &st);
    if (st) return st;
    if (vals->numel < 2 || k->in[1].numel < 1) return mp_kfail(k, MP_ERR_SHAPE, "values must hold [off, on]");
    int64_t depth = mp_kf2i(mp_kget_f(k->in[1].data, k->in[1].dtype, 0)), outer, inner;
    if (depth != y->dims[axis]) return mp_kfail(k, MP_ERR_SHAPE, "depth does not match the output");
    mp_kouter_inner(y->rank, y->dims, axis, &outer, &inner);
    for (int64_t e = 0; e < y->numel; e++) mp_kcopy1(y->data, e, vals->data, 0, es);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t i = mp_kf2i(mp_kget_f(ix->data, ix->dtype, o * inner + in));
            if (i < 0) i += depth;
            if (i >= 0 && i < depth) mp_kcopy1(y->data, (o * depth + i) * inner + in, vals->data, 1, es);
        }
    return MP_OK;
}

mp_status shk_cumsum(mp_kctx *k) {
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    int64_t ax = 0;
    mp_kints(mp_kin(k, 1), &ax, 1);
    mp_status st = MP_OK;
    int axis = shk_axis(k, ax, x->rank, &st);
    if (st) return st;
    bool excl = mp_attr_i(k->n, "exclusive", 0) != 0, rev = mp_attr_i(k->n, "reverse", 0) != 0;
    bool fl = mp_kis_float(x->dtype);
    int64_t outer, inner, n = x->dims[axis];
    mp_kouter_inner(x->rank, x->dims, axis, &outer, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            double sf = 0;
            int64_t si = 0;
            for (int64_t t = 0; t < n; t++) {
                int64_t j = rev ? n - 1 - t : t, at = (o * n + j) * inner + in;
                double vf = fl ? mp_kget_f(x->data, x->dtype, at) : 0;
                int64_t vi = fl ? 0 : mp_kget_i(x->data, x->dtype, at);
                if (!excl) sf += vf, si += vi;
                if (fl) mp_kset_f(y->data, y->dtype, at, sf);
                else mp_kset_i(y->data, y->dtype, at, si);
                if (excl) sf += vf, si += vi;
            }
        }
    return MP_OK;
}

/* DepthToSpace / SpaceToDepth as a strided copy over a rank-6 view. */
static mp_status shk_space_depth(mp_kctx *k, bool to_space) {
    const mp_rtensor *x = &k->in[0];
    mp_status st = MP_OK;
    size_t es = shk_es(k, x->dtype, &st);
    if (st) return st;
    if (x->rank != 4) return mp_kfail(k, MP_ERR_SHAPE, "input must be 4-D");
    int64_t b = mp_attr_i(k->n, "blocksize", 1), N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    bool crd = !strcmp(mp_attr_s(k->n, "mode", "DCR"), "CRD");
    int64_t dims[6], istr[6];
    if (to_space) {
        int64_t c = C / (b * b);
        /* output [N, c, H, b1, W, b2] */
        dims[0] = N, dims[1] = c, dims[2] = H, dims[3] = b, dims[4] = W, dims[5] = b;
        int64_t cs = H * W;
        istr[0] = C * cs, istr[2] = W, istr[4] = 1;
        if (crd) istr[1] = b * b * cs, istr[3] = b * cs, istr[5] = cs;
        else istr[1] = cs, istr[3] = b * c * cs, istr[5] = c * cs;
    } else {
        int64_t h = H / b, w = W / b;
        /* output [N, b1, b2, C, h, w] (channel = (b1*b + b2)*C + c) */
        dims[0] = N, dims[1] = b, dims[2] = b, dims[3] = C, dims[4] = h, dims[5] = w;
        istr[0] = C * H * W, istr[1] = W, istr[2] = 1, istr[3] = H * W, istr[4] = b * W, istr[5] = b;
    }
    mp_kcopy_strided(k->out[0].data, x->data, es, 6, dims, istr, 0);
    return MP_OK;
}

mp_status shk_depth_to_space(mp_kctx *k) { return shk_space_depth(k, true); }
mp_status shk_space_to_depth(mp_kctx *k) { return shk_space_depth(k, false); }

mp_status shk_reverse_sequence(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *lens = &k->in[1];
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    size_t es = shk_es(k, x->dtype, &st);
    if (st) return st;
    int64_t ba64 = mp_attr_i(k->n, "batch_axis", 1), ta64 = mp_attr_i(k->n, "time_axis", 0);
    if ((ba64 != 0 && ba64 != 1) || (ta64 != 0 && ta64 != 1) || ba64 == ta64 || x->rank < 2)
        return mp_kfail(k, MP_ERR_SHAPE, "batch_axis %lld and time_axis %lld must be 0 and 1 of a rank >= 2 input",
                        (long long)ba64, (long long)ta64);
    int ba = (int)ba64, ta = (int)ta64;
    if (lens->numel < x->dims[ba])
        return mp_kfail(k, MP_ERR_SHAPE, "sequence_lens has %lld values for a batch of %lld", (long long)lens->numel,
                        (long long)x->dims[ba]);
    int64_t xs[MP_MAX_RANK];
    mp_kstrides(x->rank, x->dims, xs);
    for (int64_t e = 0; e < x->numel; e++) {
        int64_t t = (e / xs[ta]) % x->dims[ta], b = (e / xs[ba]) % x->dims[ba];
        int64_t L = mp_kget_i(lens->data, lens->dtype, b);
        if (L < 0 || L > x->dims[ta])
            return mp_kfail(k, MP_ERR_SHAPE, "sequence_lens[%lld] is %lld, outside [0, %lld]", (long long)b,
                            (long long)L, (long long)x->dims[ta]);
        int64_t src = t < L ? e + (L - 1 - 2 * t) * xs[ta] : e;
        mp_kcopy1(y->data, e, x->data, src, es);
    }
    return MP_OK;
}

/* Data-dependent sizes: the output is shaped here (mp_kout_alloc). */
/* Whether element e of x is non-zero: bytes (bool, uint8, int8) and fp32
 * read directly (a detector's score masks), other types through the
 * getter. */
static inline bool shk_nz(const mp_rtensor *x, int kind, int64_t e) {
    switch (kind) {
    case 1: return ((const uint8_t *)x->data)[e] != 0;
    case 2: return ((const float *)x->data)[e] != 0.0f;
    default: return mp_kget_f(x->data, x->dtype, e) != 0;
    }
}

mp_status shk_non_zero(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    int kind = x->dtype == MP_DT_BOOL || x->dtype == MP_DT_UINT8 || x->dtype == MP_DT_INT8 ? 1
               : x->dtype == MP_DT_FLOAT                                                ? 2
                                                                                        : 0;
    int64_t cnt = 0;
    for (int64_t e = 0; e < x->numel; e++) cnt += shk_nz(x, kind, e);
    int64_t dims[2] = {x->rank, cnt};
    mp_status st = mp_kout_shape(k, 0, 2, dims);
    if (st) return st;
    int64_t *o = k->out[0].data, c = 0;
    for (int64_t e = 0; e < x->numel; e++) {
        if (!shk_nz(x, kind, e)) continue;
        int64_t rem = e;
        for (int d = x->rank - 1; d >= 0; d--) {
            o[d * cnt + c] = rem % x->dims[d];
            rem /= x->dims[d];
        }
        c++;
    }
    return MP_OK;
}

mp_status shk_compress(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *cnd = &k->in[1];
    mp_status st = MP_OK;
    size_t es = shk_esize(k, x->dtype, &st);
    if (st) return st;
    const mp_attr *ax = mp_node_attr(k->n, "axis");
    int axis = -1;
    int64_t outer = 1, inner = 1, n = x->numel;
    if (ax) {
        axis = shk_axis(k, ax->i, x->rank, &st);
        if (st) return st;
        mp_kouter_inner(x->rank, x->dims, axis, &outer, &inner);
        n = x->dims[axis];
    }
    int64_t m = n < cnd->numel ? n : cnd->numel, sel = 0;
    for (int64_t i = 0; i < m; i++) sel += mp_kget_i(cnd->data, cnd->dtype, i) != 0;
    int64_t dims[MP_MAX_RANK];
    int r = ax ? x->rank : 1;
    for (int i = 0; i < r; i++) dims[i] = ax ? (i == axis ? sel : x->dims[i]) : sel;
    if ((st = mp_kout_shape(k, 0, r, dims))) return st;
    char *o = k->out[0].data;
    for (int64_t a = 0; a < outer; a++)
        for (int64_t i = 0; i < m; i++) {
            if (!mp_kget_i(cnd->data, cnd->dtype, i)) continue;
            memcpy(o, (const char *)x->data + (size_t)((a * n + i) * inner) * es, (size_t)inner * es);
            o += (size_t)inner * es;
        }
    return MP_OK;
}

/* Unique (flattened or along an axis): sorted or in order of first
 * appearance; outputs Y, indices, inverse_indices, counts. */
typedef struct shk_uq {
    const char *x;
    int dt;
    int64_t row;
} shk_uq;

static int shk_row_cmp(const shk_uq *u, int64_t a, int64_t b) {
    for (int64_t j = 0; j < u->row; j++) {
        double x = mp_kget_f(u->x, u->dt, a * u->row + j), y = mp_kget_f(u->x, u->dt, b * u->row + j);
        if (x != y) return x < y ? -1 : 1;
    }
    return 0;
}

mp_status shk_unique(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_status st = MP_OK;
    size_t es = shk_esize(k, x->dtype, &st);
    if (st) return st;
    const mp_attr *ax = mp_node_attr(k->n, "axis");
    bool sorted = mp_attr_i(k->n, "sorted", 1) != 0;
    int axis = ax ? shk_axis(k, ax->i, x->rank, &st) : -1;
    if (st) return st;
    int64_t outer = 1, inner = 1, n = x->numel;
    if (ax) {
        mp_kouter_inner(x->rank, x->dims, axis, &outer, &inner);
        n = x->dims[axis];
    }
    /* a "row" is one index along the axis: outer x inner elements, gathered */
    int64_t row = outer * inner;
    char *rows = malloc((size_t)(n * row) * es + 1);
    int64_t *first = malloc(sizeof(int64_t) * (size_t)(n + 1)), *inv = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t *cnt = calloc((size_t)n + 1, sizeof(int64_t)), *order = malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!rows || !first || !inv || !cnt || !order) {
        st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t a = 0; a < outer; a++)
            memcpy(rows + (size_t)(i * row + a * inner) * es, (const char *)x->data + (size_t)((a * n + i) * inner) * es,
                   (size_t)inner * es);
    shk_uq u = {rows, x->dtype, row};
    int64_t nu = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = 0;
        while (j < nu && shk_row_cmp(&u, first[j], i) != 0) j++;
        if (j == nu) first[nu++] = i;
        inv[i] = j;
        cnt[j]++;
    }
    for (int64_t j = 0; j < nu; j++) order[j] = j;
    if (sorted) /* insertion sort of the unique rows (small inputs) */
        for (int64_t a = 1; a < nu; a++)
            for (int64_t b = a; b > 0 && shk_row_cmp(&u, first[order[b - 1]], first[order[b]]) > 0; b--) {
                int64_t t = order[b];
                order[b] = order[b - 1];
                order[b - 1] = t;
            }
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)(nu + 1));
    if (!pos) {
        st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t j = 0; j < nu; j++) pos[order[j]] = j;
    int64_t dims[MP_MAX_RANK];
    int r = ax ? x->rank : 1;
    for (int i = 0; i < r; i++) dims[i] = ax ? (i == axis ? nu : x->dims[i]) : nu;
    st = mp_kout_shape(k, 0, r, dims);
    for (int o = 1; !st && o < k->n_out && o < 4; o++) {
        int64_t d = o == 2 ? n : nu;
        if (k->n->out[o] >= 0) st = mp_kout_shape(k, o, 1, &d);
    }
    if (!st) {
        char *y = k->out[0].data;
        for (int64_t j = 0; j < nu; j++)
            for (int64_t a = 0; a < outer; a++)
                memcpy(y + (size_t)((a * nu + j) * inner) * es, rows + (size_t)(first[order[j]] * row + a * inner) * es,
                       (size_t)inner * es);
        for (int64_t j = 0; j < nu; j++) {
            if (k->n_out > 1 && k->out[1].data) ((int64_t *)k->out[1].data)[j] = first[order[j]];
            if (k->n_out > 3 && k->out[3].data) ((int64_t *)k->out[3].data)[j] = cnt[order[j]];
        }
        for (int64_t i = 0; i < n && k->n_out > 2 && k->out[2].data; i++) ((int64_t *)k->out[2].data)[i] = pos[inv[i]];
    }
    free(pos);
done:
    free(rows);
    free(first);
    free(inv);
    free(cnt);
    free(order);
    return st;
}