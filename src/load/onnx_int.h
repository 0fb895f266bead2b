/* What the ONNX loader's files share (onnx.c: wire decoding of types,
 * tensors and the model; onnx_graph.c: graphs, nodes, attributes and
 * local-function inlining; onnx_meta.c: the exporters' metadata;
 * onnx_order.c: the post-pass, order and module tree). Internal to them. */
#ifndef MP_LOAD_ONNX_INT_H
#define MP_LOAD_ONNX_INT_H

#include "load/load.h"
#include "load/pb.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- field numbers of onnx.proto ---- */
enum {
    MODEL_IR_VERSION = 1, MODEL_PRODUCER = 2, MODEL_PRODUCER_VERSION = 3,
    MODEL_GRAPH = 7, MODEL_OPSET = 8, MODEL_FUNCTIONS = 25,
    OPSET_DOMAIN = 1, OPSET_VERSION = 2,
    GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INIT = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12,
    GRAPH_VALUE_INFO = 13, GRAPH_SPARSE_INIT = 15, GRAPH_METADATA = 16,
    NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP = 4, NODE_ATTR = 5,
    NODE_DOMAIN = 7, NODE_METADATA = 9,
    ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_S = 4, ATTR_T = 5, ATTR_G = 6,
    ATTR_FLOATS = 7, ATTR_INTS = 8, ATTR_STRINGS = 9, ATTR_TENSORS = 10, ATTR_GRAPHS = 11,
    ATTR_TYPE = 20, ATTR_REF = 21, ATTR_SPARSE = 22,
    VI_NAME = 1, VI_TYPE = 2, VI_METADATA = 4, T_METADATA = 16, MODEL_METADATA = 14,
    TYPE_TENSOR = 1, TYPE_SPARSE = 8,
    TT_ELEM = 1, TT_SHAPE = 2, SHAPE_DIM = 1, DIM_VALUE = 1, DIM_PARAM = 2,
    T_DIMS = 1, T_DTYPE = 2, T_FLOAT = 4, T_INT32 = 5, T_STRING = 6, T_INT64 = 7,
    T_NAME = 8, T_RAW = 9, T_DOUBLE = 10, T_UINT64 = 11, T_EXTERNAL = 13, T_LOCATION = 14,
    SPARSE_VALUES = 1, SPARSE_DIMS = 3,
    KV_KEY = 1, KV_VALUE = 2,
    FN_NAME = 1, FN_INPUT = 4, FN_OUTPUT = 5, FN_NODE = 7, FN_DOMAIN = 10,
    FN_ATTR_PROTO = 11,
};
typedef struct mp__fn {
    const char *name, *domain;
    pb msg;
    pb *in, *out;             /* formal names */
    int n_in, n_out;
    mp_strmap in_names, out_names; /* formal name -> position (first wins) */
    pb *defaults;             /* attribute_proto defaults */
    int n_defaults;
    mp_attr *def_attrs;       /* the defaults decoded, on first use */
    int next_same;            /* next function with the same name, -1 */
    int tail_same;            /* (first of a name) the last one with it */
} mp__fn;
/* Inlining context: how names and attributes of a function body map onto
 * the graph they are emitted into. */
typedef struct mp__call {
    const struct mp__call *up;
    const mp__fn *fn;
    const char *prefix;       /* for the body's internal value names */
    const int *actual_in;     /* value index for each formal input (-1 omitted) */
    const int *actual_out;
    const mp_node *caller;    /* for ref_attr_name */
    int module;
    int depth;
} mp__call;
typedef struct mp__loader {
    mp_model *m;
    mp__fn *fns;
    int n_fns, cap_fns;
    mp_strmap ext_files;      /* location -> index into ext */
    struct { int state; uint64_t size; char *path; } *ext;
    int n_ext, cap_ext;
    int top_calls;            /* function calls among the main graph's nodes */
    mp_strmap fn_by_name;     /* function name -> first index with that name */
    mp_limits lim;
    int64_t n_nodes, n_values; /* over all graphs, for the limits */
    int64_t n_edges;          /* node inputs and outputs: analysis indexes them with int */
    int nest;                 /* current nesting of subgraphs and calls */
    mp_graph **graphs;        /* every subgraph made, to release orphans */
    int n_graphs, cap_graphs;
    mp_strmap interned;       /* op types, domains, attribute names: one copy each */
    bool own_map;             /* m->map is our mapping of the file (mp__release) */
    const uint8_t *rel_lo, *rel_hi; /* pages read and not yet given back */
    struct { const char *str; size_t len; } icache[64]; /* recent interned strings */
    struct { const char *name; int want; } acache[64];  /* attribute name -> ONNX type */
} mp__loader;
#define MP_NAME_MAX (1 << 20) /* bytes of a name (names print with %.*s) */
#define NOMEM() mp__nomem(L)

mp_status mp__bad(mp__loader *L, const char *what, const pb *at);
mp_status mp__nomem(mp__loader *L);
mp_status mp__limit(mp__loader *L, const char *what, const char *name, int64_t value);
mp_status mp__check_name(mp__loader *L, pb s, const char *what);
int mp__value_h(mp__loader *L, mp_graph *g, const char *name, size_t len, uint32_t h,
                       mp_status *st);
int mp__value(mp__loader *L, mp_graph *g, const char *name, size_t len, mp_status *st);
mp_graph *mp__new_graph(mp__loader *L, mp_graph *parent);
char *mp__str(mp__loader *L, pb s);
const char *mp__intern(mp__loader *L, pb s);
bool mp__pbeq(pb s, const char *z);
uint32_t mp__kind_bits(const uint8_t *p, size_t n);
bool mp__decl_kind(pb entry, uint32_t *decl);
mp_status mp__type(mp__loader *L, const char *what, pb t, int *dtype, int *rank,
                          int64_t **dims);
mp_status mp__tensor(mp__loader *L, pb msg, mp_tensor **out);
mp_status mp__sparse_tensor(mp__loader *L, pb msg, mp_tensor **out);
const mp__fn *mp__find_fn(mp__loader *L, pb domain, pb op);
bool mp__count_fields(mp__loader *L, pb msg, int counts[32]);
bool mp__kv(pb *msg, pb *key, pb *val);
int mp__module_from_metadata(mp_model *m, pb scopes, pb classes);
mp_status mp__fx_parse(mp__loader *L, pb text, const mp_fx **out);
int mp__attr_want(mp__loader *L, const char *name);
mp_status mp__signature(mp__loader *L, pb text);
mp_status mp__metadata_entry(mp__loader *L, pb entry);
mp_status mp__graph(mp__loader *L, mp_graph *g, pb msg);
int mp__opset(const mp_model *m, const char *domain);
int mp__module_from_name(mp_model *m, const char *name);
mp_status mp_model_finish(mp_model *m);
mp_status mp__fx_homes(mp_model *m);

#endif
