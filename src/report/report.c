/* Public report entry points: options, dispatch by format, atomic write. */
#include "report/report.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

void mp_out_flush(mp_out *o) {
    if (o->n) fwrite_unlocked(o->buf, 1, o->n, o->f);
    o->n = 0;
}

void mp_out_write(mp_out *o, const void *p, size_t len) {
    if (len > o->cap - o->n) {
        mp_out_flush(o);
        if (len > o->cap) {
            fwrite_unlocked(p, 1, len, o->f);
            return;
        }
    }
    size_t n = o->n;
    memcpy(o->buf + n, p, len);
    o->n = n + len;
}

void mp_out_rule(mp_out *o, const char *title, int width) {
    int len = title ? (int)strlen(title) + 2 : 0;
    int left = (width - len) / 2, right = width - len - left;
    if (left < 3) left = 3;
    if (right < 3) right = 3;
    for (int i = 0; i < left; i++) mp_out_putc(o, '-');
    if (title) {
        mp_out_putc(o, ' ');
        mp_out_puts(o, title);
        mp_out_putc(o, ' ');
    }
    for (int i = 0; i < right; i++) mp_out_putc(o, '-');
    mp_out_putc(o, '\n');
}

/* One UTF-8 character of p (at most `left` bytes): its length (0: not a
 * well-formed character: a stray byte, an overlong form, a surrogate) and
 * code point. The one test of the writers (cells, CSV, JSON). */
int mp_utf8_char(const unsigned char *p, size_t left, unsigned *cp) {
    unsigned c = p[0];
    int n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!n || (size_t)n > left) return 0;
    unsigned v = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        v = v << 6 | (p[i] & 0x3f);
    }
    static const unsigned least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < least[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return n;
}

/* Terminal columns of code point c: 2 for the East Asian wide and
 * full-width ranges and emoji, else 1. */
static int char_cols(unsigned c) {
    return (c >= 0x1100 && c <= 0x115f) || (c >= 0x2e80 && c <= 0xa4cf) || (c >= 0xac00 && c <= 0xd7a3) ||
                   (c >= 0xf900 && c <= 0xfaff) || (c >= 0xfe30 && c <= 0xfe4f) || (c >= 0xff00 && c <= 0xff60) ||
                   (c >= 0xffe0 && c <= 0xffe6) || (c >= 0x1f300 && c <= 0x1f64f) ||
                   (c >= 0x1f900 && c <= 0x1f9ff) || (c >= 0x20000 && c <= 0x3fffd)
               ? 2
               : 1;
}

/* A cell of `width` columns: whole UTF-8 characters (a control byte or a
 * byte of no well-formed character shows as '?'), cut with "..." to fit,
 * padded by columns, not bytes. */
void mp_out_cell(mp_out *o, const char *s, int width, bool right) {
    char b[512] = "";
    size_t n = 0, keep_n = 0;
    int cols = 0, keep_cols = 0;
    bool cut = false;
    const unsigned char *p = (const unsigned char *)(s ? s : "?");
    size_t left = strlen((const char *)p);
    int room = width > 3 ? width - 3 : width;   /* what precedes "..." when cut */
    while (left) {
        unsigned cp = '?';
        int k = mp_utf8_char(p, left, &cp);
        int w = k ? char_cols(cp) : 1;
        if (n + (size_t)(k ? k : 1) > sizeof b - 4) break;
        if (width > 0 && cols + w > width) {
            cut = true;
            break;
        }
        if (!k || cp < 0x20 || cp == 0x7f) b[n++] = '?';
        else memcpy(b + n, p, (size_t)k), n += (size_t)k;
        cols += w;
        if (cols <= room) keep_n = n, keep_cols = cols;
        p += k ? k : 1;
        left -= (size_t)(k ? k : 1);
    }
    if (cut) {
        n = keep_n;
        cols = keep_cols;
        if (width > 3) {
            memcpy(b + n, "...", 3);
            n += 3;
            cols += 3;
        }
    }
    if (right)
        for (int i = cols; i < width; i++) mp_out_putc(o, ' ');
    mp_out_write(o, b, n);
    if (!right)
        for (int i = cols; i < width; i++) mp_out_putc(o, ' ');
}

void mp_out_printf(mp_out *o, const char *fmt, ...) {
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (len < 0) return;
    if ((size_t)len < sizeof small) {
        mp_out_write(o, small, (size_t)len);
        return;
    }
    char *big = malloc((size_t)len + 1);
    if (!big) return; /* out of memory: the piece is left out */
    va_start(ap, fmt);
    vsnprintf(big, (size_t)len + 1, fmt, ap);
    va_end(ap);
    mp_out_write(o, big, (size_t)len);
    free(big);
}

#define REPORT_OPTIONS_V1 MP_FIELD_END(mp_report_options, csv_table)

