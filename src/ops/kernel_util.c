/* Shared machinery of the portable kernels (see kernel.h). */
#include "ops/kernel.h"
#include "ops/scalar.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

mp_status mp_kfail(const mp_kctx *k, mp_status st, const char *fmt, ...) {
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *name = k && k->n && k->n->name && k->n->name[0] ? k->n->name : "?";
    const char *op = k && k->n && k->n->op ? k->n->op : "?";
    return mp_error(st, "run: node '%s' (%s): %s", name, op, msg);
}

/* ---- what kernels ask of the executor (ops.h: mp_kexec) ---- */

static mp_status ku_noexec(const mp_kctx *k, const char *what) {
    const char *name = k && k->n && k->n->name && k->n->name[0] ? k->n->name : "?";
    return mp_error(MP_ERR_USAGE, "node '%s': %s needs a plan (the kernel runs alone)", name, what);
}

mp_status mp_kfuse(mp_kctx *k, int node) {
    if (k && k->fuse && k->exec && k->exec->fuse) return k->exec->fuse(k, node);
    return ku_noexec(k, "fusing a node");
}

mp_status mp_kfuse_nodes(mp_kctx *k, const int *nodes, int n) {
    if (k && k->fuse && k->exec && k->exec->fuse_nodes) return k->exec->fuse_nodes(k, nodes, n);
    return ku_noexec(k, "fusing nodes");
}

mp_status mp_kout_alloc(mp_kctx *k, int i, int rank, const int64_t *dims) {
    if (k && k->exec && k->exec->out_alloc) return k->exec->out_alloc(k, i, rank, dims);
    return ku_noexec(k, "an output shaped at run time");
}

const mp_rtensor *mp_kvalue(const mp_kctx *k, int v) {
    return k && k->exec && k->exec->value ? k->exec->value(k, v) : NULL;
}

const float *mp_kinput_f32(mp_kctx *k, int i) {
    return k && k->exec && k->exec->input_f32 ? k->exec->input_f32(k, i) : NULL;
}

void mp_kshare(mp_kctx *k, int i) {
    if (k && k->exec && k->exec->share) k->exec->share(k, i);
}

void mp_kparallel(mp_kctx *k, int64_t n, mp_range_fn fn, void *arg) {
    if (n <= 0) return;
    if (k && k->exec && k->exec->parallel) k->exec->parallel(k, n, fn, arg);
    else fn(arg, 0, n);
}

mp_status mp_kout_known(const mp_kctx *k) {
    for (int i = 0; i < k->n_out; i++)
        if (k->n->out[i] >= 0 && !k->out[i].data)
            return mp_kfail(k, MP_ERR_UNSUPPORTED, "output %d: its shape depends on input values the "
                            "static inference did not know", i);
    return MP_OK;
}

mp_status mp_kout_shape(mp_kctx *k, int i, int rank, const int64_t *dims) {
    mp_rtensor *o = &k->out[i];
    if (!o->data) return mp_kout_alloc(k, i, rank, dims);
    bool same = o->rank == rank;
    for (int d = 0; same && d < rank; d++) same = o->dims[d] == dims[d];
    if (!same) return mp_kfail(k, MP_ERR_SHAPE, "output %d: the data give another shape than the planned one", i);
    return MP_OK;
}

bool mp_kdtype_ok(int dt) {
    switch (dt) {
    case MP_DT_FLOAT: case MP_DT_DOUBLE: case MP_DT_FLOAT16: case MP_DT_BFLOAT16:
    case MP_DT_INT8: case MP_DT_UINT8: case MP_DT_INT16: case MP_DT_UINT16:
    case MP_DT_INT32: case MP_DT_UINT32: case MP_DT_INT64: case MP_DT_UINT64:
    case MP_DT_BOOL: case MP_DT_FLOAT8E4M3FN: case MP_DT_FLOAT8E4M3FNUZ:
    case MP_DT_FLOAT8E5M2: case MP_DT_FLOAT8E5M2FNUZ: case MP_DT_INT4: case MP_DT_UINT4:
        return true;
    default:
        return false;
    }
}

/* ---- element access ---- */

static int64_t ku_nibble(const void *data, int dt, int64_t i) {
    uint8_t b = ((const uint8_t *)data)[i >> 1];
    int v = (i & 1) ? b >> 4 : b & 15;
    return dt == MP_DT_INT4 && (v & 8) ? v - 16 : v;
}

