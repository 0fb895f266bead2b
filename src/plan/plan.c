/* The training planner: memory per GPU, step time, time to train
 * (docs/PLANNING.md has every formula with a worked example and its
 * source). This file: names, options and their refusals, the GPU, and the
 * order of the work: the graph pass (graph.c), the layouts (layout.c, over
 * the model states of states.c), then the totals and time to train. */
#include "plan/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/patterns.h"
#include "ops/ops.h"

/* ---- names ---- */

static const char *const prec_names[MP_PREC_COUNT] = {"fp32", "bf16", "fp16", "bf16-mixed",
                                                      "fp16-mixed", "auto"};
static const char *const opt_names[MP_OPT_COUNT] = {"adamw", "adam", "sgd", "sgd-momentum",
                                                    "adafactor", "none", "adamw8bit",
                                                    "paged_adamw8bit", "lion"};

const char *mp_precision_name(mp_precision p) {
    return (unsigned)p < MP_PREC_COUNT ? prec_names[p] : NULL;
}
const char *mp_optimizer_name(mp_optimizer o) {
    return (unsigned)o < MP_OPT_COUNT ? opt_names[o] : NULL;
}
int mp_precision_parse(const char *s) {
    for (int i = 0; s && i < MP_PREC_COUNT; i++)
        if (strcmp(s, prec_names[i]) == 0) return i;
    return -1;
}
int mp_optimizer_parse(const char *s) {
    for (int i = 0; s && i < MP_OPT_COUNT; i++)
        if (strcmp(s, opt_names[i]) == 0) return i;
    return -1;
}

#define TPLAN_OPTIONS_V1 MP_FIELD_END(mp_tplan_options, fit)

static void tplan_defaults(mp_tplan_options *o) {
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->precision = MP_PREC_AUTO;
    o->optimizer = MP_OPT_ADAMW;
    o->dp = o->tp = o->pp = 1;
    o->loss = 1;
    o->attention_fused = 1;
    o->mfu = 0.4;
    o->compute_eff = 0.6;
    o->memory_eff = 0.8;
    o->node_overhead_s = 10e-6;
    o->reserve_gb = 2;
    o->lora_alpha = 8; /* PEFT's LoraConfig default */
    o->host_op_s = -1; /* auto: MP_HOST_US_TRAIN or MP_HOST_US_INFER (plan_build) */
}

mp_status mp_tplan_options_init(mp_tplan_options *o, size_t size) {
    mp_tplan_options d;
    tplan_defaults(&d);
    return mp_opts_init(o, size, &d, sizeof d, TPLAN_OPTIONS_V1, "mp_tplan_options");
}

/* ---- the GPU ---- */

/* --gpu NAME not in the table: the usage error that lists the table. */
static mp_status unknown_gpu(const char *name) {
    char names[512];
    size_t k = 0;
    names[0] = 0;
    for (int i = 0; i < mp_gpu_count() && k + 20 < sizeof names; i++)
        k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", i ? ", " : "", mp_gpu_at(i)->id);
    return mp_error(MP_ERR_USAGE, "--gpu %s: unknown GPU (known: %s; or give --peak-tflops, "
                    "--mem-gb and --bandwidth-gbs)", name, names);
}

