/* Short steps: the host issuing kernels (docs/PLANNING.md "host-bound
 * steps"). Eager PyTorch dispatches every operator from the host: Python,
 * the binding, the autograd layer (recording a node in the forward), the
 * dispatcher, the backend's setup and the driver's launch, before the
 * kernel can run; the device runs kernels as they arrive. A step of many
 * small kernels finishes when the host has issued the last one, whatever
 * the device could do: its time is at least the larger of the host's and
 * the device's, and layout.c runs the two through the launch queue (a
 * kernel starts when it is issued and the one before it is done), which
 * adds what neither total shows when they take turns. The host's cost per
 * operator is an assumption the user sets (--host-us-per-op; by default
 * MP_HOST_US_TRAIN, 15 us, in a training step and MP_HOST_US_INFER, 11 us,
 * in inference: what a chain of small operators took an operator on an
 * H200 host under PyTorch 2.11, tools/measure_gpu.py; within the 5 to 25 us
 * that jiahuanglin.xyz "From PyTorch op to kernel launch" (gpu_kernel_
 * serving lesson 18) gives the dispatch chain: Python ~1 us, pybind11
 * ~1 us, autograd 1-3 us, dispatcher 1-2 us, backend 1-5 us,
 * cudaLaunchKernel 1-3 us).
 *
 * What is counted, per micro-batch, from the graph (graph.c sets per node):
 * one operator per node that runs in PyTorch (views and casts included:
 * they are dispatched too, if launching nothing), ATen's decomposition of
 * a Linear and of a batched product (graph.c's dispatch_ops), one per
 * pattern run as one operator, autocast's casts (one each), in the
 * backward one autograd node per node passing a gradient (one operator per
 * gradient it computes, at least one), the gradient accumulations, one
 * AccumulateGrad per trainable tensor (layout.c), the checkpointed blocks'
 * forward again, the loss's operators (loss.c). Per step, the optimizer's
 * (below). tools/host_ops.py checks the count against TorchDispatchMode. */
#include "plan/plan.h"

#include <stdbool.h>
#include <string.h>

/* PyTorch's multi_tensor_apply (aten/src/ATen/native/cuda/
 * MultiTensorApply.cuh): one launch holds at most depth_to_max_tensors
 * [depth - 1] tensors (110, 64, 48, 36, 30 for lists of depth 1 to 5) and
 * 320 blocks of 65,536 elements (kChunkSize); a foreach operator launches
 * as many kernels as it takes to cover its lists. */
static uint64_t mta_launches(int depth, uint64_t tensors, uint64_t chunks) {
    static const int max_t[5] = {110, 64, 48, 36, 30};
    if (depth < 1) depth = 1;
    if (depth > 5) depth = 5;
    if (!tensors) return 0;
    uint64_t a = (tensors + (uint64_t)max_t[depth - 1] - 1) / (uint64_t)max_t[depth - 1];
    uint64_t b = (chunks + 319) / 320;
    return a > b ? a : b;
}

/* The optimizer step's operators and kernels, per step (one rank):
 *  - foreach (torch.optim's default on CUDA, _multi_tensor_adam /
 *    _multi_tensor_sgd): AdamW runs _foreach_mul_ (weight decay), lerp_,
 *    mul_, addcmul_, sqrt, div_, add_ and addcdiv_ (list depths 1, 2, 1,
 *    3, 2, 1, 1, 3), plus a step-count add on CPU tensors; Adam the same
 *    without the weight decay; SGD with momentum mul_, add_, add_ (1, 2,
 *    2); SGD add_ (2);
 *  - fused (fused=True): one _fused_adamw_ / _fused_sgd_ over lists of
 *    depth 4;
 *  - for-loop (foreach=False): per parameter tensor 8 operators for
 *    Adam(W) (mul_, lerp_, mul_, addcmul_, sqrt, div_, add_, addcdiv_), 3
 *    for SGD with momentum, 1 for SGD.
 * Adafactor is counted per parameter (its reference implementation loops).
 * Under ZeRO, DeepSpeed steps flat partitions: one tensor per group. */
