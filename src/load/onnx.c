/* ONNX ModelProto decoding, zero-copy: names and attributes are copied
 * (they are small), tensor data stays a view into the mapped file.
 * Local functions are inlined at their call sites, keeping their scope as
 * a module. */
#include "load/load.h"
#include "load/pb.h"
#include "ops/ops.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- field numbers of onnx.proto ---- */
enum {
    MODEL_IR_VERSION = 1, MODEL_PRODUCER = 2, MODEL_PRODUCER_VERSION = 3,
    MODEL_GRAPH = 7, MODEL_OPSET = 8, MODEL_FUNCTIONS = 25,
    OPSET_DOMAIN = 1, OPSET_VERSION = 2,
    GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INIT = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12,
    GRAPH_VALUE_INFO = 13, GRAPH_SPARSE_INIT = 15,
    NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP = 4, NODE_ATTR = 5,
    NODE_DOMAIN = 7, NODE_METADATA = 9,
    ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_S = 4, ATTR_T = 5, ATTR_G = 6,
    ATTR_FLOATS = 7, ATTR_INTS = 8, ATTR_STRINGS = 9, ATTR_TENSORS = 10, ATTR_GRAPHS = 11,
    ATTR_TYPE = 20, ATTR_REF = 21, ATTR_SPARSE = 22,
    VI_NAME = 1, VI_TYPE = 2,
    TYPE_TENSOR = 1, TYPE_SPARSE = 8,
    TT_ELEM = 1, TT_SHAPE = 2, SHAPE_DIM = 1, DIM_VALUE = 1, DIM_PARAM = 2,
    T_DIMS = 1, T_DTYPE = 2, T_FLOAT = 4, T_INT32 = 5, T_STRING = 6, T_INT64 = 7,
    T_NAME = 8, T_RAW = 9, T_DOUBLE = 10, T_UINT64 = 11, T_EXTERNAL = 13, T_LOCATION = 14,
    SPARSE_VALUES = 1, SPARSE_DIMS = 3,
    KV_KEY = 1, KV_VALUE = 2,
    FN_NAME = 1, FN_INPUT = 4, FN_OUTPUT = 5, FN_NODE = 7, FN_DOMAIN = 10,
    FN_ATTR_PROTO = 11,
};

#define MP_INLINE_DEPTH_MAX 64

typedef struct mp__fn {
    const char *name, *domain;
    pb msg;
    pb *in, *out;             /* formal names */
    int n_in, n_out;
    pb *defaults;             /* attribute_proto defaults */
    int n_defaults;
} mp__fn;

/* Inlining context: how names and attributes of a function body map onto
 * the graph they are emitted into. */
typedef struct mp__call {
    const struct mp__call *up;
    const mp__fn *fn;
    const char *prefix;       /* for the body's internal value names */
    const int *actual_in;     /* value index for each formal input (-1 omitted) */
    const int *actual_out;
    const mp_node *caller;    /* for ref_attr_name */
    int module;
    int depth;
} mp__call;

typedef struct mp__loader {
    mp_model *m;
    mp__fn *fns;
    int n_fns, cap_fns;
    mp_strmap ext_files;      /* location -> index into ext */
    struct { int state; uint64_t size; char *path; } *ext;
    int n_ext, cap_ext;
    bool absent_warned;
    int top_calls;            /* function calls among the main graph's nodes */
} mp__loader;

static mp_status mp__bad(mp__loader *L, const char *what, const pb *at) {
    size_t off = at ? (size_t)(at->p - L->m->map) : 0;
    return mp_error(MP_ERR_FORMAT, "%s: malformed ONNX protobuf: %s (near byte %zu)",
                    L->m->path, what, off);
}

static char *mp__str(mp__loader *L, pb s) {
    return mp_arena_strndup(&L->m->arena, (const char *)s.p, (size_t)(s.end - s.p));
}

static bool mp__pbeq(pb s, const char *z) {
    size_t n = strlen(z);
    return (size_t)(s.end - s.p) == n && memcmp(s.p, z, n) == 0;
}

#define NOMEM() mp_error(MP_ERR_NOMEM, "%s: out of memory", L->m->path)

/* ---- types and dims ---- */

/* Decode a TypeProto into dtype/rank/dims (dims with symbols). */
static mp_status mp__type(mp__loader *L, pb t, int *dtype, int *rank, int64_t **dims) {
    *dtype = MP_DT_UNDEFINED;
    *rank = -1;
    *dims = NULL;
    uint32_t f = 0;
    int w = 0;
    while (pb_more(&t)) {
        if (!pb_key(&t, &f, &w)) return mp__bad(L, "bad key in a type", &t);
        if ((f == TYPE_TENSOR || f == TYPE_SPARSE) && w == PB_LEN) {
            pb tt;
            if (!pb_len(&t, &tt)) return mp__bad(L, "bad tensor type", &t);
            while (pb_more(&tt)) {
                if (!pb_key(&tt, &f, &w)) return mp__bad(L, "bad key in a tensor type", &tt);
                if (f == TT_ELEM && w == PB_VARINT) {
                    uint64_t e;
                    if (!pb_varint(&tt, &e)) return mp__bad(L, "bad elem_type", &tt);
                    *dtype = e < MP_DT_COUNT ? (int)e : MP_DT_UNDEFINED;
                } else if (f == TT_SHAPE && w == PB_LEN) {
                    pb sh, scan;
                    if (!pb_len(&tt, &sh)) return mp__bad(L, "bad shape", &tt);
                    int n = 0;
                    scan = sh;
                    while (pb_more(&scan)) {
                        if (!pb_key(&scan, &f, &w) || !pb_skip(&scan, w))
                            return mp__bad(L, "bad dim", &scan);
                        if (f == SHAPE_DIM) n++;
                    }
                    if (n > MP_MAX_RANK)
                        return mp_error(MP_ERR_LIMIT, "%s: a tensor type has rank %d (limit %d)",
                                        L->m->path, n, MP_MAX_RANK);
                    int64_t *d = mp_arena_calloc(&L->m->arena, (size_t)(n ? n : 1), sizeof *d);
                    if (!d) return NOMEM();
                    int k = 0;
                    while (pb_more(&sh)) {
                        if (!pb_key(&sh, &f, &w)) return mp__bad(L, "bad dim", &sh);
                        if (f != SHAPE_DIM || w != PB_LEN) {
                            if (!pb_skip(&sh, w)) return mp__bad(L, "bad dim", &sh);
                            continue;
                        }
                        pb dm;
                        if (!pb_len(&sh, &dm)) return mp__bad(L, "bad dim", &sh);
                        d[k] = MP_DIM_ANON;
                        while (pb_more(&dm)) {
                            if (!pb_key(&dm, &f, &w)) return mp__bad(L, "bad dim", &dm);
                            if (f == DIM_VALUE && w == PB_VARINT) {
                                uint64_t v = 0;
                                if (!pb_varint(&dm, &v)) return mp__bad(L, "bad dim_value", &dm);
                                if ((int64_t)v < 0)
                                    return mp_error(MP_ERR_FORMAT,
                                                    "%s: a tensor type has negative dim %lld",
                                                    L->m->path, (long long)(int64_t)v);
                                d[k] = (int64_t)v;
                            } else if (f == DIM_PARAM && w == PB_LEN) {
                                pb s = {0};
                                if (!pb_len(&dm, &s)) return mp__bad(L, "bad dim_param", &dm);
                                if (s.end > s.p) {
                                    int sym = mp_model_symbol(L->m, (const char *)s.p,
                                                              (size_t)(s.end - s.p));
                                    if (sym < 0) return NOMEM();
                                    d[k] = MP_DIM_OF_SYM(sym);
                                }
                            } else if (!pb_skip(&dm, w)) {
                                return mp__bad(L, "bad dim", &dm);
                            }
                        }
                        k++;
                    }
                    *rank = n;
                    *dims = d;
                } else if (!pb_skip(&tt, w)) {
                    return mp__bad(L, "bad tensor type", &tt);
                }
            }
        } else if (!pb_skip(&t, w)) {
            return mp__bad(L, "bad type", &t);
        }
    }
    return MP_OK;
}

/* ---- external data ---- */

enum { EXT_PRESENT = 1, EXT_ABSENT = 2 };

