/* Neural-network operators: convolutions, pooling, normalizations,
 * softmax, reductions, Dropout and resizing.
 *
 * Each operator's shape rule and cost rule sit together below, with the
 * rule in a comment. docs/COUNTING.md ("Neural-network operators") holds
 * the same rules with worked examples.
 *
 * Layout conventions: X is [N, C, D1, ..., Dk] (k spatial dims). Unknown
 * dims (< 0) flow through: an output dim that depends on an unknown input
 * dim is unknown, except where the window leaves the dim unchanged (then
 * the symbol is kept). */
#include "ops/kernel.h"

#include <math.h>
#include <stdlib.h>

/* ---- small shared helpers ---- */

static mp_status nn_arity(mp_ctx *c, int lo, int hi) {
    int n = c->n->n_in;
    if (n < lo || n > hi) return mp_fail(c, "expects %d to %d inputs, got %d", lo, hi, n);
    return MP_OK;
}

static int64_t nn_ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 && a > 0); }

/* Product of v's dims from `from` on, skipping axis `skip` (-1: none), for
 * costing: 0 with MP_COST_UNKNOWN when unknown. */
static uint64_t nn_prod(const mp_value *v, int from, int skip, mp_cost *k) {
    if (!mp_shape_known(v)) {
        k->flags |= MP_COST_UNKNOWN;
        return 0;
    }
    bool ovf = false;
    uint64_t p = 1;
    for (int i = from; i < v->rank; i++)
        if (i != skip) p = mp_umul(p, (uint64_t)v->dims[i], &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
    return p;
}

/* FLOPs = per * elements of value v. */
static void nn_cost_per_elem(mp_cost *k, uint64_t per, const mp_value *v) {
    bool ovf = false;
    k->flops = mp_umul(per, mp_cnumel(v, k), &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* Output 0 is an identity of x (shape already set): pass x's known
 * contents through. */
static mp_status nn_pass_contents(mp_ctx *c, const mp_value *x) {
    int64_t cnt;
    if (!mp_out(c, 0) || !mp_shape_known(x)) return MP_OK;
    if (mp_dtype_is_float(x->dtype)) {
        const double *f;
        if (mp_floats(c, 0, &f, &cnt) && cnt == mp_value_numel(x))
            return mp_set_floats(c, 0, f, cnt);
    } else {
        const int64_t *v;
        if (mp_ints(c, 0, &v, &cnt) && cnt == mp_value_numel(x)) return mp_set_ints(c, 0, v, cnt);
    }
    return MP_OK;
}

/* Axes of a reduction or normalization: in range, no repeats. Writes the
 * normalised axes to out. */
static mp_status nn_axes(mp_ctx *c, const int64_t *axes, int64_t n, int rank, int *out) {
    if (n > rank) return mp_fail(c, "%lld axes for rank %d", (long long)n, rank);
    for (int64_t i = 0; i < n; i++) {
        int a = mp_axis(axes[i], rank);
        if (a < 0) return mp_fail(c, "axis %lld out of range for rank %d", (long long)axes[i], rank);
        for (int64_t j = 0; j < i; j++)
            if (out[j] == a) return mp_fail(c, "axis %lld repeated", (long long)axes[i]);
        out[i] = a;
    }
    return MP_OK;
}

/* ---- sliding windows (Conv, pooling) ----
 * Output size of spatial axis i, with dk = (kernel - 1) * dilation + 1:
 *   auto_pad SAME_UPPER/SAME_LOWER:  ceil(in / stride)
 *   auto_pad VALID:                  pads are 0, then as NOTSET
 *   NOTSET: floor((in + pad_begin + pad_end - dk) / stride) + 1
 *   ceil_mode (pooling): ceil(...) instead of floor(...), and a last
 *     window that would start inside the end padding is dropped
 *     (PyTorch's and onnxruntime's rule). */

enum { NN_PAD_NOTSET, NN_PAD_SAME_UPPER, NN_PAD_SAME_LOWER, NN_PAD_VALID };

typedef struct nn_win {
    int k;                            /* spatial dims */
    int64_t kernel[MP_MAX_RANK];      /* < 0: unknown */
    int64_t stride[MP_MAX_RANK];
    int64_t dil[MP_MAX_RANK];
    int64_t pad[2 * MP_MAX_RANK];     /* k begins, then k ends */
    int auto_pad;
    bool ceil_mode;
} nn_win;

/* Ints attribute `name` of length k (or absent/empty: all `def`). */
static mp_status nn_ints_k(mp_ctx *c, const char *name, int k, int64_t def, int64_t min,
                           int64_t *out) {
    const int64_t *v;
    int n = mp_attr_ints(c->n, name, &v);
    if (n <= 0) {
        for (int i = 0; i < k; i++) out[i] = def;
        return MP_OK;
    }
    if (n != k) return mp_fail(c, "%s has %d values for %d spatial dims", name, n, k);
    for (int i = 0; i < k; i++) {
        if (v[i] < min) return mp_fail(c, "%s[%d] = %lld is below %lld", name, i,
                                       (long long)v[i], (long long)min);
        out[i] = v[i];
    }
    return MP_OK;
}

/* Read strides, dilations, pads, auto_pad (and ceil_mode) for k spatial
 * dims; w->kernel is filled by the caller. */
static mp_status nn_win_read(mp_ctx *c, int k, nn_win *w) {
    mp_status st;
    w->k = k;
    if ((st = nn_ints_k(c, "strides", k, 1, 1, w->stride))) return st;
    if ((st = nn_ints_k(c, "dilations", k, 1, 1, w->dil))) return st;
    const int64_t *p;
    int n = mp_attr_ints(c->n, "pads", &p);
    if (n > 0 && n != 2 * k) return mp_fail(c, "pads has %d values for %d spatial dims", n, k);
    for (int i = 0; i < 2 * k; i++) w->pad[i] = n > 0 ? p[i] : 0;
    const char *ap = mp_attr_s(c->n, "auto_pad", "NOTSET");
    if (!strcmp(ap, "NOTSET") || !*ap) w->auto_pad = NN_PAD_NOTSET;
    else if (!strcmp(ap, "SAME_UPPER")) w->auto_pad = NN_PAD_SAME_UPPER;
    else if (!strcmp(ap, "SAME_LOWER")) w->auto_pad = NN_PAD_SAME_LOWER;
    else if (!strcmp(ap, "VALID")) w->auto_pad = NN_PAD_VALID;
    else return mp_fail(c, "unknown auto_pad '%s'", ap);
    w->ceil_mode = mp_attr_i(c->n, "ceil_mode", 0) != 0;
    return MP_OK;
}

/* Output size of spatial axis i for input size `in` (see the rule above). */
static mp_status nn_win_dim(mp_ctx *c, const nn_win *w, int i, int64_t in, int64_t *out) {
    int64_t s = w->stride[i], kk = w->kernel[i], dk;
    if (s > INT64_MAX / 4) return mp_fail(c, "stride on spatial axis %d is too large", i);
    if (w->auto_pad == NN_PAD_SAME_UPPER || w->auto_pad == NN_PAD_SAME_LOWER) {
        *out = in >= 0 ? nn_ceil_div(in, s) : (s == 1 ? in : MP_DIM_ANON);
        return MP_OK;
    }
    if (kk < 0) {
        *out = MP_DIM_ANON;
        return MP_OK;
    }
    if (__builtin_mul_overflow(kk - 1, w->dil[i], &dk) || dk > INT64_MAX / 4)
        return mp_fail(c, "kernel extent on spatial axis %d is too large", i);
    dk += 1;
    int64_t pb = 0, pe = 0;
    if (w->auto_pad == NN_PAD_NOTSET) {
        pb = w->pad[i];
        pe = w->pad[i + w->k];
        if (pb < -INT64_MAX / 4 || pb > INT64_MAX / 4 || pe < -INT64_MAX / 4 || pe > INT64_MAX / 4)
            return mp_fail(c, "pads on spatial axis %d are too large", i);
    }
    if (in < 0) {
        /* a window that leaves the size unchanged keeps the symbol */
        *out = (s == 1 && pb + pe == dk - 1) ? in : MP_DIM_ANON;
        return MP_OK;
    }
    if (in > INT64_MAX / 4) return mp_fail(c, "spatial dim %d is too large", i);
    int64_t span = in + pb + pe - dk;
    if (span < 0)
        return mp_fail(c, "window %lld (kernel %lld, dilation %lld) exceeds the padded input "
                       "%lld on spatial axis %d", (long long)dk, (long long)kk,
                       (long long)w->dil[i], (long long)(in + pb + pe), i);
    int64_t o = span / s + 1;
    if (w->ceil_mode) {
        o = nn_ceil_div(span, s) + 1;
        if ((o - 1) * s >= in + pb) o--;
    }
    *out = o;
    return MP_OK;
}

/* Output dims [N, C, out spatial...] from x's dims. */
static mp_status nn_win_out(mp_ctx *c, const nn_win *w, const mp_value *x, int64_t n_dim,
                            int64_t c_dim, int64_t *dims) {
    mp_status st;
    dims[0] = n_dim;
    dims[1] = c_dim;
    for (int i = 0; i < w->k; i++)
        if ((st = nn_win_dim(c, w, i, mp_value_dim(x, 2 + i), &dims[2 + i]))) return st;
    return MP_OK;
}

/* Spatial dims k agreed by X's rank and, if given, the kernel rank and
 * kernel_shape's length; -1 when none is known. */
static mp_status nn_spatial(mp_ctx *c, const mp_value *x, int w_rank, int *k) {
    *k = -1;
    if (x->rank >= 0) {
        if (x->rank < 3)
            return mp_fail(c, "X must be [N, C, spatial...], got rank %d", x->rank);
        *k = x->rank - 2;
    }
    if (w_rank >= 0) {
        if (w_rank < 3) return mp_fail(c, "W must have rank >= 3, got %d", w_rank);
        if (*k >= 0 && w_rank - 2 != *k)
            return mp_fail(c, "W has rank %d, X has rank %d", w_rank, *k + 2);
        *k = w_rank - 2;
    }
    const int64_t *ks;
    int n = mp_attr_ints(c->n, "kernel_shape", &ks);
    if (n >= 0) {
        if (*k >= 0 && n != *k)
            return mp_fail(c, "kernel_shape has %d values for %d spatial dims", n, *k);
        if (n == 0) return mp_fail(c, "kernel_shape is empty");
        *k = n;
    }
    if (*k + 2 > MP_MAX_RANK) return mp_fail(c, "rank %d is above the limit %d", *k + 2, MP_MAX_RANK);
    return MP_OK;
}

/* Kernel from kernel_shape, else from W's dims 2.. (w may be NULL). */
static mp_status nn_kernel(mp_ctx *c, const mp_value *w, nn_win *win) {
    const int64_t *ks;
    int n = mp_attr_ints(c->n, "kernel_shape", &ks);
    for (int i = 0; i < win->k; i++) {
        int64_t wd = mp_value_dim(w, 2 + i);
        if (n > 0) {
            if (ks[i] <= 0) return mp_fail(c, "kernel_shape[%d] = %lld", i, (long long)ks[i]);
            if (wd >= 0 && wd != ks[i])
                return mp_fail(c, "kernel_shape[%d] = %lld but W has %lld", i,
                               (long long)ks[i], (long long)wd);
            win->kernel[i] = ks[i];
        } else {
            if (wd == 0) return mp_fail(c, "W has an empty kernel dim %d", i);
            win->kernel[i] = wd;
        }
    }
    return MP_OK;
}

/* Bias B, if present: [M]. */
static mp_status nn_check_bias(mp_ctx *c, const mp_value *b, int64_t m) {
    if (!b || b->rank < 0) return MP_OK;
    if (b->rank != 1) return mp_fail(c, "bias must have rank 1, got %d", b->rank);
    if (b->dims[0] >= 0 && m >= 0 && b->dims[0] != m)
        return mp_fail(c, "bias has %lld values for %lld output channels",
                       (long long)b->dims[0], (long long)m);
    return MP_OK;
}

/* ---- Conv ----
 * X [N, C, D...], W [M, C/group, k...], B [M] optional -> Y [N, M, O...].
 * MACs  = prod(kernel) * (C/group) * M * N * prod(O) = numel(W) * N * prod(O)
 * FLOPs = 2 * MACs + (B ? numel(Y) : 0)
 * W and B are parameters. */

mp_status mp_conv_infer(mp_ctx *c, int xi, int wi, int bi, int out_dtype) {
    mp_status st;
    mp_value *x, *w, *b = bi >= 0 ? mp_in(c, bi) : NULL;
    if ((st = mp_need_in(c, xi, "X", &x)) || (st = mp_need_in(c, wi, "W", &w))) return st;
    int k;
    if ((st = nn_spatial(c, x, w->rank, &k))) return st;
    int dt = out_dtype ? out_dtype : x->dtype;
    if (k < 0) return mp_set_out(c, 0, dt, -1, NULL);
    int64_t group = mp_attr_i(c->n, "group", 1);
    if (group < 1) return mp_fail(c, "group = %lld", (long long)group);
    int64_t cin = mp_value_dim(x, 1), wc = mp_value_dim(w, 1), m = mp_value_dim(w, 0);
    if (cin >= 0 && wc >= 0 && cin != wc * group)
        return mp_fail(c, "X has %lld channels but W expects %lld (W dim 1 = %lld, group %lld)",
                       (long long)cin, (long long)(wc * group), (long long)wc, (long long)group);
    if (m >= 0 && m % group != 0)
        return mp_fail(c, "%lld output channels are not divisible by group %lld",
                       (long long)m, (long long)group);
    if ((st = nn_check_bias(c, b, m))) return st;
    if (m < 0 && b && b->rank == 1) m = b->dims[0];
    nn_win win;
    if ((st = nn_win_read(c, k, &win)) || (st = nn_kernel(c, w, &win))) return st;
    int64_t dims[MP_MAX_RANK];
    if ((st = nn_win_out(c, &win, x, mp_value_dim(x, 0), m, dims))) return st;
    return mp_set_out(c, 0, dt, k + 2, dims);
}

static mp_status infer_conv(mp_ctx *c) {
    mp_status st = nn_arity(c, 2, 3);
    return st ? st : mp_conv_infer(c, 0, 1, 2, 0);
}

/* numel(W) x N x prod(spatial of `sp`), plus the bias on every output
 * element: Conv takes the output's spatial dims, ConvTranspose the
 * input's. */
static void nn_cost_weight_window(mp_ctx *c, mp_cost *k, const mp_value *sp) {
    bool ovf = false;
    uint64_t wn = nn_prod(mp_in(c, 1), 0, -1, k);
    uint64_t ns = nn_prod(sp, 0, 1, k);
    k->macs = mp_umul(wn, ns, &ovf);
    k->flops = mp_umul(2, k->macs, &ovf);
    if (mp_in(c, 2)) k->flops = mp_uadd(k->flops, mp_cnumel(mp_out(c, 0), k), &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* W: M * C/group * prod(kernel); spatial: N * prod(out spatial) */
static void cost_conv(mp_ctx *c, mp_cost *k) { nn_cost_weight_window(c, k, mp_out(c, 0)); }

/* ---- ConvTranspose ----
 * X [N, C, D...], W [C, M/group, k...], B [M] -> Y [N, M, O...] with
 *   O = output_shape (its last k values) when given, else
 *   SAME_UPPER/SAME_LOWER: D * stride
 *   NOTSET/VALID: stride * (D - 1) + output_padding + dk - pad_begin - pad_end
 * MACs  = prod(kernel) * C * (M/group) * N * prod(D) = numel(W) * N * prod(D)
 * FLOPs = 2 * MACs + (B ? numel(Y) : 0) */

static mp_status infer_conv_transpose(mp_ctx *c) {
    mp_status st;
    mp_value *x, *w, *b = mp_in(c, 2);
    if ((st = nn_arity(c, 2, 3)) || (st = mp_need_in(c, 0, "X", &x)) ||
        (st = mp_need_in(c, 1, "W", &w)))
        return st;
    int k;
    if ((st = nn_spatial(c, x, w->rank, &k))) return st;
    if (k < 0) return mp_set_out(c, 0, x->dtype, -1, NULL);
    int64_t group = mp_attr_i(c->n, "group", 1);
    if (group < 1) return mp_fail(c, "group = %lld", (long long)group);
    int64_t cin = mp_value_dim(x, 1), wc = mp_value_dim(w, 0), wm = mp_value_dim(w, 1);
    if (cin >= 0 && wc >= 0 && cin != wc)
        return mp_fail(c, "X has %lld channels but W has %lld input channels", (long long)cin,
                       (long long)wc);
    if (wc >= 0 && wc % group != 0)
        return mp_fail(c, "%lld input channels are not divisible by group %lld", (long long)wc,
                       (long long)group);
    int64_t m = mp_dim_mul(wm, group);
    if ((st = nn_check_bias(c, b, m))) return st;
    if (m < 0 && b && b->rank == 1) m = b->dims[0];

    nn_win win;
    if ((st = nn_win_read(c, k, &win)) || (st = nn_kernel(c, w, &win))) return st;
    int64_t opad[MP_MAX_RANK];
    if ((st = nn_ints_k(c, "output_padding", k, 0, 0, opad))) return st;
    const int64_t *oshape;
    int n_os = mp_attr_ints(c->n, "output_shape", &oshape);
    if (n_os > 0 && n_os != k && n_os != k + 2)
        return mp_fail(c, "output_shape has %d values for %d spatial dims", n_os, k);

    int64_t dims[MP_MAX_RANK];
    dims[0] = mp_value_dim(x, 0);
    dims[1] = m;
    for (int i = 0; i < k; i++) {
        int64_t in = mp_value_dim(x, 2 + i), s = win.stride[i], kk = win.kernel[i], o;
        if (n_os > 0) {
            o = oshape[n_os - k + i];
            if (o < 0) return mp_fail(c, "output_shape[%d] = %lld", i, (long long)o);
        } else if (win.auto_pad == NN_PAD_SAME_UPPER || win.auto_pad == NN_PAD_SAME_LOWER) {
            o = mp_dim_mul(in, s);
        } else if (kk < 0 || in < 0) {
            o = MP_DIM_ANON;
        } else {
            /* s * (in - 1) + output_padding + (kk - 1) * dil + 1 - pads, checked */
            int64_t span, ext, pads = 0;
            bool ovf = opad[i] > INT64_MAX / 2 || __builtin_mul_overflow(s, in - 1, &span) ||
                       __builtin_mul_overflow(kk - 1, win.dil[i], &ext) ||
                       __builtin_add_overflow(span, ext, &o) ||
                       __builtin_add_overflow(o, opad[i] + (int64_t)1, &o);
            if (win.auto_pad != NN_PAD_VALID)
                ovf = ovf || __builtin_add_overflow(win.pad[i], win.pad[i + k], &pads) ||
                      __builtin_sub_overflow(o, pads, &o);
            if (ovf)
                return mp_fail(c, "output size on spatial axis %d overflows", i);
            if (o <= 0)
                return mp_fail(c, "output size %lld on spatial axis %d is not positive",
                               (long long)o, i);
        }
        dims[2 + i] = o;
    }
    return mp_set_out(c, 0, x->dtype, k + 2, dims);
}

/* W: C * M/group * prod(kernel); spatial: N * prod(in spatial) */
static void cost_conv_transpose(mp_ctx *c, mp_cost *k) {
    nn_cost_weight_window(c, k, mp_in(c, 0));
}

/* ---- MaxPool, AveragePool, LpPool ----
 * X [N, C, D...] -> Y [N, C, O...], O by the window rule above with the
 * required kernel_shape. MaxPool's optional second output Indices is int64
 * of Y's shape. FLOPs = numel(X) (GUIDE: pooling costs its input
 * elements). */

static mp_status infer_pool(mp_ctx *c) {
    mp_status st;
    mp_value *x;
    if ((st = nn_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "X", &x))) return st;
    const int64_t *ks;
    if (mp_attr_ints(c->n, "kernel_shape", &ks) < 0) return mp_fail(c, "kernel_shape is required");
    int k;
    if ((st = nn_spatial(c, x, -1, &k))) return st;
    nn_win win;
    if ((st = nn_win_read(c, k, &win)) || (st = nn_kernel(c, NULL, &win))) return st;
    int64_t dims[MP_MAX_RANK];
    if ((st = nn_win_out(c, &win, x, mp_value_dim(x, 0), mp_value_dim(x, 1), dims))) return st;
    if ((st = mp_set_out(c, 0, x->dtype, k + 2, dims))) return st;
    return mp_set_out(c, 1, MP_DT_INT64, k + 2, dims); /* MaxPool Indices */
}

/* ---- GlobalAveragePool, GlobalMaxPool, GlobalLpPool ----
 * X [N, C, D...] -> Y [N, C, 1, ...]. FLOPs = numel(X). */

static mp_status infer_global_pool(mp_ctx *c) {
    mp_status st;
    mp_value *x;
    if ((st = nn_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "X", &x))) return st;
    if (x->rank < 0) return mp_set_out(c, 0, x->dtype, -1, NULL);
    if (x->rank < 2) return mp_fail(c, "X must be [N, C, ...], got rank %d", x->rank);
    int64_t dims[MP_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = i < 2 ? x->dims[i] : 1;
    return mp_set_out(c, 0, x->dtype, x->rank, dims);
}

/* ---- normalizations ---- */

/* Per-channel input i ([C]) of a normalization must match C. */
static mp_status nn_check_channel(mp_ctx *c, int i, const char *what, int64_t ch) {
    mp_value *v = mp_in(c, i);
    if (!v || v->rank < 0) return MP_OK;
    if (v->rank != 1) return mp_fail(c, "%s must have rank 1, got %d", what, v->rank);
    if (v->dims[0] >= 0 && ch >= 0 && v->dims[0] != ch)
        return mp_fail(c, "%s has %lld values for %lld channels", what, (long long)v->dims[0],
                       (long long)ch);
    return MP_OK;
}

/* BatchNormalization: X, scale [C], B [C], mean [C], var [C] -> Y like X.
 * Training outputs (opset < 14: mean, var, saved_mean, saved_var; 14+:
 * running_mean, running_var) have mean's shape. Before opset 9,
 * spatial=0 gave per-activation statistics (shape X[1:]): not checked.
 * FLOPs (DeepSpeed): inference 2 * numel(X) (one scale, one shift, the
 * statistics folded); training 5 * numel(X) (statistics too).
 * scale and B are parameters; mean and var are buffers. */

static mp_status infer_batchnorm(mp_ctx *c) {
    mp_status st;
    mp_value *x, *s;
    static const char *const names[] = {"X", "scale", "B", "mean", "var"};
    if ((st = nn_arity(c, 5, 5))) return st;
    for (int i = 0; i < 5; i++)
        if ((st = mp_need_in(c, i, names[i], &s))) return st;
    x = mp_in(c, 0);
    if (x->rank >= 0 && x->rank < 2 && mp_attr_i(c->n, "spatial", 1))
        return mp_fail(c, "X must be [N, C, ...], got rank %d", x->rank);
    if (mp_attr_i(c->n, "spatial", 1))
        for (int i = 1; i < 5; i++)
            if ((st = nn_check_channel(c, i, names[i], mp_value_dim(x, 1)))) return st;
    if ((st = mp_set_out_like(c, 0, x))) return st;
    mp_value *mean = mp_in(c, 3);
    for (int o = 1; o < c->n->n_out && o < 5; o++)
        if ((st = mp_set_out(c, o, mean->dtype, mean->rank, mean->dims))) return st;
    return MP_OK;
}

static void cost_batchnorm(mp_ctx *c, mp_cost *k) {
    bool training = mp_attr_i(c->n, "training_mode", 0) != 0;
    if (c->n->opset < 14)
        for (int o = 1; o < c->n->n_out; o++) training |= mp_out(c, o) != NULL;
    nn_cost_per_elem(k, training ? 5 : 2, mp_in(c, 0));
}

/* InstanceNormalization: X, scale [C], B [C] -> Y like X.
 * FLOPs = 5 * numel(X) (affine normalization, GUIDE). */

static mp_status infer_instancenorm(mp_ctx *c) {
    mp_status st;
    mp_value *x, *v;
    if ((st = nn_arity(c, 3, 3)) || (st = mp_need_in(c, 0, "X", &x)) ||
        (st = mp_need_in(c, 1, "scale", &v)) || (st = mp_need_in(c, 2, "B", &v)))
        return st;
    if (x->rank >= 0 && x->rank < 3)
        return mp_fail(c, "X must be [N, C, D...], got rank %d", x->rank);
    if ((st = nn_check_channel(c, 1, "scale", mp_value_dim(x, 1))) ||
        (st = nn_check_channel(c, 2, "B", mp_value_dim(x, 1))))
        return st;
    return mp_set_out_like(c, 0, x);
}

static void cost_norm5(mp_ctx *c, mp_cost *k) { nn_cost_per_elem(k, 5, mp_in(c, 0)); }

/* LayerNormalization (opset 17): X, Scale, B optional -> Y like X; Mean
 * and InvStdDev are X.shape[:axis] + [1] * (rank - axis), of stash_type.
 * FLOPs = 5 * numel(X) with Scale (affine), 4 without (GUIDE). */

static mp_status infer_layernorm(mp_ctx *c) {
    mp_status st;
    mp_value *x, *s;
    if ((st = nn_arity(c, 2, 3)) || (st = mp_need_in(c, 0, "X", &x)) ||
        (st = mp_need_in(c, 1, "Scale", &s)))
        return st;
    int64_t stash = mp_attr_i(c->n, "stash_type", MP_DT_FLOAT);
    int sdt = (stash > 0 && stash < MP_DT_COUNT) ? (int)stash : MP_DT_FLOAT;
    if ((st = mp_set_out_like(c, 0, x))) return st;
    if (x->rank < 0) {
        if ((st = mp_set_out(c, 1, sdt, -1, NULL))) return st;
        return mp_set_out(c, 2, sdt, -1, NULL);
    }
    int axis = mp_axis(mp_attr_i(c->n, "axis", -1), x->rank);
    if (axis < 0) return mp_fail(c, "axis out of range for rank %d", x->rank);
    /* Scale and B broadcast to the normalized shape X[axis:] */
    for (int i = 1; i <= 2; i++) {
        mp_value *p = mp_in(c, i);
        if (!p || p->rank < 0) continue;
        if (p->rank > x->rank - axis)
            return mp_fail(c, "%s has rank %d, above the %d normalized dims",
                           i == 1 ? "Scale" : "B", p->rank, x->rank - axis);
        for (int d = 0; d < p->rank; d++) {
            int64_t pd = p->dims[d], xd = x->dims[x->rank - p->rank + d];
            if (pd >= 0 && xd >= 0 && pd != 1 && pd != xd)
                return mp_fail(c, "%s dim %d is %lld, X's is %lld", i == 1 ? "Scale" : "B", d,
                               (long long)pd, (long long)xd);
        }
    }
    int64_t dims[MP_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = i < axis ? x->dims[i] : 1;
    if ((st = mp_set_out(c, 1, sdt, x->rank, dims))) return st;
    return mp_set_out(c, 2, sdt, x->rank, dims);
}

static void cost_layernorm(mp_ctx *c, mp_cost *k) {
    nn_cost_per_elem(k, mp_in(c, 1) ? 5 : 4, mp_in(c, 0));
}

/* GroupNormalization: X [N, C, ...], scale, bias -> Y like X; num_groups
 * must divide C. scale/bias are [num_groups] at opset 18, [C] at 21.
 * FLOPs = 5 * numel(X) (affine, GUIDE). */

static mp_status nn_groupnorm(mp_ctx *c, bool per_channel) {
    mp_status st;
    mp_value *x, *v;
    if ((st = nn_arity(c, 3, 3)) || (st = mp_need_in(c, 0, "X", &x)) ||
        (st = mp_need_in(c, 1, "scale", &v)) || (st = mp_need_in(c, 2, "bias", &v)))
        return st;
    int64_t g = mp_attr_i(c->n, "num_groups", -1);
    if (g < 1) return mp_fail(c, "num_groups is required and must be positive");
    if (x->rank >= 0 && x->rank < 2)
        return mp_fail(c, "X must be [N, C, ...], got rank %d", x->rank);
    int64_t ch = mp_value_dim(x, 1);
    if (ch >= 0 && ch % g != 0)
        return mp_fail(c, "%lld channels are not divisible by num_groups %lld", (long long)ch,
                       (long long)g);
    int64_t want = per_channel ? ch : g;
    if ((st = nn_check_channel(c, 1, "scale", want)) ||
        (st = nn_check_channel(c, 2, "bias", want)))
        return st;
    return mp_set_out_like(c, 0, x);
}

static mp_status infer_groupnorm18(mp_ctx *c) { return nn_groupnorm(c, false); }
static mp_status infer_groupnorm21(mp_ctx *c) { return nn_groupnorm(c, true); }

/* LpNormalization: Y like X, x / ||x||_p along axis.
 * FLOPs = 3 * numel(X): |x|^p, accumulate, scale by the inverse norm. */

static mp_status infer_lpnorm(mp_ctx *c) {
    mp_status st;
    mp_value *x;
    if ((st = nn_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "X", &x))) return st;
    if (x->rank >= 0 && mp_axis(mp_attr_i(c->n, "axis", -1), x->rank) < 0)
        return mp_fail(c, "axis out of range for rank %d", x->rank);
    int64_t p = mp_attr_i(c->n, "p", 2);
    if (p != 1 && p != 2) return mp_fail(c, "p must be 1 or 2, got %lld", (long long)p);
    return mp_set_out_like(c, 0, x);
}

static void cost_lpnorm(mp_ctx *c, mp_cost *k) { nn_cost_per_elem(k, 3, mp_in(c, 0)); }

/* MeanVarianceNormalization: Y like X, (x - mean) / std over axes.
 * FLOPs = 4 * numel(X) (LayerNorm without affine). */

static mp_status infer_mvn(mp_ctx *c) {
    mp_status st;
    mp_value *x;
    if ((st = nn_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "X", &x))) return st;
    const int64_t *axes;
    int n = mp_attr_ints(c->n, "axes", &axes);
    if (n > 0 && x->rank >= 0) {
        int ax[MP_MAX_RANK];
        if ((st = nn_axes(c, axes, n, x->rank, ax))) return st;
    }
    return mp_set_out_like(c, 0, x);
}

static void cost_norm4(mp_ctx *c, mp_cost *k) { nn_cost_per_elem(k, 4, mp_in(c, 0)); }

/* LRN: Y like X. Per element: square and add over `size` channels
 * (2 * size), scale by alpha/size and add bias (2), power beta (1),
 * divide (1). FLOPs = (2 * size + 4) * numel(X). */

static mp_status infer_lrn(mp_ctx *c) {
    mp_status st;
    mp_value *x;
    if ((st = nn_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "X", &x))) return st;
    if (mp_attr_i(c->n, "size", 0) < 1) return mp_fail(c, "size is required and must be positive");
    if (x->rank >= 0 && x->rank < 3)
        return mp_fail(c, "X must be [N, C, D...], got rank %d", x->rank);
    return mp_set_out_like(c, 0, x);
}

static void cost_lrn(mp_ctx *c, mp_cost *k) {
    int64_t size = mp_attr_i(c->n, "size", 1);
    if (size < 1 || size > (1 << 20)) size = 1;
    nn_cost_per_elem(k, 2 * (uint64_t)size + 4, mp_in(c, 0));
}

/* ---- Softmax, LogSoftmax, Hardmax ----
 * Y like X (axis default 1 before opset 13, -1 after; the shape does not
 * depend on it). FLOPs = numel(X) (GUIDE). */

static mp_status infer_softmax(mp_ctx *c) {
    mp_status st;
    mp_value *x;
    if ((st = nn_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "input", &x))) return st;
    int64_t axis = mp_attr_i(c->n, "axis", c->n->opset < 13 ? 1 : -1);
    if (x->rank > 0 && mp_axis(axis, x->rank) < 0)
        return mp_fail(c, "axis %lld out of range for rank %d", (long long)axis, x->rank);
    return mp_set_out_like(c, 0, x);
}

/* ---- reductions ----
 * ReduceX(data, axes): the reduced axes become 1 (keepdims=1, default) or
 * vanish (keepdims=0). No axes reduces all axes, unless
 * noop_with_empty_axes=1 (input form only), which makes the op an
 * identity. Axes: attribute before ReduceSum-13 and the others' opset 18,
 * optional input 1 after. FLOPs = numel(data) (GUIDE). Known contents of
 * small ReduceSum/Prod/Max/Min results are computed. */

typedef enum nn_red { NN_RED_OTHER, NN_RED_SUM, NN_RED_PROD, NN_RED_MAX, NN_RED_MIN } nn_red;

/* Fold a reduction over known contents (never an error). red[i] marks
 * the reduced axes of x. */
static mp_status nn_reduce_fold(mp_ctx *c, nn_red op, const mp_value *x, const bool *red) {
    mp_value *out = mp_out(c, 0);
    if (op == NN_RED_OTHER || !out || !mp_shape_known(out) || !mp_shape_known(x)) return MP_OK;
    int64_t xn = mp_value_numel(x), on = mp_value_numel(out);
    if (xn < 0 || on < 0 || xn > MP_KNOWN_MAX || on > MP_KNOWN_MAX) return MP_OK;
    if (xn == 0 && (op == NN_RED_MAX || op == NN_RED_MIN)) return MP_OK; /* undefined */
    bool use_f = mp_dtype_is_float(x->dtype);
    const int64_t *iv = NULL;
    const double *fv = NULL;
    int64_t cnt;
    if (use_f ? !mp_floats(c, 0, &fv, &cnt) : !mp_ints(c, 0, &iv, &cnt)) return MP_OK;
    if (cnt != xn) return MP_OK;
    int64_t *ri = mp_scratch(c, sizeof(int64_t) * (size_t)(on ? on : 1));
    double *rf = mp_scratch(c, sizeof(double) * (size_t)(on ? on : 1));
    bool *seen = mp_scratch(c, (size_t)(on ? on : 1));
    if (!ri || !rf || !seen) return mp_error(MP_ERR_NOMEM, "out of memory");
    /* output strides over x's axes (0 on reduced axes) */
    int64_t ostride[MP_MAX_RANK], idx[MP_MAX_RANK], s = 1;
    for (int i = x->rank - 1; i >= 0; i--) {
        ostride[i] = red[i] ? 0 : s;
        if (!red[i]) s *= x->dims[i];
        idx[i] = 0;
    }
    for (int64_t e = 0, o = 0; e < xn; e++) {
        if (!seen[o]) {
            seen[o] = true;
            ri[o] = op == NN_RED_PROD;
            rf[o] = op == NN_RED_PROD;
            if (op == NN_RED_MAX || op == NN_RED_MIN) {
                ri[o] = use_f ? 0 : iv[e];
                rf[o] = use_f ? fv[e] : 0;
                goto next;
            }
        }
        if (use_f) {
            double v = fv[e];
            if (op == NN_RED_SUM) rf[o] += v;
            else if (op == NN_RED_PROD) rf[o] *= v;
            else if (op == NN_RED_MAX) rf[o] = fmax(rf[o], v);
            else rf[o] = fmin(rf[o], v);
        } else {
            int64_t v = iv[e];
            if (op == NN_RED_SUM) ri[o] = (int64_t)((uint64_t)ri[o] + (uint64_t)v);
            else if (op == NN_RED_PROD) ri[o] = (int64_t)((uint64_t)ri[o] * (uint64_t)v);
            else if (op == NN_RED_MAX) ri[o] = v > ri[o] ? v : ri[o];
            else ri[o] = v < ri[o] ? v : ri[o];
        }
    next:
        for (int i = x->rank - 1; i >= 0; i--) {
            o += ostride[i];
            if (++idx[i] < x->dims[i]) break;
            o -= ostride[i] * x->dims[i];
            idx[i] = 0;
        }
    }
    if (on > 0 && !seen[0]) { /* empty input: the identity fills the output */
        for (int64_t o = 0; o < on; o++) {
            ri[o] = op == NN_RED_PROD;
            rf[o] = op == NN_RED_PROD;
        }
    }
    return use_f ? mp_set_floats(c, 0, rf, on) : mp_set_ints(c, 0, ri, on);
}

static mp_status nn_reduce(mp_ctx *c, bool axes_input, nn_red op) {
    mp_status st;
    mp_value *x;
    if ((st = nn_arity(c, 1, axes_input ? 2 : 1)) || (st = mp_need_in(c, 0, "data", &x)))
        return st;
    bool keep = mp_attr_i(c->n, "keepdims", 1) != 0;
    const int64_t *axes = NULL;
    int64_t n_axes = 0;
    if (axes_input) {
        mp_value *a = mp_in(c, 1);
        if (a && !mp_ints(c, 1, &axes, &n_axes)) {
            /* axes not known: the rank may still be */
            if (a->rank == 1 && a->dims[0] == 0) {
                n_axes = 0;
            } else {
                if (x->rank < 0) return mp_set_out(c, 0, x->dtype, -1, NULL);
                int64_t dims[MP_MAX_RANK];
                for (int i = 0; i < x->rank; i++) dims[i] = x->dims[i] == 1 ? 1 : MP_DIM_ANON;
                if (keep) return mp_set_out(c, 0, x->dtype, x->rank, dims);
                if (a->rank == 1 && a->dims[0] > 0 && a->dims[0] <= x->rank)
                    return mp_set_out(c, 0, x->dtype, x->rank - (int)a->dims[0], dims);
                return mp_set_out(c, 0, x->dtype, -1, NULL);
            }
        }
        if (n_axes == 0 && mp_attr_i(c->n, "noop_with_empty_axes", 0)) {
            if ((st = mp_set_out_like(c, 0, x))) return st;
            return nn_pass_contents(c, x);
        }
    } else {
        int n = mp_attr_ints(c->n, "axes", &axes);
        n_axes = n > 0 ? n : 0;
    }
    if (x->rank < 0) return mp_set_out(c, 0, x->dtype, -1, NULL);
    bool red[MP_MAX_RANK];
    int ax[MP_MAX_RANK];
    if ((st = nn_axes(c, axes, n_axes, x->rank, ax))) return st;
    for (int i = 0; i < x->rank; i++) red[i] = n_axes == 0;
    for (int64_t i = 0; i < n_axes; i++) red[ax[i]] = true;
    int64_t dims[MP_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!red[i]) dims[r++] = x->dims[i];
        else if (keep) dims[r++] = 1;
    }
    if ((st = mp_set_out(c, 0, x->dtype, r, dims))) return st;
    return nn_reduce_fold(c, op, x, red);
}

