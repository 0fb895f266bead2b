/* Linear algebra: matrix products (MatMul, Gemm, Einsum), their quantized
 * forms, quantization, and the recurrent layers (RNN, GRU, LSTM).
 *
 * Counting (GUIDE §2): a MAC is one multiply-accumulate of a dot product;
 * a matrix product of [M, K] x [K, N] is M*K*N MACs and 2*M*K*N FLOPs.
 * Integer products (MatMulInteger, QLinearMatMul) count the same MACs and
 * report 2*MACs as FLOPs: those are integer operations, documented as such
 * in docs/COUNTING.md. Each op's comment states its shape and cost rule. */
#include "ops/kernel.h"
#include "ops/scalar.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------ */
/* helpers                                                             */
/* ------------------------------------------------------------------ */

/* Required input i: NULL (with *st set) when omitted or of absurd rank. */
static mp_value *la_in(mp_ctx *c, int i, mp_status *st) {
    mp_value *v = NULL;
    *st = mp_need_in(c, i, NULL, &v);
    return *st ? NULL : v;
}

/* flops = 2 * macs (+ extra), flagging overflow. */
static void la_set(mp_cost *k, uint64_t macs, uint64_t extra) {
    bool ovf = false;
    k->macs = macs;
    k->flops = mp_uadd(mp_umul(2, macs, &ovf), extra, &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* ------------------------------------------------------------------ */
/* MatMul, MatMulInteger, QLinearMatMul                                */
/* ------------------------------------------------------------------ */

/* numpy matmul of inputs ia and ib into output 0 of dtype dt. A 1-D A [K]
 * is promoted to [1, K] and a 1-D B [K] to [K, 1], the promoted dim removed
 * from the output; batch dims (all but the last two) broadcast aligned from
 * the right. Output: batch + [M] (if A is >= 2-D) + [N] (if B is >= 2-D).
 * The inner dims K must agree. */
static mp_status la_matmul_infer(mp_ctx *c, int ia, int ib, int dt) {
    mp_status st = MP_OK;
    mp_value *a = la_in(c, ia, &st), *b;
    if (!a) return st;
    if (!(b = la_in(c, ib, &st))) return st;
    if (a->rank == 0 || b->rank == 0)
        return mp_fail(c, "matmul of a scalar ('%s' rank %d, '%s' rank %d)", a->name, a->rank,
                       b->name, b->rank);
    if (a->rank < 0 || b->rank < 0) return mp_set_out(c, 0, dt, -1, NULL);
    int ra = a->rank, rb = b->rank;
    int64_t ka = a->dims[ra - 1], kb = rb >= 2 ? b->dims[rb - 2] : b->dims[0], kk;
    if (!mp_dim_merge(ka, kb, &kk))
        return mp_fail(c, "inner dims differ: '%s' has K=%lld, '%s' has K=%lld", a->name,
                       (long long)ka, b->name, (long long)kb);
    mp_value ta = {0}, tb = {0};
    ta.name = a->name;
    ta.rank = ra > 2 ? ra - 2 : 0;
    ta.dims = a->dims;
    tb.name = b->name;
    tb.rank = rb > 2 ? rb - 2 : 0;
    tb.dims = b->dims;
    int64_t od[MP_MAX_RANK + 2];
    int r;
    st = mp_broadcast(c, &ta, &tb, &r, od);
    if (st) return st;
    if (ra >= 2) od[r++] = a->dims[ra - 2];
    if (rb >= 2) od[r++] = b->dims[rb - 1];
    return mp_set_out(c, 0, dt, r, od);
}

/* MACs of a matmul = (output elements) * K, which is
 * prod(broadcast batch) * M * N * K; FLOPs = 2 * MACs. K is read from A's
 * last dim, or B's contracted dim when A's is unknown. */
static void la_matmul_cost_io(mp_ctx *c, mp_cost *k, int ia, int ib) {
    mp_value *a = mp_in(c, ia), *b = mp_in(c, ib);
    uint64_t n = mp_cnumel(mp_out(c, 0), k);
    int64_t kk = MP_DIM_ANON;
    if (a && a->rank >= 1) kk = a->dims[a->rank - 1];
    if (kk < 0 && b && b->rank >= 1) kk = b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0];
    int64_t f[1] = {kk};
    uint64_t kf = mp_cost_prod(k, f, 1);
    bool ovf = false;
    la_set(k, mp_umul(n, kf, &ovf), 0);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* MatMul (1): numpy matmul (see la_matmul_infer), dtype of A.
 * MACs = prod(batch) * M * K * N; FLOPs = 2 * MACs. Either input may be a
 * weight. */
static mp_status matmul_infer(mp_ctx *c) {
    mp_value *a = mp_in(c, 0);
    return la_matmul_infer(c, 0, 1, a ? a->dtype : MP_DT_UNDEFINED);
}

static void matmul_cost(mp_ctx *c, mp_cost *k) { la_matmul_cost_io(c, k, 0, 1); }

/* MatMulInteger (10): A, B, optional zero points: numpy matmul, int32
 * output. MACs as MatMul; FLOPs = 2 * MACs (integer operations; the
 * zero-point subtractions are not counted). B is the (quantized) weight. */
static mp_status matmul_integer_infer(mp_ctx *c) {
    return la_matmul_infer(c, 0, 1, MP_DT_INT32);
}

/* QLinearMatMul (10): a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp:
 * numpy matmul of a and b, dtype of y_zero_point (else of a). MACs as
 * MatMul; FLOPs = 2 * MACs (integer operations; requantization is not
 * counted). b (input 3) is the quantized weight; scales and zero points are
 * not parameters. */
static mp_status qlinear_matmul_infer(mp_ctx *c) {
    mp_value *a = mp_in(c, 0), *yz = mp_in(c, 7);
    int dt = yz ? yz->dtype : a ? a->dtype : MP_DT_UNDEFINED;
    return la_matmul_infer(c, 0, 3, dt);
}

static void qlinear_matmul_cost(mp_ctx *c, mp_cost *k) { la_matmul_cost_io(c, k, 0, 3); }

/* ------------------------------------------------------------------ */
/* Gemm                                                                */
/* ------------------------------------------------------------------ */

/* M, K, N of a Gemm from A and B (transA/transB applied); dims < 0 when
 * unknown; false when a rank is not 2. */
static bool la_gemm_dims(mp_ctx *c, int64_t *m, int64_t *ka, int64_t *kb, int64_t *n) {
    mp_value *a = mp_in(c, 0), *b = mp_in(c, 1);
    bool ta = mp_attr_i(c->n, "transA", 0) != 0, tb = mp_attr_i(c->n, "transB", 0) != 0;
    *m = *ka = *kb = *n = MP_DIM_ANON;
    if (!a || !b) return false;
    if ((a->rank >= 0 && a->rank != 2) || (b->rank >= 0 && b->rank != 2)) return false;
    if (a->rank == 2) {
        *m = a->dims[ta ? 1 : 0];
        *ka = a->dims[ta ? 0 : 1];
    }
    if (b->rank == 2) {
        *kb = b->dims[tb ? 1 : 0];
        *n = b->dims[tb ? 0 : 1];
    }
    return true;
}

/* Gemm (1; C optional since 11): Y = alpha * A' * B' + beta * C with A'
 * = transA ? A^T : A ([M, K]) and B' = transB ? B^T : B ([K, N]); Y is
 * [M, N] of A's dtype; C must broadcast (from the right) to [M, N].
 * MACs = M * K * N; FLOPs = 2 * MACs + M * N when C is present (the
 * alpha and beta scalings are not counted, as in DeepSpeed). B and C are
 * the weight and bias. */
static mp_status gemm_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *a = la_in(c, 0, &st), *b, *cc;
    if (!a) return st;
    if (!(b = la_in(c, 1, &st))) return st;
    int64_t m, ka, kb, n, kk;
    if (!la_gemm_dims(c, &m, &ka, &kb, &n))
        return mp_fail(c, "A and B must be 2-D (ranks %d and %d)", a->rank, b->rank);
    if (!mp_dim_merge(ka, kb, &kk))
        return mp_fail(c, "inner dims differ: '%s' gives K=%lld, '%s' gives K=%lld", a->name,
                       (long long)ka, b->name, (long long)kb);
    int64_t od[2] = {m, n};
    if ((cc = mp_in(c, 2)) != NULL && cc->rank >= 0) {
        if (cc->rank > 2) return mp_fail(c, "C has rank %d, above 2", cc->rank);
        if ((st = mp_gemm_c_bcast(c, cc, od))) return st;
    }
    return mp_set_out(c, 0, a->dtype, 2, od);
}

static void gemm_cost(mp_ctx *c, mp_cost *k) {
    int64_t m, ka, kb, n, kk;
    if (!la_gemm_dims(c, &m, &ka, &kb, &n) || !mp_dim_merge(ka, kb, &kk)) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    mp_value *y = mp_out(c, 0);
    if (y && y->rank == 2) { /* the output may know M or N from C */
        if (m < 0) m = y->dims[0];
        if (n < 0) n = y->dims[1];
    }
    int64_t f[3] = {m, kk, n}, mn[2] = {m, n};
    uint64_t macs = mp_cost_prod(k, f, 3);
    uint64_t bias = mp_in(c, 2) ? mp_cost_prod(k, mn, 2) : 0;
    la_set(k, macs, bias);
}

/* ------------------------------------------------------------------ */
/* Einsum                                                              */
/* ------------------------------------------------------------------ */

#define LA_MAX_OPS 64

typedef struct la_term {
    char lab[MP_MAX_RANK];
    int n;      /* letters */
    int ell;    /* letters before the ellipsis; -1 without one */
} la_term;

typedef struct la_einsum {
    int n_ops;
    la_term in[LA_MAX_OPS];
    la_term out;
    int64_t ext[128];     /* extent of each letter */
    bool seen[128];       /* letter appears in an input */
    int count[128];       /* occurrences over all inputs */
    int ell_rank;         /* broadcast ellipsis rank; -1 unknown */
    int64_t ell[MP_MAX_RANK];
    int out_rank;         /* -1 unknown */
    int64_t out_dims[MP_MAX_RANK];
} la_einsum;

static bool la_term_parse(const char *b, const char *e, la_term *t, char *err, size_t en) {
    t->n = 0;
    t->ell = -1;
    for (const char *q = b; q < e; q++) {
        if (*q == ' ') continue;
        if (*q == '.') {
            if (e - q < 3 || q[1] != '.' || q[2] != '.' || t->ell >= 0) {
                snprintf(err, en, "malformed ellipsis in equation");
                return false;
            }
            t->ell = t->n;
            q += 2;
            continue;
        }
        if (!isalpha((unsigned char)*q) || (unsigned char)*q >= 128) {
            snprintf(err, en, "invalid character '%c' in equation", *q);
            return false;
        }
        if (t->n >= MP_MAX_RANK) {
            snprintf(err, en, "too many indices in one term");
            return false;
        }
        t->lab[t->n++] = *q;
    }
    return true;
}

/* Broadcast-merge dim d into *cur (1 stretches; unknowns keep a symbol). */
static bool la_bmerge(int64_t *cur, int64_t d) {
    if (*cur == d) return true;
    if (*cur >= 0 && d >= 0) {
        if (*cur == 1) {
            *cur = d;
            return true;
        }
        return d == 1;
    }
    if (*cur < 0 && d >= 0) {
        if (d != 1) *cur = d;
        return true;
    }
    if (d < 0 && *cur >= 0) {
        if (*cur == 1) *cur = d;
        return true;
    }
    if (*cur == MP_DIM_ANON) *cur = d;
    return true;
}

/* Parse the equation and bind extents. Implicit output (no "->"): the
 * ellipsis dims, then the letters used exactly once, in ASCII order. A
 * letter's extents must agree across operands (1 broadcasts); ellipsis dims
 * broadcast aligned from the right. */
static bool la_einsum_parse(mp_ctx *c, la_einsum *E, char *err, size_t en) {
    const char *eq = mp_attr_s(c->n, "equation", NULL);
    memset(E, 0, sizeof *E);
    if (!eq) {
        snprintf(err, en, "attribute 'equation' is required");
        return false;
    }
    const char *arrow = strstr(eq, "->");
    const char *lhs_end = arrow ? arrow : eq + strlen(eq);
    const char *p = eq;
    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(lhs_end - p));
        const char *te = comma ? comma : lhs_end;
        if (E->n_ops >= LA_MAX_OPS) {
            snprintf(err, en, "more than %d operands", LA_MAX_OPS);
            return false;
        }
        if (!la_term_parse(p, te, &E->in[E->n_ops], err, en)) return false;
        E->n_ops++;
        if (!comma) break;
        p = comma + 1;
    }
    if (E->n_ops != c->n->n_in) {
        snprintf(err, en, "equation has %d operands but the node has %d inputs", E->n_ops,
                 c->n->n_in);
        return false;
    }
    bool any_ell = false, ell_unknown = false;
    bool bound[128] = {false}; /* a letter's extent taken from an operand */
    E->ell_rank = 0;
    for (int i = 0; i < MP_MAX_RANK; i++) E->ell[i] = 1;
    for (int i = 0; i < E->n_ops; i++) {
        la_term *t = &E->in[i];
        mp_value *x = mp_in(c, i);
        if (!x) {
            snprintf(err, en, "input %d is missing", i);
            return false;
        }
        for (int j = 0; j < t->n; j++) {
            unsigned char l = (unsigned char)t->lab[j];
            E->count[l]++;
            if (!E->seen[l]) E->ext[l] = MP_DIM_ANON;
            E->seen[l] = true;
        }
        if (t->ell >= 0) any_ell = true;
        if (x->rank < 0) {
            if (t->ell >= 0) ell_unknown = true;
            continue;
        }
        if (x->rank > MP_MAX_RANK) {
            snprintf(err, en, "input %d has rank %d, above the limit", i, x->rank);
            return false;
        }
        int ne = x->rank - t->n;
        if (ne < 0 || (t->ell < 0 && ne != 0)) {
            snprintf(err, en, "operand %d ('%s') has rank %d but the equation gives it %d indices",
                     i, x->name, x->rank, t->n);
            return false;
        }
        for (int j = 0; j < t->n; j++) {
            unsigned char l = (unsigned char)t->lab[j];
            int pos = (t->ell < 0 || j < t->ell) ? j : j + ne;
            int64_t d = x->dims[pos];
            if (!bound[l]) {
                /* the first extent given: an index of size 1 everywhere is 1 */
                bound[l] = true;
                E->ext[l] = d;
                continue;
            }
            if (!la_bmerge(&E->ext[l], d)) {
                snprintf(err, en, "index '%c' has extent %lld in '%s' but %lld elsewhere", l,
                         (long long)d, x->name, (long long)E->ext[l]);
                return false;
            }
        }
        if (ne > E->ell_rank) {
            /* widen: shift the existing ellipsis dims right */
            int sh = ne - E->ell_rank;
            for (int q = E->ell_rank - 1; q >= 0; q--) E->ell[q + sh] = E->ell[q];
            for (int q = 0; q < sh; q++) E->ell[q] = 1;
            E->ell_rank = ne;
        }
        for (int q = 0; q < ne; q++) {
            int64_t *cur = &E->ell[E->ell_rank - ne + q];
            int64_t d = x->dims[t->ell + q];
            if (!la_bmerge(cur, d)) {
                snprintf(err, en, "ellipsis dims of '%s' do not broadcast", x->name);
                return false;
            }
        }
    }
    if (ell_unknown) E->ell_rank = -1;
    /* output term */
    la_term *o = &E->out;
    if (arrow) {
        if (!la_term_parse(arrow + 2, arrow + 2 + strlen(arrow + 2), o, err, en)) return false;
        bool dup[128] = {false};
        for (int j = 0; j < o->n; j++) {
            unsigned char l = (unsigned char)o->lab[j];
            if (!E->seen[l]) {
                snprintf(err, en, "output index '%c' is not in any input", l);
                return false;
            }
            if (dup[l]) {
                snprintf(err, en, "output index '%c' repeats", l);
                return false;
            }
            dup[l] = true;
        }
    } else {
        o->n = 0;
        o->ell = any_ell ? 0 : -1;
        for (int l = 0; l < 128; l++)
            if (E->seen[l] && E->count[l] == 1) o->lab[o->n++] = (char)l;
    }
    /* output dims */
    int er = o->ell >= 0 ? E->ell_rank : 0;
    if (er < 0) {
        E->out_rank = -1;
        return true;
    }
    if (o->n + er > MP_MAX_RANK) {
        snprintf(err, en, "output rank %d exceeds the limit", o->n + er);
        return false;
    }
    int r = 0;
    for (int j = 0; j <= o->n; j++) {
        if (j == o->ell)
            for (int q = 0; q < er; q++) E->out_dims[r++] = E->ell[q];
        if (j < o->n) E->out_dims[r++] = E->ext[(unsigned char)o->lab[j]];
    }
    E->out_rank = r;
    return true;
}

