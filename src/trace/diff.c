/* Trace diff (diff.h): operators, kernels and modules of two analysed runs
 * matched by name, their time per step on average, and the steps' means.
 *
 * As in Holistic Trace Analysis' TraceDiff (compare_traces: the count and
 * the time of each operator and kernel in a control and a test trace, and
 * their differences), but per step, so that runs profiled over different
 * numbers of steps compare, and with the module tree beside. What is
 * compared for an operator is its self time, so that a change shows on the
 * operator that changed and not on every operator around it: its self
 * device time when either run has device events (key_averages' self CUDA
 * column, what an operator's own kernels took), its self CPU time when
 * neither has (a CPU-only trace). */
#include "trace/diff.h"

#include <math.h>
#include <stdlib.h>

typedef struct rows {
    mp_tdiff_row *r;
    int n, cap;
    mp_strmap index;    /* name -> row */
} rows;

static mp_tdiff_row *row_of(rows *t, const char *name) {
    int i = mp_strmap_get(&t->index, name);
    if (i >= 0) return &t->r[i];
    mp_tdiff_row *nr = mp_grow(t->r, sizeof *t->r, &t->cap, t->n + 1);
    if (!nr) return NULL;
    t->r = nr;
    if (mp_strmap_put(&t->index, name, t->n) != MP_OK) return NULL;
    mp_tdiff_row *r = &t->r[t->n++];
    memset(r, 0, sizeof *r);
    r->name = name;
    return r;
}

static double per(int64_t ns, int steps) { return (double)ns * 1e-9 / steps; }

/* Largest |B - A| first; names break ties, so the order is stable. */
static int row_cmp(const void *x, const void *y) {
    const mp_tdiff_row *a = x, *b = y;
    double da = fabs(a->b - a->a), db = fabs(b->b - b->a);
    if (da != db) return da > db ? -1 : 1;
    return strcmp(a->name, b->name);
}

static mp_status finish(rows *t, mp_tdiff_row **out, int *n) {
    mp_strmap_free(&t->index);
    if (t->n > 1) qsort(t->r, (size_t)t->n, sizeof *t->r, row_cmp);
    *out = t->r;
    *n = t->n;
    return MP_OK;
}

static mp_status nomem(rows *t) {
    mp_strmap_free(&t->index);
    free(t->r);
    return mp_error(MP_ERR_NOMEM, "trace diff: out of memory");
}

/* One run's figures for a name (side 0: A, 1: B). */
static bool put(rows *t, const char *name, const char *label, int side, double v, double calls,
                double second) {
    mp_tdiff_row *r = row_of(t, name);
    if (!r) return false;
    if (!r->label) r->label = label;
    if (side) r->b = v, r->b_calls = calls, r->b2 = second, r->in_b = true;
    else r->a = v, r->a_calls = calls, r->a2 = second, r->in_a = true;
    return true;
}

static mp_status diff_ops(mp_trace_diff *d) {
    rows t = {0};
    for (int side = 0; side < 2; side++) {
        const mp_trace *tr = side ? d->b : d->a;
        int steps = side ? d->b_steps : d->a_steps;
        for (int i = 0; i < tr->n_ops; i++) {
            const mp_top *o = &tr->ops[i];
            if (o->device) continue;   /* device rows are the kernels' table */
            if (!put(&t, o->name, NULL, side, per(d->op_device ? o->self_dev : o->self_cpu, steps),
                     (double)o->count / steps, per(o->self_cpu, steps)))
                return nomem(&t);
        }
    }
    return finish(&t, &d->ops, &d->n_ops);
}

static mp_status diff_kernels(mp_trace_diff *d) {
    rows t = {0};
    for (int side = 0; side < 2; side++) {
        const mp_trace *tr = side ? d->b : d->a;
        int steps = side ? d->b_steps : d->a_steps;
        for (int i = 0; i < tr->n_kernels; i++) {
            const mp_tkernel *k = &tr->kernels[i];
            if (!put(&t, k->name, k->short_name, side, per(k->total, steps), (double)k->count / steps, 0))
                return nomem(&t);
        }
    }
    return finish(&t, &d->kernels, &d->n_kernels);
}

/* Modules by path (the tree's root, the whole trace, is left out): forward
 * plus backward time per step, the backward share beside it. */
