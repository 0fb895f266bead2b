/* Model lifetime and the user's dims. */
#include "load/load.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

struct mp_model *mp_model_create(void) {
    mp_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    mp_arena_init(&m->arena);
    m->fd = -1;
    m->graph = mp_graph_new(m, NULL);
    /* symbol 0 is the anonymous unknown dim */
    if (!m->graph || mp_model_symbol(m, "?", 1) != 0) {
        mp_model_free(m);
        return NULL;
    }
    return m;
}

void mp_model_free(mp_model *m) {
    if (!m) return;
    mp_graph_release(m->graph);
    mp_strmap_free(&m->module_paths);
    mp_strmap_free(&m->sym_names);
    mp_strmap_free(&m->sig_kind);
    mp_strmap_free(&m->sig_owner);
    /* the map is ours when the model was loaded from a file (fd open);
     * mp_model_load_memory's buffer belongs to its caller */
    if (m->map && m->map_size && m->fd >= 0) munmap((void *)m->map, m->map_size);
    if (m->fd >= 0) close(m->fd);
    mp_arena_free(&m->arena);
    free(m);
}

/* ---- limits ---- */

#define LIMITS_V1 MP_FIELD_END(mp_limits, max_depth)

static void limits_defaults(mp_limits *l) {
    memset(l, 0, sizeof *l);
    l->size = sizeof *l;
#define MP__LIM_DEF(field, name, def) l->field = def;
    MP_LIMIT_LIST(MP__LIM_DEF)
#undef MP__LIM_DEF
    /* on a small machine: at most half its memory, so that the limit
     * trips before the machine runs out */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (uint64_t)pages / 2 <= (uint64_t)INT64_MAX / (uint64_t)page) {
        int64_t half = (int64_t)((uint64_t)pages / 2 * (uint64_t)page);
        if (half >= (64 << 20) && half < l->max_memory) l->max_memory = half;
    }
}

mp_status mp_limits_init(mp_limits *l, size_t size) {
    mp_limits d;
    limits_defaults(&d);
    return mp_opts_init(l, size, &d, sizeof d, LIMITS_V1, "mp_limits");
}

mp_status mp_limits_set(mp_limits *l, const char *name, int64_t value) {
    if (!l || !name) return mp_error(MP_ERR_USAGE, "no limits or limit name");
    mp_limits d;
    limits_defaults(&d);
    mp_status st = mp_opts_take(&d, sizeof d, l, LIMITS_V1, "mp_limits");
    if (st) return st;
#define MP__LIM_SET(field, lname, def)                                                   \
    if (strcmp(name, lname) == 0) {                                                      \
        if (l->size < MP_FIELD_END(mp_limits, field))                                    \
            return mp_error(MP_ERR_USAGE, "limit %s: not in the caller's mp_limits (an older " \
                            "modelprof.h)", name);                                       \
        if (value < 1)                                                                   \
            return mp_error(MP_ERR_USAGE, "limit %s: %lld is below 1", name, (long long)value); \
        if (strcmp(lname, "depth") == 0 && value > MP_LIMIT_DEPTH_CAP)                  \
            return mp_error(MP_ERR_USAGE, "limit depth: %lld is above %d, the most the stack " \
                            "allows", (long long)value, MP_LIMIT_DEPTH_CAP);             \
        l->field = value;                                                                \
        return MP_OK;                                                                    \
    }
    MP_LIMIT_LIST(MP__LIM_SET)
#undef MP__LIM_SET
    return mp_error(MP_ERR_USAGE,
                    "unknown limit '%s' (limits: nodes, values, attr-elems, memory, depth)", name);
}

mp_status mp_limits_check(const mp_limits *in, mp_limits *out) {
    limits_defaults(out);
    if (!in) return MP_OK;
    mp_limits given = *out;
    mp_status st = mp_opts_take(&given, sizeof given, in, LIMITS_V1, "mp_limits");
    if (st) return st;
#define MP__LIM_TAKE(field, name, def) \
    if (given.field > 0) out->field = given.field;
    MP_LIMIT_LIST(MP__LIM_TAKE)
#undef MP__LIM_TAKE
    if (out->max_depth > MP_LIMIT_DEPTH_CAP)
        return mp_error(MP_ERR_USAGE, "limit depth: %lld is above %d, the most the stack allows",
                        (long long)out->max_depth, MP_LIMIT_DEPTH_CAP);
    if ((uint64_t)out->max_memory > SIZE_MAX / 2) out->max_memory = (int64_t)(SIZE_MAX / 2);
    return MP_OK;
}

