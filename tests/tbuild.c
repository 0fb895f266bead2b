#include "tbuild.h"
#include "test.h"
#include "load/load.h"

#include <stdio.h>
#include <stdlib.h>

static mp_arena *A(mp_model *m) { return &m->arena; }

mp_model *tb_new(int opset) {
    mp_model *m = mp_model_create();
    if (!m) abort();
    m->opsets = mp_arena_calloc(A(m), 1, sizeof *m->opsets);
    m->opsets[0].domain = "";
    m->opsets[0].version = opset;
    m->n_opsets = 1;
    m->path = mp_arena_strdup(A(m), "test.onnx");
    return m;
}

int64_t tb_sym(mp_model *m, const char *name) {
    return MP_DIM_OF_SYM(mp_model_symbol(m, name, strlen(name)));
}

static int tb_value_typed(mp_model *m, const char *name, int dtype, int rank,
                          const int64_t *dims) {
    mp_graph *g = m->graph;
    int v = mp_graph_value(g, name, strlen(name));
    mp_value *val = &g->values[v];
    val->decl_dtype = dtype;
    val->decl_rank = rank;
    if (rank > 0) {
        val->decl_dims = mp_arena_calloc(A(m), (size_t)rank, sizeof(int64_t));
        memcpy(val->decl_dims, dims, sizeof(int64_t) * (size_t)rank);
    }
    return v;
}

int tb_input(mp_model *m, const char *name, int dtype, int rank, const int64_t *dims) {
    int v = tb_value_typed(m, name, dtype, rank, dims);
    mp_graph *g = m->graph;
    g->values[v].flags |= MP_VAL_INPUT;
    for (int i = 0; i < rank; i++)
        if (dims[i] < MP_DIM_ANON) m->syms[MP_DIM_SYM(dims[i])].on_input = true;
    int *ni = mp_arena_calloc(A(m), (size_t)g->n_inputs + 1, sizeof(int));
    if (g->n_inputs) memcpy(ni, g->inputs, sizeof(int) * (size_t)g->n_inputs);
    ni[g->n_inputs++] = v;
    g->inputs = ni;
    return v;
}

int tb_weight(mp_model *m, const char *name, int dtype, int rank, const int64_t *dims) {
    int v = tb_value_typed(m, name, dtype, rank, dims);
    mp_value *val = &m->graph->values[v];
    mp_tensor *t = mp_arena_calloc(A(m), 1, sizeof *t);
    t->name = val->name;
    t->dtype = dtype;
    t->rank = rank;
    t->dims = val->decl_dims;
    t->numel = mp_dims_product(dims, rank);
    t->loc = MP_DATA_NONE;
    val->init = t;
    val->flags |= MP_VAL_INIT;
    return v;
}

int tb_const_i(mp_model *m, const char *name, int dtype, int rank, const int64_t *dims,
               const int64_t *iv) {
    int v = tb_weight(m, name, dtype, rank, dims);
    mp_value *val = &m->graph->values[v];
    int64_t n = mp_dims_product(dims, rank);
    val->iv = mp_arena_calloc(A(m), (size_t)(n ? n : 1), sizeof(int64_t));
    memcpy(val->iv, iv, sizeof(int64_t) * (size_t)n);
    val->kn = n;
    return v;
}

int tb_const_f(mp_model *m, const char *name, int dtype, int rank, const int64_t *dims,
               const double *fv) {
    int v = tb_weight(m, name, dtype, rank, dims);
    mp_value *val = &m->graph->values[v];
    int64_t n = mp_dims_product(dims, rank);
    val->fv = mp_arena_calloc(A(m), (size_t)(n ? n : 1), sizeof(double));
    memcpy(val->fv, fv, sizeof(double) * (size_t)n);
    val->kn = n;
    return v;
}

static int tb_split(mp_model *m, const char *list, int **out) {
    int n = 0, cap = 0;
    int *arr = NULL;
    if (!*list) {
        *out = NULL;
        return 0;
    }
    const char *p = list;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        arr = mp_arena_grow(A(m), arr, sizeof *arr, &cap, n + 1);
        arr[n++] = len ? mp_graph_value(m->graph, p, len) : -1;
        if (!e) break;
        p = e + 1;
    }
    *out = arr;
    return n;
}

int tb_node_d(mp_model *m, const char *domain, const char *op, const char *ins,
              const char *outs) {
    mp_graph *g = m->graph;
    int *in, *out;
    int n_in = tb_split(m, ins, &in);
    int n_out = tb_split(m, outs, &out);
    int k = mp_graph_add_node(g);
    mp_node *n = &g->nodes[k];
    n->op = mp_arena_strdup(A(m), op);
    n->domain = mp_arena_strdup(A(m), domain);
    n->name = mp_arena_printf(A(m), "%s_%d", op, k);
    n->in = in;
    n->n_in = n_in;
    n->out = out;
    n->n_out = n_out;
    for (int i = 0; i < n_out; i++)
        if (out[i] >= 0) g->values[out[i]].producer = k;
    return k;
}

