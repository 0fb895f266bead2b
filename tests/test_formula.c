/* Formulas (analyze/formula.c, --formula): the costs of the model and of
 * every module as exact polynomials in the free dims. Each test evaluates
 * the polynomials at points, some far from the ones they were built from,
 * and compares them with a static profile made at those dims, for every
 * module and every figure, to the last integer. Run from the repository
 * root. */
#include <stdlib.h>

#include "analyze/analyze.h"
#include "analyze/formula.h"
#include "analyze/profile.h"
#include "jsonr.h"
#include "tbuild.h"
#include "tcli.h"
#include "test.h"

static uint64_t fig_field(const mp_fig *g, int f) {
    switch (f) {
    case MP_FF_PARAMS: return g->params;
    case MP_FF_MACS: return g->macs;
    case MP_FF_FLOPS: return g->flops;
    case MP_FF_BYTES_READ: return g->bytes_read;
    case MP_FF_BYTES_WRITTEN: return g->bytes_written;
    default: return g->act_bytes;
    }
}

static uint64_t cost_field(const mp_cost *c, int f) {
    switch (f) {
    case MP_FF_MACS: return c->macs;
    case MP_FF_FLOPS: return c->flops;
    case MP_FF_BYTES_READ: return c->bytes_read;
    case MP_FF_BYTES_WRITTEN: return c->bytes_written;
    case MP_FF_ACT_BYTES: return c->act_bytes;
    default: return 0;
    }
}

/* Is node k in module md's subtree (md == -1: the model)? */
static bool in_module(const mp_model *m, int k, int md) {
    if (md < 0) return true;
    for (int x = m->graph->nodes[k].module; x >= 0; x = m->modules[x].parent)
        if (x == md) return true;
    return false;
}

/* Every formula of f (built on model fm) at x against q, a static profile
 * of the same model made at those dims: each module's and the model's six
 * figures (the nodes left out taken at q's values) and the activation
 * peak. Returns the figures compared. */
static int compare_at(const char *what, const mp_formulas *F, const mp_profile *q,
                      const int64_t *x) {
    const mp_model *m = q->m;
    int n = 0;
    T_EQ(F->n_mods, m->n_modules);
    for (int md = -1; md < m->n_modules && md < F->n_mods; md++) {
        const mp_formset *fs = md < 0 ? &F->total : &F->mods[md];
        const mp_fig *fig = md < 0 ? &q->total : &q->mods[md];
        for (int f = 0; f < MP_FF_COUNT; f++) {
            uint64_t rest = 0, got = 0, want = fig_field(fig, f);
            if (f != MP_FF_PARAMS)
                for (int j = 0; j < F->n_skips; j++)
                    if (in_module(m, F->skips[j].node, md))
                        rest += cost_field(&m->graph->nodes[F->skips[j].node].cost, f);
            if (!mp_poly_eval(&fs->f[f], F->n_vars, x, &got) || got + rest != want) {
                mp_t_fail(__FILE__, __LINE__, "%s: %s of module '%s' at (%lld, %lld): formula %llu + "
                          "%llu left out, profile %llu", what, mp_formula_field_key[f],
                          md < 0 ? "(model)" : m->modules[md].path, (long long)x[0],
                          (long long)(F->n_vars > 1 ? x[1] : 0), (unsigned long long)got,
                          (unsigned long long)rest, (unsigned long long)want);
                return n;
            }
            n++;
        }
    }
    if (F->n_peak) {
        uint64_t best = 0, v = 0;
        for (int c = 0; c < F->n_peak; c++) {
            T_CHECK(mp_poly_eval(&F->peak[c].poly, F->n_vars, x, &v));
            if (v > best) best = v;
        }
        if (best != q->activation_peak_bytes)
            mp_t_fail(__FILE__, __LINE__, "%s: activation peak at (%lld, ...): formula %llu, profile %llu",
                      what, (long long)x[0], (unsigned long long)best,
                      (unsigned long long)q->activation_peak_bytes);
        n++;
    }
    return n;
}

/* A model file: its formulas, then at each point a fresh load profiled at
 * those dims (names: the formulas' dims in order). Returns the figures
 * compared; *F_out keeps the formulas' profile for further checks. */
