/* The pattern layer (GUIDE §13, docs/DESIGN.md "Patterns"): a graph read at
 * three levels, nodes, patterns and blocks.
 *
 * A pattern is a piece of a model that frameworks run as one operator but an
 * exporter may write in many: a LayerNorm or RMSNorm, a GELU, SiLU or
 * SwiGLU, a rotary embedding, an attention. A block is a transformer layer:
 * its attention (heads, KV heads, head dim), its norms, its MLP, and the
 * roles of its weight products (q, k, v or a fused qkv, the output
 * projection, up, gate, down), which Megatron-style tensor parallelism and
 * the KV cache need. At model level: the token embedding and the LM head.
 *
 * Patterns are found once per shaped graph (after inference: they read
 * shapes and the small constants inference knows), over the graph's
 * consumer index (graph.h, mp_graph_index), and kept on the graph until its
 * shapes change. Every reader asks this layer: the training planner (what
 * is saved, what tensor parallelism splits), the oneDNN glue (what runs
 * fused), the reports (what was recognised). Each reader still checks what
 * it alone needs (the glue: fp32, known dims). The trace FLOP rules
 * (src/trace/flops.c) do not read it: a trace has operators and their
 * input shapes, no graph, so they count each aten operator by its own
 * formula (docs/COUNTING.md).
 *
 * Everything is main-graph node and value indices; -1 means none. Dims are
 * as the graph has them: >= 0 known, < 0 a symbol (graph.h MP_DIM_*).
 * The forms each pattern is recognised in are listed in docs/DESIGN.md
 * "Patterns" and tested on real exports (tests/test_patterns.c). */
#ifndef MP_ANALYZE_PATTERNS_H
#define MP_ANALYZE_PATTERNS_H

#include "graph/graph.h"

/* ---- kinds, forms, parts: enums with name tables (patterns.c checks
 * each table against its enum with a static assert) ---- */

/* What a node belongs to. */
#define MP_PAT_KIND_LIST(X) \
    X(NONE, "none")         \
    X(NORM, "norm")         \
    X(ACT, "activation")    \
    X(ROTARY, "rotary")     \
    X(ATTN, "attention")
typedef enum mp_pat_kind {
#define MP__PK(id, name) MP_PAT_##id,
    MP_PAT_KIND_LIST(MP__PK)
#undef MP__PK
    MP_PAT_KIND_COUNT
} mp_pat_kind;

/* How a pattern is written. */
#define MP_FORM_LIST(X)                                                                     \
    X(OP, "operator")          /* one operator of the default domain (LayerNormalization, \
                                  Gelu, RMSNormalization, Attention 23, RotaryEmbedding) */ \
    X(CONTRIB, "com.microsoft") /* a com.microsoft fused operator */                       \
    X(DECOMPOSED, "decomposed") /* elementary operators (TorchScript exporter; opsets     \
                                   before the operator existed; eager attention) */        \
    X(SDPA, "sdpa")             /* attention only: the dynamo exporter's decomposed        \
                                   scaled_dot_product_attention (IsNaN/Where guard after   \
                                   the softmax, or the scale split over Q and K) */
typedef enum mp_pat_form {
#define MP__PF(id, name) MP_FORM_##id,
    MP_FORM_LIST(MP__PF)
#undef MP__PF
    MP_FORM_COUNT
} mp_pat_form;

#define MP_NORM_LIST(X)        \
    X(LAYER, "layernorm")      \
    X(RMS, "rmsnorm")
typedef enum mp_norm_kind {
#define MP__NK(id, name) MP_NORM_##id,
    MP_NORM_LIST(MP__NK)
#undef MP__NK
    MP_NORM_COUNT
} mp_norm_kind;

/* Activations. GELU covers Gelu(approximate=none), the erf form, BiasGelu;
 * GELU_TANH Gelu(approximate=tanh), the tanh form, FastGelu; SILU x *
 * Sigmoid(x) and Swish(alpha=1); the gated ones act(gate) * up. */
#define MP_ACT_LIST(X)           \
    X(GELU, "gelu")              \
    X(GELU_TANH, "gelu_tanh")    \
    X(QUICK_GELU, "quick_gelu")  \
    X(SILU, "silu")              \
    X(MISH, "mish")              \
    X(RELU, "relu")              \
    X(SWIGLU, "swiglu")          \
    X(GEGLU, "geglu")
