/* The training plan's writers: text in the house layout (rules, labels at
 * column 24, every figure through the one number formatter, every
 * assumption beside the figure it affects) and JSON through the one JSON
 * writer (docs/JSON.md "plan", docs/schema/plan.schema.json). They read
 * only the plan (and the profile and model it points to). */
#include "plan/plan.h"
#include "analyze/patterns.h"
#include "report/jw.h"
#include "report/report.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define PL_RULE_WIDTH 92
#define PL_LABEL_WIDTH 24

typedef struct pw {
    mp_out o;
    char buf[16384];
} pw;

/* printf into the writer's buffer (the one output buffer, report.c) */
#define pf(w, ...) mp_out_printf(&(w)->o, __VA_ARGS__)

static void rule(pw *w, const char *title) { mp_out_rule(&w->o, title, PL_RULE_WIDTH); }

static void label(pw *w, const char *l) { pf(w, "%-*s", PL_LABEL_WIDTH, l); }

/* A model-supplied name safe for a terminal (control bytes as '?'). */
static void safe(pw *w, const char *s) {
    for (; s && *s; s++) mp_out_putc(&w->o, (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s);
}

static const char *prec_text(mp_precision p) {
    switch (p) {
    case MP_PREC_FP32: return "fp32 everywhere";
    case MP_PREC_BF16: return "pure bf16 (weights, gradients, states and activations in bf16)";
    case MP_PREC_FP16: return "pure fp16 (weights, gradients, states and activations in fp16)";
    case MP_PREC_BF16_MIXED:
        return "autocast bf16: matmul/conv/linear in bf16 (bf16 copies kept), norms, softmax, "
               "losses in fp32; fp32 master weights";
    case MP_PREC_FP16_MIXED:
        return "autocast fp16 + GradScaler: matmul/conv/linear in fp16, norms, softmax, losses "
               "in fp32; fp32 master weights";
    default: return "?";
    }
}

static const char *opt_text(mp_optimizer o) {
    switch (o) {
    case MP_OPT_ADAM:
    case MP_OPT_ADAMW: return "2 states per parameter (exp_avg, exp_avg_sq)";
    case MP_OPT_SGD_MOMENTUM: return "1 state per parameter (momentum)";
    case MP_OPT_SGD: return "no state";
    case MP_OPT_ADAFACTOR: return "factored second moment: a row and a column vector per matrix, no first moment";
    case MP_OPT_ADAMW8BIT:
    case MP_OPT_PAGED_ADAMW8BIT:
        return "bitsandbytes: 2 uint8 states and an fp32 absmax per 256 elements each, fp32 states under "
               "4,096 elements";
    case MP_OPT_LION: return "1 state per parameter (exp_avg)";
    default: return "no optimizer (gradients only)";
    }
}

static void moment_text(pw *w, const mp_tplan *pl);

static double per_param(uint64_t bytes, uint64_t params) {
    return params ? (double)bytes / (double)params : 0;
}

/* One memory row: the bytes on one GPU and those bytes over the parameters
 * its stage holds (after tp and pp, before ZeRO), then what they are. */
static void mem_row(pw *w, const char *l, uint64_t bytes, uint64_t params) {
    label(w, l);
    pf(w, "%s per GPU (%.3g B/param", mp_fmt_bytes(bytes).s, per_param(bytes, params));
}

static void mem_lines(pw *w, const mp_tplan *pl, const mp_tplan_mem *m, uint64_t params, int in_flight,
                      uint64_t cast) {
    const mp_tplan_options *o = &pl->o;
    bool mixed = o->precision >= MP_PREC_BF16_MIXED && o->precision <= MP_PREC_FP16_MIXED;
    bool amp = mixed && pl->zero == 0;
    mp_state_bytes sb;
    mp_tplan_state_bytes(o->precision, o->optimizer, &sb);
    if (amp) sb.weights = sb.grads = 4, sb.master = 0;
    char over[64], zlabel[64];
    snprintf(over, sizeof over, " over dp %d", pl->dp);
    snprintf(zlabel, sizeof zlabel, o->fsdp ? ", FSDP full shard" : ", ZeRO-%d partitioned", pl->zero);
    mem_row(w, "  weights:", m->weights_bytes, params);
    pf(w, ": %g B/param %s%s%s)\n", sb.weights,
       amp ? "in fp32, PyTorch AMP's parameters are the master copy" : mixed ? "in the low-precision working copy"
                                                                         : "in the training type",
       pl->zero >= 3 ? (o->fsdp ? ", FSDP full shard" : zlabel) : "", pl->zero >= 3 ? over : "");
    bool ft = pl->ft && !o->inference;
    if (ft && (o->base_dtype || o->lora_rank > 0 || o->offload == 2)) {
        label(w, "");
        pf(w, "(%s%s%s)\n", o->base_dtype ? "the blocks' frozen weights quantized (--base-dtype); " : "",
           o->lora_rank > 0 ? "the adapters in fp32; " : "",
           o->offload == 2 ? "the largest layer on the GPU, the rest on the host" : "the others as above");
    }
    mem_row(w, "  gradients:", m->grads_bytes, params);
    pf(w, ": %g B/param%s%s%s)\n", sb.grads, pl->zero >= 2 ? zlabel : "", pl->zero >= 2 ? over : "",
       ft ? "; of the trainable parameters only, adapters' in fp32" : "");
    mem_row(w, "  optimizer states:", m->optimizer_bytes, params);
    pf(w, ": %s, %s%s%s%s)\n", mp_optimizer_name(o->optimizer), opt_text(o->optimizer),
       pl->zero >= 1 ? zlabel : "", pl->zero >= 1 ? over : "",
       ft && o->offload ? "; offloaded: on the host" : ft ? "; of the trainable parameters only" : "");
    mem_row(w, "  master weights:", m->master_weights_bytes, params);
    if (amp) pf(w, ": none apart, the fp32 parameters are the master copy)\n");
    else if (mixed)
        pf(w, ": an fp32 copy, 4 B/param%s%s)\n", pl->zero >= 1 ? zlabel : "",
           pl->zero >= 1 ? over : "");
    else pf(w, ": none, the weights are updated in place)\n");
    mem_row(w, "  activations:", m->activations_bytes, params);
    pf(w, ": kept for the backward, from each operator's train rule");
    if (in_flight > 1) pf(w, "; x %d micro-batches in flight (1F1B)", in_flight);
    if (cast) pf(w, "; incl. autocast's weight copies %s", mp_fmt_bytes(cast).s);
    if (pl->loss_bytes && o->loss)
        pf(w, "; incl. the loss's %s%s", mp_fmt_bytes(pl->vocab_split ? pl->loss_bytes / (uint64_t)pl->tp
                                                                      : pl->loss_bytes).s,
           pl->vocab_split && pl->tp > 1 ? ", split with the vocabulary" : "");
    if (pl->dropout_bytes && !o->inference)
        pf(w, "; incl. %d dropout%s' masks%s %s (--dropout %g, one micro-batch%s)", pl->dropout_sites,
           pl->dropout_sites == 1 ? "" : "s",
           pl->o.attention_fused || mixed ? "" : " and eager probabilities' copies",
           mp_fmt_bytes(pl->dropout_bytes).s, o->dropout, o->checkpointing ? ", before checkpointing" : "");
    pf(w, ")\n");
    mem_row(w, "  temporary:", m->temporary_bytes, params);
    pf(w, ": the largest backward transient, an operator's or the loss's%s)\n",
       o->checkpointing ? " + the largest checkpointed block's recomputed set" : "");
    mem_row(w, "  peak:", m->peak_bytes, params);
    pf(w, ": what the allocator holds at its peak, torch.cuda.max_memory_allocated)\n");
    moment_text(w, pl);
    label(w, "");
    pf(w, "(B/param: bytes on one GPU over the %s parameters its stage holds after tp and pp)\n",
       mp_fmt_count(params).s);
}

/* ---- what the pattern layer recognised (analyze/patterns.h) ---- */

/* One transformer block described: its attention, norms, MLP and weight
 * products. */
static void block_text(char *buf, size_t cap, const mp_patterns *P, const mp_pblock *B) {
    size_t k = 0;
#define ADD(...) (k += k < cap ? (size_t)snprintf(buf + k, cap - k, __VA_ARGS__) : 0)
    if (B->attn >= 0) {
        const mp_pattn *a = &P->attn[B->attn];
        ADD("attention (%s form", mp_pat_form_name(a->form));
        if (a->heads > 0) ADD(", %lld heads", (long long)a->heads);
        if (a->kv_heads > 0 && a->kv_heads != a->heads) ADD(", %lld KV heads", (long long)a->kv_heads);
        if (a->head_dim > 0) ADD(", head dim %lld", (long long)a->head_dim);
        if (a->mask != MP_MASK_NONE && a->window > 0)
            ADD(", causal %s mask, a sliding window of %lld keys", mp_mask_kind_name(a->mask), (long long)a->window);
        else if (a->mask != MP_MASK_NONE) ADD(", %s%s mask", a->causal ? "causal " : "", mp_mask_kind_name(a->mask));
        else if (a->causal) ADD(", causal");
        if (a->guard) ADD(", NaN guard");
        if (a->softcap > 0) ADD(", logits softcapped at %g", a->softcap);
        else if (a->softcap != 0) ADD(", logits softcapped");
        if (a->rotary_q >= 0 || a->rotary_k >= 0) ADD(", rotary");
        ADD(")");
    } else {
        ADD("no attention");
    }
    int norms = 0;
    const char *nk = NULL, *nf = NULL;
    for (int r = 0; r < MP_NROLE_COUNT; r++)
        if (B->norm[r] >= 0) {
            bool seen = false;
            for (int q = 0; q < r; q++) seen |= B->norm[q] == B->norm[r];
            if (seen) continue;
            norms++;
            nk = mp_norm_kind_name(P->norms[B->norm[r]].kind);
            nf = mp_pat_form_name(P->norms[B->norm[r]].form);
        }
    if (norms) ADD("; %d x %s (%s)", norms, nk, nf);
    if (B->mlp >= 0) {
        const mp_pact *a = &P->acts[B->mlp];
        ADD("; MLP %s (%s)", mp_act_kind_name(a->kind), mp_pat_form_name(a->form));
    }
    ADD("; weights");
    int nw = 0;
    for (int r = 0; r < MP_WROLE_COUNT; r++)
        if (B->w[r].node >= 0) ADD(" %s", mp_wrole_name(r)), nw++;
    if (!nw) ADD(" none");
#undef ADD
}

static void recognised_text(pw *w, const mp_tplan *pl) {
    const mp_patterns *P = pl->pats;
    const mp_model *m = pl->p->m;
    if (!P) return;
    label(w, "recognised:");
    if (!P->n_blocks) {
        pf(w, "no transformer blocks (%d norms, %d activations, %d attentions)\n", P->n_norms, P->n_acts, P->n_attn);
    } else {
        char cur[512], nxt[512];
        int run = 0;
        for (int b = 0; b <= P->n_blocks; b++) {
            if (b < P->n_blocks) block_text(nxt, sizeof nxt, P, &P->blocks[b]);
            if (b > 0 && (b == P->n_blocks || strcmp(cur, nxt) != 0)) {
                if (run > 0) label(w, "");
                pf(w, "block%s %d", b - 1 > run ? "s" : "", run);
                if (b - 1 > run) pf(w, "-%d", b - 1);
                pf(w, ": ");
                safe(w, cur);
                pf(w, "\n");
                run = b;
            }
            if (b < P->n_blocks) memcpy(cur, nxt, sizeof cur);
        }
    }
    if (P->embed >= 0 || P->lm_head >= 0 || P->final_norm >= 0) {
        label(w, "");
        pf(w, "model: %s%s%s", P->embed >= 0 ? "token embedding" : "no token embedding",
           P->lm_head >= 0 ? (P->tied ? ", LM head tied to it" : ", LM head") : "",
           P->final_norm >= 0 ? ", final norm" : "");
        if (P->vocab > 0) pf(w, "; vocabulary %lld", (long long)P->vocab);
        pf(w, "\n");
    }
    if (pl->routed) {
        const mp_moe_summary *e = &pl->moe;
        label(w, "mixture of experts:");
        pf(w, "%d router%s, %lld experts, top %lld, %lld tokens each: planned with balanced routing (each expert "
              "%.4g rows; every total, FLOPs, kept activations, kernels, holds for any routing); a token meets %s "
              "of the %s parameters (%s in experts)\n",
           e->routers, e->routers == 1 ? "" : "s", (long long)e->experts, (long long)e->top_k, (long long)e->tokens,
           (double)e->tokens * (double)e->top_k / (double)e->experts, mp_fmt_si_d(pl->active_params, "").s,
           mp_fmt_si((uint64_t)pl->params, "").s, mp_fmt_si(pl->moe_expert_params, "").s);
    }
    if (P->n_attn) {
        label(w, "attention planned:");
        int eager = P->n_attn - pl->attn_fused - pl->attn_math, parts = 0;
        if (pl->attn_fused) {
            pf(w, "%d fused (scaled_dot_product_attention's flash or memory-efficient kernel: %s)", pl->attn_fused,
               pl->o.inference ? "no scores written" : "Q, K, V, the output and a log-sum-exp kept, no scores");
            if (pl->attn_causal)
                pf(w, ", %d of them causal with is_causal (the kernel runs the tiles on and below the diagonal: "
                      "%.0f%% of the scores' work)",
                   pl->attn_causal, 100.0 * pl->attn_causal_share);
            parts++;
        }
        if (pl->attn_math)
            pf(w, "%s%d as SDPA's math backend (fp32 with grouped KV heads: K and V repeated, the "
                  "probabilities %s)", parts++ ? "; " : "", pl->attn_math, pl->o.inference ? "written" : "kept");
        if (pl->attn_softcap)
            pf(w, "%s%d eager (logit softcapping, which SDPA does not take: as written; %s)",
               parts++ ? "; " : "", pl->attn_softcap,
               pl->o.inference ? "scores and probabilities written as the graph says" : "what their operators keep");
        eager -= pl->attn_softcap;
        if (eager > 0)
            pf(w, "%s%d eager (%s: %s)", parts++ ? "; " : "", eager,
               pl->o.attention_fused ? "not recognised" : "--attention eager",
               pl->o.inference ? "scores and probabilities written as the graph says" : "what their operators keep");
        pf(w, "\n");
    }
    label(w, "not recognised:");
    if (!P->n_miss) {
        pf(w, "none\n");
    } else {
        for (int i = 0; i < P->n_miss; i++) {
            const mp_pmiss *x = &P->miss[i];
            if (i) label(w, "");
            pf(w, "%s node '", mp_pat_kind_name(x->kind));
            safe(w, x->node >= 0 && x->node < m->graph->n_nodes ? m->graph->nodes[x->node].name : "?");
            pf(w, "' (%s): ", x->node >= 0 && x->node < m->graph->n_nodes ? m->graph->nodes[x->node].op : "?");
            safe(w, x->why);
            pf(w, "%s\n", x->kind == MP_PAT_ATTN ? "; planned as written (eager)" : "; planned as written");
        }
    }
}

/* ---- fine-tuning (plan/finetune.c; docs/PLANNING.md section 12) ---- */

static const char *const base_dtype_names[] = {"same", "nf4", "int8", "fp8"};
static const char *const offload_names[] = {"none", "optimizer", "params"};

static void ft_text(pw *w, const mp_tplan *pl) {
    const mp_tplan_options *o = &pl->o;
    const mp_model *m = pl->p->m;
    if (!o->inference) {
        /* whose autograd: PyTorch 2's unless asked; say so when the export
         * came from an older PyTorch (whose rules may be the ones wanted) */
        bool old = m->producer && m->producer_version && strcmp(m->producer, "pytorch") == 0 &&
                   m->producer_version[0] == '1' && m->producer_version[1] == '.';
        if (o->torch_version == 1 || old) {
            label(w, "autograd rules:");
            if (o->torch_version == 1)
                pf(w, "PyTorch 1.13's (--torch-version 1.13: a mean keeps its input, MeanBackward1)\n");
            else
                pf(w, "PyTorch 2's; the export was made by PyTorch %s, whose mean keeps its input (a decomposed "
                      "RMSNorm's squares): --torch-version 1.13 to plan that\n", m->producer_version);
        }
    }
    if (!pl->ft || o->inference) return;
    label(w, "trainable:");
    pf(w, "%s of %s parameters (%.3g%%)", mp_fmt_count(pl->trainable_params).s, mp_fmt_count(pl->params).s,
       pl->params ? 100.0 * (double)pl->trainable_params / (double)pl->params : 0.0);
    if (o->trainable[0]) pf(w, "; --freeze/--unfreeze applied in the order given, the last match decides");
    pf(w, "; frozen parameters have no gradient, optimizer state or master copy, and what only they would "
          "need (a frozen product's input) is not kept\n");
    if (o->lora_rank > 0) {
        label(w, "LoRA:");
        pf(w, "rank %d, alpha %g (scales the update, changes no memory), dropout %g%s; %d adapted products "
              "(targets %s), %s adapter parameters in fp32 (PEFT upcasts adapters: autocast_adapter_dtype); "
              "the base frozen\n",
           o->lora_rank, o->lora_alpha, o->lora_dropout,
           o->lora_dropout > 0 ? " (a mask and a dropped copy of each adapted input kept)" : "", pl->n_adapted,
           o->lora_targets ? o->lora_targets : "q,v, PEFT's default for Llama", mp_fmt_count(pl->lora_params).s);
        if (pl->adapted_qkv) {
            label(w, "");
            pf(w, "q, k or v asked on %d fused qkv products: the whole product adapted\n", pl->adapted_qkv);
        }
        label(w, "  adapted:");
        for (int i = 0; i < pl->n_adapted && i < 8; i++) {
            pf(w, "%s", i ? ", " : "");
            safe(w, pl->adapted_names[i] ? pl->adapted_names[i] : "?");
        }
        pf(w, "%s\n", pl->n_adapted > 8 ? ", ..." : "");
        label(w, "  adapters' work:");
        pf(w, "%s FLOPs forward, %s backward per micro-batch; frozen products compute no weight gradient\n",
           mp_fmt_si(pl->lora_fwd_flops, "").s, mp_fmt_si(pl->lora_bwd_flops, "").s);
    }
    if (o->base_dtype) {
        label(w, "quantized base:");
        pf(w, "%s of the blocks' frozen weights in %s: %s (%.4g bits a weight%s); dequantized to the compute "
              "type per product in the forward and again in the backward (a %s transient)\n",
           mp_fmt_count(pl->quant_params).s, base_dtype_names[o->base_dtype], mp_fmt_bytes(pl->quant_bytes).s,
           pl->quant_params ? 8.0 * (double)pl->quant_bytes / (double)pl->quant_params : 0.0,
           o->base_dtype == 1 ? (o->no_double_quant ? ", blocks of 64, an fp32 constant each"
                                                     : ", blocks of 64, double quantization")
                              : "",
           mp_fmt_bytes(pl->dequant_bytes).s);
    }
    if (o->optimizer == MP_OPT_PAGED_ADAMW8BIT) {
        label(w, "paged optimizer:");
        pf(w, "the same bytes as adamw8bit, in CUDA unified memory (tensors of 100,000 elements or more): "
              "they can page to the host under memory pressure; planned on the GPU\n");
    }
    if (o->offload) {
        label(w, "offload:");
        pf(w, "%s: %s per GPU on the host; %s over the host link per step (%s), %s with the CPU's optimizer "
              "step (%s parameters/s, DeepSpeedCPUAdam: ZeRO-Offload's table 3; --cpu-adam-gps)\n",
           o->offload == 2 ? "optimizer states, master weights and parameters (ZeRO-3 offload_param / FSDP "
                             "CPUOffload)"
                           : "optimizer states and master weights (ZeRO-Offload)",
           mp_fmt_bytes(pl->host_bytes).s, mp_fmt_bytes((uint64_t)pl->link_bytes).s, pl->host_link_source,
           mp_fmt_seconds(pl->link_s + pl->cpu_opt_s).s, mp_fmt_si_d(pl->cpu_adam, "").s);
    }
}

static uint64_t host_ops_total(const mp_tplan *pl) {
    uint64_t n = 0;
    for (int s = 0; s < pl->pp; s++) n += pl->stages[s].host_ops;
    return n * (uint64_t)pl->m + (pl->o.inference ? 0 : pl->opt_host_ops);
}
static uint64_t kernels_total(const mp_tplan *pl) {
    uint64_t n = 0;
    for (int s = 0; s < pl->pp; s++) n += pl->stages[s].kernels;
    return n * (uint64_t)pl->m + (pl->o.inference ? 0 : pl->opt_launches);
}

/* The loss form (loss.c) and what it holds. */
static void loss_text(pw *w, const mp_tplan *pl) {
    const mp_tplan_loss *L = &pl->loss;
    label(w, "loss:");
    if (L->form == MP_LOSS_NONE) {
        pf(w, "none (%s)\n", L->asked == MP_LOSS_NONE ? "--loss none / --no-loss" : L->why ? L->why : "no logits");
        return;
    }
    const char *cdt = mp_dtype_name(L->ce_dt), *ldt = mp_dtype_name(L->logits_dt);
    if (L->form == MP_LOSS_CAUSAL_LM)
        pf(w, "causal-lm: transformers' ForCausalLMLoss on output 0: logits.float() (%s), labels shifted by "
              "padding, F.cross_entropy in fp32",
           L->upcast ? "an fp32 copy of the logits" : "the logits are fp32 already: no copy");
    else
        pf(w, "cross-entropy: F.cross_entropy on output 0 in %s%s", cdt,
           L->upcast ? " (autocast runs log_softmax in fp32: a cast copy first)" : "");
    pf(w, "; %s (--loss %s)\n", L->asked == MP_LOSS_AUTO ? (L->why ? L->why : "auto") : "as given",
       mp_tplan_loss_name(L->asked));
    label(w, "");
    pf(w, "%s rows x %s classes; keeps the %s log-probabilities (%s); its backward holds %s more "
          "(two gradients of the logits' size)\n",
       mp_fmt_count(L->rows).s, mp_fmt_count(L->classes).s, cdt, mp_fmt_bytes(L->kept).s,
       mp_fmt_bytes(L->bwd_transient).s);
    if (L->softcap_in >= 0) {
        label(w, "");
        pf(w, "logit softcapping before it: tanh(x / c) * c on the %s logits (the tanh keeps its output; "
              "three passes over rows x classes, planned as the graph's nodes)\n",
           ldt);
    }
}

/* The peak's moment (peak.c): what is live then, by category. */
static void moment_text(pw *w, const mp_tplan *pl) {
    if (pl->o.inference) {
        label(w, "  peak's moment:");
        pf(w, "the forward's highest point: weights %s + inputs %s + live activations %s", mp_fmt_bytes(pl->mem.weights_bytes).s,
           mp_fmt_bytes(pl->infer_inputs).s, mp_fmt_bytes(pl->infer_acts).s);
        if (pl->infer_cache)
            pf(w, " + autocast cache %s (the weights it cast so far, in %s, held until its region ends)",
               mp_fmt_bytes(pl->infer_cache).s, pl->o.precision == MP_PREC_FP16_MIXED ? "fp16" : "bf16");
        pf(w, " + cuBLAS workspace %s\n", mp_fmt_bytes(pl->workspace_bytes).s);
        return;
    }
    const mp_tplan_moment *a = &pl->stages[pl->worst].at;
    label(w, "  peak's moment:");
    pf(w, "%s", mp_tplan_moment_name(a->when));
    if (a->when == MP_MOMENT_BACKWARD && a->node >= 0 && a->node < pl->n_nodes) {
        const mp_node *n = &pl->p->m->graph->nodes[pl->p->m->graph->order[a->node]];
        pf(w, " of '");
        safe(w, n->name);
        pf(w, "' (%s)", n->op);
    }
    pf(w, ": what is live then, not a sum of maxima\n");
    /* the gradients' row says why they are (or are not) there at this moment */
    bool born = mp_tplan_grads_born(&pl->o, pl->dp, pl->m, pl->zero);
    const char *gwhy = "";
    if (born && a->when == MP_MOMENT_FORWARD)
        gwhy = pl->o.zero_grad == MP_ZEROGRAD_AFTER_FORWARD
                   ? " (the last step's: zero_grad frees them after the forward, --zero-grad after-forward)"
                   : " (freed before the forward: --zero-grad before-forward)";
    else if (born && a->when != MP_MOMENT_OPTIMIZER)
        gwhy = " (born during the backward: set_to_none)";
    else if (!born && a->when != MP_MOMENT_OPTIMIZER)
        gwhy = pl->o.zero_grad == MP_ZEROGRAD_IN_PLACE ? " (resident: zeroed in place, --zero-grad in-place)"
                                                        : " (resident: accumulation, data parallelism or ZeRO)";
    struct { const char *l; uint64_t b; const char *what; } rows[] = {
        {"    weights:", a->weights, ""},
        {"    master weights:", a->master, ""},
        {"    optimizer states:", a->optimizer, " (from the second step)"},
        {"    gradients:", a->grads, gwhy},
        {"    activations kept:", a->activations, " (not yet freed by the backward)"},
        {"    gathered:", a->gathered, " (ZeRO-3/FSDP: the root's and the running and prefetched blocks' "
                                        "parameters unsharded, and their gradients before the reduce-scatter)"},
        {"    DDP buckets:", a->buckets, " (a second copy of every gradient: gradient_as_bucket_view=False, "
                                      "PyTorch's default; --ddp-bucket-view)"},
        {"    loss:", a->loss, " (log-probabilities, logits' copies, gradients)"},
        {"    recomputed block:", a->recomputed, " (checkpointing brings it back)"},
        {"    autocast cache:", a->cast_cache, pl->o.precision == MP_PREC_FP16_MIXED
                                                 ? " (the checkpointed blocks' weights in fp16, cached by autocast "
                                                   "until its region ends)"
                                                 : " (the checkpointed blocks' weights in bf16, cached by autocast "
                                                   "until its region ends)"},
        {"    transient:", a->transient, a->when == MP_MOMENT_OPTIMIZER ? " (Adam's sqrt(exp_avg_sq) temporaries)"
                                                                       : " (the running operator's)"},
        {"    cuBLAS workspaces:", a->workspace, pl->gpu ? " (2: the forward's and autograd's threads)"
                                                         : " (no GPU named: not counted)"},
        {"    allocator rounding:", a->rounding, " (512-byte blocks of the states)"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (!rows[i].b && i != 3 && i != 4) continue;
        label(w, rows[i].l);
        pf(w, "%s%s\n", mp_fmt_bytes(rows[i].b).s, rows[i].what);
    }
    if (a->when == MP_MOMENT_FORWARD && a->grads && a->if_freed_first && a->if_freed_first < a->total) {
        label(w, "    if freed first:");
        pf(w, "peak %s had the loop freed the gradients before the forward (optimizer.zero_grad() right after "
              "optimizer.step(), or at the start of the step: --zero-grad before-forward)\n",
           mp_fmt_bytes(a->if_freed_first).s);
    }
}

static void write_text(const mp_tplan *pl, pw *w) {
    const mp_tplan_options *o = &pl->o;
    const mp_model *m = pl->p->m;
    rule(w, o->inference ? "modelprof inference plan" : "modelprof training plan");
    label(w, "model:");
    safe(w, m->path);
    pf(w, "\n");
    label(w, "params:");
    pf(w, "%s\n", mp_fmt_count(pl->params).s);
    label(w, "layout:");
    pf(w, "dp %d x tp %d x pp %d = %d GPU%s; ZeRO stage %d%s; %d micro-batch%s per step (the graph's batch "
          "is one micro-batch)\n",
       pl->dp, pl->tp, pl->pp, pl->dp * pl->tp * pl->pp, pl->dp * pl->tp * pl->pp > 1 ? "s" : "", pl->zero,
       o->fsdp ? " (FSDP full shard)" : "", pl->m, pl->m > 1 ? "es" : "");
    if (pl->batch_scaled) {
        label(w, "batch:");
        pf(w, "%lld samples per micro-batch: the export's batch %lld is fixed in its shapes, so the graph was "
              "planned at %lld and every per-sample figure (activations, their traffic and FLOPs, inputs, "
              "tokens) scaled by %lld/%lld\n",
           (long long)pl->batch, (long long)pl->export_batch, (long long)pl->export_batch, (long long)pl->batch,
           (long long)pl->export_batch);
    }
    label(w, "precision:");
    pf(w, "%s: %s%s\n", mp_precision_name(o->precision), prec_text(o->precision),
       pl->precision_auto ? " (the export's type, the default; --precision to change)" : "");
    if (!o->inference) {
        label(w, "optimizer:");
        pf(w, "%s\n", mp_optimizer_name(o->optimizer));
        ft_text(w, pl);
        loss_text(w, pl);
    }
    label(w, "repeated blocks:");
    if (pl->n_repeats) {
        pf(w, "%d (", pl->n_repeats);
        safe(w, m->modules[pl->repeats[0]].path);
        if (pl->n_repeats > 1) {
            pf(w, " ... ");
            safe(w, m->modules[pl->repeats[pl->n_repeats - 1]].path);
        }
        pf(w, ")%s\n", o->checkpointing ? ": checkpoint boundaries, each recomputed in the backward" : "");
    } else {
        pf(w, "none found\n");
    }
    recognised_text(w, pl);
    if (pl->tp > 1) {
        label(w, "tensor parallel:");
        pf(w, "%d nodes split (Megatron column/row splits of the weight products in the blocks and "
              "what lies between them), %d block nodes replicated; embeddings and head replicated",
           pl->split_nodes, pl->replicated_nodes);
        if (pl->heads) pf(w, "; %d heads", pl->heads);
        pf(w, "\n");
        if (o->sequence_parallel) {
            label(w, "  sequence parallel:");
            pf(w, "what tp replicates inside the blocks (norms, residuals, dropouts, a column-split product's "
                  "input) is split along the sequence: all-gather + reduce-scatter in place of each all-reduce, "
                  "the same bytes (Korthikanti et al. 2022)\n");
        }
        for (int pass = 0; pass < 2; pass++) {
            label(w, pass ? "  replicated:" : "  split:");
            int shown = 0;
            for (int i = 0; i < pl->n_tp_ops; i++) {
                int c = pass ? pl->tp_rep[i] : pl->tp_split[i];
                if (!c) continue;
                pf(w, "%s%d x ", shown++ ? ", " : "", c);
                safe(w, pl->tp_ops[i]);
            }
            pf(w, "%s\n", shown ? "" : "none");
        }
    }
    label(w, "GPU:");
    if (pl->gpu) {
        pf(w, "%s: %s FLOPS %s", pl->gpu->label, mp_fmt_si_d(pl->peak_low_flops, "").s, pl->peak_dtype);
        if (o->precision >= MP_PREC_BF16_MIXED)
            pf(w, ", %s FLOPS fp32 (the ops autocast leaves in fp32)", mp_fmt_si_d(pl->peak_flops, "").s);
        pf(w, " (dense); %s; %s/s (source: %s)\n", mp_fmt_bytes((uint64_t)pl->mem_bytes).s,
           mp_fmt_bytes((uint64_t)pl->bw).s, pl->gpu->source);
    } else if (pl->have_gpu || pl->mem_bytes > 0) {
        pf(w, "given: peak %s FLOPS, memory %s, bandwidth %s/s\n", mp_fmt_si_d(pl->peak_low_flops, "").s,
           mp_fmt_bytes((uint64_t)pl->mem_bytes).s, mp_fmt_bytes((uint64_t)pl->bw).s);
    } else {
        pf(w, "none (give --gpu NAME, --gpu list, or --peak-tflops, --mem-gb, --bandwidth-gbs): no step time\n");
    }

    mp_out_putc(&w->o, '\n');
    rule(w, pl->pp > 1 ? "memory per GPU (the fullest pipeline stage)" : "memory per GPU");
    if (o->inference) {
        label(w, "  weights:");
        pf(w, "%s\n", mp_fmt_bytes(pl->mem.weights_bytes).s);
        label(w, "  activation peak:");
        pf(w, "%s (the forward's live tensors at its highest point: freed after their last reader or when the "
              "module they entered returns, views shared, in the plan's dtype)\n",
           mp_fmt_bytes(pl->mem.activations_bytes).s);
        label(w, "  inputs:");
        pf(w, "%s\n", mp_fmt_bytes(pl->infer_inputs).s);
        if (o->kv_cache) {
            label(w, "  KV cache:");
            if (pl->kv_tokens)
                pf(w, "%s (the %s batch x sequence tokens%s%s; split by tp)\n",
                   mp_fmt_bytes(pl->kv_bytes / (uint64_t)pl->tp).s, pl->kv_encdec ? "decoder's" : "graph's",
                   pl->kv_windowed ? ", a sliding window's in its attentions" : "",
                   pl->kv_encdec ? ", and the encoder's in the cross-attentions" : "");
            else
                pf(w, "? (no token ids and no batch x sequence the attention shows)\n");
        }
        label(w, "  peak:");
        pf(w, "%s\n", mp_fmt_bytes(pl->mem.peak_bytes).s);
        moment_text(w, pl);
    } else {
        const mp_pstage *ws = &pl->stages[pl->worst];
        mem_lines(w, pl, &pl->mem, ws->params, ws->in_flight, ws->cast_bytes);
    }
    label(w, "  framework reserve:");
    pf(w, "%s (assumption: CUDA context and allocator slack; --reserve-gb)\n", mp_fmt_bytes(pl->mem.reserve_bytes).s);
    label(w, "  needed:");
    uint64_t need = pl->mem.peak_bytes + pl->mem.reserve_bytes;
    if (pl->mem_bytes > 0)
        pf(w, "%s of %s: %s\n", mp_fmt_bytes(need).s, mp_fmt_bytes((uint64_t)pl->mem_bytes).s,
           (double)need <= pl->mem_bytes ? "fits" : "does NOT fit");
    else
        pf(w, "%s\n", mp_fmt_bytes(need).s);
    if (!o->inference && pl->mem_bytes > 0) {
        label(w, "  GPUs needed:");
        if (pl->need.dp)
            pf(w, "%d (dp %d x tp %d x pp %d, ZeRO %d: %s; the fewest, in powers of two, with a layout "
                  "that fits)\n",
               pl->need.dp * pl->need.tp * pl->need.pp, pl->need.dp, pl->need.tp, pl->need.pp, pl->need.zero,
               mp_fmt_bytes(pl->need.peak_bytes).s);
        else
            pf(w, "none up to 65,536 (the activations of one micro-batch do not fit: a smaller batch or "
                  "--checkpointing)\n");
    }
    if (!o->inference) {
        label(w, "  DeepSpeed estimate:");
        pf(w, "model states %s under ZeRO-2, %s under ZeRO-3 (estimate_zero2/3_model_states_mem_needs, "
              "no offload, %d GPU%s)\n",
           mp_fmt_bytes(pl->ds_zero2).s, mp_fmt_bytes(pl->ds_zero3).s, pl->dp, pl->dp > 1 ? "s" : "");
    }
    if (pl->pp > 1) {
        pf(w, "\n  %-6s %-9s %-10s %-10s %-10s %-10s %-9s %s\n", "stage", "blocks", "params", "states",
           "activations", "temporary", "in-flight", "peak");
        for (int s = 0; s < pl->pp; s++) {
            const mp_pstage *ps = &pl->stages[s];
            const mp_tplan_mem *mm = &ps->mem;
            uint64_t states = mm->weights_bytes + mm->grads_bytes + mm->optimizer_bytes + mm->master_weights_bytes;
            char blk[32];
            snprintf(blk, sizeof blk, "%d-%d", ps->first_repeat, ps->first_repeat + ps->n_repeats - 1);
            pf(w, "  %-6d %-9s %-10s %-10s %-10s %-10s %-9d %s\n", s, blk, mp_fmt_count(ps->params).s,
               mp_fmt_bytes(states).s, mp_fmt_bytes(mm->activations_bytes).s, mp_fmt_bytes(mm->temporary_bytes).s,
               ps->in_flight, mp_fmt_bytes(mm->peak_bytes).s);
        }
    }

    mp_out_putc(&w->o, '\n');
    rule(w, o->inference ? "forward time" : "step time");
    if (!pl->have_gpu) {
        pf(w, "unknown: no GPU given\n");
    } else {
        double f = 0, b = 0, r = 0;
        for (int s = 0; s < pl->pp; s++) {
            f += pl->stages[s].fwd_s;
            b += pl->stages[s].bwd_s;
            r += pl->stages[s].recompute_s;
        }
        label(w, "  forward:");
        pf(w, "%s per micro-batch, all stages (%s per step)\n", mp_fmt_seconds(f).s, mp_fmt_flops(pl->fwd_flops).s);
        if (!o->inference) {
            label(w, "  backward:");
            pf(w, "%s (%s per step: each operator's own backward rule)\n", mp_fmt_seconds(b).s,
               mp_fmt_flops(pl->bwd_flops).s);
            label(w, "  recompute:");
            pf(w, "%s (%s per step)\n", mp_fmt_seconds(r).s, mp_fmt_flops(pl->recompute_flops).s);
            label(w, "  compute:");
            pf(w, "%s (%d micro-batch%s x the slowest stage)\n", mp_fmt_seconds(pl->compute_s).s, pl->m,
               pl->m > 1 ? "es" : "");
            label(w, "  pipeline bubble:");
            pf(w, "%s ((pp - 1) x the slowest stage's micro-batch, 1F1B)\n", mp_fmt_seconds(pl->bubble_s).s);
            label(w, "  tensor-parallel comm:");
            pf(w, "%s per micro-batch (%s inside the blocks, in the compute above)\n",
               mp_fmt_seconds(pl->tp_comm_s).s,
               pl->tp > 1 && o->sequence_parallel ? "all-gathers and reduce-scatters (sequence parallel)"
                                                  : "all-reduces");
            label(w, "  pipeline p2p:");
            pf(w, "%s per micro-batch (in the compute above)\n", mp_fmt_seconds(pl->p2p_s).s);
            label(w, "  data-parallel comm:");
            pf(w, "%s (%s %s per step, not overlapped)\n", mp_fmt_seconds(pl->dp_comm_s).s,
               mp_fmt_bytes(pl->dp_comm_bytes).s,
               pl->zero >= 3 ? "reduce-scatter of gradients + 2 all-gathers of weights"
               : pl->zero >= 1 ? "reduce-scatter of gradients + all-gather of weights"
                               : "all-reduce of gradients");
            label(w, "  optimizer step:");
            pf(w, "%s (memory-bound: reads and writes the states of this rank; or the host issuing its %s "
                  "kernels, %s, if longer)\n",
               mp_fmt_seconds(pl->optimizer_s).s, mp_fmt_count(pl->opt_launches).s,
               o->optimizer_impl == MP_OPTIMPL_FUSED ? "fused" : o->optimizer_impl == MP_OPTIMPL_FOR_LOOP
                                                                    ? "a loop over the parameters"
                                                                    : "foreach");
            if (pl->grad_passes) {
                label(w, pl->loss_scaler ? "  loss scaling:" : "  gradient clipping:");
                pf(w, "%d passes over the gradients before the step (in its time above): %s\n", pl->grad_passes,
                   pl->loss_scaler == MP_SCALER_DEEPSPEED
                       ? "DeepSpeed's loss scaler (the norm for overflow and the clip, then the combined unscale)"
                   : pl->loss_scaler == MP_SCALER_TORCH && o->clip_grad_norm > 0
                       ? "GradScaler's unscale (fp16-mixed), then clip_grad_norm_'s norm and scaling"
                   : pl->loss_scaler == MP_SCALER_TORCH ? "GradScaler's unscale (fp16-mixed)"
                                                        : "clip_grad_norm_'s norm and scaling");
            }
        }
        label(w, o->inference ? "  host issue:" : "  host issue:");
        pf(w, "%s (%s operators dispatched x %s, --host-us-per-op%s)\n", mp_fmt_seconds(pl->host_s).s,
           mp_fmt_count(host_ops_total(pl)).s, mp_fmt_seconds(o->host_op_s).s,
           o->inference ? "" : "; the optimizer's included");
        label(w, "  device busy:");
        pf(w, "%s (%s kernels%s)\n", mp_fmt_seconds(pl->device_s).s, mp_fmt_count(kernels_total(pl)).s,
           o->inference ? "" : ", the optimizer's included");
        label(w, "  bound:");
        pf(w, "%s\n", pl->host_bound ? "host: the GPU waits for PyTorch to issue kernels (many small ones); the step "
                                      "is the host's time"
                                    : "device: the kernels take longer than issuing them");
        label(w, "  step:");
        pf(w, "%s\n", mp_fmt_seconds(pl->step_s).s);
        label(w, "  MFU implied:");
        pf(w, "%s (model FLOPs / (step x GPUs x %s peak))\n", mp_fmt_pct_d(pl->mfu_implied, 1).s, pl->peak_dtype);
        label(w, "  assumptions:");
        pf(w, "a node reaches %s of the dtype peak (--compute-eff) and %s of the bandwidth "
              "(--memory-eff), max of the two (roofline), + %s per node and pass (--node-overhead-us); "
              "links %s/s inside a node of 8, %s/s across (--link-gbs); fp32 %s as TF32 (--tf32%s)\n",
           mp_fmt_pct_d(o->compute_eff, 1).s, mp_fmt_pct_d(o->memory_eff, 1).s, mp_fmt_seconds(o->node_overhead_s).s,
           mp_fmt_bytes((uint64_t)mp_tplan_link_bw(pl, 8)).s, mp_fmt_bytes((uint64_t)mp_tplan_link_bw(pl, 16)).s,
           o->tf32 == MP_TF32_ALL ? "convolutions and matmuls" : o->tf32 == MP_TF32_NONE ? "nothing" : "convolutions",
           o->tf32 == MP_TF32_CONV ? " conv: PyTorch's defaults" : "");
        if (pl->native_dw > 0 && pl->simt_ips > 0)
            pf(w, "%-24s%d depthwise convolution%s in PyTorch's own kernels (fp32 and bf16 in its default layout): "
                  "timed by the instructions they issue, one per CUDA core and clock (the fp32 rate / 2) x %s "
                  "(--compute-eff), not by FLOPs or bytes\n",
               "", pl->native_dw, pl->native_dw == 1 ? "" : "s", mp_fmt_pct_d(o->compute_eff, 1).s);
    }

    if (!o->inference) {
        mp_out_putc(&w->o, '\n');
        rule(w, "time to train");
        label(w, "  per step:");
        if (pl->has_tokens)
            pf(w, "%s token%s, ", mp_fmt_count((uint64_t)pl->tokens_per_step).s, pl->tokens_per_step == 1 ? "" : "s");
        pf(w, "%s sample%s\n", mp_fmt_count((uint64_t)pl->samples_per_step).s, pl->samples_per_step == 1 ? "" : "s");
        label(w, "  graph-based:");
        if (pl->train_s >= 0)
            pf(w, "%.3g days on %d GPU%s (steps x step time)\n", pl->train_s / 86400, pl->gpus,
               pl->gpus > 1 ? "s" : "");
        else
            pf(w, "? (give --tokens or --samples, and a GPU)\n");
        label(w, "  cross-check:");
        if (pl->train_6nd_s >= 0)
            pf(w, "%.3g days: %s at %s MFU (--mfu, an assumption) on %d GPU%s\n", pl->train_6nd_s / 86400,
               o->checkpointing ? "8 N D (recomputation)" : "6 N D", mp_fmt_pct_d(o->mfu, 1).s, pl->gpus,
               pl->gpus > 1 ? "s" : "");
        else
            pf(w, "? (give --tokens or --samples, and a GPU)\n");
        if (pl->flops_6nd > 0) {
            label(w, "  FLOPs per step:");
            bool frozen = pl->ft && pl->trainable_params < pl->params;
            pf(w, "graph %s vs %s %s\n", mp_fmt_flops(pl->fwd_flops + pl->bwd_flops + pl->recompute_flops).s,
               frozen ? (o->checkpointing ? "(6N + 2T)D (T trainable)" : "(4N + 2T)D (T trainable)")
                      : o->checkpointing ? "8ND" : "6ND",
               mp_fmt_flops((uint64_t)pl->flops_6nd).s);
        }
    } else if (o->kv_cache) {
        mp_out_putc(&w->o, '\n');
        rule(w, "KV cache");
        label(w, "  per token:");
        pf(w, "%s%s\n", mp_fmt_bytes(pl->kv_bytes_per_token).s,
           pl->kv_encdec ? " (the decoder's causal self-attentions; the encoder's attentions keep none)" : "");
        if (pl->kv_encdec) {
            label(w, "  cross-attention:");
            pf(w, "%s (K and V of the encoder's %s tokens, computed once per sequence)\n",
               mp_fmt_bytes(pl->kv_cross_bytes).s, mp_fmt_count(pl->kv_cross_tokens).s);
        }
        label(w, "  at this context:");
        if (pl->kv_tokens)
            pf(w, "%s (%s tokens: the %s batch x sequence%s%s)\n", mp_fmt_bytes(pl->kv_bytes).s,
               mp_fmt_count(pl->kv_tokens).s, pl->kv_encdec ? "decoder's" : "graph's",
               pl->kv_windowed ? "; an attention with a sliding window keeps its window's tokens" : "",
               pl->kv_encdec ? "; with the cross-attentions'" : "");
        else
            pf(w, "? (no token ids and no batch x sequence the attention shows)\n");
        label(w, "  prefill:");
        pf(w, "%s, %s read (weights and activations)\n", mp_fmt_flops(pl->fwd_flops).s,
           mp_fmt_bytes(pl->mem.weights_bytes + pl->mem.activations_bytes).s);
        label(w, "  decode per token:");
        pf(w, "%s, %s read (weights + the KV cache at this context%s)\n",
           pl->kv_tokens ? mp_fmt_flops(mp_tplan_decode_flops(pl)).s : "? FLOPs",
           mp_fmt_bytes(pl->mem.weights_bytes + pl->kv_bytes).s,
           pl->kv_encdec ? "; the decoder's forward, the encoder's run once" : "");
    }
    if (pl->n_default_ops) {
        label(w, "default train rule:");
        for (int i = 0; i < pl->n_default_ops; i++) {
            pf(w, "%s%d x ", i ? ", " : "", pl->default_counts[i]);
            safe(w, pl->default_ops[i]);
        }
        pf(w, " (no rule of their own: all inputs kept, bwd = 2 x fwd)\n");
    }
    if (pl->n_fit) {
        mp_out_putc(&w->o, '\n');
        bool cap = pl->mem_bytes > 0;
        rule(w, pl->have_gpu ? "layouts that fit (--fit), best first"
                : cap ? "layouts that fit (--fit), by memory: no GPU rates given, no step time"
                      : "layouts (--fit), by memory: no GPU given, no step time and no memory to fit");
        if (pl->have_gpu)
            pf(w, "  %-5s %-4s %-4s %-5s %-12s %-10s %s\n", "dp", "tp", "pp", "zero", "needed", "step",
               pl->has_tokens ? "tokens/s" : "samples/s");
        else
            pf(w, "  %-5s %-4s %-4s %-5s %s\n", "dp", "tp", "pp", "zero", "needed per GPU");
        int shown = 0, fits = 0;
        for (int i = 0; i < pl->n_fit; i++) fits += pl->fit[i].fits;
        for (int i = 0; i < pl->n_fit && shown < 10; i++) {
            const mp_fit_row *r = &pl->fit[i];
            if (cap && !r->fits && fits) break;
            if (pl->have_gpu)
                pf(w, "  %-5d %-4d %-4d %-5d %-12s %-10s %s%s\n", r->dp, r->tp, r->pp, r->zero,
                   mp_fmt_bytes(r->peak_bytes).s, mp_fmt_seconds(r->step_s).s, mp_fmt_si_d(r->tokens_per_s, "").s,
                   r->fits ? "" : "  (does not fit)");
            else
                pf(w, "  %-5d %-4d %-4d %-5d %s%s\n", r->dp, r->tp, r->pp, r->zero, mp_fmt_bytes(r->peak_bytes).s,
                   !cap || r->fits ? "" : "  (does not fit)");
            shown++;
        }
        if (pl->answer) {
            /* the plan's own layout: the largest micro-batch, with and without checkpointing */
            pf(w, "  this layout at %s per micro-batch: %s, %s", mp_fmt_count(pl->samples_per_mb).s,
               mp_fmt_bytes(pl->need_bytes).s, pl->max_mb >= (int64_t)pl->samples_per_mb ? "fits" : "does NOT fit");
            if (pl->max_mb >= 0) pf(w, "; up to %lld per micro-batch fit%s", (long long)pl->max_mb,
                                    o->checkpointing ? " (checkpointing)" : "");
            pf(w, "\n");
            if (!o->checkpointing && pl->max_mb_ckpt >= 0)
                pf(w, "  with --checkpointing: %s at %s, %s; up to %lld per micro-batch fit (step %s)\n",
                   mp_fmt_bytes(pl->need_ckpt_bytes).s, mp_fmt_count(pl->samples_per_mb).s,
                   pl->max_mb_ckpt >= (int64_t)pl->samples_per_mb ? "fits" : "does NOT fit", (long long)pl->max_mb_ckpt,
                   pl->step_ckpt_s >= 0 ? mp_fmt_seconds(pl->step_ckpt_s).s : "?");
            pf(w, "  (micro-batches other than the graph's: activations, the loss and transients scaled linearly)\n");
        }
        if (cap) pf(w, "  %d of %d layouts fit", fits, pl->n_fit);
        else pf(w, "  %d layouts (give --gpu or --mem-gb to see which fit)", pl->n_fit);
        if (shown < pl->n_fit)
            pf(w, "; %d shown, the best first: --format json lists all %d (plan.fit)", shown, pl->n_fit);
        pf(w, "\n");
    }
    rule(w, NULL);
}

/* ---- JSON (the one writer, report/jw.h) ---- */

static void ft_json(jw *w, const mp_tplan *pl) {
    const mp_tplan_options *o = &pl->o;
    jw_open(w, '{');
    jw_key(w, "trainable_params"); jw_u64(w, pl->ft ? pl->trainable_params : pl->params);
    jw_key(w, "frozen_params"); jw_u64(w, pl->ft ? pl->params - pl->trainable_params : 0);
    jw_key(w, "lora");
    if (o->lora_rank > 0) {
        jw_open(w, '{');
        jw_key(w, "rank"); jw_i64(w, o->lora_rank);
        jw_key(w, "alpha"); jw_double(w, o->lora_alpha);
        jw_key(w, "dropout"); jw_double(w, o->lora_dropout);
        jw_key(w, "targets"); jw_str(w, o->lora_targets ? o->lora_targets : "q,v");
        jw_key(w, "adapter_params"); jw_u64(w, pl->lora_params);
        jw_key(w, "adapter_dtype"); jw_str(w, "fp32");
        jw_key(w, "fused_qkv_adapted"); jw_i64(w, pl->adapted_qkv);
        jw_key(w, "fwd_flops"); jw_u64(w, pl->lora_fwd_flops);
        jw_key(w, "bwd_flops"); jw_u64(w, pl->lora_bwd_flops);
        jw_key(w, "adapted");
        jw_open(w, '[');
        for (int i = 0; i < pl->n_adapted; i++) jw_opt_str(w, pl->adapted_names[i]);
        jw_close(w, ']');
        jw_close(w, '}');
    } else {
        jw_null(w);
    }
    jw_key(w, "base_dtype"); jw_str(w, base_dtype_names[o->base_dtype >= 0 && o->base_dtype < 4 ? o->base_dtype : 0]);
    jw_key(w, "double_quant"); jw_bool(w, o->base_dtype == 1 && !o->no_double_quant);
    jw_key(w, "quantized_params"); jw_u64(w, pl->quant_params);
    jw_key(w, "quantized_bytes"); jw_u64(w, pl->quant_bytes);
    jw_key(w, "dequantize_transient_bytes"); jw_u64(w, pl->dequant_bytes);
    jw_key(w, "offload"); jw_str(w, offload_names[o->offload >= 0 && o->offload < 3 ? o->offload : 0]);
    jw_key(w, "host_bytes"); jw_u64(w, pl->host_bytes);
    jw_key(w, "host_link_bytes_per_step"); jw_double(w, pl->link_bytes);
    jw_key(w, "host_link_bytes_per_s"); jw_double(w, pl->host_link);
    jw_key(w, "host_link_source"); jw_opt_str(w, pl->host_link_source);
    jw_key(w, "host_link_s"); jw_double(w, pl->link_s);
    jw_key(w, "cpu_optimizer_s"); jw_double(w, pl->cpu_opt_s);
    jw_key(w, "torch_version"); jw_str(w, o->torch_version == 1 ? "1.13" : "2");
    jw_key(w, "fit_answer");
    if (pl->answer) {
        jw_open(w, '{');
        jw_key(w, "required_bytes"); jw_u64(w, pl->need_bytes);
        jw_key(w, "max_micro_batch"); jw_i64(w, pl->max_mb);
        jw_key(w, "checkpointing_required_bytes"); jw_u64(w, pl->need_ckpt_bytes);
        jw_key(w, "max_micro_batch_checkpointing"); jw_i64(w, pl->max_mb_ckpt);
        jw_close(w, '}');
    } else {
        jw_null(w);
    }
    jw_close(w, '}');
}

static void jmem(jw *w, const mp_tplan_mem *m, uint64_t params, uint64_t trainable, double cap) {
    jw_open(w, '{');
    jw_key(w, "params"); jw_u64(w, params);
    jw_key(w, "trainable_params"); jw_u64(w, trainable);
    jw_key(w, "weights_bytes"); jw_u64(w, m->weights_bytes);
    jw_key(w, "grads_bytes"); jw_u64(w, m->grads_bytes);
    jw_key(w, "optimizer_bytes"); jw_u64(w, m->optimizer_bytes);
    jw_key(w, "master_weights_bytes"); jw_u64(w, m->master_weights_bytes);
    jw_key(w, "activations_bytes"); jw_u64(w, m->activations_bytes);
    jw_key(w, "temporary_bytes"); jw_u64(w, m->temporary_bytes);
    jw_key(w, "peak_bytes"); jw_u64(w, m->peak_bytes);
    jw_key(w, "reserve_bytes"); jw_u64(w, m->reserve_bytes);
    jw_key(w, "required_bytes"); jw_u64(w, m->peak_bytes + m->reserve_bytes);
    jw_key(w, "fits");
    if (cap > 0) jw_bool(w, (double)(m->peak_bytes + m->reserve_bytes) <= cap);
    else jw_null(w);
    jw_close(w, '}');
}

static void jnum_or_null(jw *w, double v) {
    if (v >= 0) jw_double(w, v);
    else jw_null(w);
}

static void write_json(const mp_tplan *pl, jw *w);

static void loss_json(jw *w, const mp_tplan *pl) {
    const mp_tplan_loss *L = &pl->loss;
    jw_open(w, '{');
    jw_key(w, "asked"); jw_opt_str(w, mp_tplan_loss_name(L->asked));
    jw_key(w, "form"); jw_opt_str(w, mp_tplan_loss_name(pl->o.inference ? MP_LOSS_NONE : L->form));
    jw_key(w, "why"); jw_opt_str(w, L->why);
    bool on = L->form != MP_LOSS_NONE && !pl->o.inference;
    jw_key(w, "logits_dtype"); jw_opt_str(w, on ? mp_dtype_name(L->logits_dt) : NULL);
    jw_key(w, "dtype"); jw_opt_str(w, on ? mp_dtype_name(L->ce_dt) : NULL);
    jw_key(w, "upcast"); jw_bool(w, on && L->upcast);
    jw_key(w, "softcapping"); jw_bool(w, on && L->softcap_in >= 0);
    jw_key(w, "rows"); jw_u64(w, on ? L->rows : 0);
    jw_key(w, "classes"); jw_u64(w, on ? L->classes : 0);
    jw_key(w, "kept_bytes"); jw_u64(w, on ? L->kept : 0);
    jw_key(w, "forward_transient_bytes"); jw_u64(w, on ? L->fwd_transient : 0);
    jw_key(w, "backward_transient_bytes"); jw_u64(w, on ? L->bwd_transient : 0);
    jw_close(w, '}');
}

static void moment_json(jw *w, const mp_tplan *pl) {
    jw_open(w, '{');
    if (pl->o.inference) {
        jw_key(w, "when"); jw_opt_str(w, "inference");
        jw_key(w, "node"); jw_null(w);
        jw_key(w, "weights_bytes"); jw_u64(w, pl->mem.weights_bytes);
        jw_key(w, "inputs_bytes"); jw_u64(w, pl->infer_inputs);
        jw_key(w, "activations_bytes"); jw_u64(w, pl->infer_acts);
        jw_key(w, "autocast_cache_bytes"); jw_u64(w, pl->infer_cache);
        jw_key(w, "workspace_bytes"); jw_u64(w, pl->workspace_bytes);
        jw_key(w, "total_bytes"); jw_u64(w, pl->mem.peak_bytes);
        jw_close(w, '}');
        return;
    }
    const mp_tplan_moment *a = &pl->stages[pl->worst].at;
    static const char *const when[] = {"forward", "loss_backward", "backward", "optimizer", "inference"};
    jw_key(w, "when"); jw_opt_str(w, a->when >= 0 && a->when <= MP_MOMENT_INFERENCE ? when[a->when] : NULL);
    jw_key(w, "node");
    if (a->when == MP_MOMENT_BACKWARD && a->node >= 0 && a->node < pl->n_nodes)
        jw_opt_str(w, pl->p->m->graph->nodes[pl->p->m->graph->order[a->node]].name);
    else jw_null(w);
    jw_key(w, "weights_bytes"); jw_u64(w, a->weights);
    jw_key(w, "master_weights_bytes"); jw_u64(w, a->master);
    jw_key(w, "optimizer_bytes"); jw_u64(w, a->optimizer);
    jw_key(w, "grads_bytes"); jw_u64(w, a->grads);
    jw_key(w, "ddp_buckets_bytes"); jw_u64(w, a->buckets);
    jw_key(w, "gathered_bytes"); jw_u64(w, a->gathered);
    jw_key(w, "activations_bytes"); jw_u64(w, a->activations);
    jw_key(w, "loss_bytes"); jw_u64(w, a->loss);
    jw_key(w, "recomputed_bytes"); jw_u64(w, a->recomputed);
    jw_key(w, "autocast_cache_bytes"); jw_u64(w, a->cast_cache);
    jw_key(w, "transient_bytes"); jw_u64(w, a->transient);
    jw_key(w, "workspace_bytes"); jw_u64(w, a->workspace);
    jw_key(w, "rounding_bytes"); jw_u64(w, a->rounding);
    jw_key(w, "total_bytes"); jw_u64(w, a->total);
    jw_key(w, "if_grads_freed_first_bytes");
    if (a->if_freed_first) jw_u64(w, a->if_freed_first);
    else jw_null(w);
    jw_close(w, '}');
}

/* What the pattern layer recognised, as the text's "recognised" lines. */
static void patterns_json(jw *w, const mp_tplan *pl) {
    const mp_patterns *P = pl->pats;
    const mp_graph *g = pl->p->m->graph;
    if (!P) {
        jw_null(w);
        return;
    }
    jw_open(w, '{');
    jw_key(w, "blocks");
    jw_open(w, '[');
    char cur[512], nxt[512];
    int run = 0;
    for (int b = 0; b <= P->n_blocks; b++) {
        if (b < P->n_blocks) block_text(nxt, sizeof nxt, P, &P->blocks[b]);
        if (b > 0 && (b == P->n_blocks || strcmp(cur, nxt) != 0)) {
            jw_open(w, '{');
            jw_key(w, "first"); jw_i64(w, run);
            jw_key(w, "last"); jw_i64(w, b - 1);
            jw_key(w, "text"); jw_str(w, cur);
            jw_close(w, '}');
            run = b;
        }
        if (b < P->n_blocks) memcpy(cur, nxt, sizeof cur);
    }
    jw_close(w, ']');
    jw_key(w, "attentions"); jw_i64(w, P->n_attn);
    jw_key(w, "attention_fused"); jw_i64(w, pl->attn_fused);
    jw_key(w, "attention_math"); jw_i64(w, pl->attn_math);
    jw_key(w, "attention_softcapped"); jw_i64(w, pl->attn_softcap);
    jw_key(w, "attention_causal"); jw_i64(w, pl->attn_causal);
    jw_key(w, "attention_causal_share"); jw_double(w, pl->attn_causal ? pl->attn_causal_share : NAN);
    jw_key(w, "norms"); jw_i64(w, P->n_norms);
    jw_key(w, "activations"); jw_i64(w, P->n_acts);
    jw_key(w, "rotary"); jw_i64(w, P->n_rotary);
    jw_key(w, "embedding"); jw_bool(w, P->embed >= 0);
    jw_key(w, "lm_head"); jw_bool(w, P->lm_head >= 0);
    jw_key(w, "tied"); jw_bool(w, P->tied);
    jw_key(w, "vocab");
    if (P->vocab > 0) jw_i64(w, P->vocab);
    else jw_null(w);
    jw_key(w, "not_recognised");
    jw_open(w, '[');
    for (int i = 0; i < P->n_miss; i++) {
        const mp_pmiss *x = &P->miss[i];
        bool ok = x->node >= 0 && x->node < g->n_nodes;
        jw_open(w, '{');
        jw_key(w, "kind"); jw_opt_str(w, mp_pat_kind_name(x->kind));
        jw_key(w, "node"); jw_opt_str(w, ok ? g->nodes[x->node].name : NULL);
        jw_key(w, "op"); jw_opt_str(w, ok ? g->nodes[x->node].op : NULL);
        jw_key(w, "why"); jw_opt_str(w, x->why);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
}

static void write_json(const mp_tplan *pl, jw *w) {
    const mp_tplan_options *o = &pl->o;
    const mp_model *m = pl->p->m;
    jw_open(w, '{');
    jw_key(w, "modelprof_version"); jw_opt_str(w, MP_VERSION_STRING);
    jw_key(w, "model");
    jw_open(w, '{');
    jw_key(w, "path"); jw_opt_str(w, m->path);
    jw_key(w, "params"); jw_u64(w, pl->params);
    jw_close(w, '}');
    jw_key(w, "plan");
    jw_open(w, '{');
    jw_key(w, "mode"); jw_opt_str(w, o->inference ? "inference" : "training");
    jw_key(w, "precision"); jw_opt_str(w, mp_precision_name(o->precision));
    jw_key(w, "precision_from_export"); jw_bool(w, pl->precision_auto);
    jw_key(w, "batch");
    if (pl->batch > 0) {
        jw_open(w, '{');
        jw_key(w, "export"); jw_i64(w, pl->export_batch);
        jw_key(w, "planned"); jw_i64(w, pl->batch);
        jw_key(w, "scaled"); jw_bool(w, pl->batch_scaled);
        jw_close(w, '}');
    } else {
        jw_null(w);
    }
    jw_key(w, "optimizer"); jw_opt_str(w, o->inference ? NULL : mp_optimizer_name(o->optimizer));
    jw_key(w, "checkpointing"); jw_bool(w, o->checkpointing != 0);
    jw_key(w, "blocks");
    jw_open(w, '[');
    for (int i = 0; i < pl->n_repeats; i++) jw_opt_str(w, m->modules[pl->repeats[i]].path);
    jw_close(w, ']');
    jw_key(w, "zero"); jw_i64(w, pl->zero);
    jw_key(w, "fsdp"); jw_bool(w, o->fsdp != 0);
    jw_key(w, "dp"); jw_i64(w, pl->dp);
    jw_key(w, "tp"); jw_i64(w, pl->tp);
    jw_key(w, "pp"); jw_i64(w, pl->pp);
    jw_key(w, "micro_batches"); jw_i64(w, pl->m);
    jw_key(w, "gpus"); jw_i64(w, pl->gpus);
    jw_key(w, "params"); jw_u64(w, pl->params);
    jw_key(w, "tokens_per_step");
    if (pl->has_tokens) jw_double(w, pl->tokens_per_step);
    else jw_null(w);
    jw_key(w, "samples_per_step"); jw_double(w, pl->samples_per_step);
    jw_key(w, "gpu");
    if (pl->gpu || pl->have_gpu || pl->mem_bytes > 0) {
        jw_open(w, '{');
        jw_key(w, "id"); jw_opt_str(w, pl->gpu ? pl->gpu->id : NULL);
        jw_key(w, "label"); jw_opt_str(w, pl->gpu ? pl->gpu->label : "given");
        jw_key(w, "peak_flops_per_s"); jw_double(w, pl->peak_low_flops);
        jw_key(w, "peak_dtype"); jw_opt_str(w, pl->peak_dtype);
        jw_key(w, "fp32_peak_flops_per_s"); jw_double(w, pl->peak_flops);
        jw_key(w, "memory_bytes"); jw_double(w, pl->mem_bytes);
        jw_key(w, "bandwidth_bytes_per_s"); jw_double(w, pl->bw);
        jw_key(w, "link_bytes_per_s"); jw_double(w, mp_tplan_link_bw(pl, pl->dp * pl->tp * pl->pp));
        jw_key(w, "source"); jw_opt_str(w, pl->gpu ? pl->gpu->source : "given on the command line");
        jw_close(w, '}');
    } else {
        jw_null(w);
    }
    jw_key(w, "memory");
    jmem(w, &pl->mem, o->inference ? pl->params : pl->stages[pl->worst].params,
         o->inference ? 0 : pl->ft ? pl->stages[pl->worst].trainable : pl->stages[pl->worst].params, pl->mem_bytes);
    jw_key(w, "stages");
    jw_open(w, '[');
    for (int s = 0; s < pl->pp && !o->inference; s++) {
        const mp_pstage *ps = &pl->stages[s];
        jw_open(w, '{');
        jw_key(w, "stage"); jw_i64(w, s);
        jw_key(w, "first_block"); jw_i64(w, ps->first_repeat);
        jw_key(w, "blocks"); jw_i64(w, ps->n_repeats);
        jw_key(w, "params"); jw_u64(w, ps->params);
        jw_key(w, "in_flight"); jw_i64(w, ps->in_flight);
        jw_key(w, "memory"); jmem(w, &ps->mem, ps->params, pl->ft ? ps->trainable : ps->params, pl->mem_bytes);
        jw_key(w, "fwd_flops"); jw_u64(w, ps->fwd_flops);
        jw_key(w, "bwd_flops"); jw_u64(w, ps->bwd_flops);
        jw_key(w, "recompute_flops"); jw_u64(w, ps->recompute_flops);
        jw_key(w, "fwd_s"); jw_double(w, pl->have_gpu ? ps->fwd_s : NAN);
        jw_key(w, "bwd_s"); jw_double(w, pl->have_gpu ? ps->bwd_s : NAN);
        jw_key(w, "recompute_s"); jw_double(w, pl->have_gpu ? ps->recompute_s : NAN);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_key(w, "step_time_s"); jw_double(w, pl->have_gpu ? pl->step_s : NAN);
    jw_key(w, "breakdown");
    jw_open(w, '{');
    double hv = pl->have_gpu ? 1 : NAN;
    jw_key(w, "compute_s"); jw_double(w, pl->compute_s * hv);
    jw_key(w, "bubble_s"); jw_double(w, pl->bubble_s * hv);
    jw_key(w, "tp_comm_s"); jw_double(w, pl->tp_comm_s * hv);
    jw_key(w, "p2p_s"); jw_double(w, pl->p2p_s * hv);
    jw_key(w, "dp_comm_s"); jw_double(w, pl->dp_comm_s * hv);
    jw_key(w, "dp_comm_bytes"); jw_u64(w, pl->dp_comm_bytes);
    jw_key(w, "optimizer_s"); jw_double(w, pl->optimizer_s * hv);
    jw_close(w, '}');
    jw_key(w, "flops");
    jw_open(w, '{');
    jw_key(w, "fwd_flops"); jw_u64(w, pl->fwd_flops);
    jw_key(w, "bwd_flops"); jw_u64(w, pl->bwd_flops);
    jw_key(w, "recompute_flops"); jw_u64(w, pl->recompute_flops);
    jw_key(w, "nd_flops");
    if (pl->flops_6nd > 0) jw_double(w, pl->flops_6nd);
    else jw_null(w);
    jw_close(w, '}');
    jw_key(w, "mfu_assumed"); jw_double(w, o->mfu);
    jw_key(w, "mfu_implied"); jw_double(w, pl->mfu_implied >= 0 ? pl->mfu_implied : NAN);
    jw_key(w, "time_to_train_s"); jnum_or_null(w, pl->train_s);
    jw_key(w, "time_to_train_nd_s"); jnum_or_null(w, pl->train_6nd_s);
    jw_key(w, "assumptions");
    jw_open(w, '{');
    jw_key(w, "compute_efficiency"); jw_double(w, o->compute_eff);
    jw_key(w, "memory_efficiency"); jw_double(w, o->memory_eff);
    jw_key(w, "node_overhead_s"); jw_double(w, o->node_overhead_s);
    jw_key(w, "reserve_bytes"); jw_u64(w, pl->mem.reserve_bytes);
    jw_key(w, "loss"); jw_opt_str(w, o->loss && !o->inference && pl->loss.form != MP_LOSS_NONE ? "cross_entropy" : NULL);
    jw_key(w, "host_op_s"); jw_double(w, o->host_op_s);
    jw_key(w, "dropout");
    if (o->dropout > 0 && !o->inference) jw_double(w, o->dropout);
    else jw_null(w);
    jw_key(w, "tf32");
    jw_opt_str(w, mp_tplan_choice_name("tf32", o->tf32));
    jw_key(w, "optimizer_impl");
    jw_opt_str(w, mp_tplan_choice_name("optimizer-impl", o->optimizer_impl));
    jw_key(w, "loss_scaler");
    jw_opt_str(w, pl->loss_scaler == MP_SCALER_TORCH       ? "grad_scaler"
                  : pl->loss_scaler == MP_SCALER_DEEPSPEED ? "deepspeed"
                                                           : NULL);
    jw_key(w, "clip_grad_norm");
    if (o->clip_grad_norm > 0 && !o->inference) jw_double(w, o->clip_grad_norm);
    else jw_null(w);
    jw_key(w, "gradient_passes"); jw_i64(w, o->inference ? 0 : pl->grad_passes);
    jw_key(w, "cublas_workspace_bytes"); jw_u64(w, pl->workspace_bytes);
    jw_key(w, "native_depthwise_convs"); jw_i64(w, pl->native_dw);
    jw_key(w, "comm_overlap"); jw_bool(w, false);
    jw_key(w, "grads_freed_between_steps");
    jw_bool(w, mp_tplan_grads_born(o, pl->dp, pl->m, pl->zero));
    jw_key(w, "zero_grad");
    jw_opt_str(w, o->inference ? NULL : mp_tplan_choice_name("zero-grad", o->zero_grad));
    jw_close(w, '}');
    jw_key(w, "finetune");
    ft_json(w, pl);
    jw_key(w, "deepspeed");
    jw_open(w, '{');
    jw_key(w, "zero2_model_states_bytes"); jw_u64(w, pl->ds_zero2);
    jw_key(w, "zero3_model_states_bytes"); jw_u64(w, pl->ds_zero3);
    jw_key(w, "largest_layer_params"); jw_u64(w, pl->largest_layer);
    jw_close(w, '}');
    jw_key(w, "activations");
    jw_open(w, '{');
    jw_key(w, "autocast_weight_copies_bytes");
    jw_u64(w, o->inference ? 0 : pl->stages[pl->worst].cast_bytes);
    jw_key(w, "loss_bytes"); jw_u64(w, o->loss && !o->inference ? pl->loss_bytes : 0);
    jw_key(w, "dropout_bytes"); jw_u64(w, o->inference ? 0 : pl->dropout_bytes);
    jw_close(w, '}');
    jw_key(w, "loss_form");
    loss_json(w, pl);
    jw_key(w, "peak_moment");
    moment_json(w, pl);
    jw_key(w, "host");
    jw_open(w, '{');
    jw_key(w, "ops_per_step"); jw_u64(w, host_ops_total(pl));
    jw_key(w, "kernels_per_step"); jw_u64(w, kernels_total(pl));
    jw_key(w, "optimizer_kernels"); jw_u64(w, o->inference ? 0 : pl->opt_launches);
    jw_key(w, "host_s"); jw_double(w, pl->have_gpu ? pl->host_s : NAN);
    jw_key(w, "device_s"); jw_double(w, pl->have_gpu ? pl->device_s : NAN);
    jw_key(w, "bound"); jw_opt_str(w, !pl->have_gpu ? NULL : pl->host_bound ? "host" : "device");
    jw_close(w, '}');
    jw_key(w, "patterns");
    patterns_json(w, pl);
    jw_key(w, "moe");
    if (pl->routed) {
        const mp_moe_summary *e = &pl->moe;
        jw_open(w, '{');
        jw_key(w, "routers"); jw_i64(w, e->routers);
        jw_key(w, "experts"); jw_i64(w, e->experts);
        jw_key(w, "top_k"); jw_i64(w, e->top_k);
        jw_key(w, "tokens"); jw_i64(w, e->tokens);
        jw_key(w, "rows_per_expert"); jw_double(w, (double)e->tokens * (double)e->top_k / (double)e->experts);
        jw_key(w, "routing"); jw_str(w, "balanced");
        jw_key(w, "expert_params"); jw_u64(w, pl->moe_expert_params);
        jw_key(w, "active_params"); jw_double(w, pl->active_params);
        jw_close(w, '}');
    } else {
        jw_null(w);
    }
    jw_key(w, "tensor_parallel");
    jw_open(w, '{');
    jw_key(w, "sequence_parallel"); jw_bool(w, pl->tp > 1 && o->sequence_parallel);
    jw_key(w, "split_nodes"); jw_i64(w, pl->tp > 1 ? pl->split_nodes : 0);
    jw_key(w, "replicated_nodes"); jw_i64(w, pl->tp > 1 ? pl->replicated_nodes : 0);
    jw_key(w, "heads"); jw_i64(w, pl->heads);
    jw_key(w, "by_op");
    jw_open(w, '[');
    for (int i = 0; pl->tp > 1 && i < pl->n_tp_ops; i++) {
        jw_open(w, '{');
        jw_key(w, "op"); jw_opt_str(w, pl->tp_ops[i]);
        jw_key(w, "split"); jw_i64(w, pl->tp_split[i]);
        jw_key(w, "replicated"); jw_i64(w, pl->tp_rep[i]);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
    jw_key(w, "default_train_rule");
    jw_open(w, '[');
    for (int i = 0; i < pl->n_default_ops; i++) {
        jw_open(w, '{');
        jw_key(w, "op"); jw_opt_str(w, pl->default_ops[i]);
        jw_key(w, "count"); jw_i64(w, pl->default_counts[i]);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    if (o->inference) {
        jw_key(w, "inference");
        jw_open(w, '{');
        jw_key(w, "inputs_bytes"); jw_u64(w, pl->infer_inputs);
        jw_key(w, "kv_cache_bytes_per_token");
        if (o->kv_cache) jw_u64(w, pl->kv_bytes_per_token);
        else jw_null(w);
        jw_key(w, "kv_cache_bytes");
        if (o->kv_cache && pl->kv_tokens) jw_u64(w, pl->kv_bytes);
        else jw_null(w);
        jw_key(w, "kv_cache_context_tokens");
        if (o->kv_cache && pl->kv_tokens) jw_u64(w, pl->kv_tokens);
        else jw_null(w);
        jw_key(w, "kv_cache_cross_bytes");
        if (o->kv_cache) jw_u64(w, pl->kv_cross_bytes);
        else jw_null(w);
        jw_key(w, "prefill_flops"); jw_u64(w, pl->fwd_flops);
        jw_key(w, "decode_flops_per_token");
        if (o->kv_cache ? pl->kv_tokens != 0 : pl->tokens_per_mb != 0) jw_u64(w, mp_tplan_decode_flops(pl));
        else jw_null(w);
        jw_key(w, "decode_bytes_per_token");
        jw_u64(w, pl->mem.weights_bytes + pl->kv_bytes);
        jw_close(w, '}');
    }
    jw_key(w, "gpus_needed");
    if (pl->need.dp) {
        jw_open(w, '{');
        jw_key(w, "gpus"); jw_i64(w, pl->need.dp * pl->need.tp * pl->need.pp);
        jw_key(w, "dp"); jw_i64(w, pl->need.dp);
        jw_key(w, "tp"); jw_i64(w, pl->need.tp);
        jw_key(w, "pp"); jw_i64(w, pl->need.pp);
        jw_key(w, "zero"); jw_i64(w, pl->need.zero);
        jw_key(w, "required_bytes"); jw_u64(w, pl->need.peak_bytes);
        jw_close(w, '}');
    } else {
        jw_null(w);
    }
    jw_key(w, "fit");
    jw_open(w, '[');
    for (int i = 0; i < pl->n_fit; i++) {
        const mp_fit_row *r = &pl->fit[i];
        jw_open(w, '{');
        jw_key(w, "dp"); jw_i64(w, r->dp);
        jw_key(w, "tp"); jw_i64(w, r->tp);
        jw_key(w, "pp"); jw_i64(w, r->pp);
        jw_key(w, "zero"); jw_i64(w, r->zero);
        jw_key(w, "required_bytes"); jw_u64(w, r->peak_bytes);
        jw_key(w, "step_time_s"); jw_double(w, pl->have_gpu ? r->step_s : NAN);
        jw_key(w, "per_s"); jw_double(w, pl->have_gpu ? r->tokens_per_s : NAN);
        jw_key(w, "fits");
        if (pl->mem_bytes > 0) jw_bool(w, r->fits);
        else jw_null(w);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
    jw_key(w, "warnings");
    jw_open(w, '[');
    for (int i = 0; i < m->n_warnings; i++) jw_opt_str(w, m->warnings[i] ? m->warnings[i] : "");
    jw_close(w, ']');
    jw_close(w, '}');
}

mp_status mp_tplan_write(const mp_tplan *pl, mp_format format, FILE *f) {
    if (!pl || !f) return mp_error(MP_ERR_USAGE, "no plan or file");
    if (format == MP_FORMAT_JSON) {
        jw *w = jw_begin(f);
        if (!w) return MP_ERR_NOMEM;
        write_json(pl, w);
        jw_end(w);
        return MP_OK;
    }
    if (format != MP_FORMAT_TEXT) return mp_error(MP_ERR_USAGE, "unknown report format");
    pw *w = malloc(sizeof *w);
    if (!w) return mp_error(MP_ERR_NOMEM, "out of memory while writing the plan");
    w->o.f = f;
    w->o.n = 0;
    w->o.cap = sizeof w->buf;
    w->o.buf = w->buf;
    write_text(pl, w);
    mp_out_flush(&w->o);
    free(w);
    return MP_OK;
}

typedef struct plan_job {
    const mp_tplan *pl;
    mp_format format;
} plan_job;

static mp_status plan_job_write(void *ud, FILE *f) {
    const plan_job *j = ud;
    return mp_tplan_write(j->pl, j->format, f);
}

mp_status mp_tplan_write_file(const mp_tplan *pl, mp_format format, const char *path) {
    plan_job j = {pl, format};
    return mp_write_file_atomic(path, plan_job_write, &j);
}

mp_status mp_gpu_table_write(FILE *f) {
    fprintf(f, "%-10s %-18s %8s %8s %8s %8s %8s %8s %7s %8s  %s\n", "name", "GPU", "fp32", "tf32", "fp16",
            "bf16", "fp8", "fp64", "memory", "GB/s", "source");
    for (int i = 0; i < mp_gpu_count(); i++) {
        const mp_gpu *g = mp_gpu_at(i);
        fprintf(f, "%-10s %-18s", g->id, g->label);
        for (int d = 0; d < MP_GPU_DT_COUNT; d++) {
            if (g->tflops[d] > 0) fprintf(f, " %8g", g->tflops[d]);
            else fprintf(f, " %8s", "-");
        }
        fprintf(f, " %4g GB %8g  %s\n", g->mem_gb, g->bandwidth_gbs, g->source);
    }
    fprintf(f, "peaks in TFLOPS, dense (no sparsity); fp32 without tensor cores; '-': not in the datasheet\n");
    return ferror(f) ? mp_error(MP_ERR_IO, "cannot write the GPU table") : MP_OK;
}
