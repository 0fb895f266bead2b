/* ONNX Runtime's own profile in the module tree (`--ort-profile FILE`):
 * a profile another runtime wrote, read by the trace reader, joined with
 * the static profile of the same model (this folder is above trace and
 * analyze, under report).
 *
 * ONNX Runtime's profiler (SessionOptions.enableProfiling) writes a bare
 * JSON array of complete events: cat "Session" for the session's spans (one
 * "model_run" per run), cat "Node" for each kernel, named after the node
 * that ran ("<node>_kernel_time"), with args.op_name and args.provider.
 * read.c keeps them (mp_tort); here they are put back on the model's graph:
 *
 * 1. Runs: the model_run spans, in time order; a Node event belongs to the
 *    run whose span holds it. The first run is left out as a warm-up when
 *    there are several (mp_ort_options.warmup). Each event name is one
 *    kernel (a "slot"): its time per run kept.
 * 2. Names: a slot's name (without "_kernel_time") is a node's name
 *    (graph optimisations off, or a node no optimisation touched), or a
 *    name the optimiser made from a node's or a value's (docs/JSON.md,
 *    "--ort-profile"): "fused <node>" (ConvActivationFusion,
 *    GemmActivationFusion), "<node>/<Fusion>/" (LayerNormFusion,
 *    MatMulScaleFusion, ...), "<value>_nchwc" (the NCHWc layout transformer
 *    names its node after the value it computes), each perhaps with
 *    "_token_N" (GraphGenerateNodeName's suffix for a name in use). That
 *    node is the slot's anchor.
 * 3. Slots named after their kind alone ("BiasGelu", "Attention_token_3")
 *    take the unplaced nodes that lie, in the model's order, between the
 *    anchors of the placed slots that ran before and after them. Layout
 *    conversions ONNX Runtime adds (ReorderInput/ReorderOutput, Memcpy*)
 *    are no node of the model: unmatched.
 * 4. The graph around: a node without a slot joins the slot of its
 *    producer when it computes no MACs and its input has no other reader
 *    (an activation, a bias, a scale or a residual Add applied after a
 *    kernel: the slot that ran last among its producers'), or the slot of
 *    its readers when they all belong to one (a Conv and BatchNorm before
 *    the nchwc Conv named after the Relu's output, a LayerNorm's statistics
 *    before its scale). Repeated until nothing moves. A node left with
 *    FLOPs joins its producer's or reader's slot; the others did not run
 *    (constant-folded or removed by the optimiser).
 * 5. Each slot's time is shared among its nodes by FLOPs
 *    (mp_profile_set_times): nodes, modules, op types, as a measured run.
 */
#include "analyze/profile.h"
#include "trace/trace.h"

#include <stdlib.h>
#include <string.h>

/* One kernel of the profile: the events of one name, one per run. */
typedef struct ort_slot {
    uint32_t name, op, prov;
    int order;       /* place in the first run kept */
    int anchor;      /* the node its name names; -1 */
    int how;         /* ORT_* */
    int unit;        /* the node group it times; -1 unmatched */
    int threads;
} ort_slot;

enum { ORT_NONE, ORT_EXACT, ORT_RENAMED, ORT_ORDER };

typedef struct ort {
    mp_profile *p;
    const mp_graph *g;
    mp_trace_raw raw;
    const char *path;
    int64_t *run_ts, *run_end;   /* the runs' spans, by start */
    int n_runs, skip, kept;
    ort_slot *slots;
    int n_slots;
    double *st;                  /* [kept][n_slots]: seconds */
    int *pos;                    /* per node: its place in the graph's order */
    int *cons_at, *cons;         /* per value: its readers (CSR) */
    bool *konst;                 /* per node: computes from constants only */
    int *unit_of;                /* per node: its unit; -1 */
    int *unit_order;             /* per unit: the last place of its slots in the run */
    int n_units, cap_units;
    mp_strmap node_names;
} ort;

static const char *ort_str(const ort *o, uint32_t i) {
    return i != MP_TORT_NONE && (int)i < o->raw.n_names ? o->raw.names[i] : "";
}