int mp_model_warning_count(const mp_model *m) { return m ? m->n_warnings : 0; }

const char *mp_model_absent_weights(const mp_model *m) { return m ? m->absent_weights : NULL; }

const char *mp_model_warning(const mp_model *m, int i) {
    if (!m || i < 0 || i >= m->n_warnings) return NULL;
    return m->warnings[i];
}

mp_status mp_model_set_dim(mp_model *m, const char *name, int64_t value) {
    if (!m || !name) return mp_error(MP_ERR_USAGE, "no model or dim name");
    if (value < 0)
        return mp_error(MP_ERR_USAGE, "dim '%s': value %lld is negative", name,
                        (long long)value);
    int s = mp_strmap_get(&m->sym_names, name);
    if (s <= 0 || !m->syms[s].on_input) {
        char list[512] = "";
        size_t o = 0;
        for (int i = 1; i < m->n_syms && o < sizeof list - 64; i++)
            if (m->syms[i].on_input)
                o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", o ? ", " : "",
                                      m->syms[i].name);
        return mp_error(MP_ERR_USAGE, "%s: the model's inputs have no symbolic dim '%s' (%s%s)",
                        m->path ? m->path : "model", name, o ? "it has: " : "it has none",
                        list);
    }
    m->syms[s].value = value;
    return MP_OK;
}

mp_status mp_model_set_module_class(mp_model *m, const char *path, const char *cls) {
    if (!m || !path || !cls || !cls[0]) return mp_error(MP_ERR_USAGE, "no model, module path or class");
    for (int i = 0; i < m->n_modules; i++) {
        const mp_module *md = &m->modules[i];
        bool root = md->parent < 0;
        if (root ? path[0] != 0 : !md->path || strcmp(md->path, path) != 0) continue;
        char *c = mp_arena_strdup(&m->arena, cls);
        if (!c) return mp_error(MP_ERR_NOMEM, "out of memory");
        m->modules[i].cls = c;
        return MP_OK;
    }
    return mp_error(MP_ERR_USAGE, "%s: no module '%s' in the model's module tree",
                    m->path ? m->path : "model", path);
}

int mp_model_input_count(const mp_model *m) { return m && m->graph ? m->graph->n_inputs : 0; }

const char *mp_model_input_name(const mp_model *m, int i) {
    if (!m || !m->graph || i < 0 || i >= m->graph->n_inputs) return NULL;
    return m->graph->values[m->graph->inputs[i]].name;
}

mp_status mp_model_input_shape(const mp_model *m, const char *name, int64_t *dims, int *rank) {
    if (!m || !name || !dims || !rank) return mp_error(MP_ERR_USAGE, "no model, input name or output");
    const mp_graph *g = m->graph;
    int v = mp_graph_find(g, name);
    if (v < 0 || !(g->values[v].flags & MP_VAL_INPUT))
        return mp_error(MP_ERR_USAGE, "%s: the model has no input '%s'", m->path ? m->path : "model", name);
    const mp_value *val = &g->values[v];
    *rank = val->decl_rank;
    for (int i = 0; i < val->decl_rank && i < MP_MAX_RANK; i++)
        dims[i] = val->decl_dims && MP_DIM_KNOWN(val->decl_dims[i]) ? val->decl_dims[i] : -1;
    return MP_OK;
}

