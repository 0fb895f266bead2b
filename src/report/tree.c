/* The module tree as reports see it: the one walker and the names a
 * module is shown under. */
#include "report/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool tree_valid(const mp_model *m, int i) { return i >= 0 && i < m->n_modules; }

/* Pre-order, iterative (a deep tree cannot overflow the stack). Roots are
 * the modules without a parent, in index order (normally one: ""). Each
 * module is visited at most once even if the links were malformed. */
void mp_tree_walk(const mp_module *mods, int n, int max_depth, mp_tree_visit fn, void *ud) {
    if (!mods || !fn || n <= 0) return;
    long budget = n;
#define TREE_VALID(i) ((i) >= 0 && (i) < n)
    for (int r = 0; r < n; r++) {
        if (mods[r].parent >= 0) continue;
        if (max_depth >= 0 && mods[r].depth > max_depth) continue;
        int cur = r;
        while (budget-- > 0) {
            bool down = fn(mods, cur, ud);
            int child = mods[cur].first_child;
            if (down && TREE_VALID(child) &&
                (max_depth < 0 || mods[child].depth <= max_depth)) {
                cur = child;
                continue;
            }
            /* climb to the nearest ancestor (or self) with a next sibling */
            while (cur != r && !TREE_VALID(mods[cur].next_sibling)) {
                cur = mods[cur].parent;
                if (!TREE_VALID(cur)) return; /* broken links: stop */
            }
            if (cur == r) break;
            cur = mods[cur].next_sibling;
        }
    }
#undef TREE_VALID
}

typedef struct tree_profile_ud {
    const mp_profile *p;
    mp_module_visit fn;
    void *ud;
} tree_profile_ud;

static bool tree_profile_visit(const mp_module *mods, int module, void *ud) {
    (void)mods;
    tree_profile_ud *u = ud;
    return u->fn(u->p, module, u->ud);
}

void mp_module_walk(const mp_profile *p, int max_depth, mp_module_visit fn, void *ud) {
    if (!p || !p->m || !fn || !p->m->modules) return;
    tree_profile_ud u = {p, fn, ud};
    mp_tree_walk(p->m->modules, p->m->n_modules, max_depth, tree_profile_visit, &u);
}

/* ---- the detailed tree, DeepSpeed's layout ---- */

typedef struct tree_print_ud {
    mp_out *o;
    const mp_tree_style *st;
    int max_depth;
    int *open;      /* depths of modules whose "(" is still open */
    int n_open;
} tree_print_ud;

static void tree_indent(mp_out *o, int depth) {
    static const char spaces[] = "                                ";
    for (size_t n = depth > 0 ? 2 * (size_t)depth : 0; n;) {
        size_t k = MP_MIN(n, sizeof spaces - 1);
        mp_out_write(o, spaces, k);
        n -= k;
    }
}

static void tree_close(tree_print_ud *tp, int depth) {
    while (tp->n_open > 0 && tp->open[tp->n_open - 1] >= depth) {
        int d = tp->open[--tp->n_open];
        tree_indent(tp->o, d);
        mp_out_write(tp->o, ")\n", 2);
    }
}

static bool tree_print_visit(const mp_module *mods, int module, void *ud) {
    tree_print_ud *tp = ud;
    const mp_module *mod = &mods[module];
    const mp_tree_style *st = tp->st;
    bool leaf = mod->first_child < 0 || (tp->max_depth >= 0 && mod->depth >= tp->max_depth);
    tree_close(tp, mod->depth);
    tree_indent(tp->o, mod->depth);
    const char *label = st->label(module, st->ud);
    if (mod->parent < 0) {
        mp_out_puts(tp->o, label);
    } else {
        mp_out_putc(tp->o, '(');
        mp_out_puts(tp->o, label);
        mp_out_putc(tp->o, ')');
        const char *cls = st->cls ? st->cls(module, st->ud) : NULL;
        if (cls && cls[0]) {
            mp_out_write(tp->o, ": ", 2);
            mp_out_puts(tp->o, cls);
        }
    }
    mp_out_putc(tp->o, '(');
    if (leaf) {
        st->figs(tp->o, module, st->ud);
        mp_out_write(tp->o, ")\n", 2);
    } else {
        mp_out_putc(tp->o, '\n');
        tree_indent(tp->o, mod->depth + 1);
        st->figs(tp->o, module, st->ud);
        mp_out_putc(tp->o, '\n');
        tp->open[tp->n_open++] = mod->depth;
    }
    return true;
}

