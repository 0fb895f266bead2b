/* The pattern layer (patterns.h): norms, activations, rotary embeddings
 * and attentions in every form the exporters write them, then the blocks
 * they make and the roles of their weight products.
 *
 * The passes, in order (a node belongs to one pattern at most; an earlier
 * pass claims it first):
 *   1. whole operators (LayerNormalization, Gelu, RotaryEmbedding,
 *      Attention, the com.microsoft fused operators);
 *   2. decomposed norms, anchored at the ReduceMean of the squares;
 *   3. decomposed activations, anchored at Erf, Tanh or Sigmoid;
 *   4. rotate-half rotary embeddings, anchored at the Neg;
 *   5. decomposed attention, anchored at the Softmax;
 *   6. gated activations (act(gate) * up) and the ReLU between two
 *      weight products;
 *   7. blocks: one per attention, with the weight products found by
 *      following values through layout operators (Reshape, Transpose,
 *      Split, Slice, Cast ...) and through the norms and rotaries found;
 *      then the embedding and the LM head.
 * Everything is read through the consumer index (mp_uses); the result is
 * one heap block kept on the graph (mp_patterns_of).
 *
 * One job, one file (about 1,800 lines): the passes share one context, one
 * claim on each node and the helpers that walk single-consumer chains, and
 * each form of each pattern is a short function next to the forms of the
 * same pattern; split by pattern they would each need that context. */
#include "analyze/patterns.h"
#include "analyze/same.h"
#include "load/load.h"
#include "ops/kernel.h"
#include "ops/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- name tables ---- */

#define MP__NAME(id, name) name,
static const char *const kind_names[] = {MP_PAT_KIND_LIST(MP__NAME)};
static const char *const form_names[] = {MP_FORM_LIST(MP__NAME)};
static const char *const norm_names[] = {MP_NORM_LIST(MP__NAME)};
static const char *const act_names[] = {MP_ACT_LIST(MP__NAME)};
static const char *const part_names[] = {MP_PART_LIST(MP__NAME)};
static const char *const mask_names[] = {MP_MASK_LIST(MP__NAME)};
static const char *const wrole_names[] = {MP_WROLE_LIST(MP__NAME)};
static const char *const nrole_names[] = {MP_NROLE_LIST(MP__NAME)};
#undef MP__NAME
_Static_assert(MP_ARRAY_LEN(kind_names) == MP_PAT_KIND_COUNT, "kind names out of step");
_Static_assert(MP_ARRAY_LEN(form_names) == MP_FORM_COUNT, "form names out of step");
_Static_assert(MP_ARRAY_LEN(norm_names) == MP_NORM_COUNT, "norm names out of step");
_Static_assert(MP_ARRAY_LEN(act_names) == MP_ACT_COUNT, "act names out of step");
_Static_assert(MP_ARRAY_LEN(part_names) == MP_PART_COUNT, "part names out of step");
_Static_assert(MP_ARRAY_LEN(mask_names) == MP_MASK_COUNT, "mask names out of step");
_Static_assert(MP_ARRAY_LEN(wrole_names) == MP_WROLE_COUNT, "weight role names out of step");
_Static_assert(MP_ARRAY_LEN(nrole_names) == MP_NROLE_COUNT, "norm role names out of step");

#define MP__NAMEFN(fn, table)                                                      \
    const char *fn(int i) {                                                        \
        return i >= 0 && i < (int)MP_ARRAY_LEN(table) ? table[i] : "?";            \
    }
MP__NAMEFN(mp_pat_kind_name, kind_names)
MP__NAMEFN(mp_pat_form_name, form_names)
MP__NAMEFN(mp_norm_kind_name, norm_names)
MP__NAMEFN(mp_act_kind_name, act_names)
MP__NAMEFN(mp_pat_part_name, part_names)
MP__NAMEFN(mp_mask_kind_name, mask_names)
MP__NAMEFN(mp_wrole_name, wrole_names)
MP__NAMEFN(mp_nrole_name, nrole_names)
#undef MP__NAMEFN

/* ---- values ---- */

/* An Identity of a constant is one too: the TorchScript exporter keeps
 * each merged parameter's name on an Identity of the kept initializer
 * (BatchNorm scales and biases of a fresh model, LayerNorm gammas), and the
 * run folds such nodes at plan time, weights present or absent. Followed
 * through a bounded chain. */
bool mp_value_const(const mp_graph *g, int v) {
    for (int hop = 0; hop < 16; hop++) {
        if (v < 0 || v >= g->n_values) return false;
        const mp_value *val = &g->values[v];
        if (val->flags & (MP_VAL_INIT | MP_VAL_CONST)) return true;
        if (val->kn >= 0 && val->kn == mp_value_numel(val)) return true;
        if (val->producer < 0 || val->producer >= g->n_nodes) return false;
        const mp_node *p = &g->nodes[val->producer];
        if (p->domain[0] != 0) return false;
        if (mp_streq(p->op, "Constant")) return true;
        if (!mp_streq(p->op, "Identity") || p->n_in != 1) return false;
        v = p->in[0];
    }
    return false;
}

bool mp_value_scalar(const mp_graph *g, int v, double *out) {
    if (!mp_value_const(g, v)) return false;
    const mp_value *val = &g->values[v];
    if (mp_value_numel(val) != 1) return false;
    if (val->kn == 1 && val->fv) {
        *out = val->fv[0];
        return true;
    }
    if (val->kn == 1 && val->iv) {
        *out = (double)val->iv[0];
        return true;
    }
    /* an initializer no shape rule read (the dynamo exporter's scalars) */
    return (val->flags & MP_VAL_INIT) && val->init && mp_tensor_scalar(val->init, out);
}

/* ---- the context of one search ---- */

typedef struct pctx {
    mp_model *m;
    mp_graph *g;
    const int *order;         /* g->order (the nodes' own order in a graph built by hand without one) */
    int *pos;                 /* node -> position in order */
    mp_pref *ref;             /* node -> pattern */
    mp_pmember *mem;
    int n_mem, cap_mem;
    mp_pnorm *norms;
    int n_norms, cap_norms;
    mp_pact *acts;
    int n_acts, cap_acts;
    mp_protary *rot;
    int n_rot, cap_rot;
    mp_pattn *attn;
    int n_attn, cap_attn;
    mp_pblock *blocks;
    int n_blocks, cap_blocks;
    mp_pmiss *miss;
    int n_miss, cap_miss;
    /* one candidate's members, before it is accepted */
    mp_pmember cand[64];
    int n_cand;
    bool nomem;
    uint64_t *deps; /* per value: the graph inputs (the first 64) it depends on, made when first asked */
} pctx;

static const mp_node *NODE(const pctx *c, int k) { return &c->g->nodes[k]; }
static const mp_value *VAL(const pctx *c, int v) { return &c->g->values[v]; }

/* An op of the default domain. */
static bool is_op(const mp_node *n, const char *op) {
    return (n->domain[0] == 0 || mp_streq(n->domain, "ai.onnx")) && mp_streq(n->op, op);
}
static bool is_ms(const mp_node *n, const char *op) {
    return mp_streq(n->domain, "com.microsoft") && mp_streq(n->op, op);
}

static int prod(const pctx *c, int v) {
    return v >= 0 && v < c->g->n_values ? c->g->values[v].producer : -1;
}
/* The producer of v when it is `op`, else -1. */
static int prod_op(const pctx *c, int v, const char *op) {
    int p = prod(c, v);
    return p >= 0 && is_op(NODE(c, p), op) ? p : -1;
}
/* The one reader of v (once, no graph output), else -1. */
static int sole(const pctx *c, int v) { return v >= 0 ? mp_sole_use(c->g, v) : -1; }
/* Does node r read only v's dims or dtype (Shape, Size, CastLike's
 * target)? The TorchScript exporter's shape arithmetic reads most
 * activations. */
static bool meta_reader(const mp_node *r, int v) {
    if (r->domain[0] != 0) return false;
    if (mp_streq(r->op, "Shape") || mp_streq(r->op, "Size")) return true;
    return mp_streq(r->op, "CastLike") && r->n_in == 2 && r->in[0] != v;
}
/* The one reader of v's data, readers of its dims aside. */
static int sole_data(const pctx *c, int v) {
    if (v < 0 || (c->g->values[v].flags & MP_VAL_OUTPUT)) return -1;
    int n, found = -1;
    const int *u = mp_uses(c->g, v, &n);
    for (int i = 0; i < n; i++) {
        if (meta_reader(&c->g->nodes[u[i]], v)) continue;
        if (found >= 0) return -1;
        found = u[i];
    }
    return found;
}
/* The sole reader of v when it is `op`. */
static int sole_op(const pctx *c, int v, const char *op) {
    int k = sole(c, v);
    return k >= 0 && is_op(NODE(c, k), op) ? k : -1;
}
static int out0(const pctx *c, int k) { return k >= 0 && NODE(c, k)->n_out > 0 ? NODE(c, k)->out[0] : -1; }
static int in_at(const pctx *c, int k, int i) { return k >= 0 && i < NODE(c, k)->n_in ? NODE(c, k)->in[i] : -1; }
/* The other operand of two-input node k reading v, -1 when it does not or reads v twice. */
static int other(const pctx *c, int k, int v) {
    const mp_node *n = NODE(c, k);
    if (n->n_in != 2 || (n->in[0] == v) == (n->in[1] == v)) return -1;
    return n->in[0] == v ? n->in[1] : n->in[0];
}
static bool scalar(const pctx *c, int v, double *d) { return mp_value_scalar(c->g, v, d); }
/* A one-element initializer whose contents the file does not carry (a
 * weightless copy of an export: its external data absent). Where a
 * pattern's structure is unmistakable (GELU's Erf chain, SDPA's NaN
 * guard) such a constant stands for the value the form requires: the
 * figures the patterns give do not depend on it, and a run cannot happen
 * without the data anyway. */
static bool absent_scalar(const pctx *c, int v) {
    if (v < 0 || !mp_value_const(c->g, v)) return false;
    const mp_value *x = VAL(c, v);
    double d;
    return (x->flags & MP_VAL_INIT) && mp_value_numel(x) == 1 && !mp_value_scalar(c->g, v, &d);
}
/* v is the scalar `want` (relative tolerance rel), or one whose contents
 * are absent */
static bool scalar_is(const pctx *c, int v, double want, double rel) {
    double d;
    if (scalar(c, v, &d)) return rel > 0 ? fabs(d - want) <= rel * fabs(want) : d == want;
    return absent_scalar(c, v);
}
static bool near(double a, double b, double rel) { return fabs(a - b) <= rel * fabs(b); }
static bool free_node(const pctx *c, int k) { return k >= 0 && c->ref[k].kind == MP_PAT_NONE; }
static int64_t last_dim(const pctx *c, int v) {
    const mp_value *x = v >= 0 ? VAL(c, v) : NULL;
    return x && x->rank >= 1 ? x->dims[x->rank - 1] : -1;
}
static bool same_shape(const pctx *c, int a, int b) {
    const mp_value *x = VAL(c, a), *y = VAL(c, b);
    if (x->rank < 0 || x->rank != y->rank) return false;
    for (int i = 0; i < x->rank; i++)
        if (x->dims[i] != y->dims[i] || x->dims[i] == MP_DIM_ANON) return false;
    return true;
}
static bool is_float(const pctx *c, int v) { return v >= 0 && mp_dtype_is_float(VAL(c, v)->dtype); }

/* Known integer contents of node k's input i. */
static bool ints_in(pctx *c, int k, int i, const int64_t **iv, int64_t *n) {
    if (in_at(c, k, i) < 0) return false;
    mp_ctx cx = {c->m, c->g, &c->g->nodes[k], k, NULL};
    return mp_ints(&cx, i, iv, n);
}

/* A node's single axis argument (attribute before `opset_input`, input 1
 * from it), normalised to the rank of input 0; -2 when not known. */
static int axis_of(pctx *c, int k, int rank) {
    const mp_node *n = NODE(c, k);
    int64_t a;
    if (is_op(n, "ReduceMean") || is_op(n, "ReduceSum")) {
        const int64_t *ax;
        int64_t na;
        if (n->opset >= 18 || (is_op(n, "ReduceSum") && n->opset >= 13)) {
            if (!ints_in(c, k, 1, &ax, &na) || na != 1) return -2;
        } else {
            na = mp_attr_ints(n, "axes", &ax);
            if (na != 1) return -2;
        }
        a = ax[0];
    } else {
        a = mp_attr_i(n, "axis", is_op(n, "Softmax") && n->opset < 13 ? 1 : -1);
    }
    int r = mp_axis(a, rank);
    return r < 0 ? -2 : r;
}

/* ReduceMean of input 0 over its last axis, dims kept. */
static bool reduce_last(pctx *c, int k) {
    const mp_node *n = NODE(c, k);
    if (!is_op(n, "ReduceMean") || n->n_in < 1 || n->n_out < 1 || n->in[0] < 0) return false;
    const mp_value *x = VAL(c, n->in[0]);
    if (x->rank < 1 || mp_attr_i(n, "keepdims", 1) != 1) return false;
    return axis_of(c, k, x->rank) == x->rank - 1;
}

/* Slice of input 0 along its last axis with step 1: *start, *end (end
 * clamped to the dim when known). */
static bool slice_last(pctx *c, int k, int64_t *start, int64_t *end) {
    const mp_node *n = NODE(c, k);
    if (!is_op(n, "Slice") || n->n_in < 1 || n->in[0] < 0) return false;
    const mp_value *x = VAL(c, n->in[0]);
    if (x->rank < 1) return false;
    const int64_t *st, *en, *ax = NULL, *sp = NULL;
    int64_t ns, ne, na = 0, np = 0;
    if (n->opset >= 10) {
        if (!ints_in(c, k, 1, &st, &ns) || !ints_in(c, k, 2, &en, &ne)) return false;
        if (in_at(c, k, 3) >= 0 && !ints_in(c, k, 3, &ax, &na)) return false;
        if (in_at(c, k, 4) >= 0 && !ints_in(c, k, 4, &sp, &np)) return false;
    } else {
        ns = mp_attr_ints(n, "starts", &st);
        ne = mp_attr_ints(n, "ends", &en);
        na = mp_attr_ints(n, "axes", &ax);
        if (na < 0) na = 0;
    }
    if (ns != 1 || ne != 1 || (ax && na != 1) || (sp && (np != 1 || sp[0] != 1))) return false;
    int64_t a = ax ? ax[0] : 0;
    if (mp_axis(a, x->rank) != x->rank - 1) return false;
    int64_t d = x->dims[x->rank - 1], s = st[0], e = en[0];
    if (d >= 0) {
        if (s < 0) s += d;
        if (e < 0) e += d;
        if (e > d) e = d;
    } else if (s < 0 || e < 0) {
        return false;
    }
    *start = s;
    *end = e;
    return true;
}

