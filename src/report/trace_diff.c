/* The trace diff (src/trace/diff.h) as text and as JSON (docs/JSON.md
 * "Trace diff"; docs/schema/trace_diff.schema.json). It reads only the
 * diff, which reads only the two trace summaries. Deltas are B - A, in
 * seconds per step on average. */
#include "report/jw.h"
#include "report/report.h"
#include "trace/diff.h"

#include <math.h>
#include <stdlib.h>

/* ---- text ---- */

#define TD_BUF (64 * 1024)

typedef struct td {
    mp_out out;
    char buf[TD_BUF];
} td;

#define pf(w, ...) mp_out_printf(&(w)->out, __VA_ARGS__)

/* Seconds, and a signed delta ("+1.2 ms", "-830 us", "0 s"). */
static const char *secs(double s, char *b) {
    /* negative as key_averages() prints a self time under its children's */
    return mp_fmt_signed(b, s < 0 ? '-' : 0, mp_fmt_seconds(fabs(s)).s);
}

static const char *delta(double d, char *b) {
    return mp_fmt_signed(b, d > 0 ? '+' : d < 0 ? '-' : ' ', mp_fmt_seconds(fabs(d)).s);
}

static const char *change(double a, double b, char *buf) {
    if (a > 0) snprintf(buf, 32, "%+.1f%%", 100 * (b - a) / a);
    else snprintf(buf, 32, "%s", b > 0 ? "new" : "");
    return buf;
}

static void line(td *w, const char *what, double a, double b) {
    char x[MP_FMT_MAX], y[MP_FMT_MAX], z[MP_FMT_MAX], c[32];
    pf(w, "%-28s %12s %12s %12s %8s\n", what, secs(a, x), secs(b, y), delta(b - a, z),
       change(a, b, c));
}

/* use_label: print the row's label (a kernel's short name) instead of its
 * name. Rows the same in A and B are counted, not listed. */
static void table(td *w, const char *title, const char *what, const mp_tdiff_row *r, int n,
                  int top, bool use_label) {
    char x[MP_FMT_MAX], y[MP_FMT_MAX], z[MP_FMT_MAX], c[32];
    mp_out_rule(&w->out, title, 100);
    if (!n) {
        pf(w, "(none in either trace)\n");
        return;
    }
    int same = 0;
    for (int i = 0; i < n; i++) same += mp_tdiff_row_same(&r[i]);
    if (same == n) {
        pf(w, "no difference (%d the same in A and B)\n", n);
        return;
    }
    pf(w, "%12s %12s %12s %8s %15s  %s\n", "delta", "A", "B", "change", "calls A / B", what);
    int changed = n - same;
    int shown = top < 0 || top > changed ? changed : top;
    for (int i = 0, k = 0; i < n && k < shown; i++) {
        const mp_tdiff_row *e = &r[i];
        if (mp_tdiff_row_same(e)) continue;
        k++;
        pf(w, "%12s %12s %12s %8s %7.4g/%-7.4g  ", delta(e->b - e->a, z), secs(e->a, x), secs(e->b, y),
           change(e->a, e->b, c), e->a_calls, e->b_calls);
        mp_out_cell(&w->out, use_label && e->label && e->label[0] ? e->label : e->name, 0, false);
        if (!e->in_a || !e->in_b) pf(w, "  (only in %s)", e->in_a ? "A" : "B");
        mp_out_putc(&w->out, '\n');
    }
    if (shown < changed) pf(w, "(%d more changed; --top -1 shows all)\n", changed - shown);
    if (same) pf(w, "(%d the same in A and B, not listed)\n", same);
}

/* A side's label: the file given, and for a digest the trace it was made from. */
static void label(td *w, const mp_trace *t, const char *file) {
    if (file && t->path && strcmp(file, t->path) != 0) {
        mp_out_cell(&w->out, file, 0, false);
        pf(w, " (digest of ");
        mp_out_cell(&w->out, t->path, 0, false);
        pf(w, ")");
    } else {
        mp_out_cell(&w->out, file ? file : t->path, 0, false);
    }
}

