/* From a shaped, costed graph to the profile: parameters (shared weights
 * once), activation liveness, per-module and per-op aggregation.
 *
 * mp_profile_static infers the nodes one at a time in execution order and
 * takes each into the figures at once, while its data is in cache: one
 * walk serves inference, op types, modules, liveness and the uses of
 * weights, where a pass over all nodes and values for each would stream
 * the whole graph through the cache again every time. */
#include "analyze/analyze.h"

#include "analyze/same.h"

#include <stdlib.h>

/* What the parameter rules ask of an op type: found once per type, by
 * name, so that no node compares names. */
enum {
    MP__K_IDENTITY = 1u << 0, /* Identity (default domain): may copy a weight */
    MP__K_CONSTANT = 1u << 1, /* Constant (default domain) */
    MP__K_DEQUANT = 1u << 2,  /* DequantizeLinear (any domain) */
    MP__K_CHAIN = 1u << 3,    /* may quantize a weight on its way to a DequantizeLinear */
};

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

/* One use of a weight (or of a copy of one): the consumer node, its op
 * type, whether it is itself a copy, and the input slot. A value's uses
 * form a list, latest first. */
typedef struct mp__use {
    int node, op, slot, next;
    bool copy;
    bool stand_in;  /* the node took it for another, equal parameter (mp__fx_params) */
} mp__use;

/* Liveness state of a value during the walk (mp__walk.live): */
#define MP__UNTRACKED 0 /* nothing to free: no bytes, or lives to the end */
#define MP__FOLDED (-1) /* computed from weights and constants alone */
#define MP__DEAD (-2)   /* freed: its last use has passed */
/* > 0: an activation with that many uses still to come;
 * <= MP__KEPT: a weight or a copy of one, whose uses are kept: the latest
 * is MP__KEPT - live - 1 (none at MP__KEPT) */
#define MP__KEPT (-3)
#define MP__KEPT_LAST(s) (MP__KEPT - (s) - 1)

/* Op types by descriptor address (open addressing). */
#define MP__DESC_SLOTS 256

typedef struct mp__walk {
    mp_profile *p;
    mp_graph *g;
    bool ovf;
    bool carry;               /* a total passed 64 bits (mp__fig_add_node) */
    mp_fig no_module;         /* takes the figures of nodes outside any module */
    /* op types */
    int cap_ops, cap_kind;
    unsigned char *op_kind;   /* MP__K_* per op type */
    struct {
        const mp_op *desc;
        int op;
    } by_desc[MP__DESC_SLOTS];
    int n_desc;
    mp_strmap by_name;        /* op types of nodes without a descriptor */
    bool any_dequant;
    /* weights: their uses and the nodes that copy them */
    mp__use *uses;
    int n_uses, cap_uses;
    int *inits, n_inits;      /* the initializers */
    int *copies, n_copies;    /* Identity nodes copying a weight */
    /* parameters judged (mp__judge): per value, the elements it counts
     * (-1: its own) and the value that counts it instead (-1: itself) */
    int64_t *pcount;
    int *alias;
    /* declared parameters counted by PyTorch's shape (mp__fx_params), per
     * m->sig_params index: elements (0: not), the node that took it, dtype */
    int64_t *role_numel;
    int *role_node, *role_dtype;
    int *node_op;             /* per node: its op type (before the op types are sorted) */
    int *pos;                 /* per node: its place in the execution order */
    int *ubuf, cap_ubuf;      /* one value's uses in execution order (mp__param) */
    /* liveness */
    int *live;                /* per value: an MP__ state, the uses to come or kept */
    uint64_t live_now, births;
    int alive;                /* activations with uses to come */
    bool live_exact;          /* false: replay it exactly (mp__liveness_replay) */
    bool root_failed;         /* no room for the root module */
    bool nomem;               /* out of memory where no status is returned */
    uint64_t *trace;          /* when not NULL: the live bytes at each step (mp_profile_static_live) */
    int step;
} mp__walk;

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
static int mp__op_index_new(mp__walk *w, const mp_node *n, unsigned h);

static inline int mp__op_index(mp__walk *w, const mp_node *n) {
    unsigned h = 0;
    if (n->desc) {
        /* Fibonacci hashing: descriptors sit in arrays, a fixed stride apart */
        uint64_t a = (uint64_t)(uintptr_t)n->desc * UINT64_C(0x9E3779B97F4A7C15);
        h = (unsigned)(a >> 56) & (MP__DESC_SLOTS - 1);
        while (w->by_desc[h].desc) {
            if (w->by_desc[h].desc == n->desc) return w->by_desc[h].op;
            h = (h + 1) & (MP__DESC_SLOTS - 1);
        }
    }
    return mp__op_index_new(w, n, h);
}

