/* The graph pass: one walk over the shaped graph in execution order asks
 * each node's train rule (mp_op.train, beside its cost rule) what its
 * backward keeps and costs, gives each value its type under the plan's
 * precision, its storage (views share one) and whether tensor parallelism
 * splits it, and caches per node what every layout then sums
 * (docs/PLANNING.md sections 2, 6 and 7). */
#include "plan/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* ---- the graph pass ---- */

typedef struct pctx {
    mp_tplan *pl;
    mp_model *m;
    mp_graph *g;
    int base_dt, low_dt, model_dt;
    bool mixed, training;
    uint8_t *rg, *cst, *split;   /* per value */
    uint8_t *pflag;               /* per parameter: 1 cast copy counted, 2 counted in a layer */
    uint8_t *noncontig;           /* per value: a transposed view (not contiguous) */
    int *adt;                     /* per value: dtype in the plan */
    int *stor;                    /* per value: storage (view chains) */
    int *seen;                    /* per storage: stamp of the set it was counted in */
    int *node_block;              /* per node index: block or -1 */
    int8_t *ovr;                  /* per node index: OVR_* (decomposed operators) */
    int *first_unit;              /* per storage: the unit (block) of the node that kept it first */
    int cur_unit;                 /* the unit of the node being planned */
    uint64_t *cross;              /* that node's bytes kept again on another stage, or NULL */
    int *cross_unit;
    uint64_t b_num, b_den;        /* per-sample figures x b_num / b_den (a static export
                                   * planned at another batch); 1 / 1 otherwise */
} pctx;

/* A per-sample figure at the batch planned: x at the export's batch, times
 * b_num / b_den (exact when x divides by the export's batch, as every
 * per-sample figure does). */
static uint64_t bscale(const pctx *c, uint64_t x) {
    if (c->b_num == c->b_den) return x;
    return x / c->b_den * c->b_num + (x % c->b_den) * c->b_num / c->b_den;
}

static int dt_size(int dt) {
    int b = mp_dtype_bits(dt);
    return b > 0 ? (b + 7) / 8 : 0;
}

static uint64_t v_bytes(const pctx *c, int v) {
    return mp_tplan_numel(&c->g->values[v]) * (uint64_t)dt_size(c->adt[v]);
}

static int map_float(const pctx *c, int dt) {
    if (!mp_dtype_is_float(dt)) return dt;
    if (dt == c->model_dt) return c->base_dt;
    if (dt == MP_DT_FLOAT && c->base_dt == MP_DT_FLOAT) return dt;
    return dt == MP_DT_DOUBLE ? dt : (dt == MP_DT_FLOAT ? MP_DT_FLOAT : c->base_dt);
}

static int wider(int a, int b) {
    if (a < 0) return b;
    return mp_dtype_bits(b) > mp_dtype_bits(a) ? b : a;
}

/* Blocks: the repeated modules a checkpoint or a pipeline stage is made
 * of. The parent whose non-leaf children of equal parameter count are
 * most numerous gives their depth; every non-leaf module with parameters
 * at that depth is a block (ResNet's 16 bottlenecks, a transformer's
 * layers). */
static mp_status find_blocks(pctx *c) {
    mp_tplan *pl = c->pl;
    const mp_model *m = c->m;
    const mp_profile *p = pl->p;
    int best = -1, best_n = 1;
    uint64_t best_params = 0;
    for (int i = 0; i < m->n_modules; i++) {
        for (int a = m->modules[i].first_child; a >= 0; a = m->modules[a].next_sibling) {
            if (m->modules[a].first_child < 0 || p->mods[a].params == 0) continue;
            int n = 0;
            for (int b = m->modules[i].first_child; b >= 0; b = m->modules[b].next_sibling)
                if (m->modules[b].first_child >= 0 && p->mods[b].params == p->mods[a].params) n++;
            uint64_t cov = p->mods[a].params * (uint64_t)n;
            if (n > best_n || (n == best_n && n > 1 && cov > best_params)) {
                best = a;
                best_n = n;
                best_params = cov;
            }
        }
    }
    pl->block_parent = -1;
    if (best < 0) return MP_OK;
    int depth = m->modules[best].depth;
    pl->block_parent = m->modules[best].parent;
    pl->blocks = mp_arena_calloc(&pl->arena, (size_t)m->n_modules, sizeof(int));
    if (!pl->blocks) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->n_modules; i++)
        if (m->modules[i].depth == depth && m->modules[i].first_child >= 0 && p->mods[i].params > 0)
            pl->blocks[pl->n_blocks++] = i;
    return MP_OK;
}

/* Block of each module: itself or its nearest ancestor that is a block. */
static mp_status module_blocks(pctx *c, int **out) {
    const mp_model *m = c->m;
    int *mb = malloc(sizeof(int) * (size_t)(m->n_modules ? m->n_modules : 1));
    if (!mb) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->n_modules; i++) mb[i] = -1;
    for (int b = 0; b < c->pl->n_blocks; b++) mb[c->pl->blocks[b]] = b;
    /* modules are created parents first: one pass down */
    for (int i = 0; i < m->n_modules; i++) {
        int par = m->modules[i].parent;
        if (mb[i] < 0 && par >= 0 && par < i) mb[i] = mb[par];
    }
    for (int i = 0; i < m->n_modules; i++)
        if (mb[i] < 0) {
            for (int a = m->modules[i].parent; a >= 0; a = m->modules[a].parent)
                if (mb[a] >= 0) {
                    mb[i] = mb[a];
                    break;
                }
        }
    *out = mb;
    return MP_OK;
}

/* A parameter, or a view of one (Identity, Transpose, Reshape of a weight:
 * PyTorch's W.t() shares the weight's storage). */
static bool param_like(const pctx *c, int v) {
    for (int hop = 0; v >= 0 && hop < 8; hop++) {
        const mp_value *val = &c->g->values[v];
        if (val->flags & MP_VAL_PARAM) return true;
        if (val->producer < 0) return false;
        const mp_node *p = &c->g->nodes[val->producer];
        if (!p->desc || p->desc->train != mp_bwd_view || p->n_in < 1) return false;
        v = p->in[0];
    }
    return false;
}