static mp_status diff_mods(mp_trace_diff *d) {
    rows t = {0};
    for (int side = 0; side < 2; side++) {
        const mp_trace *tr = side ? d->b : d->a;
        int steps = side ? d->b_steps : d->a_steps;
        for (int m = 1; m < tr->n_mods; m++) {
            const mp_module *md = &tr->mods[m];
            const mp_tmod *f = &tr->mfig[m];
            if (!md->path) continue;
            int64_t both = f->fwd;
            MP_SADD(both, f->bwd);
            if (!put(&t, md->path, md->cls, side, per(both, steps), (double)f->calls / steps,
                     per(f->bwd, steps)))
                return nomem(&t);
        }
    }
    return finish(&t, &d->mods, &d->n_mods);
}

static void step_means(const mp_trace *t, int steps, double *wall, double *busy, double *idle,
                       double *cat) {
    *wall = per(t->wall_total, steps);
    *busy = per(t->busy_total, steps);
    for (int c = 0; c < MP_TI_COUNT; c++) idle[c] = 0;
    for (int c = 0; c < MP_TC_COUNT; c++) cat[c] = 0;
    for (int k = 0; k < t->n_steps; k++) {
        for (int c = 0; c < MP_TI_COUNT; c++) idle[c] += per(t->steps[k].idle[c], steps);
        for (int c = 0; c < MP_TC_COUNT; c++) cat[c] += per(t->steps[k].cat[c], steps);
    }
}

bool mp_tdiff_row_same(const mp_tdiff_row *r) {
    return r->in_a && r->in_b && r->a == r->b && r->a_calls == r->b_calls && r->a2 == r->b2;
}

static bool all_same(const mp_tdiff_row *r, int n) {
    for (int i = 0; i < n; i++)
        if (!mp_tdiff_row_same(&r[i])) return false;
    return true;
}

/* No module scopes on one side only: the other's modules cannot be
 * compared (each would read "only in" the side that has them). */
static void mods_note(mp_trace_diff *d) {
    bool ha = d->a->n_mods > 1, hb = d->b->n_mods > 1;
    if (ha == hb) return;
    const mp_trace *none = ha ? d->b : d->a;
    snprintf(d->mods_note, sizeof d->mods_note,
             "%s has no module scopes (%s): %s's %d modules cannot be compared",
             ha ? "B" : "A",
             none->no_modules ? "profiled without with_stack=True and with_modules=True, or by a "
                                "PyTorch without Kineto"
                              : "no nn.Module ranges in it",
             ha ? "A" : "B", (ha ? d->a : d->b)->n_mods - 1);
}

mp_status mp_trace_diff_make(const mp_trace *a, const mp_trace *b, mp_trace_diff *d) {
    memset(d, 0, sizeof *d);
    d->a = a;
    d->b = b;
    d->a_steps = a->n_steps > 0 ? a->n_steps : 1;
    d->b_steps = b->n_steps > 0 ? b->n_steps : 1;
    step_means(a, d->a_steps, &d->a_step, &d->a_busy, d->a_idle, d->a_cat);
    step_means(b, d->b_steps, &d->b_step, &d->b_busy, d->b_idle, d->b_cat);
    d->op_device = a->raw.n_devs > 0 || b->raw.n_devs > 0;
    d->mod_cpu = a->cpu_modules || b->cpu_modules;
    mp_status st = diff_ops(d);
    if (st == MP_OK) st = diff_kernels(d);
    if (st == MP_OK) st = diff_mods(d);
    if (st != MP_OK) {
        mp_trace_diff_free(d);
        return st;
    }
    d->same = d->a_step == d->b_step && d->a_busy == d->b_busy && a->n_steps == b->n_steps;
    for (int c = 0; c < MP_TI_COUNT; c++) d->same &= d->a_idle[c] == d->b_idle[c];
    for (int c = 0; c < MP_TC_COUNT; c++) d->same &= d->a_cat[c] == d->b_cat[c];
    d->same = d->same && all_same(d->ops, d->n_ops) && all_same(d->kernels, d->n_kernels) &&
              all_same(d->mods, d->n_mods);
    mods_note(d);
    return st;
}

mp_status mp_trace_diff_make_files(const mp_trace *a, const char *a_file, const mp_trace *b,
                                   const char *b_file, mp_trace_diff *d) {
    mp_status st = mp_trace_diff_make(a, b, d);
    if (st == MP_OK) {
        d->a_file = a_file;
        d->b_file = b_file;
    }
    return st;
}

void mp_trace_diff_free(mp_trace_diff *d) {
    if (!d) return;
    free(d->ops);
    free(d->kernels);
    free(d->mods);
    memset(d, 0, sizeof *d);
}
