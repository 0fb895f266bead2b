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
    int fused;              /* measured run: nodes of the set that ran inside a kernel
                               headed by another node (a fused group) */
} mp_fig;

typedef struct mp_opstat {
    const char *domain;     /* "" default domain */
    const char *op;
    mp_fig fig;
} mp_opstat;

/* One operator type inside one module (the module's nodes and its
 * submodules'): the by-module-and-operator split (fvcore's
 * by_module_and_operator). A module's rows sum exactly to its figures:
 * params too, a parameter counted in the row of the first node that reads
 * it in execution order among the module's nodes (docs/COUNTING.md,
 * "By module and operator"). */
typedef struct mp_modop {
    int op;                 /* index into p->ops; MP_MODOP_UNUSED: parameters no node reads (the
                               root only); MP_MODOP_FOLDED: a module's parameters the exporter
                               folded into a node of another module (a BatchNorm into the
                               convolution before it) */
    mp_fig fig;
} mp_modop;
enum { MP_MODOP_UNUSED = -1, MP_MODOP_FOLDED = -2 };

/* A profile written by another runtime, placed on the graph's nodes
 * (ONNX Runtime's: src/import/ort.c). */
typedef struct mp_importinfo {
    const char *path;       /* the profile read */
    int runs;               /* runs in the file (the run's iters + warmup) */
    int events;             /* distinct node events per run */
    int exact;              /* events placed by their node's name */
    int renamed;            /* by a name the runtime made from a node's (a fusion's) */
    int by_order;           /* by their place between placed events (a fusion named by its kind) */
    int unmatched;          /* placed on no node */
    int nodes_by_graph;     /* nodes put into a fused event's group by the graph around it */
    int nodes_not_run;      /* nodes with no event: constant-folded or removed by the runtime */
    int outside_runs;       /* node events no "model_run" holds (a profile cut short): left out */
    double node_time_s;     /* the node events' time per run (mean over the runs kept) */
    double unmatched_s;     /* of it, placed on no node */
    const char *dims;       /* "batch=4 (read from the profile), ...": the inputs' dims and their source; NULL */
} mp_importinfo;

/* An imported profile's event placed on no node (a layout conversion the
 * runtime added, a name that matches nothing). */
typedef struct mp_unplaced {
    const char *name, *op;  /* the event's name; the runtime's op type ("" unknown) */
    double latency_s;       /* its time per run (mean) */
} mp_unplaced;

/* What a measured run adds (mp_profile_run): the run as a whole. */
typedef struct mp_runinfo {
    const char *source;             /* "modelprof" (a run here) or "onnxruntime" (an imported profile) */
    bool memory_known;              /* the memory figures below were measured (not for an import) */
    mp_importinfo imported;         /* source "onnxruntime" */
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
    int portable_steps;             /* of them, modelprof's portable kernels (the rest oneDNN's) */
    int folded;                     /* nodes folded away at plan time */
    int fused;                      /* nodes absorbed into a fused group */
    int run_shaped;                 /* nodes whose sizes only the data decides, counted with the
                                       shapes the run saw (MP_COST_RUN) */
} mp_runinfo;

