/* Quantized convolutions: QLinearConv and ConvInteger (default domain),
 * and onnxruntime's com.microsoft QLinearConv (which adds channels_last).
 * The other default-domain quantized ops (QuantizeLinear,
 * DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul)
 * live in linalg.c; com.microsoft's in contrib.c.
 *
 * Shape rule: Conv's (mp_conv_infer, nn.c). Cost rule: Conv's, on the
 * quantized operands: MACs = prod(kernel) * (C / group) * M * N *
 * prod(out spatial) = numel(W) * N * prod(out spatial); FLOPs = 2 * MACs
 * (+ numel(Y) for QLinearConv's bias). Those are integer operations;
 * the zero-point subtractions and the requantization are not counted, as
 * for QLinearMatMul. The quantized weight is a parameter slot (int8/uint8,
 * counted in its own dtype), QLinearConv's bias (int32) too; scales and
 * zero points are buffers. */
#include "ops/kernel.h"

#include <stdlib.h>

#define QC_BIT(i) (1u << (i))

/* Conv's rule on X = input xi (NHWC when channels_last: [N, D..., C]), W =
 * input wi, bias bi (-1: none); output 0 of dtype dt, in X's layout. */
static mp_status qc_conv(mp_ctx *c, int xi, int wi, int bi, int dt, bool channels_last) {
    mp_value *x = mp_in(c, xi);
    /* mp_conv_infer multiplies W's channels by group unchecked */
    int64_t group = mp_attr_i(c->n, "group", 1);
    if (group < 1 || group > ((int64_t)1 << 31))
        return mp_fail(c, "group = %lld is out of range", (long long)group);
    if (!channels_last || !x || x->rank < 3 || x->rank > MP_MAX_RANK)
        return mp_conv_infer(c, xi, wi, bi, dt);
    /* view X as NCHW for the rule (the dims pointer is swapped, never
     * written, and restored), then lay the output out as NHWC */
    int r = x->rank;
    int64_t nchw[MP_MAX_RANK], *saved = x->dims;
    nchw[0] = x->dims[0];
    nchw[1] = x->dims[r - 1];
    for (int i = 1; i < r - 1; i++) nchw[i + 1] = x->dims[i];
    x->dims = nchw;
    mp_status st = mp_conv_infer(c, xi, wi, bi, dt);
    x->dims = saved;
    mp_value *y = mp_out(c, 0);
    if (st || !y || y->rank < 3) return st;
    int64_t nhwc[MP_MAX_RANK];
    nhwc[0] = y->dims[0];
    nhwc[y->rank - 1] = y->dims[1];
    for (int i = 2; i < y->rank; i++) nhwc[i - 1] = y->dims[i];
    return mp_set_out(c, 0, y->dtype, y->rank, nhwc);
}

/* Per-output-channel quantization parameter (input i): a scalar, or 1-D of
 * 1 or M values. */
static mp_status qc_per_channel(mp_ctx *c, int i, const char *what, int wi) {
    mp_value *v = mp_in(c, i), *w = mp_in(c, wi);
    if (!v || v->rank < 0) return MP_OK;
    if (v->rank > 1) return mp_fail(c, "%s '%s' must be a scalar or 1-D, got rank %d", what,
                                    v->name, v->rank);
    int64_t m = (w && w->rank >= 1) ? w->dims[0] : MP_DIM_ANON;
    if (v->rank == 1 && v->dims[0] >= 0 && v->dims[0] != 1 && m >= 0 && v->dims[0] != m)
        return mp_fail(c, "%s '%s' has %lld values for %lld output channels", what, v->name,
                       (long long)v->dims[0], (long long)m);
    return MP_OK;
}

/* MACs = numel(W) * N * prod(out spatial): every output dim but the
 * channel one (dim 1, or the last with channels_last). FLOPs = 2 * MACs +
 * (bias ? numel(Y) : 0). */
