/* The oneDNN glue (dnnl_int.h): groups of nodes run as one: GELU as
 * PyTorch exports it, and attention. */
#include "run/dnnl_int.h"

/* ------------------------------------- GELU as PyTorch exports it
 * Before opset 20 (no Gelu node) PyTorch writes nn.GELU out: x * 0.5 *
 * (1 + erf(x / sqrt 2)), or GPT-2's tanh form 0.5 x (1 + tanh(sqrt(2/pi)
 * (x + 0.044715 x^3))). The pattern layer finds them (patterns.c); here
 * the group runs as one eltwise kernel on x, sitting on the group's first
 * node (which reads x as its input 0). */

/* Act pattern `index` written out, when the glue can run it whole: in
 * fp32, 2 to 8 members, every member's output x's dims. */
const mp_pact *dn_act_decomposed(const mp_graph *g, const mp_patterns *p, int index) {
    const mp_pact *a = &p->acts[index];
    if (a->form != MP_FORM_DECOMPOSED || a->n < 2 || a->n > 8) return NULL;
    const mp_value *x = &g->values[a->x];
    if (!dn_is_f32(x)) return NULL;
    for (int i = 0; i < a->n; i++) {
        const mp_node *m = &g->nodes[p->members[a->first + i].node];
        const mp_value *o = dn_gout(g, m, 0);
        if (m->n_out != 1 || !dn_is_f32(o) || !dn_same_dims(o, x->rank, x->dims)) return NULL;
    }
    return a;
}

/* The same, a GELU (erf or tanh form). */
const mp_pact *dn_gelu_fusable(const mp_graph *g, const mp_patterns *p, int index) {
    const mp_pact *a = dn_act_decomposed(g, p, index);
    return a && (a->kind == MP_ACT_GELU || a->kind == MP_ACT_GELU_TANH) ? a : NULL;
}

/* The GELU whose first node n is (reading x as its input 0), else NULL. */
const mp_pact *dn_gelu_head(const mp_graph *g, const mp_node *n) {
    const mp_patterns *p;
    mp_pref r = dn_pattern_at(g, n, &p);
    const mp_pact *a = r.kind == MP_PAT_ACT ? dn_gelu_fusable(g, p, r.index) : NULL;
    if (!a || p->members[a->first].node != (int)(n - g->nodes) || n->n_in < 1 || n->in[0] != a->x) return NULL;
    return a;
}

mp_status dn_gelu_prepare(mp_kctx *k, size_t *scratch) {
    const mp_pact *a = dn_gelu_head(k->g, k->n);
    if (!a) return mp_error(MP_ERR_UNSUPPORTED, "node %s: not a GELU pattern", k->n->name);
    const mp_patterns *p = mp_patterns_of(k->g);
    int nodes[8];
    for (int i = 1; i < a->n; i++) nodes[i - 1] = p->members[a->first + i].node;
    /* without fusion (or if the planner declines) the first node runs alone */
    if (!k->fuse || mp_kfuse_nodes(k, nodes, a->n - 1) != MP_OK) {
        mp_error_clear();
        return dn_binary_prepare(k, scratch);
    }
    /* the pattern fused whole: x (k->in[0]) to the group's output */
    return dn_eltwise_make(k, a->kind == MP_ACT_GELU ? dnnl_eltwise_gelu_erf : dnnl_eltwise_gelu_tanh, 0, 0,
                           a->y, scratch);
}

/* ReduceMean over the last axis only, keeping it (axes an attribute:
 * before opset 18) */
static bool mean_last(const mp_graph *g, const mp_node *n, const mp_value **x) {
    if (!dn_is_op(n, "ReduceMean") || n->n_in != 1 || n->n_out != 1) return false;
    *x = dn_gval(g, n, 0);
    if (!dn_is_f32(*x) || (*x)->rank < 1 || mp_attr_i(n, "keepdims", 1) != 1) return false;
    const int64_t *ax;
    if (mp_attr_ints(n, "axes", &ax) != 1) return false;
    int64_t a = ax[0] < 0 ? ax[0] + (*x)->rank : ax[0];
    return a == (*x)->rank - 1;
}

