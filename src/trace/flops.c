/* FLOPs of a trace's operators from their recorded shapes: one table of
 * rules (trace.h, docs/COUNTING.md "Trace FLOPs").
 *
 * The forward rules are PyTorch's own with_flops rules
 * (torch/csrc/profiler/util.cpp: mm, addmm, bmm, baddbmm, conv2d, add,
 * mul), so the operator table's flops still equal key_averages'. The
 * backward and attention rules follow torch.utils.flop_counter:
 *  - convolution_backward: grad input and grad weight each cost what the
 *    forward convolution costs, 2 * prod(grad_out) * prod(weight[1:]),
 *    counted when its output_mask asks for them; the bias grad (mask[2]) is
 *    a sum over batch and space, prod(grad_out) FLOPs (flop_counter leaves
 *    it out; it is a reduction, counted as reductions are);
 *  - SDPA forward and backward (_scaled_dot_product_{flash,efficient,
 *    cudnn}_attention and their _backward): mp_sdpa_flops (src/ops/ops.h,
 *    the one rule the planner and the attention operators use too): the
 *    forward's two products, and the backward as it executes, the four
 *    gradient products and the recomputed scores, 2.5x the forward when
 *    Dq = Dv (flop_counter's sdpa_backward_flop_count).
 * The matrix-product backward pieces appear in a trace as aten::mm/bmm
 * under MmBackward0/AddmmBackward0/BmmBackward0 and are counted by the
 * forward rules. */
#include "trace/trace.h"
#include "ops/ops.h"

#include <math.h>

enum { R_MM = 1, R_ADDMM, R_BMM, R_BADDBMM, R_CONV2D, R_ADD, R_MUL, R_CONV_BWD, R_SDPA,
       R_SDPA_BWD };

typedef struct flop_rule {
    const char *name;
    int rule;
    int concrete;    /* MP_TFC_*: which Concrete Inputs the rule reads */
} flop_rule;

static const flop_rule rules[] = {
    {"aten::mm", R_MM, MP_TFC_NONE},
    {"aten::addmm", R_ADDMM, MP_TFC_NONE},
    {"aten::bmm", R_BMM, MP_TFC_NONE},
    {"aten::baddbmm", R_BADDBMM, MP_TFC_NONE},
    {"aten::conv2d", R_CONV2D, MP_TFC_CONV2D},
    {"aten::add", R_ADD, MP_TFC_NONE},
    {"aten::mul", R_MUL, MP_TFC_NONE},
    {"aten::convolution_backward", R_CONV_BWD, MP_TFC_CONV_BWD},
    {"aten::_scaled_dot_product_flash_attention", R_SDPA, MP_TFC_NONE},
    {"aten::_scaled_dot_product_efficient_attention", R_SDPA, MP_TFC_NONE},
    {"aten::_scaled_dot_product_cudnn_attention", R_SDPA, MP_TFC_NONE},
    {"aten::_scaled_dot_product_flash_attention_backward", R_SDPA_BWD, MP_TFC_NONE},
    {"aten::_scaled_dot_product_efficient_attention_backward", R_SDPA_BWD, MP_TFC_NONE},
    {"aten::_scaled_dot_product_cudnn_attention_backward", R_SDPA_BWD, MP_TFC_NONE},
};

int mp_trace_flop_rule(const char *name, size_t n, int *concrete) {
    for (size_t i = 0; i < MP_ARRAY_LEN(rules); i++)
        if (strlen(rules[i].name) == n && memcmp(rules[i].name, name, n) == 0) {
            if (concrete) *concrete = rules[i].concrete;
            return (int)i + 1;
        }
    if (concrete) *concrete = MP_TFC_NONE;
    return 0;
}

static double dprod(const int64_t *d, int n) {
    double p = 1;
    for (int i = 0; i < n; i++) {
        if (d[i] < 0) return 0;
        p *= (double)d[i];
    }
    return p;
}

/* 4-d [B, H, S, D] inputs (query, key, value) at q, q+1, q+2. */
static bool sdpa_dims(const mp_tshapes *s, int q, double *bh, double *sq, double *sk, double *dq,
                      double *dv) {
    if (s->nin < q + 3) return false;
    for (int i = q; i < q + 3; i++)
        if (s->nd[i] != 4) return false;
    const int64_t *Q = s->dims[q], *K = s->dims[q + 1], *V = s->dims[q + 2];
    for (int i = 0; i < 4; i++)
        if (Q[i] < 0 || K[i] < 0 || V[i] < 0) return false;
    *bh = (double)Q[0] * (double)Q[1];
    *sq = (double)Q[2];
    *dq = (double)Q[3];
    *sk = (double)K[2];
    *dv = (double)V[3];
    return true;
}

