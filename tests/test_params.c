/* Parameters the exporters folded or tied (docs/COUNTING.md, "Folded and
 * tied parameters"): files written byte by byte (tests/pbw.c) the way
 * PyTorch's dynamo exporter writes them (a graph signature, node scopes,
 * constants its optimizer folded) and the way the TorchScript exporter
 * does (an anonymous transposed copy of a tied weight). */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/profile.h"
#include "graph/graph.h"
#include "pbw.h"
#include "report/report.h"
#include "test.h"

uint16_t mp_float_to_half(float f); /* ops/kernel.h, whose names clash with report.h */

static void kv_entry(pbw *msg, uint32_t field, const char *key, const char *value) {
    pbw kv = {0};
    pbw_str(&kv, 1, key);
    pbw_str(&kv, 2, value);
    pbw_msg(msg, field, &kv);
}

/* Node metadata putting a node in module `path` (dynamo's name scopes). */
static void scope(pbw *md, const char *scopes) {
    kv_entry(md, 9, "pkg.torch.onnx.name_scopes", scopes);
}

/* One folded constant as the dynamo exporter leaves it. */
typedef struct fold {
    const char *tensor;       /* the constant's name: the torch.fx node's (`expand`, `view`, ...) */
    int dtype, rank;
    int64_t dims[4];
    const float *data;        /* its values (fp32), NULL: weights absent */
    const char *consumer;     /* "Concat" (axis 1, with x) or "Add" (x + it) */
    const char *params;       /* the signature's lines for the module's parameters */
    const char *decl;         /* a value info declaring this parameter's shape, or NULL */
    int decl_rank;
    int64_t decl_dims[4];
    const char *tensor2;      /* a second constant folded from it (an Add in the module), or NULL */
    int rank2;
    int64_t dims2[4];
    const char *scopes;       /* the consumer's name scopes; NULL: in `embeddings` */
} fold;

/* x[B,3,4] -> consumer (in module `embeddings`, with the folded constant)
 * -> MatMul with head.weight[4,4] (declared, present) -> y. Profiled. */
static mp_profile *fold_profile(const fold *f, int64_t batch, const char *file, mp_model **pm) {
    const char *syms[] = {NULL, NULL};
    pbw g = {0}, md1 = {0}, md2 = {0};
    scope(&md1, f->scopes ? f->scopes : "['', 'embeddings', 'cat']");
    bool cat = strcmp(f->consumer, "Concat") == 0;
    if (cat) onx_attr_int(&md1, "axis", 1); /* the node's extra fields: metadata and attributes */
    char ins[128];
    snprintf(ins, sizeof ins, cat ? "%s,x" : "x,%s", f->tensor);
    onx_node(&g, 1, f->consumer, "node_embed", ins, f->tensor2 ? "h0" : "h", &md1);
    if (f->tensor2) {
        pbw md3 = {0};
        scope(&md3, "['', 'embeddings', 'add']");
        snprintf(ins, sizeof ins, "h0,%s", f->tensor2);
        onx_node(&g, 1, "Add", "node_add", ins, "h", &md3);
        onx_tensor_external(&g, 5, f->tensor2, 1, f->rank2, f->dims2, "absent.bin", NULL, NULL);
    }
    scope(&md2, "['', 'head', 'linear']");
    onx_node(&g, 1, "MatMul", "node_head", "h,head.weight", "y", &md2);
    onx_value_info(&g, 11, "x", 1, 3, (const int64_t[]){batch, 3, 4}, syms);
    onx_value_info(&g, 12, "y", 1, -1, NULL, syms);
    int64_t n = 1;
    for (int i = 0; i < f->rank; i++) n *= f->dims[i] < 0 ? batch : f->dims[i];
    int64_t dims[4];
    for (int i = 0; i < f->rank; i++) dims[i] = f->dims[i] < 0 ? batch : f->dims[i];
    if (f->data) {
        float *raw = malloc(sizeof(float) * (size_t)n);
        int64_t per = n / (f->dims[0] < 0 ? batch : 1);
        for (int64_t i = 0; i < n; i++) raw[i] = f->data[i % per];
        onx_tensor(&g, 5, f->tensor, f->dtype, f->rank, dims, raw, sizeof(float) * (size_t)n);
        free(raw);
    } else {
        onx_tensor_external(&g, 5, f->tensor, f->dtype, f->rank, dims, "absent.bin", NULL, NULL);
    }
    onx_tensor_external(&g, 5, "head.weight", 1, 2, (const int64_t[]){4, 4}, "absent.bin", NULL,
                        NULL);
    if (f->decl) onx_value_info(&g, 13, f->decl, 1, f->decl_rank, f->decl_dims, syms);
    char sig[1024];
    snprintf(sig, sizeof sig,
             "# inputs\n%sp_head_weight: PARAMETER target='head.weight'\nx: USER_INPUT\n\n"
             "# outputs\ny: USER_OUTPUT\n",
             f->params);
    kv_entry(&g, 16, "pkg.torch.export.ExportedProgram.graph_signature", sig);
    pbw model = {0};
    onx_model(&model, 10, 20, &g);
    const char *path = mp_t_path(file);
    if (pbw_write(&model, path)) abort();
    pbw_free(&model);
    mp_model *m = NULL;
    mp_profile *p = NULL;
    *pm = NULL;
    if (mp_model_load(path, &m) != MP_OK) {
        mp_t_fail(__FILE__, __LINE__, "%s: %s", path, mp_last_error());
        return NULL;
    }
    if (mp_profile_static(m, &p) != MP_OK) {
        mp_t_fail(__FILE__, __LINE__, "%s: %s", path, mp_last_error());
        mp_model_free(m);
        return NULL;
    }
    *pm = m;
    return p;
}

