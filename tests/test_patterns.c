/* The pattern layer (src/analyze/patterns.h) on every export form: real
 * exports (TorchScript in models/, the dynamo exporter in models/dynamo/)
 * and the operators of opset 23 and com.microsoft built here. Each case
 * says what the model has: blocks, heads, KV heads, head dim, the forms of
 * its norms, activations, rotary and attention, the roles of every block's
 * weight products, the embedding and LM head. Run from the repository
 * root. */
#include <math.h>
#include <stdlib.h>

#include "analyze/patterns.h"
#include "analyze/profile.h"
#include "jsonr.h"
#include "pbw.h"
#include "tbuild.h"
#include "test.h"

#define R(x) (1u << MP_WROLE_##x)

/* What one export must give. */
typedef struct pcase {
    const char *file;
    int64_t batch, seq;         /* dims batch and seq, when the export has them (0: static) */
    int blocks, heads, kv_heads, head_dim;
    int attn_form, mask;
    bool causal;
    int norm_kind, norm_form, n_norms;
    int mlp, mlp_form;          /* the MLP activation (the gated one's kind) */
    int rot_dim, rot_head;      /* 0: no rotary */
    unsigned roles;             /* what every block has */
    int64_t vocab;              /* -1: no token embedding */
    int tied;                   /* -1: no LM head */
    bool parallel, post_norm, qk_norm, gqa_repeat;
    double scale;
} pcase;

static const pcase cases[] = {
    /* TorchScript exporter (torch 1.13, opset 14) */
    {"models/gpt2.onnx", 1, 16, 12, 12, 12, 64, MP_FORM_DECOMPOSED, MP_MASK_WHERE, true, MP_NORM_LAYER,
     MP_FORM_DECOMPOSED, 25, MP_ACT_GELU_TANH, MP_FORM_DECOMPOSED, 0, 0, R(QKV) | R(O) | R(UP) | R(DOWN), 50257, 1,
     false, false, false, false, 0.125},
    {"models/bert_base.onnx", 1, 16, 12, 12, 12, 64, MP_FORM_DECOMPOSED, MP_MASK_ADD, false, MP_NORM_LAYER,
     MP_FORM_DECOMPOSED, 25, MP_ACT_GELU, MP_FORM_DECOMPOSED, 0, 0, R(Q) | R(K) | R(V) | R(O) | R(UP) | R(DOWN),
     30522, -1, false, true, false, false, 0.125},
    {"models/llama_small.onnx", 1, 16, 4, 8, 8, 64, MP_FORM_DECOMPOSED, MP_MASK_ADD, true, MP_NORM_RMS,
     MP_FORM_DECOMPOSED, 9, MP_ACT_SWIGLU, MP_FORM_DECOMPOSED, 64, 64,
     R(Q) | R(K) | R(V) | R(O) | R(GATE) | R(UP) | R(DOWN), 32000, 0, false, false, false, false, 0.125},
    {"models/vit_b_16.onnx", 1, 0, 12, 12, 12, 64, MP_FORM_DECOMPOSED, MP_MASK_NONE, false, MP_NORM_LAYER,
     MP_FORM_DECOMPOSED, 25, MP_ACT_GELU, MP_FORM_DECOMPOSED, 0, 0, R(QKV) | R(O) | R(UP) | R(DOWN), -1, -1, false,
     false, false, false, 0.125},
    /* dynamo exporter (torch 2.11, opset 20): the project's own twins */
    {"models/dynamo/gpt2_dynamo.onnx", 1, 16, 12, 12, 12, 64, MP_FORM_DECOMPOSED, MP_MASK_WHERE, true, MP_NORM_LAYER,
     MP_FORM_OP, 25, MP_ACT_GELU_TANH, MP_FORM_DECOMPOSED, 0, 0, R(QKV) | R(O) | R(UP) | R(DOWN), 50257, 1, false,
     false, false, false, 0.125},
    {"models/dynamo/bert_base_dynamo.onnx", 1, 16, 12, 12, 12, 64, MP_FORM_DECOMPOSED, MP_MASK_ADD, false,
     MP_NORM_LAYER, MP_FORM_OP, 25, MP_ACT_GELU, MP_FORM_OP, 0, 0, R(Q) | R(K) | R(V) | R(O) | R(UP) | R(DOWN), 30522,
     -1, false, true, false, false, 0.125},
    {"models/dynamo/llama_1b_4layers_dynamo.onnx", 1, 16, 4, 32, 8, 64, MP_FORM_DECOMPOSED, MP_MASK_ADD, true,
     MP_NORM_RMS, MP_FORM_DECOMPOSED, 9, MP_ACT_SWIGLU, MP_FORM_DECOMPOSED, 64, 64,
     R(Q) | R(K) | R(V) | R(O) | R(GATE) | R(UP) | R(DOWN), 128256, 1, false, false, false, true, 0.125},
    /* dynamo exporter, Hugging Face modules (decomposed SDPA) */
    {"models/dynamo/distilbert_base.onnx", 1, 16, 6, 12, 12, 64, MP_FORM_SDPA, MP_MASK_ADD, false, MP_NORM_LAYER,
     MP_FORM_OP, 13, MP_ACT_GELU, MP_FORM_OP, 0, 0, R(Q) | R(K) | R(V) | R(O) | R(UP) | R(DOWN), 30522, -1, false,
     true, false, false, 0.125},
    {"models/dynamo/opt_125m.onnx", 1, 16, 12, 12, 12, 64, MP_FORM_SDPA, MP_MASK_ADD, true, MP_NORM_LAYER, MP_FORM_OP,
     25, MP_ACT_RELU, MP_FORM_OP, 0, 0, R(Q) | R(K) | R(V) | R(O) | R(UP) | R(DOWN), 50272, 1, false, false, false,
     false, 0.125},
    {"models/dynamo/pythia_70m.onnx", 1, 16, 6, 8, 8, 64, MP_FORM_SDPA, MP_MASK_ADD, true, MP_NORM_LAYER, MP_FORM_OP,
     13, MP_ACT_GELU, MP_FORM_OP, 16, 64, R(QKV) | R(O) | R(UP) | R(DOWN), 50304, 0, true, false, false, false,
     0.125},
    /* Qwen3-0.6B's layer (qwen3_2layers.json: q_proj makes 2048 features,
     * k_proj 1024, head_dim 128: 16 query heads, 8 KV heads) */
    {"models/dynamo/qwen3_2layers.onnx", 1, 16, 2, 16, 8, 128, MP_FORM_SDPA, MP_MASK_ADD, true, MP_NORM_RMS,
     MP_FORM_DECOMPOSED, 9, MP_ACT_SWIGLU, MP_FORM_DECOMPOSED, 128, 128,
     R(Q) | R(K) | R(V) | R(O) | R(GATE) | R(UP) | R(DOWN), 151936, 1, false, false, true, true,
     0.08838834764831845},
    {"models/dynamo/timm_deit_small_distilled_patch16_224.onnx", 0, 0, 12, 6, 6, 64, MP_FORM_SDPA, MP_MASK_NONE,
     false, MP_NORM_LAYER, MP_FORM_OP, 25, MP_ACT_GELU, MP_FORM_OP, 0, 0, R(QKV) | R(O) | R(UP) | R(DOWN), -1, -1,
     false, false, false, false, 0.125},
};

static mp_model *load(const char *file, int64_t batch, int64_t seq, mp_profile **p) {
    mp_model *m = NULL;
    *p = NULL;
    if (mp_model_load(file, &m) || (batch && mp_model_set_dim(m, "batch", batch)) ||
        (seq && mp_model_set_dim(m, "seq", seq)) || mp_profile_static(m, p)) {
        mp_t_fail(__FILE__, __LINE__, "%s: %s", file, mp_last_error());
        mp_model_free(m);
        return NULL;
    }
    return m;
}

#define CHECK_EQ(what, got, want)                                                                          \
    do {                                                                                                   \
        long long g_ = (long long)(got), w_ = (long long)(want);                                           \
        if (g_ != w_) mp_t_fail(__FILE__, __LINE__, "%s: %s %lld, expected %lld", c->file, what, g_, w_); \
    } while (0)