int tb_node(mp_model *m, const char *op, const char *ins, const char *outs) {
    return tb_node_d(m, "", op, ins, outs);
}

void tb_name(mp_model *m, int node, const char *name) {
    m->graph->nodes[node].name = mp_arena_strdup(A(m), name);
}

static mp_attr *tb_attr(mp_model *m, int node, const char *name, int type) {
    mp_node *n = &m->graph->nodes[node];
    mp_attr *na = mp_arena_calloc(A(m), (size_t)n->n_attr + 1, sizeof *na);
    if (n->n_attr) memcpy(na, n->attr, sizeof *na * (size_t)n->n_attr);
    n->attr = na;
    mp_attr *a = &na[n->n_attr++];
    a->name = mp_arena_strdup(A(m), name);
    a->type = type;
    return a;
}

void tb_attr_i(mp_model *m, int node, const char *name, int64_t v) {
    tb_attr(m, node, name, MP_ATTR_INT)->i = v;
}
void tb_attr_f(mp_model *m, int node, const char *name, double v) {
    tb_attr(m, node, name, MP_ATTR_FLOAT)->f = v;
}
void tb_attr_s(mp_model *m, int node, const char *name, const char *s) {
    mp_attr *a = tb_attr(m, node, name, MP_ATTR_STRING);
    a->s = mp_arena_strdup(A(m), s);
    a->s_len = strlen(s);
}
void tb_attr_ints(mp_model *m, int node, const char *name, int n, const int64_t *v) {
    mp_attr *a = tb_attr(m, node, name, MP_ATTR_INTS);
    a->ints = mp_arena_calloc(A(m), (size_t)(n ? n : 1), sizeof(int64_t));
    if (n) memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
    a->n = n;
}
void tb_attr_strings(mp_model *m, int node, const char *name, int n, const char *const *v) {
    mp_attr *a = tb_attr(m, node, name, MP_ATTR_STRINGS);
    const char **l = mp_arena_calloc(A(m), (size_t)(n ? n : 1), sizeof *l);
    for (int i = 0; i < n; i++) l[i] = mp_arena_strdup(A(m), v[i]);
    a->strings = l;
    a->n = n;
}
void tb_attr_floats(mp_model *m, int node, const char *name, int n, const double *v) {
    mp_attr *a = tb_attr(m, node, name, MP_ATTR_FLOATS);
    a->floats = mp_arena_calloc(A(m), (size_t)(n ? n : 1), sizeof(double));
    if (n) memcpy(a->floats, v, sizeof(double) * (size_t)n);
    a->n = n;
}

void tb_output(mp_model *m, const char *name) {
    mp_graph *g = m->graph;
    int v = mp_graph_value(g, name, strlen(name));
    g->values[v].flags |= MP_VAL_OUTPUT;
    int *no = mp_arena_calloc(A(m), (size_t)g->n_outputs + 1, sizeof(int));
    if (g->n_outputs) memcpy(no, g->outputs, sizeof(int) * (size_t)g->n_outputs);
    no[g->n_outputs++] = v;
    g->outputs = no;
}

void tb_opset(mp_model *m, const char *domain, int version) {
    mp_opset *o = mp_arena_calloc(&m->arena, (size_t)m->n_opsets + 1, sizeof *o);
    if (!o) abort();
    memcpy(o, m->opsets, sizeof *o * (size_t)m->n_opsets);
    o[m->n_opsets].domain = mp_arena_strdup(&m->arena, domain);
    o[m->n_opsets].version = version;
    m->opsets = o;
    m->n_opsets++;
}

bool tb_train(mp_model *m, int node, uint32_t rg, mp_bwd *t) {
    mp_node *n = &m->graph->nodes[node];
    memset(t, 0, sizeof *t);
    t->rg = rg;
    t->fwd = &n->cost;
    if (!n->desc || !n->desc->train) return false;
    mp_ctx cx = {m, m->graph, n, node, NULL};
    n->desc->train(&cx, t);
    return true;
}

mp_status tb_profile(mp_model *m, mp_profile **p) {
    *p = NULL;
    mp_status st = mp_model_finish(m);
    if (st) return st;
    return mp_profile_static(m, p);
}

mp_value *tb_val(mp_model *m, const char *name) {
    int v = mp_graph_find(m->graph, name);
    return v < 0 ? NULL : &m->graph->values[v];
}

mp_node *tb_nodep(mp_model *m, int node) { return &m->graph->nodes[node]; }

