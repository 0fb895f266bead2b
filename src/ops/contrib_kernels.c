/* The reference kernels of the operators whose shape, cost and training
 * rules are in contrib.c (see its opening comment); contrib_int.h is what the two
 * files share. */
#include "ops/kernel.h"
#include "ops/scalar.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "ops/contrib_int.h"

/* The layer normalizations: each row of the normalized (trailing) dims
 * gets s = x (+ skip) (+ bias), then (s - mean) * inv_std (LayerNorm) or
 * s * inv_rms (simplified), times gamma (+ beta). Optional outputs: mean,
 * inv_std (or inv_rms) per row, and the sum s. */
typedef struct ctk_norm {
    int skip, gamma, beta, bias;   /* input slots, -1: none */
    int mean_out, inv_out, sum_out; /* output slots, -1: none */
    bool simplified;
} ctk_norm;

static const mp_rtensor *ctk_opt_in(const mp_kctx *k, int i) { return i >= 0 ? mp_kin(k, i) : NULL; }

static mp_rtensor *ctk_opt_out(mp_kctx *k, int i) {
    return i >= 0 && i < k->n_out && k->n->out[i] >= 0 && k->out[i].data ? &k->out[i] : NULL;
}

static mp_status ctk_norm_run(mp_kctx *k, const ctk_norm *c) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    const mp_rtensor *skip = ctk_opt_in(k, c->skip), *g = ctk_opt_in(k, c->gamma);
    const mp_rtensor *be = ctk_opt_in(k, c->beta), *bi = ctk_opt_in(k, c->bias);
    mp_rtensor *mo = ctk_opt_out(k, c->mean_out), *io = ctk_opt_out(k, c->inv_out), *so = ctk_opt_out(k, c->sum_out);
    int axis = c->skip >= 0 ? x->rank - 1 : mp_axis(mp_attr_i(k->n, "axis", -1), x->rank);
    if (axis < 0) return mp_kfail(k, MP_ERR_SHAPE, "axis out of range");
    double eps = mp_attr_f(k->n, "epsilon", 1e-5);
    int64_t rows = 1, len = 1;
    for (int i = 0; i < axis; i++) rows *= x->dims[i];
    for (int i = axis; i < x->rank; i++) len *= x->dims[i];
    double *s = malloc(sizeof(double) * (size_t)(len + 1));
    if (!s) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < len; j++) {
            int64_t e = r * len + j;
            double v = mp_kget_f(x->data, x->dtype, e);
            if (skip) v += mp_kget_f(skip->data, skip->dtype, e % skip->numel);
            if (bi) v += mp_kget_f(bi->data, bi->dtype, j % bi->numel);
            s[j] = v;
            sum += v;
            if (so) mp_kset_f(so->data, so->dtype, e, v);
        }
        double mean = c->simplified ? 0 : sum / (double)len;
        for (int64_t j = 0; j < len; j++) sq += (s[j] - mean) * (s[j] - mean);
        double inv = 1.0 / sqrt(sq / (double)len + eps);
        if (mo) mp_kset_f(mo->data, mo->dtype, r, mean);
        if (io) mp_kset_f(io->data, io->dtype, r, inv);
        for (int64_t j = 0; j < len; j++) {
            double v = (s[j] - mean) * inv;
            if (g) v *= mp_kget_f(g->data, g->dtype, j % g->numel);
            if (be) v += mp_kget_f(be->data, be->dtype, j % be->numel);
            mp_kset_f(y->data, y->dtype, r * len + j, v);
        }
    }
    free(s);
    return MP_OK;
}

mp_status ctk_simplified_ln(mp_kctx *k) {
    ctk_norm c = {-1, 1, -1, -1, -1, 1, -1, true};
    return ctk_norm_run(k, &c);
}

mp_status ctk_skipln(mp_kctx *k) {
    ctk_norm c = {1, 2, 3, 4, 1, 2, 3, false};
    return ctk_norm_run(k, &c);
}

mp_status ctk_skip_simplified_ln(mp_kctx *k) {
    ctk_norm c = {1, 2, -1, 3, 1, 2, 3, true};
    return ctk_norm_run(k, &c);
}

/* Gelu (erf), QuickGelu (x * sigmoid(alpha x)), BiasGelu (erf, after the
 * bias), FastGelu (tanh form, after the optional bias), BiasAdd (x + bias
 * + skip): element-wise with a bias along the last axis. */
typedef enum { CTK_GELU, CTK_QUICK, CTK_FAST, CTK_BIASADD } ctk_act;

static mp_status ctk_act_run(mp_kctx *k, ctk_act op) {
    const mp_rtensor *x = &k->in[0], *b = mp_kin(k, 1), *skip = op == CTK_BIASADD ? mp_kin(k, 2) : NULL;
    mp_rtensor *y = &k->out[0];
    double alpha = mp_attr_f(k->n, "alpha", 1.702);
    for (int64_t e = 0; e < x->numel; e++) {
        double v = mp_kget_f(x->data, x->dtype, e);
        if (b) v += mp_kget_f(b->data, b->dtype, e % b->numel);
        if (skip) v += mp_kget_f(skip->data, skip->dtype, e % skip->numel);
        switch (op) {
        case CTK_GELU: v = mp_s_gelu_erf(v); break;
        case CTK_QUICK: v = mp_s_swish(v, alpha); break;
        case CTK_FAST: v = mp_s_gelu_tanh(v); break;
        default: break;
        }
        mp_kset_f(y->data, y->dtype, e, v);
    }
    return MP_OK;
}

mp_status ctk_gelu(mp_kctx *k) { return ctk_act_run(k, CTK_GELU); }
mp_status ctk_quick_gelu(mp_kctx *k) { return ctk_act_run(k, CTK_QUICK); }
mp_status ctk_fast_gelu(mp_kctx *k) { return ctk_act_run(k, CTK_FAST); }
mp_status ctk_bias_add(mp_kctx *k) { return ctk_act_run(k, CTK_BIASADD); }

/* Tensor t as doubles, dequantized when scale is given: (t - zp) * scale
 * (scale and zero point scalar, or one per element of the last axis). */
static double *ctk_deq(mp_kctx *k, const mp_rtensor *t, const mp_rtensor *scale, const mp_rtensor *zp, mp_status *st) {
    double *p = malloc(sizeof(double) * (size_t)(t->numel + 1));
    if (!p) {
        *st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
        return NULL;
    }
    int64_t last = t->rank ? t->dims[t->rank - 1] : 1;
    for (int64_t e = 0; e < t->numel; e++) {
        double v = mp_kget_f(t->data, t->dtype, e);
        if (zp && zp->data) v -= mp_kget_f(zp->data, zp->dtype, zp->numel <= 1 ? 0 : e % last);
        if (scale && scale->data) v *= mp_kget_f(scale->data, scale->dtype, scale->numel <= 1 ? 0 : e % last);
        p[e] = v;
    }
    return p;
}

/* Y (doubles) into output 0: + bias along the last axis, then an
 * activation (NULL: none), then stored (quantized with ys/yz when given). */
static void ctk_store(mp_kctx *k, const double *y, const mp_rtensor *bias, const char *act, double alpha,
                      double beta, const mp_rtensor *ys, const mp_rtensor *yz) {
    mp_rtensor *o = &k->out[0];
    int64_t last = o->rank ? o->dims[o->rank - 1] : 1;
    double s = ys ? mp_kget_f(ys->data, ys->dtype, 0) : 1, z = yz ? mp_kget_f(yz->data, yz->dtype, 0) : 0;
    for (int64_t e = 0; e < o->numel; e++) {
        double v = y[e];
        if (bias) v += mp_kget_f(bias->data, bias->dtype, bias->numel <= 1 ? 0 : e % last);
        if (act && act[0]) v = mp_kact(act, v, alpha, beta);
        if (ys) mp_kquant_store(o->data, o->dtype, e, v / s + z);
        else mp_kset_f(o->data, o->dtype, e, v);
    }
}