/* Does Transpose n move a dim of size > 1 past another (leave its input
 * non-contiguous)? */
static bool perm_moves(const mp_node *n, const mp_value *x) {
    const int64_t *perm = NULL;
    int np = mp_attr_ints(n, "perm", &perm);
    if (x->rank < 2) return false;
    int last = -1;
    for (int i = 0; i < x->rank; i++) {
        int src = np == x->rank ? (int)perm[i] : x->rank - 1 - i; /* default: reverse */
        if (src < 0 || src >= x->rank) return true;
        if (x->dims[src] == 1) continue;
        if (src < last) return true;
        last = src;
    }
    return false;
}

/* Is a slice of x along its axis strided (not the leading dim of size > 1)? */
static bool slice_strided(const pctx *c, const mp_node *n, const mp_value *x) {
    int axis = 0;
    if (mp_streq(n->op, "Slice")) {
        const int64_t *ax = NULL;
        int64_t na = 0;
        mp_ctx cx = {c->m, c->g, (mp_node *)n, 0};
        if (n->opset >= 10) {
            if (n->n_in < 4 || n->in[3] < 0) return true; /* every axis */
            if (!mp_ints(&cx, 3, &ax, &na) || na != 1) return true;
            axis = (int)ax[0];
        } else {
            na = mp_attr_ints(n, "axes", &ax);
            if (na != 1) return true;
            axis = (int)ax[0];
        }
    } else {
        axis = (int)mp_attr_i(n, "axis", 0);
    }
    axis = mp_axis(axis, x->rank);
    if (axis < 0) return true;
    for (int i = 0; i < axis; i++)
        if (x->dims[i] != 1) return true;
    return false;
}

static bool is_weight_product(const pctx *c, const mp_node *n, int *act) {
    if (!n->desc || n->desc->train != mp_bwd_product || !(mp_streq(n->op, "MatMul") || mp_streq(n->op, "Gemm")))
        return false;
    if (n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0) return false;
    if (!param_like(c, n->in[1])) return false;
    *act = n->in[0];
    return true;
}

static void note_default(mp_tplan *pl, const char *op) {
    for (int i = 0; i < pl->n_default_ops; i++)
        if (mp_streq(pl->default_ops[i], op)) {
            pl->default_counts[i]++;
            return;
        }
    pl->default_ops[pl->n_default_ops] = op;
    pl->default_counts[pl->n_default_ops++] = 1;
}

/* A kept value's bytes (its storage counted once per stamp); under
 * autocast a value kept in another type is a copy of its own. */
static uint64_t keep(pctx *c, int v, int want_dt, int stamp, bool *split, uint64_t *cast) {
    *split = c->split[v];
    if (c->g->values[c->stor[v]].flags & MP_VAL_PARAM) v = c->stor[v]; /* a view of a weight */
    const mp_value *val = &c->g->values[v];
    if (val->flags & MP_VAL_PARAM) {
        /* the parameter itself is no activation; autocast's cached
         * low-precision copy of it is (once per parameter) */
        if (!c->mixed || want_dt != c->low_dt) return 0;
        if (c->pflag[v] & 1) return 0;
        c->pflag[v] |= 1;
        uint64_t b = mp_tplan_numel(val) * (uint64_t)dt_size(c->low_dt);
        c->pl->cast_param_bytes += b;
        if (cast) *cast += b;
        return b;
    }
    if (c->cst[v]) return 0;
    if (want_dt >= 0 && mp_dtype_is_float(c->adt[v]) && want_dt != c->adt[v])
        return bscale(c, mp_tplan_numel(val) * (uint64_t)dt_size(want_dt));
    int s = c->stor[v];
    uint64_t b = bscale(c, mp_tplan_numel(&c->g->values[s]) * (uint64_t)dt_size(c->adt[s]));
    if (c->seen[s] == stamp) {
        /* kept already; by a node of another unit (block), it is kept again
         * when a pipeline puts the two on different stages (the later stage
         * receives its own copy) */
        if (stamp == 1 && c->first_unit[s] != c->cur_unit && c->cross) {
            *c->cross += b;
            if (c->first_unit[s] > *c->cross_unit) *c->cross_unit = c->first_unit[s];
        }
        return 0;
    }
    c->seen[s] = stamp;
    if (stamp == 1) c->first_unit[s] = c->cur_unit;
    return b;
}

/* ---- operators the exporter decomposed ----
 * Opsets before 17 (LayerNormalization) and before 20 (Gelu) have no such
 * operator: torch.onnx writes LayerNorm as ReduceMean, Sub, Pow,
 * ReduceMean, Add, Sqrt, Div (then Mul, Add for the affine part) and
 * F.gelu as Div, Erf, Add, Mul, Mul. PyTorch runs one operator that keeps
 * its input (and, for LayerNorm, a mean and 1/std per row): the planner
 * recognises the pattern and applies that operator's rule to the group.
 * nn.SiLU exports as Sigmoid and Mul(x, sigmoid(x)) at every opset, and
 * F.silu keeps its input only.
 * ovr per node: -1 none, 0 a member (keeps nothing), 1 LayerNorm's head,
 * 2 GELU's or SiLU's head (keeps its input). */
enum { OVR_NONE = -1, OVR_MEMBER = 0, OVR_LAYERNORM = 1, OVR_GELU = 2, OVR_ATTN = 3, OVR_ATTN_PV = 4 };
/* Fused attention (--attention fused: PyTorch 2's scaled_dot_product_attention,
 * flash or memory-efficient): Q.K^T, its scaling and mask, the softmax and
 * the product with V are one kernel that never writes the scores; its
 * backward keeps q, k, v, the output and one fp32 log-sum-exp per row.
 * OVR_ATTN: a member (no traffic, keeps nothing); OVR_ATTN_PV: the product
 * with V (keeps V, its output and the log-sum-exp). */

