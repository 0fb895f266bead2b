/* The graph IR: one representation used by inference, costing, reports and
 * (later) the measured run. Everything lives in the model's arena. */
#ifndef MP_GRAPH_H
#define MP_GRAPH_H

#include "base/base.h"

/* ---- dtypes: numbered as ONNX TensorProto.DataType ---- */
#define MP_DTYPE_LIST(X)                 \
    X(UNDEFINED, "undefined", 0)         \
    X(FLOAT, "fp32", 32)                 \
    X(UINT8, "uint8", 8)                 \
    X(INT8, "int8", 8)                   \
    X(UINT16, "uint16", 16)              \
    X(INT16, "int16", 16)                \
    X(INT32, "int32", 32)                \
    X(INT64, "int64", 64)                \
    X(STRING, "string", 0)               \
    X(BOOL, "bool", 8)                   \
    X(FLOAT16, "fp16", 16)               \
    X(DOUBLE, "fp64", 64)                \
    X(UINT32, "uint32", 32)              \
    X(UINT64, "uint64", 64)              \
    X(COMPLEX64, "complex64", 64)        \
    X(COMPLEX128, "complex128", 128)     \
    X(BFLOAT16, "bf16", 16)              \
    X(FLOAT8E4M3FN, "fp8e4m3fn", 8)      \
    X(FLOAT8E4M3FNUZ, "fp8e4m3fnuz", 8)  \
    X(FLOAT8E5M2, "fp8e5m2", 8)          \
    X(FLOAT8E5M2FNUZ, "fp8e5m2fnuz", 8)  \
    X(UINT4, "uint4", 4)                 \
    X(INT4, "int4", 4)                   \
    X(FLOAT4E2M1, "fp4e2m1", 4)          \
    X(FLOAT8E8M0, "fp8e8m0", 8)

typedef enum mp_dtype {
#define MP__DT(id, name, bits) MP_DT_##id,
    MP_DTYPE_LIST(MP__DT)
#undef MP__DT
    MP_DT_COUNT
} mp_dtype;

/* Bits per element by dtype (0 for unknown/string); inline users below. */
extern const unsigned char mp_dtype_bits_table[MP_DT_COUNT];
static inline int mp_dtype_bits(int dt) {
    return (dt >= 0 && dt < MP_DT_COUNT) ? mp_dtype_bits_table[dt] : 0;
}
const char *mp_dtype_name(int dt);  /* "fp32", ...; "dtype(N)" never: "?" */
/* The largest tensor whose contents the graph tracks (mp_value kn/iv/fv):
 * shape arithmetic needs only small ones */
#define MP_KNOWN_MAX 1024

bool mp_dtype_is_float(int dt);     /* fp16/bf16/fp32/fp64/fp8/fp4 */

/* Element conversions (src/graph/convert.c): fp16, bf16 and the fp8
 * formats (dt: MP_DT_FLOAT8E4M3FN, ...FNUZ, MP_DT_FLOAT8E5M2, ...FNUZ) to
 * and from fp32; fp32 to bf16 rounds to nearest even, to fp8 with
 * saturation or not as Cast's attribute says. */
float mp_half_to_float(uint16_t h);
uint16_t mp_float_to_half(float f);
float mp_bf16_to_float(uint16_t h);
uint16_t mp_float_to_bf16(float f);
/* n 16-bit floats (dt MP_DT_FLOAT16 or MP_DT_BFLOAT16) to fp32 and back,
 * the same values as the one-element conversions (F16C for fp16 where the
 * CPU has it): what kernels computing 16-bit tensors in fp32 convert. */
void mp_f16_widen(int dt, const uint16_t *s, float *d, int64_t n);
void mp_f16_narrow(int dt, const float *s, uint16_t *d, int64_t n);
float mp_fp8_to_float(uint8_t v, int dt);
uint8_t mp_float_to_fp8(float f, int dt, bool saturate);
bool mp_dtype_is_int(int dt);       /* signed/unsigned ints and bool */
/* Bytes of `numel` elements (sub-byte types round up; UINT64_MAX past 64
 * bits). Inline: costing asks it of every input and output. */
