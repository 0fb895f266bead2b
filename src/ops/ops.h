/* Operator descriptors: one place holds an operator's whole story (shape
 * rule, cost rule, later its kernel). Each family file (elementwise.c,
 * matmul.c, ...) defines a table of descriptors; registry.c joins them. */
#ifndef MP_OPS_H
#define MP_OPS_H

#include "graph/graph.h"

/* Per-node context handed to an operator's functions. */
typedef struct mp_ctx {
    struct mp_model *m;
    mp_graph *g;
    mp_node *n;
    int node;                 /* index of n in g->nodes */
    /* the inference driver (src/analyze/), for control-flow ops: infers
     * (and costs) a subgraph whose outer values are already known; NULL
     * where no driver runs the rule (a body then cannot be inferred) */
    mp_status (*infer_graph)(struct mp_model *m, mp_graph *g);
} mp_ctx;

/* infer: set every output's dtype and shape (mp_set_out), and where cheap
 * and all inputs are known small tensors, the output's contents
 * (mp_set_ints / mp_set_floats) so shape arithmetic resolves.
 * Unknown input shapes are not an error: leave outputs unknown (rank -1)
 * or with unknown dims. A contradiction (bad rank, mismatched dims, bad
 * attribute) is an error: return mp_fail(c, ...).
 *
 * cost: fill k->macs and k->flops (and k->flags). The driver has already
 * filled the byte counts (every input read, every output written); an op
 * that reads only metadata (Shape, Size) sets k->bytes_read itself. The
 * driver fills params and activations. Use mp_cnumel() to read element
 * counts: it sets MP_COST_UNKNOWN when a shape is unknown. */
typedef mp_status (*mp_infer_fn)(mp_ctx *c);
typedef void (*mp_cost_fn)(mp_ctx *c, mp_cost *k);
/* For packed weights (MatMulNBits' 4-bit B): the true element count and
 * dtype of the parameter tensor t taken at `input`; false keeps t's own. */
typedef bool (*mp_param_view_fn)(const mp_node *n, int input, const mp_tensor *t,
                                 int64_t *count, int *dtype);

/* ---- kernels: the measured run (src/run/ plans and runs them) ----
 * A kernel computes a node's outputs from its inputs. Shapes are the ones
 * the static inference gave: every dim is known when a plan is made, and
 * the planner has given every output its buffer (in the activation arena),
 * so a kernel allocates nothing per run. */
typedef struct mp_rtensor {
    void *data;               /* NULL: an omitted optional input */
    int dtype;                /* MP_DT_* */
    int rank;
    const int64_t *dims;
    int64_t numel;
} mp_rtensor;

typedef struct mp_kexec mp_kexec;

typedef struct mp_kctx {
    const mp_node *n;
    const mp_graph *g;
    struct mp_exec *ex;       /* the executor's (opaque here): a key, and set when the kernel runs inside one */
    const mp_kexec *exec;     /* what the executor does for kernels (mp_kfuse ...); NULL: run alone */
    int n_in, n_out;
    const mp_rtensor *in;     /* in[i] for each node input */
    mp_rtensor *out;          /* out[i] for each node output */
    void *state;              /* what prepare made; freed by release */
    void *scratch;            /* prepare's *scratch bytes, 64-byte aligned */
    int threads;
    bool fuse;                /* prepare may absorb consumers (mp_kfuse) */
    bool fold;                /* run once at plan time on constants: outputs stay in the plain layout */
    const char *kname;        /* prepare may name what it chose ("openblas:sgemm"); NULL: the kernel's name */
} mp_kctx;

/* prepare (optional): once, when the plan is made. Inputs that are
 * constant (initializers, Constant outputs, folded values) have data set;
 * inputs known only at run time have data NULL. May build k->state (packed
 * weights, library primitives) and ask for per-run scratch bytes. Errors
 * go through mp_error naming the node. */
typedef mp_status (*mp_prepare_fn)(mp_kctx *k, size_t *scratch);
/* run: compute the outputs. Errors (a data-dependent index out of range)
 * go through mp_error naming the node; never exit or abort. */