static int check_file(const char *path, const int64_t (*pts)[2], int n_pts, int want_vars,
                      mp_profile **keep) {
    mp_model *m = NULL;
    mp_profile *p = NULL;
    T_OK(mp_model_load(path, &m));
    if (!m) return 0;
    T_OK(mp_profile_static(m, &p));
    T_OK(mp_profile_formulas(p));
    int n = 0;
    const mp_formulas *F = p ? p->formulas : NULL;
    T_CHECK(F != NULL);
    if (F) {
        T_EQ(F->n_vars, want_vars);
        for (int j = 0; j < n_pts; j++) {
            mp_model *m2 = NULL;
            mp_profile *q = NULL;
            T_OK(mp_model_load(path, &m2));
            for (int i = 0; i < F->n_vars && i < 2; i++)
                T_OK(mp_model_set_dim(m2, m->syms[F->vars[i]].name, pts[j][i]));
            T_OK(mp_profile_static(m2, &q));
            if (q) n += compare_at(path, F, q, pts[j]);
            mp_profile_free(q);
            mp_model_free(m2);
        }
    }
    if (keep) {
        *keep = p;
        return n;
    }
    mp_profile_free(p);
    mp_model_free(m);
    return n;
}

static void free_kept(mp_profile *p) {
    if (!p) return;
    mp_model *m = p->m;
    mp_profile_free(p);
    mp_model_free(m);
}

/* Report options: format, depth, top, detailed, show_ops, csv table. */
static mp_report_options ropts(mp_format fmt, int top, int detailed, int ops, mp_csv_table csv) {
    mp_report_options o;
    mp_report_options_default(&o);
    o.format = fmt;
    o.depth = -1;
    o.top = top;
    o.detailed = detailed;
    o.show_ops = ops;
    o.csv_table = csv;
    return o;
}

/* The term of q with these powers (batch, seq), or NULL. */
static const mp_term *term(const mp_poly *q, int e0, int e1) {
    for (int j = 0; j < q->n; j++)
        if (q->t[j].exp[0] == e0 && q->t[j].exp[1] == e1) return &q->t[j];
    return NULL;
}

#define T_TERM(q, e0, e1, want)                                  \
    do {                                                         \
        const mp_term *t_ = term(q, e0, e1);                     \
        T_CHECK(t_ != NULL);                                     \
        if (t_) {                                                \
            T_EQ(t_->num, want);                                 \
            T_EQ(t_->den, 1);                                    \
        }                                                        \
    } while (0)

/* x [batch, seq, 64] @ W [64, 32] -> y; z = y @ y^T; softmax(z). By hand
 * (docs/COUNTING.md, "Formulas"): MACs 64*32 per row of y plus 32 per
 * entry of z; FLOPs twice that plus one per softmax element; bytes from
 * the shapes in fp32. */
static mp_model *hand_model(void) {
    mp_model *m = tb_new(17);
    int64_t b = tb_sym(m, "batch"), s = tb_sym(m, "seq");
    tb_input(m, "x", MP_DT_FLOAT, 3, TB_DIMS(b, s, 64));
    tb_weight(m, "W", MP_DT_FLOAT, 2, TB_DIMS(64, 32));
    tb_node(m, "MatMul", "x,W", "y");
    int t = tb_node(m, "Transpose", "y", "yt");
    tb_attr_ints(m, t, "perm", 3, TB_DIMS(0, 2, 1));
    tb_node(m, "MatMul", "y,yt", "z");
    tb_node(m, "Softmax", "z", "out");
    tb_output(m, "out");
    return m;
}

