/* The training profile's text, in the layout of DeepSpeed's FlopsProfiler
 * print_model_profile (summary, aggregated profile per depth by class,
 * detailed tree), from the joined trace and static profile (train/train.h).
 * The JSON is json.c's mp_report_train_json. */
#include "report/report.h"
#include "train/train.h"

#include <stdlib.h>
#include <string.h>

#define TR_BUF (64 * 1024)

typedef struct trw {
    const mp_train *t;
    const mp_train_options *o;
    mp_out out;
    char buf[TR_BUF];
} trw;

static double per_call(double v, int64_t calls) { return calls > 0 ? v / (double)calls : v; }

/* FLOPs over seconds, "?" without time. */
static mp_fmtbuf rate(double flops, double s) {
    if (!(s > 0)) {
        mp_fmtbuf b;
        snprintf(b.s, sizeof b.s, "%s", MP_FMT_UNKNOWN);
        return b;
    }
    return mp_fmt_si_d(flops / s, "FLOPS");
}

/* The profiler's own cost in a profiled step. Measured, when steps ran
 * before profiling: the binding's perf_counter iteration then against while
 * profiling (mp_train_set_clock). Estimated always, from the trace's
 * records times the costs the binding measured at start_profile
 * (mp_train_set_overhead): an estimate (a real step's operators can cost
 * more or less to record than the calibration's small one). `step` is the
 * profiled step's wall time, `n` the steps, `fwd_per_step` the forward
 * calls a step. */
static void overhead_lines(trw *w, double step, double n, double fwd_per_step) {
    const mp_train *t = w->t;
    const mp_train_clock *k = &t->clock;
    const mp_train_overhead *h = &t->overhead;
    mp_out *o = &w->out;
    const int c = 64;
    char label[96];
    bool before = k->before_calls > 1 && k->before_iter_s > 0;
    /* the clock times one forward call to the next: a step of several
     * forwards (gradient accumulation) is that many of them */
    double f = fwd_per_step > 1 ? fwd_per_step : 1;
    if (before) {
        if (f > 1)
            snprintf(label, sizeof label, "iter latency before profiling (%d calls x %.3g):", k->before_calls, f);
        else
            snprintf(label, sizeof label, "iter latency before profiling (perf_counter, %d calls):",
                     k->before_calls);
        if (k->profiled_calls > 1 && k->profiled_iter_s > 0)
            mp_out_printf(o, "%-*s%s (profiled: %s, %.2fx)\n", c, label,
                          mp_fmt_seconds(f * k->before_iter_s).s,
                          mp_fmt_seconds(f * k->profiled_iter_s).s,
                          k->profiled_iter_s / k->before_iter_s);
        else
            mp_out_printf(o, "%-*s%s\n", c, label, mp_fmt_seconds(f * k->before_iter_s).s);
    } else if (k->profiled_calls > 0) {
        mp_out_printf(o, "%-*s%s\n", c, "iter latency before profiling:",
                      "not measured (run two steps or more before start_profile to see it)");
    }
    if (k->before_calls > 0 && k->before_fwd_s > 0)
        mp_out_printf(o, "%-*s%s\n", c, "fwd latency before profiling (perf_counter):",
                      mp_fmt_seconds(k->before_fwd_s).s);
    if (h->known && n > 0) {
        double per = t->overhead.total_s / n;
        /* a cost the calibration could not tell from its clock's noise
         * (the binding passes 0: profiler on no slower than off) is said
         * so, not multiplied as "x 0 s" */
        char ops[96], ranges[96];
        if (h->op_s > 0)
            snprintf(ops, sizeof ops, "%.0f operator records x %s", (double)h->ops / n,
                     mp_fmt_seconds(h->op_s).s);
        else
            snprintf(ops, sizeof ops, "%.0f operator records, each too cheap to measure",
                     (double)h->ops / n);
        if (h->range_s > 0)
            snprintf(ranges, sizeof ranges, "%.0f module ranges x %s", (double)h->ranges / n,
                     mp_fmt_seconds(h->range_s).s);
        else
            snprintf(ranges, sizeof ranges, "%.0f module ranges, each too cheap to measure",
                     (double)h->ranges / n);
        mp_out_printf(o, "%-*sabout %s a step (%s + %s; costs measured at start_profile)\n",
                      c, "profiler overhead (estimated from its records):", mp_fmt_seconds(per).s,
                      ops, ranges);
        if (step > per)
            mp_out_printf(o, "%-*sabout %s\n", c, "iter latency without the profiler (estimated):",
                          mp_fmt_seconds(step - per).s);
        else /* the calibration ran on a busy machine: its costs read high */
            mp_out_printf(o, "%-*snot estimated: the records' cost (%s) is above the profiled step "
                             "(%s); %s\n",
                          c, "iter latency without the profiler (estimated):", mp_fmt_seconds(per).s,
                          mp_fmt_seconds(step).s,
                          before ? "the perf_counter iteration before profiling is the figure"
                                 : "run steps before start_profile to measure it");
    }
}

