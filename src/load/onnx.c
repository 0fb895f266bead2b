/* ONNX ModelProto decoding, zero-copy: names and attributes are copied
 * (they are small), tensor data stays a view into the mapped file.
 * Local functions are inlined at their call sites, keeping their scope as
 * a module. */
#include "load/load.h"
#include "load/pb.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The newest IR version and default-domain opset whose rules modelprof
 * has (ONNX 1.19: IR 12, opset 24). */
#define MP_IR_MAX 12
#define MP_OPSET_MAX 24

/* ---- field numbers of onnx.proto ---- */
enum {
    MODEL_IR_VERSION = 1, MODEL_PRODUCER = 2, MODEL_PRODUCER_VERSION = 3,
    MODEL_GRAPH = 7, MODEL_OPSET = 8, MODEL_FUNCTIONS = 25,
    OPSET_DOMAIN = 1, OPSET_VERSION = 2,
    GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INIT = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12,
    GRAPH_VALUE_INFO = 13, GRAPH_SPARSE_INIT = 15, GRAPH_METADATA = 16,
    NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP = 4, NODE_ATTR = 5,
    NODE_DOMAIN = 7, NODE_METADATA = 9,
    ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_S = 4, ATTR_T = 5, ATTR_G = 6,
    ATTR_FLOATS = 7, ATTR_INTS = 8, ATTR_STRINGS = 9, ATTR_TENSORS = 10, ATTR_GRAPHS = 11,
    ATTR_TYPE = 20, ATTR_REF = 21, ATTR_SPARSE = 22,
    VI_NAME = 1, VI_TYPE = 2, VI_METADATA = 4, T_METADATA = 16, MODEL_METADATA = 14,
    TYPE_TENSOR = 1, TYPE_SPARSE = 8,
    TT_ELEM = 1, TT_SHAPE = 2, SHAPE_DIM = 1, DIM_VALUE = 1, DIM_PARAM = 2,
    T_DIMS = 1, T_DTYPE = 2, T_FLOAT = 4, T_INT32 = 5, T_STRING = 6, T_INT64 = 7,
    T_NAME = 8, T_RAW = 9, T_DOUBLE = 10, T_UINT64 = 11, T_EXTERNAL = 13, T_LOCATION = 14,
    SPARSE_VALUES = 1, SPARSE_DIMS = 3,
    KV_KEY = 1, KV_VALUE = 2,
    FN_NAME = 1, FN_INPUT = 4, FN_OUTPUT = 5, FN_NODE = 7, FN_DOMAIN = 10,
    FN_ATTR_PROTO = 11,
};

typedef struct mp__fn {
    const char *name, *domain;
    pb msg;
    pb *in, *out;             /* formal names */
    int n_in, n_out;
    mp_strmap in_names, out_names; /* formal name -> position (first wins) */
    pb *defaults;             /* attribute_proto defaults */
    int n_defaults;
    mp_attr *def_attrs;       /* the defaults decoded, on first use */
    int next_same;            /* next function with the same name, -1 */
    int tail_same;            /* (first of a name) the last one with it */
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
    int top_calls;            /* function calls among the main graph's nodes */
    mp_strmap fn_by_name;     /* function name -> first index with that name */
    mp_limits lim;
    int64_t n_nodes, n_values; /* over all graphs, for the limits */
    int64_t n_edges;          /* node inputs and outputs: analysis indexes them with int */
    int nest;                 /* current nesting of subgraphs and calls */
    mp_graph **graphs;        /* every subgraph made, to release orphans */
    int n_graphs, cap_graphs;
    mp_strmap interned;       /* op types, domains, attribute names: one copy each */
    bool own_map;             /* m->map is our mapping of the file (mp__release) */
    const uint8_t *rel_lo, *rel_hi; /* pages read and not yet given back */
    struct { const char *str; size_t len; } icache[64]; /* recent interned strings */
    struct { const char *name; int want; } acache[64];  /* attribute name -> ONNX type */
} mp__loader;

static mp_status mp__bad(mp__loader *L, const char *what, const pb *at) {
    size_t off = 0;
    /* an offset into the model (not into a standalone tensor's bytes) */
    if (at && L->m->map && at->p >= L->m->map && at->p <= L->m->map + L->m->map_size)
        off = (size_t)(at->p - L->m->map);
    return mp_error(MP_ERR_FORMAT, "%s: malformed ONNX protobuf: %s (near byte %zu)",
                    L->m->path, what, off);
}

/* Out of memory, or over the memory limit (the arena refuses first). */
static mp_status mp__nomem(mp__loader *L) {
    if (L->m->arena.limit_hit)
        return mp_error(MP_ERR_LIMIT,
                        "%s: the model's graph structure needs more than %lld bytes "
                        "(limit memory; raise it with --max-memory BYTES)",
                        L->m->path, (long long)L->lim.max_memory);
    return mp_error(MP_ERR_NOMEM, "%s: out of memory", L->m->path);
}

/* A limit exceeded: the message names it and the flag that raises it. */
static mp_status mp__limit(mp__loader *L, const char *what, const char *name, int64_t value) {
    if (strcmp(name, "nodes") == 0)
        return mp_error(MP_ERR_LIMIT,
                        "%s: %s (limit nodes=%lld; raise it with --max-nodes N or --limit nodes=N)",
                        L->m->path, what, (long long)value);
    return mp_error(MP_ERR_LIMIT, "%s: %s (limit %s=%lld; raise it with --limit %s=N)",
                    L->m->path, what, name, (long long)value, name);
}

/* Names are C strings: a NUL byte inside one would alias another name. */
static bool mp__name_ok(pb s) {
    return !s.p || s.end == s.p || !memchr(s.p, 0, (size_t)(s.end - s.p));
}

#define MP_NAME_MAX (1 << 20) /* bytes of a name (names print with %.*s) */
#define MP_OPSETS_MAX 128     /* opset_import entries (each node looks its domain up) */

/* A name from the file: no NUL byte, at most MP_NAME_MAX bytes. */
static mp_status mp__check_name(mp__loader *L, pb s, const char *what) {
    if (s.p && s.end - s.p > MP_NAME_MAX)
        return mp_error(MP_ERR_LIMIT, "%s: %s of %zu bytes is too long (limit %d bytes)",
                        L->m->path, what, (size_t)(s.end - s.p), MP_NAME_MAX);
    if (!mp__name_ok(s))
        return mp_error(MP_ERR_FORMAT, "%s: %s '%.*s' holds a NUL byte", L->m->path, what,
                        (int)(s.end - s.p), (const char *)s.p);
    return MP_OK;
}

/* Find or create a value, counting new ones against the limit. */
static int mp__value_h(mp__loader *L, mp_graph *g, const char *name, size_t len, uint32_t h,
                       mp_status *st) {
    int before = g->n_values;
    int v = mp_graph_value_h(g, name, len, h);
    if (v < 0) {
        *st = mp__nomem(L);
        return -1;
    }
    if (g->n_values > before && ++L->n_values > L->lim.max_values) {
        *st = mp__limit(L, "the model has too many values", "values", L->lim.max_values);
        return -1;
    }
    *st = MP_OK;
    return v;
}

static int mp__value(mp__loader *L, mp_graph *g, const char *name, size_t len, mp_status *st) {
    return mp__value_h(L, g, name, len, mp_strmap_hash(name, len), st);
}

/* A new subgraph, remembered so that one the decoder abandons (an error
 * half-way, an attribute dropped) is still released. */
static mp_graph *mp__new_graph(mp__loader *L, mp_graph *parent) {
    mp_graph **ng = mp_grow(L->graphs, sizeof *L->graphs, &L->cap_graphs, L->n_graphs + 1);
    if (!ng) return NULL;
    L->graphs = ng;
    mp_graph *g = mp_graph_new(L->m, parent);
    if (g) L->graphs[L->n_graphs++] = g;
    return g;
}

static char *mp__str(mp__loader *L, pb s) {
    return mp_arena_strndup(&L->m->arena, (const char *)s.p, (size_t)(s.end - s.p));
}

/* A string that repeats across nodes (op type, domain, attribute name):
 * one copy, shared. */
static const char *mp__intern(mp__loader *L, pb s) {
    /* a few dozen distinct strings over thousands of nodes: a small cache
     * on length and end bytes answers most without hashing */
    size_t n = (size_t)(s.end - s.p);
    unsigned k = n ? (unsigned)(n * 31u + s.p[0] * 7u + s.p[n - 1]) & 63u : 0;
    if (L->icache[k].str && L->icache[k].len == n &&
        (n == 0 || memcmp(L->icache[k].str, s.p, n) == 0))
        return L->icache[k].str;
    const char *r = mp_strmap_intern(&L->interned, &L->m->arena, (const char *)s.p, n);
    if (r) {
        L->icache[k].str = r;
        L->icache[k].len = n;
    }
    return r;
}

static bool mp__pbeq(pb s, const char *z) {
    size_t n = strlen(z);
    /* an absent field is a NULL view: no memcmp on it (even of 0 bytes) */
    return (size_t)(s.end - s.p) == n && (n == 0 || memcmp(s.p, z, n) == 0);
}

#define NOMEM() mp__nomem(L)

static bool mp__kv(pb *msg, pb *key, pb *val);

/* torch.export's input kinds, as the dynamo exporter writes them. */
static const char mp__kind_key[] = "pkg.torch.export.graph_signature.InputSpec.kind";

static uint32_t mp__kind_bits(const uint8_t *p, size_t n) {
    pb s = {p, n ? p + n : p}; /* an absent value is a NULL view: no offset on it */
    if (mp__pbeq(s, "PARAMETER")) return MP_VAL_DECL_PARAM;
    if (mp__pbeq(s, "BUFFER")) return MP_VAL_DECL_BUFFER;
    if (mp__pbeq(s, "CONSTANT_TENSOR")) return MP_VAL_DECL_CONST;
    return 0;
}

/* A metadata_props entry of a tensor or value info: the input kind it
 * declares (MP_VAL_DECL_*), 0 for any other entry; false when malformed. */
static bool mp__decl_kind(pb entry, uint32_t *decl) {
    pb key = {0}, val = {0};
    if (!mp__kv(&entry, &key, &val)) return false;
    if (mp__pbeq(key, mp__kind_key)) *decl |= mp__kind_bits(val.p, (size_t)(val.end - val.p));
    return true;
}

/* ---- types and dims ---- */

/* Decode a TypeProto into dtype/rank/dims (dims with symbols). Only the
 * tensor types are entered; sequence, map and optional types are skipped
 * whole (no recursion, whatever their nesting). `what` names the value. */
