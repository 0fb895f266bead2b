/* Report writers: the number formatter, the module walker, the text and
 * JSON reports of a profile built by hand, options, and the atomic file
 * write. */
#include "test.h"

#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>
#include <math.h>

#include "analyze/profile.h"
#include "report/report.h"
#include "jsonr.h"
#include "tcli.h"

/* ---- formatter ---- */

static void t_format_counts(void) {
    T_EQ_STR(mp_fmt_count(0).s, "0");
    T_EQ_STR(mp_fmt_count(7).s, "7");
    T_EQ_STR(mp_fmt_count(512).s, "512");
    T_EQ_STR(mp_fmt_count(999).s, "999");
    T_EQ_STR(mp_fmt_count(1000).s, "1 K");
    T_EQ_STR(mp_fmt_count(1005).s, "1.01 K");   /* half up */
    T_EQ_STR(mp_fmt_count(1004).s, "1 K");
    T_EQ_STR(mp_fmt_count(1500).s, "1.5 K");
    T_EQ_STR(mp_fmt_count(1234567).s, "1.23 M");
    T_EQ_STR(mp_fmt_count(25560000).s, "25.56 M");
    T_EQ_STR(mp_fmt_count(1500000000).s, "1.5 G");
    T_EQ_STR(mp_fmt_count(999994).s, "999.99 K");
    T_EQ_STR(mp_fmt_count(999995).s, "1 M");    /* 999.995 K rounds to 1000 K */
    T_EQ_STR(mp_fmt_count(999996).s, "1 M");
    T_EQ_STR(mp_fmt_count(999999999).s, "1 G");
    T_EQ_STR(mp_fmt_count(1000000000000ull).s, "1 T");
    T_EQ_STR(mp_fmt_count(2500000000000000ull).s, "2.5 P");
    /* saturated counts say so instead of printing a wrong number */
    T_EQ_STR(mp_fmt_count(UINT64_MAX).s, "overflow (> 18.44 E)");
    T_EQ_STR(mp_fmt_count(UINT64_MAX - 1).s, "18.45 E");
    T_EQ_STR(mp_fmt_count(1010000).s, "1.01 M");
    T_EQ_STR(mp_fmt_count(1100000).s, "1.1 M");
}

static void t_format_units(void) {
    T_EQ_STR(mp_fmt_macs(4090000000ull).s, "4.09 GMACs");
    T_EQ_STR(mp_fmt_flops(8210000000ull).s, "8.21 GFLOPs");
    T_EQ_STR(mp_fmt_flops(0).s, "0 FLOPs");
    T_EQ_STR(mp_fmt_macs(999).s, "999 MACs");
    T_EQ_STR(mp_fmt_bytes(0).s, "0 B");
    T_EQ_STR(mp_fmt_bytes(512).s, "512 B");
    T_EQ_STR(mp_fmt_bytes(1500).s, "1.5 KB");
    T_EQ_STR(mp_fmt_bytes(102230000).s, "102.23 MB");
    T_EQ_STR(mp_fmt_bytes(1000000000000ull).s, "1 TB");
    T_EQ_STR(mp_fmt_si(2000, "FLOP/s").s, "2 KFLOP/s");
    T_EQ_STR(mp_fmt_fig(5, true, "MACs").s, "? MACs");
    T_EQ_STR(mp_fmt_fig(5, true, "").s, "?");
    T_EQ_STR(mp_fmt_fig(5, false, "").s, "5");
    T_EQ_STR(mp_fmt_si_d(0.5, "").s, "0.5");
    T_EQ_STR(mp_fmt_si_d(81.9e12, "FLOP/s").s, "81.9 TFLOP/s");
    T_EQ_STR(mp_fmt_si_d(999.996e3, "").s, "1 M");
    T_EQ_STR(mp_fmt_si_d(-1, "B").s, "? B");
    T_EQ_STR(mp_sat_add(UINT64_MAX, 1) == UINT64_MAX ? "sat" : "wrap", "sat");
    T_EQ_STR(mp_sat_mul(UINT64_MAX / 2 + 1, 2) == UINT64_MAX ? "sat" : "wrap", "sat");
}

static void t_format_percent(void) {
    T_EQ_STR(mp_fmt_pct(1, 8).s, "12.5%");
    T_EQ_STR(mp_fmt_pct(1234, 10000).s, "12.34%");
    T_EQ_STR(mp_fmt_pct(1, 1).s, "100%");
    T_EQ_STR(mp_fmt_pct(UINT64_MAX, UINT64_MAX).s, "100%");
    T_EQ_STR(mp_fmt_pct(0, 5).s, "0%");
    T_EQ_STR(mp_fmt_pct(1, 200).s, "0.5%");
    T_EQ_STR(mp_fmt_pct(2, 3).s, "66.67%");
    T_EQ_STR(mp_fmt_pct(1, 1000000).s, "<0.01%");
    T_EQ_STR(mp_fmt_pct(109482240, 109483778).s, ">99.99%");   /* short of the whole: never "100%" */
    T_EQ_STR(mp_fmt_pct(0, 0).s, "0%");
    T_EQ_STR(mp_fmt_pct(3, 0).s, "0%");
    T_EQ_STR(mp_fmt_pct_d(0.25, 1.0).s, "25%");
}

static void t_format_seconds(void) {
    T_EQ_STR(mp_fmt_seconds(0).s, "0 s");
    T_EQ_STR(mp_fmt_seconds(1.5).s, "1.5 s");
    T_EQ_STR(mp_fmt_seconds(0.0012).s, "1.2 ms");
    T_EQ_STR(mp_fmt_seconds(0.00083).s, "830 us");
    T_EQ_STR(mp_fmt_seconds(12e-9).s, "12 ns");
    T_EQ_STR(mp_fmt_seconds(0.9999999).s, "1 s");
    T_EQ_STR(mp_fmt_seconds(76.67e-3).s, "76.67 ms");
    T_EQ_STR(mp_fmt_seconds(-1).s, "?");
}

/* ---- a profile built by hand ----
 *
 * TinyNet(root) ── layer1: Sequential ─┬ 0: BasicBlock ─┬ conv1: Conv2d
 *                                      │                └ relu: ReLU
 *                                      └ 1: BasicBlock ── conv1: Conv2d
 *              ├─ fc: Linear
 *              └─ head (no class) ── custom (no class): com.example.CustomOp
 */
