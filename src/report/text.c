/* The text report, in the spirit of DeepSpeed's Flops Profiler: a summary,
 * the top modules per depth, the module tree with figures, and a table by
 * operator type. Every number goes through format.c; every module
 * traversal through mp_module_walk. */
#include "analyze/patterns.h"
#include "report/report.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define TX_RULE_WIDTH 92
#define TX_LABEL_WIDTH 24
#define TX_BUF 4096

typedef struct tx {
    const mp_profile *p;
    const mp_model *m;
    const mp_report_options *o;
    mp_out out;
    mp_arena scratch; /* escaped strings, table cells; freed at the end */
    bool nomem;
    char buf[TX_BUF]; /* out's storage */
} tx;

/* ---- output: through the shared buffer of report.h ---- */

static void tx_puts(tx *t, const char *s) { mp_out_puts(&t->out, s); }
static void tx_putc(tx *t, char c) { mp_out_putc(&t->out, c); }

/* Strings one after the other, up to TX_END: the hot lines are plain
 * concatenations, and printf's format parsing cost more than the copy. */
#define TX_END ((const char *)NULL)
static void tx_cat(tx *t, ...) __attribute__((sentinel));
static void tx_cat(tx *t, ...) {
    va_list ap;
    va_start(ap, t);
    for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
        tx_puts(t, s);
    va_end(ap);
}

static void tx_printf(tx *t, const char *fmt, ...) MP_PRINTF(2, 3);
static void tx_printf(tx *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = TX_BUF - t->out.n;
    int len = vsnprintf(t->buf + t->out.n, room, fmt, ap);
    va_end(ap);
    if (len < 0) return;
    if ((size_t)len < room) {
        t->out.n += (size_t)len;
        return;
    }
    /* it did not fit: the cut copy is dropped and the text formatted again */
    mp_out_flush(&t->out);
    va_start(ap, fmt);
    if ((size_t)len < TX_BUF) t->out.n = (size_t)vsnprintf(t->buf, TX_BUF, fmt, ap);
    else vfprintf(t->out.f, fmt, ap);
    va_end(ap);
}

/* ---- small helpers ---- */

static void *tx_alloc(tx *t, size_t n, size_t size) {
    void *r = mp_arena_calloc(&t->scratch, n ? n : 1, size);
    if (!r) t->nomem = true;
    return r;
}

/* A model-supplied string made safe for a terminal: control bytes are shown
 * as \xNN so a name cannot break lines or send escape sequences. UTF-8
 * passes through. NULL prints as `dflt`. */
static const char *tx_safe(tx *t, const char *s, const char *dflt) {
    if (!s || !s[0]) return dflt;
    size_t n = 0, bad = 0;
    for (; s[n]; n++)
        if ((unsigned char)s[n] < 0x20 || (unsigned char)s[n] == 0x7f) bad++;
    if (!bad) return s;
    char *r = tx_alloc(t, n + bad * 3 + 1, 1);
    if (!r) return dflt;
    char *w = r;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) {
            snprintf(w, 5, "\\x%02x", c);
            w += 4;
        } else {
            *w++ = (char)c;
        }
    }
    *w = 0;
    return r;
}

/* A copy in scratch memory (table cells outlive the formatter's temporaries). */
static const char *tx_cell(tx *t, const char *s) {
    char *r = mp_arena_strdup(&t->scratch, s);
    if (!r) t->nomem = true;
    return r;
}

static void tx_rule(tx *t, const char *title) { mp_out_rule(&t->out, title, TX_RULE_WIDTH); }

static void tx_label(tx *t, const char *label) {
    tx_printf(t, "%-*s", TX_LABEL_WIDTH, label);
}

/* ---- (a) summary ---- */

/* The judged parameters (docs/COUNTING.md, "Folded and tied parameters"):
 * those that change the reading, at most TX_PNOTES_MAX lines, and the
 * note on a BatchNorm folded into the convolutions. */
#define TX_PNOTES_MAX 5
static void tx_param_notes(tx *t) {
    const mp_profile *p = t->p;
    int shown = 0, more = 0;
    for (int i = 0; i < p->n_pnotes; i++) {
        if (!mp_pnote_shown(&p->pnotes[i])) continue;
        if (shown == TX_PNOTES_MAX) {
            more++;
            continue;
        }
        char buf[1024];
        tx_label(t, shown++ ? "" : "param notes:");
        tx_printf(t, "%s\n", tx_safe(t, mp_pnote_text(p, &p->pnotes[i], buf, sizeof buf), "?"));
    }
    if (more) {
        tx_label(t, "");
        tx_printf(t, "... and %d more (the JSON report lists every one)\n", more);
    }
    if (p->bn_folded) {
        tx_label(t, "batchnorm folded:");
        tx_printf(t, "%s\n", mp_bn_folded_text);
    }
}

/* "(fp32 25.56 M, fp16 1.2 M)": the non-zero entries by decreasing value;
 * nothing when there are none. */
static void tx_dtype_breakdown(tx *t, const uint64_t *by, bool bytes) {
    int idx[MP_DT_COUNT], n = 0;
    for (int d = 0; d < MP_DT_COUNT; d++)
        if (by[d]) idx[n++] = d;
    if (!n) return;
    for (int i = 1; i < n; i++) /* insertion sort, value desc, dtype asc */
        for (int j = i; j > 0 && by[idx[j]] > by[idx[j - 1]]; j--) {
            int tmp = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = tmp;
        }
    tx_puts(t, " (");
    for (int i = 0; i < n; i++)
        tx_printf(t, "%s%s %s", i ? ", " : "", mp_dtype_name(idx[i]),
                  bytes ? mp_fmt_bytes(by[idx[i]]).s : mp_fmt_count(by[idx[i]]).s);
    tx_putc(t, ')');
}

/* A model total that is incomplete when some node's cost needs unknown
 * dims: "?" followed by what was counted. */
/* A model total that is incomplete when some node's cost needs unknown
 * dims: "?", followed by what was counted when that is not nothing. */
static void tx_total(tx *t, const char *label, uint64_t v, const char *unit,
                     const char *note) {
    tx_label(t, label);
    if (mp_fig_unknown(&t->p->total)) {
        tx_puts(t, MP_FMT_UNKNOWN);
        if (v)
            tx_printf(t, " (at least %s%s%s)", mp_fmt_si(v, unit).s, note ? "; " : "",
                      note ? note : "");
        else if (note)
            tx_printf(t, " (%s)", note);
    } else if (note) {
        tx_printf(t, "%s (%s)", mp_fmt_si(v, unit).s, note);
    } else {
        tx_puts(t, mp_fmt_si(v, unit).s);
    }
    tx_putc(t, '\n');
}


/* One summary line for the nodes whose cost carries `flag`: their count,
 * a few op types, and what the flag means. Nothing when there are none. */
static void tx_flagged(tx *t, const mp_profile *p, uint32_t flag, const char *label,
                       const char *meaning) {
    const mp_graph *g = p->m->graph;
    enum { MAX_OPS = 6 };
    const char *ops[MAX_OPS];
    int counts[MAX_OPS], n_ops = 0, total = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        if (!(g->nodes[k].cost.flags & flag)) continue;
        total++;
        int i = 0;
        while (i < n_ops && strcmp(ops[i], g->nodes[k].op) != 0) i++;
        if (i == n_ops && n_ops < MAX_OPS) {
            ops[n_ops] = g->nodes[k].op;
            counts[n_ops++] = 0;
        }
        if (i < n_ops) counts[i]++;
    }
    if (!total) return;
    tx_label(t, label);
    tx_printf(t, "%d node%s (", total, total == 1 ? "" : "s");
    for (int i = 0; i < n_ops; i++)
        tx_printf(t, "%s%d x %s", i ? ", " : "", counts[i], tx_safe(t, ops[i], "?"));
    tx_printf(t, "%s): %s\n", total > 0 && n_ops == MAX_OPS ? ", ..." : "", meaning);
}

