/* From a shaped, costed graph to the profile: parameters (shared weights
 * once), activation liveness, per-module and per-op aggregation.
 *
 * mp_profile_static infers the nodes one at a time in execution order and
 * takes each into the figures at once, while its data is in cache: one
 * walk serves inference, op types, modules, liveness and the uses of
 * weights, where a pass over all nodes and values for each would stream
 * the whole graph through the cache again every time.
 *
 * This file: op types, figures, liveness, the walk and the profile;
 * parameter attribution is params.c, the by-module-and-operator table
 * bymodop.c; what they share is analyze_int.h. */
#include "analyze/analyze.h"

#include "analyze/same.h"

#include <stdlib.h>
#include "analyze/analyze_int.h"

static unsigned mp__op_kind(const char *domain, const char *op) {
    static const char *const chain[] = {"Cast", "Identity", "Reshape", "Transpose", "Div",
                                        "Mul", "Round", "Clip", "Unsqueeze", "Squeeze"};
    unsigned k = strcmp(op, "DequantizeLinear") == 0 ? MP__K_DEQUANT : 0;
    if (domain[0]) return k;
    if (strcmp(op, "Identity") == 0) k |= MP__K_IDENTITY;
    if (strcmp(op, "Constant") == 0) k |= MP__K_CONSTANT;
    for (size_t c = 0; c < MP_ARRAY_LEN(chain); c++)
        if (strcmp(op, chain[c]) == 0) k |= MP__K_CHAIN;
    return k;
}

/* Liveness state of a value during the walk (mp__walk.live): */
#define MP__UNTRACKED 0 /* nothing to free: no bytes, or lives to the end */
#define MP__FOLDED (-1) /* computed from weights and constants alone */
#define MP__DEAD (-2)   /* freed: its last use has passed */
/* > 0: an activation with that many uses still to come;
 * <= MP__KEPT: a weight or a copy of one, whose uses are kept: the latest
 * is MP__KEPT - live - 1 (none at MP__KEPT) */
#define MP__KEPT (-3)
#define MP__KEPT_LAST(s) (MP__KEPT - (s) - 1)

/* ---- op types ---- */

/* Op type of n by its name and domain; a new one when first seen. */
static int mp__op_by_name(mp__walk *w, const mp_node *n) {
    mp_profile *p = w->p;
    for (int i = 0; i < p->n_ops; i++)
        if (mp_streq(p->ops[i].op, n->op) && mp_streq(p->ops[i].domain, n->domain)) return i;
    mp_opstat *no = mp_grow(p->ops, sizeof *p->ops, &w->cap_ops, p->n_ops + 1);
    if (no) p->ops = no;
    unsigned char *nk = mp_grow(w->op_kind, 1, &w->cap_kind, p->n_ops + 1);
    if (nk) w->op_kind = nk;
    if (!no || !nk) return -1;
    int idx = p->n_ops++;
    memset(&p->ops[idx], 0, sizeof p->ops[idx]);
    p->ops[idx].domain = n->domain;
    p->ops[idx].op = n->op;
    p->ops[idx].fig.latency_s = -1;
    w->op_kind[idx] = (unsigned char)mp__op_kind(n->domain, n->op);
    return idx;
}

/* Op type of node n (-1: out of memory). The loader looked each node's
 * descriptor up by its (normalized) domain and op name, so nodes sharing
 * a descriptor share both: most nodes find their type by the descriptor's
 * address, without reading their strings. */

