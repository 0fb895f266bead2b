/* ONNX ModelProto decoding, zero-copy: names and attributes are copied
 * (they are small), tensor data stays a view into the mapped file.
 * Local functions are inlined at their call sites, keeping their scope as
 * a module.
 *
 * This file: the wire decoding of types, tensors and the model, and the
 * model entry. Graphs and nodes are onnx_graph.c, the exporters' metadata
 * onnx_meta.c, the post-pass (order, module tree) onnx_order.c; what they
 * share is onnx_int.h. */
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
#include "load/onnx_int.h"

/* The newest IR version and default-domain opset whose rules modelprof
 * has (ONNX 1.19: IR 12, opset 24). */
#define MP_IR_MAX 12
#define MP_OPSET_MAX 24

mp_status mp__bad(mp__loader *L, const char *what, const pb *at) {
    size_t off = 0;
    /* an offset into the model (not into a standalone tensor's bytes) */
    if (at && L->m->map && at->p >= L->m->map && at->p <= L->m->map + L->m->map_size)
        off = (size_t)(at->p - L->m->map);
    return mp_error(MP_ERR_FORMAT, "%s: malformed ONNX protobuf: %s (near byte %zu)",
                    L->m->path, what, off);
}

/* Out of memory, or over the memory limit (the arena refuses first). */
mp_status mp__nomem(mp__loader *L) {
    if (L->m->arena.limit_hit)
        return mp_error(MP_ERR_LIMIT,
                        "%s: the model's graph structure needs more than %lld bytes "
                        "(limit memory; raise it with --max-memory BYTES)",
                        L->m->path, (long long)L->lim.max_memory);
    return mp_error(MP_ERR_NOMEM, "%s: out of memory", L->m->path);
}

/* A limit exceeded: the message names it and the flag that raises it. */
mp_status mp__limit(mp__loader *L, const char *what, const char *name, int64_t value) {
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
#define MP_OPSETS_MAX 128     /* opset_import entries (each node looks its domain up) */

/* A name from the file: no NUL byte, at most MP_NAME_MAX bytes. */
mp_status mp__check_name(mp__loader *L, pb s, const char *what) {
    if (s.p && s.end - s.p > MP_NAME_MAX)
        return mp_error(MP_ERR_LIMIT, "%s: %s of %zu bytes is too long (limit %d bytes)",
                        L->m->path, what, (size_t)(s.end - s.p), MP_NAME_MAX);
    if (!mp__name_ok(s))
        return mp_error(MP_ERR_FORMAT, "%s: %s '%.*s' holds a NUL byte", L->m->path, what,
                        (int)(s.end - s.p), (const char *)s.p);
    return MP_OK;
}

/* Find or create a value, counting new ones against the limit. */
int mp__value_h(mp__loader *L, mp_graph *g, const char *name, size_t len, uint32_t h,
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

int mp__value(mp__loader *L, mp_graph *g, const char *name, size_t len, mp_status *st) {
    return mp__value_h(L, g, name, len, mp_strmap_hash(name, len), st);
}

/* A new subgraph, remembered so that one the decoder abandons (an error
 * half-way, an attribute dropped) is still released. */
mp_graph *mp__new_graph(mp__loader *L, mp_graph *parent) {
    mp_graph **ng = mp_grow(L->graphs, sizeof *L->graphs, &L->cap_graphs, L->n_graphs + 1);
    if (!ng) return NULL;
    L->graphs = ng;
    mp_graph *g = mp_graph_new(L->m, parent);
    if (g) L->graphs[L->n_graphs++] = g;
    return g;
}

char *mp__str(mp__loader *L, pb s) {
    return mp_arena_strndup(&L->m->arena, (const char *)s.p, (size_t)(s.end - s.p));
}

/* A string that repeats across nodes (op type, domain, attribute name):
 * one copy, shared. */
const char *mp__intern(mp__loader *L, pb s) {
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

bool mp__pbeq(pb s, const char *z) {
    size_t n = strlen(z);
    /* an absent field is a NULL view: no memcmp on it (even of 0 bytes) */
    return (size_t)(s.end - s.p) == n && (n == 0 || memcmp(s.p, z, n) == 0);
}

/* torch.export's input kinds, as the dynamo exporter writes them. */
static const char mp__kind_key[] = "pkg.torch.export.graph_signature.InputSpec.kind";

uint32_t mp__kind_bits(const uint8_t *p, size_t n) {
    pb s = {p, n ? p + n : p}; /* an absent value is a NULL view: no offset on it */
    if (mp__pbeq(s, "PARAMETER")) return MP_VAL_DECL_PARAM;
    if (mp__pbeq(s, "BUFFER")) return MP_VAL_DECL_BUFFER;
    if (mp__pbeq(s, "CONSTANT_TENSOR")) return MP_VAL_DECL_CONST;
    return 0;
}

/* A metadata_props entry of a tensor or value info: the input kind it
 * declares (MP_VAL_DECL_*), 0 for any other entry; false when malformed. */
bool mp__decl_kind(pb entry, uint32_t *decl) {
    pb key = {0}, val = {0};
    if (!mp__kv(&entry, &key, &val)) return false;
    if (mp__pbeq(key, mp__kind_key)) *decl |= mp__kind_bits(val.p, (size_t)(val.end - val.p));
    return true;
}

/* ---- types and dims ---- */

/* Decode a TypeProto into dtype/rank/dims (dims with symbols). Only the
 * tensor types are entered; sequence, map and optional types are skipped
 * whole (no recursion, whatever their nesting). `what` names the value. */
mp_status mp__type(mp__loader *L, const char *what, pb t, int *dtype, int *rank,
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

mp_status mp__tensor(mp__loader *L, pb msg, mp_tensor **out) {
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

mp_status mp__sparse_tensor(mp__loader *L, pb msg, mp_tensor **out) {
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
    if (st) return st == MP_ERR_NOMEM ? NOMEM() : st;   /* the limit, named */
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
