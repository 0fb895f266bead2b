/* The training planner (internal): reads the shaped graph and the profile,
 * asks each operator's train rule (src/ops/, mp_op.train) what its
 * backward keeps and costs, and sums them over a layout. It knows no
 * output format: src/report/plan.c writes the plan. Formulas and sources:
 * docs/PLANNING.md. */
#ifndef MP_PLAN_PLAN_H
#define MP_PLAN_PLAN_H

#include "analyze/patterns.h"
#include "analyze/profile.h"
#include "base/gpu.h"

#include <math.h>
#include <string.h>

/* Model states per parameter, bytes, and how ZeRO divides them
 * (docs/PLANNING.md "model states"). */
typedef struct mp_state_bytes {
    double weights, grads, master, optimizer; /* per parameter */
} mp_state_bytes;
void mp_tplan_state_bytes(mp_precision prec, mp_optimizer opt, mp_state_bytes *b);
/* Model states of `params` parameters on one GPU under ZeRO stage `zero`
 * over `dp` data-parallel ranks (fills the four states of m). */
void mp_tplan_model_states(uint64_t params, mp_precision prec, mp_optimizer opt, int zero, int dp,
                          mp_tplan_mem *m);
/* DeepSpeed's estimators without offload (deepspeed.runtime.zero):
 * estimate_zero2_model_states_mem_needs: 4 P + 16 P / gpus;
 * estimate_zero3_model_states_mem_needs: 4 L + 18 P / gpus (L: the
 * largest layer's params). */
uint64_t mp_tplan_deepspeed_zero2(uint64_t params, int gpus);
uint64_t mp_tplan_deepspeed_zero3(uint64_t params, uint64_t largest_layer, int gpus);

/* The loss (loss.c): what runs between output 0 and the scalar loss. */
typedef struct mp_tplan_loss {
    int asked;                   /* MP_LOSS_* as given (AUTO: read from the outputs) */
    int form;                    /* MP_LOSS_* planned (never AUTO) */
    const char *why;             /* why auto chose it, or why none; NULL */
    int out;                     /* the logits' value, -1 none */
    int softcap_in;              /* logits before a tanh(x / c) * c softcapping, -1 none */
    int logits_dt, ce_dt;        /* the logits' type and the cross-entropy's */
    bool upcast;                 /* a copy of the logits in the cross-entropy's type */
    uint64_t rows, classes;      /* per micro-batch */
    uint64_t kept;               /* kept for the backward: log-probabilities and targets */
    uint64_t fwd_transient;      /* beyond kept while log_softmax runs: logits and their copy */
    uint64_t bwd_transient;      /* beyond kept while its backward runs: two gradients */
    uint64_t fwd_io, bwd_io;     /* bytes its kernels move */
    int fwd_kernels, bwd_kernels, host_ops;
} mp_tplan_loss;
void mp_tplan_loss_rule(mp_tplan *pl, int logits_dt, bool mixed, uint64_t b_num, uint64_t b_den);
const char *mp_tplan_loss_name(int form);

/* The peak as a moment (peak.c): what is live when the allocator's count is
 * highest, by category. */
typedef struct mp_tplan_moment {
    int when;                    /* MP_MOMENT_* */
    int node;                    /* the node whose backward runs (MOMENT_BACKWARD), -1 */
    uint64_t weights, master, optimizer, grads;
    uint64_t activations;        /* kept for the backward and still alive (all micro-batches in flight) */
    uint64_t loss;               /* the loss's kept and transient tensors */
    uint64_t recomputed;         /* a checkpointed block's set brought back */
    uint64_t buckets;            /* DDP's all-reduce buckets (dp > 1 without ZeRO): resident */
    uint64_t gathered;           /* ZeRO-3/FSDP: the units at work unsharded (their parameters,
                                  * and in the backward the block's gradient before its
                                  * reduce-scatter) */
    uint64_t cast_cache;         /* autocast's cached low-precision copies of the checkpointed
                                  * blocks' weights, held until the autocast region ends */
    uint64_t transient;          /* the running operator's (or the optimizer's) temporaries */
    uint64_t workspace;          /* cuBLAS workspaces (in max_memory_allocated) */
    uint64_t rounding;           /* the caching allocator's 512-byte rounding of the states */
    uint64_t total;
    uint64_t if_freed_first;     /* with the gradients through the forward (--zero-grad
                                  * after-forward): the peak had the loop freed them before
                                  * the forward; 0 otherwise */
} mp_tplan_moment;
enum { MP_MOMENT_FORWARD, MP_MOMENT_LOSS_BACKWARD, MP_MOMENT_BACKWARD, MP_MOMENT_OPTIMIZER,
       MP_MOMENT_INFERENCE };
