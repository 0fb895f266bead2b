/* The training planner: memory per GPU, step time, time to train
 * (docs/PLANNING.md has every formula with a worked example and its
 * source). Reads the shaped graph and the profile; each operator's train
 * rule (mp_op.train, beside its cost rule) says what its backward keeps
 * and costs; this file only sums them over a layout. */
#include "plan/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* ---- names ---- */

static const char *const prec_names[MP_PREC_COUNT] = {"fp32", "bf16", "fp16", "bf16-mixed",
                                                      "fp16-mixed"};
static const char *const opt_names[MP_OPT_COUNT] = {"adamw", "adam", "sgd", "sgd-momentum",
                                                    "adafactor", "none"};

const char *mp_precision_name(mp_precision p) {
    return (unsigned)p < MP_PREC_COUNT ? prec_names[p] : NULL;
}
const char *mp_optimizer_name(mp_optimizer o) {
    return (unsigned)o < MP_OPT_COUNT ? opt_names[o] : NULL;
}
int mp_precision_parse(const char *s) {
    for (int i = 0; s && i < MP_PREC_COUNT; i++)
        if (strcmp(s, prec_names[i]) == 0) return i;
    return -1;
}
int mp_optimizer_parse(const char *s) {
    for (int i = 0; s && i < MP_OPT_COUNT; i++)
        if (strcmp(s, opt_names[i]) == 0) return i;
    return -1;
}

#define TPLAN_OPTIONS_V1 MP_FIELD_END(mp_tplan_options, fit)

static void tplan_defaults(mp_tplan_options *o) {
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->precision = MP_PREC_FP32;
    o->optimizer = MP_OPT_ADAMW;
    o->dp = o->tp = o->pp = 1;
    o->loss = 1;
    o->attention_fused = 1;
    o->mfu = 0.4;
    o->compute_eff = 0.6;
    o->memory_eff = 0.8;
    o->node_overhead_s = 10e-6;
    o->reserve_gb = 2;
}

mp_status mp_tplan_options_init(mp_tplan_options *o, size_t size) {
    mp_tplan_options d;
    tplan_defaults(&d);
    return mp_opts_init(o, size, &d, sizeof d, TPLAN_OPTIONS_V1, "mp_tplan_options");
}

static bool prec_mixed(mp_precision p) { return p == MP_PREC_BF16_MIXED || p == MP_PREC_FP16_MIXED; }

/* ---- model states (docs/PLANNING.md "model states"; ZeRO paper §3) ---- */

void mp_tplan_state_bytes(mp_precision prec, mp_optimizer opt, mp_state_bytes *b) {
    double w = prec == MP_PREC_FP32 ? 4 : 2;
    b->weights = w;
    b->grads = w;
    b->master = prec_mixed(prec) ? 4 : 0;
    /* optimizer states: fp32 under fp32 and mixed precision, the weights'
     * type in pure bf16/fp16 training */
    double s = prec_mixed(prec) || prec == MP_PREC_FP32 ? 4 : 2;
    switch (opt) {
    case MP_OPT_ADAM:
    case MP_OPT_ADAMW: b->optimizer = 2 * s; break;      /* m and v */
    case MP_OPT_SGD_MOMENTUM: b->optimizer = s; break;    /* momentum buffer */
    case MP_OPT_ADAFACTOR: b->optimizer = 0; break;       /* factored: per matrix, below */
    default: b->optimizer = 0; break;
    }
}

static uint64_t dbytes(double per, uint64_t n) { return (uint64_t)llround(per * (double)n); }

void mp_tplan_model_states(uint64_t params, mp_precision prec, mp_optimizer opt, int zero, int dp,
                          mp_tplan_mem *m) {
    mp_state_bytes b;
    mp_tplan_state_bytes(prec, opt, &b);
    if (prec_mixed(prec) && zero == 0) {
        /* PyTorch AMP (torch.autocast + GradScaler) without sharding: the
         * fp32 parameters are the master copy and the gradients are fp32;
         * autocast's low-precision weight copies are kept tensors of the
         * step (counted with the activations). Same 16 B/param for Adam. */
        b.weights = 4;
        b.grads = 4;
        b.master = 0;
    }
    if (dp < 1) dp = 1;
    double d = (double)dp;
    m->weights_bytes = dbytes(zero >= 3 ? b.weights / d : b.weights, params);
    m->grads_bytes = dbytes(zero >= 2 ? b.grads / d : b.grads, params);
    m->master_weights_bytes = dbytes(zero >= 1 ? b.master / d : b.master, params);
    m->optimizer_bytes = dbytes(zero >= 1 ? b.optimizer / d : b.optimizer, params);
}

uint64_t mp_tplan_deepspeed_zero2(uint64_t params, int gpus) {
    if (gpus < 1) gpus = 1;
    return 4 * params + (uint64_t)(16 * (double)params / gpus);
}

uint64_t mp_tplan_deepspeed_zero3(uint64_t params, uint64_t largest_layer, int gpus) {
    if (gpus < 1) gpus = 1;
    return 4 * largest_layer + (uint64_t)(18 * (double)params / gpus);
}

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
} pctx;

static int dt_size(int dt) {
    int b = mp_dtype_bits(dt);
    return b > 0 ? (b + 7) / 8 : 0;
}

static uint64_t v_numel(const mp_value *v) {
    int64_t n = mp_value_numel(v);
    return n > 0 ? (uint64_t)n : 0;
}