typedef struct consumers {
    int *start, *list; /* CSR: consumers of value v are list[start[v] .. start[v+1]) */
} consumers;

static int only_consumer(const pctx *c, const consumers *cs, int v, const char *op) {
    if (v < 0 || cs->start[v + 1] - cs->start[v] < 1) return -1;
    for (int i = cs->start[v]; i < cs->start[v + 1]; i++) {
        const mp_node *n = &c->g->nodes[cs->list[i]];
        if (mp_streq(n->op, op)) return cs->list[i];
    }
    return -1;
}

static bool has_in(const mp_node *n, int v) {
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] == v) return true;
    return false;
}

static int other_in(const mp_node *n, int v) {
    if (n->n_in != 2) return -1;
    return n->in[0] == v ? n->in[1] : n->in[1] == v ? n->in[0] : -1;
}

static void find_decomposed(pctx *c, const consumers *cs, int8_t *ovr) {
    mp_graph *g = c->g;
    for (int ni = 0; ni < g->n_nodes; ni++) {
        const mp_node *n = &g->nodes[ni];
        if (mp_streq(n->op, "ReduceMean") && n->n_in >= 1 && n->n_out >= 1 && ovr[ni] == OVR_NONE) {
            int x = n->in[0], mean = n->out[0];
            int sub = only_consumer(c, cs, mean, "Sub");
            if (sub < 0 || g->nodes[sub].n_in != 2 || g->nodes[sub].in[0] != x) continue;
            int d = g->nodes[sub].out[0];
            int pw = only_consumer(c, cs, d, "Pow");
            int dv = only_consumer(c, cs, d, "Div");
            if (pw < 0 || dv < 0) continue;
            int r2 = only_consumer(c, cs, g->nodes[pw].out[0], "ReduceMean");
            if (r2 < 0) continue;
            int ad = only_consumer(c, cs, g->nodes[r2].out[0], "Add");
            if (ad < 0) continue;
            int sq = only_consumer(c, cs, g->nodes[ad].out[0], "Sqrt");
            if (sq < 0 || !has_in(&g->nodes[dv], g->nodes[sq].out[0])) continue;
            int members[] = {sub, pw, r2, ad, sq, dv};
            ovr[ni] = OVR_LAYERNORM;
            for (size_t i = 0; i < sizeof members / sizeof members[0]; i++) ovr[members[i]] = OVR_MEMBER;
            /* the affine part: x_hat * gamma (+ beta) needs no x_hat of its own */
            int mul = only_consumer(c, cs, g->nodes[dv].out[0], "Mul");
            if (mul >= 0) {
                int w = other_in(&g->nodes[mul], g->nodes[dv].out[0]);
                if (w >= 0 && param_like(c, w)) ovr[mul] = OVR_MEMBER;
            }
        } else if (mp_streq(n->op, "Sigmoid") && n->n_in == 1 && n->n_out == 1 && n->in[0] >= 0) {
            int x = n->in[0];
            for (int i = cs->start[n->out[0]]; i < cs->start[n->out[0] + 1]; i++) {
                const mp_node *q = &g->nodes[cs->list[i]];
                if (mp_streq(q->op, "Mul") && other_in(q, n->out[0]) == x &&
                    cs->start[n->out[0] + 1] - cs->start[n->out[0]] == 1) {
                    ovr[ni] = OVR_GELU;
                    ovr[cs->list[i]] = OVR_MEMBER;
                }
            }
        } else if (mp_streq(n->op, "Erf") && n->n_in == 1 && n->n_out == 1) {
            int pre = g->values[n->in[0]].producer;
            if (pre < 0) continue;
            const mp_node *p = &g->nodes[pre];
            if (!(mp_streq(p->op, "Div") || mp_streq(p->op, "Mul")) || p->n_in != 2 || p->in[1] < 0 ||
                !c->cst[p->in[1]])
                continue;
            int x = p->in[0];
            int ad = only_consumer(c, cs, n->out[0], "Add");
            if (ad < 0) continue;
            int mul = -1;
            for (int i = cs->start[g->nodes[ad].out[0]]; i < cs->start[g->nodes[ad].out[0] + 1]; i++) {
                const mp_node *q = &g->nodes[cs->list[i]];
                if (mp_streq(q->op, "Mul") && other_in(q, g->nodes[ad].out[0]) >= 0) mul = cs->list[i];
            }
            if (mul < 0) continue;
            int y = other_in(&g->nodes[mul], g->nodes[ad].out[0]);
            /* x * (1 + erf) (then * 0.5), or (x * 0.5) * (1 + erf) */
            int half = -1;
            if (y != x) {
                int yp = y >= 0 ? g->values[y].producer : -1;
                if (yp < 0 || !mp_streq(g->nodes[yp].op, "Mul") || !has_in(&g->nodes[yp], x)) continue;
                half = yp;
            } else {
                half = only_consumer(c, cs, g->nodes[mul].out[0], "Mul");
                if (half >= 0 && !(g->nodes[half].n_in == 2 && g->nodes[half].in[1] >= 0 &&
                                   c->cst[g->nodes[half].in[1]]))
                    half = -1;
            }
            ovr[pre] = OVR_GELU;
            ovr[ni] = ovr[ad] = ovr[mul] = OVR_MEMBER;
            if (half >= 0) ovr[half] = OVR_MEMBER;
            if (half >= 0 && y != x) { /* (x * 0.5) runs first: it is the head */
                ovr[half] = OVR_GELU;
                ovr[pre] = OVR_MEMBER;
            }
        }
    }
}

/* The attention core around a rank-4 Softmax: back to the product Q.K^T
 * through scaling, masking and casts; on to the product with V through
 * casts and dropouts. */
