/* Control flow: If, Loop, Scan. Bodies are inferred with the outer values
 * known; their node costs roll up into the control-flow node:
 *  - If: the branch taken when the condition is a known constant, else the
 *    costlier branch, flagged as an upper bound;
 *  - Loop: body cost x trip count when the trip count M is a known
 *    constant (and no condition can stop it earlier, else upper bound);
 *    otherwise one iteration, flagged "per iteration";
 *  - Scan: body cost x the scanned sequence length. */
#include "ops/kernel.h"
#include "load/load.h"

#include <stdio.h>
#include <stdlib.h>

static mp_graph *mp__body(mp_ctx *c, const char *name) {
    const mp_attr *a = mp_node_attr(c->n, name);
    return (a && a->type == MP_ATTR_GRAPH) ? a->g : NULL;
}

/* Set subgraph input i to a given type. */
static mp_status mp__set_body_input(mp_ctx *c, mp_graph *b, int i, int dtype, int rank,
                                    const int64_t *dims) {
    if (i >= b->n_inputs) return MP_OK;
    mp_value *v = &b->values[b->inputs[i]];
    v->dtype = dtype ? dtype : v->decl_dtype;
    v->rank = rank;
    v->kn = -1;
    v->iv = NULL;
    v->fv = NULL;
    v->dims = NULL;
    if (rank < 0 && v->decl_rank >= 0) {
        v->rank = v->decl_rank;
        v->dims = v->decl_dims;
        return MP_OK;
    }
    if (rank > 0) {
        v->dims = mp_scratch(c, sizeof(int64_t) * (size_t)rank);
        if (!v->dims) return mp_error(MP_ERR_NOMEM, "out of memory");
        memcpy(v->dims, dims, sizeof(int64_t) * (size_t)rank);
    }
    return MP_OK;
}

/* Where inference left a body output's dim unknown (it depends on the
 * iteration number, say), the body's declared output type fills it in:
 * the exporter states the fixed point there. */
static mp_status mp__refine_from_decl(mp_ctx *c, mp_graph *b) {
    for (int i = 0; i < b->n_outputs; i++) {
        mp_value *v = &b->values[b->outputs[i]];
        if (v->decl_rank < 0 || (v->rank >= 0 && v->rank != v->decl_rank)) continue;
        if (!v->dtype) v->dtype = v->decl_dtype;
        bool known = v->rank >= 0;
        for (int d = 0; known && d < v->rank; d++) known = v->dims[d] >= 0;
        if (known) continue;
        int64_t *dims = mp_scratch(c, sizeof(int64_t) * (size_t)(v->decl_rank ? v->decl_rank : 1));
        if (!dims) return mp_error(MP_ERR_NOMEM, "out of memory");
        for (int d = 0; d < v->decl_rank; d++) {
            int64_t inferred = v->rank >= 0 ? v->dims[d] : MP_DIM_ANON;
            dims[d] = inferred >= 0 ? inferred : v->decl_dims[d];
        }
        v->rank = v->decl_rank;
        v->dims = dims;
    }
    return MP_OK;
}

static mp_status mp__run_body(mp_ctx *c, mp_graph *b) {
    mp_status st = mp_infer_graph(c->m, b);
    if (st) {
        /* keep the inner message, say where it came from */
        char inner[512];
        snprintf(inner, sizeof inner, "%s", mp_last_error());
        return mp_fail(c, "in its body: %s", inner);
    }
    return mp__refine_from_decl(c, b);
}

/* ---- If ---- */

static mp_status mp__if_infer(mp_ctx *c) {
    mp_graph *t = mp__body(c, "then_branch"), *e = mp__body(c, "else_branch");
    if (!t || !e) return mp_fail(c, "needs then_branch and else_branch graphs");
    mp_status st;
    if ((st = mp__run_body(c, t)) || (st = mp__run_body(c, e))) return st;
    const int64_t *cond;
    int64_t nc;
    int taken = -1;
    if (mp_ints(c, 0, &cond, &nc) && nc == 1) taken = cond[0] ? 0 : 1;
    for (int o = 0; o < c->n->n_out; o++) {
        const mp_value *a = o < t->n_outputs ? &t->values[t->outputs[o]] : NULL;
        const mp_value *b = o < e->n_outputs ? &e->values[e->outputs[o]] : NULL;
        if (!a || !b) return mp_fail(c, "branches have fewer outputs than the node");
        const mp_value *pick = taken == 1 ? b : a;
        if (taken < 0 && (a->rank != b->rank)) {
            if ((st = mp_set_out_dtype(c, o, a->dtype))) return st;
            continue;
        }
        int64_t dims[MP_MAX_RANK];
        for (int d = 0; d < pick->rank; d++)
            dims[d] = (taken >= 0 || a->dims[d] == b->dims[d]) ? pick->dims[d] : MP_DIM_ANON;
        if ((st = mp_set_out(c, o, pick->dtype, pick->rank, dims))) return st;
    }
    return MP_OK;
}

static void mp__if_cost(mp_ctx *c, mp_cost *k) {
    mp_graph *t = mp__body(c, "then_branch"), *e = mp__body(c, "else_branch");
    mp_cost a = {0}, b = {0};
    mp_graph_cost_sum(t, &a);
    mp_graph_cost_sum(e, &b);
    const int64_t *cond;
    int64_t nc;
    if (mp_ints(c, 0, &cond, &nc) && nc == 1) {
        *k = cond[0] ? a : b;
    } else {
        *k = (a.flops + a.macs >= b.flops + b.macs) ? a : b;
        k->flags |= MP_COST_BOUND;
    }
    k->bytes_read = k->bytes_written = 0;
}

