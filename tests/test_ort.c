/* ONNX Runtime's profile in the module tree (--ort-profile, src/import/ort.c):
 * the naming rules on a profile written here by hand (every figure worked
 * out beside it), then the profiles ONNX Runtime itself wrote for ResNet-50
 * and BERT-base at optimisation levels disabled and all (tests/ort/,
 * tools/ort_profiles.py), against their own node events. */
#include "analyze/profile.h"
#include "jsonr.h"
#include "tbuild.h"
#include "tcli.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

static bool near(double a, double b) { return fabs(a - b) <= 1e-12 + 1e-9 * fabs(b); }

/* ---- the rules, on a profile written by hand ----
 *
 * x[1,4,8] -> MatMul W[8,8] (fc) -> Add b (fc) -> Relu (act) -> Mul c
 * (scale) -> Sigmoid (gate) -> Tanh (out) -> Neg (post) -> z
 *
 * Events, as ONNX Runtime names them (times per run in us, runs 1-3):
 *   "fused /fc/MatMul"              FusedMatMul   100 10 14  (a fusion's name: MatMul)
 *   "/scale/Mul/MulScaleFusion/"    Mul            50  4  6  (a fusion's name: Mul)
 *   "Sigmoid_token_2"               Sigmoid        30  3  5  (its kind only: by its place)
 *   "t_nchwc"                       Tanh           20  2  2  (a value's name: Tanh makes t)
 *   "/post/Neg"                     Neg            20  2  4  (a node's name)
 *   "ReorderOutput"                 ReorderOutput   5  1  1  (added by ORT: unmatched)
 *   "Mystery_token_1"               Mystery         9  1  3  (nothing between: unmatched)
 * model_run: 300, 60, 80 us. */
typedef struct hev {
    const char *name, *op;
    int us[3];
} hev;

static const hev hevs[] = {
    {"fused /fc/MatMul", "FusedMatMul", {100, 10, 14}},
    {"/scale/Mul/MulScaleFusion/", "Mul", {50, 4, 6}},
    {"Sigmoid_token_2", "Sigmoid", {30, 3, 5}},
    {"t_nchwc", "Tanh", {20, 2, 2}},
    {"/post/Neg", "Neg", {20, 2, 4}},
    {"ReorderOutput", "ReorderOutput", {5, 1, 1}},
    {"Mystery_token_1", "Mystery", {9, 1, 3}},
};
static const int hrun[3] = {300, 60, 80};

static const char *hand_profile(void) {
    const char *path = mp_t_path("hand.json");
    FILE *f = fopen(path, "w");
    fputs("[\n{\"cat\": \"Session\", \"pid\": 7, \"tid\": 7, \"dur\": 1000, \"ts\": 1, \"ph\": \"X\", "
          "\"name\": \"session_initialization\", \"args\": {}}", f);
    for (int r = 0; r < 3; r++) {
        long ts = 10000L * (r + 1), at = ts + 1;
        for (size_t e = 0; e < sizeof hevs / sizeof hevs[0]; e++) {
            fprintf(f, ",\n{\"cat\": \"Node\", \"pid\": 7, \"tid\": 7, \"dur\": %d, \"ts\": %ld, \"ph\": \"X\", "
                       "\"name\": \"%s_kernel_time\", \"args\": {\"op_name\": \"%s\", \"provider\": "
                       "\"CPUExecutionProvider\"%s}}",
                    hevs[e].us[r], at, hevs[e].name, hevs[e].op,
                    e == 0 ? ", \"thread_scheduling_stats\": {\"main_thread\": {\"core\": 1}, \"sub_threads\": "
                             "{\"139\": {\"num_run\": 1}}}"
                           : "");
            fprintf(f, ",\n{\"cat\": \"Node\", \"pid\": 7, \"tid\": 7, \"dur\": 1, \"ts\": %ld, \"ph\": \"X\", "
                       "\"name\": \"%s_fence_after\", \"args\": {\"op_name\": \"%s\"}}",
                    at + hevs[e].us[r], hevs[e].name, hevs[e].op);
            at += hevs[e].us[r] + 1;
        }
        fprintf(f, ",\n{\"cat\": \"Session\", \"pid\": 7, \"tid\": 7, \"dur\": %d, \"ts\": %ld, \"ph\": \"X\", "
                   "\"name\": \"model_run\", \"args\": {}}",
                hrun[r], ts);
    }
    fputs("\n]\n", f);
    fclose(f);
    return path;
}

static mp_model *hand_model(int *nodes) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 3, TB_DIMS(1, 4, 8));
    tb_weight(m, "W", MP_DT_FLOAT, 2, TB_DIMS(8, 8));
    tb_weight(m, "b", MP_DT_FLOAT, 1, TB_DIMS(8));
    tb_const_f(m, "c", MP_DT_FLOAT, 1, TB_DIMS(1), (const double[]){0.5});
    static const char *const op[] = {"MatMul", "Add", "Relu", "Mul", "Sigmoid", "Tanh", "Neg"};
    static const char *const in[] = {"x,W", "h0,b", "h1", "h2,c", "h3", "h4", "t"};
    static const char *const out[] = {"h0", "h1", "h2", "h3", "h4", "t", "z"};
    static const char *const name[] = {"/fc/MatMul", "/fc/Add", "/act/Relu", "/scale/Mul",
                                       "/gate/Sigmoid", "/out/Tanh", "/post/Neg"};
    static const char *const mod[] = {"fc", "fc", "act", "scale", "gate", "out", "post"};
    for (int i = 0; i < 7; i++) {
        nodes[i] = tb_node(m, op[i], in[i], out[i]);
        tb_name(m, nodes[i], name[i]);
        m->graph->nodes[nodes[i]].module = mp_model_module(m, mod[i], strlen(mod[i]));
    }
    tb_output(m, "z");
    return m;
}

static void t_rules(void) {
    int k[7];
    mp_model *m = hand_model(k);
    mp_profile *p = tb_prof(m);
    if (!p) return;
    const char *path = hand_profile();
    mp_ort_options o;
    mp_ort_options_default(&o);
    o.peak_gflops = 10;
    T_OK(mp_profile_ort(p, path, &o));
    const mp_runinfo *r = &p->run;
    T_EQ_STR(r->source, "onnxruntime");
    /* three runs, the first a warm-up: the means of runs 2 and 3 */
    T_EQ(r->imported.runs, 3);
    T_EQ(r->warmup, 1);
    T_EQ(r->iters, 2);
    T_EQ(r->threads, 2); /* the main thread and one sub-thread */
    /* the whole runs: model_run 60 and 80 us */
    T_CHECK(near(r->lat_median_s, 70e-6));
    T_CHECK(near(r->lat_min_s, 60e-6));
    /* kernels per run: 23 and 35 us (the fences are not kernels) */
    T_CHECK(near(r->kernels_median_s, 29e-6));
    T_CHECK(near(r->imported.node_time_s, 29e-6));
    /* how each event was placed */
    T_EQ(r->imported.events, 7);
    T_EQ(r->imported.exact, 1);   /* /post/Neg */
    T_EQ(r->imported.renamed, 3); /* fused /fc/MatMul, /scale/Mul/..., t_nchwc */
    T_EQ(r->imported.by_order, 1); /* Sigmoid_token_2: between Mul and Tanh */
    T_EQ(r->imported.unmatched, 2);
    T_CHECK(near(r->imported.unmatched_s, 3e-6)); /* ReorderOutput 1, Mystery 2 */
    T_EQ(p->n_unplaced, 2);
    T_EQ_STR(p->unplaced[0].name, "Mystery_token_1_kernel_time");
    T_CHECK(near(p->unplaced[0].latency_s, 2e-6));
    /* Add and Relu ran inside the fused MatMul (its bias and activation):
     * placed by the graph */
    T_EQ(r->imported.nodes_by_graph, 2);
    T_EQ(r->imported.nodes_not_run, 0);
    T_EQ(p->node_state[k[0]], MP_NODE_RUN);
    T_EQ(p->node_state[k[1]], MP_NODE_FUSED);
    T_EQ(p->node_state[k[2]], MP_NODE_FUSED);
    T_EQ(p->node_head[k[2]], k[0]);
    T_EQ(p->node_state[k[4]], MP_NODE_RUN);
    T_CHECK(near(p->node_lat[k[0]], 12e-6));
    T_CHECK(near(p->node_lat_min[k[0]], 10e-6));
    T_CHECK(near(p->node_lat[k[4]], 4e-6));
    T_CHECK(near(p->node_lat[k[5]], 2e-6));
    T_EQ_STR(p->node_group[k[0]], "FusedMatMul(MatMul+Add+Relu)");
    /* the fused event's 12 us by FLOPs: MatMul 1x4x8x8 = 256 MACs, 512
     * FLOPs; Add 32, Relu 32: act (the Relu) gets 12 x 32 / 576 */
    int act = mp_strmap_get(&m->module_paths, "act"), fc = mp_strmap_get(&m->module_paths, "fc");
    T_CHECK(near(p->mods[act].latency_s, 12e-6 * 32 / 576));
    T_CHECK(near(p->mods[fc].latency_s, 12e-6 * 544 / 576));
    T_EQ(p->mod_fused[act], fc + 1);
    /* the root: all placed time, 29 - 3 */
    T_CHECK(near(p->mods[0].latency_s, 26e-6));
    /* the runtime's op types as kernel groups */
    bool fm = false;
    for (int i = 0; i < p->n_groups; i++)
        if (!strcmp(p->groups[i].name, "FusedMatMul")) {
            fm = true;
            T_CHECK(p->groups[i].fused);
            T_EQ_U64(p->groups[i].flops, 576);
            T_EQ_STR(p->groups[i].kernel, "CPUExecutionProvider");
        }
    T_CHECK(fm);
    /* --warmup 0: all three runs */
    o.warmup = 0;
    T_OK(mp_profile_ort(p, path, &o));
    T_CHECK(near(p->node_lat[k[0]], 124e-6 / 3));
    T_EQ(p->run.iters, 3);
    o.warmup = 3;
    T_EQ(mp_profile_ort(p, path, &o), MP_ERR_USAGE);
    T_CHECK(strstr(mp_last_error(), "--warmup 3 leaves none of its 3 runs") != NULL);
    T_CHECK(!p->measured);
    tb_done(m, p);
}