typedef mp_status (*mp_run_fn)(mp_kctx *k);
typedef void (*mp_release_fn)(void *state);

/* A kernel as the planner picks it: an op's own portable one (from its
 * descriptor) or a library's (src/run/dnnl.h). */
typedef struct mp_kernel {
    const char *name;         /* "onednn:conv", "portable", ... for reports */
    mp_prepare_fn prepare;
    mp_run_fn run;
    mp_release_fn release;
} mp_kernel;

/* Fusion: with fusing on (k->fuse), prepare may absorb the single consumer
 * of its output 0 (BatchNormalization, Relu, an Add of a residual ...).
 * The executor then runs that node as part of this one and names the group
 * in the report; this kernel's output 0 becomes the absorbed node's output
 * 0, and the absorbed node's other inputs are appended to k->in (k->n_in
 * grows) in their order. Returns MP_ERR_USAGE when `node` cannot be
 * absorbed (not the sole consumer, already planned). */
mp_status mp_kfuse(mp_kctx *k, int node);
/* Absorb a whole subgraph at once (a decomposed LayerNormalization, whose
 * intermediate values have several readers): nodes[0..n) in topological
 * order, none planned yet. Every value the group makes but the last node's
 * output 0 (this kernel's output 0 included) must be read only by the
 * group's nodes and be no graph output; the nodes' other inputs must exist
 * before this step. Each node's inputs not made inside the group are
 * appended to k->in in order (node by node, input by input); output 0
 * becomes nodes[n-1]'s output 0. All or nothing: MP_ERR_USAGE absorbs
 * none. */
mp_status mp_kfuse_nodes(mp_kctx *k, const int *nodes, int n);

/* For an output whose shape the static inference left unknown because it
 * depends on data (NonZero, Unique, ...): give it its shape now; the
 * executor sets k->out[i] (dims, numel, data) from memory of its own. */
mp_status mp_kout_alloc(mp_kctx *k, int i, int rank, const int64_t *dims);
/* The plan's tensor for main-graph value v, as a prepare function may ask
 * of values beyond its own inputs (the parameters of a node it would
 * absorb): data is set when v is constant at plan time (an initializer, a
 * Constant, or a value folded: an Identity or Transpose of a weight);
 * NULL when k has no plan or v is out of range. */
const mp_rtensor *mp_kvalue(const mp_kctx *k, int v);
/* Constant input i (in prepare or run) as fp32: fp16 and bf16 weights are
 * decoded once per plan and kept by it (freed with the plan); fp32 data is
 * returned as is. NULL when input i is not a constant float tensor. */
const float *mp_kinput_f32(mp_kctx *k, int i);
/* In place (from prepare): output 0 may take the bytes of input i, of
 * the same size and layout, when nothing reads input i after this kernel;
 * the executor decides when it plans its memory, so the kernel must work
 * both ways (its output buffer being input i's, or another). No executor:
 * nothing happens. */
void mp_kshare(mp_kctx *k, int i);
/* Run fn(arg, lo, hi) over [0, n) split into chunks across the plan's
 * threads (serially when threads is 1 or n is small). */
typedef void (*mp_range_fn)(void *arg, int64_t lo, int64_t hi);
void mp_kparallel(mp_kctx *k, int64_t n, mp_range_fn fn, void *arg);

/* The executor behind the functions above (src/ops/kernel_util.c calls
 * through k->exec; the executor (src/run/exec.c) fills one in every context it
 * hands a kernel, and a test may give its own). Without one (k->exec
 * NULL): no fusion, no value beyond the inputs, no run-time output shapes,
 * ranges run serially, mp_kinput_f32 gives NULL. */
struct mp_kexec {
    mp_status (*out_alloc)(mp_kctx *k, int i, int rank, const int64_t *dims);
    void (*parallel)(mp_kctx *k, int64_t n, mp_range_fn fn, void *arg);
    mp_status (*fuse)(mp_kctx *k, int node);
    mp_status (*fuse_nodes)(mp_kctx *k, const int *nodes, int n);
    const mp_rtensor *(*value)(const mp_kctx *k, int v);
    const float *(*input_f32)(mp_kctx *k, int i);
    void (*share)(mp_kctx *k, int i);
};