const char *mp_tplan_moment_name(int when);

/* One pipeline stage. */
typedef struct mp_pstage {
    int first, last;             /* positions in g->order, inclusive */
    int first_repeat, n_repeats; /* repeated modules (graph.c find_repeats) it holds */
    uint64_t params;             /* parameters held (after tp) */
    mp_tplan_mem mem;
    int in_flight;               /* micro-batches whose activations it holds (1F1B) */
    uint64_t cast_bytes;         /* of its activations: autocast's weight copies (one micro-batch) */
    uint64_t fwd_flops, bwd_flops, recompute_flops; /* per micro-batch, per GPU */
    double fwd_s, bwd_s, recompute_s, tp_comm_s, p2p_s; /* per micro-batch */
    double mb_s;                 /* all of the above */
    /* since fine-tuning (finetune.c) */
    uint64_t trainable;          /* parameters it trains (adapters included) */
    uint64_t host_bytes;         /* offloaded to the host (per GPU) */
    double link_bytes;           /* host link traffic per step */
    /* since the step around the graph */
    mp_tplan_moment at;          /* its peak's moment and what is live then (peak.c) */
    double host_mb_s, device_mb_s; /* per micro-batch: issuing its operators, the device busy */
    double queue_fwd_s;          /* the forward alone through the launch queue (inference) */
    uint64_t host_ops, kernels;  /* per micro-batch: operators dispatched, kernels launched */
} mp_pstage;

/* One layout --fit considered. */
typedef struct mp_fit_row {
    int dp, tp, pp, zero;
    uint64_t peak_bytes;         /* + reserve: what must fit */
    double step_s;
    double tokens_per_s;         /* samples when the model has no tokens */
    bool fits;
} mp_fit_row;

