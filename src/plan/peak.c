/* The peak as the allocator sees it (docs/PLANNING.md "the peak as a
 * moment"): torch.cuda.max_memory_allocated is the highest count of bytes
 * held at one moment, so the plan walks the step in the order PyTorch
 * allocates and frees and keeps the highest moment with what is live then,
 * by category (not a sum of each category's own maximum).
 *
 * From the second step on (the measured steps), between steps the GPU
 * holds the weights, the optimizer states (created lazily in the first
 * step) and fp32 master weights where there are any. Then:
 *  - forward: every operator's kept tensors accumulate; at its end the
 *    loss runs (loss.c): the logits, their fp32 copy and the
 *    log-probabilities are live together;
 *  - backward: it starts at the loss (its two rows x classes gradients
 *    beside the log-probabilities), then runs the nodes in reverse order.
 *    A node's kept tensors are freed once its backward ran (autograd
 *    releases saved variables after use without retain_graph). With
 *    zero_grad(set_to_none=True), no accumulation and no ZeRO (one rank,
 *    or DDP, whose buckets are a copy kept beside: mp_tplan_ddp_buckets),
 *    each parameter's gradient is born when the first node using it (in
 *    reverse order: the last in the forward, e.g. a tied LM head) runs its
 *    backward (AccumulateGrad steals that buffer); otherwise the gradients
 *    are resident (accumulated micro-batches, views of DDP's buckets,
 *    ZeRO's partitions). Under checkpointing a block's kept set comes back when
 *    the backward reaches it (the recompute) and goes as its nodes run;
 *  - optimizer: the gradients (all), the states and the foreach
 *    implementation's temporaries: PyTorch's _multi_tensor_adam computes
 *    exp_avg_sq.sqrt() as a new list of tensors (one state's worth) before
 *    addcdiv_; the fused and per-parameter implementations hold one
 *    parameter's worth at most.
 * Beside these, the allocator's own counts:
 *  - cuBLAS workspaces: PyTorch gives each (cuBLAS handle, stream) a
 *    workspace from the caching allocator (aten/src/ATen/cuda/
 *    CublasHandlePool.cpp, getChosenWorkspaceSize: 4096 KiB x 8 = 32 MiB
 *    on sm90 and later, 4096 KiB x 2 + 16 KiB x 8 before; cuBLASLt shares
 *    it by default). Handles are per thread: the forward's (the Python
 *    thread) and the backward's (autograd's device thread), so training
 *    holds two and inference one; they count in max_memory_allocated;
 *  - rounding: every block is a multiple of 512 bytes
 *    (c10/cuda/CUDACachingAllocator.cpp, kMinBlockSize); for the states
 *    (one tensor per parameter tensor each) the rounding is counted here,
 *    for activations it is below a part in a thousand and left out. The
 *    2 MiB / 20 MiB segment sizes are reserved memory, not allocated: they
 *    change memory_reserved, not the peak counted here. */
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

static const char *const moment_names[] = {"the end of the forward (the loss running)",
                                           "the loss's backward",
                                           "the backward",
                                           "the optimizer step",
                                           "the forward"};

const char *mp_tplan_moment_name(int when) {
    return when >= 0 && when <= MP_MOMENT_INFERENCE ? moment_names[when] : "?";
}

static uint64_t r512(uint64_t b) { return (b + 511) / 512 * 512; }

/* The repeated block a parameter belongs to by its name (its module's
 * dotted path, "model.layers.3." for "model.layers.3.mlp.up.weight"): an
 * export's structure can hand a block's weight to a node outside it (the
 * TorchScript exporter merges equal initializers behind an Identity); -2
 * when no block's path prefixes the name. */
static int block_of_name(const mp_tplan *pl, const char *name) {
    const mp_model *mm = pl->p->m;
    if (!name || !pl->repeats) return -2;
    for (int b = 0; b < pl->n_repeats; b++) {
        int id = pl->repeats[b];
        const char *path = id >= 0 && id < mm->n_modules ? mm->modules[id].path : NULL;
        size_t n = path ? strlen(path) : 0;
        if (n && strncmp(name, path, n) == 0 && name[n] == '.') return b;
    }
    return -2;
}

/* With set_to_none and no accumulation, AccumulateGrad allocates each
 * gradient in the backward: on one rank, and under DDP when the buckets
 * are a copy (its default; the reducer copies each gradient in and the
 * result back). Views of DDP's buckets, ZeRO's partitions and accumulated
 * micro-batches are resident. */
