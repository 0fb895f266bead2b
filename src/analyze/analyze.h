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
/* Cost node k of g again from its values as they are now (the second
 * half of mp_infer_node: bytes, then the op's cost rule). */
void mp_cost_node(mp_model *m, mp_graph *g, int k);

/* The sizes a measured run saw for values of the main graph whose shape
 * the inference could not know (a NonZero's, what follows from it): each
 * such value keeps its shape (run_dims; a shape the inference knows is
 * never replaced), and the profile's static figures are counted again
 * with them: the inference takes them for the values it leaves unknown
 * (MP_VAL_RUN_SHAPE), and the nodes that read or write one, complete now,
 * carry MP_COST_RUN. The graph then holds those shapes (the reports read
 * them); p's measured fields are freed (fill them after). *completed:
 * the nodes so counted. mp_profile_drop_shapes counts p again without
 * them (a new plan of the model must not see them), keeping the message
 * of a failure before it. */
typedef struct mp_shape_seen {
    int value;              /* main-graph value index */
    int rank;
    const int64_t *dims;    /* rank entries */
} mp_shape_seen;
mp_status mp_profile_take_shapes(mp_profile *p, const mp_shape_seen *seen, int n, int *completed);
mp_status mp_profile_drop_shapes(mp_profile *p);

/* mp_profile_static that also gives the live activation bytes at each
 * step of the main graph's order (live: g->n_nodes entries, NULL: none),
 * the figure whose maximum is the profile's activation peak; UINT64_MAX
 * throughout when the liveness overflowed. */
mp_status mp_profile_static_live(mp_model *m, uint64_t *live, mp_profile **out);

#endif