static mp_status infer_reduce_attr(mp_ctx *c) { return nn_reduce(c, false, NN_RED_OTHER); }
static mp_status infer_reduce_input(mp_ctx *c) { return nn_reduce(c, true, NN_RED_OTHER); }
static mp_status infer_rsum_attr(mp_ctx *c) { return nn_reduce(c, false, NN_RED_SUM); }
static mp_status infer_rsum_input(mp_ctx *c) { return nn_reduce(c, true, NN_RED_SUM); }
static mp_status infer_rprod_attr(mp_ctx *c) { return nn_reduce(c, false, NN_RED_PROD); }
static mp_status infer_rprod_input(mp_ctx *c) { return nn_reduce(c, true, NN_RED_PROD); }
static mp_status infer_rmax_attr(mp_ctx *c) { return nn_reduce(c, false, NN_RED_MAX); }
static mp_status infer_rmax_input(mp_ctx *c) { return nn_reduce(c, true, NN_RED_MAX); }
static mp_status infer_rmin_attr(mp_ctx *c) { return nn_reduce(c, false, NN_RED_MIN); }
static mp_status infer_rmin_input(mp_ctx *c) { return nn_reduce(c, true, NN_RED_MIN); }

/* ArgMax/ArgMin: the axis (attribute, default 0) becomes 1 (keepdims=1)
 * or vanishes; int64 output. FLOPs = numel(data). */