/* ---- training: what an operator's backward keeps, and what it costs ----
 * The training planner (src/plan/, docs/PLANNING.md) asks each node's
 * train rule, beside its forward cost rule, what PyTorch's autograd keeps
 * for the backward and how many FLOPs the backward takes. On entry t->rg
 * has bit i set when input i needs a gradient (a parameter, or a value
 * computed from one), and t->fwd is the node's forward cost. The rule sets
 *   save_in / save_out  bit i: input / output i is kept (a kept input that
 *                       is a parameter or a constant costs no activation
 *                       memory; the planner knows which are);
 *   extra_bytes         other state kept, at the node's size (statistics,
 *                       masks, max-pool indices), in bytes;
 *   bwd_flops           FLOPs of the backward (the gradients of the inputs
 *                       in rg; 0 for data movement);
 *   amp                 how autocast runs it (MP_AMP_*);
 *   view                output 0 shares input 0's storage (Reshape, ...).
 * An op without a rule (train NULL) gets the default: every input kept,
 * bwd = 2 x fwd FLOPs, types promoted; the plan lists the ops that did. */
enum {
    MP_AMP_PROMOTE = 0, /* runs in the widest float type of its inputs */
    MP_AMP_LOWER,       /* autocast's lower-precision list: matmul, conv, linear */
    MP_AMP_FP32,        /* CUDA autocast's fp32 list: softmax, norms, exp, log, pow (CPU
                         * autocast runs them in their input's type) */
    MP_AMP_KEEP,        /* output dtype is the op's own (Cast, Shape, indices) */
    MP_AMP_LOSS         /* losses: fp32 under CUDA and CPU autocast alike */
};
typedef struct mp_bwd {
    uint32_t rg;              /* in: inputs that need a gradient */
    const mp_cost *fwd;       /* in: the node's forward cost */
    uint32_t save_in, save_out;
    uint64_t extra_bytes;
    uint64_t bwd_flops;
    uint64_t recompute_flops; /* of bwd_flops: forward work the backward does again
                                 (a fused attention's scores): executed, not model FLOPs */
    uint8_t amp;
    bool view;
    bool torch_1_13;          /* in: PyTorch 1.13's autograd rules (MeanBackward1 saved self) */
} mp_bwd;
typedef void (*mp_bwd_fn)(mp_ctx *c, mp_bwd *t);

/* Shared train rules (util.c). */
void mp_bwd_none(mp_ctx *c, mp_bwd *t);      /* data movement: keeps nothing, 0 FLOPs */
void mp_bwd_view(mp_ctx *c, mp_bwd *t);      /* a view of input 0 (Reshape, Transpose) */
void mp_bwd_save_in0(mp_ctx *c, mp_bwd *t);  /* keeps input 0: bwd = fwd FLOPs */
void mp_bwd_save_out0(mp_ctx *c, mp_bwd *t); /* keeps output 0: bwd = fwd FLOPs */
/* The product rule of a dot product (MatMul, Gemm, Conv): the gradient of
 * input 0 needs input 1 and the other way round; each costs the forward's
 * MACs again (2 x MACs FLOPs). */
void mp_bwd_product(mp_ctx *c, mp_bwd *t);
/* BatchNormalization's rules (ops/nn.c), for the planner's BatchNorm the
 * dynamo exporter folded into a convolution too: FLOPs per element of X
 * (DeepSpeed's: 5 in training, the statistics computed; 2 in inference),
 * and what a normalisation keeps besides its input (a mean and 1/std per
 * normalised group, fp32). Its backward costs twice its forward. */
int mp_bn_flops_per_elem(bool training);
uint64_t mp_norm_stat_bytes(uint64_t groups);