typedef enum mp_act_kind {
#define MP__AK(id, name) MP_ACT_##id,
    MP_ACT_LIST(MP__AK)
#undef MP__AK
    MP_ACT_COUNT
} mp_act_kind;

/* The part a member node plays in its pattern. */
#define MP_PART_LIST(X)                                                            \
    X(OP, "op")             /* the whole operator */                               \
    X(BODY, "body")         /* an inner node of a decomposed norm, act or rotary */ \
    X(AFFINE, "affine")     /* a norm's scale (gamma) or shift (beta) */           \
    X(GATE, "gate")         /* a gated activation's product act(gate) * up */      \
    X(CAST, "cast")         /* a Cast inside the pattern */                        \
    X(QK, "qk")             /* attention: the score product Q.K^T */               \
    X(K_T, "k_t")           /* attention: the transpose that makes K^T */         \
    X(SCALE, "scale")       /* attention: the scores scaled (Mul/Div) */           \
    X(Q_SCALE, "q_scale")   /* attention: Q scaled before the product */           \
    X(K_SCALE, "k_scale")   /* attention: K (or K^T) scaled before the product */  \
    X(MASK, "mask")         /* attention: the mask applied (Add, Where) */         \
    X(SOFTCAP, "softcap")   /* attention: the scores' Tanh between / c and * c     \
                               (Gemma-2's attn_logit_softcapping) */              \
    X(VIEW, "view")         /* attention: the scores' leading dims regrouped       \
                               (Swin's windows), queries x keys unchanged */      \
    X(SOFTMAX, "softmax")   /* attention: the softmax */                           \
    X(GUARD, "guard")       /* attention: IsNaN and its Where after the softmax */ \
    X(DROPOUT, "dropout")   /* attention: dropout of the probabilities */          \
    X(PV, "pv")             /* attention: the product with V */                    \
    X(REPEAT, "repeat")     /* attention: grouped K/V heads repeated (Unsqueeze,   \
                               Expand, Reshape, Tile) */
typedef enum mp_pat_part {
#define MP__PP(id, name) MP_PART_##id,
    MP_PART_LIST(MP__PP)
#undef MP__PP
    MP_PART_COUNT
} mp_pat_part;

/* Attention masks. CAUSAL_OP: no mask operand, causality is the operator's
 * attribute (is_causal, unidirectional, GroupQueryAttention). */
#define MP_MASK_LIST(X)            \
    X(NONE, "none")                \
    X(ADD, "additive")             \
    X(WHERE, "where")              \
    X(BOOL, "bool")                \
    X(CAUSAL_OP, "causal_op")
typedef enum mp_mask_kind {
#define MP__MK(id, name) MP_MASK_##id,
    MP_MASK_LIST(MP__MK)
#undef MP__MK
    MP_MASK_COUNT
} mp_mask_kind;

/* Roles of a block's weight products (a MatMul or Gemm whose weight is a
 * parameter or a view of one). Megatron-LM splits Q, K, V, QKV, UP, GATE,
 * GATE_UP by columns and O, DOWN by rows. A plain MLP's fc1 is UP, its
 * fc2 DOWN. */
#define MP_WROLE_LIST(X)     \
    X(Q, "q")                \
    X(K, "k")                \
    X(V, "v")                \
    X(QKV, "qkv")            \
    X(O, "o")                \
    X(UP, "up")              \
    X(GATE, "gate")          \
    X(GATE_UP, "gate_up")    \
    X(DOWN, "down")
typedef enum mp_wrole {
#define MP__WR(id, name) MP_WROLE_##id,
    MP_WROLE_LIST(MP__WR)
#undef MP__WR
    MP_WROLE_COUNT
} mp_wrole;

/* What a norm does in its block (a LayerNorm of BERT's attention output
 * is both ATTN_OUT and MLP_IN). */
#define MP_NROLE_LIST(X)                                              \
    X(ATTN_IN, "attn_in")    /* its output feeds the q/k/v products */ \
    X(MLP_IN, "mlp_in")      /* its output feeds the MLP's up/gate */  \
    X(Q, "q_norm")           /* on the query path (Qwen3, OLMo2) */    \
    X(K, "k_norm")           /* on the key path */                     \
    X(ATTN_OUT, "attn_out")  /* normalises the attention residual (post-norm) */ \
    X(MLP_OUT, "mlp_out")    /* normalises the MLP residual (post-norm) */       \
    X(FINAL, "final")        /* after the last block (model level) */