static void check_case(const pcase *c) {
    mp_profile *prof;
    mp_model *m = load(c->file, c->batch, c->seq, &prof);
    if (!m) return;
    const mp_graph *g = m->graph;
    const mp_patterns *p = mp_patterns_of(g);
    if (!p) {
        mp_t_fail(__FILE__, __LINE__, "%s: %s", c->file, mp_last_error());
        goto done;
    }
    T_CHECK(mp_patterns_of(g) == p); /* found once per shaped graph */
    CHECK_EQ("blocks", p->n_blocks, c->blocks);
    CHECK_EQ("attentions", p->n_attn, c->blocks);
    CHECK_EQ("heads", p->heads, c->heads);
    CHECK_EQ("kv heads", p->kv_heads, c->kv_heads);
    CHECK_EQ("head dim", p->head_dim, c->head_dim);
    CHECK_EQ("norms", p->n_norms, c->n_norms);
    CHECK_EQ("not recognised", p->n_miss, 0);
    CHECK_EQ("vocabulary", p->vocab, c->vocab);
    CHECK_EQ("tied", c->tied < 0 ? p->lm_head : p->tied, c->tied < 0 ? -1 : c->tied);
    if (c->tied >= 0) T_CHECK(p->final_norm >= 0 && (p->norms[p->final_norm].roles & (1u << MP_NROLE_FINAL)));
    for (int i = 0; i < p->n_norms; i++) {
        CHECK_EQ("norm kind", p->norms[i].kind, c->norm_kind);
        CHECK_EQ("norm form", p->norms[i].form, c->norm_form);
    }
    /* the KV cache: K and V of every layer, KV heads x head dim */
    int unk;
    CHECK_EQ("KV elements per token", mp_patterns_kv_elems_per_token(p, &unk),
             (int64_t)c->blocks * 2 * c->kv_heads * c->head_dim);
    CHECK_EQ("attentions of unknown size", unk, 0);
    int rotaries = 0;
    for (int i = 0; i < p->n_rotary; i++) {
        const mp_protary *r = &p->rotary[i];
        rotaries++;
        CHECK_EQ("rotary dims", r->rot_dim, c->rot_dim);
        CHECK_EQ("rotary head dim", r->head_dim, c->rot_head);
        T_CHECK(r->attn >= 0 && r->cos >= 0 && r->sin >= 0);
    }
    CHECK_EQ("rotaries (q and k per block)", rotaries, c->rot_dim ? 2 * c->blocks : 0);
    for (int bi = 0; bi < p->n_blocks; bi++) {
        const mp_pblock *b = &p->blocks[bi];
        const mp_pattn *a = &p->attn[b->attn];
        T_CHECK(b->module >= 0);
        T_CHECK(a->block == bi);
        CHECK_EQ("attention form", a->form, c->attn_form);
        CHECK_EQ("mask", a->mask, c->mask);
        CHECK_EQ("causal", a->causal, c->causal);
        CHECK_EQ("block heads", b->heads, c->heads);
        CHECK_EQ("block kv heads", b->kv_heads, c->kv_heads);
        CHECK_EQ("block head dim", b->head_dim, c->head_dim);
        CHECK_EQ("MLP", b->mlp_kind, c->mlp);
        CHECK_EQ("MLP form", p->acts[b->mlp].form, c->mlp_form);
        CHECK_EQ("parallel", b->parallel, c->parallel);
        if (fabs(a->scale - c->scale) > 1e-6 * c->scale)
            mp_t_fail(__FILE__, __LINE__, "%s: block %d: scale %g, expected %g", c->file, bi, a->scale, c->scale);
        unsigned roles = 0;
        for (int r = 0; r < MP_WROLE_COUNT; r++)
            if (b->w[r].node >= 0) roles |= 1u << r;
        CHECK_EQ("weight roles", roles, c->roles);
        /* the roles' widths: heads x head dim in and out of the attention */
        int64_t qd = (int64_t)c->heads * c->head_dim, kvd = (int64_t)c->kv_heads * c->head_dim;
        if (roles & R(QKV)) CHECK_EQ("qkv width", b->w[MP_WROLE_QKV].out, qd + 2 * kvd);
        if (roles & R(Q)) CHECK_EQ("q width", b->w[MP_WROLE_Q].out, qd);
        if (roles & R(K)) CHECK_EQ("k width", b->w[MP_WROLE_K].out, kvd);
        if (roles & R(V)) CHECK_EQ("v width", b->w[MP_WROLE_V].out, kvd);
        CHECK_EQ("o width", b->w[MP_WROLE_O].in, qd);
        CHECK_EQ("ffn", b->ffn, b->w[MP_WROLE_DOWN].in);
        CHECK_EQ("hidden", b->hidden, b->w[MP_WROLE_O].out);
        T_CHECK(b->norm[MP_NROLE_ATTN_IN] >= 0 && b->norm[MP_NROLE_MLP_IN] >= 0);
        CHECK_EQ("post-norm", b->norm[MP_NROLE_ATTN_OUT] >= 0 && b->norm[MP_NROLE_MLP_OUT] >= 0, c->post_norm);
        CHECK_EQ("q/k norms", b->norm[MP_NROLE_Q] >= 0 && b->norm[MP_NROLE_K] >= 0, c->qk_norm);
        CHECK_EQ("rotary on q", a->rotary_q >= 0, c->rot_dim > 0);
        CHECK_EQ("rotary on k", a->rotary_k >= 0, c->rot_dim > 0);
        /* K and V before any repetition: [B, kv heads, S, D]; after: [B, heads, S, D] */
        CHECK_EQ("K repeated", a->k_kv != a->k, c->gqa_repeat);
        CHECK_EQ("V repeated", a->v_kv != a->v, c->gqa_repeat);
        const mp_value *kkv = a->k_kv >= 0 ? &g->values[a->k_kv] : NULL, *vkv = &g->values[a->v_kv];
        if (c->gqa_repeat && kkv) {
            CHECK_EQ("K cache heads", kkv->dims[1], c->kv_heads);
            CHECK_EQ("V cache heads", vkv->dims[1], c->kv_heads);
            CHECK_EQ("repeated K heads", g->values[a->k].dims[1], c->heads);
        }
        /* every member of the attention points back at it */
        for (int i = 0; i < a->n; i++) {
            mp_pref r = mp_pattern_at(p, p->members[a->first + i].node);
            T_CHECK(r.kind == MP_PAT_ATTN && r.index == b->attn);
        }
        T_CHECK(a->qk >= 0 && mp_pattern_at(p, a->qk).part == MP_PART_QK);
        T_CHECK(a->pv >= 0 && mp_pattern_at(p, a->pv).part == MP_PART_PV);
        T_CHECK(mp_pattern_at(p, a->softmax).part == MP_PART_SOFTMAX);
        CHECK_EQ("guard", a->guard, c->attn_form == MP_FORM_SDPA && c->mask != MP_MASK_NONE);
        if (c->seq) {
            CHECK_EQ("query length", a->seq_q, c->seq);
            CHECK_EQ("key length", a->seq_k, c->seq);
        }
    }
done:
    mp_profile_free(prof);
    mp_model_free(m);
}

static void t_exports(void) {
    for (size_t i = 0; i < MP_ARRAY_LEN(cases); i++) check_case(&cases[i]);
}

/* The Qwen3 fixture's sizes from PyTorch's own figures beside it: q_proj
 * and k_proj FLOPs over 2 x batch x seq x hidden give the features they
 * make, which are heads x head dim and KV heads x head dim. */
static void t_qwen3_config(void) {
    size_t len;
    char *text = jr_slurp("models/dynamo/qwen3_2layers.json", &len);
    jr *ref = text ? jr_parse(text, len, NULL) : NULL;
    free(text);
    if (!ref) {
        mp_t_fail(__FILE__, __LINE__, "qwen3_2layers.json: cannot read it");
        return;
    }
    int64_t b = jr_at(jr_path(ref, "inputs.input_ids"), 0)->i, s = jr_at(jr_path(ref, "inputs.input_ids"), 1)->i;
    int64_t hidden = jr_path(ref, "module_params.model.norm") ? 0 : 0;
    const jr *mp = jr_get(ref, "module_params");
    for (const jr *e = mp ? mp->child : NULL; e; e = e->next)
        if (strcmp(e->key, "model.norm") == 0) hidden = e->i;
    const jr *pm = jr_path(ref, "flop_counter.per_module");
    int64_t qf = 0, kf = 0;
    for (const jr *e = pm ? pm->child : NULL; e; e = e->next) {
        if (strcmp(e->key, "Qwen3ForCausalLM.model.layers.0.self_attn.q_proj") == 0) qf = e->i;
        if (strcmp(e->key, "Qwen3ForCausalLM.model.layers.0.self_attn.k_proj") == 0) kf = e->i;
    }
    jr_free(ref);
    T_EQ(hidden, 1024);
    int64_t qw = qf / (2 * b * s * hidden), kw = kf / (2 * b * s * hidden);
    mp_profile *prof;
    mp_model *m = load("models/dynamo/qwen3_2layers.onnx", b, s, &prof);
    if (!m) return;
    const mp_patterns *p = mp_patterns_of(m->graph);
    T_CHECK(p != NULL);
    if (p) {
        T_EQ(p->heads * p->head_dim, qw);
        T_EQ(p->kv_heads * p->head_dim, kw);
        T_EQ(p->hidden, hidden);
        for (int i = 0; i < p->n_blocks; i++) T_EQ(p->blocks[i].w[MP_WROLE_Q].out, qw);
    }
    mp_profile_free(prof);
    mp_model_free(m);
}

/* Patterns follow the graph's shapes: found again after another dim. */
static void t_shapes_change(void) {
    mp_profile *prof;
    mp_model *m = load("models/dynamo/qwen3_2layers.onnx", 1, 16, &prof);
    if (!m) return;
    const mp_patterns *p = mp_patterns_of(m->graph);
    T_CHECK(p && p->attn[0].seq_q == 16);
    mp_profile_free(prof);
    prof = NULL;
    T_OK(mp_model_set_dim(m, "seq", 40));
    T_OK(mp_profile_static(m, &prof));
    p = mp_patterns_of(m->graph);
    T_CHECK(p && p->attn[0].seq_q == 40 && p->attn[0].seq_k == 40);
    mp_profile_free(prof);
    mp_model_free(m);
}

/* ---- built graphs: the operators and forms no fixture has ---- */

#define F MP_DT_FLOAT

/* A model importing the default domain at `opset` and com.microsoft 1. */
static mp_model *ms_new(int opset) {
    mp_model *m = tb_new(opset);
    tb_opset(m, "com.microsoft", 1);
    return m;
}

static const mp_patterns *built(mp_model *m, mp_profile **p) {
    *p = tb_prof(m);
    const mp_patterns *pp = *p ? mp_patterns_of(m->graph) : NULL;
    T_CHECK(pp != NULL);
    return pp;
}

/* Attention (opset 23): rank 4 with GQA and a boolean mask; rank 3 with
 * q_num_heads / kv_num_heads, causal. */
