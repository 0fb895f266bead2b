/* Portable kernels called directly through a hand-made mp_kctx (no plan):
 * the shared machinery (dtype conversions, broadcast rows, GEMM) and a
 * few kernels per family against values computed by hand (numpy in the
 * comments). The ONNX backend test data checks every kernel end to end
 * (tests/conformance.c, run phase). */
#include "test.h"

#include "modelprof.h"
#include "ops/kernel.h"

#include <math.h>
#include <stdlib.h>

/* ---- a node and a context by hand ---- */

typedef struct tk_node {
    mp_node n;
    mp_attr attr[4];
    int in[8], out[4];
    mp_rtensor rin[8], rout[4];
    mp_kctx k;
} tk_node;

static void tk_init(tk_node *t, const char *op, int opset, int n_in, int n_out) {
    memset(t, 0, sizeof *t);
    t->n.name = "n0";
    t->n.op = op;
    t->n.domain = "";
    t->n.opset = opset;
    t->n.n_in = n_in;
    t->n.n_out = n_out;
    t->n.in = t->in;
    t->n.out = t->out;
    t->n.attr = t->attr;
    for (int i = 0; i < n_in; i++) t->in[i] = i;
    for (int i = 0; i < n_out; i++) t->out[i] = n_in + i;
    t->k.n = &t->n;
    t->k.n_in = n_in;
    t->k.n_out = n_out;
    t->k.in = t->rin;
    t->k.out = t->rout;
    t->k.threads = 1;
}

static void tk_attr_i(tk_node *t, const char *name, int64_t v) {
    mp_attr *a = &t->attr[t->n.n_attr++];
    a->name = name;
    a->type = MP_ATTR_INT;
    a->i = v;
}

static void tk_attr_ints(tk_node *t, const char *name, int64_t *v, int n) {
    mp_attr *a = &t->attr[t->n.n_attr++];
    a->name = name;
    a->type = MP_ATTR_INTS;
    a->ints = v;
    a->n = n;
}

static void tk_attr_f(tk_node *t, const char *name, double v) {
    mp_attr *a = &t->attr[t->n.n_attr++];
    a->name = name;
    a->type = MP_ATTR_FLOAT;
    a->f = v;
}

static void tk_attr_s(tk_node *t, const char *name, const char *v) {
    mp_attr *a = &t->attr[t->n.n_attr++];
    a->name = name;
    a->type = MP_ATTR_STRING;
    a->s = v;
    a->s_len = strlen(v);
}

static mp_rtensor tk_t(void *data, int dt, int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    return (mp_rtensor){data, dt, rank, dims, n};
}

/* Prepare (when the op has one), run, release through the descriptor. */
static mp_status tk_run(tk_node *t) {
    const mp_op *op = mp_op_find(t->n.domain, t->n.op, t->n.opset);
    if (!op || !op->run) return MP_ERR_UNSUPPORTED;
    return mp_krun_node(op, &t->k);
}

/* QuantizeLinear (13) of n floats to uint8 with one scale and zero point. */
static mp_status tk_quantize(tk_node *t, float *x, int64_t n, float scale, uint8_t zero, uint8_t *q) {
    static float s[1];
    static uint8_t z[1];
    static int64_t d[1];
    s[0] = scale, z[0] = zero, d[0] = n;
    tk_init(t, "QuantizeLinear", 13, 3, 1);
    t->rin[0] = tk_t(x, MP_DT_FLOAT, 1, d);
    t->rin[1] = tk_t(s, MP_DT_FLOAT, 0, NULL);
    t->rin[2] = tk_t(z, MP_DT_UINT8, 0, NULL);
    t->rout[0] = tk_t(q, MP_DT_UINT8, 1, d);
    return tk_run(t);
}

static bool tk_close(const float *a, const float *b, int n, double tol) {
    for (int i = 0; i < n; i++)
        if (!(fabs((double)a[i] - (double)b[i]) <= tol * (1 + fabs((double)b[i])))) {
            fprintf(stderr, "    element %d: %g, expected %g\n", i, (double)a[i], (double)b[i]);
            return false;
        }
    return true;
}

/* ---- machinery ---- */

static void test_kernels_half_bf16_fp8(void) {
    T_EQ(mp_float_to_half(1.0f), 0x3c00);
    T_EQ(mp_float_to_half(-2.0f), 0xc000);
    T_EQ(mp_float_to_half(65504.0f), 0x7bff);
    T_EQ(mp_float_to_half(65520.0f), 0x7c00);          /* rounds up to inf */
    T_EQ(mp_float_to_half(5.9604645e-8f), 0x0001);     /* smallest subnormal */
    T_EQ(mp_float_to_half(1.0f + 1.0f / 2048), 0x3c00); /* tie to even */
    T_CHECK(mp_half_to_float(0x3555) == 0.33325195f); /* nearest half to 1/3 */
    T_CHECK(isnan(mp_half_to_float(mp_float_to_half(NAN))));
    for (uint32_t h = 0; h < 0x7c00; h++) /* every finite positive half round-trips */
        if (mp_float_to_half(mp_half_to_float((uint16_t)h)) != h) {
            T_EQ(mp_float_to_half(mp_half_to_float((uint16_t)h)), h);
            break;
        }
    T_EQ(mp_float_to_bf16(1.0f), 0x3f80);
    T_EQ(mp_float_to_bf16(1.00390625f), 0x3f80);       /* tie to even */
    T_EQ(mp_float_to_bf16(1.01171875f), 0x3f82);       /* tie to even, up */
    T_CHECK(mp_bf16_to_float(0x4049) == 3.140625f);
    /* e4m3fn: 1.0 = 0x38, max 448 = 0x7e, saturating */
    T_EQ(mp_float_to_fp8(1.0f, MP_DT_FLOAT8E4M3FN, true), 0x38);
    T_EQ(mp_float_to_fp8(448.0f, MP_DT_FLOAT8E4M3FN, true), 0x7e);
    T_EQ(mp_float_to_fp8(1000.0f, MP_DT_FLOAT8E4M3FN, true), 0x7e);
    T_EQ(mp_float_to_fp8(-1000.0f, MP_DT_FLOAT8E4M3FN, false), 0xff);
    T_EQ(mp_float_to_fp8(1.0f, MP_DT_FLOAT8E5M2, true), 0x3c);
    T_EQ(mp_float_to_fp8(INFINITY, MP_DT_FLOAT8E5M2, false), 0x7c);
    for (int v = 0; v < 256; v++) { /* every finite fp8 value round-trips */
        int dts[4] = {MP_DT_FLOAT8E4M3FN, MP_DT_FLOAT8E4M3FNUZ, MP_DT_FLOAT8E5M2, MP_DT_FLOAT8E5M2FNUZ};
        for (int d = 0; d < 4; d++) {
            float f = mp_fp8_to_float((uint8_t)v, dts[d]);
            if (isnan(f) || isinf(f) || (f == 0 && v)) continue;
            T_EQ(mp_float_to_fp8(f, dts[d], true), v);
        }
    }
    /* int4: two per byte, low nibble first, sign-extended */
    uint8_t packed[1] = {0};
    mp_kset_i(packed, MP_DT_INT4, 0, -3);
    mp_kset_i(packed, MP_DT_INT4, 1, 7);
    T_EQ(packed[0], 0x7d);
    T_EQ(mp_kget_i(packed, MP_DT_INT4, 0), -3);
    T_EQ(mp_kget_i(packed, MP_DT_UINT4, 0), 13);
}