static mp_status pick_gpu(mp_tplan *pl) {
    const mp_tplan_options *o = &pl->o;
    const mp_gpu *gp = NULL;
    if (o->gpu) {
        gp = mp_gpu_find(o->gpu);
        if (!gp) return unknown_gpu(o->gpu);
    }
    pl->gpu = gp;
    int col = MP_GPU_FP32, low = MP_GPU_FP32;
    switch (o->precision) {
    case MP_PREC_BF16: col = low = MP_GPU_BF16; break;
    case MP_PREC_FP16: col = low = MP_GPU_FP16; break;
    case MP_PREC_BF16_MIXED: low = MP_GPU_BF16; break;
    case MP_PREC_FP16_MIXED: low = MP_GPU_FP16; break;
    default: break;
    }
    pl->peak_dtype = mp_gpu_dtype_names[low];
    if (gp) {
        if (gp->tflops[low] <= 0)
            return mp_error(MP_ERR_USAGE, "--precision %s: the %s has no %s rate in its datasheet (%s)",
                            mp_precision_name(o->precision), gp->label, mp_gpu_dtype_names[low], gp->source);
        pl->gpu_label = gp->label;
        pl->peak_flops = gp->tflops[col] * 1e12;
        pl->peak_low_flops = gp->tflops[low] * 1e12;
        pl->peak_tf32_flops = gp->tflops[MP_GPU_TF32] * 1e12;
        pl->simt_ips = gp->tflops[MP_GPU_FP32] * 1e12 / 2;
        pl->mem_bytes = gp->mem_gb * 1e9;
        pl->bw = gp->bandwidth_gbs * 1e9;
        pl->link = gp->link_gbs * 1e9;
        pl->have_gpu = true;
    }
    if (o->peak_tflops > 0) {
        pl->peak_low_flops = o->peak_tflops * 1e12;
        if (!gp || col == low) pl->peak_flops = o->peak_tflops * 1e12;
    }
    /* TF32: the table's dense rate; none there, or peaks given by hand: fp32's */
    if (!(pl->peak_tf32_flops > 0) || o->peak_tflops > 0) pl->peak_tf32_flops = pl->peak_flops;
    if (o->peak_tflops > 0) pl->simt_ips = 0; /* peaks by hand: no CUDA-core rate to time issue by */
    if (o->mem_gb > 0) pl->mem_bytes = o->mem_gb * 1e9;
    if (o->bandwidth_gbs > 0) pl->bw = o->bandwidth_gbs * 1e9;
    if (!gp && !pl->gpu_label && (o->peak_tflops > 0 || o->mem_gb > 0)) pl->gpu_label = "given";
    if (!gp) pl->have_gpu = pl->peak_low_flops > 0 && pl->bw > 0;
    if (!gp && o->peak_tflops > 0 && o->bandwidth_gbs <= 0)
        return mp_error(MP_ERR_USAGE, "--peak-tflops without --bandwidth-gbs: the roofline needs both");
    return MP_OK;
}

/* ---- the plan ---- */