mp_status mp_trace_diff_report_text(const mp_trace_diff *d, const mp_trace_options *o, FILE *f) {
    td *w = malloc(sizeof *w);
    if (!w) return mp_error(MP_ERR_NOMEM, "out of memory while writing the report");
    w->out = (mp_out){f, 0, TD_BUF, w->buf};
    int top = o ? o->top : 20;
    mp_out_rule(&w->out, "Trace diff", 100);
    for (int s = 0; s < 2; s++) {
        const mp_trace *t = s ? d->b : d->a;
        pf(w, "%s %s: ", s ? "B" : "A", s ? "(test)   " : "(control)");
        label(w, t, s ? d->b_file : d->a_file);
        pf(w, ", %d step%s", t->n_steps, t->n_steps == 1 ? "" : "s");
        if (t->raw.device_name[0]) {
            pf(w, ", ");
            mp_out_cell(&w->out, t->raw.device_name, 0, false);
        }
        mp_out_putc(&w->out, '\n');
    }
    if (d->same) {
        pf(w, "\nNo difference: the steps (%d), operators (%d), kernels (%d) and modules (%d) of A and\n"
              "B have the same times and calls.\n",
           d->a->n_steps, d->n_ops, d->n_kernels, d->n_mods);
        mp_out_rule(&w->out, NULL, 100);
        mp_out_flush(&w->out);
        free(w);
        return MP_OK;
    }
    pf(w, "Deltas are B - A, per step on average (each trace's totals over its own steps), largest\n"
          "change first.\n\n");
    pf(w, "%-28s %12s %12s %12s %8s\n", "step (mean)", "A", "B", "delta", "change");
    line(w, "wall", d->a_step, d->b_step);
    /* neither trace recorded a device (CPU-only runs): no device rows to
     * compare, all zeros (the JSON keeps them) */
    if (d->op_device) {
        line(w, "device busy", d->a_busy, d->b_busy);
        for (int c = 0; c < MP_TI_COUNT; c++) {
            char what[64];
            snprintf(what, sizeof what, "idle: %s", mp_tidle_names[c]);
            line(w, what, d->a_idle[c], d->b_idle[c]);
        }
        for (int c = 0; c < MP_TC_COUNT; c++) {
            char what[64];
            snprintf(what, sizeof what, "device time: %s", mp_tcat_names[c]);
            line(w, what, d->a_cat[c], d->b_cat[c]);
        }
    }
    mp_out_putc(&w->out, '\n');
    table(w, d->op_device ? "Operators: self device time per step" : "Operators: self CPU time per step",
          "operator", d->ops, d->n_ops, top, false);
    mp_out_putc(&w->out, '\n');
    table(w, "Kernels, copies and sets: device time per step", "kernel", d->kernels, d->n_kernels, top, true);
    mp_out_putc(&w->out, '\n');
    if (d->mods_note[0]) {
        mp_out_rule(&w->out, "Modules", 100);
        pf(w, "%s.\n", d->mods_note);
    } else {
        table(w, d->mod_cpu ? "Modules: forward + backward CPU range time per step"
                            : "Modules: forward + backward device time per step",
              "module", d->mods, d->n_mods, top, false);
    }
    mp_out_rule(&w->out, NULL, 100);
    mp_out_flush(&w->out);
    free(w);
    return MP_OK;
}

/* ---- JSON ---- */

static void side(jw *w, const char *key, const mp_trace *t, const char *file) {
    jw_key_str(w, key);
    jw_open(w, '{');
    jw_key(w, "trace");
    if (t->path) jw_str(w, t->path);
    else jw_null(w);
    jw_key(w, "file");   /* what was read: the trace, or its digest */
    if (file || t->path) jw_str(w, file ? file : t->path);
    else jw_null(w);
    jw_ki64(w, "steps", t->n_steps);
    jw_key(w, "device");
    if (t->raw.device_name[0]) jw_str(w, t->raw.device_name);
    else jw_null(w);
    jw_close(w, '}');
}