static mp_status mp__external(mp__loader *L, mp_tensor *t, pb loc, uint64_t off, uint64_t len,
                              bool has_len) {
    mp_model *m = L->m;
    char *rel = mp__str(L, loc);
    if (!rel) return NOMEM();
    if (!rel[0] || rel[0] == '/' || strchr(rel, '\\'))
        return mp_error(MP_ERR_FORMAT,
                        "%s: tensor '%s': external data location '%s' is not a relative path "
                        "inside the model's folder",
                        m->path, t->name, rel);
    for (const char *p = rel; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return mp_error(MP_ERR_FORMAT,
                            "%s: tensor '%s': external data location '%s' leaves the model's "
                            "folder",
                            m->path, t->name, rel);
        p += n + (e ? 1 : 0);
    }
    int idx = mp_strmap_get(&L->ext_files, rel);
    if (idx < 0) {
        void *ne = mp_grow(L->ext, sizeof *L->ext, &L->cap_ext, L->n_ext + 1);
        if (!ne) return NOMEM();
        L->ext = ne;
        idx = L->n_ext++;
        char *path = mp_arena_printf(&m->arena, "%s/%s", m->dir, rel);
        if (!path) return NOMEM();
        L->ext[idx].path = path;
        struct stat st;
        if (lstat(path, &st) != 0) {
            L->ext[idx].state = EXT_ABSENT;
        } else {
            /* the resolved file must stay inside the model's folder */
            char real_dir[PATH_MAX], real_file[PATH_MAX];
            if (!realpath(m->dir, real_dir) || !realpath(path, real_file))
                return mp_error(MP_ERR_IO, "%s: tensor '%s': cannot resolve external data '%s'",
                                m->path, t->name, rel);
            size_t dl = strlen(real_dir);
            if (strncmp(real_file, real_dir, dl) != 0 || real_file[dl] != '/')
                return mp_error(MP_ERR_FORMAT,
                                "%s: tensor '%s': external data '%s' resolves to '%s', outside "
                                "the model's folder",
                                m->path, t->name, rel, real_file);
            if (stat(real_file, &st) != 0 || !S_ISREG(st.st_mode))
                return mp_error(MP_ERR_FORMAT,
                                "%s: tensor '%s': external data '%s' is not a regular file",
                                m->path, t->name, rel);
            L->ext[idx].state = EXT_PRESENT;
            L->ext[idx].size = (uint64_t)st.st_size;
        }
        if (mp_strmap_put(&L->ext_files, rel, idx) != MP_OK) return NOMEM();
    }
    uint64_t need = mp_dtype_bytes(t->dtype, t->numel);
    if (!has_len) len = need;
    if (t->numel >= 0 && mp_dtype_bits(t->dtype) > 0 && len != need)
        return mp_error(MP_ERR_FORMAT,
                        "%s: tensor '%s': external data length %llu, but %s[%lld elements] needs "
                        "%llu bytes",
                        m->path, t->name, (unsigned long long)len, mp_dtype_name(t->dtype),
                        (long long)t->numel, (unsigned long long)need);
    t->ext_path = L->ext[idx].path;
    t->ext_offset = off;
    t->ext_length = len;
    if (L->ext[idx].state == EXT_ABSENT) {
        t->loc = MP_DATA_ABSENT;
        m->weightless = true;
        if (!L->absent_warned) {
            L->absent_warned = true;
            mp_status st = mp_model_warn(m,
                                         "weights absent: external data file '%s' is not next "
                                         "to the model; profiling without weights",
                                         rel);
            if (st) return st;
        }
        return MP_OK;
    }
    if (off > L->ext[idx].size || len > L->ext[idx].size - off)
        return mp_error(MP_ERR_FORMAT,
                        "%s: tensor '%s': external data range [%llu, +%llu) is past the end of "
                        "'%s' (%llu bytes)",
                        m->path, t->name, (unsigned long long)off, (unsigned long long)len, rel,
                        (unsigned long long)L->ext[idx].size);
    t->loc = MP_DATA_EXTERNAL;
    return MP_OK;
}

/* ---- tensors ---- */

static mp_status mp__tensor(mp__loader *L, pb msg, mp_tensor **out) {
    mp_model *m = L->m;
    mp_tensor *t = mp_arena_alloc(&m->arena, sizeof *t);
    if (!t) return NOMEM();
    *out = t;
    t->name = "";
    uint32_t f = 0;
    int w = 0;
    int n_dims = 0;
    pb scan = msg, raw = {0}, loc = {0};
    bool has_raw = false, has_loc = false, has_len = false, external = false;
    uint64_t ext_off = 0, ext_len = 0;
    int typed = 0;
    /* first pass: count dims, find fields */
    while (pb_more(&scan)) {
        if (!pb_key(&scan, &f, &w)) return mp__bad(L, "bad key in a tensor", &scan);
        if (f == T_DIMS && w == PB_LEN) {
            pb d = {0};
            uint64_t v = 0;
            if (!pb_len(&scan, &d)) return mp__bad(L, "bad tensor dims", &scan);
            while (pb_more(&d)) {
                if (!pb_varint(&d, &v)) return mp__bad(L, "bad tensor dims", &d);
                n_dims++;
            }
        } else if (f == T_DIMS && w == PB_VARINT) {
            uint64_t v = 0;
            if (!pb_varint(&scan, &v)) return mp__bad(L, "bad tensor dims", &scan);
            n_dims++;
        } else if (f == T_DTYPE && w == PB_VARINT) {
            uint64_t v = 0;
            if (!pb_varint(&scan, &v)) return mp__bad(L, "bad data_type", &scan);
            t->dtype = v < MP_DT_COUNT ? (int)v : MP_DT_UNDEFINED;
        } else if (f == T_NAME && w == PB_LEN) {
            pb s = {0};
            if (!pb_len(&scan, &s)) return mp__bad(L, "bad tensor name", &scan);
            t->name = mp__str(L, s);
            if (!t->name) return NOMEM();
        } else if (f == T_RAW && w == PB_LEN) {
            if (!pb_len(&scan, &raw)) return mp__bad(L, "bad raw_data", &scan);
            has_raw = true;
        } else if (f == T_LOCATION && w == PB_VARINT) {
            uint64_t v = 0;
            if (!pb_varint(&scan, &v)) return mp__bad(L, "bad data_location", &scan);
            external = v == 1;
        } else if (f == T_EXTERNAL && w == PB_LEN) {
            pb kv;
            if (!pb_len(&scan, &kv)) return mp__bad(L, "bad external_data", &scan);
            pb key = {0}, val = {0};
            while (pb_more(&kv)) {
                if (!pb_key(&kv, &f, &w)) return mp__bad(L, "bad external_data", &kv);
                if (f == KV_KEY && w == PB_LEN) {
                    if (!pb_len(&kv, &key)) return mp__bad(L, "bad external_data", &kv);
                } else if (f == KV_VALUE && w == PB_LEN) {
                    if (!pb_len(&kv, &val)) return mp__bad(L, "bad external_data", &kv);
                } else if (!pb_skip(&kv, w)) {
                    return mp__bad(L, "bad external_data", &kv);
                }
            }
            char num[32];
            size_t vl = (size_t)(val.end - val.p);
            if (mp__pbeq(key, "location")) {
                loc = val;
                has_loc = true;
            } else if (mp__pbeq(key, "offset") || mp__pbeq(key, "length")) {
                char *endp;
                if (vl == 0 || vl >= sizeof num)
                    return mp_error(MP_ERR_FORMAT, "%s: tensor external data has a bad %s value",
                                    m->path, mp__pbeq(key, "offset") ? "offset" : "length");
                memcpy(num, val.p, vl);
                num[vl] = 0;
                errno = 0;
                unsigned long long x = strtoull(num, &endp, 10);
                if (*endp || errno || num[0] == '-')
                    return mp_error(MP_ERR_FORMAT, "%s: tensor external data has a bad %s '%s'",
                                    m->path, mp__pbeq(key, "offset") ? "offset" : "length", num);
                if (mp__pbeq(key, "offset")) {
                    ext_off = x;
                } else {
                    ext_len = x;
                    has_len = true;
                }
            }
        } else if ((f == T_FLOAT || f == T_INT32 || f == T_INT64 || f == T_DOUBLE ||
                    f == T_UINT64 || f == T_STRING) &&
                   (w == PB_LEN || w == PB_VARINT || w == PB_I32 || w == PB_I64)) {
            typed = (int)f;
            if (!pb_skip(&scan, w)) return mp__bad(L, "bad tensor data", &scan);
        } else if (!pb_skip(&scan, w)) {
            return mp__bad(L, "bad tensor field", &scan);
        }
    }
    if (n_dims > MP_MAX_RANK)
        return mp_error(MP_ERR_LIMIT, "%s: tensor '%s' has rank %d (limit %d)", m->path,
                        t->name, n_dims, MP_MAX_RANK);
    t->rank = n_dims;
    t->dims = mp_arena_calloc(&m->arena, (size_t)(n_dims ? n_dims : 1), sizeof *t->dims);
    if (!t->dims) return NOMEM();
    int k = 0;
    scan = msg;
    while (pb_more(&scan)) {
        pb_key(&scan, &f, &w);
        uint64_t v = 0;
        if (f == T_DIMS && w == PB_LEN) {
            pb d = {0};
            pb_len(&scan, &d);
            while (pb_more(&d)) {
                pb_varint(&d, &v);
                t->dims[k++] = (int64_t)v;
            }
        } else if (f == T_DIMS && w == PB_VARINT) {
            pb_varint(&scan, &v);
            t->dims[k++] = (int64_t)v;
        } else {
            pb_skip(&scan, w);
        }
    }
    for (int i = 0; i < n_dims; i++)
        if (t->dims[i] < 0)
            return mp_error(MP_ERR_FORMAT, "%s: tensor '%s' has negative dim %lld", m->path,
                            t->name, (long long)t->dims[i]);
    t->numel = mp_dims_product(t->dims, n_dims);
    if (t->numel < 0)
        return mp_error(MP_ERR_FORMAT, "%s: tensor '%s': element count overflows 64 bits",
                        m->path, t->name);
    if (external) {
        if (!has_loc)
            return mp_error(MP_ERR_FORMAT, "%s: tensor '%s': external data without a location",
                            m->path, t->name);
        return mp__external(L, t, loc, ext_off, ext_len, has_len);
    }
    if (has_raw) {
        t->loc = MP_DATA_RAW;
        t->data = raw.p;
        t->size = (size_t)(raw.end - raw.p);
        uint64_t need = mp_dtype_bytes(t->dtype, t->numel);
        if (mp_dtype_bits(t->dtype) > 0 && t->size != need)
            return mp_error(MP_ERR_FORMAT,
                            "%s: tensor '%s': raw_data has %zu bytes, but %s[%lld elements] "
                            "needs %llu",
                            m->path, t->name, t->size, mp_dtype_name(t->dtype),
                            (long long)t->numel, (unsigned long long)need);
    } else if (typed) {
        t->loc = MP_DATA_TYPED;
        t->data = msg.p;
        t->size = (size_t)(msg.end - msg.p);
        t->typed_field = typed;
    } else {
        t->loc = MP_DATA_NONE;
        if (t->numel > 0 && t->dtype != MP_DT_STRING)
            return mp_error(MP_ERR_FORMAT, "%s: tensor '%s' has %lld elements but no data",
                            m->path, t->name, (long long)t->numel);
    }
    return MP_OK;
}

