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
 * parameters. */
#include "ops/kernel.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>

/* ---- small shared helpers ---- */

static mp_status ms_arity(mp_ctx *c, int lo, int hi) {
    int n = c->n->n_in;
    if (n < lo || n > hi) {
        if (lo == hi) return mp_fail(c, "expects %d input%s, got %d", lo, lo == 1 ? "" : "s", n);
        return mp_fail(c, "expects %d to %d inputs, got %d", lo, hi, n);
    }
    return MP_OK;
}

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

/* Known contents of a one-value input i. */
static bool ms_scalar(mp_ctx *c, int i, int64_t *out) {
    const int64_t *v;
    int64_t n;
    if (!mp_ints(c, i, &v, &n) || n != 1) return false;
    *out = v[0];
    return true;
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
    if ((st = ms_arity(c, 2, 3)) || (st = mp_need_in(c, 0, "input", &x)) ||
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
    if (!ms_scalar(c, 2, &m)) return -1;
    return m < 0 ? 0 : m;
}

static mp_status infer_nms(mp_ctx *c) {
    mp_status st;
    mp_value *b, *s;
    if ((st = ms_arity(c, 2, 5)) || (st = mp_need_in(c, 0, "boxes", &b)) ||
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
    if ((st = ms_arity(c, 2, 2)) || (st = mp_need_in(c, 0, "X", &x)) ||
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
    if ((st = ms_arity(c, 0, 0))) return st;
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
    if ((st = ms_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "input", &x))) return st;
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
    if ((st = ms_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "input", &x))) return st;
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
    if ((st = ms_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "size", &s)) ||
        (st = ms_check_scalar(c, 0, "size")))
        return st;
    int dt;
    if ((st = ms_dtype_attr(c, "output_datatype", MP_DT_FLOAT, &dt))) return st;
    if (dt == MP_DT_BOOL) return mp_fail(c, "output_datatype must be numeric, is bool");
    int64_t size = MP_DIM_ANON;
    if (ms_scalar(c, 0, &size) && size < 0)
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
    if ((st = ms_arity(c, k_input ? 2 : 1, k_input ? 2 : 1)) || (st = mp_need_in(c, 0, "X", &x)))
        return st;
    int64_t kk = MP_DIM_ANON;
    if (k_input) {
        mp_value *kv;
        if ((st = mp_need_in(c, 1, "K", &kv)) || (st = ms_check_scalar(c, 1, "K"))) return st;
        if (!ms_scalar(c, 1, &kk)) kk = MP_DIM_ANON;
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
    else if (!ms_scalar(c, 2, axis)) return false;
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
    if ((st = ms_arity(c, 1, v20 ? 3 : 2)) || (st = mp_need_in(c, 0, "input", &x)) ||
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
    if (has_len && ms_scalar(c, 1, &n) && n < 1)
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
    if (mp_in(c, 1) && !ms_scalar(c, 1, &n)) n = MP_DIM_ANON;
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
    if (f && ms_scalar(c, 3, &v) && v < 1) return mp_fail(c, "frame_length = %lld", (long long)v);
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
    if ((st = ms_arity(c, 2, 4)) || (st = mp_need_in(c, 0, "signal", &x)) ||
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
    if (ms_scalar(c, 1, &s) && s < 1) return mp_fail(c, "frame_step = %lld", (long long)s);
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
    if ((st = ms_arity(c, 5, 5))) return st;
    for (int i = 0; i < 5; i++)
        if ((st = mp_need_in(c, i, names[i], &v)) || (st = ms_check_scalar(c, i, names[i])))
            return st;
    int dt;
    if ((st = ms_dtype_attr(c, "output_datatype", MP_DT_FLOAT, &dt))) return st;
    int64_t bins = MP_DIM_ANON, len = MP_DIM_ANON;
    if (ms_scalar(c, 0, &bins) && bins < 0)
        return mp_fail(c, "num_mel_bins = %lld", (long long)bins);
    if (ms_scalar(c, 1, &len) && len < 0) return mp_fail(c, "dft_length = %lld", (long long)len);
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
    if ((st = ms_arity(c, 3, 3)) || (st = mp_need_in(c, 0, "X", &x)) ||
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
    if ((st = ms_arity(c, 2, 3)) || (st = mp_need_in(c, 0, "X", &x)) ||
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
    if ((st = ms_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "X", &x))) return st;
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
    if ((st = ms_arity(c, 1, 1)) || (st = mp_need_in(c, 0, "X", &x))) return st;
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

/* ---- kernels ---- */

/* Negative log-likelihood of log-probabilities lp [N, C, d...] (any float
 * dtype) for targets t [N, d...]: loss per element, then the reduction.
 * Shared by NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. */
static mp_status msk_nll(mp_kctx *k, const mp_rtensor *lp, const double *lpd, const mp_rtensor *t,
                         const mp_rtensor *w, mp_rtensor *out) {
    int64_t N = lp->dims[0], C = lp->rank > 1 ? lp->dims[1] : 1, inner = 1;
    for (int i = 2; i < lp->rank; i++) inner *= lp->dims[i];
    if (t->numel != N * inner || (w && w->numel < C)) return mp_kfail(k, MP_ERR_SHAPE, "target or weight size");
    const mp_attr *ig = mp_node_attr(k->n, "ignore_index");
    const char *red = mp_attr_s(k->n, "reduction", "mean");
    bool none = !strcmp(red, "none"), mean = !strcmp(red, "mean");
    double sum = 0, wsum = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t j = 0; j < inner; j++) {
            int64_t e = n * inner + j, c = mp_kget_i(t->data, t->dtype, e);
            double v = 0, wt = 0;
            if (!(ig && c == ig->i)) {
                if (c < 0 || c >= C) return mp_kfail(k, MP_ERR_USAGE, "target %lld out of range [0, %lld)",
                                                      (long long)c, (long long)C);
                wt = w ? mp_kget_f(w->data, w->dtype, c) : 1;
                int64_t at = (n * C + c) * inner + j;
                v = -(lpd ? lpd[at] : mp_kget_f(lp->data, lp->dtype, at)) * wt;
            }
            if (none) mp_kset_f(out->data, out->dtype, e, v);
            sum += v;
            wsum += wt;
        }
    if (!none) mp_kset_f(out->data, out->dtype, 0, mean ? sum / wsum : sum);
    return MP_OK;
}

static mp_status msk_nll_run(mp_kctx *k) {
    return msk_nll(k, &k->in[0], NULL, &k->in[1], mp_kin(k, 2), &k->out[0]);
}

/* SoftmaxCrossEntropyLoss: log-softmax over axis 1, then the NLL; the
 * optional second output is the log-softmax. */
static mp_status msk_sce(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    int64_t N = x->dims[0], C = x->rank > 1 ? x->dims[1] : 1, inner = 1;
    for (int i = 2; i < x->rank; i++) inner *= x->dims[i];
    double *lp = malloc(sizeof(double) * (size_t)(x->numel + 1));
    if (!lp) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t n = 0; n < N; n++)
        for (int64_t j = 0; j < inner; j++) {
            double m = -INFINITY, s = 0;
            for (int64_t c = 0; c < C; c++) m = fmax(m, mp_kget_f(x->data, x->dtype, (n * C + c) * inner + j));
            for (int64_t c = 0; c < C; c++) s += exp(mp_kget_f(x->data, x->dtype, (n * C + c) * inner + j) - m);
            for (int64_t c = 0; c < C; c++) {
                int64_t at = (n * C + c) * inner + j;
                lp[at] = mp_kget_f(x->data, x->dtype, at) - m - log(s);
            }
        }
    if (k->n_out > 1 && k->out[1].data) mp_kconvert(k->out[1].data, k->out[1].dtype, lp, MP_DT_DOUBLE, x->numel);
    mp_status st = msk_nll(k, x, lp, &k->in[1], mp_kin(k, 2), &k->out[0]);
    free(lp);
    return st;
}

/* TopK: per slice along the axis, the K largest (or smallest) with their
 * indices; ties keep the lower index first. */
typedef struct msk_kv {
    double v;
    int64_t i;
} msk_kv;

static int msk_cmp_desc(const void *a, const void *b) {
    const msk_kv *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int msk_cmp_asc(const void *a, const void *b) {
    const msk_kv *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static mp_status msk_topk(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    int axis = mp_axis(mp_attr_i(k->n, "axis", -1), x->rank);
    if (axis < 0) return mp_kfail(k, MP_ERR_SHAPE, "axis out of range");
    bool largest = mp_attr_i(k->n, "largest", 1) != 0;
    int64_t outer, inner, n = x->dims[axis], K = k->out[0].dims[axis];
    mp_kouter_inner(x->rank, x->dims, axis, &outer, &inner);
    msk_kv *buf = malloc(sizeof *buf * (size_t)(n + 1));
    if (!buf) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            for (int64_t j = 0; j < n; j++) buf[j] = (msk_kv){mp_kget_f(x->data, x->dtype, (o * n + j) * inner + i), j};
            qsort(buf, (size_t)n, sizeof *buf, largest ? msk_cmp_desc : msk_cmp_asc);
            for (int64_t j = 0; j < K; j++) {
                int64_t at = (o * K + j) * inner + i;
                mp_kcopy1(k->out[0].data, at, x->data, (o * n + buf[j].i) * inner + i, mp_kesize(x->dtype));
                if (k->n_out > 1 && k->out[1].data) ((int64_t *)k->out[1].data)[at] = buf[j].i;
            }
        }
    free(buf);
    return MP_OK;
}

/* Blackman, Hamming, Hann windows of `size` points (periodic: the
 * denominator is size, else size - 1). */
static mp_status msk_window(mp_kctx *k) {
    mp_rtensor *y = &k->out[0];
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    int64_t N = y->numel;
    bool periodic = mp_attr_i(k->n, "periodic", 1) != 0;
    double D = (double)(periodic ? N : N - 1), pi2 = 2 * 3.14159265358979323846;
    int kind = !strcmp(k->n->op, "HannWindow") ? 0 : !strcmp(k->n->op, "HammingWindow") ? 1 : 2;
    for (int64_t i = 0; i < N; i++) {
        double a = pi2 * (double)i / D, v;
        if (kind == 0) v = 0.5 - 0.5 * cos(a);
        else if (kind == 1) v = 25.0 / 46.0 - (1 - 25.0 / 46.0) * cos(a);
        else v = 0.42 - 0.5 * cos(a) + 0.08 * cos(2 * a);
        mp_kset_f(y->data, y->dtype, i, v);
    }
    return MP_OK;
}

/* Det of [..., M, M]: LU with partial pivoting in double. */
static mp_status msk_det(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    int64_t M = x->dims[x->rank - 1], mats = M ? x->numel / (M * M) : 0;
    double *a = malloc(sizeof(double) * (size_t)(M * M + 1));
    if (!a) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t q = 0; q < mats; q++) {
        for (int64_t e = 0; e < M * M; e++) a[e] = mp_kget_f(x->data, x->dtype, q * M * M + e);
        double det = 1;
        for (int64_t c = 0; c < M && det != 0; c++) {
            int64_t p = c;
            for (int64_t r = c + 1; r < M; r++)
                if (fabs(a[r * M + c]) > fabs(a[p * M + c])) p = r;
            if (a[p * M + c] == 0) {
                det = 0;
                break;
            }
            if (p != c) {
                for (int64_t j = 0; j < M; j++) {
                    double t = a[c * M + j];
                    a[c * M + j] = a[p * M + j];
                    a[p * M + j] = t;
                }
                det = -det;
            }
            det *= a[c * M + c];
            for (int64_t r = c + 1; r < M; r++) {
                double f = a[r * M + c] / a[c * M + c];
                for (int64_t j = c; j < M; j++) a[r * M + j] -= f * a[c * M + j];
            }
        }
        mp_kset_f(k->out[0].data, k->out[0].dtype, q, det);
    }
    free(a);
    return MP_OK;
}

/* MaxUnpool: the indices are flat positions in the default output
 * ((in - 1) * stride - pads + kernel per spatial dim); with output_shape
 * the same coordinates are placed in the larger output. */
static mp_status msk_maxunpool(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *ix = &k->in[1];
    mp_rtensor *y = &k->out[0];
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    size_t es = mp_kesize(y->dtype);
    int r = x->rank, nsp = r - 2;
    if (ix->numel != x->numel || nsp < 0 || y->rank != r || !es)
        return mp_kfail(k, MP_ERR_SHAPE, "indices must be shaped like X");
    const int64_t *ks, *sv, *pv;
    int nk = mp_attr_ints(k->n, "kernel_shape", &ks), ns = mp_attr_ints(k->n, "strides", &sv);
    int np = mp_attr_ints(k->n, "pads", &pv);
    int64_t dd[MP_MAX_RANK];
    dd[0] = x->dims[0], dd[1] = x->dims[1];
    for (int i = 0; i < nsp; i++)
        dd[2 + i] = (x->dims[2 + i] - 1) * (ns == nsp ? sv[i] : 1) - (np == 2 * nsp ? pv[i] + pv[nsp + i] : 0) +
                    (nk == nsp ? ks[i] : 1);
    memset(y->data, 0, (size_t)y->numel * es);
    int64_t ys[MP_MAX_RANK];
    mp_kstrides(r, y->dims, ys);
    for (int64_t e = 0; e < x->numel; e++) {
        int64_t i = mp_kget_i(ix->data, ix->dtype, e), off = 0, rem = i;
        for (int d = r - 1; d >= 0; d--) {
            int64_t c = rem % dd[d];
            rem /= dd[d];
            if (c >= y->dims[d]) return mp_kfail(k, MP_ERR_USAGE, "index %lld out of range", (long long)i);
            off += c * ys[d];
        }
        if (i < 0 || rem) return mp_kfail(k, MP_ERR_USAGE, "index %lld out of range", (long long)i);
        mp_kcopy1(y->data, off, x->data, e, es);
    }
    return MP_OK;
}

/* One DFT of n input points (re/im at stride `st` elements of 2 or 1
 * floats) into `bins` output bins. */
static void msk_dft1(const mp_rtensor *x, int64_t base, int64_t st, int64_t n, int64_t len, bool cplx,
                     const mp_rtensor *win, bool inverse, mp_rtensor *y, int64_t ybase, int64_t yst, int64_t bins) {
    double sgn = inverse ? 1 : -1, pi2 = 2 * 3.14159265358979323846;
    for (int64_t b = 0; b < bins; b++) {
        double re = 0, im = 0;
        for (int64_t j = 0; j < n && j < len; j++) {
            double xr = mp_kget_f(x->data, x->dtype, base + j * st);
            double xi = cplx ? mp_kget_f(x->data, x->dtype, base + j * st + 1) : 0;
            if (win) {
                double w = mp_kget_f(win->data, win->dtype, j);
                xr *= w, xi *= w;
            }
            double a = sgn * pi2 * (double)((b * j) % len) / (double)len, c = cos(a), s = sin(a);
            re += xr * c - xi * s;
            im += xr * s + xi * c;
        }
        if (inverse) re /= (double)len, im /= (double)len;
        mp_kset_f(y->data, y->dtype, ybase + b * yst, re);
        mp_kset_f(y->data, y->dtype, ybase + b * yst + 1, im);
    }
}

static mp_status msk_dft(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    int r = x->rank;
    int64_t raw;
    if (k->n->opset >= 20) {
        raw = -2;
        mp_kints(mp_kin(k, 2), &raw, 1);
    } else {
        raw = mp_attr_i(k->n, "axis", 1);
    }
    int axis = (int)(raw < 0 ? raw + r : raw);
    if (axis < 1 || axis >= r - 1) return mp_kfail(k, MP_ERR_SHAPE, "axis %lld out of range", (long long)raw);
    bool cplx = x->dims[r - 1] == 2, inverse = mp_attr_i(k->n, "inverse", 0) != 0;
    int64_t len = x->dims[axis];
    mp_kints(mp_kin(k, 1), &len, 1);
    int64_t bins = y->dims[axis], xs[MP_MAX_RANK], ys[MP_MAX_RANK];
    mp_kstrides(r, x->dims, xs);
    mp_kstrides(y->rank, y->dims, ys);
    /* every index of the other dims (last one excluded) */
    int64_t lines = 1;
    for (int i = 0; i < r - 1; i++)
        if (i != axis) lines *= x->dims[i];
    for (int64_t l = 0; l < lines; l++) {
        int64_t rem = l, xb = 0, yb = 0;
        for (int i = r - 2; i >= 0; i--) {
            if (i == axis) continue;
            int64_t c = rem % x->dims[i];
            rem /= x->dims[i];
            xb += c * xs[i];
            yb += c * ys[i];
        }
        msk_dft1(x, xb, xs[axis], x->dims[axis], len, cplx, NULL, inverse, y, yb, ys[axis], bins);
    }
    return MP_OK;
}

static mp_status msk_stft(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *win = mp_kin(k, 2);
    mp_rtensor *y = &k->out[0];
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    int64_t step = 1, flen = win ? win->numel : 0;
    mp_kints(mp_kin(k, 1), &step, 1);
    mp_kints(mp_kin(k, 3), &flen, 1);
    bool cplx = x->rank == 3 && x->dims[2] == 2;
    int64_t B = x->dims[0], L = x->dims[1], F = y->dims[1], bins = y->dims[2], c = cplx ? 2 : 1;
    if (x->rank < 2 || step < 1 || flen < 1 || (win && win->numel < flen) || (F > 0 && (F - 1) * step + flen > L))
        return mp_kfail(k, MP_ERR_SHAPE, "frames do not fit the signal (step %lld, length %lld)", (long long)step,
                        (long long)flen);
    for (int64_t b = 0; b < B; b++)
        for (int64_t f = 0; f < F; f++)
            msk_dft1(x, (b * L + f * step) * c, c, flen, flen, cplx, win, false, y, ((b * F + f) * bins) * 2, 2, bins);
    return MP_OK;
}

/* NonMaxSuppression: per batch and class, boxes above score_threshold by
 * descending score (ties: lower index first), greedily dropping those whose
 * IoU with a kept box exceeds iou_threshold; at most
 * max_output_boxes_per_class each. Output [n, 3] (batch, class, box),
 * shaped here (mp_kout_alloc). */
typedef struct msk_box {
    double y1, x1, y2, x2;
} msk_box;

static msk_box msk_box_at(const mp_rtensor *b, int64_t at, bool center) {
    double v[4];
    for (int i = 0; i < 4; i++) v[i] = mp_kget_f(b->data, b->dtype, at * 4 + i);
    if (center) /* [x_center, y_center, width, height] */
        return (msk_box){v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2};
    return (msk_box){fmin(v[0], v[2]), fmin(v[1], v[3]), fmax(v[0], v[2]), fmax(v[1], v[3])};
}

static double msk_iou(msk_box a, msk_box b) {
    double ih = fmin(a.y2, b.y2) - fmax(a.y1, b.y1), iw = fmin(a.x2, b.x2) - fmax(a.x1, b.x1);
    if (ih <= 0 || iw <= 0) return 0;
    double inter = ih * iw, uni = (a.y2 - a.y1) * (a.x2 - a.x1) + (b.y2 - b.y1) * (b.x2 - b.x1) - inter;
    return uni > 0 ? inter / uni : 0;
}

static mp_status msk_nms(mp_kctx *k) {
    const mp_rtensor *bx = &k->in[0], *sc = &k->in[1];
    const mp_rtensor *mo = mp_kin(k, 2), *it = mp_kin(k, 3), *stt = mp_kin(k, 4);
    if (sc->rank != 3 || bx->rank != 3 || bx->dims[0] != sc->dims[0] || bx->dims[1] != sc->dims[2] || bx->dims[2] != 4)
        return mp_kfail(k, MP_ERR_SHAPE, "boxes must be [B, S, 4] and scores [B, C, S]");
    int64_t B = sc->dims[0], C = sc->dims[1], S = sc->dims[2];
    int64_t maxo = mo && mo->numel ? mp_kget_i(mo->data, mo->dtype, 0) : 0;
    double iou_t = it && it->numel ? mp_kget_f(it->data, it->dtype, 0) : 0;
    bool has_st = stt && stt->numel;
    double st_v = has_st ? mp_kget_f(stt->data, stt->dtype, 0) : 0;
    bool center = mp_attr_i(k->n, "center_point_box", 0) != 0;
    msk_kv *cand = malloc(sizeof *cand * (size_t)(S + 1));
    int64_t *keep = malloc(sizeof(int64_t) * (size_t)(S + 1));
    int64_t *sel = malloc(sizeof(int64_t) * 3 * (size_t)(B * C * S + 1)), n = 0;
    if (!cand || !keep || !sel) {
        free(cand), free(keep), free(sel);
        return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    }
    for (int64_t b = 0; b < B && maxo > 0; b++)
        for (int64_t c = 0; c < C; c++) {
            int64_t nc = 0, nk = 0;
            for (int64_t s = 0; s < S; s++) {
                double v = mp_kget_f(sc->data, sc->dtype, (b * C + c) * S + s);
                if (!has_st || v > st_v) cand[nc++] = (msk_kv){v, s};
            }
            qsort(cand, (size_t)nc, sizeof *cand, msk_cmp_desc);
            for (int64_t q = 0; q < nc && nk < maxo; q++) {
                msk_box a = msk_box_at(bx, b * S + cand[q].i, center);
                bool drop = false;
                for (int64_t j = 0; j < nk && !drop; j++)
                    drop = msk_iou(a, msk_box_at(bx, b * S + keep[j], center)) > iou_t;
                if (drop) continue;
                keep[nk++] = cand[q].i;
                sel[3 * n] = b, sel[3 * n + 1] = c, sel[3 * n + 2] = cand[q].i;
                n++;
            }
        }
    int64_t dims[2] = {n, 3};
    mp_status st = mp_kout_shape(k, 0, 2, dims);
    if (!st) memcpy(k->out[0].data, sel, sizeof(int64_t) * 3 * (size_t)n);
    free(cand), free(keep), free(sel);
    return st;
}

/* GridSample (2-D): each output pixel samples X at the grid's normalized
 * (x, y) as PyTorch's grid_sample does: unnormalize (align_corners),
 * padding zeros / border / reflection, nearest (half to even), bilinear,
 * bicubic (A = -0.75, taps through the padding rule). */
static double msk_gs_reflect(double v, double lo2, double hi2) {
    if (lo2 == hi2) return 0;
    double mn = lo2 / 2, span = (hi2 - lo2) / 2;
    v = fabs(v - mn);
    double extra = fmod(v, span);
    int64_t flips = mp_kf2i(floor(v / span));
    return flips % 2 == 0 ? extra + mn : span - extra + mn;
}

/* The padding rule on a source coordinate of an axis of `size`. */
static double msk_gs_pad(double v, int64_t size, int pad, bool align) {
    if (pad == 1) return fmin((double)(size - 1), fmax(v, 0.0));
    if (pad == 2) {
        v = align ? msk_gs_reflect(v, 0, 2.0 * (double)(size - 1)) : msk_gs_reflect(v, -1, 2.0 * (double)size - 1);
        return fmin((double)(size - 1), fmax(v, 0.0));
    }
    return v;
}

static double msk_gs_px(const mp_rtensor *x, int64_t base, int64_t H, int64_t W, int64_t yy, int64_t xx) {
    if (yy < 0 || yy >= H || xx < 0 || xx >= W) return 0;
    return mp_kget_f(x->data, x->dtype, base + yy * W + xx);
}

static mp_status msk_gridsample(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *g = &k->in[1];
    mp_rtensor *y = &k->out[0];
    if (x->rank != 4) return mp_kfail(k, MP_ERR_UNSUPPORTED, "only 2-D sampling (4-D X)");
    const char *mode = mp_attr_s(k->n, "mode", k->n->opset >= 20 ? "linear" : "bilinear");
    const char *pm = mp_attr_s(k->n, "padding_mode", "zeros");
    int m = !strcmp(mode, "nearest") ? 0 : (!strcmp(mode, "bicubic") || !strcmp(mode, "cubic")) ? 2 : 1;
    int pad = !strcmp(pm, "border") ? 1 : !strcmp(pm, "reflection") ? 2 : 0;
    bool align = mp_attr_i(k->n, "align_corners", 0) != 0;
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], Ho = y->dims[2], Wo = y->dims[3];
    if (g->numel != N * Ho * Wo * 2 || y->dims[0] != N || y->dims[1] != C)
        return mp_kfail(k, MP_ERR_SHAPE, "grid must be [N, H_out, W_out, 2]");
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < Ho * Wo; i++) {
            double gx = mp_kget_f(g->data, g->dtype, (n * Ho * Wo + i) * 2);
            double gy = mp_kget_f(g->data, g->dtype, (n * Ho * Wo + i) * 2 + 1);
            double fx = align ? (gx + 1) / 2 * (double)(W - 1) : ((gx + 1) * (double)W - 1) / 2;
            double fy = align ? (gy + 1) / 2 * (double)(H - 1) : ((gy + 1) * (double)H - 1) / 2;
            if (m != 2) {
                fx = msk_gs_pad(fx, W, pad, align);
                fy = msk_gs_pad(fy, H, pad, align);
            }
            for (int64_t c = 0; c < C; c++) {
                int64_t base = (n * C + c) * H * W;
                double v = 0;
                if (m == 0) {
                    v = msk_gs_px(x, base, H, W, mp_kf2i(nearbyint(fy)), mp_kf2i(nearbyint(fx)));
                } else if (m == 1) {
                    double x0 = floor(fx), y0 = floor(fy), ax = fx - x0, ay = fy - y0;
                    int64_t ix = mp_kf2i(x0), iy = mp_kf2i(y0);
                    v = msk_gs_px(x, base, H, W, iy, ix) * (1 - ax) * (1 - ay) +
                        msk_gs_px(x, base, H, W, iy, ix + 1) * ax * (1 - ay) +
                        msk_gs_px(x, base, H, W, iy + 1, ix) * (1 - ax) * ay +
                        msk_gs_px(x, base, H, W, iy + 1, ix + 1) * ax * ay;
                } else {
                    double x0 = floor(fx), y0 = floor(fy), tx = fx - x0, ty = fy - y0, wx[4], wy[4];
                    for (int q = 0; q < 4; q++) {
                        wx[q] = mp_kcubic(tx - (double)(q - 1), -0.75);
                        wy[q] = mp_kcubic(ty - (double)(q - 1), -0.75);
                    }
                    for (int a = 0; a < 4; a++)
                        for (int b = 0; b < 4; b++) {
                            double sy = msk_gs_pad(y0 - 1 + a, H, pad, align), sx = msk_gs_pad(x0 - 1 + b, W, pad, align);
                            v += wy[a] * wx[b] * msk_gs_px(x, base, H, W, mp_kf2i(sy), mp_kf2i(sx));
                        }
                }
                mp_kset_f(y->data, y->dtype, ((n * C + c) * Ho * Wo) + i, v);
            }
        }
    return MP_OK;
}

/* TfIdfVectorizer (integer tokens): counts of the pool's n-grams in each
 * row (n-grams of n >= 2 taken with every skip 0..max_skip_count, unigrams
 * once), then TF, IDF (weight when present) or TFIDF (count * weight). */
static mp_status msk_tfidf(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    const int64_t *pool, *counts, *idx;
    const double *wts;
    int np = mp_attr_ints(k->n, "pool_int64s", &pool), nc = mp_attr_ints(k->n, "ngram_counts", &counts);
    int ni = mp_attr_ints(k->n, "ngram_indexes", &idx), nw = mp_attr_floats(k->n, "weights", &wts);
    int64_t minn = mp_attr_i(k->n, "min_gram_length", 1), maxn = mp_attr_i(k->n, "max_gram_length", 1);
    int64_t maxskip = mp_attr_i(k->n, "max_skip_count", 0);
    const char *mode = mp_attr_s(k->n, "mode", "TF");
    if (np < 0 || nc < 1 || ni < 0) return mp_kfail(k, MP_ERR_UNSUPPORTED, "integer pool attributes required");
    for (int j = 0; j < nc; j++)
        if (counts[j] < 0 || counts[j] > np || (j && counts[j] < counts[j - 1]))
            return mp_kfail(k, MP_ERR_SHAPE, "ngram_counts[%d] = %lld is not an ascending start in the pool of %d", j,
                            (long long)counts[j], np);
    for (int j = 0; j < ni; j++)
        if (idx[j] < 0) return mp_kfail(k, MP_ERR_SHAPE, "ngram_indexes[%d] = %lld is negative", j, (long long)idx[j]);
    if (maxskip < 0 || minn > maxn)
        return mp_kfail(k, MP_ERR_SHAPE, "max_skip_count %lld, gram lengths %lld..%lld", (long long)maxskip,
                        (long long)minn, (long long)maxn);
    int64_t rows = x->rank == 2 ? x->dims[0] : 1, len = x->rank ? x->dims[x->rank - 1] : 1;
    int64_t cols = y->dims[y->rank - 1];
    if (maxskip > len) maxskip = len; /* a longer skip fits no n-gram of n >= 2 */
    double *cnt = calloc((size_t)cols + 1, sizeof(double));
    if (!cnt) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; r < rows; r++) {
        memset(cnt, 0, sizeof(double) * (size_t)cols);
        for (int64_t n = minn < 1 ? 1 : minn; n <= maxn && n <= nc; n++) {
            int64_t start = counts[n - 1], end = n < nc ? counts[n] : np, gram0 = 0;
            for (int64_t q = 0; q < n - 1; q++) gram0 += ((q + 1 < nc ? counts[q + 1] : np) - counts[q]) / (q + 1);
            for (int64_t skip = 0; skip <= (n == 1 ? 0 : maxskip); skip++)
                for (int64_t i = 0; i + (n - 1) * (skip + 1) < len; i++)
                    for (int64_t g = 0; start + (g + 1) * n <= end; g++) {
                        bool match = true;
                        for (int64_t q = 0; q < n && match; q++)
                            match = pool[start + g * n + q] ==
                                    mp_kget_i(x->data, x->dtype, r * len + i + q * (skip + 1));
                        if (match && gram0 + g < ni && idx[gram0 + g] < cols) cnt[idx[gram0 + g]] += 1;
                    }
        }
        for (int64_t c = 0; c < cols; c++) {
            double w = 1;
            for (int j = 0; j < ni && j < nw; j++)
                if (idx[j] == c) w = wts[j];
            double v = !strcmp(mode, "IDF") ? (cnt[c] > 0 ? w : 0) : !strcmp(mode, "TFIDF") ? cnt[c] * w : cnt[c];
            mp_kset_f(y->data, y->dtype, r * cols + c, v);
        }
    }
    free(cnt);
    return MP_OK;
}