static bool ends_with(const char *s, size_t n, const char *suf) {
    size_t k = strlen(suf);
    return n > k && memcmp(s + n - k, suf, k) == 0;
}

/* The node a name names: a node's name, a value's (its producer), or one
 * of the optimiser's names made from those (see the top); -1. */
static int ort_resolve(const ort *o, const char *s, size_t n, int depth, bool *renamed) {
    if (!n || depth > 8) return -1;
    int k = mp_strmap_getn(&o->node_names, s, n);
    if (k >= 0) return k;
    int v = mp_strmap_getn(&o->g->names, s, n);
    if (v >= 0 && o->g->values[v].producer >= 0) {
        *renamed = true;
        return o->g->values[v].producer;
    }
    *renamed = true;
    /* "_token_N" */
    for (size_t i = n; i > 7; i--) {
        if (s[i - 1] >= '0' && s[i - 1] <= '9') continue;
        if (i < n && i >= 7 && memcmp(s + i - 7, "_token_", 7) == 0)
            return ort_resolve(o, s, i - 7, depth + 1, renamed);
        break;
    }
    if (n > 6 && memcmp(s, "fused ", 6) == 0) return ort_resolve(o, s + 6, n - 6, depth + 1, renamed);
    if (ends_with(s, n, "_nchwc")) return ort_resolve(o, s, n - 6, depth + 1, renamed);
    if (s[n - 1] == '/' && n > 2) { /* "<node>/<Fusion>/" */
        size_t j = n - 1;
        while (j > 0 && s[j - 1] != '/') j--;
        if (j > 1) return ort_resolve(o, s, j - 1, depth + 1, renamed);
    }
    return -1;
}

/* Layout conversions and copies ONNX Runtime adds: no node of the model. */
static bool ort_added(const char *op) {
    static const char *const ops[] = {"ReorderInput", "ReorderOutput", "MemcpyToHost", "MemcpyFromHost"};
    for (size_t i = 0; i < MP_ARRAY_LEN(ops); i++)
        if (strcmp(op, ops[i]) == 0) return true;
    return false;
}

static int ort_new_unit(ort *o, int order) {
    int *nu = mp_grow(o->unit_order, sizeof *nu, &o->cap_units, o->n_units + 1);
    if (!nu) return -1;
    o->unit_order = nu;
    nu[o->n_units] = order;
    return o->n_units++;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- 1. runs and slots ---- */

static mp_status ort_runs(ort *o, const mp_ort_options *opt) {
    const mp_trace_raw *t = &o->raw;
    int64_t *spans = malloc(sizeof(int64_t) * 2 * (t->n_orts + 1));
    if (!spans) return mp_error(MP_ERR_NOMEM, "out of memory");
    int n = 0, nodes = 0;
    for (size_t i = 0; i < t->n_orts; i++) {
        const mp_tort *e = &t->orts[i];
        if (!e->session) nodes++;
        if (e->session && strcmp(ort_str(o, e->name), "model_run") == 0) {
            spans[2 * n] = e->ts;
            spans[2 * n + 1] = e->end;
            n++;
        }
    }
    if (!n || !nodes) {
        free(spans);
        return mp_error(MP_ERR_FORMAT,
                        "%s: not an ONNX Runtime profile of runs: %s (SessionOptions.enableProfiling "
                        "writes a \"model_run\" Session event per run and a Node event per kernel)",
                        o->path, !n ? "no \"model_run\" event" : "no \"Node\" event");
    }
    qsort(spans, (size_t)n, 2 * sizeof(int64_t), cmp_i64);
    o->run_ts = malloc(sizeof(int64_t) * (size_t)n);
    o->run_end = malloc(sizeof(int64_t) * (size_t)n);
    if (!o->run_ts || !o->run_end) {
        free(spans);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        o->run_ts[i] = spans[2 * i];
        o->run_end[i] = spans[2 * i + 1];
    }
    free(spans);
    o->n_runs = n;
    int w = opt->warmup >= 0 ? opt->warmup : n > 1 ? 1 : 0;
    if (w >= n)
        return mp_error(MP_ERR_USAGE, "%s: --warmup %d leaves none of its %d run%s", o->path, w, n,
                        n == 1 ? "" : "s");
    o->skip = w;
    o->kept = n - w;
    return MP_OK;
}

/* The run holding an event (by its start), -1 none. */
static int ort_run_of(const ort *o, const mp_tort *e) {
    int lo = 0, hi = o->n_runs;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (o->run_ts[mid] <= e->ts) lo = mid + 1;
        else hi = mid;
    }
    int r = lo - 1;
    return r >= 0 && e->ts <= o->run_end[r] ? r : -1;
}

