/* The data a run starts from: weights (views into the mapped model or
 * external file when they are stored as the kernels read them, decoded
 * once otherwise, seeded random when absent), values the static inference
 * already knows, and seeded random inputs of the right dtype and range. */
#include "load/load.h"
#include "ops/kernel.h"
#include "run/run.h"

#include <math.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t mp_run_rng(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double mp__unif(uint64_t *s) { return (double)(mp_run_rng(s) >> 11) * (1.0 / 9007199254740992.0); }

static uint64_t mp__name_seed(uint64_t seed, const char *name) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (const char *c = name ? name : ""; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
    return h;
}

/* Element i of a buffer of dtype dt from an int (isf false) or a double. */
static void mp__store(int dt, void *buf, int64_t i, int64_t iv, double fv, bool isf) {
    if (isf) mp_kset_f(buf, dt, i, fv);
    else mp_kset_i(buf, dt, i, iv);
}

static mp_status mp__own_bytes(mp_exec *pl, int v, size_t bytes) {
    mp_rval *rv = &pl->vals[v];
    void *b = NULL;
    size_t cap = (bytes + 63) & ~(size_t)63;
    if (cap == 0) cap = 64;
    if (posix_memalign(&b, 64, cap))
        return mp_error(MP_ERR_NOMEM, "value '%s': out of memory (%zu bytes)", pl->g->values[v].name, bytes);
    memset(b, 0, cap);
    rv->own = b;
    rv->own_cap = cap;
    rv->rt.data = b;
    pl->const_bytes += cap;
    return MP_OK;
}

mp_status mp_run_known(mp_exec *pl, int v) {
    mp_value *val = &pl->g->values[v];
    mp_rval *rv = &pl->vals[v];
    if (rv->kind == MP_RV_CONST) return MP_OK;
    int64_t n = mp_value_numel(val);
    if (n < 0 || val->kn != n)
        return mp_error(MP_ERR_UNSUPPORTED, "value '%s': contents not known at plan time", val->name);
    if (val->dtype == MP_DT_STRING || mp_dtype_bits(val->dtype) < 8)
        return mp_error(MP_ERR_UNSUPPORTED, "value '%s': dtype %s cannot be run here", val->name,
                        mp_dtype_name(val->dtype));
    mp_status st = mp__own_bytes(pl, v, rv->bytes);
    if (st) return st;
    for (int64_t i = 0; i < n; i++)
        mp__store(val->dtype, rv->own, i, val->iv ? val->iv[i] : 0, val->fv ? val->fv[i] : 0, val->fv != NULL);
    rv->kind = MP_RV_CONST;
    return MP_OK;
}

/* Random weights for an absent tensor: floats uniform in +-1/sqrt(fan in)
 * (scales, biases and statistics (rank <= 1) in [0.5, 1.5): variances
 * must be positive), integers zero. */
static void mp__random_weight(mp_exec *pl, int v) {
    mp_value *val = &pl->g->values[v];
    mp_rval *rv = &pl->vals[v];
    uint64_t s = mp__name_seed(pl->seed, val->name);
    int64_t n = rv->rt.numel;
    if (!mp_dtype_is_float(val->dtype)) return; /* zeroed */
    double a = 1, lo = -1;
    if (val->rank >= 2 && val->dims[0] > 0) {
        a = 1.0 / sqrt((double)(n / val->dims[0] > 0 ? n / val->dims[0] : 1));
        lo = -a;
    } else {
        lo = 0.5;
        a = 1.5;
    }
    for (int64_t i = 0; i < n; i++) mp__store(val->dtype, rv->own, i, 0, lo + (a - lo) * mp__unif(&s), true);
}

/* Typed fields (float_data, int32_data, ...) decoded into the dtype's
 * own layout. */
typedef struct mp__typed_ctx {
    int dt;
    void *buf;
} mp__typed_ctx;

static void mp__typed_put(void *ctx, int64_t k, int64_t iv, double fv, bool isf) {
    const mp__typed_ctx *c = ctx;
    mp__store(c->dt, c->buf, k, iv, fv, isf);
}

static mp_status mp__typed(mp_exec *pl, int v, const mp_tensor *t) {
    mp__typed_ctx c = {t->dtype, pl->vals[v].own};
    if (mp_tensor_typed_walk(t, mp__typed_put, &c)) return MP_OK;
    return mp_error(MP_ERR_FORMAT, "%s: tensor '%s': typed data does not match its %lld elements",
                    pl->m->path ? pl->m->path : "model", t->name, (long long)t->numel);
}

