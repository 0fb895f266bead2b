/* The ranks of one job (trace.h mp_tjob): collectives matched across ranks,
 * arrivals and waits, the critical rank of each step, stragglers and their
 * causes, and the what-if of Lin et al., "Understanding Stragglers in Large
 * Model Training Using What-if Analysis" (OSDI '25): the job's time had a
 * rank run like the median rank.
 *
 * Model (docs/DESIGN.md "Multi-rank jobs"). Ranks meet only at
 * collectives. A call arrives when it starts (an NCCL kernel on the device,
 * a gloo call on the host) and ends for all participants once the last has
 * arrived and the transfer is done, so
 *  - a rank's wait at a call is the last arrival minus its own;
 *  - a rank's lateness at a call is its arrival minus the median arrival of
 *    the other participants (positive only): the interval [median of the
 *    others, own arrival] on the job's clock. A rank's lateness in a step is
 *    the length of the union of its intervals in that step (concurrent
 *    calls count once);
 *  - had the last arriver run like the median rank, the call would have
 *    started at the second-last arrival: the interval [second-last, last]
 *    is the time the job lost to that rank alone (the what-if). Every call
 *    is taken to hold up what follows it on every rank, as a blocking
 *    collective does.
 * The clocks: each trace's times plus its baseTimeNanoseconds, so traces
 * written on different hosts compare on the wall clock; each rank's skew
 * (the median of its calls' end minus the median end of the call) is
 * reported as a check. */
#include "trace/trace.h"

#include <stdlib.h>

/* ---- a key -> collective map (open addressing over 64-bit hashes) ---- */

typedef struct coll {
    /* the key (from its first call) */
    const char *step, *pg, *name;
    int64_t elems;
    int32_t seq, ordinal;
    uint64_t hash;
    /* the participants: (rank, call) pairs at part[first .. first + n) */
    int n, first, fill;
    int64_t last, second, median_end;
    int last_rank;                  /* index into ranks */
} coll;

static uint64_t h_mix(uint64_t h, uint64_t v) {
    h ^= v + UINT64_C(0x9e3779b97f4a7c15) + (h << 6) + (h >> 2);
    h *= UINT64_C(0xff51afd7ed558ccd);
    return h ^ (h >> 29);
}

static uint64_t h_str(uint64_t h, const char *s) {
    uint64_t x = UINT64_C(1469598103934665603);
    for (; s && *s; s++) x = (x ^ (unsigned char)*s) * UINT64_C(1099511628211);
    return h_mix(h, s ? x : 7);
}

static bool str_eq(const char *a, const char *b) {
    return a == b || (a && b && strcmp(a, b) == 0);
}

typedef struct ordent {   /* a call's ordinal among the same calls of its step */
    int64_t id;               /* the step run it belongs to; 0 empty */
    uint64_t hash;
    const char *pg, *coll;
    int64_t elems;
    int count;
} ordent;

typedef struct cmap {
    int32_t *slot;   /* collective index; -1 empty */
    size_t mask;
} cmap;

/* ---- helpers ---- */

