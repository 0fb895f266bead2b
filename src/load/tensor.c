/* Reading the contents of small tensors (shape constants). Weights are
 * never read: callers only ask for tensors up to MP_KNOWN_MAX elements. */
#include "load/load.h"
#include "load/pb.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

bool mp_path_inside(const char *dir, const char *file) {
    size_t dl = strlen(dir);
    if (dl == 1 && dir[0] == '/') return file[0] == '/' && file[1] != 0;
    return strncmp(file, dir, dl) == 0 && file[dl] == '/';
}

/* Open external data checked at load time (t->ext_path is its resolved
 * path inside the model's folder). No link is followed, nothing that is
 * not a regular file is read, and the file opened is checked again to be
 * inside the folder (the folder could have changed since the load). */
static int mp__open_external(const mp_model *m, const char *path) {
    if (!m->dir) return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return -1;
    struct stat st;
    char real_dir[PATH_MAX], link[64], real_file[PATH_MAX];
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && realpath(m->dir, real_dir)) {
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        n = readlink(link, real_file, sizeof real_file - 1);
        if (n < 0 && errno == ENOENT) { /* no /proc: the path itself */
            if (realpath(path, real_file)) n = (ssize_t)strlen(real_file);
        }
    }
    if (n <= 0 || (size_t)n >= sizeof real_file) {
        close(fd);
        return -1;
    }
    real_file[n] = 0;
    if (!mp_path_inside(real_dir, real_file)) {
        close(fd);
        return -1;
    }
    return fd;
}

int mp_external_open(const mp_model *m, const char *path) { return mp__open_external(m, path); }

/* A float stored in an integer tensor: saturated, NaN as 0 (a plain cast
 * of an out-of-range value is undefined). */
static int64_t mp__f2i(double x) {
    if (x != x) return 0;
    if (x >= 9.2233720368547758e18) return INT64_MAX;
    if (x <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)x;
}

/* Element i of little-endian raw bytes. */
static bool mp__raw_elem(int dt, const uint8_t *p, int64_t i, int64_t *iv, double *fv) {
    uint64_t u = 0;
    int bytes = mp_dtype_bits(dt) / 8;
    if (bytes <= 0) return false;
    for (int b = 0; b < bytes; b++) u |= (uint64_t)p[i * bytes + b] << (8 * b);
    switch (dt) {
    case MP_DT_FLOAT: *fv = pb_f32((uint32_t)u); return true;
    case MP_DT_DOUBLE: *fv = pb_f64(u); return true;
    case MP_DT_FLOAT16: *fv = mp_half_to_float((uint16_t)u); return true;
    case MP_DT_BFLOAT16: *fv = mp_bf16_to_float((uint16_t)u); return true;
    case MP_DT_INT8: *iv = (int8_t)u; return true;
    case MP_DT_UINT8: case MP_DT_BOOL: *iv = (int64_t)(uint8_t)u; return true;
    case MP_DT_INT16: *iv = (int16_t)u; return true;
    case MP_DT_UINT16: *iv = (uint16_t)u; return true;
    case MP_DT_INT32: *iv = (int32_t)u; return true;
    case MP_DT_UINT32: *iv = (uint32_t)u; return true;
    case MP_DT_INT64: *iv = (int64_t)u; return true;
    case MP_DT_UINT64: *iv = (int64_t)u; return true;
    default: return false;
    }
}

/* The shape tensors of exported graphs are int64 and fp32 scalars and
 * short vectors: on a little-endian machine those are plain copies. False
 * for the other dtypes (read element by element). */
static bool mp__raw_copy(int dt, const uint8_t *raw, int64_t n, int64_t *iv, double *fv) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (dt == MP_DT_INT64) {
        if (n) memcpy(iv, raw, (size_t)n * sizeof *iv);
        return true;
    }
    if (dt == MP_DT_FLOAT) {
        for (int64_t i = 0; i < n; i++) {
            float x;
            memcpy(&x, raw + 4 * i, 4);
            fv[i] = x;
        }
        return true;
    }
#endif
    return false;
}

/* The typed fields (float_data, int32_data, ...), packed or not: one call
 * of put per element, in order; false when they are malformed or their
 * count is not the tensor's. float_data and double_data give doubles;
 * fp16/bf16 bit patterns in int32_data give their values as doubles;
 * other varints give integers (int32_data sign-extended, except for the
 * unsigned 8/16-bit and bool types), as doubles for float dtypes. */
bool mp_tensor_typed_walk(const mp_tensor *t, mp_typed_put put, void *ctx) {
    pb r = pb_view(t->data, t->size);
    int64_t k = 0, n = t->numel;
    uint32_t f = 0;
    int w = 0;
    bool flt = mp_dtype_is_float(t->dtype);
    while (pb_more(&r)) {
        if (!pb_key(&r, &f, &w)) return false;
        if ((int)f != t->typed_field) {
            if (!pb_skip(&r, w)) return false;
            continue;
        }
        pb s = r;
        bool packed = w == PB_LEN;
        if (packed && !pb_len(&r, &s)) return false;
        do {
            if (k >= n) return false;
            uint64_t u;
            uint32_t x = 0;
            if (f == 4) { /* float_data */
                if (!pb_fixed32(&s, &x)) return false;
                put(ctx, k, 0, pb_f32(x), true);
            } else if (f == 10) { /* double_data */
                if (!pb_fixed64(&s, &u)) return false;
                put(ctx, k, 0, pb_f64(u), true);
            } else { /* int32_data, int64_data, uint64_data: varints */
                if (!pb_varint(&s, &u)) return false;
                if (t->dtype == MP_DT_FLOAT16) put(ctx, k, 0, mp_half_to_float((uint16_t)u), true);
                else if (t->dtype == MP_DT_BFLOAT16) put(ctx, k, 0, mp_bf16_to_float((uint16_t)u), true);
                else if (flt) put(ctx, k, 0, (double)(int64_t)u, true);
                else if (f == 5 && (t->dtype == MP_DT_UINT8 || t->dtype == MP_DT_UINT16 || t->dtype == MP_DT_BOOL))
                    put(ctx, k, (int64_t)(uint32_t)u, 0, false);
                else if (f == 5) put(ctx, k, (int32_t)(uint32_t)u, 0, false);
                else put(ctx, k, (int64_t)u, 0, false);
            }
            k++;
        } while (packed && pb_more(&s));
        if (!packed) r = s;
    }
    return k == n;
}

