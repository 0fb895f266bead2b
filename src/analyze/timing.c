/* The measured figures of the profile's sets from timed units: a measured
 * run's kernels (src/run/measure.c) or ONNX Runtime's node events
 * (src/import/ort.c). A unit that ran several nodes (a fused group) gives
 * each node a share of its time by FLOPs, so that a row of nodes of one
 * kind (an op type, a module, a module's op type) reads their FLOPs against
 * their time, never against the time of another node that ran alone. */
#include "analyze/profile.h"

#include <stdlib.h>

int mp_profile_node_op(const mp_profile *p, int k) {
    if (p->node_modop && p->node_modop[k] >= 0) return p->modops[p->node_modop[k]].op;
    const mp_node *n = &p->m->graph->nodes[k];
    for (int i = 0; i < p->n_ops; i++)
        if (mp_streq(p->ops[i].op, n->op) && mp_streq(p->ops[i].domain, n->domain)) return i;
    return -1;
}

/* latency_s and latency_min_s of one row from its per-pass sums (NULL:
 * not timed, -1). */
static void mp__row_times(mp_fig *f, double *v, int n, bool mean) {
    if (!v) {
        f->latency_s = f->latency_min_s = -1;
        return;
    }
    f->latency_min_s = mp_min(v, n);
    f->latency_s = mean ? mp_mean(v, n) : mp_median(v, n);
}

mp_status mp_profile_set_times(mp_profile *p, const mp_timing *tm) {
    const mp_model *m = p->m;
    const mp_graph *g = m->graph;
    int nn = g->n_nodes, nm = m->n_modules, no = p->n_ops, nr = p->modops ? p->n_modops : 0;
    int nu = tm->n_units, np = tm->n_passes;
    if (np < 1) return mp_error(MP_ERR_USAGE, "no timed pass");
    size_t rows = (size_t)nm + (size_t)no + (size_t)nr;
    double *acc = calloc(rows * (size_t)np + 1, sizeof *acc);
    double *uf = calloc((size_t)nu + 1, sizeof *uf);
    int *un = calloc((size_t)nu + 1, sizeof *un);
    if (!acc || !uf || !un) {
        free(acc);
        free(uf);
        free(un);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    double *am = acc, *ao = acc + (size_t)nm * (size_t)np, *ar = ao + (size_t)no * (size_t)np;
    for (int k = 0; k < nn && tm->t; k++) {
        int u = tm->node_unit[k];
        if (u < 0 || u >= nu) continue;
        uf[u] += (double)g->nodes[k].cost.flops;
        un[u]++;
    }
    for (int k = 0; k < nn && tm->t; k++) {
        int u = tm->node_unit[k];
        if (u < 0 || u >= nu) continue;
        double w = uf[u] > 0 ? (double)g->nodes[k].cost.flops / uf[u] : 1.0 / un[u];
        int md = g->nodes[k].module >= 0 && g->nodes[k].module < nm ? g->nodes[k].module : 0;
        int op = mp_profile_node_op(p, k), row = nr && p->node_modop ? p->node_modop[k] : -1;
        for (int i = 0; i < np; i++) {
            double x = tm->t[(size_t)i * (size_t)nu + (size_t)u] * w;
            if (nm) am[(size_t)md * (size_t)np + (size_t)i] += x;
            if (op >= 0) ao[(size_t)op * (size_t)np + (size_t)i] += x;
            if (row >= 0) ar[(size_t)row * (size_t)np + (size_t)i] += x;
        }
    }
    /* a module's time is its nodes' and its submodules': a child's index
     * (and its rows') is above its parent's */
    for (int md = nm - 1; md > 0 && tm->t; md--) {
        int par = m->modules[md].parent;
        if (par < 0) continue;
        for (int i = 0; i < np; i++) am[(size_t)par * (size_t)np + (size_t)i] += am[(size_t)md * (size_t)np + (size_t)i];
    }
    for (int r = nr - 1; r >= 0 && tm->t; r--) {
        int par = p->modop_parent[r];
        if (par < 0) continue;
        for (int i = 0; i < np; i++) ar[(size_t)par * (size_t)np + (size_t)i] += ar[(size_t)r * (size_t)np + (size_t)i];
    }
    for (int md = 0; md < nm; md++) mp__row_times(&p->mods[md], tm->t ? am + (size_t)md * (size_t)np : NULL, np, tm->mean);
    for (int o = 0; o < no; o++) mp__row_times(&p->ops[o].fig, tm->t ? ao + (size_t)o * (size_t)np : NULL, np, tm->mean);
    for (int r = 0; r < nr; r++) mp__row_times(&p->modops[r].fig, tm->t ? ar + (size_t)r * (size_t)np : NULL, np, tm->mean);
    /* what ran inside another node's kernel */
    for (int md = 0; md < nm; md++) p->mods[md].fused = 0;
    for (int o = 0; o < no; o++) p->ops[o].fig.fused = 0;
    for (int r = 0; r < nr; r++) p->modops[r].fig.fused = 0;
    p->total.fused = 0;
    for (int k = 0; p->node_state && k < nn; k++) {
        if (p->node_state[k] != MP_NODE_FUSED) continue;
        p->total.fused++;
        int op = mp_profile_node_op(p, k);
        if (op >= 0) p->ops[op].fig.fused++;
        for (int md = g->nodes[k].module; md >= 0 && md < nm; md = m->modules[md].parent) p->mods[md].fused++;
        for (int r = nr && p->node_modop ? p->node_modop[k] : -1; r >= 0; r = p->modop_parent[r]) p->modops[r].fig.fused++;
    }
    free(acc);
    free(uf);
    free(un);
    return MP_OK;
}

int mp_profile_groups_above(const mp_profile *p, double peak) {
    int n = 0;
    for (int i = 0; i < p->n_groups; i++) {
        const mp_groupstat *g = &p->groups[i];
        if (g->latency_s > 0 && g->flops > 0 && !g->flops_unknown && (double)g->flops / g->latency_s > peak) n++;
    }
    return n;
}

int64_t mp_profile_batch(const mp_profile *p) {
    const mp_graph *g = p->m->graph;
    for (int i = 0; i < g->n_inputs; i++) {
        const mp_value *v = &g->values[g->inputs[i]];
        if (v->rank >= 1 && v->dims[0] > 0) return v->dims[0];
    }
    return 1;
}