static void t_attention_op23(void) {
    for (int form = 0; form < 2; form++) {
        mp_model *m = tb_new(23);
        if (form == 0) {
            tb_input(m, "q", F, 4, TB_DIMS(2, 4, 5, 8));
            tb_input(m, "k", F, 4, TB_DIMS(2, 2, 7, 8));
            tb_input(m, "v", F, 4, TB_DIMS(2, 2, 7, 8));
            tb_input(m, "mask", MP_DT_BOOL, 2, TB_DIMS(5, 7));
            tb_node(m, "Attention", "q,k,v,mask", "y");
        } else {
            tb_input(m, "q", F, 3, TB_DIMS(2, 5, 32));
            tb_input(m, "k", F, 3, TB_DIMS(2, 5, 16));
            tb_input(m, "v", F, 3, TB_DIMS(2, 5, 16));
            int n = tb_node(m, "Attention", "q,k,v", "y");
            tb_attr_i(m, n, "q_num_heads", 4);
            tb_attr_i(m, n, "kv_num_heads", 2);
            tb_attr_i(m, n, "is_causal", 1);
        }
        tb_output(m, "y");
        mp_profile *prof;
        const mp_patterns *p = built(m, &prof);
        if (p && p->n_attn == 1) {
            const mp_pattn *a = &p->attn[0];
            T_EQ(a->form, MP_FORM_OP);
            T_EQ(a->heads, 4);
            T_EQ(a->kv_heads, 2);
            T_EQ(a->head_dim, 8);
            T_EQ(a->seq_q, 5);
            T_EQ(a->seq_k, form == 0 ? 7 : 5);
            T_EQ(a->mask, form == 0 ? MP_MASK_BOOL : MP_MASK_CAUSAL_OP);
            T_EQ(a->causal, form == 1);
            T_EQ(a->k_kv, tb_val(m, "k") - m->graph->values);
            T_CHECK(fabs(a->scale - 1.0 / sqrt(8.0)) < 1e-12);
            T_EQ(mp_pattern_at(p, a->op).part, MP_PART_OP);
            int unk;
            T_EQ_U64(mp_patterns_kv_elems_per_token(p, &unk), 2 * (8 + 8));
        } else {
            mp_t_fail(__FILE__, __LINE__, "form %d: %d attentions", form, p ? p->n_attn : -1);
        }
        tb_done(m, prof);
    }
}

/* A block of com.microsoft operators: LayerNormalization, Attention (its
 * QKV projection inside), the output MatMul, SkipLayerNormalization,
 * MatMul, FastGelu, MatMul. Then MultiHeadAttention and
 * GroupQueryAttention fed by their own projections. */
static void t_attention_contrib(void) {
    for (int form = 0; form < 3; form++) {
        mp_model *m = ms_new(17);
        tb_input(m, "x", F, 3, TB_DIMS(2, 5, 32));
        tb_weight(m, "g", F, 1, TB_DIMS(32));
        tb_weight(m, "b", F, 1, TB_DIMS(32));
        tb_weight(m, "wo", F, 2, TB_DIMS(32, 32));
        tb_weight(m, "wu", F, 2, TB_DIMS(32, 64));
        tb_weight(m, "bu", F, 1, TB_DIMS(64));
        tb_weight(m, "wd", F, 2, TB_DIMS(64, 32));
        tb_node(m, "LayerNormalization", "x,g,b", "h");
        if (form == 0) {
            tb_weight(m, "wqkv", F, 2, TB_DIMS(32, 96));
            tb_weight(m, "bqkv", F, 1, TB_DIMS(96));
            int a = tb_node_d(m, "com.microsoft", "Attention", "h,wqkv,bqkv", "att");
            tb_attr_i(m, a, "num_heads", 4);
            tb_attr_i(m, a, "unidirectional", 1);
        } else {
            tb_weight(m, "wq", F, 2, TB_DIMS(32, 32));
            tb_weight(m, "wk", F, 2, TB_DIMS(32, form == 2 ? 16 : 32));
            tb_weight(m, "wv", F, 2, TB_DIMS(32, form == 2 ? 16 : 32));
            tb_node(m, "MatMul", "h,wq", "q");
            tb_node(m, "MatMul", "h,wk", "k");
            tb_node(m, "MatMul", "h,wv", "v");
            if (form == 1) {
                int a = tb_node_d(m, "com.microsoft", "MultiHeadAttention", "q,k,v", "att");
                tb_attr_i(m, a, "num_heads", 4);
            } else {
                tb_const_i(m, "seqlens", MP_DT_INT32, 1, TB_DIMS(2), (const int64_t[]){4, 4});
                tb_const_i(m, "total", MP_DT_INT32, 0, NULL, (const int64_t[]){5});
                int a = tb_node_d(m, "com.microsoft", "GroupQueryAttention", "q,k,v,,,seqlens,total", "att");
                tb_attr_i(m, a, "num_heads", 4);
                tb_attr_i(m, a, "kv_num_heads", 2);
            }
        }
        tb_node(m, "MatMul", "att,wo", "o");
        tb_node_d(m, "com.microsoft", "SkipLayerNormalization", "o,x,g,b", "h2");
        tb_node(m, "MatMul", "h2,wu", "u");
        tb_node_d(m, "com.microsoft", "FastGelu", "u,bu", "a2");
        tb_node(m, "MatMul", "a2,wd", "y");
        tb_output(m, "y");
        mp_profile *prof;
        const mp_patterns *p = built(m, &prof);
        if (!p || p->n_blocks != 1 || p->n_attn != 1) {
            mp_t_fail(__FILE__, __LINE__, "form %d: %d blocks", form, p ? p->n_blocks : -1);
            tb_done(m, prof);
            continue;
        }
        const mp_pattn *a = &p->attn[0];
        const mp_pblock *b = &p->blocks[0];
        T_EQ(a->form, MP_FORM_CONTRIB);
        T_EQ(a->heads, 4);
        T_EQ(a->kv_heads, form == 2 ? 2 : 4);
        T_EQ(a->head_dim, 8);
        T_EQ(a->causal, form != 1);
        T_EQ(a->mask, form == 1 ? MP_MASK_NONE : MP_MASK_CAUSAL_OP);
        if (form == 0) {
            T_EQ(a->q, -1);
            T_EQ(b->w[MP_WROLE_QKV].node, a->op);
            T_EQ(b->w[MP_WROLE_QKV].out, 96);
        } else {
            T_EQ(b->w[MP_WROLE_Q].out, 32);
            T_EQ(b->w[MP_WROLE_K].out, form == 2 ? 16 : 32);
            T_CHECK(b->w[MP_WROLE_V].node >= 0);
        }
        T_CHECK(b->w[MP_WROLE_O].node >= 0 && b->w[MP_WROLE_UP].node >= 0 && b->w[MP_WROLE_DOWN].node >= 0);
        T_EQ(b->mlp_kind, MP_ACT_GELU_TANH);
        T_EQ(p->acts[b->mlp].form, MP_FORM_CONTRIB);
        T_EQ(p->acts[b->mlp].bias, tb_val(m, "bu") - m->graph->values);
        T_EQ(p->n_norms, 2);
        T_EQ(p->norms[1].kind, MP_NORM_LAYER);
        T_EQ(p->norms[1].form, MP_FORM_CONTRIB);
        T_EQ(p->norms[1].skip, tb_val(m, "x") - m->graph->values);
        T_CHECK(b->norm[MP_NROLE_ATTN_IN] == 0 && b->norm[MP_NROLE_MLP_IN] == 1);
        tb_done(m, prof);
    }
}

/* Whole norms, activations and rotaries of opset 23/24 and
 * com.microsoft, each on its own. */
static void t_whole_ops(void) {
    static const struct {
        const char *domain, *op;
        int opset, kind, what, form;
    } ops[] = {
        {"", "RMSNormalization", 23, MP_PAT_NORM, MP_NORM_RMS, MP_FORM_OP},
        {"", "SimplifiedLayerNormalization", 17, MP_PAT_NORM, MP_NORM_RMS, MP_FORM_OP},
        {"com.microsoft", "SkipSimplifiedLayerNormalization", 17, MP_PAT_NORM, MP_NORM_RMS, MP_FORM_CONTRIB},
        {"", "Gelu", 20, MP_PAT_ACT, MP_ACT_GELU_TANH, MP_FORM_OP},
        {"", "Swish", 24, MP_PAT_ACT, MP_ACT_SILU, MP_FORM_OP},
        {"com.microsoft", "BiasGelu", 17, MP_PAT_ACT, MP_ACT_GELU, MP_FORM_CONTRIB},
        {"com.microsoft", "QuickGelu", 17, MP_PAT_ACT, MP_ACT_QUICK_GELU, MP_FORM_CONTRIB},
        {"", "RotaryEmbedding", 23, MP_PAT_ROTARY, 4, MP_FORM_OP},
        {"com.microsoft", "RotaryEmbedding", 17, MP_PAT_ROTARY, 8, MP_FORM_CONTRIB},
    };
    for (size_t i = 0; i < MP_ARRAY_LEN(ops); i++) {
        mp_model *m = ms_new(ops[i].opset);
        tb_input(m, "x", F, 4, TB_DIMS(2, 3, 5, 8));
        tb_weight(m, "s", F, 1, TB_DIMS(8));
        int n;
        bool ms = ops[i].domain[0] != 0;
        if (ops[i].kind == MP_PAT_ROTARY) {
            tb_weight(m, "cos", F, 2, TB_DIMS(16, ms ? 4 : 2));
            tb_weight(m, "sin", F, 2, TB_DIMS(16, ms ? 4 : 2));
            tb_input(m, "pos", MP_DT_INT64, 2, TB_DIMS(2, 5));
            n = tb_node_d(m, ops[i].domain, ops[i].op, ms ? "x,pos,cos,sin" : "x,cos,sin,pos", "y");
            if (!ms) tb_attr_i(m, n, "rotary_embedding_dim", 4);
        } else if (strstr(ops[i].op, "Skip")) { /* [B, S, H] */
            tb_input(m, "x3", F, 3, TB_DIMS(2, 15, 8));
            n = tb_node_d(m, ops[i].domain, ops[i].op, "x3,x3,s", "y");
        } else if (ops[i].kind == MP_PAT_NORM || strcmp(ops[i].op, "BiasGelu") == 0) {
            n = tb_node_d(m, ops[i].domain, ops[i].op, "x,s", "y");
        } else {
            n = tb_node_d(m, ops[i].domain, ops[i].op, "x", "y");
        }
        if (strcmp(ops[i].op, "Gelu") == 0) tb_attr_s(m, n, "approximate", "tanh");
        tb_output(m, "y");
        mp_profile *prof;
        const mp_patterns *p = built(m, &prof);
        mp_pref r = mp_pattern_at(p, n);
        if (r.kind != ops[i].kind) {
            mp_t_fail(__FILE__, __LINE__, "%s: kind %d", ops[i].op, r.kind);
        } else if (r.kind == MP_PAT_NORM) {
            T_EQ(p->norms[r.index].kind, ops[i].what);
            T_EQ(p->norms[r.index].form, ops[i].form);
            T_EQ(p->norms[r.index].dim, 8);
            T_EQ(p->norms[r.index].scale, tb_val(m, "s") - m->graph->values);
        } else if (r.kind == MP_PAT_ACT) {
            T_EQ(p->acts[r.index].kind, ops[i].what);
            T_EQ(p->acts[r.index].form, ops[i].form);
        } else {
            T_EQ(p->rotary[r.index].rot_dim, ops[i].what);
            T_EQ(p->rotary[r.index].head_dim, 8);
            T_EQ(p->rotary[r.index].form, ops[i].form);
        }
        T_EQ(r.part, MP_PART_OP);
        tb_done(m, prof);
    }
}

