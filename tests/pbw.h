/* A minimal protobuf writer for tests: builds ONNX files byte by byte. */
#ifndef MP_PBW_H
#define MP_PBW_H

#include <stddef.h>
#include <stdint.h>

typedef struct pbw {
    uint8_t *b;
    size_t n, cap;
} pbw;

void pbw_free(pbw *w);
void pbw_raw(pbw *w, const void *p, size_t n);
void pbw_varint_raw(pbw *w, uint64_t v);
void pbw_key(pbw *w, uint32_t field, int wire);
void pbw_int(pbw *w, uint32_t field, uint64_t v);
void pbw_f32(pbw *w, uint32_t field, float v);
void pbw_bytes(pbw *w, uint32_t field, const void *p, size_t n);
void pbw_str(pbw *w, uint32_t field, const char *s);
void pbw_msg(pbw *w, uint32_t field, const pbw *sub); /* frees sub */
int pbw_write(const pbw *w, const char *path);

/* ONNX helpers (field numbers of onnx.proto). dims: -1 = dim_param `sym`. */
void onx_value_info(pbw *graph, uint32_t field, const char *name, int dtype, int rank,
                    const int64_t *dims, const char *const *syms);
void onx_node(pbw *graph_or_fn, uint32_t field, const char *op, const char *name,
              const char *ins, const char *outs, const pbw *attrs /* may be NULL; freed */);
void onx_attr_int(pbw *attrs, const char *name, int64_t v);
void onx_attr_ints(pbw *attrs, const char *name, int n, const int64_t *v);
void onx_attr_graph(pbw *attrs, const char *name, pbw *graph);
/* TensorProto with raw data (data may be NULL for no data field). */
void onx_tensor(pbw *out, uint32_t field, const char *name, int dtype, int rank,
                const int64_t *dims, const void *raw, size_t raw_len);
void onx_tensor_external(pbw *out, uint32_t field, const char *name, int dtype, int rank,
                         const int64_t *dims, const char *location, const char *offset,
                         const char *length);
/* ModelProto around a graph (frees graph). */
void onx_model(pbw *model, int64_t ir, int opset, pbw *graph);

#endif
