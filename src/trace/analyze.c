/* Linking and analysis of a read trace (trace.h).
 *
 * Linking follows the trace's own links, as PyTorch does for key_averages
 * (torch/autograd/profiler.py, profiler_util.py):
 *  - a device event belongs to the operator whose External id it carries;
 *  - operators nest per thread by time: sorted by (start, -end), each one's
 *    parent is the innermost open span that contains it; a child with the
 *    same name as a parent whose only child it is, is merged into it
 *    (EventList._remove_dup_nodes), its kernels replacing the parent's;
 *  - a runtime call carrying an operator's External id counts on that
 *    operator's thread;
 *  - a backward operator is tied to the forward operator where its fwdbwd
 *    flow starts (or, without flows, the forward operator with its
 *    Sequence number); an operator belongs to the innermost nn.Module scope
 *    open around it on its thread. */
#include "trace/trace.h"
#include "base/arrays.h"
#include "base/gpu.h"
#include "trace/ival.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

const char *const mp_tcat_names[MP_TC_COUNT] = {"gemm", "conv", "attention", "elementwise",
                                                "memcpy_memset", "communication", "other"};
const char *const mp_tcat_labels[MP_TC_COUNT] = {
    "GEMM", "convolution", "attention", "element-wise/reduction/norm", "memcpy/memset",
    "communication (NCCL)", "other"};
const char *const mp_tidle_names[MP_TI_COUNT] = {"data_loader", "collective_wait", "host_range",
                                                 "launch_bound", "synchronization", "other"};
const char *const mp_tidle_labels[MP_TI_COUNT] = {"waiting on the data loader",
                                                  "waiting in a collective",
                                                  "host inside a record_function range",
                                                  "launch-bound (host late)",
                                                  "after synchronisation", "other"};

/* ---- helpers ---- */

static bool has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static bool has_ci(const char *s, const char *sub) { return strcasestr(s, sub) != NULL; }

static bool starts(const char *s, const char *pre) { return strncmp(s, pre, strlen(pre)) == 0; }

/* The category an operator's name decides alone; -1 when its kernels
 * decide. */
static int op_category(const char *op) {
    if (op) {
        static const char *const gemm[] = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",
                                           "aten::matmul", "aten::linear", "aten::_scaled_mm",
                                           "aten::addmv", "aten::mv", "aten::dot"};
        for (size_t i = 0; i < MP_ARRAY_LEN(gemm); i++)
            if (strcmp(op, gemm[i]) == 0) return MP_TC_GEMM;
        if (has(op, "attention") || has(op, "flash") || has(op, "sdpa")) return MP_TC_ATTN;
        if (has(op, "conv") && starts(op, "aten::")) return MP_TC_CONV;
        if (has(op, "norm") || has(op, "softmax")) return MP_TC_ELEM;
    }
    return -1;
}

bool mp__trace_comm_kernel(const char *name) { return has_ci(name, "nccl"); }

/* A kernel that ran fp32 operands on tensor cores (TF32): CUTLASS
 * "tensorop_s1688"/"s16816" kernels, cuBLAS/cuDNN xmma kernels named tf32. */
static bool tf32_kernel(const char *k) { return has_ci(k, "tf32") || has(k, "tensorop_s"); }

unsigned mp__trace_kflags(mp_trace_raw *raw, uint32_t name) {
    if (!raw->kflags && (raw->kflags = calloc((size_t)raw->n_names + 1, 1)) != NULL)
        raw->n_kflags = raw->n_names;
    bool cached = raw->kflags && name < (uint32_t)raw->n_kflags;   /* names added since: asked each time */
    if (cached && (raw->kflags[name] & MP_TK_ASKED)) return raw->kflags[name];
    const char *k = raw->names[name];
    unsigned f = MP_TK_ASKED | (mp__trace_comm_kernel(k) ? MP_TK_COMM : 0) |
                 (tf32_kernel(k) ? MP_TK_TF32 : 0);
    if (cached) raw->kflags[name] = (uint8_t)f;
    return f;
}

bool mp__trace_loader(const char *name) { return has(name, "DataLoader"); }

bool mp__trace_user_range(const char *n) {
    static const char *const framework[] = {"ProfilerStep#", "Optimizer.", "gloo:", "nccl:", "c10d::",
                                            "record_param_comms", "DistributedDataParallel.",
                                            "FullyShardedDataParallel", "## "};
    for (size_t i = 0; i < MP_ARRAY_LEN(framework); i++)
        if (starts(n, framework[i])) return false;
    return !mp__trace_loader(n) && !mp_trace_module_range(n, strlen(n), NULL);
}

/* The category a kernel's name decides. */
static int kernel_category(const char *k) {
    if (mp__trace_comm_kernel(k)) return MP_TC_COMM;
    if (has_ci(k, "flash") || has_ci(k, "fmha") || has_ci(k, "attention") || has_ci(k, "sdpa"))
        return MP_TC_ATTN;
    if (has_ci(k, "conv") || has(k, "wgrad") || has(k, "dgrad") || has(k, "fprop"))
        return MP_TC_CONV;
    if (has_ci(k, "gemm") || has(k, "nvjet") || has_ci(k, "cutlass") || has_ci(k, "cublas") ||
        has(k, "xmma") || has(k, "Kernel2") || has_ci(k, "gemv"))
        return MP_TC_GEMM;
    if (has(k, "elementwise") || has(k, "reduce") || has_ci(k, "norm") || has_ci(k, "softmax") ||
        has(k, "Welford") || has(k, "multi_tensor") || has(k, "at::native") || has(k, "GammaBeta") ||
        has(k, "bn_fw") || has(k, "bn_bw"))
        return MP_TC_ELEM;
    return MP_TC_OTHER;
}

static int category(const char *k, int kind, const char *op) {
    if (kind == MP_TD_MEMCPY || kind == MP_TD_MEMSET) return MP_TC_MEM;
    int kc = kernel_category(k);
    if (kc == MP_TC_COMM) return kc;
    int oc = op_category(op);
    return oc >= 0 ? oc : kc;
}

void mp_trace_short_name(const char *name, char *out, size_t n) {
    if (!n) return;
    const char *s = name;
    if (starts(s, "void ")) s += 5;
    size_t len = strlen(s);
    /* drop the parameter list: the last top-level "(...)" at the end */
    if (len && s[len - 1] == ')') {
        int depth = 0;
        for (size_t i = len; i-- > 0;) {
            if (s[i] == ')') depth++;
            else if (s[i] == '(' && --depth == 0) {
                if (i > 0) len = i;
                break;
            }
        }
    }
    size_t o = 0;
    static const char *const drop[] = {"(anonymous namespace)::", "at::native::", "at::cuda::",
                                       "c10::", "std::"};
    for (size_t i = 0; i < len && o + 1 < n;) {
        bool skipped = false;
        for (size_t d = 0; d < MP_ARRAY_LEN(drop); d++) {
            size_t dl = strlen(drop[d]);
            if (i + dl <= len && memcmp(s + i, drop[d], dl) == 0) {
                i += dl;
                skipped = true;
                break;
            }
        }
        if (!skipped) out[o++] = s[i++];
    }
    out[o] = 0;
    const size_t max = 72;
    if (o > max && n > max + 4) memcpy(out + max - 3, "...", 4);
}

