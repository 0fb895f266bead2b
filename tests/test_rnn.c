/* The recurrent layers' kernels (LSTM, GRU, RNN): oneDNN's RNN primitives
 * (src/run/dnnl_rnn.c) and the portable kernel (src/ops/linalg.c), each
 * run through a plan on random data against the ONNX operator's equations
 * written out in double below, over the attributes the two paths treat
 * differently: directions (a bidirectional layer on 2 threads runs its
 * directions side by side), layout 1, initial states, peepholes, biases,
 * linear_before_reset, sequence_lens (constant and given at run time),
 * clip and other activations (portable only), weights constant at plan
 * time (packed once) or given as inputs (converted each run). A tiny RNN
 * is also checked against numbers worked out by hand. */
#include <math.h>
#include <stdlib.h>

#include "modelprof.h"
#include "run/dnnl.h"
#include "run/run.h"
#include "tbuild.h"
#include "test.h"

#define F MP_DT_FLOAT

/* ---- the ONNX equations, in double ---- */

static double act(const char *f, double x) {
    if (!strcmp(f, "Sigmoid")) return 1 / (1 + exp(-x));
    if (!strcmp(f, "Tanh")) return tanh(x);
    if (!strcmp(f, "Relu")) return x > 0 ? x : 0;
    if (!strcmp(f, "HardSigmoid")) return fmax(0, fmin(1, 0.2 * x + 0.5)); /* default alpha, beta */
    if (!strcmp(f, "Softsign")) return x / (1 + fabs(x));
    return NAN;
}

typedef struct rcase {
    const char *op;           /* LSTM, GRU, RNN */
    const char *dir;          /* forward, reverse, bidirectional */
    int layout, lbr;
    int64_t S, N, I, H;
    bool bias, h0, c0, peep;
    const int64_t *lens;      /* sequence_lens or NULL */
    bool lens_const;          /* an initializer (else a graph input) */
    bool w_const;             /* W, R, B, P initializers (else inputs) */
    double clip;
    const char *acts[6];      /* NULL: defaults */
    bool want_onednn;         /* the planner should pick oneDNN */
} rcase;

typedef struct rdata {
    int gates, D;
    double *x, *w, *r, *b, *h0, *c0, *p;
    double *y, *yh, *yc;      /* reference outputs */
} rdata;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53 * 2 - 1;
}
static double *rvec(int64_t n, double scale) {
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = urand() * scale;
    return v;
}