typedef enum mp_nrole {
#define MP__NR(id, name) MP_NROLE_##id,
    MP_NROLE_LIST(MP__NR)
#undef MP__NR
    MP_NROLE_COUNT
} mp_nrole;

const char *mp_pat_kind_name(int kind);
const char *mp_pat_form_name(int form);
const char *mp_norm_kind_name(int kind);
const char *mp_act_kind_name(int kind);
const char *mp_pat_part_name(int part);
const char *mp_mask_kind_name(int kind);
const char *mp_wrole_name(int role);
const char *mp_nrole_name(int role);

/* ---- the patterns ---- */

/* One member node; a pattern's members are a run of mp_patterns.members,
 * in topological order (g->order): the first is the one a kernel that
 * runs the pattern whole sits on. */
typedef struct mp_pmember {
    int node;
    int part;                /* MP_PART_* */
} mp_pmember;

/* LayerNorm or RMSNorm over the last `dim` elements. */
typedef struct mp_pnorm {
    int kind;                /* MP_NORM_* */
    int form;                /* OP, CONTRIB or DECOMPOSED */
    int first, n;            /* members[first .. first + n) */
    int x;                   /* the input normalised (after a SkipLayerNorm's sum) */
    int skip;                /* SkipLayerNormalization: the residual added to x first, else -1 */
    int y;                   /* the output (after scale and shift) */
    int scale, shift;        /* gamma and beta values, -1 when absent */
    double eps;              /* < 0: not known */
    int64_t dim;             /* normalised elements per row, -1 unknown */
    int block;               /* its block, -1 outside the blocks */
    unsigned roles;          /* bit MP_NROLE_*: what it does there */
} mp_pnorm;

/* An activation; a gated one (SWIGLU, GEGLU) holds its gate's own
 * activation pattern (`inner`) and the product with `up`. */
typedef struct mp_pact {
    int kind;                /* MP_ACT_* */
    int form;                /* OP, CONTRIB or DECOMPOSED */
    int first, n;            /* members (a gated one: only its GATE product; the
                                inner activation's nodes are the inner pattern's) */
    int x;                   /* the input (a gated one: the gate's pre-activation) */
    int bias;                /* BiasGelu/FastGelu's bias operand, -1 */
    int up;                  /* gated: the other operand of the product, else -1 */
    int act_out;             /* gated: the inner activation's output, else y */
    int y;                   /* the output */
    int inner;               /* gated: index of the inner activation in acts, else -1 */
    int outer;               /* the gated pattern this one is the inner of, -1 */
    int block;
    bool one_op;             /* a tanh GELU that is one ATen operator, F.gelu(approximate="tanh")
                                (its backward keeps the input alone), not a GELU written out in
                                Python (Hugging Face's gelu_new: each operator keeps its own) */
} mp_pact;

/* A rotary embedding of one tensor (q or k): rotate-half written out
 * (Mul by cos, Slice, Neg, Concat, Mul by sin, Add; partial rotary's
 * Slice and Concat around it) or RotaryEmbedding. */
typedef struct mp_protary {
    int form;
    int first, n;
    int x, y;                /* the tensor rotated and the result */
    int cos, sin;            /* the tables as the rotation reads them, -1 unknown */
    int64_t rot_dim;         /* dims rotated per head, -1 unknown */
    int64_t head_dim;        /* dims per head, -1 unknown (rot_dim < head_dim: partial) */
    bool interleaved;        /* pairs (2i, 2i+1) instead of halves */
    int attn;                /* the attention whose Q or K it makes, -1 */
    bool on_k;               /* it rotates K (else Q) */
} mp_protary;

/* An attention. Decomposed forms: softmax(scale * Q K^T + mask) V, with
 * the guard, casts and dropout around the softmax. Q, K, V are the values
 * as the attention's products read them, K un-transposed:
 *   q [.., H, Sq, D], k [.., H, Sk, D] (after any GQA repetition),
 *   v [.., H, Sk, Dv];
 * k_kv and v_kv are K and V before any repetition (what a KV cache keeps:
 * [.., kv_heads, Sk, D]); without repetition they equal k and v. For
 * operators: their Q, K, V inputs (packed forms: the packed input for
 * each, k_kv/v_kv as given); com.microsoft Attention computes Q, K, V
 * inside (from its input and weights): q, k, v are -1 there. */