mp_status mp_tplan_options_check(const mp_tplan_options *given) {
    if (!given) return mp_error(MP_ERR_USAGE, "no options");
    /* read through the caller's size: fields newer than its struct are the defaults */
    mp_tplan_options opts;
    tplan_defaults(&opts);
    mp_status st = mp_opts_take(&opts, sizeof opts, given, TPLAN_OPTIONS_V1, "mp_tplan_options");
    if (st) return st;
    const mp_tplan_options *o = &opts;
    /* a bad flag value, whatever the model: checked before the model is read */
    if (o->gpu && !mp_gpu_find(o->gpu)) return unknown_gpu(o->gpu);
    if (o->precision < 0 || o->precision >= MP_PREC_COUNT)
        return mp_error(MP_ERR_USAGE, "--precision: unknown precision");
    if (o->optimizer < 0 || o->optimizer >= MP_OPT_COUNT)
        return mp_error(MP_ERR_USAGE, "--optimizer: unknown optimizer");
    if (o->zero < 0 || o->zero > 3) return mp_error(MP_ERR_USAGE, "--zero %d: expected 0, 1, 2 or 3", o->zero);
    if (o->dp < 1 || o->dp > 1000000) return mp_error(MP_ERR_USAGE, "--dp %d: expected 1 to 1000000", o->dp);
    if (o->tp < 1 || o->tp > 1024) return mp_error(MP_ERR_USAGE, "--tp %d: expected 1 to 1024", o->tp);
    if (o->pp < 1 || o->pp > 1024) return mp_error(MP_ERR_USAGE, "--pp %d: expected 1 to 1024", o->pp);
    if (o->batch < 0 || o->batch > 1000000000)
        return mp_error(MP_ERR_USAGE, "--batch %lld: expected 1 to 1000000000", (long long)o->batch);
    if (o->micro_batches < 0 || o->micro_batches > 1000000)
        return mp_error(MP_ERR_USAGE, "--micro-batches %d: expected 1 to 1000000", o->micro_batches);
    if (o->fsdp && (o->zero == 1 || o->zero == 2))
        return mp_error(MP_ERR_USAGE, "--fsdp and --zero %d conflict: FSDP's full shard is ZeRO stage 3 "
                        "(give --fsdp, or --zero alone)", o->zero);
    if (o->inference && (o->zero || o->fsdp || o->checkpointing))
        return mp_error(MP_ERR_USAGE, "--inference: %s applies to training only",
                        o->zero ? "--zero" : o->fsdp ? "--fsdp" : "--checkpointing");
    if (o->inference && o->clip_grad_norm > 0)
        return mp_error(MP_ERR_USAGE, "--inference: --clip-grad-norm applies to training only");
    if (o->inference && o->fit)
        return mp_error(MP_ERR_USAGE, "--inference and --fit conflict: --fit lists training layouts");
    if (o->inference && (o->tokens > 0 || o->samples > 0))
        return mp_error(MP_ERR_USAGE, "--inference and %s conflict: time to train applies to training",
                        o->tokens > 0 ? "--tokens" : "--samples");
    if (o->kv_cache && !o->inference) return mp_error(MP_ERR_USAGE, "--kv-cache needs --inference");
    if (o->sequence_parallel && o->tp < 2)
        return mp_error(MP_ERR_USAGE, "--sequence-parallel needs --tp 2 or more (it splits what tensor "
                        "parallelism replicates)");
    if (!(o->mfu > 0 && o->mfu <= 1)) return mp_error(MP_ERR_USAGE, "--mfu %g: expected a fraction in (0, 1]", o->mfu);
    if (!(o->compute_eff > 0 && o->compute_eff <= 1) || !(o->memory_eff > 0 && o->memory_eff <= 1))
        return mp_error(MP_ERR_USAGE, "--compute-eff/--memory-eff: expected fractions in (0, 1]");
    if (o->gpus < 0) return mp_error(MP_ERR_USAGE, "--gpus %d: expected a positive count", o->gpus);
    if (o->gpus > 0) {
        /* --gpus is the job's size: the layout's GPUs, or a multiple of them
         * (the extra GPUs are more data-parallel replicas) */
        long long need = (long long)o->dp * o->tp * o->pp;
        if (o->gpus < need)
            return mp_error(MP_ERR_USAGE, "--gpus %d is fewer than the layout's --dp %d x --tp %d x --pp %d = %lld "
                            "GPUs", o->gpus, o->dp, o->tp, o->pp, need);
        if (o->gpus % need)
            return mp_error(MP_ERR_USAGE, "--gpus %d is not a multiple of the layout's --dp %d x --tp %d x --pp %d "
                            "= %lld GPUs (the extra GPUs are data-parallel replicas of the layout)",
                            o->gpus, o->dp, o->tp, o->pp, need);
    }
    if (o->loss_form < 0 || o->loss_form >= MP_LOSS_COUNT) return mp_error(MP_ERR_USAGE, "--loss: unknown loss form");
    if (o->optimizer_impl < 0 || o->optimizer_impl >= MP_OPTIMPL_COUNT)
        return mp_error(MP_ERR_USAGE, "--optimizer-impl: unknown implementation");
    if (!o->loss && o->loss_form != MP_LOSS_AUTO && o->loss_form != MP_LOSS_NONE)
        return mp_error(MP_ERR_USAGE, "--no-loss and --loss %s conflict (--no-loss is --loss none)",
                        o->loss_form == MP_LOSS_CAUSAL_LM ? "causal-lm" : "cross-entropy");
    if (o->inference && o->loss_form != MP_LOSS_AUTO && o->loss_form != MP_LOSS_NONE)
        return mp_error(MP_ERR_USAGE, "--inference and --loss conflict: the loss applies to training");
    if (!(o->host_op_s < 1)) /* negative: the default for the mode */
        return mp_error(MP_ERR_USAGE, "--host-us-per-op: expected microseconds, 0 or more");
    if (!(o->dropout >= 0 && o->dropout < 1))
        return mp_error(MP_ERR_USAGE, "--dropout: expected a probability from 0 up to (not including) 1");
    if (o->dropout > 0 && o->inference)
        return mp_error(MP_ERR_USAGE, "--inference and --dropout conflict: dropout runs in training only");
    if (o->tf32 < 0 || o->tf32 >= MP_TF32_COUNT) return mp_error(MP_ERR_USAGE, "--tf32: expected conv, all or none");
    if (o->zero_grad < 0 || o->zero_grad >= MP_ZEROGRAD_COUNT)
        return mp_error(MP_ERR_USAGE, "--zero-grad: expected after-forward, before-forward or in-place");
    if (o->zero_grad != MP_ZEROGRAD_AFTER_FORWARD && o->inference)
        return mp_error(MP_ERR_USAGE, "--inference and --zero-grad conflict: gradients exist in training only");
    if (o->tokens < 0 || o->samples < 0) return mp_error(MP_ERR_USAGE, "--tokens/--samples: expected a positive count");
    if (o->tokens > 0 && o->samples > 0) return mp_error(MP_ERR_USAGE, "--tokens and --samples: give one");
    return mp_tplan_ft_check(o);
}