bool mp_tplan_grads_born(const mp_tplan_options *o, int dp, int m, int zero) {
    return (dp == 1 || !o->ddp_bucket_view) && m == 1 && zero == 0 && !o->fsdp &&
           o->zero_grad != MP_ZEROGRAD_IN_PLACE;
}

/* DistributedDataParallel(gradient_as_bucket_view=False), PyTorch's
 * default: "the saved memory size will be equal to the total gradients
 * size" when it is True (torch.nn.parallel.DistributedDataParallel's
 * documentation), so without it the buckets are a gradient's worth more,
 * allocated when the model is wrapped */
uint64_t mp_tplan_ddp_buckets(const mp_tplan_options *o, int dp, int zero, uint64_t grads_bytes) {
    return dp > 1 && zero == 0 && !o->fsdp && !o->ddp_bucket_view ? grads_bytes : 0;
}

/* One cuBLAS workspace: PyTorch's default for the GPU's architecture. */
void mp_tplan_workspace(mp_tplan *pl) {
    const char *id = pl->gpu ? pl->gpu->id : NULL;
    bool sm90 = id && (strncmp(id, "h100", 4) == 0 || strncmp(id, "h200", 4) == 0 || strncmp(id, "b200", 4) == 0 ||
                       strncmp(id, "gh200", 5) == 0 || strncmp(id, "b100", 4) == 0);
    /* no GPU named: the architecture, hence the size, is unknown (not counted) */
    pl->workspace_bytes = !pl->gpu ? 0 : sm90 ? 4096u * 8u * 1024u : 4096u * 2u * 1024u + 16u * 8u * 1024u;
}

static void total(mp_tplan_moment *m) {
    m->total = m->weights + m->master + m->optimizer + m->grads + m->buckets + m->gathered + m->activations +
               m->loss + m->recomputed + m->cast_cache + m->transient + m->workspace + m->rounding;
}

static void keep_max(mp_tplan_moment *best, const mp_tplan_moment *m) {
    if (m->total > best->total) *best = *m;
}

