/* The recurrent layers on oneDNN (the RNN part of the oneDNN glue; dnnl.c
 * loads the library and holds the rest): ONNX LSTM, GRU and RNN run as one
 * oneDNN 2.6 RNN primitive each (dnnl_lstm_forward, dnnl_gru_forward or
 * dnnl_lbr_gru_forward for linear_before_reset=1, dnnl_vanilla_rnn_forward
 * with tanh, relu or logistic), all time steps and both directions in one
 * call.
 *
 * Plan once: prepare converts ONNX's weights into oneDNN's (gate order:
 * ONNX LSTM is i,o,f,c and oneDNN i,f,c,o; ONNX GRU z,r,h is oneDNN's
 * u,r,o; each direction's W [gates*H, I] becomes ldigo [I, gates, H]),
 * sums the two biases (LBR GRU keeps the recurrent bias of the candidate
 * gate apart, as oneDNN's fourth bias gate) and reorders constant weights
 * once into the layout the primitive chose. Weights known only at run time
 * (the ONNX test cases feed them as inputs) are converted each run into
 * plain ldigo buffers, which the primitive then takes as they are.
 *
 * Layouts: oneDNN writes a bidirectional Y as [T, N, 2H] (both directions
 * concatenated per row), ONNX as [T, 2, N, H]: one permuting copy after
 * the call (layout 1, [N, T, 2, H], is oneDNN's ntc and needs none). The
 * states are [D, N, H] in both (layout 1: [N, D, H], permuted in and out
 * when D is 2).
 *
 * What the primitive cannot do is left to the portable kernel (linalg.c):
 * mp_dnnl_rnn_kernel refuses the node (clip, non-default activations,
 * LSTM input_forget, other dtypes, sequence_lens the inference knows to be
 * shorter than the sequence). Given sequence_lens are checked each run
 * (those the inference did not read, constant or not): when one is shorter
 * than T, that run goes to the portable kernel, which prepare made ready
 * beside the primitive. */
#include "run/dnnl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>
#include <dnnl_debug.h>

/* OpenMP (libgomp, which libdnnl uses): declared here, as in dnnl.c.
 * GOMP_parallel is the call `#pragma omp parallel` compiles to. */
extern void omp_set_num_threads(int n);
extern int omp_get_max_threads(void);
extern int omp_get_num_threads(void);
extern int omp_get_thread_num(void);
extern void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);

/* ---------------------------------------------------- the calls we make */

#define MP__RNN_FNS(X)                          \
    X(dnnl_gru_forward_desc_init)               \
    X(dnnl_lbr_gru_forward_desc_init)           \
    X(dnnl_lstm_forward_desc_init_v2)           \
    X(dnnl_vanilla_rnn_forward_desc_init)       \
    X(dnnl_memory_create)                       \
    X(dnnl_memory_desc_equal)                   \
    X(dnnl_memory_desc_get_size)                \
    X(dnnl_memory_desc_init_by_tag)             \
    X(dnnl_memory_destroy)                      \
    X(dnnl_memory_set_data_handle)              \
    X(dnnl_primitive_attr_create)               \
    X(dnnl_primitive_attr_destroy)              \
    X(dnnl_primitive_attr_set_scratchpad_mode)  \
    X(dnnl_primitive_create)                    \
    X(dnnl_primitive_desc_create)               \
    X(dnnl_primitive_desc_destroy)              \
    X(dnnl_primitive_desc_query_md)             \
    X(dnnl_primitive_destroy)                   \
    X(dnnl_primitive_execute)                   \
    X(dnnl_reorder_primitive_desc_create)       \
    X(dnnl_status2str)                          \
    X(dnnl_stream_create)                       \
    X(dnnl_stream_destroy)                      \
    X(dnnl_stream_wait)                         \
    X(dnnl_memory_desc_init_by_strides)         \
    X(omp_get_max_threads)                      \
    X(omp_get_num_threads)                      \
    X(omp_get_thread_num)                       \
    X(omp_set_num_threads)                      \
    X(GOMP_parallel)

#define RF_FIELD(f) __typeof__(f) *f;
static struct {
    MP__RNN_FNS(RF_FIELD)
} F;
#undef RF_FIELD

static pthread_once_t rf_once = PTHREAD_ONCE_INIT;
static bool rf_ok;
static dnnl_engine_t r_eng;
static dnnl_stream_t r_strm;

static void rf_load(void) {
    bool ok = mp_dnnl_engine(&r_eng, &r_strm);
#define RF_SYM(f) ok = ok && (*(void **)&F.f = mp_dnnl_sym(#f)) != NULL;
    MP__RNN_FNS(RF_SYM)
#undef RF_SYM
    rf_ok = ok;
}

static bool rf_available(void) {
    pthread_once(&rf_once, rf_load);
    return rf_ok;
}

static mp_status rfail(const mp_kctx *k, dnnl_status_t s, const char *what) {
    return mp_error(MP_ERR_UNSUPPORTED, "node %s (%s): oneDNN %s: %s", k->n->name ? k->n->name : "?",
                    k->n->op, what, F.dnnl_status2str(s));
}

