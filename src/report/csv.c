/* CSV: one table per file (nodes, modules, ops or module_ops), RFC 4180 (CRLF line
 * ends, fields with a comma, quote, CR or LF quoted, quotes doubled), the
 * JSON's field names as the header and its figures unformatted (integers in
 * full, reals as the JSON writes them, an absent figure an empty field). */
#include "report/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct cw {
    mp_out o;
    bool first; /* no comma before the next field */
} cw;

static void cw_sep(cw *w) {
    if (!w->first) mp_out_putc(&w->o, ',');
    w->first = false;
}

static void cw_end(cw *w) {
    mp_out_write(&w->o, "\r\n", 2);
    w->first = true;
}

/* A CSV field (every CSV table's, memory's too): quoted when it holds a
 * comma, quote or line end, or when `quote` (RFC 4180); valid UTF-8 as it
 * is, an invalid byte as U+FFFD, as the JSON writes it. */
void mp_csv_field(mp_out *o, const char *s, bool quote) {
    if (!s) return;
    quote = quote || s[strcspn(s, ",\"\r\n")] != 0;
    if (quote) mp_out_putc(o, '"');
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s);
    while (left) {
        unsigned cp;
        int n = *p < 0x80 ? 1 : mp_utf8_char(p, left, &cp);
        if (n == 0) {
            mp_out_puts(o, "\xef\xbf\xbd");
            n = 1;
        } else {
            if (*p == '"') mp_out_putc(o, '"');
            mp_out_write(o, p, (size_t)n);
        }
        p += n;
        left -= (size_t)n;
    }
    if (quote) mp_out_putc(o, '"');
}

static void cw_str(cw *w, const char *s) {
    cw_sep(w);
    mp_csv_field(&w->o, s, false);
}

static void cw_u64(cw *w, uint64_t v) {
    char d[MP_DEC_MAX];
    cw_sep(w);
    mp_out_write(&w->o, d, mp_fmt_dec(d, v));
}

/* A figure that may be unknown (report.h, mp_fig_ops_unknown): an empty
 * field then, as for any absent figure. */
static void cw_fig_u64(cw *w, uint64_t v, bool unknown) {
    if (unknown) cw_sep(w);
    else cw_u64(w, v);
}

static void cw_i64(cw *w, int64_t v) {
    if (v < 0) {
        cw_sep(w);
        mp_out_putc(&w->o, '-');
        char d[MP_DEC_MAX];
        mp_out_write(&w->o, d, mp_fmt_dec(d, (uint64_t)0 - (uint64_t)v));
        return;
    }
    cw_u64(w, (uint64_t)v);
}

/* As the JSON writer: %.9g, nothing when not finite or absent. */
static void cw_double(cw *w, double v, bool present) {
    cw_sep(w);
    if (!present || !isfinite(v)) return;
    char d[32];
    snprintf(d, sizeof d, "%.9g", v);
    mp_out_puts(&w->o, d);
}

static void cw_header(cw *w, const char *const *cols, int n) {
    for (int i = 0; i < n; i++) cw_str(w, cols[i]);
}

static uint64_t cw_count(int n) { return n > 0 ? (uint64_t)n : 0; }

/* The measured columns, as js_lat in json.c. */
static const char *const LAT_COLS[] = {"latency_s", "latency_min_s", "achieved_flops_per_s",
                                       "fraction_of_peak"};

static void cw_lat(cw *w, double lat, double lat_min, uint64_t flops, bool known, double peak) {
    cw_double(w, lat, lat >= 0);
    cw_double(w, lat_min, lat >= 0 && lat_min >= 0);
    cw_double(w, lat > 0 ? (double)flops / lat : 0, lat > 0 && known);
    cw_double(w, lat > 0 && peak > 0 ? (double)flops / lat / peak : 0, lat > 0 && known && peak > 0);
}

static const char *const FIG_COLS[] = {"params", "param_bytes", "macs", "flops", "bytes_read",
                                       "bytes_written", "act_bytes", "nodes", "uncounted_nodes",
                                       "unknown_nodes"};