/* A matrix product of dequantized operands (ctk_deq) into doubles. */
static mp_status ctk_qmatmul(mp_kctx *k, const mp_rtensor *a, const mp_rtensor *as, const mp_rtensor *az,
                             const mp_rtensor *b, const mp_rtensor *bs, const mp_rtensor *bz, double **y) {
    mp_status st = MP_OK;
    double *A = ctk_deq(k, a, as, az, &st), *B = st ? NULL : ctk_deq(k, b, bs, bz, &st);
    *y = st ? NULL : malloc(sizeof(double) * (size_t)(k->out[0].numel + 1));
    if (!st && !*y) st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    if (!st) mp_kmatmul(a, b, &k->out[0], false, A, B, *y, false, false);
    free(A), free(B);
    return st;
}

mp_status ctk_matmul_int_to_float(mp_kctx *k) {
    double *y = NULL;
    mp_status st = ctk_qmatmul(k, &k->in[0], mp_kin(k, 2), mp_kin(k, 4), &k->in[1], mp_kin(k, 3), mp_kin(k, 5), &y);
    if (!st) ctk_store(k, y, mp_kin(k, 6), NULL, 0, 0, NULL, NULL);
    free(y);
    return st;
}

mp_status ctk_matmul_integer16(mp_kctx *k) {
    double *y = NULL;
    mp_status st = ctk_qmatmul(k, &k->in[0], NULL, NULL, &k->in[1], NULL, NULL, &y);
    if (!st) ctk_store(k, y, NULL, NULL, 0, 0, NULL, NULL);
    free(y);
    return st;
}

/* DynamicQuantizeMatMul: A quantized to uint8 on the fly (as
 * DynamicQuantizeLinear), then the integer product rescaled. */
mp_status ctk_dyn_quant_matmul(mp_kctx *k) {
    const mp_rtensor *a = &k->in[0];
    float scale;
    double zp;
    mp_kdynq_params(a, &scale, &zp);
    if (isnan(zp)) zp = 0; /* an infinity in A: the integer product needs a zero point */
    uint8_t *q = malloc((size_t)a->numel + 1);
    if (!q) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t e = 0; e < a->numel; e++)
        mp_kquant_store(q, MP_DT_UINT8, e, scale != 0 ? nearbyintf((float)mp_kget_f(a->data, a->dtype, e) / scale) + zp : zp);
    mp_rtensor qa = {q, MP_DT_UINT8, a->rank, a->dims, a->numel};
    float sc = scale;
    uint8_t zb = (uint8_t)zp;
    mp_rtensor st_s = {&sc, MP_DT_FLOAT, 0, NULL, 1}, st_z = {&zb, MP_DT_UINT8, 0, NULL, 1};
    double *y = NULL;
    mp_status st = ctk_qmatmul(k, &qa, &st_s, &st_z, &k->in[1], mp_kin(k, 2), mp_kin(k, 3), &y);
    if (!st) ctk_store(k, y, mp_kin(k, 4), NULL, 0, 0, NULL, NULL);
    free(y), free(q);
    return st;
}

/* MatMulNBits: B's blocks dequantized ((q - zero point) * scale; zero
 * point 2^(bits-1) when absent), then A @ W^T (+ bias). */
mp_status ctk_matmul_nbits(mp_kctx *k) {
    const mp_rtensor *a = &k->in[0], *b = &k->in[1], *sc = &k->in[2], *zp = mp_kin(k, 3), *bias = mp_kin(k, 5);
    int64_t K = mp_attr_i(k->n, "K", 0), N = mp_attr_i(k->n, "N", 0), bits = mp_attr_i(k->n, "bits", 4);
    int64_t blk = mp_attr_i(k->n, "block_size", 0);
    if (mp_kin(k, 4)) return mp_kfail(k, MP_ERR_UNSUPPORTED, "g_idx");
    if (K <= 0 || N <= 0 || blk <= 0 || (bits != 2 && bits != 4 && bits != 8))
        return mp_kfail(k, MP_ERR_SHAPE, "bad K, N, bits or block_size");
    int64_t kb = (K + blk - 1) / blk, blob = blk * bits / 8, per = 8 / bits, mask = (1 << bits) - 1;
    int64_t zrow = (kb * bits + 7) / 8;
    if (b->numel != N * kb * blob || sc->numel != N * kb || a->numel % K || (bias && bias->numel != N) ||
        (zp && zp->numel != (zp->dtype == MP_DT_UINT8 ? N * zrow : N * kb)))
        return mp_kfail(k, MP_ERR_SHAPE, "B, scales, zero points or bias do not match K, N, bits and block_size");
    double *W = malloc(sizeof(double) * (size_t)(N * K + 1)), *A = malloc(sizeof(double) * (size_t)(a->numel + 1));
    double *Y = malloc(sizeof(double) * (size_t)(k->out[0].numel + 1));
    mp_status st = MP_OK;
    if (!W || !A || !Y) {
        st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t q = 0; q < kb; q++) {
            double s = mp_kget_f(sc->data, sc->dtype, n * kb + q), z = (double)(1 << (bits - 1));
            if (zp && zp->dtype == MP_DT_UINT8) {
                uint8_t byte = ((const uint8_t *)zp->data)[n * zrow + q / per];
                z = (double)((byte >> ((q % per) * bits)) & mask);
            } else if (zp) {
                z = mp_kget_f(zp->data, zp->dtype, n * kb + q);
            }
            for (int64_t j = 0; j < blk && q * blk + j < K; j++) {
                uint8_t byte = ((const uint8_t *)b->data)[(n * kb + q) * blob + j / per];
                double v = (double)((byte >> ((j % per) * bits)) & mask);
                W[n * K + q * blk + j] = (v - z) * s;
            }
        }
    mp_kconvert(A, MP_DT_DOUBLE, a->data, a->dtype, a->numel);
    int64_t M = a->numel / K;
    mp_kgemm_f64(M, N, K, A, K, 1, W, 1, K, Y, N, false);
    ctk_store(k, Y, bias, NULL, 0, 0, NULL, NULL);
done:
    free(W), free(A), free(Y);
    return st;
}

/* FusedGemm: Gemm, then the activation in place. */
mp_status ctk_fused_gemm(mp_kctx *k) {
    mp_status st = mp_kgemm_run(k);
    const char *act = mp_attr_s(k->n, "activation", "");
    double al = mp_attr_f(k->n, "activation_alpha", 0.01), be = mp_attr_f(k->n, "activation_beta", 0.5);
    mp_rtensor *y = &k->out[0];
    for (int64_t e = 0; !st && act[0] && e < y->numel; e++)
        mp_kset_f(y->data, y->dtype, e, mp_kact(act, mp_kget_f(y->data, y->dtype, e), al, be));
    return st;
}

/* FusedConv: Conv (+ Z), then the activation in place. */
mp_status ctk_fused_conv(mp_kctx *k) {
    int n_in = k->n_in;
    k->n_in = n_in < 3 ? n_in : 3;
    mp_status st = mp_kconv(k);
    k->n_in = n_in;
    const mp_rtensor *z = mp_kin(k, 3);
    if (!st && z && z->numel != k->out[0].numel) st = mp_kfail(k, MP_ERR_SHAPE, "Z must be shaped like Y");
    const char *act = mp_attr_s(k->n, "activation", "");
    const double *ap;
    int na = mp_attr_floats(k->n, "activation_params", &ap);
    double al = na > 0 ? ap[0] : 0.01, be = na > 1 ? ap[1] : 0.5;
    mp_rtensor *y = &k->out[0];
    for (int64_t e = 0; !st && e < y->numel; e++) {
        double v = mp_kget_f(y->data, y->dtype, e);
        if (z) v += mp_kget_f(z->data, z->dtype, e);
        if (act[0]) v = mp_kact(act, v, al, be);
        mp_kset_f(y->data, y->dtype, e, v);
    }
    return st;
}

