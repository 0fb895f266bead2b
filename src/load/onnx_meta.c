/* The ONNX loader (onnx_int.h): what exporters write beside the graph:
 * metadata_props (the dynamo exporter's name scopes and class hierarchy),
 * the FX graph text and the signature, and the module homes they give. */
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
int mp__module_from_metadata(mp_model *m, pb scopes, pb classes) {
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
 * Kept (*out) when an argument names a parameter placeholder ("%p_"), or
 * its operator is aten.gelu (F.gelu, whose exporter decomposes the tanh
 * form into the operators a Python-written GELU has: the pattern layer
 * tells one ATen operator from many by it); malformed or unusual text
 * keeps nothing (the metadata is a help, never required). */
mp_status mp__fx_parse(mp__loader *L, pb text, const mp_fx **out) {
    *out = NULL;
    const char *s = (const char *)text.p, *end = (const char *)text.end;
    size_t len = (size_t)(end - s);
    if (!s || len < 8) return MP_OK;
    bool gelu = memmem(s, len, "target=torch.ops.aten.gelu.", 27) != NULL;
    if (!memmem(s, len, "%p_", 3) && !gelu) return MP_OK;
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
    if (!n && !gelu) return MP_OK;
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
int mp__attr_want(mp__loader *L, const char *name) {
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

/* A metadata_props entry of the model or its main graph: the graph
 * signature is read, the rest is skipped. */
mp_status mp__metadata_entry(mp__loader *L, pb entry) {
    pb key = {0}, val = {0};
    if (!mp__kv(&entry, &key, &val)) return mp__bad(L, "bad metadata entry", &entry);
    if (mp__pbeq(key, "pkg.torch.export.ExportedProgram.graph_signature") && !L->m->has_signature)
        return mp__signature(L, val);
    return MP_OK;
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
mp_status mp__fx_homes(mp_model *m) {
    if (!m->has_signature) return MP_OK;
    mp_graph *g = m->graph;
    for (int k = 0; k < g->n_nodes; k++) {
        mp_node *n = &g->nodes[k];
        if (!mp_node_fx_folded_bn(n)) continue;
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