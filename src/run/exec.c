/* The executor of the measured run (mp_exec_*; not the training planner,
 * which is src/plan/). Its set-up is made once from the shaped main
 * graph (the "plan" of a run, below): which nodes run (those whose outputs are known at plan time are
 * folded away), the kernel of each (oneDNN's first, else the operator's
 * portable one), fused groups (mp_kfuse), the lifetimes of the activations
 * packed into one arena, and the weights. A run then calls each step's
 * kernel in order and allocates nothing (except outputs whose shape
 * depends on the data, mp_kout_alloc). */
#include "run/run.h"
#include "analyze/analyze.h"
#include "run/dnnl.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MP__ALIGN 64

static size_t mp__round(size_t n) { return (n + MP__ALIGN - 1) & ~(size_t)(MP__ALIGN - 1); }

/* Present tensors never have NULL data (NULL means an omitted input):
 * empty ones point here. */
static _Alignas(64) uint8_t mp__empty[64];

#define RUN_OPTIONS_V1 MP_FIELD_END(mp_run_options, keep_timestamps)

static void run_defaults(mp_run_options *o) {
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->warmup = 3;
    o->iters = 20;
    o->threads = 0;
    o->fuse = 1;
    o->node_timing = 1;
    o->seed = 1;
    o->progress = 1;
}

mp_status mp_run_options_init(mp_run_options *o, size_t size) {
    mp_run_options d;
    run_defaults(&d);
    return mp_opts_init(o, size, &d, sizeof d, RUN_OPTIONS_V1, "mp_run_options");
}

static const char *mp__node_name(const mp_graph *g, int node) {
    const mp_node *n = &g->nodes[node];
    return n->name && n->name[0] ? n->name : n->op;
}

/* How many readers value v has (graph.h's consumer index: each input
 * slot, and a node whose body reads it). */
static int mp__readers(const mp_graph *g, int v) {
    int n;
    mp_uses(g, v, &n);
    return n;
}

/* whether a node's outputs after its first are read or are graph outputs
 * (a fused node may have only its first output in use) */
static bool mp__extra_outs_used(const mp_graph *g, const mp_node *n) {
    for (int o = 1; o < n->n_out; o++) {
        int v = n->out[o];
        if (v >= 0 && (mp__readers(g, v) || (g->values[v].flags & MP_VAL_OUTPUT))) return true;
    }
    return false;
}

/* Room in a step for `more_in` more inputs and `more_nodes` more nodes. */
static mp_status mp__step_room(mp_step *s, int more_in, int more_nodes) {
    int need = s->n_in + more_in;
    if (need > s->cap_in) {
        int cap = need + 4;
        mp_rtensor *in = realloc(s->in, sizeof *in * (size_t)cap);
        if (!in) return mp_error(MP_ERR_NOMEM, "out of memory");
        s->in = in;
        int *iv = realloc(s->in_v, sizeof *iv * (size_t)cap);
        if (!iv) return mp_error(MP_ERR_NOMEM, "out of memory");
        s->in_v = iv;
        s->cap_in = cap;
    }
    int *ns = realloc(s->nodes, sizeof *ns * (size_t)(s->n_nodes + more_nodes));
    if (!ns) return mp_error(MP_ERR_NOMEM, "out of memory");
    s->nodes = ns;
    return MP_OK;
}

/* ---- the kernel-side API (ops.h) ---- */
static mp_status mp__need(mp_exec *pl, int v);

/* These are the executor's side of mp_kexec (ops.h): kernels reach them
 * through the context the planner hands them (mp__exec_services, below). */

/* A refusal to fuse: not a failure of the plan (the kernel carries on
 * alone), but said like every other status. */
static mp_status mp__nofuse(const mp_kctx *k, int node) {
    const mp_graph *g = k->g;
    const char *nm = g && node >= 0 && node < g->n_nodes && g->nodes[node].name ? g->nodes[node].name : "?";
    return mp_error(MP_ERR_USAGE, "node '%s' cannot be absorbed by '%s' (not the sole consumer of its "
                    "output, already planned, or an input not ready)", nm,
                    k->n && k->n->name ? k->n->name : "?");
}

static mp_status mp__x_fuse(mp_kctx *k, int node) {
    mp_exec *pl = k->ex;
    if (!pl || !k->fuse) return mp__nofuse(k, node);
    mp_graph *g = pl->g;
    if (node < 0 || node >= g->n_nodes || pl->step_of[node] >= 0 || pl->folded[node])
        return mp__nofuse(k, node);
    mp_step *s = &pl->steps[pl->cur];
    if (&s->k != k || s->n_out < 1) return mp__nofuse(k, node);
    int mid = s->out_v[0];
    if (mid < 0) return mp__nofuse(k, node);
    mp_rval *mv = &pl->vals[mid];
    if (mp__readers(g, mid) != 1 || (g->values[mid].flags & MP_VAL_OUTPUT)) return mp__nofuse(k, node);
    const mp_node *n = &g->nodes[node];
    int uses = 0;
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] == mid) uses++;
    if (uses != 1 || n->n_out < 1 || n->out[0] < 0 || n->n_sub) return mp__nofuse(k, node);
    /* the absorbed node's other outputs must be unused */
    if (mp__extra_outs_used(g, n)) return mp__nofuse(k, node);
    /* its other inputs must exist when the group runs: constants, inputs,
     * or outputs of steps before this one */
    for (int i = 0; i < n->n_in; i++) {
        int v = n->in[i];
        if (v < 0 || v == mid) continue;
        if (mp__need(pl, v) != MP_OK) {
            mp_error_clear();
            return mp__nofuse(k, node);
        }
        int kd = pl->vals[v].kind;
        if (kd == MP_RV_CONST || kd == MP_RV_INPUT || kd == MP_RV_OUTER) continue;
        int prod = g->values[v].producer;
        if (prod < 0 || pl->step_of[prod] < 0 || pl->step_of[prod] >= pl->cur) return mp__nofuse(k, node);
    }
    int out = n->out[0];
    if (!mp_shape_known(&g->values[out])) return mp__nofuse(k, node);
    if (mp__step_room(s, n->n_in, 1) != MP_OK) return MP_ERR_NOMEM;
    s->nodes[s->n_nodes++] = node;
    for (int i = 0; i < n->n_in; i++) {
        int v = n->in[i];
        if (v == mid) continue;
        s->in_v[s->n_in] = v;
        if (v >= 0)
            s->in[s->n_in] = pl->vals[v].rt;
        else
            memset(&s->in[s->n_in], 0, sizeof s->in[0]);
        s->n_in++;
    }
    mv->kind = MP_RV_FUSED;
    pl->vals[out].kind = MP_RV_ACT;
    s->out_v[0] = out;
    s->out[0] = pl->vals[out].rt;
    s->out[0].data = NULL;
    pl->step_of[node] = pl->cur;
    s->k.in = s->in;
    s->k.n_in = s->n_in;
    s->k.out = s->out;
    return MP_OK;
}

/* Whether value v is made inside the group being formed: the step's
 * output 0 (mid) or output 0 of nodes[0..upto). */
static bool mp__made_in(const mp_graph *g, int v, int mid, const int *nodes, int upto) {
    if (v < 0) return false;
    if (v == mid) return true;
    for (int j = 0; j < upto; j++)
        if (g->nodes[nodes[j]].out[0] == v) return true;
    return false;
}

