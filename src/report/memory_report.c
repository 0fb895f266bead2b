/* The memory snapshot report: text, JSON (docs/schema/memory.schema.json)
 * and CSV tables. Bytes in binary units (MiB, GiB), as memory_viz and
 * torch.cuda.memory_summary print them. Times in the JSON are seconds
 * from the first event of the device's trace. */
#include "report/memory_report.h"
#include "report/jw.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mp_mem_fmt_bytes(int64_t b, char *buf, size_t n) {
    bool neg = b < 0;
    uint64_t u = neg ? (uint64_t)0 - (uint64_t)b : (uint64_t)b;
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (u < 1024) {
        snprintf(buf, n, "%s%" PRIu64 " B", neg ? "-" : "", u);
        return buf;
    }
    double v = (double)u;
    int k = -1;
    while (v >= 1024.0 && k < 4) {
        v /= 1024.0;
        k++;
    }
    snprintf(buf, n, "%s%.2f %s", neg ? "-" : "", v, unit[k]);
    return buf;
}

/* How long a holder had been live at the peak, in seconds; -1 unknown: it
 * was allocated before the recording, an event has no time, or the clock
 * runs backwards between them (a snapshot's time_us out of order). */
static double live_age_s(const mp_mem_device *d, const mp_mem_live *L) {
    if (L->alloc_ev < 0 || d->peak_ev < 0 || d->ev[L->alloc_ev].time_us == MP_MEM_NO_TIME ||
        d->peak_time_us == MP_MEM_NO_TIME || d->peak_time_us < d->ev[L->alloc_ev].time_us)
        return -1;
    return (double)(d->peak_time_us - d->ev[L->alloc_ev].time_us) / 1e6;
}

int mp_mem_top_rows(const mp_mem_report_opts *o, mp_format fmt) {
    if (o->top != MP_MEMORY_TOP_DEFAULT) return o->top < 0 ? -1 : o->top;
    switch (fmt) {
    case MP_FORMAT_CSV: return -1;
    case MP_FORMAT_HTML: return 50;
    default: return 20;
    }
}

/* The rows of a table of n shown in fmt. */
static uint32_t rows_of(const mp_mem_report_opts *o, mp_format fmt, uint32_t n) {
    int top = mp_mem_top_rows(o, fmt);
    return top < 0 || (uint32_t)top > n ? n : (uint32_t)top;
}

static bool show(const mp_mem_report_opts *o, const mp_mem_device *d) { return o->device < 0 || d->device == o->device; }

static double rel_s(const mp_mem_device *d, int64_t t) {
    if (t == MP_MEM_NO_TIME || d->first_time_us == MP_MEM_NO_TIME) return -1;
    return (double)(t - d->first_time_us) / 1e6;
}

static const char *origin_name(int o) {
    return o == MP_LO_TRACE ? "trace" : o == MP_LO_FINAL_BLOCK ? "before_recording_block" : "before_recording_freed";
}

/* ---- text ---- */
static void text_frame(const mp_snapshot *s, mp_out *o, uint32_t fr) {
    char b[512];
    if (fr == UINT32_MAX) {
        mp_out_puts(o, "(no user frame)");
        return;
    }
    mp_mem_frame_text(s, fr, b, sizeof b);
    mp_out_cell(o, b, (int)strlen(b), false);
}