static mp_status mp__sparse_tensor(mp__loader *L, pb msg, mp_tensor **out) {
    /* A sparse initializer profiles as a dense tensor of its dims. */
    uint32_t f = 0;
    int w = 0;
    pb values = {0};
    bool has_values = false;
    int64_t dims[MP_MAX_RANK];
    int n = 0;
    while (pb_more(&msg)) {
        if (!pb_key(&msg, &f, &w)) return mp__bad(L, "bad sparse tensor", &msg);
        if (f == SPARSE_VALUES && w == PB_LEN) {
            if (!pb_len(&msg, &values)) return mp__bad(L, "bad sparse tensor", &msg);
            has_values = true;
        } else if (f == SPARSE_DIMS && (w == PB_LEN || w == PB_VARINT)) {
            pb d = {0};
            if (w == PB_LEN) {
                if (!pb_len(&msg, &d)) return mp__bad(L, "bad sparse dims", &msg);
            } else {
                d = msg;
            }
            uint64_t v = 0;
            do {
                if (!pb_varint(&d, &v)) return mp__bad(L, "bad sparse dims", &d);
                if (n >= MP_MAX_RANK) return mp_error(MP_ERR_LIMIT, "%s: sparse tensor rank too large", L->m->path);
                dims[n++] = (int64_t)v;
            } while (w == PB_LEN && pb_more(&d));
            if (w == PB_VARINT) msg.p = d.p;
        } else if (!pb_skip(&msg, w)) {
            return mp__bad(L, "bad sparse tensor", &msg);
        }
    }
    if (!has_values) return mp__bad(L, "sparse tensor without values", &msg);
    mp_status st = mp__tensor(L, values, out);
    if (st) return st;
    mp_tensor *t = *out;
    t->rank = n;
    t->dims = mp_arena_calloc(&L->m->arena, (size_t)(n ? n : 1), sizeof *t->dims);
    if (!t->dims) return NOMEM();
    memcpy(t->dims, dims, sizeof(int64_t) * (size_t)n);
    t->numel = mp_dims_product(dims, n);
    if (t->numel < 0)
        return mp_error(MP_ERR_FORMAT, "%s: sparse tensor '%s' has bad dims", L->m->path, t->name);
    t->loc = MP_DATA_NONE; /* values are not laid out densely */
    return MP_OK;
}

/* ---- graphs, nodes, attributes ---- */

static mp_status mp__graph(mp__loader *L, mp_graph *g, pb msg, int depth);
static mp_status mp__emit_node(mp__loader *L, mp_graph *g, pb msg, const mp__call *call);

static const mp__fn *mp__find_fn(mp__loader *L, pb domain, pb op) {
    for (int i = 0; i < L->n_fns; i++)
        if (mp__pbeq(op, L->fns[i].name) && mp__pbeq(domain, L->fns[i].domain)) return &L->fns[i];
    return NULL;
}

static int mp__count_field(pb msg, uint32_t want) {
    uint32_t f = 0;
    int w = 0, n = 0;
    while (pb_more(&msg)) {
        if (!pb_key(&msg, &f, &w) || !pb_skip(&msg, w)) return -1;
        if (f == want) n++;
    }
    return n;
}