/* Per node: what the train rule said, once. */
typedef struct mp_pnode {
    uint64_t saved_rep, saved_split;  /* activation bytes kept, per micro-batch */
    uint64_t ckpt_rep, ckpt_split;    /* checkpointed: what it keeps when recomputed */
    uint64_t cast_rep, cast_split;    /* of the kept bytes: autocast's weight copies */
    uint64_t cast_first;              /* autocast: the low-precision copies of the parameters it
                                       * casts first here (its cache grows by them) */
    uint64_t params_rep, params_split; /* parameters first used here */
    uint64_t fwd_flops, bwd_flops;    /* per micro-batch */
    uint64_t bwd_recompute;           /* of bwd_flops: forward work done again (a fused
                                       * attention's scores): executed, not model FLOPs */
    double skipped;                   /* share of its FLOPs its kernel does not run, both ways (a
                                       * causal fused attention's tiles above the diagonal:
                                       * mp_sdpa_causal_share): time only, not counts */
    uint64_t bytes;                   /* bytes moved by the forward */
    uint64_t out_bytes;               /* its output 0, in the plan's type */
    uint64_t temp;                    /* transient bytes of its backward */
    uint64_t tp_comm;                 /* bytes all-reduced per pass under tp */
    double roof_fwd, roof_bwd;        /* roofline seconds of its forward and backward, whole */
    uint64_t simt_fwd, simt_bwd;      /* lane instructions of kernels bound by their issue, not by
                                       * FLOPs or bytes (PyTorch's own depthwise convolutions,
                                       * graph.c's native_depthwise), per micro-batch */
    uint64_t aux_fwd, aux_bwd;        /* kernels PyTorch runs around it (autocast's casts, cuDNN's
                                       * layout transposes): bytes moved in the forward and in the
                                       * backward (the gradients cast or transposed back) */
    uint32_t n_aux_fwd, n_aux_bwd;    /* those kernels */
    uint32_t n_bwd_kernels;           /* its backward's kernels: one per gradient it computes */
    uint16_t n_fwd_ops, n_bwd_ops;    /* operators PyTorch dispatches for it (views included) */
    uint64_t acc_bytes;               /* gradients accumulated into its output (a value used by
                                       * several nodes: one add per extra use) */
    uint32_t n_acc;
    int repeat;                       /* repeated module index, -1 outside */
    int unit;                         /* the block it goes with for pipeline stages */
    int first_param, n_params;        /* its parameter inputs: pparams[first_param ..] */
    int first_role, n_roles;          /* the declared parameters the graph does not hold (the
                                       * dynamo exporter merged or folded them away; the
                                       * profile's role_params) that it took first:
                                       * proles[first_role ..]. Parameters of their own in
                                       * PyTorch: weights, gradient, AccumulateGrad and
                                       * optimizer state each */
    uint64_t cross;                   /* bytes it keeps that an earlier unit kept first */
    int cross_unit;                   /* the latest such unit, -1 none */
    bool split;                       /* its work divides by tp */
    bool lower;                       /* runs at the low-precision peak */
    bool default_rule;
    /* since fine-tuning (finetune.c) */
    uint64_t lora_a, lora_b;          /* elements of its LoRA adapter's A (in x r) and B (r x out) */
} mp_pnode;

