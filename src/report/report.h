/* Report writers (internal). Every writer reads only the profile (and the
 * model it points to) and prints every figure through the one number
 * formatter below. Every module traversal goes through mp_module_walk. */
#ifndef MP_REPORT_H
#define MP_REPORT_H

#include "analyze/profile.h"

#include <stdio.h>

/* ---- the one number formatter (format.c) ----
 *
 * Each function returns its text in a small struct so that several calls
 * can sit in one printf: printf("%s", mp_fmt_count(n).s) is valid C11 (the
 * temporary lives until the end of the full expression).
 *
 * Scaled figures use decimal prefixes K M G T P E (10^3 ... 10^18), at most
 * two decimals with trailing zeros trimmed, rounding half up, and a value
 * that rounds to 1000 moves to the next prefix (999996 -> "1 M"):
 *   mp_fmt_count(25560000) = "25.56 M"   mp_fmt_count(512) = "512"
 *   mp_fmt_macs(4090000000) = "4.09 GMACs"  mp_fmt_flops(0) = "0 FLOPs"
 *   mp_fmt_bytes(1500) = "1.5 KB"        (decimal: 1 KB = 1000 B)
 *   mp_fmt_pct(1, 8) = "12.5%"            mp_fmt_seconds(0.00083) = "830 us" */
#define MP_FMT_MAX 48
typedef struct mp_fmtbuf {
    char s[MP_FMT_MAX];
} mp_fmtbuf;

#define MP_FMT_UNKNOWN "?"

/* The core: v with a decimal prefix glued to `unit` ("" for plain counts):
 * "25.56 M", "1.5 GFLOPs", "512 B", "0 MACs". */
mp_fmtbuf mp_fmt_si(uint64_t v, const char *unit);
/* The same for a non-negative real (rates); "?" for NaN/negative. */
mp_fmtbuf mp_fmt_si_d(double v, const char *unit);
mp_fmtbuf mp_fmt_count(uint64_t v);   /* unit "" */
mp_fmtbuf mp_fmt_macs(uint64_t v);    /* unit "MACs" */
mp_fmtbuf mp_fmt_flops(uint64_t v);   /* unit "FLOPs" */
mp_fmtbuf mp_fmt_bytes(uint64_t v);   /* unit "B" */
/* A figure that may be unknown: "?" (with " unit" when unit is not empty)
 * when `unknown`, else mp_fmt_si(v, unit). */
mp_fmtbuf mp_fmt_fig(uint64_t v, bool unknown, const char *unit);
/* part/whole as a percentage, two decimals trimmed: "12.34%", "100%",
 * "0.5%", "0%"; a non-zero part below 0.005% is "<0.01%"; whole == 0 is
 * "0%". */
mp_fmtbuf mp_fmt_pct(uint64_t part, uint64_t whole);
mp_fmtbuf mp_fmt_pct_d(double part, double whole);
/* Seconds: "1.5 s", "1.2 ms", "830 us", "12 ns", "0 s"; "?" when < 0. */
mp_fmtbuf mp_fmt_seconds(double s);
/* text into b[MP_FMT_MAX] after the sign character ('-', '+', ' '; none
 * when 0), cut to fit: b */
char *mp_fmt_signed(char *b, char sign, const char *text);

/* The decimal digits of v at out (no NUL), MP_DEC_MAX bytes at most;
 * returns their count. Every writer's integers go through it. */
#define MP_DEC_MAX 20
size_t mp_fmt_dec(char *out, uint64_t v);

/* Saturating helpers for figures derived in reports. */
uint64_t mp_sat_add(uint64_t a, uint64_t b);
uint64_t mp_sat_mul(uint64_t a, uint64_t b);

/* ---- the module tree (tree.c; mp_module_walk is declared in profile.h) */

/* Any module tree: a model's (mp_model.modules) or a trace's (the
 * nn.Module scopes of a torch.profiler trace). Pre-order, iterative. */
struct mp_out;
typedef bool (*mp_tree_visit)(const mp_module *mods, int module, void *ud);
void mp_tree_walk(const mp_module *mods, int n, int max_depth, mp_tree_visit fn, void *ud);

/* The detailed tree in DeepSpeed's layout, the one tree printer:
 *   root(figures
 *     (label): Class(figures)
 *     (label): Class(
 *       figures
 *       ...children...
 *     )
 *   )
 * label() gives the text shown for a module (already safe for a
 * terminal), cls() its class or NULL, figs() writes its figures. */
typedef struct mp_tree_style {
    const char *(*label)(int module, void *ud);
    const char *(*cls)(int module, void *ud);
    void (*figs)(struct mp_out *o, int module, void *ud);
    void *ud;
} mp_tree_style;