static mp_status infer_argminmax(mp_ctx *c) {
    mp_status st;
    mp_value *x;
    if ((st = nn_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "data", &x))) return st;
    if (x->rank < 0) return mp_set_out(c, 0, MP_DT_INT64, -1, NULL);
    int axis = mp_axis(mp_attr_i(c->n, "axis", 0), x->rank);
    if (axis < 0) return mp_fail(c, "axis out of range for rank %d", x->rank);
    bool keep = mp_attr_i(c->n, "keepdims", 1) != 0;
    int64_t dims[MP_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (i != axis) dims[r++] = x->dims[i];
        else if (keep) dims[r++] = 1;
    }
    return mp_set_out(c, 0, MP_DT_INT64, r, dims);
}

/* ---- Dropout ----
 * Inference identity: output like X; optional mask of X's shape (X's
 * dtype before opset 10, BOOL from 10). Opset 12 moved ratio and
 * training_mode to inputs 1 and 2. FLOPs = 0. */

static mp_status nn_dropout(mp_ctx *c, int mask_dtype) {
    mp_status st;
    mp_value *x;
    if ((st = nn_arity(c, 1, 3)) || (st = mp_need_in(c, 0, "data", &x))) return st;
    if ((st = mp_set_out_like(c, 0, x))) return st;
    if ((st = mp_set_out(c, 1, mask_dtype < 0 ? x->dtype : mask_dtype, x->rank, x->dims)))
        return st;
    return nn_pass_contents(c, x);
}