static mp_status mp__x_fuse_nodes(mp_kctx *k, const int *nodes, int n) {
    mp_exec *pl = k->ex;
    if (!pl || !k->fuse || n < 1 || n > 64) return mp__nofuse(k, n >= 1 ? nodes[0] : -1);
    mp_graph *g = pl->g;
    mp_step *s = &pl->steps[pl->cur];
    if (&s->k != k || s->n_out < 1 || s->out_v[0] < 0) return mp__nofuse(k, nodes[0]);
    int mid = s->out_v[0];
    int extra = 0;
    for (int i = 0; i < n; i++) {
        int node = nodes[i];
        if (node < 0 || node >= g->n_nodes || pl->step_of[node] >= 0 || pl->folded[node])
            return mp__nofuse(k, node);
        for (int j = 0; j < i; j++)
            if (nodes[j] == node) return mp__nofuse(k, node);
        const mp_node *nd = &g->nodes[node];
        if (nd->n_out < 1 || nd->out[0] < 0 || nd->n_sub || !mp_shape_known(&g->values[nd->out[0]]))
            return mp__nofuse(k, node);
        if (mp__extra_outs_used(g, nd)) return mp__nofuse(k, node);
        /* every input: made earlier in the group, or existing before */
        for (int j = 0; j < nd->n_in; j++) {
            int v = nd->in[j];
            if (v < 0 || mp__made_in(g, v, mid, nodes, i)) continue;
            if (mp__need(pl, v) != MP_OK) {
                mp_error_clear();
                return mp__nofuse(k, node);
            }
            int kd = pl->vals[v].kind;
            extra++;
            if (kd == MP_RV_CONST || kd == MP_RV_INPUT || kd == MP_RV_OUTER) continue;
            int prod = g->values[v].producer;
            if (prod < 0 || pl->step_of[prod] < 0 || pl->step_of[prod] >= pl->cur) return mp__nofuse(k, node);
        }
    }
    /* the values made inside (all but the last output) are read only
     * inside: count their reads by the group's nodes */
    for (int i = -1; i < n - 1; i++) {
        int v = i < 0 ? mid : g->nodes[nodes[i]].out[0];
        if (g->values[v].flags & MP_VAL_OUTPUT) return mp__nofuse(k, nodes[i < 0 ? 0 : i]);
        int uses = 0;
        for (int j = 0; j < n; j++) {
            const mp_node *nd = &g->nodes[nodes[j]];
            for (int q = 0; q < nd->n_in; q++)
                if (nd->in[q] == v) uses++;
        }
        if (uses != mp__readers(g, v) || uses == 0) return mp__nofuse(k, nodes[i < 0 ? 0 : i]);
    }
    /* grow the lists, then commit */
    if (mp__step_room(s, extra, n) != MP_OK) return MP_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        const mp_node *nd = &g->nodes[nodes[i]];
        s->nodes[s->n_nodes++] = nodes[i];
        for (int j = 0; j < nd->n_in; j++) {
            int v = nd->in[j];
            if (v < 0 || mp__made_in(g, v, mid, nodes, i)) continue;
            s->in_v[s->n_in] = v;
            s->in[s->n_in] = pl->vals[v].rt;
            s->n_in++;
        }
        if (i < n - 1) pl->vals[nd->out[0]].kind = MP_RV_FUSED;
        pl->step_of[nodes[i]] = pl->cur;
    }
    int out = g->nodes[nodes[n - 1]].out[0];
    pl->vals[mid].kind = MP_RV_FUSED;
    pl->vals[out].kind = MP_RV_ACT;
    s->out_v[0] = out;
    s->out[0] = pl->vals[out].rt;
    s->out[0].data = NULL;
    s->k.in = s->in;
    s->k.n_in = s->n_in;
    s->k.out = s->out;
    return MP_OK;
}

static const mp_rtensor *mp__x_value(const mp_kctx *k, int v) {
    mp_exec *pl = k ? k->ex : NULL;
    if (!pl || v < 0 || v >= pl->g->n_values) return NULL;
    mp_rval *rv = &pl->vals[v];
    if (rv->kind == MP_RV_UNUSED && mp__need(pl, v) != MP_OK) mp_error_clear();
    return &rv->rt;
}

static const float *mp__x_input_f32(mp_kctx *k, int i) {
    mp_exec *pl = k ? k->ex : NULL;
    if (!pl || i < 0 || i >= k->n_in || !k->in[i].data) return NULL;
    const mp_step *s = (const mp_step *)(const void *)((const char *)k - offsetof(mp_step, k));
    int v = s->in_v[i];
    if (v < 0 || pl->vals[v].kind != MP_RV_CONST) return NULL;
    mp_rval *rv = &pl->vals[v];
    int dt = rv->rt.dtype;
    if (dt == MP_DT_FLOAT) return rv->rt.data;
    if (dt != MP_DT_FLOAT16 && dt != MP_DT_BFLOAT16) return NULL;
    if (!rv->f32) {
        int64_t n = rv->rt.numel;
        float *f = malloc(sizeof *f * (size_t)(n > 0 ? n : 1));
        if (!f) return NULL;
        const uint16_t *h = rv->rt.data;
        for (int64_t j = 0; j < n; j++) {
            if (dt == MP_DT_FLOAT16) {
                f[j] = mp_half_to_float(h[j]);
            } else {
                f[j] = mp_bf16_to_float(h[j]);
            }
        }
        rv->f32 = f;
        pl->const_bytes += sizeof *f * (size_t)(n > 0 ? n : 1);
    }
    return rv->f32;
}

static mp_status mp__dyn_place(mp_exec *pl, mp_rval *rv, int rank, const int64_t *dims, int64_t numel,
                               uint64_t bytes);

static mp_status mp__x_out_alloc(mp_kctx *k, int i, int rank, const int64_t *dims) {
    mp_exec *pl = k->ex;
    if (!pl) return mp_error(MP_ERR_USAGE, "mp_kout_alloc outside a plan");
    mp_step *s = &pl->steps[pl->cur];
    if (i < 0 || i >= s->n_out || s->out_v[i] < 0 || rank < 0 || rank > MP_MAX_RANK)
        return mp_error(MP_ERR_USAGE, "node '%s': mp_kout_alloc of output %d", mp__node_name(pl->g, s->node), i);
    mp_rval *rv = &pl->vals[s->out_v[i]];
    if (rv->kind != MP_RV_DYN)
        return mp_error(MP_ERR_USAGE, "node '%s': output %d has a planned shape", mp__node_name(pl->g, s->node), i);
    int64_t numel = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0 || __builtin_mul_overflow(numel, dims[d], &numel))
            return mp_error(MP_ERR_SHAPE, "node '%s': output %d: bad dim", mp__node_name(pl->g, s->node), i);
    }
    uint64_t bytes = mp_dtype_bytes(rv->rt.dtype, numel);
    if (bytes > ((uint64_t)1 << 40))
        return mp_error(MP_ERR_LIMIT, "node '%s': output %d would take %llu bytes",
                        mp__node_name(pl->g, s->node), i, (unsigned long long)bytes);
    if (pl->o.max_memory > 0 &&
        (int64_t)(pl->arena_bytes + pl->const_bytes + pl->input_bytes + pl->dyn_bytes + bytes) > pl->o.max_memory)
        return mp_error(MP_ERR_LIMIT, "node '%s': output %d (%llu bytes, shape known only at run time) "
                        "would take the run past --max-memory %lld bytes",
                        mp__node_name(pl->g, s->node), i, (unsigned long long)bytes,
                        (long long)pl->o.max_memory);
    mp_status st = mp__dyn_place(pl, rv, rank, dims, numel, bytes);
    if (st) return st;
    k->out[i] = rv->rt;
    return MP_OK;
}

/* A buffer of `bytes` for DYN value rv, shaped rank/dims (numel): its own,
 * grown when too small (the growth counts in the run's memory). */