static void fold_done(mp_model *m, mp_profile *p) {
    mp_profile_free(p);
    mp_model_free(m);
}

/* The note on the folded constant (the first, or NULL). */
static const mp_param_note *note_of(const mp_profile *p) { return p->n_pnotes ? &p->pnotes[0] : NULL; }

/* The text report of p, in a static buffer. */
static const char *text_of(const mp_profile *p) {
    static char buf[1 << 16];
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    if (!f) return "";
    mp_report_options o;
    mp_report_options_default(&o);
    o.detailed = 0;
    o.show_ops = 0;
    mp_report_write(p, &o, f);
    long n = ftell(f);
    fclose(f);
    buf[n > 0 && n < (long)sizeof buf ? n : 0] = 0;
    return buf;
}

static const float tok[8] = {0.5f, -1.25f, 2.0f, 0.75f, 1.5f, -0.5f, 0.25f, 3.0f};
#define HEAD 16 /* head.weight [4, 4] */
#define CLS "p_embeddings_cls_token: PARAMETER target='embeddings.cls_token'\n"

/* Issue 13: the class token [1, 1, 4] expanded over the batch and folded
 * by the optimizer into `expand` [B, 1, 4], which a Concat prepends. It is
 * the parameter: 4 elements at any batch, by its values when the weights
 * are there, by its declared shape when the file gives one; without
 * either, its own B x 4 elements are an upper bound, and the report says
 * so (both batch sizes). Before: B x 4 at every batch, said nowhere. */
