/* The inference driver: walks a graph in topological order, lets each
 * operator set its outputs' shapes (and small contents), then costs the
 * node. Control-flow operators call back into mp_infer_graph for their
 * bodies. */
#include "analyze/analyze.h"

#include <stdlib.h>

/* A declared dim: a symbol the user gave a value takes it; another
 * symbol stays (a graph input's, or any when `any_symbol`) or becomes
 * unknown. */
static int64_t mp__decl_dim(const mp_model *m, int64_t d, bool any_symbol) {
    if (d >= MP_DIM_ANON) return d;
    const mp_symbol *s = &m->syms[MP_DIM_SYM(d)];
    return s->value >= 0 ? s->value : any_symbol || s->on_input ? d : MP_DIM_ANON;
}

/* Shape of a graph input: its declared dims with user values for
 * symbols. */
static mp_status mp__init_input(mp_model *m, mp_value *v) {
    v->dtype = v->decl_dtype;
    v->rank = v->decl_rank;
    v->kn = v->given_n;
    v->iv = v->given_iv;
    v->fv = v->given_fv;
    if (v->rank <= 0) {
        v->dims = NULL;
        return MP_OK;
    }
    v->dims = mp_arena_calloc(&m->arena, (size_t)v->rank, sizeof *v->dims);
    if (!v->dims) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < v->rank; i++) v->dims[i] = mp__decl_dim(m, v->decl_dims[i], true);
    return MP_OK;
}

static void mp__init_initializer(mp_value *v) {
    const mp_tensor *t = v->init;
    v->dtype = t->dtype;
    v->rank = t->rank;
    v->dims = t->dims;
}

/* A value the inference has not computed yet: no dtype, shape or contents. */
static void mp__unknown(mp_value *v) {
    v->dtype = MP_DT_UNDEFINED;
    v->rank = -1;
    v->dims = NULL;
    v->kn = -1;
    v->iv = NULL;
    v->fv = NULL;
    v->seq = NULL;
    v->flags &= ~(uint32_t)MP_VAL_RUN_SHAPE;
}

/* Reset every value the inference computes; keep initializers, inputs.
 * The parameter marks go too (the analysis sets them afresh). Lists the
 * initializers in inits when not NULL (g->n_values entries). */
static mp_status mp__reset(mp_model *m, mp_graph *g, int *inits, int *n_inits) {
    int ni = 0;
    g->shape_gen++; /* what was found on the old shapes (patterns.c) is stale */
    for (int i = 0; i < g->n_values; i++) {
        mp_value *v = &g->values[i];
        v->flags &= ~(uint32_t)MP_VAL_PARAM;
        if (v->flags & MP_VAL_INIT) {
            mp__init_initializer(v);
            if (inits) inits[ni++] = i;
        } else if ((v->flags & MP_VAL_INPUT) && !g->parent) {
            mp_status st = mp__init_input(m, v);
            if (st) return st;
        } else {
            mp__unknown(v);
        }
    }
    if (n_inits) *n_inits = ni;
    return MP_OK;
}

/* For an op without a shape rule: take the declared value_info, if any. */
static void mp__outputs_from_decl(mp_model *m, mp_graph *g, mp_node *n) {
    for (int o = 0; o < n->n_out; o++) {
        if (n->out[o] < 0) continue;
        mp_value *v = &g->values[n->out[o]];
        v->dtype = v->decl_dtype;
        v->rank = v->decl_rank;
        v->dims = NULL;
        if (v->rank > 0) {
            v->dims = mp_arena_calloc(&m->arena, (size_t)v->rank, sizeof *v->dims);
            if (!v->dims) {
                v->rank = -1;
                continue;
            }
            for (int i = 0; i < v->rank; i++) v->dims[i] = mp__decl_dim(m, v->decl_dims[i], true);
        }
    }
}

/* Bytes of a value for costing: an element count or a byte count past
 * 64 bits saturates and raises the overflow flag (never a silent 0). */
