/* Models from PyTorch's dynamo exporter (torch 2.11, IR 10, opset 20;
 * models/dynamo/, weights left out) against PyTorch's own figures beside
 * each (NAME.json): parameters, MACs (FlopCounterMode's total / 2) and the
 * module tree (paths, parameter counts, classes). Run from the repository
 * root. */
#include <stdlib.h>

#include "analyze/profile.h"
#include "graph/graph.h"
#include "jsonr.h"
#include "tbuild.h"
#include "test.h"

static const char *const fixtures[] = {
    "distilbert_base", "opt_125m", "pythia_70m", "qwen3_2layers",
    "timm_deit_small_distilled_patch16_224", "timm_mobilenetv3_large_100",
    "timm_resnet18_folded",
};

/* DeiT's reference leaves out its fused attention's two products
 * (FlopCounterMode has no rule for the CPU kernel): 12 layers x 2 products
 * x batch 2 x 6 heads x 198 x 198 x 64 (models/dynamo/README.md). */
#define DEIT_ATTENTION_MACS (12ull * 2 * 2 * 6 * 198 * 198 * 64)

typedef struct fixture {
    jr *ref;
    char *bytes;              /* the .onnx file, to look for a scope name */
    size_t n_bytes;
    mp_model *m;
    mp_profile *p;
} fixture;

static void fixture_free(fixture *f) {
    mp_profile_free(f->p);
    mp_model_free(f->m);
    jr_free(f->ref);
    free(f->bytes);
}

/* Load models/dynamo/NAME.onnx with the input shapes of its reference
 * (scaled by `batch` when > 0) and profile it. */
static bool fixture_load(const char *name, int64_t batch, fixture *f) {
    memset(f, 0, sizeof *f);
    char path[256];
    size_t len;
    snprintf(path, sizeof path, "models/dynamo/%s.json", name);
    char *text = jr_slurp(path, &len);
    if (!text || !(f->ref = jr_parse(text, len, NULL))) {
        mp_t_fail(__FILE__, __LINE__, "%s: cannot read the reference", path);
        free(text);
        return false;
    }
    free(text);
    snprintf(path, sizeof path, "models/dynamo/%s.onnx", name);
    f->bytes = jr_slurp(path, &f->n_bytes);
    if (mp_model_load(path, &f->m)) {
        mp_t_fail(__FILE__, __LINE__, "%s: %s", path, mp_last_error());
        return false;
    }
    for (const jr *in = jr_get(f->ref, "inputs")->child; in; in = in->next) {
        int64_t dims[8];
        int rank = 0;
        for (const jr *d = in->child; d && rank < 8; d = d->next) dims[rank++] = d->i;
        if (batch > 0) dims[0] = batch;
        if (mp_model_set_input_shape(f->m, in->key, dims, rank)) {
            mp_t_fail(__FILE__, __LINE__, "%s: input %s: %s", path, in->key, mp_last_error());
            return false;
        }
    }
    if (mp_profile_static(f->m, &f->p)) {
        mp_t_fail(__FILE__, __LINE__, "%s: %s", path, mp_last_error());
        return false;
    }
    return true;
}

/* Does the file name module `path` as a scope: "'path'" as an element of
 * a name_scopes list ("['', 'a', 'a.b', ...]")? */
static bool file_names_scope(const fixture *f, const char *path) {
    char pat[300];
    int n = snprintf(pat, sizeof pat, ", '%s'", path);
    if (n <= 0 || (size_t)n >= sizeof pat || !f->bytes) return false;
    for (size_t i = 0; i + (size_t)n <= f->n_bytes; i++)
        if (f->bytes[i] == ',' && memcmp(f->bytes + i, pat, (size_t)n) == 0 &&
            (f->bytes[i + (size_t)n] == ',' || f->bytes[i + (size_t)n] == ']'))
            return true;
    return false;
}