#define RN(call, what)                                              \
    do {                                                            \
        dnnl_status_t rn_s_ = (call);                               \
        if (rn_s_ != dnnl_success) return rfail(k, rn_s_, what);    \
    } while (0)

/* ------------------------------------------------- what oneDNN can do */

/* ONNX gate g_onnx of oneDNN gate g: LSTM i,f,c,o <- i,o,f,c; GRU and RNN
 * in the same order. */
static const int lstm_gate[4] = {0, 2, 3, 1};
static const int same_gate[4] = {0, 1, 2, 3};
/* ONNX peephole P [3H] is i,o,f; oneDNN's weights_peephole i,f,o */
static const int peep_gate[3] = {0, 2, 1};

static int rnn_gates(const mp_node *n) {
    return mp_streq(n->op, "LSTM") ? 4 : mp_streq(n->op, "GRU") ? 3 : 1;
}

static const mp_value *rin(const mp_graph *g, const mp_node *n, int i) {
    return i < n->n_in && n->in[i] >= 0 ? &g->values[n->in[i]] : NULL;
}
static const mp_value *rout(const mp_graph *g, const mp_node *n, int i) {
    return i < n->n_out && n->out[i] >= 0 ? &g->values[n->out[i]] : NULL;
}
static bool f32_known(const mp_value *v, int rank) {
    return v && v->dtype == MP_DT_FLOAT && mp_shape_known(v) && (rank < 0 || v->rank == rank);
}

/* The vanilla RNN's activation (the same for both directions), or false
 * when the node's activations are not the ones oneDNN applies: LSTM
 * Sigmoid, Tanh, Tanh; GRU Sigmoid, Tanh; RNN one of Tanh, Relu, Sigmoid. */
static bool rnn_acts(const mp_node *n, int gates, int dirs, dnnl_alg_kind_t *act) {
    static const char *const lstm[3] = {"Sigmoid", "Tanh", "Tanh"}, *const gru[2] = {"Sigmoid", "Tanh"};
    const mp_attr *aa = mp_node_attr(n, "activations");
    int nf = gates == 4 ? 3 : gates == 3 ? 2 : 1;
    *act = dnnl_eltwise_tanh;
    if (!aa) return true;
    if (aa->type != MP_ATTR_STRINGS || aa->n != nf * dirs) return false;
    for (int d = 0; d < dirs; d++)
        for (int f = 0; f < nf; f++) {
            const char *s = aa->strings[d * nf + f];
            if (gates == 1) {
                dnnl_alg_kind_t a = mp_streq(s, "Tanh")      ? dnnl_eltwise_tanh
                                    : mp_streq(s, "Relu")    ? dnnl_eltwise_relu
                                    : mp_streq(s, "Sigmoid") ? dnnl_eltwise_logistic
                                                             : dnnl_alg_kind_undef;
                if (a == dnnl_alg_kind_undef || (d > 0 && a != *act)) return false;
                *act = a;
            } else if (!mp_streq(s, gates == 4 ? lstm[f] : gru[f])) {
                return false;
            }
        }
    return true;
}

static const mp_kernel k_rnn;

const mp_kernel *mp_dnnl_rnn_kernel(const mp_graph *g, const mp_node *n) {
    if (!g || !n || !n->desc || !rf_available()) return NULL;
    int gates = rnn_gates(n);
    const char *dir = mp_attr_s(n, "direction", "forward");
    int dirs = mp_streq(dir, "bidirectional") ? 2 : (mp_streq(dir, "forward") || mp_streq(dir, "reverse")) ? 1 : 0;
    int64_t layout = mp_attr_i(n, "layout", 0);
    dnnl_alg_kind_t act;
    if (!dirs || (layout != 0 && layout != 1) || mp_attr_f(n, "clip", 0) != 0 ||
        (gates == 4 && mp_attr_i(n, "input_forget", 0) != 0) || !rnn_acts(n, gates, dirs, &act))
        return NULL;
    const mp_value *x = rin(g, n, 0), *w = rin(g, n, 1), *r = rin(g, n, 2);
    if (!f32_known(x, 3) || !f32_known(w, 3) || !f32_known(r, 3)) return NULL;
    int64_t T = x->dims[layout ? 1 : 0], H = r->dims[2];
    if (T < 1 || x->dims[layout ? 0 : 1] < 1 || H < 1 || x->dims[2] < 1) return NULL;
    /* B, initial_h (5), initial_c (6), P (7): fp32 when present */
    for (int i = 3; i < n->n_in && i < (gates == 4 ? 8 : 6); i++)
        if (i != 4 && rin(g, n, i) && !f32_known(rin(g, n, i), -1)) return NULL;
    if (gates != 4 && n->n_in > 6) return NULL;
    for (int i = 0; i < n->n_out; i++)
        if (rout(g, n, i) && !f32_known(rout(g, n, i), -1)) return NULL;
    const mp_value *sl = rin(g, n, 4);
    if (sl) {
        int64_t ne = mp_value_numel(sl);
        if (!mp_shape_known(sl) || ne < 0) return NULL;
        if (sl->kn == ne && sl->iv) /* known now: all full length, or the portable kernel */
            for (int64_t b = 0; b < ne; b++)
                if (sl->iv[b] != T) return NULL;
    }
    return &k_rnn;
}