static void t_hand(void) {
    mp_model *m = hand_model();
    mp_profile *p = tb_prof(m);
    if (!p) return;
    T_OK(mp_profile_formulas(p));
    const mp_formulas *F = p->formulas;
    if (!F) return;
    T_EQ(F->n_vars, 2);
    T_EQ_STR(m->syms[F->vars[0]].name, "batch");
    T_EQ_STR(m->syms[F->vars[1]].name, "seq");
    T_EQ(F->degree[0], 1);
    T_EQ(F->degree[1], 2);
    T_EQ(F->n_skips, 0);
    const mp_formset *t = &F->total;
    T_EQ(t->f[MP_FF_PARAMS].n, 1);
    T_TERM(&t->f[MP_FF_PARAMS], 0, 0, 2048);
    T_EQ(t->f[MP_FF_MACS].n, 2);
    T_TERM(&t->f[MP_FF_MACS], 1, 1, 2048);
    T_TERM(&t->f[MP_FF_MACS], 1, 2, 32);
    T_EQ(t->f[MP_FF_FLOPS].n, 2);
    T_TERM(&t->f[MP_FF_FLOPS], 1, 1, 4096);
    T_TERM(&t->f[MP_FF_FLOPS], 1, 2, 65);
    /* reads: x 256bs + W 8192; y 128bs twice more, y^T 128bs; z 4bs^2 */
    T_EQ(t->f[MP_FF_BYTES_READ].n, 3);
    T_TERM(&t->f[MP_FF_BYTES_READ], 0, 0, 8192);
    T_TERM(&t->f[MP_FF_BYTES_READ], 1, 1, 640);
    T_TERM(&t->f[MP_FF_BYTES_READ], 1, 2, 4);
    T_TERM(&t->f[MP_FF_BYTES_WRITTEN], 1, 1, 256);
    T_TERM(&t->f[MP_FF_BYTES_WRITTEN], 1, 2, 8);
    /* live after each node: x+y 384bs; y+y^T 256bs; y+y^T+z 256bs+4bs^2;
     * z+out 8bs^2: none dominates the other two for every batch, seq >= 1 */
    T_EQ(F->n_peak, 3);
    T_CHECK(F->range[0].lo == 1 && F->range[0].hi == 65536 && !F->range[0].hi_bounded);
    /* the first term prints first: lowest degree */
    char *s = NULL;
    T_OK(mp_report_string(p, &(mp_report_options[]){ropts(MP_FORMAT_TEXT, 0, 0, 0, MP_CSV_NODES)}[0], &s));
    T_CHECK(s && strstr(s, "fwd MACs:               2.05 K\xc2\xb7" "batch\xc2\xb7seq + "
                           "32\xc2\xb7" "batch\xc2\xb7seq\xc2\xb2\n"));
    mp_string_free(s);
    /* the model left as the profile found it: the same report without them */
    mp_formulas *keep = p->formulas;
    char *before = NULL, *after = NULL;
    p->formulas = NULL;
    T_OK(mp_report_string(p, &(mp_report_options[]){ropts(MP_FORMAT_JSON, -1, 1, 1, MP_CSV_NODES)}[0], &after));
    mp_profile *q = tb_prof(m);
    if (q) T_OK(mp_report_string(q, &(mp_report_options[]){ropts(MP_FORMAT_JSON, -1, 1, 1, MP_CSV_NODES)}[0], &before));
    T_CHECK(before && after && strcmp(before, after) == 0);
    mp_string_free(before);
    mp_string_free(after);
    mp_profile_free(q);
    p->formulas = keep;
    /* and at points: the same model profiled at the dims */
    static const int64_t pts[][2] = {{1, 1}, {7, 300}, {300, 7}, {64, 4096}};
    for (size_t j = 0; j < MP_ARRAY_LEN(pts); j++) {
        T_OK(mp_model_set_dim(m, "batch", pts[j][0]));
        T_OK(mp_model_set_dim(m, "seq", pts[j][1]));
        q = tb_prof(m);
        if (q) T_CHECK(compare_at("hand", p->formulas, q, pts[j]) > 6);
        mp_profile_free(q);
    }
    tb_done(m, p);
}

/* The acceptance set: dynamo exports of BERT, GPT-2 and two LLMs with GQA
 * (Llama-3.2-1B's sizes, 4 layers; Qwen3, 2 layers), and the other dynamo
 * transformers, at three (batch, seq) points each. */
static void t_dynamo(void) {
    static const char *const files[] = {
        "models/dynamo/bert_base_dynamo.onnx", "models/dynamo/gpt2_dynamo.onnx",
        "models/dynamo/llama_1b_4layers_dynamo.onnx", "models/dynamo/qwen3_2layers.onnx",
        "models/dynamo/distilbert_base.onnx", "models/dynamo/opt_125m.onnx",
        "models/dynamo/pythia_70m.onnx",
    };
    static const int64_t pts[][2] = {{1, 128}, {7, 300}, {3, 77}};
    for (size_t i = 0; i < MP_ARRAY_LEN(files); i++) {
        mp_profile *p = NULL;
        int n = check_file(files[i], pts, 3, 2, &p);
        T_CHECK(n > 3 * 6);
        if (p && p->formulas) {
            T_EQ(p->formulas->n_skips, 0);
            for (int f = 0; f < MP_FF_COUNT; f++) T_CHECK(p->formulas->total.f[f].ok);
            T_CHECK(p->formulas->n_peak > 0);
        }
        free_kept(p);
    }
}

