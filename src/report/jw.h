/* The one JSON writer (internal): a streaming writer every JSON output
 * goes through (the profile, the trace analysis, the training profile, the
 * plan, the Chrome trace of a run). Strings are escaped by mp_json_string (json.c). */
#ifndef MP_JW_H
#define MP_JW_H

#include "report/report.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a tiny streaming writer ----
 * It fills its own buffer and hands it to stdio in large writes (a 7B
 * graph's report is megabytes of short tokens: one stdio call per token
 * cost more than the profile itself).
 * Containers at nesting level 0 and 1 put each member on its own line;
 * deeper ones (one node, one module, a shape) stay on one line. */
#define JW_MAX_LEVEL 16
#define JW_MULTILINE_LEVELS 2
#define JW_BUF (64 * 1024)

typedef struct jw {
    mp_out o;
    int level;                  /* open containers */
    bool first[JW_MAX_LEVEL];   /* no member written yet at that level */
    bool after_key;             /* a key was written: the value follows */
    int multiline;              /* containers below this nesting level put each member on a line */
    char buf[JW_BUF];           /* o's storage */
} jw;

static inline void jw_newline(jw *w, int level) {
    mp_out_putc(&w->o, '\n');
    for (int i = 0; i < level; i++) mp_out_write(&w->o, "  ", 2);
}

/* Separator in a container with one member a line (levels 0 and 1). */
static inline void jw_sep_lines(jw *w) {
    if (w->level == 0) return;
    int l = w->level - 1;
    if (!w->first[l]) mp_out_putc(&w->o, ',');
    jw_newline(w, w->level);
    w->first[l] = false;
}

/* Separator before a value or a key at the current level: nothing right
 * after a key, ", " between the members of a one-line container. */
static inline void jw_sep(jw *w) {
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    int l = w->level - 1;
    if (l < w->multiline) {
        jw_sep_lines(w);
        return;
    }
    bool first = w->first[l];
    w->first[l] = false;
    size_t n = mp_out_room(&w->o, 2);
    memcpy(w->o.buf + n, ", ", 2);
    w->o.n = n + (first ? 0 : 2);
}

static inline void jw_raw_string(jw *w, const char *s) { mp_json_string(&w->o, s); }

static inline void jw_open(jw *w, char ch) {
    jw_sep(w);
    int level = w->level;
    if (level < JW_MAX_LEVEL) w->first[level] = true;
    w->level = level + 1;
    mp_out_putc(&w->o, ch);
}

/* A container with members at levels 0 and 1 ends on a line of its own. */
static inline void jw_close(jw *w, char ch) {
    int level = --w->level;
    if (level < w->multiline && !w->first[level]) jw_newline(w, level);
    mp_out_putc(&w->o, ch);
}

/* A key from the model (a symbol or dtype name), escaped like any string;
 * the value that follows goes through jw_sep. */
static inline void jw_key_str(jw *w, const char *k) {
    jw_sep(w);
    jw_raw_string(w, k);
    mp_out_write(&w->o, ": ", 2);
    w->after_key = true;
}

/* A key that is a string literal goes out pre-quoted with its ", "
 * separator in one copy: such keys are plain ASCII and never need
 * escaping. The value is written right after it, without jw_sep. */
#define JW_KEY_TEXT(k) ", \"" k "\": "
#define jw_kput(w, k) jw_key_lit(w, JW_KEY_TEXT(k), sizeof JW_KEY_TEXT(k) - 1)

static inline void jw_key_lit(jw *w, const char *lit, size_t len) {
    int l = w->level - 1;
    if (l < w->multiline) { /* one member a line: the general way */
        jw_sep(w);
        mp_out_write(&w->o, lit + 2, len - 2);
        return;
    }
    size_t sep = w->first[l] ? 0 : 2; /* the first member has no ", " */
    w->first[l] = false;
    size_t n = mp_out_room(&w->o, len);
    char *o = w->o.buf + n;
    memcpy(o, lit, 2);
    memcpy(o + sep, lit + 2, len - 2);
    w->o.n = n + sep + len - 2;
}

