/* Control flow: Loop and Scan costs roll up from their bodies. */
#include <stdlib.h>
#include <string.h>

#include "analyze/profile.h"
#include "graph/graph.h"
#include "pbw.h"
#include "tbuild.h"
#include "tcli.h"
#include "test.h"

static mp_model *load(pbw *g, const char *file) {
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/mp-ctl-XXXXXX");
        if (!mkdtemp(dir)) abort();
    }
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    pbw model = {0};
    onx_model(&model, 8, 16, g);
    pbw_write(&model, path);
    pbw_free(&model);
    mp_model *m = NULL;
    T_OK(mp_model_load(path, &m));
    return m;
}

/* body(i, cond, s) -> (cond, s + x): 8 FLOPs per iteration on [2,4] */
static void loop_body(pbw *body) {
    const char *syms[] = {NULL, NULL};
    onx_node(body, 1, "Add", "acc", "s_in,x", "s_out", NULL);
    onx_node(body, 1, "Identity", "keep", "cond_in", "cond_out", NULL);
    onx_value_info(body, 11, "i", 7, 0, NULL, NULL);
    onx_value_info(body, 11, "cond_in", 9, 0, NULL, NULL);
    onx_value_info(body, 11, "s_in", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_value_info(body, 12, "cond_out", 9, 0, NULL, NULL);
    onx_value_info(body, 12, "s_out", 1, 2, (const int64_t[]){2, 4}, syms);
}

static void t_loop_constant_trip(void) {
    const char *syms[] = {NULL, NULL};
    pbw body = {0}, attrs = {0}, g = {0};
    loop_body(&body);
    onx_attr_graph(&attrs, "body", &body);
    onx_node(&g, 1, "Loop", "loop", "M,,s0", "s_final", &attrs);
    int64_t five = 5;
    onx_tensor(&g, 5, "M", 7, 0, NULL, &five, sizeof five);
    onx_value_info(&g, 11, "x", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_value_info(&g, 11, "s0", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_value_info(&g, 12, "s_final", 1, 2, (const int64_t[]){2, 4}, syms);
    mp_model *m = load(&g, "loop.onnx");
    if (!m) return;
    mp_profile *p = NULL;
    T_OK(mp_profile_static(m, &p));
    if (p) {
        /* 8 FLOPs x 5 iterations = 40, exact: no condition input */
        T_EQ_U64(p->total.flops, 40);
        T_CHECK(!(m->graph->nodes[0].cost.flags & (MP_COST_BOUND | MP_COST_PER_ITER)));
    }
    mp_profile_free(p);
    mp_model_free(m);
}

static void t_loop_unknown_trip(void) {
    const char *syms[] = {NULL, NULL};
    pbw body = {0}, attrs = {0}, g = {0};
    loop_body(&body);
    onx_attr_graph(&attrs, "body", &body);
    onx_node(&g, 1, "Loop", "loop", "M,,s0", "s_final", &attrs);
    onx_value_info(&g, 11, "M", 7, 0, NULL, NULL);
    onx_value_info(&g, 11, "x", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_value_info(&g, 11, "s0", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_value_info(&g, 12, "s_final", 1, 2, (const int64_t[]){2, 4}, syms);
    mp_model *m = load(&g, "loop2.onnx");
    if (!m) return;
    mp_profile *p = NULL;
    T_OK(mp_profile_static(m, &p));
    if (p) {
        /* trip count unknown: one iteration's 8 FLOPs, flagged */
        T_EQ_U64(m->graph->nodes[0].cost.flops, 8);
        T_CHECK(m->graph->nodes[0].cost.flags & MP_COST_PER_ITER);
        /* and the report says so */
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        mp_report_options o;
        mp_report_options_default(&o);
        T_OK(mp_report_write(p, &o, f));
        fclose(f);
        T_CHECK(text && strstr(text, "per iteration:") &&
                strstr(text, "1 x Loop): trip count unknown, one iteration counted"));
        free(text);
        o.format = MP_FORMAT_JSON;
        f = open_memstream(&text, &len);
        T_OK(mp_report_write(p, &o, f));
        fclose(f);
        T_CHECK(text && strstr(text, "\"per_iteration\""));
        if (text) t_json_dump("profile", text, len);
        free(text);
    }
    mp_profile_free(p);
    mp_model_free(m);
}

static void t_scan_sequence(void) {
    /* Scan over x[7,3]: body s_out = s_in + x_t ([3]) : 3 FLOPs x 7 = 21 */
    const char *syms[] = {NULL, NULL};
    pbw body = {0}, attrs = {0}, g = {0};
    onx_node(&body, 1, "Add", "acc", "s_in,x_t", "s_out", NULL);
    onx_node(&body, 1, "Identity", "emit", "s_out", "y_t", NULL);
    onx_value_info(&body, 11, "s_in", 1, 1, (const int64_t[]){3}, syms);
    onx_value_info(&body, 11, "x_t", 1, 1, (const int64_t[]){3}, syms);
    onx_value_info(&body, 12, "s_out", 1, 1, (const int64_t[]){3}, syms);
    onx_value_info(&body, 12, "y_t", 1, 1, (const int64_t[]){3}, syms);
    onx_attr_graph(&attrs, "body", &body);
    onx_attr_int(&attrs, "num_scan_inputs", 1);
    onx_node(&g, 1, "Scan", "scan", "s0,x", "s_final,ys", &attrs);
    onx_value_info(&g, 11, "s0", 1, 1, (const int64_t[]){3}, syms);
    onx_value_info(&g, 11, "x", 1, 2, (const int64_t[]){7, 3}, syms);
    onx_value_info(&g, 12, "s_final", 1, 1, (const int64_t[]){3}, syms);
    onx_value_info(&g, 12, "ys", 1, 2, (const int64_t[]){7, 3}, syms);
    mp_model *m = load(&g, "scan.onnx");
    if (!m) return;
    mp_profile *p = NULL;
    T_OK(mp_profile_static(m, &p));
    if (p) {
        T_EQ_U64(p->total.flops, 21);
        mp_value *ys = &m->graph->values[mp_graph_find(m->graph, "ys")];
        T_EQ(ys->rank, 2);
        if (ys->rank == 2) {
            T_EQ(ys->dims[0], 7);
            T_EQ(ys->dims[1], 3);
        }
    }
    mp_profile_free(p);
    mp_model_free(m);
}

/* A sequence filled by a Loop, as torch.tensor_split(x, (1, 4), dim=1)
 * exports (torchvision's MViT): M = 2 passes, each slicing x [2,5,3] from
 * cuts[i] to cuts[i + 1] and inserting the piece; the last piece inserted
 * after the Loop. The body squares its piece (FLOPs by the pass: 2x1x3,
 * then 2x3x3: 6 + 18 = 24, where one pass for all would say 12 or 36).
 * SequenceAt 1 ([2,3,3]) times W [3,4]: 2x3x3x4 = 72 MACs. */
static mp_model *seqloop_model(void) {
    const char *syms[] = {NULL, NULL, NULL};
    pbw body = {0}, attrs = {0}, g = {0}, a_ax = {0}, a_split = {0}, a_new = {0};
    onx_node(&body, 1, "Gather", "lo", "cuts,i", "start", NULL);
    onx_node(&body, 1, "Add", "next", "i,one", "i1", NULL);
    onx_node(&body, 1, "Gather", "hi", "cuts,i1", "end", NULL);
    onx_node(&body, 1, "Slice", "piece", "x,start,end,axis1", "p", NULL);
    onx_node(&body, 1, "Mul", "square", "p,p", "p2", NULL);
    onx_node(&body, 1, "SequenceInsert", "ins", "s_in,p", "s_out", NULL);
    onx_node(&body, 1, "Identity", "keep", "cond_in", "cond_out", NULL);
    onx_value_info(&body, 11, "i", 7, 0, NULL, NULL);
    onx_value_info(&body, 11, "cond_in", 9, 0, NULL, NULL);
    onx_value_info(&body, 11, "s_in", 1, -1, NULL, NULL);
    onx_value_info(&body, 12, "cond_out", 9, 0, NULL, NULL);
    onx_value_info(&body, 12, "s_out", 1, -1, NULL, NULL);
    onx_attr_graph(&attrs, "body", &body);
    onx_node(&g, 1, "SequenceEmpty", "empty", "", "s0", NULL);
    onx_node(&g, 1, "Loop", "loop", "M,yes,s0", "s1", &attrs);
    onx_node(&g, 1, "Slice", "rest", "x,four,five,axis1", "last", NULL);
    onx_node(&g, 1, "SequenceInsert", "ins2", "s1,last", "s2", NULL);
    onx_node(&g, 1, "SequenceAt", "at1", "s2,one", "mid", NULL);
    onx_node(&g, 1, "MatMul", "mm", "mid,W", "y", NULL);
    onx_node(&g, 1, "SequenceAt", "atlast", "s2,minus1", "tail", NULL);
    onx_node(&g, 1, "SequenceLength", "len", "s2", "n", NULL);
    onx_attr_int(&a_ax, "axis", 1);
    onx_node(&g, 1, "ConcatFromSequence", "cat", "s2", "whole", &a_ax);
    onx_attr_int(&a_split, "axis", 1);
    onx_node(&g, 1, "SplitToSequence", "split", "x,two", "chunks", &a_split);
    onx_node(&g, 1, "SequenceAt", "at2", "chunks,two", "chunk2", NULL);
    onx_node(&g, 1, "SequenceErase", "erase", "s2,zero", "s3", NULL);
    onx_node(&g, 1, "SequenceLength", "len3", "s3", "n3", NULL);
    onx_attr_int(&a_new, "axis", 0);
    onx_attr_int(&a_new, "new_axis", 1);
    onx_node(&g, 1, "SequenceConstruct", "pair", "mid,mid", "pair_s", NULL);
    onx_node(&g, 1, "ConcatFromSequence", "stack", "pair_s", "stacked", &a_new);
    int64_t two = 2, one = 1, four = 4, five = 5, zero = 0, minus1 = -1, cuts[3] = {0, 1, 4};
    uint8_t yes = 1;
    float w[12] = {0};
    onx_tensor(&g, 5, "M", 7, 0, NULL, &two, sizeof two);
    onx_tensor(&g, 5, "yes", 9, 0, NULL, &yes, 1);
    onx_tensor(&g, 5, "one", 7, 0, NULL, &one, sizeof one);
    onx_tensor(&g, 5, "two", 7, 0, NULL, &two, sizeof two);
    onx_tensor(&g, 5, "zero", 7, 0, NULL, &zero, sizeof zero);
    onx_tensor(&g, 5, "minus1", 7, 0, NULL, &minus1, sizeof minus1);
    onx_tensor(&g, 5, "four", 7, 1, (const int64_t[]){1}, &four, sizeof four);
    onx_tensor(&g, 5, "five", 7, 1, (const int64_t[]){1}, &five, sizeof five);
    onx_tensor(&g, 5, "axis1", 7, 1, (const int64_t[]){1}, &one, sizeof one);
    onx_tensor(&g, 5, "cuts", 7, 1, (const int64_t[]){3}, cuts, sizeof cuts);
    onx_tensor(&g, 5, "W", 1, 2, (const int64_t[]){3, 4}, w, sizeof w);
    onx_value_info(&g, 11, "x", 1, 3, (const int64_t[]){2, 5, 3}, syms);
    onx_value_info(&g, 12, "y", 1, -1, NULL, NULL);
    onx_value_info(&g, 12, "tail", 1, -1, NULL, NULL);
    onx_value_info(&g, 12, "n", 7, -1, NULL, NULL);
    onx_value_info(&g, 12, "whole", 1, -1, NULL, NULL);
    onx_value_info(&g, 12, "chunk2", 1, -1, NULL, NULL);
    onx_value_info(&g, 12, "n3", 7, -1, NULL, NULL);
    onx_value_info(&g, 12, "stacked", 1, -1, NULL, NULL);
    return load(&g, "seqloop.onnx");
}

static void t_loop_fills_sequence(void) {
    mp_model *m = seqloop_model();
    if (!m) return;
    mp_profile *p = NULL;
    T_OK(mp_profile_static(m, &p));
    if (p) {
        T_EQ_U64(p->total.macs, 72);
        mp_node *loop = &m->graph->nodes[1];
        T_EQ_U64(loop->cost.flops, 6 + 18 + 2); /* the squares, and the counter's Add per pass */
        T_CHECK(!(loop->cost.flags & (MP_COST_BOUND | MP_COST_PER_ITER | MP_COST_UNKNOWN)));
        T_EQ(p->total.uncounted, 0);
        T_EQ(p->total.unknown, 0);
        struct {
            const char *name;
            int rank;
            int64_t d[4];
        } want[] = {{"mid", 3, {2, 3, 3}},   {"tail", 3, {2, 1, 3}},  {"whole", 3, {2, 5, 3}},
                    {"chunk2", 3, {2, 1, 3}}, {"stacked", 4, {2, 2, 3, 3}}, {"n", 0, {0}}};
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            const mp_value *v = &m->graph->values[mp_graph_find(m->graph, want[i].name)];
            T_EQ(v->rank, want[i].rank);
            if (v->rank == want[i].rank)
                for (int d = 0; d < v->rank; d++) T_EQ(v->dims[d], want[i].d[d]);
        }
        const mp_value *n = &m->graph->values[mp_graph_find(m->graph, "n")];
        const mp_value *n3 = &m->graph->values[mp_graph_find(m->graph, "n3")];
        T_CHECK(n->kn == 1 && n->iv && n->iv[0] == 3);
        T_CHECK(n3->kn == 1 && n3->iv && n3->iv[0] == 2);
        /* bytes into the sequence: each piece's, 4 x (6 + 18) and 4 x 6 */
        T_EQ_U64(m->graph->nodes[3].cost.bytes_read, 4 * (6 + 18) + 4 * 6);
    }
    mp_profile_free(p);
    mp_model_free(m);
}

/* PyTorch 1.13's export (opset 17) of
 *   a, b, c = torch.tensor_split(x, (1, 4), dim=1); d = torch.tensor_split(x, 3, dim=1)
 *   return w1(a), w2(b), c * 2, w1(d[2])
 * on x [2,7,3], w1 Linear(3, 4), w2 Linear(3, 5) without bias: a Loop
 * filling a sequence, and SplitToSequence. By hand: [2,1,3] x [3,4] = 24,
 * [2,3,3] x [3,5] = 90, d[2] is [2,2,3] (7 = 3 + 2 + 2): x [3,4] = 48. */
static void t_tensor_split_export(void) {
    mp_model *m = NULL;
    mp_profile *p = tb_prof_file("tests/corpus/seeds/tensor_split_loop.onnx", &m);
    if (p) {
        T_EQ_U64(p->total.macs, 24 + 90 + 48);
        T_EQ(p->total.uncounted, 0);
        T_EQ(p->total.unknown, 0);
    }
    mp_profile_free(p);
    mp_model_free(m);
}

/* The same model run: the pieces the Loop inserts come back whole
 * (ConcatFromSequence is x), SequenceAt(-1) and SplitToSequence's third
 * element are x[:, 4:5], the lengths 3 and 2, and the stack of the middle
 * piece twice its values twice. */
static void t_sequence_run(void) {
    mp_model *m = seqloop_model();
    if (!m) return;
    mp_profile *p = NULL;
    T_OK(mp_profile_static(m, &p));
    mp_run_options o;
    mp_run_options_default(&o);
    o.threads = 1;
    mp_exec *pl = NULL;
    T_OK(mp_exec_create(p, &o, &pl));
    float x[30];
    for (int i = 0; i < 30; i++) x[i] = (float)i;
    if (pl) T_OK(mp_exec_set_input(pl, "x", MP_DT_FLOAT, 3, (const int64_t[]){2, 5, 3}, x, sizeof x));
    if (pl) T_OK(mp_exec_run(pl));
    for (int i = 0; pl && i < mp_exec_output_count(pl); i++) {
        const char *name;
        int dt, rank;
        const int64_t *dims;
        const void *data;
        T_OK(mp_exec_output(pl, i, &name, &dt, &rank, &dims, &data));
        const float *f = data;
        const int64_t *n = data;
        if (!strcmp(name, "whole")) {
            T_EQ(mp_dims_product(dims, rank), 30);
            for (int j = 0; j < 30; j++) T_CHECK(f[j] == x[j]);
        } else if (!strcmp(name, "tail") || !strcmp(name, "chunk2")) {
            T_EQ(mp_dims_product(dims, rank), 6);
            for (int b = 0; b < 2; b++)
                for (int c = 0; c < 3; c++) T_CHECK(f[b * 3 + c] == x[b * 15 + 4 * 3 + c]);
        } else if (!strcmp(name, "n")) {
            T_EQ(n[0], 3);
        } else if (!strcmp(name, "n3")) {
            T_EQ(n[0], 2);
        } else if (!strcmp(name, "stacked")) {
            T_EQ(mp_dims_product(dims, rank), 36);
            for (int k = 0; k < 2; k++)
                for (int b = 0; b < 2; b++)
                    for (int j = 0; j < 9; j++) T_CHECK(f[k * 18 + b * 9 + j] == x[b * 15 + 3 + j]);
        }
    }
    mp_exec_free(pl);
    mp_profile_free(p);
    mp_model_free(m);
}

/* A graph output that is a sequence: the run gives tensors only, and says
 * so naming it. */
static void t_sequence_output_refused(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 1, TB_DIMS(3));
    tb_node(m, "SequenceConstruct", "x,x", "s");
    tb_output(m, "s");
    mp_profile *p = tb_prof(m);
    mp_run_options o;
    mp_run_options_default(&o);
    mp_exec *pl = NULL;
    T_EQ(mp_exec_create(p, &o, &pl), MP_ERR_UNSUPPORTED);
    T_CHECK(strstr(mp_last_error(), "output 's' is a sequence") != NULL);
    mp_profile_free(p);
    mp_model_free(m);
}

/* PyTorch 1.13's export (opset 17) of nn.EmbeddingBag(100, 16, mode="sum")
 * on indices [4,5] (4 bags of 5 at offsets the export computes): a Loop
 * whose body slices the bag by the iteration number. One pass for all
 * leaves the bag's size unknown; pass by pass each bag is [5,16], its
 * ReduceSum 80 FLOPs (the input's elements): 4 x 80 = 320. */
static void t_embedding_bag_passes(void) {
    mp_model *m = NULL;
    mp_profile *p = tb_prof_file("tests/corpus/seeds/embedding_bag_fixed.onnx", &m);
    if (p) {
        T_EQ_U64(p->total.flops, 4 * 5 * 16);
        T_EQ(p->total.unknown, 0);
    }
    mp_profile_free(p);
    mp_model_free(m);
}

/* Malformed Loops that carry a sequence: fewer outputs than carried
 * values, a carried input left out. An error or unknown figures, never a
 * read past the node's arrays (ASan runs this). */
static void t_loop_sequence_malformed(void) {
    for (int variant = 0; variant < 2; variant++) {
        pbw body = {0}, attrs = {0}, g = {0};
        onx_node(&body, 1, "SequenceInsert", "ins", "s_in,x", "s_out", NULL);
        onx_node(&body, 1, "Identity", "keep", "cond_in", "cond_out", NULL);
        onx_node(&body, 1, "Identity", "pass", "t_in", "t_out", NULL);
        onx_value_info(&body, 11, "i", 7, 0, NULL, NULL);
        onx_value_info(&body, 11, "cond_in", 9, 0, NULL, NULL);
        onx_value_info(&body, 11, "s_in", 1, -1, NULL, NULL);
        onx_value_info(&body, 11, "t_in", 1, -1, NULL, NULL);
        onx_value_info(&body, 12, "cond_out", 9, 0, NULL, NULL);
        onx_value_info(&body, 12, "s_out", 1, -1, NULL, NULL);
        onx_value_info(&body, 12, "t_out", 1, -1, NULL, NULL);
        onx_attr_graph(&attrs, "body", &body);
        onx_node(&g, 1, "SequenceEmpty", "empty", "", "s0", NULL);
        /* two carried values: one output for them; the second left out */
        onx_node(&g, 1, "Loop", "loop", variant ? "M,yes,s0," : "M,yes,s0,x", variant ? "s1,t1" : "s1", &attrs);
        int64_t two = 2;
        uint8_t yes = 1;
        onx_tensor(&g, 5, "M", 7, 0, NULL, &two, sizeof two);
        onx_tensor(&g, 5, "yes", 9, 0, NULL, &yes, 1);
        onx_value_info(&g, 11, "x", 1, 1, (const int64_t[]){3}, NULL);
        onx_value_info(&g, 12, "s1", 1, -1, NULL, NULL);
        mp_model *m = load(&g, variant ? "seqbad1.onnx" : "seqbad0.onnx");
        if (!m) continue;
        mp_profile *p = NULL;
        mp_status st = mp_profile_static(m, &p);
        T_CHECK(st == MP_OK || st == MP_ERR_SHAPE);
        mp_profile_free(p);
        mp_model_free(m);
    }
}

MP_TESTS(ops_control){
    {"loop_constant_trip", t_loop_constant_trip},
    {"loop_unknown_trip", t_loop_unknown_trip},
    {"loop_fills_sequence", t_loop_fills_sequence},
    {"tensor_split_export", t_tensor_split_export},
    {"sequence_run", t_sequence_run},
    {"sequence_output_refused", t_sequence_output_refused},
    {"embedding_bag_passes", t_embedding_bag_passes},
    {"loop_sequence_malformed", t_loop_sequence_malformed},
    {"scan_sequence", t_scan_sequence},
};
MP_TESTS_END(ops_control)