static void test_kernels_bcast_rows(void) {
    /* [2,3,4] op [3,1]: rows of 4 with the second input still (step 0) */
    int64_t od[3] = {2, 3, 4}, bd[2] = {3, 1};
    int ranks[2] = {3, 2};
    const int64_t *dims[2] = {od, bd};
    mp_kbcast it;
    mp_kbcast_init(&it, 3, od, 2, ranks, dims);
    T_EQ(it.len, 4);
    T_EQ(it.rows, 6);
    T_EQ(it.step[0], 1);
    T_EQ(it.step[1], 0);
    int64_t seen[6];
    for (int r = 0; r < it.rows; r++, mp_kbcast_next(&it)) seen[r] = it.off[1];
    int64_t want[6] = {0, 1, 2, 0, 1, 2};
    for (int r = 0; r < 6; r++) T_EQ(seen[r], want[r]);
    /* same shapes merge into one row */
    int64_t sd[3] = {2, 3, 4};
    const int64_t *dims2[2] = {sd, sd};
    int ranks2[2] = {3, 3};
    mp_kbcast_init(&it, 3, od, 2, ranks2, dims2);
    T_EQ(it.len, 24);
    T_EQ(it.rows, 1);
}

static void test_kernels_gemm(void) {
    enum { M = 37, N = 53, K = 29 };
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
    float *c = malloc(sizeof(float) * M * N), *ct = malloc(sizeof(float) * M * N), *ref = malloc(sizeof(float) * M * N);
    float *bt = malloc(sizeof(float) * K * N);
    unsigned s = 12345;
    for (int i = 0; i < M * K; i++) a[i] = (float)((s = s * 1103515245u + 12345u) >> 16 & 1023) / 512.0f - 1.0f;
    for (int i = 0; i < K * N; i++) b[i] = (float)((s = s * 1103515245u + 12345u) >> 16 & 1023) / 512.0f - 1.0f;
    for (int kk = 0; kk < K; kk++)
        for (int j = 0; j < N; j++) bt[j * K + kk] = b[kk * N + j];
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int kk = 0; kk < K; kk++) acc += (double)a[i * K + kk] * b[kk * N + j];
            ref[i * N + j] = (float)acc;
        }
    mp_kgemm_f32(M, N, K, a, K, 1, b, N, 1, c, N, false);
    T_CHECK(tk_close(c, ref, M * N, 1e-5));
    mp_kgemm_f32(M, N, K, a, K, 1, bt, 1, K, ct, N, false); /* B given transposed */
    T_CHECK(tk_close(ct, ref, M * N, 1e-5));
    free(a), free(b), free(c), free(ct), free(ref), free(bt);
}

/* ---- kernels ---- */

static void test_kernels_add_broadcast(void) {
    /* numpy: np.array([[1,2,3],[4,5,6]], 'f4') + np.array([10,20,30], 'f4') */
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, y[6];
    int64_t ad[2] = {2, 3}, bd[1] = {3};
    tk_node t;
    tk_init(&t, "Add", 14, 2, 1);
    t.rin[0] = tk_t(a, MP_DT_FLOAT, 2, ad);
    t.rin[1] = tk_t(b, MP_DT_FLOAT, 1, bd);
    t.rout[0] = tk_t(y, MP_DT_FLOAT, 2, ad);
    T_OK(tk_run(&t));
    float want[6] = {11, 22, 33, 14, 25, 36};
    T_CHECK(tk_close(y, want, 6, 0));
    /* int32 division truncates toward zero; by zero is an error, not a crash */
    int32_t ia[3] = {7, -7, 1}, ib[3] = {2, 2, 0}, iy[3];
    int64_t d3[1] = {3};
    tk_init(&t, "Div", 14, 2, 1);
    t.rin[0] = tk_t(ia, MP_DT_INT32, 1, d3);
    t.rin[1] = tk_t(ib, MP_DT_INT32, 1, d3);
    t.rout[0] = tk_t(iy, MP_DT_INT32, 1, d3);
    T_EQ(tk_run(&t), MP_ERR_USAGE);
    ib[2] = 1;
    T_OK(tk_run(&t));
    T_EQ(iy[0], 3);
    T_EQ(iy[1], -3);
}

static void test_kernels_reduce_softmax(void) {
    /* ReduceSum over axis 1 (input form): [[1,2,3],[4,5,6]] -> [[6],[15]] */
    float x[6] = {1, 2, 3, 4, 5, 6}, y[2];
    int64_t xd[2] = {2, 3}, yd[2] = {2, 1}, axes[1] = {1}, ad[1] = {1};
    tk_node t;
    tk_init(&t, "ReduceSum", 13, 2, 1);
    t.rin[0] = tk_t(x, MP_DT_FLOAT, 2, xd);
    t.rin[1] = tk_t(axes, MP_DT_INT64, 1, ad);
    t.rout[0] = tk_t(y, MP_DT_FLOAT, 2, yd);
    T_OK(tk_run(&t));
    float want[2] = {6, 15};
    T_CHECK(tk_close(y, want, 2, 0));
    /* Softmax (13) over the last axis of [1, 2, 3]: exp(x) / sum */
    float s[3] = {1, 2, 3}, sy[3];
    int64_t sd[1] = {3};
    tk_init(&t, "Softmax", 13, 1, 1);
    t.rin[0] = tk_t(s, MP_DT_FLOAT, 1, sd);
    t.rout[0] = tk_t(sy, MP_DT_FLOAT, 1, sd);
    T_OK(tk_run(&t));
    float sw[3] = {0.09003057f, 0.24472847f, 0.66524096f};
    T_CHECK(tk_close(sy, sw, 3, 1e-6));
}

