/* From a shaped, costed graph to the profile: parameters (shared weights
 * once), activation liveness, per-module and per-op aggregation. */
#include "analyze/analyze.h"

#include <stdlib.h>

/* Consumers of each value as a compressed list (CSR). */
typedef struct mp__uses {
    int *start;   /* n_values + 1 */
    int *node;    /* consumer node */
    int *slot;    /* input position */
} mp__uses;

static void mp__uses_free(mp__uses *u) {
    free(u->start);
    free(u->node);
    free(u->slot);
}

static mp_status mp__uses_build(const mp_graph *g, mp__uses *u) {
    int total = 0;
    u->start = calloc((size_t)g->n_values + 1, sizeof *u->start);
    for (int k = 0; k < g->n_nodes; k++) total += g->nodes[k].n_in;
    u->node = calloc((size_t)total + 1, sizeof *u->node);
    u->slot = calloc((size_t)total + 1, sizeof *u->slot);
    if (!u->start || !u->node || !u->slot) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int k = 0; k < g->n_nodes; k++)
        for (int i = 0; i < g->nodes[k].n_in; i++)
            if (g->nodes[k].in[i] >= 0) u->start[g->nodes[k].in[i] + 1]++;
    for (int v = 0; v < g->n_values; v++) u->start[v + 1] += u->start[v];
    int *fill = calloc((size_t)g->n_values + 1, sizeof *fill);
    if (!fill) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int k = 0; k < g->n_nodes; k++)
        for (int i = 0; i < g->nodes[k].n_in; i++) {
            int v = g->nodes[k].in[i];
            if (v < 0) continue;
            int at = u->start[v] + fill[v]++;
            u->node[at] = k;
            u->slot[at] = i;
        }
    free(fill);
    return MP_OK;
}

/* An Identity node that copies a weight: PyTorch's exporter keeps one
 * initializer for several equal tensors and names each copy with an
 * Identity output. */
static bool mp__is_copy(const mp_graph *g, const mp_node *n) {
    return n->n_in >= 1 && n->n_out >= 1 && n->in[0] >= 0 && n->out[0] >= 0 && !n->domain[0] &&
           strcmp(n->op, "Identity") == 0 && (g->values[n->in[0]].flags & MP_VAL_INIT);
}

/* Is value v (an initializer, or a copy of one) a learnable parameter?
 * (GUIDE §3, docs/COUNTING.md): float-typed with rank >= 1, or used where
 * an op takes a (quantized) weight; never when every use is a buffer slot
 * (BatchNormalization mean and variance). Copies are judged by their own
 * uses. */
static bool mp__is_param(const mp_graph *g, const mp__uses *u, int v, const mp_tensor *t) {
    if (t->numel <= 0) return false;
    bool any = false, all_buffer = true, param_slot = false;
    for (int j = u->start[v]; j < u->start[v + 1]; j++) {
        const mp_node *n = &g->nodes[u->node[j]];
        if (mp__is_copy(g, n)) continue;
        int s = u->slot[j];
        any = true;
        uint32_t bit = s < 32 ? (1u << s) : 0;
        if (!n->desc || !(n->desc->buffer_inputs & bit)) all_buffer = false;
        if (n->desc && (n->desc->param_inputs & bit)) param_slot = true;
    }
    if (any && all_buffer) return false;
    if (param_slot) return true;
    return mp_dtype_is_float(t->dtype) && t->rank >= 1;
}

/* The tensor a Constant node holds in its `value` attribute. */
static const mp_tensor *mp__constant_tensor(const mp_node *n) {
    const mp_attr *a = mp_node_attr(n, "value");
    return a && a->type == MP_ATTR_TENSOR ? a->t : NULL;
}