void mp_tplan_peak_stage(const mp_tplan *pl, const mp_peak_in *in, mp_tplan_moment *at) {
    const mp_tplan_options *o = &pl->o;
    const mp_graph *g = pl->p->m->graph;
    const mp_tplan_mem *mem = in->mem;
    uint64_t tp = (uint64_t)in->tp;
    mp_tplan_moment base;
    memset(&base, 0, sizeof base);
    base.node = -1;
    base.weights = mem->weights_bytes;
    base.master = mem->master_weights_bytes;
    base.optimizer = mem->optimizer_bytes;
    base.workspace = 2 * pl->workspace_bytes;
    base.buckets = in->buckets;
    uint64_t resident_grads = in->grads_born ? 0 : mem->grads_bytes;

    /* the stage's parameters once each: their gradients' birth and the
     * states' 512-byte rounding; under ZeRO-3 (FSDP) each unit's elements:
     * unit[0] the root (what lies outside the repeated blocks), unit[1 + b]
     * block b (FSDP's auto-wrap of the transformer block) */
    uint8_t *seen = calloc((size_t)g->n_values + 1, 1);
    double *unit = in->zero >= 3 && in->dp > 1 ? calloc((size_t)pl->n_repeats + 1, sizeof(double)) : NULL;
    uint64_t round = 0;
    double largest = 0; /* the largest parameter tensor's elements (after tp) */
    double zdiv_w = in->zero >= 3 ? in->dp : 1, zdiv_g = in->zero >= 2 ? in->dp : 1, zdiv_o = in->zero >= 1 ? in->dp : 1;
    for (int k = in->first; seen && k <= in->last; k++) {
        const mp_pnode *pn = &pl->nodes[k];
        /* its parameter inputs, then the declared parameters the graph
         * does not hold that it took first (r >= 0) */
        for (int i = 0; i < pn->n_params + pn->n_roles; i++) {
            int v = -1, r = -1;
            double e;
            const char *name;
            if (i < pn->n_params) {
                v = pl->pparams[pn->first_param + i];
                if (seen[v]) continue;
                seen[v] = 1;
                e = (double)mp_tplan_numel(&g->values[v]) / (pl->param_split[v] ? (double)tp : 1.0);
                name = g->values[v].name;
            } else {
                r = pl->proles[pn->first_role + i - pn->n_params];
                e = (double)pl->p->role_params[r].numel / (pl->role_split[r] ? (double)tp : 1.0);
                name = pl->p->role_params[r].name;
            }
            if (e > largest) largest = e;
            if (unit) {
                int b = block_of_name(pl, name);
                if (b == -2) b = pn->repeat >= 0 && pn->repeat < pl->n_repeats ? pn->repeat : -1;
                unit[b + 1] += e;
            }
            /* each state a tensor of its own, rounded up to 512 bytes */
            uint64_t wb = (uint64_t)(e * (o->precision == MP_PREC_FP32 || mp_tplan_mixed(o->precision) ? 4 : 2) / zdiv_w);
            uint64_t gb = (uint64_t)(e * in->grad_per_param / zdiv_g);
            uint64_t ob = (uint64_t)(e * in->opt_per_param / zdiv_o);
            round += r512(wb) - wb;
            round += r512(gb) - gb;
            if (in->opt_per_param > 0) round += (r512(ob / 2) - ob / 2) * 2; /* two states for Adam, one for momentum */
        }
    }
    base.rounding = round;

    mp_tplan_moment best = base, m;
    total(&best);
    uint64_t acts_all = mem->activations_bytes;       /* every micro-batch in flight */
    uint64_t per_mb = in->in_flight > 1 ? acts_all / (uint64_t)in->in_flight : acts_all;
    uint64_t others = acts_all - per_mb;
    const mp_tplan_loss *L = &pl->loss;
    bool loss_here = in->last_stage && o->loss && !o->inference && L->form != MP_LOSS_NONE;
    uint64_t ldiv = pl->vocab_split ? tp : 1;
    uint64_t lkept = loss_here ? L->kept / ldiv : 0;
    uint64_t graph_acts = per_mb > lkept ? per_mb - lkept : 0; /* the loss's kept bytes are in per_mb */

    /* ZeRO-3 and FSDP (FULL_SHARD, PyTorch's defaults) gather a unit's
     * parameters before it runs and free them after; the root (the
     * embedding, the final norm, the LM head) stays gathered from the
     * forward's start to the backward's end (FSDP does not reshard the root
     * after the forward), and its gradient, one flat tensor, is ready for
     * the reduce-scatter only once the embedding's is (the backward's end).
     * In the backward a block is gathered again with the next one
     * prefetched (BACKWARD_PRE), and its unsharded gradient lives until its
     * reduce-scatter. */
    double wpp = in->weight_per_param, gpp = in->grad_per_param;
    uint64_t root_w = unit ? (uint64_t)(unit[0] * wpp) : 0, root_g = unit ? (uint64_t)(unit[0] * gpp) : 0;
    /* the end of the forward: the loss running; the last step's gradients
     * are still there when the loop frees them after the forward */
    m = base;
    m.grads = in->grads_in_forward ? mem->grads_bytes : resident_grads;
    m.activations = others + graph_acts;
    m.loss = lkept + (loss_here ? L->fwd_transient / ldiv : 0);
    /* autocast caches the low-precision copy of every fp32 parameter it
     * casts (aten/src/ATen/autocast_mode.cpp, cached_cast: a leaf that
     * requires grad, grad mode or not) until the outermost autocast region
     * exits (clear_autocast_cache), after the loss: the checkpointed
     * blocks' forward keeps nothing for the backward, but their weights'
     * copies stay in the cache to the forward's end */
    m.cast_cache = in->cast_cached;
    m.gathered = root_w; /* the last block resharded, the LM head at work */
    m.when = MP_MOMENT_FORWARD;
    total(&m);
    keep_max(&best, &m);
    /* the peak had the loop freed the gradients before the forward: this
     * moment without them, or any later one */
    uint64_t alt = in->grads_in_forward ? m.total - m.grads : 0;
    /* the loss's backward */
    m.cast_cache = 0; /* the autocast region has exited: the cache is cleared */
    m.gathered = root_w;
    if (loss_here) {
        m.grads = resident_grads; /* zero_grad ran before backward() */
        m.loss = lkept + L->bwd_transient / ldiv;
        m.when = MP_MOMENT_LOSS_BACKWARD;
        total(&m);
        keep_max(&best, &m);
        if (m.total > alt) alt = m.total;
    }
    /* the backward, node by node in reverse */
    memset(seen, 0, seen ? (size_t)g->n_values + 1 : 0);
    uint64_t live = graph_acts, grads = resident_grads, rec = 0;
    int blk = -2;
    /* each checkpointed block's own kept set (what its recompute brings
     * back); folded nodes inside a block have no block and keep nothing */
    uint64_t *block_set = o->checkpointing && pl->n_repeats > 0 ? calloc((size_t)pl->n_repeats, sizeof(uint64_t)) : NULL;
    for (int k = in->first; block_set && k <= in->last; k++) {
        const mp_pnode *pn = &pl->nodes[k];
        if (pn->repeat < 0 || pn->repeat >= pl->n_repeats) continue;
        uint64_t rdiv = in->rdiv;
        block_set[pn->repeat] += mp_tplan_node_ckpt(pn, rdiv, tp, in->zero >= 1);
    }
    for (int k = in->last; k >= in->first; k--) {
        const mp_pnode *pn = &pl->nodes[k];
        uint64_t rdiv = pn->repeat >= 0 ? in->rdiv : 1;
        if (block_set && pn->repeat >= 0 && pn->repeat < pl->n_repeats && pn->repeat != blk) {
            /* the recompute: the block's own kept set comes back */
            blk = pn->repeat;
            rec = block_set[blk];
        }
        uint64_t tmp = pn->split ? pn->temp / tp : pn->temp / rdiv;
        if (pn->bwd_flops || pn->n_bwd_kernels) {
            m = base;
            m.grads = grads;
            m.activations = others + live;
            m.recomputed = rec;
            m.transient = tmp;
            if (unit) {
                int b = pn->repeat >= 0 && pn->repeat < pl->n_repeats ? pn->repeat : -1;
                uint64_t ub = b >= 0 ? (uint64_t)(unit[b + 1] * wpp) : 0;
                uint64_t next = b > 0 ? (uint64_t)(unit[b] * wpp) : 0; /* block b - 1, prefetched */
                uint64_t ug = b >= 0 ? (uint64_t)(unit[b + 1] * gpp) : 0;
                m.gathered = root_w + root_g + ub + next + ug;
            }
            m.when = MP_MOMENT_BACKWARD;
            m.node = k;
            total(&m);
            keep_max(&best, &m);
            if (m.total > alt) alt = m.total;
        }
        /* 16-bit weights under ZeRO: no autocast copies were kept (layout.c) */
        uint64_t casts = in->zero >= 1 ? mp_tplan_node_casts(pn, rdiv, tp) : 0;
        uint64_t freed = pn->saved_rep / rdiv + pn->saved_split / tp;
        if (!(o->checkpointing && pn->repeat >= 0)) freed = freed > casts ? freed - casts : 0;
        live = live > freed ? live - freed : 0;
        if (o->checkpointing && pn->repeat >= 0) {
            uint64_t r = mp_tplan_node_ckpt(pn, rdiv, tp, in->zero >= 1);
            rec = rec > r ? rec - r : 0;
        }
        if (in->grads_born && seen)
            for (int i = 0; i < pn->n_params; i++) {
                int v = pl->pparams[pn->first_param + i];
                if (seen[v]) continue;
                seen[v] = 1;
                double e = (double)mp_tplan_numel(&g->values[v]) / (pl->param_split[v] ? (double)tp : 1.0);
                grads += (uint64_t)(e * in->grad_per_param / zdiv_g);
            }
        if (in->grads_born)
            for (int i = 0; i < pn->n_roles; i++) {
                int r = pl->proles[pn->first_role + i];
                double e = (double)pl->p->role_params[r].numel / (pl->role_split[r] ? (double)tp : 1.0);
                grads += (uint64_t)(e * in->grad_per_param / zdiv_g);
            }
    }
    /* the optimizer step */
    if (o->optimizer != MP_OPT_NONE) {
        m = base;
        m.grads = mem->grads_bytes;
        m.activations = others;
        m.when = MP_MOMENT_OPTIMIZER;
        /* foreach Adam: exp_avg_sq.sqrt() for every parameter, one state's
         * bytes; the per-parameter loop: sqrt() and its quotient by the
         * bias correction for the largest parameter (two of its states);
         * fused: none */
        bool adam = o->optimizer == MP_OPT_ADAM || o->optimizer == MP_OPT_ADAMW;
        if (adam && o->optimizer_impl == MP_OPTIMPL_FOREACH) m.transient = mem->optimizer_bytes / 2;
        if (adam && o->optimizer_impl == MP_OPTIMPL_FOR_LOOP)
            m.transient = (uint64_t)(2 * largest * in->opt_per_param / 2 / zdiv_o);
        total(&m);
        keep_max(&best, &m);
        if (m.total > alt) alt = m.total;
    }
    free(seen);
    free(block_set);
    free(unit);
    best.if_freed_first = in->grads_in_forward ? alt : 0;
    *at = best;
}