static mp_status mp__type(mp__loader *L, const char *what, pb t, int *dtype, int *rank,
                          int64_t **dims) {
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
                        if (f == SHAPE_DIM && w == PB_LEN) n++;
                    }
                    if (n > MP_MAX_RANK)
                        return mp_error(MP_ERR_LIMIT,
                                        "%s: value '%s' has rank %d (limit rank=%d, the most "
                                        "the tool supports)",
                                        L->m->path, what, n, MP_MAX_RANK);
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
                                                    "%s: value '%s': dim %d is negative (%lld)",
                                                    L->m->path, what, k, (long long)(int64_t)v);
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
        L->ext[idx].state = EXT_ABSENT;
        L->ext[idx].path = rel;
        /* A model loaded from memory has no folder: nothing is opened. */
        if (m->dir) {
            char *path = mp_arena_printf(&m->arena, "%s/%s", m->dir, rel);
            if (!path) return NOMEM();
            L->ext[idx].path = path;
            /* Checked before anything is opened: lstat and realpath only
             * read directory entries and links. The resolved file must
             * stay inside the model's folder. */
            struct stat st;
            if (lstat(path, &st) == 0) {
                char real_dir[PATH_MAX], real_file[PATH_MAX];
                if (!realpath(m->dir, real_dir) || !realpath(path, real_file))
                    return mp_error(MP_ERR_FORMAT,
                                    "%s: tensor '%s': external data '%s' cannot be resolved "
                                    "(a dangling link?)",
                                    m->path, t->name, rel);
                if (!mp_path_inside(real_dir, real_file))
                    return mp_error(MP_ERR_FORMAT,
                                    "%s: tensor '%s': external data '%s' resolves to '%s', "
                                    "outside the model's folder",
                                    m->path, t->name, rel, real_file);
                if (stat(real_file, &st) != 0 || !S_ISREG(st.st_mode))
                    return mp_error(MP_ERR_FORMAT,
                                    "%s: tensor '%s': external data '%s' is not a regular file",
                                    m->path, t->name, rel);
                /* read later (small shape constants only) by this path */
                if (!(L->ext[idx].path = mp_arena_strdup(&m->arena, real_file))) return NOMEM();
                L->ext[idx].state = EXT_PRESENT;
                L->ext[idx].size = (uint64_t)st.st_size;
            }
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
        /* information, not a warning: a static profile needs no weight
         * values (the fixtures ship without them, GUIDE §5); the reports
         * say it, and a measured run warns when it fills them */
        if (!m->absent_weights && !(m->absent_weights = mp_arena_strdup(&m->arena, rel)))
            return NOMEM();
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
    int64_t typed_n[T_UINT64 + 1] = {0}; /* values of each typed data field */
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
            mp_status cs = mp__check_name(L, s, "a tensor name");
            if (cs) return cs;
            t->name = mp__str(L, s);
            if (!t->name) return NOMEM();
        } else if (f == T_RAW && w == PB_LEN) {
            if (!pb_len(&scan, &raw)) return mp__bad(L, "bad raw_data", &scan);
            has_raw = true;
        } else if (f == T_METADATA && w == PB_LEN) {
            pb e = {0};
            if (!pb_len(&scan, &e) || !mp__decl_kind(e, &t->decl))
                return mp__bad(L, "bad tensor metadata", &scan);
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
            /* count the values, to check them against the dims */
            bool fixed4 = f == T_FLOAT, fixed8 = f == T_DOUBLE, str = f == T_STRING;
            if (w == PB_LEN) {
                pb d = {0};
                if (!pb_len(&scan, &d)) return mp__bad(L, "bad tensor data", &scan);
                uint64_t dl = (uint64_t)(d.end - d.p), v = 0;
                if (str) {
                    typed_n[f]++;
                } else if (fixed4 || fixed8) {
                    if (dl % (fixed4 ? 4 : 8)) return mp__bad(L, "bad packed tensor data", &d);
                    typed_n[f] += (int64_t)(dl / (fixed4 ? 4 : 8));
                } else {
                    while (pb_more(&d)) {
                        if (!pb_varint(&d, &v)) return mp__bad(L, "bad packed tensor data", &d);
                        typed_n[f]++;
                    }
                }
            } else if ((w == PB_VARINT && !fixed4 && !fixed8 && !str) ||
                       (w == PB_I32 && fixed4) || (w == PB_I64 && fixed8)) {
                if (!pb_skip(&scan, w)) return mp__bad(L, "bad tensor data", &scan);
                typed_n[f]++;
            } else {
                return mp__bad(L, "tensor data field of the wrong wire type", &scan);
            }
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
        /* complex numbers take two values, 4-bit types two per value */
        int64_t want = t->numel;
        if (t->dtype == MP_DT_COMPLEX64 || t->dtype == MP_DT_COMPLEX128)
            want = t->numel > INT64_MAX / 2 ? -1 : 2 * t->numel;
        else if (mp_dtype_bits(t->dtype) == 4)
            want = t->numel / 2 + t->numel % 2;
        static const char *const field_names[T_UINT64 + 1] = {
            [T_FLOAT] = "float_data", [T_INT32] = "int32_data", [T_STRING] = "string_data",
            [T_INT64] = "int64_data", [T_DOUBLE] = "double_data", [T_UINT64] = "uint64_data"};
        if (typed_n[typed] != want)
            return mp_error(MP_ERR_FORMAT,
                            "%s: tensor '%s': %s holds %lld values, but %s[%lld elements] needs "
                            "%lld",
                            m->path, t->name, field_names[typed], (long long)typed_n[typed],
                            mp_dtype_name(t->dtype), (long long)t->numel, (long long)want);
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

static mp_status mp__graph(mp__loader *L, mp_graph *g, pb msg);
static mp_status mp__emit_node(mp__loader *L, mp_graph *g, pb msg, const mp__call *call);

static const mp__fn *mp__find_fn(mp__loader *L, pb domain, pb op) {
    if (!L->n_fns || op.end == op.p) return NULL;
    for (int i = mp_strmap_getn(&L->fn_by_name, (const char *)op.p, (size_t)(op.end - op.p));
         i >= 0; i = L->fns[i].next_same)
        if (mp__pbeq(domain, L->fns[i].domain)) return &L->fns[i];
    return NULL;
}

static int mp__opset(const mp_model *m, const char *domain);

/* Occurrences of every field number below 32 in one pass; false when the
 * message is malformed. */
/* Reading a field's key maps the page cache's folio around it into the
 * process, and this kernel maps large folios (up to 2 MB) whole: touching
 * each initializer's header of a model with inline weights would map most
 * of the file (a 530 MB BERT: 155 MB of RSS). Past a field of at least
 * MP__RELEASE_MIN bytes the loader gives its pages back (MADV_DONTNEED on
 * a read-only file mapping only unmaps them: they stay in the page cache
 * and a later read maps them again), so RSS stays near what one field
 * maps whatever the weights. Only our own mapping of the file, never a
 * caller's buffer. */
#define MP__RELEASE_MIN ((size_t)64 << 10)

#define MP__RELEASE_BATCH ((size_t)8 << 20)

/* Give back the pages of the pending range now. */
static void mp__release_flush(mp__loader *L) {
    if (!L || L->rel_hi <= L->rel_lo) return;
    static size_t page;
    if (!page) page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)L->rel_lo & ~(uintptr_t)(page - 1);
    uintptr_t b = ((uintptr_t)L->rel_hi + page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t base = (uintptr_t)L->m->map, end = base + ((L->m->map_size + page - 1) & ~(page - 1));
    if (a < base) a = base;
    if (b > end) b = end;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
    L->rel_lo = L->rel_hi = NULL;
}

/* The pages of [from, to), a field just read, may go back: ranges are
 * gathered while reading goes forward and given back in one call per
 * MP__RELEASE_BATCH bytes, which bounds what stays mapped. */
static void mp__release(mp__loader *L, const uint8_t *from, const uint8_t *to) {
    if (!L || !L->own_map || (size_t)(to - from) < MP__RELEASE_MIN) return;
    if (L->rel_hi && from < L->rel_lo) mp__release_flush(L); /* a new pass: start again */
    if (!L->rel_hi) L->rel_lo = from;
    if (to > L->rel_hi) L->rel_hi = to;
    if ((size_t)(L->rel_hi - L->rel_lo) >= MP__RELEASE_BATCH) mp__release_flush(L);
}

static bool mp__count_fields(mp__loader *L, pb msg, int counts[32]) {
    uint32_t f = 0;
    int w = 0;
    memset(counts, 0, sizeof(int) * 32);
    while (pb_more(&msg)) {
        const uint8_t *at = msg.p;
        if (!pb_key(&msg, &f, &w) || !pb_skip(&msg, w)) return false;
        if (f < 32) counts[f]++;
        mp__release(L, at, msg.p);
    }
    return true;
}

/* Field of an AttributeProto -> the attribute type it holds. */
static int mp__attr_field_type(uint32_t f) {
    switch (f) {
    case ATTR_F: return MP_ATTR_FLOAT;
    case ATTR_I: return MP_ATTR_INT;
    case ATTR_S: return MP_ATTR_STRING;
    case ATTR_T: return MP_ATTR_TENSOR;
    case ATTR_G: return MP_ATTR_GRAPH;
    case ATTR_FLOATS: return MP_ATTR_FLOATS;
    case ATTR_INTS: return MP_ATTR_INTS;
    case ATTR_STRINGS: return MP_ATTR_STRINGS;
    case ATTR_TENSORS: return MP_ATTR_TENSORS;
    case ATTR_GRAPHS: return MP_ATTR_GRAPHS;
    case ATTR_SPARSE: return MP_ATTR_SPARSE_TENSOR;
    case 23: return MP_ATTR_SPARSE_TENSORS;
    case 14: return MP_ATTR_TYPE_PROTO;
    case 15: return MP_ATTR_TYPE_PROTOS;
    default: return 0;
    }
}

static const char *mp__attr_type_name(int t) {
    static const char *const names[] = {"UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR",
                                        "GRAPH", "FLOATS", "INTS", "STRINGS", "TENSORS",
                                        "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS",
                                        "TYPE_PROTO", "TYPE_PROTOS"};
    return t >= 0 && t < (int)MP_ARRAY_LEN(names) ? names[t] : "?";
}

/* Decode an AttributeProto of node `node` (for messages). Subgraphs are
 * decoded into children of g; with g NULL (a function's default
 * attributes) they are not decoded at all. */
static mp_status mp__attr(mp__loader *L, mp_graph *g, pb msg, mp_attr *a, const char *node) {
    mp_model *m = L->m;
    uint32_t f = 0;
    int w = 0;
    int64_t n_floats = 0, n_ints = 0, n_strings = 0, n_tensors = 0, n_graphs = 0;
    int declared = 0, held = 0; /* the type field; the type of the value fields */
    pb scan = msg;
    a->name = "";
    /* pass 1: scalar fields and counts */
    while (pb_more(&scan)) {
        if (!pb_key(&scan, &f, &w)) return mp__bad(L, "bad attribute", &scan);
        pb s = {0};
        uint64_t v = 0;
        uint32_t x = 0;
        int ft = mp__attr_field_type(f);
        if (ft) {
            if (held && held != ft)
                return mp_error(MP_ERR_FORMAT,
                                "%s: node '%s': attribute '%s' holds both a %s and a %s value",
                                m->path, node, a->name, mp__attr_type_name(held),
                                mp__attr_type_name(ft));
            held = ft;
        }
        switch (f) {
        case ATTR_NAME:
            if (w != PB_LEN || !pb_len(&scan, &s)) return mp__bad(L, "bad attribute name", &scan);
            if (!(a->name = mp__intern(L, s))) return NOMEM();
            continue;
        case ATTR_REF:
            if (w != PB_LEN || !pb_len(&scan, &s)) return mp__bad(L, "bad ref_attr_name", &scan);
            if (!(a->ref = mp__str(L, s))) return NOMEM();
            continue;
        case ATTR_TYPE:
            if (w != PB_VARINT || !pb_varint(&scan, &v)) return mp__bad(L, "bad attribute type", &scan);
            if (v > MP_ATTR_TYPE_PROTOS)
                return mp_error(MP_ERR_FORMAT, "%s: node '%s': attribute '%s' has unknown type %llu",
                                m->path, node, a->name, (unsigned long long)v);
            declared = (int)v;
            continue;
        case ATTR_F:
            if (w != PB_I32 || !pb_fixed32(&scan, &x)) return mp__bad(L, "bad float attribute", &scan);
            a->f = pb_f32(x);
            continue;
        case ATTR_I:
            if (w != PB_VARINT || !pb_varint(&scan, &v)) return mp__bad(L, "bad int attribute", &scan);
            a->i = (int64_t)v;
            continue;
        case ATTR_S:
            if (w != PB_LEN || !pb_len(&scan, &s)) return mp__bad(L, "bad string attribute", &scan);
            a->s_len = (size_t)(s.end - s.p);
            if (!(a->s = mp__str(L, s))) return NOMEM();
            continue;
        case ATTR_FLOATS:
            if (w == PB_LEN) {
                if (!pb_len(&scan, &s)) return mp__bad(L, "bad floats", &scan);
                if ((s.end - s.p) % 4) return mp__bad(L, "bad packed floats", &scan);
                n_floats += (int64_t)((s.end - s.p) / 4);
            } else if (w == PB_I32) {
                if (!pb_fixed32(&scan, &x)) return mp__bad(L, "bad floats", &scan);
                n_floats++;
            } else {
                return mp__bad(L, "bad floats", &scan);
            }
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
            continue;
        case ATTR_STRINGS: n_strings++; break;
        case ATTR_TENSORS: n_tensors++; break;
        case ATTR_GRAPHS: n_graphs++; break;
        default: break;
        }
        if (!pb_skip(&scan, w)) return mp__bad(L, "bad attribute field", &scan);
    }
    if (declared && held && declared != held)
        return mp_error(MP_ERR_FORMAT,
                        "%s: node '%s': attribute '%s' is declared %s but holds a %s value",
                        m->path, node, a->name, mp__attr_type_name(declared),
                        mp__attr_type_name(held));
    a->type = declared ? declared : held;
    int64_t most = MP_MAX(MP_MAX(n_floats, n_ints), MP_MAX(n_strings, MP_MAX(n_tensors, n_graphs)));
    if (most > L->lim.max_attr_elems || most > INT_MAX) {
        char what[512];
        snprintf(what, sizeof what, "node '%.64s': attribute '%.64s' has %lld elements", node,
                 a->name, (long long)most);
        return mp__limit(L, what, "attr-elems", L->lim.max_attr_elems);
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
    case MP_ATTR_FLOATS: a->n = (int)n_floats; break;
    case MP_ATTR_INTS: a->n = (int)n_ints; break;
    case MP_ATTR_STRINGS: a->n = (int)n_strings; break;
    case MP_ATTR_TENSORS: a->n = (int)n_tensors; break;
    case MP_ATTR_GRAPHS: a->n = (int)n_graphs; break;
    default: break;
    }
    /* pass 2: repeated and nested fields (pass 1 checked the structure) */
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
        } else if (f == ATTR_STRINGS) {
            pb_skip(&scan, w);
            a->strings[ks++] = "";
        } else if (f == ATTR_T && w == PB_LEN) {
            pb_len(&scan, &s);
            if ((st = mp__tensor(L, s, &a->t))) return st;
        } else if (f == ATTR_SPARSE && w == PB_LEN) {
            pb_len(&scan, &s);
            if ((st = mp__sparse_tensor(L, s, &a->t))) return st;
        } else if (f == ATTR_TENSORS && w == PB_LEN) {
            pb_len(&scan, &s);
            if ((st = mp__tensor(L, s, &a->tensors[kt++]))) return st;
        } else if (((f == ATTR_G && a->type == MP_ATTR_GRAPH) ||
                    (f == ATTR_GRAPHS && a->type == MP_ATTR_GRAPHS)) &&
                   w == PB_LEN && g) {
            pb_len(&scan, &s);
            if (L->nest + 1 > L->lim.max_depth) {
                char what[512];
                snprintf(what, sizeof what,
                         "node '%.64s': attribute '%.64s': subgraphs and function calls nest "
                         "deeper than %lld levels",
                         node, a->name, (long long)L->lim.max_depth);
                return mp__limit(L, what, "depth", L->lim.max_depth);
            }
            mp_graph *sub = mp__new_graph(L, g);
            if (!sub) return NOMEM();
            L->nest++;
            st = mp__graph(L, sub, s);
            L->nest--;
            if (st) return st;
            if (f == ATTR_G)
                a->g = sub;
            else
                a->graphs[kg++] = sub;
        } else {
            pb_skip(&scan, w);
        }
    }
    if (a->type == MP_ATTR_TENSORS) a->n = kt;
    if (a->type == MP_ATTR_GRAPHS) a->n = kg;
    /* a STRING without its field is the empty string (protobuf's default),
     * never NULL */
    if (!a->s) {
        a->s = "";
        a->s_len = 0;
    }
    if ((a->type == MP_ATTR_TENSOR || a->type == MP_ATTR_SPARSE_TENSOR) && !a->t && !a->ref)
        return mp_error(MP_ERR_FORMAT,
                        "%s: node '%s': attribute '%s' is a tensor attribute without a tensor",
                        m->path, node, a->name);
    if (a->type == MP_ATTR_GRAPH && !a->g && !a->ref)
        return mp_error(MP_ERR_FORMAT,
                        "%s: node '%s': attribute '%s' is a graph attribute without a graph",
                        m->path, node, a->name);
    return MP_OK;
}