static mp_status mp__dyn_place(mp_exec *pl, mp_rval *rv, int rank, const int64_t *dims, int64_t numel,
                               uint64_t bytes) {
    if (!rv->dyn_dims) {
        rv->dyn_dims = calloc(MP_MAX_RANK + 1, sizeof *rv->dyn_dims);
        if (!rv->dyn_dims) return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    if (bytes > rv->own_cap) {
        void *b = NULL;
        if (posix_memalign(&b, MP__ALIGN, mp__round((size_t)bytes))) return mp_error(MP_ERR_NOMEM, "out of memory");
        free(rv->own);
        pl->dyn_bytes += mp__round((size_t)bytes) - rv->own_cap;
        rv->own = b;
        rv->own_cap = mp__round((size_t)bytes);
    }
    if (rank) memcpy(rv->dyn_dims, dims, sizeof *dims * (size_t)rank);
    rv->rt.rank = rank;
    rv->rt.dims = rv->dyn_dims;
    rv->rt.numel = numel;
    rv->rt.data = bytes ? rv->own : mp__empty;
    return MP_OK;
}

mp_status mp_subexec_set_input(mp_exec *b, int i, const mp_rtensor *src) {
    if (i < 0 || i >= b->g->n_inputs) return MP_OK;
    mp_rval *rv = &b->vals[b->g->inputs[i]];
    if (rv->kind != MP_RV_DYN) return MP_OK;
    const char *name = b->g->values[b->g->inputs[i]].name;
    if (src->rank < 0 || src->rank > MP_MAX_RANK || src->dtype != rv->rt.dtype)
        return mp_error(MP_ERR_SHAPE, "body input '%s': %s of rank %d given, %s planned", name,
                        mp_dtype_name(src->dtype), src->rank, mp_dtype_name(rv->rt.dtype));
    uint64_t bytes = mp_dtype_bytes(src->dtype, src->numel);
    if (bytes > ((uint64_t)1 << 40))
        return mp_error(MP_ERR_LIMIT, "body input '%s' would take %llu bytes", name, (unsigned long long)bytes);
    const void *from = src->data;
    if (from && from == rv->own) return MP_OK;   /* the body's own output fed back: already there */
    mp_status st = mp__dyn_place(b, rv, src->rank, src->dims, src->numel, bytes);
    if (st) return st;
    if (bytes && from) memmove(rv->rt.data, from, (size_t)bytes);
    return MP_OK;
}

/* ---- thread fan-out ---- */
static _Thread_local int mp__in_parallel;

typedef struct {
    mp_range_fn fn;
    void *arg;
} mp__par;

static void mp__x_parallel(mp_kctx *k, int64_t n, mp_range_fn fn, void *arg) {
    if (n <= 0) return;
    mp_exec *pl = k ? k->ex : NULL;
    if (!pl || !pl->pool || pl->threads <= 1 || n < 2 || mp__in_parallel) {
        fn(arg, 0, n);
        return;
    }
    mp__in_parallel = 1;
    mp_pool_run(pl->pool, n, fn, arg);
    mp__in_parallel = 0;
}

static void mp__x_share(mp_kctx *k, int i) {
    if (!k || !k->ex || i < 0 || i >= k->n_in) return;
    mp_step *s = (mp_step *)(void *)((char *)k - offsetof(mp_step, k));
    s->share_in = i;
}

static const mp_kexec mp__exec_services = {
    .out_alloc = mp__x_out_alloc,
    .share = mp__x_share,
    .parallel = mp__x_parallel,
    .fuse = mp__x_fuse,
    .fuse_nodes = mp__x_fuse_nodes,
    .value = mp__x_value,
    .input_f32 = mp__x_input_f32,
};

/* ---- planning ---- */

static bool mp__fully_known(const mp_value *v) {
    if (!mp_shape_known(v)) return false;
    int64_t n = mp_value_numel(v);
    return n >= 0 && v->kn == n && (v->iv || v->fv || n == 0);
}

static const mp_tensor *mp__constant_tensor(const mp_node *n) {
    if (!mp_streq(n->op, "Constant") || n->domain[0]) return NULL;
    const mp_attr *a = mp_node_attr(n, "value");
    return a && a->type == MP_ATTR_TENSOR ? a->t : NULL;
}

/* The rtensor of value v as planned (data set later). */
static void mp__rt_init(mp_exec *pl, int v) {
    mp_value *val = &pl->g->values[v];
    mp_rval *rv = &pl->vals[v];
    rv->rt.dtype = val->dtype;
    rv->rt.rank = val->rank;
    rv->rt.dims = val->dims;
    rv->rt.numel = mp_value_numel(val);
    rv->bytes = rv->rt.numel > 0 ? (size_t)mp_dtype_bytes(val->dtype, rv->rt.numel) : 0;
}

static mp_status mp__own(mp_exec *pl, int v) {
    mp_rval *rv = &pl->vals[v];
    if (rv->bytes == 0) {
        rv->rt.data = mp__empty;
        return MP_OK;
    }
    void *b = NULL;
    if (posix_memalign(&b, MP__ALIGN, mp__round(rv->bytes)))
        return mp_error(MP_ERR_NOMEM, "value '%s': out of memory (%zu bytes)", pl->g->values[v].name,
                        rv->bytes);
    memset(b, 0, mp__round(rv->bytes));
    rv->own = b;
    rv->own_cap = mp__round(rv->bytes);
    rv->rt.data = b;
    return MP_OK;
}

/* Does every present input of node n hold a constant? */
static bool mp__inputs_const(const mp_exec *pl, const mp_node *n) {
    int present = 0;
    for (int i = 0; i < n->n_in; i++) {
        int v = n->in[i];
        if (v < 0) continue;
        present++;
        if (pl->vals[v].kind != MP_RV_CONST) return false;
    }
    return present > 0 && n->n_sub == 0;
}

static mp_status mp__no_kernel(mp_exec *pl, const mp_node *n) {
    return mp_error(MP_ERR_UNSUPPORTED, "%s: node '%s' (%s%s%s): no kernel for this operator, the "
                    "model cannot run here", pl->m->path ? pl->m->path : "model",
                    n->name && n->name[0] ? n->name : "?", n->domain, n->domain[0] ? "." : "", n->op);
}

bool mp_run_portable_only;

static const mp_kernel *mp__pick(const mp_graph *g, const mp_node *n, mp_kernel *portable) {
    const mp_kernel *kern = mp_run_portable_only ? NULL : mp_dnnl_kernel(g, n);
    if (kern) return kern;
    /* If, Loop, Scan: the executor's own, which run their bodies through
     * plans (oneDNN kernels, fusion, shapes known only at run time) */
    if ((kern = mp_control_kernel(n))) return kern;
    if (!n->desc || !n->desc->run) return NULL;
    portable->name = "portable";
    portable->prepare = n->desc->prepare;
    portable->run = n->desc->run;
    portable->release = n->desc->release;
    return portable;
}

static mp_status mp__step_init(mp_exec *pl, mp_step *s, int node, const mp_kernel *kern) {
    const mp_node *n = &pl->g->nodes[node];
    s->node = node;
    s->kern = kern;
    s->module = n->module;
    s->share_in = -1;
    s->nodes = malloc(sizeof *s->nodes);
    s->cap_in = n->n_in + 1;
    s->in = calloc((size_t)s->cap_in, sizeof *s->in);
    s->in_v = calloc((size_t)s->cap_in, sizeof *s->in_v);
    s->out = calloc((size_t)n->n_out + 1, sizeof *s->out);
    s->out_v = calloc((size_t)n->n_out + 1, sizeof *s->out_v);
    if (!s->nodes || !s->in || !s->in_v || !s->out || !s->out_v) return mp_error(MP_ERR_NOMEM, "out of memory");
    s->nodes[0] = node;
    s->n_nodes = 1;
    s->n_in = n->n_in;
    s->n_out = n->n_out;
    for (int i = 0; i < n->n_in; i++) {
        int v = n->in[i];
        s->in_v[i] = v;
        if (v >= 0) {
            s->in[i] = pl->vals[v].rt;
            if (pl->vals[v].kind != MP_RV_CONST) s->in[i].data = NULL;
        }
    }
    for (int i = 0; i < n->n_out; i++) {
        int v = n->out[i];
        s->out_v[i] = v;
        if (v >= 0) {
            s->out[i] = pl->vals[v].rt;
            s->out[i].data = NULL;
        }
    }
    s->k.n = n;
    s->k.g = pl->g;
    s->k.ex = pl;
    s->k.exec = &mp__exec_services;
    s->k.n_in = s->n_in;
    s->k.n_out = s->n_out;
    s->k.in = s->in;
    s->k.out = s->out;
    s->k.threads = pl->threads;
    s->k.fuse = pl->o.fuse != 0;
    return MP_OK;
}

static void mp__step_free(mp_step *s) {
    if (s->kern && s->kern->release && s->k.state) s->kern->release(s->k.state);
    s->k.state = NULL;
    free(s->nodes);
    free(s->in);
    free(s->in_v);
    free(s->out);
    free(s->out_v);
    free((char *)s->group);
}

static mp_status mp__reinfer(mp_exec *pl, mp_step *s);

/* Run node `node` once now, all inputs constant: its outputs become
 * constants held by the plan. */
static mp_status mp__fold_run(mp_exec *pl, int node, const mp_kernel *kern) {
    const mp_node *n = &pl->g->nodes[node];
    for (int i = 0; i < n->n_out; i++) {
        int v = n->out[i];
        if (v < 0) continue;
        if (!mp_shape_known(&pl->g->values[v])) {
            pl->vals[v].kind = MP_RV_DYN;
            continue;
        }
        mp_status st = mp__own(pl, v);
        if (st) return st;
        pl->vals[v].kind = MP_RV_CONST;
        pl->const_bytes += pl->vals[v].own_cap;
    }
    mp_step s;
    memset(&s, 0, sizeof s);
    mp_status st = mp__step_init(pl, &s, node, kern);
    for (int i = 0; st == MP_OK && i < n->n_out; i++)
        if (s.out_v[i] >= 0) s.out[i].data = pl->vals[s.out_v[i]].rt.data;
    s.k.fuse = false;
    s.k.fold = true; /* its output is a constant any later kernel reads as plain */
    /* the step lives on the stack: the kernel reaches the plan through
     * k.ex, and mp_kout_alloc finds it at steps[cur] */
    mp_step *saved = pl->steps;
    int saved_cur = pl->cur;
    pl->steps = &s;
    pl->cur = 0;
    size_t scratch = 0;
    void *sb = NULL;
    if (!st && kern->prepare) st = kern->prepare(&s.k, &scratch);
    if (!st && scratch) {
        if (posix_memalign(&sb, MP__ALIGN, mp__round(scratch))) st = mp_error(MP_ERR_NOMEM, "out of memory");
        s.k.scratch = sb;
    }
    /* an output the static inference could not size (an Expand to a shape
     * computed by an operator whose contents it does not follow): its
     * shape rule again, on the constants' contents */
    for (int i = 0; !st && i < n->n_out; i++)
        if (s.out_v[i] >= 0 && pl->vals[s.out_v[i]].kind == MP_RV_DYN) {
            st = mp__reinfer(pl, &s);
            break;
        }
    if (!st) st = kern->run(&s.k);
    for (int i = 0; !st && i < n->n_out; i++) {
        int v = s.out_v[i];
        if (v >= 0 && pl->vals[v].kind == MP_RV_DYN) {
            if (!s.out[i].data) {
                st = mp_error(MP_ERR_UNSUPPORTED, "node '%s': output %d has no shape", mp__node_name(pl->g, node), i);
                break;
            }
            pl->vals[v].kind = MP_RV_CONST; /* keeps own and dyn_dims */
        }
    }
    pl->steps = saved;
    pl->cur = saved_cur;
    free(sb);
    mp__step_free(&s);
    return st;
}

/* Which values are constant, which nodes are folded. */
static mp_status mp__classify(mp_exec *pl) {
    mp_graph *g = pl->g;
    for (int v = 0; v < g->n_values; v++) {
        mp_value *val = &g->values[v];
        mp_rval *rv = &pl->vals[v];
        mp__rt_init(pl, v);
        /* kernels multiply dims freely (outer x inner): an empty tensor
         * whose other dims multiply past 2^50 is refused here, once */
        if (mp_shape_known(val)) {
            int64_t prod = 1;
            for (int d = 0; d < val->rank; d++)
                if (__builtin_mul_overflow(prod, val->dims[d] > 0 ? val->dims[d] : 1, &prod) ||
                    prod > (INT64_C(1) << 50))
                    return mp_error(MP_ERR_LIMIT, "%s: value '%s': its dims multiply past 2^50: too "
                                    "large to run", pl->m->path ? pl->m->path : "model", val->name);
        }
        if ((val->flags & MP_VAL_OUTER) && pl->parent) {
            mp_exec *up = pl->parent;
            if (val->outer < 0 || val->outer >= up->g->n_values)
                return mp_error(MP_ERR_FORMAT, "value '%s' refers to no value of the enclosing graph",
                                val->name);
            const mp_rval *src = &up->vals[val->outer];
            rv->rt = src->rt;
            rv->bytes = src->bytes;
            rv->kind = src->kind == MP_RV_CONST ? MP_RV_CONST : MP_RV_OUTER;
            continue;
        }
        if (val->flags & MP_VAL_INPUT) {
            rv->kind = MP_RV_INPUT;
            if (!mp_shape_known(val) && pl->parent && (val->rank >= 0 || (val->flags & MP_VAL_SEQUENCE))) {
                /* a body's input whose shape changes from pass to pass
                 * (a Loop's carried list that grows, a sequence it fills):
                 * given at each pass (mp_subexec_set_input), its readers
                 * sized at run time */
                rv->kind = MP_RV_DYN;
                rv->rt.data = NULL;
                continue;
            }
            if (!mp_shape_known(val))
                return mp_error(MP_ERR_USAGE, "%s: input '%s' has unknown dims: give them with --dim "
                                "or --input before a run", pl->m->path ? pl->m->path : "model",
                                val->name);
            if (mp_dtype_bytes(val->dtype, 1) == 0 && mp_value_numel(val) > 0)
                return mp_error(MP_ERR_UNSUPPORTED, "%s: input '%s' is of type %s, whose elements have no size "
                                "here: it cannot be given data to run", pl->m->path ? pl->m->path : "model",
                                val->name, mp_dtype_name(val->dtype));
        }
    }
    /* readers: the graph's consumer index (a body reading a value counts
     * its node, so such a value is never fused away) */
    if (!g->use_start) return mp_graph_index(g);
    return MP_OK;
}

/* A value read by a step: make sure constants are loaded. */
static mp_status mp__need(mp_exec *pl, int v) {
    mp_rval *rv = &pl->vals[v];
    mp_value *val = &pl->g->values[v];
    if (rv->kind != MP_RV_UNUSED) return MP_OK;
    if (mp__fully_known(val)) return mp_run_known(pl, v);
    if ((val->flags & MP_VAL_INIT) && val->init) return mp_run_load_tensor(pl, v, val->init);
    if (val->producer >= 0) return MP_OK; /* its producer's step gives it */
    return mp_error(MP_ERR_UNSUPPORTED, "%s: value '%s' is read but nothing gives it a value",
                    pl->m->path ? pl->m->path : "model", val->name);
}

/* Walk the order: fold, pick kernels, prepare (which may fuse). */
/* First pass, in order: nodes whose outputs are known (shape arithmetic,
 * Constant) and nodes whose inputs are all constant (a weight transposed,
 * dequantized, an Identity of an initializer) are done now, once. Done
 * before any kernel is prepared, so that prepare sees every constant (a
 * Conv folding a BatchNormalization whose scales come through Identity
 * nodes later in the order). */
static mp_status mp__fold_pass(mp_exec *pl) {
    mp_graph *g = pl->g;
    for (int oi = 0; oi < g->n_nodes; oi++) {
        int node = g->order ? g->order[oi] : oi;
        const mp_node *n = &g->nodes[node];
        mp_status st;
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] >= 0 && (st = mp__need(pl, n->in[i]))) return st;
        /* what its bodies read from this graph is needed like an input (an
         * initializer read only inside an If's branch was never loaded:
         * the branch read a NULL buffer) */
        for (int b = 0; b < n->n_sub; b++) {
            const mp_graph *sg = n->sub[b];
            for (int u = 0; sg && u < sg->n_values; u++) {
                int w = sg->values[u].outer;
                if ((sg->values[u].flags & MP_VAL_OUTER) && w >= 0 && w < g->n_values && (st = mp__need(pl, w)))
                    return st;
            }
        }
        bool all_known = n->n_out > 0, any_out = false;
        for (int i = 0; i < n->n_out; i++) {
            int v = n->out[i];
            if (v < 0) continue;
            any_out = true;
            if (!mp__fully_known(&g->values[v])) all_known = false;
        }
        if (!any_out) { /* no output at all: nothing to compute (kernels index output 0) */
            pl->folded[node] = true;
            pl->n_folded++;
            continue;
        }
        const mp_tensor *ct = mp__constant_tensor(n);
        if (all_known || ct) {
            for (int i = 0; i < n->n_out; i++) {
                int v = n->out[i];
                if (v < 0) continue;
                if (ct && i == 0 && !mp__fully_known(&g->values[v]))
                    st = mp_run_load_tensor(pl, v, ct);
                else
                    st = mp_run_known(pl, v);
                if (st) return st;
            }
            pl->folded[node] = true;
            pl->n_folded++;
            continue;
        }
        if (!mp__inputs_const(pl, n)) continue;
        mp_kernel portable;
        const mp_kernel *kern = mp__pick(g, n, &portable);
        if (!kern) continue; /* said by the step pass */
        st = mp__fold_run(pl, node, kern);
        if (st) return st;
        pl->folded[node] = true;
        pl->n_folded++;
    }
    return MP_OK;
}