static inline void jw_str(jw *w, const char *s) {
    jw_sep(w);
    jw_raw_string(w, s);
}
/* Decimal digits straight into the buffer (mp_fmt_dec, format.c). */
static inline void jw_digits_long(jw *w, uint64_t v) {
    size_t n = mp_out_room(&w->o, MP_DEC_MAX);
    w->o.n = n + mp_fmt_dec(w->o.buf + n, v);
}
static inline void jw_digits(jw *w, uint64_t v) {
    if (v < 10) mp_out_putc(&w->o, (char)('0' + v));
    else jw_digits_long(w, v);
}
static inline void jw_sdigits(jw *w, int64_t v) {
    if (v < 0) {
        mp_out_putc(&w->o, '-');
        jw_digits(w, (uint64_t)0 - (uint64_t)v);
    } else {
        jw_digits(w, (uint64_t)v);
    }
}
static inline void jw_u64(jw *w, uint64_t v) {
    jw_sep(w);
    jw_digits(w, v);
}
static inline void jw_i64(jw *w, int64_t v) {
    jw_sep(w);
    jw_sdigits(w, v);
}
static inline void jw_null(jw *w) {
    jw_sep(w);
    mp_out_puts(&w->o, "null");
}
static inline void jw_double(jw *w, double v) {
    jw_sep(w);
    if (isfinite(v)) {
        char d[32];
        snprintf(d, sizeof d, "%.9g", v);
        mp_out_puts(&w->o, d);
    } else {
        mp_out_puts(&w->o, "null");
    }
}

/* A time in nanoseconds as seconds, every digit kept: an absolute time
 * (a step's start on the trace's clock, 4553754.198415571) would lose its
 * microseconds to %.9g. */
static inline void jw_ns_seconds(jw *w, int64_t ns) {
    jw_sep(w);
    char d[48];
    uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    snprintf(d, sizeof d, "%s%llu.%09llu", ns < 0 ? "-" : "", (unsigned long long)(a / 1000000000u),
             (unsigned long long)(a % 1000000000u));
    mp_out_puts(&w->o, d);
}

/* A non-negative figure or a string, else null (not known, none). */
static inline void jw_opt_i64(jw *w, int64_t v) {
    if (v >= 0) jw_i64(w, v);
    else jw_null(w);
}
static inline void jw_opt_str(jw *w, const char *s) {
    if (s) jw_str(w, s);
    else jw_null(w);
}
/* A boolean as an array element (jw_kbool: after a key). */
static inline void jw_bool(jw *w, bool v) {
    jw_sep(w);
    mp_out_puts(&w->o, v ? "true" : "false");
}

/* A literal key and its value. */
#define jw_key(w, k) (jw_kput(w, k), (w)->after_key = true)
#define jw_kstr(w, k, s) (jw_kput(w, k), jw_raw_string(w, s))
#define jw_ku64(w, k, v) (jw_kput(w, k), jw_digits(w, v))
#define jw_ki64(w, k, v) (jw_kput(w, k), jw_sdigits(w, v))
#define jw_kbool(w, k, v) (jw_kput(w, k), mp_out_puts(&w->o, (v) ? "true" : "false"))
#define jw_kdouble(w, k, v) (jw_key(w, k), jw_double(w, v))


/* Formulas as JSON (formula.c): a POLY (a list of terms, null without a
 * formula), one set's formulas (an object), the profile's "formulas". */
void mp_poly_json(jw *w, const mp_poly *q, const mp_profile *p);
void mp_formset_json(jw *w, const mp_profile *p, const mp_formset *fs);
void mp_formulas_json(jw *w, const mp_profile *p);

/* A writer onto `f` (NULL when out of memory, the error set); jw_end
 * closes the last line, flushes and frees it. */
static inline jw *jw_begin(FILE *f) {
    jw *w = malloc(sizeof *w);
    if (!w) {
        mp_error(MP_ERR_NOMEM, "out of memory while writing the report");
        return NULL;
    }
    memset(w, 0, offsetof(jw, buf));
    w->o.f = f;
    w->o.buf = w->buf;
    w->o.cap = JW_BUF;
    w->multiline = JW_MULTILINE_LEVELS;
    return w;
}

static inline void jw_end(jw *w) {
    mp_out_putc(&w->o, '\n');
    mp_out_flush(&w->o);
    free(w);
}

#endif