struct mp_tplan {
    const mp_profile *p;
    /* a mixture of experts: the profile planned, counted again with each
     * expert's rows under balanced routing (routing.c); the caller's
     * profile is p's source and gets its static shapes back on free */
    struct mp_profile *routed;
    mp_moe_summary moe;
    uint64_t moe_expert_params;  /* parameters the routed rows meet (the experts') */
    double active_params;        /* parameters a token meets: N less the experts it is not routed to */
    mp_tplan_options o;
    mp_arena arena;
    /* the GPU */
    const mp_gpu *gpu;           /* table row, NULL when none or all given */
    const char *gpu_label;
    double peak_flops, peak_low_flops; /* FLOP/s: training dtype, autocast's low dtype */
    double simt_ips;             /* lane instructions a second on the CUDA cores (one per core
                                  * and clock: the table's fp32 rate over 2); 0 unknown */
    int native_dw;               /* convolutions run by PyTorch's own depthwise kernels */
    double peak_tf32_flops;      /* FLOP/s of an fp32 product on the tensor cores (TF32; the
                                  * fp32 peak where the GPU has none or is given by hand) */
    const char *peak_dtype;
    double mem_bytes, bw, link;  /* bytes, bytes/s, bytes/s */
    const char *link_source;
    bool have_gpu;
    /* the model */
    int model_dt;                /* the export's float type (most parameter elements) */
    bool precision_auto;         /* o.precision was MP_PREC_AUTO: resolved to the export's type */
    int64_t export_batch, batch; /* --batch on a static export: its own batch, the one planned */
    bool batch_scaled;           /* per-sample figures scaled by batch / export_batch */
    uint64_t params, largest_layer;
    uint64_t tokens_per_mb, samples_per_mb; /* per micro-batch */
    bool has_tokens;
    const struct mp_patterns *pats; /* what the pattern layer recognised (analyze/patterns.h) */
    int heads, kv_heads;         /* attention heads and KV heads every block agrees on, 0 unknown */
    bool kv_replicated;          /* --tp does not divide the KV heads: K and V stay whole */
    bool vocab_split;            /* the LM head (and the loss) split over the vocabulary by tp */
    int kv_unknown;              /* attentions whose KV heads or head dim are not known */
    int attn_fused, attn_math;   /* attentions planned as one SDPA kernel (flash or memory-
                                  * efficient), or as SDPA's math backend (fp32 with grouped
                                  * KV heads: what its operators keep) */
    int attn_softcap;            /* planned eager for their logit softcapping, which SDPA does
                                  * not take (--attention fused) */
    int attn_causal;             /* of attn_fused: causal, run with is_causal (tiles above the
                                  * diagonal skipped) */
    double attn_causal_share;    /* the share of the scores' work those run (the longest's) */
    int n_repeats;
    int *repeats;                /* module ids of the repeated modules (graph.c find_repeats;
                                  * not the pattern layer's transformer blocks) */
    int repeat_parent;           /* their parent module, -1 none */
    int n_nodes;
    mp_pnode *nodes;             /* by position in g->order */
    uint8_t *param_split;        /* per value: a parameter tensor parallelism divides */
    int *pparams;                /* the parameter inputs of every node, in node order */
    int n_pparams;
    int *proles;                 /* the profile's role parameters, in node order */
    int n_proles;
    uint8_t *role_train;         /* per role parameter: trainable (NULL: all; finetune.c) */
    uint8_t *role_split;         /* per role parameter: split by tp (a column-split product's bias) */
    int split_nodes, replicated_nodes;
    const char **tp_ops;         /* op types of the block nodes, with how many split / replicated */
    int *tp_split, *tp_rep;
    int n_tp_ops;
    const char **default_ops;    /* op types that used the default train rule */
    int *default_counts;
    int n_default_ops;
    uint64_t loss_bytes;         /* the cross-entropy's kept log-probabilities */
    uint64_t dropout_bytes;      /* --dropout: the masks (and eager probabilities' copies) kept,
                                  * one micro-batch, before tp and checkpointing */
    int dropout_sites;           /* --dropout: where one runs (graph.c's dropout_keep) */
    uint64_t loss_fwd_io, loss_bwd_io; /* its kernels' traffic: forward, backward */
    int loss_fwd_kernels, loss_bwd_kernels;
    uint64_t cast_param_bytes;   /* autocast's low-precision weight copies */
    /* the layout */
    int dp, tp, pp, m, gpus, zero;
    mp_pstage *stages;
    int worst;                   /* stage with the largest peak */
    mp_tplan_mem mem;         /* per GPU: the worst stage */
    uint64_t ds_zero2, ds_zero3; /* DeepSpeed's estimates for the same layout */
    /* time */
    uint64_t fwd_flops, bwd_flops, recompute_flops; /* per step, whole model, all GPUs */
    double compute_s, bubble_s, dp_comm_s, tp_comm_s, p2p_s, optimizer_s, step_s;
    uint64_t dp_comm_bytes;
    double mfu_implied;
    double tokens_per_step, samples_per_step;
    double flops_6nd;            /* 6 N D (8 N D with recomputation) per step */
    double train_s, train_6nd_s; /* time to train the given tokens/samples; < 0 none */
    /* inference */
    uint64_t kv_bytes_per_token;
    uint64_t kv_bytes;           /* the cache at the graph's context, one rank before tp: a
                                  * sliding-window attention keeps its window's tokens */
    int kv_windowed;             /* attentions whose cache a sliding window bounds */
    /* an encoder-decoder (a cross-attention found): the per-token cache is
     * the decoder's causal self-attentions', at the decoder's tokens; the
     * cross-attentions hold the encoder's tokens, computed once (in
     * kv_bytes too); the encoder's own attentions hold none */
    bool kv_encdec;
    uint64_t kv_tokens;          /* the context kv_bytes is at: tokens_per_mb, or the decoder's */
    uint64_t kv_past_inputs;     /* bytes of the graph inputs that are a cache the caller gives
                                  * (a decoding step's past K and V): the cache, not more inputs */
    uint64_t kv_cross_bytes, kv_cross_tokens;
    uint64_t kv_encoder_flops;   /* of the forward: what the cross-attentions' K and V come from
                                  * (the encoder, their projections), run once, not per token */
    uint64_t infer_weights, infer_acts, infer_inputs;
    /* --fit */
    mp_fit_row *fit;
    int n_fit;
    mp_fit_row need;             /* the fewest GPUs (a power of two) with a layout that fits; dp 0: none */
    uint64_t stamp_base;         /* per-stage parameter stamps used so far */
    /* since the step around the graph (loss.c, peak.c, host.c) */
    mp_tplan_loss loss;
    uint64_t infer_live;         /* inference: live activations at the forward's peak (peak.c's walk) */
    uint64_t infer_cache;        /* inference under autocast: its cached weight copies at that peak */
    uint64_t workspace_bytes;    /* one cuBLAS workspace (PyTorch's default for the GPU) */
    uint64_t opt_tensors;        /* parameter tensors the optimizer steps */
    uint64_t opt_launches, opt_host_ops; /* per step: the optimizer's kernels and dispatches */
    double opt_host_s;           /* per step: the optimizer's dispatch time */
    int loss_scaler;             /* fp16-mixed: MP_SCALER_* (host.c) */
    int grad_passes;             /* per step, before the optimizer: passes over the stepped gradients,
                                  * reads and writes (loss scaling's unscale, clipping; host.c) */
    double host_s, device_s;     /* per step: issuing every operator, the device busy */
    bool host_bound;             /* the host issuing kernels is the slower */
    /* fine-tuning (finetune.c; docs/PLANNING.md section 12) */
    bool ft;                     /* trainable/frozen, LoRA, a quantized base, a per-tensor optimizer
                                  * or offload: model states per parameter class */
    uint8_t *ptrain;             /* per value: 1 a trainable parameter (NULL: every parameter) */
    uint8_t *pquant;             /* per value: 1 a frozen weight stored in --base-dtype */
    uint8_t *adapted;            /* per node index: 1 a LoRA adapter on it (NULL: none) */
    uint32_t *lora_in, *lora_out; /* per node index: the adapted product's in and out features */
    int n_adapted, adapted_qkv;  /* adapters; of them on a fused qkv asked by q, k or v */
    const char **adapted_names;  /* their weights' names, n_adapted */
    uint64_t lora_params;        /* A and B of every adapter */
    uint64_t trainable_params;   /* base parameters trained + adapters */
    uint64_t base_trainable;     /* of the base */
    uint64_t quant_params;       /* elements stored in --base-dtype */
    uint64_t quant_bytes;        /* their bytes (NF4: blocks, constants) */
    uint64_t dequant_bytes;      /* the largest quantized weight dequantized: a transient */
    uint64_t lora_fwd_flops, lora_bwd_flops; /* per micro-batch, the adapters' */
    double host_link;            /* bytes/s per direction */
    const char *host_link_source;
    double cpu_adam;             /* parameters/s of the offloaded optimizer */
    uint64_t host_bytes;         /* the worst stage's, per GPU */
    double link_bytes, link_s, cpu_opt_s; /* per step */
    /* --fit's answer on the plan's own layout (finetune.c): the largest
     * micro-batch that fits, without and with checkpointing */
    bool answer;
    uint64_t need_bytes, need_ckpt_bytes; /* required (peak + reserve) at the graph's micro-batch */
    int64_t max_mb, max_mb_ckpt;          /* samples per micro-batch that fit; 0 none, -1 unknown */
    double step_ckpt_s;
};

