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
 * LSTM input_forget, other dtypes, sequence_lens known to be shorter than
 * the sequence). sequence_lens known only at run time are checked each run:
 * when one is shorter than T, that run goes to the portable kernel, which
 * prepare made ready beside the primitive. */
#include "run/dnnl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>
#include <dnnl_debug.h>

extern void omp_set_num_threads(int n);
extern int omp_get_max_threads(void);

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
    X(dnnl_stream_wait)                         \
    X(omp_get_max_threads)                      \
    X(omp_set_num_threads)

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
#define RK_MAXOWN 12

enum { R_IN, R_OUT, R_OWN, R_SCRATCH };

typedef struct rk {
    int gates, gb, dirs, layout;  /* gb: bias gates (4 for LBR GRU) */
    bool lbr, sl_rt;
    int64_t T, N, I, H;
    int threads;
    const int *go;                /* ONNX gate of each oneDNN gate */
    dnnl_primitive_t prim;
    int n;
    dnnl_exec_arg_t ex[RK_MAXARG];
    unsigned char from[RK_MAXARG];
    int idx[RK_MAXARG];
    void *last[RK_MAXARG];
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
    for (int i = 0; i < s->n; i++)
        if (s->ex[i].memory) F.dnnl_memory_destroy(s->ex[i].memory);
    if (s->prim) F.dnnl_primitive_destroy(s->prim);
    for (int i = 0; i < s->n_own; i++) free(s->own[i]);
    free(s);
}

