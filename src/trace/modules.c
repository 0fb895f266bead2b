/* The trace analysis (analyze_int.h): each module's forward and backward
 * device time and FLOPs, over the one module tree. */
#include "trace/trace.h"
#include "base/arrays.h"
#include "base/gpu.h"
#include "trace/ival.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <malloc.h>
#include "trace/analyze_int.h"

/* ---- modules: forward and backward device time, FLOPs ---- */

/* The module operator o's figures count for: with o or an enclosing
 * operator tied to a forward one (the nearest), that forward operator's
 * module (*bwd true); else o's own (*bwd false). -1: none. */
static inline int op_module(const work *w, int32_t o, bool *bwd) {
    int32_t x = o;
    while (x >= 0 && !mp_bit_get(w->hasfwd, (size_t)x)) x = w->parent[x];
    *bwd = x >= 0;
    return x >= 0 ? w->mod[tr_fwd_of(w, x)] : w->mod[o];
}

void tr_modules(work *w) {
    mp_trace *t = w->t;
    if (t->n_mods <= 0) return;
    mp_tspan *sp = w->raw->spans;
    for (size_t d = 0; d < w->D; d++) {
        int32_t o = w->devop[d];
        if (o < 0) continue;
        int64_t dur = w->raw->devs[d].end - w->raw->devs[d].ts;
        bool bwd;
        int m = op_module(w, o, &bwd);
        if (m < 0) continue;
        if (bwd) MP_SADD(t->mfig[m].bwd, dur);
        else MP_SADD(t->mfig[m].fwd, dur);
    }
    /* FLOPs: the outermost counted operator; a backward one (itself or an
     * enclosing operator tied to a forward one) counts for the module of
     * that forward operator */
    for (size_t f = 0; f < w->raw->n_flops; f++) {
        int32_t i = (int32_t)w->raw->flops[f].span;
        uint64_t fl = w->raw->flops[f].flops;
        if (sp[i].kind != MP_TS_OP || mp_bit_get(w->merged, (size_t)i)) continue;
        bool outer = true;
        for (int32_t x = w->parent[i]; x >= 0 && outer; x = w->parent[x])
            if (sp[x].has_flops) outer = false;
        if (!outer) continue;
        bool bwd;
        int m = op_module(w, i, &bwd);
        if (m < 0) continue;
        if (bwd) MP_SADD(t->mfig[m].bwd_flops, fl);
        else MP_SADD(t->mfig[m].flops, fl);
    }
    bool cpu = mp_trace_cpu_modules(t, sp, w->S, w->mod, w->D);
    for (int m = t->n_mods - 1; m > 0; m--) {
        int p = t->mods[m].parent;
        if (p < 0) continue;
        if (!cpu) {
            MP_SADD(t->mfig[p].fwd, t->mfig[m].fwd);
            MP_SADD(t->mfig[p].bwd, t->mfig[m].bwd);
        }
        MP_SADD(t->mfig[p].flops, t->mfig[m].flops);
        MP_SADD(t->mfig[p].bwd_flops, t->mfig[m].bwd_flops);
    }
}

/* The step whose window holds ts; -1. Steps are in time order. */
int mp__trace_step_at(const mp_trace *t, int64_t ts) {
    int lo = 0, hi = t->n_steps;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (t->steps[mid].ts <= ts) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return -1;
    const mp_tstep *s = &t->steps[lo - 1];
    return ts < s->ts + s->wall ? lo - 1 : -1;
}

/* When the host launched the kernel that opens each busy interval: the
 * runtime call with its correlation (the first in span order), -1 when
 * none. A join of the intervals' correlations, sorted, with the runtime
 * calls: no map over every correlation. */
typedef struct cpos {
    int32_t corr;
    int32_t j;
} cpos;

static int cpos_cmp(const void *x, const void *y) {
    const cpos *a = x, *b = y;
    if (a->corr != b->corr) return a->corr < b->corr ? -1 : 1;
    return (a->j > b->j) - (a->j < b->j);
}

typedef struct corr_key {
    const cpos *c;
    int32_t corr;
} corr_key;

static bool corr_before(const void *ctx, size_t i) {
    const corr_key *q = ctx;
    return q->c[i].corr < q->corr;
}

