#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- dtypes ---- */

static const char *const mp__dtype_names[] = {
#define MP__DT(id, name, bits) name,
    MP_DTYPE_LIST(MP__DT)
#undef MP__DT
};
_Static_assert(MP_ARRAY_LEN(mp__dtype_names) == MP_DT_COUNT, "dtype table out of step");

const unsigned char mp_dtype_bits_table[MP_DT_COUNT] = {
#define MP__DT_BITS(id, name, bits) bits,
    MP_DTYPE_LIST(MP__DT_BITS)
#undef MP__DT_BITS
};

const char *mp_dtype_name(int dt) {
    return (dt >= 0 && dt < MP_DT_COUNT) ? mp__dtype_names[dt] : "?";
}

bool mp_dtype_is_float(int dt) {
    switch (dt) {
    case MP_DT_FLOAT: case MP_DT_FLOAT16: case MP_DT_DOUBLE: case MP_DT_BFLOAT16:
    case MP_DT_FLOAT8E4M3FN: case MP_DT_FLOAT8E4M3FNUZ: case MP_DT_FLOAT8E5M2:
    case MP_DT_FLOAT8E5M2FNUZ: case MP_DT_FLOAT4E2M1: case MP_DT_FLOAT8E8M0:
        return true;
    default:
        return false;
    }
}

bool mp_dtype_is_int(int dt) {
    switch (dt) {
    case MP_DT_UINT8: case MP_DT_INT8: case MP_DT_UINT16: case MP_DT_INT16:
    case MP_DT_INT32: case MP_DT_INT64: case MP_DT_BOOL: case MP_DT_UINT32:
    case MP_DT_UINT64: case MP_DT_UINT4: case MP_DT_INT4:
        return true;
    default:
        return false;
    }
}

/* ---- graphs ---- */

mp_graph *mp_graph_new(struct mp_model *m, mp_graph *parent) {
    mp_graph *g = mp_arena_alloc(&m->arena, sizeof *g);
    if (!g) return NULL;
    g->model = m;
    g->parent = parent;
    g->parent_node = -1;
    g->name = "";
    return g;
}

void mp_graph_release(mp_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++)
        for (int s = 0; s < g->nodes[i].n_sub; s++) mp_graph_release(g->nodes[i].sub[s]);
    mp_strmap_free(&g->names);
    free(g->patterns);
    g->patterns = NULL;
}

/* ---- the consumer index ---- */

/* The values of g that subgraph `sub` (of a node of g, at any depth)
 * reads from g: each outer reference followed up to g. fn(ud, v) per
 * reference (a value may come more than once). */
static void mp__outer_reads(const mp_graph *sub, const mp_graph *g, void (*fn)(void *, int), void *ud) {
    for (int i = 0; i < sub->n_values; i++) {
        const mp_value *v = &sub->values[i];
        if (!(v->flags & MP_VAL_OUTER) || v->outer < 0) continue;
        const mp_graph *at = sub->parent;
        int idx = v->outer;
        while (at && at != g && idx >= 0 && idx < at->n_values && (at->values[idx].flags & MP_VAL_OUTER)) {
            idx = at->values[idx].outer;
            at = at->parent;
        }
        if (at == g && idx >= 0 && idx < g->n_values) fn(ud, idx);
    }
    for (int k = 0; k < sub->n_nodes; k++)
        for (int s = 0; s < sub->nodes[k].n_sub; s++) mp__outer_reads(sub->nodes[k].sub[s], g, fn, ud);
}

typedef struct mp__idx {
    mp_graph *g;
    int *mark;      /* per value: the last node that counted it as an outer read */
    int node;
    bool fill;
} mp__idx;

static void mp__idx_outer(void *ud, int v) {
    mp__idx *x = ud;
    if (x->mark[v] == x->node) return; /* once per node */
    x->mark[v] = x->node;
    mp_graph *g = x->g;
    if (x->fill) g->use_node[g->use_start[v + 1]++] = x->node;
    else g->use_start[v + 1]++;
}