/* Files that are not such a profile: a message naming the file and what
 * is missing, never a crash. */
static void t_errors(void) {
    int k[7];
    mp_model *m = hand_model(k);
    mp_profile *p = tb_prof(m);
    if (!p) return;
    mp_ort_options o;
    mp_ort_options_default(&o);
    T_EQ(mp_profile_ort(p, "/nonexistent/prof.json", &o), MP_ERR_IO);
    T_CHECK(strstr(mp_last_error(), "/nonexistent/prof.json") != NULL);
    T_EQ(mp_profile_ort(p, "tests/traces/mobilenet_v2_sgd_loader.trace.json.gz", &o), MP_ERR_FORMAT);
    T_CHECK(strstr(mp_last_error(), "not an ONNX Runtime profile") != NULL);
    const char *cases[][2] = {
        {"[{\"cat\": \"Node\", \"pid\": 1, \"tid\": 1, \"dur\": 3, \"ts\": 5, \"ph\": \"X\", \"name\": "
         "\"/fc/MatMul_kernel_time\", \"args\": {}}]",
         "no \"model_run\" event"},
        {"[{\"cat\": \"Session\", \"pid\": 1, \"tid\": 1, \"dur\": 3, \"ts\": 5, \"ph\": \"X\", \"name\": "
         "\"model_run\", \"args\": {}}]",
         "no \"Node\" event"},
        {"[{\"cat\": \"Node\", \"pid\": 1, \"tid\": 1, \"dur\": -3, \"ts\": 5, \"ph\": \"X\", \"name\": "
         "\"x_kernel_time\", \"args\": {}}]",
         "absurd"},
        {"[{\"cat\": \"Node\", \"pid\": 1, \"tid\": 1, \"dur\": 3, \"ts\": 5, \"ph\": \"X\", \"name\": \"x_k", "truncated"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = mp_t_path("bad.json");
        FILE *f = fopen(path, "w");
        fputs(cases[i][0], f);
        fclose(f);
        T_EQ(mp_profile_ort(p, path, &o), MP_ERR_FORMAT);
        if (!strstr(mp_last_error(), cases[i][1]) || !strstr(mp_last_error(), path))
            mp_t_fail(__FILE__, __LINE__, "case %zu: '%s' does not say %s", i, mp_last_error(), cases[i][1]);
    }
    tb_done(m, p);
}

/* ---- the profiles ONNX Runtime wrote ---- */

/* The profile's own figures, read apart from modelprof (zlib and the test
 * JSON reader): per run kept (the first left out), its node events'
 * ("_kernel_time") time summed, averaged. */
static double own_node_time(const char *path, int *runs) {
    gzFile z = gzopen(path, "rb");
    T_CHECK(z != NULL);
    if (!z) return 0;
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    int n;
    while ((n = gzread(z, buf + len, (unsigned)(cap - len))) > 0) {
        len += (size_t)n;
        if (len == cap) buf = realloc(buf, cap *= 2);
    }
    gzclose(z);
    size_t err = 0;
    jr *root = jr_parse(buf, len, &err);
    free(buf);
    T_CHECK(root && root->type == JR_ARR);
    double ts[64], te[64];
    int nr = 0;
    for (const jr *e = root ? root->child : NULL; e; e = e->next) {
        const jr *cat = jr_get(e, "cat"), *nm = jr_get(e, "name");
        if (cat && !strcmp(cat->s, "Session") && !strcmp(nm->s, "model_run") && nr < 64) {
            ts[nr] = jr_get(e, "ts")->num;
            te[nr] = ts[nr] + jr_get(e, "dur")->num;
            nr++;
        }
    }
    for (int i = 1; i < nr; i++) /* by start */
        for (int j = i; j > 0 && ts[j] < ts[j - 1]; j--) {
            double a = ts[j], b = te[j];
            ts[j] = ts[j - 1], te[j] = te[j - 1];
            ts[j - 1] = a, te[j - 1] = b;
        }
    double sum = 0;
    for (const jr *e = root ? root->child : NULL; e; e = e->next) {
        const jr *cat = jr_get(e, "cat"), *nm = jr_get(e, "name");
        size_t l = nm ? strlen(nm->s) : 0;
        if (!cat || strcmp(cat->s, "Node") || l < 12 || strcmp(nm->s + l - 12, "_kernel_time")) continue;
        double t0 = jr_get(e, "ts")->num;
        for (int r = 1; r < nr; r++)
            if (t0 >= ts[r] && t0 <= te[r]) sum += jr_get(e, "dur")->num;
    }
    jr_free(root);
    *runs = nr;
    return nr > 1 ? sum * 1e-6 / (nr - 1) : 0;
}

static mp_profile *ort_profile(const char *model, const char *prof, bool seq, mp_model **mo) {
    mp_model *m = NULL;
    T_OK(mp_model_load(model, &m));
    *mo = m;
    if (!m) return NULL;
    T_OK(mp_model_set_dim(m, "batch", 1));
    if (seq) T_OK(mp_model_set_dim(m, "seq", 128));
    mp_profile *p = NULL;
    T_OK(mp_profile_static(m, &p));
    if (!p) return NULL;
    mp_ort_options o;
    mp_ort_options_default(&o);
    o.peak_gflops = 100;
    T_OK(mp_profile_ort(p, prof, &o));
    return p;
}

/* The acceptance of issue 24 point 3 on one profile: modelprof's per-run
 * latency and the root module's within 10% of the profile's node time per
 * run, the unmatched time at most 1% of it; and the split of each module
 * by operator adds up to its time. */
static void check_profile(const mp_profile *p, const char *prof) {
    int runs = 0;
    double node = own_node_time(prof, &runs);
    const mp_runinfo *r = &p->run;
    T_EQ(r->imported.runs, runs);
    T_EQ(r->iters, runs - 1);
    T_CHECK(node > 0 && near(r->imported.node_time_s, node));
    double lat = r->lat_median_s, root = p->mods[0].latency_s;
    if (fabs(lat / node - 1) > 0.10 || fabs(root / node - 1) > 0.10 || r->imported.unmatched_s > 0.01 * node)
        mp_t_fail(__FILE__, __LINE__, "%s: node time %.6f s per run, latency %.6f s, root %.6f s, unmatched %.6f s",
                  prof, node, lat, root, r->imported.unmatched_s);
    /* the root holds all the placed time */
    T_CHECK(fabs(root - (node - r->imported.unmatched_s)) <= 1e-9 * node);
    for (int md = 0; md < p->m->n_modules; md++) {
        double s = 0;
        for (int j = p->modop_at[md]; j < p->modop_at[md + 1]; j++)
            if (p->modops[j].fig.latency_s > 0) s += p->modops[j].fig.latency_s;
        if (fabs(s - p->mods[md].latency_s) > 1e-9 + 1e-9 * p->mods[md].latency_s)
            mp_t_fail(__FILE__, __LINE__, "module %s: its ops' time %.9g, its own %.9g", p->m->modules[md].path, s,
                      p->mods[md].latency_s);
    }
}

/* The group of the node named `name`: its head's group, with `n` nodes. */
static int group_of(const mp_profile *p, const char *name, const char **group) {
    const mp_graph *g = p->m->graph;
    int k = 0;
    while (k < g->n_nodes && strcmp(g->nodes[k].name, name)) k++;
    T_CHECK(k < g->n_nodes);
    if (k == g->n_nodes) return 0;
    int h = p->node_head[k], n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += p->node_head[i] == h && p->node_state[i] != MP_NODE_FOLDED;
    *group = p->node_group[h] ? p->node_group[h] : "";
    return n;
}

static void t_resnet50(void) {
    mp_model *m;
    mp_profile *p = ort_profile("models/resnet50.onnx", "tests/ort/resnet50_disabled.json.gz", false, &m);
    if (p) {
        check_profile(p, "tests/ort/resnet50_disabled.json.gz");
        /* nothing optimised: every node by its name, nothing fused */
        T_EQ(p->run.imported.events, p->run.imported.exact);
        T_EQ(p->run.fused, 0);
        T_CHECK(p->run.imported.unmatched_s == 0);
    }
    mp_profile_free(p);
    mp_model_free(m);
    p = ort_profile("models/resnet50.onnx", "tests/ort/resnet50_all.json.gz", false, &m);
    if (p) {
        check_profile(p, "tests/ort/resnet50_all.json.gz");
        /* the NCHWc convolutions, named after the value they compute: the
         * last one of a bottleneck has its BatchNorm, the residual Add and
         * the Relu after it */
        const char *gr = NULL;
        T_EQ(group_of(p, "/layer1/layer1.0/relu_2/Relu", &gr), 4);
        T_EQ_STR(gr, "Conv(Conv+BatchNormalization+Add+Relu)");
        T_EQ(group_of(p, "/layer1/layer1.0/downsample/downsample.1/BatchNormalization", &gr), 2);
        T_EQ_STR(gr, "Conv(Conv+BatchNormalization)");
        T_EQ(group_of(p, "/conv1/Conv", &gr), 3);
        T_EQ_STR(gr, "Conv(Conv+BatchNormalization+Relu)");
        /* no BatchNormalization ran alone */
        for (int i = 0; i < p->n_ops; i++)
            if (!strcmp(p->ops[i].op, "BatchNormalization")) T_EQ(p->ops[i].fig.fused, p->ops[i].fig.nodes);
        /* the layout conversion ORT added is the unmatched time */
        T_EQ(p->n_unplaced, 1);
        T_EQ_STR(p->unplaced[0].op, "ReorderOutput");
    }
    mp_profile_free(p);
    mp_model_free(m);
}

static void t_bert(void) {
    mp_model *m;
    mp_profile *p = ort_profile("models/bert_base.onnx", "tests/ort/bert_base_disabled.json.gz", true, &m);
    if (p) {
        check_profile(p, "tests/ort/bert_base_disabled.json.gz");
        T_EQ(p->run.imported.events, p->run.imported.exact);
        T_EQ(p->run.fused, 0);
    }
    mp_profile_free(p);
    mp_model_free(m);
    p = ort_profile("models/bert_base.onnx", "tests/ort/bert_base_all.json.gz", true, &m);
    if (p) {
        check_profile(p, "tests/ort/bert_base_all.json.gz");
        const char *gr = NULL;
        /* BiasGelu, named after its kind: the bias Add and the GELU, by
         * their place between the two MatMuls */
        T_EQ(group_of(p, "/bert/encoder/layer.3/intermediate/intermediate_act_fn/Erf", &gr), 6);
        T_EQ_STR(gr, "BiasGelu(Add+Div+Erf+Add+Mul+Mul)");
        /* LayerNormFusion, named after the scale's Mul */
        T_EQ(group_of(p, "/bert/encoder/layer.3/output/LayerNorm/Sqrt", &gr), 9);
        T_EQ_STR(gr, "LayerNormalization(ReduceMean+Sub+Pow+ReduceMean+Add+Sqrt+Div+Mul+Add)");
        /* MatMulScaleFusion: the scores' MatMul and its Div */
        T_EQ(group_of(p, "/bert/encoder/layer.3/attention/self/Div", &gr), 2);
        T_EQ_STR(gr, "FusedMatMul(MatMul+Div)");
        T_EQ(group_of(p, "/bert/pooler/activation/Tanh", &gr), 2);
        T_EQ_STR(gr, "FusedGemm(Gemm+Tanh)");
        T_EQ(p->run.imported.by_order, 12);
        T_EQ(p->run.imported.unmatched, 0);
    }
    mp_profile_free(p);
    mp_model_free(m);
}

/* The command line: a report that reads as a measured run, from the
 * profile; the flags that go with it and those that do not. */
static void t_cli_ort(void) {
    t_cli r = t_cli_run((const char *const[]){"models/resnet50.onnx", "--dim", "batch=1", "-q", "--ort-profile",
                                              "tests/ort/resnet50_all.json.gz", "--peak-gflops", "100", "--format",
                                              "json", NULL},
                        60, 0);
    T_EQ(r.code, 0);
    t_json_dump("profile", r.out, r.out_len);
    size_t err = 0;
    jr *root = jr_parse(r.out, r.out_len, &err);
    T_CHECK(root != NULL);
    T_EQ_STR(jr_path(root, "run.source")->s, "onnxruntime");
    T_CHECK(jr_path(root, "run.unmatched_s")->num > 0);
    T_EQ_STR(jr_at(jr_path(root, "run.unmatched"), 0)->child->s, "ReorderOutput_kernel_time");
    T_CHECK(jr_path(root, "run.peak_memory_bytes")->type == JR_NULL);
    T_CHECK(jr_path(root, "total.latency_s")->num > 0);
    const jr *mods = jr_get(root, "modules");
    T_CHECK(jr_get(jr_at(mods, 0), "fraction_of_peak")->num > 0);
    jr_free(root);
    t_cli_free(&r);
    r = t_cli_run((const char *const[]){"models/resnet50.onnx", "--dim", "batch=1", "-q", "--ort-profile",
                                        "tests/ort/resnet50_all.json.gz", "--peak-gflops", "100", NULL},
                  60, 0);
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "--- modelprof measured profile ---") != NULL);
    T_CHECK(strstr(r.out, "source:                 ONNX Runtime's profile tests/ort/resnet50_all.json.gz: 3 runs, 1 "
                          "left out as warm-up") != NULL);
    T_CHECK(strstr(r.out, "ReorderOutput_kernel_time") != NULL);
    t_cli_free(&r);
    /* `modelprof trace` says where such a profile goes */
    r = t_cli_run((const char *const[]){"trace", "tests/ort/resnet50_all.json.gz", NULL}, 60, 0);
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "--ort-profile tests/ort/resnet50_all.json.gz") != NULL);
    t_cli_free(&r);
    /* flags: with --run, or a run's own, refused; a model that is not the profile's */
    r = t_cli_run((const char *const[]){"models/resnet50.onnx", "--run", "--ort-profile", "x.json", NULL}, 60, 0);
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--ort-profile x.json with --run") != NULL);
    t_cli_free(&r);
    r = t_cli_run((const char *const[]){"models/resnet50.onnx", "--iters", "3", "--ort-profile", "x.json", NULL}, 60, 0);
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--iters: only a measured run uses it") != NULL);
    t_cli_free(&r);
    r = t_cli_run((const char *const[]){"models/resnet18.onnx", "--dim", "batch=1", "-q", "--ort-profile",
                                        "tests/ort/resnet50_all.json.gz", "--peak-gflops", "100", "--format", "json",
                                        NULL},
                  60, 0);
    /* another model: ResNet-18's first bottleneck conv is 3x3 where ResNet-50's is 1x1 */
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "its node '/layer1/layer1.0/relu/Relu_output_0_nchwc' (Conv) read [64,64,1,1] where the "
                          "model's node '/layer1/layer1.0/conv1/Conv' reads 'layer1.0.conv1.weight' of [64,64,3,3]") != NULL);
    t_cli_free(&r);
}