static void summary(trw *w) {
    const mp_train *t = w->t;
    const mp_train_row *root = &t->rows[0];
    mp_out *o = &w->out;
    int64_t calls = root->calls > 0 ? root->calls : 1;
    mp_out_puts(o, "-------------------------- modelprof Flops Profiler (DeepSpeed layout) "
                   "--------------------------\n");
    mp_out_printf(o, "Profile Summary at step %d (%lld forward call%s recorded; times are %s time "
                     "from the trace):\n",
                  w->o->step, (long long)root->calls, root->calls == 1 ? "" : "s",
                  t->cpu_time ? "CPU" : "device");
    mp_out_puts(o, "Notations:\n"
                   "number of parameters (params), number of multiply-accumulate operations (MACs),\n"
                   "number of floating-point operations (flops), floating-point operations per "
                   "second (FLOPS),\n"
                   "fwd latency (forward propagation latency), bwd latency (backward propagation "
                   "latency),\n"
                   "step (weights update latency), iter latency (sum of fwd, bwd and step latency)\n\n");
    double fwd = per_call(root->fwd_s, calls), bwd = per_call(root->bwd_s, calls);
    double fl = per_call((double)root->flops, calls);
    const int c = 64;
    if (t->n_shapes > 1)
        mp_out_printf(o, "(the calls had %d input shapes: MACs and flops sum each call's, from one export "
                         "of each shape; per device: their mean over the calls)\n",
                      t->n_shapes);
    mp_out_printf(o, "%-*s%s\n", c, "params per device:", mp_fmt_count(root->params).s);
    mp_out_printf(o, "%-*s%s\n", c, "fwd MACs per device:",
                  mp_fmt_macs((uint64_t)per_call((double)root->macs, calls)).s);
    mp_out_printf(o, "%-*s%s\n", c, "fwd flops per device:", mp_fmt_flops((uint64_t)fl).s);
    mp_out_printf(o, "%-*s%s\n", c, "fwd latency:", mp_fmt_seconds(fwd).s);
    mp_out_printf(o, "%-*s%s\n", c, "bwd latency:", mp_fmt_seconds(bwd).s);
    mp_out_printf(o, "%-*s%s\n", c, "fwd FLOPS per device = fwd flops per device / fwd latency:",
                  rate(fl, fwd).s);
    mp_out_printf(o, "%-*s%s\n", c, "bwd FLOPS per device = 2 * fwd flops per device / bwd latency:",
                  rate(2 * fl, bwd).s);
    mp_out_printf(o, "%-*s%s\n", c, "fwd+bwd FLOPS per device = 3 * fwd flops / (fwd+bwd latency):",
                  rate(3 * fl, fwd + bwd).s);
    if (t->n_steps > 0 && t->wall_s > 0) {
        /* ProfilerStep ranges when the loop called prof.step(); else the
         * optimizer's steps (gradient accumulation runs several forwards
         * a step); else the profiled calls */
        double n = t->profiler_steps ? t->n_steps : t->opt_steps > 0 ? t->opt_steps : (double)calls;
        mp_out_printf(o, "%-*s%s\n", c, "step latency (optimizer):",
                      mp_fmt_seconds(t->optimizer_s / n).s);
        mp_out_printf(o, "%-*s%s\n", c, "iter latency (profiled step, wall):",
                      mp_fmt_seconds(t->wall_s / n).s);
        overhead_lines(w, t->wall_s / n, n, (double)calls / n);
    }
}

/* One class at one depth, summed. */
typedef struct agg {
    const char *cls;
    uint64_t params, macs;
    double fwd, bwd;
} agg;

static int agg_key;   /* which figure sorts (qsort has no user data) */
static double agg_val(const agg *a) {
    switch (agg_key) {
    case 0: return (double)a->params;
    case 1: return (double)a->macs;
    case 2: return a->fwd;
    default: return a->bwd;
    }
}
static int agg_cmp(const void *x, const void *y) {
    double a = agg_val(x), b = agg_val(y);
    if (a != b) return a < b ? 1 : -1;
    return strcmp(((const agg *)x)->cls, ((const agg *)y)->cls);
}