/* ---- datasheet peaks (dense, no sparsity), TFLOPS: the one GPU table
 * (src/base/gpu.c) the planner reads too. fp32 is the non-tensor-core
 * rate (PyTorch's fp32 matmul with TF32 off); tf32 the tensor-core rate
 * fp32 operators get when their kernels ran as TF32 (cuDNN convolutions
 * do by default) ---- */

const char *const mp_tdtype_names[MP_TDT_COUNT] = {"?", "fp32", "fp16", "bf16", "fp8", "fp64",
                                                   "tf32"};

double mp_trace_peak(const char *device, int dtype, const char **label) {
    static const int col[MP_TDT_COUNT] = {-1, MP_GPU_FP32, MP_GPU_FP16, MP_GPU_BF16, MP_GPU_FP8,
                                          MP_GPU_FP64, MP_GPU_TF32};
    if (label) *label = NULL;
    if (!device || dtype <= 0 || dtype >= MP_TDT_COUNT) return 0;
    const mp_gpu *g = mp_gpu_match(device);
    if (!g) return 0;
    if (label) *label = g->label;
    return g->tflops[col[dtype]];
}

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
static bool span_sort(const mp_tspan *sp, int32_t *a, int32_t *tmp, size_t n, int n_threads, bool two) {
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

/* Operators and annotations by External id: their indices sorted by
 * (External id, index), found by binary search (a map over the ids would
 * be as large as their range, and the ids of a long trace leave gaps). */
typedef struct eidx {
    const mp_tspan *sp;
    int32_t *a;
    size_t n;
} eidx;

static bool ext_keyed(const mp_tspan *s) {
    return (s->kind == MP_TS_OP || s->kind == MP_TS_ANNOT) && s->ext >= 0;
}

static int ext_cmp(const void *ctx, int32_t x, int32_t y) {
    const mp_tspan *sp = ctx;
    if (sp[x].ext != sp[y].ext) return sp[x].ext < sp[y].ext ? -1 : 1;
    return (x > y) - (x < y);
}

static bool eidx_build(eidx *e, const mp_tspan *sp, size_t S) {
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
static int32_t eidx_get(const eidx *e, int64_t k, size_t *hint) {
    ext_key q = {e, k};
    size_t i = mp_gallop(e->n, hint, ext_before, &q);
    return i < e->n && e->sp[e->a[i]].ext == k ? e->a[i] : -1;
}

/* The spans are being reordered (old span i becomes span newidx[i]): the
 * index follows (eidx_ties once they are). */
static void eidx_remap(eidx *e, const int32_t *newidx) {
    for (size_t k = 0; k < e->n; k++) e->a[k] = newidx[e->a[k]];
}

/* The spans reordered: ties (one id, several spans) in index order again. */
static void eidx_ties(eidx *e) {
    int32_t *a = e->a;
    for (size_t k = 1; k < e->n; k++) {
        int32_t x = a[k];
        size_t j = k;
        for (; j > 0 && e->sp[a[j - 1]].ext == e->sp[x].ext && a[j - 1] > x; j--) a[j] = a[j - 1];
        a[j] = x;
    }
}

static void eidx_free(eidx *e) {
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
static void order_spans(mp_tspan *sp, int32_t *perm, int32_t *tmp, size_t S, int n_threads) {
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

static int flop_cmp(const void *x, const void *y) {
    const mp_tflop *a = x, *b = y;
    return (a->span > b->span) - (a->span < b->span);
}

/* Device events by start, end, then index. */
static int dev_cmp(const void *ctx, int32_t x, int32_t y) {
    const mp_tdev *a = (const mp_tdev *)ctx + x, *b = (const mp_tdev *)ctx + y;
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    return (x > y) - (x < y);
}

/* ---- the module tree ---- */

typedef struct mtree {
    mp_module *mods;
    mp_tmod *fig;
    int n, cap, cap2;
    mp_imap index;          /* (parent << 32 | name) -> node */
    mp_arena *arena;
    const char **names;
} mtree;

static int mtree_node(mtree *m, int parent, uint32_t name) {
    int64_t key = (int64_t)(((uint64_t)(uint32_t)parent << 32) | name);
    int32_t v = mp_imap_get(&m->index, key);
    if (v >= 0) return v;
    if (m->n + 1 > m->cap) {
        int cap = m->cap;
        mp_module *nm = mp_grow(m->mods, sizeof *m->mods, &cap, m->n + 1);
        if (!nm) return -1;
        m->mods = nm;
        int cap2 = m->cap;
        mp_tmod *nf = mp_grow(m->fig, sizeof *m->fig, &cap2, m->n + 1);
        if (!nf) return -1;
        m->fig = nf;
        m->cap = MP_MIN(cap, cap2);
    }
    int i = m->n++;
    mp_module *md = &m->mods[i];
    memset(md, 0, sizeof *md);
    memset(&m->fig[i], 0, sizeof m->fig[i]);
    const char *label = m->names[name];
    md->name = label;
    md->parent = parent;
    md->first_child = md->last_child = md->next_sibling = -1;
    md->depth = parent >= 0 ? m->mods[parent].depth + 1 : 0;
    /* class: the label without its "_N" instance suffix */
    size_t len = strlen(label), cut = len;
    while (cut > 0 && label[cut - 1] >= '0' && label[cut - 1] <= '9') cut--;
    if (cut > 0 && cut < len && label[cut - 1] == '_') cut--;
    else cut = len;
    md->cls = mp_arena_strndup(m->arena, label, cut);
    if (parent >= 0 && m->mods[parent].parent >= 0)
        md->path = mp_arena_printf(m->arena, "%s.%s", m->mods[parent].path, label);
    else
        md->path = parent >= 0 ? label : "";
    if (!md->cls || !md->path) return -1;
    if (parent >= 0) {
        mp_module *p = &m->mods[parent];
        if (p->last_child >= 0) m->mods[p->last_child].next_sibling = i;
        else p->first_child = i;
        p->last_child = i;
    }
    if (m->n > 64 && (size_t)m->n * 2 > m->index.mask) {
        /* rebuild the index larger */
        mp_imap bigger;
        if (!mp_imap_init(&bigger, (size_t)m->n * 2)) return -1;
        for (size_t s = 0; s <= m->index.mask; s++)
            if (m->index.vals[s] >= 0) mp_imap_put(&bigger, m->index.keys[s], m->index.vals[s]);
        mp_imap_free(&m->index);
        m->index = bigger;
    }
    mp_imap_put(&m->index, key, i);
    return i;
}

/* ---- the analysis ---- */

/* A device allocation (a [memory] record with bytes > 0), what the
 * operator table's memory column reads: 16 bytes against the record's 24,
 * kept once the steps' memory is known and the records are freed. */
typedef struct talloc {
    int64_t ts;
    uint64_t bytes : 48;   /* < MP_MEM_MAX */
    uint64_t tid : 16;
} talloc;

typedef struct work {
    mp_trace *t;
    mp_trace_raw *raw;
    size_t S, D;
    /* the spans are sorted in place (span_cmp): a thread's spans are
     * contiguous, and each span's subtree follows it */
    int32_t *parent;    /* operator tree (after merging), -1 */
    uint8_t *nchild;    /* children, 2 for more (while linking) */
    int32_t *mod;       /* innermost module node for operators; -1 */
    int32_t *devop;     /* device event -> operator; -1 */
    uint64_t *kbits;    /* bits over spans: launched device work, or took a merged span's */
    uint32_t *krank;    /* per word of kbits: the bits set before it */
    int64_t *kval;      /* their self device ns, in span order (kern_of) */
    uint64_t *hasfwd;   /* bits over spans: a backward operator tied to a forward one */
    uint32_t *fwd_rank; /* per word of hasfwd: the bits set before it */
    int32_t *fwd_val;   /* their forward operators, in span order (fwd_of) */
    uint64_t *merged;   /* bits over spans: merged into its parent (PyTorch's _remove_dup_nodes) */
    uint8_t *nf;        /* name -> NF_* (what a name says, asked once) */
    size_t launches;    /* spans that launched device work */
    eidx ext;           /* operators and annotations by External id (linking) */
    talloc *allocs;     /* device allocations in time order (tables) */
    size_t n_allocs;
    bool two;           /* a second thread for the steps that can take one */
    bool bwd_ops_seen;
} work;

/* What a name says: "...Backward..." (a backward operator), "autograd::..."
 * (the engine's wrapper), "..._backward" (a backward ATen operator), a
 * DataLoader call, a synchronising runtime call, an operator that only
 * moves or makes data (flops.c). */
enum { NF_BACKWARD = 1, NF_AUTOGRAD = 2, NF_UBACKWARD = 4, NF_LOADER = 8, NF_SYNC = 16,
       NF_FLOP_FREE = 32 };

static uint8_t *name_flags(const mp_trace_raw *raw) {
    uint8_t *b = malloc((size_t)raw->n_names + 1);
    if (!b) return NULL;
    for (int n = 0; n < raw->n_names; n++) {
        const char *s = raw->names[n];
        b[n] = (uint8_t)((has(s, "Backward") ? NF_BACKWARD : 0) |
                         (starts(s, "autograd::") ? NF_AUTOGRAD : 0) |
                         (has(s, "_backward") ? NF_UBACKWARD : 0) |
                         (has(s, "DataLoader") ? NF_LOADER : 0) |
                         (has(s, "Synchronize") || strcmp(s, "cudaMemcpy") == 0 ? NF_SYNC : 0) |
                         (mp_trace_flop_free(s) ? NF_FLOP_FREE : 0));
    }
    return b;
}

/* The outermost FLOP-counted operator among i and its ancestors; -1. */
static int32_t outer_of(const work *w, int32_t i) {
    const mp_tspan *sp = w->raw->spans;
    int32_t o = -1;
    for (int32_t x = i; x >= 0; x = w->parent[x])
        if (sp[x].has_flops && sp[x].kind == MP_TS_OP) o = x;
    return o;
}

/* Freed memory goes back to the system now (glibc keeps freed heap memory
 * for reuse; the analysis frees megabytes between its steps). */
void mp__trace_trim(void) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

/* The name of the module tree's root: "trace". */
static int intern_root(mp_trace_raw *raw) { return mp__trace_intern(raw, "trace"); }

static int32_t resolve(const work *w, int32_t s) {
    while (s >= 0 && mp_bit_get(w->merged, (size_t)s)) s = w->parent[s];
    return s;
}

/* Rank of span k among the set bits of b (rank: per word, the bits set
 * before it). */
static size_t bit_rank(const uint64_t *b, const uint32_t *rank, size_t k) {
    return rank[k / 64] + (size_t)__builtin_popcountll(b[k / 64] & ((UINT64_C(1) << (k % 64)) - 1));
}

/* A rank over the bit set b of `words` words (per word, the bits set before
 * it; to free); *n: the bits set. NULL when out of memory. */
static uint32_t *bit_ranks(const uint64_t *b, size_t words, size_t *n) {
    uint32_t *r = mp_big_alloc((words + 1) * sizeof *r, false);
    size_t k = 0;
    for (size_t q = 0; r && q < words; q++) {
        r[q] = (uint32_t)k;
        k += (size_t)__builtin_popcountll(b[q]);
    }
    *n = k;
    return r;
}

/* Span i's self device time (0 for a span outside kbits). */
static int64_t kern_of(const work *w, int32_t i) {
    return mp_bit_get(w->kbits, (size_t)i) ? w->kval[bit_rank(w->kbits, w->krank, (size_t)i)] : 0;
}

/* Span k's (in kbits) self device time, to be changed. */
static int64_t *kern_ref(work *w, int32_t k) { return &w->kval[bit_rank(w->kbits, w->krank, (size_t)k)]; }

static int32_t fwd_of(const work *w, int32_t i) {
    return i >= 0 && mp_bit_get(w->hasfwd, (size_t)i) ? w->fwd_val[bit_rank(w->hasfwd, w->fwd_rank, (size_t)i)] : -1;
}

/* Runtime calls count on their operator's thread; then the spans are
 * sorted in place (span_cmp), their FLOPs following them. */
static mp_status sort_spans(work *w) {
    mp_trace_raw *raw = w->raw;
    mp_tspan *sp = raw->spans;
    size_t S = w->S;
    eidx *ext = &w->ext;   /* built (build_ext) */
    size_t hint = 0;
    for (size_t i = 0; i < S; i++) {
        if (sp[i].kind != MP_TS_RUNTIME || sp[i].ext < 0) continue;
        int32_t o = eidx_get(ext, sp[i].ext, &hint);
        if (o >= 0) sp[i].tid = sp[o].tid;
    }
    int32_t *perm = mp_big_alloc((S + 1) * sizeof *perm, false), *tmp = mp_big_alloc((S + 1) * sizeof *tmp, false);
    if (!perm || !tmp || !span_sort(sp, perm, tmp, S, raw->n_threads, w->two)) {
        mp_big_free(perm);
        mp_big_free(tmp);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    /* tables keyed by span index follow the spans: old index -> new (a
     * side table added to mp_trace_raw by span index is remapped here) */
    for (size_t k = 0; k < S; k++) tmp[perm[k]] = (int32_t)k;
    for (size_t f = 0; f < raw->n_flops; f++) raw->flops[f].span = (uint32_t)tmp[raw->flops[f].span];
    for (size_t c = 0; c < raw->n_comms; c++)
        if (!raw->comms[c].on_dev) raw->comms[c].idx = (uint32_t)tmp[raw->comms[c].idx];
    if (raw->n_flops > 1) qsort(raw->flops, raw->n_flops, sizeof *raw->flops, flop_cmp);
    eidx_remap(ext, tmp);
    order_spans(sp, perm, tmp, S, raw->n_threads);
    eidx_ties(ext);
    mp_big_free(tmp);
    mp_big_free(perm);
    mp__trace_trim();
    return MP_OK;
}

static mp_status build_ext(work *w) {
    return eidx_build(&w->ext, w->raw->spans, w->S) ? MP_OK : mp_error(MP_ERR_NOMEM, "trace: out of memory");
}

/* The spans sorted, and each device event's operator. */
static mp_status link_devices(work *w) {
    mp_trace_raw *raw = w->raw;
    size_t S = w->S;
    /* device events -> operator */
    w->devop = mp_big_alloc((w->D + 1) * sizeof *w->devop, false);
    if (!w->devop) return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    /* the spans that launched device work, counted once (kbits: link_tree
     * adds the spans their kernels' time is moved to) */
    w->kbits = mp_big_alloc((S / 64 + 1) * sizeof *w->kbits, true);
    if (!w->kbits) return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    size_t launches = 0, hint = 0;
    for (size_t d = 0; d < w->D; d++) {
        const mp_tdev *dv = &raw->devs[d];
        int32_t o = dv->kind == MP_TD_ANNOT || dv->ext < 0 ? -1 : eidx_get(&w->ext, dv->ext, &hint);
        w->devop[d] = o;
        if (o >= 0 && !mp_bit_get(w->kbits, (size_t)o)) {
            mp_bit_set(w->kbits, (size_t)o);
            launches++;
        }
    }
    eidx_free(&w->ext);
    w->launches = launches;
    return MP_OK;
}

/* The operator tree per thread (parents, merged duplicates), the module of
 * each operator and the module tree, each span's self device time. */
static mp_status link_tree(work *w) {
    mp_trace_raw *raw = w->raw;
    size_t S = w->S;
    mp_tspan *sp = raw->spans;
    mp_status st = MP_OK;
    size_t S1 = S + 1;
    w->parent = mp_big_alloc(S1 * sizeof *w->parent, false);
    w->nchild = mp_big_alloc(S1 * sizeof *w->nchild, true);   /* 0, 1 or 2 (more) */
    w->mod = mp_big_alloc(S1 * sizeof *w->mod, false);
    if (!w->parent || !w->nchild || !w->mod) return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    for (size_t i = 0; i < S; i++) w->parent[i] = w->mod[i] = -1;

    int32_t *stack = mp_big_alloc(S1 * sizeof *stack, false);
    int32_t *mstack = mp_big_alloc(S1 * sizeof *mstack, false);   /* module spans */
    int32_t *mnode = mp_big_alloc(S1 * sizeof *mnode, false);     /* their tree nodes */
    if (!stack || !mstack || !mnode) {
        mp_big_free(stack);
        mp_big_free(mstack);
        mp_big_free(mnode);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    int root_name = intern_root(raw);
    mtree mt = {0};
    mt.arena = &raw->arena;
    mt.names = raw->names;
    if (!mp_imap_init(&mt.index, 256)) st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
    /* the root of the module tree */
    int root = -1;
    size_t ns = 0, nm = 0;
    int32_t cur_tid = -1;
    for (size_t k = 0; k < S && st == MP_OK; k++) {
        int32_t i = (int32_t)k;
        if (sp[i].tid != cur_tid) {
            cur_tid = sp[i].tid;
            ns = nm = 0;
        }
        if (sp[i].kind == MP_TS_MODULE) {
            while (nm && sp[mstack[nm - 1]].end <= sp[i].ts) nm--;
            while (nm && sp[mstack[nm - 1]].end < sp[i].end) nm--;   /* partial overlap */
            if (root < 0) {
                root = root_name >= 0 ? mtree_node(&mt, -1, (uint32_t)root_name) : -1;
                if (root < 0) {
                    st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
                    break;
                }
            }
            int parent = nm ? mnode[nm - 1] : root;
            int node = mtree_node(&mt, parent, sp[i].name);
            if (node < 0) {
                st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
                break;
            }
            if (!sp[i].bwd) mt.fig[node].calls++;
            w->mod[i] = node;   /* module spans: their node (CPU-only times, modules()) */
            mstack[nm] = i;
            mnode[nm++] = node;
            continue;
        }
        while (nm && sp[mstack[nm - 1]].end <= sp[i].ts) nm--;
        /* an operator inside a backward range belongs to no forward module */
        if ((sp[i].kind == MP_TS_OP || sp[i].kind == MP_TS_ANNOT) && !(nm && sp[mstack[nm - 1]].bwd))
            w->mod[i] = nm ? mnode[nm - 1] : -1;
        /* PyTorch's _populate_cpu_children */
        while (ns) {
            int32_t p = stack[ns - 1];
            if (sp[i].ts >= sp[p].end || sp[i].end > sp[p].end) {
                ns--;
            } else {
                w->parent[i] = p;
                if (w->nchild[p] < 2) w->nchild[p]++;
                break;
            }
        }
        stack[ns++] = i;
    }
    mp_big_free(stack);
    mp_big_free(mstack);
    mp_big_free(mnode);
    mp_imap_free(&mt.index);
    w->t->mods = mt.mods;
    w->t->mfig = mt.fig;
    w->t->n_mods = mt.n;
    if (st != MP_OK) return st;

    /* _remove_dup_nodes: parents come before their children. A merged
     * span's self device time moves to the parent it merges into (set, in
     * span order): the merges first, then the times. */
    size_t nmg = 0, cm = 0;
    int32_t *mg = NULL;   /* (parent, child) of each merge, in order */
    for (size_t k = 0; k < S; k++) {
        int32_t i = (int32_t)k;
        if (sp[i].kind == MP_TS_MODULE) continue;
        int32_t p = resolve(w, w->parent[i]);
        w->parent[i] = p;
        if (p >= 0 && sp[p].name == sp[i].name && w->nchild[p] == 1) {
            mp_bit_set(w->merged, (size_t)i);
            if (nmg + 2 > cm) {
                int32_t *n2 = realloc(mg, (cm = cm ? 2 * cm : 4096) * sizeof *mg);
                if (!n2) {
                    free(mg);
                    return mp_error(MP_ERR_NOMEM, "trace: out of memory");
                }
                mg = n2;
            }
            mg[nmg++] = p;
            mg[nmg++] = i;
            mp_bit_set(w->kbits, (size_t)p);
            w->nchild[p] = w->nchild[i];
        }
    }
    /* self device time of the spans in kbits: a rank over the bits */
    size_t nk = 0;
    w->krank = bit_ranks(w->kbits, S / 64 + 1, &nk);
    w->kval = w->krank ? mp_big_alloc((nk + 1) * sizeof *w->kval, true) : NULL;
    if (!w->kval) {
        free(mg);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    for (size_t d = 0; d < w->D; d++)
        if (w->devop[d] >= 0) MP_SADD(*kern_ref(w, w->devop[d]), raw->devs[d].end - raw->devs[d].ts);
    for (size_t m = 0; m < nmg; m += 2) *kern_ref(w, mg[m]) = kern_of(w, mg[m + 1]);
    free(mg);
    return MP_OK;
}

typedef struct at_key {
    const mp_tspan *sp;
    uint32_t tid;
    int64_t ts;
} at_key;

static bool at_before(const void *ctx, size_t i) {
    const at_key *q = ctx;
    const mp_tspan *x = &q->sp[i];
    return x->tid < q->tid || (x->tid == q->tid && x->ts < q->ts);
}

/* The outermost operator starting at ts on thread tid: the first operator
 * of the sorted spans at (tid, ts) (longer spans sort first); -1. *hint: as
 * in mp_gallop (a flow's ends are looked up in runs that go forward or back
 * in time). */
static int32_t op_at(const mp_tspan *sp, size_t S, uint32_t tid, int64_t ts, size_t *hint) {
    at_key q = {sp, tid, ts};
    for (size_t i = mp_gallop(S, hint, at_before, &q); i < S && sp[i].tid == tid && sp[i].ts == ts; i++)
        if (sp[i].kind == MP_TS_OP) return (int32_t)i;
    return -1;
}

static int flow_cmp(const void *x, const void *y) {
    const mp_tflow *a = x, *b = y;
    if (a->id != b->id) return a->id < b->id ? -1 : 1;
    if (a->start != b->start) return a->start ? -1 : 1;   /* the start first */
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    return (a->tid > b->tid) - (a->tid < b->tid);
}

/* Backward operator -> forward operator: the fwdbwd flow's start ('s', on
 * the forward operator's thread and start time) and end ('f', on the
 * backward operator's). Without a flow, the Sequence number. */
static mp_status link_backward(work *w) {
    mp_trace_raw *raw = w->raw;
    mp_tspan *sp = raw->spans;
    size_t S = w->S;
    const uint8_t *bn = w->nf;
    size_t n_bwd = 0;
    for (size_t i = 0; i < S; i++) n_bwd += sp[i].kind == MP_TS_OP && sp[i].seq >= 0 && (bn[sp[i].name] & NF_BACKWARD);
    /* the links as found (a flow's end, or a backward operator, at most
     * once each); then, by span, fwd_rank and fwd_val */
    typedef struct { int32_t bo, fo; } link;
    size_t nl = 0;
    link *links = mp_big_alloc((raw->n_flows + n_bwd + 1) * sizeof *links, false);
    if (!links) return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    /* flows: each end after its start, by id */
    if (raw->n_flows > 1) qsort(raw->flows, raw->n_flows, sizeof *raw->flows, flow_cmp);
    size_t hs = 0, hf = 0;   /* where the starts' and the ends' searches were */
    for (size_t f = 0; f < raw->n_flows;) {
        size_t g = f;
        while (g < raw->n_flows && raw->flows[g].id == raw->flows[f].id) g++;
        const mp_tflow *b = &raw->flows[f];
        int32_t fo = b->start ? op_at(sp, S, b->tid, b->ts, &hs) : -1;
        for (size_t k = f + 1; fo >= 0 && k < g; k++) {
            const mp_tflow *e = &raw->flows[k];
            if (e->start) continue;
            int32_t bo = op_at(sp, S, e->tid, e->ts, &hf);
            if (bo >= 0 && bo != fo && !mp_bit_get(w->hasfwd, (size_t)bo)) {
                links[nl++] = (link){bo, fo};
                mp_bit_set(w->hasfwd, (size_t)bo);
                w->t->linked_flow++;
            }
        }
        f = g;
    }
    mp__trace_rec_free(raw->flows);   /* nothing reads the flows after */
    raw->flows = NULL;
    raw->n_flows = raw->cap_flows = 0;
    /* Sequence numbers, for the backward operators without a flow: a map
     * over their numbers alone, each given its forward operator.
     * Several forward operators share a sequence number: an operator that
     * creates no autograd node (a p=0 dropout, a view) leaves the counter
     * where it was, so it carries the number of the next one that does.
     * The node's creator is the last operator started with the number
     * (itself or one of its children, in its module): walk backwards and
     * keep the first seen. */
    const int32_t unset = INT32_MAX;
    size_t n_need = 0;
    int64_t max_need = -1;
    for (size_t i = 0; i < S; i++)
        if (sp[i].kind == MP_TS_OP && sp[i].seq >= 0 && (bn[sp[i].name] & NF_BACKWARD) &&
            !mp_bit_get(w->hasfwd, i)) {
            n_need++;
            max_need = MP_MAX(max_need, sp[i].seq);
        }
    mp_imap seq;
    bool ok = mp_imap_init_range(&seq, n_need, max_need);
    for (size_t i = 0; ok && i < S; i++)
        if (sp[i].kind == MP_TS_OP && sp[i].seq >= 0 && (bn[sp[i].name] & NF_BACKWARD) &&
            !mp_bit_get(w->hasfwd, i))
            ok = mp_imap_put(&seq, sp[i].seq, unset);
    if (!ok) {
        mp_imap_free(&seq);
        mp_big_free(links);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    for (size_t i = S; n_need && i-- > 0;) {
        if (sp[i].kind != MP_TS_OP || sp[i].seq < 0 || (bn[sp[i].name] & (NF_BACKWARD | NF_AUTOGRAD)))
            continue;
        int32_t *v = mp_imap_ref(&seq, sp[i].seq);
        if (v && *v == unset) *v = (int32_t)i;
    }
    for (size_t i = 0; i < S; i++) {
        if (sp[i].kind != MP_TS_OP || sp[i].seq < 0 || mp_bit_get(w->hasfwd, (size_t)i)) continue;
        if (!(bn[sp[i].name] & NF_BACKWARD)) continue;
        w->bwd_ops_seen = true;
        int32_t fo = mp_imap_get(&seq, sp[i].seq);
        if (fo >= 0 && fo != unset && sp[fo].ts < sp[i].ts) {
            links[nl++] = (link){(int32_t)i, fo};
            mp_bit_set(w->hasfwd, (size_t)i);
        }
    }
    mp_imap_free(&seq);
    size_t nset = 0;   /* nl: each link sets its bit once */
    w->fwd_rank = bit_ranks(w->hasfwd, S / 64 + 1, &nset);
    w->fwd_val = mp_big_alloc((nl + 1) * sizeof *w->fwd_val, false);
    if (!w->fwd_rank || !w->fwd_val) {
        mp_big_free(links);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    for (size_t l = 0; l < nl; l++) w->fwd_val[bit_rank(w->hasfwd, w->fwd_rank, (size_t)links[l].bo)] = links[l].fo;
    mp_big_free(links);
    for (size_t i = 0; i < S; i++) {
        if (sp[i].kind != MP_TS_OP) continue;
        if ((bn[sp[i].name] & (NF_BACKWARD | NF_AUTOGRAD)) == NF_BACKWARD) {
            w->t->bwd_ops++;
            if (mp_bit_get(w->hasfwd, (size_t)i)) w->t->linked_bwd++;
        }
    }
    return MP_OK;
}

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
static mp_status mem_curve(mp_trace *t, const mp_trace_raw *raw) {
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

static int kern_cmp(const void *x, const void *y) {
    const mp_tkernel *a = x, *b = y;
    if (a->total != b->total) return a->total > b->total ? -1 : 1;
    return strcmp(a->name, b->name);
}

static bool allocator_op(const char *n) {
    return starts(n, "aten::empty") || starts(n, "aten::new_empty") || strcmp(n, "aten::resize_") == 0;
}

/* The key_averages row of a name (ProfilerStep#N -> ProfilerStep*); -1
 * when out of memory. */
static int32_t op_row(mp_trace *t, mp_trace_raw *raw, int32_t *map, int nid, int star, bool dev,
                      int *cap) {
    if (starts(raw->names[nid], "ProfilerStep#")) nid = star;
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

static mp_status tables(work *w) {
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
        if (sp[i].kind == MP_TS_MODULE || mp_bit_get(w->merged, (size_t)i)) continue;
        int64_t kern = kern_of(w, i), dtot = kern, child = 0, dur = sp[i].end - sp[i].ts;
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
            if (sp[i].kind == MP_TS_MODULE) continue;
            o = resolve(w, i);
            break;
        }
        while (o >= 0 && (sp[o].end < me->ts || sp[o].kind == MP_TS_RUNTIME ||
                          allocator_op(raw->names[sp[o].name])))
            o = w->parent[o];
        if (o < 0) continue;
        int nid = starts(raw->names[sp[o].name], "ProfilerStep#") ? star : (int)sp[o].name;
        if (row_cpu[nid] >= 0) MP_SADD(t->ops[row_cpu[nid]].alloc_bytes, (int64_t)me->bytes);
    }
    free(cur);
    free(row_cpu);
    free(row_dev);
    if (t->n_ops > 1) qsort(t->ops, (size_t)t->n_ops, sizeof *t->ops, top_cmp);

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
            t->kernels[i].cat = (uint8_t)category(t->kernels[i].name, t->kernels[i].kind, t->kernels[i].op);
        if (t->n_kernels > 1) qsort(t->kernels, (size_t)t->n_kernels, sizeof *t->kernels, kern_cmp);
    }
    mp_imap_free(&pair);
    free(krow);
    mp_big_free(ptime);
    mp_big_free(pkr);
    mp_big_free(pop);
    return st;
}

/* ---- modules: forward and backward device time, FLOPs ---- */

static void modules(work *w) {
    mp_trace *t = w->t;
    if (t->n_mods <= 0) return;
    mp_tspan *sp = w->raw->spans;
    for (size_t d = 0; d < w->D; d++) {
        int32_t o = w->devop[d];
        if (o < 0) continue;
        int64_t dur = w->raw->devs[d].end - w->raw->devs[d].ts;
        int32_t x = o;
        while (x >= 0 && !mp_bit_get(w->hasfwd, (size_t)x)) x = w->parent[x];
        if (x >= 0) {
            int m = w->mod[fwd_of(w, x)];
            if (m >= 0) MP_SADD(t->mfig[m].bwd, dur);
        } else if (w->mod[o] >= 0) {
            MP_SADD(t->mfig[w->mod[o]].fwd, dur);
        }
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
        int32_t x = i;
        while (x >= 0 && !mp_bit_get(w->hasfwd, (size_t)x)) x = w->parent[x];
        if (x >= 0) {
            int m = w->mod[fwd_of(w, x)];
            if (m >= 0) MP_SADD(t->mfig[m].bwd_flops, fl);
        } else if (w->mod[i] >= 0) {
            MP_SADD(t->mfig[w->mod[i]].flops, fl);
        }
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

static mp_status launch_times(const work *w, const ival *u, size_t nu, int64_t **out) {
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
static ival *held_ranges(const mp_trace_raw *raw, size_t *n) {
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
static mp_status host_ranges(mp_trace *t, const mp_trace_raw *raw, const ival *u, size_t nu,
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

/* ---- steps: busy, idle by cause, device time by category, memory ---- */

/* The steps: ProfilerStep#N annotations, else the whole trace; in time
 * order (the spans in file order: steps starting at the same time stay in
 * it). Their start and length are set here only (what reads them may run
 * beside steps()). */
static mp_status steps_list(work *w) {
    mp_trace *t = w->t;
    mp_trace_raw *raw = w->raw;
    mp_tspan *sp = raw->spans;
    size_t S = w->S, D = w->D;
    const char **nm = raw->names;
    int scap = 0;
    for (size_t i = 0; i < S; i++) {
        if (sp[i].kind != MP_TS_ANNOT || !starts(nm[sp[i].name], "ProfilerStep#")) continue;
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
static mp_status keep_allocs(work *w) {
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
static mp_status step_memory(work *w) {
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
    return mem_curve(t, raw);
}

/* Each step's figures: device busy and idle by cause, device time by
 * category, optimizer, FLOPs; then the host's ranges. */
static mp_status steps(work *w) {
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
    bool sorted = mp_idx_msort(dk, dtmp, 0, nd, dev_cmp, raw->devs, &runs, &rcap);
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
    if ((st = launch_times(w, u, nu, &launch)) != MP_OK) goto out;
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
    rgs = held_ranges(raw, &nrg);
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
                if (kc[dv->name] == 0x7f) kc[dv->name] = (int8_t)kernel_category(nm[dv->name]);
                c = kc[dv->name];
                if (c != MP_TC_COMM && o >= 0) {
                    uint32_t on = sp[o].name;
                    if (oc[on] == 0x7f) oc[on] = (int8_t)op_category(nm[on]);
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
        if (sp[i].kind != MP_TS_ANNOT || !starts(nm[sp[i].name], "Optimizer.step#")) continue;
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
        if (dv->kind != MP_TD_ANNOT || !starts(nm[dv->name], "Optimizer.step#")) continue;
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
    st = host_ranges(t, raw, u, nu, loader, nl, hc, nhc);
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

/* ---- FLOPs: backward share, the math the kernels used, uncounted ops ---- */

/* A kernel that ran fp32 operands on tensor cores (TF32): CUTLASS
 * "tensorop_s1688"/"s16816" kernels, cuBLAS/cuDNN xmma kernels named tf32. */

static int unc_cmp(const void *x, const void *y) {
    const mp_tuncounted *a = x, *b = y;
    if (a->device != b->device) return a->device > b->device ? -1 : 1;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* Fills t->flops_bwd, steps' flops_bwd, t->dominant_dtype (fp32 operators
 * whose kernels ran as TF32 count as tf32) and t->uncounted. */
static mp_status flop_summary(work *w) {
    mp_trace *t = w->t;
    mp_trace_raw *raw = w->raw;
    mp_tspan *sp = raw->spans;
    size_t S = w->S;
    const char **nm = raw->names;
    size_t words = S / 64 + 1;
    /* bit sets over spans: launched kernels itself; its kernels ran fp32 on tensor cores */
    uint64_t *launched = mp_big_alloc(words * sizeof *launched, true), *tc = mp_big_alloc(words * sizeof *tc, true);
    int32_t *row = malloc(((size_t)raw->n_names + 1) * sizeof *row);
    if (!tc || !launched || !row) {
        mp_big_free(tc);
        mp_big_free(launched);
        free(row);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    for (size_t d = 0; d < w->D; d++) {
        int32_t o = w->devop[d];
        if (o < 0 || raw->devs[d].kind != MP_TD_KERNEL) continue;
        o = resolve(w, o);
        mp_bit_set(launched, o);
        int32_t c = outer_of(w, o);
        if (c >= 0 && sp[c].dtype == MP_TDT_FP32 && (mp__trace_kflags(raw, raw->devs[d].name) & MP_TK_TF32))
            mp_bit_set(tc, c);
    }
    uint64_t by[MP_TDT_COUNT] = {0};
    for (size_t f = 0; f < raw->n_flops; f++) {
        int32_t i = (int32_t)raw->flops[f].span;
        uint64_t fl = raw->flops[f].flops;
        if (mp_bit_get(w->merged, (size_t)i) || outer_of(w, i) != i) continue;
        int dt = sp[i].dtype < MP_TDT_COUNT ? sp[i].dtype : MP_TDT_NONE;
        if (dt == MP_TDT_FP32 && mp_bit_get(tc, i)) dt = MP_TDT_TF32;
        MP_SADD(by[dt], fl);
        /* backward: tied to a forward operator, or named so (itself or an
         * enclosing operator: a trace without flows or sequence numbers) */
        int32_t x = i;
        while (x >= 0 && !mp_bit_get(w->hasfwd, (size_t)x) && !(w->nf[sp[x].name] & (NF_BACKWARD | NF_UBACKWARD)))
            x = w->parent[x];
        if (x < 0) continue;
        int k = mp__trace_step_at(t, sp[i].ts);
        if (k < 0) continue;
        MP_SADD(t->flops_bwd, fl);
        MP_SADD(t->steps[k].flops_bwd, fl);
    }
    t->dominant_dtype = MP_TDT_NONE;
    for (int d = 1; d < MP_TDT_COUNT; d++)
        if (by[d] > (t->dominant_dtype ? by[t->dominant_dtype] : 0)) t->dominant_dtype = d;
    /* uncounted: operators that launched kernels themselves, inside no
     * counted operator, with no rule, that do more than move data */
    memset(row, 0xff, ((size_t)raw->n_names + 1) * sizeof *row);
    int cap = 0;
    mp_status st = MP_OK;
    for (size_t i = 0; i < S && st == MP_OK; i++) {
        if (!mp_bit_get(launched, i) || sp[i].kind != MP_TS_OP || mp_bit_get(w->merged, (size_t)i) ||
            outer_of(w, (int32_t)i) >= 0 || mp__trace_step_at(t, sp[i].ts) < 0 ||
            (w->nf[sp[i].name] & NF_FLOP_FREE))
            continue;
        int32_t r = row[sp[i].name];
        if (r < 0) {
            mp_tuncounted *nu = mp_grow(t->uncounted, sizeof *t->uncounted, &cap, t->n_uncounted + 1);
            if (!nu) {
                st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
                break;
            }
            t->uncounted = nu;
            r = row[sp[i].name] = t->n_uncounted++;
            memset(&t->uncounted[r], 0, sizeof t->uncounted[r]);
            t->uncounted[r].name = nm[sp[i].name];
        }
        t->uncounted[r].count++;
        MP_SADD(t->uncounted[r].device, kern_of(w, (int32_t)i));
    }
    if (t->n_uncounted > 1)
        qsort(t->uncounted, (size_t)t->n_uncounted, sizeof *t->uncounted, unc_cmp);
    mp_big_free(tc);
    mp_big_free(launched);
    free(row);
    return st;
}

/* ---- several traces: ranks of one run, or separate jobs ---- */

bool mp_trace_one_run(const mp_trace *const *t, int n, char *why, size_t nwhy) {
    char dummy[8];
    if (!why) {
        why = dummy;
        nwhy = sizeof dummy;
    }
    if (nwhy) why[0] = 0;
    if (n < 2) return true;
    for (int i = 0; i < n; i++) {
        const mp_trace_raw *a = &t[i]->raw;
        if (a->rank < 0) {
            snprintf(why, nwhy, "%s has no distributedInfo rank", t[i]->path ? t[i]->path : "a trace");
            return false;
        }
        for (int j = 0; j < i; j++) {
            const mp_trace_raw *b = &t[j]->raw;
            const char *pa = t[i]->path ? t[i]->path : "?", *pb = t[j]->path ? t[j]->path : "?";
            if (a->rank == b->rank) {
                snprintf(why, nwhy, "%s and %s are both rank %d", pb, pa, a->rank);
                return false;
            }
            if (a->world_size != b->world_size) {
                snprintf(why, nwhy, "%s and %s have different world sizes (%d, %d)", pb, pa,
                         b->world_size, a->world_size);
                return false;
            }
            if (strcmp(a->device_name, b->device_name) != 0) {
                snprintf(why, nwhy, "%s and %s ran on different devices (%s, %s)", pb, pa,
                         b->device_name, a->device_name);
                return false;
            }
        }
    }
    return true;
}

/* ---- entry points ---- */

/* The [memory] records by time, stably (equal times keep their order), by
 * the natural merge sort of the spans (mp_idx_msort): a trace holds them in
 * few runs (one per copy, or per piece read at once), so it is linear when
 * they are in order and n log(runs) otherwise. */
static int mem_idx_cmp(const void *ctx, int32_t x, int32_t y) {
    const mp_tmem *m = ctx;
    if (m[x].ts != m[y].ts) return m[x].ts < m[y].ts ? -1 : 1;
    return (x > y) - (x < y);
}

/* The [memory] records in time order (stable), moved in place: a copy of
 * them would be the analysis' largest array at the time. */
static bool sort_mems(mp_tmem *m, size_t n) {
    size_t runs = 1;
    for (size_t i = 1; i < n; i++) runs += m[i].ts < m[i - 1].ts;
    if (runs == 1) return true;
    if (n > INT32_MAX) return false;
    int32_t *a = malloc(n * sizeof *a), *tmp = malloc(n * sizeof *tmp);
    uint32_t *rl = NULL;
    size_t cap = 0;
    bool ok = a && tmp;
    for (size_t i = 0; ok && i < n; i++) a[i] = (int32_t)i;
    ok = ok && mp_idx_msort(a, tmp, 0, n, mem_idx_cmp, m, &rl, &cap);
    free(tmp);
    free(rl);
    _Static_assert(sizeof *m <= 64, "mp_permute_records keeps a record of at most 64 bytes");
    if (ok) mp_permute_records(m, sizeof *m, a, n);
    free(a);
    return ok;
}

/* Steps of the analysis run on a second thread (a lane) beside others that
 * read nothing they write; once sorted, the spans are only read. The
 * lane's error message is carried back (mp_error's text is per thread). */
typedef struct lane {
    work *w;
    mp_status (*fn)(work *w);
    mp_status st;
    char msg[256];
    pthread_t th;
    bool started;
} lane;

static void *lane_main(void *arg) {
    lane *l = arg;
    l->st = l->fn(l->w);
    if (l->st != MP_OK) snprintf(l->msg, sizeof l->msg, "%s", mp_last_error());
    return NULL;
}

/* fn on a thread of its own when the analysis has two, else nothing yet
 * (lane_join runs it). */
static void lane_start(lane *l, work *w, mp_status (*fn)(work *w)) {
    *l = (lane){.w = w, .fn = fn, .st = MP_OK};
    l->started = w->two && pthread_create(&l->th, NULL, lane_main, l) == 0;
}

/* The lane done (run here when it had no thread and st is MP_OK); st, or
 * the lane's error. A lane never started (zeroed, st an error) is a no-op. */
static mp_status lane_join(lane *l, mp_status st) {
    if (l->started) pthread_join(l->th, NULL);
    else if (st == MP_OK) lane_main(l);
    if (st == MP_OK && l->st != MP_OK) st = mp_error(l->st, "%s", l->msg);
    return st;
}

/* A step's figures, then its collectives (which read them). */
static mp_status steps_comm(work *w) {
    mp_status st = steps(w);
    return st == MP_OK ? mp__trace_comm_steps(w->t) : st;
}

mp_status mp_trace_analyze(mp_trace_raw *raw, const mp_trace_options *o, mp_trace *t) {
    memset(t, 0, sizeof *t);
    t->raw = *raw;
    memset(raw, 0, sizeof *raw);
    raw = &t->raw;
    mp_trace_options def = {0, -1, 20};
    if (!o) o = &def;
    if (raw->n_spans >= INT32_MAX || raw->n_devs >= INT32_MAX)
        return mp_error(MP_ERR_LIMIT, "trace: more than 2^31 events of one kind");
    work w;
    memset(&w, 0, sizeof w);
    w.t = t;
    w.raw = raw;
    w.S = raw->n_spans;
    w.D = raw->n_devs;
    w.two = o->threads > 1 || (o->threads == 0 && mp__trace_cores() > 1);
    mp_status st = MP_OK;
    /* the External-id index (reading the spans) beside the name flags and
     * the memory records' sort */
    lane el = {0};
    lane_start(&el, &w, build_ext);
    w.nf = name_flags(raw);
    w.hasfwd = mp_big_alloc((w.S / 64 + 1) * sizeof *w.hasfwd, true);
    w.merged = mp_big_alloc((w.S / 64 + 1) * sizeof *w.merged, true);
    if (!w.nf || !w.hasfwd || !w.merged || !sort_mems(raw->mems, raw->n_mems))
        st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
    st = lane_join(&el, st);
    /* Each step frees what the later ones do not read, so that few of the
     * per-span arrays are held at once (memory: docs/DESIGN.md "Reading").
     * First the steps and their memory: then the [memory] records give way
     * to the allocations alone (a third of their size) before the spans'
     * sort makes its arrays. */
    if (st == MP_OK) st = steps_list(&w);
    if (st == MP_OK) st = step_memory(&w);
    if (st == MP_OK) st = keep_allocs(&w);
    if (st == MP_OK) st = sort_spans(&w);
    /* the backward links (reading the flows, writing hasfwd and fwd_val)
     * beside the device links, the tree and the tables */
    lane bl = {0};
    if (st == MP_OK) lane_start(&bl, &w, link_backward);
    if (st == MP_OK) st = link_devices(&w);
    if (st == MP_OK) st = link_tree(&w);
    mp_big_free(w.nchild);     /* only merging needed it */
    w.nchild = NULL;
    if (st == MP_OK) st = tables(&w);
    mp_big_free(w.allocs);     /* the tables were the last to read them */
    w.allocs = NULL;
    st = lane_join(&bl, st);
    if (st == MP_OK) modules(&w);
    mp_big_free(w.mod);        /* modules() is the last to read these */
    w.mod = NULL;
    mp__trace_trim();
    if (st == MP_OK) st = mp__trace_calls(t, w.devop, w.parent);   /* asks every kernel's flags */
    /* the steps' figures and collectives (writing each step's but the
     * backward FLOPs) beside the FLOP summary (which reads the steps'
     * bounds alone) */
    lane sl = {0};
    if (st == MP_OK) lane_start(&sl, &w, steps_comm);
    if (st == MP_OK) st = flop_summary(&w);   /* the dtype doing most of the counted FLOPs */
    st = lane_join(&sl, st);
    if (st == MP_OK) {
        if (o->peak_tflops > 0) {
            t->peak_tflops = o->peak_tflops;
            t->peak_source = "--peak-tflops";
        } else {
            const char *label;
            t->peak_tflops = mp_trace_peak(raw->device_name, t->dominant_dtype, &label);
            if (t->peak_tflops > 0)
                t->peak_source = mp_arena_printf(&raw->arena, "datasheet: %s %s dense", label,
                                                 mp_tdtype_names[t->dominant_dtype]);
            if (t->peak_tflops > 0 && t->dominant_dtype == MP_TDT_TF32)
                t->peak_source = mp_arena_printf(&raw->arena,
                                                 "datasheet: %s tf32 dense (fp32 operators whose "
                                                 "matrix kernels ran on tensor cores as TF32)",
                                                 label);
        }
        /* what the trace did not record (findings.c says what it costs) */
        size_t nops = 0;
        for (size_t i = 0; i < raw->n_spans; i++) nops += raw->spans[i].kind == MP_TS_OP;
        t->no_device = raw->n_devs == 0 && t->mem_peak_alloc < 0;   /* no kernels, no device memory */
        t->no_shapes = nops > 0 && raw->n_shaped == 0;
        t->no_modules = nops > 0 && t->n_mods <= 1;
        if (!mp__trace_churn(t)) st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
        mp_trace_findings(t);
    }
    mp_big_free(w.fwd_rank);
    mp_big_free(w.fwd_val);
    mp_big_free(w.allocs);
    mp_big_free(w.kbits);
    mp_big_free(w.krank);
    mp_big_free(w.kval);
    mp_big_free(w.hasfwd);
    mp_big_free(w.merged);
    eidx_free(&w.ext);
    mp_big_free(w.nchild);
    mp_big_free(w.parent);
    mp_big_free(w.mod);
    mp_big_free(w.devop);
    free(w.nf);
    if (st != MP_OK) mp_trace_free(t);
    return st;
}

/* Whether a file is a digest (its first bytes say). */
static bool digest_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char head[64];
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    return mp_trace_is_digest(head, n);
}

/* ONNX Runtime's profile is no torch.profiler trace: say how to read it. */
static mp_status mp__not_ort(mp_trace_raw *raw, const char *label) {
    if (!raw->n_orts || raw->n_spans || raw->n_devs) return MP_OK;
    mp_trace_raw_free(raw);
    return mp_error(MP_ERR_FORMAT,
                    "%s: ONNX Runtime's profile, not a torch.profiler trace: place it on its model with "
                    "`modelprof MODEL.onnx --ort-profile %s`",
                    label, label);
}

mp_status mp_trace_open(const char *path, const mp_trace_options *o, mp_trace *t) {
    mp_trace_raw raw;
    memset(t, 0, sizeof *t);
    if (digest_file(path)) return mp_trace_digest_file(path, t);
    mp_status st = mp_trace_read_file_pieces(path, &raw, o ? o->threads : 0, 0);
    if (st == MP_OK) st = mp__not_ort(&raw, path);
    if (st != MP_OK) return st;
    st = mp_trace_analyze(&raw, o, t);
    if (st == MP_OK) t->path = path;
    return st;
}

mp_status mp_trace_open_memory(const void *data, size_t size, const char *label,
                               const mp_trace_options *o, mp_trace *t) {
    mp_trace_raw raw;
    memset(t, 0, sizeof *t);
    mp_status st = mp_trace_read_memory(data, size, label, &raw);
    if (st == MP_OK) st = mp__not_ort(&raw, label ? label : "(memory)");
    if (st != MP_OK) return st;
    st = mp_trace_analyze(&raw, o, t);
    if (st == MP_OK) t->path = label;
    return st;
}

void mp_trace_free(mp_trace *t) {
    if (!t) return;
    mp_trace_raw_free(&t->raw);
    free(t->mem_curve);
    free(t->steps);
    free(t->ops);
    free(t->kernels);
    free(t->mods);
    free(t->mfig);
    free(t->findings);
    free(t->uncounted);
    free(t->calls);
    free(t->timeline);
    free(t->hranges);
    memset(t, 0, sizeof *t);
}