uint64_t mp_trace_flops(int rule, const mp_tshapes *v) {
    if (rule <= 0 || rule > (int)MP_ARRAY_LEN(rules)) return 0;
    const int64_t *a = v->dims[0], *b = v->dims[1], *c = v->dims[2];
    double f = 0, bh, sq, sk, dq, dv;
    for (int i = 0; i < v->nin && i < MP_TFL_IN; i++)
        for (int j = 0; j < v->nd[i] && j < 5; j++)
            if (v->dims[i][j] < 0) return 0;
    switch (rules[rule - 1].rule) {
    case R_MM:
        if (v->nin >= 2 && v->nd[0] == 2 && v->nd[1] == 2) f = 2.0 * a[0] * a[1] * b[1];
        break;
    case R_ADDMM:
        if (v->nin >= 3 && v->nd[1] == 2 && v->nd[2] == 2) f = 2.0 * b[0] * b[1] * c[1];
        break;
    case R_BMM:
        if (v->nin >= 2 && v->nd[0] == 3 && v->nd[1] == 3) f = 2.0 * a[0] * a[1] * a[2] * b[2];
        break;
    case R_BADDBMM:
        if (v->nin >= 3 && v->nd[1] == 3 && v->nd[2] == 3) f = 2.0 * b[0] * b[1] * b[2] * c[2];
        break;
    case R_CONV2D: {
        if (v->nin < 2 || v->nd[0] != 4 || v->nd[1] != 4) break;
        int64_t st[2] = {1, 1}, pad[2] = {0, 0}, dil[2] = {1, 1};
        if (v->nconv[0] == 2) memcpy(st, v->conv[0], sizeof st);
        if (v->nconv[1] == 2) memcpy(pad, v->conv[1], sizeof pad);
        if (v->nconv[2] == 2) memcpy(dil, v->conv[2], sizeof dil);
        double out[2];
        for (int i = 0; i < 2; i++) {
            if (st[i] <= 0) return 0;
            double num = (double)a[2 + i] + 2.0 * (double)pad[i] - (double)dil[i] * ((double)b[2 + i] - 1) - 1;
            out[i] = num < 0 ? 0 : floor(num / (double)st[i]) + 1;
        }
        if (v->groups <= 0) return 0;
        f = 2.0 * a[0] * out[0] * out[1] * b[2] * b[3] * a[1] * (double)b[0] / (double)v->groups;
        break;
    }
    case R_ADD:
    case R_MUL:
        if (v->nin >= 1 && v->nd[0] <= 5) f = dprod(a, v->nd[0]);
        break;
    case R_CONV_BWD: {
        /* grad_output, input, weight */
        if (v->nin < 3 || v->nd[0] < 3 || v->nd[2] != v->nd[0]) break;
        double go = dprod(a, v->nd[0]), wk = dprod(c + 1, v->nd[2] - 1);
        double one = 2.0 * go * wk;
        if (v->mask[0] > 0) f += one;
        if (v->mask[1] > 0) f += one;
        if (v->mask[2] > 0) f += go;
        break;
    }
    case R_SDPA:
        if (sdpa_dims(v, 0, &bh, &sq, &sk, &dq, &dv)) f = mp_sdpa_flops(bh, sq, sk, dq, dv).fwd;
        break;
    case R_SDPA_BWD:   /* grad_out, query, key, value */
        if (sdpa_dims(v, 1, &bh, &sq, &sk, &dq, &dv)) f = mp_sdpa_flops(bh, sq, sk, dq, dv).bwd;
        break;
    default: break;
    }
    return f > 0 && f < 1.8e19 ? (uint64_t)f : 0;
}

/* Operators that move, make or view data and do no arithmetic worth a
 * FLOP: never listed as uncounted. */
bool mp_trace_flop_free(const char *name) {
    /* a trailing '*' marks a prefix; the others match whole names */
    static const char *const pre[] = {
        "aten::copy_", "aten::fill_", "aten::zero*", "aten::ones*", "aten::empty*", "aten::to",
        "aten::_to_copy", "aten::clone", "aten::contiguous", "aten::cat", "aten::index*",
        "aten::select*", "aten::slice*", "aten::expand*", "aten::set_", "aten::resize_",
        "aten::random_", "aten::normal_", "aten::uniform_", "aten::bernoulli_", "aten::rand*",
        "aten::_local_scalar_dense", "aten::item", "aten::narrow*", "aten::view*",
        "aten::reshape", "aten::_reshape_alias", "aten::_unsafe_view", "aten::transpose*",
        "aten::permute", "aten::t", "aten::as_strided*", "aten::detach*", "aten::unsqueeze*",
        "aten::squeeze*", "aten::stack", "aten::new_*", "aten::full*", "aten::arange",
        "aten::lift_fresh", "aten::split*", "aten::chunk", "aten::unbind", "aten::flatten",
        "aten::unflatten", "aten::embedding*", "aten::gather", "aten::scatter*",
        "aten::masked_fill*", "aten::_foreach_zero_", "aten::_foreach_copy_", "aten::record_stream"};
    for (size_t i = 0; i < MP_ARRAY_LEN(pre); i++) {
        size_t n = strlen(pre[i]);
        if (pre[i][n - 1] == '*' ? strncmp(name, pre[i], n - 1) == 0 : strcmp(name, pre[i]) == 0)
            return true;
    }
    return false;
}