static void test_kernels_conv_pool(void) {
    /* Conv: x = arange(9).reshape(1,1,3,3), w = ones(1,1,2,2), bias 1 ->
     * [[0+1+3+4, 1+2+4+5], [3+4+6+7, 4+5+7+8]] + 1 */
    float x[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8}, w[4] = {1, 1, 1, 1}, b[1] = {1}, y[4];
    int64_t xd[4] = {1, 1, 3, 3}, wd[4] = {1, 1, 2, 2}, bd[1] = {1}, yd[4] = {1, 1, 2, 2};
    tk_node t;
    tk_init(&t, "Conv", 11, 3, 1);
    t.rin[0] = tk_t(x, MP_DT_FLOAT, 4, xd);
    t.rin[1] = tk_t(w, MP_DT_FLOAT, 4, wd);
    t.rin[2] = tk_t(b, MP_DT_FLOAT, 1, bd);
    t.rout[0] = tk_t(y, MP_DT_FLOAT, 4, yd);
    T_OK(tk_run(&t));
    float want[4] = {9, 13, 21, 25};
    T_CHECK(tk_close(y, want, 4, 0));
    /* MaxPool 2x2 stride 1 with pads 1 at the end: [[4,5,5],[7,8,8],[7,8,8]] */
    float p[9];
    int64_t pd[4] = {1, 1, 3, 3}, ks[2] = {2, 2}, pads[4] = {0, 0, 1, 1};
    tk_init(&t, "MaxPool", 12, 1, 1);
    tk_attr_ints(&t, "kernel_shape", ks, 2);
    tk_attr_ints(&t, "pads", pads, 4);
    t.rin[0] = tk_t(x, MP_DT_FLOAT, 4, xd);
    t.rout[0] = tk_t(p, MP_DT_FLOAT, 4, pd);
    T_OK(tk_run(&t));
    float pw[9] = {4, 5, 5, 7, 8, 8, 7, 8, 8};
    T_CHECK(tk_close(p, pw, 9, 0));
    /* AveragePool 2x2 stride 1, same pads: windows inside (the fast path)
     * and at the border (count_include_pad 0 divides by the points inside) */
    float a[9];
    tk_init(&t, "AveragePool", 19, 1, 1);
    tk_attr_ints(&t, "kernel_shape", ks, 2);
    tk_attr_ints(&t, "pads", pads, 4);
    t.rin[0] = tk_t(x, MP_DT_FLOAT, 4, xd);
    t.rout[0] = tk_t(a, MP_DT_FLOAT, 4, pd);
    T_OK(tk_run(&t));
    float aw[9] = {2, 3, 3.5f, 5, 6, 6.5f, 6.5f, 7.5f, 8};
    T_CHECK(tk_close(a, aw, 9, 1e-6));
}

static void test_kernels_gather_transpose(void) {
    /* Gather axis 0 with a negative index: x[[-1, 0]] of [[1,2],[3,4],[5,6]] */
    float x[6] = {1, 2, 3, 4, 5, 6}, y[4];
    int64_t ix[2] = {-1, 0}, xd[2] = {3, 2}, id[1] = {2}, yd[2] = {2, 2};
    tk_node t;
    tk_init(&t, "Gather", 13, 2, 1);
    tk_attr_i(&t, "axis", 0);
    t.rin[0] = tk_t(x, MP_DT_FLOAT, 2, xd);
    t.rin[1] = tk_t(ix, MP_DT_INT64, 1, id);
    t.rout[0] = tk_t(y, MP_DT_FLOAT, 2, yd);
    T_OK(tk_run(&t));
    float want[4] = {5, 6, 1, 2};
    T_CHECK(tk_close(y, want, 4, 0));
    ix[0] = 3; /* out of range: an error naming the node, no crash */
    T_EQ(tk_run(&t), MP_ERR_USAGE);
    T_CHECK(strstr(mp_last_error(), "n0") != NULL);
    /* Transpose perm (1, 0) of [3, 2] */
    float tt[6];
    int64_t td[2] = {2, 3}, perm[2] = {1, 0};
    tk_init(&t, "Transpose", 13, 1, 1);
    tk_attr_ints(&t, "perm", perm, 2);
    t.rin[0] = tk_t(x, MP_DT_FLOAT, 2, xd);
    t.rout[0] = tk_t(tt, MP_DT_FLOAT, 2, td);
    T_OK(tk_run(&t));
    float tw[6] = {1, 3, 5, 2, 4, 6};
    T_CHECK(tk_close(tt, tw, 6, 0));
}

static void test_kernels_quantize_matmul_integer(void) {
    /* QuantizeLinear: round half to even, saturate: x / 2 + 128 in uint8 */
    float x[5] = {-300, 1, 3, 5, 600};
    uint8_t q[5];
    tk_node t;
    T_OK(tk_quantize(&t, x, 5, 2, 128, q));
    uint8_t want[5] = {0, 128, 130, 130, 255}; /* 0.5 -> 0, 1.5 -> 2, 2.5 -> 2 */
    for (int i = 0; i < 5; i++) T_EQ(q[i], want[i]);
    /* MatMulInteger: (A - 1) @ (B - 0) with A [[2, 3]], B [[4], [5]] -> 1*4 + 2*5 */
    uint8_t a[2] = {2, 3}, az[1] = {1};
    int8_t b[2] = {4, 5};
    int32_t y[1];
    int64_t ad[2] = {1, 2}, bd[2] = {2, 1}, yd[2] = {1, 1};
    tk_init(&t, "MatMulInteger", 10, 3, 1);
    t.rin[0] = tk_t(a, MP_DT_UINT8, 2, ad);
    t.rin[1] = tk_t(b, MP_DT_INT8, 2, bd);
    t.rin[2] = tk_t(az, MP_DT_UINT8, 0, NULL);
    t.rout[0] = tk_t(y, MP_DT_INT32, 2, yd);
    T_OK(tk_run(&t));
    T_EQ(y[0], 14);
}