/* ---- the profile must be of this model, at these dims (issue 31 item 1) ---- */

/* An event of a profile written by hand, with the shapes ONNX Runtime
 * writes (NULL: none). */
typedef struct sev {
    const char *name, *op, *in, *out;
} sev;

/* The hand model with a node computing from a weight alone (Identity of c:
 * constant folding removes it, so an event for it says optimisations were
 * off). */
static mp_model *hand_model_folds(void) {
    int k[7];
    mp_model *m = hand_model(k);
    int id = tb_node(m, "Identity", "c", "c2");
    tb_name(m, id, "/c/Identity");
    mp_node *mul = &m->graph->nodes[k[3]];
    mul->in[1] = mp_graph_find(m->graph, "c2");
    return m;
}

/* The hand model's nodes run one by one under their own names, as with
 * optimisations off: x[1,4,8] @ W[8,8] + b[8], Relu, * c[1], Sigmoid, Tanh, Neg. */
static const sev exact_evs[] = {
    {"/c/Identity", "Identity", "[{\"float\":[1]}]", "[{\"float\":[1]}]"},
    {"/fc/MatMul", "MatMul", "[{\"float\":[1,4,8]},{\"float\":[8,8]}]", "[{\"float\":[1,4,8]}]"},
    {"/fc/Add", "Add", "[{\"float\":[1,4,8]},{\"float\":[8]}]", "[{\"float\":[1,4,8]}]"},
    {"/act/Relu", "Relu", "[{\"float\":[1,4,8]}]", "[{\"float\":[1,4,8]}]"},
    {"/scale/Mul", "Mul", "[{\"float\":[1,4,8]},{\"float\":[1]}]", "[{\"float\":[1,4,8]}]"},
    {"/gate/Sigmoid", "Sigmoid", "[{\"float\":[1,4,8]}]", "[{\"float\":[1,4,8]}]"},
    {"/out/Tanh", "Tanh", "[{\"float\":[1,4,8]}]", "[{\"float\":[1,4,8]}]"},
    {"/post/Neg", "Neg", "[{\"float\":[1,4,8]}]", "[{\"float\":[1,4,8]}]"},
};