typedef struct mp_op {
    const char *domain;       /* "" for ai.onnx, "com.microsoft", ... */
    const char *name;
    int since;                /* first opset version this entry serves */
    mp_infer_fn infer;
    mp_cost_fn cost;          /* NULL: op recognised but uncounted */
    uint32_t param_inputs;    /* bit i: input i is learnable even if not float (quantized weights) */
    uint32_t buffer_inputs;   /* bit i: input i is a buffer, never a param (BN mean/var) */
    mp_param_view_fn param_view; /* NULL: a param counts its tensor's numel and dtype */
    mp_run_fn run;            /* portable kernel; NULL: not runnable here */
    mp_prepare_fn prepare;    /* optional plan-time preparation */
    mp_release_fn release;    /* frees what prepare left in state */
    mp_bwd_fn train;        /* training: what the backward keeps and costs; NULL: the default */
} mp_op;

/* Family tables (each file: const mp_op mp_ops_X[]; const int mp_ops_X_count;) */
#define MP_OP_FAMILIES(X) \
    X(elementwise)        \
    X(linalg)             \
    X(nn)                 \
    X(shape)              \
    X(control)            \
    X(sequence)           \
    X(contrib)            \
    X(quant)              \
    X(attention)          \
    X(misc)

#define MP__DECL_FAMILY(f)        \
    extern const mp_op mp_ops_##f[]; \
    extern const int mp_ops_##f##_count;
MP_OP_FAMILIES(MP__DECL_FAMILY)
#undef MP__DECL_FAMILY

/* Registry: the entry with the highest `since` <= opset; NULL if none. */
const mp_op *mp_op_find(const char *domain, const char *name, int opset);
/* Every registered entry, for listings and the documentation test. */
int mp_op_registry_size(void);
const mp_op *mp_op_registry_at(int i);

/* ---- helpers for operator code (util.c) ---- */
/* MP_KNOWN_MAX: graph/graph.h */

static inline mp_value *mp_in(mp_ctx *c, int i) {
    if (i < 0 || i >= c->n->n_in || c->n->in[i] < 0) return NULL;
    return &c->g->values[c->n->in[i]];
}
static inline mp_value *mp_out(mp_ctx *c, int i) {
    if (i < 0 || i >= c->n->n_out || c->n->out[i] < 0) return NULL;
    return &c->g->values[c->n->out[i]];
}
static inline bool mp_shape_known(const mp_value *v) {
    if (!v || v->rank < 0) return false;
    for (int i = 0; i < v->rank; i++)
        if (v->dims[i] < 0) return false;
    return true;
}

/* Required input i: present and within the rank limit, else an error
 * naming the input (what: its role, e.g. "W", or NULL). */
mp_status mp__need_in_fail(mp_ctx *c, int i, const char *what, mp_value **v);
static inline mp_status mp_need_in(mp_ctx *c, int i, const char *what, mp_value **v) {
    *v = mp_in(c, i);
    if (*v && (*v)->rank <= MP_MAX_RANK) return MP_OK;
    return mp__need_in_fail(c, i, what, v);
}

/* Error naming the node and op; returns MP_ERR_SHAPE. */
mp_status mp_fail(mp_ctx *c, const char *fmt, ...) MP_PRINTF(2, 3);
/* The node has lo to hi inputs, else mp_fail "expects N input(s), got n". */
mp_status mp_arity(mp_ctx *c, int lo, int hi);
/* Gemm's C (rank 0 to 2, known) broadcast one way to the output [od[0],
 * od[1]]: a dim of C that is neither 1 nor od's fails; an unknown od dim
 * takes C's when C's is above 1. */
mp_status mp_gemm_c_bcast(mp_ctx *c, const mp_value *cc, int64_t od[2]);

/* Attributes. */
int64_t mp_attr_i(const mp_node *n, const char *name, int64_t def);
double mp_attr_f(const mp_node *n, const char *name, double def);
const char *mp_attr_s(const mp_node *n, const char *name, const char *def);
/* Count of ints (and *v), or -1 when absent. */
int mp_attr_ints(const mp_node *n, const char *name, const int64_t **v);
int mp_attr_floats(const mp_node *n, const char *name, const double **v);