static void test_kernels_contrib(void) {
    /* SkipLayerNormalization: s = x + skip + bias = [1, 2, 3, 6] per row;
     * mean 3, var (4 + 1 + 0 + 9) / 4 = 3.5; y = (s - 3) / sqrt(3.5 + eps) * 2 + 1 */
    float x[4] = {1, 1, 1, 1}, skip[4] = {0, 1, 2, 5}, g[4] = {2, 2, 2, 2}, be[4] = {1, 1, 1, 1};
    float bi[4] = {0, 0, 0, 0}, y[4], sum[4];
    int64_t xd[2] = {1, 4}, hd[1] = {4};
    tk_node t;
    tk_init(&t, "SkipLayerNormalization", 1, 5, 4);
    t.n.domain = "com.microsoft";
    t.n.out[1] = t.n.out[2] = -1; /* mean and inv_std_var omitted */
    t.rin[0] = tk_t(x, MP_DT_FLOAT, 2, xd);
    t.rin[1] = tk_t(skip, MP_DT_FLOAT, 2, xd);
    t.rin[2] = tk_t(g, MP_DT_FLOAT, 1, hd);
    t.rin[3] = tk_t(be, MP_DT_FLOAT, 1, hd);
    t.rin[4] = tk_t(bi, MP_DT_FLOAT, 1, hd);
    t.rout[0] = tk_t(y, MP_DT_FLOAT, 2, xd);
    t.rout[3] = tk_t(sum, MP_DT_FLOAT, 2, xd);
    T_OK(tk_run(&t));
    double inv = 1.0 / sqrt(3.5 + 1e-5);
    float want[4] = {(float)(-2 * inv * 2 + 1), (float)(-1 * inv * 2 + 1), 1.0f, (float)(3 * inv * 2 + 1)};
    T_CHECK(tk_close(y, want, 4, 1e-6));
    float wsum[4] = {1, 2, 3, 6};
    T_CHECK(tk_close(sum, wsum, 4, 0));
    /* FusedMatMul transB, alpha 0.5: [[1, 2]] @ [[3, 4], [5, 6]]^T * 0.5 = [[5.5, 8.5]] */
    float a[2] = {1, 2}, b[4] = {3, 4, 5, 6}, mm[2];
    int64_t ad[2] = {1, 2}, bd[2] = {2, 2}, yd[2] = {1, 2};
    tk_init(&t, "FusedMatMul", 1, 2, 1);
    t.n.domain = "com.microsoft";
    tk_attr_i(&t, "transB", 1);
    t.attr[t.n.n_attr] = (mp_attr){.name = "alpha", .type = MP_ATTR_FLOAT, .f = 0.5};
    t.n.n_attr++;
    t.rin[0] = tk_t(a, MP_DT_FLOAT, 2, ad);
    t.rin[1] = tk_t(b, MP_DT_FLOAT, 2, bd);
    t.rout[0] = tk_t(mm, MP_DT_FLOAT, 2, yd);
    T_OK(tk_run(&t));
    float mw[2] = {5.5f, 8.5f};
    T_CHECK(tk_close(mm, mw, 2, 0));
}

static void test_kernels_layernorm(void) {
    /* rows [1, 2, 3, 4] and [2, 2, 2, 6]: (x - mean) / sqrt(var + 1e-5) * g + b */
    float x[8] = {1, 2, 3, 4, 2, 2, 2, 6}, g[4] = {1, 2, 1, 1}, b[4] = {0, 0, 1, 0}, y[8], y64[8];
    int64_t xd[2] = {2, 4}, gd[1] = {4};
    tk_node t;
    tk_init(&t, "LayerNormalization", 17, 3, 1);
    t.rin[0] = tk_t(x, MP_DT_FLOAT, 2, xd);
    t.rin[1] = tk_t(g, MP_DT_FLOAT, 1, gd);
    t.rin[2] = tk_t(b, MP_DT_FLOAT, 1, gd);
    t.rout[0] = tk_t(y, MP_DT_FLOAT, 2, xd);
    T_OK(tk_run(&t));
    double i0 = 1 / sqrt(1.25 + 1e-5), i1 = 1 / sqrt(3.0 + 1e-5);
    float want[8] = {(float)(-1.5 * i0), (float)(-0.5 * i0 * 2), (float)(0.5 * i0 + 1), (float)(1.5 * i0),
                     (float)(-1 * i1), (float)(-1 * i1 * 2), (float)(-1 * i1 + 1), (float)(3 * i1)};
    T_CHECK(tk_close(y, want, 8, 1e-6));
    /* the generic path (statistics outputs requested) agrees */
    float mean[2], inv[2];
    int64_t sd[2] = {2, 1};
    tk_init(&t, "LayerNormalization", 17, 3, 3);
    t.rin[0] = tk_t(x, MP_DT_FLOAT, 2, xd);
    t.rin[1] = tk_t(g, MP_DT_FLOAT, 1, gd);
    t.rin[2] = tk_t(b, MP_DT_FLOAT, 1, gd);
    t.rout[0] = tk_t(y64, MP_DT_FLOAT, 2, xd);
    t.rout[1] = tk_t(mean, MP_DT_FLOAT, 2, sd);
    t.rout[2] = tk_t(inv, MP_DT_FLOAT, 2, sd);
    T_OK(tk_run(&t));
    T_CHECK(tk_close(y64, want, 8, 1e-6));
    float wm[2] = {2.5f, 3.0f}, wi[2] = {(float)i0, (float)i1};
    T_CHECK(tk_close(mean, wm, 2, 1e-6));
    T_CHECK(tk_close(inv, wi, 2, 1e-6));
}

/* ---- the fast paths against the plain definitions ---- */

/* The flat offset in data (strides xs) of element e of a tensor of dims
 * idims, its coordinate on axis replaced by v: the division per dim the
 * walk of GatherElements / ScatterElements replaced. */
static int64_t tk_elem_off(int r, const int64_t *idims, int64_t e, const int64_t *xs, int axis, int64_t v) {
    int64_t off = 0;
    for (int d = r - 1; d >= 0; d--) {
        int64_t c = e % idims[d];
        e /= idims[d];
        off += (d == axis ? v : c) * xs[d];
    }
    return off;
}