/* Two runs of the events ev[0..n), each 10 us; ev[skip] left out (-1 none). */
static const char *shaped_profile(const sev *ev, int n, int skip) {
    const char *path = mp_t_path("shaped.json");
    FILE *f = fopen(path, "w");
    fputs("[\n{\"cat\": \"Session\", \"pid\": 7, \"tid\": 7, \"dur\": 1000, \"ts\": 1, \"ph\": \"X\", "
          "\"name\": \"session_initialization\", \"args\": {}}", f);
    for (int r = 0; r < 2; r++) {
        long ts = 10000L * (r + 1), at = ts + 1;
        for (int e = 0; e < n; e++) {
            if (e == skip) continue;
            fprintf(f, ",\n{\"cat\": \"Node\", \"pid\": 7, \"tid\": 7, \"dur\": 10, \"ts\": %ld, \"ph\": \"X\", "
                       "\"name\": \"%s_kernel_time\", \"args\": {\"op_name\": \"%s\"",
                    at, ev[e].name, ev[e].op);
            if (ev[e].in) fprintf(f, ", \"input_type_shape\" : %s", ev[e].in);
            if (ev[e].out) fprintf(f, ", \"output_type_shape\" : %s", ev[e].out);
            fputs(", \"provider\": \"CPUExecutionProvider\"}}", f);
            at += 11;
        }
        fprintf(f, ",\n{\"cat\": \"Session\", \"pid\": 7, \"tid\": 7, \"dur\": %ld, \"ts\": %ld, \"ph\": \"X\", "
                   "\"name\": \"model_run\", \"args\": {}}",
                at - ts + 1, ts);
    }
    fputs("\n]\n", f);
    fclose(f);
    return path;
}

/* mp_profile_ort on the hand model: its status, and the message holding `want`. */
static void expect_ort(const sev *ev, int n, int skip, mp_status want_st, const char *want) {
    mp_model *m = hand_model_folds();
    mp_profile *p = tb_prof(m);
    if (!p) return;
    mp_ort_options o;
    mp_ort_options_default(&o);
    mp_status st = mp_profile_ort(p, shaped_profile(ev, n, skip), &o);
    T_EQ(st, want_st);
    if (want && !strstr(mp_last_error(), want))
        mp_t_fail(__FILE__, __LINE__, "'%s' does not say '%s'", mp_last_error(), want);
    if (st) T_CHECK(!p->measured);
    tb_done(m, p);
}

static void t_match_rules(void) {
    sev ev[9];
    int n = (int)(sizeof exact_evs / sizeof exact_evs[0]);
    /* every node by its name, every shape the model's: accepted */
    expect_ort(exact_evs, n, -1, MP_OK, NULL);
    /* optimisations off (every event named after its node): a node without
     * an event is not this model's */
    expect_ort(exact_evs, n, 3, MP_ERR_FORMAT, "the model's node '/act/Relu' (Relu) has no event in it");
    /* ... but when the node computing from a weight alone did not run,
     * optimisations were on: removing the Relu (fusing it) is theirs */
    expect_ort(exact_evs + 1, n - 1, 2, MP_OK, NULL);
    /* a weight of another shape, named */
    memcpy(ev, exact_evs, sizeof exact_evs);
    ev[1].in = "[{\"float\":[1,4,8]},{\"float\":[8,4]}]";
    expect_ort(ev, n, -1, MP_ERR_SHAPE,
               "its node '/fc/MatMul' (MatMul) read [8,4] where the model's node '/fc/MatMul' reads 'W' of [8,8]");
    /* the weight a kernel packed ahead and released is not listed: the
     * places after it are unknown, the one before is checked */
    ev[1].in = "[{\"float\":[1,4,8]}]";
    expect_ort(ev, n, -1, MP_OK, NULL);
    ev[1].in = "[{\"float\":[1,4,9]}]";
    /* (the graph's input: the dims check says it first) */
    expect_ort(ev, n, -1, MP_ERR_SHAPE, "its node '/fc/MatMul' (MatMul) read input 'x' as [1,4,9], and the model's is [1,4,8]");
    /* an output of another shape */
    memcpy(ev, exact_evs, sizeof exact_evs);
    ev[7].out = "[{\"float\":[1,4,8,1]}]";
    expect_ort(ev, n, -1, MP_ERR_SHAPE, "its node '/post/Neg' (Neg) wrote [1,4,8,1] where the model's 'z' is [1,4,8]");
    /* a name the model cannot explain */
    memcpy(ev, exact_evs, sizeof exact_evs);
    ev[n] = (sev){"/conv1/Conv", "Conv", "[{\"float\":[1,3,224,224]},{\"float\":[64,3,7,7]}]", NULL};
    expect_ort(ev, n + 1, -1, MP_ERR_FORMAT,
               "its node '/conv1/Conv' (Conv) is no node or value of the model, nor a name ONNX Runtime gives");
    /* optimised (fusion names): the MatMul has no event, and the Mul
     * kernel its readers' went to cannot have run it */
    const sev opt[] = {
        {"/scale/Mul/MulScaleFusion/", "Mul", NULL, "[{\"float\":[1,4,8]}]"},
        {"Sigmoid_token_2", "Sigmoid", NULL, NULL},
        {"t_nchwc", "Tanh", NULL, "[{\"float\":[1,4,8]}]"},
        {"/post/Neg", "Neg", NULL, NULL},
    };
    expect_ort(opt, 4, -1, MP_ERR_FORMAT,
               "the model's node '/fc/MatMul' (MatMul) has no event in it: the one beside it, "
               "'/scale/Mul/MulScaleFusion/', ran a Mul");
    /* the NCHWc layout pads channels to its block: accepted */
    const sev nchwc[] = {
        {"fused /fc/MatMul", "FusedMatMul", NULL, NULL},
        {"/scale/Mul/MulScaleFusion/", "Mul", NULL, "[{\"float\":[1,4,8]}]"},
        {"Sigmoid_token_2", "Sigmoid", NULL, NULL},
        {"t_nchwc", "Tanh", "[{\"float\":[1,16,8]}]", "[{\"float\":[1,16,8]}]"},
        {"/post/Neg", "Neg", NULL, NULL},
    };
    expect_ort(nchwc, 5, -1, MP_OK, NULL);
    /* optimised, ONNX Runtime rewrites what it keeps: an event placed by a
     * name is held to shapes of its group, in any order and without dims of
     * 1 (the transpose optimiser; a weight broadcast as [1,C,1,1]) */
    const sev moved[] = {
        {"fused /fc/MatMul", "FusedMatMul", "[{\"float\":[8,1,4]},{\"float\":[1,8,8,1]}]", "[{\"float\":[8,4,1]}]"},
        {"/scale/Mul/MulScaleFusion/", "Mul", NULL, NULL},
        {"Sigmoid_token_2", "Sigmoid", NULL, "[{\"float\":[1,4,8]}]"},
        {"/out/Tanh", "Tanh", NULL, NULL},
        {"/post/Neg", "Neg", NULL, NULL},
    };
    expect_ort(moved, 5, -1, MP_OK, NULL);
    sev bad[5];
    memcpy(bad, moved, sizeof bad);
    bad[0].in = "[{\"float\":[1,4,8]},{\"float\":[8,16]}]";
    expect_ort(bad, 5, -1, MP_ERR_SHAPE,
               "its node 'fused /fc/MatMul' (FusedMatMul) read [8,16], a shape no node it is placed on (the model's "
               "'/fc/MatMul') reads or writes");
    /* an event placed by its place (its group a guess) must write a shape the model has */
    memcpy(bad, moved, sizeof bad);
    bad[2].out = "[{\"float\":[1,4,7]}]";
    expect_ort(bad, 5, -1, MP_ERR_SHAPE, "its node 'Sigmoid_token_2' (Sigmoid) wrote [1,4,7], a shape no node of the "
                                         "model reads or writes");
    /* an fp16 model's operator run as its function's body (Softmax on the
     * CPU: "ReduceMax_2", "Exp_3"), placed by their place: a reduction's
     * [1,4,1] is no value of the model, the [1,4,8] it reduced is */
    const sev body[] = {
        {"fused /fc/MatMul", "FusedMatMul", NULL, NULL},
        {"/scale/Mul/MulScaleFusion/", "Mul", NULL, NULL},
        {"ReduceMax_2", "ReduceMax", "[{\"float\":[1,4,8]}]", "[{\"float\":[1,4,1]}]"},
        {"Exp_3", "Exp", "[{\"float\":[1,4,8]}]", "[{\"float\":[1,4,8]}]"},
        {"/out/Tanh", "Tanh", NULL, NULL},
        {"/post/Neg", "Neg", NULL, NULL},
    };
    expect_ort(body, 6, -1, MP_OK, NULL);
    sev bbad[6];
    memcpy(bbad, body, sizeof bbad);
    bbad[2].out = "[{\"float\":[1,3,1]}]"; /* no reduction of what it read */
    expect_ort(bbad, 6, -1, MP_ERR_SHAPE, "its node 'ReduceMax_2' (ReduceMax) wrote [1,3,1], a shape no node");
    /* the Casts ONNX Runtime inserts around a kernel without an fp16
     * version are its own ("InsertedPrecisionFreeCast_x", unmatched); a
     * kernel named after such a Cast's input is the node writing that value */
    const sev casts[] = {
        {"fused /fc/MatMul", "FusedMatMul", NULL, NULL},
        {"InsertedPrecisionFreeCast_h2", "Cast", "[{\"float\":[1,4,8]}]", "[{\"float16\":[1,4,8]}]"},
        {"InsertedPrecisionFreeCast_h3", "Mul", NULL, "[{\"float\":[1,4,8]}]"},
        {"Sigmoid_token_2", "Sigmoid", NULL, NULL},
        {"/out/Tanh", "Tanh", NULL, NULL},
        {"/post/Neg", "Neg", NULL, NULL},
    };
    mp_model *m = hand_model_folds();
    mp_profile *p = tb_prof(m);
    if (p) {
        mp_ort_options o;
        mp_ort_options_default(&o);
        T_OK(mp_profile_ort(p, shaped_profile(casts, 6, -1), &o));
        T_EQ(p->run.imported.unmatched, 1);
        T_EQ(p->run.imported.renamed, 2);
    }
    tb_done(m, p);
    /* the Cast after the graph's input read it as fp16: the profile of the
     * model's fp16 twin, refused by its input's type */
    sev twin[7];
    memcpy(twin, casts, sizeof casts);
    twin[6] = (sev){"InsertedPrecisionFreeCast_x", "Cast", "[{\"float16\":[1,4,8]}]", "[{\"float\":[1,4,8]}]"};
    expect_ort(twin, 7, -1, MP_ERR_SHAPE, "ONNX Runtime was fed input 'x' as fp16 (its inserted Cast "
                                          "'InsertedPrecisionFreeCast_x' read it), and the model's is fp32");
}

