/* The oneDNN kernels (src/run/dnnl.c), each driven directly through an
 * mp_kctx set up by hand, against plain reference loops: hand-computed
 * cases and random data. Fusion (Conv+BatchNorm+Add+Relu, MatMul+bias+
 * activation) is checked against the unfused reference. */
#include <math.h>
#include <stdlib.h>

#include "modelprof.h"
#include "run/blas.h"
#include "run/dnnl.h"
#include "run/dnnl_int.h"
#include "run/run.h"
#include "ops/kernel.h"
#include "ops/scalar.h"
#include "tbuild.h"
#include "test.h"

#define F MP_DT_FLOAT
#define MAXV 16

/* A hand-made kernel context: k first, so mp_kfuse below can find the rest. */
typedef struct tk {
    mp_kctx k;
    mp_model *m;
    mp_rtensor in[MAXV], out[2];
    int outv;                 /* value the kernel's output 0 is now */
    int fused[8], n_fused;
    const char *names[MAXV];  /* data given by value name */
    float *data[MAXV];
    int n_data;
    void *scratch;
} tk;

static float *tk_find(tk *t, const char *name) {
    for (int i = 0; i < t->n_data; i++)
        if (strcmp(t->names[i], name) == 0) return t->data[i];
    return NULL;
}

static void tk_rt(tk *t, mp_rtensor *r, int v) {
    memset(r, 0, sizeof *r);
    if (v < 0) return;
    const mp_value *val = &t->m->graph->values[v];
    r->dtype = val->dtype;
    r->rank = val->rank;
    r->dims = val->dims;
    r->numel = mp_value_numel(val);
    r->data = tk_find(t, val->name);
}

/* The executor's fusion as the contract describes it (the real one lives
 * with the planner; a test of the kernels alone needs only this much): the
 * absorbed node's other inputs are appended, its output becomes ours. */
static mp_status tk_kfuse(mp_kctx *k, int node) {
    tk *t = (tk *)k;
    const mp_node *c = &t->m->graph->nodes[node];
    if (t->n_fused >= 8) return MP_ERR_USAGE;
    for (int j = 0; j < c->n_in; j++) {
        if (c->in[j] == t->outv) continue;
        if (k->n_in >= MAXV) return MP_ERR_USAGE;
        mp_rtensor *r = &t->in[k->n_in++];
        tk_rt(t, r, c->in[j]);
        if (c->in[j] >= 0 && !(t->m->graph->values[c->in[j]].flags & MP_VAL_INIT)) r->data = NULL;
    }
    t->outv = c->out[0];
    tk_rt(t, &t->out[0], c->out[0]);
    t->fused[t->n_fused++] = node;
    return MP_OK;
}

/* The executor as these tests play it: fusion only (tk_kfuse) */
static const mp_kexec tk_exec = {.fuse = tk_kfuse};

static void tk_give(tk *t, const char *name, float *d) {
    t->names[t->n_data] = name;
    t->data[t->n_data++] = d;
}

/* Prepare node `node`'s oneDNN kernel (data given so far: constants). */
static const mp_kernel *tk_prepare(tk *t, mp_model *m, int node, bool fuse) {
    t->m = m;
    const mp_node *n = &m->graph->nodes[node];
    const mp_kernel *kern = mp_dnnl_kernel(m->graph, n);
    T_CHECK(kern != NULL);
    if (!kern) return NULL;
    memset(&t->k, 0, sizeof t->k);
    t->k.n = n;
    t->k.g = m->graph;
    t->k.n_in = n->n_in;
    t->k.n_out = n->n_out;
    t->k.in = t->in;
    t->k.out = t->out;
    t->k.threads = 2;
    t->k.fuse = fuse;
    t->k.exec = &tk_exec;
    for (int i = 0; i < n->n_in; i++) tk_rt(t, &t->in[i], n->in[i]);
    for (int i = 0; i < n->n_out && i < 2; i++) tk_rt(t, &t->out[i], n->out[i]);
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] >= 0 && !(m->graph->values[n->in[i]].flags & MP_VAL_INIT)) t->in[i].data = NULL;
    t->outv = n->out[0];
    size_t scratch = 0;
    T_OK(kern->prepare(&t->k, &scratch));
    t->scratch = NULL;
    if (scratch) T_CHECK(posix_memalign(&t->scratch, 64, scratch) == 0);
    t->k.scratch = t->scratch;
    return kern;
}

/* Point every input and output at its data and run. */
static void tk_run(tk *t, const mp_kernel *kern) {
    const mp_graph *g = t->m->graph;
    const mp_node *n = t->k.n;
    for (int i = 0; i < n->n_in; i++) tk_rt(t, &t->in[i], n->in[i]);
    int at = n->n_in;
    for (int f = 0; f < t->n_fused; f++) {
        const mp_node *c = &g->nodes[t->fused[f]];
        int prev = f == 0 ? n->out[0] : g->nodes[t->fused[f - 1]].out[0];
        for (int j = 0; j < c->n_in; j++)
            if (c->in[j] != prev) tk_rt(t, &t->in[at++], c->in[j]);
    }
    T_EQ(at, t->k.n_in);
    tk_rt(t, &t->out[0], t->outv);
    T_OK(kern->run(&t->k));
}

static void tk_done(tk *t, const mp_kernel *kern) {
    if (kern && kern->release) kern->release(t->k.state);
    free(t->scratch);
}

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * 0x1.0p-53) * 2.0f - 1.0f;
}
static float *rnd(int64_t n) {
    float *p = malloc((size_t)n * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = frand();
    return p;
}
static float *zeros(int64_t n) { return calloc((size_t)n, sizeof(float)); }

/* relative L2 error of got against want */
static double rel_l2(const float *got, const float *want, int64_t n) {
    double e = 0, w = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        e += d * d;
        w += (double)want[i] * want[i];
    }
    return sqrt(e / (w > 0 ? w : 1));
}
#define T_CLOSE(got, want, n)                                                 \
    do {                                                                      \
        double t_e_ = rel_l2(got, want, n);                                   \
        if (!(t_e_ <= 1e-5)) mp_t_fail(__FILE__, __LINE__, "relative L2 error %g", t_e_); \
    } while (0)

/* ---- references ---- */

static void ref_conv2d(const float *x, const float *w, const float *b, float *y, int N, int C, int H,
                       int W, int O, int kh, int kw, int G, int s, int p, int d, int OH, int OW) {
    int cg = C / G, og = O / G;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double acc = b ? b[o] : 0;
                    int gi = o / og;
                    for (int c = 0; c < cg; c++)
                        for (int i = 0; i < kh; i++)
                            for (int j = 0; j < kw; j++) {
                                int ih = oh * s - p + i * d, iw = ow * s - p + j * d;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                acc += (double)x[((n * C + gi * cg + c) * H + ih) * W + iw] *
                                       w[((o * cg + c) * kh + i) * kw + j];
                            }
                    y[((n * O + o) * OH + oh) * OW + ow] = (float)acc;
                }
}

static void ref_matmul(const float *a, const float *b, float *y, int M, int K, int N) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int q = 0; q < K; q++) acc += (double)a[i * K + q] * b[q * N + j];
            y[i * N + j] = (float)acc;
        }
}

/* ---- Conv ---- */

static void test_conv_hand(void) {
    /* 1x1x3x3 input, 2x2 all-ones kernel, bias 10: each output sums a window */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 1, 3, 3));
    tb_weight(m, "w", F, 4, TB_DIMS(1, 1, 2, 2));
    tb_weight(m, "b", F, 1, TB_DIMS(1));
    int c = tb_node(m, "Conv", "x,w,b", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 1, 1, 1}, b[1] = {10}, y[4];
    tk t = {0};
    tk_give(&t, "x", x);
    tk_give(&t, "w", w);
    tk_give(&t, "b", b);
    tk_give(&t, "y", y);
    const mp_kernel *kern = tk_prepare(&t, m, c, true);
    if (kern) {
        T_EQ_STR(kern->name, "onednn:conv");
        tk_run(&t, kern);
        float want[4] = {22, 26, 34, 38};
        for (int i = 0; i < 4; i++) T_CHECK(y[i] == want[i]);
    }
    tk_done(&t, kern);
    tb_done(m, p);
}

static void conv_random(int N, int C, int H, int O, int k, int G, int s, int pad, int dil) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(N, C, H, H));
    tb_weight(m, "w", F, 4, TB_DIMS(O, C / G, k, k));
    tb_weight(m, "b", F, 1, TB_DIMS(O));
    int c = tb_node(m, "Conv", "x,w,b", "y");
    tb_attr_i(m, c, "group", G);
    tb_attr_ints(m, c, "strides", 2, TB_DIMS(s, s));
    tb_attr_ints(m, c, "pads", 4, TB_DIMS(pad, pad, pad, pad));
    tb_attr_ints(m, c, "dilations", 2, TB_DIMS(dil, dil));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    int OH = (int)tb_val(m, "y")->dims[2];
    int64_t ny = (int64_t)N * O * OH * OH;
    float *x = rnd((int64_t)N * C * H * H), *w = rnd((int64_t)O * (C / G) * k * k), *b = rnd(O);
    float *y = zeros(ny), *want = zeros(ny);
    tk t = {0};
    tk_give(&t, "x", x);
    tk_give(&t, "w", w);
    tk_give(&t, "b", b);
    tk_give(&t, "y", y);
    const mp_kernel *kern = tk_prepare(&t, m, c, true);
    if (kern) {
        tk_run(&t, kern);
        ref_conv2d(x, w, b, want, N, C, H, H, O, k, k, G, s, pad, dil, OH, OH);
        T_CLOSE(y, want, ny);
        /* a second run into another buffer (handles reset per run) */
        float *y2 = zeros(ny);
        t.data[3] = y2;
        tk_run(&t, kern);
        T_CLOSE(y2, want, ny);
        free(y2);
    }
    tk_done(&t, kern);
    free(x), free(w), free(b), free(y), free(want);
    tb_done(m, p);
}

static void test_conv_random(void) {
    conv_random(1, 8, 10, 16, 3, 1, 1, 1, 1);
    conv_random(2, 8, 9, 8, 3, 4, 2, 2, 2);   /* grouped, strided, dilated */
    conv_random(1, 16, 12, 16, 3, 16, 1, 1, 1); /* depthwise */
    conv_random(1, 32, 7, 64, 1, 1, 1, 0, 1);   /* pointwise */
}

/* Conv -> BatchNormalization -> Add(residual) -> Relu, fused and not */
static void conv_bn_add_relu(bool fuse) {
    const int C = 16, H = 8, O = 16;
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, C, H, H));
    tb_input(m, "r", F, 4, TB_DIMS(1, O, H, H));
    tb_weight(m, "w", F, 4, TB_DIMS(O, C, 3, 3));
    const char *bn[4] = {"g", "be", "mu", "var"};
    for (int i = 0; i < 4; i++) tb_weight(m, bn[i], F, 1, TB_DIMS(O));
    int c = tb_node(m, "Conv", "x,w", "y");
    tb_attr_ints(m, c, "pads", 4, TB_DIMS(1, 1, 1, 1));
    int nb = tb_node(m, "BatchNormalization", "y,g,be,mu,var", "z");
    tb_attr_f(m, nb, "epsilon", 1e-3);
    tb_node(m, "Add", "r,z", "s");
    tb_node(m, "Relu", "s", "out");
    tb_output(m, "out");
    mp_profile *p = tb_prof(m);
    int64_t ny = O * H * H;
    float *x = rnd(C * H * H), *r = rnd(ny), *w = rnd(O * C * 9), *prm[4];
    for (int i = 0; i < 4; i++) {
        prm[i] = rnd(O);
        if (i == 3)
            for (int j = 0; j < O; j++) prm[i][j] = prm[i][j] * prm[i][j] + 0.5f;
    }
    float *y = zeros(ny), *out = zeros(ny), *want = zeros(ny);
    tk t = {0};
    tk_give(&t, "x", x);
    tk_give(&t, "r", r);
    tk_give(&t, "w", w);
    for (int i = 0; i < 4; i++) tk_give(&t, bn[i], prm[i]);
    tk_give(&t, "y", y);
    tk_give(&t, "out", out);
    const mp_kernel *kern = tk_prepare(&t, m, c, fuse);
    if (kern) {
        T_EQ(t.n_fused, fuse ? 3 : 0);
        tk_run(&t, kern);
        ref_conv2d(x, w, NULL, want, 1, C, H, H, O, 3, 3, 1, 1, 1, 1, H, H);
        if (fuse) {
            for (int o = 0; o < O; o++)
                for (int i = 0; i < H * H; i++) {
                    float v = want[o * H * H + i];
                    v = (v - prm[2][o]) / sqrtf(prm[3][o] + 1e-3f) * prm[0][o] + prm[1][o];
                    v += r[o * H * H + i];
                    want[o * H * H + i] = v > 0 ? v : 0;
                }
            T_CLOSE(out, want, ny);
        } else {
            T_CLOSE(y, want, ny);
        }
    }
    tk_done(&t, kern);
    free(x), free(r), free(w), free(y), free(out), free(want);
    for (int i = 0; i < 4; i++) free(prm[i]);
    tb_done(m, p);
}

static void test_conv_fused(void) { conv_bn_add_relu(true); }
static void test_conv_unfused(void) { conv_bn_add_relu(false); }

/* The convolution chosen per shape (dnnl_conv.c): each implementation
 * oneDNN has for ResNet-50's shapes (3x3 on 512 channels 7x7 and 256
 * channels 14x14, the 1x1 stride-2 downsampling), forced in turn and then
 * timed, runs Conv -> BatchNormalization -> Add(residual) -> Relu fused
 * (BN folded into the weights, the residual as a sum post-op, Relu as an
 * eltwise one) within the run's tolerance of the reference, and the
 * kernel name says which ran. */
static void conv_choice_shape(int C, int H, int O, int k, int s) {
    int pad = k / 2, OH = (H + 2 * pad - k) / s + 1;
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, C, H, H));
    tb_input(m, "r", F, 4, TB_DIMS(1, O, OH, OH));
    tb_weight(m, "w", F, 4, TB_DIMS(O, C, k, k));
    const char *bn[4] = {"g", "be", "mu", "var"};
    for (int i = 0; i < 4; i++) tb_weight(m, bn[i], F, 1, TB_DIMS(O));
    int c = tb_node(m, "Conv", "x,w", "y");
    tb_attr_ints(m, c, "pads", 4, TB_DIMS(pad, pad, pad, pad));
    tb_attr_ints(m, c, "strides", 2, TB_DIMS(s, s));
    int nb = tb_node(m, "BatchNormalization", "y,g,be,mu,var", "z");
    tb_attr_f(m, nb, "epsilon", 1e-5);
    tb_node(m, "Add", "r,z", "sum");
    tb_node(m, "Relu", "sum", "out");
    tb_output(m, "out");
    mp_profile *p = tb_prof(m);
    int64_t ny = (int64_t)O * OH * OH;
    float *x = rnd((int64_t)C * H * H), *r = rnd(ny), *w = rnd((int64_t)O * C * k * k), *prm[4];
    for (int i = 0; i < 4; i++) {
        prm[i] = rnd(O);
        if (i == 3)
            for (int j = 0; j < O; j++) prm[i][j] = prm[i][j] * prm[i][j] + 0.5f;
    }
    float *y = zeros(ny), *out = zeros(ny), *want = zeros(ny);
    ref_conv2d(x, w, NULL, want, 1, C, H, H, O, k, k, 1, s, pad, 1, OH, OH);
    for (int o = 0; o < O; o++)
        for (int i = 0; i < OH * OH; i++) {
            double v = want[o * OH * OH + i];
            v = (v - prm[2][o]) / sqrt((double)prm[3][o] + 1e-5) * prm[0][o] + prm[1][o];
            v += r[o * OH * OH + i];
            want[o * OH * OH + i] = v > 0 ? (float)v : 0.0f;
        }
    static const char *const forced[] = {"jit", "gemm", "brg", NULL};
    static const char *const named[] = {"onednn:conv:jit", "onednn:conv:gemm", "onednn:conv:brgemm", "onednn:conv:"};
    int ran = 0;
    const char *old = mp_dnnl_conv_force(NULL);
    for (int f = 0; f < 4; f++) {
        mp_dnnl_conv_force(forced[f]);
        tk t = {0};
        tk_give(&t, "x", x), tk_give(&t, "r", r), tk_give(&t, "w", w);
        for (int i = 0; i < 4; i++) tk_give(&t, bn[i], prm[i]);
        tk_give(&t, "y", y), tk_give(&t, "out", out);
        const mp_kernel *kern = tk_prepare(&t, m, c, true);
        if (kern) {
            T_EQ(t.n_fused, 3);
            const char *kn = t.k.kname ? t.k.kname : "";
            /* the pick is named; a forced family is taken where oneDNN has it
             * (gemm:jit and the jit kernels on every x86 ISA, brgemm from AVX-512) */
            T_CHECK(strncmp(kn, "onednn:conv:", 12) == 0);
            if (f < 2 && strncmp(kn, named[f], strlen(named[f])) != 0)
                mp_t_fail(__FILE__, __LINE__, "forced %s: kernel %s", forced[f], kn);
            if (strncmp(kn, named[f], strlen(named[f])) == 0) ran++;
            memset(out, 0, (size_t)ny * sizeof(float));
            tk_run(&t, kern);
            T_CLOSE(out, want, ny);
            tk_run(&t, kern); /* twice: the residual is put in place again */
            T_CLOSE(out, want, ny);
        }
        tk_done(&t, kern);
    }
    mp_dnnl_conv_force(old);
    T_CHECK(ran >= 3);
    free(x), free(r), free(w), free(y), free(out), free(want);
    for (int i = 0; i < 4; i++) free(prm[i]);
    tb_done(m, p);
}

static void test_conv_choice(void) {
    conv_choice_shape(512, 7, 512, 3, 1);     /* layer4's 3x3 */
    conv_choice_shape(256, 14, 256, 3, 1);    /* layer3's 3x3 */
    conv_choice_shape(1024, 14, 2048, 1, 2);  /* layer4.0.downsample.0 */
}

static void test_convtranspose(void) {
    /* 1-channel 2x2 input, 2x2 kernel of ones, stride 2: each input pixel
     * paints its own 2x2 block */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 1, 2, 2));
    tb_weight(m, "w", F, 4, TB_DIMS(1, 1, 2, 2));
    int c = tb_node(m, "ConvTranspose", "x,w", "y");
    tb_attr_ints(m, c, "strides", 2, TB_DIMS(2, 2));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x1x4x4");
    float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1}, y[16];
    tk t = {0};
    tk_give(&t, "x", x);
    tk_give(&t, "w", w);
    tk_give(&t, "y", y);
    const mp_kernel *kern = tk_prepare(&t, m, c, true);
    if (kern) {
        tk_run(&t, kern);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) T_CHECK(y[i * 4 + j] == x[(i / 2) * 2 + j / 2]);
    }
    tk_done(&t, kern);
    tb_done(m, p);
}

/* ConvTranspose with groups, stride, pads and output_padding, random data
 * against a scatter loop (ONNX W is [Cin, Cout/group, kH, kW]) */
