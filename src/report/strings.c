/* Reports as strings in memory: the entry points a binding without a
 * FILE * (the Python package's ctypes layer) calls. The writers are the
 * same as the files' (a memory stream in front of them). */
#include "report/report.h"
#include "trace/trace.h"
#include "train/train.h"

#include <stdio.h>
#include <stdlib.h>

typedef mp_status (*write_fn)(const void *a, const void *b, FILE *f);

static mp_status to_string(write_fn fn, const void *a, const void *b, char **out) {
    if (!out) return mp_error(MP_ERR_USAGE, "report to string: no output pointer");
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return mp_error(MP_ERR_NOMEM, "out of memory while writing the report");
    mp_status st = fn(a, b, f);
    if (fclose(f) != 0 && st == MP_OK) st = mp_error(MP_ERR_NOMEM, "out of memory while writing the report");
    if (st != MP_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    return MP_OK;
}

static mp_status profile_fn(const void *a, const void *b, FILE *f) {
    return mp_report_write(a, b, f);
}

mp_status mp_report_string(const mp_profile *p, const mp_report_options *o, char **out) {
    if (!p || !o) {
        if (out) *out = NULL;
        return mp_error(MP_ERR_USAGE, "mp_report_string: no profile or options");
    }
    return to_string(profile_fn, p, o, out);
}

static mp_status trace_fn(const void *a, const void *b, FILE *f) {
    const mp_trace *t = a;
    const int *json = b;
    mp_trace_options o = MP_TRACE_OPTIONS_DEFAULT;
    return *json ? mp_trace_report_json(&t, 1, NULL, &o, f) : mp_trace_report_text(&t, 1, NULL, &o, f);
}

mp_status mp_trace_string(const char *path, mp_format format, char **out) {
    if (out) *out = NULL;
    if (!path || !out) return mp_error(MP_ERR_USAGE, "mp_trace_string: no path or output pointer");
    if (format != MP_FORMAT_TEXT && format != MP_FORMAT_JSON)
        return mp_error(MP_ERR_USAGE, "mp_trace_string: unknown format %d", (int)format);
    mp_trace_options o = MP_TRACE_OPTIONS_DEFAULT;
    mp_trace t;
    mp_status st = mp_trace_open(path, &o, &t);
    if (st != MP_OK) return st;
    int json = format == MP_FORMAT_JSON;
    st = to_string(trace_fn, &t, &json, out);
    mp_trace_free(&t);
    return st;
}

static mp_status train_fn(const void *a, const void *b, FILE *f) {
    const mp_train_options *o = b;
    return o->format == MP_FORMAT_JSON ? mp_report_train_json(a, f) : mp_report_train_text(a, o, f);
}

mp_status mp_train_string(const mp_train *t, const mp_train_options *opts, char **out) {
    if (out) *out = NULL;
    if (!t || !opts || !out)
        return mp_error(MP_ERR_USAGE, "mp_train_string: no profile, options or output pointer");
    mp_train_options def;
    mp_train_defaults(&def);
    mp_status st = mp_opts_take(&def, sizeof def, opts, MP_TRAIN_OPTIONS_V1, "mp_train_options");
    if (st) return st;
    const mp_train_options *o = &def;
    if (o->format != MP_FORMAT_TEXT && o->format != MP_FORMAT_JSON)
        return mp_error(MP_ERR_USAGE, "mp_train_string: unknown format %d", (int)o->format);
    if (o->depth < -1 || o->top < -1)
        return mp_error(MP_ERR_USAGE, "mp_train_string: depth %d, top %d (need -1 or more)", o->depth, o->top);
    return to_string(train_fn, t, o, out);
}


static mp_status tplan_fn(const void *a, const void *b, FILE *f) {
    return mp_tplan_write(a, *(const mp_format *)b, f);
}

mp_status mp_tplan_string(const mp_tplan *pl, mp_format format, char **out) {
    if (out) *out = NULL;
    if (!pl || !out) return mp_error(MP_ERR_USAGE, "mp_tplan_string: no plan or output pointer");
    return to_string(tplan_fn, pl, &format, out);
}

mp_status mp_tplan_profile_string(const mp_profile *p, int n, const char *const *flags,
                                  const char *const *values, mp_format format, char **out) {
    if (out) *out = NULL;
    if (!p || !out || n < 0 || (n > 0 && !flags))
        return mp_error(MP_ERR_USAGE, "mp_tplan_profile_string: no profile, flags or output pointer");
    mp_tplan_options o;
    mp_status st = mp_tplan_options_default(&o);
    for (int i = 0; i < n && !st; i++)
        st = mp_tplan_options_set(&o, flags[i], values ? values[i] : NULL);
    if (!st) st = mp_tplan_options_check(&o);
    mp_tplan *pl = NULL;
    if (!st) st = mp_tplan_create(p, &o, &pl);
    if (!st) st = mp_tplan_string(pl, format, out);
    mp_tplan_free(pl);
    return st;
}