/* FusedMatMul takes a Transpose of its operand (MatMulTransposeFusion) and a
 * Div by a constant scalar (MatMulScaleFusion) into itself: they ran in the
 * product's kernel, not in the Relu kernels that wrote their inputs (the
 * attention scores q / sqrt(d) @ k^T of a plain torch export). */
static void t_fused_matmul_takes(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "a", MP_DT_FLOAT, 3, TB_DIMS(2, 4, 8));
    tb_input(m, "b", MP_DT_FLOAT, 3, TB_DIMS(2, 4, 8));
    tb_const_f(m, "c", MP_DT_FLOAT, 0, NULL, (const double[]){2.0});
    static const char *const op[] = {"Relu", "Div", "Relu", "Transpose", "MatMul", "Softmax"};
    static const char *const in[] = {"a", "r,c", "b", "k", "q,kt", "s"};
    static const char *const out[] = {"r", "q", "k", "kt", "s", "z"};
    static const char *const name[] = {"/q/Relu", "/Div", "/k/Relu", "/Transpose", "/MatMul", "/Softmax"};
    int k[6];
    for (int i = 0; i < 6; i++) {
        k[i] = tb_node(m, op[i], in[i], out[i]);
        tb_name(m, k[i], name[i]);
    }
    tb_attr_ints(m, k[3], "perm", 3, (const int64_t[]){0, 2, 1});
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    const sev ev[] = {
        {"/q/Relu", "Relu", NULL, NULL},
        {"/k/Relu", "Relu", NULL, NULL},
        {"/MatMul/MatMulScaleFusion/", "FusedMatMul", "[{\"float\":[2,4,8]},{\"float\":[2,4,8]}]", "[{\"float\":[2,4,4]}]"},
        {"/Softmax", "Softmax", NULL, NULL},
    };
    if (p) {
        mp_ort_options o;
        mp_ort_options_default(&o);
        T_OK(mp_profile_ort(p, shaped_profile(ev, 4, -1), &o));
        /* the product's group: Div, Transpose, MatMul (its head the first in the graph's order) */
        T_EQ(p->node_head[k[1]], k[1]);
        T_EQ(p->node_head[k[3]], k[1]);
        T_EQ(p->node_head[k[4]], k[1]);
        T_EQ(p->node_head[k[0]], k[0]);
        T_EQ(p->node_head[k[2]], k[2]);
    }
    tb_done(m, p);
}

/* The runs kept are of one size: a session run at two sizes (runs 1-2 at
 * [1,4,8], run 3 at [1,4,9]) is refused, naming the node and the runs, and
 * --warmup 2 keeps the third alone. A node event no model_run holds (a
 * profile cut short) is left out, and said. */
static void t_one_size(void) {
    const char *path = mp_t_path("sizes.json");
    FILE *f = fopen(path, "w");
    fputs("[\n{\"cat\": \"Session\", \"pid\": 7, \"tid\": 7, \"dur\": 1000, \"ts\": 1, \"ph\": \"X\", "
          "\"name\": \"session_initialization\", \"args\": {}}", f);
    for (int r = 0; r < 4; r++) {
        long ts = 10000L * (r + 1);
        int seq = r == 2 ? 9 : 8;
        fprintf(f, ",\n{\"cat\": \"Node\", \"pid\": 7, \"tid\": 7, \"dur\": 10, \"ts\": %ld, \"ph\": \"X\", "
                   "\"name\": \"/act/Relu_kernel_time\", \"args\": {\"op_name\": \"Relu\", "
                   "\"input_type_shape\": [{\"float\":[1,4,%d]}], \"provider\": \"CPUExecutionProvider\"}}",
                ts + 1, seq);
        if (r < 3) /* the fourth: cut short, no model_run */
            fprintf(f, ",\n{\"cat\": \"Session\", \"pid\": 7, \"tid\": 7, \"dur\": 20, \"ts\": %ld, \"ph\": "
                       "\"X\", \"name\": \"model_run\", \"args\": {}}",
                    ts);
    }
    fputs("\n]\n", f);
    fclose(f);
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 3, TB_DIMS(1, 4, -1));
    tb_node(m, "Relu", "x", "y");
    tb_name(m, 0, "/act/Relu");
    tb_output(m, "y");
    mp_model_set_dim(m, "x_dim2", -1);
    mp_profile *p = tb_prof(m);
    if (p) {
        mp_ort_options o;
        mp_ort_options_default(&o);
        T_CHECK(mp_profile_ort(p, path, &o) == MP_ERR_SHAPE);
        T_CHECK(strstr(mp_last_error(), "the runs kept are not of one size: node '/act/Relu' read "
                                        "[{\"float\":[1,4,8]}] in run 2 and [{\"float\":[1,4,9]}] in run 3") != NULL);
        o.warmup = 2;
        T_OK(mp_profile_ort(p, path, &o));
        T_EQ(p->run.imported.outside_runs, 1);
    }
    tb_done(m, p);
}