/* Einsum (12): output per the equation (explicit after "->", else
 * implicit), dtype of input 0.
 * Cost with >= 2 operands: MACs = the product of the extents of every
 * distinct index of the inputs (and of the broadcast ellipsis dims), i.e.
 * one multiply-accumulate per point of the full index space, as a single
 * contraction; FLOPs = 2 * MACs. "bij,bjk->bik": B*I*J*K MACs.
 * One operand (transpose, diagonal, trace, sum): 0 MACs; FLOPs = input
 * elements when some index (or ellipsis dim) is summed away, else 0. */
static mp_status einsum_infer(mp_ctx *c) {
    la_einsum *E = malloc(sizeof *E);
    if (!E) return mp_error(MP_ERR_NOMEM, "out of memory");
    char err[256];
    mp_status st;
    if (!la_einsum_parse(c, E, err, sizeof err))
        st = mp_fail(c, "%s", err);
    else
        st = mp_set_out(c, 0, mp_in(c, 0)->dtype, E->out_rank, E->out_dims);
    free(E);
    return st;
}

static void einsum_cost(mp_ctx *c, mp_cost *k) {
    la_einsum *E = malloc(sizeof *E);
    char err[256];
    if (!E || !la_einsum_parse(c, E, err, sizeof err)) {
        k->flags |= MP_COST_UNKNOWN;
        free(E);
        return;
    }
    k->macs = k->flops = 0;
    if (E->n_ops >= 2) {
        int64_t f[128 + MP_MAX_RANK];
        int nf = 0;
        for (int l = 0; l < 128; l++)
            if (E->seen[l]) f[nf++] = E->ext[l];
        if (E->ell_rank < 0)
            f[nf++] = MP_DIM_ANON;
        else
            for (int q = 0; q < E->ell_rank; q++) f[nf++] = E->ell[q];
        la_set(k, mp_cost_prod(k, f, nf), 0);
        free(E);
        return;
    }
    bool in_out[128] = {false}, reduces = false;
    for (int j = 0; j < E->out.n; j++) in_out[(unsigned char)E->out.lab[j]] = true;
    for (int l = 0; l < 128; l++)
        if (E->seen[l] && !in_out[l]) reduces = true;
    if (E->in[0].ell >= 0 && E->out.ell < 0 && E->ell_rank != 0) reduces = true;
    if (reduces) k->flops = mp_cnumel(mp_in(c, 0), k);
    free(E);
}

/* ------------------------------------------------------------------ */
/* Quantization                                                        */
/* ------------------------------------------------------------------ */

/* QuantizeLinear (10; axis 13; output_dtype 21): y = saturate(round(x /
 * scale) + zero_point), shaped like x, dtype of y_zero_point, else the
 * output_dtype attribute, else uint8. FLOPs = 2 per element (divide, add;
 * rounding and saturation not counted). Scales and zero points are not
 * parameters. */
static mp_status quantize_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = la_in(c, 0, &st);
    if (!x) return st;
    if (!la_in(c, 1, &st)) return st;
    mp_value *zp = mp_in(c, 2);
    int64_t dt = zp ? zp->dtype : mp_attr_i(c->n, "output_dtype", 0);
    if (dt <= 0 || dt >= MP_DT_COUNT) dt = MP_DT_UINT8;
    return mp_set_out(c, 0, (int)dt, x->rank, x->dims);
}