/* The first node of a descriptor (to slot h), or a node without one. */
int mp__op_index_new(mp__walk *w, const mp_node *n, unsigned h) {
    if (n->desc) {
        int idx = mp__op_by_name(w, n);
        if (idx >= 0 && w->n_desc < MP__DESC_SLOTS / 2) { /* else: by name each time */
            w->by_desc[h].desc = n->desc;
            w->by_desc[h].op = idx;
            w->n_desc++;
        }
        return idx;
    }
    /* unknown ops (no descriptor) can be many nodes: a map by name */
    int idx = mp_strmap_get(&w->by_name, n->op);
    if (idx >= 0 && mp_streq(w->p->ops[idx].domain, n->domain)) return idx;
    idx = mp__op_by_name(w, n);
    if (idx >= 0 && mp_strmap_put(&w->by_name, n->op, idx) != MP_OK) return -1;
    return idx;
}

/* ---- figures ---- */

/* The five summed figures of a node's cost or of another set (mp_cost and
 * mp_fig name them alike), each sum saturating. */
#define MP__SAT_SUMS(f, src, ovf)                                               \
    do {                                                                        \
        (f)->macs = mp_uadd((f)->macs, (src)->macs, ovf);                       \
        (f)->flops = mp_uadd((f)->flops, (src)->flops, ovf);                    \
        (f)->bytes_read = mp_uadd((f)->bytes_read, (src)->bytes_read, ovf);     \
        (f)->bytes_written = mp_uadd((f)->bytes_written, (src)->bytes_written, ovf); \
        (f)->act_bytes = mp_uadd((f)->act_bytes, (src)->act_bytes, ovf);        \
    } while (0)

void mp__fig_add_cost(mp_fig *f, const mp_cost *k, bool *ovf) {
    MP__SAT_SUMS(f, k, ovf);
    f->nodes++;
    if (k->flags & MP_COST_UNCOUNTED) f->uncounted++;
    if (k->flags & MP_COST_UNKNOWN) f->unknown++;
    if (k->flags & MP_COST_OVERFLOW) *ovf = true;
}

/* A node into the total, its op type's figures and its module's, with
 * plain additions: a part never exceeds the total, so while no total
 * carries past 64 bits (*carry stays false) none saturates and these are
 * the checked sums. When one does, mp__figs_checked redoes them. */
static inline void mp__fig_add_node(mp_fig *tot, mp_fig *op, mp_fig *mod, const mp_cost *k,
                                    bool *carry) {
#define MP__ADD(field)            \
    do {                          \
        uint64_t x = k->field;    \
        tot->field += x;          \
        c |= tot->field < x;      \
        op->field += x;           \
        mod->field += x;          \
    } while (0)
    bool c = false;
    MP__ADD(macs);
    MP__ADD(flops);
    MP__ADD(bytes_read);
    MP__ADD(bytes_written);
    MP__ADD(act_bytes);
#undef MP__ADD
    *carry |= c;
    int unc = (k->flags & MP_COST_UNCOUNTED) != 0, unk = (k->flags & MP_COST_UNKNOWN) != 0;
    tot->nodes++;
    tot->uncounted += unc;
    tot->unknown += unk;
    op->nodes++;
    op->uncounted += unc;
    op->unknown += unk;
    mod->nodes++;
    mod->uncounted += unc;
    mod->unknown += unk;
}

void mp__fig_add_fig(mp_fig *f, const mp_fig *c, bool *ovf) {
    MP__SAT_SUMS(f, c, ovf);
    f->nodes += c->nodes;
    f->uncounted += c->uncounted;
    f->unknown += c->unknown;
}

/* Some total passed 64 bits: the figures again, each sum saturating. */
static void mp__figs_checked(mp__walk *w) {
    mp_profile *p = w->p;
    mp_graph *g = w->g;
    mp_fig zero = {0};
    zero.latency_s = -1;
    p->total = zero;
    for (int i = 0; i < p->n_ops; i++) p->ops[i].fig = zero;
    for (int i = 0; i < p->m->n_modules; i++) p->mods[i] = zero;
    for (int k = 0; k < g->n_nodes; k++) {
        const mp_node *n = &g->nodes[k];
        mp__fig_add_cost(&p->total, &n->cost, &w->ovf);
        if (n->module >= 0) mp__fig_add_cost(&p->mods[n->module], &n->cost, &w->ovf);
        mp__fig_add_cost(&p->ops[mp__op_index(w, n)].fig, &n->cost, &w->ovf);
    }
}