/* The model's name (issue 18 point 8): the root module's class where known
 * (the dynamo exporter's), else the graph's name unless an exporter's
 * generic one (torch_jit, main_graph), else the file's stem. */
const char *mp_model_name(const mp_profile *p);
/* A module's own name in the JSON and CSV ("conv1"); the root's is the
 * model's name. */
const char *mp_module_name(const mp_profile *p, int module);
/* The name a module is shown under in aggregated lists: its class when
 * known, else its dotted path; the root without a class: mp_model_name. */
const char *mp_module_display(const mp_profile *p, int module);
/* The label of a module inside its parent ("conv1", "0"); for the root, as
 * mp_module_display. */
const char *mp_module_label(const mp_profile *p, int module);
/* Deepest module depth (0 for a root-only tree, -1 without modules). */
int mp_module_max_depth(const mp_profile *p);
/* Does the figure of this set depend on unresolved dims? */
static inline bool mp_fig_unknown(const mp_fig *f) { return f->unknown > 0; }
/* Are all nodes of the set without a cost rule (nothing could be counted)?
 * Its MACs and FLOPs print "?", never 0. */
static inline bool mp_fig_uncountable(const mp_fig *f) {
    return f->nodes > 0 && f->uncounted >= f->nodes;
}
/* The version of the profile JSON's layout (its "schema_version",
 * docs/schema/profile.schema.json): 2 since an unknown figure is null. */
#define MP_PROFILE_SCHEMA_VERSION 2

/* Which figures of a set are unknown, the one mark every format reads
 * (text "?", JSON null, CSV an empty field, HTML "?"; docs/JSON.md,
 * "Unknown figures"): its MACs and FLOPs when a node's cost needs unknown
 * dims or none of its nodes has a cost rule; its bytes (read, written,
 * activations, the activation peak) when a node's cost needs unknown dims.
 * What was counted is then a lower bound ("at least"). */
static inline bool mp_fig_ops_unknown(const mp_fig *f) {
    return mp_fig_unknown(f) || mp_fig_uncountable(f);
}
static inline bool mp_fig_bytes_unknown(const mp_fig *f) { return mp_fig_unknown(f); }
/* The same for one node's cost. */
static inline bool mp_cost_ops_unknown(const mp_cost *k) {
    return (k->flags & (MP_COST_UNKNOWN | MP_COST_UNCOUNTED)) != 0;
}
static inline bool mp_cost_bytes_unknown(const mp_cost *k) { return (k->flags & MP_COST_UNKNOWN) != 0; }

/* ---- parameters counted by judgement (report.c) ----
 * The sentence a report gives a judged tensor (mp_param_note), the same in
 * text and JSON: into buf (n bytes), truncated when longer; returns buf.
 * Model strings go in as they are: each writer escapes them its own way. */
const char *mp_pnote_text(const mp_profile *p, const mp_param_note *note, char *buf, size_t n);
/* The note's kind as a stable snake_case id: "derived", "upper_bound",
 * "same_parameter", "possible_copy". */
const char *mp_pnote_kind(const mp_param_note *note);
/* Does the text report show it? (a derived constant counted as its own
 * elements changes nothing a reader sees: the JSON lists it) */
bool mp_pnote_shown(const mp_param_note *note);
/* The names of a node's cost flags (MP_COST_*), as JSON and CSV write them. */
typedef struct mp_cost_flag_name {
    unsigned bit;
    const char *name;
} mp_cost_flag_name;
extern const mp_cost_flag_name mp_cost_flag_names[];
extern const int mp_cost_flag_count;

/* The note on a BatchNorm folded into the convolutions (p->bn_folded). */
extern const char mp_bn_folded_text[];

/* The op name of the root's row of parameters no node reads (mp_modop.op -1). */
extern const char mp_modop_unused[];
/* A by-module-op row's name: its op type, "(unused)" (the root's parameters
 * no node reads) or "(folded)" (a module's parameters folded into another's
 * node) */
const char *mp_modop_name(const mp_profile *p, const mp_modop *r);

/* "Conv" or "com.microsoft.FusedConv" (default domain: "" or "ai.onnx"). */
const char *mp_op_display(const char *domain, const char *op, char *buf, size_t n);

/* ---- the one output buffer (report.c) ----
 * Writers fill `buf` (storage of `cap` bytes they provide) and hand it to
 * stdio in large writes: a large model's report is thousands of short
 * pieces, and one stdio call per piece cost more than building them. The
 * length is read once and stored once per write (a byte store into buf
 * may alias `n`, and reading it again would wait on that store). */
typedef struct mp_out {
    FILE *f;
    size_t n;    /* bytes pending */
    size_t cap;
    char *buf;
} mp_out;

void mp_out_flush(mp_out *o);
void mp_out_write(mp_out *o, const void *p, size_t len);

