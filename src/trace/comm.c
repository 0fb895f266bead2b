/* Collectives of one rank's trace (trace.h mp_tcall): which events are the
 * calls, what each carries (collective, process group, sequence number,
 * message size), and per step the time in collectives, its overlap with
 * compute, and what the rank did before arriving at each call.
 *
 * The calls, by backend (docs/DESIGN.md "Collectives"):
 *  - NCCL: each collective kernel (ncclDevKernel_*, ncclKernel_*) is a
 *    call; it arrives when it starts on the device and waits there for its
 *    peers. Its collective, group, sequence number and size come from its
 *    own args (newer Kineto) or from the record_param_comms / nccl:*
 *    range that launched it (the launch's External id, then its parents).
 *  - gloo and other host-side backends: each gloo:* / nccl:* annotation is
 *    a call, on the thread that runs it; the host waits inside it. Without
 *    them, record_param_comms ranges, and without those the c10d::*
 *    operators.
 * The job analysis (job.c) matches the calls across ranks. */
#include "trace/ival.h"
#include "trace/trace.h"

#include <stdlib.h>

static bool starts(const char *s, const char *pre) { return strncmp(s, pre, strlen(pre)) == 0; }

/* "gloo:all_reduce", "c10d::allreduce_", "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
 * record_param_comms' "allgather_into_tensor_coalesced" -> "all_reduce",
 * "all_gather", ...: one name per collective whatever the backend. */
const char *mp_trace_coll_name(const char *name, mp_arena *arena) {
    const char *s = name;
    if (starts(s, "gloo:") || starts(s, "nccl:")) s += 5;
    else if (starts(s, "c10d::")) s += 6;
    char key[64];
    size_t n = 0;
    bool kernel = starts(s, "ncclDevKernel_") || starts(s, "ncclKernel_");
    if (kernel) s = strchr(s, '_') + 1;   /* the collective is the next word */
    for (; *s && n < sizeof key - 1; s++) {
        if (kernel && *s == '_') break;
        if (*s == '_') continue;
        key[n++] = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
    }
    key[n] = 0;
    static const struct { const char *has, *name; } t[] = {
        {"allreduce", "all_reduce"},         {"allgather", "all_gather"},
        {"reducescatter", "reduce_scatter"}, {"alltoall", "all_to_all"},
        {"broadcast", "broadcast"},          {"barrier", "barrier"},
        {"sendrecv", "send_recv"},           {"send", "send"},
        {"recv", "recv"},                    {"reduce", "reduce"},
        {"gather", "gather"},                {"scatter", "scatter"}};
    for (size_t i = 0; i < MP_ARRAY_LEN(t); i++)
        if (strstr(key, t[i].has)) return t[i].name;
    return n ? mp_arena_strdup(arena, key) : "collective";
}

/* The side-table entry of span or device record idx; NULL. The table is in
 * reading order, so each kind's indices ascend. */
static const mp_tcomm *comm_of(const mp_trace_raw *raw, bool dev, uint32_t idx) {
    size_t lo = 0, hi = raw->n_comms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const mp_tcomm *c = &raw->comms[mid];
        if (c->on_dev < dev || (c->on_dev == dev && c->idx < idx)) lo = mid + 1;
        else hi = mid;
    }
    if (lo < raw->n_comms && raw->comms[lo].on_dev == dev && raw->comms[lo].idx == idx)
        return &raw->comms[lo];
    return NULL;
}

static int call_cmp(const void *x, const void *y) {
    const mp_tcall *a = x, *b = y;
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    return (a->end > b->end) - (a->end < b->end);
}

/* Fill a call's metadata from a side-table entry (the fields it has; the
 * innermost entry's collective name wins over its parents'). */
