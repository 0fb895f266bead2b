/* The trace analysis as text: summary, steps, findings, operator and
 * kernel tables, memory, module tree. It reads only the trace summary
 * (mp_trace); figures go through the one number formatter (format.c), the
 * module tree through the one tree printer (tree.c), into one mp_out
 * buffer. The JSON is trace_json.c's. */
#include "report/report.h"
#include "trace/trace.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

#define TR_BUF (64 * 1024)

typedef struct tr {
    mp_out out;
    const mp_trace_options *o;
    char buf[TR_BUF];
} tr;

static void put(tr *w, const char *s) { mp_out_puts(&w->out, s); }
static void putn(tr *w, const char *s, size_t n) { mp_out_write(&w->out, s, n); }

/* printf into the writer's buffer (the one output buffer, report.c) */
#define pf(w, ...) mp_out_printf(&(w)->out, __VA_ARGS__)

/* A name made safe for a terminal, cut and padded to `width` columns. */
static void cell(tr *w, const char *s, int width, bool right) { mp_out_cell(&w->out, s, width, right); }

/* A duration; negative as PyTorch's key_averages() prints one (an
 * operator's self time less than its children's, where the trace's
 * microsecond rounding put a child past its parent's end): "-2.69 ms". */
static const char *secs(int64_t ns, char *b) {
    mp_fmtbuf f = mp_fmt_seconds((double)(ns < 0 ? -ns : ns) / 1e9);
    return mp_fmt_signed(b, ns < 0 ? '-' : 0, f.s);
}

static void rule(tr *w, const char *title) { mp_out_rule(&w->out, title, 100); }

static double tflops(uint64_t flops, int64_t ns) {
    return ns > 0 ? (double)flops / ((double)ns / 1e9) / 1e12 : 0;
}

/* ---- text: one trace ---- */

static void text_steps(tr *w, const mp_trace *t) {
    char a[MP_FMT_MAX], b[MP_FMT_MAX];
    rule(w, "Steps");
    if (t->no_device) {   /* nothing ran on a device: no idle to explain, no device time to split */
        pf(w, "%-16s %10s %12s %12s   (host times: no device in this trace)\n", "step", "wall",
           "optim host", "FLOPs");
        for (int k = 0; k < t->n_steps; k++) {
            const mp_tstep *s = &t->steps[k];
            cell(w, s->name, 16, false);
            pf(w, " %10s %12s %12s\n", secs(s->wall, a), secs(s->optimizer, b),
               t->no_shapes ? "?" : mp_fmt_flops(s->flops).s);
        }
        return;
    }
    pf(w, "%-16s %10s %10s %7s | %10s %10s %10s %10s %10s %10s %10s\n", "step", "wall", "dev busy", "util",
       "idle", "loader", "collective", "range", "launch", "sync", "other");
    for (int k = 0; k < t->n_steps; k++) {
        const mp_tstep *s = &t->steps[k];
        int64_t idle = s->wall > s->busy ? s->wall - s->busy : 0;
        cell(w, s->name, 16, false);
        pf(w, " %10s", secs(s->wall, a));
        pf(w, " %10s %7s |", secs(s->busy, b), mp_fmt_pct((uint64_t)s->busy, (uint64_t)s->wall).s);
        pf(w, " %10s", secs(idle, a));
        for (int c = 0; c < MP_TI_COUNT; c++) pf(w, " %10s", secs(s->idle[c], a));
        putn(w, "\n", 1);
    }
    put(w, "\nIdle time by cause (Holistic Trace Analysis' idle breakdown, adapted): loader = the\n"
           "device idle while the host was inside the data loader; collective = while its host\n"
           "waited in a collective (or, in a job, while a collective kernel waited for its peers);\n"
           "range = while the host was inside a record_function range that launched nothing;\n"
           "launch = the next kernel was launched after the device went idle (host late); sync =\n"
           "the same right after the host waited on the device; other = the next kernel was queued\n"
           "already (dependencies).\n\n");
    if (t->n_calls) {
        pf(w, "%-16s %10s %10s %10s %s\n", "collectives", "calls", "time", "overlap",
           "(time in collectives; overlap: the share of it the device computed, as HTA)");
        for (int k = 0; k < t->n_steps; k++) {
            const mp_tstep *s = &t->steps[k];
            cell(w, s->name, 16, false);
            pf(w, " %10d %10s %10s\n", s->n_calls, secs(s->comm, a),
               s->comm > 0 ? mp_fmt_pct((uint64_t)s->comm_overlap, (uint64_t)s->comm).s : "-");
        }
        putn(w, "\n", 1);
    }
    pf(w, "%-16s", "device time by");
    for (int c = 0; c < MP_TC_COUNT; c++) pf(w, " %12s", mp_tcat_names[c]);
    putn(w, "\n", 1);
    for (int k = 0; k < t->n_steps; k++) {
        const mp_tstep *s = &t->steps[k];
        cell(w, s->name, 16, false);
        for (int c = 0; c < MP_TC_COUNT; c++) pf(w, " %12s", secs(s->cat[c], a));
        putn(w, "\n", 1);
    }
    putn(w, "\n", 1);
    pf(w, "%-16s %12s %12s %12s %12s %12s %12s\n", "step", "optim host", "optim dev",
       "FLOPs", "alloc start", "alloc peak", "alloc end");
    for (int k = 0; k < t->n_steps; k++) {
        const mp_tstep *s = &t->steps[k];
        cell(w, s->name, 16, false);
        pf(w, " %12s %12s %12s", secs(s->optimizer, a), secs(s->optimizer_dev, b),
           t->no_shapes ? "?" : mp_fmt_flops(s->flops).s);
        for (int i = 0; i < 3; i++) {
            int64_t v = i == 0 ? s->mem_start : i == 1 ? s->mem_peak : s->mem_end;
            pf(w, " %12s", v >= 0 ? mp_fmt_bytes((uint64_t)v).s : "?");
        }
        putn(w, "\n", 1);
    }
}

