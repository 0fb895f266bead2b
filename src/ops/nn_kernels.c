/* The reference kernels of the operators whose shape, cost and training
 * rules are in nn.c (see its opening comment); nn_int.h is what the two
 * files share. */
#include "ops/kernel.h"
#include "ops/scalar.h"
#include <math.h>
#include <stdlib.h>
#include "ops/nn_int.h"

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

/* the portable GEMM, one thread */
static mp_status nnk_conv_gemm(void *ctx, int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C) {
    (void)ctx;
    mp_kgemm_f32(M, N, K, A, K, 1, B, N, 1, C, N, false);
    return MP_OK;
}

mp_status mp_kconv(mp_kctx *k) {
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    const mp_rtensor *x = &k->in[0], *w = &k->in[1], *b = mp_kin(k, 2);
    mp_rtensor *y = &k->out[0];
    mp_kconvg c;
    mp_status st = mp_kconv_geom(k, x, w, b, y, &c);
    if (st) return st;
    if (nnk_f32(x) && nnk_f32(w) && nnk_f32(y) && (!b || nnk_f32(b)))
        return mp_kconv_f32(k, &c, x->data, w->data, b ? b->data : NULL, y->data, nnk_conv_gemm, NULL);
    double *xd = nnk_load(k, x, &st), *wd = st ? NULL : nnk_load(k, w, &st), *bd = NULL;
    double *yd = st ? NULL : nnk_dbuf(k, y->numel, &st);
    if (!st && b) bd = nnk_load(k, b, &st);
    if (!st) st = mp_kconv_f64(k, xd, x, wd, w, bd, yd, y);
    if (!st) mp_kconvert(y->data, y->dtype, yd, MP_DT_DOUBLE, y->numel);
    free(xd), free(wd), free(bd), free(yd);
    return st;
}

/* ---- ConvTranspose: GEMM into columns, then col2im (scatter-add) ---- */

mp_status mp_kconvt_geom(mp_kctx *k, mp_kconvt *c) {
    const mp_rtensor *x = &k->in[0], *w = &k->in[1], *b = mp_kin(k, 2), *y = &k->out[0];
    int nsp = x->rank - 2;
    if (nsp < 1 || w->rank != x->rank || y->rank != x->rank) return mp_kfail(k, MP_ERR_SHAPE, "bad ranks");
    c->nsp = nsp;
    c->N = x->dims[0], c->C = x->dims[1], c->G = mp_attr_i(k->n, "group", 1);
    c->mg = w->dims[1], c->M = c->mg * c->G, c->cg = c->C / (c->G ? c->G : 1);
    if (c->G < 1 || c->C % c->G || w->dims[0] != c->C || (b && b->numel < c->M) || y->dims[1] != c->M ||
        y->dims[0] != c->N)
        return mp_kfail(k, MP_ERR_SHAPE, "W, B and Y do not match X's channels and the group");
    c->kn = 1, c->in_n = 1, c->on = 1;
    const int64_t *v;
    int ns = mp_attr_ints(k->n, "strides", &v);
    for (int i = 0; i < nsp; i++) c->stride[i] = ns == nsp ? v[i] : 1;
    int nd = mp_attr_ints(k->n, "dilations", &v);
    for (int i = 0; i < nsp; i++) c->dil[i] = nd == nsp ? v[i] : 1;
    int np = mp_attr_ints(k->n, "pads", &v);
    const char *ap = mp_attr_s(k->n, "auto_pad", "NOTSET");
    const int64_t *op_;
    int nop = mp_attr_ints(k->n, "output_padding", &op_);
    bool derived = mp_node_attr(k->n, "output_shape") || !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    for (int i = 0; i < nsp; i++) {
        int64_t kk = w->dims[2 + i], in = x->dims[2 + i], out = y->dims[2 + i];
        int64_t total = c->stride[i] * (in - 1) + (nop == nsp ? op_[i] : 0) + (kk - 1) * c->dil[i] + 1 - out;
        if (!derived) c->pad[i] = np == 2 * nsp ? v[i] : 0;
        int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2); /* floor(total / 2) */
        if (derived) c->pad[i] = !strcmp(ap, "SAME_UPPER") ? half : total - half;
        c->kernel[i] = kk, c->in[i] = in, c->out[i] = out;
        c->kn *= kk, c->in_n *= in, c->on *= out;
    }
    return MP_OK;
}