/* Decomposed forms the fixtures do not have: GELU with Mul(x, 1/sqrt 2),
 * LayerNorm with Reciprocal, SiLU, attention with a dropout, K^T by one
 * Transpose and K/V repeated by Tile; then what is not an attention. */
static void t_decomposed_forms(void) {
    mp_model *m = tb_new(14);
    tb_input(m, "x", F, 3, TB_DIMS(2, 5, 16));
    tb_const_f(m, "c1", F, 0, NULL, (const double[]){0.7071067811865476});
    tb_const_f(m, "one", F, 0, NULL, (const double[]){1.0});
    tb_const_f(m, "half", F, 0, NULL, (const double[]){0.5});
    tb_const_f(m, "two", F, 0, NULL, (const double[]){2.0});
    tb_const_f(m, "eps", F, 0, NULL, (const double[]){1e-5});
    /* GELU: x * 0.5 * (1 + erf(x * 0.7071)) as Mul(Mul(x, 0.5), 1 + erf) */
    tb_node(m, "Mul", "x,c1", "g1");
    int erf = tb_node(m, "Erf", "g1", "g2");
    tb_node(m, "Add", "g2,one", "g3");
    tb_node(m, "Mul", "x,half", "gh");
    tb_node(m, "Mul", "gh,g3", "gy");
    /* LayerNorm with Reciprocal(Sqrt) and Mul */
    int mean = tb_node(m, "ReduceMean", "gy", "m");
    tb_attr_ints(m, mean, "axes", 1, TB_DIMS(-1));
    tb_node(m, "Sub", "gy,m", "d");
    tb_node(m, "Pow", "d,two", "d2");
    int var = tb_node(m, "ReduceMean", "d2", "var");
    tb_attr_ints(m, var, "axes", 1, TB_DIMS(-1));
    tb_node(m, "Add", "var,eps", "ve");
    tb_node(m, "Sqrt", "ve", "sd");
    tb_node(m, "Reciprocal", "sd", "rs");
    tb_node(m, "Mul", "d,rs", "ln");
    /* SiLU */
    int sig = tb_node(m, "Sigmoid", "ln", "sg");
    tb_node(m, "Mul", "ln,sg", "si");
    /* attention on [2, 2, 5, 8] heads: q = k^T source, K and V tiled from 1 head */
    tb_const_i(m, "shp", MP_DT_INT64, 1, TB_DIMS(4), (const int64_t[]){2, 5, 2, 8});
    tb_node(m, "Reshape", "si,shp", "r4");
    int tq = tb_node(m, "Transpose", "r4", "q");
    tb_attr_ints(m, tq, "perm", 4, TB_DIMS(0, 2, 1, 3));
    tb_input(m, "kv", F, 4, TB_DIMS(2, 1, 5, 8));
    tb_const_i(m, "reps", MP_DT_INT64, 1, TB_DIMS(4), (const int64_t[]){1, 2, 1, 1});
    tb_node(m, "Tile", "kv,reps", "k");
    tb_node(m, "Tile", "kv,reps", "v");
    int kt = tb_node(m, "Transpose", "k", "kt");
    tb_attr_ints(m, kt, "perm", 4, TB_DIMS(0, 1, 3, 2));
    int qk = tb_node(m, "MatMul", "q,kt", "s");
    tb_const_f(m, "sc", F, 0, NULL, (const double[]){0.35355339059327373});
    tb_node(m, "Mul", "s,sc", "s2");
    int sm = tb_node(m, "Softmax", "s2", "p");
    tb_attr_i(m, sm, "axis", -1);
    tb_node(m, "Dropout", "p", "pd");
    int pv = tb_node(m, "MatMul", "pd,v", "y");
    /* not attentions: a softmax whose probabilities are the output */
    int sm2 = tb_node(m, "Softmax", "s2", "p2");
    tb_attr_i(m, sm2, "axis", -1);
    tb_output(m, "y");
    tb_output(m, "p2");
    mp_profile *prof;
    const mp_patterns *p = built(m, &prof);
    if (!p) {
        tb_done(m, prof);
        return;
    }
    mp_pref r = mp_pattern_at(p, erf);
    T_EQ(r.kind, MP_PAT_ACT);
    if (r.kind == MP_PAT_ACT) {
        T_EQ(p->acts[r.index].kind, MP_ACT_GELU);
        T_EQ(p->acts[r.index].n, 5);
        T_EQ(p->acts[r.index].y, tb_val(m, "gy") - m->graph->values);
    }
    r = mp_pattern_at(p, mean);
    T_EQ(r.kind, MP_PAT_NORM);
    if (r.kind == MP_PAT_NORM) {
        T_EQ(p->norms[r.index].kind, MP_NORM_LAYER);
        T_EQ(p->norms[r.index].n, 8);
        T_CHECK(fabs(p->norms[r.index].eps - 1e-5) < 1e-12);
    }
    r = mp_pattern_at(p, sig);
    T_CHECK(r.kind == MP_PAT_ACT && p->acts[r.index].kind == MP_ACT_SILU);
    /* the softmax s2 feeds two: the scores are read outside: neither is an attention */
    T_EQ(p->n_attn, 0);
    T_EQ(mp_pattern_at(p, qk).kind, MP_PAT_NONE);
    T_EQ(mp_pattern_at(p, pv).kind, MP_PAT_NONE);
    T_CHECK(p->n_miss >= 1);
    bool named = false;
    for (int i = 0; i < p->n_miss; i++)
        if (p->miss[i].node == sm && p->miss[i].kind == MP_PAT_ATTN && strstr(p->miss[i].why, "read outside"))
            named = true;
    T_CHECK(named);
    tb_done(m, prof);
}

/* The attention of t_decomposed_forms on its own (no second reader): a
 * dropout, K^T by one Transpose, K and V repeated by Tile. */
static void t_attention_tile_dropout(void) {
    mp_model *m = tb_new(14);
    tb_input(m, "q", F, 4, TB_DIMS(2, 4, 5, 8));
    tb_input(m, "kv", F, 4, TB_DIMS(2, 2, 5, 8));
    tb_input(m, "vv", F, 4, TB_DIMS(2, 2, 5, 8));
    tb_const_i(m, "reps", MP_DT_INT64, 1, TB_DIMS(4), (const int64_t[]){1, 2, 1, 1});
    tb_node(m, "Tile", "kv,reps", "k");
    tb_node(m, "Tile", "vv,reps", "v");
    int kt = tb_node(m, "Transpose", "k", "kt");
    tb_attr_ints(m, kt, "perm", 4, TB_DIMS(0, 1, 3, 2));
    tb_node(m, "MatMul", "q,kt", "s");
    tb_const_f(m, "sc", F, 0, NULL, (const double[]){0.5});
    tb_node(m, "Div", "s,sc", "s2");
    int sm = tb_node(m, "Softmax", "s2", "p");
    tb_attr_i(m, sm, "axis", -1);
    tb_node(m, "Dropout", "p", "pd");
    tb_node(m, "MatMul", "pd,v", "y");
    tb_output(m, "y");
    mp_profile *prof;
    const mp_patterns *p = built(m, &prof);
    if (p && p->n_attn == 1) {
        const mp_pattn *a = &p->attn[0];
        T_EQ(a->form, MP_FORM_DECOMPOSED);
        T_CHECK(a->dropout);
        T_EQ(a->n, 8); /* Tile x2, Transpose, MatMul, Div, Softmax, Dropout, MatMul */
        T_EQ(a->heads, 4);
        T_EQ(a->kv_heads, 2);
        T_EQ(a->k_kv, tb_val(m, "kv") - m->graph->values);
        T_EQ(a->v_kv, tb_val(m, "vv") - m->graph->values);
        T_CHECK(fabs(a->scale - 2.0) < 1e-12);
        T_EQ(p->n_blocks, 1);
        T_EQ(p->n_miss, 1); /* its Q, K, V come from no weight product */
    } else {
        mp_t_fail(__FILE__, __LINE__, "%d attentions", p ? p->n_attn : -1);
    }
    tb_done(m, prof);
}

/* torchvision's Swin window attention as the TorchScript exporter writes
 * it, on 2 images x 4 windows of 4 tokens, 2 heads of 8: one qkv product,
 * q, k, v = qkv[0], qkv[1], qkv[2] (Gathers of one index), q scaled, the
 * relative position bias added, the scores viewed as [2, 4, 2, 4, 4] for
 * the shifted windows' mask and back, softmax, the product with v. One
 * attention with two masks and two views, its block's weights a fused
 * qkv, nothing missed; planned fused, every member inside the group. */