mp_status mp_memory_write_text(const mp_snapshot *s, const mp_mem_report_opts *ro, FILE *f) {
    char *buf = malloc(JW_BUF);
    if (!buf) return mp_error(MP_ERR_NOMEM, "out of memory");
    mp_out o = {f, 0, JW_BUF, buf};
    char b1[32], b2[32], b3[32], b4[32];
    mp_out_printf(&o, "modelprof memory: %s\n", s->path);
    mp_out_printf(&o, "  %s pickle, %s uncompressed; %s; %s\n", s->gz ? "gzip" : "plain", mp_mem_fmt_bytes((int64_t)s->bytes, b1, sizeof b1),
                  strcmp(s->layout, "dict") == 0
                      ? (s->has_device_traces ? "segments and device_traces" : "segments, no event trace")
                      : "a bare segment list (torch.cuda.memory_snapshot()): end state only",
                  s->block_history ? "blocks carry a per-block history (PyTorch 2.0)"
                                   : s->has_frames ? "with stack frames" : "no stack frames");
    for (int i = 0; i < s->ndev; i++) {
        const mp_mem_device *d = &s->dev[i];
        if (!show(ro, d)) continue;
        char title[32];
        snprintf(title, sizeof title, "Device %d", d->device);
        mp_out_rule(&o, title, 100);
        mp_out_printf(&o, "events        %u", d->nev);
        bool first = true;
        for (int a = 0; a < s->nactions; a++)
            if (d->action_count[a]) {
                mp_out_printf(&o, "%s%s %lld", first ? ": " : ", ", mp_mem_action_name(s, a), (long long)d->action_count[a]);
                first = false;
            }
        mp_out_puts(&o, "\n");
        if (mp_mem_span_us(d) != MP_MEM_NO_TIME)
            mp_out_printf(&o, "span          %.3f s recorded\n", (double)mp_mem_span_us(d) / 1e6);
        else if (d->clock_back_ev >= 0)
            mp_out_printf(&o, "span          unknown: time_us runs backwards at event %lld (replay warnings)\n",
                          (long long)d->clock_back_ev);
        mp_out_printf(&o, "allocated     start %s, peak %s", mp_mem_fmt_bytes(d->start_requested, b1, sizeof b1),
                      mp_mem_fmt_bytes(d->peak_requested, b2, sizeof b2));
        if (d->peak_ev >= 0) {
            mp_out_printf(&o, " after event %lld", (long long)d->peak_ev);
            double t = rel_s(d, d->peak_time_us);
            if (t >= 0) mp_out_printf(&o, " (+%.3f s)", t);
        } else {
            mp_out_puts(&o, " (the start)");
        }
        mp_out_printf(&o, ", end %s (requested bytes; rounded blocks at the end: %s)\n",
                      mp_mem_fmt_bytes(d->end_requested, b3, sizeof b3), mp_mem_fmt_bytes(d->end_allocated, b4, sizeof b4));
        mp_out_printf(&o, "reserved      start %s, peak %s, at the allocated peak %s, end %s\n",
                      mp_mem_fmt_bytes(d->start_reserved, b1, sizeof b1), mp_mem_fmt_bytes(d->peak_reserved, b2, sizeof b2),
                      mp_mem_fmt_bytes(d->reserved_at_peak, b3, sizeof b3), mp_mem_fmt_bytes(d->end_reserved, b4, sizeof b4));
        if (d->start_requested)
            mp_out_printf(&o, "before recording: %s live when the trace begins (%s in final blocks the trace never "
                              "allocates, %s freed by the trace without an alloc)\n",
                          mp_mem_fmt_bytes(d->start_requested, b1, sizeof b1), mp_mem_fmt_bytes(d->start_from_blocks, b2, sizeof b2),
                          mp_mem_fmt_bytes(d->start_from_frees, b3, sizeof b3));
        mp_out_printf(&o, "replay check  the replay ends at %s; the final active blocks hold %s%s\n",
                      mp_mem_fmt_bytes(d->replay_end_requested, b1, sizeof b1), mp_mem_fmt_bytes(d->end_requested, b2, sizeof b2),
                      d->replay_end_requested == d->end_requested ? " (equal)" : " (they differ: see findings)");
        mp_out_printf(&o, "OOM events    %lld\n", (long long)d->action_count[MP_MA_OOM]);

        mp_out_rule(&o, "Largest allocations live at the peak", 100);
        uint32_t top = rows_of(ro, MP_FORMAT_TEXT, d->nlive);
        mp_out_printf(&o, "%12s %10s  %-15s  %s\n", "size", "age (s)", "category", ro->full_stack ? "stack" : "first user frame");
        for (uint32_t j = 0; j < top; j++) {
            const mp_mem_live *L = &d->live[j];
            mp_out_printf(&o, "%12s ", mp_mem_fmt_bytes(L->size, b1, sizeof b1));
            double ta = live_age_s(d, L);
            if (ta >= 0) mp_out_printf(&o, "%10.3f  ", ta);
            else mp_out_printf(&o, "%10s  ", L->alloc_ev < 0 ? "before" : "?");
            mp_out_printf(&o, "%-15s  ", mp_mem_category_names[L->category]);
            if (ro->full_stack && L->stack) {
                uint32_t n;
                const uint32_t *fr = mp_mem_stack(s, L->stack, &n);
                for (uint32_t k = 0; k < n; k++) {
                    if (k) mp_out_printf(&o, "%43s", "");
                    text_frame(s, &o, fr[k]);
                    mp_out_puts(&o, "\n");
                }
                if (!n) mp_out_puts(&o, "\n");
            } else {
                text_frame(s, &o, mp_mem_user_frame(s, L->stack));
                const char *mod = mp_mem_meta(s, L->meta);
                if (mod) {
                    mp_out_puts(&o, "  [");
                    mp_out_cell(&o, mod, (int)strlen(mod), false);
                    mp_out_puts(&o, "]");
                }
                if (L->origin != MP_LO_TRACE) mp_out_puts(&o, "  [live before recording]");
                mp_out_puts(&o, "\n");
            }
        }
        mp_out_rule(&o, "Bytes by category at the peak", 100);
        for (int c = 0; c < MP_MC_COUNT; c++)
            if (d->categories[c])
                mp_out_printf(&o, "%-16s %12s  %5.1f%%\n", mp_mem_category_names[c], mp_mem_fmt_bytes(d->categories[c], b1, sizeof b1),
                              d->peak_requested ? 100.0 * (double)d->categories[c] / (double)d->peak_requested : 0.0);
        mp_out_rule(&o, "Bytes by source line at the peak", 100);
        for (uint32_t j = 0, nj = rows_of(ro, MP_FORMAT_TEXT, d->nsites); j < nj; j++) {
            mp_out_printf(&o, "%12s %6lld  ", mp_mem_fmt_bytes(d->sites[j].bytes, b1, sizeof b1), (long long)d->sites[j].count);
            text_frame(s, &o, d->sites[j].frame);
            mp_out_puts(&o, "\n");
        }
        if (d->nsteps) {
            char st_title[64];
            snprintf(st_title, sizeof st_title, "Steps (from %s)", d->steps_from ? d->steps_from : "none");
            mp_out_rule(&o, st_title, 100);
            mp_out_printf(&o, "%5s %10s %12s %12s %12s\n", "step", "events", "start", "peak", "end");
            for (int j = 0; j < d->nsteps; j++) {
                const mp_mem_step *S = &d->steps[j];
                mp_out_printf(&o, "%5d %10lld %12s %12s %12s\n", j + 1, (long long)(S->last_ev - S->first_ev + 1),
                              mp_mem_fmt_bytes(S->start_bytes, b1, sizeof b1), mp_mem_fmt_bytes(S->peak_bytes, b2, sizeof b2),
                              mp_mem_fmt_bytes(S->end_bytes, b3, sizeof b3));
            }
        }
        if (ro->pred) {
            mp_out_rule(&o, "Predicted (modelprof plan) against measured at the peak", 100);
            mp_out_printf(&o, "%s\n", ro->pred->source);
            mp_out_printf(&o, "%-16s %12s %12s %12s  %s\n", "category", "predicted", "measured", "difference", "planner rows");
            for (int c = 0; c < MP_MC_COUNT; c++) {
                if (ro->pred->bytes[c] < 0) continue;
                char b4b[32];
                mp_out_printf(&o, "%-16s %12s %12s %12s  %s\n", mp_mem_category_names[c],
                              mp_mem_fmt_bytes(ro->pred->bytes[c], b1, sizeof b1), mp_mem_fmt_bytes(d->categories[c], b2, sizeof b2),
                              mp_mem_fmt_bytes(d->categories[c] - ro->pred->bytes[c], b4b, sizeof b4b), ro->pred->rows[c]);
            }
        }
        if (d->nfindings) {
            mp_out_rule(&o, "Findings", 100);
            for (int j = 0; j < d->nfindings; j++) mp_out_printf(&o, "- %s\n", d->findings[j].text);
        }
        if (d->warn_count) {
            mp_out_rule(&o, "Replay warnings", 100);
            for (int j = 0; j < d->nwarn; j++) mp_out_printf(&o, "- %s\n", d->warnings[j]);
            if (d->warn_count > d->nwarn) mp_out_printf(&o, "- ... %lld more\n", (long long)(d->warn_count - d->nwarn));
        }
    }
    mp_out_flush(&o);
    free(buf);
    return ferror(f) ? mp_error(MP_ERR_IO, "cannot write the report") : MP_OK;
}

