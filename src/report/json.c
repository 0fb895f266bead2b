/* The JSON report: one object, raw integers, every string escaped; the
 * layout is documented in docs/JSON.md. It always holds the whole profile:
 * --depth, --top, --no-detailed and show_ops shape the text report only. */
#include "report/jw.h"
#include "analyze/patterns.h"
#include "report/report.h"
#include "train/train.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* Bytes that go out as they are: printable ASCII but the quote and the
 * backslash (NUL is not plain: it ends the string). */
static const bool jw_plain[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

/* Does any of these 8 bytes need work: a control character, a quote, a
 * backslash or a non-ASCII byte? Exact per byte: the low 7 bits of each
 * byte are tested with additions that cannot carry into the next byte. */
#define JW_LOW7 0x7f7f7f7f7f7f7f7full
#define JW_HIGH 0x8080808080808080ull
static inline uint64_t jw_special8(uint64_t x) {
    uint64_t lo = x & JW_LOW7;
    uint64_t ctl = ~(lo + 0x6060606060606060ull);           /* lo < 0x20 */
    uint64_t quote = ~((lo ^ 0x2222222222222222ull) + JW_LOW7);
    uint64_t bslash = ~((lo ^ 0x5c5c5c5c5c5c5c5cull) + JW_LOW7);
    return (x | ctl | quote | bslash) & JW_HIGH;
}

/* Length of the plain run at the start of s[0..len): eight bytes a step,
 * then byte by byte in the block that holds the first special byte and in
 * the tail (so nothing past the terminating NUL is read). */
static size_t jw_plain_len(const unsigned char *s, size_t len) {
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        if (jw_special8(x)) break;
    }
    while (i < len && jw_plain[s[i]]) i++;
    return i;
}

/* The common case, a string that needs no escaping: it is tested and
 * copied into the buffer quoted, 8 bytes a step (the last step overlaps the
 * one before it rather than pass the string's end). False, with nothing
 * written, when some byte needs work. */
static bool jw_plain_copy(mp_out *out, const unsigned char *c, size_t len) {
    size_t n = mp_out_room(out, len + 2);
    char *o = out->buf + n;
    o[0] = '"';
    if (len >= 8) {
        uint64_t x;
        for (size_t i = 0; i < len - 8; i += 8) {
            memcpy(&x, c + i, 8);
            if (jw_special8(x)) return false;
            memcpy(o + 1 + i, &x, 8);
        }
        memcpy(&x, c + len - 8, 8);
        if (jw_special8(x)) return false;
        memcpy(o + 1 + len - 8, &x, 8);
    } else {
        for (size_t i = 0; i < len; i++) {
            if (!jw_plain[c[i]]) return false;
            o[1 + i] = (char)c[i];
        }
    }
    o[len + 1] = '"';
    out->n = n + len + 2;
    return true;
}

/* A JSON string: quotes, backslash and control characters escaped; valid
 * UTF-8 passes through; an invalid byte becomes U+FFFD so the output stays
 * valid JSON whatever the model holds. */
void mp_json_string(mp_out *out, const char *s) {
    const unsigned char *c = (const unsigned char *)(s ? s : "");
    size_t len = strlen((const char *)c);
    if (len + 2 <= out->cap && jw_plain_copy(out, c, len)) return;
    size_t run = jw_plain_len(c, len);
    const unsigned char *end = c + len;
    mp_out_putc(out, '"');
    for (;;) {
        /* a run of plain printable ASCII goes out in one copy */
        if (run) mp_out_write(out, c, run);
        c += run;
        if (c == end) break;
        unsigned char b = *c;
        if (b == '"' || b == '\\') {
            mp_out_putc(out, '\\');
            mp_out_putc(out, (char)b);
            c++;
        } else if (b < 0x20) {
            switch (b) {
            case '\n': mp_out_puts(out, "\\n"); break;
            case '\r': mp_out_puts(out, "\\r"); break;
            case '\t': mp_out_puts(out, "\\t"); break;
            case '\b': mp_out_puts(out, "\\b"); break;
            case '\f': mp_out_puts(out, "\\f"); break;
            default: {
                char u[8];
                snprintf(u, sizeof u, "\\u%04x", b);
                mp_out_puts(out, u);
                break;
            }
            }
            c++;
        } else if (b < 0x80) {
            mp_out_putc(out, (char)b);
            c++;
        } else {
            unsigned cp;
            int n = mp_utf8_char(c, (size_t)(end - c), &cp);
            if (n > 0) {
                mp_out_write(out, c, (size_t)n);
                c += n;
            } else {
                mp_out_puts(out, "\xef\xbf\xbd");
                c++;
            }
        }
        run = jw_plain_len(c, (size_t)(end - c));
    }
    mp_out_putc(out, '"');
}

/* ---- sections ---- */

static uint64_t js_count(int n) { return n > 0 ? (uint64_t)n : 0; }

/* A figure that may be unknown: null then (report.h, mp_fig_ops_unknown). */
#define js_kfig(w, k, v, unk)                               \
    do {                                                    \
        jw_kput(w, k);                                      \
        if (unk) mp_out_puts(&(w)->o, "null");              \
        else jw_digits(w, v);                               \
    } while (0)

/* A measured set's time: latency_s (median over the timed runs),
 * latency_min_s and achieved_flops_per_s (counted FLOPs / latency_s);
 * null when not measured (node timing off, zero time). */
static double js_peak; /* the run's peak FLOP/s while a measured report is written; 0 unknown */