static void t_folded_expand_two_batches(void) {
    for (int64_t batch = 2; batch <= 4; batch += 2) {
        fold f = {"expand", 1, 3, {-1, 1, 4}, tok, "Concat", CLS, NULL, 0, {0}};
        mp_model *m;
        mp_profile *p = fold_profile(&f, batch, "expand_values.onnx", &m);
        if (p) {
            T_EQ_U64(p->total.params, 4 + HEAD);
            T_CHECK(!p->params_bound);
            const mp_param_note *n = note_of(p);
            T_CHECK(n && n->kind == MP_PNOTE_DERIVED && n->counted == 4 &&
                    n->elems == (uint64_t)batch * 4 && n->n_src == 1);
            T_CHECK(strstr(text_of(p), "from embeddings.cls_token: counted as the parameter's 4 "
                                       "elements") != NULL);
            int emb = mp_strmap_get(&m->module_paths, "embeddings");
            T_CHECK(emb > 0 && p->mods[emb].params == 4);
        }
        fold_done(m, p);

        fold d = {"expand", 1, 3, {-1, 1, 4}, NULL, "Concat", CLS, "embeddings.cls_token", 3, {1, 1, 4}};
        p = fold_profile(&d, batch, "expand_declared.onnx", &m);
        if (p) {
            T_EQ_U64(p->total.params, 4 + HEAD);
            T_CHECK(!p->params_bound);
        }
        fold_done(m, p);

        fold u = {"expand", 1, 3, {-1, 1, 4}, NULL, "Concat", CLS, NULL, 0, {0}};
        p = fold_profile(&u, batch, "expand_unknown.onnx", &m);
        if (p) {
            T_EQ_U64(p->total.params, (uint64_t)batch * 4 + HEAD);
            T_CHECK(p->params_bound);
            const mp_param_note *n = note_of(p);
            T_CHECK(n && n->kind == MP_PNOTE_BOUND);
            const char *txt = text_of(p);
            T_CHECK(strstr(txt, "an upper bound (see param notes)") != NULL);
            T_CHECK(strstr(txt, "expand [") && strstr(txt, "was broadcast by the exporter from "
                                                       "embeddings.cls_token, whose shape the file "
                                                       "does not give"));
        }
        fold_done(m, p);
    }
}

/* Two constants folded from one declared parameter (the token expanded
 * for the Concat, and reshaped for an Add): the parameter counts once,
 * both constants' modules show it. */
static void t_folded_twice_counted_once(void) {
    fold f = {"expand", 1, 3, {-1, 1, 4}, NULL, "Concat", CLS, "p_embeddings_cls_token", 3, {1, 1, 4},
              "view", 1, {4}};
    mp_model *m;
    mp_profile *p = fold_profile(&f, 2, "twice.onnx", &m);
    if (p) {
        T_EQ_U64(p->total.params, 4 + HEAD);
        T_EQ(p->n_pnotes, 2);
        T_CHECK(p->n_pnotes == 2 && p->pnotes[0].counted + p->pnotes[1].counted == 4);
        T_EQ_U64(m->graph->nodes[0].cost.params + m->graph->nodes[1].cost.params, 8);
    }
    fold_done(m, p);
}

/* timm's ViT keeps its class token on the root module (target
 * `cls_token`, owner ""), and the Concat runs at the root. */
static void t_folded_root_token(void) {
    for (int64_t batch = 2; batch <= 4; batch += 2) {
        fold f = {"expand", 1, 3, {-1, 1, 4}, tok, "Concat", "p_cls_token: PARAMETER target='cls_token'\n",
                  NULL, 0, {0}, NULL, 0, {0}, "['', 'cat']"};
        mp_model *m;
        mp_profile *p = fold_profile(&f, batch, "root_token.onnx", &m);
        if (p) {
            T_EQ_U64(p->total.params, 4 + HEAD);
            const mp_param_note *n = note_of(p);
            T_CHECK(n && n->kind == MP_PNOTE_DERIVED && n->counted == 4);
        }
        fold_done(m, p);
    }
}

/* Tile (torch's repeat, `repeat` [B, 1, 4]): the same at both batches. */
static void t_folded_tile(void) {
    for (int64_t batch = 2; batch <= 4; batch += 2) {
        fold f = {"repeat", 1, 3, {-1, 1, 4}, tok, "Concat", CLS, NULL, 0, {0}};
        mp_model *m;
        mp_profile *p = fold_profile(&f, batch, "tile.onnx", &m);
        if (p) {
            T_EQ_U64(p->total.params, 4 + HEAD);
            const mp_param_note *n = note_of(p);
            T_CHECK(n && n->kind == MP_PNOTE_DERIVED && strcmp(n->how, "tile") == 0);
        }
        fold_done(m, p);
        fold u = {"repeat_1", 1, 3, {-1, 1, 4}, NULL, "Concat", CLS, NULL, 0, {0}};
        p = fold_profile(&u, batch, "tile_unknown.onnx", &m);
        if (p) {
            T_EQ_U64(p->total.params, (uint64_t)batch * 4 + HEAD);
            T_CHECK(p->params_bound);
        }
        fold_done(m, p);
    }
}