/* ---- Loop ---- */

static mp_status mp__loop_infer(mp_ctx *c) {
    mp_graph *b = mp__body(c, "body");
    if (!b) return mp_fail(c, "needs a body graph");
    int n_carried = c->n->n_in - 2;
    if (n_carried < 0) return mp_fail(c, "needs at least 2 inputs (M, cond)");
    if (b->n_inputs != n_carried + 2)
        return mp_fail(c, "body has %d inputs, expected %d", b->n_inputs, n_carried + 2);
    mp_status st;
    if ((st = mp__set_body_input(c, b, 0, MP_DT_INT64, 0, NULL))) return st;
    if ((st = mp__set_body_input(c, b, 1, MP_DT_BOOL, 0, NULL))) return st;
    for (int i = 0; i < n_carried; i++) {
        const mp_value *v = mp_in(c, i + 2);
        if (!v) return mp_fail(c, "loop-carried input %d is missing", i);
        if ((st = mp__set_body_input(c, b, i + 2, v->dtype, v->rank, v->dims))) return st;
    }
    if ((st = mp__run_body(c, b))) return st;
    if (b->n_outputs < 1 + n_carried)
        return mp_fail(c, "body has %d outputs, expected at least %d", b->n_outputs, 1 + n_carried);
    const int64_t *mv;
    int64_t nm;
    int64_t trip = (mp_ints(c, 0, &mv, &nm) && nm == 1 && mv[0] >= 0) ? mv[0] : MP_DIM_ANON;
    for (int o = 0; o < c->n->n_out; o++) {
        const mp_value *bo = o + 1 < b->n_outputs ? &b->values[b->outputs[o + 1]] : NULL;
        if (!bo) return mp_fail(c, "node has more outputs than its body");
        if (o < n_carried) {
            const mp_value *init = mp_in(c, o + 2);
            /* a carried value keeps its shape where the body agrees */
            if (bo->rank == init->rank && bo->rank >= 0) {
                int64_t dims[MP_MAX_RANK];
                for (int d = 0; d < bo->rank; d++)
                    dims[d] = bo->dims[d] == init->dims[d] ? bo->dims[d] : MP_DIM_ANON;
                if ((st = mp_set_out(c, o, bo->dtype, bo->rank, dims))) return st;
            } else if ((st = mp_set_out_dtype(c, o, bo->dtype ? bo->dtype : init->dtype))) {
                return st;
            }
        } else {
            /* scan output: iterations stacked on a new first axis */
            if (bo->rank < 0 || bo->rank + 1 > MP_MAX_RANK) {
                if ((st = mp_set_out_dtype(c, o, bo->dtype))) return st;
                continue;
            }
            int64_t dims[MP_MAX_RANK];
            dims[0] = trip;
            for (int d = 0; d < bo->rank; d++) dims[d + 1] = bo->dims[d];
            if ((st = mp_set_out(c, o, bo->dtype, bo->rank + 1, dims))) return st;
        }
    }
    return MP_OK;
}