/* mp_profile_ort of the events ev[0..n) on m's profile p: accepted (the
 * message said when not); m and p freed. */
static void expect_placed(mp_model *m, mp_profile *p, const sev *ev, int n) {
    if (p) {
        mp_ort_options o;
        mp_ort_options_default(&o);
        mp_status st = mp_profile_ort(p, shaped_profile(ev, n, -1), &o);
        T_EQ(st, MP_OK);
        if (st) mp_t_fail(__FILE__, __LINE__, "%s", mp_last_error());
    }
    tb_done(m, p);
}

/* ONNX Runtime's GatherSliceToSplitFusion runs the Slices (and Gathers)
 * reading one value as one Split named "<one of them>/GatherSliceToSplit
 * Fusion" (RAFT's context split, torch.split exported as two Slices): the
 * name resolves to that Slice, and the Split's outputs are the group's,
 * the other Slice included. Both were refused ("is no node or value of the
 * model", then "wrote [1,6,4], a shape no node it is placed on ..."). */
static void t_split_fusion(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 3, TB_DIMS(1, 10, 4));
    tb_const_i(m, "s0", MP_DT_INT64, 1, TB_DIMS(1), (const int64_t[]){0});
    tb_const_i(m, "s6", MP_DT_INT64, 1, TB_DIMS(1), (const int64_t[]){6});
    tb_const_i(m, "s10", MP_DT_INT64, 1, TB_DIMS(1), (const int64_t[]){10});
    tb_const_i(m, "ax", MP_DT_INT64, 1, TB_DIMS(1), (const int64_t[]){1});
    tb_name(m, tb_node(m, "Slice", "x,s0,s6,ax", "a"), "/Slice");
    tb_name(m, tb_node(m, "Slice", "x,s6,s10,ax", "b"), "/Slice_1");
    tb_name(m, tb_node(m, "Relu", "a", "ra"), "/Relu");
    tb_name(m, tb_node(m, "Tanh", "b", "tb"), "/Tanh");
    tb_output(m, "ra");
    tb_output(m, "tb");
    mp_profile *p = tb_prof(m);
    const sev ev[] = {
        {"/Slice_1/GatherSliceToSplitFusion", "Split", "[{\"float\":[1,10,4]},{\"int64\":[2]}]",
         "[{\"float\":[1,6,4]},{\"float\":[1,4,4]}]"},
        {"/Relu", "Relu", "[{\"float\":[1,6,4]}]", "[{\"float\":[1,6,4]}]"},
        {"/Tanh", "Tanh", "[{\"float\":[1,4,4]}]", "[{\"float\":[1,4,4]}]"},
    };
    expect_placed(m, p, ev, 3);
}

/* ONNX Runtime 1.30's MatMulAddFusion: a MatMul of rank 3 by a weight and
 * its bias Add run as one Gemm named "<MatMul>/MatMulAddFusion" on the
 * input flattened to 2-D, between two Reshapes it adds
 * ("gemm_input_reshape", "gemm_output_reshape": no node of the model,
 * unmatched like its layout reorders). nn.MultiheadAttention's in-proj was
 * refused three ways: the Reshapes' names, the Gemm's, then its [14,16]. */
static void t_matmul_add_fusion(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 3, TB_DIMS(2, 7, 16));
    tb_weight(m, "W", MP_DT_FLOAT, 2, TB_DIMS(16, 48));
    tb_weight(m, "b", MP_DT_FLOAT, 1, TB_DIMS(48));
    tb_name(m, tb_node(m, "MatMul", "x,W", "h"), "/MatMul");
    tb_name(m, tb_node(m, "Add", "b,h", "y"), "/Add");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    sev ev[] = {
        {"gemm_input_reshape", "Reshape", "[{\"float\":[2,7,16]},{\"int64\":[2]}]", "[{\"float\":[14,16]}]"},
        {"/MatMul/MatMulAddFusion", "Gemm", "[{\"float\":[14,16]},{\"float\":[16,48]},{\"float\":[48]}]",
         "[{\"float\":[14,48]}]"},
        {"gemm_output_reshape", "Reshape", "[{\"float\":[14,48]},{\"int64\":[3]}]", "[{\"float\":[2,7,48]}]"},
    };
    mp_ort_options o;
    mp_ort_options_default(&o);
    if (p) {
        mp_status st = mp_profile_ort(p, shaped_profile(ev, 3, -1), &o);
        T_EQ(st, MP_OK);
        if (st) mp_t_fail(__FILE__, __LINE__, "%s", mp_last_error());
        /* flattened rows that do not multiply to the model's are still refused */
        ev[1].in = "[{\"float\":[15,16]},{\"float\":[16,48]},{\"float\":[48]}]";
        T_EQ(mp_profile_ort(p, shaped_profile(ev, 3, -1), &o), MP_ERR_SHAPE);
        T_CHECK(strstr(mp_last_error(), "read [15,16], a shape no node it is placed on") != NULL);
    }
    tb_done(m, p);
}

/* ReshapeFusion runs a chain of Reshapes as one named "<the last>_new_
 * reshape" (torchvision's Swin-T: a window partition's Reshape fused with
 * the Reshape MatMulAddFusion put before its qkv Gemm, writing the 2-D
 * [rows, 96]): placed on that node, its shape checked flattened. */
static void t_reshape_fusion(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 3, TB_DIMS(2, 7, 16));
    tb_weight(m, "W", MP_DT_FLOAT, 2, TB_DIMS(16, 48));
    tb_weight(m, "b", MP_DT_FLOAT, 1, TB_DIMS(48));
    tb_const_i(m, "s4", MP_DT_INT64, 1, TB_DIMS(4), (const int64_t[]){2, 7, 2, 8});
    tb_const_i(m, "s3", MP_DT_INT64, 1, TB_DIMS(3), (const int64_t[]){2, 7, 16});
    tb_name(m, tb_node(m, "Reshape", "x,s4", "r"), "/Reshape");
    tb_name(m, tb_node(m, "Reshape", "r,s3", "r2"), "/Reshape_1");
    tb_name(m, tb_node(m, "MatMul", "r2,W", "h"), "/MatMul");
    tb_name(m, tb_node(m, "Add", "h,b", "y"), "/Add");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    const sev ev[] = {
        {"/Reshape_1_new_reshape", "Reshape", "[{\"float\":[2,7,16]},{\"int64\":[2]}]", "[{\"float\":[14,16]}]"},
        {"/MatMul/MatMulAddFusion", "Gemm", "[{\"float\":[14,16]},{\"float\":[16,48]},{\"float\":[48]}]",
         "[{\"float\":[14,48]}]"},
        {"gemm_output_reshape", "Reshape", "[{\"float\":[14,48]},{\"int64\":[3]}]", "[{\"float\":[2,7,48]}]"},
    };
    expect_placed(m, p, ev, 3);
}

/* ONNX Runtime may run first, out of the graph's order, nodes that read
 * activations only for their dtype: the dynamo exporter's timm
 * MobileNet-V3 has 46 CastLike+Expand pairs, which ONNX Runtime inlines to
 * "Cast_N" (a name of its kind only) and runs at the start of each run.
 * Such a Cast, before the first placed event, took every unplaced node up
 * to that event's node, the Conv that the next event ("r_nchwc", named
 * after the Relu's output) ran: its shapes were then "of another model".
 * Now a span before the first (after the last) placed event reaches the
 * graph's start (end) only when that event is the graph's first (last)
 * placed node, and a node with MACs goes only to a kernel that can run it. */
static void t_out_of_order(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 4, TB_DIMS(1, 4, 8, 8));
    tb_weight(m, "W", MP_DT_FLOAT, 4, TB_DIMS(8, 4, 3, 3));
    tb_const_f(m, "s", MP_DT_FLOAT, 0, NULL, (const double[]){0.5});
    tb_const_i(m, "shp", MP_DT_INT64, 1, TB_DIMS(1), (const int64_t[]){4});
    int c = tb_node(m, "Conv", "x,W", "c");
    tb_name(m, c, "/conv");
    tb_attr_ints(m, c, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_name(m, tb_node(m, "Relu", "c", "r"), "/relu");
    tb_name(m, tb_node(m, "CastLike", "s,x", "s2"), "/castlike");
    tb_name(m, tb_node(m, "Expand", "s2,shp", "e"), "/expand");
    tb_output(m, "r");
    tb_output(m, "e");
    mp_profile *p = tb_prof(m);
    const sev ev[] = {
        {"Cast_9", "Cast", "[{\"float\":[]}]", "[{\"float\":[]}]"},
        {"/expand", "Expand", "[{\"float\":[]},{\"int64\":[1]}]", "[{\"float\":[4]}]"},
        {"r_nchwc", "Conv", "[{\"float\":[1,4,8,8]},{\"float\":[8,4,3,3]}]", "[{\"float\":[1,8,8,8]}]"},
    };
    expect_placed(m, p, ev, 3);
}

