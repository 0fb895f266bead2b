/* The profile: the one result structure every report writer reads. The
 * static analysis fills it; the measured run (later) adds latencies. */
#ifndef MP_PROFILE_H
#define MP_PROFILE_H

#include "analyze/formula.h"
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
    double latency_s;       /* measured run: median over the timed runs; < 0 when not measured */
    double latency_min_s;   /* measured run: fastest timed run; < 0 when not measured */
} mp_fig;

typedef struct mp_opstat {
    const char *domain;     /* "" default domain */
    const char *op;
    mp_fig fig;
} mp_opstat;

/* What a measured run adds (mp_profile_run): the run as a whole. */
typedef struct mp_runinfo {
    int iters, warmup, threads;
    bool fuse, node_timing;
    double lat_median_s, lat_p90_s, lat_min_s;  /* whole forward passes */
    /* the kernels' summed time in each pass (without the timer and the
     * dispatch between them): median and fastest over the passes; never
     * above the pass's: < 0 without node timing */
    double kernels_median_s, kernels_min_s;
    int64_t batch;                  /* samples per pass: dim 0 of the first input */
    double peak_flops_per_s;        /* the machine's fp32 peak; 0 unknown */
    const char *peak_source;        /* "measured" or "given" */
    const char *peak_method;        /* how a measured peak was obtained (static) */
    int kernels_above_peak;         /* by-operator rows whose median rate is above the peak
                                       (measured: after measuring it again) */
    uint64_t arena_bytes;           /* activation arena */
    uint64_t weight_bytes;          /* weights used in place (mapped) and copies */
    uint64_t weight_copy_bytes;     /* the copies among them (decoded, random, folded) */
    uint64_t input_bytes, scratch_bytes, dynamic_bytes;
    uint64_t peak_memory_bytes;     /* sum of the above */
    uint64_t peak_rss_bytes;        /* the process's peak resident set (getrusage) */
    int steps;                      /* kernels called per pass */
    int folded;                     /* nodes folded away at plan time */
    int fused;                      /* nodes absorbed into a fused group */
} mp_runinfo;

/* A fused group's figures, or a lone kernel's: the by-kernel view. */
typedef struct mp_groupstat {
    const char *name;       /* "Conv+BatchNormalization+Relu", or the op type */
    const char *kernel;     /* the kernel of its first step ("portable", "onednn:conv", ...) */
    int count;              /* steps of this kind per pass */
    bool fused;
    double latency_s, latency_min_s; /* summed per pass: median, fastest */
    uint64_t flops;
} mp_groupstat;

/* A tensor whose parameter count needed judging (docs/COUNTING.md,
 * "Folded and tied parameters"): a constant the exporter derived from
 * declared parameters, or a tensor that is (or may be) a copy of a named
 * parameter. */
enum {
    MP_PNOTE_DERIVED = 1, /* derived from declared parameters: counted as them */
    MP_PNOTE_BOUND,       /* broadcast from a parameter of unknown shape: its own elements, an upper bound */
    MP_PNOTE_SAME,        /* equal to a transpose / cast / reshape of a named parameter: that parameter */
    MP_PNOTE_MAYBE_COPY,  /* weights absent: its shape is a permutation of a named parameter's */
};
#define MP_PNOTE_SRC 4
typedef struct mp_param_note {
    int kind;               /* MP_PNOTE_* */
    int value;              /* the tensor (a main-graph value) */
    int source;             /* SAME, MAYBE_COPY: the named parameter (a value); else -1 */
    int src[MP_PNOTE_SRC];  /* DERIVED, BOUND: its declared parameters (m->sig_params indexes) */
    int n_src;              /* how many there are (the first MP_PNOTE_SRC are kept) */
    const char *how;        /* "expand", "transpose", "cast", ...; NULL when not known */
    uint64_t elems;         /* the tensor's own elements */
    uint64_t counted;       /* what it adds to params */
} mp_param_note;

struct mp_profile {
    struct mp_model *m;
    mp_fig total;
    uint64_t params_by_dtype[MP_DT_COUNT];
    uint64_t param_bytes_by_dtype[MP_DT_COUNT];
    uint64_t activation_peak_bytes;
    /* buffers: non-learnable state the model keeps (declared BUFFERs,
     * BatchNorm statistics, tables derived from buffers) */
    uint64_t buffers, buffer_elems, buffer_bytes;
    /* parameters counted by judgement (mp_param_note), the upper bound and
     * possible copies they leave, and whether the exporter folded
     * BatchNorm into the convolutions (params are then the folded graph's) */
    mp_param_note *pnotes;
    int n_pnotes, cap_pnotes;
    bool params_bound;             /* params is an upper bound (MP_PNOTE_BOUND) */
    uint64_t params_bound_excess;  /* elements the bound may count too many, at most */
    uint64_t params_maybe_copies;  /* elements counted that may be copies (MP_PNOTE_MAYBE_COPY) */
    bool bn_folded;
    int peak_node;          /* node (main graph) at which the peak occurs */
    mp_fig *mods;           /* per module, indexed like m->modules */
    mp_opstat *ops;         /* per op type, by decreasing FLOPs then MACs */
    int n_ops;
    int *unresolved;        /* symbols on inputs without a value */
    int n_unresolved;
    bool overflow;          /* some total saturated */
    bool measured;          /* latencies filled by a measured run */
    /* measured run (mp_profile_run); NULL / zero for a static profile */
    mp_runinfo run;
    double *node_lat;       /* per main-graph node: median seconds (its group's, for a head) */
    double *node_lat_min;
    int *node_state;        /* MP_NODE_RUN, MP_NODE_FOLDED, MP_NODE_FUSED */
    int *node_head;         /* fused: the head node of its group; else itself */
    const char **node_group; /* head of a fused group: the group's name; else NULL */
    const char **node_kernel; /* head: its kernel's name ("portable", "onednn:conv", ...); else NULL */
    int *mod_fused;         /* per module: 1 + the module whose fused group runs its nodes; 0 none */
    mp_groupstat *groups;   /* by total time, decreasing */
    int n_groups;
    /* cost as exact formulas in the free dims (mp_profile_formulas); NULL
     * when not asked for */
    mp_formulas *formulas;
};

enum { MP_NODE_RUN = 0, MP_NODE_FOLDED = 1, MP_NODE_FUSED = 2 };

/* Free the measured fields (a run fills them again). */
void mp_profile_free_measured(mp_profile *p);

/* Walk the module tree depth-first (pre-order), skipping modules deeper
 * than max_depth (-1: all). The callback returns false to skip children. */
typedef bool (*mp_module_visit)(const mp_profile *p, int module, void *ud);
void mp_module_walk(const mp_profile *p, int max_depth, mp_module_visit fn, void *ud);

#endif