static uint64_t mp__cost_value_bytes(const mp_value *v, mp_cost *k, bool *ovf) {
    if (v->seq) { /* a known sequence: the sum of its elements' */
        uint64_t sum = 0;
        for (int i = 0; i < v->seq->n; i++)
            sum = mp_uadd(sum, mp__cost_value_bytes(&v->seq->el[i], k, ovf), ovf);
        return sum;
    }
    int64_t n = mp_value_numel(v);
    if (n == -2) {
        *ovf = true;
        return UINT64_MAX;
    }
    if (n < 0) {
        k->flags |= MP_COST_UNKNOWN;
        return 0;
    }
    uint64_t b = mp_dtype_bytes(v->dtype, n);
    if (b == UINT64_MAX) *ovf = true;
    return b;
}

/* Dims the inference could not find, from the file's value_info (the
 * exporter's own inference of an intermediate value): an export whose
 * shape constants lie in external data that is absent (a weightless copy
 * of a dynamo export) still declares every value's shape, and an export
 * with symbolic dims names them where the graph's shape arithmetic cannot
 * be followed without their values. Only unknown dims are filled, and
 * only with a number or a symbol of the graph's inputs (the user's --dim
 * applies): an exporter's own symbol for a data-dependent size stays
 * unknown, a graph output's declared type (a test's expected size of a
 * data-dependent output) is not read, and what the inference found is
 * never overridden. */
static void mp__fill_from_decl(mp_model *m, mp_graph *g, mp_node *n) {
    for (int o = 0; o < n->n_out; o++) {
        if (n->out[o] < 0) continue;
        mp_value *v = &g->values[n->out[o]];
        if (!(v->flags & MP_VAL_VALUE_INFO) || (v->flags & MP_VAL_OUTPUT)) continue;
        if (v->decl_rank < 0 || (v->rank >= 0 && v->rank != v->decl_rank)) continue;
        bool whole = v->rank < 0, any = whole;
        for (int i = 0; !any && i < v->rank; i++) any = v->dims[i] == MP_DIM_ANON;
        if (!any) continue;
        int64_t *dims = v->decl_rank ? mp_arena_calloc(&m->arena, (size_t)v->decl_rank, sizeof *dims) : NULL;
        if (v->decl_rank && !dims) return;
        for (int i = 0; i < v->decl_rank; i++)
            dims[i] = whole || v->dims[i] == MP_DIM_ANON ? mp__decl_dim(m, v->decl_dims[i], false) : v->dims[i];
        if (whole && v->dtype == MP_DT_UNDEFINED) v->dtype = v->decl_dtype;
        v->rank = v->decl_rank;
        v->dims = dims;
    }
}

/* The shapes a measured run saw (mp_profile_take_shapes), while the
 * profile is counted with them: an output the inference left unknown
 * takes its own, where the two agree; every output that has one is
 * marked as sized by the data (so are the nodes that read or write it). */
static void mp__fill_from_run(mp_model *m, mp_graph *g, const mp_node *n) {
    for (int o = 0; o < n->n_out; o++) {
        if (n->out[o] < 0) continue;
        mp_value *v = &g->values[n->out[o]];
        if (!v->run_dims) continue;
        if (!mp_shape_known(v)) {
            bool ok = v->rank < 0 || v->rank == v->run_rank;
            for (int d = 0; ok && v->rank >= 0 && d < v->rank; d++)
                ok = v->dims[d] < 0 || v->dims[d] == v->run_dims[d];
            int64_t *dims = ok ? mp_arena_calloc(&m->arena, (size_t)(v->run_rank ? v->run_rank : 1), sizeof *dims) : NULL;
            if (!dims) continue;
            if (v->run_rank) memcpy(dims, v->run_dims, sizeof *dims * (size_t)v->run_rank);
            v->rank = v->run_rank;
            v->dims = dims;
        }
        v->flags |= MP_VAL_RUN_SHAPE;
    }
}

static bool mp__sized_by_run(const mp_graph *g, const mp_node *n) {
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] >= 0 && (g->values[n->in[i]].flags & MP_VAL_RUN_SHAPE)) return true;
    for (int o = 0; o < n->n_out; o++)
        if (n->out[o] >= 0 && (g->values[n->out[o]].flags & MP_VAL_RUN_SHAPE)) return true;
    return false;
}