/* The rearrangements keep the parameter's elements, weights or not:
 * Reshape (`view` [4] of [1, 1, 4]), Cast (`_to_copy`, fp16),
 * Unsqueeze (`unsqueeze` [1, 4] of [4]); each is named as derived from
 * its parameter and never an upper bound. */
static void t_folded_layouts(void) {
    static const struct {
        fold f;
        const char *how;
    } cases[] = {
        {{"view", 1, 1, {4}, NULL, "Add", CLS, NULL, 0, {0}}, "reshape"},
        {{"_to_copy", 10, 3, {1, 1, 4}, NULL, "Add", CLS, NULL, 0, {0}}, "cast"},
        {{"unsqueeze", 1, 2, {1, 4}, NULL, "Add",
          "p_embeddings_scale: PARAMETER target='embeddings.scale'\n", NULL, 0, {0}},
         "unsqueeze"},
        {{"view_3", 1, 1, {4}, tok, "Add", CLS, "embeddings.cls_token", 3, {1, 1, 4}}, "reshape"},
    };
    for (size_t i = 0; i < MP_ARRAY_LEN(cases); i++) {
        for (int64_t batch = 2; batch <= 4; batch += 2) {
            mp_model *m;
            mp_profile *p = fold_profile(&cases[i].f, batch, "layout.onnx", &m);
            if (p) {
                T_EQ_U64(p->total.params, 4 + HEAD);
                T_CHECK(!p->params_bound);
                const mp_param_note *n = note_of(p);
                T_CHECK(n && n->kind == MP_PNOTE_DERIVED && n->counted == 4 && n->how &&
                        strcmp(n->how, cases[i].how) == 0);
                char buf[512];
                T_CHECK(n && strstr(mp_pnote_text(p, n, buf, sizeof buf), "embeddings.") != NULL);
            }
            fold_done(m, p);
        }
    }
}

/* Concat of several parameters (`cat` [3, 4] of a [1, 4] and b [2, 4]):
 * both named, their 12 elements; with their shapes declared the same, each
 * counted once. */
static void t_folded_concat(void) {
    const char *params = "p_embeddings_a: PARAMETER target='embeddings.a'\n"
                         "p_embeddings_b: PARAMETER target='embeddings.b'\n";
    fold f = {"cat", 1, 2, {3, 4}, NULL, "Add", params, NULL, 0, {0}};
    mp_model *m;
    mp_profile *p = fold_profile(&f, 2, "concat.onnx", &m);
    if (p) {
        T_EQ_U64(p->total.params, 12 + HEAD);
        const mp_param_note *n = note_of(p);
        T_CHECK(n && n->kind == MP_PNOTE_DERIVED && n->n_src == 2 && strcmp(n->how, "concat") == 0);
        char buf[512];
        T_CHECK(n && strstr(mp_pnote_text(p, n, buf, sizeof buf), "embeddings.a, embeddings.b"));
    }
    fold_done(m, p);
}

/* A TorchScript-style language model (no signature): ids -> Gather of
 * tok.weight [10, 4] -> MatMul with `head` (the output head, tied to the
 * embedding and folded by the exporter into an anonymous copy) -> y.
 * head_data NULL: weights absent. */