static void mp__scale_cost(mp_cost *k, uint64_t times) {
    bool ovf = false;
    k->macs = mp_umul(k->macs, times, &ovf);
    k->flops = mp_umul(k->flops, times, &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

static void mp__loop_cost(mp_ctx *c, mp_cost *k) {
    mp_cost body = {0};
    mp_graph_cost_sum(mp__body(c, "body"), &body);
    *k = body;
    k->bytes_read = k->bytes_written = 0;
    const int64_t *mv;
    int64_t nm;
    if (mp_in(c, 0) && mp_ints(c, 0, &mv, &nm) && nm == 1 && mv[0] >= 0) {
        mp__scale_cost(k, (uint64_t)mv[0]);
        if (mp_in(c, 1)) k->flags |= MP_COST_BOUND; /* cond may stop it earlier */
    } else {
        k->flags |= MP_COST_PER_ITER;
    }
}

/* ---- Scan (opset 9+) ---- */

static mp_status mp__scan_infer(mp_ctx *c) {
    mp_graph *b = mp__body(c, "body");
    if (!b) return mp_fail(c, "needs a body graph");
    int n_scan = (int)mp_attr_i(c->n, "num_scan_inputs", -1);
    int n_state = c->n->n_in - n_scan;
    if (n_scan < 1 || n_state < 0) return mp_fail(c, "bad num_scan_inputs %d", n_scan);
    if (b->n_inputs != c->n->n_in) return mp_fail(c, "body has %d inputs, node has %d", b->n_inputs, c->n->n_in);
    const int64_t *in_axes = NULL, *out_axes = NULL;
    int n_in_axes = mp_attr_ints(c->n, "scan_input_axes", &in_axes);
    int n_out_axes = mp_attr_ints(c->n, "scan_output_axes", &out_axes);
    mp_status st;
    int64_t seq = MP_DIM_ANON;
    for (int i = 0; i < c->n->n_in; i++) {
        const mp_value *v = mp_in(c, i);
        if (!v) return mp_fail(c, "input %d is missing", i);
        if (i < n_state || v->rank < 0) {
            if ((st = mp__set_body_input(c, b, i, v->dtype, v->rank, v->dims))) return st;
            continue;
        }
        int s = i - n_state;
        int ax = mp_axis(s < n_in_axes ? in_axes[s] : 0, v->rank);
        if (ax < 0) return mp_fail(c, "scan input %d: axis out of range", s);
        int64_t dims[MP_MAX_RANK];
        int r = 0;
        for (int d = 0; d < v->rank; d++)
            if (d != ax) dims[r++] = v->dims[d];
        seq = v->dims[ax];
        if ((st = mp__set_body_input(c, b, i, v->dtype, r, dims))) return st;
    }
    if ((st = mp__run_body(c, b))) return st;
    if (b->n_outputs != c->n->n_out) return mp_fail(c, "body has %d outputs, node has %d", b->n_outputs, c->n->n_out);
    for (int o = 0; o < c->n->n_out; o++) {
        const mp_value *bo = &b->values[b->outputs[o]];
        if (o < n_state || bo->rank < 0) {
            if ((st = mp_set_out_like(c, o, bo))) return st;
            continue;
        }
        int s = o - n_state;
        int ax = mp_axis(s < n_out_axes ? out_axes[s] : 0, bo->rank + 1);
        if (ax < 0 || bo->rank + 1 > MP_MAX_RANK) return mp_fail(c, "scan output %d: bad axis", s);
        int64_t dims[MP_MAX_RANK];
        for (int d = 0, src = 0; d < bo->rank + 1; d++) dims[d] = d == ax ? seq : bo->dims[src++];
        if ((st = mp_set_out(c, o, bo->dtype, bo->rank + 1, dims))) return st;
    }
    return MP_OK;
}

/* Scan before opset 9: input 0 is an optional sequence_lens, every other
 * input and output has a batch axis 0, and scan inputs and outputs scan
 * along axis 1. */
static mp_status mp__scan8_infer(mp_ctx *c) {
    mp_graph *b = mp__body(c, "body");
    if (!b) return mp_fail(c, "needs a body graph");
    int n_scan = (int)mp_attr_i(c->n, "num_scan_inputs", -1);
    int n_in = c->n->n_in - 1; /* without sequence_lens */
    int n_state = n_in - n_scan;
    if (n_scan < 1 || n_state < 0) return mp_fail(c, "bad num_scan_inputs %d", n_scan);
    if (b->n_inputs != n_in) return mp_fail(c, "body has %d inputs, node has %d", b->n_inputs, n_in);
    mp_status st;
    int64_t batch = MP_DIM_ANON, seq = MP_DIM_ANON;
    for (int i = 0; i < n_in; i++) {
        const mp_value *v = mp_in(c, i + 1);
        if (!v) return mp_fail(c, "input %d is missing", i + 1);
        int drop = i < n_state ? 1 : 2; /* batch, and the scan axis */
        if (v->rank < drop) {
            if ((st = mp__set_body_input(c, b, i, v->dtype, -1, NULL))) return st;
            continue;
        }
        batch = v->dims[0];
        if (i >= n_state) seq = v->dims[1];
        if ((st = mp__set_body_input(c, b, i, v->dtype, v->rank - drop, v->dims + drop))) return st;
    }
    if ((st = mp__run_body(c, b))) return st;
    if (b->n_outputs != c->n->n_out) return mp_fail(c, "body has %d outputs, node has %d", b->n_outputs, c->n->n_out);
    for (int o = 0; o < c->n->n_out; o++) {
        const mp_value *bo = &b->values[b->outputs[o]];
        int add = o < n_state ? 1 : 2;
        if (bo->rank < 0 || bo->rank + add > MP_MAX_RANK) {
            if ((st = mp_set_out_dtype(c, o, bo->dtype))) return st;
            continue;
        }
        int64_t dims[MP_MAX_RANK];
        dims[0] = batch;
        if (add == 2) dims[1] = seq;
        for (int d = 0; d < bo->rank; d++) dims[d + add] = bo->dims[d];
        if ((st = mp_set_out(c, o, bo->dtype, bo->rank + add, dims))) return st;
    }
    return MP_OK;
}

static void mp__scan8_cost(mp_ctx *c, mp_cost *k) {
    mp_cost body = {0};
    mp_graph_cost_sum(mp__body(c, "body"), &body);
    *k = body;
    k->bytes_read = k->bytes_written = 0;
    int n_scan = (int)mp_attr_i(c->n, "num_scan_inputs", 1);
    const mp_value *v = mp_in(c, c->n->n_in - n_scan);
    if (v && v->rank >= 2 && v->dims[0] >= 0 && v->dims[1] >= 0) {
        bool ovf = false;
        mp__scale_cost(k, mp_umul((uint64_t)v->dims[0], (uint64_t)v->dims[1], &ovf));
        if (ovf) k->flags |= MP_COST_OVERFLOW;
    } else {
        k->flags |= MP_COST_PER_ITER;
    }
}

static void mp__scan_cost(mp_ctx *c, mp_cost *k) {
    mp_cost body = {0};
    mp_graph_cost_sum(mp__body(c, "body"), &body);
    *k = body;
    k->bytes_read = k->bytes_written = 0;
    int n_scan = (int)mp_attr_i(c->n, "num_scan_inputs", 1);
    int first = c->n->n_in - n_scan;
    const mp_value *v = mp_in(c, first);
    const int64_t *in_axes = NULL;
    int n_in_axes = mp_attr_ints(c->n, "scan_input_axes", &in_axes);
    int ax = v ? mp_axis(n_in_axes > 0 ? in_axes[0] : 0, v->rank) : -1;
    if (ax >= 0 && v->dims[ax] >= 0)
        mp__scale_cost(k, (uint64_t)v->dims[ax]);
    else
        k->flags |= MP_COST_PER_ITER;
}

/* ------------------------------------------------------------------ */
/* kernels: the bodies run by a small interpreter                      */
/* ------------------------------------------------------------------ */
/* A body's values live in an environment: its formal inputs bound by the
 * control node, outer values read from the enclosing environment (the
 * plan's, through mp_kvalue, for a node of the main graph), initializers
 * and known contents decoded once, and node outputs in buffers shaped as
 * the static inference shaped them. Each node runs its portable kernel
 * (prepare, run, release) with no plan: a body node whose output shape is
 * known only at run time is not supported. */

typedef struct ctl_env {
    const mp_graph *g;
    mp_rtensor *v;            /* per value of g */
    void **own;               /* buffers owned per value */
    const struct ctl_env *parent;
    const mp_kctx *top;       /* the control node's context (main graph) */
} ctl_env;

static _Thread_local const ctl_env *ctl_cur; /* innermost running body */

static void ctl_env_free(ctl_env *e) {
    for (int i = 0; e->own && i < e->g->n_values; i++) free(e->own[i]);
    free(e->own);
    free(e->v);
}

/* Value v of the graph enclosing body values: the running environment's,
 * or the plan's for the main graph. */
static const mp_rtensor *ctl_outer(const mp_kctx *k, const ctl_env *parent, int v) {
    if (parent) return v >= 0 && v < parent->g->n_values && parent->v[v].data ? &parent->v[v] : NULL;
    const mp_rtensor *t = mp_kvalue(k, v);
    return t && t->data ? t : NULL;
}

/* A buffer of rank/dims/dtype for value i of e. */
static mp_status ctl_alloc(const mp_kctx *k, ctl_env *e, int i, int dtype, int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0) return mp_kfail(k, MP_ERR_UNSUPPORTED, "a body value's shape is known only at run time");
        n *= dims[d];
    }
    size_t bytes = (size_t)mp_dtype_bytes(dtype, n);
    void *p = calloc(1, bytes + 16 + sizeof(int64_t) * (size_t)(rank + 1));
    if (!p) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    /* dims live after the data in the same block */
    int64_t *dst = (int64_t *)(void *)((char *)p + ((bytes + 15) & ~(size_t)15));
    if (rank > 0) memcpy(dst, dims, sizeof(int64_t) * (size_t)rank);
    free(e->own[i]);
    e->own[i] = p;
    e->v[i] = (mp_rtensor){p, dtype, rank, dst, n};
    return MP_OK;
}