static uint64_t v_bytes(const pctx *c, int v) {
    return v_numel(&c->g->values[v]) * (uint64_t)dt_size(c->adt[v]);
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
        uint64_t b = v_numel(val) * (uint64_t)dt_size(c->low_dt);
        c->pl->cast_param_bytes += b;
        if (cast) *cast += b;
        return b;
    }
    if (c->cst[v]) return 0;
    if (want_dt >= 0 && mp_dtype_is_float(c->adt[v]) && want_dt != c->adt[v])
        return v_numel(val) * (uint64_t)dt_size(want_dt);
    int s = c->stor[v];
    uint64_t b = v_numel(&c->g->values[s]) * (uint64_t)dt_size(c->adt[s]);
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
                    (big < 0 || v_numel(&g->values[q->in[i]]) > v_numel(&g->values[big])))
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

    /* the model's float type: that of most parameter elements */
    uint64_t by[MP_DT_COUNT] = {0};
    for (int v = 0; v < nv; v++) {
        const mp_value *val = &g->values[v];
        c->stor[v] = v;
        if (val->flags & MP_VAL_PARAM) {
            c->rg[v] = 1;
            if (mp_dtype_is_float(val->dtype)) by[val->dtype] += v_numel(val);
        }
        if ((val->flags & (MP_VAL_INIT | MP_VAL_CONST)) && !(val->flags & MP_VAL_PARAM)) c->cst[v] = 1;
    }
    c->model_dt = MP_DT_FLOAT;
    for (int d = 0; d < MP_DT_COUNT; d++)
        if (by[d] > by[c->model_dt]) c->model_dt = d;
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
                t.extra_bytes = 4 * (v_numel(y) / (uint64_t)y->dims[y->rank - 1]); /* log-sum-exp */
        } else if (c->ovr[ni] != OVR_NONE) {
            /* a member of a decomposed LayerNorm or GELU, or its head */
            const mp_value *x = n->n_in > 0 && n->in[0] >= 0 ? &g->values[n->in[0]] : NULL;
            t.bwd_flops = rg ? 2 * n->cost.flops : 0;
            if (c->ovr[ni] == OVR_LAYERNORM) {
                t.amp = MP_AMP_FP32;
                t.save_in = rg & 1u;
                uint64_t rows = x && x->rank >= 1 && x->dims[x->rank - 1] > 0
                                    ? v_numel(x) / (uint64_t)x->dims[x->rank - 1] : 0;
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
                pn->tp_comm = row ? (n->n_out > 0 && n->out[0] >= 0 ? v_bytes(c, n->out[0]) : 0)
                                  : v_bytes(c, act);
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
        if (split) spl += t.extra_bytes;
        else rep += t.extra_bytes;
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
            uint64_t e = v_numel(&g->values[v]);
            node_params += e;
            if (c->pflag[v] & 2) continue;
            c->pflag[v] |= 2;
            if (split) pn->params_split += e;
            else pn->params_rep += e;
        }
        if (node_params > largest_layer) largest_layer = node_params;

        /* work and traffic */
        pn->fwd_flops = n->cost.flops;
        pn->bwd_flops = t.bwd_flops;
        uint64_t io = 0, act_io = 0;
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] >= 0 && !c->cst[n->in[i]]) {
                uint64_t b = v_bytes(c, n->in[i]);
                if (c->mixed && amp == MP_AMP_LOWER && mp_dtype_is_float(c->adt[n->in[i]]))
                    b = v_numel(&g->values[n->in[i]]) * (uint64_t)dt_size(c->low_dt);
                io += b;
                if (!param_like(c, n->in[i])) act_io += b;
            }
        for (int i = 0; i < n->n_out; i++)
            if (n->out[i] >= 0) {
                io += v_bytes(c, n->out[i]);
                act_io += v_bytes(c, n->out[i]);
            }
        bool fused_member = c->ovr[ni] == OVR_ATTN;
        pn->out_bytes = n->n_out > 0 && n->out[0] >= 0 ? v_bytes(c, n->out[0]) : 0;
        pn->bytes = t.view || fused_member ? 0 : io;
        pn->temp = fused_member ? 0 : act_io;
        if (c->ovr[ni] == OVR_ATTN_PV && n->n_in > 0 && n->in[0] >= 0) {
            /* the product with V reads q, k, v and writes the output: not the scores */
            uint64_t sc = v_bytes(c, n->in[0]);
            pn->bytes = pn->bytes > sc ? pn->bytes - sc : 0;
            pn->temp = pn->temp > sc ? pn->temp - sc : 0;
        }
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

/* ---- the GPU ---- */