double mp_kget_f(const void *data, int dt, int64_t i) {
    switch (dt) {
    case MP_DT_FLOAT: return ((const float *)data)[i];
    case MP_DT_DOUBLE: return ((const double *)data)[i];
    case MP_DT_FLOAT16: return mp_half_to_float(((const uint16_t *)data)[i]);
    case MP_DT_BFLOAT16: return mp_bf16_to_float(((const uint16_t *)data)[i]);
    case MP_DT_FLOAT8E4M3FN: case MP_DT_FLOAT8E4M3FNUZ: case MP_DT_FLOAT8E5M2:
    case MP_DT_FLOAT8E5M2FNUZ:
        return mp_fp8_to_float(((const uint8_t *)data)[i], dt);
    case MP_DT_UINT64: return (double)((const uint64_t *)data)[i];
    default: /* integers; other dtypes (strings, complex, fp4) read as 0 */
        return mp_dtype_is_int(dt) ? (double)mp_kget_i(data, dt, i) : 0.0;
    }
}

int64_t mp_kget_i(const void *data, int dt, int64_t i) {
    switch (dt) {
    case MP_DT_INT8: return ((const int8_t *)data)[i];
    case MP_DT_UINT8: return ((const uint8_t *)data)[i];
    case MP_DT_BOOL: return ((const uint8_t *)data)[i] != 0;
    case MP_DT_INT16: return ((const int16_t *)data)[i];
    case MP_DT_UINT16: return ((const uint16_t *)data)[i];
    case MP_DT_INT32: return ((const int32_t *)data)[i];
    case MP_DT_UINT32: return ((const uint32_t *)data)[i];
    case MP_DT_INT64: return ((const int64_t *)data)[i];
    case MP_DT_UINT64: return (int64_t)((const uint64_t *)data)[i];
    case MP_DT_INT4: case MP_DT_UINT4: return ku_nibble(data, dt, i);
    default: {
        if (!mp_dtype_is_float(dt)) return 0; /* strings, complex: no integer reading */
        double v = mp_kget_f(data, dt, i);
        if (!(v > -9.2e18 && v < 9.2e18)) return v > 0 ? INT64_MAX : v < 0 ? INT64_MIN : 0;
        return (int64_t)v;
    }
    }
}

static void ku_set_nibble(void *data, int64_t i, int64_t v) {
    uint8_t *b = (uint8_t *)data + (i >> 1);
    if (i & 1) *b = (uint8_t)((*b & 0x0f) | ((v & 15) << 4));
    else *b = (uint8_t)((*b & 0xf0) | (v & 15));
}

void mp_kset_i(void *data, int dt, int64_t i, int64_t v) {
    switch (dt) {
    case MP_DT_INT8: ((int8_t *)data)[i] = (int8_t)v; return;
    case MP_DT_UINT8: ((uint8_t *)data)[i] = (uint8_t)v; return;
    case MP_DT_BOOL: ((uint8_t *)data)[i] = v != 0; return;
    case MP_DT_INT16: ((int16_t *)data)[i] = (int16_t)v; return;
    case MP_DT_UINT16: ((uint16_t *)data)[i] = (uint16_t)v; return;
    case MP_DT_INT32: ((int32_t *)data)[i] = (int32_t)v; return;
    case MP_DT_UINT32: ((uint32_t *)data)[i] = (uint32_t)v; return;
    case MP_DT_INT64: ((int64_t *)data)[i] = v; return;
    case MP_DT_UINT64: ((uint64_t *)data)[i] = (uint64_t)v; return;
    case MP_DT_INT4: case MP_DT_UINT4: ku_set_nibble(data, i, v); return;
    default:
        if (mp_dtype_is_float(dt)) mp_kset_f(data, dt, i, (double)v);
        return; /* strings, complex: not written */
    }
}

/* double to an integer type as C casts do, without undefined behaviour. */
static int64_t ku_ftoi(double v) {
    if (isnan(v)) return INT64_MIN;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)v;
}

void mp_kset_f(void *data, int dt, int64_t i, double v) {
    switch (dt) {
    case MP_DT_FLOAT: ((float *)data)[i] = (float)v; return;
    case MP_DT_DOUBLE: ((double *)data)[i] = v; return;
    case MP_DT_FLOAT16: ((uint16_t *)data)[i] = mp_float_to_half((float)v); return;
    case MP_DT_BFLOAT16: ((uint16_t *)data)[i] = mp_float_to_bf16((float)v); return;
    case MP_DT_FLOAT8E4M3FN: case MP_DT_FLOAT8E4M3FNUZ: case MP_DT_FLOAT8E5M2:
    case MP_DT_FLOAT8E5M2FNUZ:
        ((uint8_t *)data)[i] = mp_float_to_fp8((float)v, dt, true);
        return;
    case MP_DT_BOOL: ((uint8_t *)data)[i] = v != 0; return;
    case MP_DT_UINT64:
        ((uint64_t *)data)[i] = v >= 9.2233720368547758e18 ? (uint64_t)(v - 9.2233720368547758e18) + (1ull << 63)
                                                           : (uint64_t)ku_ftoi(v);
        return;
    case MP_DT_UINT32: ((uint32_t *)data)[i] = (uint32_t)ku_ftoi(v); return;
    default:
        if (mp_dtype_is_int(dt)) mp_kset_i(data, dt, i, ku_ftoi(v));
        return; /* strings, complex, fp4: not written */
    }
}