static void find_attention(pctx *c, const consumers *cs, int8_t *ovr) {
    mp_graph *g = c->g;
    for (int ni = 0; ni < g->n_nodes; ni++) {
        const mp_node *n = &g->nodes[ni];
        if (!mp_streq(n->op, "Softmax") || n->n_in < 1 || n->in[0] < 0 || n->n_out < 1 || n->out[0] < 0) continue;
        if (g->values[n->in[0]].rank < 3) continue; /* [b, h, s, s] or bmm's [b*h, s, s] */
        int chain[12], nc = 0, qk = -1;
        int v = n->in[0];
        for (int hop = 0; hop < 6 && v >= 0; hop++) {
            int p = g->values[v].producer;
            if (p < 0) break;
            const mp_node *q = &g->nodes[p];
            if (mp_streq(q->op, "MatMul")) {
                qk = p;
                break;
            }
            if (!(mp_streq(q->op, "Div") || mp_streq(q->op, "Mul") || mp_streq(q->op, "Add") ||
                  mp_streq(q->op, "Where") || mp_streq(q->op, "Cast") || mp_streq(q->op, "Sub")))
                break;
            chain[nc++] = p;
            /* on through the operand that carries the scores (the largest) */
            int big = -1;
            for (int i = 0; i < q->n_in; i++)
                if (q->in[i] >= 0 && !c->cst[q->in[i]] &&
                    (big < 0 || mp_tplan_numel(&g->values[q->in[i]]) > mp_tplan_numel(&g->values[big])))
                    big = q->in[i];
            v = big;
        }
        if (qk < 0) continue;
        int pv = -1;
        v = n->out[0];
        for (int hop = 0; hop < 4 && v >= 0 && pv < 0; hop++) {
            int next = -1;
            for (int i = cs->start[v]; i < cs->start[v + 1]; i++) {
                const mp_node *q = &g->nodes[cs->list[i]];
                if (mp_streq(q->op, "MatMul") && q->n_in == 2 && q->in[0] == v) pv = cs->list[i];
                else if ((mp_streq(q->op, "Cast") || mp_streq(q->op, "Dropout")) && q->n_out > 0 && nc < 11) {
                    chain[nc++] = cs->list[i];
                    next = q->out[0];
                }
            }
            v = next;
        }
        if (pv < 0) continue;
        for (int i = 0; i < nc; i++) ovr[chain[i]] = OVR_ATTN;
        ovr[ni] = OVR_ATTN;
        ovr[pv] = OVR_ATTN_PV;
    }
}

static mp_status build_consumers(const mp_graph *g, consumers *cs) {
    cs->start = calloc((size_t)g->n_values + 2, sizeof(int));
    int total = 0;
    for (int ni = 0; ni < g->n_nodes; ni++) total += g->nodes[ni].n_in;
    cs->list = malloc(sizeof(int) * (size_t)(total ? total : 1));
    if (!cs->start || !cs->list) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int ni = 0; ni < g->n_nodes; ni++)
        for (int i = 0; i < g->nodes[ni].n_in; i++)
            if (g->nodes[ni].in[i] >= 0) cs->start[g->nodes[ni].in[i] + 1]++;
    for (int v = 0; v < g->n_values; v++) cs->start[v + 1] += cs->start[v];
    int *fill = calloc((size_t)g->n_values + 1, sizeof(int));
    if (!fill) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int ni = 0; ni < g->n_nodes; ni++)
        for (int i = 0; i < g->nodes[ni].n_in; i++) {
            int v = g->nodes[ni].in[i];
            if (v >= 0) cs->list[cs->start[v] + fill[v]++] = ni;
        }
    free(fill);
    cs->start[g->n_values + 1] = cs->start[g->n_values];
    return MP_OK;
}