static void t_swin_window_attention(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(8, 4, 16));
    tb_weight(m, "Wqkv", F, 2, TB_DIMS(16, 48));
    tb_weight(m, "bqkv", F, 1, TB_DIMS(48));
    tb_weight(m, "relb", F, 3, TB_DIMS(2, 4, 4));
    tb_weight(m, "shmask", F, 5, TB_DIMS(1, 4, 1, 4, 4));
    tb_const_i(m, "s5", MP_DT_INT64, 1, TB_DIMS(5), (const int64_t[]){8, 4, 3, 2, 8});
    tb_const_i(m, "sw", MP_DT_INT64, 1, TB_DIMS(5), (const int64_t[]){2, 4, 2, 4, 4});
    tb_const_i(m, "sb", MP_DT_INT64, 1, TB_DIMS(4), (const int64_t[]){8, 2, 4, 4});
    tb_const_i(m, "i0", MP_DT_INT64, 0, NULL, (const int64_t[]){0});
    tb_const_i(m, "i1", MP_DT_INT64, 0, NULL, (const int64_t[]){1});
    tb_const_i(m, "i2", MP_DT_INT64, 0, NULL, (const int64_t[]){2});
    tb_const_f(m, "sc", F, 0, NULL, (const double[]){0.35355339059327373});
    int qkv = tb_node(m, "MatMul", "x,Wqkv", "h");
    tb_node(m, "Add", "bqkv,h", "hb");
    tb_node(m, "Reshape", "hb,s5", "h5");
    int t = tb_node(m, "Transpose", "h5", "ht");
    tb_attr_ints(m, t, "perm", 5, TB_DIMS(2, 0, 3, 1, 4));
    tb_node(m, "Gather", "ht,i0", "q");
    tb_node(m, "Gather", "ht,i1", "k");
    tb_node(m, "Gather", "ht,i2", "v");
    tb_node(m, "Mul", "q,sc", "qs");
    int kt = tb_node(m, "Transpose", "k", "kt");
    tb_attr_ints(m, kt, "perm", 4, TB_DIMS(0, 1, 3, 2));
    int qk = tb_node(m, "MatMul", "qs,kt", "s");
    tb_node(m, "Add", "s,relb", "s1");
    int v1 = tb_node(m, "Reshape", "s1,sw", "s2");
    tb_node(m, "Add", "s2,shmask", "s3");
    int v2 = tb_node(m, "Reshape", "s3,sb", "s4");
    int sm = tb_node(m, "Softmax", "s4", "p");
    tb_attr_i(m, sm, "axis", -1);
    tb_node(m, "MatMul", "p,v", "y");
    tb_output(m, "y");
    mp_profile *prof;
    const mp_patterns *p = built(m, &prof);
    if (p && p->n_attn == 1) {
        const mp_pattn *a = &p->attn[0];
        T_EQ(a->form, MP_FORM_DECOMPOSED);
        T_EQ(a->mask, MP_MASK_ADD);
        T_EQ(a->mask_v, tb_val(m, "shmask") - m->graph->values); /* the one nearest the softmax */
        T_EQ(a->qk, qk);
        T_EQ(a->heads, 2);
        T_EQ(a->head_dim, 8);
        T_CHECK(fabs(a->scale - 0.35355339059327373) < 1e-12);
        int views = 0, masks = 0;
        for (int i = 0; i < a->n; i++) {
            const mp_pmember *mb = &p->members[a->first + i];
            if (mb->part == MP_PART_VIEW) {
                views++;
                T_CHECK(mb->node == v1 || mb->node == v2);
            }
            if (mb->part == MP_PART_MASK) masks++;
        }
        T_EQ(views, 2);
        T_EQ(masks, 2);
        T_EQ(p->n_blocks, 1);
        if (p->n_blocks == 1) T_EQ(p->blocks[0].w[MP_WROLE_QKV].node, qkv);
        T_EQ(p->n_miss, 0);
    } else {
        mp_t_fail(__FILE__, __LINE__, "%d attentions", p ? p->n_attn : -1);
    }
    tb_done(m, prof);
}

/* softmax(q . k^T [+ mask]) . v on inputs q, k, v of rank 4, output y. */
static void eager_attention(mp_model *m, const char *mask) {
    tb_scores(m);
    char ins[64];
    snprintf(ins, sizeof ins, "s,%s", mask ? mask : "");
    if (mask) tb_node(m, "Add", ins, "sm");
    tb_attend(m, mask ? "sm" : "s");
}

/* Constant additive masks the exporter folded, on 6 queries x 6 keys:
 * lower-triangular (causal, no window), a band of 3 keys (i - 3 < j <= i:
 * Mistral's sliding window, causal, window 3), a band whose width changes
 * from row to row, and one that lets a query see the next key (neither
 * causal). */
static void t_sliding_window_mask(void) {
    static const int want_causal[4] = {1, 1, 0, 0}, want_window[4] = {0, 3, 0, 0};
    for (int form = 0; form < 4; form++) {
        double mk[36];
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 6; j++) {
                bool ok = j <= i;
                if (form == 1) ok = ok && j > i - 3;
                if (form == 2) ok = ok && j > i - (i < 4 ? 2 : 3);
                if (form == 3) ok = j <= i + 1;
                mk[i * 6 + j] = ok ? 0.0 : -1e9;
            }
        mp_model *m = tb_new(17);
        tb_input(m, "q", F, 4, TB_DIMS(1, 2, 6, 8));
        tb_input(m, "k", F, 4, TB_DIMS(1, 2, 6, 8));
        tb_input(m, "v", F, 4, TB_DIMS(1, 2, 6, 8));
        tb_const_f(m, "mask", F, 2, TB_DIMS(6, 6), mk);
        eager_attention(m, "mask");
        mp_profile *prof;
        const mp_patterns *p = built(m, &prof);
        T_CHECK(p && p->n_attn == 1);
        if (p && p->n_attn == 1) {
            T_EQ(p->attn[0].mask, MP_MASK_ADD);
            T_EQ(p->attn[0].causal, want_causal[form]);
            T_EQ(p->attn[0].window, want_window[form]);
        }
        tb_done(m, prof);
    }
}

/* The same band of 3 keys kept in an external data file next to the
 * model (a model over 2 GB keeps every initializer there): read through a
 * mapping of its range, as the parameter count reads weights. A file that
 * is absent leaves the mask unread: not causal, no error. */
static void t_external_window_mask(void) {
    float mk[2 + 64];
    mk[0] = mk[1] = 7.0f; /* another tensor's bytes first: the mask at offset 8 */
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) mk[2 + i * 8 + j] = j <= i && j > i - 3 ? 0.0f : -INFINITY;
    for (int absent = 0; absent < 2; absent++) {
        if (!absent) {
            FILE *f = fopen(mp_t_path("band.bin"), "wb");
            if (!f) abort();
            fwrite(mk, sizeof mk, 1, f);
            fclose(f);
        }
        pbw g = {0}, a = {0};
        const char *syms[] = {NULL, NULL};
        onx_attr_ints(&a, "perm", 4, (const int64_t[]){0, 1, 3, 2});
        onx_node(&g, 1, "Transpose", "kt", "k", "kt", &a);
        onx_node(&g, 1, "MatMul", "qk", "q,kt", "s", NULL);
        onx_node(&g, 1, "Add", "mask", "s,onnx::Add_9", "sm", NULL);
        a = (pbw){0};
        onx_attr_int(&a, "axis", -1);
        onx_node(&g, 1, "Softmax", "softmax", "sm", "p", &a);
        onx_node(&g, 1, "MatMul", "pv", "p,v", "y", NULL);
        onx_tensor_external(&g, 5, "onnx::Add_9", 1, 2, (const int64_t[]){8, 8},
                            absent ? "gone.bin" : "band.bin", "8", "256");
        for (int i = 0; i < 3; i++)
            onx_value_info(&g, 11, i == 0 ? "q" : i == 1 ? "k" : "v", 1, 4, (const int64_t[]){1, 2, 8, 4}, syms);
        onx_value_info(&g, 12, "y", 1, -1, NULL, syms);
        pbw model = {0};
        onx_model(&model, 8, 17, &g);
        const char *path = mp_t_path("band.onnx");
        if (pbw_write(&model, path)) abort();
        pbw_free(&model);
        mp_model *m = NULL;
        mp_profile *prof = NULL;
        T_OK(mp_model_load(path, &m));
        if (m) T_OK(mp_profile_static(m, &prof));
        const mp_patterns *p = prof ? mp_patterns_of(m->graph) : NULL;
        T_CHECK(p && p->n_attn == 1);
        if (p && p->n_attn == 1) {
            T_EQ(p->attn[0].mask, MP_MASK_ADD);
            T_EQ(p->attn[0].causal, !absent);
            T_EQ(p->attn[0].window, absent ? 0 : 3);
        }
        mp_profile_free(prof);
        mp_model_free(m);
    }
}

/* Its two products and K are these. */
static void attn_ends(mp_model *m, const mp_pattn *a, int qk, int pv, const char *k) {
    T_EQ(a->qk, qk);
    T_EQ(a->pv, pv);
    T_EQ(a->k, tb_val(m, k) - m->graph->values);
}

/* Attention written with Einsum (torchvision's MaxViT: "bghid,bghjd->
 * bghij" on K as it is, K scaled, a bias added, then "bghij,bghjd->
 * bghid"; and "bhid,bhdj->bhij" on K transposed): both recognised, the
 * heads third from last (MaxViT's windows G join the batch). */