/* ---- liveness ----
 * Peak of live activations over the execution order: a value lives from
 * its producer to its last consumer; graph inputs from the start and
 * graph outputs to the end. Initializers (weights) are not activations,
 * nor are values computed from weights and constants alone (a weight's
 * Transpose in an export without constant folding, a Constant node's
 * output): runtimes fold those once at load time.
 *
 * The walk adds a value when it is produced and frees it when the last of
 * its uses (n_consumers, counted by the loader) has passed. When the
 * counts do not add up, or the bytes come near 2^63 (where the order of
 * checked additions decides what overflows), mp__liveness_replay redoes it
 * as a difference array in value order. */

/* Activation bytes of v; false when past what the walk handles. */
static bool mp__act_bytes(const mp_value *v, uint64_t *b) {
    int64_t n = mp_value_numel(v);
    if (n == -2) return false;
    *b = n < 0 ? 0 : mp_dtype_bytes(v->dtype, n);
    return *b <= (uint64_t)INT64_MAX / 4;
}

/* Activation v appears (its bytes in *known when the driver counted
 * them); one without uses is freed (*die) at once. */
static void mp__born(mp__walk *w, int v, const mp_value *val, const uint64_t *known,
                     uint64_t *die) {
    uint64_t b;
    /* the driver's count passes INT64_MAX / 4 (UINT64_MAX past 64 bits)
     * exactly where mp__act_bytes fails */
    if (known ? (b = *known) > (uint64_t)INT64_MAX / 4 : !mp__act_bytes(val, &b)) {
        w->live_exact = false;
        return;
    }
    if (!b) return;
    w->live_now += b;
    w->births += b;
    if (w->births > (uint64_t)INT64_MAX) w->live_exact = false;
    if (val->flags & MP_VAL_OUTPUT) return; /* lives to the end */
    if (val->n_consumers > 0) {
        w->live[v] = val->n_consumers;
        w->alive++;
    } else {
        w->live[v] = MP__DEAD;
        *die += b;
    }
}

/* The exact rule, in the order the figures were always added: values in
 * index order, each checked addition to a difference array (folding and
 * last uses worked out again, apart from the walk). */