/* ------------------------------------------------------- kernel state */

#define RK_MAXARG 12
#define RK_MAXOWN 16

enum { R_IN, R_OUT, R_OWN, R_SCRATCH };

/* One primitive and its arguments: both directions, or one of the two
 * when the directions run side by side (see rk). */
typedef struct rpart {
    dnnl_primitive_t prim;
    dnnl_stream_t strm;           /* the second part's own stream (NULL: the glue's) */
    int n;
    dnnl_exec_arg_t ex[RK_MAXARG];
    unsigned char from[RK_MAXARG];
    int idx[RK_MAXARG];
    size_t off[RK_MAXARG];        /* bytes into the input, output or scratch */
    void *last[RK_MAXARG];
    dnnl_status_t st;
} rpart;

/* A bidirectional layer on two or more threads runs as two one-direction
 * primitives side by side, one per thread (an OpenMP region of two, each
 * primitive running on its own thread within it): oneDNN's bidirectional
 * primitive runs the directions one after the other, each step split
 * across the threads, and at batch 4 and hidden 128 a step is a few
 * microseconds, so the split costs a rendezvous per step for little work.
 * Measured on the LSTM+GRU benchmark's layers (2 threads, best of 50):
 * input 64 0.268 -> 0.20 ms, input 256 0.354 -> 0.31 ms. */
typedef struct rk {
    int gates, gb, dirs, layout;  /* gb: bias gates (4 for LBR GRU) */
    bool lbr, sl_rt;
    int64_t T, N, I, H;
    int threads;
    const int *go;                /* ONNX gate of each oneDNN gate */
    rpart part[2];
    int n_part;
    void *own[RK_MAXOWN];
    int n_own;
    /* converted each run from inputs known only then (NULL: done once) */
    float *w_rt, *r_rt, *b_rt, *p_rt;
    /* states and outputs through buffers of ours, permuted in or out */
    float *h0, *c0;               /* layout 1, two directions: initial states */
    float *y, *yh, *yc;           /* permuted out when the output is wanted */
    bool y_perm, yh_perm, yc_perm;
    /* the portable kernel, for runs whose sequence_lens are short */
    void *pstate;
    mp_release_fn prelease;
    mp_kctx *k;                   /* during a run, for the parallel region */
} rk;

static void *rk_own(rk *s, size_t bytes, bool zero) {
    if (s->n_own >= RK_MAXOWN) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) return NULL;
    if (zero) memset(p, 0, bytes);
    s->own[s->n_own++] = p;
    return p;
}

static void rnn_release(void *state) {
    rk *s = state;
    if (!s) return;
    if (s->pstate && s->prelease) s->prelease(s->pstate);
    for (int p = 0; p < s->n_part; p++) {
        rpart *q = &s->part[p];
        for (int i = 0; i < q->n; i++)
            if (q->ex[i].memory) F.dnnl_memory_destroy(q->ex[i].memory);
        if (q->prim) F.dnnl_primitive_destroy(q->prim);
        if (q->strm) F.dnnl_stream_destroy(q->strm);
    }
    for (int i = 0; i < s->n_own; i++) free(s->own[i]);
    free(s);
}

static mp_status rk_arg(mp_kctx *k, rpart *q, int arg, const dnnl_memory_desc_t *md, int from, int idx,
                        size_t off, void *data) {
    if (q->n >= RK_MAXARG) return mp_error(MP_ERR_LIMIT, "node %s: too many oneDNN arguments", k->n->name);
    dnnl_memory_t mem;
    RN(F.dnnl_memory_create(&mem, md, r_eng, from == R_OWN ? (char *)data + off : DNNL_MEMORY_NONE), "memory");
    q->ex[q->n] = (dnnl_exec_arg_t){arg, mem};
    q->from[q->n] = (unsigned char)from;
    q->idx[q->n] = idx;
    q->off[q->n] = off;
    q->last[q->n] = from == R_OWN ? data : NULL;
    q->n++;
    return MP_OK;
}

static void set_threads(int n) {
    if (n > 0 && F.omp_get_max_threads() != n) F.omp_set_num_threads(n);
}

/* ------------------------------------------------------ conversions */

/* ONNX W [D, gates*H, C] (ONNX gate order) -> ldigo [1, D, C, gates, H]
 * (oneDNN's order). */
static void to_ldigo(const rk *s, float *dst, const float *w, int64_t C) {
    int64_t G = s->gates, H = s->H;
    for (int d = 0; d < s->dirs; d++)
        for (int64_t g = 0; g < G; g++)
            for (int64_t j = 0; j < H; j++) {
                const float *row = w + ((d * G + s->go[g]) * H + j) * C;
                float *col = dst + (d * C * G + g) * H + j;
                for (int64_t i = 0; i < C; i++) col[i * G * H] = row[i];
            }
}

