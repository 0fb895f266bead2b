/* The timed passes of a measured run, seen from outside the run (the Chrome
 * trace writer in src/report/ reads them through this, without the
 * planner's and kernels' headers). */
#ifndef MP_RUN_STAMPS_H
#define MP_RUN_STAMPS_H

#include "modelprof.h"
#include "graph/graph.h"

typedef struct mp_run_stamp_step {
    int node;            /* head node (main graph index) */
    const int *nodes;    /* head then absorbed nodes */
    int n_nodes;
    int module;          /* module its time goes to */
    const char *group;   /* fused group name, NULL alone */
    const char *kernel;  /* kernel name, may be NULL */
} mp_run_stamp_step;

typedef struct mp_run_stamps {
    const mp_model *m;
    const mp_graph *g;
    int n_steps, iters;
    const double *start; /* iters x n_steps, monotonic clock, seconds */
    const double *dur;   /* iters x n_steps, seconds */
} mp_run_stamps;

/* false when the run kept no start times (keep_timestamps, node timing). */
bool mp_run_stamps_get(const mp_exec *pl, mp_run_stamps *out);
void mp_run_stamp_step_get(const mp_exec *pl, int s, mp_run_stamp_step *out);

#endif