static inline uint64_t mp_dtype_bytes(int dt, int64_t numel) {
    if (numel <= 0) return 0;
    /* bits in 128: 2^62 fp32 elements are 2^64 bytes, their bits 2^69 */
    unsigned __int128 b = ((unsigned __int128)(uint64_t)numel * (unsigned)mp_dtype_bits(dt) + 7) / 8;
    return b > UINT64_MAX ? UINT64_MAX : (uint64_t)b;
}

/* ---- dims ----
 * A dim >= 0 is known. A dim < 0 is unknown: it names symbol -d-1 of the
 * model's symbol table; symbol 0 is the anonymous "?". */
#define MP_DIM_ANON (-1)
#define MP_DIM_KNOWN(d) ((d) >= 0)
#define MP_DIM_SYM(d) ((int)(-(d)-1))
#define MP_DIM_OF_SYM(s) ((int64_t)(-(int64_t)(s)-1))
#define MP_MAX_RANK 64

/* ---- dim arithmetic: the one place where dims are combined ----
 * Known dims combine as integers. An unknown operand keeps its symbol
 * only where the result is that symbol (x * 1, x + 0, x / 1), and x * 0 is
 * 0; anything else involving an unknown dim is the anonymous dim, never a
 * wrong symbol. A result past MP_DIM_MAX is unknown rather than wrapping
 * (no tensor has a dim that large; products of such dims stay in int64). */
#define MP_DIM_MAX ((int64_t)1 << 48)
static inline int64_t mp_dim_mul(int64_t a, int64_t b) {
    if (a == 1 || b == 0) return b;
    if (b == 1 || a == 0) return a;
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) || r > MP_DIM_MAX) return MP_DIM_ANON;
    return r;
}
static inline int64_t mp_dim_add(int64_t a, int64_t b) {
    if (a == 0) return b;
    if (b == 0) return a;
    if (a < 0 || b < 0 || a > MP_DIM_MAX || b > MP_DIM_MAX) return MP_DIM_ANON;
    return a + b;
}
/* a / b when b divides a (b > 0); unknown when either is unknown. *ok is
 * false when both are known and b does not divide a. */
static inline int64_t mp_dim_div(int64_t a, int64_t b, bool *ok) {
    *ok = true;
    if (b == 1) return a;
    if (a < 0 || b <= 0) return MP_DIM_ANON;
    if (a % b != 0) {
        *ok = false;
        return MP_DIM_ANON;
    }
    return a / b;
}
/* Two dims that must be equal: the known one wins, a named symbol wins
 * over the anonymous dim (the first of two symbols); false when both are
 * known and differ. */
static inline bool mp_dim_merge(int64_t a, int64_t b, int64_t *out) {
    if (a == b || b == MP_DIM_ANON)
        *out = a;
    else if (a >= 0 && b >= 0)
        return false;
    else if (a >= 0)
        *out = a;
    else
        *out = (b >= 0 || a == MP_DIM_ANON) ? b : a;
    return true;
}

/* ---- attributes (ONNX AttributeProto.AttributeType numbering) ---- */
enum {
    MP_ATTR_UNDEFINED = 0, MP_ATTR_FLOAT = 1, MP_ATTR_INT = 2,
    MP_ATTR_STRING = 3, MP_ATTR_TENSOR = 4, MP_ATTR_GRAPH = 5,
    MP_ATTR_FLOATS = 6, MP_ATTR_INTS = 7, MP_ATTR_STRINGS = 8,
    MP_ATTR_TENSORS = 9, MP_ATTR_GRAPHS = 10, MP_ATTR_SPARSE_TENSOR = 11,
    MP_ATTR_SPARSE_TENSORS = 12, MP_ATTR_TYPE_PROTO = 13,
    MP_ATTR_TYPE_PROTOS = 14
};

struct mp_graph;
struct mp_tensor;