/* Second pass, in order: pick kernels, prepare (which may fuse). */
static mp_status mp__build_steps(mp_exec *pl) {
    mp_graph *g = pl->g;
    mp_status st = mp__fold_pass(pl);
    if (st) return st;
    for (int oi = 0; oi < g->n_nodes; oi++) {
        int node = g->order ? g->order[oi] : oi;
        if (pl->step_of[node] >= 0 || pl->folded[node]) continue; /* absorbed, or done */
        const mp_node *n = &g->nodes[node];
        mp_kernel *portable = malloc(sizeof *portable);
        if (!portable) return mp_error(MP_ERR_NOMEM, "out of memory");
        const mp_kernel *kern = mp__pick(g, n, portable);
        if (kern != portable) free(portable);
        if (!kern) return mp__no_kernel(pl, n);
        /* a step */
        for (int i = 0; i < n->n_out; i++) {
            int v = n->out[i];
            if (v < 0) continue;
            pl->vals[v].kind = mp_shape_known(&g->values[v]) ? MP_RV_ACT : MP_RV_DYN;
        }
        mp_step *s = &pl->steps[pl->n_steps];
        memset(s, 0, sizeof *s);
        pl->cur = pl->n_steps;
        pl->n_steps++;
        pl->step_of[node] = pl->cur;
        st = mp__step_init(pl, s, node, kern);
        if (kern == portable) s->kern = portable; /* freed with the step */
        if (st) return st;
        if (kern->prepare) {
            st = kern->prepare(&s->k, &s->scratch);
            if (st) return st;
        }
        if (s->scratch > pl->scratch_bytes) pl->scratch_bytes = s->scratch;
        for (int i = 0; i < s->n_in; i++)
            if (s->in_v[i] >= 0 &&
                (pl->vals[s->in_v[i]].kind == MP_RV_DYN || pl->vals[s->in_v[i]].kind == MP_RV_OUTER))
                s->dyn = true;
        for (int i = 0; i < s->n_out; i++)
            if (s->out_v[i] >= 0 && pl->vals[s->out_v[i]].kind == MP_RV_DYN) s->dyn = true;
        if (s->n_nodes > 1) {
            size_t len = 0;
            for (int j = 0; j < s->n_nodes; j++) len += strlen(g->nodes[s->nodes[j]].op) + 1;
            char *name = malloc(len + 1);
            if (!name) return mp_error(MP_ERR_NOMEM, "out of memory");
            name[0] = 0;
            for (int j = 0; j < s->n_nodes; j++) {
                if (j) strcat(name, "+");
                strcat(name, g->nodes[s->nodes[j]].op);
            }
            s->group = name;
        }
    }
    return MP_OK;
}

