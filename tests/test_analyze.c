/* Analysis: parameters (shared once, buffers, copies), liveness, modules,
 * op table, unknown dims. Every expected number is worked out by hand in
 * the comment beside it. */
#include "analyze/profile.h"
#include "tbuild.h"
#include "test.h"
#include "jsonr.h"

#include <ctype.h>
#include <stdlib.h>

static void t_shared_weight_once(void) {
    /* two MatMuls share W[8,8]; a third uses its own V[8,8] */
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 2, TB_DIMS(2, 8));
    tb_weight(m, "W", MP_DT_FLOAT, 2, TB_DIMS(8, 8));
    tb_weight(m, "V", MP_DT_FLOAT16, 2, TB_DIMS(8, 8));
    int a = tb_node(m, "MatMul", "x,W", "h1");
    int b = tb_node(m, "MatMul", "h1,W", "h2");
    int c = tb_node(m, "MatMul", "h2,V", "y");
    tb_name(m, a, "/enc/l0/MatMul");
    tb_name(m, b, "/enc/l1/MatMul");
    tb_name(m, c, "/head/MatMul");
    m->graph->nodes[a].module = mp_model_module(m, "enc.l0", 6);
    m->graph->nodes[b].module = mp_model_module(m, "enc.l1", 6);
    m->graph->nodes[c].module = mp_model_module(m, "head", 4);
    tb_output(m, "y");
    mp_profile *p = NULL;
    T_OK(tb_profile(m, &p));
    if (!p) return;
    /* W counted once (64) + V (64) = 128 */
    T_EQ_U64(p->total.params, 128);
    T_EQ_U64(p->params_by_dtype[MP_DT_FLOAT], 64);
    T_EQ_U64(p->params_by_dtype[MP_DT_FLOAT16], 64);
    /* bytes: 64*4 + 64*2 = 384 */
    T_EQ_U64(p->total.param_bytes, 384);
    int enc = mp_strmap_get(&m->module_paths, "enc");
    int l0 = mp_strmap_get(&m->module_paths, "enc.l0");
    int l1 = mp_strmap_get(&m->module_paths, "enc.l1");
    /* each layer shows W; their parent counts it once */
    T_EQ_U64(p->mods[l0].params, 64);
    T_EQ_U64(p->mods[l1].params, 64);
    T_EQ_U64(p->mods[enc].params, 64);
    /* MACs: 2*8*8 = 128 per MatMul; enc has two */
    T_EQ_U64(p->mods[enc].macs, 256);
    T_EQ_U64(p->mods[0].macs, 384);
    T_EQ_U64(p->total.flops, 768);
    /* the MatMul op type uses W once and V once: 128 */
    T_EQ(p->n_ops, 1);
    T_EQ_U64(p->ops[0].fig.params, 128);
    mp_profile_free(p);
    mp_model_free(m);
}

/* InstanceNorm with track_running_stats, as the TorchScript exporter
 * writes it: each of weight, bias, running_mean and running_var through an
 * Expand and a Tile into a BatchNormalization. The statistics reach only
 * its mean and variance: buffers (params 3 + 3 = 6, as PyTorch counts; 12
 * before), 2 buffers of 3. */
