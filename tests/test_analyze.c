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

MP_TESTS(analyze){
    {"every_op_documented", t_every_op_documented},
    {"shared_weight_once", t_shared_weight_once},
    {"batchnorm_buffers_and_copies", t_batchnorm_buffers_and_copies},
    {"not_params", t_not_params},
    {"liveness_peak", t_liveness_peak},
    {"folded_weights_not_activations", t_folded_weights_not_activations},
    {"unknown_dims_reported", t_unknown_dims_reported},
    {"uncounted_listed", t_uncounted_listed},
};
MP_TESTS_END(analyze)