/* The TorchScript exports of the same kinds of model. */
static void t_torchscript(void) {
    static const char *const files[] = {"models/bert_base.onnx", "models/gpt2.onnx",
                                        "models/llama_small.onnx"};
    static const int64_t pts[][2] = {{1, 128}, {7, 300}, {2, 512}};
    for (size_t i = 0; i < MP_ARRAY_LEN(files); i++) {
        mp_profile *p = NULL;
        T_CHECK(check_file(files[i], pts, 3, 2, &p) > 3 * 6);
        if (p && p->formulas) T_EQ(p->formulas->n_skips, 0);
        free_kept(p);
    }
}

/* BERT's position table has 512 rows: the range of seq ends there, and
 * the message names the Gather that fails one step past it. */
static void t_range(void) {
    mp_profile *p = NULL;
    check_file("models/bert_base.onnx", NULL, 0, 2, &p);
    const mp_formulas *F = p ? p->formulas : NULL;
    if (F) {
        T_EQ(F->range[1].hi, 512);
        T_CHECK(F->range[1].hi_bounded);
        T_CHECK(F->range[1].hi_why &&
                strstr(F->range[1].hi_why, "/bert/embeddings/position_embeddings/Gather"));
        T_EQ(F->range[0].hi, 65536);
        T_CHECK(!F->range[0].hi_bounded && !F->range[0].lo_bounded);
    }
    free_kept(p);
}

/* CNNs with a symbolic batch: every cost is a polynomial of degree 1. */
static void t_cnn_batch(void) {
    static const int64_t pts[][2] = {{1, 0}, {7, 0}, {300, 0}};
    mp_profile *p = NULL;
    T_CHECK(check_file("models/resnet50.onnx", pts, 3, 1, &p) > 3 * 6);
    if (p && p->formulas) {
        T_EQ(p->formulas->degree[0], 1);
        T_EQ(p->formulas->n_skips, 0);
        T_EQ(p->formulas->n_peak, 1);
    }
    free_kept(p);
    /* no free dim: constants, the profile itself */
    T_CHECK(check_file("models/dynamo/timm_resnet18_folded.onnx", pts, 1, 0, NULL) > 6);
}

/* A symbolic image size: a stride-2 Conv's output is ceil(h / 2), no
 * polynomial. That Conv is named (in h), the nodes after it up to the
 * global pooling are left out too, and the rest (the first Conv, the Gemm
 * after the pooling) keep their formulas, equal to the profile's figures
 * less the nodes left out. */
