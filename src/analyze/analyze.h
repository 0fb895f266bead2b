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
/* Infer (and cost) a subgraph whose outer values are already known: the
 * driver control-flow rules get through mp_ctx.infer_graph. */
mp_status mp_infer_graph(mp_model *m, mp_graph *g);

/* mp_profile_static that also gives the live activation bytes at each
 * step of the main graph's order (live: g->n_nodes entries, NULL: none),
 * the figure whose maximum is the profile's activation peak; UINT64_MAX
 * throughout when the liveness overflowed. */
mp_status mp_profile_static_live(mp_model *m, uint64_t *live, mp_profile **out);

#endif