static mp_status pick_gpu(mp_tplan *pl) {
    const mp_tplan_options *o = &pl->o;
    const mp_gpu *gp = NULL;
    if (o->gpu) {
        gp = mp_gpu_find(o->gpu);
        if (!gp) {
            char names[512];
            size_t k = 0;
            names[0] = 0;
            for (int i = 0; i < mp_gpu_count() && k + 20 < sizeof names; i++)
                k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", i ? ", " : "", mp_gpu_at(i)->id);
            return mp_error(MP_ERR_USAGE, "--gpu %s: unknown GPU (known: %s; or give --peak-tflops, "
                            "--mem-gb and --bandwidth-gbs)", o->gpu, names);
        }
    }
    pl->gpu = gp;
    int col = MP_GPU_FP32, low = MP_GPU_FP32;
    switch (o->precision) {
    case MP_PREC_BF16: col = low = MP_GPU_BF16; break;
    case MP_PREC_FP16: col = low = MP_GPU_FP16; break;
    case MP_PREC_BF16_MIXED: low = MP_GPU_BF16; break;
    case MP_PREC_FP16_MIXED: low = MP_GPU_FP16; break;
    default: break;
    }
    pl->peak_dtype = mp_gpu_dtype_names[low];
    if (gp) {
        if (gp->tflops[low] <= 0)
            return mp_error(MP_ERR_USAGE, "--precision %s: the %s has no %s rate in its datasheet (%s)",
                            mp_precision_name(o->precision), gp->label, mp_gpu_dtype_names[low], gp->source);
        pl->gpu_label = gp->label;
        pl->peak_flops = gp->tflops[col] * 1e12;
        pl->peak_low_flops = gp->tflops[low] * 1e12;
        pl->mem_bytes = gp->mem_gb * 1e9;
        pl->bw = gp->bandwidth_gbs * 1e9;
        pl->link = gp->link_gbs * 1e9;
        pl->have_gpu = true;
    }
    if (o->peak_tflops > 0) {
        pl->peak_low_flops = o->peak_tflops * 1e12;
        if (!gp || col == low) pl->peak_flops = o->peak_tflops * 1e12;
    }
    if (o->mem_gb > 0) pl->mem_bytes = o->mem_gb * 1e9;
    if (o->bandwidth_gbs > 0) pl->bw = o->bandwidth_gbs * 1e9;
    if (!gp && !pl->gpu_label && (o->peak_tflops > 0 || o->mem_gb > 0)) pl->gpu_label = "given";
    if (!gp) pl->have_gpu = pl->peak_low_flops > 0 && pl->bw > 0;
    if (!gp && o->peak_tflops > 0 && o->bandwidth_gbs <= 0)
        return mp_error(MP_ERR_USAGE, "--peak-tflops without --bandwidth-gbs: the roofline needs both");
    return MP_OK;
}

/* Bandwidth of a collective spanning `ranks` GPUs: the GPU's NVLink (or
 * PCIe) inside one node of 8, else 400 Gb/s InfiniBand per GPU. */
double mp_tplan_link_bw(const mp_tplan *pl, int span) {
    if (pl->o.link_gbs > 0) return pl->o.link_gbs * 1e9;
    if (span <= 8 && pl->link > 0) return pl->link;
    return 50e9;
}

/* ---- a layout: stages, memory, time ---- */

static double roof(double flops, double peak, double bytes, double bw, const mp_tplan_options *o) {
    double tc = peak > 0 ? flops / (peak * o->compute_eff) : 0;
    double tm = bw > 0 ? bytes / (bw * o->memory_eff) : 0;
    return tc > tm ? tc : tm;
}

/* Stage of each block: contiguous runs balanced by the blocks' FLOPs. */
static void stage_cuts(const mp_tplan *pl, int pp, int *first_block) {
    int nb = pl->n_blocks;
    double *cost = calloc((size_t)(nb ? nb : 1), sizeof(double));
    double total = 0;
    /* a node outside the blocks weighs with the block before it (the first
     * block for those before any: the embeddings go to stage 0, the head to
     * the last stage) */
    int last = -1;
    for (int k = 0; cost && k < pl->n_nodes; k++) {
        int b = pl->nodes[k].block;
        if (b >= 0) last = b;
        else b = last >= 0 ? last : 0;
        if (b >= nb) continue;
        double w = (double)pl->nodes[k].fwd_flops + (double)pl->nodes[k].bwd_flops + 1;
        cost[b] += w;
        total += w;
    }
    first_block[0] = 0;
    int s = 1;
    double acc = 0;
    for (int b = 0; b < nb && s < pp; b++) {
        acc += cost ? cost[b] : 1;
        double target = total * s / pp;
        /* cut after b when that is nearer the target than after b+1, and
         * enough blocks are left for the remaining stages */
        double next = acc + (cost && b + 1 < nb ? cost[b + 1] : 0);
        if ((acc >= target || fabs(acc - target) <= fabs(next - target)) && nb - (b + 1) >= pp - s)
            first_block[s++] = b + 1;
        else if (nb - (b + 1) == pp - s)
            first_block[s++] = b + 1;
    }
    while (s < pp) { /* never reached when pp <= nb */
        first_block[s] = first_block[s - 1] + 1;
        s++;
    }
    first_block[pp] = nb;
    free(cost);
}

typedef struct layout_out {
    mp_tplan_mem mem;
    double step_s, compute_s, bubble_s, dp_comm_s, tp_comm_s, p2p_s, optimizer_s;
    uint64_t dp_comm_bytes;
    int worst;
} layout_out;