void mp_kconvert(void *dst, int ddt, const void *src, int sdt, int64_t n) {
    if (ddt == sdt && mp_kesize(ddt)) {
        if (dst != src) memmove(dst, src, (size_t)n * mp_kesize(ddt));
        return;
    }
    if (sdt == MP_DT_FLOAT && ddt == MP_DT_FLOAT16) {
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = mp_float_to_half(((const float *)src)[i]);
    } else if (sdt == MP_DT_FLOAT16 && ddt == MP_DT_FLOAT) {
        for (int64_t i = 0; i < n; i++)
            ((float *)dst)[i] = mp_half_to_float(((const uint16_t *)src)[i]);
    } else if (mp_kis_float(sdt) || sdt == MP_DT_UINT64) {
        for (int64_t i = 0; i < n; i++) mp_kset_f(dst, ddt, i, mp_kget_f(src, sdt, i));
    } else {
        for (int64_t i = 0; i < n; i++) mp_kset_i(dst, ddt, i, mp_kget_i(src, sdt, i));
    }
}

int64_t mp_kints(const mp_rtensor *t, int64_t *v, int64_t cap) {
    if (!t || !t->data) return -1;
    int64_t n = t->numel < cap ? t->numel : cap;
    for (int64_t i = 0; i < n; i++) v[i] = mp_kget_i(t->data, t->dtype, i);
    return n;
}

void mp_kstrides(int rank, const int64_t *dims, int64_t *strides) {
    uint64_t s = 1; /* wraps instead of overflowing when a tensor is empty */
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = (int64_t)s;
        s *= (uint64_t)dims[i];
    }
}

void mp_kfill(void *dst, int64_t n, const void *v, size_t es) {
    if (n <= 0 || !es) return;
    const unsigned char *b = v;
    bool same = true;
    for (size_t i = 1; i < es && same; i++) same = b[i] == b[0];
    size_t total = (size_t)n * es;
    if (same) {
        memset(dst, b[0], total);
        return;
    }
    char *d = dst;
    memcpy(d, v, es);
    for (size_t done = es; done < total;) {
        size_t c = done < total - done ? done : total - done;
        memcpy(d + done, d, c);
        done += c;
    }
}

void mp_kcopy_strided(void *out, const void *in, size_t es, int rank, const int64_t *dims,
                      const int64_t *istr, int64_t base) {
    int64_t numel = 1;
    for (int i = 0; i < rank; i++) numel *= dims[i];
    if (numel <= 0) return;
    if (rank == 0) {
        mp_kcopy1(out, 0, in, base, es);
        return;
    }
    /* dims of extent 1 dropped; a dim merged into the one after it when
     * their strides continue each other (contiguous runs, and broadcast
     * runs: both strides 0), so the inner loop runs as long as it can */
    int64_t cd[MP_MAX_RANK], cs[MP_MAX_RANK];
    int cr = 0;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 1) continue;
        if (cr > 0 && cs[cr - 1] == istr[i] * dims[i]) {
            cd[cr - 1] *= dims[i];
            cs[cr - 1] = istr[i];
            continue;
        }
        cd[cr] = dims[i], cs[cr] = istr[i], cr++;
    }
    if (cr == 0) cd[0] = 1, cs[0] = 0, cr = 1;
    int64_t idx[MP_MAX_RANK] = {0}, off = base, len = cd[cr - 1], s = cs[cr - 1];
    char *o = out;
    const char *src = in;
    for (int64_t done = 0; done < numel; done += len) {
        if (s == 1) {
            memcpy(o, src + (size_t)off * es, (size_t)len * es);
        } else if (s == 0) {
            mp_kfill(o, len, src + (size_t)off * es, es);
        } else if (es == 4) {
            for (int64_t j = 0; j < len; j++) memcpy(o + j * 4, src + (size_t)(off + j * s) * 4, 4);
        } else if (es == 2) {
            for (int64_t j = 0; j < len; j++) memcpy(o + j * 2, src + (size_t)(off + j * s) * 2, 2);
        } else if (es == 1) {
            for (int64_t j = 0; j < len; j++) o[j] = src[off + j * s];
        } else if (es == 8) {
            for (int64_t j = 0; j < len; j++) memcpy(o + j * 8, src + (size_t)(off + j * s) * 8, 8);
        } else {
            for (int64_t j = 0; j < len; j++) memcpy(o + (size_t)j * es, src + (size_t)(off + j * s) * es, es);
        }
        o += (size_t)len * es;
        for (int d = cr - 2; d >= 0; d--) {
            off += cs[d];
            if (++idx[d] < cd[d]) break;
            off -= cs[d] * cd[d];
            idx[d] = 0;
        }
    }
}