static mp_status graph_pass(pctx *c) {
    mp_tplan *pl = c->pl;
    mp_graph *g = c->g;
    const mp_tplan_options *o = &pl->o;
    int nv = g->n_values, nn = g->n_nodes;
    pl->n_nodes = nn;
    pl->nodes = mp_arena_calloc(&pl->arena, (size_t)(nn ? nn : 1), sizeof(mp_pnode));
    pl->default_ops = mp_arena_calloc(&pl->arena, (size_t)(nn ? nn : 1), sizeof(char *));
    pl->default_counts = mp_arena_calloc(&pl->arena, (size_t)(nn ? nn : 1), sizeof(int));
    pl->tp_ops = mp_arena_calloc(&pl->arena, (size_t)(nn ? nn : 1), sizeof(char *));
    pl->tp_split = mp_arena_calloc(&pl->arena, (size_t)(nn ? nn : 1), sizeof(int));
    pl->tp_rep = mp_arena_calloc(&pl->arena, (size_t)(nn ? nn : 1), sizeof(int));
    c->rg = calloc((size_t)nv + 1, 1);
    c->cst = calloc((size_t)nv + 1, 1);
    c->split = calloc((size_t)nv + 1, 1);
    c->pflag = calloc((size_t)nv + 1, 1);
    c->noncontig = calloc((size_t)nv + 1, 1);
    pl->param_split = mp_arena_calloc(&pl->arena, (size_t)nv + 1, 1);
    c->adt = calloc((size_t)nv + 1, sizeof(int));
    c->stor = calloc((size_t)nv + 1, sizeof(int));
    c->seen = calloc((size_t)nv + 1, sizeof(int));
    c->node_block = calloc((size_t)nn + 1, sizeof(int));
    c->first_unit = calloc((size_t)nv + 1, sizeof(int));
    size_t all_in = 1;
    for (int ni = 0; ni < nn; ni++) all_in += (size_t)g->nodes[ni].n_in;
    pl->pparams = mp_arena_calloc(&pl->arena, all_in, sizeof(int));
    if (!pl->nodes || !pl->default_ops || !pl->default_counts || !pl->tp_ops || !pl->tp_split || !pl->tp_rep || !c->rg || !c->cst || !c->split || !c->pflag || !c->noncontig || !pl->param_split ||
        !c->adt || !c->stor || !c->seen || !c->node_block || !c->first_unit || !pl->pparams)
        return mp_error(MP_ERR_NOMEM, "out of memory");

    for (int v = 0; v < nv; v++) {
        const mp_value *val = &g->values[v];
        c->stor[v] = v;
        if (val->flags & MP_VAL_PARAM) c->rg[v] = 1;
        if ((val->flags & (MP_VAL_INIT | MP_VAL_CONST)) && !(val->flags & MP_VAL_PARAM)) c->cst[v] = 1;
    }
    c->model_dt = pl->model_dt;
    for (int v = 0; v < nv; v++) c->adt[v] = map_float(c, g->values[v].dtype);

    /* constants first (the patterns ask which inputs are constant) */
    for (int k = 0; k < nn; k++) {
        const mp_node *n = &g->nodes[g->order[k]];
        bool all_const = n->n_in > 0 || mp_streq(n->op, "Constant") || mp_streq(n->op, "ConstantOfShape");
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] >= 0 && !c->cst[n->in[i]]) all_const = false;
        for (int i = 0; i < n->n_out; i++)
            if (n->out[i] >= 0 && (all_const || g->values[n->out[i]].kn >= 0)) c->cst[n->out[i]] = 1;
    }
    consumers cs = {NULL, NULL};
    int8_t *ovr = malloc((size_t)(nn ? nn : 1));
    mp_status st0 = build_consumers(g, &cs);
    if (!st0 && !ovr) st0 = mp_error(MP_ERR_NOMEM, "out of memory");
    if (!st0) {
        memset(ovr, OVR_NONE, (size_t)(nn ? nn : 1));
        find_decomposed(c, &cs, ovr);
        if (c->pl->o.attention_fused && c->training) find_attention(c, &cs, ovr);
    }
    free(cs.start);
    free(cs.list);
    if (st0) {
        free(ovr);
        return st0;
    }
    c->ovr = ovr;

    int *mblock = NULL;
    mp_status st = find_blocks(c);
    if (!st) st = module_blocks(c, &mblock);
    if (st) return st;

    int stamp_global = 1, last_unit = -1;
    uint64_t largest_layer = 0;
    for (int k = 0; k < nn; k++) {
        int ni = g->order[k];
        mp_node *n = &g->nodes[ni];
        mp_pnode *pn = &pl->nodes[k];
        int blk = n->module >= 0 && n->module < c->m->n_modules ? mblock[n->module] : -1;
        pn->block = blk;
        c->node_block[ni] = blk;
        /* constants and shape arithmetic: outputs of nodes whose inputs are
         * all constant are constant (folded: no memory, no time) */
        bool all_const = true, any_rg = false;
        uint32_t rg = 0;
        for (int i = 0; i < n->n_in; i++) {
            int v = n->in[i];
            if (v < 0) continue;
            if (!c->cst[v]) all_const = false;
            if (c->rg[v] && i < 32) {
                rg |= 1u << i;
                any_rg = true;
            }
        }
        if (n->n_in == 0) all_const = mp_streq(n->op, "Constant") || mp_streq(n->op, "ConstantOfShape");
        for (int i = 0; i < n->n_out; i++) {
            int v = n->out[i];
            if (v < 0) continue;
            const mp_value *val = &g->values[v];
            if (all_const || val->kn >= 0) c->cst[v] = 1;
            if (any_rg && mp_dtype_is_float(val->dtype)) c->rg[v] = 1;
        }
        if (all_const) {
            pn->block = -1; /* folded: no stage's work */
            continue;
        }
        /* the block a node outside the blocks goes with: the one before it */
        if (blk >= 0) last_unit = blk;
        pn->unit = blk >= 0 ? blk : (last_unit >= 0 ? last_unit : 0);
        c->cur_unit = pn->unit;

        mp_bwd t;
        memset(&t, 0, sizeof t);
        t.rg = rg;
        t.fwd = &n->cost;
        if (c->ovr[ni] == OVR_ATTN) {
            /* inside a fused attention kernel: nothing kept, nothing written */
            t.bwd_flops = rg ? 2 * n->cost.flops : 0;
            t.view = false;
        } else if (c->ovr[ni] == OVR_ATTN_PV) {
            mp_ctx cx = {c->m, g, n, ni};
            mp_bwd_product(&cx, &t);
            t.save_in = rg ? 2u : 0;  /* V (the probabilities are never kept) */
            t.save_out = rg ? 1u : 0; /* the attention's output */
            const mp_value *y = n->n_out > 0 && n->out[0] >= 0 ? &g->values[n->out[0]] : NULL;
            if (y && y->rank >= 1 && y->dims[y->rank - 1] > 0 && rg)
                t.extra_bytes = 4 * (mp_tplan_numel(y) / (uint64_t)y->dims[y->rank - 1]); /* log-sum-exp */
        } else if (c->ovr[ni] != OVR_NONE) {
            /* a member of a decomposed LayerNorm or GELU, or its head */
            const mp_value *x = n->n_in > 0 && n->in[0] >= 0 ? &g->values[n->in[0]] : NULL;
            t.bwd_flops = rg ? 2 * n->cost.flops : 0;
            if (c->ovr[ni] == OVR_LAYERNORM) {
                t.amp = MP_AMP_FP32;
                t.save_in = rg & 1u;
                uint64_t rows = x && x->rank >= 1 && x->dims[x->rank - 1] > 0
                                    ? mp_tplan_numel(x) / (uint64_t)x->dims[x->rank - 1] : 0;
                t.extra_bytes = rg ? 2 * 4 * rows : 0;
            } else if (c->ovr[ni] == OVR_GELU) {
                t.save_in = rg & 1u;
            } else {
                /* members run in the type the head chose: fp32 after a
                 * LayerNorm's head under autocast */
                t.amp = MP_AMP_PROMOTE;
            }
        } else if (n->desc && n->desc->train) {
            mp_ctx cx = {c->m, g, n, ni};
            n->desc->train(&cx, &t);
        } else {
            /* the default: every input kept, bwd = 2 x fwd */
            pn->default_rule = true;
            note_default(pl, n->op);
            if (rg) t.save_in = n->n_in >= 32 ? 0xffffffffu : (1u << n->n_in) - 1u;
            t.bwd_flops = rg ? 2 * n->cost.flops : 0;
        }
        if (!rg) t.bwd_flops = 0;

        /* types under the plan */
        int amp = t.amp;
        if (amp == MP_AMP_LOSS) amp = MP_AMP_FP32;
        else if (amp == MP_AMP_FP32 && pl->o.autocast_cpu) amp = MP_AMP_PROMOTE;
        if (!c->mixed && amp != MP_AMP_KEEP) amp = MP_AMP_PROMOTE;
        int act_dt = -1, any_dt = -1;
        for (int i = 0; i < n->n_in; i++) {
            int v = n->in[i];
            if (v < 0 || !mp_dtype_is_float(c->adt[v])) continue;
            any_dt = wider(any_dt, c->adt[v]);
            if (!c->cst[v] && !param_like(c, v)) act_dt = wider(act_dt, c->adt[v]);
        }
        int out_dt = act_dt >= 0 ? act_dt : any_dt >= 0 ? any_dt : c->base_dt;
        if (amp == MP_AMP_LOWER) out_dt = c->low_dt;
        else if (amp == MP_AMP_FP32) out_dt = MP_DT_FLOAT;
        pn->lower = amp == MP_AMP_LOWER || (!c->mixed && c->base_dt != MP_DT_FLOAT);
        for (int i = 0; i < n->n_out; i++) {
            int v = n->out[i];
            if (v < 0) continue;
            if (amp != MP_AMP_KEEP && mp_dtype_is_float(g->values[v].dtype)) c->adt[v] = out_dt;
        }
        /* a Cast to the type it already has is PyTorch's no-op .to() */
        bool same_cast = (mp_streq(n->op, "Cast") || mp_streq(n->op, "CastLike")) && n->n_in > 0 &&
                         n->in[0] >= 0 && n->n_out > 0 && n->out[0] >= 0;
        if ((t.view || same_cast) && n->n_in > 0 && n->in[0] >= 0 && n->n_out > 0 && n->out[0] >= 0 &&
            c->adt[n->out[0]] == c->adt[n->in[0]]) {
            /* PyTorch's transpose is a view with other strides, and so are
             * slices (Slice, Split, a scalar Gather) off the leading dim;
             * reshaping a non-contiguous tensor copies it (reshape,
             * contiguous().view) */
            bool transpose = mp_streq(n->op, "Transpose");
            bool slice = mp_streq(n->op, "Slice") || mp_streq(n->op, "Split") || mp_streq(n->op, "Gather");
            int x = n->in[0];
            if (!transpose && !slice && c->noncontig[x] && !mp_streq(n->op, "Identity") && !same_cast) {
                t.view = false; /* a copy: the output is a storage of its own */
            } else {
                uint8_t nc = c->noncontig[x];
                if (transpose) nc |= perm_moves(n, &g->values[x]);
                if (slice) nc |= slice_strided(c, n, &g->values[x]);
                for (int i = 0; i < n->n_out; i++) {
                    int y = n->out[i];
                    if (y < 0) continue;
                    c->stor[y] = c->stor[x];
                    c->noncontig[y] = nc;
                }
                t.view = true;
            }
        }

        /* tensor parallelism: Megatron's column / row split of the weight
         * products inside the blocks; everything between them splits too */
        bool split = false;
        int act;
        if (blk >= 0) { /* split figures always: --tp and --fit's layouts use them */
            if (is_weight_product(c, n, &act)) {
                split = true;
                pl->param_split[c->stor[n->in[1]]] = 1;
                if (n->n_in > 2 && n->in[2] >= 0) pl->param_split[c->stor[n->in[2]]] = 1;
                bool row = c->split[act];
                for (int i = 0; i < n->n_out; i++)
                    if (n->out[i] >= 0) c->split[n->out[i]] = !row;
                /* fwd all-reduce of a row split's output, bwd all-reduce of a
                 * column split's input gradient */
                pn->tp_comm = bscale(c, row ? (n->n_out > 0 && n->out[0] >= 0 ? v_bytes(c, n->out[0]) : 0)
                                            : v_bytes(c, act));
            } else {
                for (int i = 0; i < n->n_in; i++)
                    if (n->in[i] >= 0 && c->split[n->in[i]]) split = true;
                for (int i = 0; i < n->n_out && split; i++)
                    if (n->out[i] >= 0) c->split[n->out[i]] = 1;
                for (int i = 0; i < n->n_in && split; i++) /* a split product's bias */
                    if (n->in[i] >= 0 && param_like(c, n->in[i])) pl->param_split[c->stor[n->in[i]]] = 1;
            }
        }
        pn->split = split;
        bool shape_only = n->n_out > 0; /* Shape, Size: outputs known, no work */
        for (int i = 0; i < n->n_out; i++)
            if (n->out[i] >= 0 && !c->cst[n->out[i]]) shape_only = false;
        if (shape_only) {
            /* counted nowhere */
        } else if (split) {
            pl->split_nodes++;
        } else if (blk >= 0) {
            pl->replicated_nodes++;
        }
        if (blk >= 0 && !shape_only) {
            int i = 0;
            while (i < pl->n_tp_ops && !mp_streq(pl->tp_ops[i], n->op)) i++;
            if (i == pl->n_tp_ops) pl->tp_ops[pl->n_tp_ops++] = n->op;
            if (split) pl->tp_split[i]++;
            else pl->tp_rep[i]++;
        }

        /* what the backward keeps */
        int stamp = (pl->o.checkpointing && blk >= 0) ? -(blk + 10) : stamp_global;
        uint64_t cross = 0;
        int cross_unit = -1;
        c->cross = &cross;
        c->cross_unit = &cross_unit;
        uint64_t rep = 0, spl = 0;
        for (int i = 0; i < n->n_in && i < 32; i++) {
            if (!(t.save_in & (1u << i)) || n->in[i] < 0) continue;
            int want = amp == MP_AMP_LOWER ? c->low_dt : amp == MP_AMP_FP32 ? MP_DT_FLOAT : -1;
            bool sp;
            uint64_t cb = 0;
            uint64_t b = keep(c, n->in[i], want, stamp, &sp, &cb);
            if (sp) spl += b;
            else rep += b;
            if (cb && (sp || pl->param_split[c->stor[n->in[i]]])) pn->cast_split += cb;
            else pn->cast_rep += cb;
        }
        for (int i = 0; i < n->n_out && i < 32; i++) {
            if (!(t.save_out & (1u << i)) || n->out[i] < 0) continue;
            bool sp;
            uint64_t b = keep(c, n->out[i], -1, stamp, &sp, NULL);
            if (sp) spl += b;
            else rep += b;
        }
        if (split) spl += bscale(c, t.extra_bytes);
        else rep += bscale(c, t.extra_bytes);
        pn->saved_rep = rep;
        pn->saved_split = spl;
        c->cross = NULL;
        pn->cross = cross;
        pn->cross_unit = cross_unit;

        /* parameters first used here; the largest layer (DeepSpeed's L) */
        uint64_t node_params = 0;
        pn->first_param = pl->n_pparams;
        for (int i = 0; i < n->n_in; i++) {
            int v = n->in[i];
            if (v < 0 || !(g->values[v].flags & MP_VAL_PARAM)) continue;
            pl->pparams[pl->n_pparams++] = v;
            pn->n_params++;
            uint64_t e = mp_tplan_numel(&g->values[v]);
            node_params += e;
            if (c->pflag[v] & 2) continue;
            c->pflag[v] |= 2;
            if (split) pn->params_split += e;
            else pn->params_rep += e;
        }
        if (node_params > largest_layer) largest_layer = node_params;

        /* work and traffic; a node reading an activation works per sample */
        bool per_sample = false;
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] >= 0 && !c->cst[n->in[i]] && !param_like(c, n->in[i])) per_sample = true;
        pn->fwd_flops = per_sample ? bscale(c, n->cost.flops) : n->cost.flops;
        pn->bwd_flops = per_sample ? bscale(c, t.bwd_flops) : t.bwd_flops;
        uint64_t w_io = 0, act_io = 0;
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] >= 0 && !c->cst[n->in[i]]) {
                uint64_t b = v_bytes(c, n->in[i]);
                if (c->mixed && amp == MP_AMP_LOWER && mp_dtype_is_float(c->adt[n->in[i]]))
                    b = mp_tplan_numel(&g->values[n->in[i]]) * (uint64_t)dt_size(c->low_dt);
                if (!param_like(c, n->in[i])) act_io += b;
                else w_io += b;
            }
        for (int i = 0; i < n->n_out; i++)
            if (n->out[i] >= 0) act_io += v_bytes(c, n->out[i]);
        bool fused_member = c->ovr[ni] == OVR_ATTN;
        if (c->ovr[ni] == OVR_ATTN_PV && n->n_in > 0 && n->in[0] >= 0) {
            /* the product with V reads q, k, v and writes the output: not the scores */
            uint64_t sc = v_bytes(c, n->in[0]);
            act_io = act_io > sc ? act_io - sc : 0;
        }
        if (per_sample) act_io = bscale(c, act_io);
        pn->out_bytes = n->n_out > 0 && n->out[0] >= 0 ? bscale(c, v_bytes(c, n->out[0])) : 0;
        pn->bytes = t.view || fused_member ? 0 : act_io + w_io;
        pn->temp = fused_member ? 0 : act_io;
    }
    pl->largest_layer = largest_layer;
    free(mblock);

    /* checkpointing: each block keeps its inputs (as given to it) instead
     * of what its nodes keep; the largest block's own set comes back
     * during its backward (a temporary) */
    if (o->checkpointing && pl->n_blocks > 0 && c->training) {
        for (int k = 0; k < nn; k++) {
            int ni = g->order[k];
            mp_node *n = &g->nodes[ni];
            mp_pnode *pn = &pl->nodes[k];
            if (pn->block < 0) continue;
            uint64_t rep = 0, spl = 0, cross = 0;
            int cross_unit = -1;
            c->cur_unit = pn->unit;
            c->cross = &cross;
            c->cross_unit = &cross_unit;
            for (int i = 0; i < n->n_in; i++) {
                int v = n->in[i];
                if (v < 0 || c->cst[v] || param_like(c, v)) continue;
                int prod = g->values[v].producer;
                if (prod >= 0 && c->node_block[prod] == pn->block) continue;
                bool sp;
                uint64_t b = keep(c, v, -1, stamp_global, &sp, NULL);
                if (sp) spl += b;
                else rep += b;
            }
            /* the node's own set comes back when its block is recomputed */
            c->cross = NULL;
            pn->ckpt_rep = pn->saved_rep;
            pn->ckpt_split = pn->saved_split;
            pn->saved_rep = rep;
            pn->saved_split = spl;
            pn->cross = cross;
            pn->cross_unit = cross_unit;
        }
    }
    return MP_OK;
}