const char *tb_shape(mp_model *m, const char *name) {
    mp_value *v = tb_val(m, name);
    if (!v) return "(no value)";
    if (v->rank < 0) return "?rank";
    char buf[512];
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < v->rank && o < sizeof buf - 32; i++) {
        if (v->dims[i] >= 0)
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%lld", i ? "x" : "",
                                  (long long)v->dims[i]);
        else
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i ? "x" : "",
                                  m->syms[MP_DIM_SYM(v->dims[i])].name);
    }
    if (v->rank == 0) snprintf(buf, sizeof buf, "scalar");
    return mp_arena_strdup(A(m), buf);
}

mp_profile *tb_prof(mp_model *m) {
    mp_profile *p = NULL;
    T_OK(tb_profile(m, &p));
    return p;
}

mp_profile *tb_prof_file(const char *path, mp_model **m) {
    mp_profile *p = NULL;
    *m = NULL;
    T_OK(mp_model_load(path, m));
    if (*m) T_OK(mp_profile_static(*m, &p));
    return p;
}

mp_model *tb_mlp2(int64_t b, int64_t in, int64_t hid, int64_t out) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 2, TB_DIMS(b, in));
    tb_weight(m, "W1", MP_DT_FLOAT, 2, TB_DIMS(in, hid));
    tb_weight(m, "W2", MP_DT_FLOAT, 2, TB_DIMS(hid, out));
    tb_node(m, "MatMul", "x,W1", "h");
    tb_node(m, "Relu", "h", "r");
    tb_node(m, "MatMul", "r,W2", "y");
    tb_output(m, "y");
    return m;
}

void tb_done(mp_model *m, mp_profile *p) {
    mp_profile_free(p);
    mp_model_free(m);
}

void tb_expect_shape_error(mp_model *m, const char *name) {
    mp_profile *p = NULL;
    T_EQ(tb_profile(m, &p), MP_ERR_SHAPE);
    T_CHECK(p == NULL);
    T_CHECK(strstr(mp_last_error(), name) != NULL);
    mp_model_free(m);
}

/* Value `name` has exactly the n known contents `want`. */
static mp_value *tb_known(mp_model *m, const char *name, int64_t n, bool ints) {
    mp_value *v = tb_val(m, name);
    T_CHECK(v != NULL);
    if (!v) return NULL;
    T_EQ(v->kn, n);
    bool have = ints ? v->iv != NULL : v->fv != NULL;
    if (v->kn != n || !have) {
        T_CHECK(have);
        return NULL;
    }
    return v;
}

void tb_check_ints(mp_model *m, const char *name, int64_t n, const int64_t *want) {
    mp_value *v = tb_known(m, name, n, true);
    for (int64_t i = 0; v && i < n; i++)
        if (v->iv[i] != want[i])
            mp_t_fail(__FILE__, __LINE__, "%s[%lld] == %lld, expected %lld", name, (long long)i,
                      (long long)v->iv[i], (long long)want[i]);
}

void tb_check_floats(mp_model *m, const char *name, int64_t n, const double *want) {
    mp_value *v = tb_known(m, name, n, false);
    for (int64_t i = 0; v && i < n; i++)
        if (v->fv[i] != want[i])
            mp_t_fail(__FILE__, __LINE__, "%s[%lld] == %g, expected %g", name, (long long)i,
                      v->fv[i], want[i]);
}

void tb_softcap_attention(mp_model *m) {
    tb_input(m, "q", MP_DT_FLOAT, 4, TB_DIMS(1, 2, 6, 8));
    tb_input(m, "k", MP_DT_FLOAT, 4, TB_DIMS(1, 2, 6, 8));
    tb_input(m, "v", MP_DT_FLOAT, 4, TB_DIMS(1, 2, 6, 8));
    tb_const_f(m, "scaling", MP_DT_FLOAT, 0, NULL, (const double[]){0.25});
    tb_const_f(m, "cap", MP_DT_FLOAT, 0, NULL, (const double[]){50.0});
    tb_scores(m);
    tb_node(m, "Mul", "s,scaling", "s1");
    tb_node(m, "Div", "s1,cap", "s2");
    tb_node(m, "Tanh", "s2", "s3");
    tb_node(m, "Mul", "s3,cap", "s4");
    tb_attend(m, "s4");
}

void tb_scores(mp_model *m) {
    int kt = tb_node(m, "Transpose", "k", "kt");
    tb_attr_ints(m, kt, "perm", 4, TB_DIMS(0, 1, 3, 2));
    tb_node(m, "MatMul", "q,kt", "s");
}

void tb_attend(mp_model *m, const char *in) {
    int sm = tb_node(m, "Softmax", in, "p");
    tb_attr_i(m, sm, "axis", -1);
    tb_node(m, "MatMul", "p,v", "y");
    tb_output(m, "y");
}
