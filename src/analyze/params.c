/* The static profile (analyze_int.h): parameters: which initializers are
 * learnable state and which module each counts under, the ones the
 * exporter folded or copied, and their roles in the FX node
 * (docs/COUNTING.md, "Parameters"). */
#include "analyze/analyze.h"
#include "analyze/patterns.h"
#include "analyze/same.h"
#include <stdlib.h>
#include "analyze/analyze_int.h"

/* ---- parameters ---- */

/* Is value v (an initializer, or a copy of one) a learnable parameter?
 * (GUIDE §3, docs/COUNTING.md): float-typed with rank >= 1, or used where
 * an op takes a (quantized) weight; never when every use is a buffer slot
 * (BatchNormalization mean and variance). Copies are judged by their own
 * uses. */
/* Does value v reach only BatchNormalization's mean and variance, through
 * ops that pass its elements on (Expand, Tile, a Reshape)? PyTorch's
 * InstanceNorm with track_running_stats is exported as Expand and Tile of
 * each running statistic into a BatchNormalization (a recurrent op's
 * initial state, the other buffer slot, is left to its own rule). */
static bool mp__only_buffers(const mp_graph *g, int v, int depth) {
    static const char *const pass[] = {"Expand", "Tile", "Reshape", "Unsqueeze", "Squeeze",
                                       "Identity", "Flatten", "Cast"};
    if (depth > 4 || v < 0 || (g->values[v].flags & MP_VAL_OUTPUT)) return false;
    bool any = false;
    for (int k = 0; k < g->n_nodes; k++) {
        const mp_node *n = &g->nodes[k];
        for (int s = 0; s < n->n_in; s++) {
            if (n->in[s] != v) continue;
            any = true;
            uint32_t bit = s < 32 ? (1u << s) : 0;
            if (n->desc && (n->desc->buffer_inputs & bit) && !strcmp(n->op, "BatchNormalization")) continue;
            bool through = false;
            for (size_t i = 0; i < MP_ARRAY_LEN(pass) && !through; i++) through = !strcmp(n->op, pass[i]);
            if (!through || s != 0 || n->n_out < 1 || !mp__only_buffers(g, n->out[0], depth + 1)) return false;
        }
    }
    return any;
}

static bool mp__is_param_by_use(const mp__walk *w, int v, const mp_tensor *t, bool *buffer) {
    *buffer = false;
    if (t->numel <= 0) return false;
    bool any = false, all_buffer = true, param_slot = false;
    for (int e = mp__use_first(w, v); e >= 0; e = w->uses[e].next) {
        int k = w->uses[e].node, s = w->uses[e].slot;
        if (w->uses[e].copy) continue;
        const mp_node *n = &w->g->nodes[k];
        any = true;
        uint32_t bit = s < 32 ? (1u << s) : 0;
        if (all_buffer && (!n->desc || !(n->desc->buffer_inputs & bit)) &&
            !(s == 0 && n->n_out >= 1 && (!strcmp(n->op, "Expand") || !strcmp(n->op, "Tile")) &&
              mp__only_buffers(w->g, n->out[0], 1)))
            all_buffer = false;
        if (n->desc && (n->desc->param_inputs & bit)) param_slot = true;
    }
    if (any && all_buffer) {
        *buffer = t->rank >= 1;
        return false;
    }
    if (param_slot) return true;
    return mp_dtype_is_float(t->dtype) && t->rank >= 1;
}

/* What the exporter declares of value v (MP_VAL_DECL_*): its own metadata,
 * else the graph signature's entry for its name. */
static uint32_t mp__declared(const mp__walk *w, int v) {
    const mp_model *m = w->p->m;
    const mp_value *val = &w->g->values[v];
    uint32_t d = val->flags & MP_VAL_DECL_ANY;
    if (!d && m->has_signature && w->g == m->graph) {
        int k = mp_strmap_get(&m->sig_kind, val->name);
        if (k > 0) d = (uint32_t)k;
    }
    return d;
}

/* MP_SIG_OWNS_* of the modules whose nodes use v, by the graph signature. */
static int mp__owners(const mp__walk *w, int v) {
    const mp_model *m = w->p->m;
    int bits = 0;
    for (int e = mp__use_first(w, v); e >= 0; e = w->uses[e].next) {
        if (w->uses[e].copy) continue;
        int md = w->g->nodes[w->uses[e].node].module;
        int b = md >= 0 ? mp_strmap_get(&m->sig_owner, m->modules[md].path) : -1;
        if (b > 0) bits |= b;
    }
    return bits;
}

/* Parameter or buffer? (docs/COUNTING.md, "Parameters and buffers")
 * 1. What the model declares wins: a PARAMETER is a parameter, a BUFFER a
 *    buffer, a CONSTANT_TENSOR neither.
 * 2. Otherwise the uses decide (mp__is_param_by_use).
 * 3. A model with a graph signature (PyTorch's dynamo exporter) names
 *    every parameter; what its optimizer derived (a transposed weight, a
 *    folded BatchNorm, a rotary table expanded from inv_freq) is a new,
 *    undeclared initializer. Such a tensor stays a parameter only when a
 *    module using it owns parameters in the signature; used only by
 *    modules that own buffers, it is a buffer. */
static bool mp__is_param(const mp__walk *w, int v, const mp_tensor *t, bool *buffer) {
    uint32_t d = mp__declared(w, v);
    *buffer = false;
    if (d & MP_VAL_DECL_PARAM) return t->numel > 0;
    if (d) {
        *buffer = (d & MP_VAL_DECL_BUFFER) && t->numel > 0;
        return false;
    }
    bool param = mp__is_param_by_use(w, v, t, buffer);
    if (!param || !w->p->m->has_signature || w->g != w->p->m->graph) return param;
    int owners = mp__owners(w, v);
    if (owners & MP_SIG_OWNS_PARAM) return true;
    *buffer = (owners & MP_SIG_OWNS_BUFFER) != 0;
    return false;
}