static void test_convtranspose_grouped(void) {
    const int C = 4, G = 2, OG = 3, H = 5, K = 3, S = 2, P = 1;
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, C, H, H));
    tb_weight(m, "w", F, 4, TB_DIMS(C, OG, K, K));
    tb_weight(m, "b", F, 1, TB_DIMS(G * OG));
    int c = tb_node(m, "ConvTranspose", "x,w,b", "y");
    tb_attr_i(m, c, "group", G);
    tb_attr_ints(m, c, "strides", 2, TB_DIMS(S, S));
    tb_attr_ints(m, c, "pads", 4, TB_DIMS(P, P, P, P));
    tb_attr_ints(m, c, "output_padding", 2, TB_DIMS(1, 1));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x6x10x10");
    const int OH = 10, O = G * OG, IG = C / G;
    float *x = rnd(C * H * H), *w = rnd(C * OG * K * K), *b = rnd(O), *y = zeros(O * OH * OH),
          *want = zeros(O * OH * OH);
    for (int o = 0; o < O; o++)
        for (int i = 0; i < OH * OH; i++) want[o * OH * OH + i] = b[o];
    for (int g = 0; g < G; g++)
        for (int i = 0; i < IG; i++)
            for (int o = 0; o < OG; o++)
                for (int ih = 0; ih < H; ih++)
                    for (int iw = 0; iw < H; iw++)
                        for (int kh = 0; kh < K; kh++)
                            for (int kw = 0; kw < K; kw++) {
                                int oh = ih * S - P + kh, ow = iw * S - P + kw;
                                if (oh < 0 || oh >= OH || ow < 0 || ow >= OH) continue;
                                int ci = g * IG + i, co = g * OG + o;
                                want[(co * OH + oh) * OH + ow] +=
                                    x[(ci * H + ih) * H + iw] * w[((ci * OG + o) * K + kh) * K + kw];
                            }
    tk t = {0};
    tk_give(&t, "x", x);
    tk_give(&t, "w", w);
    tk_give(&t, "b", b);
    tk_give(&t, "y", y);
    const mp_kernel *kern = tk_prepare(&t, m, c, true);
    if (kern) {
        T_EQ_STR(kern->name, "onednn:deconv");
        tk_run(&t, kern);
        T_CLOSE(y, want, O * OH * OH);
    }
    tk_done(&t, kern);
    free(x), free(w), free(b), free(y), free(want);
    tb_done(m, p);
}

/* ---- MatMul, Gemm ---- */

static void test_matmul_broadcast(void) {
    /* A [2,3,4,5] x B [3,5,6] (runtime): B broadcast over A's first dim */
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 4, TB_DIMS(2, 3, 4, 5));
    tb_input(m, "b", F, 3, TB_DIMS(3, 5, 6));
    int c = tb_node(m, "MatMul", "a,b", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    float *a = rnd(120), *b = rnd(90), *y = zeros(144), *want = zeros(144);
    tk t = {0};
    tk_give(&t, "a", a);
    tk_give(&t, "b", b);
    tk_give(&t, "y", y);
    const mp_kernel *kern = tk_prepare(&t, m, c, true);
    if (kern) {
        tk_run(&t, kern);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) ref_matmul(a + (i * 3 + j) * 20, b + j * 30, want + (i * 3 + j) * 24, 4, 5, 6);
        T_CLOSE(y, want, 144);
    }
    tk_done(&t, kern);
    free(a), free(b), free(y), free(want);
    tb_done(m, p);
}

/* x [2,7,16] @ W [16,24] + bias, then Mul by 0.5 and Relu: folded to 2-D,
 * the Add, Mul and Relu absorbed */
static void test_matmul_bias_act(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(2, 7, 16));
    tb_weight(m, "w", F, 2, TB_DIMS(16, 24));
    tb_weight(m, "bias", F, 1, TB_DIMS(24));
    tb_weight(m, "half", F, 0, NULL);
    int c = tb_node(m, "MatMul", "x,w", "h");
    tb_node(m, "Add", "bias,h", "hb");
    tb_node(m, "Mul", "hb,half", "hm");
    tb_node(m, "Relu", "hm", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    float *x = rnd(224), *w = rnd(384), *bias = rnd(24), half = 0.5f, *y = zeros(336), *want = zeros(336);
    tk t = {0};
    tk_give(&t, "x", x);
    tk_give(&t, "w", w);
    tk_give(&t, "bias", bias);
    tk_give(&t, "half", &half);
    tk_give(&t, "y", y);
    const mp_kernel *kern = tk_prepare(&t, m, c, true);
    if (kern) {
        T_EQ(t.n_fused, 3);
        tk_run(&t, kern);
        ref_matmul(x, w, want, 14, 16, 24);
        for (int i = 0; i < 336; i++) {
            float v = (want[i] + bias[i % 24]) * 0.5f;
            want[i] = v > 0 ? v : 0;
        }
        T_CLOSE(y, want, 336);
    }
    tk_done(&t, kern);
    free(x), free(w), free(bias), free(y), free(want);
    tb_done(m, p);
}

static void test_gemm(void) {
    /* Y = 0.5 * A^T B^T + 2 * C, A [K=6, M=4], B [N=5, K=6], C [5] */
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(6, 4));
    tb_weight(m, "b", F, 2, TB_DIMS(5, 6));
    tb_weight(m, "c", F, 1, TB_DIMS(5));
    int g = tb_node(m, "Gemm", "a,b,c", "y");
    tb_attr_i(m, g, "transA", 1);
    tb_attr_i(m, g, "transB", 1);
    tb_attr_f(m, g, "alpha", 0.5);
    tb_attr_f(m, g, "beta", 2.0);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    float *a = rnd(24), *b = rnd(30), *c = rnd(5), y[20], want[20];
    tk t = {0};
    tk_give(&t, "a", a);
    tk_give(&t, "b", b);
    tk_give(&t, "c", c);
    tk_give(&t, "y", y);
    const mp_kernel *kern = tk_prepare(&t, m, g, true);
    if (kern) {
        tk_run(&t, kern);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 5; j++) {
                double acc = 0;
                for (int q = 0; q < 6; q++) acc += (double)a[q * 4 + i] * b[j * 6 + q];
                want[i * 5 + j] = (float)(0.5 * acc + 2.0 * c[j]);
            }
        T_CLOSE(y, want, 20);
    }
    tk_done(&t, kern);
    free(a), free(b), free(c);
    tb_done(m, p);
}

/* Gemm with C a run-time [M, N] tensor (beta 1), and MatMul by a 1-D B */
static void test_gemm_runtime_c_matvec(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(4, 6));
    tb_input(m, "b", F, 2, TB_DIMS(6, 5));
    tb_input(m, "c", F, 2, TB_DIMS(4, 5));
    tb_input(m, "v", F, 1, TB_DIMS(6));
    int g = tb_node(m, "Gemm", "a,b,c", "y");
    int mv = tb_node(m, "MatMul", "a,v", "z");
    tb_output(m, "y");
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "z"), "4");
    float *a = rnd(24), *b = rnd(30), *c = rnd(20), *v = rnd(6), y[20], z[4], want[20];
    tk t = {0};
    tk_give(&t, "a", a);
    tk_give(&t, "b", b);
    tk_give(&t, "c", c);
    tk_give(&t, "v", v);
    tk_give(&t, "y", y);
    tk_give(&t, "z", z);
    const mp_kernel *kern = tk_prepare(&t, m, g, true);
    if (kern) tk_run(&t, kern);
    tk_done(&t, kern);
    ref_matmul(a, b, want, 4, 6, 5);
    for (int i = 0; i < 20; i++) want[i] += c[i];
    T_CLOSE(y, want, 20);
    kern = tk_prepare(&t, m, mv, true);
    if (kern) tk_run(&t, kern);
    tk_done(&t, kern);
    ref_matmul(a, v, want, 4, 6, 1);
    T_CLOSE(z, want, 4);
    free(a), free(b), free(c), free(v);
    tb_done(m, p);
}

/* Constant weights of 256 columns or more run with padded rows on oneDNN's
 * gemm:jit (below AVX-512): the same results as the plain layout. make
 * test runs this suite again with ONEDNN_MAX_CPU_ISA=AVX2, where the
 * padded layout must be taken; natively it is taken only where oneDNN
 * picks gemm:jit. */
static void test_matmul_padded_weights(void) {
    enum { M = 7, K = 48, N = 272, NG = 256 };
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 2, TB_DIMS(M, K));
    tb_weight(m, "w", F, 2, TB_DIMS(K, N));
    tb_weight(m, "bias", F, 1, TB_DIMS(N));
    tb_weight(m, "wg", F, 2, TB_DIMS(K, NG));
    tb_weight(m, "small", F, 2, TB_DIMS(K, 200));
    int mm = tb_node(m, "MatMul", "x,w", "h");
    tb_node(m, "Add", "h,bias", "y");
    int gm = tb_node(m, "Gemm", "x,wg", "g");
    int sm = tb_node(m, "MatMul", "x,small", "s");
    tb_output(m, "y");
    tb_output(m, "g");
    tb_output(m, "s");
    mp_profile *p = tb_prof(m);
    float *x = rnd(M * K), *w = rnd(K * N), *bias = rnd(N), *wg = rnd(K * NG), *small = rnd(K * 200);
    float *y = zeros(M * N), *g = zeros(M * NG), *s = zeros(M * 200);
    float *want = zeros(M * N), *wantg = zeros(M * NG), *wants = zeros(M * 200);
    ref_matmul(x, w, want, M, K, N);
    for (int i = 0; i < M * N; i++) want[i] += bias[i % N];
    ref_matmul(x, wg, wantg, M, K, NG);
    ref_matmul(x, small, wants, M, K, 200);
    const char *isa = getenv("ONEDNN_MAX_CPU_ISA");
    bool avx2 = isa && strncmp(isa, "AVX2", 4) == 0 && strlen(isa) == 4;
    int old = mp_dnnl_gemm_force(0); /* the primitive, not a library */
    const int nodes[3] = {mm, gm, sm};
    const int pads[3] = {1, 1, 0};
    for (int i = 0; i < 3; i++) {
        tk t = {0};
        tk_give(&t, "x", x), tk_give(&t, "w", w), tk_give(&t, "bias", bias), tk_give(&t, "wg", wg);
        tk_give(&t, "small", small), tk_give(&t, "y", y), tk_give(&t, "g", g), tk_give(&t, "s", s);
        int before = mp_dnnl_padded_products();
        const mp_kernel *kern = tk_prepare(&t, m, nodes[i], true);
        T_CHECK(kern != NULL);
        if (kern) {
            if (avx2) T_EQ(mp_dnnl_padded_products() - before, pads[i]);
            else T_CHECK(mp_dnnl_padded_products() - before <= pads[i]);
            tk_run(&t, kern);
            if (i == 0) T_CLOSE(y, want, M * N);
            else if (i == 1) T_CLOSE(g, wantg, M * NG);
            else T_CLOSE(s, wants, M * 200);
        }
        tk_done(&t, kern);
    }
    mp_dnnl_gemm_force(old);
    free(x), free(w), free(bias), free(wg), free(small), free(y), free(g), free(s);
    free(want), free(wantg), free(wants);
    tb_done(m, p);
}

/* The product on each GEMM candidate (tests force it; a run times them):
 * x [1,40,64] @ W [64,96] + bias + residual (MatMul+Add+Add), and Gemm
 * with transB and a [N] C; with a Relu in the chain only the primitive
 * can run it. Each against the reference loops. */
static void test_gemm_choice(void) {
    static const char *want_name[3] = {NULL, "onednn:sgemm", "openblas:sgemm"};
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(1, 40, 64));
    tb_input(m, "r", F, 3, TB_DIMS(1, 40, 96));
    tb_weight(m, "w", F, 2, TB_DIMS(64, 96));
    tb_weight(m, "bias", F, 1, TB_DIMS(96));
    tb_input(m, "a", F, 2, TB_DIMS(40, 64));
    tb_weight(m, "bt", F, 2, TB_DIMS(96, 64));
    tb_weight(m, "c", F, 1, TB_DIMS(96));
    tb_input(m, "z", F, 2, TB_DIMS(40, 64));
    int mm = tb_node(m, "MatMul", "x,w", "h");
    tb_node(m, "Add", "h,bias", "hb");
    tb_node(m, "Add", "r,hb", "y");
    int gm = tb_node(m, "Gemm", "a,bt,c", "g");
    tb_attr_i(m, gm, "transB", 1);
    tb_attr_f(m, gm, "alpha", 0.5);
    tb_attr_f(m, gm, "beta", 2.0);
    int mr = tb_node(m, "MatMul", "z,w", "q");
    tb_node(m, "Relu", "q", "qr");
    tb_output(m, "y");
    tb_output(m, "g");
    tb_output(m, "qr");
    mp_profile *p = tb_prof(m);
    float *x = rnd(2560), *r = rnd(3840), *w = rnd(6144), *bias = rnd(96), *a = rnd(2560), *bt = rnd(6144),
          *c = rnd(96), *z = rnd(2560), *y = zeros(3840), *g = zeros(3840), *qr = zeros(3840),
          *want = zeros(3840), *wantg = zeros(3840), *wantq = zeros(3840);
    ref_matmul(x, w, want, 40, 64, 96);
    for (int i = 0; i < 3840; i++) want[i] += bias[i % 96] + r[i];
    for (int i = 0; i < 40; i++)
        for (int j = 0; j < 96; j++) {
            double acc = 0;
            for (int q = 0; q < 64; q++) acc += (double)a[i * 64 + q] * bt[j * 64 + q];
            wantg[i * 96 + j] = (float)(0.5 * acc + 2.0 * c[j]);
        }
    ref_matmul(z, w, wantq, 40, 64, 96);
    for (int i = 0; i < 3840; i++) wantq[i] = wantq[i] > 0 ? wantq[i] : 0;
    int old = mp_dnnl_gemm_force(-1);
    for (int which = -1; which < 3; which++) {
        mp_dnnl_gemm_force(which);
        const char *expect = which < 0 ? NULL : want_name[which];
        if (which == 2 && !mp_blas_available()) expect = want_name[1];
        for (int node = 0; node < 3; node++) {
            tk t = {0};
            tk_give(&t, "x", x), tk_give(&t, "r", r), tk_give(&t, "w", w), tk_give(&t, "bias", bias);
            tk_give(&t, "a", a), tk_give(&t, "bt", bt), tk_give(&t, "c", c), tk_give(&t, "z", z);
            tk_give(&t, "y", y), tk_give(&t, "g", g), tk_give(&t, "qr", qr);
            const mp_kernel *kern = tk_prepare(&t, m, node == 0 ? mm : node == 1 ? gm : mr, true);
            if (kern) {
                if (node == 2) T_CHECK(t.k.kname == NULL); /* an activation: the primitive only */
                else if (which >= 0)
                    T_EQ_STR(t.k.kname ? t.k.kname : "primitive", expect ? expect : "primitive");
                T_EQ(t.n_fused, node == 0 ? 2 : node == 1 ? 0 : 1);
                float *out = node == 0 ? y : node == 1 ? g : qr;
                memset(out, 0, 3840 * sizeof(float));
                tk_run(&t, kern);
                tk_run(&t, kern); /* twice: the addends are written again */
                T_CLOSE(out, node == 0 ? want : node == 1 ? wantg : wantq, 3840);
            }
            tk_done(&t, kern);
        }
    }
    mp_dnnl_gemm_force(old);
    free(x), free(r), free(w), free(bias), free(a), free(bt), free(c), free(z), free(y), free(g), free(qr);
    free(want), free(wantg), free(wantq);
    tb_done(m, p);
}

/* OpenBLAS follows ONEDNN_MAX_CPU_ISA unless the user chose a core type */
static void test_blas_coretype(void) {
    T_EQ_STR(mp_blas_coretype_choice("AVX2", NULL), "Haswell");
    T_EQ_STR(mp_blas_coretype_choice("avx2_vnni", NULL), "Haswell");
    T_CHECK(mp_blas_coretype_choice("AVX2", "") == NULL);
    T_CHECK(mp_blas_coretype_choice("AVX2", "Zen") == NULL);
    T_CHECK(mp_blas_coretype_choice(NULL, NULL) == NULL);
    T_CHECK(mp_blas_coretype_choice("AVX512_CORE", NULL) == NULL);
}

/* ---- pooling ---- */

static void test_pools(void) {
    /* 1x1x4x4 0..15; MaxPool 2x2 s2 -> 5,7,13,15; AveragePool 3x3 s1 pad 1
     * excluding pads at the corner: (0+1+4+5)/4 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 1, 4, 4));
    int mx = tb_node(m, "MaxPool", "x", "y1");
    tb_attr_ints(m, mx, "kernel_shape", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, mx, "strides", 2, TB_DIMS(2, 2));
    int av = tb_node(m, "AveragePool", "x", "y2");
    tb_attr_ints(m, av, "kernel_shape", 2, TB_DIMS(3, 3));
    tb_attr_ints(m, av, "pads", 4, TB_DIMS(1, 1, 1, 1));
    int mc = tb_node(m, "MaxPool", "x", "y3");  /* ceil mode: 3x3 s2 -> 2x2 */
    tb_attr_ints(m, mc, "kernel_shape", 2, TB_DIMS(3, 3));
    tb_attr_ints(m, mc, "strides", 2, TB_DIMS(2, 2));
    tb_attr_i(m, mc, "ceil_mode", 1);
    int gp = tb_node(m, "GlobalAveragePool", "x", "y4");
    tb_output(m, "y1");
    tb_output(m, "y2");
    tb_output(m, "y3");
    tb_output(m, "y4");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y3"), "1x1x2x2");
    float x[16], y1[4], y2[16], y3[4], y4[1];
    for (int i = 0; i < 16; i++) x[i] = (float)i;
    int nodes[4] = {mx, av, mc, gp};
    tk t = {0};
    tk_give(&t, "x", x);
    tk_give(&t, "y1", y1);
    tk_give(&t, "y2", y2);
    tk_give(&t, "y3", y3);
    tk_give(&t, "y4", y4);
    for (int i = 0; i < 4; i++) {
        t.n_fused = 0;
        const mp_kernel *kern = tk_prepare(&t, m, nodes[i], true);
        if (kern) tk_run(&t, kern);
        tk_done(&t, kern);
    }
    float w1[4] = {5, 7, 13, 15}, w3[4] = {10, 11, 14, 15};
    for (int i = 0; i < 4; i++) T_CHECK(y1[i] == w1[i]);
    for (int i = 0; i < 4; i++) T_CHECK(y3[i] == w3[i]);
    T_CHECK(fabsf(y2[0] - 2.5f) < 1e-6f);
    T_CHECK(fabsf(y2[5] - 5.0f) < 1e-6f);  /* (0+1+2+4+5+6+8+9+10)/9 */
    T_CHECK(fabsf(y4[0] - 7.5f) < 1e-6f);
    tb_done(m, p);
}

/* ---- Softmax, LayerNormalization, BatchNormalization, eltwise, binary ---- */