static void t_cnn_spatial(void) {
    mp_model *m = tb_new(17);
    int64_t b = tb_sym(m, "batch"), h = tb_sym(m, "h"), w = tb_sym(m, "w");
    tb_input(m, "x", MP_DT_FLOAT, 4, TB_DIMS(b, 3, h, w));
    tb_weight(m, "w1", MP_DT_FLOAT, 4, TB_DIMS(8, 3, 3, 3));
    tb_weight(m, "w2", MP_DT_FLOAT, 4, TB_DIMS(16, 8, 3, 3));
    tb_weight(m, "fc", MP_DT_FLOAT, 2, TB_DIMS(10, 16));
    int c1 = tb_node(m, "Conv", "x,w1", "c1");
    tb_attr_ints(m, c1, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_node(m, "Relu", "c1", "r1");
    int c2 = tb_node(m, "Conv", "r1,w2", "c2");
    tb_name(m, c2, "/conv2/Conv");
    tb_attr_ints(m, c2, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_attr_ints(m, c2, "strides", 2, TB_DIMS(2, 2));
    tb_node(m, "Relu", "c2", "r2");
    tb_node(m, "GlobalAveragePool", "r2", "gp");
    tb_node(m, "Flatten", "gp", "f");
    int fc = tb_node(m, "Gemm", "f,fc", "y");
    tb_attr_i(m, fc, "transB", 1);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    if (!p) return;
    T_OK(mp_profile_formulas(p));
    const mp_formulas *F = p->formulas;
    if (F) {
        T_EQ(F->n_vars, 3);
        T_EQ(F->n_skips, 3); /* conv2, its Relu, the pooling */
        int origins = 0;
        for (int j = 0; j < F->n_skips; j++) {
            if (!F->skips[j].origin) continue;
            origins++;
            T_EQ(F->skips[j].node, c2);
            T_EQ(F->skips[j].kind, MP_FX_DEGREE);
            T_EQ_STR(m->syms[F->vars[F->skips[j].var]].name, "h");
        }
        T_EQ(origins, 1);
        /* the rest: conv1 (216 MACs a pixel) and the Gemm (160 a sample),
         * a lower bound: the model's MACs have no formula */
        T_CHECK(F->total.f[MP_FF_MACS].partial && !mp_poly_exact(&F->total.f[MP_FF_MACS]));
        T_EQ(F->total.f[MP_FF_MACS].n, 2);
        T_TERM(&F->total.f[MP_FF_MACS], 1, 0, 160);
        T_CHECK(F->n_peak == 0 && F->peak_why);
        static const int64_t pts[][3] = {{1, 1, 1}, {7, 224, 224}, {3, 301, 17}, {2, 64, 65}};
        for (size_t j = 0; j < MP_ARRAY_LEN(pts); j++) {
            T_OK(mp_model_set_dim(m, "batch", pts[j][0]));
            T_OK(mp_model_set_dim(m, "h", pts[j][1]));
            T_OK(mp_model_set_dim(m, "w", pts[j][2]));
            mp_profile *q = tb_prof(m);
            if (q) T_CHECK(compare_at("cnn", F, q, pts[j]) > 6);
            mp_profile_free(q);
        }
    }
    tb_done(m, p);
}

/* The polynomial printer: display (text) and plain (CSV) forms, signs,
 * fractions, a coefficient of 1 left out. */
static void t_print(void) {
    mp_model *m = hand_model();
    mp_profile *p = tb_prof(m);
    if (!p) return;
    T_OK(mp_profile_formulas(p));
    mp_formulas *F = p->formulas;
    if (!F) return;
    mp_term t[4] = {{.num = 3, .den = 1},
                    {.num = -1, .den = 2, .exp = {0, 2}},
                    {.num = 85000000, .den = 1, .exp = {1, 1}},
                    {.num = 1, .den = 1, .exp = {1, 2}}};
    mp_poly q = {t, 4, true}, keep_total = F->total.f[MP_FF_MACS], keep_root = F->mods[0].f[MP_FF_MACS];
    F->total.f[MP_FF_MACS] = q;
    F->mods[0].f[MP_FF_MACS] = q;
    F->total.f[MP_FF_FLOPS].ok = false;
    char *s = NULL;
    T_OK(mp_report_string(p, &(mp_report_options[]){ropts(MP_FORMAT_TEXT, 0, 0, 0, MP_CSV_NODES)}[0], &s));
    T_CHECK(s && strstr(s, "fwd MACs:               3 - 1/2\xc2\xb7seq\xc2\xb2 + 85 M\xc2\xb7"
                           "batch\xc2\xb7seq + batch\xc2\xb7seq\xc2\xb2\n"));
    T_CHECK(s && strstr(s, "fwd FLOPs:              ?\n"));
    mp_string_free(s);
    s = NULL;
    T_OK(mp_report_string(p, &(mp_report_options[]){ropts(MP_FORMAT_CSV, 0, 0, 0, MP_CSV_MODULES)}[0], &s));
    T_CHECK(s && strstr(s, ",3-1/2*seq^2+85000000*batch*seq+batch*seq^2,"));
    mp_string_free(s);
    s = NULL;
    T_OK(mp_report_string(p, &(mp_report_options[]){ropts(MP_FORMAT_JSON, -1, 1, 1, MP_CSV_NODES)}[0], &s));
    T_CHECK(s && strstr(s, "\"macs\": [{\"coef\": 3, \"dims\": {}}, {\"coef\": -0.5, \"fraction\": "
                           "[-1, 2], \"dims\": {\"seq\": 2}}"));
    T_CHECK(s && strstr(s, "\"flops\": null"));
    if (s) t_json_dump("profile", s, strlen(s));
    mp_string_free(s);
    uint64_t v = 0;
    T_CHECK(mp_poly_eval(&q, 2, (const int64_t[]){1, 2}, &v)); /* 3 - 2 + 170000000 + 4 */
    T_EQ_U64(v, 170000005);
    T_CHECK(!mp_poly_eval(&q, 2, (const int64_t[]){1, 1}, &v)); /* 1/2 is no integer */
    F->total.f[MP_FF_MACS] = keep_total;
    F->mods[0].f[MP_FF_MACS] = keep_root;
    tb_done(m, p);
}

/* --formula from the command line: the JSON's POLY lists evaluated at three
 * points equal every module's figures in the JSON of `--dim` runs. */
static jr *cli_json(const char *const *args) {
    t_cli r = t_cli_run(args, 60, 0);
    T_EQ(r.code, 0);
    jr *j = r.code == 0 ? jr_parse(r.out, r.out_len, NULL) : NULL;
    T_CHECK(j != NULL);
    t_cli_free(&r);
    return j;
}

static bool poly_at(const jr *poly, int64_t batch, int64_t seq, uint64_t *out) {
    if (!poly || poly->type != JR_ARR) return false;
    __int128 sum = 0;
    for (const jr *t = poly->child; t; t = t->next) {
        const jr *c = jr_get(t, "coef"), *d = jr_get(t, "dims");
        if (!c || !c->is_int || !d || jr_get(t, "fraction")) return false;
        __int128 v = c->i;
        for (const jr *e = d->child; e; e = e->next)
            for (int k = 0; k < e->i; k++) v *= strcmp(e->key, "batch") == 0 ? batch : seq;
        sum += v;
    }
    *out = (uint64_t)sum;
    return sum >= 0;
}

static void t_command_line(void) {
    const char *model = "models/dynamo/qwen3_2layers.onnx";
    jr *f = cli_json((const char *[]){"--formula", "--format", "json", "-q", model, NULL});
    if (!f) return;
    T_CHECK(jr_path(f, "formulas.macs") != NULL);
    T_EQ(jr_len(jr_path(f, "formulas.dims")), 2);
    static const int64_t pts[][2] = {{1, 1}, {7, 300}, {4, 2048}};
    static const char *const fields[] = {"params", "macs", "flops", "bytes_read",
                                         "bytes_written", "act_bytes"};
    int compared = 0;
    for (size_t j = 0; j < MP_ARRAY_LEN(pts); j++) {
        char b[32], s[32];
        snprintf(b, sizeof b, "batch=%lld", (long long)pts[j][0]);
        snprintf(s, sizeof s, "seq=%lld", (long long)pts[j][1]);
        jr *q = cli_json((const char *[]){"--dim", b, "--dim", s, "--format", "json", "-q", model, NULL});
        if (!q) continue;
        const jr *fm = jr_get(f, "modules"), *qm = jr_get(q, "modules");
        T_EQ(jr_len(fm), jr_len(qm));
        for (int i = 0; i < jr_len(fm) && i < jr_len(qm); i++) {
            const jr *a = jr_at(fm, i), *c = jr_at(qm, i);
            for (size_t k = 0; k < MP_ARRAY_LEN(fields); k++) {
                uint64_t got = 0;
                const jr *want = jr_get(c, fields[k]);
                char path[64];
                snprintf(path, sizeof path, "formulas.%s", fields[k]);
                T_CHECK(poly_at(jr_path(a, path), pts[j][0], pts[j][1], &got));
                T_CHECK(want && want->is_int && (uint64_t)want->i == got);
                compared++;
            }
        }
        uint64_t got = 0;
        T_CHECK(poly_at(jr_path(f, "formulas.flops"), pts[j][0], pts[j][1], &got));
        T_EQ_U64(got, (uint64_t)jr_path(q, "total.flops")->i);
        jr_free(q);
    }
    T_CHECK(compared > 3 * 6 * 10);
    jr_free(f);
    /* the text and CSV carry them too */
    t_cli r = t_cli_run((const char *[]){"--formula", "-q", "--no-detailed", model, NULL}, 60, 0);
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "Formulas in batch, seq") && strstr(r.out, "fwd MACs:"));
    t_cli_free(&r);
    r = t_cli_run((const char *[]){"--formula", "-q", "--format", "csv", "--csv-table", "modules",
                                   model, NULL}, 60, 0);
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, ",macs_formula,") && strstr(r.out, "*batch*seq"));
    t_cli_free(&r);
}