/* Decode an AttributeProto. */
static mp_status mp__attr(mp__loader *L, mp_graph *g, pb msg, mp_attr *a, int depth) {
    mp_model *m = L->m;
    uint32_t f = 0;
    int w = 0;
    int n_floats = 0, n_ints = 0, n_strings = 0, n_tensors = 0, n_graphs = 0;
    pb scan = msg;
    a->name = "";
    /* pass 1: scalar fields and counts */
    while (pb_more(&scan)) {
        if (!pb_key(&scan, &f, &w)) return mp__bad(L, "bad attribute", &scan);
        pb s = {0};
        uint64_t v = 0;
        uint32_t x = 0;
        switch (f) {
        case ATTR_NAME:
            if (w != PB_LEN || !pb_len(&scan, &s)) return mp__bad(L, "bad attribute name", &scan);
            if (!(a->name = mp__str(L, s))) return NOMEM();
            continue;
        case ATTR_REF:
            if (w != PB_LEN || !pb_len(&scan, &s)) return mp__bad(L, "bad ref_attr_name", &scan);
            if (!(a->ref = mp__str(L, s))) return NOMEM();
            continue;
        case ATTR_TYPE:
            if (w != PB_VARINT || !pb_varint(&scan, &v)) return mp__bad(L, "bad attribute type", &scan);
            a->type = (int)(v & 0xff);
            continue;
        case ATTR_F:
            if (w != PB_I32 || !pb_fixed32(&scan, &x)) return mp__bad(L, "bad float attribute", &scan);
            a->f = pb_f32(x);
            if (!a->type) a->type = MP_ATTR_FLOAT;
            continue;
        case ATTR_I:
            if (w != PB_VARINT || !pb_varint(&scan, &v)) return mp__bad(L, "bad int attribute", &scan);
            a->i = (int64_t)v;
            if (!a->type) a->type = MP_ATTR_INT;
            continue;
        case ATTR_S:
            if (w != PB_LEN || !pb_len(&scan, &s)) return mp__bad(L, "bad string attribute", &scan);
            a->s_len = (size_t)(s.end - s.p);
            if (!(a->s = mp__str(L, s))) return NOMEM();
            if (!a->type) a->type = MP_ATTR_STRING;
            continue;
        case ATTR_FLOATS:
            if (w == PB_LEN) {
                if (!pb_len(&scan, &s)) return mp__bad(L, "bad floats", &scan);
                if ((s.end - s.p) % 4) return mp__bad(L, "bad packed floats", &scan);
                n_floats += (int)((s.end - s.p) / 4);
            } else if (w == PB_I32) {
                if (!pb_fixed32(&scan, &x)) return mp__bad(L, "bad floats", &scan);
                n_floats++;
            } else {
                return mp__bad(L, "bad floats", &scan);
            }
            if (!a->type) a->type = MP_ATTR_FLOATS;
            continue;
        case ATTR_INTS:
            if (w == PB_LEN) {
                if (!pb_len(&scan, &s)) return mp__bad(L, "bad ints", &scan);
                while (pb_more(&s)) {
                    if (!pb_varint(&s, &v)) return mp__bad(L, "bad packed ints", &s);
                    n_ints++;
                }
            } else if (w == PB_VARINT) {
                if (!pb_varint(&scan, &v)) return mp__bad(L, "bad ints", &scan);
                n_ints++;
            } else {
                return mp__bad(L, "bad ints", &scan);
            }
            if (!a->type) a->type = MP_ATTR_INTS;
            continue;
        case ATTR_STRINGS: n_strings++; if (!a->type) a->type = MP_ATTR_STRINGS; break;
        case ATTR_TENSORS: n_tensors++; if (!a->type) a->type = MP_ATTR_TENSORS; break;
        case ATTR_GRAPHS: n_graphs++; if (!a->type) a->type = MP_ATTR_GRAPHS; break;
        case ATTR_T: if (!a->type) a->type = MP_ATTR_TENSOR; break;
        case ATTR_G: if (!a->type) a->type = MP_ATTR_GRAPH; break;
        case ATTR_SPARSE: if (!a->type) a->type = MP_ATTR_SPARSE_TENSOR; break;
        default: break;
        }
        if (!pb_skip(&scan, w)) return mp__bad(L, "bad attribute field", &scan);
    }
    if (n_floats > 0) a->floats = mp_arena_calloc(&m->arena, (size_t)n_floats, sizeof(double));
    if (n_ints > 0) a->ints = mp_arena_calloc(&m->arena, (size_t)n_ints, sizeof(int64_t));
    if (n_strings > 0) a->strings = mp_arena_calloc(&m->arena, (size_t)n_strings, sizeof(char *));
    if (n_tensors > 0) a->tensors = mp_arena_calloc(&m->arena, (size_t)n_tensors, sizeof(mp_tensor *));
    if (n_graphs > 0) a->graphs = mp_arena_calloc(&m->arena, (size_t)n_graphs, sizeof(mp_graph *));
    if ((n_floats && !a->floats) || (n_ints && !a->ints) || (n_strings && !a->strings) ||
        (n_tensors && !a->tensors) || (n_graphs && !a->graphs))
        return NOMEM();
    switch (a->type) {
    case MP_ATTR_FLOATS: a->n = n_floats; break;
    case MP_ATTR_INTS: a->n = n_ints; break;
    case MP_ATTR_STRINGS: a->n = n_strings; break;
    case MP_ATTR_TENSORS: a->n = n_tensors; break;
    case MP_ATTR_GRAPHS: a->n = n_graphs; break;
    default: break;
    }
    /* pass 2: repeated and nested fields */
    int kf = 0, ki = 0, ks = 0, kt = 0, kg = 0;
    scan = msg;
    while (pb_more(&scan)) {
        pb_key(&scan, &f, &w);
        pb s = {0};
        uint64_t v = 0;
        uint32_t x = 0;
        mp_status st;
        if (f == ATTR_FLOATS && w == PB_LEN) {
            pb_len(&scan, &s);
            while (pb_more(&s) && pb_fixed32(&s, &x)) a->floats[kf++] = pb_f32(x);
        } else if (f == ATTR_FLOATS && w == PB_I32) {
            pb_fixed32(&scan, &x);
            a->floats[kf++] = pb_f32(x);
        } else if (f == ATTR_INTS && w == PB_LEN) {
            pb_len(&scan, &s);
            while (pb_more(&s) && pb_varint(&s, &v)) a->ints[ki++] = (int64_t)v;
        } else if (f == ATTR_INTS && w == PB_VARINT) {
            pb_varint(&scan, &v);
            a->ints[ki++] = (int64_t)v;
        } else if (f == ATTR_STRINGS && w == PB_LEN) {
            pb_len(&scan, &s);
            if (!(a->strings[ks++] = mp__str(L, s))) return NOMEM();
        } else if (f == ATTR_T && w == PB_LEN) {
            pb_len(&scan, &s);
            if ((st = mp__tensor(L, s, &a->t))) return st;
        } else if (f == ATTR_SPARSE && w == PB_LEN) {
            pb_len(&scan, &s);
            if ((st = mp__sparse_tensor(L, s, &a->t))) return st;
        } else if (f == ATTR_TENSORS && w == PB_LEN) {
            pb_len(&scan, &s);
            if ((st = mp__tensor(L, s, &a->tensors[kt++]))) return st;
        } else if ((f == ATTR_G || f == ATTR_GRAPHS) && w == PB_LEN) {
            pb_len(&scan, &s);
            mp_graph *sub = mp_graph_new(m, g);
            if (!sub) return NOMEM();
            if ((st = mp__graph(L, sub, s, depth + 1))) return st;
            if (f == ATTR_G)
                a->g = sub;
            else
                a->graphs[kg++] = sub;
        } else {
            pb_skip(&scan, w);
        }
    }
    if ((a->type == MP_ATTR_TENSOR || a->type == MP_ATTR_SPARSE_TENSOR) && !a->t && !a->ref)
        return mp_error(MP_ERR_FORMAT, "%s: attribute '%s' is a tensor attribute without a tensor",
                        m->path, a->name);
    if (a->type == MP_ATTR_GRAPH && !a->g && !a->ref)
        return mp_error(MP_ERR_FORMAT, "%s: attribute '%s' is a graph attribute without a graph",
                        m->path, a->name);
    return MP_OK;
}

/* Map a name used inside a function body (or a graph) to a value index of
 * the graph being built. Empty names are omitted optionals (-1). */
static int mp__map_name(mp__loader *L, mp_graph *g, pb name, const mp__call *call, bool output,
                        mp_status *st) {
    *st = MP_OK;
    if (name.end == name.p) return -1;
    if (call) {
        const mp__fn *fn = call->fn;
        const pb *formal = output ? fn->out : fn->in;
        int nf = output ? fn->n_out : fn->n_in;
        const int *actual = output ? call->actual_out : call->actual_in;
        for (int i = 0; i < nf; i++)
            if ((size_t)(formal[i].end - formal[i].p) == (size_t)(name.end - name.p) &&
                memcmp(formal[i].p, name.p, (size_t)(name.end - name.p)) == 0)
                return actual[i];
        if (!output) {
            /* an input of the body may also be an output formal (rare) */
            for (int i = 0; i < fn->n_out; i++)
                if ((size_t)(fn->out[i].end - fn->out[i].p) == (size_t)(name.end - name.p) &&
                    memcmp(fn->out[i].p, name.p, (size_t)(name.end - name.p)) == 0)
                    return call->actual_out[i];
        }
        char *full = mp_arena_printf(&L->m->arena, "%s%.*s", call->prefix,
                                     (int)(name.end - name.p), (const char *)name.p);
        if (!full) {
            *st = NOMEM();
            return -1;
        }
        int v = mp_graph_value(g, full, strlen(full));
        if (v < 0) *st = NOMEM();
        return v;
    }
    int v = mp_graph_value(g, (const char *)name.p, (size_t)(name.end - name.p));
    if (v < 0) *st = NOMEM();
    return v;
}

/* Look up an attribute value for ref_attr_name in the calling context. */
static const mp_attr *mp__ref_attr(mp__loader *L, const mp__call *call, const char *ref,
                                   mp_attr *tmp) {
    if (!call) return NULL;
    const mp_attr *a = mp_node_attr(call->caller, ref);
    if (a) return a;
    for (int i = 0; i < call->fn->n_defaults; i++) {
        memset(tmp, 0, sizeof *tmp);
        if (mp__attr(L, NULL, call->fn->defaults[i], tmp, 0) == MP_OK && strcmp(tmp->name, ref) == 0)
            return tmp;
    }
    return NULL;
}

static mp_status mp__inline(mp__loader *L, mp_graph *g, const mp__fn *fn, const mp_node *caller,
                            const mp__call *up);

/* A StringStringEntryProto. */
static bool mp__kv(pb *msg, pb *key, pb *val) {
    uint32_t f = 0;
    int w = 0;
    pb r = *msg;
    while (pb_more(&r)) {
        if (!pb_key(&r, &f, &w)) return false;
        if (f == KV_KEY && w == PB_LEN) {
            if (!pb_len(&r, key)) return false;
        } else if (f == KV_VALUE && w == PB_LEN) {
            if (!pb_len(&r, val)) return false;
        } else if (!pb_skip(&r, w)) {
            return false;
        }
    }
    return true;
}

/* Next string of a Python list literal "['', 'a', \"b\"]": its bytes
 * (escapes kept out) into buf. Returns false at the end or on bad text. */
static bool mp__pylist_next(pb *r, char *buf, size_t cap, size_t *len) {
    while (r->p < r->end && (*r->p == '[' || *r->p == ',' || *r->p == ' ')) r->p++;
    if (r->p >= r->end || (*r->p != '\'' && *r->p != '"')) return false;
    uint8_t q = *r->p++;
    size_t n = 0;
    while (r->p < r->end && *r->p != q) {
        uint8_t c = *r->p++;
        if (c == '\\' && r->p < r->end) c = *r->p++;
        if (n + 1 < cap) buf[n++] = (char)c;
    }
    if (r->p >= r->end) return false;
    r->p++;
    buf[n] = 0;
    *len = n;
    return true;
}

/* Module of a node from the dynamo exporter's metadata: name_scopes lists
 * the cumulative module paths from the root ('') to the node's own name
 * (last); class_hierarchy lists their classes (last: the aten target).
 * Returns the innermost module; classes are recorded on the way. */
static int mp__module_from_metadata(mp_model *m, pb scopes, pb classes) {
    char path[1024], cls[512];
    size_t pl = 0, cl = 0;
    int n = 0;
    pb r = scopes;
    while (mp__pylist_next(&r, path, sizeof path, &pl)) n++;
    int module = 0;
    r = scopes;
    pb c = classes;
    for (int i = 0; i < n - 1; i++) {
        mp__pylist_next(&r, path, sizeof path, &pl);
        bool has_cls = c.p && mp__pylist_next(&c, cls, sizeof cls, &cl);
        int md = mp_model_module(m, path, pl);
        if (md < 0) return -1;
        module = md;
        if (has_cls && cl && !m->modules[md].cls) {
            const char *dot = strrchr(cls, '.');
            const char *shortname = dot ? dot + 1 : cls;
            m->modules[md].cls = mp_arena_strdup(&m->arena, shortname);
            if (!m->modules[md].cls) return -1;
        }
    }
    return module;
}

