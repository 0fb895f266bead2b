/* The static profile (analyze_int.h): the by-module-and-operator table
 * (docs/COUNTING.md, "By module and operator"). */
#include "analyze/analyze.h"
#include "analyze/same.h"
#include <stdlib.h>
#include "analyze/analyze_int.h"

/* ---- by module and operator (docs/COUNTING.md, "By module and operator") ----
 * Each module has one row per op type among its nodes and its submodules'.
 * Made after the walk: the op types each module holds (its own nodes',
 * then its children's, bottom up: a child's index is above its parent's),
 * a module's rows by op index for the lookups; each node's cost into its
 * own module's row, then each module's rows into its parent's. Parameters
 * are added by mp__param; the rows take the report's order once the op
 * types have theirs (mp__modops_order). */

/* The row of op type `op` in module md, -1 when none (rows by op index). */
int mp__modop_find(const mp_profile *p, int md, int op) {
    int lo = p->modop_at[md], end = p->modop_at[md + 1], hi = end;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (p->modops[mid].op < op) lo = mid + 1;
        else hi = mid;
    }
    return lo < end && p->modops[lo].op == op ? lo : -1;
}

static int mp__int_cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

mp_status mp__modops(mp__walk *w) {
    mp_profile *p = w->p;
    const mp_model *m = p->m;
    const mp_graph *g = w->g;
    int nm = m->n_modules, nn = g->n_nodes, no = p->n_ops;
    if (nm <= 0) return MP_OK;
    /* nodes by module (counting sort), children as sibling lists, and the
     * op types of each module (lst[at[md] .. at[md] + n[md]), made bottom up) */
    int *first = calloc((size_t)nm + 1, sizeof *first);
    int *bymod = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    int *child = malloc(sizeof(int) * (size_t)nm * 4);
    int *stamp = malloc(sizeof(int) * (size_t)(no ? no : 1));
    int *lst = NULL, n_lst = 0, cap_lst = 0;
    mp_status st = MP_OK;
    if (!first || !bymod || !child || !stamp) {
        st = mp_error(MP_ERR_NOMEM, "out of memory");
        goto done;
    }
    int *sib = child + nm, *at = child + 2 * (size_t)nm, *cnt = child + 3 * (size_t)nm;
    memset(cnt, 0, sizeof(int) * (size_t)nm);
    for (int k = 0; k < nn; k++) {
        int md = g->nodes[k].module;
        if (md >= 0 && md < nm) first[md + 1]++;
    }
    for (int i = 0; i < nm; i++) first[i + 1] += first[i];
    for (int k = 0; k < nn; k++) { /* cnt as the fill pointer */
        int md = g->nodes[k].module;
        if (md >= 0 && md < nm) bymod[first[md] + cnt[md]++] = k;
    }
    for (int i = 0; i < nm; i++) child[i] = sib[i] = -1;
    for (int i = nm - 1; i > 0; i--) {
        int par = m->modules[i].parent;
        if (par < 0 || par >= i) continue;
        sib[i] = child[par];
        child[par] = i;
    }
    for (int o = 0; o < no; o++) stamp[o] = -1;
    for (int md = nm - 1; md >= 0; md--) {
        at[md] = n_lst;
        int before = n_lst;
        for (int j = first[md]; j < first[md + 1]; j++) {
            int op = w->node_op[bymod[j]];
            if (op < 0 || op >= no || stamp[op] == md) continue;
            stamp[op] = md;
            int *nl = mp_grow(lst, sizeof *lst, &cap_lst, n_lst + 1);
            if (!nl) goto nomem;
            lst = nl;
            lst[n_lst++] = op;
        }
        for (int c = child[md]; c >= 0; c = sib[c]) {
            for (int j = at[c]; j < at[c] + cnt[c]; j++) {
                int op = lst[j];
                if (stamp[op] == md) continue;
                stamp[op] = md;
                int *nl = mp_grow(lst, sizeof *lst, &cap_lst, n_lst + 1);
                if (!nl) goto nomem;
                lst = nl;
                lst[n_lst++] = op;
            }
        }
        cnt[md] = n_lst - before;
        if (cnt[md] > 1) qsort(lst + before, (size_t)cnt[md], sizeof *lst, mp__int_cmp);
    }
    p->modop_at = malloc(sizeof(int) * ((size_t)nm + 1));
    p->modops = calloc((size_t)(n_lst ? n_lst : 1), sizeof *p->modops);
    p->modop_parent = malloc(sizeof(int) * (size_t)(n_lst ? n_lst : 1));
    p->node_modop = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    if (!p->modop_at || !p->modops || !p->modop_parent || !p->node_modop) goto nomem;
    p->n_modops = n_lst;
    int r = 0;
    for (int md = 0; md < nm; md++) {
        p->modop_at[md] = r;
        for (int j = at[md]; j < at[md] + cnt[md]; j++, r++) {
            p->modops[r].op = lst[j];
            p->modops[r].fig.latency_s = p->modops[r].fig.latency_min_s = -1;
            p->modop_parent[r] = -1;
        }
    }
    p->modop_at[nm] = r;
    /* each node into its own module's row, each module's rows into its parent's */
    for (int k = 0; k < nn; k++) {
        const mp_node *n = &g->nodes[k];
        int row = n->module >= 0 && n->module < nm ? mp__modop_find(p, n->module, w->node_op[k]) : -1;
        p->node_modop[k] = row;
        if (row >= 0) mp__fig_add_cost(&p->modops[row].fig, &n->cost, &w->ovf);
    }
    for (int md = nm - 1; md > 0; md--) {
        int par = m->modules[md].parent;
        if (par < 0 || par >= md) continue;
        for (int j = p->modop_at[md]; j < p->modop_at[md + 1]; j++) {
            int pr = mp__modop_find(p, par, p->modops[j].op);
            p->modop_parent[j] = pr;
            if (pr >= 0) mp__fig_add_fig(&p->modops[pr].fig, &p->modops[j].fig, &w->ovf);
        }
    }
    goto done;
nomem:
    st = mp_error(MP_ERR_NOMEM, "out of memory");
done:
    free(first);
    free(bymod);
    free(child);
    free(stamp);
    free(lst);
    return st;
}