static mp_status infer_dropout1(mp_ctx *c) { return nn_dropout(c, -1); }
static mp_status infer_dropout10(mp_ctx *c) { return nn_dropout(c, MP_DT_BOOL); }

/* ---- Resize, Upsample ----
 * Output dims: sizes when given, else floor(in * scale). Only the listed
 * axes change (opset 18 'axes'; default all). keep_aspect_ratio_policy
 * (opset 18) not_larger / not_smaller scales every listed axis by the
 * min / max of sizes/in, rounded half up. roi is ignored.
 * FLOPs per output element: nearest 0 (data movement); linear 3 per
 * resized axis (one lerp a + t*(b - a) per axis, separable); cubic 7 per
 * resized axis (4 multiplies, 3 adds). A resized axis is one whose size
 * changes. */

static mp_status nn_resize(mp_ctx *c, int scales_i, int sizes_i, bool v18) {
    mp_status st;
    mp_value *x;
    if ((st = nn_arity(c, 1, 4)) || (st = mp_need_in(c, 0, "X", &x))) return st;
    const char *mode = mp_attr_s(c->n, "mode", "nearest");
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "bilinear") &&
        strcmp(mode, "cubic"))
        return mp_fail(c, "unknown mode '%s'", mode);
    if (x->rank < 0) return mp_set_out(c, 0, x->dtype, -1, NULL);
    int r = x->rank;
    int ax[MP_MAX_RANK], na = r;
    for (int i = 0; i < r; i++) ax[i] = i;
    const int64_t *axes_attr;
    int n_attr = v18 ? mp_attr_ints(c->n, "axes", &axes_attr) : -1;
    if (n_attr > 0) {
        if ((st = nn_axes(c, axes_attr, n_attr, r, ax))) return st;
        na = n_attr;
    }
    int64_t dims[MP_MAX_RANK];
    if (r > 0) memcpy(dims, x->dims, sizeof(int64_t) * (size_t)r);

    /* an input counts as given unless omitted or known to be empty */
    mp_value *sz = sizes_i >= 0 ? mp_in(c, sizes_i) : NULL;
    mp_value *sc = scales_i >= 0 ? mp_in(c, scales_i) : NULL;
    if (sz && mp_value_numel(sz) == 0) sz = NULL;
    if (sc && mp_value_numel(sc) == 0) sc = NULL;
    const double *attr_scales = NULL;
    int n_attr_scales = scales_i < 0 ? mp_attr_floats(c->n, "scales", &attr_scales) : -1;

    if (sz) {
        const int64_t *s;
        int64_t n;
        if (!mp_ints(c, sizes_i, &s, &n)) {
            for (int j = 0; j < na; j++) dims[ax[j]] = MP_DIM_ANON;
            return mp_set_out(c, 0, x->dtype, r, dims);
        }
        if (n != na) return mp_fail(c, "sizes has %lld values for %d axes", (long long)n, na);
        const char *policy = v18 ? mp_attr_s(c->n, "keep_aspect_ratio_policy", "stretch") : "stretch";
        bool larger = !strcmp(policy, "not_larger"), smaller = !strcmp(policy, "not_smaller");
        if (!larger && !smaller && strcmp(policy, "stretch"))
            return mp_fail(c, "unknown keep_aspect_ratio_policy '%s'", policy);
        double scale = larger ? INFINITY : 0.0;
        bool known = true;
        for (int j = 0; j < na; j++) {
            if (s[j] < 0) return mp_fail(c, "sizes[%d] = %lld", j, (long long)s[j]);
            int64_t in = x->dims[ax[j]];
            if (larger || smaller) {
                if (in <= 0) {
                    known = false;
                    continue;
                }
                double q = (double)s[j] / (double)in;
                scale = larger ? fmin(scale, q) : fmax(scale, q);
            } else {
                dims[ax[j]] = s[j];
            }
        }
        if (larger || smaller)
            for (int j = 0; j < na; j++) {
                int64_t in = x->dims[ax[j]];
                dims[ax[j]] = known ? (int64_t)floor(scale * (double)in + 0.5) : MP_DIM_ANON;
            }
        return mp_set_out(c, 0, x->dtype, r, dims);
    }

    const double *s = attr_scales;
    int64_t n = n_attr_scales;
    if (sc) {
        if (!mp_floats(c, scales_i, &s, &n)) {
            for (int j = 0; j < na; j++) dims[ax[j]] = MP_DIM_ANON;
            return mp_set_out(c, 0, x->dtype, r, dims);
        }
    } else if (scales_i >= 0 || n_attr_scales < 0) {
        return mp_fail(c, "needs scales or sizes");
    }
    if (n != na) return mp_fail(c, "scales has %lld values for %d axes", (long long)n, na);
    for (int j = 0; j < na; j++) {
        if (!(s[j] > 0 && s[j] < 1e9)) return mp_fail(c, "scales[%d] = %g", j, s[j]);
        int64_t in = x->dims[ax[j]];
        if (in < 0) {
            dims[ax[j]] = s[j] == 1.0 ? in : MP_DIM_ANON;
        } else {
            double o = floor((double)in * s[j]);
            if (o > 9e18) return mp_fail(c, "output dim %d is too large", ax[j]);
            dims[ax[j]] = (int64_t)o;
        }
    }
    return mp_set_out(c, 0, x->dtype, r, dims);
}

static mp_status infer_upsample7(mp_ctx *c) { return nn_resize(c, -1, -1, false); }
static mp_status infer_upsample9(mp_ctx *c) { return nn_resize(c, 1, -1, false); }
static mp_status infer_resize10(mp_ctx *c) { return nn_resize(c, 1, -1, false); }
static mp_status infer_resize11(mp_ctx *c) { return nn_resize(c, 2, 3, false); }
static mp_status infer_resize18(mp_ctx *c) { return nn_resize(c, 2, 3, true); }

static void cost_resize(mp_ctx *c, mp_cost *k) {
    const char *mode = mp_attr_s(c->n, "mode", "nearest");
    uint64_t per_axis = !strcmp(mode, "cubic") ? 7 : !strcmp(mode, "nearest") ? 0 : 3;
    mp_value *x = mp_in(c, 0), *y = mp_out(c, 0);
    uint64_t axes = 0;
    if (x && y && x->rank == y->rank)
        for (int i = 0; i < y->rank; i++) axes += x->dims[i] != y->dims[i];
    nn_cost_per_elem(k, per_axis * axes, y);
}

/* ------------------------------------------------------------------ */
/* kernels                                                             */
/* ------------------------------------------------------------------ */
/* Reference kernels in fp32 (accumulating in double where a sum runs
 * long); oneDNN serves the heavy ones in real runs (src/run/dnnl.c).
 * Inputs of other float types are read through mp_kget_f. */

static bool nnk_f32(const mp_rtensor *t) { return t && t->dtype == MP_DT_FLOAT; }

/* Scratch of doubles for a run (freed by the caller). */
static double *nnk_dbuf(mp_kctx *k, int64_t n, mp_status *st) {
    double *p = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!p) *st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    return p;
}

/* Input t as doubles (a fresh buffer). */
static double *nnk_load(mp_kctx *k, const mp_rtensor *t, mp_status *st) {
    double *p = nnk_dbuf(k, t->numel, st);
    if (p) mp_kconvert(p, MP_DT_DOUBLE, t->data, t->dtype, t->numel);
    return p;
}

/* ---- Conv: im2col + GEMM per image and group ---- */

mp_status mp_kconv(mp_kctx *k) {
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    const mp_rtensor *x = &k->in[0], *w = &k->in[1], *b = mp_kin(k, 2);
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    int nsp = x->rank - 2;
    if (nsp < 0 || w->rank != x->rank) return mp_kfail(k, MP_ERR_SHAPE, "bad ranks");
    mp_kwin win;
    if ((st = mp_kwin_read(k, nsp, x->dims + 2, y->dims + 2, w->dims + 2, &win))) return st;
    int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0], G = mp_attr_i(k->n, "group", 1);
    if (G < 1 || C % G || M % G) return mp_kfail(k, MP_ERR_SHAPE, "bad group");
    int64_t cg = C / G, mg = M / G, kn = 1, on = 1, in_n = 1;
    if (w->dims[1] != cg || (b && b->numel < M) || y->dims[1] != M || y->dims[0] != N)
        return mp_kfail(k, MP_ERR_SHAPE, "W, B and Y do not match X's channels and the group");
    for (int i = 0; i < nsp; i++) kn *= win.kernel[i], on *= win.out[i], in_n *= win.in[i];
    bool f32 = nnk_f32(x) && nnk_f32(w) && nnk_f32(y) && (!b || nnk_f32(b));
    if (f32) {
        float *col = malloc(sizeof(float) * (size_t)(cg * kn * on + 1));
        if (!col) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
        for (int64_t n = 0; n < N; n++)
            for (int64_t g = 0; g < G; g++) {
                const float *xs = (const float *)x->data + (n * C + g * cg) * in_n;
                float *ys = (float *)y->data + (n * M + g * mg) * on;
                mp_kim2col_f32(xs, cg, &win, col, 0.0f);
                mp_kgemm_f32(mg, on, cg * kn, (const float *)w->data + g * mg * cg * kn, cg * kn, 1,
                             col, on, 1, ys, on, false);
                for (int64_t m = 0; b && m < mg; m++) {
                    float bv = ((const float *)b->data)[g * mg + m];
                    for (int64_t j = 0; j < on; j++) ys[m * on + j] += bv;
                }
            }
        free(col);
        return MP_OK;
    }
    double *xd = nnk_load(k, x, &st), *wd = st ? NULL : nnk_load(k, w, &st), *bd = NULL;
    double *yd = st ? NULL : nnk_dbuf(k, y->numel, &st);
    if (!st && b) bd = nnk_load(k, b, &st);
    if (!st) st = mp_kconv_f64(k, xd, x, wd, w, bd, yd, y);
    if (!st) mp_kconvert(y->data, y->dtype, yd, MP_DT_DOUBLE, y->numel);
    free(xd), free(wd), free(bd), free(yd);
    return st;
}

/* ---- ConvTranspose: GEMM into columns, then col2im (scatter-add) ---- */