static void cw_fig(cw *w, const mp_fig *f) {
    cw_u64(w, f->params);
    cw_u64(w, f->param_bytes);
    bool ou = mp_fig_ops_unknown(f), bu = mp_fig_bytes_unknown(f);
    cw_fig_u64(w, f->macs, ou);
    cw_fig_u64(w, f->flops, ou);
    cw_fig_u64(w, f->bytes_read, bu);
    cw_fig_u64(w, f->bytes_written, bu);
    cw_fig_u64(w, f->act_bytes, bu);
    cw_u64(w, cw_count(f->nodes));
    cw_u64(w, cw_count(f->uncounted));
    cw_u64(w, cw_count(f->unknown));
}

#define NCOLS(a) ((int)(sizeof(a) / sizeof(a)[0]))

static void csv_ops(cw *w, const mp_profile *p, double peak) {
    static const char *const cols[] = {"op", "domain", "count", "macs", "flops", "bytes_read",
                                       "bytes_written", "act_bytes", "params", "uncounted",
                                       "unknown_nodes"};
    cw_header(w, cols, NCOLS(cols));
    if (p->measured) cw_header(w, LAT_COLS, NCOLS(LAT_COLS));
    cw_end(w);
    for (int i = 0; i < p->n_ops; i++) {
        const mp_opstat *os = &p->ops[i];
        cw_str(w, os->op ? os->op : "");
        cw_str(w, os->domain ? os->domain : "");
        cw_u64(w, cw_count(os->fig.nodes));
        bool ou = mp_fig_ops_unknown(&os->fig), bu = mp_fig_bytes_unknown(&os->fig);
        cw_fig_u64(w, os->fig.macs, ou);
        cw_fig_u64(w, os->fig.flops, ou);
        cw_fig_u64(w, os->fig.bytes_read, bu);
        cw_fig_u64(w, os->fig.bytes_written, bu);
        cw_fig_u64(w, os->fig.act_bytes, bu);
        cw_u64(w, os->fig.params);
        cw_u64(w, cw_count(os->fig.uncounted));
        cw_u64(w, cw_count(os->fig.unknown));
        if (p->measured)
            cw_lat(w, os->fig.latency_s, os->fig.latency_min_s, os->fig.flops, !ou, peak);
        cw_end(w);
    }
}

/* Modules in the JSON's order (pre-order; "id" is the row's position). */
typedef struct cw_mod {
    cw *w;
    int *id;
    int next;
    double peak;
} cw_mod;

static bool cw_mod_number(const mp_profile *p, int module, void *ud) {
    cw_mod *u = ud;
    u->id[module] = u->next++;
    return true;
}

/* Rows of the modules in the JSON's order, each module numbered first. */
static mp_status cw_modules_walk(cw *w, const mp_profile *p, double peak, mp_module_visit row) {
    if (!p->mods || p->m->n_modules <= 0) return MP_OK;
    cw_mod u = {w, malloc(sizeof(int) * (size_t)p->m->n_modules), 0, peak};
    if (!u.id) return mp_error(MP_ERR_NOMEM, "out of memory while writing the CSV report");
    for (int i = 0; i < p->m->n_modules; i++) u.id[i] = -1;
    mp_module_walk(p, -1, cw_mod_number, &u);
    mp_module_walk(p, -1, row, &u);
    free(u.id);
    return MP_OK;
}

/* A formula as plain text ("85000000*batch*seq+1180*batch*seq^2"; empty
 * without one), quoted as any field (dim names come from the model). */
static void cw_poly(cw *w, const mp_profile *p, const mp_poly *q) {
    char *text = NULL, local[256];
    size_t len = 0;
    FILE *ms = open_memstream(&text, &len);
    if (!ms) {
        cw_str(w, NULL);
        return;
    }
    mp_out o = {ms, 0, sizeof local, local};
    mp_poly_write(&o, q, p, true);
    mp_out_flush(&o);
    fclose(ms);
    cw_str(w, text ? text : "");
    free(text);
}

