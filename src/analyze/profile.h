/* The profile: the one result structure every report writer reads. The
 * static analysis fills it; the measured run (later) adds latencies. */
#ifndef MP_PROFILE_H
#define MP_PROFILE_H

#include "graph/graph.h"

/* Figures of a node set (a module, an op type, the whole model). */
typedef struct mp_fig {
    uint64_t params;        /* unique params used by the set */
    uint64_t param_bytes;
    uint64_t macs, flops;
    uint64_t bytes_read, bytes_written;
    uint64_t act_bytes;     /* bytes of outputs produced */
    int nodes;
    int uncounted;          /* nodes without a cost rule */
    int unknown;            /* nodes whose cost needs unknown dims */
    double latency_s;       /* measured run; < 0 when not measured */
} mp_fig;

typedef struct mp_opstat {
    const char *domain;     /* "" default domain */
    const char *op;
    mp_fig fig;
} mp_opstat;

struct mp_profile {
    struct mp_model *m;
    mp_fig total;
    uint64_t params_by_dtype[MP_DT_COUNT];
    uint64_t param_bytes_by_dtype[MP_DT_COUNT];
    uint64_t activation_peak_bytes;
    /* buffers: non-learnable state the model keeps (declared BUFFERs,
     * BatchNorm statistics, tables derived from buffers) */
    uint64_t buffers, buffer_elems, buffer_bytes;
    int peak_node;          /* node (main graph) at which the peak occurs */
    mp_fig *mods;           /* per module, indexed like m->modules */
    mp_opstat *ops;         /* per op type, by decreasing FLOPs then MACs */
    int n_ops;
    int *unresolved;        /* symbols on inputs without a value */
    int n_unresolved;
    bool overflow;          /* some total saturated */
    bool measured;          /* latencies filled by a measured run */
};

/* Walk the module tree depth-first (pre-order), skipping modules deeper
 * than max_depth (-1: all). The callback returns false to skip children. */
typedef bool (*mp_module_visit)(const mp_profile *p, int module, void *ud);
void mp_module_walk(const mp_profile *p, int max_depth, mp_module_visit fn, void *ud);

#endif