/* Map a name used inside a function body (or a graph) to a value index of
 * the graph being built. Empty names are omitted optionals (-1). */
static int mp__map_name(mp__loader *L, mp_graph *g, pb name, const mp__call *call, bool output,
                        mp_status *st) {
    *st = MP_OK;
    if (name.end == name.p) return -1;
    size_t len = (size_t)(name.end - name.p);
    bool nul;
    uint32_t h = mp_strmap_hash_checked((const char *)name.p, len, &nul);
    /* the NUL test rode along with the hash: the full check (and its
     * message) only when it failed or the name is very long */
    if ((nul || len > MP_NAME_MAX) && (*st = mp__check_name(L, name, "a value name"))) return -1;
    if (call) {
        const mp__fn *fn = call->fn;
        int i = mp_strmap_getn(output ? &fn->out_names : &fn->in_names, (const char *)name.p, len);
        if (i >= 0) return output ? call->actual_out[i] : call->actual_in[i];
        if (!output) {
            /* an input of the body may also be an output formal (rare) */
            i = mp_strmap_getn(&fn->out_names, (const char *)name.p, len);
            if (i >= 0) return call->actual_out[i];
        }
        char *full = mp_arena_printf(&L->m->arena, "%s%.*s", call->prefix, (int)len,
                                     (const char *)name.p);
        if (!full) {
            *st = NOMEM();
            return -1;
        }
        return mp__value(L, g, full, strlen(full), st);
    }
    return mp__value_h(L, g, (const char *)name.p, len, h, st);
}