static void abd(jw *w, double a, double b) {
    jw_key(w, "a_s");
    jw_double(w, a);
    jw_key(w, "b_s");
    jw_double(w, b);
    jw_key(w, "delta_s");
    jw_double(w, b - a);
}

static void rows(jw *w, const char *key, const mp_tdiff_row *r, int n, const char *label,
                 const char *second) {
    jw_key_str(w, key);
    jw_open(w, '[');
    for (int i = 0; i < n; i++) {
        const mp_tdiff_row *e = &r[i];
        jw_open(w, '{');
        jw_kstr(w, "name", e->name ? e->name : "");
        if (label) {
            jw_key_str(w, label);
            if (e->label) jw_str(w, e->label);
            else jw_null(w);
        }
        abd(w, e->a, e->b);
        jw_key(w, "a_calls_per_step");
        jw_double(w, e->a_calls);
        jw_key(w, "b_calls_per_step");
        jw_double(w, e->b_calls);
        if (second) {
            char k[64];
            snprintf(k, sizeof k, "a_%s_s", second);
            jw_key_str(w, k);
            jw_double(w, e->a2);
            snprintf(k, sizeof k, "b_%s_s", second);
            jw_key_str(w, k);
            jw_double(w, e->b2);
        }
        jw_key(w, "only_in");
        if (e->in_a && e->in_b) jw_null(w);
        else jw_str(w, e->in_a ? "a" : "b");
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

mp_status mp_trace_diff_report_json(const mp_trace_diff *d, const mp_trace_options *o, FILE *f) {
    (void)o; /* the JSON holds every row: --top shapes the text only */
    jw *w = jw_begin(f);
    if (!w) return MP_ERR_NOMEM;
    jw_open(w, '{');
    jw_kstr(w, "modelprof_version", MP_VERSION_STRING);
    side(w, "a", d->a, d->a_file);
    side(w, "b", d->b, d->b_file);
    jw_key(w, "diff");
    jw_open(w, '{');
    jw_key(w, "steps");
    jw_open(w, '{');
    jw_key(w, "a_mean_s");
    jw_double(w, d->a_step);
    jw_key(w, "b_mean_s");
    jw_double(w, d->b_step);
    jw_key(w, "delta_s");
    jw_double(w, d->b_step - d->a_step);
    jw_ki64(w, "a_count", d->a->n_steps);
    jw_ki64(w, "b_count", d->b->n_steps);
    jw_key(w, "device_busy");
    jw_open(w, '{');
    abd(w, d->a_busy, d->b_busy);
    jw_close(w, '}');
    jw_key(w, "idle_causes");
    jw_open(w, '{');
    for (int c = 0; c < MP_TI_COUNT; c++) {
        jw_key_str(w, mp_tidle_names[c]);
        jw_open(w, '{');
        abd(w, d->a_idle[c], d->b_idle[c]);
        jw_close(w, '}');
    }
    jw_close(w, '}');
    jw_key(w, "device_time");
    jw_open(w, '{');
    for (int c = 0; c < MP_TC_COUNT; c++) {
        jw_key_str(w, mp_tcat_names[c]);
        jw_open(w, '{');
        abd(w, d->a_cat[c], d->b_cat[c]);
        jw_close(w, '}');
    }
    jw_close(w, '}');
    jw_close(w, '}');
    jw_kstr(w, "operator_time", d->op_device ? "self_device" : "self_cpu");
    jw_kstr(w, "module_time", d->mod_cpu ? "cpu" : "device");
    jw_kbool(w, "no_difference", d->same);
    jw_key(w, "modules_note");
    if (d->mods_note[0]) jw_str(w, d->mods_note);
    else jw_null(w);
    rows(w, "operators", d->ops, d->n_ops, NULL, "self_cpu");
    rows(w, "kernels", d->kernels, d->n_kernels, "short_name", NULL);
    rows(w, "modules", d->mods, d->n_mods, "class", "bwd");
    jw_close(w, '}');
    jw_close(w, '}');
    jw_end(w);
    return MP_OK;
}