/* Decode a NodeProto and add it to g (or inline the function it calls). */
static mp_status mp__emit_node(mp__loader *L, mp_graph *g, pb msg, const mp__call *call) {
    mp_model *m = L->m;
    uint32_t f = 0;
    int w = 0;
    int n_in = 0, n_out = 0, n_attr = 0;
    pb name = {0}, op = {0}, domain = {0}, scan = msg, scopes = {0}, classes = {0};
    while (pb_more(&scan)) {
        if (!pb_key(&scan, &f, &w)) return mp__bad(L, "bad key in a node", &scan);
        pb s = {0};
        if (w == PB_LEN && (f == NODE_INPUT || f == NODE_OUTPUT || f == NODE_NAME ||
                            f == NODE_OP || f == NODE_DOMAIN || f == NODE_ATTR ||
                            f == NODE_METADATA)) {
            if (!pb_len(&scan, &s)) return mp__bad(L, "bad node field", &scan);
            if (f == NODE_INPUT) n_in++;
            else if (f == NODE_OUTPUT) n_out++;
            else if (f == NODE_NAME) name = s;
            else if (f == NODE_OP) op = s;
            else if (f == NODE_DOMAIN) domain = s;
            else if (f == NODE_METADATA) {
                pb key = {0}, val = {0};
                if (!mp__kv(&s, &key, &val)) return mp__bad(L, "bad node metadata", &s);
                if (mp__pbeq(key, "pkg.torch.onnx.name_scopes")) scopes = val;
                else if (mp__pbeq(key, "pkg.torch.onnx.class_hierarchy")) classes = val;
            }
            else n_attr++;
        } else if (!pb_skip(&scan, w)) {
            return mp__bad(L, "bad node field", &scan);
        }
    }
    if (op.end == op.p)
        return mp_error(MP_ERR_FORMAT, "%s: node '%.*s' has no op_type", m->path,
                        (int)(name.end - name.p), (const char *)name.p);
    int k = mp_graph_add_node(g);
    if (k < 0) return NOMEM();
    mp_node *n = &g->nodes[k];
    n->op = mp__str(L, op);
    n->domain = mp__str(L, domain);
    if (call && name.end > name.p)
        n->name = mp_arena_printf(&m->arena, "%s%.*s", call->prefix, (int)(name.end - name.p),
                                  (const char *)name.p);
    else if (name.end > name.p)
        n->name = mp__str(L, name);
    else
        n->name = mp_arena_printf(&m->arena, "%s%s_%d", call ? call->prefix : "", n->op, k);
    if (!n->op || !n->domain || !n->name) return NOMEM();
    if (strcmp(n->domain, "ai.onnx") == 0) n->domain = "";
    n->in = mp_arena_calloc(&m->arena, (size_t)(n_in ? n_in : 1), sizeof(int));
    n->out = mp_arena_calloc(&m->arena, (size_t)(n_out ? n_out : 1), sizeof(int));
    n->attr = mp_arena_calloc(&m->arena, (size_t)(n_attr ? n_attr : 1), sizeof(mp_attr));
    if (!n->in || !n->out || !n->attr) return NOMEM();
    n->module = call ? call->module : -1;
    if (!call && scopes.p) {
        int md = mp__module_from_metadata(m, scopes, classes);
        if (md < 0) return NOMEM();
        n->module = md;
        m->module_source = MP_MODSRC_METADATA;
    }
    scan = msg;
    int ki = 0, ko = 0, ka = 0;
    while (pb_more(&scan)) {
        pb_key(&scan, &f, &w);
        pb s = {0};
        mp_status st = MP_OK;
        if (w != PB_LEN || !(f == NODE_INPUT || f == NODE_OUTPUT || f == NODE_ATTR)) {
            pb_skip(&scan, w);
            continue;
        }
        pb_len(&scan, &s);
        n = &g->nodes[k]; /* the node array may move while subgraphs decode */
        if (f == NODE_INPUT) {
            int v = mp__map_name(L, g, s, call, false, &st);
            if (st) return st;
            g->nodes[k].in[ki++] = v;
        } else if (f == NODE_OUTPUT) {
            int v = mp__map_name(L, g, s, call, true, &st);
            if (st) return st;
            n = &g->nodes[k];
            n->out[ko++] = v;
            if (v >= 0) {
                if (g->values[v].producer >= 0 || (g->values[v].flags & MP_VAL_INIT))
                    return mp_error(MP_ERR_FORMAT,
                                    "%s: node '%s' (%s) writes value '%s', which is already "
                                    "produced by %s",
                                    m->path, n->name, n->op, g->values[v].name,
                                    (g->values[v].flags & MP_VAL_INIT)
                                        ? "an initializer"
                                        : g->nodes[g->values[v].producer].name);
                g->values[v].producer = k;
            }
        } else {
            mp_attr a;
            memset(&a, 0, sizeof a);
            if ((st = mp__attr(L, g, s, &a, 0))) return st;
            n = &g->nodes[k];
            if (a.ref) {
                mp_attr tmp;
                const mp_attr *r = mp__ref_attr(L, call, a.ref, &tmp);
                if (!r) continue; /* unset optional attribute */
                const char *nm = a.name;
                a = *r;
                a.name = nm;
                a.ref = NULL;
            }
            n->attr[ka++] = a;
        }
    }
    n = &g->nodes[k];
    n->n_in = ki;
    n->n_out = ko;
    n->n_attr = ka;
    /* subgraphs */
    int n_sub = 0;
    for (int i = 0; i < n->n_attr; i++)
        n_sub += n->attr[i].type == MP_ATTR_GRAPH ? 1 : n->attr[i].type == MP_ATTR_GRAPHS ? n->attr[i].n : 0;
    if (n_sub) {
        n->sub = mp_arena_calloc(&m->arena, (size_t)n_sub, sizeof *n->sub);
        if (!n->sub) return NOMEM();
        for (int i = 0; i < n->n_attr; i++) {
            if (n->attr[i].type == MP_ATTR_GRAPH && n->attr[i].g) n->sub[n->n_sub++] = n->attr[i].g;
            if (n->attr[i].type == MP_ATTR_GRAPHS)
                for (int j = 0; j < n->attr[i].n; j++)
                    if (n->attr[i].graphs[j]) n->sub[n->n_sub++] = n->attr[i].graphs[j];
        }
        for (int s = 0; s < n->n_sub; s++) n->sub[s]->parent_node = k;
    }
    /* a call of a local function: replace the node by the function body */
    const mp__fn *fn = mp__find_fn(L, domain, op);
    if (fn) {
        int depth = call ? call->depth + 1 : 1;
        if (depth > MP_INLINE_DEPTH_MAX)
            return mp_error(MP_ERR_LIMIT, "%s: function '%s' nests deeper than %d calls (recursive?)",
                            m->path, fn->name, MP_INLINE_DEPTH_MAX);
        mp_node caller = *n;
        for (int o = 0; o < caller.n_out; o++)
            if (caller.out[o] >= 0) g->values[caller.out[o]].producer = -1;
        g->n_nodes--; /* the call node itself disappears */
        mp__call dummy = {.depth = depth - 1, .module = -1};
        return mp__inline(L, g, fn, &caller, call ? call : &dummy);
    }
    return MP_OK;
}

static int mp__module_from_name(mp_model *m, const char *name);

/* Module path of an inlined call: the caller's module, then one segment
 * named after the call (its node name's last scope segment). */
static int mp__call_module(mp__loader *L, const mp_node *caller, const mp__call *up,
                           const mp__fn *fn) {
    mp_model *m = L->m;
    const char *nm = caller->name;
    /* strip any inlining prefix: use the text after the last '/' that is
     * not at the end */
    const char *seg = nm;
    size_t len = strlen(nm);
    while (len > 0 && nm[len - 1] == '/') len--;
    for (size_t i = 0; i < len; i++)
        if (nm[i] == '/') seg = nm + i + 1;
    size_t sl = (size_t)(nm + len - seg);
    const char *parent = (up && up->module >= 0) ? m->modules[up->module].path : "";
    /* a top-level call sits in the scope its name gives, unless it is the
     * only call: then it is the model itself (PyTorch names that call after
     * an arbitrary scope, e.g. "/fc/ResNet") */
    if ((!up || up->module < 0) && L->top_calls > 1) {
        int scope = mp__module_from_name(m, nm);
        parent = m->modules[scope].path;
    }
    char *path;
    if (sl == 0)
        path = mp_arena_printf(&m->arena, "%s%s%s", parent, parent[0] ? "." : "", fn->name);
    else
        path = mp_arena_printf(&m->arena, "%s%s%.*s", parent, parent[0] ? "." : "", (int)sl, seg);
    if (!path) return -1;
    /* a dot inside the call's own name is not a nesting level */
    for (char *q = path + strlen(parent) + (parent[0] ? 1 : 0); *q; q++)
        if (*q == '.') *q = '_';
    int id = mp_model_module(m, path, strlen(path));
    if (id >= 0 && !m->modules[id].cls) {
        /* the exporter numbers specialisations of one class: Linear.1 */
        const char *dot = strrchr(fn->name, '.');
        size_t cl = strlen(fn->name);
        if (dot && dot[1] && strspn(dot + 1, "0123456789") == strlen(dot + 1))
            cl = (size_t)(dot - fn->name);
        m->modules[id].cls = mp_arena_strndup(&m->arena, fn->name, cl);
    }
    return id;
}