static mp_status nnk_conv_transpose(mp_kctx *k) {
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    const mp_rtensor *x = &k->in[0], *w = &k->in[1], *b = mp_kin(k, 2);
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    int nsp = x->rank - 2;
    if (nsp < 1 || w->rank != x->rank) return mp_kfail(k, MP_ERR_SHAPE, "bad ranks");
    int64_t N = x->dims[0], C = x->dims[1], G = mp_attr_i(k->n, "group", 1);
    int64_t mg = w->dims[1], M = mg * G, cg = C / (G ? G : 1);
    if (G < 1 || C % G || w->dims[0] != C || (b && b->numel < M) || y->dims[1] != M || y->dims[0] != N)
        return mp_kfail(k, MP_ERR_SHAPE, "W, B and Y do not match X's channels and the group");
    int64_t stride[MP_MAX_RANK], dil[MP_MAX_RANK], pad[MP_MAX_RANK], kn = 1, in_n = 1, on = 1;
    const int64_t *v;
    int ns = mp_attr_ints(k->n, "strides", &v);
    for (int i = 0; i < nsp; i++) stride[i] = ns == nsp ? v[i] : 1;
    int nd = mp_attr_ints(k->n, "dilations", &v);
    for (int i = 0; i < nsp; i++) dil[i] = nd == nsp ? v[i] : 1;
    int np = mp_attr_ints(k->n, "pads", &v);
    const char *ap = mp_attr_s(k->n, "auto_pad", "NOTSET");
    const int64_t *op_;
    int nop = mp_attr_ints(k->n, "output_padding", &op_);
    bool derived = mp_node_attr(k->n, "output_shape") || !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    for (int i = 0; i < nsp; i++) {
        int64_t kk = w->dims[2 + i], in = x->dims[2 + i], out = y->dims[2 + i];
        int64_t total = stride[i] * (in - 1) + (nop == nsp ? op_[i] : 0) + (kk - 1) * dil[i] + 1 - out;
        if (!derived) pad[i] = np == 2 * nsp ? v[i] : 0;
        int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2); /* floor(total / 2) */
        if (derived) pad[i] = !strcmp(ap, "SAME_UPPER") ? half : total - half;
        kn *= kk, in_n *= in, on *= out;
    }
    double *xd = nnk_load(k, x, &st), *wd = st ? NULL : nnk_load(k, w, &st);
    double *col = st ? NULL : nnk_dbuf(k, mg * kn * in_n, &st), *yd = st ? NULL : nnk_dbuf(k, y->numel, &st);
    int64_t kidx[MP_MAX_RANK], iidx[MP_MAX_RANK];
    for (int64_t n = 0; !st && n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            /* col[(m*kn + kp)][ipos] = sum_c W[g*cg + c][m][kp] * x[n][g*cg + c][ipos] */
            mp_kgemm_f64(mg * kn, in_n, cg, wd + g * cg * mg * kn, 1, mg * kn, xd + (n * C + g * cg) * in_n,
                         in_n, 1, col, in_n, false);
            double *ys = yd + (n * M + g * mg) * on;
            for (int64_t m = 0; m < mg; m++) {
                double bv = b ? mp_kget_f(b->data, b->dtype, g * mg + m) : 0;
                for (int64_t j = 0; j < on; j++) ys[m * on + j] = bv;
            }
            for (int64_t m = 0; m < mg; m++)
                for (int64_t kp = 0; kp < kn; kp++) {
                    int64_t r = kp;
                    for (int i = nsp - 1; i >= 0; i--) kidx[i] = r % w->dims[2 + i], r /= w->dims[2 + i];
                    for (int64_t ip = 0; ip < in_n; ip++) {
                        r = ip;
                        for (int i = nsp - 1; i >= 0; i--) iidx[i] = r % x->dims[2 + i], r /= x->dims[2 + i];
                        int64_t off = 0;
                        bool inside = true;
                        for (int i = 0; i < nsp && inside; i++) {
                            int64_t p = iidx[i] * stride[i] + kidx[i] * dil[i] - pad[i];
                            inside = p >= 0 && p < y->dims[2 + i];
                            off = off * y->dims[2 + i] + p;
                        }
                        if (inside) ys[m * on + off] += col[(m * kn + kp) * in_n + ip];
                    }
                }
        }
    if (!st) mp_kconvert(y->data, y->dtype, yd, MP_DT_DOUBLE, y->numel);
    free(xd), free(wd), free(col), free(yd);
    return st;
}

/* ---- pooling ---- */

typedef enum { NNK_MAX, NNK_AVG, NNK_LP } nnk_pool;

static mp_status nnk_pool_run(mp_kctx *k, nnk_pool kind, bool global) {
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    int nsp = x->rank - 2;
    if (nsp < 0) return mp_kfail(k, MP_ERR_SHAPE, "input rank below 2");
    int64_t kernel[MP_MAX_RANK];
    const int64_t *ks;
    int nk = mp_attr_ints(k->n, "kernel_shape", &ks);
    for (int i = 0; i < nsp; i++) kernel[i] = global ? x->dims[2 + i] : (nk == nsp ? ks[i] : 1);
    mp_kwin win;
    if (global) {
        win.k = nsp;
        for (int i = 0; i < nsp; i++)
            win.in[i] = x->dims[2 + i], win.out[i] = 1, win.kernel[i] = kernel[i], win.stride[i] = 1,
            win.dil[i] = 1, win.pad[i] = 0;
    } else if ((st = mp_kwin_read(k, nsp, x->dims + 2, y->dims + 2, kernel, &win))) {
        return st;
    }
    bool include_pad = mp_attr_i(k->n, "count_include_pad", 0) != 0;
    double p = (double)mp_attr_i(k->n, "p", 2);
    int64_t pend[MP_MAX_RANK];
    const int64_t *pv;
    int np = mp_attr_ints(k->n, "pads", &pv);
    for (int i = 0; i < nsp; i++) pend[i] = np == 2 * nsp && !global ? pv[nsp + i] : 0;
    const char *ap = mp_attr_s(k->n, "auto_pad", "NOTSET");
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    for (int i = 0; i < nsp && same; i++) {
        int64_t total = (win.out[i] - 1) * win.stride[i] + (kernel[i] - 1) * win.dil[i] + 1 - win.in[i];
        pend[i] = (total > 0 ? total : 0) - win.pad[i];
    }
    bool storage_col = mp_attr_i(k->n, "storage_order", 0) != 0;
    mp_rtensor *ind = k->n_out > 1 && k->out[1].data ? &k->out[1] : NULL;
    int64_t NC = x->dims[0] * (x->rank > 1 ? x->dims[1] : 1), in_n = 1, on = 1, kn = 1;
    for (int i = 0; i < nsp; i++) in_n *= win.in[i], on *= win.out[i], kn *= kernel[i];
    int64_t oidx[MP_MAX_RANK], kidx[MP_MAX_RANK], istr[MP_MAX_RANK];
    mp_kstrides(nsp, win.in, istr);
    /* fp32 windows wholly inside the input: offsets of the kernel points
     * computed once, the window read without bounds checks */
    int64_t *koff = x->dtype == MP_DT_FLOAT && !ind && kind != NNK_LP ? malloc(sizeof(int64_t) * (size_t)(kn + 1)) : NULL;
    for (int64_t kp = 0; koff && kp < kn; kp++) {
        int64_t r = kp, off = 0;
        for (int i = nsp - 1; i >= 0; i--) off += (r % kernel[i]) * win.dil[i] * istr[i], r /= kernel[i];
        koff[kp] = off;
    }
    for (int64_t nc = 0; nc < NC; nc++)
        for (int64_t o = 0; o < on; o++) {
            int64_t r = o;
            for (int i = nsp - 1; i >= 0; i--) oidx[i] = r % win.out[i], r /= win.out[i];
            if (koff) {
                int64_t base = 0;
                bool whole = true;
                for (int i = 0; i < nsp && whole; i++) {
                    int64_t q0 = oidx[i] * win.stride[i] - win.pad[i];
                    whole = q0 >= 0 && q0 + (kernel[i] - 1) * win.dil[i] < win.in[i];
                    base += q0 * istr[i];
                }
                if (whole && kn > 0) {
                    const float *xp = (const float *)x->data + nc * in_n + base;
                    float m = xp[koff[0]];
                    double sum = 0;
                    if (kind == NNK_MAX)
                        for (int64_t kp = 1; kp < kn; kp++) m = xp[koff[kp]] > m ? xp[koff[kp]] : m;
                    else
                        for (int64_t kp = 0; kp < kn; kp++) sum += xp[koff[kp]];
                    mp_kset_f(y->data, y->dtype, nc * on + o, kind == NNK_MAX ? (double)m : sum / (double)kn);
                    continue;
                }
            }
            double acc = kind == NNK_MAX ? -INFINITY : 0;
            int64_t cnt = 0, arg = -1;
            for (int64_t kp = 0; kp < kn; kp++) {
                r = kp;
                for (int i = nsp - 1; i >= 0; i--) kidx[i] = r % kernel[i], r /= kernel[i];
                int64_t off = 0, coff = 0, cmul = 1;
                bool inside = true, in_padded = true;
                for (int i = 0; i < nsp; i++) {
                    int64_t q = oidx[i] * win.stride[i] - win.pad[i] + kidx[i] * win.dil[i];
                    if (q < 0 || q >= win.in[i]) inside = false;
                    if (q >= win.in[i] + pend[i]) in_padded = false;
                    off = off * win.in[i] + q;
                    coff += q * cmul;
                    cmul *= win.in[i];
                }
                if (!inside) {
                    cnt += include_pad && in_padded;
                    continue;
                }
                double v = mp_kget_f(x->data, x->dtype, nc * in_n + off);
                cnt++;
                if (kind == NNK_MAX) {
                    if (v > acc || arg < 0) acc = v, arg = storage_col ? coff : off;
                } else if (kind == NNK_AVG) {
                    acc += v;
                } else {
                    acc += pow(fabs(v), p);
                }
            }
            double out = kind == NNK_MAX ? acc : kind == NNK_AVG ? (cnt ? acc / (double)cnt : 0) : pow(acc, 1.0 / p);
            mp_kset_f(y->data, y->dtype, nc * on + o, out);
            if (ind) mp_kset_i(ind->data, ind->dtype, nc * on + o, nc * in_n + arg);
        }
    free(koff);
    return MP_OK;
}

static mp_status nnk_maxpool(mp_kctx *k) { return nnk_pool_run(k, NNK_MAX, false); }
static mp_status nnk_avgpool(mp_kctx *k) { return nnk_pool_run(k, NNK_AVG, false); }
static mp_status nnk_lppool(mp_kctx *k) { return nnk_pool_run(k, NNK_LP, false); }
static mp_status nnk_gmaxpool(mp_kctx *k) { return nnk_pool_run(k, NNK_MAX, true); }
static mp_status nnk_gavgpool(mp_kctx *k) { return nnk_pool_run(k, NNK_AVG, true); }
static mp_status nnk_glppool(mp_kctx *k) { return nnk_pool_run(k, NNK_LP, true); }

/* ---- normalizations ---- */

/* y = (x - mean) * inv * scale[c] + bias[c] over `n` groups of `len`
 * elements; the channel of element j of group g is chan(g, j). mean/var
 * computed over each group (two passes in double). */
static void nnk_norm_group(const mp_rtensor *x, mp_rtensor *y, int64_t start, int64_t len, int64_t stride,
                           double eps, double *mean_out, double *inv_out) {
    double s = 0, s2 = 0;
    for (int64_t j = 0; j < len; j++) s += mp_kget_f(x->data, x->dtype, start + j * stride);
    double mean = len ? s / (double)len : 0;
    for (int64_t j = 0; j < len; j++) {
        double d = mp_kget_f(x->data, x->dtype, start + j * stride) - mean;
        s2 += d * d;
    }
    double inv = 1.0 / sqrt((len ? s2 / (double)len : 0) + eps);
    for (int64_t j = 0; j < len; j++) {
        int64_t at = start + j * stride;
        mp_kset_f(y->data, y->dtype, at, (mp_kget_f(x->data, x->dtype, at) - mean) * inv);
    }
    if (mean_out) *mean_out = mean;
    if (inv_out) *inv_out = inv;
}

/* In place on y: y = y * scale[c] + bias[c], c = (e / inner) % C. */
static void nnk_affine(mp_rtensor *y, const mp_rtensor *scale, const mp_rtensor *bias, int64_t C, int64_t inner) {
    for (int64_t e = 0; e < y->numel; e++) {
        int64_t c = (e / inner) % C;
        double v = mp_kget_f(y->data, y->dtype, e);
        if (scale) v *= mp_kget_f(scale->data, scale->dtype, scale->numel == 1 ? 0 : c % scale->numel);
        if (bias) v += mp_kget_f(bias->data, bias->dtype, bias->numel == 1 ? 0 : c % bias->numel);
        mp_kset_f(y->data, y->dtype, e, v);
    }
}