static void report_defaults(mp_report_options *o) {
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->format = MP_FORMAT_TEXT;
    o->depth = -1;
    o->top = 3;
    o->detailed = 1;
    o->show_ops = 1;
    o->op_top = 5;
    o->tree_depth = -2;
}

mp_status mp_report_options_init(mp_report_options *o, size_t size) {
    mp_report_options d;
    report_defaults(&d);
    return mp_opts_init(o, size, &d, sizeof d, REPORT_OPTIONS_V1, "mp_report_options");
}

mp_status mp_report_write(const mp_profile *p, const mp_report_options *opts, FILE *f) {
    mp_report_options def;
    if (!p || !p->m || !f) return mp_error(MP_ERR_USAGE, "mp_report_write: no profile or stream");
    report_defaults(&def);
    mp_status st = mp_opts_take(&def, sizeof def, opts, REPORT_OPTIONS_V1, "mp_report_options");
    if (st) return st;
    const mp_report_options *o = &def;
    if (o->depth < -1)
        return mp_error(MP_ERR_USAGE, "report depth %d: use -1 (all) or a depth >= 0", o->depth);
    if (o->top < -1)
        return mp_error(MP_ERR_USAGE, "report top %d: use -1 (all), 0 (none) or a count",
                        o->top);
    if (o->op_top < -1)
        return mp_error(MP_ERR_USAGE, "report op_top %d: use -1 (all) or a count", o->op_top);
    if (o->tree_depth < -2)
        return mp_error(MP_ERR_USAGE, "report tree depth %d: use -2 (as depth), -1 (all) or a "
                        "depth >= 0", o->tree_depth);
    switch (o->format) {
    case MP_FORMAT_TEXT: st = mp_report_text(p, o, f); break;
    case MP_FORMAT_JSON: st = mp_report_json(p, o, f); break;
    case MP_FORMAT_HTML: st = mp_report_html(p, o, f); break;
    case MP_FORMAT_CSV:
        if ((unsigned)o->csv_table > MP_CSV_MODULE_OPS)
            return mp_error(MP_ERR_USAGE, "unknown CSV table %d", (int)o->csv_table);
        st = mp_report_csv(p, o, f);
        break;
    default: return mp_error(MP_ERR_USAGE, "unknown report format %d", (int)o->format);
    }
    if (st != MP_OK) return st;
    if (fflush(f) != 0 || ferror(f))
        return mp_error(MP_ERR_IO, "cannot write the report: %s", strerror(errno));
    return MP_OK;
}

typedef struct report_job {
    const mp_profile *p;
    const mp_report_options *o;
} report_job;

static mp_status report_job_write(void *ud, FILE *f) {
    const report_job *j = ud;
    return mp_report_write(j->p, j->o, f);
}

mp_status mp_report_write_file(const mp_profile *p, const mp_report_options *o,
                               const char *path) {
    report_job j = {p, o};
    return mp_write_file_atomic(path, report_job_write, &j);
}

/* ---- parameters counted by judgement ---- */

const char mp_modop_unused[] = "(unused)";

const char *mp_modop_name(const mp_profile *p, const mp_modop *r) {
    if (r->op >= 0 && r->op < p->n_ops) return p->ops[r->op].op;
    return r->op == MP_MODOP_FOLDED ? "(folded)" : mp_modop_unused;
}
const mp_cost_flag_name mp_cost_flag_names[] = {
    {MP_COST_UNCOUNTED, "uncounted"}, {MP_COST_UNKNOWN, "unknown"},
    {MP_COST_OVERFLOW, "overflow"},   {MP_COST_BOUND, "bound"},
    {MP_COST_PER_ITER, "per_iteration"}, {MP_COST_IGNORED, "ignored"},
    {MP_COST_RUN, "sized_by_run"}};
const int mp_cost_flag_count = (int)MP_ARRAY_LEN(mp_cost_flag_names);

const char mp_bn_folded_text[] =
    "the exporter folded BatchNorm into the convolutions: params are the folded graph's "
    "(each BatchNorm's scale and shift are gone, its convolution gained a bias), not "
    "PyTorch's; for PyTorch's count export with "
    "training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False";

const char *mp_pnote_kind(const mp_param_note *note) {
    switch (note->kind) {
    case MP_PNOTE_DERIVED: return "derived";
    case MP_PNOTE_BOUND: return "upper_bound";
    case MP_PNOTE_SAME: return "same_parameter";
    case MP_PNOTE_ATTN_BIAS: return "attention_bias";
    default: return "possible_copy";
    }
}

bool mp_pnote_shown(const mp_param_note *note) {
    /* a fold of parameters counted on their own leaves PyTorch's count */
    return note->kind != MP_PNOTE_DERIVED || (note->counted != note->elems && note->counted != 0);
}

typedef struct mp__sbuf {
    char *p;
    size_t n, len;
} mp__sbuf;