int64_t *mp_kconvt_offsets(const mp_kconvt *c) {
    int64_t *off = malloc(sizeof *off * (size_t)(c->kn * c->in_n + 1));
    if (!off) return NULL;
    int64_t kidx[MP_MAX_RANK], iidx[MP_MAX_RANK];
    for (int64_t kp = 0; kp < c->kn; kp++) {
        int64_t r = kp;
        for (int i = c->nsp - 1; i >= 0; i--) kidx[i] = r % c->kernel[i], r /= c->kernel[i];
        for (int64_t ip = 0; ip < c->in_n; ip++) {
            r = ip;
            for (int i = c->nsp - 1; i >= 0; i--) iidx[i] = r % c->in[i], r /= c->in[i];
            int64_t o = 0;
            bool inside = true;
            for (int i = 0; i < c->nsp && inside; i++) {
                int64_t p = iidx[i] * c->stride[i] + kidx[i] * c->dil[i] - c->pad[i];
                inside = p >= 0 && p < c->out[i];
                o = o * c->out[i] + p;
            }
            off[kp * c->in_n + ip] = inside ? o : -1;
        }
    }
    return off;
}

mp_status nnk_conv_transpose(mp_kctx *k) {
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    const mp_rtensor *x = &k->in[0], *w = &k->in[1], *b = mp_kin(k, 2);
    mp_rtensor *y = &k->out[0];
    mp_kconvt c;
    mp_status st = mp_kconvt_geom(k, &c);
    if (st) return st;
    int64_t N = c.N, C = c.C, G = c.G, mg = c.mg, M = c.M, cg = c.cg, kn = c.kn, in_n = c.in_n, on = c.on;
    int64_t *off = mp_kconvt_offsets(&c);
    if (!off) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    double *xd = nnk_load(k, x, &st), *wd = st ? NULL : nnk_load(k, w, &st);
    double *col = st ? NULL : nnk_dbuf(k, mg * kn * in_n, &st), *yd = st ? NULL : nnk_dbuf(k, y->numel, &st);
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
                for (int64_t e = 0; e < kn * in_n; e++)
                    if (off[e] >= 0) ys[m * on + off[e]] += col[m * kn * in_n + e];
        }
    if (!st) mp_kconvert(y->data, y->dtype, yd, MP_DT_DOUBLE, y->numel);
    free(xd), free(wd), free(col), free(yd), free(off);
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

mp_status nnk_maxpool(mp_kctx *k) { return nnk_pool_run(k, NNK_MAX, false); }
mp_status nnk_avgpool(mp_kctx *k) { return nnk_pool_run(k, NNK_AVG, false); }
mp_status nnk_lppool(mp_kctx *k) { return nnk_pool_run(k, NNK_LP, false); }
mp_status nnk_gmaxpool(mp_kctx *k) { return nnk_pool_run(k, NNK_MAX, true); }
mp_status nnk_gavgpool(mp_kctx *k) { return nnk_pool_run(k, NNK_AVG, true); }
mp_status nnk_glppool(mp_kctx *k) { return nnk_pool_run(k, NNK_LP, true); }

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