/* ---- broadcast rows ---- */

void mp_kbcast_init(mp_kbcast *it, int out_rank, const int64_t *out_dims, int n,
                    const int *ranks, const int64_t *const *dims) {
    int64_t st[MP_KB_MAX][MP_MAX_RANK];
    int64_t od[MP_MAX_RANK];
    int r = 0;
    it->n = n;
    it->rank = 0;
    for (int k = 0; k < n; k++) it->off[k] = it->step[k] = 0;
    for (int i = 0; i < out_rank; i++)
        if (out_dims[i] == 0) { /* nothing to walk (and dims may be absurd) */
            it->len = it->rows = 0;
            return;
        }
    /* per-input strides in the output's index space; size-1 output dims dropped */
    for (int i = 0; i < out_rank; i++) {
        if (out_dims[i] == 1) continue;
        od[r] = out_dims[i];
        for (int k = 0; k < n; k++) {
            int j = i - (out_rank - ranks[k]);
            int64_t s = 0;
            if (j >= 0 && dims[k][j] != 1) {
                s = 1;
                for (int q = j + 1; q < ranks[k]; q++) s *= dims[k][q];
            }
            st[k][r] = s;
        }
        r++;
    }
    /* merge dim i into i+1 when every input is contiguous across them */
    int m = 0;
    for (int i = 0; i < r; i++) {
        if (m > 0) {
            bool merge = true;
            for (int k = 0; k < n && merge; k++)
                merge = st[k][m - 1] == st[k][i] * od[i];
            if (merge) {
                od[m - 1] *= od[i];
                for (int k = 0; k < n; k++) st[k][m - 1] = st[k][i];
                continue;
            }
        }
        od[m] = od[i];
        for (int k = 0; k < n; k++) st[k][m] = st[k][i];
        m++;
    }
    int64_t numel = 1;
    for (int i = 0; i < out_rank; i++) numel *= out_dims[i];
    if (m == 0) {
        it->len = numel;
        it->rows = numel ? 1 : 0;
        it->rank = 0;
        for (int k = 0; k < n; k++) it->step[k] = 0;
    } else {
        it->len = od[m - 1];
        it->rank = m - 1;
        it->rows = it->len ? numel / it->len : 0;
        for (int k = 0; k < n; k++) it->step[k] = st[k][m - 1];
    }
    for (int i = 0; i < it->rank; i++) {
        it->dims[i] = od[i];
        it->idx[i] = 0;
        for (int k = 0; k < n; k++) it->stride[k][i] = st[k][i];
    }
    for (int k = 0; k < n; k++) it->off[k] = 0;
}

void mp_kbcast_node(mp_kbcast *it, const mp_kctx *k, int first, int n) {
    int ranks[MP_KB_MAX];
    const int64_t *dims[MP_KB_MAX];
    for (int i = 0; i < n && i < MP_KB_MAX; i++) {
        ranks[i] = k->in[first + i].rank;
        dims[i] = k->in[first + i].dims;
    }
    mp_kbcast_init(it, k->out[0].rank, k->out[0].dims, n < MP_KB_MAX ? n : MP_KB_MAX, ranks, dims);
}

void mp_kbcast_next(mp_kbcast *it) {
    for (int i = it->rank - 1; i >= 0; i--) {
        for (int k = 0; k < it->n; k++) it->off[k] += it->stride[k][i];
        if (++it->idx[i] < it->dims[i]) return;
        for (int k = 0; k < it->n; k++) it->off[k] -= it->stride[k][i] * it->dims[i];
        it->idx[i] = 0;
    }
}

void mp_kbcast_seek(mp_kbcast *it, int64_t r) {
    for (int k = 0; k < it->n; k++) it->off[k] = 0;
    for (int i = it->rank - 1; i >= 0; i--) {
        it->idx[i] = r % it->dims[i];
        r /= it->dims[i];
        for (int k = 0; k < it->n; k++) it->off[k] += it->idx[i] * it->stride[k][i];
    }
}

/* ---- axes ---- */

bool mp_kaxes_mask(const int64_t *axes, int64_t n, int rank, bool all_default, uint64_t *mask) {
    *mask = 0;
    if (n < 0) {
        if (all_default)
            for (int i = 0; i < rank; i++) *mask |= 1ull << i;
        return true;
    }
    for (int64_t i = 0; i < n; i++) {
        int a = mp_axis(axes[i], rank);
        if (a < 0) return false;
        *mask |= 1ull << a;
    }
    return true;
}

void mp_kouter_inner(int rank, const int64_t *dims, int axis, int64_t *outer, int64_t *inner) {
    uint64_t o = 1, n = 1; /* wraps instead of overflowing when a tensor is empty */
    for (int i = 0; i < axis; i++) o *= (uint64_t)dims[i];
    for (int i = axis + 1; i < rank; i++) n *= (uint64_t)dims[i];
    *outer = (int64_t)o;
    *inner = (int64_t)n;
}

