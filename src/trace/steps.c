/* The trace analysis (analyze_int.h): steps: busy and idle time by cause,
 * device time by category, the memory curve. */
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

/* ---- steps: busy, idle by cause, device time by category, memory ---- */

/* The steps: ProfilerStep#N annotations, else the whole trace; in time
 * order (the spans in file order: steps starting at the same time stay in
 * it). Their start and length are set here only (what reads them may run
 * beside tr_steps()). */
mp_status tr_steps_list(work *w) {
    mp_trace *t = w->t;
    mp_trace_raw *raw = w->raw;
    mp_tspan *sp = raw->spans;
    size_t S = w->S, D = w->D;
    const char **nm = raw->names;
    int scap = 0;
    for (size_t i = 0; i < S; i++) {
        if (sp[i].kind != MP_TS_ANNOT || !tr_starts(nm[sp[i].name], "ProfilerStep#")) continue;
        mp_tstep *ns = mp_grow(t->steps, sizeof *t->steps, &scap, t->n_steps + 1);
        if (!ns) return mp_error(MP_ERR_NOMEM, "trace: out of memory");
        t->steps = ns;
        mp_tstep *s = &t->steps[t->n_steps++];
        memset(s, 0, sizeof *s);
        s->name = nm[sp[i].name];
        s->ts = sp[i].ts;
        s->wall = sp[i].end - sp[i].ts;
    }
    if (t->n_steps == 0 && (S || D)) {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (size_t i = 0; i < S; i++) {
            lo = MP_MIN(lo, sp[i].ts);
            hi = MP_MAX(hi, sp[i].end);
        }
        for (size_t d = 0; d < D; d++) {
            lo = MP_MIN(lo, raw->devs[d].ts);
            hi = MP_MAX(hi, raw->devs[d].end);
        }
        t->steps = calloc(1, sizeof *t->steps);
        if (!t->steps) return mp_error(MP_ERR_NOMEM, "trace: out of memory");
        t->n_steps = 1;
        t->steps[0].name = "(whole trace)";
        t->steps[0].ts = lo;
        t->steps[0].wall = hi - lo;
    }
    /* steps in time order (bubble-free insertion: a handful) */
    for (int i = 1; i < t->n_steps; i++)
        for (int j = i; j > 0 && t->steps[j - 1].ts > t->steps[j].ts; j--) {
            mp_tstep tmp = t->steps[j];
            t->steps[j] = t->steps[j - 1];
            t->steps[j - 1] = tmp;
        }
    return MP_OK;
}

/* The allocations out of the [memory] records (in time order), into
 * w->allocs; the records are freed. */
mp_status tr_keep_allocs(work *w) {
    mp_trace_raw *raw = w->raw;
    size_t n = 0;
    for (size_t m = 0; m < raw->n_mems; m++) n += raw->mems[m].bytes > 0;
    w->allocs = mp_big_alloc((n + 1) * sizeof *w->allocs, false);
    if (!w->allocs) return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    for (size_t m = 0; m < raw->n_mems; m++) {
        const mp_tmem *me = &raw->mems[m];
        if (me->bytes > 0) w->allocs[w->n_allocs++] = (talloc){me->ts, (uint64_t)me->bytes, me->tid};
    }
    mp__trace_rec_free(raw->mems);   /* nothing reads the memory records after */
    raw->mems = NULL;
    raw->n_mems = raw->cap_mems = 0;
    return MP_OK;
}

/* Each step's device memory (allocated at its start, peak and end) from
 * the [memory] records in time order; then the whole trace's peak and
 * curve. */