/* --batch on an export whose batch is fixed: the graph inputs' dim 0 is a
 * number in the file (no symbol) and every input agrees on it. The graph
 * is planned at that batch and the per-sample figures scaled (graph.c). */
static mp_status static_batch(mp_tplan *pl) {
    const mp_tplan_options *o = &pl->o;
    const mp_graph *g = pl->p->m->graph;
    if (o->batch <= 0) return MP_OK;
    int64_t b0 = -1;
    for (int i = 0; i < g->n_inputs; i++) {
        const mp_value *v = &g->values[g->inputs[i]];
        if (v->rank < 1) continue;
        if (v->decl_rank >= 1 && v->decl_dims && !MP_DIM_KNOWN(v->decl_dims[0]))
            return mp_error(MP_ERR_USAGE, "--batch %lld: input '%s' has a symbolic batch dim: give it with "
                            "--dim or --input instead", (long long)o->batch, v->name);
        if (v->dims[0] <= 0) continue;
        if (b0 > 0 && v->dims[0] != b0)
            return mp_error(MP_ERR_USAGE, "--batch %lld: the inputs disagree on the batch (%lld and %lld at dim 0)",
                            (long long)o->batch, (long long)b0, (long long)v->dims[0]);
        b0 = v->dims[0];
    }
    if (b0 <= 0) return mp_error(MP_ERR_USAGE, "--batch %lld: the model's inputs have no batch dim", (long long)o->batch);
    pl->export_batch = b0;
    pl->batch = o->batch;
    pl->batch_scaled = b0 != o->batch;
    return MP_OK;
}

/* A graph input that can be a causal mask the caller built: rank 3 or
 * more ([batch, heads, q, k], [batch, q, k]) or a square table ([q, k],
 * its last two dims the same symbol, or the same size where the file
 * declares none); a [batch, seq] padding mask cannot. */
static bool caller_mask(const mp_value *v) {
    if (v->rank >= 3 || v->decl_rank >= 3) return true;
    if (v->decl_rank == 2 && v->decl_dims) return v->decl_dims[0] == v->decl_dims[1];
    return v->rank == 2 && v->dims && v->dims[0] == v->dims[1];
}

/* Whether the model can generate token by token, which a KV cache is
 * for: one of its attentions is causal (the operator says so, or the mask
 * is built from Trilu, a comparison of positions or a lower-triangular
 * table), reads a KV cache the caller gives (a decoding step), or takes its
 * mask from an input the caller builds and can make causal (caller_mask). An encoder's attention (no mask, or a padding
 * mask expanded from a [batch, seq] input) cannot. */
static bool generates(const mp_patterns *P) {
    const mp_graph *g = P->g;
    int nv = g->n_values;
    uint8_t *seen = calloc((size_t)nv + 1, 1);
    int *queue = malloc(sizeof(int) * ((size_t)nv + 1));
    bool yes = !seen || !queue; /* out of memory: do not refuse */
    for (int a = 0; a < P->n_attn && !yes; a++) {
        const mp_pattn *at = &P->attn[a];
        if (mp_pattn_causal(at) || mp_pattn_past_kv(P, at)) {
            yes = true;
            break;
        }
        int head = 0, n = 0;
        if (at->mask_v >= 0 && at->mask_v < nv && !seen[at->mask_v]) seen[at->mask_v] = 1, queue[n++] = at->mask_v;
        while (head < n && !yes) {
            int v = queue[head++];
            const mp_value *val = &g->values[v];
            /* an input the caller builds, or a table whose values the file
             * does not hold (a meta model's causal buffer): either may be causal */
            bool unread = (val->flags & MP_VAL_INIT) && val->init && val->init->loc == MP_DATA_ABSENT;
            if ((val->flags & MP_VAL_INPUT || unread) && caller_mask(val)) yes = true;
            int p = val->producer;
            if (p < 0) continue;
            const mp_node *pn = &g->nodes[p];
            for (int i = 0; i < pn->n_in; i++)
                if (pn->in[i] >= 0 && pn->in[i] < nv && !seen[pn->in[i]]) seen[pn->in[i]] = 1, queue[n++] = pn->in[i];
        }
    }
    free(seen);
    free(queue);
    return yes;
}

/* A mixture of experts: the rows each expert finds are the data's; the
 * plan takes balanced routing (routing.c), which keeps every total linear
 * in the rows exact, and plans a profile counted with those rows. */
