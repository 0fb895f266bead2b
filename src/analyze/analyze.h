/* Analysis: inference driver, parameters, memory and aggregation. */
#ifndef MP_ANALYZE_H
#define MP_ANALYZE_H

#include "analyze/profile.h"
#include "ops/ops.h"

/* Infer shapes and costs of the main graph from the user's dims. */
mp_status mp_infer_model(mp_model *m);

/* The same one node at a time, for a caller that reads each node's
 * results while they are in cache: mp_infer_begin resets the main graph
 * (listing its initializers in inits, n_values entries, unless NULL),
 * then mp_infer_node on each node of g->order in turn. */
mp_status mp_infer_begin(mp_model *m, int *inits, int *n_inits);
mp_status mp_infer_node(mp_model *m, mp_graph *g, int k);

/* mp_dtype_bytes inline, with the same results, for the paths taken for
 * every input and output of every node (with mp_numel, ops.h). */
static inline uint64_t mp__bytes(int dt, int64_t numel) {
    static const unsigned char bits[MP_DT_COUNT] = {
#define MP__DT_BITS(id, name, b) b,
        MP_DTYPE_LIST(MP__DT_BITS)
#undef MP__DT_BITS
    };
    if (numel <= 0) return 0;
    uint64_t b = (dt >= 0 && dt < MP_DT_COUNT) ? bits[dt] : 0, r;
    if (__builtin_mul_overflow((uint64_t)numel, b, &r)) return UINT64_MAX;
    return (r + 7) / 8;
}

#endif