/* Bytes and activation figures common to every node. */
static void mp__cost_bytes(mp_graph *g, mp_node *n) {
    bool ovf = false;
    for (int i = 0; i < n->n_in; i++) {
        if (n->in[i] < 0) continue;
        const mp_value *v = &g->values[n->in[i]];
        n->cost.bytes_read =
            mp_uadd(n->cost.bytes_read, mp__cost_value_bytes(v, &n->cost, &ovf), &ovf);
    }
    for (int o = 0; o < n->n_out; o++) {
        if (n->out[o] < 0) continue;
        const mp_value *v = &g->values[n->out[o]];
        n->cost.bytes_written =
            mp_uadd(n->cost.bytes_written, mp__cost_value_bytes(v, &n->cost, &ovf), &ovf);
    }
    n->cost.act_bytes = n->cost.bytes_written;
    if (ovf) n->cost.flags |= MP_COST_OVERFLOW;
}

mp_status mp_infer_node(mp_model *m, mp_graph *g, int k) {
    mp_node *n = &g->nodes[k];
    mp_ctx c = {.m = m, .g = g, .n = n, .node = k, .infer_graph = mp_infer_graph};
    if (n->desc && n->desc->infer) {
        mp_status st = n->desc->infer(&c);
        if (st) return st;
        mp__fill_from_decl(m, g, n);
    } else {
        mp__outputs_from_decl(m, g, n);
    }
    if (m->run_shapes_apply && g == m->graph) mp__fill_from_run(m, g, n);
    mp_cost_node(m, g, k);
    return MP_OK;
}

void mp_cost_node(mp_model *m, mp_graph *g, int k) {
    mp_node *n = &g->nodes[k];
    mp_ctx c = {.m = m, .g = g, .n = n, .node = k, .infer_graph = mp_infer_graph};
    memset(&n->cost, 0, sizeof n->cost);
    /* bytes first: an op whose reads are not data (Shape) overrides them */
    mp__cost_bytes(g, n);
    if (n->desc && n->desc->cost)
        n->desc->cost(&c, &n->cost);
    else
        n->cost.flags |= MP_COST_UNCOUNTED;
    /* a module left out (DeepSpeed's ignore_modules): no work counted */
    if (n->module >= 0 && n->module < m->n_modules && m->modules[n->module].ignored) {
        n->cost.macs = n->cost.flops = 0;
        n->cost.flags = (n->cost.flags & ~(uint32_t)(MP_COST_UNCOUNTED | MP_COST_UNKNOWN)) |
                        MP_COST_IGNORED;
    }
    if (m->has_run_shapes && g == m->graph && !(n->cost.flags & MP_COST_UNKNOWN) && mp__sized_by_run(g, n))
        n->cost.flags |= MP_COST_RUN;
}

/* Outer-scope values of a subgraph take the parent's current state. */
static void mp__bind_outer(mp_graph *g) {
    if (!g->parent) return;
    for (int i = 0; i < g->n_values; i++) {
        mp_value *v = &g->values[i];
        if (!(v->flags & MP_VAL_OUTER) || v->outer < 0) continue;
        mp_value_take(v, &g->parent->values[v->outer]);
    }
}

mp_status mp_infer_graph(mp_model *m, mp_graph *g) {
    /* subgraph inputs are set by the control-flow op before this call */
    for (int i = 0; i < g->n_values; i++) {
        mp_value *v = &g->values[i];
        if (v->producer >= 0) {
            mp__unknown(v);
        } else if (v->flags & MP_VAL_INIT) {
            mp__init_initializer(v);
        }
    }
    mp__bind_outer(g);
    for (int i = 0; i < g->n_nodes; i++) {
        mp_status st = mp_infer_node(m, g, g->order[i]);
        if (st) return st;
    }
    return MP_OK;
}

mp_status mp_infer_begin(mp_model *m, int *inits, int *n_inits) {
    mp_error_clear();
    m->pass_work = 0;
    return mp__reset(m, m->graph, inits, n_inits);
}

mp_status mp_infer_model(mp_model *m) {
    mp_status st = mp_infer_begin(m, NULL, NULL);
    if (st) return st;
    mp_graph *g = m->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        st = mp_infer_node(m, g, g->order[i]);
        if (st) return st;
    }
    return MP_OK;
}