/* Concat along the last axis. */
static bool concat_last(const pctx *c, int k) {
    const mp_node *n = NODE(c, k);
    if (!is_op(n, "Concat") || n->n_out < 1) return false;
    const mp_value *y = VAL(c, n->out[0]);
    return y->rank >= 1 && mp_axis(mp_attr_i(n, "axis", 0), y->rank) == y->rank - 1;
}

/* A float-to-float Cast (or CastLike). */
static bool float_cast(const pctx *c, int k) {
    const mp_node *n = NODE(c, k);
    if (!(is_op(n, "Cast") || is_op(n, "CastLike")) || n->n_in < 1 || n->n_out < 1) return false;
    return is_float(c, n->in[0]) && is_float(c, n->out[0]);
}

/* The operand node k scales v by: Mul's other operand, Div's divisor
 * (*inv set); -1 when k is neither. */
static int scale_operand(const pctx *c, int k, int v, bool *inv) {
    const mp_node *n = NODE(c, k);
    *inv = false;
    if (n->n_in != 2) return -1;
    if (is_op(n, "Mul")) return other(c, k, v);
    if (is_op(n, "Div") && n->in[0] == v && n->in[1] != v) {
        *inv = true;
        return n->in[1];
    }
    return -1;
}

/* Mul or Div of v by a scalar constant: the factor v is multiplied by. */
static bool scaled_by(const pctx *c, int k, int v, double *f) {
    bool inv;
    double s;
    int o = scale_operand(c, k, v, &inv);
    if (o < 0 || !scalar(c, o, &s) || (inv && s == 0)) return false;
    *f = inv ? 1.0 / s : s;
    return true;
}

/* Node k multiplies v by `want` (Mul by it, Div by its inverse), the
 * constant matched by scalar_is */
static bool scaled_by_is(const pctx *c, int k, int v, double want, double rel) {
    bool inv;
    int o = scale_operand(c, k, v, &inv);
    return o >= 0 && scalar_is(c, o, inv ? 1.0 / want : want, rel);
}

/* A parameter or a view of one (Identity, Transpose, Reshape, Cast,
 * Unsqueeze, Squeeze of a weight: PyTorch's W.t() and the exporters'
 * copies); the value at the end of the chain in *root. */
static bool weight_like(const pctx *c, int v, int *root) {
    for (int hop = 0; v >= 0 && hop < 8; hop++) {
        const mp_value *val = VAL(c, v);
        if (val->flags & (MP_VAL_PARAM | MP_VAL_DECL_PARAM)) goto yes;
        if ((val->flags & MP_VAL_INIT) && mp_dtype_is_float(val->dtype) && val->rank >= 1 &&
            mp_value_numel(val) != 1 && !(val->flags & (MP_VAL_BUFFER | MP_VAL_DECL_BUFFER)))
            goto yes;
        int p = val->producer;
        if (p < 0) return false;
        const mp_node *n = NODE(c, p);
        if (!(is_op(n, "Identity") || is_op(n, "Transpose") || is_op(n, "Reshape") || is_op(n, "Cast") ||
              is_op(n, "Unsqueeze") || is_op(n, "Squeeze") || is_op(n, "CastLike")) ||
            n->n_in < 1)
            return false;
        v = n->in[0];
        continue;
    yes:
        if (root) *root = v;
        return true;
    }
    return false;
}

/* ---- growing the lists ---- */

#define PUSH(c, arr, n, cap)                                                  \
    ({                                                                        \
        __typeof__(arr) nv_ = mp_grow((arr), sizeof *(arr), &(cap), (n) + 1); \
        if (nv_) {                                                            \
            (arr) = nv_;                                                      \
            memset(&(arr)[(n)], 0, sizeof *(arr));                            \
        } else {                                                              \
            (c)->nomem = true;                                                \
        }                                                                     \
        nv_ ? &(arr)[(n)++] : NULL;                                           \
    })

static void miss(pctx *c, int node, int kind, const char *why) {
    for (int i = 0; i < c->n_miss; i++)
        if (c->miss[i].node == node) return;
    mp_pmiss *m = PUSH(c, c->miss, c->n_miss, c->cap_miss);
    if (!m) return;
    m->node = node;
    m->kind = kind;
    m->why = why;
}

static void cand_reset(pctx *c) { c->n_cand = 0; }
/* Add node k to the candidate; false when it is taken already (by this
 * candidate or another pattern) or the candidate is full. */
static bool cand(pctx *c, int k, int part) {
    if (k < 0 || !free_node(c, k) || c->n_cand >= (int)MP_ARRAY_LEN(c->cand)) return false;
    for (int i = 0; i < c->n_cand; i++)
        if (c->cand[i].node == k) return false;
    c->cand[c->n_cand++] = (mp_pmember){k, part};
    return true;
}
static bool in_cand(const pctx *c, int k) {
    for (int i = 0; i < c->n_cand; i++)
        if (c->cand[i].node == k) return true;
    return false;
}

static int by_pos_ctx_cmp(const void *a, const void *b, void *ctx) {
    const int *pos = ctx;
    int x = pos[((const mp_pmember *)a)->node], y = pos[((const mp_pmember *)b)->node];
    return (x > y) - (x < y);
}

/* Accept the candidate as pattern `index` of `kind`: its members in
 * topological order; *first and *n receive where they are. */
static void cand_accept(pctx *c, int kind, int index, int *first, int *n) {
    qsort_r(c->cand, (size_t)c->n_cand, sizeof c->cand[0], by_pos_ctx_cmp, c->pos);
    *first = c->n_mem;
    *n = 0;
    for (int i = 0; i < c->n_cand; i++) {
        mp_pmember *mm = PUSH(c, c->mem, c->n_mem, c->cap_mem);
        if (!mm) return;
        *mm = c->cand[i];
        c->ref[mm->node] = (mp_pref){kind, index, mm->part};
        (*n)++;
    }
}

/* Values read only inside the candidate (and not graph outputs). */
static bool read_inside(const pctx *c, int v) {
    if (v < 0 || (VAL(c, v)->flags & MP_VAL_OUTPUT)) return false;
    int n;
    const int *u = mp_uses(c->g, v, &n);
    for (int i = 0; i < n; i++)
        if (!in_cand(c, u[i])) return false;
    return n > 0;
}

/* ---- 1. norms ---- */

static mp_pnorm *norm_new(pctx *c, int kind, int form, int x, int y) {
    mp_pnorm *p = PUSH(c, c->norms, c->n_norms, c->cap_norms);
    if (!p) return NULL;
    p->kind = kind;
    p->form = form;
    p->x = x;
    p->y = y;
    p->skip = p->scale = p->shift = -1;
    p->eps = -1;
    p->dim = last_dim(c, x);
    p->block = -1;
    return p;
}

static void norm_whole(pctx *c, int k) {
    const mp_node *n = NODE(c, k);
    bool ln = is_op(n, "LayerNormalization") || is_ms(n, "LayerNormalization");
    bool rms = is_op(n, "RMSNormalization") || is_op(n, "SimplifiedLayerNormalization") ||
               is_ms(n, "SimplifiedLayerNormalization");
    bool sln = is_ms(n, "SkipLayerNormalization"), srms = is_ms(n, "SkipSimplifiedLayerNormalization");
    if (!(ln || rms || sln || srms) || n->n_in < 2 || n->n_out < 1 || n->in[0] < 0) return;
    cand_reset(c);
    cand(c, k, MP_PART_OP);
    mp_pnorm *p = norm_new(c, (ln || sln) ? MP_NORM_LAYER : MP_NORM_RMS,
                           is_ms(n, n->op) ? MP_FORM_CONTRIB : MP_FORM_OP, n->in[0], n->out[0]);
    if (!p) return;
    if (sln || srms) {
        p->skip = n->in[1];
        p->scale = in_at(c, k, 2);
        p->shift = sln ? in_at(c, k, 3) : -1;
        p->eps = mp_attr_f(n, "epsilon", 1e-12);
    } else {
        p->scale = in_at(c, k, 1);
        p->shift = ln ? in_at(c, k, 2) : -1;
        p->eps = mp_attr_f(n, "epsilon", 1e-5);
        const mp_value *x = VAL(c, n->in[0]);
        int ax = x->rank >= 0 ? mp_axis(mp_attr_i(n, "axis", -1), x->rank) : -1;
        if (ax >= 0) p->dim = mp_dims_product(x->dims + ax, x->rank - ax);
        if (p->dim < -1) p->dim = -1;
    }
    cand_accept(c, MP_PAT_NORM, c->n_norms - 1, &p->first, &p->n);
}

/* LayerNorm or RMSNorm written out, from the ReduceMean r of the squares:
 *   LayerNorm: m = ReduceMean(x); t = Sub(x, m); RMSNorm: t = x;
 *   sq = Pow(t, 2) | Mul(t, t); v = ReduceMean(sq); e = Add(v, eps);
 *   s = Sqrt(e); q = Div(t, s) | Mul(t, Reciprocal(s)) | Mul(t, Div(1, s));
 *   [Cast]; [Mul(q, gamma)]; [Add(., beta)]. */
static void norm_decomposed(pctx *c, int r) {
    if (!free_node(c, r) || !reduce_last(c, r)) return;
    int sqv = in_at(c, r, 0), sq = prod(c, sqv);
    if (sq < 0 || !free_node(c, sq) || sole(c, sqv) != r) return;
    const mp_node *sn = NODE(c, sq);
    double k;
    int t;
    if (is_op(sn, "Pow") && sn->n_in == 2 && scalar(c, sn->in[1], &k) && k == 2.0) t = sn->in[0];
    else if (is_op(sn, "Mul") && sn->n_in == 2 && sn->in[0] == sn->in[1]) t = sn->in[0];
    else return;
    if (!is_float(c, t)) return;
    /* a Cast to the type the difference has already (torch 1.13's
     * layer_norm symbolic without ONNX shape inference, as a weightless
     * export runs it: Sub, Cast, Pow by a Cast 2.0) */
    int tcast = prod(c, t);
    if (tcast >= 0 && free_node(c, tcast) && float_cast(c, tcast) && sole(c, t) == sq &&
        VAL(c, in_at(c, tcast, 0))->dtype == VAL(c, t)->dtype)
        t = in_at(c, tcast, 0);
    else
        tcast = -1;
    cand_reset(c);
    int x = t, sub = prod_op(c, t, "Sub"), mean = -1;
    if (sub >= 0 && free_node(c, sub)) {
        mean = prod(c, in_at(c, sub, 1));
        if (mean >= 0 && free_node(c, mean) && reduce_last(c, mean) && in_at(c, mean, 0) == in_at(c, sub, 0) &&
            sole(c, out0(c, mean)) == sub) {
            x = in_at(c, sub, 0);
            cand(c, mean, MP_PART_BODY);
            cand(c, sub, MP_PART_BODY);
        } else {
            mean = sub = -1;
        }
    } else {
        sub = -1;
    }
    if (tcast >= 0) cand(c, tcast, MP_PART_BODY);
    cand(c, sq, MP_PART_BODY);
    cand(c, r, MP_PART_BODY);
    int e = sole_op(c, out0(c, r), "Add");
    double eps;
    if (e < 0 || !scalar(c, other(c, e, out0(c, r)), &eps) || !(eps >= 0)) return;
    cand(c, e, MP_PART_BODY);
    int s = sole_op(c, out0(c, e), "Sqrt");
    if (s < 0) return;
    cand(c, s, MP_PART_BODY);
    int sv = out0(c, s), q = -1, nk = sole(c, sv);
    if (nk < 0) return;
    const mp_node *nn = NODE(c, nk);
    double one;
    if (is_op(nn, "Div") && nn->n_in == 2 && nn->in[0] == t && nn->in[1] == sv) {
        q = nk;
    } else if (is_op(nn, "Reciprocal") ||
               (is_op(nn, "Div") && nn->n_in == 2 && nn->in[1] == sv && scalar(c, nn->in[0], &one) && one == 1.0)) {
        cand(c, nk, MP_PART_BODY);
        int mu = sole_op(c, out0(c, nk), "Mul");
        if (mu >= 0 && other(c, mu, out0(c, nk)) == t) q = mu;
    }
    if (q < 0 || !cand(c, q, MP_PART_BODY)) return;
    /* t's readers: the square and the normalisation (LayerNorm's t is its
     * own; RMSNorm's t is x, read elsewhere too) */
    if (sub >= 0) {
        int nu;
        const int *u = mp_uses(c->g, t, &nu);
        for (int i = 0; i < nu; i++)
            if (u[i] != sq && u[i] != q && u[i] != tcast) return;
    }
    int y = out0(c, q);
    int64_t dim = last_dim(c, x);
    int cst = sole(c, y);
    if (cst >= 0 && float_cast(c, cst)) {
        cand(c, cst, MP_PART_CAST);
        y = out0(c, cst);
    }
    int gamma = -1, beta = -1;
    int mg = sole_op(c, y, "Mul");
    if (mg >= 0) {
        int w = other(c, mg, y);
        if (w >= 0 && weight_like(c, w, NULL) && mp_value_numel(VAL(c, w)) == dim && cand(c, mg, MP_PART_AFFINE)) {
            gamma = w;
            y = out0(c, mg);
            int ab = sole_op(c, y, "Add");
            int b = ab >= 0 ? other(c, ab, y) : -1;
            if (b >= 0 && weight_like(c, b, NULL) && mp_value_numel(VAL(c, b)) == dim && cand(c, ab, MP_PART_AFFINE)) {
                beta = b;
                y = out0(c, ab);
            }
        }
    }
    /* every value made inside is read inside */
    for (int i = 0; i < c->n_cand; i++) {
        int o = out0(c, c->cand[i].node);
        if (o != y && !read_inside(c, o)) return;
    }
    mp_pnorm *p = norm_new(c, sub >= 0 ? MP_NORM_LAYER : MP_NORM_RMS, MP_FORM_DECOMPOSED, x, y);
    if (!p) return;
    p->eps = eps;
    p->dim = dim;
    p->scale = gamma;
    p->shift = beta;
    cand_accept(c, MP_PAT_NORM, c->n_norms - 1, &p->first, &p->n);
}

/* ---- 2. activations ---- */