static void mp__mark_params(mp_graph *g, const mp__uses *u) {
    for (int v = 0; v < g->n_values; v++) {
        mp_value *val = &g->values[v];
        val->flags &= ~(uint32_t)MP_VAL_PARAM;
        if ((val->flags & MP_VAL_INIT) && mp__is_param(g, u, v, val->init))
            val->flags |= MP_VAL_PARAM;
    }
    for (int k = 0; k < g->n_nodes; k++) {
        const mp_node *n = &g->nodes[k];
        if (!mp__is_copy(g, n)) continue;
        const mp_value *src = &g->values[n->in[0]];
        if (mp__is_param(g, u, n->out[0], src->init)) g->values[n->out[0]].flags |= MP_VAL_PARAM;
    }
    /* Quantized weights stored in Constant nodes: the data input of a
     * DequantizeLinear, followed back through the casts and the
     * scaling that quantize it, ends at the weight (int8) or bias
     * (float, quantized on the fly) it dequantizes. */
    static const char *const chain[] = {"Cast", "Identity", "Reshape", "Transpose", "Div",
                                        "Mul", "Round", "Clip", "Unsqueeze", "Squeeze"};
    for (int k = 0; k < g->n_nodes; k++) {
        const mp_node *n = &g->nodes[k];
        if (strcmp(n->op, "DequantizeLinear") != 0 || n->n_in < 1 || n->in[0] < 0) continue;
        int v = n->in[0];
        for (int hop = 0; hop < 16 && v >= 0; hop++) {
            const mp_value *val = &g->values[v];
            if (val->producer < 0) break;
            const mp_node *p = &g->nodes[val->producer];
            if (strcmp(p->op, "Constant") == 0 && !p->domain[0]) {
                const mp_tensor *t = mp__constant_tensor(p);
                if (t && t->rank >= 1 && t->numel > 0) g->values[v].flags |= MP_VAL_PARAM;
                break;
            }
            bool follow = false;
            for (size_t c = 0; c < MP_ARRAY_LEN(chain) && !follow; c++)
                follow = strcmp(p->op, chain[c]) == 0 && !p->domain[0];
            if (!follow || p->n_in < 1) break;
            v = p->in[0];
        }
    }
}

/* The tensor behind a param value (itself, the weight it copies, or a
 * Constant node's tensor). */
static const mp_tensor *mp__param_tensor(const mp_graph *g, const mp_value *v) {
    if (v->init) return v->init;
    const mp_node *p = &g->nodes[v->producer];
    if (strcmp(p->op, "Constant") == 0) return mp__constant_tensor(p);
    return g->values[p->in[0]].init;
}

/* Params: totals by dtype, per node, per module (each module counts a
 * shared weight once; the model total counts it once). */
static mp_status mp__params(mp_profile *p, const mp__uses *u, const int *node_op) {
    mp_model *m = p->m;
    mp_graph *g = m->graph;
    bool ovf = false;
    int *stamp = malloc(sizeof(int) * (size_t)(m->n_modules ? m->n_modules : 1));
    int *op_stamp = malloc(sizeof(int) * (size_t)(p->n_ops ? p->n_ops : 1));
    if (!stamp || !op_stamp) {
        free(stamp);
        free(op_stamp);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < m->n_modules; i++) stamp[i] = -1;
    for (int i = 0; i < p->n_ops; i++) op_stamp[i] = -1;
    for (int v = 0; v < g->n_values; v++) {
        const mp_value *val = &g->values[v];
        if (!(val->flags & MP_VAL_PARAM)) continue;
        const mp_tensor *t = mp__param_tensor(g, val);
        int64_t count = t->numel;
        int dt = t->dtype;
        /* a packed weight: its consumer's descriptor knows the real count */
        for (int j = u->start[v]; j < u->start[v + 1]; j++) {
            const mp_node *nd = &g->nodes[u->node[j]];
            if (nd->desc && nd->desc->param_view &&
                nd->desc->param_view(nd, u->slot[j], t, &count, &dt))
                break;
        }
        uint64_t n = (uint64_t)count;
        uint64_t bytes = mp_dtype_bytes(dt, (int64_t)n);
        if (bytes == UINT64_MAX) ovf = true; /* saturated */
        p->total.params = mp_uadd(p->total.params, n, &ovf);
        p->total.param_bytes = mp_uadd(p->total.param_bytes, bytes, &ovf);
        if (dt >= 0 && dt < MP_DT_COUNT) {
            p->params_by_dtype[dt] = mp_uadd(p->params_by_dtype[dt], n, &ovf);
            p->param_bytes_by_dtype[dt] = mp_uadd(p->param_bytes_by_dtype[dt], bytes, &ovf);
        }
        int last_node = -1;
        for (int j = u->start[v]; j < u->start[v + 1]; j++) {
            int k = u->node[j];
            mp_node *nd = &g->nodes[k];
            if (mp__is_copy(g, nd)) continue; /* the copy is its own param */
            if (k != last_node) { /* a node using a weight twice counts it once */
                nd->cost.params = mp_uadd(nd->cost.params, n, &ovf);
                nd->cost.param_bytes = mp_uadd(nd->cost.param_bytes, bytes, &ovf);
                last_node = k;
            }
            int op = node_op[k];
            if (op_stamp[op] != v) { /* each op type counts a weight once */
                op_stamp[op] = v;
                p->ops[op].fig.params = mp_uadd(p->ops[op].fig.params, n, &ovf);
                p->ops[op].fig.param_bytes = mp_uadd(p->ops[op].fig.param_bytes, bytes, &ovf);
            }
            for (int md = nd->module; md >= 0; md = m->modules[md].parent) {
                if (stamp[md] == v) break; /* ancestors already have it */
                stamp[md] = v;
                p->mods[md].params = mp_uadd(p->mods[md].params, n, &ovf);
                p->mods[md].param_bytes = mp_uadd(p->mods[md].param_bytes, bytes, &ovf);
            }
        }
    }
    free(stamp);
    free(op_stamp);
    /* the root holds every parameter, used or not */
    if (m->n_modules > 0) {
        p->mods[0].params = p->total.params;
        p->mods[0].param_bytes = p->total.param_bytes;
    }
    if (ovf) p->overflow = true;
    return MP_OK;
}