/* A profile ONNX Runtime wrote (--ort-profile): where the times come
 * from and how its events were placed on the nodes. */
static void tx_ort_summary(tx *t) {
    const mp_profile *p = t->p;
    const mp_runinfo *r = &p->run;
    const mp_importinfo *im = &r->imported;
    tx_label(t, "source:");
    tx_printf(t, "ONNX Runtime's profile %s: %d run%s, ", tx_safe(t, im->path, "?"), im->runs,
              im->runs == 1 ? "" : "s");
    tx_printf(t, "%d left out as warm-up, figures per run averaged over the other %d; %d thread%s\n", r->warmup,
              r->iters, r->threads, r->threads == 1 ? "" : "s");
    if (im->dims) {
        tx_label(t, "dims:");
        tx_printf(t, "%s\n", tx_safe(t, im->dims, "?"));
    }
    tx_label(t, "node time:");
    tx_printf(t, "%s per run (its node events summed)", mp_fmt_seconds(im->node_time_s).s);
    tx_printf(t, "; unmatched %s", mp_fmt_seconds(im->unmatched_s).s);
    tx_printf(t, " = %s", mp_fmt_pct_d(im->unmatched_s, im->node_time_s).s);
    for (int i = 0; i < p->n_unplaced && i < 4; i++)
        tx_printf(t, "%s%s", i ? ", " : " (", tx_safe(t, p->unplaced[i].name, "?"));
    if (p->n_unplaced > 4) tx_printf(t, ", and %d more", p->n_unplaced - 4);
    tx_puts(t, p->n_unplaced ? ")\n" : "\n");
    tx_label(t, "events:");
    tx_printf(t, "%d per run: %d by their node's name, %d by the name of a fused node, %d by their place "
                 "among the others, %d unmatched\n",
              im->events, im->exact, im->renamed, im->by_order, im->unmatched);
    if (im->outside_runs) {
        tx_label(t, "left out:");
        tx_printf(t, "%d node event%s in no run (no \"model_run\" holds %s: a profile cut short, or a run still "
                     "going when it was written)\n",
                  im->outside_runs, im->outside_runs == 1 ? "" : "s", im->outside_runs == 1 ? "it" : "them");
    }
    tx_label(t, "fused nodes:");
    tx_printf(t, "%d fused by ONNX Runtime (each a share of its event's time by FLOPs; %d placed by the graph "
                 "around), %d not run (constant-folded or removed by its optimisations)\n",
              r->fused, im->nodes_by_graph, im->nodes_not_run);
}

/* The measured run's summary lines (DeepSpeed's fwd latency, fwd FLOPS,
 * samples/second), then the run's settings and memory. */
static void tx_measured_summary(tx *t) {
    const mp_profile *p = t->p;
    const mp_fig *tot = &p->total;
    const mp_runinfo *r = &p->run;
    bool unknown = mp_fig_unknown(tot);
    tx_label(t, "fwd latency:");
    tx_printf(t, "%s (median of %d runs; p90 ", mp_fmt_seconds(tot->latency_s).s, r->iters);
    tx_printf(t, "%s, min ", mp_fmt_seconds(r->lat_p90_s).s);
    tx_printf(t, "%s)\n", mp_fmt_seconds(r->lat_min_s).s);
    double fl = tot->latency_s > 0 && !unknown ? (double)tot->flops / tot->latency_s : -1;
    if (fl >= 0) {
        tx_label(t, "fwd FLOPS:");
        tx_printf(t, "%s\n", mp_fmt_si_d(fl, "FLOPS").s);
    }
    if (tot->latency_s > 0) {
        tx_label(t, "samples/second:");
        tx_printf(t, "%.2f (batch %lld)\n", (double)r->batch / tot->latency_s, (long long)r->batch);
    }
    tx_label(t, "% of peak:");
    if (fl >= 0 && r->peak_flops_per_s > 0) {
        tx_printf(t, "%s of ", mp_fmt_pct_d(fl, r->peak_flops_per_s).s);
        bool given = r->peak_source && r->peak_source[0] == 'g';
        tx_printf(t, "%s (%s%s)\n", mp_fmt_si_d(r->peak_flops_per_s, "FLOPS").s,
                  given ? "given with --peak-gflops" : "measured: ",
                  given ? "" : r->peak_method ? r->peak_method : "fp32 GEMM on this machine");
    } else {
        tx_puts(t, fl < 0 && r->peak_flops_per_s > 0 ? "unknown (FLOPs not all known)\n" : "unknown (no peak)\n");
    }
    if (r->kernels_above_peak > 0 && r->peak_flops_per_s > 0) {
        bool given = r->peak_source && r->peak_source[0] == 'g';
        tx_label(t, "");
        bool imported = r->source && !strcmp(r->source, "onnxruntime");
        tx_printf(t, "note: %d row%s of the by-operator table ran above this peak (%s)\n", r->kernels_above_peak,
                  r->kernels_above_peak == 1 ? "" : "s",
                  given      ? "the given peak is low for this machine"
                  : imported ? "this machine's, measured now: give --peak-gflops for the machine of the profile"
                             : "measured twice, the machine busier then than during the run: give --peak-gflops");
    }
    if (r->source && !strcmp(r->source, "onnxruntime")) {
        tx_ort_summary(t);
        return;
    }
    tx_label(t, "run:");
    tx_printf(t, "%d timed after %d warm-up, %d thread%s, %d kernel%s per pass", r->iters, r->warmup,
              r->threads, r->threads == 1 ? "" : "s", r->steps, r->steps == 1 ? "" : "s");
    tx_printf(t, " (%d node%s fused, %d folded at plan time)%s\n", r->fused, r->fused == 1 ? "" : "s",
              r->folded, r->node_timing ? "" : "; nodes not timed");
    tx_label(t, "kernels:");
    tx_printf(t, "%d on oneDNN, %d portable (modelprof's own code)\n", r->steps - r->portable_steps,
              r->portable_steps);
    tx_label(t, "run memory:");
    tx_printf(t, "%s (activation arena ", mp_fmt_bytes(r->peak_memory_bytes).s);
    tx_printf(t, "%s (static estimate ", mp_fmt_bytes(r->arena_bytes).s);
    tx_printf(t, "%s), weights ", mp_fmt_bytes(p->activation_peak_bytes).s);
    tx_printf(t, "%s, inputs ", mp_fmt_bytes(r->weight_bytes).s);
    tx_printf(t, "%s, scratch ", mp_fmt_bytes(r->input_bytes).s);
    tx_printf(t, "%s)\n", mp_fmt_bytes(r->scratch_bytes + r->dynamic_bytes).s);
    tx_label(t, "peak RSS:");
    tx_printf(t, "%s (the whole process)\n", mp_fmt_bytes(r->peak_rss_bytes).s);
}