mp_status tr_launch_times(const work *w, const ival *u, size_t nu, int64_t **out) {
    const mp_trace_raw *raw = w->raw;
    const mp_tspan *sp = raw->spans;
    int64_t *launch = mp_big_alloc((nu + 1) * sizeof *launch, false);
    cpos *c = mp_big_alloc((nu + 1) * sizeof *c, false);
    *out = launch;
    if (!launch || !c) {
        mp_big_free(c);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    size_t nc = 0;
    for (size_t j = 0; j < nu; j++) {
        launch[j] = -1;
        int32_t corr = raw->devs[u[j].first].corr;
        if (corr >= 0) c[nc++] = (cpos){corr, (int32_t)j};
    }
    if (nc > 1) qsort(c, nc, sizeof *c, cpos_cmp);
    size_t hint = 0;   /* a thread's launches come in the order of their correlations */
    for (size_t i = 0; nc && i < w->S; i++) {
        if (sp[i].kind != MP_TS_RUNTIME || sp[i].corr < 0) continue;
        corr_key q = {c, sp[i].corr};
        size_t lo = mp_gallop(nc, &hint, corr_before, &q);
        for (; lo < nc && c[lo].corr == sp[i].corr; lo++)
            if (launch[c[lo].j] < 0) launch[c[lo].j] = sp[i].ts;
    }
    mp_big_free(c);
    return MP_OK;
}

static int hr_cmp(const void *x, const void *y) {
    const struct mp_thrange *a = x, *b = y;
    if (a->idle != b->idle) return a->idle > b->idle ? -1 : 1;
    return strcmp(a->name, b->name);
}

typedef struct nrng {
    uint32_t name;
    int64_t a, b;
} nrng;

static int nrng_cmp(const void *x, const void *y) {
    const nrng *a = x, *b = y;
    if (a->name != b->name) return a->name < b->name ? -1 : 1;
    return (a->a > b->a) - (a->a < b->a);
}

/* The device's idle intervals inside the steps, in the steps' order: the
 * complement of the busy union u (nu intervals) within each step's
 * window. A walker, so that they are never held all at once: *k and *j
 * start at 0 and -1; returns false after the last. */
static bool next_gap(const mp_trace *t, const ival *u, size_t nu, int *k, ptrdiff_t *j, int64_t *c0,
                     int64_t *c1) {
    while (*k < t->n_steps) {
        const mp_tstep *s = &t->steps[*k];
        int64_t a0 = s->ts, a1 = s->ts + s->wall;
        if (*j < 0) *j = (ptrdiff_t)ival_after(u, nu, a0);
        else if ((size_t)*j >= nu) *j = PTRDIFF_MAX;   /* the step's last gap was given */
        else (*j)++;
        if (*j != PTRDIFF_MAX) {
            size_t jj = (size_t)*j;
            int64_t g0 = jj == 0 ? INT64_MIN : u[jj - 1].b;
            int64_t g1 = jj < nu ? u[jj].a : INT64_MAX;
            *c0 = MP_MAX(g0, a0);
            *c1 = MP_MIN(g1, a1);
            if (*c0 < a1) {
                if (*c1 > *c0) return true;
                continue;
            }
        }
        (*k)++;
        *j = -1;
    }
    return false;
}

/* Whether the user range at span i called into the device runtime (the
 * spans are sorted by thread and time): a range that launched work is not
 * one the device waited on (a "forward" range's idle is launch-bound, not
 * the range's). */
static bool range_launched(const mp_trace_raw *raw, size_t i) {
    const mp_tspan *all = raw->spans, *sp = &all[i];
    size_t S = raw->n_spans, lo = 0, hi = S;   /* the first span of its thread at or after its start */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (all[mid].tid < sp->tid || (all[mid].tid == sp->tid && all[mid].ts < sp->ts)) lo = mid + 1;
        else hi = mid;
    }
    for (; lo < S && all[lo].tid == sp->tid && all[lo].ts < sp->end; lo++)
        if (all[lo].kind == MP_TS_RUNTIME) return true;
    return false;
}

/* The union of the user ranges that launched nothing (the device idle
 * inside them is theirs: MP_TI_RANGE). *n intervals; NULL when out of
 * memory (and *n 0 with a non-NULL result when there are none). */
ival *tr_held_ranges(const mp_trace_raw *raw, size_t *n) {
    size_t k = 0;
    for (size_t i = 0; i < raw->n_spans; i++)
        k += raw->spans[i].kind == MP_TS_ANNOT && mp__trace_user_range(raw->names[raw->spans[i].name]);
    ival *v = malloc((k + 1) * sizeof *v);
    if (!v) return NULL;
    k = 0;
    for (size_t i = 0; i < raw->n_spans; i++) {
        const mp_tspan *sp = &raw->spans[i];
        if (sp->kind != MP_TS_ANNOT || !mp__trace_user_range(raw->names[sp->name])) continue;
        if (range_launched(raw, i)) continue;
        v[k++] = (ival){sp->ts, sp->end, (int32_t)i};
    }
    if (k > 1) qsort(v, k, sizeof *v, ival_cmp);
    *n = merge_ivals(v, k);
    return v;
}