static void test_softmax(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(2, 3, 50));
    int s = tb_node(m, "Softmax", "x", "y");
    int l = tb_node(m, "LogSoftmax", "x", "z");
    tb_attr_i(m, l, "axis", 1);
    tb_output(m, "y");
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    float *x = rnd(300), *y = zeros(300), *z = zeros(300), *want = zeros(300);
    tk t = {0};
    tk_give(&t, "x", x);
    tk_give(&t, "y", y);
    tk_give(&t, "z", z);
    const mp_kernel *kern = tk_prepare(&t, m, s, true);
    if (kern) tk_run(&t, kern);
    tk_done(&t, kern);
    for (int r = 0; r < 6; r++) {
        double mx = -1e30, sum = 0;
        for (int i = 0; i < 50; i++) mx = fmax(mx, x[r * 50 + i]);
        for (int i = 0; i < 50; i++) sum += exp(x[r * 50 + i] - mx);
        for (int i = 0; i < 50; i++) want[r * 50 + i] = (float)(exp(x[r * 50 + i] - mx) / sum);
    }
    T_CLOSE(y, want, 300);
    kern = tk_prepare(&t, m, l, true);
    if (kern) tk_run(&t, kern);
    tk_done(&t, kern);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 50; i++) {
            double mx = -1e30, sum = 0;
            for (int c = 0; c < 3; c++) mx = fmax(mx, x[(b * 3 + c) * 50 + i]);
            for (int c = 0; c < 3; c++) sum += exp(x[(b * 3 + c) * 50 + i] - mx);
            for (int c = 0; c < 3; c++)
                want[(b * 3 + c) * 50 + i] = (float)(x[(b * 3 + c) * 50 + i] - mx - log(sum));
        }
    T_CLOSE(z, want, 300);
    free(x), free(y), free(z), free(want);
    tb_done(m, p);
}

static void test_layernorm(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(2, 5, 64));
    tb_weight(m, "s", F, 1, TB_DIMS(64));
    tb_weight(m, "b", F, 1, TB_DIMS(64));
    int l = tb_node(m, "LayerNormalization", "x,s,b", "y");
    tb_attr_f(m, l, "epsilon", 1e-5);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    float *x = rnd(640), *sc = rnd(64), *b = rnd(64), *y = zeros(640), *want = zeros(640);
    tk t = {0};
    tk_give(&t, "x", x);
    tk_give(&t, "s", sc);
    tk_give(&t, "b", b);
    tk_give(&t, "y", y);
    const mp_kernel *kern = tk_prepare(&t, m, l, true);
    if (kern) tk_run(&t, kern);
    tk_done(&t, kern);
    for (int r = 0; r < 10; r++) {
        double mu = 0, var = 0;
        for (int i = 0; i < 64; i++) mu += x[r * 64 + i];
        mu /= 64;
        for (int i = 0; i < 64; i++) var += (x[r * 64 + i] - mu) * (x[r * 64 + i] - mu);
        var /= 64;
        for (int i = 0; i < 64; i++)
            want[r * 64 + i] = (float)((x[r * 64 + i] - mu) / sqrt(var + 1e-5) * sc[i] + b[i]);
    }
    T_CLOSE(y, want, 640);
    free(x), free(sc), free(b), free(y), free(want);
    tb_done(m, p);
}

static void test_batchnorm(void) {
    mp_model *m = tb_new(15);
    tb_input(m, "x", F, 4, TB_DIMS(2, 3, 4, 4));
    const char *bn[4] = {"g", "be", "mu", "var"};
    for (int i = 0; i < 4; i++) tb_weight(m, bn[i], F, 1, TB_DIMS(3));
    int b = tb_node(m, "BatchNormalization", "x,g,be,mu,var", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    float *x = rnd(96), *y = zeros(96), *want = zeros(96);
    float g[3] = {1, 2, 0.5f}, be[3] = {0, 1, -1}, mu[3] = {0.1f, -0.2f, 0.3f}, var[3] = {1, 4, 0.25f};
    float *prm[4] = {g, be, mu, var};
    tk t = {0};
    tk_give(&t, "x", x);
    for (int i = 0; i < 4; i++) tk_give(&t, bn[i], prm[i]);
    tk_give(&t, "y", y);
    const mp_kernel *kern = tk_prepare(&t, m, b, true);
    if (kern) tk_run(&t, kern);
    tk_done(&t, kern);
    for (int i = 0; i < 96; i++) {
        int c = (i / 16) % 3;
        want[i] = (x[i] - mu[c]) / sqrtf(var[c] + 1e-5f) * g[c] + be[c];
    }
    T_CLOSE(y, want, 96);
    free(x), free(y), free(want);
    tb_done(m, p);
}

static void test_eltwise(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 2, TB_DIMS(10, 500));
    tb_weight(m, "lo", F, 0, NULL);
    tb_weight(m, "hi", F, 0, NULL);
    tb_node(m, "Sigmoid", "x", "y");
    int h = tb_node(m, "Clip", "x,lo,hi", "z");
    tb_output(m, "y");
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    float *x = rnd(5000), *y = zeros(5000), *z = zeros(5000), *want = zeros(5000);
    for (int i = 0; i < 5000; i++) x[i] *= 8;
    tk t = {0};
    tk_give(&t, "x", x);
    tk_give(&t, "y", y);
    tk_give(&t, "z", z);
    float lo = -0.5f, hi = 2.0f;
    tk_give(&t, "lo", &lo);
    tk_give(&t, "hi", &hi);
    const mp_kernel *kern = tk_prepare(&t, m, 0, true);
    if (kern) tk_run(&t, kern);
    tk_done(&t, kern);
    for (int i = 0; i < 5000; i++) want[i] = 1.0f / (1.0f + expf(-x[i]));
    T_CLOSE(y, want, 5000);
    kern = tk_prepare(&t, m, h, true);
    if (kern) tk_run(&t, kern);
    tk_done(&t, kern);
    for (int i = 0; i < 5000; i++) want[i] = fminf(2.0f, fmaxf(-0.5f, x[i]));
    T_CLOSE(z, want, 5000);
    free(x), free(y), free(z), free(want);
    tb_done(m, p);
}

static void test_binary(void) {
    /* Add [2,64,8,8] + [64,1,1] (its Relu not absorbed: the binary
     * primitive takes no post-ops, see dnnl.c); Mul [1,64,1,1] * [2,64,8,8]
     * (swapped) */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(2, 64, 8, 8));
    tb_input(m, "c", F, 3, TB_DIMS(64, 1, 1));
    tb_input(m, "s", F, 4, TB_DIMS(1, 64, 1, 1));
    int a = tb_node(m, "Add", "x,c", "y");
    tb_node(m, "Relu", "y", "yr");
    int mu = tb_node(m, "Mul", "s,x", "z");
    tb_output(m, "yr");
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    float *x = rnd(8192), *c = rnd(64), *s = rnd(64), *y = zeros(8192), *z = zeros(8192), *want = zeros(8192);
    tk t = {0};
    tk_give(&t, "x", x);
    tk_give(&t, "c", c);
    tk_give(&t, "s", s);
    tk_give(&t, "y", y);
    tk_give(&t, "z", z);
    const mp_kernel *kern = tk_prepare(&t, m, a, true);
    if (kern) {
        T_EQ(t.n_fused, 0);
        tk_run(&t, kern);
    }
    tk_done(&t, kern);
    for (int i = 0; i < 8192; i++) want[i] = x[i] + c[(i / 64) % 64];
    T_CLOSE(y, want, 8192);
    t.n_fused = 0;
    kern = tk_prepare(&t, m, mu, true);
    if (kern) tk_run(&t, kern);
    tk_done(&t, kern);
    for (int i = 0; i < 8192; i++) want[i] = x[i] * s[(i / 64) % 64];
    T_CLOSE(z, want, 8192);
    free(x), free(c), free(s), free(y), free(z), free(want);
    tb_done(m, p);
}

/* What oneDNN does not serve is left to the portable kernels. */
static void test_not_served(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "i", MP_DT_INT64, 2, TB_DIMS(4, 4));
    tb_input(m, "x", F, 1, TB_DIMS(8));
    tb_input(m, "big", F, 2, TB_DIMS(2, 4096));
    tb_input(m, "row", F, 2, TB_DIMS(1, 4096));
    int a = tb_node(m, "Add", "i,i", "j");        /* int64 */
    int b = tb_node(m, "Add", "x,x", "y");        /* too small to pay */
    int e = tb_node(m, "Erf", "x", "z");          /* no oneDNN eltwise */
    int s = tb_node(m, "Sub", "row,big", "d");    /* src0 would need broadcast */
    tb_output(m, "j");
    tb_output(m, "y");
    tb_output(m, "z");
    tb_output(m, "d");
    mp_profile *p = tb_prof(m);
    T_CHECK(mp_dnnl_kernel(m->graph, tb_nodep(m, a)) == NULL);
    T_CHECK(mp_dnnl_kernel(m->graph, tb_nodep(m, b)) == NULL);
    T_CHECK(mp_dnnl_kernel(m->graph, tb_nodep(m, e)) == NULL);
    T_CHECK(mp_dnnl_kernel(m->graph, tb_nodep(m, s)) == NULL);
    tb_done(m, p);
    /* broadcasts oneDNN 2.6's binary primitive runs on its reference code
     * (an RMSNorm's x * rsqrt(mean): [1, 32, 8, 128] by [1, 32, 8, 1]; a
     * detector's [3, 320, 320] - [3, 1, 1]) stay portable; one per channel
     * and one of the output's dims go to oneDNN */
    m = tb_new(17);
    tb_input(m, "h", F, 4, TB_DIMS(1, 32, 8, 128));
    tb_input(m, "r", F, 4, TB_DIMS(1, 32, 8, 1));
    tb_input(m, "img", F, 3, TB_DIMS(3, 320, 320));
    tb_input(m, "mean", F, 3, TB_DIMS(3, 1, 1));
    tb_input(m, "ch", F, 4, TB_DIMS(1, 32, 1, 1));
    int rms = tb_node(m, "Mul", "h,r", "o1");
    int nrm = tb_node(m, "Sub", "img,mean", "o2");
    int pch = tb_node(m, "Mul", "h,ch", "o3");
    int full = tb_node(m, "Add", "h,h", "o4");
    tb_output(m, "o1");
    tb_output(m, "o2");
    tb_output(m, "o3");
    tb_output(m, "o4");
    p = tb_prof(m);
    T_CHECK(mp_dnnl_kernel(m->graph, tb_nodep(m, rms)) == NULL);
    T_CHECK(mp_dnnl_kernel(m->graph, tb_nodep(m, nrm)) == NULL);
    T_CHECK(mp_dnnl_kernel(m->graph, tb_nodep(m, pch)) != NULL);
    T_CHECK(mp_dnnl_kernel(m->graph, tb_nodep(m, full)) != NULL);
    tb_done(m, p);
}


/* ---- through the planner (the real mp_kfuse, arena, layouts) ---- */

/* Give a plan its fp32 inputs: names[i] with data[i] of dims[i]. */
static void set_inputs(mp_exec *pl, int n_in, const char **names, float **data, const int64_t *const *dims,
                       const int *ranks) {
    for (int i = 0; i < n_in; i++)
        T_OK(mp_exec_set_input(pl, names[i], F, ranks[i], dims[i], data[i],
                               sizeof(float) * (size_t)mp_dims_product(dims[i], ranks[i])));
}

/* Output i of a plan that ran, and its number of values (*n; 0 and NULL
 * when it cannot be read). */
static const float *plan_out(mp_exec *pl, int i, int64_t *n) {
    const char *name;
    int dt, rank;
    const int64_t *od;
    const void *out = NULL;
    *n = 0;
    T_OK(mp_exec_output(pl, i, &name, &dt, &rank, &od, &out));
    if (out) *n = mp_dims_product(od, rank);
    return out;
}

/* Run model m's plan on inputs (name, data) and return output 0's copy. */
static float *plan_run(mp_model *m, mp_profile *p, int n_in, const char **names, float **data,
                       const int64_t *const *dims, const int *ranks, int fuse, int64_t *numel) {
    mp_run_options o;
    mp_run_options_default(&o);
    o.threads = 2;
    o.fuse = fuse;
    o.progress = 0;
    mp_exec *pl = NULL;
    T_OK(mp_exec_create(p, &o, &pl));
    if (!pl) return NULL;
    set_inputs(pl, n_in, names, data, dims, ranks);
    T_OK(mp_exec_run(pl));
    int64_t ne;
    const float *out = plan_out(pl, 0, &ne);
    float *r = NULL;
    if (ne > 0 && ne < (INT64_C(1) << 30)) {
        r = malloc(sizeof(float) * (size_t)ne);
        if (r) memcpy(r, out, sizeof(float) * (size_t)ne);
    }
    *numel = ne;
    mp_exec_free(pl);
    (void)m;
    return r;
}

/* plan_run, then its output against want (n values, relative L2 error at
 * most 1e-5); failures name the place and `tag` ("form 2"), then fuse. */
#define EXPECT_PLAN(m, p, n_in, names, data, dims, ranks, fuse, want, n, tag) \
    expect_plan(__FILE__, __LINE__, m, p, n_in, names, data, dims, ranks, fuse, want, n, tag)
static void expect_plan(const char *file, int line, mp_model *m, mp_profile *p, int n_in, const char **names,
                        float **data, const int64_t *const *dims, const int *ranks, int fuse, const float *want,
                        int64_t n, const char *tag) {
    int64_t got_n = 0;
    float *y = plan_run(m, p, n_in, names, data, dims, ranks, fuse, &got_n);
    if (got_n != n)
        mp_t_fail(file, line, "%s fuse %d: %lld values out, %lld expected", tag, fuse, (long long)got_n, (long long)n);
    else if (y && !(rel_l2(y, want, n) <= 1e-5))
        mp_t_fail(file, line, "%s fuse %d: relative L2 error %g", tag, fuse, rel_l2(y, want, n));
    free(y);
}

/* A plan for a measured run of p: 2 threads, no warm-up, a fixed peak;
 * NULL (the failure recorded) when it cannot be made. */
static mp_exec *measure_plan(mp_profile *p, int fuse, int iters) {
    mp_run_options o;
    mp_run_options_default(&o);
    o.threads = 2, o.fuse = fuse, o.iters = iters, o.warmup = 0, o.peak_gflops = 100, o.progress = 0;
    mp_exec *pl = NULL;
    T_OK(mp_exec_create(p, &o, &pl));
    return pl;
}

/* GPT-2's tanh GELU inner part: Mul(p, c) -> Add(x, .) -> Tanh, where the
 * binary kernel for the Mul absorbs the Add (x as a binary post-op) and
 * the Tanh. */