/* A per-channel fp32 operand of the normalized axis: [D] (leading 1s) */
static bool chan_f32(const mp_graph *g, int v, int64_t d) {
    const mp_value *c = v >= 0 ? &g->values[v] : NULL;
    return c && dn_is_f32(c) && c->rank >= 1 && mp_value_numel(c) == d && c->dims[c->rank - 1] == d;
}

bool dn_ln_pattern(const mp_graph *g, const mp_node *n, lnpat *lp) {
    const mp_patterns *p;
    mp_pref r = dn_pattern_at(g, n, &p);
    if (r.kind != MP_PAT_NORM) return false;
    const mp_pnorm *nm = &p->norms[r.index];
    const mp_value *x;
    if (nm->kind != MP_NORM_LAYER || nm->form != MP_FORM_DECOMPOSED || !(nm->eps >= 0) ||
        p->members[nm->first].node != (int)(n - g->nodes) || !mean_last(g, n, &x) ||
        nm->n - 1 > (int)MP_ARRAY_LEN(lp->nodes))
        return false;
    lp->d = x->dims[x->rank - 1];
    lp->rows = mp_value_numel(x) / (lp->d > 0 ? lp->d : 1);
    if (lp->d <= 0 || lp->rows <= 0) return false;
    lp->eps = nm->eps;
    lp->gamma = chan_f32(g, nm->scale, lp->d) ? nm->scale : -1;
    lp->beta = lp->gamma >= 0 && chan_f32(g, nm->shift, lp->d) ? nm->shift : -1;
    lp->n = 0;
    for (int i = 1; i < nm->n; i++) {
        const mp_pmember *mb = &p->members[nm->first + i];
        const mp_node *m = &g->nodes[mb->node];
        const mp_value *o = dn_gout(g, m, 0), *x2;
        if (mb->part == MP_PART_AFFINE) {
            /* the scale, then the shift, each only when fp32 [D]: what is
             * left out runs apart (the Mul's reader of the group's output) */
            bool is_scale = nm->scale >= 0 && m->n_in == 2 && (m->in[0] == nm->scale || m->in[1] == nm->scale);
            if ((is_scale && lp->gamma < 0) || (!is_scale && lp->beta < 0)) break;
        }
        if (m->n_out != 1 || !dn_is_f32(o)) return false;
        if (dn_is_op(m, "ReduceMean") ? !mean_last(g, m, &x2)
                                   : (mp_value_numel(o) == mp_value_numel(x) && !dn_same_dims(o, x->rank, x->dims)))
            return false;
        lp->nodes[lp->n++] = mb->node;
    }
    return lp->n >= 6;
}

/* Where mp_kfuse_nodes put value v among k->in: after the head's own
 * inputs, each node's inputs not made inside the group, in order. */
static int fused_in_index(const mp_graph *g, const mp_node *head, const int *nodes, int n, int v) {
    int at = head->n_in;
    for (int i = 0; i < n; i++) {
        const mp_node *c = &g->nodes[nodes[i]];
        for (int j = 0; j < c->n_in; j++) {
            int u = c->in[j];
            if (u < 0) continue;
            bool inside = u == head->out[0];
            for (int q = 0; q < i && !inside; q++)
                if (g->nodes[nodes[q]].out[0] == u) inside = true;
            if (inside) continue;
            if (u == v) return at;
            at++;
        }
    }
    return -1;
}

/* The head alone (fusion off or declined): the mean over the last axis */
static mp_status mean_last_prepare(mp_kctx *k, const lnpat *p, size_t *scratch) {
    dk *s;
    mp_status st = dn_dk_new(k, &s);
    if (st) return st;
    k->kname = "onednn:reduction";
    int64_t sd[2] = {p->rows, p->d}, dd[2] = {p->rows, 1};
    dnnl_memory_desc_t smd, dmd;
    DN(dn_md_plain(&smd, 2, sd), "memory descriptor");
    DN(dn_md_plain(&dmd, 2, dd), "memory descriptor");
    dnnl_reduction_desc_t rd;
    DN(dnnl_reduction_desc_init(&rd, dnnl_reduction_mean, &smd, &dmd, 0.0f, 0.0f), "reduction");
    return dn_dk_src_dst(k, s, &rd, &smd, &dmd, scratch);
}