static mp_profile *tied_profile(const char *head, int head_dtype, int rank, const int64_t *hdims,
                                const void *head_data, size_t head_len, bool weights,
                                const char *file, mp_model **pm) {
    const char *syms[] = {NULL, NULL};
    pbw g = {0};
    char ins[128];
    onx_node(&g, 1, "Gather", "/tok/Gather", "tok.weight,ids", "h", NULL);
    /* the head as a MatMul when it is [4, 10], else a second lookup */
    bool mm = rank == 2 && hdims[0] == 4 && hdims[1] == 10;
    snprintf(ins, sizeof ins, mm ? "h,%s" : "%s,ids", head);
    onx_node(&g, 1, mm ? "MatMul" : "Gather", "/head/MatMul", ins, "y", NULL);
    onx_value_info(&g, 11, "ids", 7, 2, (const int64_t[]){1, 3}, syms);
    onx_value_info(&g, 12, "y", 1, -1, NULL, syms);
    float emb[40];
    for (int i = 0; i < 40; i++) emb[i] = (float)((i * 7) % 13) * 0.25f - 1.0f;
    if (weights) {
        onx_tensor(&g, 5, "tok.weight", 1, 2, (const int64_t[]){10, 4}, emb, sizeof emb);
        onx_tensor(&g, 5, head, head_dtype, rank, hdims, head_data, head_len);
    } else {
        onx_tensor_external(&g, 5, "tok.weight", 1, 2, (const int64_t[]){10, 4}, "absent.bin", NULL, NULL);
        onx_tensor_external(&g, 5, head, head_dtype, rank, hdims, "absent.bin", NULL, NULL);
    }
    pbw model = {0};
    onx_model(&model, 7, 14, &g);
    const char *path = mp_t_path(file);
    if (pbw_write(&model, path)) abort();
    pbw_free(&model);
    mp_model *m = NULL;
    mp_profile *p = NULL;
    *pm = NULL;
    if (mp_model_load(path, &m) != MP_OK || mp_profile_static(m, &p) != MP_OK) {
        mp_t_fail(__FILE__, __LINE__, "%s: %s", path, mp_last_error());
        mp_model_free(m);
        return NULL;
    }
    *pm = m;
    return p;
}

/* tok.weight's values, as the head's layout and dtype holds them. */
static void head_values(float *out_t, uint16_t *out_h) {
    for (int r = 0; r < 10; r++)
        for (int c = 0; c < 4; c++) {
            float v = (float)(((r * 4 + c) * 7) % 13) * 0.25f - 1.0f;
            if (out_t) out_t[c * 10 + r] = v;  /* [4, 10]: transposed */
            if (out_h) out_h[r * 4 + c] = mp_float_to_half(v); /* [10, 4] in fp16 */
        }
}

/* Issue 18 point 3: the output head tied to the embedding, carried as a
 * transposed copy `onnx::MatMul_5` [4, 10]. With weights, its values are
 * tok.weight transposed: the same parameter, 40 params (PyTorch's count;
 * 80 before), named in the report; the head's module still shows it. A
 * head of other values is a parameter of its own. Without weights it is
 * counted and flagged as a possible copy of tok.weight. */
static void t_tied_transposed_copy(void) {
    float ht[40];
    head_values(ht, NULL);
    const int64_t hd[2] = {4, 10};
    mp_model *m;
    mp_profile *p = tied_profile("onnx::MatMul_5", 1, 2, hd, ht, sizeof ht, true, "tied.onnx", &m);
    if (p) {
        T_EQ_U64(p->total.params, 40);
        T_CHECK(p->n_pnotes == 1 && p->pnotes[0].kind == MP_PNOTE_SAME &&
                strcmp(p->pnotes[0].how, "transpose") == 0);
        T_CHECK(strstr(text_of(p), "onnx::MatMul_5 [4, 10] equals tok.weight [10, 4] "
                                   "(transpose): the same parameter, counted once") != NULL);
        T_EQ_U64(m->graph->nodes[1].cost.params, 40); /* the head's MatMul uses it */
    }
    fold_done(m, p);

    ht[7] += 1.0f; /* one value differs: not a copy */
    p = tied_profile("onnx::MatMul_5", 1, 2, hd, ht, sizeof ht, true, "untied.onnx", &m);
    if (p) {
        T_EQ_U64(p->total.params, 80);
        T_EQ(p->n_pnotes, 0);
    }
    fold_done(m, p);

    p = tied_profile("onnx::MatMul_5", 1, 2, hd, NULL, 0, false, "tied_weightless.onnx", &m);
    if (p) {
        T_EQ_U64(p->total.params, 80);
        T_EQ_U64(p->params_maybe_copies, 40);
        T_CHECK(p->n_pnotes == 1 && p->pnotes[0].kind == MP_PNOTE_MAYBE_COPY);
        const char *txt = text_of(p);
        T_CHECK(strstr(txt, "params:                 80 (fp32 80); 40 of them may be copies") != NULL);
        T_CHECK(strstr(txt, "onnx::MatMul_5 [4, 10] may be a copy of tok.weight [10, 4]") != NULL);
    }
    fold_done(m, p);
}