/* A buffer: counted in the profile's buffer figure. */
static void mp__buffer(mp__walk *w, const mp_tensor *t) {
    mp_profile *p = w->p;
    p->buffers++;
    p->buffer_elems = mp_uadd(p->buffer_elems, (uint64_t)t->numel, &w->ovf);
    p->buffer_bytes = mp_uadd(p->buffer_bytes, mp_dtype_bytes(t->dtype, t->numel), &w->ovf);
}

/* The tensor a Constant node holds in its `value` attribute. */
static const mp_tensor *mp__constant_tensor(const mp_node *n) {
    const mp_attr *a = mp_node_attr(n, "value");
    return a && a->type == MP_ATTR_TENSOR ? a->t : NULL;
}

/* Op kinds of node k (its type is known since the walk). */
static unsigned mp__node_kind(mp__walk *w, int k) {
    int op = mp__op_index(w, &w->g->nodes[k]);
    return op >= 0 ? w->op_kind[op] : 0;
}

/* Quantized weights stored in Constant nodes: the data input of a
 * DequantizeLinear, followed back through the casts and the scaling that
 * quantize it, ends at the weight (int8) or bias (float, quantized on the
 * fly) it dequantizes. Lists the values it marks in chain (n_values
 * entries); their uses are then kept like a weight's. */
static mp_status mp__mark_quantized(mp__walk *w, int *chain, int *n_chain) {
    mp_graph *g = w->g;
    *n_chain = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        const mp_node *n = &g->nodes[k];
        if (n->n_in < 1 || n->in[0] < 0 || !(mp__node_kind(w, k) & MP__K_DEQUANT)) continue;
        int v = n->in[0];
        for (int hop = 0; hop < 16 && v >= 0; hop++) {
            mp_value *val = &g->values[v];
            if (val->producer < 0) break;
            const mp_node *pn = &g->nodes[val->producer];
            unsigned kind = mp__node_kind(w, val->producer);
            if (kind & MP__K_CONSTANT) {
                const mp_tensor *t = mp__constant_tensor(pn);
                if (t && t->rank >= 1 && t->numel > 0 && !(val->flags & MP_VAL_PARAM)) {
                    val->flags |= MP_VAL_PARAM;
                    chain[(*n_chain)++] = v;
                }
                break;
            }
            if (!(kind & MP__K_CHAIN) || pn->n_in < 1) break;
            v = pn->in[0];
        }
    }
    if (!*n_chain) return MP_OK;
    /* their uses, in one more pass over the nodes */
    unsigned char *mark = calloc((size_t)g->n_values, 1);
    if (!mark) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int c = 0; c < *n_chain; c++) mark[chain[c]] = 1;
    for (int k = 0; k < g->n_nodes; k++) {
        const mp_node *n = &g->nodes[k];
        for (int j = 0; j < n->n_in; j++) {
            if (n->in[j] < 0 || !mark[n->in[j]]) continue;
            int op = mp__op_index(w, n);
            if (op < 0 || !mp__use_add(w, n->in[j], k, op, mp__is_copy(w, n, w->op_kind[op]), j)) {
                free(mark);
                return mp_error(MP_ERR_NOMEM, "out of memory");
            }
        }
    }
    free(mark);
    return MP_OK;
}

/* The tensor behind a param value (itself, the weight it copies, or a
 * Constant node's tensor). */
static const mp_tensor *mp__param_tensor(mp__walk *w, const mp_value *v) {
    if (v->init) return v->init;
    const mp_node *pn = &w->g->nodes[v->producer];
    if (mp__node_kind(w, v->producer) & MP__K_CONSTANT) return mp__constant_tensor(pn);
    return w->g->values[pn->in[0]].init;
}

/* One parameter: totals by dtype, per node, per op type and per module
 * (each module counts a shared weight once; the model total counts it
 * once). stamp / op_stamp hold the last value counted per module / op. */
static void mp__param(mp__walk *w, int v, int *stamp, int *op_stamp) {
    mp_profile *p = w->p;
    mp_model *m = p->m;
    mp_graph *g = w->g;
    bool *ovf = &w->ovf;
    const mp_tensor *t = mp__param_tensor(w, &g->values[v]);
    int64_t count = t->numel;
    int dt = t->dtype;
    int first = mp__use_first(w, v);
    /* a packed weight: the descriptor of its first consumer (in node
     * order) that knows the real count gives it */
    int best = -1, best_slot = 0;
    for (int e = first; e >= 0; e = w->uses[e].next) {
        const mp__use *u = &w->uses[e];
        const mp_node *nd = &g->nodes[u->node];
        if (!nd->desc || !nd->desc->param_view) continue;
        if (best >= 0 && (u->node > best || (u->node == best && u->slot > best_slot))) continue;
        int64_t c = t->numel;
        int d = t->dtype;
        if (nd->desc->param_view(nd, u->slot, t, &c, &d)) {
            best = u->node;
            best_slot = u->slot;
            count = c;
            dt = d;
        }
    }
    if (w->pcount && w->pcount[v] >= 0) count = w->pcount[v];
    uint64_t n = (uint64_t)count;
    uint64_t bytes = mp_dtype_bytes(dt, (int64_t)n);
    if (bytes == UINT64_MAX) *ovf = true; /* saturated */
    p->total.params = mp_uadd(p->total.params, n, ovf);
    p->total.param_bytes = mp_uadd(p->total.param_bytes, bytes, ovf);
    if (dt >= 0 && dt < MP_DT_COUNT) {
        p->params_by_dtype[dt] = mp_uadd(p->params_by_dtype[dt], n, ovf);
        p->param_bytes_by_dtype[dt] = mp_uadd(p->param_bytes_by_dtype[dt], bytes, ovf);
    }
    /* its uses in execution order (a copy is its own param): in each module
     * the first node that reads it counts it in its op type's row */
    int nu = 0;
    for (int e = first; e >= 0; e = w->uses[e].next) {
        /* the copy is its own param; a stand-in use counts for another one */
        if (w->uses[e].copy || w->uses[e].stand_in) continue;
        int *nb = mp_grow(w->ubuf, sizeof *w->ubuf, &w->cap_ubuf, nu + 1);
        if (!nb) {
            w->nomem = true;
            return;
        }
        w->ubuf = nb;
        int at = nu++;
        const mp__use *u = &w->uses[e];
        for (; at > 0; at--) { /* insertion: most weights have one or two uses */
            const mp__use *b = &w->uses[w->ubuf[at - 1]];
            if (w->pos[b->node] < w->pos[u->node] ||
                (b->node == u->node && b->slot <= u->slot))
                break;
            w->ubuf[at] = w->ubuf[at - 1];
        }
        w->ubuf[at] = e;
    }
    int last_node = -1;
    for (int i = 0; i < nu; i++) {
        int e = w->ubuf[i];
        int k = w->uses[e].node;
        mp_node *nd = &g->nodes[k];
        if (k != last_node) { /* a node using a weight twice counts it once */
            nd->cost.params = mp_uadd(nd->cost.params, n, ovf);
            nd->cost.param_bytes = mp_uadd(nd->cost.param_bytes, bytes, ovf);
            last_node = k;
        }
        int op = w->uses[e].op;
        if (op_stamp[op] != v) { /* each op type counts a weight once */
            op_stamp[op] = v;
            p->ops[op].fig.params = mp_uadd(p->ops[op].fig.params, n, ovf);
            p->ops[op].fig.param_bytes = mp_uadd(p->ops[op].fig.param_bytes, bytes, ovf);
        }
        for (int md = nd->module; md >= 0; md = m->modules[md].parent) {
            if (stamp[md] == v) break; /* ancestors already have it */
            stamp[md] = v;
            p->mods[md].params = mp_uadd(p->mods[md].params, n, ovf);
            p->mods[md].param_bytes = mp_uadd(p->mods[md].param_bytes, bytes, ovf);
            int row = p->modops ? mp__modop_find(p, md, op) : -1;
            if (row >= 0) {
                p->modops[row].fig.params = mp_uadd(p->modops[row].fig.params, n, ovf);
                p->modops[row].fig.param_bytes = mp_uadd(p->modops[row].fig.param_bytes, bytes, ovf);
            }
        }
    }
}