static void tx_summary(tx *t) {
    const mp_profile *p = t->p;
    const mp_model *m = t->m;
    const mp_fig *tot = &p->total;
    bool unknown = mp_fig_unknown(tot);

    tx_rule(t, p->measured ? "modelprof measured profile" : "modelprof static profile");
    tx_puts(t, "Notation:\n"
               "  params = learnable parameters; MACs = multiply-accumulate operations\n"
               "  FLOPs = floating-point operations; fwd / bwd = forward / backward pass\n"
               "  K, M, G, T, P, E = 10^3, 10^6, 10^9, 10^12, 10^15, 10^18\n"
               "  bytes in decimal units: 1 KB = 1000 B, 1 MB = 1000 KB\n");
    if (p->measured)
        tx_puts(t, "  latency = measured forward time (median of the timed runs)\n"
                   "  FLOPS = floating-point operations per second = fwd FLOPs / fwd latency\n");
    if (unknown || tot->uncounted > 0)
        tx_puts(t, "  ? = not computed: the cost needs sizes that are not known "
                   "(see \"unknown cost\")\n"
                   "      or the operator has no cost rule (see \"uncounted ops\")\n");
    tx_putc(t, '\n');

    tx_label(t, "model:");
    tx_printf(t, "%s\n", tx_safe(t, m->path, "(in memory)"));
    tx_label(t, "producer:");
    if ((m->producer && m->producer[0]) || (m->producer_version && m->producer_version[0])) {
        const char *prod = tx_safe(t, m->producer, "");
        const char *ver = tx_safe(t, m->producer_version, "");
        tx_printf(t, "%s%s%s\n", prod, prod[0] && ver[0] ? " " : "", ver);
    } else {
        tx_puts(t, "not recorded\n");
    }
    tx_label(t, "IR version:");
    tx_printf(t, "%" PRId64 "\n", m->ir_version);
    tx_label(t, "opsets:");
    if (!m->n_opsets) tx_puts(t, "none declared");
    for (int i = 0; i < m->n_opsets; i++) {
        const char *d = m->opsets[i].domain;
        tx_printf(t, "%s%s %d", i ? ", " : "",
                  (!d || !d[0]) ? "ai.onnx" : tx_safe(t, d, "?"), m->opsets[i].version);
    }
    tx_putc(t, '\n');

    /* dims the user (or the model) fixed, then the ones still open */
    int n_set = 0;
    for (int i = 1; i < m->n_syms; i++) {
        const mp_symbol *s = &m->syms[i];
        if (!s->on_input || s->value < 0) continue;
        if (!n_set++) tx_label(t, "dims:");
        tx_printf(t, "%s%s=%" PRId64, n_set > 1 ? ", " : "", tx_safe(t, s->name, "?"),
                  s->value);
    }
    if (n_set) tx_putc(t, '\n');
    int n_unres = 0;
    for (int i = 0; i < p->n_unresolved; i++) {
        int s = p->unresolved[i];
        if (s <= 0 || s >= m->n_syms) continue;
        if (!n_unres++) tx_label(t, "unresolved dims:");
        const char *name = tx_safe(t, m->syms[s].name, "?");
        tx_printf(t, "%s%s (set with --dim %s=VALUE)", n_unres > 1 ? ", " : "", name, name);
    }
    if (n_unres) tx_putc(t, '\n');
    if (!n_set && !n_unres) {
        tx_label(t, "dims:");
        tx_puts(t, "static (no symbolic dims on the inputs)\n");
    }

    tx_label(t, "params:");
    tx_puts(t, mp_fmt_count(tot->params).s);
    tx_dtype_breakdown(t, p->params_by_dtype, false);
    if (p->params_bound) tx_puts(t, "; an upper bound (see param notes)");
    if (p->params_maybe_copies)
        tx_printf(t, "; %s of them may be copies (see param notes)",
                  mp_fmt_count(p->params_maybe_copies).s);
    if (p->params_by_role_n)
        tx_printf(t, "; %s in %d parameters the exporter merged or folded away, counted by "
                     "PyTorch's shapes",
                  mp_fmt_count(p->params_by_role).s, p->params_by_role_n);
    tx_putc(t, '\n');
    tx_param_notes(t);
    tx_label(t, "weight memory:");
    tx_puts(t, mp_fmt_bytes(tot->param_bytes).s);
    tx_dtype_breakdown(t, p->param_bytes_by_dtype, true);
    tx_putc(t, '\n');
    if (p->buffers) {
        tx_label(t, "buffers:");
        tx_printf(t, "%llu %s, %s (state that is not learned: not in params)\n",
                  (unsigned long long)p->buffers, p->buffers == 1 ? "tensor" : "tensors",
                  mp_fmt_bytes(p->buffer_bytes).s);
    }
    if (m->weightless) {
        tx_label(t, "weights:");
        if (!m->absent_weights) /* declared by the binding (mp_model_set_weight) */
            tx_printf(t, "absent: names, dtypes and shapes from the model's own parameter table (a "
                         "static profile needs no weights: computed from shapes)\n");
        else if (!m->dir)
            tx_printf(t, "absent: loaded from memory, external data '%s' is not read (a static "
                         "profile needs no weights: computed from shapes)\n",
                      m->absent_weights ? m->absent_weights : "?");
        else
            tx_printf(t, "absent: external data '%s' is not next to the model (a static profile "
                         "needs no weights: computed from shapes; a measured run fills them with "
                         "seeded random values)\n",
                      m->absent_weights ? m->absent_weights : "?");
    }

    uint64_t bwd = mp_sat_mul(tot->flops, 2);
    tx_total(t, "fwd MACs:", tot->macs, "MACs", NULL);
    tx_total(t, "fwd FLOPs:", tot->flops, "FLOPs", NULL);
    tx_total(t, "bwd FLOPs:", bwd, "FLOPs", "estimate: 2 x fwd");
    tx_total(t, "fwd+bwd FLOPs:", mp_sat_add(tot->flops, bwd), "FLOPs", "estimate");
    tx_total(t, "bytes read:", tot->bytes_read, "B", NULL);
    tx_total(t, "bytes written:", tot->bytes_written, "B", NULL);

    if (unknown) { /* the peak's place means nothing when sizes are missing */
        tx_total(t, "peak activation memory:", p->activation_peak_bytes, "B", NULL);
    } else {
        tx_label(t, "peak activation memory:");
        tx_puts(t, mp_fmt_bytes(p->activation_peak_bytes).s);
        if (m->graph && p->peak_node >= 0 && p->peak_node < m->graph->n_nodes) {
            const mp_node *n = &m->graph->nodes[p->peak_node];
            if (n->name && n->name[0])
                tx_printf(t, " (at node %s)", tx_safe(t, n->name, "?"));
            else
                tx_printf(t, " (at node #%d, %s)", p->peak_node, tx_safe(t, n->op, "?"));
        }
        tx_putc(t, '\n');
    }

    if (p->measured && tot->latency_s >= 0) tx_measured_summary(t);

    tx_label(t, "nodes:");
    tx_printf(t, "%d\n", tot->nodes > 0 ? tot->nodes : 0);

    tx_label(t, "uncounted ops:");
    int n_unc = 0;
    for (int i = 0; i < p->n_ops; i++) {
        const mp_opstat *os = &p->ops[i];
        if (os->fig.uncounted <= 0) continue;
        char buf[256];
        tx_printf(t, "%s%d x %s", n_unc++ ? ", " : "", os->fig.uncounted,
                  tx_safe(t, mp_op_display(os->domain, os->op, buf, sizeof buf), "?"));
    }
    tx_puts(t, n_unc ? " (no cost rule: not in MACs/FLOPs)\n" : "none\n");

    tx_label(t, "unknown cost:");
    if (tot->unknown > 0 && p->n_unresolved)
        tx_printf(t, "%d node%s (shapes depend on unknown dims; set them with --dim NAME=VALUE)\n",
                  tot->unknown, tot->unknown == 1 ? "" : "s");
    else if (tot->unknown > 0) {
        tx_printf(t, "%d node%s (sizes known only at run time: data-dependent outputs)\n",
                  tot->unknown, tot->unknown == 1 ? "" : "s");
        mp_moe_summary moe;
        if (mp_moe_routing(m->graph, NULL, 0, &moe) > 0) {
            tx_label(t, "");
            tx_printf(t, "a mixture of experts (%d router%s, %lld experts, top %lld): the rows each expert gets "
                         "are the data's; --run counts them as a run routes, `modelprof plan` plans them "
                         "balanced (their total, tokens x %lld, is exact whatever the routing)\n",
                      moe.routers, moe.routers == 1 ? "" : "s", (long long)moe.experts, (long long)moe.top_k,
                      (long long)moe.top_k);
        }
    }
    else
        tx_puts(t, "none\n");
    tx_flagged(t, p, MP_COST_RUN, "sized by the run:",
               "their sizes depend on the data, counted with the shapes this run's inputs gave");
    tx_flagged(t, p, MP_COST_BOUND, "upper bounds:",
               "data-dependent, counted at their largest");
    tx_flagged(t, p, MP_COST_PER_ITER, "per iteration:",
               "trip count unknown, one iteration counted");
    if (p->overflow) {
        tx_label(t, "overflow:");
        tx_puts(t, "some figures exceed 2^64 and are shown saturated\n");
    }

    /* only when there are some: a report that needs no attention shows none */
    if (m->n_warnings) {
        tx_label(t, "warnings:");
        tx_printf(t, "%d\n", m->n_warnings);
    }
    for (int i = 0; i < m->n_warnings; i++)
        tx_printf(t, "  - %s\n", tx_safe(t, m->warnings[i], "?"));
}