/* The same with the weights in an external data file next to the model
 * (tok.weight at offset 0, the head at 160): read through a mapping of
 * each range. */
static void t_tied_external(void) {
    float emb[40], ht[40];
    for (int i = 0; i < 40; i++) emb[i] = (float)((i * 7) % 13) * 0.25f - 1.0f;
    head_values(ht, NULL);
    const char *bin = mp_t_path("tied_ext.bin");
    FILE *f = fopen(bin, "wb");
    if (!f) abort();
    fwrite(emb, sizeof emb, 1, f);
    fwrite(ht, sizeof ht, 1, f);
    fclose(f);
    const char *syms[] = {NULL, NULL};
    pbw g = {0};
    onx_node(&g, 1, "Gather", "/tok/Gather", "tok.weight,ids", "h", NULL);
    onx_node(&g, 1, "MatMul", "/head/MatMul", "h,onnx::MatMul_5", "y", NULL);
    onx_value_info(&g, 11, "ids", 7, 2, (const int64_t[]){1, 3}, syms);
    onx_value_info(&g, 12, "y", 1, -1, NULL, syms);
    onx_tensor_external(&g, 5, "tok.weight", 1, 2, (const int64_t[]){10, 4}, "tied_ext.bin", "0", "160");
    onx_tensor_external(&g, 5, "onnx::MatMul_5", 1, 2, (const int64_t[]){4, 10}, "tied_ext.bin", "160",
                        "160");
    pbw model = {0};
    onx_model(&model, 7, 14, &g);
    const char *path = mp_t_path("tied_ext.onnx");
    if (pbw_write(&model, path)) abort();
    pbw_free(&model);
    mp_model *m = NULL;
    mp_profile *p = NULL;
    T_OK(mp_model_load(path, &m));
    if (m) T_OK(mp_profile_static(m, &p));
    if (p) {
        T_CHECK(!m->weightless);
        T_EQ_U64(p->total.params, 40);
        T_CHECK(p->n_pnotes == 1 && p->pnotes[0].kind == MP_PNOTE_SAME);
    }
    fold_done(m, p);
}

/* A cast (fp16) and a reshape ([40]... as [2, 20]) of the embedding are
 * it too. */
static void t_tied_cast_and_reshape(void) {
    uint16_t hh[40];
    head_values(NULL, hh);
    mp_model *m;
    mp_profile *p = tied_profile("onnx::MatMul_9", 10, 2, (const int64_t[]){10, 4}, hh, sizeof hh,
                                 true, "tied_cast.onnx", &m);
    if (p) {
        T_EQ_U64(p->total.params, 40);
        T_CHECK(p->n_pnotes == 1 && strcmp(p->pnotes[0].how, "cast") == 0);
    }
    fold_done(m, p);
    float flat[40];
    for (int i = 0; i < 40; i++) flat[i] = (float)((i * 7) % 13) * 0.25f - 1.0f;
    p = tied_profile("onnx::MatMul_9", 1, 2, (const int64_t[]){2, 20}, flat, sizeof flat, true,
                     "tied_reshape.onnx", &m);
    if (p) {
        T_EQ_U64(p->total.params, 40);
        T_CHECK(p->n_pnotes == 1 && strcmp(p->pnotes[0].how, "reshape") == 0);
    }
    fold_done(m, p);
}

/* TorchScript's eval-mode export folds each BatchNorm into the
 * convolution before it: the convolution's weight becomes an anonymous
 * `onnx::Conv_N`. The report says the count is the folded graph's and how
 * to export for PyTorch's; a convolution with its named weight says
 * nothing. */