void *mp_kstate_new(mp_kctx *k, size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (p) k->state = p;
    return p;
}

void mp_kstate_release(void *state) { free(state); }

/* ---- matrix products ---- */

#define KU_MB 64
#define KU_KB 256
#define KU_NB 512

/* One definition for both element types: rows of C accumulate a * B-row,
 * a loop the compiler vectorizes; B is packed when its rows are strided. */
#define KU_GEMM(name, T)                                                                    \
    void name(int64_t M, int64_t N, int64_t K, const T *A, int64_t ars, int64_t acs,        \
              const T *B, int64_t brs, int64_t bcs, T *C, int64_t ldc, bool acc) {          \
        if (!acc)                                                                           \
            for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, sizeof(T) * (size_t)N);  \
        if (M <= 0 || N <= 0 || K <= 0) return;                                             \
        T *pack = NULL;                                                                     \
        if (bcs != 1) {                                                                     \
            pack = malloc(sizeof(T) * (size_t)K * (size_t)N);                               \
            if (pack) {                                                                     \
                for (int64_t k = 0; k < K; k++)                                             \
                    for (int64_t j = 0; j < N; j++) pack[k * N + j] = B[k * brs + j * bcs]; \
                B = pack, brs = N, bcs = 1;                                                 \
            }                                                                               \
        }                                                                                   \
        for (int64_t j0 = 0; j0 < N; j0 += KU_NB) {                                         \
            int64_t nb = N - j0 < KU_NB ? N - j0 : KU_NB;                                   \
            for (int64_t k0 = 0; k0 < K; k0 += KU_KB) {                                     \
                int64_t kb = K - k0 < KU_KB ? K - k0 : KU_KB;                               \
                for (int64_t i = 0; i < M; i++) {                                           \
                    T *c = C + i * ldc + j0;                                                \
                    const T *a = A + i * ars + k0 * acs;                                    \
                    if (bcs == 1) {                                                         \
                        int64_t k = 0;                                                      \
                        for (; k + 4 <= kb; k += 4) {                                       \
                            T a0 = a[k * acs], a1 = a[(k + 1) * acs], a2 = a[(k + 2) * acs], \
                              a3 = a[(k + 3) * acs];                                        \
                            const T *b0 = B + (k0 + k) * brs + j0, *b1 = b0 + brs,          \
                                    *b2 = b1 + brs, *b3 = b2 + brs;                         \
                            for (int64_t j = 0; j < nb; j++)                                \
                                c[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];  \
                        }                                                                   \
                        for (; k < kb; k++) {                                               \
                            T av = a[k * acs];                                              \
                            const T *b = B + (k0 + k) * brs + j0;                           \
                            for (int64_t j = 0; j < nb; j++) c[j] += av * b[j];             \
                        }                                                                   \
                    } else {                                                                \
                        for (int64_t k = 0; k < kb; k++)                                    \
                            for (int64_t j = 0; j < nb; j++)                                \
                                c[j] += a[k * acs] * B[(k0 + k) * brs + (j0 + j) * bcs];    \
                    }                                                                       \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
        free(pack);                                                                         \
    }
KU_GEMM(mp_kgemm_f32, float)
KU_GEMM(mp_kgemm_f64, double)
#undef KU_GEMM

/* ---- windows ---- */

mp_status mp_kwin_read(const mp_kctx *k, int nsp, const int64_t *in, const int64_t *out,
                       const int64_t *kernel, mp_kwin *w) {
    const mp_node *n = k->n;
    const int64_t *v;
    if (nsp < 0 || nsp > MP_MAX_RANK) return mp_kfail(k, MP_ERR_SHAPE, "bad spatial rank");
    w->k = nsp;
    int ns = mp_attr_ints(n, "strides", &v);
    for (int i = 0; i < nsp; i++) w->stride[i] = ns == nsp ? v[i] : 1;
    int nd = mp_attr_ints(n, "dilations", &v);
    for (int i = 0; i < nsp; i++) w->dil[i] = nd == nsp ? v[i] : 1;
    int np = mp_attr_ints(n, "pads", &v);
    const char *ap = mp_attr_s(n, "auto_pad", "NOTSET");
    for (int i = 0; i < nsp; i++) {
        w->in[i] = in[i];
        w->out[i] = out[i];
        w->kernel[i] = kernel[i];
        w->pad[i] = np == 2 * nsp ? v[i] : 0;
        if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
            int64_t total = (out[i] - 1) * w->stride[i] + (kernel[i] - 1) * w->dil[i] + 1 - in[i];
            if (total < 0) total = 0;
            w->pad[i] = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
        } else if (!strcmp(ap, "VALID")) {
            w->pad[i] = 0;
        }
    }
    return MP_OK;
}

#define KU_IM2COL(name, T)                                                                  \
    void name(const T *x, int64_t C, const mp_kwin *w, T *col, T pad_value) {              \
        int64_t kn = 1, on = 1, in_n = 1;                                                   \
        for (int i = 0; i < w->k; i++) kn *= w->kernel[i], on *= w->out[i], in_n *= w->in[i]; \
        int64_t kidx[MP_MAX_RANK], oidx[MP_MAX_RANK];                                       \
        for (int64_t c = 0; c < C; c++)                                                     \
            for (int64_t kp = 0; kp < kn; kp++) {                                           \
                int64_t r = kp;                                                             \
                for (int i = w->k - 1; i >= 0; i--) kidx[i] = r % w->kernel[i], r /= w->kernel[i]; \
                T *dst = col + (c * kn + kp) * on;                                          \
                for (int i = 0; i < w->k; i++) oidx[i] = 0;                                 \
                int64_t last = w->k ? w->out[w->k - 1] : 1;                                 \
                for (int64_t op = 0; op < on; op += last) {                                 \
                    int64_t off = 0;                                                        \
                    bool inside = true;                                                     \
                    for (int i = 0; i + 1 < w->k; i++) {                                    \
                        int64_t p = oidx[i] * w->stride[i] - w->pad[i] + kidx[i] * w->dil[i]; \
                        if (p < 0 || p >= w->in[i]) inside = false;                         \
                        off = off * w->in[i] + p;                                           \
                    }                                                                       \
                    int l = w->k - 1;                                                       \
                    if (l < 0) {                                                            \
                        dst[op] = x[c * in_n];                                              \
                    } else if (!inside) {                                                   \
                        for (int64_t j = 0; j < last; j++) dst[op + j] = pad_value;         \
                    } else {                                                                \
                        const T *row = x + c * in_n + off * w->in[l];                       \
                        int64_t p0 = -w->pad[l] + kidx[l] * w->dil[l], s = w->stride[l];    \
                        for (int64_t j = 0; j < last; j++) {                                \
                            int64_t p = p0 + j * s;                                         \
                            dst[op + j] = p >= 0 && p < w->in[l] ? row[p] : pad_value;      \
                        }                                                                   \
                    }                                                                       \
                    for (int i = w->k - 2; i >= 0; i--) {                                   \
                        if (++oidx[i] < w->out[i]) break;                                   \
                        oidx[i] = 0;                                                        \
                    }                                                                       \
                }                                                                           \
            }                                                                               \
    }
KU_IM2COL(mp_kim2col_f32, float)
KU_IM2COL(mp_kim2col_f64, double)
#undef KU_IM2COL

mp_status mp_kconv_geom(const mp_kctx *k, const mp_rtensor *x, const mp_rtensor *w, const mp_rtensor *b,
                        const mp_rtensor *y, mp_kconvg *c) {
    int nsp = x->rank - 2;
    if (nsp < 1 || w->rank != x->rank || y->rank != x->rank)
        return mp_kfail(k, MP_ERR_SHAPE, "X, W and Y differ in rank");
    mp_status st = mp_kwin_read(k, nsp, x->dims + 2, y->dims + 2, w->dims + 2, &c->win);
    if (st) return st;
    c->N = x->dims[0], c->C = x->dims[1], c->M = w->dims[0], c->G = mp_attr_i(k->n, "group", 1);
    if (c->G < 1 || c->C % c->G || c->M % c->G)
        return mp_kfail(k, MP_ERR_SHAPE, "group %lld does not divide the channels", (long long)c->G);
    c->cg = c->C / c->G, c->mg = c->M / c->G, c->kn = 1, c->on = 1, c->in_n = 1;
    if (w->dims[1] != c->cg || (b && b->numel < c->M) || y->dims[1] != c->M || y->dims[0] != c->N)
        return mp_kfail(k, MP_ERR_SHAPE, "W, B and Y do not match X's channels and the group");
    for (int i = 0; i < nsp; i++) c->kn *= c->win.kernel[i], c->on *= c->win.out[i], c->in_n *= c->win.in[i];
    return MP_OK;
}

mp_status mp_kconv_f32(const mp_kctx *k, const mp_kconvg *c, const float *x, const float *w, const float *b,
                       float *y, mp_kconv_gemm_fn gemm, void *ctx) {
    if (c->N == 0 || c->M == 0 || c->on == 0) return MP_OK;
    int64_t K = c->cg * c->kn;
    float *col = malloc(sizeof(float) * (size_t)(K * c->on + 1));
    if (!col) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    mp_status st = MP_OK;
    for (int64_t n = 0; n < c->N && !st; n++)
        for (int64_t g = 0; g < c->G && !st; g++) {
            float *ys = y + (n * c->M + g * c->mg) * c->on;
            mp_kim2col_f32(x + (n * c->C + g * c->cg) * c->in_n, c->cg, &c->win, col, 0.0f);
            if ((st = gemm(ctx, c->mg, c->on, K, w + g * c->mg * K, col, ys))) break;
            for (int64_t m = 0; b && m < c->mg; m++) {
                float bv = b[g * c->mg + m];
                for (int64_t j = 0; j < c->on; j++) ys[m * c->on + j] += bv;
            }
        }
    free(col);
    return st;
}

mp_status mp_kconv_f64(const mp_kctx *k, const double *x, const mp_rtensor *xt, const double *w,
                       const mp_rtensor *wt, const double *b, double *y, const mp_rtensor *yt) {
    mp_kconvg c;
    mp_status st = mp_kconv_geom(k, xt, wt, NULL, yt, &c);
    if (st) return st;
    int64_t K = c.cg * c.kn;
    double *col = malloc(sizeof(double) * (size_t)(K * c.on + 1));
    if (!col) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t n = 0; n < c.N; n++)
        for (int64_t g = 0; g < c.G; g++) {
            double *ys = y + (n * c.M + g * c.mg) * c.on;
            mp_kim2col_f64(x + (n * c.C + g * c.cg) * c.in_n, c.cg, &c.win, col, 0.0);
            mp_kgemm_f64(c.mg, c.on, K, w + g * c.mg * K, K, 1, col, c.on, 1, ys, c.on, false);
            for (int64_t m = 0; b && m < c.mg; m++)
                for (int64_t j = 0; j < c.on; j++) ys[m * c.on + j] += b[g * c.mg + m];
        }
    free(col);
    return MP_OK;
}