static mp_status rk_arg(mp_kctx *k, rk *s, int arg, const dnnl_memory_desc_t *md, int from, int idx,
                        void *data) {
    if (s->n >= RK_MAXARG) return mp_error(MP_ERR_LIMIT, "node %s: too many oneDNN arguments", k->n->name);
    dnnl_memory_t mem;
    RN(F.dnnl_memory_create(&mem, md, r_eng, from == R_OWN ? data : DNNL_MEMORY_NONE), "memory");
    s->ex[s->n] = (dnnl_exec_arg_t){arg, mem};
    s->from[s->n] = (unsigned char)from;
    s->idx[s->n] = idx;
    s->last[s->n] = from == R_OWN ? data : NULL;
    s->n++;
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

/* Constant weights: converted into a plain ldigo buffer (from), reordered
 * once into the layout the primitive chose (to), bound as `arg`. */
static mp_status bind_weights(mp_kctx *k, rk *s, int arg, const dnnl_memory_desc_t *from, const float *plain,
                              const dnnl_memory_desc_t *to) {
    size_t sz = F.dnnl_memory_desc_get_size(to);
    void *buf = rk_own(s, sz, false);
    if (!buf) return mp_error(MP_ERR_NOMEM, "node %s: out of memory for weights", k->n->name);
    if (F.dnnl_memory_desc_equal(from, to)) {
        memcpy(buf, plain, sz);
        return rk_arg(k, s, arg, to, R_OWN, 0, buf);
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
    return rk_arg(k, s, arg, to, R_OWN, 0, buf);
}

/* --------------------------------------------------------------- prepare */

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
    set_threads(s->threads);
    int64_t D = s->dirs, T = s->T, N = s->N, I = s->I, H = s->H, G = gates;
    bool lstm = gates == 4;
    const mp_rtensor *B = k->n_in > 3 && n->in[3] >= 0 ? &k->in[3] : NULL;
    const mp_rtensor *SL = k->n_in > 4 && n->in[4] >= 0 ? &k->in[4] : NULL;
    const mp_rtensor *H0 = k->n_in > 5 && n->in[5] >= 0 ? &k->in[5] : NULL;
    const mp_rtensor *C0 = lstm && k->n_in > 6 && n->in[6] >= 0 ? &k->in[6] : NULL;
    const mp_rtensor *P = lstm && k->n_in > 7 && n->in[7] >= 0 ? &k->in[7] : NULL;
    bool want_y = k->n_out > 0 && n->out[0] >= 0;
    bool want_yh = k->n_out > 1 && n->out[1] >= 0;
    bool want_yc = lstm && k->n_out > 2 && n->out[2] >= 0;
    if (W->numel != D * G * H * I || R->numel != D * G * H * H || (B && B->numel != D * 2 * G * H) ||
        (H0 && H0->numel != D * N * H) || (C0 && C0->numel != D * N * H) || (P && P->numel != D * 3 * H) ||
        (SL && SL->numel != N))
        return mp_error(MP_ERR_SHAPE, "node %s (%s): an input's size does not match X, W and R (%lld directions, "
                        "hidden %lld)", n->name, n->op, (long long)D, (long long)H);
    if (SL && !SL->data) s->sl_rt = true;

    /* memory descriptors */
    dnnl_memory_desc_t src, dst, wl_any, wi_any, wl_plain, wi_plain, bias, peep, it, it_c, dit, dit_c;
    dnnl_format_tag_t tnc = s->layout ? dnnl_ntc : dnnl_tnc;
    RN(md_tag(&src, 3, (int64_t[]){T, N, I}, tnc), "memory desc");
    RN(md_tag(&dst, 3, (int64_t[]){T, N, D * H}, tnc), "memory desc");
    RN(md_tag(&wl_plain, 5, (int64_t[]){1, D, I, G, H}, dnnl_ldigo), "memory desc");
    RN(md_tag(&wi_plain, 5, (int64_t[]){1, D, H, G, H}, dnnl_ldigo), "memory desc");
    RN(md_tag(&wl_any, 5, (int64_t[]){1, D, I, G, H}, W->data ? dnnl_format_tag_any : dnnl_ldigo), "memory desc");
    RN(md_tag(&wi_any, 5, (int64_t[]){1, D, H, G, H}, R->data ? dnnl_format_tag_any : dnnl_ldigo), "memory desc");
    RN(md_tag(&bias, 4, (int64_t[]){1, D, s->gb, H}, dnnl_ldgo), "memory desc");
    RN(md_tag(&peep, 4, (int64_t[]){1, D, 3, H}, dnnl_ldgo), "memory desc");
    int64_t sd[4] = {1, D, N, H};
    RN(md_tag(&it, 4, sd, dnnl_ldnc), "memory desc");
    it_c = dit = dit_c = it;
    bool has_it = H0 || C0, has_dit = want_yh || want_yc;
    dnnl_rnn_desc_t rd;
    dnnl_rnn_direction_t rdir = D == 2                     ? dnnl_bidirectional_concat
                                : mp_streq(dir, "reverse") ? dnnl_unidirectional_right2left
                                                           : dnnl_unidirectional_left2right;
    const dnnl_memory_desc_t *pit = has_it ? &it : NULL, *pdit = has_dit ? &dit : NULL;
    if (lstm) {
        RN(F.dnnl_lstm_forward_desc_init_v2(&rd, dnnl_forward_inference, rdir, &src, pit, has_it ? &it_c : NULL,
                                            &wl_any, &wi_any, P ? &peep : NULL, &bias, &dst, pdit,
                                            has_dit ? &dit_c : NULL, 0),
           "LSTM descriptor");
    } else if (gates == 3) {
        RN((s->lbr ? F.dnnl_lbr_gru_forward_desc_init : F.dnnl_gru_forward_desc_init)(
               &rd, dnnl_forward_inference, rdir, &src, pit, &wl_any, &wi_any, &bias, &dst, pdit, 0),
           "GRU descriptor");
    } else {
        dnnl_alg_kind_t act;
        rnn_acts(n, gates, (int)D, &act);
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
    ds = F.dnnl_primitive_create(&s->prim, pd);
    const dnnl_memory_desc_t *wl_md = F.dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_WEIGHTS_LAYER);
    const dnnl_memory_desc_t *wi_md = F.dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_WEIGHTS_ITER);
    const dnnl_memory_desc_t *sp_md = F.dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    dnnl_memory_desc_t wl_to = *wl_md, wi_to = *wi_md, sp = *sp_md;
    F.dnnl_primitive_desc_destroy(pd);
    if (ds != dnnl_success) return rfail(k, ds, "RNN primitive");

    /* weights: constant ones converted and reordered now, the others each run */
    mp_status st = MP_OK;
    size_t wl_n = (size_t)(D * I * G * H), wi_n = (size_t)(D * H * G * H);
    float *tmp = malloc(sizeof(float) * (wl_n > wi_n ? wl_n : wi_n));
    if (!tmp) return mp_error(MP_ERR_NOMEM, "node %s: out of memory for weights", n->name);
    if (W->data) {
        to_ldigo(s, tmp, W->data, I);
        st = bind_weights(k, s, DNNL_ARG_WEIGHTS_LAYER, &wl_plain, tmp, &wl_to);
    } else if (!(s->w_rt = rk_own(s, wl_n * sizeof(float), false))) {
        st = mp_error(MP_ERR_NOMEM, "node %s: out of memory", n->name);
    } else {
        st = rk_arg(k, s, DNNL_ARG_WEIGHTS_LAYER, &wl_to, R_OWN, 0, s->w_rt);
    }
    if (!st && R->data) {
        to_ldigo(s, tmp, R->data, H);
        st = bind_weights(k, s, DNNL_ARG_WEIGHTS_ITER, &wi_plain, tmp, &wi_to);
    } else if (!st && !(s->r_rt = rk_own(s, wi_n * sizeof(float), false))) {
        st = mp_error(MP_ERR_NOMEM, "node %s: out of memory", n->name);
    } else if (!st) {
        st = rk_arg(k, s, DNNL_ARG_WEIGHTS_ITER, &wi_to, R_OWN, 0, s->r_rt);
    }
    free(tmp);
    if (st) return st;
    float *bb = rk_own(s, sizeof(float) * (size_t)(D * s->gb * H), true);
    if (!bb) return mp_error(MP_ERR_NOMEM, "node %s: out of memory", n->name);
    if (B && !B->data) s->b_rt = bb;
    else to_bias(s, bb, B ? B->data : NULL);
    if ((st = rk_arg(k, s, DNNL_ARG_BIAS, &bias, R_OWN, 0, bb))) return st;
    if (P) {
        float *pp = rk_own(s, sizeof(float) * (size_t)(D * 3 * H), false);
        if (!pp) return mp_error(MP_ERR_NOMEM, "node %s: out of memory", n->name);
        if (!P->data) s->p_rt = pp;
        else to_peep(s, pp, P->data);
        if ((st = rk_arg(k, s, DNNL_ARG_WEIGHTS_PEEPHOLE, &peep, R_OWN, 0, pp))) return st;
    }

    /* activations: the node's buffers where the layouts agree, ours where not */
    size_t state_b = sizeof(float) * (size_t)(D * N * H);
    bool swap_state = s->layout == 1 && D == 2;
    if ((st = rk_arg(k, s, DNNL_ARG_SRC_LAYER, &src, R_IN, 0, NULL))) return st;
    if (has_it) {
        const mp_rtensor *in[2] = {H0, C0};
        int args[2] = {DNNL_ARG_SRC_ITER, DNNL_ARG_SRC_ITER_C};
        float **perm[2] = {&s->h0, &s->c0};
        for (int i = 0; i < (lstm ? 2 : 1); i++) {
            if (in[i] && !swap_state) {
                st = rk_arg(k, s, args[i], &it, R_IN, 5 + i, NULL);
            } else { /* absent (zeros), or permuted in each run */
                float *buf = rk_own(s, state_b, true);
                if (!buf) return mp_error(MP_ERR_NOMEM, "node %s: out of memory", n->name);
                if (in[i]) *perm[i] = buf;
                st = rk_arg(k, s, args[i], &it, R_OWN, 0, buf);
            }
            if (st) return st;
        }
    }
    if (want_y && (D == 1 || s->layout == 1)) {
        st = rk_arg(k, s, DNNL_ARG_DST_LAYER, &dst, R_OUT, 0, NULL);
    } else {
        s->y = rk_own(s, sizeof(float) * (size_t)(T * N * D * H), false);
        s->y_perm = want_y;
        st = s->y ? rk_arg(k, s, DNNL_ARG_DST_LAYER, &dst, R_OWN, 0, s->y)
                  : mp_error(MP_ERR_NOMEM, "node %s: out of memory", n->name);
    }
    if (st) return st;
    if (has_dit) {
        bool want[2] = {want_yh, want_yc};
        int args[2] = {DNNL_ARG_DST_ITER, DNNL_ARG_DST_ITER_C};
        float **buf[2] = {&s->yh, &s->yc};
        bool *perm[2] = {&s->yh_perm, &s->yc_perm};
        for (int i = 0; i < (lstm ? 2 : 1); i++) {
            if (want[i] && !swap_state) {
                st = rk_arg(k, s, args[i], &dit, R_OUT, 1 + i, NULL);
            } else {
                *buf[i] = rk_own(s, state_b, false);
                *perm[i] = want[i];
                st = *buf[i] ? rk_arg(k, s, args[i], &dit, R_OWN, 0, *buf[i])
                             : mp_error(MP_ERR_NOMEM, "node %s: out of memory", n->name);
            }
            if (st) return st;
        }
    }
    size_t spb = F.dnnl_memory_desc_get_size(&sp);
    if (spb) {
        if ((st = rk_arg(k, s, DNNL_ARG_SCRATCHPAD, &sp, R_SCRATCH, 0, NULL))) return st;
        if (*scratch < spb) *scratch = spb;
    }
    return MP_OK;
}