static mp_pact *act_new(pctx *c, int kind, int form, int x, int y) {
    mp_pact *a = PUSH(c, c->acts, c->n_acts, c->cap_acts);
    if (!a) return NULL;
    a->kind = kind;
    a->form = form;
    a->x = x;
    a->y = a->act_out = y;
    a->bias = a->up = -1;
    a->inner = a->outer = -1;
    a->block = -1;
    return a;
}

static void act_accept(pctx *c, mp_pact *a) { cand_accept(c, MP_PAT_ACT, (int)(a - c->acts), &a->first, &a->n); }

static void act_whole(pctx *c, int k) {
    const mp_node *n = NODE(c, k);
    if (n->n_in < 1 || n->n_out < 1 || n->in[0] < 0) return;
    int kind = -1, form = MP_FORM_OP, bias = -1;
    if (is_op(n, "Gelu")) {
        kind = mp_streq(mp_attr_s(n, "approximate", "none"), "tanh") ? MP_ACT_GELU_TANH : MP_ACT_GELU;
    } else if (is_ms(n, "Gelu") || is_ms(n, "BiasGelu")) {
        kind = MP_ACT_GELU;
        form = MP_FORM_CONTRIB;
        bias = in_at(c, k, 1);
    } else if (is_ms(n, "FastGelu")) {
        kind = MP_ACT_GELU_TANH;
        form = MP_FORM_CONTRIB;
        bias = in_at(c, k, 1);
    } else if (is_ms(n, "QuickGelu")) {
        kind = MP_ACT_QUICK_GELU;
        form = MP_FORM_CONTRIB;
    } else if (is_op(n, "Swish") && mp_attr_f(n, "alpha", 1.0) == 1.0) {
        kind = MP_ACT_SILU;
    } else if (is_op(n, "Mish")) {
        kind = MP_ACT_MISH;
    }
    if (kind < 0) return;
    cand_reset(c);
    cand(c, k, MP_PART_OP);
    mp_pact *a = act_new(c, kind, form, n->in[0], n->out[0]);
    if (!a) return;
    a->bias = bias;
    act_accept(c, a);
}

/* The end both GELU forms share, from e, the Erf's or the Tanh's output:
 * Add(e, 1), then Mul(x, .) and Mul(0.5), Mul(Mul(x, 0.5), .), or
 * Mul(0.5) and Mul(x, .). Adds
 * them to the candidate and accepts it as `kind` when every value it makes
 * but its output is read inside it. */
static void gelu_end(pctx *c, int kind, int e, int x, bool one_op) {
    int ad = sole_op(c, e, "Add");
    if (ad < 0 || !scalar_is(c, other(c, ad, e), 1.0, 0)) return;
    cand(c, ad, MP_PART_BODY);
    int mu = sole_op(c, out0(c, ad), "Mul");
    if (mu < 0 || !cand(c, mu, MP_PART_BODY)) return;
    int o = other(c, mu, out0(c, ad)), y = out0(c, mu);
    if (o != x && scalar_is(c, o, 0.5, 0)) {
        /* (1 + erf) * 0.5, then * x (the dynamo exporter's opset-18 form) */
        int xm = sole_op(c, y, "Mul");
        if (xm < 0 || other(c, xm, y) != x || !cand(c, xm, MP_PART_BODY)) return;
        y = out0(c, xm);
    } else if (o == x) {
        /* x * (1 + erf) without the half is no GELU */
        int half = sole_op(c, y, "Mul");
        if (half < 0 || !scaled_by_is(c, half, y, 0.5, 0)) return;
        cand(c, half, MP_PART_BODY);
        y = out0(c, half);
    } else {
        int hk = prod(c, o);
        if (hk < 0 || !free_node(c, hk) || !scaled_by_is(c, hk, x, 0.5, 0) || sole(c, o) != mu) return;
        cand(c, hk, MP_PART_BODY);
    }
    for (int i = 0; i < c->n_cand; i++) {
        int ov = out0(c, c->cand[i].node);
        if (ov != y && !read_inside(c, ov)) return;
    }
    mp_pact *a = act_new(c, kind, MP_FORM_DECOMPOSED, x, y);
    if (a) a->one_op = one_op;
    if (a) act_accept(c, a);
}

/* x * 0.5 * (1 + erf(x / sqrt 2)), from the Erf: Div(x, 1.414) or
 * Mul(x, 0.7071) -> Erf -> Add(1) -> Mul(x, .) [-> Mul(0.5)], or
 * Mul(Mul(x, 0.5), 1 + erf). */
static void gelu_erf(pctx *c, int e) {
    if (!free_node(c, e) || !is_op(NODE(c, e), "Erf")) return;
    int pre = prod(c, in_at(c, e, 0));
    if (pre < 0 || !free_node(c, pre)) return;
    const mp_node *pn = NODE(c, pre);
    int x = pn->n_in == 2 ? pn->in[0] : -1;
    if (x >= 0 && is_op(pn, "Mul") && mp_value_const(c->g, x)) x = pn->in[1];
    if (x < 0 || !scaled_by_is(c, pre, x, 0.7071067811865476, 1e-3)) return;
    cand_reset(c);
    cand(c, pre, MP_PART_BODY);
    cand(c, e, MP_PART_BODY);
    gelu_end(c, MP_ACT_GELU, out0(c, e), x, true);
}

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), from the Tanh:
 * Pow(x, 3) or Mul(x, Mul(x, x)) -> Mul(0.044715) -> Add(x, .) -> Mul(0.7978) -> Tanh ->
 * Add(1) -> Mul(Mul(x, 0.5), .) or Mul(x, .) -> Mul(0.5). */
static void gelu_tanh(pctx *c, int t) {
    if (!free_node(c, t) || !is_op(NODE(c, t), "Tanh")) return;
    int pre = prod(c, in_at(c, t, 0));
    double f;
    if (pre < 0 || !free_node(c, pre) || NODE(c, pre)->n_in != 2) return;
    int a = mp_value_const(c->g, NODE(c, pre)->in[0]) ? NODE(c, pre)->in[1] : NODE(c, pre)->in[0];
    if (!scaled_by(c, pre, a, &f) || !near(f, 0.7978845608028654, 1e-3)) return;
    int ak = prod_op(c, a, "Add");
    if (ak < 0 || !free_node(c, ak) || NODE(c, ak)->n_in != 2) return;
    /* one operand is x, the other 0.044715 * x^3 */
    int x = -1, cube = -1, cmul = -1, sq = -1;
    for (int i = 0; i < 2 && x < 0; i++) {
        int b = NODE(c, ak)->in[1 - i], cand_x = NODE(c, ak)->in[i];
        int bm = prod(c, b);
        if (bm < 0 || NODE(c, bm)->n_in != 2) continue;
        for (int j = 0; j < 2; j++) {
            int p3 = NODE(c, bm)->in[j];
            int pk = prod(c, p3);
            double e3;
            if (pk < 0 || !scaled_by(c, bm, p3, &f) || !near(f, 0.044715, 1e-3)) continue;
            const mp_node *pn = NODE(c, pk);
            if ((is_op(pn, "Pow") && pn->n_in == 2 && pn->in[0] == cand_x && scalar(c, pn->in[1], &e3) && e3 == 3.0)) {
                x = cand_x, cube = pk, cmul = bm;
                break;
            }
            /* x * (x * x), TorchScript's F.gelu(approximate="tanh") */
            if (is_op(pn, "Mul") && pn->n_in == 2 && (pn->in[0] == cand_x || pn->in[1] == cand_x)) {
                int s2 = prod(c, pn->in[pn->in[0] == cand_x ? 1 : 0]);
                if (s2 >= 0 && is_op(NODE(c, s2), "Mul") && NODE(c, s2)->n_in == 2 && NODE(c, s2)->in[0] == cand_x &&
                    NODE(c, s2)->in[1] == cand_x && free_node(c, s2)) {
                    x = cand_x, cube = pk, cmul = bm, sq = s2;
                    break;
                }
            }
        }
    }
    if (x < 0 || !free_node(c, cube) || !free_node(c, cmul)) return;
    cand_reset(c);
    if (sq >= 0) cand(c, sq, MP_PART_BODY);
    cand(c, cube, MP_PART_BODY);
    cand(c, cmul, MP_PART_BODY);
    cand(c, ak, MP_PART_BODY);
    cand(c, pre, MP_PART_BODY);
    cand(c, t, MP_PART_BODY);
    /* one ATen operator: TorchScript's form of F.gelu(approximate="tanh")
     * (x * (x * x), where a Python GELU writes torch.pow(x, 3)), or a node
     * the dynamo exporter lowered from aten.gelu */
    const mp_node *tn = NODE(c, t);
    bool one_op = sq >= 0 || (tn->fx && tn->fx->target && mp_streq(tn->fx->target, "gelu"));
    gelu_end(c, MP_ACT_GELU_TANH, out0(c, t), x, one_op);
}

/* x * Sigmoid(x) (SiLU), x * Sigmoid(1.702 x) (QuickGELU), from the
 * Sigmoid. */
static void sigmoid_act(pctx *c, int s) {
    if (!free_node(c, s) || !is_op(NODE(c, s), "Sigmoid")) return;
    int in = in_at(c, s, 0), sv = out0(c, s);
    int mu = sole_op(c, sv, "Mul");
    if (in < 0 || mu < 0 || !free_node(c, mu)) return;
    int o = other(c, mu, sv);
    cand_reset(c);
    int kind = -1, x = -1;
    double f;
    int pre = prod(c, in);
    if (o == in) {
        kind = MP_ACT_SILU;
        x = in;
    } else if (pre >= 0 && free_node(c, pre) && sole(c, in) == s && NODE(c, pre)->n_in == 2 &&
               scaled_by(c, pre, o, &f) && near(f, 1.702, 1e-3)) {
        kind = MP_ACT_QUICK_GELU;
        x = o;
        cand(c, pre, MP_PART_BODY);
    }
    if (kind < 0) return;
    cand(c, s, MP_PART_BODY);
    cand(c, mu, MP_PART_BODY);
    mp_pact *a = act_new(c, kind, MP_FORM_DECOMPOSED, x, out0(c, mu));
    if (a) act_accept(c, a);
}

/* x * Tanh(Softplus(x)) (F.mish before opset 18's Mish), from the
 * Softplus. */
static void mish_act(pctx *c, int sp) {
    if (!free_node(c, sp) || !is_op(NODE(c, sp), "Softplus")) return;
    int x = in_at(c, sp, 0);
    int th = sole_op(c, out0(c, sp), "Tanh");
    if (x < 0 || th < 0 || !free_node(c, th)) return;
    int mu = sole_op(c, out0(c, th), "Mul");
    if (mu < 0 || !free_node(c, mu) || other(c, mu, out0(c, th)) != x) return;
    cand_reset(c);
    cand(c, sp, MP_PART_BODY);
    cand(c, th, MP_PART_BODY);
    cand(c, mu, MP_PART_BODY);
    mp_pact *a = act_new(c, MP_ACT_MISH, MP_FORM_DECOMPOSED, x, out0(c, mu));
    if (a) act_accept(c, a);
}

/* ---- 3. rotary embeddings ---- */

static mp_protary *rot_new(pctx *c, int form, int x, int y) {
    mp_protary *r = PUSH(c, c->rot, c->n_rot, c->cap_rot);
    if (!r) return NULL;
    r->form = form;
    r->x = x;
    r->y = y;
    r->cos = r->sin = -1;
    r->rot_dim = r->head_dim = -1;
    r->attn = -1;
    return r;
}

static void rotary_whole(pctx *c, int k) {
    const mp_node *n = NODE(c, k);
    bool std = is_op(n, "RotaryEmbedding"), ms = is_ms(n, "RotaryEmbedding");
    if (!(std || ms) || n->n_in < 3 || n->n_out < 1) return;
    cand_reset(c);
    cand(c, k, MP_PART_OP);
    mp_protary *r = rot_new(c, std ? MP_FORM_OP : MP_FORM_CONTRIB, n->in[0], n->out[0]);
    if (!r) return;
    r->cos = in_at(c, k, std ? 1 : 2);
    r->sin = in_at(c, k, std ? 2 : 3);
    r->interleaved = mp_attr_i(n, "interleaved", 0) != 0;
    const mp_value *x = VAL(c, n->in[0]);
    int64_t heads = mp_attr_i(n, "num_heads", 0);
    if (x->rank == 4) r->head_dim = x->dims[3];
    else if (x->rank == 3 && heads > 0 && x->dims[2] >= 0) r->head_dim = x->dims[2] / heads;
    int64_t rd = mp_attr_i(n, "rotary_embedding_dim", 0);
    int64_t half = last_dim(c, r->cos);
    r->rot_dim = rd > 0 ? rd : half > 0 ? 2 * half : r->head_dim;
    cand_accept(c, MP_PAT_ROTARY, c->n_rot - 1, &r->first, &r->n);
}

/* y = x * cos + rotate_half(x) * sin, rotate_half(x) = Concat(-x[h:],
 * x[:h]) on the last axis; from the Neg. Partial rotary (Pythia, GPT-NeoX
 * rotary_pct): x = Slice(q, :rot) and the result Concat(y, q[rot:]). */