/* A fused group's figures, or a lone kernel's: the by-kernel view. */
typedef struct mp_groupstat {
    const char *name;       /* "Conv+BatchNormalization+Relu", or the op type */
    const char *kernel;     /* the kernel of its first step ("portable", "onednn:conv", ...) */
    int count;              /* steps of this kind per pass */
    bool fused;
    double latency_s, latency_min_s; /* summed per pass: median, fastest */
    uint64_t flops;
    bool flops_unknown;     /* a node's shapes unknown to the static inference (data-dependent):
                             * flops is a lower bound, reported as unknown */
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
    MP_PNOTE_ATTN_BIAS,   /* an attention's additive mask or bias the exporter folded: how "mask" (a
                           * buffer, not counted), "gathered" (its distinct values: the table's
                           * entries) or "unread" (its own elements, an upper bound) */
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

/* The timed passes of a measured run, kept when the run was planned with
 * keep_timestamps and node timing: the steps in the order they ran (a node,
 * or a fused group: its head node first), and each pass's start time and
 * duration of each step (seconds, monotonic clock). What the Chrome/Perfetto
 * writer reports; iters 0 when not kept. */
typedef struct mp_stamps {
    int n_steps, iters;
    int *node;              /* per step: its head node (main graph index) */
    int *module;            /* per step: the module its time goes to */
    int *first;             /* per step + 1: its nodes are nodes[first[s] .. first[s+1]) */
    int *nodes;             /* head then absorbed nodes of every step */
    double *start, *dur;    /* iters x n_steps */
} mp_stamps;

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
    /* declared parameters the dynamo exporter's optimizer merged with an
     * equal one or folded away, counted by PyTorch's shape for their role
     * in the fx node that took them (docs/COUNTING.md) */
    int params_by_role_n;
    uint64_t params_by_role;
    /* per main-graph node, NULL when none: bit i set when its input i is
     * a stand-in, the equal tensor the dynamo exporter's optimizer kept for
     * the declared parameter the node took (a parameter of its own in
     * PyTorch: its own gradient, AccumulateGrad and optimizer state) */
    uint32_t *param_stand_in;
    /* the parameters counted by role, params_by_role_n of them, in the
     * signature's order (NULL when none): the node that took each first
     * (whose role there gave its shape), its elements and its name (the
     * signature's target). The planner gives them weights, gradients and
     * optimizer states, as PyTorch has them. */
    struct mp_role_param {
        int node;
        uint64_t numel;
        const char *name;
    } *role_params;
    int peak_node;          /* node (main graph) at which the peak occurs */
    mp_fig *mods;           /* per module, indexed like m->modules */
    mp_opstat *ops;         /* per op type, by decreasing FLOPs then MACs */
    int n_ops;
    /* the by-module-and-operator split: module i's rows are
     * modops[modop_at[i] .. modop_at[i + 1]), by decreasing FLOPs, then
     * MACs, then op index; NULL when not made (a profile built by hand) */
    mp_modop *modops;
    int *modop_at;          /* n_modules + 1 entries */
    int n_modops;
    int *node_modop;        /* per main-graph node: its row in its own module; -1 none */
    int *modop_parent;      /* per row: the same op's row in the parent module; -1 root */
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
    mp_stamps stamps;       /* the timed passes' step times (keep_timestamps) */
    mp_unplaced *unplaced;  /* an imported profile's events placed on no node, by time */
    int n_unplaced;
    /* cost as exact formulas in the free dims (mp_profile_formulas); NULL
     * when not asked for */
    mp_formulas *formulas;
};

enum { MP_NODE_RUN = 0, MP_NODE_FOLDED = 1, MP_NODE_FUSED = 2 };

/* The timed units of a measured run (a kernel: a node, or a fused group
 * of nodes) or of an imported profile (ONNX Runtime's node events): unit u
 * ran the nodes whose node_unit is u; its time in pass i is
 * t[i * n_units + u] seconds. */
typedef struct mp_timing {
    int n_units, n_passes;
    const double *t;        /* NULL: units not timed (whole passes only): latencies -1 */
    const int *node_unit;   /* per main-graph node: its unit; -1 none (folded, not run) */
    bool mean;              /* latency_s: the mean over the passes (else the median) */
} mp_timing;

/* Each node's share of its unit's time (by FLOPs; evenly among the unit's
 * nodes when it has none) summed per pass into the modules (their
 * submodules included), the op types and the module split's rows, whose
 * latency_s (median, or mean) and latency_min_s (fastest pass) it sets;
 * and their `fused` counts from p->node_state (set first). So no row mixes
 * a fused node's FLOPs with another node's time (docs/COUNTING.md, "Time of
 * a fused group"). */
mp_status mp_profile_set_times(mp_profile *p, const mp_timing *tm);
/* Node k's op type (index into p->ops), -1 when none. */
int mp_profile_node_op(const mp_profile *p, int k);
/* The kernel groups (p->groups) whose median rate is above peak (FLOP/s). */
int mp_profile_groups_above(const mp_profile *p, double peak);
/* Samples per pass: dim 0 of the first graph input that has one (1). */
int64_t mp_profile_batch(const mp_profile *p);

/* Free the measured fields (a run fills them again). */
void mp_profile_free_measured(mp_profile *p);
/* Free them, then make the per-node and per-module arrays (zeroed) and
 * room for `groups` kernel groups; MP_ERR_NOMEM (nothing left half made). */
mp_status mp_profile_alloc_measured(mp_profile *p, int groups);

/* Walk the module tree depth-first (pre-order), skipping modules deeper
 * than max_depth (-1: all). The callback returns false to skip children. */
typedef bool (*mp_module_visit)(const mp_profile *p, int module, void *ud);
void mp_module_walk(const mp_profile *p, int max_depth, mp_module_visit fn, void *ud);

#endif