static void test_plan_binary_chain(void) {
    mp_model *m = tb_new(14);
    tb_input(m, "p", F, 3, TB_DIMS(1, 32, 3072));
    tb_input(m, "x", F, 3, TB_DIMS(1, 32, 3072));
    tb_const_f(m, "c", F, 0, NULL, (const double[]){0.044715});
    tb_node(m, "Mul", "p,c", "m1");
    tb_node(m, "Add", "x,m1", "a");
    tb_node(m, "Tanh", "a", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    const int64_t n = 32 * 3072;
    float *pv = rnd(n), *xv = rnd(n), *want = zeros(n);
    float c = 0.044715f;
    for (int64_t i = 0; i < n; i++) want[i] = tanhf(xv[i] + pv[i] * c);
    const char *names[2] = {"p", "x"};
    float *data[2] = {pv, xv};
    const int64_t *dims[2] = {TB_DIMS(1, 32, 3072), TB_DIMS(1, 32, 3072)};
    int ranks[2] = {3, 3};
    for (int fuse = 0; fuse < 2; fuse++) {
        int64_t got_n = 0;
        float *y = plan_run(m, p, 2, names, data, dims, ranks, fuse, &got_n);
        T_EQ(got_n, n);
        if (y && got_n == n) T_CLOSE(y, want, n);
        free(y);
    }
    free(pv), free(xv), free(want);
    tb_done(m, p);
}

/* GPT-2's whole tanh GELU: 0.5x * (1 + tanh(0.79788 * (x + 0.044715 x^3))) */
static void test_plan_gelu_tanh(void) {
    mp_model *m = tb_new(14);
    tb_input(m, "x", F, 3, TB_DIMS(1, 32, 3072));
    tb_const_f(m, "half", F, 0, NULL, (const double[]){0.5});
    tb_const_f(m, "three", F, 0, NULL, (const double[]){3.0});
    tb_const_f(m, "c", F, 0, NULL, (const double[]){0.044715});
    tb_const_f(m, "k", F, 0, NULL, (const double[]){0.7978845834732056});
    tb_const_f(m, "one", F, 0, NULL, (const double[]){1.0});
    int head = tb_node(m, "Mul", "x,half", "h");
    tb_node(m, "Pow", "x,three", "p3");
    tb_node(m, "Mul", "p3,c", "m1");
    tb_node(m, "Add", "x,m1", "a");
    tb_node(m, "Mul", "a,k", "m2");
    tb_node(m, "Tanh", "m2", "t");
    tb_node(m, "Add", "t,one", "a1");
    tb_node(m, "Mul", "h,a1", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    const mp_kernel *kern = mp_dnnl_kernel(m->graph, tb_nodep(m, head));
    T_CHECK(kern && strcmp(kern->name, "onednn:gelu") == 0);
    const int64_t n = 32 * 3072;
    float *xv = rnd(n), *want = zeros(n);
    for (int64_t i = 0; i < n; i++) {
        double x = xv[i];
        want[i] = (float)(0.5 * x * (1 + tanh(0.7978845834732056 * (x + 0.044715 * x * x * x))));
    }
    const char *names[1] = {"x"};
    float *data[1] = {xv};
    const int64_t *dims[1] = {TB_DIMS(1, 32, 3072)};
    int ranks[1] = {3};
    for (int fuse = 0; fuse < 2; fuse++) {
        EXPECT_PLAN(m, p, 1, names, data, dims, ranks, fuse, want, n, "the chain");
    }
    free(xv), free(want);
    tb_done(m, p);
}

/* MatMul with a chain of scalar steps around an activation (linear,
 * tanh, linear with an offset), through the planner */
static void test_plan_matmul_chain(void) {
    mp_model *m = tb_new(14);
    tb_input(m, "x", F, 2, TB_DIMS(64, 256));
    tb_input(m, "w", F, 2, TB_DIMS(256, 128));
    tb_const_f(m, "two", F, 0, NULL, (const double[]){2.0});
    tb_const_f(m, "one", F, 0, NULL, (const double[]){1.0});
    tb_node(m, "MatMul", "x,w", "h");
    tb_node(m, "Mul", "h,two", "h2");
    tb_node(m, "Tanh", "h2", "t");
    tb_node(m, "Add", "one,t", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    float *xv = rnd(64 * 256), *wv = rnd(256 * 128), *want = zeros(64 * 128);
    for (int i = 0; i < 256 * 128; i++) wv[i] *= 0.1f;
    ref_matmul(xv, wv, want, 64, 256, 128);
    for (int i = 0; i < 64 * 128; i++) want[i] = tanhf(2 * want[i]) + 1;
    const char *names[2] = {"x", "w"};
    float *data[2] = {xv, wv};
    const int64_t *dims[2] = {TB_DIMS(64, 256), TB_DIMS(256, 128)};
    int ranks[2] = {2, 2};
    for (int fuse = 0; fuse < 2; fuse++) {
        EXPECT_PLAN(m, p, 2, names, data, dims, ranks, fuse, want, 64 * 128, "the chain");
    }
    free(xv), free(wv), free(want);
    tb_done(m, p);
}

/* A batched product [4, 3, 49, 32] x [4, 3, 32, 49] and an Add: Swin's
 * relative position bias [1, 3, 49, 49] as a binary post-op makes oneDNN
 * 2.6's matmul its reference code (ref:any, 1,000x slower), so the
 * planner asks first (chain.probe_a) and leaves that Add to run on its
 * own: two kernels; an operand of the output's dims is absorbed (one).
 * The values are right either way. */
static void test_plan_batched_bias(void) {
    static const struct {
        int rank;
        int64_t d[4];
        int steps; /* with fusion */
    } cases[] = {{4, {1, 3, 49, 49}, 2}, {4, {4, 3, 49, 49}, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mp_model *m = tb_new(17);
        tb_input(m, "a", F, 4, TB_DIMS(4, 3, 49, 32));
        tb_input(m, "b", F, 4, TB_DIMS(4, 3, 32, 49));
        tb_input(m, "c", F, cases[c].rank, cases[c].d);
        tb_node(m, "MatMul", "a,b", "h");
        tb_node(m, "Add", "h,c", "y");
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        int64_t nc = cases[c].d[0] * cases[c].d[1] * cases[c].d[2] * cases[c].d[3];
        float *av = rnd(4 * 3 * 49 * 32), *bv = rnd(4 * 3 * 32 * 49), *cv = rnd(nc), *want = zeros(4 * 3 * 49 * 49);
        for (int bh = 0; bh < 12; bh++) {
            ref_matmul(av + bh * 49 * 32, bv + bh * 32 * 49, want + bh * 49 * 49, 49, 32, 49);
            for (int e = 0; e < 49 * 49; e++) want[bh * 49 * 49 + e] += cv[(nc == 3 * 49 * 49 ? bh % 3 : bh) * 49 * 49 + e];
        }
        const char *names[3] = {"a", "b", "c"};
        float *data[3] = {av, bv, cv};
        const int64_t *dims[3] = {TB_DIMS(4, 3, 49, 32), TB_DIMS(4, 3, 32, 49), cases[c].d};
        int ranks[3] = {4, 4, 4};
        for (int fuse = 0; fuse < 2; fuse++) EXPECT_PLAN(m, p, 3, names, data, dims, ranks, fuse, want, 4 * 3 * 49 * 49, "bias");
        if (mp_dnnl_available()) {
            mp_exec *pl = measure_plan(p, 1, 1);
            if (pl) T_EQ(pl->n_steps, cases[c].steps);
            mp_exec_free(pl);
        }
        free(av), free(bv), free(cv), free(want);
        tb_done(m, p);
    }
}

/* "a": the rows of input "x" where input "s" is not zero (NonZero,
 * Reshape to 1-D, Gather on axis 0): a batch only the run knows, as a
 * detector's heads get it */
static void rows_from_data(mp_model *m) {
    tb_const_i(m, "flat", MP_DT_INT64, 1, TB_DIMS(1), TB_DIMS(-1));
    tb_node(m, "NonZero", "s", "nz");
    tb_node(m, "Reshape", "nz,flat", "idx");
    int ga = tb_node(m, "Gather", "x,idx", "a");
    tb_attr_i(m, ga, "axis", 0);
}

/* A Gemm whose rows come from the data (a detector's kept boxes before its
 * box head: NonZero, Gather), fp32 with constant B and C: dnnl_sgemm with
 * the run's M (onednn:sgemm), not the portable loop; the result Y = 0.5
 * A B^T + 2 C as computed by hand, with 4 of 6 rows kept */
static void test_gemm_dynamic_rows(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 2, TB_DIMS(6, 16));
    tb_input(m, "s", F, 1, TB_DIMS(6));
    static double bd[128], cd[8];
    for (int i = 0; i < 128; i++) bd[i] = (double)((i * 29) % 17) / 8.0 - 1.0;
    for (int i = 0; i < 8; i++) cd[i] = 0.25 * i - 1.0;
    tb_const_f(m, "b", F, 2, TB_DIMS(8, 16), bd);
    tb_const_f(m, "c", F, 1, TB_DIMS(8), cd);
    rows_from_data(m);
    int g = tb_node(m, "Gemm", "a,b,c", "y");
    tb_attr_i(m, g, "transB", 1);
    tb_attr_f(m, g, "alpha", 0.5);
    tb_attr_f(m, g, "beta", 2.0);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    const mp_kernel *kern = mp_dnnl_kernel(m->graph, tb_nodep(m, g));
    if (mp_dnnl_available()) T_CHECK(kern && strcmp(kern->name, "onednn:sgemm") == 0);
    float *x = rnd(96), sv[6] = {1, 0, 2, 3, 0, 4};
    float want[32];
    int kept[4] = {0, 2, 3, 5};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) {
            double acc = 0;
            for (int q = 0; q < 16; q++) acc += (double)x[kept[i] * 16 + q] * (float)bd[j * 16 + q];
            want[i * 8 + j] = (float)(0.5 * acc + 2.0 * (float)cd[j]);
        }
    const char *names[2] = {"x", "s"};
    float *data[2] = {x, sv};
    const int64_t *dims[2] = {TB_DIMS(6, 16), TB_DIMS(6)};
    int ranks[2] = {2, 1};
    for (int fuse = 0; fuse < 2; fuse++) EXPECT_PLAN(m, p, 2, names, data, dims, ranks, fuse, want, 32, "rows");
    /* measured: the product's FLOPs depend on the run's M, unknown to the
     * static profile; the run counts them with the 4 rows it kept (its
     * kernel group too): 4 x 8 x 16 MACs, 2 per MAC, and 4 x 8 for C */
    T_CHECK(tb_nodep(m, g)->cost.flags & MP_COST_UNKNOWN);
    mp_exec *pl = measure_plan(p, 1, 2);
    if (pl) {
        T_OK(mp_exec_set_input(pl, "x", F, 2, TB_DIMS(6, 16), x, 96 * sizeof *x));
        T_OK(mp_exec_set_input(pl, "s", F, 1, TB_DIMS(6), sv, sizeof sv));
        T_OK(mp_profile_run(pl, p));
        bool seen = false;
        T_EQ(tb_nodep(m, g)->cost.macs, 4 * 8 * 16);
        T_CHECK(tb_nodep(m, g)->cost.flags & MP_COST_RUN);
        for (int i = 0; i < p->n_groups; i++)
            if (strcmp(p->groups[i].name, "Gemm") == 0) {
                seen = true;
                T_CHECK(!p->groups[i].flops_unknown);
                T_EQ(p->groups[i].flops, tb_nodep(m, g)->cost.flops);
                T_EQ(p->groups[i].flops, 2 * 4 * 8 * 16 + 4 * 8);
            }
        T_CHECK(seen);
        mp_exec_free(pl);
    }
    free(x);
    tb_done(m, p);
}

/* A Conv whose batch comes from the data (a mask head's: the detections
 * kept): im2col and dnnl_sgemm with the run's dims (onednn:sgemm-conv),
 * not the portable loop; 3 of 5 images kept, 3 x 3 with pads 1 and
 * stride 2, groups 1 and 2, against the direct sum */
static void test_conv_dynamic_batch(void) {
    for (int G = 1; G <= 2; G++) {
        mp_model *m = tb_new(17);
        tb_input(m, "x", F, 4, TB_DIMS(5, 4, 9, 7));
        tb_input(m, "s", F, 1, TB_DIMS(5));
        static double wd[6 * 4 * 9], bd[6];
        for (int i = 0; i < 6 * 4 * 9; i++) wd[i] = (double)((i * 37) % 23) / 11.0 - 1.0;
        for (int i = 0; i < 6; i++) bd[i] = 0.5 * i - 1.0;
        tb_const_f(m, "w", F, 4, TB_DIMS(6, 4 / G, 3, 3), wd);
        tb_const_f(m, "b", F, 1, TB_DIMS(6), bd);
        rows_from_data(m);
        int c = tb_node(m, "Conv", "a,w,b", "y");
        tb_attr_ints(m, c, "kernel_shape", 2, TB_DIMS(3, 3));
        tb_attr_ints(m, c, "pads", 4, TB_DIMS(1, 1, 1, 1));
        tb_attr_ints(m, c, "strides", 2, TB_DIMS(2, 2));
        tb_attr_i(m, c, "group", G);
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        const mp_kernel *kern = mp_dnnl_kernel(m->graph, tb_nodep(m, c));
        if (mp_dnnl_available()) T_CHECK(kern && strcmp(kern->name, "onednn:sgemm-conv") == 0);
        float *x = rnd(5 * 4 * 63), sv[5] = {0, 3, 1, 0, 2}, wf[6 * 4 * 9], bf[6];
        for (int i = 0; i < 6 * (4 / G) * 9; i++) wf[i] = (float)wd[i];
        for (int i = 0; i < 6; i++) bf[i] = (float)bd[i];
        float *kept = malloc(sizeof(float) * 3 * 4 * 63), want[3 * 6 * 5 * 4];
        int rows[3] = {1, 2, 4};
        for (int r = 0; r < 3; r++) memcpy(kept + r * 4 * 63, x + rows[r] * 4 * 63, sizeof(float) * 4 * 63);
        ref_conv2d(kept, wf, bf, want, 3, 4, 9, 7, 6, 3, 3, G, 2, 1, 1, 5, 4);
        const char *names[2] = {"x", "s"};
        float *data[2] = {x, sv};
        const int64_t *dims[2] = {TB_DIMS(5, 4, 9, 7), TB_DIMS(5)};
        int ranks[2] = {4, 1};
        for (int fuse = 0; fuse < 2; fuse++) EXPECT_PLAN(m, p, 2, names, data, dims, ranks, fuse, want, 3 * 6 * 5 * 4, "batch");
        free(x), free(kept);
        tb_done(m, p);
    }
}

/* Two Convs on a constant (RAFT's motion encoder on its all-zero first
 * flow): both run once at plan time. The first one's output must be left
 * plain: it is a constant read later, not a step's buffer in a channels-
 * last layout (it was, and the second Conv read it as plain: 68% off). */
static void test_fold_conv_chain(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 6, 9, 7));
    static double zd[4 * 63], w1d[8 * 4 * 9], b1d[8], w2d[6 * 8 * 9], b2d[6];
    for (int i = 0; i < 4 * 63; i++) zd[i] = (double)((i * 13) % 17) / 8.0 - 1.0;
    for (int i = 0; i < 8 * 4 * 9; i++) w1d[i] = (double)((i * 37) % 23) / 11.0 - 1.0;
    for (int i = 0; i < 6 * 8 * 9; i++) w2d[i] = (double)((i * 29) % 19) / 9.0 - 1.0;
    for (int i = 0; i < 8; i++) b1d[i] = 0.5 * i - 1.0;
    for (int i = 0; i < 6; i++) b2d[i] = 0.25 - 0.5 * i;
    tb_const_f(m, "z", F, 4, TB_DIMS(1, 4, 9, 7), zd);
    tb_const_f(m, "w1", F, 4, TB_DIMS(8, 4, 3, 3), w1d);
    tb_const_f(m, "b1", F, 1, TB_DIMS(8), b1d);
    tb_const_f(m, "w2", F, 4, TB_DIMS(6, 8, 3, 3), w2d);
    tb_const_f(m, "b2", F, 1, TB_DIMS(6), b2d);
    int c1 = tb_node(m, "Conv", "z,w1,b1", "c1"), c2 = tb_node(m, "Conv", "c1,w2,b2", "c2");
    for (int c = c1; c <= c2; c += c2 - c1) {
        tb_attr_ints(m, c, "kernel_shape", 2, TB_DIMS(3, 3));
        tb_attr_ints(m, c, "pads", 4, TB_DIMS(1, 1, 1, 1));
    }
    tb_node(m, "Add", "c2,x", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    float zf[4 * 63], w1f[8 * 4 * 9], b1f[8], w2f[6 * 8 * 9], b2f[6], mid[8 * 63], want[6 * 63];
    for (int i = 0; i < 4 * 63; i++) zf[i] = (float)zd[i];
    for (int i = 0; i < 8 * 4 * 9; i++) w1f[i] = (float)w1d[i];
    for (int i = 0; i < 6 * 8 * 9; i++) w2f[i] = (float)w2d[i];
    for (int i = 0; i < 8; i++) b1f[i] = (float)b1d[i];
    for (int i = 0; i < 6; i++) b2f[i] = (float)b2d[i];
    ref_conv2d(zf, w1f, b1f, mid, 1, 4, 9, 7, 8, 3, 3, 1, 1, 1, 1, 9, 7);
    ref_conv2d(mid, w2f, b2f, want, 1, 8, 9, 7, 6, 3, 3, 1, 1, 1, 1, 9, 7);
    float *x = rnd(6 * 63);
    for (int i = 0; i < 6 * 63; i++) want[i] += x[i];
    const char *names[1] = {"x"};
    float *data[1] = {x};
    const int64_t *dims[1] = {TB_DIMS(1, 6, 9, 7)};
    int ranks[1] = {4};
    for (int fuse = 0; fuse < 2; fuse++) EXPECT_PLAN(m, p, 1, names, data, dims, ranks, fuse, want, 6 * 63, "folded");
    free(x);
    tb_done(m, p);
}

/* The same for ConvTranspose (a mask head's upsampling):
 * onednn:sgemm-convtranspose; 2 of 4 images kept, 3 x 3, stride 2, pads
 * 1, output_padding 1, groups 1 and 2, against the direct scatter */
static void test_convt_dynamic_batch(void) {
    for (int G = 1; G <= 2; G++) {
        const int C = 4, O = 6, H = 5, W = 3, K = 3, S = 2, P = 1, OP = 1;
        const int OH = (H - 1) * S - 2 * P + K + OP, OW = (W - 1) * S - 2 * P + K + OP;
        int cg = C / G, og = O / G;
        mp_model *m = tb_new(17);
        tb_input(m, "x", F, 4, TB_DIMS(4, C, H, W));
        tb_input(m, "s", F, 1, TB_DIMS(4));
        static double wd[4 * 6 * 9], bd[6];
        for (int i = 0; i < C * og * K * K; i++) wd[i] = (double)((i * 41) % 29) / 13.0 - 1.0;
        for (int i = 0; i < O; i++) bd[i] = 0.25 * i - 0.5;
        tb_const_f(m, "w", F, 4, TB_DIMS(C, og, K, K), wd);
        tb_const_f(m, "b", F, 1, TB_DIMS(O), bd);
        rows_from_data(m);
        int c = tb_node(m, "ConvTranspose", "a,w,b", "y");
        tb_attr_ints(m, c, "kernel_shape", 2, TB_DIMS(K, K));
        tb_attr_ints(m, c, "pads", 4, TB_DIMS(P, P, P, P));
        tb_attr_ints(m, c, "strides", 2, TB_DIMS(S, S));
        tb_attr_ints(m, c, "output_padding", 2, TB_DIMS(OP, OP));
        tb_attr_i(m, c, "group", G);
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        const mp_kernel *kern = mp_dnnl_kernel(m->graph, tb_nodep(m, c));
        if (mp_dnnl_available()) T_CHECK(kern && strcmp(kern->name, "onednn:sgemm-convtranspose") == 0);
        float *x = rnd(4 * C * H * W), sv[4] = {0, 5, 0, 1};
        double *acc = calloc((size_t)(2 * O * OH * OW), sizeof(double));
        float *want = malloc(sizeof(float) * (size_t)(2 * O * OH * OW));
        int rows[2] = {1, 3};
        for (int r = 0; r < 2; r++)
            for (int o = 0; o < O; o++) {
                int gi = o / og, oo = o % og;
                for (int e = 0; e < OH * OW; e++) acc[(r * O + o) * OH * OW + e] = (float)bd[o];
                for (int ci = 0; ci < cg; ci++)
                    for (int ih = 0; ih < H; ih++)
                        for (int iw = 0; iw < W; iw++)
                            for (int kh = 0; kh < K; kh++)
                                for (int kw = 0; kw < K; kw++) {
                                    int oh = ih * S - P + kh, ow = iw * S - P + kw;
                                    if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                                    int ch = gi * cg + ci;
                                    acc[((r * O + o) * OH + oh) * OW + ow] +=
                                        (double)x[((rows[r] * C + ch) * H + ih) * W + iw] *
                                        (float)wd[((ch * og + oo) * K + kh) * K + kw];
                                }
            }
        for (int i = 0; i < 2 * O * OH * OW; i++) want[i] = (float)acc[i];
        const char *names[2] = {"x", "s"};
        float *data[2] = {x, sv};
        const int64_t *dims[2] = {TB_DIMS(4, C, H, W), TB_DIMS(4)};
        int ranks[2] = {4, 1};
        for (int fuse = 0; fuse < 2; fuse++)
            EXPECT_PLAN(m, p, 2, names, data, dims, ranks, fuse, want, 2 * O * OH * OW, "convt batch");
        free(x), free(acc), free(want);
        tb_done(m, p);
    }
}

/* nn.GELU as PyTorch exports it before opset 20 on x [16, 512]: Div(x,
 * sqrt 2) -> Erf -> Add(1) -> Mul(x, .) -> Mul(0.5); *head gets the Div */
static mp_model *gelu_erf_model(int *head) {
    mp_model *m = tb_new(14);
    tb_input(m, "x", F, 2, TB_DIMS(16, 512));
    tb_const_f(m, "r2", F, 0, NULL, (const double[]){1.4142135381698608});
    tb_const_f(m, "one", F, 0, NULL, (const double[]){1.0});
    tb_const_f(m, "half", F, 0, NULL, (const double[]){0.5});
    *head = tb_node(m, "Div", "x,r2", "q");
    tb_node(m, "Erf", "q", "e");
    tb_node(m, "Add", "e,one", "a");
    tb_node(m, "Mul", "x,a", "b");
    tb_node(m, "Mul", "b,half", "y");
    tb_output(m, "y");
    return m;
}

/* that GELU run as one gelu_erf kernel */
static void test_plan_gelu_erf(void) {
    int d;
    mp_model *m = gelu_erf_model(&d);
    mp_profile *p = tb_prof(m);
    const mp_kernel *kern = mp_dnnl_kernel(m->graph, tb_nodep(m, d));
    T_CHECK(kern && strcmp(kern->name, "onednn:gelu") == 0);
    const int64_t n = 16 * 512;
    float *xv = rnd(n), *want = zeros(n);
    for (int64_t i = 0; i < n; i++) {
        xv[i] *= 4;
        want[i] = (float)(0.5 * xv[i] * (1 + erf(xv[i] / sqrt(2.0))));
    }
    const char *names[1] = {"x"};
    float *data[1] = {xv};
    const int64_t *dims[1] = {TB_DIMS(16, 512)};
    int ranks[1] = {2};
    for (int fuse = 0; fuse < 2; fuse++) {
        EXPECT_PLAN(m, p, 1, names, data, dims, ranks, fuse, want, n, "the chain");
    }
    free(xv), free(want);
    tb_done(m, p);
}

/* LayerNormalization as the TorchScript exporter writes it at opset 14
 * (ReduceMean, Sub, Pow, ReduceMean, Add eps, Sqrt, Div, Mul, Add),
 * blk.ln's nodes; then a Relu in blk.act. Fused: one onednn:layernorm
 * kernel for the nine nodes; not fused: each alone. Outputs against the
 * reference loop; MACs and FLOPs per module and the kernel groups' FLOPs
 * are the same both ways (fusion moves time, never counts). */
static void test_plan_layernorm_pattern(void) {
    enum { R = 6, D = 96 };
    bool was_portable = mp_run_portable_only; /* another file's test may have left it set */
    mp_run_portable_only = false;
    mp_model *m = tb_new(14);
    tb_input(m, "x", F, 3, TB_DIMS(2, 3, D));
    double gv[D], bv[D];
    for (int i = 0; i < D; i++) gv[i] = 0.5 + i * 0.01, bv[i] = -0.25 + i * 0.005;
    tb_const_f(m, "gamma", F, 1, TB_DIMS(D), gv);
    tb_const_f(m, "beta", F, 1, TB_DIMS(D), bv);
    tb_const_f(m, "two", F, 0, NULL, (const double[]){2.0});
    tb_const_f(m, "eps", F, 0, NULL, (const double[]){1e-6});
    int nodes[10];
    nodes[0] = tb_node(m, "ReduceMean", "x", "mu");
    tb_attr_ints(m, nodes[0], "axes", 1, TB_DIMS(-1));
    nodes[1] = tb_node(m, "Sub", "x,mu", "d");
    nodes[2] = tb_node(m, "Pow", "d,two", "p");
    nodes[3] = tb_node(m, "ReduceMean", "p", "var");
    tb_attr_ints(m, nodes[3], "axes", 1, TB_DIMS(-1));
    nodes[4] = tb_node(m, "Add", "var,eps", "ve");
    nodes[5] = tb_node(m, "Sqrt", "ve", "sd");
    nodes[6] = tb_node(m, "Div", "d,sd", "q");
    nodes[7] = tb_node(m, "Mul", "q,gamma", "o");
    nodes[8] = tb_node(m, "Add", "o,beta", "ln");
    nodes[9] = tb_node(m, "Relu", "ln", "y");
    tb_output(m, "y");
    int mln = mp_model_module(m, "blk.ln", 6), mact = mp_model_module(m, "blk.act", 7);
    for (int i = 0; i < 10; i++) m->graph->nodes[nodes[i]].module = i < 9 ? mln : mact;
    mp_profile *p = tb_prof(m);
    const mp_kernel *kern = mp_dnnl_kernel(m->graph, tb_nodep(m, nodes[0]));
    T_CHECK(kern && strcmp(kern->name, "onednn:layernorm") == 0);
    float *xv = rnd(R * D), *want = zeros(R * D);
    for (int r = 0; r < R; r++) {
        double mu = 0, var = 0;
        for (int i = 0; i < D; i++) mu += xv[r * D + i];
        mu /= D;
        for (int i = 0; i < D; i++) var += (xv[r * D + i] - mu) * (xv[r * D + i] - mu);
        var /= D;
        for (int i = 0; i < D; i++) {
            double v = (xv[r * D + i] - mu) / sqrt(var + 1e-6) * gv[i] + bv[i];
            want[r * D + i] = (float)(v > 0 ? v : 0);
        }
    }
    const char *names[1] = {"x"};
    float *data[1] = {xv};
    const int64_t *dims[1] = {TB_DIMS(2, 3, D)};
    int ranks[1] = {3};
    int nm = m->n_modules;
    uint64_t *macs0 = calloc((size_t)nm + 1, sizeof *macs0), *flops0 = calloc((size_t)nm + 1, sizeof *flops0);
    for (int i = 0; i < nm; i++) macs0[i] = p->mods[i].macs, flops0[i] = p->mods[i].flops;
    /* by hand (docs/DESIGN.md): 7 nodes of 576 elements, Add eps and Sqrt on 6 */
    T_EQ(p->mods[mln].flops, 7 * 576 + 6 + 6);
    T_EQ(p->mods[mln].macs, 0);
    for (int fuse = 0; fuse < 2; fuse++) {
        EXPECT_PLAN(m, p, 1, names, data, dims, ranks, fuse, want, R * D, "the pattern");
        /* measured: counts per module unchanged, groups sum to the total */
        mp_exec *pl = measure_plan(p, fuse, 2);
        if (!pl) continue;
        T_OK(mp_profile_run(pl, p));
        for (int i = 0; i < nm; i++) {
            T_EQ(p->mods[i].macs, macs0[i]);
            T_EQ(p->mods[i].flops, flops0[i]);
        }
        uint64_t gsum = 0;
        int lngroups = 0;
        for (int i = 0; i < p->n_groups; i++) {
            gsum += p->groups[i].flops;
            if (strcmp(p->groups[i].name, "ReduceMean+Sub+Pow+ReduceMean+Add+Sqrt+Div+Mul+Add") == 0) {
                lngroups++;
                T_EQ_STR(p->groups[i].kernel, "onednn:layernorm");
                T_EQ(p->groups[i].flops, p->mods[mln].flops);
            }
        }
        T_EQ(gsum, p->total.flops);
        T_EQ(lngroups, fuse);
        T_EQ(p->run.fused, fuse ? 8 : 0);
        mp_exec_free(pl);
    }
    free(macs0), free(flops0), free(xv), free(want);
    tb_done(m, p);
    mp_run_portable_only = was_portable;
}

/* ---- the scalar math in one place (src/ops/scalar.h) at extreme inputs ----
 * Each activation at +-1e4, +-inf, NaN and around the overflow points,
 * through every path that computes it: the reference kernels (the
 * portable run) exactly as the one home computes in double, rounded to
 * fp32; the RNN activation table (mp_kact) exactly; oneDNN's eltwise
 * kernels (their own code) within 1e-6 relative, with the same NaN and
 * infinities. */
static const double ext_x[] = {1e4, -1e4, INFINITY, -INFINITY, NAN, 0.0, 1.0, -1.0, 30.5, 88.0, 700.0, 710.0, -88.0};
enum { EXT_N = sizeof ext_x / sizeof ext_x[0] };

static bool ext_same(double got, double want, double rel) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    if (rel == 0) return (float)got == (float)want;
    return fabs(got - want) <= rel * fmax(fabs(want), 1e-30) || fabs(got - want) <= 1e-30;
}

