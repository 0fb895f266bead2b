/* The Chrome/Perfetto trace of a measured run's timed passes (Trace Event
 * Format, complete events "ph":"X", times in microseconds from the first
 * timed pass). One track: the run thread, which times every step (a kernel's
 * own worker threads are inside its slice). Per pass: a "ProfilerStep#N"
 * slice, module scopes as enclosing "module: PATH" slices (user
 * annotations), and one "cpu_op" event per step (a node, or a fused group
 * under its head node's op type, as the run's per-operator times count it).
 * The names follow torch.profiler's, so `modelprof trace` reads it back.
 * Like every writer it reads the profile alone: the run keeps the passes'
 * step times in it (p->stamps). */
#include "analyze/profile.h"
#include "report/jw.h"

#include <errno.h>
#include <stdlib.h>

#define CT_MAX_DEPTH 64

/* The events go through the one JSON writer (jw.h): one event a line. */
typedef struct ct {
    jw *w;
    double t0;
} ct;

/* A time in microseconds from the first timed pass, to the nanosecond
 * (the Trace Event Format's unit; the convention's seconds do not apply to
 * a foreign format). */
static void ct_us(ct *c, const char *key_lit, size_t len, double t) {
    jw_key_lit(c->w, key_lit, len);
    char d[40];
    snprintf(d, sizeof d, "%.3f", t < 0 ? 0 : t);
    mp_out_puts(&c->w->o, d);
}
#define CT_US(c, k, t) ct_us(c, JW_KEY_TEXT(k), sizeof JW_KEY_TEXT(k) - 1, t)

/* The start of an event: {"ph": "X", "cat": .., "name": .., "pid": 1, "tid": 1, "ts": .., "dur": .. */
static void ct_begin(ct *c, const char *cat, const char *name, double start, double end) {
    jw *w = c->w;
    jw_open(w, '{');
    jw_kstr(w, "ph", "X");
    jw_kstr(w, "cat", cat);
    jw_kstr(w, "name", name);
    jw_ki64(w, "pid", 1);
    jw_ki64(w, "tid", 1);
    CT_US(c, "ts", (start - c->t0) * 1e6);
    CT_US(c, "dur", (end - start) * 1e6);
}

static void ct_annot(ct *c, const char *name, double start, double end) {
    ct_begin(c, "user_annotation", name, start, end);
    jw_close(c->w, '}');
}

static void ct_module(ct *c, const mp_model *m, int mod, double start, double end) {
    const char *path = m->modules[mod].path ? m->modules[mod].path : "";
    size_t n = strlen(path) + 16;
    char *name = malloc(n);
    if (!name) return;
    snprintf(name, n, "module: %s", path);
    ct_annot(c, name, start, end);
    free(name);
}

static void ct_shapes(jw *w, const mp_graph *g, const int *vals, int n) {
    jw_open(w, '[');
    for (int i = 0; i < n; i++) {
        int v = vals[i];
        jw_open(w, '[');
        if (v >= 0 && v < g->n_values && g->values[v].rank >= 0 && (g->values[v].rank == 0 || g->values[v].dims)) {
            const mp_value *val = &g->values[v];
            for (int d = 0; d < val->rank; d++) {
                int64_t x = val->dims[d];
                jw_u64(w, MP_DIM_KNOWN(x) && x >= 0 ? (uint64_t)x : 0);
            }
        }
        jw_close(w, ']');
    }
    jw_close(w, ']');
}

static void ct_step(ct *c, const mp_profile *p, int s, double start, double end) {
    jw *w = c->w;
    const mp_model *m = p->m;
    const mp_graph *g = m->graph;
    const mp_stamps *t = &p->stamps;
    const int *nodes = &t->nodes[t->first[s]];
    int n_nodes = t->first[s + 1] - t->first[s];
    const mp_node *head = &g->nodes[t->node[s]];
    const char *group = p->node_group ? p->node_group[t->node[s]] : NULL;
    const char *kernel = p->node_kernel ? p->node_kernel[t->node[s]] : NULL;
    char opbuf[160];
    ct_begin(c, "cpu_op", mp_op_display(head->domain, head->op ? head->op : "", opbuf, sizeof opbuf), start, end);
    jw_key(w, "args");
    jw_open(w, '{');
    jw_kstr(w, "node", head->name ? head->name : "");
    if (group) {
        jw_kstr(w, "group", group);
        jw_key(w, "nodes");
        jw_open(w, '[');
        for (int j = 0; j < n_nodes; j++) {
            const char *nm = g->nodes[nodes[j]].name;
            jw_str(w, nm ? nm : "");
        }
        jw_close(w, ']');
    }
    int md = t->module[s];
    jw_kstr(w, "module", md >= 0 && md < m->n_modules && m->modules[md].path ? m->modules[md].path : "");
    if (kernel) jw_kstr(w, "kernel", kernel);
    uint64_t macs = 0, flops = 0;
    bool unknown = false; /* a node's figures unknown: null, as the JSON report has them */
    for (int j = 0; j < n_nodes; j++) {
        macs = mp_sat_add(macs, g->nodes[nodes[j]].cost.macs);
        flops = mp_sat_add(flops, g->nodes[nodes[j]].cost.flops);
        unknown = unknown || mp_cost_ops_unknown(&g->nodes[nodes[j]].cost);
    }
    jw_key(w, "Input Dims");
    ct_shapes(w, g, head->in, head->n_in);
    const mp_node *last = &g->nodes[nodes[n_nodes > 0 ? n_nodes - 1 : 0]];
    jw_key(w, "Output Dims");
    ct_shapes(w, g, last->out, last->n_out);
    jw_key(w, "macs");
    if (unknown) jw_null(w);
    else jw_u64(w, macs);
    jw_key(w, "flops");
    if (unknown) jw_null(w);
    else jw_u64(w, flops);
    jw_close(w, '}');
    jw_close(w, '}');
}