/* Plan one layout from the per-node figures. stages: pp entries or NULL. */
static void layout(mp_tplan *pl, int dp, int tp, int pp, int m, int zero, mp_pstage *stages,
                   layout_out *out, int *stamp, uint64_t stamp_base) {
    const mp_tplan_options *o = &pl->o;
    const mp_model *mm = pl->p->m;
    const mp_graph *g = mm->graph;
    mp_pstage local[1];
    mp_pstage *st = stages ? stages : NULL;
    int first_block[1025];
    if (pp > 1024) pp = 1024;
    if (pp > 1) stage_cuts(pl, pp, first_block);
    else {
        first_block[0] = 0;
        first_block[1] = pl->n_blocks;
    }
    mp_state_bytes sb;
    mp_tplan_state_bytes(o->precision, o->optimizer, &sb);
    memset(out, 0, sizeof *out);
    int gpus = dp * tp * pp;
    double lb_tp = mp_tplan_link_bw(pl, tp), lb_dp = mp_tplan_link_bw(pl, gpus), lb_pp = mp_tplan_link_bw(pl, gpus);
    double worst_mb = 0;
    uint64_t worst_peak = 0;
    int k = 0;
    for (int s = 0; s < pp; s++) {
        mp_pstage *ps = st ? &st[s] : &local[0];
        memset(ps, 0, sizeof *ps);
        ps->first_block = first_block[s];
        ps->n_blocks = first_block[s + 1] - first_block[s];
        ps->first = k;
        int in_flight = pp > 1 ? (pp - s < m ? pp - s : m) : 1;
        ps->in_flight = in_flight;
        uint64_t p_rep = 0, p_split = 0, acts = 0, temp = 0;
        uint64_t blk_cur = 0, blk_max = 0;
        int blk_id = -2;
        double fwd_s = 0, bwd_s = 0, rec_s = 0, tpc_s = 0;
        uint64_t adafactor = 0;
        /* nodes up to the end of this stage's last block; the last stage
         * takes the rest */
        for (; k < pl->n_nodes; k++) {
            const mp_pnode *pn = &pl->nodes[k];
            int b = pn->block;
            /* a node of a later stage's block ends this stage; nodes outside
             * the blocks stay with the block before them */
            if (s < pp - 1 && b >= first_block[s + 1]) break;
            double div = pn->split ? (double)tp : 1.0;
            /* parameters held by this stage (a shared one counts once per stage) */
            for (int i = 0; i < pn->n_params; i++) {
                int v = pl->pparams[pn->first_param + i];
                if ((uint64_t)stamp[v] == stamp_base + (uint64_t)s + 1) continue;
                stamp[v] = (int)(stamp_base + (uint64_t)s + 1);
                uint64_t e = v_numel(&g->values[v]);
                if (pl->param_split[v]) p_split += e;
                else p_rep += e;
                if (o->optimizer == MP_OPT_ADAFACTOR) {
                    const mp_value *val = &g->values[v];
                    /* factored second moment: a row and a column vector per matrix */
                    if (val->rank >= 2) {
                        int64_t r = mp_dims_product(val->dims, val->rank - 1);
                        adafactor += (uint64_t)(r > 0 ? r : 0) + (uint64_t)val->dims[val->rank - 1];
                    } else {
                        adafactor += e;
                    }
                }
            }
            acts += pn->saved_rep + pn->saved_split / (uint64_t)tp;
            if (pn->cross && pp > 1 && pn->cross_unit >= 0 && pn->cross_unit < first_block[s])
                acts += pn->cross; /* received from an earlier stage and kept here too */
            if (!o->checkpointing || b < 0) ps->cast_bytes += pn->cast_rep + pn->cast_split / (uint64_t)tp;
            uint64_t tmp = pn->split ? pn->temp / (uint64_t)tp : pn->temp;
            if (tmp > temp) temp = tmp;
            if (o->checkpointing && b >= 0) {
                if (b != blk_id) {
                    blk_id = b;
                    blk_cur = 0;
                }
                /* what the node would keep: recomputed during its block's backward */
                blk_cur += pn->ckpt_rep + pn->ckpt_split / (uint64_t)tp;
                if (blk_cur > blk_max) blk_max = blk_cur;
            }
            /* roof(f / tp, b / tp) = roof(f, b) / tp: the node's roofline once */
            bool works = pn->fwd_flops > 0 || pn->bytes > 0;
            double tf = works ? pn->roof_fwd / div + o->node_overhead_s : 0;
            double tb = pn->bwd_flops > 0 ? pn->roof_bwd / div + o->node_overhead_s : 0;
            fwd_s += tf;
            bwd_s += tb;
            if (o->checkpointing && b >= 0) rec_s += tf;
            ps->fwd_flops += (uint64_t)((double)pn->fwd_flops / div);
            ps->bwd_flops += (uint64_t)((double)pn->bwd_flops / div);
            if (o->checkpointing && b >= 0) ps->recompute_flops += (uint64_t)((double)pn->fwd_flops / div);
            if (tp > 1 && pn->tp_comm) tpc_s += 2.0 * (tp - 1) / tp * (double)pn->tp_comm / lb_tp;
        }
        ps->last = k - 1;
        if (s == pp - 1 && o->loss && !o->inference) acts += pl->loss_bytes;
        uint64_t P = p_rep + p_split / (uint64_t)tp;
        ps->params = P;
        mp_tplan_mem *mem = &ps->mem;
        mp_tplan_model_states(P, o->precision, o->optimizer, zero, dp, mem);
        if (o->optimizer == MP_OPT_ADAFACTOR)
            mem->optimizer_bytes = dbytes((prec_mixed(o->precision) || o->precision == MP_PREC_FP32 ? 4.0 : 2.0) /
                                              (zero >= 1 ? dp : 1),
                                          adafactor);
        mem->activations_bytes = acts * (uint64_t)in_flight;
        if (o->checkpointing) temp += blk_max; /* a block's recomputed set and its transient */
        if (s == pp - 1 && o->loss && pl->loss_bytes > 0 && 2 * pl->loss_bytes > temp) temp = 2 * pl->loss_bytes;
        mem->temporary_bytes = temp;
        mem->reserve_bytes = (uint64_t)(o->reserve_gb * 1e9);
        /* the peak: at the start of the backward every kept activation and
         * the largest transient are live. Gradients freed between steps
         * (zero_grad(set_to_none=True), one rank, no accumulation) are
         * allocated as the backward frees activations: then only the larger
         * of the two counts. */
        uint64_t fixed = mem->weights_bytes + mem->master_weights_bytes + mem->optimizer_bytes;
        bool grads_transient = dp == 1 && m == 1 && zero == 0;
        if (grads_transient) {
            uint64_t a = mem->activations_bytes + mem->temporary_bytes;
            uint64_t gr = mem->grads_bytes + mem->temporary_bytes;
            mem->peak_bytes = fixed + (a > gr ? a : gr);
        } else {
            mem->peak_bytes = fixed + mem->grads_bytes + mem->activations_bytes + mem->temporary_bytes;
        }
        /* time per micro-batch */
        ps->fwd_s = fwd_s;
        ps->bwd_s = bwd_s;
        ps->recompute_s = rec_s;
        ps->tp_comm_s = tpc_s;
        if (pp > 1 && s < pp - 1) {
            /* the activation crossing to the next stage (the output of this
             * stage's last block node), forward and its gradient back */
            uint64_t boundary = 0;
            for (int q = ps->last; q >= ps->first && q >= 0; q--)
                if (pl->nodes[q].block >= 0 && pl->nodes[q].out_bytes) {
                    boundary = pl->nodes[q].out_bytes;
                    break;
                }
            ps->p2p_s = 2.0 * (double)boundary / lb_pp;
        }
        ps->mb_s = fwd_s + bwd_s + rec_s + tpc_s + ps->p2p_s;
        if (ps->mb_s > worst_mb) worst_mb = ps->mb_s;
        if (mem->peak_bytes > worst_peak || s == 0) {
            worst_peak = mem->peak_bytes;
            out->worst = s;
            out->mem = *mem;
        }
        /* communication of data parallelism (per stage, its parameters) */
        if (dp > 1) {
            double d = (double)dp, f = (d - 1) / d;
            double G = sb.grads * (double)P, W = sb.weights * (double)P;
            double bytes = zero >= 3 ? f * G + 2 * f * W : (zero >= 1 ? f * G + f * W : 2 * f * G);
            double tcomm = bytes / lb_dp;
            if (tcomm > out->dp_comm_s) {
                out->dp_comm_s = tcomm;
                out->dp_comm_bytes = (uint64_t)bytes;
            }
        }
        /* the optimizer step: memory-bound, over this rank's partition */
        double upd = (double)(mem->weights_bytes + mem->master_weights_bytes + mem->optimizer_bytes) * 2 +
                     (double)mem->grads_bytes;
        double topt = pl->bw > 0 ? upd / (pl->bw * o->memory_eff) : 0;
        if (topt > out->optimizer_s) out->optimizer_s = topt;
        if (tpc_s > out->tp_comm_s) out->tp_comm_s = tpc_s;
        if (ps->p2p_s > out->p2p_s) out->p2p_s = ps->p2p_s;
    }
    out->compute_s = (double)m * worst_mb;
    out->bubble_s = (double)(pp - 1) * worst_mb;
    out->step_s = out->compute_s + out->bubble_s + out->dp_comm_s + out->optimizer_s;
}