/* Liveness and the arena: each ACT value lives from the step producing it
 * to the last step reading it (graph outputs to the end); values whose
 * lives do not overlap share bytes. Largest first, first fit. */
typedef struct {
    int v;
    size_t bytes;
} mp__slot;

static int mp__slot_cmp(const void *a, const void *b) {
    const mp__slot *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->v - y->v;
}

typedef struct {
    size_t off, end;
} mp__iv;

static int mp__iv_cmp(const void *a, const void *b) {
    const mp__iv *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* A step that only gives its input's bytes another shape (Reshape,
 * Flatten, Squeeze, Unsqueeze, Identity, and Dropout, which a measured run
 * (inference) passes through, on their portable kernel): its
 * output can share the input's bytes, the copy then skipped (the kernel
 * sees one buffer). Both activations of the arena, of one size. */
static bool mp__view_step(const mp_exec *pl, const mp_step *s) {
    if (s->n_nodes != 1 || !s->kern || !mp_streq(s->kern->name, "portable") || s->n_out < 1 || s->n_in < 1)
        return false;
    const mp_node *n = &pl->g->nodes[s->node];
    if (n->domain[0] && !mp_streq(n->domain, "ai.onnx")) return false;
    if (!mp_streq(n->op, "Reshape") && !mp_streq(n->op, "Flatten") && !mp_streq(n->op, "Squeeze") &&
        !mp_streq(n->op, "Unsqueeze") && !mp_streq(n->op, "Identity") && !mp_streq(n->op, "Dropout"))
        return false;
    for (int i = 1; i < s->n_out; i++) { /* Dropout's mask: unread */
        int w = s->out_v[i], nu = 0;
        if (w < 0) continue;
        mp_uses(pl->g, w, &nu);
        if (nu > 0 || (pl->g->values[w].flags & MP_VAL_OUTPUT)) return false;
    }
    int u = s->in_v[0], v = s->out_v[0];
    if (u < 0 || v < 0 || u == v) return false;
    const mp_rval *a = &pl->vals[u], *b = &pl->vals[v];
    return a->kind == MP_RV_ACT && b->kind == MP_RV_ACT && a->bytes == b->bytes && a->bytes > 0 &&
           a->rt.dtype == b->rt.dtype;
}

/* A step whose kernel asked for its output 0 to take input share_in's
 * bytes (mp_kshare), and may: both arena activations of one size, the
 * input (with every view of its bytes) read last by this step. */
static bool mp__share_step(const mp_exec *pl, const mp_step *s, int si, const int *root) {
    if (s->share_in < 0 || s->share_in >= s->n_in || s->n_out < 1) return false;
    int u = s->in_v[s->share_in], v = s->out_v[0];
    if (u < 0 || v < 0 || u == v || root[v] >= 0) return false;
    const mp_rval *a = &pl->vals[u], *b = &pl->vals[v];
    int r = root[u] >= 0 ? root[u] : u;
    if (a->kind != MP_RV_ACT || b->kind != MP_RV_ACT || a->bytes != b->bytes || a->bytes == 0 ||
        pl->vals[r].last != si || a->last != si)
        return false;
    /* no other input of the step reads those bytes (a Conv of x adding x
     * itself would overwrite its own input) */
    for (int j = 0; j < s->n_in; j++) {
        int w = s->in_v[j];
        if (j != s->share_in && w >= 0 && (w == u || w == r || (root[w] >= 0 && root[w] == r))) return false;
    }
    return true;
}