/* The user's own host ranges that gave the device no work, and the
 * device's idle time inside them (not already the data loader's or a
 * collective's): `data`, logging, checkpointing the device waited on. u: the
 * device's busy union (next_gap gives the idle intervals of the steps). */
mp_status tr_host_ranges(mp_trace *t, const mp_trace_raw *raw, const ival *u, size_t nu,
                             const ival *loader, size_t nl, const ival *hc, size_t nhc) {
    t->hranges = NULL;
    t->n_hranges = 0;
    if (!t->n_steps) return MP_OK;
    int64_t w0 = t->steps[0].ts, w1 = w0;
    for (int k = 0; k < t->n_steps; k++) w1 = MP_MAX(w1, t->steps[k].ts + t->steps[k].wall);
    size_t n = 0;
    for (size_t i = 0; i < raw->n_spans; i++)
        n += raw->spans[i].kind == MP_TS_ANNOT && mp__trace_user_range(raw->names[raw->spans[i].name]);
    if (!n) return MP_OK;
    nrng *r = malloc(n * sizeof *r);
    size_t ngap = 0;
    int gk = 0;
    ptrdiff_t gj = -1;
    for (int64_t c0, c1; next_gap(t, u, nu, &gk, &gj, &c0, &c1);) ngap++;
    ival *ex = malloc((nl + nhc + 1) * sizeof *ex), *idle = mp_big_alloc((2 * ngap + nl + nhc + 1) * sizeof *idle, false);
    struct mp_thrange *out = NULL;
    int cap = 0;
    mp_status st = MP_OK;
    if (!r || !ex || !idle) {
        st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
        goto done;
    }
    n = 0;
    for (size_t i = 0; i < raw->n_spans; i++) {
        const mp_tspan *sp = &raw->spans[i];
        if (sp->kind != MP_TS_ANNOT || !mp__trace_user_range(raw->names[sp->name])) continue;
        if (range_launched(raw, i)) continue;
        r[n++] = (nrng){sp->name, MP_MAX(sp->ts, w0), MP_MIN(sp->end, w1)};
    }
    qsort(r, n, sizeof *r, nrng_cmp);
    /* idle less the loader's and the collectives' */
    size_t nex = 0, nid = 0;
    for (size_t i = 0; i < nl; i++) ex[nex++] = loader[i];
    for (size_t i = 0; i < nhc; i++) ex[nex++] = hc[i];
    if (nex > 1) qsort(ex, nex, sizeof *ex, ival_cmp);
    nex = merge_ivals(ex, nex);
    gk = 0;
    gj = -1;
    size_t e = 0;
    for (int64_t ga, gb; next_gap(t, u, nu, &gk, &gj, &ga, &gb);) {
        int64_t cur = ga;
        while (e < nex && ex[e].b <= cur) e++;
        for (size_t q = e; q < nex && ex[q].a < gb; q++) {
            if (ex[q].a > cur) idle[nid++] = (ival){cur, ex[q].a, -1};
            cur = MP_MAX(cur, ex[q].b);
        }
        if (cur < gb) idle[nid++] = (ival){cur, gb, -1};
    }
    for (size_t i = 0; i < n;) {
        size_t j = i;
        int64_t host = 0, id = 0, cov = INT64_MIN, count = 0;
        while (j < n && r[j].name == r[i].name) {   /* nested or repeated calls once */
            count++;
            int64_t a = MP_MAX(r[j].a, cov), b = r[j].b;
            if (b > a) {
                host += b - a;
                id += ival_overlap(idle, nid, a, b);
            }
            cov = MP_MAX(cov, b);
            j++;
        }
        if (id > 0) {
            struct mp_thrange *no = mp_grow(out, sizeof *out, &cap, t->n_hranges + 1);
            if (!no) {
                st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
                goto done;
            }
            out = no;
            out[t->n_hranges++] = (struct mp_thrange){raw->names[r[i].name], count, host, id};
        }
        i = j;
    }
    if (t->n_hranges > 1) qsort(out, (size_t)t->n_hranges, sizeof *out, hr_cmp);
    if (t->n_hranges > MP_HRANGES) t->n_hranges = MP_HRANGES;
    t->hranges = out;
    out = NULL;
done:
    free(out);
    free(r);
    free(ex);
    mp_big_free(idle);
    return st;
}