static mp_status nnk_batchnorm(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *sc = &k->in[1], *bi = &k->in[2], *mean = &k->in[3], *var = &k->in[4];
    mp_rtensor *y = &k->out[0];
    double eps = mp_attr_f(k->n, "epsilon", 1e-5), mom = mp_attr_f(k->n, "momentum", 0.9);
    int64_t C = x->rank > 1 ? x->dims[1] : 1, inner = 1, N = x->dims[0];
    for (int i = 2; i < x->rank; i++) inner *= x->dims[i];
    bool training = mp_attr_i(k->n, "training_mode", 0) != 0 && k->n_out >= 3;
    if (sc->numel < C || bi->numel < C || mean->numel < C || var->numel < C)
        return mp_kfail(k, MP_ERR_SHAPE, "scale, B, mean and var must hold %lld values", (long long)C);
    for (int64_t c = 0; c < C; c++) {
        double m = mp_kget_f(mean->data, mean->dtype, c), v = mp_kget_f(var->data, var->dtype, c);
        if (training) {
            double s = 0, s2 = 0, cnt = (double)(N * inner);
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; j < inner; j++) s += mp_kget_f(x->data, x->dtype, (n * C + c) * inner + j);
            double bm = s / cnt;
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; j < inner; j++) {
                    double d = mp_kget_f(x->data, x->dtype, (n * C + c) * inner + j) - bm;
                    s2 += d * d;
                }
            double bv = s2 / cnt;
            mp_kset_f(k->out[1].data, k->out[1].dtype, c, m * mom + bm * (1 - mom));
            mp_kset_f(k->out[2].data, k->out[2].dtype, c, v * mom + bv * (1 - mom));
            m = bm, v = bv;
        }
        double a = mp_kget_f(sc->data, sc->dtype, c) / sqrt(v + eps);
        double b = mp_kget_f(bi->data, bi->dtype, c) - m * a;
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < inner; j++) {
                int64_t at = (n * C + c) * inner + j;
                mp_kset_f(y->data, y->dtype, at, mp_kget_f(x->data, x->dtype, at) * a + b);
            }
    }
    return MP_OK;
}

static mp_status nnk_instancenorm(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    double eps = mp_attr_f(k->n, "epsilon", 1e-5);
    int64_t C = x->dims[1], inner = 1;
    for (int i = 2; i < x->rank; i++) inner *= x->dims[i];
    for (int64_t g = 0; g < x->dims[0] * C; g++) nnk_norm_group(x, y, g * inner, inner, 1, eps, NULL, NULL);
    nnk_affine(y, &k->in[1], &k->in[2], C, inner);
    return MP_OK;
}

mp_status mp_klayernorm(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *sc = &k->in[1], *bi = mp_kin(k, 2);
    mp_rtensor *y = &k->out[0];
    int axis = mp_axis(mp_attr_i(k->n, "axis", -1), x->rank);
    if (axis < 0) return mp_kfail(k, MP_ERR_SHAPE, "axis out of range");
    double eps = mp_attr_f(k->n, "epsilon", 1e-5);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = axis; i < x->rank; i++) inner *= x->dims[i];
    bool f32 = nnk_f32(x) && nnk_f32(y) && nnk_f32(sc) && (!bi || nnk_f32(bi)) && sc->numel == inner &&
               (!bi || bi->numel == inner) && !(k->n_out > 1 && k->out[1].data) && !(k->n_out > 2 && k->out[2].data);
    for (int64_t o = 0; f32 && o < outer; o++) { /* fp32 rows: typed loops (sums in double) */
        const float *xs = (const float *)x->data + o * inner, *g = sc->data, *b = bi ? bi->data : NULL;
        float *ys = (float *)y->data + o * inner;
        double s = 0, s2 = 0;
        for (int64_t j = 0; j < inner; j++) s += xs[j];
        double mean = s / (double)inner;
        for (int64_t j = 0; j < inner; j++) s2 += ((double)xs[j] - mean) * ((double)xs[j] - mean);
        float m = (float)mean, inv = (float)(1.0 / sqrt(s2 / (double)inner + eps));
        for (int64_t j = 0; j < inner; j++) ys[j] = (xs[j] - m) * inv * g[j] + (b ? b[j] : 0.0f);
    }
    for (int64_t o = 0; !f32 && o < outer; o++) {
        double mean, inv;
        nnk_norm_group(x, y, o * inner, inner, 1, eps, &mean, &inv);
        if (k->n_out > 1 && k->out[1].data) mp_kset_f(k->out[1].data, k->out[1].dtype, o, mean);
        if (k->n_out > 2 && k->out[2].data) mp_kset_f(k->out[2].data, k->out[2].dtype, o, inv);
        for (int64_t j = 0; j < inner; j++) {
            int64_t at = o * inner + j;
            double v = mp_kget_f(y->data, y->dtype, at) * mp_kget_f(sc->data, sc->dtype, sc->numel == inner ? j : j % sc->numel);
            if (bi) v += mp_kget_f(bi->data, bi->dtype, bi->numel == inner ? j : j % bi->numel);
            mp_kset_f(y->data, y->dtype, at, v);
        }
    }
    return MP_OK;
}

static mp_status nnk_groupnorm(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *sc = &k->in[1], *bi = &k->in[2];
    mp_rtensor *y = &k->out[0];
    int64_t G = mp_attr_i(k->n, "num_groups", 1), C = x->dims[1], inner = 1;
    double eps = mp_attr_f(k->n, "epsilon", 1e-5);
    if (G < 1 || C % G) return mp_kfail(k, MP_ERR_SHAPE, "num_groups does not divide the channels");
    for (int i = 2; i < x->rank; i++) inner *= x->dims[i];
    int64_t len = (C / G) * inner;
    for (int64_t g = 0; g < x->dims[0] * G; g++) nnk_norm_group(x, y, g * len, len, 1, eps, NULL, NULL);
    if (sc->numel == G && G != C) /* opset 18: scale and bias per group */
        nnk_affine(y, sc, bi, G, len);
    else
        nnk_affine(y, sc, bi, C, inner);
    return MP_OK;
}

static mp_status nnk_lpnorm(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    int axis = mp_axis(mp_attr_i(k->n, "axis", -1), x->rank);
    if (axis < 0) return mp_kfail(k, MP_ERR_SHAPE, "axis out of range");
    int64_t p = mp_attr_i(k->n, "p", 2), outer, inner, n = x->dims[axis];
    mp_kouter_inner(x->rank, x->dims, axis, &outer, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0;
            for (int64_t j = 0; j < n; j++) {
                double v = mp_kget_f(x->data, x->dtype, (o * n + j) * inner + i);
                s += p == 1 ? fabs(v) : v * v;
            }
            double norm = p == 1 ? s : sqrt(s);
            for (int64_t j = 0; j < n; j++) {
                int64_t at = (o * n + j) * inner + i;
                mp_kset_f(y->data, y->dtype, at, norm ? mp_kget_f(x->data, x->dtype, at) / norm : 0);
            }
        }
    return MP_OK;
}

/* ---- reductions: iterate x with the output's strides (0 on reduced
 * axes) and accumulate in double ---- */

typedef enum { RK_SUM, RK_MEAN, RK_MAX, RK_MIN, RK_PROD, RK_L1, RK_L2, RK_LOGSUM, RK_LOGSUMEXP,
               RK_SUMSQ } nnk_red;

static nnk_red nnk_red_of(const char *op) {
    static const char *const names[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                                        "ReduceSumSquare"};
    for (int i = 0; i < (int)MP_ARRAY_LEN(names); i++)
        if (!strcmp(op, names[i])) return (nnk_red)i;
    return RK_SUM;
}

static mp_status nnk_reduce(mp_kctx *k) {
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    nnk_red op = nnk_red_of(k->n->op);
    bool input_form = k->n->opset >= (op == RK_SUM ? 13 : 18);
    int64_t axes[MP_MAX_RANK], na;
    if (input_form) {
        na = mp_kints(mp_kin(k, 1), axes, MP_MAX_RANK);
        if (na == 0) na = -1;
        if (na < 0 && mp_attr_i(k->n, "noop_with_empty_axes", 0)) {
            mp_kconvert(y->data, y->dtype, x->data, x->dtype, x->numel);
            return MP_OK;
        }
    } else {
        const int64_t *v;
        na = mp_attr_ints(k->n, "axes", &v);
        for (int64_t i = 0; i < na && i < MP_MAX_RANK; i++) axes[i] = v[i];
        if (na == 0) na = -1;
    }
    uint64_t mask;
    if (!mp_kaxes_mask(axes, na, x->rank, true, &mask)) return mp_kfail(k, MP_ERR_SHAPE, "axis out of range");
    int64_t kd[MP_MAX_RANK], cnt = 1;
    for (int i = 0; i < x->rank; i++) {
        kd[i] = (mask >> i) & 1 ? 1 : x->dims[i];
        if ((mask >> i) & 1) cnt *= x->dims[i];
    }
    int64_t on = y->numel;
    double *acc = nnk_dbuf(k, on, &st), *mx = NULL;
    if (st) return st;
    double init = op == RK_MAX || op == RK_LOGSUMEXP ? -INFINITY : op == RK_MIN ? INFINITY : op == RK_PROD ? 1 : 0;
    for (int64_t o = 0; o < on; o++) acc[o] = init;
    int ranks[2] = {x->rank, x->rank};
    const int64_t *dims[2] = {x->dims, kd};
    mp_kbcast it;
    if (op == RK_LOGSUMEXP) { /* pass 1: the maximum, for a stable sum */
        mp_kbcast_init(&it, x->rank, x->dims, 2, ranks, dims);
        for (int64_t r = 0; r < it.rows; r++, mp_kbcast_next(&it))
            for (int64_t j = 0; j < it.len; j++) {
                double v = mp_kget_f(x->data, x->dtype, it.off[0] + j * it.step[0]);
                double *a = &acc[it.off[1] + j * it.step[1]];
                if (v > *a) *a = v;
            }
        mx = acc;
        acc = nnk_dbuf(k, on, &st);
        if (st) {
            free(mx);
            return st;
        }
        for (int64_t o = 0; o < on; o++) acc[o] = 0;
    }
    mp_kbcast_init(&it, x->rank, x->dims, 2, ranks, dims);
    if (x->dtype == MP_DT_FLOAT && it.step[1] == 0 && it.step[0] == 1 &&
        (op == RK_SUM || op == RK_MEAN || op == RK_SUMSQ || op == RK_L2)) {
        /* fp32 rows reduced whole (the common last-axis case): a typed loop */
        bool sq = op == RK_SUMSQ || op == RK_L2;
        for (int64_t r = 0; r < it.rows; r++, mp_kbcast_next(&it)) {
            const float *xs = (const float *)x->data + it.off[0];
            double s = 0;
            if (sq)
                for (int64_t j = 0; j < it.len; j++) s += (double)xs[j] * xs[j];
            else
                for (int64_t j = 0; j < it.len; j++) s += xs[j];
            acc[it.off[1]] += s;
        }
        it.rows = 0; /* done */
    }
    for (int64_t r = 0; r < it.rows; r++, mp_kbcast_next(&it))
        for (int64_t j = 0; j < it.len; j++) {
            double v = mp_kget_f(x->data, x->dtype, it.off[0] + j * it.step[0]);
            int64_t o = it.off[1] + j * it.step[1];
            double *a = &acc[o];
            switch (op) {
            case RK_MAX: if (v > *a || isnan(v)) *a = v; break;
            case RK_MIN: if (v < *a || isnan(v)) *a = v; break;
            case RK_PROD: *a *= v; break;
            case RK_L1: *a += fabs(v); break;
            case RK_L2: case RK_SUMSQ: *a += v * v; break;
            case RK_LOGSUMEXP: *a += isinf(mx[o]) ? exp(v) : exp(v - mx[o]); break;
            default: *a += v; break;
            }
        }
    for (int64_t o = 0; o < on; o++) {
        double v = acc[o];
        if (op == RK_MEAN) v = cnt ? v / (double)cnt : NAN;
        else if (op == RK_L2) v = sqrt(v);
        else if (op == RK_LOGSUM) v = log(v);
        else if (op == RK_LOGSUMEXP) v = isinf(mx[o]) ? log(v) : log(v) + mx[o];
        mp_kset_f(y->data, y->dtype, o, v);
    }
    free(acc);
    free(mx);
    return MP_OK;
}

static mp_status nnk_argminmax(mp_kctx *k) {
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    int axis = mp_axis(mp_attr_i(k->n, "axis", 0), x->rank);
    if (axis < 0) return mp_kfail(k, MP_ERR_SHAPE, "axis out of range");
    bool is_max = !strcmp(k->n->op, "ArgMax"), last = mp_attr_i(k->n, "select_last_index", 0) != 0;
    int64_t outer, inner, n = x->dims[axis];
    mp_kouter_inner(x->rank, x->dims, axis, &outer, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t best = 0;
            double bv = n ? mp_kget_f(x->data, x->dtype, o * n * inner + i) : 0;
            for (int64_t j = 1; j < n; j++) {
                double v = mp_kget_f(x->data, x->dtype, (o * n + j) * inner + i);
                bool better = is_max ? (last ? v >= bv : v > bv) : (last ? v <= bv : v < bv);
                if (better) best = j, bv = v;
            }
            ((int64_t *)y->data)[o * inner + i] = best;
        }
    return MP_OK;
}

/* ---- Softmax, LogSoftmax, Hardmax ----
 * Before opset 13 the input is seen as 2-D [prod(dims[:axis]), rest]; from
 * 13 the op runs along one axis. */