typedef struct mp_pattn {
    int form;                /* DECOMPOSED, SDPA, OP, CONTRIB */
    int first, n;
    int op;                  /* a whole operator: its node, else -1 */
    int qk, softmax, pv;     /* decomposed: the score product, softmax, product with V; else -1 */
    int q, k, v;             /* see above */
    int k_kv, v_kv;
    int y;                   /* the attention's output (the PV product's, the operator's output 0) */
    int64_t batch;           /* -1 unknown */
    int64_t heads, kv_heads; /* -1 unknown */
    int64_t head_dim, v_head_dim;
    int64_t seq_q, seq_k;    /* dims as in the graph (may be symbols) */
    int mask;                /* MP_MASK_* */
    int mask_v;              /* the mask operand (additive tensor or Where's condition), -1 */
    bool mask_fill_on_true;  /* WHERE: the fill replaces scores where the condition is true */
    double mask_fill;        /* WHERE: the fill (-inf or float's lowest) */
    bool causal;             /* the mask is causal: the operator says so, or it is built
                                from Trilu, Range/LessOrEqual/GreaterOrEqual or a
                                constant lower-triangular table */
    int64_t window;          /* a constant causal mask's sliding window: keys i - window <
                                j <= i (0: every earlier key) */
    double score_scale;      /* the SCALE member's factor (Mul k, Div 1/k); 1 without */
    double scale;            /* the whole scale applied to Q.K^T (score, q and k
                                scales multiplied); 0 when not known */
    bool guard;              /* IsNaN/Where after the softmax */
    double guard_value;      /* what the guard writes for NaN */
    bool dropout;
    double softcap;          /* c of tanh(scores / c) * c (Gemma-2's attention logit
                                softcapping), which SDPA does not take; NAN when its scales
                                are not read; 0 none */
    bool cross;              /* K and V projected from another input than Q (an encoder-
                                decoder's cross-attention): a KV cache of the other
                                input's tokens, computed once */
    int rotary_q, rotary_k;  /* rotary patterns on its Q and K, -1 */
    int block;               /* -1 outside the blocks */
} mp_pattn;

/* A weight product of a block. */
typedef struct mp_pweight {
    int node;                /* the MatMul or Gemm, -1 when the block has none in this role */
    int weight;              /* its weight value (a parameter or a view of one) */
    int bias_node;           /* the Add of its bias when separate, else -1 */
    int bias;                /* the bias value (Gemm's C or the Add's operand), -1 */
    int64_t in, out;         /* features in and out, -1 unknown */
} mp_pweight;

/* A transformer block. */
typedef struct mp_pblock {
    int module;              /* the repeated module (m->modules index), -1 when the
                                graph has no module tree */
    int attn;                /* its attention, -1 */
    int mlp;                 /* its MLP's activation (acts index; the gated one for
                                SwiGLU/GeGLU), -1 */
    int mlp_kind;            /* MP_ACT_* of that activation, -1 */
    int norm[MP_NROLE_COUNT];/* its norms by role (norms index), -1 */
    mp_pweight w[MP_WROLE_COUNT];
    int64_t heads, kv_heads, head_dim;
    int64_t hidden;          /* the residual stream's width, -1 */
    int64_t ffn;             /* the MLP's inner width, -1 */
    bool parallel;           /* attention and MLP read the same input (GPT-J, GPT-NeoX) */
    int first, last;         /* positions in g->order of its first and last node */
} mp_pblock;

/* Something that looked like a pattern and was not recognised: the
 * planner says why it assumed eager attention. */
typedef struct mp_pmiss {
    int node;
    int kind;                /* MP_PAT_* it would have been */
    const char *why;         /* a static sentence */
} mp_pmiss;

/* What node n belongs to. */
typedef struct mp_pref {
    int kind;                /* MP_PAT_*; NONE: nothing */
    int index;               /* into norms, acts, rotary or attn */
    int part;                /* MP_PART_* */
} mp_pref;