static void js_lat(jw *w, double lat, double lat_min, uint64_t flops, bool flops_known) {
    jw_key(w, "latency_s");
    if (lat >= 0) jw_double(w, lat);
    else jw_null(w);
    jw_key(w, "latency_min_s");
    if (lat >= 0 && lat_min >= 0) jw_double(w, lat_min);
    else jw_null(w);
    jw_key(w, "achieved_flops_per_s");
    if (lat > 0 && flops_known) jw_double(w, (double)flops / lat);
    else jw_null(w);
    jw_key(w, "fraction_of_peak");
    if (lat > 0 && flops_known && js_peak > 0) jw_double(w, (double)flops / lat / js_peak);
    else jw_null(w);
}

/* A row of nodes of one op type (an `ops` entry, a module's): measured,
 * how many ran fused and its time. */
static void js_op_measured(jw *w, const mp_fig *fig) {
    jw_ku64(w, "fused", js_count(fig->fused));
    js_lat(w, fig->latency_s, fig->latency_min_s, fig->flops, !mp_fig_ops_unknown(fig));
}

/* The figures every set (module, op type) carries. */
static void js_fig(jw *w, const mp_fig *fig, bool measured) {
    jw_ku64(w, "params", fig->params);
    jw_ku64(w, "param_bytes", fig->param_bytes);
    bool ou = mp_fig_ops_unknown(fig), bu = mp_fig_bytes_unknown(fig);
    js_kfig(w, "macs", fig->macs, ou);
    js_kfig(w, "flops", fig->flops, ou);
    js_kfig(w, "bytes_read", fig->bytes_read, bu);
    js_kfig(w, "bytes_written", fig->bytes_written, bu);
    js_kfig(w, "act_bytes", fig->act_bytes, bu);
    jw_ku64(w, "nodes", js_count(fig->nodes));
    jw_ku64(w, "uncounted_nodes", js_count(fig->uncounted));
    jw_ku64(w, "unknown_nodes", js_count(fig->unknown));
    if (measured) js_lat(w, fig->latency_s, fig->latency_min_s, fig->flops, !ou);
}