/* ---- JSON ---- */
static void json_frame(jw *w, const mp_snapshot *s, uint32_t fr) {
    if (fr == UINT32_MAX || fr >= s->nframes) {
        jw_null(w);
        return;
    }
    const mp_mem_frame *F = &s->frames[fr];
    jw_open(w, '{');
    jw_kstr(w, "file", mp_mem_str(s, F->file));
    jw_ki64(w, "line", F->line);
    jw_kstr(w, "function", mp_mem_str(s, F->name));
    jw_close(w, '}');
}

static void json_time(jw *w, const mp_mem_device *d, int64_t t) {
    double r = rel_s(d, t);
    if (r < 0) jw_null(w);
    else jw_double(w, r);
}

static void json_device(jw *w, const mp_snapshot *s, const mp_mem_device *d, const mp_mem_report_opts *ro) {
    jw_open(w, '{');
    jw_ki64(w, "device", d->device);
    jw_key(w, "events");
    jw_open(w, '{');
    for (int a = 0; a < s->nactions; a++)
        if (d->action_count[a]) {
            jw_key_str(w, mp_mem_action_name(s, a));
            jw_i64(w, d->action_count[a]);
        }
    jw_close(w, '}');
    jw_ku64(w, "event_count", d->nev);
    jw_kbool(w, "has_trace", d->has_trace);
    jw_key(w, "span_s");
    if (mp_mem_span_us(d) == MP_MEM_NO_TIME) jw_null(w);
    else jw_double(w, (double)mp_mem_span_us(d) / 1e6);
    jw_key(w, "start_unix_s");
    if (d->first_time_us == MP_MEM_NO_TIME) {
        jw_null(w);
    } else { /* to the microsecond: %.9g would drop the seconds' digits of an epoch time */
        jw_sep(w);
        int64_t t = d->first_time_us;
        mp_out_printf(&w->o, "%s%lld.%06lld", t < 0 ? "-" : "", (long long)(t < 0 ? -(t / 1000000) : t / 1000000),
                      (long long)(t < 0 ? -(t % 1000000) : t % 1000000));
    }
    jw_ki64(w, "start_requested_bytes", d->start_requested);
    jw_ki64(w, "start_from_blocks_bytes", d->start_from_blocks);
    jw_ki64(w, "start_from_frees_bytes", d->start_from_frees);
    jw_ki64(w, "peak_requested_bytes", d->peak_requested);
    jw_ki64(w, "peak_event", d->peak_ev);
    jw_key(w, "peak_time_s");
    json_time(w, d, d->peak_time_us);
    jw_ki64(w, "peak_reserved_bytes", d->peak_reserved);
    jw_ki64(w, "peak_reserved_event", d->peak_reserved_ev);
    jw_ki64(w, "reserved_at_peak_bytes", d->reserved_at_peak);
    jw_ki64(w, "start_reserved_bytes", d->start_reserved);
    jw_ki64(w, "end_requested_bytes", d->end_requested);
    jw_ki64(w, "end_allocated_bytes", d->end_allocated);
    jw_ki64(w, "end_reserved_bytes", d->end_reserved);
    jw_ki64(w, "replay_end_requested_bytes", d->replay_end_requested);
    jw_kbool(w, "replay_end_matches", d->replay_end_requested == d->end_requested);
    jw_ki64(w, "end_inactive_split_bytes", d->end_inactive_split_bytes);
    jw_ki64(w, "end_largest_inactive_block_bytes", d->largest_free_block);
    jw_ki64(w, "oom_events", d->action_count[MP_MA_OOM]);
    jw_ki64(w, "live_at_peak", d->nlive);
    jw_key(w, "top_at_peak");
    jw_open(w, '[');
    uint32_t top = rows_of(ro, MP_FORMAT_JSON, d->nlive);
    for (uint32_t j = 0; j < top; j++) {
        const mp_mem_live *L = &d->live[j];
        jw_open(w, '{');
        jw_ki64(w, "size_bytes", L->size);
        jw_key(w, "block_bytes");
        jw_opt_i64(w, L->block_size);
        jw_ki64(w, "alloc_event", L->alloc_ev);
        jw_ki64(w, "free_event", L->free_ev);
        jw_key(w, "age_s");
        if (live_age_s(d, L) >= 0) jw_double(w, live_age_s(d, L));
        else jw_null(w);
        jw_kstr(w, "origin", origin_name(L->origin));
        jw_kstr(w, "category", mp_mem_category_names[L->category]);
        jw_key(w, "module");
        jw_opt_str(w, mp_mem_meta(s, L->meta));
        jw_key(w, "site");
        json_frame(w, s, mp_mem_user_frame(s, L->stack));
        if (ro->full_stack) {
            jw_key(w, "stack");
            jw_open(w, '[');
            uint32_t n;
            const uint32_t *fr = mp_mem_stack(s, L->stack, &n);
            for (uint32_t k = 0; k < n; k++) json_frame(w, s, fr[k]);
            jw_close(w, ']');
        }
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_key(w, "categories_at_peak");
    jw_open(w, '{');
    for (int c = 0; c < MP_MC_COUNT; c++) {
        jw_key_str(w, mp_mem_category_names[c]);
        jw_i64(w, d->categories[c]);
    }
    jw_close(w, '}');
    jw_key(w, "sites_at_peak");
    jw_open(w, '[');
    for (uint32_t j = 0, nj = rows_of(ro, MP_FORMAT_JSON, d->nsites); j < nj; j++) {
        jw_open(w, '{');
        jw_key(w, "site");
        json_frame(w, s, d->sites[j].frame);
        jw_ki64(w, "bytes", d->sites[j].bytes);
        jw_ki64(w, "allocations", d->sites[j].count);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_kstr(w, "steps_from", d->steps_from ? d->steps_from : "none");
    jw_key(w, "steps");
    jw_open(w, '[');
    for (int j = 0; j < d->nsteps; j++) {
        const mp_mem_step *S = &d->steps[j];
        jw_open(w, '{');
        jw_ki64(w, "first_event", S->first_ev);
        jw_ki64(w, "last_event", S->last_ev);
        jw_ki64(w, "start_bytes", S->start_bytes);
        jw_ki64(w, "peak_bytes", S->peak_bytes);
        jw_ki64(w, "peak_event", S->peak_ev);
        jw_ki64(w, "end_bytes", S->end_bytes);
        jw_key(w, "start_s");
        json_time(w, d, S->t0_us);
        jw_key(w, "end_s");
        json_time(w, d, S->t1_us);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_key(w, "findings");
    jw_open(w, '[');
    for (int j = 0; j < d->nfindings; j++) {
        const mp_mem_finding *F = &d->findings[j];
        jw_open(w, '{');
        jw_kstr(w, "kind", mp_mem_finding_kinds[F->kind]);
        jw_ki64(w, "bytes", F->bytes);
        jw_key(w, "time_s");
        json_time(w, d, F->time_us);
        jw_ki64(w, "event", F->event);
        jw_kstr(w, "text", F->text);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    if (ro->pred) {
        jw_key(w, "predicted");
        jw_open(w, '{');
        jw_kstr(w, "source", ro->pred->source);
        jw_key(w, "rows");
        jw_open(w, '[');
        for (int c = 0; c < MP_MC_COUNT; c++) {
            if (ro->pred->bytes[c] < 0) continue;
            jw_open(w, '{');
            jw_kstr(w, "category", mp_mem_category_names[c]);
            jw_ki64(w, "predicted_bytes", ro->pred->bytes[c]);
            jw_ki64(w, "measured_bytes", d->categories[c]);
            jw_ki64(w, "delta_bytes", d->categories[c] - ro->pred->bytes[c]);
            jw_kstr(w, "planner_rows", ro->pred->rows[c]);
            jw_close(w, '}');
        }
        jw_close(w, ']');
        jw_close(w, '}');
    }
    jw_ki64(w, "warning_count", d->warn_count);
    jw_key(w, "warnings");
    jw_open(w, '[');
    for (int j = 0; j < d->nwarn; j++) jw_str(w, d->warnings[j]);
    jw_close(w, ']');
    jw_close(w, '}');
}

mp_status mp_memory_write_json(const mp_snapshot *s, const mp_mem_report_opts *ro, FILE *f) {
    jw *w = jw_begin(f);
    if (!w) return MP_ERR_NOMEM;
    jw_open(w, '{');
    jw_kstr(w, "modelprof_version", MP_VERSION_STRING);
    jw_key(w, "memory");
    jw_open(w, '{');
    jw_ki64(w, "schema_version", 1);
    jw_kstr(w, "file", s->path);
    jw_kbool(w, "gzip", s->gz);
    jw_ku64(w, "pickle_bytes", s->bytes);
    jw_kstr(w, "layout", s->layout);
    jw_kbool(w, "has_device_traces", s->has_device_traces);
    jw_kbool(w, "block_history", s->block_history);
    jw_kbool(w, "frames", s->has_frames);
    jw_key(w, "devices");
    jw_open(w, '[');
    for (int i = 0; i < s->ndev; i++)
        if (show(ro, &s->dev[i])) json_device(w, s, &s->dev[i], ro);
    jw_close(w, ']');
    jw_close(w, '}');
    jw_close(w, '}');
    jw_end(w);
    return ferror(f) ? mp_error(MP_ERR_IO, "cannot write the report") : MP_OK;
}

/* ---- CSV: one table a file, unformatted numbers ---- */
static void csv_str(mp_out *o, const char *s) { mp_csv_field(o, s, true); }

static void csv_frame(mp_out *o, const mp_snapshot *s, uint32_t fr) {
    if (fr == UINT32_MAX || fr >= s->nframes) {
        mp_out_puts(o, ",,");
        return;
    }
    const mp_mem_frame *F = &s->frames[fr];
    csv_str(o, mp_mem_str(s, F->file));
    mp_out_printf(o, ",%lld,", (long long)F->line);
    csv_str(o, mp_mem_str(s, F->name));
}

mp_status mp_memory_write_csv(const mp_snapshot *s, const mp_mem_report_opts *ro, FILE *f) {
    char *buf = malloc(JW_BUF);
    if (!buf) return mp_error(MP_ERR_NOMEM, "out of memory");
    mp_out o = {f, 0, JW_BUF, buf};
    if (ro->csv_table == MP_MEM_CSV_HOLDERS) {
        mp_out_puts(&o, "device,rank,size_bytes,block_bytes,alloc_event,free_event,age_s,origin,category,module,file,line,function\r\n");
        for (int i = 0; i < s->ndev; i++) {
            const mp_mem_device *d = &s->dev[i];
            if (!show(ro, d)) continue;
            for (uint32_t j = 0, nj = rows_of(ro, MP_FORMAT_CSV, d->nlive); j < nj; j++) {
                const mp_mem_live *L = &d->live[j];
                /* an unknown block size is empty, as the JSON's null */
                mp_out_printf(&o, "%d,%u,%lld,", d->device, j + 1, (long long)L->size);
                if (L->block_size >= 0) mp_out_printf(&o, "%lld", (long long)L->block_size);
                mp_out_printf(&o, ",%lld,%lld,", (long long)L->alloc_ev, (long long)L->free_ev);
                if (live_age_s(d, L) >= 0) mp_out_printf(&o, "%.6f", live_age_s(d, L));
                mp_out_printf(&o, ",%s,%s,", origin_name(L->origin), mp_mem_category_names[L->category]);
                const char *mod = mp_mem_meta(s, L->meta);
                if (mod) csv_str(&o, mod);
                mp_out_putc(&o, ',');
                csv_frame(&o, s, mp_mem_user_frame(s, L->stack));
                mp_out_puts(&o, "\r\n");
            }
        }
    } else if (ro->csv_table == MP_MEM_CSV_SITES) {
        mp_out_puts(&o, "device,bytes,allocations,file,line,function\r\n");
        for (int i = 0; i < s->ndev; i++) {
            const mp_mem_device *d = &s->dev[i];
            if (!show(ro, d)) continue;
            for (uint32_t j = 0, nj = rows_of(ro, MP_FORMAT_CSV, d->nsites); j < nj; j++) {
                mp_out_printf(&o, "%d,%lld,%lld,", d->device, (long long)d->sites[j].bytes, (long long)d->sites[j].count);
                csv_frame(&o, s, d->sites[j].frame);
                mp_out_puts(&o, "\r\n");
            }
        }
    } else {
        mp_out_puts(&o, "device,event,action,addr,size_bytes,time_s,stream,file,line,function\r\n");
        for (int i = 0; i < s->ndev; i++) {
            const mp_mem_device *d = &s->dev[i];
            if (!show(ro, d)) continue;
            for (uint32_t j = 0, nj = rows_of(ro, MP_FORMAT_CSV, d->nev); j < nj; j++) {
                const mp_mem_event *e = &d->ev[j];
                mp_out_printf(&o, "%d,%u,%s,", d->device, j, mp_mem_action_name(s, e->action));
                if (e->flags & MP_ME_ADDR) mp_out_printf(&o, "%llu", (unsigned long long)e->addr);
                mp_out_printf(&o, ",%lld,", (long long)e->size);
                if (e->time_us != MP_MEM_NO_TIME && d->first_time_us != MP_MEM_NO_TIME)
                    mp_out_printf(&o, "%.6f", (double)(e->time_us - d->first_time_us) / 1e6);
                mp_out_printf(&o, ",%llu,", (unsigned long long)(e->stream < s->nstreams ? s->streams[e->stream] : 0));
                csv_frame(&o, s, mp_mem_user_frame(s, e->stack));
                mp_out_puts(&o, "\r\n");
            }
        }
    }
    mp_out_flush(&o);
    free(buf);
    return ferror(f) ? mp_error(MP_ERR_IO, "cannot write the report") : MP_OK;
}