/* The first node of a descriptor (to slot h), or a node without one. */
static int mp__op_index_new(mp__walk *w, const mp_node *n, unsigned h) {
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

static void mp__fig_add_cost(mp_fig *f, const mp_cost *k, bool *ovf) {
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

static void mp__fig_add_fig(mp_fig *f, const mp_fig *c, bool *ovf) {
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
    int64_t *delta = calloc((size_t)n + 2, sizeof *delta);
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
    bool live_ovf = false;
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
        if (trace) trace[i] = (uint64_t)live;
        if (live > peak) {
            peak = live;
            p->peak_node = g->order[i];
        }
    }
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
static bool mp__use_add(mp__walk *w, int v, int k, int op, bool copy, int slot) {
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
static int mp__use_first(const mp__walk *w, int v) {
    return w->live[v] < MP__KEPT ? MP__KEPT_LAST(w->live[v]) : -1;
}

/* An Identity node that copies a weight: PyTorch's exporter keeps one
 * initializer for several equal tensors and names each copy with an
 * Identity output. */
static bool mp__is_copy(const mp__walk *w, const mp_node *n, unsigned kind) {
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

/* ---- by module and operator (docs/COUNTING.md, "By module and operator") ----
 * Each module has one row per op type among its nodes and its submodules'.
 * Made after the walk: the op types each module holds (its own nodes',
 * then its children's, bottom up: a child's index is above its parent's),
 * a module's rows by op index for the lookups; each node's cost into its
 * own module's row, then each module's rows into its parent's. Parameters
 * are added by mp__param; the rows take the report's order once the op
 * types have theirs (mp__modops_order). */

/* The row of op type `op` in module md, -1 when none (rows by op index). */
static int mp__modop_find(const mp_profile *p, int md, int op) {
    int lo = p->modop_at[md], end = p->modop_at[md + 1], hi = end;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (p->modops[mid].op < op) lo = mid + 1;
        else hi = mid;
    }
    return lo < end && p->modops[lo].op == op ? lo : -1;
}

static int mp__int_cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

static mp_status mp__modops(mp__walk *w) {
    mp_profile *p = w->p;
    const mp_model *m = p->m;
    const mp_graph *g = w->g;
    int nm = m->n_modules, nn = g->n_nodes, no = p->n_ops;
    if (nm <= 0) return MP_OK;
    /* nodes by module (counting sort), children as sibling lists, and the
     * op types of each module (lst[at[md] .. at[md] + n[md]), made bottom up) */
    int *first = calloc((size_t)nm + 1, sizeof *first);
    int *bymod = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    int *child = malloc(sizeof(int) * (size_t)nm * 4);
    int *stamp = malloc(sizeof(int) * (size_t)(no ? no : 1));
    int *lst = NULL, n_lst = 0, cap_lst = 0;
    mp_status st = MP_OK;
    if (!first || !bymod || !child || !stamp) {
        st = mp_error(MP_ERR_NOMEM, "out of memory");
        goto done;
    }
    int *sib = child + nm, *at = child + 2 * (size_t)nm, *cnt = child + 3 * (size_t)nm;
    memset(cnt, 0, sizeof(int) * (size_t)nm);
    for (int k = 0; k < nn; k++) {
        int md = g->nodes[k].module;
        if (md >= 0 && md < nm) first[md + 1]++;
    }
    for (int i = 0; i < nm; i++) first[i + 1] += first[i];
    for (int k = 0; k < nn; k++) { /* cnt as the fill pointer */
        int md = g->nodes[k].module;
        if (md >= 0 && md < nm) bymod[first[md] + cnt[md]++] = k;
    }
    for (int i = 0; i < nm; i++) child[i] = sib[i] = -1;
    for (int i = nm - 1; i > 0; i--) {
        int par = m->modules[i].parent;
        if (par < 0 || par >= i) continue;
        sib[i] = child[par];
        child[par] = i;
    }
    for (int o = 0; o < no; o++) stamp[o] = -1;
    for (int md = nm - 1; md >= 0; md--) {
        at[md] = n_lst;
        int before = n_lst;
        for (int j = first[md]; j < first[md + 1]; j++) {
            int op = w->node_op[bymod[j]];
            if (op < 0 || op >= no || stamp[op] == md) continue;
            stamp[op] = md;
            int *nl = mp_grow(lst, sizeof *lst, &cap_lst, n_lst + 1);
            if (!nl) goto nomem;
            lst = nl;
            lst[n_lst++] = op;
        }
        for (int c = child[md]; c >= 0; c = sib[c]) {
            for (int j = at[c]; j < at[c] + cnt[c]; j++) {
                int op = lst[j];
                if (stamp[op] == md) continue;
                stamp[op] = md;
                int *nl = mp_grow(lst, sizeof *lst, &cap_lst, n_lst + 1);
                if (!nl) goto nomem;
                lst = nl;
                lst[n_lst++] = op;
            }
        }
        cnt[md] = n_lst - before;
        if (cnt[md] > 1) qsort(lst + before, (size_t)cnt[md], sizeof *lst, mp__int_cmp);
    }
    p->modop_at = malloc(sizeof(int) * ((size_t)nm + 1));
    p->modops = calloc((size_t)(n_lst ? n_lst : 1), sizeof *p->modops);
    p->modop_parent = malloc(sizeof(int) * (size_t)(n_lst ? n_lst : 1));
    p->node_modop = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    if (!p->modop_at || !p->modops || !p->modop_parent || !p->node_modop) goto nomem;
    p->n_modops = n_lst;
    int r = 0;
    for (int md = 0; md < nm; md++) {
        p->modop_at[md] = r;
        for (int j = at[md]; j < at[md] + cnt[md]; j++, r++) {
            p->modops[r].op = lst[j];
            p->modops[r].fig.latency_s = p->modops[r].fig.latency_min_s = -1;
            p->modop_parent[r] = -1;
        }
    }
    p->modop_at[nm] = r;
    /* each node into its own module's row, each module's rows into its parent's */
    for (int k = 0; k < nn; k++) {
        const mp_node *n = &g->nodes[k];
        int row = n->module >= 0 && n->module < nm ? mp__modop_find(p, n->module, w->node_op[k]) : -1;
        p->node_modop[k] = row;
        if (row >= 0) mp__fig_add_cost(&p->modops[row].fig, &n->cost, &w->ovf);
    }
    for (int md = nm - 1; md > 0; md--) {
        int par = m->modules[md].parent;
        if (par < 0 || par >= md) continue;
        for (int j = p->modop_at[md]; j < p->modop_at[md + 1]; j++) {
            int pr = mp__modop_find(p, par, p->modops[j].op);
            p->modop_parent[j] = pr;
            if (pr >= 0) mp__fig_add_fig(&p->modops[pr].fig, &p->modops[j].fig, &w->ovf);
        }
    }
    goto done;
nomem:
    st = mp_error(MP_ERR_NOMEM, "out of memory");
done:
    free(first);
    free(bymod);
    free(child);
    free(stamp);
    free(lst);
    return st;
}

/* Row order within a module: FLOPs, then MACs (both decreasing), then the
 * op types' order; the unused parameters last. */
static int mp__modop_cmp(const void *a, const void *b) {
    const mp_modop *x = a, *y = b;
    if ((x->op < 0) != (y->op < 0)) return x->op < 0 ? 1 : -1;
    if (x->fig.flops != y->fig.flops) return x->fig.flops < y->fig.flops ? 1 : -1;
    if (x->fig.macs != y->fig.macs) return x->fig.macs < y->fig.macs ? 1 : -1;
    return x->op < y->op ? -1 : x->op > y->op;
}

/* The op types were sorted (inv: old index -> new): the rows name the new
 * indices and take the report's order; the root gains a row for the
 * parameters no node reads (the root counts every parameter), so that its
 * rows too add up to its figures. */
static mp_status mp__modops_order(mp_profile *p, const int *inv) {
    const mp_model *m = p->m;
    int nm = m->n_modules, n = p->n_modops, nn = m->graph->n_nodes;
    if (!p->modops || nm <= 0) return MP_OK;
    uint64_t used = 0, used_bytes = 0;
    bool ovf = false;
    for (int j = p->modop_at[0]; j < p->modop_at[1]; j++) {
        used = mp_uadd(used, p->modops[j].fig.params, &ovf);
        used_bytes = mp_uadd(used_bytes, p->modops[j].fig.param_bytes, &ovf);
    }
    bool extra = p->mods[0].params > used && !ovf;
    mp_modop *rows = calloc((size_t)n + 2, sizeof *rows);
    int *perm = malloc(sizeof(int) * ((size_t)n + 1));
    int *idx = malloc(sizeof(int) * ((size_t)n + 1));
    if (!rows || !perm || !idx) {
        free(rows);
        free(perm);
        free(idx);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int j = 0; j < n; j++)
        if (p->modops[j].op >= 0) p->modops[j].op = inv[p->modops[j].op];
    int r = 0;
    for (int md = 0; md < nm; md++) {
        int a = p->modop_at[md], b = p->modop_at[md + 1];
        int start = r;
        for (int j = a; j < b; j++) rows[r++] = p->modops[j];
        /* the copies sorted (insertion: a module has few rows), each
         * remembering where it came from */
        for (int j = 0; j < b - a; j++) idx[start + j] = a + j;
        for (int i = start + 1; i < r; i++)
            for (int k = i; k > start && mp__modop_cmp(&rows[k - 1], &rows[k]) > 0; k--) {
                mp_modop t = rows[k];
                rows[k] = rows[k - 1];
                rows[k - 1] = t;
                int ti = idx[k];
                idx[k] = idx[k - 1];
                idx[k - 1] = ti;
            }
        if (md == 0 && extra) {
            rows[r].op = -1;
            rows[r].fig.params = p->mods[0].params - used;
            rows[r].fig.param_bytes =
                p->mods[0].param_bytes > used_bytes ? p->mods[0].param_bytes - used_bytes : 0;
            rows[r].fig.latency_s = rows[r].fig.latency_min_s = -1;
            idx[r] = -1;
            r++;
        }
        p->modop_at[md] = start;
    }
    p->modop_at[nm] = r;
    for (int j = 0; j < r; j++)
        if (idx[j] >= 0) perm[idx[j]] = j;
    int *par = malloc(sizeof(int) * ((size_t)r + 1));
    if (!par) {
        free(rows);
        free(perm);
        free(idx);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int j = 0; j < r; j++) {
        int old = idx[j];
        par[j] = old >= 0 && p->modop_parent[old] >= 0 ? perm[p->modop_parent[old]] : -1;
    }
    for (int k = 0; k < nn; k++)
        if (p->node_modop[k] >= 0) p->node_modop[k] = perm[p->node_modop[k]];
    free(p->modops);
    free(p->modop_parent);
    free(perm);
    free(idx);
    p->modops = rows;
    p->modop_parent = par;
    p->n_modops = r;
    return MP_OK;
}

/* ---- parameters ---- */

/* Is value v (an initializer, or a copy of one) a learnable parameter?
 * (GUIDE §3, docs/COUNTING.md): float-typed with rank >= 1, or used where
 * an op takes a (quantized) weight; never when every use is a buffer slot
 * (BatchNormalization mean and variance). Copies are judged by their own
 * uses. */
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
        if (!n->desc || !(n->desc->buffer_inputs & bit)) all_buffer = false;
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
        {"t", "transpose"},        {"clone", "copy"},
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
    for (int i = 0; w->role_numel && i < m->n_sig_params; i++) {
        if (w->role_numel[i] <= 0) continue;
        uint64_t n = (uint64_t)w->role_numel[i];
        int dt = w->role_dtype[i];
        uint64_t bytes = mp_dtype_bytes(dt, (int64_t)n);
        p->total.params = mp_uadd(p->total.params, n, ovf);
        p->total.param_bytes = mp_uadd(p->total.param_bytes, bytes, ovf);
        p->params_by_dtype[dt] = mp_uadd(p->params_by_dtype[dt], n, ovf);
        p->param_bytes_by_dtype[dt] = mp_uadd(p->param_bytes_by_dtype[dt], bytes, ovf);
        p->params_by_role_n++;
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
        for (; md >= 0; md = m->modules[md].parent) {
            p->mods[md].params = mp_uadd(p->mods[md].params, n, ovf);
            p->mods[md].param_bytes = mp_uadd(p->mods[md].param_bytes, bytes, ovf);
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
        if (strncmp(val->name, "onnx::Conv_", 11) == 0) {
            for (int e = mp__use_first(w, v); e >= 0; e = w->uses[e].next)
                if (w->uses[e].slot == 1 && strcmp(g->nodes[w->uses[e].node].op, "Conv") == 0)
                    p->bn_folded = true;
        }
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

/* Judge what the exporters folded or copied, then move the uses of each
 * tensor counted by another onto that one. */
static mp_status mp__judge(mp__walk *w) {
    mp_graph *g = w->g;
    mp_status st = mp__derived(w);
    if (!st) st = mp__copies(w);
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
static mp_status mp__params(mp__walk *w) {
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