static void t_dynamo_params_and_macs(void) {
    for (size_t i = 0; i < MP_ARRAY_LEN(fixtures); i++) {
        fixture f;
        if (!fixture_load(fixtures[i], 0, &f)) {
            fixture_free(&f);
            continue;
        }
        uint64_t want = (uint64_t)jr_get(f.ref, "torch_params")->i;
        if (f.p->total.params != want)
            mp_t_fail(__FILE__, __LINE__, "%s: params %llu, expected %llu", fixtures[i],
                      (unsigned long long)f.p->total.params, (unsigned long long)want);
        uint64_t macs = (uint64_t)jr_path(f.ref, "flop_counter.total")->i / 2;
        if (strstr(fixtures[i], "deit")) macs += DEIT_ATTENTION_MACS;
        if (f.p->total.macs != macs)
            mp_t_fail(__FILE__, __LINE__, "%s: MACs %llu, expected %llu", fixtures[i],
                      (unsigned long long)f.p->total.macs, (unsigned long long)macs);
        T_EQ(f.p->total.uncounted, 0);
        T_EQ(f.p->total.unknown, 0);
        /* every parameter is fp32 in these exports: no other dtype line */
        for (int dt = 0; dt < MP_DT_COUNT; dt++)
            if (dt != MP_DT_FLOAT && f.p->params_by_dtype[dt])
                mp_t_fail(__FILE__, __LINE__, "%s: %llu params of %s", fixtures[i],
                          (unsigned long long)f.p->params_by_dtype[dt], mp_dtype_name(dt));
        fixture_free(&f);
    }
}

/* Every module of the reference's module_params (depth <= 3) is in the
 * tree with the same parameter count and, where ours names a class, the
 * same class; every module the file names as a scope has its class. A
 * module missing from the tree must hold no parameters and appear nowhere
 * in the file's scopes (an Identity or an eval-mode Dropout leaves no
 * node). The folded ResNet-18 too: each folded convolution is its
 * convolution's work (the module owning its weight), each BatchNorm keeps
 * its parameters. */
static void t_dynamo_module_tree(void) {
    for (size_t i = 0; i < MP_ARRAY_LEN(fixtures); i++) {
        fixture f;
        if (!fixture_load(fixtures[i], 0, &f)) {
            fixture_free(&f);
            continue;
        }
        const jr *classes = jr_get(f.ref, "classes");
        int matched = 0, absent = 0, total = 0;
        for (const jr *e = jr_get(f.ref, "module_params")->child; e; e = e->next) {
            total++;
            const jr *cls = jr_get(classes, e->key);
            int md = e->key[0] ? mp_strmap_get(&f.m->module_paths, e->key) : 0;
            if (md < 0) {
                absent++;
                if (e->i != 0 || file_names_scope(&f, e->key))
                    mp_t_fail(__FILE__, __LINE__, "%s: module '%s' (%lld params) is missing",
                              fixtures[i], e->key, (long long)e->i);
                continue;
            }
            const mp_module *mod = &f.m->modules[md];
            if (f.p->mods[md].params != (uint64_t)e->i)
                mp_t_fail(__FILE__, __LINE__, "%s: module '%s' has %llu params, PyTorch %lld",
                          fixtures[i], e->key, (unsigned long long)f.p->mods[md].params,
                          (long long)e->i);
            else if (mod->cls && cls && strcmp(mod->cls, cls->s) != 0)
                mp_t_fail(__FILE__, __LINE__, "%s: module '%s' is a %s, PyTorch says %s",
                          fixtures[i], e->key, mod->cls, cls->s);
            else if (!mod->cls && cls && e->key[0] && file_names_scope(&f, e->key))
                mp_t_fail(__FILE__, __LINE__, "%s: module '%s' has no class, the file says %s",
                          fixtures[i], e->key, cls->s);
            else
                matched++;
        }
        T_EQ(matched + absent, total);
        T_CHECK(matched > total / 2);
        /* exporter artefacts are no modules */
        for (int md = 0; md < f.m->n_modules; md++)
            if (strstr(f.m->modules[md].path, "_empty_nn_module_stack"))
                mp_t_fail(__FILE__, __LINE__, "%s: artefact module '%s'", fixtures[i],
                          f.m->modules[md].path);
        fixture_free(&f);
    }
}