static void t_bn_folded_note(void) {
    for (int folded = 0; folded <= 1; folded++) {
        const char *syms[] = {NULL, NULL};
        const char *w = folded ? "onnx::Conv_5" : "conv1.weight";
        pbw g = {0};
        char ins[64];
        snprintf(ins, sizeof ins, "x,%s,onnx::Conv_6", w);
        onx_node(&g, 1, "Conv", "/conv1/Conv", ins, "y", NULL);
        onx_value_info(&g, 11, "x", 1, 4, (const int64_t[]){1, 3, 8, 8}, syms);
        onx_value_info(&g, 12, "y", 1, -1, NULL, syms);
        onx_tensor_external(&g, 5, w, 1, 4, (const int64_t[]){8, 3, 3, 3}, "absent.bin", NULL, NULL);
        onx_tensor_external(&g, 5, "onnx::Conv_6", 1, 1, (const int64_t[]){8}, "absent.bin", NULL, NULL);
        pbw model = {0};
        onx_model(&model, 7, 14, &g);
        const char *path = mp_t_path("bn_folded.onnx");
        if (pbw_write(&model, path)) abort();
        pbw_free(&model);
        mp_model *m = NULL;
        mp_profile *p = NULL;
        T_OK(mp_model_load(path, &m));
        if (m) T_OK(mp_profile_static(m, &p));
        if (p) {
            T_EQ(p->bn_folded, folded);
            T_EQ_U64(p->total.params, 8 * 27 + 8);
            const char *txt = text_of(p);
            T_EQ(strstr(txt, "batchnorm folded:") != NULL, folded);
            T_EQ(strstr(txt, "training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False") != NULL,
                 folded);
        }
        fold_done(m, p);
    }
}

/* A relative position table gathered by an index, folded by the dynamo
 * exporter's optimizer into `index` [1, 3, 4] (torch.fx names the node
 * after aten.index) that the module adds: its 12 values hold the table's 6
 * entries, so it counts 6 (12 before), named as derived (gather); with the
 * weights absent, 12 marked an upper bound. */
static void t_folded_gather(void) {
    static const float table[12] = {0.5f, -1.25f, 2.0f, 0.75f, -1.25f, 2.0f, 0.75f, 1.5f, 2.0f, 0.75f, 1.5f, -0.5f};
    for (int weights = 1; weights >= 0; weights--) {
        fold f = {"index", 1, 3, {1, 3, 4}, weights ? table : NULL, "Add",
                  "p_embeddings_rel_table: PARAMETER target='embeddings.rel_table'\n", NULL, 0, {0}};
        mp_model *m;
        mp_profile *p = fold_profile(&f, 2, weights ? "gather_values.onnx" : "gather_absent.onnx", &m);
        if (p) {
            const mp_param_note *n = note_of(p);
            T_CHECK(n && n->how && strcmp(n->how, "gather") == 0);
            T_EQ_U64(p->total.params, (weights ? 6 : 12) + HEAD);
            T_EQ(p->params_bound, !weights);
            if (n) T_EQ(n->kind, weights ? MP_PNOTE_DERIVED : MP_PNOTE_BOUND);
            T_CHECK(strstr(text_of(p), weights ? "counted as the parameter's 6 elements" : "gathered by an index") != NULL);
        }
        fold_done(m, p);
    }
}

/* Attention masks and biases the TorchScript exporter folded to anonymous
 * constants (docs/COUNTING.md, "Folded attention masks and biases"), on
 * three 4-7 KB exports of plain torch (tests/corpus/seeds/):
 *  - nn.MultiheadAttention (8 features, 2 heads) given a triu mask of -inf
 *    and one of a sliding window, 8 x 8: PyTorch's 458 parameters; the
 *    [1, 8, 8] mask is a buffer (256 B), 522 before;
 *  - a Swin-style window attention of 3 x 3 tokens, 2 heads: its relative
 *    position table [25, 2] gathered by an index into [1, 2, 9, 9] (162
 *    values, 50 distinct): PyTorch's 338, 450 before; the same exported
 *    weightless (external data absent): 450, marked an upper bound. */