/* ---- parameters the exporter folded or copied (docs/COUNTING.md,
 * "Folded and tied parameters") ---- */

/* A judged tensor into the profile's notes (false: out of memory). */
static bool mp__pnote(mp_profile *p, const mp_param_note *n) {
    mp_param_note *nn = mp_grow(p->pnotes, sizeof *nn, &p->cap_pnotes, p->n_pnotes + 1);
    if (!nn) return false;
    p->pnotes = nn;
    nn[p->n_pnotes++] = *n;
    return true;
}

/* Set value v's count (count >= 0) or the value counting it instead
 * (alias >= 0); the tables are made on the first call (most models need
 * none). False when out of memory. */
static bool mp__judged(mp__walk *w, int v, int64_t count, int alias) {
    if (!w->pcount) {
        size_t nv = (size_t)(w->g->n_values ? w->g->n_values : 1);
        w->pcount = malloc(sizeof *w->pcount * nv);
        w->alias = malloc(sizeof *w->alias * nv);
        if (!w->pcount || !w->alias) return false;
        for (size_t i = 0; i < nv; i++) {
            w->pcount[i] = -1;
            w->alias[i] = -1;
        }
    }
    if (count >= 0) w->pcount[v] = count;
    if (alias >= 0) w->alias[v] = alias;
    return true;
}

/* How the exporter made a folded constant, from its name: the dynamo
 * exporter names a value after the torch.fx node that computed it, and
 * torch.fx names a node after its op (`expand`, `expand_2`, `_to_copy`,
 * `cat`); values inside one op's lowering are `val_N` (NULL). */
static const char *mp__fold_how(const char *name) {
    static const char *const tab[][2] = {
        {"expand", "expand"},      {"expand_as", "expand"},   {"broadcast_to", "expand"},
        {"repeat", "tile"},        {"tile", "tile"},          {"view", "reshape"},
        {"reshape", "reshape"},    {"_unsafe_view", "reshape"}, {"flatten", "reshape"},
        {"_to_copy", "cast"},      {"to", "cast"},            {"type_as", "cast"},
        {"unsqueeze", "unsqueeze"}, {"squeeze", "squeeze"},   {"cat", "concat"},
        {"concat", "concat"},      {"permute", "transpose"},  {"transpose", "transpose"},
        {"t", "transpose"},        {"clone", "copy"},         {"index", "gather"},
        {"index_select", "gather"}, {"gather", "gather"},     {"embedding", "gather"},
    };
    size_t n = strlen(name), e = n;
    while (e > 0 && name[e - 1] >= '0' && name[e - 1] <= '9') e--;
    if (e > 1 && e < n && name[e - 1] == '_') n = e - 1;
    for (size_t i = 0; i < MP_ARRAY_LEN(tab); i++)
        if (strlen(tab[i][0]) == n && memcmp(tab[i][0], name, n) == 0) return tab[i][1];
    return NULL;
}

/* ---- parameters by their role in the fx node (docs/COUNTING.md,
 * "Merged and folded parameters") ---- */

/* Dim d of node k's first output (d < 0 counts from the end); -1 unknown. */
static int64_t mp__out_dim(const mp_graph *g, const mp_node *n, int d) {
    if (n->n_out < 1 || n->out[0] < 0) return -1;
    const mp_value *v = &g->values[n->out[0]];
    if (v->rank <= 0 || !v->dims) return -1;
    int i = d < 0 ? v->rank + d : d;
    return i >= 0 && i < v->rank ? v->dims[i] : -1;
}

/* The elements PyTorch gives the parameter at argument `arg` of the ATen
 * operator `fx` took it in, from node k's output (-1: no rule). PyTorch's
 * own shapes: Linear's bias has out_features elements (linear(x, W, b),
 * addmm(b, x, W): the output's last dim); a convolution's bias out_channels
 * (conv*(x, W, b): the output's dim 1); LayerNorm's and RMSNorm's weight and
 * bias the normalized_shape (layer_norm(x, shape, w, b), rms_norm(x, shape,
 * w): the literal shape, else the output's last dim); BatchNorm's,
 * GroupNorm's and InstanceNorm's weight and bias num_features / channels
 * (batch_norm(x, w, b, ...), group_norm(x, G, w, b), instance_norm(x, w, b,
 * ...): the output's dim 1). A weight matrix has no such rule: what the
 * exporter made of one is counted by mp__derived. */