/* peak.c: the moment of a stage's peak (called by layout.c for each
 * stage of each layout), and host.c: the optimizer's operators and the
 * host's time to issue a stage's. */
typedef struct mp_peak_in {
    int first, last;             /* nodes of the stage */
    int tp, dp, zero, m, in_flight;
    uint64_t rdiv;               /* sequence parallelism's divisor of replicated block bytes */
    bool last_stage, grads_born; /* gradients allocated during the backward (set_to_none, one rank) */
    uint64_t cast_cached;        /* the checkpointed blocks' weight casts in autocast's cache */
    uint64_t buckets;            /* DDP's all-reduce buckets, resident (mp_tplan_ddp_buckets) */
    bool grads_in_forward;       /* with grads_born: the last step's gradients live through the forward
                                  * (zero_grad after the forward) */
    double grad_per_param, opt_per_param; /* bytes */
    double weight_per_param;     /* bytes of an unsharded weight (ZeRO-3/FSDP's gathered units) */
    const mp_tplan_mem *mem;     /* the stage's states and activations */
} mp_peak_in;
void mp_tplan_peak_stage(const mp_tplan *pl, const mp_peak_in *in, mp_tplan_moment *at);
/* Gradients allocated during the backward and freed between steps: one
 * rank, no accumulation, no ZeRO, and zero_grad(set_to_none=True) (not
 * --zero-grad in-place); otherwise they are resident (peak.c). */