/* ---- (b) aggregated: top modules per depth ---- */

typedef struct tx_group {
    const char *name; /* display name (class, or path) */
    int depth;
    uint64_t params, macs, flops;
    double latency;
    bool unknown;
} tx_group;

typedef struct tx_agg {
    tx *t;
    mp_strmap index;    /* "depth\x1fname" -> group */
    tx_group *groups;
    int n, cap;
    int n_class, n_path; /* modules below the root with a class, without one */
} tx_agg;

/* "depth\x1fname" in scratch memory, as "%d\x1f%s" would print it, built
 * by hand: printf was a tenth of the text report of a large tree. */
static char *tx_group_key(mp_arena *scratch, int depth, const char *name) {
    char num[MP_DEC_MAX + 1];
    size_t dl = 0;
    if (depth < 0) num[dl++] = '-';
    dl += mp_fmt_dec(num + dl, depth < 0 ? 0u - (unsigned)depth : (unsigned)depth);
    size_t nl = strlen(name);
    char *key = mp_arena_alloc(scratch, dl + 1 + nl + 1);
    if (!key) return NULL;
    memcpy(key, num, dl);
    key[dl] = '\x1f';
    memcpy(key + dl + 1, name, nl + 1);
    return key;
}

static bool tx_agg_visit(const mp_profile *p, int module, void *ud) {
    tx_agg *a = ud;
    const mp_module *mod = &p->m->modules[module];
    const mp_fig *fig = &p->mods[module];
    const char *name = mp_module_display(p, module);
    if (mod->parent >= 0) {
        if (mod->cls && mod->cls[0]) a->n_class++;
        else a->n_path++;
    }
    char *key = tx_group_key(&a->t->scratch, mod->depth, name);
    if (!key) {
        a->t->nomem = true;
        return false;
    }
    int g = mp_strmap_get(&a->index, key);
    if (g < 0) {
        tx_group *ng = mp_grow(a->groups, sizeof *a->groups, &a->cap, a->n + 1);
        if (!ng || mp_strmap_put(&a->index, key, a->n) != MP_OK) {
            if (ng) a->groups = ng;
            a->t->nomem = true;
            return false;
        }
        a->groups = ng;
        g = a->n++;
        memset(&a->groups[g], 0, sizeof a->groups[g]);
        a->groups[g].name = name;
        a->groups[g].depth = mod->depth;
    }
    tx_group *gr = &a->groups[g];
    gr->params = mp_sat_add(gr->params, fig->params);
    gr->macs = mp_sat_add(gr->macs, fig->macs);
    gr->flops = mp_sat_add(gr->flops, fig->flops);
    if (fig->latency_s > 0) gr->latency += fig->latency_s;
    gr->unknown |= mp_fig_unknown(fig);
    return true;
}

typedef struct tx_rank {
    double v;
    int g;
} tx_rank;

static int tx_rank_cmp(const void *x, const void *y) {
    const tx_rank *a = x, *b = y;
    if (a->v != b->v) return a->v < b->v ? 1 : -1;
    return (a->g > b->g) - (a->g < b->g);
}

enum { TX_M_PARAMS, TX_M_MACS, TX_M_FLOPS, TX_M_LATENCY };

/* Python-like quoting as DeepSpeed prints it: 'name'. */
static void tx_quoted(tx *t, const char *s) {
    tx_putc(t, '\'');
    for (const char *c = tx_safe(t, s, "?"); *c; c++) {
        if (*c == '\'' || *c == '\\') tx_putc(t, '\\');
        tx_putc(t, *c);
    }
    tx_putc(t, '\'');
}

static void tx_agg_line(tx *t, tx_agg *a, tx_rank *rk, const int *at, int n_at, int metric) {
    static const char *const label[] = {"params", "MACs", "FLOPs", "fwd latency"};
    int n = 0;
    bool any_unknown = false;
    for (int i = 0; i < n_at; i++) {
        const tx_group *g = &a->groups[at[i]];
        double v = metric == TX_M_PARAMS ? (double)g->params
                 : metric == TX_M_MACS   ? (double)g->macs
                 : metric == TX_M_FLOPS  ? (double)g->flops
                                         : g->latency;
        bool unk = g->unknown && (metric == TX_M_MACS || metric == TX_M_FLOPS);
        any_unknown |= unk;
        if (v <= 0) continue; /* zero entries (and unknown ones with nothing counted) */
        rk[n].v = v;
        rk[n].g = at[i];
        n++;
    }
    if (!n) {
        if (any_unknown) tx_printf(t, "%s - ? (depends on unknown dims)\n", label[metric]);
        return;
    }
    qsort(rk, (size_t)n, sizeof *rk, tx_rank_cmp);
    int top = t->o->top < 0 ? n : MP_MIN(n, t->o->top);
    tx_printf(t, "%s - {", label[metric]);
    for (int i = 0; i < top; i++) {
        const tx_group *g = &a->groups[rk[i].g];
        mp_fmtbuf b = metric == TX_M_PARAMS ? mp_fmt_count(g->params)
                    : metric == TX_M_MACS   ? mp_fmt_fig(g->macs, g->unknown, "MACs")
                    : metric == TX_M_FLOPS  ? mp_fmt_fig(g->flops, g->unknown, "FLOPs")
                                            : mp_fmt_seconds(g->latency);
        if (i) tx_puts(t, ", ");
        tx_quoted(t, g->name);
        tx_printf(t, ": '%s'", b.s);
    }
    tx_puts(t, "}\n");
}