/* GemmFastGelu: FastGelu(X @ W + bias). */
mp_status ctk_gemm_fast_gelu(mp_kctx *k) {
    double *y = NULL;
    mp_status st = ctk_qmatmul(k, &k->in[0], NULL, NULL, &k->in[1], NULL, NULL, &y);
    const mp_rtensor *b = mp_kin(k, 2);
    mp_rtensor *o = &k->out[0];
    int64_t last = o->rank ? o->dims[o->rank - 1] : 1;
    for (int64_t e = 0; !st && e < o->numel; e++) {
        double v = y[e] + (b ? mp_kget_f(b->data, b->dtype, e % last) : 0);
        mp_kset_f(o->data, o->dtype, e, mp_s_gelu_tanh(v));
    }
    free(y);
    return st;
}

/* QLinearAdd / QLinearMul / MulInteger: dequantize, broadcast op,
 * requantize (MulInteger: int32 product of the shifted operands). */
static mp_status ctk_qbinary(mp_kctx *k, int op) {
    bool mi = op == 2;
    const mp_rtensor *a = &k->in[0], *b = &k->in[mi ? 2 : 3];
    mp_status st = MP_OK;
    double *A = ctk_deq(k, a, mi ? NULL : mp_kin(k, 1), mp_kin(k, mi ? 1 : 2), &st);
    double *B = st ? NULL : ctk_deq(k, b, mi ? NULL : mp_kin(k, 4), mp_kin(k, mi ? 3 : 5), &st);
    double *Y = st ? NULL : malloc(sizeof(double) * (size_t)(k->out[0].numel + 1));
    if (!st && !Y) st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    if (!st) {
        int ranks[2] = {a->rank, b->rank};
        const int64_t *dims[2] = {a->dims, b->dims};
        mp_kbcast it;
        mp_kbcast_init(&it, k->out[0].rank, k->out[0].dims, 2, ranks, dims);
        int64_t e = 0;
        for (int64_t r = 0; r < it.rows; r++, mp_kbcast_next(&it))
            for (int64_t j = 0; j < it.len; j++, e++) {
                double x = A[it.off[0] + j * it.step[0]], w = B[it.off[1] + j * it.step[1]];
                Y[e] = op == 0 ? x + w : x * w;
            }
        ctk_store(k, Y, NULL, NULL, 0, 0, mi ? NULL : mp_kin(k, 6), mi ? NULL : mp_kin(k, 7));
    }
    free(A), free(B), free(Y);
    return st;
}

mp_status ctk_qlinear_add(mp_kctx *k) { return ctk_qbinary(k, 0); }
mp_status ctk_qlinear_mul(mp_kctx *k) { return ctk_qbinary(k, 1); }
mp_status ctk_mul_integer(mp_kctx *k) { return ctk_qbinary(k, 2); }

/* QLinearSigmoid / QLinearLeakyRelu: dequantize, activate, requantize. */
mp_status ctk_qunary(mp_kctx *k) {
    mp_status st = MP_OK;
    double *X = ctk_deq(k, &k->in[0], mp_kin(k, 1), mp_kin(k, 2), &st);
    if (!st) {
        const char *act = !strcmp(k->n->op, "QLinearSigmoid") ? "Sigmoid" : "LeakyRelu";
        ctk_store(k, X, NULL, act, mp_attr_f(k->n, "alpha", 0.01), 0, mp_kin(k, 3), mp_kin(k, 4));
    }
    free(X);
    return st;
}

/* Inverse of [..., n, n]: Gauss-Jordan with partial pivoting in double. */
mp_status ctk_inverse(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    int64_t n = x->dims[x->rank - 1], mats = n ? x->numel / (n * n) : 0;
    double *a = malloc(sizeof(double) * (size_t)(2 * n * n + 1));
    if (!a) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t q = 0; q < mats; q++) {
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < 2 * n; j++)
                a[i * 2 * n + j] = j < n ? mp_kget_f(x->data, x->dtype, q * n * n + i * n + j) : (j - n == i);
        for (int64_t c = 0; c < n; c++) {
            int64_t p = c;
            for (int64_t r = c + 1; r < n; r++)
                if (fabs(a[r * 2 * n + c]) > fabs(a[p * 2 * n + c])) p = r;
            if (a[p * 2 * n + c] == 0) {
                free(a);
                return mp_kfail(k, MP_ERR_USAGE, "matrix %lld is singular", (long long)q);
            }
            for (int64_t j = 0; j < 2 * n && p != c; j++) {
                double t = a[c * 2 * n + j];
                a[c * 2 * n + j] = a[p * 2 * n + j];
                a[p * 2 * n + j] = t;
            }
            double d = a[c * 2 * n + c];
            for (int64_t j = 0; j < 2 * n; j++) a[c * 2 * n + j] /= d;
            for (int64_t r = 0; r < n; r++) {
                if (r == c) continue;
                double f = a[r * 2 * n + c];
                for (int64_t j = 0; j < 2 * n; j++) a[r * 2 * n + j] -= f * a[c * 2 * n + j];
            }
        }
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) mp_kset_f(k->out[0].data, k->out[0].dtype, q * n * n + i * n + j, a[i * 2 * n + n + j]);
    }
    free(a);
    return MP_OK;
}

/* BiasSplitGelu: s = x + bias; y = s[..., :D/2] * Gelu(s[..., D/2:]). */
mp_status ctk_bias_split_gelu(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *b = &k->in[1];
    int64_t D = x->dims[x->rank - 1], h = D / 2, rows = D ? x->numel / D : 0;
    if (b->numel < D || k->out[0].numel != rows * h) return mp_kfail(k, MP_ERR_SHAPE, "bias or output size");
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < h; j++) {
            double l = mp_kget_f(x->data, x->dtype, r * D + j) + mp_kget_f(b->data, b->dtype, j);
            double g = mp_kget_f(x->data, x->dtype, r * D + h + j) + mp_kget_f(b->data, b->dtype, h + j);
            mp_kset_f(k->out[0].data, k->out[0].dtype, r * h + j, l * mp_s_gelu_erf(g));
        }
    return MP_OK;
}

/* BiasSoftmax: softmax(data + bias) over the dims from `axis` (default 1)
 * on, the bias broadcast onto data. */
mp_status ctk_bias_softmax(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *b = &k->in[1];
    mp_rtensor *y = &k->out[0];
    int axis = mp_axis(mp_attr_i(k->n, "axis", 1), x->rank);
    if (axis < 0) return mp_kfail(k, MP_ERR_SHAPE, "axis out of range");
    int ranks[2] = {x->rank, b->rank};
    const int64_t *dims[2] = {x->dims, b->dims};
    mp_kbcast it;
    mp_kbcast_init(&it, x->rank, x->dims, 2, ranks, dims);
    int64_t e = 0;
    for (int64_t r = 0; r < it.rows; r++, mp_kbcast_next(&it))
        for (int64_t j = 0; j < it.len; j++, e++)
            mp_kset_f(y->data, y->dtype, e,
                      mp_kget_f(x->data, x->dtype, it.off[0] + j * it.step[0]) +
                          mp_kget_f(b->data, b->dtype, it.off[1] + j * it.step[1]));
    int64_t len = 1;
    for (int i = axis; i < x->rank; i++) len *= x->dims[i];
    double *row = malloc(sizeof(double) * (size_t)(len > 0 ? len : 1));
    if (!row) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; len && r < y->numel / len; r++) {
        for (int64_t j = 0; j < len; j++) row[j] = mp_kget_f(y->data, y->dtype, r * len + j);
        mp_s_softmax_row(row, len, false);
        for (int64_t j = 0; j < len; j++) mp_kset_f(y->data, y->dtype, r * len + j, row[j]);
    }
    free(row);
    return MP_OK;
}

/* Scaled dot-product attention over heads: q [B, N, S, dk], k [B, N, L,
 * dk], v [B, N, L, dv] (doubles) -> out [B, S, N * dv]. mask(b, s, l)
 * false drops a key; causal drops l > s + (L - S). */