static bool cw_mod_row(const mp_profile *p, int module, void *ud) {
    cw_mod *u = ud;
    cw *w = u->w;
    const mp_module *mod = &p->m->modules[module];
    const mp_fig *f = &p->mods[module];
    cw_i64(w, u->id[module]);
    cw_str(w, mod->path ? mod->path : "");
    cw_str(w, mp_module_name(p, module));
    cw_str(w, mod->cls ? mod->cls : "");
    cw_i64(w, mod->depth);
    cw_i64(w, mod->parent >= 0 && mod->parent < p->m->n_modules ? u->id[mod->parent] : -1);
    cw_fig(w, f);
    if (p->measured) cw_lat(w, f->latency_s, f->latency_min_s, f->flops, !mp_fig_ops_unknown(f), u->peak);
    if (p->formulas && module < p->formulas->n_mods) {
        const mp_formset *fs = &p->formulas->mods[module];
        for (int i = 0; i < MP_FF_COUNT; i++) cw_poly(w, p, &fs->f[i]);
    }
    cw_end(w);
    return true;
}

static mp_status csv_modules(cw *w, const mp_profile *p, double peak) {
    static const char *const cols[] = {"id", "path", "name", "class", "depth", "parent"};
    cw_header(w, cols, NCOLS(cols));
    cw_header(w, FIG_COLS, NCOLS(FIG_COLS));
    if (p->measured) cw_header(w, LAT_COLS, NCOLS(LAT_COLS));
    if (p->formulas) {
        char col[64];
        for (int i = 0; i < MP_FF_COUNT; i++) {
            snprintf(col, sizeof col, "%s_formula", mp_formula_field_key[i]);
            cw_str(w, col);
        }
    }
    cw_end(w);
    return cw_modules_walk(w, p, peak, cw_mod_row);
}

/* One row per module and operator type (the JSON's modules[].ops), the
 * modules in the JSON's order: "module" is the module's id there. */
static bool cw_modop_rows(const mp_profile *p, int module, void *ud) {
    cw_mod *u = ud;
    cw *w = u->w;
    const mp_module *mod = &p->m->modules[module];
    for (int j = p->modops ? p->modop_at[module] : 0; p->modops && j < p->modop_at[module + 1]; j++) {
        const mp_modop *r = &p->modops[j];
        const mp_opstat *os = r->op >= 0 && r->op < p->n_ops ? &p->ops[r->op] : NULL;
        cw_i64(w, u->id[module]);
        cw_str(w, mod->path ? mod->path : "");
        cw_str(w, mp_modop_name(p, r));
        cw_str(w, os && os->domain ? os->domain : "");
        cw_u64(w, cw_count(r->fig.nodes));
        cw_u64(w, r->fig.params);
        cw_fig_u64(w, r->fig.macs, mp_fig_ops_unknown(&r->fig));
        cw_fig_u64(w, r->fig.flops, mp_fig_ops_unknown(&r->fig));
        cw_u64(w, cw_count(r->fig.uncounted));
        cw_u64(w, cw_count(r->fig.unknown));
        if (p->measured) {
            cw_u64(w, cw_count(r->fig.fused));
            cw_lat(w, r->fig.latency_s, r->fig.latency_min_s, r->fig.flops, !mp_fig_ops_unknown(&r->fig), u->peak);
        }
        cw_end(w);
    }
    return true;
}

static mp_status csv_module_ops(cw *w, const mp_profile *p, double peak) {
    static const char *const cols[] = {"module", "path", "op", "domain", "count", "params", "macs",
                                       "flops", "uncounted_nodes", "unknown_nodes"};
    cw_header(w, cols, NCOLS(cols));
    if (p->measured) {
        cw_str(w, "fused");
        cw_header(w, LAT_COLS, NCOLS(LAT_COLS));
    }
    cw_end(w);
    return cw_modules_walk(w, p, peak, cw_modop_rows);
}