static void tx_aggregated(tx *t) {
    const mp_profile *p = t->p;
    int maxd = mp_module_max_depth(p);
    if (t->o->depth >= 0) maxd = MP_MIN(maxd, t->o->depth);
    if (maxd < 0 || !p->mods) return;

    tx_agg a;
    memset(&a, 0, sizeof a);
    a.t = t;
    mp_module_walk(p, t->o->depth, tx_agg_visit, &a);
    int *at = tx_alloc(t, (size_t)a.n, sizeof *at);
    tx_rank *rk = tx_alloc(t, (size_t)a.n, sizeof *rk);

    tx_rule(t, "Aggregated profile per depth");
    if (t->o->top < 0)
        tx_puts(t, "All modules");
    else
        tx_printf(t, "Top %d modules", t->o->top);
    tx_printf(t, " in terms of params, MACs or FLOPs%s at different model depths\n",
              p->measured ? " or fwd latency" : "");
    /* say which: summed by class (DeepSpeed's way) where the export names
     * the classes, by path where it does not */
    if (a.n_path == 0 && a.n_class > 0)
        tx_puts(t, "(by class: modules of one class at one depth are summed, as DeepSpeed does)\n");
    else if (a.n_class == 0)
        tx_puts(t, "(by path: the export names no module classes, so each module is listed\n"
                   "under its path, not summed by class)\n");
    else
        tx_printf(t, "(by class where known: modules of one class at one depth are summed; the %d\n"
                     "module%s the export gives no class %s listed under %s path)\n",
                  a.n_path, a.n_path == 1 ? "" : "s", a.n_path == 1 ? "is" : "are",
                  a.n_path == 1 ? "its" : "their");
    if (at && rk) {
        for (int d = 0; d <= maxd; d++) {
            int n_at = 0;
            for (int g = 0; g < a.n; g++)
                if (a.groups[g].depth == d) at[n_at++] = g;
            tx_printf(t, "depth %d:\n", d);
            tx_agg_line(t, &a, rk, at, n_at, TX_M_PARAMS);
            tx_agg_line(t, &a, rk, at, n_at, TX_M_MACS);
            tx_agg_line(t, &a, rk, at, n_at, TX_M_FLOPS);
            if (p->measured) tx_agg_line(t, &a, rk, at, n_at, TX_M_LATENCY);
        }
    }
    free(a.groups);
    mp_strmap_free(&a.index);
}

/* ---- (c) detailed: the module tree ---- */

static void tx_figs(tx *t, const mp_fig *fig, int module) {
    const mp_fig *tot = &t->p->total;
    tx_cat(t, mp_fmt_count(fig->params).s, " = ", mp_fmt_pct(fig->params, tot->params).s,
           " Params", TX_END);
    if (mp_fig_unknown(fig) || mp_fig_uncountable(fig))
        tx_cat(t, ", ", mp_fmt_fig(0, true, "MACs").s, ", ", mp_fmt_fig(0, true, "FLOPs").s,
               TX_END);
    else if (mp_fig_unknown(tot)) /* a share of an incomplete total means nothing */
        tx_cat(t, ", ", mp_fmt_macs(fig->macs).s, ", ", mp_fmt_flops(fig->flops).s, TX_END);
    else if (!t->p->measured)
        tx_cat(t, ", ", mp_fmt_macs(fig->macs).s, " = ", mp_fmt_pct(fig->macs, tot->macs).s,
               " MACs, ", mp_fmt_flops(fig->flops).s, TX_END);
    else /* DeepSpeed's order: MACs, latency, FLOPS; then FLOPs */
        tx_cat(t, ", ", mp_fmt_macs(fig->macs).s, " = ", mp_fmt_pct(fig->macs, tot->macs).s,
               " MACs", TX_END);
    if (t->p->measured && fig->latency_s >= 0) {
        tx_cat(t, ", ", mp_fmt_seconds(fig->latency_s).s, " = ",
               mp_fmt_pct_d(fig->latency_s, tot->latency_s).s, " latency", TX_END);
        if (!mp_fig_unknown(fig) && !mp_fig_uncountable(fig))
            tx_cat(t, ", ", fig->latency_s > 0 ? mp_fmt_si_d((double)fig->flops / fig->latency_s, "FLOPS").s
                                               : "- FLOPS", TX_END);
    }
    if (t->p->measured && t->p->mod_fused && module >= 0 && t->p->mod_fused[module] > 0) {
        /* its time: its nodes' FLOPs' share of that kernel's */
        int h = t->p->mod_fused[module] - 1;
        const char *hp = h >= 0 && h < t->m->n_modules ? t->m->modules[h].path : NULL;
        tx_cat(t, ", fused into ", hp && hp[0] ? tx_safe(t, hp, "?") : "its parent", "'s kernel", TX_END);
    }
    if (t->p->measured && !mp_fig_unknown(fig) && !mp_fig_uncountable(fig) && !mp_fig_unknown(tot))
        tx_cat(t, ", ", mp_fmt_flops(fig->flops).s, TX_END);
    tx_cat(t, ", ", mp_fmt_bytes(fig->param_bytes).s, " weights", TX_END);
    if (fig->uncounted > 0 && !mp_fig_uncountable(fig))
        tx_printf(t, ", %d uncounted node%s", fig->uncounted, fig->uncounted == 1 ? "" : "s");
}

static const char *tx_tree_label(int module, void *ud) {
    tx *t = ud;
    return tx_safe(t, t->m->modules[module].parent < 0 ? mp_module_display(t->p, module)
                                                       : mp_module_label(t->p, module), "?");
}

static const char *tx_tree_cls(int module, void *ud) {
    tx *t = ud;
    const char *cls = t->m->modules[module].cls;
    return cls && cls[0] ? tx_safe(t, cls, "?") : NULL;
}

static void tx_tree_figs(mp_out *o, int module, void *ud) {
    tx *t = ud;
    (void)o; /* tx writes through t->out, the same buffer */
    tx_figs(t, &t->p->mods[module], module);
}

static void tx_detailed(tx *t) {
    const mp_profile *p = t->p;
    if (!p->mods || t->m->n_modules <= 0) return;
    tx_rule(t, "Detailed profile per module");
    if (p->measured)
        tx_puts(t, "Each module lists: params = % of total params, MACs = % of total MACs\n"
                   "then fwd latency = % of total latency, fwd FLOPS, FLOPs, weight memory\n");
    else
        tx_puts(t, "Each module lists: params = % of total params, MACs = % of total MACs, "
                   "FLOPs, weight memory\n");
    tx_puts(t, "Figures include submodules; nodes of a module outside its submodules "
               "account for the\ndifference. \"N uncounted nodes\": nodes without a cost rule, "
               "not in the MACs and FLOPs.\n\n");
    mp_tree_style st = {tx_tree_label, tx_tree_cls, tx_tree_figs, t};
    int depth = t->o->tree_depth == -2 ? t->o->depth : t->o->tree_depth;
    if (mp_tree_print(&t->out, t->m->modules, t->m->n_modules, depth, &st) != MP_OK)
        t->nomem = true;
}

/* ---- (c') by module and operator type: fvcore's flop_count_table layout
 * (a Markdown table, module rows indented by depth, their full paths), one
 * column of FLOPs per op type: the op_top op types with the most FLOPs,
 * the rest summed in "other" ---- */

typedef struct tx_mo {
    tx *t;
    int ncol, nops;        /* columns; op columns shown */
    bool other;            /* an "other" column */
    const char **cell;     /* rows x ncol */
    int rows, cap;
} tx_mo;

