/* The trace analysis (analyze_int.h): the order spans are linked in
 * (PyTorch's _populate_cpu_children order), the External-id index, and
 * the in-place reordering of the span records. */
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

/* ---- sorting ---- */

/* The order spans are linked in (PyTorch's _populate_cpu_children): by
 * thread, start, longer first, module scopes before operators at the same
 * times (they open before them), then file order. */
static int span_cmp(const mp_tspan *sp, int32_t x, int32_t y) {
    const mp_tspan *a = &sp[x], *b = &sp[y];
    if (a->tid != b->tid) return a->tid < b->tid ? -1 : 1;
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    if (a->end != b->end) return a->end > b->end ? -1 : 1;
    int ma = a->kind != MP_TS_MODULE, mb = b->kind != MP_TS_MODULE;
    if (ma != mb) return ma - mb;
    return (x > y) - (x < y);
}

static int span_cmp_ctx(const void *ctx, int32_t x, int32_t y) { return span_cmp(ctx, x, y); }

/* Where each thread's spans begin once bucketed by thread (n_threads + 2
 * entries, to free; NULL when out of memory): entry t is thread t's
 * start, moved to its end as the caller places the spans. */
static size_t *thread_starts(const mp_tspan *sp, size_t n, int n_threads) {
    size_t *start = calloc((size_t)n_threads + 2, sizeof *start);
    if (!start) return NULL;
    for (size_t i = 0; i < n; i++) start[sp[i].tid + 1]++;
    for (int t = 0; t < n_threads + 1; t++) start[t + 1] += start[t];
    return start;
}

/* One thread's span indices a[lo, hi) sorted (tmp: scratch beside them). */
typedef struct sort_job {
    const mp_tspan *sp;
    int32_t *a, *tmp;
    size_t lo, hi;
    bool ok;
} sort_job;

static void *sort_bucket(void *arg) {
    sort_job *j = arg;
    uint32_t *runs = NULL;
    size_t cap = 0;
    j->ok = mp_idx_msort(j->a, j->tmp, j->lo, j->hi, span_cmp_ctx, j->sp, &runs, &cap);
    free(runs);
    return NULL;
}

/* Sort span indices: bucketed by thread (a counting sort, file order kept
 * within a thread), then a natural merge sort per thread (a trace lists a
 * thread's events mostly in time order); the largest thread's on a second
 * thread when the others hold as many spans again (a training step's
 * backward pass runs on a thread of its own). `tmp` holds n indices of
 * scratch. False when out of memory. */
bool tr_span_sort(const mp_tspan *sp, int32_t *a, int32_t *tmp, size_t n, int n_threads, bool two) {
    size_t *start = thread_starts(sp, n, n_threads);
    if (!start) return false;
    for (size_t i = 0; i < n; i++) tmp[start[sp[i].tid]++] = (int32_t)i;
    memcpy(a, tmp, n * sizeof *a);
    /* start[t] is now where thread t's bucket ends: the largest thread's
     * on a second thread when it holds at least 65,536 spans and the
     * others half as many again */
    int big = 0;
    for (int t = 1; t < n_threads; t++)
        if (start[t] - start[t - 1] > start[big] - (big ? start[big - 1] : 0)) big = t;
    sort_job bj = {sp, a, tmp, big ? start[big - 1] : 0, n_threads ? start[big] : 0, true};
    pthread_t th;
    size_t nb = bj.hi - bj.lo;
    bool own = two && nb >= ((size_t)1 << 16) && n - nb >= nb / 2 &&
               pthread_create(&th, NULL, sort_bucket, &bj) == 0;
    bool ok = true;
    for (int t = 0; t < n_threads && ok; t++) {
        if (own && t == big) continue;
        sort_job j = {sp, a, tmp, t ? start[t - 1] : 0, start[t], true};
        sort_bucket(&j);
        ok = j.ok;
    }
    if (own) pthread_join(th, NULL);
    free(start);
    return ok && bj.ok;
}

static bool ext_keyed(const mp_tspan *s) {
    return (s->kind == MP_TS_OP || s->kind == MP_TS_ANNOT) && s->ext >= 0;
}

static int ext_cmp(const void *ctx, int32_t x, int32_t y) {
    const mp_tspan *sp = ctx;
    if (sp[x].ext != sp[y].ext) return sp[x].ext < sp[y].ext ? -1 : 1;
    return (x > y) - (x < y);
}

