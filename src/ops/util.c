/* Helpers shared by operator code: attributes, outputs, known contents,
 * broadcasting and the shared shape and cost rules. */
#include "ops/ops.h"
#include "load/load.h"

#include <stdio.h>

mp_status mp_fail(mp_ctx *c, const char *fmt, ...) {
    char buf[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return mp_error(MP_ERR_SHAPE, "node '%s' (%s%s%s): %s", c->n->name,
                    c->n->domain[0] ? c->n->domain : "", c->n->domain[0] ? "::" : "",
                    c->n->op, buf);
}

mp_status mp_arity(mp_ctx *c, int lo, int hi) {
    int n = c->n->n_in;
    if (n < lo || n > hi) {
        if (lo == hi) return mp_fail(c, "expects %d input%s, got %d", lo, lo == 1 ? "" : "s", n);
        return mp_fail(c, "expects %d to %d inputs, got %d", lo, hi, n);
    }
    return MP_OK;
}

mp_status mp_gemm_c_bcast(mp_ctx *c, const mp_value *cc, int64_t od[2]) {
    for (int i = 0; i < cc->rank; i++) {
        int64_t d = cc->dims[cc->rank - 1 - i], t = od[1 - i];
        if (d >= 0 && d != 1 && t >= 0 && d != t)
            return mp_fail(c, "C '%s' dim %lld does not broadcast to %lld", cc->name, (long long)d,
                           (long long)t);
        if (t < 0 && d > 1) od[1 - i] = d;
    }
    return MP_OK;
}

mp_status mp__need_in_fail(mp_ctx *c, int i, const char *what, mp_value **v) {
    if (!*v)
        return what ? mp_fail(c, "input %d (%s) is missing", i, what)
                    : mp_fail(c, "input %d is missing", i);
    if ((*v)->rank > MP_MAX_RANK)
        return what ? mp_fail(c, "input %d (%s) has rank %d, above the limit %d", i, what,
                              (*v)->rank, MP_MAX_RANK)
                    : mp_fail(c, "input %d has rank %d, above the limit %d", i, (*v)->rank,
                              MP_MAX_RANK);
    return MP_OK;
}

/* ---- attributes ---- */

int64_t mp_attr_i(const mp_node *n, const char *name, int64_t def) {
    const mp_attr *a = mp_node_attr(n, name);
    return (a && a->type == MP_ATTR_INT) ? a->i : def;
}

double mp_attr_f(const mp_node *n, const char *name, double def) {
    const mp_attr *a = mp_node_attr(n, name);
    if (!a) return def;
    if (a->type == MP_ATTR_FLOAT) return a->f;
    if (a->type == MP_ATTR_INT) return (double)a->i;
    return def;
}

const char *mp_attr_s(const mp_node *n, const char *name, const char *def) {
    const mp_attr *a = mp_node_attr(n, name);
    return (a && a->type == MP_ATTR_STRING) ? a->s : def;
}

int mp_attr_ints(const mp_node *n, const char *name, const int64_t **v) {
    const mp_attr *a = mp_node_attr(n, name);
    if (!a || a->type != MP_ATTR_INTS) return -1;
    *v = a->ints;
    return a->n;
}

int mp_attr_floats(const mp_node *n, const char *name, const double **v) {
    const mp_attr *a = mp_node_attr(n, name);
    if (!a || a->type != MP_ATTR_FLOATS) return -1;
    *v = a->floats;
    return a->n;
}

/* ---- outputs ---- */

void *mp_scratch(mp_ctx *c, size_t bytes) { return mp_arena_alloc(&c->m->arena, bytes); }

/* Output i takes dtype and rank with `dims` as its dims array (NULL for
 * rank <= 0), after the checks every output shape passes. */
static inline mp_status mp__out_shape(mp_ctx *c, mp_value *v, int dtype, int rank,
                                      const int64_t *dims, int64_t *store) {
    if (rank > MP_MAX_RANK) return mp_fail(c, "output rank %d exceeds the limit %d", rank, MP_MAX_RANK);
    for (int d = 0; d < rank; d++)
        if (dims[d] < MP_DIM_ANON && MP_DIM_SYM(dims[d]) >= c->m->n_syms)
            return mp_fail(c, "internal: bad symbolic dim");
    v->dtype = dtype;
    v->rank = rank;
    v->kn = -1;
    v->iv = NULL;
    v->fv = NULL;
    v->dims = rank > 0 ? store : NULL;
    return MP_OK;
}

mp_status mp_set_out(mp_ctx *c, int i, int dtype, int rank, const int64_t *dims) {
    mp_value *v = mp_out(c, i);
    if (!v) return MP_OK; /* omitted optional output */
    int64_t *copy = NULL;
    if (rank > 0 && rank <= MP_MAX_RANK) {
        copy = mp_arena_calloc(&c->m->arena, (size_t)rank, sizeof *copy);
        if (!copy) return mp_error(MP_ERR_NOMEM, "out of memory");
        for (int d = 0; d < rank; d++) copy[d] = dims[d];
    }
    return mp__out_shape(c, v, dtype, rank, dims, copy);
}

mp_status mp_set_out_keep(mp_ctx *c, int i, int dtype, int rank, const int64_t *dims) {
    mp_value *v = mp_out(c, i);
    if (!v) return MP_OK;
    return mp__out_shape(c, v, dtype, rank, dims, (int64_t *)dims);
}

mp_status mp_set_out_like(mp_ctx *c, int i, const mp_value *src) {
    return mp_set_out(c, i, src->dtype, src->rank, src->dims);
}

mp_status mp_set_out_dtype(mp_ctx *c, int i, int dtype) {
    return mp_set_out(c, i, dtype, -1, NULL);
}

/* Contents are tracked only for tensors whose every dim is small: an empty
 * tensor of dims [0, 2^40, 2^40] has few elements, but the strides an
 * operator computes over its dims would overflow. */
static bool mp__small_dims(const mp_value *v) {
    for (int d = 0; d < v->rank; d++)
        if (v->dims[d] < 0 || v->dims[d] > MP_KNOWN_MAX) return false;
    return true;
}

/* Output i (v) is to hold n known elements: an error when its shape says
 * otherwise; false when its contents are not tracked (too many elements,
 * or a dim too large). */
static mp_status mp__known_target(mp_ctx *c, const mp_value *v, int64_t n, bool *track) {
    int64_t numel = mp_value_numel(v);
    if (numel != n) return mp_fail(c, "internal: %lld known values for %lld elements",
                                   (long long)n, (long long)numel);
    *track = n <= MP_KNOWN_MAX && mp__small_dims(v);
    return MP_OK;
}

static mp_status mp__set_known(mp_ctx *c, int i, const int64_t *iv, const double *fv,
                               int64_t n) {
    mp_value *v = mp_out(c, i);
    if (!v) return MP_OK;
    bool track;
    mp_status st = mp__known_target(c, v, n, &track);
    if (st || !track) return st;
    bool is_float = mp_dtype_is_float(v->dtype);
    if (is_float) {
        double *d = mp_arena_calloc(&c->m->arena, (size_t)(n ? n : 1), sizeof *d);
        if (!d) return mp_error(MP_ERR_NOMEM, "out of memory");
        for (int64_t k = 0; k < n; k++) d[k] = fv ? fv[k] : (double)iv[k];
        v->fv = d;
        v->iv = NULL;
    } else {
        int64_t *d = mp_arena_calloc(&c->m->arena, (size_t)(n ? n : 1), sizeof *d);
        if (!d) return mp_error(MP_ERR_NOMEM, "out of memory");
        for (int64_t k = 0; k < n; k++) d[k] = iv ? iv[k] : (int64_t)fv[k];
        v->iv = d;
        v->fv = NULL;
    }
    v->kn = n;
    return MP_OK;
}

/* Contents that are already an array of the output's kind in the arena. */
static mp_status mp__keep_known(mp_ctx *c, int i, int64_t *iv, double *fv, int64_t n) {
    mp_value *v = mp_out(c, i);
    if (!v) return MP_OK;
    if (mp_dtype_is_float(v->dtype) != (fv != NULL)) return mp__set_known(c, i, iv, fv, n);
    bool track;
    mp_status st = mp__known_target(c, v, n, &track);
    if (st || !track) return st;
    v->iv = iv;
    v->fv = fv;
    v->kn = n;
    return MP_OK;
}

mp_status mp_keep_ints(mp_ctx *c, int i, int64_t *v, int64_t n) {
    return mp__keep_known(c, i, v, NULL, n);
}

mp_status mp_keep_floats(mp_ctx *c, int i, double *v, int64_t n) {
    return mp__keep_known(c, i, NULL, v, n);
}

mp_status mp_set_ints(mp_ctx *c, int i, const int64_t *v, int64_t n) {
    return mp__set_known(c, i, v, NULL, n);
}

mp_status mp_set_floats(mp_ctx *c, int i, const double *v, int64_t n) {
    return mp__set_known(c, i, NULL, v, n);
}

/* ---- known contents of inputs ---- */

static bool mp__load_known(mp_ctx *c, mp_value *v) {
    if (v->rank >= 0 && !mp__small_dims(v)) return false;
    if (v->kn >= 0) return true;
    /* a body's reference to an initializer of an enclosing graph reads it */
    const mp_value *src = v;
    for (const mp_graph *g = c->g; !src->init && (src->flags & MP_VAL_OUTER) && src->outer >= 0 && g->parent;
         g = g->parent)
        src = &g->parent->values[src->outer];
    if (!src->init || v->rank < 0) return false;
    int64_t n = mp_value_numel(v);
    if (n < 0 || n > MP_KNOWN_MAX) return false;
    int64_t *iv = NULL;
    double *fv = NULL;
    if (mp_tensor_read(c->m, src->init, &iv, &fv) != MP_OK) {
        mp_error_clear();
        return false;
    }
    v->iv = iv;
    v->fv = fv;
    v->kn = n;
    return true;
}

bool mp_ints(mp_ctx *c, int i, const int64_t **out, int64_t *n) {
    mp_value *v = mp_in(c, i);
    if (!v || !mp__load_known(c, v)) return false;
    if (!v->iv) {
        int64_t *d = mp_arena_calloc(&c->m->arena, (size_t)(v->kn ? v->kn : 1), sizeof *d);
        if (!d) return false;
        for (int64_t k = 0; k < v->kn; k++) {
            double x = v->fv[k];
            if (!(x > -9.2e18 && x < 9.2e18)) return false;
            d[k] = (int64_t)x;
        }
        v->iv = d;
    }
    *out = v->iv;
    *n = v->kn;
    return true;
}

bool mp_int1(mp_ctx *c, int i, int64_t *out) {
    const int64_t *v;
    int64_t n;
    if (!mp_ints(c, i, &v, &n) || n != 1) return false;
    *out = v[0];
    return true;
}

bool mp_floats(mp_ctx *c, int i, const double **out, int64_t *n) {
    mp_value *v = mp_in(c, i);
    if (!v || !mp__load_known(c, v)) return false;
    if (!v->fv) {
        double *d = mp_arena_calloc(&c->m->arena, (size_t)(v->kn ? v->kn : 1), sizeof *d);
        if (!d) return false;
        for (int64_t k = 0; k < v->kn; k++) d[k] = (double)v->iv[k];
        v->fv = d;
    }
    *out = v->fv;
    *n = v->kn;
    return true;
}

/* ---- broadcasting ---- */

mp_status mp_broadcast(mp_ctx *c, const mp_value *a, const mp_value *b, int *rank,
                       int64_t *dims) {
    if (a->rank < 0 || b->rank < 0) {
        *rank = -1;
        return MP_OK;
    }
    int r = MP_MAX(a->rank, b->rank);
    for (int i = 0; i < r; i++) {
        /* aligned from the right */
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1;
        int64_t db = ib >= 0 ? b->dims[ib] : 1;
        int64_t d;
        if (da == db)
            d = da;
        else if (da == 1)
            d = db;
        else if (db == 1)
            d = da;
        else if (da >= 0 && db >= 0)
            return mp_fail(c, "cannot broadcast dim %d: %lld vs %lld (inputs '%s' and '%s')",
                           i, (long long)da, (long long)db, a->name, b->name);
        else if (da >= 0)
            d = da; /* a symbolic dim must equal the known one */
        else if (db >= 0)
            d = db;
        else
            d = MP_DIM_ANON;
        dims[i] = d;
    }
    *rank = r;
    return MP_OK;
}

int mp_axis(int64_t axis, int rank) {
    if (axis < -rank || axis >= rank) return -1;
    return (int)(axis < 0 ? axis + rank : axis);
}

/* ---- shared rules ---- */

uint64_t mp_cost_prod(mp_cost *k, const int64_t *f, int n) {
    bool ovf = false;
    uint64_t p = 1;
    for (int i = 0; i < n; i++) {
        if (f[i] < 0) {
            k->flags |= MP_COST_UNKNOWN;
            return 0;
        }
        p = mp_umul(p, (uint64_t)f[i], &ovf);
    }
    if (ovf) k->flags |= MP_COST_OVERFLOW;
    return p;
}

void mp_cost_zero(mp_ctx *c, mp_cost *k) {
    (void)c;
    k->macs = 0;
    k->flops = 0;
}

void mp_cost_out1(mp_ctx *c, mp_cost *k) {
    k->flops = mp_cnumel(mp_out(c, 0), k);
}

void mp_cost_in1(mp_ctx *c, mp_cost *k) {
    k->flops = mp_cnumel(mp_in(c, 0), k);
}

mp_status mp_infer_same(mp_ctx *c) {
    mp_value *x = mp_in(c, 0);
    if (!x) return mp_fail(c, "input 0 is missing");
    return mp_set_out_like(c, 0, x);
}

mp_status mp_infer_broadcast(mp_ctx *c) {
    mp_value *x = mp_in(c, 0);
    if (!x) return mp_fail(c, "input 0 is missing");
    int rank = x->rank;
    int64_t dims[MP_MAX_RANK];
    if (rank > 0) memcpy(dims, x->dims, sizeof(int64_t) * (size_t)rank);
    for (int i = 1; i < c->n->n_in; i++) {
        mp_value *y = mp_in(c, i);
        if (!y) continue;
        mp_value tmp = {0};
        tmp.name = x->name;
        tmp.rank = rank;
        tmp.dims = dims;
        int r2;
        int64_t d2[MP_MAX_RANK];
        mp_status st = mp_broadcast(c, &tmp, y, &r2, d2);
        if (st) return st;
        rank = r2;
        if (rank > 0) memcpy(dims, d2, sizeof(int64_t) * (size_t)rank);
        if (rank < 0) break;
    }
    return mp_set_out(c, 0, x->dtype, rank, dims);
}

/* A body's node costs summed (control-flow cost rules) */
void mp_graph_cost_sum(const mp_graph *g, mp_cost *sum) {
    bool ovf = false;
    for (int i = 0; i < g->n_nodes; i++) {
        const mp_cost *k = &g->nodes[i].cost;
        sum->macs = mp_uadd(sum->macs, k->macs, &ovf);
        sum->flops = mp_uadd(sum->flops, k->flops, &ovf);
        sum->flags |= k->flags & (MP_COST_UNKNOWN | MP_COST_BOUND | MP_COST_PER_ITER |
                                  MP_COST_OVERFLOW | MP_COST_UNCOUNTED);
    }
    if (ovf) sum->flags |= MP_COST_OVERFLOW;
}

/* ---- shared train rules (ops.h; docs/PLANNING.md "what the backward keeps") ---- */

void mp_bwd_none(mp_ctx *c, mp_bwd *t) {
    (void)c;
    t->amp = MP_AMP_PROMOTE;
}

void mp_bwd_view(mp_ctx *c, mp_bwd *t) {
    (void)c;
    t->view = true;
}

void mp_bwd_save_in0(mp_ctx *c, mp_bwd *t) {
    (void)c;
    if (t->rg & 1u) t->save_in = 1u;
    t->bwd_flops = t->rg ? t->fwd->flops : 0;
}

void mp_bwd_save_out0(mp_ctx *c, mp_bwd *t) {
    (void)c;
    if (t->rg & 1u) t->save_out = 1u;
    t->bwd_flops = t->rg ? t->fwd->flops : 0;
}

void mp_bwd_product(mp_ctx *c, mp_bwd *t) {
    (void)c;
    t->amp = MP_AMP_LOWER;
    uint64_t mm = t->fwd->macs > UINT64_MAX / 2 ? UINT64_MAX : 2 * t->fwd->macs;
    uint64_t bias = t->fwd->flops > mm ? t->fwd->flops - mm : 0;
    t->bwd_flops = 0;
    if (t->rg & 1u) { /* dX = dY . W^T needs W */
        t->save_in |= 2u;
        t->bwd_flops += mm;
    }
    if (t->rg & 2u) { /* dW = X^T . dY needs X */
        t->save_in |= 1u;
        t->bwd_flops += mm;
    }
    if (t->rg & 4u) t->bwd_flops += bias; /* the bias's gradient: a sum over rows */
}