bool mp_tplan_grads_born(const mp_tplan_options *o, int dp, int m, int zero);
/* The name the option table gives value `value` of choice flag `flag`
 * ("--zero-grad" 1: "before-forward"); NULL for another flag or value. */
const char *mp_tplan_choice_name(const char *flag, int value);
/* A node's autocast weight copies among its kept bytes (saved, or under
 * checkpointing its recomputed set), as layout.c divides them; mixed
 * precision under ZeRO or FSDP runs on 16-bit weights and has none. */
static inline uint64_t mp_tplan_node_casts(const mp_pnode *pn, uint64_t rdiv, uint64_t tp) {
    return pn->cast_rep / rdiv + pn->cast_split / tp;
}
/* What a checkpointed node keeps when its block is recomputed, less its
 * autocast copies when there are none (ZeRO, FSDP: `no_casts`). */
static inline uint64_t mp_tplan_node_ckpt(const mp_pnode *pn, uint64_t rdiv, uint64_t tp, bool no_casts) {
    uint64_t r = pn->ckpt_rep / rdiv + pn->ckpt_split / tp, c = no_casts ? mp_tplan_node_casts(pn, rdiv, tp) : 0;
    return r > c ? r - c : 0;
}
/* PyTorch DDP (dp > 1 without ZeRO or FSDP) keeps its all-reduce buckets, one
 * gradient's worth, for its lifetime unless the gradients are views of
 * them (--ddp-bucket-view): their bytes, else 0. */
uint64_t mp_tplan_ddp_buckets(const mp_tplan_options *o, int dp, int zero, uint64_t grads_bytes);
void mp_tplan_workspace(mp_tplan *pl);
void mp_tplan_optimizer_ops(mp_tplan *pl);
/* mp_tplan.loss_scaler: fp16-mixed training scales its loss; PyTorch's
 * GradScaler (FSDP's ShardedGradScaler: the same kernels on the shard), or
 * DeepSpeed's dynamic loss scaler under --zero */
enum { MP_SCALER_NONE, MP_SCALER_TORCH, MP_SCALER_DEEPSPEED };

/* Fine-tuning (finetune.c). */
mp_status mp_tplan_ft_check(const mp_tplan_options *o);
/* Before the graph pass: trainable parameters (--freeze/--unfreeze, the base
 * frozen under LoRA), adapted nodes (--lora-targets over the pattern
 * layer's roles), the host link. */
mp_status mp_tplan_ft_prepare(mp_tplan *pl, const struct mp_patterns *P);
/* --fit's answer: the graph's layout with and without checkpointing, the
 * largest micro-batch that fits each (after the plan is made). */
mp_status mp_tplan_ft_answer(mp_tplan *pl);
/* The parameter a value is (or is a view of: W.t()), -1 none. */
int mp_tplan_weight_of(const mp_graph *g, int v);
/* Optimizer state bytes of one trainable tensor of n elements (rows x cols
 * for Adafactor), states of s bytes. */