static int i64_cmp(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* The median of a sorted array without its element i (n >= 2). */
static int64_t median_without(const int64_t *x, int n, int i) {
    int m = n - 1;
    int lo = (m - 1) / 2, hi = m / 2;
    int64_t a = x[lo >= i ? lo + 1 : lo], b = x[hi >= i ? hi + 1 : hi];
    return a + (b - a) / 2;
}

static int64_t median_sorted(const int64_t *x, int n) {
    return n ? x[(n - 1) / 2] + (x[n / 2] - x[(n - 1) / 2]) / 2 : 0;
}

typedef struct iv {   /* an interval of one rank in one job step */
    int32_t rank, step, coll, call;
    int64_t a, b;
    int32_t ref;      /* the rank whose idle time it is measured on */
    int64_t len0;     /* a piece: the length of the interval it came from */
} iv;

static int iv_cmp(const void *x, const void *y) {
    const iv *p = x, *q = y;
    if (p->rank != q->rank) return p->rank - q->rank;
    if (p->step != q->step) return p->step - q->step;
    return (p->a > q->a) - (p->a < q->a);
}

static int rank_cmp(const void *x, const void *y) {
    const mp_tjob_rank *a = x, *b = y;
    return a->rank - b->rank;
}

/* The causes a late arrival is weighed against: the rank's own ranges
 * (record_function), the data loader, compute on its device, and host time
 * nothing recorded explains. */
enum { CK_RANGE, CK_LOADER, CK_COMPUTE, CK_HOST };
static const char *const cause_kinds[] = {"range", "data_loader", "compute", "host"};

typedef struct cacc {   /* causes accumulated: excess ns by key */
    struct { int kind; const char *name; int64_t ns, own; } e[16];   /* excess, own time */
    int n;
    int64_t seg;      /* the segment's excess (how much later it arrived) */
} cacc;

static void cacc_add(cacc *a, int kind, const char *name, int64_t ns, int64_t own) {
    for (int i = 0; i < a->n; i++)
        if (a->e[i].kind == kind && str_eq(a->e[i].name, name)) {
            a->e[i].ns += ns;
            a->e[i].own += own;
            return;
        }
    if (a->n < (int)MP_ARRAY_LEN(a->e)) {
        a->e[a->n].kind = kind;
        a->e[a->n].name = name;
        a->e[a->n].ns = ns;
        a->e[a->n].own = own;
        a->n++;
    }
}

typedef struct job_ctx {
    mp_trace *const *t;
    mp_tjob *job;
    coll *cl;
    int ncl;
    int32_t (*part)[2];   /* (rank index, call index) */
} job_ctx;

static const mp_tcall *call_of(const job_ctx *x, int r, int c) {
    return &x->t[x->job->ranks[r].index]->calls[c];
}

/* A call's segment item: 0 range (by name), 1 loader, 2 compute, 3 length. */
static int64_t seg_item(const mp_tcall *c, int kind, const char *name) {
    if (kind == CK_LOADER) return c->seg_loader;
    if (kind == CK_COMPUTE) return c->seg_busy;
    if (kind == CK_HOST) return c->ts - c->seg_start;
    for (int q = 0; q < MP_TCALL_RANGES; q++)
        if (c->range[q].name && strcmp(c->range[q].name, name) == 0) return c->range[q].ns;
    return 0;
}

/* What rank r did more than the median of the other participants before
 * arriving at collective k, weighted by w (the share of its lateness there
 * that is new). */
static void weigh(const job_ctx *x, int k, int r, int rc, double w, cacc *acc) {
    const coll *c = &x->cl[k];
    const mp_tcall *me = call_of(x, r, rc);
    int64_t tmp[64];
    int64_t *v = c->n - 1 <= 64 ? tmp : malloc((size_t)(c->n - 1) * sizeof *v);
    if (!v) return;
    struct { int kind; const char *name; } items[MP_TCALL_RANGES + 3];
    int ni = 0;
    for (int q = 0; q < MP_TCALL_RANGES; q++)
        if (me->range[q].name) items[ni++] = (__typeof__(items[0])){CK_RANGE, me->range[q].name};
    items[ni++] = (__typeof__(items[0])){CK_LOADER, NULL};
    items[ni++] = (__typeof__(items[0])){CK_COMPUTE, NULL};
    items[ni++] = (__typeof__(items[0])){CK_HOST, NULL};
    for (int it = 0; it < ni; it++) {
        int m = 0;
        for (int p = 0; p < c->n; p++) {
            int pr = x->part[c->first + p][0], pc = x->part[c->first + p][1];
            if (pr == r) continue;
            v[m++] = seg_item(call_of(x, pr, pc), items[it].kind, items[it].name);
        }
        qsort(v, (size_t)m, sizeof *v, i64_cmp);
        int64_t mine = seg_item(me, items[it].kind, items[it].name);
        int64_t ex = mine - median_sorted(v, m);
        if (items[it].kind == CK_HOST) acc->seg += (int64_t)((double)ex * w);
        else if (ex > 0)
            cacc_add(acc, items[it].kind, items[it].name, (int64_t)((double)ex * w),
                     (int64_t)((double)mine * w));
    }
    if (v != tmp) free(v);
}

/* The cause in plain words from what was accumulated over `steps` steps. */
static const char *cause_words(const cacc *a, int steps, char *out, size_t n) {
    int best = -1;
    for (int i = 0; i < a->n; i++)
        if (best < 0 || a->e[i].ns > a->e[best].ns) best = i;
    double per = steps > 0 ? 1.0 / steps : 1;
    int64_t seg = a->seg > 0 ? a->seg : 0;
    if (best >= 0 && a->e[best].ns * 2 >= seg && a->e[best].ns > 0) {
        double v = (double)a->e[best].ns * per / 1e6, own = (double)a->e[best].own * per / 1e6;
        switch (a->e[best].kind) {
        case CK_RANGE:   /* its own time first: the figure the user can find in the trace */
            snprintf(out, n, "its `%s` range (record_function): %.1f ms %s, %.1f ms more than the "
                             "median rank's, before arriving", a->e[best].name, own,
                     steps > 1 ? "a step" : "in the step", v);
            break;
        case CK_LOADER:
            snprintf(out, n, "the data loader: its host spent %.1f ms a step more in it than the "
                             "median rank before arriving", v);
            break;
        default:
            snprintf(out, n, "compute: its device was busy %.1f ms a step longer than the median "
                             "rank's before arriving (more work, or a slower device)", v);
            break;
        }
        return cause_kinds[a->e[best].kind];
    }
    if (seg <= 0) {
        out[0] = 0;
        return NULL;
    }
    snprintf(out, n, "host overhead: its host took %.1f ms a step longer than the median rank "
                     "before arriving, in no recorded range, data loader or device work",
             (double)seg * per / 1e6);
    return cause_kinds[CK_HOST];
}

/* The pieces of each interval during which its reference rank's device did
 * no compute: the time the others really sat idle waiting (an early
 * arrival at an asynchronous collective, while the device still computes,
 * costs nothing). A rank without device rows idles throughout. NULL when
 * out of memory. */
static iv *idle_pieces(const job_ctx *x, const iv *v, size_t n, size_t *np) {
    size_t cap = n + 16, k = 0;
    iv *o = malloc(cap * sizeof *o);
    if (!o) return NULL;
#define PIECE(lo, hi)                                                \
    do {                                                             \
        if (k == cap) {                                              \
            cap *= 2;                                                \
            iv *no_ = realloc(o, cap * sizeof *o);                   \
            if (!no_) {                                              \
                free(o);                                             \
                return NULL;                                         \
            }                                                        \
            o = no_;                                                 \
        }                                                            \
        o[k] = v[i];                                                 \
        o[k].a = (lo);                                               \
        o[k].b = (hi);                                               \
        o[k].len0 = v[i].len0 > 0 ? v[i].len0 : v[i].b - v[i].a;    \
        k++;                                                         \
    } while (0)
    for (size_t i = 0; i < n; i++) {
        if (v[i].b <= v[i].a) continue;
        const mp_tjob_rank *q = &x->job->ranks[v[i].ref];
        const mp_trace *tq = x->t[q->index];
        if (tq->no_device) {
            PIECE(v[i].a, v[i].b);
            continue;
        }
        const struct mp_tival *tl = tq->timeline;
        int ntl = tq->n_timeline, lo = 0, hi = ntl;
        while (lo < hi) {   /* the first busy interval ending after a */
            int mid = lo + (hi - lo) / 2;
            if (tl[mid].b + q->clock <= v[i].a) lo = mid + 1;
            else hi = mid;
        }
        int64_t cur = v[i].a;
        for (int j = lo; j < ntl && tl[j].a + q->clock < v[i].b; j++) {
            int64_t ba = tl[j].a + q->clock, bb = tl[j].b + q->clock;
            if (ba > cur) PIECE(cur, ba);
            cur = MP_MAX(cur, bb);
        }
        if (cur < v[i].b) PIECE(cur, v[i].b);
    }
#undef PIECE
    *np = k;
    return o;
}

static int iv_end_cmp(const void *x, const void *y) {
    const iv *p = x, *q = y;
    if (p->rank != q->rank) return p->rank - q->rank;
    if (p->step != q->step) return p->step - q->step;
    if (p->b != q->b) return (p->b > q->b) - (p->b < q->b);
    return (p->a < q->a) - (p->a > q->a);
}

/* Intervals [arrival - how late, arrival] of one rank (or the job) per
 * step become what each adds to the most it was late so far in the step:
 * [arrival - (how late - most so far), arrival], empty when no more. A
 * rank late at a broadcast and as late at the all-reduce after it (no call
 * between made it catch up) is late once, not twice; one that falls
 * further behind adds the difference. */
static void new_part(iv *v, size_t n) {
    qsort(v, n, sizeof *v, iv_end_cmp);
    int64_t most = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || v[i].rank != v[i - 1].rank || v[i].step != v[i - 1].step) most = 0;
        int64_t l = v[i].b - v[i].a;
        v[i].len0 = l;   /* the causes are weighed by the share of it that is new */
        if (l > most) {
            v[i].a = v[i].b - (l - most);
            most = l;
        } else {
            v[i].a = v[i].b;
        }
    }
}