/* Fill e's initializers and known contents. */
static mp_status ctl_env_init(const mp_kctx *k, ctl_env *e, const mp_graph *g, const ctl_env *parent) {
    e->g = g;
    e->parent = parent;
    e->v = calloc((size_t)g->n_values + 1, sizeof *e->v);
    e->own = calloc((size_t)g->n_values + 1, sizeof *e->own);
    if (!e->v || !e->own) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_values; i++) {
        const mp_value *v = &g->values[i];
        if (v->flags & MP_VAL_OUTER) {
            const mp_rtensor *t = ctl_outer(k, parent, v->outer);
            if (t) e->v[i] = *t;
            continue;
        }
        bool init = (v->flags & MP_VAL_INIT) && v->init;
        bool known = v->kn >= 0 && mp_shape_known(v) && v->kn == mp_value_numel(v) && (v->iv || v->fv);
        if (!init && !known) continue;
        if (!mp_shape_known(v)) continue;
        mp_status st = ctl_alloc(k, e, i, v->dtype, v->rank, v->dims);
        if (st) return st;
        const mp_tensor *t = init ? v->init : NULL;
        if (t && t->loc == MP_DATA_RAW && t->size == mp_dtype_bytes(v->dtype, e->v[i].numel)) {
            memcpy(e->v[i].data, t->data, t->size);
        } else if (known) {
            for (int64_t j = 0; j < v->kn; j++)
                if (v->fv) mp_kset_f(e->v[i].data, v->dtype, j, v->fv[j]);
                else mp_kset_i(e->v[i].data, v->dtype, j, v->iv[j]);
        } else {
            int64_t *iv = NULL;
            double *fv = NULL;
            if (mp_tensor_read(g->model, t, &iv, &fv) != MP_OK)
                return mp_kfail(k, MP_ERR_UNSUPPORTED, "cannot read body initializer '%s'", v->name);
            for (int64_t j = 0; j < e->v[i].numel; j++)
                if (fv) mp_kset_f(e->v[i].data, v->dtype, j, fv[j]);
                else mp_kset_i(e->v[i].data, v->dtype, j, iv[j]);
        }
    }
    return MP_OK;
}