static mp_status mp__liveness_replay(mp_profile *p, uint64_t *trace) {
    mp_graph *g = p->m->graph;
    int n = g->n_nodes;
    int *pos = malloc(sizeof(int) * (size_t)(n ? n : 1));
    int *last = malloc(sizeof(int) * (size_t)(g->n_values ? g->n_values : 1));
    /* 128 bits: a sum of 64-bit sizes over any graph fits, so the peak is
     * exact up to 2^64 - 1 and saturates (overflow) only past it */
    __int128 *delta = calloc((size_t)n + 2, sizeof *delta);
    bool *folded = calloc((size_t)g->n_values + 1, sizeof *folded);
    if (!pos || !last || !delta || !folded) {
        free(pos);
        free(last);
        free(delta);
        free(folded);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int v = 0; v < g->n_values; v++) last[v] = -1;
    for (int i = 0; i < n; i++) {
        const mp_node *nd = &g->nodes[g->order[i]];
        pos[g->order[i]] = i;
        bool k = nd->n_sub == 0;
        for (int j = 0; j < nd->n_in; j++) {
            int v = nd->in[j];
            if (v < 0) continue;
            last[v] = i;
            if (!(g->values[v].flags & MP_VAL_INIT) && !folded[v]) k = false;
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
        int dies = last[v] > born ? last[v] : born;
        if (val->flags & MP_VAL_OUTPUT) dies = n ? n - 1 : 0;
        delta[born] += (__int128)b;
        delta[dies + 1] -= (__int128)b;
    }
    __int128 live = 0, peak = 0;
    p->peak_node = -1;
    for (int i = 0; i < n; i++) {
        live += delta[i];
        if (trace) trace[i] = live >= (__int128)UINT64_MAX ? UINT64_MAX : (uint64_t)live;
        if (live > peak) {
            peak = live;
            p->peak_node = g->order[i];
        }
    }
    /* past 64 bits: saturated and flagged, as every total is */
    bool live_ovf = peak >= (__int128)UINT64_MAX;
    if (live_ovf) p->overflow = true, p->peak_node = -1;
    p->activation_peak_bytes = live_ovf ? UINT64_MAX : (uint64_t)peak;
    if (trace && live_ovf)
        for (int i = 0; i < n; i++) trace[i] = UINT64_MAX;
    free(pos);
    free(last);
    free(delta);
    free(folded);
    return MP_OK;
}

/* ---- the walk ---- */

/* Keep use (node k of op type op, a copy or not, input slot) of value v. */
bool mp__use_add(mp__walk *w, int v, int k, int op, bool copy, int slot) {
    if (w->n_uses == w->cap_uses) {
        /* most weights have one or two uses */
        int nc = w->cap_uses ? w->cap_uses * 2 : 2 * w->n_inits + 64;
        mp__use *nu = nc > w->cap_uses ? realloc(w->uses, sizeof *nu * (size_t)nc) : NULL;
        if (!nu) return false;
        w->uses = nu;
        w->cap_uses = nc;
    }
    mp__use *u = &w->uses[w->n_uses];
    u->node = k;
    u->op = op;
    u->copy = copy;
    u->stand_in = false;
    u->slot = slot;
    u->next = w->live[v] < MP__KEPT ? MP__KEPT_LAST(w->live[v]) : -1;
    w->live[v] = MP__KEPT - 1 - w->n_uses++;
    return true;
}

/* The latest kept use of v, -1 when none. */
int mp__use_first(const mp__walk *w, int v) {
    return w->live[v] < MP__KEPT ? MP__KEPT_LAST(w->live[v]) : -1;
}

/* An Identity node that copies a weight: PyTorch's exporter keeps one
 * initializer for several equal tensors and names each copy with an
 * Identity output. */
bool mp__is_copy(const mp__walk *w, const mp_node *n, unsigned kind) {
    return (kind & MP__K_IDENTITY) && n->n_in >= 1 && n->n_out >= 1 && n->in[0] >= 0 &&
           n->out[0] >= 0 && (w->g->values[n->in[0]].flags & MP_VAL_INIT);
}

/* Node k, just inferred, into the figures: op type, module,
 * folding, liveness, uses of weights. */
static mp_status mp__visit(mp__walk *w, int k, uint64_t die) {
    mp_profile *p = w->p;
    mp_graph *g = w->g;
    const mp_node *n = &g->nodes[k];
    int op = mp__op_index(w, n);
    if (op < 0) return mp_error(MP_ERR_NOMEM, "out of memory");
    w->node_op[k] = op;
    unsigned kind = w->op_kind[op];
    bool copy = mp__is_copy(w, n, kind);
    mp_fig *mod = n->module >= 0 ? &p->mods[n->module] : &w->no_module;
    mp__fig_add_node(&p->total, &p->ops[op].fig, mod, &n->cost, &w->carry);
    if (n->cost.flags & MP_COST_OVERFLOW) w->ovf = true;
    if (kind & MP__K_DEQUANT) w->any_dequant = true;

    const mp_value *vals = g->values;
    bool folded = n->n_sub == 0;
    for (int j = 0; j < n->n_in; j++) {
        int v = n->in[j];
        if (v < 0) continue;
        int s = w->live[v];
        if (s <= MP__KEPT) { /* a weight or a copy: counts as folded */
            if (!mp__use_add(w, v, k, op, copy, j))
                return mp_error(MP_ERR_NOMEM, "out of memory");
            continue;
        }
        if (s != MP__FOLDED) folded = false;
        if (s > 0) {
            if (--w->live[v] == 0) { /* its last use */
                uint64_t b = 0;
                w->live[v] = MP__DEAD;
                w->alive--;
                if (mp__act_bytes(&vals[v], &b)) die += b;
                else w->live_exact = false;
            }
        } else if (s == MP__DEAD) {
            w->live_exact = false; /* more uses than counted */
        }
    }
    /* a single output's bytes are the node's activation bytes (the driver
     * counts those; cost rules leave them, control flow aside) */
    const uint64_t *known = n->n_out == 1 && n->n_sub == 0 ? &n->cost.act_bytes : NULL;
    for (int o = 0; o < n->n_out; o++) {
        int v = n->out[o];
        if (v < 0) continue;
        const mp_value *val = &vals[v];
        if (copy && o == 0) { /* its uses are kept; liveness counts it folded */
            w->copies[w->n_copies++] = k;
            w->live[v] = MP__KEPT;
            if (!folded) w->live_exact = false;
            continue;
        }
        if (folded) {
            w->live[v] = MP__FOLDED;
            continue;
        }
        w->live[v] = MP__UNTRACKED;
        if (!(val->flags & (MP_VAL_INIT | MP_VAL_OUTER))) mp__born(w, v, val, known, &die);
    }
    if (w->live_now > p->activation_peak_bytes) {
        p->activation_peak_bytes = w->live_now;
        p->peak_node = k;
    }
    if (w->trace) w->trace[w->step++] = w->live_now;
    w->live_now -= die;
    return MP_OK;
}

/* Infer every node of the main graph in order, each visited at once. */
static mp_status mp__walk_graph(mp__walk *w) {
    mp_model *m = w->p->m;
    mp_graph *g = w->g;
    mp_status st = mp_infer_begin(m, w->inits, &w->n_inits);
    if (st) return st;
    for (int i = 0; i < w->n_inits; i++) w->live[w->inits[i]] = MP__KEPT;
    /* room for the usual number of op types, grown past it */
    mp_profile *p = w->p;
    mp_opstat *no = mp_grow(p->ops, sizeof *p->ops, &w->cap_ops, 32);
    if (no) p->ops = no;
    unsigned char *nk = mp_grow(w->op_kind, 1, &w->cap_kind, 32);
    if (nk) w->op_kind = nk;
    if (!no || !nk) return mp_error(MP_ERR_NOMEM, "out of memory");
    uint64_t die = 0; /* graph inputs nothing reads are freed after node 0 */
    for (int j = 0; j < g->n_inputs; j++) {
        int v = g->inputs[j];
        const mp_value *val = &g->values[v];
        if (!(val->flags & MP_VAL_INPUT) || (val->flags & (MP_VAL_INIT | MP_VAL_OUTER)) ||
            val->producer >= 0)
            continue;
        if (w->live[v] != MP__UNTRACKED) {
            w->live_exact = false; /* listed twice */
            continue;
        }
        mp__born(w, v, val, NULL, &die);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        int k = g->order[i];
        if ((st = mp_infer_node(m, g, k))) return st;
        if ((st = mp__visit(w, k, die))) return st;
        die = 0;
    }
    if (w->alive) w->live_exact = false; /* fewer uses than counted */
    return MP_OK;
}

/* ---- the profile ---- */

static int mp__opstat_cmp(const void *a, const void *b, void *ctx) {
    const mp_opstat *ops = ctx;
    const mp_opstat *x = &ops[*(const int *)a], *y = &ops[*(const int *)b];
    if (x->fig.flops != y->fig.flops) return x->fig.flops < y->fig.flops ? 1 : -1;
    if (x->fig.macs != y->fig.macs) return x->fig.macs < y->fig.macs ? 1 : -1;
    if (x->fig.nodes != y->fig.nodes) return x->fig.nodes < y->fig.nodes ? 1 : -1;
    int d = strcmp(x->domain, y->domain);
    return d ? d : strcmp(x->op, y->op);
}

/* The op types by decreasing FLOPs, then MACs; the rows of the module
 * split follow them. */
static mp_status mp__ops_sort(mp_profile *p) {
    int n = p->n_ops;
    int *idx = malloc(sizeof(int) * (size_t)(2 * n + 1));
    mp_opstat *sorted = malloc(sizeof *sorted * (size_t)(n + 1));
    if (!idx || !sorted) {
        free(idx);
        free(sorted);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    int *inv = idx + n;
    for (int i = 0; i < n; i++) idx[i] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, mp__opstat_cmp, p->ops);
    for (int i = 0; i < n; i++) {
        sorted[i] = p->ops[idx[i]];
        inv[idx[i]] = i;
    }
    memcpy(p->ops, sorted, sizeof *sorted * (size_t)n);
    mp_status st = mp__modops_order(p, inv);
    free(idx);
    free(sorted);
    return st;
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

/* The walk and everything after it; p is freed by the caller on error. */
static mp_status mp__profile(mp_profile *p, mp__walk *w) {
    mp_model *m = p->m;
    mp_graph *g = m->graph;
    /* scratch in one block: live (zeroed), then the initializers and the
     * copies (few of either are written) */
    size_t nn = (size_t)g->n_nodes, nv = (size_t)g->n_values;
    int *s = malloc(sizeof(int) * (2 * nv + 3 * nn + 1));
    if (!s) return mp_error(MP_ERR_NOMEM, "out of memory");
    w->live = s;
    w->inits = s + nv;
    w->copies = s + 2 * nv;
    w->node_op = s + 2 * nv + nn;
    w->pos = s + 2 * nv + 2 * nn;
    memset(w->live, 0, sizeof(int) * nv);
    mp_status st = mp__walk_graph(w);
    if (!st && m->n_modules == 0 && mp_model_module(m, "", 0) < 0) {
        free(s);
        w->root_failed = true; /* said as before: not a limit message */
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    if (!st) {
        if (w->carry) mp__figs_checked(w);
        /* children before parents: a child's index is always above its parent's */
        for (int i = m->n_modules - 1; i > 0; i--)
            mp__fig_add_fig(&p->mods[m->modules[i].parent], &p->mods[i], &w->ovf);
        st = mp__modops(w);
        if (!st) st = mp__params(w);
    }
    if (!st && !w->live_exact) st = mp__liveness_replay(p, w->trace);
    if (!st) st = mp__unresolved(p);
    if (!st) st = mp__ops_sort(p);
    if (w->ovf) p->overflow = true;
    free(s);
    return st;
}

/* Each node's operator descriptor: the registry's entry for its op,
 * domain and opset (the loader set the opset; it knows no operators).
 * Remembered per (op, domain) string pair: the decoder interns both, so
 * nodes of one type share the pointers and all but the first skip the
 * registry. Bodies too; a node that has one already keeps it. */
typedef struct mp__desc_cache {
    struct { const char *op, *domain; int opset; const mp_op *desc; } e[64];
} mp__desc_cache;

static void mp__resolve_descs(mp_graph *g, mp__desc_cache *c, int depth) {
    if (!g || depth > 64) return;
    for (int k = 0; k < g->n_nodes; k++) {
        mp_node *n = &g->nodes[k];
        for (int s = 0; s < n->n_sub; s++) mp__resolve_descs(n->sub[s], c, depth + 1);
        if (n->desc || !n->op || !n->domain) continue;
        unsigned slot = (unsigned)(((uintptr_t)n->op >> 4) ^ ((uintptr_t)n->domain >> 6)) & 63u;
        if (c->e[slot].op != n->op || c->e[slot].domain != n->domain || c->e[slot].opset != n->opset) {
            c->e[slot].op = n->op;
            c->e[slot].domain = n->domain;
            c->e[slot].opset = n->opset;
            c->e[slot].desc = n->opset >= 0 ? mp_op_find(n->domain, n->op, n->opset) : NULL;
        }
        n->desc = c->e[slot].desc;
    }
}

mp_status mp_profile_static(mp_model *m, mp_profile **out) {
    return mp_profile_static_live(m, NULL, out);
}

mp_status mp_profile_static_live(mp_model *m, uint64_t *live, mp_profile **out) {
    *out = NULL;
    if (!m) return mp_error(MP_ERR_USAGE, "no model");
    mp__desc_cache dc;
    memset(&dc, 0, sizeof dc);
    mp__resolve_descs(m->graph, &dc, 0);
    mp_profile *p = calloc(1, sizeof *p);
    /* a model without modules gets a root once inferred (room for it now) */
    int n_mods = m->n_modules ? m->n_modules : 1;
    if (p) p->mods = calloc((size_t)n_mods, sizeof *p->mods);
    mp__walk *w = calloc(1, sizeof *w);
    if (!p || !p->mods || !w) {
        free(w);
        mp_profile_free(p);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    p->m = m;
    p->total.latency_s = -1;
    p->peak_node = -1;
    for (int i = 0; i < n_mods; i++) p->mods[i].latency_s = -1;
    w->p = p;
    w->g = m->graph;
    w->live_exact = true;
    w->trace = live;
    mp_status st = mp__profile(p, w);
    bool root_failed = w->root_failed;
    mp_strmap_free(&w->by_name);
    free(w->op_kind);
    free(w->uses);
    free(w->ubuf);
    free(w->pcount);
    free(w->alias);
    free(w->role_numel);
    free(w->role_node);
    free(w->role_dtype);
    free(w);
    if (st) {
        mp_profile_free(p);
        return root_failed ? st : mp__limit_or(m, st);
    }
    *out = p;
    return MP_OK;
}

/* The static figures counted again from the graph as it is now: a fresh
 * profile takes the place of p's contents (p itself stays: a run holds
 * it), its formulas kept, its measured fields dropped. */
static mp_status mp__recount(mp_profile *p) {
    mp_profile *q = NULL;
    mp_status st = mp_profile_static(p->m, &q);
    if (st) return st;
    mp_formulas *f = p->formulas;
    p->formulas = NULL;
    mp_profile old = *p;
    *p = *q;
    *q = old;
    p->formulas = f;
    mp_profile_free(q);
    return MP_OK;
}

mp_status mp_profile_take_shapes(mp_profile *p, const mp_shape_seen *seen, int n, int *completed) {
    if (completed) *completed = 0;
    if (!p || !p->m || !p->m->graph || (n > 0 && !seen)) return mp_error(MP_ERR_USAGE, "mp_profile_take_shapes: no profile");
    mp_model *m = p->m;
    mp_graph *g = m->graph;
    bool any = false;
    for (int i = 0; i < n; i++) {
        const mp_shape_seen *s = &seen[i];
        if (s->value < 0 || s->value >= g->n_values || s->rank < 0 || s->rank > MP_MAX_RANK) continue;
        mp_value *v = &g->values[s->value];
        if ((v->flags & (MP_VAL_SEQUENCE | MP_VAL_INIT | MP_VAL_INPUT)) || v->seq || v->producer < 0) continue;
        /* only what the inference could not size */
        if (mp_shape_known(v) && !(v->flags & MP_VAL_RUN_SHAPE)) continue;
        bool ok = s->rank == 0 || s->dims;
        for (int d = 0; ok && d < s->rank; d++) ok = s->dims[d] >= 0 && s->dims[d] <= MP_DIM_MAX;
        if (!ok) continue;
        int64_t *dims = mp_arena_calloc(&m->arena, (size_t)(s->rank ? s->rank : 1), sizeof *dims);
        if (!dims) return mp_error(MP_ERR_NOMEM, "out of memory");
        if (s->rank) memcpy(dims, s->dims, sizeof *dims * (size_t)s->rank);
        v->run_rank = s->rank;
        v->run_dims = dims;
        any = true;
    }
    if (!any && !m->has_run_shapes) return MP_OK;
    m->has_run_shapes = true;
    m->run_shapes_apply = true;
    mp_status st = mp__recount(p);
    m->run_shapes_apply = false;
    if (st) return st;
    if (completed)
        for (int k = 0; k < g->n_nodes; k++) *completed += (g->nodes[k].cost.flags & MP_COST_RUN) != 0;
    return MP_OK;
}

mp_status mp_profile_drop_shapes(mp_profile *p) {
    if (!p || !p->m || !p->m->graph || !p->m->has_run_shapes) return MP_OK;
    mp_graph *g = p->m->graph;
    for (int i = 0; i < g->n_values; i++) g->values[i].run_dims = NULL;
    p->m->has_run_shapes = false;
    /* a restoration: the message a caller's failure left (a plan refused
     * before it is freed) outlives the inference, which clears it */
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", mp_last_error());
    mp_status st = mp__recount(p);
    if (!st && keep[0]) mp_error(MP_OK, "%s", keep);
    return st;
}

void mp_profile_free_measured(mp_profile *p) {
    free(p->node_lat);
    free(p->node_lat_min);
    free(p->node_state);
    free(p->node_head);
    free(p->node_group);
    free(p->node_kernel);
    free(p->mod_fused);
    for (int i = 0; i < p->n_groups; i++) free((char *)p->groups[i].name);
    free(p->groups);
    free(p->stamps.node);
    free(p->stamps.module);
    free(p->stamps.first);
    free(p->stamps.nodes);
    free(p->stamps.start);
    free(p->stamps.dur);
    memset(&p->stamps, 0, sizeof p->stamps);
    free(p->unplaced);
    p->unplaced = NULL;
    p->n_unplaced = 0;
    memset(&p->run, 0, sizeof p->run);
    p->node_lat = p->node_lat_min = NULL;
    p->node_state = p->node_head = NULL;
    p->node_group = p->node_kernel = NULL;
    p->mod_fused = NULL;
    p->groups = NULL;
    p->n_groups = 0;
}

mp_status mp_profile_alloc_measured(mp_profile *p, int groups) {
    size_t nn = (size_t)p->m->graph->n_nodes + 1, nm = (size_t)(p->m->n_modules ? p->m->n_modules : 1) + 1;
    mp_profile_free_measured(p);
    p->node_lat = calloc(nn, sizeof *p->node_lat);
    p->node_lat_min = calloc(nn, sizeof *p->node_lat_min);
    p->node_state = calloc(nn, sizeof *p->node_state);
    p->node_head = calloc(nn, sizeof *p->node_head);
    p->node_group = calloc(nn, sizeof *p->node_group);
    p->node_kernel = calloc(nn, sizeof *p->node_kernel);
    p->mod_fused = calloc(nm, sizeof *p->mod_fused);
    p->groups = calloc((size_t)groups + 1, sizeof *p->groups);
    if (!p->node_lat || !p->node_lat_min || !p->node_state || !p->node_head || !p->node_group ||
        !p->node_kernel || !p->mod_fused || !p->groups) {
        mp_profile_free_measured(p);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    return MP_OK;
}

void mp_profile_free(mp_profile *p) {
    if (!p) return;
    free(p->mods);
    free(p->ops);
    free(p->modops);
    free(p->modop_at);
    free(p->modop_parent);
    free(p->node_modop);
    free(p->unresolved);
    free(p->pnotes);
    free(p->param_stand_in);
    free(p->role_params);
    mp_formulas_free(p->formulas);
    mp_profile_free_measured(p);
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