/* Outputs. dims are copied; rank -1 sets an unknown shape. */
mp_status mp_set_out(mp_ctx *c, int i, int dtype, int rank, const int64_t *dims);
/* The same sharing dims: an array that lives as long as the model and
 * never changes (a tensor's dims), as an initializer's value does. */
mp_status mp_set_out_keep(mp_ctx *c, int i, int dtype, int rank, const int64_t *dims);
mp_status mp_set_out_like(mp_ctx *c, int i, const mp_value *src);
mp_status mp_set_out_dtype(mp_ctx *c, int i, int dtype);  /* shape unknown */
/* Known contents of output i (its shape must be set; n = its numel). */
mp_status mp_set_ints(mp_ctx *c, int i, const int64_t *v, int64_t n);
mp_status mp_set_floats(mp_ctx *c, int i, const double *v, int64_t n);
/* The same taking v itself (no copy): an array in the model arena (from
 * mp_tensor_read, mp_scratch) that nothing changes afterwards. */
mp_status mp_keep_ints(mp_ctx *c, int i, int64_t *v, int64_t n);
mp_status mp_keep_floats(mp_ctx *c, int i, double *v, int64_t n);

/* Known contents of input i: true with *v and *n when known (small
 * initializers and Constant outputs are decoded on first use). Integer
 * contents are available as ints; float contents as floats; mp_ints on a
 * float tensor (or mp_floats on an int one) converts. */
bool mp_ints(mp_ctx *c, int i, const int64_t **v, int64_t *n);
bool mp_floats(mp_ctx *c, int i, const double **v, int64_t *n);
/* Known contents of a one-value input i (a scalar or [1]): true with *out. */
bool mp_int1(mp_ctx *c, int i, int64_t *out);

/* Multidirectional (numpy) broadcast of a and b into dims/rank. Unknown
 * ranks give *rank = -1. Fails on incompatible known dims. */
mp_status mp_broadcast(mp_ctx *c, const mp_value *a, const mp_value *b,
                       int *rank, int64_t *dims);
/* Normalise a possibly negative axis; -1 when out of range. */
int mp_axis(int64_t axis, int rank);
/* Scratch memory in the model arena (freed with the model). */
void *mp_scratch(mp_ctx *c, size_t bytes);

/* Element count of a value for costing: 0 and MP_COST_UNKNOWN on k when
 * unknown. */
static inline uint64_t mp_cnumel(const mp_value *v, mp_cost *k) {
    if (!v) return 0;
    int64_t n = mp_value_numel(v);
    if (n == -2) {
        k->flags |= MP_COST_OVERFLOW;
        return UINT64_MAX;
    }
    if (n < 0) {
        k->flags |= MP_COST_UNKNOWN;
        return 0;
    }
    return (uint64_t)n;
}

/* Product of cost factors: 0 with MP_COST_UNKNOWN when one is unknown
 * (< 0); saturates with MP_COST_OVERFLOW. */
uint64_t mp_cost_prod(mp_cost *k, const int64_t *f, int n);

/* Shared cost rules. */
void mp_cost_zero(mp_ctx *c, mp_cost *k);        /* data movement */
void mp_cost_out1(mp_ctx *c, mp_cost *k);        /* 1 FLOP per output element */
void mp_cost_in1(mp_ctx *c, mp_cost *k);         /* 1 FLOP per input-0 element */

/* Shared shape rules. */
/* Conv's rule (attributes kernel_shape, strides, pads, dilations, group,
 * auto_pad) on X = input xi, W = input wi, optional bias bi (-1: none);
 * output 0 gets out_dtype (0: X's dtype). For QLinearConv, ConvInteger. */
mp_status mp_conv_infer(mp_ctx *c, int xi, int wi, int bi, int out_dtype);
mp_status mp_infer_same(mp_ctx *c);              /* out0 = in0 (dtype, shape) */
mp_status mp_infer_broadcast(mp_ctx *c);         /* out0 = broadcast of all inputs, dtype of in0 */