static mp_status nnk_softmax(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    bool v13 = k->n->opset >= 13;
    int axis = mp_axis(mp_attr_i(k->n, "axis", v13 ? -1 : 1), x->rank);
    if (axis < 0 && x->rank > 0) return mp_kfail(k, MP_ERR_SHAPE, "axis out of range");
    if (axis < 0) axis = 0;
    int64_t outer, inner, n;
    if (v13) {
        mp_kouter_inner(x->rank, x->dims, axis, &outer, &inner);
        n = x->rank ? x->dims[axis] : 1;
    } else {
        outer = 1, n = 1, inner = 1;
        for (int i = 0; i < axis; i++) outer *= x->dims[i];
        for (int i = axis; i < x->rank; i++) n *= x->dims[i];
    }
    int kind = !strcmp(k->n->op, "LogSoftmax") ? 1 : !strcmp(k->n->op, "Hardmax") ? 2 : 0;
    bool f32 = nnk_f32(x) && nnk_f32(y) && inner == 1 && kind == 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            if (f32) {
                const float *xs = (const float *)x->data + base;
                float *ys = (float *)y->data + base, m = -INFINITY, s = 0;
                for (int64_t j = 0; j < n; j++) m = xs[j] > m ? xs[j] : m;
                for (int64_t j = 0; j < n; j++) s += (ys[j] = expf(xs[j] - m));
                for (int64_t j = 0; j < n; j++) ys[j] /= s;
                continue;
            }
            double m = -INFINITY, s = 0;
            int64_t arg = 0;
            for (int64_t j = 0; j < n; j++) {
                double v = mp_kget_f(x->data, x->dtype, base + j * inner);
                if (v > m) m = v, arg = j;
            }
            for (int64_t j = 0; j < n; j++) s += exp(mp_kget_f(x->data, x->dtype, base + j * inner) - m);
            for (int64_t j = 0; j < n; j++) {
                double v = mp_kget_f(x->data, x->dtype, base + j * inner) - m;
                double r = kind == 0 ? exp(v) / s : kind == 1 ? v - log(s) : (j == arg);
                mp_kset_f(y->data, y->dtype, base + j * inner, r);
            }
        }
    return MP_OK;
}

static mp_status nnk_mvn(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    const int64_t *v;
    int64_t def[3] = {0, 2, 3};
    int na = mp_attr_ints(k->n, "axes", &v);
    uint64_t mask;
    if (!mp_kaxes_mask(na > 0 ? v : def, na > 0 ? na : 3, x->rank, true, &mask))
        return mp_kfail(k, MP_ERR_SHAPE, "axis out of range");
    int64_t kd[MP_MAX_RANK], cnt = 1, on = 1;
    for (int i = 0; i < x->rank; i++) {
        kd[i] = (mask >> i) & 1 ? 1 : x->dims[i];
        if ((mask >> i) & 1) cnt *= x->dims[i];
        on *= kd[i];
    }
    double *s = nnk_dbuf(k, 2 * on, &st);
    if (st) return st;
    memset(s, 0, sizeof(double) * (size_t)(2 * on));
    int ranks[2] = {x->rank, x->rank};
    const int64_t *dims[2] = {x->dims, kd};
    for (int pass = 0; pass < 2; pass++) {
        mp_kbcast it;
        mp_kbcast_init(&it, x->rank, x->dims, 2, ranks, dims);
        for (int64_t r = 0; r < it.rows; r++, mp_kbcast_next(&it))
            for (int64_t j = 0; j < it.len; j++) {
                int64_t xi = it.off[0] + j * it.step[0], o = it.off[1] + j * it.step[1];
                double val = mp_kget_f(x->data, x->dtype, xi);
                if (pass == 0) {
                    s[o] += val;
                    s[on + o] += val * val;
                } else {
                    double mean = s[o] / (double)cnt, var = s[on + o] / (double)cnt - mean * mean;
                    mp_kset_f(y->data, y->dtype, xi, (val - mean) / (sqrt(var > 0 ? var : 0) + 1e-9));
                }
            }
    }
    free(s);
    return MP_OK;
}

static mp_status nnk_lrn(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    double alpha = mp_attr_f(k->n, "alpha", 1e-4), beta = mp_attr_f(k->n, "beta", 0.75), bias = mp_attr_f(k->n, "bias", 1.0);
    int64_t size = mp_attr_i(k->n, "size", 1), C = x->dims[1], inner = 1;
    for (int i = 2; i < x->rank; i++) inner *= x->dims[i];
    int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
    for (int64_t e = 0; e < x->numel; e++) {
        int64_t c = (e / inner) % C, base = e - c * inner;
        double s = 0;
        for (int64_t q = c - lo; q <= c + hi; q++) {
            if (q < 0 || q >= C) continue;
            double v = mp_kget_f(x->data, x->dtype, base + q * inner);
            s += v * v;
        }
        mp_kset_f(y->data, y->dtype, e, mp_kget_f(x->data, x->dtype, e) / pow(bias + alpha / (double)size * s, beta));
    }
    return MP_OK;
}

/* Dropout at inference: y = x, mask all true. */
static mp_status nnk_dropout(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    size_t bytes = (size_t)mp_dtype_bytes(x->dtype, x->numel);
    if (y->data != x->data && bytes) memmove(y->data, x->data, bytes);
    if (k->n_out > 1 && k->out[1].data)
        for (int64_t i = 0; i < k->out[1].numel; i++) mp_kset_i(k->out[1].data, k->out[1].dtype, i, 1);
    return MP_OK;
}

/* ---- Resize / Upsample: per axis, each output coordinate reads a few
 * input taps with weights (nearest 1, linear 2, cubic 4; more with
 * antialias); the output element is the sum over the taps' product. ---- */

typedef struct nnk_taps {
    int t;                  /* taps per output coordinate */
    int64_t *idx;           /* [out][t] */
    double *w;
} nnk_taps;

static mp_status nnk_resize(mp_kctx *k) {
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    int r = x->rank, op = k->n->opset;
    bool upsample = !strcmp(k->n->op, "Upsample");
    const char *mode = mp_attr_s(k->n, "mode", "nearest");
    int m = !strcmp(mode, "linear") || !strcmp(mode, "bilinear") ? 1 : !strcmp(mode, "cubic") ? 2 : 0;
    const char *ctm = upsample || op < 11 ? "asymmetric" : mp_attr_s(k->n, "coordinate_transformation_mode", "half_pixel");
    const char *nmode = upsample || op < 11 ? (upsample ? "floor" : "round_prefer_floor") : mp_attr_s(k->n, "nearest_mode", "round_prefer_floor");
    if (op < 11 && !upsample) nmode = "floor";
    double ca = mp_attr_f(k->n, "cubic_coeff_a", -0.75), extrap = mp_attr_f(k->n, "extrapolation_value", 0.0);
    bool excl = mp_attr_i(k->n, "exclude_outside", 0) != 0, aa = mp_attr_i(k->n, "antialias", 0) != 0;
    double scale[MP_MAX_RANK], roi[2 * MP_MAX_RANK];
    for (int i = 0; i < r; i++) scale[i] = x->dims[i] ? (double)y->dims[i] / (double)x->dims[i] : 1, roi[i] = 0, roi[r + i] = 1;
    /* explicit scales (input or attribute), on the listed axes */
    int64_t axes[MP_MAX_RANK], na = -1;
    if (op >= 18) {
        const int64_t *av;
        int n = mp_attr_ints(k->n, "axes", &av);
        for (int i = 0; i < n && i < MP_MAX_RANK; i++) axes[i] = mp_axis(av[i], r);
        na = n > 0 ? n : -1;
    }
    int nax = na > 0 ? (int)na : r;
    const mp_rtensor *sc = upsample ? (op >= 9 ? mp_kin(k, 1) : NULL) : mp_kin(k, op < 11 ? 1 : 2);
    const mp_rtensor *sz = !upsample && op >= 11 ? mp_kin(k, 3) : NULL;
    if (upsample && op < 9) {
        const double *fv;
        int n = mp_attr_floats(k->n, "scales", &fv);
        for (int i = 0; i < n && i < r; i++) scale[i] = fv[i];
    } else if (sc && sc->numel == nax && !(sz && sz->numel)) {
        for (int i = 0; i < nax; i++) scale[na > 0 ? axes[i] : i] = mp_kget_f(sc->data, sc->dtype, i);
    } else if (sz && sz->numel == nax && op >= 18) {
        const char *pol = mp_attr_s(k->n, "keep_aspect_ratio_policy", "stretch");
        if (strcmp(pol, "stretch")) {
            double s = strcmp(pol, "not_larger") ? 0 : INFINITY;
            for (int i = 0; i < nax; i++) {
                int a = na > 0 ? (int)axes[i] : i;
                double q = (double)mp_kget_i(sz->data, sz->dtype, i) / (double)x->dims[a];
                s = strcmp(pol, "not_larger") ? fmax(s, q) : fmin(s, q);
            }
            for (int i = 0; i < nax; i++) scale[na > 0 ? axes[i] : i] = s;
        }
    }
    const mp_rtensor *roit = !upsample && op >= 11 ? mp_kin(k, 1) : NULL;
    if (roit && !strcmp(ctm, "tf_crop_and_resize") && roit->numel == 2 * nax)
        for (int i = 0; i < nax; i++) {
            int a = na > 0 ? (int)axes[i] : i;
            roi[a] = mp_kget_f(roit->data, roit->dtype, i);
            roi[r + a] = mp_kget_f(roit->data, roit->dtype, nax + i);
        }
    nnk_taps taps[MP_MAX_RANK];
    memset(taps, 0, sizeof taps);
    for (int a = 0; a < r && !st; a++) {
        int64_t in = x->dims[a], out = y->dims[a];
        double s = scale[a];
        if (out > 0 && (!(s > 0) || !isfinite(s))) {
            st = mp_kfail(k, MP_ERR_USAGE, "scale %g on axis %d", s, a);
            break;
        }
        bool anti = aa && m > 0 && s < 1;
        double support = (m == 2 ? 2.0 : 1.0) * (anti ? 1.0 / s : 1.0);
        if (support > (double)in + 2) support = (double)in + 2; /* more taps would all clamp */
        int t = m == 0 ? 1 : (int)ceil(support) * 2 + 1;
        if (in == out && s == 1 && strcmp(ctm, "tf_crop_and_resize")) t = 1;
        taps[a].t = t;
        taps[a].idx = malloc(sizeof(int64_t) * (size_t)(out * t + 1));
        taps[a].w = malloc(sizeof(double) * (size_t)(out * t + 1));
        if (!taps[a].idx || !taps[a].w) {
            st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
            break;
        }
        for (int64_t o = 0; o < out; o++) {
            int64_t *ix = taps[a].idx + o * t;
            double *w = taps[a].w + o * t;
            for (int j = 0; j < t; j++) ix[j] = -1, w[j] = 0;
            if (t == 1 && m != 0) { ix[0] = o; w[0] = 1; continue; }
            double c;
            if (!strcmp(ctm, "half_pixel")) c = ((double)o + 0.5) / s - 0.5;
            else if (!strcmp(ctm, "half_pixel_symmetric")) {
                double adj = (double)out / (s * (double)in), ctr = (double)in / 2;
                c = ctr * (1 - adj) + ((double)o + 0.5) / s - 0.5;
            } else if (!strcmp(ctm, "tf_half_pixel_for_nn")) c = ((double)o + 0.5) / s;
            else if (!strcmp(ctm, "pytorch_half_pixel")) c = (double)in * s > 1 ? ((double)o + 0.5) / s - 0.5 : 0;
            else if (!strcmp(ctm, "align_corners"))  /* the resized length is in * scale, unrounded */
                c = (double)in * s != 1 ? (double)o * (double)(in - 1) / ((double)in * s - 1) : 0;
            else if (!strcmp(ctm, "tf_crop_and_resize"))
                c = out > 1 ? roi[a] * (double)(in - 1) + (double)o * (roi[r + a] - roi[a]) * (double)(in - 1) / (double)(out - 1)
                            : 0.5 * (roi[a] + roi[r + a]) * (double)(in - 1);
            else c = (double)o / s;
            if (!strcmp(ctm, "tf_crop_and_resize") && (c < 0 || c > (double)(in - 1))) {
                ix[0] = -2; /* extrapolated */
                continue;
            }
            if (m == 0) {
                int64_t q;
                if (!strcmp(nmode, "floor")) q = mp_kf2i(floor(c));
                else if (!strcmp(nmode, "ceil")) q = mp_kf2i(ceil(c));
                else if (!strcmp(nmode, "round_prefer_ceil")) q = mp_kf2i(floor(c + 0.5));
                else q = c - floor(c) == 0.5 ? mp_kf2i(floor(c)) : mp_kf2i(floor(c + 0.5));
                ix[0] = q < 0 ? 0 : q >= in ? in - 1 : q;
                w[0] = 1;
                continue;
            }
            double f = floor(c), sum = 0;
            int half = t / 2;
            for (int j = 0; j < t; j++) {
                int64_t q = mp_kf2i(f) - half + 1 + j;
                double d = c - (double)q, wt;
                if (m == 1) wt = anti ? fmax(0.0, 1.0 - fabs(d) * s) : fmax(0.0, 1.0 - fabs(d));
                else wt = anti ? mp_kcubic(d * s, ca) : mp_kcubic(d, ca);
                if (q < 0 || q >= in) {
                    if (excl) wt = 0;
                    q = q < 0 ? 0 : in - 1;
                }
                ix[j] = q;
                w[j] = wt;
                sum += wt;
            }
            if ((anti || excl) && sum != 0)
                for (int j = 0; j < t; j++) w[j] /= sum;
        }
    }
    if (!st) {
        int64_t xs[MP_MAX_RANK], oidx[MP_MAX_RANK], tj[MP_MAX_RANK];
        mp_kstrides(r, x->dims, xs);
        for (int64_t e = 0; e < y->numel; e++) {
            int64_t rem = e;
            bool extra = false;
            for (int a = r - 1; a >= 0; a--) {
                oidx[a] = rem % y->dims[a];
                rem /= y->dims[a];
                if (taps[a].idx[oidx[a] * taps[a].t] == -2) extra = true;
            }
            if (extra) {
                mp_kset_f(y->data, y->dtype, e, extrap);
                continue;
            }
            double acc = 0;
            for (int a = 0; a < r; a++) tj[a] = 0;
            for (;;) {
                double w = 1;
                int64_t off = 0;
                for (int a = 0; a < r && w != 0; a++) {
                    int64_t at = oidx[a] * taps[a].t + tj[a];
                    w *= taps[a].w[at];
                    off += taps[a].idx[at] * xs[a];
                }
                if (w != 0) acc += w * mp_kget_f(x->data, x->dtype, off);
                int a = r - 1;
                for (; a >= 0; a--) {
                    if (++tj[a] < taps[a].t) break;
                    tj[a] = 0;
                }
                if (a < 0) break;
            }
            mp_kset_f(y->data, y->dtype, e, acc);
        }
    }
    for (int a = 0; a < r; a++) free(taps[a].idx), free(taps[a].w);
    return st;
}