typedef struct mp_patterns {
    const mp_graph *g;
    int n_norms, n_acts, n_rotary, n_attn, n_blocks, n_miss, n_members;
    mp_pnorm *norms;
    mp_pact *acts;
    mp_protary *rotary;
    mp_pattn *attn;
    mp_pblock *blocks;       /* in graph order */
    mp_pmiss *miss;
    mp_pmember *members;
    mp_pref *node;           /* per main-graph node */
    /* the model around the blocks */
    int embed;               /* the token embedding's Gather, -1 */
    int embed_table;         /* its table (rows: the vocabulary) */
    int lm_head;             /* the final product onto the vocabulary, -1 */
    int lm_weight;           /* its weight value */
    bool tied;               /* the LM head's weight is the embedding table (or a view of it) */
    int final_norm;          /* norms index of the norm after the last block, -1 */
    int64_t vocab, hidden;   /* -1 unknown */
    /* figures every block agrees on, else -1 */
    int64_t heads, kv_heads, head_dim;
} mp_patterns;

/* The patterns of g's current shapes (any graph; indices are g's own):
 * found on the first call after the graph was inferred, kept on the graph
 * (freed with it) until inference runs again. NULL, with mp_error set, when
 * out of memory. Not thread-safe on one graph. */
const mp_patterns *mp_patterns_of(const mp_graph *g);

/* What node n belongs to ({MP_PAT_NONE, -1, 0} outside every pattern). */
static inline mp_pref mp_pattern_at(const mp_patterns *p, int node) {
    if (!p || node < 0 || node >= p->g->n_nodes) return (mp_pref){MP_PAT_NONE, -1, 0};
    return p->node[node];
}

/* One attention's K and V elements per token (KV heads x (head dim + V's
 * head dim), before any repetition); 0 when not known. */
uint64_t mp_pattn_kv_elems(const mp_pattn *a);
/* Is attention a causal: a causal mask recognised, or an operator's own
 * causal flag? */
static inline bool mp_pattn_causal(const mp_pattn *a) { return a->causal || a->mask == MP_MASK_CAUSAL_OP; }
/* The KV cache attention a reads from the caller: its K (which 0) or V
 * (which 1) a Concat of a graph input (the past) and the new ones, through
 * views and casts (a decoding step exported with past_key_values). Returns
 * that input's value, -1 when none. */
int mp_pattn_past(const mp_patterns *p, const mp_pattn *a, int which);
static inline bool mp_pattn_past_kv(const mp_patterns *p, const mp_pattn *a) { return mp_pattn_past(p, a, 0) >= 0; }
/* K and V elements one token adds to a KV cache, summed over the
 * attentions: kv_heads * (head_dim + v_head_dim) each. 0 when an attention's
 * figures are not known (*unknown counts those). Multiply by the cache's
 * dtype bytes. */
uint64_t mp_patterns_kv_elems_per_token(const mp_patterns *p, int *unknown);

/* ---- mixture of experts (routing.c) ----
 * The NonZeros that find each expert's tokens after a router's TopK (the
 * one-hot mask's slice e, or indices == e), and the rows each gets under
 * balanced routing: numel(indices) / E, the remainder to the first
 * experts, so that one router's rows sum to tokens x k exactly. */
typedef struct mp_moe_route {
    int node, value;        /* the NonZero and its output */
    int router;             /* the TopK node */
    int64_t expert;         /* e */
    int rank;               /* the output's rank: 2 */
    int64_t dims[2];        /* [rank of the mask, rows] */
} mp_moe_route;
typedef struct mp_moe_summary {
    int routers, finders;   /* TopK nodes; NonZeros found */
    int64_t experts, top_k; /* E and k (the largest over the routers) */
    int64_t tokens;         /* tokens one router routes */
} mp_moe_summary;
/* Fills out (cap entries, main-graph order) and sum; returns how many
 * finders there are (more than cap: the rest not written). Reads the
 * shaped graph before its data-dependent shapes are known. */
int mp_moe_routing(const mp_graph *g, mp_moe_route *out, int cap, mp_moe_summary *sum);

/* A scalar constant's value as the graph knows it (an initializer, a
 * Constant, contents inference worked out): false when v is not one. */
bool mp_value_scalar(const mp_graph *g, int v, double *out);
/* Constant at plan time as far as the graph tells (initializer, Constant
 * output, contents inference knows). */
bool mp_value_const(const mp_graph *g, int v);

#endif
