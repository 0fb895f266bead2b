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
 *    MatMulScaleFusion, ...), "<node>/<Name>Fusion" (GatherSliceToSplitFusion),
 *    "<node>_new_reshape" (ReshapeFusion), "<value>_nchwc" (the NCHWc layout transformer
 *    names its node after the value it computes), each perhaps with
 *    "_token_N" (GraphGenerateNodeName's suffix for a name in use). That
 *    node is the slot's anchor.
 * 3. Slots named after their kind alone ("BiasGelu", "Attention_token_3")
 *    take the unplaced nodes that lie, in the model's order, between the
 *    anchors of the placed slots that ran before and after them. Layout
 *    conversions ONNX Runtime adds (ReorderInput/ReorderOutput, Memcpy*)
 *    are no node of the model: unmatched.
 * 4. The graph around: a Transpose or a scale by a constant scalar read
 *    only by a FusedMatMul's node ran inside that kernel (ONNX Runtime's
 *    MatMulTransposeFusion, MatMulScaleFusion) and joins it. Then a node without a slot joins the slot of its
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
#include "analyze/analyze.h"
#include "analyze/profile.h"
#include "ops/ops.h"
#include "trace/trace.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One kernel of the profile: the events of one name, one per run. */
typedef struct ort_slot {
    uint32_t name, op, prov;
    uint32_t in, out;  /* its shapes as written (the first event's); MP_TORT_NONE */
    int value;         /* the value its name names ("<value>_nchwc"); -1 */
    int order;       /* place in the first run kept */
    int anchor;      /* the node its name names; -1 */
    int how;         /* ORT_* */
    int unit;        /* the node group it times; -1 unmatched */
    int threads;
    int run0, run_last; /* the runs of its first event (whose shapes `in` holds) and of its latest */
} ort_slot;

/* ORT_BODY: named after a node of an If's, Loop's or Scan's body, placed on
 * that control-flow node (its shapes are the body's, run by run: unchecked) */
enum { ORT_NONE, ORT_EXACT, ORT_RENAMED, ORT_ORDER, ORT_BODY };

typedef struct ort {
    mp_profile *p;
    const mp_graph *g;
    mp_trace_raw raw;
    const char *path;
    int64_t *run_ts, *run_end;   /* the runs' spans, by start */
    int n_runs, skip, kept;
    int outside;                 /* node events in no run */
    ort_slot *slots;
    int n_slots;
    double *st;                  /* [kept][n_slots]: seconds */
    int *pos;                    /* per node: its place in the graph's order */
    int *cons_at, *cons;         /* per value: its readers (CSR) */
    bool *konst;                 /* per node: computes from constants only */
    int *unit_of;                /* per node: its unit; -1 */
    int *unit_order;             /* per unit: the last place of its slots in the run */
    bool *loose;                 /* per node: placed only beside a neighbour, by FLOPs */
    bool *from_init;             /* per node: computes from initializers alone (no shape arithmetic) */
    bool nchwc;                  /* the profile runs the NCHWc layout */
    bool unopt;                  /* a run with optimisations off (ort_unoptimised) */
    int64_t budget;              /* values ort_model_has may still look at */
    int n_units, cap_units;
    mp_strmap node_names;
    mp_strmap body_names;        /* a body's node names -> the top-level node holding the body */
} ort;

static const char *ort_str(const ort *o, uint32_t i) {
    return i != MP_TORT_NONE && (int)i < o->raw.n_names ? o->raw.names[i] : "";
}

static bool ends_with(const char *s, size_t n, const char *suf) {
    size_t k = strlen(suf);
    return n > k && memcmp(s + n - k, suf, k) == 0;
}

/* A name ONNX Runtime makes for a Cast it inserts around a kernel that has
 * no version for a type, "InsertedPrecisionFreeCast_<value>" (name[0..n)):
 * the value's name, NULL when it is not one. */
static const char *ort_inserted_cast(const char *name, size_t n) {
    static const char prefix[] = "InsertedPrecisionFreeCast_";
    return n > sizeof prefix - 1 && memcmp(name, prefix, sizeof prefix - 1) == 0 ? name + sizeof prefix - 1 : NULL;
}

/* The node a name names: a node's name, a value's (its producer), or one
 * of the optimiser's names made from those (see the top); -1. */