/* ---- the plan ---- */

static mp_status check_options(const mp_tplan_options *o, const mp_tplan *pl) {
    if (o->precision < 0 || o->precision >= MP_PREC_COUNT)
        return mp_error(MP_ERR_USAGE, "--precision: unknown precision");
    if (o->optimizer < 0 || o->optimizer >= MP_OPT_COUNT)
        return mp_error(MP_ERR_USAGE, "--optimizer: unknown optimizer");
    if (o->zero < 0 || o->zero > 3) return mp_error(MP_ERR_USAGE, "--zero %d: expected 0, 1, 2 or 3", o->zero);
    if (o->dp < 1 || o->dp > 1000000) return mp_error(MP_ERR_USAGE, "--dp %d: expected 1 to 1000000", o->dp);
    if (o->tp < 1 || o->tp > 1024) return mp_error(MP_ERR_USAGE, "--tp %d: expected 1 to 1024", o->tp);
    if (o->pp < 1 || o->pp > 1024) return mp_error(MP_ERR_USAGE, "--pp %d: expected 1 to 1024", o->pp);
    if (o->micro_batches < 0 || o->micro_batches > 1000000)
        return mp_error(MP_ERR_USAGE, "--micro-batches %d: expected 1 to 1000000", o->micro_batches);
    if (o->inference && (o->zero || o->fsdp || o->checkpointing))
        return mp_error(MP_ERR_USAGE, "--inference: %s applies to training only",
                        o->zero ? "--zero" : o->fsdp ? "--fsdp" : "--checkpointing");
    if (o->kv_cache && !o->inference) return mp_error(MP_ERR_USAGE, "--kv-cache needs --inference");
    if (!(o->mfu > 0 && o->mfu <= 1)) return mp_error(MP_ERR_USAGE, "--mfu %g: expected a fraction in (0, 1]", o->mfu);
    if (!(o->compute_eff > 0 && o->compute_eff <= 1) || !(o->memory_eff > 0 && o->memory_eff <= 1))
        return mp_error(MP_ERR_USAGE, "--compute-eff/--memory-eff: expected fractions in (0, 1]");
    if (o->gpus < 0) return mp_error(MP_ERR_USAGE, "--gpus %d: expected a positive count", o->gpus);
    if (o->tokens < 0 || o->samples < 0) return mp_error(MP_ERR_USAGE, "--tokens/--samples: expected a positive count");
    if (o->tokens > 0 && o->samples > 0) return mp_error(MP_ERR_USAGE, "--tokens and --samples: give one");
    (void)pl;
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
    for (int i = 0; i < g->n_inputs; i++) in += v_bytes(c, g->inputs[i]);
    pl->infer_inputs = in;
    double ratio = (double)dt_size(c->base_dt) / (double)dt_size(c->model_dt);
    pl->infer_acts = (uint64_t)((double)p->activation_peak_bytes * ratio);
    return in;
}