typedef struct ctk_att {
    int64_t B, N, S, L, dk, dv;
    double scale;
    bool causal;
    const mp_rtensor *kpm;     /* key padding: [B] lengths or [B, L] 1/0 */
    const mp_rtensor *bias;    /* additive [B or 1, N or 1, S, L] */
} ctk_att;

static void ctk_sdpa(const ctk_att *a, const double *q, const double *kk, const double *v, double *out) {
    /* per row: the probabilities, the bias, the kept keys, the output */
    double *w = malloc(sizeof(double) * (size_t)(2 * a->L + a->dv + 1));
    uint8_t *keep = malloc((size_t)a->L + 1);
    if (!w || !keep) {
        free(w), free(keep);
        return;
    }
    double *add = w + a->L, *o = add + a->L;
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t h = 0; h < a->N; h++)
            for (int64_t s = 0; s < a->S; s++) {
                for (int64_t l = 0; l < a->L; l++) {
                    if (a->bias) {
                        const mp_rtensor *bt = a->bias;
                        int64_t bb = bt->dims[0] == 1 ? 0 : b, hh = bt->dims[1] == 1 ? 0 : h;
                        add[l] = mp_kget_f(bt->data, bt->dtype, ((bb * bt->dims[1] + hh) * a->S + s) * a->L + l);
                    }
                    bool k1 = !(a->causal && l > s + (a->L - a->S));
                    if (a->kpm && a->kpm->rank == 1) k1 = k1 && l < mp_kget_i(a->kpm->data, a->kpm->dtype, b);
                    else if (a->kpm) k1 = k1 && mp_kget_i(a->kpm->data, a->kpm->dtype, b * a->L + l) != 0;
                    keep[l] = k1;
                }
                /* a dropped key's score biased by -10000, as ONNX Runtime does */
                mp_ksdpa_row(q + ((b * a->N + h) * a->S + s) * a->dk, kk + (b * a->N + h) * a->L * a->dk,
                             v + (b * a->N + h) * a->L * a->dv, a->L, a->dk, a->dv, a->scale, 0,
                             a->bias ? add : NULL, keep, -10000.0, NULL, NULL, w, o);
                memcpy(out + ((b * a->S + s) * a->N + h) * a->dv, o, sizeof(double) * (size_t)a->dv);
            }
    free(w), free(keep);
}

/* [B, T, N * d] (+ bias[off..]) -> [B, N, T, d] as doubles. */
static void ctk_heads(const double *x, int64_t B, int64_t T, int64_t N, int64_t d, int64_t row, int64_t off,
                      const double *bias, double *out) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < N; h++)
                for (int64_t i = 0; i < d; i++)
                    out[((b * N + h) * T + t) * d + i] =
                        x[(b * T + t) * row + off + h * d + i] + (bias ? bias[off + h * d + i] : 0);
}

/* Attention: input @ weights + bias -> Q, K, V; SDPA; mask_index as key
 * padding (lengths [B] or a [B, L] mask); no past state. */
mp_status ctk_attention(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *w = &k->in[1], *bias = mp_kin(k, 2), *mask = mp_kin(k, 3);
    if (mp_kin(k, 4) || (k->n_out > 1 && k->out[1].data)) return mp_kfail(k, MP_ERR_UNSUPPORTED, "past state");
    if (mask && mask->rank > 2) return mp_kfail(k, MP_ERR_UNSUPPORTED, "mask of rank %d", mask->rank);
    int64_t B = x->dims[0], S = x->dims[1], Hin = x->dims[2], N = mp_attr_i(k->n, "num_heads", 1), tot = w->dims[1];
    const int64_t *qkv;
    int nq = mp_attr_ints(k->n, "qkv_hidden_sizes", &qkv);
    int64_t hq = nq == 3 ? qkv[0] : tot / 3, hk = nq == 3 ? qkv[1] : tot / 3, hv = nq == 3 ? qkv[2] : tot / 3;
    if (x->rank != 3 || w->rank != 2 || w->dims[0] != Hin || N <= 0 || hq % N || hk % N || hv % N || hq != hk ||
        hq + hk + hv != tot || (bias && bias->numel != tot) || k->out[0].numel != B * S * hv ||
        (mask && mask->numel != B && mask->numel != B * S))
        return mp_kfail(k, MP_ERR_SHAPE, "input, weights, bias and mask sizes do not agree");
    mp_status st = MP_OK;
    double *X = ctk_deq(k, x, NULL, NULL, &st), *W = st ? NULL : ctk_deq(k, w, NULL, NULL, &st);
    double *bb = st || !bias ? NULL : ctk_deq(k, bias, NULL, NULL, &st);
    double *P = malloc(sizeof(double) * (size_t)(B * S * tot + 1)), *q = malloc(sizeof(double) * (size_t)(B * S * hq + 1));
    double *kk = malloc(sizeof(double) * (size_t)(B * S * hk + 1)), *v = malloc(sizeof(double) * (size_t)(B * S * hv + 1));
    double *o = malloc(sizeof(double) * (size_t)(B * S * hv + 1));
    if (!st && (!P || !q || !kk || !v || !o)) st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    if (!st) {
        mp_kgemm_f64(B * S, tot, Hin, X, Hin, 1, W, tot, 1, P, tot, false);
        ctk_heads(P, B, S, N, hq / N, tot, 0, bb, q);
        ctk_heads(P, B, S, N, hk / N, tot, hq, bb, kk);
        ctk_heads(P, B, S, N, hv / N, tot, hq + hk, bb, v);
        double sc = mp_attr_f(k->n, "scale", 0);
        ctk_att a = {B, N, S, S, hq / N, hv / N, sc != 0 ? sc : 1.0 / sqrt((double)(hq / N)),
                     mp_attr_i(k->n, "unidirectional", 0) != 0, mask, mp_kin(k, 5)};
        ctk_sdpa(&a, q, kk, v, o);
        ctk_store(k, o, NULL, NULL, 0, 0, NULL, NULL);
    }
    free(X), free(W), free(bb), free(P), free(q), free(kk), free(v), free(o);
    return st;
}

/* MultiHeadAttention with separate 3-D query [B, S, Hq], key [B, L, Hk],
 * value [B, L, Hv]; optional bias [Hq + Hk + Hv], key_padding_mask,
 * attention_bias; no packed forms, no past state. */
mp_status ctk_mha(mp_kctx *k) {
    const mp_rtensor *q = &k->in[0], *kx = mp_kin(k, 1), *vx = mp_kin(k, 2), *bias = mp_kin(k, 3);
    if (!kx || !vx || q->rank != 3 || kx->rank != 3 || vx->rank != 3 || mp_kin(k, 6))
        return mp_kfail(k, MP_ERR_UNSUPPORTED, "packed, cached or past forms");
    int64_t B = q->dims[0], S = q->dims[1], L = kx->dims[1], N = mp_attr_i(k->n, "num_heads", 1);
    int64_t hq = q->dims[2], hk = kx->dims[2], hv = vx->dims[2];
    const mp_rtensor *kpm = mp_kin(k, 4), *ab = mp_kin(k, 5);
    if (N <= 0 || hq % N || hk % N || hv % N || hq != hk || kx->dims[0] != B || vx->dims[0] != B || vx->dims[1] != L ||
        (bias && bias->numel != hq + hk + hv) || k->out[0].numel != B * S * hv ||
        (kpm && kpm->numel != B && kpm->numel != B * L) ||
        (ab && (ab->rank != 4 || ab->numel != (ab->dims[0] == 1 ? 1 : B) * (ab->dims[1] == 1 ? 1 : N) * S * L)))
        return mp_kfail(k, MP_ERR_SHAPE, "query, key, value, bias and mask sizes do not agree");
    mp_status st = MP_OK;
    double *Q = ctk_deq(k, q, NULL, NULL, &st), *K = st ? NULL : ctk_deq(k, kx, NULL, NULL, &st);
    double *V = st ? NULL : ctk_deq(k, vx, NULL, NULL, &st), *bb = st || !bias ? NULL : ctk_deq(k, bias, NULL, NULL, &st);
    double *qh = malloc(sizeof(double) * (size_t)(B * S * hq + 1)), *kh = malloc(sizeof(double) * (size_t)(B * L * hk + 1));
    double *vh = malloc(sizeof(double) * (size_t)(B * L * hv + 1)), *o = malloc(sizeof(double) * (size_t)(B * S * hv + 1));
    if (!st && (!qh || !kh || !vh || !o)) st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    if (!st) {
        ctk_heads(Q, B, S, N, hq / N, hq, 0, bb, qh);
        ctk_heads(K, B, L, N, hk / N, hk, 0, bb ? bb + hq : NULL, kh);
        ctk_heads(V, B, L, N, hv / N, hv, 0, bb ? bb + hq + hk : NULL, vh);
        double sc = mp_attr_f(k->n, "scale", 0);
        ctk_att a = {B, N, S, L, hq / N, hv / N, sc != 0 ? sc : 1.0 / sqrt((double)(hq / N)),
                     mp_attr_i(k->n, "unidirectional", 0) != 0, mp_kin(k, 4), mp_kin(k, 5)};
        ctk_sdpa(&a, qh, kh, vh, o);
        ctk_store(k, o, NULL, NULL, 0, 0, NULL, NULL);
    }
    free(Q), free(K), free(V), free(bb), free(qh), free(kh), free(vh), free(o);
    return st;
}

