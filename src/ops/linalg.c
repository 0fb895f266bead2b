/* Linear algebra: matrix products (MatMul, Gemm, Einsum), their quantized
 * forms, quantization, and the recurrent layers (RNN, GRU, LSTM).
 *
 * Counting (GUIDE §2): a MAC is one multiply-accumulate of a dot product;
 * a matrix product of [M, K] x [K, N] is M*K*N MACs and 2*M*K*N FLOPs.
 * Integer products (MatMulInteger, QLinearMatMul) count the same MACs and
 * report 2*MACs as FLOPs: those are integer operations, documented as such
 * in docs/COUNTING.md. Each op's comment states its shape and cost rule. */
#include "ops/ops.h"

#include <ctype.h>
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

/* Two dims that must be equal: the known one wins, a named symbol wins over
 * the anonymous dim; false when both are known and differ. */
static bool la_merge(int64_t a, int64_t b, int64_t *out) {
    if (a == b || b == MP_DIM_ANON) {
        *out = a;
    } else if (a >= 0 && b >= 0) {
        return false;
    } else if (a >= 0) {
        *out = a;
    } else if (b >= 0 || a == MP_DIM_ANON) {
        *out = b;
    } else {
        *out = a;
    }
    return true;
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
    if (!la_merge(ka, kb, &kk))
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
    if (!la_merge(ka, kb, &kk))
        return mp_fail(c, "inner dims differ: '%s' gives K=%lld, '%s' gives K=%lld", a->name,
                       (long long)ka, b->name, (long long)kb);
    int64_t od[2] = {m, n};
    if ((cc = mp_in(c, 2)) != NULL && cc->rank >= 0) {
        if (cc->rank > 2) return mp_fail(c, "C has rank %d, above 2", cc->rank);
        for (int i = 0; i < cc->rank; i++) {
            int64_t d = cc->dims[cc->rank - 1 - i], t = od[1 - i];
            if (d >= 0 && d != 1 && t >= 0 && d != t)
                return mp_fail(c, "C '%s' dim %lld does not broadcast to %lld", cc->name,
                               (long long)d, (long long)t);
            if (t < 0 && d > 1) od[1 - i] = d;
        }
    }
    return mp_set_out(c, 0, a->dtype, 2, od);
}

static void gemm_cost(mp_ctx *c, mp_cost *k) {
    int64_t m, ka, kb, n, kk;
    if (!la_gemm_dims(c, &m, &ka, &kb, &n) || !la_merge(ka, kb, &kk)) {
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
    if (r->rank == 3 && !la_merge(s->hidden, r->dims[2], &s->hidden)) {
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
    if (w->rank == 3 && !la_merge(s->input, w->dims[2], &s->input)) {
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
    int64_t ih = s.input >= 0 && s.hidden >= 0 ? s.input + s.hidden : MP_DIM_ANON;
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
/* the table                                                           */
/* ------------------------------------------------------------------ */

#define LA_BIT(i) (1u << (i))

const mp_op mp_ops_linalg[] = {
    {"", "MatMul", 1, matmul_infer, matmul_cost, LA_BIT(0) | LA_BIT(1), 0},
    {"", "Gemm", 1, gemm_infer, gemm_cost, LA_BIT(1) | LA_BIT(2), 0},
    {"", "Einsum", 12, einsum_infer, einsum_cost, 0, 0},
    {"", "MatMulInteger", 10, matmul_integer_infer, matmul_cost, LA_BIT(1),
     LA_BIT(2) | LA_BIT(3)},
    {"", "QLinearMatMul", 10, qlinear_matmul_infer, qlinear_matmul_cost, LA_BIT(3),
     LA_BIT(1) | LA_BIT(2) | LA_BIT(4) | LA_BIT(5) | LA_BIT(6) | LA_BIT(7)},
    {"", "QuantizeLinear", 10, quantize_infer, la_cost_2_per_elem, 0, LA_BIT(1) | LA_BIT(2)},
    {"", "DequantizeLinear", 10, dequantize_infer, la_cost_2_per_elem, LA_BIT(0),
     LA_BIT(1) | LA_BIT(2)},
    {"", "DynamicQuantizeLinear", 11, dyn_quantize_infer, dyn_quantize_cost, 0, 0},
    {"", "RNN", 1, rnn_infer, rnn_cost, LA_BIT(1) | LA_BIT(2) | LA_BIT(3), LA_BIT(5)},
    {"", "GRU", 1, gru_infer, gru_cost, LA_BIT(1) | LA_BIT(2) | LA_BIT(3), LA_BIT(5)},
    {"", "LSTM", 1, lstm_infer, lstm_cost, LA_BIT(1) | LA_BIT(2) | LA_BIT(3) | LA_BIT(7),
     LA_BIT(5) | LA_BIT(6)},
};
const int mp_ops_linalg_count = (int)MP_ARRAY_LEN(mp_ops_linalg);