/* ---- the table ---- */

/* ---- training: what the backward keeps (ops.h mp_bwd) ---- */

static uint64_t nn_numel(const mp_value *v) {
    int64_t n = v ? mp_value_numel(v) : -1;
    return n > 0 ? (uint64_t)n : 0;
}

/* Convolutions: PyTorch's convolution_backward is one formula for input,
 * weight and bias, so the forward keeps both input and weight whenever any
 * gradient is needed (under autocast, the weight's low-precision copy even
 * for a first layer whose input needs none). */
static void train_conv(mp_ctx *c, mp_bwd *t) {
    mp_bwd_product(c, t);
    if (t->rg) t->save_in |= 3u;
}

/* Max pooling keeps its input and the int64 index of each output's max
 * (PyTorch max_pool2d_with_indices). */
static void train_maxpool(mp_ctx *c, mp_bwd *t) {
    if (!(t->rg & 1u)) return;
    t->save_in = 1u;
    t->extra_bytes = 8 * nn_numel(mp_out(c, 0));
    t->bwd_flops = nn_numel(mp_out(c, 0));
}

/* Average and global pools keep their input (PyTorch avg_pool2d,
 * adaptive_avg_pool2d save self). */
static void train_pool(mp_ctx *c, mp_bwd *t) {
    if (!(t->rg & 1u)) return;
    t->save_in = 1u;
    t->bwd_flops = nn_numel(mp_in(c, 0));
}

/* Normalisations keep their input and two fp32 statistics per normalised
 * group (mean and 1/std); the backward costs about twice the forward.
 * BatchNorm runs in its input's type (cuDNN takes bf16 with fp32 scale);
 * layer and group norms are on autocast's fp32 list. */
static void nn_train_norm(mp_ctx *c, mp_bwd *t, uint64_t groups, int amp) {
    t->amp = (uint8_t)amp;
    if (!t->rg) return;
    t->save_in = 1u;
    t->extra_bytes = 2 * 4 * groups;
    t->bwd_flops = 2 * t->fwd->flops;
}

static void train_batchnorm(mp_ctx *c, mp_bwd *t) {
    const mp_value *x = mp_in(c, 0);
    nn_train_norm(c, t, x && x->rank >= 2 && x->dims[1] > 0 ? (uint64_t)x->dims[1] : 0, MP_AMP_PROMOTE);
}

static void train_layernorm(mp_ctx *c, mp_bwd *t) {
    const mp_value *x = mp_in(c, 0);
    uint64_t rows = 0;
    if (x && x->rank >= 1) {
        int ax = mp_axis(mp_attr_i(c->n, "axis", -1), x->rank);
        int64_t r = ax >= 0 ? mp_dims_product(x->dims, ax) : -1;
        rows = r > 0 ? (uint64_t)r : 0;
    }
    nn_train_norm(c, t, rows, MP_AMP_FP32);
}

static void train_groupnorm(mp_ctx *c, mp_bwd *t) {
    const mp_value *x = mp_in(c, 0);
    uint64_t n = x && x->rank >= 1 && x->dims[0] > 0 ? (uint64_t)x->dims[0] : 0;
    int64_t g = mp_streq(c->n->op, "InstanceNormalization")
                    ? (x && x->rank >= 2 ? x->dims[1] : 0)
                    : mp_attr_i(c->n, "num_groups", 1);
    nn_train_norm(c, t, n * (uint64_t)(g > 0 ? g : 0), MP_AMP_FP32);
}

/* Softmax and LogSoftmax keep their output (autocast's fp32 list). */
static void train_softmax(mp_ctx *c, mp_bwd *t) {
    t->amp = MP_AMP_FP32;
    if (mp_streq(c->n->op, "Hardmax") || !t->rg) return;
    t->save_out = 1u;
    t->bwd_flops = 2 * t->fwd->flops;
}

/* Sum and mean need only the input's shape; max/min, prod and the norms
 * keep input and output. */
static void train_reduce(mp_ctx *c, mp_bwd *t) {
    const char *op = c->n->op;
    if (mp_streq(op, "ArgMax") || mp_streq(op, "ArgMin")) {
        t->amp = MP_AMP_KEEP;
        return;
    }
    if (!(t->rg & 1u)) return;
    t->bwd_flops = nn_numel(mp_in(c, 0));
    /* mean's backward needs only sizes in PyTorch 2 (derivatives.yaml:
     * mean_backward(grad, self.sym_sizes(), dim, self.sym_numel(), keepdim));
     * PyTorch 1.13's MeanBackward1 saved self (it has _saved_self) */
    if (mp_streq(op, "ReduceMean") && t->torch_1_13) t->save_in = 1u;
    if (mp_streq(op, "ReduceSum") || mp_streq(op, "ReduceMean")) return;
    t->save_in = 1u;
    if (!mp_streq(op, "ReduceSumSquare")) t->save_out = 1u;
    t->bwd_flops *= 2;
}

/* Dropout keeps its mask, one byte per element (a bool tensor), unless
 * its ratio is known to be 0 (then it is the identity: a view). */
static void train_dropout(mp_ctx *c, mp_bwd *t) {
    double ratio = 0.5;
    const double *v;
    int64_t n;
    if (c->n->opset < 12 || !mp_in(c, 1)) ratio = mp_attr_f(c->n, "ratio", 0.5);
    else if (mp_floats(c, 1, &v, &n) && n == 1) ratio = v[0];
    if (ratio == 0) {
        t->view = true;
        return;
    }
    if (!(t->rg & 1u)) return;
    t->extra_bytes = nn_numel(mp_out(c, 0));
    t->bwd_flops = nn_numel(mp_out(c, 0));
}

/* Resizing keeps nothing but shapes; the backward scatters each output. */
static void train_resize(mp_ctx *c, mp_bwd *t) {
    if (t->rg & 1u) t->bwd_flops = 2 * nn_numel(mp_out(c, 0));
}

static void train_lrn(mp_ctx *c, mp_bwd *t) {
    if (!(t->rg & 1u)) return;
    t->save_in = 1u;
    t->save_out = 1u;
    t->bwd_flops = 2 * t->fwd->flops;
}

#define NN_W_B ((1u << 1) | (1u << 2))  /* inputs 1, 2 are parameters */

const mp_op mp_ops_nn[] = {
    {"", "Conv", 1, infer_conv, cost_conv, NN_W_B, 0, NULL, mp_kconv, .train = train_conv},
    {"", "ConvTranspose", 1, infer_conv_transpose, cost_conv_transpose, NN_W_B, 0, NULL, nnk_conv_transpose, .train = train_conv},
    {"", "MaxPool", 1, infer_pool, mp_cost_in1, 0, 0, NULL, nnk_maxpool, .train = train_maxpool},
    {"", "AveragePool", 1, infer_pool, mp_cost_in1, 0, 0, NULL, nnk_avgpool, .train = train_pool},
    {"", "LpPool", 1, infer_pool, mp_cost_in1, 0, 0, NULL, nnk_lppool, .train = train_pool},
    {"", "GlobalAveragePool", 1, infer_global_pool, mp_cost_in1, 0, 0, NULL, nnk_gavgpool, .train = train_pool},
    {"", "GlobalMaxPool", 1, infer_global_pool, mp_cost_in1, 0, 0, NULL, nnk_gmaxpool, .train = train_pool},
    {"", "GlobalLpPool", 2, infer_global_pool, mp_cost_in1, 0, 0, NULL, nnk_glppool, .train = train_pool},
    /* scale, B: parameters; mean, var: buffers */
    {"", "BatchNormalization", 1, infer_batchnorm, cost_batchnorm, NN_W_B,
     (1u << 3) | (1u << 4), NULL, nnk_batchnorm, .train = train_batchnorm},
    {"", "InstanceNormalization", 1, infer_instancenorm, cost_norm5, NN_W_B, 0, NULL, nnk_instancenorm, .train = train_groupnorm},
    {"", "LayerNormalization", 17, infer_layernorm, cost_layernorm, NN_W_B, 0, NULL, mp_klayernorm, .train = train_layernorm},
    {"", "GroupNormalization", 18, infer_groupnorm18, cost_norm5, NN_W_B, 0, NULL, nnk_groupnorm, .train = train_groupnorm},
    {"", "GroupNormalization", 21, infer_groupnorm21, cost_norm5, NN_W_B, 0, NULL, nnk_groupnorm, .train = train_groupnorm},
    {"", "LpNormalization", 1, infer_lpnorm, cost_lpnorm, 0, 0, NULL, nnk_lpnorm, .train = train_lrn},
    {"", "MeanVarianceNormalization", 9, infer_mvn, cost_norm4, 0, 0, NULL, nnk_mvn, .train = train_lrn},
    {"", "LRN", 1, infer_lrn, cost_lrn, 0, 0, NULL, nnk_lrn, .train = train_lrn},
    {"", "Softmax", 1, infer_softmax, mp_cost_in1, 0, 0, NULL, nnk_softmax, .train = train_softmax},
    {"", "LogSoftmax", 1, infer_softmax, mp_cost_in1, 0, 0, NULL, nnk_softmax, .train = train_softmax},
    {"", "Hardmax", 1, infer_softmax, mp_cost_in1, 0, 0, NULL, nnk_softmax, .train = train_softmax},
    {"", "ReduceSum", 1, infer_rsum_attr, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceSum", 13, infer_rsum_input, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceProd", 1, infer_rprod_attr, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceProd", 18, infer_rprod_input, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceMax", 1, infer_rmax_attr, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceMax", 18, infer_rmax_input, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceMin", 1, infer_rmin_attr, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceMin", 18, infer_rmin_input, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceMean", 1, infer_reduce_attr, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceMean", 18, infer_reduce_input, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceL1", 1, infer_reduce_attr, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceL1", 18, infer_reduce_input, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceL2", 1, infer_reduce_attr, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceL2", 18, infer_reduce_input, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceLogSum", 1, infer_reduce_attr, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceLogSum", 18, infer_reduce_input, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceLogSumExp", 1, infer_reduce_attr, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceLogSumExp", 18, infer_reduce_input, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceSumSquare", 1, infer_reduce_attr, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ReduceSumSquare", 18, infer_reduce_input, mp_cost_in1, 0, 0, NULL, nnk_reduce, .train = train_reduce},
    {"", "ArgMax", 1, infer_argminmax, mp_cost_in1, 0, 0, NULL, nnk_argminmax, .train = train_reduce},
    {"", "ArgMin", 1, infer_argminmax, mp_cost_in1, 0, 0, NULL, nnk_argminmax, .train = train_reduce},
    /* ratio (and training_mode) are not parameters */
    {"", "Dropout", 1, infer_dropout1, mp_cost_zero, 0, 0, NULL, nnk_dropout, .train = train_dropout},
    {"", "Dropout", 10, infer_dropout10, mp_cost_zero, 0, (1u << 1) | (1u << 2), NULL, nnk_dropout, .train = train_dropout},
    /* scales and roi are float constants, not parameters */
    {"", "Upsample", 7, infer_upsample7, cost_resize, 0, 0, NULL, nnk_resize, .train = train_resize},
    {"", "Upsample", 9, infer_upsample9, cost_resize, 0, 1u << 1, NULL, nnk_resize, .train = train_resize},
    {"", "Resize", 10, infer_resize10, cost_resize, 0, 1u << 1, NULL, nnk_resize, .train = train_resize},
    {"", "Resize", 11, infer_resize11, cost_resize, 0, (1u << 1) | (1u << 2), NULL, nnk_resize, .train = train_resize},
    {"", "Resize", 18, infer_resize18, cost_resize, 0, (1u << 1) | (1u << 2), NULL, nnk_resize, .train = train_resize},
};
const int mp_ops_nn_count = (int)MP_ARRAY_LEN(mp_ops_nn);