/* Run every node of e's graph once (its inputs bound). */
static mp_status ctl_env_run(const mp_kctx *k, ctl_env *e) {
    const mp_graph *g = e->g;
    const ctl_env *saved = ctl_cur;
    ctl_cur = e;
    mp_status st = MP_OK;
    for (int oi = 0; !st && oi < g->n_nodes; oi++) {
        const mp_node *n = &g->nodes[g->order ? g->order[oi] : oi];
        const mp_op *op = n->desc;
        if (!op || !op->run) {
            st = mp_kfail(k, MP_ERR_UNSUPPORTED, "body node '%s' (%s) has no portable kernel", n->name, n->op);
            break;
        }
        mp_rtensor in[64], out[64];
        if (n->n_in > 64 || n->n_out > 64) {
            st = mp_kfail(k, MP_ERR_UNSUPPORTED, "body node with more than 64 inputs or outputs");
            break;
        }
        for (int i = 0; i < n->n_in; i++) in[i] = n->in[i] >= 0 ? e->v[n->in[i]] : (mp_rtensor){0};
        for (int i = 0; !st && i < n->n_out; i++) {
            int v = n->out[i];
            out[i] = (mp_rtensor){0};
            if (v < 0) continue;
            const mp_value *val = &g->values[v];
            if (!(st = ctl_alloc(k, e, v, val->dtype, val->rank < 0 ? 0 : val->rank, val->dims)))
                out[i] = e->v[v];
        }
        if (st) break;
        mp_kctx kk = {.n = n, .g = g, .plan = NULL, .n_in = n->n_in, .n_out = n->n_out, .in = in, .out = out,
                      .threads = 1};
        st = mp_krun_node(op, &kk);
    }
    ctl_cur = saved;
    return st;
}

/* Bind formal input i of e's graph to t (a view, not copied). */
static void ctl_bind(ctl_env *e, int i, const mp_rtensor *t) {
    if (i < e->g->n_inputs && e->g->inputs[i] >= 0) e->v[e->g->inputs[i]] = *t;
}

static const mp_rtensor *ctl_body_out(const ctl_env *e, int i) {
    int v = i < e->g->n_outputs ? e->g->outputs[i] : -1;
    return v >= 0 && e->v[v].data ? &e->v[v] : NULL;
}

/* Copy t into output o of the control node (shaping it when its shape
 * was left to run time). */
static mp_status ctl_emit(mp_kctx *k, int o, const mp_rtensor *t) {
    if (o >= k->n_out || k->n->out[o] < 0) return MP_OK;
    if (!t) return mp_kfail(k, MP_ERR_UNSUPPORTED, "body output %d has no value", o);
    mp_status st = mp_kout_shape(k, o, t->rank, t->dims);
    if (st) return st;
    if (k->out[o].numel != t->numel) return mp_kfail(k, MP_ERR_SHAPE, "output %d: body size differs", o);
    mp_kconvert(k->out[o].data, k->out[o].dtype, t->data, t->dtype, t->numel);
    return MP_OK;
}

static const mp_graph *ctl_attr_graph(const mp_node *n, const char *name) {
    const mp_attr *a = mp_node_attr(n, name);
    return a && a->type == MP_ATTR_GRAPH ? a->g : NULL;
}

static mp_status ctl_if(mp_kctx *k) {
    const mp_rtensor *c = &k->in[0];
    bool cond = c->numel > 0 && mp_kget_i(c->data, c->dtype, 0) != 0;
    const mp_graph *b = ctl_attr_graph(k->n, cond ? "then_branch" : "else_branch");
    if (!b) return mp_kfail(k, MP_ERR_FORMAT, "missing branch");
    ctl_env e = {0};
    mp_status st = ctl_env_init(k, &e, b, k->plan ? NULL : ctl_cur);
    if (!st) st = ctl_env_run(k, &e);
    for (int o = 0; !st && o < k->n_out; o++) st = ctl_emit(k, o, ctl_body_out(&e, o));
    ctl_env_free(&e);
    return st;
}

/* Growing stack of one scan output's iterations. */
typedef struct ctl_stack {
    char *data;
    size_t used, cap;
    int rank, dtype;
    int64_t dims[MP_MAX_RANK];
    int64_t count;
} ctl_stack;