/* Peak of live activations over the execution order: a value lives from
 * its producer to its last consumer; graph inputs from the start and
 * graph outputs to the end. Initializers (weights) are not activations,
 * nor are values computed from weights and constants alone (a weight's
 * Transpose in an export without constant folding, a Constant node's
 * output): runtimes fold those once at load time. */
static mp_status mp__liveness(mp_profile *p, const mp__uses *u) {
    mp_graph *g = p->m->graph;
    int n = g->n_nodes;
    int *pos = malloc(sizeof(int) * (size_t)(n ? n : 1));
    int64_t *delta = calloc((size_t)n + 2, sizeof *delta);
    bool *folded = calloc((size_t)g->n_values + 1, sizeof *folded);
    if (!pos || !delta || !folded) {
        free(pos);
        free(delta);
        free(folded);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    bool live_ovf = false;
    for (int i = 0; i < n; i++) pos[g->order[i]] = i;
    for (int i = 0; i < n; i++) {
        const mp_node *nd = &g->nodes[g->order[i]];
        bool k = nd->n_sub == 0;
        for (int j = 0; j < nd->n_in && k; j++) {
            int v = nd->in[j];
            if (v >= 0 && !(g->values[v].flags & MP_VAL_INIT) && !folded[v]) k = false;
        }
        for (int o = 0; o < nd->n_out; o++)
            if (nd->out[o] >= 0) folded[nd->out[o]] = k;
    }
    for (int v = 0; v < g->n_values; v++) {
        const mp_value *val = &g->values[v];
        if (val->flags & (MP_VAL_INIT | MP_VAL_OUTER) || folded[v]) continue;
        uint64_t b = mp_value_bytes(val);
        if (mp_value_numel(val) == -2) { /* elements past 64 bits */
            p->overflow = true;
            b = UINT64_MAX;
        }
        if (!b) continue;
        int born;
        if (val->producer >= 0)
            born = pos[val->producer];
        else if (val->flags & MP_VAL_INPUT)
            born = 0;
        else
            continue;
        int dies = born;
        for (int j = u->start[v]; j < u->start[v + 1]; j++)
            if (pos[u->node[j]] > dies) dies = pos[u->node[j]];
        if (val->flags & MP_VAL_OUTPUT) dies = n ? n - 1 : 0;
        if (b > (uint64_t)INT64_MAX / 4) {
            p->overflow = true;
            b = (uint64_t)INT64_MAX / 4;
        }
        /* checked: many values of 2^61 bytes add past 2^63 */
        if (__builtin_add_overflow(delta[born], (int64_t)b, &delta[born]) ||
            __builtin_sub_overflow(delta[dies + 1], (int64_t)b, &delta[dies + 1]))
            p->overflow = live_ovf = true;
    }
    int64_t live = 0, peak = 0;
    p->peak_node = -1;
    for (int i = 0; i < n && !live_ovf; i++) {
        if (__builtin_add_overflow(live, delta[i], &live)) {
            p->overflow = live_ovf = true;
            break;
        }
        if (live > peak) {
            peak = live;
            p->peak_node = g->order[i];
        }
    }
    p->activation_peak_bytes = live_ovf ? UINT64_MAX : (uint64_t)peak;
    free(pos);
    free(delta);
    free(folded);
    return MP_OK;
}

static void mp__fig_add_cost(mp_fig *f, const mp_cost *k, bool *ovf) {
    f->macs = mp_uadd(f->macs, k->macs, ovf);
    f->flops = mp_uadd(f->flops, k->flops, ovf);
    f->bytes_read = mp_uadd(f->bytes_read, k->bytes_read, ovf);
    f->bytes_written = mp_uadd(f->bytes_written, k->bytes_written, ovf);
    f->act_bytes = mp_uadd(f->act_bytes, k->act_bytes, ovf);
    f->nodes++;
    if (k->flags & MP_COST_UNCOUNTED) f->uncounted++;
    if (k->flags & MP_COST_UNKNOWN) f->unknown++;
    if (k->flags & MP_COST_OVERFLOW) *ovf = true;
}

static void mp__fig_add_fig(mp_fig *f, const mp_fig *c, bool *ovf) {
    f->macs = mp_uadd(f->macs, c->macs, ovf);
    f->flops = mp_uadd(f->flops, c->flops, ovf);
    f->bytes_read = mp_uadd(f->bytes_read, c->bytes_read, ovf);
    f->bytes_written = mp_uadd(f->bytes_written, c->bytes_written, ovf);
    f->act_bytes = mp_uadd(f->act_bytes, c->act_bytes, ovf);
    f->nodes += c->nodes;
    f->uncounted += c->uncounted;
    f->unknown += c->unknown;
}

static int mp__opstat_cmp(const void *a, const void *b) {
    const mp_opstat *x = a, *y = b;
    if (x->fig.flops != y->fig.flops) return x->fig.flops < y->fig.flops ? 1 : -1;
    if (x->fig.macs != y->fig.macs) return x->fig.macs < y->fig.macs ? 1 : -1;
    if (x->fig.nodes != y->fig.nodes) return x->fig.nodes < y->fig.nodes ? 1 : -1;
    int d = strcmp(x->domain, y->domain);
    return d ? d : strcmp(x->op, y->op);
}

/* Node figures into their module and op type (node_op[k] = op index). */
static mp_status mp__aggregate(mp_profile *p, int *node_op) {
    mp_model *m = p->m;
    mp_graph *g = m->graph;
    bool ovf = false;
    mp_strmap byop = {0};
    int cap = 0;
    mp_status st = MP_OK;
    for (int k = 0; k < g->n_nodes; k++) {
        const mp_node *n = &g->nodes[k];
        mp__fig_add_cost(&p->total, &n->cost, &ovf);
        if (n->module >= 0) mp__fig_add_cost(&p->mods[n->module], &n->cost, &ovf);
        /* keyed by op name; the same name in another domain (rare) is
         * found by a scan */
        int idx = mp_strmap_get(&byop, n->op);
        if (idx >= 0 && strcmp(p->ops[idx].domain, n->domain) != 0) {
            int same = -1;
            for (int i = 0; i < p->n_ops && same < 0; i++)
                if (strcmp(p->ops[i].op, n->op) == 0 && strcmp(p->ops[i].domain, n->domain) == 0)
                    same = i;
            idx = same;
        }
        if (idx < 0) {
            mp_opstat *no = mp_grow(p->ops, sizeof *p->ops, &cap, p->n_ops + 1);
            if (no) p->ops = no;
            if (!no || (mp_strmap_get(&byop, n->op) < 0 &&
                        mp_strmap_put(&byop, n->op, p->n_ops) != MP_OK)) {
                st = mp_error(MP_ERR_NOMEM, "out of memory");
                break;
            }
            idx = p->n_ops++;
            p->ops[idx].domain = n->domain;
            p->ops[idx].op = n->op;
            p->ops[idx].fig.latency_s = -1;
        }
        node_op[k] = idx;
        mp__fig_add_cost(&p->ops[idx].fig, &n->cost, &ovf);
    }
    mp_strmap_free(&byop);
    if (st) return st;
    /* children before parents: a child's index is always above its parent's */
    for (int i = m->n_modules - 1; i > 0; i--)
        mp__fig_add_fig(&p->mods[m->modules[i].parent], &p->mods[i], &ovf);
    if (ovf) p->overflow = true;
    return MP_OK;
}

static mp_status mp__unresolved(mp_profile *p) {
    mp_model *m = p->m;
    p->unresolved = calloc((size_t)m->n_syms + 1, sizeof *p->unresolved);
    if (!p->unresolved) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int s = 1; s < m->n_syms; s++)
        if (m->syms[s].on_input && m->syms[s].value < 0) p->unresolved[p->n_unresolved++] = s;
    return MP_OK;
}

