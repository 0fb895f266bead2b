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

/* The value of a one-element tensor stored in the model itself (raw or
 * typed fields; not external data), read in place without allocating:
 * for a pattern asking whether an initializer is a given constant. False
 * when t is not such a tensor. */
bool mp_tensor_scalar(const mp_tensor *t, double *out);

/* Walk a tensor's typed fields (t->loc == MP_DATA_TYPED): put(ctx, k,
 * iv, fv, is_float) once per element k, in order. False when they are
 * malformed or hold other than t->numel elements. */
typedef void (*mp_typed_put)(void *ctx, int64_t k, int64_t iv, double fv, bool is_float);
bool mp_tensor_typed_walk(const mp_tensor *t, mp_typed_put put, void *ctx);

/* Decode one serialized TensorProto (e.g. a test's input_0.pb, read into
 * memory that outlives the tensor) into the model's arena. External data
 * is resolved against the model's folder like the model's own. */
mp_status mp_tensor_decode(struct mp_model *m, const uint8_t *bytes, size_t len,
                           mp_tensor **out);

/* Give graph input `name` a dtype, a concrete shape and (when iv or fv is
 * not NULL, n = numel elements, at most MP_KNOWN_MAX) its contents, which
 * shape arithmetic then uses. For tests and tools that feed real inputs. */
mp_status mp_model_set_input_data(struct mp_model *m, const char *name, int dtype, int rank,
                                  const int64_t *dims, const int64_t *iv, const double *fv,
                                  int64_t n);

/* The limits to use: `in` (NULL: defaults) with fields <= 0 defaulted;
 * MP_ERR_USAGE when one is out of range. */
mp_status mp_limits_check(const mp_limits *in, mp_limits *out);

/* Open external data file `path` (a tensor's resolved ext_path) read-only
 * with the load-time checks repeated (a regular file inside the model's
 * folder, no link followed); -1 when it cannot be. For the measured run,
 * which maps the weights. */
int mp_external_open(const struct mp_model *m, const char *path);

/* Is `file` (a resolved path) inside folder `dir` (a resolved path)? */
bool mp_path_inside(const char *dir, const char *file);

/* After the graph is built (by the decoder, or by hand in tests): resolve
 * outer-scope names, operator descriptors, topological order and modules.
 * Idempotent. */
mp_status mp_model_finish(struct mp_model *m);

#endif
