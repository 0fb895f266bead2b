/* Control flow: Loop and Scan costs roll up from their bodies. */
#include <stdlib.h>

#include "analyze/profile.h"
#include "graph/graph.h"
#include "pbw.h"
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

MP_TESTS(ops_control){
    {"loop_constant_trip", t_loop_constant_trip},
    {"loop_unknown_trip", t_loop_unknown_trip},
    {"scan_sequence", t_scan_sequence},
};
MP_TESTS_END(ops_control)