/* ONNX Runtime profiles the nodes of an If's branches (a Loop's, a Scan's
 * body) under their own names (torchvision Faster R-CNN's MultiScaleRoIAlign
 * in an If: '/roi_heads/box_roi_pool/Squeeze_3'): such an event is placed on
 * the If, by its node's name, its shapes (the branch's, run by run) not
 * checked. It was refused as no node of the model. */
static void t_body_events(void) {
    mp_model *m = NULL;
    mp_profile *p = tb_prof_file("tests/corpus/seeds/if_named_branches.onnx", &m);
    const sev ev[] = {
        {"/sum", "ReduceSum", "[{\"float\":[4]}]", "[{\"float\":[]}]"},
        {"/gt", "Greater", "[{\"float\":[]},{\"float\":[]}]", "[{\"bool\":[]}]"},
        {"/then/Relu", "Relu", "[{\"float\":[4]}]", "[{\"float\":[4]}]"},
        {"/if", "If", "[{\"bool\":[]}]", "[{\"float\":[4]}]"},
    };
    expect_placed(m, p, ev, 4);
}

/* Two of ONNX Runtime's NCHWc ways with torchvision's detectors:
 *  - a Conv of one output channel (FCOS's centerness) runs with its
 *    weight [1,8,3,3] padded to [16,8,3,3]: a dim of 1 may be a padded one
 *    (after the dims that match otherwise);
 *  - Convs whose batch the data decide (Mask R-CNN's mask head after its
 *    RoIAlign) have MACs, if uncounted: the second Conv joined the first
 *    Relu's event (a node without MACs joins its producer's), leaving the
 *    second event's weight "of another model". */
static void t_nchwc_detectors(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 4, TB_DIMS(1, 8, 4, 4));
    tb_weight(m, "W", MP_DT_FLOAT, 4, TB_DIMS(1, 8, 3, 3));
    int c = tb_node(m, "Conv", "x,W", "c");
    tb_attr_ints(m, c, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_name(m, c, "/conv");
    tb_name(m, tb_node(m, "Relu", "c", "r"), "/relu");
    tb_output(m, "r");
    mp_profile *p = tb_prof(m);
    const sev one[] = {
        {"r_nchwc", "Conv", "[{\"float\":[1,8,4,4]},{\"float\":[16,8,3,3]}]", "[{\"float\":[1,16,4,4]}]"},
    };
    expect_placed(m, p, one, 1);

    m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 4, TB_DIMS(5, 8, 4, 4));
    tb_input(m, "s", MP_DT_FLOAT, 1, TB_DIMS(5));
    tb_weight(m, "W1", MP_DT_FLOAT, 4, TB_DIMS(8, 8, 3, 3));
    tb_weight(m, "W2", MP_DT_FLOAT, 4, TB_DIMS(8, 8, 1, 1));
    tb_const_i(m, "flat", MP_DT_INT64, 1, TB_DIMS(1), TB_DIMS(-1));
    tb_name(m, tb_node(m, "NonZero", "s", "nz"), "/nz");
    tb_name(m, tb_node(m, "Reshape", "nz,flat", "idx"), "/flat");
    tb_name(m, tb_node(m, "Gather", "x,idx", "a"), "/kept");
    c = tb_node(m, "Conv", "a,W1", "c1");
    tb_attr_ints(m, c, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_name(m, c, "/conv1");
    tb_name(m, tb_node(m, "Relu", "c1", "r1"), "/relu1");
    tb_name(m, tb_node(m, "Conv", "r1,W2", "c2"), "/conv2");
    tb_name(m, tb_node(m, "Relu", "c2", "r2"), "/relu2");
    tb_output(m, "r2");
    p = tb_prof(m);
    T_CHECK(!p || (tb_nodep(m, c)->cost.flags & MP_COST_UNKNOWN));
    const sev two[] = {
        {"/nz", "NonZero", "[{\"float\":[5]}]", "[{\"int64\":[1,3]}]"},
        {"/flat", "Reshape", "[{\"int64\":[1,3]},{\"int64\":[1]}]", "[{\"int64\":[3]}]"},
        {"/kept", "Gather", "[{\"float\":[5,8,4,4]},{\"int64\":[3]}]", "[{\"float\":[3,8,4,4]}]"},
        {"r1_nchwc", "Conv", "[{\"float\":[3,8,4,4]},{\"float\":[8,8,3,3]}]", "[{\"float\":[3,8,4,4]}]"},
        {"r2_nchwc", "Conv", "[{\"float\":[3,8,4,4]},{\"float\":[8,8,1,1]}]", "[{\"float\":[3,8,4,4]}]"},
    };
    expect_placed(m, p, two, 5);
}

/* Profiles of other models, and of this one at other dims: refused, naming
 * the first node or dim that differs; the dims a profile ran with, read from
 * it when none are given. */
static void t_other_model(void) {
    static const struct {
        const char *model, *prof, *want;
    } cases[] = {
        /* ResNet-18's nodes are not BERT's */
        {"models/bert_base.onnx", "tests/ort/resnet18_all.json.gz",
         "its node '/relu/Relu_output_0_nchwc' (Conv) is no node or value of the model"},
        /* ResNet-50 has ResNet-18's names, not its shapes: the first block's
         * first convolution is 1x1 there, 3x3 here */
        {"models/resnet50.onnx", "tests/ort/resnet18_all.json.gz",
         "its node '/layer1/layer1.0/relu/Relu_output_0_nchwc' (Conv) read [64,64,3,3] where the model's node "
         "'/layer1/layer1.0/conv1/Conv' reads 'layer1.0.conv1.weight' of [64,64,1,1]"},
        /* ResNet-50's first block has a downsampling branch, ResNet-18's none */
        {"models/resnet18.onnx", "tests/ort/resnet50_disabled.json.gz",
         "its node '/layer1/layer1.0/downsample/downsample.0/Conv' (Conv) is no node or value of the model"},
        {"models/resnet50.onnx", "tests/ort/bert_base_all.json.gz",
         "its node '/bert/embeddings/Shape' (Shape) is no node or value of the model"},
        {"models/bert_base.onnx", "tests/ort/resnet50_disabled.json.gz",
         "its node '/conv1/Conv' (Conv) is no node or value of the model"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        t_cli r = t_cli_run((const char *const[]){cases[i].model, "-q", "--ort-profile", cases[i].prof, NULL}, 60, 0);
        T_EQ(r.code, 2);
        if (!strstr(r.err, cases[i].want) || !strstr(r.err, cases[i].prof))
            mp_t_fail(__FILE__, __LINE__, "%s on %s: '%s' does not say '%s'", cases[i].prof, cases[i].model, r.err,
                      cases[i].want);
        t_cli_free(&r);
    }
    /* a profile of its own model: accepted */
    t_cli r = t_cli_run((const char *const[]){"models/resnet18.onnx", "-q", "--ort-profile",
                                              "tests/ort/resnet18_all.json.gz", "--peak-gflops", "100", NULL},
                        60, 0);
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "dims:                   batch=1 (read from the profile)") != NULL);
    t_cli_free(&r);
}