/* A CNN with symbolic batch, height and width (torchvision's ResNet-18,
 * models/resnet18_dynamic_hw.onnx): the strided convolutions and pooling
 * make the spatial sizes floors, so the backbone's costs are no
 * polynomials. The model's MACs, FLOPs and bytes then have no formula (the
 * polynomial of the rest, the fc layer's 512 K·batch, is only a lower
 * bound, and every report says so); the params, the fc module and the
 * modules whose left-out nodes add nothing to a figure keep exact ones. */
static void t_cnn_hw(void) {
    const char *path = "models/resnet18_dynamic_hw.onnx";
    mp_model *m = NULL;
    mp_profile *p = NULL;
    T_OK(mp_model_load(path, &m));
    if (!m) return;
    T_OK(mp_profile_static(m, &p));
    T_OK(mp_profile_formulas(p));
    const mp_formulas *F = p ? p->formulas : NULL;
    T_CHECK(F != NULL);
    if (F) {
        T_EQ(F->n_vars, 3);
        T_CHECK(F->n_skips > 40);
        for (int f = MP_FF_MACS; f < MP_FF_COUNT; f++) {
            T_CHECK(F->total.f[f].ok && F->total.f[f].partial);
            T_CHECK(!mp_poly_exact(&F->total.f[f]));
        }
        T_CHECK(mp_poly_exact(&F->total.f[MP_FF_PARAMS]));
        T_EQ(F->total.f[MP_FF_MACS].n, 1);
        T_TERM(&F->total.f[MP_FF_MACS], 1, 0, 512000); /* fc: 512 x 1000 a sample */
        int fc = mp_strmap_get(&m->module_paths, "fc"), conv1 = mp_strmap_get(&m->module_paths, "conv1"),
            bn1 = mp_strmap_get(&m->module_paths, "bn1");
        T_CHECK(fc > 0 && conv1 > 0 && bn1 > 0);
        if (fc > 0 && conv1 > 0 && bn1 > 0) {
            T_CHECK(mp_poly_exact(&F->mods[fc].f[MP_FF_MACS]));
            T_CHECK(!mp_poly_exact(&F->mods[conv1].f[MP_FF_MACS]));
            T_CHECK(mp_poly_exact(&F->mods[bn1].f[MP_FF_MACS])); /* BatchNorm: no MACs at any size */
            T_EQ(F->mods[bn1].f[MP_FF_MACS].n, 0);
            T_CHECK(!mp_poly_exact(&F->mods[bn1].f[MP_FF_FLOPS]));
        }
        /* at sizes far from the ones built from: an exact formula is the
         * profile's figure, a partial one the rest's */
        static const int64_t pts[][3] = {{1, 224, 224}, {3, 97, 131}};
        for (size_t j = 0; j < MP_ARRAY_LEN(pts); j++) {
            mp_model *m2 = NULL;
            mp_profile *q = NULL;
            T_OK(mp_model_load(path, &m2));
            if (!m2) continue;
            for (int i = 0; i < 3; i++) T_OK(mp_model_set_dim(m2, m->syms[F->vars[i]].name, pts[j][i]));
            T_OK(mp_profile_static(m2, &q));
            if (q) {
                T_CHECK(compare_at(path, F, q, pts[j]) > 6);
                for (int md = -1; md < m2->n_modules; md++)
                    for (int f = 0; f < MP_FF_COUNT; f++) {
                        const mp_poly *y = md < 0 ? &F->total.f[f] : &F->mods[md].f[f];
                        uint64_t got = 0;
                        if (!mp_poly_exact(y)) continue;
                        T_CHECK(mp_poly_eval(y, 3, pts[j], &got));
                        T_EQ_U64(got, fig_field(md < 0 ? &q->total : &q->mods[md], f));
                    }
            }
            mp_profile_free(q);
            mp_model_free(m2);
        }
    }
    free_kept(p);
    /* the reports: no exact-looking line for the model */
    t_cli r = t_cli_run((const char *[]){"--formula", "-q", "--no-detailed", "--no-ops", "--top", "0",
                                         path, NULL}, 120, 0);
    T_EQ(r.code, 0);
    const char *l = strstr(r.out, "Formulas in batch, height, width");
    l = l ? strstr(l, "\nfwd MACs:") : NULL;
    T_CHECK(l && strncmp(l + 1, "fwd MACs:               ? (at least 512 K\xc2\xb7" "batch)\n", 50) == 0);
    T_CHECK(strstr(r.out, "\nparams:                 11.69 M\n") != NULL);
    T_CHECK(strstr(r.out, "  fc: params = 513 K; MACs = 512 K\xc2\xb7" "batch;") != NULL);
    t_cli_free(&r);
    jr *j = cli_json((const char *[]){"--formula", "--format", "json", "-q", path, NULL});
    if (j) {
        T_CHECK(jr_path(j, "formulas.macs") && jr_path(j, "formulas.macs")->type == JR_NULL);
        T_CHECK(jr_path(j, "formulas.at_least.macs") && jr_path(j, "formulas.at_least.macs")->type == JR_ARR);
        T_CHECK(jr_path(j, "formulas.params") && jr_path(j, "formulas.params")->type == JR_ARR);
        T_CHECK(jr_path(j, "formulas.at_least.params") == NULL);
        const jr *mods = jr_get(j, "modules");
        int seen = 0;
        for (int i = 0; i < jr_len(mods); i++) {
            const jr *md = jr_at(mods, i);
            if (strcmp(jr_get(md, "path")->s, "fc") == 0) {
                T_CHECK(jr_path(md, "formulas.macs")->type == JR_ARR);
                seen++;
            } else if (strcmp(jr_get(md, "path")->s, "conv1") == 0) {
                T_CHECK(jr_path(md, "formulas.macs")->type == JR_NULL);
                T_CHECK(jr_path(md, "formulas.at_least") == NULL); /* the rest is 0: nothing to add */
                seen++;
            }
        }
        T_EQ(seen, 2);
        jr_free(j);
    }
    r = t_cli_run((const char *[]){"--formula", "-q", "--format", "csv", "--csv-table", "modules", path, NULL},
                  120, 0);
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "\r\n0,,resnet18_dynamic_hw,") != NULL);
    /* the root row ends with six formula fields: params, then five empty */
    const char *root = strstr(r.out, "\r\n0,,");
    const char *eol = root ? strstr(root + 2, "\r\n") : NULL;
    T_CHECK(eol && eol - root > 8 && strncmp(eol - 5, ",,,,,", 5) == 0 && eol[-6] != ',');
    t_cli_free(&r);
}

