/* The Chrome/Perfetto trace of a measured run's timed passes (Trace Event
 * Format, complete events "ph":"X", times in microseconds from the first
 * timed pass). One track: the run thread, which times every step (a kernel's
 * own worker threads are inside its slice). Per pass: a "ProfilerStep#N"
 * slice, module scopes as enclosing "module: PATH" slices (user
 * annotations), and one "cpu_op" event per step (a node, or a fused group
 * under its head node's op type, as the run's per-operator times count it).
 * The names follow torch.profiler's, so `modelprof trace` reads it back. */
#include "report/report.h"
#include "run/stamps.h"

#include <errno.h>
#include <stdlib.h>

#define CT_MAX_DEPTH 64

typedef struct ct {
    mp_out o;
    bool first;
    double t0;
} ct;

static void ct_num(ct *w, double us) {
    char d[40];
    snprintf(d, sizeof d, "%.3f", us < 0 ? 0 : us);
    mp_out_puts(&w->o, d);
}

static void ct_u64(ct *w, uint64_t v) {
    char d[MP_DEC_MAX];
    mp_out_write(&w->o, d, mp_fmt_dec(d, v));
}

/* The start of an event: {"ph":"X","cat":..,"name":..,"pid":1,"tid":1,"ts":..,"dur":.. */
static void ct_begin(ct *w, const char *cat, const char *name, double start, double end) {
    mp_out_puts(&w->o, w->first ? "\n{" : ",\n{");
    w->first = false;
    mp_out_puts(&w->o, "\"ph\":\"X\",\"cat\":\"");
    mp_out_puts(&w->o, cat);
    mp_out_puts(&w->o, "\",\"name\":");
    mp_json_string(&w->o, name);
    mp_out_puts(&w->o, ",\"pid\":1,\"tid\":1,\"ts\":");
    ct_num(w, (start - w->t0) * 1e6);
    mp_out_puts(&w->o, ",\"dur\":");
    ct_num(w, (end - start) * 1e6);
}

static void ct_annot(ct *w, const char *name, double start, double end) {
    ct_begin(w, "user_annotation", name, start, end);
    mp_out_putc(&w->o, '}');
}

static void ct_module(ct *w, const mp_model *m, int mod, double start, double end) {
    const char *path = m->modules[mod].path ? m->modules[mod].path : "";
    size_t n = strlen(path) + 16;
    char *name = malloc(n);
    if (!name) return;
    snprintf(name, n, "module: %s", path);
    ct_annot(w, name, start, end);
    free(name);
}

static void ct_shapes(ct *w, const mp_graph *g, const int *vals, int n) {
    mp_out_putc(&w->o, '[');
    for (int i = 0; i < n; i++) {
        if (i) mp_out_putc(&w->o, ',');
        int v = vals[i];
        if (v < 0 || v >= g->n_values || g->values[v].rank < 0 || (g->values[v].rank > 0 && !g->values[v].dims)) {
            mp_out_puts(&w->o, "[]");
            continue;
        }
        const mp_value *val = &g->values[v];
        mp_out_putc(&w->o, '[');
        for (int d = 0; d < val->rank; d++) {
            if (d) mp_out_putc(&w->o, ',');
            int64_t x = val->dims[d];
            ct_u64(w, MP_DIM_KNOWN(x) && x >= 0 ? (uint64_t)x : 0);
        }
        mp_out_putc(&w->o, ']');
    }
    mp_out_putc(&w->o, ']');
}