static mp_status plan_route(mp_tplan *pl) {
    mp_model *m = pl->p->m;
    const mp_graph *g = m->graph;
    mp_moe_summary sum;
    int n = mp_moe_routing(g, NULL, 0, &sum);
    if (n <= 0) return MP_OK;
    mp_moe_route *r = malloc(sizeof *r * (size_t)n);
    mp_shape_seen *seen = malloc(sizeof *seen * (size_t)n);
    mp_profile *q = NULL;
    mp_status st = r && seen ? MP_OK : mp_error(MP_ERR_NOMEM, "out of memory");
    if (!st) {
        mp_moe_routing(g, r, n, &sum);
        for (int i = 0; i < n; i++) seen[i] = (mp_shape_seen){.value = r[i].value, .rank = r[i].rank, .dims = r[i].dims};
        st = mp_profile_static(m, &q);
    }
    /* the values the inference could not size: after the finders' rows,
     * the nodes that read or write one are the routing's (the experts') */
    int nv = g->n_values, done = 0;
    bool *unk = !st ? calloc((size_t)nv + 1, 1) : NULL;
    if (!st && !unk) st = mp_error(MP_ERR_NOMEM, "out of memory");
    for (int v = 0; !st && v < nv; v++) unk[v] = g->values[v].producer >= 0 && !mp_shape_known(&g->values[v]);
    if (!st) st = mp_profile_take_shapes(q, seen, n, &done);
    for (int k = 0; !st && k < g->n_nodes; k++) {
        mp_node *e = &m->graph->nodes[k];
        bool routed = false;
        for (int i = 0; i < e->n_in && !routed; i++) routed = e->in[i] >= 0 && unk[e->in[i]];
        for (int o = 0; o < e->n_out && !routed; o++) routed = e->out[o] >= 0 && unk[e->out[o]];
        if (routed && !(e->cost.flags & MP_COST_UNKNOWN)) e->cost.flags |= MP_COST_RUN;
    }
    free(unk);
    free(r);
    free(seen);
    if (!st && q->total.unknown == 0) {
        pl->routed = q;
        pl->p = q;
        pl->moe = sum;
        /* the experts' parameters: those the nodes the routing sizes read
         * (through their views: a weight transposed for its MatMul) */
        bool *seen_w = calloc((size_t)nv + 1, 1);
        if (!seen_w) return mp_error(MP_ERR_NOMEM, "out of memory");
        for (int k = 0; k < g->n_nodes; k++) {
            const mp_node *e = &g->nodes[k];
            if (!(e->cost.flags & MP_COST_RUN)) continue;
            for (int i = 0; i < e->n_in; i++) {
                int w = mp_tplan_weight_of(g, e->in[i]);
                if (w < 0 || seen_w[w]) continue;
                seen_w[w] = true;
                pl->moe_expert_params += mp_tplan_numel(&g->values[w]);
            }
        }
        free(seen_w);
        return MP_OK;
    }
    /* not all of it: the plan says what is still unknown, from the
     * caller's profile and the model's static shapes */
    if (q) {
        mp_status dst = mp_profile_drop_shapes(q);
        mp_profile_free(q);
        if (!st) st = dst;
    }
    return st;
}