mp_status mp_graph_index(mp_graph *g) {
    int nv = g->n_values;
    g->use_start = g->use_node = NULL;
    int *start = mp_arena_calloc(&g->model->arena, (size_t)nv + 2, sizeof(int));
    int *mark = malloc(sizeof(int) * (size_t)(nv ? nv : 1));
    if (!start || !mark) {
        free(mark);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int v = 0; v < nv; v++) {
        g->values[v].n_consumers = 0;
        mark[v] = -1;
    }
    mp__idx x = {g, mark, -1, false};
    g->use_start = start;
    /* counts in start[v + 1], then the prefix sums shifted by one, so that
     * filling start[v + 1]++ leaves start[v + 1] at v's end */
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < g->n_nodes; k++) {
            const mp_node *n = &g->nodes[k];
            for (int i = 0; i < n->n_in; i++) {
                int v = n->in[i];
                if (v < 0 || v >= nv) continue;
                if (pass) g->use_node[start[v + 1]++] = k;
                else {
                    start[v + 1]++;
                    g->values[v].n_consumers++;
                }
            }
            x.node = k;
            for (int s = 0; s < n->n_sub; s++)
                if (n->sub[s]) mp__outer_reads(n->sub[s], g, mp__idx_outer, &x);
        }
        if (pass) break;
        int total = 0;
        for (int v = 0; v <= nv; v++) {
            int c = start[v + 1];
            start[v + 1] = total;
            total += c;
        }
        start[0] = 0;
        g->use_node = mp_arena_alloc(&g->model->arena, sizeof(int) * (size_t)(total ? total : 1));
        if (!g->use_node) {
            free(mark);
            g->use_start = NULL;
            return mp_error(MP_ERR_NOMEM, "out of memory");
        }
        for (int v = 0; v < nv; v++) mark[v] = -1;
        x.fill = true;
    }
    free(mark);
    return MP_OK;
}

int mp_sole_use(const mp_graph *g, int v) {
    if (v < 0 || v >= g->n_values || (g->values[v].flags & MP_VAL_OUTPUT)) return -1;
    int n;
    const int *u = mp_uses(g, v, &n);
    return n == 1 && g->values[v].n_consumers == 1 ? u[0] : -1;
}

bool mp_fx_batch_norm(const char *target) {
    static const char *const bn[] = {
        "_native_batch_norm_legit_functional", "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training", "native_batch_norm", "batch_norm",
        "_batch_norm_with_update", "_batch_norm_no_update", "cudnn_batch_norm"};
    for (size_t i = 0; target && i < sizeof bn / sizeof bn[0]; i++)
        if (strcmp(target, bn[i]) == 0) return true;
    return false;
}

bool mp_node_fx_folded_bn(const mp_node *n) {
    if (!n->fx || !mp_fx_batch_norm(n->fx->target) || n->n_in < 2 || n->in[1] < 0) return false;
    return strcmp(n->op, "Conv") == 0 || strcmp(n->op, "ConvTranspose") == 0 || strcmp(n->op, "Gemm") == 0 ||
           strcmp(n->op, "MatMul") == 0;
}

bool mp_node_folded_bn(const mp_graph *g, const mp_node *n) {
    if (mp_node_fx_folded_bn(n)) return true;
    if (n->fx || strcmp(n->op, "Conv") != 0 || n->n_in < 3 || (n->domain && n->domain[0])) return false;
    /* both computed: a weight alone computed is another folding (weight_norm
     * keeps its bias's name); the norm's shift always gives a bias. Equal
     * ones (a fresh model's zero shifts) are one initializer behind Identity
     * copies. */
    for (int i = 1; i <= 2; i++) {
        const mp_value *w = n->in[i] >= 0 ? &g->values[n->in[i]] : NULL;
        if (!w || !w->name || strncmp(w->name, "onnx::Conv_", 11) != 0) return false;
        const mp_node *p = w->producer >= 0 ? &g->nodes[w->producer] : NULL;
        if (p && strcmp(p->op, "Identity") == 0 && p->n_in == 1 && p->in[0] >= 0) w = &g->values[p->in[0]];
        if (!(w->flags & MP_VAL_INIT)) return false;
    }
    return true;
}

int mp_graph_find(const mp_graph *g, const char *name) {
    return mp_strmap_get(&g->names, name);
}

int mp_graph_value(mp_graph *g, const char *name, size_t len) {
    return mp_graph_value_h(g, name, len, mp_strmap_hash(name, len));
}

int mp_graph_value_h(mp_graph *g, const char *name, size_t len, uint32_t h) {
    int idx = mp_strmap_getn_h(&g->names, name, len, h);
    if (idx >= 0) return idx;
    mp_value *nv = mp_arena_grow(&g->model->arena, g->values, sizeof *g->values,
                                 &g->cap_values, g->n_values + 1);
    if (!nv) return -1;
    g->values = nv;
    g->use_start = g->use_node = NULL;
    mp_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->name = mp_arena_strndup(&g->model->arena, name, len);
    if (!v->name) return -1;
    v->rank = -1;
    v->decl_rank = -1;
    v->producer = -1;
    v->outer = -1;
    v->kn = -1;
    v->given_n = -1;
    v->last_use = -1;
    if (mp_strmap_put_h(&g->names, v->name, len, h, g->n_values) != MP_OK) return -1;
    return g->n_values++;
}