mp_status mp_model_ignore_module(mp_model *m, const char *path) {
    if (!m || !path) return mp_error(MP_ERR_USAGE, "no model or module path");
    int md = path[0] ? mp_strmap_get(&m->module_paths, path) : (m->n_modules ? 0 : -1);
    if (md < 0)
        return mp_error(MP_ERR_USAGE, "%s: no module '%s' in the model's module tree",
                        m->path ? m->path : "model", path);
    /* the module and its subtree: children follow their parent in the array */
    m->modules[md].ignored = true;
    for (int i = md + 1; i < m->n_modules; i++)
        if (m->modules[i].parent >= 0 && m->modules[m->modules[i].parent].ignored)
            m->modules[i].ignored = true;
    return MP_OK;
}

mp_status mp_model_set_input_shape(mp_model *m, const char *name, const int64_t *dims,
                                   int rank) {
    if (!m || !name) return mp_error(MP_ERR_USAGE, "no model or input name");
    mp_graph *g = m->graph;
    int v = mp_graph_find(g, name);
    if (v < 0 || !(g->values[v].flags & MP_VAL_INPUT)) {
        char list[512] = "";
        size_t o = 0;
        for (int i = 0; i < g->n_inputs && o < sizeof list - 64; i++)
            o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", i ? ", " : "",
                                  g->values[g->inputs[i]].name);
        return mp_error(MP_ERR_USAGE, "%s: the model has no input '%s' (inputs: %s)",
                        m->path ? m->path : "model", name, o ? list : "none");
    }
    if (rank < 0 || rank > MP_MAX_RANK)
        return mp_error(MP_ERR_USAGE, "input '%s': rank %d is out of range", name, rank);
    mp_value *val = &g->values[v];
    if (val->decl_rank >= 0 && val->decl_rank != rank)
        return mp_error(MP_ERR_USAGE, "input '%s': the model declares rank %d, got %d dims",
                        name, val->decl_rank, rank);
    int64_t *d = mp_arena_calloc(&m->arena, (size_t)(rank ? rank : 1), sizeof *d);
    if (!d) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return mp_error(MP_ERR_USAGE, "input '%s': dim %d is negative", name, i);
        /* a symbolic dim given a value here gives the symbol that value */
        if (val->decl_rank == rank && val->decl_dims[i] < MP_DIM_ANON) {
            mp_symbol *s = &m->syms[MP_DIM_SYM(val->decl_dims[i])];
            if (s->value >= 0 && s->value != dims[i])
                return mp_error(MP_ERR_USAGE,
                                "input '%s': dim %d is '%s' = %lld, but the shape gives %lld",
                                name, i, s->name, (long long)s->value, (long long)dims[i]);
            s->value = dims[i];
        }
        d[i] = dims[i];
    }
    val->decl_rank = rank;
    val->decl_dims = d;
    return MP_OK;
}

mp_status mp_model_set_input_data(mp_model *m, const char *name, int dtype, int rank,
                                  const int64_t *dims, const int64_t *iv, const double *fv,
                                  int64_t n) {
    mp_status st = mp_model_set_input_shape(m, name, dims, rank);
    if (st) return st;
    mp_value *v = &m->graph->values[mp_graph_find(m->graph, name)];
    v->decl_dtype = dtype;
    v->given_n = -1;
    v->given_iv = NULL;
    v->given_fv = NULL;
    if (!iv && !fv) return MP_OK;
    int64_t numel = mp_dims_product(dims, rank);
    if (numel != n || n < 0)
        return mp_error(MP_ERR_USAGE, "input '%s': %lld values for %lld elements", name,
                        (long long)n, (long long)numel);
    if (n > MP_KNOWN_MAX) return MP_OK; /* too large to matter for shape arithmetic */
    size_t sz = (size_t)(n ? n : 1);
    if (iv) {
        v->given_iv = mp_arena_calloc(&m->arena, sz, sizeof *v->given_iv);
        if (!v->given_iv) return mp_error(MP_ERR_NOMEM, "out of memory");
        memcpy(v->given_iv, iv, sizeof *iv * (size_t)n);
    } else {
        v->given_fv = mp_arena_calloc(&m->arena, sz, sizeof *v->given_fv);
        if (!v->given_fv) return mp_error(MP_ERR_NOMEM, "out of memory");
        memcpy(v->given_fv, fv, sizeof *fv * (size_t)n);
    }
    v->given_n = n;
    return MP_OK;
}