static mp_status mp__arena_layout(mp_exec *pl) {
    mp_graph *g = pl->g;
    for (int v = 0; v < g->n_values; v++) {
        pl->vals[v].def = -1;
        pl->vals[v].last = -1;
    }
    for (int si = 0; si < pl->n_steps; si++) {
        mp_step *s = &pl->steps[si];
        for (int i = 0; i < s->n_out; i++) {
            int v = s->out_v[i];
            if (v >= 0 && pl->vals[v].def < 0) pl->vals[v].def = si;
            if (v >= 0 && pl->vals[v].last < si) pl->vals[v].last = si;
        }
        for (int i = 0; i < s->n_in; i++) {
            int v = s->in_v[i];
            if (v >= 0) pl->vals[v].last = si;
        }
        /* values a subgraph reads from here live through this step */
        for (int j = 0; j < s->n_nodes; j++) {
            const mp_node *n = &g->nodes[s->nodes[j]];
            for (int b = 0; b < n->n_sub; b++) {
                const mp_graph *sg = n->sub[b];
                for (int u = 0; sg && u < sg->n_values; u++)
                    if ((sg->values[u].flags & MP_VAL_OUTER) && sg->values[u].outer >= 0 &&
                        sg->values[u].outer < g->n_values && pl->vals[sg->values[u].outer].last < si)
                        pl->vals[sg->values[u].outer].last = si;
            }
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        if (v >= 0) pl->vals[v].last = pl->n_steps;
    }
    int n = 0;
    mp__slot *sl = malloc(sizeof *sl * (size_t)(g->n_values + 1));
    mp__iv *ivs = malloc(sizeof *ivs * (size_t)(g->n_values + 1));
    int *root = malloc(sizeof *root * (size_t)(g->n_values + 1));
    if (!sl || !ivs || !root) {
        free(sl);
        free(ivs);
        free(root);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    /* views share their input's bytes: the root value lives as long as
     * the last of its views (steps in order: a view of a view has the
     * first one's root) */
    for (int v = 0; v < g->n_values; v++) root[v] = -1;
    pl->n_views = pl->n_shared = 0;
    for (int si = 0; si < pl->n_steps; si++) {
        const mp_step *s = &pl->steps[si];
        int u, v;
        if (mp__view_step(pl, s)) {
            u = s->in_v[0], v = s->out_v[0];
            pl->n_views++;
        } else if (mp__share_step(pl, s, si, root)) {
            /* the output takes an input's bytes: nothing reads them after */
            u = s->in_v[s->share_in], v = s->out_v[0];
            pl->n_shared++;
        } else {
            continue;
        }
        int r = root[u] >= 0 ? root[u] : u;
        root[v] = r;
        if (pl->vals[r].last < pl->vals[v].last) pl->vals[r].last = pl->vals[v].last;
    }
    for (int v = 0; v < g->n_values; v++) {
        mp_rval *rv = &pl->vals[v];
        if (rv->kind != MP_RV_ACT) continue;
        if (rv->def < 0) rv->def = rv->last < 0 ? 0 : rv->last;
        if (rv->last < rv->def) rv->last = rv->def;
        if (rv->bytes == 0 || root[v] >= 0) continue;
        sl[n].v = v;
        sl[n].bytes = mp__round(rv->bytes);
        n++;
    }
    qsort(sl, (size_t)n, sizeof *sl, mp__slot_cmp);
    size_t top = 0;
    for (int i = 0; i < n; i++) {
        mp_rval *rv = &pl->vals[sl[i].v];
        int m = 0;
        for (int j = 0; j < i; j++) {
            mp_rval *o = &pl->vals[sl[j].v];
            if (o->def <= rv->last && rv->def <= o->last) {
                ivs[m].off = o->off;
                ivs[m].end = o->off + sl[j].bytes;
                m++;
            }
        }
        qsort(ivs, (size_t)m, sizeof *ivs, mp__iv_cmp);
        size_t off = 0;
        for (int j = 0; j < m; j++) {
            if (ivs[j].off >= off + sl[i].bytes) break;
            if (ivs[j].end > off) off = ivs[j].end;
        }
        rv->off = off;
        if (off + sl[i].bytes > top) top = off + sl[i].bytes;
    }
    for (int v = 0; v < g->n_values; v++)
        if (root[v] >= 0) pl->vals[v].off = pl->vals[root[v]].off;
    free(sl);
    free(ivs);
    free(root);
    pl->arena_bytes = top;
    return MP_OK;
}

static mp_status mp__memory_check(const mp_exec *pl, size_t more, const char *when) {
    if (pl->o.max_memory <= 0) return MP_OK;
    uint64_t need = (uint64_t)pl->const_bytes + pl->input_bytes + pl->arena_bytes + pl->scratch_bytes + more;
    if (need > (uint64_t)pl->o.max_memory)
        return mp_error(MP_ERR_LIMIT, "%s: the run needs %llu bytes (%s) and --max-memory allows %lld: "
                        "refused before allocating", pl->m->path ? pl->m->path : "model",
                        (unsigned long long)need, when, (long long)pl->o.max_memory);
    return MP_OK;
}

/* Bytes the run will take at least, before anything is allocated: the
 * static peak of live activations (graph inputs included) and the weights
 * that are not used in place (absent, typed). */
static uint64_t mp__estimate(const mp_exec *pl) {
    const mp_graph *g = pl->g;
    uint64_t b = 0;
    for (int v = 0; v < g->n_values; v++) {
        const mp_value *val = &g->values[v];
        uint64_t by = mp_shape_known(val) ? mp_dtype_bytes(val->dtype, mp_value_numel(val)) : 0;
        if ((val->flags & MP_VAL_INIT) && val->init && val->init->loc != MP_DATA_RAW &&
                 val->init->loc != MP_DATA_EXTERNAL)
            b += by;
    }
    return b + pl->p->activation_peak_bytes;
}

static mp_status mp__bind(mp_exec *pl) {
    if (pl->arena_bytes) {
        void *a = NULL;
        if (posix_memalign(&a, MP__ALIGN, pl->arena_bytes))
            return mp_error(MP_ERR_NOMEM, "activation arena: out of memory (%zu bytes)", pl->arena_bytes);
        memset(a, 0, pl->arena_bytes);
        pl->arena = a;
    }
    if (pl->scratch_bytes) {
        void *a = NULL;
        if (posix_memalign(&a, MP__ALIGN, mp__round(pl->scratch_bytes)))
            return mp_error(MP_ERR_NOMEM, "kernel scratch: out of memory (%zu bytes)", pl->scratch_bytes);
        pl->scratch = a;
    }
    mp_graph *g = pl->g;
    for (int v = 0; v < g->n_values; v++) {
        mp_rval *rv = &pl->vals[v];
        if (rv->kind == MP_RV_ACT) rv->rt.data = rv->bytes ? pl->arena + rv->off : mp__empty;
    }
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        if (v < 0 || pl->vals[v].kind != MP_RV_INPUT || pl->vals[v].rt.data) continue;
        mp_status st = mp__own(pl, v);
        if (st) return st;
        pl->input_bytes += pl->vals[v].own_cap;
        if (!pl->parent) mp_run_random_input(pl, v); /* a body's inputs are set each run */
    }
    for (int si = 0; si < pl->n_steps; si++) {
        mp_step *s = &pl->steps[si];
        for (int i = 0; i < s->n_in; i++)
            if (s->in_v[i] >= 0) s->in[i] = pl->vals[s->in_v[i]].rt;
        for (int i = 0; i < s->n_out; i++)
            if (s->out_v[i] >= 0) s->out[i] = pl->vals[s->out_v[i]].rt;
        s->k.scratch = pl->scratch;
    }
    return MP_OK;
}

/* A plan of graph g: the main graph (parent NULL) or a control-flow body
 * (parent: the plan of the graph holding it; the body's inputs are set by
 * the control-flow kernel before each run, its outer values come from the
 * parent). */
static mp_status mp__exec_make(mp_profile *p, mp_graph *g, const mp_run_options *o, mp_exec *parent,
                               mp_exec **out) {
    *out = NULL;
    mp_exec *pl = calloc(1, sizeof *pl);
    if (!pl) return mp_error(MP_ERR_NOMEM, "out of memory");
    pl->p = p;
    pl->m = p->m;
    pl->g = g;
    pl->parent = parent;
    pl->o = *o;
    if (pl->o.warmup < 0 || pl->o.iters < 1 || pl->o.threads < 0) {
        mp_run_options bad = pl->o;
        free(pl);
        return mp_error(MP_ERR_USAGE, "run options: warmup %d, iters %d, threads %d (need warmup >= 0, "
                        "iters >= 1, threads >= 0)", bad.warmup, bad.iters, bad.threads);
    }
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    pl->threads = pl->o.threads > 0 ? pl->o.threads : (int)(nc > 0 ? nc : 1);
    pl->seed = pl->o.seed;
    pl->vals = calloc((size_t)g->n_values + 1, sizeof *pl->vals);
    pl->steps = calloc((size_t)g->n_nodes + 1, sizeof *pl->steps);
    pl->step_of = malloc(sizeof *pl->step_of * ((size_t)g->n_nodes + 1));
    pl->folded = calloc((size_t)g->n_nodes + 1, sizeof *pl->folded);
    mp_status st = MP_OK;
    if (!pl->vals || !pl->steps || !pl->step_of || !pl->folded) st = mp_error(MP_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < g->n_nodes; i++) pl->step_of[i] = -1;
    if (!st) st = mp__classify(pl);
    if (!st && !parent && pl->o.max_memory > 0 && mp__estimate(pl) > (uint64_t)pl->o.max_memory)
        st = mp_error(MP_ERR_LIMIT, "%s: the run needs at least %llu bytes (inputs, weight copies, "
                      "activations) and --max-memory allows %lld: refused before allocating",
                      pl->m->path ? pl->m->path : "model", (unsigned long long)mp__estimate(pl),
                      (long long)pl->o.max_memory);
    if (!st && parent) pl->pool = parent->pool; /* shared, freed by the main plan */
    else if (!st && pl->threads > 1) st = mp_pool_create(pl->threads, &pl->pool);
    if (!st) st = mp__build_steps(pl);
    /* graph outputs that no node reads nor makes (an initializer given
     * back as an output) */
    for (int i = 0; !st && i < g->n_outputs; i++)
        if (g->outputs[i] >= 0 && pl->vals[g->outputs[i]].kind == MP_RV_UNUSED)
            st = mp__need(pl, g->outputs[i]);
    if (!st) st = mp__arena_layout(pl);
    if (!st) {
        size_t in_b = 0;
        for (int i = 0; i < g->n_inputs; i++)
            if (g->inputs[i] >= 0 && pl->vals[g->inputs[i]].kind == MP_RV_INPUT)
                in_b += mp__round(pl->vals[g->inputs[i]].bytes);
        st = mp__memory_check(pl, in_b, "weights, inputs, activation arena, scratch");
    }
    if (!st) st = mp__bind(pl);
    if (!st && pl->random_weights && !parent)
        mp_model_warn(pl->m, "weights are absent: the run uses seeded random weights (seed %llu)",
                      (unsigned long long)pl->seed);
    if (st) {
        mp_exec_free(pl);
        return st;
    }
    *out = pl;
    return MP_OK;
}

mp_status mp_exec_create(mp_profile *p, const mp_run_options *o, mp_exec **out) {
    *out = NULL;
    if (!p || !p->m || !p->m->graph) return mp_error(MP_ERR_USAGE, "no profile to plan");
    mp_run_options opts;
    run_defaults(&opts);
    mp_status st = mp_opts_take(&opts, sizeof opts, o, RUN_OPTIONS_V1, "mp_run_options");
    if (st) return st;
    /* a run before left the shapes its data gave: this plan is made from
     * what the inference alone knows (its data may size them otherwise) */
    if ((st = mp_profile_drop_shapes(p))) return st;
    const mp_graph *g = p->m->graph;
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] >= 0 && (g->values[g->outputs[i]].flags & MP_VAL_SEQUENCE))
            return mp_error(MP_ERR_UNSUPPORTED, "%s: output '%s' is a sequence: the run gives tensors only",
                            p->m->path ? p->m->path : "model", g->values[g->outputs[i]].name);
    return mp__exec_make(p, p->m->graph, &opts, NULL, out);
}