/* Buffers the exporter declares are not parameters but a figure of their
 * own: Qwen3's rotary inv_freq (64 fp32, folded by the exporter into an
 * expanded table of the same size), Pythia's partial rotary inv_freq (8). */
static void t_dynamo_buffers(void) {
    struct {
        const char *name;
        uint64_t tensors, bytes;
    } want[] = {{"qwen3_2layers", 1, 64 * 4}, {"pythia_70m", 1, 8 * 4}};
    for (size_t i = 0; i < MP_ARRAY_LEN(want); i++) {
        fixture f;
        if (fixture_load(want[i].name, 0, &f)) {
            T_EQ_U64(f.p->buffers, want[i].tensors);
            T_EQ_U64(f.p->buffer_bytes, want[i].bytes);
            const mp_module *rot = NULL;
            for (int md = 0; md < f.m->n_modules; md++)
                if (strstr(f.m->modules[md].path, "rotary_emb")) {
                    rot = &f.m->modules[md];
                    T_EQ_U64(f.p->mods[md].params, 0);
                }
            T_CHECK(rot != NULL);
        }
        fixture_free(&f);
    }
}

/* Parameter counts do not depend on the input shapes: DeiT's class and
 * distillation tokens are expanded over the batch, the text models'
 * position tables are sliced by the sequence. */
static void t_dynamo_params_fixed(void) {
    const char *names[] = {"distilbert_base", "qwen3_2layers", "opt_125m"};
    for (size_t i = 0; i < MP_ARRAY_LEN(names); i++) {
        fixture a, b;
        if (fixture_load(names[i], 1, &a) && fixture_load(names[i], 7, &b)) {
            T_EQ_U64(a.p->total.params, b.p->total.params);
            T_EQ_U64(a.p->total.params, (uint64_t)jr_get(a.ref, "torch_params")->i);
            T_CHECK(b.p->total.macs > a.p->total.macs);
        }
        fixture_free(&a);
        fixture_free(&b);
    }
}

/* The same rule on a model built here: a [1, 1, 4] token expanded to
 * [batch, 1, 4] and concatenated counts 4 parameters at any batch. */
static void t_expand_param_any_batch(void) {
    for (int64_t batch = 1; batch <= 16; batch *= 4) {
        mp_model *m = tb_new(18);
        tb_input(m, "x", MP_DT_FLOAT, 3, TB_DIMS(batch, 5, 4));
        tb_weight(m, "tok", MP_DT_FLOAT, 3, TB_DIMS(1, 1, 4));
        tb_const_i(m, "shape", MP_DT_INT64, 1, TB_DIMS(3), TB_DIMS(batch, 1, 4));
        tb_node(m, "Expand", "tok,shape", "e");
        int cat = tb_node(m, "Concat", "e,x", "y");
        tb_attr_i(m, cat, "axis", 1);
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        if (p) {
            T_EQ_U64(p->total.params, 4);
            T_EQ_STR(tb_shape(m, "y"), batch == 1 ? "1x6x4" : batch == 4 ? "4x6x4" : "16x6x4");
        }
        tb_done(m, p);
    }
}

/* Every Conv node's work is in the module that owns its weight (the
 * weight's target less ".weight"): the optimizer's folded BatchNorm keeps
 * no MACs. Returns the convolutions checked. */
static int conv_homes(const mp_model *m, const mp_profile *p, const char *name) {
    const mp_graph *g = m->graph;
    int n = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        const mp_node *nd = &g->nodes[k];
        if (strcmp(nd->op, "Conv") != 0 || nd->n_in < 2 || nd->in[1] < 0) continue;
        const char *w = g->values[nd->in[1]].name;
        const char *dot = strrchr(w, '.');
        const char *path = nd->module >= 0 ? m->modules[nd->module].path : "";
        if (!dot || strncmp(path, w, (size_t)(dot - w)) != 0 || path[dot - w] != 0)
            mp_t_fail(__FILE__, __LINE__, "%s: node %s (weight %s) is in module '%s'", name,
                      nd->name, w, path);
        else if (p->mods[nd->module].macs == 0)
            mp_t_fail(__FILE__, __LINE__, "%s: module %s has no MACs", name, path);
        n++;
    }
    return n;
}