static void rotary_half(pctx *c, int ng) {
    if (!free_node(c, ng) || !is_op(NODE(c, ng), "Neg")) return;
    int64_t s2a, s2b, s1a, s1b;
    int s2 = prod(c, in_at(c, ng, 0));
    if (s2 < 0 || !free_node(c, s2) || !slice_last(c, s2, &s2a, &s2b) || sole(c, out0(c, s2)) != ng) return;
    int x = in_at(c, s2, 0);
    int cat = sole(c, out0(c, ng));
    if (cat < 0 || !concat_last(c, cat) || NODE(c, cat)->n_in != 2 || NODE(c, cat)->in[0] != out0(c, ng)) return;
    int s1 = prod(c, NODE(c, cat)->in[1]);
    if (s1 < 0 || !free_node(c, s1) || !slice_last(c, s1, &s1a, &s1b) || in_at(c, s1, 0) != x ||
        sole(c, out0(c, s1)) != cat)
        return;
    int64_t d = last_dim(c, x);
    if (s1a != 0 || s1b != s2a || s1b <= 0 || (d >= 0 && (s2b != d || d != 2 * s1b))) return;
    int ms = sole_op(c, out0(c, cat), "Mul");
    if (ms < 0) return;
    int sinv = other(c, ms, out0(c, cat));
    int ad = sole_op(c, out0(c, ms), "Add");
    if (ad < 0 || sinv < 0) return;
    int m1v = other(c, ad, out0(c, ms)), m1 = prod_op(c, m1v, "Mul");
    if (m1 < 0 || sole(c, m1v) != ad) return;
    int cosv = other(c, m1, x);
    if (cosv < 0) return;
    cand_reset(c);
    int members[] = {s2, ng, s1, cat, ms, m1, ad};
    for (size_t i = 0; i < MP_ARRAY_LEN(members); i++)
        if (!cand(c, members[i], MP_PART_BODY)) return;
    int rx = x, y = out0(c, ad);
    int64_t head = d >= 0 ? d : 2 * s1b;
    /* partial: x = Slice(q, 0, rot), y' = Concat(y, Slice(q, rot, end)) */
    int64_t pa, pb;
    int px = prod(c, x), fc = sole(c, y);
    if (px >= 0 && free_node(c, px) && slice_last(c, px, &pa, &pb) && pa == 0 && fc >= 0 && concat_last(c, fc) &&
        NODE(c, fc)->n_in == 2 && NODE(c, fc)->in[0] == y) {
        int q = in_at(c, px, 0), pass = prod(c, NODE(c, fc)->in[1]);
        int64_t qa, qb;
        if (pass >= 0 && free_node(c, pass) && slice_last(c, pass, &qa, &qb) && in_at(c, pass, 0) == q && qa == pb &&
            sole(c, NODE(c, fc)->in[1]) == fc) {
            /* x's readers: the rotation's own (s1, s2, m1) */
            cand(c, px, MP_PART_BODY);
            cand(c, pass, MP_PART_BODY);
            cand(c, fc, MP_PART_BODY);
            rx = q;
            y = out0(c, fc);
            head = last_dim(c, q);
        }
    }
    mp_protary *r = rot_new(c, MP_FORM_DECOMPOSED, rx, y);
    if (!r) return;
    r->cos = cosv;
    r->sin = sinv;
    r->rot_dim = 2 * s1b;
    r->head_dim = head;
    cand_accept(c, MP_PAT_ROTARY, c->n_rot - 1, &r->first, &r->n);
}

/* ---- 4. attention ---- */

static mp_pattn *attn_new(pctx *c, int form) {
    mp_pattn *a = PUSH(c, c->attn, c->n_attn, c->cap_attn);
    if (!a) return NULL;
    a->form = form;
    a->op = a->qk = a->softmax = a->pv = -1;
    a->q = a->k = a->v = a->k_kv = a->v_kv = a->y = -1;
    a->batch = a->heads = a->kv_heads = a->head_dim = a->v_head_dim = -1;
    a->seq_q = a->seq_k = MP_DIM_ANON;
    a->mask = MP_MASK_NONE;
    a->mask_v = -1;
    a->window = 0;
    a->mask_fill = NAN;
    a->score_scale = 1.0;
    a->scale = 0;
    a->rotary_q = a->rotary_k = -1;
    a->block = -1;
    return a;
}

/* Is mask value v causal: built (within a few dozen nodes) from Trilu, or
 * from a comparison (LessOrEqual, Less, GreaterOrEqual, Greater) of two
 * operands that both come from Range (key index against query index), or
 * a constant of causal contents (const_causal). */
static bool depends_on_range(const pctx *c, int v, int depth) {
    if (v < 0 || depth > 12) return false;
    int p = prod(c, v);
    if (p < 0) return false;
    const mp_node *n = NODE(c, p);
    if (is_op(n, "Range")) return true;
    if (!(is_op(n, "Unsqueeze") || is_op(n, "Reshape") || is_op(n, "Expand") || is_op(n, "Cast") ||
          is_op(n, "Slice") || is_op(n, "Add") || is_op(n, "Sub") || is_op(n, "Squeeze") || is_op(n, "Identity")))
        return false;
    for (int i = 0; i < n->n_in; i++)
        if (depends_on_range(c, n->in[i], depth + 1)) return true;
    return false;
}

static bool mask_elem(const mp_value *val, const mp_tview *tv, int64_t k, double *x) {
    if (!tv) {
        *x = val->fv ? val->fv[k] : (double)val->iv[k];
        return true;
    }
    if (k >= tv->n) return false;
    *x = mp_tview_get(tv, k);
    return true;
}

/* How a mask's values say a key is allowed: an additive mask's 0 (the
 * rest very negative), or a condition's true or false (Where's fill on
 * false: torch.where(mask, scores, min); on true: masked_fill(mask, min)). */
enum { MASK_ADDITIVE, MASK_TRUE_MASKED, MASK_TRUE_ALLOWED };

static bool mask_allowed(int pol, double x) {
    return pol == MASK_ADDITIVE ? x > -1e4 : pol == MASK_TRUE_ALLOWED ? x != 0 : x == 0;
}

/* A constant mask whose contents the inference holds or an initializer
 * keeps (a causal mask built in the model from constants, folded by the
 * exporter: nn.MultiheadAttention given attn_mask=torch.triu(...); a
 * registered tril buffer, GPT-2's and GPT-J's `bias`): key j allowed when
 * j <= query i (the keys' extra leading positions allowed too), masked
 * elsewhere (additive: 0 and -inf or below -1e4), in every leading block;
 * or a sliding window of that (Mistral's, Gemma-2's local layers: key j
 * allowed when i - W < j <= i, the same W on every row), still causal.
 * Returns -1 when not causal, 0 causal over every earlier key, else the
 * window W. */
static int64_t mask_window(const mp_value *val, const mp_tview *tv, int pol) {
    int64_t n = mp_value_numel(val);
    int64_t sq = val->dims[val->rank - 2], sk = val->dims[val->rank - 1], off = sk - sq;
    if (sq < 2 || sk < sq || n % (sq * sk)) return -1;
    /* the window: the last row's allowed keys (all earlier keys: sk) */
    int64_t w = 0;
    double x;
    for (int64_t j = 0; j < sk; j++) {
        if (!mask_elem(val, tv, (sq - 1) * sk + j, &x)) return -1;
        w += mask_allowed(pol, x);
    }
    if (w < 1) return -1;
    for (int64_t b = 0; b < n; b += sq * sk)
        for (int64_t i = 0; i < sq; i++)
            for (int64_t j = 0; j < sk; j++) {
                if (!mask_elem(val, tv, b + i * sk + j, &x)) return -1;
                bool allowed = mask_allowed(pol, x), want = j <= i + off && j > i + off - w;
                if (allowed != want || (pol == MASK_ADDITIVE && allowed && x != 0)) return -1;
            }
    return w >= sk ? 0 : w;
}

/* what inference read, else the initializer's values where they live (the
 * model's bytes, or its external data file) */
static int64_t const_causal(const pctx *c, int v, int pol) {
    const mp_value *val = VAL(c, v);
    int64_t n = mp_value_numel(val);
    bool cond = pol != MASK_ADDITIVE;
    if (n <= 0 || val->rank < 2 || (cond ? val->dtype != MP_DT_BOOL : !mp_dtype_is_float(val->dtype))) return -1;
    if (val->kn > 0 && val->kn == n && (val->fv || val->iv)) return mask_window(val, NULL, pol);
    if (!(val->flags & MP_VAL_INIT) || !val->init) return -1;
    mp_tview tv;
    if (!mp_tview_open(c->m, val->init, &tv)) return -1;
    int64_t w = tv.n == n ? mask_window(val, &tv, pol) : -1;
    mp_tview_close(&tv);
    return w;
}

/* Operators a mask goes through unchanged in meaning: a causal table
 * sliced to the keys and queries at hand (GPT-2's bias[:, :, k - q : k,
 * :k]), cast, viewed. */
static bool mask_pass(const mp_node *n) {
    return is_op(n, "Slice") || is_op(n, "Cast") || is_op(n, "Reshape") || is_op(n, "Unsqueeze") ||
           is_op(n, "Squeeze") || is_op(n, "Expand") || is_op(n, "Identity");
}

/* An index operand of a mask's comparison: a Range, viewed and offset by
 * constants (`kv_idx`, `q_idx - sliding_window`, `(cond + 1).view(-1, 1)`).
 * Returns its axis, 1 for the keys' (it varies along the last dim), 2 for
 * the queries' (its last dim 1, the one before not), 0 when not such an
 * operand or its shape does not say; *off is the constant added. */
static int index_operand(const pctx *c, int v, int64_t *off) {
    const mp_value *x = v >= 0 ? VAL(c, v) : NULL;
    if (!x || x->rank < 1) return 0;
    int axis = x->rank >= 2 && x->dims[x->rank - 1] == 1 && x->dims[x->rank - 2] != 1 ? 2
               : x->dims[x->rank - 1] != 1                                        ? 1
                                                                                  : 0;
    *off = 0;
    for (int depth = 0; axis && depth < 12; depth++) {
        int p = prod(c, v);
        if (p < 0) return 0;
        const mp_node *n = NODE(c, p);
        if (is_op(n, "Range")) return axis;
        double d;
        if ((is_op(n, "Add") || is_op(n, "Sub")) && n->n_in == 2) {
            int k = scalar(c, n->in[1], &d) ? 1 : is_op(n, "Add") && scalar(c, n->in[0], &d) ? 0 : -1;
            if (k < 0 || d != floor(d) || fabs(d) > 1e9) return 0;
            *off += is_op(n, "Sub") ? -(int64_t)d : (int64_t)d;
            v = n->in[1 - k];
        } else if (is_op(n, "Unsqueeze") || is_op(n, "Reshape") || is_op(n, "Expand") || is_op(n, "Cast") ||
                   is_op(n, "Squeeze") || is_op(n, "Identity")) {
            v = n->in[0];
        } else {
            return 0;
        }
    }
    return 0;
}

/* The sliding window a mask's comparison or triangle sets, 0 when none:
 * a bound on the key index kv at c below the query's, kv OP q + c with c
 * <= -1, whatever the mask's sense (a region below the diagonal cannot be
 * what a causal attention allows, so `kv <= q + c` is what it masks):
 * `kv > q + c` allowed or `kv <= q + c` masked leave -c keys, `kv >= q +
 * c` or `kv < q + c` one more. transformers' sliding_window_overlay is
 * `kv_idx > q_idx - W` (W keys); its older masks a triangle,
 * tril(ones, diagonal=-W - 1) masked (j <= i + k: -k keys) or triu(mask,
 * diagonal=-W) kept (j >= i + k: 1 - k keys). Read from the operators
 * and constants, so at any length, where the mask's contents are too
 * many to compute. */
static int64_t bound_window(const pctx *c, const mp_node *pn) {
    double d;
    if (is_op(pn, "Trilu")) {
        int64_t k = 0;
        if (pn->n_in > 1 && pn->in[1] >= 0) {
            if (!scalar(c, pn->in[1], &d) || d != floor(d) || fabs(d) > 1e12) return 0;
            k = (int64_t)d;
        }
        bool upper = mp_attr_i(pn, "upper", 1) != 0;
        return k <= -1 ? (upper ? 1 - k : -k) : 0;
    }
    bool gt = is_op(pn, "Greater"), ge = is_op(pn, "GreaterOrEqual"), lt = is_op(pn, "Less"),
         le = is_op(pn, "LessOrEqual");
    if (!(gt || ge || lt || le) || pn->n_in != 2) return 0;
    int64_t o0, o1;
    int a0 = index_operand(c, pn->in[0], &o0), a1 = index_operand(c, pn->in[1], &o1);
    if (!a0 || !a1 || a0 == a1) return 0;
    /* as kv OP q + off: swap the comparison when the keys are on the right */
    if (a0 == 2) {
        bool g = gt, e = ge;
        gt = lt, ge = le, lt = g, le = e;
    }
    int64_t off = a0 == 1 ? o1 - o0 : o0 - o1;
    if (off > -1) return 0;
    return gt || le ? -off : 1 - off;
}

static bool mask_causal(const pctx *c, int v, int64_t *window, int pol) {
    /* breadth first over the mask's producers, each node once; a constant
     * is judged in the mask's own sense while only pass operators lead to
     * it (`clean`), an additive one also past them, as before. Built from
     * a triangle or from comparisons of indices, the whole mask is read:
     * the causal bound and a window's (bound_window) are different
     * operators of it, the narrowest window kept. */
    int queue[256], head = 0, n = 0;
    bool causal = false;
    int64_t narrowest = 0;
    int sense[256];   /* the sense a value is read in (MASK_*), -1 not clean */
    if (v >= 0) queue[n] = v, sense[n++] = pol;
    while (head < n) {
        int u = queue[head];
        int qs = sense[head++];
        bool cl = qs >= 0;
        int64_t w = cl || pol == MASK_ADDITIVE ? const_causal(c, u, cl ? qs : MASK_ADDITIVE) : -1;
        if (w >= 0) {
            *window = narrowest && (!w || narrowest < w) ? narrowest : w;
            return true;
        }
        int p = prod(c, u);
        if (p < 0) continue;
        bool again = false;
        for (int i = 0; i < head - 1 && !again; i++) again = prod(c, queue[i]) == p;
        if (again) continue;
        const mp_node *pn = NODE(c, p);
        bool tri = is_op(pn, "Trilu") || is_ms(pn, "Trilu");
        if (tri || ((is_op(pn, "LessOrEqual") || is_op(pn, "Less") || is_op(pn, "GreaterOrEqual") ||
                     is_op(pn, "Greater")) &&
                    pn->n_in == 2 && depends_on_range(c, pn->in[0], 0) && depends_on_range(c, pn->in[1], 0))) {
            causal = true;
            int64_t bw = bound_window(c, pn);
            if (bw > 0 && (!narrowest || bw < narrowest)) narrowest = bw;
            if (!tri) continue; /* a triangle of a triangle: read on */
        }
        /* the sense each input is read in: a pass operator's first input
         * as its output; Not's flipped; an And of allowed keys (a causal
         * table and a padding mask: still no later key) and an Or of masked
         * ones, every input as the output; masked_fill's Where of a very
         * negative fill (a bool condition under an additive mask): its
         * condition masks where true, or allows where the fill is the
         * other branch */
        double d;
        int in_sense[3] = {-1, -1, -1};
        bool every = false;
        if (cl && mask_pass(pn)) {
            in_sense[0] = qs;
        } else if (cl && qs != MASK_ADDITIVE && is_op(pn, "Not")) {
            in_sense[0] = qs == MASK_TRUE_ALLOWED ? MASK_TRUE_MASKED : MASK_TRUE_ALLOWED;
        } else if (cl && ((qs == MASK_TRUE_ALLOWED && is_op(pn, "And")) || (qs == MASK_TRUE_MASKED && is_op(pn, "Or")))) {
            every = true;
        } else if (cl && qs == MASK_ADDITIVE && is_op(pn, "Where") && pn->n_in == 3) {
            if (scalar(c, pn->in[1], &d) && d < -1e4) in_sense[0] = MASK_TRUE_MASKED;
            else if (scalar(c, pn->in[2], &d) && d < -1e4) in_sense[0] = MASK_TRUE_ALLOWED;
        }
        for (int i = 0; i < pn->n_in && n < (int)MP_ARRAY_LEN(queue); i++) {
            int in = pn->in[i];
            if (in < 0 || (VAL(c, in)->flags & MP_VAL_INPUT)) continue;
            int is = every ? qs : i < 3 ? in_sense[i] : -1;
            bool init = (VAL(c, in)->flags & MP_VAL_INIT) != 0;
            if (init && is < 0) continue; /* the sliced table itself, not the slice's bounds */
            queue[n] = in, sense[n++] = is;
        }
    }
    if (causal) *window = narrowest;
    return causal;
}