static void t_folded_attention_biases(void) {
    static const struct {
        const char *file, *how;
        uint64_t params, counted, buffer_bytes;
    } cases[] = {
        {"tests/corpus/seeds/mha_triu_mask.onnx", "mask", 458, 0, 256},
        {"tests/corpus/seeds/mha_band_mask.onnx", "mask", 458, 0, 256},
        {"tests/corpus/seeds/rel_pos_bias.onnx", "gathered", 338, 50, 0},
        {"tests/corpus/seeds/rel_pos_bias_weightless.onnx", "unread", 450, 162, 0},
    };
    for (size_t i = 0; i < MP_ARRAY_LEN(cases); i++) {
        mp_model *m = NULL;
        mp_profile *p = NULL;
        T_OK(mp_model_load(cases[i].file, &m));
        if (m) T_OK(mp_profile_static(m, &p));
        if (p) {
            T_EQ_U64(p->total.params, cases[i].params);
            T_EQ_U64(p->buffer_bytes, cases[i].buffer_bytes);
            T_EQ(p->n_pnotes, 1);
            if (p->n_pnotes == 1) {
                T_EQ(p->pnotes[0].kind, MP_PNOTE_ATTN_BIAS);
                T_EQ_STR(p->pnotes[0].how, cases[i].how);
                T_EQ_U64(p->pnotes[0].counted, cases[i].counted);
            }
            T_EQ(p->params_bound, strcmp(cases[i].how, "unread") == 0);
            T_CHECK(strstr(text_of(p), "param notes:") != NULL);
        }
        fold_done(m, p);
    }
}

/* The dynamo fixtures (models/dynamo/): the folded ResNet-18 counts
 * PyTorch's 11,689,512: each BatchNorm's scale and shift by PyTorch's shape
 * (the folded convolution's fx node names them), the 20 biases the
 * convolutions gained as folds of them (derived, counted 0; 11,684,712
 * before: the BatchNorms' 9,600 missing, the 4,800 biases counted);
 * MobileNet-V3, exported without the optimizer, says nothing; Qwen3's 14
 * transposed projection weights are named as derived, counted as their own
 * elements (PyTorch's 187,045,376). None is shown in the text. */
static void t_dynamo_fixtures(void) {
    static const struct {
        const char *name;
        bool bn;
        int derived;
        uint64_t params;
    } cases[] = {
        {"timm_resnet18_folded", false, 20, 11689512},
        {"timm_mobilenetv3_large_100", false, 0, 5483032},
        {"qwen3_2layers", false, 14, 187045376},
    };
    for (size_t i = 0; i < MP_ARRAY_LEN(cases); i++) {
        char path[256];
        snprintf(path, sizeof path, "models/dynamo/%s.onnx", cases[i].name);
        mp_model *m = NULL;
        mp_profile *p = NULL;
        T_OK(mp_model_load(path, &m));
        if (m) T_OK(mp_profile_static(m, &p));
        if (p) {
            T_EQ(p->bn_folded, cases[i].bn);
            T_EQ(p->n_pnotes, cases[i].derived);
            T_EQ_U64(p->total.params, cases[i].params);
            T_CHECK(!p->params_bound && !p->params_maybe_copies);
            for (int k = 0; k < p->n_pnotes; k++)
                T_CHECK(p->pnotes[k].kind == MP_PNOTE_DERIVED &&
                        (p->pnotes[k].counted == p->pnotes[k].elems ||
                         (p->pnotes[k].counted == 0 && strstr(cases[i].name, "resnet18"))));
            const char *txt = text_of(p);
            T_CHECK(!strstr(txt, "param notes:"));
            T_EQ(strstr(txt, "batchnorm folded:") != NULL, cases[i].bn);
        }
        fold_done(m, p);
    }
}

MP_TESTS(params){
    {"folded_expand_two_batches", t_folded_expand_two_batches},
    {"folded_tile", t_folded_tile},
    {"folded_twice_counted_once", t_folded_twice_counted_once},
    {"folded_root_token", t_folded_root_token},
    {"folded_layouts", t_folded_layouts},
    {"folded_concat", t_folded_concat},
    {"tied_transposed_copy", t_tied_transposed_copy},
    {"tied_external", t_tied_external},
    {"tied_cast_and_reshape", t_tied_cast_and_reshape},
    {"bn_folded_note", t_bn_folded_note},
    {"dynamo_fixtures", t_dynamo_fixtures},
    {"folded_attention_biases", t_folded_attention_biases},
    {"folded_gather", t_folded_gather},
};
MP_TESTS_END(params)