static void qc_cost(mp_ctx *c, mp_cost *k, int wi, int bi, bool channels_last) {
    mp_value *w = mp_in(c, wi), *y = mp_out(c, 0);
    k->macs = k->flops = 0;
    if (!mp_shape_known(w) || !mp_shape_known(y) || y->rank < 3) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    int ch = channels_last ? y->rank - 1 : 1;
    bool ovf = false;
    uint64_t macs = (uint64_t)mp_value_numel(w);
    for (int i = 0; i < y->rank; i++)
        if (i != ch) macs = mp_umul(macs, (uint64_t)y->dims[i], &ovf);
    k->macs = macs;
    k->flops = mp_umul(2, macs, &ovf);
    if (bi >= 0 && mp_in(c, bi)) k->flops = mp_uadd(k->flops, mp_cnumel(y, k), &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

static bool qc_channels_last(mp_ctx *c) {
    return c->n->domain[0] && mp_attr_i(c->n, "channels_last", 0) != 0;
}

/* QLinearConv (10; com.microsoft 1 with channels_last): x, x_scale,
 * x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B (int32,
 * optional) -> y by Conv's rule on x and w, dtype of y_zero_point (else
 * x's). MACs as Conv (integer); FLOPs = 2 * MACs + (B ? numel(y) : 0).
 * w (input 3) and B (input 8) are parameter slots. */
static mp_status qlinear_conv_infer(mp_ctx *c) {
    mp_status st;
    mp_value *x, *w, *yz = mp_in(c, 7);
    if ((st = mp_need_in(c, 0, "x", &x)) || (st = mp_need_in(c, 3, "w", &w))) return st;
    if (c->n->n_in > 9) return mp_fail(c, "expects 8 or 9 inputs, got %d", c->n->n_in);
    if ((st = qc_per_channel(c, 4, "w_scale", 3)) || (st = qc_per_channel(c, 5, "w_zero_point", 3)))
        return st;
    int dt = yz && yz->dtype ? yz->dtype : x->dtype;
    return qc_conv(c, 0, 3, 8, dt, qc_channels_last(c));
}

static void qlinear_conv_cost(mp_ctx *c, mp_cost *k) { qc_cost(c, k, 3, 8, qc_channels_last(c)); }

/* ConvInteger (10): x, w, x_zero_point, w_zero_point -> int32 y by Conv's
 * rule. MACs as Conv (integer); FLOPs = 2 * MACs. w is a parameter slot. */
static mp_status conv_integer_infer(mp_ctx *c) {
    if (c->n->n_in > 4) return mp_fail(c, "expects 2 to 4 inputs, got %d", c->n->n_in);
    mp_status st = qc_per_channel(c, 3, "w_zero_point", 1);
    return st ? st : qc_conv(c, 0, 1, -1, MP_DT_INT32, false);
}

static void conv_integer_cost(mp_ctx *c, mp_cost *k) { qc_cost(c, k, 1, -1, false); }

/* ---- kernels: integer convolutions in double (exact for these
 * products), then the requantization ---- */

/* x - zero point (scalar, or one per channel along axis 1 of x/w). */
static double *qck_shifted(mp_kctx *k, const mp_rtensor *t, const mp_rtensor *zp, int64_t ch_inner, mp_status *st) {
    double *p = malloc(sizeof(double) * (size_t)(t->numel + 1));
    if (!p) {
        *st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
        return NULL;
    }
    mp_kconvert(p, MP_DT_DOUBLE, t->data, t->dtype, t->numel);
    if (zp && zp->data)
        for (int64_t e = 0; e < t->numel; e++)
            p[e] -= mp_kget_f(zp->data, zp->dtype, zp->numel <= 1 ? 0 : (e / ch_inner) % zp->numel);
    return p;
}

static mp_status qck_run(mp_kctx *k, bool qlinear) {
    int xi = 0, wi = qlinear ? 3 : 1;
    const mp_rtensor *x = &k->in[xi], *w = &k->in[wi];
    mp_rtensor *y = &k->out[0];
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    if (qlinear && mp_attr_i(k->n, "channels_last", 0))
        return mp_kfail(k, MP_ERR_UNSUPPORTED, "channels_last layout");
    const mp_rtensor *xz = mp_kin(k, qlinear ? 2 : 2), *wz = mp_kin(k, qlinear ? 5 : 3);
    int64_t w_inner = w->numel / (w->dims[0] ? w->dims[0] : 1), y_inner = 1;
    for (int i = 2; i < y->rank; i++) y_inner *= y->dims[i];
    mp_status st = MP_OK;
    double *xd = qck_shifted(k, x, xz, 1, &st), *wd = st ? NULL : qck_shifted(k, w, wz, w_inner, &st);
    double *yd = st ? NULL : malloc(sizeof(double) * (size_t)(y->numel + 1)), *bd = NULL;
    if (!st && !yd) st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    const mp_rtensor *b = qlinear ? mp_kin(k, 8) : NULL;
    if (!st && b) bd = qck_shifted(k, b, NULL, 1, &st);
    if (!st) st = mp_kconv_f64(k, xd, x, wd, w, bd, yd, y);
    if (!st && !qlinear) mp_kconvert(y->data, y->dtype, yd, MP_DT_DOUBLE, y->numel);
    if (!st && qlinear) {
        const mp_rtensor *xs = &k->in[1], *ws = &k->in[4], *ys = &k->in[6], *yz = mp_kin(k, 7);
        double sx = mp_kget_f(xs->data, xs->dtype, 0), sy = mp_kget_f(ys->data, ys->dtype, 0);
        double zy = yz ? mp_kget_f(yz->data, yz->dtype, 0) : 0;
        int64_t M = y->dims[1];
        if (ws->numel != 1 && ws->numel != M) {
            free(xd), free(wd), free(yd), free(bd);
            return mp_kfail(k, MP_ERR_SHAPE, "w_scale must be a scalar or one per output channel");
        }
        for (int64_t e = 0; e < y->numel; e++) {
            int64_t m = (e / y_inner) % M;
            double sw = mp_kget_f(ws->data, ws->dtype, ws->numel <= 1 ? 0 : m);
            mp_kquant_store(y->data, y->dtype, e, yd[e] * (sx * sw / sy) + zy);
        }
    }
    free(xd), free(wd), free(yd), free(bd);
    return st;
}

static mp_status qck_qlinear_conv(mp_kctx *k) { return qck_run(k, true); }
static mp_status qck_conv_integer(mp_kctx *k) { return qck_run(k, false); }

const mp_op mp_ops_quant[] = {
    {"", "QLinearConv", 10, qlinear_conv_infer, qlinear_conv_cost, QC_BIT(3) | QC_BIT(8),
     QC_BIT(1) | QC_BIT(2) | QC_BIT(4) | QC_BIT(5) | QC_BIT(6) | QC_BIT(7), NULL, qck_qlinear_conv},
    {"com.microsoft", "QLinearConv", 1, qlinear_conv_infer, qlinear_conv_cost,
     QC_BIT(3) | QC_BIT(8), QC_BIT(1) | QC_BIT(2) | QC_BIT(4) | QC_BIT(5) | QC_BIT(6) | QC_BIT(7),
     NULL, qck_qlinear_conv},
    {"", "ConvInteger", 10, conv_integer_infer, conv_integer_cost, QC_BIT(1),
     QC_BIT(2) | QC_BIT(3), NULL, qck_conv_integer},
};
const int mp_ops_quant_count = (int)MP_ARRAY_LEN(mp_ops_quant);