/* MelWeightMatrix: triangular filters between mel-spaced bins (nmel + 2
 * points, the mel step (high - low) / (nmel + 2) as ONNX computes it) of a
 * dft_length-point spectrum (ONNX's definition: bin edges floor((dft_length
 * + 1) * hz / sample_rate)). Output [dft_length / 2 + 1, num_mel_bins]. */
static mp_status msk_melweight(mp_kctx *k) {
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    mp_rtensor *y = &k->out[0];
    int64_t nmel = mp_kget_i(k->in[0].data, k->in[0].dtype, 0), dft = mp_kget_i(k->in[1].data, k->in[1].dtype, 0);
    double sr = mp_kget_f(k->in[2].data, k->in[2].dtype, 0), lo = mp_kget_f(k->in[3].data, k->in[3].dtype, 0);
    double hi = mp_kget_f(k->in[4].data, k->in[4].dtype, 0);
    int64_t nspec = dft / 2 + 1;
    if (nmel < 0 || y->numel != nspec * nmel || sr <= 0) return mp_kfail(k, MP_ERR_SHAPE, "bad sizes");
    int64_t *fb = malloc(sizeof(int64_t) * (size_t)(nmel + 3));
    if (!fb) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    double lmel = 2595 * log10(1 + lo / 700), hmel = 2595 * log10(1 + hi / 700), step = (hmel - lmel) / (double)(nmel + 2);
    for (int64_t i = 0; i < nmel + 2; i++) {
        double hz = 700 * (pow(10, ((double)i * step + lmel) / 2595) - 1);
        fb[i] = mp_kf2i(floor((double)(dft + 1) * hz / sr));
    }
    for (int64_t e = 0; e < y->numel; e++) mp_kset_f(y->data, y->dtype, e, 0);
    for (int64_t i = 0; i < nmel; i++) {
        int64_t l = fb[i], c = fb[i + 1], h = fb[i + 2];
        if (c - l == 0) {
            if (c >= 0 && c < nspec) mp_kset_f(y->data, y->dtype, c * nmel + i, 1);
        } else {
            for (int64_t j = l; j <= c; j++)
                if (j >= 0 && j < nspec) mp_kset_f(y->data, y->dtype, j * nmel + i, (double)(j - l) / (double)(c - l));
        }
        for (int64_t j = c; h - c > 0 && j < h; j++)
            if (j >= 0 && j < nspec) mp_kset_f(y->data, y->dtype, j * nmel + i, (double)(h - j) / (double)(h - c));
    }
    free(fb);
    return MP_OK;
}