static void t_expanded_running_stats(void) {
    mp_model *m = tb_new(13);
    tb_input(m, "x", MP_DT_FLOAT, 4, TB_DIMS(1, 3, 4, 4));
    static const char *const w[] = {"n.weight", "n.bias", "n.running_mean", "n.running_var"};
    for (int i = 0; i < 4; i++) tb_weight(m, w[i], MP_DT_FLOAT, 1, TB_DIMS(3));
    tb_const_i(m, "shape", MP_DT_INT64, 1, TB_DIMS(1), (const int64_t[]){3});
    tb_const_i(m, "reps", MP_DT_INT64, 1, TB_DIMS(1), (const int64_t[]){1});
    char ins[64], e[16], t[16];
    for (int i = 0; i < 4; i++) {
        snprintf(ins, sizeof ins, "%s,shape", w[i]);
        snprintf(e, sizeof e, "e%d", i);
        snprintf(t, sizeof t, "t%d", i);
        tb_node(m, "Expand", ins, e);
        snprintf(ins, sizeof ins, "%s,reps", e);
        tb_node(m, "Tile", ins, t);
    }
    tb_node(m, "BatchNormalization", "x,t0,t1,t2,t3", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    if (p) {
        T_EQ(p->total.params, 6);
        T_EQ(p->buffers, 2);
        T_EQ(p->buffer_elems, 6);
    }
    tb_done(m, p);
}

/* A TorchScript export names a module by its last name alone where its
 * parents were never called (ModuleDict items, self.enc.fc(x)), made unique
 * by a count ("/cls", "/cls_1"): the weights its nodes read keep the
 * qualified path, so the scope is that module (heads.cls, aux.cls). A
 * module called again ("/blk_1") is the same module; a scope reading
 * another module's weight (a tied head) keeps its own name; a scope reading
 * two modules' weights is left as named. */
static void t_scope_named_by_weights(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 2, TB_DIMS(3, 4));
    tb_weight(m, "heads.cls.weight", MP_DT_FLOAT, 2, TB_DIMS(2, 4));
    tb_weight(m, "aux.cls.weight", MP_DT_FLOAT, 2, TB_DIMS(3, 4));
    tb_weight(m, "blk.weight", MP_DT_FLOAT, 2, TB_DIMS(4, 4));
    tb_weight(m, "wte.weight", MP_DT_FLOAT, 2, TB_DIMS(4, 4));
    tb_weight(m, "a.weight", MP_DT_FLOAT, 2, TB_DIMS(4, 4));
    tb_weight(m, "wte.bias", MP_DT_FLOAT, 1, TB_DIMS(4));
    static const char *const in[] = {"x,heads.cls.weight", "x,aux.cls.weight", "x,blk.weight",
                                     "b0,blk.weight", "b1,wte.weight", "x,a.weight,wte.bias"};
    static const char *const out[] = {"y0", "y1", "b0", "b1", "y2", "y3"};
    static const char *const name[] = {"/cls/Gemm", "/cls_1/Gemm", "/blk/Gemm", "/blk_1/Gemm",
                                       "/lm_head/Gemm", "/mix/Gemm"};
    static const char *const want[] = {"heads.cls", "aux.cls", "blk", "blk", "lm_head", "mix"};
    int k[6];
    for (int i = 0; i < 6; i++) {
        k[i] = tb_node(m, "Gemm", in[i], out[i]);
        tb_name(m, k[i], name[i]);
        tb_attr_i(m, k[i], "transB", 1);
        m->graph->nodes[k[i]].module = -1;   /* as the loader leaves it: from the name */
    }
    tb_output(m, "y0");
    tb_output(m, "y1");
    tb_output(m, "y2");
    tb_output(m, "y3");
    mp_profile *p = tb_prof(m);
    for (int i = 0; p && i < 6; i++) T_EQ_STR(m->modules[m->graph->nodes[k[i]].module].path, want[i]);
    T_CHECK(mp_strmap_get(&m->module_paths, "cls_1") < 0 && mp_strmap_get(&m->module_paths, "blk_1") < 0);
    tb_done(m, p);
}

static void t_batchnorm_buffers_and_copies(void) {
    /* BN scale/bias are params; mean/var are buffers. The exporter's
     * Identity copies: "bn2.scale" copies "bn1.scale" (a param of its own),
     * "bn2.var" copies "bn1.scale" too but is a buffer. */
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 4, TB_DIMS(1, 4, 2, 2));
    tb_weight(m, "bn1.scale", MP_DT_FLOAT, 1, TB_DIMS(4));
    tb_weight(m, "bn1.bias", MP_DT_FLOAT, 1, TB_DIMS(4));
    tb_weight(m, "bn1.mean", MP_DT_FLOAT, 1, TB_DIMS(4));
    tb_weight(m, "bn1.var", MP_DT_FLOAT, 1, TB_DIMS(4));
    tb_node(m, "Identity", "bn1.scale", "bn2.scale");
    tb_node(m, "Identity", "bn1.scale", "bn2.var");
    tb_node(m, "Identity", "bn1.bias", "bn2.bias");
    tb_node(m, "Identity", "bn1.mean", "bn2.mean");
    tb_node(m, "BatchNormalization", "x,bn1.scale,bn1.bias,bn1.mean,bn1.var", "h");
    tb_node(m, "BatchNormalization", "h,bn2.scale,bn2.bias,bn2.mean,bn2.var", "y");
    tb_output(m, "y");
    mp_profile *p = NULL;
    T_OK(tb_profile(m, &p));
    if (!p) return;
    /* params: bn1.scale, bn1.bias, bn2.scale, bn2.bias = 4 x 4 = 16 */
    T_EQ_U64(p->total.params, 16);
    /* BN: 2 FLOPs per element, 16 elements, twice = 64 */
    T_EQ_U64(p->total.flops, 64);
    mp_profile_free(p);
    mp_model_free(m);
}