static const void *mp__map_external(mp_exec *pl, const mp_tensor *t, size_t *size) {
    for (int i = 0; i < pl->n_ext; i++)
        if (strcmp(pl->ext[i].path, t->ext_path) == 0) {
            *size = pl->ext[i].size;
            return pl->ext[i].map;
        }
    int fd = mp_external_open(pl->m, t->ext_path);
    if (fd < 0) return NULL;
    struct stat st;
    void *map = NULL;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) map = NULL;
    }
    close(fd);
    if (!map) return NULL;
    if (pl->n_ext == pl->cap_ext) {
        int cap = pl->cap_ext ? 2 * pl->cap_ext : 4;
        void *e = realloc(pl->ext, sizeof *pl->ext * (size_t)cap);
        if (!e) {
            munmap(map, (size_t)st.st_size);
            return NULL;
        }
        pl->ext = e;
        pl->cap_ext = cap;
    }
    char *path = strdup(t->ext_path);
    if (!path) {
        munmap(map, (size_t)st.st_size);
        return NULL;
    }
    pl->ext[pl->n_ext].path = path;
    pl->ext[pl->n_ext].map = map;
    pl->ext[pl->n_ext].size = (size_t)st.st_size;
    pl->n_ext++;
    *size = (size_t)st.st_size;
    return map;
}

void mp_run_unmap(mp_exec *pl) {
    for (int i = 0; i < pl->n_ext; i++) {
        munmap(pl->ext[i].map, pl->ext[i].size);
        free(pl->ext[i].path);
    }
    free(pl->ext);
    pl->ext = NULL;
    pl->n_ext = 0;
}

/* Bytes used in place when aligned for their dtype, else copied once. */
static mp_status mp__view(mp_exec *pl, int v, const uint8_t *p) {
    mp_rval *rv = &pl->vals[v];
    size_t al = (size_t)(mp_dtype_bits(rv->rt.dtype) / 8);
    if (al < 1) al = 1;
    if (((uintptr_t)p % al) == 0) {
        rv->rt.data = (void *)(uintptr_t)p;
        pl->view_bytes += rv->bytes;
        return MP_OK;
    }
    mp_status st = mp__own_bytes(pl, v, rv->bytes);
    if (!st && rv->bytes) memcpy(rv->own, p, rv->bytes);
    return st;
}

mp_status mp_run_load_tensor(mp_exec *pl, int v, const mp_tensor *t) {
    mp_value *val = &pl->g->values[v];
    mp_rval *rv = &pl->vals[v];
    const char *path = pl->m->path ? pl->m->path : "model";
    if (rv->kind == MP_RV_CONST) return MP_OK;
    if (!mp_shape_known(val) || t->numel != mp_value_numel(val))
        return mp_error(MP_ERR_FORMAT, "%s: tensor '%s': its dims do not match its value's", path, t->name);
    if (t->dtype == MP_DT_STRING)
        return mp_error(MP_ERR_UNSUPPORTED, "%s: tensor '%s': string tensors cannot be run here", path,
                        t->name);
    rv->rt.dtype = t->dtype;
    rv->bytes = (size_t)mp_dtype_bytes(t->dtype, t->numel);
    rv->kind = MP_RV_CONST;
    if (rv->bytes == 0) {
        static _Alignas(64) uint8_t empty[64];
        rv->rt.data = empty;
        return MP_OK;
    }
    mp_status st;
    switch (t->loc) {
    case MP_DATA_RAW:
        if (t->size != rv->bytes)
            return mp_error(MP_ERR_FORMAT, "%s: tensor '%s': %zu raw bytes for %zu expected", path, t->name,
                            t->size, rv->bytes);
        return mp__view(pl, v, t->data);
    case MP_DATA_EXTERNAL: {
        size_t size = 0;
        const uint8_t *map = mp__map_external(pl, t, &size);
        if (!map)
            return mp_error(MP_ERR_IO, "%s: tensor '%s': cannot map external data '%s'", path, t->name,
                            t->ext_path);
        if (t->ext_offset > size || size - t->ext_offset < rv->bytes)
            return mp_error(MP_ERR_FORMAT, "%s: tensor '%s': external data '%s' is shorter than the tensor",
                            path, t->name, t->ext_path);
        return mp__view(pl, v, map + t->ext_offset);
    }
    case MP_DATA_TYPED:
        if ((st = mp__own_bytes(pl, v, rv->bytes))) return st;
        return mp__typed(pl, v, t);
    case MP_DATA_ABSENT:
    case MP_DATA_NONE:
        if (!mp_dtype_is_float(t->dtype) && t->numel <= 64) {
            /* a small integer tensor is shape arithmetic (axes, a shape,
             * pads, starts): made-up contents would run another model, or
             * none (a ReduceMean over axes 0, 0 wrote past its output) */
            int nu = 0;
            const int *u = mp_uses(pl->g, v, &nu);
            const char *reader = nu > 0 && pl->g->nodes[u[0]].name ? pl->g->nodes[u[0]].name : "?";
            return mp_error(MP_ERR_USAGE,
                            "%s: tensor '%s' (%lld %s values, read by node '%s') is in external data '%s', which "
                            "is absent: a measured run cannot make up integer contents (axes, shapes, indices); put "
                            "the data file next to the model (a static profile needs none)",
                            path, t->name, (long long)t->numel, mp_dtype_name(t->dtype), reader,
                            t->ext_path ? t->ext_path : "(none)");
        }
        if ((st = mp__own_bytes(pl, v, rv->bytes))) return st;
        mp__random_weight(pl, v);
        pl->random_weights = true;
        return MP_OK;
    }
    return mp_error(MP_ERR_FORMAT, "%s: tensor '%s': unknown data location", path, t->name);
}