static void mp__scalar_put(void *ctx, int64_t k, int64_t iv, double fv, bool isf) {
    (void)k;
    *(double *)ctx = isf ? fv : (double)iv;
}

bool mp_tensor_scalar(const mp_tensor *t, double *out) {
    if (!t || t->numel != 1) return false;
    int64_t x = 0;
    double d = 0;
    if (t->loc == MP_DATA_RAW) {
        if (!t->data || t->size < mp_dtype_bytes(t->dtype, 1) || !mp__raw_elem(t->dtype, t->data, 0, &x, &d))
            return false;
        *out = mp_dtype_is_float(t->dtype) ? d : (double)x;
        return true;
    }
    if (t->loc == MP_DATA_TYPED) return mp_tensor_typed_walk(t, mp__scalar_put, out);
    return false;
}

typedef struct mp__read_ctx {
    int64_t *iv;
    double *fv;
} mp__read_ctx;

static void mp__read_put(void *ctx, int64_t k, int64_t iv, double fv, bool isf) {
    mp__read_ctx *c = ctx;
    if (c->fv) c->fv[k] = isf ? fv : (double)iv;
    else c->iv[k] = isf ? mp__f2i(fv) : iv;
}

mp_status mp_tensor_read(struct mp_model *m, const mp_tensor *t, int64_t **piv, double **pfv) {
    *piv = NULL;
    *pfv = NULL;
    int64_t n = t->numel;
    if (n < 0 || n > MP_KNOWN_MAX)
        return mp_error(MP_ERR_UNSUPPORTED, "tensor '%s' is too large to read", t->name);
    bool is_float = mp_dtype_is_float(t->dtype);
    if (!is_float && !mp_dtype_is_int(t->dtype))
        return mp_error(MP_ERR_UNSUPPORTED, "tensor '%s': dtype %s is not readable", t->name,
                        mp_dtype_name(t->dtype));
    if (mp_dtype_bits(t->dtype) < 8)
        return mp_error(MP_ERR_UNSUPPORTED, "tensor '%s': sub-byte dtype", t->name);
    int64_t *iv = NULL;
    double *fv = NULL;
    if (is_float)
        fv = mp_arena_calloc(&m->arena, (size_t)(n ? n : 1), sizeof *fv);
    else
        iv = mp_arena_calloc(&m->arena, (size_t)(n ? n : 1), sizeof *iv);
    if (!iv && !fv) return mp_error(MP_ERR_NOMEM, "out of memory");
    uint8_t *buf = NULL;
    const uint8_t *raw = NULL;
    switch (t->loc) {
    case MP_DATA_RAW:
        raw = t->data;
        break;
    case MP_DATA_EXTERNAL: {
        /* the loader checked the length against the dims: at most
         * MP_KNOWN_MAX elements here */
        uint64_t need = mp_dtype_bytes(t->dtype, n);
        if (t->ext_length != need || t->ext_offset > (uint64_t)INT64_MAX - need)
            return mp_error(MP_ERR_FORMAT, "%s: tensor '%s': bad external data range", m->path,
                            t->name);
        size_t len = (size_t)need;
        buf = malloc(len ? len : 1);
        if (!buf) return mp_error(MP_ERR_NOMEM, "out of memory");
        int fd = mp__open_external(m, t->ext_path);
        ssize_t got = fd >= 0 ? pread(fd, buf, len, (off_t)t->ext_offset) : -1;
        if (fd >= 0) close(fd);
        if (got != (ssize_t)len) {
            free(buf);
            return mp_error(MP_ERR_IO, "tensor '%s': cannot read external data from '%s'",
                            t->name, t->ext_path);
        }
        raw = buf;
        break;
    }
    case MP_DATA_TYPED: {
        mp__read_ctx rc = {iv, fv};
        if (!mp_tensor_typed_walk(t, mp__read_put, &rc))
            return mp_error(MP_ERR_FORMAT, "%s: tensor '%s': typed data does not match its %lld elements",
                            m->path, t->name, (long long)n);
        *piv = iv;
        *pfv = fv;
        return MP_OK;
    }
    case MP_DATA_ABSENT:
        return mp_error(MP_ERR_UNSUPPORTED, "tensor '%s': data is absent (weightless model)",
                        t->name);
    default:
        if (n == 0) {
            *piv = iv;
            *pfv = fv;
            return MP_OK;
        }
        return mp_error(MP_ERR_UNSUPPORTED, "tensor '%s' has no data", t->name);
    }
    if (!mp__raw_copy(t->dtype, raw, n, iv, fv)) {
        for (int64_t i = 0; i < n; i++) {
            int64_t x = 0;
            double d = 0;
            if (!mp__raw_elem(t->dtype, raw, i, &x, &d)) {
                free(buf);
                return mp_error(MP_ERR_UNSUPPORTED, "tensor '%s': dtype not readable", t->name);
            }
            if (fv)
                fv[i] = d;
            else
                iv[i] = x;
        }
    }
    free(buf);
    *piv = iv;
    *pfv = fv;
    return MP_OK;
}
