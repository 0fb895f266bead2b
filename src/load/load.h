/* Loading: ONNX protobuf decoding (zero-copy), external data, functions. */
#ifndef MP_LOAD_H
#define MP_LOAD_H

#include "graph/graph.h"

/* Decode a tensor's contents into the model arena as int64 (integer and
 * bool types) or double (float types). Only for small tensors (numel <=
 * MP_KNOWN_MAX elements): this is how shape arithmetic reads constants;
 * weights are never read. Returns MP_ERR_UNSUPPORTED when the data is
 * absent (weightless) or too large, MP_ERR_FORMAT when it is malformed. */
mp_status mp_tensor_read(struct mp_model *m, const mp_tensor *t, int64_t **iv,
                         double **fv);

/* After the graph is built (by the decoder, or by hand in tests): resolve
 * outer-scope names, operator descriptors, topological order and modules.
 * Idempotent. */
mp_status mp_model_finish(struct mp_model *m);

#endif