typedef struct fx {
    mp_model *m;
    mp_profile *p;
    int n_mods; /* entries of p->mods */
} fx;

static void fig_add(mp_fig *a, const mp_fig *b) {
    a->params += b->params;
    a->param_bytes += b->param_bytes;
    a->macs += b->macs;
    a->flops += b->flops;
    a->bytes_read += b->bytes_read;
    a->bytes_written += b->bytes_written;
    a->act_bytes += b->act_bytes;
    a->nodes += b->nodes;
    a->uncounted += b->uncounted;
    a->unknown += b->unknown;
    a->latency_s += b->latency_s;
}

static int fx_value(mp_model *m, const char *name, int dtype, int rank, const int64_t *dims) {
    int v = mp_graph_value(m->graph, name, strlen(name));
    mp_value *val = &m->graph->values[v];
    val->dtype = dtype;
    val->rank = rank;
    if (rank > 0) {
        val->dims = mp_arena_calloc(&m->arena, (size_t)rank, sizeof(int64_t));
        memcpy(val->dims, dims, sizeof(int64_t) * (size_t)rank);
    }
    return v;
}

/* A node in module `path` with one input and one output; its cost is
 * added to the module, its ancestors, its op type and the total. */
static void fx_node(fx *x, const char *path, const char *cls, const char *name,
                    const char *domain, const char *op, const char *in, const char *out,
                    int rank, const int64_t *dims, mp_cost cost) {
    mp_model *m = x->m;
    mp_profile *p = x->p;
    int mod = mp_model_module(m, path, strlen(path));
    if (cls) m->modules[mod].cls = cls;
    int ni = mp_graph_add_node(m->graph);
    mp_node *n = &m->graph->nodes[ni];
    n->name = mp_arena_strdup(&m->arena, name);
    n->op = op;
    n->domain = domain;
    n->module = mod;
    n->n_in = n->n_out = 1;
    n->in = mp_arena_calloc(&m->arena, 1, sizeof(int));
    n->out = mp_arena_calloc(&m->arena, 1, sizeof(int));
    n->in[0] = mp_graph_find(m->graph, in);
    n->out[0] = fx_value(m, out, MP_DT_FLOAT, rank, dims);
    n->cost = cost;

    mp_fig own = {0};
    own.params = cost.params;
    own.param_bytes = cost.param_bytes;
    own.macs = cost.macs;
    own.flops = cost.flops;
    own.bytes_read = cost.bytes_read;
    own.bytes_written = cost.bytes_written;
    own.act_bytes = cost.act_bytes;
    own.nodes = 1;
    own.uncounted = (cost.flags & MP_COST_UNCOUNTED) ? 1 : 0;
    own.unknown = (cost.flags & MP_COST_UNKNOWN) ? 1 : 0;
    own.latency_s = 0.001 * (ni + 1);

    /* modules may have been created by this call: keep p->mods in step */
    p->mods = realloc(p->mods, sizeof *p->mods * (size_t)m->n_modules);
    memset(p->mods + x->n_mods, 0, sizeof *p->mods * (size_t)(m->n_modules - x->n_mods));
    x->n_mods = m->n_modules;
    for (int i = mod; i >= 0; i = m->modules[i].parent) fig_add(&p->mods[i], &own);
    int o = 0;
    while (o < p->n_ops && !(strcmp(p->ops[o].op, op) == 0 && strcmp(p->ops[o].domain, domain) == 0))
        o++;
    if (o == p->n_ops) {
        p->ops = realloc(p->ops, sizeof *p->ops * (size_t)(p->n_ops + 1));
        memset(&p->ops[o], 0, sizeof p->ops[o]);
        p->ops[o].op = op;
        p->ops[o].domain = domain;
        p->n_ops++;
    }
    fig_add(&p->ops[o].fig, &own);
    fig_add(&p->total, &own);
    p->params_by_dtype[MP_DT_FLOAT] += cost.params;
    p->param_bytes_by_dtype[MP_DT_FLOAT] += cost.param_bytes;
}

static mp_cost fx_cost(uint64_t params, uint64_t macs, uint64_t flops, uint64_t out_bytes) {
    mp_cost k = {0};
    k.params = params;
    k.param_bytes = params * 4;
    k.macs = macs;
    k.flops = flops;
    k.bytes_read = out_bytes + params * 4;
    k.bytes_written = out_bytes;
    k.act_bytes = out_bytes;
    return k;
}

static int fx_ops_cmp(const void *a, const void *b) {
    const mp_opstat *x = a, *y = b;
    if (x->fig.flops != y->fig.flops) return x->fig.flops < y->fig.flops ? 1 : -1;
    if (x->fig.macs != y->fig.macs) return x->fig.macs < y->fig.macs ? 1 : -1;
    return strcmp(x->op, y->op);
}

