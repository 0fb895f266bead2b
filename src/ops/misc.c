/* Miscellaneous operators: losses (NegativeLogLikelihoodLoss,
 * SoftmaxCrossEntropyLoss), detection (NonMaxSuppression, RoiAlign),
 * sampling (GridSample, MaxUnpool), random generators (RandomUniform,
 * RandomNormal, their -Like forms, Bernoulli, Multinomial), signal
 * processing (DFT, STFT, MelWeightMatrix, Blackman/Hamming/Hann windows),
 * TopK and Det.
 *
 * Each operator's shape rule and cost rule sit together below, with the
 * rule in a comment; docs/counting/misc.md holds the same rules with a
 * worked example each. Unknown dims (< 0) flow through; a dim that depends
 * on contents the analysis does not know is the anonymous "?". Only
 * contradictions (ranks, mismatched known dims, bad attributes) are
 * errors. Constant float inputs that steer an op (class weights, IoU
 * thresholds, sampling grids, windows, boxes) are buffers, never
 * parameters.
 *
 * This file holds the rules and the descriptor table; the reference
 * kernels are in misc_kernels.c. */
#include "ops/kernel.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include "ops/misc_int.h"

/* ---- small shared helpers ---- */

/* Two dims that must be equal: a known one wins; two known ones that
 * differ are an error naming `what`. */
static mp_status ms_agree(mp_ctx *c, int64_t a, int64_t b, const char *what, int64_t *out) {
    if (!mp_dim_merge(a, b, out))
        return mp_fail(c, "%s: %lld vs %lld", what, (long long)a, (long long)b);
    return MP_OK;
}

/* Input i, when present with a known shape, must hold exactly one value. */
static mp_status ms_check_scalar(mp_ctx *c, int i, const char *what) {
    mp_value *v = mp_in(c, i);
    if (!v || v->rank < 0) return MP_OK;
    int64_t n = mp_value_numel(v);
    if (n >= 0 && n != 1) return mp_fail(c, "%s must hold one value, has %lld", what, (long long)n);
    if (v->rank > 1) return mp_fail(c, "%s must be a scalar, has rank %d", what, v->rank);
    return MP_OK;
}


/* A dtype attribute (`def` when absent). Numeric types only: not
 * undefined, string or out of range. */
static mp_status ms_dtype_attr(mp_ctx *c, const char *name, int def, int *dt) {
    const mp_attr *a = mp_node_attr(c->n, name);
    if (!a || a->type != MP_ATTR_INT) {
        *dt = def;
        return MP_OK;
    }
    if (a->i <= 0 || a->i >= MP_DT_COUNT || a->i == MP_DT_STRING)
        return mp_fail(c, "%s = %lld is not a numeric data type", name, (long long)a->i);
    *dt = (int)a->i;
    return MP_OK;
}

/* Smallest L with 2^L >= n (0 for n <= 1). */
static uint64_t ms_ceil_log2(uint64_t n) {
    uint64_t l = 0;
    while (l < 64 && (UINT64_C(1) << l) < n) l++;
    return l;
}

/* Product of v's dims, skipping axes a and b (-1: none), for costing: 0
 * with MP_COST_UNKNOWN when a needed dim is unknown. */
static uint64_t ms_prod_skip(const mp_value *v, int a, int b, mp_cost *k) {
    if (!v || v->rank < 0) {
        k->flags |= MP_COST_UNKNOWN;
        return 0;
    }
    bool ovf = false;
    uint64_t p = 1;
    for (int i = 0; i < v->rank; i++) {
        if (i == a || i == b) continue;
        if (v->dims[i] < 0) {
            k->flags |= MP_COST_UNKNOWN;
            return 0;
        }
        p = mp_umul(p, (uint64_t)v->dims[i], &ovf);
    }
    if (ovf) k->flags |= MP_COST_OVERFLOW;
    return p;
}