static bool tx_mo_row(const mp_profile *p, int module, void *ud) {
    tx_mo *a = ud;
    tx *t = a->t;
    const mp_module *mod = &p->m->modules[module];
    const mp_fig *fig = &p->mods[module];
    const char **nc = mp_grow(a->cell, sizeof *a->cell * (size_t)a->ncol, &a->cap, a->rows + 1);
    if (!nc) {
        t->nomem = true;
        return false;
    }
    a->cell = nc;
    const char **row = a->cell + (size_t)a->rows * (size_t)a->ncol;
    a->rows++;
    int c = 0;
    /* the indent of its depth, then its path (the root: the model's name) */
    const char *name = tx_safe(t, mod->parent < 0 ? mp_module_display(p, module) : mod->path, "?");
    size_t nl = strlen(name);
    int depth = mod->depth > 0 ? mod->depth : 0;
    char *lab = tx_alloc(t, (size_t)depth + nl + 1, 1);
    if (!lab) return false;
    memset(lab, ' ', (size_t)depth);
    memcpy(lab + depth, name, nl + 1);
    row[c++] = lab;
    bool unk = mp_fig_unknown(fig) || mp_fig_uncountable(fig);
    row[c++] = tx_cell(t, mp_fmt_count(fig->params).s);
    row[c++] = tx_cell(t, mp_fmt_fig(fig->flops, unk, "").s);
    uint64_t other = 0;
    bool other_unk = false, other_any = false;
    const char **ops = row + c;
    for (int i = 0; i < a->nops; i++) ops[i] = "";
    for (int j = p->modops ? p->modop_at[module] : 0; p->modops && j < p->modop_at[module + 1]; j++) {
        const mp_modop *r = &p->modops[j];
        if (r->op < 0) continue; /* parameters only */
        bool u = mp_fig_unknown(&r->fig) || mp_fig_uncountable(&r->fig);
        if (r->op < a->nops) {
            ops[r->op] = tx_cell(t, mp_fmt_fig(r->fig.flops, u, "").s);
        } else {
            other = mp_sat_add(other, r->fig.flops);
            other_unk |= u;
            other_any = true;
        }
    }
    c += a->nops;
    if (a->other) row[c++] = other_any ? tx_cell(t, mp_fmt_fig(other, other_unk, "").s) : "";
    if (p->measured) row[c++] = tx_cell(t, fig->latency_s >= 0 ? mp_fmt_seconds(fig->latency_s).s : "-");
    for (int i = 0; i < c; i++)
        if (!row[i]) t->nomem = true;
    return !t->nomem;
}

static void tx_modops(tx *t) {
    const mp_profile *p = t->p;
    if (!p->mods || t->m->n_modules <= 0) return;
    tx_mo a;
    memset(&a, 0, sizeof a);
    a.t = t;
    a.nops = t->o->op_top < 0 || t->o->op_top > p->n_ops ? p->n_ops : t->o->op_top;
    a.other = a.nops < p->n_ops;
    a.ncol = 3 + a.nops + (a.other ? 1 : 0) + (p->measured ? 1 : 0);
    const char **head = tx_alloc(t, (size_t)a.ncol, sizeof *head);
    int *width = tx_alloc(t, (size_t)a.ncol, sizeof *width);
    if (!head || !width) return;
    int c = 0;
    head[c++] = "module";
    head[c++] = "#params";
    head[c++] = "#FLOPs";
    for (int i = 0; i < a.nops; i++) {
        char buf[256];
        head[c++] = tx_cell(t, tx_safe(t, mp_op_display(p->ops[i].domain, p->ops[i].op, buf, sizeof buf), "?"));
    }
    if (a.other) head[c++] = "other";
    if (p->measured) head[c++] = "latency";
    mp_module_walk(p, t->o->depth, tx_mo_row, &a);
    if (t->nomem) {
        free(a.cell);
        return;
    }
    for (c = 0; c < a.ncol; c++) {
        width[c] = head[c] ? (int)strlen(head[c]) : 0;
        for (int r = 0; r < a.rows; r++) {
            int w = (int)strlen(a.cell[(size_t)r * (size_t)a.ncol + (size_t)c]);
            if (w > width[c]) width[c] = w;
        }
    }
    tx_rule(t, "Profile by module and operator type");
    tx_printf(t, "FLOPs of each module (its submodules included) by operator type, as fvcore's\n"
                 "flop_count_table; %s.%s\n",
              a.other ? "the op types with the most FLOPs, the others summed in \"other\""
                      : "every op type",
              p->measured ? " latency: the module's measured time." : "");
    for (int r = -2; r < a.rows; r++) {
        const char *const *row = r >= 0 ? a.cell + (size_t)r * (size_t)a.ncol : head;
        tx_putc(t, '|');
        for (c = 0; c < a.ncol; c++) {
            if (r == -1) { /* the alignment row: names left, figures right */
                tx_putc(t, c ? '-' : ':');
                for (int i = 0; i < width[c]; i++) tx_putc(t, '-');
                tx_puts(t, c ? ":|" : "-|");
            } else if (c == 0) {
                tx_printf(t, " %-*s |", width[c], row[c]);
            } else {
                tx_printf(t, " %*s |", width[c], row[c]);
            }
        }
        tx_putc(t, '\n');
    }
    free(a.cell);
}

/* ---- (c') formulas (p->formulas; docs/COUNTING.md, "Formulas") ---- */

#define TX_SKIPS_MAX 8   /* nodes named where the left-out ones start */
#define TX_PEAK_MAX 4    /* pieces of the peak shown */

static void tx_poly(tx *t, const mp_poly *q) { mp_poly_write(&t->out, q, t->p, false); }

static void tx_point(tx *t, const int64_t *x) {
    const mp_formulas *F = t->p->formulas;
    tx_putc(t, '(');
    for (int i = 0; i < F->n_vars; i++)
        tx_printf(t, "%s%" PRId64, i ? ", " : "", x[i]);
    tx_putc(t, ')');
}

static const char *tx_node(tx *t, int k) {
    const mp_graph *g = t->m->graph;
    return k >= 0 && k < g->n_nodes ? tx_safe(t, g->nodes[k].name, "?") : "?";
}

/* A module's formulas on one line: params, MACs, FLOPs. */
static bool tx_formula_visit(const mp_profile *p, int module, void *ud) {
    tx *t = ud;
    const mp_formset *fs = &p->formulas->mods[module];
    const mp_module *md = &t->m->modules[module];
    for (int i = 0; i < md->depth; i++) tx_puts(t, "  ");
    /* the module's path, as the tree and the by-module-op table name it
     * (a class is shared by many modules) */
    tx_printf(t, "%s", tx_safe(t, md->parent < 0 || !md->path || !md->path[0]
                                      ? mp_module_display(p, module) : md->path, "?"));
    tx_puts(t, ": params = ");
    tx_poly(t, &fs->f[MP_FF_PARAMS]);
    tx_puts(t, "; MACs = ");
    tx_poly(t, &fs->f[MP_FF_MACS]);
    tx_puts(t, "; FLOPs = ");
    tx_poly(t, &fs->f[MP_FF_FLOPS]);
    if (fs->left_out)
        tx_printf(t, " [without %d node%s left out]", fs->left_out, fs->left_out == 1 ? "" : "s");
    tx_putc(t, '\n');
    return true;
}