/* ---- the analysis ---- */

static mp_status nomem(void) { return mp_error(MP_ERR_NOMEM, "job analysis: out of memory"); }

/* The clocks, aligned at the collectives' ends. A call ends for every
 * participant once the last has arrived and the transfer is done, so on
 * clocks that agree its ends lie within its transfer: the shortest of its
 * participants' calls (the last arriver waits for nobody). A rank whose
 * ends are off the others' (the median over its matched calls of its end
 * minus the call's median end) by more than the median of its calls'
 * transfers is on another clock: baseTimeNanoseconds did not account for
 * the hosts' difference. Then every rank's clock moves by its offset, again
 * until the offsets are under 2 ns (ranks in several groups
 * settle together), and the shifts are taken about their median rank's
 * (most clocks are right). Clocks within their transfers are left as they
 * are. Returns false when out of memory. */
static bool align_clocks(job_ctx *x, int n) {
    mp_tjob *job = x->job;
    bool moved = false;
    size_t total = 0;
    for (int r = 0; r < n; r++) total += (size_t)x->t[job->ranks[r].index]->n_calls;
    int64_t *off = malloc((total + 1) * sizeof *off), *xfer = malloc((total + 1) * sizeof *xfer);
    int64_t *me = malloc(((size_t)x->ncl + 1) * sizeof *me), *tmp = malloc(((size_t)n + 1) * sizeof *tmp);
    int64_t *tr = malloc(((size_t)x->ncl + 1) * sizeof *tr);   /* per call: its transfer */
    int64_t *shift = calloc((size_t)n + 1, sizeof *shift), *at = malloc(((size_t)n + 1) * sizeof *at);
    int *cnt = calloc((size_t)n + 1, sizeof *cnt);
    int64_t *thr = calloc((size_t)n + 1, sizeof *thr);   /* per rank: its transfers' median */
    bool ok = off && xfer && me && tmp && tr && shift && at && cnt && thr;
    for (int it = 0; ok && it < 64; it++) {
        /* each call's median end, and its transfer */
        for (int k = 0; k < x->ncl; k++) {
            coll *c = &x->cl[k];
            if (c->n < 2 || c->n > n) continue;
            int64_t shortest = INT64_MAX;
            for (int p = 0; p < c->n; p++) {
                int r = x->part[c->first + p][0];
                const mp_tcall *cl = call_of(x, r, x->part[c->first + p][1]);
                tmp[p] = cl->end + job->ranks[r].clock;
                shortest = MP_MIN(shortest, cl->end - cl->ts);
            }
            qsort(tmp, (size_t)c->n, sizeof *tmp, i64_cmp);
            me[k] = median_sorted(tmp, c->n);
            tr[k] = shortest;
        }
        /* each rank's offsets, grouped by rank */
        at[0] = 0;
        for (int r = 0; r < n; r++) at[r + 1] = at[r] + x->t[job->ranks[r].index]->n_calls;
        memset(cnt, 0, (size_t)n * sizeof *cnt);
        for (int k = 0; k < x->ncl; k++) {
            coll *c = &x->cl[k];
            if (c->n < 2 || c->n > n) continue;
            for (int p = 0; p < c->n; p++) {
                int r = x->part[c->first + p][0];
                const mp_tcall *cl = call_of(x, r, x->part[c->first + p][1]);
                off[at[r] + cnt[r]] = cl->end + job->ranks[r].clock - me[k];
                xfer[at[r] + cnt[r]] = tr[k];
                cnt[r]++;
            }
        }
        bool off_clock = false;
        int64_t worst = 0;
        for (int r = 0; r < n; r++) {
            if (!cnt[r]) {
                tmp[r] = 0;
                continue;
            }
            qsort(off + at[r], (size_t)cnt[r], sizeof *off, i64_cmp);
            qsort(xfer + at[r], (size_t)cnt[r], sizeof *xfer, i64_cmp);
            tmp[r] = median_sorted(off + at[r], cnt[r]);
            int64_t a = tmp[r] < 0 ? -tmp[r] : tmp[r];
            if (it == 0) thr[r] = median_sorted(xfer + at[r], cnt[r]);
            if (a > thr[r]) off_clock = true;
            worst = MP_MAX(worst, a);
        }
        if (it == 0 && !off_clock) break;   /* on one clock: left as they are */
        if (worst < 2) break;
        for (int r = 0; r < n; r++) {
            job->ranks[r].clock -= tmp[r];
            shift[r] -= tmp[r];
        }
        moved = true;
    }
    if (ok && moved) {
        memcpy(tmp, shift, (size_t)n * sizeof *tmp);
        qsort(tmp, (size_t)n, sizeof *tmp, i64_cmp);
        int64_t mid = tmp[(n - 1) / 2];
        for (int r = 0; r < n; r++) {
            /* a move within the rank's transfers is no clock's: undone */
            int64_t sh = shift[r] - mid, a = sh < 0 ? -sh : sh;
            job->ranks[r].clock -= a <= thr[r] ? shift[r] : mid;
            job->ranks[r].shift = a <= thr[r] ? 0 : sh;
        }
    }
    free(off);
    free(xfer);
    free(me);
    free(tr);
    free(tmp);
    free(shift);
    free(at);
    free(cnt);
    free(thr);
    return ok;
}