static mp_status aggregated(trw *w) {
    const mp_train *t = w->t;
    mp_out *o = &w->out;
    mp_out_puts(o, "\n----------------------------- Aggregated Profile per device "
                   "-----------------------------\n");
    mp_out_printf(o, "Top modules in terms of params, MACs or fwd latency at different model depths\n"
                     "(modules of one class at one depth summed; MACs and latencies over the %lld "
                     "profiled calls):\n",
                  (long long)t->rows[0].calls);
    agg *a = malloc(sizeof *a * (size_t)t->n);
    if (!a) return mp_error(MP_ERR_NOMEM, "out of memory while writing the report");
    int maxd = w->o->depth >= 0 && w->o->depth < t->max_depth ? w->o->depth : t->max_depth;
    static const char *const what[4] = {"params     ", "MACs       ", "fwd latency", "bwd latency"};
    for (int d = 0; d <= maxd; d++) {
        int na = 0;
        for (int i = 0; i < t->n; i++) {
            if (t->mods[i].depth != d) continue;
            const mp_train_row *r = &t->rows[i];
            int k = 0;
            while (k < na && strcmp(a[k].cls, r->cls) != 0) k++;
            if (k == na) a[na++] = (agg){r->cls, 0, 0, 0, 0};
            a[k].params += r->params;
            a[k].macs += r->macs;
            a[k].fwd += r->fwd_s;
            a[k].bwd += r->bwd_s;
        }
        int top = w->o->top < 0 || w->o->top > na ? na : w->o->top;
        mp_out_printf(o, "depth %d:\n", d);
        for (int key = 0; key < 4; key++) {
            agg_key = key;
            qsort(a, (size_t)na, sizeof *a, agg_cmp);
            mp_out_printf(o, "    %s - {", what[key]);
            for (int k = 0; k < top; k++) {
                mp_fmtbuf v = key == 0   ? mp_fmt_count(a[k].params)
                              : key == 1 ? mp_fmt_macs(a[k].macs)
                              : key == 2 ? mp_fmt_seconds(a[k].fwd)
                                         : mp_fmt_seconds(a[k].bwd);
                mp_out_printf(o, "%s'%s': '%s'", k ? ", " : "", a[k].cls, v.s);
            }
            mp_out_puts(o, "}\n");
        }
    }
    free(a);
    return MP_OK;
}

static const char *tr_label(int module, void *ud) {
    const trw *w = ud;
    return w->t->mods[module].name;
}

static const char *tr_cls(int module, void *ud) {
    const trw *w = ud;
    return w->t->mods[module].cls;
}

static void tr_figs(mp_out *o, int module, void *ud) {
    const trw *w = ud;
    const mp_train_row *r = &w->t->rows[module], *tot = &w->t->rows[0];
    mp_out_printf(o, "%s, %s Params, %s, %s MACs, %s, %s fwd latency, %s, %s bwd latency, %s",
                  mp_fmt_count(r->params).s, mp_fmt_pct(r->params, tot->params).s,
                  mp_fmt_macs(r->macs).s, mp_fmt_pct(r->macs, tot->macs).s,
                  mp_fmt_seconds(r->fwd_s).s, mp_fmt_pct_d(r->fwd_s, tot->fwd_s).s,
                  mp_fmt_seconds(r->bwd_s).s, mp_fmt_pct_d(r->bwd_s, tot->bwd_s).s,
                  rate((double)r->flops, r->fwd_s).s);
}

static mp_status detailed(trw *w) {
    const mp_train *t = w->t;
    mp_out *o = &w->out;
    mp_out_puts(o, "\n------------------------------ Detailed Profile per device "
                   "------------------------------\n");
    mp_out_printf(o, "Figures summed over the %lld profiled calls. Each module profile is listed "
                     "after its name in the following order:\n"
                     "params, percentage of total params, MACs, percentage of total MACs, fwd "
                     "latency, percentage of total fwd latency, bwd latency, percentage of total "
                     "bwd latency, fwd FLOPS\n\n",
                  (long long)t->rows[0].calls);
    mp_tree_style st = {tr_label, tr_cls, tr_figs, w};
    /* the whole tree, as DeepSpeed prints the model (module_depth shapes
     * the aggregated block only) */
    return mp_tree_print(o, t->mods, t->n, -1, &st);
}

mp_status mp_report_train_text(const mp_train *t, const mp_train_options *o, FILE *f) {
    trw *w = malloc(sizeof *w);
    if (!w) return mp_error(MP_ERR_NOMEM, "out of memory while writing the report");
    w->t = t;
    w->o = o;
    w->out.f = f;
    w->out.n = 0;
    w->out.cap = TR_BUF;
    w->out.buf = w->buf;
    summary(w);
    mp_status st = aggregated(w);
    if (!st && o->detailed) st = detailed(w);
    if (!st)
        mp_out_puts(&w->out, "------------------------------------------------------------------"
                             "------------------------\n");
    mp_out_flush(&w->out);
    free(w);
    return st;
}

/* ---- the writer's options (mp_train_options): defaults and versioned size ---- */

void mp_train_defaults(mp_train_options *o) {
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->format = MP_FORMAT_TEXT;
    o->step = 1;
    o->depth = -1;
    o->top = 1;
    o->detailed = 1;
}

mp_status mp_train_options_init(mp_train_options *o, size_t size) {
    mp_train_options d;
    mp_train_defaults(&d);
    return mp_opts_init(o, size, &d, sizeof d, MP_TRAIN_OPTIONS_V1, "mp_train_options");
}