/* GatherElements (3 tensors) or ScatterElements (4: data, indices,
 * updates, out) along axis over rank-4 tensors */
static void tk_elements(tk_node *t, const char *op, int axis, int type, void *x, const int64_t *xdims, int64_t *ix,
                        const int64_t *idims, void *u, void *y) {
    bool sc = u != NULL;
    tk_init(t, op, 13, sc ? 3 : 2, 1);
    tk_attr_i(t, "axis", axis);
    t->rin[0] = tk_t(x, type, 4, xdims);
    t->rin[1] = tk_t(ix, MP_DT_INT64, 4, idims);
    if (sc) t->rin[2] = tk_t(u, type, 4, idims);
    t->rout[0] = tk_t(y, type, 4, sc ? xdims : idims);
}

static void test_kernels_elements_walk(void) {
    /* data [2,3,4,5]; indices [2,2,3,4] (shorter than data off the axis,
     * as ONNX allows), every axis, float (4-byte path) and double; the
     * index values pseudo-random, some negative */
    static float xf[120], yf[120], gf[48];
    static double xd[120], yd[120], gd[48];
    int64_t ix[48], xdims[4] = {2, 3, 4, 5}, idims[4] = {2, 2, 3, 4}, xs[4] = {60, 20, 5, 1};
    for (int i = 0; i < 120; i++) xf[i] = (float)(i * 7 % 31), xd[i] = i * 0.5;
    for (int axis = 0; axis < 4; axis++) {
        uint32_t h = 12345u + (uint32_t)axis;
        for (int i = 0; i < 48; i++) {
            h = h * 1103515245u + 12345u;
            int64_t v = (int64_t)((h >> 8) % (uint32_t)xdims[axis]);
            ix[i] = (h >> 20) & 1 ? v - xdims[axis] : v;   /* negative counts from the end */
        }
        for (int dt = 0; dt < 2; dt++) {
            void *x = dt ? (void *)xd : (void *)xf, *y = dt ? (void *)yd : (void *)yf, *g = dt ? (void *)gd : (void *)gf;
            int type = dt ? MP_DT_DOUBLE : MP_DT_FLOAT;
            tk_node t;
            tk_elements(&t, "GatherElements", axis, type, x, xdims, ix, idims, NULL, g);
            T_OK(tk_run(&t));
            bool ok = true;
            for (int e = 0; e < 48; e++) {
                int64_t v = ix[e] < 0 ? ix[e] + xdims[axis] : ix[e];
                int64_t at = tk_elem_off(4, idims, e, xs, axis, v);
                ok &= dt ? gd[e] == xd[at] : gf[e] == xf[at];
            }
            T_CHECK(ok);
            /* ScatterElements of the gathered values back into zeros: the
             * naive scatter in the same order (later writes win) */
            static float zf[120], wf[120];
            static double zd[120], wd[120];
            memset(zf, 0, sizeof zf), memset(zd, 0, sizeof zd), memset(wf, 0, sizeof wf), memset(wd, 0, sizeof wd);
            tk_elements(&t, "ScatterElements", axis, type, dt ? (void *)zd : (void *)zf, xdims, ix, idims, g, y);
            T_OK(tk_run(&t));
            for (int e = 0; e < 48; e++) {
                int64_t v = ix[e] < 0 ? ix[e] + xdims[axis] : ix[e];
                int64_t at = tk_elem_off(4, idims, e, xs, axis, v);
                if (dt) wd[at] = gd[e];
                else wf[at] = gf[e];
            }
            T_CHECK(dt ? memcmp(yd, wd, sizeof wd) == 0 : memcmp(yf, wf, sizeof wf) == 0);
        }
    }
    /* rows scattered whole (an index expanded over the inner dims: one row
     * copy each), then the same with one index differing inside a row (the
     * element walk): both as the plain definition, later rows winning */
    for (int odd = 0; odd < 2; odd++) {
        static float d0[120], u0[120], got[120], want[120];
        int64_t rix[120];   /* indices [2, 3, 4, 5] into data [2, 3, 4, 5] */
        for (int i = 0; i < 120; i++) d0[i] = (float)i, u0[i] = (float)(1000 + i);
        for (int i = 0; i < 120; i++) rix[i] = i < 60 ? 1 : -1;   /* both rows to data row 1 */
        if (odd) rix[67] = 0;
        tk_node t;
        tk_elements(&t, "ScatterElements", 0, MP_DT_FLOAT, d0, xdims, rix, xdims, u0, got);
        T_OK(tk_run(&t));
        memcpy(want, d0, sizeof want);
        for (int e = 0; e < 120; e++) want[tk_elem_off(4, xdims, e, xs, 0, rix[e] < 0 ? rix[e] + 2 : rix[e])] = u0[e];
        T_CHECK(memcmp(got, want, sizeof want) == 0);
    }
    /* an index out of range is refused, naming it */
    ix[5] = 9;
    tk_node t;
    tk_elements(&t, "GatherElements", 3, MP_DT_FLOAT, xf, xdims, ix, idims, NULL, gf);
    T_EQ(tk_run(&t), MP_ERR_USAGE);
    T_CHECK(strstr(mp_last_error(), "index 9 out of range [0, 5)") != NULL);
}