static fx fx_build(void) {
    fx x;
    x.m = mp_model_create();
    T_CHECK(x.m != NULL);
    if (!x.m) exit(1);
    mp_model *m = x.m;
    x.p = calloc(1, sizeof *x.p);
    mp_profile *p = x.p;
    p->m = m;
    p->peak_node = -1;
    m->path = mp_arena_strdup(&m->arena, "models/tiny.onnx");
    m->producer = "pytorch";
    m->producer_version = "2.1.0";
    m->ir_version = 8;
    m->opsets = mp_arena_calloc(&m->arena, 2, sizeof *m->opsets);
    m->opsets[0].domain = "";
    m->opsets[0].version = 17;
    m->opsets[1].domain = "com.example";
    m->opsets[1].version = 1;
    m->n_opsets = 2;
    m->graph->name = "main_graph";

    int batch = mp_model_symbol(m, "batch", 5);
    int seq = mp_model_symbol(m, "seq", 3);
    m->syms[batch].value = 1;
    m->syms[batch].on_input = true;
    m->syms[seq].on_input = true;
    p->unresolved = calloc(1, sizeof(int));
    p->unresolved[0] = seq;
    p->n_unresolved = 1;

    int root = mp_model_module(m, "", 0);
    m->modules[root].name = "main_graph";
    m->modules[root].cls = "TinyNet";
    p->mods = calloc(1, sizeof *p->mods);
    x.n_mods = 1;

    int64_t img[] = {1, 64, 56, 56};
    fx_value(m, "input", MP_DT_FLOAT, 4, img);
    fx_node(&x, "layer1.0.conv1", "Conv2d", "/layer1/layer1.0/conv1/Conv", "", "Conv", "input",
            "c1", 4, img, fx_cost(36864, 115605504, 231211008, 802816));
    fx_node(&x, "layer1.0.relu", "ReLU", "/layer1/layer1.0/relu/Relu", "", "Relu", "c1", "r1", 4,
            img, fx_cost(0, 0, 200704, 802816));
    fx_node(&x, "layer1.1.conv1", "Conv2d", "/layer1/layer1.1/conv1/Conv", "", "Conv", "r1", "c2",
            4, img, fx_cost(36864, 115605504, 231211008, 802816));
    int64_t flat[] = {1, 1000};
    fx_node(&x, "fc", "Linear", "/fc/Gemm", "", "Gemm", "c2", "logits", 2, flat,
            fx_cost(513000, 512000, 1025000, 4000));
    int64_t sym[] = {1, MP_DIM_OF_SYM(seq), 64, MP_DIM_ANON};
    mp_cost custom = fx_cost(0, 0, 0, 0);
    custom.flags = MP_COST_UNCOUNTED;
    fx_node(&x, "head.custom", NULL, "/head/custom \"q\"\n\x01", "com.example", "CustomOp",
            "logits", "out", 4, sym, custom);
    m->modules[mp_model_module(m, "layer1", 6)].cls = "Sequential";
    m->modules[mp_model_module(m, "layer1.0", 8)].cls = "BasicBlock";
    m->modules[mp_model_module(m, "layer1.1", 8)].cls = "BasicBlock";
    m->modules[mp_model_module(m, "head", 4)].cls = NULL;
    qsort(p->ops, (size_t)p->n_ops, sizeof *p->ops, fx_ops_cmp);

    p->activation_peak_bytes = 1605632;
    p->peak_node = 1;
    mp_model_warn(m, "weights absent: external data file tiny.weights.bin not found");
    m->weightless = true;
    return x;
}

static void fx_free(fx *x) {
    mp_profile_free(x->p); /* frees mods, ops, unresolved: all calloc'd here */
    mp_model_free(x->m);
}

/* A table cell of width w (left-aligned), as a string. */
static void cell(const char *text, int w, char *out, size_t cap) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) exit(1);
    char local[64];
    mp_out o = {f, 0, sizeof local, local};
    mp_out_cell(&o, text, w, false);
    mp_out_flush(&o);
    fclose(f);
    snprintf(out, cap, "%s", buf);
    free(buf);
}

/* Cells count columns, not bytes: a cut never splits a UTF-8 character, a
 * wide character takes two columns, a broken byte shows as '?'. */