/* ONNX LSTM (gates i,o,f,c), GRU (z,r,h), RNN, one direction at a time */
static void reference(const rcase *c, rdata *d) {
    int G = d->gates, D = d->D;
    int64_t S = c->S, N = c->N, I = c->I, H = c->H, GH = G * H;
    int nf = G == 4 ? 3 : G == 3 ? 2 : 1;
    static const char *const defs[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    d->y = calloc((size_t)(S * D * N * H), sizeof(double));
    d->yh = calloc((size_t)(D * N * H), sizeof(double));
    d->yc = calloc((size_t)(D * N * H), sizeof(double));
    double *h = malloc(sizeof(double) * (size_t)H), *cs = malloc(sizeof(double) * (size_t)H);
    double *g = malloc(sizeof(double) * (size_t)(2 * GH)), *hn = malloc(sizeof(double) * (size_t)H);
#define X_(t, b, i) d->x[(c->layout ? (b) * S + (t) : (t) * N + (b)) * I + (i)]
#define Y_(t, dd, b) (c->layout ? (((b) * S + (t)) * D + (dd)) * H : (((t) * D + (dd)) * N + (b)) * H)
#define HS_(dd, b) (c->layout ? ((b) * D + (dd)) * H : ((dd) * N + (b)) * H)
#define CL_(v) (c->clip > 0 ? fmax(-c->clip, fmin(c->clip, (v))) : (v))
    for (int dd = 0; dd < D; dd++) {
        const char *f[3];
        for (int k = 0; k < nf; k++) f[k] = c->acts[0] ? c->acts[dd * nf + k] : defs[G == 1 ? 0 : G == 3 ? 1 : 2][k];
        bool rev = !strcmp(c->dir, "reverse") || dd == 1;
        const double *W = d->w + dd * GH * I, *R = d->r + dd * GH * H;
        const double *Wb = d->b ? d->b + dd * 2 * GH : NULL, *Rb = Wb ? Wb + GH : NULL;
        const double *P = d->p ? d->p + dd * 3 * H : NULL;
        for (int64_t b = 0; b < N; b++) {
            int64_t len = c->lens ? c->lens[b] : S;
            for (int64_t j = 0; j < H; j++) {
                h[j] = d->h0 ? d->h0[HS_(dd, b) + j] : 0;
                cs[j] = d->c0 ? d->c0[HS_(dd, b) + j] : 0;
            }
            for (int64_t s = 0; s < len; s++) {
                int64_t t = rev ? len - 1 - s : s;
                for (int64_t q = 0; q < GH; q++) {
                    double a = Wb ? Wb[q] : 0, e = Rb ? Rb[q] : 0;
                    for (int64_t i = 0; i < I; i++) a += X_(t, b, i) * W[q * I + i];
                    for (int64_t i = 0; i < H; i++) e += h[i] * R[q * H + i];
                    g[q] = a;
                    g[GH + q] = e;
                }
                for (int64_t j = 0; j < H; j++) {
                    if (G == 1) {
                        hn[j] = act(f[0], CL_(g[j] + g[GH + j]));
                    } else if (G == 3) {
                        double z = act(f[0], CL_(g[j] + g[GH + j]));
                        double r = act(f[0], CL_(g[H + j] + g[GH + H + j]));
                        double hh;
                        if (c->lbr) {
                            hh = g[2 * H + j] + r * g[GH + 2 * H + j];
                        } else { /* (r * h) R_h^T + Rb_h */
                            double e = Rb ? Rb[2 * H + j] : 0;
                            for (int64_t i = 0; i < H; i++) {
                                double ri = act(f[0], CL_(g[H + i] + g[GH + H + i]));
                                e += ri * h[i] * R[(2 * H + j) * H + i];
                            }
                            hh = g[2 * H + j] + e;
                        }
                        hh = act(f[1], CL_(hh));
                        hn[j] = (1 - z) * hh + z * h[j];
                    } else {
                        double pi = P ? P[j] : 0, po = P ? P[H + j] : 0, pf = P ? P[2 * H + j] : 0;
                        double gi = act(f[0], CL_(g[j] + g[GH + j] + pi * cs[j]));
                        double gf = act(f[0], CL_(g[2 * H + j] + g[GH + 2 * H + j] + pf * cs[j]));
                        double gc = act(f[1], CL_(g[3 * H + j] + g[GH + 3 * H + j]));
                        double cn = gf * cs[j] + gi * gc;
                        double go = act(f[0], CL_(g[H + j] + g[GH + H + j] + po * cn));
                        hn[j] = go * act(f[2], cn);
                        g[j] = cn;
                    }
                }
                for (int64_t j = 0; j < H; j++) {
                    if (G == 4) cs[j] = g[j];
                    h[j] = hn[j];
                    d->y[Y_(t, dd, b) + j] = h[j];
                }
            }
            for (int64_t j = 0; j < H; j++) {
                d->yh[HS_(dd, b) + j] = h[j];
                d->yc[HS_(dd, b) + j] = cs[j];
            }
        }
    }
#undef X_
#undef Y_
#undef HS_
#undef CL_
    free(h), free(cs), free(g), free(hn);
}

static double rel_err(const float *got, const double *want, int64_t n) {
    double e = 0, w = 0;
    for (int64_t i = 0; i < n; i++) {
        double q = (double)got[i] - want[i];
        e += q * q;
        w += want[i] * want[i];
    }
    return sqrt(e / (w > 0 ? w : 1));
}

static float *to_f32(const double *v, int64_t n) {
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
    return f;
}

/* an initializer holding v (constant at plan time), or a graph input */
static void tensor(mp_model *m, bool constant, const char *name, int rank, const int64_t *dims, const double *v) {
    if (constant) tb_const_f(m, name, F, rank, dims, v);
    else tb_input(m, name, F, rank, dims);
}

/* Build the node, run it on oneDNN (when served) and on the portable
 * kernel, compare both with the reference. */
static void run_case(const rcase *c) {
    int G = !strcmp(c->op, "LSTM") ? 4 : !strcmp(c->op, "GRU") ? 3 : 1;
    int D = !strcmp(c->dir, "bidirectional") ? 2 : 1;
    int64_t S = c->S, N = c->N, I = c->I, H = c->H, GH = G * H;
    /* the values rounded to fp32 first, so that both sides see the same */
    rdata d = {G, D, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    double ws = 1 / sqrt((double)H);
    d.x = rvec(S * N * I, 1);
    d.w = rvec(D * GH * I, ws);
    d.r = rvec(D * GH * H, ws);
    d.b = c->bias ? rvec(D * 2 * GH, ws) : NULL;
    d.h0 = c->h0 ? rvec(D * N * H, 1) : NULL;
    d.c0 = c->c0 ? rvec(D * N * H, 1) : NULL;
    d.p = c->peep ? rvec(D * 3 * H, 0.5) : NULL;
    double *all[7] = {d.x, d.w, d.r, d.b, d.h0, d.c0, d.p};
    int64_t cnt[7] = {S * N * I, D * GH * I, D * GH * H, D * 2 * GH, D * N * H, D * N * H, D * 3 * H};
    for (int i = 0; i < 7; i++)
        for (int64_t j = 0; all[i] && j < cnt[i]; j++) all[i][j] = (float)all[i][j];
    reference(c, &d);

    mp_model *m = tb_new(14);
    int64_t xd[3] = {c->layout ? N : S, c->layout ? S : N, I};
    int64_t sd[3] = {c->layout ? N : D, c->layout ? D : N, H};
    tb_input(m, "X", F, 3, xd);
    tensor(m, c->w_const, "W", 3, TB_DIMS(D, GH, I), d.w);
    tensor(m, c->w_const, "R", 3, TB_DIMS(D, GH, H), d.r);
    if (d.b) tensor(m, c->w_const, "B", 2, TB_DIMS(D, 2 * GH), d.b);
    if (c->lens) {
        if (c->lens_const) tb_const_i(m, "L", MP_DT_INT32, 1, TB_DIMS(N), c->lens);
        else tb_input(m, "L", MP_DT_INT32, 1, TB_DIMS(N));
    }
    if (d.h0) tb_input(m, "H0", F, 3, sd);
    if (d.c0) tb_input(m, "C0", F, 3, sd);
    if (d.p) tensor(m, c->w_const, "P", 2, TB_DIMS(D, 3 * H), d.p);
    char ins[64];
    snprintf(ins, sizeof ins, "X,W,R,%s,%s,%s%s%s", d.b ? "B" : "", c->lens ? "L" : "", d.h0 ? "H0" : "",
             G == 4 ? (d.c0 ? ",C0" : ",") : "", G == 4 ? (d.p ? ",P" : ",") : "");
    int node = tb_node(m, c->op, ins, G == 4 ? "Y,Yh,Yc" : "Y,Yh");
    tb_attr_i(m, node, "hidden_size", H);
    tb_attr_s(m, node, "direction", c->dir);
    if (c->layout) tb_attr_i(m, node, "layout", 1);
    if (c->lbr) tb_attr_i(m, node, "linear_before_reset", 1);
    if (c->clip > 0) tb_attr_f(m, node, "clip", c->clip);
    if (c->acts[0]) {
        int nf = G == 4 ? 3 : G == 3 ? 2 : 1;
        tb_attr_strings(m, node, "activations", nf * D, c->acts);
    }
    tb_output(m, "Y");
    tb_output(m, "Yh");
    if (G == 4) tb_output(m, "Yc");
    mp_profile *p = tb_prof(m);
    const mp_kernel *dk = mp_dnnl_kernel(m->graph, tb_nodep(m, node));
    T_CHECK((dk != NULL) == (c->want_onednn && mp_dnnl_available()));
    float *xf = to_f32(d.x, S * N * I), *h0f = d.h0 ? to_f32(d.h0, D * N * H) : NULL;
    float *c0f = d.c0 ? to_f32(d.c0, D * N * H) : NULL;
    float *wf = to_f32(d.w, D * GH * I), *rf = to_f32(d.r, D * GH * H);
    float *bf = d.b ? to_f32(d.b, D * 2 * GH) : NULL, *pf = d.p ? to_f32(d.p, D * 3 * H) : NULL;
    int32_t lens32[16];
    for (int64_t b = 0; c->lens && b < N; b++) lens32[b] = (int32_t)c->lens[b];
    /* oneDNN on 2 threads (a bidirectional layer: the directions side by
     * side) and on 1 (one bidirectional primitive), then portable */
    for (int mode = 0; mode < 3; mode++) {
        int portable = mode == 2;
        mp_run_portable_only = portable;
        mp_run_options o;
        mp_run_options_default(&o);
        o.threads = mode == 1 ? 1 : 2;
        mp_exec *pl = NULL;
        T_OK(mp_exec_create(p, &o, &pl));
        if (!pl) break;
        T_EQ(pl->n_steps, 1);
        T_EQ_STR(pl->steps[0].kern->name, !portable && dk ? "onednn:rnn" : "portable");
        T_OK(mp_exec_set_input(pl, "X", F, 3, xd, xf, sizeof(float) * (size_t)(S * N * I)));
        if (!c->w_const) {
            T_OK(mp_exec_set_input(pl, "W", F, 3, TB_DIMS(D, GH, I), wf, sizeof(float) * (size_t)(D * GH * I)));
            T_OK(mp_exec_set_input(pl, "R", F, 3, TB_DIMS(D, GH, H), rf, sizeof(float) * (size_t)(D * GH * H)));
            if (bf) T_OK(mp_exec_set_input(pl, "B", F, 2, TB_DIMS(D, 2 * GH), bf, sizeof(float) * (size_t)(D * 2 * GH)));
            if (pf) T_OK(mp_exec_set_input(pl, "P", F, 2, TB_DIMS(D, 3 * H), pf, sizeof(float) * (size_t)(D * 3 * H)));
        }
        if (c->lens && !c->lens_const)
            T_OK(mp_exec_set_input(pl, "L", MP_DT_INT32, 1, TB_DIMS(N), lens32, sizeof(int32_t) * (size_t)N));
        if (h0f) T_OK(mp_exec_set_input(pl, "H0", F, 3, sd, h0f, sizeof(float) * (size_t)(D * N * H)));
        if (c0f) T_OK(mp_exec_set_input(pl, "C0", F, 3, sd, c0f, sizeof(float) * (size_t)(D * N * H)));
        for (int rep = 0; rep < 2; rep++) { /* twice: nothing left over from the first run */
            T_OK(mp_exec_run(pl));
            const double *want[3] = {d.y, d.yh, d.yc};
            int64_t nw[3] = {S * D * N * H, D * N * H, D * N * H};
            for (int o2 = 0; o2 < (G == 4 ? 3 : 2); o2++) {
                const char *nm;
                int dt, rank;
                const int64_t *dims;
                const void *data;
                T_OK(mp_exec_output(pl, o2, &nm, &dt, &rank, &dims, &data));
                if (!data) continue;
                T_EQ(mp_dims_product(dims, rank), nw[o2]);
                double e = rel_err(data, want[o2], nw[o2]);
                if (!(e <= 2e-6))
                    mp_t_fail(__FILE__, __LINE__, "%s %s layout %d %s, %d threads: output %d, relative L2 error %g",
                              c->op, c->dir, c->layout, portable ? "portable" : "oneDNN", o.threads, o2, e);
            }
        }
        mp_exec_free(pl);
    }
    mp_run_portable_only = false;
    free(xf), free(h0f), free(c0f), free(wf), free(rf), free(bf), free(pf);
    for (int i = 0; i < 7; i++) free(all[i]);
    free(d.y), free(d.yh), free(d.yc);
    tb_done(m, p);
}

/* ---- cases ---- */

static void test_lstm_bidirectional(void) {
    /* every optional input, peepholes included; weights packed once, then
     * given as inputs */
    rcase c = {"LSTM", "bidirectional", 0, 0, 7, 3, 5, 8, true, true, true, true, NULL, false, true, 0, {NULL}, true};
    run_case(&c);
    c.w_const = false;
    run_case(&c);
    c.peep = c.h0 = false; /* initial_c alone: initial_h is zeros */
    run_case(&c);
}

static void test_lstm_forms(void) {
    rcase c = {"LSTM", "reverse", 0, 0, 6, 2, 4, 5, true, false, false, false, NULL, false, true, 0, {NULL}, true};
    run_case(&c);
    c.dir = "forward";
    c.bias = false;
    run_case(&c);
    /* layout 1, both directions: states and Y_h permuted in and out */
    rcase l = {"LSTM", "bidirectional", 1, 0, 5, 3, 4, 6, true, true, true, false, NULL, false, true, 0, {NULL}, true};
    run_case(&l);
    l.dir = "forward";
    run_case(&l);
}

static void test_gru(void) {
    rcase c = {"GRU", "bidirectional", 0, 0, 6, 3, 5, 7, true, true, false, false, NULL, false, true, 0, {NULL}, true};
    run_case(&c); /* linear_before_reset = 0: oneDNN's GRU */
    c.lbr = 1;    /* = 1: oneDNN's LBR GRU (PyTorch's export) */
    run_case(&c);
    c.w_const = false;
    c.layout = 1;
    run_case(&c);
    c.lbr = 0;
    c.dir = "reverse";
    run_case(&c);
}

static void test_rnn(void) {
    rcase c = {"RNN", "bidirectional", 0, 0, 5, 2, 3, 4, true, true, false, false, NULL, false, true, 0, {NULL}, true};
    run_case(&c);
    rcase r = {"RNN", "reverse", 0, 0, 5, 2, 3, 4, true, false, false, false, NULL, false, false, 0, {"Relu"}, true};
    run_case(&r);
}

static void test_sequence_lens(void) {
    /* shorter rows, known only at run time: the oneDNN kernel hands the run
     * to the portable one (Y zero past each row's length) */
    static const int64_t lens[3] = {4, 2, 0}, full[3] = {4, 4, 4};
    rcase c = {"LSTM", "bidirectional", 0, 0, 4, 3, 3, 5, true, true, true, false, lens, false, true, 0, {NULL}, true};
    run_case(&c);
    c.lens = full; /* all full length: oneDNN itself */
    run_case(&c);
    /* shorter rows known at plan time: the portable kernel is chosen */
    rcase g = {"GRU", "reverse", 0, 1, 4, 3, 3, 5, true, true, false, false, lens, true, true, 0, {NULL}, false};
    run_case(&g);
    g.lens = full; /* a constant of full lengths: oneDNN */
    g.want_onednn = true;
    run_case(&g);
}

static void test_portable_only_attrs(void) {
    /* clip and activations oneDNN does not have: refused, portable */
    rcase c = {"LSTM", "forward", 0, 0, 5, 2, 3, 4, true, true, true, true, NULL, false, true, 0.5, {NULL}, false};
    run_case(&c);
    rcase g = {"GRU", "bidirectional", 1, 1, 5, 2, 3, 4, true, true, false, false, NULL, false, false, 0,
               {"HardSigmoid", "Softsign", "Sigmoid", "Tanh"}, false};
    run_case(&g);
    rcase r = {"RNN", "bidirectional", 0, 0, 5, 2, 3, 4, true, false, false, false, NULL, false, true, 0,
               {"Tanh", "Relu"}, false}; /* one primitive has one activation */
    run_case(&r);
}

/* RNN, hidden 1, input 1, tanh: W = 1, R = 0.5, Wb = 0.25, Rb = 0, x =
 * (1, -2), h0 = 0:
 *   h1 = tanh(1 + 0.25)                 = tanh(1.25)      = 0.848283640
 *   h2 = tanh(-2 + 0.5 * h1 + 0.25)     = tanh(-1.3258582) = -0.8682334 */
static void test_rnn_hand(void) {
    for (int portable = 0; portable < 2; portable++) {
        mp_model *m = tb_new(14);
        tb_input(m, "X", F, 3, TB_DIMS(2, 1, 1));
        tb_const_f(m, "W", F, 3, TB_DIMS(1, 1, 1), (const double[]){1});
        tb_const_f(m, "R", F, 3, TB_DIMS(1, 1, 1), (const double[]){0.5});
        tb_const_f(m, "B", F, 2, TB_DIMS(1, 2), (const double[]){0.25, 0});
        int node = tb_node(m, "RNN", "X,W,R,B", "Y");
        tb_attr_i(m, node, "hidden_size", 1);
        tb_output(m, "Y");
        mp_profile *p = tb_prof(m);
        mp_run_portable_only = portable;
        mp_exec *pl = NULL;
        T_OK(mp_exec_create(p, NULL, &pl));
        float x[2] = {1, -2};
        T_OK(mp_exec_set_input(pl, "X", F, 3, TB_DIMS(2, 1, 1), x, sizeof x));
        T_OK(mp_exec_run(pl));
        const char *nm;
        int dt, rank;
        const int64_t *dims;
        const void *data;
        T_OK(mp_exec_output(pl, 0, &nm, &dt, &rank, &dims, &data));
        const float *y = data;
        T_CHECK(fabs(y[0] - 0.848283640) < 1e-6);
        T_CHECK(fabs(y[1] - -0.8682334) < 1e-6);
        mp_exec_free(pl);
        mp_run_portable_only = false;
        tb_done(m, p);
    }
}

MP_TESTS(rnn){
    {"lstm_bidirectional", test_lstm_bidirectional},
    {"lstm_forms", test_lstm_forms},
    {"gru", test_gru},
    {"rnn", test_rnn},
    {"sequence_lens", test_sequence_lens},
    {"portable_only_attrs", test_portable_only_attrs},
    {"rnn_hand", test_rnn_hand},
};
MP_TESTS_END(rnn)