static void take_meta(mp_tcall *c, const mp_tcomm *m, const mp_trace_raw *raw, bool *named) {
    if (!m) return;
    if (m->coll >= 0 && !*named) {
        c->coll = mp_trace_coll_name(raw->names[m->coll], (mp_arena *)&raw->arena);
        *named = true;
    }
    if (m->pg >= 0 && !c->pg) c->pg = raw->names[m->pg];
    if (m->seq >= 0 && c->seq < 0) c->seq = m->seq;
    if (c->elems < 0) c->elems = m->in_elems >= 0 ? m->in_elems : m->out_elems;
    if (c->elems > (INT64_C(1) << 48)) c->elems = -1;   /* absurd: not a message size */
    if (!c->elem_bytes) c->elem_bytes = m->elem_bytes;
}

static mp_tcall new_call(const char *coll, int64_t ts, int64_t end, bool device) {
    mp_tcall c;
    memset(&c, 0, sizeof c);
    c.coll = coll;
    c.ts = ts;
    c.end = end;
    c.elems = -1;
    c.seq = -1;
    c.step = -1;
    c.device = device;
    c.wait = -1;
    c.match = -1;
    return c;
}

mp_status mp__trace_calls(mp_trace *t, const int32_t *devop, const int32_t *parent) {
    mp_trace_raw *raw = &t->raw;
    const char **nm = raw->names;
    int cap = 0;
    t->calls = NULL;
    t->n_calls = 0;
#define ADD_CALL(c)                                                                       \
    do {                                                                                  \
        mp_tcall *nc_ = mp_grow(t->calls, sizeof *t->calls, &cap, t->n_calls + 1);        \
        if (!nc_) return mp_error(MP_ERR_NOMEM, "trace: out of memory");                  \
        t->calls = nc_;                                                                   \
        t->calls[t->n_calls++] = (c);                                                     \
    } while (0)
    /* NCCL: the collective kernels */
    for (size_t d = 0; d < raw->n_devs; d++) {
        const mp_tdev *dv = &raw->devs[d];
        if (dv->kind != MP_TD_KERNEL || !(mp__trace_kflags(raw, dv->name) & MP_TK_COMM)) continue;
        mp_tcall c = new_call(mp_trace_coll_name(nm[dv->name], &raw->arena), dv->ts, dv->end, true);
        if (!c.coll) return mp_error(MP_ERR_NOMEM, "trace: out of memory");
        bool named = false;
        take_meta(&c, comm_of(raw, true, (uint32_t)d), raw, &named);
        for (int32_t o = devop ? devop[d] : -1, k = 0; o >= 0 && k < 64; o = parent[o], k++)
            take_meta(&c, comm_of(raw, false, (uint32_t)o), raw, &named);
        ADD_CALL(c);
    }
    if (t->n_calls == 0) {
        /* host side: annotations, else record_param_comms, else c10d::* */
        for (int pass = 0; pass < 3 && t->n_calls == 0; pass++)
            for (size_t k = 0; k < raw->n_comms; k++) {
                const mp_tcomm *m = &raw->comms[k];
                if (m->on_dev) continue;
                const mp_tspan *sp = &raw->spans[m->idx];
                const char *n = nm[sp->name];
                bool take = pass == 0   ? sp->kind == MP_TS_ANNOT && (starts(n, "gloo:") || starts(n, "nccl:"))
                            : pass == 1 ? strcmp(n, "record_param_comms") == 0
                                        : sp->kind == MP_TS_OP && starts(n, "c10d::") &&
                                              !strstr(n, "wait");
                if (!take) continue;
                mp_tcall c = new_call(mp_trace_coll_name(n, &raw->arena), sp->ts, sp->end, false);
                if (!c.coll) return mp_error(MP_ERR_NOMEM, "trace: out of memory");
                bool named = false;
                take_meta(&c, m, raw, &named);
                ADD_CALL(c);
            }
    }
#undef ADD_CALL
    if (t->n_calls > 1) qsort(t->calls, (size_t)t->n_calls, sizeof *t->calls, call_cmp);
    return MP_OK;
}

static int64_t cmp_i64(int64_t a, int64_t b) { return (a > b) - (a < b); }

static int i64_cmp(const void *x, const void *y) {
    return (int)cmp_i64(*(const int64_t *)x, *(const int64_t *)y);
}