mp_status nnk_batchnorm(mp_kctx *k) {
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

/* fp32 planes of InstanceNormalization, split across threads: the generic
 * path's arithmetic (sums and the normalised value in double, that value
 * stored as float, then scale and bias in double), without its per-element
 * getters (GroupNorm as PyTorch exports it: FCOS's head, 168 -> 23 ms). */
typedef struct nnk_inorm {
    const float *x, *scale, *bias;
    float *y;
    int64_t C, inner;
    double eps;
} nnk_inorm;

static void nnk_inorm_planes(void *arg, int64_t lo, int64_t hi) {
    const nnk_inorm *p = arg;
    int64_t L = p->inner;
    for (int64_t g = lo; g < hi; g++) {
        const float *x = p->x + g * L;
        float *y = p->y + g * L;
        double s = 0, s2 = 0;
        for (int64_t j = 0; j < L; j++) s += x[j];
        double mean = L ? s / (double)L : 0;
        for (int64_t j = 0; j < L; j++) {
            double d = x[j] - mean;
            s2 += d * d;
        }
        double inv = 1.0 / sqrt((L ? s2 / (double)L : 0) + p->eps);
        int64_t c = g % p->C;
        double sc = p->scale[c], b = p->bias[c];
        for (int64_t j = 0; j < L; j++) {
            float t = (float)((x[j] - mean) * inv);
            y[j] = (float)((double)t * sc + b);
        }
    }
}

mp_status nnk_instancenorm(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    double eps = mp_attr_f(k->n, "epsilon", 1e-5);
    int64_t C = x->dims[1], inner = 1;
    for (int i = 2; i < x->rank; i++) inner *= x->dims[i];
    const mp_rtensor *sc = &k->in[1], *bi = &k->in[2];
    if (nnk_f32(x) && nnk_f32(y) && nnk_f32(sc) && nnk_f32(bi) && sc->numel == C && bi->numel == C) {
        nnk_inorm p = {x->data, sc->data, bi->data, y->data, C, inner, eps};
        mp_kparallel(k, x->dims[0] * C, nnk_inorm_planes, &p);
        return MP_OK;
    }
    for (int64_t g = 0; g < x->dims[0] * C; g++) nnk_norm_group(x, y, g * inner, inner, 1, eps, NULL, NULL);
    nnk_affine(y, sc, bi, C, inner);
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

mp_status nnk_groupnorm(mp_kctx *k) {
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

mp_status nnk_lpnorm(mp_kctx *k) {
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

mp_status nnk_reduce(mp_kctx *k) {
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
    int64_t kd[MP_MAX_RANK], cnt = 1, kn = 1;
    for (int i = 0; i < x->rank; i++) {
        kd[i] = (mask >> i) & 1 ? 1 : x->dims[i];
        if ((mask >> i) & 1) cnt *= x->dims[i];
        kn *= kd[i];
    }
    int64_t on = y->numel;
    if (kn != on) /* axes at run time other than the ones the output was shaped by */
        return mp_kfail(k, MP_ERR_SHAPE, "the axes reduce to %lld values but the output holds %lld", (long long)kn,
                        (long long)on);
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

mp_status nnk_argminmax(mp_kctx *k) {
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
mp_status nnk_softmax(mp_kctx *k) {
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
    double *row = f32 ? NULL : malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!f32 && !row) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            if (f32) {
                mp_s_softmax_rowf((const float *)x->data + base, (float *)y->data + base, n);
                continue;
            }
            double m = -INFINITY;
            int64_t arg = 0;
            for (int64_t j = 0; j < n; j++) {
                row[j] = mp_kget_f(x->data, x->dtype, base + j * inner);
                if (row[j] > m) m = row[j], arg = j;
            }
            if (kind == 0) mp_s_softmax_row(row, n, false);
            else if (kind == 1) mp_s_log_softmax_row(row, n);
            else
                for (int64_t j = 0; j < n; j++) row[j] = j == arg;
            for (int64_t j = 0; j < n; j++) mp_kset_f(y->data, y->dtype, base + j * inner, row[j]);
        }
    free(row);
    return MP_OK;
}

mp_status nnk_mvn(mp_kctx *k) {
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

mp_status nnk_lrn(mp_kctx *k) {
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
mp_status nnk_dropout(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    size_t bytes = (size_t)mp_dtype_bytes(x->dtype, x->numel);
    if (y->data != x->data && bytes) memmove(y->data, x->data, bytes);
    if (k->n_out > 1 && k->out[1].data) {
        if (k->out[1].dtype == MP_DT_BOOL || k->out[1].dtype == MP_DT_UINT8 || k->out[1].dtype == MP_DT_INT8)
            memset(k->out[1].data, 1, (size_t)k->out[1].numel);
        else
            for (int64_t i = 0; i < k->out[1].numel; i++) mp_kset_i(k->out[1].data, k->out[1].dtype, i, 1);
    }
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

/* fp32 planes resampled on their last two axes, every leading axis
 * copied through (N and C of an image, as F.interpolate resizes them):
 * each output row and column keeps only its taps of nonzero weight (two
 * for linear, one for nearest), the planes split across the threads. */
typedef struct nnk_plane {
    const float *x;
    float *y;
    int64_t ih, iw, oh, ow;
    const nnk_taps *th, *tw;
} nnk_plane;

#define NNK_ROWS_MAX 64 /* input rows one output row weighs, at most, on the row path */

static void nnk_resize_planes(void *arg, int64_t lo, int64_t hi) {
    const nnk_plane *p = arg;
    int th = p->th->t, tw = p->tw->t;
    /* each input row resampled along the width once and kept while the
     * output rows read it (slot: its index modulo the taps, which cover
     * consecutive rows), then the rows weighed down the height: the same
     * sums in the same order as taking each output alone */
    double *rows = malloc(sizeof(double) * (size_t)th * (size_t)(p->ow > 0 ? p->ow : 1));
    int64_t *key = malloc(sizeof(int64_t) * (size_t)th);
    for (int64_t pl = lo; pl < hi; pl++) {
        const float *x = p->x + pl * p->ih * p->iw;
        float *y = p->y + pl * p->oh * p->ow;
        for (int j = 0; key && j < th; j++) key[j] = -1;
        for (int64_t oy = 0; oy < p->oh; oy++) {
            const int64_t *iy = p->th->idx + oy * th;
            const double *wy = p->th->w + oy * th;
            if (!rows || !key || th > NNK_ROWS_MAX) { /* each output alone (no memory, or taps past the list) */
                for (int64_t ox = 0; ox < p->ow; ox++) {
                    const int64_t *ix = p->tw->idx + ox * tw;
                    const double *wx = p->tw->w + ox * tw;
                    double acc = 0;
                    for (int j = 0; j < th; j++) {
                        if (wy[j] == 0) continue;
                        const float *row = x + iy[j] * p->iw;
                        double rs = 0;
                        for (int i = 0; i < tw; i++)
                            if (wx[i] != 0) rs += wx[i] * (double)row[ix[i]];
                        acc += wy[j] * rs;
                    }
                    y[oy * p->ow + ox] = (float)acc;
                }
                continue;
            }
            for (int j = 0; j < th; j++) {
                if (wy[j] == 0) continue;
                int slot = (int)(iy[j] % th);
                if (key[slot] == iy[j]) continue;
                key[slot] = iy[j];
                const float *row = x + iy[j] * p->iw;
                double *rs = rows + (size_t)slot * (size_t)p->ow;
                for (int64_t ox = 0; ox < p->ow; ox++) {
                    const int64_t *ix = p->tw->idx + ox * tw;
                    const double *wx = p->tw->w + ox * tw;
                    double v = 0;
                    for (int i = 0; i < tw; i++)
                        if (wx[i] != 0) v += wx[i] * (double)row[ix[i]];
                    rs[ox] = v;
                }
            }
            /* the rows this output row weighs, in tap order */
            const double *rp[NNK_ROWS_MAX];
            double rw[NNK_ROWS_MAX];
            int nr = 0;
            for (int j = 0; j < th; j++)
                if (wy[j] != 0) rp[nr] = rows + (size_t)(iy[j] % th) * (size_t)p->ow, rw[nr++] = wy[j];
            float *yr = y + oy * p->ow;
            if (nr == 1)
                for (int64_t ox = 0; ox < p->ow; ox++) yr[ox] = (float)(0.0 + rw[0] * rp[0][ox]);
            else if (nr == 2)
                for (int64_t ox = 0; ox < p->ow; ox++) yr[ox] = (float)(0.0 + rw[0] * rp[0][ox] + rw[1] * rp[1][ox]);
            else
                for (int64_t ox = 0; ox < p->ow; ox++) {
                    double acc = 0;
                    for (int j = 0; j < nr; j++) acc += rw[j] * rp[j][ox];
                    yr[ox] = (float)acc;
                }
        }
    }
    free(rows);
    free(key);
}

/* Whether the taps of axis a copy it through (one tap, index o, weight 1). */
static bool nnk_taps_identity(const nnk_taps *t, int64_t out, int64_t in) {
    if (t->t != 1 || out != in) return false;
    for (int64_t o = 0; o < out; o++)
        if (t->idx[o] != o || t->w[o] != 1) return false;
    return true;
}

mp_status nnk_resize(mp_kctx *k) {
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
            else if (!strcmp(ctm, "align_corners")) /* the resized length: the output's (ONNX's text, PyTorch, ONNX Runtime) */
                c = out != 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0;
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
    bool planes = !st && r >= 2 && x->dtype == MP_DT_FLOAT && y->dtype == MP_DT_FLOAT;
    for (int a = 0; planes && a < r - 2; a++) planes = nnk_taps_identity(&taps[a], y->dims[a], x->dims[a]);
    for (int a = r - 2; planes && a < r; a++)
        for (int64_t o = 0; o < y->dims[a] && planes; o++) planes = taps[a].idx[o * taps[a].t] != -2; /* no extrapolation */
    if (planes) {
        int64_t n = 1;
        for (int a = 0; a < r - 2; a++) n *= x->dims[a];
        nnk_plane p = {x->data, y->data, x->dims[r - 2], x->dims[r - 1], y->dims[r - 2], y->dims[r - 1],
                       &taps[r - 2], &taps[r - 1]};
        mp_kparallel(k, n, nnk_resize_planes, &p);
    } else if (!st) {
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
void train_conv(mp_ctx *c, mp_bwd *t) {
    mp_bwd_product(c, t);
    if (t->rg) t->save_in |= 3u;
}

/* Max pooling keeps its input and the int64 index of each output's max
 * (PyTorch max_pool2d_with_indices). */
void train_maxpool(mp_ctx *c, mp_bwd *t) {
    if (!(t->rg & 1u)) return;
    t->save_in = 1u;
    t->extra_bytes = 8 * nn_numel(mp_out(c, 0));
    t->bwd_flops = nn_numel(mp_out(c, 0));
}

/* Average and global pools keep their input (PyTorch avg_pool2d,
 * adaptive_avg_pool2d save self). */
void train_pool(mp_ctx *c, mp_bwd *t) {
    if (!(t->rg & 1u)) return;
    t->save_in = 1u;
    t->bwd_flops = nn_numel(mp_in(c, 0));
}

/* Normalisations keep their input and two fp32 statistics per normalised
 * group (mean and 1/std); the backward costs about twice the forward.
 * BatchNorm runs in its input's type (cuDNN takes bf16 with fp32 scale);
 * layer and group norms are on autocast's fp32 list. */
uint64_t mp_norm_stat_bytes(uint64_t groups) { return 2 * 4 * groups; }

static void nn_train_norm(mp_ctx *c, mp_bwd *t, uint64_t groups, int amp) {
    t->amp = (uint8_t)amp;
    if (!t->rg) return;
    t->save_in = 1u;
    t->extra_bytes = mp_norm_stat_bytes(groups);
    t->bwd_flops = 2 * t->fwd->flops;
}

void train_batchnorm(mp_ctx *c, mp_bwd *t) {
    const mp_value *x = mp_in(c, 0);
    nn_train_norm(c, t, x && x->rank >= 2 && x->dims[1] > 0 ? (uint64_t)x->dims[1] : 0, MP_AMP_PROMOTE);
}

void train_layernorm(mp_ctx *c, mp_bwd *t) {
    const mp_value *x = mp_in(c, 0);
    uint64_t rows = 0;
    if (x && x->rank >= 1) {
        int ax = mp_axis(mp_attr_i(c->n, "axis", -1), x->rank);
        int64_t r = ax >= 0 ? mp_dims_product(x->dims, ax) : -1;
        rows = r > 0 ? (uint64_t)r : 0;
    }
    nn_train_norm(c, t, rows, MP_AMP_FP32);
}

void train_groupnorm(mp_ctx *c, mp_bwd *t) {
    const mp_value *x = mp_in(c, 0);
    uint64_t n = x && x->rank >= 1 && x->dims[0] > 0 ? (uint64_t)x->dims[0] : 0;
    int64_t g = mp_streq(c->n->op, "InstanceNormalization")
                    ? (x && x->rank >= 2 ? x->dims[1] : 0)
                    : mp_attr_i(c->n, "num_groups", 1);
    nn_train_norm(c, t, n * (uint64_t)(g > 0 ? g : 0), MP_AMP_FP32);
}

/* Softmax and LogSoftmax keep their output (autocast's fp32 list). */
void train_softmax(mp_ctx *c, mp_bwd *t) {
    t->amp = MP_AMP_FP32;
    if (mp_streq(c->n->op, "Hardmax") || !t->rg) return;
    t->save_out = 1u;
    t->bwd_flops = 2 * t->fwd->flops;
}

/* Sum and mean need only the input's shape; max/min, prod and the norms
 * keep input and output. */
void train_reduce(mp_ctx *c, mp_bwd *t) {
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
void train_dropout(mp_ctx *c, mp_bwd *t) {
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
void train_resize(mp_ctx *c, mp_bwd *t) {
    if (t->rg & 1u) t->bwd_flops = 2 * nn_numel(mp_out(c, 0));
}

void train_lrn(mp_ctx *c, mp_bwd *t) {
    if (!(t->rg & 1u)) return;
    t->save_in = 1u;
    t->save_out = 1u;
    t->bwd_flops = 2 * t->fwd->flops;
}