/* Per-module formulas name modules by their path, as the tree and the
 * by-module-op table do: a dynamo export's classes repeat (timm's
 * MobileNetV3: Sequential, DepthwiseSeparableConv, InvertedResidual ...). */
static void t_module_paths(void) {
    const char *path = "models/dynamo/timm_mobilenetv3_large_100.onnx";
    jr *j = cli_json((const char *[]){"--format", "json", "-q", path, NULL});
    t_cli r = t_cli_run((const char *[]){"--formula", "-q", "--no-detailed", "--no-ops", "--top", "0",
                                         "--depth", "2", path, NULL}, 120, 0);
    T_EQ(r.code, 0);
    const char *at = strstr(r.out, "per module (to depth 2):\n");
    T_CHECK(at != NULL);
    const jr *mods = j ? jr_get(j, "modules") : NULL;
    int want = 0, line = 0;
    for (int i = 0; i < jr_len(mods); i++)
        if (jr_get(jr_at(mods, i), "depth")->i <= 2) want++;
    T_CHECK(want > 10);
    at = at ? strchr(at, '\n') + 1 : NULL;
    for (int i = 0; at && *at && *at != '\n' && *at != '-' && i < jr_len(mods); i++) {
        const jr *md = jr_at(mods, i);
        if (jr_get(md, "depth")->i > 2) continue;
        const char *name = line == 0 ? jr_get(md, "name")->s : jr_get(md, "path")->s;
        const char *s = at;
        while (*s == ' ') s++;
        size_t n = strlen(name);
        if (strncmp(s, name, n) != 0 || strncmp(s + n, ": params = ", 11) != 0) {
            mp_t_fail(__FILE__, __LINE__, "module %d: the line '%.60s' does not name '%s'", i, s, name);
            break;
        }
        line++;
        at = strchr(at, '\n');
        if (at) at++;
    }
    T_EQ(line, want);
    t_cli_free(&r);
    jr_free(j);
}