/* Look up an attribute value for ref_attr_name in the calling context. */
static const mp_attr *mp__ref_attr(mp__loader *L, const mp__call *call, const char *ref,
                                   mp_attr *tmp) {
    (void)tmp;
    if (!call) return NULL;
    const mp_attr *a = mp_node_attr(call->caller, ref);
    if (a) return a;
    /* the function's defaults, decoded once (a bad one is never found) */
    mp__fn *fn = (mp__fn *)call->fn;
    if (!fn->def_attrs && fn->n_defaults) {
        fn->def_attrs = mp_arena_calloc(&L->m->arena, (size_t)fn->n_defaults, sizeof(mp_attr));
        if (!fn->def_attrs) return NULL;
        for (int i = 0; i < fn->n_defaults; i++)
            if (mp__attr(L, NULL, fn->defaults[i], &fn->def_attrs[i], call->caller->name) != MP_OK) {
                memset(&fn->def_attrs[i], 0, sizeof fn->def_attrs[i]);
                fn->def_attrs[i].name = "";
                mp_error_clear();
            }
    }
    for (int i = 0; i < fn->n_defaults; i++)
        if (fn->def_attrs[i].name && strcmp(fn->def_attrs[i].name, ref) == 0 &&
            fn->def_attrs[i].type)
            return &fn->def_attrs[i];
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

/* A scope the exporter makes up for nodes that had no module stack (its
 * last path segment is "_empty_nn_module_stack_from_metadata_hook"): no
 * module of the model. */
static bool mp__scope_artefact(const char *path, size_t len) {
    static const char art[] = "_empty_nn_module_stack_from_metadata_hook";
    const char *seg = memrchr(path, '.', len);
    seg = seg ? seg + 1 : path;
    return (size_t)(path + len - seg) >= sizeof art - 1 && memcmp(seg, art, sizeof art - 1) == 0;
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
        if (mp__scope_artefact(path, pl)) continue; /* its nodes stay in the parent */
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

/* The fx node a dynamo-exported node was lowered from
 * (pkg.torch.onnx.fx_node), as torch.fx prints it:
 *   %linear_7 : [num_users=1] = call_function[target=torch.ops.aten.linear.default](
 *       args = (%x, %p_fc_weight, %p_fc_bias), kwargs = {})
 * Kept (*out) only when an argument names a parameter placeholder ("%p_");
 * malformed or unusual text keeps nothing (the metadata is a help, never
 * required). */
static mp_status mp__fx_parse(mp__loader *L, pb text, const mp_fx **out) {
    *out = NULL;
    const char *s = (const char *)text.p, *end = (const char *)text.end;
    size_t len = (size_t)(end - s);
    if (!s || len < 8 || !memmem(s, len, "%p_", 3)) return MP_OK;
    const char *args = memmem(s, len, "args = (", 8);
    if (!args) return MP_OK;
    mp_model *m = L->m;
    /* the operator: target=torch.ops.aten.NAME.overload */
    const char *target = NULL;
    const char *t = memmem(s, len, "target=", 7);
    if (t) {
        const char *te = memchr(t, ']', (size_t)(end - t));
        const char *a = te ? memmem(t, (size_t)(te - t), "aten.", 5) : NULL;
        if (a) {
            a += 5;
            const char *ae = a;
            while (ae < te && *ae != '.') ae++;
            target = mp__intern(L, pb_view((const uint8_t *)a, (size_t)(ae - a)));
            if (!target) return NOMEM();
        }
    }
    /* the arguments: split at the commas of depth 0 */
    const char *p = args + 8;
    int depth = 0, arg = 0, n = 0, cap = 0, pcap = 0;
    const char **names = NULL;
    int *pos = NULL;
    int64_t norm = -1;
    const char *arg_start = p;
    for (; p < end && depth >= 0; p++) {
        char c = *p;
        if (c == '[' || c == '(' || c == '{') {
            depth++;
        } else if (c == ']' || c == ')' || c == '}') {
            depth--;
        }
        if ((c == ',' && depth == 0) || depth < 0) {
            /* one argument ends: a literal normalized_shape at position 1 */
            const char *a = arg_start;
            while (a < p && *a == ' ') a++;
            if (arg == 1 && a < p && *a == '[') {
                int64_t prod = 1;
                bool ok = true;
                for (const char *q = a + 1; q < p && *q != ']'; q++) {
                    if (*q == ' ' || *q == ',') continue;
                    if (*q < '0' || *q > '9') { ok = false; break; }
                    int64_t v = 0;
                    while (q < p && *q >= '0' && *q <= '9' && v < INT64_MAX / 16) v = v * 10 + (*q++ - '0');
                    q--;
                    prod = prod > INT64_MAX / (v ? v : 1) ? INT64_MAX : prod * v;
                }
                if (ok) norm = prod;
            }
            arg++;
            arg_start = p + 1;
            continue;
        }
        if (c == '%' && p + 3 < end && p[1] == 'p' && p[2] == '_') {
            const char *e = p + 1;
            while (e < end && (*e == '_' || (*e >= '0' && *e <= '9') || (*e >= 'a' && *e <= 'z') ||
                               (*e >= 'A' && *e <= 'Z')))
                e++;
            const char **nn = mp_arena_grow(&m->arena, names, sizeof *names, &cap, n + 1);
            if (!nn) return NOMEM();
            names = nn;
            int *np = mp_arena_grow(&m->arena, pos, sizeof *pos, &pcap, n + 1);
            if (!np) return NOMEM();
            pos = np;
            names[n] = mp_arena_strndup(&m->arena, p + 1, (size_t)(e - p - 1));
            if (!names[n]) return NOMEM();
            pos[n++] = arg;
            p = e - 1;
        }
    }
    if (!n) return MP_OK;
    mp_fx *fx = mp_arena_calloc(&m->arena, 1, sizeof *fx);
    if (!fx) return NOMEM();
    fx->target = target;
    fx->n_params = n;
    fx->params = names;
    fx->args = pos;
    fx->norm_numel = norm;
    *out = fx;
    return MP_OK;
}

/* Attributes whose type is the same in every operator of the default
 * domain that has them: one of the wrong type is refused at load, where
 * an operator would otherwise quietly take its default. */
static const struct {
    const char *name;
    int type;
} mp__attr_types[] = {
    {"axis", MP_ATTR_INT}, {"group", MP_ATTR_INT}, {"keepdims", MP_ATTR_INT},
    {"transA", MP_ATTR_INT}, {"transB", MP_ATTR_INT}, {"to", MP_ATTR_INT},
    {"ceil_mode", MP_ATTR_INT}, {"count_include_pad", MP_ATTR_INT},
    {"storage_order", MP_ATTR_INT}, {"hidden_size", MP_ATTR_INT}, {"blocksize", MP_ATTR_INT},
    {"batch_dims", MP_ATTR_INT}, {"allowzero", MP_ATTR_INT},
    {"noop_with_empty_axes", MP_ATTR_INT},
    {"alpha", MP_ATTR_FLOAT}, {"beta", MP_ATTR_FLOAT}, {"epsilon", MP_ATTR_FLOAT},
    {"momentum", MP_ATTR_FLOAT},
    {"kernel_shape", MP_ATTR_INTS}, {"strides", MP_ATTR_INTS}, {"pads", MP_ATTR_INTS},
    {"dilations", MP_ATTR_INTS}, {"perm", MP_ATTR_INTS}, {"output_padding", MP_ATTR_INTS},
    {"output_shape", MP_ATTR_INTS}, {"axes", MP_ATTR_INTS}, {"split", MP_ATTR_INTS},
    {"starts", MP_ATTR_INTS}, {"ends", MP_ATTR_INTS},
    {"auto_pad", MP_ATTR_STRING}, {"mode", MP_ATTR_STRING}, {"direction", MP_ATTR_STRING},
    {"equation", MP_ATTR_STRING},
    {"then_branch", MP_ATTR_GRAPH}, {"else_branch", MP_ATTR_GRAPH}, {"body", MP_ATTR_GRAPH},
};

/* The type ONNX gives an attribute name (0: not in the table), remembered
 * per name pointer (names are interned, so one entry serves every node). */
static int mp__attr_want(mp__loader *L, const char *name) {
    unsigned k = (unsigned)((uintptr_t)name >> 4) & 63u;
    if (L->acache[k].name == name) return L->acache[k].want;
    int want = 0;
    for (size_t j = 0; j < MP_ARRAY_LEN(mp__attr_types); j++)
        if (name[0] == mp__attr_types[j].name[0] && strcmp(name, mp__attr_types[j].name) == 0) {
            want = mp__attr_types[j].type;
            break;
        }
    L->acache[k].name = name;
    L->acache[k].want = want;
    return want;
}

static mp_status mp__check_attr_types(mp__loader *L, const mp_node *n) {
    if (n->domain[0]) return MP_OK;
    for (int i = 0; i < n->n_attr; i++) {
        const mp_attr *a = &n->attr[i];
        if (!a->type) continue;
        int want = mp__attr_want(L, a->name);
        bool ok = !want || a->type == want || (want == MP_ATTR_FLOAT && a->type == MP_ATTR_INT);
        if (!ok)
            return mp_error(MP_ERR_FORMAT,
                            "%s: node '%s' (%s): attribute '%s' is %s, but ONNX defines it "
                            "as %s",
                            L->m->path, n->name, n->op, a->name, mp__attr_type_name(a->type),
                            mp__attr_type_name(want));
    }
    return MP_OK;
}

/* Nodes of a graph and its subgraphs. */
static int64_t mp__count_nodes(const mp_graph *g) {
    int64_t n = g->n_nodes;
    for (int k = 0; k < g->n_nodes; k++)
        for (int s = 0; s < g->nodes[k].n_sub; s++) n += mp__count_nodes(g->nodes[k].sub[s]);
    return n;
}

/* Decode a NodeProto and add it to g (or inline the function it calls). */
static mp_status mp__emit_node(mp__loader *L, mp_graph *g, pb msg, const mp__call *call) {
    mp_model *m = L->m;
    uint32_t f = 0;
    int w = 0;
    int64_t n_in = 0, n_out = 0, n_attr = 0;
    pb name = {0}, op = {0}, domain = {0}, scan = msg, scopes = {0}, classes = {0}, fxtext = {0};
    if (++L->n_nodes > L->lim.max_nodes)
        return mp__limit(L, "the model has too many nodes (after inlining functions)", "nodes",
                         L->lim.max_nodes);
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
                else if (mp__pbeq(key, "pkg.torch.onnx.fx_node")) fxtext = val;
            }
            else n_attr++;
        } else if (!pb_skip(&scan, w)) {
            return mp__bad(L, "bad node field", &scan);
        }
    }
    mp_status cs;
    if ((cs = mp__check_name(L, name, "a node name")) || (cs = mp__check_name(L, op, "an op_type")) ||
        (cs = mp__check_name(L, domain, "a domain")))
        return cs;
    if (op.end == op.p)
        return mp_error(MP_ERR_FORMAT, "%s: node '%.*s' has no op_type", m->path,
                        (int)(name.end - name.p), (const char *)name.p);
    if (n_in > INT_MAX / 4 || n_out > INT_MAX / 4 || n_attr > INT_MAX / 4)
        return mp_error(MP_ERR_LIMIT, "%s: node '%.*s' has too many inputs, outputs or "
                        "attributes (limit %d each)",
                        m->path, (int)(name.end - name.p), (const char *)name.p, INT_MAX / 4);
    L->n_edges += n_in + n_out;
    if (L->n_edges > INT_MAX / 2)
        return mp_error(MP_ERR_LIMIT, "%s: the nodes have more than %d inputs and outputs in all",
                        m->path, INT_MAX / 2);
    int k = mp_graph_add_node(g);
    if (k < 0) return NOMEM();
    mp_node *n = &g->nodes[k];
    n->op = mp__intern(L, op);
    n->domain = mp__intern(L, domain);
    if (call && name.end > name.p)
        n->name = mp_arena_printf(&m->arena, "%s%.*s", call->prefix, (int)(name.end - name.p),
                                  (const char *)name.p);
    else if (name.end > name.p)
        n->name = mp__str(L, name);
    else
        n->name = mp_arena_printf(&m->arena, "%s%s_%d", call ? call->prefix : "", n->op, k);
    if (!n->op || !n->domain || !n->name) return NOMEM();
    if (strcmp(n->domain, "ai.onnx") == 0) n->domain = "";
    /* a node's domain must be imported (a function body's nodes use the
     * function's own imports) */
    if (!call && mp__opset(m, n->domain) < 0)
        return mp_error(MP_ERR_FORMAT,
                        "%s: node '%s' (%s) is in domain '%s', which the model does not import "
                        "(no opset_import entry)",
                        m->path, n->name, n->op, n->domain);
    /* inputs and outputs share one block; no attribute array when there
     * are none (a third of the nodes of an exported decoder) */
    n->in = mp_arena_calloc(&m->arena, (size_t)(n_in + n_out + 1), sizeof(int));
    if (!n->in) return NOMEM();
    n->out = n->in + n_in;
    n->attr = NULL;
    if (n_attr && !(n->attr = mp_arena_calloc(&m->arena, (size_t)n_attr, sizeof(mp_attr))))
        return NOMEM();
    n->module = call ? call->module : -1;
    if (!call && scopes.p) {
        int md = mp__module_from_metadata(m, scopes, classes);
        if (md < 0) return NOMEM();
        n->module = md;
        m->module_source = MP_MODSRC_METADATA;
    }
    if (!call && fxtext.p) {
        const mp_fx *fx = NULL;
        mp_status fst = mp__fx_parse(L, fxtext, &fx);
        if (fst) return fst;
        n = &g->nodes[k];
        n->fx = fx;
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
                const mp_value *val = &g->values[v];
                if (val->producer >= 0 || (val->flags & (MP_VAL_INIT | MP_VAL_INPUT)))
                    return mp_error(MP_ERR_FORMAT,
                                    "%s: node '%s' (%s) writes value '%s', which is already "
                                    "%s%s%s",
                                    m->path, n->name, n->op, val->name,
                                    (val->flags & MP_VAL_INIT)    ? "an initializer"
                                    : (val->flags & MP_VAL_INPUT) ? "a graph input"
                                                                  : "produced by node '",
                                    (val->flags & (MP_VAL_INIT | MP_VAL_INPUT))
                                        ? ""
                                        : g->nodes[val->producer].name,
                                    (val->flags & (MP_VAL_INIT | MP_VAL_INPUT)) ? "" : "'");
                g->values[v].producer = k;
            }
        } else {
            mp_attr a;
            memset(&a, 0, sizeof a);
            if ((st = mp__attr(L, g, s, &a, g->nodes[k].name))) return st;
            n = &g->nodes[k];
            if (a.ref) {
                mp_attr tmp;
                const mp_attr *r = mp__ref_attr(L, call, a.ref, &tmp);
                if (!r) continue; /* unset optional attribute */
                const char *nm = a.name;
                a = *r;
                a.name = nm;
                a.ref = NULL;
                /* a graph given by the caller is inferred once per use */
                if (a.type == MP_ATTR_GRAPH && a.g) L->n_nodes += mp__count_nodes(a.g);
                for (int j = 0; a.type == MP_ATTR_GRAPHS && j < a.n; j++)
                    if (a.graphs[j]) L->n_nodes += mp__count_nodes(a.graphs[j]);
                if (L->n_nodes > L->lim.max_nodes)
                    return mp__limit(L, "the model has too many nodes (after inlining functions)",
                                     "nodes", L->lim.max_nodes);
            }
            n->attr[ka++] = a;
        }
    }
    n = &g->nodes[k];
    n->n_in = ki;
    n->n_out = ko;
    n->n_attr = ka;
    if ((cs = mp__check_attr_types(L, n))) return cs;
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
        if (L->nest + 1 > L->lim.max_depth) {
            char what[512];
            snprintf(what, sizeof what,
                     "function '%.64s' (called by node '%.64s'): subgraphs and function calls "
                     "nest deeper than %lld levels (a recursive function?)",
                     fn->name, n->name, (long long)L->lim.max_depth);
            return mp__limit(L, what, "depth", L->lim.max_depth);
        }
        mp_node caller = *n;
        for (int o = 0; o < caller.n_out; o++)
            if (caller.out[o] >= 0) g->values[caller.out[o]].producer = -1;
        g->n_nodes--; /* the call node itself disappears */
        L->n_nodes--;
        mp__call dummy = {.depth = depth - 1, .module = -1};
        L->nest++;
        mp_status st = mp__inline(L, g, fn, &caller, call ? call : &dummy);
        L->nest--;
        return st;
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
    uint32_t decl = 0;
    while (pb_more(&msg)) {
        if (!pb_key(&msg, &f, &w)) return mp__bad(L, "bad value info", &msg);
        if (f == VI_METADATA && w == PB_LEN) {
            pb e = {0};
            if (!pb_len(&msg, &e) || !mp__decl_kind(e, &decl))
                return mp__bad(L, "bad value info metadata", &msg);
        } else if (f == VI_NAME && w == PB_LEN) {
            if (!pb_len(&msg, &name)) return mp__bad(L, "bad value name", &msg);
        } else if (f == VI_TYPE && w == PB_LEN) {
            if (!pb_len(&msg, &type)) return mp__bad(L, "bad value type", &msg);
            has_type = true;
        } else if (!pb_skip(&msg, w)) {
            return mp__bad(L, "bad value info", &msg);
        }
    }
    if (name.end == name.p) return mp_error(MP_ERR_FORMAT, "%s: a graph value has no name", L->m->path);
    mp_status st = mp__check_name(L, name, "a value name");
    if (st) return st;
    int v = mp__value(L, g, (const char *)name.p, (size_t)(name.end - name.p), &st);
    if (v < 0) return st;
    *out = v;
    g->values[v].flags |= decl;
    if (has_type) {
        int dt, rank;
        int64_t *dims;
        st = mp__type(L, g->values[v].name, type, &dt, &rank, &dims);
        if (st) return st;
        mp_value *val = &g->values[v];
        val->decl_dtype = dt;
        val->decl_rank = rank;
        val->decl_dims = dims;
    }
    return MP_OK;
}