static int cmp_ev_ts(const void *a, const void *b, void *ctx) {
    const mp_tort *ev = ctx;
    const mp_tort *x = &ev[*(const int *)a], *y = &ev[*(const int *)b];
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

static mp_status ort_slots(ort *o) {
    const mp_trace_raw *t = &o->raw;
    int *slot_of = malloc(sizeof(int) * (size_t)(t->n_names + 1));
    int *first = malloc(sizeof(int) * (t->n_orts + 1));
    if (!slot_of || !first) {
        free(slot_of);
        free(first);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < t->n_names; i++) slot_of[i] = -1;
    int nf = 0, cap = 0;
    mp_status st = MP_OK;
    /* the slots, and the first kept run's kernels in time order */
    for (size_t i = 0; i < t->n_orts; i++) {
        const mp_tort *e = &t->orts[i];
        const char *nm = ort_str(o, e->name);
        size_t nl = strlen(nm);
        if (e->session || !ends_with(nm, nl, "_kernel_time")) continue;
        int r = ort_run_of(o, e);
        if (r < o->skip) continue;
        if (slot_of[e->name] < 0) {
            ort_slot *ns = mp_grow(o->slots, sizeof *ns, &cap, o->n_slots + 1);
            if (!ns) {
                st = mp_error(MP_ERR_NOMEM, "out of memory");
                goto done;
            }
            o->slots = ns;
            ort_slot *s = &ns[o->n_slots];
            memset(s, 0, sizeof *s);
            s->name = e->name;
            s->op = e->op;
            s->prov = e->provider;
            s->anchor = s->unit = -1;
            s->order = INT32_MAX;
            slot_of[e->name] = o->n_slots++;
        }
        ort_slot *s = &o->slots[slot_of[e->name]];
        if (e->threads > s->threads) s->threads = e->threads;
        if (r == o->skip) first[nf++] = (int)i;
    }
    if (!o->n_slots) {
        st = mp_error(MP_ERR_FORMAT, "%s: no \"<node>_kernel_time\" Node event in the runs kept", o->path);
        goto done;
    }
    qsort_r(first, (size_t)nf, sizeof *first, cmp_ev_ts, t->orts);
    for (int i = 0; i < nf; i++) {
        ort_slot *s = &o->slots[slot_of[t->orts[first[i]].name]];
        if (s->order == INT32_MAX) s->order = i;
    }
    for (int i = 0; i < o->n_slots; i++) /* not in the first kept run: after it */
        if (o->slots[i].order == INT32_MAX) o->slots[i].order = nf + i;
    o->st = calloc((size_t)o->kept * (size_t)o->n_slots, sizeof *o->st);
    if (!o->st) {
        st = mp_error(MP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < t->n_orts; i++) {
        const mp_tort *e = &t->orts[i];
        int s = !e->session ? slot_of[e->name] : -1;
        int r = s >= 0 ? ort_run_of(o, e) : -1;
        if (r < o->skip) continue;
        o->st[(size_t)(r - o->skip) * (size_t)o->n_slots + (size_t)s] += (double)(e->end - e->ts) * 1e-9;
    }
done:
    free(slot_of);
    free(first);
    return st;
}

/* ---- 2-4. slots to nodes ---- */

static mp_status ort_graph(ort *o) {
    const mp_graph *g = o->g;
    int nn = g->n_nodes, nv = g->n_values;
    o->pos = malloc(sizeof(int) * (size_t)(nn + 1));
    o->unit_of = malloc(sizeof(int) * (size_t)(nn + 1));
    o->konst = calloc((size_t)nn + 1, sizeof *o->konst);
    o->cons_at = calloc((size_t)nv + 1, sizeof *o->cons_at);
    if (!o->pos || !o->unit_of || !o->konst || !o->cons_at) return mp_error(MP_ERR_NOMEM, "out of memory");
    int edges = 0;
    for (int k = 0; k < nn; k++) {
        const mp_node *n = &g->nodes[k];
        o->unit_of[k] = -1;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) {
                o->cons_at[n->in[j] + 1]++;
                edges++;
            }
        if (n->name && n->name[0] && mp_strmap_get(&o->node_names, n->name) < 0 &&
            mp_strmap_put(&o->node_names, n->name, k) != MP_OK)
            return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int v = 0; v < nv; v++) o->cons_at[v + 1] += o->cons_at[v];
    o->cons = malloc(sizeof(int) * (size_t)(edges + 1));
    int *fill = calloc((size_t)nv + 1, sizeof *fill);
    if (!o->cons || !fill) {
        free(fill);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < nn; k++) {
        const mp_node *n = &g->nodes[k];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) o->cons[o->cons_at[n->in[j]] + fill[n->in[j]]++] = k;
    }
    free(fill);
    /* the order, and the nodes computed from constants alone: what a
     * runtime folds before it runs (shape arithmetic, weight transposes) */
    for (int i = 0; i < nn; i++) {
        int k = g->order[i];
        const mp_node *n = &g->nodes[k];
        o->pos[k] = i;
        bool c = n->n_sub == 0 && n->n_out > 0;
        bool known = n->n_out > 0;
        for (int j = 0; j < n->n_out; j++) {
            const mp_value *v = n->out[j] >= 0 ? &g->values[n->out[j]] : NULL;
            if (v && !(v->kn >= 0 && v->kn == mp_value_numel(v))) known = false;
        }
        for (int j = 0; j < n->n_in && c; j++) {
            int v = n->in[j];
            if (v < 0) continue;
            const mp_value *val = &g->values[v];
            if (val->flags & MP_VAL_INIT) continue;
            if (val->producer >= 0 && o->konst[val->producer]) continue;
            c = false;
        }
        o->konst[k] = c || known;
    }
    return MP_OK;
}