/* The chain of modules (depth >= 1) of module md, outermost first. */
static int ct_chain(const mp_model *m, int md, int *out) {
    int tmp[CT_MAX_DEPTH], n = 0;
    while (md >= 0 && md < m->n_modules && n < CT_MAX_DEPTH) {
        if (m->modules[md].depth >= 1) tmp[n++] = md;
        md = m->modules[md].parent;
    }
    for (int i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    return n;
}

/* Is module md (at chain level k) in step s's module chain? */
static bool ct_in(const mp_profile *p, int s, int k, int md) {
    int chain[CT_MAX_DEPTH];
    int nc = ct_chain(p->m, p->stamps.module[s], chain);
    return nc > k && chain[k] == md;
}

/* One timed pass. Every slice is written before the slices it encloses
 * (a module's end is found by looking ahead), so that a reader sorting by
 * start time keeps an enclosing slice first when two start together. */
static void ct_pass(ct *w, const mp_profile *p, int it, int pass) {
    const mp_stamps *r = &p->stamps;
    int ns = r->n_steps;
    if (!ns) return;
    const double *start = &r->start[(size_t)it * (size_t)ns];
    const double *dur = &r->dur[(size_t)it * (size_t)ns];
    char name[40];
    snprintf(name, sizeof name, "ProfilerStep#%d", pass);
    ct_annot(w, name, start[0], start[ns - 1] + dur[ns - 1]);
    int open[CT_MAX_DEPTH], n_open = 0;
    for (int s = 0; s < ns; s++) {
        int chain[CT_MAX_DEPTH];
        int nc = ct_chain(p->m, r->module[s], chain);
        int keep = 0;
        while (keep < n_open && keep < nc && open[keep] == chain[keep]) keep++;
        for (n_open = keep; n_open < nc; n_open++) {
            int last = s;
            while (last + 1 < ns && ct_in(p, last + 1, n_open, chain[n_open])) last++;
            open[n_open] = chain[n_open];
            ct_module(w, p->m, chain[n_open], start[s], start[last] + dur[last]);
        }
        ct_step(w, p, s, start[s], start[s] + dur[s]);
    }
}

typedef struct ct_job {
    const mp_profile *p;
    const char *path;
} ct_job;

/* The trace into f (mp_write_file_atomic checks the stream). */
static mp_status ct_write(void *ud, FILE *f) {
    const ct_job *j = ud;
    const mp_profile *p = j->p;
    const char *path = j->path;
    const mp_stamps *r = &p->stamps;
    ct c = {jw_begin(f), r->n_steps ? r->start[0] : 0};
    if (!c.w) return mp_error(MP_ERR_NOMEM, "out of memory while writing %s", path);
    jw *w = c.w;
    jw_open(w, '{');
    jw_kstr(w, "displayTimeUnit", "ms");
    jw_key(w, "otherData");
    jw_open(w, '{');
    jw_kstr(w, "producer", "modelprof --run");
    jw_close(w, '}');
    jw_key(w, "traceEvents");
    jw_open(w, '[');
    static const char *const meta[2][2] = {{"process_name", "modelprof run"}, {"thread_name", "run thread"}};
    for (int i = 0; i < 2; i++) {
        jw_open(w, '{');
        jw_kstr(w, "ph", "M");
        jw_kstr(w, "name", meta[i][0]);
        jw_ki64(w, "pid", 1);
        jw_ki64(w, "tid", 1);
        jw_key(w, "args");
        jw_open(w, '{');
        jw_kstr(w, "name", meta[i][1]);
        jw_close(w, '}');
        jw_close(w, '}');
    }
    for (int it = 0; it < r->iters; it++) ct_pass(&c, p, it, it + 1);
    jw_close(w, ']');
    jw_close(w, '}');
    jw_end(w);
    return MP_OK;
}

mp_status mp_report_chrome_trace(const mp_profile *p, const char *path) {
    if (!p || !p->m || !path || !path[0])
        return mp_error(MP_ERR_USAGE, "mp_report_chrome_trace: no profile or file");
    const mp_stamps *r = &p->stamps;
    if (r->iters <= 0)
        return mp_error(MP_ERR_USAGE, "--chrome-trace %s: the run kept no step times (it needs node "
                        "timing and keep_timestamps)", path);
    ct_job j = {p, path};
    return mp_write_file_atomic(path, ct_write, &j);
}