/* A graph input that is also an initializer: declared type and tensor
 * must agree. */
static mp_status mp__same_as_init(mp__loader *L, const mp_value *v) {
    const mp_tensor *t = v->init;
    if (v->decl_dtype != MP_DT_UNDEFINED && t->dtype != MP_DT_UNDEFINED && v->decl_dtype != t->dtype)
        return mp_error(MP_ERR_FORMAT,
                        "%s: '%s' is both a graph input of type %s and an initializer of type %s",
                        L->m->path, v->name, mp_dtype_name(v->decl_dtype), mp_dtype_name(t->dtype));
    bool same = v->decl_rank < 0 || v->decl_rank == t->rank;
    for (int i = 0; same && v->decl_rank > 0 && i < v->decl_rank; i++)
        if (v->decl_dims[i] >= 0 && v->decl_dims[i] != t->dims[i]) same = false;
    if (!same)
        return mp_error(MP_ERR_FORMAT,
                        "%s: '%s' is both a graph input and an initializer, with different "
                        "shapes (rank %d and rank %d, or a dim differs)",
                        L->m->path, v->name, v->decl_rank, t->rank);
    return MP_OK;
}

/* The model's graph signature, as torch.export prints it: one line per
 * input, "NAME: KIND target='a.b.w' persistent=False". Records each name
 * and target's kind, and which modules own parameters and buffers. */
static mp_status mp__signature(mp__loader *L, pb text) {
    mp_model *m = L->m;
    m->has_signature = true;
    const uint8_t *p = text.p, *end = text.end;
    while (p < end) {
        const uint8_t *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        const uint8_t *colon = memchr(p, ':', (size_t)(eol - p));
        if (colon && colon > p && colon + 2 < eol && colon[1] == ' ') {
            const uint8_t *k = colon + 2, *ke = k;
            while (ke < eol && *ke != ' ') ke++;
            uint32_t kind = mp__kind_bits(k, (size_t)(ke - k));
            const uint8_t *tg = NULL, *te = NULL;
            static const char tkey[] = "target='";
            for (const uint8_t *q = ke; q + sizeof tkey - 1 < eol; q++)
                if (memcmp(q, tkey, sizeof tkey - 1) == 0) {
                    tg = q + sizeof tkey - 1;
                    te = memchr(tg, '\'', (size_t)(eol - tg));
                    break;
                }
            if (kind) {
                char *name = mp_arena_strndup(&m->arena, (const char *)p, (size_t)(colon - p));
                if (!name || mp_strmap_put(&m->sig_kind, name, (int)kind)) return NOMEM();
                char *target = NULL;
                if (tg && te) {
                    target = mp_arena_strndup(&m->arena, (const char *)tg, (size_t)(te - tg));
                    if (!target || mp_strmap_put(&m->sig_kind, target, (int)kind)) return NOMEM();
                    const char *dot = strrchr(target, '.');
                    char *owner = mp_arena_strndup(&m->arena, target, dot ? (size_t)(dot - target) : 0);
                    if (!owner) return NOMEM();
                    int bits = mp_strmap_get(&m->sig_owner, owner);
                    bits = (bits < 0 ? 0 : bits) |
                           (kind == MP_VAL_DECL_PARAM ? MP_SIG_OWNS_PARAM
                            : kind == MP_VAL_DECL_BUFFER ? MP_SIG_OWNS_BUFFER : 0);
                    if (mp_strmap_put(&m->sig_owner, owner, bits)) return NOMEM();
                }
                if (kind == MP_VAL_DECL_PARAM) {
                    m->sig_params = mp_arena_grow(&m->arena, m->sig_params, sizeof *m->sig_params,
                                                  &m->cap_sig_params, m->n_sig_params + 1);
                    if (!m->sig_params) return NOMEM();
                    m->sig_params[m->n_sig_params].name = name;
                    m->sig_params[m->n_sig_params++].target = target;
                }
            }
        }
        p = eol + 1;
    }
    return MP_OK;
}

/* A metadata_props entry of the model or its main graph: the graph
 * signature is read, the rest is skipped. */
static mp_status mp__metadata_entry(mp__loader *L, pb entry) {
    pb key = {0}, val = {0};
    if (!mp__kv(&entry, &key, &val)) return mp__bad(L, "bad metadata entry", &entry);
    if (mp__pbeq(key, "pkg.torch.export.ExportedProgram.graph_signature") && !L->m->has_signature)
        return mp__signature(L, val);
    return MP_OK;
}