/* Does value v have only node k among its readers? */
static bool ort_sole_reader(const ort *o, int v, int k) {
    for (int i = o->cons_at[v]; i < o->cons_at[v + 1]; i++)
        if (o->cons[i] != k) return false;
    return o->cons_at[v + 1] > o->cons_at[v] && !(o->g->values[v].flags & MP_VAL_OUTPUT);
}

/* 4: the unit of node k's producers (light: only when it reads their
 * output alone and computes no MACs), the one that ran last; -1 */
static int ort_from_producers(const ort *o, int k, bool strict) {
    const mp_node *n = &o->g->nodes[k];
    if (strict && n->cost.macs) return -1;
    int best = -1;
    for (int j = 0; j < n->n_in; j++) {
        int v = n->in[j];
        if (v < 0) continue;
        int pr = o->g->values[v].producer;
        if (pr < 0 || o->konst[pr] || o->unit_of[pr] < 0) continue;
        if (strict && !ort_sole_reader(o, v, k)) continue;
        int u = o->unit_of[pr];
        if (best < 0 || o->unit_order[u] > o->unit_order[best]) best = u;
    }
    return best;
}

/* 4: the one unit of all node k's readers (strict), or of any (the
 * first in the run); -1 */
static int ort_from_readers(const ort *o, int k, bool strict) {
    const mp_node *n = &o->g->nodes[k];
    int u = -1;
    for (int j = 0; j < n->n_out; j++) {
        int v = n->out[j];
        if (v < 0) continue;
        if (strict && (o->g->values[v].flags & MP_VAL_OUTPUT)) return -1;
        for (int i = o->cons_at[v]; i < o->cons_at[v + 1]; i++) {
            int c = o->unit_of[o->cons[i]];
            if (c < 0) {
                if (strict) return -1;
                continue;
            }
            if (u < 0 || (!strict && o->unit_order[c] < o->unit_order[u])) u = c;
            else if (strict && c != u) return -1;
        }
    }
    return u;
}

