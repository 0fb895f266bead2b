/* The reference kernels of the operators whose shape, cost and training
 * rules are in misc.c (see its opening comment); misc_int.h is what the two
 * files share. */
#include "ops/kernel.h"
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include "ops/misc_int.h"

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

mp_status msk_nll_run(mp_kctx *k) {
    return msk_nll(k, &k->in[0], NULL, &k->in[1], mp_kin(k, 2), &k->out[0]);
}

/* SoftmaxCrossEntropyLoss: log-softmax over axis 1, then the NLL; the
 * optional second output is the log-softmax. */
mp_status msk_sce(mp_kctx *k) {
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

mp_status msk_topk(mp_kctx *k) {
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
mp_status msk_window(mp_kctx *k) {
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
mp_status msk_det(mp_kctx *k) {
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
mp_status msk_maxunpool(mp_kctx *k) {
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

mp_status msk_dft(mp_kctx *k) {
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

mp_status msk_stft(mp_kctx *k) {
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
    double y1, x1, y2, x2, area;
} msk_box;

static msk_box msk_box_at(const mp_rtensor *b, int64_t at, bool center) {
    double v[4];
    for (int i = 0; i < 4; i++) v[i] = mp_kget_f(b->data, b->dtype, at * 4 + i);
    msk_box r;
    if (center) /* [x_center, y_center, width, height] */
        r = (msk_box){v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2, 0};
    else
        r = (msk_box){fmin(v[0], v[2]), fmin(v[1], v[3]), fmax(v[0], v[2]), fmax(v[1], v[3]), 0};
    r.area = (r.y2 - r.y1) * (r.x2 - r.x1);
    return r;
}

static double msk_iou(const msk_box *a, const msk_box *b) {
    double ih = fmin(a->y2, b->y2) - fmax(a->y1, b->y1), iw = fmin(a->x2, b->x2) - fmax(a->x1, b->x1);
    if (ih <= 0 || iw <= 0) return 0;
    double inter = ih * iw, uni = a->area + b->area - inter;
    return uni > 0 ? inter / uni : 0;
}

mp_status msk_nms(mp_kctx *k) {
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
    msk_box *box = malloc(sizeof *box * (size_t)(S + 1)), *kept = malloc(sizeof *kept * (size_t)(S + 1));
    int64_t *sel = malloc(sizeof(int64_t) * 3 * (size_t)(B * C * S + 1)), n = 0;
    if (!cand || !box || !kept || !sel) {
        free(cand), free(box), free(kept), free(sel);
        return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    }
    for (int64_t b = 0; b < B && maxo > 0; b++) {
        /* the batch's boxes read once, corners ordered and areas known */
        for (int64_t s = 0; s < S; s++) box[s] = msk_box_at(bx, b * S + s, center);
        for (int64_t c = 0; c < C; c++) {
            int64_t nc = 0, nk = 0;
            for (int64_t s = 0; s < S; s++) {
                double v = mp_kget_f(sc->data, sc->dtype, (b * C + c) * S + s);
                if (!has_st || v > st_v) cand[nc++] = (msk_kv){v, s};
            }
            qsort(cand, (size_t)nc, sizeof *cand, msk_cmp_desc);
            for (int64_t q = 0; q < nc && nk < maxo; q++) {
                const msk_box *a = &box[cand[q].i];
                bool drop = false;
                for (int64_t j = 0; j < nk && !drop; j++) drop = msk_iou(a, &kept[j]) > iou_t;
                if (drop) continue;
                kept[nk++] = *a;
                sel[3 * n] = b, sel[3 * n + 1] = c, sel[3 * n + 2] = cand[q].i;
                n++;
            }
        }
    }
    int64_t dims[2] = {n, 3};
    mp_status st = mp_kout_shape(k, 0, 2, dims);
    if (!st) memcpy(k->out[0].data, sel, sizeof(int64_t) * 3 * (size_t)n);
    free(cand), free(box), free(kept), free(sel);
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

mp_status msk_gridsample(mp_kctx *k) {
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
mp_status msk_tfidf(mp_kctx *k) {
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
mp_status msk_melweight(mp_kctx *k) {
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
 * half_pixel shifts by -0.5; output_half_pixel keeps rois at least 1).
 * The samples' four taps and weights depend on the roi and the bin, not
 * on the channel: they are computed once per bin (torchvision's CPU kernel
 * keeps them per roi) and read for every channel, rois split across
 * threads; the sums are the same, in the same order. */
typedef struct ra_geom {
    double x1, y1, bh, bw;
    int64_t b, gh, gw;
} ra_geom;

typedef struct ra_tap {
    int64_t o[4];   /* offsets in the channel plane; valid false: outside, the sample is 0 */
    double w[4];
    bool valid;
} ra_tap;

typedef struct ra_job {
    const mp_rtensor *x;
    mp_rtensor *y;
    const ra_geom *g;
    int64_t C, H, W, ph_n, pw_n, max_taps;
    bool is_max, fail;
} ra_job;

/* The taps of bin (ph, pw) of roi g */
static void ra_taps(const ra_job *j, const ra_geom *g, int64_t ph, int64_t pw, ra_tap *t) {
    int64_t H = j->H, W = j->W;
    for (int64_t iy = 0; iy < g->gh; iy++)
        for (int64_t ix = 0; ix < g->gw; ix++, t++) {
            double yy = g->y1 + (double)ph * g->bh + ((double)iy + 0.5) * g->bh / (double)g->gh;
            double xx = g->x1 + (double)pw * g->bw + ((double)ix + 0.5) * g->bw / (double)g->gw;
            t->valid = !(yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W);
            if (!t->valid) continue;
            yy = fmax(yy, 0), xx = fmax(xx, 0);
            int64_t yl = mp_kf2i(yy), xl = mp_kf2i(xx), yh2, xh2;
            if (yl >= H - 1) yh2 = yl = H - 1, yy = (double)yl;
            else yh2 = yl + 1;
            if (xl >= W - 1) xh2 = xl = W - 1, xx = (double)xl;
            else xh2 = xl + 1;
            double ly = yy - (double)yl, lx = xx - (double)xl, hy = 1 - ly, hx = 1 - lx;
            t->o[0] = yl * W + xl, t->o[1] = yl * W + xh2, t->o[2] = yh2 * W + xl, t->o[3] = yh2 * W + xh2;
            t->w[0] = hy * hx, t->w[1] = hy * lx, t->w[2] = ly * hx, t->w[3] = ly * lx;
        }
}

static void ra_rois(void *arg, int64_t lo, int64_t hi) {
    ra_job *j = arg;
    ra_tap *taps = malloc((size_t)j->max_taps * sizeof *taps);
    if (!taps) {
        j->fail = true;   /* written by any thread; read after all joined */
        return;
    }
    const mp_rtensor *x = j->x;
    int64_t C = j->C, HW = j->H * j->W, bins = j->ph_n * j->pw_n;
    for (int64_t r = lo; r < hi; r++) {
        const ra_geom *g = &j->g[r];
        int64_t per = g->gh * g->gw;
        double cnt = (double)(per > 0 ? per : 1);
        for (int64_t bin = 0; bin < bins; bin++) {
            ra_taps(j, g, bin / j->pw_n, bin % j->pw_n, taps);
            for (int64_t c = 0; c < C; c++) {
                int64_t base = (g->b * C + c) * HW;
                const float *xf = x->dtype == MP_DT_FLOAT ? (const float *)x->data + base : NULL;
                double acc = j->is_max ? -INFINITY : 0;
                bool any = false;
                for (int64_t s = 0; s < per; s++) {
                    const ra_tap *t = &taps[s];
                    double v = 0;
                    if (t->valid) {
                        double x0, x1, x2, x3;
                        if (xf) x0 = xf[t->o[0]], x1 = xf[t->o[1]], x2 = xf[t->o[2]], x3 = xf[t->o[3]];
                        else
                            x0 = mp_kget_f(x->data, x->dtype, base + t->o[0]),
                            x1 = mp_kget_f(x->data, x->dtype, base + t->o[1]),
                            x2 = mp_kget_f(x->data, x->dtype, base + t->o[2]),
                            x3 = mp_kget_f(x->data, x->dtype, base + t->o[3]);
                        double v1 = t->w[0] * x0, v2 = t->w[1] * x1, v3 = t->w[2] * x2, v4 = t->w[3] * x3;
                        v = j->is_max ? fmax(fmax(v1, v2), fmax(v3, v4)) : v1 + v2 + v3 + v4;
                    }
                    if (j->is_max) acc = any ? fmax(acc, v) : v;
                    else acc += v;
                    any = true;
                }
                mp_kset_f(j->y->data, j->y->dtype, (r * C + c) * bins + bin,
                          j->is_max ? (any ? acc : 0) : acc / cnt);
            }
        }
    }
    free(taps);
}

mp_status msk_roialign(mp_kctx *k) {
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
    if (R == 0) return MP_OK;
    ra_geom *g = malloc((size_t)R * sizeof *g);
    if (!g) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    ra_job j = {x, y, g, C, H, W, ph_n, pw_n, 1, is_max, false};
    for (int64_t r = 0; r < R; r++) {
        int64_t b = mp_kget_i(bi->data, bi->dtype, r);
        if (b < 0 || b >= x->dims[0]) {
            free(g);
            return mp_kfail(k, MP_ERR_USAGE, "batch index %lld out of range", (long long)b);
        }
        double x1 = mp_kget_f(rois->data, rois->dtype, r * 4) * scale - off, y1 = mp_kget_f(rois->data, rois->dtype, r * 4 + 1) * scale - off;
        double x2 = mp_kget_f(rois->data, rois->dtype, r * 4 + 2) * scale - off, y2 = mp_kget_f(rois->data, rois->dtype, r * 4 + 3) * scale - off;
        double rw = x2 - x1, rh = y2 - y1;
        if (!half) rw = fmax(rw, 1.0), rh = fmax(rh, 1.0);
        int64_t gh = sr > 0 ? sr : mp_kf2i(ceil(rh / (double)ph_n)), gw = sr > 0 ? sr : mp_kf2i(ceil(rw / (double)pw_n));
        if (gh < 0 || gw < 0 || gh > 4096 || gw > 4096 || gh * gw > (1 << 20)) {
            free(g);
            return mp_kfail(k, MP_ERR_LIMIT, "roi %lld: a sampling grid of %lld x %lld points", (long long)r,
                            (long long)gh, (long long)gw);
        }
        g[r] = (ra_geom){x1, y1, rh / (double)ph_n, rw / (double)pw_n, b, gh, gw};
        j.max_taps = MP_MAX(j.max_taps, gh * gw);
    }
    mp_kparallel(k, R, ra_rois, &j);
    free(g);
    return j.fail ? mp_kfail(k, MP_ERR_NOMEM, "out of memory") : MP_OK;
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

mp_status msk_rng_prep(mp_kctx *k, size_t *scratch) {
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

mp_status msk_random(mp_kctx *k) {
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