static void text_findings(tr *w, const mp_trace *t) {
    rule(w, "Findings");
    if (!t->n_findings) put(w, "(nothing stands out)\n");
    for (int i = 0; i < t->n_findings; i++) pf(w, "%d. %s\n", i + 1, t->findings[i].text);
}

static void text_efficiency(tr *w, const mp_trace *t) {
    const char *const *dt = mp_tdtype_names;
    rule(w, "Efficiency");
    if (t->no_shapes && t->flops_null) {   /* unknown, not zero */
        pf(w, "FLOPs: unknown (%llu operators' \"flops\" are null in this trace); achieved FLOP/s and "
              "MFU unknown\n",
           (unsigned long long)t->flops_null);
        return;
    }
    if (t->no_shapes) {
        put(w, "FLOPs: not counted (no operator shapes in this trace: record_shapes=True); "
               "achieved FLOP/s and MFU unknown\n");
        return;
    }
    double tf = tflops(t->flops_total, t->wall_total);
    pf(w, "counted FLOPs over %d steps: %s, backward %s of them (from the recorded shapes:\n"
          "with_flops' forward rules; convolution and attention backward as\n"
          "torch.utils.flop_counter counts them), dominant dtype %s\n",
       t->n_steps, mp_fmt_flops(t->flops_total).s, mp_fmt_flops(t->flops_bwd).s,
       dt[t->dominant_dtype]);
    if (t->n_uncounted) {
        put(w, "uncounted (launched kernels, no FLOP rule):");
        int col = 43;
        for (int i = 0; i < t->n_uncounted; i++) {
            char item[160];
            int n = snprintf(item, sizeof item, " %lld x %s%s", (long long)t->uncounted[i].count,
                             t->uncounted[i].name, i + 1 < t->n_uncounted ? "," : "");
            if (n < 0) continue;
            if (col + n > 100) {
                put(w, "\n");
                col = 0;
            }
            put(w, item);
            col += n;
        }
        put(w, "\n");
    }
    pf(w, "achieved: %s\n", mp_fmt_si_d(tf * 1e12, "FLOPS").s);
    if (t->peak_tflops > 0)
        pf(w, "peak: %s (%s); MFU %s\n", mp_fmt_si_d(t->peak_tflops * 1e12, "FLOPS").s,
           t->peak_source, mp_fmt_pct_d(tf, t->peak_tflops).s);
    else if (t->no_device)
        put(w, "peak: no device in this trace; MFU unknown\n");
    else
        pf(w, "peak: unknown for '%s' and %s (give --peak-tflops); MFU unknown\n",
           t->raw.device_name[0] ? t->raw.device_name : "?", dt[t->dominant_dtype]);
}