static int64_t mp__fx_role_numel(const mp_graph *g, const mp_node *n, const mp_fx *fx, int arg) {
    const char *t = fx->target;
    if (!t) return -1;
    if (strcmp(t, "linear") == 0) return arg == 2 ? mp__out_dim(g, n, -1) : -1;
    if (strcmp(t, "addmm") == 0) return arg == 0 ? mp__out_dim(g, n, -1) : -1;
    if (strncmp(t, "conv", 4) == 0 || strcmp(t, "convolution") == 0 ||
        strcmp(t, "_convolution") == 0)
        return arg == 2 ? mp__out_dim(g, n, 1) : -1;
    if (strcmp(t, "layer_norm") == 0 || strcmp(t, "native_layer_norm") == 0 ||
        strcmp(t, "rms_norm") == 0)
        return arg == 2 || (arg == 3 && t[0] != 'r')
                   ? (fx->norm_numel > 0 ? fx->norm_numel : mp__out_dim(g, n, -1))
                   : -1;
    if (strcmp(t, "group_norm") == 0 || strcmp(t, "native_group_norm") == 0)
        return arg == 2 || arg == 3 ? mp__out_dim(g, n, 1) : -1;
    if (strstr(t, "batch_norm") || strcmp(t, "instance_norm") == 0)
        return arg == 1 || arg == 2 ? mp__out_dim(g, n, 1) : -1;
    return -1;
}

/* The m->sig_params index of a placeholder name, -1. */
static int mp__sig_index(const mp_strmap *by_name, const char *name) {
    return name ? mp_strmap_get(by_name, name) : -1;
}

static bool mp__sig_present(const mp_graph *g, const struct mp_sig_param *sp);

/* A model with a graph signature whose nodes carry their fx node: a
 * declared parameter the graph no longer holds by its name (the optimizer
 * merged it with an equal tensor, or folded it into the node that took it)
 * is still named among the fx node's arguments. When PyTorch's shape for
 * its role there is known (mp__fx_role_numel) it counts as a parameter of
 * its own, in the module that owns it; a node that took another declared
 * parameter in its place (an equal tensor the optimizer kept) does not use
 * that one (its use is a stand-in: the kept tensor's own module keeps
 * it). */
static mp_status mp__fx_params(mp__walk *w) {
    mp_model *m = w->p->m;
    mp_graph *g = w->g;
    int ns = m->n_sig_params;
    if (!m->has_signature || g != m->graph || ns <= 0) return MP_OK;
    mp_strmap by_name = {0};
    for (int i = 0; i < ns; i++)
        if (m->sig_params[i].name && mp_strmap_put(&by_name, m->sig_params[i].name, i)) {
            mp_strmap_free(&by_name);
            return mp_error(MP_ERR_NOMEM, "out of memory");
        }
    w->role_numel = calloc((size_t)ns, sizeof *w->role_numel);
    w->role_node = malloc(sizeof *w->role_node * (size_t)ns);
    w->role_dtype = calloc((size_t)ns, sizeof *w->role_dtype);
    char *absent = calloc((size_t)ns, 1);
    if (!w->role_numel || !w->role_node || !w->role_dtype || !absent) {
        free(absent);
        mp_strmap_free(&by_name);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < ns; i++) {
        w->role_node[i] = -1;
        absent[i] = !mp__sig_present(g, &m->sig_params[i]);
    }
    /* the shapes, from the first node (in order) that took each */
    for (int oi = 0; oi < g->n_nodes; oi++) {
        int k = g->order[oi];
        const mp_node *n = &g->nodes[k];
        if (!n->fx) continue;
        for (int j = 0; j < n->fx->n_params; j++) {
            int i = mp__sig_index(&by_name, n->fx->params[j]);
            if (i < 0 || !absent[i] || w->role_numel[i] > 0) continue;
            int64_t e = mp__fx_role_numel(g, n, n->fx, n->fx->args[j]);
            if (e <= 0) continue;
            w->role_numel[i] = e;
            w->role_node[i] = k;
            const mp_value *o = n->n_out > 0 && n->out[0] >= 0 ? &g->values[n->out[0]] : NULL;
            w->role_dtype[i] = o && mp_dtype_is_float(o->dtype) ? o->dtype : MP_DT_FLOAT;
        }
    }
    /* stand-ins: a use of a declared parameter by a node whose fx node
     * names another, absent one of the same elements in its place */
    for (int ii = 0; ii < w->n_inits; ii++) {
        int v = w->inits[ii];
        const mp_value *val = &g->values[v];
        if (!(val->flags & MP_VAL_PARAM) || !val->init) continue;
        int own = mp__sig_index(&by_name, val->name);
        if (own < 0)
            for (int i = 0; i < ns && own < 0; i++)
                if (m->sig_params[i].target && strcmp(m->sig_params[i].target, val->name) == 0)
                    own = i;
        if (own < 0) continue;
        const char *own_name = m->sig_params[own].name;
        for (int e = mp__use_first(w, v); e >= 0; e = w->uses[e].next) {
            mp__use *u = &w->uses[e];
            const mp_node *n = &g->nodes[u->node];
            if (u->copy || !n->fx) continue;
            bool takes_own = false;
            for (int j = 0; j < n->fx->n_params; j++)
                if (own_name && strcmp(n->fx->params[j], own_name) == 0) takes_own = true;
            if (takes_own) continue;
            for (int j = 0; j < n->fx->n_params; j++) {
                int i = mp__sig_index(&by_name, n->fx->params[j]);
                if (i >= 0 && absent[i] && w->role_numel[i] == val->init->numel) {
                    u->stand_in = true;
                    if (u->slot < 32 && !w->p->param_stand_in &&
                        !(w->p->param_stand_in = calloc((size_t)g->n_nodes + 1, sizeof(uint32_t)))) {
                        free(absent);
                        mp_strmap_free(&by_name);
                        return mp_error(MP_ERR_NOMEM, "out of memory");
                    }
                    if (u->slot < 32) w->p->param_stand_in[u->node] |= 1u << u->slot;
                    break;
                }
            }
        }
    }
    free(absent);
    mp_strmap_free(&by_name);
    return MP_OK;
}

