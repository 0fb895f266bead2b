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

/* FLOPs counted from recorded shapes; null when the trace recorded none
 * (unknown, not zero). */
static void flops_val(jw *w, const mp_trace *t, uint64_t flops) {
    if (t->no_shapes) jw_null(w);
    else jw_u64(w, flops);
}

/* A share (0-1), or null when there is nothing to share. */
static void share(jw *w, int64_t part, int64_t whole) {
    if (whole > 0) jw_double(w, (double)part / (double)whole);
    else jw_null(w);
}

static void summary(jw *w, const mp_trace *t) {
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
    jw_key(w, "flops");
        flops_val(w, t, t->flops_total);
    jw_key(w, "backward_flops");
        flops_val(w, t, t->flops_bwd);
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
    jw_kstr(w, "dtype", mp_tdtype_names[t->dominant_dtype < MP_TDT_COUNT ? t->dominant_dtype : 0]);
    jw_key(w, "achieved_flops_per_s");
    if (t->no_shapes) jw_null(w);
    else jw_double(w, fps);
    jw_key(w, "peak_flops_per_s");
    if (t->peak_tflops > 0) jw_double(w, t->peak_tflops * 1e12);
    else jw_null(w);
    jw_key(w, "peak_source");
    jw_opt_str(w, t->peak_source);
    jw_key(w, "mfu");
    if (t->peak_tflops > 0 && !t->no_shapes) jw_double(w, fps / (t->peak_tflops * 1e12));
    else jw_null(w);
    jw_key(w, "communication_s");
    jw_double(w, ns_s(t->comm_total));
    jw_key(w, "comm_compute_overlap");
    share(w, t->comm_overlap_total, t->comm_total);
    jw_ki64(w, "collective_calls", t->n_calls);
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
        jw_ns_seconds(w, s->ts);
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
        jw_key(w, "communication_s");
        jw_double(w, ns_s(s->comm));
        jw_key(w, "comm_compute_overlap");
        share(w, s->comm_overlap, s->comm);
        jw_ki64(w, "collective_calls", s->n_calls);
        jw_key(w, "flops");
        flops_val(w, t, s->flops);
        jw_key(w, "backward_flops");
        flops_val(w, t, s->flops_bwd);
        jw_key(w, "achieved_flops_per_s");
        if (t->no_shapes) jw_null(w);
        else rate(w, s->flops, s->wall);
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
        jw_key(w, "flops");
        flops_val(w, t, o->flops);
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

/* The calls (comm.c) with their arrival and, in a job, their wait; times
 * from `origin` on the job's clock (`clock` added). */
static void collectives(jw *w, const mp_trace *t, int64_t origin, int64_t clock) {
    jw_key(w, "collectives");
    jw_open(w, '[');
    for (int i = 0; i < t->n_calls; i++) {
        const mp_tcall *c = &t->calls[i];
        jw_open(w, '{');
        jw_kstr(w, "name", c->coll ? c->coll : "collective");
        jw_key(w, "process_group");
        jw_opt_str(w, c->pg);
        jw_key(w, "seq");
        jw_opt_i64(w, c->seq);
        jw_key(w, "elements");
        jw_opt_i64(w, c->elems);
        jw_key(w, "bytes");
        jw_opt_i64(w, c->elems >= 0 && c->elem_bytes ? c->elems * c->elem_bytes : -1);
        jw_kbool(w, "device", c->device);
        jw_key(w, "step");
        jw_opt_str(w, c->step >= 0 ? t->steps[c->step].name : NULL);
        jw_key(w, "arrival_s");
        jw_double(w, ns_s(c->ts + clock - origin));
        jw_key(w, "end_s");
        jw_double(w, ns_s(c->end + clock - origin));
        jw_key(w, "wait_s");
        if (c->wait >= 0) jw_double(w, ns_s(c->wait));
        else jw_null(w);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

/* The device's busy intervals for a timeline, from the same origin. */
static void timeline(jw *w, const mp_trace *t, int64_t origin, int64_t clock) {
    jw_key(w, "timeline");
    jw_open(w, '[');
    for (int i = 0; i < t->n_timeline; i++) {
        jw_open(w, '[');
        jw_double(w, ns_s(t->timeline[i].a + clock - origin));
        jw_double(w, ns_s(t->timeline[i].b + clock - origin));
        jw_close(w, ']');
    }
    jw_close(w, ']');
}

/* What the trace recorded, and its distributedInfo. */
static void recorded(jw *w, const mp_trace *t) {
    jw_key(w, "recorded");
    jw_open(w, '{');
    jw_kbool(w, "device", !t->no_device);
    jw_kbool(w, "shapes", !t->no_shapes);
    jw_kbool(w, "modules", !t->no_modules);
    jw_close(w, '}');
    jw_key(w, "distributed");
    if (t->raw.rank < 0 && !t->raw.n_pgs) {
        jw_null(w);
        return;
    }
    jw_open(w, '{');
    jw_key(w, "backend");
    jw_opt_str(w, t->raw.backend[0] ? t->raw.backend : NULL);
    jw_key(w, "world_size");
    jw_opt_i64(w, t->raw.world_size);
    jw_key(w, "process_groups");
    jw_open(w, '[');
    for (int i = 0; i < t->raw.n_pgs; i++) {
        const mp_tpg *g = &t->raw.pgs[i];
        jw_open(w, '{');
        jw_kstr(w, "name", t->raw.names[g->name]);
        jw_key(w, "description");
        jw_opt_str(w, g->desc >= 0 ? t->raw.names[g->desc] : NULL);
        jw_key(w, "size");
        jw_opt_i64(w, g->size);
        jw_key(w, "ranks");
        jw_opt_str(w, g->ranks >= 0 ? t->raw.names[g->ranks] : NULL);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
}

/* Where a trace's times start: its first step (or first call). */
static int64_t first_time(const mp_trace *t) {
    if (t->n_steps) return t->steps[0].ts;
    return t->n_calls ? t->calls[0].ts : 0;
}

static void one(jw *w, const mp_trace *t, int64_t origin, int64_t clock) {
    jw_open(w, '{');
    jw_kstr(w, "modelprof_version", MP_VERSION_STRING);
    jw_key(w, "trace");
    jw_opt_str(w, t->path);
    jw_ku64(w, "json_bytes", t->raw.bytes);
    jw_ku64(w, "events", t->raw.n_events);
    jw_key(w, "rank");
    jw_opt_i64(w, t->raw.rank);
    jw_key(w, "time_origin_s");
    jw_ns_seconds(w, origin - clock);
    recorded(w, t);
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
    jw_key(w, "host_ranges");   /* the user's ranges the device idled in */
    jw_open(w, '[');
    for (int i = 0; i < t->n_hranges; i++) {
        jw_open(w, '{');
        jw_kstr(w, "name", t->hranges[i].name);
        jw_ki64(w, "count", t->hranges[i].count);
        jw_key(w, "host_s");
        jw_double(w, ns_s(t->hranges[i].host));
        jw_key(w, "device_idle_s");
        jw_double(w, ns_s(t->hranges[i].idle));
        jw_close(w, '}');
    }
    jw_close(w, ']');
    collectives(w, t, origin, clock);
    timeline(w, t, origin, clock);
    jw_close(w, '}');
}

static void opt_cause(jw *w, const char *s) {
    if (s && *s) jw_str(w, s);
    else jw_null(w);
}

/* The job (job.c): ranks, steps with their critical rank, stragglers, what-if. */
static void job_json(jw *w, const mp_trace *const *t, const mp_tjob *j) {
    int ns = j->n_steps > 0 ? j->n_steps : 1;
    jw_key(w, "job");
    jw_open(w, '{');
    jw_key(w, "match_by");
    jw_opt_str(w, j->match_by);
    jw_ki64(w, "collectives_matched", j->n_matched);
    jw_ki64(w, "calls_unmatched", j->n_unmatched);
    jw_key(w, "threshold_s");
    jw_double(w, ns_s(j->threshold));
    jw_key(w, "warning");
    jw_opt_str(w, j->warning[0] ? j->warning : NULL);
    jw_key(w, "ranks");
    jw_open(w, '[');
    for (int r = 0; r < j->n_ranks; r++) {
        const mp_tjob_rank *x = &j->ranks[r];
        jw_open(w, '{');
        jw_ki64(w, "rank", x->rank);
        jw_key(w, "trace");
        jw_opt_str(w, t[x->index]->path);
        jw_key(w, "clock_offset_s");
        jw_double(w, ns_s(x->clock));
        jw_key(w, "clock_skew_s");
        jw_double(w, ns_s(x->skew));
        jw_ki64(w, "calls", x->n_calls);
        jw_ki64(w, "matched", x->n_matched);
        jw_key(w, "wait_s");
        jw_double(w, ns_s(x->wait));
        jw_key(w, "mean_delay_s");
        jw_double(w, ns_s(x->late) / ns);
        jw_ki64(w, "late_steps", x->late_steps);
        jw_ki64(w, "critical_steps", x->critical_steps);
        jw_kbool(w, "straggler", x->straggler);
        jw_key(w, "cause");
        opt_cause(w, x->cause);
        jw_key(w, "cause_kind");
        jw_opt_str(w, x->cause_kind);
        jw_key(w, "whatif_saved_s");
        jw_double(w, ns_s(x->whatif_saved));
        jw_key(w, "share_lost");
        share(w, x->whatif_saved, j->wall);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_key(w, "steps");
    jw_open(w, '[');
    for (int s = 0; s < j->n_steps; s++) {
        const mp_tjob_step *x = &j->steps[s];
        jw_open(w, '{');
        jw_kstr(w, "name", x->name ? x->name : "");
        jw_key(w, "wall_s");
        jw_double(w, ns_s(x->wall));
        jw_key(w, "critical_rank");
        jw_opt_i64(w, x->critical >= 0 ? j->ranks[x->critical].rank : -1);
        jw_key(w, "critical_delay_s");
        jw_double(w, ns_s(x->delay));
        jw_key(w, "cause");
        opt_cause(w, x->cause);
        jw_key(w, "whatif_step_s");
        jw_double(w, ns_s(x->wall - x->saved));
        jw_key(w, "ideal_step_s");
        jw_double(w, ns_s(x->ideal));
        jw_key(w, "late_s");
        jw_open(w, '[');
        for (int r = 0; r < j->n_ranks; r++) jw_double(w, ns_s(x->late[r]));
        jw_close(w, ']');
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_key(w, "stragglers");
    jw_open(w, '[');
    for (int i = 0; i < j->n_stragglers; i++) {
        const mp_tjob_rank *x = &j->ranks[j->stragglers[i]];
        jw_open(w, '{');
        jw_ki64(w, "rank", x->rank);
        jw_key(w, "mean_delay_s");
        jw_double(w, ns_s(x->late) / ns);
        jw_key(w, "cause");
        opt_cause(w, x->cause);
        jw_key(w, "cause_kind");
        jw_opt_str(w, x->cause_kind);
        jw_ki64(w, "late_steps", x->late_steps);
        jw_ki64(w, "critical_steps", x->critical_steps);
        jw_key(w, "whatif_saved_s");
        jw_double(w, ns_s(x->whatif_saved));
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_key(w, "what_if");
    jw_open(w, '{');
    jw_key(w, "step_s");
    jw_double(w, ns_s(j->wall) / ns);
    jw_key(w, "ideal_step_s");
    jw_double(w, ns_s(j->ideal) / ns);
    jw_key(w, "share_lost");
    share(w, j->wall - j->ideal, j->wall);
    jw_key(w, "ranks");
    jw_open(w, '[');
    for (int r = 0; r < j->n_ranks; r++) {
        const mp_tjob_rank *x = &j->ranks[r];
        if (x->whatif_saved <= 0) continue;
        jw_open(w, '{');
        jw_ki64(w, "rank", x->rank);
        jw_key(w, "lost_s");
        jw_double(w, ns_s(x->whatif_saved));
        jw_key(w, "share");
        share(w, x->whatif_saved, j->wall);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_key(w, "causes");
    jw_open(w, '[');
    for (int c = 0; c < j->n_causes; c++) {
        jw_open(w, '{');
        jw_kstr(w, "cause", j->causes[c].name);
        jw_kstr(w, "kind", j->causes[c].kind ? j->causes[c].kind : "host");
        jw_key(w, "lost_s");
        jw_double(w, ns_s(j->causes[c].lost));
        jw_key(w, "share");
        share(w, j->causes[c].lost, j->wall);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
    jw_close(w, '}');
}

mp_status mp_trace_report_json(const mp_trace *const *t, int n, const mp_tjob *job,
                               const mp_trace_options *o, FILE *f) {
    (void)o; /* the JSON holds everything: depth and top shape the text only */
    jw *w = jw_begin(f);
    if (!w) return MP_ERR_NOMEM;
    if (n == 1) {
        one(w, t[0], first_time(t[0]), 0);
    } else {
        /* one trace object a member of "ranks" or "traces": its members on lines too */
        w->multiline = JW_MULTILINE_LEVELS + 2;
        char why[600];
        bool run = job ? job->one_run : mp_trace_one_run(t, n, why, sizeof why);
        const char *whys = job ? job->why : why;
        /* one origin for every rank: the job's first step on its clock */
        int64_t origin = INT64_MAX;
        for (int i = 0; i < n; i++) {
            int64_t clock = 0;
            for (int r = 0; job && run && r < job->n_ranks; r++)
                if (job->ranks[r].index == i) clock = job->ranks[r].clock;
            origin = MP_MIN(origin, first_time(t[i]) + clock);
        }
        jw_open(w, '{');
        if (!run) jw_kstr(w, "separate_jobs", whys); /* each analysed apart, no job */
        if (run) jw_key(w, "ranks");
        else jw_key(w, "traces");
        jw_open(w, '[');
        if (run && job) {   /* in rank order */
            for (int r = 0; r < job->n_ranks; r++)
                one(w, t[job->ranks[r].index], origin, job->ranks[r].clock);
        } else {
            for (int i = 0; i < n; i++) one(w, t[i], run ? origin : first_time(t[i]), 0);
        }
        jw_close(w, ']');
        if (run && job) job_json(w, t, job);
        jw_close(w, '}');
    }
    jw_end(w);
    return MP_OK;
}