static void t_einsum_attention(void) {
    for (int form = 0; form < 2; form++) {
        mp_model *m = tb_new(17);
        bool g = form == 0;
        const int64_t *qd = g ? TB_DIMS(2, 3, 4, 7, 8) : TB_DIMS(2, 4, 7, 8);
        int r = g ? 5 : 4;
        tb_input(m, "q", F, r, qd);
        tb_input(m, "k", F, r, qd);
        tb_input(m, "v", F, r, qd);
        double bias[4 * 7 * 7];
        for (int i = 0; i < 4 * 7 * 7; i++) bias[i] = (double)(i % 13) * 0.125;
        tb_const_f(m, "bias", F, 3, TB_DIMS(4, 7, 7), bias);
        tb_const_f(m, "scale", F, 0, NULL, (const double[]){0.25});
        int qk;
        if (g) {
            tb_node(m, "Mul", "k,scale", "ks");
            qk = tb_node(m, "Einsum", "q,ks", "s");
            tb_attr_s(m, qk, "equation", "bghid,bghjd->bghij");
        } else {
            int t = tb_node(m, "Transpose", "k", "kt");
            tb_attr_ints(m, t, "perm", 4, TB_DIMS(0, 1, 3, 2));
            qk = tb_node(m, "Einsum", "q,kt", "s0");
            tb_attr_s(m, qk, "equation", "bhid,bhdj->bhij");
            tb_node(m, "Mul", "s0,scale", "s");
        }
        tb_node(m, "Add", "s,bias", "sb");
        int sm = tb_node(m, "Softmax", "sb", "p");
        tb_attr_i(m, sm, "axis", -1);
        int pv = tb_node(m, "Einsum", "p,v", "y");
        tb_attr_s(m, pv, "equation", g ? "bghij,bghjd->bghid" : "bhij,bhjd->bhid");
        tb_output(m, "y");
        mp_profile *prof;
        const mp_patterns *p = built(m, &prof);
        if (p && p->n_attn == 1) {
            const mp_pattn *a = &p->attn[0];
            attn_ends(m, a, qk, pv, "k");
            T_EQ(a->mask, MP_MASK_ADD);
            T_EQ(a->heads, 4);
            T_EQ(a->batch, g ? 6 : 2);
            T_EQ(a->seq_q, 7);
            T_EQ(a->seq_k, 7);
            T_EQ(a->head_dim, 8);
            T_CHECK(fabs(a->scale - 0.25) < 1e-12);
        } else {
            mp_t_fail(__FILE__, __LINE__, "form %d: %d attentions", form, p ? p->n_attn : -1);
        }
        tb_done(m, prof);
    }
}

/* Bloom's attention as it writes it: Q [B*H, S, D]; K [B, S, H, D]
 * permuted (0, 2, 3, 1) and viewed [B*H, D, S]; baddbmm's scale and ALiBi
 * bias added; the scores viewed [B, H, S, S] for a causal masked_fill
 * (Where on triu), the softmax, the probabilities viewed back to [B*H, S,
 * S] for bmm with V. One attention: both masks, the Where nearest the
 * softmax, causal; K before its permutation; both views members. The
 * scaled scores and the scaled bias added in either order (TorchScript's
 * baddbmm puts the product first, a decomposition may not). */
static void t_bloom_attention(void) {
    for (int order = 0; order < 2; order++) {
        mp_model *m = tb_new(14);
        tb_input(m, "q", F, 3, TB_DIMS(8, 6, 4));
        tb_input(m, "k", F, 4, TB_DIMS(2, 6, 4, 4));
        tb_input(m, "v", F, 3, TB_DIMS(8, 6, 4));
        tb_input(m, "alibi", F, 3, TB_DIMS(8, 1, 6));
        double ones[36];
        for (int i = 0; i < 36; i++) ones[i] = 1.0;
        tb_const_f(m, "ones", F, 2, TB_DIMS(6, 6), ones);
        tb_const_i(m, "one", MP_DT_INT64, 0, NULL, TB_DIMS(1));
        tb_const_i(m, "kshape", MP_DT_INT64, 1, TB_DIMS(3), TB_DIMS(8, 4, 6));
        tb_const_i(m, "s4", MP_DT_INT64, 1, TB_DIMS(4), TB_DIMS(2, 4, 6, 6));
        tb_const_i(m, "s3", MP_DT_INT64, 1, TB_DIMS(3), TB_DIMS(8, 6, 6));
        tb_const_i(m, "y4", MP_DT_INT64, 1, TB_DIMS(4), TB_DIMS(2, 4, 6, 4));
        tb_const_f(m, "alpha", F, 0, NULL, (const double[]){0.5});
        tb_const_f(m, "fill", F, 0, NULL, (const double[]){-INFINITY});
        int t = tb_node(m, "Transpose", "k", "kp");
        tb_attr_ints(m, t, "perm", 4, TB_DIMS(0, 2, 3, 1));
        tb_node(m, "Reshape", "kp,kshape", "kt");
        int qk = tb_node(m, "MatMul", "q,kt", "s");
        tb_node(m, "Mul", "s,alpha", "sa");
        tb_const_f(m, "beta", F, 0, NULL, (const double[]){1.0});
        tb_node(m, "Mul", "alibi,beta", "ab");
        tb_node(m, "Add", order ? "ab,sa" : "sa,ab", "sb"); /* the exporters' two orders */
        int v1 = tb_node(m, "Reshape", "sb,s4", "s4v");
        int tr = tb_node(m, "Trilu", "ones,one", "up");
        tb_attr_i(m, tr, "upper", 1);
        int cb = tb_node(m, "Cast", "up", "cond");
        tb_attr_i(m, cb, "to", MP_DT_BOOL);
        tb_node(m, "Where", "cond,fill,s4v", "sm");
        int sm = tb_node(m, "Softmax", "sm", "p");
        tb_attr_i(m, sm, "axis", -1);
        int v2 = tb_node(m, "Reshape", "p,s3", "p3");
        int pv = tb_node(m, "MatMul", "p3,v", "y3");
        tb_node(m, "Reshape", "y3,y4", "y");
        tb_output(m, "y");
        mp_profile *prof;
        const mp_patterns *p = built(m, &prof);
        if (p && p->n_attn == 1) {
            const mp_pattn *a = &p->attn[0];
            attn_ends(m, a, qk, pv, "k");
            T_EQ(a->mask, MP_MASK_WHERE);
            T_EQ(a->mask_v, tb_val(m, "cond") - m->graph->values);
            T_EQ(a->causal, 1);
            T_EQ(a->heads, 4);
            T_EQ(a->seq_k, 6);
            T_CHECK(fabs(a->scale - 0.5) < 1e-12);
            int views = 0, masks = 0;
            for (int i = 0; i < a->n; i++) {
                const mp_pmember *mb = &p->members[a->first + i];
                if (mb->part == MP_PART_VIEW) views += mb->node == v1 || mb->node == v2;
                if (mb->part == MP_PART_MASK) masks++;
            }
            T_EQ(views, 2);
            T_EQ(masks, 2);
        } else {
            mp_t_fail(__FILE__, __LINE__, "order %d: %d attentions", order, p ? p->n_attn : -1);
        }
        tb_done(m, prof);
    }
}

/* Multi-query attention written without repeat_kv: K and V [B, 1, S, D]
 * broadcast across Q's 4 heads by the products themselves. One KV head
 * (what a KV cache holds); with K given 4 heads, 4. */
static void t_broadcast_mqa(void) {
    for (int kvh = 1; kvh <= 4; kvh += 3) {
        mp_model *m = tb_new(17);
        tb_input(m, "q", F, 4, TB_DIMS(1, 4, 6, 8));
        tb_input(m, "k", F, 4, TB_DIMS(1, kvh, 6, 8));
        tb_input(m, "v", F, 4, TB_DIMS(1, kvh, 6, 8));
        eager_attention(m, NULL);
        mp_profile *prof;
        const mp_patterns *p = built(m, &prof);
        T_CHECK(p && p->n_attn == 1);
        if (p && p->n_attn == 1) {
            T_EQ(p->attn[0].heads, 4);
            T_EQ(p->attn[0].kv_heads, kvh);
        }
        tb_done(m, prof);
    }
}

/* Gemma-2's attention logit softcapping: (q . k^T) * scaling, / 50,
 * tanh, * 50, the causal mask, the softmax. Recognised with softcap 50 and
 * the scale (the caps cancel); the Tanh a member. */
static void t_softcap_attention(void) {
    mp_model *m = tb_new(17);
    tb_softcap_attention(m);
    int qk = tb_val(m, "s")->producer, pv = tb_val(m, "y")->producer, th = tb_val(m, "s3")->producer;
    mp_profile *prof;
    const mp_patterns *p = built(m, &prof);
    if (p && p->n_attn == 1) {
        const mp_pattn *a = &p->attn[0];
        attn_ends(m, a, qk, pv, "k");
        T_CHECK(a->softcap == 50.0);
        T_CHECK(fabs(a->scale - 0.25) < 1e-12);
        T_EQ(mp_pattern_at(p, th).part, MP_PART_SOFTCAP);
    } else {
        mp_t_fail(__FILE__, __LINE__, "%d attentions", p ? p->n_attn : -1);
    }
    tb_done(m, prof);
}

/* tanh-GELU as TorchScript writes F.gelu(approximate="tanh") at opset 14:
 * x^3 as x * (x * x), 0.044715 * x^3 + x, * sqrt(2 / pi), tanh, 1 + ., x *
 * ., 0.5 * . : one activation of kind gelu_tanh from x to y, every node a
 * member. */