static void tx_formulas(tx *t) {
    const mp_profile *p = t->p;
    const mp_formulas *F = p->formulas;
    char title[256];
    int at = snprintf(title, sizeof title, "Formulas");
    for (int i = 0; i < F->n_vars && at > 0 && (size_t)at < sizeof title; i++)
        at += snprintf(title + at, sizeof title - (size_t)at, "%s%s", i ? ", " : " in ",
                       mp_formula_var_name(p, i));
    tx_rule(t, tx_safe(t, title, "Formulas"));
    tx_puts(t, "Exact polynomials in the free dims, each coefficient from the counting rules,\n"
               "equal to the profile at any values of the dims (docs/COUNTING.md, \"Formulas\").\n");
    if (F->n_skips)
        tx_puts(t, "A figure to which a node left out (below) adds has none: \"?\", followed by\n"
                   "the polynomial of the other nodes, a lower bound (\"at least\").\n");
    tx_putc(t, '\n');
    static const char *const label[MP_FF_COUNT] = {"params:", "fwd MACs:", "fwd FLOPs:",
                                                   "bytes read:", "bytes written:",
                                                   "activation bytes:"};
    for (int f = 0; f < MP_FF_COUNT; f++) {
        tx_label(t, label[f]);
        tx_poly(t, &F->total.f[f]);
        tx_putc(t, '\n');
    }
    tx_label(t, "peak activation memory:");
    if (F->n_peak == 1) {
        tx_poly(t, &F->peak[0].poly);
        tx_printf(t, " (the live activations after node '%s')\n", tx_node(t, F->peak[0].node));
    } else if (F->n_peak > 1) {
        tx_printf(t, "not one polynomial: the largest of %d, each the live activations after a "
                     "node\n", F->n_peak);
        for (int c = 0; c < F->n_peak && c < TX_PEAK_MAX; c++) {
            tx_label(t, "");
            tx_puts(t, "  ");
            tx_poly(t, &F->peak[c].poly);
            tx_printf(t, " (after '%s')\n", tx_node(t, F->peak[c].node));
        }
        if (F->n_peak > TX_PEAK_MAX) {
            tx_label(t, "");
            tx_printf(t, "  ... %d more (the JSON lists them)\n", F->n_peak - TX_PEAK_MAX);
        }
    } else {
        tx_printf(t, "no formula: %s\n", tx_safe(t, F->peak_why, "?"));
    }
    tx_label(t, "left out:");
    if (!F->n_skips) {
        tx_puts(t, "none: every node's cost is a polynomial\n");
    } else {
        int origins = 0;
        for (int j = 0; j < F->n_skips; j++) origins += F->skips[j].origin;
        tx_printf(t, "%d node%s whose cost is no polynomial; a figure %s add%s to has no formula.\n",
                  F->n_skips, F->n_skips == 1 ? "" : "s", F->n_skips == 1 ? "it" : "they",
                  F->n_skips == 1 ? "s" : "");
        tx_label(t, "");
        tx_printf(t, "%d of them start it (the others take their inputs):\n", origins);
        int shown = 0;
        for (int j = 0; j < F->n_skips && shown < TX_SKIPS_MAX; j++) {
            const mp_formula_skip *sk = &F->skips[j];
            if (!sk->origin) continue;
            char why[600];
            tx_label(t, "");
            tx_printf(t, "  '%s' (%s): %s\n", tx_node(t, sk->node),
                      tx_safe(t, t->m->graph->nodes[sk->node].op, "?"),
                      tx_safe(t, mp_formula_skip_text(p, sk, why, sizeof why), "?"));
            shown++;
        }
        if (origins > shown) {
            tx_label(t, "");
            tx_printf(t, "  ... %d more (the JSON lists every node)\n", origins - shown);
        }
    }
    for (int i = 0; i < F->n_vars; i++) {
        const mp_formula_range *r = &F->range[i];
        tx_label(t, i ? "" : "checked range:");
        tx_printf(t, "%s from %" PRId64 " to %" PRId64, tx_safe(t, mp_formula_var_name(p, i), "?"),
                  r->lo, r->hi);
        if (F->n_vars > 1) tx_printf(t, " (the other dims at %" PRId64 ")", F->base);
        if (!r->lo_bounded && !r->hi_bounded) tx_puts(t, "\n");
        else tx_puts(t, ":\n");
        if (r->lo_bounded) {
            tx_label(t, "");
            tx_printf(t, "  below %" PRId64 ", %s\n", r->lo, tx_safe(t, r->lo_why, "?"));
        }
        if (r->hi_bounded) {
            tx_label(t, "");
            tx_printf(t, "  above %" PRId64 ", %s\n", r->hi, tx_safe(t, r->hi_why, "?"));
        }
    }
    tx_label(t, "checked:");
    if (!F->n_vars) { /* nothing to build: the formulas are the profile's figures */
        tx_puts(t, "no free dim: the formulas are the figures of the static profile");
    } else {
        tx_printf(t, "built from %d static profile%s (degree", F->profiles, F->profiles == 1 ? "" : "s");
        for (int i = 0; i < F->n_vars; i++)
            tx_printf(t, "%s %d in %s", i ? "," : "", F->degree[i],
                      tx_safe(t, mp_formula_var_name(p, i), "?"));
        tx_printf(t, "), equal to the profile at %d further point%s", F->n_checks,
                  F->n_checks == 1 ? "" : "s");
    }
    if (F->n_vars && F->n_checked) {
        tx_puts(t, ", e.g. ");
        for (int j = 0; j < F->n_checked && j < 5; j++) {
            if (j) tx_puts(t, ", ");
            tx_point(t, F->checked[j]);
        }
    }
    tx_puts(t, "\n");
    int depth = t->o->depth >= 0 ? t->o->depth : 2;
    if (F->n_mods > 0 && p->mods) {
        tx_printf(t, "\nper module (to depth %d):\n", depth);
        mp_module_walk(p, depth, tx_formula_visit, t);
    }
}

/* ---- (d) by operator type ---- */

enum { TX_C_OP, TX_C_COUNT, TX_C_MACS, TX_C_PMACS, TX_C_FLOPS, TX_C_PFLOPS, TX_C_BYTES,
       TX_C_NOTE, TX_NCOL };