/* Saturating round-half-to-even into an integer dtype. */
void mp_kquant_store(void *y, int dt, int64_t i, double v) {
    if (dt >= MP_DT_FLOAT8E4M3FN && dt <= MP_DT_FLOAT8E5M2FNUZ) {
        mp_kset_f(y, dt, i, v);
        return;
    }
    double lo = dt == MP_DT_UINT8 ? 0 : dt == MP_DT_INT8 ? -128 : dt == MP_DT_UINT16 ? 0 : dt == MP_DT_INT16 ? -32768
              : dt == MP_DT_INT4 ? -8 : dt == MP_DT_UINT4 ? 0 : dt == MP_DT_INT32 ? -2147483648.0 : 0;
    double hi = dt == MP_DT_UINT8 ? 255 : dt == MP_DT_INT8 ? 127 : dt == MP_DT_UINT16 ? 65535 : dt == MP_DT_INT16 ? 32767
              : dt == MP_DT_INT4 ? 7 : dt == MP_DT_UINT4 ? 15 : dt == MP_DT_INT32 ? 2147483647.0 : 4294967295.0;
    v = nearbyint(v);
    v = v < lo ? lo : v > hi ? hi : v; /* NaN stays NaN: mp_kf2i makes it 0 */
    mp_kset_i(y, dt, i, mp_kf2i(v));
}


