/* Real models exported with PyTorch (tools/export_fixtures.py): parameter
 * counts equal PyTorch's, MACs equal hand-derived formulas, and every
 * operator is costed. Run from the repository root. */
#include <stdlib.h>

#include "analyze/profile.h"
#include "graph/graph.h"
#include "jsonr.h"
#include "test.h"

static mp_profile *profile_fixture(const char *file, int64_t batch, int64_t seq, mp_model **mo) {
    char path[256];
    snprintf(path, sizeof path, "models/%s", file);
    mp_model *m = NULL;
    mp_status st = mp_model_load(path, &m);
    if (st) {
        mp_t_fail(__FILE__, __LINE__, "%s: %s", path, mp_last_error());
        return NULL;
    }
    if (mp_strmap_get(&m->sym_names, "batch") > 0) T_OK(mp_model_set_dim(m, "batch", batch));
    if (mp_strmap_get(&m->sym_names, "seq") > 0) T_OK(mp_model_set_dim(m, "seq", seq));
    mp_profile *p = NULL;
    st = mp_profile_static(m, &p);
    if (st) {
        mp_t_fail(__FILE__, __LINE__, "%s: %s", path, mp_last_error());
        mp_model_free(m);
        return NULL;
    }
    *mo = m;
    return p;
}

static void t_params_match_pytorch(void) {
    size_t len;
    char *text = jr_slurp("models/expected.json", &len);
    T_CHECK(text != NULL);
    if (!text) return;
    jr *root = jr_parse(text, len, NULL);
    free(text);
    T_CHECK(root != NULL);
    int n = 0;
    for (const jr *e = root ? root->child : NULL; e; e = e->next) {
        const jr *file = jr_get(e, "file"), *params = jr_get(e, "params");
        if (!file || !params) continue;
        mp_model *m = NULL;
        mp_profile *p = profile_fixture(file->s, 1, 128, &m);
        if (!p) continue;
        const jr *dims = jr_get(e, "dims"); /* the fixture's own dims (height, width) */
        bool other = false;
        for (const jr *d = dims ? dims->child : NULL; d; d = d->next)
            if (strcmp(d->key, "batch") && strcmp(d->key, "seq")) {
                T_OK(mp_model_set_dim(m, d->key, d->i));
                other = true;
            }
        if (other) {
            mp_profile_free(p);
            p = NULL;
            T_OK(mp_profile_static(m, &p));
            if (!p) {
                mp_model_free(m);
                continue;
            }
        }
        n++;
        if (p->total.params != (uint64_t)params->i)
            mp_t_fail(__FILE__, __LINE__, "%s: params %llu, PyTorch counts %lld", file->s,
                      (unsigned long long)p->total.params, (long long)params->i);
        /* every operator is costed; only a model whose outputs are
         * data-dependent (detection: boxes after NMS) may have nodes whose
         * cost needs sizes known at run time */
        bool data_dependent = jr_get(e, "data_dependent_outputs") != NULL;
        if (p->total.uncounted || (p->total.unknown && !data_dependent))
            mp_t_fail(__FILE__, __LINE__, "%s: %d uncounted and %d unknown-cost nodes", file->s,
                      p->total.uncounted, p->total.unknown);
        if (p->n_unresolved)
            mp_t_fail(__FILE__, __LINE__, "%s: unresolved dims", file->s);
        mp_profile_free(p);
        mp_model_free(m);
    }
    T_CHECK(n >= 15);
    jr_free(root);
}

/* MACs of a k x k convolution producing hw x hw outputs. */
static uint64_t conv(uint64_t k, uint64_t cin, uint64_t cout, uint64_t hw) {
    return k * k * cin * cout * hw * hw;
}

static void t_resnet18_macs(void) {
    /* batch 1, 224x224. conv1 7x7 3->64 at 112; layer1: 4 x (3x3 64->64 at 56);
     * layers 2-4: a strided 3x3 (C->2C), three 3x3 (2C->2C) and a 1x1
     * downsample (C->2C) at 28, 14, 7; fc 512->1000. */
    uint64_t macs = conv(7, 3, 64, 112) + 4 * conv(3, 64, 64, 56);
    uint64_t c = 64, hw = 28;
    for (int stage = 0; stage < 3; stage++, c *= 2, hw /= 2)
        macs += conv(3, c, 2 * c, hw) + 3 * conv(3, 2 * c, 2 * c, hw) + conv(1, c, 2 * c, hw);
    macs += 512 * 1000;
    T_EQ_U64(macs, 1814073344ull); /* the figure torchvision quotes: 1.81 G */
    const char *files[] = {"resnet18.onnx", "resnet18_functions.onnx"};
    for (int i = 0; i < 2; i++) {
        mp_model *m = NULL;
        mp_profile *p = profile_fixture(files[i], 1, 0, &m);
        if (!p) continue;
        T_EQ_U64(p->total.macs, macs);
        mp_profile_free(p);
        mp_model_free(m);
    }
    /* batch scales MACs linearly */
    mp_model *m = NULL;
    mp_profile *p = profile_fixture("resnet18.onnx", 8, 0, &m);
    if (p) T_EQ_U64(p->total.macs, 8 * macs);
    mp_profile_free(p);
    mp_model_free(m);
}

