/* What the trace analysis's files share (analyze.c: the linking pass,
 * FLOPs, several traces and the entry points; order.c: the order spans are
 * linked in; tables.c: the operator and kernel tables; modules.c: module
 * times and FLOPs; steps.c: steps, idle time by cause, memory). Internal
 * to src/trace/. */
#ifndef MP_TRACE_ANALYZE_INT_H
#define MP_TRACE_ANALYZE_INT_H

#include "trace/trace.h"
#include "base/arrays.h"
#include "base/gpu.h"
#include "trace/ival.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <malloc.h>

/* Operators and annotations by External id: their indices sorted by
 * (External id, index), found by binary search (a map over the ids would
 * be as large as their range, and the ids of a long trace leave gaps). */
typedef struct eidx {
    const mp_tspan *sp;
    int32_t *a;
    size_t n;
} eidx;
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

bool tr_starts(const char *s, const char *pre);
int tr_op_category(const char *op);
bool mp__trace_user_range(const char *n);
int tr_kernel_category(const char *k);
int tr_category(const char *k, int kind, const char *op);
void mp_trace_short_name(const char *name, char *out, size_t n);
bool tr_span_sort(const mp_tspan *sp, int32_t *a, int32_t *tmp, size_t n, int n_threads, bool two);
bool tr_eidx_build(eidx *e, const mp_tspan *sp, size_t S);
int32_t tr_eidx_get(const eidx *e, int64_t k, size_t *hint);
void tr_eidx_remap(eidx *e, const int32_t *newidx);
void tr_eidx_ties(eidx *e);
void tr_eidx_free(eidx *e);
void tr_order_spans(mp_tspan *sp, int32_t *perm, int32_t *tmp, size_t S, int n_threads);
int tr_flop_cmp(const void *x, const void *y);
int tr_comm_cmp(const void *x, const void *y);
int tr_dev_cmp(const void *ctx, int32_t x, int32_t y);
int32_t tr_resolve(const work *w, int32_t s);
int64_t tr_kern_of(const work *w, int32_t i);
int32_t tr_fwd_of(const work *w, int32_t i);
int mp__trace_intern(mp_trace_raw *raw, const char *s);
mp_status tr_mem_curve(mp_trace *t, const mp_trace_raw *raw);
mp_status tr_tables(work *w);
void tr_modules(work *w);
int mp__trace_step_at(const mp_trace *t, int64_t ts);
mp_status tr_launch_times(const work *w, const ival *u, size_t nu, int64_t **out);
ival *tr_held_ranges(const mp_trace_raw *raw, size_t *n);
mp_status tr_host_ranges(mp_trace *t, const mp_trace_raw *raw, const ival *u, size_t nu,
                             const ival *loader, size_t nl, const ival *hc, size_t nhc);
mp_status tr_steps_list(work *w);
mp_status tr_keep_allocs(work *w);
mp_status tr_step_memory(work *w);
mp_status tr_steps(work *w);

#endif