static void js_model(jw *w, const mp_profile *p) {
    static const char *const src[] = {"none", "names", "functions", "metadata"};
    const mp_model *m = p->m;
    jw_key(w, "model");
    jw_open(w, '{');
    jw_kstr(w, "name", mp_model_name(p));
    jw_kstr(w, "path", m->path ? m->path : "");
    jw_kstr(w, "producer", m->producer ? m->producer : "");
    jw_kstr(w, "producer_version", m->producer_version ? m->producer_version : "");
    jw_ki64(w, "ir_version", m->ir_version);
    jw_key(w, "opsets");
    jw_open(w, '[');
    for (int i = 0; i < m->n_opsets; i++) {
        jw_open(w, '{');
        jw_kstr(w, "domain", m->opsets[i].domain ? m->opsets[i].domain : "");
        jw_ki64(w, "version", m->opsets[i].version);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_kstr(w, "graph", m->graph && m->graph->name ? m->graph->name : "");
    jw_kbool(w, "weightless", m->weightless);
    jw_key(w, "absent_weights");
    if (m->absent_weights) jw_str(w, m->absent_weights);
    else jw_null(w);
    int ms = m->module_source;
    jw_kstr(w, "module_source", ms >= 0 && ms < (int)MP_ARRAY_LEN(src) ? src[ms] : "none");
    jw_close(w, '}');
}

static void js_dims(jw *w, const mp_profile *p) {
    const mp_model *m = p->m;
    jw_key(w, "dims");
    jw_open(w, '{');
    for (int i = 1; i < m->n_syms; i++) {
        if (!m->syms[i].on_input || m->syms[i].value < 0) continue;
        jw_key_str(w, m->syms[i].name ? m->syms[i].name : "");
        jw_i64(w, m->syms[i].value);
    }
    jw_close(w, '}');
    jw_key(w, "unresolved_dims");
    jw_open(w, '[');
    for (int i = 0; i < p->n_unresolved; i++) {
        int s = p->unresolved[i];
        if (s > 0 && s < m->n_syms) jw_str(w, m->syms[s].name ? m->syms[s].name : "");
    }
    jw_close(w, ']');
}

static void js_total(jw *w, const mp_profile *p) {
    const mp_fig *t = &p->total;
    jw_key(w, "total");
    jw_open(w, '{');
    jw_ku64(w, "params", t->params);
    jw_ku64(w, "param_bytes", t->param_bytes);
    bool ou = mp_fig_ops_unknown(t), bu = mp_fig_bytes_unknown(t);
    js_kfig(w, "macs", t->macs, ou);
    js_kfig(w, "flops", t->flops, ou);
    js_kfig(w, "bwd_flops_estimate", mp_sat_mul(t->flops, 2), ou);
    js_kfig(w, "bytes_read", t->bytes_read, bu);
    js_kfig(w, "bytes_written", t->bytes_written, bu);
    js_kfig(w, "act_bytes", t->act_bytes, bu);
    js_kfig(w, "activation_peak_bytes", p->activation_peak_bytes, bu);
    if (ou || bu) { /* what was counted: lower bounds, as the text's "at least" */
        jw_key(w, "at_least");
        jw_open(w, '{');
        if (ou) {
            jw_ku64(w, "macs", t->macs);
            jw_ku64(w, "flops", t->flops);
            jw_ku64(w, "bwd_flops_estimate", mp_sat_mul(t->flops, 2));
        }
        if (bu) {
            jw_ku64(w, "bytes_read", t->bytes_read);
            jw_ku64(w, "bytes_written", t->bytes_written);
            jw_ku64(w, "act_bytes", t->act_bytes);
            jw_ku64(w, "activation_peak_bytes", p->activation_peak_bytes);
        }
        jw_close(w, '}');
    }
    jw_key(w, "activation_peak_node"); /* its place means nothing when sizes are missing */
    if (!bu && p->m->graph && p->peak_node >= 0 && p->peak_node < p->m->graph->n_nodes)
        jw_str(w, p->m->graph->nodes[p->peak_node].name ? p->m->graph->nodes[p->peak_node].name
                                                        : "");
    else
        jw_null(w);
    jw_ku64(w, "nodes", js_count(t->nodes));
    jw_ku64(w, "uncounted_nodes", js_count(t->uncounted));
    jw_ku64(w, "unknown_nodes", js_count(t->unknown));
    jw_kbool(w, "complete", t->unknown <= 0 && t->uncounted <= 0 && !p->overflow);
    jw_kbool(w, "overflow", p->overflow);
    jw_kbool(w, "measured", p->measured);
    if (p->measured) js_lat(w, t->latency_s, t->latency_min_s, t->flops, !ou);
    jw_close(w, '}');
}

static void js_by_dtype(jw *w, const char *key, const uint64_t *by) {
    jw_key_str(w, key);
    jw_open(w, '{');
    for (int d = 0; d < MP_DT_COUNT; d++) {
        if (!by[d]) continue;
        jw_key_str(w, mp_dtype_name(d));
        jw_u64(w, by[d]);
    }
    jw_close(w, '}');
}

static void js_ops(jw *w, const mp_profile *p) {
    jw_key(w, "ops");
    jw_open(w, '[');
    for (int i = 0; i < p->n_ops; i++) {
        const mp_opstat *os = &p->ops[i];
        jw_open(w, '{');
        jw_kstr(w, "op", os->op ? os->op : "");
        jw_kstr(w, "domain", os->domain ? os->domain : "");
        jw_ku64(w, "count", js_count(os->fig.nodes));
        bool ou = mp_fig_ops_unknown(&os->fig), bu = mp_fig_bytes_unknown(&os->fig);
        js_kfig(w, "macs", os->fig.macs, ou);
        js_kfig(w, "flops", os->fig.flops, ou);
        js_kfig(w, "bytes_read", os->fig.bytes_read, bu);
        js_kfig(w, "bytes_written", os->fig.bytes_written, bu);
        js_kfig(w, "act_bytes", os->fig.act_bytes, bu);
        jw_ku64(w, "params", os->fig.params);
        jw_ku64(w, "uncounted", js_count(os->fig.uncounted));
        jw_ku64(w, "unknown_nodes", js_count(os->fig.unknown));
        if (p->measured) js_op_measured(w, &os->fig);
        jw_close(w, '}');
    }
    jw_close(w, ']');

    jw_key(w, "uncounted");
    jw_open(w, '[');
    for (int i = 0; i < p->n_ops; i++) {
        const mp_opstat *os = &p->ops[i];
        if (os->fig.uncounted <= 0) continue;
        jw_open(w, '{');
        jw_kstr(w, "op", os->op ? os->op : "");
        jw_kstr(w, "domain", os->domain ? os->domain : "");
        jw_ku64(w, "count", (uint64_t)os->fig.uncounted);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

/* A module's split by operator type (docs/JSON.md, modules[].ops): its
 * rows add up to its figures. */
static void js_mod_ops(jw *w, const mp_profile *p, int module) {
    jw_key(w, "ops");
    jw_open(w, '[');
    for (int j = p->modops ? p->modop_at[module] : 0; p->modops && j < p->modop_at[module + 1]; j++) {
        const mp_modop *r = &p->modops[j];
        const mp_opstat *os = r->op >= 0 && r->op < p->n_ops ? &p->ops[r->op] : NULL;
        jw_open(w, '{');
        jw_kstr(w, "op", mp_modop_name(p, r));
        jw_kstr(w, "domain", os && os->domain ? os->domain : "");
        jw_ku64(w, "count", js_count(r->fig.nodes));
        jw_ku64(w, "params", r->fig.params);
        js_kfig(w, "macs", r->fig.macs, mp_fig_ops_unknown(&r->fig));
        js_kfig(w, "flops", r->fig.flops, mp_fig_ops_unknown(&r->fig));
        jw_ku64(w, "uncounted_nodes", js_count(r->fig.uncounted));
        jw_ku64(w, "unknown_nodes", js_count(r->fig.unknown));
        if (p->measured) js_op_measured(w, &r->fig);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

/* Modules in tree order (pre-order); "id" is the position in the array. */
typedef struct js_mod_ud {
    jw *w;
    int *id;     /* module index -> position */
    int next;
} js_mod_ud;

static bool js_mod_number(const mp_profile *p, int module, void *ud) {
    js_mod_ud *u = ud;
    u->id[module] = u->next++;
    return true;
}

static bool js_mod_visit(const mp_profile *p, int module, void *ud) {
    js_mod_ud *u = ud;
    jw *w = u->w;
    const mp_module *mod = &p->m->modules[module];
    jw_open(w, '{');
    jw_ki64(w, "id", u->id[module]);
    jw_kstr(w, "path", mod->path ? mod->path : "");
    jw_kstr(w, "name", mp_module_name(p, module));
    if (mod->cls && mod->cls[0]) jw_kstr(w, "class", mod->cls);
    if (mod->ignored) jw_kbool(w, "ignored", true);
    jw_ki64(w, "depth", mod->depth);
    jw_ki64(w, "parent", mod->parent >= 0 && mod->parent < p->m->n_modules
                             ? u->id[mod->parent] : -1);
    js_fig(w, &p->mods[module], p->measured);
    if (p->formulas && module < p->formulas->n_mods) {
        jw_key(w, "formulas");
        mp_formset_json(w, p, &p->formulas->mods[module]);
    }
    if (p->measured && p->mod_fused && p->mod_fused[module] > 0 && p->mod_fused[module] <= p->m->n_modules) {
        const char *hp = p->m->modules[p->mod_fused[module] - 1].path;
        jw_kstr(w, "fused_into", hp ? hp : "");
    }
    js_mod_ops(w, p, module);
    jw_close(w, '}');
    return true;
}

static mp_status js_modules(jw *w, const mp_profile *p) {
    jw_key(w, "modules");
    jw_open(w, '[');
    if (p->mods && p->m->n_modules > 0) {
        js_mod_ud u = {w, malloc(sizeof(int) * (size_t)p->m->n_modules), 0};
        if (!u.id) {
            jw_close(w, ']');
            return mp_error(MP_ERR_NOMEM, "out of memory while writing the report");
        }
        for (int i = 0; i < p->m->n_modules; i++) u.id[i] = -1;
        mp_module_walk(p, -1, js_mod_number, &u);
        mp_module_walk(p, -1, js_mod_visit, &u);
        free(u.id);
    }
    jw_close(w, ']');
    return MP_OK;
}

static void js_shape(jw *w, const mp_model *m, const mp_value *v) {
    jw_key(w, "shape");
    if (v->rank < 0 || (v->rank > 0 && !v->dims)) {
        jw_null(w);
        return;
    }
    jw_open(w, '[');
    for (int i = 0; i < v->rank; i++) {
        int64_t d = v->dims[i];
        if (MP_DIM_KNOWN(d)) {
            jw_i64(w, d);
        } else {
            int s = MP_DIM_SYM(d);
            if (s > 0 && s < m->n_syms && m->syms[s].name)
                jw_str(w, m->syms[s].name);
            else
                jw_null(w);
        }
    }
    jw_close(w, ']');
}

/* A node in a measured run: how it ran (alone, in a fused group headed
 * by another node, or folded at plan time) and its time. */
static void js_node_run(jw *w, const mp_profile *p, int i) {
    static const char *const state[] = {"run", "folded", "fused"};
    const mp_graph *g = p->m->graph;
    int st = p->node_state[i];
    jw_kstr(w, "run", st >= 0 && st <= 2 ? state[st] : "run");
    if (st == MP_NODE_FUSED) {
        int h = p->node_head[i];
        jw_kstr(w, "fused_into", h >= 0 && h < g->n_nodes && g->nodes[h].name ? g->nodes[h].name : "");
    }
    if (p->node_group[i]) jw_kstr(w, "group", p->node_group[i]);
    if (p->node_kernel && p->node_kernel[i]) jw_kstr(w, "kernel", p->node_kernel[i]);
    const mp_cost *k = &g->nodes[i].cost;
    js_lat(w, p->node_lat[i], p->node_lat_min[i], k->flops, !mp_cost_ops_unknown(k));
}

/* The measured run as a whole. */
static void js_run(jw *w, const mp_profile *p) {
    const mp_runinfo *r = &p->run;
    bool ort = r->source && !strcmp(r->source, "onnxruntime");
    jw_key(w, "run");
    jw_open(w, '{');
    jw_kstr(w, "source", r->source ? r->source : "modelprof");
    if (ort) { /* where the times come from, and how they were placed */
        const mp_importinfo *im = &r->imported;
        jw_key(w, "onnxruntime");
        jw_open(w, '{');
        jw_kstr(w, "profile", im->path ? im->path : "");
        jw_ki64(w, "runs", im->runs);
        jw_ki64(w, "events", im->events);
        jw_ki64(w, "exact", im->exact);
        jw_ki64(w, "renamed", im->renamed);
        jw_ki64(w, "by_order", im->by_order);
        jw_ki64(w, "unmatched", im->unmatched);
        jw_ki64(w, "nodes_by_graph", im->nodes_by_graph);
        jw_ki64(w, "nodes_not_run", im->nodes_not_run);
        jw_ki64(w, "events_outside_runs", im->outside_runs);
        jw_key(w, "dims_from_profile"); /* the inputs' dims read from the profile (no value given) */
        jw_open(w, '[');
        for (int i = 1; i < p->m->n_syms; i++)
            if (p->m->syms[i].on_input && p->m->syms[i].value >= 0 && p->m->syms[i].from_profile)
                jw_str(w, p->m->syms[i].name ? p->m->syms[i].name : "");
        jw_close(w, ']');
        jw_key(w, "node_time_s");
        jw_double(w, im->node_time_s);
        jw_close(w, '}');
        jw_key(w, "unmatched_s");
        jw_double(w, im->unmatched_s);
        jw_key(w, "unmatched");
        jw_open(w, '[');
        for (int i = 0; i < p->n_unplaced; i++) {
            jw_open(w, '{');
            jw_kstr(w, "name", p->unplaced[i].name);
            jw_kstr(w, "op", p->unplaced[i].op);
            jw_key(w, "latency_s");
            jw_double(w, p->unplaced[i].latency_s);
            jw_close(w, '}');
        }
        jw_close(w, ']');
    }
    jw_ki64(w, "iters", r->iters);
    jw_ki64(w, "warmup", r->warmup);
    jw_ki64(w, "threads", r->threads);
    jw_kbool(w, "fuse", r->fuse);
    jw_kbool(w, "node_timing", r->node_timing);
    jw_ki64(w, "batch", r->batch);
    jw_key(w, "latency");
    jw_open(w, '{');
    jw_key(w, "median_s");
    jw_double(w, r->lat_median_s);
    jw_key(w, "p90_s");
    jw_double(w, r->lat_p90_s);
    jw_key(w, "min_s");
    jw_double(w, r->lat_min_s);
    jw_close(w, '}');
    /* each pass's kernels summed (never above the pass): median, fastest */
    jw_key(w, "kernel_time");
    if (r->kernels_median_s >= 0) {
        jw_open(w, '{');
        jw_key(w, "median_s");
        jw_double(w, r->kernels_median_s);
        jw_key(w, "min_s");
        jw_double(w, r->kernels_min_s);
        jw_close(w, '}');
    } else {
        jw_null(w);
    }
    jw_key(w, "samples_per_s");
    if (r->lat_median_s > 0) jw_double(w, (double)r->batch / r->lat_median_s);
    else jw_null(w);
    bool known = !mp_fig_ops_unknown(&p->total);
    double fl = r->lat_median_s > 0 && known ? (double)p->total.flops / r->lat_median_s : -1;
    jw_key(w, "achieved_flops_per_s");
    if (fl >= 0) jw_double(w, fl);
    else jw_null(w);
    jw_key(w, "peak_flops_per_s");
    if (r->peak_flops_per_s > 0) jw_double(w, r->peak_flops_per_s);
    else jw_null(w);
    jw_key(w, "peak_source");
    if (r->peak_source) jw_str(w, r->peak_source);
    else jw_null(w);
    jw_key(w, "peak_method");
    if (r->peak_method) jw_str(w, r->peak_method);
    else jw_null(w);
    jw_key(w, "fraction_of_peak");
    if (fl >= 0 && r->peak_flops_per_s > 0) jw_double(w, fl / r->peak_flops_per_s);
    else jw_null(w);
    jw_ku64(w, "kernels_above_peak", (uint64_t)(r->kernels_above_peak > 0 ? r->kernels_above_peak : 0));
    /* the memory a run here took; an imported profile's: null */
    static const char *const mem_keys[] = {"peak_memory_bytes", "arena_bytes", "weight_bytes",
                                           "weight_copy_bytes", "input_bytes", "scratch_bytes",
                                           "dynamic_bytes"};
    const uint64_t mem[] = {r->peak_memory_bytes, r->arena_bytes, r->weight_bytes, r->weight_copy_bytes,
                            r->input_bytes, r->scratch_bytes, r->dynamic_bytes};
    for (size_t i = 0; i < MP_ARRAY_LEN(mem_keys); i++) {
        jw_key_str(w, mem_keys[i]);
        if (r->memory_known) jw_u64(w, mem[i]);
        else jw_null(w);
    }
    js_kfig(w, "static_activation_peak_bytes", p->activation_peak_bytes, mp_fig_bytes_unknown(&p->total));
    jw_key(w, "peak_rss_bytes");
    if (r->memory_known) jw_u64(w, r->peak_rss_bytes);
    else jw_null(w);
    jw_ki64(w, "kernels", r->steps);
    jw_ki64(w, "fused_nodes", r->fused);
    jw_ki64(w, "folded_nodes", r->folded);
    jw_ki64(w, "sized_by_run_nodes", r->run_shaped);
    jw_ki64(w, "portable_kernels", r->portable_steps);
    jw_key(w, "kernel_groups");
    jw_open(w, '[');
    for (int i = 0; i < p->n_groups; i++) {
        const mp_groupstat *gs = &p->groups[i];
        jw_open(w, '{');
        jw_kstr(w, "name", gs->name ? gs->name : "");
        jw_kbool(w, "fused", gs->fused);
        jw_kstr(w, "kernel", gs->kernel ? gs->kernel : "");
        jw_ki64(w, "count", gs->count);
        jw_key(w, "flops");
        if (gs->flops_unknown) jw_null(w);
        else jw_u64(w, gs->flops);
        js_lat(w, gs->latency_s, gs->latency_min_s, gs->flops, !gs->flops_unknown);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
}

static void js_nodes(jw *w, const mp_profile *p) {
    const mp_model *m = p->m;
    const mp_graph *g = m->graph;
    jw_key(w, "nodes");
    jw_open(w, '[');
    for (int i = 0; g && i < g->n_nodes; i++) {
        const mp_node *n = &g->nodes[i];
        const mp_cost *k = &n->cost;
        jw_open(w, '{');
        jw_kstr(w, "name", n->name ? n->name : "");
        jw_kstr(w, "op", n->op ? n->op : "");
        jw_kstr(w, "domain", n->domain ? n->domain : "");
        jw_key(w, "module");
        if (n->module >= 0 && n->module < m->n_modules && m->modules[n->module].path)
            jw_str(w, m->modules[n->module].path);
        else
            jw_null(w);
        jw_key(w, "inputs");
        jw_open(w, '[');
        for (int j = 0; j < n->n_in; j++) {
            int v = n->in[j];
            if (v >= 0 && v < g->n_values) jw_str(w, g->values[v].name ? g->values[v].name : "");
            else jw_null(w);
        }
        jw_close(w, ']');
        jw_key(w, "outputs");
        jw_open(w, '[');
        for (int j = 0; j < n->n_out; j++) {
            int v = n->out[j];
            if (v < 0 || v >= g->n_values) {
                jw_null(w);
                continue;
            }
            const mp_value *val = &g->values[v];
            jw_open(w, '{');
            jw_kstr(w, "name", val->name ? val->name : "");
            jw_key(w, "dtype");
            if (val->dtype > 0 && val->dtype < MP_DT_COUNT) jw_str(w, mp_dtype_name(val->dtype));
            else jw_null(w);
            js_shape(w, m, val);
            jw_close(w, '}');
        }
        jw_close(w, ']');
        bool ou = mp_cost_ops_unknown(k), bu = mp_cost_bytes_unknown(k);
        js_kfig(w, "macs", k->macs, ou);
        js_kfig(w, "flops", k->flops, ou);
        js_kfig(w, "bytes_read", k->bytes_read, bu);
        js_kfig(w, "bytes_written", k->bytes_written, bu);
        js_kfig(w, "act_bytes", k->act_bytes, bu);
        jw_ku64(w, "params", k->params);
        jw_ku64(w, "param_bytes", k->param_bytes);
        jw_key(w, "flags");
        jw_open(w, '[');
        for (int j = 0; j < mp_cost_flag_count; j++)
            if (k->flags & mp_cost_flag_names[j].bit) jw_str(w, mp_cost_flag_names[j].name);
        jw_close(w, ']');
        if (p->measured && p->node_state) js_node_run(w, p, i);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

/* The parameters counted by judgement (docs/COUNTING.md, "Folded and
 * tied parameters"), every one, each with the sentence the text gives. */
static void js_param_counting(jw *w, const mp_profile *p) {
    const mp_model *m = p->m;
    const mp_graph *g = m->graph;
    jw_key(w, "param_counting");
    jw_open(w, '{');
    jw_kbool(w, "upper_bound", p->params_bound);
    jw_ku64(w, "possible_copy_elements", p->params_maybe_copies);
    jw_kbool(w, "batchnorm_folded", p->bn_folded);
    jw_key(w, "batchnorm_folded_text");
    if (p->bn_folded) jw_str(w, mp_bn_folded_text);
    else jw_null(w);
    jw_key(w, "by_pytorch_shape");
    jw_open(w, '{');
    jw_ki64(w, "parameters", p->params_by_role_n);
    jw_ku64(w, "elements", p->params_by_role);
    jw_close(w, '}');
    jw_key(w, "notes");
    jw_open(w, '[');
    for (int i = 0; i < p->n_pnotes; i++) {
        const mp_param_note *n = &p->pnotes[i];
        const mp_value *val = &g->values[n->value];
        jw_open(w, '{');
        jw_kstr(w, "kind", mp_pnote_kind(n));
        jw_kstr(w, "tensor", val->name);
        jw_key(w, "shape");
        jw_open(w, '[');
        for (int d = 0; val->init && d < val->init->rank; d++) jw_i64(w, val->init->dims[d]);
        jw_close(w, ']');
        jw_kstr(w, "dtype", mp_dtype_name(val->init ? val->init->dtype : MP_DT_UNDEFINED));
        jw_ku64(w, "elements", n->elems);
        jw_ku64(w, "counted", n->counted);
        jw_key(w, "how");
        if (n->how) jw_str(w, n->how);
        else jw_null(w);
        jw_key(w, "parameters");
        jw_open(w, '[');
        if (n->source >= 0) jw_str(w, g->values[n->source].name);
        for (int k = 0; n->source < 0 && k < n->n_src && k < MP_PNOTE_SRC; k++) {
            const struct mp_sig_param *sp = &m->sig_params[n->src[k]];
            jw_str(w, sp->target ? sp->target : sp->name);
        }
        jw_close(w, ']');
        jw_ku64(w, "parameters_total", (uint64_t)(n->source >= 0 ? 1 : n->n_src));
        char buf[1024];
        jw_kstr(w, "text", mp_pnote_text(p, n, buf, sizeof buf));
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
}

/* ---- what the pattern layer recognised (analyze/patterns.h) ---- */

static void js_node_or_null(jw *w, const mp_graph *g, int node) {
    jw_opt_str(w, node >= 0 ? (g->nodes[node].name ? g->nodes[node].name : "") : NULL);
}

/* One row of the summary per (pattern, kind, form). */
static void js_pattern_kinds(jw *w, const mp_patterns *pp) {
    jw_key(w, "kinds");
    jw_open(w, '[');
    for (int pk = MP_PAT_NORM; pk < MP_PAT_KIND_COUNT; pk++) {
        int nk = pk == MP_PAT_NORM ? MP_NORM_COUNT : pk == MP_PAT_ACT ? MP_ACT_COUNT : 1;
        for (int k = 0; k < nk; k++)
            for (int f = 0; f < MP_FORM_COUNT; f++) {
                int count = 0;
                int n = pk == MP_PAT_NORM ? pp->n_norms : pk == MP_PAT_ACT ? pp->n_acts
                          : pk == MP_PAT_ROTARY ? pp->n_rotary : pp->n_attn;
                for (int i = 0; i < n; i++) {
                    int kind = pk == MP_PAT_NORM ? pp->norms[i].kind : pk == MP_PAT_ACT ? pp->acts[i].kind : 0;
                    int form = pk == MP_PAT_NORM ? pp->norms[i].form : pk == MP_PAT_ACT ? pp->acts[i].form
                               : pk == MP_PAT_ROTARY ? pp->rotary[i].form : pp->attn[i].form;
                    if (kind == k && form == f) count++;
                }
                if (!count) continue;
                jw_open(w, '{');
                jw_kstr(w, "pattern", mp_pat_kind_name(pk));
                jw_kstr(w, "kind", pk == MP_PAT_NORM ? mp_norm_kind_name(k) : pk == MP_PAT_ACT ? mp_act_kind_name(k)
                                                                             : mp_pat_kind_name(pk));
                jw_kstr(w, "form", mp_pat_form_name(f));
                jw_ku64(w, "count", (uint64_t)count);
                jw_close(w, '}');
            }
    }
    jw_close(w, ']');
}

static void js_block(jw *w, const mp_model *m, const mp_patterns *pp, const mp_pblock *b) {
    const mp_graph *g = m->graph;
    jw_open(w, '{');
    jw_key(w, "module");
    jw_opt_str(w, b->module >= 0 ? m->modules[b->module].path : NULL);
    jw_key(w, "heads");
    jw_opt_i64(w, b->heads);
    jw_key(w, "kv_heads");
    jw_opt_i64(w, b->kv_heads);
    jw_key(w, "head_dim");
    jw_opt_i64(w, b->head_dim);
    jw_key(w, "hidden");
    jw_opt_i64(w, b->hidden);
    jw_key(w, "ffn");
    jw_opt_i64(w, b->ffn);
    const mp_pattn *a = b->attn >= 0 ? &pp->attn[b->attn] : NULL;
    jw_key(w, "attention");
    if (a) {
        jw_open(w, '{');
        jw_kstr(w, "form", mp_pat_form_name(a->form));
        jw_kstr(w, "mask", mp_mask_kind_name(a->mask));
        jw_kbool(w, "causal", a->causal);
        jw_key(w, "scale");
        if (a->scale > 0) jw_double(w, a->scale);
        else jw_null(w);
        jw_kbool(w, "guard", a->guard);
        jw_key(w, "softcap");
        if (a->softcap > 0) jw_double(w, a->softcap);
        else jw_null(w);
        jw_key(w, "rotary_dim");
        jw_opt_i64(w, a->rotary_q >= 0 ? pp->rotary[a->rotary_q].rot_dim : -1);
        jw_key(w, "node");
        js_node_or_null(w, g, a->op >= 0 ? a->op : a->qk);
        jw_close(w, '}');
    } else {
        jw_null(w);
    }
    jw_key(w, "mlp");
    jw_opt_str(w, b->mlp_kind >= 0 ? mp_act_kind_name(b->mlp_kind) : NULL);
    jw_kbool(w, "parallel", b->parallel);
    jw_key(w, "weights");
    jw_open(w, '{');
    for (int r = 0; r < MP_WROLE_COUNT; r++)
        if (b->w[r].node >= 0) {
            jw_key_str(w, mp_wrole_name(r));
            jw_str(w, g->nodes[b->w[r].node].name ? g->nodes[b->w[r].node].name : "");
        }
    jw_close(w, '}');
    jw_key(w, "norms");
    jw_open(w, '{');
    for (int r = 0; r < MP_NROLE_COUNT; r++)
        if (b->norm[r] >= 0) {
            const mp_pnorm *n = &pp->norms[b->norm[r]];
            jw_key_str(w, mp_nrole_name(r));
            jw_str(w, mp_norm_kind_name(n->kind));
        }
    jw_close(w, '}');
    jw_close(w, '}');
}

static void js_patterns(jw *w, const mp_profile *p) {
    const mp_model *m = p->m;
    const mp_patterns *pp = mp_patterns_of(m->graph);
    jw_key(w, "patterns");
    if (!pp) {
        mp_error_clear(); /* out of memory: the report goes on without them */
        jw_null(w);
        return;
    }
    const mp_graph *g = m->graph;
    jw_open(w, '{');
    jw_key(w, "heads");
    jw_opt_i64(w, pp->heads);
    jw_key(w, "kv_heads");
    jw_opt_i64(w, pp->kv_heads);
    jw_key(w, "head_dim");
    jw_opt_i64(w, pp->head_dim);
    int unk;
    uint64_t kv = mp_patterns_kv_elems_per_token(pp, &unk);
    jw_key(w, "kv_elements_per_token");
    if (unk || !pp->n_attn) jw_null(w);
    else jw_u64(w, kv);
    jw_key(w, "vocab");
    jw_opt_i64(w, pp->vocab);
    jw_key(w, "hidden");
    jw_opt_i64(w, pp->hidden);
    jw_key(w, "embedding");
    js_node_or_null(w, g, pp->embed);
    jw_key(w, "lm_head");
    js_node_or_null(w, g, pp->lm_head);
    jw_kbool(w, "tied", pp->lm_head >= 0 && pp->tied);
    js_pattern_kinds(w, pp);
    jw_key(w, "blocks");
    jw_open(w, '[');
    for (int i = 0; i < pp->n_blocks; i++) js_block(w, m, pp, &pp->blocks[i]);
    jw_close(w, ']');
    mp_moe_summary moe;
    jw_key(w, "moe");
    if (mp_moe_routing(g, NULL, 0, &moe) > 0) {
        jw_open(w, '{');
        jw_key(w, "routers"); jw_i64(w, moe.routers);
        jw_key(w, "experts"); jw_i64(w, moe.experts);
        jw_key(w, "top_k"); jw_i64(w, moe.top_k);
        jw_key(w, "tokens"); jw_i64(w, moe.tokens);
        jw_close(w, '}');
    } else {
        jw_null(w);
    }
    jw_key(w, "not_recognised");
    jw_open(w, '[');
    for (int i = 0; i < pp->n_miss; i++) {
        jw_open(w, '{');
        jw_kstr(w, "node", g->nodes[pp->miss[i].node].name ? g->nodes[pp->miss[i].node].name : "");
        jw_kstr(w, "pattern", mp_pat_kind_name(pp->miss[i].kind));
        jw_kstr(w, "why", pp->miss[i].why);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
}

mp_status mp_report_json(const mp_profile *p, const mp_report_options *o, FILE *f) {
    const mp_model *m = p->m;
    jw *w = jw_begin(f);
    if (!w) return MP_ERR_NOMEM;
    js_peak = p->measured ? p->run.peak_flops_per_s : 0;
    jw_open(w, '{');
    jw_kstr(w, "modelprof_version", MP_VERSION_STRING);
    /* the profile's layout (docs/schema/profile.schema.json): 2 since an
     * unknown figure is null */
    jw_ki64(w, "schema_version", MP_PROFILE_SCHEMA_VERSION);
    js_model(w, p);
    js_dims(w, p);
    js_total(w, p);
    if (p->formulas) {
        jw_key(w, "formulas");
        mp_formulas_json(w, p);
    }
    if (p->measured) js_run(w, p);
    js_by_dtype(w, "params_by_dtype", p->params_by_dtype);
    js_by_dtype(w, "param_bytes_by_dtype", p->param_bytes_by_dtype);
    jw_key(w, "buffers");
    jw_open(w, '{');
    jw_ku64(w, "tensors", p->buffers);
    jw_ku64(w, "elements", p->buffer_elems);
    jw_ku64(w, "bytes", p->buffer_bytes);
    jw_close(w, '}');
    js_param_counting(w, p);
    js_ops(w, p);
    js_patterns(w, p);
    mp_status st = js_modules(w, p);
    js_nodes(w, p);
    jw_key(w, "warnings");
    jw_open(w, '[');
    for (int i = 0; i < m->n_warnings; i++) jw_str(w, m->warnings[i] ? m->warnings[i] : "");
    jw_close(w, ']');
    jw_close(w, '}');
    jw_end(w);
    return st;
}

/* ---- the training profile (train/train.h; docs/JSON.md "Training
 * profile") ---- */
mp_status mp_report_train_json(const mp_train *t, FILE *f) {
    jw *w = jw_begin(f);
    if (!w) return MP_ERR_NOMEM;
    jw_open(w, '{');
    jw_kstr(w, "modelprof_version", MP_VERSION_STRING);
    jw_kstr(w, "trace", t->trace_path ? t->trace_path : "");
    jw_key(w, "model");
    if (t->model_path) jw_str(w, t->model_path);
    else jw_null(w);
    jw_ki64(w, "input_shapes", t->n_shapes);
    jw_kstr(w, "module_time", t->cpu_time ? "cpu" : "device");
    jw_ki64(w, "steps", t->n_steps);
    jw_kbool(w, "profiler_steps", t->profiler_steps);
    jw_ki64(w, "optimizer_steps", t->opt_steps);
    jw_kdouble(w, "wall_s", t->wall_s);
    jw_kdouble(w, "optimizer_s", t->optimizer_s);
    jw_key(w, "clock");
    if (t->clock.before_calls > 0 || t->clock.profiled_calls > 0) {
        const mp_train_clock *k = &t->clock;
        jw_open(w, '{');
        jw_ki64(w, "before_calls", k->before_calls);
        jw_kdouble(w, "before_iter_s", k->before_iter_s);
        jw_kdouble(w, "before_fwd_s", k->before_fwd_s);
        jw_ki64(w, "profiled_calls", k->profiled_calls);
        jw_kdouble(w, "profiled_iter_s", k->profiled_iter_s);
        jw_kdouble(w, "profiled_fwd_s", k->profiled_fwd_s);
        jw_close(w, '}');
    } else {
        jw_null(w);
    }
    jw_key(w, "overhead");
    if (t->overhead.known) {
        jw_open(w, '{');
        jw_kdouble(w, "op_record_s", t->overhead.op_s);
        jw_kdouble(w, "range_s", t->overhead.range_s);
        jw_ki64(w, "op_records", t->overhead.ops);
        jw_ki64(w, "ranges", t->overhead.ranges);
        jw_kdouble(w, "total_s", t->overhead.total_s);
        jw_close(w, '}');
    } else {
        jw_null(w);
    }
    jw_key(w, "modules");
    jw_open(w, '[');
    for (int i = 0; i < t->n; i++) {
        const mp_train_row *r = &t->rows[i];
        jw_open(w, '{');
        jw_kstr(w, "name", r->name);
        jw_kstr(w, "class", r->cls);
        jw_ki64(w, "depth", t->mods[i].depth);
        jw_ki64(w, "parent", t->mods[i].parent);
        jw_ki64(w, "calls", r->calls);
        jw_kdouble(w, "fwd_s", r->fwd_s);
        jw_kdouble(w, "bwd_s", r->bwd_s);
        jw_ku64(w, "params", r->params);
        jw_ku64(w, "macs", r->macs);
        jw_ku64(w, "flops", r->flops);
        jw_kbool(w, "in_trace", r->in_trace);
        jw_kbool(w, "in_static", r->in_static);
        jw_ki64(w, "export_calls", r->export_calls);
        jw_kbool(w, "container", r->container);
        jw_kbool(w, "ignored", r->ignored);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
    jw_end(w);
    return MP_OK;
}