static void tx_ops(tx *t) {
    const mp_profile *p = t->p;
    const mp_fig *tot = &p->total;
    static const char *const head[TX_NCOL] = {"op", "count", "MACs", "% MACs", "FLOPs",
                                              "% FLOPs", "bytes r+w", "note"};
    int rows = p->n_ops + 1; /* + total */
    const char **cell = tx_alloc(t, (size_t)rows * TX_NCOL, sizeof *cell);
    if (!cell) return;
    int width[TX_NCOL];
    bool any_note = false, any_uncounted = false;
    for (int c = 0; c < TX_NCOL; c++) width[c] = (int)strlen(head[c]);

    for (int r = 0; r < rows; r++) {
        bool is_total = r == p->n_ops;
        const mp_fig *fig = is_total ? tot : &p->ops[r].fig;
        const char **row = cell + (size_t)r * TX_NCOL;
        char buf[256], note[64] = "";
        bool unc = !is_total && fig->uncounted > 0;
        bool unk = mp_fig_unknown(fig) || mp_fig_uncountable(fig);
        bool tot_unk = mp_fig_unknown(tot);
        if (unc) {
            any_uncounted = true;
            if (fig->uncounted == fig->nodes)
                snprintf(note, sizeof note, "uncounted");
            else
                snprintf(note, sizeof note, "%d uncounted", fig->uncounted);
        }
        if (!is_total && mp_fig_unknown(fig))
            snprintf(note + strlen(note), sizeof note - strlen(note), "%s%d unknown",
                     note[0] ? ", " : "", fig->unknown);
        /* each cell is copied to scratch while its temporary is alive */
        row[TX_C_OP] = tx_cell(t, is_total ? "total"
                                           : tx_safe(t, mp_op_display(p->ops[r].domain,
                                                                      p->ops[r].op, buf,
                                                                      sizeof buf),
                                                     "?"));
        char count[24];
        snprintf(count, sizeof count, "%d", fig->nodes > 0 ? fig->nodes : 0);
        row[TX_C_COUNT] = tx_cell(t, count); /* node counts are exact */
        row[TX_C_MACS] = tx_cell(t, mp_fmt_fig(fig->macs, unk, "MACs").s);
        row[TX_C_PMACS] = tx_cell(t, unk || tot_unk ? MP_FMT_UNKNOWN
                                                    : mp_fmt_pct(fig->macs, tot->macs).s);
        row[TX_C_FLOPS] = tx_cell(t, mp_fmt_fig(fig->flops, unk, "FLOPs").s);
        row[TX_C_PFLOPS] = tx_cell(t, unk || tot_unk ? MP_FMT_UNKNOWN
                                                     : mp_fmt_pct(fig->flops, tot->flops).s);
        row[TX_C_BYTES] = tx_cell(t, mp_fmt_fig(mp_sat_add(fig->bytes_read, fig->bytes_written),
                                                mp_fig_unknown(fig), "B").s);
        row[TX_C_NOTE] = tx_cell(t, note);
        for (int c = 0; c < TX_NCOL; c++) {
            if (!row[c]) return;
            int w = (int)strlen(row[c]);
            if (w > width[c]) width[c] = w;
        }
        if (note[0]) any_note = true;
    }

    tx_rule(t, "Profile by operator type");
    int ncol = any_note ? TX_NCOL : TX_NCOL - 1;
    for (int r = -1; r < rows; r++) {
        const char *const *row = r < 0 ? head : cell + (size_t)r * TX_NCOL;
        if (r == rows - 1) { /* a rule above the total */
            int w = 0;
            for (int c = 0; c < TX_NCOL - 1; c++) w += width[c] + (c ? 2 : 0);
            for (int i = 0; i < w; i++) tx_putc(t, '-');
            tx_putc(t, '\n');
        }
        for (int c = 0; c < ncol; c++) {
            bool last = c == ncol - 1 || (c == TX_C_BYTES && !row[TX_C_NOTE][0]);
            if (c == TX_C_OP)
                tx_printf(t, "%-*s", width[c], row[c]);
            else if (c == TX_C_NOTE)
                tx_printf(t, "  %s", row[c]);
            else
                tx_printf(t, "  %*s", width[c], row[c]);
            if (last) break;
        }
        tx_putc(t, '\n');
    }
    if (any_uncounted)
        tx_puts(t, "uncounted: no cost rule for this operator; its MACs and FLOPs are not in the "
                   "totals\n");
}

/* ---- (e) measured time by operator (a fused group is one row), the
 * analogue of torch.profiler's key_averages().table() ---- */
static void tx_times(tx *t) {
    const mp_profile *p = t->p;
    double row_sum = 0;
    int w = 2;
    for (int i = 0; i < p->n_groups; i++) {
        if (p->groups[i].latency_s > 0) row_sum += p->groups[i].latency_s;
        int l = (int)strlen(tx_safe(t, p->groups[i].name, "?"));
        if (l > w) w = l;
    }
    if (w > 60) w = 60;
    tx_rule(t, "Measured time by operator");
    tx_puts(t, "Per pass: the time of all the op's calls in one forward pass, median and fastest of\n"
               "the timed passes; per call: that median divided by the calls. A fused group (A+B)\n"
               "is one kernel, counted under its first node. % = share of the rows' sum. Sorted by\n"
               "the per-pass median. kernel: what ran it (a matrix product: the library timed fastest).\n");
    tx_printf(t, "%-*s  %5s  %-21s  %7s  %10s\n", w, "", "", "------ per pass -----", "",
              "per call");
    tx_printf(t, "%-*s  %5s  %10s  %10s  %7s  %10s  %12s  %7s  %s\n", w, "op", "calls", "median",
              "fastest", "%", "mean", "FLOPS", "% peak", "kernel");
    for (int i = 0; i < p->n_groups; i++) {
        const mp_groupstat *g = &p->groups[i];
        char tot[64], mean[64], mn[64];
        snprintf(tot, sizeof tot, "%s", mp_fmt_seconds(g->latency_s).s);
        snprintf(mean, sizeof mean, "%s", mp_fmt_seconds(g->count ? g->latency_s / g->count : 0).s);
        snprintf(mn, sizeof mn, "%s", mp_fmt_seconds(g->latency_min_s).s);
        double fl = g->latency_s > 0 ? (double)g->flops / g->latency_s : -1;
        char flb[64], pk[64];
        snprintf(flb, sizeof flb, "%s", g->flops_unknown ? "?" : fl >= 0 ? mp_fmt_si_d(fl, "FLOPS").s : "-");
        snprintf(pk, sizeof pk, "%s", g->flops_unknown ? "?"
                                      : fl >= 0 && p->run.peak_flops_per_s > 0
                                          ? mp_fmt_pct_d(fl, p->run.peak_flops_per_s).s : "-");
        tx_printf(t, "%-*.*s  %5d  %10s  %10s  %7s  %10s  %12s  %7s  %s\n", w, w,
                  tx_safe(t, g->name, "?"), g->count, tot, mn, mp_fmt_pct_d(g->latency_s, row_sum).s,
                  mean, flb, pk, tx_safe(t, g->kernel, ""));
    }
    for (int i = 0; i < w + 96; i++) tx_putc(t, '-');
    tx_putc(t, '\n');
    /* per-pass figures of the whole: each pass's kernels lie inside it, so
     * the kernels' median never exceeds the pass's; the rows' medians come
     * from different passes and need not add up to either */
    char kmed[64], kmin[64], pmed[64], pmin[64];
    snprintf(kmed, sizeof kmed, "%s", mp_fmt_seconds(p->run.kernels_median_s).s);
    snprintf(kmin, sizeof kmin, "%s", mp_fmt_seconds(p->run.kernels_min_s).s);
    snprintf(pmed, sizeof pmed, "%s", mp_fmt_seconds(p->run.lat_median_s).s);
    snprintf(pmin, sizeof pmin, "%s", mp_fmt_seconds(p->run.lat_min_s).s);
    tx_printf(t, "%-*s  %5d  %10s  %10s  (each pass's kernels summed)\n", w, "kernels", p->run.steps,
              kmed, kmin);
    tx_printf(t, "%-*s  %5s  %10s  %10s  (the rest: timer and dispatch between kernels)\n", w,
              "whole pass", "", pmed, pmin);
    if (row_sum > p->run.kernels_median_s * 1.02 && p->run.kernels_median_s > 0)
        tx_printf(t, "(the rows' medians add up to %s: each row's median pass is another pass, so "
                     "their sum is not a pass's time)\n",
                  mp_fmt_seconds(row_sum).s);
}

mp_status mp_report_text(const mp_profile *p, const mp_report_options *o, FILE *f) {
    tx t;
    memset(&t, 0, sizeof t);
    t.p = p;
    t.m = p->m;
    t.o = o;
    t.out.f = f;
    t.out.buf = t.buf;
    t.out.cap = TX_BUF;
    mp_arena_init(&t.scratch);

    tx_summary(&t);
    if (o->top != 0) tx_aggregated(&t);
    if (o->detailed) tx_detailed(&t);
    if (o->by_module_op) tx_modops(&t);
    if (p->formulas) tx_formulas(&t);
    if (o->show_ops && p->n_ops > 0) tx_ops(&t);
    if (o->show_ops && p->measured && p->run.node_timing && p->n_groups > 0) tx_times(&t);
    tx_rule(&t, NULL);
    mp_out_flush(&t.out);

    mp_arena_free(&t.scratch);
    return t.nomem ? mp_error(MP_ERR_NOMEM, "out of memory while writing the report") : MP_OK;
}
