/* Allocator churn in a torch.profiler trace (issue 32 item 7; docs/DESIGN.md
 * "Allocator churn"): after the first step a training loop's caching
 * allocator normally holds what it needs, so every cudaMalloc or cudaFree
 * there (and, with expandable segments, every cuMemCreate, cuMemMap,
 * cuMemUnmap, cuMemRelease) is memory handed back to the driver and asked
 * for again: shapes that vary from step to step, torch.cuda.empty_cache() in
 * the loop, or an allocator near the device's capacity freeing its cache to
 * satisfy a request (c10/cuda/CUDACachingAllocator.cpp: alloc_block calls
 * cudaMalloc for a new segment, release_cached_blocks calls cudaFree, and
 * cudaFree waits for the device). The [memory] events' "Total Reserved"
 * shows the same from the allocator's side: it moves only when segments are
 * allocated or released. The figures read the runtime spans (kept by the
 * reader) and the Total Reserved changes (mp_tresv); findings.c words them. */
#include "trace/trace.h"

#include <stdlib.h>

/* The calls that give memory to the caching allocator or take it back:
 * 1 allocates, 2 frees, 0 neither. */
static int alloc_call(const char *n) {
    static const char *const get[] = {"cudaMalloc", "cuMemAlloc_v2", "cuMemCreate", "cuMemMap"};
    static const char *const put[] = {"cudaFree", "cuMemFree_v2", "cuMemRelease", "cuMemUnmap"};
    for (size_t i = 0; i < MP_ARRAY_LEN(get); i++)
        if (strcmp(n, get[i]) == 0) return 1;
    for (size_t i = 0; i < MP_ARRAY_LEN(put); i++)
        if (strcmp(n, put[i]) == 0) return 2;
    return 0;
}

static int resv_cmp(const void *x, const void *y) {
    const mp_tresv *a = x, *b = y;
    if (a->device != b->device) return a->device < b->device ? -1 : 1;
    return (a->ts > b->ts) - (a->ts < b->ts);
}

bool mp__trace_churn(mp_trace *t) {
    struct mp_tchurn *c = &t->churn;
    memset(c, 0, sizeof *c);
    c->lo = c->hi = -1;
    if (t->n_steps < 2) return true;
    const mp_trace_raw *raw = &t->raw;
    c->steps = t->n_steps - 1;
    int64_t a = t->steps[1].ts, b = a;
    for (int k = 1; k < t->n_steps; k++) b = MP_MAX(b, t->steps[k].ts + t->steps[k].wall);
    /* the calls, by name once */
    int8_t *kind = malloc((size_t)raw->n_names + 1);
    if (!kind) return false;
    memset(kind, -1, (size_t)raw->n_names + 1);
    for (size_t i = 0; i < raw->n_spans; i++) {
        const mp_tspan *sp = &raw->spans[i];
        if (sp->kind != MP_TS_RUNTIME || sp->ts < a || sp->ts >= b) continue;
        if (kind[sp->name] < 0) kind[sp->name] = (int8_t)alloc_call(raw->names[sp->name]);
        if (!kind[sp->name]) continue;
        if (kind[sp->name] == 1) c->mallocs++;
        else c->frees++;
        MP_SADD(c->ns, sp->end - sp->ts);
    }
    free(kind);
    /* Total Reserved over the steps after the first, per device: from the
     * value it had when they began, each change inside them */
    if (!raw->n_resvs) return true;
    mp_tresv *v = malloc(raw->n_resvs * sizeof *v);
    if (!v) return false;
    memcpy(v, raw->resvs, raw->n_resvs * sizeof *v);
    qsort(v, raw->n_resvs, sizeof *v, resv_cmp);
    for (size_t i = 0; i < raw->n_resvs;) {
        size_t j = i;
        int64_t cur = -1, lo = -1, hi = -1;   /* the device's reserved as the window goes */
        for (; j < raw->n_resvs && v[j].device == v[i].device; j++) {
            if (v[j].ts < a) {
                cur = v[j].reserved;
                continue;
            }
            if (v[j].ts >= b) continue;
            if (cur >= 0 && v[j].reserved != cur) c->changes++;
            for (int q = 0; q < 2; q++) {   /* the value it had, then the new one */
                int64_t x = q ? v[j].reserved : cur;
                if (x < 0) continue;
                lo = lo < 0 ? x : MP_MIN(lo, x);
                hi = MP_MAX(hi, x);
            }
            cur = v[j].reserved;
        }
        if (lo >= 0 && (c->lo < 0 || hi - lo > c->hi - c->lo)) {   /* the device that moved most */
            c->lo = lo;
            c->hi = hi;
        }
        i = j;
    }
    free(v);
    return true;
}