static void t_gelu_tanh_cube_mul(void) {
    mp_model *m = tb_new(14);
    tb_input(m, "x", F, 2, TB_DIMS(2, 8));
    tb_const_f(m, "k3", F, 0, NULL, (const double[]){0.044715});
    tb_const_f(m, "kb", F, 0, NULL, (const double[]){0.7978845608028654});
    tb_const_f(m, "one", F, 0, NULL, (const double[]){1.0});
    tb_const_f(m, "half", F, 0, NULL, (const double[]){0.5});
    const char *chain[][3] = {{"Mul", "x,x", "x2"},   {"Mul", "x,x2", "x3"},   {"Mul", "k3,x3", "c"},
                              {"Add", "x,c", "in"},   {"Mul", "kb,in", "b"},   {"Tanh", "b", "t"},
                              {"Add", "one,t", "t1"}, {"Mul", "x,t1", "xt"},   {"Mul", "half,xt", "y"}};
    int first = -1;
    for (size_t i = 0; i < MP_ARRAY_LEN(chain); i++) {
        int k = tb_node(m, chain[i][0], chain[i][1], chain[i][2]);
        if (!i) first = k;
    }
    tb_output(m, "y");
    mp_profile *prof;
    const mp_patterns *p = built(m, &prof);
    T_CHECK(p && p->n_acts == 1);
    if (p && p->n_acts == 1) {
        T_EQ(p->acts[0].kind, MP_ACT_GELU_TANH);
        T_EQ(p->acts[0].x, tb_val(m, "x") - m->graph->values);
        T_EQ(p->acts[0].y, tb_val(m, "y") - m->graph->values);
        for (int k = first; k < first + (int)MP_ARRAY_LEN(chain); k++) T_EQ(mp_pattern_at(p, k).kind, MP_PAT_ACT);
    }
    tb_done(m, prof);
}

/* Boolean causal tables: GPT-2's and GPT-J's registered `bias` (tril of
 * ones, 48 x 48, 2,304 values: more than inference reads, so read from the
 * initializer's bytes) sliced to the 40 tokens at hand and given to
 * torch.where(bias, scores, min) (true allows); and masked_fill(triu(ones,
 * 1), min) on a known table (true masks). Both causal; the where's sense
 * swapped, neither. */
static mp_model *gpt2_bias_model(bool swapped) {
    static uint8_t tril[48 * 48];
    for (int i = 0; i < 48; i++)
        for (int j = 0; j < 48; j++) tril[i * 48 + j] = j <= i;
    pbw g = {0}, a = {0};
    const char *syms[] = {NULL, NULL};
    onx_attr_ints(&a, "perm", 4, (const int64_t[]){0, 1, 3, 2});
    onx_node(&g, 1, "Transpose", "kt", "k", "kt", &a);
    onx_node(&g, 1, "MatMul", "qk", "q,kt", "s", NULL);
    onx_node(&g, 1, "Slice", "cut", "bias,st,en,ax", "cm", NULL);
    /* swapped: the fill where the table allows */
    onx_node(&g, 1, "Where", "mask", swapped ? "cm,fill,s" : "cm,s,fill", "sm", NULL);
    a = (pbw){0};
    onx_attr_int(&a, "axis", -1);
    onx_node(&g, 1, "Softmax", "softmax", "sm", "p", &a);
    onx_node(&g, 1, "MatMul", "pv", "p,v", "y", NULL);
    onx_tensor(&g, 5, "bias", 9, 4, (const int64_t[]){1, 1, 48, 48}, tril, sizeof tril);
    int64_t st[2] = {0, 0}, en[2] = {40, 40}, ax[2] = {2, 3};
    onx_tensor(&g, 5, "st", 7, 1, (const int64_t[]){2}, st, sizeof st);
    onx_tensor(&g, 5, "en", 7, 1, (const int64_t[]){2}, en, sizeof en);
    onx_tensor(&g, 5, "ax", 7, 1, (const int64_t[]){2}, ax, sizeof ax);
    float fill = -3.4e38f;
    onx_tensor(&g, 5, "fill", 1, 0, NULL, &fill, sizeof fill);
    for (int i = 0; i < 3; i++)
        onx_value_info(&g, 11, i == 0 ? "q" : i == 1 ? "k" : "v", 1, 4, (const int64_t[]){1, 2, 40, 8}, syms);
    onx_value_info(&g, 12, "y", 1, -1, NULL, syms);
    pbw model = {0};
    onx_model(&model, 8, 14, &g);
    const char *path = mp_t_path("gpt2_bias.onnx");
    if (pbw_write(&model, path)) abort();
    pbw_free(&model);
    mp_model *m = NULL;
    T_OK(mp_model_load(path, &m));
    return m;
}

static void t_bool_causal_tables(void) {
    for (int form = 0; form < 3; form++) {
        mp_model *m = NULL;
        mp_profile *prof = NULL;
        if (form == 1) {
            /* masked_fill(triu(ones, 1), min), the table known */
            m = tb_new(14);
            int64_t up[36];
            for (int i = 0; i < 36; i++) up[i] = i % 6 > i / 6;
            tb_input(m, "q", F, 4, TB_DIMS(1, 2, 6, 8));
            tb_input(m, "k", F, 4, TB_DIMS(1, 2, 6, 8));
            tb_input(m, "v", F, 4, TB_DIMS(1, 2, 6, 8));
            tb_const_i(m, "up", MP_DT_BOOL, 2, TB_DIMS(6, 6), up);
            tb_const_f(m, "fill", F, 0, NULL, (const double[]){-INFINITY});
            tb_scores(m);
            tb_node(m, "Where", "up,fill,s", "sm");
            tb_attend(m, "sm");
            prof = tb_prof(m);
        } else {
            m = gpt2_bias_model(form == 2);
            if (m) T_OK(mp_profile_static(m, &prof));
        }
        const mp_patterns *p = prof ? mp_patterns_of(m->graph) : NULL;
        T_CHECK(p && p->n_attn == 1);
        if (p && p->n_attn == 1) {
            T_EQ(p->attn[0].mask, MP_MASK_WHERE);
            T_EQ(p->attn[0].causal, form != 2);
        }
        if (form == 1) {
            tb_done(m, prof);
        } else {
            mp_profile_free(prof);
            mp_model_free(m);
        }
    }
}

/* A causal table combined with the caller's padding mask, as a decoder
 * written in Python builds its additive mask: keep = tril_table[None,
 * None] & pad[:, None, None, :]; mask = zeros.masked_fill(~keep, min);
 * scores + mask. The table is read in its own sense through the Where
 * (masked where its condition holds), the Not (allowed where the table is
 * true) and the And (a padding mask only removes keys): causal. An Or in
 * the allowed sense could add later keys: not read through. */
static void t_causal_and_padding(void) {
    for (int form = 0; form < 2; form++) {
        mp_model *m = tb_new(14);
        int64_t lo[36];
        for (int i = 0; i < 36; i++) lo[i] = i % 6 <= i / 6;
        tb_input(m, "q", F, 4, TB_DIMS(1, 2, 6, 8));
        tb_input(m, "k", F, 4, TB_DIMS(1, 2, 6, 8));
        tb_input(m, "v", F, 4, TB_DIMS(1, 2, 6, 8));
        tb_input(m, "pad", MP_DT_BOOL, 4, TB_DIMS(1, 1, 1, 6));
        tb_const_i(m, "tri", MP_DT_BOOL, 4, TB_DIMS(1, 1, 6, 6), lo);
        tb_const_f(m, "fill", F, 0, NULL, (const double[]){-3.4e38});
        tb_const_f(m, "zeros", F, 4, TB_DIMS(1, 1, 6, 6), (const double[36]){0});
        tb_node(m, form ? "Or" : "And", "tri,pad", "keep");
        tb_node(m, "Not", "keep", "drop");
        tb_node(m, "Where", "drop,fill,zeros", "mask");
        tb_scores(m);
        tb_node(m, "Add", "s,mask", "sm");
        tb_attend(m, "sm");
        mp_profile *prof;
        const mp_patterns *p = built(m, &prof);
        T_CHECK(p && p->n_attn == 1);
        if (p && p->n_attn == 1) T_EQ(p->attn[0].causal, form == 0);
        tb_done(m, prof);
    }
}

/* A sliding window built at run time, where the mask's 40 x 40 elements
 * are too many to compute (docs/COUNTING.md "attention masks"): the
 * window read from its operators, in transformers' forms.
 *   0: masking_utils, kv > q - 8 and kv <= q (8 keys)
 *   1: the same written q - 8 < kv (8)
 *   2: AttentionMaskConverter's, tril(ones, -9) masked over
 *      kv < (q + 1) (9: j <= i - 9 masked)
 *   3: Mistral's first, log(triu(tril(ones), -8)) (9: j >= i - 8 kept)
 *   4: the plain causal kv <= q (no window) */