/* EmbedLayerNormalization: LayerNorm(word[ids] + position[pos] (+
 * segment[seg])); mask_index = the mask's row sums. */
mp_status ctk_embed_ln(mp_kctx *k) {
    const mp_rtensor *ids = &k->in[0], *seg = mp_kin(k, 1), *we = &k->in[2], *pe = &k->in[3];
    const mp_rtensor *se = mp_kin(k, 4), *g = &k->in[5], *be = &k->in[6], *mask = mp_kin(k, 7), *pid = mp_kin(k, 8);
    mp_rtensor *y = &k->out[0];
    int64_t B = ids->dims[0], S = ids->dims[1], H = we->dims[1];
    if (ids->rank != 2 || we->rank != 2 || pe->rank != 2 || pe->dims[1] != H || (se && (se->rank != 2 || se->dims[1] != H)) ||
        g->numel < H || be->numel < H || (seg && seg->numel != B * S) || (mask && mask->numel != B * S) ||
        (pid && pid->numel != S && pid->numel != B * S) || y->numel != B * S * H)
        return mp_kfail(k, MP_ERR_SHAPE, "ids, embeddings, gamma, beta and mask sizes do not agree");
    double eps = mp_attr_f(k->n, "epsilon", 1e-12);
    double *row = malloc(sizeof(double) * (size_t)(H + 1));
    if (!row) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    mp_rtensor *sum = k->n_out > 2 && k->out[2].data ? &k->out[2] : NULL;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) {
            int64_t t = mp_kget_i(ids->data, ids->dtype, b * S + s), p = s;
            if (pid) p = mp_kget_i(pid->data, pid->dtype, pid->numel == S ? s : b * S + s);
            int64_t sg = seg ? mp_kget_i(seg->data, seg->dtype, b * S + s) : 0;
            if (t < 0 || t >= we->dims[0] || p < 0 || p >= pe->dims[0] || (se && (sg < 0 || sg >= se->dims[0]))) {
                free(row);
                return mp_kfail(k, MP_ERR_USAGE, "an index is out of its table");
            }
            double mean = 0, var = 0;
            for (int64_t j = 0; j < H; j++) {
                row[j] = mp_kget_f(we->data, we->dtype, t * H + j) + mp_kget_f(pe->data, pe->dtype, p * H + j) +
                         (se ? mp_kget_f(se->data, se->dtype, sg * H + j) : 0);
                if (sum) mp_kset_f(sum->data, sum->dtype, (b * S + s) * H + j, row[j]);
                mean += row[j];
            }
            mean /= (double)H;
            for (int64_t j = 0; j < H; j++) var += (row[j] - mean) * (row[j] - mean);
            double inv = 1.0 / sqrt(var / (double)H + eps);
            for (int64_t j = 0; j < H; j++)
                mp_kset_f(y->data, y->dtype, (b * S + s) * H + j,
                          (row[j] - mean) * inv * mp_kget_f(g->data, g->dtype, j) + mp_kget_f(be->data, be->dtype, j));
        }
    if (k->n_out > 1 && k->out[1].data)
        for (int64_t b = 0; b < B; b++) {
            int64_t c = 0;
            for (int64_t s = 0; s < S; s++) c += mask ? mp_kget_i(mask->data, mask->dtype, b * S + s) != 0 : 1;
            mp_kset_i(k->out[1].data, k->out[1].dtype, b, c);
        }
    free(row);
    return MP_OK;
}

/* RotaryEmbedding: input [B, S, N*h] or [B, N, S, h]; each pair of the
 * first rot dims (halves, or adjacent when interleaved) rotated by the
 * cached cos/sin at the token's position (position_ids [B, S], or one
 * offset). */
mp_status ctk_rope(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *pos = &k->in[1], *cs = &k->in[2], *sn = &k->in[3];
    mp_rtensor *y = &k->out[0];
    bool inter = mp_attr_i(k->n, "interleaved", 0) != 0, four = x->rank == 4;
    int64_t B = x->dims[0], S = four ? x->dims[2] : x->dims[1], N = four ? x->dims[1] : mp_attr_i(k->n, "num_heads", 0);
    int64_t half = cs->dims[cs->rank - 1];
    int64_t h = four ? x->dims[3] : (N > 0 ? x->dims[2] / N : 2 * half);
    if (!four && N <= 0) N = x->dims[2] / h;
    int64_t rot = mp_attr_i(k->n, "rotary_embedding_dim", 0);
    if (rot <= 0) rot = 2 * half;
    if ((x->rank != 3 && x->rank != 4) || cs->rank != 2 || sn->rank != 2 || sn->dims[1] != half || h <= 0 ||
        N <= 0 || (!four && N * h != x->dims[2]) || rot > h || rot / 2 > half || y->numel != x->numel ||
        (pos->numel != 1 && pos->numel != B * S))
        return mp_kfail(k, MP_ERR_SHAPE, "input, position_ids, caches and rotary_embedding_dim do not fit "
                                         "each other");
    double *row = malloc(sizeof(double) * (size_t)(2 * rot + 1));
    if (!row) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    double *c = row + rot, *si = c + rot / 2;
    for (int64_t b = 0; b < B; b++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t p = pos->numel == 1 ? mp_kget_i(pos->data, pos->dtype, 0) + s : mp_kget_i(pos->data, pos->dtype, b * S + s);
                if (p < 0 || p >= cs->dims[0] || p >= sn->dims[0] || rot / 2 > half) {
                    free(row);
                    return mp_kfail(k, MP_ERR_USAGE, "position %lld is outside the cos/sin caches", (long long)p);
                }
                int64_t base = four ? ((b * N + n) * S + s) * h : ((b * S + s) * N + n) * h;
                for (int64_t i = rot; i < h; i++) mp_kcopy1(y->data, base + i, x->data, base + i, mp_kesize(x->dtype));
                for (int64_t i = 0; i < rot; i++) row[i] = mp_kget_f(x->data, x->dtype, base + i);
                for (int64_t i = 0; i < rot / 2; i++)
                    c[i] = mp_kget_f(cs->data, cs->dtype, p * half + i), si[i] = mp_kget_f(sn->data, sn->dtype, p * half + i);
                mp_krope(row, rot, inter, c, si);
                for (int64_t i = 0; i < rot; i++) mp_kset_f(y->data, y->dtype, base + i, row[i]);
            }
    free(row);
    return MP_OK;
}

/* The quantized wrappers: dequantize the operands to fp32, run the
 * default-domain operator's portable kernel (`op` at `opset`, this node's
 * attributes) on them, quantize the result with (ys, yz). */