/* A Reshape of the scores that leaves their last two dims (queries x
 * keys) as they are and regroups the leading ones: torchvision's Swin
 * views its windows' scores [B*W, H, N, N] as [B, W, H, N, N] to add the
 * shifted windows' mask, and back. A view in PyTorch, nothing to a fused
 * kernel given the mask in the scores' layout. */
static bool scores_view(const pctx *c, int k) {
    const mp_node *n = NODE(c, k);
    if (!is_op(n, "Reshape") || n->n_in < 1 || n->n_out < 1 || n->in[0] < 0 || n->out[0] < 0 || !free_node(c, k))
        return false;
    const mp_value *x = VAL(c, n->in[0]), *y = VAL(c, n->out[0]);
    if (x->rank < 3 || y->rank < 3 || sole(c, n->in[0]) != k) return false;
    for (int d = 1; d <= 2; d++)
        if (x->dims[x->rank - d] < 1 || x->dims[x->rank - d] != y->dims[y->rank - d]) return false;
    return true;
}

/* A product of two activations as attention writes it: MatMul, or an
 * Einsum that is one batched product over leading batch letters, its first
 * operand as it is (ops/kernel.h's mp_einsum_bmm_of: torchvision's MaxViT
 * "bghid,bghjd->bghij" then "bghij,bghjd->bghid", einops-style code).
 * *b_rows: the second operand given as [.., n, k], K as it is, the product
 * contracting both last dims (no transposition to find). */
static bool product2(const pctx *c, int k, bool *b_rows) {
    const mp_node *n = NODE(c, k);
    if (b_rows) *b_rows = false;
    if (is_op(n, "MatMul")) return true;
    mp_einsum_bmm e;
    if (!is_op(n, "Einsum") || !mp_einsum_bmm_of(c->g, n, &e) || e.ta) return false;
    if (b_rows) *b_rows = e.tb;
    return true;
}

/* A step the scores can take between their product and the softmax: a
 * scale, a mask, a cast, a softcap's Tanh. */
static bool score_step(const mp_node *n) {
    return is_op(n, "Mul") || is_op(n, "Div") || is_op(n, "Add") || is_op(n, "Where") || is_op(n, "Cast") ||
           is_op(n, "Tanh");
}

/* Is a product of two activations behind v, through a few scales, masks,
 * casts and views (each node's non-constant inputs)? */
static bool reaches_product(const pctx *c, int v, int depth) {
    int p = v >= 0 && depth < 6 ? prod(c, v) : -1;
    if (p < 0) return false;
    const mp_node *n = NODE(c, p);
    if (product2(c, p, NULL)) return true;
    if (!score_step(n) && !is_op(n, "Reshape")) return false;
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] >= 0 && !mp_value_const(c->g, n->in[i]) && reaches_product(c, n->in[i], depth + 1)) return true;
    return false;
}

/* The operand of a mask or scale node that carries the scores: not a
 * constant, produced by the score product or another node of the chain. */
static int scores_operand(const pctx *c, int k, int *other_v) {
    const mp_node *n = NODE(c, k);
    int best = -1, oth = -1, rank = 0; /* 3 a product, 2 another step, 1 a view */
    int lo = is_op(n, "Where") ? 1 : 0;
    for (int i = lo; i < n->n_in; i++) {
        int u = n->in[i];
        if (u < 0 || mp_value_const(c->g, u)) continue;
        int p = prod(c, u);
        if (p < 0) continue;
        const mp_node *pn = NODE(c, p);
        int r = product2(c, p, NULL) ? 3 : score_step(pn) ? 2 : scores_view(c, p) ? 1 : 0;
        if (!r || sole(c, u) != k) continue;
        /* two steps alike (Bloom's baddbmm: alpha * Q.K^T + beta * ALiBi,
         * in either order): the one the score product is behind */
        if (r > rank || (r == rank && r == 2 && !reaches_product(c, best, 0) && reaches_product(c, u, 0)))
            best = u, rank = r;
    }
    if (best < 0) return -1;
    for (int i = lo; i < n->n_in; i++)
        if (n->in[i] != best) oth = n->in[i];
    if (other_v) *other_v = oth;
    return best;
}

/* K and V before a grouped-query repetition: Reshape(Expand(Unsqueeze(kv,
 * 2))) to [B, Hkv * rep, S, D] (HF's repeat_kv as both exporters write
 * it), Tile too. Adds the nodes as REPEAT members; returns kv (v itself
 * without). */
static int unrepeat(pctx *c, int v) {
    int rs = prod_op(c, v, "Reshape");
    if (rs >= 0 && free_node(c, rs)) {
        int ex = prod_op(c, in_at(c, rs, 0), "Expand");
        if (ex >= 0 && free_node(c, ex) && sole_data(c, out0(c, ex)) == rs) {
            int un = prod_op(c, in_at(c, ex, 0), "Unsqueeze");
            if (un >= 0 && free_node(c, un) && sole_data(c, out0(c, un)) == ex) {
                int kv = in_at(c, un, 0);
                const mp_value *a = VAL(c, kv), *b = VAL(c, v);
                if (a->rank == 4 && b->rank == 4) {
                    cand(c, rs, MP_PART_REPEAT);
                    cand(c, ex, MP_PART_REPEAT);
                    cand(c, un, MP_PART_REPEAT);
                    return kv;
                }
            }
        }
    }
    int tl = prod_op(c, v, "Tile");
    if (tl >= 0 && free_node(c, tl) && VAL(c, in_at(c, tl, 0))->rank == 4 && VAL(c, v)->rank == 4) {
        cand(c, tl, MP_PART_REPEAT);
        return in_at(c, tl, 0);
    }
    return v;
}

/* An operand v of the score product qk made by a free Mul or Div of a
 * non-constant value by a scalar constant, read by qk alone: that node
 * becomes a candidate as part, *x the value scaled, *s the factor (both
 * unchanged when there is no such scale). */
static void operand_scale(pctx *c, int qk, int v, int part, int *x, double *s) {
    int p = prod(c, v);
    double f;
    if (p >= 0 && free_node(c, p) && sole_data(c, v) == qk && NODE(c, p)->n_in == 2) {
        const mp_node *pn = NODE(c, p);
        int x0 = mp_value_const(c->g, pn->in[0]) ? pn->in[1] : pn->in[0];
        /* a scale whose constant a weightless file lacks: a scale of
         * unknown value (the attention's scale then reads null) */
        bool inv;
        bool absent = absent_scalar(c, scale_operand(c, p, x0, &inv));
        if (absent) f = NAN;
        if ((absent || scaled_by(c, p, x0, &f)) && !mp_value_const(c->g, x0)) {
            cand(c, p, part);
            *x = x0;
            *s = f;
        }
    }
}