static mp_status mp__inline(mp__loader *L, mp_graph *g, const mp__fn *fn, const mp_node *caller,
                            const mp__call *up) {
    mp_model *m = L->m;
    int *ain = mp_arena_calloc(&m->arena, (size_t)(fn->n_in ? fn->n_in : 1), sizeof(int));
    int *aout = mp_arena_calloc(&m->arena, (size_t)(fn->n_out ? fn->n_out : 1), sizeof(int));
    if (!ain || !aout) return NOMEM();
    for (int i = 0; i < fn->n_in; i++) ain[i] = i < caller->n_in ? caller->in[i] : -1;
    for (int i = 0; i < fn->n_out; i++) aout[i] = i < caller->n_out ? caller->out[i] : -1;
    mp__call call = {
        .up = up, .fn = fn, .caller = caller, .actual_in = ain, .actual_out = aout,
        .depth = up ? up->depth + 1 : 1,
    };
    call.prefix = mp_arena_printf(&m->arena, "%s/", caller->name);
    call.module = mp__call_module(L, caller, up, fn);
    if (!call.prefix || call.module < 0) return NOMEM();
    m->module_source = MP_MODSRC_FUNCTIONS;
    pb body = fn->msg;
    uint32_t f = 0;
    int w = 0;
    while (pb_more(&body)) {
        if (!pb_key(&body, &f, &w)) return mp__bad(L, "bad function", &body);
        pb s = {0};
        if (f == FN_NODE && w == PB_LEN) {
            if (!pb_len(&body, &s)) return mp__bad(L, "bad function node", &body);
            mp_status st = mp__emit_node(L, g, s, &call);
            if (st) return st;
        } else if (!pb_skip(&body, w)) {
            return mp__bad(L, "bad function field", &body);
        }
    }
    return MP_OK;
}

/* ValueInfoProto: name and declared type. */
static mp_status mp__value_info(mp__loader *L, mp_graph *g, pb msg, int *out) {
    uint32_t f = 0;
    int w = 0;
    pb name = {0}, type = {0};
    bool has_type = false;
    while (pb_more(&msg)) {
        if (!pb_key(&msg, &f, &w)) return mp__bad(L, "bad value info", &msg);
        if (f == VI_NAME && w == PB_LEN) {
            if (!pb_len(&msg, &name)) return mp__bad(L, "bad value name", &msg);
        } else if (f == VI_TYPE && w == PB_LEN) {
            if (!pb_len(&msg, &type)) return mp__bad(L, "bad value type", &msg);
            has_type = true;
        } else if (!pb_skip(&msg, w)) {
            return mp__bad(L, "bad value info", &msg);
        }
    }
    if (name.end == name.p) return mp_error(MP_ERR_FORMAT, "%s: a graph value has no name", L->m->path);
    int v = mp_graph_value(g, (const char *)name.p, (size_t)(name.end - name.p));
    if (v < 0) return NOMEM();
    *out = v;
    if (has_type) {
        int dt, rank;
        int64_t *dims;
        mp_status st = mp__type(L, type, &dt, &rank, &dims);
        if (st) return st;
        mp_value *val = &g->values[v];
        val->decl_dtype = dt;
        val->decl_rank = rank;
        val->decl_dims = dims;
    }
    return MP_OK;
}

static mp_status mp__graph(mp__loader *L, mp_graph *g, pb msg, int depth) {
    mp_model *m = L->m;
    if (depth > MP_INLINE_DEPTH_MAX)
        return mp_error(MP_ERR_LIMIT, "%s: subgraphs nest deeper than %d levels", m->path,
                        MP_INLINE_DEPTH_MAX);
    uint32_t f = 0;
    int w = 0;
    pb scan = msg;
    int n_in = mp__count_field(msg, GRAPH_INPUT), n_out = mp__count_field(msg, GRAPH_OUTPUT);
    if (n_in < 0 || n_out < 0) return mp__bad(L, "bad graph", &msg);
    g->inputs = mp_arena_calloc(&m->arena, (size_t)(n_in ? n_in : 1), sizeof(int));
    g->outputs = mp_arena_calloc(&m->arena, (size_t)(n_out ? n_out : 1), sizeof(int));
    if (!g->inputs || !g->outputs) return NOMEM();
    /* initializers first, then declared values, then nodes */
    for (int pass = 0; pass < 3; pass++) {
        scan = msg;
        while (pb_more(&scan)) {
            if (!pb_key(&scan, &f, &w)) return mp__bad(L, "bad key in a graph", &scan);
            if (w != PB_LEN) {
                if (!pb_skip(&scan, w)) return mp__bad(L, "bad graph field", &scan);
                continue;
            }
            pb s = {0};
            if (!pb_len(&scan, &s)) return mp__bad(L, "bad graph field", &scan);
            mp_status st = MP_OK;
            if (pass == 0 && (f == GRAPH_INIT || f == GRAPH_SPARSE_INIT)) {
                mp_tensor *t;
                st = f == GRAPH_INIT ? mp__tensor(L, s, &t) : mp__sparse_tensor(L, s, &t);
                if (st) return st;
                if (!t->name[0])
                    return mp_error(MP_ERR_FORMAT, "%s: an initializer has no name", m->path);
                int v = mp_graph_value(g, t->name, strlen(t->name));
                if (v < 0) return NOMEM();
                if (g->values[v].flags & MP_VAL_INIT)
                    return mp_error(MP_ERR_FORMAT, "%s: initializer '%s' is defined twice",
                                    m->path, t->name);
                g->values[v].flags |= MP_VAL_INIT;
                g->values[v].init = t;
            } else if (pass == 0 && f == GRAPH_NAME) {
                if (!(g->name = mp__str(L, s))) return NOMEM();
            } else if (pass == 1 && (f == GRAPH_INPUT || f == GRAPH_OUTPUT || f == GRAPH_VALUE_INFO)) {
                int v = -1;
                if ((st = mp__value_info(L, g, s, &v))) return st;
                if (f == GRAPH_INPUT) {
                    if (g->values[v].flags & MP_VAL_INIT) continue; /* IR < 4: a default */
                    if (g->values[v].flags & MP_VAL_INPUT)
                        return mp_error(MP_ERR_FORMAT, "%s: graph input '%s' is listed twice",
                                        m->path, g->values[v].name);
                    g->values[v].flags |= MP_VAL_INPUT;
                    g->inputs[g->n_inputs++] = v;
                } else if (f == GRAPH_OUTPUT) {
                    g->values[v].flags |= MP_VAL_OUTPUT;
                    g->outputs[g->n_outputs++] = v;
                }
            } else if (pass == 2 && f == GRAPH_NODE) {
                if ((st = mp__emit_node(L, g, s, NULL))) return st;
            }
        }
    }
    return MP_OK;
}

/* ---- post-pass: outer references, order, descriptors, modules ---- */

static int mp__opset(const mp_model *m, const char *domain) {
    for (int i = 0; i < m->n_opsets; i++)
        if (strcmp(m->opsets[i].domain, domain) == 0) return m->opsets[i].version;
    return -1;
}