typedef struct mp_attr {
    const char *name;
    int type;
    const char *ref;          /* ref_attr_name inside a function body */
    int64_t i;
    double f;
    const char *s;            /* NUL-terminated copy (strings are small) */
    size_t s_len;
    int n;                    /* element count of ints/floats/strings/... */
    int64_t *ints;
    double *floats;
    const char **strings;
    struct mp_tensor *t;      /* TENSOR; TENSORS uses tensors[] */
    struct mp_tensor **tensors;
    struct mp_graph *g;       /* GRAPH; GRAPHS uses graphs[] */
    struct mp_graph **graphs;
} mp_attr;

/* ---- tensors (initializers and tensor attributes) ----
 * Data is a view into the mapped file, never copied. */
typedef enum mp_data_loc {
    MP_DATA_NONE = 0,    /* no data at all */
    MP_DATA_RAW,         /* raw_data bytes in the file */
    MP_DATA_TYPED,       /* float_data/int64_data/... field in the file */
    MP_DATA_EXTERNAL,    /* external file present: ext_path at ext_offset */
    MP_DATA_ABSENT       /* external file missing: profile weightless */
} mp_data_loc;

typedef struct mp_tensor {
    const char *name;
    int dtype;
    int rank;
    int64_t *dims;
    int64_t numel;
    mp_data_loc loc;
    const uint8_t *data;  /* RAW: bytes; TYPED: payload of the typed field */
    size_t size;
    int typed_field;      /* TensorProto field number for MP_DATA_TYPED */
    bool typed_packed;
    const char *ext_path; /* resolved path (EXTERNAL/ABSENT) */
    uint64_t ext_offset, ext_length;
    uint32_t decl;        /* MP_VAL_DECL_* from the tensor's metadata_props */
} mp_tensor;

/* ---- values ---- */
enum {
    MP_VAL_INPUT = 1u << 0,   /* graph input (not an initializer) */
    MP_VAL_OUTPUT = 1u << 1,  /* graph output */
    MP_VAL_INIT = 1u << 2,    /* initializer */
    MP_VAL_PARAM = 1u << 3,   /* learnable parameter (set by analysis) */
    MP_VAL_OUTER = 1u << 4,   /* subgraph reference to an outer value */
    MP_VAL_CONST = 1u << 5,   /* produced by a Constant node */
    MP_VAL_BUFFER = 1u << 6,  /* non-learnable state (BN statistics) */
    /* What the exporter declares (torch.export's InputSpec kind, written by
     * PyTorch's dynamo exporter on the initializer or its value info, or
     * named in the model's graph signature). */
    MP_VAL_DECL_PARAM = 1u << 7,  /* PARAMETER */
    MP_VAL_DECL_BUFFER = 1u << 8, /* BUFFER */
    MP_VAL_DECL_CONST = 1u << 9,  /* CONSTANT_TENSOR (a lifted constant) */
    MP_VAL_VALUE_INFO = 1u << 10, /* its declared type is from the graph's value_info (the
                                   * exporter's own inference), not an input or output */
    MP_VAL_SEQUENCE = 1u << 11,   /* a sequence (set by the inference: what a sequence operator
                                   * makes, a Loop carries and its body reads) */
    MP_VAL_RUN_SHAPE = 1u << 12,  /* a shape only the data decides: the one a measured run saw
                                   * (run_dims), set while the profile is counted with them */
};
#define MP_VAL_DECL_ANY (MP_VAL_DECL_PARAM | MP_VAL_DECL_BUFFER | MP_VAL_DECL_CONST)

struct mp_value;

/* A sequence value (ONNX's sequence type) whose length and elements the
 * inference knows (src/ops/sequence.c): built by SequenceEmpty,
 * SequenceConstruct, SequenceInsert, SplitToSequence, or a Loop of known
 * passes that fills one. The value itself has rank -1 and its elements'
 * dtype. */
typedef struct mp_seq {
    int n;                    /* elements */
    int dtype;                /* their type */
    struct mp_value *el;      /* n values: dtype, rank, dims and contents (no name) */
} mp_seq;