static void t_not_params(void) {
    /* int64 shape tensors and scalar constants are not parameters */
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 2, TB_DIMS(2, 6));
    tb_const_i(m, "shape", MP_DT_INT64, 1, TB_DIMS(2), TB_DIMS(3, 4));
    tb_const_f(m, "two", MP_DT_FLOAT, 0, NULL, (const double[]){2.0});
    tb_node(m, "Reshape", "x,shape", "r");
    tb_node(m, "Mul", "r,two", "y");
    tb_output(m, "y");
    mp_profile *p = NULL;
    T_OK(tb_profile(m, &p));
    if (!p) return;
    T_EQ_U64(p->total.params, 0);
    T_EQ_STR(tb_shape(m, "y"), "3x4");
    T_EQ_U64(p->total.flops, 12);
    mp_profile_free(p);
    mp_model_free(m);
}

static void t_liveness_peak(void) {
    /* x[1000] fp32 (4000 B) -> a = Relu(x) -> b = Relu(a) -> y = Add(a, b).
     * At the Add: x is dead (last use: node 0), a, b and y live:
     * 3 * 4000 = 12000. At node 1: x dead?, no: x dies after node 0, so
     * node 1 holds a, b = 8000. Node 0 holds x, a = 8000. Peak 12000. */
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 1, TB_DIMS(1000));
    tb_node(m, "Relu", "x", "a");
    tb_node(m, "Relu", "a", "b");
    int add = tb_node(m, "Add", "a,b", "y");
    tb_output(m, "y");
    mp_profile *p = NULL;
    T_OK(tb_profile(m, &p));
    if (!p) return;
    T_EQ_U64(p->activation_peak_bytes, 12000);
    T_EQ(p->peak_node, add);
    /* bytes: Relu reads 4000 writes 4000 (x2), Add reads 8000 writes 4000 */
    T_EQ_U64(p->total.bytes_read, 16000);
    T_EQ_U64(p->total.bytes_written, 12000);
    mp_profile_free(p);
    mp_model_free(m);
}

static void t_folded_weights_not_activations(void) {
    /* y = x[4,100] @ Transpose(W[50,100]): W^T (20000 B) is computed from a
     * weight alone, so it is folded, not an activation. Live at the
     * MatMul: x (1600 B) and y (800 B) = 2400. */
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 2, TB_DIMS(4, 100));
    tb_weight(m, "W", MP_DT_FLOAT, 2, TB_DIMS(50, 100));
    tb_node(m, "Transpose", "W", "Wt");
    int mm = tb_node(m, "MatMul", "x,Wt", "y");
    tb_output(m, "y");
    mp_profile *p = NULL;
    T_OK(tb_profile(m, &p));
    if (!p) return;
    T_EQ_U64(p->activation_peak_bytes, 2400);
    T_EQ(p->peak_node, mm);
    T_EQ_U64(p->total.params, 5000);
    mp_profile_free(p);
    mp_model_free(m);
}