/* Count the parameters mp__fx_params resolved: the total, by dtype, the
 * node that took each, its op type, and the module owning it (its
 * target's path less the last name; the node's module when the tree has no
 * such module) with its ancestors. */
static void mp__fx_count(mp__walk *w) {
    mp_profile *p = w->p;
    mp_model *m = p->m;
    mp_graph *g = w->g;
    bool *ovf = &w->ovf;
    int n_role = 0;
    for (int i = 0; w->role_numel && i < m->n_sig_params; i++) n_role += w->role_numel[i] > 0;
    if (n_role && !(p->role_params = calloc((size_t)n_role, sizeof *p->role_params))) {
        w->nomem = true;
        return;
    }
    for (int i = 0; w->role_numel && i < m->n_sig_params; i++) {
        if (w->role_numel[i] <= 0) continue;
        uint64_t n = (uint64_t)w->role_numel[i];
        int dt = w->role_dtype[i];
        uint64_t bytes = mp_dtype_bytes(dt, (int64_t)n);
        p->total.params = mp_uadd(p->total.params, n, ovf);
        p->total.param_bytes = mp_uadd(p->total.param_bytes, bytes, ovf);
        p->params_by_dtype[dt] = mp_uadd(p->params_by_dtype[dt], n, ovf);
        p->param_bytes_by_dtype[dt] = mp_uadd(p->param_bytes_by_dtype[dt], bytes, ovf);
        struct mp_role_param *rp = &p->role_params[p->params_by_role_n++];
        rp->node = w->role_node[i];
        rp->numel = n;
        rp->name = m->sig_params[i].target ? m->sig_params[i].target : m->sig_params[i].name;
        p->params_by_role = mp_uadd(p->params_by_role, n, ovf);
        mp_node *nd = &g->nodes[w->role_node[i]];
        nd->cost.params = mp_uadd(nd->cost.params, n, ovf);
        nd->cost.param_bytes = mp_uadd(nd->cost.param_bytes, bytes, ovf);
        int op = mp__op_index(w, nd);
        if (op >= 0) {
            p->ops[op].fig.params = mp_uadd(p->ops[op].fig.params, n, ovf);
            p->ops[op].fig.param_bytes = mp_uadd(p->ops[op].fig.param_bytes, bytes, ovf);
        }
        const char *t = m->sig_params[i].target;
        const char *dot = t ? strrchr(t, '.') : NULL;
        int md = dot ? mp_strmap_getn(&m->module_paths, t, (size_t)(dot - t)) : -1;
        if (md < 0) md = nd->module;
        /* in each module's row of the op type that took it; a module that
         * holds no node of that type (a BatchNorm the exporter folded into
         * the convolution before it) counts it in its "(folded)" row
         * (mp__modops_order) */
        for (; md >= 0; md = m->modules[md].parent) {
            p->mods[md].params = mp_uadd(p->mods[md].params, n, ovf);
            p->mods[md].param_bytes = mp_uadd(p->mods[md].param_bytes, bytes, ovf);
            int row = op >= 0 && p->modops ? mp__modop_find(p, md, op) : -1;
            if (row >= 0) {
                p->modops[row].fig.params = mp_uadd(p->modops[row].fig.params, n, ovf);
                p->modops[row].fig.param_bytes = mp_uadd(p->modops[row].fig.param_bytes, bytes, ovf);
            }
        }
    }
}

/* Is the signature's parameter in the graph (an initializer or an input,
 * by its name or target)? */
static bool mp__sig_present(const mp_graph *g, const struct mp_sig_param *sp) {
    const char *names[2] = {sp->target, sp->name};
    for (int i = 0; i < 2; i++) {
        int v = names[i] ? mp_graph_find(g, names[i]) : -1;
        if (v >= 0 && (g->values[v].flags & (MP_VAL_INIT | MP_VAL_INPUT))) return true;
    }
    return false;
}

/* The declared shape of an absent parameter (a value info by its name or
 * target with every dim known): its value, -1 when none. */
static int mp__sig_shape(const mp_graph *g, const struct mp_sig_param *sp) {
    const char *names[2] = {sp->target, sp->name};
    for (int i = 0; i < 2; i++) {
        int v = names[i] ? mp_graph_find(g, names[i]) : -1;
        if (v < 0 || g->values[v].decl_rank < 0) continue;
        const mp_value *val = &g->values[v];
        bool known = true;
        for (int d = 0; d < val->decl_rank; d++)
            if (val->decl_dims[d] < 0) known = false;
        if (known) return v;
    }
    return -1;
}

/* Does shape (rank, dims) broadcast (numpy rules) to t's shape? */
static bool mp__broadcasts_to(int rank, const int64_t *dims, const mp_tensor *t) {
    if (rank > t->rank) return false;
    for (int i = 0; i < rank; i++) {
        int64_t s = dims[rank - 1 - i], d = t->dims[t->rank - 1 - i];
        if (s != d && s != 1) return false;
    }
    return true;
}

/* Is the undeclared tensor v used only by nodes whose fx nodes name their
 * parameters, each of them counted (in the graph by name, or by PyTorch's
 * shape)? Then the exporter computed it from counted parameters: a fold
 * that adds nothing. */
static bool mp__fx_folded_counted(const mp__walk *w, int v, mp_param_note *note) {
    const mp_model *m = w->p->m;
    const mp_graph *g = w->g;
    bool any = false;
    for (int e = mp__use_first(w, v); e >= 0; e = w->uses[e].next) {
        if (w->uses[e].copy) continue;
        const mp_fx *fx = g->nodes[w->uses[e].node].fx;
        if (!fx || !w->role_numel) return false;
        for (int j = 0; j < fx->n_params; j++) {
            int i = -1;
            for (int s = 0; s < m->n_sig_params && i < 0; s++)
                if (m->sig_params[s].name && strcmp(m->sig_params[s].name, fx->params[j]) == 0)
                    i = s;
            if (i < 0) return false;
            if (w->role_numel[i] <= 0 && !mp__sig_present(g, &m->sig_params[i])) return false;
            bool dup = false;
            for (int s = 0; s < note->n_src && s < MP_PNOTE_SRC; s++) dup |= note->src[s] == i;
            if (!dup) {
                if (note->n_src < MP_PNOTE_SRC) note->src[note->n_src] = i;
                note->n_src++;
            }
        }
        any = true;
    }
    return any;
}