static void ct_step(ct *w, const mp_run_stamps *r, const mp_run_stamp_step *sp, double start, double end) {
    const mp_graph *g = r->g;
    const mp_model *m = r->m;
    const mp_node *head = &g->nodes[sp->node];
    char opbuf[160];
    ct_begin(w, "cpu_op", mp_op_display(head->domain, head->op ? head->op : "", opbuf, sizeof opbuf), start, end);
    mp_out_puts(&w->o, ",\"args\":{\"node\":");
    mp_json_string(&w->o, head->name ? head->name : "");
    if (sp->group) {
        mp_out_puts(&w->o, ",\"group\":");
        mp_json_string(&w->o, sp->group);
        mp_out_puts(&w->o, ",\"nodes\":[");
        for (int j = 0; j < sp->n_nodes; j++) {
            if (j) mp_out_putc(&w->o, ',');
            const char *nm = g->nodes[sp->nodes[j]].name;
            mp_json_string(&w->o, nm ? nm : "");
        }
        mp_out_putc(&w->o, ']');
    }
    mp_out_puts(&w->o, ",\"module\":");
    int md = sp->module;
    mp_json_string(&w->o, md >= 0 && md < m->n_modules && m->modules[md].path ? m->modules[md].path : "");
    if (sp->kernel) {
        mp_out_puts(&w->o, ",\"kernel\":");
        mp_json_string(&w->o, sp->kernel);
    }
    uint64_t macs = 0, flops = 0;
    for (int j = 0; j < sp->n_nodes; j++) {
        macs = mp_sat_add(macs, g->nodes[sp->nodes[j]].cost.macs);
        flops = mp_sat_add(flops, g->nodes[sp->nodes[j]].cost.flops);
    }
    mp_out_puts(&w->o, ",\"Input Dims\":");
    ct_shapes(w, g, head->in, head->n_in);
    const mp_node *last = &g->nodes[sp->nodes[sp->n_nodes > 0 ? sp->n_nodes - 1 : 0]];
    mp_out_puts(&w->o, ",\"Output Dims\":");
    ct_shapes(w, g, last->out, last->n_out);
    mp_out_puts(&w->o, ",\"macs\":");
    ct_u64(w, macs);
    mp_out_puts(&w->o, ",\"flops\":");
    ct_u64(w, flops);
    mp_out_puts(&w->o, "}}");
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
static bool ct_in(const mp_plan *pl, const mp_run_stamps *r, int s, int k, int md) {
    mp_run_stamp_step st;
    mp_run_stamp_step_get(pl, s, &st);
    int chain[CT_MAX_DEPTH];
    int nc = ct_chain(r->m, st.module, chain);
    return nc > k && chain[k] == md;
}

/* One timed pass. Every slice is written before the slices it encloses
 * (a module's end is found by looking ahead), so that a reader sorting by
 * start time keeps an enclosing slice first when two start together. */
static void ct_pass(ct *w, const mp_plan *pl, const mp_run_stamps *r, int it, int pass) {
    int ns = r->n_steps;
    if (!ns) return;
    const double *start = &r->start[(size_t)it * (size_t)ns];
    const double *dur = &r->dur[(size_t)it * (size_t)ns];
    char name[40];
    snprintf(name, sizeof name, "ProfilerStep#%d", pass);
    ct_annot(w, name, start[0], start[ns - 1] + dur[ns - 1]);
    int open[CT_MAX_DEPTH], n_open = 0;
    for (int s = 0; s < ns; s++) {
        mp_run_stamp_step st;
        mp_run_stamp_step_get(pl, s, &st);
        int chain[CT_MAX_DEPTH];
        int nc = ct_chain(r->m, st.module, chain);
        int keep = 0;
        while (keep < n_open && keep < nc && open[keep] == chain[keep]) keep++;
        for (n_open = keep; n_open < nc; n_open++) {
            int last = s;
            while (last + 1 < ns && ct_in(pl, r, last + 1, n_open, chain[n_open])) last++;
            open[n_open] = chain[n_open];
            ct_module(w, r->m, chain[n_open], start[s], start[last] + dur[last]);
        }
        ct_step(w, r, &st, start[s], start[s] + dur[s]);
    }
}

mp_status mp_report_chrome_trace(const mp_plan *pl, const char *path) {
    if (!pl || !path || !path[0]) return mp_error(MP_ERR_USAGE, "mp_report_chrome_trace: no plan or file");
    mp_run_stamps r;
    if (!mp_run_stamps_get(pl, &r))
        return mp_error(MP_ERR_USAGE, "--chrome-trace %s: the run kept no step times (it needs node timing)", path);
    FILE *f = fopen(path, "w");
    if (!f) return mp_error(MP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    char buf[1 << 16];
    ct w = {{f, 0, sizeof buf, buf}, true, r.n_steps ? r.start[0] : 0};
    mp_out_puts(&w.o, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"modelprof --run\"},\n\"traceEvents\":[");
    mp_out_puts(&w.o, "\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"modelprof run\"}}");
    mp_out_puts(&w.o, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"run thread\"}}");
    w.first = false;
    for (int it = 0; it < r.iters; it++) ct_pass(&w, pl, &r, it, it + 1);
    mp_out_puts(&w.o, "\n]}\n");
    mp_out_flush(&w.o);
    mp_status st = MP_OK;
    if (ferror(f)) st = mp_error(MP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (fclose(f) != 0 && st == MP_OK) st = mp_error(MP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return st;
}