static int ort_resolve(const ort *o, const char *s, size_t n, int depth, bool *renamed, int *value) {
    if (!n || depth > 8) return -1;
    int k = mp_strmap_getn(&o->node_names, s, n);
    if (k >= 0) return k;
    int v = mp_strmap_getn(&o->g->names, s, n);
    if (v >= 0 && o->g->values[v].producer >= 0) {
        *renamed = true;
        *value = v;
        return o->g->values[v].producer;
    }
    *renamed = true;
    /* "_token_N" */
    for (size_t i = n; i > 7; i--) {
        if (s[i - 1] >= '0' && s[i - 1] <= '9') continue;
        if (i < n && i >= 7 && memcmp(s + i - 7, "_token_", 7) == 0)
            return ort_resolve(o, s, i - 7, depth + 1, renamed, value);
        break;
    }
    if (n > 6 && memcmp(s, "fused ", 6) == 0) return ort_resolve(o, s + 6, n - 6, depth + 1, renamed, value);
    /* a kernel writing the value a Cast ONNX Runtime inserted now reads
     * (an fp16 model's node run in fp32): named after the Cast's input,
     * "InsertedPrecisionFreeCast_<value>" (ort_added_slot: the Cast itself) */
    const char *cast_of = ort_inserted_cast(s, n);
    if (cast_of) return ort_resolve(o, cast_of, n - (size_t)(cast_of - s), depth + 1, renamed, value);
    if (ends_with(s, n, "_bn_nchwc")) { /* a BatchNormalization the NCHWc layout runs as a Conv */
        int bn = ort_resolve(o, s, n - 9, depth + 1, renamed, value);
        if (bn >= 0) return bn;
    }
    if (ends_with(s, n, "_nchwc")) return ort_resolve(o, s, n - 6, depth + 1, renamed, value);
    /* ReshapeFusion's one Reshape for a chain of them, named after the last */
    if (ends_with(s, n, "_new_reshape")) return ort_resolve(o, s, n - 12, depth + 1, renamed, value);
    if (s[n - 1] == '/' && n > 2) { /* "<node>/<Fusion>/" */
        size_t j = n - 1;
        while (j > 0 && s[j - 1] != '/') j--;
        if (j > 1) return ort_resolve(o, s, j - 1, depth + 1, renamed, value);
    }
    if (ends_with(s, n, "Fusion")) { /* "<node>/<Fusion>" (GatherSliceToSplitFusion's Split) */
        size_t j = n;
        while (j > 0 && s[j - 1] != '/') j--;
        if (j > 1) return ort_resolve(o, s, j - 1, depth + 1, renamed, value);
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

/* The same for a slot: its op, a Cast ONNX Runtime inserts around a
 * kernel that has no version for a type ("InsertedPrecisionFreeCast_..."),
 * or a Reshape MatMulAddFusion puts around the Gemm it makes of a MatMul
 * of rank 3 or more and its Add ("gemm_input_reshape",
 * "gemm_output_reshape", each perhaps with a suffix). */
static bool ort_added_slot(const ort *o, const ort_slot *s) {
    const char *nm = ort_str(o, s->name);
    return ort_added(ort_str(o, s->op)) ||
           (ort_inserted_cast(nm, strlen(nm)) && !strcmp(ort_str(o, s->op), "Cast")) ||
           (!strcmp(ort_str(o, s->op), "Reshape") &&
            (!strncmp(nm, "gemm_input_reshape", 18) || !strncmp(nm, "gemm_output_reshape", 19)));
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

/* mp_ort_options.warmup inside the library: every run but the last left
 * out (mp_ort_dims reads the dims from the last run, which the runs kept
 * hold whatever --warmup says) */
#define ORT_LAST_RUN (-1000)

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
    int w = opt->warmup == ORT_LAST_RUN ? n - 1 : opt->warmup >= 0 ? opt->warmup : n > 1 ? 1 : 0;
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
        if (r < 0) o->outside++;
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
            s->anchor = s->unit = s->value = -1;
            s->in = e->in_shapes;
            s->out = e->out_shapes;
            s->order = INT32_MAX;
            s->run0 = s->run_last = r;
            slot_of[e->name] = o->n_slots++;
        }
        ort_slot *s = &o->slots[slot_of[e->name]];
        /* the runs kept are of one size: each node's first event of a run
         * read what it read in the first kept run (a session run at
         * several sizes would average their times, counted at one) */
        if (s->run_last != r) {
            s->run_last = r;
            const char *a = s->in == MP_TORT_NONE ? "" : ort_str(o, s->in);
            const char *b = e->in_shapes == MP_TORT_NONE ? "" : ort_str(o, e->in_shapes);
            if (strcmp(a, b) != 0) {
                st = mp_error(MP_ERR_SHAPE,
                              "%s: the runs kept are not of one size: node '%.*s' read %s in run %d and %s in "
                              "run %d (the session ran at several input sizes); profile one size, or leave "
                              "the runs of another out with --warmup N (the first N)",
                              o->path, (int)(nl - strlen("_kernel_time")), nm, a, s->run0 + 1, b, r + 1);
                goto done;
            }
        }
        if (e->threads > s->threads) s->threads = e->threads;
        if (strstr(nm, "_nchwc") || !strcmp(ort_str(o, e->op), "ReorderInput")) o->nchwc = true;
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

/* The names of the nodes in n's bodies (and theirs), each mapped to k, the
 * top-level node: ONNX Runtime profiles a body's nodes under their own
 * names (torchvision's MultiScaleRoIAlign in an If's branches). */
static mp_status ort_body_names(ort *o, const mp_node *n, int k, int depth) {
    if (depth > 16) return MP_OK;
    for (int b = 0; b < n->n_sub; b++) {
        const mp_graph *sg = n->sub[b];
        for (int i = 0; sg && i < sg->n_nodes; i++) {
            const mp_node *c = &sg->nodes[i];
            if (c->name && c->name[0] && mp_strmap_get(&o->node_names, c->name) < 0 &&
                mp_strmap_get(&o->body_names, c->name) < 0 && mp_strmap_put(&o->body_names, c->name, k) != MP_OK)
                return MP_ERR_NOMEM;
            if (c->n_sub > 0 && ort_body_names(o, c, k, depth + 1) != MP_OK) return MP_ERR_NOMEM;
        }
    }
    return MP_OK;
}

static mp_status ort_graph(ort *o) {
    const mp_graph *g = o->g;
    int nn = g->n_nodes, nv = g->n_values;
    o->pos = malloc(sizeof(int) * (size_t)(nn + 1));
    o->unit_of = malloc(sizeof(int) * (size_t)(nn + 1));
    o->konst = calloc((size_t)nn + 1, sizeof *o->konst);
    o->loose = calloc((size_t)nn + 1, sizeof *o->loose);
    o->from_init = calloc((size_t)nn + 1, sizeof *o->from_init);
    o->cons_at = calloc((size_t)nv + 1, sizeof *o->cons_at);
    if (!o->pos || !o->unit_of || !o->konst || !o->loose || !o->from_init || !o->cons_at) return mp_error(MP_ERR_NOMEM, "out of memory");
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
    for (int k = 0; k < nn; k++)
        if (g->nodes[k].n_sub > 0 && ort_body_names(o, &g->nodes[k], k, 0) != MP_OK)
            return mp_error(MP_ERR_NOMEM, "out of memory");
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
        o->from_init[k] = c;
    }
    return MP_OK;
}

/* Does value v have only node k among its readers? */
static bool ort_sole_reader(const ort *o, int v, int k) {
    for (int i = o->cons_at[v]; i < o->cons_at[v + 1]; i++)
        if (o->cons[i] != k) return false;
    return o->cons_at[v + 1] > o->cons_at[v] && !(o->g->values[v].flags & MP_VAL_OUTPUT);
}

static int ort_mac_kind(const char *op);

/* Does node n multiply-accumulate: MACs counted, or a Conv/MatMul/Gemm
 * whose sizes only the run knows (a Mask R-CNN head's batch is the
 * detections kept; its count is unknown, not 0) */
static bool ort_has_macs(const mp_node *n) {
    return n->cost.macs > 0 || ((n->cost.flags & MP_COST_UNKNOWN) && ort_mac_kind(n->op) != 0);
}

/* 4: the unit of node k's producers (light: only when it reads their
 * output alone and computes no MACs), the one that ran last; -1 */
static int ort_from_producers(const ort *o, int k, bool strict) {
    const mp_node *n = &o->g->nodes[k];
    if (strict && ort_has_macs(n)) return -1;
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

static bool ort_can_run(const char *kop, const char *op);

/* The op type of unit u's kernel (its first slot's); "" */
static const char *ort_unit_op(const ort *o, int u) {
    for (int i = 0; i < o->n_slots; i++)
        if (o->slots[i].unit == u) return ort_str(o, o->slots[i].op);
    return "";
}

/* 4: a node FusedMatMul took into itself, its unit; -1. ONNX Runtime's
 * MatMulTransposeFusion folds a Transpose of the last two dims into an
 * operand (transA, transB) and MatMulScaleFusion a Mul or Div by a constant
 * scalar into alpha: such a node, read by the fused product alone, ran in
 * the product's kernel, not in its producer's (a Reshape, a Transpose). */
static int ort_into_fused_matmul(const ort *o, int k) {
    const mp_graph *g = o->g;
    const mp_node *n = &g->nodes[k];
    bool tr = !strcmp(n->op, "Transpose"), sc = !strcmp(n->op, "Mul") || !strcmp(n->op, "Div");
    if (!tr && !sc) return -1;
    if (sc) {
        bool scalar = false;
        for (int j = 0; j < n->n_in && j < 2; j++) {
            int v = n->in[j];
            if (v < 0) continue;
            const mp_value *val = &g->values[v];
            bool k_in = (val->flags & MP_VAL_INIT) || (val->producer >= 0 && o->konst[val->producer]);
            if (k_in && val->rank >= 0 && mp_value_numel(val) == 1) scalar = true;
        }
        if (!scalar) return -1;
    }
    int u = ort_from_readers(o, k, true);
    if (u < 0) return -1;
    const char *op = ort_unit_op(o, u);
    return !strcmp(op, "FusedMatMul") || !strcmp(op, "TransposeMatMul") ? u : -1;
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
        size_t nl = strlen(nm) - strlen("_kernel_time");
        /* a conversion ONNX Runtime added names no node of the model, even
         * where its name is made from one's value (its inserted Casts) */
        int k = ort_added_slot(o, s) ? -1 : ort_resolve(o, nm, nl, 0, &renamed, &s->value);
        bool body = false;
        if (k < 0 && (k = mp_strmap_getn(&o->body_names, nm, nl)) >= 0) body = true;
        if (k < 0) continue;
        s->anchor = k;
        s->how = body ? ORT_BODY : renamed ? ORT_RENAMED : ORT_EXACT;
        if (o->unit_of[k] < 0) {
            int u = ort_new_unit(o, s->order);
            if (u < 0) return mp_error(MP_ERR_NOMEM, "out of memory");
            o->unit_of[k] = u;
        }
        s->unit = o->unit_of[k];
        if (s->order > o->unit_order[s->unit]) o->unit_order[s->unit] = s->order;
        /* a Split ONNX Runtime made of the Gathers and Slices reading one
         * value (GatherSliceToSplitFusion, GatherToSplitFusion) is named
         * after one of them: the others are in it too */
        const mp_node *an = &g->nodes[k];
        if (!strcmp(ort_str(o, s->op), "Split") && an->n_in > 0 && an->in[0] >= 0 &&
            (!strcmp(an->op, "Slice") || !strcmp(an->op, "Gather")))
            for (int c = 0; c < nn; c++) {
                const mp_node *cn = &g->nodes[c];
                if (o->unit_of[c] < 0 && !o->konst[c] && cn->n_in > 0 && cn->in[0] == an->in[0] &&
                    (!strcmp(cn->op, "Slice") || !strcmp(cn->op, "Gather")))
                    o->unit_of[c] = s->unit;
            }
    }
    /* 3. slots named after their kind: the unplaced nodes between the
     * placed slots around them in the run */
    int *by = malloc(sizeof(int) * (size_t)(o->n_slots + 1));
    if (!by) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < o->n_slots; i++) by[i] = i;
    qsort_r(by, (size_t)o->n_slots, sizeof *by, cmp_slot_order, o->slots);
    int prev = -1, pend = 0; /* prev: the last placed anchor's place in the graph */
    int lo_anchor = nn, hi_anchor = -1; /* the first and last placed anchors' places */
    for (int i = 0; i < o->n_slots; i++)
        if (o->slots[i].anchor >= 0) {
            lo_anchor = MP_MIN(lo_anchor, o->pos[o->slots[i].anchor]);
            hi_anchor = MP_MAX(hi_anchor, o->pos[o->slots[i].anchor]);
        }
    for (int i = 0; i <= o->n_slots; i++) {
        ort_slot *s = i < o->n_slots ? &o->slots[by[i]] : NULL;
        if (s && s->anchor < 0) {
            if (!ort_added_slot(o, s)) by[pend++] = by[i]; /* pending: behind i */
            continue;
        }
        int cur = s ? o->pos[s->anchor] : nn;
        if (pend) {
            int lo = MP_MIN(prev, cur), hi = MP_MAX(prev, cur), u = -1;
            /* before the first placed event of the run (after the last), the
             * span reaches the graph's start (end) only when that event is
             * the graph's first (last) placed node: ONNX Runtime may run
             * nodes out of the graph's order first (timm MobileNet-V3's
             * Expands of constants, after a Cast it added, which took the
             * 425 nodes before the first of them) */
            if ((prev < 0 && cur != lo_anchor) || (!s && prev != hi_anchor)) lo = hi;
            for (int q = lo + 1; q < hi; q++) {
                int k = g->order[q];
                if (o->unit_of[k] >= 0 || o->konst[k]) continue;
                /* a node with MACs only into a kernel that can run it (a
                 * Cast ONNX Runtime made of a CastLike, run among Expands
                 * of constants out of the graph's order, took a Conv) */
                if (ort_has_macs(&g->nodes[k])) {
                    bool can = false;
                    for (int j = 0; j < pend && !can; j++) can = ort_can_run(ort_str(o, o->slots[by[j]].op), g->nodes[k].op);
                    if (!can) continue;
                }
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
        /* what a fused product took, backwards: a scale before a Transpose */
        for (int i = nn - 1; i >= 0; i--) {
            int k = g->order[i];
            if (o->unit_of[k] >= 0 || o->konst[k]) continue;
            int u = ort_into_fused_matmul(o, k);
            if (u >= 0) {
                o->unit_of[k] = u;
                moved = true;
            }
        }
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
                o->loose[k] = true;
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

/* ---- 6. the profile is of this model, at these dims ----
 *
 * ONNX Runtime writes each kernel's input and output shapes
 * (args.input_type_shape, output_type_shape). They are checked against the
 * model's, after the placement above, so that a profile of another model,
 * or of this one at other dims, is refused rather than spread over the
 * wrong nodes (docs/JSON.md, "--ort-profile", "Matching"):
 *
 *  a. Dims: a node reading a graph input gives the dims the run had (the
 *     event placed on that node, of the node's op type). A symbolic dim of
 *     the input with no value takes it (mp_ort_dims); one given another
 *     value is refused.
 *  b. Names: an event whose name is no node's, value's, nor a name the
 *     optimiser makes from one, and neither a layout conversion ONNX Runtime
 *     adds nor a fused node named after its kind, is of another model.
 *  c. Shapes: with optimisations off (ort_unoptimised), an event writes
 *     the shapes of the node it names and reads that node's inputs, where
 *     their place in ONNX Runtime's list is certain (ort_in_pos). Optimised,
 *     ONNX Runtime rewrites the nodes it keeps (names stay, shapes move), so
 *     an event placed by a name is held to the shapes of its group of nodes,
 *     as sets of dims without 1s (ort_check_near); one placed by its place
 *     (its group a guess), to writing shapes the model has. The NCHWc
 *     layout pads channels (dims 0 and 1) to its block of 8 or 16.
 *  d. Nodes: with optimisations off, every node with FLOPs has an event;
 *     else every node with MACs not computed from constants is placed by a
 *     name, by its place among the events, or by the graph around a fused
 *     event whose kernel can run it (ort_can_run), not beside a neighbour
 *     by default.
 * The first event (in the run's order) or node that differs is named. */

#define ORT_MAX_SHAPES 16
#define ORT_MAX_DIMS 16
typedef struct ort_shape {
    int rank; /* -1: not read (more dims than ORT_MAX_DIMS) */
    int64_t d[ORT_MAX_DIMS];
} ort_shape;

static const char *ort_ws(const char *p) {
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    return p;
}

/* The shapes as ONNX Runtime writes them, [{"float":[1,3,224,224]},
 * {"int64":[]}]: how many (the first ORT_MAX_SHAPES into sh); -1 when not
 * of that form. */
static int ort_shapes(const char *s, ort_shape *sh) {
    const char *p = ort_ws(s);
    int n = 0;
    if (*p++ != '[') return -1;
    p = ort_ws(p);
    if (*p == ']') return 0;
    for (;;) {
        p = ort_ws(p);
        if (*p++ != '{') return -1;
        p = ort_ws(p);
        if (*p++ != '"') return -1;
        while (*p && *p != '"') p++;
        if (*p++ != '"') return -1;
        p = ort_ws(p);
        if (*p++ != ':') return -1;
        p = ort_ws(p);
        if (*p++ != '[') return -1;
        ort_shape x = {.rank = 0};
        p = ort_ws(p);
        while (*p != ']') {
            char *end;
            long long v = strtoll(p, &end, 10);
            if (end == p) return -1;
            if (x.rank >= 0 && x.rank < ORT_MAX_DIMS) x.d[x.rank++] = v;
            else x.rank = -1;
            p = ort_ws(end);
            if (*p == ',') p = ort_ws(p + 1);
            else if (*p != ']') return -1;
        }
        p = ort_ws(p + 1);
        if (*p++ != '}') return -1;
        if (n < ORT_MAX_SHAPES) sh[n] = x;
        n++;
        p = ort_ws(p);
        if (*p == ']') return n;
        if (*p++ != ',') return -1;
    }
}

static const char *ort_fmt_shape(char *buf, size_t cap, const ort_shape *s) {
    size_t w = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < s->rank && w < cap; i++)
        w += (size_t)snprintf(buf + w, cap - w, "%s%lld", i ? "," : "", (long long)s->d[i]);
    if (w < cap) snprintf(buf + w, cap - w, "%s", s->rank < 0 ? "...]" : "]");
    return buf;
}

static const char *ort_fmt_value(const ort *o, char *buf, size_t cap, const mp_value *v) {
    const mp_model *m = o->p->m;
    size_t w = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < v->rank && w < cap; i++) {
        int64_t d = v->dims[i];
        int s = d < 0 ? MP_DIM_SYM(d) : 0;
        if (d >= 0) w += (size_t)snprintf(buf + w, cap - w, "%s%lld", i ? "," : "", (long long)d);
        else w += (size_t)snprintf(buf + w, cap - w, "%s%s", i ? "," : "", s > 0 && s < m->n_syms ? m->syms[s].name : "?");
    }
    if (w < cap) snprintf(buf + w, cap - w, "]");
    return buf;
}

/* The profile's dim a against the model's b: equal, or b unknown, or (pad:
 * the NCHWc layout's channels) b rounded up to the block of 8 or 16. */
static bool ort_dim_ok(int64_t a, int64_t b, bool pad) {
    if (b < 0 || a == b) return true;
    return pad && a > b && a % 8 == 0 && a - b < 16;
}

/* The profile's shape a against the model's value v. In place, dim by dim
 * (optimisations off); else as a set of dims in any order: ONNX Runtime's
 * transpose optimiser moves Transposes through the nodes it keeps (an
 * elementwise node then computes its tensor transposed, a Shape reads the
 * tensor before the Transpose) and transposes weights to do so, and
 * broadcast weights get dims of 1. The model's unknown dims match any. */
static bool ort_shape_ok(const ort_shape *a, const mp_value *v, bool pad, bool perm) {
    if (a->rank < 0 || v->rank < 0 || v->rank > ORT_MAX_DIMS) return true;
    if (!perm) {
        if (a->rank != v->rank) return false;
        for (int i = 0; i < a->rank; i++)
            if (!ort_dim_ok(a->d[i], v->dims[i], pad && i < 2)) return false;
        return true;
    }
    /* as a set, and without dims of 1 (a weight [96] broadcast as [1,96,1,1],
     * a BatchNorm's scale as a depthwise Conv's [64,1,1,1]) */
    bool used[ORT_MAX_DIMS] = {false}, done[ORT_MAX_DIMS] = {false};
    int open = 0, left = 0; /* the model's unknown dims; its known ones not 1 */
    for (int j = 0; j < v->rank; j++) {
        open += v->dims[j] < 0;
        left += v->dims[j] > 1;
    }
    for (int pass = 0; pass < 3; pass++) /* equal dims first, then padded ones, then padded 1s */
        for (int i = 0; i < a->rank; i++) {
            if (a->d[i] == 1) done[i] = true;
            for (int j = 0; j < v->rank && j < ORT_MAX_DIMS && !done[i]; j++) {
                int64_t b = v->dims[j];
                /* a dim of 1 only as one the layout padded (FCOS's one-channel
                 * centerness Conv's weight [1,256,3,3] run as [16,256,3,3]) */
                /* an empty dim (a slice past the end: [5,0]) matches an empty one */
                if (used[j] || (b <= 1 && !(b == 0 && a->d[i] == 0) && !(pass == 2 && pad && b == 1)) ||
                    (pass == 2 && b != 1) ||
                    !(pass ? ort_dim_ok(a->d[i], b, pad) : a->d[i] == b))
                    continue;
                used[j] = done[i] = true;
                if (b > 1) left--;
            }
        }
    for (int i = 0; i < a->rank; i++)
        if (!done[i] && open-- <= 0) return false;
    return left == 0;
}

/* A weight: an initializer, or computed from constants only. */
static bool ort_weight(const ort *o, int v) {
    const mp_value *val = &o->g->values[v];
    return (val->flags & MP_VAL_INIT) || (val->producer >= 0 && o->konst[val->producer]);
}

/* The place of node k's input j in the profile's list of n inputs, -1 when
 * not certain. ONNX Runtime lists the inputs a kernel holds: an absent
 * optional input is left out, and so is a weight the kernel packed ahead
 * and released (a MatMul's B), so places shift after them. A list as long
 * as the node's or longer (a fusion appends inputs: a Conv's folded bias, a
 * residual) keeps every place; a shorter one, those before the first
 * weight (that weight's own place included: it may be the one left out). */
static int ort_in_pos(const ort *o, int k, int j, int n) {
    const mp_node *nd = &o->g->nodes[k];
    int present = 0, pos = -1;
    bool weight_before = false;
    for (int i = 0; i < nd->n_in; i++) {
        if (nd->in[i] < 0) continue;
        if (i == j) pos = present;
        if (i <= j && ort_weight(o, nd->in[i])) weight_before = true;
        present++;
    }
    if (pos < 0 || pos >= n || pos >= ORT_MAX_SHAPES) return -1;
    return n >= present || !weight_before ? pos : -1;
}

/* Slot s's event name without "_kernel_time" (for messages). */
static const char *ort_event(const ort *o, const ort_slot *s, char *buf, size_t cap) {
    const char *nm = ort_str(o, s->name);
    size_t n = strlen(nm), k = strlen("_kernel_time");
    snprintf(buf, cap, "%.*s", (int)(n > k ? n - k : n), nm);
    return buf;
}

/* Does the profile run the NCHWc layout (its nodes "<value>_nchwc", its
 * conversions ReorderInput/ReorderOutput)? Then the tensors between those
 * conversions, whatever their nodes' names, have their channels padded. */
static bool ort_nchwc(const ort *o, const ort_slot *s) {
    (void)s;
    return o->nchwc;
}

/* Does a kernel of op type kop read node op's inputs in op's places? Its
 * own op type, or ONNX Runtime's fused form that appends inputs (FusedConv:
 * X, W, B, Z; FusedGemm: A, B, C). */
static bool ort_reads_as(const char *kop, const char *op) {
    if (!strcmp(kop, op)) return true;
    return (!strcmp(kop, "FusedConv") && !strcmp(op, "Conv")) || (!strcmp(kop, "FusedGemm") && !strcmp(op, "Gemm"));
}

/* The slot whose event reads node k's inputs: the one named after k, else
 * one of k's unit of k's op type; NULL. */
static const ort_slot *ort_reader_slot(const ort *o, int k) {
    const ort_slot *best = NULL;
    int u = o->unit_of[k];
    if (u < 0) return NULL;
    for (int i = 0; i < o->n_slots; i++) {
        const ort_slot *s = &o->slots[i];
        if (s->unit != u || s->in == MP_TORT_NONE || (s->how != ORT_EXACT && s->how != ORT_RENAMED) ||
            !ort_reads_as(ort_str(o, s->op), o->g->nodes[k].op))
            continue;
        if (s->anchor == k) return s;
        if (!best || s->order < best->order) best = s;
    }
    return best;
}

/* The first node of slot s's unit (in the model's order) of the op type
 * its event ran; -1 */
static int ort_same_op(const ort *o, const ort_slot *s) {
    const char *op = ort_str(o, s->op);
    if (s->anchor >= 0 && ort_reads_as(op, o->g->nodes[s->anchor].op)) return s->anchor;
    for (int i = 0; i < o->g->n_nodes; i++) {
        int k = o->g->order[i];
        if (o->unit_of[k] == s->unit && ort_reads_as(op, o->g->nodes[k].op)) return k;
    }
    return -1;
}

/* Was the run's graph the model's (optimisations off)? Every event named
 * after its node, and the nodes computing from weights alone, which
 * constant folding (the first optimisation) removes, ran. A model without
 * such nodes cannot tell: optimised. */
static mp_status ort_unoptimised(ort *o) {
    const mp_graph *g = o->g;
    bool all_exact = o->n_slots > 0;
    for (int i = 0; i < o->n_slots && all_exact; i++)
        if ((o->slots[i].how != ORT_EXACT && o->slots[i].how != ORT_BODY) || o->slots[i].unit < 0) all_exact = false;
    bool *named = calloc((size_t)g->n_nodes + 1, 1);
    if (!named) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int j = 0; j < o->n_slots; j++)
        if (o->slots[j].anchor >= 0) named[o->slots[j].anchor] = true;
    int folds = 0;
    for (int k = 0; k < g->n_nodes && all_exact; k++) {
        if (!o->from_init[k] || !strcmp(g->nodes[k].op, "Constant")) continue;
        folds++;
        if (!named[k]) all_exact = false;
    }
    free(named);
    o->unopt = all_exact && folds > 0;
    return MP_OK;
}

/* a. The dims of the graph's inputs as the profile's nodes read them. set:
 * give symbols without a value the profile's; *n_set how many. */
static mp_status ort_check_dims(ort *o, bool set, int *n_set, bool *seen) {
    const mp_graph *g = o->g;
    mp_model *m = o->p->m;
    char b1[256], b2[256], b3[512];
    for (int v = 0; v < g->n_values; v++) {
        const mp_value *val = &g->values[v];
        if (!(val->flags & MP_VAL_INPUT) || (val->flags & MP_VAL_INIT) || val->decl_rank < 0) continue;
        for (int i = o->cons_at[v]; i < o->cons_at[v + 1]; i++) {
            int k = o->cons[i];
            const ort_slot *s = ort_reader_slot(o, k);
            if (!s) continue;
            ort_shape sh[ORT_MAX_SHAPES];
            int n = ort_shapes(ort_str(o, s->in), sh);
            const mp_node *nd = &g->nodes[k];
            int j = 0;
            while (j < nd->n_in && nd->in[j] != v) j++;
            int at = n > 0 ? ort_in_pos(o, k, j, n) : -1;
            if (at < 0 || sh[at].rank < 0) continue;
            const ort_shape *x = &sh[at];
            bool pad = ort_nchwc(o, s);
            if (!o->unopt) { /* a node the optimiser kept may read another tensor now (a Shape the
                              * transpose optimiser moved before a Transpose): only a read that agrees
                              * with the input's known dims says what its symbolic ones were */
                bool agree = x->rank == val->decl_rank;
                for (int a = 0; a < x->rank && agree; a++)
                    agree = val->decl_dims[a] < 0 || ort_dim_ok(x->d[a], val->decl_dims[a], pad && a < 2);
                if (!agree) continue;
            }
            if (x->rank != val->decl_rank)
                return mp_error(MP_ERR_SHAPE,
                                "%s: the profile is not of this model: its node '%s' (%s) read input '%s' as %s, "
                                "and the model's input has %d dims",
                                o->path, ort_event(o, s, b2, sizeof b2), ort_str(o, s->op), val->name,
                                ort_fmt_shape(b1, sizeof b1, x), val->decl_rank);
            for (int a = 0; a < x->rank; a++) {
                int64_t d = val->decl_dims[a];
                int sy = d < 0 ? MP_DIM_SYM(d) : 0;
                if (d >= 0 && !ort_dim_ok(x->d[a], d, pad && a < 2))
                    return mp_error(MP_ERR_SHAPE,
                                    "%s: the profile is not of this model: its node '%s' (%s) read input '%s' as "
                                    "%s, and the model's is %s",
                                    o->path, ort_event(o, s, b3, sizeof b3), ort_str(o, s->op), val->name,
                                    ort_fmt_shape(b1, sizeof b1, x), ort_fmt_value(o, b2, sizeof b2, val));
                if (sy <= 0 || sy >= m->n_syms) continue;
                mp_symbol *y = &m->syms[sy];
                seen[sy] = true;
                if (y->value >= 0 && !ort_dim_ok(x->d[a], y->value, pad && a < 2))
                    return mp_error(MP_ERR_SHAPE,
                                    "%s: ONNX Runtime ran the model with %s=%lld (its node '%s' read input '%s' as "
                                    "%s), not %s=%lld as given: give %s=%lld, or no value, to take the profile's",
                                    o->path, y->name, (long long)x->d[a], ort_event(o, s, b3, sizeof b3), val->name,
                                    ort_fmt_shape(b1, sizeof b1, x), y->name, (long long)y->value, y->name,
                                    (long long)x->d[a]);
                if (y->value < 0 && set) {
                    y->value = x->d[a];
                    y->from_profile = true;
                    ++*n_set;
                }
            }
        }
    }
    return MP_OK;
}

/* b. Is slot s named after its kind ("BiasGelu", "Attention_token_3",
 * "GeluFusion" of a Gelu, "GPT2Gelu" of a FastGelu): its name, without
 * "_token_N", holds no '/' and holds its op type, or is held by it, or is
 * one word of letters and digits. */
static bool ort_kind_named(const ort *o, const ort_slot *s) {
    const char *nm = ort_str(o, s->name), *op = ort_str(o, s->op);
    size_t n = strlen(nm) - strlen("_kernel_time");
    const char *t = strstr(nm, "_token_");
    if (t && (size_t)(t - nm) < n) n = (size_t)(t - nm);
    /* the nodes of a local function ONNX Runtime inlined: "_inlfunc_<function>_<node>", perhaps
     * within a fusion's name ("fused _inlfunc_Linear_Gemm_0") */
    if (strstr(nm, "_inlfunc_")) return true;
    if (!n || !op[0] || memchr(nm, '/', n)) return false;
    char base[256];
    if (n >= sizeof base) return false;
    memcpy(base, nm, n);
    base[n] = 0;
    bool word = true;
    for (size_t i = 0; i < n && word; i++)
        word = (base[i] >= 'a' && base[i] <= 'z') || (base[i] >= 'A' && base[i] <= 'Z') || (base[i] >= '0' && base[i] <= '9');
    return word || strstr(base, op) != NULL || strstr(op, base) != NULL;
}

/* c. The shapes of slot s against the nodes it names and runs. */
static mp_status ort_check_slot(ort *o, const ort_slot *s) {
    const mp_graph *g = o->g;
    if (s->how == ORT_BODY) return MP_OK;
    char b1[256], b2[256], ev[512];
    const char *nm = ort_event(o, s, ev, sizeof ev), *op = ort_str(o, s->op);
    bool pad = ort_nchwc(o, s);
    ort_shape sh[ORT_MAX_SHAPES];
    /* outputs: those of the value or node its name names (every output
     * when it runs that node's op, else the first: a fusion's output is
     * its last node's, of the shape of the one it is named after) */
    int n = s->out != MP_TORT_NONE ? ort_shapes(ort_str(o, s->out), sh) : -1;
    if (n > 0 && s->anchor >= 0 && o->unopt) {
        const mp_node *a = &g->nodes[s->anchor];
        int outs[MP_MAX_RANK], no = 0;
        if (s->value >= 0) outs[no++] = s->value;
        else
            for (int j = 0; j < a->n_out && no < MP_MAX_RANK; j++) outs[no++] = a->out[j];
        if (strcmp(a->op, op) != 0 && no > 1) no = 1;
        for (int j = 0; j < no && j < n && j < ORT_MAX_SHAPES; j++) {
            if (outs[j] < 0) continue;
            const mp_value *v = &g->values[outs[j]];
            if (!ort_shape_ok(&sh[j], v, pad, !o->unopt))
                return mp_error(MP_ERR_SHAPE,
                                "%s: the profile is not of this model at these dims: its node '%s' (%s) wrote %s "
                                "where the model's '%s' is %s",
                                o->path, nm, op, ort_fmt_shape(b1, sizeof b1, &sh[j]), v->name,
                                ort_fmt_value(o, b2, sizeof b2, v));
        }
    }
    /* inputs: those of the node of its op type it runs */
    int k = s->unit >= 0 ? ort_same_op(o, s) : -1;
    n = k >= 0 && s->in != MP_TORT_NONE ? ort_shapes(ort_str(o, s->in), sh) : -1;
    if (n > 0 && !o->unopt) return MP_OK; /* (ort_check_near) */
    if (n > 0) {
        const mp_node *nd = &g->nodes[k];
        for (int j = 0; j < nd->n_in; j++) {
            int at = nd->in[j] >= 0 ? ort_in_pos(o, k, j, n) : -1;
            if (at < 0) continue;
            const mp_value *v = &g->values[nd->in[j]];
            if (!ort_shape_ok(&sh[at], v, pad, !o->unopt))
                return mp_error(MP_ERR_SHAPE,
                                "%s: the profile is not of this model at these dims: its node '%s' (%s) read %s "
                                "where the model's node '%s' reads '%s' of %s",
                                o->path, nm, op, ort_fmt_shape(b1, sizeof b1, &sh[at]), nd->name, v->name,
                                ort_fmt_value(o, b2, sizeof b2, v));
        }
    }
    return MP_OK;
}

/* Sizes only the data decides, as ONNX Runtime's run wrote them: an event
 * named after its node and of its op writes that node's output shapes (as
 * ort_check_slot reads them), so each output the inference could not size
 * (after a NonZero, a NonMaxSuppression) takes its shape, and the profile
 * counts those nodes with them (mp_profile_take_shapes: what a run here
 * does). Only where the inference knows nothing that disagrees (its rank,
 * its known dims): a node the optimiser rewrote (a fusion, another layout)
 * is named otherwise or runs another op, and is not read. *sized: the
 * nodes counted so. */
static mp_status ort_take_shapes(ort *o, int *sized) {
    *sized = 0;
    if (o->p->total.unknown == 0) return MP_OK;
    const mp_graph *g = o->g;
    int cap = 0;
    for (int s = 0; s < o->n_slots; s++)
        if (o->slots[s].how == ORT_EXACT && o->slots[s].anchor >= 0) cap += g->nodes[o->slots[s].anchor].n_out;
    mp_shape_seen *seen = malloc(sizeof *seen * (size_t)(cap + 1));
    int64_t *dims = malloc(sizeof *dims * (size_t)(cap + 1) * ORT_MAX_DIMS);
    if (!seen || !dims) {
        free(seen);
        free(dims);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    int n = 0;
    for (int s = 0; s < o->n_slots; s++) {
        const ort_slot *sl = &o->slots[s];
        if (sl->how != ORT_EXACT || sl->anchor < 0 || sl->value >= 0 || sl->out == MP_TORT_NONE) continue;
        const mp_node *a = &g->nodes[sl->anchor];
        if (strcmp(a->op, ort_str(o, sl->op)) != 0) continue;
        ort_shape sh[ORT_MAX_SHAPES];
        int k = ort_shapes(ort_str(o, sl->out), sh);
        for (int j = 0; j < a->n_out && j < k && j < ORT_MAX_SHAPES && n < cap; j++) {
            int v = a->out[j];
            if (v < 0 || sh[j].rank < 0 || mp_shape_known(&g->values[v])) continue;
            int64_t *d = dims + (size_t)n * ORT_MAX_DIMS;
            memcpy(d, sh[j].d, sizeof *d * (size_t)sh[j].rank);
            seen[n++] = (mp_shape_seen){.value = v, .rank = sh[j].rank, .dims = d};
        }
    }
    mp_status st = n ? mp_profile_take_shapes(o->p, seen, n, sized) : MP_OK;
    free(seen);
    free(dims);
    return st;
}

/* Is value v of rank 3 or more the 2-D a with its leading dims flattened
 * (what MatMulAddFusion's Gemm reads and writes, between the Reshapes it
 * adds)? */
static bool ort_flat_ok(const ort_shape *a, const mp_value *v) {
    if (a->rank != 2 || v->rank < 3 || v->dims[v->rank - 1] != a->d[1]) return false;
    int64_t rows = 1;
    for (int i = 0; i < v->rank - 1; i++) {
        if (v->dims[i] < 0) return true;
        rows *= v->dims[i];
    }
    return rows == a->d[0];
}

/* Is shape a one that a node of unit u reads or writes (in any order; flat:
 * or flattened to 2-D)? */
static bool ort_unit_has(const ort *o, const int *at, const int *mem, int u, const ort_shape *a, bool pad,
                         bool flat) {
    for (int i = at[u]; i < at[u + 1]; i++) {
        const mp_node *nd = &o->g->nodes[mem[i]];
        for (int j = 0; j < nd->n_in + nd->n_out; j++) {
            int v = j < nd->n_in ? nd->in[j] : nd->out[j - nd->n_in];
            if (v >= 0 && (ort_shape_ok(a, &o->g->values[v], pad, true) || (flat && ort_flat_ok(a, &o->g->values[v]))))
                return true;
        }
    }
    return false;
}

/* Is shape a one of the model's values (in any order)? At most 2^24 values
 * looked at over the whole check: then yes. */
static bool ort_model_has(ort *o, const ort_shape *a) {
    if (o->budget <= 0) return true;
    o->budget -= o->g->n_values;
    for (int v = 0; v < o->g->n_values; v++)
        if (ort_shape_ok(a, &o->g->values[v], o->nchwc, true)) return true;
    return false;
}

/* Whether slot s wrote `out` as a reduction (keeping its dims) of a shape
 * it read that some value of the model has: each of out's dims that one's
 * or 1. */
static bool ort_reduces_model_shape(ort *o, const ort_slot *s, const ort_shape *out) {
    ort_shape sh[ORT_MAX_SHAPES];
    int n = s->in != MP_TORT_NONE ? ort_shapes(ort_str(o, s->in), sh) : -1;
    for (int j = 0; j < n && j < ORT_MAX_SHAPES; j++) {
        if (sh[j].rank != out->rank || sh[j].rank < 2) continue;
        bool red = true;
        for (int a = 0; a < out->rank && red; a++) red = out->d[a] == sh[j].d[a] || out->d[a] == 1;
        if (red && ort_model_has(o, &sh[j])) return true;
    }
    return false;
}

/* c, optimised: ONNX Runtime rewrites the nodes it keeps (a Div taking
 * over the Mul after it keeps the Div's name and writes the Mul's output;
 * the transpose optimiser transposes what a node computes), so an event
 * placed by a name is held only to shapes its group of nodes has: each
 * shape it wrote, and each it read of 2 dims or more (a weight: a folded
 * bias, a scale or a quantisation parameter may be new), is one that a node
 * of its group reads or writes, its dims in any order. An event placed by
 * its place (a fusion named after its kind, a node the optimiser adds: its
 * group is a guess) is held to what it wrote, of 2 dims or more, being a
 * shape of the model's (what it read may be packed: Attention's QKV
 * weights in one). at/mem: the units' nodes. */
static mp_status ort_check_near(ort *o, const ort_slot *s, const int *at, const int *mem) {
    if (!o->budget) o->budget = (int64_t)1 << 24;
    if (s->unit < 0 || s->how == ORT_NONE || s->how == ORT_BODY) return MP_OK;
    bool guess = s->how == ORT_ORDER; /* placed by its place: its group is a guess */
    char b1[256], b2[256], ev[512];
    const char *nm = ort_event(o, s, ev, sizeof ev), *op = ort_str(o, s->op);
    ort_shape sh[ORT_MAX_SHAPES];
    for (int io = guess ? 1 : 0; io < 2; io++) {
        uint32_t str = io ? s->out : s->in;
        int n = str != MP_TORT_NONE ? ort_shapes(ort_str(o, str), sh) : -1;
        for (int j = 0; j < n && j < ORT_MAX_SHAPES; j++) {
            if (sh[j].rank < (io && !guess ? 1 : 2)) continue;
            if (guess ? ort_model_has(o, &sh[j]) : ort_unit_has(o, at, mem, s->unit, &sh[j], o->nchwc,
                                                                   !strcmp(op, "Gemm") || !strcmp(op, "Reshape")))
                continue;
            /* a step of an operator ONNX Runtime ran as its function's body
             * (Softmax on fp16 on the CPU: "ReduceMax_2", "Sub_3", "Exp_4"):
             * a reduction's [2, 1] is no value of the model, but the [2, 16]
             * it reduced is */
            if (guess && io && ort_reduces_model_shape(o, s, &sh[j])) continue;
            /* say what the model has there: the input in that place of the node of its op type */
            int k = ort_same_op(o, s), pos = -1;
            const mp_node *nd = k >= 0 ? &o->g->nodes[k] : NULL;
            for (int i = 0; nd && !io && i < nd->n_in && pos < 0; i++)
                if (nd->in[i] >= 0 && ort_in_pos(o, k, i, n) == j) pos = i;
            if (pos >= 0)
                return mp_error(MP_ERR_SHAPE,
                                "%s: the profile is not of this model at these dims: its node '%s' (%s) read %s "
                                "where the model's node '%s' reads '%s' of %s (and no node it is placed on reads "
                                "or writes that shape)",
                                o->path, nm, op, ort_fmt_shape(b1, sizeof b1, &sh[j]), nd->name,
                                o->g->values[nd->in[pos]].name,
                                ort_fmt_value(o, b2, sizeof b2, &o->g->values[nd->in[pos]]));
            return mp_error(MP_ERR_SHAPE,
                            "%s: the profile is not of this model at these dims: its node '%s' (%s) %s %s, a shape "
                            "%s%s%s reads or writes",
                            o->path, nm, op, io ? "wrote" : "read", ort_fmt_shape(b1, sizeof b1, &sh[j]),
                            guess ? "no node of the model" : "no node it is placed on (the model's '",
                            guess ? "" : o->g->nodes[mem[at[s->unit]]].name, guess ? "" : "')");
        }
    }
    return MP_OK;
}

/* The kinds of node with MACs an ONNX Runtime kernel of another op type
 * runs: convolutions, matrix products; 0 other. */
static int ort_mac_kind(const char *op) {
    static const char *const conv[] = {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv"};
    static const char *const mm[] = {"MatMul", "Gemm", "MatMulInteger", "QLinearMatMul", "Einsum"};
    for (size_t i = 0; i < MP_ARRAY_LEN(conv); i++)
        if (!strcmp(op, conv[i])) return 1;
    for (size_t i = 0; i < MP_ARRAY_LEN(mm); i++)
        if (!strcmp(op, mm[i])) return 2;
    return 0;
}

/* d. Can a kernel of op type `kop` have run node op `op` (with MACs)? The
 * same op, one of its kind (a Gemm for a MatMul and its bias), or an op
 * that is not ONNX's (FusedConv, Attention, ...: ONNX Runtime's own). */
static bool ort_can_run(const char *kop, const char *op) {
    if (!strcmp(kop, op)) return true;
    int k = ort_mac_kind(op);
    if (k && ort_mac_kind(kop) == k) return true;
    return mp_op_find("", kop, 1000) == NULL;
}

/* The element type ONNX Runtime names in a shape list ("float16" of
 * [{"float16":[2,3]}]): its first entry's, for the float types; -1 other. */
static int ort_first_float_type(const char *s) {
    static const struct { const char *name; int dt; } types[] = {
        {"float", MP_DT_FLOAT}, {"float16", MP_DT_FLOAT16}, {"bfloat16", MP_DT_BFLOAT16}, {"double", MP_DT_DOUBLE}};
    if (!s) return -1;
    const char *q = strchr(s, '"');
    const char *e = q ? strchr(q + 1, '"') : NULL;
    if (!e) return -1;
    for (size_t i = 0; i < MP_ARRAY_LEN(types); i++)
        if ((size_t)(e - q - 1) == strlen(types[i].name) && !memcmp(q + 1, types[i].name, (size_t)(e - q - 1)))
            return types[i].dt;
    return -1;
}

/* A Cast ONNX Runtime inserted after a graph input
 * ("InsertedPrecisionFreeCast_x") read it in the type the session was fed:
 * a float input of another type is a run of another model (its fp16 twin). */
static mp_status ort_check_input_types(ort *o) {
    const mp_graph *g = o->g;
    for (int i = 0; i < o->n_slots; i++) {
        const ort_slot *s = &o->slots[i];
        const char *nm = ort_str(o, s->name);
        size_t nl = strlen(nm) - strlen("_kernel_time");
        const char *of = ort_inserted_cast(nm, nl);
        if (s->in == MP_TORT_NONE || !of || strcmp(ort_str(o, s->op), "Cast")) continue;
        int v = mp_strmap_getn(&g->names, of, nl - (size_t)(of - nm));
        if (v < 0 || !(g->values[v].flags & MP_VAL_INPUT) || (g->values[v].flags & MP_VAL_INIT)) continue;
        int dt = ort_first_float_type(ort_str(o, s->in)), want = g->values[v].decl_dtype;
        if (dt < 0 || want == MP_DT_UNDEFINED || dt == want) continue;
        return mp_error(MP_ERR_SHAPE,
                        "%s: the profile is not of this model: ONNX Runtime was fed input '%s' as %s (its inserted "
                        "Cast '%.*s' read it), and the model's is %s: a profile of the model in another precision",
                        o->path, g->values[v].name, mp_dtype_name(dt), (int)nl, nm, mp_dtype_name(want));
    }
    return MP_OK;
}

/* The float type of entry `at` of a shape list ([{"float16":[2,5,8]},
 * {"int64":[]}]); -1 other or absent. */
static int ort_type_at(const char *s, int at) {
    for (int i = 0; s && i <= at; i++) {
        s = strchr(s, '{');
        if (s && i < at) s++;
    }
    return s ? ort_first_float_type(s) : -1;
}

/* The values ONNX Runtime cast ("InsertedPrecisionFreeCast_VALUE" before a
 * kernel without a version for its type), by name, into `m` (the keys point
 * into the profile's strings): their readers read the cast, in the other
 * type, legitimately. */
static mp_status ort_casts(const ort *o, mp_strmap *m) {
    for (int i = 0; i < o->n_slots; i++) {
        const char *nm = ort_str(o, o->slots[i].name);
        size_t len = strlen(nm), nl = len >= 12 ? len - 12 : 0;   /* less "_kernel_time" */
        const char *of = ort_inserted_cast(nm, nl);
        if (!of) continue;
        size_t ln = (size_t)(nm + nl - of);
        uint32_t h = mp_strmap_hash(of, ln);
        if (mp_strmap_getn_h(m, of, ln, h) < 0 && mp_strmap_put_h(m, of, ln, h, 1) != MP_OK)
            return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    return MP_OK;
}

/* With optimisations off, an event named after its node and of its op reads
 * the graph's inputs and weights in the type ONNX Runtime was given them: a
 * float type other than the model's is a profile of its twin in another
 * precision (an fp16 model's profile on the fp32 model, or the converse),
 * whatever Casts were inserted before other kernels. An optimised run folds
 * the Casts a CPU provider inserts before kernels without an fp16 version
 * into the weights themselves (an fp16 model's Gather then reads an fp32
 * table): there only the graph's inputs tell the twins apart. */
static mp_status ort_check_weight_types(ort *o) {
    const mp_graph *g = o->g;
    mp_strmap casts = {0};
    mp_status st = ort_casts(o, &casts);
    for (int i = 0; !st && i < o->n_slots; i++) {
        const ort_slot *s = &o->slots[i];
        if (s->how != ORT_EXACT || s->anchor < 0 || s->in == MP_TORT_NONE) continue;
        const mp_node *nd = &g->nodes[s->anchor];
        if (strcmp(nd->op, ort_str(o, s->op))) continue;
        ort_shape sh[ORT_MAX_SHAPES];
        int n = ort_shapes(ort_str(o, s->in), sh);
        for (int j = 0; !st && n > 0 && j < nd->n_in; j++) {
            int v = nd->in[j];
            if (v < 0) continue;
            const mp_value *val = &g->values[v];
            int want = val->dtype != MP_DT_UNDEFINED ? val->dtype : val->decl_dtype;
            if (!(val->flags & (MP_VAL_INPUT | MP_VAL_INIT)) || !mp_dtype_is_float(want)) continue;
            if ((val->flags & MP_VAL_INIT) && !o->unopt) continue;
            int at = ort_in_pos(o, s->anchor, j, n);
            int dt = at >= 0 ? ort_type_at(ort_str(o, s->in), at) : -1;
            if (dt < 0 || dt == want || mp_strmap_get(&casts, val->name) >= 0) continue;
            char ev[512];
            st = mp_error(MP_ERR_SHAPE,
                          "%s: the profile is not of this model: its node '%s' (%s) read '%s' as %s, and the "
                          "model's is %s: a profile of the model in another precision",
                          o->path, ort_event(o, s, ev, sizeof ev), nd->op, val->name, mp_dtype_name(dt),
                          mp_dtype_name(want));
        }
    }
    mp_strmap_free(&casts);
    return st;
}

static mp_status ort_check(ort *o, bool *seen) {
    const mp_graph *g = o->g;
    int dummy = 0;
    mp_status st = ort_check_dims(o, false, &dummy, seen);
    if (!st) st = ort_check_input_types(o);
    if (!st) st = ort_check_weight_types(o);
    if (st) return st;
    int *by = malloc(sizeof(int) * (size_t)(o->n_slots + 1));
    if (!by) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < o->n_slots; i++) by[i] = i;
    qsort_r(by, (size_t)o->n_slots, sizeof *by, cmp_slot_order, o->slots);
    /* the units' nodes, in the model's order */
    int *at = calloc((size_t)o->n_units + 2, sizeof *at), *mem = malloc(sizeof *mem * ((size_t)g->n_nodes + 1));
    if (!at || !mem) {
        free(by);
        free(at);
        free(mem);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < g->n_nodes; k++)
        if (o->unit_of[k] >= 0) at[o->unit_of[k] + 1]++;
    for (int u = 0; u < o->n_units; u++) at[u + 1] += at[u];
    {
        int *fill = calloc((size_t)o->n_units + 1, sizeof *fill);
        if (!fill) {
            free(by);
            free(at);
            free(mem);
            return mp_error(MP_ERR_NOMEM, "out of memory");
        }
        for (int i = 0; i < g->n_nodes; i++) {
            int k = g->order[i], u = o->unit_of[k];
            if (u >= 0) mem[at[u] + fill[u]++] = k;
        }
        free(fill);
    }
    for (int i = 0; i < o->n_slots && !st; i++) {
        const ort_slot *s = &o->slots[by[i]];
        if (s->anchor < 0 && !ort_added_slot(o, s) && !ort_kind_named(o, s)) {
            const char *nm = ort_str(o, s->name);
            st = mp_error(MP_ERR_FORMAT,
                          "%s: the profile is not of this model: its node '%.*s' (%s) is no node or value of the "
                          "model, nor a name ONNX Runtime gives a node it fuses or adds (docs/JSON.md, "
                          "\"--ort-profile\")",
                          o->path, (int)(strlen(nm) - strlen("_kernel_time")), nm, ort_str(o, s->op));
            break;
        }
        st = o->unopt ? ort_check_slot(o, s) : ort_check_near(o, s, at, mem);
    }
    free(by);
    free(at);
    free(mem);
    if (st) return st;
    /* d. nodes the profile has no event for */
    bool all_exact = o->unopt;
    bool *named = calloc((size_t)g->n_nodes + 1, 1);
    if (!named) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int j = 0; j < o->n_slots; j++)
        if (o->slots[j].anchor >= 0) named[o->slots[j].anchor] = true;
    for (int i = 0; i < g->n_nodes && !st; i++) {
        int k = g->order[i];
        const mp_node *nd = &g->nodes[k];
        if (all_exact) {
            /* (not the nodes without FLOPs: even then ONNX Runtime's mandatory
             * passes remove a duplicate Cast) */
            if (named[k] || (!nd->cost.flops && !nd->cost.macs)) continue;
            st = mp_error(MP_ERR_FORMAT,
                          "%s: the profile is not of this model: the model's node '%s' (%s) has no event in it, "
                          "in a run with optimisations off (every event is named after its node, and the nodes "
                          "computing from weights alone ran: every node with FLOPs runs)",
                          o->path, nd->name, nd->op);
            break;
        }
        if (!ort_has_macs(nd) || o->konst[k]) continue;
        if (o->unit_of[k] < 0 || o->loose[k]) {
            st = mp_error(MP_ERR_FORMAT,
                          "%s: the profile is not of this model: the model's node '%s' (%s) has no event in it: no "
                          "event names it or a node it could be fused with",
                          o->path, nd->name, nd->op);
            break;
        }
        /* placed by the graph around: with an event that can run it */
        const ort_slot *other = NULL;
        bool can = false;
        for (int j = 0; j < o->n_slots && !can; j++) {
            const ort_slot *s = &o->slots[j];
            if (s->unit != o->unit_of[k]) continue;
            /* (a unit placed by its place among the others is a guess: not held to this) */
            can = s->how == ORT_ORDER || ort_can_run(ort_str(o, s->op), nd->op);
            other = s;
        }
        if (can || !other) continue;
        char ev[512];
        st = mp_error(MP_ERR_FORMAT,
                      "%s: the profile is not of this model: the model's node '%s' (%s) has no event in it: "
                      "the one beside it, '%s', ran a %s",
                      o->path, nd->name, nd->op, ort_event(o, other, ev, sizeof ev), ort_str(o, other->op));
    }
    free(named);
    return st;
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
    /* times per run: units, the whole of the node events, unmatched. A
     * control-flow node's own event (Loop, If, Scan) spans its body's
     * events: those are inside it, counted once, in it */
    uint8_t *own = calloc((size_t)nu + 1, 1);
    if (!own) {
        st = mp_error(MP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int s = 0; s < ns; s++)
        if (o->slots[s].unit >= 0 && o->slots[s].how != ORT_BODY) own[o->slots[s].unit] = 1;
    for (int s = 0; s < ns; s++) {
        const ort_slot *sl = &o->slots[s];
        int u = sl->unit >= 0 && members[sl->unit] ? sl->unit : -1;
        switch (u < 0 ? ORT_NONE : sl->how) {
        case ORT_EXACT: case ORT_BODY: im->exact++; break;
        case ORT_RENAMED: im->renamed++; break;
        case ORT_ORDER: im->by_order++; break;
        default: im->unmatched++; break;
        }
        if (u >= 0 && sl->how == ORT_BODY && own[u]) continue;   /* inside its node's own event */
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
    free(own);
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
    im->outside_runs = o->outside;
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

/* The file read, its runs and kernels placed on p's graph (steps 1-4). */
static mp_status ort_prepare(ort *o, mp_profile *p, const char *path, const mp_ort_options *opt,
                             mp_importinfo *im) {
    memset(o, 0, sizeof *o);
    o->p = p;
    o->g = p->m->graph;
    o->path = path;
    /* read twice (its dims, then its times): a pipe or FIFO would give its
     * bytes to the first read only, and the second open would wait for a
     * writer that never comes */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
        return mp_error(MP_ERR_IO, "%s: not a regular file: ONNX Runtime's profile is read twice (the dims it ran "
                        "with, then its times); save it to a file", path);
    mp_status st = mp_trace_read_file(path, &o->raw);
    if (st == MP_ERR_FORMAT && strstr(mp_last_error(), "an empty trace"))
        st = mp_error(MP_ERR_FORMAT,
                      "%s: an empty profile: it holds no events (ONNX Runtime writes its \"Session\" and \"Node\" "
                      "events once the session ends profiling: InferenceSession.end_profiling, or the session's "
                      "release in onnxruntime-node)",
                      path);
    if (st == MP_ERR_FORMAT && (strstr(mp_last_error(), "not a torch.profiler") || strstr(mp_last_error(), "not JSON"))) {
        /* the trace reader's words are about torch.profiler's traces */
        bool onnx = strstr(mp_last_error(), "an ONNX model") != NULL;
        st = mp_error(MP_ERR_FORMAT,
                      "%s: %s: --ort-profile takes the profiling JSON ONNX Runtime writes for a session with "
                      "profiling on (SessionOptions.enableProfiling, Python's enable_profiling: a JSON array of "
                      "\"Node\" and \"Session\" events, plain or gzipped; docs/JSON.md, \"--ort-profile\")%s",
                      path, onnx ? "an ONNX model, not ONNX Runtime's profile of a run" : "not an ONNX Runtime profile",
                      onnx ? "; the model comes first: modelprof MODEL.onnx --ort-profile PROFILE.json" : "");
    }
    if (!st && !o->raw.n_orts)
        st = mp_error(MP_ERR_FORMAT,
                      "%s: not an ONNX Runtime profile: no event of category \"Node\" or \"Session\" "
                      "(a torch.profiler trace is read by `modelprof trace`)",
                      path);
    if (!st) st = ort_runs(o, opt);
    if (!st) st = ort_slots(o);
    if (!st) st = ort_graph(o);
    if (!st) st = ort_place(o, im);
    if (!st) st = ort_unoptimised(o);
    return st;
}

static void ort_release(ort *o) {
    mp_trace_raw_free(&o->raw);
    mp_strmap_free(&o->node_names);
    mp_strmap_free(&o->body_names);
    free(o->run_ts);
    free(o->run_end);
    free(o->slots);
    free(o->st);
    free(o->pos);
    free(o->cons_at);
    free(o->cons);
    free(o->konst);
    free(o->loose);
    free(o->from_init);
    free(o->unit_of);
    free(o->unit_order);
}

/* "batch=4 (read from the profile), seq=64 (given)": the dims of the
 * model's inputs, and where each came from; NULL none. */
static const char *ort_dims_said(ort *o, const bool *seen) {
    mp_model *m = o->p->m;
    char buf[1024];
    size_t w = 0;
    buf[0] = 0;
    for (int i = 1; i < m->n_syms && w < sizeof buf - 1; i++) {
        const mp_symbol *y = &m->syms[i];
        if (!y->on_input || y->value < 0) continue;
        w += (size_t)snprintf(buf + w, sizeof buf - w, "%s%s=%lld (%s)", w ? ", " : "", y->name,
                              (long long)y->value,
                              y->from_profile ? "read from the profile"
                              : seen[i]       ? "given; the profile ran with it"
                                              : "given; the profile does not show it");
    }
    return w ? mp_arena_strdup(&m->arena, buf) : NULL;
}

mp_status mp_ort_dims(mp_model *m, const char *path, int *n_set) {
    if (n_set) *n_set = 0;
    if (!m || !path) return mp_error(MP_ERR_USAGE, "mp_ort_dims: no model or file");
    mp_profile *q = NULL;
    mp_status st = mp_profile_static(m, &q);
    if (st) return st;
    mp_ort_options opt;
    ort_defaults(&opt);
    opt.warmup = ORT_LAST_RUN; /* the dims of the last run: every --warmup keeps it */
    ort o;
    mp_importinfo im;
    memset(&im, 0, sizeof im);
    int n = 0;
    bool *seen = calloc((size_t)m->n_syms + 1, 1);
    st = seen ? ort_prepare(&o, q, path, &opt, &im) : mp_error(MP_ERR_NOMEM, "out of memory");
    if (!st) st = ort_check_dims(&o, true, &n, seen);
    if (seen) ort_release(&o);
    free(seen);
    mp_profile_free(q);
    if (n_set) *n_set = n;
    return st;
}

mp_status mp_profile_ort(mp_profile *p, const char *path, const mp_ort_options *opts) {
    if (!p || !path) return mp_error(MP_ERR_USAGE, "mp_profile_ort: no profile or file");
    mp_ort_options def;
    ort_defaults(&def);
    mp_status st = mp_opts_take(&def, sizeof def, opts, ORT_OPTIONS_V1, "mp_ort_options");
    if (st) return st;
    const mp_ort_options *opt = &def;
    ort o;
    mp_importinfo im;
    memset(&im, 0, sizeof im);
    bool *seen = calloc((size_t)p->m->n_syms + 1, 1);
    if (!seen) return mp_error(MP_ERR_NOMEM, "out of memory");
    st = ort_prepare(&o, p, path, opt, &im);
    if (!st) st = ort_check(&o, seen);
    if (!st) im.dims = ort_dims_said(&o, seen);
    int sized = 0;
    if (!st) st = ort_take_shapes(&o, &sized);
    if (!st) st = ort_fill(&o, opt, &im);
    if (!st) p->run.run_shaped = sized;
    if (st) {
        mp_profile_free_measured(p);
        p->measured = false;
    }
    ort_release(&o);
    free(seen);
    return st;
}