static void t_unknown_dims_reported(void) {
    mp_model *m = tb_new(17);
    int64_t batch = tb_sym(m, "batch");
    tb_input(m, "x", MP_DT_FLOAT, 2, TB_DIMS(batch, 8));
    tb_weight(m, "W", MP_DT_FLOAT, 2, TB_DIMS(8, 8));
    tb_node(m, "MatMul", "x,W", "y");
    tb_output(m, "y");
    mp_profile *p = NULL;
    T_OK(tb_profile(m, &p));
    if (!p) return;
    T_EQ(p->n_unresolved, 1);
    T_EQ_STR(m->syms[p->unresolved[0]].name, "batch");
    T_EQ(p->total.unknown, 1);
    T_EQ_U64(p->total.params, 64); /* params need no dims */
    T_EQ_STR(tb_shape(m, "y"), "batchx8");
    mp_profile_free(p);
    /* with a value the cost is known: 3*8*8 = 192 MACs */
    T_OK(mp_model_set_dim(m, "batch", 3));
    T_OK(tb_profile(m, &p));
    T_EQ(p->n_unresolved, 0);
    T_EQ(p->total.unknown, 0);
    T_EQ_U64(p->total.macs, 192);
    mp_profile_free(p);
    mp_model_free(m);
}

static void t_uncounted_listed(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 1, TB_DIMS(4));
    tb_node_d(m, "my.custom", "Frobnicate", "x", "h");
    tb_node(m, "Relu", "x", "y");
    tb_output(m, "y");
    mp_profile *p = NULL;
    T_OK(tb_profile(m, &p));
    if (!p) return;
    T_EQ(p->total.uncounted, 1);
    int found = 0;
    for (int i = 0; i < p->n_ops; i++)
        if (strcmp(p->ops[i].op, "Frobnicate") == 0) {
            found = 1;
            T_EQ(p->ops[i].fig.uncounted, 1);
            T_EQ_STR(p->ops[i].domain, "my.custom");
        }
    T_CHECK(found);
    mp_totals t;
    mp_profile_totals(p, &t);
    T_EQ(t.uncounted_nodes, 1);
    T_EQ(t.nodes, 2);
    mp_profile_free(p);
    mp_model_free(m);
}

static void t_every_op_documented(void) {
    /* docs/COUNTING.md names every operator that has a rule */
    size_t len = 0;
    char *doc = jr_slurp("docs/COUNTING.md", &len);
    T_CHECK(doc != NULL);
    if (!doc) return;
    int n = mp_op_registry_size(), missing = 0;
    T_CHECK(n > 200);
    for (int i = 0; i < n; i++) {
        const char *name = mp_op_registry_at(i)->name;
        size_t nl = strlen(name);
        bool found = false;
        for (const char *at = strstr(doc, name); at && !found; at = strstr(at + 1, name)) {
            char before = at > doc ? at[-1] : ' ', after = at[nl];
            found = !isalnum((unsigned char)before) && !isalnum((unsigned char)after);
        }
        if (!found && missing++ < 20)
            mp_t_fail(__FILE__, __LINE__, "operator %s%s%s is not in docs/COUNTING.md",
                      mp_op_registry_at(i)->domain, mp_op_registry_at(i)->domain[0] ? "::" : "",
                      name);
    }
    free(doc);
}

/* The row of op `op` in module `path` (NULL when none). */
static const mp_modop *modop_row(const mp_model *m, const mp_profile *p, const char *path, const char *op) {
    int md = mp_strmap_get(&m->module_paths, path);
    if (md < 0 || !p->modops) return NULL;
    for (int j = p->modop_at[md]; j < p->modop_at[md + 1]; j++) {
        const mp_modop *r = &p->modops[j];
        if (r->op >= 0 && strcmp(p->ops[r->op].op, op) == 0) return r;
    }
    return NULL;
}

/* Every module's rows add up to its figures, exactly (params too). */
static int modop_mismatches(const mp_profile *p) {
    int bad = 0;
    for (int md = 0; md < p->m->n_modules; md++) {
        mp_fig s = {0};
        for (int j = p->modop_at[md]; j < p->modop_at[md + 1]; j++) {
            const mp_fig *f = &p->modops[j].fig;
            s.params += f->params;
            s.param_bytes += f->param_bytes;
            s.macs += f->macs;
            s.flops += f->flops;
            s.bytes_read += f->bytes_read;
            s.bytes_written += f->bytes_written;
            s.act_bytes += f->act_bytes;
            s.nodes += f->nodes;
            s.uncounted += f->uncounted;
            s.unknown += f->unknown;
        }
        const mp_fig *t = &p->mods[md];
        if (s.params != t->params || s.param_bytes != t->param_bytes || s.macs != t->macs ||
            s.flops != t->flops || s.bytes_read != t->bytes_read || s.bytes_written != t->bytes_written ||
            s.act_bytes != t->act_bytes || s.nodes != t->nodes || s.uncounted != t->uncounted ||
            s.unknown != t->unknown) {
            if (bad++ < 5)
                mp_t_fail(__FILE__, __LINE__, "module '%s': its op rows add up to params %" PRIu64
                          " flops %" PRIu64 " nodes %d, the module has %" PRIu64 " / %" PRIu64 " / %d",
                          p->m->modules[md].path, s.params, s.flops, s.nodes, t->params, t->flops, t->nodes);
        }
    }
    return bad;
}