/* Heads: the second dim of the rank-4 softmax inputs inside the blocks. */
static int find_heads(const mp_tplan *pl) {
    const mp_graph *g = pl->p->m->graph;
    for (int k = 0; k < pl->n_nodes; k++) {
        if (pl->nodes[k].block < 0) continue;
        const mp_node *n = &g->nodes[g->order[k]];
        if (!mp_streq(n->op, "Softmax") || n->n_in < 1 || n->in[0] < 0) continue;
        const mp_value *v = &g->values[n->in[0]];
        if (v->rank == 4 && v->dims[1] > 0) return (int)v->dims[1];
    }
    return 0;
}

static uint64_t inference_peak(mp_tplan *pl, const pctx *c) {
    const mp_profile *p = pl->p;
    const mp_graph *g = c->g;
    uint64_t in = 0;
    for (int i = 0; i < g->n_inputs; i++) in += bscale(c, v_bytes(c, g->inputs[i]));
    pl->infer_inputs = in;
    double ratio = (double)dt_size(c->base_dt) / (double)dt_size(c->model_dt);
    pl->infer_acts = bscale(c, (uint64_t)((double)p->activation_peak_bytes * ratio));
    return in;
}


/* The model's float type: that of most parameter elements (fp32 when it
 * has none). */
int mp_tplan_model_dtype(const mp_graph *g) {
    uint64_t by[MP_DT_COUNT] = {0};
    for (int v = 0; v < g->n_values; v++) {
        const mp_value *val = &g->values[v];
        if ((val->flags & MP_VAL_PARAM) && mp_dtype_is_float(val->dtype) && val->dtype >= 0 &&
            val->dtype < MP_DT_COUNT)
            by[val->dtype] += mp_tplan_numel(val);
    }
    int dt = MP_DT_FLOAT;
    for (int d = 0; d < MP_DT_COUNT; d++)
        if (by[d] > by[dt]) dt = d;
    return dt;
}