static int cmp_slot_order(const void *a, const void *b, void *ctx) {
    const ort_slot *s = ctx;
    return s[*(const int *)a].order - s[*(const int *)b].order;
}

static mp_status ort_place(ort *o, mp_importinfo *im) {
    const mp_graph *g = o->g;
    int nn = g->n_nodes;
    /* 2. names */
    for (int i = 0; i < o->n_slots; i++) {
        ort_slot *s = &o->slots[i];
        const char *nm = ort_str(o, s->name);
        bool renamed = false;
        int k = ort_resolve(o, nm, strlen(nm) - strlen("_kernel_time"), 0, &renamed);
        if (k < 0) continue;
        s->anchor = k;
        s->how = renamed ? ORT_RENAMED : ORT_EXACT;
        if (o->unit_of[k] < 0) {
            int u = ort_new_unit(o, s->order);
            if (u < 0) return mp_error(MP_ERR_NOMEM, "out of memory");
            o->unit_of[k] = u;
        }
        s->unit = o->unit_of[k];
        if (s->order > o->unit_order[s->unit]) o->unit_order[s->unit] = s->order;
    }
    /* 3. slots named after their kind: the unplaced nodes between the
     * placed slots around them in the run */
    int *by = malloc(sizeof(int) * (size_t)(o->n_slots + 1));
    if (!by) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < o->n_slots; i++) by[i] = i;
    qsort_r(by, (size_t)o->n_slots, sizeof *by, cmp_slot_order, o->slots);
    int prev = -1, pend = 0; /* prev: the last placed anchor's place in the graph */
    for (int i = 0; i <= o->n_slots; i++) {
        ort_slot *s = i < o->n_slots ? &o->slots[by[i]] : NULL;
        if (s && s->anchor < 0) {
            if (!ort_added(ort_str(o, s->op))) by[pend++] = by[i]; /* pending: behind i */
            continue;
        }
        int cur = s ? o->pos[s->anchor] : nn;
        if (pend) {
            int lo = MP_MIN(prev, cur), hi = MP_MAX(prev, cur), u = -1;
            for (int q = lo + 1; q < hi; q++) {
                int k = g->order[q];
                if (o->unit_of[k] >= 0 || o->konst[k]) continue;
                if (u < 0 && (u = ort_new_unit(o, o->slots[by[pend - 1]].order)) < 0) {
                    free(by);
                    return mp_error(MP_ERR_NOMEM, "out of memory");
                }
                o->unit_of[k] = u;
            }
            for (int j = 0; j < pend && u >= 0; j++) {
                o->slots[by[j]].unit = u;
                o->slots[by[j]].how = ORT_ORDER;
            }
            pend = 0;
        }
        if (s) prev = cur;
    }
    free(by);
    /* 4. the graph around */
    int before = 0;
    for (int k = 0; k < nn; k++) before += o->unit_of[k] >= 0;
    for (bool moved = true; moved;) {
        moved = false;
        for (int i = 0; i < nn; i++) {
            int k = g->order[i];
            if (o->unit_of[k] >= 0 || o->konst[k]) continue;
            int u = ort_from_producers(o, k, true);
            if (u >= 0) {
                o->unit_of[k] = u;
                moved = true;
            }
        }
        for (int i = nn - 1; i >= 0; i--) {
            int k = g->order[i];
            if (o->unit_of[k] >= 0 || o->konst[k]) continue;
            int u = ort_from_readers(o, k, true);
            if (u >= 0) {
                o->unit_of[k] = u;
                moved = true;
            }
        }
    }
    /* nodes with FLOPs left: beside their producers', else their readers' */
    for (bool moved = true; moved;) {
        moved = false;
        for (int i = 0; i < nn; i++) {
            int k = g->order[i];
            if (o->unit_of[k] >= 0 || o->konst[k] || !g->nodes[k].cost.flops) continue;
            int u = ort_from_producers(o, k, false);
            if (u < 0) u = ort_from_readers(o, k, false);
            if (u >= 0) {
                o->unit_of[k] = u;
                moved = true;
            }
        }
    }
    int after = 0;
    for (int k = 0; k < nn; k++) after += o->unit_of[k] >= 0;
    im->nodes_by_graph = after - before;
    im->nodes_not_run = nn - after;
    return MP_OK;
}