/* ONNX B [D, 2*gates*H] (Wb then Rb) -> ldgo [1, D, gb, H]: Wb + Rb, but
 * LBR GRU's candidate gate keeps Wb_h in gate 2 and Rb_h in gate 3. */
static void to_bias(const rk *s, float *dst, const float *b) {
    int64_t G = s->gates, H = s->H;
    for (int d = 0; d < s->dirs; d++) {
        const float *wb = b ? b + d * 2 * G * H : NULL, *rb = wb ? wb + G * H : NULL;
        float *o = dst + d * s->gb * H;
        for (int64_t g = 0; g < G; g++)
            for (int64_t j = 0; j < H; j++) {
                int64_t e = s->go[g] * H + j;
                o[g * H + j] = wb ? (s->lbr && g == 2 ? wb[e] : wb[e] + rb[e]) : 0;
            }
        if (s->lbr)
            for (int64_t j = 0; j < H; j++) o[3 * H + j] = rb ? rb[2 * H + j] : 0;
    }
}

/* ONNX P [D, 3H] (i, o, f) -> ldgo [1, D, 3, H] (i, f, o). */
static void to_peep(const rk *s, float *dst, const float *p) {
    for (int d = 0; d < s->dirs; d++)
        for (int g = 0; g < 3; g++)
            memcpy(dst + (d * 3 + g) * s->H, p + (d * 3 + peep_gate[g]) * s->H, sizeof(float) * (size_t)s->H);
}

/* [A][B][H] -> [B][A][H] */
static void swap01(float *dst, const float *src, int64_t A, int64_t B, int64_t H) {
    for (int64_t a = 0; a < A; a++)
        for (int64_t b = 0; b < B; b++)
            memcpy(dst + (b * A + a) * H, src + (a * B + b) * H, sizeof(float) * (size_t)H);
}

static dnnl_status_t md_tag(dnnl_memory_desc_t *md, int rank, const int64_t *dims, dnnl_format_tag_t tag) {
    dnnl_dims_t d;
    for (int i = 0; i < rank; i++) d[i] = dims[i];
    return F.dnnl_memory_desc_init_by_tag(md, rank, d, dnnl_f32, tag);
}
static dnnl_status_t md_strides(dnnl_memory_desc_t *md, int rank, const int64_t *dims, const int64_t *strides) {
    dnnl_dims_t d, st;
    for (int i = 0; i < rank; i++) d[i] = dims[i], st[i] = strides[i];
    return F.dnnl_memory_desc_init_by_strides(md, rank, d, dnnl_f32, st);
}

/* Constant weights: converted into a plain ldigo buffer (from), reordered
 * once into the layout the primitive chose (to), bound as `arg`. */
static mp_status bind_weights(mp_kctx *k, rk *s, rpart *q, int arg, const dnnl_memory_desc_t *from,
                              const float *plain, const dnnl_memory_desc_t *to) {
    size_t sz = F.dnnl_memory_desc_get_size(to);
    void *buf = rk_own(s, sz, false);
    if (!buf) return mp_error(MP_ERR_NOMEM, "node %s: out of memory for weights", k->n->name);
    if (F.dnnl_memory_desc_equal(from, to)) {
        memcpy(buf, plain, sz);
        return rk_arg(k, q, arg, to, R_OWN, 0, 0, buf);
    }
    dnnl_memory_t a = NULL, b = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t r = NULL;
    dnnl_status_t st = F.dnnl_memory_create(&a, from, r_eng, (void *)plain);
    if (st == dnnl_success) st = F.dnnl_memory_create(&b, to, r_eng, buf);
    if (st == dnnl_success) st = F.dnnl_reorder_primitive_desc_create(&rpd, from, r_eng, to, r_eng, NULL);
    if (st == dnnl_success) st = F.dnnl_primitive_create(&r, rpd);
    if (st == dnnl_success) {
        dnnl_exec_arg_t ex[2] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
        st = F.dnnl_primitive_execute(r, r_strm, 2, ex);
        if (st == dnnl_success) st = F.dnnl_stream_wait(r_strm);
    }
    if (r) F.dnnl_primitive_destroy(r);
    if (rpd) F.dnnl_primitive_desc_destroy(rpd);
    if (a) F.dnnl_memory_destroy(a);
    if (b) F.dnnl_memory_destroy(b);
    if (st != dnnl_success) return rfail(k, st, "weights reorder");
    return rk_arg(k, q, arg, to, R_OWN, 0, 0, buf);
}

/* --------------------------------------------------------------- prepare */

/* What prepare shares between the parts: the whole layer's converted
 * weights (plain) or run-time buffers, and the state buffers. */
typedef struct rbuild {
    const float *wl, *wi;          /* plain ldigo of both directions (constant weights) */
    float *bias, *peep;            /* ldgo, both directions */
    float *it[2], *dit[2];         /* own state buffers (NULL: the node's) */
    float *y;                      /* own Y (NULL: the node's) */
    bool has_it, has_dit;
    size_t sp_at;                  /* scratch used so far */
} rbuild;

