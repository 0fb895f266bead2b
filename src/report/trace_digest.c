/* A trace's digest: the analysis of one rank (the summary the report
 * writers and the job analysis read), as a small JSON file that
 * `modelprof trace` reads back wherever it reads traces
 * (docs/schema/digest.schema.json, docs/JSON.md "Digests"). Times are
 * integer nanoseconds and doubles are written exactly, so a trace rebuilt
 * from its digest (src/trace/digest.c) gives byte for byte the same report
 * and the same job. Tables are arrays of arrays, in the order the schema
 * names their columns. */
#include "report/jw.h"
#include "trace/trace.h"

/* A double that reads back to the same bits. */
static void el_exact(jw *w, double v) {
    jw_sep(w);
    char d[40];
    if (isfinite(v)) snprintf(d, sizeof d, "%.17g", v);
    else snprintf(d, sizeof d, "null");
    mp_out_puts(&w->o, d);
}

#define ROW_OPEN(w) jw_open(w, '[')
#define ROW_CLOSE(w) jw_close(w, ']')

mp_status mp_trace_digest_write(const mp_trace *t, FILE *f) {
    jw *w = jw_begin(f);
    if (!w) return MP_ERR_NOMEM;
    const mp_trace_raw *r = &t->raw;
    jw_open(w, '{');
    jw_ki64(w, "modelprof_digest", MP_TRACE_DIGEST_VERSION);
    jw_kstr(w, "modelprof_version", MP_VERSION_STRING);
    jw_key(w, "trace");
    jw_opt_str(w, t->path);
    jw_ku64(w, "json_bytes", r->bytes);
    jw_ku64(w, "events", r->n_events);
    jw_kbool(w, "gzipped", r->gzipped);
    jw_ki64(w, "rank", r->rank);
    jw_ki64(w, "world_size", r->world_size);
    jw_ki64(w, "base_ns", r->base_ns);
    jw_kstr(w, "backend", r->backend);
    jw_kstr(w, "device_name", r->device_name);
    jw_ki64(w, "device_memory_bytes", r->device_mem);
    jw_ki64(w, "device_sms", r->device_sms);
    jw_key(w, "process_groups");   /* [name, description, size, ranks] */
    jw_open(w, '[');
    for (int i = 0; i < r->n_pgs; i++) {
        const mp_tpg *g = &r->pgs[i];
        ROW_OPEN(w);
        jw_str(w, r->names[g->name]);
        jw_opt_str(w, g->desc >= 0 ? r->names[g->desc] : NULL);
        jw_i64(w, g->size);
        jw_opt_str(w, g->ranks >= 0 ? r->names[g->ranks] : NULL);
        ROW_CLOSE(w);
    }
    jw_close(w, ']');
    jw_key(w, "recorded");   /* [device, shapes, modules, flops_null] */
    jw_open(w, '[');
    jw_bool(w, !t->no_device);
    jw_bool(w, !t->no_shapes);
    jw_bool(w, !t->no_modules);
    jw_u64(w, t->flops_null);
    jw_close(w, ']');
    jw_key(w, "summary");
    jw_open(w, '{');
    jw_ki64(w, "wall_ns", t->wall_total);
    jw_ki64(w, "busy_ns", t->busy_total);
    jw_ku64(w, "flops", t->flops_total);
    jw_ku64(w, "backward_flops", t->flops_bwd);
    jw_kstr(w, "dtype", mp_tdtype_names[t->dominant_dtype < MP_TDT_COUNT ? t->dominant_dtype : 0]);
    jw_key(w, "peak_tflops");
    el_exact(w, t->peak_tflops);
    jw_key(w, "peak_source");
    jw_opt_str(w, t->peak_source);
    jw_ki64(w, "kernel_ns", t->kernel_total);
    jw_ki64(w, "peak_allocated_bytes", t->mem_peak_alloc);
    jw_ki64(w, "peak_reserved_bytes", t->mem_peak_reserved);
    jw_ki64(w, "backward_operators", t->bwd_ops);
    jw_ki64(w, "backward_linked", t->linked_bwd);
    jw_ki64(w, "flows_followed", t->linked_flow);
    jw_kbool(w, "cpu_modules", t->cpu_modules);
    jw_ki64(w, "communication_ns", t->comm_total);
    jw_ki64(w, "comm_overlap_ns", t->comm_overlap_total);
    jw_key(w, "allocator_churn");   /* [steps, mallocs, frees, ns, changes, lo, hi] */
    jw_open(w, '[');
    jw_i64(w, t->churn.steps);
    jw_i64(w, t->churn.mallocs);
    jw_i64(w, t->churn.frees);
    jw_i64(w, t->churn.ns);
    jw_i64(w, t->churn.changes);
    jw_i64(w, t->churn.lo);
    jw_i64(w, t->churn.hi);
    jw_close(w, ']');
    jw_close(w, '}');
    /* [name, ts, wall, busy, idle[MP_TI_COUNT], cat[MP_TC_COUNT], loader, optimizer,
     *  optimizer_device, flops, backward_flops, mem_start, mem_peak, mem_end, comm,
     *  comm_overlap, calls] */
    jw_key(w, "steps");
    jw_open(w, '[');
    for (int k = 0; k < t->n_steps; k++) {
        const mp_tstep *s = &t->steps[k];
        ROW_OPEN(w);
        jw_str(w, s->name ? s->name : "");
        jw_i64(w, s->ts);
        jw_i64(w, s->wall);
        jw_i64(w, s->busy);
        jw_open(w, '[');
        for (int c = 0; c < MP_TI_COUNT; c++) jw_i64(w, s->idle[c]);
        jw_close(w, ']');
        jw_open(w, '[');
        for (int c = 0; c < MP_TC_COUNT; c++) jw_i64(w, s->cat[c]);
        jw_close(w, ']');
        jw_i64(w, s->loader_wall);
        jw_i64(w, s->optimizer);
        jw_i64(w, s->optimizer_dev);
        jw_u64(w, s->flops);
        jw_u64(w, s->flops_bwd);
        jw_i64(w, s->mem_start);
        jw_i64(w, s->mem_peak);
        jw_i64(w, s->mem_end);
        jw_i64(w, s->comm);
        jw_i64(w, s->comm_overlap);
        jw_i64(w, s->n_calls);
        ROW_CLOSE(w);
    }
    jw_close(w, ']');
    /* [name, device_side, count, cpu_total, self_cpu, dev_total, self_dev, flops, alloc] */
    jw_key(w, "operators");
    jw_open(w, '[');
    for (int i = 0; i < t->n_ops; i++) {
        const mp_top *o = &t->ops[i];
        ROW_OPEN(w);
        jw_str(w, o->name ? o->name : "");
        jw_bool(w, o->device);
        jw_i64(w, o->count);
        jw_i64(w, o->cpu_total);
        jw_i64(w, o->self_cpu);
        jw_i64(w, o->dev_total);
        jw_i64(w, o->self_dev);
        jw_u64(w, o->flops);
        jw_i64(w, o->alloc_bytes);
        ROW_CLOSE(w);
    }
    jw_close(w, ']');
    /* [name, short_name, operator, kind, category, count, total] */
    jw_key(w, "kernels");
    jw_open(w, '[');
    for (int i = 0; i < t->n_kernels; i++) {
        const mp_tkernel *k = &t->kernels[i];
        ROW_OPEN(w);
        jw_str(w, k->name ? k->name : "");
        jw_opt_str(w, k->short_name);
        jw_opt_str(w, k->op);
        jw_i64(w, k->kind);
        jw_i64(w, k->cat);
        jw_i64(w, k->count);
        jw_i64(w, k->total);
        ROW_CLOSE(w);
    }
    jw_close(w, ']');
    /* [name, class, path, parent, calls, fwd, bwd, flops, bwd_flops] */
    jw_key(w, "modules");
    jw_open(w, '[');
    for (int m = 0; m < t->n_mods; m++) {
        const mp_module *md = &t->mods[m];
        const mp_tmod *fg = &t->mfig[m];
        ROW_OPEN(w);
        jw_str(w, md->name ? md->name : "");
        jw_opt_str(w, md->cls);
        jw_opt_str(w, md->path);
        jw_i64(w, md->parent);
        jw_i64(w, fg->calls);
        jw_i64(w, fg->fwd);
        jw_i64(w, fg->bwd);
        jw_u64(w, fg->flops);
        jw_u64(w, fg->bwd_flops);
        ROW_CLOSE(w);
    }
    jw_close(w, ']');
    jw_key(w, "uncounted");   /* [name, count, self device ns] */
    jw_open(w, '[');
    for (int i = 0; i < t->n_uncounted; i++) {
        ROW_OPEN(w);
        jw_str(w, t->uncounted[i].name ? t->uncounted[i].name : "");
        jw_i64(w, t->uncounted[i].count);
        jw_i64(w, t->uncounted[i].device);
        ROW_CLOSE(w);
    }
    jw_close(w, ']');
    jw_key(w, "host_ranges");   /* [name, count, host ns, device idle ns] */
    jw_open(w, '[');
    for (int i = 0; i < t->n_hranges; i++) {
        ROW_OPEN(w);
        jw_str(w, t->hranges[i].name);
        jw_i64(w, t->hranges[i].count);
        jw_i64(w, t->hranges[i].host);
        jw_i64(w, t->hranges[i].idle);
        ROW_CLOSE(w);
    }
    jw_close(w, ']');
    jw_key(w, "memory_curve");   /* [ts, allocated] */
    jw_open(w, '[');
    for (int i = 0; i < t->n_mem_curve; i++) {
        ROW_OPEN(w);
        jw_i64(w, t->mem_curve[i].ts);
        jw_i64(w, t->mem_curve[i].allocated);
        ROW_CLOSE(w);
    }
    jw_close(w, ']');
    /* [collective, process_group, ts, end, elements, element_bytes, seq, step, device,
     *  solo, seg_start, seg_busy, seg_loader, [[range, ns], ...]] */
    jw_key(w, "calls");
    jw_open(w, '[');
    for (int i = 0; i < t->n_calls; i++) {
        const mp_tcall *c = &t->calls[i];
        ROW_OPEN(w);
        jw_str(w, c->coll ? c->coll : "collective");
        jw_opt_str(w, c->pg);
        jw_i64(w, c->ts);
        jw_i64(w, c->end);
        jw_i64(w, c->elems);
        jw_i64(w, c->elem_bytes);
        jw_i64(w, c->seq);
        jw_i64(w, c->step);
        jw_bool(w, c->device);
        jw_i64(w, c->solo);
        jw_i64(w, c->seg_start);
        jw_i64(w, c->seg_busy);
        jw_i64(w, c->seg_loader);
        jw_open(w, '[');
        for (int q = 0; q < MP_TCALL_RANGES; q++) {
            if (!c->range[q].name) continue;
            jw_open(w, '[');
            jw_str(w, c->range[q].name);
            jw_i64(w, c->range[q].ns);
            jw_close(w, ']');
        }
        jw_close(w, ']');
        ROW_CLOSE(w);
    }
    jw_close(w, ']');
    jw_key(w, "timeline");   /* [start, end] of the device's busy intervals */
    jw_open(w, '[');
    for (int i = 0; i < t->n_timeline; i++) {
        ROW_OPEN(w);
        jw_i64(w, t->timeline[i].a);
        jw_i64(w, t->timeline[i].b);
        ROW_CLOSE(w);
    }
    jw_close(w, ']');
    jw_close(w, '}');
    jw_end(w);
    return MP_OK;
}