mp_status tr_step_memory(work *w) {
    mp_trace *t = w->t;
    mp_trace_raw *raw = w->raw;
    for (int k = 0; k < t->n_steps; k++) t->steps[k].mem_start = t->steps[k].mem_peak = t->steps[k].mem_end = -1;
    int64_t last = -1;
    int cur = -1;
    for (size_t m = 0; m < raw->n_mems; m++) {
        const mp_tmem *me = &raw->mems[m];
        int k = mp__trace_step_at(t, me->ts);
        if (k != cur && k >= 0) {
            mp_tstep *s = &t->steps[k];
            if (s->mem_start < 0) s->mem_start = last >= 0 ? last : (int64_t)me->allocated - me->bytes;
        }
        cur = k;
        last = (int64_t)me->allocated;
        if (k < 0) continue;
        mp_tstep *s = &t->steps[k];
        if ((int64_t)me->allocated > s->mem_peak) s->mem_peak = (int64_t)me->allocated;
        s->mem_end = (int64_t)me->allocated;
    }
    for (int k = 0; k < t->n_steps; k++) {
        mp_tstep *s = &t->steps[k];
        if (s->mem_peak < s->mem_start) s->mem_peak = s->mem_start;
        if (s->mem_end < 0) s->mem_end = s->mem_start;
    }
    t->mem_peak_alloc = -1;
    t->mem_peak_reserved = raw->mem_reserved_peak;
    for (size_t m = 0; m < raw->n_mems; m++)
        t->mem_peak_alloc = MP_MAX(t->mem_peak_alloc, (int64_t)raw->mems[m].allocated);
    return tr_mem_curve(t, raw);
}

/* Each step's figures: device busy and idle by cause, device time by
 * category, optimizer, FLOPs; then the host's ranges. */
