/* The trace analysis (analyze_int.h): the operator table (key_averages'
 * rows) and the kernel table. */
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

/* ---- operator and kernel tables ---- */

int mp__trace_intern(mp_trace_raw *raw, const char *s) {
    size_t n = strlen(s);
    uint32_t h = mp_strmap_hash(s, n);
    int v = mp_strmap_getn_h(&raw->names_map, s, n, h);
    if (v >= 0) return v;
    char *copy = mp_arena_strdup(&raw->arena, s);
    if (!copy) return -1;
    const char **nn = mp_grow(raw->names, sizeof *raw->names, &raw->cap_names, raw->n_names + 1);
    if (!nn) return -1;
    raw->names = nn;
    if (mp_strmap_put_h(&raw->names_map, copy, n, h, raw->n_names) != MP_OK) return -1;
    raw->names[raw->n_names] = copy;
    return raw->n_names++;
}

/* The memory curve: device allocation events inside the steps' window (the
 * whole trace without steps), split into MP_MEM_CURVE equal slices of time,
 * each giving its highest point, so the peaks survive. */
mp_status tr_mem_curve(mp_trace *t, const mp_trace_raw *raw) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int i = 0; i < t->n_steps; i++) {
        lo = MP_MIN(lo, t->steps[i].ts);
        hi = MP_MAX(hi, t->steps[i].ts + t->steps[i].wall);
    }
    if (!t->n_steps)
        for (size_t m = 0; m < raw->n_mems; m++) {
            lo = MP_MIN(lo, raw->mems[m].ts);
            hi = MP_MAX(hi, raw->mems[m].ts);
        }
    t->mem_curve = NULL;
    t->n_mem_curve = 0;
    if (lo > hi) return MP_OK;
    struct mp_tmempt *c = calloc(MP_MEM_CURVE, sizeof *c);
    if (!c) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int b = 0; b < MP_MEM_CURVE; b++) c[b].allocated = -1;
    double span = (double)(hi - lo) + 1;
    for (size_t m = 0; m < raw->n_mems; m++) {
        const mp_tmem *e = &raw->mems[m];
        if (e->ts < lo || e->ts > hi) continue;
        int b = (int)((double)(e->ts - lo) / span * MP_MEM_CURVE);
        if (b >= MP_MEM_CURVE) b = MP_MEM_CURVE - 1;
        if ((int64_t)e->allocated > c[b].allocated) {
            c[b].allocated = (int64_t)e->allocated;
            c[b].ts = e->ts;
        }
    }
    int n = 0;
    for (int b = 0; b < MP_MEM_CURVE; b++)
        if (c[b].allocated >= 0) c[n++] = c[b];
    if (!n) {
        free(c);
        return MP_OK;
    }
    t->mem_curve = c;
    t->n_mem_curve = n;
    return MP_OK;
}

static int top_cmp(const void *x, const void *y) {
    const mp_top *a = x, *b = y;
    if (a->self_dev != b->self_dev) return a->self_dev > b->self_dev ? -1 : 1;
    if (a->cpu_total != b->cpu_total) return a->cpu_total > b->cpu_total ? -1 : 1;
    if (a->device != b->device) return a->device ? 1 : -1;
    return strcmp(a->name, b->name);
}

/* A trace without device time (a CPU-only run): key_averages' own order for
 * it, self CPU time first. */
static int top_cpu_cmp(const void *x, const void *y) {
    const mp_top *a = x, *b = y;
    if (a->self_cpu != b->self_cpu) return a->self_cpu > b->self_cpu ? -1 : 1;
    return top_cmp(x, y);
}

bool mp_trace_ops_device_time(const mp_trace *t) {
    for (int i = 0; i < t->n_ops; i++)
        if (t->ops[i].self_dev > 0) return true;
    return false;
}

static int kern_cmp(const void *x, const void *y) {
    const mp_tkernel *a = x, *b = y;
    if (a->total != b->total) return a->total > b->total ? -1 : 1;
    return strcmp(a->name, b->name);
}

static bool allocator_op(const char *n) {
    return tr_starts(n, "aten::empty") || tr_starts(n, "aten::new_empty") || strcmp(n, "aten::resize_") == 0;
}

/* The key_averages row of a name (ProfilerStep#N -> ProfilerStep*); -1
 * when out of memory. */
static int32_t op_row(mp_trace *t, mp_trace_raw *raw, int32_t *map, int nid, int star, bool dev,
                      int *cap) {
    if (tr_starts(raw->names[nid], "ProfilerStep#")) nid = star;
    int32_t r = map[nid];
    if (r >= 0) return r;
    mp_top *no = mp_grow(t->ops, sizeof *t->ops, cap, t->n_ops + 1);
    if (!no) return -1;
    t->ops = no;
    r = map[nid] = t->n_ops++;
    memset(&t->ops[r], 0, sizeof t->ops[r]);
    t->ops[r].name = raw->names[nid];
    t->ops[r].device = dev;
    return r;
}