/* Part q computes directions d0 .. d0+nd-1 (all of them, or one). */
static mp_status part_build(mp_kctx *k, rk *s, rpart *q, rbuild *b, int d0, int nd, dnnl_rnn_direction_t rdir,
                            size_t *scratch) {
    const mp_node *n = k->n;
    int64_t D = s->dirs, T = s->T, N = s->N, I = s->I, H = s->H, G = s->gates;
    bool lstm = G == 4, split = nd < D;
    size_t fs = sizeof(float), sd = (size_t)d0 * (size_t)(N * H) * fs; /* a direction's state offset */
    dnnl_memory_desc_t src, dst, wl_any, wi_any, wl_plain, wi_plain, bias, peep, it;
    dnnl_format_tag_t tnc = s->layout ? dnnl_ntc : dnnl_tnc;
    RN(md_tag(&src, 3, (int64_t[]){T, N, I}, tnc), "memory desc");
    if (!split) {
        RN(md_tag(&dst, 3, (int64_t[]){T, N, D * H}, tnc), "memory desc");
    } else { /* one direction's slice of Y [T, D, N, H] (layout 0 only) */
        RN(md_strides(&dst, 3, (int64_t[]){T, N, H}, (int64_t[]){D * N * H, H, 1}), "memory desc");
    }
    RN(md_tag(&wl_plain, 5, (int64_t[]){1, nd, I, G, H}, dnnl_ldigo), "memory desc");
    RN(md_tag(&wi_plain, 5, (int64_t[]){1, nd, H, G, H}, dnnl_ldigo), "memory desc");
    RN(md_tag(&wl_any, 5, (int64_t[]){1, nd, I, G, H}, b->wl ? dnnl_format_tag_any : dnnl_ldigo), "memory desc");
    RN(md_tag(&wi_any, 5, (int64_t[]){1, nd, H, G, H}, b->wi ? dnnl_format_tag_any : dnnl_ldigo), "memory desc");
    RN(md_tag(&bias, 4, (int64_t[]){1, nd, s->gb, H}, dnnl_ldgo), "memory desc");
    RN(md_tag(&peep, 4, (int64_t[]){1, nd, 3, H}, dnnl_ldgo), "memory desc");
    RN(md_tag(&it, 4, (int64_t[]){1, nd, N, H}, dnnl_ldnc), "memory desc");
    const mp_rtensor *P = lstm && k->n_in > 7 && n->in[7] >= 0 ? &k->in[7] : NULL;
    dnnl_rnn_desc_t rd;
    const dnnl_memory_desc_t *pit = b->has_it ? &it : NULL, *pdit = b->has_dit ? &it : NULL;
    if (lstm) {
        RN(F.dnnl_lstm_forward_desc_init_v2(&rd, dnnl_forward_inference, rdir, &src, pit, pit, &wl_any, &wi_any,
                                            P ? &peep : NULL, &bias, &dst, pdit, pdit, 0),
           "LSTM descriptor");
    } else if (G == 3) {
        RN((s->lbr ? F.dnnl_lbr_gru_forward_desc_init : F.dnnl_gru_forward_desc_init)(
               &rd, dnnl_forward_inference, rdir, &src, pit, &wl_any, &wi_any, &bias, &dst, pdit, 0),
           "GRU descriptor");
    } else {
        dnnl_alg_kind_t act;
        rnn_acts(n, (int)G, (int)D, &act);
        RN(F.dnnl_vanilla_rnn_forward_desc_init(&rd, dnnl_forward_inference, act, rdir, &src, pit, &wl_any,
                                                &wi_any, &bias, &dst, pdit, 0, 0.0f, 0.0f),
           "RNN descriptor");
    }
    dnnl_primitive_attr_t attr;
    RN(F.dnnl_primitive_attr_create(&attr), "attr");
    dnnl_status_t ds = F.dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    dnnl_primitive_desc_t pd = NULL;
    if (ds == dnnl_success) ds = F.dnnl_primitive_desc_create(&pd, &rd, attr, r_eng, NULL);
    F.dnnl_primitive_attr_destroy(attr);
    if (ds != dnnl_success) return rfail(k, ds, "RNN primitive");
    ds = F.dnnl_primitive_create(&q->prim, pd);
    dnnl_memory_desc_t wl_to = *F.dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_WEIGHTS_LAYER);
    dnnl_memory_desc_t wi_to = *F.dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_WEIGHTS_ITER);
    dnnl_memory_desc_t sp = *F.dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    F.dnnl_primitive_desc_destroy(pd);
    if (ds != dnnl_success) return rfail(k, ds, "RNN primitive");
    if (split && d0 > 0) RN(F.dnnl_stream_create(&q->strm, r_eng, dnnl_stream_default_flags), "stream");

    /* weights: a direction's block of ldigo is contiguous */
    mp_status st;
    size_t wl_d = (size_t)(I * G * H), wi_d = (size_t)(H * G * H);
    if (b->wl) st = bind_weights(k, s, q, DNNL_ARG_WEIGHTS_LAYER, &wl_plain, b->wl + d0 * wl_d, &wl_to);
    else st = rk_arg(k, q, DNNL_ARG_WEIGHTS_LAYER, &wl_to, R_OWN, 0, d0 * wl_d * fs, s->w_rt);
    if (st) return st;
    if (b->wi) st = bind_weights(k, s, q, DNNL_ARG_WEIGHTS_ITER, &wi_plain, b->wi + d0 * wi_d, &wi_to);
    else st = rk_arg(k, q, DNNL_ARG_WEIGHTS_ITER, &wi_to, R_OWN, 0, d0 * wi_d * fs, s->r_rt);
    if (st) return st;
    if ((st = rk_arg(k, q, DNNL_ARG_BIAS, &bias, R_OWN, 0, (size_t)(d0 * s->gb * H) * fs, b->bias))) return st;
    if (P && (st = rk_arg(k, q, DNNL_ARG_WEIGHTS_PEEPHOLE, &peep, R_OWN, 0, (size_t)(d0 * 3 * H) * fs, b->peep)))
        return st;

    /* activations */
    if ((st = rk_arg(k, q, DNNL_ARG_SRC_LAYER, &src, R_IN, 0, 0, NULL))) return st;
    static const int iargs[2] = {DNNL_ARG_SRC_ITER, DNNL_ARG_SRC_ITER_C};
    static const int dargs[2] = {DNNL_ARG_DST_ITER, DNNL_ARG_DST_ITER_C};
    for (int i = 0; i < (lstm ? 2 : 1); i++) {
        if (b->has_it) {
            st = b->it[i] ? rk_arg(k, q, iargs[i], &it, R_OWN, 0, sd, b->it[i])
                          : rk_arg(k, q, iargs[i], &it, R_IN, 5 + i, sd, NULL);
            if (st) return st;
        }
        if (b->has_dit) {
            st = b->dit[i] ? rk_arg(k, q, dargs[i], &it, R_OWN, 0, sd, b->dit[i])
                           : rk_arg(k, q, dargs[i], &it, R_OUT, 1 + i, sd, NULL);
            if (st) return st;
        }
    }
    st = b->y ? rk_arg(k, q, DNNL_ARG_DST_LAYER, &dst, R_OWN, 0, sd, b->y)
              : rk_arg(k, q, DNNL_ARG_DST_LAYER, &dst, R_OUT, 0, sd, NULL);
    if (st) return st;
    size_t spb = F.dnnl_memory_desc_get_size(&sp);
    if (spb) {
        if ((st = rk_arg(k, q, DNNL_ARG_SCRATCHPAD, &sp, R_SCRATCH, 0, b->sp_at, NULL))) return st;
        b->sp_at += (spb + 63) / 64 * 64;
        if (*scratch < b->sp_at) *scratch = b->sp_at;
    }
    return MP_OK;
}