double mp_tplan_opt_tensor(mp_optimizer opt, double s, uint64_t n, uint64_t rows, uint64_t cols);
/* Bytes of n weights stored in --base-dtype (rows: output features). */
double mp_tplan_quant_bytes(const mp_tplan_options *o, uint64_t n, uint64_t rows);
typedef struct mp_ft_acc {
    uint64_t train_rep, train_split, frozen_rep, frozen_split, adapters;
    double quant_bytes, opt_bytes, largest;
} mp_ft_acc;
void mp_tplan_ft_param(const mp_tplan *pl, int v, bool split, int tp, mp_ft_acc *a);
/* e elements of one parameter (rows x cols for a factored optimizer, 0 for a
 * vector), trainable or frozen, split by tp or whole. */
void mp_tplan_ft_elems(const mp_tplan *pl, uint64_t e, uint64_t rows, uint64_t cols, bool trains, bool split, int tp,
                       mp_ft_acc *a);
void mp_tplan_ft_node(const mp_tplan *pl, const mp_pnode *pn, mp_ft_acc *a);
/* The stage's model states from its classes (replaces mp_tplan_model_states's
 * figures), the host's share and the step's offload time. */
void mp_tplan_ft_states(const mp_tplan *pl, const mp_ft_acc *a, int tp, int zero, int dp, int m,
                        mp_tplan_mem *mem, mp_pstage *ps, double *opt_s);

/* Bandwidth of a collective over `span` GPUs, bytes/s: --link-gbs, else
 * the GPU's NVLink/PCIe inside a node of 8, else 400 Gb/s InfiniBand. */
double mp_tplan_link_bw(const mp_tplan *pl, int span);

/* The planner's parts (one file each):
 * graph.c    the graph pass: per-node figures, model facts (parameters,
 *            heads, tokens, the loss, inference and KV-cache figures);
 * layout.c   the plan's layout (stages, memory, time), --fit's layouts and
 *            the GPUs-needed search;
 * states.c   model states (above). */
mp_status mp_tplan_graph(mp_tplan *pl);
int mp_tplan_model_dtype(const mp_graph *g);
mp_status mp_tplan_layouts(mp_tplan *pl);

static inline bool mp_tplan_mixed(mp_precision p) {
    return p == MP_PREC_BF16_MIXED || p == MP_PREC_FP16_MIXED;
}
static inline uint64_t mp_tplan_numel(const mp_value *v) {
    int64_t n = mp_value_numel(v);
    return n > 0 ? (uint64_t)n : 0;
}
/* Role parameter r (the profile's role_params, pl->proles): trainable? */
static inline bool mp_tplan_role_trains(const mp_tplan *pl, int r) { return !pl->role_train || pl->role_train[r]; }
/* An Identity of a parameter: the TorchScript exporter keeps one
 * initializer for equal tensors (a fresh model's LayerNorm weights, all
 * ones) and names each other declared parameter with such a copy. In
 * PyTorch it is a parameter of its own: nothing dispatched for it, its own
 * AccumulateGrad and optimizer state, no gradient summed with the one it
 * copies. */
static inline bool mp_tplan_param_copy(const mp_graph *g, const mp_node *n) {
    return strcmp(n->op, "Identity") == 0 && (!n->domain || !n->domain[0]) && n->n_in >= 1 && n->in[0] >= 0 &&
           n->n_out >= 1 && n->out[0] >= 0 && (g->values[n->in[0]].flags & MP_VAL_PARAM);
}
/* One generated token's forward: the forward over the context's tokens, an
 * encoder-decoder's encoder (run once per sequence) aside. */
static inline uint64_t mp_tplan_decode_flops(const mp_tplan *pl) {
    uint64_t t = pl->kv_tokens ? pl->kv_tokens : pl->tokens_per_mb;
    uint64_t f = pl->fwd_flops > pl->kv_encoder_flops ? pl->fwd_flops - pl->kv_encoder_flops : 0;
    return t ? f / t : 0;
}
static inline uint64_t mp_tplan_dbytes(double per, uint64_t n) {
    return (uint64_t)llround(per * (double)n);
}

#endif