bool tr_eidx_build(eidx *e, const mp_tspan *sp, size_t S) {
    memset(e, 0, sizeof *e);
    e->sp = sp;
    size_t n = 0;
    for (size_t i = 0; i < S; i++) n += ext_keyed(&sp[i]);
    e->a = mp_big_alloc((n + 1) * sizeof *e->a, false);
    int32_t *tmp = mp_big_alloc((n + 1) * sizeof *tmp, false);
    uint32_t *runs = NULL;
    size_t cap = 0;
    bool ok = e->a && tmp;
    for (size_t i = 0; ok && i < S; i++)
        if (ext_keyed(&sp[i])) e->a[e->n++] = (int32_t)i;
    ok = ok && mp_idx_msort(e->a, tmp, 0, e->n, ext_cmp, sp, &runs, &cap);
    mp_big_free(tmp);
    free(runs);
    return ok;
}

typedef struct ext_key {
    const eidx *e;
    int64_t k;
} ext_key;

static bool ext_before(const void *ctx, size_t i) {
    const ext_key *q = ctx;
    return q->e->sp[q->e->a[i]].ext < q->k;
}

/* The first operator or annotation with External id k; -1. *hint: as in
 * mp_gallop (launches and kernels are looked up mostly in the order of their
 * ids). */
int32_t tr_eidx_get(const eidx *e, int64_t k, size_t *hint) {
    ext_key q = {e, k};
    size_t i = mp_gallop(e->n, hint, ext_before, &q);
    return i < e->n && e->sp[e->a[i]].ext == k ? e->a[i] : -1;
}

/* The spans are being reordered (old span i becomes span newidx[i]): the
 * index follows (eidx_ties once they are). */
void tr_eidx_remap(eidx *e, const int32_t *newidx) {
    for (size_t k = 0; k < e->n; k++) e->a[k] = newidx[e->a[k]];
}

/* The spans reordered: ties (one id, several spans) in index order again. */
void tr_eidx_ties(eidx *e) {
    int32_t *a = e->a;
    for (size_t k = 1; k < e->n; k++) {
        int32_t x = a[k];
        size_t j = k;
        for (; j > 0 && e->sp[a[j - 1]].ext == e->sp[x].ext && a[j - 1] > x; j--) a[j] = a[j - 1];
        a[j] = x;
    }
}

void tr_eidx_free(eidx *e) {
    mp_big_free(e->a);
    memset(e, 0, sizeof *e);
}

/* Reorder n records of elem bytes (at most 64) in place so that record k
 * is the old record perm[k] (cycle by cycle; perm is used up). Each move
 * waits on a load from far away, so a second cursor runs MP_PERM_AHEAD moves
 * ahead along the same cycle and prefetches the record it will need (perm
 * is 4 bytes a record and mostly cached; the records are not): the loads
 * overlap instead of queueing one behind the other. Inlined for each
 * record size. */

static void permute_spans(mp_tspan *sp, int32_t *perm, size_t n) {
    _Static_assert(sizeof *sp <= 64, "mp_permute_records keeps a record of at most 64 bytes");
    mp_permute_records(sp, sizeof *sp, perm, n);
}

/* The copies rotating the spans' runs into place would take, counted in
 * spans, as they are (part 0) or once each part of `part` spans is sorted
 * by thread (cnt, in: 2 x (n_threads + 1) counters); counting stops past
 * lim. */
static uint64_t run_copies(const mp_tspan *sp, size_t S, int n_threads, size_t part, size_t *cnt,
                           uint64_t lim) {
    size_t *in = cnt + n_threads + 1;   /* a run's (or a part's) spans by thread */
    memset(cnt, 0, 2 * ((size_t)n_threads + 1) * sizeof *cnt);
    uint64_t copies = 0;
    for (size_t i = 0; i < S && copies <= lim;) {
        size_t j = i + 1;
        if (part) {
            j = MP_MIN(S, i + part);
            for (size_t k = i; k < j; k++) in[sp[k].tid]++;
        } else {
            while (j < S && sp[j].tid == sp[i].tid) j++;
            in[sp[i].tid] = j - i;
        }
        for (int t = 0; t < n_threads; t++) {
            if (!in[t]) continue;
            for (int u = t + 1; u < n_threads; u++) copies += cnt[u];
            copies += 2 * in[t];
            cnt[t] += in[t];
            in[t] = 0;
        }
        i = j;
    }
    return copies;
}

/* The spans moved to their thread's place, file order kept, a run of one
 * thread's spans at a time: each run is rotated in behind the spans
 * before it of its thread and of earlier ones (the spans of later threads
 * move up by its length), in sequential copies. The rotations grow with
 * the runs times the spans: when the threads alternate often (616 runs in
 * the MobileNet x 77 trace), each sixteenth of the spans is first sorted
 * by thread through a buffer of its size (a counting sort: at most one run
 * a thread a sixteenth). False, with nothing moved, when the copies would
 * still come to more than a few times the spans (many threads). */