/* x [EXT_N, 1] @ [[1]] then `op`: the product is exact, and on oneDNN the
 * activation runs as the MatMul's eltwise post-op (fused: p->run.fused).
 * Portable: every node on its reference kernel. false when oneDNN was
 * asked for and did not fuse the activation. */
static bool ext_run(const char *domain, const char *op, const char *attr, double alpha, bool portable,
                    float *y) {
    mp_model *m = tb_new(20);
    if (domain) tb_opset(m, domain, 1);
    tb_input(m, "x", F, 2, TB_DIMS(EXT_N, 1));
    tb_const_f(m, "one", F, 2, TB_DIMS(1, 1), (const double[]){1.0});
    tb_node(m, "MatMul", "x,one", "xm");
    int nd = domain ? tb_node_d(m, domain, op, "xm", "y") : tb_node(m, op, "xm", "y");
    if (attr) tb_attr_s(m, nd, "approximate", attr);
    if (alpha != 0) tb_attr_f(m, nd, "alpha", alpha);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    bool ran = false;
    bool was = mp_run_portable_only;
    mp_run_portable_only = portable;
    mp_exec *pl = p ? measure_plan(p, !portable, 1) : NULL;
    if (pl) {
        float xv[EXT_N];
        for (int i = 0; i < EXT_N; i++) xv[i] = (float)ext_x[i];
        const char *names[1] = {"x"};
        float *data[1] = {xv};
        const int64_t *dims[1] = {TB_DIMS(EXT_N, 1)};
        int ranks[1] = {2};
        set_inputs(pl, 1, names, data, dims, ranks);
        T_OK(mp_profile_run(pl, p));
        int64_t n = 0;
        const float *out = plan_out(pl, 0, &n);
        if (out && n == EXT_N && (portable || p->run.fused >= 1)) {
            memcpy(y, out, sizeof(float) * EXT_N);
            ran = true;
        }
        mp_exec_free(pl);
    }
    mp_run_portable_only = was;
    tb_done(m, p);
    return ran;
}

static double ext_softplus(double x) { return mp_s_softplus(x); }
static double ext_sigmoid(double x) { return mp_s_sigmoid(x); }
static double ext_gelu_erf(double x) { return mp_s_gelu_erf(x); }
static double ext_gelu_tanh(double x) { return mp_s_gelu_tanh(x); }
static double ext_quick(double x) { return mp_s_swish(x, 1.702); }
static double ext_mish(double x) { return x * tanh(mp_s_softplus(x)); }