static void csv_nodes(cw *w, const mp_profile *p, double peak) {
    static const char *const cols[] = {"name", "op", "domain", "module", "macs", "flops",
                                       "bytes_read", "bytes_written", "act_bytes", "params",
                                       "param_bytes", "flags"};
    static const char *const run_cols[] = {"run", "fused_into", "group", "kernel"};
    static const char *const state[] = {"run", "folded", "fused"};
    const mp_model *m = p->m;
    const mp_graph *g = m->graph;
    bool run = p->measured && p->node_state;
    cw_header(w, cols, NCOLS(cols));
    if (run) {
        cw_header(w, run_cols, NCOLS(run_cols));
        cw_header(w, LAT_COLS, NCOLS(LAT_COLS));
    }
    cw_end(w);
    for (int i = 0; g && i < g->n_nodes; i++) {
        const mp_node *n = &g->nodes[i];
        const mp_cost *k = &n->cost;
        cw_str(w, n->name ? n->name : "");
        cw_str(w, n->op ? n->op : "");
        cw_str(w, n->domain ? n->domain : "");
        cw_str(w, n->module >= 0 && n->module < m->n_modules ? m->modules[n->module].path : NULL);
        bool ou = mp_cost_ops_unknown(k), bu = mp_cost_bytes_unknown(k);
        cw_fig_u64(w, k->macs, ou);
        cw_fig_u64(w, k->flops, ou);
        cw_fig_u64(w, k->bytes_read, bu);
        cw_fig_u64(w, k->bytes_written, bu);
        cw_fig_u64(w, k->act_bytes, bu);
        cw_u64(w, k->params);
        cw_u64(w, k->param_bytes);
        char fl[96] = "";
        for (int j = 0; j < mp_cost_flag_count; j++) {
            if (!(k->flags & mp_cost_flag_names[j].bit)) continue;
            if (fl[0]) strcat(fl, ";");
            strcat(fl, mp_cost_flag_names[j].name);
        }
        cw_str(w, fl);
        if (run) {
            int st = p->node_state[i];
            cw_str(w, st >= 0 && st <= 2 ? state[st] : "run");
            int h = st == MP_NODE_FUSED ? p->node_head[i] : -1;
            cw_str(w, h >= 0 && h < g->n_nodes ? g->nodes[h].name : NULL);
            cw_str(w, p->node_group[i]);
            cw_str(w, p->node_kernel ? p->node_kernel[i] : NULL);
            cw_lat(w, p->node_lat[i], p->node_lat_min[i], k->flops, !ou, peak);
        }
        cw_end(w);
    }
}

mp_status mp_report_csv(const mp_profile *p, const mp_report_options *o, FILE *f) {
    char buf[1 << 16];
    cw w = {{f, 0, sizeof buf, buf}, true};
    double peak = p->measured ? p->run.peak_flops_per_s : 0;
    mp_status st = MP_OK;
    switch (o->csv_table) {
    case MP_CSV_NODES: csv_nodes(&w, p, peak); break;
    case MP_CSV_MODULES: st = csv_modules(&w, p, peak); break;
    case MP_CSV_OPS: csv_ops(&w, p, peak); break;
    case MP_CSV_MODULE_OPS: st = csv_module_ops(&w, p, peak); break;
    }
    mp_out_flush(&w.o);
    return st;
}

/* ---- the trace analysis' tables: steps, kernels ---- */
#include "trace/trace.h"

/* Nanoseconds as seconds, exactly: "0.000123456", "2", "-0.5". */
static void cw_ns(cw *w, int64_t ns) {
    cw_sep(w);
    char b[MP_DEC_MAX + 16];
    size_t n = 0;
    uint64_t v = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    if (ns < 0) b[n++] = '-';
    n += mp_fmt_dec(b + n, v / 1000000000u);
    uint64_t r = v % 1000000000u;
    if (r) {
        b[n++] = '.';
        for (uint64_t d = 100000000u; d; d /= 10) b[n++] = (char)('0' + r / d % 10);
        while (b[n - 1] == '0') n--;
    }
    mp_out_write(&w->o, b, n);
}

static void cw_opt_i64(cw *w, int64_t v) {
    if (v < 0) cw_sep(w);
    else cw_i64(w, v);
}