/* Every dp x tp x pp = G (tp a power of two up to 8 dividing the heads,
 * pp up to the block count) and every ZeRO stage: rows[0..n). */
/* prune: for the GPUs-needed search, a (tp, pp) whose most frugal ZeRO
 * stage (3; 0 with one data-parallel rank) does not fit is not tried with
 * the others (memory never drops from stage 3 to stage 0). */
static int enumerate_layouts(mp_tplan *pl, int G, int *stamp, mp_fit_row *rows, int cap, bool prune) {
    const mp_tplan_options *o = &pl->o;
    const mp_graph *g = pl->p->m->graph;
    int n = 0;
    for (int tp = 1; tp <= 8 && tp <= G; tp *= 2) {
        if (G % tp) continue;
        if (tp > 1 && (pl->split_nodes == 0 || (pl->heads > 0 && pl->heads % tp))) continue;
        for (int pp = 1; pp <= G / tp && pp <= 1024; pp++) {
            if ((G / tp) % pp || (pp > 1 && pp > pl->n_blocks)) continue;
            int dp = G / tp / pp;
            for (int zi = 0; zi <= 3 && n < cap; zi++) {
                int z = prune ? 3 - zi : zi;
                if (dp == 1 && z > 0) {
                    if (prune) continue;
                    break;
                }
                layout_out fo;
                int mm = o->micro_batches > 0 ? o->micro_batches : (pp > 1 ? 4 * pp : 1);
                if (pl->stamp_base + (uint64_t)pp + 1 > (uint64_t)0x3fffffff) { /* stamps wrap */
                    memset(stamp, 0, sizeof(int) * ((size_t)g->n_values + 1));
                    pl->stamp_base = 1;
                }
                layout(pl, dp, tp, pp, mm, z, NULL, &fo, stamp, pl->stamp_base);
                pl->stamp_base += (uint64_t)pp + 1;
                mp_fit_row *r = &rows[n++];
                r->dp = dp;
                r->tp = tp;
                r->pp = pp;
                r->zero = z;
                r->peak_bytes = fo.mem.peak_bytes + fo.mem.reserve_bytes;
                r->step_s = fo.step_s;
                double per_step = (pl->has_tokens ? (double)pl->tokens_per_mb : (double)pl->samples_per_mb) * mm * dp;
                r->tokens_per_s = fo.step_s > 0 ? per_step / fo.step_s : 0;
                r->fits = pl->mem_bytes <= 0 || (double)r->peak_bytes <= pl->mem_bytes;
                if (prune && !r->fits) break;
            }
        }
    }
    return n;
}