typedef struct rng {   /* a user range, for the segments */
    int64_t a, b;
    const char *name;
} rng;

static int rng_cmp(const void *x, const void *y) {
    const rng *a = x, *b = y;
    return (int)cmp_i64(a->a, b->a);
}

/* The device's compute (every device event but the collective kernels)
 * over the steps' window, for timelines and the job's waits: gaps shorter than the window / MP_TIMELINE are closed, so at most about
 * MP_TIMELINE intervals remain whatever the trace's size. */
static mp_status timeline(mp_trace *t, const ival *u, size_t nu) {
    t->timeline = NULL;
    t->n_timeline = 0;
    if (!t->n_steps || !nu) return MP_OK;
    int64_t a = t->steps[0].ts, b = a;
    for (int k = 0; k < t->n_steps; k++) b = MP_MAX(b, t->steps[k].ts + t->steps[k].wall);
    int64_t gap = (b - a) / MP_TIMELINE;
    int cap = 0;
    for (size_t i = ival_after(u, nu, a); i < nu && u[i].a < b; i++) {
        int64_t x = MP_MAX(u[i].a, a), y = MP_MIN(u[i].b, b);
        if (t->n_timeline && x - t->timeline[t->n_timeline - 1].b <= gap) {
            t->timeline[t->n_timeline - 1].b = y;
            continue;
        }
        struct mp_tival *nt = mp_grow(t->timeline, sizeof *t->timeline, &cap, t->n_timeline + 1);
        if (!nt) return mp_error(MP_ERR_NOMEM, "trace: out of memory");
        t->timeline = nt;
        t->timeline[t->n_timeline++] = (struct mp_tival){x, y};
    }
    return MP_OK;
}