static void t_cell_utf8(void) {
    char b[128];
    cell("abcdefgh", 6, b, sizeof b);
    T_EQ_STR(b, "abc...");
    cell("ab", 4, b, sizeof b);
    T_EQ_STR(b, "ab  ");
    cell("ab\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 5, b, sizeof b);   /* abéééé: 6 columns */
    T_EQ_STR(b, "ab...");
    cell("ab\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 6, b, sizeof b);
    T_EQ_STR(b, "ab\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
    cell("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", 8, b, sizeof b);   /* 日本語: 6 columns */
    T_EQ_STR(b, "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e  ");
    cell("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe6\x97\xa5", 6, b, sizeof b);
    T_EQ_STR(b, "\xe6\x97\xa5... ");   /* 2 + 3 columns, padded to 6 */
    cell("a\xff\tb", 5, b, sizeof b);
    T_EQ_STR(b, "a??b ");
}

/* The report as a string (caller frees). */
static char *render(const fx *x, const mp_report_options *o) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    T_CHECK(f != NULL);
    if (!f) exit(1);
    T_OK(mp_report_write(x->p, o, f));
    fclose(f);
    if (getenv("MP_REPORT_SHOW")) fputs(buf, stdout); /* to look at a report */
    return buf;
}

static bool has(const char *text, const char *needle) {
    if (strstr(text, needle)) return true;
    fprintf(stderr, "    missing: \"%s\"\n", needle);
    return false;
}

/* Lines that end in a space or comma, or contain an empty field. */
static void check_clean_lines(const char *text) {
    const char *line = text;
    while (*line) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (n > 0 && (line[n - 1] == ' ' || line[n - 1] == ',')) {
            fprintf(stderr, "    trailing space/comma: \"%.*s\"\n", (int)n, line);
            T_CHECK(!"clean line ends");
        }
        for (size_t i = 0; i + 1 < n; i++)
            if ((line[i] == ',' && line[i + 1] == ',') ||
                (line[i] == ',' && i + 2 < n && line[i + 1] == ' ' && line[i + 2] == ',') ||
                (line[i] == ',' && line[i + 1] == ')')) {
                fprintf(stderr, "    empty field: \"%.*s\"\n", (int)n, line);
                T_CHECK(!"no empty fields");
                break;
            }
        if (!end) break;
        line = end + 1;
    }
}

/* ---- the walker ---- */

typedef struct walk_log {
    char s[512];
    int skip; /* module whose children are skipped, -1 none */
} walk_log;

static bool walk_visit(const mp_profile *p, int module, void *ud) {
    walk_log *w = ud;
    const char *path = p->m->modules[module].path;
    size_t n = strlen(w->s);
    snprintf(w->s + n, sizeof w->s - n, "%s[%s]", n ? " " : "", path);
    return module != w->skip;
}

static void t_walk(void) {
    fx x = fx_build();
    walk_log w = {"", -1};
    mp_module_walk(x.p, -1, walk_visit, &w);
    T_EQ_STR(w.s, "[] [layer1] [layer1.0] [layer1.0.conv1] [layer1.0.relu] [layer1.1] "
                  "[layer1.1.conv1] [fc] [head] [head.custom]");
    walk_log w1 = {"", -1};
    mp_module_walk(x.p, 1, walk_visit, &w1);
    T_EQ_STR(w1.s, "[] [layer1] [fc] [head]");
    walk_log w0 = {"", -1};
    mp_module_walk(x.p, 0, walk_visit, &w0);
    T_EQ_STR(w0.s, "[]");
    walk_log ws = {"", mp_model_module(x.m, "layer1", 6)};
    mp_module_walk(x.p, -1, walk_visit, &ws);
    T_EQ_STR(ws.s, "[] [layer1] [fc] [head] [head.custom]");
    T_EQ(mp_module_max_depth(x.p), 3);
    T_EQ_STR(mp_module_display(x.p, 0), "TinyNet");
    T_EQ_STR(mp_module_display(x.p, mp_model_module(x.m, "head", 4)), "head");
    T_EQ_STR(mp_module_display(x.p, mp_model_module(x.m, "head.custom", 11)), "head.custom");
    T_EQ_STR(mp_module_label(x.p, mp_model_module(x.m, "head.custom", 11)), "custom");
    x.m->modules[0].cls = NULL;
    T_EQ_STR(mp_module_display(x.p, 0), "main_graph");
    /* loaded from a file: the file's stem, not the exporter's generic name */
    x.m->stem = "tiny";
    T_EQ_STR(mp_module_display(x.p, 0), "tiny");
    T_EQ_STR(mp_model_name(x.p), "tiny");
    T_EQ_STR(mp_module_name(x.p, 0), "tiny");
    T_EQ_STR(mp_module_name(x.p, mp_model_module(x.m, "head.custom", 11)), "custom");
    x.m->graph->name = "TinyGraph"; /* a graph named by its author is the name */
    T_EQ_STR(mp_model_name(x.p), "TinyGraph");
    x.m->graph->name = "main_graph";
    x.m->stem = NULL;
    x.m->modules[0].name = "";
    x.m->graph->name = "";
    T_EQ_STR(mp_module_display(x.p, 0), "model");
    char buf[64];
    T_EQ_STR(mp_op_display("", "Conv", buf, sizeof buf), "Conv");
    T_EQ_STR(mp_op_display("ai.onnx", "Conv", buf, sizeof buf), "Conv");
    T_EQ_STR(mp_op_display("com.microsoft", "FusedConv", buf, sizeof buf),
             "com.microsoft.FusedConv");
    fx_free(&x);
}

/* ---- text ---- */

static void t_options_default(void) {
    mp_report_options o;
    memset(&o, 0x55, sizeof o);
    mp_report_options_default(&o);
    T_EQ(o.format, MP_FORMAT_TEXT);
    T_EQ(o.depth, -1);
    T_EQ(o.top, 3);
    T_EQ(o.detailed, 1);
    T_EQ(o.show_ops, 1);
}

/* Option structs carry their size (include/modelprof.h): the defaults are
 * written into the caller's size only; a size the library does not know is
 * refused by every function taking the options, naming the struct. */
static void t_options_size(void) {
    T_EQ_STR(mp_version(), MP_VERSION_STRING);
    mp_report_options o;
    T_OK(mp_report_options_default(&o));
    T_EQ_U64(o.size, sizeof o);
    /* a struct larger than the library's (a newer header), or too small */
    unsigned char buf[sizeof o + 16];
    memset(buf, 0xAA, sizeof buf);
    T_CHECK(mp_report_options_init((mp_report_options *)(void *)buf, sizeof buf) == MP_ERR_USAGE);
    T_CHECK(strstr(mp_last_error(), "mp_report_options") != NULL);
    T_CHECK(mp_report_options_init((mp_report_options *)(void *)buf, 12) == MP_ERR_USAGE);
    for (size_t i = 0; i < sizeof buf; i++) T_EQ(buf[i], 0xAA); /* nothing written */
    /* the generic rule on a struct that gained a field: an old caller's
     * size is filled, nothing past it */
    typedef struct v2 { size_t size; int a; double b; } v2;
    v2 def = {sizeof(v2), 7, 2.5}, got;
    size_t v1 = MP_FIELD_END(v2, a);
    memset(buf, 0xAA, sizeof buf);
    T_OK(mp_opts_init(buf, v1, &def, sizeof def, v1, "v2"));
    T_EQ_U64(*(size_t *)(void *)buf, v1);
    T_EQ(buf[v1], 0xAA);
    *(int *)(void *)(buf + offsetof(v2, a)) = 3;
    got = def;
    T_OK(mp_opts_take(&got, sizeof got, buf, v1, "v2"));
    T_EQ(got.a, 3);
    T_CHECK(got.b == 2.5); /* beyond the caller's size: the default */
    /* every function taking options refuses an unset struct */
    fx x = fx_build();
    mp_report_options bad = o;
    bad.size = 0;
    char *s = NULL;
    T_CHECK(mp_report_string(x.p, &bad, &s) == MP_ERR_USAGE && s == NULL);
    T_CHECK(strstr(mp_last_error(), "mp_report_options_default") != NULL);
    bad.size = sizeof bad + 4;
    T_CHECK(mp_report_write(x.p, &bad, stdout) == MP_ERR_USAGE);
    mp_run_options ro;
    T_OK(mp_run_options_default(&ro));
    ro.size = 20;
    mp_exec *ex = NULL;
    T_CHECK(mp_exec_create(x.p, &ro, &ex) == MP_ERR_USAGE && ex == NULL);
    T_CHECK(strstr(mp_last_error(), "mp_run_options") != NULL);
    mp_tplan_options to;
    T_OK(mp_tplan_options_default(&to));
    to.size = 0;
    mp_tplan *tp = NULL;
    T_CHECK(mp_tplan_create(x.p, &to, &tp) == MP_ERR_USAGE && tp == NULL);
    mp_limits lim;
    T_OK(mp_limits_default(&lim));
    T_OK(mp_limits_set(&lim, "depth", 8));
    T_EQ(lim.max_depth, 8);
    lim.size = 3;
    T_CHECK(mp_limits_set(&lim, "depth", 9) == MP_ERR_USAGE);
    mp_model *m = NULL;
    T_CHECK(mp_model_load_ex("models/resnet18.onnx", &lim, &m) == MP_ERR_USAGE && m == NULL);
    T_CHECK(strstr(mp_last_error(), "mp_limits") != NULL);
    mp_train_options tr;
    T_OK(mp_train_options_default(&tr));
    T_EQ_U64(tr.size, sizeof tr);
    fx_free(&x);
}

static void t_text_summary(void) {
    fx x = fx_build();
    char *s = render(&x, NULL);
    T_CHECK(has(s, "modelprof static profile"));
    T_CHECK(has(s, "1 KB = 1000 B"));
    T_CHECK(has(s, "model:                  models/tiny.onnx\n"));
    T_CHECK(has(s, "producer:               pytorch 2.1.0\n"));
    T_CHECK(has(s, "IR version:             8\n"));
    T_CHECK(has(s, "opsets:                 ai.onnx 17, com.example 1\n"));
    T_CHECK(has(s, "dims:                   batch=1\n"));
    T_CHECK(has(s, "unresolved dims:        seq (set with --dim seq=VALUE)\n"));
    T_CHECK(has(s, "params:                 586.73 K (fp32 586.73 K)\n"));
    T_CHECK(has(s, "weight memory:          2.35 MB (fp32 2.35 MB)\n"));
    T_CHECK(has(s, "weights:                absent"));
    T_CHECK(has(s, "fwd MACs:               231.72 MMACs\n"));
    T_CHECK(has(s, "fwd FLOPs:              463.65 MFLOPs\n"));
    T_CHECK(has(s, "bwd FLOPs:              927.3 MFLOPs (estimate: 2 x fwd)\n"));
    T_CHECK(has(s, "fwd+bwd FLOPs:          1.39 GFLOPs"));
    T_CHECK(has(s, "peak activation memory: 1.61 MB (at node /layer1/layer1.0/relu/Relu)\n"));
    T_CHECK(has(s, "nodes:                  5\n"));
    T_CHECK(has(s, "uncounted ops:          1 x com.example.CustomOp"));
    T_CHECK(has(s, "unknown cost:           none\n"));
    T_CHECK(has(s, "warnings:               1\n  - weights absent"));
    T_CHECK(!strstr(s, "latency"));
    T_CHECK(!strstr(s, "(at least"));
    T_CHECK(has(s, "? = not computed"));  /* for the uncounted op */
    check_clean_lines(s);
    free(s);
    fx_free(&x);
}

static void t_text_aggregated(void) {
    fx x = fx_build();
    char *s = render(&x, NULL);
    T_CHECK(has(s, "Top 3 modules in terms of params, MACs or FLOPs at different model depths"));
    T_CHECK(has(s, "depth 0:\nparams - {'TinyNet': '586.73 K'}\nMACs - {'TinyNet': "
                   "'231.72 MMACs'}\nFLOPs - {'TinyNet': '463.65 MFLOPs'}\n"));
    T_CHECK(has(s, "depth 1:\nparams - {'Linear': '513 K', 'Sequential': '73.73 K'}\n"));
    /* two BasicBlocks at depth 2 are summed under their class */
    T_CHECK(has(s, "depth 2:\nparams - {'BasicBlock': '73.73 K'}\n"));
    T_CHECK(has(s, "MACs - {'BasicBlock': '231.21 MMACs'}\n"));
    /* the unclassed module is listed under its path, zero entries skipped */
    T_CHECK(has(s, "depth 3:\nparams - {'Conv2d': '73.73 K'}\n"));
    T_CHECK(has(s, "FLOPs - {'Conv2d': '462.42 MFLOPs', 'ReLU': '200.7 KFLOPs'}\n"));
    T_CHECK(!strstr(s, "'head.custom'"));

    mp_report_options o;
    mp_report_options_default(&o);
    o.top = 1;
    char *s1 = render(&x, &o);
    T_CHECK(has(s1, "Top 1 modules"));
    T_CHECK(has(s1, "depth 1:\nparams - {'Linear': '513 K'}\nMACs - {'Sequential': "
                    "'231.21 MMACs'}\n"));
    o.top = 0;
    char *s0 = render(&x, &o);
    T_CHECK(!strstr(s0, "Aggregated"));
    T_CHECK(has(s0, "Detailed profile"));
    o.top = 3;
    o.depth = 1;
    char *sd = render(&x, &o);
    T_CHECK(has(sd, "depth 1:"));
    T_CHECK(!strstr(sd, "depth 2:"));
    free(s);
    free(s1);
    free(s0);
    free(sd);
    fx_free(&x);
}

static void t_text_tree(void) {
    fx x = fx_build();
    char *s = render(&x, NULL);
    T_CHECK(has(s, "\nTinyNet(\n  586.73 K = 100% Params, 231.72 MMACs = 100% MACs, "
                   "463.65 MFLOPs, 2.35 MB weights, 1 uncounted node\n"));
    T_CHECK(has(s, "\n  (layer1): Sequential(\n    73.73 K = 12.57% Params, "));
    T_CHECK(has(s, "\n      (conv1): Conv2d(36.86 K = 6.28% Params, 115.61 MMACs = 49.89% MACs, "
                   "231.21 MFLOPs, 147.46 KB weights)\n"));
    T_CHECK(has(s, "\n      (relu): ReLU(0 = 0% Params, 0 MACs = 0% MACs, 200.7 KFLOPs, "
                   "0 B weights)\n    )\n    (1): BasicBlock(\n"));
    T_CHECK(has(s, "\n  (fc): Linear(513 K = 87.43% Params"));
    T_CHECK(has(s, "\n  (head)(\n"));
    T_CHECK(has(s, "\n    (custom)(0 = 0% Params"));
    T_CHECK(has(s, "weights)\n  )\n)\n"));
    check_clean_lines(s);

    mp_report_options o;
    mp_report_options_default(&o);
    o.depth = 1;
    char *s1 = render(&x, &o);
    T_CHECK(has(s1, "\n  (layer1): Sequential(73.73 K = 12.57% Params"));
    T_CHECK(has(s1, "\n  (head)(0 = 0% Params"));
    T_CHECK(!strstr(s1, "(conv1)"));
    T_CHECK(!strstr(s1, "(custom)"));
    check_clean_lines(s1);
    o.depth = 0;
    char *s0 = render(&x, &o);
    T_CHECK(has(s0, "\nTinyNet(586.73 K = 100% Params"));
    T_CHECK(!strstr(s0, "(layer1)"));
    /* --top does not limit the tree */
    o.depth = -1;
    o.top = 1;
    char *st = render(&x, &o);
    T_CHECK(has(st, "(relu): ReLU("));
    o.detailed = 0;
    char *sn = render(&x, &o);
    T_CHECK(!strstr(sn, "Detailed profile"));
    T_CHECK(!strstr(sn, "(conv1)"));
    T_CHECK(has(sn, "Aggregated profile"));
    free(s);
    free(s1);
    free(s0);
    free(st);
    free(sn);
    fx_free(&x);
}

static void t_text_ops(void) {
    fx x = fx_build();
    char *s = render(&x, NULL);
    T_CHECK(has(s, "Profile by operator type"));
    T_CHECK(has(s, "\nop                    count          MACs  % MACs          FLOPs  % FLOPs  "
                   "bytes r+w  note\n"));
    T_CHECK(has(s, "\nConv                      2  231.21 MMACs  99.78%  462.42 MFLOPs   99.74%"
                   "    3.51 MB\n"));
    T_CHECK(has(s, "\nRelu                      1        0 MACs      0%   200.7 KFLOPs    0.04%"));
    T_CHECK(has(s, "\ncom.example.CustomOp      1        ? MACs       ?        ? FLOPs        ?"
                   "        0 B  uncounted\n"));
    T_CHECK(has(s, "\ntotal                     5  231.72 MMACs    100%  463.65 MFLOPs     100%"));
    T_CHECK(has(s, "uncounted: no cost rule"));
    check_clean_lines(s);
    mp_report_options o;
    mp_report_options_default(&o);
    o.show_ops = 0;
    char *s0 = render(&x, &o);
    T_CHECK(!strstr(s0, "Profile by operator type"));
    free(s);
    free(s0);
    fx_free(&x);
}

/* Nodes whose cost needs unresolved dims: figures print "?", never 0. */
static void t_text_unknown(void) {
    fx x = fx_build();
    int relu = mp_model_module(x.m, "layer1.0.relu", 13);
    for (int i = relu; i >= 0; i = x.m->modules[i].parent) x.p->mods[i].unknown = 1;
    x.p->total.unknown = 1;
    for (int o = 0; o < x.p->n_ops; o++)
        if (strcmp(x.p->ops[o].op, "Relu") == 0) x.p->ops[o].fig.unknown = 1;
    char *s = render(&x, NULL);
    T_CHECK(has(s, "? = not computed: the cost needs sizes"));
    T_CHECK(has(s, "fwd MACs:               ? (at least 231.72 MMACs)\n"));
    T_CHECK(has(s, "bwd FLOPs:              ? (at least 927.3 MFLOPs; estimate: 2 x fwd)\n"));
    T_CHECK(has(s, "unknown cost:           1 node (shapes depend on unknown dims; set them with "
                   "--dim NAME=VALUE)\n"));
    T_CHECK(has(s, "(relu): ReLU(0 = 0% Params, ? MACs, ? FLOPs, 0 B weights)"));
    /* a known module shows no share of an incomplete total */
    T_CHECK(has(s, "(fc): Linear(513 K = 87.43% Params, 512 KMACs, 1.03 MFLOPs, 2.05 MB weights)"));
    T_CHECK(has(s, "FLOPs - {'Conv2d': '462.42 MFLOPs', 'ReLU': '? FLOPs'}"));
    T_CHECK(has(s, "1 unknown"));
    check_clean_lines(s);
    free(s);
    fx_free(&x);
}

static void t_text_measured(void) {
    fx x = fx_build();
    x.p->measured = true;
    x.p->run.iters = 20;
    x.p->run.warmup = 3;
    x.p->run.threads = 2;
    x.p->run.lat_median_s = 0.015;
    x.p->run.lat_p90_s = 0.016;
    x.p->run.lat_min_s = 0.0145;
    x.p->run.batch = 1;
    x.p->run.peak_flops_per_s = 100e9;
    x.p->run.peak_source = "given";
    x.p->run.steps = 7;
    x.p->run.arena_bytes = 1000;
    x.p->run.weight_bytes = 2000;
    x.p->run.peak_memory_bytes = 3000;
    char *s = render(&x, NULL);
    T_CHECK(has(s, "--- modelprof measured profile ---"));
    T_CHECK(has(s, "fwd latency:            15 ms (median of 20 runs; p90 16 ms, min 14.5 ms)\n"));
    T_CHECK(has(s, "fwd FLOPS:              30.91 GFLOPS\n"));
    T_CHECK(has(s, "samples/second:         66.67 (batch 1)\n"));
    T_CHECK(has(s, "% of peak:              30.91% of 100 GFLOPS (given with --peak-gflops)\n"));
    T_CHECK(strstr(s, "ran above this peak") == NULL);
    T_CHECK(has(s, "run memory:             3 KB (activation arena 1 KB (static estimate "));
    T_CHECK(has(s, "fwd latency - {'TinyNet': '15 ms'}"));
    /* DeepSpeed's order: MACs, latency, FLOPS; then FLOPs and weights */
    T_CHECK(has(s, "(conv1): Conv2d(36.86 K = 6.28% Params, 115.61 MMACs = 49.89% MACs, "
                   "1 ms = 6.67% latency, 231.21 GFLOPS, 231.21 MFLOPs, 147.46 KB weights)"));
    check_clean_lines(s);
    free(s);
    /* rows faster than the peak are said to be, with what to do */
    x.p->run.kernels_above_peak = 2;
    s = render(&x, NULL);
    T_CHECK(has(s, "% of peak:              30.91% of 100 GFLOPS (given with --peak-gflops)\n"
                   "                        note: 2 rows of the by-operator table ran above this peak "
                   "(the given peak is low for this machine)\n"));
    free(s);
    x.p->run.peak_source = "measured";
    x.p->run.kernels_above_peak = 1;
    s = render(&x, NULL);
    T_CHECK(has(s, "note: 1 row of the by-operator table ran above this peak (measured twice, the machine "
                   "busier then than during the run: give --peak-gflops)\n"));
    check_clean_lines(s);
    free(s);
    fx_free(&x);
}

/* Names from the model cannot break lines in the text report. */
static void t_text_escapes(void) {
    fx x = fx_build();
    x.p->peak_node = 4;
    char *s = render(&x, NULL);
    T_CHECK(has(s, "(at node /head/custom \"q\"\\x0a\\x01)\n"));
    free(s);
    fx_free(&x);
}

static void t_text_empty(void) {
    mp_model *m = mp_model_create();
    mp_profile *p = calloc(1, sizeof *p);
    p->m = m;
    p->peak_node = -1;
    fx x = {m, p, 0};
    char *s = render(&x, NULL);
    T_CHECK(has(s, "model:                  (in memory)\n"));
    T_CHECK(has(s, "producer:               not recorded\n"));
    T_CHECK(has(s, "opsets:                 none declared\n"));
    T_CHECK(has(s, "dims:                   static"));
    T_CHECK(has(s, "params:                 0\n"));
    T_CHECK(has(s, "uncounted ops:          none\n"));
    T_CHECK(!strstr(s, "Detailed"));
    check_clean_lines(s);
    free(s);
    mp_profile_free(p);
    mp_model_free(m);
}

/* ---- JSON ---- */

/* Parse with the tests' JSON reader (tests/jsonr.c): strict syntax. */
static jr *json_parse(const char *s) {
    size_t err = 0;
    jr *j = jr_parse(s, strlen(s), &err);
    if (!j) fprintf(stderr, "    JSON syntax error at byte %zu: \"%.40s\"\n", err, s + err);
    return j;
}

static int64_t jint(const jr *root, const char *path) {
    const jr *v = jr_path(root, path);
    if (!v || v->type != JR_NUM || !v->is_int) {
        fprintf(stderr, "    JSON: no integer at %s\n", path);
        return -999;
    }
    return v->i;
}

static const char *jstr(const jr *obj, const char *key) {
    const jr *v = obj ? jr_get(obj, key) : NULL;
    return v && v->type == JR_STR ? v->s : NULL;
}

static void t_json_report(void) {
    fx x = fx_build();
    mp_report_options o;
    mp_report_options_default(&o);
    o.format = MP_FORMAT_JSON;
    o.depth = 1; /* text-only options: JSON holds everything */
    o.top = 1;
    o.detailed = 0;
    o.show_ops = 0;
    char *s = render(&x, &o);
    t_json_dump("profile", s, strlen(s));
    jr *j = json_parse(s);
    T_CHECK(j != NULL);
    if (!j) exit(1);
    T_EQ_STR(jstr(j, "modelprof_version"), MP_VERSION_STRING);
    const jr *model = jr_get(j, "model");
    T_EQ_STR(jstr(model, "path"), "models/tiny.onnx");
    T_EQ_STR(jstr(model, "producer"), "pytorch");
    T_EQ_STR(jstr(model, "producer_version"), "2.1.0");
    T_EQ(jint(j, "model.ir_version"), 8);
    T_EQ(jr_len(jr_get(model, "opsets")), 2);
    T_EQ_STR(jstr(jr_at(jr_get(model, "opsets"), 1), "domain"), "com.example");
    T_EQ(jint(j, "dims.batch"), 1);
    T_EQ(jr_len(jr_get(j, "unresolved_dims")), 1);
    T_EQ_STR(jr_at(jr_get(j, "unresolved_dims"), 0)->s, "seq");
    T_EQ(jint(j, "total.params"), 586728);
    T_EQ(jint(j, "total.param_bytes"), 2346912);
    T_EQ(jint(j, "total.macs"), 231723008);
    T_EQ(jint(j, "total.flops"), 463647720);
    T_EQ(jint(j, "total.bwd_flops_estimate"), 927295440);
    T_EQ(jint(j, "total.activation_peak_bytes"), 1605632);
    T_EQ(jint(j, "total.nodes"), 5);
    T_EQ(jint(j, "total.uncounted_nodes"), 1);
    T_EQ(jint(j, "total.unknown_nodes"), 0);
    T_CHECK(jr_path(j, "total.complete")->type == JR_BOOL && !jr_path(j, "total.complete")->b);
    T_EQ(jint(j, "params_by_dtype.fp32"), 586728);
    T_EQ(jint(j, "param_bytes_by_dtype.fp32"), 2346912);

    const jr *ops = jr_get(j, "ops");
    T_EQ(jr_len(ops), 4);
    T_EQ_STR(jstr(jr_at(ops, 0), "op"), "Conv");
    T_EQ(jr_get(jr_at(ops, 0), "count")->i, 2);
    T_EQ_STR(jstr(jr_at(ops, 3), "domain"), "com.example");
    T_EQ(jr_get(jr_at(ops, 3), "uncounted")->i, 1);
    T_EQ(jr_len(jr_get(j, "uncounted")), 1);
    T_EQ_STR(jstr(jr_at(jr_get(j, "uncounted"), 0), "op"), "CustomOp");

    /* the whole tree, whatever --depth says, in pre-order with parent ids */
    const jr *mods = jr_get(j, "modules");
    T_EQ(jr_len(mods), 10);
    for (int i = 0; i < jr_len(mods); i++) {
        const jr *mo = jr_at(mods, i);
        T_EQ(jr_get(mo, "id")->i, i);
        int64_t parent = jr_get(mo, "parent")->i;
        T_CHECK(parent < i);
        if (parent >= 0)
            T_EQ(jr_get(jr_at(mods, (int)parent), "depth")->i + 1, jr_get(mo, "depth")->i);
    }
    const jr *conv = jr_at(mods, 3);
    T_EQ_STR(jstr(conv, "path"), "layer1.0.conv1");
    T_EQ_STR(jstr(conv, "name"), "conv1");
    T_EQ_STR(jstr(conv, "class"), "Conv2d");
    T_EQ(jr_get(conv, "parent")->i, 2);
    T_EQ(jr_get(conv, "params")->i, 36864);
    /* the root is named after the model (issue 18 point 8): its class
     * here, never the exporter's generic graph name */
    T_EQ_STR(jstr(jr_at(mods, 0), "name"), "TinyNet");
    T_EQ_STR(jstr(model, "name"), "TinyNet");
    T_EQ_STR(jstr(model, "graph"), "main_graph");
    T_EQ_STR(jstr(jr_at(mods, 0), "path"), "");
    T_CHECK(jr_get(jr_at(mods, 8), "class") == NULL); /* "head": no class, none invented */
    T_EQ(jr_get(jr_at(mods, 8), "uncounted_nodes")->i, 1);

    const jr *nodes = jr_get(j, "nodes");
    T_EQ(jr_len(nodes), 5);
    const jr *cu = jr_at(nodes, 4);
    T_EQ_STR(jstr(cu, "name"), "/head/custom \"q\"\n\x01");
    T_EQ_STR(jstr(cu, "module"), "head.custom");
    T_EQ_STR(jr_at(jr_get(cu, "inputs"), 0)->s, "logits");
    const jr *out = jr_at(jr_get(cu, "outputs"), 0);
    T_EQ_STR(jstr(out, "dtype"), "fp32");
    const jr *shape = jr_get(out, "shape");
    T_EQ(jr_len(shape), 4);
    T_EQ(jr_at(shape, 0)->i, 1);
    T_EQ_STR(jr_at(shape, 1)->s, "seq");
    T_CHECK(jr_at(shape, 3)->type == JR_NULL);
    T_EQ_STR(jr_at(jr_get(cu, "flags"), 0)->s, "uncounted");
    T_EQ(jr_len(jr_get(jr_at(nodes, 0), "flags")), 0);
    T_EQ(jr_get(jr_at(nodes, 0), "macs")->i, 115605504);
    T_EQ(jr_len(jr_get(j, "warnings")), 1);
    T_CHECK(jr_path(j, "total.latency_s") == NULL);
    /* layout: one op, module or node per line */
    T_CHECK(has(s, "\n    {\"op\": \"CustomOp\", \"domain\": \"com.example\", \"count\": 1, "));
    T_CHECK(has(s, "\"shape\": [1, \"seq\", 64, null]"));
    jr_free(j);
    free(s);

    x.p->measured = true;
    x.p->total.unknown = 1;
    s = render(&x, &o);
    j = json_parse(s);
    T_CHECK(j != NULL);
    if (j) {
        T_CHECK(fabs(jr_path(j, "total.latency_s")->num - 0.015) < 1e-12);
        T_EQ(jint(j, "total.unknown_nodes"), 1);
        T_CHECK(jr_get(jr_at(jr_get(j, "modules"), 3), "latency_s") != NULL);
        jr_free(j);
    }
    free(s);
    fx_free(&x);
}

/* Strings that are not valid UTF-8 still give valid JSON; non-ASCII UTF-8
 * passes through unchanged. */
static void t_json_utf8(void) {
    fx x = fx_build();
    x.m->producer = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";
    x.m->producer_version = "bad \xff \xc3 \xed\xa0\x80 end";
    mp_report_options o;
    mp_report_options_default(&o);
    o.format = MP_FORMAT_JSON;
    char *s = render(&x, &o);
    t_json_dump("profile", s, strlen(s));
    jr *j = json_parse(s);
    T_CHECK(j != NULL);
    jr_free(j);
    T_CHECK(has(s, "\"producer\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""));
    T_CHECK(has(s, "\"producer_version\": \"bad \xef\xbf\xbd \xef\xbf\xbd "
                   "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd end\""));
    /* cross-check with Python's parser when it is there */
    if (access("/usr/bin/python3", X_OK) == 0) {
        char path[] = "/tmp/mp_report_jsonXXXXXX";
        int fd = mkstemp(path);
        T_CHECK(fd >= 0);
        if (fd >= 0) {
            FILE *f = fdopen(fd, "w");
            fputs(s, f);
            fclose(f);
            char cmd[256];
            snprintf(cmd, sizeof cmd, "/usr/bin/python3 -m json.tool %s >/dev/null 2>&1", path);
            T_EQ(system(cmd), 0);
            unlink(path);
        }
    }
    free(s);
    fx_free(&x);
}

/* ---- options and files ---- */

static void t_write_errors(void) {
    fx x = fx_build();
    mp_report_options o;
    mp_report_options_default(&o);
    FILE *f = fopen("/dev/null", "w");
    T_EQ(mp_report_write(NULL, &o, f), MP_ERR_USAGE);
    o.format = (mp_format)7;
    T_EQ(mp_report_write(x.p, &o, f), MP_ERR_USAGE);
    T_CHECK(strstr(mp_last_error(), "format") != NULL);
    mp_report_options_default(&o);
    o.depth = -2;
    T_EQ(mp_report_write(x.p, &o, f), MP_ERR_USAGE);
    fclose(f);
    f = fopen("/dev/full", "w");
    if (f) {
        mp_report_options_default(&o);
        T_EQ(mp_report_write(x.p, &o, f), MP_ERR_IO);
        fclose(f);
    }
    fx_free(&x);
}

static void t_write_file(void) {
    fx x = fx_build();
    char dir[] = "/tmp/mp_report_XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    char path[128];
    snprintf(path, sizeof path, "%s/report.txt", dir);
    mp_report_options o;
    mp_report_options_default(&o);
    T_OK(mp_report_write_file(x.p, &o, path));
    T_OK(mp_report_write_file(x.p, &o, path)); /* replaces an existing file */
    char *want = render(&x, &o);
    FILE *f = fopen(path, "r");
    T_CHECK(f != NULL);
    char *got = calloc(1, strlen(want) + 16);
    size_t n = f ? fread(got, 1, strlen(want) + 8, f) : 0;
    if (f) fclose(f);
    T_EQ(n, strlen(want));
    T_CHECK(strcmp(got, want) == 0);
    struct stat stt;
    T_CHECK(stat(path, &stt) == 0 && (stt.st_mode & 0444) != 0);
    /* nothing left behind but the report */
    DIR *d = opendir(dir);
    int entries = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) entries++;
    if (d) closedir(d);
    T_EQ(entries, 1);
    /* a folder that does not exist: an I/O error naming the file */
    char bad[160];
    snprintf(bad, sizeof bad, "%s/missing/report.txt", dir);
    T_EQ(mp_report_write_file(x.p, &o, bad), MP_ERR_IO);
    T_CHECK(strstr(mp_last_error(), "missing/report.txt") != NULL);
    /* ... and saying what is wrong: the folder is not there, or is a file (issue 31 item 10) */
    char want_msg[200];
    snprintf(want_msg, sizeof want_msg, "the folder %s/missing does not exist", dir);
    T_CHECK(strstr(mp_last_error(), want_msg) != NULL);
    snprintf(bad, sizeof bad, "%s/report.txt/x.txt", dir);
    T_EQ(mp_report_write_file(x.p, &o, bad), MP_ERR_IO);
    snprintf(want_msg, sizeof want_msg, "%s/report.txt is not a folder", dir);
    T_CHECK(strstr(mp_last_error(), want_msg) != NULL);
    T_EQ(mp_report_write_file(x.p, &o, ""), MP_ERR_USAGE);
    unlink(path);
    rmdir(dir);
    free(want);
    free(got);
    fx_free(&x);
}

MP_TESTS(report) {
    {"format_counts", t_format_counts},
    {"cell_utf8", t_cell_utf8},
    {"format_units", t_format_units},
    {"format_percent", t_format_percent},
    {"format_seconds", t_format_seconds},
    {"walk", t_walk},
    {"options_default", t_options_default},
    {"options_size", t_options_size},
    {"text_summary", t_text_summary},
    {"text_aggregated", t_text_aggregated},
    {"text_tree", t_text_tree},
    {"text_ops", t_text_ops},
    {"text_unknown", t_text_unknown},
    {"text_measured", t_text_measured},
    {"text_escapes", t_text_escapes},
    {"text_empty", t_text_empty},
    {"json_report", t_json_report},
    {"json_utf8", t_json_utf8},
    {"write_errors", t_write_errors},
    {"write_file", t_write_file},
};
MP_TESTS_END(report)