static void test_kernels_copy_fill(void) {
    /* mp_kfill: a value whose bytes differ (doubling copies), one whose
     * bytes are all one (memset), odd counts */
    float f[37];
    float one5 = 1.5f, zero = 0.0f;
    mp_kfill(f, 37, &one5, sizeof one5);
    bool ok = true;
    for (int i = 0; i < 37; i++) ok &= f[i] == 1.5f;
    mp_kfill(f, 5, &zero, sizeof zero);
    for (int i = 0; i < 5; i++) ok &= f[i] == 0.0f;
    ok &= f[5] == 1.5f;
    uint8_t three[3] = {1, 2, 3}, b[3 * 11];
    mp_kfill(b, 11, three, 3);
    for (int i = 0; i < 33; i++) ok &= b[i] == three[i % 3];
    T_CHECK(ok);
    /* mp_kcopy_strided against the plain definition: a broadcast (Expand
     * [3,1,1,1] -> [3,2,4,5]: the three inner dims merge into one run of
     * 40 copies), a contiguous run with a size-1 dim, a reversed axis, a
     * transpose */
    float src[120], out[120], want[120];
    for (int i = 0; i < 120; i++) src[i] = (float)i;
    struct {
        int rank;
        int64_t dims[4], istr[4], base;
    } cases[] = {
        {4, {3, 2, 4, 5}, {1, 0, 0, 0}, 0},
        {4, {2, 1, 3, 20}, {60, 999, 20, 1}, 0},
        {3, {2, 3, 20}, {60, 20, -1}, 19},
        {2, {5, 24}, {1, 5}, 0},
        {4, {2, 3, 4, 5}, {0, 0, 5, 1}, 3},
        {2, {3, 4}, {5, 5}, 0},   /* equal strides that do not continue each other: no merge */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int64_t n = 1, idx[4] = {0};
        for (int d = 0; d < cases[c].rank; d++) n *= cases[c].dims[d];
        for (int64_t e = 0; e < n; e++) {
            int64_t r = e, off = cases[c].base;
            for (int d = cases[c].rank - 1; d >= 0; d--) {
                idx[d] = r % cases[c].dims[d];
                r /= cases[c].dims[d];
                off += idx[d] * cases[c].istr[d];
            }
            want[e] = src[off];
        }
        memset(out, 0, sizeof out);
        mp_kcopy_strided(out, src, sizeof(float), cases[c].rank, cases[c].dims, cases[c].istr, cases[c].base);
        if (memcmp(out, want, (size_t)n * sizeof(float)) != 0) {
            fprintf(stderr, "    case %zu differs\n", c);
            T_CHECK(false);
        }
    }
}

/* RoiAlign as ONNX defines it, one sample at a time (what the kernel
 * computed before it kept the taps per bin): y[r, c, ph, pw]. */
static double tk_roialign_ref(const float *x, int64_t C, int64_t H, int64_t W, const float *roi, int64_t b,
                              int64_t c, int64_t ph, int64_t pw, int64_t PH, int64_t PW, int64_t sr,
                              double scale, bool half, bool is_max) {
    double off = half ? 0.5 : 0;
    double x1 = roi[0] * scale - off, y1 = roi[1] * scale - off, x2 = roi[2] * scale - off, y2 = roi[3] * scale - off;
    double rw = x2 - x1, rh = y2 - y1;
    if (!half) rw = fmax(rw, 1.0), rh = fmax(rh, 1.0);
    double bh = rh / (double)PH, bw = rw / (double)PW;
    int64_t gh = sr > 0 ? sr : (int64_t)ceil(rh / (double)PH), gw = sr > 0 ? sr : (int64_t)ceil(rw / (double)PW);
    const float *p = x + (b * C + c) * H * W;
    double acc = is_max ? -INFINITY : 0;
    for (int64_t iy = 0; iy < gh; iy++)
        for (int64_t ix = 0; ix < gw; ix++) {
            double yy = y1 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
            double xx = x1 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
            double v = 0;
            if (!(yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W)) {
                yy = fmax(yy, 0), xx = fmax(xx, 0);
                int64_t yl = (int64_t)yy, xl = (int64_t)xx, yh, xh;
                if (yl >= H - 1) yh = yl = H - 1, yy = (double)yl;
                else yh = yl + 1;
                if (xl >= W - 1) xh = xl = W - 1, xx = (double)xl;
                else xh = xl + 1;
                double ly = yy - (double)yl, lx = xx - (double)xl, hy = 1 - ly, hx = 1 - lx;
                double v1 = hy * hx * p[yl * W + xl], v2 = hy * lx * p[yl * W + xh];
                double v3 = ly * hx * p[yh * W + xl], v4 = ly * lx * p[yh * W + xh];
                v = is_max ? fmax(fmax(v1, v2), fmax(v3, v4)) : v1 + v2 + v3 + v4;
            }
            acc = is_max ? (iy || ix ? fmax(acc, v) : v) : acc + v;
        }
    int64_t cnt = gh * gw > 0 ? gh * gw : 1;
    return is_max ? (gh * gw > 0 ? acc : 0) : acc / (double)cnt;
}

static void test_kernels_roialign(void) {
    /* X [2,3,9,11]; five rois on both images, one past the map's edge and
     * one degenerate; 2 x 3 bins; sampling 0 (adaptive) and 2; avg and
     * max; half_pixel and output_half_pixel: every element equal to the
     * one-sample-at-a-time definition */
    static float x[2 * 3 * 9 * 11], y[5 * 3 * 2 * 3];
    for (int i = 0; i < 2 * 3 * 9 * 11; i++) x[i] = (float)((i * 37) % 101) / 10.0f - 3.0f;
    float rois[20] = {0, 0, 8, 6, 1.5f, 2.25f, 17, 13, -3, -2, 4, 30, 5, 5, 5, 5, 2, 1, 21, 17};
    int64_t bi[5] = {0, 1, 1, 0, 1};
    int64_t xdims[4] = {2, 3, 9, 11}, rdims[2] = {5, 4}, bdims[1] = {5}, ydims[4] = {5, 3, 2, 3};
    const char *modes[2] = {"avg", "max"}, *ctm[2] = {"half_pixel", "output_half_pixel"};
    for (int sr = 0; sr <= 2; sr += 2)
        for (int mo = 0; mo < 2; mo++)
            for (int h = 0; h < 2; h++) {
                tk_node t;
                tk_init(&t, "RoiAlign", 16, 3, 1);
                tk_attr_i(&t, "sampling_ratio", sr);
                tk_attr_f(&t, "spatial_scale", 0.5);
                tk_attr_s(&t, "mode", modes[mo]);
                tk_attr_s(&t, "coordinate_transformation_mode", ctm[h]);
                t.rin[0] = tk_t(x, MP_DT_FLOAT, 4, xdims);
                t.rin[1] = tk_t(rois, MP_DT_FLOAT, 2, rdims);
                t.rin[2] = tk_t(bi, MP_DT_INT64, 1, bdims);
                t.rout[0] = tk_t(y, MP_DT_FLOAT, 4, ydims);
                T_OK(tk_run(&t));
                bool ok = true;
                for (int r = 0; r < 5; r++)
                    for (int c = 0; c < 3; c++)
                        for (int ph = 0; ph < 2; ph++)
                            for (int pw = 0; pw < 3; pw++) {
                                float want = (float)tk_roialign_ref(x, 3, 9, 11, rois + 4 * r, bi[r], c, ph, pw, 2,
                                                                    3, sr, 0.5, h == 0, mo == 1);
                                float got = y[((r * 3 + c) * 2 + ph) * 3 + pw];
                                if (got != want) {
                                    fprintf(stderr, "    sr %d %s %s roi %d c %d bin %d,%d: %g, expected %g\n", sr,
                                            modes[mo], ctm[h], r, c, ph, pw, (double)got, (double)want);
                                    ok = false;
                                }
                            }
                T_CHECK(ok);
            }
}