typedef struct mp_value {
    const char *name;
    int dtype;                /* MP_DT_UNDEFINED until known */
    int rank;                 /* -1: unknown rank */
    int64_t *dims;            /* rank entries (arena) */
    uint32_t flags;
    int producer;             /* node index in its graph, -1 if none */
    int n_consumers;          /* input slots reading it (mp_graph_index counts them) */
    mp_tensor *init;          /* initializer data, if MP_VAL_INIT */
    int outer;                /* MP_VAL_OUTER: value index in parent graph */
    /* declared type from the file (graph input/output/value_info) */
    int decl_dtype;
    int decl_rank;            /* -1: none declared */
    int64_t *decl_dims;
    /* Contents given by the caller for a graph input (conformance tests
     * feed small shape tensors this way): given_n >= 0 elements. */
    int64_t given_n;
    int64_t *given_iv;
    double *given_fv;
    /* Known contents for shape arithmetic: kn >= 0 elements known.
     * Integer/bool types fill iv, float types fill fv. */
    int64_t kn;
    int64_t *iv;
    double *fv;
    int last_use;             /* analysis: last consumer in order */
    const mp_seq *seq;        /* a sequence the inference knows, NULL otherwise */
    /* the shape a measured run saw, for a value whose shape only the data
     * decides (run_dims NULL: none; never NULL otherwise, rank 0 too):
     * mp_profile_take_shapes */
    int run_rank;
    int64_t *run_dims;
} mp_value;

/* ---- costs ---- */
enum {
    MP_COST_UNCOUNTED = 1u << 0, /* the op has no cost rule */
    MP_COST_UNKNOWN = 1u << 1,   /* shapes unknown: figures incomplete */
    MP_COST_OVERFLOW = 1u << 2,  /* a figure saturated at UINT64_MAX */
    MP_COST_BOUND = 1u << 3,     /* an upper bound (data-dependent op) */
    MP_COST_PER_ITER = 1u << 4,  /* one iteration of a loop whose trip count is unknown */
    MP_COST_IGNORED = 1u << 5,   /* in a module left out (mp_model_ignore_module): no MACs, FLOPs */
    MP_COST_RUN = 1u << 6,       /* data-dependent: counted with the shapes a measured run saw */
};

typedef struct mp_cost {
    uint64_t macs, flops;
    uint64_t bytes_read, bytes_written;
    uint64_t act_bytes;          /* bytes of the node's outputs */
    uint64_t params;             /* params consumed by this node */
    uint64_t param_bytes;
    uint32_t flags;
} mp_cost;

struct mp_op;

/* The torch.fx node a node of PyTorch's dynamo exporter was lowered from
 * (its pkg.torch.onnx.fx_node metadata), kept for nodes whose fx node takes
 * a parameter placeholder ("%p_bn1_weight"): the operator and which of its
 * arguments are parameters, so that a parameter the exporter's optimizer
 * merged with an equal one, or folded away, is still known by name. */
typedef struct mp_fx {
    const char *target;       /* the ATen operator: "linear", "layer_norm", "addmm",
                                 "_native_batch_norm_legit_functional"; NULL another */
    int n_params;
    const char **params;      /* placeholder names, "p_bn1_weight" */
    int *args;                /* each one's argument position (a list argument: its position) */
    int64_t norm_numel;       /* normalized_shape given as a literal (args[1] of layer_norm,
                                 rms_norm): its product; -1 */
} mp_fx;

typedef struct mp_node {
    const char *name;
    const char *op;
    const char *domain;       /* "" for the default ONNX domain */
    int opset;                /* opset version of its domain */
    int n_in, n_out;
    int *in, *out;            /* value indices; -1 for an omitted optional */
    int n_attr;
    mp_attr *attr;
    int module;               /* innermost module (model->modules index) */
    const struct mp_op *desc; /* resolved operator, NULL if unknown */
    mp_cost cost;
    int n_sub;
    struct mp_graph **sub;    /* subgraphs (If/Loop/Scan bodies) */
    const mp_fx *fx;          /* the dynamo exporter's fx node, when it takes parameters */
    const mp_cost *body_cost; /* a Loop whose body was inferred pass by pass (it fills a
                               * sequence, ops/control.c): the passes' costs summed; NULL */
} mp_node;