/* Constants a model with a graph signature derived from its declared
 * parameters (the optimizer of PyTorch's dynamo exporter folds a weight's
 * transpose, a token's expand over the batch, a cast, a concat): each is
 * undeclared, used in a module that owns a declared parameter the graph no
 * longer holds. It counts as that parameter, once: by the parameter's
 * declared shape when the file gives one; a broadcast (expand, tile)
 * otherwise by the values (a dim whose slices are all equal was
 * broadcast), or, with weights absent, by its own elements as an upper
 * bound; a rearrangement (transpose, reshape, cast, unsqueeze) or a
 * concat keeps the elements of what it was made from. */
static mp_status mp__derived(mp__walk *w) {
    mp_profile *p = w->p;
    mp_model *m = p->m;
    mp_graph *g = w->g;
    int ns = m->n_sig_params, nm = m->n_modules;
    if (!m->has_signature || g != m->graph || ns == 0 || nm == 0) return MP_OK;
    /* the absent parameters, listed per owning module */
    int *head = malloc(sizeof(int) * ((size_t)nm + 3 * (size_t)ns));
    if (!head) return mp_error(MP_ERR_NOMEM, "out of memory");
    int *next = head + nm, *shape = next + ns, *claim = shape + ns;
    for (int i = 0; i < nm; i++) head[i] = -1;
    for (int i = ns - 1; i >= 0; i--) {
        const struct mp_sig_param *sp = &m->sig_params[i];
        shape[i] = claim[i] = -1;
        /* counted by PyTorch's shape (mp__fx_params): not a candidate */
        if (!sp->target || mp__sig_present(g, sp) || (w->role_numel && w->role_numel[i] > 0))
            continue;
        const char *dot = strrchr(sp->target, '.');
        int md = mp_strmap_getn(&m->module_paths, sp->target, dot ? (size_t)(dot - sp->target) : 0);
        if (md < 0) continue;
        const char *cls = m->modules[md].cls;
        if (cls && strstr(cls, "BatchNorm")) p->bn_folded = true;
        shape[i] = mp__sig_shape(g, sp);
        next[i] = head[md];
        head[md] = i;
    }
    mp_status st = MP_OK;
    for (int k = 0; k < w->n_inits && !st; k++) {
        int v = w->inits[k];
        mp_value *val = &g->values[v];
        if (!(val->flags & MP_VAL_PARAM) || mp__declared(w, v)) continue;
        const mp_tensor *t = val->init;
        mp_param_note note = {.kind = MP_PNOTE_DERIVED, .value = v, .source = -1};
        note.how = mp__fold_how(val->name);
        note.elems = note.counted = (uint64_t)t->numel;
        if (mp__fx_folded_counted(w, v, &note)) {
            /* a fold of parameters counted on their own (a BatchNorm's
             * shift folded into the convolution's new bias) */
            note.counted = 0;
            if (!mp__judged(w, v, 0, -1) || !mp__pnote(p, &note))
                st = mp_error(MP_ERR_NOMEM, "out of memory");
            continue;
        }
        /* its candidates: the absent parameters of the modules using it */
        int cand[64], n_cand = 0;
        for (int e = mp__use_first(w, v); e >= 0; e = w->uses[e].next) {
            int md = w->uses[e].copy || w->uses[e].stand_in ? -1 : g->nodes[w->uses[e].node].module;
            for (int i = md >= 0 ? head[md] : -1; i >= 0 && n_cand < 64; i = next[i]) {
                bool dup = false;
                for (int c = 0; c < n_cand; c++) dup |= cand[c] == i;
                if (!dup) cand[n_cand++] = i;
            }
        }
        if (!n_cand) continue;
        bool bcast = note.how && (strcmp(note.how, "expand") == 0 || strcmp(note.how, "tile") == 0);
        bool gather = note.how && strcmp(note.how, "gather") == 0;
        bool all_known = true;
        for (int c = 0; c < n_cand; c++) all_known &= shape[cand[c]] >= 0;
        int pick = -1;
        if (bcast) { /* the first whose declared shape broadcasts to it */
            for (int c = 0; c < n_cand && pick < 0; c++) {
                const mp_value *sv = shape[cand[c]] >= 0 ? &g->values[shape[cand[c]]] : NULL;
                if (sv && mp__broadcasts_to(sv->decl_rank, sv->decl_dims, t)) pick = cand[c];
            }
        }
        if (pick >= 0) {
            note.src[0] = pick;
            note.n_src = 1;
        } else {
            for (int c = 0; c < n_cand; c++)
                if (c < MP_PNOTE_SRC) note.src[c] = cand[c];
            note.n_src = n_cand;
        }
        if (pick >= 0) {
            const mp_value *sv = &g->values[shape[pick]];
            note.counted = (uint64_t)mp_dims_product(sv->decl_dims, sv->decl_rank);
        } else if (bcast) {
            int64_t e = mp_tensor_broadcast_source(m, t);
            if (e > 0) {
                note.counted = (uint64_t)e;
            } else {
                note.kind = MP_PNOTE_BOUND;
                p->params_bound = true;
            }
        } else if (gather && !all_known) {
            /* a table gathered by an index (a relative position bias)
             * keeps each entry: its distinct values (same.c) */
            bool mask;
            int64_t e = mp_tensor_distinct(m, t, &mask);
            if (e > 0 && !mask) {
                note.counted = (uint64_t)e;
            } else {
                note.kind = MP_PNOTE_BOUND;
                p->params_bound = true;
            }
        } else if (all_known) { /* their declared elements, each once */
            note.counted = 0;
            for (int c = 0; c < n_cand; c++) {
                const mp_value *sv = &g->values[shape[cand[c]]];
                if (claim[cand[c]] < 0)
                    note.counted += (uint64_t)mp_dims_product(sv->decl_dims, sv->decl_rank);
            }
        }
        /* a parameter with a declared shape already counted by another
         * derived constant: that one counts this one's uses too */
        bool aliased = false;
        if (note.n_src == 1 && shape[note.src[0]] >= 0) {
            int first = claim[note.src[0]];
            if (first >= 0) {
                aliased = true;
                if (!mp__judged(w, v, -1, first)) st = mp_error(MP_ERR_NOMEM, "out of memory");
                note.counted = 0;
            } else {
                claim[note.src[0]] = v;
            }
        } else if (all_known && !bcast) {
            for (int c = 0; c < n_cand; c++)
                if (claim[cand[c]] < 0) claim[cand[c]] = v;
        }
        if (note.counted != note.elems && !aliased && !mp__judged(w, v, (int64_t)note.counted, -1))
            st = mp_error(MP_ERR_NOMEM, "out of memory");
        if (note.kind == MP_PNOTE_BOUND && note.elems > 1)
            p->params_bound_excess = mp_uadd(p->params_bound_excess, note.elems - 1, &w->ovf);
        if (!mp__pnote(p, &note)) st = mp_error(MP_ERR_NOMEM, "out of memory");
    }
    free(head);
    return st;
}