mp_status tr_steps(work *w) {
    mp_trace *t = w->t;
    mp_trace_raw *raw = w->raw;
    mp_tspan *sp = raw->spans;
    size_t S = w->S, D = w->D;
    const char **nm = raw->names;
    mp_status st = MP_OK;

    /* device busy intervals (kernels, copies, sets: every stream): the
     * device events' indices by time, and their union */
    size_t nd = 0, nl = 0, nsy = 0, nu = 0;
    for (size_t d = 0; d < D; d++) nd += raw->devs[d].kind != MP_TD_ANNOT;
    for (size_t i = 0; i < S; i++) {
        uint8_t f = w->nf[sp[i].name];
        nl += (sp[i].kind == MP_TS_ANNOT || sp[i].kind == MP_TS_OP) && (f & NF_LOADER);
        nsy += sp[i].kind == MP_TS_RUNTIME && (f & NF_SYNC);
    }
    int32_t *dk = mp_big_alloc((nd + 1) * sizeof *dk, false), *dtmp = mp_big_alloc((nd + 1) * sizeof *dtmp, false);
    ival *loader = mp_big_alloc((nl + 1) * sizeof *loader, false);
    ival *sync = mp_big_alloc((nsy + 1) * sizeof *sync, false);
    ival *hc = malloc(((size_t)t->n_calls + 1) * sizeof *hc);   /* host-side collectives */
    ival *u = NULL, *rgs = NULL, *lc = NULL;
    int64_t *launch = NULL;   /* per interval of u: when the kernel that opens it was launched; -1 */
    uint32_t *runs = NULL;
    size_t rcap = 0;
    if (!dk || !dtmp || !loader || !sync || !hc) {
        mp_big_free(dtmp);
        st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
        goto out;
    }
    nd = 0;
    int64_t maxdur = 0;
    for (size_t d = 0; d < D; d++)
        if (raw->devs[d].kind != MP_TD_ANNOT) {
            dk[nd++] = (int32_t)d;
            maxdur = MP_MAX(maxdur, raw->devs[d].end - raw->devs[d].ts);
        }
    bool sorted = mp_idx_msort(dk, dtmp, 0, nd, tr_dev_cmp, raw->devs, &runs, &rcap);
    free(runs);
    mp_big_free(dtmp);
    if (!sorted) {
        st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
        goto out;
    }
    /* the union, as the events come in time order: counted, then made */
    for (size_t i = 0, pass = 0; pass < 2; pass++, i = 0) {
        int64_t b = INT64_MIN;
        size_t k = 0;
        for (; i < nd; i++) {
            const mp_tdev *dv = &raw->devs[dk[i]];
            if (k && dv->ts <= b) {
                if (dv->end > b) b = dv->end;
                if (pass) u[k - 1].b = b;
                continue;
            }
            if (pass) u[k] = (ival){dv->ts, dv->end, dk[i]};
            k++;
            b = dv->end;
        }
        nu = k;
        if (!pass && !(u = mp_big_alloc((nu + 1) * sizeof *u, false))) {
            st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
            goto out;
        }
    }
    if ((st = tr_launch_times(w, u, nu, &launch)) != MP_OK) goto out;
    /* categories: by kernel name once, by launching operator name once */
    int N = raw->n_names;
    int8_t *kc = malloc((size_t)N + 1), *oc = malloc((size_t)N + 1);
    if (!kc || !oc) {
        free(kc);
        free(oc);
        st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
        goto out;
    }
    memset(kc, 0x7f, (size_t)N + 1);
    memset(oc, 0x7f, (size_t)N + 1);
    nl = nsy = 0;
    for (size_t i = 0; i < S; i++) {
        uint8_t f = w->nf[sp[i].name];
        if ((sp[i].kind == MP_TS_ANNOT || sp[i].kind == MP_TS_OP) && (f & NF_LOADER))
            loader[nl++] = (ival){sp[i].ts, sp[i].end, (int32_t)i};
        if (sp[i].kind == MP_TS_RUNTIME && (f & NF_SYNC))
            sync[nsy++] = (ival){sp[i].ts, sp[i].end, (int32_t)i};
    }
    if (nl > 1) qsort(loader, nl, sizeof *loader, ival_cmp);
    nl = merge_ivals(loader, nl);
    size_t nhc = 0;
    for (int i = 0; i < t->n_calls; i++)
        if (!t->calls[i].device) hc[nhc++] = (ival){t->calls[i].ts, t->calls[i].end, i};
    if (nhc > 1) qsort(hc, nhc, sizeof *hc, ival_cmp);
    nhc = merge_ivals(hc, nhc);
    /* the ranges that held the device, and what comes before them (the
     * loader, the host's collectives) */
    size_t nrg = 0, nlc = 0;
    rgs = tr_held_ranges(raw, &nrg);
    lc = malloc((nl + nhc + 1) * sizeof *lc);
    if (!rgs || !lc) {
        st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
        goto out;
    }
    for (size_t i = 0; i < nl; i++) lc[nlc++] = loader[i];
    for (size_t i = 0; i < nhc; i++) lc[nlc++] = hc[i];
    if (nlc > 1) qsort(lc, nlc, sizeof *lc, ival_cmp);
    nlc = merge_ivals(lc, nlc);
    /* sync calls by end time */
    for (size_t i = 0; i < nsy; i++) {
        int64_t a = sync[i].a;
        sync[i].a = sync[i].b;
        sync[i].b = a;
    }
    if (nsy > 1) qsort(sync, nsy, sizeof *sync, ival_cmp);   /* .a = end */

    for (int k = 0; k < t->n_steps; k++) {
        mp_tstep *s = &t->steps[k];
        int64_t a0 = s->ts, a1 = s->ts + s->wall;
        s->busy = ival_overlap(u, nu, a0, a1);
        s->loader_wall = ival_overlap(loader, nl, a0, a1);
        /* the gaps: before u[j] for j from the first interval ending after a0 */
        size_t j = ival_after(u, nu, a0);
        for (;; j++) {
            int64_t g0 = j == 0 ? INT64_MIN : u[j - 1].b;   /* device went idle */
            int64_t g1 = j < nu ? u[j].a : INT64_MAX;
            int64_t c0 = MP_MAX(g0, a0), c1 = MP_MIN(g1, a1);
            if (c0 >= a1) break;
            if (c1 > c0) {
                int64_t len = c1 - c0;
                int64_t ld = ival_overlap(loader, nl, c0, c1);
                MP_SADD(s->idle[MP_TI_LOADER], ld);
                len -= ld;
                /* the host waiting in a collective (outside the loader) */
                int64_t co = ival_overlap(hc, nhc, c0, c1) - ival_common(hc, nhc, loader, nl, c0, c1);
                MP_SADD(s->idle[MP_TI_COLL], co);
                len -= co;
                /* the host inside its own range that launched nothing */
                int64_t rg = nrg ? ival_overlap(rgs, nrg, c0, c1) - ival_common(rgs, nrg, lc, nlc, c0, c1) : 0;
                rg = MP_MAX(MP_MIN(rg, len), 0);
                MP_SADD(s->idle[MP_TI_RANGE], rg);
                len -= rg;
                int cause = MP_TI_OTHER;
                if (j < nu) {
                    if (launch[j] >= 0 && launch[j] > g0) {
                        cause = MP_TI_LAUNCH;
                        /* a sync call that returned after the device went idle and
                         * before the launch: the host had waited on the device */
                        int64_t from = g0 == INT64_MIN ? a0 : g0;
                        size_t lo = 0, hi = nsy;
                        while (lo < hi) {
                            size_t mid = lo + (hi - lo) / 2;
                            if (sync[mid].a < from) lo = mid + 1;
                            else hi = mid;
                        }
                        if (lo < nsy && sync[lo].a <= launch[j]) cause = MP_TI_SYNC;
                    }
                } else {
                    int64_t from = g0 == INT64_MIN ? a0 : g0;
                    for (size_t q = 0; q < nsy; q++)
                        if (sync[q].a >= from && sync[q].a <= a1) {
                            cause = MP_TI_SYNC;
                            break;
                        }
                }
                MP_SADD(s->idle[cause], len);
            }
            if (j >= nu) break;
        }
        /* device time by category, clipped to the step */
        size_t d0 = 0, lo = 0, hi = nd;
        while (lo < hi) {   /* first event starting at or after a0 - longest duration */
            size_t mid = lo + (hi - lo) / 2;
            if (raw->devs[dk[mid]].ts < a0 - maxdur) lo = mid + 1;
            else hi = mid;
        }
        d0 = lo;
        for (size_t i = d0; i < nd && raw->devs[dk[i]].ts < a1; i++) {
            int64_t ov = overlap(raw->devs[dk[i]].ts, raw->devs[dk[i]].end, a0, a1);
            if (!ov) continue;
            const mp_tdev *dv = &raw->devs[dk[i]];
            int32_t o = w->devop[dk[i]];
            int c;
            if (dv->kind == MP_TD_MEMCPY || dv->kind == MP_TD_MEMSET) {
                c = MP_TC_MEM;
            } else {
                if (kc[dv->name] == 0x7f) kc[dv->name] = (int8_t)tr_kernel_category(nm[dv->name]);
                c = kc[dv->name];
                if (c != MP_TC_COMM && o >= 0) {
                    uint32_t on = sp[o].name;
                    if (oc[on] == 0x7f) oc[on] = (int8_t)tr_op_category(nm[on]);
                    if (oc[on] >= 0) c = oc[on];
                }
            }
            MP_SADD(s->cat[c], ov);
        }
        MP_SADD(t->wall_total, s->wall);
        MP_SADD(t->busy_total, s->busy);
    }
    /* optimizer time and FLOPs: each span counts for the step it starts in */
    for (size_t i = 0; i < S; i++) {
        if (sp[i].kind != MP_TS_ANNOT || !tr_starts(nm[sp[i].name], "Optimizer.step#")) continue;
        int k = mp__trace_step_at(t, sp[i].ts);
        if (k < 0) continue;
        mp_tstep *s = &t->steps[k];
        MP_SADD(s->optimizer, overlap(sp[i].ts, sp[i].end, s->ts, s->ts + s->wall));
    }
    for (size_t f = 0; f < raw->n_flops; f++) {
        int32_t i = (int32_t)raw->flops[f].span;
        uint64_t fl = raw->flops[f].flops;
        int k = mp__trace_step_at(t, sp[i].ts);
        if (k < 0) continue;
        bool outer = true;
        for (int32_t x = w->parent[i]; x >= 0 && outer; x = w->parent[x])
            if (sp[x].has_flops) outer = false;
        if (outer) {
            MP_SADD(t->steps[k].flops, fl);
            MP_SADD(t->flops_total, fl);
        }
    }
    /* the optimizer's device span (its gpu_user_annotation) */
    for (size_t d = 0; d < D; d++) {
        const mp_tdev *dv = &raw->devs[d];
        if (dv->kind != MP_TD_ANNOT || !tr_starts(nm[dv->name], "Optimizer.step#")) continue;
        int k = mp__trace_step_at(t, dv->ts);
        if (k >= 0) MP_SADD(t->steps[k].optimizer_dev, dv->end - dv->ts);
    }
    free(kc);
    free(oc);
    /* what the host ranges below do not read goes back first */
    mp_big_free(dk);
    mp_big_free(launch);
    dk = NULL;
    launch = NULL;
    st = tr_host_ranges(t, raw, u, nu, loader, nl, hc, nhc);
out:
    mp_big_free(dk);
    mp_big_free(u);
    mp_big_free(launch);
    mp_big_free(loader);
    mp_big_free(sync);
    free(hc);
    free(rgs);
    free(lc);
    return st;
}