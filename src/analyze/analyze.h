/* Analysis: inference driver, parameters, memory and aggregation. */
#ifndef MP_ANALYZE_H
#define MP_ANALYZE_H

#include "analyze/profile.h"
#include "ops/ops.h"

/* Infer shapes and costs of the main graph from the user's dims. */
mp_status mp_infer_model(mp_model *m);

#endif