/* Is a's shape a permutation of b's (the same dims in some order)? */
static bool mp__dims_permuted(const mp_tensor *a, const mp_tensor *b) {
    if (a->rank != b->rank || a->rank > 8) return false;
    unsigned used = 0;
    for (int i = 0; i < a->rank; i++) {
        int k = 0;
        while (k < b->rank && ((used & (1u << k)) || b->dims[k] != a->dims[i])) k++;
        if (k == b->rank) return false;
        used |= 1u << k;
    }
    return true;
}

/* A name the TorchScript exporter gives a tensor it computed: `onnx::MatMul_12`
 * (torch >= 1.10), or a bare number (older releases). */
static bool mp__anonymous(const char *name) {
    if (strncmp(name, "onnx::", 6) == 0) return true;
    if (!name[0]) return false;
    for (const char *c = name; *c; c++)
        if (*c < '0' || *c > '9') return false;
    return true;
}

static int mp__by_numel(const void *x, const void *y, void *ctx) {
    const mp_graph *g = ctx;
    int64_t a = g->values[*(const int *)x].init->numel, b = g->values[*(const int *)y].init->numel;
    return a < b ? -1 : a > b;
}

/* A model without a signature (TorchScript's exporter): an anonymous
 * initializer (`onnx::MatMul_N`, a constant the exporter computed) equal
 * to a transpose, cast or reshape of a named parameter is that parameter
 * (a tied weight folded into a copy): counted once, with the named one.
 * With weights absent, one whose shape is a permutation of a named
 * parameter's is counted and said to be a possible copy. Values are read
 * only for pairs whose shapes already match. Also notes convolutions whose
 * weights the exporter computed (BatchNorm folded into them). */
static mp_status mp__copies(mp__walk *w) {
    mp_profile *p = w->p;
    mp_model *m = p->m;
    mp_graph *g = w->g;
    if (m->has_signature || g != m->graph) return MP_OK;
    int *named = malloc(sizeof(int) * (size_t)(w->n_inits ? w->n_inits : 1));
    if (!named) return mp_error(MP_ERR_NOMEM, "out of memory");
    int n_named = 0;
    for (int k = 0; k < w->n_inits; k++) {
        const mp_value *val = &g->values[w->inits[k]];
        if ((val->flags & MP_VAL_PARAM) && !mp__anonymous(val->name) && val->init->rank >= 2)
            named[n_named++] = w->inits[k];
    }
    /* sorted by elements: the candidates of a tensor are one run */
    qsort_r(named, (size_t)n_named, sizeof *named, mp__by_numel, g);
    mp_status st = MP_OK;
    for (int k = 0; k < w->n_inits && !st; k++) {
        int v = w->inits[k];
        const mp_value *val = &g->values[v];
        const mp_tensor *t = val->init;
        if (!(val->flags & MP_VAL_PARAM) || !mp__anonymous(val->name) || t->rank < 2) continue;
        for (int e = mp__use_first(w, v); e >= 0; e = w->uses[e].next)
            if (w->uses[e].slot == 1 && mp_node_folded_bn(g, &g->nodes[w->uses[e].node])) p->bn_folded = true;
        int lo = 0, hi = n_named;
        while (lo < hi) { /* the first named tensor with as many elements */
            int mid = (lo + hi) / 2;
            if (g->values[named[mid]].init->numel < t->numel) lo = mid + 1;
            else hi = mid;
        }
        mp_param_note note = {.value = v, .source = -1, .elems = (uint64_t)t->numel};
        for (int i = lo; i < n_named && g->values[named[i]].init->numel == t->numel; i++) {
            const mp_tensor *nt = g->values[named[i]].init;
            bool permuted = mp__dims_permuted(t, nt);
            if (mp_tensor_has_values(t) && mp_tensor_has_values(nt)) {
                const char *how = NULL;
                if (mp_tensor_same(m, t, nt, &how)) {
                    note.kind = MP_PNOTE_SAME;
                    note.source = named[i];
                    note.how = how;
                    note.counted = 0;
                    if (!mp__judged(w, v, -1, named[i])) st = mp_error(MP_ERR_NOMEM, "out of memory");
                    break;
                }
            } else if (permuted && note.kind == 0) {
                note.kind = MP_PNOTE_MAYBE_COPY;
                note.source = named[i];
                note.how = "transpose";
                note.counted = note.elems;
            }
        }
        if (note.kind == MP_PNOTE_MAYBE_COPY)
            p->params_maybe_copies = mp_uadd(p->params_maybe_copies, note.elems, &w->ovf);
        if (note.kind && !mp__pnote(p, &note)) st = mp_error(MP_ERR_NOMEM, "out of memory");
    }
    free(named);
    return st;
}

/* An attention's additive mask or bias the TorchScript exporter folded to
 * an anonymous constant (docs/COUNTING.md, "Folded attention masks and
 * biases"): every use is a mask Add of an attention the pattern layer
 * found. Judged by its values: 0 and -inf only, a mask (a buffer PyTorch
 * holds, or code: not a parameter); other values, a table gathered by an
 * index (Swin's relative position bias, T5's bucketed bias), counted as
 * its distinct values, which are the table's entries; values absent, its
 * own elements, an upper bound. */