static void t_dims(void) {
    /* BERT run at batch 1, seq 128, said to be at batch 4, seq 64 */
    t_cli r = t_cli_run((const char *const[]){"models/bert_base.onnx", "--dim", "batch=4", "--dim", "seq=64", "-q",
                                              "--ort-profile", "tests/ort/bert_base_all.json.gz", NULL},
                        60, 0);
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "ONNX Runtime ran the model with batch=1 (its node '/bert/embeddings/Shape' read input "
                          "'input_ids' as [1,128]), not batch=4 as given") != NULL);
    t_cli_free(&r);
    r = t_cli_run((const char *const[]){"models/bert_base.onnx", "--dim", "batch=1", "--dim", "seq=128", "-q",
                                        "--ort-profile", "tests/ort/bert_base_b4s64_all.json.gz", NULL},
                  60, 0);
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "ran the model with batch=4") != NULL);
    t_cli_free(&r);
    /* no dims given: the profile's (batch 4, seq 64), and the report says so */
    r = t_cli_run((const char *const[]){"models/bert_base.onnx", "-q", "--ort-profile",
                                        "tests/ort/bert_base_b4s64_all.json.gz", "--peak-gflops", "100", NULL},
                  60, 0);
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "dims:                   batch=4 (read from the profile), seq=64 (read from the "
                          "profile)") != NULL);
    T_CHECK(strstr(r.out, "(batch 4)") != NULL);
    T_CHECK(strstr(r.out, "unresolved dims") == NULL);
    t_cli_free(&r);
    /* one given, the other read */
    r = t_cli_run((const char *const[]){"models/bert_base.onnx", "--dim", "batch=4", "-q", "--ort-profile",
                                        "tests/ort/bert_base_b4s64_all.json.gz", "--peak-gflops", "100", "--format",
                                        "json", NULL},
                  60, 0);
    T_EQ(r.code, 0);
    t_json_dump("profile", r.out, r.out_len);
    size_t err = 0;
    jr *root = jr_parse(r.out, r.out_len, &err);
    T_CHECK(root != NULL);
    const jr *from = jr_path(root, "run.onnxruntime.dims_from_profile");
    T_CHECK(from && from->type == JR_ARR && jr_at(from, 0) && !strcmp(jr_at(from, 0)->s, "seq") && !jr_at(from, 1));
    const jr *ds = jr_path(root, "dims.seq"), *db = jr_path(root, "dims.batch");
    T_CHECK(ds && db && ds->num == 64 && db->num == 4);
    jr_free(root);
    t_cli_free(&r);
    /* the library: mp_ort_dims gives the unset dims the profile's */
    mp_model *m = NULL;
    T_OK(mp_model_load("models/bert_base.onnx", &m));
    if (!m) return;
    int n = -1;
    T_OK(mp_ort_dims(m, "tests/ort/bert_base_b4s64_all.json.gz", &n));
    T_EQ(n, 2);
    T_EQ(m->syms[mp_strmap_get(&m->sym_names, "batch")].value, 4);
    T_EQ(m->syms[mp_strmap_get(&m->sym_names, "seq")].value, 64);
    T_CHECK(m->syms[mp_strmap_get(&m->sym_names, "seq")].from_profile);
    T_EQ(mp_ort_dims(m, "tests/ort/bert_base_all.json.gz", &n), MP_ERR_SHAPE);
    T_CHECK(strstr(mp_last_error(), "batch=1") != NULL);
    mp_model_free(m);
    /* ResNet-50's input read by its first convolution, an NCHWc kernel
     * named after the Relu's output */
    T_OK(mp_model_load("models/resnet50.onnx", &m));
    if (!m) return;
    T_OK(mp_ort_dims(m, "tests/ort/resnet50_all.json.gz", &n));
    T_EQ(n, 1);
    T_EQ(m->syms[mp_strmap_get(&m->sym_names, "batch")].value, 1);
    mp_model_free(m);
}

/* What --ort-profile takes, said when given something else (issue 31 item 10). */
static void t_wrong_file(void) {
    t_cli r = t_cli_run((const char *const[]){"models/resnet18.onnx", "--ort-profile", "models/resnet18.onnx", NULL},
                        60, 0);
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "models/resnet18.onnx: an ONNX model, not ONNX Runtime's profile of a run: --ort-profile "
                          "takes the profiling JSON ONNX Runtime writes") != NULL);
    T_CHECK(strstr(r.err, "SessionOptions.enableProfiling") != NULL);
    T_CHECK(strstr(r.err, "torch.profiler") == NULL);
    t_cli_free(&r);
}

/* Sizes only the data decides, read from the profile (tests/ort/
 * nonzero_rows.onnx: the rows of x [4, 8] above -1e30, NonZero, gathered
 * and multiplied by a 16-wide weight; ONNX Runtime 1.x, level disabled):
 * every row is, 32 rows, 32 x 8 x 16 = 4,096 MACs, where the static
 * profile cannot know the 4 nodes after the mask. */
static void t_data_sized(void) {
    mp_model *m = NULL;
    T_OK(mp_model_load("tests/ort/nonzero_rows.onnx", &m));
    mp_profile *p = NULL;
    if (m) T_OK(mp_profile_static(m, &p));
    if (!p) {
        mp_model_free(m);
        return;
    }
    T_EQ(p->total.unknown, 4);
    mp_ort_options o;
    mp_ort_options_default(&o);
    o.peak_gflops = 100;
    T_OK(mp_profile_ort(p, "tests/ort/nonzero_rows_disabled.json.gz", &o));
    T_EQ(p->total.unknown, 0);
    T_EQ_U64(p->total.macs, 32 * 8 * 16);
    T_EQ(p->run.run_shaped, 4);
    T_EQ_STR(p->run.source, "onnxruntime");
    mp_profile_free(p);
    mp_model_free(m);
}

/* A Loop's and an If's own events span their body's (ONNX Runtime writes
 * both): the body's time is counted once, in the control-flow node's, so
 * the node time stays within the run (120 us against its 144; the body
 * added again made 152 us). The Loop's group is the Loop's, not named
 * after a body node. */
static void t_control_flow_once(void) {
    mp_model *m = NULL;
    T_OK(mp_model_load("tests/ort/control_flow.onnx", &m));
    if (m) T_OK(mp_model_set_dim(m, "n", 4));
    mp_profile *p = NULL;
    if (m) T_OK(mp_profile_static(m, &p));
    mp_ort_options o;
    mp_ort_options_default(&o);
    o.peak_gflops = 100;
    if (p) T_OK(mp_profile_ort(p, "tests/ort/control_flow_disabled.json.gz", &o));
    if (p && p->measured) {
        T_CHECK(p->run.imported.node_time_s > 0 && p->run.imported.node_time_s <= p->run.lat_median_s);
        bool loop = false;
        for (int g = 0; g < p->n_groups; g++)
            if (p->groups[g].name && !strcmp(p->groups[g].name, "Loop")) loop = true;
        T_CHECK(loop);
    }
    mp_profile_free(p);
    mp_model_free(m);
}

/* An empty tensor ([5, 0]: a slice past the end) written by an event is
 * the model's [5, 0]: the profile is accepted (it was refused, "a shape no
 * node reads or writes"). */
static void t_empty_dims(void) {
    mp_model *m = NULL;
    T_OK(mp_model_load("tests/ort/empty_slice.onnx", &m));
    mp_profile *p = NULL;
    if (m) T_OK(mp_profile_static(m, &p));
    mp_ort_options o;
    mp_ort_options_default(&o);
    o.peak_gflops = 100;
    if (p) T_OK(mp_profile_ort(p, "tests/ort/empty_slice_all.json.gz", &o));
    mp_profile_free(p);
    mp_model_free(m);
}

/* The fp32 model's profile on its fp16 twin (the same nodes, names and
 * shapes, weights and inputs in fp16): its Gemm read the input 'x' as fp32,
 * so the profile is of another model and refused, naming the node, the
 * value and both types; the fp32 model itself accepts it. */
static void t_precision_twin(void) {
    const char *models[] = {"tests/ort/control_flow_fp16.onnx", "tests/ort/control_flow.onnx"};
    for (int k = 0; k < 2; k++) {
        mp_model *m = NULL;
        T_OK(mp_model_load(models[k], &m));
        if (m) T_OK(mp_model_set_dim(m, "n", 4));
        mp_profile *p = NULL;
        if (m) T_OK(mp_profile_static(m, &p));
        mp_ort_options o;
        mp_ort_options_default(&o);
        if (p) {
            mp_status st = mp_profile_ort(p, "tests/ort/control_flow_disabled.json.gz", &o);
            if (k == 0) {
                T_CHECK(st == MP_ERR_SHAPE);
                T_CHECK(strstr(mp_last_error(), "'/lin/Gemm'") && strstr(mp_last_error(), "'x' as fp32") &&
                        strstr(mp_last_error(), "another precision"));
            } else {
                T_OK(st);
            }
        }
        mp_profile_free(p);
        mp_model_free(m);
    }
}

MP_TESTS(ort){
    {"control_flow_once", t_control_flow_once},
    {"precision_twin", t_precision_twin},
    {"empty_dims", t_empty_dims},
    {"rules", t_rules},
    {"errors", t_errors},
    {"resnet50", t_resnet50},
    {"bert", t_bert},
    {"cli", t_cli_ort},
    {"match_rules", t_match_rules},
    {"fused_matmul_takes", t_fused_matmul_takes},
    {"one_size", t_one_size},
    {"split_fusion", t_split_fusion},
    {"matmul_add_fusion", t_matmul_add_fusion},
    {"reshape_fusion", t_reshape_fusion},
    {"out_of_order", t_out_of_order},
    {"body_events", t_body_events},
    {"nchwc_detectors", t_nchwc_detectors},
    {"other_model", t_other_model},
    {"dims", t_dims},
    {"wrong_file", t_wrong_file},
    {"data_sized", t_data_sized},
};
MP_TESTS_END(ort)