/* The graph pass and what the plan reads off the graph: parameters, heads,
 * tokens, the loss's kept bytes, the inference figures. */
mp_status mp_tplan_graph(mp_tplan *pl) {
    const mp_tplan_options *o = &pl->o;
    mp_model *m = pl->p->m;
    mp_status st;
    pctx c;
    memset(&c, 0, sizeof c);
    c.pl = pl;
    c.m = m;
    c.g = m->graph;
    c.mixed = o->precision == MP_PREC_BF16_MIXED || o->precision == MP_PREC_FP16_MIXED;
    c.training = !o->inference;
    c.base_dt = o->precision == MP_PREC_BF16 ? MP_DT_BFLOAT16 : o->precision == MP_PREC_FP16 ? MP_DT_FLOAT16 : MP_DT_FLOAT;
    c.low_dt = o->precision == MP_PREC_BF16_MIXED ? MP_DT_BFLOAT16
               : o->precision == MP_PREC_FP16_MIXED ? MP_DT_FLOAT16 : c.base_dt;
    c.b_num = pl->batch_scaled ? (uint64_t)pl->batch : 1;
    c.b_den = pl->batch_scaled ? (uint64_t)pl->export_batch : 1;
    st = graph_pass(&c);
    const mp_graph *g = c.g;
    if (!st) {
        pl->params = pl->p->total.params;
        pl->heads = find_heads(pl);
        /* tokens: an integer input of rank 2 is (batch, seq) ids */
        for (int i = 0; i < g->n_inputs; i++) {
            const mp_value *v = &g->values[g->inputs[i]];
            if (v->rank >= 1 && v->dims[0] > 0 && !pl->samples_per_mb)
                pl->samples_per_mb = bscale(&c, (uint64_t)v->dims[0]);
            if (v->rank == 2 && mp_dtype_is_int(v->dtype) && !pl->has_tokens) {
                pl->has_tokens = true;
                pl->tokens_per_mb = bscale(&c, mp_tplan_numel(v));
            }
        }
        /* the loss: cross-entropy on output 0 keeps its log-probabilities */
        if (o->loss && !o->inference && g->n_outputs > 0) {
            int y = g->outputs[0];
            const mp_value *v = &g->values[y];
            if (mp_dtype_is_float(v->dtype) && v->rank >= 2) {
                int ldt = c.mixed ? MP_DT_FLOAT : c.base_dt;
                uint64_t n = mp_tplan_numel(v), C = (uint64_t)v->dims[v->rank - 1];
                pl->loss_bytes = bscale(&c, n * (uint64_t)dt_size(ldt) + (C ? n / C * 8 : 0));
            }
        }
        /* inference */
        if (o->inference) {
            inference_peak(pl, &c);
            pl->infer_weights = mp_tplan_dbytes(c.mixed ? 2 : dt_size(c.base_dt), pl->params);
            if (o->kv_cache) {
                /* K and V: the operands of the two products around each
                 * softmax that are not the softmax's own */
                uint64_t kv = 0;
                for (int k = 0; k < pl->n_nodes; k++) {
                    const mp_node *n = &g->nodes[g->order[k]];
                    if (!mp_streq(n->op, "Softmax") || n->n_in < 1 || n->in[0] < 0) continue;
                    int prod = g->values[n->in[0]].producer;
                    for (int hop = 0; hop < 4 && prod >= 0; hop++) {
                        const mp_node *q = &g->nodes[prod];
                        if (mp_streq(q->op, "MatMul") && q->n_in == 2) {
                            if (q->in[1] >= 0) kv += v_bytes(&c, q->in[1]);
                            break;
                        }
                        /* up through the mask and the scaling: the largest input */
                        int big = -1;
                        for (int i = 0; i < q->n_in; i++)
                            if (q->in[i] >= 0 && !c.cst[q->in[i]] &&
                                (big < 0 || mp_tplan_numel(&g->values[q->in[i]]) > mp_tplan_numel(&g->values[big])))
                                big = q->in[i];
                        prod = big >= 0 ? g->values[big].producer : -1;
                    }
                    /* V: the other operand of the product the probabilities
                     * feed, through casts and dropouts */
                    int sv = n->out[0];
                    for (int hop = 0; hop < 4 && sv >= 0; hop++) {
                        int next = -1;
                        for (int k2 = k + 1; k2 < pl->n_nodes; k2++) {
                            const mp_node *q = &g->nodes[g->order[k2]];
                            if (q->n_in < 1 || q->in[0] != sv) continue;
                            if (mp_streq(q->op, "MatMul") && q->n_in == 2) {
                                if (q->in[1] >= 0) kv += v_bytes(&c, q->in[1]);
                            } else if ((mp_streq(q->op, "Cast") || mp_streq(q->op, "Dropout") ||
                                        mp_streq(q->op, "Identity")) && q->n_out > 0) {
                                next = q->out[0];
                            }
                            break;
                        }
                        sv = next;
                    }
                }
                pl->kv_bytes_per_token = pl->tokens_per_mb ? bscale(&c, kv) / pl->tokens_per_mb : 0;
            }
        }
    }
    free(c.rg);
    free(c.cst);
    free(c.split);
    free(c.pflag);
    free(c.noncontig);
    free(c.adt);
    free(c.stor);
    free(c.seen);
    free(c.node_block);
    free(c.first_unit);
    free(c.ovr);
    if (st) return st;
    return st;
}