static mp_status mp__attn_biases(mp__walk *w) {
    mp_profile *p = w->p;
    mp_model *m = p->m;
    mp_graph *g = w->g;
    if (m->has_signature || g != m->graph) return MP_OK;
    const mp_patterns *P = NULL;
    for (int k = 0; k < w->n_inits; k++) {
        int v = w->inits[k];
        mp_value *val = &g->values[v];
        const mp_tensor *t = val->init;
        if (!(val->flags & MP_VAL_PARAM) || !mp__anonymous(val->name) || t->rank < 2 ||
            !mp_dtype_is_float(t->dtype) || (w->alias && w->alias[v] >= 0) || (w->pcount && w->pcount[v] >= 0))
            continue;
        bool any = false, adds = true;
        for (int e = mp__use_first(w, v); e >= 0 && adds; e = w->uses[e].next) {
            any = true;
            adds = !w->uses[e].copy && strcmp(g->nodes[w->uses[e].node].op, "Add") == 0;
        }
        if (!any || !adds) continue;
        if (!P && !(P = mp_patterns_of(g))) {
            mp_error_clear(); /* out of memory: counted as before */
            return MP_OK;
        }
        bool masks = true;
        for (int e = mp__use_first(w, v); e >= 0 && masks; e = w->uses[e].next) {
            mp_pref r = mp_pattern_at(P, w->uses[e].node);
            masks = r.kind == MP_PAT_ATTN && r.part == MP_PART_MASK;
        }
        if (!masks) continue;
        bool mask;
        int64_t distinct = mp_tensor_distinct(m, t, &mask);
        mp_param_note note = {.kind = MP_PNOTE_ATTN_BIAS, .value = v, .source = -1, .elems = (uint64_t)t->numel};
        if (distinct < 0) {
            note.how = "unread";
            note.counted = note.elems;
            p->params_bound = true;
        } else if (mask) {
            note.how = "mask";
            note.counted = 0;
            val->flags &= ~MP_VAL_PARAM;
            mp__buffer(w, t);
        } else {
            note.how = "gathered";
            note.counted = (uint64_t)distinct;
            if (!mp__judged(w, v, distinct, -1)) return mp_error(MP_ERR_NOMEM, "out of memory");
        }
        if (!mp__pnote(p, &note)) return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    return MP_OK;
}

/* Judge what the exporters folded or copied, then move the uses of each
 * tensor counted by another onto that one. */
static mp_status mp__judge(mp__walk *w) {
    mp_graph *g = w->g;
    mp_status st = mp__derived(w);
    if (!st) st = mp__copies(w);
    if (!st) st = mp__attn_biases(w);
    for (int k = 0; k < w->n_inits && !st && w->alias; k++) {
        int v = w->inits[k], r = w->alias[v];
        if (r < 0) continue;
        for (int e = mp__use_first(w, v); e >= 0; e = w->uses[e].next) {
            const mp__use *u = &w->uses[e];
            if (!mp__use_add(w, r, u->node, u->op, u->copy, u->slot))
                return mp_error(MP_ERR_NOMEM, "out of memory");
        }
        g->values[v].flags &= ~MP_VAL_PARAM;
    }
    return st;
}

/* Mark the parameters (weights, their copies, quantized constants) and
 * count them. */
mp_status mp__params(mp__walk *w) {
    mp_profile *p = w->p;
    mp_model *m = p->m;
    mp_graph *g = w->g;
    bool buffer;
    for (int i = 0; i < w->n_inits; i++) {
        mp_value *val = &g->values[w->inits[i]];
        if (mp__is_param(w, w->inits[i], val->init, &buffer)) val->flags |= MP_VAL_PARAM;
        else if (buffer) mp__buffer(w, val->init);
    }
    for (int c = 0; c < w->n_copies; c++) {
        const mp_node *n = &g->nodes[w->copies[c]];
        const mp_value *src = &g->values[n->in[0]];
        if (mp__is_param(w, n->out[0], src->init, &buffer)) g->values[n->out[0]].flags |= MP_VAL_PARAM;
    }
    mp_status jst = mp__fx_params(w);
    if (!jst) jst = mp__judge(w);
    if (jst) return jst;
    int n_chain = 0, *chain = NULL;
    if (w->any_dequant) {
        chain = malloc(sizeof(int) * (size_t)(g->n_values ? g->n_values : 1));
        mp_status st = chain ? mp__mark_quantized(w, chain, &n_chain)
                             : mp_error(MP_ERR_NOMEM, "out of memory");
        if (st) {
            free(chain);
            return st;
        }
    }
    int ns = m->n_modules ? m->n_modules : 1;
    int *stamp = malloc(sizeof(int) * (size_t)(ns + (p->n_ops ? p->n_ops : 1)));
    if (!stamp) {
        free(chain);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    int *op_stamp = stamp + ns;
    for (int i = 0; i < m->n_modules; i++) stamp[i] = -1;
    for (int i = 0; i < p->n_ops; i++) op_stamp[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) w->pos[g->order[i]] = i;
    for (int i = 0; i < w->n_inits; i++)
        if (g->values[w->inits[i]].flags & MP_VAL_PARAM) mp__param(w, w->inits[i], stamp, op_stamp);
    for (int c = 0; c < w->n_copies; c++) {
        int v = g->nodes[w->copies[c]].out[0];
        if (g->values[v].flags & MP_VAL_PARAM) mp__param(w, v, stamp, op_stamp);
    }
    for (int c = 0; c < n_chain; c++) mp__param(w, chain[c], stamp, op_stamp);
    mp__fx_count(w);
    free(stamp);
    free(chain);
    if (w->nomem) return mp_error(MP_ERR_NOMEM, "out of memory");
    /* the root holds every parameter, used or not */
    if (m->n_modules > 0) {
        p->mods[0].params = p->total.params;
        p->mods[0].param_bytes = p->total.param_bytes;
    }
    return MP_OK;
}