/* Exports by torch 2.11's dynamo exporter whose optimizer merged equal
 * initializers (all LayerNorm scales one tensor, all zero biases another)
 * and dropped zero biases, or folded the train-mode BatchNorms into the
 * convolutions before them (models/dynamo/: the train_exports and
 * dynamo_twins): PyTorch's count, and per module PyTorch's count where
 * NAME.json gives module_params. Before: ResNet-50 25,503,912 with each
 * convolution's work in the BatchNorm after it, BERT 109,400,064, GPT-2
 * 124,320,000, BERT-base 109,445,376 (the Llama was right: 505,956,352). */
static void t_dynamo_merged_and_folded(void) {
    static const char *const names[] = {"resnet50_train_torch211", "bert_cls_train_torch211",
                                        "gpt2_dynamo", "bert_base_dynamo",
                                        "llama_1b_4layers_dynamo"};
    for (size_t i = 0; i < MP_ARRAY_LEN(names); i++) {
        char path[256];
        size_t len;
        snprintf(path, sizeof path, "models/dynamo/%s.json", names[i]);
        char *text = jr_slurp(path, &len);
        jr *ref = text ? jr_parse(text, len, NULL) : NULL;
        free(text);
        T_CHECK(ref != NULL);
        if (!ref) continue;
        const jr *want = jr_get(ref, "torch_params");
        if (!want) want = jr_get(ref, "params");
        snprintf(path, sizeof path, "models/dynamo/%s.onnx", names[i]);
        mp_model *m = NULL;
        mp_profile *p = NULL;
        T_OK(mp_model_load(path, &m));
        if (m) T_OK(mp_profile_static(m, &p));
        if (p && want) {
            if (p->total.params != (uint64_t)want->i)
                mp_t_fail(__FILE__, __LINE__, "%s: params %llu, PyTorch %lld", names[i],
                          (unsigned long long)p->total.params, (long long)want->i);
            /* the Llama's norms are RMSNorms without bias, nothing merged */
            T_CHECK(!p->bn_folded && (p->params_by_role_n > 0) == !strstr(names[i], "llama"));
            const jr *mp = jr_get(ref, "module_params");
            int checked = 0;
            for (const jr *e = mp ? mp->child : NULL; e; e = e->next) {
                int md = e->key[0] ? mp_strmap_get(&m->module_paths, e->key) : 0;
                uint64_t got = md >= 0 ? p->mods[md].params : 0;
                if (got != (uint64_t)e->i)
                    mp_t_fail(__FILE__, __LINE__, "%s: module '%s' has %llu params, PyTorch %lld",
                              names[i], e->key, (unsigned long long)got, (long long)e->i);
                checked++;
            }
            if (mp) T_CHECK(checked > 10);
            if (strstr(names[i], "resnet50")) T_EQ(conv_homes(m, p, names[i]), 53);
        }
        mp_profile_free(p);
        mp_model_free(m);
        jr_free(ref);
    }
}

/* The train exports are weightless copies: every initializer's data was
 * external and is gone, the shape constants of Reshape and Expand with it.
 * Their value_info still declares each value's shape, which fills what
 * the inference cannot find (docs/COUNTING.md "value_info"). By hand,
 * BERT-base's classifier at 2 x 128 tokens: 256 tokens x 12 layers x
 * (4 x 768^2 + 2 x 768 x 3,072) = 21,743,271,936, the attention's two
 * products 12 x 2 x 2 x 12 heads x 128^2 x 64 = 603,979,776, the pooler
 * 2 x 768^2 = 1,179,648 and the classifier 2 x 768 x 2 = 3,072:
 * 22,348,434,432 MACs; ResNet-50 at batch 2: 2 x 4,089,184,256. Before,
 * both were unknown (at least 19.9 G and 8.17 G). */
