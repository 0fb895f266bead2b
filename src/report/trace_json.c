/* The trace analysis as JSON (docs/JSON.md "Trace analysis";
 * docs/schema/trace.schema.json), through the one JSON writer (jw.h). It
 * reads only the trace summary (mp_trace). SI units: times in seconds,
 * rates in FLOP/s, shares as fractions 0-1. */
#include "report/jw.h"
#include "report/report.h"
#include "trace/trace.h"

static double ns_s(int64_t ns) { return (double)ns * 1e-9; }

/* FLOP/s, or null without time. */
static void rate(jw *w, uint64_t flops, int64_t ns) {
    if (ns > 0) jw_double(w, (double)flops / ns_s(ns));
    else jw_null(w);
}


static void summary(jw *w, const mp_trace *t) {
    static const char *const dt[MP_TDT_COUNT] = {"?", "fp32", "fp16", "bf16", "fp8", "fp64", "tf32"};
    double fps = t->wall_total > 0 ? (double)t->flops_total / ns_s(t->wall_total) : 0;
    jw_key(w, "summary");
    jw_open(w, '{');
    jw_ki64(w, "steps", t->n_steps);
    jw_key(w, "wall_s");
    jw_double(w, ns_s(t->wall_total));
    jw_key(w, "device_busy_s");
    jw_double(w, ns_s(t->busy_total));
    jw_key(w, "utilization");
    jw_double(w, t->wall_total > 0 ? (double)t->busy_total / (double)t->wall_total : 0);
    jw_ku64(w, "flops", t->flops_total);
    jw_ku64(w, "backward_flops", t->flops_bwd);
    jw_key(w, "uncounted");
    jw_open(w, '[');
    for (int i = 0; i < t->n_uncounted; i++) {
        jw_open(w, '{');
        jw_kstr(w, "name", t->uncounted[i].name ? t->uncounted[i].name : "");
        jw_ki64(w, "count", t->uncounted[i].count);
        jw_key(w, "self_device_s");
        jw_double(w, ns_s(t->uncounted[i].device));
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_kstr(w, "dtype", dt[t->dominant_dtype < MP_TDT_COUNT ? t->dominant_dtype : 0]);
    jw_key(w, "achieved_flops_per_s");
    jw_double(w, fps);
    jw_key(w, "peak_flops_per_s");
    if (t->peak_tflops > 0) jw_double(w, t->peak_tflops * 1e12);
    else jw_null(w);
    jw_key(w, "peak_source");
    jw_opt_str(w, t->peak_source);
    jw_key(w, "mfu");
    if (t->peak_tflops > 0) jw_double(w, fps / (t->peak_tflops * 1e12));
    else jw_null(w);
    jw_close(w, '}');
}

static void steps(jw *w, const mp_trace *t) {
    jw_key(w, "steps");
    jw_open(w, '[');
    for (int k = 0; k < t->n_steps; k++) {
        const mp_tstep *s = &t->steps[k];
        jw_open(w, '{');
        jw_kstr(w, "name", s->name ? s->name : "");
        jw_key(w, "start_s");
        jw_double(w, ns_s(s->ts));
        jw_key(w, "wall_s");
        jw_double(w, ns_s(s->wall));
        jw_key(w, "device_busy_s");
        jw_double(w, ns_s(s->busy));
        jw_key(w, "utilization");
        jw_double(w, s->wall > 0 ? (double)s->busy / (double)s->wall : 0);
        jw_key(w, "idle_s");
        jw_double(w, ns_s(s->wall > s->busy ? s->wall - s->busy : 0));
        jw_key(w, "idle_causes_s");
        jw_open(w, '{');
        for (int c = 0; c < MP_TI_COUNT; c++) {
            jw_key_str(w, mp_tidle_names[c]);
            jw_double(w, ns_s(s->idle[c]));
        }
        jw_close(w, '}');
        jw_key(w, "device_time_s");
        jw_open(w, '{');
        for (int c = 0; c < MP_TC_COUNT; c++) {
            jw_key_str(w, mp_tcat_names[c]);
            jw_double(w, ns_s(s->cat[c]));
        }
        jw_close(w, '}');
        jw_key(w, "optimizer_s");
        jw_double(w, ns_s(s->optimizer));
        jw_key(w, "optimizer_device_s");
        jw_double(w, ns_s(s->optimizer_dev));
        jw_key(w, "data_loader_cpu_s");
        jw_double(w, ns_s(s->loader_wall));
        jw_ku64(w, "flops", s->flops);
        jw_ku64(w, "backward_flops", s->flops_bwd);
        jw_key(w, "achieved_flops_per_s");
        rate(w, s->flops, s->wall);
        jw_key(w, "memory");
        jw_open(w, '{');
        jw_key(w, "start_allocated_bytes");
        jw_opt_i64(w, s->mem_start);
        jw_key(w, "peak_allocated_bytes");
        jw_opt_i64(w, s->mem_peak);
        jw_key(w, "end_allocated_bytes");
        jw_opt_i64(w, s->mem_end);
        jw_close(w, '}');
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

static void operators(jw *w, const mp_trace *t) {
    jw_key(w, "operators");
    jw_open(w, '[');
    for (int i = 0; i < t->n_ops; i++) {
        const mp_top *o = &t->ops[i];
        jw_open(w, '{');
        jw_kstr(w, "name", o->name ? o->name : "");
        jw_kbool(w, "device_side", o->device);
        jw_ki64(w, "count", o->count);
        jw_key(w, "cpu_total_s");
        jw_double(w, ns_s(o->cpu_total));
        jw_key(w, "self_cpu_s");
        jw_double(w, ns_s(o->self_cpu));
        jw_key(w, "device_total_s");
        jw_double(w, ns_s(o->dev_total));
        jw_key(w, "self_device_s");
        jw_double(w, ns_s(o->self_dev));
        jw_ku64(w, "flops", o->flops);
        jw_ki64(w, "device_alloc_bytes", o->alloc_bytes);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

static void kernels(jw *w, const mp_trace *t) {
    jw_key(w, "kernels");
    jw_open(w, '[');
    for (int i = 0; i < t->n_kernels; i++) {
        const mp_tkernel *k = &t->kernels[i];
        jw_open(w, '{');
        jw_kstr(w, "name", k->name ? k->name : "");
        jw_key(w, "short_name");
        jw_opt_str(w, k->short_name);
        jw_kstr(w, "kind", k->kind == MP_TD_KERNEL ? "kernel" : k->kind == MP_TD_MEMCPY ? "memcpy" : "memset");
        jw_kstr(w, "category", k->cat < MP_TC_COUNT ? mp_tcat_names[k->cat] : "other");
        jw_ki64(w, "count", k->count);
        jw_key(w, "total_s");
        jw_double(w, ns_s(k->total));
        jw_key(w, "mean_s");
        jw_double(w, k->count ? ns_s(k->total) / (double)k->count : 0);
        jw_key(w, "fraction");
        jw_double(w, t->kernel_total > 0 ? (double)k->total / (double)t->kernel_total : 0);
        jw_key(w, "operator");
        jw_opt_str(w, k->op);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

/* module_time says what the modules' fwd/bwd times are: "device" (their
 * kernels' time) or "cpu" (the wall time of the module ranges, a trace
 * without device rows). */
static void modules(jw *w, const mp_trace *t) {
    jw_kstr(w, "module_time", t->cpu_modules ? "cpu" : "device");
    jw_key(w, "modules");
    jw_open(w, '[');
    for (int m = 0; m < t->n_mods; m++) {
        const mp_module *md = &t->mods[m];
        const mp_tmod *f = &t->mfig[m];
        jw_open(w, '{');
        jw_kstr(w, "path", md->path ? md->path : "");
        jw_kstr(w, "name", md->name ? md->name : "");
        jw_key(w, "class");
        jw_opt_str(w, m ? md->cls : NULL);
        jw_ki64(w, "depth", md->depth);
        jw_ki64(w, "parent", md->parent);
        jw_ki64(w, "calls", f->calls);
        jw_key(w, "fwd_device_s");
        jw_double(w, ns_s(f->fwd));
        jw_key(w, "bwd_device_s");
        jw_double(w, ns_s(f->bwd));
        jw_ku64(w, "flops", f->flops);
        jw_ku64(w, "bwd_flops", f->bwd_flops);
        jw_key(w, "fwd_flops_per_s");
        if (f->flops && f->fwd > 0) rate(w, f->flops, f->fwd);
        else jw_null(w);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_key(w, "backward_link");
    jw_open(w, '{');
    jw_ki64(w, "backward_operators", t->bwd_ops);
    jw_ki64(w, "flows_followed", t->linked_flow);
    jw_ki64(w, "linked", t->linked_bwd);
    jw_close(w, '}');
}

static void memory(jw *w, const mp_trace *t) {
    jw_key(w, "memory");
    jw_open(w, '{');
    jw_key(w, "peak_allocated_bytes");
    jw_opt_i64(w, t->mem_peak_alloc);
    jw_key(w, "peak_reserved_bytes");
    jw_opt_i64(w, t->mem_peak_reserved);
    jw_key(w, "device_memory_bytes");
    jw_opt_i64(w, t->raw.device_mem);
    /* [seconds from the first step (or the first memory event), bytes] */
    jw_key(w, "curve");
    jw_open(w, '[');
    int64_t c0 = t->n_steps ? t->steps[0].ts : t->n_mem_curve ? t->mem_curve[0].ts : 0;
    for (int i = 0; i < t->n_mem_curve; i++) {
        jw_open(w, '[');
        jw_double(w, ns_s(t->mem_curve[i].ts - c0));
        jw_i64(w, t->mem_curve[i].allocated);
        jw_close(w, ']');
    }
    jw_close(w, ']');
    jw_close(w, '}');
}

/* Findings, most important first: machine-readable kind, figure, unit and
 * share beside the text with the advice. */
static void findings(jw *w, const mp_trace *t) {
    jw_key(w, "findings");
    jw_open(w, '[');
    for (int i = 0; i < t->n_findings; i++) {
        const mp_tfinding *f = &t->findings[i];
        jw_open(w, '{');
        jw_ki64(w, "priority", i + 1);
        jw_kstr(w, "kind", f->kind ? f->kind : "other");
        jw_key(w, "score");
        jw_double(w, f->score);
        jw_key(w, "value");
        jw_double(w, f->value);
        jw_kstr(w, "unit", f->unit ? f->unit : "");
        jw_key(w, "share");
        jw_double(w, f->share);
        jw_kstr(w, "text", f->text);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

static void one(jw *w, const mp_trace *t) {
    jw_open(w, '{');
    jw_kstr(w, "modelprof_version", MP_VERSION_STRING);
    jw_key(w, "trace");
    jw_opt_str(w, t->path);
    jw_ku64(w, "json_bytes", t->raw.bytes);
    jw_ku64(w, "events", t->raw.n_events);
    jw_key(w, "rank");
    jw_opt_i64(w, t->raw.rank);
    jw_key(w, "device");
    jw_open(w, '{');
    jw_key(w, "name");
    jw_opt_str(w, t->raw.device_name[0] ? t->raw.device_name : NULL);
    jw_key(w, "memory_bytes");
    jw_opt_i64(w, t->raw.device_mem);
    jw_key(w, "sms");
    jw_opt_i64(w, t->raw.device_sms);
    jw_close(w, '}');
    summary(w, t);
    steps(w, t);
    operators(w, t);
    kernels(w, t);
    modules(w, t);
    memory(w, t);
    findings(w, t);
    jw_close(w, '}');
}

mp_status mp_trace_report_json(const mp_trace *const *t, int n, const mp_trace_options *o,
                               FILE *f) {
    (void)o; /* the JSON holds everything: depth and top shape the text only */
    jw *w = jw_begin(f);
    if (!w) return MP_ERR_NOMEM;
    char why[600];
    if (n == 1) {
        one(w, t[0]);
    } else {
        /* one trace object a member of "ranks" or "traces": its members on lines too */
        w->multiline = JW_MULTILINE_LEVELS + 2;
        bool run = mp_trace_one_run(t, n, why, sizeof why);
        jw_open(w, '{');
        if (!run) jw_kstr(w, "separate_jobs", why); /* each analysed apart, no slowest rank */
        if (run) jw_key(w, "ranks");
        else jw_key(w, "traces");
        jw_open(w, '[');
        int slow = 0;
        for (int i = 0; i < n; i++) {
            one(w, t[i]);
            if (t[i]->n_steps && t[slow]->n_steps &&
                t[i]->wall_total / t[i]->n_steps > t[slow]->wall_total / t[slow]->n_steps)
                slow = i;
        }
        jw_close(w, ']');
        if (run) {
            jw_key(w, "slowest");
            jw_open(w, '{');
            jw_ki64(w, "index", slow);
            jw_key(w, "rank");
            jw_opt_i64(w, t[slow]->raw.rank);
            jw_key(w, "trace");
            jw_opt_str(w, t[slow]->path);
            jw_key(w, "mean_step_s");
            jw_double(w, t[slow]->n_steps ? ns_s(t[slow]->wall_total / t[slow]->n_steps) : 0);
            jw_close(w, '}');
        }
        jw_close(w, '}');
    }
    jw_end(w);
    return MP_OK;
}