/* DequantizeLinear (10; axis 13): y = (x - zero_point) * scale, shaped like
 * x, dtype of x_scale (fp32 when unknown). FLOPs = 2 per element
 * (subtract, multiply). Input 0 is a quantized weight when it is an
 * initializer. */
static mp_status dequantize_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = la_in(c, 0, &st), *s;
    if (!x) return st;
    if (!(s = la_in(c, 1, &st))) return st;
    int64_t dt = mp_attr_i(c->n, "output_dtype", 0);
    if (dt <= 0 || dt >= MP_DT_COUNT) dt = s->dtype ? s->dtype : MP_DT_FLOAT;
    return mp_set_out(c, 0, (int)dt, x->rank, x->dims);
}

static void la_cost_2_per_elem(mp_ctx *c, mp_cost *k) {
    bool ovf = false;
    k->macs = 0;
    k->flops = mp_umul(2, mp_cnumel(mp_in(c, 0), k), &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* DynamicQuantizeLinear (11): y uint8 shaped like x, y_scale fp32 scalar,
 * y_zero_point uint8 scalar. FLOPs = 4 per element: min and max (2, to
 * find the range) and divide and add (2, to quantize). */
static mp_status dyn_quantize_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = la_in(c, 0, &st);
    if (!x) return st;
    st = mp_set_out(c, 0, MP_DT_UINT8, x->rank, x->dims);
    if (!st) st = mp_set_out(c, 1, MP_DT_FLOAT, 0, NULL);
    if (!st) st = mp_set_out(c, 2, MP_DT_UINT8, 0, NULL);
    return st;
}

static void dyn_quantize_cost(mp_ctx *c, mp_cost *k) {
    bool ovf = false;
    k->macs = 0;
    k->flops = mp_umul(4, mp_cnumel(mp_in(c, 0), k), &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* ------------------------------------------------------------------ */
/* RNN, GRU, LSTM                                                      */
/* ------------------------------------------------------------------ */

typedef struct la_rnn {
    int64_t seq, batch, input, hidden;
    int dirs;
    int layout;
} la_rnn;

/* Dims of a recurrent layer from X [seq, batch, input] (layout 1: [batch,
 * seq, input]), W [dirs, gates*hidden, input], R [dirs, gates*hidden,
 * hidden] and the hidden_size and direction attributes. */
static bool la_rnn_shape(mp_ctx *c, int gates, la_rnn *s, char *err, size_t en) {
    mp_value *x = mp_in(c, 0), *w = mp_in(c, 1), *r = mp_in(c, 2);
    s->seq = s->batch = s->input = s->hidden = MP_DIM_ANON;
    if (!x || !w || !r) {
        snprintf(err, en, "inputs X, W and R are required");
        return false;
    }
    const char *dir = mp_attr_s(c->n, "direction", "forward");
    if (strcmp(dir, "forward") == 0 || strcmp(dir, "reverse") == 0) {
        s->dirs = 1;
    } else if (strcmp(dir, "bidirectional") == 0) {
        s->dirs = 2;
    } else {
        snprintf(err, en, "unknown direction '%s'", dir);
        return false;
    }
    int64_t layout = mp_attr_i(c->n, "layout", 0);
    if (layout != 0 && layout != 1) {
        snprintf(err, en, "layout must be 0 or 1, not %lld", (long long)layout);
        return false;
    }
    s->layout = (int)layout;
    if ((x->rank >= 0 && x->rank != 3) || (w->rank >= 0 && w->rank != 3) ||
        (r->rank >= 0 && r->rank != 3)) {
        snprintf(err, en, "X, W and R must be 3-D (ranks %d, %d, %d)", x->rank, w->rank, r->rank);
        return false;
    }
    if (x->rank == 3) {
        s->seq = x->dims[layout ? 1 : 0];
        s->batch = x->dims[layout ? 0 : 1];
        s->input = x->dims[2];
    }
    const mp_attr *hs = mp_node_attr(c->n, "hidden_size");
    if (hs) {
        if (hs->i <= 0 || hs->i > INT64_MAX / 8) {
            snprintf(err, en, "hidden_size %lld is invalid", (long long)hs->i);
            return false;
        }
        s->hidden = hs->i;
    }
    if (r->rank == 3 && !mp_dim_merge(s->hidden, r->dims[2], &s->hidden)) {
        snprintf(err, en, "R '%s' has hidden size %lld, expected %lld", r->name,
                 (long long)r->dims[2], (long long)s->hidden);
        return false;
    }
    const mp_value *wr[2] = {w, r};
    for (int i = 0; i < 2; i++) {
        const mp_value *v = wr[i];
        if (v->rank != 3) continue;
        if (v->dims[0] >= 0 && v->dims[0] != s->dirs) {
            snprintf(err, en, "'%s' has %lld directions, expected %d", v->name,
                     (long long)v->dims[0], s->dirs);
            return false;
        }
        int64_t gh = v->dims[1];
        if (gh >= 0 && gh % gates != 0) {
            snprintf(err, en, "'%s' has %lld gate rows, not a multiple of %d", v->name,
                     (long long)gh, gates);
            return false;
        }
        if (gh >= 0 && s->hidden < 0) s->hidden = gh / gates;
        if (gh >= 0 && s->hidden >= 0 && gh != gates * s->hidden) {
            snprintf(err, en, "'%s' has %lld gate rows, expected %d x %lld", v->name,
                     (long long)gh, gates, (long long)s->hidden);
            return false;
        }
    }
    if (w->rank == 3 && !mp_dim_merge(s->input, w->dims[2], &s->input)) {
        snprintf(err, en, "W '%s' has input size %lld but X has %lld", w->name,
                 (long long)w->dims[2], (long long)s->input);
        return false;
    }
    return true;
}

/* Shapes (RNN 7/14, GRU 7/14, LSTM 7/14): Y [seq, dirs, batch, hidden]
 * (layout 1: [batch, seq, dirs, hidden]); Y_h and Y_c [dirs, batch,
 * hidden] (layout 1: [batch, dirs, hidden]); dtype of X. */
static mp_status la_rnn_infer(mp_ctx *c, int gates) {
    la_rnn s;
    char err[256];
    if (!la_rnn_shape(c, gates, &s, err, sizeof err)) return mp_fail(c, "%s", err);
    int dt = mp_in(c, 0)->dtype;
    int64_t y0[4] = {s.seq, s.dirs, s.batch, s.hidden};
    int64_t y1[4] = {s.batch, s.seq, s.dirs, s.hidden};
    int64_t h0[3] = {s.dirs, s.batch, s.hidden};
    int64_t h1[3] = {s.batch, s.dirs, s.hidden};
    mp_status st = mp_set_out(c, 0, dt, 4, s.layout ? y1 : y0);
    for (int o = 1; o < c->n->n_out && !st; o++) st = mp_set_out(c, o, dt, 3, s.layout ? h1 : h0);
    return st;
}

/* Cost per step, direction and batch row:
 *   MACs  = gates * hidden * (input + hidden)   (x_t W^T and h_{t-1} R^T)
 *   FLOPs = 2 * MACs
 *         + 2 * gates * hidden when B is present (the Wb and Rb adds)
 *         + per_unit * hidden (gate element-wise work, per hidden unit):
 *     RNN  2:  1 add (x and h parts) + 1 tanh
 *     GRU  11: 3 adds (x and h parts of z, r, h~) + 2 sigmoid + 1 tanh
 *              + 1 mul (r applied to h) + 4 for H = (1 - z) h~ + z H_{t-1}
 *              (1 sub, 2 mul, 1 add)
 *     LSTM 13: 4 adds (x and h parts of i, f, c~, o) + 3 sigmoid + 2 tanh
 *              + 3 for C = f C_{t-1} + i c~ (2 mul, 1 add) + 1 mul for
 *              H = o tanh(C); peepholes P add 6 (3 mul, 3 add).
 * Totals multiply by seq * dirs * batch. The full sequence length is used
 * (sequence_lens is ignored): with sequence_lens the figure is an upper
 * bound (MP_COST_BOUND). */
static void la_rnn_cost(mp_ctx *c, mp_cost *k, int gates, int per_unit) {
    la_rnn s;
    char err[256];
    if (!la_rnn_shape(c, gates, &s, err, sizeof err)) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    int64_t ih = mp_dim_add(s.input, s.hidden);
    int64_t rows[4] = {s.seq, s.dirs, s.batch, s.hidden};
    uint64_t units = mp_cost_prod(k, rows, 4);  /* hidden units over all steps */
    int64_t f[2] = {gates, ih};
    bool ovf = false;
    uint64_t macs = mp_umul(units, mp_cost_prod(k, f, 2), &ovf);
    uint64_t ew = (uint64_t)per_unit + (mp_in(c, 3) ? 2u * (uint64_t)gates : 0);
    if (mp_in(c, 7) && gates == 4) ew += 6;
    uint64_t extra = mp_umul(units, ew, &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
    la_set(k, macs, extra);
    if (mp_in(c, 4)) k->flags |= MP_COST_BOUND;
}

static mp_status rnn_infer(mp_ctx *c) { return la_rnn_infer(c, 1); }
static mp_status gru_infer(mp_ctx *c) { return la_rnn_infer(c, 3); }
static mp_status lstm_infer(mp_ctx *c) { return la_rnn_infer(c, 4); }
static void rnn_cost(mp_ctx *c, mp_cost *k) { la_rnn_cost(c, k, 1, 2); }
static void gru_cost(mp_ctx *c, mp_cost *k) { la_rnn_cost(c, k, 3, 11); }
static void lstm_cost(mp_ctx *c, mp_cost *k) { la_rnn_cost(c, k, 4, 13); }

/* ------------------------------------------------------------------ */
/* kernels                                                             */
/* ------------------------------------------------------------------ */
/* Reference kernels: fp32 products through the blocked GEMM of
 * kernel_util.c, everything else (integer and quantized products, other
 * float types, Einsum) in double; integer products are exact in double up
 * to 2^53. The recurrent layers compute in fp32 on the GEMM (below).
 * oneDNN serves MatMul, Gemm and the recurrent layers in real runs. */

static double *lak_load(mp_kctx *k, const mp_rtensor *t, mp_status *st) {
    double *p = malloc(sizeof(double) * (size_t)(t->numel > 0 ? t->numel : 1));
    if (!p) *st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    else mp_kconvert(p, MP_DT_DOUBLE, t->data, t->dtype, t->numel);
    return p;
}

static double *lak_buf(mp_kctx *k, int64_t n, mp_status *st) {
    double *p = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!p) *st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    return p;
}

static mp_status lak_matmul_run(mp_kctx *k) {
    const mp_rtensor *a = &k->in[0], *b = &k->in[1];
    mp_rtensor *y = &k->out[0];
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    if (a->dtype == MP_DT_FLOAT && b->dtype == MP_DT_FLOAT && y->dtype == MP_DT_FLOAT) {
        mp_kmatmul_par(k, a, b, y, true, a->data, b->data, y->data, false, false);
        return MP_OK;
    }
    mp_status st = MP_OK;
    double *A = lak_load(k, a, &st), *B = st ? NULL : lak_load(k, b, &st), *Y = st ? NULL : lak_buf(k, y->numel, &st);
    if (!st) {
        mp_kmatmul(a, b, y, false, A, B, Y, false, false);
        mp_kconvert(y->data, y->dtype, Y, MP_DT_DOUBLE, y->numel);
    }
    free(A), free(B), free(Y);
    return st;
}

/* Subtract a zero point from t (in place, as doubles): scalar, or one per
 * row (axis -2 of A) / per column (last axis of B). */
static void lak_sub_zp(double *v, const mp_rtensor *t, const mp_rtensor *zp, bool per_row) {
    if (!zp || !zp->data) return;
    int r = t->rank;
    int64_t rows = r >= 2 ? t->dims[r - 2] : 1, cols = t->dims[r - 1];
    for (int64_t e = 0; e < t->numel; e++) {
        int64_t i = zp->numel <= 1 ? 0 : per_row ? (e / cols) % rows : e % cols;
        v[e] -= mp_kget_f(zp->data, zp->dtype, i);
    }
}

static mp_status lak_matmul_integer(mp_kctx *k) {
    const mp_rtensor *a = &k->in[0], *b = &k->in[1];
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    double *A = lak_load(k, a, &st), *B = st ? NULL : lak_load(k, b, &st), *Y = st ? NULL : lak_buf(k, y->numel, &st);
    if (!st) {
        lak_sub_zp(A, a, mp_kin(k, 2), true);
        lak_sub_zp(B, b, mp_kin(k, 3), false);
        mp_kmatmul(a, b, y, false, A, B, Y, false, false);
        mp_kconvert(y->data, y->dtype, Y, MP_DT_DOUBLE, y->numel);
    }
    free(A), free(B), free(Y);
    return st;
}

static mp_status lak_qlinear_matmul(mp_kctx *k) {
    const mp_rtensor *a = &k->in[0], *as = &k->in[1], *b = &k->in[3], *bs = &k->in[4], *ys = &k->in[6];
    const mp_rtensor *yz = mp_kin(k, 7);
    mp_rtensor *y = &k->out[0];
    mp_status st = MP_OK;
    double *A = lak_load(k, a, &st), *B = st ? NULL : lak_load(k, b, &st), *Y = st ? NULL : lak_buf(k, y->numel, &st);
    if (!st) {
        lak_sub_zp(A, a, mp_kin(k, 2), true);
        lak_sub_zp(B, b, mp_kin(k, 5), false);
        /* scales: per tensor, or per row of A / per column of B */
        int ar = a->rank, br = b->rank;
        int64_t rows = ar >= 2 ? a->dims[ar - 2] : 1, cols = b->dims[br - 1];
        for (int64_t e = 0; e < a->numel; e++)
            A[e] *= mp_kget_f(as->data, as->dtype, as->numel <= 1 ? 0 : (e / a->dims[ar - 1]) % rows);
        for (int64_t e = 0; e < b->numel; e++)
            B[e] *= mp_kget_f(bs->data, bs->dtype, bs->numel <= 1 ? 0 : e % cols);
        mp_kmatmul(a, b, y, false, A, B, Y, false, false);
        int64_t ycols = y->rank ? y->dims[y->rank - 1] : 1;
        for (int64_t e = 0; e < y->numel; e++) {
            int64_t c = e % ycols;
            double s = mp_kget_f(ys->data, ys->dtype, ys->numel <= 1 ? 0 : c);
            double z = yz ? mp_kget_f(yz->data, yz->dtype, yz->numel <= 1 ? 0 : c) : 0;
            mp_kquant_store(y->data, y->dtype, e, Y[e] / s + z);
        }
    }
    free(A), free(B), free(Y);
    return st;
}

mp_status mp_kgemm_run(mp_kctx *k) {
    const mp_rtensor *a = &k->in[0], *b = &k->in[1], *c = mp_kin(k, 2);
    mp_rtensor *y = &k->out[0];
    bool ta = mp_attr_i(k->n, "transA", 0) != 0, tb = mp_attr_i(k->n, "transB", 0) != 0;
    double alpha = mp_attr_f(k->n, "alpha", 1.0), beta = mp_attr_f(k->n, "beta", 1.0);
    int64_t M = y->dims[0], N = y->dims[1], K = ta ? a->dims[0] : a->dims[1];
    int64_t ars = ta ? 1 : K, acs = ta ? M : 1, brs = tb ? 1 : N, bcs = tb ? K : 1;
    mp_status st = MP_OK;
    double *Y = NULL;
    if (a->dtype == MP_DT_FLOAT && b->dtype == MP_DT_FLOAT && y->dtype == MP_DT_FLOAT) {
        mp_kgemm_f32_par(k, M, N, K, a->data, ars, acs, b->data, brs, bcs, y->data, N);
    } else {
        double *A = lak_load(k, a, &st), *B = st ? NULL : lak_load(k, b, &st);
        Y = st ? NULL : lak_buf(k, y->numel, &st);
        if (!st) mp_kgemm_f64(M, N, K, A, ars, acs, B, brs, bcs, Y, N, false);
        free(A), free(B);
    }
    if (!st) {
        /* y = alpha * y + beta * C (C broadcast to [M, N]) */
        int64_t cr = c && c->rank == 2 ? c->dims[0] : 1;
        int64_t cc = c && c->rank >= 1 ? c->dims[c->rank - 1] : 1;
        if (c && (c->rank > 2 || (cr != 1 && cr != M) || (cc != 1 && cc != N))) {
            free(Y);
            return mp_kfail(k, MP_ERR_SHAPE, "C does not broadcast to [%lld, %lld]", (long long)M, (long long)N);
        }
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                int64_t e = i * N + j;
                double v = Y ? Y[e] : mp_kget_f(y->data, y->dtype, e);
                v *= alpha;
                if (c) v += beta * mp_kget_f(c->data, c->dtype, (cr == 1 ? 0 : i) * cc + (cc == 1 ? 0 : j));
                mp_kset_f(y->data, y->dtype, e, v);
            }
    }
    free(Y);
    return st;
}

/* A strided walk over n letters (row-major in the order given): pack
 * copies src (strides sst) into dst contiguously; !pack scatters a
 * contiguous src into dst (strides sst). */
static void ein_copy(float *dst, const float *src, int n, const int64_t *ext, const int64_t *sst, bool pack) {
    int64_t total = 1, idx[MP_MAX_RANK] = {0}, off = 0;
    for (int i = 0; i < n; i++) total *= ext[i];
    for (int64_t e = 0; e < total; e++) {
        if (pack) dst[e] = src[off];
        else dst[off] = src[e];
        for (int a = n - 1; a >= 0; a--) {
            off += sst[a];
            if (++idx[a] < ext[a]) break;
            off -= sst[a] * ext[a];
            idx[a] = 0;
        }
    }
}

/* Two fp32 operands whose every letter is a batch (both inputs and the
 * output), a row (A and the output), a column (B and the output) or a
 * contracted index (both inputs, not the output), each once per term, no
 * ellipsis and no extent broadcast: packed to [batch, M, K] x [batch, K,
 * N], multiplied by the blocked GEMM on every thread, scattered into the
 * output (MaxViT's "B G H I D, B G H J D -> B G H I J"). MP_ERR_UNSUPPORTED
 * for any other form: the reference walk then. */
static mp_status lak_einsum_gemm(mp_kctx *k, const la_einsum *E) {
    if (k->n_in != 2 || k->in[0].dtype != MP_DT_FLOAT || k->in[1].dtype != MP_DT_FLOAT ||
        k->out[0].dtype != MP_DT_FLOAT || E->ell_rank != 0)
        return MP_ERR_UNSUPPORTED;
    const la_term *ta = &E->in[0], *tb = &E->in[1], *to = &E->out;
    if (ta->ell >= 0 || tb->ell >= 0 || to->ell >= 0) return MP_ERR_UNSUPPORTED;
    int64_t pa[128], pb[128], po[128]; /* each letter's position in A, B, the output; -1 */
    for (int l = 0; l < 128; l++) pa[l] = pb[l] = po[l] = -1;
    const la_term *terms[3] = {ta, tb, to};
    int64_t *pos[3] = {pa, pb, po};
    for (int t = 0; t < 3; t++)
        for (int j = 0; j < terms[t]->n; j++) {
            unsigned char l = (unsigned char)terms[t]->lab[j];
            if (pos[t][l] >= 0) return MP_ERR_UNSUPPORTED; /* a diagonal */
            pos[t][l] = j;
        }
    const mp_rtensor *A = &k->in[0], *B = &k->in[1];
    mp_rtensor *Y = &k->out[0];
    if (A->rank != ta->n || B->rank != tb->n || Y->rank != to->n) return MP_ERR_UNSUPPORTED;
    int64_t sa[MP_MAX_RANK], sb[MP_MAX_RANK], so[MP_MAX_RANK];
    mp_kstrides(A->rank, A->dims, sa);
    mp_kstrides(B->rank, B->dims, sb);
    mp_kstrides(Y->rank, Y->dims, so);
    /* groups in the output's order (batch, rows, columns), then the contracted ones in A's */
    int nb = 0, nm = 0, nn = 0, nk = 0;
    char bl[MP_MAX_RANK], ml[MP_MAX_RANK], nl[MP_MAX_RANK], kl[MP_MAX_RANK];
    for (int j = 0; j < to->n; j++) {
        unsigned char l = (unsigned char)to->lab[j];
        if (pa[l] >= 0 && pb[l] >= 0) bl[nb++] = (char)l;
        else if (pa[l] >= 0) ml[nm++] = (char)l;
        else nl[nn++] = (char)l;
    }
    for (int j = 0; j < ta->n; j++) {
        unsigned char l = (unsigned char)ta->lab[j];
        if (po[l] >= 0) continue;
        if (pb[l] < 0) return MP_ERR_UNSUPPORTED; /* summed out of A alone */
        kl[nk++] = (char)l;
    }
    for (int j = 0; j < tb->n; j++) {
        unsigned char l = (unsigned char)tb->lab[j];
        if (po[l] < 0 && pa[l] < 0) return MP_ERR_UNSUPPORTED; /* summed out of B alone */
    }
    /* no broadcast: every operand's extent is the letter's */
    for (int t = 0; t < 3; t++) {
        const mp_rtensor *r = t == 0 ? A : t == 1 ? B : Y;
        for (int j = 0; j < terms[t]->n; j++)
            if (r->dims[j] != E->ext[(unsigned char)terms[t]->lab[j]]) return MP_ERR_UNSUPPORTED;
    }
    int64_t Bt = 1, M = 1, N = 1, K = 1;
    for (int i = 0; i < nb; i++) Bt *= E->ext[(unsigned char)bl[i]];
    for (int i = 0; i < nm; i++) M *= E->ext[(unsigned char)ml[i]];
    for (int i = 0; i < nn; i++) N *= E->ext[(unsigned char)nl[i]];
    for (int i = 0; i < nk; i++) K *= E->ext[(unsigned char)kl[i]];
    float *Ap = malloc(sizeof(float) * (size_t)(Bt * M * K > 0 ? Bt * M * K : 1));
    float *Bp = malloc(sizeof(float) * (size_t)(Bt * K * N > 0 ? Bt * K * N : 1));
    float *Yp = malloc(sizeof(float) * (size_t)(Bt * M * N > 0 ? Bt * M * N : 1));
    if (!Ap || !Bp || !Yp) {
        free(Ap), free(Bp), free(Yp);
        return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    }
    /* the walks: A over (batch, rows, contracted), B over (batch,
     * contracted, columns), the output over (batch, rows, columns) */
    int64_t ext[3 * MP_MAX_RANK], st[3 * MP_MAX_RANK];
    int n = 0;
    for (int i = 0; i < nb; i++) ext[n] = E->ext[(unsigned char)bl[i]], st[n++] = sa[pa[(unsigned char)bl[i]]];
    for (int i = 0; i < nm; i++) ext[n] = E->ext[(unsigned char)ml[i]], st[n++] = sa[pa[(unsigned char)ml[i]]];
    for (int i = 0; i < nk; i++) ext[n] = E->ext[(unsigned char)kl[i]], st[n++] = sa[pa[(unsigned char)kl[i]]];
    ein_copy(Ap, A->data, n, ext, st, true);
    n = 0;
    for (int i = 0; i < nb; i++) ext[n] = E->ext[(unsigned char)bl[i]], st[n++] = sb[pb[(unsigned char)bl[i]]];
    for (int i = 0; i < nk; i++) ext[n] = E->ext[(unsigned char)kl[i]], st[n++] = sb[pb[(unsigned char)kl[i]]];
    for (int i = 0; i < nn; i++) ext[n] = E->ext[(unsigned char)nl[i]], st[n++] = sb[pb[(unsigned char)nl[i]]];
    ein_copy(Bp, B->data, n, ext, st, true);
    int64_t da[3] = {Bt, M, K}, db[3] = {Bt, K, N}, dy[3] = {Bt, M, N};
    mp_rtensor ra = {Ap, MP_DT_FLOAT, 3, da, Bt * M * K}, rb = {Bp, MP_DT_FLOAT, 3, db, Bt * K * N};
    mp_rtensor ry = {Yp, MP_DT_FLOAT, 3, dy, Bt * M * N};
    mp_kmatmul_par(k, &ra, &rb, &ry, true, Ap, Bp, Yp, false, false);
    n = 0;
    for (int i = 0; i < nb; i++) ext[n] = E->ext[(unsigned char)bl[i]], st[n++] = so[po[(unsigned char)bl[i]]];
    for (int i = 0; i < nm; i++) ext[n] = E->ext[(unsigned char)ml[i]], st[n++] = so[po[(unsigned char)ml[i]]];
    for (int i = 0; i < nn; i++) ext[n] = E->ext[(unsigned char)nl[i]], st[n++] = so[po[(unsigned char)nl[i]]];
    ein_copy(Y->data, Yp, n, ext, st, false);
    free(Ap), free(Bp), free(Yp);
    return MP_OK;
}

bool mp_einsum_bmm_of(const mp_graph *g, const mp_node *n, mp_einsum_bmm *e) {
    if (!n->op || strcmp(n->op, "Einsum") || n->n_in != 2 || n->n_out < 1) return false;
    la_einsum *E = malloc(sizeof *E);
    if (!E) return false;
    mp_ctx c = {g->model, (mp_graph *)g, (mp_node *)n, 0};
    char err[256];
    bool ok = la_einsum_parse(&c, E, err, sizeof err) && E->ell_rank == 0 && E->n_ops == 2;
    const la_term *ta = &E->in[0], *tb = &E->in[1], *to = &E->out;
    ok = ok && ta->ell < 0 && tb->ell < 0 && to->ell < 0 && ta->n >= 2 && tb->n == ta->n && to->n == ta->n;
    int nb = ok ? ta->n - 2 : 0;
    /* the batch letters lead every term, in one order */
    for (int j = 0; ok && j < nb; j++) ok = ta->lab[j] == tb->lab[j] && ta->lab[j] == to->lab[j];
    if (ok) {
        char m = to->lab[nb], nn = to->lab[nb + 1], a0 = ta->lab[nb], a1 = ta->lab[nb + 1], b0 = tb->lab[nb],
             b1 = tb->lab[nb + 1];
        char k = a0 == m ? a1 : a0;
        ok = m != nn && k != m && k != nn && ((a0 == m && a1 == k) || (a0 == k && a1 == m)) &&
             ((b0 == k && b1 == nn) || (b0 == nn && b1 == k));
        for (int j = 0; ok && j < nb; j++) ok = ta->lab[j] != m && ta->lab[j] != nn && ta->lab[j] != k;
        if (ok) {
            e->ta = a0 == k;
            e->tb = b0 == nn;
            e->m = E->ext[(unsigned char)m], e->n = E->ext[(unsigned char)nn], e->k = E->ext[(unsigned char)k];
            e->batch = 1;
            for (int j = 0; j < nb; j++) e->batch *= E->ext[(unsigned char)ta->lab[j]];
            ok = e->m > 0 && e->n > 0 && e->k > 0 && e->batch > 0;
        }
    }
    /* every operand's dims the letters' (no broadcast) */
    for (int t = 0; ok && t < 3; t++) {
        const mp_value *v = &g->values[t < 2 ? n->in[t] : n->out[0]];
        const la_term *term = t == 0 ? ta : t == 1 ? tb : to;
        ok = v->rank == term->n && mp_shape_known(v);
        for (int j = 0; ok && j < term->n; j++) ok = v->dims[j] == E->ext[(unsigned char)term->lab[j]];
    }
    free(E);
    return ok;
}

/* Einsum: the full index space walked once; each point adds the product
 * of the operands' elements to the output's. */
static mp_status lak_einsum(mp_kctx *k) {
    la_einsum *E = malloc(sizeof *E);
    if (!E) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    mp_ctx c = {k->g->model, (mp_graph *)k->g, (mp_node *)k->n, 0};
    char err[256];
    mp_status st = MP_OK;
    if (!la_einsum_parse(&c, E, err, sizeof err) || E->ell_rank < 0 || E->n_ops != k->n_in) {
        free(E);
        return mp_kfail(k, MP_ERR_SHAPE, "%s", "cannot bind the equation");
    }
    st = lak_einsum_gemm(k, E);
    if (st != MP_ERR_UNSUPPORTED) {
        free(E);
        return st;
    }
    st = MP_OK;
    /* axes: ellipsis dims first, then each letter seen */
    int na = 0, axis_of[128];
    int64_t ext[MP_MAX_RANK + 128];
    for (int q = 0; q < E->ell_rank; q++) ext[na++] = E->ell[q];
    for (int l = 0; l < 128; l++) {
        axis_of[l] = -1;
        if (E->seen[l]) {
            axis_of[l] = na;
            ext[na++] = E->ext[l];
        }
    }
    int nt = k->n_in + 1;
    int64_t *str = calloc((size_t)nt * (size_t)na + 1, sizeof(int64_t));
    double *acc = lak_buf(k, k->out[0].numel, &st);
    if (!str || st) {
        free(E), free(str), free(acc);
        return st ? st : mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    }
    for (int t = 0; t < nt; t++) {
        const la_term *term = t < k->n_in ? &E->in[t] : &E->out;
        const mp_rtensor *rt = t < k->n_in ? &k->in[t] : &k->out[0];
        int er = term->ell >= 0 ? rt->rank - term->n : 0;
        int64_t s[MP_MAX_RANK];
        mp_kstrides(rt->rank, rt->dims, s);
        int d = 0;
        for (int j = 0; j <= term->n; j++) {
            if (j == term->ell)
                for (int q = 0; q < er; q++, d++) {
                    int ax = E->ell_rank - er + q;
                    if (rt->dims[d] != 1 || ext[ax] == 1) str[t * na + ax] += s[d];
                }
            if (j < term->n) {
                int ax = axis_of[(unsigned char)term->lab[j]];
                if (rt->dims[d] != 1 || ext[ax] == 1) str[t * na + ax] += s[d];
                d++;
            }
        }
    }
    for (int64_t o = 0; o < k->out[0].numel; o++) acc[o] = 0;
    int64_t total = 1, idx[MP_MAX_RANK + 128] = {0}, off[LA_MAX_OPS + 1] = {0};
    for (int a = 0; a < na; a++) total *= ext[a];
    for (int64_t p = 0; p < total; p++) {
        double v = 1;
        for (int t = 0; t < k->n_in; t++) v *= mp_kget_f(k->in[t].data, k->in[t].dtype, off[t]);
        acc[off[k->n_in]] += v;
        for (int a = na - 1; a >= 0; a--) {
            for (int t = 0; t < nt; t++) off[t] += str[t * na + a];
            if (++idx[a] < ext[a]) break;
            for (int t = 0; t < nt; t++) off[t] -= str[t * na + a] * ext[a];
            idx[a] = 0;
        }
    }
    mp_kconvert(k->out[0].data, k->out[0].dtype, acc, MP_DT_DOUBLE, k->out[0].numel);
    free(E), free(str), free(acc);
    return MP_OK;
}

/* ---- quantization ---- */

/* The per-axis index of element e for a 1-D parameter along `axis`. */
static int64_t lak_axis_index(const mp_rtensor *x, const mp_rtensor *p, int axis, int64_t e) {
    if (!p || p->numel <= 1 || axis < 0) return 0;
    int64_t inner = 1;
    for (int i = axis + 1; i < x->rank; i++) inner *= x->dims[i];
    return (e / inner) % x->dims[axis];
}

mp_status mp_kquantize(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *s = &k->in[1], *z = mp_kin(k, 2);
    mp_rtensor *y = &k->out[0];
    int axis = mp_axis(mp_attr_i(k->n, "axis", 1), x->rank);
    bool sat = mp_attr_i(k->n, "saturate", 1) != 0;
    if ((s->numel > 1 && (axis < 0 || s->numel != x->dims[axis])) || (z && z->numel != s->numel))
        return mp_kfail(k, MP_ERR_SHAPE, "scale and zero point must be scalars or one per index of the axis");
    bool fp8 = y->dtype >= MP_DT_FLOAT8E4M3FN && y->dtype <= MP_DT_FLOAT8E5M2FNUZ;
    for (int64_t e = 0; e < x->numel; e++) {
        int64_t i = lak_axis_index(x, s, axis, e);
        double v = mp_kget_f(x->data, x->dtype, e) / mp_kget_f(s->data, s->dtype, i);
        if (x->dtype == MP_DT_FLOAT) /* fp32 division, as the reference does */
            v = (float)mp_kget_f(x->data, x->dtype, e) / (float)mp_kget_f(s->data, s->dtype, i);
        if (fp8) {
            if (z) v += mp_kget_f(z->data, z->dtype, i);
            ((uint8_t *)y->data)[e] = mp_float_to_fp8((float)v, y->dtype, sat);
            continue;
        }
        v = nearbyint(v);
        if (z) v += mp_kget_f(z->data, z->dtype, i);
        mp_kquant_store(y->data, y->dtype, e, v);
    }
    return MP_OK;
}

mp_status mp_kdequantize(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *s = &k->in[1], *z = mp_kin(k, 2);
    mp_rtensor *y = &k->out[0];
    int axis = mp_axis(mp_attr_i(k->n, "axis", 1), x->rank);
    if ((s->numel > 1 && (axis < 0 || s->numel != x->dims[axis])) || (z && z->numel != s->numel))
        return mp_kfail(k, MP_ERR_SHAPE, "scale and zero point must be scalars or one per index of the axis");
    for (int64_t e = 0; e < x->numel; e++) {
        int64_t i = lak_axis_index(x, s, axis, e);
        double v = mp_kget_f(x->data, x->dtype, e);
        if (z) v -= mp_kget_f(z->data, z->dtype, i);
        mp_kset_f(y->data, y->dtype, e, v * mp_kget_f(s->data, s->dtype, i));
    }
    return MP_OK;
}

static mp_status lak_dyn_quantize(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    float scale;
    double zp;
    mp_kdynq_params(x, &scale, &zp);
    for (int64_t e = 0; e < x->numel; e++)
        mp_kquant_store(k->out[0].data, MP_DT_UINT8, e,
                        scale != 0 ? nearbyintf((float)mp_kget_f(x->data, x->dtype, e) / scale) + zp : zp);
    mp_kset_f(k->out[1].data, k->out[1].dtype, 0, scale);
    mp_kset_i(k->out[2].data, k->out[2].dtype, 0, mp_kf2i(zp)); /* NaN when x holds inf */
    return MP_OK;
}

/* ---- RNN, GRU, LSTM (layout 0 and 1, both directions, sequence_lens,
 * initial states, peepholes, clip, input_forget, the activation
 * attributes) ----
 * Computed in fp32 whatever the float dtype (others are converted in and
 * out). Per direction, the input projection of every time step is one
 * GEMM, XW [T*N, G*H] = X [T*N, I] W^T + biases (row blocks split across
 * the plan's threads); then each step is one GEMM for the recurrence,
 * HR [N, G*H] = H_{t-1} [N, H] R^T, and the gates' element-wise work. GRU
 * with linear_before_reset = 0 applies r to h before its candidate's
 * product, so its step is two GEMMs (the z and r columns, then
 * (r . h) R_h^T). The two directions of a bidirectional layer run side by
 * side on two threads. A row whose sequence_lens is shorter stops there (its
 * state kept, Y zero past it). W^T, R^T and the summed biases are packed
 * once at prepare when constant, into the scratch each run otherwise.
 * Real runs take oneDNN's RNN primitives where they can
 * (src/run/dnnl_rnn.c); this kernel does everything else. */

double mp_kact(const char *name, double x, double alpha, double beta) {
    if (!strcmp(name, "Sigmoid")) return mp_s_sigmoid(x);
    if (!strcmp(name, "Tanh")) return tanh(x);
    if (!strcmp(name, "Relu")) return x > 0 ? x : 0;
    if (!strcmp(name, "LeakyRelu")) return x >= 0 ? x : alpha * x;
    if (!strcmp(name, "ThresholdedRelu")) return x > alpha ? x : 0;
    if (!strcmp(name, "ScaledTanh")) return alpha * tanh(beta * x);
    if (!strcmp(name, "HardSigmoid")) return fmax(0.0, fmin(1.0, alpha * x + beta));
    if (!strcmp(name, "Elu")) return x >= 0 ? x : alpha * (exp(x) - 1);
    if (!strcmp(name, "Softsign")) return x / (1 + fabs(x));
    if (!strcmp(name, "Softplus")) return mp_s_softplus(x);
    if (!strcmp(name, "Affine")) return alpha * x + beta;
    return x;
}

enum { LAK_SIGMOID, LAK_TANH, LAK_RELU, LAK_OTHER };

typedef struct lak_act {
    int kind;
    const char *name;
    double alpha, beta;
} lak_act;

static inline float lak_apply(const lak_act *a, float x) {
    switch (a->kind) {
    case LAK_SIGMOID: return mp_s_sigmoidf(x);
    case LAK_TANH: return tanhf(x);
    case LAK_RELU: return x > 0 ? x : 0;
    default: return (float)mp_kact(a->name, x, a->alpha, a->beta);
    }
}

/* What the node asks for, read once (prepare) and the packed weights. */
typedef struct lak_rnn_cfg {
    int gates, dirs, layout;
    bool lbr, coupled, rev;        /* coupled: LSTM input_forget (f = 1 - i) */
    float clip;                    /* 0: none */
    lak_act act[2][3];
    int64_t pI, pH;                /* dims the packed weights were made for */
    float *wt, *rt, *bias;         /* NULL: packed each run */
    size_t work;                   /* floats of scratch asked for at prepare */
} lak_rnn_cfg;

static void lak_rnn_config(const mp_kctx *k, int gates, lak_rnn_cfg *c) {
    memset(c, 0, sizeof *c);
    const mp_node *n = k->n;
    const char *dir = mp_attr_s(n, "direction", "forward");
    c->gates = gates;
    c->dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
    c->rev = !strcmp(dir, "reverse");
    c->layout = (int)mp_attr_i(n, "layout", 0);
    c->lbr = gates == 3 && mp_attr_i(n, "linear_before_reset", 0) != 0;
    c->coupled = gates == 4 && mp_attr_i(n, "input_forget", 0) != 0;
    c->clip = (float)mp_attr_f(n, "clip", 0);
    if (!(c->clip > 0)) c->clip = 0;
    int nf = gates == 1 ? 1 : gates == 3 ? 2 : 3;
    static const char *const defs[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    const mp_attr *aa = mp_node_attr(n, "activations");
    const double *al, *be;
    int nal = mp_attr_floats(n, "activation_alpha", &al), nbe = mp_attr_floats(n, "activation_beta", &be);
    for (int d = 0; d < c->dirs; d++)
        for (int f = 0; f < nf; f++) {
            int j = d * nf + f;
            lak_act *a = &c->act[d][f];
            a->name = aa && aa->type == MP_ATTR_STRINGS && aa->n > j ? aa->strings[j]
                                                                     : defs[gates == 1 ? 0 : gates == 3 ? 1 : 2][f];
            a->kind = !strcmp(a->name, "Sigmoid") ? LAK_SIGMOID
                      : !strcmp(a->name, "Tanh")  ? LAK_TANH
                      : !strcmp(a->name, "Relu")  ? LAK_RELU
                                                  : LAK_OTHER;
            a->alpha = nal > j ? al[j] : (!strcmp(a->name, "LeakyRelu") ? 0.01 : !strcmp(a->name, "HardSigmoid") ? 0.2 : 1.0);
            a->beta = nbe > j ? be[j] : (!strcmp(a->name, "HardSigmoid") ? 0.5 : 0.0);
        }
}

static inline float lak_getf(const mp_rtensor *t, int64_t i) {
    return t->dtype == MP_DT_FLOAT ? ((const float *)t->data)[i] : (float)mp_kget_f(t->data, t->dtype, i);
}

/* W [D, G*H, C] -> per direction W^T [C, G*H] */
static void lak_rnn_pack(float *dst, const mp_rtensor *w, int D, int64_t GH, int64_t C) {
    for (int d = 0; d < D; d++)
        for (int64_t r = 0; r < GH; r++)
            for (int64_t i = 0; i < C; i++) dst[(d * C + i) * GH + r] = lak_getf(w, (d * GH + r) * C + i);
}

/* Per direction [G*H + H]: the bias added to XW (Wb + Rb; the LBR GRU's
 * candidate takes only Wb there) and the LBR GRU's Rb_h, added to its
 * recurrent product before r multiplies it. */
static void lak_rnn_bias(float *dst, const mp_rtensor *b, const lak_rnn_cfg *c, int64_t H) {
    int64_t GH = c->gates * H;
    for (int d = 0; d < c->dirs; d++) {
        float *xb = dst + d * (GH + H), *hb = xb + GH;
        for (int64_t r = 0; r < GH; r++) {
            float wb = b ? lak_getf(b, d * 2 * GH + r) : 0, rb = b ? lak_getf(b, d * 2 * GH + GH + r) : 0;
            xb[r] = c->lbr && r >= 2 * H ? wb : wb + rb;
            if (c->lbr && r >= 2 * H) hb[r - 2 * H] = rb;
        }
        if (!c->lbr)
            for (int64_t j = 0; j < H; j++) hb[j] = 0;
    }
}

/* Scratch floats for dims S, N, I, H: XW, HR, h, c, r.h, the packing when
 * not done at prepare, fp32 copies of non-fp32 X and outputs. */
static size_t lak_rnn_work(const lak_rnn_cfg *c, const mp_kctx *k, int64_t S, int64_t N, int64_t I, int64_t H, bool packed) {
    int64_t GH = c->gates * H, D = c->dirs;
    int64_t n = D * (S * N * GH + N * GH + 3 * N * H) + 12 * 16; /* + rounding of the takes */
    if (!packed) n += D * I * GH + D * H * GH + D * (GH + H);
    if (k->in[0].dtype != MP_DT_FLOAT) n += S * N * I;
    for (int o = 0; o < k->n_out && o < 3; o++)
        if (k->n->out[o] >= 0 && k->out[o].dtype != MP_DT_FLOAT) n += o == 0 ? S * D * N * H : D * N * H;
    return (size_t)n;
}

static void lak_rnn_release(void *state) {
    lak_rnn_cfg *c = state;
    if (!c) return;
    free(c->wt), free(c->rt), free(c->bias);
    free(c);
}

static mp_status lak_rnn_prepare_g(mp_kctx *k, size_t *scratch, int gates) {
    lak_rnn_cfg *c = calloc(1, sizeof *c);
    if (!c) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    lak_rnn_config(k, gates, c);
    k->state = c;
    const mp_rtensor *X = &k->in[0], *W = &k->in[1], *R = &k->in[2], *B = mp_kin(k, 3);
    if (X->rank != 3 || W->rank != 3 || R->rank != 3) return MP_OK; /* said at run */
    int64_t S = X->dims[c->layout ? 1 : 0], N = X->dims[c->layout ? 0 : 1], I = X->dims[2], H = R->dims[2];
    int64_t GH = gates * H, D = c->dirs;
    if (S < 0 || N < 0 || I < 0 || H <= 0 || W->numel != D * GH * I || R->numel != D * GH * H ||
        (k->n_in > 3 && k->n->in[3] >= 0 && B == NULL) || (B && B->numel != D * 2 * GH))
        return MP_OK; /* sizes said at run; B known only then: packed then */
    if (W->data && R->data) {
        c->wt = malloc(sizeof(float) * (size_t)(D * I * GH));
        c->rt = malloc(sizeof(float) * (size_t)(D * H * GH));
        c->bias = malloc(sizeof(float) * (size_t)(D * (GH + H)));
        if (!c->wt || !c->rt || !c->bias) return mp_kfail(k, MP_ERR_NOMEM, "out of memory packing weights");
        lak_rnn_pack(c->wt, W, (int)D, GH, I);
        lak_rnn_pack(c->rt, R, (int)D, GH, H);
        lak_rnn_bias(c->bias, B, c, H);
        c->pI = I;
        c->pH = H;
    }
    c->work = lak_rnn_work(c, k, S, N, I, H, c->wt != NULL);
    *scratch = c->work * sizeof(float);
    return MP_OK;
}

/* XW rows [lo, hi) blocks of LAK_ROWS: bias, then + X W^T */
#define LAK_ROWS 16
typedef struct lak_xw {
    const float *x, *wt, *xb;
    float *xw;
    int64_t rows, I, GH;
} lak_xw;

static void lak_xw_range(void *arg, int64_t lo, int64_t hi) {
    const lak_xw *p = arg;
    int64_t r0 = lo * LAK_ROWS, r1 = hi * LAK_ROWS < p->rows ? hi * LAK_ROWS : p->rows;
    for (int64_t r = r0; r < r1; r++) memcpy(p->xw + r * p->GH, p->xb, sizeof(float) * (size_t)p->GH);
    mp_kgemm_f32(r1 - r0, p->GH, p->I, p->x + r0 * p->I, p->I, 1, p->wt, p->GH, 1, p->xw + r0 * p->GH, p->GH, true);
}

/* One direction's pass, on its own buffers (the directions of a
 * bidirectional layer run side by side on two threads). */
typedef struct lak_job {
    mp_kctx *k;
    const lak_rnn_cfg *c;
    int gates, layout, D;
    int64_t S, N, I, H;
    const float *x, *wt, *rt, *bias;
    const mp_rtensor *SL, *H0, *C0, *P;
    float *y, *yh, *yc;
    float *buf;                    /* per direction: XW, HR, h, c, r.h */
    int64_t per_dir;               /* floats of buf per direction */
    bool par;                      /* split XW across threads (one direction at a time) */
} lak_job;

static void lak_rnn_dir(const lak_job *j, int d) {
    const lak_rnn_cfg *c = j->c;
    const mp_rtensor *SL = j->SL, *H0 = j->H0, *C0 = j->C0, *P = j->P;
    int gates = j->gates, layout = j->layout, D = j->D;
    int64_t S = j->S, N = j->N, I = j->I, H = j->H, GH = gates * H;
    float *xw = j->buf + d * j->per_dir, *hr = xw + S * N * GH, *h = hr + N * GH, *cs = h + N * H, *rh = cs + N * H;
    float *y = j->y, *yh = j->yh, *yc = j->yc;
    bool rev = c->rev || d == 1;
    const lak_act *ac = c->act[d];
    const float *wtd = j->wt + d * I * GH, *rtd = j->rt + d * H * GH, *xb = j->bias + d * (GH + H), *hb = xb + GH;
    const float clip = c->clip;
    lak_xw xp = {j->x, wtd, xb, xw, S * N, I, GH};
    if (j->par) mp_kparallel(j->k, (S * N + LAK_ROWS - 1) / LAK_ROWS, lak_xw_range, &xp);
    else lak_xw_range(&xp, 0, (S * N + LAK_ROWS - 1) / LAK_ROWS);
    /* rows of X and XW: layout 0 [t][b], layout 1 [b][t] */
#define LAK_ROW(t, b) (layout ? (b) * S + (t) : (t) * N + (b))
#define LAK_Y(t, d, b) (layout ? (((b) * S + (t)) * D + (d)) * H : (((t) * D + (d)) * N + (b)) * H)
#define LAK_HS(d, b) (layout ? ((b) * D + (d)) * H : ((d) * N + (b)) * H)
#define LAK_CLIP(v) (clip > 0 ? fmaxf(-clip, fminf(clip, (v))) : (v))
    for (int64_t b = 0; b < N; b++)
        for (int64_t q = 0; q < H; q++) {
            h[b * H + q] = H0 ? lak_getf(H0, LAK_HS(d, b) + q) : 0;
            cs[b * H + q] = C0 ? lak_getf(C0, LAK_HS(d, b) + q) : 0;
        }
    bool two = gates == 3 && !c->lbr;
    for (int64_t s = 0; s < S; s++) {
        bool any = false;
        for (int64_t b = 0; b < N && !any; b++) any = !SL || mp_kget_i(SL->data, SL->dtype, b) > s;
        if (!any) break;
        /* HR = h R^T (GRU without linear_before_reset: the z and r columns first) */
        mp_kgemm_f32(N, two ? 2 * H : GH, H, h, H, 1, rtd, GH, 1, hr, GH, false);
        if (two) { /* z, r; then r.h R_h^T into the candidate's columns */
            for (int64_t b = 0; b < N; b++) {
                int64_t len = SL ? mp_kget_i(SL->data, SL->dtype, b) : S;
                int64_t t = rev ? len - 1 - s : s;
                const float *xr = xw + LAK_ROW(t < 0 ? 0 : t, b) * GH;
                float *hrr = hr + b * GH;
                for (int64_t q = 0; q < H; q++) {
                    float z = lak_apply(&ac[0], LAK_CLIP(xr[q] + hrr[q]));
                    float r = lak_apply(&ac[0], LAK_CLIP(xr[H + q] + hrr[H + q]));
                    hrr[q] = z;
                    rh[b * H + q] = r * h[b * H + q];
                }
            }
            mp_kgemm_f32(N, H, H, rh, H, 1, rtd + 2 * H, GH, 1, hr + 2 * H, GH, false);
        }
        for (int64_t b = 0; b < N; b++) {
            int64_t len = SL ? mp_kget_i(SL->data, SL->dtype, b) : S;
            if (s >= len) continue;
            int64_t t = rev ? len - 1 - s : s;
            const float *xr = xw + LAK_ROW(t, b) * GH;
            const float *hrr = hr + b * GH;
            float *hv = h + b * H, *cv = cs + b * H;
            if (gates == 1) {
                for (int64_t q = 0; q < H; q++) hv[q] = lak_apply(&ac[0], LAK_CLIP(xr[q] + hrr[q]));
            } else if (gates == 3) {
                for (int64_t q = 0; q < H; q++) {
                    float z, hh;
                    if (two) {
                        z = hrr[q];
                        hh = xr[2 * H + q] + hrr[2 * H + q];
                    } else {
                        z = lak_apply(&ac[0], LAK_CLIP(xr[q] + hrr[q]));
                        float r = lak_apply(&ac[0], LAK_CLIP(xr[H + q] + hrr[H + q]));
                        hh = xr[2 * H + q] + r * (hrr[2 * H + q] + hb[q]);
                    }
                    hh = lak_apply(&ac[1], LAK_CLIP(hh));
                    hv[q] = (1 - z) * hh + z * hv[q];
                }
            } else {
                for (int64_t q = 0; q < H; q++) {
                    float pi = P ? lak_getf(P, d * 3 * H + q) : 0, po = P ? lak_getf(P, d * 3 * H + H + q) : 0;
                    float pf = P ? lak_getf(P, d * 3 * H + 2 * H + q) : 0, cp = cv[q];
                    float gi = lak_apply(&ac[0], LAK_CLIP(xr[q] + hrr[q] + pi * cp));
                    float gf = c->coupled ? 1 - gi : lak_apply(&ac[0], LAK_CLIP(xr[2 * H + q] + hrr[2 * H + q] + pf * cp));
                    float gc = lak_apply(&ac[1], LAK_CLIP(xr[3 * H + q] + hrr[3 * H + q]));
                    float cn = gf * cp + gi * gc;
                    float go = lak_apply(&ac[0], LAK_CLIP(xr[H + q] + hrr[H + q] + po * cn));
                    cv[q] = cn;
                    hv[q] = go * lak_apply(&ac[2], cn);
                }
            }
            if (y) memcpy(y + LAK_Y(t, d, b), hv, sizeof(float) * (size_t)H);
        }
    }
    for (int64_t b = 0; b < N; b++) {
        if (yh) memcpy(yh + LAK_HS(d, b), h + b * H, sizeof(float) * (size_t)H);
        if (yc) memcpy(yc + LAK_HS(d, b), cs + b * H, sizeof(float) * (size_t)H);
    }
#undef LAK_ROW
#undef LAK_Y
#undef LAK_HS
#undef LAK_CLIP
}

static void lak_rnn_dirs(void *arg, int64_t lo, int64_t hi) {
    for (int64_t d = lo; d < hi; d++) lak_rnn_dir(arg, (int)d);
}

static mp_status lak_rnn(mp_kctx *k, int gates) {
    lak_rnn_cfg local, *c = k->state;
    if (!c) {
        lak_rnn_config(k, gates, &local);
        c = &local;
    }
    const mp_rtensor *X = &k->in[0], *W = &k->in[1], *R = &k->in[2];
    const mp_rtensor *B = mp_kin(k, 3), *SL = mp_kin(k, 4), *H0 = mp_kin(k, 5);
    const mp_rtensor *C0 = gates == 4 ? mp_kin(k, 6) : NULL, *P = gates == 4 ? mp_kin(k, 7) : NULL;
    int layout = c->layout, D = c->dirs;
    if (X->rank != 3 || W->rank != 3 || R->rank != 3) return mp_kfail(k, MP_ERR_SHAPE, "X, W and R must be 3-D");
    int64_t S = X->dims[layout ? 1 : 0], N = X->dims[layout ? 0 : 1], I = X->dims[2], H = R->dims[2];
    int64_t G = gates, GH = G * H;
    /* every operand's size, as the loops below index it */
    if (H <= 0 || W->numel != D * GH * I || R->numel != D * GH * H || (B && B->numel != D * 2 * GH) ||
        (H0 && H0->numel != D * N * H) || (C0 && C0->numel != D * N * H) || (P && P->numel != D * 3 * H) ||
        (SL && SL->numel != N))
        return mp_kfail(k, MP_ERR_SHAPE, "an input's size does not match X, W and R (%lld directions, hidden %lld)",
                        (long long)D, (long long)H);
    for (int64_t b = 0; SL && b < N; b++) {
        int64_t len = mp_kget_i(SL->data, SL->dtype, b);
        if (len < 0 || len > S)
            return mp_kfail(k, MP_ERR_USAGE, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                            (long long)len, (long long)S);
    }
    mp_rtensor *Y = k->n_out > 0 && k->out[0].data ? &k->out[0] : NULL;
    mp_rtensor *Yh = k->n_out > 1 && k->out[1].data ? &k->out[1] : NULL;
    mp_rtensor *Yc = gates == 4 && k->n_out > 2 && k->out[2].data ? &k->out[2] : NULL;
    bool packed = c->wt && c->pI == I && c->pH == H;
    size_t need = lak_rnn_work(c, k, S, N, I, H, packed);
    float *work = c == k->state && k->scratch && c->work >= need ? k->scratch : NULL, *heap = NULL;
    if (!work && !(work = heap = malloc(sizeof(float) * need))) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    float *cur = work;
#define LAK_TAKE(n) (cur += ((n) + 15) / 16 * 16, cur - ((n) + 15) / 16 * 16)
    int64_t per_dir = S * N * GH + N * GH + 3 * N * H;
    float *buf = LAK_TAKE(D * per_dir);
    const float *wt = c->wt, *rt = c->rt, *bias = c->bias;
    if (!packed) {
        float *w2 = LAK_TAKE(D * I * GH), *r2 = LAK_TAKE(D * H * GH), *b2 = LAK_TAKE(D * (GH + H));
        lak_rnn_pack(w2, W, D, GH, I);
        lak_rnn_pack(r2, R, D, GH, H);
        lak_rnn_bias(b2, B, c, H);
        wt = w2, rt = r2, bias = b2;
    }
    const float *x = X->data;
    if (X->dtype != MP_DT_FLOAT) {
        float *x2 = LAK_TAKE(S * N * I);
        mp_kconvert(x2, MP_DT_FLOAT, X->data, X->dtype, S * N * I);
        x = x2;
    }
    float *y = Y ? (Y->dtype == MP_DT_FLOAT ? Y->data : LAK_TAKE(Y->numel)) : NULL;
    float *yh = Yh ? (Yh->dtype == MP_DT_FLOAT ? Yh->data : LAK_TAKE(Yh->numel)) : NULL;
    float *yc = Yc ? (Yc->dtype == MP_DT_FLOAT ? Yc->data : LAK_TAKE(Yc->numel)) : NULL;
#undef LAK_TAKE
    if (y && SL) memset(y, 0, sizeof(float) * (size_t)(S * D * N * H));
    lak_job job = {k, c, gates, layout, D, S, N, I, H, x, wt, rt, bias, SL, H0, C0, P, y, yh, yc, buf, per_dir,
                   D == 1 || k->threads <= 1};
    if (job.par) lak_rnn_dirs(&job, 0, D);
    else mp_kparallel(k, D, lak_rnn_dirs, &job); /* the two directions side by side */
    if (Y && y != Y->data) mp_kconvert(Y->data, Y->dtype, y, MP_DT_FLOAT, Y->numel);
    if (Yh && yh != Yh->data) mp_kconvert(Yh->data, Yh->dtype, yh, MP_DT_FLOAT, Yh->numel);
    if (Yc && yc != Yc->data) mp_kconvert(Yc->data, Yc->dtype, yc, MP_DT_FLOAT, Yc->numel);
    free(heap);
    return MP_OK;
}
static mp_status lak_rnn1(mp_kctx *k) { return lak_rnn(k, 1); }
static mp_status lak_gru(mp_kctx *k) { return lak_rnn(k, 3); }
static mp_status lak_lstm(mp_kctx *k) { return lak_rnn(k, 4); }
static mp_status lak_rnn1_prepare(mp_kctx *k, size_t *scratch) { return lak_rnn_prepare_g(k, scratch, 1); }
static mp_status lak_gru_prepare(mp_kctx *k, size_t *scratch) { return lak_rnn_prepare_g(k, scratch, 3); }
static mp_status lak_lstm_prepare(mp_kctx *k, size_t *scratch) { return lak_rnn_prepare_g(k, scratch, 4); }

/* ------------------------------------------------------------------ */
/* the table                                                           */
/* ------------------------------------------------------------------ */

#define LA_BIT(i) (1u << (i))

const mp_op mp_ops_linalg[] = {
    {"", "MatMul", 1, matmul_infer, matmul_cost, LA_BIT(0) | LA_BIT(1), 0, NULL, lak_matmul_run,
     .train = mp_bwd_product},
    {"", "Gemm", 1, gemm_infer, gemm_cost, LA_BIT(1) | LA_BIT(2), 0, NULL, mp_kgemm_run,
     .train = mp_bwd_product},
    {"", "Einsum", 12, einsum_infer, einsum_cost, 0, 0, NULL, lak_einsum, .train = mp_bwd_product},
    {"", "MatMulInteger", 10, matmul_integer_infer, matmul_cost, LA_BIT(1),
     LA_BIT(2) | LA_BIT(3), NULL, lak_matmul_integer},
    {"", "QLinearMatMul", 10, qlinear_matmul_infer, qlinear_matmul_cost, LA_BIT(3),
     LA_BIT(1) | LA_BIT(2) | LA_BIT(4) | LA_BIT(5) | LA_BIT(6) | LA_BIT(7), NULL, lak_qlinear_matmul},
    {"", "QuantizeLinear", 10, quantize_infer, la_cost_2_per_elem, 0, LA_BIT(1) | LA_BIT(2), NULL, mp_kquantize},
    {"", "DequantizeLinear", 10, dequantize_infer, la_cost_2_per_elem, LA_BIT(0),
     LA_BIT(1) | LA_BIT(2), NULL, mp_kdequantize},
    {"", "DynamicQuantizeLinear", 11, dyn_quantize_infer, dyn_quantize_cost, 0, 0, NULL, lak_dyn_quantize},
    {"", "RNN", 1, rnn_infer, rnn_cost, LA_BIT(1) | LA_BIT(2) | LA_BIT(3), LA_BIT(5), NULL, lak_rnn1,
     lak_rnn1_prepare, lak_rnn_release},
    {"", "GRU", 1, gru_infer, gru_cost, LA_BIT(1) | LA_BIT(2) | LA_BIT(3), LA_BIT(5), NULL, lak_gru,
     lak_gru_prepare, lak_rnn_release},
    {"", "LSTM", 1, lstm_infer, lstm_cost, LA_BIT(1) | LA_BIT(2) | LA_BIT(3) | LA_BIT(7),
     LA_BIT(5) | LA_BIT(6), NULL, lak_lstm, lak_lstm_prepare, lak_rnn_release},
};
const int mp_ops_linalg_count = (int)MP_ARRAY_LEN(mp_ops_linalg);