static mp_status plan_build(mp_tplan *pl) {
    const mp_tplan_options *o = &pl->o;
    mp_model *m = pl->p->m;
    mp_status st = mp_tplan_options_check(o);
    if (st) return st;
    if (pl->p->n_unresolved == 0 && pl->p->total.unknown > 0 && (st = plan_route(pl))) return st;
    if (pl->p->n_unresolved > 0) {
        int sym = pl->p->unresolved[0];
        return mp_error(MP_ERR_USAGE, "the plan needs every dim: give --dim %s=VALUE%s",
                        sym > 0 && sym < m->n_syms ? m->syms[sym].name : "NAME",
                        pl->p->n_unresolved > 1 ? " (and the other unresolved dims)" : "");
    }
    if (pl->p->total.unknown > 0) {
        /* every symbolic dim has a value: the unknown shapes come from the
         * data (a count NonZero or NonMaxSuppression finds when it runs);
         * name where the first one is made */
        const mp_graph *g = m->graph;
        for (int oi = 0; oi < g->n_nodes; oi++) {
            const mp_node *n = &g->nodes[g->order ? g->order[oi] : oi];
            if (!(n->cost.flags & MP_COST_UNKNOWN)) continue;
            for (int i = 0; i < n->n_in; i++) {
                const mp_value *v = n->in[i] >= 0 ? &g->values[n->in[i]] : NULL;
                if (!v || mp_shape_known(v) || v->producer < 0) continue;
                const mp_node *pn = &g->nodes[v->producer];
                if (!pn->desc)
                    return mp_error(MP_ERR_USAGE,
                                    "the plan needs every shape: %d nodes have unknown shapes, the first "
                                    "from node '%s' (%s%s%s), an operator modelprof does not know",
                                    pl->p->total.unknown, pn->name ? pn->name : "?", pn->domain, pn->domain[0] ? "." : "",
                                    pn->op);
                return mp_error(MP_ERR_USAGE,
                                "the plan needs every shape: %d nodes have shapes known only when the model "
                                "runs on data, the first from node '%s' (%s), whose output '%s' has a size "
                                "its input values decide (a detector's post-processing): plan the part of "
                                "the model before it (export the backbone alone)",
                                pl->p->total.unknown, pn->name ? pn->name : "?", pn->op, v->name ? v->name : "?");
            }
        }
        /* no input of unknown shape: a node whose own work the data sizes
         * (a Loop slicing by values it reads each pass: nn.EmbeddingBag's
         * bags at offsets given as an input; a Loop whose passes the data
         * count) */
        for (int oi = 0; oi < g->n_nodes; oi++) {
            const mp_node *n = &g->nodes[g->order ? g->order[oi] : oi];
            if (!(n->cost.flags & MP_COST_UNKNOWN)) continue;
            return mp_error(MP_ERR_USAGE,
                            "the plan needs every shape: %d node%s %s work sized only when the model runs on "
                            "data, the first node '%s' (%s)%s",
                            pl->p->total.unknown, pl->p->total.unknown == 1 ? "" : "s",
                            pl->p->total.unknown == 1 ? "has" : "have", n->name ? n->name : "?", n->op,
                            n->n_sub > 0 ? ", whose body's sizes change from one pass to the next (nn.EmbeddingBag's "
                                           "bags at offsets given as an input, passes the data count)" : "");
        }
        return mp_error(MP_ERR_USAGE, "the plan needs every dim: %d nodes have shapes that depend on "
                        "unknown dims (give --dim or --input)", pl->p->total.unknown);
    }
    pl->dp = o->dp;
    pl->tp = o->tp;
    pl->pp = o->pp;
    pl->zero = o->fsdp ? 3 : o->zero;
    pl->m = o->micro_batches > 0 ? o->micro_batches : (o->pp > 1 ? 4 * o->pp : 1);
    pl->gpus = o->gpus > 0 ? o->gpus : pl->dp * pl->tp * pl->pp;
    /* the default precision is the export's: a bf16 or fp16 export trains
     * (or infers) in that type, weights, gradients, optimizer states and
     * activations alike */
    pl->model_dt = mp_tplan_model_dtype(m->graph);
    if (o->precision == MP_PREC_AUTO) {
        pl->precision_auto = true;
        pl->o.precision = pl->model_dt == MP_DT_BFLOAT16 ? MP_PREC_BF16
                          : pl->model_dt == MP_DT_FLOAT16 ? MP_PREC_FP16 : MP_PREC_FP32;
    }
    if ((st = pick_gpu(pl))) return st;
    if ((st = static_batch(pl))) return st;

    if (o->loss_form == MP_LOSS_NONE) pl->o.loss = 0;
    if (o->host_op_s < 0) pl->o.host_op_s = (o->inference ? MP_HOST_US_INFER : MP_HOST_US_TRAIN) * 1e-6;
    if ((st = mp_tplan_graph(pl))) return st;
    if (o->inference && o->kv_cache && (!pl->pats || pl->pats->n_attn == 0))
        return mp_error(MP_ERR_USAGE, "--kv-cache: the model has no attention (the pattern layer found none), "
                        "so generation keeps no KV cache");
    if (o->inference && o->kv_cache && !generates(pl->pats))
        return mp_error(MP_ERR_USAGE, "--kv-cache: the model's attention is bidirectional (no causal mask in any of "
                        "its %d attentions, none given by an input): an encoder reads its whole input at once and "
                        "generates no tokens, so it keeps no KV cache", pl->pats->n_attn);
    mp_tplan_workspace(pl);
    mp_tplan_optimizer_ops(pl);

    /* layouts that cannot be planned */
    if (pl->tp > 1) {
        if (pl->routed)
            return mp_error(MP_ERR_USAGE, "--tp %d: the model is a mixture of experts (%lld experts, top %lld), whose "
                            "experts Megatron-LM splits by expert parallelism or each over the tensor-parallel "
                            "ranks; neither is planned: plan it with --tp 1 (data parallelism, ZeRO, FSDP, pp)",
                            pl->tp, (long long)pl->moe.experts, (long long)pl->moe.top_k);
        if (pl->split_nodes == 0)
            return mp_error(MP_ERR_USAGE, "--tp %d: the model has no repeated blocks with weight "
                            "products to split", pl->tp);
        if (pl->heads > 0 && pl->heads % pl->tp != 0)
            return mp_error(MP_ERR_USAGE, "--tp %d does not divide the %d attention heads", pl->tp, pl->heads);
    }
    if (pl->pp > 1 && pl->pp > pl->n_repeats)
        return mp_error(MP_ERR_USAGE, "--pp %d is larger than the model's %d layers (repeated blocks)",
                        pl->pp, pl->n_repeats);
    if (o->checkpointing && pl->n_repeats == 0)
        return mp_error(MP_ERR_USAGE, "--checkpointing: the model has no repeated blocks to checkpoint");

    if ((st = mp_tplan_layouts(pl))) return st;
    if (pl->ft && !o->inference) {
        /* fine-tuning's host figures: the worst stage's (finetune.c) */
        const mp_pstage *ws = &pl->stages[pl->worst];
        pl->host_bytes = ws->host_bytes;
        pl->link_bytes = ws->link_bytes;
        if (o->offload) {
            pl->link_s = pl->host_link > 0 ? ws->link_bytes / pl->host_link : 0;
            pl->cpu_opt_s = (double)ws->trainable / (pl->zero >= 1 ? pl->dp : 1) / pl->cpu_adam;
        }
    }
    if (o->inference) {
        memset(&pl->mem, 0, sizeof pl->mem);
        /* the stage holding the most parameters (after tensor parallelism) */
        uint64_t most = 0;
        for (int s = 0; s < pl->pp; s++)
            if (pl->stages[s].params > most) most = pl->stages[s].params;
        pl->mem.weights_bytes = pl->params ? (uint64_t)((double)pl->infer_weights * (double)most / (double)pl->params)
                                           : 0;
        pl->mem.activations_bytes = pl->infer_acts;
        pl->mem.reserve_bytes = (uint64_t)(o->reserve_gb * 1e9);
        /* the moment of the forward's peak: weights, inputs, the live
         * activations (graph.c's walk) and one cuBLAS workspace (peak.c) */
        pl->mem.peak_bytes = pl->mem.weights_bytes + pl->infer_acts + pl->infer_cache + pl->infer_inputs +
                             pl->workspace_bytes;
        /* generation keeps K and V of every token of the context (split by tp) */
        if (o->kv_cache) {
            /* a decoding step's past inputs are that cache: counted once */
            uint64_t past = pl->kv_past_inputs < pl->infer_inputs ? pl->kv_past_inputs : pl->infer_inputs;
            pl->mem.peak_bytes += pl->kv_bytes / (uint64_t)pl->tp;
            pl->mem.peak_bytes -= past < pl->mem.peak_bytes ? past : pl->mem.peak_bytes;
        }
        double t = 0, h = 0;
        double qt = 0; /* through the launch queue (layout.c) */
        for (int s = 0; s < pl->pp; s++)
            t += pl->stages[s].fwd_s, h += pl->stages[s].host_mb_s, qt += pl->stages[s].queue_fwd_s;
        pl->device_s = t;
        pl->host_s = h;
        pl->host_bound = h > t;
        if (h > t) t = h;
        if (qt > t) t = qt;
        pl->step_s = t;
        pl->compute_s = t;
        pl->bubble_s = pl->optimizer_s = pl->dp_comm_s = 0;
    }
    /* the whole model's work per step */
    for (int k = 0; k < pl->n_nodes; k++) {
        pl->fwd_flops += pl->nodes[k].fwd_flops;
        pl->bwd_flops += pl->nodes[k].bwd_flops - pl->nodes[k].bwd_recompute; /* model FLOPs */
        if (o->checkpointing && pl->nodes[k].repeat >= 0) pl->recompute_flops += pl->nodes[k].fwd_flops;
    }
    double mbs = (double)pl->m * pl->dp;
    pl->fwd_flops = (uint64_t)((double)pl->fwd_flops * mbs);
    pl->bwd_flops = o->inference ? 0 : (uint64_t)((double)pl->bwd_flops * mbs);
    pl->recompute_flops = (uint64_t)((double)pl->recompute_flops * mbs);
    pl->tokens_per_step = (double)pl->tokens_per_mb * mbs;
    pl->samples_per_step = (double)pl->samples_per_mb * mbs;
    double per = o->inference ? 2 : o->checkpointing ? 8 : 6;
    if (pl->ft && !o->inference && pl->params > 0 && pl->trainable_params < pl->params)
        /* frozen weights: the backward's dX (2 N) but a weight gradient (2 N)
         * for the trainable only: (4 + 2 T / N) N D, + 2 N D recomputed */
        per = 4 + 2 * (double)pl->trainable_params / (double)pl->params + (o->checkpointing ? 2 : 0);
    /* a mixture of experts: a token meets k of the E experts */
    pl->active_params = (double)pl->params;
    if (pl->routed && pl->moe.experts > 0 && pl->moe_expert_params <= pl->params)
        pl->active_params -= (double)pl->moe_expert_params * (1 - (double)pl->moe.top_k / (double)pl->moe.experts);
    pl->flops_6nd = pl->has_tokens ? per * pl->active_params * pl->tokens_per_step : -1;
    int gpus_run = pl->dp * pl->tp * pl->pp;
    double model_flops = (double)pl->fwd_flops + (double)pl->bwd_flops;
    pl->mfu_implied = pl->step_s > 0 && pl->peak_low_flops > 0
                          ? model_flops / (pl->step_s * gpus_run * pl->peak_low_flops)
                          : -1;
    pl->train_s = pl->train_6nd_s = -1;
    double steps = -1;
    if (o->tokens > 0 && pl->tokens_per_step > 0) steps = o->tokens / pl->tokens_per_step;
    if (o->samples > 0 && pl->samples_per_step > 0) steps = o->samples / pl->samples_per_step;
    if (steps > 0 && pl->step_s > 0) pl->train_s = steps * pl->step_s * gpus_run / pl->gpus;
    if (pl->peak_low_flops > 0) {
        double total = -1;
        if (o->tokens > 0) total = per * pl->active_params * o->tokens;
        else if (steps > 0) total = steps * (model_flops + (double)pl->recompute_flops);
        if (total > 0) pl->train_6nd_s = total / (pl->gpus * pl->peak_low_flops * o->mfu);
    }
    if ((st = mp_tplan_ft_answer(pl))) return st;
    pl->ds_zero2 = mp_tplan_deepspeed_zero2(pl->params, pl->dp);
    pl->ds_zero3 = mp_tplan_deepspeed_zero3(pl->params, pl->largest_layer, pl->dp);

    return MP_OK;
}