/* k->flops = per * n, saturating. */
static void ms_set_flops(mp_cost *k, uint64_t per, uint64_t n) {
    bool ovf = false;
    k->flops = mp_umul(per, n, &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ----
 * input/scores [N, C, d1..dk], target/labels [N, d1..dk] (integer),
 * weight [C] optional. reduction "none": loss [N, d1..dk]; "mean" / "sum":
 * a scalar. dtype of the input. SoftmaxCrossEntropyLoss's optional output
 * 1, log_prob, has the scores' shape and dtype.
 * FLOPs, with T = elements of the target:
 *   NLL: T (each picked value negated, or multiplied by its weight)
 *        + reduction: sum T adds; mean T adds + 1 division, and with
 *        weights another T adds for the sum of the picked weights.
 *   SCE: 3 x elements of the scores (log-softmax: exp, the row sum, the
 *        subtraction of log-sum; the row max and the row's log are not
 *        counted) + the NLL figure.
 * The class weights are buffers (a constant, not learnable). */

typedef enum { MS_RED_NONE, MS_RED_SUM, MS_RED_MEAN } ms_red;

static mp_status ms_reduction(mp_ctx *c, ms_red *r) {
    const char *s = mp_attr_s(c->n, "reduction", "mean");
    if (!strcmp(s, "none")) *r = MS_RED_NONE;
    else if (!strcmp(s, "sum")) *r = MS_RED_SUM;
    else if (!strcmp(s, "mean")) *r = MS_RED_MEAN;
    else return mp_fail(c, "reduction must be none, sum or mean, got '%s'", s);
    return MP_OK;
}

static mp_status ms_nll_infer(mp_ctx *c) {
    mp_status st;
    mp_value *x, *t, *w = mp_in(c, 2);
    ms_red red = MS_RED_MEAN;
    if ((st = mp_arity(c, 2, 3)) || (st = mp_need_in(c, 0, "input", &x)) ||
        (st = mp_need_in(c, 1, "target", &t)) || (st = ms_reduction(c, &red)))
        return st;
    if (t->dtype != MP_DT_UNDEFINED && !mp_dtype_is_int(t->dtype))
        return mp_fail(c, "target must be an integer tensor, is %s", mp_dtype_name(t->dtype));
    if (x->rank >= 0 && x->rank < 2)
        return mp_fail(c, "input must be [N, C, d...], got rank %d", x->rank);
    if (x->rank >= 0 && t->rank >= 0 && t->rank != x->rank - 1)
        return mp_fail(c, "target has rank %d, input has rank %d (expected %d)", t->rank, x->rank,
                       x->rank - 1);
    if (w && w->rank >= 0) {
        if (w->rank != 1) return mp_fail(c, "weight must have rank 1, got %d", w->rank);
        int64_t ch;
        if ((st = ms_agree(c, w->dims[0], mp_value_dim(x, 1), "weight length vs classes", &ch)))
            return st;
    }
    int r = t->rank >= 0 ? t->rank : x->rank >= 0 ? x->rank - 1 : -1;
    int64_t dims[MP_MAX_RANK];
    for (int i = 0; i < r; i++) {
        char what[64];
        snprintf(what, sizeof what, "target dim %d vs input dim %d", i, i ? i + 1 : 0);
        if ((st = ms_agree(c, mp_value_dim(t, i), mp_value_dim(x, i ? i + 1 : 0), what, &dims[i])))
            return st;
    }
    if (red != MS_RED_NONE) return mp_set_out(c, 0, x->dtype, 0, NULL);
    return mp_set_out(c, 0, x->dtype, r, dims);
}

static mp_status infer_nll(mp_ctx *c) { return ms_nll_infer(c); }

static mp_status infer_sce(mp_ctx *c) {
    mp_status st = ms_nll_infer(c);
    if (st) return st;
    mp_value *x = mp_in(c, 0);
    return mp_set_out(c, 1, x->dtype, x->rank, x->dims);
}

/* The NLL part: see the rule above. */
static uint64_t ms_nll_flops(mp_ctx *c, mp_cost *k) {
    ms_red red = MS_RED_MEAN;
    const char *s = mp_attr_s(c->n, "reduction", "mean");
    if (!strcmp(s, "none")) red = MS_RED_NONE;
    else if (!strcmp(s, "sum")) red = MS_RED_SUM;
    uint64_t t = mp_cnumel(mp_in(c, 1), k);
    bool ovf = false;
    uint64_t f = t;
    if (red != MS_RED_NONE) f = mp_uadd(f, t, &ovf);
    if (red == MS_RED_MEAN) {
        f = mp_uadd(f, 1, &ovf);
        if (mp_in(c, 2)) f = mp_uadd(f, t, &ovf);
    }
    if (ovf) k->flags |= MP_COST_OVERFLOW;
    return f;
}

static void cost_nll(mp_ctx *c, mp_cost *k) { k->flops = ms_nll_flops(c, k); }

static void cost_sce(mp_ctx *c, mp_cost *k) {
    bool ovf = false;
    uint64_t ls = mp_umul(3, mp_cnumel(mp_in(c, 0), k), &ovf);
    k->flops = mp_uadd(ls, ms_nll_flops(c, k), &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* ---- NonMaxSuppression (10, 11) ----
 * boxes [B, n, 4], scores [B, classes, n] -> selected_indices int64
 * [?, 3]: how many boxes survive depends on their values. The count is 0
 * (a known dim) when max_output_boxes_per_class is absent (its default 0)
 * or known to be 0, or when B, classes or n is 0.
 * FLOPs, an upper bound (MP_COST_BOUND), per batch and class: sorting the
 * scores n x ceil(log2 n) comparisons, plus 13 per IoU test (intersection
 * corners 2 max + 2 min, width and height 2 sub + 2 clamps, area 1 mul,
 * union 2, ratio 1 div, threshold 1 compare) for at most
 * m x n - m(m+1)/2 box pairs, m = min(max_output_boxes_per_class, n)
 * (every selected box tested against every remaining candidate; m = n
 * when the limit is not known). The thresholds are buffers. */

/* max_output_boxes_per_class: 0 when absent; -1 when unknown. */
static int64_t ms_nms_limit(mp_ctx *c) {
    mp_value *v = mp_in(c, 2);
    if (!v || mp_value_numel(v) == 0) return 0;
    int64_t m;
    if (!mp_int1(c, 2, &m)) return -1;
    return m < 0 ? 0 : m;
}

static mp_status infer_nms(mp_ctx *c) {
    mp_status st;
    mp_value *b, *s;
    if ((st = mp_arity(c, 2, 5)) || (st = mp_need_in(c, 0, "boxes", &b)) ||
        (st = mp_need_in(c, 1, "scores", &s)))
        return st;
    if (b->rank >= 0 && b->rank != 3)
        return mp_fail(c, "boxes must be [B, n, 4], got rank %d", b->rank);
    if (s->rank >= 0 && s->rank != 3)
        return mp_fail(c, "scores must be [B, classes, n], got rank %d", s->rank);
    if (mp_value_dim(b, 2) >= 0 && mp_value_dim(b, 2) != 4)
        return mp_fail(c, "boxes' last dim must be 4, got %lld", (long long)mp_value_dim(b, 2));
    int64_t nb = MP_DIM_ANON, nn = MP_DIM_ANON;
    if ((st = ms_agree(c, mp_value_dim(b, 0), mp_value_dim(s, 0), "batch of boxes vs scores", &nb)) ||
        (st = ms_agree(c, mp_value_dim(b, 1), mp_value_dim(s, 2), "boxes vs scores per class", &nn)))
        return st;
    if ((st = ms_check_scalar(c, 2, "max_output_boxes_per_class")) ||
        (st = ms_check_scalar(c, 3, "iou_threshold")) ||
        (st = ms_check_scalar(c, 4, "score_threshold")))
        return st;
    int64_t cpb = mp_attr_i(c->n, "center_point_box", 0);
    if (cpb != 0 && cpb != 1)
        return mp_fail(c, "center_point_box must be 0 or 1, got %lld", (long long)cpb);
    int64_t dims[2] = {MP_DIM_ANON, 3};
    if (ms_nms_limit(c) == 0 || nb == 0 || nn == 0 || mp_value_dim(s, 1) == 0) dims[0] = 0;
    return mp_set_out(c, 0, MP_DT_INT64, 2, dims);
}

static void cost_nms(mp_ctx *c, mp_cost *k) {
    mp_value *s = mp_in(c, 1);
    k->flags |= MP_COST_BOUND;
    int64_t lim = ms_nms_limit(c);
    if (lim == 0) {
        k->flops = 0;
        return;
    }
    if (!mp_shape_known(s) || s->rank != 3) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    uint64_t n = (uint64_t)s->dims[2], m = lim < 0 ? n : MP_MIN((uint64_t)lim, n);
    bool ovf = false;
    /* pairs = m*n - m(m+1)/2: one of m, m+1 is even */
    uint64_t half = (m % 2 == 0) ? mp_umul(m / 2, m + 1, &ovf) : mp_umul(m, (m + 1) / 2, &ovf);
    uint64_t pairs = mp_umul(m, n, &ovf) - half;
    uint64_t per = mp_uadd(mp_umul(n, ms_ceil_log2(n), &ovf), mp_umul(13, pairs, &ovf), &ovf);
    uint64_t groups = mp_umul((uint64_t)s->dims[0], (uint64_t)s->dims[1], &ovf);
    k->flops = mp_umul(per, groups, &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* ---- GridSample (16; 20: any spatial rank) ----
 * X [N, C, D1..Dr], grid [N, O1..Or, r] -> Y [N, C, O1..Or], dtype of X.
 * Opset 16 takes 4-D X only (r = 2) with modes bilinear / nearest /
 * bicubic; opset 20 names them linear / nearest / cubic.
 * FLOPs per output element, as Resize counts an interpolation (3 per
 * lerp, 7 per 4-point cubic), but not separable: nearest 0; linear
 * 3 x (2^r - 1) (bilinear: 3 lerps = 9); cubic 7 x (4^r - 1) / 3 (bicubic:
 * 4 row interpolations + 1 column = 35). The grid's unnormalization and
 * padding (clamps, reflections) are not counted. The grid is a buffer. */

static mp_status ms_gridsample(mp_ctx *c, bool v20) {
    mp_status st;
    mp_value *x, *g;
    if ((st = mp_arity(c, 2, 2)) || (st = mp_need_in(c, 0, "X", &x)) ||
        (st = mp_need_in(c, 1, "grid", &g)))
        return st;
    const char *mode = mp_attr_s(c->n, "mode", v20 ? "linear" : "bilinear");
    bool ok = !strcmp(mode, "nearest") ||
              (v20 ? (!strcmp(mode, "linear") || !strcmp(mode, "cubic"))
                   : (!strcmp(mode, "bilinear") || !strcmp(mode, "bicubic")));
    if (!ok) return mp_fail(c, "unknown mode '%s'", mode);
    const char *pad = mp_attr_s(c->n, "padding_mode", "zeros");
    if (strcmp(pad, "zeros") && strcmp(pad, "border") && strcmp(pad, "reflection"))
        return mp_fail(c, "unknown padding_mode '%s'", pad);
    int r = -1;
    if (x->rank >= 0) {
        if (x->rank < 3) return mp_fail(c, "X must be [N, C, D...], got rank %d", x->rank);
        r = x->rank - 2;
    }
    if (g->rank >= 0) {
        if (g->rank < 3) return mp_fail(c, "grid must be [N, O..., r], got rank %d", g->rank);
        if (r >= 0 && g->rank - 2 != r)
            return mp_fail(c, "grid has rank %d for %d spatial dims", g->rank, r);
        r = g->rank - 2;
    }
    if (!v20 && r >= 0 && r != 2)
        return mp_fail(c, "X must be 4-D [N, C, H, W] at opset %d, has %d spatial dims",
                       c->n->opset, r);
    if (r < 0) return mp_set_out(c, 0, x->dtype, -1, NULL);
    if (mp_value_dim(g, r + 1) >= 0 && mp_value_dim(g, r + 1) != r)
        return mp_fail(c, "grid's last dim is %lld for %d spatial dims",
                       (long long)mp_value_dim(g, r + 1), r);
    int64_t dims[MP_MAX_RANK];
    if ((st = ms_agree(c, mp_value_dim(x, 0), mp_value_dim(g, 0), "batch of X vs grid", &dims[0]))) return st;
    dims[1] = mp_value_dim(x, 1);
    for (int i = 0; i < r; i++) dims[2 + i] = mp_value_dim(g, 1 + i);
    return mp_set_out(c, 0, x->dtype, r + 2, dims);
}

static mp_status infer_gridsample16(mp_ctx *c) { return ms_gridsample(c, false); }
static mp_status infer_gridsample20(mp_ctx *c) { return ms_gridsample(c, true); }

static void cost_gridsample(mp_ctx *c, mp_cost *k) {
    mp_value *y = mp_out(c, 0);
    const char *mode = mp_attr_s(c->n, "mode", c->n->opset >= 20 ? "linear" : "bilinear");
    uint64_t n = mp_cnumel(y, k);
    if (!y || y->rank < 3) return;
    int r = y->rank - 2;
    uint64_t per = 0;
    if (r > 30) {
        k->flags |= MP_COST_OVERFLOW;
        per = UINT64_MAX;
    } else if (!strcmp(mode, "linear") || !strcmp(mode, "bilinear")) {
        per = 3 * ((UINT64_C(1) << r) - 1);
    } else if (!strcmp(mode, "cubic") || !strcmp(mode, "bicubic")) {
        per = 7 * (((UINT64_C(1) << (2 * r)) - 1) / 3);
    }
    ms_set_flops(k, per, n);
}

/* ---- random generators ----
 * RandomUniform, RandomNormal (1): shape attribute (required), dtype
 * attribute (default fp32; a float type). RandomUniformLike,
 * RandomNormalLike (1): the input's shape; dtype attribute (a float type),
 * else the input's. Bernoulli (15): the input's shape; dtype attribute,
 * else the input's. Multinomial (7): input [batch, classes] -> [batch,
 * sample_size], dtype attribute int32 (default) or int64.
 * FLOPs: 1 per output element (one draw each, whatever it takes, as an
 * activation is 1 per element). */

static mp_status infer_random(mp_ctx *c) {
    mp_status st;
    if ((st = mp_arity(c, 0, 0))) return st;
    const int64_t *shape;
    int n = mp_attr_ints(c->n, "shape", &shape);
    if (n < 0) return mp_fail(c, "shape is required");
    if (n > MP_MAX_RANK) return mp_fail(c, "shape has %d dims, above the limit %d", n, MP_MAX_RANK);
    for (int i = 0; i < n; i++)
        if (shape[i] < 0) return mp_fail(c, "shape[%d] = %lld", i, (long long)shape[i]);
    int dt;
    if ((st = ms_dtype_attr(c, "dtype", MP_DT_FLOAT, &dt))) return st;
    if (!mp_dtype_is_float(dt))
        return mp_fail(c, "dtype must be a float type, is %s", mp_dtype_name(dt));
    return mp_set_out(c, 0, dt, n, shape);
}

static mp_status ms_like(mp_ctx *c, bool float_only) {
    mp_status st;
    mp_value *x;
    if ((st = mp_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "input", &x))) return st;
    int dt;
    if ((st = ms_dtype_attr(c, "dtype", x->dtype, &dt))) return st;
    if (float_only && mp_node_attr(c->n, "dtype") && !mp_dtype_is_float(dt))
        return mp_fail(c, "dtype must be a float type, is %s", mp_dtype_name(dt));
    return mp_set_out(c, 0, dt, x->rank, x->dims);
}

static mp_status infer_random_like(mp_ctx *c) { return ms_like(c, true); }
static mp_status infer_bernoulli(mp_ctx *c) { return ms_like(c, false); }

static mp_status infer_multinomial(mp_ctx *c) {
    mp_status st;
    mp_value *x;
    if ((st = mp_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "input", &x))) return st;
    if (x->rank >= 0 && x->rank != 2)
        return mp_fail(c, "input must be [batch, classes], got rank %d", x->rank);
    int64_t ss = mp_attr_i(c->n, "sample_size", 1);
    if (ss < 0) return mp_fail(c, "sample_size = %lld", (long long)ss);
    int dt;
    if ((st = ms_dtype_attr(c, "dtype", MP_DT_INT32, &dt))) return st;
    if (dt != MP_DT_INT32 && dt != MP_DT_INT64)
        return mp_fail(c, "dtype must be int32 or int64, is %s", mp_dtype_name(dt));
    int64_t dims[2] = {mp_value_dim(x, 0), ss};
    return mp_set_out(c, 0, dt, 2, dims);
}

/* ---- BlackmanWindow, HammingWindow, HannWindow (17) ----
 * size: a scalar integer input -> [size] of output_datatype (default
 * fp32); size unknown: [?]. FLOPs: 1 per output element (one window value
 * each). */

static mp_status infer_window(mp_ctx *c) {
    mp_status st;
    mp_value *s;
    if ((st = mp_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "size", &s)) ||
        (st = ms_check_scalar(c, 0, "size")))
        return st;
    int dt;
    if ((st = ms_dtype_attr(c, "output_datatype", MP_DT_FLOAT, &dt))) return st;
    if (dt == MP_DT_BOOL) return mp_fail(c, "output_datatype must be numeric, is bool");
    int64_t size = MP_DIM_ANON;
    if (mp_int1(c, 0, &size) && size < 0)
        return mp_fail(c, "size = %lld is negative", (long long)size);
    return mp_set_out(c, 0, dt, 1, &size);
}

/* ---- TopK (1: attribute k; 10: input K; 11: largest, sorted) ----
 * X [..., d_axis, ...] -> Values (X's dtype) and Indices (int64), X's
 * shape with the axis dim = K (? when K is not known). K must be in
 * [0, d_axis].
 * FLOPs = elements of X x ceil(log2(K + 1)): each element is compared with
 * a K-element heap and sifts through at most its ceil(log2(K + 1))
 * levels (K = 1 is a max scan, 1 per element, as ArgMax). Emitting the
 * heap in order (sorted=1) is not counted. K unknown: K = the axis dim,
 * flagged as an upper bound. */

static mp_status ms_topk(mp_ctx *c, bool k_input) {
    mp_status st;
    mp_value *x;
    if ((st = mp_arity(c, k_input ? 2 : 1, k_input ? 2 : 1)) || (st = mp_need_in(c, 0, "X", &x)))
        return st;
    int64_t kk = MP_DIM_ANON;
    if (k_input) {
        mp_value *kv;
        if ((st = mp_need_in(c, 1, "K", &kv)) || (st = ms_check_scalar(c, 1, "K"))) return st;
        if (!mp_int1(c, 1, &kk)) kk = MP_DIM_ANON;
        else if (kk < 0) return mp_fail(c, "K = %lld is negative", (long long)kk);
    } else {
        const mp_attr *a = mp_node_attr(c->n, "k");
        if (!a || a->type != MP_ATTR_INT) return mp_fail(c, "attribute k is required");
        kk = a->i;
        if (kk < 0) return mp_fail(c, "k = %lld is negative", (long long)kk);
    }
    if (x->rank < 0) {
        if ((st = mp_set_out(c, 0, x->dtype, -1, NULL))) return st;
        return mp_set_out(c, 1, MP_DT_INT64, -1, NULL);
    }
    if (x->rank == 0) return mp_fail(c, "X must have rank >= 1");
    int64_t axis_attr = mp_attr_i(c->n, "axis", -1);
    int axis = mp_axis(axis_attr, x->rank);
    if (axis < 0)
        return mp_fail(c, "axis %lld out of range for rank %d", (long long)axis_attr, x->rank);
    int64_t d = x->dims[axis];
    if (kk >= 0 && d >= 0 && kk > d)
        return mp_fail(c, "K = %lld is above the axis dim %lld", (long long)kk, (long long)d);
    int64_t dims[MP_MAX_RANK];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    dims[axis] = kk;
    if ((st = mp_set_out(c, 0, x->dtype, x->rank, dims))) return st;
    return mp_set_out(c, 1, MP_DT_INT64, x->rank, dims);
}

static mp_status infer_topk1(mp_ctx *c) { return ms_topk(c, false); }
static mp_status infer_topk10(mp_ctx *c) { return ms_topk(c, true); }

static void cost_topk(mp_ctx *c, mp_cost *k) {
    mp_value *x = mp_in(c, 0), *y = mp_out(c, 0) ? mp_out(c, 0) : mp_out(c, 1);
    uint64_t n = mp_cnumel(x, k);
    int axis = (x && x->rank > 0) ? mp_axis(mp_attr_i(c->n, "axis", -1), x->rank) : -1;
    int64_t kk = (y && axis >= 0 && y->rank > axis) ? y->dims[axis] : MP_DIM_ANON;
    if (kk < 0 && axis >= 0 && x->dims[axis] >= 0) {
        kk = x->dims[axis]; /* K unknown: K <= the axis dim */
        k->flags |= MP_COST_BOUND;
    }
    if (kk < 0) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    ms_set_flops(k, ms_ceil_log2((uint64_t)kk + 1), n);
}

/* ---- DFT (17: axis attribute; 20: axis input), STFT (17) ----
 * DFT: input [batch, s1..sN, 1 | 2] (real | complex) -> the input's shape
 * with the last dim 2 and the axis dim = dft_length (input 1; else the
 * axis dim), or floor(dft_length / 2) + 1 with onesided=1. axis: opset 17
 * attribute (default 1), opset 20 scalar input 2 (default -2, counted from
 * the back); it must name a signal dim. With axis 20's input unknown, the
 * signal dims are ? (unless nothing but the last dim can change).
 * FLOPs per transform of length n (FFTW's convention): 5 n ceil(log2 n)
 * for complex input, half of it for real input (the real FFT); times the
 * number of transforms (the product of the other dims but the last).
 *
 * STFT: signal [batch, length, 1 | 2], frame_step (scalar), window [L]
 * optional, frame_length (scalar) optional -> [batch, frames, bins, 2]
 * with frame_length = the input, else the window's length (they must
 * agree), frames = (length - frame_length) / frame_step + 1 (floor), bins
 * = frame_length / 2 + 1 with onesided=1 (the default), else
 * frame_length. FLOPs = batch x frames x (the DFT of frame_length as above
 * + frame_length x components for the window multiply, when a window is
 * given). The window is a buffer. */

/* FFT FLOPs of one length-n transform. */
static uint64_t ms_fft_flops(uint64_t n, bool real, bool *ovf) {
    uint64_t f = mp_umul(mp_umul(5, n, ovf), ms_ceil_log2(n), ovf);
    return real ? f / 2 : f;
}

/* DFT's axis as given: attribute (17) or input 2 (20); false when not
 * known. */
static bool ms_dft_axis_raw(mp_ctx *c, int64_t *axis) {
    if (c->n->opset < 20) *axis = mp_attr_i(c->n, "axis", 1);
    else if (!mp_in(c, 2)) *axis = -2;
    else if (!mp_int1(c, 2, axis)) return false;
    return true;
}

/* The axis normalised for `rank`: -1 when it names no signal dim. */
static int ms_dft_axis_norm(int64_t axis, int rank) {
    if (axis < 0) axis += rank;
    return (axis >= 0 && axis <= rank - 2) ? (int)axis : -1;
}

static mp_status infer_dft(mp_ctx *c) {
    mp_status st;
    mp_value *x;
    bool v20 = c->n->opset >= 20;
    if ((st = mp_arity(c, 1, v20 ? 3 : 2)) || (st = mp_need_in(c, 0, "input", &x)) ||
        (st = ms_check_scalar(c, 1, "dft_length")) || (st = ms_check_scalar(c, 2, "axis")))
        return st;
    bool onesided = mp_attr_i(c->n, "onesided", 0) != 0;
    if (x->rank < 0) return mp_set_out(c, 0, x->dtype, -1, NULL);
    int r = x->rank;
    if (r < 2) return mp_fail(c, "input must be [batch, signal..., 1 or 2], got rank %d", r);
    int64_t last = x->dims[r - 1];
    if (last >= 0 && last != 1 && last != 2)
        return mp_fail(c, "the last dim must be 1 (real) or 2 (complex), got %lld",
                       (long long)last);
    int64_t n = MP_DIM_ANON;
    bool has_len = mp_in(c, 1) != NULL;
    if (has_len && mp_int1(c, 1, &n) && n < 1)
        return mp_fail(c, "dft_length = %lld", (long long)n);
    int64_t dims[MP_MAX_RANK];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)r);
    dims[r - 1] = 2;
    int64_t raw;
    if (!ms_dft_axis_raw(c, &raw)) {
        if (has_len || onesided)
            for (int i = 0; i < r - 1; i++) dims[i] = MP_DIM_ANON;
        return mp_set_out(c, 0, x->dtype, r, dims);
    }
    int axis = ms_dft_axis_norm(raw, r);
    if (axis < 0)
        return mp_fail(c, "axis %lld does not name a signal dim of rank %d", (long long)raw, r);
    if (!has_len) n = x->dims[axis];
    if (onesided) n = n >= 0 ? n / 2 + 1 : MP_DIM_ANON;
    dims[axis] = n;
    return mp_set_out(c, 0, x->dtype, r, dims);
}

static void cost_dft(mp_ctx *c, mp_cost *k) {
    mp_value *x = mp_in(c, 0);
    int64_t raw;
    int axis = -1;
    if (x && x->rank >= 2 && ms_dft_axis_raw(c, &raw)) axis = ms_dft_axis_norm(raw, x->rank);
    if (axis < 0) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    int64_t n = x->dims[axis];
    if (mp_in(c, 1) && !mp_int1(c, 1, &n)) n = MP_DIM_ANON;
    uint64_t t = ms_prod_skip(x, axis, x->rank - 1, k);
    if (n < 0) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    bool ovf = false;
    uint64_t per = ms_fft_flops((uint64_t)n, x->dims[x->rank - 1] == 1, &ovf);
    k->flops = mp_umul(per, t, &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* STFT's frame length: the input, else the window's length; -1 unknown. */
static mp_status ms_stft_frame(mp_ctx *c, int64_t *fl) {
    mp_value *w = mp_in(c, 2), *f = mp_in(c, 3);
    int64_t wl = MP_DIM_ANON, v = MP_DIM_ANON;
    if (!w && !f) return mp_fail(c, "needs a window or a frame_length");
    if (w && w->rank >= 0) {
        if (w->rank != 1) return mp_fail(c, "window must have rank 1, got %d", w->rank);
        wl = w->dims[0];
    }
    if (f && mp_int1(c, 3, &v) && v < 1) return mp_fail(c, "frame_length = %lld", (long long)v);
    if (v < 0) v = wl; /* no frame_length, or its value unknown */
    if (wl >= 0 && v >= 0 && wl != v)
        return mp_fail(c, "window has %lld values, frame_length is %lld", (long long)wl,
                       (long long)v);
    *fl = v >= 0 ? v : MP_DIM_ANON;
    return MP_OK;
}

static mp_status infer_stft(mp_ctx *c) {
    mp_status st;
    mp_value *x, *step;
    if ((st = mp_arity(c, 2, 4)) || (st = mp_need_in(c, 0, "signal", &x)) ||
        (st = mp_need_in(c, 1, "frame_step", &step)) ||
        (st = ms_check_scalar(c, 1, "frame_step")) ||
        (st = ms_check_scalar(c, 3, "frame_length")))
        return st;
    if (x->rank >= 0 && x->rank != 3)
        return mp_fail(c, "signal must be [batch, length, 1 or 2], got rank %d", x->rank);
    int64_t last = mp_value_dim(x, 2);
    if (last >= 0 && last != 1 && last != 2)
        return mp_fail(c, "the last dim must be 1 (real) or 2 (complex), got %lld",
                       (long long)last);
    int64_t fl, s = MP_DIM_ANON;
    if ((st = ms_stft_frame(c, &fl))) return st;
    if (mp_int1(c, 1, &s) && s < 1) return mp_fail(c, "frame_step = %lld", (long long)s);
    int64_t len = mp_value_dim(x, 1), frames = MP_DIM_ANON;
    if (len >= 0 && fl >= 0) {
        if (len < fl)
            return mp_fail(c, "signal length %lld is shorter than the frame %lld", (long long)len,
                           (long long)fl);
        if (s >= 1) frames = (len - fl) / s + 1;
    }
    bool onesided = mp_attr_i(c->n, "onesided", 1) != 0;
    int64_t dims[4] = {mp_value_dim(x, 0), frames, fl < 0 ? MP_DIM_ANON : onesided ? fl / 2 + 1 : fl, 2};
    return mp_set_out(c, 0, x->dtype, 4, dims);
}

static void cost_stft(mp_ctx *c, mp_cost *k) {
    mp_value *x = mp_in(c, 0), *y = mp_out(c, 0);
    int64_t fl = MP_DIM_ANON;
    if (ms_stft_frame(c, &fl) != MP_OK) mp_error_clear();
    if (!mp_shape_known(x) || x->rank != 3 || !mp_shape_known(y) || y->rank != 4 || fl < 0) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    bool ovf = false, real = x->dims[2] == 1;
    uint64_t per = ms_fft_flops((uint64_t)fl, real, &ovf);
    if (mp_in(c, 2)) per = mp_uadd(per, mp_umul((uint64_t)fl, (uint64_t)x->dims[2], &ovf), &ovf);
    k->flops = mp_umul(per, mp_umul((uint64_t)y->dims[0], (uint64_t)y->dims[1], &ovf), &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* ---- MelWeightMatrix (17) ----
 * num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
 * upper_edge_hertz (scalars) -> [floor(dft_length / 2) + 1, num_mel_bins]
 * of output_datatype (default fp32). FLOPs: 1 per output element (one
 * triangle value each). */

static mp_status infer_melweight(mp_ctx *c) {
    mp_status st;
    mp_value *v;
    static const char *const names[] = {"num_mel_bins", "dft_length", "sample_rate",
                                        "lower_edge_hertz", "upper_edge_hertz"};
    if ((st = mp_arity(c, 5, 5))) return st;
    for (int i = 0; i < 5; i++)
        if ((st = mp_need_in(c, i, names[i], &v)) || (st = ms_check_scalar(c, i, names[i])))
            return st;
    int dt;
    if ((st = ms_dtype_attr(c, "output_datatype", MP_DT_FLOAT, &dt))) return st;
    int64_t bins = MP_DIM_ANON, len = MP_DIM_ANON;
    if (mp_int1(c, 0, &bins) && bins < 0)
        return mp_fail(c, "num_mel_bins = %lld", (long long)bins);
    if (mp_int1(c, 1, &len) && len < 0) return mp_fail(c, "dft_length = %lld", (long long)len);
    int64_t dims[2] = {len >= 0 ? len / 2 + 1 : MP_DIM_ANON, bins};
    return mp_set_out(c, 0, dt, 2, dims);
}

/* ---- RoiAlign (10; 16: coordinate_transformation_mode) ----
 * X [N, C, H, W], rois [R, 4], batch_indices [R] -> Y [R, C,
 * output_height, output_width], dtype of X.
 * FLOPs per output element: 10 per sample (a bilinear interpolation, 9 as
 * in GridSample, and 1 to accumulate it) + 1 division with mode avg. The
 * samples per bin are sampling_ratio^2; with sampling_ratio 0 (adaptive)
 * they are ceil(roi_h / output_height) x ceil(roi_w / output_width) per
 * roi: computed from the rois when their contents are known, else bounded
 * by a roi as large as the feature map (ceil(H / output_height) x
 * ceil(W / output_width)) and flagged as an upper bound. The rois are
 * buffers. */

static mp_status infer_roialign(mp_ctx *c) {
    mp_status st;
    mp_value *x, *rois, *bi;
    if ((st = mp_arity(c, 3, 3)) || (st = mp_need_in(c, 0, "X", &x)) ||
        (st = mp_need_in(c, 1, "rois", &rois)) || (st = mp_need_in(c, 2, "batch_indices", &bi)))
        return st;
    if (x->rank >= 0 && x->rank != 4)
        return mp_fail(c, "X must be [N, C, H, W], got rank %d", x->rank);
    if (rois->rank >= 0 && rois->rank != 2)
        return mp_fail(c, "rois must be [num_rois, 4], got rank %d", rois->rank);
    if (mp_value_dim(rois, 1) >= 0 && mp_value_dim(rois, 1) != 4)
        return mp_fail(c, "rois' last dim must be 4, got %lld", (long long)mp_value_dim(rois, 1));
    if (bi->rank >= 0 && bi->rank != 1)
        return mp_fail(c, "batch_indices must have rank 1, got %d", bi->rank);
    const char *mode = mp_attr_s(c->n, "mode", "avg");
    if (strcmp(mode, "avg") && strcmp(mode, "max")) return mp_fail(c, "unknown mode '%s'", mode);
    if (c->n->opset >= 16) {
        const char *ct = mp_attr_s(c->n, "coordinate_transformation_mode", "half_pixel");
        if (strcmp(ct, "half_pixel") && strcmp(ct, "output_half_pixel"))
            return mp_fail(c, "unknown coordinate_transformation_mode '%s'", ct);
    }
    int64_t oh = mp_attr_i(c->n, "output_height", 1), ow = mp_attr_i(c->n, "output_width", 1);
    if (oh < 1 || ow < 1)
        return mp_fail(c, "output size %lld x %lld is not positive", (long long)oh, (long long)ow);
    if (mp_attr_i(c->n, "sampling_ratio", 0) < 0) return mp_fail(c, "sampling_ratio is negative");
    int64_t dims[4];
    if ((st = ms_agree(c, mp_value_dim(rois, 0), mp_value_dim(bi, 0), "rois vs batch_indices", &dims[0])))
        return st;
    dims[1] = mp_value_dim(x, 1);
    dims[2] = oh;
    dims[3] = ow;
    return mp_set_out(c, 0, x->dtype, 4, dims);
}

/* Samples per bin summed over the rois (adaptive sampling) from known
 * rois; false when they are not known or not usable. */
static bool ms_roi_samples(mp_ctx *c, int64_t r, int64_t oh, int64_t ow, uint64_t *sum, bool *ovf) {
    const double *v;
    int64_t n;
    if (r < 0 || !mp_floats(c, 1, &v, &n) || n != 4 * r) return false;
    double scale = mp_attr_f(c->n, "spatial_scale", 1.0);
    const char *ct = mp_attr_s(c->n, "coordinate_transformation_mode", "half_pixel");
    bool half = c->n->opset >= 16 && !strcmp(ct, "half_pixel");
    *sum = 0;
    for (int64_t i = 0; i < r; i++) {
        double w = (v[4 * i + 2] - v[4 * i]) * scale, h = (v[4 * i + 3] - v[4 * i + 1]) * scale;
        if (!half) {
            w = fmax(w, 1.0);
            h = fmax(h, 1.0);
        }
        double gh = ceil(h / (double)oh), gw = ceil(w / (double)ow);
        if (!(gh < 4e9 && gw < 4e9)) return false; /* NaN, infinite, absurd */
        if (gh <= 0 || gw <= 0) continue;
        *sum = mp_uadd(*sum, (uint64_t)gh * (uint64_t)gw, ovf);
    }
    return true;
}

static void cost_roialign(mp_ctx *c, mp_cost *k) {
    mp_value *x = mp_in(c, 0), *y = mp_out(c, 0);
    uint64_t ny = mp_cnumel(y, k);
    if (!y || y->rank != 4 || !mp_shape_known(y)) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    bool ovf = false, avg = strcmp(mp_attr_s(c->n, "mode", "avg"), "max") != 0;
    int64_t ratio = mp_attr_i(c->n, "sampling_ratio", 0), oh = y->dims[2], ow = y->dims[3];
    uint64_t samples; /* summed over all output elements */
    if (ratio > 0) {
        samples = mp_umul(mp_umul((uint64_t)ratio, (uint64_t)ratio, &ovf), ny, &ovf);
    } else {
        uint64_t per_roi_sum, plane = mp_umul(mp_umul((uint64_t)y->dims[1], (uint64_t)oh, &ovf),
                                              (uint64_t)ow, &ovf);
        if (ms_roi_samples(c, y->dims[0], oh, ow, &per_roi_sum, &ovf)) {
            samples = mp_umul(per_roi_sum, plane, &ovf);
        } else {
            int64_t h = mp_value_dim(x, 2), w = mp_value_dim(x, 3);
            if (h < 0 || w < 0) {
                k->flags |= MP_COST_UNKNOWN;
                return;
            }
            uint64_t gh = (uint64_t)(h / oh + (h % oh != 0));
            uint64_t gw = (uint64_t)(w / ow + (w % ow != 0));
            samples = mp_umul(mp_umul(gh, gw, &ovf), ny, &ovf);
            k->flags |= MP_COST_BOUND;
        }
    }
    k->flops = mp_uadd(mp_umul(10, samples, &ovf), avg ? ny : 0, &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* ---- MaxUnpool (9; 11) ----
 * X [N, C, D...], I (indices, X's shape), output_shape optional -> Y of
 * X's dtype: output_shape's contents when given (? dims when they are not
 * known), else per spatial axis (D - 1) x stride + kernel - pad_begin -
 * pad_end. kernel_shape is required. FLOPs: 0 (a scatter: data
 * movement). */

static mp_status infer_maxunpool(mp_ctx *c) {
    mp_status st;
    mp_value *x, *ix, *os = NULL;
    if ((st = mp_arity(c, 2, 3)) || (st = mp_need_in(c, 0, "X", &x)) ||
        (st = mp_need_in(c, 1, "I", &ix)))
        return st;
    if (x->rank >= 0 && x->rank < 3)
        return mp_fail(c, "X must be [N, C, D...], got rank %d", x->rank);
    if (x->rank >= 0 && ix->rank >= 0) {
        if (ix->rank != x->rank)
            return mp_fail(c, "I has rank %d, X has rank %d", ix->rank, x->rank);
        for (int i = 0; i < x->rank; i++)
            if (x->dims[i] >= 0 && ix->dims[i] >= 0 && x->dims[i] != ix->dims[i])
                return mp_fail(c, "I's dim %d is %lld, X's is %lld", i, (long long)ix->dims[i],
                               (long long)x->dims[i]);
    }
    const int64_t *ks, *sv, *pv;
    int nk = mp_attr_ints(c->n, "kernel_shape", &ks);
    if (nk <= 0) return mp_fail(c, "kernel_shape is required");
    if (nk + 2 > MP_MAX_RANK) return mp_fail(c, "kernel_shape has %d values, above the limit", nk);
    if (x->rank >= 0 && nk != x->rank - 2)
        return mp_fail(c, "kernel_shape has %d values for %d spatial dims", nk, x->rank - 2);
    int ns = mp_attr_ints(c->n, "strides", &sv), np = mp_attr_ints(c->n, "pads", &pv);
    if (ns > 0 && ns != nk) return mp_fail(c, "strides has %d values for %d spatial dims", ns, nk);
    if (np > 0 && np != 2 * nk) return mp_fail(c, "pads has %d values for %d spatial dims", np, nk);
    for (int i = 0; i < nk; i++) {
        if (ks[i] < 1) return mp_fail(c, "kernel_shape[%d] = %lld", i, (long long)ks[i]);
        if (ns > 0 && sv[i] < 1) return mp_fail(c, "strides[%d] = %lld", i, (long long)sv[i]);
        if (np > 0 && (pv[i] < 0 || pv[i + nk] < 0)) return mp_fail(c, "pads are negative");
    }
    int r = nk + 2;
    int64_t dims[MP_MAX_RANK];
    os = mp_in(c, 2);
    if (os && mp_value_numel(os) != 0) {
        const int64_t *v;
        int64_t n;
        if (os->rank >= 0 && os->rank != 1)
            return mp_fail(c, "output_shape must have rank 1, got %d", os->rank);
        if (mp_value_dim(os, 0) >= 0 && mp_value_dim(os, 0) != r)
            return mp_fail(c, "output_shape has %lld values for rank %d",
                           (long long)mp_value_dim(os, 0), r);
        if (!mp_ints(c, 2, &v, &n) || n != r) {
            dims[0] = mp_value_dim(x, 0);
            dims[1] = mp_value_dim(x, 1);
            for (int i = 2; i < r; i++) dims[i] = MP_DIM_ANON;
            return mp_set_out(c, 0, x->dtype, r, dims);
        }
        for (int i = 0; i < r; i++)
            if (v[i] < 0) return mp_fail(c, "output_shape[%d] = %lld", i, (long long)v[i]);
        return mp_set_out(c, 0, x->dtype, r, v);
    }
    dims[0] = mp_value_dim(x, 0);
    dims[1] = mp_value_dim(x, 1);
    for (int i = 0; i < nk; i++) {
        int64_t in = mp_value_dim(x, 2 + i), s = ns > 0 ? sv[i] : 1, o, pads = 0;
        if (in < 0) {
            dims[2 + i] = MP_DIM_ANON;
            continue;
        }
        bool ovf = (np > 0 && __builtin_add_overflow(pv[i], pv[i + nk], &pads)) ||
                   __builtin_mul_overflow(in - 1, s, &o) ||
                   __builtin_add_overflow(o, ks[i], &o) || __builtin_sub_overflow(o, pads, &o);
        if (ovf) return mp_fail(c, "output size on spatial axis %d overflows", i);
        if (o < 0)
            return mp_fail(c, "output size %lld on spatial axis %d is negative", (long long)o, i);
        dims[2 + i] = o;
    }
    return mp_set_out(c, 0, x->dtype, r, dims);
}

/* ---- Det (11) ----
 * X [*, M, M] -> Y [*], dtype of X. FLOPs per matrix: floor(2 M^3 / 3),
 * the LU factorization (the diagonal's product not counted). */

static mp_status infer_det(mp_ctx *c) {
    mp_status st;
    mp_value *x;
    if ((st = mp_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "X", &x))) return st;
    if (x->rank < 0) return mp_set_out(c, 0, x->dtype, -1, NULL);
    if (x->rank < 2) return mp_fail(c, "X must be [*, M, M], got rank %d", x->rank);
    int64_t a = x->dims[x->rank - 2], b = x->dims[x->rank - 1];
    if (a >= 0 && b >= 0 && a != b)
        return mp_fail(c, "X's matrices are %lld x %lld, not square", (long long)a, (long long)b);
    return mp_set_out(c, 0, x->dtype, x->rank - 2, x->dims);
}

static void cost_det(mp_ctx *c, mp_cost *k) {
    mp_value *x = mp_in(c, 0);
    if (!x || x->rank < 2) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    int64_t m = x->dims[x->rank - 1];
    if (m < 0) m = x->dims[x->rank - 2];
    uint64_t mats = ms_prod_skip(x, x->rank - 2, x->rank - 1, k);
    if (m < 0) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    bool ovf = false;
    uint64_t m3 = mp_umul(mp_umul((uint64_t)m, (uint64_t)m, &ovf), (uint64_t)m, &ovf);
    uint64_t per = ovf ? UINT64_MAX : (m3 / 3) * 2 + ((m3 % 3) * 2) / 3;
    k->flops = mp_umul(per, mats, &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* ---- TfIdfVectorizer (9) ----
 * X [C] or [N, C] of int32, int64 or string -> Y float [max(ngram_indexes)
 * + 1] or [N, max(ngram_indexes) + 1]. FLOPs: each of the C positions
 * starts, for every n-gram length from min_gram_length to max_gram_length
 * and every skip from 0 to max_skip_count, one n-gram looked up in the
 * pool: numel(X) * (max - min + 1) * (max_skip_count + 1) lookups, counted
 * as one operation each (plus one weight multiply per output element in
 * IDF / TFIDF modes). */

static mp_status infer_tfidf(mp_ctx *c) {
    mp_status st;
    mp_value *x;
    if ((st = mp_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "X", &x))) return st;
    const int64_t *idx;
    int n = mp_attr_ints(c->n, "ngram_indexes", &idx);
    if (n < 1) return mp_fail(c, "ngram_indexes is required");
    int64_t width = -1;
    for (int i = 0; i < n; i++) {
        if (idx[i] < 0 || idx[i] > (INT64_C(1) << 40))
            return mp_fail(c, "ngram_indexes[%d] = %lld is out of range", i, (long long)idx[i]);
        if (idx[i] > width) width = idx[i];
    }
    width++;
    if (x->rank < 0) return mp_set_out(c, 0, MP_DT_FLOAT, -1, NULL);
    if (x->rank == 1) return mp_set_out(c, 0, MP_DT_FLOAT, 1, &width);
    if (x->rank != 2) return mp_fail(c, "X must be [C] or [N, C], got rank %d", x->rank);
    int64_t dims[2] = {x->dims[0], width};
    return mp_set_out(c, 0, MP_DT_FLOAT, 2, dims);
}

static void cost_tfidf(mp_ctx *c, mp_cost *k) {
    int64_t lo = mp_attr_i(c->n, "min_gram_length", 1), hi = mp_attr_i(c->n, "max_gram_length", 1);
    int64_t skips = mp_attr_i(c->n, "max_skip_count", 0);
    int64_t grams = hi >= lo && lo >= 1 ? hi - lo + 1 : 1;
    int64_t f[3] = {0, grams, skips >= 0 ? skips + 1 : 1};
    uint64_t in = mp_cnumel(mp_in(c, 0), k);
    f[0] = in > (uint64_t)INT64_MAX ? -1 : (int64_t)in;
    bool ovf = false;
    k->flops = mp_cost_prod(k, f, 3);
    const char *mode = mp_attr_s(c->n, "mode", "TF");
    if (strcmp(mode, "TF") != 0) k->flops = mp_uadd(k->flops, mp_cnumel(mp_out(c, 0), k), &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* ---- the table ---- */

#define MS_IN(i) (1u << (i))

/* Losses keep their input (log-probabilities, logits) and target, in
 * fp32 (autocast's fp32 list); the backward is one pass over the input. */
static void ms_train_loss(mp_ctx *c, mp_bwd *t) {
    t->amp = MP_AMP_LOSS;
    if (!(t->rg & 1u)) return;
    t->save_in = 3u;
    const mp_value *x = mp_in(c, 0);
    int64_t n = x ? mp_value_numel(x) : -1;
    t->bwd_flops = n > 0 ? 2 * (uint64_t)n : 0;
}

/* TopK's values are its input's, selected: the backward scatters their
 * gradient into zeros of the input's shape at the indices (derivatives.yaml,
 * topk: value_selecting_reduction_backward), keeping the indices (output
 * 1), which have no gradient of their own. Data movement: no FLOPs. */
static void ms_train_topk(mp_ctx *c, mp_bwd *t) {
    (void)c;
    if (t->rg & 1u) t->save_out = 2u;
}

const mp_op mp_ops_misc[] = {
    /* class weights are buffers */
    {"", "NegativeLogLikelihoodLoss", 12, infer_nll, cost_nll, 0, MS_IN(2), NULL, msk_nll_run,
     .train = ms_train_loss},
    {"", "SoftmaxCrossEntropyLoss", 12, infer_sce, cost_sce, 0, MS_IN(2), NULL, msk_sce,
     .train = ms_train_loss},
    /* thresholds are buffers */
    {"", "NonMaxSuppression", 10, infer_nms, cost_nms, 0, MS_IN(2) | MS_IN(3) | MS_IN(4), NULL,
     msk_nms},
    {"", "GridSample", 16, infer_gridsample16, cost_gridsample, 0, MS_IN(1), NULL, msk_gridsample},
    {"", "GridSample", 20, infer_gridsample20, cost_gridsample, 0, MS_IN(1), NULL, msk_gridsample},
    {"", "RandomUniform", 1, infer_random, mp_cost_out1, 0, 0, NULL, msk_random, msk_rng_prep, mp_kstate_release},
    {"", "RandomNormal", 1, infer_random, mp_cost_out1, 0, 0, NULL, msk_random, msk_rng_prep, mp_kstate_release},
    {"", "RandomUniformLike", 1, infer_random_like, mp_cost_out1, 0, 0, NULL, msk_random, msk_rng_prep, mp_kstate_release},
    {"", "RandomNormalLike", 1, infer_random_like, mp_cost_out1, 0, 0, NULL, msk_random, msk_rng_prep, mp_kstate_release},
    {"", "Bernoulli", 15, infer_bernoulli, mp_cost_out1, 0, 0, NULL, msk_random, msk_rng_prep, mp_kstate_release},
    {"", "Multinomial", 7, infer_multinomial, mp_cost_out1, 0, 0, NULL, msk_random, msk_rng_prep, mp_kstate_release},
    {"", "BlackmanWindow", 17, infer_window, mp_cost_out1, 0, 0, NULL, msk_window},
    {"", "HammingWindow", 17, infer_window, mp_cost_out1, 0, 0, NULL, msk_window},
    {"", "HannWindow", 17, infer_window, mp_cost_out1, 0, 0, NULL, msk_window},
    {"", "TopK", 1, infer_topk1, cost_topk, 0, 0, NULL, msk_topk, .train = ms_train_topk},
    {"", "TopK", 10, infer_topk10, cost_topk, 0, 0, NULL, msk_topk, .train = ms_train_topk},
    {"", "DFT", 17, infer_dft, cost_dft, 0, 0, NULL, msk_dft},
    {"", "DFT", 20, infer_dft, cost_dft, 0, 0, NULL, msk_dft},
    {"", "STFT", 17, infer_stft, cost_stft, 0, MS_IN(2), NULL, msk_stft},
    {"", "MelWeightMatrix", 17, infer_melweight, mp_cost_out1, 0, MS_IN(3) | MS_IN(4), NULL,
     msk_melweight},
    {"", "RoiAlign", 10, infer_roialign, cost_roialign, 0, MS_IN(1), NULL, msk_roialign},
    {"", "RoiAlign", 16, infer_roialign, cost_roialign, 0, MS_IN(1), NULL, msk_roialign},
    {"", "MaxUnpool", 9, infer_maxunpool, mp_cost_zero, 0, 0, NULL, msk_maxunpool},
    {"", "MaxUnpool", 11, infer_maxunpool, mp_cost_zero, 0, 0, NULL, msk_maxunpool},
    {"", "Det", 11, infer_det, cost_det, 0, 0, NULL, msk_det},
    {"", "TfIdfVectorizer", 9, infer_tfidf, cost_tfidf, 0, 0, NULL, msk_tfidf},
};
const int mp_ops_misc_count = (int)MP_ARRAY_LEN(mp_ops_misc);

#undef MS_IN