/* ---- 5. the profile's measured fields ---- */

static char *ort_strdup(mp_profile *p, const char *s) {
    return mp_arena_strdup(&p->m->arena, s ? s : "");
}

static mp_status ort_fill(ort *o, const mp_ort_options *opt, mp_importinfo *im) {
    mp_profile *p = o->p;
    const mp_graph *g = o->g;
    mp_model *m = p->m;
    int nn = g->n_nodes, nu = o->n_units, np = o->kept, ns = o->n_slots;
    int nm = m->n_modules ? m->n_modules : 1;
    mp_status st = mp_profile_alloc_measured(p, nu);
    if (st) return st;
    p->unplaced = calloc((size_t)ns + 1, sizeof *p->unplaced);
    double *ut = calloc((size_t)np * (size_t)(nu + 1), sizeof *ut);   /* [run][unit] */
    double *gt = calloc((size_t)np * (size_t)(nu + 1), sizeof *gt);   /* [group][run] */
    double *col = malloc(sizeof *col * (size_t)(np + 1));
    int *head = malloc(sizeof *head * (size_t)(nu + 1)), *members = calloc((size_t)nu + 1, sizeof *members);
    int *uslot = malloc(sizeof *uslot * (size_t)(nu + 1)), *ugrp = malloc(sizeof *ugrp * (size_t)(nu + 1));
    if (!p->unplaced || !ut || !gt || !col || !head || !members || !uslot || !ugrp) {
        st = mp_error(MP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int u = 0; u < nu; u++) head[u] = uslot[u] = -1;
    for (int i = 0; i < nn; i++) { /* a unit's head: its first node in the graph's order */
        int k = g->order[i], u = o->unit_of[k];
        p->node_head[k] = k;
        p->node_lat[k] = p->node_lat_min[k] = 0;
        if (u < 0) {
            p->node_state[k] = MP_NODE_FOLDED;
            continue;
        }
        members[u]++;
        if (head[u] < 0) head[u] = k;
        p->node_head[k] = head[u];
        p->node_state[k] = k == head[u] ? MP_NODE_RUN : MP_NODE_FUSED;
    }
    /* times per run: units, the whole of the node events, unmatched */
    for (int s = 0; s < ns; s++) {
        const ort_slot *sl = &o->slots[s];
        int u = sl->unit >= 0 && members[sl->unit] ? sl->unit : -1;
        switch (u < 0 ? ORT_NONE : sl->how) {
        case ORT_EXACT: im->exact++; break;
        case ORT_RENAMED: im->renamed++; break;
        case ORT_ORDER: im->by_order++; break;
        default: im->unmatched++; break;
        }
        double sum = 0;
        for (int r = 0; r < np; r++) {
            double x = o->st[(size_t)r * (size_t)ns + (size_t)s];
            sum += x;
            if (u >= 0) ut[(size_t)r * (size_t)nu + (size_t)u] += x;
        }
        if (u >= 0 && uslot[u] < 0) uslot[u] = s;
        im->node_time_s += sum / np;
        if (u < 0) {
            im->unmatched_s += sum / np;
            mp_unplaced *up = &p->unplaced[p->n_unplaced++];
            up->name = ort_strdup(p, ort_str(o, sl->name));
            up->op = ort_strdup(p, ort_str(o, sl->op));
            up->latency_s = sum / np;
            if (!up->name || !up->op) {
                st = mp_error(MP_ERR_NOMEM, "out of memory");
                goto done;
            }
        }
    }
    for (int i = 1; i < p->n_unplaced; i++) /* by time */
        for (int j = i; j > 0 && p->unplaced[j].latency_s > p->unplaced[j - 1].latency_s; j--) {
            mp_unplaced t = p->unplaced[j];
            p->unplaced[j] = p->unplaced[j - 1];
            p->unplaced[j - 1] = t;
        }
    /* kernel groups: the runtime's op type and provider; the heads' groups */
    for (int u = 0; u < nu; u++) {
        ugrp[u] = -1;
        if (!members[u] || uslot[u] < 0) continue;
        const ort_slot *sl = &o->slots[uslot[u]];
        const char *op = ort_str(o, sl->op), *prov = ort_str(o, sl->prov);
        if (!op[0]) op = g->nodes[head[u]].op;
        int gi = -1;
        for (int j = 0; j < p->n_groups && gi < 0; j++)
            if (!strcmp(p->groups[j].name, op) && !strcmp(p->groups[j].kernel, prov)) gi = j;
        if (gi < 0) {
            gi = p->n_groups++;
            p->groups[gi].name = strdup(op);
            p->groups[gi].kernel = ort_strdup(p, prov);
            if (!p->groups[gi].name || !p->groups[gi].kernel) {
                st = mp_error(MP_ERR_NOMEM, "out of memory");
                goto done;
            }
        }
        ugrp[u] = gi;
        mp_groupstat *gs = &p->groups[gi];
        gs->count++;
        if (members[u] > 1) gs->fused = true;
        p->node_kernel[head[u]] = gs->kernel;
        for (int r = 0; r < np; r++) {
            col[r] = ut[(size_t)r * (size_t)nu + (size_t)u];
            gt[(size_t)gi * (size_t)np + (size_t)r] += col[r];
        }
        p->node_lat_min[head[u]] = mp_min(col, np);
        p->node_lat[head[u]] = mp_mean(col, np);
        if (members[u] > 1) { /* "BiasGelu(Add+Div+Erf+Add+Mul+Mul)" */
            size_t len = strlen(op) + 3;
            for (int k = 0; k < nn; k++)
                if (o->unit_of[k] == u) len += strlen(g->nodes[k].op) + 1;
            char *nmb = mp_arena_alloc(&m->arena, len);
            if (!nmb) {
                st = mp_error(MP_ERR_NOMEM, "out of memory");
                goto done;
            }
            char *w = nmb + sprintf(nmb, "%s(", op);
            for (int i = 0, first = 1; i < nn; i++) {
                int k = g->order[i];
                if (o->unit_of[k] != u) continue;
                w += sprintf(w, "%s%s", first ? "" : "+", g->nodes[k].op);
                first = 0;
            }
            strcpy(w, ")");
            p->node_group[head[u]] = nmb;
        }
    }
    for (int gi = 0; gi < p->n_groups; gi++) {
        double *r = &gt[(size_t)gi * (size_t)np];
        p->groups[gi].latency_min_s = mp_min(r, np);
        p->groups[gi].latency_s = mp_mean(r, np);
    }
    for (int k = 0; k < nn; k++) {
        int u = o->unit_of[k];
        if (u < 0 || ugrp[u] < 0) continue;
        p->groups[ugrp[u]].flops += g->nodes[k].cost.flops;
        if (p->node_state[k] == MP_NODE_FUSED) {
            p->run.fused++;
            int km = g->nodes[k].module, hm = g->nodes[head[u]].module;
            if (km >= 0 && km < nm && km != hm && hm >= 0) p->mod_fused[km] = hm + 1;
        }
    }
    { /* modules, op types and the module split: each node its FLOPs' share */
        mp_timing tm = {.n_units = nu, .n_passes = np, .t = ut, .node_unit = o->unit_of, .mean = true};
        if ((st = mp_profile_set_times(p, &tm))) goto done;
    }
    /* the groups by time */
    for (int i = 1; i < p->n_groups; i++)
        for (int j = i; j > 0 && p->groups[j].latency_s > p->groups[j - 1].latency_s; j--) {
            mp_groupstat t = p->groups[j];
            p->groups[j] = p->groups[j - 1];
            p->groups[j - 1] = t;
        }
    /* the run as a whole */
    mp_runinfo *r = &p->run;
    int threads = 0;
    for (int s = 0; s < ns; s++) threads = MP_MAX(threads, o->slots[s].threads);
    r->source = "onnxruntime";
    r->memory_known = false;
    r->iters = np;
    r->warmup = o->skip;
    r->threads = threads > 0 ? threads : 1;
    r->node_timing = true;
    r->fuse = p->run.fused > 0;
    r->steps = ns;
    r->folded = im->nodes_not_run;
    r->batch = mp_profile_batch(p);
    for (int i = 0; i < np; i++) col[i] = (double)(o->run_end[o->skip + i] - o->run_ts[o->skip + i]) * 1e-9;
    r->lat_min_s = mp_min(col, np);
    r->lat_p90_s = mp_quantile(col, np, 0.9);
    r->lat_median_s = mp_median(col, np);
    for (int i = 0; i < np; i++) {
        double sum = 0;
        for (int s = 0; s < ns; s++) sum += o->st[(size_t)i * (size_t)ns + (size_t)s];
        col[i] = sum;
    }
    r->kernels_min_s = mp_min(col, np);
    r->kernels_median_s = mp_median(col, np);
    p->total.latency_s = r->lat_median_s;
    p->total.latency_min_s = r->lat_min_s;
    if (opt->peak_gflops > 0) {
        r->peak_flops_per_s = opt->peak_gflops * 1e9;
        r->peak_source = "given";
    } else if (opt->measure_peak) {
        const char *how = NULL;
        r->peak_flops_per_s = opt->measure_peak(r->threads, &how);
        r->peak_source = r->peak_flops_per_s > 0 ? "measured" : NULL;
        if (r->peak_flops_per_s > 0)
            r->peak_method = mp_arena_printf(&m->arena, "%s, on this machine (give --peak-gflops for the "
                                             "machine that wrote the profile)", how ? how : "fp32 GEMM");
    }
    r->kernels_above_peak = r->peak_flops_per_s > 0 ? mp_profile_groups_above(p, r->peak_flops_per_s) : 0;
    im->path = ort_strdup(p, o->path);
    im->runs = o->n_runs;
    im->events = ns;
    r->imported = *im;
    p->measured = true;
done:
    free(ut);
    free(gt);
    free(col);
    free(head);
    free(members);
    free(uslot);
    free(ugrp);
    return st;
}

#define ORT_OPTIONS_V1 MP_FIELD_END(mp_ort_options, measure_peak)

static void ort_defaults(mp_ort_options *o) {
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->warmup = -1;
}

mp_status mp_ort_options_init(mp_ort_options *o, size_t size) {
    mp_ort_options d;
    ort_defaults(&d);
    return mp_opts_init(o, size, &d, sizeof d, ORT_OPTIONS_V1, "mp_ort_options");
}

mp_status mp_profile_ort(mp_profile *p, const char *path, const mp_ort_options *opts) {
    if (!p || !path) return mp_error(MP_ERR_USAGE, "mp_profile_ort: no profile or file");
    mp_ort_options def;
    ort_defaults(&def);
    mp_status st = mp_opts_take(&def, sizeof def, opts, ORT_OPTIONS_V1, "mp_ort_options");
    if (st) return st;
    const mp_ort_options *opt = &def;
    ort o;
    memset(&o, 0, sizeof o);
    o.p = p;
    o.g = p->m->graph;
    o.path = path;
    mp_importinfo im;
    memset(&im, 0, sizeof im);
    st = mp_trace_read_file(path, &o.raw);
    if (!st && !o.raw.n_orts)
        st = mp_error(MP_ERR_FORMAT,
                      "%s: not an ONNX Runtime profile: no event of category \"Node\" or \"Session\" "
                      "(a torch.profiler trace is read by `modelprof trace`)",
                      path);
    if (!st) st = ort_runs(&o, opt);
    if (!st) st = ort_slots(&o);
    if (!st) st = ort_graph(&o);
    if (!st) st = ort_place(&o, &im);
    if (!st) st = ort_fill(&o, opt, &im);
    if (st) {
        mp_profile_free_measured(p);
        p->measured = false;
    }
    mp_trace_raw_free(&o.raw);
    mp_strmap_free(&o.node_names);
    free(o.run_ts);
    free(o.run_end);
    free(o.slots);
    free(o.st);
    free(o.pos);
    free(o.cons_at);
    free(o.cons);
    free(o.konst);
    free(o.unit_of);
    free(o.unit_order);
    return st;
}