static mp_status plan_build(mp_tplan *pl) {
    const mp_tplan_options *o = &pl->o;
    mp_model *m = pl->p->m;
    mp_status st = check_options(o, pl);
    if (st) return st;
    if (pl->p->n_unresolved > 0) {
        int sym = pl->p->unresolved[0];
        return mp_error(MP_ERR_USAGE, "the plan needs every dim: give --dim %s=VALUE%s",
                        sym > 0 && sym < m->n_syms ? m->syms[sym].name : "NAME",
                        pl->p->n_unresolved > 1 ? " (and the other unresolved dims)" : "");
    }
    if (pl->p->total.unknown > 0)
        return mp_error(MP_ERR_USAGE, "the plan needs every dim: %d nodes have shapes that depend on "
                        "unknown dims (give --dim or --input)", pl->p->total.unknown);
    pl->dp = o->dp;
    pl->tp = o->tp;
    pl->pp = o->pp;
    pl->zero = o->fsdp ? 3 : o->zero;
    pl->m = o->micro_batches > 0 ? o->micro_batches : (o->pp > 1 ? 4 * o->pp : 1);
    pl->gpus = o->gpus > 0 ? o->gpus : pl->dp * pl->tp * pl->pp;
    if ((st = pick_gpu(pl))) return st;

    pctx c;
    memset(&c, 0, sizeof c);
    c.pl = pl;
    c.m = m;
    c.g = m->graph;
    c.mixed = prec_mixed(o->precision);
    c.training = !o->inference;
    c.base_dt = o->precision == MP_PREC_BF16 ? MP_DT_BFLOAT16 : o->precision == MP_PREC_FP16 ? MP_DT_FLOAT16 : MP_DT_FLOAT;
    c.low_dt = o->precision == MP_PREC_BF16_MIXED ? MP_DT_BFLOAT16
               : o->precision == MP_PREC_FP16_MIXED ? MP_DT_FLOAT16 : c.base_dt;
    st = graph_pass(&c);
    const mp_graph *g = c.g;
    if (!st) {
        pl->params = pl->p->total.params;
        pl->heads = find_heads(pl);
        /* tokens: an integer input of rank 2 is (batch, seq) ids */
        for (int i = 0; i < g->n_inputs; i++) {
            const mp_value *v = &g->values[g->inputs[i]];
            if (v->rank >= 1 && v->dims[0] > 0 && !pl->samples_per_mb) pl->samples_per_mb = (uint64_t)v->dims[0];
            if (v->rank == 2 && mp_dtype_is_int(v->dtype) && !pl->has_tokens) {
                pl->has_tokens = true;
                pl->tokens_per_mb = v_numel(v);
            }
        }
        /* the loss: cross-entropy on output 0 keeps its log-probabilities */
        if (o->loss && !o->inference && g->n_outputs > 0) {
            int y = g->outputs[0];
            const mp_value *v = &g->values[y];
            if (mp_dtype_is_float(v->dtype) && v->rank >= 2) {
                int ldt = c.mixed ? MP_DT_FLOAT : c.base_dt;
                uint64_t n = v_numel(v), C = (uint64_t)v->dims[v->rank - 1];
                pl->loss_bytes = n * (uint64_t)dt_size(ldt) + (C ? n / C * 8 : 0);
            }
        }
        /* inference */
        if (o->inference) {
            inference_peak(pl, &c);
            pl->infer_weights = dbytes(c.mixed ? 2 : dt_size(c.base_dt), pl->params);
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
                                (big < 0 || v_numel(&g->values[q->in[i]]) > v_numel(&g->values[big])))
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
                pl->kv_bytes_per_token = pl->tokens_per_mb ? kv / pl->tokens_per_mb : 0;
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

    /* layouts that cannot be planned */
    if (pl->tp > 1) {
        if (pl->split_nodes == 0)
            return mp_error(MP_ERR_USAGE, "--tp %d: the model has no repeated blocks with weight "
                            "products to split", pl->tp);
        if (pl->heads > 0 && pl->heads % pl->tp != 0)
            return mp_error(MP_ERR_USAGE, "--tp %d does not divide the %d attention heads", pl->tp, pl->heads);
    }
    if (pl->pp > 1 && pl->pp > pl->n_blocks)
        return mp_error(MP_ERR_USAGE, "--pp %d is larger than the model's %d layers (repeated blocks)",
                        pl->pp, pl->n_blocks);
    if (o->checkpointing && pl->n_blocks == 0)
        return mp_error(MP_ERR_USAGE, "--checkpointing: the model has no repeated blocks to checkpoint");

    for (int k = 0; k < pl->n_nodes; k++) {
        mp_pnode *pn = &pl->nodes[k];
        double peak = pn->lower ? pl->peak_low_flops : pl->peak_flops;
        pn->roof_fwd = roof((double)pn->fwd_flops, peak, (double)pn->bytes, pl->bw, o);
        pn->roof_bwd = roof((double)pn->bwd_flops, peak, 2.0 * (double)pn->bytes, pl->bw, o);
    }
    pl->stages = mp_arena_calloc(&pl->arena, (size_t)pl->pp, sizeof(mp_pstage));
    int *stamp = calloc((size_t)g->n_values + 1, sizeof(int));
    if (!pl->stages || !stamp) {
        free(stamp);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    layout_out lo;
    layout(pl, pl->dp, pl->tp, pl->pp, pl->m, pl->zero, pl->stages, &lo, stamp, 0);
    pl->stamp_base = (uint64_t)pl->pp + 1;
    pl->mem = lo.mem;
    pl->worst = lo.worst;
    pl->compute_s = lo.compute_s;
    pl->bubble_s = lo.bubble_s;
    pl->dp_comm_s = lo.dp_comm_s;
    pl->dp_comm_bytes = lo.dp_comm_bytes;
    pl->tp_comm_s = lo.tp_comm_s;
    pl->p2p_s = lo.p2p_s;
    pl->optimizer_s = lo.optimizer_s;
    pl->step_s = lo.step_s;
    if (o->inference) {
        memset(&pl->mem, 0, sizeof pl->mem);
        /* the stage holding the most parameters (after tensor parallelism) */
        uint64_t most = 0;
        for (int s = 0; s < pl->pp; s++)
            if (pl->stages[s].params > most) most = pl->stages[s].params;
        pl->mem.weights_bytes = pl->params ? (uint64_t)((double)pl->infer_weights * (double)most / (double)pl->params)
                                           : 0;
        pl->mem.activations_bytes = pl->infer_acts;
        pl->mem.reserve_bytes = (uint64_t)(o->reserve_gb * 1e9);
        pl->mem.peak_bytes = pl->mem.weights_bytes + pl->infer_acts + pl->infer_inputs;
        /* generation keeps K and V of every token of the context (split by tp) */
        if (o->kv_cache) pl->mem.peak_bytes += pl->kv_bytes_per_token * pl->tokens_per_mb / (uint64_t)pl->tp;
        double t = 0;
        for (int s = 0; s < pl->pp; s++) t += pl->stages[s].fwd_s;
        pl->step_s = t;
        pl->compute_s = t;
        pl->bubble_s = pl->optimizer_s = pl->dp_comm_s = 0;
    }
    /* the whole model's work per step */
    for (int k = 0; k < pl->n_nodes; k++) {
        pl->fwd_flops += pl->nodes[k].fwd_flops;
        pl->bwd_flops += pl->nodes[k].bwd_flops;
        if (o->checkpointing && pl->nodes[k].block >= 0) pl->recompute_flops += pl->nodes[k].fwd_flops;
    }
    double mbs = (double)pl->m * pl->dp;
    pl->fwd_flops = (uint64_t)((double)pl->fwd_flops * mbs);
    pl->bwd_flops = o->inference ? 0 : (uint64_t)((double)pl->bwd_flops * mbs);
    pl->recompute_flops = (uint64_t)((double)pl->recompute_flops * mbs);
    pl->tokens_per_step = (double)pl->tokens_per_mb * mbs;
    pl->samples_per_step = (double)pl->samples_per_mb * mbs;
    double per = o->inference ? 2 : o->checkpointing ? 8 : 6;
    pl->flops_6nd = pl->has_tokens ? per * (double)pl->params * pl->tokens_per_step : -1;
    int gpus_run = pl->dp * pl->tp * pl->pp;
    double model_flops = (double)pl->fwd_flops + (double)pl->bwd_flops;
    pl->mfu_implied = pl->step_s > 0 && pl->peak_low_flops > 0
                          ? model_flops / (pl->step_s * gpus_run * pl->peak_low_flops)
                          : -1;
    pl->train_s = pl->train_6nd_s = -1;
    double steps = -1;
    if (o->tokens > 0 && pl->tokens_per_step > 0) steps = o->tokens / pl->tokens_per_step;
    if (o->samples > 0 && pl->samples_per_step > 0) steps = o->samples / pl->samples_per_step;
    if (steps > 0 && pl->step_s > 0) pl->train_s = steps * pl->step_s * gpus_run / pl->gpus;
    if (pl->peak_low_flops > 0) {
        double total = -1;
        if (o->tokens > 0) total = per * (double)pl->params * o->tokens;
        else if (steps > 0) total = steps * (model_flops + (double)pl->recompute_flops);
        if (total > 0) pl->train_6nd_s = total / (pl->gpus * pl->peak_low_flops * o->mfu);
    }
    pl->ds_zero2 = mp_tplan_deepspeed_zero2(pl->params, pl->dp);
    pl->ds_zero3 = mp_tplan_deepspeed_zero3(pl->params, pl->largest_layer, pl->dp);

    /* --fit: every dp x tp x pp of the GPUs and every ZeRO stage */
    if (o->fit && !o->inference) {
        int cap = 4096;
        pl->fit = mp_arena_calloc(&pl->arena, (size_t)cap, sizeof(mp_fit_row));
        if (!pl->fit) {
            free(stamp);
            return mp_error(MP_ERR_NOMEM, "out of memory");
        }
        pl->n_fit = enumerate_layouts(pl, o->gpus > 0 ? o->gpus : 8, stamp, pl->fit, cap, false);
    }
    /* GPUs needed: the fewest (powers of two) with a layout that fits */
    if (!o->inference && pl->mem_bytes > 0) {
        mp_fit_row rows[512];
        /* no layout of G GPUs holds less than the model states over G
         * (ZeRO-3): start at that bound */
        mp_tplan_mem ms;
        mp_tplan_model_states(pl->params, o->precision, o->optimizer, 0, 1, &ms);
        double states = (double)(ms.weights_bytes + ms.grads_bytes + ms.master_weights_bytes + ms.optimizer_bytes);
        int G = 1;
        while (G < 65536 && states / G > pl->mem_bytes) G *= 2;
        for (; G <= 65536 && !pl->need.dp; G *= 2) {
            int n = enumerate_layouts(pl, G, stamp, rows, (int)MP_ARRAY_LEN(rows), true);
            for (int i = 0; i < n; i++)
                if (rows[i].fits && (!pl->need.dp || rows[i].tokens_per_s > pl->need.tokens_per_s))
                    pl->need = rows[i];
        }
    }
    free(stamp);
    return MP_OK;
}

static int fit_cmp(const void *a, const void *b) {
    const mp_fit_row *x = a, *y = b;
    if (x->fits != y->fits) return x->fits ? -1 : 1;
    if (x->tokens_per_s != y->tokens_per_s) return x->tokens_per_s > y->tokens_per_s ? -1 : 1;
    if (x->peak_bytes != y->peak_bytes) return x->peak_bytes < y->peak_bytes ? -1 : 1;
    return 0;
}

mp_status mp_tplan_create(const mp_profile *p, const mp_tplan_options *o, mp_tplan **out) {
    *out = NULL;
    if (!p || !o) return mp_error(MP_ERR_USAGE, "no profile or options");
    mp_tplan_options opts;
    tplan_defaults(&opts);
    mp_status st = mp_opts_take(&opts, sizeof opts, o, TPLAN_OPTIONS_V1, "mp_tplan_options");
    if (st) return st;
    mp_tplan *pl = calloc(1, sizeof *pl);
    if (!pl) return mp_error(MP_ERR_NOMEM, "out of memory");
    mp_arena_init(&pl->arena);
    pl->p = p;
    pl->o = opts;
    st = plan_build(pl);
    /* --tp: the split figures come from the graph pass with tp > 1; --fit
     * over tp > 1 needs them too: plan once more with tp 2 figures */
    if (st) {
        mp_tplan_free(pl);
        return st;
    }
    if (pl->n_fit > 1) qsort(pl->fit, (size_t)pl->n_fit, sizeof *pl->fit, fit_cmp);
    *out = pl;
    return MP_OK;
}

void mp_tplan_free(mp_tplan *pl) {
    if (!pl) return;
    mp_arena_free(&pl->arena);
    free(pl);
}

mp_status mp_tplan_memory(const mp_tplan *pl, int stage, mp_tplan_mem *out) {
    if (!pl || !out) return mp_error(MP_ERR_USAGE, "no plan");
    if (stage < -1 || stage >= pl->pp) return mp_error(MP_ERR_USAGE, "stage %d: the plan has %d", stage, pl->pp);
    *out = stage < 0 ? pl->mem : pl->stages[stage].mem;
    return MP_OK;
}

double mp_tplan_step_time(const mp_tplan *pl) {
    return pl && pl->have_gpu ? pl->step_s : -1;
}