void mp_subexec_bind_outer(mp_exec *pl) {
    const mp_graph *g = pl->g;
    for (int v = 0; v < g->n_values; v++)
        if (pl->vals[v].kind == MP_RV_OUTER) pl->vals[v].rt = pl->parent->vals[g->values[v].outer].rt;
}

mp_status mp_subexec_create(mp_exec *parent, mp_graph *body, bool fuse, mp_exec **out) {
    mp_run_options o = parent->o;
    o.fuse = fuse;
    o.threads = parent->threads;
    mp_status st = mp__exec_make(parent->p, body, &o, parent, out);
    if (!st) /* a body's buffers count in the run's memory */
        parent->dyn_bytes += (*out)->arena_bytes + (*out)->const_bytes + (*out)->input_bytes +
                             (*out)->scratch_bytes + (*out)->dyn_bytes;
    return st;
}

void mp_exec_free(mp_exec *pl) {
    if (!pl) return;
    for (int i = 0; pl->steps && i < pl->n_steps; i++) {
        mp_step *s = &pl->steps[i];
        const mp_kernel *kern = s->kern;
        bool own_kern = kern && kern->name && strcmp(kern->name, "portable") == 0;
        mp__step_free(s);
        if (own_kern) free((void *)kern);
    }
    if (pl->vals)
        for (int v = 0; v < pl->g->n_values; v++) {
            free(pl->vals[v].own);
            free(pl->vals[v].dyn_dims);
            free(pl->vals[v].f32);
        }
    if (!pl->parent) mp_pool_free(pl->pool);
    mp_run_unmap(pl);
    free(pl->vals);
    free(pl->steps);
    free(pl->step_of);
    free(pl->folded);
    free(pl->arena);
    free(pl->scratch);
    free(pl->t_step);
    free(pl->t_start);
    free(pl->t_run);
    if (pl->shadow_m) mp_arena_free(&pl->shadow_m->arena);
    free(pl->shadow_m);
    free(pl->shadow_g);
    free(pl->shadow_vals);
    free(pl);
}

mp_status mp_exec_set_input(mp_exec *pl, const char *name, int dtype, int rank, const int64_t *dims,
                            const void *data, size_t bytes) {
    if (!pl || !name) return mp_error(MP_ERR_USAGE, "no plan or input name");
    mp_graph *g = pl->g;
    int v = -1;
    for (int i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] >= 0 && strcmp(g->values[g->inputs[i]].name, name) == 0) v = g->inputs[i];
    if (v < 0) return mp_error(MP_ERR_USAGE, "input '%s': the model has no such input", name);
    mp_rval *rv = &pl->vals[v];
    const mp_value *val = &g->values[v];
    /* numpy has no bfloat16: a bf16 input's data given as its bits, uint16
     * (as the ONNX test data and torch's .view(torch.int16) write it) */
    if (dtype == MP_DT_UINT16 && val->dtype == MP_DT_BFLOAT16) dtype = MP_DT_BFLOAT16;
    /* integers into integers, floats into floats (int32 token ids for an
     * int64 input, fp64 for fp32): converted */
    bool same_kind = (mp_dtype_is_float(dtype) && mp_dtype_is_float(val->dtype)) ||
                     (mp_dtype_is_int(dtype) && mp_dtype_is_int(val->dtype));
    if (dtype != val->dtype && (!same_kind || mp_dtype_bits(dtype) < 8 || mp_dtype_bits(val->dtype) < 8))
        return mp_error(MP_ERR_USAGE, "input '%s': dtype %s given, the plan has %s", name,
                        mp_dtype_name(dtype), mp_dtype_name(val->dtype));
    bool same = rank == val->rank;
    for (int d = 0; same && d < rank; d++) same = dims[d] == val->dims[d];
    if (!same) {
        char a[256] = "", b[256] = "";
        for (int d = 0; d < rank && strlen(a) < 200; d++)
            snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? "x" : "", (long long)dims[d]);
        for (int d = 0; d < val->rank && strlen(b) < 200; d++)
            snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? "x" : "", (long long)val->dims[d]);
        return mp_error(MP_ERR_USAGE, "input '%s': shape [%s] given, the plan has [%s] (set dims with --dim)",
                        name, a, b);
    }
    uint64_t want = mp_dtype_bytes(dtype, rv->rt.numel);
    if (bytes != want)
        return mp_error(MP_ERR_USAGE, "input '%s': %zu bytes given, %llu expected", name, bytes,
                        (unsigned long long)want);
    if (rv->kind != MP_RV_INPUT) return MP_OK; /* folded away: its contents were known */
    if (dtype != val->dtype) {
        if (!mp_run_convert(val->dtype, (void *)rv->rt.data, dtype, data, rv->rt.numel))
            return mp_error(MP_ERR_USAGE, "input '%s': cannot convert %s to %s", name, mp_dtype_name(dtype),
                            mp_dtype_name(val->dtype));
    } else if (bytes) {
        memcpy((void *)rv->rt.data, data, bytes);
    }
    rv->given = true;
    return MP_OK;
}

/* Shadow value v for mp__reinfer: the graph's, with its run-time dims
 * when it has data in this run (and the contents of a small int or float
 * tensor, as shape arithmetic needs). */