static mp_status rnn_build(mp_kctx *k, rk *s, size_t *scratch);

static mp_status rnn_prepare(mp_kctx *k, size_t *scratch) {
    if (!rf_available()) return mp_error(MP_ERR_UNSUPPORTED, "node %s: oneDNN is not available", k->n->name);
    rk *s = calloc(1, sizeof *s);
    if (!s) return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
    k->state = s;
    mp_status st = rnn_build(k, s, scratch);
    if (st) return st;
    if (s->sl_rt && k->n->desc->prepare) { /* the portable kernel, ready for short sequences */
        size_t ps = 0;
        k->state = NULL;
        st = k->n->desc->prepare(k, &ps);
        s->pstate = k->state;
        s->prelease = k->n->desc->release;
        k->state = s;
        if (st) return st;
        if (*scratch < ps) *scratch = ps;
    }
    return MP_OK;
}

static mp_status rnn_build(mp_kctx *k, rk *s, size_t *scratch) {
    const mp_node *n = k->n;
    const mp_rtensor *X = &k->in[0], *W = &k->in[1], *R = &k->in[2];
    int gates = rnn_gates(n);
    const char *dir = mp_attr_s(n, "direction", "forward");
    s->gates = gates;
    s->lbr = gates == 3 && mp_attr_i(n, "linear_before_reset", 0) != 0;
    s->gb = gates + (s->lbr ? 1 : 0);
    s->go = gates == 4 ? lstm_gate : same_gate;
    s->dirs = mp_streq(dir, "bidirectional") ? 2 : 1;
    s->layout = (int)mp_attr_i(n, "layout", 0);
    s->T = X->dims[s->layout ? 1 : 0];
    s->N = X->dims[s->layout ? 0 : 1];
    s->I = X->dims[2];
    s->H = R->dims[2];
    s->threads = k->threads > 0 ? k->threads : F.omp_get_max_threads();
    int64_t D = s->dirs, T = s->T, N = s->N, I = s->I, H = s->H, G = gates;
    bool lstm = gates == 4;
    const mp_rtensor *B = k->n_in > 3 && n->in[3] >= 0 ? &k->in[3] : NULL;
    const mp_rtensor *SL = k->n_in > 4 && n->in[4] >= 0 ? &k->in[4] : NULL;
    const mp_rtensor *H0 = k->n_in > 5 && n->in[5] >= 0 ? &k->in[5] : NULL;
    const mp_rtensor *C0 = lstm && k->n_in > 6 && n->in[6] >= 0 ? &k->in[6] : NULL;
    const mp_rtensor *P = lstm && k->n_in > 7 && n->in[7] >= 0 ? &k->in[7] : NULL;
    bool want[3] = {k->n_out > 0 && n->out[0] >= 0, k->n_out > 1 && n->out[1] >= 0,
                    lstm && k->n_out > 2 && n->out[2] >= 0};
    if (W->numel != D * G * H * I || R->numel != D * G * H * H || (B && B->numel != D * 2 * G * H) ||
        (H0 && H0->numel != D * N * H) || (C0 && C0->numel != D * N * H) || (P && P->numel != D * 3 * H) ||
        (SL && SL->numel != N))
        return mp_error(MP_ERR_SHAPE, "node %s (%s): an input's size does not match X, W and R (%lld directions, "
                        "hidden %lld)", n->name, n->op, (long long)D, (long long)H);
    s->sl_rt = SL != NULL; /* checked each run (a constant one too: inference may not have read it) */
    /* both directions side by side: two threads or more, layout 0 */
    bool split = D == 2 && s->threads >= 2 && s->layout == 0;
    s->n_part = split ? 2 : 1;

    /* weights, biases, peepholes: converted now when constant, else each run */
    rbuild b = {0};
    size_t fs = sizeof(float), wl_n = (size_t)(D * I * G * H), wi_n = (size_t)(D * H * G * H);
    float *wl = NULL, *wi = NULL;
    mp_status st = MP_OK;
    if (W->data && (wl = malloc(fs * wl_n))) to_ldigo(s, wl, W->data, I);
    if (R->data && (wi = malloc(fs * wi_n))) to_ldigo(s, wi, R->data, H);
    if ((W->data && !wl) || (R->data && !wi)) st = mp_error(MP_ERR_NOMEM, "node %s: out of memory", n->name);
    if (!st && !W->data && !(s->w_rt = rk_own(s, fs * wl_n, false))) st = mp_error(MP_ERR_NOMEM, "out of memory");
    if (!st && !R->data && !(s->r_rt = rk_own(s, fs * wi_n, false))) st = mp_error(MP_ERR_NOMEM, "out of memory");
    b.wl = wl;
    b.wi = wi;
    if (!st && !(b.bias = rk_own(s, fs * (size_t)(D * s->gb * H), true))) st = mp_error(MP_ERR_NOMEM, "out of memory");
    if (!st) {
        if (B && !B->data) s->b_rt = b.bias;
        else to_bias(s, b.bias, B ? B->data : NULL);
    }
    if (!st && P) {
        if (!(b.peep = rk_own(s, fs * (size_t)(D * 3 * H), false))) st = mp_error(MP_ERR_NOMEM, "out of memory");
        else if (!P->data) s->p_rt = b.peep;
        else to_peep(s, b.peep, P->data);
    }

    /* states and outputs: the node's buffers where the layouts agree, ours where not */
    size_t state_b = fs * (size_t)(D * N * H);
    bool swap_state = s->layout == 1 && D == 2;
    b.has_it = H0 || C0;
    b.has_dit = want[1] || want[2];
    const mp_rtensor *in[2] = {H0, C0};
    for (int i = 0; !st && i < (lstm ? 2 : 1); i++) {
        if (b.has_it && (!in[i] || swap_state)) { /* absent (zeros), or permuted in each run */
            if (!(b.it[i] = rk_own(s, state_b, true))) st = mp_error(MP_ERR_NOMEM, "out of memory");
            else if (in[i]) *(i ? &s->c0 : &s->h0) = b.it[i];
        }
        if (!st && b.has_dit && (!want[1 + i] || swap_state)) {
            if (!(b.dit[i] = rk_own(s, state_b, false))) st = mp_error(MP_ERR_NOMEM, "out of memory");
            else if (want[1 + i]) {
                *(i ? &s->yc : &s->yh) = b.dit[i];
                *(i ? &s->yc_perm : &s->yh_perm) = true;
            }
        }
    }
    if (!st && (!want[0] || (D == 2 && s->layout == 0 && !split))) {
        if (!(b.y = s->y = rk_own(s, fs * (size_t)(T * N * D * H), false))) st = mp_error(MP_ERR_NOMEM, "out of memory");
        s->y_perm = want[0] && !split;
    }
    /* the primitives: made for the threads each will run on */
    if (!st) {
        set_threads(split ? 1 : s->threads);
        if (split) {
            st = part_build(k, s, &s->part[0], &b, 0, 1, dnnl_unidirectional_left2right, scratch);
            if (!st) st = part_build(k, s, &s->part[1], &b, 1, 1, dnnl_unidirectional_right2left, scratch);
        } else {
            dnnl_rnn_direction_t rdir = D == 2                     ? dnnl_bidirectional_concat
                                        : mp_streq(dir, "reverse") ? dnnl_unidirectional_right2left
                                                                   : dnnl_unidirectional_left2right;
            st = part_build(k, s, &s->part[0], &b, 0, (int)D, rdir, scratch);
        }
        set_threads(s->threads);
    }
    free(wl);
    free(wi);
    return st;
}