typedef struct mp_graph {
    struct mp_model *model;
    struct mp_graph *parent;  /* enclosing graph for subgraphs */
    int parent_node;          /* node index in parent owning this graph */
    const char *name;
    mp_value *values;
    int n_values, cap_values;
    mp_node *nodes;
    int n_nodes, cap_nodes;
    int *inputs, n_inputs;    /* graph inputs (excluding initializers) */
    int *outputs, n_outputs;
    int *order;               /* topological order of node indices */
    mp_strmap names;          /* value name -> index */
    /* The consumer index (mp_graph_index): the readers of value v are
     * use_node[use_start[v] .. use_start[v + 1]), in node order, a node
     * once per input slot that reads v, and a node whose subgraph reads v
     * (an outer reference, at any depth) once more. Built when the graph
     * is complete (the loader, mp_model_finish); adding a node or a value
     * drops it (NULL) until built again. In the model's arena. */
    int *use_start, *use_node;
    /* The pattern layer's memo (src/analyze/patterns.c): one heap block,
     * freed with the graph; valid while patterns_gen == shape_gen, which
     * inference bumps each time it resets the graph's shapes. */
    void *patterns;
    uint32_t shape_gen, patterns_gen;
} mp_graph;

/* ---- module tree ---- */
typedef struct mp_module {
    const char *name;         /* local name: "0", "conv1"; root: graph name */
    const char *path;         /* dotted path: "layer1.0.conv1"; root: "" */
    const char *cls;          /* class name when known, else NULL */
    int parent;               /* -1 for the root */
    int depth;
    int first_child, last_child, next_sibling;
    bool ignored;             /* left out with its submodules (mp_model_ignore_module) */
} mp_module;

/* ---- symbols (named dims) ---- */
typedef struct mp_symbol {
    const char *name;
    int64_t value;            /* -1: no value given */
    bool on_input;            /* appears on a graph input */
    bool from_profile;        /* the value was read from ONNX Runtime's profile (mp_ort_dims) */
} mp_symbol;

typedef struct mp_opset {
    const char *domain;
    int version;
} mp_opset;

struct mp_model {
    mp_arena arena;
    char *path;
    char *dir;                /* folder of the model (for external data) */
    const char *stem;         /* the file's name without folder and ".onnx" (NULL: from memory) */
    const uint8_t *map;       /* the mapped file */
    size_t map_size;
    int fd;
    int64_t ir_version;
    const char *producer, *producer_version;
    mp_opset *opsets;
    int n_opsets;
    mp_graph *graph;
    mp_module *modules;
    int n_modules, cap_modules;
    mp_strmap module_paths;
    mp_symbol *syms;          /* syms[0] is the anonymous "?" */
    int n_syms, cap_syms;
    mp_strmap sym_names;
    char **warnings;
    int n_warnings, cap_warnings;
    bool weightless;          /* some external data file is absent */
    const char *absent_weights; /* the first such file, as the model names it */
    /* torch.export's graph signature (model metadata of dynamo exports):
     * sig_kind maps each input's name and target to MP_VAL_DECL_*;
     * sig_owner maps the module path owning a target to MP_SIG_OWNS_*. */
    bool has_signature;
    mp_strmap sig_kind, sig_owner;
    /* the signature's PARAMETER inputs, in its order (name and target;
     * target NULL when the line has none): what the optimizer may have
     * folded into constants of its own (docs/COUNTING.md) */
    struct mp_sig_param { const char *name, *target; } *sig_params;
    int n_sig_params, cap_sig_params;
    int module_source;        /* MP_MODSRC_* */
    uint64_t pass_work;       /* node inferences spent on Loops inferred pass by pass
                               * (ops/control.c) since the inference began: bounded */
    /* the main graph holds the shapes a measured run saw (run_dims on its
     * values, mp_profile_take_shapes); the inference takes them only while
     * run_shapes_apply is set (the profile counted again with them) */
    bool has_run_shapes;
    bool run_shapes_apply;
};

