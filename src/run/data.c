/* The data a run starts from: weights (views into the mapped model or
 * external file when they are stored as the kernels read them, decoded
 * once otherwise, seeded random when absent), values the static inference
 * already knows, and seeded random inputs of the right dtype and range. */
#include "load/load.h"
#include "load/pb.h"
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

static uint16_t mp__f2h(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
    int e = (int)((x >> 23) & 0xff);
    if (e == 255) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
    e = e - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        mant |= 0x800000;
        int shift = 14 - e;
        uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = (uint32_t)e << 10 | mant >> 13, rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

static uint16_t mp__f2bf(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static int64_t mp__sat(double x) {
    if (x != x) return 0;
    if (x >= 9.2e18) return INT64_MAX;
    if (x <= -9.2e18) return INT64_MIN;
    return (int64_t)x;
}

/* Element i of a buffer of dtype dt from an int (isf false) or a double. */
static void mp__store(int dt, void *buf, int64_t i, int64_t iv, double fv, bool isf) {
    if (!isf) fv = (double)iv;
    else iv = mp__sat(fv);
    switch (dt) {
    case MP_DT_FLOAT: ((float *)buf)[i] = (float)fv; break;
    case MP_DT_DOUBLE: ((double *)buf)[i] = fv; break;
    case MP_DT_FLOAT16: ((uint16_t *)buf)[i] = mp__f2h((float)fv); break;
    case MP_DT_BFLOAT16: ((uint16_t *)buf)[i] = mp__f2bf((float)fv); break;
    case MP_DT_INT8: ((int8_t *)buf)[i] = (int8_t)iv; break;
    case MP_DT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)iv; break;
    case MP_DT_BOOL: ((uint8_t *)buf)[i] = iv != 0; break;
    case MP_DT_INT16: ((int16_t *)buf)[i] = (int16_t)iv; break;
    case MP_DT_UINT16: ((uint16_t *)buf)[i] = (uint16_t)iv; break;
    case MP_DT_INT32: ((int32_t *)buf)[i] = (int32_t)iv; break;
    case MP_DT_UINT32: ((uint32_t *)buf)[i] = (uint32_t)iv; break;
    case MP_DT_INT64: ((int64_t *)buf)[i] = iv; break;
    case MP_DT_UINT64: ((uint64_t *)buf)[i] = (uint64_t)iv; break;
    default: break;
    }
}

static mp_status mp__own_bytes(mp_plan *pl, int v, size_t bytes) {
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

mp_status mp_run_known(mp_plan *pl, int v) {
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
static void mp__random_weight(mp_plan *pl, int v) {
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
static mp_status mp__typed(mp_plan *pl, int v, const mp_tensor *t) {
    mp_rval *rv = &pl->vals[v];
    int dt = t->dtype;
    int64_t n = t->numel, k = 0;
    pb r = pb_view(t->data, t->size);
    uint32_t f = 0;
    int w = 0;
    while (pb_more(&r)) {
        if (!pb_key(&r, &f, &w)) goto bad;
        if ((int)f != t->typed_field) {
            if (!pb_skip(&r, w)) goto bad;
            continue;
        }
        pb s = r;
        bool packed = w == PB_LEN;
        if (packed && !pb_len(&r, &s)) goto bad;
        do {
            if (k >= n) goto bad;
            uint64_t u = 0;
            uint32_t x = 0;
            if (f == 4) {
                if (!pb_fixed32(&s, &x)) goto bad;
                float fl;
                memcpy(&fl, &x, 4);
                mp__store(dt, rv->own, k, 0, fl, true);
            } else if (f == 10) {
                if (!pb_fixed64(&s, &u)) goto bad;
                double d;
                memcpy(&d, &u, 8);
                mp__store(dt, rv->own, k, 0, d, true);
            } else {
                if (!pb_varint(&s, &u)) goto bad;
                if (dt == MP_DT_FLOAT16 || dt == MP_DT_BFLOAT16)
                    ((uint16_t *)rv->own)[k] = (uint16_t)u;
                else if (f == 5)
                    mp__store(dt, rv->own, k, (int32_t)(uint32_t)u, 0, false);
                else
                    mp__store(dt, rv->own, k, (int64_t)u, 0, false);
            }
            k++;
        } while (packed && pb_more(&s));
        if (!packed) r = s;
    }
    if (k != n) goto bad;
    return MP_OK;
bad:
    return mp_error(MP_ERR_FORMAT, "%s: tensor '%s': typed data does not match its %lld elements",
                    pl->m->path ? pl->m->path : "model", t->name, (long long)n);
}

static const void *mp__map_external(mp_plan *pl, const mp_tensor *t, size_t *size) {
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

void mp_run_unmap(mp_plan *pl) {
    for (int i = 0; i < pl->n_ext; i++) {
        munmap(pl->ext[i].map, pl->ext[i].size);
        free(pl->ext[i].path);
    }
    free(pl->ext);
    pl->ext = NULL;
    pl->n_ext = 0;
}

/* Bytes used in place when aligned for their dtype, else copied once. */
static mp_status mp__view(mp_plan *pl, int v, const uint8_t *p) {
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

mp_status mp_run_load_tensor(mp_plan *pl, int v, const mp_tensor *t) {
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
        if ((st = mp__own_bytes(pl, v, rv->bytes))) return st;
        mp__random_weight(pl, v);
        pl->random_weights = true;
        return MP_OK;
    }
    return mp_error(MP_ERR_FORMAT, "%s: tensor '%s': unknown data location", path, t->name);
}

/* The range of integer input v: within the gathered axis when it indexes
 * a Gather (token ids into an embedding), ones for masks, else {0, 1}. */
static void mp__int_range(const mp_plan *pl, int v, int64_t *lo, int64_t *hi) {
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

void mp_run_random_input(mp_plan *pl, int v) {
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

/* Element i of a buffer of dtype dt as an int64 (is_float false) or a
 * double; false for a dtype without numbers here. */
static bool mp__load(int dt, const void *buf, int64_t i, int64_t *iv, double *fv, bool *is_float) {
    *is_float = false;
    switch (dt) {
    case MP_DT_FLOAT: *fv = ((const float *)buf)[i]; *is_float = true; return true;
    case MP_DT_DOUBLE: *fv = ((const double *)buf)[i]; *is_float = true; return true;
    case MP_DT_FLOAT16: {
        uint16_t h = ((const uint16_t *)buf)[i];
        int e = (h >> 10) & 0x1f, f = h & 0x3ff;
        double v = e == 0 ? ldexp(f, -24) : e == 31 ? (f ? NAN : INFINITY) : ldexp(f + 1024, e - 25);
        *fv = (h & 0x8000) ? -v : v;
        *is_float = true;
        return true;
    }
    case MP_DT_BFLOAT16: {
        uint32_t x = (uint32_t)((const uint16_t *)buf)[i] << 16;
        float f;
        memcpy(&f, &x, 4);
        *fv = f;
        *is_float = true;
        return true;
    }
    case MP_DT_INT8: *iv = ((const int8_t *)buf)[i]; return true;
    case MP_DT_UINT8: case MP_DT_BOOL: *iv = ((const uint8_t *)buf)[i]; return true;
    case MP_DT_INT16: *iv = ((const int16_t *)buf)[i]; return true;
    case MP_DT_UINT16: *iv = ((const uint16_t *)buf)[i]; return true;
    case MP_DT_INT32: *iv = ((const int32_t *)buf)[i]; return true;
    case MP_DT_UINT32: *iv = ((const uint32_t *)buf)[i]; return true;
    case MP_DT_INT64: *iv = ((const int64_t *)buf)[i]; return true;
    case MP_DT_UINT64: *iv = (int64_t)((const uint64_t *)buf)[i]; return true;
    default: return false;
    }
}

bool mp_run_convert(int dst_dt, void *dst, int src_dt, const void *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        int64_t iv = 0;
        double fv = 0;
        bool fl;
        if (!mp__load(src_dt, src, i, &iv, &fv, &fl)) return false;
        mp__store(dst_dt, dst, i, iv, fv, fl);
    }
    return true;
}