static mp_status ctk_qwrap(mp_kctx *k, const char *opname, int opset, int n, const mp_rtensor *const *q,
                           const mp_rtensor *const *sc, const mp_rtensor *const *zp, const mp_rtensor *ys,
                           const mp_rtensor *yz) {
    const mp_op *op = mp_op_find("", opname, opset);
    if (!op || !op->run) return mp_kfail(k, MP_ERR_UNSUPPORTED, "no %s kernel", opname);
    mp_rtensor in[16], out = k->out[0];
    void *bufs[16] = {0};
    mp_status st = MP_OK;
    if (n > 16) return mp_kfail(k, MP_ERR_UNSUPPORTED, "more than 16 operands");
    for (int i = 0; !st && i < n; i++) {
        in[i] = *q[i];
        if (!sc[i]) continue; /* a condition: as is */
        float *f = malloc(sizeof(float) * (size_t)(q[i]->numel + 1));
        if (!f) {
            st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
            break;
        }
        double s = mp_kget_f(sc[i]->data, sc[i]->dtype, 0), z = zp[i] ? mp_kget_f(zp[i]->data, zp[i]->dtype, 0) : 0;
        for (int64_t e = 0; e < q[i]->numel; e++) f[e] = (float)((mp_kget_f(q[i]->data, q[i]->dtype, e) - z) * s);
        bufs[i] = f;
        in[i].data = f;
        in[i].dtype = MP_DT_FLOAT;
    }
    float *yf = st ? NULL : malloc(sizeof(float) * (size_t)(out.numel + 1));
    if (!st && !yf) st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    if (!st) {
        mp_node tmp = *k->n;
        int ins[16];
        for (int i = 0; i < n; i++) ins[i] = 0;
        tmp.op = opname, tmp.domain = "", tmp.opset = opset, tmp.n_in = n, tmp.in = ins, tmp.n_out = 1;
        out.data = yf;
        out.dtype = MP_DT_FLOAT;
        mp_kctx kk = {.n = &tmp, .g = k->g, .ex = NULL, .n_in = n, .n_out = 1, .in = in, .out = &out, .threads = 1};
        st = mp_krun_node(op, &kk);
    }
    if (!st) {
        double s = mp_kget_f(ys->data, ys->dtype, 0), z = yz ? mp_kget_f(yz->data, yz->dtype, 0) : 0;
        float fs = (float)s; /* in fp32, as ONNX Runtime quantizes */
        for (int64_t e = 0; e < out.numel; e++)
            mp_kquant_store(k->out[0].data, k->out[0].dtype, e, nearbyintf(yf[e] / fs) + z);
    }
    for (int i = 0; i < n; i++) free(bufs[i]);
    free(yf);
    return st;
}

mp_status ctk_qlinear_softmax(mp_kctx *k) {
    const mp_rtensor *q[1] = {&k->in[0]}, *s[1] = {&k->in[1]}, *z[1] = {mp_kin(k, 2)};
    int opset = (int)mp_attr_i(k->n, "opset", 13);
    return ctk_qwrap(k, "Softmax", opset >= 13 ? 13 : 11, 1, q, s, z, &k->in[3], mp_kin(k, 4));
}

mp_status ctk_qlinear_reduce_mean(mp_kctx *k) {
    const mp_rtensor *q[1] = {&k->in[0]}, *s[1] = {&k->in[1]}, *z[1] = {mp_kin(k, 2)};
    return ctk_qwrap(k, "ReduceMean", 13, 1, q, s, z, &k->in[3], mp_kin(k, 4));
}

mp_status ctk_qlinear_where(mp_kctx *k) {
    const mp_rtensor *q[3] = {&k->in[0], &k->in[1], &k->in[4]}, *s[3] = {NULL, &k->in[2], &k->in[5]};
    const mp_rtensor *z[3] = {NULL, mp_kin(k, 3), mp_kin(k, 6)};
    return ctk_qwrap(k, "Where", 16, 3, q, s, z, &k->in[7], mp_kin(k, 8));
}

mp_status ctk_qlinear_concat(mp_kctx *k) {
    int n = (k->n_in - 2) / 3;
    const mp_rtensor *q[16], *s[16], *z[16];
    if (n < 1 || n > 16) return mp_kfail(k, MP_ERR_UNSUPPORTED, "%d inputs", n);
    for (int i = 0; i < n; i++) q[i] = &k->in[2 + 3 * i], s[i] = &k->in[3 + 3 * i], z[i] = mp_kin(k, 4 + 3 * i);
    return ctk_qwrap(k, "Concat", 13, n, q, s, z, &k->in[0], mp_kin(k, 1));
}

/* QLinearGlobalAveragePool: NCHW through GlobalAveragePool; channels_last
 * ([N, H, W, C]) averaged here. */
mp_status ctk_qlinear_gap(mp_kctx *k) {
    const mp_rtensor *q[1] = {&k->in[0]}, *s[1] = {&k->in[1]}, *z[1] = {mp_kin(k, 2)};
    if (!mp_attr_i(k->n, "channels_last", 0))
        return ctk_qwrap(k, "GlobalAveragePool", 1, 1, q, s, z, &k->in[3], mp_kin(k, 4));
    const mp_rtensor *x = &k->in[0];
    int64_t N = x->dims[0], C = x->dims[x->rank - 1], sp = N * C != 0 ? x->numel / (N * C) : 0;
    double xs = mp_kget_f(s[0]->data, s[0]->dtype, 0), xz = z[0] ? mp_kget_f(z[0]->data, z[0]->dtype, 0) : 0;
    double ysv = mp_kget_f(k->in[3].data, k->in[3].dtype, 0), yzv = mp_kin(k, 4) ? mp_kget_f(k->in[4].data, k->in[4].dtype, 0) : 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            double acc = 0;
            for (int64_t p = 0; p < sp; p++) acc += mp_kget_f(x->data, x->dtype, (n * sp + p) * C + c) - xz;
            mp_kquant_store(k->out[0].data, k->out[0].dtype, n * C + c, (sp ? acc / (double)sp : 0) * xs / ysv + yzv);
        }
    return MP_OK;
}

/* GroupNorm (com.microsoft): channels_last (default 1) or NCHW; groups;
 * optional SiLU (activation = 1). */
mp_status ctk_groupnorm(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *g = &k->in[1], *b = &k->in[2];
    mp_rtensor *y = &k->out[0];
    bool last = mp_attr_i(k->n, "channels_last", 1) != 0, silu = mp_attr_i(k->n, "activation", 0) != 0;
    int64_t G = mp_attr_i(k->n, "groups", 1), N = x->dims[0], C = last ? x->dims[x->rank - 1] : x->dims[1];
    double eps = mp_attr_f(k->n, "epsilon", 1e-5);
    if (G < 1 || C % G) return mp_kfail(k, MP_ERR_SHAPE, "groups does not divide the channels");
    int64_t sp = N * C != 0 ? x->numel / (N * C) : 0, cg = C / G;
    if (g->numel < C || b->numel < C) return mp_kfail(k, MP_ERR_SHAPE, "gamma and beta must hold one value per channel");
    for (int64_t n = 0; n < N; n++)
        for (int64_t gi = 0; gi < G; gi++) {
            double s = 0, s2 = 0, cnt = (double)(cg * sp);
            for (int pass = 0; pass < 3; pass++) {
                double mean = cnt ? s / cnt : 0, inv = 1.0 / sqrt((cnt ? s2 / cnt : 0) + eps);
                for (int64_t c = gi * cg; c < (gi + 1) * cg; c++)
                    for (int64_t p = 0; p < sp; p++) {
                        int64_t at = last ? (n * sp + p) * C + c : (n * C + c) * sp + p;
                        double v = mp_kget_f(x->data, x->dtype, at);
                        if (pass == 0) s += v;
                        else if (pass == 1) s2 += (v - mean) * (v - mean);
                        else {
                            double o = (v - mean) * inv * mp_kget_f(g->data, g->dtype, c) + mp_kget_f(b->data, b->dtype, c);
                            mp_kset_f(y->data, y->dtype, at, silu ? o / (1 + exp(-o)) : o);
                        }
                    }
            }
        }
    return MP_OK;
}