static void t_dynamo_value_info_fills(void) {
    static const struct {
        const char *name;
        uint64_t macs;
    } cases[] = {{"bert_cls_train_torch211", 22348434432ull}, {"resnet50_train_torch211", 8178368512ull}};
    for (size_t i = 0; i < MP_ARRAY_LEN(cases); i++) {
        char path[256];
        snprintf(path, sizeof path, "models/dynamo/%s.onnx", cases[i].name);
        mp_model *m;
        mp_profile *p = tb_prof_file(path, &m);
        if (p) {
            T_EQ(p->total.unknown, 0);
            T_EQ_U64(p->total.macs, cases[i].macs);
        }
        tb_done(m, p);
    }
}

/* The dynamo twins against the TorchScript exports of the same model code
 * (models/gpt2.onnx, models/bert_base.onnx): every module has the same
 * parameters and MACs at batch 1, sequence 128. */
static void t_dynamo_twins_match_torchscript(void) {
    static const char *const pairs[][2] = {{"models/gpt2.onnx", "models/dynamo/gpt2_dynamo.onnx"},
                                           {"models/bert_base.onnx",
                                            "models/dynamo/bert_base_dynamo.onnx"}};
    for (size_t i = 0; i < MP_ARRAY_LEN(pairs); i++) {
        mp_model *m[2] = {NULL, NULL};
        mp_profile *p[2] = {NULL, NULL};
        for (int j = 0; j < 2; j++) {
            T_OK(mp_model_load(pairs[i][j], &m[j]));
            if (!m[j]) continue;
            T_OK(mp_model_set_dim(m[j], "batch", 1));
            T_OK(mp_model_set_dim(m[j], "seq", 128));
            T_OK(mp_profile_static(m[j], &p[j]));
        }
        if (p[0] && p[1]) {
            T_EQ_U64(p[0]->total.params, p[1]->total.params);
            T_EQ_U64(p[0]->total.macs, p[1]->total.macs);
            T_EQ(m[0]->n_modules, m[1]->n_modules);
            for (int md = 0; md < m[0]->n_modules; md++) {
                int o = md ? mp_strmap_get(&m[1]->module_paths, m[0]->modules[md].path) : 0;
                if (o < 0) {
                    mp_t_fail(__FILE__, __LINE__, "%s: no module '%s'", pairs[i][1],
                              m[0]->modules[md].path);
                    continue;
                }
                if (p[0]->mods[md].params != p[1]->mods[o].params ||
                    p[0]->mods[md].macs != p[1]->mods[o].macs)
                    mp_t_fail(__FILE__, __LINE__, "%s: module '%s': params %llu/%llu, MACs %llu/%llu",
                              pairs[i][1], m[0]->modules[md].path,
                              (unsigned long long)p[0]->mods[md].params,
                              (unsigned long long)p[1]->mods[o].params,
                              (unsigned long long)p[0]->mods[md].macs,
                              (unsigned long long)p[1]->mods[o].macs);
            }
        }
        for (int j = 0; j < 2; j++) {
            mp_profile_free(p[j]);
            mp_model_free(m[j]);
        }
    }
}

MP_TESTS(dynamo){
    {"dynamo_merged_and_folded", t_dynamo_merged_and_folded},
    {"dynamo_twins_match_torchscript", t_dynamo_twins_match_torchscript},
    {"dynamo_params_and_macs", t_dynamo_params_and_macs},
    {"dynamo_module_tree", t_dynamo_module_tree},
    {"dynamo_buffers", t_dynamo_buffers},
    {"dynamo_params_fixed", t_dynamo_params_fixed},
    {"expand_param_any_batch", t_expand_param_any_batch},
    {"dynamo_value_info_fills", t_dynamo_value_info_fills},
};
MP_TESTS_END(dynamo)