/* Decomposed attention around Softmax sm. */
static void attn_decomposed(pctx *c, int sm) {
    const mp_node *sn = NODE(c, sm);
    if (!free_node(c, sm) || !is_op(sn, "Softmax") || sn->n_in < 1 || sn->n_out < 1 || sn->in[0] < 0) return;
    const mp_value *si = VAL(c, sn->in[0]);
    if (si->rank < 3) return;
    bool square = si->dims[si->rank - 1] == si->dims[si->rank - 2] && si->dims[si->rank - 1] != MP_DIM_ANON;
    bool looks = si->rank == 4 || square; /* what a missed attention would look like */
    if (axis_of(c, sm, si->rank) != si->rank - 1) {
        if (looks) miss(c, sm, MP_PAT_ATTN, "the softmax is not over the last axis");
        return;
    }
    cand_reset(c);
    cand(c, sm, MP_PART_SOFTMAX);
    int v = sn->in[0], qk = -1, mask = MP_MASK_NONE, mask_v = -1;
    int masks[8], mask_pol[8], n_masks = 0; /* every mask's value and sense: causal when one is */
    double sscale = 1.0, fill = NAN, last_f = NAN, softcap = 0;
    bool fill_true = false, where = false;
    if (sole(c, v) != sm) {
        if (looks) miss(c, sm, MP_PAT_ATTN, "the scores are read outside the attention");
        return;
    }
    for (int hop = 0; hop < 12 && v >= 0; hop++) {
        int p = prod(c, v);
        if (p < 0) break;
        const mp_node *pn = NODE(c, p);
        if (product2(c, p, NULL)) {
            qk = p;
            break;
        }
        if (!free_node(c, p)) break;
        double f;
        int ov = -1, nv;
        if ((is_op(pn, "Mul") || is_op(pn, "Div")) && pn->n_in == 2 &&
            (nv = scores_operand(c, p, NULL)) >= 0 && scaled_by(c, p, nv, &f)) {
            sscale *= f;
            cand(c, p, MP_PART_SCALE);
            v = nv;
            last_f = f;
            continue;
        } else if (is_op(pn, "Tanh") && pn->n_in == 1 && pn->in[0] >= 0 && softcap == 0 &&
                   sole(c, pn->in[0]) == p && !mp_value_const(c->g, pn->in[0])) {
            /* softcapping: tanh(s / c) * c, the * c just read (the two
             * scales cancel in the product of scales) */
            softcap = isfinite(last_f) && last_f > 0 ? last_f : NAN;
            cand(c, p, MP_PART_SOFTCAP);
            v = pn->in[0];
        } else if (is_op(pn, "Add") && pn->n_in == 2 && (nv = scores_operand(c, p, &ov)) >= 0 &&
                   n_masks < (int)MP_ARRAY_LEN(masks)) {
            /* additive masks add up (Swin: the relative position bias, then
             * the shifted windows' mask; Bloom: ALiBi's bias, then the
             * causal masked_fill); mask and mask_v are the nearest the
             * softmax's */
            if (mask == MP_MASK_NONE) mask_v = ov, mask = MP_MASK_ADD;
            mask_pol[n_masks] = MASK_ADDITIVE;
            masks[n_masks++] = ov;
            cand(c, p, MP_PART_MASK);
            v = nv;
        } else if (scores_view(c, p)) {
            cand(c, p, MP_PART_VIEW);
            v = pn->in[0];
        } else if (is_op(pn, "Where") && pn->n_in == 3 && (nv = scores_operand(c, p, &ov)) >= 0 && !where &&
                   n_masks < (int)MP_ARRAY_LEN(masks)) {
            if (mask == MP_MASK_NONE) mask = MP_MASK_WHERE, mask_v = pn->in[0];
            where = true;
            fill_true = pn->in[2] == nv;
            mask_pol[n_masks] = fill_true ? MASK_TRUE_MASKED : MASK_TRUE_ALLOWED;
            masks[n_masks++] = pn->in[0];
            if (!scalar(c, ov, &fill)) fill = NAN;
            cand(c, p, MP_PART_MASK);
            v = nv;
        } else if (float_cast(c, p) && sole(c, pn->in[0]) == p) {
            cand(c, p, MP_PART_CAST);
            v = pn->in[0];
        } else {
            break;
        }
        last_f = NAN; /* a softcap's * c is the step right before its Tanh */
    }
    if (qk < 0 || NODE(c, qk)->n_in != 2 || !free_node(c, qk) || sole(c, out0(c, qk)) < 0) {
        if (looks) miss(c, sm, MP_PAT_ATTN, "no product Q.K^T before the softmax (through scale, masks, views and casts)");
        return;
    }
    cand(c, qk, MP_PART_QK);
    /* on to the product with V */
    int pv = -1, guard = 0, y = out0(c, sm);
    double gval = 0;
    bool dropout = false;
    for (int hop = 0; hop < 6 && pv < 0; hop++) {
        int nu;
        const int *u = mp_uses(c->g, y, &nu);
        if (VAL(c, y)->flags & MP_VAL_OUTPUT) break;
        if (nu == 2 && !guard) {
            int isn = -1, wh = -1;
            for (int i = 0; i < 2; i++) {
                const mp_node *un = NODE(c, u[i]);
                if (is_op(un, "IsNaN") && un->n_in == 1) isn = u[i];
                else if (is_op(un, "Where") && un->n_in == 3) wh = u[i];
            }
            if (isn < 0 || wh < 0 || sole(c, out0(c, isn)) != wh || in_at(c, wh, 0) != out0(c, isn) ||
                in_at(c, wh, 2) != y)
                break;
            /* the guard's fill (0 in PyTorch's decomposition); absent from a
             * weightless file: not known (a run would not fuse the guard) */
            if (!scalar(c, in_at(c, wh, 1), &gval)) {
                if (!absent_scalar(c, in_at(c, wh, 1))) break;
                gval = NAN;
            }
            cand(c, isn, MP_PART_GUARD);
            cand(c, wh, MP_PART_GUARD);
            guard = 1;
            y = out0(c, wh);
            continue;
        }
        if (nu != 1 || VAL(c, y)->n_consumers != 1) break;
        const mp_node *un = NODE(c, u[0]);
        bool v_rows;
        if (product2(c, u[0], &v_rows) && !v_rows && un->n_in == 2 && un->in[0] == y && un->in[1] != y) {
            pv = u[0];
        } else if (float_cast(c, u[0])) {
            cand(c, u[0], MP_PART_CAST);
            y = un->out[0];
        } else if (scores_view(c, u[0])) {
            /* the probabilities viewed back to the product's batch (Bloom's
             * [B, H, S, S] as [B*H, S, S] for bmm) */
            cand(c, u[0], MP_PART_VIEW);
            y = un->out[0];
        } else if (is_op(un, "Dropout") && un->in[0] == y) {
            if (un->n_out > 1 && un->out[1] >= 0 && (VAL(c, un->out[1])->n_consumers > 0 ||
                                                     (VAL(c, un->out[1])->flags & MP_VAL_OUTPUT)))
                break;
            cand(c, u[0], MP_PART_DROPOUT);
            dropout = true;
            y = un->out[0];
        } else {
            break;
        }
    }
    if (pv < 0 || !free_node(c, pv)) {
        miss(c, sm, MP_PAT_ATTN, "the probabilities do not flow (through guard, casts, dropout) into one product "
                                 "with V");
        return;
    }
    cand(c, pv, MP_PART_PV);
    int form = guard ? MP_FORM_SDPA : MP_FORM_DECOMPOSED;
    /* Q: through a scale right before the product */
    int A = in_at(c, qk, 0), B = in_at(c, qk, 1), q = A, kt = B, k = -1;
    double qs = 1.0, ks = 1.0, f;
    operand_scale(c, qk, A, MP_PART_Q_SCALE, &q, &qs);
    /* a query scaled earlier (OPT scales its projection): through views */
    if (qs == 1.0) {
        int w = q;
        for (int hop = 0; hop < 3; hop++) {
            int p = prod(c, w);
            if (p < 0 || sole_data(c, w) < 0) break;
            const mp_node *pn = NODE(c, p);
            if (is_op(pn, "Reshape") || is_op(pn, "Transpose")) {
                w = pn->in[0];
                continue;
            }
            if (pn->n_in == 2 && (is_op(pn, "Mul") || is_op(pn, "Div"))) {
                int x0 = mp_value_const(c->g, pn->in[0]) ? pn->in[1] : pn->in[0];
                if (scaled_by(c, p, x0, &f)) qs = f;
            }
            break;
        }
    }
    /* K^T: a scale, then the transposition */
    operand_scale(c, qk, B, MP_PART_K_SCALE, &kt, &ks);
    if (qs != 1.0 && ks != 1.0) form = MP_FORM_SDPA;
    bool k_rows;
    product2(c, qk, &k_rows);
    if (k_rows) k = kt; /* an Einsum given K as it is */
    int tp = k_rows ? -1 : prod_op(c, kt, "Transpose");
    const mp_value *ktv = VAL(c, kt);
    if (tp >= 0 && free_node(c, tp) && sole_data(c, kt) >= 0) {
        const int64_t *perm;
        int np = mp_attr_ints(NODE(c, tp), "perm", &perm);
        int r = ktv->rank;
        if (np == r && r >= 3 && perm[r - 2] == r - 1 && perm[r - 1] != r - 1) {
            cand(c, tp, MP_PART_K_T);
            k = in_at(c, tp, 0);
        }
    }
    int rs2 = k_rows ? -1 : prod_op(c, kt, "Reshape");
    if (k < 0 && rs2 >= 0 && free_node(c, rs2) && sole_data(c, kt) >= 0) {
        /* K^T viewed to the product's batch: the dynamo exporter's
         * [B, H, S, D] -> [B*H, S, D] -> ^T -> [B*H, D, S]; Bloom's
         * [B, S, H, D] permuted (0, 2, 3, 1) to [B, H, D, S] -> [B*H, D, S].
         * The transposition puts the head dim second to last. */
        int t3 = prod_op(c, in_at(c, rs2, 0), "Transpose");
        int rs1 = t3 >= 0 ? prod_op(c, in_at(c, t3, 0), "Reshape") : -1;
        const int64_t *perm;
        int np = t3 >= 0 ? mp_attr_ints(NODE(c, t3), "perm", &perm) : 0;
        if (t3 >= 0 && free_node(c, t3) && sole_data(c, out0(c, t3)) == rs2 && np >= 3 &&
            perm[np - 2] == np - 1 && perm[np - 1] != np - 1) {
            bool dyn = np == 3 && rs1 >= 0 && free_node(c, rs1) && sole_data(c, out0(c, rs1)) == t3;
            cand(c, rs2, MP_PART_K_T);
            cand(c, t3, MP_PART_K_T);
            if (dyn) cand(c, rs1, MP_PART_K_T);
            k = in_at(c, dyn ? rs1 : t3, 0);
        }
    }
    int vv = in_at(c, pv, 1);
    int k_kv = k >= 0 ? unrepeat(c, k) : -1;
    int v_kv = unrepeat(c, vv);
    mp_pattn *a = attn_new(c, form);
    if (!a) return;
    a->qk = qk;
    a->softmax = sm;
    a->pv = pv;
    a->q = q;
    a->k = k;
    a->v = vv;
    a->k_kv = k_kv;
    a->v_kv = v_kv;
    a->y = out0(c, pv);
    a->mask = mask;
    a->mask_v = mask_v;
    a->mask_fill = fill;
    a->mask_fill_on_true = fill_true;
    for (int i = 0; i < n_masks && !a->causal; i++) a->causal = mask_causal(c, masks[i], &a->window, mask_pol[i]);
    a->score_scale = sscale;
    a->scale = sscale * qs * ks;
    a->softcap = softcap;
    a->guard = guard != 0;
    a->guard_value = gval;
    a->dropout = dropout;
    const mp_value *qv = VAL(c, q), *yv = VAL(c, a->y), *vvv = VAL(c, vv);
    if (qv->rank >= 3) {
        a->head_dim = qv->dims[qv->rank - 1];
        a->seq_q = qv->dims[qv->rank - 2];
    }
    if (ktv->rank >= 2) a->seq_k = ktv->dims[ktv->rank - (k_rows ? 2 : 1)];
    if (vvv->rank >= 1) a->v_head_dim = vvv->dims[vvv->rank - 1];
    if (qv->rank >= 4) {
        /* [B, H, S, D], or [B, G, H, S, D] (MaxViT's windows or grid
         * cells G): the heads third from last, the rest the batch */
        a->batch = mp_dims_product(qv->dims, qv->rank - 3);
        a->heads = qv->dims[qv->rank - 3] >= 0 ? qv->dims[qv->rank - 3] : -1;
    } else if (yv->rank == 3) {
        /* [B*H, S, Dv]: the heads from the reshape that splits them out */
        int rn = sole_op(c, a->y, "Reshape");
        const mp_value *r = rn >= 0 ? VAL(c, out0(c, rn)) : NULL;
        if (r && r->rank == 4 && r->dims[2] == yv->dims[1] && r->dims[3] == yv->dims[2] && r->dims[1] > 0) {
            a->heads = r->dims[1];
            a->batch = r->dims[0];
        }
    }
    const mp_value *kkv = k_kv >= 0 ? VAL(c, k_kv) : NULL;
    if (k_kv >= 0 && k_kv != k && kkv->rank == 4) a->kv_heads = kkv->dims[1] >= 0 ? kkv->dims[1] : -1;
    else if (v_kv != vv && VAL(c, v_kv)->rank == 4) a->kv_heads = VAL(c, v_kv)->dims[1];
    else a->kv_heads = a->heads;
    /* K and V broadcast across the heads by the products themselves
     * (multi-query attention written without repeat_kv: Q [B, H, S, D]
     * against K^T [B, 1, D, S]): one KV head */
    const mp_value *kb = VAL(c, B), *vb = VAL(c, vv);
    if (a->heads > 1 && a->kv_heads == a->heads && kb->rank >= 4 && kb->rank == qv->rank &&
        kb->dims[kb->rank - 3] == 1 && vb->rank == kb->rank && vb->dims[vb->rank - 3] == 1)
        a->kv_heads = 1;
    if (a->heads < 0 || a->head_dim < 0) a->kv_heads = a->kv_heads > 0 ? a->kv_heads : -1;
    cand_accept(c, MP_PAT_ATTN, c->n_attn - 1, &a->first, &a->n);
}

/* The attention operators. */
static void attn_whole(pctx *c, int k) {
    const mp_node *n = NODE(c, k);
    bool std = is_op(n, "Attention");
    bool msa = is_ms(n, "Attention"), mha = is_ms(n, "MultiHeadAttention"), gqa = is_ms(n, "GroupQueryAttention");
    if (!(std || msa || mha || gqa) || n->n_out < 1) return;
    mp_attn_dims d;
    mp_ctx cx = {c->m, c->g, &c->g->nodes[k], k, NULL};
    if (!mp_attention_dims(&cx, &d)) {
        miss(c, k, MP_PAT_ATTN, "the attention operator's inputs do not give its dims");
        return;
    }
    cand_reset(c);
    cand(c, k, MP_PART_OP);
    mp_pattn *a = attn_new(c, std ? MP_FORM_OP : MP_FORM_CONTRIB);
    if (!a) return;
    a->op = k;
    a->y = n->out[0];
    if (!msa) {
        a->q = in_at(c, k, 0);
        a->k = a->k_kv = in_at(c, k, 1) >= 0 ? in_at(c, k, 1) : a->q; /* packed QKV: in the query */
        a->v = a->v_kv = in_at(c, k, 2) >= 0 ? in_at(c, k, 2) : a->k;
    }
    a->batch = d.b;
    a->heads = d.hq;
    a->kv_heads = d.hkv;
    a->head_dim = d.dk;
    a->v_head_dim = d.dv;
    a->seq_q = d.sq;
    a->seq_k = d.t;
    a->causal = d.causal;
    a->scale = d.scale;
    a->score_scale = 1.0;
    int mi = std ? 3 : msa ? 3 : mha ? 4 : -1;
    int bias_i = std ? -1 : msa ? 5 : mha ? 5 : 10;
    if (mi >= 0 && in_at(c, k, mi) >= 0) {
        a->mask_v = in_at(c, k, mi);
        a->mask = VAL(c, a->mask_v)->dtype == MP_DT_BOOL || !is_float(c, a->mask_v) ? MP_MASK_BOOL : MP_MASK_ADD;
    } else if (bias_i >= 0 && in_at(c, k, bias_i) >= 0) {
        a->mask_v = in_at(c, k, bias_i);
        a->mask = MP_MASK_ADD;
    } else if (d.causal) {
        a->mask = MP_MASK_CAUSAL_OP;
    }
    cand_accept(c, MP_PAT_ATTN, c->n_attn - 1, &a->first, &a->n);
}

/* ---- 5. gated activations, the MLP's ReLU ---- */

static void gated(pctx *c, int ai) {
    mp_pact a = c->acts[ai];
    if (a.outer >= 0 || a.inner >= 0) return;
    int kind = a.kind == MP_ACT_SILU ? MP_ACT_SWIGLU
             : (a.kind == MP_ACT_GELU || a.kind == MP_ACT_GELU_TANH) ? MP_ACT_GEGLU : -1;
    if (kind < 0) return;
    int mu = sole_op(c, a.y, "Mul");
    if (mu < 0 || !free_node(c, mu)) return;
    int up = other(c, mu, a.y);
    if (up < 0 || mp_value_const(c->g, up) || !same_shape(c, up, a.y)) return;
    cand_reset(c);
    cand(c, mu, MP_PART_GATE);
    mp_pact *g = act_new(c, kind, a.form, a.x, out0(c, mu));
    if (!g) return;
    g->up = up;
    g->act_out = a.y;
    g->inner = ai;
    c->acts[ai].outer = c->n_acts - 1;
    act_accept(c, g);
}

/* Layout operators a value goes through between a weight product and
 * what reads it. */
static bool layout_op(const mp_node *n) {
    return is_op(n, "Reshape") || is_op(n, "Transpose") || is_op(n, "Squeeze") || is_op(n, "Unsqueeze") ||
           is_op(n, "Identity") || is_op(n, "Cast") || is_op(n, "Split") || is_op(n, "Slice") ||
           is_op(n, "Flatten") || is_op(n, "CastLike");
}

/* Per value, the graph inputs it depends on (a bit each for the first
 * 64), in the nodes' order; NULL out of memory. */
static const uint64_t *input_deps(pctx *c) {
    if (c->deps) return c->deps;
    const mp_graph *g = c->g;
    uint64_t *d = calloc((size_t)g->n_values + 1, sizeof *d);
    if (!d) return NULL;
    for (int i = 0, b = 0; i < g->n_inputs && b < 64; i++) /* weights an old file lists as inputs aside */
        if (!(g->values[g->inputs[i]].flags & MP_VAL_INIT)) d[g->inputs[i]] |= 1ull << b++;
    for (int i = 0; i < g->n_nodes; i++) {
        const mp_node *n = NODE(c, c->order[i]);
        uint64_t m = 0;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) m |= d[n->in[j]];
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0) d[n->out[j]] |= m;
    }
    return c->deps = d;
}

/* A weight product: MatMul or Gemm whose second operand is weight-like
 * (or the first, for a Gemm with transA... no: exporters put weights
 * second). */
static bool weight_product(const pctx *c, int k, int *w) {
    const mp_node *n = NODE(c, k);
    if (!(is_op(n, "MatMul") || is_op(n, "Gemm")) || n->n_in < 2 || n->in[1] < 0) return false;
    if (!weight_like(c, n->in[1], NULL) || mp_value_const(c->g, n->in[0])) return false;
    if (w) *w = n->in[1];
    return true;
}

/* Back from v to the weight product that made it, through layout
 * operators, a bias Add, a scalar scale, and (when allowed) a norm or
 * rotary pattern: the product's node, or -1. *bias_node gets the bias Add;
 * *via_norm the norm crossed. */
static int back_to_product(const pctx *c, int v, int *bias_node, int *via_norm) {
    if (bias_node) *bias_node = -1;
    if (via_norm) *via_norm = -1;
    for (int hop = 0; hop < 24 && v >= 0; hop++) {
        int p = prod(c, v);
        if (p < 0) return -1;
        const mp_node *n = NODE(c, p);
        mp_pref r = c->ref[p];
        if (r.kind == MP_PAT_ROTARY) {
            v = c->rot[r.index].x;
            continue;
        }
        if (r.kind == MP_PAT_NORM && c->norms[r.index].y == v) {
            if (via_norm) *via_norm = r.index;
            v = c->norms[r.index].x;
            continue;
        }
        if (r.kind == MP_PAT_ATTN) return -1;
        int w;
        if (weight_product(c, p, &w)) return p;
        /* and through a Gather of one constant index: a select, a view in
         * PyTorch (torchvision's Swin takes q, k, v = qkv[0], qkv[1],
         * qkv[2] of one fused product) */
        if ((layout_op(n) || (is_op(n, "Gather") && n->n_in == 2 && n->in[1] >= 0 &&
                              mp_value_const(c->g, n->in[1]) && VAL(c, n->in[1])->rank == 0)) &&
            n->n_in >= 1) {
            v = n->in[0];
            continue;
        }
        if (is_op(n, "Add") && n->n_in == 2) {
            int b = weight_like(c, n->in[1], NULL) ? 1 : weight_like(c, n->in[0], NULL) ? 0 : -1;
            if (b < 0) return -1;
            if (bias_node) *bias_node = p;
            v = n->in[1 - b];
            continue;
        }
        double f;
        if ((is_op(n, "Mul") || is_op(n, "Div")) && n->n_in == 2) {
            int x0 = mp_value_const(c->g, n->in[0]) ? n->in[1] : n->in[0];
            if (scaled_by(c, p, x0, &f)) {
                v = x0;
                continue;
            }
        }
        return -1;
    }
    return -1;
}