/* ---- attention operators (attention.c, contrib.c) ----
 * The dims an attention operator works on: Attention (opset 23, 24) and
 * com.microsoft's Attention, MultiHeadAttention and GroupQueryAttention.
 * Dims are as the graph has them (< 0: unknown or a symbol). False when
 * the node is none of these or its inputs do not give its dims (no error
 * is left set). The pattern layer and the train rules read them. */
typedef struct mp_attn_dims {
    int64_t b;                /* batch */
    int64_t sq;               /* query length */
    int64_t skv, past, t;     /* new key/value length, past length (0 without), attended length */
    int64_t hq, hkv;          /* query heads, key/value heads */
    int64_t dk, dv;           /* head sizes of q/k and of v */
    double scale;             /* the scale on Q.K^T: the attribute, else 1/sqrt(dk); 0 unknown */
    bool causal;              /* is_causal, unidirectional, GroupQueryAttention */
    bool packed;              /* Q, K, V given as [B, S, heads * d] (or packed QKV) */
} mp_attn_dims;
bool mp_attention_dims(mp_ctx *c, mp_attn_dims *d);
/* com.microsoft's three (contrib.c); mp_attention_dims dispatches. */
bool mp_contrib_attention_dims(mp_ctx *c, mp_attn_dims *d);

/* Scaled dot-product attention's FLOPs, one rule for the trace, the
 * planner and the attention operators (docs/COUNTING.md "Attention's
 * backward"), as torch.utils.flop_counter counts them, for bh = batch x
 * query heads, query length sq, key length sk, head sizes dq (Q, K) and dv:
 *   fwd        the two products, 2 bh sq sk (dq + dv);
 *   bwd        what the fused backward executes (flop_counter's
 *              sdpa_backward_flop_count): the four gradient products
 *              dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q, 2 bh sq sk
 *              (2 dq + 2 dv) = 2 x fwd, and the scores Q K^T recomputed
 *              (flash and memory-efficient kernels keep no P), 2 bh sq sk dq:
 *              2.5 x fwd when dq = dv;
 *   recompute  of bwd, that recomputation: model FLOPs (MFU, 6ND) are
 *              bwd - recompute = 2 x fwd.
 * Causal masks are not discounted (flop_counter does not). */
typedef struct mp_sdpa_cost {
    double fwd, bwd, recompute;
} mp_sdpa_cost;
mp_sdpa_cost mp_sdpa_flops(double bh, double sq, double sk, double dq, double dv);
/* The share of those FLOPs a causal flash or memory-efficient kernel runs
 * (SDPA with is_causal, as transformers calls it when no token is padded,
 * nanoGPT always): it skips the tiles of scores wholly above the diagonal
 * (FlashAttention-2's n_block_max for causal; its forward tiles 128
 * queries by 64 or 128 keys, its backward the same), forward and
 * backward alike. With T = ceil(s / 128) query tiles over s keys it runs
 * T (T + 1) / 2 of T^2 tiles: (T + 1) / (2 T), 0.53 at 2,048 tokens, 1 up
 * to 128. Only where queries and keys are the same tokens (sq == sk, as in
 * training and a prefill); else 1. A time, never a count: the counts stay
 * flop_counter's. */
double mp_sdpa_causal_share(double sq, double sk);
/* What an attention operator's backward keeps and costs beyond its saved
 * inputs (autograd's SDPA: q, k, v, the output and one fp32 log-sum-exp
 * per query row and head; never the scores): sets t->extra_bytes (the
 * log-sum-exp), t->bwd_flops and t->recompute_flops (mp_sdpa_flops over
 * d), t->amp (autocast's lower precision); save_out bit 0 (the output).
 * Nothing when no input needs a gradient (t->rg 0). */
void mp_bwd_sdpa(const mp_attn_dims *d, mp_bwd *t);

/* For control-flow ops: a subgraph's node costs summed (after the driver
 * inferred it through c->infer_graph). */
void mp_graph_cost_sum(const mp_graph *g, mp_cost *sum);

#endif