static void text_ops(tr *w, const mp_trace *t) {
    char a[4][MP_FMT_MAX];
    int top = w->o->top;
    rule(w, mp_trace_ops_device_time(t) ? "Operators (key_averages), by self device time"
                : "Operators (key_averages), by self CPU time (no device time in this trace)");
    /* a CPU-only trace: key_averages' columns for a CPU run (no device ones, all 0) */
    bool dev = !t->no_device;
    if (dev)
        pf(w, "%-48s %7s %10s %10s %10s %10s %8s\n", "operator", "count", "CPU total", "self CPU",
           "dev total", "self dev", "self dev%");
    else
        pf(w, "%-48s %7s %10s %10s\n", "operator", "count", "CPU total", "self CPU");
    /* PyTorch's "Self CUDA %": of the summed time of the device's own
     * events (kernels, copies, sets; not annotations) */
    int64_t tot = t->kernel_total;
    int shown = 0;
    for (int i = 0; i < t->n_ops && (top < 0 || shown < top); i++) {
        const mp_top *o = &t->ops[i];
        if (o->device) continue;   /* device rows: the kernel table */
        cell(w, o->name, 48, false);
        if (dev)
            pf(w, " %7lld %10s %10s %10s %10s %8s\n", (long long)o->count, secs(o->cpu_total, a[0]),
               secs(o->self_cpu, a[1]), secs(o->dev_total, a[2]), secs(o->self_dev, a[3]),
               mp_fmt_pct((uint64_t)o->self_dev, (uint64_t)tot).s);
        else
            pf(w, " %7lld %10s %10s\n", (long long)o->count, secs(o->cpu_total, a[0]), secs(o->self_cpu, a[1]));
        shown++;
    }
    int n_cpu = 0;
    for (int i = 0; i < t->n_ops; i++) n_cpu += !t->ops[i].device;
    if (shown < n_cpu) pf(w, "(%d more operators: --top -1 shows all; the JSON has all)\n", n_cpu - shown);
}

static void text_kernels(tr *w, const mp_trace *t) {
    char a[2][MP_FMT_MAX];
    int top = w->o->top;
    rule(w, "Kernels, by total device time");
    pf(w, "%-56s %6s %10s %9s %7s %-12s %s\n", "kernel", "count", "total", "mean", "%", "category",
       "launched by");
    int n = top < 0 ? t->n_kernels : MP_MIN(top, t->n_kernels);
    for (int i = 0; i < n; i++) {
        const mp_tkernel *k = &t->kernels[i];
        cell(w, k->short_name, 56, false);
        pf(w, " %6lld %10s %9s %7s %-12s ", (long long)k->count, secs(k->total, a[0]),
           secs(k->count ? k->total / k->count : 0, a[1]),
           mp_fmt_pct((uint64_t)k->total, (uint64_t)t->kernel_total).s, mp_tcat_names[k->cat]);
        cell(w, k->op ? k->op : "-", 0, false);
        putn(w, "\n", 1);
    }
    if (n < t->n_kernels) pf(w, "(%d more kernels)\n", t->n_kernels - n);
}