/* InstanceNormalization's fp32 planes (split across threads) against the
 * definition computed here the generic path's way: mean and variance of
 * each (n, c) plane in double, the normalised value stored as float, then
 * scale and bias in double; equal to the last bit */
static void test_kernels_instancenorm(void) {
    static float x[2 * 3 * 35], y[2 * 3 * 35];
    float sc[3] = {0.5f, -1.25f, 2.0f}, b[3] = {0.1f, 0.0f, -3.0f};
    int64_t xd[4] = {2, 3, 5, 7}, cd[1] = {3};
    for (int i = 0; i < 210; i++) x[i] = (float)((i * 53) % 97) / 7.0f - 6.0f;
    tk_node t;
    tk_init(&t, "InstanceNormalization", 6, 3, 1);
    tk_attr_f(&t, "epsilon", 1e-3);
    t.rin[0] = tk_t(x, MP_DT_FLOAT, 4, xd);
    t.rin[1] = tk_t(sc, MP_DT_FLOAT, 1, cd);
    t.rin[2] = tk_t(b, MP_DT_FLOAT, 1, cd);
    t.rout[0] = tk_t(y, MP_DT_FLOAT, 4, xd);
    T_OK(tk_run(&t));
    bool ok = true;
    for (int g = 0; g < 6; g++) {
        const float *p = x + g * 35;
        double s = 0, s2 = 0;
        for (int j = 0; j < 35; j++) s += p[j];
        double mean = s / 35;
        for (int j = 0; j < 35; j++) s2 += (p[j] - mean) * (p[j] - mean);
        double inv = 1.0 / sqrt(s2 / 35 + 1e-3);
        for (int j = 0; j < 35; j++) {
            float tn = (float)((p[j] - mean) * inv);
            ok &= y[g * 35 + j] == (float)((double)tn * sc[g % 3] + b[g % 3]);
        }
    }
    T_CHECK(ok);
}

/* NonZero's direct reads (bytes, fp32) and the getter (int32) give the
 * same coordinates; -0 is zero, NaN is not */
static void test_kernels_nonzero(void) {
    float f[6] = {0.0f, -0.0f, 2.5f, NAN, 0.0f, -1.0f};
    uint8_t b[6] = {0, 0, 1, 1, 0, 1};
    int32_t i[6] = {0, 0, 7, -3, 0, 1};
    int64_t xd[2] = {2, 3}, want[6] = {0, 1, 1, 2, 0, 2};   /* [2, 3]: rows then columns */
    void *data[3] = {f, b, i};
    int types[3] = {MP_DT_FLOAT, MP_DT_BOOL, MP_DT_INT32};
    for (int c = 0; c < 3; c++) {
        int64_t out[6] = {0}, od[2] = {2, 3};
        tk_node t;
        tk_init(&t, "NonZero", 13, 1, 1);
        t.rin[0] = tk_t(data[c], types[c], 2, xd);
        t.rout[0] = tk_t(out, MP_DT_INT64, 2, od);
        T_OK(tk_run(&t));
        T_CHECK(memcmp(out, want, sizeof want) == 0);
    }
}

/* HardSigmoid and HardSwish's fp32 loop against their double definition
 * (ONNX: max(0, min(1, alpha x + beta)); x * that at 1/6, 1/2), NaN
 * included (fmin(1, NaN) is 1) */
static void test_kernels_hard_activations(void) {
    float x[9] = {-4.0f, -2.5f, -0.3f, 0.0f, 0.7f, 2.5f, 3.1f, 1e30f, NAN}, y[9];
    int64_t d[1] = {9};
    for (int op = 0; op < 2; op++) {
        tk_node t;
        tk_init(&t, op ? "HardSwish" : "HardSigmoid", op ? 14 : 6, 1, 1);
        if (!op) tk_attr_f(&t, "alpha", 0.3), tk_attr_f(&t, "beta", 0.4);
        t.rin[0] = tk_t(x, MP_DT_FLOAT, 1, d);
        t.rout[0] = tk_t(y, MP_DT_FLOAT, 1, d);
        T_OK(tk_run(&t));
        for (int i = 0; i < 9; i++) {
            double v = x[i];
            double want = op ? v * fmax(0.0, fmin(1.0, v / 6.0 + 0.5)) : fmax(0.0, fmin(1.0, 0.3 * v + 0.4));
            float w = (float)want;
            T_CHECK(y[i] == w || (isnan(y[i]) && isnan(w)));
        }
    }
}

/* Data a fuzzer or a broken model gives: NaN and infinities into integer
 * stores, extreme pads and lengths. Defined results or a message naming
 * the node, never undefined behaviour (make test-sanitize runs the whole
 * backend suite this way: conformance --poison). */
