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
 * the symbol is kept).
 *
 * This file holds the rules and the descriptor table; the reference
 * kernels are in nn_kernels.c. */
#include "ops/kernel.h"
#include "ops/scalar.h"

#include <math.h>
#include <stdlib.h>
#include "ops/nn_int.h"

/* ---- small shared helpers ---- */

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
    mp_status st = mp_arity(c, 2, 3);
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
    if ((st = mp_arity(c, 2, 3)) || (st = mp_need_in(c, 0, "X", &x)) ||
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
    if ((st = mp_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "X", &x))) return st;
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
    if ((st = mp_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "X", &x))) return st;
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
    if ((st = mp_arity(c, 5, 5))) return st;
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

int mp_bn_flops_per_elem(bool training) { return training ? 5 : 2; }

static void cost_batchnorm(mp_ctx *c, mp_cost *k) {
    bool training = mp_attr_i(c->n, "training_mode", 0) != 0;
    if (c->n->opset < 14)
        for (int o = 1; o < c->n->n_out; o++) training |= mp_out(c, o) != NULL;
    nn_cost_per_elem(k, (uint64_t)mp_bn_flops_per_elem(training), mp_in(c, 0));
}

/* InstanceNormalization: X, scale [C], B [C] -> Y like X.
 * FLOPs = 5 * numel(X) (affine normalization, GUIDE). */

static mp_status infer_instancenorm(mp_ctx *c) {
    mp_status st;
    mp_value *x, *v;
    if ((st = mp_arity(c, 3, 3)) || (st = mp_need_in(c, 0, "X", &x)) ||
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
    if ((st = mp_arity(c, 2, 3)) || (st = mp_need_in(c, 0, "X", &x)) ||
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
    if ((st = mp_arity(c, 3, 3)) || (st = mp_need_in(c, 0, "X", &x)) ||
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
    if ((st = mp_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "X", &x))) return st;
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
    if ((st = mp_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "X", &x))) return st;
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
    if ((st = mp_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "X", &x))) return st;
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
    if ((st = mp_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "input", &x))) return st;
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
    if ((st = mp_arity(c, 1, axes_input ? 2 : 1)) || (st = mp_need_in(c, 0, "data", &x)))
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
    if ((st = mp_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "data", &x))) return st;
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
    if ((st = mp_arity(c, 1, 3)) || (st = mp_need_in(c, 0, "data", &x))) return st;
    if ((st = mp_set_out_like(c, 0, x))) return st;
    if ((st = mp_set_out(c, 1, mask_dtype < 0 ? x->dtype : mask_dtype, x->rank, x->dims)))
        return st;
    return nn_pass_contents(c, x);
}

static mp_status infer_dropout1(mp_ctx *c) { return nn_dropout(c, -1); }
static mp_status infer_dropout10(mp_ctx *c) { return nn_dropout(c, MP_DT_BOOL); }

/* ---- Resize, Upsample ----
 * Output dims: sizes when given, else floor(in * scale) (the product in
 * float, as ONNX Runtime rounds it). Only the listed
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
    if ((st = mp_arity(c, 1, 4)) || (st = mp_need_in(c, 0, "X", &x))) return st;
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
            /* in float, as ONNX Runtime computes it (and PyTorch's export
             * expects): 7 x 1.8571428f (13/7) is 13, not 12.9999996 */
            double o = floor((double)((float)in * (float)s[j]));
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
 * long); oneDNN serves the heavy ones in real runs (src/run/dnnl_*.c).
 * Inputs of other float types are read through mp_kget_f. */

bool nnk_f32(const mp_rtensor *t) { return t && t->dtype == MP_DT_FLOAT; }

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