mp_status dn_lnorm_prepare(mp_kctx *k, size_t *scratch) {
    lnpat p;
    if (!dn_ln_pattern(k->g, k->n, &p))
        return mp_error(MP_ERR_UNSUPPORTED, "node %s: not a LayerNormalization pattern", k->n->name);
    if (!k->fuse || mp_kfuse_nodes(k, p.nodes, p.n) != MP_OK) {
        mp_error_clear();
        return mean_last_prepare(k, &p, scratch);
    }
    int gi = p.gamma >= 0 ? fused_in_index(k->g, k->n, p.nodes, p.n, p.gamma) : -1;
    int bi = p.beta >= 0 ? fused_in_index(k->g, k->n, p.nodes, p.n, p.beta) : -1;
    if ((p.gamma >= 0 && (gi < 0 || gi >= k->n_in)) || (p.beta >= 0 && (bi < 0 || bi >= k->n_in)))
        return mp_error(MP_ERR_UNSUPPORTED, "node %s: the LayerNormalization pattern's inputs are not where "
                        "expected", k->n->name);
    return dn_layernorm_make(k, p.rows, p.d, (float)p.eps, gi, bi, scratch);
}

static bool attn_batch_same(const mp_value *a, const mp_value *b, int r) {
    if (a->rank != r || b->rank != r) return false;
    for (int i = 0; i < r - 2; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

/* The attention the pattern layer found (patterns.c) whose score product
 * is n, when the glue runs it fused: its chain QK [SCALE] [MASK] SOFTMAX
 * [GUARD] [CAST, CAST] PV in this order, in fp32 (the casts to float),
 * with the shapes below. Q's and K's own scales, K's transposition and a
 * GQA repetition run before it as nodes of their own. */
bool dn_attn_pattern(const mp_graph *g, const mp_node *n, attnpat *p) {
    const mp_patterns *P;
    mp_pref pr = dn_pattern_at(g, n, &P);
    if (pr.kind != MP_PAT_ATTN || pr.part != MP_PART_QK) return false;
    const mp_pattn *a = &P->attn[pr.index];
    if ((a->form != MP_FORM_DECOMPOSED && a->form != MP_FORM_SDPA) || a->dropout) return false;
    if (!dn_is_op(n, "MatMul") || n->n_in != 2 || n->n_out != 1) return false;
    const mp_value *q = dn_gval(g, n, 0), *kt = dn_gval(g, n, 1), *sc = dn_gout(g, n, 0);
    if (!dn_is_f32(q) || !dn_is_f32(kt) || !dn_is_f32(sc)) return false;
    int r = q->rank;
    if (r < 3 || r > DNNL_MAX_NDIMS || !attn_batch_same(q, kt, r) || !attn_batch_same(q, sc, r)) return false;
    int64_t sq = q->dims[r - 2], d = q->dims[r - 1], sk = kt->dims[r - 1];
    if (kt->dims[r - 2] != d || sc->dims[r - 2] != sq || sc->dims[r - 1] != sk) return false;
    if (mp_value_numel(sc) <= 0 || d <= 0) return false;
    p->n = 0;
    p->alpha = (float)a->score_scale;
    p->mask_v = -1;
    p->where = p->guard = false;
    /* stages: 0 the product, 1 scaled, 2 masked, 3 softmax, 4 guard half
     * seen, 5 guarded, 6 .. 7 casts, 8 the product with V */
    int stage = 0, casts = 0, cur = n->out[0];
    for (int i = 0; i < a->n && stage < 8; i++) {
        const mp_pmember *mb = &P->members[a->first + i];
        const mp_node *c = &g->nodes[mb->node];
        const mp_value *o = dn_gout(g, c, 0);
        switch (mb->part) {
        case MP_PART_QK:
            if (c != n || stage != 0) return false;
            stage = 0;
            continue;
        case MP_PART_K_T:
        case MP_PART_Q_SCALE:
        case MP_PART_K_SCALE:
        case MP_PART_REPEAT:
            continue; /* before the product: nodes of their own */
        case MP_PART_SCALE:
            if (stage != 0 || !isfinite(p->alpha) || p->alpha == 0) return false;
            stage = 1;
            break;
        case MP_PART_MASK: {
            if (stage > 1) return false;
            const mp_value *m = a->mask_v >= 0 ? &g->values[a->mask_v] : NULL;
            if (!m) return false;
            if (a->mask == MP_MASK_WHERE) {
                if (m->dtype != MP_DT_BOOL || !mp_shape_known(m) || !(a->mask_fill <= -1e30)) return false;
                p->where = true;
                p->fill_on_true = a->mask_fill_on_true;
                p->fill = (float)a->mask_fill;
            } else if (a->mask != MP_MASK_ADD || !dn_is_f32(m)) {
                return false;
            }
            if (m->rank > r) return false;
            for (int k = 0; k < m->rank; k++) {
                int64_t sd = sc->dims[r - m->rank + k];
                if (m->dims[k] != 1 && m->dims[k] != sd) return false;
            }
            p->mask_v = a->mask_v;
            stage = 2;
            break;
        }
        case MP_PART_SOFTMAX: {
            int64_t outer, inner, rest;
            if (stage > 2 || !dn_softmax_axis(g, c, &outer, &inner, &rest) || rest != 1 || inner != sk) return false;
            stage = 3;
            break;
        }
        case MP_PART_GUARD:
            if ((stage != 3 && stage != 4) || !isfinite(a->guard_value)) return false;
            stage++;
            p->guard = true;
            p->guard_c = (float)a->guard_value;
            if (dn_is_op(c, "IsNaN")) {
                p->nodes[p->n++] = mb->node;
                continue; /* its output is the Where's condition */
            }
            break;
        case MP_PART_CAST:
            /* a Cast to float of the fp32 probabilities does nothing (Hugging
             * Face's Llama has two: softmax in fp32, then to the query's type) */
            if (stage < 3 || stage == 4 || casts >= 2 || mp_attr_i(c, "to", 0) != MP_DT_FLOAT) return false;
            casts++;
            stage = 6;
            break;
        case MP_PART_PV: {
            if (stage < 3 || stage == 4 || c->n_in != 2 || c->in[0] != cur) return false;
            const mp_value *v = dn_gval(g, c, 1), *y = dn_gout(g, c, 0);
            if (!dn_is_f32(v) || !dn_is_f32(y) || !attn_batch_same(q, v, r) || !attn_batch_same(q, y, r)) return false;
            if (v->dims[r - 2] != sk || y->dims[r - 2] != sq || y->dims[r - 1] != v->dims[r - 1]) return false;
            p->v_v = c->in[1];
            p->nodes[p->n++] = mb->node;
            stage = 8;
            continue;
        }
        default:
            return false;
        }
        /* scores, masked scores, probabilities: fp32, the scores' dims */
        if (c->n_out != 1 || !dn_is_f32(o) || !dn_same_dims(o, r, sc->dims) || p->n >= (int)MP_ARRAY_LEN(p->nodes) - 1)
            return false;
        p->nodes[p->n++] = mb->node;
        cur = o == NULL ? cur : c->out[0];
    }
    return stage == 8;
}

typedef struct attnk {
    dk *d[3];                /* scores, softmax, product; d[0] alone: the unfused MatMul */
    int nd;
    /* a Where mask as the additive one (d[0]'s own buffer), made from the
     * condition, input cond_in, each run when that is not a constant */
    float *wmask;
    int64_t wn;
    int cond_in;             /* -1: made once at prepare */
    bool fill_on_true;
    float fill;
    bool guard;              /* NaN probabilities (in the scratch at d[1]->scr_at) become guard_c */
    float guard_c;
    int64_t np;              /* the number of probabilities */
} attnk;

static void attn_where_mask(attnk *a, const uint8_t *cond) {
    for (int64_t i = 0; i < a->wn; i++) a->wmask[i] = (cond[i] != 0) == a->fill_on_true ? a->fill : 0.0f;
}

typedef struct attn_guard_arg {
    float *p;
    float c;
} attn_guard_arg;

static void attn_guard_range(void *arg, int64_t lo, int64_t hi) {
    attn_guard_arg *ga = arg;
    for (int64_t i = lo; i < hi; i++)
        if (isnan(ga->p[i])) ga->p[i] = ga->c;
}

void dn_attn_release(void *state) {
    attnk *a = state;
    if (!a) return;
    for (int i = 0; i < a->nd; i++) dn_dk_release(a->d[i]);
    free(a);
}

mp_status dn_attn_run(mp_kctx *k) {
    attnk *a = k->state;
    mp_status st = MP_OK;
    if (a->wmask && a->cond_in >= 0) {
        const void *cond = k->in[a->cond_in].data;
        if (!cond) return mp_error(MP_ERR_USAGE, "node %s (%s): the mask's condition is missing", k->n->name, k->n->op);
        attn_where_mask(a, cond);
    }
    for (int i = 0; i < a->nd && !st; i++) {
        k->state = a->d[i];
        st = dn_dk_run(k);
        if (!st && i == 1 && a->guard) {
            attn_guard_arg ga = {(float *)((char *)k->scratch + a->d[1]->scr_at), a->guard_c};
            mp_kparallel(k, a->np, attn_guard_range, &ga);
        }
    }
    k->state = a;
    return st;
}

/* The three primitive descriptors of a fused attention. */
static mp_status attn_pds(mp_kctx *k, const attnpat *p, int mi, dnnl_primitive_desc_t pd[3],
                          dnnl_memory_desc_t md[7]) {
    const mp_graph *g = k->g;
    const mp_value *q = dn_gval(g, k->n, 0), *kt = dn_gval(g, k->n, 1), *sc = dn_gout(g, k->n, 0);
    const mp_value *v = &g->values[p->v_v], *y = dn_gout(g, &g->nodes[p->nodes[p->n - 1]], 0);
    int r = q->rank;
    int64_t rows[2] = {mp_value_numel(sc) / sc->dims[r - 1], sc->dims[r - 1]};
    /* md: Q, Kt, scores, V, Y, the scores as [rows, Sk], the mask */
    dnnl_status_t ds;
    if ((ds = dn_md_plain(&md[0], r, q->dims)) || (ds = dn_md_plain(&md[1], r, kt->dims)) ||
        (ds = dn_md_plain(&md[2], r, sc->dims)) || (ds = dn_md_plain(&md[3], r, v->dims)) ||
        (ds = dn_md_plain(&md[4], r, y->dims)) || (ds = dn_md_plain(&md[5], 2, rows)))
        return dn_dfail(k, ds, "memory descriptor");
    mp_status st;
    dnnl_primitive_attr_t attr;
    if ((st = dn_attr_new(k, &attr))) return st;
    if (p->alpha != 1.0f && (ds = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &p->alpha))) {
        dnnl_primitive_attr_destroy(attr);
        return dn_dfail(k, ds, "output scale");
    }
    chain ch = {0};
    if (mi >= 0) {
        const mp_value *m = &g->values[p->mask_v];
        int64_t mdims[DNNL_MAX_NDIMS];
        for (int i = 0; i < r; i++) {
            int j = i - (r - m->rank);
            mdims[i] = j >= 0 ? m->dims[j] : 1;
        }
        if ((ds = dn_md_plain(&md[6], r, mdims)) || (ds = dnnl_post_ops_create(&ch.po)) ||
            (ds = dnnl_post_ops_append_binary(ch.po, dnnl_binary_add, &md[6])) ||
            (ds = dnnl_primitive_attr_set_post_ops(attr, ch.po))) {
            dn_attr_done(attr, &ch);
            return dn_dfail(k, ds, "attention mask");
        }
    }
    dnnl_matmul_desc_t mm;
    if ((ds = dnnl_matmul_desc_init(&mm, &md[0], &md[1], NULL, &md[2]))) {
        dn_attr_done(attr, &ch);
        return dn_dfail(k, ds, "attention scores");
    }
    if ((st = dn_make_pd(k, &mm, attr, &ch, &pd[0]))) return st;
    dnnl_softmax_desc_t sd;
    if ((ds = dnnl_softmax_forward_desc_init(&sd, dnnl_forward_inference, &md[5], 1)))
        return dn_dfail(k, ds, "attention softmax");
    if ((st = dn_attr_new(k, &attr)) || (st = dn_make_pd(k, &sd, attr, NULL, &pd[1]))) return st;
    if ((ds = dnnl_matmul_desc_init(&mm, &md[2], &md[3], NULL, &md[4]))) return dn_dfail(k, ds, "attention product");
    if ((st = dn_attr_new(k, &attr)) || (st = dn_make_pd(k, &mm, attr, NULL, &pd[2]))) return st;
    return MP_OK;
}

/* Whether the scores' product with its mask (a post-op add broadcast to
 * the scores) runs on one of oneDNN's fast implementations: a causal mask
 * broadcast as [1, 1, S, S] has none, and the reference matmul it falls to
 * is slower than the unfused kernels (28x at 2 x 64 tokens): then the
 * attention is not fused. */
static bool attn_fast(const mp_graph *g, const mp_node *n, const attnpat *p) {
    if (p->mask_v < 0) return true;
    const mp_value *q = dn_gval(g, n, 0), *kt = dn_gval(g, n, 1), *sc = dn_gout(g, n, 0);
    const mp_value *m = &g->values[p->mask_v];
    int r = q->rank;
    int64_t mdims[DNNL_MAX_NDIMS];
    for (int i = 0; i < r; i++) {
        int j = i - (r - m->rank);
        mdims[i] = j >= 0 ? m->dims[j] : 1;
    }
    dnnl_memory_desc_t md[4];
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_matmul_desc_t mm;
    bool fast = false;
    if (!dn_md_plain(&md[0], r, q->dims) && !dn_md_plain(&md[1], r, kt->dims) && !dn_md_plain(&md[2], r, sc->dims) &&
        !dn_md_plain(&md[3], r, mdims) && dnnl_post_ops_create(&po) == dnnl_success &&
        dnnl_post_ops_append_binary(po, dnnl_binary_add, &md[3]) == dnnl_success &&
        dnnl_primitive_attr_create(&attr) == dnnl_success && dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success &&
        (p->alpha == 1.0f || dnnl_primitive_attr_set_output_scales(attr, 1, 0, &p->alpha) == dnnl_success) &&
        dnnl_matmul_desc_init(&mm, &md[0], &md[1], NULL, &md[2]) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &mm, attr, dn_eng, NULL) == dnnl_success)
        fast = *dn_pd_impl(pd) && !dn_pd_is_ref(pd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (po) dnnl_post_ops_destroy(po);
    return fast;
}

mp_status dn_attn_prepare(mp_kctx *k, size_t *scratch) {
    const mp_graph *g = k->g;
    attnpat p;
    if (!dn_attn_pattern(g, k->n, &p))
        return mp_error(MP_ERR_UNSUPPORTED, "node %s: not an attention pattern", k->n->name);
    attnk *a = calloc(1, sizeof *a);
    if (!a) return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
    /* every operand plain (no blocked layout from a oneDNN producer) */
    dnnl_memory_desc_t lmd;
    bool plain = !dn_lay_find(k, k->n->in[0], &lmd) && !dn_lay_find(k, k->n->in[1], &lmd) && !dn_lay_find(k, p.v_v, &lmd) &&
                 (p.mask_v < 0 || !dn_lay_find(k, p.mask_v, &lmd));
    pthread_once(&dn_once, dn_engine_init);
    if (!plain || !k->fuse || dn_init_st != dnnl_success || !attn_fast(g, k->n, &p) ||
        mp_kfuse_nodes(k, p.nodes, p.n) != MP_OK) {
        /* the head alone: the plain MatMul kernel (with its own chain) */
        mp_error_clear();
        mp_status st = dn_matmul_prepare(k, scratch);
        a->d[0] = k->state;
        a->nd = a->d[0] ? 1 : 0;
        k->state = a;
        if (!k->kname) k->kname = "onednn:matmul";
        if (st) {
            dn_attn_release(a);
            k->state = NULL;
        }
        return st;
    }
    int vi = fused_in_index(g, k->n, p.nodes, p.n, p.v_v);
    int mi = p.mask_v >= 0 ? fused_in_index(g, k->n, p.nodes, p.n, p.mask_v) : -1;
    if (vi < 0 || vi >= k->n_in || (p.mask_v >= 0 && (mi < 0 || mi >= k->n_in))) {
        free(a);
        return mp_error(MP_ERR_UNSUPPORTED, "node %s: the attention pattern's inputs are not where expected",
                        k->n->name);
    }
    pthread_once(&dn_once, dn_engine_init);
    if (dn_init_st != dnnl_success) {
        free(a);
        return dn_dfail(k, dn_init_st, "engine");
    }
    dnnl_primitive_desc_t pd[3] = {NULL, NULL, NULL};
    dnnl_memory_desc_t md[7];
    mp_status st = attn_pds(k, &p, mi, pd, md);
    /* the scores after the primitives' scratchpads (which share the
     * start of the scratch: the three run one after another) */
    size_t pad = 0;
    for (int i = 0; !st && i < 3; i++) {
        const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd[i], dnnl_query_scratchpad_md, 0);
        size_t sz = smd ? dnnl_memory_desc_get_size(smd) : 0;
        if (sz > pad) pad = sz;
    }
    size_t at = (pad + 63) / 64 * 64;
    for (int i = 0; !st && i < 3; i++) {
        if ((st = dn_dk_new(k, &a->d[i]))) break;
        a->nd = i + 1;
        dk *s = a->d[i];
        s->scr_at = at;
        if (i == 0) {
            st = dn_dk_arg(k, s, DNNL_ARG_SRC, &md[0], FROM_IN, 0, NULL);
            if (!st) st = dn_dk_arg(k, s, DNNL_ARG_WEIGHTS, &md[1], FROM_IN, 1, NULL);
            if (!st) st = dn_dk_arg(k, s, DNNL_ARG_DST, &md[2], FROM_SCRATCH_AT, 0, NULL);
            if (!st && mi >= 0 && p.where) {
                a->wn = mp_value_numel(&g->values[p.mask_v]);
                a->wmask = dn_dk_alloc_own(s, sizeof(float) * (size_t)a->wn);
                if (!a->wmask) st = mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
                a->fill = p.fill, a->fill_on_true = p.fill_on_true;
                a->cond_in = k->in[mi].data ? -1 : mi;
                if (!st && a->cond_in < 0) attn_where_mask(a, k->in[mi].data);
            }
            /* the mask: an input, or the additive form of a Where's kept here */
            if (!st && mi >= 0)
                st = dn_dk_arg(k, s, DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, &md[6],
                            a->wmask ? FROM_OWN : FROM_IN, mi, a->wmask);
        } else if (i == 1) {
            st = dn_dk_arg(k, s, DNNL_ARG_SRC, &md[5], FROM_SCRATCH_AT, 0, NULL);
            if (!st) st = dn_dk_arg(k, s, DNNL_ARG_DST, &md[5], FROM_SCRATCH_AT, 0, NULL);
        } else {
            st = dn_dk_arg(k, s, DNNL_ARG_SRC, &md[2], FROM_SCRATCH_AT, 0, NULL);
            if (!st) st = dn_dk_arg(k, s, DNNL_ARG_WEIGHTS, &md[3], FROM_IN, vi, NULL);
            if (!st) st = dn_dk_arg(k, s, DNNL_ARG_DST, &md[4], FROM_OUT, 0, NULL);
        }
        if (!st) st = dn_dk_finish(k, s, pd[i], scratch);
    }
    for (int i = 0; i < 3; i++)
        if (pd[i]) dnnl_primitive_desc_destroy(pd[i]);
    k->state = a;
    if (st) {
        dn_attn_release(a);
        k->state = NULL;
        return st;
    }
    a->guard = p.guard, a->guard_c = p.guard_c;
    a->np = mp_value_numel(dn_gout(g, k->n, 0));
    size_t need = at + dnnl_memory_desc_get_size(&md[2]);
    if (scratch && *scratch < need) *scratch = need;
    return MP_OK;
}