double mp_kcubic(double d, double a) {
    d = fabs(d);
    if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
    if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
    return 0;
}

/* numpy matmul over broadcast batch dims; a 1-D A is [1, K], a 1-D B
 * [K, 1]; ta/tb: the last two dims of A/B are stored transposed. Work
 * units are blocks of KU_MB rows of one batch matrix, split across k's
 * threads (k NULL: serial). */
typedef struct ku_mm {
    mp_kbcast it;
    int64_t M, N, K, ars, acs, brs, bcs, mblocks;
    bool f32;
    const void *A, *B;
    void *Y;
} ku_mm;

static void ku_mm_range(void *arg, int64_t lo, int64_t hi) {
    const ku_mm *p = arg;
    mp_kbcast it = p->it;
    for (int64_t u = lo; u < hi; u++) {
        int64_t yb = u / p->mblocks, i0 = (u % p->mblocks) * KU_MB;
        int64_t m = p->M - i0 < KU_MB ? p->M - i0 : KU_MB;
        int64_t r = it.len ? yb / it.len : 0, j = it.len ? yb % it.len : 0;
        mp_kbcast_seek(&it, r);
        int64_t ao = (it.off[0] + j * it.step[0]) * p->M * p->K + i0 * p->ars;
        int64_t bo = (it.off[1] + j * it.step[1]) * p->K * p->N, yo = yb * p->M * p->N + i0 * p->N;
        if (p->f32)
            mp_kgemm_f32(m, p->N, p->K, (const float *)p->A + ao, p->ars, p->acs, (const float *)p->B + bo, p->brs,
                         p->bcs, (float *)p->Y + yo, p->N, false);
        else
            mp_kgemm_f64(m, p->N, p->K, (const double *)p->A + ao, p->ars, p->acs, (const double *)p->B + bo, p->brs,
                         p->bcs, (double *)p->Y + yo, p->N, false);
    }
}