static void text_memory(tr *w, const mp_trace *t) {
    rule(w, "Memory (device)");
    if (t->mem_peak_alloc < 0) {
        put(w, "no [memory] events (profile_memory=True records them)\n");
        return;
    }
    pf(w, "peak allocated %s, peak reserved %s", mp_fmt_bytes((uint64_t)t->mem_peak_alloc).s,
       mp_fmt_bytes((uint64_t)t->mem_peak_reserved).s);
    if (t->raw.device_mem > 0)
        pf(w, " of %s (%s)", mp_fmt_bytes((uint64_t)t->raw.device_mem).s,
           mp_fmt_pct((uint64_t)t->mem_peak_reserved, (uint64_t)t->raw.device_mem).s);
    put(w, " in the profiled window\n");
    /* operators that allocate most */
    int idx[10], n = 0;
    for (; n < 10; n++) {   /* the ten largest, by selection */
        int best = -1;
        for (int i = 0; i < t->n_ops; i++) {
            if (t->ops[i].alloc_bytes <= 0) continue;
            bool taken = false;
            for (int j = 0; j < n && !taken; j++) taken = idx[j] == i;
            if (!taken && (best < 0 || t->ops[i].alloc_bytes > t->ops[best].alloc_bytes)) best = i;
        }
        if (best < 0) break;
        idx[n] = best;
    }
    if (n) put(w, "operators that allocate most (bytes allocated inside them, all steps):\n");
    for (int i = 0; i < n; i++) {
        put(w, "  ");
        cell(w, t->ops[idx[i]].name, 48, false);
        pf(w, " %12s\n", mp_fmt_bytes((uint64_t)t->ops[idx[i]].alloc_bytes).s);
    }
}

/* the module tree through the one tree printer */
typedef struct mod_ud {
    const mp_trace *t;
    char lab[256];
    char cls[256];
} mod_ud;

static const char *mod_label(int m, void *ud) {
    mod_ud *u = ud;
    const mp_module *md = &u->t->mods[m];
    size_t n = 0;
    for (const char *p = md->name ? md->name : "?"; *p && n < sizeof u->lab - 1; p++)
        u->lab[n++] = (unsigned char)*p < 0x20 ? '?' : *p;
    u->lab[n] = 0;
    return u->lab;
}

static const char *mod_cls(int m, void *ud) {
    mod_ud *u = ud;
    const mp_module *md = &u->t->mods[m];
    if (!md->cls) return NULL;
    size_t n = 0;
    for (const char *p = md->cls; *p && n < sizeof u->cls - 1; p++)
        u->cls[n++] = (unsigned char)*p < 0x20 ? '?' : *p;
    u->cls[n] = 0;
    return u->cls;
}

static void mod_figs(mp_out *o, int m, void *ud) {
    mod_ud *u = ud;
    const mp_trace *t = u->t;
    const mp_tmod *f = &t->mfig[m], *root = &t->mfig[0];
    char a[MP_FMT_MAX], b[MP_FMT_MAX];
    char line[512];
    int64_t tot = root->fwd + root->bwd;
    int n = snprintf(line, sizeof line, "fwd %s, bwd %s = %s of %s time", secs(f->fwd, a),
                     secs(f->bwd, b), mp_fmt_pct((uint64_t)(f->fwd + f->bwd), (uint64_t)tot).s,
                     t->cpu_modules ? "CPU" : "device");
    if (n > 0) mp_out_write(o, line, MP_MIN((size_t)n, sizeof line - 1));
    if (f->flops) {
        n = snprintf(line, sizeof line, ", %s fwd, %s", mp_fmt_flops(f->flops).s,
                     f->fwd > 0 ? mp_fmt_si_d(tflops(f->flops, f->fwd) * 1e12, "FLOPS").s : "?");
        if (n > 0) mp_out_write(o, line, MP_MIN((size_t)n, sizeof line - 1));
    }
    if (f->bwd_flops) {
        n = snprintf(line, sizeof line, ", %s bwd", mp_fmt_flops(f->bwd_flops).s);
        if (n > 0) mp_out_write(o, line, MP_MIN((size_t)n, sizeof line - 1));
    }
    if (m > 0 && f->calls > 1) {
        n = snprintf(line, sizeof line, ", %lld calls", (long long)f->calls);
        if (n > 0) mp_out_write(o, line, MP_MIN((size_t)n, sizeof line - 1));
    }
}