/* ------------------------------------------------------------------ run */

static mp_status rnn_portable(mp_kctx *k, rk *s) {
    if (!k->n->desc->run) return mp_error(MP_ERR_UNSUPPORTED, "node %s: no portable kernel", k->n->name);
    k->state = s->pstate;
    mp_status st = k->n->desc->run(k);
    k->state = s;
    return st;
}

static dnnl_status_t part_bind(mp_kctx *k, rpart *q) {
    for (int i = 0; i < q->n; i++) {
        char *p;
        switch (q->from[i]) {
        case R_IN: p = k->in[q->idx[i]].data; break;
        case R_OUT: p = k->out[q->idx[i]].data; break;
        case R_SCRATCH: p = k->scratch; break;
        default: continue;
        }
        if (!p) return dnnl_invalid_arguments;
        if (p != q->last[i]) {
            dnnl_status_t st = F.dnnl_memory_set_data_handle(q->ex[i].memory, p + q->off[i]);
            if (st != dnnl_success) return st;
            q->last[i] = p;
        }
    }
    return dnnl_success;
}

static void part_exec(rpart *q) {
    dnnl_stream_t strm = q->strm ? q->strm : r_strm;
    q->st = F.dnnl_primitive_execute(q->prim, strm, q->n, q->ex);
    if (q->st == dnnl_success) q->st = F.dnnl_stream_wait(strm);
}