void mp_kmatmul_par(mp_kctx *k, const mp_rtensor *a, const mp_rtensor *b, const mp_rtensor *y, bool f32,
                    const void *A, const void *B, void *Y, bool ta, bool tb) {
    int ar = a->rank, br = b->rank;
    int64_t a0 = ar >= 2 ? a->dims[ar - 2] : 1, a1 = a->dims[ar - 1];
    int64_t b0 = br >= 2 ? b->dims[br - 2] : b->dims[0], b1 = br >= 2 ? b->dims[br - 1] : 1;
    ku_mm p;
    p.M = ta ? a1 : a0, p.K = ta ? a0 : a1, p.N = tb ? b0 : b1;
    int abr = ar > 2 ? ar - 2 : 0, bbr = br > 2 ? br - 2 : 0;
    int ybr = abr > bbr ? abr : bbr;
    int64_t ybd[MP_MAX_RANK], nb = 1;
    for (int i = 0; i < ybr; i++) {
        int ia = i - (ybr - abr), ib = i - (ybr - bbr);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        ybd[i] = da == 1 ? db : da;
        nb *= ybd[i];
    }
    int ranks[2] = {abr, bbr};
    const int64_t *dims[2] = {a->dims, b->dims};
    mp_kbcast_init(&p.it, ybr, ybd, 2, ranks, dims);
    p.ars = ta ? 1 : p.K, p.acs = ta ? p.M : 1, p.brs = tb ? 1 : p.N, p.bcs = tb ? p.K : 1;
    p.mblocks = (p.M + KU_MB - 1) / KU_MB;
    p.f32 = f32, p.A = A, p.B = B, p.Y = Y;
    if (nb <= 0 || p.M <= 0 || p.N <= 0) return;
    if (p.K <= 0) { /* an empty sum */
        for (int64_t e = 0; e < nb * p.M * p.N; e++)
            if (f32) ((float *)Y)[e] = 0;
            else ((double *)Y)[e] = 0;
        return;
    }
    int64_t units = nb * p.mblocks;
    if (k) mp_kparallel(k, units, ku_mm_range, &p);
    else ku_mm_range(&p, 0, units);
}

/* One fp32 GEMM with its rows split in blocks of KU_MB across k's threads. */
typedef struct ku_gemm {
    int64_t M, N, K, ars, acs, brs, bcs, ldc;
    const float *A, *B;
    float *C;
} ku_gemm;

static void ku_gemm_range(void *arg, int64_t lo, int64_t hi) {
    const ku_gemm *p = arg;
    for (int64_t u = lo; u < hi; u++) {
        int64_t i0 = u * KU_MB, m = p->M - i0 < KU_MB ? p->M - i0 : KU_MB;
        mp_kgemm_f32(m, p->N, p->K, p->A + i0 * p->ars, p->ars, p->acs, p->B, p->brs, p->bcs, p->C + i0 * p->ldc,
                     p->ldc, false);
    }
}

void mp_kgemm_f32_par(mp_kctx *k, int64_t M, int64_t N, int64_t K, const float *A, int64_t ars, int64_t acs,
                      const float *B, int64_t brs, int64_t bcs, float *C, int64_t ldc) {
    ku_gemm p = {M, N, K, ars, acs, brs, bcs, ldc, A, B, C};
    int64_t units = (M + KU_MB - 1) / KU_MB;
    if (M <= 0 || N <= 0) return;
    if (k && units > 1) mp_kparallel(k, units, ku_gemm_range, &p);
    else mp_kgemm_f32(M, N, K, A, ars, acs, B, brs, bcs, C, ldc, false);
}

void mp_kmatmul(const mp_rtensor *a, const mp_rtensor *b, const mp_rtensor *y, bool f32, const void *A,
                const void *B, void *Y, bool ta, bool tb) {
    mp_kmatmul_par(NULL, a, b, y, f32, A, B, Y, ta, tb);
}

mp_status mp_krun_node(const mp_op *op, mp_kctx *k) {
    if (!op || !op->run) return mp_kfail(k, MP_ERR_UNSUPPORTED, "no portable kernel");
    size_t scratch = 0;
    void *sb = NULL;
    mp_status st = op->prepare ? op->prepare(k, &scratch) : MP_OK;
    if (!st && scratch && !(k->scratch = sb = calloc(1, scratch))) st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    if (!st) st = op->run(k);
    if (op->release && k->state) op->release(k->state);
    k->state = NULL;
    k->scratch = NULL;
    free(sb);
    return st;
}

void mp_kdynq_params(const mp_rtensor *x, float *scale, double *zp) {
    double lo = 0, hi = 0;
    for (int64_t e = 0; e < x->numel; e++) {
        double v = mp_kget_f(x->data, x->dtype, e);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    mp_s_dynq_params(lo, hi, scale, zp);
}
