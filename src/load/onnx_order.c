/* The ONNX loader (onnx_int.h): the post-pass over a decoded graph:
 * outer references of subgraphs, a topological order (the file's own when
 * it is one), operator descriptors, and the module tree from node names. */
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

/* ---- post-pass: outer references, order, descriptors, modules ---- */

int mp__opset(const mp_model *m, const char *domain) {
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

/* Scope path of a TorchScript-style node name into path (cap bytes):
 * "/layer1/layer1.0/conv1/Conv" gives "layer1.0.conv1" (a segment that
 * repeats its parent's name as a prefix is relative to it). Returns its
 * length; 0 for the root. */
static size_t mp__scope_path(const char *name, char *path, size_t cap) {
    const char *last = strrchr(name, '/');
    if (!last || last == name) return 0;
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
            if (pl + ll + 2 >= cap) break;
            if (pl) path[pl++] = '.';
            memcpy(path + pl, local, ll);
            pl += ll;
            prev = p;
            prev_len = sl;
        }
        p = e + 1;
    }
    return pl;
}

int mp__module_from_name(mp_model *m, const char *name) {
    char path[1024];
    size_t pl = mp__scope_path(name, path, sizeof path);
    int id = mp_model_module(m, path, pl);
    return id < 0 ? 0 : id;
}

/* The module whose weights a scope's nodes read: "heads.cls" of
 * "heads.cls.weight" and "heads.cls.bias" (one prefix for all of them);
 * -1 none (or several). A TorchScript export names a module by its last
 * name alone where its parents were never called (ModuleDict items,
 * self.enc.fc(x)), made unique by a count ("/cls", "/cls_1"): the weights'
 * names keep the qualified path. */
typedef struct mp__scope_w {
    const char *q;   /* the prefix (a view into a weight's name), NULL: none */
    size_t ql;
    bool several;
} mp__scope_w;

static bool mp__same_atom(const char *path, size_t pl, const char *q, size_t ql) {
    /* path's last segment, less an exporter's "_<count>", is q's last atom */
    size_t a = pl;
    while (a > 0 && path[a - 1] != '.') a--;
    size_t b = ql;
    while (b > 0 && q[b - 1] != '.') b--;
    size_t sl = pl - a, qa = ql - b;
    if (sl == qa && memcmp(path + a, q + b, qa) == 0) return true;
    size_t d = sl;
    while (d > 0 && path[a + d - 1] >= '0' && path[a + d - 1] <= '9') d--;
    return d < sl && d > 1 && path[a + d - 1] == '_' && d - 1 == qa && memcmp(path + a, q + b, qa) == 0;
}

static mp_status mp__scope_weights(const mp_graph *g, mp_strmap *map, mp__scope_w **out, int *n_out) {
    mp__scope_w *w = NULL;
    int n = 0, cap = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        const mp_node *nd = &g->nodes[k];
        const char *slash = nd->module < 0 && nd->name ? strrchr(nd->name, '/') : NULL;
        if (!slash || slash == nd->name) continue;
        size_t len = (size_t)(slash - nd->name);
        uint32_t h = mp_strmap_hash(nd->name, len);
        int at = mp_strmap_getn_h(map, nd->name, len, h);
        for (int i = 0; i < nd->n_in; i++) {
            const mp_value *v = nd->in[i] >= 0 ? &g->values[nd->in[i]] : NULL;
            if (!v || !(v->flags & MP_VAL_INIT) || !v->name || strstr(v->name, "::")) continue;
            const char *dot = strrchr(v->name, '.');
            if (!dot || dot == v->name) continue;
            size_t ql = (size_t)(dot - v->name);
            if (at < 0) {
                mp__scope_w *nw = mp_grow(w, sizeof *w, &cap, n + 1);
                if (!nw || mp_strmap_put_h(map, nd->name, len, h, n)) {
                    free(nw ? nw : w);
                    return MP_ERR_NOMEM;
                }
                w = nw;
                w[n] = (mp__scope_w){v->name, ql, false};
                at = n++;
            } else if (w[at].ql != ql || memcmp(w[at].q, v->name, ql) != 0) {
                w[at].several = true;
            }
        }
    }
    *out = w;
    *n_out = n;
    return MP_OK;
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
static mp_status mp__assign_modules(mp_model *m, mp_graph *g, int parent_module, mp_strmap *seen,
                                    const mp_strmap *wmap, const mp__scope_w *ws) {
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
                        char path[1024];
                        size_t pl = mp__scope_path(n->name, path, sizeof path);
                        int wi = wmap ? mp_strmap_getn_h(wmap, n->name, len, h) : -1;
                        const mp__scope_w *sw = wi >= 0 ? &ws[wi] : NULL;
                        if (sw && !sw->several && sw->ql < sizeof path && pl &&
                            !(sw->ql == pl && memcmp(sw->q, path, pl) == 0) &&
                            mp__same_atom(path, pl, sw->q, sw->ql)) {
                            memcpy(path, sw->q, sw->ql);
                            pl = sw->ql;
                        }
                        md = mp_model_module(m, path, pl);
                        if (md < 0) return MP_ERR_NOMEM;
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
            mp_status st = mp__assign_modules(m, n->sub[s], n->module, seen, NULL, NULL);
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
    mp_strmap seen = {0}, wmap = {0};
    mp__scope_w *ws = NULL;
    int nws = 0;
    st = mp__scope_weights(m->graph, &wmap, &ws, &nws);
    if (!st) st = mp__assign_modules(m, m->graph, 0, &seen, &wmap, ws);
    mp_strmap_free(&seen);
    mp_strmap_free(&wmap);
    free(ws);
    return st;
}