static mp_status mp__shadow_value(mp_exec *pl, int v) {
    const mp_graph *g = pl->g;
    mp_arena *a = &pl->shadow_m->arena;
    mp_value *sv = pl->shadow_vals;
    const mp_rtensor *rt = &pl->vals[v].rt;
    sv[v] = g->values[v];
    sv[v].seq = NULL; /* a sequence at run time is its buffer (ops/sequence.c), not what the plan knew */
    if (!rt->data && pl->vals[v].kind != MP_RV_CONST) return MP_OK;
    sv[v].rank = rt->rank;
    sv[v].dims = (int64_t *)rt->dims;
    sv[v].kn = -1;
    sv[v].iv = NULL;
    sv[v].fv = NULL;
    int64_t cnt = rt->numel;
    if (!rt->data || cnt < 0 || cnt > MP_KNOWN_MAX) return MP_OK;
    bool fl = rt->dtype == MP_DT_FLOAT || rt->dtype == MP_DT_DOUBLE;
    bool in = rt->dtype == MP_DT_INT64 || rt->dtype == MP_DT_INT32 || rt->dtype == MP_DT_BOOL ||
              rt->dtype == MP_DT_UINT8 || rt->dtype == MP_DT_INT8;
    if (!fl && !in) return MP_OK;
    void *buf = mp_arena_calloc(a, (size_t)(cnt ? cnt : 1), 8);
    if (!buf) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < cnt; j++) {
        switch (rt->dtype) {
        case MP_DT_FLOAT: ((double *)buf)[j] = ((const float *)rt->data)[j]; break;
        case MP_DT_DOUBLE: ((double *)buf)[j] = ((const double *)rt->data)[j]; break;
        case MP_DT_INT64: ((int64_t *)buf)[j] = ((const int64_t *)rt->data)[j]; break;
        case MP_DT_INT32: ((int64_t *)buf)[j] = ((const int32_t *)rt->data)[j]; break;
        case MP_DT_INT8: ((int64_t *)buf)[j] = ((const int8_t *)rt->data)[j]; break;
        default: ((int64_t *)buf)[j] = ((const uint8_t *)rt->data)[j]; break;
        }
    }
    if (fl) sv[v].fv = buf;
    else sv[v].iv = buf;
    sv[v].kn = cnt;
    return MP_OK;
}

/* Shapes at run time: a node downstream of a data-dependent shape (a
 * Transpose of NonZero's output, a Slice by a Loop's iteration number) has
 * outputs the static inference could not size. Before its kernel runs, the
 * op's own shape rule runs again on a shadow copy of the node's values
 * holding the inputs' run-time dims (and the contents of small inputs, as
 * shape arithmetic needs), in an arena of its own emptied after each use:
 * the graph itself is never touched. The outputs get buffers of that
 * shape (mp_kout_alloc); a kernel may still size them itself. */
static mp_status mp__reinfer(mp_exec *pl, mp_step *s) {
    mp_graph *g = pl->g;
    const mp_node *n = &g->nodes[s->node];
    if (s->n_nodes != 1 || !n->desc || !n->desc->infer) return MP_OK;
    /* A node with a body (If, Loop, Scan): its kernel (src/run/control.c)
     * sizes its outputs from the body's run. Its shape rule would infer
     * the body graphs in place (the model's own values, their dims then
     * pointing into the arena freed below) and both branches of an If,
     * the one not taken included: an If guarding a Squeeze of an empty
     * axis failed the run (torchvision's detection postprocessing). */
    if (n->n_sub > 0) return MP_OK;
    if (!pl->shadow_vals) {
        pl->shadow_vals = malloc(sizeof *pl->shadow_vals * ((size_t)g->n_values + 1));
        pl->shadow_m = malloc(sizeof *pl->shadow_m);
        pl->shadow_g = malloc(sizeof *pl->shadow_g);
        if (!pl->shadow_vals || !pl->shadow_m || !pl->shadow_g) return mp_error(MP_ERR_NOMEM, "out of memory");
        *pl->shadow_m = *pl->m;
        mp_arena_init(&pl->shadow_m->arena);
        *pl->shadow_g = *g;
        pl->shadow_g->values = pl->shadow_vals;
        pl->shadow_g->model = pl->shadow_m;
    }
    mp_arena *a = &pl->shadow_m->arena;
    mp_value *sv = pl->shadow_vals;
    mp_status st = MP_OK;
    for (int i = 0; i < n->n_in && !st; i++)
        if (n->in[i] >= 0) st = mp__shadow_value(pl, n->in[i]);
    if (st) return st;
    for (int i = 0; i < n->n_out; i++) {
        int v = n->out[i];
        if (v < 0) continue;
        sv[v] = g->values[v];
        sv[v].rank = -1;
        sv[v].dims = NULL;
        sv[v].kn = -1;
        sv[v].iv = NULL;
        sv[v].fv = NULL;
    }
    mp_ctx c = {pl->shadow_m, pl->shadow_g, (mp_node *)n, s->node, mp_infer_graph};
    st = n->desc->infer(&c);
    for (int i = 0; !st && i < s->n_out; i++) {
        int v = s->out_v[i];
        if (v < 0 || pl->vals[v].kind != MP_RV_DYN || !mp_shape_known(&sv[v])) continue;
        if (sv[v].dtype != pl->vals[v].rt.dtype) continue;
        st = mp_kout_alloc(&s->k, i, sv[v].rank, sv[v].dims);
    }
    mp_arena_free(a);
    mp_arena_init(a);
    if (st) {
        char inner[600];
        snprintf(inner, sizeof inner, "%s", mp_last_error());
        return mp_error(st, "run: sizing the outputs of node '%s' from its inputs' run-time shapes: %s",
                        mp__node_name(g, s->node), inner);
    }
    return MP_OK;
}

static mp_status mp__step_run(mp_exec *pl, mp_step *s) {
    if (s->dyn) {
        bool dyn_out = false;
        for (int i = 0; i < s->n_in; i++)
            if (s->in_v[i] >= 0) s->in[i] = pl->vals[s->in_v[i]].rt;
        for (int i = 0; i < s->n_out; i++) {
            int v = s->out_v[i];
            if (v < 0) continue;
            s->out[i] = pl->vals[v].rt;
            if (pl->vals[v].kind == MP_RV_DYN) {
                s->out[i].data = NULL;
                dyn_out = true;
            }
        }
        if (dyn_out) {
            mp_status st = mp__reinfer(pl, s);
            if (st) return st;
        }
    }
    mp_status st = s->kern->run(&s->k);
    if (st) return st;
    if (s->dyn) {
        for (int i = 0; i < s->n_out; i++) {
            int v = s->out_v[i];
            if (v >= 0 && pl->vals[v].kind == MP_RV_DYN && !s->out[i].data &&
                (mp__readers(pl->g, v) || (pl->g->values[v].flags & MP_VAL_OUTPUT)))
                return mp_error(MP_ERR_UNSUPPORTED, "node '%s': output %d: its shape is known only at "
                                "run time and the kernel gave none", mp__node_name(pl->g, s->node), i);
        }
    }
    return MP_OK;
}

/* One run; with t (n_steps entries) each step's time in seconds, with
 * start (n_steps entries, may be NULL) each step's start on the monotonic
 * clock. */
mp_status mp_exec_run_stamped(mp_exec *pl, double *t, double *start) {
    for (int i = 0; i < pl->n_steps; i++) {
        pl->cur = i;
        mp_status st;
        if (t) {
            double t0 = mp_run_now();
            st = mp__step_run(pl, &pl->steps[i]);
            t[i] = mp_run_now() - t0;
            if (start) start[i] = t0;
        } else {
            st = mp__step_run(pl, &pl->steps[i]);
        }
        if (st) return st;
    }
    return MP_OK;
}

mp_status mp_exec_run_timed(mp_exec *pl, double *t) { return mp_exec_run_stamped(pl, t, NULL); }

mp_status mp_exec_run(mp_exec *pl) {
    if (!pl) return mp_error(MP_ERR_USAGE, "no plan");
    return mp_exec_run_timed(pl, NULL);
}

int mp_exec_output_count(const mp_exec *pl) { return pl ? pl->g->n_outputs : 0; }

mp_status mp_exec_output(const mp_exec *pl, int i, const char **name, int *dtype, int *rank,
                         const int64_t **dims, const void **data) {
    if (!pl || i < 0 || i >= pl->g->n_outputs)
        return mp_error(MP_ERR_USAGE, "output %d: the model has %d outputs", i, pl ? pl->g->n_outputs : 0);
    int v = pl->g->outputs[i];
    const mp_rval *rv = &pl->vals[v];
    if (name) *name = pl->g->values[v].name;
    if (dtype) *dtype = rv->rt.dtype;
    if (rank) *rank = rv->rt.rank;
    if (dims) *dims = rv->rt.dims;
    if (data) *data = rv->rt.data;
    if (!rv->rt.data)
        return mp_error(MP_ERR_USAGE, "output '%s' has no data (not computed)", pl->g->values[v].name);
    return MP_OK;
}