mp_status mp_tree_print(mp_out *o, const mp_module *mods, int n, int max_depth,
                        const mp_tree_style *st) {
    if (!mods || n <= 0) return MP_OK;
    int *open = malloc(((size_t)n + 1) * sizeof *open);
    if (!open) return mp_error(MP_ERR_NOMEM, "out of memory while writing the module tree");
    tree_print_ud tp = {o, st, max_depth, open, 0};
    mp_tree_walk(mods, n, max_depth, tree_print_visit, &tp);
    tree_close(&tp, 0);
    free(open);
    return MP_OK;
}

/* The model's name: the root's class where the export names it (the dynamo
 * exporter's, or a binding's), else the graph's name unless an exporter's
 * generic one (torch_jit, main_graph), else the file's stem
 * (resnet18.onnx -> resnet18), as DeepSpeed names the model by its class. */
const char *mp_model_name(const mp_profile *p) {
    const mp_model *m = p ? p->m : NULL;
    if (!m) return "model";
    const mp_module *root = NULL;
    for (int i = 0; m->modules && i < m->n_modules && !root; i++)
        if (m->modules[i].parent < 0) root = &m->modules[i];
    if (root && root->cls && root->cls[0]) return root->cls;
    const char *g = m->graph && m->graph->name ? m->graph->name : "";
    static const char *const generic[] = {"torch_jit", "main_graph", "torch-jit-export", "tf2onnx",
                                          "graph", ""};
    bool gen = false;
    for (size_t i = 0; i < MP_ARRAY_LEN(generic); i++) gen |= strcmp(g, generic[i]) == 0;
    if (!gen) return g;
    if (m->stem && m->stem[0]) return m->stem;
    if (root && root->name && root->name[0] && strcmp(root->name, g) != 0) return root->name;
    return g[0] ? g : "model";
}

const char *mp_module_name(const mp_profile *p, int module) {
    if (!p || !p->m || !tree_valid(p->m, module)) return "";
    const mp_module *mod = &p->m->modules[module];
    if (mod->parent < 0) return mp_model_name(p);
    return mod->name ? mod->name : "";
}

const char *mp_module_display(const mp_profile *p, int module) {
    const mp_model *m = p->m;
    if (!tree_valid(m, module)) return "?";
    const mp_module *mod = &m->modules[module];
    if (mod->cls && mod->cls[0]) return mod->cls;
    if (mod->parent >= 0 && mod->path && mod->path[0]) return mod->path;
    if (mod->parent >= 0 && mod->name && mod->name[0]) return mod->name;
    return mp_model_name(p);
}

const char *mp_module_label(const mp_profile *p, int module) {
    const mp_model *m = p->m;
    if (!tree_valid(m, module)) return "?";
    const mp_module *mod = &m->modules[module];
    if (mod->parent < 0) return mp_module_display(p, module);
    if (mod->name && mod->name[0]) return mod->name;
    if (mod->path && mod->path[0]) return mod->path;
    return "?";
}

typedef struct {
    int max;
} tree_depth_ud;

static bool tree_depth_visit(const mp_profile *p, int module, void *ud) {
    tree_depth_ud *d = ud;
    int depth = p->m->modules[module].depth;
    if (depth > d->max) d->max = depth;
    return true;
}

int mp_module_max_depth(const mp_profile *p) {
    tree_depth_ud d = {-1};
    mp_module_walk(p, -1, tree_depth_visit, &d);
    return d.max;
}

const char *mp_op_display(const char *domain, const char *op, char *buf, size_t n) {
    if (!op) op = "?";
    if (!domain || !domain[0] || strcmp(domain, "ai.onnx") == 0) return op;
    snprintf(buf, n, "%s.%s", domain, op);
    return buf;
}