static mp_status ctl_push(const mp_kctx *k, ctl_stack *s, const mp_rtensor *t) {
    size_t bytes = (size_t)mp_dtype_bytes(t->dtype, t->numel);
    if (s->count == 0) {
        s->rank = t->rank;
        s->dtype = t->dtype;
        if (t->rank > 0) memcpy(s->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    }
    if (s->used + bytes > s->cap) {
        size_t cap = (s->cap ? s->cap * 2 : 256) + bytes;
        char *p = realloc(s->data, cap);
        if (!p) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
        s->data = p, s->cap = cap;
    }
    if (bytes) memcpy(s->data + s->used, t->data, bytes);
    s->used += bytes;
    s->count++;
    return MP_OK;
}

/* The stacked scan output [count, ...] (axis 0), or reversed. */
static mp_status ctl_emit_stack(mp_kctx *k, int o, const ctl_stack *s, int axis, bool reverse) {
    int64_t dims[MP_MAX_RANK];
    int r = s->count ? s->rank + 1 : 1;
    if (!s->count) dims[0] = 0;
    else {
        if (axis < 0) axis += r;
        if (axis < 0 || axis >= r) return mp_kfail(k, MP_ERR_SHAPE, "scan output axis out of range");
        for (int d = 0, j = 0; d < r; d++) dims[d] = d == axis ? s->count : s->dims[j++];
    }
    if (o >= k->n_out || k->n->out[o] < 0) return MP_OK;
    mp_status st = mp_kout_shape(k, o, r, dims);
    if (st || !s->count) return st;
    size_t es = mp_kesize(s->dtype);
    int64_t per = 1, outer = 1, inner = 1;
    for (int d = 0; d < s->rank; d++) per *= s->dims[d];
    for (int d = 0; d < axis; d++) outer *= dims[d];
    inner = per / (outer ? outer : 1);
    for (int64_t it = 0; it < s->count; it++) {
        int64_t src = reverse ? s->count - 1 - it : it;
        for (int64_t a = 0; a < outer; a++)
            memcpy((char *)k->out[o].data + (size_t)((a * s->count + it) * inner) * es,
                   s->data + (size_t)(src * per + a * inner) * es, (size_t)inner * es);
    }
    return MP_OK;
}

/* An owned copy of t (data, then its dims in the same block) replacing
 * *own; *dst becomes the copy. */
static mp_status ctl_own_copy(const mp_kctx *k, const mp_rtensor *t, void **own, mp_rtensor *dst) {
    size_t bytes = (size_t)mp_dtype_bytes(t->dtype, t->numel);
    void *p = malloc(bytes + 16 + sizeof(int64_t) * (size_t)(t->rank + 1));
    if (!p) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    int64_t *dd = (int64_t *)(void *)((char *)p + ((bytes + 15) & ~(size_t)15));
    if (bytes) memcpy(p, t->data, bytes);
    if (t->rank > 0) memcpy(dd, t->dims, sizeof(int64_t) * (size_t)t->rank);
    free(*own);
    *own = p;
    *dst = (mp_rtensor){p, t->dtype, t->rank, dd, t->numel};
    return MP_OK;
}

/* Infer a Loop body again for iteration `it` with the carried values'
 * current shapes (the body's values then hold that iteration's shapes). */
static mp_status ctl_loop_reinfer(mp_kctx *k, mp_graph *b, int64_t it, int nc, const mp_rtensor *carry) {
    mp_ctx c = {k->g->model, (mp_graph *)k->g, (mp_node *)k->n, 0};
    mp_status st = mp__set_body_input(&c, b, 0, MP_DT_INT64, 0, NULL);
    if (!st) st = mp__set_body_input(&c, b, 1, MP_DT_BOOL, 0, NULL);
    for (int i = 0; !st && i < nc; i++) st = mp__set_body_input(&c, b, 2 + i, carry[i].dtype, carry[i].rank, carry[i].dims);
    if (!st && b->n_inputs > 1) {
        int64_t *iv = mp_scratch(&c, 2 * sizeof(int64_t));
        if (!iv) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
        iv[0] = it;
        iv[1] = 1;
        mp_value *vi = &b->values[b->inputs[0]], *vc = &b->values[b->inputs[1]];
        vi->kn = 1, vi->iv = &iv[0];
        vc->kn = 1, vc->iv = &iv[1];
    }
    if (!st) st = mp__run_body(&c, b);
    return st;
}

/* Loop: M (optional trip count), cond (optional), carried values; body
 * inputs (iteration, cond, carried...), outputs (cond, carried...,
 * scan outputs...). */
static mp_status ctl_loop(mp_kctx *k) {
    const mp_graph *b = ctl_attr_graph(k->n, "body");
    if (!b) return mp_kfail(k, MP_ERR_FORMAT, "missing body");
    const mp_rtensor *M = mp_kin(k, 0), *C = mp_kin(k, 1);
    int64_t trip = M ? mp_kget_i(M->data, M->dtype, 0) : INT64_MAX;
    bool cond = C ? mp_kget_i(C->data, C->dtype, 0) != 0 : true;
    int nc = k->n_in - 2, ns = b->n_outputs - 1 - nc;
    if (nc < 0 || ns < 0) return mp_kfail(k, MP_ERR_SHAPE, "body outputs do not match the carried values");
    mp_rtensor *carry = calloc((size_t)nc + 1, sizeof *carry);
    void **cown = calloc((size_t)nc + 1, sizeof *cown);
    ctl_stack *stk = calloc((size_t)ns + 1, sizeof *stk);
    mp_status st = carry && cown && stk ? MP_OK : mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < nc; i++) carry[i] = k->in[2 + i];
    int64_t iter_v = 0;
    uint8_t cond_v = 1;
    /* A body whose shapes the static inference left unknown (they change
     * with the iteration number) is inferred again for each iteration,
     * with the iteration number and the carried shapes of that iteration. */
    bool reinfer = false;
    for (int v = 0; v < b->n_values && !reinfer; v++)
        reinfer = b->values[v].producer >= 0 && !mp_shape_known(&b->values[v]);
    for (int64_t it = 0; !st && it < trip && cond; it++) {
        ctl_env e = {0};
        if (reinfer) st = ctl_loop_reinfer(k, (mp_graph *)b, it, nc, carry);
        if (!st) st = ctl_env_init(k, &e, b, k->plan ? NULL : ctl_cur);
        iter_v = it;
        cond_v = 1;
        mp_rtensor ti = {&iter_v, MP_DT_INT64, 0, NULL, 1}, tc = {&cond_v, MP_DT_BOOL, 0, NULL, 1};
        if (!st) {
            ctl_bind(&e, 0, &ti);
            ctl_bind(&e, 1, &tc);
            for (int i = 0; i < nc; i++) ctl_bind(&e, 2 + i, &carry[i]);
            st = ctl_env_run(k, &e);
        }
        const mp_rtensor *co = st ? NULL : ctl_body_out(&e, 0);
        if (!st) cond = co ? mp_kget_i(co->data, co->dtype, 0) != 0 : true;
        for (int i = 0; !st && i < nc; i++) { /* carried values copied out of the body */
            const mp_rtensor *t = ctl_body_out(&e, 1 + i);
            st = t ? ctl_own_copy(k, t, &cown[i], &carry[i])
                   : mp_kfail(k, MP_ERR_UNSUPPORTED, "carried value %d has no value", i);
        }
        for (int i = 0; !st && i < ns; i++) {
            const mp_rtensor *t = ctl_body_out(&e, 1 + nc + i);
            st = t ? ctl_push(k, &stk[i], t) : mp_kfail(k, MP_ERR_UNSUPPORTED, "scan output %d has no value", i);
        }
        ctl_env_free(&e);
    }
    for (int i = 0; !st && i < nc; i++) st = ctl_emit(k, i, &carry[i]);
    for (int i = 0; !st && i < ns; i++) st = ctl_emit_stack(k, nc + i, &stk[i], 0, false);
    for (int i = 0; i < nc && cown; i++) free(cown[i]);
    for (int i = 0; i < ns && stk; i++) free(stk[i].data);
    free(carry), free(cown), free(stk);
    return st;
}

