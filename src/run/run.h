/* The measured run's internals: the exec (exec.c), the data it starts
 * from (data.c: weights, random inputs, .npy), the thread pool (pool.c)
 * and the timed runs that fill the profile (measure.c). */
#ifndef MP_RUN_H
#define MP_RUN_H

#include "analyze/profile.h"
#include "ops/ops.h"

#include <pthread.h>

/* What a value is during a run. */
enum {
    MP_RV_UNUSED = 0, /* never read nor written by a step (folded away, unused) */
    MP_RV_CONST,      /* known at plan time: weights, folded values */
    MP_RV_INPUT,      /* a graph input: a buffer of its own */
    MP_RV_ACT,        /* produced by a step: a slot in the activation arena */
    MP_RV_DYN,        /* shape known only at run time (mp_kout_alloc) */
    MP_RV_FUSED,      /* internal to a fused group: never materialised */
    MP_RV_OUTER,      /* a body's reference to a value of the enclosing plan */
};

typedef struct mp_rval {
    mp_rtensor rt;    /* data, dtype, rank, dims, numel as the kernels see them */
    int kind;
    size_t bytes;     /* planned size (ACT, INPUT, CONST) */
    size_t off;       /* ACT: offset in the arena */
    void *own;        /* memory owned by the plan (decoded weights, inputs, DYN) */
    size_t own_cap;
    int64_t *dyn_dims; /* DYN: dims given at run time */
    int def, last;    /* first and last step touching it (ACT liveness) */
    bool given;       /* INPUT: data given by mp_exec_set_input */
    float *f32;       /* CONST fp16/bf16: decoded once (mp_kinput_f32) */
} mp_rval;

typedef struct mp_step {
    int node;         /* head node (main graph index) */
    int *nodes, n_nodes; /* head then absorbed nodes (mp_kfuse) */
    const mp_kernel *kern;
    mp_kctx k;
    int *in_v, *out_v; /* value index of each k.in / k.out (-1: omitted) */
    int n_in, n_out, cap_in;
    mp_rtensor *in, *out;
    size_t scratch;
    bool dyn;         /* touches DYN values: reload tensors each run */
    int module;       /* module the group's time goes to */
    const char *group; /* "Conv+Relu" for a fused group, NULL alone */
    int share_in;     /* mp_kshare: output 0 may take this input's bytes (k.in index), -1 none */
} mp_step;

typedef struct mp_pool mp_pool;

struct mp_exec {
    struct mp_exec *parent; /* the enclosing plan of a control-flow body */
    mp_profile *p;
    mp_model *m;
    mp_graph *g;
    mp_run_options o;
    int threads;
    mp_rval *vals;    /* per main-graph value */
    mp_step *steps;
    int n_steps;
    int cur;          /* the step being prepared or run */
    int *step_of;     /* per node: its step (head or absorbed), -1 folded */
    bool *folded;     /* per node: not executed (outputs known at plan time) */
    int n_folded;
    uint8_t *arena;
    size_t arena_bytes;
    int n_views;         /* steps whose output shares its input's bytes (Reshape ...) */
    int n_shared;        /* steps whose output took an input's bytes (mp_kshare) */
    void *scratch;
    size_t scratch_bytes;
    size_t const_bytes;  /* weights and folded values held by the plan */
    size_t view_bytes;   /* weights used in place (mapped file) */
    size_t input_bytes;
    size_t dyn_bytes;
    mp_pool *pool;
    uint64_t seed;
    bool random_weights; /* some weight was absent: seeded random */
    /* external data files mapped once */
    struct mp_extmap { char *path; void *map; size_t size; } *ext;
    int n_ext, cap_ext;
    /* run-time shape inference (mp__reinfer): copies of the model and graph
     * with values and an arena of their own */
    mp_model *shadow_m;
    mp_graph *shadow_g;
    mp_value *shadow_vals;
    /* timing of the last mp_profile_run: iters x n_steps seconds */
    double *t_step;
    double *t_run;
    double *t_start;  /* iters x n_steps start times (keep_timestamps), else NULL */
    int t_iters;
};

/* ---- data.c ---- */
/* Make value v (an initializer or a Constant's tensor t) a CONST tensor. */
mp_status mp_run_load_tensor(mp_exec *pl, int v, const mp_tensor *t);
/* Materialise the known contents of value v (kn == numel). */
mp_status mp_run_known(mp_exec *pl, int v);
/* Fill a graph input that was not given with seeded random data. */
void mp_run_random_input(mp_exec *pl, int v);
void mp_run_unmap(mp_exec *pl);
/* n elements from src (dtype src_dt) into dst (dst_dt), numerically;
 * false for a dtype that holds no numbers (string, sub-byte). */
bool mp_run_convert(int dst_dt, void *dst, int src_dt, const void *src, int64_t n);
uint64_t mp_run_rng(uint64_t *s);

/* ---- pool.c ---- */
mp_status mp_pool_create(int threads, mp_pool **out);
void mp_pool_free(mp_pool *pool);
void mp_pool_run(mp_pool *pool, int64_t n, mp_range_fn fn, void *arg);

/* ---- exec.c ---- */
/* When set, plans use the operators' portable kernels only (oneDNN's are
 * not asked): for tests of the planner with kernels of their own, and for
 * checking portable kernels against the library's. */
extern bool mp_run_portable_only;
/* One run; with t (n_steps entries), each step's time in seconds. */
mp_status mp_exec_run_timed(mp_exec *pl, double *t);
mp_status mp_exec_run_stamped(mp_exec *pl, double *t, double *start);

/* A plan of control-flow body `body` inside `parent` (control.c). */
mp_status mp_subexec_create(mp_exec *parent, mp_graph *body, bool fuse, mp_exec **out);
/* Bring a body plan's outer values up to date from its parent (before
 * each run of the body). */
void mp_subexec_bind_outer(mp_exec *pl);
/* Body input i (a DYN one: its shape changes from pass to pass) given
 * src's shape and contents; other inputs: nothing. */
mp_status mp_subexec_set_input(mp_exec *b, int i, const mp_rtensor *src);
/* The built-in kernels of If, Loop and Scan (control.c); NULL otherwise. */
const mp_kernel *mp_control_kernel(const mp_node *n);

/* ---- measure.c ---- */
double mp_run_now(void);
/* The machine's fp32 peak, the best of two oneDNN GEMMs run until stable,
 * FLOP/s (0: failed); *how (may be NULL) says how (static storage). */
double mp_run_peak_flops(int threads, const char **how);
/* The same measured again now (another job may have held a core the first
 * time); the higher of the two is kept and returned. */
double mp_run_peak_flops_again(int threads, const char **how);

#endif