/* An fp32 copy of quantized t: (t - zp) * scale, zero point and scale
 * scalar or one per element of the last axis. */
static mp_rtensor ctk_deq_f32(mp_kctx *k, const mp_rtensor *t, const mp_rtensor *s, const mp_rtensor *z, mp_status *st) {
    mp_rtensor r = *t;
    double *d = *st ? NULL : ctk_deq(k, t, s, z, st);
    float *f = *st ? NULL : malloc(sizeof(float) * (size_t)(t->numel + 1));
    if (!*st && !f) *st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t e = 0; f && e < t->numel; e++) f[e] = (float)d[e];
    free(d);
    r.data = f;
    r.dtype = MP_DT_FLOAT;
    return r;
}

/* QAttention: the input and weights dequantized, then Attention. */
mp_status ctk_qattention(mp_kctx *k) {
    mp_status st = MP_OK;
    if (mp_kin(k, 8)) return mp_kfail(k, MP_ERR_UNSUPPORTED, "past state");
    mp_rtensor in[6] = {{0}};
    in[0] = ctk_deq_f32(k, &k->in[0], &k->in[3], mp_kin(k, 6), &st);
    in[1] = ctk_deq_f32(k, &k->in[1], &k->in[4], mp_kin(k, 7), &st);
    if (mp_kin(k, 2)) in[2] = k->in[2];
    if (mp_kin(k, 5)) in[3] = k->in[5];
    mp_kctx kk = *k;
    kk.in = in;
    kk.n_in = 4;
    if (!st) st = ctk_attention(&kk);
    free(in[0].data), free(in[1].data);
    return st;
}

/* QGemm: alpha * (A - za)(B - zb) * sa * sb + C * sa * sb (C int32), then
 * quantized with (y_scale, y_zero_point) or left in fp32. */
mp_status ctk_qgemm(mp_kctx *k) {
    const mp_rtensor *a = &k->in[0], *b = &k->in[3], *c = mp_kin(k, 6), *ys = mp_kin(k, 7), *yz = mp_kin(k, 8);
    bool ta = mp_attr_i(k->n, "transA", 0) != 0, tb = mp_attr_i(k->n, "transB", 0) != 0;
    double alpha = mp_attr_f(k->n, "alpha", 1.0);
    mp_rtensor *y = &k->out[0];
    int64_t M = y->dims[0], N = y->dims[1], K = ta ? a->dims[0] : a->dims[1];
    mp_status st = MP_OK;
    double *A = ctk_deq(k, a, &k->in[1], mp_kin(k, 2), &st);
    double *B = st ? NULL : ctk_deq(k, b, &k->in[4], mp_kin(k, 5), &st);
    double *Y = st ? NULL : malloc(sizeof(double) * (size_t)(M * N + 1));
    if (!st && !Y) st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    if (!st) {
        mp_kgemm_f64(M, N, K, A, ta ? 1 : K, ta ? M : 1, B, tb ? 1 : N, tb ? K : 1, Y, N, false);
        double sa = mp_kget_f(k->in[1].data, k->in[1].dtype, 0);
        const mp_rtensor *sb = &k->in[4];
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double v = alpha * Y[i * N + j];
                if (c) {
                    int64_t cr = c->rank == 2 ? c->dims[0] : 1, cc = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
                    double s = sa * mp_kget_f(sb->data, sb->dtype, sb->numel <= 1 ? 0 : j);
                    v += s * mp_kget_f(c->data, c->dtype, (cr == 1 ? 0 : i) * cc + (cc == 1 ? 0 : j));
                }
                Y[i * N + j] = v;
            }
        ctk_store(k, Y, NULL, NULL, 0, 0, ys, yz);
    }
    free(A), free(B), free(Y);
    return st;
}

/* SkipGroupNorm: s = x + skip (+ bias per channel), then GroupNorm (NHWC);
 * output 1 (optional) is s. */
mp_status ctk_skip_groupnorm(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *skip = &k->in[3], *bias = mp_kin(k, 4);
    int64_t C = x->dims[x->rank - 1];
    float *sum = malloc(sizeof(float) * (size_t)(x->numel + 1));
    if (!sum) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t e = 0; e < x->numel; e++) {
        double v = mp_kget_f(x->data, x->dtype, e);
        v += mp_kget_f(skip->data, skip->dtype, skip->numel == x->numel ? e : e % skip->numel);
        if (bias) v += mp_kget_f(bias->data, bias->dtype, e % C);
        sum[e] = (float)v;
        if (k->n_out > 1 && k->out[1].data) mp_kset_f(k->out[1].data, k->out[1].dtype, e, v);
    }
    mp_rtensor in[3] = {{sum, MP_DT_FLOAT, x->rank, x->dims, x->numel}, k->in[1], k->in[2]};
    mp_kctx kk = *k;
    kk.in = in;
    kk.n_in = 3;
    mp_status st = ctk_groupnorm(&kk);
    free(sum);
    return st;
}

/* GroupQueryAttention: query heads grouped over kv_num_heads key/value
 * heads; the new keys and values appended to past_key/past_value at each
 * row's past length (seqlens_k + 1 - S; 0 for a prompt, total_sequence_length
 * == S); optional rotary embedding of q and k at their positions (cos/sin
 * caches, do_rotary); causal attention (local_window_size limits it when
 * > 0; softcap caps the scores when > 0). Outputs: output, present_key,
 * present_value [B, Nkv, T, h]. */
