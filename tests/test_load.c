/* Loader tests: models written byte by byte with tests/pbw.c. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/profile.h"
#include "graph/graph.h"
#include "pbw.h"
#include "test.h"

/* x[N,4] -> Relu -> y, plus an optional weight W[4,4] fed to MatMul. */
static void relu_graph(pbw *g) {
    const char *syms[] = {"N", NULL};
    pbw_str(g, 2, "tiny");
    onx_node(g, 1, "Relu", "/block/act/Relu", "x", "y", NULL);
    onx_value_info(g, 11, "x", 1, 2, (const int64_t[]){-1, 4}, syms);
    onx_value_info(g, 12, "y", 1, 2, (const int64_t[]){-1, 4}, syms);
}

/* The graph as a model file (IR version ir, default-domain opset), loaded. */
static mp_status load_graph_at(pbw *g, const char *file, int ir, int opset, mp_model **m) {
    pbw model = {0};
    onx_model(&model, ir, opset, g);
    const char *p = mp_t_path(file);
    if (pbw_write(&model, p)) abort();
    pbw_free(&model);
    return mp_model_load(p, m);
}

static mp_status load_graph(pbw *g, const char *file, mp_model **m) {
    return load_graph_at(g, file, 8, 14, m);
}

static void t_minimal(void) {
    pbw g = {0};
    relu_graph(&g);
    mp_model *m = NULL;
    T_OK(load_graph(&g, "min.onnx", &m));
    T_EQ(m->graph->n_nodes, 1);
    T_EQ_STR(m->graph->nodes[0].op, "Relu");
    T_EQ(m->graph->n_inputs, 1);
    T_EQ_STR(m->producer, "modelprof-tests");
    T_EQ(m->ir_version, 8);
    /* the scope /block/act/ becomes module block.act */
    T_EQ_STR(m->modules[m->graph->nodes[0].module].path, "block.act");
    T_OK(mp_model_set_dim(m, "N", 3));
    T_CHECK(mp_model_set_dim(m, "M", 3) == MP_ERR_USAGE);
    T_CHECK(strstr(mp_last_error(), "'M'") && strstr(mp_last_error(), "N"));
    mp_model_free(m);
}

static void expect_format_error(const char *file, const uint8_t *bytes, size_t n,
                                const char *needle) {
    const char *p = mp_t_path(file);
    FILE *f = fopen(p, "wb");
    if (n) fwrite(bytes, 1, n, f);
    fclose(f);
    mp_model *m = NULL;
    mp_status st = mp_model_load(p, &m);
    T_CHECK(st == MP_ERR_FORMAT);
    T_CHECK(m == NULL);
    if (!strstr(mp_last_error(), needle))
        mp_t_fail(__FILE__, __LINE__, "message '%s' lacks '%s'", mp_last_error(), needle);
    T_CHECK(strstr(mp_last_error(), file) != NULL);
}

static void t_not_onnx(void) {
    expect_format_error("empty.onnx", NULL, 0, "empty");
    const char *text = "hello, this is not a model\n";
    expect_format_error("text.onnx", (const uint8_t *)text, strlen(text), "ONNX");
    uint8_t rnd[512];
    uint32_t s = 12345;
    for (size_t i = 0; i < sizeof rnd; i++) {
        s = s * 1103515245u + 12345u;
        rnd[i] = (uint8_t)(s >> 16);
    }
    expect_format_error("random.onnx", rnd, sizeof rnd, "");
}

static void t_truncated(void) {
    pbw g = {0}, model = {0};
    relu_graph(&g);
    onx_model(&model, 8, 14, &g);
    /* every cut must fail cleanly or load (a prefix can be a valid model) */
    for (size_t cut = 1; cut < model.n; cut++) {
        const char *p = mp_t_path("cut.onnx");
        FILE *f = fopen(p, "wb");
        fwrite(model.b, 1, cut, f);
        fclose(f);
        mp_model *m = NULL;
        mp_status st = mp_model_load(p, &m);
        T_CHECK(st == MP_OK || st == MP_ERR_FORMAT);
        T_CHECK((st == MP_OK) == (m != NULL));
        mp_model_free(m);
    }
    pbw_free(&model);
}