static void test_extreme_activations(void) {
    static const struct {
        const char *domain, *op, *attr;
        double alpha;
        double (*home)(double);
        const char *kact; /* the RNN table's name for it, or NULL */
    } cases[] = {
        {NULL, "Gelu", NULL, 0, ext_gelu_erf, NULL},
        {NULL, "Gelu", "tanh", 0, ext_gelu_tanh, NULL},
        {NULL, "Softplus", NULL, 0, ext_softplus, "Softplus"},
        {NULL, "Sigmoid", NULL, 0, ext_sigmoid, "Sigmoid"},
        {NULL, "Mish", NULL, 0, ext_mish, NULL},
        {"com.microsoft", "Gelu", NULL, 0, ext_gelu_erf, NULL},
        {"com.microsoft", "FastGelu", NULL, 0, ext_gelu_tanh, NULL},
        {"com.microsoft", "QuickGelu", NULL, 1.702, ext_quick, NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float y[EXT_N];
        for (int path = 0; path < 2; path++) {
            if (!ext_run(cases[c].domain, cases[c].op, cases[c].attr, cases[c].alpha, path == 0, y)) {
                if (path == 0) T_CHECK(!"the portable run failed");
                continue;
            }
            for (int i = 0; i < EXT_N; i++) {
                /* the input as the kernel saw it (fp32) */
                double want = cases[c].home((double)(float)ext_x[i]);
                if (!ext_same(y[i], want, path == 0 ? 0 : 1e-6))
                    mp_t_fail(__FILE__, __LINE__, "%s%s%s(%g) on the %s path: %.9g, the one home gives %.9g",
                              cases[c].op, cases[c].attr ? " " : "", cases[c].attr ? cases[c].attr : "", ext_x[i],
                              path == 0 ? "reference" : "oneDNN", (double)y[i], want);
            }
        }
        if (cases[c].kact)
            for (int i = 0; i < EXT_N; i++) {
                double got = mp_kact(cases[c].kact, ext_x[i], 0, 0), want = cases[c].home(ext_x[i]);
                if (!(isnan(want) ? isnan(got) : got == want))
                    mp_t_fail(__FILE__, __LINE__, "mp_kact %s(%g): %.17g, the one home gives %.17g", cases[c].kact,
                              ext_x[i], got, want);
            }
    }
    /* softmax rows: the reference Softmax (both of its paths) against the home's */
    {
        double row[EXT_N];
        for (int i = 0; i < EXT_N; i++) row[i] = (float)ext_x[i];
        mp_s_softmax_row(row, EXT_N, false);
        for (int i = 0; i < EXT_N; i++) T_CHECK(isnan(row[i])); /* +inf and NaN in the row: NaN, as ONNX */
        double fin[3] = {1e4, -1e4, 0}, mask[2] = {-INFINITY, -INFINITY};
        mp_s_softmax_row(fin, 3, false);
        T_CHECK(fin[0] == 1 && fin[1] == 0 && fin[2] == 0);
        mp_s_softmax_row(mask, 2, true);
        T_CHECK(mask[0] == 0 && mask[1] == 0); /* a fully masked attention row: zeros */
    }
}

/* The other oneDNN paths of the same math at extreme inputs: GELU written
 * out as PyTorch's TorchScript export writes it (Div(x, sqrt 2), Erf,
 * Add 1, Mul x, Mul 0.5), run whole as oneDNN's gelu_erf eltwise
 * (onednn:gelu), against the one home within 1e-6 relative with the same
 * NaN and infinities; and softmax rows with extreme and masked (-inf)
 * entries, the portable kernel exactly as the home's fp32 row and oneDNN's
 * softmax primitive within 1e-6. */
static void test_extreme_gelu_softmax(void) {
    bool was = mp_run_portable_only;
    {
        int head;
        mp_model *m = gelu_erf_model(&head);
        mp_profile *p = tb_prof(m);
        mp_run_portable_only = false;
        const mp_kernel *kern = p ? mp_dnnl_kernel(m->graph, tb_nodep(m, head)) : NULL;
        T_CHECK(kern && strcmp(kern->name, "onednn:gelu") == 0);
        mp_exec *pl = p && kern ? measure_plan(p, 1, 1) : NULL;
        if (pl) {
            float xv[16 * 512];
            for (int i = 0; i < 16 * 512; i++) xv[i] = (float)ext_x[i % EXT_N];
            const char *names[1] = {"x"};
            float *data[1] = {xv};
            const int64_t *dims[1] = {TB_DIMS(16, 512)};
            int ranks[1] = {2};
            set_inputs(pl, 1, names, data, dims, ranks);
            T_OK(mp_profile_run(pl, p));
            T_CHECK(p->run.fused >= 1);
            int64_t n = 0;
            const float *y = plan_out(pl, 0, &n);
            for (int i = 0; y && i < 16 * 512 && n == 16 * 512; i++) {
                double want = mp_s_gelu_erf((double)xv[i]);
                if (!ext_same(y[i], want, 1e-6))
                    mp_t_fail(__FILE__, __LINE__, "GELU written out (%g) on oneDNN: %.9g, the one home gives %.9g",
                              ext_x[i % EXT_N], (double)y[i], want);
            }
            mp_exec_free(pl);
        }
        tb_done(m, p);
    }
    {
        enum { R = 4, C = 4 };
        static const float rows[R][C] = {{1e4f, -1e4f, 0, 1}, {-INFINITY, 0, 1, 2}, {88, -88, 700, -700},
                                         {1, 1, 1, 1}};
        for (int path = 0; path < 2; path++) {
            mp_model *m = tb_new(13);
            tb_input(m, "x", F, 2, TB_DIMS(R, C));
            int nd = tb_node(m, "Softmax", "x", "y");
            tb_attr_i(m, nd, "axis", -1);
            tb_output(m, "y");
            mp_profile *p = tb_prof(m);
            mp_run_portable_only = path == 0;
            bool dn = p && mp_dnnl_kernel(m->graph, tb_nodep(m, nd)) != NULL;
            if (path == 1) T_CHECK(dn);
            mp_exec *pl = p && (path == 0 || dn) ? measure_plan(p, 1, 1) : NULL;
            if (pl) {
                const char *names[1] = {"x"};
                float *data[1] = {(float *)rows};
                const int64_t *dims[1] = {TB_DIMS(R, C)};
                int ranks[1] = {2};
                set_inputs(pl, 1, names, data, dims, ranks);
                T_OK(mp_profile_run(pl, p));
                int64_t n = 0;
                const float *y = plan_out(pl, 0, &n);
                for (int r = 0; y && n == R * C && r < R; r++) {
                    float want[C];
                    mp_s_softmax_rowf(rows[r], want, C);
                    for (int j = 0; j < C; j++)
                        if (!ext_same(y[r * C + j], want[j], path == 0 ? 0 : 1e-6))
                            mp_t_fail(__FILE__, __LINE__, "softmax row %d col %d on the %s path: %.9g, the home gives %.9g",
                                      r, j, path == 0 ? "reference" : "oneDNN", (double)y[r * C + j], (double)want[j]);
                }
                mp_exec_free(pl);
            }
            tb_done(m, p);
        }
    }
    mp_run_portable_only = was;
}

/* Attention as exporters before opset 23 write it, one onednn:attention
 * group when fused, the plain kernels unfused, against the reference loops
 * both ways; the group's FLOPs are the nodes' own, fused or not. Forms:
 *   0  MatMul(Q, Kt) -> Div -> Add(mask [B,1,1,Sk]) -> Softmax -> MatMul (rank 4)
 *   1  MatMul -> Mul -> Softmax -> Cast -> MatMul (rank 3, no mask)
 *   2  MatMul -> Softmax -> MatMul
 *   3  MatMul -> Div -> Where(causal constant, s, -inf) -> Softmax -> MatMul
 *      (TorchScript's GPT-2)
 *   4  MatMul -> Where(mask > 0, lowest, s) -> Softmax -> MatMul: the
 *      condition made each run, the fill where it is true
 *   5  MatMul -> Add(mask) -> Softmax -> IsNaN/Where(., 0, p) -> MatMul
 *      (the dynamo exporter), the mask -inf over batch 1's every key: its
 *      rows are NaN before the guard, 0 after */
static void test_plan_attention(void) {
    enum { B = 2, H = 3, SQ = 5, SK = 7, D = 8, DV = 4, FORMS = 6 };
    static const char *const group[FORMS] = {"MatMul+Div+Add+Softmax+MatMul", "MatMul+Mul+Softmax+Cast+MatMul",
                                             "MatMul+Softmax+MatMul", "MatMul+Div+Where+Softmax+MatMul",
                                             "MatMul+Where+Softmax+MatMul",
                                             "MatMul+Add+Softmax+IsNaN+Where+MatMul"};
    const double lowest = -3.4028234663852886e38;
    bool was_portable = mp_run_portable_only;
    mp_run_portable_only = false;
    for (int form = 0; form < FORMS; form++) {
        mp_model *m = tb_new(14);
        int r = form == 1 || form == 2 ? 3 : 4;
        bool has_mask = form == 0 || form == 4 || form == 5;
        int64_t bq[4] = {B, H, SQ, D}, bk[4] = {B, H, D, SK}, bv[4] = {B, H, SK, DV};
        int64_t q3[3] = {B * H, SQ, D}, k3[3] = {B * H, D, SK}, v3[3] = {B * H, SK, DV};
        tb_input(m, "q", F, r, r == 4 ? bq : q3);
        tb_input(m, "kt", F, r, r == 4 ? bk : k3);
        tb_input(m, "v", F, r, r == 4 ? bv : v3);
        if (has_mask) tb_input(m, "mask", F, 4, TB_DIMS(B, 1, 1, SK));
        tb_const_f(m, "scale", F, 0, NULL, (const double[]){form == 1 ? 0.25 : 2.0});
        int64_t causal[SQ * SK];
        for (int i = 0; i < SQ; i++)
            for (int j = 0; j < SK; j++) causal[i * SK + j] = j <= i + 1;
        if (form == 4) { /* the condition before the head: made when the group runs */
            tb_const_f(m, "zero", F, 0, NULL, (const double[]){0.0});
            tb_node(m, "Greater", "mask,zero", "cond");
        }
        int head = tb_node(m, "MatMul", "q,kt", "s");
        const char *last = "s";
        if (form == 0 || form == 3) {
            tb_node(m, "Div", "s,scale", "sd");
            last = "sd";
        } else if (form == 1) {
            tb_node(m, "Mul", "s,scale", "sd");
            last = "sd";
        }
        if (form == 0 || form == 5) {
            tb_node(m, "Add", form == 0 ? "sd,mask" : "s,mask", "sm");
            last = "sm";
        } else if (form == 3) {
            tb_const_i(m, "causal", MP_DT_BOOL, 2, TB_DIMS(SQ, SK), causal);
            tb_const_f(m, "fill", F, 0, NULL, (const double[]){-INFINITY});
            tb_node(m, "Where", "causal,sd,fill", "sm");
            last = "sm";
        } else if (form == 4) {
            tb_const_f(m, "fill", F, 0, NULL, (const double[]){lowest});
            tb_node(m, "Where", "cond,fill,s", "sm");
            last = "sm";
        }
        int sm = tb_node(m, "Softmax", last, "p");
        tb_attr_i(m, sm, "axis", -1);
        if (form == 1) {
            int c = tb_node(m, "Cast", "p", "pc");
            tb_attr_i(m, c, "to", F);
            tb_node(m, "MatMul", "pc,v", "y");
        } else if (form == 5) {
            tb_const_f(m, "zero", F, 0, NULL, (const double[]){0.0});
            tb_node(m, "IsNaN", "p", "pn");
            tb_node(m, "Where", "pn,zero,p", "pg");
            tb_node(m, "MatMul", "pg,v", "y");
        } else {
            tb_node(m, "MatMul", "p,v", "y");
        }
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        const mp_kernel *kern = mp_dnnl_kernel(m->graph, tb_nodep(m, head));
        if (!kern || strcmp(kern->name, "onednn:attention") != 0)
            mp_t_fail(__FILE__, __LINE__, "form %d: the head's kernel is %s", form, kern ? kern->name : "none");
        int nb = B * H;
        float *q = rnd(nb * SQ * D), *kt = rnd(nb * D * SK), *v = rnd(nb * SK * DV), *mask = rnd(B * SK);
        if (form == 5) /* batch 0: keys 1 and 4 masked; batch 1: every key */
            for (int j = 0; j < B * SK; j++)
                if (j >= SK || j == 1 || j == 4) mask[j] = -INFINITY;
        float *want = zeros(nb * SQ * DV);
        for (int bh = 0; bh < nb; bh++)
            for (int i = 0; i < SQ; i++) {
                double sc[SK], mx = -INFINITY, sum = 0;
                for (int j = 0; j < SK; j++) {
                    double acc = 0, mk = mask[(bh / H) * SK + j];
                    for (int t = 0; t < D; t++) acc += (double)q[(bh * SQ + i) * D + t] * kt[(bh * D + t) * SK + j];
                    if (form == 0 || form == 3) acc /= 2.0;
                    if (form == 1) acc *= 0.25;
                    if (form == 0 || form == 5) acc += mk;
                    if (form == 3 && !causal[i * SK + j]) acc = -INFINITY;
                    if (form == 4 && mk > 0) acc = lowest;
                    sc[j] = acc;
                    mx = acc > mx ? acc : mx;
                }
                if (mx == -INFINITY) continue; /* every key masked: NaN, and the guard's 0 */
                for (int j = 0; j < SK; j++) sum += sc[j] = exp(sc[j] - mx);
                for (int c = 0; c < DV; c++) {
                    double acc = 0;
                    for (int j = 0; j < SK; j++) acc += sc[j] / sum * v[(bh * SK + j) * DV + c];
                    want[(bh * SQ + i) * DV + c] = (float)acc;
                }
            }
        const char *names[4] = {"q", "kt", "v", "mask"};
        float *data[4] = {q, kt, v, mask};
        const int64_t *dims[4] = {r == 4 ? bq : q3, r == 4 ? bk : k3, r == 4 ? bv : v3, TB_DIMS(B, 1, 1, SK)};
        int ranks[4] = {r, r, r, 4};
        int n_in = has_mask ? 4 : 3;
        uint64_t flops0 = p->total.flops, gflops = flops0; /* the group's: all but form 4's Greater */
        for (int i = 0; i < p->n_ops; i++)
            if (strcmp(p->ops[i].op, "Greater") == 0) gflops -= p->ops[i].fig.flops;
        for (int fuse = 0; fuse < 2; fuse++) {
            char tag[32];
            snprintf(tag, sizeof tag, "form %d", form);
            EXPECT_PLAN(m, p, n_in, names, data, dims, ranks, fuse, want, nb * SQ * DV, tag);
            /* measured: one group of every node when fused */
            mp_exec *pl = measure_plan(p, fuse, 1);
            if (!pl) continue;
            set_inputs(pl, n_in, names, data, dims, ranks);
            T_OK(mp_profile_run(pl, p));
            int groups = 0;
            for (int i = 0; i < p->n_groups; i++)
                if (strcmp(p->groups[i].kernel, "onednn:attention") == 0) {
                    groups++;
                    T_EQ_STR(p->groups[i].name, group[form]);
                    T_EQ(p->groups[i].flops, gflops);
                }
            /* form 3's causal table is broadcast [1, 1, SQ, SK] onto the
             * scores: where oneDNN has only its reference matmul for that
             * post-op (oneDNN 2.6 on x86), the attention is not fused (the
             * reference code was 28x slower than the nodes apart) */
            if (form == 3 ? groups > fuse : groups != fuse)
                mp_t_fail(__FILE__, __LINE__, "form %d fuse %d: %d attention groups", form, fuse, groups);
            T_EQ(p->total.flops, flops0);
            mp_exec_free(pl);
        }
        free(q), free(kt), free(v), free(mask), free(want);
        tb_done(m, p);
    }
    mp_run_portable_only = was_portable;
}

/* The attention heads of real exports get the attention kernel: the
 * TorchScript exporter's GPT-2 (a Where mask, its fill a Constant node)
 * and the dynamo exporter's decomposed scaled_dot_product_attention (an
 * Add mask, the IsNaN guard, scalars as initializers no shape rule read),
 * weightless fixtures profiled at batch 1, sequence 16. */
static void test_attention_exports(void) {
    static const struct {
        const char *file, *node;
    } cases[] = {
        {"models/gpt2.onnx", "/transformer/h.0/attn/MatMul"},
        {"models/dynamo/distilbert_base.onnx", "node_MatMul_113"},
        {"models/dynamo/qwen3_2layers.onnx", "node_MatMul_303"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mp_model *m = NULL;
        mp_profile *p = NULL;
        if (mp_model_load(cases[c].file, &m) || mp_model_set_dim(m, "batch", 1) || mp_model_set_dim(m, "seq", 16) ||
            mp_profile_static(m, &p)) {
            mp_t_fail(__FILE__, __LINE__, "%s: %s", cases[c].file, mp_last_error());
            mp_model_free(m);
            continue;
        }
        const mp_node *head = NULL;
        for (int i = 0; i < m->graph->n_nodes && !head; i++)
            if (strcmp(m->graph->nodes[i].name, cases[c].node) == 0) head = &m->graph->nodes[i];
        const mp_kernel *k = head ? mp_dnnl_kernel(m->graph, head) : NULL;
        if (!k || strcmp(k->name, "onednn:attention") != 0)
            mp_t_fail(__FILE__, __LINE__, "%s: node %s: kernel %s", cases[c].file, cases[c].node,
                      k ? k->name : head ? "none" : "(node not found)");
        mp_profile_free(p);
        mp_model_free(m);
    }
}

/* Linear + GELU as opset-14 exports write them: MatMul -> Add(bias) ->
 * the erf GELU (Div, Erf, Add, Mul, Mul) or the tanh GELU (Mul 0.5, Pow,
 * Mul, Add, Mul, Tanh, Add, Mul): one matmul kernel with bias and GELU as
 * post-ops when fused, against the reference loops both ways. */
static void test_plan_matmul_gelu(void) {
    bool was_portable = mp_run_portable_only; /* another file's test may have left it set */
    mp_run_portable_only = false;
    for (int form = 0; form < 2; form++) {
        mp_model *m = tb_new(14);
        tb_input(m, "x", F, 3, TB_DIMS(1, 24, 64));
        tb_input(m, "w", F, 2, TB_DIMS(64, 80));
        tb_input(m, "b", F, 1, TB_DIMS(80));
        tb_const_f(m, "r2", F, 0, NULL, (const double[]){1.4142135381698608});
        tb_const_f(m, "one", F, 0, NULL, (const double[]){1.0});
        tb_const_f(m, "half", F, 0, NULL, (const double[]){0.5});
        tb_const_f(m, "three", F, 0, NULL, (const double[]){3.0});
        tb_const_f(m, "c", F, 0, NULL, (const double[]){0.044715});
        tb_const_f(m, "k", F, 0, NULL, (const double[]){0.7978845834732056});
        int mm = tb_node(m, "MatMul", "x,w", "h");
        tb_node(m, "Add", "h,b", "hb");
        if (form == 0) {
            tb_node(m, "Div", "hb,r2", "q");
            tb_node(m, "Erf", "q", "e");
            tb_node(m, "Add", "e,one", "a");
            tb_node(m, "Mul", "hb,a", "g");
            tb_node(m, "Mul", "g,half", "y");
        } else {
            tb_node(m, "Mul", "hb,half", "hh");
            tb_node(m, "Pow", "hb,three", "p3");
            tb_node(m, "Mul", "p3,c", "m1");
            tb_node(m, "Add", "hb,m1", "a");
            tb_node(m, "Mul", "a,k", "m2");
            tb_node(m, "Tanh", "m2", "t");
            tb_node(m, "Add", "t,one", "a1");
            tb_node(m, "Mul", "hh,a1", "y");
        }
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        float *xv = rnd(24 * 64), *wv = rnd(64 * 80), *bv = rnd(80), *want = zeros(24 * 80);
        ref_matmul(xv, wv, want, 24, 64, 80);
        for (int i = 0; i < 24 * 80; i++) {
            double v = (double)want[i] + bv[i % 80];
            want[i] = (float)(form == 0 ? 0.5 * v * (1 + erf(v / sqrt(2.0)))
                                        : 0.5 * v * (1 + tanh(0.7978845834732056 * (v + 0.044715 * v * v * v))));
        }
        const char *names[3] = {"x", "w", "b"};
        float *data[3] = {xv, wv, bv};
        const int64_t *dims[3] = {TB_DIMS(1, 24, 64), TB_DIMS(64, 80), TB_DIMS(80)};
        int ranks[3] = {3, 2, 1};
        for (int fuse = 0; fuse < 2; fuse++) {
            char tag[32];
            snprintf(tag, sizeof tag, "form %d", form);
            EXPECT_PLAN(m, p, 3, names, data, dims, ranks, fuse, want, 24 * 80, tag);
        }
        mp_exec *pl = measure_plan(p, 1, 1);
        if (pl) {
            T_OK(mp_profile_run(pl, p));
            T_EQ(p->run.steps, 1);
            T_EQ_STR(p->node_group[mm], form == 0 ? "MatMul+Add+Div+Erf+Add+Mul+Mul"
                                                  : "MatMul+Add+Mul+Pow+Mul+Add+Mul+Tanh+Add+Mul");
            mp_exec_free(pl);
        }
        free(xv), free(wv), free(bv), free(want);
        tb_done(m, p);
    }
    mp_run_portable_only = was_portable;
}

/* SiLU written out (x * Sigmoid(x), the TorchScript exporter's F.silu:
 * EfficientNet's convolutions, Llama's MLP gate), QuickGELU (x *
 * Sigmoid(1.702 x)) and Mish (x * Tanh(Softplus(x)), F.mish before opset
 * 18: YOLO's convolutions) after a MatMul and after a Conv: one kernel, the
 * activation oneDNN's swish post-op (alpha 1 and 1.702) or its mish. Before,
 * each piece ran alone over the tensor. Against the reference loops, fused
 * and not; fused, one step. */
static void test_plan_swish(void) {
    bool was_portable = mp_run_portable_only;
    mp_run_portable_only = false;
    for (int form = 0; form < 6; form++) { /* SiLU, QuickGELU, Mish after MatMul; the same after Conv */
        bool conv = form >= 3, quick = form % 3 == 1, mish = form % 3 == 2;
        mp_model *m = tb_new(14);
        tb_input(m, "x", F, conv ? 4 : 3, conv ? TB_DIMS(1, 8, 12, 12) : TB_DIMS(1, 24, 64));
        tb_input(m, "w", F, conv ? 4 : 2, conv ? TB_DIMS(16, 8, 3, 3) : TB_DIMS(64, 80));
        tb_const_f(m, "q", F, 0, NULL, (const double[]){1.702});
        int head = conv ? tb_node(m, "Conv", "x,w", "h") : tb_node(m, "MatMul", "x,w", "h");
        if (conv) tb_attr_ints(m, head, "pads", 4, TB_DIMS(1, 1, 1, 1));
        if (quick) {
            tb_node(m, "Mul", "h,q", "hq");
            tb_node(m, "Sigmoid", "hq", "s");
        } else if (mish) {
            tb_node(m, "Softplus", "h", "sp");
            tb_node(m, "Tanh", "sp", "s");
        } else {
            tb_node(m, "Sigmoid", "h", "s");
        }
        tb_node(m, "Mul", "h,s", "y");
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        int64_t n = conv ? 16 * 144 : 24 * 80;
        float *xv = rnd(conv ? 8 * 144 : 24 * 64), *wv = rnd(conv ? 16 * 8 * 9 : 64 * 80), *want = zeros(n);
        if (conv) ref_conv2d(xv, wv, NULL, want, 1, 8, 12, 12, 16, 3, 3, 1, 1, 1, 1, 12, 12);
        else ref_matmul(xv, wv, want, 24, 64, 80);
        for (int64_t i = 0; i < n; i++) {
            double v = want[i];
            want[i] = mish ? (float)(v * tanh(log1p(exp(v)))) : (float)(v / (1 + exp(-(quick ? 1.702 : 1.0) * v)));
        }
        const char *names[2] = {"x", "w"};
        float *data[2] = {xv, wv};
        const int64_t *dims[2] = {conv ? TB_DIMS(1, 8, 12, 12) : TB_DIMS(1, 24, 64),
                                  conv ? TB_DIMS(16, 8, 3, 3) : TB_DIMS(64, 80)};
        int ranks[2] = {conv ? 4 : 3, conv ? 4 : 2};
        char tag[32];
        snprintf(tag, sizeof tag, "form %d", form);
        for (int fuse = 0; fuse < 2; fuse++) EXPECT_PLAN(m, p, 2, names, data, dims, ranks, fuse, want, n, tag);
        mp_exec *pl = measure_plan(p, 1, 1);
        if (pl) {
            T_OK(mp_profile_run(pl, p));
            T_EQ(p->run.steps, 1);
            mp_exec_free(pl);
        }
        free(xv), free(wv), free(want);
        tb_done(m, p);
    }
    mp_run_portable_only = was_portable;
}

/* EfficientNet's squeeze-and-excitation between two convolutions:
 * x[1,16,32,32] -> Conv 1x1 to h[1,64,32,32] -> GlobalAveragePool ->
 * Conv 1x1 (64 -> 64) -> Sigmoid -> s[1,64,1,1]; y = Conv 1x1 of h * s
 * (back to 16). h stays channels-last through the pooling and the
 * broadcast Mul (dn_binary_blocked_ok: before, h was reordered to plain
 * for them and the product back for the last Conv, 3.8 ms of
 * EfficientNet-B0's 14); the output against the sums by hand, fused and
 * not. */
static void test_plan_se_block(void) {
    bool was_portable = mp_run_portable_only;
    mp_run_portable_only = false;
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 16, 32, 32));
    tb_input(m, "w1", F, 4, TB_DIMS(64, 16, 1, 1));
    tb_input(m, "w2", F, 4, TB_DIMS(64, 64, 1, 1));
    tb_input(m, "w3", F, 4, TB_DIMS(16, 64, 1, 1));
    tb_node(m, "Conv", "x,w1", "h");
    tb_node(m, "GlobalAveragePool", "h", "g");
    tb_node(m, "Conv", "g,w2", "f");
    tb_node(m, "Sigmoid", "f", "s");
    tb_node(m, "Mul", "h,s", "hs");
    tb_node(m, "Conv", "hs,w3", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    const int P = 32 * 32;
    float *xv = rnd(16 * P), *w1 = rnd(64 * 16), *w2 = rnd(64 * 64), *w3 = rnd(16 * 64);
    float *h = zeros(64 * P), *want = zeros(16 * P);
    double g[64], sc[64];
    ref_conv2d(xv, w1, NULL, h, 1, 16, 32, 32, 64, 1, 1, 1, 1, 0, 1, 32, 32);
    for (int c = 0; c < 64; c++) {
        g[c] = 0;
        for (int i = 0; i < P; i++) g[c] += h[c * P + i];
        g[c] /= P;
    }
    for (int o = 0; o < 64; o++) {
        double f = 0;
        for (int c = 0; c < 64; c++) f += (double)w2[o * 64 + c] * g[c];
        sc[o] = 1 / (1 + exp(-f));
    }
    for (int o = 0; o < 16; o++)
        for (int i = 0; i < P; i++) {
            double v = 0;
            for (int c = 0; c < 64; c++) v += (double)w3[o * 64 + c] * h[c * P + i] * sc[c];
            want[o * P + i] = (float)v;
        }
    const char *names[4] = {"x", "w1", "w2", "w3"};
    float *data[4] = {xv, w1, w2, w3};
    const int64_t *dims[4] = {TB_DIMS(1, 16, 32, 32), TB_DIMS(64, 16, 1, 1), TB_DIMS(64, 64, 1, 1),
                              TB_DIMS(16, 64, 1, 1)};
    int ranks[4] = {4, 4, 4, 4};
    /* h's readers (the pooling and the broadcast Mul) take it channels-last */
    if (mp_dnnl_available()) T_CHECK(dn_readers_take_blocked(m->graph, (int)(tb_val(m, "h") - m->graph->values), 0));
    for (int fuse = 0; fuse < 2; fuse++) EXPECT_PLAN(m, p, 4, names, data, dims, ranks, fuse, want, 16 * P, "se");
    free(xv), free(w1), free(w2), free(w3), free(h), free(want);
    tb_done(m, p);
    mp_run_portable_only = was_portable;
}

/* An Einsum that is a batched matrix product (MaxViT's attention: "B G H
 * I D, B G H J D -> B G H I J" and "B G H I J, B G H J D -> B G H I D")
 * is one oneDNN matmul, an operand with its last two letters swapped read
 * through its strides: four forms (neither, B, A, both swapped), against
 * the plain sums; one not of that form ("ij,jk->ik" with a batch only in
 * A) stays portable. Before, every such Einsum was packed and multiplied
 * by the portable GEMM (MaxViT-T: 90 ms of a 190 ms pass, now 3 ms). */
static void test_plan_einsum_bmm(void) {
    bool was_portable = mp_run_portable_only;
    mp_run_portable_only = false;
    static const char *const eq[4] = {"b g i k, b g k j -> b g i j", "bgik,bgjk->bgij", "bgki,bgkj->bgij",
                                      "bgki,bgjk->bgij"};
    const int B = 2, G = 3, M = 5, K = 7, N = 4;
    for (int f = 0; f < 4; f++) {
        bool ta = f >= 2, tb = f % 2;
        mp_model *m = tb_new(14);
        tb_input(m, "a", F, 4, ta ? TB_DIMS(B, G, K, M) : TB_DIMS(B, G, M, K));
        tb_input(m, "b", F, 4, tb ? TB_DIMS(B, G, N, K) : TB_DIMS(B, G, K, N));
        int e = tb_node(m, "Einsum", "a,b", "y");
        tb_attr_s(m, e, "equation", eq[f]);
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        const mp_kernel *kern = mp_dnnl_kernel(m->graph, tb_nodep(m, e));
        if (mp_dnnl_available()) T_CHECK(kern && strcmp(kern->name, "onednn:matmul") == 0);
        float *a = rnd(B * G * M * K), *b = rnd(B * G * K * N), *want = zeros(B * G * M * N);
        for (int q = 0; q < B * G; q++)
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double acc = 0;
                    for (int kk = 0; kk < K; kk++)
                        acc += (double)a[q * M * K + (ta ? kk * M + i : i * K + kk)] *
                               b[q * K * N + (tb ? j * K + kk : kk * N + j)];
                    want[q * M * N + i * N + j] = (float)acc;
                }
        const char *names[2] = {"a", "b"};
        float *data[2] = {a, b};
        const int64_t *dims[2] = {ta ? TB_DIMS(B, G, K, M) : TB_DIMS(B, G, M, K),
                                  tb ? TB_DIMS(B, G, N, K) : TB_DIMS(B, G, K, N)};
        int ranks[2] = {4, 4};
        char tag[32];
        snprintf(tag, sizeof tag, "form %d", f);
        for (int fuse = 0; fuse < 2; fuse++) EXPECT_PLAN(m, p, 2, names, data, dims, ranks, fuse, want, B * G * M * N, tag);
        free(a), free(b), free(want);
        tb_done(m, p);
    }
    mp_model *m = tb_new(14);
    tb_input(m, "a", F, 3, TB_DIMS(2, 3, 4));
    tb_input(m, "b", F, 2, TB_DIMS(4, 5));
    int e = tb_node(m, "Einsum", "a,b", "y");
    tb_attr_s(m, e, "equation", "bij,jk->bik");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_CHECK(mp_dnnl_kernel(m->graph, tb_nodep(m, e)) == NULL);
    tb_done(m, p);
    mp_run_portable_only = was_portable;
}