/* The formulas' closing lines: a model with no free dim is not "built from
 * 1 static profiles ... e.g. ()"; one free dim has no "other dims". */
static void t_wording(void) {
    t_cli r = t_cli_run((const char *[]){"--formula", "-q", "--no-detailed", "--no-ops", "--top", "0",
                                         "models/dynamo/timm_mobilenetv3_large_100.onnx", NULL}, 120, 0);
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "checked:                no free dim: the formulas are the figures of the static "
                          "profile\n") != NULL);
    T_CHECK(!strstr(r.out, "static profiles") && !strstr(r.out, "e.g. ()") && !strstr(r.out, "1 further points"));
    t_cli_free(&r);
    r = t_cli_run((const char *[]){"--formula", "-q", "--no-detailed", "--no-ops", "--top", "0",
                                   "models/mobilenet_v2.onnx", NULL}, 120, 0);
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "checked range:          batch from 1 to 65536\n") != NULL);
    T_CHECK(!strstr(r.out, "the other dims"));
    t_cli_free(&r);
}

MP_TESTS(formula){
    {"hand", t_hand},
    {"print", t_print},
    {"dynamo", t_dynamo},
    {"torchscript", t_torchscript},
    {"range", t_range},
    {"cnn_batch", t_cnn_batch},
    {"cnn_spatial", t_cnn_spatial},
    {"cli", t_command_line},
    {"cnn_hw", t_cnn_hw},
    {"module_paths", t_module_paths},
    {"wording", t_wording},
};
MP_TESTS_END(formula)