typedef struct mgroup {
    const char *cls;
    int depth;
    int64_t time;
    uint64_t flops;
} mgroup;

static int mgroup_cmp(const void *x, const void *y) {
    const mgroup *a = x, *b = y;
    if (a->depth != b->depth) return a->depth - b->depth;
    return (a->time < b->time) - (a->time > b->time);
}

static mp_status text_modules(tr *w, const mp_trace *t) {
    char a[MP_FMT_MAX], b[MP_FMT_MAX];
    rule(w, "Modules");
    if (t->n_mods <= 1) {
        put(w, "no nn.Module scopes in this trace (profile with with_stack=True and "
               "with_modules=True)\n");
        return MP_OK;
    }
    const mp_tmod *r = &t->mfig[0];
    pf(w, "module forward %s time %s, backward %s; forward FLOPs %s\n",
       t->cpu_modules ? "CPU" : "device", secs(r->fwd, a),
       secs(r->bwd, b), mp_fmt_flops(r->flops).s);
    pf(w, "backward operators tied to their forward operator: %lld of %lld (%lld flows followed,\n"
          "the rest by sequence number)\n",
       (long long)t->linked_bwd, (long long)t->bwd_ops, (long long)t->linked_flow);
    /* top modules per depth, classes at one depth summed (DeepSpeed's
     * aggregated block) */
    mgroup *g = calloc((size_t)t->n_mods, sizeof *g);
    if (!g) return mp_error(MP_ERR_NOMEM, "out of memory while writing the report");
    int ng = 0, maxd = 0;
    for (int m = 1; m < t->n_mods; m++) {
        const mp_module *md = &t->mods[m];
        if (w->o->depth >= 0 && md->depth > w->o->depth) continue;
        maxd = MP_MAX(maxd, md->depth);
        int j = 0;
        while (j < ng && !(g[j].depth == md->depth && strcmp(g[j].cls, md->cls) == 0)) j++;
        if (j == ng) {
            g[ng].cls = md->cls;
            g[ng].depth = md->depth;
            ng++;
        }
        MP_SADD(g[j].time, t->mfig[m].fwd + t->mfig[m].bwd);
        MP_SADD(g[j].flops, t->mfig[m].flops);
    }
    if (ng > 1) qsort(g, (size_t)ng, sizeof *g, mgroup_cmp);
    pf(w, "\nTop modules per depth by forward + backward %s time (a class at one depth summed):\n",
       t->cpu_modules ? "CPU" : "device");
    for (int d = 1; d <= maxd; d++) {
        pf(w, "depth %d: {", d);
        int shown = 0;
        for (int j = 0; j < ng; j++) {
            if (g[j].depth != d || (w->o->top >= 0 && shown >= MP_MIN(w->o->top, 5))) continue;
            if (g[j].time <= 0) continue;
            pf(w, "%s'%s': '%s'", shown ? ", " : "", g[j].cls, secs(g[j].time, a));
            shown++;
        }
        put(w, "}\n");
    }
    free(g);
    put(w, "\nDetailed module tree (all calls in the window; figures include submodules):\n");
    mod_ud u = {t, {0}, {0}};
    mp_tree_style st = {mod_label, mod_cls, mod_figs, &u};
    return mp_tree_print(&w->out, t->mods, t->n_mods, w->o->depth, &st);
}