void mp_tplan_optimizer_ops(mp_tplan *pl) {
    const mp_tplan_options *o = &pl->o;
    const mp_graph *g = pl->p->m->graph;
    uint64_t T = 0, chunks = 0;
    for (int v = 0; v < g->n_values; v++) {
        const mp_value *val = &g->values[v];
        if (!(val->flags & MP_VAL_PARAM)) continue;
        if (pl->ptrain && !pl->ptrain[v]) continue; /* frozen: not stepped (finetune.c) */
        T++;
        chunks += (mp_tplan_numel(val) + 65535) / 65536;
    }
    /* the declared parameters the dynamo exporter merged or folded away
     * (the profile's role_params): tensors of their own in PyTorch */
    for (int r = 0; pl->p->role_params && r < pl->p->params_by_role_n; r++) {
        if (!mp_tplan_role_trains(pl, r)) continue;
        T++;
        chunks += (pl->p->role_params[r].numel + 65535) / 65536;
    }
    for (int k = 0; pl->lora_params && k < pl->n_nodes; k++) /* LoRA's A and B */
        if (pl->nodes[k].lora_a) {
            T += 2;
            chunks += (pl->nodes[k].lora_a + 65535) / 65536 + (pl->nodes[k].lora_b + 65535) / 65536;
        }
    if (pl->zero >= 1 && T) {
        T = 1;
        chunks = (chunks + (uint64_t)pl->dp - 1) / (uint64_t)pl->dp;
    }
    pl->opt_tensors = T;
    uint64_t launches = 0, ops = 0;
    static const int adamw_d[] = {1, 2, 1, 3, 2, 1, 1, 3}, sgdm_d[] = {1, 2, 2}, sgd_d[] = {2};
    const int *d = NULL;
    int nd = 0, per_param = 0;
    switch (o->optimizer) {
    case MP_OPT_ADAMW: d = adamw_d, nd = 8, per_param = 8; break;
    case MP_OPT_ADAM: d = adamw_d + 1, nd = 7, per_param = 7; break;
    case MP_OPT_SGD_MOMENTUM: d = sgdm_d, nd = 3, per_param = 3; break;
    case MP_OPT_SGD: d = sgd_d, nd = 1, per_param = 1; break;
    case MP_OPT_ADAFACTOR: per_param = 12; break;
    /* bitsandbytes steps parameter by parameter (Optimizer8bit.step:
     * update_step per tensor), one kernel each */
    case MP_OPT_ADAMW8BIT:
    case MP_OPT_PAGED_ADAMW8BIT:
    case MP_OPT_LION: per_param = 1; break;
    default: break;
    }
    if (o->optimizer == MP_OPT_NONE || !T) {
        /* nothing */
    } else if (o->optimizer == MP_OPT_ADAFACTOR || o->optimizer_impl == MP_OPTIMPL_FOR_LOOP || !d) {
        launches = (uint64_t)per_param * T;
        ops = launches;
    } else if (o->optimizer_impl == MP_OPTIMPL_FUSED) {
        launches = mta_launches(4, T, chunks);
        ops = launches + 1;
    } else {
        for (int i = 0; i < nd; i++) launches += mta_launches(d[i], T, chunks);
        ops = launches + 1; /* and the step counts' add on the CPU */
    }
    /* Before the step (docs/PLANNING.md "loss scaling and clipping").
     * fp16-mixed scales its loss, with PyTorch's GradScaler
     * (torch/amp/grad_scaler.py; FSDP's ShardedGradScaler runs the same on
     * the shard): per micro-batch scale(loss) is `outputs *
     * scale.to(device)` (2 operators, 1 kernel) and the product's backward
     * (1, 1); per step unscale_ takes the scale's reciprocal in double
     * (`double`, `reciprocal`, `float`: 3, 3), fills found_inf (`full`: 1,
     * 1), copies both to the device's replicator (2, 2) and runs
     * `_amp_foreach_non_finite_check_and_unscale_` over the gradients (1
     * operator, multi_tensor_apply's launches of a list of depth 1: a pass
     * reading and writing them); step() reads found_inf (`item`: 1, a
     * device-to-host copy waiting for the backward); update() its `to` (1,
     * none) and `_amp_update_scale_` (1, 1). Under a ZeRO stage DeepSpeed's
     * loss scaler instead takes the partition's gradient norm (an inf or NaN
     * is the overflow: a pass reading them) and unscales, with the clip
     * folded into one combined scale, in place (a pass reading and writing):
     * counted as clip_grad_norm_'s operators over its one flat partition.
     * Clipping, torch.nn.utils.clip_grad_norm_ (foreach): `_foreach_norm`
     * (1 operator, depth-1 launches and its cleanup kernel: a pass reading
     * the gradients), each norm's `to` (T operators, no kernel), `stack` and
     * `vector_norm` (2, 2), max_norm / (total + 1e-6) (`add`,
     * `reciprocal`, `mul`: 3, 3), `clamp` (1, 1), `to` (1, none) and
     * `_foreach_mul_` (1, depth-1 launches: a pass reading and writing). */
    pl->loss_scaler = MP_SCALER_NONE;
    pl->grad_passes = 0;
    if (o->optimizer != MP_OPT_NONE && T && !o->inference) {
        uint64_t l1 = mta_launches(1, T, chunks);
        bool clip = o->clip_grad_norm > 0;
        if (o->precision == MP_PREC_FP16_MIXED)
            pl->loss_scaler = pl->zero >= 1 && !o->fsdp ? MP_SCALER_DEEPSPEED : MP_SCALER_TORCH;
        if (pl->loss_scaler == MP_SCALER_TORCH) {
            ops += 3 * (uint64_t)pl->m + 10;
            launches += 2 * (uint64_t)pl->m + 8 + l1;
            pl->grad_passes += 2;
        }
        if (clip || pl->loss_scaler == MP_SCALER_DEEPSPEED) {
            ops += T + 9;
            launches += 2 * l1 + 8;
            pl->grad_passes += 3;
        }
    }
    pl->opt_launches = launches;
    pl->opt_host_ops = ops;
    pl->opt_host_s = (double)ops * o->host_op_s;
}