/* Forward from v to the weight product that reads it (as its input 0)
 * through layout operators each read once: the product, or -1. */
static int fwd_to_product(const pctx *c, int v) {
    for (int hop = 0; hop < 12 && v >= 0; hop++) {
        int k = sole_data(c, v);
        if (k < 0) return -1;
        const mp_node *n = NODE(c, k);
        if (weight_product(c, k, NULL) && n->in[0] == v) return k;
        if (layout_op(n) && n->n_in >= 1 && n->in[0] == v && n->n_out == 1) {
            v = n->out[0];
            continue;
        }
        return -1;
    }
    return -1;
}

static void relu_mlp(pctx *c, int k) {
    const mp_node *n = NODE(c, k);
    if (!free_node(c, k) || !is_op(n, "Relu") || n->n_in < 1 || n->n_out < 1) return;
    if (back_to_product(c, n->in[0], NULL, NULL) < 0 || fwd_to_product(c, n->out[0]) < 0) return;
    cand_reset(c);
    cand(c, k, MP_PART_OP);
    mp_pact *a = act_new(c, MP_ACT_RELU, MP_FORM_OP, n->in[0], n->out[0]);
    if (a) act_accept(c, a);
}

/* ---- 6. blocks ---- */

static int module_lca(const mp_model *m, int a, int b) {
    if (a < 0 || b < 0 || a >= m->n_modules || b >= m->n_modules) return -1;
    while (a != b) {
        if (m->modules[a].depth >= m->modules[b].depth) a = m->modules[a].parent;
        else b = m->modules[b].parent;
        if (a < 0 || b < 0) return -1;
    }
    return a;
}

static void set_weight(const pctx *c, mp_pblock *b, int role, int k, int bias_node) {
    mp_pweight *w = &b->w[role];
    const mp_node *n = NODE(c, k);
    w->node = k;
    w->weight = n->in[1];
    w->bias_node = bias_node;
    w->bias = -1;
    if (is_op(n, "Gemm") && n->n_in > 2 && n->in[2] >= 0) w->bias = n->in[2];
    else if (bias_node >= 0) w->bias = weight_like(c, in_at(c, bias_node, 1), NULL) ? in_at(c, bias_node, 1)
                                                                                    : in_at(c, bias_node, 0);
    const mp_value *wv = VAL(c, w->weight);
    if (wv->rank == 2) {
        bool tb = is_op(n, "Gemm") && mp_attr_i(n, "transB", 0);
        w->in = wv->dims[tb ? 1 : 0];
        w->out = wv->dims[tb ? 0 : 1];
    }
}

/* The product after a value, through a bias Add (the product's output
 * plus a bias, read once): its bias Add in *bias_node. */
static int product_bias_out(const pctx *c, int k, int *bias_node) {
    int y = out0(c, k);
    *bias_node = -1;
    int a = sole_data(c, y);
    if (a >= 0 && is_op(NODE(c, a), "Add")) {
        int o = other(c, a, y);
        if (o >= 0 && weight_like(c, o, NULL)) *bias_node = a;
    }
    return *bias_node >= 0 ? out0(c, *bias_node) : y;
}

/* The norm whose output, through layout operators, product k reads. */
static int norm_before(const pctx *c, int k) {
    int v = in_at(c, k, 0);
    for (int hop = 0; hop < 8 && v >= 0; hop++) {
        int p = prod(c, v);
        if (p < 0) return -1;
        mp_pref r = c->ref[p];
        if (r.kind == MP_PAT_NORM && c->norms[r.index].y == v) return r.index;
        const mp_node *n = NODE(c, p);
        if (!layout_op(n) || n->n_in < 1) return -1;
        v = n->in[0];
    }
    return -1;
}

/* The norm reading a residual sum that adds the output of product k (or
 * its bias Add): a post-norm. */
static int norm_after(const pctx *c, int k) {
    int bn, v = product_bias_out(c, k, &bn);
    for (int hop = 0; hop < 4 && v >= 0; hop++) {
        /* a norm that reads v at several nodes (a decomposed RMSNorm's
         * square and product: Gemma-2's post-attention norm before the
         * residual) */
        int nu, reader = -1;
        bool other_reader = false;
        const int *u = mp_uses(c->g, v, &nu);
        for (int i = 0; i < nu; i++) {
            mp_pref r = c->ref[u[i]];
            if (r.kind == MP_PAT_NORM && (c->norms[r.index].x == v || c->norms[r.index].skip == v)) {
                if (reader >= 0 && reader != r.index) other_reader = true;
                reader = r.index;
            } else if (!meta_reader(NODE(c, u[i]), v)) {
                other_reader = true;
            }
        }
        if (nu > 1 && reader >= 0 && !other_reader) return reader;
        int u0 = sole_data(c, v);
        if (u0 < 0) return -1;
        const mp_node *n = NODE(c, u0);
        mp_pref r = c->ref[u0];
        if (r.kind == MP_PAT_NORM && (c->norms[r.index].x == v || c->norms[r.index].skip == v)) return r.index;
        if (is_op(n, "Add") && n->n_out == 1) {
            /* post-norm: the norm alone reads the sum (a pre-norm's input,
             * the residual stream, is read by the next sum too) */
            int s = n->out[0], nu2;
            const int *u2 = mp_uses(c->g, s, &nu2);
            int norm = -1;
            for (int i = 0; i < nu2; i++) {
                mp_pref r2 = c->ref[u2[i]];
                if (r2.kind == MP_PAT_NORM && c->norms[r2.index].x == s) norm = r2.index;
                else if (!meta_reader(NODE(c, u2[i]), s)) return -1;
            }
            return norm;
        }
        if (!layout_op(n)) return -1;
        v = n->out[0];
    }
    return -1;
}

static void norm_role(pctx *c, mp_pblock *b, int bi, int ni, int role) {
    if (ni < 0) return;
    c->norms[ni].roles |= 1u << role;
    if (c->norms[ni].block < 0) c->norms[ni].block = bi;
    if (b->norm[role] < 0) b->norm[role] = ni;
}

static void widen(const pctx *c, mp_pblock *b, int k) {
    if (k < 0) return;
    int p = c->pos[k];
    if (b->first < 0 || p < b->first) b->first = p;
    if (p > b->last) b->last = p;
}

static void block_of(pctx *c, int ai) {
    mp_pattn *a = &c->attn[ai];
    mp_pblock *b = PUSH(c, c->blocks, c->n_blocks, c->cap_blocks);
    if (!b) return;
    a = &c->attn[ai];
    int bi = c->n_blocks - 1;
    b->module = -1;
    b->attn = ai;
    b->mlp = b->mlp_kind = -1;
    b->first = b->last = -1;
    for (int i = 0; i < MP_NROLE_COUNT; i++) b->norm[i] = -1;
    for (int i = 0; i < MP_WROLE_COUNT; i++) b->w[i].node = b->w[i].weight = b->w[i].bias_node = b->w[i].bias = -1,
                                             b->w[i].in = b->w[i].out = -1;
    b->heads = a->heads;
    b->kv_heads = a->kv_heads;
    b->head_dim = a->head_dim;
    b->hidden = b->ffn = -1;
    a->block = bi;
    for (int i = 0; i < a->n; i++) widen(c, b, c->mem[a->first + i].node);
    /* q, k, v products */
    int bq, bk, bv, nq = -1, nk = -1;
    int pq, pk, pv;
    if (a->op >= 0 && is_ms(NODE(c, a->op), "Attention")) {
        pq = pk = pv = a->op;
        bq = -1;
    } else {
        pq = back_to_product(c, a->q, &bq, &nq);
        pk = back_to_product(c, a->k_kv >= 0 ? a->k_kv : a->k, &bk, &nk);
        pv = back_to_product(c, a->v_kv, &bv, NULL);
    }
    if (pq >= 0 && pq == pk && pk == pv) {
        if (a->op >= 0 && pq == a->op) {
            b->w[MP_WROLE_QKV].node = a->op;
            b->w[MP_WROLE_QKV].weight = in_at(c, a->op, 1);
            b->w[MP_WROLE_QKV].bias = in_at(c, a->op, 2);
            const mp_value *wv = VAL(c, in_at(c, a->op, 1));
            if (wv->rank == 2) b->w[MP_WROLE_QKV].in = wv->dims[0], b->w[MP_WROLE_QKV].out = wv->dims[1];
        } else {
            set_weight(c, b, MP_WROLE_QKV, pq, bq);
        }
    } else {
        if (pq >= 0) set_weight(c, b, MP_WROLE_Q, pq, bq);
        if (pk >= 0) set_weight(c, b, MP_WROLE_K, pk, bk);
        if (pv >= 0) set_weight(c, b, MP_WROLE_V, pv, bv);
    }
    /* cross-attention: K made without a graph input that Q depends on (the
     * encoder's output, without the decoder's ids); projections that
     * differ on one stream (DeepSeek's compressed Q and KV) are not */
    if (pq >= 0 && pk >= 0 && pq != pk) {
        const uint64_t *d = input_deps(c);
        int kv = a->k_kv >= 0 ? a->k_kv : a->k;
        if (d && a->q >= 0 && kv >= 0) a->cross = (d[a->q] & ~d[kv]) != 0;
    }
    if (pq < 0 || pk < 0 || pv < 0)
        miss(c, a->op >= 0 ? a->op : a->qk, MP_PAT_ATTN,
             "its Q, K or V does not come from a weight product (through layout, norm and rotary)");
    norm_role(c, b, bi, nq, MP_NROLE_Q);
    norm_role(c, b, bi, nk, MP_NROLE_K);
    /* heads hidden by a [B*H, S, D] layout (torch's multi_head_attention_forward):
     * the projections' widths over the head dim */
    if (a->heads < 0 && a->head_dim > 0) {
        int64_t qw = b->w[MP_WROLE_Q].out, kw = b->w[MP_WROLE_K].out;
        if (b->w[MP_WROLE_QKV].out > 0 && b->w[MP_WROLE_QKV].out % 3 == 0) qw = kw = b->w[MP_WROLE_QKV].out / 3;
        else if (pk >= 0 && pk == pv && kw > 0 && kw % 2 == 0) kw /= 2; /* K and V from one product (the
                                                                          * cross-attention's in_proj rows) */
        if (qw > 0 && qw % a->head_dim == 0) a->heads = qw / a->head_dim;
        if (kw > 0 && kw % a->head_dim == 0) a->kv_heads = kw / a->head_dim;
        if (a->kv_heads < 0) a->kv_heads = a->heads;
        b->heads = a->heads;
        b->kv_heads = a->kv_heads;
    }
    /* rotary on Q and K */
    for (int side = 0; side < 2; side++) {
        int v = side ? (a->k_kv >= 0 ? a->k_kv : a->k) : a->q;
        for (int hop = 0; hop < 8 && v >= 0; hop++) {
            int p = prod(c, v);
            if (p < 0) break;
            mp_pref r = c->ref[p];
            if (r.kind == MP_PAT_ROTARY) {
                c->rot[r.index].attn = ai;
                c->rot[r.index].on_k = side == 1;
                if (side) a->rotary_k = r.index;
                else a->rotary_q = r.index;
                break;
            }
            if (!layout_op(NODE(c, p))) break;
            v = NODE(c, p)->in[0];
        }
    }
    /* the output projection */
    int po = fwd_to_product(c, a->y);
    int bo = -1;
    if (po >= 0) {
        product_bias_out(c, po, &bo);
        set_weight(c, b, MP_WROLE_O, po, bo);
        widen(c, b, po);
        widen(c, b, bo);
    }
    /* norms feeding q, k, v */
    for (int r = MP_WROLE_Q; r <= MP_WROLE_QKV; r++)
        if (b->w[r].node >= 0) {
            norm_role(c, b, bi, norm_before(c, b->w[r].node), MP_NROLE_ATTN_IN);
            widen(c, b, b->w[r].node);
        }
    if (a->op >= 0) norm_role(c, b, bi, norm_before(c, a->op), MP_NROLE_ATTN_IN);
    if (po >= 0) norm_role(c, b, bi, norm_after(c, po), MP_NROLE_ATTN_OUT);
    /* the MLP: the first activation after the attention (before the next
     * one) between two weight products */
    int limit = ai + 1 < c->n_attn ? c->pos[c->attn[ai + 1].op >= 0 ? c->attn[ai + 1].op : c->attn[ai + 1].qk]
                                   : c->g->n_nodes;
    int after = c->pos[a->pv >= 0 ? a->pv : a->op];
    int best = -1;
    for (int i = 0; i < c->n_acts; i++) {
        const mp_pact *ac = &c->acts[i];
        if (ac->outer >= 0 || ac->block >= 0) continue;
        int at = c->pos[c->mem[ac->first].node];
        if (at <= after || at >= limit) continue;
        if (best >= 0 && c->pos[c->mem[c->acts[best].first].node] < at) continue;
        int bi2;
        int pin = back_to_product(c, ac->x, &bi2, NULL), pout = fwd_to_product(c, ac->y);
        if (pin >= 0 && pout >= 0) best = i;
    }
    if (best >= 0) {
        mp_pact *ac = &c->acts[best];
        ac->block = bi;
        if (ac->inner >= 0) c->acts[ac->inner].block = bi;
        b->mlp = best;
        b->mlp_kind = ac->kind;
        int bg, bu;
        int pg = back_to_product(c, ac->x, &bg, NULL), pd = fwd_to_product(c, ac->y);
        if (ac->inner >= 0) {
            int pu = back_to_product(c, ac->up, &bu, NULL);
            if (pu == pg) {
                set_weight(c, b, MP_WROLE_GATE_UP, pg, bg);
            } else {
                set_weight(c, b, MP_WROLE_GATE, pg, bg);
                if (pu >= 0) set_weight(c, b, MP_WROLE_UP, pu, bu);
            }
        } else {
            set_weight(c, b, MP_WROLE_UP, pg, bg);
        }
        int bd;
        product_bias_out(c, pd, &bd);
        set_weight(c, b, MP_WROLE_DOWN, pd, bd);
        for (int r = MP_WROLE_UP; r <= MP_WROLE_DOWN; r++)
            if (b->w[r].node >= 0) widen(c, b, b->w[r].node), widen(c, b, b->w[r].bias_node);
        for (int i = 0; i < ac->n; i++) widen(c, b, c->mem[ac->first + i].node);
        int fed = b->w[MP_WROLE_GATE_UP].node >= 0 ? b->w[MP_WROLE_GATE_UP].node
                : b->w[MP_WROLE_GATE].node >= 0   ? b->w[MP_WROLE_GATE].node
                                                  : b->w[MP_WROLE_UP].node;
        norm_role(c, b, bi, norm_before(c, fed), MP_NROLE_MLP_IN);
        if (b->w[MP_WROLE_UP].node >= 0 && b->w[MP_WROLE_UP].node != fed)
            norm_role(c, b, bi, norm_before(c, b->w[MP_WROLE_UP].node), MP_NROLE_MLP_IN);
        /* post-norm blocks (BERT) normalise both residual sums; a pre-norm
         * model's last sum alone is read by its final norm */
        if (b->norm[MP_NROLE_ATTN_OUT] >= 0) norm_role(c, b, bi, norm_after(c, pd), MP_NROLE_MLP_OUT);
        b->ffn = b->w[fed == b->w[MP_WROLE_GATE_UP].node ? MP_WROLE_GATE_UP : MP_WROLE_UP].out;
        if (b->w[MP_WROLE_GATE_UP].node >= 0 && b->ffn > 0) b->ffn /= 2;
        if (b->w[MP_WROLE_DOWN].in > 0) b->ffn = b->w[MP_WROLE_DOWN].in;
    }
    for (int r = 0; r < MP_NROLE_COUNT; r++) {
        int ni = b->norm[r];
        if (ni < 0) continue;
        const mp_pnorm *nm = &c->norms[ni];
        for (int i = 0; i < nm->n; i++) widen(c, b, c->mem[nm->first + i].node);
    }
    const mp_pnorm *ain = b->norm[MP_NROLE_ATTN_IN] >= 0 ? &c->norms[b->norm[MP_NROLE_ATTN_IN]] : NULL;
    const mp_pnorm *min = b->norm[MP_NROLE_MLP_IN] >= 0 ? &c->norms[b->norm[MP_NROLE_MLP_IN]] : NULL;
    b->parallel = ain && min && (ain == min || ain->x == min->x);
    b->hidden = ain ? ain->dim : b->w[MP_WROLE_O].out;
    if (b->hidden < 0) b->hidden = b->w[MP_WROLE_O].out;
    /* the repeated module: what holds the attention and the MLP */
    int ma = NODE(c, a->pv >= 0 ? a->pv : a->op)->module;
    int mb = b->w[MP_WROLE_DOWN].node >= 0 ? NODE(c, b->w[MP_WROLE_DOWN].node)->module
           : po >= 0                      ? NODE(c, po)->module
                                          : ma;
    int lca = module_lca(c->m, ma, mb);
    b->module = lca > 0 ? lca : -1;
}