static mp_status text_one(tr *w, const mp_trace *t) {
    char a[MP_FMT_MAX], b[MP_FMT_MAX];
    rule(w, "Trace analysis");
    pf(w, "trace:   %s (%s of JSON%s, %llu events)\n", t->path ? t->path : "?",
       mp_fmt_bytes(t->raw.bytes).s, t->raw.gzipped ? ", gzipped" : "",
       (unsigned long long)t->raw.n_events);
    pf(w, "device:  %s", t->raw.device_name[0] ? t->raw.device_name
                         : t->no_device                      ? "none recorded (a CPU-only trace)"
                                                             : "?");
    if (t->raw.device_sms > 0) pf(w, ", %lld SMs", (long long)t->raw.device_sms);
    if (t->raw.device_mem > 0) pf(w, ", %s", mp_fmt_bytes((uint64_t)t->raw.device_mem).s);
    if (t->raw.rank >= 0) pf(w, "; rank %d", t->raw.rank);
    putn(w, "\n", 1);
    int64_t idle = t->wall_total > t->busy_total ? t->wall_total - t->busy_total : 0;
    char c[MP_FMT_MAX];
    if (t->no_device)
        pf(w, "steps:   %d, wall %s\n", t->n_steps, secs(t->wall_total, a));
    else
        pf(w, "steps:   %d, wall %s, device busy %s (%s utilisation), idle %s\n", t->n_steps,
       secs(t->wall_total, a), secs(t->busy_total, b),
       mp_fmt_pct((uint64_t)t->busy_total, (uint64_t)t->wall_total).s, secs(idle, c));
    text_findings(w, t);
    text_steps(w, t);
    text_efficiency(w, t);
    text_ops(w, t);
    if (!t->no_device) { /* no kernels and no device memory to show */
        text_kernels(w, t);
        text_memory(w, t);
    }
    return text_modules(w, t);
}

/* ---- several ranks: the job ---- */

static const char *base_name(const char *p) {
    const char *b = p ? strrchr(p, '/') : NULL;
    return b ? b + 1 : p;
}

