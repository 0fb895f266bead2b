/* The oneDNN glue: the one file (dnnl.c) where modelprof calls oneDNN.
 * The planner asks it first for each node; NULL leaves the node to its
 * operator's portable kernel. */
#ifndef MP_RUN_DNNL_H
#define MP_RUN_DNNL_H

#include "ops/ops.h"

/* The oneDNN kernel for node n (dtypes and shapes as inferred), or NULL
 * when oneDNN does not serve it. */
const mp_kernel *mp_dnnl_kernel(const mp_graph *g, const mp_node *n);

#endif