mp_status ctk_gqa(mp_kctx *k) {
    const mp_rtensor *q = &k->in[0], *kx = mp_kin(k, 1), *vx = mp_kin(k, 2), *pk = mp_kin(k, 3), *pv = mp_kin(k, 4);
    const mp_rtensor *sl = mp_kin(k, 5), *tsl = mp_kin(k, 6), *cs = mp_kin(k, 7), *sn = mp_kin(k, 8);
    int64_t N = mp_attr_i(k->n, "num_heads", 0), Nkv = mp_attr_i(k->n, "kv_num_heads", 0);
    bool rotary = mp_attr_i(k->n, "do_rotary", 0) != 0, inter = mp_attr_i(k->n, "rotary_interleaved", 0) != 0;
    int64_t win = mp_attr_i(k->n, "local_window_size", -1);
    double softcap = mp_attr_f(k->n, "softcap", 0.0);
    if (N <= 0 || Nkv <= 0 || N % Nkv || q->rank != 3 || !sl || !tsl || mp_kin(k, 9) || mp_kin(k, 10))
        return mp_kfail(k, MP_ERR_UNSUPPORTED, "this form (position_ids, attention_bias or missing inputs)");
    int64_t B = q->dims[0], S = q->dims[1], packed = !vx;
    int64_t h = packed ? q->dims[2] / (N + 2 * Nkv) : q->dims[2] / N;
    int64_t P = pk ? pk->dims[2] : 0, T = k->out[1].data ? k->out[1].dims[2] : P + S;
    if (h <= 0 || q->numel != B * S * (packed ? (N + 2 * Nkv) * h : N * h) ||
        (!packed && (!kx || kx->numel != B * S * Nkv * h || vx->numel != B * S * Nkv * h)) ||
        (pk && (pk->rank != 4 || pk->numel != B * Nkv * P * h || !pv || pv->numel != pk->numel)) || sl->numel < B ||
        (k->out[1].data && k->out[1].numel != B * Nkv * T * h))
        return mp_kfail(k, MP_ERR_SHAPE, "query, key, value, past and present sizes do not agree");
    int64_t total = mp_kget_i(tsl->data, tsl->dtype, 0);
    double scale = mp_attr_f(k->n, "scale", 0.0);
    if (scale == 0) scale = 1.0 / sqrt((double)h);
    int64_t qw = packed ? (N + 2 * Nkv) * h : N * h, kw = packed ? qw : Nkv * h;
    size_t nq = (size_t)(B * N * S * h), nk = (size_t)(B * Nkv * T * h);
    double *Q = calloc(nq + 1, sizeof(double)), *K = calloc(nk + 1, sizeof(double)), *V = calloc(nk + 1, sizeof(double));
    double *w = malloc(sizeof(double) * (size_t)(T + h + 1)), *orow = w ? w + T : NULL;
    uint8_t *keep = malloc((size_t)T + 1);
    mp_status st = Q && K && V && w && keep ? MP_OK : mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t b = 0; !st && b < B; b++) {
        int64_t past = total == S ? 0 : mp_kget_i(sl->data, sl->dtype, b) + 1 - S;
        if (past < 0 || past + S > T) {
            st = mp_kfail(k, MP_ERR_USAGE, "seqlens_k[%lld] does not fit the present buffer", (long long)b);
            break;
        }
        /* past rows, then the new rows */
        for (int64_t g = 0; g < Nkv; g++)
            for (int64_t t = 0; t < past; t++)
                for (int64_t i = 0; i < h; i++) {
                    int64_t at = ((b * Nkv + g) * T + t) * h + i, src = ((b * Nkv + g) * P + t) * h + i;
                    K[at] = mp_kget_f(pk->data, pk->dtype, src);
                    V[at] = mp_kget_f(pv->data, pv->dtype, src);
                }
        for (int64_t s = 0; s < S; s++) {
            int64_t pos = past + s;
            for (int64_t hh = 0; hh < N + 2 * Nkv; hh++) {
                bool isq = hh < N, isk = hh >= N && hh < N + Nkv;
                int64_t head = isq ? hh : isk ? hh - N : hh - N - Nkv;
                const mp_rtensor *src = packed || isq ? q : isk ? kx : vx;
                int64_t base = (b * S + s) * (packed || isq ? qw : kw) + (packed ? hh * h : head * h);
                double *dst = isq ? &Q[((b * N + head) * S + s) * h] : isk ? &K[((b * Nkv + head) * T + pos) * h]
                                                                           : &V[((b * Nkv + head) * T + pos) * h];
                for (int64_t i = 0; i < h; i++) dst[i] = mp_kget_f(src->data, src->dtype, base + i);
                if (rotary && cs && sn && hh < N + Nkv) {
                    int64_t half = cs->dims[cs->rank - 1];
                    if (pos >= cs->dims[0] || pos >= sn->dims[0] || 2 * half > h || sn->numel != cs->numel) {
                        st = mp_kfail(k, MP_ERR_USAGE, "position %lld is outside the cos/sin caches", (long long)pos);
                        break;
                    }
                    double *c = w, *si = w + half; /* w (T + h >= 2 half) is free until the attention below */
                    for (int64_t i = 0; i < half; i++)
                        c[i] = mp_kget_f(cs->data, cs->dtype, pos * half + i), si[i] = mp_kget_f(sn->data, sn->dtype, pos * half + i);
                    mp_krope(dst, 2 * half, inter, c, si);
                }
            }
        }
        /* attention of each query head on its kv head, causal (within
         * local_window_size when > 0): the keys in [lo, pos] */
        for (int64_t n = 0; n < N && !st; n++) {
            int64_t g = n / (N / Nkv);
            for (int64_t s = 0; s < S; s++) {
                int64_t pos = past + s, lo = win > 0 && pos - win + 1 > 0 ? pos - win + 1 : 0;
                for (int64_t t = 0; t < T; t++) keep[t] = t >= lo && t <= pos;
                mp_ksdpa_row(&Q[((b * N + n) * S + s) * h], &K[(b * Nkv + g) * T * h], &V[(b * Nkv + g) * T * h], T, h,
                             h, scale, softcap, NULL, keep, -INFINITY, NULL, NULL, w, orow);
                for (int64_t i = 0; i < h; i++)
                    mp_kset_f(k->out[0].data, k->out[0].dtype, (b * S + s) * N * h + n * h + i, orow[i]);
            }
        }
    }
    for (int o = 1; !st && o <= 2; o++) {
        if (o >= k->n_out || !k->out[o].data) continue;
        const double *src = o == 1 ? K : V;
        mp_rtensor *y = &k->out[o];
        if ((size_t)y->numel != nk) {
            st = mp_kfail(k, MP_ERR_SHAPE, "present %d is not [B, Nkv, T, h]", o);
            break;
        }
        mp_kconvert(y->data, y->dtype, src, MP_DT_DOUBLE, y->numel);
    }
    free(Q), free(K), free(V), free(w), free(keep);
    return st;
}

/* GatherBlockQuantized: Gather on a block-quantized table, dequantized:
 * (q - zero point) * scale, the scale (and zero point) of q's block of
 * block_size along quantize_axis. uint8 data packs 8 / bits values per byte
 * along the last dim (low bits first); the default zero point is the
 * middle of the unsigned range (0 for signed int4). */
mp_status ctk_gather_bq(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *ix = &k->in[1], *sc = &k->in[2], *zp = mp_kin(k, 3);
    mp_rtensor *y = &k->out[0];
    int64_t bits = mp_attr_i(k->n, "bits", 4), blk = mp_attr_i(k->n, "block_size", 128);
    bool packed = x->dtype == MP_DT_UINT8 && bits < 8;
    int per = packed ? (int)(8 / bits) : 1, r = x->rank;
    int ga = mp_axis(mp_attr_i(k->n, "gather_axis", 0), r), qa = mp_axis(mp_attr_i(k->n, "quantize_axis", r - 1), r);
    if (ga < 0 || qa < 0 || blk <= 0 || (bits != 4 && bits != 8) || ix->rank + r - 1 != y->rank)
        return mp_kfail(k, MP_ERR_SHAPE, "bad axes, bits, block_size or ranks");
    int64_t ud[MP_MAX_RANK], sd[MP_MAX_RANK], us[MP_MAX_RANK], ss[MP_MAX_RANK], c[MP_MAX_RANK];
    for (int d = 0; d < r; d++) {
        ud[d] = x->dims[d] * (d == r - 1 ? per : 1);
        sd[d] = d == qa ? (ud[d] + blk - 1) / blk : ud[d];
    }
    mp_kstrides(r, ud, us);
    mp_kstrides(r, sd, ss);
    double zdef = x->dtype == MP_DT_INT4 || x->dtype == MP_DT_INT8 ? 0 : (double)(1 << (bits - 1));
    int64_t mask = (1 << bits) - 1;
    for (int64_t e = 0; e < y->numel; e++) {
        /* output coords: data[:ga], indices..., data[ga+1:] */
        int64_t rem = e;
        int64_t oc[MP_MAX_RANK];
        for (int d = y->rank - 1; d >= 0; d--) oc[d] = rem % y->dims[d], rem /= y->dims[d];
        int64_t ioff = 0;
        for (int d = 0; d < ix->rank; d++) ioff = ioff * ix->dims[d] + oc[ga + d];
        int64_t gi = mp_kget_i(ix->data, ix->dtype, ioff);
        if (gi < 0) gi += ud[ga];
        if (gi < 0 || gi >= ud[ga]) return mp_kfail(k, MP_ERR_USAGE, "index %lld out of range", (long long)gi);
        for (int d = 0; d < r; d++) c[d] = d < ga ? oc[d] : d == ga ? gi : oc[d + ix->rank - 1];
        int64_t uo = 0, so = 0;
        for (int d = 0; d < r; d++) {
            uo += c[d] * us[d];
            so += (d == qa ? c[d] / blk : c[d]) * ss[d];
        }
        double q, z = zdef;
        if (packed) {
            q = (double)((((const uint8_t *)x->data)[uo / per] >> ((uo % per) * bits)) & mask);
            if (zp) z = (double)((((const uint8_t *)zp->data)[so / per] >> ((so % per) * bits)) & mask);
        } else {
            q = mp_kget_f(x->data, x->dtype, uo);
            if (zp) z = mp_kget_f(zp->data, zp->dtype, so);
        }
        mp_kset_f(y->data, y->dtype, e, (q - z) * mp_kget_f(sc->data, sc->dtype, so));
    }
    return MP_OK;
}