static void t_long_varint(void) {
    /* field 1 (ir_version) with an 11-byte varint */
    uint8_t b[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    expect_format_error("varint.onnx", b, sizeof b, "malformed");
    /* a length past the end */
    uint8_t c[] = {0x3a, 0x7f, 0x0a, 0x01};
    expect_format_error("len.onnx", c, sizeof c, "malformed");
}

static void t_raw_size_mismatch(void) {
    pbw g = {0};
    relu_graph(&g);
    float w[3] = {1, 2, 3};
    onx_tensor(&g, 5, "W", 1, 2, (const int64_t[]){4, 4}, w, sizeof w);
    mp_model *m = NULL;
    T_CHECK(load_graph(&g, "raw.onnx", &m) == MP_ERR_FORMAT);
    T_CHECK(strstr(mp_last_error(), "'W'") && strstr(mp_last_error(), "12 bytes"));
}

static void t_undefined_input(void) {
    pbw g = {0};
    relu_graph(&g);
    onx_node(&g, 1, "Add", "adder", "y,ghost", "z", NULL);
    mp_model *m = NULL;
    T_CHECK(load_graph(&g, "ghost.onnx", &m) == MP_ERR_FORMAT);
    T_CHECK(strstr(mp_last_error(), "'adder'") && strstr(mp_last_error(), "'ghost'"));
}

static void t_cycle(void) {
    pbw g = {0};
    relu_graph(&g);
    onx_node(&g, 1, "Add", "a1", "y,b", "a", NULL);
    onx_node(&g, 1, "Relu", "b1", "a", "b", NULL);
    mp_model *m = NULL;
    T_CHECK(load_graph(&g, "cycle.onnx", &m) == MP_ERR_FORMAT);
    T_CHECK(strstr(mp_last_error(), "cycle") != NULL);
}

static void t_duplicate_producer(void) {
    pbw g = {0};
    relu_graph(&g);
    onx_node(&g, 1, "Relu", "again", "x", "y", NULL);
    mp_model *m = NULL;
    T_CHECK(load_graph(&g, "dup.onnx", &m) == MP_ERR_FORMAT);
    T_CHECK(strstr(mp_last_error(), "'again'") && strstr(mp_last_error(), "'y'"));
}

static void ext_graph(pbw *g, const char *loc, const char *off, const char *len) {
    const char *syms[] = {"N", NULL};
    onx_node(g, 1, "MatMul", "mm", "x,W", "y", NULL);
    onx_value_info(g, 11, "x", 1, 2, (const int64_t[]){-1, 4}, syms);
    onx_value_info(g, 12, "y", 1, 2, (const int64_t[]){-1, 4}, syms);
    onx_tensor_external(g, 5, "W", 1, 2, (const int64_t[]){4, 4}, loc, off, len);
}

static void t_external_absent(void) {
    pbw g = {0};
    ext_graph(&g, "weights.bin", "0", "64");
    mp_model *m = NULL;
    T_OK(load_graph(&g, "ext_absent.onnx", &m));
    T_CHECK(m->weightless);
    /* information, not a warning (the bundled models are weightless) */
    T_EQ(mp_model_warning_count(m), 0);
    T_EQ_STR(mp_model_absent_weights(m), "weights.bin");
    mp_model_free(m);
}

static void t_external_refused(void) {
    const char *bad[] = {"/etc/passwd", "../outside.bin", "sub/../../x.bin"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pbw g = {0};
        ext_graph(&g, bad[i], "0", "64");
        mp_model *m = NULL;
        T_CHECK(load_graph(&g, "ext_bad.onnx", &m) == MP_ERR_FORMAT);
        T_CHECK(strstr(mp_last_error(), bad[i]) != NULL);
        T_CHECK(strstr(mp_last_error(), "'W'") != NULL);
    }
    /* a symlink inside the folder that leads outside it */
    unlink(mp_t_path("link.bin"));
    T_CHECK(symlink("/etc/hostname", mp_t_path("link.bin")) == 0);
    pbw g = {0};
    ext_graph(&g, "link.bin", "0", "64");
    mp_model *m = NULL;
    T_CHECK(load_graph(&g, "ext_link.onnx", &m) == MP_ERR_FORMAT);
    T_CHECK(strstr(mp_last_error(), "outside") != NULL);
}

static void t_external_range(void) {
    FILE *f = fopen(mp_t_path("short.bin"), "wb");
    fwrite("0123456789", 1, 10, f);
    fclose(f);
    pbw g = {0};
    ext_graph(&g, "short.bin", "0", "64");
    mp_model *m = NULL;
    T_CHECK(load_graph(&g, "ext_short.onnx", &m) == MP_ERR_FORMAT);
    T_CHECK(strstr(mp_last_error(), "past the end") != NULL);
    /* declared length that disagrees with the dims */
    pbw g2 = {0};
    ext_graph(&g2, "short.bin", "0", "8");
    T_CHECK(load_graph(&g2, "ext_len.onnx", &m) == MP_ERR_FORMAT);
    T_CHECK(strstr(mp_last_error(), "needs 64 bytes") != NULL);
}

static void t_reshape_from_initializer(void) {
    /* a shape constant stored inline: Reshape resolves from its contents */
    const char *syms[] = {NULL};
    pbw g = {0};
    int64_t shape[2] = {2, 8};
    onx_node(&g, 1, "Reshape", "r", "x,shape", "y", NULL);
    onx_value_info(&g, 11, "x", 1, 3, (const int64_t[]){2, 2, 4}, syms);
    onx_value_info(&g, 12, "y", 1, -1, NULL, NULL);
    onx_tensor(&g, 5, "shape", 7, 1, (const int64_t[]){2}, shape, sizeof shape);
    mp_model *m = NULL;
    T_OK(load_graph(&g, "reshape.onnx", &m));
    mp_profile *p = NULL;
    T_OK(mp_profile_static(m, &p));
    mp_value *y = &m->graph->values[mp_graph_find(m->graph, "y")];
    T_EQ(y->rank, 2);
    if (y->rank == 2) {
        T_EQ(y->dims[0], 2);
        T_EQ(y->dims[1], 8);
    }
    mp_profile_free(p);
    mp_model_free(m);
}

static void t_function_inlined(void) {
    /* a local function Block(x) = Relu(MatMul(x, W)) called twice */
    pbw fn = {0}, g = {0}, model = {0}, os = {0}, os2 = {0};
    pbw_str(&fn, 1, "Block");
    pbw_str(&fn, 10, "my.pkg");
    pbw_str(&fn, 4, "in0");
    pbw_str(&fn, 4, "in1");
    pbw_str(&fn, 5, "out0");
    onx_node(&fn, 7, "MatMul", "mm", "in0,in1", "t", NULL);
    onx_node(&fn, 7, "Relu", "act", "t", "out0", NULL);
    pbw_str(&os, 1, "");
    pbw_int(&os, 2, 15);
    pbw_msg(&fn, 9, &os);
    const char *syms[] = {NULL, NULL};
    pbw call1 = {0}, call2 = {0};
    (void)call1;
    (void)call2;
    pbw n1 = {0}, n2 = {0};
    pbw_str(&n1, 1, "x");
    pbw_str(&n1, 1, "W");
    pbw_str(&n1, 2, "h");
    pbw_str(&n1, 3, "/layer0/Block");
    pbw_str(&n1, 4, "Block");
    pbw_str(&n1, 7, "my.pkg");
    pbw_msg(&g, 1, &n1);
    pbw_str(&n2, 1, "h");
    pbw_str(&n2, 1, "W");
    pbw_str(&n2, 2, "y");
    pbw_str(&n2, 3, "/layer1/Block");
    pbw_str(&n2, 4, "Block");
    pbw_str(&n2, 7, "my.pkg");
    pbw_msg(&g, 1, &n2);
    onx_value_info(&g, 11, "x", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_value_info(&g, 12, "y", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_tensor_external(&g, 5, "W", 1, 2, (const int64_t[]){4, 4}, "absent.bin", NULL, NULL);
    onx_model(&model, 8, 15, &g);
    pbw_str(&os2, 1, "my.pkg");
    pbw_int(&os2, 2, 1);
    pbw_msg(&model, 8, &os2);
    pbw_msg(&model, 25, &fn);
    const char *p = mp_t_path("fn.onnx");
    pbw_write(&model, p);
    pbw_free(&model);
    mp_model *m = NULL;
    T_OK(mp_model_load(p, &m));
    if (!m) return;
    T_EQ(m->graph->n_nodes, 4);
    mp_profile *prof = NULL;
    T_OK(mp_profile_static(m, &prof));
    if (!prof) {
        mp_model_free(m);
        return;
    }
    /* MatMul [2,4]x[4,4]: 32 MACs each, twice */
    T_EQ_U64(prof->total.macs, 64);
    /* W is shared by both calls: 16 params, counted once */
    T_EQ_U64(prof->total.params, 16);
    int found = 0;
    for (int i = 0; i < m->n_modules; i++)
        if (m->modules[i].cls && strcmp(m->modules[i].cls, "Block") == 0) {
            found++;
            T_EQ_U64(prof->mods[i].params, 16);
            T_EQ_U64(prof->mods[i].macs, 32);
        }
    T_EQ(found, 2);
    mp_profile_free(prof);
    mp_model_free(m);
}

static void t_if_outer_scope(void) {
    /* If whose branches read the outer value x */
    const char *syms[] = {NULL, NULL};
    pbw then_g = {0}, else_g = {0}, attrs = {0}, g = {0};
    onx_node(&then_g, 1, "Relu", "t_relu", "x", "t_out", NULL);
    onx_value_info(&then_g, 12, "t_out", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_node(&else_g, 1, "Neg", "e_neg", "x", "e_out", NULL);
    onx_value_info(&else_g, 12, "e_out", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_attr_graph(&attrs, "then_branch", &then_g);
    onx_attr_graph(&attrs, "else_branch", &else_g);
    onx_node(&g, 1, "If", "branch", "c", "y", &attrs);
    onx_value_info(&g, 11, "x", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_value_info(&g, 11, "c", 9, 0, NULL, NULL);
    onx_value_info(&g, 12, "y", 1, 2, (const int64_t[]){2, 4}, syms);
    mp_model *m = NULL;
    T_OK(load_graph(&g, "if.onnx", &m));
    if (!m) return;
    mp_profile *p = NULL;
    T_OK(mp_profile_static(m, &p));
    if (p) {
        mp_value *y = &m->graph->values[mp_graph_find(m->graph, "y")];
        T_EQ(y->rank, 2);
        /* unknown condition: the costlier branch, 8 FLOPs, as a bound */
        T_EQ_U64(m->graph->nodes[0].cost.flops, 8);
        T_CHECK(m->graph->nodes[0].cost.flags & MP_COST_BOUND);
    }
    mp_profile_free(p);
    mp_model_free(m);
}

/* The consumer index (graph.h mp_uses): each input slot reading a value,
 * and a node whose subgraph reads it (If's branches read x, nested one
 * level more in the else branch); mp_sole_use; dropped when a node is
 * added, built again on demand. */
static void t_consumer_index(void) {
    const char *syms[] = {NULL, NULL};
    pbw then_g = {0}, else_g = {0}, inner = {0}, ia = {0}, attrs = {0}, g = {0};
    onx_node(&then_g, 1, "Relu", "t_relu", "x", "t_out", NULL);
    onx_value_info(&then_g, 12, "t_out", 1, 2, (const int64_t[]){2, 4}, syms);
    /* else: an If of its own whose branches read x */
    onx_node(&inner, 1, "Neg", "i_neg", "x", "i_out", NULL);
    onx_value_info(&inner, 12, "i_out", 1, 2, (const int64_t[]){2, 4}, syms);
    pbw inner2 = {0};
    onx_node(&inner2, 1, "Abs", "i_abs", "x", "i_out2", NULL);
    onx_value_info(&inner2, 12, "i_out2", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_attr_graph(&ia, "then_branch", &inner);
    onx_attr_graph(&ia, "else_branch", &inner2);
    onx_node(&else_g, 1, "If", "e_if", "c", "e_out", &ia);
    onx_value_info(&else_g, 12, "e_out", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_attr_graph(&attrs, "then_branch", &then_g);
    onx_attr_graph(&attrs, "else_branch", &else_g);
    onx_node(&g, 1, "Mul", "sq", "x,x", "x2", NULL);
    onx_node(&g, 1, "If", "branch", "c", "y", &attrs);
    onx_node(&g, 1, "Add", "sum", "x2,y", "z", NULL);
    onx_value_info(&g, 11, "x", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_value_info(&g, 11, "c", 9, 0, NULL, NULL);
    onx_value_info(&g, 12, "z", 1, 2, (const int64_t[]){2, 4}, syms);
    mp_model *m = NULL;
    T_OK(load_graph(&g, "index.onnx", &m));
    if (!m) return;
    mp_graph *gr = m->graph;
    int x = mp_graph_find(gr, "x"), x2 = mp_graph_find(gr, "x2"), y = mp_graph_find(gr, "y");
    int n;
    const int *u = mp_uses(gr, x, &n);
    /* Mul twice (two slots), If once (its branches, at any depth) */
    T_EQ(n, 3);
    if (n == 3) {
        T_EQ_STR(gr->nodes[u[0]].op, "Mul");
        T_EQ(u[1], u[0]);
        T_EQ_STR(gr->nodes[u[2]].op, "If");
    }
    T_EQ(gr->values[x].n_consumers, 2); /* input slots only */
    T_EQ(mp_sole_use(gr, x), -1);
    T_EQ_STR(gr->nodes[mp_sole_use(gr, x2)].op, "Add");
    T_EQ_STR(gr->nodes[mp_sole_use(gr, y)].op, "Add");
    T_EQ(mp_sole_use(gr, mp_graph_find(gr, "z")), -1); /* a graph output */
    /* the else branch's If reads x through its own branches */
    const mp_graph *eg = gr->nodes[u[2]].sub[0]->n_nodes == 1 && strcmp(gr->nodes[u[2]].sub[1]->nodes[0].op, "If") == 0
                             ? gr->nodes[u[2]].sub[1] : gr->nodes[u[2]].sub[0];
    int ex = mp_graph_find(eg, "x");
    T_CHECK(ex >= 0 && eg->use_start);
    if (ex >= 0 && eg->use_start) {
        mp_uses(eg, ex, &n);
        T_EQ(n, 1);
    }
    /* adding a node drops the index; building it again counts the new reader */
    int k = mp_graph_add_node(gr);
    T_CHECK(k >= 0 && gr->use_start == NULL);
    if (k >= 0) {
        mp_node *nn = &gr->nodes[k];
        nn->op = "Relu";
        nn->n_in = nn->n_out = 1;
        nn->in = mp_arena_alloc(&m->arena, sizeof(int));
        nn->out = mp_arena_alloc(&m->arena, sizeof(int));
        nn->in[0] = x2;
        nn->out[0] = mp_graph_value(gr, "r", 1);
        T_OK(mp_graph_index(gr));
        T_EQ(mp_sole_use(gr, x2), -1);
        mp_uses(gr, x2, &n);
        T_EQ(n, 2);
    }
    mp_model_free(m);
}

static void metadata(pbw *extra, const char *key, const char *value) {
    pbw kv = {0};
    pbw_str(&kv, 1, key);
    pbw_str(&kv, 2, value);
    pbw_msg(extra, 9, &kv);
}

static void t_dynamo_metadata(void) {
    /* the dynamo exporter's node metadata gives paths and classes */
    const char *syms[] = {NULL, NULL};
    pbw g = {0}, md1 = {0}, md2 = {0};
    metadata(&md1, "pkg.torch.onnx.name_scopes",
             "['', 'encoder', 'encoder.layers.0', 'encoder.layers.0.fc1', 'linear']");
    metadata(&md1, "pkg.torch.onnx.class_hierarchy",
             "['__main__.Net', 'models.Encoder', 'models.Block', 'torch.nn.modules.linear.Linear', "
             "'aten.linear.default']");
    onx_node(&g, 1, "MatMul", "node_linear", "x,W", "h", &md1);
    metadata(&md2, "pkg.torch.onnx.name_scopes", "['', 'relu']");
    metadata(&md2, "pkg.torch.onnx.class_hierarchy", "[\"__main__.Net\", \"aten.relu.default\"]");
    onx_node(&g, 1, "Relu", "node_relu", "h", "y", &md2);
    onx_value_info(&g, 11, "x", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_value_info(&g, 12, "y", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_tensor_external(&g, 5, "W", 1, 2, (const int64_t[]){4, 4}, "absent.bin", NULL, NULL);
    mp_model *m = NULL;
    T_OK(load_graph(&g, "dynamo.onnx", &m));
    if (!m) return;
    T_EQ(m->module_source, MP_MODSRC_METADATA);
    const mp_module *fc1 = &m->modules[m->graph->nodes[0].module];
    T_EQ_STR(fc1->path, "encoder.layers.0.fc1");
    T_EQ_STR(fc1->cls, "Linear");
    T_EQ_STR(fc1->name, "fc1");
    int blk = mp_strmap_get(&m->module_paths, "encoder.layers.0");
    T_CHECK(blk > 0);
    if (blk > 0) T_EQ_STR(m->modules[blk].cls, "Block");
    T_EQ_STR(m->modules[0].cls, "Net");
    /* the relu node's innermost module is the root */
    T_EQ(m->graph->nodes[1].module, 0);
    mp_model_free(m);
}

/* A StringStringEntryProto as field `field` of msg. */
static void kv_entry(pbw *msg, uint32_t field, const char *key, const char *value) {
    pbw kv = {0};
    pbw_str(&kv, 1, key);
    pbw_str(&kv, 2, value);
    pbw_msg(msg, field, &kv);
}

static void t_dynamo_kinds(void) {
    /* What the dynamo exporter declares decides parameter or buffer: W by
     * its value info (PARAMETER), B by its own metadata (BUFFER); Wt, a
     * weight the exporter's optimizer transposed, is undeclared but used by
     * enc.fc2, which owns a parameter in the graph signature; R, a table it
     * folded from rope's inv_freq, is used only by rope, which owns only a
     * buffer. Opset 23 and IR 11 load without a warning; the exporter's
     * artefact scope is no module. */
    static const char kind[] = "pkg.torch.export.graph_signature.InputSpec.kind";
    const char *syms[] = {NULL, NULL};
    pbw g = {0}, md[5] = {{0}};
    metadata(&md[0], "pkg.torch.onnx.name_scopes", "['', 'enc', 'enc.fc', 'linear']");
    metadata(&md[0], "pkg.torch.onnx.class_hierarchy",
             "['m.Net', 'm.Enc', 'torch.nn.modules.linear.Linear', 'aten.linear.default']");
    onx_node(&g, 1, "MatMul", "n0", "x,W", "h", &md[0]);
    metadata(&md[1], "pkg.torch.onnx.name_scopes", "['', 'enc', 'enc.fc2', 'linear_1']");
    onx_node(&g, 1, "MatMul", "n1", "h,Wt", "h2", &md[1]);
    metadata(&md[2], "pkg.torch.onnx.name_scopes", "['', 'rope', 'mul']");
    onx_node(&g, 1, "Mul", "n2", "h2,R", "h3", &md[2]);
    metadata(&md[3], "pkg.torch.onnx.name_scopes",
             "['_empty_nn_module_stack_from_metadata_hook', 'add']");
    onx_node(&g, 1, "Add", "n3", "h3,B", "h4", &md[3]);
    metadata(&md[4], "pkg.torch.onnx.name_scopes", "['', 'norm', 'rms_norm']");
    onx_node(&g, 1, "RMSNormalization", "n4", "h4,G", "y", &md[4]);
    onx_value_info(&g, 11, "x", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_value_info(&g, 12, "y", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_tensor_external(&g, 5, "W", 1, 2, (const int64_t[]){4, 4}, "absent.bin", NULL, NULL);
    onx_tensor_external(&g, 5, "Wt", 1, 2, (const int64_t[]){4, 4}, "absent.bin", NULL, NULL);
    onx_tensor_external(&g, 5, "R", 1, 1, (const int64_t[]){4}, "absent.bin", NULL, NULL);
    onx_tensor_external(&g, 5, "G", 1, 1, (const int64_t[]){4}, "absent.bin", NULL, NULL);
    pbw t = {0};
    pbw_int(&t, 1, 4);      /* dims */
    pbw_int(&t, 2, 1);      /* fp32 */
    pbw_str(&t, 8, "B");
    pbw_bytes(&t, 9, (const float[4]){0}, 16);
    kv_entry(&t, 16, kind, "BUFFER");
    pbw_msg(&g, 5, &t);
    pbw vi = {0};
    pbw_str(&vi, 1, "W");
    kv_entry(&vi, 4, kind, "PARAMETER");
    pbw_msg(&g, 13, &vi);
    kv_entry(&g, 16, "pkg.torch.export.ExportedProgram.graph_signature",
             "# inputs\np_enc_fc_weight: PARAMETER target='enc.fc.weight'\n"
             "p_enc_fc2_weight: PARAMETER target='enc.fc2.weight'\n"
             "p_norm_weight: PARAMETER target='norm.weight'\n"
             "b_rope_inv_freq: BUFFER target='rope.inv_freq' persistent=False\n"
             "x: USER_INPUT\n\n# outputs\ny: USER_OUTPUT\n");
    mp_model *m = NULL;
    T_OK(load_graph_at(&g, "dynamo_kinds.onnx", 11, 23, &m));
    if (!m) return;
    T_CHECK(m->has_signature);
    for (int i = 0; i < m->n_warnings; i++)
        T_CHECK(!strstr(m->warnings[i], "opset") && !strstr(m->warnings[i], "IR version"));
    T_EQ(m->graph->nodes[3].module, 0);
    for (int i = 0; i < m->n_modules; i++) T_CHECK(!strstr(m->modules[i].path, "_empty"));
    mp_profile *p = NULL;
    T_OK(mp_profile_static(m, &p));
    if (p) {
        T_EQ_U64(p->total.params, 16 + 16 + 4);
        T_EQ_U64(p->buffers, 2);
        T_EQ_U64(p->buffer_elems, 8);
        T_EQ_U64(p->buffer_bytes, 32);
        int rope = mp_strmap_get(&m->module_paths, "rope");
        T_CHECK(rope > 0);
        if (rope > 0) T_EQ_U64(p->mods[rope].params, 0);
        T_EQ(p->total.uncounted, 0);
    }
    mp_profile_free(p);
    mp_model_free(m);
}

/* docs/COUNTING.md, "Merged and folded parameters", by hand: a Conv into
 * which the optimizer folded bn1 (its fx node is the batch norm; weight
 * conv1.weight [4,3,3,3]; a bias val_7 [4] it gained), a LayerNorm ln1 with
 * its own scale and bias [6], a LayerNorm ln2 that took ln1's (merged: its
 * fx node names p_ln2_*), a Gemm fc whose zero bias was dropped. PyTorch:
 * conv1 108, bn1 4 + 4 (output channels), ln1 6 + 6, ln2 6 + 6, fc 15 + 3
 * (out_features) = 158; val_7 is a fold of bn1's counted parameters (+0).
 * The folded convolution's work is conv1's (7,776 MACs), bn1 keeps its
 * parameters and no MACs. */
static void t_dynamo_fx_merged_folded(void) {
    static const char sc[] = "pkg.torch.onnx.name_scopes", fxk[] = "pkg.torch.onnx.fx_node";
    static const char bn[] = "torch.ops.aten._native_batch_norm_legit_functional.default";
    const char *syms[] = {NULL, NULL};
    pbw g = {0}, md[4] = {{0}};
    char fx[512];
    metadata(&md[0], sc, "['', 'bn1', '_native_batch_norm_legit_functional']");
    snprintf(fx, sizeof fx, "%%bn : [num_users=3] = call_function[target=%s](args = (%%conv2d, "
             "%%p_bn1_weight, %%p_bn1_bias, %%b_bn1_running_mean, %%b_bn1_running_var, True, 0.1, "
             "1e-05), kwargs = {})", bn);
    metadata(&md[0], fxk, fx);
    onx_node(&g, 1, "Conv", "n0", "x,conv1.weight,val_7", "y", &md[0]);
    metadata(&md[1], sc, "['', 'ln1', 'layer_norm']");
    metadata(&md[1], fxk, "%layer_norm : [num_users=1] = call_function[target=torch.ops.aten."
             "layer_norm.default](args = (%y, [6], %p_ln1_weight, %p_ln1_bias, 1e-05), kwargs = {})");
    onx_node(&g, 1, "LayerNormalization", "n1", "y,ln1.weight,ln1.bias", "y1", &md[1]);
    metadata(&md[2], sc, "['', 'ln2', 'layer_norm_1']");
    metadata(&md[2], fxk, "%layer_norm_1 : [num_users=1] = call_function[target=torch.ops.aten."
             "layer_norm.default](args = (%y1, [6], %p_ln2_weight, %p_ln2_bias, 1e-05), kwargs = {})");
    onx_node(&g, 1, "LayerNormalization", "n2", "y1,ln1.weight,ln1.bias", "y2", &md[2]);
    metadata(&md[3], sc, "['', 'fc', 'linear']");
    metadata(&md[3], fxk, "%linear : [num_users=1] = call_function[target=torch.ops.aten.linear."
             "default](args = (%z, %p_fc_weight, %p_fc_bias), kwargs = {})");
    onx_attr_int(&md[3], "transB", 1);
    onx_node(&g, 1, "Gemm", "n3", "z,fc.weight", "w", &md[3]);
    onx_value_info(&g, 11, "x", 1, 4, (const int64_t[]){2, 3, 8, 8}, syms);
    onx_value_info(&g, 11, "z", 1, 2, (const int64_t[]){2, 5}, syms);
    onx_value_info(&g, 12, "y2", 1, 4, (const int64_t[]){2, 4, 6, 6}, syms);
    onx_value_info(&g, 12, "w", 1, 2, (const int64_t[]){2, 3}, syms);
    onx_tensor_external(&g, 5, "conv1.weight", 1, 4, (const int64_t[]){4, 3, 3, 3}, "absent.bin", NULL, NULL);
    onx_tensor_external(&g, 5, "val_7", 1, 1, (const int64_t[]){4}, "absent.bin", NULL, NULL);
    onx_tensor_external(&g, 5, "ln1.weight", 1, 1, (const int64_t[]){6}, "absent.bin", NULL, NULL);
    onx_tensor_external(&g, 5, "ln1.bias", 1, 1, (const int64_t[]){6}, "absent.bin", NULL, NULL);
    onx_tensor_external(&g, 5, "fc.weight", 1, 2, (const int64_t[]){3, 5}, "absent.bin", NULL, NULL);
    kv_entry(&g, 16, "pkg.torch.export.ExportedProgram.graph_signature",
             "# inputs\np_conv1_weight: PARAMETER target='conv1.weight'\n"
             "p_bn1_weight: PARAMETER target='bn1.weight'\np_bn1_bias: PARAMETER target='bn1.bias'\n"
             "p_ln1_weight: PARAMETER target='ln1.weight'\np_ln1_bias: PARAMETER target='ln1.bias'\n"
             "p_ln2_weight: PARAMETER target='ln2.weight'\np_ln2_bias: PARAMETER target='ln2.bias'\n"
             "p_fc_weight: PARAMETER target='fc.weight'\np_fc_bias: PARAMETER target='fc.bias'\n"
             "b_bn1_running_mean: BUFFER target='bn1.running_mean'\n"
             "b_bn1_running_var: BUFFER target='bn1.running_var'\n"
             "x: USER_INPUT\nz: USER_INPUT\n\n# outputs\ny2: USER_OUTPUT\nw: USER_OUTPUT\n");
    mp_model *m = NULL;
    mp_profile *p = NULL;
    T_OK(load_graph_at(&g, "dynamo_fx.onnx", 10, 20, &m));
    if (m) T_OK(mp_profile_static(m, &p));
    if (p) {
        T_EQ_U64(p->total.params, 158);
        T_EQ(p->params_by_role_n, 5);
        T_EQ_U64(p->params_by_role, 8 + 12 + 3);
        T_CHECK(!p->bn_folded);
        static const struct { const char *path; uint64_t params, macs; } want[] = {
            {"conv1", 108, 7776}, {"bn1", 8, 0}, {"ln1", 12, 0}, {"ln2", 12, 0}, {"fc", 18, 30}};
        for (size_t i = 0; i < MP_ARRAY_LEN(want); i++) {
            int id = mp_strmap_get(&m->module_paths, want[i].path);
            T_CHECK(id > 0);
            if (id <= 0) continue;
            T_EQ_U64(p->mods[id].params, want[i].params);
            T_EQ_U64(p->mods[id].macs, want[i].macs);
        }
        /* conv1 comes before bn1 under the model, as PyTorch lists them */
        int c = mp_strmap_get(&m->module_paths, "conv1"), b = mp_strmap_get(&m->module_paths, "bn1");
        T_CHECK(c > 0 && b > 0 && m->modules[c].next_sibling == b);
    }
    mp_profile_free(p);
    mp_model_free(m);
}

static void t_missing_file(void) {
    mp_model *m = NULL;
    T_CHECK(mp_model_load("/nonexistent/model.onnx", &m) == MP_ERR_IO);
    T_CHECK(strstr(mp_last_error(), "/nonexistent/model.onnx") != NULL);
}

MP_TESTS(load){
    {"dynamo_fx_merged_folded", t_dynamo_fx_merged_folded},
    {"minimal", t_minimal},
    {"not_onnx", t_not_onnx},
    {"truncated_every_offset", t_truncated},
    {"long_varint_and_length", t_long_varint},
    {"raw_size_mismatch", t_raw_size_mismatch},
    {"undefined_input", t_undefined_input},
    {"cycle", t_cycle},
    {"duplicate_producer", t_duplicate_producer},
    {"external_absent", t_external_absent},
    {"external_refused", t_external_refused},
    {"external_range", t_external_range},
    {"reshape_from_initializer", t_reshape_from_initializer},
    {"function_inlined", t_function_inlined},
    {"if_outer_scope", t_if_outer_scope},
    {"consumer_index", t_consumer_index},
    {"dynamo_metadata", t_dynamo_metadata},
    {"dynamo_kinds", t_dynamo_kinds},
    {"missing_file", t_missing_file},
};
MP_TESTS_END(load)