/* A name used but not defined in g: find it in the enclosing graphs. */
static mp_status mp__resolve_outer(mp_model *m, mp_graph *g, int v) {
    mp_value *val = &g->values[v];
    if (!g->parent) {
        return mp_error(MP_ERR_FORMAT,
                        "%s: value '%s' is used by a node but no node, input or initializer "
                        "produces it",
                        m->path, val->name);
    }
    mp_graph *p = g->parent;
    int pv = mp_graph_find(p, val->name);
    if (pv < 0) {
        pv = mp_graph_value(p, val->name, strlen(val->name));
        if (pv < 0) return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    mp_value *pval = &p->values[pv];
    if (pval->producer < 0 && !(pval->flags & (MP_VAL_INIT | MP_VAL_INPUT | MP_VAL_OUTER))) {
        mp_status st = mp__resolve_outer(m, p, pv);
        if (st) return st;
    }
    g->values[v].flags |= MP_VAL_OUTER;
    g->values[v].outer = pv;
    return MP_OK;
}

/* Topological order (Kahn). Nodes of a well-formed model are already in
 * order; a cycle or a dangling reference is an error. Implicit inputs of
 * control-flow nodes (outer values used by their bodies) count as deps. */
typedef struct mp__ints {
    int *v;
    int n, cap;
} mp__ints;

static bool mp__ints_push(mp__ints *a, int x) {
    int *nv = mp_grow(a->v, sizeof *a->v, &a->cap, a->n + 1);
    if (!nv) return false;
    a->v = nv;
    a->v[a->n++] = x;
    return true;
}

static bool mp__collect_outer(const mp_graph *sub, const mp_graph *owner, mp__ints *deps) {
    for (int i = 0; i < sub->n_values; i++) {
        const mp_value *v = &sub->values[i];
        if (!(v->flags & MP_VAL_OUTER) || v->outer < 0) continue;
        const mp_graph *g = sub->parent;
        int idx = v->outer;
        while (g != owner && g && (g->values[idx].flags & MP_VAL_OUTER)) {
            idx = g->values[idx].outer;
            g = g->parent;
        }
        if (g == owner && !mp__ints_push(deps, idx)) return false;
    }
    for (int k = 0; k < sub->n_nodes; k++)
        for (int s = 0; s < sub->nodes[k].n_sub; s++)
            if (!mp__collect_outer(sub->nodes[k].sub[s], owner, deps)) return false;
    return true;
}

static void mp__heap_push(int *h, int *n, int x) {
    int i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > x) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static int mp__heap_pop(int *h, int *n) {
    int top = h[0], x = h[--(*n)], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= x) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
    return top;
}

static mp_status mp__order(mp_model *m, mp_graph *g) {
    int n = g->n_nodes;
    g->order = mp_arena_calloc(&m->arena, (size_t)(n ? n : 1), sizeof(int));
    int *indeg = calloc((size_t)(n ? n : 1), sizeof(int));
    int *head = malloc(sizeof(int) * (size_t)(n ? n : 1));
    int *queue = malloc(sizeof(int) * (size_t)(n ? n : 1));
    mp__ints eto = {0}, enext = {0}, extra = {0};
    mp_status st = MP_OK;
    if (!g->order || !indeg || !head || !queue) goto nomem;
    for (int k = 0; k < n; k++) head[k] = -1;
    for (int k = 0; k < n; k++) {
        mp_node *nd = &g->nodes[k];
        extra.n = 0;
        for (int s = 0; s < nd->n_sub; s++)
            if (!mp__collect_outer(nd->sub[s], g, &extra)) goto nomem;
        for (int i = 0; i < nd->n_in + extra.n; i++) {
            int v = i < nd->n_in ? nd->in[i] : extra.v[i - nd->n_in];
            if (v < 0) continue;
            int p = g->values[v].producer;
            if (p < 0) continue;
            if (p == k) {
                st = mp_error(MP_ERR_FORMAT, "%s: node '%s' (%s) consumes its own output '%s'",
                              m->path, nd->name, nd->op, g->values[v].name);
                goto done;
            }
            if (!mp__ints_push(&eto, k) || !mp__ints_push(&enext, head[p])) goto nomem;
            head[p] = eto.n - 1;
            indeg[k]++;
        }
    }
    /* Ready nodes leave in file order (a min-heap on the node index): a
     * file already in topological order keeps its order, which the
     * exporter chose to keep activations short-lived. */
    int qn = 0, done_n = 0;
    for (int k = 0; k < n; k++)
        if (!indeg[k]) mp__heap_push(queue, &qn, k);
    while (qn > 0) {
        int k = mp__heap_pop(queue, &qn);
        g->order[done_n++] = k;
        for (int e = head[k]; e >= 0; e = enext.v[e])
            if (--indeg[eto.v[e]] == 0) mp__heap_push(queue, &qn, eto.v[e]);
    }
    if (done_n != n) {
        for (int k = 0; k < n; k++)
            if (indeg[k]) {
                st = mp_error(MP_ERR_FORMAT, "%s: the graph has a cycle through node '%s' (%s)",
                              m->path, g->nodes[k].name, g->nodes[k].op);
                break;
            }
    }
    goto done;
nomem:
    st = mp_error(MP_ERR_NOMEM, "out of memory");
done:
    free(indeg);
    free(head);
    free(queue);
    free(eto.v);
    free(enext.v);
    free(extra.v);
    return st;
}

/* Scope path of a TorchScript-style node name: "/layer1/layer1.0/conv1/Conv"
 * gives "layer1.0.conv1" (a segment that repeats its parent's name as a
 * prefix is relative to it). Returns the module index. */
static int mp__module_from_name(mp_model *m, const char *name) {
    const char *last = strrchr(name, '/');
    if (!last || last == name) return 0;
    char path[1024];
    size_t pl = 0;
    const char *prev = NULL;
    size_t prev_len = 0;
    const char *p = name;
    if (*p == '/') p++;
    while (p < last) {
        const char *e = memchr(p, '/', (size_t)(last - p));
        if (!e) e = last;
        size_t sl = (size_t)(e - p);
        if (sl > 0) {
            const char *local = p;
            size_t ll = sl;
            if (prev && sl > prev_len + 1 && memcmp(p, prev, prev_len) == 0 && p[prev_len] == '.') {
                local = p + prev_len + 1;
                ll = sl - prev_len - 1;
            }
            if (pl + ll + 2 >= sizeof path) break;
            if (pl) path[pl++] = '.';
            memcpy(path + pl, local, ll);
            pl += ll;
            prev = p;
            prev_len = sl;
        }
        p = e + 1;
    }
    int id = mp_model_module(m, path, pl);
    return id < 0 ? 0 : id;
}

static mp_status mp__finish_graph(mp_model *m, mp_graph *g) {
    for (int v = 0; v < g->n_values; v++) g->values[v].n_consumers = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        mp_node *n = &g->nodes[k];
        for (int i = 0; i < n->n_in; i++) {
            int v = n->in[i];
            if (v < 0) continue;
            mp_value *val = &g->values[v];
            val->n_consumers++;
            if (val->producer < 0 && !(val->flags & (MP_VAL_INIT | MP_VAL_INPUT | MP_VAL_OUTER))) {
                mp_status st = mp__resolve_outer(m, g, v);
                if (st) {
                    if (!g->parent)
                        return mp_error(MP_ERR_FORMAT,
                                        "%s: node '%s' (%s) reads '%s', which no node, input or "
                                        "initializer produces",
                                        m->path, n->name, n->op, val->name);
                    return st;
                }
            }
        }
        for (int s = 0; s < n->n_sub; s++) {
            mp_status st = mp__finish_graph(m, n->sub[s]);
            if (st) return st;
        }
        int opset = mp__opset(m, n->domain);
        n->opset = opset;
        n->desc = opset >= 0 ? mp_op_find(n->domain, n->op, opset) : NULL;
    }
    for (int i = 0; i < g->n_outputs; i++) {
        mp_value *val = &g->values[g->outputs[i]];
        if (val->producer < 0 && !(val->flags & (MP_VAL_INIT | MP_VAL_INPUT | MP_VAL_OUTER))) {
            mp_status st = mp__resolve_outer(m, g, g->outputs[i]);
            if (st)
                return mp_error(MP_ERR_FORMAT, "%s: graph output '%s' is not produced by any node",
                                m->path, val->name);
        }
    }
    return mp__order(m, g);
}

static void mp__assign_modules(mp_model *m, mp_graph *g, int parent_module) {
    for (int k = 0; k < g->n_nodes; k++) {
        mp_node *n = &g->nodes[k];
        if (n->module < 0) {
            if (g->parent)
                n->module = parent_module;
            else
                n->module = mp__module_from_name(m, n->name);
        }
        for (int s = 0; s < n->n_sub; s++) mp__assign_modules(m, n->sub[s], n->module);
    }
}

mp_status mp_model_finish(mp_model *m) {
    if (m->n_modules == 0 && mp_model_module(m, "", 0) != 0)
        return mp_error(MP_ERR_NOMEM, "out of memory");
    mp_status st = mp__finish_graph(m, m->graph);
    if (st) return st;
    mp__assign_modules(m, m->graph, 0);
    return MP_OK;
}

/* ---- model ---- */