static bool partition_runs(mp_tspan *sp, size_t S, int n_threads) {
    enum { RUN_COPIES = 8, RUN_BUF = 256 << 10, RUN_PARTS = 16 };
    const uint64_t lim = (uint64_t)RUN_COPIES * S;
    size_t *cnt = n_threads <= 64 ? calloc(2 * ((size_t)n_threads + 1), sizeof *cnt) : NULL;
    if (!cnt) return false;
    size_t part = S / RUN_PARTS + 1, nb = MP_MAX((size_t)RUN_BUF, part * sizeof *sp);
    bool parts = run_copies(sp, S, n_threads, 0, cnt, lim) > lim;
    char *buf = !parts || run_copies(sp, S, n_threads, part, cnt, lim) <= lim ? malloc(nb) : NULL;
    bool ok = buf != NULL;
    if (ok && parts) {
        mp_tspan *tmp = (mp_tspan *)buf;
        for (size_t c0 = 0; c0 < S; c0 += part) {
            size_t n = MP_MIN(part, S - c0);
            memset(cnt, 0, ((size_t)n_threads + 1) * sizeof *cnt);
            for (size_t i = c0; i < c0 + n; i++) cnt[sp[i].tid + 1]++;
            for (int t = 0; t < n_threads; t++) cnt[t + 1] += cnt[t];
            for (size_t i = c0; i < c0 + n; i++) tmp[cnt[sp[i].tid]++] = sp[i];
            memcpy(sp + c0, tmp, n * sizeof *sp);
        }
    }
    if (ok) {
        memset(cnt, 0, ((size_t)n_threads + 1) * sizeof *cnt);
        for (size_t i = 0; i < S;) {
            size_t j = i + 1;
            while (j < S && sp[j].tid == sp[i].tid) j++;
            size_t later = 0;
            for (int u = sp[i].tid + 1; u < n_threads; u++) later += cnt[u];
            cnt[sp[i].tid] += j - i;
            mp_rotate_bytes((char *)(sp + i - later), later * sizeof *sp, (j - i) * sizeof *sp, buf, nb);
            i = j;
        }
    }
    free(buf);
    free(cnt);
    return ok;
}

/* Reorder the spans in place to perm (span k is the old span perm[k]); tmp:
 * scratch of S indices. The far moves are the threads': a trace holds each
 * thread's events in few long runs, and sorting brings a thread's together;
 * within a thread, sorting by start moves events only a little (an event
 * is written when it ends, after the events it encloses). So the spans
 * are first moved to their thread's place, file order kept (partition_runs:
 * whole runs, in sequential copies; one span at a time when the runs are
 * many), then by what remains (short cycles, near). Following perm's
 * cycles alone takes each span across memory on its own, a cache miss
 * each: 45-95 ms against 20-25 ms on the 532 MB bench trace (756,000
 * spans, 57 runs of one thread). */
void tr_order_spans(mp_tspan *sp, int32_t *perm, int32_t *tmp, size_t S, int n_threads) {
    size_t *start = thread_starts(sp, S, n_threads);
    if (!start) {
        permute_spans(sp, perm, S);
        return;
    }
    /* tmp: where each span goes among its thread's (file order kept) */
    for (size_t i = 0; i < S; i++) tmp[i] = (int32_t)start[sp[i].tid]++;
    free(start);
    /* what remains after that move: span k is the moved span tmp[perm[k]] */
    for (size_t k = 0; k < S; k++) perm[k] = tmp[perm[k]];
    /* span i goes to tmp[i]: by runs, else cycle by cycle (tmp used up) */
    bool by_runs = partition_runs(sp, S, n_threads);
    for (size_t i = 0; !by_runs && i < S; i++) {
        if (tmp[i] == (int32_t)i) continue;
        mp_tspan carry = sp[i];
        size_t d = (size_t)tmp[i];
        tmp[i] = (int32_t)i;
        while (d != i) {
            mp_tspan next = sp[d];
            sp[d] = carry;
            carry = next;
            size_t nd = (size_t)tmp[d];
            tmp[d] = (int32_t)d;
            d = nd;
        }
        sp[i] = carry;
    }
    permute_spans(sp, perm, S);
}

/* The collective side table by (host span, then device record; index): the
 * order comm.c's lookup searches. Read in file order, host and device
 * entries interleave, and the spans' sort moves the host ones. */
int tr_comm_cmp(const void *x, const void *y) {
    const mp_tcomm *a = x, *b = y;
    if (a->on_dev != b->on_dev) return a->on_dev < b->on_dev ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

int tr_flop_cmp(const void *x, const void *y) {
    const mp_tflop *a = x, *b = y;
    return (a->span > b->span) - (a->span < b->span);
}

/* Device events by start, end, then index. */
int tr_dev_cmp(const void *ctx, int32_t x, int32_t y) {
    const mp_tdev *a = (const mp_tdev *)ctx + x, *b = (const mp_tdev *)ctx + y;
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    return (x > y) - (x < y);
}