/* The weights of a model exported without them, declared by the binding
 * that holds the model (mp_model_set_weight): a PyTorch model on the meta
 * device is exported with its parameters as graph inputs (no values to
 * write); the binding names each one with the dtype and shape PyTorch
 * gives it and whether it is a parameter, a buffer or a constant. The
 * input becomes an initializer whose data is absent, declared as the
 * dynamo exporter declares its initializers (MP_VAL_DECL_*), so the
 * analysis counts it as it counts the same model exported with weights.
 * Ties are the exporter's: a tensor shared by several modules is one
 * graph input (PyTorch's exporters take each tensor once, by identity). */
#include "load/load.h"

#include <string.h>

mp_status mp_model_set_weight(mp_model *m, const char *name, int dtype, const int64_t *dims, int rank,
                              int kind) {
    if (!m || !name || (rank > 0 && !dims))
        return mp_error(MP_ERR_USAGE, "mp_model_set_weight: no model, name or dims");
    const char *path = m->path ? m->path : "model";
    if (kind != MP_WEIGHT_PARAM && kind != MP_WEIGHT_BUFFER && kind != MP_WEIGHT_CONST)
        return mp_error(MP_ERR_USAGE, "weight '%s': kind %d is not a parameter (0), a buffer (1) or a "
                        "constant (2)", name, kind);
    if (rank < 0 || rank > MP_MAX_RANK)
        return mp_error(MP_ERR_USAGE, "weight '%s': rank %d is out of range", name, rank);
    if (mp_dtype_bits(dtype) <= 0)
        return mp_error(MP_ERR_USAGE, "weight '%s': dtype %d is not a tensor element type", name, dtype);
    mp_graph *g = m->graph;
    int v = g ? mp_graph_find(g, name) : -1;
    static const uint32_t decl[] = {MP_VAL_DECL_PARAM, MP_VAL_DECL_BUFFER, MP_VAL_DECL_CONST};
    if (v >= 0 && (g->values[v].flags & MP_VAL_INIT) && !(g->values[v].flags & MP_VAL_INPUT)) {
        /* a weight the export holds (with its data): the binding says what
         * PyTorch's module holds it as, where the file does not say (a
         * registered buffer read as an operand is no parameter); a kind the
         * file declares (a graph signature), or an earlier call, stands */
        mp_value *val = &g->values[v];
        if (val->flags & MP_VAL_DECL_ANY)
            return mp_error(MP_ERR_USAGE, "%s: weight '%s' is declared already (by the file, or an earlier call)",
                            path, name);
        const mp_tensor *t = val->init;
        if (t && t->dtype != dtype)
            return mp_error(MP_ERR_USAGE, "%s: weight '%s' is %s in PyTorch but the export's is %s", path, name,
                            mp_dtype_name(dtype), mp_dtype_name(t->dtype));
        bool same = t && t->rank == rank;
        for (int i = 0; same && i < rank; i++) same = t->dims[i] == dims[i];
        if (!same)
            return mp_error(MP_ERR_USAGE, "%s: weight '%s': PyTorch's shape and the export's differ", path, name);
        val->flags |= decl[kind];
        return MP_OK;
    }
    if (v < 0 || !(g->values[v].flags & MP_VAL_INPUT))
        return mp_error(MP_ERR_USAGE, "%s: weight '%s' is not a graph input of the export (%s)", path,
                        name, v < 0 ? "no value has that name" : "it is not an input");
    mp_value *val = &g->values[v];
    if (val->decl_dtype != MP_DT_UNDEFINED && val->decl_dtype != dtype)
        return mp_error(MP_ERR_USAGE, "%s: weight '%s' is %s in PyTorch but the export's input is %s", path,
                        name, mp_dtype_name(dtype), mp_dtype_name(val->decl_dtype));
    if (val->decl_rank >= 0) {
        bool same = val->decl_rank == rank;
        for (int i = 0; same && i < rank; i++)
            if (MP_DIM_KNOWN(val->decl_dims[i]) && val->decl_dims[i] != dims[i]) same = false;
        if (!same)
            return mp_error(MP_ERR_USAGE, "%s: weight '%s': PyTorch's shape and the export's input's differ "
                            "(rank %d and %d)", path, name, rank, val->decl_rank);
    }
    mp_tensor *t = mp_arena_calloc(&m->arena, 1, sizeof *t);
    int64_t *d = mp_arena_calloc(&m->arena, (size_t)(rank ? rank : 1), sizeof *d);
    if (!t || !d) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0) return mp_error(MP_ERR_USAGE, "weight '%s': dim %d is negative", name, i);
        d[i] = dims[i];
    }
    t->name = val->name;
    t->dtype = dtype;
    t->rank = rank;
    t->dims = d;
    t->numel = mp_dims_product(d, rank);
    t->loc = MP_DATA_ABSENT;
    t->decl = decl[kind];
    val->flags = (val->flags & ~(MP_VAL_INPUT | MP_VAL_DECL_ANY)) | MP_VAL_INIT | decl[kind];
    val->init = t;
    val->decl_dtype = dtype;
    val->decl_rank = rank;
    val->decl_dims = d;
    int k = 0;
    for (int i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] != v) g->inputs[k++] = g->inputs[i];
    g->n_inputs = k;
    m->weightless = true;
    return MP_OK;
}