/* Channels-last activations between oneDNN kernels, through the planner:
 * Conv+Relu -> Conv -> Add(residual)+Relu -> MaxPool -> Conv -> output
 * (plain), against the reference loops, fused and not. */
static void test_plan_conv_layouts(void) {
    mp_model *m = tb_new(14);
    tb_input(m, "x", F, 4, TB_DIMS(1, 16, 12, 12));
    tb_input(m, "w1", F, 4, TB_DIMS(32, 16, 3, 3));
    tb_input(m, "w2", F, 4, TB_DIMS(32, 32, 1, 1));
    tb_input(m, "w3", F, 4, TB_DIMS(16, 32, 1, 1));
    int c1 = tb_node(m, "Conv", "x,w1", "c1");
    tb_attr_ints(m, c1, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_node(m, "Relu", "c1", "r1");
    tb_node(m, "Conv", "r1,w2", "c2");
    tb_node(m, "Add", "c2,r1", "s");
    tb_node(m, "Relu", "s", "r2");
    int mx = tb_node(m, "MaxPool", "r2", "mp");
    tb_attr_ints(m, mx, "kernel_shape", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, mx, "strides", 2, TB_DIMS(2, 2));
    tb_node(m, "Conv", "mp,w3", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    float *x = rnd(16 * 144), *w1 = rnd(32 * 16 * 9), *w2 = rnd(32 * 32), *w3 = rnd(16 * 32);
    float *r1 = zeros(32 * 144), *c2 = zeros(32 * 144), *mp = zeros(32 * 36), *want = zeros(16 * 36);
    ref_conv2d(x, w1, NULL, r1, 1, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1, 12, 12);
    for (int i = 0; i < 32 * 144; i++) r1[i] = r1[i] > 0 ? r1[i] : 0;
    ref_conv2d(r1, w2, NULL, c2, 1, 32, 12, 12, 32, 1, 1, 1, 1, 0, 1, 12, 12);
    for (int i = 0; i < 32 * 144; i++) {
        float v = c2[i] + r1[i];
        c2[i] = v > 0 ? v : 0;
    }
    for (int c = 0; c < 32; c++)
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 6; j++) {
                float v = -INFINITY;
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 2; b++) v = fmaxf(v, c2[c * 144 + (2 * i + a) * 12 + 2 * j + b]);
                mp[c * 36 + i * 6 + j] = v;
            }
    ref_conv2d(mp, w3, NULL, want, 1, 32, 6, 6, 16, 1, 1, 1, 1, 0, 1, 6, 6);
    const char *names[4] = {"x", "w1", "w2", "w3"};
    float *data[4] = {x, w1, w2, w3};
    const int64_t *dims[4] = {TB_DIMS(1, 16, 12, 12), TB_DIMS(32, 16, 3, 3), TB_DIMS(32, 32, 1, 1),
                              TB_DIMS(16, 32, 1, 1)};
    int ranks[4] = {4, 4, 4, 4};
    for (int fuse = 0; fuse < 2; fuse++) {
        EXPECT_PLAN(m, p, 4, names, data, dims, ranks, fuse, want, 16 * 36, "the layouts");
    }
    free(x), free(w1), free(w2), free(w3), free(r1), free(c2), free(mp), free(want);
    tb_done(m, p);
}

/* Channels concatenated as the Convs left them (SqueezeNet's Fire,
 * DenseNet's feature list): two Convs' channels-last outputs and a plain
 * graph input into a oneDNN Concat, whose output goes channels-last into a
 * BatchNormalization with its Relu fused (DenseNet's norm and relu), then
 * a 1x1 Conv. Before, the Concat was portable (every Conv reordered its
 * output back to plain) and so was everything after it until the Conv.
 * Against the reference loops, fused and not, with no reference
 * primitive; fused, the groups are named. */