static void csv_steps(cw *w, const mp_trace *const *t, int n) {
    cw_str(w, "rank");
    static const char *const a[] = {"name", "start_s", "wall_s", "device_busy_s", "utilization", "idle_s"};
    cw_header(w, a, NCOLS(a));
    char col[64];
    for (int c = 0; c < MP_TI_COUNT; c++) {
        snprintf(col, sizeof col, "idle_%s_s", mp_tidle_names[c]);
        cw_str(w, col);
    }
    for (int c = 0; c < MP_TC_COUNT; c++) {
        snprintf(col, sizeof col, "device_%s_s", mp_tcat_names[c]);
        cw_str(w, col);
    }
    static const char *const b[] = {"optimizer_s", "optimizer_device_s", "data_loader_cpu_s", "flops",
                                    "achieved_flops_per_s", "start_allocated_bytes",
                                    "peak_allocated_bytes", "end_allocated_bytes",
                                    "communication_s", "collective_calls"};
    cw_header(w, b, NCOLS(b));
    cw_end(w);
    for (int r = 0; r < n; r++) {
        for (int i = 0; i < t[r]->n_steps; i++) {
            const mp_tstep *s = &t[r]->steps[i];
            cw_i64(w, t[r]->raw.rank >= 0 ? t[r]->raw.rank : r);
            cw_str(w, s->name);
            cw_ns(w, s->ts);
            cw_ns(w, s->wall);
            cw_ns(w, s->busy);
            cw_double(w, s->wall > 0 ? (double)s->busy / (double)s->wall : 0, s->wall > 0);
            cw_ns(w, s->wall > s->busy ? s->wall - s->busy : 0);
            for (int c = 0; c < MP_TI_COUNT; c++) cw_ns(w, s->idle[c]);
            for (int c = 0; c < MP_TC_COUNT; c++) cw_ns(w, s->cat[c]);
            cw_ns(w, s->optimizer);
            cw_ns(w, s->optimizer_dev);
            cw_ns(w, s->loader_wall);
            bool fl = !t[r]->no_shapes;   /* FLOPs unknown without shapes: empty, not 0 */
            if (fl) cw_u64(w, s->flops);
            else cw_sep(w);
            cw_double(w, s->wall > 0 ? (double)s->flops / ((double)s->wall * 1e-9) : 0, fl && s->wall > 0);
            cw_opt_i64(w, s->mem_start);
            cw_opt_i64(w, s->mem_peak);
            cw_opt_i64(w, s->mem_end);
            cw_ns(w, s->comm);
            cw_i64(w, s->n_calls);
            cw_end(w);
        }
    }
}

static void csv_kernels(cw *w, const mp_trace *const *t, int n) {
    static const char *const a[] = {"rank", "name", "short_name", "kind", "category", "count",
                                    "total_s", "mean_s", "fraction", "operator"};
    cw_header(w, a, NCOLS(a));
    cw_end(w);
    for (int r = 0; r < n; r++) {
        for (int i = 0; i < t[r]->n_kernels; i++) {
            const mp_tkernel *k = &t[r]->kernels[i];
            cw_i64(w, t[r]->raw.rank >= 0 ? t[r]->raw.rank : r);
            cw_str(w, k->name);
            cw_str(w, k->short_name);
            cw_str(w, k->kind == MP_TD_KERNEL ? "kernel" : k->kind == MP_TD_MEMCPY ? "memcpy" : "memset");
            cw_str(w, k->cat < MP_TC_COUNT ? mp_tcat_names[k->cat] : "");
            cw_i64(w, k->count);
            cw_ns(w, k->total);
            cw_ns(w, k->count ? (k->total + k->count / 2) / k->count : 0);   /* rounded, as the JSON's mean */
            cw_double(w, t[r]->kernel_total > 0 ? (double)k->total / (double)t[r]->kernel_total : 0,
                      t[r]->kernel_total > 0);
            cw_str(w, k->op);
            cw_end(w);
        }
    }
}

mp_status mp_trace_report_csv(const mp_trace *const *t, int n, const char *table, FILE *f) {
    bool steps = table && strcmp(table, "steps") == 0;
    if (!steps && !(table && strcmp(table, "kernels") == 0))
        return mp_error(MP_ERR_USAGE, "--csv-table '%s': a trace has the tables steps and kernels",
                        table ? table : "");
    char buf[1 << 16];
    cw w = {{f, 0, sizeof buf, buf}, true};
    if (steps) csv_steps(&w, t, n);
    else csv_kernels(&w, t, n);
    mp_out_flush(&w.o);
    return MP_OK;
}