mp_status mp_tplan_create(const mp_profile *p, const mp_tplan_options *o, mp_tplan **out) {
    *out = NULL;
    if (!p || !o) return mp_error(MP_ERR_USAGE, "no profile or options");
    mp_tplan_options opts;
    tplan_defaults(&opts);
    mp_status st = mp_opts_take(&opts, sizeof opts, o, TPLAN_OPTIONS_V1, "mp_tplan_options");
    if (st) return st;
    mp_tplan *pl = calloc(1, sizeof *pl);
    if (!pl) return mp_error(MP_ERR_NOMEM, "out of memory");
    mp_arena_init(&pl->arena);
    pl->p = p;
    pl->o = opts;
    st = plan_build(pl);
    if (st) {
        mp_tplan_free(pl);
        return st;
    }
    *out = pl;
    return MP_OK;
}

void mp_tplan_free(mp_tplan *pl) {
    if (!pl) return;
    if (pl->routed) { /* the model's static shapes back, for the caller's profile */
        mp_profile_drop_shapes(pl->routed);
        mp_profile_free(pl->routed);
    }
    mp_arena_free(&pl->arena);
    free(pl);
}

mp_status mp_tplan_memory(const mp_tplan *pl, int stage, mp_tplan_mem *out) {
    if (!pl || !out) return mp_error(MP_ERR_USAGE, "no plan");
    if (stage < -1 || stage >= pl->pp) return mp_error(MP_ERR_USAGE, "stage %d: the plan has %d", stage, pl->pp);
    *out = stage < 0 ? pl->mem : pl->stages[stage].mem;
    return MP_OK;
}

double mp_tplan_step_time(const mp_tplan *pl) {
    return pl && pl->have_gpu ? pl->step_s : -1;
}