enum { MP_SIG_OWNS_PARAM = 1, MP_SIG_OWNS_BUFFER = 2 };
enum { MP_MODSRC_NONE = 0, MP_MODSRC_NAMES, MP_MODSRC_FUNCTIONS, MP_MODSRC_METADATA };

/* ---- construction helpers (graph.c) ---- */
mp_graph *mp_graph_new(struct mp_model *m, mp_graph *parent);
void mp_graph_release(mp_graph *g);  /* frees heap parts (maps), recursive */
/* Find or create the value named `name` (len bytes). -1 on out-of-memory. */
int mp_graph_value(mp_graph *g, const char *name, size_t len);
/* The same with the name's mp_strmap_hash computed by the caller. */
int mp_graph_value_h(mp_graph *g, const char *name, size_t len, uint32_t h);
int mp_graph_find(const mp_graph *g, const char *name);
int mp_graph_add_node(mp_graph *g);          /* -1 on out-of-memory */
mp_status mp_model_warn(struct mp_model *m, const char *fmt, ...) MP_PRINTF(2, 3);
int mp_model_symbol(struct mp_model *m, const char *name, size_t len);
/* Module by dotted path, created with its ancestors; -1 on failure. */
int mp_model_module(struct mp_model *m, const char *path, size_t len);
/* Build (or build again) the consumer index of g; out of memory: an
 * error status. */
mp_status mp_graph_index(mp_graph *g);
/* The readers of value v (see mp_graph.use_start): *n of them. The index
 * must be built. */
static inline const int *mp_uses(const mp_graph *g, int v, int *n) {
    *n = g->use_start[v + 1] - g->use_start[v];
    return g->use_node + g->use_start[v];
}
/* The one node reading v once (and no subgraph), -1 when none, several,
 * or v is a graph output. */
int mp_sole_use(const mp_graph *g, int v);
/* Is `target` (an fx node's ATen operator) one of PyTorch's batch norms,
 * in the functional forms torch.export writes? */
bool mp_fx_batch_norm(const char *target);
/* A node into which the exporter folded the BatchNorm after it: a Conv,
 * ConvTranspose, Gemm or MatMul of the dynamo exporter's optimizer
 * (FuseBatchNormIntoConv, train mode too), its fx node the batch norm's
 * (mp_node_fx_folded_bn); or a Conv of the TorchScript exporter in eval
 * mode, whose weight and bias are initializers the exporter computed from
 * the convolution's and the norm's (named onnx::Conv_N). */
bool mp_node_fx_folded_bn(const mp_node *n);
bool mp_node_folded_bn(const mp_graph *g, const mp_node *n);
static inline const mp_attr *mp_node_attr(const mp_node *n, const char *name) {
    for (int i = 0; i < n->n_attr; i++)
        if (mp_streq(n->attr[i].name, name)) return &n->attr[i];
    return NULL;
}
/* dst takes what the inference knows of src: its type, shape, contents
 * and sequence (arrays shared: the inference never changes one it set);
 * not its name, flags or links. */
void mp_value_take(mp_value *dst, const mp_value *src);
uint64_t mp_value_bytes(const mp_value *v);  /* 0 when shape unknown; a known sequence: its elements' */
/* Dim i of v (a negative i counts from the back); the anonymous dim when
 * v is absent, its rank unknown or i out of range. */
static inline int64_t mp_value_dim(const mp_value *v, int i) {
    if (!v || v->rank < 0) return MP_DIM_ANON;
    if (i < 0) i += v->rank;
    return (i >= 0 && i < v->rank) ? v->dims[i] : MP_DIM_ANON;
}
/* -1 unknown, -2 overflow */
static inline int64_t mp_value_numel(const mp_value *v) {
    return v->rank < 0 ? -1 : mp_dims_product(v->dims, v->rank);
}


/* An empty model with a main graph (load.c); NULL when out of memory. */
struct mp_model *mp_model_create(void);
#endif