/* The iterations of a Scan over nst states (st) and m scanned inputs (sc,
 * each scanned along ax[j], reversed when rev[j]), T steps: final states
 * into state[] (owned by sown[]), scan outputs pushed on stk[]. */
static mp_status ctl_scan_steps(mp_kctx *k, const mp_graph *b, int nst, int m, const mp_rtensor *st,
                                const mp_rtensor *sc, const int *ax, const bool *rev, int64_t T,
                                mp_rtensor *state, void **sown, ctl_stack *stk) {
    int ns = b->n_outputs - nst;
    void **slice = calloc((size_t)m + 1, sizeof *slice);
    int64_t (*sdims)[MP_MAX_RANK] = calloc((size_t)m + 1, sizeof *sdims);
    mp_status stt = slice && sdims ? MP_OK : mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int i = 0; !stt && i < nst; i++) state[i] = st[i];
    for (int64_t t = 0; !stt && t < T; t++) {
        ctl_env e = {0};
        stt = ctl_env_init(k, &e, b, k->plan ? NULL : ctl_cur);
        for (int i = 0; !stt && i < nst; i++) ctl_bind(&e, i, &state[i]);
        for (int j = 0; !stt && j < m; j++) { /* slice t of scanned input j */
            const mp_rtensor *x = &sc[j];
            if (ax[j] < 0 || ax[j] >= x->rank || x->dims[ax[j]] != T) {
                stt = mp_kfail(k, MP_ERR_SHAPE, "scanned input %d: bad axis or length", j);
                break;
            }
            size_t es = mp_kesize(x->dtype);
            int64_t outer, inner, at = rev[j] ? T - 1 - t : t;
            mp_kouter_inner(x->rank, x->dims, ax[j], &outer, &inner);
            free(slice[j]);
            slice[j] = malloc((size_t)(outer * inner) * es + 1);
            if (!slice[j]) {
                stt = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
                break;
            }
            for (int64_t a2 = 0; a2 < outer; a2++)
                memcpy((char *)slice[j] + (size_t)(a2 * inner) * es,
                       (const char *)x->data + (size_t)((a2 * T + at) * inner) * es, (size_t)inner * es);
            for (int d = 0, q = 0; d < x->rank; d++)
                if (d != ax[j]) sdims[j][q++] = x->dims[d];
            mp_rtensor sl = {slice[j], x->dtype, x->rank - 1, sdims[j], outer * inner};
            ctl_bind(&e, nst + j, &sl);
        }
        if (!stt) stt = ctl_env_run(k, &e);
        for (int i = 0; !stt && i < nst; i++) {
            const mp_rtensor *o = ctl_body_out(&e, i);
            stt = o ? ctl_own_copy(k, o, &sown[i], &state[i])
                    : mp_kfail(k, MP_ERR_UNSUPPORTED, "state %d has no value", i);
        }
        for (int i = 0; !stt && i < ns; i++) {
            const mp_rtensor *o = ctl_body_out(&e, nst + i);
            stt = o ? ctl_push(k, &stk[i], o) : mp_kfail(k, MP_ERR_UNSUPPORTED, "scan output %d has no value", i);
        }
        ctl_env_free(&e);
    }
    for (int j = 0; j < m && slice; j++) free(slice[j]);
    free(slice), free(sdims);
    return stt;
}

/* Batch b of t (leading dim) as a view. */
static mp_rtensor ctl_batch_view(const mp_rtensor *t, int64_t b) {
    int64_t per = t->dims[0] ? t->numel / t->dims[0] : 0;
    return (mp_rtensor){(char *)t->data + (size_t)(b * per) * mp_kesize(t->dtype), t->dtype, t->rank - 1, t->dims + 1, per};
}

/* Scan: N states then M scanned inputs; the body sees the states and one
 * slice of each scanned input (along its axis, in its direction) per
 * iteration; outputs: final states, then the stacked scan outputs.
 * Scan-8 has a leading batch dim on everything (and sequence_lens, input
 * 0): each batch row is scanned alone, along axis 1. */