/* Out of memory because the model's arena reached its limit: say so. */
static mp_status mp__limit_or(const mp_model *m, mp_status st) {
    if (st == MP_ERR_NOMEM && m->arena.limit_hit)
        return mp_error(MP_ERR_LIMIT,
                        "%s: the model's graph structure needs more than %zu bytes (limit "
                        "memory; raise it with --max-memory BYTES)",
                        m->path ? m->path : "model", m->arena.limit);
    return st;
}

mp_status mp_profile_static(mp_model *m, mp_profile **out) {
    *out = NULL;
    if (!m) return mp_error(MP_ERR_USAGE, "no model");
    mp_status st = mp_infer_model(m);
    if (st) return mp__limit_or(m, st);
    mp_profile *p = calloc(1, sizeof *p);
    if (!p) return mp_error(MP_ERR_NOMEM, "out of memory");
    p->m = m;
    p->total.latency_s = -1;
    p->peak_node = -1;
    if (m->n_modules == 0 && mp_model_module(m, "", 0) < 0) {
        free(p);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    p->mods = calloc((size_t)m->n_modules, sizeof *p->mods);
    if (!p->mods) {
        free(p);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < m->n_modules; i++) p->mods[i].latency_s = -1;
    mp__uses u = {0};
    int *node_op = malloc(sizeof(int) * (size_t)(m->graph->n_nodes + 1));
    st = node_op ? mp__uses_build(m->graph, &u) : mp_error(MP_ERR_NOMEM, "out of memory");
    if (!st) st = mp__aggregate(p, node_op);
    if (!st) {
        mp__mark_params(m->graph, &u);
        st = mp__params(p, &u, node_op);
    }
    if (!st) st = mp__liveness(p, &u);
    if (!st) st = mp__unresolved(p);
    if (!st && p->n_ops > 1) qsort(p->ops, (size_t)p->n_ops, sizeof *p->ops, mp__opstat_cmp);
    mp__uses_free(&u);
    free(node_op);
    if (st) {
        mp_profile_free(p);
        return mp__limit_or(m, st);
    }
    *out = p;
    return MP_OK;
}

void mp_profile_free(mp_profile *p) {
    if (!p) return;
    free(p->mods);
    free(p->ops);
    free(p->unresolved);
    free(p);
}

void mp_profile_totals(const mp_profile *p, mp_totals *t) {
    memset(t, 0, sizeof *t);
    t->params = p->total.params;
    t->param_bytes = p->total.param_bytes;
    t->macs = p->total.macs;
    t->flops = p->total.flops;
    t->bytes_read = p->total.bytes_read;
    t->bytes_written = p->total.bytes_written;
    t->activation_peak_bytes = p->activation_peak_bytes;
    t->nodes = p->total.nodes;
    t->uncounted_nodes = p->total.uncounted;
    t->unknown_nodes = p->total.unknown;
}