static void mp__sput(mp__sbuf *b, const char *fmt, ...) MP_PRINTF(2, 3);
static void mp__sput(mp__sbuf *b, const char *fmt, ...) {
    if (b->len + 1 >= b->n) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p + b->len, b->n - b->len, fmt, ap);
    va_end(ap);
    if (k > 0) b->len = b->len + (size_t)k < b->n ? b->len + (size_t)k : b->n - 1;
}

static void mp__sput_shape(mp__sbuf *b, const mp_tensor *t) {
    mp__sput(b, "[");
    for (int i = 0; t && i < t->rank; i++) mp__sput(b, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    mp__sput(b, "]");
}

static void mp__sput_count(mp__sbuf *b, uint64_t v) {
    char d[MP_DEC_MAX + 1];
    d[mp_fmt_dec(d, v)] = 0;
    mp__sput(b, "%s", d);
}

const char *mp_pnote_text(const mp_profile *p, const mp_param_note *note, char *buf, size_t n) {
    const mp_model *m = p->m;
    const mp_graph *g = m->graph;
    mp__sbuf b = {buf, n, 0};
    if (n) buf[0] = 0;
    const mp_value *val = &g->values[note->value];
    const mp_value *src = note->source >= 0 ? &g->values[note->source] : NULL;
    mp__sput(&b, "%s ", val->name);
    mp__sput_shape(&b, val->init);
    switch (note->kind) {
    case MP_PNOTE_SAME:
        mp__sput(&b, " equals %s ", src->name);
        mp__sput_shape(&b, src->init);
        mp__sput(&b, " (%s): the same parameter, counted once", note->how ? note->how : "copy");
        break;
    case MP_PNOTE_ATTN_BIAS:
        mp__sput(&b, " is an attention's additive %s the exporter folded to a constant",
                 note->how && strcmp(note->how, "mask") == 0 ? "mask" : "bias");
        if (note->how && strcmp(note->how, "mask") == 0) {
            mp__sput(&b, " (0 or -inf only): a buffer, not a parameter");
        } else if (note->how && strcmp(note->how, "gathered") == 0) {
            mp__sput(&b, " (a table gathered by an index: ");
            mp__sput_count(&b, note->elems);
            mp__sput(&b, " values, ");
            mp__sput_count(&b, note->counted);
            mp__sput(&b, " distinct): counted as its ");
            mp__sput_count(&b, note->counted);
            mp__sput(&b, " distinct values, the table's entries");
        } else {
            mp__sput(&b, val->init && val->init->numel > ((int64_t)1 << 24)
                             ? " (more than 2^24 values, not read): counted as its "
                             : " (values not readable): counted as its ");
            mp__sput_count(&b, note->elems);
            mp__sput(&b, " elements, an upper bound");
        }
        break;
    case MP_PNOTE_MAYBE_COPY:
        mp__sput(&b, " may be a copy of %s ", src->name);
        mp__sput_shape(&b, src->init);
        mp__sput(&b, " (its shape is a permutation of it; weights absent, values not compared): "
                     "counted; if it is a tied weight, params are ");
        mp__sput_count(&b, note->elems);
        mp__sput(&b, " fewer");
        break;
    default: {
        bool bound = note->kind == MP_PNOTE_BOUND;
        bool gathered = note->how && strcmp(note->how, "gather") == 0;
        mp__sput(&b, bound ? (gathered ? " was gathered by an index by the exporter" : " was broadcast by the exporter")
                           : " was derived by the exporter");
        if (note->how && !bound) mp__sput(&b, " (%s)", note->how);
        mp__sput(&b, " from ");
        for (int i = 0; i < note->n_src && i < MP_PNOTE_SRC; i++) {
            const struct mp_sig_param *sp = &m->sig_params[note->src[i]];
            mp__sput(&b, "%s%s", i ? ", " : "", sp->target ? sp->target : sp->name);
        }
        if (note->n_src > MP_PNOTE_SRC) mp__sput(&b, " and %d more", note->n_src - MP_PNOTE_SRC);
        if (bound) {
            mp__sput(&b, ", whose shape the file does not give (%s): counted as its ",
                     val->init && val->init->loc == MP_DATA_ABSENT ? "weights absent"
                                                                   : "values not readable");
            mp__sput_count(&b, note->elems);
            mp__sput(&b, " elements, an upper bound (the parameter has at most as many)");
        } else if (note->counted == 0) {
            mp__sput(&b, ": a fold of parameters counted by their own shapes, it adds nothing");
        } else if (note->counted == note->elems) {
            mp__sput(&b, ": counted as its ");
            mp__sput_count(&b, note->elems);
            mp__sput(&b, " elements");
        } else {
            mp__sput(&b, ": counted as the parameter's ");
            mp__sput_count(&b, note->counted);
            mp__sput(&b, " elements, not its own ");
            mp__sput_count(&b, note->elems);
        }
    }
    }
    return buf;
}