/* ------------------------------------------------------------------ run */

static mp_status rnn_portable(mp_kctx *k, rk *s) {
    if (!k->n->desc->run) return mp_error(MP_ERR_UNSUPPORTED, "node %s: no portable kernel", k->n->name);
    k->state = s->pstate;
    mp_status st = k->n->desc->run(k);
    k->state = s;
    return st;
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
    set_threads(s->threads);
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
    for (int i = 0; i < s->n; i++) {
        void *p;
        switch (s->from[i]) {
        case R_IN: p = k->in[s->idx[i]].data; break;
        case R_OUT: p = k->out[s->idx[i]].data; break;
        case R_SCRATCH: p = k->scratch; break;
        default: continue;
        }
        if (!p) return mp_error(MP_ERR_USAGE, "node %s (%s): a buffer oneDNN needs is missing", k->n->name, k->n->op);
        if (p != s->last[i]) {
            RN(F.dnnl_memory_set_data_handle(s->ex[i].memory, p), "set data handle");
            s->last[i] = p;
        }
    }
    RN(F.dnnl_primitive_execute(s->prim, r_strm, s->n, s->ex), "execute");
    RN(F.dnnl_stream_wait(r_strm), "wait");
    int64_t D = s->dirs, N = s->N, H = s->H;
    if (s->y_perm && k->out[0].data) /* [T][N][D][H] -> [T][D][N][H] */
        for (int64_t t = 0; t < s->T; t++)
            swap01((float *)k->out[0].data + t * N * D * H, s->y + t * N * D * H, N, D, H);
    if (s->yh_perm && k->out[1].data) swap01(k->out[1].data, s->yh, D, N, H);
    if (s->yc_perm && k->out[2].data) swap01(k->out[2].data, s->yc, D, N, H);
    return MP_OK;
}

static const mp_kernel k_rnn = {"onednn:rnn", rnn_prepare, rnn_run, rnn_release};