/* RoiAlign: each output bin averages (or takes the max of) a grid of
 * bilinear samples of its roi (x1, y1, x2, y2 scaled by spatial_scale;
 * half_pixel shifts by -0.5; output_half_pixel keeps rois at least 1). */
static mp_status msk_roialign(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *rois = &k->in[1], *bi = &k->in[2];
    mp_rtensor *y = &k->out[0];
    if (x->rank != 4) return mp_kfail(k, MP_ERR_SHAPE, "X must be 4-D");
    int64_t C = x->dims[1], H = x->dims[2], W = x->dims[3], R = rois->rank == 2 ? rois->dims[0] : 0;
    if (rois->numel != R * 4 || bi->numel != R || y->numel != R * C * y->dims[2] * y->dims[3])
        return mp_kfail(k, MP_ERR_SHAPE, "rois must be [R, 4] with R batch indices");
    int64_t ph_n = y->dims[2], pw_n = y->dims[3], sr = mp_attr_i(k->n, "sampling_ratio", 0);
    double scale = mp_attr_f(k->n, "spatial_scale", 1.0);
    bool is_max = !strcmp(mp_attr_s(k->n, "mode", "avg"), "max");
    bool half = !strcmp(mp_attr_s(k->n, "coordinate_transformation_mode", k->n->opset >= 16 ? "half_pixel" : "output_half_pixel"),
                        "half_pixel");
    double off = half ? 0.5 : 0;
    for (int64_t r = 0; r < R; r++) {
        int64_t b = mp_kget_i(bi->data, bi->dtype, r);
        if (b < 0 || b >= x->dims[0]) return mp_kfail(k, MP_ERR_USAGE, "batch index %lld out of range", (long long)b);
        double x1 = mp_kget_f(rois->data, rois->dtype, r * 4) * scale - off, y1 = mp_kget_f(rois->data, rois->dtype, r * 4 + 1) * scale - off;
        double x2 = mp_kget_f(rois->data, rois->dtype, r * 4 + 2) * scale - off, y2 = mp_kget_f(rois->data, rois->dtype, r * 4 + 3) * scale - off;
        double rw = x2 - x1, rh = y2 - y1;
        if (!half) rw = fmax(rw, 1.0), rh = fmax(rh, 1.0);
        double bh = rh / (double)ph_n, bw = rw / (double)pw_n;
        int64_t gh = sr > 0 ? sr : mp_kf2i(ceil(rh / (double)ph_n)), gw = sr > 0 ? sr : mp_kf2i(ceil(rw / (double)pw_n));
        if (gh < 0 || gw < 0 || gh > 4096 || gw > 4096 || gh * gw > (1 << 20))
            return mp_kfail(k, MP_ERR_LIMIT, "roi %lld: a sampling grid of %lld x %lld points", (long long)r,
                            (long long)gh, (long long)gw);
        double cnt = (double)(gh * gw > 0 ? gh * gw : 1);
        for (int64_t c = 0; c < C; c++) {
            int64_t base = (b * C + c) * H * W;
            for (int64_t ph = 0; ph < ph_n; ph++)
                for (int64_t pw = 0; pw < pw_n; pw++) {
                    double acc = is_max ? -INFINITY : 0;
                    bool any = false;
                    for (int64_t iy = 0; iy < gh; iy++)
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double yy = y1 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                            double xx = x1 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                            double v = 0;
                            if (!(yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W)) {
                                yy = fmax(yy, 0), xx = fmax(xx, 0);
                                int64_t yl = mp_kf2i(yy), xl = mp_kf2i(xx), yh2, xh2;
                                if (yl >= H - 1) yh2 = yl = H - 1, yy = (double)yl;
                                else yh2 = yl + 1;
                                if (xl >= W - 1) xh2 = xl = W - 1, xx = (double)xl;
                                else xh2 = xl + 1;
                                double ly = yy - (double)yl, lx = xx - (double)xl, hy = 1 - ly, hx = 1 - lx;
                                double v1 = hy * hx * mp_kget_f(x->data, x->dtype, base + yl * W + xl);
                                double v2 = hy * lx * mp_kget_f(x->data, x->dtype, base + yl * W + xh2);
                                double v3 = ly * hx * mp_kget_f(x->data, x->dtype, base + yh2 * W + xl);
                                double v4 = ly * lx * mp_kget_f(x->data, x->dtype, base + yh2 * W + xh2);
                                v = is_max ? fmax(fmax(v1, v2), fmax(v3, v4)) : v1 + v2 + v3 + v4;
                            }
                            if (is_max) acc = any ? fmax(acc, v) : v;
                            else acc += v;
                            any = true;
                        }
                    mp_kset_f(y->data, y->dtype, ((r * C + c) * ph_n + ph) * pw_n + pw, is_max ? (any ? acc : 0) : acc / cnt);
                }
        }
    }
    return MP_OK;
}