/* Row order within a module: FLOPs, then MACs (both decreasing), then the
 * op types' order; the unused parameters last. */
static int mp__modop_cmp(const void *a, const void *b) {
    const mp_modop *x = a, *y = b;
    if ((x->op < 0) != (y->op < 0)) return x->op < 0 ? 1 : -1;
    if (x->fig.flops != y->fig.flops) return x->fig.flops < y->fig.flops ? 1 : -1;
    if (x->fig.macs != y->fig.macs) return x->fig.macs < y->fig.macs ? 1 : -1;
    return x->op < y->op ? -1 : x->op > y->op;
}

/* The op types were sorted (inv: old index -> new): the rows name the new
 * indices and take the report's order; the root gains a row for the
 * parameters no node reads (the root counts every parameter), so that its
 * rows too add up to its figures. */
mp_status mp__modops_order(mp_profile *p, const int *inv) {
    const mp_model *m = p->m;
    int nm = m->n_modules, n = p->n_modops, nn = m->graph->n_nodes;
    if (!p->modops || nm <= 0) return MP_OK;
    /* per module, the parameters its rows hold: the root's others are the
     * ones no node reads, a module's others ones the exporter folded into
     * a node of another module (a BatchNorm into the convolution before
     * it: mp__fx_count) */
    uint64_t *used = calloc((size_t)nm * 2, sizeof *used);
    if (!used) return mp_error(MP_ERR_NOMEM, "out of memory");
    uint64_t *used_bytes = used + nm;
    bool ovf = false;
    int n_extra = 0;
    for (int md = 0; md < nm; md++) {
        for (int j = p->modop_at[md]; j < p->modop_at[md + 1]; j++) {
            used[md] = mp_uadd(used[md], p->modops[j].fig.params, &ovf);
            used_bytes[md] = mp_uadd(used_bytes[md], p->modops[j].fig.param_bytes, &ovf);
        }
        n_extra += p->mods[md].params > used[md];
    }
    mp_modop *rows = calloc((size_t)n + (size_t)n_extra + 2, sizeof *rows);
    int *perm = malloc(sizeof(int) * ((size_t)n + 1));
    int *idx = malloc(sizeof(int) * ((size_t)n + (size_t)n_extra + 1));
    if (!rows || !perm || !idx) {
        free(rows);
        free(perm);
        free(idx);
        free(used);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int j = 0; j < n; j++)
        if (p->modops[j].op >= 0) p->modops[j].op = inv[p->modops[j].op];
    int r = 0;
    for (int md = 0; md < nm; md++) {
        int a = p->modop_at[md], b = p->modop_at[md + 1];
        int start = r;
        for (int j = a; j < b; j++) rows[r++] = p->modops[j];
        /* the copies sorted (insertion: a module has few rows), each
         * remembering where it came from */
        for (int j = 0; j < b - a; j++) idx[start + j] = a + j;
        for (int i = start + 1; i < r; i++)
            for (int k = i; k > start && mp__modop_cmp(&rows[k - 1], &rows[k]) > 0; k--) {
                mp_modop t = rows[k];
                rows[k] = rows[k - 1];
                rows[k - 1] = t;
                int ti = idx[k];
                idx[k] = idx[k - 1];
                idx[k - 1] = ti;
            }
        if (p->mods[md].params > used[md] && !ovf) {
            rows[r].op = md == 0 ? MP_MODOP_UNUSED : MP_MODOP_FOLDED;
            rows[r].fig.params = p->mods[md].params - used[md];
            rows[r].fig.param_bytes =
                p->mods[md].param_bytes > used_bytes[md] ? p->mods[md].param_bytes - used_bytes[md] : 0;
            rows[r].fig.latency_s = rows[r].fig.latency_min_s = -1;
            idx[r] = -1;
            r++;
        }
        p->modop_at[md] = start;
    }
    p->modop_at[nm] = r;
    for (int j = 0; j < r; j++)
        if (idx[j] >= 0) perm[idx[j]] = j;
    free(used);
    int *par = malloc(sizeof(int) * ((size_t)r + 1));
    if (!par) {
        free(rows);
        free(perm);
        free(idx);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int j = 0; j < r; j++) {
        int old = idx[j];
        par[j] = old >= 0 && p->modop_parent[old] >= 0 ? perm[p->modop_parent[old]] : -1;
    }
    for (int k = 0; k < nn; k++)
        if (p->node_modop[k] >= 0) p->node_modop[k] = perm[p->node_modop[k]];
    free(p->modops);
    free(p->modop_parent);
    free(perm);
    free(idx);
    p->modops = rows;
    p->modop_parent = par;
    p->n_modops = r;
    return MP_OK;
}