static mp_status mp__graph(mp__loader *L, mp_graph *g, pb msg) {
    mp_model *m = L->m;
    uint32_t f = 0;
    int w = 0;
    pb scan = msg;
    int counts[32] = {0};
    /* One scan counts the fields and notes the large ones (mp__release):
     * the passes below step over a large field they do not want without
     * reading its key, so its pages are not mapped again. */
    struct { const uint8_t *at, *end; uint32_t f; } *big = NULL;
    int n_big = 0, cap_big = 0;
    /* initializers are decoded in this scan, registered as values below:
     * their headers are read once */
    mp_tensor **inits = NULL;
    int n_inits = 0, cap_inits = 0;
    while (pb_more(&scan)) {
        const uint8_t *at = scan.p;
        if (!pb_key(&scan, &f, &w)) return mp__bad(L, "bad graph", &scan);
        if (w == PB_LEN && (f == GRAPH_INIT || f == GRAPH_SPARSE_INIT)) {
            pb s = {0};
            if (!pb_len(&scan, &s)) return mp__bad(L, "bad graph field", &scan);
            inits = mp_arena_grow(&m->arena, inits, sizeof *inits, &cap_inits, n_inits + 1);
            if (!inits) return NOMEM();
            mp_status st = f == GRAPH_INIT ? mp__tensor(L, s, &inits[n_inits])
                                           : mp__sparse_tensor(L, s, &inits[n_inits]);
            if (st) return st;
            n_inits++;
        } else if (!pb_skip(&scan, w)) {
            return mp__bad(L, "bad graph", &scan);
        }
        if (f < 32) counts[f]++;
        if (L->own_map && (size_t)(scan.p - at) >= MP__RELEASE_MIN) {
            big = mp_arena_grow(&m->arena, big, sizeof *big, &cap_big, n_big + 1);
            if (!big) return NOMEM();
            big[n_big].at = at;
            big[n_big].end = scan.p;
            big[n_big++].f = f;
            mp__release(L, at, scan.p);
        }
    }
    mp__release_flush(L);
    int n_in = counts[GRAPH_INPUT], n_out = counts[GRAPH_OUTPUT];
    /* Room for the usual numbers of nodes and values up front, so the
     * tables do not grow (and copy) while the graph decodes. */
    int n_nodes = counts[GRAPH_NODE], n_init = counts[GRAPH_INIT];
    if (n_nodes > 0 && n_nodes <= L->lim.max_nodes) {
        /* most nodes add one value; the tables grow for the rest */
        int64_t want = (int64_t)n_nodes + n_nodes / 8 + n_init + n_in + n_out;
        if (want > L->lim.max_values) want = L->lim.max_values;
        if (mp_strmap_reserve(&g->names, (int)want) != MP_OK) return mp__nomem(L);
        g->values = mp_arena_calloc(&m->arena, (size_t)want, sizeof *g->values);
        g->nodes = mp_arena_calloc(&m->arena, (size_t)n_nodes, sizeof *g->nodes);
        if (!g->values || !g->nodes) return mp__nomem(L);
        g->cap_values = (int)want;
        g->cap_nodes = n_nodes;
    }
    g->inputs = mp_arena_calloc(&m->arena, (size_t)(n_in ? n_in : 1), sizeof(int));
    g->outputs = mp_arena_calloc(&m->arena, (size_t)(n_out ? n_out : 1), sizeof(int));
    if (!g->inputs || !g->outputs) return NOMEM();
    /* initializers first, then declared values, then nodes */
    for (int i = 0; i < n_inits; i++) {
        mp_tensor *t = inits[i];
        mp_status st = MP_OK;
        if (!t->name[0]) return mp_error(MP_ERR_FORMAT, "%s: an initializer has no name", m->path);
        int v = mp__value(L, g, t->name, strlen(t->name), &st);
        if (v < 0) return st;
        if (g->values[v].flags & MP_VAL_INIT)
            return mp_error(MP_ERR_FORMAT, "%s: initializer '%s' is defined twice", m->path,
                            t->name);
        g->values[v].flags |= MP_VAL_INIT | t->decl;
        g->values[v].init = t;
    }
    for (int pass = 0; pass < 3; pass++) {
        scan = msg;
        int next_big = 0;
        while (pb_more(&scan)) {
            const uint8_t *at = scan.p;
            if (next_big < n_big && at == big[next_big].at) {
                uint32_t bf = big[next_big].f;
                bool wanted = pass == 0   ? bf == GRAPH_NAME || bf == GRAPH_METADATA
                              : pass == 1 ? bf == GRAPH_INPUT || bf == GRAPH_OUTPUT ||
                                                bf == GRAPH_VALUE_INFO
                                          : bf == GRAPH_NODE;
                if (!wanted) {
                    scan.p = big[next_big++].end;
                    continue;
                }
                next_big++;
            }
            if (!pb_key(&scan, &f, &w)) return mp__bad(L, "bad key in a graph", &scan);
            if (w != PB_LEN) {
                if (!pb_skip(&scan, w)) return mp__bad(L, "bad graph field", &scan);
                continue;
            }
            pb s = {0};
            if (!pb_len(&scan, &s)) return mp__bad(L, "bad graph field", &scan);
            mp_status st = MP_OK;
            if (pass == 0 && f == GRAPH_NAME) {
                if (!(g->name = mp__str(L, s))) return NOMEM();
            } else if (pass == 0 && f == GRAPH_METADATA && g == m->graph) {
                if ((st = mp__metadata_entry(L, s))) return st;
            } else if (pass == 1 && (f == GRAPH_INPUT || f == GRAPH_OUTPUT || f == GRAPH_VALUE_INFO)) {
                int v = -1;
                if ((st = mp__value_info(L, g, s, &v))) return st;
                if (f == GRAPH_INPUT) {
                    if (g->values[v].flags & MP_VAL_INIT) {
                        /* IR < 4 lists initializers as inputs too (a default
                         * value): both must describe one tensor */
                        if ((st = mp__same_as_init(L, &g->values[v]))) return st;
                        continue;
                    }
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
            mp__release(L, at, s.end); /* a large field: its pages go back */
        }
        mp__release_flush(L);
    }
    return MP_OK;
}

/* ---- post-pass: outer references, order, descriptors, modules ---- */

static int mp__opset(const mp_model *m, const char *domain) {
    for (int i = 0; i < m->n_opsets; i++)
        if (m->opsets[i].domain == domain || strcmp(m->opsets[i].domain, domain) == 0)
            return m->opsets[i].version;
    return -1;
}

/* Each node's opset (of its domain), remembered per (op, domain) string
 * pair: the decoder interns both, so nodes of one type share the pointers
 * and all but the first skip the search (other pointers just miss the
 * cache). The operator's descriptor is the analysis' to find
 * (src/analyze/analyze.c): the loader knows no operators. */
typedef struct mp__desc_cache {
    struct { const char *op, *domain; int opset; } e[64];
} mp__desc_cache;

static void mp__resolve_op(const mp_model *m, mp__desc_cache *c, mp_node *n) {
    unsigned slot = (unsigned)(((uintptr_t)n->op >> 4) ^ ((uintptr_t)n->domain >> 6)) & 63u;
    if (c->e[slot].op != n->op || c->e[slot].domain != n->domain) {
        c->e[slot].op = n->op;
        c->e[slot].domain = n->domain;
        c->e[slot].opset = mp__opset(m, n->domain);
    }
    n->opset = c->e[slot].opset;
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

/* Is the file's node order already topological (every producer before its
 * consumers, subgraphs' outer references included)? The common case: then
 * the order is the file's, with no sorting. */
static int mp__file_order_ok(const mp_graph *g, mp__ints *extra) {
    for (int k = 0; k < g->n_nodes; k++) {
        const mp_node *nd = &g->nodes[k];
        extra->n = 0;
        for (int s = 0; s < nd->n_sub; s++)
            if (!mp__collect_outer(nd->sub[s], g, extra)) return -1;
        for (int i = 0; i < nd->n_in + extra->n; i++) {
            int v = i < nd->n_in ? nd->in[i] : extra->v[i - nd->n_in];
            if (v >= 0 && g->values[v].producer >= k) return 0;
        }
    }
    return 1;
}

static mp_status mp__order(mp_model *m, mp_graph *g) {
    int n = g->n_nodes;
    g->order = mp_arena_calloc(&m->arena, (size_t)(n ? n : 1), sizeof(int));
    if (!g->order) return mp_error(MP_ERR_NOMEM, "out of memory");
    mp__ints scratch = {0};
    int ok = mp__file_order_ok(g, &scratch);
    free(scratch.v);
    if (ok < 0) return mp_error(MP_ERR_NOMEM, "out of memory");
    if (ok) {
        for (int k = 0; k < n; k++) g->order[k] = k;
        return MP_OK;
    }
    int *indeg = calloc((size_t)(n ? n : 1), sizeof(int));
    int *head = malloc(sizeof(int) * (size_t)(n ? n : 1));
    int *queue = malloc(sizeof(int) * (size_t)(n ? n : 1));
    mp__ints eto = {0}, enext = {0}, extra = {0};
    mp_status st = MP_OK;
    if (!indeg || !head || !queue) goto nomem;
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

static mp_status mp__finish_graph(mp_model *m, mp_graph *g, mp__desc_cache *cache) {
    for (int k = 0; k < g->n_nodes; k++) {
        mp_node *n = &g->nodes[k];
        for (int i = 0; i < n->n_in; i++) {
            int v = n->in[i];
            if (v < 0) continue;
            mp_value *val = &g->values[v];
            if (val->producer < 0 && !(val->flags & (MP_VAL_INIT | MP_VAL_INPUT | MP_VAL_OUTER))) {
                mp_status st = mp__resolve_outer(m, g, v);
                if (st == MP_ERR_FORMAT) {
                    if (!g->parent)
                        return mp_error(MP_ERR_FORMAT,
                                        "%s: node '%s' (%s) reads '%s', which no node, input or "
                                        "initializer produces",
                                        m->path, n->name, n->op, val->name);
                    const mp_node *owner = g->parent_node >= 0 && g->parent_node < g->parent->n_nodes
                                               ? &g->parent->nodes[g->parent_node]
                                               : NULL;
                    return mp_error(MP_ERR_FORMAT,
                                    "%s: node '%s' (%s) in a subgraph of node '%s' (%s) reads "
                                    "'%s', which no node, input or initializer produces",
                                    m->path, n->name, n->op, owner ? owner->name : "?",
                                    owner ? owner->op : "?", val->name);
                }
                if (st) return st;
            }
        }
        for (int s = 0; s < n->n_sub; s++) {
            mp_status st = mp__finish_graph(m, n->sub[s], cache);
            if (st) return st;
        }
        mp__resolve_op(m, cache, n);
    }
    for (int i = 0; i < g->n_outputs; i++) {
        mp_value *val = &g->values[g->outputs[i]];
        if (val->producer < 0 && !(val->flags & (MP_VAL_INIT | MP_VAL_INPUT | MP_VAL_OUTER))) {
            mp_status st = mp__resolve_outer(m, g, g->outputs[i]);
            if (st == MP_ERR_FORMAT)
                return mp_error(MP_ERR_FORMAT, "%s: graph output '%s' is not produced by any node",
                                m->path, val->name);
            if (st) return st;
        }
    }
    mp_status st = mp__order(m, g);
    return st ? st : mp_graph_index(g);
}

/* Nodes of one scope share the name up to their last '/': the module of
 * each such prefix is worked out once and remembered in `seen` (keys are
 * views into the node names, which live as long as the model). */
static mp_status mp__assign_modules(mp_model *m, mp_graph *g, int parent_module, mp_strmap *seen) {
    const char *last = NULL;
    size_t last_len = 0;
    int last_module = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        mp_node *n = &g->nodes[k];
        if (n->module < 0) {
            if (g->parent) {
                n->module = parent_module;
            } else {
                const char *slash = strrchr(n->name, '/');
                size_t len = slash ? (size_t)(slash - n->name) : 0;
                if (last && len == last_len && memcmp(last, n->name, len) == 0) {
                    n->module = last_module;
                } else {
                    uint32_t h = mp_strmap_hash(n->name, len);
                    int md = mp_strmap_getn_h(seen, n->name, len, h);
                    if (md < 0) {
                        md = mp__module_from_name(m, n->name);
                        if (mp_strmap_put_h(seen, n->name, len, h, md)) return MP_ERR_NOMEM;
                    }
                    n->module = md;
                    last = n->name;
                    last_len = len;
                    last_module = md;
                }
            }
        }
        for (int s = 0; s < n->n_sub; s++) {
            mp_status st = mp__assign_modules(m, n->sub[s], n->module, seen);
            if (st) return st;
        }
    }
    return MP_OK;
}

mp_status mp_model_finish(mp_model *m) {
    if (m->n_modules == 0 && mp_model_module(m, "", 0) != 0)
        return mp_error(MP_ERR_NOMEM, "out of memory");
    mp__desc_cache cache;
    memset(&cache, 0, sizeof cache);
    mp_status st = mp__finish_graph(m, m->graph, &cache);
    if (st) return st;
    mp_strmap seen = {0};
    st = mp__assign_modules(m, m->graph, 0, &seen);
    mp_strmap_free(&seen);
    return st;
}

/* Is `target` one of PyTorch's batch norms (the functional forms
 * torch.export writes)? */
static bool mp__fx_batch_norm(const char *target) {
    static const char *const bn[] = {
        "_native_batch_norm_legit_functional", "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training", "native_batch_norm", "batch_norm",
        "_batch_norm_with_update", "_batch_norm_no_update", "cudnn_batch_norm"};
    for (size_t i = 0; target && i < MP_ARRAY_LEN(bn); i++)
        if (strcmp(target, bn[i]) == 0) return true;
    return false;
}

/* Move module `id` in its parent's child list to just before `before`
 * (a sibling): a convolution's module comes before the BatchNorm after it,
 * as PyTorch lists them. */
static void mp__module_before(mp_model *m, int id, int before) {
    mp_module *mods = m->modules;
    int p = mods[id].parent;
    if (p < 0 || mods[before].parent != p || id == before) return;
    /* unlink id */
    int prev = -1;
    for (int c = mods[p].first_child; c >= 0 && c != id; c = mods[c].next_sibling) prev = c;
    if (prev < 0) mods[p].first_child = mods[id].next_sibling;
    else mods[prev].next_sibling = mods[id].next_sibling;
    if (mods[p].last_child == id) mods[p].last_child = prev;
    /* link before `before` */
    prev = -1;
    for (int c = mods[p].first_child; c >= 0 && c != before; c = mods[c].next_sibling) prev = c;
    mods[id].next_sibling = before;
    if (prev < 0) mods[p].first_child = id;
    else mods[prev].next_sibling = id;
}

/* The dynamo exporter's optimizer folds a BatchNorm into the convolution
 * (or Gemm) before it and the folded node keeps the BatchNorm's scope: its
 * fx node is the batch norm's, its weight the convolution's parameter. The
 * work and the weight are the convolution's module's (the owner of the
 * weight's target in the graph signature, made when no node named it); the
 * BatchNorm's module keeps its own parameters (analysis). */
static mp_status mp__fx_homes(mp_model *m) {
    if (!m->has_signature) return MP_OK;
    mp_graph *g = m->graph;
    for (int k = 0; k < g->n_nodes; k++) {
        mp_node *n = &g->nodes[k];
        if (!n->fx || !mp__fx_batch_norm(n->fx->target) || n->n_in < 2 || n->in[1] < 0) continue;
        if (strcmp(n->op, "Conv") != 0 && strcmp(n->op, "ConvTranspose") != 0 &&
            strcmp(n->op, "Gemm") != 0 && strcmp(n->op, "MatMul") != 0)
            continue;
        const mp_value *wv = &g->values[n->in[1]];
        if (!(wv->flags & MP_VAL_INIT) || !wv->name) continue;
        if (mp_strmap_get(&m->sig_kind, wv->name) != MP_VAL_DECL_PARAM) continue;
        const char *dot = strrchr(wv->name, '.');
        if (!dot || dot == wv->name) continue;
        size_t ol = (size_t)(dot - wv->name);
        int old = n->module;
        if (old >= 0 && strlen(m->modules[old].path) == ol &&
            memcmp(m->modules[old].path, wv->name, ol) == 0)
            continue;
        bool fresh = mp_strmap_getn(&m->module_paths, wv->name, ol) < 0;
        int md = mp_model_module(m, wv->name, ol);
        if (md < 0) return mp_error(MP_ERR_NOMEM, "out of memory");
        if (fresh && old >= 0) mp__module_before(m, md, old);
        g->nodes[k].module = md;
    }
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
        int counts[32];
        if (!mp__count_fields(L, s, counts)) return mp__bad(L, "bad function", &s);
        int n_in = counts[FN_INPUT], n_out = counts[FN_OUTPUT], n_def = counts[FN_ATTR_PROTO];
        fn->in = mp_arena_calloc(&m->arena, (size_t)n_in + 1, sizeof(pb));
        fn->out = mp_arena_calloc(&m->arena, (size_t)n_out + 1, sizeof(pb));
        fn->defaults = mp_arena_calloc(&m->arena, (size_t)n_def + 1, sizeof(pb));
        if (!fn->in || !fn->out || !fn->defaults) return NOMEM();
        fn->next_same = -1;
        pb body = s;
        while (pb_more(&body)) {
            pb x;
            pb_key(&body, &f, &w);
            if (w != PB_LEN) {
                pb_skip(&body, w);
                continue;
            }
            pb_len(&body, &x);
            mp_status st = MP_OK;
            if (f == FN_NAME || f == FN_DOMAIN || f == FN_INPUT || f == FN_OUTPUT)
                st = mp__check_name(L, x, f == FN_NAME     ? "a function name"
                                          : f == FN_DOMAIN ? "a function domain"
                                                           : "a function parameter");
            if (st) return st;
            if (f == FN_NAME) fn->name = mp__str(L, x);
            else if (f == FN_DOMAIN) fn->domain = mp__str(L, x);
            else if (f == FN_INPUT || f == FN_OUTPUT) {
                /* formal name -> position; the first of equal names wins */
                char *nm = mp__str(L, x);
                mp_strmap *map = f == FN_INPUT ? &fn->in_names : &fn->out_names;
                int pos = f == FN_INPUT ? fn->n_in : fn->n_out;
                if (!nm) return NOMEM();
                if (nm[0] && mp_strmap_get(map, nm) < 0 && mp_strmap_put(map, nm, pos) != MP_OK)
                    return NOMEM();
                if (f == FN_INPUT) fn->in[fn->n_in++] = x;
                else fn->out[fn->n_out++] = x;
            }
            else if (f == FN_ATTR_PROTO) fn->defaults[fn->n_defaults++] = x;
            if (!fn->name || !fn->domain) return NOMEM();
        }
        int idx = L->n_fns - 1;
        fn->tail_same = idx;
        if (fn->name[0]) {
            /* chained in file order: the first of equal (domain, name) wins */
            int first = mp_strmap_get(&L->fn_by_name, fn->name);
            if (first < 0) {
                if (mp_strmap_put(&L->fn_by_name, fn->name, idx) != MP_OK) return NOMEM();
            } else {
                L->fns[L->fns[first].tail_same].next_same = idx;
                L->fns[first].tail_same = idx;
            }
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

/* The top level does not parse as a ModelProto: say what the file is
 * instead where that can be told (a torch.profiler trace, a gzip file, a
 * file cut short), else where the structure breaks. */
static mp_status mp__not_a_model(mp__loader *L, pb msg) {
    const char *path = L->m->path;
    size_t size = (size_t)(msg.end - msg.p);
    const uint8_t *q = msg.p;
    while (q < msg.end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) q++;
    if (size >= 2 && msg.p[0] == 0x1f && msg.p[1] == 0x8b)
        return mp_error(MP_ERR_FORMAT,
                        "%s: a gzip file, not an ONNX model (a gzipped torch.profiler trace is "
                        "analysed with `modelprof trace %s`)",
                        path, path);
    if (q < msg.end && (*q == '{' || *q == '[')) {
        size_t look = MP_MIN(size, (size_t)65536);
        bool trace = false;
        for (const uint8_t *x = msg.p; !trace && x + 11 <= msg.p + look; x++)
            trace = memcmp(x, "traceEvents", 11) == 0 || memcmp(x, "\"ph\"", 4) == 0;
        return mp_error(MP_ERR_FORMAT,
                        trace ? "%s: a torch.profiler (Chrome/Kineto) trace, not an ONNX model: "
                                "analyse it with `modelprof trace %s`"
                              : "%s: a JSON file, not an ONNX model (a torch.profiler trace is "
                                "analysed with `modelprof trace %s`)",
                        path, path);
    }
    /* walk the top-level fields to the one that breaks */
    static const char *const names[26] = {[1] = "ir_version", [2] = "producer_name",
                                          [3] = "producer_version", [4] = "domain",
                                          [5] = "model_version", [6] = "doc_string",
                                          [7] = "graph", [8] = "opset_import",
                                          [14] = "metadata_props", [20] = "training_info",
                                          [25] = "functions"};
    pb r = msg;
    while (pb_more(&r)) {
        const uint8_t *at = r.p;
        uint32_t f = 0;
        int w = 0;
        if (!pb_key(&r, &f, &w)) break;
        pb c = r;
        uint64_t n = 0;
        if (w == PB_LEN && pb_varint(&c, &n) && n > (uint64_t)(c.end - c.p) &&
            n < ((uint64_t)1 << 42))
            return mp_error(MP_ERR_FORMAT,
                            "%s: malformed ONNX protobuf: truncated: the file ends at byte %zu, but "
                            "the model's %s (field "
                            "%u) at byte %zu declares %llu bytes, which would end at byte %llu "
                            "(an interrupted download or copy?)",
                            path, size, f < 26 && names[f] ? names[f] : "field", f,
                            (size_t)(at - msg.p), (unsigned long long)n,
                            (unsigned long long)((size_t)(c.p - msg.p) + n));
        if ((w == PB_I64 || w == PB_I32 || w == PB_VARINT) && !pb_skip(&c, w))
            return mp_error(MP_ERR_FORMAT,
                            "%s: malformed ONNX protobuf: truncated: the file ends at byte %zu "
                            "inside the model's %s "
                            "(field %u)",
                            path, size, f < 26 && names[f] ? names[f] : "field", f);
        if (!pb_skip(&r, w)) {
            pb here = {at, msg.end};
            return mp__bad(L, "not an ONNX model (bad protobuf structure)", &here);
        }
    }
    pb here = {r.p, msg.end};
    return mp__bad(L, "not an ONNX model (bad protobuf structure)", &here);
}

static mp_status mp__model(mp__loader *L, pb msg) {
    mp_model *m = L->m;
    uint32_t f = 0;
    int w = 0;
    pb scan = msg, graph = {0};
    bool has_graph = false;
    int counts[32];
    if (!mp__count_fields(NULL, msg, counts)) return mp__not_a_model(L, msg);
    int n_opsets = counts[MODEL_OPSET];
    if (n_opsets > MP_OPSETS_MAX)
        return mp_error(MP_ERR_LIMIT, "%s: the model imports %d opsets (limit %d)", m->path,
                        n_opsets, MP_OPSETS_MAX);
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
        } else if (f == MODEL_METADATA && w == PB_LEN) {
            if (!pb_len(&scan, &s)) return mp__bad(L, "bad model metadata", &scan);
            mp_status st = mp__metadata_entry(L, s);
            if (st) return st;
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
                    mp_status cs = mp__check_name(L, d, "an opset domain");
                    if (cs) return cs;
                    if (!(o->domain = mp__intern(L, d))) return NOMEM();
                    if (strcmp(o->domain, "ai.onnx") == 0) o->domain = "";
                } else if (f == OPSET_VERSION && w == PB_VARINT) {
                    if (!pb_varint(&s, &v)) return mp__bad(L, "bad opset version", &s);
                    o->version = v > INT32_MAX ? INT32_MAX : (int)v;
                } else if (!pb_skip(&s, w)) {
                    return mp__bad(L, "bad opset_import", &s);
                }
            }
            if (o->version <= 0)
                return mp_error(MP_ERR_FORMAT,
                                "%s: opset_import of domain '%s' has no valid version (%d)",
                                m->path, o->domain[0] ? o->domain : "ai.onnx", o->version);
            for (int i = 0; i < m->n_opsets - 1; i++)
                if (strcmp(m->opsets[i].domain, o->domain) == 0) {
                    if (m->opsets[i].version != o->version)
                        return mp_error(MP_ERR_FORMAT,
                                        "%s: domain '%s' is imported twice, as opset %d and %d",
                                        m->path, o->domain[0] ? o->domain : "ai.onnx",
                                        m->opsets[i].version, o->version);
                    m->n_opsets--; /* the same import again */
                    break;
                }
        } else {
            pb_skip(&scan, w);
        }
    }
    if (!has_graph)
        return mp_error(MP_ERR_FORMAT, "%s: not an ONNX model (no graph found)", m->path);
    if (m->ir_version < 3 || m->ir_version > MP_IR_MAX) {
        if (m->ir_version <= 0)
            return mp_error(MP_ERR_FORMAT, "%s: not an ONNX model (no IR version)", m->path);
        mp_status st = mp_model_warn(m, "IR version %lld is outside the supported 3-%d",
                                     (long long)m->ir_version, MP_IR_MAX);
        if (st) return st;
    }
    int def = mp__opset(m, "");
    if (def < 0)
        return mp_error(MP_ERR_FORMAT, "%s: the model imports no default-domain opset", m->path);
    if (def < 7 || def > MP_OPSET_MAX) {
        mp_status st = mp_model_warn(m, "default-domain opset %d is outside the supported 7-%d",
                                     def, MP_OPSET_MAX);
        if (st) return st;
    }
    mp_status st = mp__functions(L, msg);
    if (st) return st;
    if (L->n_fns) L->top_calls = mp__count_calls(L, graph);
    /* root module first: index 0 */
    if (mp_model_module(m, "", 0) != 0) return NOMEM();
    st = mp__graph(L, m->graph, graph);
    if (st) return st;
    st = mp_model_finish(m);
    if (st) return st;
    st = mp__fx_homes(m);
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

/* Release what the loader holds. Subgraphs the model does not reach (a
 * decoding error half-way, an attribute dropped, a function call's own
 * subgraph its body did not use) have their name maps released here;
 * reachable ones are released with the model (releasing is idempotent). */
static int mp__ptr_cmp(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

static bool mp__collect_graphs(const mp_graph *g, mp_graph ***v, int *n, int *cap) {
    for (int k = 0; k < g->n_nodes; k++)
        for (int s = 0; s < g->nodes[k].n_sub; s++) {
            mp_graph **nv = mp_grow(*v, sizeof **v, cap, *n + 1);
            if (!nv) return false;
            *v = nv;
            (*v)[(*n)++] = g->nodes[k].sub[s];
            if (!mp__collect_graphs(g->nodes[k].sub[s], v, n, cap)) return false;
        }
    return true;
}

static void mp__loader_done(mp__loader *L, bool keep) {
    if (L->n_graphs) {
        mp_graph **reach = NULL;
        int n = 0, cap = 0;
        bool ok = keep && mp__collect_graphs(L->m->graph, &reach, &n, &cap);
        if (ok) qsort(reach, (size_t)n, sizeof *reach, mp__ptr_cmp);
        for (int i = 0; i < L->n_graphs; i++) {
            mp_graph *g = L->graphs[i];
            if (ok && bsearch(&g, reach, (size_t)n, sizeof *reach, mp__ptr_cmp)) continue;
            /* not reached: only its own map (its subgraphs are listed too) */
            mp_strmap_free(&g->names);
        }
        free(reach);
    }
    for (int i = 0; i < L->n_fns; i++) {
        mp_strmap_free(&L->fns[i].in_names);
        mp_strmap_free(&L->fns[i].out_names);
    }
    free(L->fns);
    free(L->ext);
    free(L->graphs);
    mp_strmap_free(&L->ext_files);
    mp_strmap_free(&L->fn_by_name);
    mp_strmap_free(&L->interned);
}

mp_status mp_tensor_decode(mp_model *m, const uint8_t *bytes, size_t len, mp_tensor **out) {
    mp__loader L = {.m = m};
    mp_limits_default(&L.lim);
    mp_status st = mp__tensor(&L, pb_view(bytes, len), out);
    mp__loader_done(&L, true);
    return st;
}

/* Decode m->map (the file or the caller's buffer) into m. Frees m on
 * failure. */
static mp_status mp__load(mp_model *m, const mp_limits *lim, mp_model **out) {
    mp__loader L = {.m = m, .own_map = m->fd >= 0 && m->map_size > 0};
    mp_status s = mp_limits_check(lim, &L.lim);
    if (!s) {
        m->arena.limit = (size_t)L.lim.max_memory;
        if (m->arena.reserved > m->arena.limit) m->arena.limit = m->arena.reserved;
        if (m->map_size == 0)
            s = mp_error(MP_ERR_FORMAT, "%s: the file is empty", m->path);
        else
            s = mp__model(&L, pb_view(m->map, m->map_size));
    }
    mp__loader_done(&L, s == MP_OK);
    if (s) {
        mp_model_free(m);
        return s;
    }
    *out = m;
    return MP_OK;
}

mp_status mp_model_load(const char *path, mp_model **out) {
    return mp_model_load_ex(path, NULL, out);
}

mp_status mp_model_load_ex(const char *path, const mp_limits *lim, mp_model **out) {
    if (!out) return mp_error(MP_ERR_USAGE, "no place for the model");
    *out = NULL;
    mp_error_clear();
    if (!path || !path[0]) return mp_error(MP_ERR_USAGE, "no model path");
    mp_model *m = mp_model_create();
    if (!m) return mp_error(MP_ERR_NOMEM, "out of memory");
    m->path = mp_arena_strdup(&m->arena, path);
    const char *slash = strrchr(path, '/');
    m->dir = slash ? mp_arena_strndup(&m->arena, path, (size_t)(slash - path + (slash == path)))
                   : mp_arena_strdup(&m->arena, ".");
    const char *base = slash ? slash + 1 : path;
    size_t bl = strlen(base);
    if (bl > 5 && strcmp(base + bl - 5, ".onnx") == 0) bl -= 5;
    m->stem = mp_arena_strndup(&m->arena, base, bl);
    if (!m->path || !m->dir) {
        mp_model_free(m);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    /* O_NONBLOCK: a fifo must not hang the open; it is refused below */
    m->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
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
    if ((uint64_t)st.st_size > SIZE_MAX) {
        mp_model_free(m);
        return mp_error(MP_ERR_LIMIT, "%s: the file is too large to map", path);
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
    return mp__load(m, lim, out);
}

mp_status mp_model_load_memory(const void *buf, size_t len, const char *name,
                               const mp_limits *lim, mp_model **out) {
    if (!out) return mp_error(MP_ERR_USAGE, "no place for the model");
    *out = NULL;
    mp_error_clear();
    if (!buf && len) return mp_error(MP_ERR_USAGE, "no model bytes");
    mp_model *m = mp_model_create();
    if (!m) return mp_error(MP_ERR_NOMEM, "out of memory");
    m->path = mp_arena_strdup(&m->arena, name && name[0] ? name : "<memory>");
    if (!m->path) {
        mp_model_free(m);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    m->dir = NULL; /* no folder: external data is never opened */
    m->fd = -1;    /* the buffer is the caller's: never unmapped */
    m->map = buf;
    m->map_size = len;
    return mp__load(m, lim, out);
}