int mp_graph_add_node(mp_graph *g) {
    mp_node *nn = mp_arena_grow(&g->model->arena, g->nodes, sizeof *g->nodes,
                                &g->cap_nodes, g->n_nodes + 1);
    if (!nn) return -1;
    g->nodes = nn;
    g->use_start = g->use_node = NULL;
    mp_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->name = n->op = n->domain = "";
    return g->n_nodes++;
}

void mp_value_take(mp_value *dst, const mp_value *src) {
    dst->dtype = src->dtype;
    dst->rank = src->rank;
    dst->dims = src->dims;
    dst->kn = src->kn;
    dst->iv = src->iv;
    dst->fv = src->fv;
    dst->seq = src->seq;
}

uint64_t mp_value_bytes(const mp_value *v) {
    if (v->seq) { /* a known sequence: its elements', 0 when one is unknown */
        uint64_t sum = 0;
        for (int i = 0; i < v->seq->n; i++) {
            const mp_value *e = &v->seq->el[i];
            uint64_t b = mp_value_bytes(e);
            if (!b && mp_value_numel(e) != 0) return 0;
            sum = sum + b < sum ? UINT64_MAX : sum + b;
        }
        return sum;
    }
    int64_t n = mp_value_numel(v);
    if (n < 0) return 0;
    return mp_dtype_bytes(v->dtype, n);
}

/* ---- model-level tables ---- */

mp_status mp_model_warn(struct mp_model *m, const char *fmt, ...) {
    va_list ap;
    char buf[1024];
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **nw = mp_arena_grow(&m->arena, m->warnings, sizeof *m->warnings,
                              &m->cap_warnings, m->n_warnings + 1);
    if (!nw) return mp_error(MP_ERR_NOMEM, "out of memory");
    m->warnings = nw;
    m->warnings[m->n_warnings] = mp_arena_strdup(&m->arena, buf);
    if (!m->warnings[m->n_warnings]) return mp_error(MP_ERR_NOMEM, "out of memory");
    m->n_warnings++;
    return MP_OK;
}

int mp_model_symbol(struct mp_model *m, const char *name, size_t len) {
    int idx = mp_strmap_getn(&m->sym_names, name, len);
    if (idx >= 0) return idx;
    mp_symbol *ns = mp_arena_grow(&m->arena, m->syms, sizeof *m->syms, &m->cap_syms,
                                  m->n_syms + 1);
    if (!ns) return -1;
    m->syms = ns;
    mp_symbol *s = &m->syms[m->n_syms];
    s->name = mp_arena_strndup(&m->arena, name, len);
    if (!s->name) return -1;
    s->value = -1;
    s->on_input = false;
    if (mp_strmap_put(&m->sym_names, s->name, m->n_syms) != MP_OK) return -1;
    return m->n_syms++;
}

int mp_model_module(struct mp_model *m, const char *path, size_t len) {
    int idx = mp_strmap_getn(&m->module_paths, path, len);
    if (idx >= 0) return idx;
    /* parent: path up to the last '.'; the root is "" */
    int parent = -1;
    size_t cut = 0;
    if (len > 0) {
        size_t i = len;
        while (i > 0 && path[i - 1] != '.') i--;
        cut = i;
        parent = mp_model_module(m, path, i ? i - 1 : 0);
        if (parent < 0) return -1;
    }
    mp_module *nm = mp_arena_grow(&m->arena, m->modules, sizeof *m->modules,
                                  &m->cap_modules, m->n_modules + 1);
    if (!nm) return -1;
    m->modules = nm;
    int id = m->n_modules;
    mp_module *mod = &m->modules[id];
    memset(mod, 0, sizeof *mod);
    mod->path = mp_arena_strndup(&m->arena, path, len);
    if (!mod->path) return -1;
    mod->name = len ? mod->path + cut : "";
    mod->parent = parent;
    mod->depth = parent < 0 ? 0 : m->modules[parent].depth + 1;
    mod->first_child = mod->last_child = mod->next_sibling = -1;
    if (parent >= 0) {
        mp_module *p = &m->modules[parent];
        if (p->last_child >= 0)
            m->modules[p->last_child].next_sibling = id;
        else
            p->first_child = id;
        p->last_child = id;
    }
    if (mp_strmap_put(&m->module_paths, mod->path, id) != MP_OK) return -1;
    m->n_modules++;
    return id;
}