static void text_job(tr *w, const mp_trace *const *t, const mp_tjob *j) {
    char a[6][MP_FMT_MAX];
    int ns = j->n_steps > 0 ? j->n_steps : 1;
    rule(w, "Ranks");
    pf(w, "%-5s %-28s %10s %7s %10s %10s %10s %10s %10s %6s\n", "rank", "trace", "mean step",
       "util", "comm", "coll wait", "launch", "wait", "late", "strag");
    for (int r = 0; r < j->n_ranks; r++) {
        const mp_tjob_rank *x = &j->ranks[r];
        const mp_trace *tt = t[x->index];
        int64_t n1 = tt->n_steps ? tt->n_steps : 1, cw = 0, la = 0;
        for (int k = 0; k < tt->n_steps; k++) {
            MP_SADD(cw, tt->steps[k].idle[MP_TI_COLL]);
            MP_SADD(la, tt->steps[k].idle[MP_TI_LAUNCH]);
        }
        pf(w, "%-5d ", x->rank);
        cell(w, base_name(tt->path), 28, false);
        pf(w, " %10s %7s %10s %10s %10s %10s %10s %6s\n", secs(tt->wall_total / n1, a[0]),
           mp_fmt_pct((uint64_t)tt->busy_total, (uint64_t)tt->wall_total).s,
           secs(tt->comm_total / n1, a[1]), secs(cw / n1, a[2]), secs(la / n1, a[3]),
           secs(x->wait / n1, a[4]), secs(x->late / ns, a[5]), x->straggler ? "yes" : "");
    }
    put(w, "(per step on average: comm = time in collectives; coll wait = device idle while waiting\n"
           "in them; wait = its waits at the collectives (from its arrival to the last arrival,\n"
           "concurrent calls once); late = its lateness, after the median of the other ranks)\n");
    rule(w, "Job");
    if (!j->match_by) {
        pf(w, "%d ranks, %d steps; no collective calls in the traces: the ranks cannot be compared\n"
              "at their meeting points.\n", j->n_ranks, j->n_steps);
        return;
    }
    pf(w, "%d ranks, %d steps; collectives matched across ranks by %s: %d matched, %d calls\n"
          "unmatched; a rank counts as late in a step from %s (1%% of the median step)\n",
       j->n_ranks, j->n_steps, j->match_by, j->n_matched, j->n_unmatched, secs(j->threshold, a[0]));
    if (j->warning[0]) {
        put(w, "warning: ");
        put(w, j->warning); /* modelprof's own words and rank numbers */
        put(w, "\n");
    }
    put(w, "\nStragglers (late in most steps):\n");
    if (!j->n_stragglers) put(w, "  none\n");
    for (int i = 0; i < j->n_stragglers; i++) {
        const mp_tjob_rank *x = &j->ranks[j->stragglers[i]];
        pf(w, "  rank %d: late in %d of %d steps, %s a step on average (the rank the others waited\n"
              "  for in %d steps); cause: %s\n",
           x->rank, x->late_steps, j->n_steps, secs(x->late / ns, a[0]), x->critical_steps,
           x->cause[0] ? x->cause : "not found");
    }
    put(w, "\nSteps: the critical rank (the one the others waited for) and how late it was:\n");
    pf(w, "%-16s %10s %8s %10s %12s  %s\n", "step", "job wall", "critical", "delay", "if median",
       "cause");
    for (int s = 0; s < j->n_steps; s++) {
        const mp_tjob_step *x = &j->steps[s];
        cell(w, x->name, 16, false);
        if (x->critical < 0) {
            pf(w, " %10s %8s\n", secs(x->wall, a[0]), "-");
            continue;
        }
        pf(w, " %10s %8d %10s %12s  %s\n", secs(x->wall, a[0]), j->ranks[x->critical].rank,
           secs(x->delay, a[1]), secs(x->wall - x->saved, a[2]), x->cause[0] ? x->cause : "-");
    }
    put(w, "(if median: the step had its critical rank run like the median rank)\n");
    pf(w, "\nWhat-if (Lin et al., \"Understanding Stragglers in Large Model Training Using What-if\n"
          "Analysis\"): the job's step %s; had every straggler run like the median rank, %s\n"
          "(%s of the job's time lost to stragglers).\n",
       secs(j->wall / ns, a[0]), secs(j->ideal / ns, a[1]),
       mp_fmt_pct((uint64_t)(j->wall - j->ideal), (uint64_t)j->wall).s);
    put(w, "Job time lost, by rank (had it alone run like the median rank):");
    int shown = 0;
    for (int r = 0; r < j->n_ranks && shown < 16; r++)
        if (j->ranks[r].whatif_saved > 0) {
            pf(w, "%s rank %d %s", shown ? "," : "", j->ranks[r].rank,
               mp_fmt_pct((uint64_t)j->ranks[r].whatif_saved, (uint64_t)j->wall).s);
            shown++;
        }
    put(w, shown ? "\n" : " none\n");
    put(w, "Job time lost, by cause:");
    for (int c = 0; c < j->n_causes; c++)
        pf(w, "%s %s %s", c ? "," : "", j->causes[c].name,
           mp_fmt_pct((uint64_t)j->causes[c].lost, (uint64_t)j->wall).s);
    put(w, j->n_causes ? "\n\n" : " none\n\n");
}

mp_status mp_trace_report_text(const mp_trace *const *t, int n, const mp_tjob *job,
                               const mp_trace_options *o, FILE *f) {
    tr *w = malloc(sizeof *w);
    if (!w) return mp_error(MP_ERR_NOMEM, "out of memory while writing the report");
    w->out = (mp_out){f, 0, TR_BUF, w->buf};
    const mp_trace_options defaults = MP_TRACE_OPTIONS_DEFAULT;   /* w lives in this call */
    w->o = o ? o : &defaults;
    mp_status st = MP_OK;
    char why[600];
    bool run = n > 1 && (job ? job->one_run : mp_trace_one_run(t, n, why, sizeof why));
    if (run && job) text_job(w, t, job);
    else if (n > 1 && !run)
        pf(w, "%d traces from different jobs, not ranks of one run: each is analysed "
              "apart.\n(%s)\n\n", n, job ? job->why : why);
    if (run && job)
        for (int r = 0; r < job->n_ranks && st == MP_OK; r++) st = text_one(w, t[job->ranks[r].index]);
    else
        for (int i = 0; i < n && st == MP_OK; i++) st = text_one(w, t[i]);
    rule(w, NULL);
    mp_out_flush(&w->out);
    free(w);
    return st;
}