static void test_kernels_adversarial(void) {
    /* QuantizeLinear: NaN -> 0, +inf -> 255, -inf -> 0 (zero point 0) */
    float x[3] = {NAN, INFINITY, -INFINITY};
    uint8_t q[3] = {7, 7, 7};
    tk_node t;
    T_OK(tk_quantize(&t, x, 3, 1, 0, q));
    T_EQ(q[0], 0);
    T_EQ(q[1], 255);
    T_EQ(q[2], 0);
    /* the one float-to-index conversion: NaN 0, saturated at +-2^62 */
    T_EQ(mp_kf2i(NAN), 0);
    T_EQ(mp_kf2i(1e300), INT64_C(1) << 62);
    T_EQ(mp_kf2i(-INFINITY), -(INT64_C(1) << 62));
    T_EQ(mp_kf2i(-2.9), -2);
    /* Pad with a pad near INT64_MIN: refused with the axis named */
    float px[2] = {1, 2}, py[2];
    int64_t pd[1] = {2}, pads[2] = {INT64_MIN, INT64_MAX}, pn[1] = {2};
    tk_init(&t, "Pad", 18, 2, 1);
    t.rin[0] = tk_t(px, MP_DT_FLOAT, 1, pd);
    t.rin[1] = tk_t(pads, MP_DT_INT64, 1, pn);
    t.rout[0] = tk_t(py, MP_DT_FLOAT, 1, pd);
    T_EQ(tk_run(&t), MP_ERR_SHAPE);
    T_CHECK(strstr(mp_last_error(), "out of range") != NULL);
    /* ReverseSequence: a length past the time axis, then a bad axis */
    float rx[4] = {1, 2, 3, 4}, ry[4];
    int64_t rd[2] = {2, 2}, lens[2] = {INT64_MAX, 1}, ld[1] = {2};
    tk_init(&t, "ReverseSequence", 10, 2, 1);
    t.rin[0] = tk_t(rx, MP_DT_FLOAT, 2, rd);
    t.rin[1] = tk_t(lens, MP_DT_INT64, 1, ld);
    t.rout[0] = tk_t(ry, MP_DT_FLOAT, 2, rd);
    T_EQ(tk_run(&t), MP_ERR_SHAPE);
    T_CHECK(strstr(mp_last_error(), "sequence_lens[0]") != NULL);
    lens[0] = 2;
    T_OK(tk_run(&t));
    float rw[4] = {3, 2, 1, 4}; /* time axis 0: column 0 reversed over 2 steps, column 1 over 1 */
    T_CHECK(tk_close(ry, rw, 4, 0));
    tk_attr_i(&t, "time_axis", 38);
    T_EQ(tk_run(&t), MP_ERR_SHAPE);
}

/* ScatterND without a reduction: a slice assignment as PyTorch exports it
 * (data [2,3,4], a tuple per element of x[:, 1:3, 1:4]: runs of 3 along
 * the last dim, one memcpy each), some tuples negative, one out of order,
 * one given twice (the later update, the kernel running on one thread);
 * each element against the plain definition. Then tuples of 2 (slices of
 * 4 elements), and an index out of range refused. */
static void test_kernels_scatter_nd_runs(void) {
    static float d[24], u[15], got[24], want[24];
    int64_t ix[15 * 3], n = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 1; j < 3; j++)
            for (int c = 1; c < 4; c++) {
                ix[n * 3] = i, ix[n * 3 + 1] = j == 2 && c == 3 ? -1 : j, ix[n * 3 + 2] = c == 2 && i ? -2 : c;
                n++;
            }
    ix[n * 3] = 0, ix[n * 3 + 1] = 0, ix[n * 3 + 2] = 0, n++;   /* out of order */
    ix[n * 3] = 1, ix[n * 3 + 1] = 1, ix[n * 3 + 2] = 3, n++;   /* again: the later wins */
    ix[n * 3] = 1, ix[n * 3 + 1] = 1, ix[n * 3 + 2] = 1, n++;   /* the same row, not the next element */
    int64_t xdims[3] = {2, 3, 4}, idims[2] = {n, 3}, udims[1] = {n};
    for (int i = 0; i < 24; i++) d[i] = (float)i;
    for (int i = 0; i < n; i++) u[i] = (float)(100 + i);
    tk_node t;
    tk_init(&t, "ScatterND", 16, 3, 1);
    t.rin[0] = tk_t(d, MP_DT_FLOAT, 3, xdims);
    t.rin[1] = tk_t(ix, MP_DT_INT64, 2, idims);
    t.rin[2] = tk_t(u, MP_DT_FLOAT, 1, udims);
    t.rout[0] = tk_t(got, MP_DT_FLOAT, 3, xdims);
    T_OK(tk_run(&t));
    memcpy(want, d, sizeof want);
    for (int e = 0; e < n; e++) {
        int64_t a = ix[e * 3], b = ix[e * 3 + 1] < 0 ? ix[e * 3 + 1] + 3 : ix[e * 3 + 1],
                c = ix[e * 3 + 2] < 0 ? ix[e * 3 + 2] + 4 : ix[e * 3 + 2];
        want[a * 12 + b * 4 + c] = u[e];
    }
    T_CHECK(memcmp(got, want, sizeof want) == 0);
    /* tuples of 2: each a slice of 4 */
    int64_t ix2[3 * 2] = {1, 2, 0, 0, -1, 1}, i2dims[2] = {3, 2}, u2dims[2] = {3, 4};
    float u2[12];
    for (int i = 0; i < 12; i++) u2[i] = (float)(200 + i);
    t.rin[1] = tk_t(ix2, MP_DT_INT64, 2, i2dims);
    t.rin[2] = tk_t(u2, MP_DT_FLOAT, 2, u2dims);
    T_OK(tk_run(&t));
    memcpy(want, d, sizeof want);
    memcpy(want + 1 * 12 + 2 * 4, u2, 4 * sizeof(float));
    memcpy(want + 0, u2 + 4, 4 * sizeof(float));
    memcpy(want + 1 * 12 + 1 * 4, u2 + 8, 4 * sizeof(float));
    T_CHECK(memcmp(got, want, sizeof want) == 0);
    ix2[3] = 3; /* [0, 3]: dim 1 has 3 */
    T_EQ(tk_run(&t), MP_ERR_USAGE);
    T_CHECK(strstr(mp_last_error(), "index 3 out of range [0, 3)") != NULL);
}

MP_TESTS(kernels){
    {"layernorm", test_kernels_layernorm},
    {"contrib", test_kernels_contrib},
    {"half_bf16_fp8", test_kernels_half_bf16_fp8},
    {"bcast_rows", test_kernels_bcast_rows},
    {"gemm", test_kernels_gemm},
    {"add_broadcast", test_kernels_add_broadcast},
    {"reduce_softmax", test_kernels_reduce_softmax},
    {"conv_pool", test_kernels_conv_pool},
    {"gather_transpose", test_kernels_gather_transpose},
    {"quantize_matmul_integer", test_kernels_quantize_matmul_integer},
    {"adversarial", test_kernels_adversarial},
    {"elements_walk", test_kernels_elements_walk},
    {"copy_fill", test_kernels_copy_fill},
    {"roialign", test_kernels_roialign},
    {"hard_activations", test_kernels_hard_activations},
    {"instancenorm", test_kernels_instancenorm},
    {"nonzero", test_kernels_nonzero},
    {"scatter_nd_runs", test_kernels_scatter_nd_runs},
};
MP_TESTS_END(kernels)