mp_status mp__trace_comm_steps(mp_trace *t) {
    mp_trace_raw *raw = &t->raw;
    const char **nm = raw->names;
    size_t D = raw->n_devs, S = raw->n_spans;
    int nc = t->n_calls;
    t->comm_total = t->comm_overlap_total = 0;
    /* compute on the device: every device event but the collective kernels */
    /* loader calls and user ranges: counted, then kept (few of the spans) */
    size_t nld = 0, nrg = 0;
    for (size_t i = 0; nc && i < S; i++) {
        const mp_tspan *sp = &raw->spans[i];
        const char *n = nm[sp->name];
        nld += (sp->kind == MP_TS_ANNOT || sp->kind == MP_TS_OP) && mp__trace_loader(n);
        nrg += sp->kind == MP_TS_ANNOT && mp__trace_user_range(n);
    }
    ival *cu = malloc((D + 1) * sizeof *cu), *cc = malloc(((size_t)nc + 1) * sizeof *cc);
    ival *ld = malloc((nld + 1) * sizeof *ld);
    int64_t *ends = malloc(((size_t)nc + 1) * sizeof *ends);
    rng *rg = malloc((nrg + 1) * sizeof *rg);
    mp_status st = MP_OK;
    if (!cu || !cc || !ld || !ends || !rg) {
        st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
        goto out;
    }
    size_t ncu = 0;
    nld = nrg = 0;
    for (size_t d = 0; d < D; d++) {
        const mp_tdev *dv = &raw->devs[d];
        if (dv->kind == MP_TD_ANNOT ||
            (dv->kind == MP_TD_KERNEL && (mp__trace_kflags(raw, dv->name) & MP_TK_COMM)))
            continue;
        cu[ncu++] = (ival){dv->ts, dv->end, (int32_t)d};
    }
    if (ncu > 1) qsort(cu, ncu, sizeof *cu, ival_cmp);
    ncu = merge_ivals(cu, ncu);
    if ((st = timeline(t, cu, ncu)) != MP_OK || nc == 0) goto out;
    int64_t maxr = 0;
    for (size_t i = 0; i < S; i++) {
        const mp_tspan *sp = &raw->spans[i];
        const char *n = nm[sp->name];
        if ((sp->kind == MP_TS_ANNOT || sp->kind == MP_TS_OP) && mp__trace_loader(n))
            ld[nld++] = (ival){sp->ts, sp->end, (int32_t)i};
        if (sp->kind == MP_TS_ANNOT && mp__trace_user_range(n)) {
            rg[nrg++] = (rng){sp->ts, sp->end, n};
            maxr = MP_MAX(maxr, sp->end - sp->ts);
        }
    }
    if (nld > 1) qsort(ld, nld, sizeof *ld, ival_cmp);
    nld = merge_ivals(ld, nld);
    if (nrg > 1) qsort(rg, nrg, sizeof *rg, rng_cmp);
    for (int i = 0; i < nc; i++) {
        cc[i] = (ival){t->calls[i].ts, t->calls[i].end, i};
        ends[i] = t->calls[i].end;
    }
    qsort(cc, (size_t)nc, sizeof *cc, ival_cmp);
    size_t ncc = merge_ivals(cc, (size_t)nc);
    qsort(ends, (size_t)nc, sizeof *ends, i64_cmp);
    int64_t first_step = t->n_steps ? t->steps[0].ts : INT64_MIN;
    for (int i = 0; i < nc; i++) {
        mp_tcall *c = &t->calls[i];
        c->step = mp__trace_step_at(t, c->ts);
        if (c->step >= 0) t->steps[c->step].n_calls++;
        /* the device's leading time alone in a collective kernel */
        if (c->device) {
            size_t j = ival_after(cu, ncu, c->ts);
            c->solo = j < ncu && cu[j].a <= c->ts ? 0 : (j < ncu ? MP_MIN(cu[j].a, c->end) : c->end) - c->ts;
        }
        /* the segment: from the latest end of a call before it */
        size_t lo = 0, hi = (size_t)nc;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (ends[mid] <= c->ts) lo = mid + 1;
            else hi = mid;
        }
        int64_t s0 = lo ? ends[lo - 1] : c->step >= 0 ? t->steps[c->step].ts : first_step;
        if (s0 == INT64_MIN || s0 > c->ts) s0 = c->ts;
        c->seg_start = s0;
        c->seg_busy = ival_overlap(cu, ncu, s0, c->ts);
        c->seg_loader = ival_overlap(ld, nld, s0, c->ts);
        /* the user ranges in it, by name (the three largest) */
        size_t r0 = 0, r1 = nrg;
        while (r0 < r1) {   /* first range starting at or after s0 - longest */
            size_t mid = r0 + (r1 - r0) / 2;
            if (rg[mid].a < s0 - maxr) r0 = mid + 1;
            else r1 = mid;
        }
        for (size_t r = r0; r < nrg && rg[r].a < c->ts; r++) {
            int64_t ov = overlap(rg[r].a, rg[r].b, s0, c->ts);
            if (!ov) continue;
            int slot = -1, small = 0;
            for (int q = 0; q < MP_TCALL_RANGES && slot < 0; q++)
                if (c->range[q].name == rg[r].name || !c->range[q].name) slot = q;
            if (slot < 0) {   /* all taken by other names: the smallest gives way */
                for (int q = 1; q < MP_TCALL_RANGES; q++)
                    if (c->range[q].ns < c->range[small].ns) small = q;
                if (c->range[small].ns >= ov) continue;
                slot = small;
                c->range[slot].ns = 0;
            }
            c->range[slot].name = rg[r].name;
            c->range[slot].ns += ov;
        }
    }
    for (int k = 0; k < t->n_steps; k++) {
        mp_tstep *s = &t->steps[k];
        s->comm = ival_overlap(cc, ncc, s->ts, s->ts + s->wall);
        s->comm_overlap = ival_common(cc, ncc, cu, ncu, s->ts, s->ts + s->wall);
        MP_SADD(t->comm_total, s->comm);
        MP_SADD(t->comm_overlap_total, s->comm_overlap);
    }
out:
    free(cu);
    free(cc);
    free(ld);
    free(ends);
    free(rg);
    return st;
}
