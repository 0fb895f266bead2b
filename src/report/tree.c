/* The module tree as reports see it: the one walker and the names a
 * module is shown under. */
#include "report/report.h"

#include <stdio.h>

static bool tree_valid(const mp_model *m, int i) { return i >= 0 && i < m->n_modules; }

/* Pre-order, iterative (a deep tree cannot overflow the stack). Roots are
 * the modules without a parent, in index order (normally one: ""). Each
 * module is visited at most once even if the links were malformed. */
void mp_module_walk(const mp_profile *p, int max_depth, mp_module_visit fn, void *ud) {
    if (!p || !p->m || !fn || !p->m->modules) return;
    const mp_model *m = p->m;
    const mp_module *mods = m->modules;
    long budget = m->n_modules;
    for (int r = 0; r < m->n_modules; r++) {
        if (mods[r].parent >= 0) continue;
        if (max_depth >= 0 && mods[r].depth > max_depth) continue;
        int cur = r;
        while (budget-- > 0) {
            bool down = fn(p, cur, ud);
            int child = mods[cur].first_child;
            if (down && tree_valid(m, child) &&
                (max_depth < 0 || mods[child].depth <= max_depth)) {
                cur = child;
                continue;
            }
            /* climb to the nearest ancestor (or self) with a next sibling */
            while (cur != r && !tree_valid(m, mods[cur].next_sibling)) {
                cur = mods[cur].parent;
                if (!tree_valid(m, cur)) return; /* broken links: stop */
            }
            if (cur == r) break;
            cur = mods[cur].next_sibling;
        }
    }
}

const char *mp_module_display(const mp_profile *p, int module) {
    const mp_model *m = p->m;
    if (!tree_valid(m, module)) return "?";
    const mp_module *mod = &m->modules[module];
    if (mod->cls && mod->cls[0]) return mod->cls;
    if (mod->parent >= 0 && mod->path && mod->path[0]) return mod->path;
    if (mod->name && mod->name[0]) return mod->name;
    if (m->graph && m->graph->name && m->graph->name[0]) return m->graph->name;
    return "model";
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