/* What makes the job's figures unreliable, or what was done about it, said
 * once (job->warning):
 *  - ranks whose clocks align_clocks moved, and by how much;
 *  - ranks of distributedInfo's world_size without a trace here (one of
 *    them may be the rank the others waited for);
 *  - a rank whose clock is off the others' by more than half the median
 *    step at the collectives they share (its skew): calls of one step
 *    cannot end that far apart, so its times are not on the job's clock
 *    (baseTimeNanoseconds does not account for it) and the lateness and
 *    what-if across ranks mean nothing. */
static void job_warnings(mp_trace *const *t, int n, mp_tjob *job) {
    size_t l = 0;
    job->warning[0] = 0;
    int world = n > 0 ? t[job->ranks[0].index]->raw.world_size : -1;
    if (world > n && world <= 1 << 20) {
        int shown = 0, missing = world - n;
        l += (size_t)snprintf(job->warning + l, sizeof job->warning - l, "world_size is %d, and %d rank%s no trace here (",
                              world, missing, missing == 1 ? " has" : "s have");
        for (int r = 0, k = 0; r < world && shown < 8 && l + 16 < sizeof job->warning; r++) {
            while (k < job->n_ranks && job->ranks[k].rank < r) k++;
            if (k < job->n_ranks && job->ranks[k].rank == r) continue;
            l += (size_t)snprintf(job->warning + l, sizeof job->warning - l, "%s%d", shown ? ", " : "rank ", r);
            shown++;
        }
        l += (size_t)snprintf(job->warning + l, sizeof job->warning - l, "%s): the others' waits for %s are "
                              "seen, not %s lateness or its cause. ",
                              missing > shown ? ", ..." : "", missing == 1 ? "it" : "them", missing == 1 ? "its" : "their");
    }
    int moved = 0;
    for (int r = 0; r < job->n_ranks && l + 240 < sizeof job->warning; r++) {
        int64_t sh = job->ranks[r].shift;
        if (!sh) continue;
        if (!moved++)
            l += (size_t)snprintf(job->warning + l, sizeof job->warning - l,
                                  "Clocks off the others' at the collectives they share by more than their "
                                  "transfers take, aligned at the collectives' ends (baseTimeNanoseconds did not "
                                  "account for it): ");
        l += (size_t)snprintf(job->warning + l, sizeof job->warning - l, "%srank %d moved %+.6g s", moved > 1 ? ", " : "",
                              job->ranks[r].rank, (double)sh / 1e9);
    }
    if (moved && l + 2 < sizeof job->warning) l += (size_t)snprintf(job->warning + l, sizeof job->warning - l, ". ");
    int64_t med = job->median_step;
    int off = 0;
    for (int r = 0; r < job->n_ranks && med > 0 && l + 240 < sizeof job->warning; r++) {
        /* what the alignment could not settle (groups whose ends disagree) */
        int64_t sk = job->ranks[r].skew + job->ranks[r].shift, a = sk < 0 ? -sk : sk;
        if (a * 2 <= med) continue;
        if (!off++)
            l += (size_t)snprintf(job->warning + l, sizeof job->warning - l,
                                  "Clocks off the others' at the collectives they share by more than half a "
                                  "step (%.6g s): ",
                                  (double)med / 1e9);
        l += (size_t)snprintf(job->warning + l, sizeof job->warning - l, "%srank %d %.6g s", off > 1 ? ", " : "",
                              job->ranks[r].rank, (double)sk / 1e9);
    }
    if (off && l + 200 < sizeof job->warning)
        l += (size_t)snprintf(job->warning + l, sizeof job->warning - l,
                              "; %s times are not on the job's clock (baseTimeNanoseconds does not account "
                              "for it), so lateness, waits and the what-if across ranks are not reliable.",
                              off > 1 ? "their traces'" : "its trace's");
    while (l > 0 && job->warning[l - 1] == ' ') job->warning[--l] = 0;
}