/* docs/COUNTING.md, "By module and operator": the worked example. A tied
 * embedding E[10,4] is read by `embed`'s Gather, then by `head`'s
 * Transpose; W[4,4] by block.fc's MatMul, b[4] by its Add. */
static void t_module_ops_split(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "ids", MP_DT_INT64, 2, TB_DIMS(1, 3));
    tb_weight(m, "E", MP_DT_FLOAT, 2, TB_DIMS(10, 4));
    tb_weight(m, "W", MP_DT_FLOAT, 2, TB_DIMS(4, 4));
    tb_weight(m, "b", MP_DT_FLOAT, 1, TB_DIMS(4));
    int g = tb_node(m, "Gather", "E,ids", "x");
    int mm = tb_node(m, "MatMul", "x,W", "h0");
    int ad = tb_node(m, "Add", "h0,b", "h");
    int tr = tb_node(m, "Transpose", "E", "Et");
    int hd = tb_node(m, "MatMul", "h,Et", "y");
    m->graph->nodes[g].module = mp_model_module(m, "embed", 5);
    m->graph->nodes[mm].module = mp_model_module(m, "block.fc", 8);
    m->graph->nodes[ad].module = mp_model_module(m, "block.fc", 8);
    m->graph->nodes[tr].module = mp_model_module(m, "head", 4);
    m->graph->nodes[hd].module = mp_model_module(m, "head", 4);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    if (!p) return;
    /* params: E 40 + W 16 + b 4 = 60 */
    T_EQ_U64(p->total.params, 60);
    /* the root: E goes to the Gather, the first node that reads it */
    T_EQ_U64(modop_row(m, p, "", "Gather")->fig.params, 40);
    T_EQ_U64(modop_row(m, p, "", "Transpose")->fig.params, 0);
    /* MatMul: 1x3x4 . 4x4 = 48 MACs, 1x3x4 . 4x10 = 120 MACs: 168 MACs, 336
     * FLOPs, 2 nodes; W 16 params */
    const mp_modop *r = modop_row(m, p, "", "MatMul");
    T_EQ_U64(r->fig.params, 16);
    T_EQ_U64(r->fig.macs, 168);
    T_EQ_U64(r->fig.flops, 336);
    T_EQ(r->fig.nodes, 2);
    /* Add: 12 FLOPs (1x3x4), b 4 params */
    T_EQ_U64(modop_row(m, p, "", "Add")->fig.flops, 12);
    T_EQ_U64(modop_row(m, p, "", "Add")->fig.params, 4);
    /* head reads E first through its Transpose: 40 there, 0 in its MatMul */
    T_EQ_U64(modop_row(m, p, "head", "Transpose")->fig.params, 40);
    T_EQ_U64(modop_row(m, p, "head", "MatMul")->fig.params, 0);
    T_EQ_U64(modop_row(m, p, "head", "MatMul")->fig.flops, 240);
    T_EQ_U64(modop_row(m, p, "embed", "Gather")->fig.params, 40);
    T_EQ_U64(modop_row(m, p, "block", "MatMul")->fig.params, 16);
    T_CHECK(modop_row(m, p, "block", "Gather") == NULL);
    /* the root's rows by FLOPs: MatMul, Add, then the ones without */
    int root = 0;
    T_EQ_STR(p->ops[p->modops[p->modop_at[root]].op].op, "MatMul");
    T_EQ_STR(p->ops[p->modops[p->modop_at[root] + 1].op].op, "Add");
    T_EQ(p->modop_at[root + 1] - p->modop_at[root], 4);
    /* each node's own row */
    T_EQ(p->node_modop[hd], modop_row(m, p, "head", "MatMul") - p->modops);
    T_EQ(modop_mismatches(p), 0);
    tb_done(m, p);
}