/* Random operators: a splitmix64 stream per node, seeded by the `seed`
 * attribute (else by the node's name), advancing run after run. Their
 * values are not comparable with another generator's (the run phase of
 * the conformance compares them by shape only); they make models that
 * use them runnable. */
typedef struct msk_rng {
    uint64_t s;
} msk_rng;

static uint64_t msk_next(msk_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double msk_unit(msk_rng *r) { return (double)(msk_next(r) >> 11) * (1.0 / 9007199254740992.0); }

static mp_status msk_rng_prep(mp_kctx *k, size_t *scratch) {
    (void)scratch;
    msk_rng *r = mp_kstate_new(k, sizeof *r);
    if (!r) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    const mp_attr *sd = mp_node_attr(k->n, "seed");
    if (sd) {
        double f = sd->type == MP_ATTR_INT ? (double)sd->i : sd->f;
        memcpy(&r->s, &f, sizeof f);
    } else {
        r->s = 0x243f6a8885a308d3ull;
        for (const char *c = k->n->name ? k->n->name : ""; *c; c++) r->s = (r->s ^ (uint8_t)*c) * 0x100000001b3ull;
    }
    return MP_OK;
}

static mp_status msk_random(mp_kctx *k) {
    msk_rng *r = k->state;
    mp_rtensor *y = &k->out[0];
    if (!r) return mp_kfail(k, MP_ERR_USAGE, "kernel not prepared");
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    const char *op = k->n->op;
    if (!strcmp(op, "Bernoulli")) {
        const mp_rtensor *p = &k->in[0];
        for (int64_t e = 0; e < y->numel; e++) mp_kset_i(y->data, y->dtype, e, msk_unit(r) < mp_kget_f(p->data, p->dtype, e));
        return MP_OK;
    }
    if (!strcmp(op, "Multinomial")) { /* [B, C] unnormalized log-probabilities -> [B, sample_size] */
        const mp_rtensor *x = &k->in[0];
        int64_t B = x->dims[0], C = x->dims[1], n = y->dims[1];
        for (int64_t b = 0; b < B; b++) {
            double m = -INFINITY, sum = 0;
            for (int64_t c = 0; c < C; c++) m = fmax(m, mp_kget_f(x->data, x->dtype, b * C + c));
            for (int64_t c = 0; c < C; c++) sum += exp(mp_kget_f(x->data, x->dtype, b * C + c) - m);
            for (int64_t j = 0; j < n; j++) {
                double u = msk_unit(r) * sum, acc = 0;
                int64_t c = 0;
                for (; c < C - 1; c++) {
                    acc += exp(mp_kget_f(x->data, x->dtype, b * C + c) - m);
                    if (u < acc) break;
                }
                mp_kset_i(y->data, y->dtype, b * n + j, c);
            }
        }
        return MP_OK;
    }
    bool normal = strstr(op, "Normal") != NULL;
    double a = normal ? mp_attr_f(k->n, "mean", 0.0) : mp_attr_f(k->n, "low", 0.0);
    double b = normal ? mp_attr_f(k->n, "scale", 1.0) : mp_attr_f(k->n, "high", 1.0);
    for (int64_t e = 0; e < y->numel; e++) {
        double v;
        if (normal) { /* Box-Muller */
            double u1 = msk_unit(r), u2 = msk_unit(r);
            v = a + b * sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(2 * 3.14159265358979323846 * u2);
        } else {
            v = a + (b - a) * msk_unit(r);
        }
        mp_kset_f(y->data, y->dtype, e, v);
    }
    return MP_OK;
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
    {"", "TopK", 1, infer_topk1, cost_topk, 0, 0, NULL, msk_topk},
    {"", "TopK", 10, infer_topk10, cost_topk, 0, 0, NULL, msk_topk},
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