mp_status tr_tables(work *w) {
    mp_trace *t = w->t;
    mp_trace_raw *raw = w->raw;
    mp_tspan *sp = raw->spans;
    size_t S = w->S, D = w->D;
    int star = mp__trace_intern(raw, "ProfilerStep*");
    if (star < 0) return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    int N = raw->n_names;
    int32_t *row_cpu = malloc((size_t)N * sizeof *row_cpu);
    int32_t *row_dev = malloc((size_t)N * sizeof *row_dev);
    /* A span's device total and its children's CPU time, from a walk
     * backwards: a span's subtree follows it, so its children are done
     * when it is reached, and the spans still waiting for children's
     * figures are its ancestors, a stack. */
    typedef struct pend {
        int32_t node;
        int64_t dtot, child;
    } pend;
    pend *stk = mp_big_alloc((S + 1) * sizeof *stk, false);
    if (!row_cpu || !row_dev || !stk) {
        free(row_cpu);
        free(row_dev);
        mp_big_free(stk);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    memset(row_cpu, 0xff, (size_t)N * sizeof *row_cpu);
    memset(row_dev, 0xff, (size_t)N * sizeof *row_dev);
    int cap = 0;
    mp_status st = MP_OK;
    size_t npend = 0;
    for (size_t k = S; k-- > 0;) {
        int32_t i = (int32_t)k;
        if ((sp[i].kind == MP_TS_MODULE && !sp[i].rf) || mp_bit_get(w->merged, (size_t)i)) continue;
        int64_t kern = tr_kern_of(w, i), dtot = kern, child = 0, dur = sp[i].end - sp[i].ts;
        if (npend && stk[npend - 1].node == i) {
            MP_SADD(dtot, stk[npend - 1].dtot);
            child = stk[npend - 1].child;
            npend--;
        }
        int32_t p = w->parent[i];
        if (p >= 0) {
            if (!npend || stk[npend - 1].node != p) stk[npend++] = (pend){p, 0, 0};
            MP_SADD(stk[npend - 1].dtot, dtot);
            MP_SADD(stk[npend - 1].child, dur);
        }
        int32_t r = op_row(t, raw, row_cpu, (int)sp[i].name, star, false, &cap);
        if (r < 0) {
            st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
            break;
        }
        mp_top *o = &t->ops[r];
        o->count++;
        MP_SADD(o->cpu_total, dur);
        MP_SADD(o->self_cpu, dur - child);
        MP_SADD(o->dev_total, dtot);
        MP_SADD(o->self_dev, kern);
        if (sp[i].has_flops) MP_SADD(o->flops, mp_trace_span_flops(raw, (size_t)i));
    }
    mp_big_free(stk);
    for (size_t d = 0; d < D && st == MP_OK; d++) {
        const mp_tdev *dv = &raw->devs[d];
        int32_t r = op_row(t, raw, row_dev, (int)dv->name, star, true, &cap);
        if (r < 0) {
            st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
            break;
        }
        mp_top *o = &t->ops[r];
        o->count++;
        MP_SADD(o->dev_total, dv->end - dv->ts);
        MP_SADD(o->self_dev, dv->end - dv->ts);
    }
    if (st != MP_OK) {
        free(row_cpu);
        free(row_dev);
        return st;
    }
    /* device memory allocated inside each operator (allocator calls count
     * for the operator that asked for them). The records are in time
     * order, so on each thread a cursor moves forward through its spans
     * (found once by binary search). */
    size_t *cur = malloc(((size_t)raw->n_threads + 1) * sizeof *cur);
    if (!cur) {
        free(row_cpu);
        free(row_dev);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    for (int k = 0; k <= raw->n_threads; k++) cur[k] = SIZE_MAX;
    for (size_t m = 0; m < w->n_allocs; m++) {
        const talloc *me = &w->allocs[m];
        /* after the last span started at or before it on its thread */
        size_t lo = 0, hi = S, c = me->tid < (uint64_t)raw->n_threads ? (size_t)me->tid : (size_t)raw->n_threads;
        if (cur[c] == SIZE_MAX) {
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                const mp_tspan *k = &sp[mid];
                if (k->tid < me->tid || (k->tid == me->tid && k->ts <= me->ts)) lo = mid + 1;
                else hi = mid;
            }
        } else {
            lo = cur[c];
            while (lo < S && sp[lo].tid == me->tid && sp[lo].ts <= me->ts) lo++;
        }
        cur[c] = lo;
        int32_t o = -1;
        for (size_t k = lo; k-- > 0;) {
            int32_t i = (int32_t)k;
            if (sp[i].tid != me->tid) break;
            if (sp[i].kind == MP_TS_MODULE && !sp[i].rf) continue;
            o = tr_resolve(w, i);
            break;
        }
        while (o >= 0 && (sp[o].end < me->ts || sp[o].kind == MP_TS_RUNTIME ||
                          allocator_op(raw->names[sp[o].name])))
            o = w->parent[o];
        if (o < 0) continue;
        int nid = tr_starts(raw->names[sp[o].name], "ProfilerStep#") ? star : (int)sp[o].name;
        if (row_cpu[nid] >= 0) MP_SADD(t->ops[row_cpu[nid]].alloc_bytes, (int64_t)me->bytes);
    }
    free(cur);
    free(row_cpu);
    free(row_dev);
    if (t->n_ops > 1)
        qsort(t->ops, (size_t)t->n_ops, sizeof *t->ops, mp_trace_ops_device_time(t) ? top_cmp : top_cpu_cmp);

    /* kernels by name, with the operator that launched most of their time */
    int32_t *krow = malloc((size_t)raw->n_names * sizeof *krow);
    mp_imap pair;
    int64_t *ptime = mp_big_alloc((D + 1) * sizeof *ptime, true);
    int32_t *pkr = mp_big_alloc((D + 1) * sizeof *pkr, false), *pop = mp_big_alloc((D + 1) * sizeof *pop, false);
    if (!krow || !ptime || !pkr || !pop || !mp_imap_init(&pair, 1024)) {   /* it grows */
        free(krow);
        mp_big_free(ptime);
        mp_big_free(pkr);
        mp_big_free(pop);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    memset(krow, 0xff, (size_t)raw->n_names * sizeof *krow);
    int kcap = 0, np = 0;
    for (size_t d = 0; d < D; d++) {
        const mp_tdev *dv = &raw->devs[d];
        if (dv->kind == MP_TD_ANNOT) continue;
        int32_t r = krow[dv->name];
        int32_t o = w->devop[d];
        const char *opn = o >= 0 ? raw->names[sp[o].name] : NULL;
        if (r < 0) {
            mp_tkernel *nk = mp_grow(t->kernels, sizeof *t->kernels, &kcap, t->n_kernels + 1);
            if (!nk) {
                st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
                break;
            }
            t->kernels = nk;
            r = krow[dv->name] = t->n_kernels++;
            mp_tkernel *k = &t->kernels[r];
            memset(k, 0, sizeof *k);
            k->name = raw->names[dv->name];
            char sh[256];
            if (dv->kind == MP_TD_KERNEL) mp_trace_short_name(k->name, sh, sizeof sh);
            else snprintf(sh, sizeof sh, "%s", k->name);
            k->short_name = mp_arena_strdup(&raw->arena, sh);
            if (!k->short_name) {
                st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
                break;
            }
            k->kind = dv->kind;
        }
        mp_tkernel *k = &t->kernels[r];
        int64_t dur = dv->end - dv->ts;
        k->count++;
        MP_SADD(k->total, dur);
        MP_SADD(t->kernel_total, dur);
        int64_t key = ((int64_t)r << 32) | (int64_t)(uint32_t)(o >= 0 ? (int32_t)sp[o].name : -1);
        int32_t pi = mp_imap_get(&pair, key);
        if (pi < 0) {
            pi = np++;
            mp_imap_put(&pair, key, pi);
            pkr[pi] = r;
            pop[pi] = o >= 0 ? (int32_t)sp[o].name : -1;
        }
        MP_SADD(ptime[pi], dur);
        (void)opn;
    }
    if (st == MP_OK) {
        int64_t *best = calloc((size_t)t->n_kernels + 1, sizeof *best);
        if (!best) st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
        for (int pi = 0; best && pi < np; pi++) {
            mp_tkernel *k = &t->kernels[pkr[pi]];
            if (ptime[pi] > best[pkr[pi]] || !k->op) {
                best[pkr[pi]] = ptime[pi];
                k->op = pop[pi] >= 0 ? raw->names[pop[pi]] : NULL;
            }
        }
        free(best);
        for (int i = 0; i < t->n_kernels; i++)
            t->kernels[i].cat = (uint8_t)tr_category(t->kernels[i].name, t->kernels[i].kind, t->kernels[i].op);
        if (t->n_kernels > 1) qsort(t->kernels, (size_t)t->n_kernels, sizeof *t->kernels, kern_cmp);
    }
    mp_imap_free(&pair);
    free(krow);
    mp_big_free(ptime);
    mp_big_free(pkr);
    mp_big_free(pop);
    return st;
}