static void t_runtime_window(void) {
    static const int64_t want[] = {8, 8, 9, 9, 0};
    for (int form = 0; form < 5; form++) {
        mp_model *m = tb_new(14);
        tb_input(m, "q", F, 4, TB_DIMS(1, 2, 40, 8));
        tb_input(m, "k", F, 4, TB_DIMS(1, 2, 40, 8));
        tb_input(m, "v", F, 4, TB_DIMS(1, 2, 40, 8));
        tb_const_i(m, "zero", MP_DT_INT64, 0, NULL, (const int64_t[]){0});
        tb_const_i(m, "len", MP_DT_INT64, 0, NULL, (const int64_t[]){40});
        tb_const_i(m, "one", MP_DT_INT64, 0, NULL, (const int64_t[]){1});
        tb_const_i(m, "w", MP_DT_INT64, 0, NULL, (const int64_t[]){8});
        tb_const_i(m, "ax0", MP_DT_INT64, 1, TB_DIMS(1), (const int64_t[]){0});
        tb_const_i(m, "ax1", MP_DT_INT64, 1, TB_DIMS(1), (const int64_t[]){1});
        tb_const_i(m, "col", MP_DT_INT64, 1, TB_DIMS(2), (const int64_t[]){40, 1});
        tb_const_i(m, "shape", MP_DT_INT64, 1, TB_DIMS(2), (const int64_t[]){40, 40});
        tb_const_i(m, "k9", MP_DT_INT64, 0, NULL, (const int64_t[]){-9});
        tb_const_i(m, "k8", MP_DT_INT64, 0, NULL, (const int64_t[]){-8});
        tb_const_f(m, "fzero", F, 0, NULL, (const double[]){0});
        tb_const_f(m, "fone", F, 0, NULL, (const double[]){1});
        tb_const_f(m, "fmin", F, 0, NULL, (const double[]){-3.4e38});
        tb_node(m, "Range", "zero,len,one", "ar");
        tb_node(m, "Unsqueeze", "ar,ax1", "qi");  /* [40, 1] */
        tb_node(m, "Unsqueeze", "ar,ax0", "kvi"); /* [1, 40] */
        if (form <= 1 || form == 4) {
            tb_node(m, "LessOrEqual", "kvi,qi", "c");
            if (form == 4) {
                tb_node(m, "Where", "c,fzero,fmin", "mask");
            } else {
                tb_node(m, "Sub", "qi,w", "qw");
                tb_node(m, form == 0 ? "Greater" : "Less", form == 0 ? "kvi,qw" : "qw,kvi", "g");
                tb_node(m, "And", "g,c", "a");
                tb_node(m, "Where", "a,fzero,fmin", "mask");
            }
        } else if (form == 2) {
            tb_node(m, "Add", "ar,one", "ar1");
            tb_node(m, "Reshape", "ar1,col", "q1");
            tb_node(m, "Less", "ar,q1", "c");
            tb_node(m, "Where", "c,fzero,fmin", "causal");
            tb_node(m, "Expand", "fone,shape", "ones");
            tb_attr_i(m, tb_node(m, "Cast", "ones", "onesb"), "to", MP_DT_BOOL);
            tb_attr_i(m, tb_node(m, "Trilu", "onesb,k9", "ctx"), "upper", 0);
            tb_node(m, "Where", "ctx,fmin,causal", "mask");
        } else {
            tb_node(m, "Expand", "fone,shape", "ones");
            tb_attr_i(m, tb_node(m, "Trilu", "ones", "low"), "upper", 0);
            tb_node(m, "Trilu", "low,k8", "band");
            tb_node(m, "Log", "band", "mask");
        }
        eager_attention(m, "mask");
        mp_profile *prof;
        const mp_patterns *p = built(m, &prof);
        T_CHECK(p && p->n_attn == 1);
        if (p && p->n_attn == 1) {
            T_CHECK(p->attn[0].causal);
            T_EQ((int)p->attn[0].window, (int)want[form]);
        }
        tb_done(m, prof);
    }
}

/* QuickGELU written out (x * Sigmoid(1.702 x)) and GeGLU (Gelu(gate) *
 * up) between weight products: an MLP of kind geglu with gate, up and down. */
static void t_quick_gelu_geglu(void) {
    mp_model *m = tb_new(20);
    tb_input(m, "x", F, 3, TB_DIMS(2, 5, 16));
    tb_weight(m, "wg", F, 2, TB_DIMS(16, 32));
    tb_weight(m, "wu", F, 2, TB_DIMS(16, 32));
    tb_weight(m, "wd", F, 2, TB_DIMS(32, 16));
    tb_const_f(m, "k", F, 0, NULL, (const double[]){1.702});
    tb_node(m, "Mul", "x,k", "xk");
    int sig = tb_node(m, "Sigmoid", "xk", "s");
    tb_node(m, "Mul", "x,s", "qg");
    tb_node(m, "MatMul", "qg,wg", "g");
    tb_node(m, "MatMul", "qg,wu", "u");
    int ge = tb_node(m, "Gelu", "g", "ga");
    int gm = tb_node(m, "Mul", "ga,u", "h");
    tb_node(m, "MatMul", "h,wd", "y");
    tb_output(m, "y");
    mp_profile *prof;
    const mp_patterns *p = built(m, &prof);
    if (p) {
        mp_pref r = mp_pattern_at(p, sig);
        T_CHECK(r.kind == MP_PAT_ACT && p->acts[r.index].kind == MP_ACT_QUICK_GELU &&
                p->acts[r.index].form == MP_FORM_DECOMPOSED && p->acts[r.index].n == 3);
        r = mp_pattern_at(p, ge);
        T_CHECK(r.kind == MP_PAT_ACT && p->acts[r.index].kind == MP_ACT_GELU && p->acts[r.index].outer >= 0);
        r = mp_pattern_at(p, gm);
        T_CHECK(r.kind == MP_PAT_ACT && r.part == MP_PART_GATE);
        if (r.kind == MP_PAT_ACT) {
            const mp_pact *a = &p->acts[r.index];
            T_EQ(a->kind, MP_ACT_GEGLU);
            T_EQ(a->up, tb_val(m, "u") - m->graph->values);
            T_EQ(a->act_out, tb_val(m, "ga") - m->graph->values);
            T_EQ(a->x, tb_val(m, "g") - m->graph->values);
            T_EQ(p->acts[a->inner].outer, r.index);
        }
    }
    tb_done(m, prof);
}

/* F.mish written out (x * Tanh(Softplus(x)), the TorchScript exporter's
 * form before opset 18) is one activation of kind mish; opset 18's Mish
 * operator too; a Softplus whose Tanh is multiplied by another value is
 * none. */
static void t_mish(void) {
    mp_model *m = tb_new(18);
    tb_input(m, "x", F, 3, TB_DIMS(2, 5, 16));
    tb_input(m, "z", F, 3, TB_DIMS(2, 5, 16));
    int sp = tb_node(m, "Softplus", "x", "s");
    tb_node(m, "Tanh", "s", "t");
    tb_node(m, "Mul", "x,t", "y");
    int op = tb_node(m, "Mish", "y", "y2");
    int sp2 = tb_node(m, "Softplus", "y2", "s2");
    tb_node(m, "Tanh", "s2", "t2");
    tb_node(m, "Mul", "z,t2", "y3");
    tb_output(m, "y3");
    mp_profile *prof;
    const mp_patterns *p = built(m, &prof);
    if (p) {
        mp_pref r = mp_pattern_at(p, sp);
        T_CHECK(r.kind == MP_PAT_ACT && p->acts[r.index].kind == MP_ACT_MISH &&
                p->acts[r.index].form == MP_FORM_DECOMPOSED && p->acts[r.index].n == 3 &&
                p->acts[r.index].x == tb_val(m, "x") - m->graph->values);
        r = mp_pattern_at(p, op);
        T_CHECK(r.kind == MP_PAT_ACT && p->acts[r.index].kind == MP_ACT_MISH && p->acts[r.index].form == MP_FORM_OP);
        T_EQ(mp_pattern_at(p, sp2).kind, MP_PAT_NONE);
    }
    tb_done(m, prof);
}

/* A weightless copy of a train-mode dynamo export (opset 18: GELU written
 * out as Div, Erf, Add, Mul(0.5), Mul(x); SDPA's decomposition with Q
 * and K each scaled and a NaN guard): its scalar constants were external
 * data and are gone. The structure is recognised all the same: 12 blocks
 * of attention, GELU and the six weights; the scale reads unknown. Before,
 * no block was found (the constants' values were required). */
static void t_weightless_train_export(void) {
    mp_model *m;
    mp_profile *prof = tb_prof_file("models/dynamo/bert_cls_train_torch211.onnx", &m);
    if (!prof) {
        tb_done(m, NULL);
        return;
    }
    const mp_patterns *p = mp_patterns_of(m->graph);
    T_CHECK(p != NULL);
    if (p) {
        T_EQ(p->n_blocks, 12);
        T_EQ(p->n_attn, 12);
        T_EQ(p->n_miss, 0);
        T_EQ(p->heads, 12);
        T_EQ(p->head_dim, 64);
        for (int bi = 0; bi < p->n_blocks; bi++) {
            const mp_pblock *b = &p->blocks[bi];
            const mp_pattn *a = &p->attn[b->attn];
            T_EQ(a->form, MP_FORM_SDPA);
            T_CHECK(a->guard && !(a->scale > 0));
            T_EQ(b->mlp_kind, MP_ACT_GELU);
            T_EQ(p->acts[b->mlp].form, MP_FORM_DECOMPOSED);
            unsigned roles = 0;
            for (int r = 0; r < MP_WROLE_COUNT; r++)
                if (b->w[r].node >= 0) roles |= 1u << r;
            T_EQ(roles, R(Q) | R(K) | R(V) | R(O) | R(UP) | R(DOWN));
        }
    }
    tb_done(m, prof);
}

MP_TESTS(patterns){
    {"quick_gelu_geglu", t_quick_gelu_geglu},
    {"mish", t_mish},
    {"causal_and_padding", t_causal_and_padding},
    {"exports", t_exports},
    {"qwen3_config", t_qwen3_config},
    {"shapes_change", t_shapes_change},
    {"attention_op23", t_attention_op23},
    {"attention_contrib", t_attention_contrib},
    {"whole_ops", t_whole_ops},
    {"decomposed_forms", t_decomposed_forms},
    {"attention_tile_dropout", t_attention_tile_dropout},
    {"swin_window_attention", t_swin_window_attention},
    {"sliding_window_mask", t_sliding_window_mask},
    {"external_window_mask", t_external_window_mask},
    {"einsum_attention", t_einsum_attention},
    {"bloom_attention", t_bloom_attention},
    {"broadcast_mqa", t_broadcast_mqa},
    {"softcap_attention", t_softcap_attention},
    {"gelu_tanh_cube_mul", t_gelu_tanh_cube_mul},
    {"bool_causal_tables", t_bool_causal_tables},
    {"runtime_window", t_runtime_window},
    {"weightless_train_export", t_weightless_train_export},
};
MP_TESTS_END(patterns)