static void test_plan_concat_layouts(void) {
    bool was_portable = mp_run_portable_only;
    mp_run_portable_only = false;
    mp_model *m = tb_new(14);
    tb_input(m, "x", F, 4, TB_DIMS(1, 8, 16, 16));
    tb_input(m, "w1", F, 4, TB_DIMS(12, 8, 3, 3));
    tb_input(m, "w2", F, 4, TB_DIMS(4, 8, 1, 1));
    tb_input(m, "w3", F, 4, TB_DIMS(6, 24, 1, 1));
    static double sc[24], sh[24], mu[24], var[24];
    for (int i = 0; i < 24; i++)
        sc[i] = 0.5 + 0.05 * i, sh[i] = 0.1 * (i % 5) - 0.2, mu[i] = 0.03 * i - 0.3, var[i] = 0.5 + 0.1 * (i % 7);
    tb_const_f(m, "sc", F, 1, TB_DIMS(24), sc);
    tb_const_f(m, "sh", F, 1, TB_DIMS(24), sh);
    tb_const_f(m, "mu", F, 1, TB_DIMS(24), mu);
    tb_const_f(m, "var", F, 1, TB_DIMS(24), var);
    int c1 = tb_node(m, "Conv", "x,w1", "c1");
    tb_attr_ints(m, c1, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_node(m, "Conv", "x,w2", "c2");
    tb_attr_i(m, tb_node(m, "Concat", "c1,c2,x", "cat"), "axis", 1);
    tb_node(m, "BatchNormalization", "cat,sc,sh,mu,var", "bn");
    tb_node(m, "Relu", "bn", "r");
    tb_node(m, "Conv", "r,w3", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    float *x = rnd(8 * 256), *w1 = rnd(12 * 8 * 9), *w2 = rnd(4 * 8), *w3 = rnd(6 * 24);
    float *cat = zeros(24 * 256), *want = zeros(6 * 256);
    ref_conv2d(x, w1, NULL, cat, 1, 8, 16, 16, 12, 3, 3, 1, 1, 1, 1, 16, 16);
    ref_conv2d(x, w2, NULL, cat + 12 * 256, 1, 8, 16, 16, 4, 1, 1, 1, 1, 0, 1, 16, 16);
    memcpy(cat + 16 * 256, x, sizeof(float) * 8 * 256);
    for (int c = 0; c < 24; c++)
        for (int i = 0; i < 256; i++) {
            float v = (float)((cat[c * 256 + i] - mu[c]) / sqrt(var[c] + 1e-5) * sc[c] + sh[c]);
            cat[c * 256 + i] = v > 0 ? v : 0;
        }
    ref_conv2d(cat, w3, NULL, want, 1, 24, 16, 16, 6, 1, 1, 1, 1, 0, 1, 16, 16);
    const char *names[4] = {"x", "w1", "w2", "w3"};
    float *data[4] = {x, w1, w2, w3};
    const int64_t *dims[4] = {TB_DIMS(1, 8, 16, 16), TB_DIMS(12, 8, 3, 3), TB_DIMS(4, 8, 1, 1), TB_DIMS(6, 24, 1, 1)};
    int ranks[4] = {4, 4, 4, 4};
    T_CHECK(!mp_dnnl_available() || mp_dnnl_kernel(m->graph, tb_nodep(m, 2)) != NULL);
    for (int fuse = 0; fuse < 2; fuse++) {
        int refs = mp_dnnl_reference_primitives();
        EXPECT_PLAN(m, p, 4, names, data, dims, ranks, fuse, want, 6 * 256, "concat");
        if (mp_dnnl_reference_primitives() != refs)
            mp_t_fail(__FILE__, __LINE__, "fuse %d: %d reference primitives", fuse, mp_dnnl_reference_primitives() - refs);
        mp_exec *pl = measure_plan(p, fuse, 1);
        if (!pl) continue;
        set_inputs(pl, 4, names, data, dims, ranks);
        T_OK(mp_profile_run(pl, p));
        int bnrelu = 0;
        for (int i = 0; i < p->n_groups; i++)
            if (strcmp(p->groups[i].name, "BatchNormalization+Relu") == 0) bnrelu++;
        T_EQ(bnrelu, mp_dnnl_available() ? fuse : bnrelu);
        mp_exec_free(pl);
    }
    free(x), free(w1), free(w2), free(w3), free(cat), free(want);
    tb_done(m, p);
    /* DenseNet-121's widest Concat reads 24 values (its third block's
     * feature list): oneDNN's too (it took at most 16 arguments) */
    m = tb_new(14);
    char ins[24 * 4 + 1] = "", nm[8];
    for (int i = 0; i < 24; i++) {
        snprintf(nm, sizeof nm, "x%d", i);
        tb_input(m, nm, F, 4, TB_DIMS(1, 2, 3, 3));
        snprintf(ins + strlen(ins), sizeof ins - strlen(ins), "%s%s", i ? "," : "", nm);
    }
    int ct = tb_node(m, "Concat", ins, "y");
    tb_attr_i(m, ct, "axis", 1);
    tb_output(m, "y");
    p = tb_prof(m);
    if (mp_dnnl_available()) T_CHECK(mp_dnnl_kernel(m->graph, tb_nodep(m, ct)) != NULL);
    {
        static char nms[24][8];
        const char *names24[24];
        float *data24[24], want24[24 * 18];
        const int64_t *dims24[24];
        int ranks24[24];
        for (int i = 0; i < 24; i++) {
            snprintf(nms[i], sizeof nms[i], "x%d", i);
            names24[i] = nms[i];
            data24[i] = rnd(18);
            memcpy(want24 + i * 18, data24[i], sizeof(float) * 18);
            static const int64_t d4[4] = {1, 2, 3, 3};
            dims24[i] = d4;
            ranks24[i] = 4;
        }
        for (int fuse = 0; fuse < 2; fuse++) EXPECT_PLAN(m, p, 24, names24, data24, dims24, ranks24, fuse, want24, 24 * 18, "24 inputs");
        for (int i = 0; i < 24; i++) free(data24[i]);
    }
    tb_done(m, p);
    mp_run_portable_only = was_portable;
}

/* A residual that is plain (a graph input here; in the dynamo exporter's
 * timm ResNet-18 the last block's, whose sum a portable ReduceMean reads)
 * added to a Conv whose output must be plain (a graph output): the Conv
 * computes channels-last with the residual reordered to channels-last
 * first, then the result is reordered out. Before, the Conv was asked for
 * plain output beside a channels-last input and oneDNN chose its reference
 * code (ResNet-18: 376 ms a pass instead of 34). Both operand orders of
 * the Add; no reference primitive made; against the reference loops,
 * fused and not. */
static void test_plan_conv_plain_residual(void) {
    bool was_portable = mp_run_portable_only;
    mp_run_portable_only = false;
    for (int order = 0; order < 2; order++) {
        mp_model *m = tb_new(14);
        tb_input(m, "x", F, 4, TB_DIMS(1, 16, 10, 10));
        tb_input(m, "r", F, 4, TB_DIMS(1, 32, 10, 10));
        tb_input(m, "w", F, 4, TB_DIMS(32, 16, 3, 3));
        tb_input(m, "b", F, 1, TB_DIMS(32));
        int c = tb_node(m, "Conv", "x,w,b", "c");
        tb_attr_ints(m, c, "pads", 4, TB_DIMS(1, 1, 1, 1));
        tb_node(m, "Add", order ? "r,c" : "c,r", "s");
        tb_node(m, "Relu", "s", "y");
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        float *x = rnd(16 * 100), *r = rnd(32 * 100), *w = rnd(32 * 16 * 9), *bv = rnd(32), *want = zeros(32 * 100);
        ref_conv2d(x, w, bv, want, 1, 16, 10, 10, 32, 3, 3, 1, 1, 1, 1, 10, 10);
        for (int i = 0; i < 32 * 100; i++) want[i] = fmaxf(want[i] + r[i], 0.0f);
        const char *names[4] = {"x", "r", "w", "b"};
        float *data[4] = {x, r, w, bv};
        const int64_t *dims[4] = {TB_DIMS(1, 16, 10, 10), TB_DIMS(1, 32, 10, 10), TB_DIMS(32, 16, 3, 3), TB_DIMS(32)};
        int ranks[4] = {4, 4, 4, 1};
        for (int fuse = 0; fuse < 2; fuse++) {
            int refs = mp_dnnl_reference_primitives();
            char tag[32];
            snprintf(tag, sizeof tag, "order %d", order);
            EXPECT_PLAN(m, p, 4, names, data, dims, ranks, fuse, want, 32 * 100, tag);
            if (mp_dnnl_reference_primitives() != refs)
                mp_t_fail(__FILE__, __LINE__, "order %d fuse %d: %d reference primitives", order, fuse,
                          mp_dnnl_reference_primitives() - refs);
            mp_exec *pl = measure_plan(p, fuse, 1);
            if (!pl) continue;
            set_inputs(pl, 4, names, data, dims, ranks);
            T_OK(mp_profile_run(pl, p));
            int groups = 0;
            for (int i = 0; i < p->n_groups; i++)
                if (strcmp(p->groups[i].name, "Conv+Add+Relu") == 0) groups++;
            T_EQ(groups, fuse);
            mp_exec_free(pl);
        }
        free(x), free(r), free(w), free(bv), free(want);
        tb_done(m, p);
    }
    mp_run_portable_only = was_portable;
}

/* A residual added to a Conv is a sum post-op (oneDNN's brgemm 1x1
 * convolution takes that, not a full-size binary add): the residual is
 * put in the output first, or the output takes the residual's bytes when
 * nothing reads them after (mp_kshare). Three forms, 3x3 convolutions,
 * against the reference loops, fused and not:
 *   0  a = Relu(Conv(x)); y = Relu(Conv3x3(a) + a): the residual is the
 *      Conv's own input, so its bytes are not taken (the Conv would
 *      overwrite what it reads)
 *   1  a = Relu(Conv(x)); b = Relu(Conv(x)); y = Relu(Conv3x3(b) + a):
 *      a is read last here, the output takes its bytes
 *   2  as 1, and a is also a graph output: copied, not taken
 * and z = Conv(y) the graph output, so that everything is channels-last. */
static void test_plan_conv_residual_sum(void) {
    enum { C = 16, H = 20, W = 20 }; /* 6400 elements: oneDNN takes the Add (4096 or more) */
    bool was_portable = mp_run_portable_only;
    mp_run_portable_only = false;
    for (int form = 0; form < 3; form++) {
        mp_model *m = tb_new(14);
        tb_input(m, "x", F, 4, TB_DIMS(1, C, H, W));
        tb_input(m, "w1", F, 4, TB_DIMS(C, C, 1, 1));
        tb_input(m, "w2", F, 4, TB_DIMS(C, C, 1, 1));
        tb_input(m, "w3", F, 4, TB_DIMS(C, C, 3, 3));
        tb_node(m, "Conv", "x,w1", "c1");
        tb_node(m, "Relu", "c1", "a");
        const char *bsrc = "a";
        if (form > 0) {
            tb_node(m, "Conv", "x,w2", "c2");
            tb_node(m, "Relu", "c2", "b");
            bsrc = "b";
        }
        char ins[16];
        snprintf(ins, sizeof ins, "%s,w3", bsrc);
        int c3 = tb_node(m, "Conv", ins, "c3");
        tb_attr_ints(m, c3, "pads", 4, TB_DIMS(1, 1, 1, 1));
        tb_node(m, "Add", "c3,a", "s");
        tb_node(m, "Relu", "s", "y");
        tb_node(m, "Conv", "y,w1", "z"); /* a Conv reads y: all channels-last */
        tb_output(m, "z");
        if (form == 2) tb_output(m, "a");
        mp_profile *p = tb_prof(m);
        float *x = rnd(C * H * W), *w1 = rnd(C * C), *w2 = rnd(C * C), *w3 = rnd(C * C * 9);
        float *a = zeros(C * H * W), *bb = zeros(C * H * W), *want = zeros(C * H * W);
        ref_conv2d(x, w1, NULL, a, 1, C, H, W, C, 1, 1, 1, 1, 0, 1, H, W);
        ref_conv2d(x, w2, NULL, bb, 1, C, H, W, C, 1, 1, 1, 1, 0, 1, H, W);
        for (int i = 0; i < C * H * W; i++) a[i] = fmaxf(a[i], 0), bb[i] = fmaxf(bb[i], 0);
        ref_conv2d(form > 0 ? bb : a, w3, NULL, want, 1, C, H, W, C, 3, 3, 1, 1, 1, 1, H, W);
        for (int i = 0; i < C * H * W; i++) bb[i] = fmaxf(want[i] + a[i], 0);
        ref_conv2d(bb, w1, NULL, want, 1, C, H, W, C, 1, 1, 1, 1, 0, 1, H, W);
        const char *names[4] = {"x", "w1", "w2", "w3"};
        float *data[4] = {x, w1, w2, w3};
        const int64_t *dims[4] = {TB_DIMS(1, C, H, W), TB_DIMS(C, C, 1, 1), TB_DIMS(C, C, 1, 1), TB_DIMS(C, C, 3, 3)};
        int ranks[4] = {4, 4, 4, 4};
        for (int fuse = 0; fuse < 2; fuse++) {
            mp_exec *pl = measure_plan(p, fuse, 1);
            if (!pl) continue;
            /* form 1, fused: the one step that may take its residual's bytes does */
            if (pl->n_shared != (form == 1 && fuse ? 1 : 0))
                mp_t_fail(__FILE__, __LINE__, "form %d fuse %d: %d outputs took an input's bytes", form, fuse,
                          pl->n_shared);
            set_inputs(pl, 4, names, data, dims, ranks);
            for (int rep = 0; rep < 2; rep++) {
                T_OK(mp_exec_run(pl));
                int64_t got_n;
                const float *out = plan_out(pl, 0, &got_n);
                double e = out && got_n == C * H * W ? rel_l2(out, want, got_n) : 1;
                if (!(e <= 1e-5)) mp_t_fail(__FILE__, __LINE__, "form %d fuse %d: relative L2 error %g", form, fuse, e);
                if (form == 2) {
                    out = plan_out(pl, 1, &got_n);
                    e = out && got_n == C * H * W ? rel_l2(out, a, got_n) : 1;
                    if (!(e <= 1e-5)) mp_t_fail(__FILE__, __LINE__, "form 2 fuse %d: a: relative L2 error %g", fuse, e);
                }
            }
            mp_exec_free(pl);
        }
        free(x), free(w1), free(w2), free(w3), free(a), free(bb), free(want);
        tb_done(m, p);
    }
    mp_run_portable_only = was_portable;
}

/* ReduceMean or ReduceMax over exactly the spatial axes (the dynamo
 * exporter's global pooling, `x.mean((2, 3))`) runs as oneDNN's global
 * pooling and reads a Conv's channels-last output as it is: axes as an
 * attribute (opset 13, negative) or an input (opset 18), kept or not;
 * against the reference loops, fused and not, no reference primitive. */
static void test_plan_reduce_global(void) {
    enum { N = 2, C = 8, H = 5, W = 6 };
    bool was_portable = mp_run_portable_only;
    mp_run_portable_only = false;
    for (int form = 0; form < 3; form++) {
        bool keep = form != 1, mean = form != 2;
        mp_model *m = tb_new(form == 1 ? 18 : 13);
        tb_input(m, "x", F, 4, TB_DIMS(N, C, H, W));
        tb_input(m, "w", F, 4, TB_DIMS(C, C, 1, 1));
        tb_node(m, "Conv", "x,w", "c");
        tb_node(m, "Relu", "c", "r");
        int rn;
        if (form == 1) {
            tb_const_i(m, "axes", MP_DT_INT64, 1, TB_DIMS(2), (const int64_t[]){2, 3});
            rn = tb_node(m, "ReduceMean", "r,axes", "y");
        } else {
            rn = tb_node(m, mean ? "ReduceMean" : "ReduceMax", "r", "y");
            tb_attr_ints(m, rn, "axes", 2, TB_DIMS(-1, -2));
        }
        tb_attr_i(m, rn, "keepdims", keep);
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        const mp_kernel *k = mp_dnnl_kernel(m->graph, tb_nodep(m, rn));
        if (!k || strcmp(k->name, "onednn:pool") != 0)
            mp_t_fail(__FILE__, __LINE__, "form %d: kernel %s", form, k ? k->name : "none");
        float *x = rnd(N * C * H * W), *w = rnd(C * C), *r = zeros(N * C * H * W), *want = zeros(N * C);
        ref_conv2d(x, w, NULL, r, N, C, H, W, C, 1, 1, 1, 1, 0, 1, H, W);
        for (int i = 0; i < N * C; i++) {
            double acc = mean ? 0 : -INFINITY;
            for (int j = 0; j < H * W; j++) {
                double v = fmax(r[i * H * W + j], 0.0);
                acc = mean ? acc + v : fmax(acc, v);
            }
            want[i] = (float)(mean ? acc / (H * W) : acc);
        }
        const char *names[2] = {"x", "w"};
        float *data[2] = {x, w};
        const int64_t *dims[2] = {TB_DIMS(N, C, H, W), TB_DIMS(C, C, 1, 1)};
        int ranks[2] = {4, 4};
        for (int fuse = 0; fuse < 2; fuse++) {
            int refs = mp_dnnl_reference_primitives();
            char tag[32];
            snprintf(tag, sizeof tag, "form %d", form);
            EXPECT_PLAN(m, p, 2, names, data, dims, ranks, fuse, want, N * C, tag);
            T_EQ(mp_dnnl_reference_primitives(), refs);
        }
        free(x), free(w), free(r), free(want);
        tb_done(m, p);
    }
    mp_run_portable_only = was_portable;
}

/* Transpose of fp32 tensors of 16384 elements or more as oneDNN's
 * reorder (split over the threads), smaller ones portable; perms of the
 * attention heads ([0,2,1,3], [0,2,3,1]), rank 3 and 5, and the default
 * (reversed), against the index arithmetic. */
static void test_plan_transpose(void) {
    static const struct {
        int r;
        int64_t dims[5];
        int np;
        int64_t perm[5];
    } cases[] = {
        {4, {1, 128, 12, 64}, 4, {0, 2, 1, 3}},
        {4, {2, 64, 8, 32}, 4, {0, 2, 3, 1}},
        {3, {40, 30, 20}, 0, {0}},
        {5, {2, 3, 16, 20, 18}, 5, {4, 0, 3, 1, 2}},
        {4, {2, 3, 4, 5}, 4, {3, 2, 0, 1}}, /* small: portable */
    };
    bool was_portable = mp_run_portable_only;
    mp_run_portable_only = false;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int r = cases[c].r;
        const int64_t *xd = cases[c].dims;
        int64_t perm[5], yd[5], xs[5], n = 1;
        for (int i = 0; i < r; i++) perm[i] = cases[c].np ? cases[c].perm[i] : r - 1 - i;
        for (int i = r - 1; i >= 0; i--) {
            xs[i] = n;
            n *= xd[i];
        }
        for (int i = 0; i < r; i++) yd[i] = xd[perm[i]];
        mp_model *m = tb_new(13);
        tb_input(m, "x", F, r, xd);
        int t = tb_node(m, "Transpose", "x", "y");
        if (cases[c].np) tb_attr_ints(m, t, "perm", r, perm);
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        const mp_kernel *k = mp_dnnl_kernel(m->graph, tb_nodep(m, t));
        bool big = n >= 16384;
        if (big != (k && strcmp(k->name, "onednn:reorder") == 0))
            mp_t_fail(__FILE__, __LINE__, "case %zu: kernel %s", c, k ? k->name : "portable");
        float *x = rnd(n), *want = zeros(n);
        int64_t idx[5] = {0};
        for (int64_t o = 0; o < n; o++) {
            int64_t off = 0;
            for (int i = 0; i < r; i++) off += idx[i] * xs[perm[i]];
            want[o] = x[off];
            for (int i = r - 1; i >= 0 && ++idx[i] == yd[i]; i--) idx[i] = 0;
        }
        const char *names[1] = {"x"};
        float *data[1] = {x};
        const int64_t *dims[1] = {xd};
        int ranks[1] = {r};
        int64_t got_n = 0;
        float *y = plan_run(m, p, 1, names, data, dims, ranks, 1, &got_n);
        T_EQ(got_n, n);
        if (y && got_n == n && memcmp(y, want, sizeof(float) * (size_t)n) != 0)
            mp_t_fail(__FILE__, __LINE__, "case %zu: the output differs", c);
        free(y), free(x), free(want);
        tb_done(m, p);
    }
    mp_run_portable_only = was_portable;
}

/* The OpenMP spin default: set only when the user chose nothing and
 * libgomp is not loaded yet (it reads the variable once, when it loads). */
static void test_spin_default(void) {
    T_EQ_STR(mp_dnnl_spin_choice(NULL, NULL, false), "20000");
    T_CHECK(mp_dnnl_spin_choice("300000", NULL, false) == NULL);
    T_CHECK(mp_dnnl_spin_choice("", NULL, false) == NULL);
    T_CHECK(mp_dnnl_spin_choice(NULL, "passive", false) == NULL);
    T_CHECK(mp_dnnl_spin_choice(NULL, "active", false) == NULL);
    T_CHECK(mp_dnnl_spin_choice(NULL, NULL, true) == NULL);
}

/* The run counts the kernels on oneDNN and on the portable code, and the
 * text says so: a lone Sin (no oneDNN counterpart) is portable in fp32 and
 * fp16 alike; an fp16 Conv and Relu run on oneDNN (dnnl_half.c). */
static void test_kernels_counted(void) {
    for (int k = 0; k < 3; k++) {
        int dt = k ? MP_DT_FLOAT16 : F;
        mp_model *m = tb_new(14);
        tb_input(m, "x", dt, 4, TB_DIMS(1, 8, 16, 16));
        if (k == 2) {
            tb_weight(m, "W", dt, 4, TB_DIMS(8, 8, 3, 3));
            tb_node(m, "Conv", "x,W", "c");
            tb_node(m, "Relu", "c", "y");
        } else {
            tb_node(m, "Sin", "x", "y");
        }
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        mp_exec *pl = p ? measure_plan(p, 1, 2) : NULL;
        static uint8_t zero[8 * 16 * 16 * 4];
        if (pl) T_OK(mp_exec_set_input(pl, "x", dt, 4, TB_DIMS(1, 8, 16, 16), zero, (size_t)8 * 16 * 16 * (k ? 2 : 4)));
        if (pl) T_OK(mp_profile_run(pl, p));
        if (pl && mp_dnnl_available()) {
            T_EQ(p->run.portable_steps, k == 2 ? 0 : p->run.steps);
            char *txt = NULL;
            mp_report_options ro;
            T_OK(mp_report_options_init(&ro, sizeof ro));
            T_OK(mp_report_string(p, &ro, &txt));
            T_CHECK(txt && strstr(txt, k == 2 ? "kernels:                1 on oneDNN, 0 portable"
                                              : "kernels:                0 on oneDNN, 1 portable") != NULL);
            free(txt);
        }
        mp_exec_free(pl);
        tb_done(m, p);
    }
}

/* fp16 or bf16 values from fp32 ones, and back (round to nearest even). */
static uint16_t *to16(int dt, const float *f, int64_t n) {
    uint16_t *h = malloc(sizeof *h * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; h && i < n; i++) h[i] = dt == MP_DT_FLOAT16 ? mp_float_to_half(f[i]) : mp_float_to_bf16(f[i]);
    return h;
}

/* Measured run of p with 16-bit inputs (names[i], data[i] of dims[i]), on
 * the portable kernels or not: output 0 as fp32 (malloc'd, *n values), and
 * the run's kernel counts in p->run. */
static float *half_run(mp_profile *p, int dt, bool portable, int n_in, const char **names, uint16_t **data,
                       const int64_t *const *dims, const int *ranks, int64_t *n) {
    bool was = mp_run_portable_only;
    mp_run_portable_only = portable;
    mp_exec *pl = measure_plan(p, 1, 2);
    float *r = NULL;
    *n = 0;
    for (int i = 0; pl && i < n_in; i++)
        T_OK(mp_exec_set_input(pl, names[i], dt, ranks[i], dims[i], data[i],
                               sizeof(uint16_t) * (size_t)mp_dims_product(dims[i], ranks[i])));
    if (pl) T_OK(mp_profile_run(pl, p));
    const char *name;
    int odt = 0, rank;
    const int64_t *od;
    const void *out = NULL;
    if (pl) T_OK(mp_exec_output(pl, 0, &name, &odt, &rank, &od, &out));
    if (out && odt == dt) {
        *n = mp_dims_product(od, rank);
        r = malloc(sizeof *r * (size_t)(*n > 0 ? *n : 1));
        const uint16_t *h = out;
        for (int64_t i = 0; r && i < *n; i++) r[i] = dt == MP_DT_FLOAT16 ? mp_half_to_float(h[i]) : mp_bf16_to_float(h[i]);
    } else if (pl) {
        mp_t_fail(__FILE__, __LINE__, "output 0 is %s, %s expected", mp_dtype_name(odt), mp_dtype_name(dt));
    }
    mp_exec_free(pl);
    mp_run_portable_only = was;
    return r;
}

/* Nodes whose float activations are fp16 or bf16 run on the fp32 oneDNN
 * kernels between conversions, as ONNX Runtime's CPU provider runs them
 * (dnnl_half.c): a Conv with bias, Relu and Clip (fused), a MatMul with a
 * residual of the same type added (fused: the residual is a 16-bit input
 * the group gains); the Clip's 16-bit bounds are read at plan time. Each
 * is one oneDNN kernel, and the outputs are the portable kernels' within
 * the type's rounding (relative L2 3e-3 for fp16, 2e-2 for bf16). */
static void test_half_on_onednn(void) {
    for (int c = 0; c < 4; c++) {
        int dt = c % 2 ? MP_DT_BFLOAT16 : MP_DT_FLOAT16;
        bool conv = c < 2;
        mp_model *m = tb_new(14);
        double wv[32 * 24], bv[8];
        for (int i = 0; i < 32 * 24; i++) wv[i] = frand() * 0.3;
        for (int i = 0; i < 8; i++) bv[i] = frand();
        const char *names[2] = {"x", "a"};
        int64_t xd[4] = {1, 8, 32, 32}, md[3] = {2, 16, 32}, ad[3] = {2, 16, 24};
        const int64_t *dims[2] = {conv ? xd : md, ad};
        int ranks[2] = {conv ? 4 : 3, 3};
        int n_in = conv ? 1 : 2;
        if (conv) {
            tb_input(m, "x", dt, 4, xd);
            tb_const_f(m, "W", dt, 4, TB_DIMS(8, 8, 3, 3), wv);
            tb_const_f(m, "B", dt, 1, TB_DIMS(8), bv);
            int cn = tb_node(m, "Conv", "x,W,B", "c");
            tb_attr_ints(m, cn, "pads", 4, (const int64_t[]){1, 1, 1, 1});
            tb_node(m, "Relu", "c", "r");
            tb_const_f(m, "lo", dt, 0, NULL, (const double[]){0.25});
            tb_const_f(m, "hi", dt, 0, NULL, (const double[]){1.5});
            tb_node(m, "Clip", "r,lo,hi", "y");
        } else {
            tb_input(m, "x", dt, 3, md);
            tb_input(m, "a", dt, 3, ad);
            tb_const_f(m, "W", dt, 2, TB_DIMS(32, 24), wv);
            tb_node(m, "MatMul", "x,W", "mm");
            tb_node(m, "Add", "mm,a", "y");
        }
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        uint16_t *data[2] = {NULL, NULL};
        for (int i = 0; i < n_in; i++) {
            int64_t n = mp_dims_product(dims[i], ranks[i]);
            float *f = rnd(n);
            data[i] = to16(dt, f, n);
            free(f);
        }
        int64_t nw = 0, ng = 0;
        float *want = p ? half_run(p, dt, true, n_in, names, data, dims, ranks, &nw) : NULL;
        float *got = p ? half_run(p, dt, false, n_in, names, data, dims, ranks, &ng) : NULL;
        if (p && mp_dnnl_available() && (p->run.portable_steps || p->run.steps != 1))
            mp_t_fail(__FILE__, __LINE__, "case %d: %d kernels, %d portable; one fused group expected", c,
                      p->run.steps, p->run.portable_steps);
        T_EQ(ng, nw);
        double tol = dt == MP_DT_FLOAT16 ? 3e-3 : 2e-2;
        if (want && got && ng == nw && ng > 0 && !(rel_l2(got, want, ng) <= tol))
            mp_t_fail(__FILE__, __LINE__, "case %d: relative L2 error %g", c, rel_l2(got, want, ng));
        free(want), free(got), free(data[0]), free(data[1]);
        tb_done(m, p);
    }
}

MP_TESTS(dnnl){
    {"kernels_counted", test_kernels_counted},
    {"half_on_onednn", test_half_on_onednn},
    {"spin_default", test_spin_default},
    {"conv_hand", test_conv_hand},
    {"conv_random", test_conv_random},
    {"conv_fused", test_conv_fused},
    {"conv_unfused", test_conv_unfused},
    {"conv_choice", test_conv_choice},
    {"convtranspose", test_convtranspose},
    {"convtranspose_grouped", test_convtranspose_grouped},
    {"matmul_broadcast", test_matmul_broadcast},
    {"matmul_bias_act", test_matmul_bias_act},
    {"gemm", test_gemm},
    {"gemm_runtime_c_matvec", test_gemm_runtime_c_matvec},
    {"gemm_choice", test_gemm_choice},
    {"matmul_padded_weights", test_matmul_padded_weights},
    {"blas_coretype", test_blas_coretype},
    {"pools", test_pools},
    {"softmax", test_softmax},
    {"layernorm", test_layernorm},
    {"batchnorm", test_batchnorm},
    {"eltwise", test_eltwise},
    {"binary", test_binary},
    {"not_served", test_not_served},
    {"plan_binary_chain", test_plan_binary_chain},
    {"plan_gelu_tanh", test_plan_gelu_tanh},
    {"plan_batched_bias", test_plan_batched_bias},
    {"gemm_dynamic_rows", test_gemm_dynamic_rows},
    {"conv_dynamic_batch", test_conv_dynamic_batch},
    {"convt_dynamic_batch", test_convt_dynamic_batch},
    {"fold_conv_chain", test_fold_conv_chain},
    {"plan_matmul_chain", test_plan_matmul_chain},
    {"plan_gelu_erf", test_plan_gelu_erf},
    {"plan_layernorm_pattern", test_plan_layernorm_pattern},
    {"extreme_activations", test_extreme_activations},
    {"extreme_gelu_softmax", test_extreme_gelu_softmax},
    {"plan_matmul_gelu", test_plan_matmul_gelu},
    {"plan_attention", test_plan_attention},
    {"attention_exports", test_attention_exports},
    {"plan_conv_layouts", test_plan_conv_layouts},
    {"plan_conv_plain_residual", test_plan_conv_plain_residual},
    {"plan_concat_layouts", test_plan_concat_layouts},
    {"plan_swish", test_plan_swish},
    {"plan_se_block", test_plan_se_block},
    {"plan_einsum_bmm", test_plan_einsum_bmm},
    {"plan_conv_residual_sum", test_plan_conv_residual_sum},
    {"plan_reduce_global", test_plan_reduce_global},
    {"plan_transpose", test_plan_transpose},
};
MP_TESTS_END(dnnl)