/* The range of integer input v: within the gathered axis when it indexes
 * a Gather (token ids into an embedding), ones for masks, else {0, 1}. */
static void mp__int_range(const mp_exec *pl, int v, int64_t *lo, int64_t *hi) {
    const mp_graph *g = pl->g;
    const char *name = g->values[v].name;
    *lo = 0;
    *hi = 2;
    if (name && (strstr(name, "mask") || strstr(name, "Mask"))) {
        *lo = 1;
        *hi = 2;
        return;
    }
    for (int k = 0; k < g->n_nodes; k++) {
        const mp_node *n = &g->nodes[k];
        if (n->n_in < 2 || n->in[1] != v || n->in[0] < 0) continue;
        if (!mp_streq(n->op, "Gather") && !mp_streq(n->op, "GatherElements")) continue;
        const mp_value *d = &g->values[n->in[0]];
        if (d->rank < 1) continue;
        int ax = mp_axis(mp_attr_i(n, "axis", 0), d->rank);
        if (ax < 0 || d->dims[ax] <= 0) continue;
        *lo = 0;
        *hi = d->dims[ax];
        return;
    }
}

void mp_run_random_input(mp_exec *pl, int v) {
    mp_value *val = &pl->g->values[v];
    mp_rval *rv = &pl->vals[v];
    uint64_t s = mp__name_seed(pl->seed ^ 0x5bd1e995ull, val->name);
    int64_t n = rv->rt.numel;
    if (!rv->own || n <= 0 || mp_dtype_bits(val->dtype) < 8) return;
    if (mp_dtype_is_float(val->dtype)) {
        for (int64_t i = 0; i < n; i++) mp__store(val->dtype, rv->own, i, 0, 2 * mp__unif(&s) - 1, true);
        return;
    }
    int64_t lo, hi;
    mp__int_range(pl, v, &lo, &hi);
    uint64_t span = (uint64_t)(hi - lo);
    for (int64_t i = 0; i < n; i++)
        mp__store(val->dtype, rv->own, i, lo + (int64_t)(mp_run_rng(&s) % (span ? span : 1)), 0, false);
}

/* Buffers of numbers only: no strings, complex or sub-byte types. */
static bool mp__numeric(int dt) {
    return dt == MP_DT_BOOL || ((mp_dtype_is_float(dt) || mp_dtype_is_int(dt)) && mp_dtype_bits(dt) >= 8);
}

bool mp_run_convert(int dst_dt, void *dst, int src_dt, const void *src, int64_t n) {
    if (!mp__numeric(dst_dt) || !mp__numeric(src_dt)) return false;
    mp_kconvert(dst, dst_dt, src, src_dt, n);
    return true;
}