/* ---- 7. the model around the blocks ---- */

static bool from_input(const pctx *c, int v, int depth) {
    if (v < 0 || depth > 6) return false;
    const mp_value *val = VAL(c, v);
    if (val->flags & MP_VAL_INPUT) return true;
    int p = val->producer;
    if (p < 0) return false;
    const mp_node *n = NODE(c, p);
    if (!(is_op(n, "Reshape") || is_op(n, "Cast") || is_op(n, "Unsqueeze") || is_op(n, "Squeeze") ||
          is_op(n, "Flatten") || is_op(n, "Identity")))
        return false;
    return from_input(c, n->in[0], depth + 1);
}

static void model_level(pctx *c, mp_patterns *p) {
    mp_graph *g = c->g;
    p->embed = p->embed_table = p->lm_head = p->lm_weight = p->final_norm = -1;
    p->vocab = p->hidden = -1;
    int64_t rows = -1;
    for (int k = 0; k < g->n_nodes; k++) {
        const mp_node *n = NODE(c, k);
        if (!is_op(n, "Gather") || n->n_in != 2 || mp_attr_i(n, "axis", 0) != 0) continue;
        int root;
        if (!weight_like(c, n->in[0], &root) || VAL(c, n->in[0])->rank != 2 || !from_input(c, n->in[1], 0)) continue;
        const mp_value *t = VAL(c, n->in[0]);
        if (t->dims[0] > rows) {
            rows = t->dims[0];
            p->embed = k;
            p->embed_table = root;
            p->vocab = t->dims[0];
            p->hidden = t->dims[1];
        }
    }
    int last = c->n_blocks ? c->blocks[c->n_blocks - 1].last : -1;
    if (p->vocab > 0) {
        for (int i = g->n_nodes - 1; i >= 0; i--) {
            int k = c->order[i];
            if (i <= last) break;
            int w;
            if (!weight_product(c, k, &w)) continue;
            const mp_value *y = VAL(c, out0(c, k));
            if (y->rank < 1 || y->dims[y->rank - 1] != p->vocab) continue;
            p->lm_head = k;
            int root;
            weight_like(c, w, &root);
            p->lm_weight = w;
            p->tied = root == p->embed_table;
            break;
        }
    }
    int fin = p->lm_head >= 0 ? norm_before(c, p->lm_head) : -1;
    if (fin >= 0 && c->norms[fin].block < 0) {
        p->final_norm = fin;
        c->norms[fin].roles |= 1u << MP_NROLE_FINAL;
    }
    if (p->hidden < 0 && c->n_blocks) p->hidden = c->blocks[0].hidden;
}

/* ---- the driver ---- */

static mp_status find(pctx *c, mp_patterns **out) {
    mp_graph *g = c->g;
    int nn = g->n_nodes;
    /* whole operators */
    for (int i = 0; i < nn; i++) {
        int k = c->order[i];
        norm_whole(c, k);
        act_whole(c, k);
        rotary_whole(c, k);
        attn_whole(c, k);
    }
    for (int i = 0; i < nn; i++) norm_decomposed(c, c->order[i]);
    for (int i = 0; i < nn; i++) {
        int k = c->order[i];
        gelu_erf(c, k);
        gelu_tanh(c, k);
        sigmoid_act(c, k);
        mish_act(c, k);
    }
    for (int i = 0; i < nn; i++) rotary_half(c, c->order[i]);
    for (int i = 0; i < nn; i++) attn_decomposed(c, c->order[i]);
    for (int i = 0, n0 = c->n_acts; i < n0; i++) gated(c, i);
    for (int i = 0; i < nn; i++) relu_mlp(c, c->order[i]);
    /* attentions in graph order (whole ones were found first) */
    for (int i = 1; i < c->n_attn; i++)
        for (int j = i; j > 0; j--) {
            const mp_pattn *x = &c->attn[j - 1], *y = &c->attn[j];
            if (c->pos[c->mem[x->first].node] <= c->pos[c->mem[y->first].node]) break;
            mp_pattn t = c->attn[j];
            c->attn[j] = c->attn[j - 1];
            c->attn[j - 1] = t;
        }
    for (int i = 0; i < c->n_attn; i++)
        for (int m = 0; m < c->attn[i].n; m++) c->ref[c->mem[c->attn[i].first + m].node].index = i;
    for (int i = 0; i < c->n_attn && !c->nomem; i++) block_of(c, i);
    if (c->nomem) return mp_error(MP_ERR_NOMEM, "out of memory");
    /* one heap block: the struct, then each array */
    mp_patterns hdr;
    memset(&hdr, 0, sizeof hdr);
    model_level(c, &hdr);
    size_t sz = sizeof(mp_patterns);
#define ALN(x) (((x) + 15) & ~(size_t)15)
    size_t o_norm = sz = ALN(sz), o_act = sz = ALN(sz + sizeof(mp_pnorm) * (size_t)c->n_norms);
    size_t o_rot = sz = ALN(sz + sizeof(mp_pact) * (size_t)c->n_acts);
    size_t o_attn = sz = ALN(sz + sizeof(mp_protary) * (size_t)c->n_rot);
    size_t o_blk = sz = ALN(sz + sizeof(mp_pattn) * (size_t)c->n_attn);
    size_t o_miss = sz = ALN(sz + sizeof(mp_pblock) * (size_t)c->n_blocks);
    size_t o_mem = sz = ALN(sz + sizeof(mp_pmiss) * (size_t)c->n_miss);
    size_t o_ref = sz = ALN(sz + sizeof(mp_pmember) * (size_t)c->n_mem);
    sz = ALN(sz + sizeof(mp_pref) * (size_t)nn);
#undef ALN
    char *blk = malloc(sz);
    if (!blk) return mp_error(MP_ERR_NOMEM, "out of memory");
    mp_patterns *p = (mp_patterns *)blk;
    *p = hdr;
    p->g = g;
    p->n_norms = c->n_norms, p->n_acts = c->n_acts, p->n_rotary = c->n_rot, p->n_attn = c->n_attn;
    p->n_blocks = c->n_blocks, p->n_miss = c->n_miss, p->n_members = c->n_mem;
    p->norms = (mp_pnorm *)(blk + o_norm);
    p->acts = (mp_pact *)(blk + o_act);
    p->rotary = (mp_protary *)(blk + o_rot);
    p->attn = (mp_pattn *)(blk + o_attn);
    p->blocks = (mp_pblock *)(blk + o_blk);
    p->miss = (mp_pmiss *)(blk + o_miss);
    p->members = (mp_pmember *)(blk + o_mem);
    p->node = (mp_pref *)(blk + o_ref);
#define CP(dst, src, n) \
    if (n) memcpy(dst, src, sizeof *(dst) * (size_t)(n))
    CP(p->norms, c->norms, c->n_norms);
    CP(p->acts, c->acts, c->n_acts);
    CP(p->rotary, c->rot, c->n_rot);
    CP(p->attn, c->attn, c->n_attn);
    CP(p->blocks, c->blocks, c->n_blocks);
    CP(p->miss, c->miss, c->n_miss);
    CP(p->members, c->mem, c->n_mem);
    CP(p->node, c->ref, nn);
#undef CP
    p->heads = p->kv_heads = p->head_dim = -1;
    for (int i = 0; i < p->n_blocks; i++) {
        const mp_pblock *b = &p->blocks[i];
        int64_t *f[3] = {&p->heads, &p->kv_heads, &p->head_dim};
        int64_t v[3] = {b->heads, b->kv_heads, b->head_dim};
        for (int j = 0; j < 3; j++) *f[j] = i == 0 ? v[j] : (*f[j] == v[j] ? v[j] : -1);
    }
    *out = p;
    return MP_OK;
}

const mp_patterns *mp_patterns_of(const mp_graph *cg) {
    mp_graph *g = (mp_graph *)cg; /* the memo is the graph's own */
    if (!g) return NULL;
    if (g->patterns && g->patterns_gen == g->shape_gen) return g->patterns;
    if (!g->use_start && mp_graph_index(g) != MP_OK) return NULL;
    pctx c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.m = g->model;
    int nn = g->n_nodes;
    c.pos = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    c.ref = malloc(sizeof(mp_pref) * (size_t)(nn ? nn : 1));
    int *own = g->order ? NULL : malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    mp_patterns *p = NULL;
    mp_status st = MP_OK;
    if (!c.pos || !c.ref || (!g->order && !own)) {
        st = mp_error(MP_ERR_NOMEM, "out of memory");
    } else {
        for (int i = 0; own && i < nn; i++) own[i] = i;
        c.order = g->order ? g->order : own;
        for (int i = 0; i < nn; i++) {
            c.pos[c.order[i]] = i;
            c.ref[i] = (mp_pref){MP_PAT_NONE, -1, 0};
        }
        st = find(&c, &p);
    }
    free(own);
    free(c.deps);
    free(c.pos);
    free(c.ref);
    free(c.mem);
    free(c.norms);
    free(c.acts);
    free(c.rot);
    free(c.attn);
    free(c.blocks);
    free(c.miss);
    if (st) return NULL;
    free(g->patterns);
    g->patterns = p;
    g->patterns_gen = g->shape_gen;
    return p;
}

int mp_pattn_past(const mp_patterns *p, const mp_pattn *a, int which) {
    const mp_graph *g = p->g;
    int v = which ? (a->v_kv >= 0 ? a->v_kv : a->v) : (a->k_kv >= 0 ? a->k_kv : a->k);
    for (int depth = 0; v >= 0 && depth < 16; depth++) {
        int k = g->values[v].producer;
        if (k < 0) return -1;
        const mp_node *n = &g->nodes[k];
        if (is_op(n, "Concat")) {
            for (int i = 0; i < n->n_in; i++) {
                int u = n->in[i];
                /* the past, as given or through views and casts */
                for (int d = 0; u >= 0 && d < 8; d++) {
                    if (g->values[u].flags & MP_VAL_INPUT) return u;
                    int q = g->values[u].producer;
                    const mp_node *qn = q >= 0 ? &g->nodes[q] : NULL;
                    if (!qn || !(is_op(qn, "Cast") || is_op(qn, "Reshape") || is_op(qn, "Transpose") ||
                                 is_op(qn, "Identity") || is_op(qn, "Unsqueeze")))
                        break;
                    u = qn->in[0];
                }
            }
            return -1;
        }
        if (!(is_op(n, "Transpose") || is_op(n, "Reshape") || is_op(n, "Cast") || is_op(n, "Identity") ||
              is_op(n, "Unsqueeze") || is_op(n, "Squeeze") || is_op(n, "Expand")) || n->n_in < 1)
            return -1;
        v = n->in[0];
    }
    return -1;
}

uint64_t mp_pattn_kv_elems(const mp_pattn *a) {
    if (a->kv_heads <= 0 || a->head_dim <= 0 || a->v_head_dim <= 0) return 0;
    return (uint64_t)a->kv_heads * (uint64_t)(a->head_dim + a->v_head_dim);
}

uint64_t mp_patterns_kv_elems_per_token(const mp_patterns *p, int *unknown) {
    uint64_t sum = 0;
    int unk = 0;
    for (int i = 0; p && i < p->n_attn; i++) {
        uint64_t e = mp_pattn_kv_elems(&p->attn[i]);
        if (!e) unk++;
        sum += e;
    }
    if (unknown) *unknown = unk;
    return sum;
}