static mp_status ctl_scan(mp_kctx *k) {
    const mp_graph *b = ctl_attr_graph(k->n, "body");
    if (!b) return mp_kfail(k, MP_ERR_FORMAT, "missing body");
    bool v8 = k->n->opset < 9;
    int first = v8 ? 1 : 0;
    int m = (int)mp_attr_i(k->n, "num_scan_inputs", 0), nst = k->n_in - first - m, ns = b->n_outputs - nst;
    if (m < 1 || m > 64 || nst < 0 || ns < 0) return mp_kfail(k, MP_ERR_SHAPE, "bad num_scan_inputs");
    const int64_t *iax, *idir, *oax, *odir;
    int niax = mp_attr_ints(k->n, "scan_input_axes", &iax);
    int nidir = mp_attr_ints(k->n, v8 ? "directions" : "scan_input_directions", &idir);
    int noax = mp_attr_ints(k->n, "scan_output_axes", &oax), nodir = mp_attr_ints(k->n, "scan_output_directions", &odir);
    int ax[64];
    bool rev[64];
    for (int j = 0; j < m; j++) {
        const mp_rtensor *x = &k->in[first + nst + j];
        ax[j] = v8 ? 0 : mp_axis(niax > j ? iax[j] : 0, x->rank);
        rev[j] = nidir > j && idir[j];
        if (ax[j] < 0) return mp_kfail(k, MP_ERR_SHAPE, "scan axis out of range");
    }
    if (v8 && mp_kin(k, 0)) return mp_kfail(k, MP_ERR_UNSUPPORTED, "Scan-8 with sequence_lens");
    int64_t B = v8 ? k->in[first + nst].dims[0] : 1;
    mp_rtensor *state = calloc((size_t)nst + 1, sizeof *state), *st_in = calloc((size_t)nst + 1, sizeof *st_in);
    mp_rtensor *sc_in = calloc((size_t)m + 1, sizeof *sc_in);
    void **sown = calloc((size_t)nst + 1, sizeof *sown);
    ctl_stack *stk = calloc((size_t)ns + 1, sizeof *stk);
    mp_status st = state && st_in && sc_in && sown && stk ? MP_OK : mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t bi = 0; !st && bi < B; bi++) {
        for (int i = 0; i < nst; i++) st_in[i] = v8 ? ctl_batch_view(&k->in[first + i], bi) : k->in[first + i];
        for (int j = 0; j < m; j++) sc_in[j] = v8 ? ctl_batch_view(&k->in[first + nst + j], bi) : k->in[first + nst + j];
        for (int i = 0; i < ns; i++) stk[i].used = 0, stk[i].count = 0;
        int64_t T = sc_in[0].dims[ax[0]];
        st = ctl_scan_steps(k, b, nst, m, st_in, sc_in, ax, rev, T, state, sown, stk);
        if (!v8) {
            for (int i = 0; !st && i < nst; i++) st = ctl_emit(k, i, &state[i]);
            for (int i = 0; !st && i < ns; i++)
                st = ctl_emit_stack(k, nst + i, &stk[i], noax > i ? (int)oax[i] : 0, nodir > i && odir[i]);
            break;
        }
        /* Scan-8: batch row bi of each output (planned [B, ...]) */
        for (int i = 0; !st && i < nst + ns; i++) {
            mp_rtensor *o = &k->out[i];
            if (k->n->out[i] < 0) continue;
            if (!o->data) {
                st = mp_kfail(k, MP_ERR_UNSUPPORTED, "Scan-8 output %d of unknown shape", i);
                break;
            }
            size_t es = mp_kesize(o->dtype);
            int64_t per = o->dims[0] ? o->numel / o->dims[0] : 0;
            const void *src = i < nst ? state[i].data : stk[i - nst].data;
            int64_t n = i < nst ? state[i].numel : (int64_t)(stk[i - nst].used / (es ? es : 1));
            if (n != per) {
                st = mp_kfail(k, MP_ERR_SHAPE, "Scan-8 output %d: body size differs", i);
                break;
            }
            if (i >= nst && nodir > i - nst && odir[i - nst]) { /* reversed steps */
                int64_t cnt = stk[i - nst].count, step = cnt ? per / cnt : 0;
                for (int64_t t = 0; t < cnt; t++)
                    memcpy((char *)o->data + (size_t)(bi * per + t * step) * es,
                           (const char *)src + (size_t)((cnt - 1 - t) * step) * es, (size_t)step * es);
            } else {
                mp_kconvert((char *)o->data + (size_t)(bi * per) * es, o->dtype, src,
                            i < nst ? state[i].dtype : stk[i - nst].dtype, per);
            }
        }
    }
    for (int i = 0; i < nst && sown; i++) free(sown[i]);
    for (int i = 0; i < ns && stk; i++) free(stk[i].data);
    free(state), free(st_in), free(sc_in), free(sown), free(stk);
    return st;
}

const mp_op mp_ops_control[] = {
    {"", "If", 1, mp__if_infer, mp__if_cost, 0, 0, NULL, ctl_if},
    {"", "Loop", 1, mp__loop_infer, mp__loop_cost, 0, 0, NULL, ctl_loop},
    {"", "Scan", 8, mp__scan8_infer, mp__scan8_cost, 0, 0, NULL, ctl_scan},
    {"", "Scan", 9, mp__scan_infer, mp__scan_cost, 0, 0, NULL, ctl_scan},
};
const int mp_ops_control_count = (int)MP_ARRAY_LEN(mp_ops_control);
