/* The ONNX loader (onnx_int.h): graphs, nodes and attributes decoded
 * into the IR, and local functions inlined at their calls with their scope
 * remembered. */
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

/* ---- graphs, nodes, attributes ---- */

static mp_status mp__emit_node(mp__loader *L, mp_graph *g, pb msg, const mp__call *call);

const mp__fn *mp__find_fn(mp__loader *L, pb domain, pb op) {
    if (!L->n_fns || op.end == op.p) return NULL;
    for (int i = mp_strmap_getn(&L->fn_by_name, (const char *)op.p, (size_t)(op.end - op.p));
         i >= 0; i = L->fns[i].next_same)
        if (mp__pbeq(domain, L->fns[i].domain)) return &L->fns[i];
    return NULL;
}

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

bool mp__count_fields(mp__loader *L, pb msg, int counts[32]) {
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
bool mp__kv(pb *msg, pb *key, pb *val) {
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
mp_status mp__signature(mp__loader *L, pb text) {
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

mp_status mp__graph(mp__loader *L, mp_graph *g, pb msg) {
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
                if (f == GRAPH_VALUE_INFO) g->values[v].flags |= MP_VAL_VALUE_INFO;
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