static void t_bert_base_macs(void) {
    /* seq S = 128, hidden H = 768, 12 heads of 64, FFN 3072, 12 layers.
     * Per layer: Q, K, V, O projections 4*S*H*H; scores and context
     * 2*heads*S*S*64; FFN 2*S*H*3072. Pooler: one token, H*H. */
    uint64_t S = 128, H = 768;
    uint64_t layer = 4 * S * H * H + 2 * 12 * S * S * 64 + 2 * S * H * 3072;
    uint64_t macs = 12 * layer + H * H;
    mp_model *m = NULL;
    mp_profile *p = profile_fixture("bert_base.onnx", 1, S, &m);
    if (!p) return;
    T_EQ_U64(p->total.macs, macs);
    mp_profile_free(p);
    mp_model_free(m);
}

static void t_llama_small_macs(void) {
    /* seq S = 128, hidden 512, 8 heads of 64, SwiGLU 1376, 4 layers,
     * vocab 32000, untied lm_head. Per layer: q, k, v, o 4*S*512*512;
     * scores and context 2*8*S*S*64; gate, up, down 3*S*512*1376.
     * Rotary angles are computed with element-wise Mul (no MACs). */
    uint64_t S = 128;
    uint64_t layer = 4 * S * 512 * 512 + 2 * 8 * S * S * 64 + 3 * S * 512 * 1376;
    uint64_t macs = 4 * layer + S * 512 * 32000;
    mp_model *m = NULL;
    mp_profile *p = profile_fixture("llama_small.onnx", 1, S, &m);
    if (!p) return;
    T_EQ_U64(p->total.macs, macs);
    mp_profile_free(p);
    mp_model_free(m);
}

static void t_gpt2_tied_weight(void) {
    /* lm_head shares wte (50257 x 768): counted once in the total, shown
     * in both modules. */
    mp_model *m = NULL;
    mp_profile *p = profile_fixture("gpt2.onnx", 1, 64, &m);
    if (!p) return;
    int lm = mp_strmap_get(&m->module_paths, "lm_head");
    int wte = mp_strmap_get(&m->module_paths, "transformer.wte");
    T_CHECK(lm > 0 && wte > 0);
    if (lm > 0) T_EQ_U64(p->mods[lm].params, 50257ull * 768);
    if (wte > 0) T_EQ_U64(p->mods[wte].params, 50257ull * 768);
    T_EQ_U64(p->mods[0].params, p->total.params);
    mp_profile_free(p);
    mp_model_free(m);
}

static void t_module_tree(void) {
    mp_model *m = NULL;
    mp_profile *p = profile_fixture("bert_base.onnx", 1, 128, &m);
    if (!p) return;
    int q = mp_strmap_get(&m->module_paths, "bert.encoder.layer.3.attention.self.query");
    T_CHECK(q > 0);
    if (q > 0) {
        T_EQ_STR(m->modules[q].name, "query");
        T_EQ(m->modules[q].depth, 7);
        T_EQ_U64(p->mods[q].params, 768ull * 768 + 768);
        T_EQ_U64(p->mods[q].macs, 128ull * 768 * 768);
    }
    int layer = mp_strmap_get(&m->module_paths, "bert.encoder.layer.3");
    T_CHECK(layer > 0);
    /* a BERT layer: 4*(H*H+H) attention + 2 LayerNorms (2*2H) + FFN
     * (H*4H+4H) + (4H*H+H) = 7,087,872 */
    if (layer > 0) T_EQ_U64(p->mods[layer].params, 7087872);
    mp_profile_free(p);
    mp_model_free(m);
}

MP_TESTS(models){
    {"params_match_pytorch", t_params_match_pytorch},
    {"resnet18_macs", t_resnet18_macs},
    {"bert_base_macs", t_bert_base_macs},
    {"llama_small_macs", t_llama_small_macs},
    {"gpt2_tied_weight", t_gpt2_tied_weight},
    {"module_tree", t_module_tree},
};
MP_TESTS_END(models)