static mp_status mp__functions(mp__loader *L, pb msg) {
    mp_model *m = L->m;
    pb scan = msg;
    uint32_t f = 0;
    int w = 0;
    while (pb_more(&scan)) {
        if (!pb_key(&scan, &f, &w)) return mp__bad(L, "bad key in the model", &scan);
        pb s = {0};
        if (f != MODEL_FUNCTIONS || w != PB_LEN) {
            if (!pb_skip(&scan, w)) return mp__bad(L, "bad model field", &scan);
            continue;
        }
        if (!pb_len(&scan, &s)) return mp__bad(L, "bad function", &scan);
        mp__fn *nf = mp_grow(L->fns, sizeof *L->fns, &L->cap_fns, L->n_fns + 1);
        if (!nf) return NOMEM();
        L->fns = nf;
        mp__fn *fn = &L->fns[L->n_fns++];
        memset(fn, 0, sizeof *fn);
        fn->msg = s;
        fn->name = fn->domain = "";
        int n_in = mp__count_field(s, FN_INPUT), n_out = mp__count_field(s, FN_OUTPUT);
        int n_def = mp__count_field(s, FN_ATTR_PROTO);
        if (n_in < 0 || n_out < 0 || n_def < 0) return mp__bad(L, "bad function", &s);
        fn->in = mp_arena_calloc(&m->arena, (size_t)n_in + 1, sizeof(pb));
        fn->out = mp_arena_calloc(&m->arena, (size_t)n_out + 1, sizeof(pb));
        fn->defaults = mp_arena_calloc(&m->arena, (size_t)n_def + 1, sizeof(pb));
        if (!fn->in || !fn->out || !fn->defaults) return NOMEM();
        pb body = s;
        while (pb_more(&body)) {
            pb x;
            pb_key(&body, &f, &w);
            if (w != PB_LEN) {
                pb_skip(&body, w);
                continue;
            }
            pb_len(&body, &x);
            if (f == FN_NAME) fn->name = mp__str(L, x);
            else if (f == FN_DOMAIN) fn->domain = mp__str(L, x);
            else if (f == FN_INPUT) fn->in[fn->n_in++] = x;
            else if (f == FN_OUTPUT) fn->out[fn->n_out++] = x;
            else if (f == FN_ATTR_PROTO) fn->defaults[fn->n_defaults++] = x;
            if (!fn->name || !fn->domain) return NOMEM();
        }
    }
    return MP_OK;
}

/* How many nodes of a graph call a local function. */
static int mp__count_calls(mp__loader *L, pb graph) {
    int n = 0;
    uint32_t f = 0;
    int w = 0;
    while (pb_more(&graph)) {
        pb s = {0};
        if (!pb_key(&graph, &f, &w)) break;
        if (f != GRAPH_NODE || w != PB_LEN) {
            if (!pb_skip(&graph, w)) break;
            continue;
        }
        if (!pb_len(&graph, &s)) break;
        pb op = {0}, domain = {0};
        while (pb_more(&s)) {
            pb x = {0};
            if (!pb_key(&s, &f, &w)) break;
            if (w == PB_LEN && (f == NODE_OP || f == NODE_DOMAIN)) {
                if (!pb_len(&s, &x)) break;
                if (f == NODE_OP)
                    op = x;
                else
                    domain = x;
            } else if (!pb_skip(&s, w)) {
                break;
            }
        }
        if (op.p && mp__find_fn(L, domain, op)) n++;
    }
    return n;
}

static mp_status mp__model(mp__loader *L, pb msg) {
    mp_model *m = L->m;
    uint32_t f = 0;
    int w = 0;
    pb scan = msg, graph = {0};
    bool has_graph = false;
    int n_opsets = mp__count_field(msg, MODEL_OPSET);
    if (n_opsets < 0) return mp__bad(L, "not an ONNX model (bad protobuf structure)", &msg);
    m->opsets = mp_arena_calloc(&m->arena, (size_t)n_opsets + 1, sizeof *m->opsets);
    if (!m->opsets) return NOMEM();
    m->producer = m->producer_version = "";
    while (pb_more(&scan)) {
        pb_key(&scan, &f, &w);
        pb s = {0};
        uint64_t v = 0;
        if (f == MODEL_IR_VERSION && w == PB_VARINT) {
            pb_varint(&scan, &v);
            m->ir_version = (int64_t)v;
        } else if (f == MODEL_PRODUCER && w == PB_LEN) {
            pb_len(&scan, &s);
            if (!(m->producer = mp__str(L, s))) return NOMEM();
        } else if (f == MODEL_PRODUCER_VERSION && w == PB_LEN) {
            pb_len(&scan, &s);
            if (!(m->producer_version = mp__str(L, s))) return NOMEM();
        } else if (f == MODEL_GRAPH && w == PB_LEN) {
            pb_len(&scan, &graph);
            has_graph = true;
        } else if (f == MODEL_OPSET && w == PB_LEN) {
            pb_len(&scan, &s);
            mp_opset *o = &m->opsets[m->n_opsets++];
            o->domain = "";
            o->version = -1;
            while (pb_more(&s)) {
                if (!pb_key(&s, &f, &w)) return mp__bad(L, "bad opset_import", &s);
                pb d = {0};
                if (f == OPSET_DOMAIN && w == PB_LEN) {
                    if (!pb_len(&s, &d)) return mp__bad(L, "bad opset domain", &s);
                    if (!(o->domain = mp__str(L, d))) return NOMEM();
                    if (strcmp(o->domain, "ai.onnx") == 0) o->domain = "";
                } else if (f == OPSET_VERSION && w == PB_VARINT) {
                    if (!pb_varint(&s, &v)) return mp__bad(L, "bad opset version", &s);
                    o->version = v > INT32_MAX ? INT32_MAX : (int)v;
                } else if (!pb_skip(&s, w)) {
                    return mp__bad(L, "bad opset_import", &s);
                }
            }
        } else {
            pb_skip(&scan, w);
        }
    }
    if (!has_graph)
        return mp_error(MP_ERR_FORMAT, "%s: not an ONNX model (no graph found)", m->path);
    if (m->ir_version < 3 || m->ir_version > 10) {
        if (m->ir_version <= 0)
            return mp_error(MP_ERR_FORMAT, "%s: not an ONNX model (no IR version)", m->path);
        mp_status st = mp_model_warn(m, "IR version %lld is outside the supported 3-10",
                                     (long long)m->ir_version);
        if (st) return st;
    }
    int def = mp__opset(m, "");
    if (def < 0) {
        if (m->ir_version < 3 && n_opsets == 0) def = 1;
        return mp_error(MP_ERR_FORMAT, "%s: the model imports no default-domain opset", m->path);
    }
    if (def < 7 || def > 21) {
        mp_status st = mp_model_warn(m, "default-domain opset %d is outside the supported 7-21",
                                     def);
        if (st) return st;
    }
    mp_status st = mp__functions(L, msg);
    if (st) return st;
    if (L->n_fns) L->top_calls = mp__count_calls(L, graph);
    /* root module first: index 0 */
    if (mp_model_module(m, "", 0) != 0) return NOMEM();
    st = mp__graph(L, m->graph, graph, 0);
    if (st) return st;
    st = mp_model_finish(m);
    if (st) return st;
    if (m->module_source == MP_MODSRC_NONE && m->n_modules > 1) m->module_source = MP_MODSRC_NAMES;
    m->modules[0].name = m->graph->name && m->graph->name[0] ? m->graph->name : "model";
    mp_graph *g = m->graph;
    for (int i = 0; i < g->n_inputs; i++) {
        mp_value *v = &g->values[g->inputs[i]];
        for (int d = 0; d < v->decl_rank; d++)
            if (v->decl_dims[d] < MP_DIM_ANON) m->syms[MP_DIM_SYM(v->decl_dims[d])].on_input = true;
    }
    return MP_OK;
}

mp_status mp_tensor_decode(mp_model *m, const uint8_t *bytes, size_t len, mp_tensor **out) {
    mp__loader L = {.m = m};
    mp_status st = mp__tensor(&L, pb_view(bytes, len), out);
    free(L.ext);
    mp_strmap_free(&L.ext_files);
    return st;
}

mp_status mp_model_load(const char *path, mp_model **out) {
    *out = NULL;
    mp_error_clear();
    if (!path) return mp_error(MP_ERR_USAGE, "no model path");
    mp_model *m = mp_model_create();
    if (!m) return mp_error(MP_ERR_NOMEM, "out of memory");
    m->path = mp_arena_strdup(&m->arena, path);
    const char *slash = strrchr(path, '/');
    m->dir = slash ? mp_arena_strndup(&m->arena, path, (size_t)(slash - path + (slash == path)))
                   : mp_arena_strdup(&m->arena, ".");
    if (!m->path || !m->dir) {
        mp_model_free(m);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    m->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (m->fd < 0) {
        mp_status st = mp_error(MP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        mp_model_free(m);
        return st;
    }
    struct stat st;
    if (fstat(m->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        mp_model_free(m);
        return mp_error(MP_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        mp_model_free(m);
        return mp_error(MP_ERR_FORMAT, "%s: the file is empty", path);
    }
    m->map_size = (size_t)st.st_size;
    void *map = mmap(NULL, m->map_size, PROT_READ, MAP_PRIVATE, m->fd, 0);
    if (map == MAP_FAILED) {
        m->map_size = 0;
        mp_status s2 = mp_error(MP_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
        mp_model_free(m);
        return s2;
    }
    m->map = map;
    madvise(map, m->map_size, MADV_RANDOM);
    mp__loader L = {.m = m};
    mp_status s = mp__model(&L, pb_view(m->map, m->map_size));
    free(L.fns);
    free(L.ext);
    mp_strmap_free(&L.ext_files);
    if (s) {
        mp_model_free(m);
        return s;
    }
    *out = m;
    return MP_OK;
}