/* the OpenMP region of the two directions: thread i runs part i (a
 * region given fewer threads runs both on thread 0) */
static void parts_region(void *arg) {
    rk *s = arg;
    int nt = F.omp_get_num_threads(), me = F.omp_get_thread_num();
    for (int p = me; p < s->n_part; p += nt) part_exec(&s->part[p]);
}

static mp_status rnn_run(mp_kctx *k) {
    rk *s = k->state;
    if (s->sl_rt) { /* sequence_lens given at run time: all full length, or portable */
        const mp_rtensor *SL = &k->in[4];
        if (!SL->data) return mp_error(MP_ERR_USAGE, "node %s: sequence_lens missing", k->n->name);
        for (int64_t b = 0; b < SL->numel; b++) {
            int64_t v = SL->dtype == MP_DT_INT64 ? ((const int64_t *)SL->data)[b]
                                                  : SL->dtype == MP_DT_INT32 ? ((const int32_t *)SL->data)[b] : -1;
            if (v != s->T) return rnn_portable(k, s);
        }
    }
    for (int i = 0; i < 8 && i < k->n_in; i++)
        if ((i == 1 && s->w_rt) || (i == 2 && s->r_rt) || (i == 3 && s->b_rt) || (i == 5 && s->h0) ||
            (i == 6 && s->c0) || (i == 7 && s->p_rt))
            if (!k->in[i].data) return mp_error(MP_ERR_USAGE, "node %s: input %d missing", k->n->name, i);
    if (s->w_rt) to_ldigo(s, s->w_rt, k->in[1].data, s->I);
    if (s->r_rt) to_ldigo(s, s->r_rt, k->in[2].data, s->H);
    if (s->b_rt) to_bias(s, s->b_rt, k->in[3].data);
    if (s->p_rt) to_peep(s, s->p_rt, k->in[7].data);
    if (s->h0) swap01(s->h0, k->in[5].data, s->N, s->dirs, s->H);
    if (s->c0) swap01(s->c0, k->in[6].data, s->N, s->dirs, s->H);
    for (int p = 0; p < s->n_part; p++)
        if (part_bind(k, &s->part[p]) != dnnl_success)
            return mp_error(MP_ERR_USAGE, "node %s (%s): a buffer oneDNN needs is missing", k->n->name, k->n->op);
    if (s->n_part == 2) {
        F.GOMP_parallel(parts_region, s, 2, 0);
    } else {
        set_threads(s->threads);
        part_exec(&s->part[0]);
    }
    for (int p = 0; p < s->n_part; p++)
        if (s->part[p].st != dnnl_success) return rfail(k, s->part[p].st, "execute");
    int64_t D = s->dirs, N = s->N, H = s->H;
    if (s->y_perm && k->out[0].data) /* [T][N][D][H] -> [T][D][N][H] */
        for (int64_t t = 0; t < s->T; t++)
            swap01((float *)k->out[0].data + t * N * D * H, s->y + t * N * D * H, N, D, H);
    if (s->yh_perm && k->out[1].data) swap01(k->out[1].data, s->yh, D, N, H);
    if (s->yc_perm && k->out[2].data) swap01(k->out[2].data, s->yc, D, N, H);
    return MP_OK;
}

static const mp_kernel k_rnn = {"onednn:rnn", rnn_prepare, rnn_run, rnn_release};