mp_status mp_trace_job(mp_trace *const *t, int n, mp_tjob *job) {
    memset(job, 0, sizeof *job);
    job->one_run = n >= 2 && mp_trace_one_run((const mp_trace *const *)t, n, job->why, sizeof job->why);
    if (!job->one_run) return MP_OK;
    mp_status st = MP_OK;
    job_ctx x = {t, job, NULL, 0, NULL};
    int **smap = NULL;     /* per rank: its step -> job step */
    int64_t **adj = NULL;  /* per rank and call: its arrival less its earlier waits in the step */
    iv *late = NULL, *save = NULL;
    cmap map = {NULL, 0};
    size_t nlate = 0, nsave = 0;
    job->n_ranks = n;
    job->ranks = calloc((size_t)n, sizeof *job->ranks);
    smap = calloc((size_t)n, sizeof *smap);
    adj = calloc((size_t)n, sizeof *adj);
    if (!job->ranks || !smap || !adj) goto oom;
    int64_t base = INT64_MAX;
    bool bases = true;
    for (int i = 0; i < n; i++) {
        job->ranks[i].index = i;
        job->ranks[i].rank = t[i]->raw.rank;
        if (t[i]->raw.base_ns <= 0) bases = false;
        base = MP_MIN(base, t[i]->raw.base_ns);
    }
    qsort(job->ranks, (size_t)n, sizeof *job->ranks, rank_cmp);
    for (int r = 0; r < n; r++) {
        mp_tjob_rank *jr = &job->ranks[r];
        jr->clock = bases ? t[jr->index]->raw.base_ns - base : 0;
        jr->n_calls = t[jr->index]->n_calls;
    }
    /* the job's steps: by name, in the first rank's order, then any other */
    int capst = 0;
    for (int r = 0; r < n; r++) {
        const mp_trace *tr = t[job->ranks[r].index];
        smap[r] = malloc(((size_t)tr->n_steps + 1) * sizeof **smap);
        if (!smap[r]) goto oom;
        for (int k = 0; k < tr->n_steps; k++) {
            int s = 0;
            while (s < job->n_steps && !str_eq(job->steps[s].name, tr->steps[k].name)) s++;
            if (s == job->n_steps) {
                mp_tjob_step *ns = mp_grow(job->steps, sizeof *job->steps, &capst, s + 1);
                if (!ns) goto oom;
                job->steps = ns;
                memset(&job->steps[s], 0, sizeof job->steps[s]);
                job->steps[s].name = tr->steps[k].name;
                job->steps[s].critical = -1;
                job->n_steps++;
            }
            smap[r][k] = s;
            job->steps[s].wall = MP_MAX(job->steps[s].wall, tr->steps[k].wall);
        }
    }
    for (int s = 0; s < job->n_steps; s++) {
        job->steps[s].late = calloc((size_t)n, sizeof *job->steps[s].late);
        if (!job->steps[s].late) goto oom;
        MP_SADD(job->wall, job->steps[s].wall);
    }
    /* ---- matching ---- */
    size_t total = 0;
    bool seq = true;
    for (int r = 0; r < n; r++) {
        const mp_trace *tr = t[job->ranks[r].index];
        total += (size_t)tr->n_calls;
        for (int c = 0; c < tr->n_calls; c++)
            if (tr->calls[c].seq < 0) seq = false;
    }
    if (total == 0) goto whatif;
    job->match_by = seq ? "sequence number" : "order";
    size_t cap = 16;
    while (cap < 2 * total) cap *= 2;
    map.slot = malloc(cap * sizeof *map.slot);
    int32_t *cid = malloc((total + 1) * sizeof *cid);   /* per call, rank by rank */
    if (!map.slot || !cid) {
        free(cid);
        goto oom;
    }
    memset(map.slot, 0xff, cap * sizeof *map.slot);
    map.mask = cap - 1;
    int capcl = 0;
    size_t at = 0;
    /* ordinals: a map of (group, collective, size) -> count, per step run */
    int maxc = 0;
    for (int r = 0; r < n; r++) maxc = MP_MAX(maxc, t[r]->n_calls);
    size_t ordmask = 15;
    while (ordmask + 1 < 2 * (size_t)maxc) ordmask = ordmask * 2 + 1;
    ordent *ord = calloc(ordmask + 1, sizeof *ord);
    if (!ord) {
        free(cid);
        goto oom;
    }
    int64_t run_id = 0;
    for (int r = 0; r < n; r++) {
        mp_trace *tr = t[job->ranks[r].index];
        int run_step = INT32_MIN;
        for (int c = 0; c < tr->n_calls; c++, at++) {
            mp_tcall *cl = &tr->calls[c];
            cl->wait = -1;
            cl->match = -1;
            cid[at] = -1;
            const char *step = cl->step >= 0 ? tr->steps[cl->step].name : NULL;
            if (!seq && !step) continue;   /* matched by order within a step only */
            coll key = {0};
            key.step = seq ? NULL : step;
            key.pg = cl->pg;
            key.name = cl->coll;
            key.elems = seq ? -1 : cl->elems;
            key.seq = seq ? cl->seq : -1;
            key.ordinal = 0;
            if (!seq) {   /* its ordinal among the same calls of this step before it */
                if (cl->step != run_step) {   /* a step's calls are contiguous (time order) */
                    run_step = cl->step;
                    run_id++;
                }
                uint64_t oh = h_mix(h_str(h_str(0, cl->pg), cl->coll), (uint64_t)cl->elems);
                size_t q = oh & ordmask;
                while (ord[q].id == run_id && !(ord[q].hash == oh && str_eq(ord[q].pg, cl->pg) &&
                                                 str_eq(ord[q].coll, cl->coll) && ord[q].elems == cl->elems))
                    q = (q + 1) & ordmask;
                if (ord[q].id != run_id) ord[q] = (ordent){run_id, oh, cl->pg, cl->coll, cl->elems, 0};
                key.ordinal = ord[q].count++;
            }
            uint64_t h = h_str(h_str(h_str(0, key.step), key.pg), key.name);
            h = h_mix(h_mix(h_mix(h, (uint64_t)key.elems), (uint64_t)(uint32_t)key.seq),
                      (uint64_t)(uint32_t)key.ordinal);
            key.hash = h;
            size_t i = h & map.mask;
            int32_t found = -1;
            while (map.slot[i] >= 0) {
                const coll *o = &x.cl[map.slot[i]];
                if (o->hash == h && str_eq(o->step, key.step) && str_eq(o->pg, key.pg) &&
                    str_eq(o->name, key.name) && o->elems == key.elems && o->seq == key.seq &&
                    o->ordinal == key.ordinal) {
                    found = map.slot[i];
                    break;
                }
                i = (i + 1) & map.mask;
            }
            if (found < 0) {
                coll *nc = mp_grow(x.cl, sizeof *x.cl, &capcl, x.ncl + 1);
                if (!nc) {
                    free(cid);
                    free(ord);
                    goto oom;
                }
                x.cl = nc;
                found = x.ncl++;
                x.cl[found] = key;
                map.slot[i] = found;
            }
            x.cl[found].n++;
            cid[at] = found;
        }
    }
    free(ord);
    /* participants, collective by collective */
    x.part = malloc((total + 1) * sizeof *x.part);
    if (!x.part) {
        free(cid);
        goto oom;
    }
    int off = 0;
    for (int k = 0; k < x.ncl; k++) {
        x.cl[k].first = off;
        off += x.cl[k].n;
    }
    at = 0;
    for (int r = 0; r < n; r++) {
        const mp_trace *tr = t[job->ranks[r].index];
        for (int c = 0; c < tr->n_calls; c++, at++) {
            if (cid[at] < 0) continue;
            coll *k = &x.cl[cid[at]];
            x.part[k->first + k->fill][0] = r;
            x.part[k->first + k->fill][1] = c;
            k->fill++;
        }
    }
    free(cid);
    /* ---- the clocks ---- */
    if (!align_clocks(&x, n)) goto oom;
    /* ---- arrivals, waits, lateness ---- */
    int64_t *arr = malloc(((size_t)n + 1) * sizeof *arr), *ends = malloc(((size_t)n + 1) * sizeof *ends);
    late = malloc((total + 1) * sizeof *late);
    save = malloc((x.ncl + 1) * sizeof *save);
    if (!arr || !ends || !late || !save) {
        free(arr);
        free(ends);
        goto oom;
    }
    /* first the last arrival of each collective and every call's wait */
    for (int k = 0; k < x.ncl; k++) {
        coll *c = &x.cl[k];
        if (c->n < 2 || c->n > n) {   /* one rank only, or keys that collide (a rank twice) */
            job->n_unmatched += c->n;
            continue;
        }
        job->n_matched++;
        int last = -1;
        for (int p = 0; p < c->n; p++) {
            int r = x.part[c->first + p][0];
            const mp_tcall *cl = call_of(&x, r, x.part[c->first + p][1]);
            arr[p] = cl->ts + job->ranks[r].clock;
            ends[p] = cl->end + job->ranks[r].clock;
            if (last < 0 || arr[p] > arr[last]) last = p;
        }
        c->last = arr[last];
        c->last_rank = x.part[c->first + last][0];
        int64_t second = INT64_MIN;
        for (int p = 0; p < c->n; p++)
            if (p != last) second = MP_MAX(second, arr[p]);
        c->second = second;
        for (int p = 0; p < c->n; p++) {
            int r = x.part[c->first + p][0], ci = x.part[c->first + p][1];
            mp_tcall *cl = &t[job->ranks[r].index]->calls[ci];
            /* it waits from its arrival until the last arrives, or until
             * its own call ends if that is sooner (a broadcast's root) */
            cl->wait = MP_MAX(MP_MIN(c->last, ends[p]) - arr[p], 0);
            cl->match = k;
            job->ranks[r].n_matched++;
        }
        qsort(ends, (size_t)c->n, sizeof *ends, i64_cmp);
        c->median_end = median_sorted(ends, c->n);
    }
    /* per rank, in time order: its wait (the union of its waiting
     * intervals: concurrent calls wait once) and each call's arrival on the
     * rank's own clock, i.e. less the time it waited inside the step's
     * earlier collectives (not its own lateness: the what-if's logic) */
    for (int r = 0; r < n; r++) {
        const mp_trace *tr = t[job->ranks[r].index];
        adj[r] = malloc(((size_t)tr->n_calls + 1) * sizeof **adj);
        if (!adj[r]) {
            free(arr);
            free(ends);
            goto oom;
        }
        int64_t clk = job->ranks[r].clock;
        int64_t all_a = 0, all_b = INT64_MIN, all_len = 0;   /* the whole trace */
        int64_t st_a = 0, st_b = INT64_MIN, st_len = 0;      /* the step's so far */
        int cur_step = INT32_MIN;
        for (int c = 0; c < tr->n_calls; c++) {   /* calls are in arrival order */
            const mp_tcall *cl = &tr->calls[c];
            int64_t a = cl->ts + clk;
            if (cl->step != cur_step) {
                cur_step = cl->step;
                st_b = INT64_MIN;
                st_len = 0;
            }
            int64_t w_before = st_len + (st_b > INT64_MIN ? MP_MAX(MP_MIN(st_b, a) - st_a, 0) : 0);
            adj[r][c] = a - (cur_step >= 0 ? w_before : 0);
            if (cl->match < 0 || cl->wait <= 0) continue;
            int64_t b = a + cl->wait;
#define IV_UNION(A, B, LEN)                       \
            do {                                  \
                if ((B) > INT64_MIN && a <= (B)) {\
                    (B) = MP_MAX((B), b);         \
                } else {                          \
                    if ((B) > INT64_MIN) (LEN) += (B) - (A); \
                    (A) = a;                      \
                    (B) = b;                      \
                }                                 \
            } while (0)
            IV_UNION(all_a, all_b, all_len);
            IV_UNION(st_a, st_b, st_len);
#undef IV_UNION
        }
        if (all_b > INT64_MIN) all_len += all_b - all_a;
        job->ranks[r].wait = all_len;
    }
    /* lateness and the time saved, on those clocks: at each call the rank's
     * arrival minus the median of the others' (and, for the last arriver,
     * minus the second-last), kept as [arrival - that, arrival] and turned
     * into what each call adds to the rank's lateness in the step (new_part) */
    for (int k = 0; k < x.ncl; k++) {
        coll *c = &x.cl[k];
        if (c->n < 2 || c->n > n) continue;
        int64_t *a = arr;
        int last = -1;
        for (int p = 0; p < c->n; p++) {
            int r = x.part[c->first + p][0], ci = x.part[c->first + p][1];
            a[p] = adj[r][ci];
            if (call_of(&x, r, ci)->ts + job->ranks[r].clock == c->last && last < 0) last = p;
        }
        int64_t *sorted = ends;
        memcpy(sorted, a, (size_t)c->n * sizeof *sorted);
        qsort(sorted, (size_t)c->n, sizeof *sorted, i64_cmp);
        for (int p = 0; p < c->n; p++) {
            int pos = 0;
            while (sorted[pos] != a[p]) pos++;
            int64_t med = median_without(sorted, c->n, pos);
            if (a[p] <= med) continue;
            int r = x.part[c->first + p][0], ci = x.part[c->first + p][1];
            const mp_trace *tr = t[job->ranks[r].index];
            int st0 = tr->calls[ci].step;
            if (st0 < 0) continue;
            /* the median rank of the others: the lower middle arrival */
            int m = c->n - 1, mi = (m - 1) / 2;
            int64_t mv = sorted[mi >= pos ? mi + 1 : mi];
            int ref = -1;
            for (int q = 0; q < c->n && ref < 0; q++)
                if (q != p && a[q] == mv) ref = x.part[c->first + q][0];
            int64_t own = tr->calls[ci].ts + job->ranks[r].clock;
            late[nlate++] = (iv){r, smap[r][st0], k, ci, own - (a[p] - med), own, ref < 0 ? r : ref, 0};
        }
        if (last >= 0) {
            int r = c->last_rank, ci = x.part[c->first + last][1];
            const mp_trace *tr = t[job->ranks[r].index];
            int st0 = tr->calls[ci].step;
            int64_t second = INT64_MIN;
            int ref = -1;
            for (int q = 0; q < c->n; q++)
                if (q != last && a[q] > second) {
                    second = a[q];
                    ref = x.part[c->first + q][0];
                }
            if (st0 >= 0 && a[last] > second && ref >= 0)
                save[nsave++] = (iv){r, smap[r][st0], k, ci, c->last - (a[last] - second), c->last, ref, 0};
        }
    }
    free(arr);
    free(ends);
    /* each rank's skew: the median of (its end - the call's median end),
     * on the clocks before the alignment (what it left is the rest) */
    for (int r = 0; r < n; r++) {
        const mp_trace *tr = t[job->ranks[r].index];
        ends = malloc(((size_t)tr->n_calls + 1) * sizeof *ends);
        if (!ends) goto oom;
        int m = 0;
        for (int c = 0; c < tr->n_calls; c++)
            if (tr->calls[c].match >= 0)
                ends[m++] = tr->calls[c].end + job->ranks[r].clock - x.cl[tr->calls[c].match].median_end;
        if (m) {
            qsort(ends, (size_t)m, sizeof *ends, i64_cmp);
            job->ranks[r].skew = median_sorted(ends, m) - job->ranks[r].shift;
        }
        free(ends);
    }
    /* ---- per rank and step: lateness (union), causes, what-if, all
     * measured on the idle time of the ranks that waited ---- */
    new_part(late, nlate);
    new_part(save, nsave);
    {
        size_t np;
        iv *p = idle_pieces(&x, late, nlate, &np);
        if (!p) goto oom;
        free(late);
        late = p;
        nlate = np;
        p = idle_pieces(&x, save, nsave, &np);
        if (!p) goto oom;
        free(save);
        save = p;
        nsave = np;
    }
    qsort(late, nlate, sizeof *late, iv_cmp);
    qsort(save, nsave, sizeof *save, iv_cmp);
    int64_t *wall_sorted = malloc(((size_t)job->n_steps + 1) * sizeof *wall_sorted);
    if (!wall_sorted) goto oom;
    for (int s = 0; s < job->n_steps; s++) wall_sorted[s] = job->steps[s].wall;
    qsort(wall_sorted, (size_t)job->n_steps, sizeof *wall_sorted, i64_cmp);
    job->median_step = median_sorted(wall_sorted, job->n_steps);
    job->threshold = job->median_step / 100;
    free(wall_sorted);
    cacc *rank_acc = calloc((size_t)n, sizeof *rank_acc);
    cacc *step_acc = calloc((size_t)job->n_steps, sizeof *step_acc);   /* of the critical rank */
    if (!rank_acc || !step_acc) {
        free(rank_acc);
        free(step_acc);
        goto oom;
    }
    for (size_t i = 0; i < nlate;) {
        size_t j = i;
        int64_t cov = INT64_MIN, len = 0;
        while (j < nlate && late[j].rank == late[i].rank && late[j].step == late[i].step) {
            int64_t a = MP_MAX(late[j].a, cov), b = late[j].b;
            if (b > a) len += b - a;
            cov = MP_MAX(cov, b);
            j++;
        }
        job->steps[late[i].step].late[late[i].rank] = len;
        i = j;
    }
    for (int s = 0; s < job->n_steps; s++) {
        mp_tjob_step *js = &job->steps[s];
        for (int r = 0; r < n; r++) {
            int64_t l = js->late[r];
            MP_SADD(job->ranks[r].late, l);
            if (l < job->threshold || l <= 0) continue;
            job->ranks[r].late_steps++;
            if (js->critical < 0 || l > js->late[js->critical]) js->critical = r;
        }
        if (js->critical >= 0) {
            js->delay = js->late[js->critical];
            job->ranks[js->critical].critical_steps++;
        }
    }
    /* causes: each late arrival's segment against the others', weighted by
     * the share of its interval not already covered */
    for (size_t i = 0; i < nlate;) {
        size_t j = i;
        int64_t cov = INT64_MIN;
        while (j < nlate && late[j].rank == late[i].rank && late[j].step == late[i].step) {
            int64_t a = MP_MAX(late[j].a, cov), b = late[j].b;
            double w = b > a && late[j].len0 > 0 ? (double)(b - a) / (double)late[j].len0 : 0;
            cov = MP_MAX(cov, b);
            if (w > 0) {
                weigh(&x, late[j].coll, late[j].rank, late[j].call, w, &rank_acc[late[j].rank]);
                if (job->steps[late[j].step].critical == late[j].rank)
                    weigh(&x, late[j].coll, late[j].rank, late[j].call, w, &step_acc[late[j].step]);
            }
            j++;
        }
        i = j;
    }
    for (int r = 0; r < n; r++) {
        mp_tjob_rank *jr = &job->ranks[r];
        jr->straggler = jr->late_steps * 2 > job->n_steps || jr->critical_steps * 2 > job->n_steps;
        if (jr->late_steps || jr->critical_steps)
            jr->cause_kind = cause_words(&rank_acc[r], job->n_steps, jr->cause, sizeof jr->cause);
    }
    for (int s = 0; s < job->n_steps; s++)
        if (job->steps[s].critical >= 0)
            cause_words(&step_acc[s], 1, job->steps[s].cause, sizeof job->steps[s].cause);
    free(rank_acc);
    free(step_acc);
    /* what-if, one rank at a time: the union of its [second-last, last]
     * intervals per step; its cause in that step takes the time lost */
    int capc = 0;
    for (size_t i = 0; i < nsave;) {
        size_t j = i;
        int64_t cov = INT64_MIN, len = 0;
        cacc acc;
        memset(&acc, 0, sizeof acc);
        while (j < nsave && save[j].rank == save[i].rank && save[j].step == save[i].step) {
            int64_t a = MP_MAX(save[j].a, cov), b = save[j].b;
            if (b > a) {
                len += b - a;
                weigh(&x, save[j].coll, save[j].rank, save[j].call,
                      (double)(b - a) / (double)save[j].len0, &acc);
            }
            cov = MP_MAX(cov, b);
            j++;
        }
        int r = save[i].rank, s = save[i].step;
        /* a step cannot save more than it took (clocks that disagree make
         * the lateness seconds long: job.warning says so) */
        if (len > job->steps[s].wall) len = job->steps[s].wall;
        MP_SADD(job->ranks[r].whatif_saved, len);
        if (job->steps[s].critical == r) job->steps[s].saved = len;
        char words[MP_TJOB_CAUSE];
        const char *kind = cause_words(&acc, 1, words, sizeof words);
        char name[MP_TJOB_CAUSE];
        if (kind && strcmp(kind, "range") == 0) {
            int best = 0;
            for (int q = 1; q < acc.n; q++)
                if (acc.e[q].ns > acc.e[best].ns) best = q;
            snprintf(name, sizeof name, "range `%s`", acc.e[best].name);
        } else {
            snprintf(name, sizeof name, "%s", !kind || strcmp(kind, "host") == 0 ? "host overhead" : strcmp(kind, "data_loader") == 0 ? "data loader" : kind);
        }
        int c = 0;
        while (c < job->n_causes && strcmp(job->causes[c].name, name) != 0) c++;
        if (c == job->n_causes) {
            mp_tjob_cause *nc = mp_grow(job->causes, sizeof *job->causes, &capc, c + 1);
            if (!nc) goto oom;
            job->causes = nc;
            memset(&job->causes[c], 0, sizeof job->causes[c]);
            snprintf(job->causes[c].name, sizeof job->causes[c].name, "%s", name);
            job->causes[c].kind = kind ? kind : "host";
            job->n_causes++;
        }
        MP_SADD(job->causes[c].lost, len);
        i = j;
    }
    for (int a = 1; a < job->n_causes; a++)   /* largest first */
        for (int b = a; b > 0 && job->causes[b].lost > job->causes[b - 1].lost; b--) {
            mp_tjob_cause tmp = job->causes[b];
            job->causes[b] = job->causes[b - 1];
            job->causes[b - 1] = tmp;
        }
whatif:
    /* stragglers, worst first */
    job->stragglers = malloc(((size_t)n + 1) * sizeof *job->stragglers);
    if (!job->stragglers) goto oom;
    for (int r = 0; r < n; r++)
        if (job->ranks[r].straggler) job->stragglers[job->n_stragglers++] = r;
    for (int a = 1; a < job->n_stragglers; a++)
        for (int b = a; b > 0 && job->ranks[job->stragglers[b]].late > job->ranks[job->stragglers[b - 1]].late; b--) {
            int tmp = job->stragglers[b];
            job->stragglers[b] = job->stragglers[b - 1];
            job->stragglers[b - 1] = tmp;
        }
    /* every straggler like the median rank: a collective would start at the
     * last arrival of the other ranks */
    job->ideal = job->wall;
    if (job->n_stragglers && x.ncl) {
        iv *cut = malloc(((size_t)x.ncl + 1) * sizeof *cut);
        if (!cut) goto oom;
        size_t ncut = 0;
        for (int k = 0; k < x.ncl; k++) {
            const coll *c = &x.cl[k];
            if (c->n < 2 || c->n > n || !job->ranks[c->last_rank].straggler) continue;
            int64_t other = INT64_MIN, mine = INT64_MIN;
            int step = -1, ref = -1;
            for (int p = 0; p < c->n; p++) {
                int r = x.part[c->first + p][0], ci = x.part[c->first + p][1];
                const mp_tcall *cl = call_of(&x, r, ci);
                if (r == c->last_rank && cl->step >= 0) {
                    step = smap[r][cl->step];
                    mine = adj[r][ci];
                }
                if (!job->ranks[r].straggler && adj[r][ci] > other) {
                    other = adj[r][ci];
                    ref = r;
                }
            }
            if (other == INT64_MIN || step < 0 || other >= mine) continue;
            cut[ncut++] = (iv){0, step, k, 0, c->last - (mine - other), c->last, ref, 0};
        }
        new_part(cut, ncut);
        size_t np;
        iv *pc = idle_pieces(&x, cut, ncut, &np);
        free(cut);
        if (!pc) goto oom;
        cut = pc;
        ncut = np;
        qsort(cut, ncut, sizeof *cut, iv_cmp);
        for (int s = 0; s < job->n_steps; s++) job->steps[s].ideal = job->steps[s].wall;
        for (size_t i = 0; i < ncut;) {
            size_t j = i;
            int64_t cov = INT64_MIN, len = 0;
            while (j < ncut && cut[j].step == cut[i].step) {
                int64_t a = MP_MAX(cut[j].a, cov), b = cut[j].b;
                if (b > a) len += b - a;
                cov = MP_MAX(cov, b);
                j++;
            }
            mp_tjob_step *js = &job->steps[cut[i].step];
            js->ideal = MP_MAX(js->wall - len, 0);
            job->ideal -= MP_MIN(len, js->wall);
            i = j;
        }
        free(cut);
    } else {
        for (int s = 0; s < job->n_steps; s++) job->steps[s].ideal = job->steps[s].wall;
    }
    /* collective kernels waiting for their peers: device idle, not busy */
    for (int r = 0; r < n; r++) {
        mp_trace *tr = t[job->ranks[r].index];
        for (int c = 0; c < tr->n_calls; c++) {
            mp_tcall *cl = &tr->calls[c];
            if (!cl->device || cl->wait <= 0 || cl->step < 0) continue;
            int64_t w = MP_MIN(cl->wait, cl->solo);
            mp_tstep *s = &tr->steps[cl->step];
            w = MP_MIN(w, s->busy);
            s->busy -= w;
            s->idle[MP_TI_COLL] += w;
            tr->busy_total -= w;
        }
    }
    job_warnings(t, n, job);
    for (int r = 0; r < n; r++) {
        t[job->ranks[r].index]->job = job;
        mp_trace_findings(t[job->ranks[r].index]);
    }
    goto done;
oom:
    st = nomem();
done:
    if (smap)
        for (int r = 0; r < n; r++) free(smap[r]);
    free(smap);
    if (adj)
        for (int r = 0; r < n; r++) free(adj[r]);
    free(adj);
    free(late);
    free(save);
    free(map.slot);
    free(x.cl);
    free(x.part);
    if (st != MP_OK) mp_tjob_free(job);
    return st;
}

void mp_tjob_free(mp_tjob *job) {
    if (!job) return;
    for (int s = 0; s < job->n_steps; s++) free(job->steps[s].late);
    free(job->steps);
    free(job->ranks);
    free(job->stragglers);
    free(job->causes);
    memset(job, 0, sizeof *job);
}