/* A parameter no node reads: the root counts every parameter, and its row
 * "(unused)" keeps the root's rows adding up. */
static void t_module_ops_unused(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 2, TB_DIMS(2, 4));
    tb_weight(m, "W", MP_DT_FLOAT, 2, TB_DIMS(4, 4));
    tb_weight(m, "spare", MP_DT_FLOAT, 1, TB_DIMS(7));
    int a = tb_node(m, "MatMul", "x,W", "y");
    m->graph->nodes[a].module = mp_model_module(m, "fc", 2);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    if (!p) return;
    T_EQ_U64(p->total.params, 23);
    int n = p->modop_at[1] - p->modop_at[0];
    T_EQ(n, 2);
    const mp_modop *last = &p->modops[p->modop_at[1] - 1];
    T_EQ(last->op, -1);
    T_EQ_U64(last->fig.params, 7);
    T_EQ_U64(last->fig.param_bytes, 28);
    T_EQ(modop_mismatches(p), 0);
    tb_done(m, p);
}

/* Issue 24 point 2's acceptance: every module of DenseNet-121 and BERT
 * (and of the other fixture shapes: a tied head, local functions,
 * quantized weights) has a split that adds up to its figures. */
static void t_module_ops_models(void) {
    static const char *const models[] = {"models/densenet121.onnx", "models/bert_base.onnx",
                                         "models/gpt2.onnx", "models/resnet18_functions.onnx",
                                         "models/quant_cnn_qdq.onnx", "models/dynamo/qwen3_2layers.onnx",
                                         /* parameters the dynamo exporter merged or folded
                                          * (counted by PyTorch's shape): in the rows too */
                                         "models/dynamo/timm_resnet18_folded.onnx",
                                         "models/dynamo/bert_base_dynamo.onnx",
                                         "models/dynamo/resnet50_train_torch211.onnx",
                                         "models/dynamo/bert_cls_train_torch211.onnx"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        mp_model *m = NULL;
        T_OK(mp_model_load(models[i], &m));
        if (!m) continue;
        if (mp_strmap_get(&m->sym_names, "batch") > 0) T_OK(mp_model_set_dim(m, "batch", 1));
        if (mp_strmap_get(&m->sym_names, "seq") > 0) T_OK(mp_model_set_dim(m, "seq", 128));
        mp_profile *p = NULL;
        T_OK(mp_profile_static(m, &p));
        if (p) {
            T_CHECK(p->modops != NULL && p->m->n_modules > 1);
            int bad = modop_mismatches(p);
            if (bad) mp_t_fail(__FILE__, __LINE__, "%s: %d modules do not add up", models[i], bad);
            /* every node in its own module's row of its op type */
            for (int k = 0; k < m->graph->n_nodes; k++) {
                int row = p->node_modop[k];
                const mp_node *n = &m->graph->nodes[k];
                T_CHECK(row >= p->modop_at[n->module] && row < p->modop_at[n->module + 1] &&
                        strcmp(p->ops[p->modops[row].op].op, n->op) == 0);
            }
        }
        mp_profile_free(p);
        mp_model_free(m);
    }
}

MP_TESTS(analyze){
    {"every_op_documented", t_every_op_documented},
    {"shared_weight_once", t_shared_weight_once},
    {"batchnorm_buffers_and_copies", t_batchnorm_buffers_and_copies},
    {"scope_named_by_weights", t_scope_named_by_weights},
    {"expanded_running_stats", t_expanded_running_stats},
    {"not_params", t_not_params},
    {"liveness_peak", t_liveness_peak},
    {"folded_weights_not_activations", t_folded_weights_not_activations},
    {"unknown_dims_reported", t_unknown_dims_reported},
    {"uncounted_listed", t_uncounted_listed},
    {"module_ops_split", t_module_ops_split},
    {"module_ops_unused", t_module_ops_unused},
    {"module_ops_models", t_module_ops_models},
};
MP_TESTS_END(analyze)