/* Room for len more bytes (len <= cap); returns the offset they go at. */
static inline size_t mp_out_room(mp_out *o, size_t len) {
    size_t n = o->n;
    if (o->cap - n < len) {
        mp_out_flush(o);
        n = 0;
    }
    return n;
}

static inline void mp_out_putc(mp_out *o, char c) {
    size_t n = mp_out_room(o, 1);
    o->buf[n] = c;
    o->n = n + 1;
}

static inline void mp_out_puts(mp_out *o, const char *s) { mp_out_write(o, s, strlen(s)); }
/* A section rule of `width` columns with the title centred:
 * "------ Title ------" (no title: dashes only). Every text report's. */
void mp_out_rule(mp_out *o, const char *title, int width);
/* A name made safe for a terminal (control bytes as '?'), cut to `width`
 * bytes with "..." and padded to it, right-aligned when `right`. */
void mp_out_cell(mp_out *o, const char *s, int width, bool right);
/* One UTF-8 character at p (at most `left` bytes): its length, 0 when not
 * well formed; *cp its code point. */
int mp_utf8_char(const unsigned char *p, size_t left, unsigned *cp);
/* One CSV field (csv.c): RFC 4180 quoting (always when `quote`), invalid
 * UTF-8 bytes as U+FFFD; rows end in CRLF. */
void mp_csv_field(mp_out *o, const char *s, bool quote);
/* printf into the buffer (any length). */
void mp_out_printf(mp_out *o, const char *fmt, ...) MP_PRINTF(2, 3);

mp_status mp_tree_print(mp_out *o, const mp_module *mods, int n, int max_depth,
                        const mp_tree_style *st);

/* ---- formulas (formula.c; analyze/formula.h) ---- */
/* The name of free dim `var` of p's formulas. */
const char *mp_formula_var_name(const mp_profile *p, int var);
/* q as text: "85 M·batch·seq + 1.18 K·batch·seq²" (coefficients through
 * mp_fmt_count), or plain for CSV: "85000000*batch*seq+1180*batch*seq^2";
 * "?" (plain: nothing) without a formula. */
void mp_poly_write(mp_out *o, const mp_poly *q, const mp_profile *p, bool plain);
/* Why a node is left out: its kind as a stable id ("degree", "unknown",
 * "check", "coefficient") and as a sentence (into buf, n bytes). */
const char *mp_formula_skip_kind(int kind);
const char *mp_formula_skip_text(const mp_profile *p, const mp_formula_skip *sk, char *buf,
                                 size_t n);

/* A JSON string (escaped; invalid UTF-8 becomes U+FFFD), json.c. */
void mp_json_string(mp_out *o, const char *s);

/* mp_write_file_atomic and mp_write_stream: base/base.h. */


/* ---- writers ----
 * Options are already validated (mp_report_write). They return MP_OK or an
 * error set with mp_error; stream errors are checked by the caller. */
mp_status mp_report_text(const mp_profile *p, const mp_report_options *o, FILE *f);
mp_status mp_report_json(const mp_profile *p, const mp_report_options *o, FILE *f);
/* The GPU table with the source of each row (`modelprof plan --gpu list`), plan.c. */
mp_status mp_gpu_table_write(FILE *f);
/* HTML (html.c): the JSON above inside one self-contained page. */
mp_status mp_report_html(const mp_profile *p, const mp_report_options *o, FILE *f);
/* CSV (csv.c): one table (o->csv_table) of the JSON's figures, unformatted. */
mp_status mp_report_csv(const mp_profile *p, const mp_report_options *o, FILE *f);

/* The training profile (train/train.h): DeepSpeed's FlopsProfiler layout
 * (train.c) and its JSON (json.c). */
typedef struct mp_train mp_train;
mp_status mp_report_train_text(const mp_train *t, const mp_train_options *o, FILE *f);
mp_status mp_report_train_json(const mp_train *t, FILE *f);

/* The page around any JSON writer: json(ud, f) writes the JSON; kind
 * ("profile", "trace") tells report.js how to render it. */
typedef mp_status (*mp_html_json_fn)(const void *ud, FILE *f);
/* JSON text into a page's <script> block: every '<' as \u003c */
void mp_html_json_write(mp_out *o, const char *p, size_t n);
mp_status mp_report_html_page(FILE *f, const char *kind, mp_html_json_fn json, const void *ud);
/* The same, with more attributes on the data block (report.js reads them). */
mp_status mp_report_html_page_ex(FILE *f, const char *kind, const char *attrs, mp_html_json_fn json,
                                 const void *ud);

/* The FlopsProfiler report's options (mp_train_options, report/train.c):
 * their defaults, and the first versioned size. */
void mp_train_defaults(mp_train_options *o);
#define MP_TRAIN_OPTIONS_V1 MP_FIELD_END(mp_train_options, detailed)

#endif
