/* The graph pass: one walk over the shaped graph in execution order asks
 * each node's train rule (mp_op.train, beside its cost rule) what its
 * backward keeps and costs, gives each value its type under the plan's
 * precision, its storage (views share one) and whether tensor parallelism
 * splits it, and caches per node what every layout then sums
 * (docs/PLANNING.md sections 2, 6 and 7). */
#include "plan/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/patterns.h"
#include "ops/ops.h"
#include "ops/kernel.h"

/* ---- the graph pass ---- */

typedef struct pctx {
    mp_tplan *pl;
    mp_model *m;
    mp_graph *g;
    int base_dt, low_dt, model_dt;
    bool mixed, training;
    uint8_t *rg, *cst, *split;   /* per value */
    uint8_t *pflag;               /* per parameter: 1 cast copy counted, 2 counted in a layer, 4
                                   * autocast's cast counted, 8 a gathered bias's computation */
    uint8_t *noncontig;           /* per value: a transposed view (not contiguous) */
    int *adt;                     /* per value: dtype in the plan */
    int *stor;                    /* per value: storage (view chains) */
    int *seen;                    /* per storage: stamp of the set it was counted in */
    int *node_repeat;              /* per node index: block or -1 */
    uint8_t *role;                /* per node index: ROLE_* (what its pattern makes of it) */
    uint8_t *tpc;                 /* per node index: TPC_* (its tensor-parallel class) */
    uint8_t *charged;             /* per storage: its gradient's all-reduce counted */
    const mp_patterns *P;         /* what the pattern layer recognised */
    bool kv_rep;                  /* --tp does not divide the KV heads: K and V stay whole */
    int *first_unit;              /* per storage: the unit (block) of the node that kept it first */
    int cur_unit;                 /* the unit of the node being planned */
    uint64_t *cross;              /* that node's bytes kept again on another stage, or NULL */
    int *cross_unit;
    bool input_grads;             /* fine-tuning with checkpointing: the embedding's output needs a
                                   * gradient (PEFT's enable_input_require_grads) */
    uint64_t b_num, b_den;        /* per-sample figures x b_num / b_den (a static export
                                   * planned at another batch); 1 / 1 otherwise */
} pctx;

/* A per-sample figure at the batch planned: x at the export's batch, times
 * b_num / b_den (exact when x divides by the export's batch, as every
 * per-sample figure does). */
static uint64_t bscale(const pctx *c, uint64_t x) {
    if (c->b_num == c->b_den) return x;
    return x / c->b_den * c->b_num + (x % c->b_den) * c->b_num / c->b_den;
}

static int dt_size(int dt) {
    int b = mp_dtype_bits(dt);
    return b > 0 ? (b + 7) / 8 : 0;
}

static uint64_t v_bytes(const pctx *c, int v) {
    return mp_tplan_numel(&c->g->values[v]) * (uint64_t)dt_size(c->adt[v]);
}

static int map_float(const pctx *c, int dt) {
    if (!mp_dtype_is_float(dt)) return dt;
    if (dt == c->model_dt) return c->base_dt;
    if (dt == MP_DT_FLOAT && c->base_dt == MP_DT_FLOAT) return dt;
    return dt == MP_DT_DOUBLE ? dt : (dt == MP_DT_FLOAT ? MP_DT_FLOAT : c->base_dt);
}

static int wider(int a, int b) {
    if (a < 0) return b;
    return mp_dtype_bits(b) > mp_dtype_bits(a) ? b : a;
}

/* Repeats: the repeated modules a checkpoint or a pipeline stage is made
 * of. The parent whose non-leaf children of equal parameter count are
 * most numerous gives their depth; every non-leaf module with parameters
 * at that depth is a repeat (ResNet's 16 bottlenecks, a transformer's
 * layers). A name of their own: they are modules of the tree found by
 * their parameters, for any model, where the pattern layer's blocks
 * (analyze/patterns.h) are transformer layers recognised by their
 * attention. The reports still call them "repeated blocks". */
/* Whether module md runs a node of its own (not only its submodules'). */
static bool runs_own_node(const mp_graph *g, int md) {
    for (int k = 0; k < g->n_nodes; k++)
        if (g->nodes[k].module == md) return true;
    return false;
}

static mp_status find_repeats(pctx *c) {
    mp_tplan *pl = c->pl;
    const mp_model *m = c->m;
    const mp_profile *p = pl->p;
    /* a mixture of experts' experts (every node of theirs sized by the
     * routing) are not what is checkpointed or staged: the layer around
     * the whole block is (transformers' GradientCheckpointingLayer) */
    int *routed = NULL; /* per module: nodes the routing sizes; less 1 << 20 per router */
    if (pl->routed && m->n_modules > 0) {
        routed = calloc((size_t)m->n_modules, sizeof *routed);
        if (!routed) return mp_error(MP_ERR_NOMEM, "out of memory");
        for (int k = 0; k < c->g->n_nodes; k++) {
            const mp_node *n = &c->g->nodes[k];
            int add = (n->cost.flags & MP_COST_RUN) ? 1 : mp_streq(n->op, "TopK") ? -(1 << 20) : 0;
            if (add && n->module >= 0)
                for (int a = n->module; a >= 0; a = m->modules[a].parent) routed[a] += add;
        }
    }
    int best = -1, best_n = 1;
    uint64_t best_params = 0;
    for (int i = 0; i < m->n_modules; i++) {
        for (int a = m->modules[i].first_child; a >= 0; a = m->modules[a].next_sibling) {
            if (m->modules[a].first_child < 0 || p->mods[a].params == 0) continue;
            if (routed && routed[a] > 0) continue; /* an expert: sized by a router outside it */
            int n = 0;
            for (int b = m->modules[i].first_child; b >= 0; b = m->modules[b].next_sibling)
                if (m->modules[b].first_child >= 0 && p->mods[b].params == p->mods[a].params) n++;
            uint64_t cov = p->mods[a].params * (uint64_t)n;
            if (n > best_n || (n == best_n && n > 1 && cov > best_params)) {
                best = a;
                best_n = n;
                best_params = cov;
            }
        }
    }
    free(routed);
    pl->repeat_parent = -1;
    if (best < 0) return MP_OK;
    /* equal containers of equal blocks (an encoder-decoder kept in three
     * nn.ModuleLists of layers: enc, dec_self, dec_cross): a container
     * that runs no node of its own is no forward to checkpoint (a
     * ModuleList is never called; transformers checkpoints each layer);
     * its blocks are the layers inside it */
    for (int hop = 0; hop < 8 && !runs_own_node(c->g, best); hop++) {
        int kid = -1, n_eq = 0;
        for (int a = m->modules[best].first_child; a >= 0; a = m->modules[a].next_sibling) {
            if (m->modules[a].first_child < 0 || p->mods[a].params == 0) continue;
            if (kid < 0) kid = a;
            if (p->mods[a].params == p->mods[kid].params) n_eq++;
        }
        if (kid < 0 || n_eq < 2) break;
        best = kid;
    }
    int depth = m->modules[best].depth;
    pl->repeat_parent = m->modules[best].parent;
    pl->repeats = mp_arena_calloc(&pl->arena, (size_t)m->n_modules, sizeof(int));
    if (!pl->repeats) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->n_modules; i++)
        if (m->modules[i].depth == depth && m->modules[i].first_child >= 0 && p->mods[i].params > 0)
            pl->repeats[pl->n_repeats++] = i;
    return MP_OK;
}

/* Block of each module: itself or its nearest ancestor that is a block. */
static mp_status module_repeats(pctx *c, int **out) {
    const mp_model *m = c->m;
    int *mb = malloc(sizeof(int) * (size_t)(m->n_modules ? m->n_modules : 1));
    if (!mb) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->n_modules; i++) mb[i] = -1;
    for (int b = 0; b < c->pl->n_repeats; b++) mb[c->pl->repeats[b]] = b;
    /* modules are created parents first: one pass down */
    for (int i = 0; i < m->n_modules; i++) {
        int par = m->modules[i].parent;
        if (mb[i] < 0 && par >= 0 && par < i) mb[i] = mb[par];
    }
    for (int i = 0; i < m->n_modules; i++)
        if (mb[i] < 0) {
            for (int a = m->modules[i].parent; a >= 0; a = m->modules[a].parent)
                if (mb[a] >= 0) {
                    mb[i] = mb[a];
                    break;
                }
        }
    *out = mb;
    return MP_OK;
}

/* A parameter, or a view of one (Identity, Transpose, Reshape of a weight:
 * PyTorch's W.t() shares the weight's storage). */
static bool param_like(const pctx *c, int v) { return mp_tplan_weight_of(c->g, v) >= 0; }

/* A norm's scale or shift needs a gradient (the parameter, or the
 * parameter an Identity copies, trains): native_layer_norm_backward then
 * needs the input, its mean and 1/std, whether or not the input needs a
 * gradient itself (a norm on a graph input). */
/* Value v is a weight that trains: it needs a gradient, or the parameter
 * it views (an Identity copy, an Unsqueeze) does. */
static bool weight_trains(const pctx *c, int v) {
    if (v < 0) return false;
    int w = mp_tplan_weight_of(c->g, v);
    return c->rg[v] || (w >= 0 && c->rg[w]);
}

static bool norm_weights_train(const pctx *c, const mp_pnorm *nm) {
    return weight_trains(c, nm->scale) || weight_trains(c, nm->shift);
}

/* Does product n (Gemm, MatMul by a weight, Conv, ConvTranspose) have a
 * bias the dynamo exporter removed (RemoveOptionalBiasFromConv, zero Gemm
 * biases): a trainable role parameter of its own with its output
 * features? Not one a BatchNorm was folded into: those are the norm's
 * scale and shift (folded_bn). */
static bool has_role_bias(const pctx *c, const mp_node *n, const mp_pnode *pn) {
    if (!pn->n_roles || n->n_out < 1 || n->out[0] < 0 || mp_node_folded_bn(c->g, n)) return false;
    bool conv = mp_streq(n->op, "Conv") || mp_streq(n->op, "ConvTranspose");
    if (!conv && !mp_streq(n->op, "Gemm") && !mp_streq(n->op, "MatMul")) return false;
    const mp_value *y = &c->g->values[n->out[0]];
    int d = conv ? 1 : y->rank - 1;
    if (y->rank < 1 || d < 0 || d >= y->rank || y->dims[d] <= 0) return false;
    for (int i = 0; i < pn->n_roles; i++) {
        int r = c->pl->proles[pn->first_role + i];
        if (c->pl->p->role_params[r].numel == (uint64_t)y->dims[d] && mp_tplan_role_trains(c->pl, r)) return true;
    }
    return false;
}

/* A view of a weight (Transpose, Reshape) read only as the weight of
 * products: the TorchScript exporter's W.t() of nn.Linear when it does not
 * fold constants. PyTorch's `t` is F.linear's own, counted with the product
 * (dispatch_ops: t and addmm or mm). */
static bool linear_weight_view(const pctx *c, const mp_node *n) {
    if (!n->desc || n->desc->train != mp_bwd_view || n->n_in < 1 || n->in[0] < 0 || n->n_out < 1 || n->out[0] < 0 ||
        !param_like(c, n->in[0]) || mp_tplan_param_copy(c->g, n))
        return false;
    int nu;
    const int *u = mp_uses(c->g, n->out[0], &nu);
    if (nu == 0 || (c->g->values[n->out[0]].flags & MP_VAL_OUTPUT)) return false;
    for (int i = 0; i < nu; i++) {
        const mp_node *q = &c->g->nodes[u[i]];
        if (!(mp_streq(q->op, "MatMul") || mp_streq(q->op, "Gemm")) || q->n_in < 2 || q->in[1] != n->out[0] ||
            q->in[0] == n->out[0])
            return false;
    }
    return true;
}

/* Parameter v (or the one it views) is split by tp: its storage, and the
 * parameter as PyTorch has it where the exporter merged equal ones behind
 * an Identity (a fresh model's zero biases: each layer's its own). */
static void split_param(pctx *c, int v) {
    c->pl->param_split[c->stor[v]] = 1;
    int w = mp_tplan_weight_of(c->g, v);
    if (w >= 0) c->pl->param_split[w] = 1;
}

/* An Identity of a parameter naming a buffer: the TorchScript exporter
 * merges a fresh BatchNorm's running statistics with the equal parameters
 * (zeros, ones). A buffer needs no gradient. */
static bool is_buffer_copy(const mp_graph *g, const mp_node *n) {
    return mp_tplan_param_copy(g, n) && !(g->values[n->out[0]].flags & MP_VAL_PARAM);
}

/* Does node n compute only constants (Shape, Size, shape arithmetic: its
 * outputs known at plan time)? */
static bool outputs_const(const pctx *c, const mp_node *n) {
    bool all = n->n_out > 0;
    for (int i = 0; i < n->n_out; i++)
        if (n->out[i] >= 0 && !c->cst[n->out[i]]) all = false;
    return all;
}

/* Is module b module a or inside it? */
static bool module_within(const mp_model *md, int b, int a) {
    for (int hop = 0; b >= 0 && b < md->n_modules && hop < 256; b = md->modules[b].parent, hop++)
        if (b == a) return true;
    return false;
}

/* A BatchNorm the exporter folded into node n (mp_node_folded_bn: the
 * dynamo exporter's FuseBatchNormIntoConv, in train mode too, as
 * FlopsProfiler exports on torch 2; the TorchScript exporter's in eval
 * mode, torch.onnx.export's default): the model runs it, so its work comes
 * back as the
 * BatchNormalization node's own figures give it (cost_batchnorm,
 * train_batchnorm, one_op_backward). Its input is n's output before the
 * norm, a tensor of n's output's shape and type. Forward: a kernel reading
 * and writing it (batch_norm) and, in training, num_batches_tracked.add_;
 * 5 FLOPs an element in training, 2 in inference. Training, when a gradient
 * flows: it keeps its input and an fp32 mean and 1/std per channel, and its
 * backward is one operator (native_batch_norm_backward) with a kernel per
 * gradient (the input's, the scale's, the shift's: the shift and scale are
 * the profile's role parameters), twice the forward's FLOPs, reading the
 * input and the output's gradient and writing the input's, both gradients
 * live at once. */
static void folded_bn(pctx *c, const mp_node *n, mp_pnode *pn) {
    int y = n->n_out > 0 ? n->out[0] : -1;
    if (y < 0 || c->cst[y]) return;
    const mp_value *yv = &c->g->values[y];
    uint64_t ob = bscale(c, v_bytes(c, y)), elems = bscale(c, mp_tplan_numel(yv));
    uint64_t ch = yv->rank >= 2 && yv->dims[1] > 0 ? (uint64_t)yv->dims[1] : 0;
    bool train = c->training && c->rg[y];
    uint64_t fwd = (uint64_t)mp_bn_flops_per_elem(c->training) * elems;
    pn->fwd_flops += fwd;
    pn->aux_fwd += 2 * ob;
    pn->n_aux_fwd += c->training ? 2 : 1;
    if (!train) return;
    uint64_t kept = ob + mp_norm_stat_bytes(ch);
    if (c->split[y]) pn->saved_split += kept;
    else pn->saved_rep += kept;
    pn->bwd_flops += 2 * fwd;
    pn->aux_bwd += 3 * ob;
    pn->n_bwd_ops++;
    /* the TorchScript form's convolution has a bias of its own, the norm's
     * shift folded (its gradient's kernel counted there, and its
     * AccumulateGrad); the scale's AccumulateGrad is the norm's */
    bool conv_bias = !n->fx && n->n_in > 2 && n->in[2] >= 0 && c->rg[n->in[2]];
    pn->n_bwd_kernels += conv_bias ? 2 : 3;
    if (conv_bias) pn->n_bwd_ops++;
    if (2 * ob > pn->temp) pn->temp = 2 * ob;
}

/* The operators eager PyTorch dispatches for a product (host.c), from ATen's
 * decompositions (aten/src/ATen/native/Linear.cpp, LinearAlgebra.cpp's
 * matmul, tools/autograd/derivatives.yaml) rather than one per node:
 *  - a Linear (Gemm, or MatMul by a 2-D parameter): t(weight) and addmm or
 *    mm, an input of rank 3 or more viewed to 2-D and the result back (4);
 *    its backward mm with t for the input's gradient (2), t, mm and t for
 *    the weight's and TBackward's t (4), the views' reshapes (2), a Gemm's
 *    bias sum and view (2);
 *  - a product of two batched activations: each side expanded and reshaped
 *    to 3-D, bmm, the result viewed back (6); its backward the gradient
 *    reshaped, per side transpose, bmm and reshape (1 + 3 each);
 *  - a Linear's bias added after its MatMul: addmm's (0; backward 2).
 * tools/host_ops.py counts them with TorchDispatchMode in a real step. */
/* PyTorch's own depthwise kernels (aten/src/ATen/native/cuda/
 * DepthwiseConv2d.cu). A 2-D (or 1-D, viewed as 2-D) convolution with one
 * group per input channel goes to them in fp32 and bf16 for tensors in
 * PyTorch's default layout; cuDNN takes it only in fp16 or channels-last
 * (Convolution.cpp's use_cudnn_depthwise). Their work is index arithmetic
 * around one multiply-add per tap, so they are bound by the instructions
 * the GPU issues, not by FLOPs or bytes:
 *  - forward, a thread per output: its n, c, h, w from three runtime
 *    divisions (12 instructions each, NVCC's 32-bit division by a runtime
 *    divisor) and the store, about 40, then per tap the input's position,
 *    two bounds tests, two loads and the multiply-add: 8 (5 in the
 *    unrolled 3 x 3 and 1 x 1 specialisations);
 *  - the input's gradient, a thread per input element: the same 40, per
 *    tap (and per output channel of a depth multiplier) 8 (6 unrolled),
 *    and with a stride other than 1 or 2 a runtime modulo and division
 *    of each coordinate, 24 more;
 *  - the weight's gradient, a block per weight element reducing over the
 *    batch and the output positions: per output element and tap a
 *    division and a modulo by the output width (14), the two offsets (5),
 *    the bounds (2), two loads and the multiply-add (3) and the loop (3):
 *    24 (no specialisation).
 * 16-bit types add the two conversions to fp32 per tap. Counts are lane
 * instructions per micro-batch at the batch planned (bscale); layout.c
 * times them at one instruction per CUDA core and clock
 * (the datasheet's fp32 rate over 2) x --compute-eff. Returns false when
 * the node is not run by these kernels. */
static bool native_depthwise(const pctx *c, const mp_node *n, int dt, uint32_t rg, mp_pnode *pn) {
    if (!mp_streq(n->op, "Conv") || n->n_in < 2 || n->n_out < 1 || n->in[0] < 0 || n->in[1] < 0 || n->out[0] < 0)
        return false;
    if (dt != MP_DT_FLOAT && dt != MP_DT_BFLOAT16) return false; /* fp16: cuDNN; fp64: not planned */
    if (c->pl->o.channels_last) return false;
    const mp_value *x = &c->g->values[n->in[0]], *w = &c->g->values[n->in[1]], *y = &c->g->values[n->out[0]];
    if ((x->rank != 3 && x->rank != 4) || w->rank != x->rank || y->rank != x->rank) return false;
    int64_t groups = mp_attr_i(n, "group", 1), cin = x->dims[1], cout = w->dims[0];
    if (groups <= 1 || cin != groups || cout <= 0 || cout % cin || w->dims[1] != 1) return false;
    for (int i = 0; i < x->rank; i++)
        if (x->dims[i] <= 0 || y->dims[i] <= 0 || w->dims[i] <= 0) return false;
    int64_t kh = x->rank == 4 ? w->dims[2] : 1, kw = w->dims[x->rank - 1];
    const int64_t *st = NULL;
    int ns = mp_attr_ints(n, "strides", &st);
    bool odd_stride = false;
    for (int i = 0; i < ns; i++)
        if (st[i] != 1 && st[i] != 2) odd_stride = true;
    bool unrolled = (kh == 3 && kw == 3) || (kh == 1 && kw == 1);
    uint64_t taps = (uint64_t)(kh * kw), conv16 = dt == MP_DT_BFLOAT16 ? 2 : 0;
    uint64_t out_el = mp_tplan_numel(y), in_el = mp_tplan_numel(x), mult = (uint64_t)(cout / cin);
    pn->simt_fwd = bscale(c, out_el * (40 + taps * ((unrolled ? 5 : 8) + conv16)));
    if (rg & 1) pn->simt_bwd += bscale(c, in_el * (40 + mult * taps * ((unrolled ? 6 : 8) + (odd_stride ? 24 : 0) + conv16)));
    if (rg & 2) pn->simt_bwd += bscale(c, out_el * taps * (24 + conv16));
    return true;
}

/* Operators whose backward is one ATen operator computing every gradient
 * (the input's, the weight's, the bias's): native_layer_norm_backward,
 * native_batch_norm_backward, native_group_norm_backward,
 * convolution_backward. One dispatch, however many kernels it launches. */
static bool one_op_backward(const mp_node *n) {
    static const char *const ops[] = {"LayerNormalization", "BatchNormalization", "GroupNormalization", "Conv",
                                      "ConvTranspose"};
    if (n->domain && n->domain[0]) return false;
    for (size_t i = 0; i < MP_ARRAY_LEN(ops); i++)
        if (mp_streq(n->op, ops[i])) return true;
    return false;
}

static bool product_copies(const pctx *c, const mp_node *n, int which);

/* nn.GroupNorm as the TorchScript exporter writes it: Reshape to [N, G,
 * -1], InstanceNormalization with a constant scale of ones, Reshape back,
 * Mul by the weight, Add the bias. PyTorch runs native_group_norm, whose
 * backward computes the weight's gradient from the input and its
 * statistics (the InstanceNormalization keeps those, its rule): n, that
 * Mul, keeps nothing of its own. */
static bool groupnorm_affine(const pctx *c, const mp_node *n) {
    const mp_graph *g = c->g;
    if (!mp_streq(n->op, "Mul") || n->n_in != 2 || (n->domain && n->domain[0])) return false;
    for (int i = 0; i < 2; i++) {
        int w = n->in[i], x = n->in[1 - i];
        if (w < 0 || x < 0 || !param_like(c, w)) continue;
        int r = g->values[x].producer;
        if (r < 0 || !mp_streq(g->nodes[r].op, "Reshape") || g->nodes[r].n_in < 1 || g->nodes[r].in[0] < 0) continue;
        int q = g->values[g->nodes[r].in[0]].producer;
        if (q < 0 || !mp_streq(g->nodes[q].op, "InstanceNormalization") || g->nodes[q].n_in < 2) continue;
        int sc = g->nodes[q].in[1];
        if (sc >= 0 && c->cst[sc] && !param_like(c, sc)) return true;
    }
    return false;
}

/* The InstanceNormalization n of such a GroupNorm (groupnorm_affine) whose
 * weight trains: native_group_norm_backward needs the input and its
 * statistics for the weight's gradient, also where the input needs none
 * (a GroupNorm on a graph input). */
static bool groupnorm_weight_trains(const pctx *c, const mp_node *n) {
    const mp_graph *g = c->g;
    if (!mp_streq(n->op, "InstanceNormalization") || n->n_out < 1 || n->out[0] < 0) return false;
    int r = mp_sole_use(g, n->out[0]);
    if (r < 0 || !mp_streq(g->nodes[r].op, "Reshape") || g->nodes[r].n_out < 1 || g->nodes[r].out[0] < 0)
        return false;
    int mu = mp_sole_use(g, g->nodes[r].out[0]);
    if (mu < 0 || !groupnorm_affine(c, &g->nodes[mu])) return false;
    for (int i = 0; i < g->nodes[mu].n_in; i++)
        if (param_like(c, g->nodes[mu].in[i]) && weight_trains(c, g->nodes[mu].in[i])) return true;
    return false;
}

/* F.glu as both exporters write it: Split(x) into halves a, b, then
 * a * Sigmoid(b). PyTorch runs glu, whose backward keeps x alone: n, that
 * Sigmoid, keeps nothing (the product keeps a and b, views of x). */
static bool glu_sigmoid(const pctx *c, const mp_node *n) {
    const mp_graph *g = c->g;
    if (!mp_streq(n->op, "Sigmoid") || n->n_in < 1 || n->in[0] < 0 || n->n_out < 1 || n->out[0] < 0) return false;
    int sp = g->values[n->in[0]].producer;
    if (sp < 0 || !mp_streq(g->nodes[sp].op, "Split") || g->nodes[sp].n_out != 2 || g->nodes[sp].out[1] != n->in[0])
        return false;
    int u = mp_sole_use(g, n->out[0]);
    if (u < 0) return false;
    const mp_node *mu = &g->nodes[u];
    return mp_streq(mu->op, "Mul") && mu->n_in == 2 &&
           ((mu->in[0] == g->nodes[sp].out[0] && mu->in[1] == n->out[0]) ||
            (mu->in[1] == g->nodes[sp].out[0] && mu->in[0] == n->out[0]));
}

/* Input i of Add n is a Linear's bias added after its MatMul by a 2-D
 * weight (the TorchScript exporter's form of F.linear for an input of rank
 * 3 or more): in PyTorch it is addmm's, one operator in the product's type. */
static bool linear_bias_add(const pctx *c, const mp_node *n, int i) {
    if (!mp_streq(n->op, "Add") || n->n_in != 2 || i < 0 || i > 1) return false;
    int b = n->in[i], x = n->in[1 - i];
    if (b < 0 || x < 0 || c->g->values[b].rank != 1 || !param_like(c, b)) return false;
    int pi = c->g->values[x].producer;
    const mp_node *p = pi >= 0 ? &c->g->nodes[pi] : NULL;
    return p && mp_streq(p->op, "MatMul") && p->n_in >= 2 && p->in[1] >= 0 && c->g->values[p->in[1]].rank == 2 &&
           param_like(c, p->in[1]);
}

/* Input i (a parameter, or a constant: a buffer, a tensor the model makes
 * in Python) of node n promotes its type under autocast: an elementwise
 * Add, Sub, Mul or Div of a bf16 activation and an fp32 tensor with dims
 * is fp32 in PyTorch (type promotion: a learned position embedding added to
 * a bf16 patch embedding, a layer scale, an ALiBi bias or a causal mask
 * buffer added to bf16 scores; a 0-dim tensor or Python number does not), but
 * a Linear's bias is addmm's (cast with the product) and an operator
 * taking weights (BatchNorm's scale: cuDNN takes bf16 with fp32 scale)
 * keeps its activation's type. */
static bool param_promotes(const pctx *c, const mp_node *n, int i) {
    static const char *const ops[] = {"Add", "Sub", "Mul", "Div"};
    bool elementwise = false;
    for (size_t k = 0; k < MP_ARRAY_LEN(ops); k++) elementwise = elementwise || mp_streq(n->op, ops[k]);
    if (!elementwise || (n->domain && n->domain[0]) || n->n_in != 2) return false;
    int v = n->in[i];
    return v >= 0 && c->g->values[v].rank >= 1 && !linear_bias_add(c, n, i);
}

static void dispatch_ops(const pctx *c, const mp_node *n, uint32_t rg, bool diff, mp_pnode *pn) {
    /* a Linear's bias added after its MatMul (the TorchScript exporter's
     * form for an input of rank 3 or more) is addmm's in PyTorch: nothing
     * of its own in the forward; in the backward the bias's sum and view */
    if (mp_streq(n->op, "Add") && n->n_in == 2) {
        for (int i = 0; i < 2; i++) {
            if (!linear_bias_add(c, n, i)) continue;
            pn->n_fwd_ops = 0;
            pn->n_bwd_ops = (uint16_t)(diff && (rg & (1u << i)) ? 2 : 0);
            return;
        }
    }
    /* an Einsum that is one batched product (MaxViT's attention) is
     * torch.einsum's sumproduct_pair (aten/src/ATen/native/Linear.cpp):
     * each operand unsqueezed and permuted, each side permuted and
     * reshaped, bmm, the result viewed, permuted and viewed (12); its
     * backward the gradient reshaped, permuted and reshaped (3), per side
     * transpose, bmm, reshape, two permutes and a squeeze (6), as
     * TorchDispatchMode lists them */
    mp_einsum_bmm eb;
    if (mp_streq(n->op, "Einsum") && mp_einsum_bmm_of(c->g, n, &eb)) {
        pn->n_fwd_ops = 12;
        if (diff && rg) pn->n_bwd_ops = (uint16_t)(3 + ((rg & 1) ? 6 : 0) + ((rg & 2) ? 6 : 0));
        return;
    }
    bool gemm = mp_streq(n->op, "Gemm");
    if (!(gemm || mp_streq(n->op, "MatMul")) || n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0) return;
    int ra = c->g->values[n->in[0]].rank, rb = c->g->values[n->in[1]].rank;
    bool back = diff && rg;
    if (gemm || (rb == 2 && param_like(c, n->in[1]))) {
        int nd = ra >= 3 ? 2 : 0;
        pn->n_fwd_ops = (uint16_t)(2 + nd);
        if (back)
            pn->n_bwd_ops = (uint16_t)(((rg & 1) ? 2 : 0) + ((rg & 2) ? 4 : 0) + nd +
                                       (gemm && n->n_in > 2 && (rg & 4) ? 2 : 0));
    } else if (ra >= 3 && rb >= 3) {
        pn->n_fwd_ops = 6;
        if (back) pn->n_bwd_ops = (uint16_t)(1 + ((rg & 1) ? 3 : 0) + ((rg & 2) ? 3 : 0));
        /* a side whose expand and reshape to [batch, rows, cols] is no view
         * (permuted heads, keys transposed, a broadcast) is copied: reshape
         * is clone and _unsafe_view, one operator and one kernel more, the
         * batch's elements read and written. Its backward is the view's. */
        const mp_value *y = n->n_out > 0 && n->out[0] >= 0 ? &c->g->values[n->out[0]] : NULL;
        for (int i = 0; i < 2 && y && y->rank >= 3; i++) {
            if (!product_copies(c, n, i)) continue;
            const mp_value *x = &c->g->values[n->in[i]];
            uint64_t el = mp_tplan_numel(x);
            int64_t xb = mp_dims_product(x->dims, x->rank - 2), yb = mp_dims_product(y->dims, y->rank - 2);
            if (xb > 0 && yb > xb) el = el / (uint64_t)xb * (uint64_t)yb;
            pn->n_aux_fwd++;
            pn->aux_fwd += bscale(c, 2 * el * (uint64_t)dt_size(c->adt[n->in[i]]));
        }
    }
}

/* An attention bias the exporter folded from a table gathered by an index
 * (the profile's "gathered" attention bias, docs/COUNTING.md "Folded
 * attention masks and biases": Swin's relative position bias) is computed
 * again by every forward in PyTorch (torchvision's and timm's
 * _get_relative_position_bias): table[index] (index), view, permute,
 * contiguous (a copy), unsqueeze; its backward UnsqueezeBackward's
 * squeeze, the permute and view back, and IndexBackward's new_zeros and
 * index_put_ (accumulate) into the table's gradient. Counted at the first
 * Add that reads it (T5 computes its bias once and passes it to every
 * layer): 3 views and 2 kernels each way, moving the bias and the table. */
static void gathered_bias(const pctx *c, const mp_node *n, uint32_t rg, mp_pnode *pn) {
    const mp_profile *p = c->pl->p;
    if (!mp_streq(n->op, "Add") || !p->n_pnotes) return;
    for (int i = 0; i < n->n_in; i++)
        for (int j = 0; n->in[i] >= 0 && j < p->n_pnotes; j++) {
            const mp_param_note *pn_ = &p->pnotes[j];
            if (pn_->kind != MP_PNOTE_ATTN_BIAS || pn_->value != n->in[i] || !pn_->how ||
                strcmp(pn_->how, "gathered") != 0 || (c->pflag[n->in[i]] & 8))
                continue;
            c->pflag[n->in[i]] |= 8;
            const mp_value *b = &c->g->values[n->in[i]];
            uint64_t bytes = mp_tplan_numel(b) * (uint64_t)mp_dtype_bytes(b->dtype, 1),
                     table = pn_->counted * (uint64_t)mp_dtype_bytes(b->dtype, 1);
            pn->n_fwd_ops += 3;
            pn->n_aux_fwd += 2;
            pn->aux_fwd += table + 3 * bytes; /* the gather, and the copy */
            if (c->training && (rg & (1u << i))) {
                pn->n_bwd_ops += 3;
                pn->n_aux_bwd += 2;
                pn->aux_bwd += table + 2 * bytes; /* zeros, then the bias's gradient added in */
            }
        }
}

/* Does Transpose n move a dim of size > 1 past another (leave its input
 * non-contiguous)? */
static bool perm_moves(const mp_node *n, const mp_value *x) {
    const int64_t *perm = NULL;
    int np = mp_attr_ints(n, "perm", &perm);
    if (x->rank < 2) return false;
    int last = -1;
    for (int i = 0; i < x->rank; i++) {
        int src = np == x->rank ? (int)perm[i] : x->rank - 1 - i; /* default: reverse */
        if (src < 0 || src >= x->rank) return true;
        if (x->dims[src] == 1) continue;
        if (src < last) return true;
        last = src;
    }
    return false;
}

/* Is a slice of x along its axis strided (not the leading dim of size > 1)? */
static bool slice_strided(const pctx *c, const mp_node *n, const mp_value *x) {
    int axis = 0;
    if (mp_streq(n->op, "Slice")) {
        const int64_t *ax = NULL;
        int64_t na = 0;
        mp_ctx cx = {c->m, c->g, (mp_node *)n, 0};
        if (n->opset >= 10) {
            if (n->n_in < 4 || n->in[3] < 0) return true; /* every axis */
            if (!mp_ints(&cx, 3, &ax, &na) || na != 1) return true;
            axis = (int)ax[0];
        } else {
            na = mp_attr_ints(n, "axes", &ax);
            if (na != 1) return true;
            axis = (int)ax[0];
        }
    } else {
        axis = (int)mp_attr_i(n, "axis", 0);
    }
    axis = mp_axis(axis, x->rank);
    if (axis < 0) return true;
    for (int i = 0; i < axis; i++)
        if (x->dims[i] != 1) return true;
    return false;
}

/* ---- strides: which views a product's reshape copies ----
 * PyTorch's matmul reshapes a batched operand to [batch, n, m] (and a
 * rank-3 input of a product by a matrix to [rows, k]) before bmm or mm,
 * which keep what they are given: a view where the reshape can be one,
 * a contiguous copy of the operand where it cannot (at::detail::
 * computeStride's test). A head split off a fused QKV projection and
 * transposed (GPT-NeoX, Phi-3) cannot: its copy is kept, not the whole
 * projection's output its view shares. The strides of a view follow its
 * chain back to the storage (contiguous there). */
#define MAX_RANK 16

/* computeStride (aten/src/ATen/TensorUtils.cpp): the strides of a view of
 * (sizes, strides) with the shape nsz, false where none exists. */
static bool view_stride(int r, const int64_t *sz, const int64_t *st, int nr, const int64_t *nsz, int64_t *nst) {
    if (r == 0) {
        for (int i = 0; i < nr; i++) nst[i] = 1;
        return true;
    }
    int64_t numel = 1;
    for (int i = 0; i < r; i++) numel *= sz[i];
    if (numel == 0) return false;
    int vd = nr - 1;
    int64_t base = st[r - 1], tn = 1, vn = 1;
    for (int td = r - 1; td >= 0; td--) {
        tn *= sz[td];
        if (td == 0 || (sz[td - 1] != 1 && st[td - 1] != tn * base)) {
            while (vd >= 0 && (vn < tn || nsz[vd] == 1)) {
                nst[vd] = vn * base;
                vn *= nsz[vd];
                vd--;
            }
            if (vn != tn) return false;
            if (td > 0) {
                base = st[td - 1];
                tn = vn = 1;
            }
        }
    }
    return vd == -1;
}

static void contiguous_strides(const mp_value *v, int64_t *st) {
    int64_t s = 1;
    for (int i = v->rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= v->dims[i] > 0 ? v->dims[i] : 1;
    }
}

/* v's strides in elements of its storage; false where not known (then
 * the caller assumes what it did before: the view is kept). */
static bool strides_of(const pctx *c, int v, int64_t *st, int depth) {
    const mp_value *val = &c->g->values[v];
    if (val->rank < 0 || val->rank > MAX_RANK) return false;
    for (int i = 0; i < val->rank; i++)
        if (val->dims[i] < 0) return false;
    int pi = val->producer;
    /* a Linear's bias added in place (graph.c's walk): the product's storage,
     * contiguous in the sum's own shape */
    bool in_place = pi >= 0 && mp_streq(c->g->nodes[pi].op, "Add");
    if (c->stor[v] == v || depth > 64 || in_place) {
        contiguous_strides(val, st);
        return c->stor[v] == v || in_place;
    }
    if (pi < 0) return false;
    const mp_node *n = &c->g->nodes[pi];
    if (n->n_in < 1 || n->in[0] < 0) return false;
    int x = n->in[0];
    const mp_value *xv = &c->g->values[x];
    int64_t xs[MAX_RANK];
    if (!strides_of(c, x, xs, depth + 1)) return false;
    int r = val->rank, xr = xv->rank;
    if (mp_streq(n->op, "Transpose")) {
        const int64_t *perm = NULL;
        int np = mp_attr_ints(n, "perm", &perm);
        if (xr != r) return false;
        for (int i = 0; i < r; i++) {
            int src = np == r ? (int)perm[i] : r - 1 - i;
            if (src < 0 || src >= r) return false;
            st[i] = xs[src];
        }
        return true;
    }
    if (mp_streq(n->op, "Slice") || mp_streq(n->op, "Split")) {
        if (xr != r) return false;
        for (int i = 0; i < r; i++) st[i] = xs[i]; /* step 1 (a step leaves it not known below) */
        if (mp_streq(n->op, "Slice") && n->n_in >= 5 && n->in[4] >= 0) return false;
        return true;
    }
    if (mp_streq(n->op, "Gather")) {
        /* a scalar index drops the axis; a list of indices is index_select's copy */
        int axis = mp_axis((int)mp_attr_i(n, "axis", 0), xr);
        if (axis < 0 || n->n_in < 2 || n->in[1] < 0 || c->g->values[n->in[1]].rank != 0 || r != xr - 1) return false;
        for (int i = 0, j = 0; i < xr; i++)
            if (i != axis) st[j++] = xs[i];
        return true;
    }
    if (mp_streq(n->op, "Expand")) {
        if (r < xr) return false;
        for (int i = 0; i < r; i++) {
            int j = i - (r - xr);
            st[i] = j < 0 || (xv->dims[j] == 1 && val->dims[i] != 1) ? 0 : xs[j];
        }
        return true;
    }
    static const char *const reshapes[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Cast", "CastLike"};
    for (size_t i = 0; i < MP_ARRAY_LEN(reshapes); i++)
        if (mp_streq(n->op, reshapes[i])) return view_stride(xr, xv->dims, xs, r, val->dims, st);
    return false; /* another view (the NaN guard's): not known */
}

/* Does PyTorch's matmul copy operand `which` of product n (reshaping it to
 * [batch, rows, cols], or a rank-3+ input by a matrix to [rows, k])? */
static bool product_copies(const pctx *c, const mp_node *n, int which) {
    if (!mp_streq(n->op, "MatMul") || n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0) return false;
    int v = n->in[which];
    int vp = c->g->values[v].producer;
    if (c->stor[v] == v || (vp >= 0 && mp_streq(c->g->nodes[vp].op, "Add")))
        return false; /* its own storage, or a product's its bias was added to in place: contiguous */
    const mp_value *a = &c->g->values[n->in[0]], *b = &c->g->values[n->in[1]];
    const mp_value *x = &c->g->values[v];
    if (x->rank < 2 || x->rank > MAX_RANK) return false;
    int64_t st[MAX_RANK], nsz[3], nst[3];
    if (!strides_of(c, v, st, 0)) return false;
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1], lead = 1;
    for (int i = 0; i < x->rank - 2; i++) lead *= x->dims[i];
    if (a->rank >= 3 && b->rank >= 3) {
        /* batched: both to [batch, rows, cols] (the batch dims broadcast first) */
        int64_t bs[MAX_RANK], bst[MAX_RANK];
        int br = a->rank > b->rank ? a->rank : b->rank;
        const mp_value *o = which ? a : b;
        int64_t batch = 1;
        for (int i = 0; i < br - 2; i++) {
            int ia = i - (br - x->rank), io = i - (br - o->rank);
            int64_t dx = ia >= 0 ? x->dims[ia] : 1, dox = io >= 0 ? o->dims[io] : 1;
            bs[i] = dx > dox ? dx : dox;
            bst[i] = ia >= 0 && !(dx == 1 && bs[i] != 1) ? st[ia] : 0;
            batch *= bs[i];
        }
        bs[br - 2] = rows, bs[br - 1] = cols;
        bst[br - 2] = st[x->rank - 2], bst[br - 1] = st[x->rank - 1];
        nsz[0] = batch, nsz[1] = rows, nsz[2] = cols;
        return !view_stride(br, bs, bst, 3, nsz, nst);
    }
    if (which == 0 && a->rank >= 3 && b->rank == 2) {
        nsz[0] = lead * rows, nsz[1] = cols;
        if (view_stride(x->rank, x->dims, st, 2, nsz, nst)) return false;
        /* PyTorch 1.13's should_fold does not fold a 3-D input whose last two
         * dims are transposed, its first the slowest ([B, C, N] viewed as
         * [B, N, C]: a convolution's features read as tokens): bmm with
         * each GEMM transposed, no copy */
        if (c->pl->o.torch_version == 1 && x->rank == 3 && st[2] != 1 && st[0] == x->dims[1] * x->dims[2])
            return false;
        return true;
    }
    return false;
}

static bool is_weight_product(const pctx *c, const mp_node *n, int *act) {
    if (!n->desc || n->desc->train != mp_bwd_product || !(mp_streq(n->op, "MatMul") || mp_streq(n->op, "Gemm")))
        return false;
    if (n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0) return false;
    if (!param_like(c, n->in[1])) return false;
    *act = n->in[0];
    return true;
}

static void note_default(mp_tplan *pl, const char *op) {
    for (int i = 0; i < pl->n_default_ops; i++)
        if (mp_streq(pl->default_ops[i], op)) {
            pl->default_counts[i]++;
            return;
        }
    pl->default_ops[pl->n_default_ops] = op;
    pl->default_counts[pl->n_default_ops++] = 1;
}

/* A value the plan folds (its inputs are constant: a causal mask built from
 * a range, a table of positions) that PyTorch computes at run time: kept
 * by an operator, or given to a checkpointed block, it is an activation.
 * Initializers and Constant outputs are not (parameters, buffers, Python
 * constants), nor integer tensors whose contents inference knows (shape
 * arithmetic: Python ints in PyTorch). */
static bool run_made(const pctx *c, int v) {
    const mp_value *val = &c->g->values[v];
    if (val->flags & (MP_VAL_INIT | MP_VAL_CONST | MP_VAL_PARAM)) return false;
    if (val->producer < 0) return false;
    const mp_node *p = &c->g->nodes[val->producer];
    if (mp_streq(p->op, "Constant")) return false;
    if (mp_dtype_is_int(val->dtype) && val->kn >= 0) return false;
    return true;
}

/* A kept value's bytes (its storage counted once per stamp); under
 * autocast a value kept in another type is a copy of its own. */
static uint64_t keep(pctx *c, int v, int want_dt, int stamp, bool *split, uint64_t *cast) {
    *split = c->split[v];
    /* a view of a weight: the parameter it views, which is the Identity
     * copy where the exporter merged equal weights (a parameter of its own
     * in PyTorch, whose autocast copy is its own) */
    int w = mp_tplan_weight_of(c->g, v);
    if (w >= 0) v = w;
    else if (c->g->values[c->stor[v]].flags & MP_VAL_PARAM) v = c->stor[v];
    const mp_value *val = &c->g->values[v];
    if (val->flags & MP_VAL_PARAM) {
        /* the parameter itself is no activation; autocast's cached
         * low-precision copy of it is (once per parameter) */
        if (!c->mixed || want_dt != c->low_dt) return 0;
        /* a quantized weight: bitsandbytes' MatMul4Bit keeps the packed
         * weight and dequantizes it again in the backward (a transient) */
        if (c->pl->pquant && c->pl->pquant[v]) return 0;
        if (c->pflag[v] & 1) return 0;
        c->pflag[v] |= 1;
        uint64_t b = mp_tplan_numel(val) * (uint64_t)dt_size(c->low_dt);
        c->pl->cast_param_bytes += b;
        if (cast) *cast += b;
        return b;
    }
    if (c->cst[v] && !run_made(c, v)) return 0;
    if (want_dt >= 0 && mp_dtype_is_float(c->adt[v]) && want_dt != c->adt[v])
        return bscale(c, mp_tplan_numel(val) * (uint64_t)dt_size(want_dt));
    int s = c->stor[v];
    uint64_t b = bscale(c, mp_tplan_numel(&c->g->values[s]) * (uint64_t)dt_size(c->adt[s]));
    if (c->seen[s] == stamp) {
        /* kept already; by a node of another unit (block), it is kept again
         * when a pipeline puts the two on different stages (the later stage
         * receives its own copy) */
        if (stamp == 1 && c->first_unit[s] != c->cur_unit && c->cross) {
            *c->cross += b;
            if (c->first_unit[s] > *c->cross_unit) *c->cross_unit = c->first_unit[s];
        }
        return 0;
    }
    /* kept for the whole step already (stamp 1: by a node outside the
     * checkpointed blocks): a block's recompute reads that storage, and the
     * checkpoint's own keep of the block's inputs must not count it again */
    if (c->seen[s] == 1) return 0;
    c->seen[s] = stamp;
    if (stamp == 1) c->first_unit[s] = c->cur_unit;
    return b;
}

/* ---- what the pattern layer recognised, as PyTorch runs it ----
 * The pattern layer (analyze/patterns.h) names norms, activations,
 * attentions and blocks in every export form. The planner keeps what
 * PyTorch keeps, so a pattern is planned as the operator PyTorch runs:
 *  - a LayerNorm the exporter decomposed (opsets before 17) is one
 *    F.layer_norm: it keeps its input and a mean and 1/std per row;
 *  - a GELU in erf form (F.gelu before opset 20) and x * sigmoid(x)
 *    (nn.SiLU, exported decomposed at every opset) are one F.gelu / F.silu:
 *    they keep their input;
 *  - a decomposed RMSNorm, a GELU in tanh form and a rotary embedding are
 *    planned as written: Hugging Face writes them in Python (LlamaRMSNorm,
 *    GPT-2's gelu_new, rotate_half), and eager PyTorch runs and keeps them
 *    operator by operator;
 *  - an attention planned fused (--attention fused) is one
 *    scaled_dot_product_attention kernel (mp_bwd_attention's rule): it keeps
 *    Q, K and V before any repetition of grouped K/V heads (SDPA's
 *    enable_gqa) and before a scale split over Q and K, its output and a
 *    log-sum-exp per row, and never writes the scores; planned eager it is
 *    what its operators keep, but for the dynamo exporter's NaN guard after
 *    the softmax (IsNaN and Where), which eager attention does not have: a
 *    view of the probabilities.
 * A pattern run as one operator is one kernel: its head (first member)
 * carries the group's FLOPs and its traffic (inputs and output once), the
 * other members none. */
enum {
    ROLE_OWN = 0,       /* the node's own train rule */
    ROLE_MEMBER,        /* inside a pattern run as one operator */
    ROLE_LN_HEAD,       /* a decomposed LayerNorm's first member */
    ROLE_ACT_HEAD,      /* a decomposed GELU (erf) or SiLU's first member */
    ROLE_ATTN_HEAD,     /* a fused attention's first member */
    ROLE_ATTN_OUT,      /* a fused attention's product with V (keeps the output) */
    ROLE_GUARD          /* eager: the NaN guard, a view of the probabilities */
};

/* Tensor-parallel class of a node (Megatron-LM's splits by role). */
enum { TPC_NONE = 0, TPC_COL, TPC_ROW, TPC_REP, TPC_EMBED, TPC_HEAD };

static bool norm_whole(const mp_pnorm *nm) {
    return nm->form == MP_FORM_DECOMPOSED && nm->kind == MP_NORM_LAYER;
}

static bool act_whole(const mp_pact *a) {
    return a->form == MP_FORM_DECOMPOSED &&
           (a->kind == MP_ACT_GELU || a->kind == MP_ACT_SILU || a->kind == MP_ACT_MISH ||
            (a->kind == MP_ACT_GELU_TANH && a->one_op)) &&
           a->n > 1;
}

/* What attention a reads as Q, K or V, before a member of its own (a scale
 * split over Q and K, the transposes and reshapes of K, a repetition of
 * grouped heads): the tensor scaled_dot_product_attention is given. */
static int attn_source(const pctx *c, int a, int v) {
    const mp_graph *g = c->g;
    for (int hop = 0; v >= 0 && hop < 16; hop++) {
        int p = g->values[v].producer;
        if (p < 0) break;
        mp_pref r = mp_pattern_at(c->P, p);
        if (r.kind != MP_PAT_ATTN || r.index != a) break;
        const mp_node *n = &g->nodes[p];
        int next = -1;
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] >= 0 && !c->cst[n->in[i]] && mp_dtype_is_float(g->values[n->in[i]].dtype)) {
                next = n->in[i];
                break;
            }
        v = next;
    }
    return v;
}

/* --dropout P: the dropouts a trainer runs where an eval-mode export has
 * none, at the places Hugging Face's encoders and GPT-2/OPT put them
 * (hidden_dropout_prob, attention_probs_dropout_prob; BertSelfOutput,
 * BertOutput, BertEmbeddings, eager_attention_forward): the output of each
 * block's attention output projection and of its MLP's down projection,
 * the embedding's output, and eager attention's probabilities (fused SDPA
 * drops inside its kernel and keeps only its generator's seed and
 * offset). Each keeps native_dropout's mask, 1 B an element; the
 * probabilities' dropout also keeps its output, which the product with V
 * reads in its backward (the softmax keeps its own output), unless
 * autocast casts it for that product (the cast copy is kept either way).
 * One kernel
 * each way: x read, y and the mask written; the gradient and the mask
 * read, the gradient written. */
static void dropout_keep(pctx *c, int ni, const mp_node *n, mp_pnode *pn) {
    const mp_patterns *P = c->P;
    if (!P || n->n_out < 1 || n->out[0] < 0 || !mp_dtype_is_float(c->g->values[n->out[0]].dtype)) return;
    bool hidden = ni == P->embed, probs = false;
    for (int b = 0; !hidden && b < P->n_blocks; b++)
        hidden = P->blocks[b].w[MP_WROLE_O].node == ni || P->blocks[b].w[MP_WROLE_DOWN].node == ni;
    for (int i = 0; !hidden && !probs && i < P->n_attn; i++)
        probs = P->attn[i].softmax == ni && c->role[ni] == ROLE_OWN;
    if (!hidden && !probs) return;
    int v = n->out[0];
    uint64_t e = bscale(c, mp_tplan_numel(&c->g->values[v])), dt = (uint64_t)dt_size(c->adt[v]);
    /* the dropped probabilities are a tensor of their own for the product
     * with V, except under autocast, where that product keeps its 16-bit
     * cast copy with dropout or without */
    uint64_t kept = e + (probs && !c->mixed ? e * dt : 0);
    if (probs && pn->split) pn->saved_split += kept;
    else pn->saved_rep += kept;
    pn->aux_fwd += e * (2 * dt + 1);
    pn->aux_bwd += e * (2 * dt + 1);
    pn->n_aux_fwd++;
    pn->n_aux_bwd++;
    c->pl->dropout_bytes += kept;
    c->pl->dropout_sites++;
}

/* Roles and tensor-parallel classes of every node from the patterns. */
static void plan_roles(pctx *c) {
    const mp_patterns *P = c->P;
    bool fused = c->pl->o.attention_fused != 0; /* inference runs the same SDPA */
    for (int i = 0; P && i < P->n_norms; i++) {
        const mp_pnorm *nm = &P->norms[i];
        if (!norm_whole(nm)) continue;
        for (int k = 0; k < nm->n; k++) c->role[P->members[nm->first + k].node] = k ? ROLE_MEMBER : ROLE_LN_HEAD;
    }
    for (int i = 0; P && i < P->n_acts; i++) {
        const mp_pact *a = &P->acts[i];
        if (!act_whole(a)) continue;
        for (int k = 0; k < a->n; k++) c->role[P->members[a->first + k].node] = k ? ROLE_MEMBER : ROLE_ACT_HEAD;
    }
    for (int i = 0; P && i < P->n_attn; i++) {
        const mp_pattn *a = &P->attn[i];
        if (a->op >= 0) { /* an operator: its own rule, one fused kernel */
            c->pl->attn_fused++;
            continue;
        }
        /* scaled_dot_product_attention's backend (PyTorch's sdp_utils):
         * flash in fp16 and bf16; memory-efficient in fp32, which does not
         * take grouped K/V heads (enable_gqa): then the math backend, which
         * repeats K and V and keeps the probabilities, as the graph's
         * operators do */
        /* softcapping (Gemma-2's attn_logit_softcapping): SDPA takes
         * none, so such an attention runs eager, as written (Gemma-2's
         * eager or flash-attention 2 implementations) */
        bool soft = a->softcap != 0;
        bool math = fused && !soft && !c->mixed && c->base_dt == MP_DT_FLOAT && a->kv_heads > 0 &&
                    a->heads > a->kv_heads;
        c->pl->attn_math += math;
        c->pl->attn_fused += fused && !math && !soft;
        c->pl->attn_softcap += fused && soft;
        bool f = fused && !math && !soft;
        for (int k = 0; k < a->n; k++) {
            const mp_pmember *mb = &P->members[a->first + k];
            if (f) c->role[mb->node] = mb->node == a->pv ? ROLE_ATTN_OUT : k ? ROLE_MEMBER : ROLE_ATTN_HEAD;
            else if (mb->part == MP_PART_GUARD) c->role[mb->node] = ROLE_GUARD;
        }
        if (f && a->pv >= 0 && P->members[a->first].node == a->pv) c->role[a->pv] = ROLE_ATTN_HEAD;
    }
    /* tensor parallelism: column-parallel q, k, v, qkv, up, gate; row-parallel
     * o and down; K and V replicated where tp does not divide the KV heads;
     * the embedding and the LM head split over the vocabulary */
    for (int b = 0; P && b < P->n_blocks; b++) {
        const mp_pblock *B = &P->blocks[b];
        for (int r = 0; r < MP_WROLE_COUNT; r++) {
            int n = B->w[r].node;
            if (n < 0) continue;
            bool kv = r == MP_WROLE_K || r == MP_WROLE_V;
            c->tpc[n] = r == MP_WROLE_O || r == MP_WROLE_DOWN ? TPC_ROW
                        : kv && c->kv_rep ? TPC_REP : TPC_COL;
        }
    }
    if (P && P->embed >= 0) c->tpc[P->embed] = TPC_EMBED;
    if (P && P->lm_head >= 0) c->tpc[P->lm_head] = TPC_HEAD;
}

/* A causal attention planned fused runs as SDPA with is_causal (how
 * transformers calls it when no token is padded; the exporter traced an
 * explicit mask instead): the kernel skips the tiles above the diagonal
 * (mp_sdpa_causal_share, where queries and keys are the same tokens). A
 * sliding window narrower than the keys needs its mask: all tiles run. */
static void causal_skip(pctx *c, const mp_pattn *a, mp_pnode *pn) {
    if (!mp_pattn_causal(a) || a->cross || a->seq_q <= 0 || a->seq_q != a->seq_k) return;
    if (a->window > 0 && a->window < a->seq_k) return;
    double sh = mp_sdpa_causal_share((double)a->seq_q, (double)a->seq_k);
    if (!(sh < 1.0)) return;
    pn->skipped = 1.0 - sh;
    c->pl->attn_causal++;
    if (c->pl->attn_causal_share == 0 || sh < c->pl->attn_causal_share) c->pl->attn_causal_share = sh;
}

/* The group a head node runs as one kernel: the FLOPs of its members and
 * their traffic (what the group reads from outside it and writes for
 * outside it, once). */
static void group_figures(const pctx *c, int kind, int index, uint64_t *flops, uint64_t *act_io, uint64_t *w_io) {
    const mp_patterns *P = c->P;
    const mp_graph *g = c->g;
    int first = 0, n = 0;
    if (kind == MP_PAT_NORM) first = P->norms[index].first, n = P->norms[index].n;
    else if (kind == MP_PAT_ACT) first = P->acts[index].first, n = P->acts[index].n;
    else first = P->attn[index].first, n = P->attn[index].n;
    *flops = *act_io = *w_io = 0;
    int seen[16], ns = 0;
    for (int k = 0; k < n; k++) {
        const mp_node *m = &g->nodes[P->members[first + k].node];
        *flops += m->cost.flops;
        for (int i = 0; i < m->n_in; i++) {
            int v = m->in[i];
            if (v < 0 || c->cst[v]) continue;
            int p = g->values[v].producer;
            mp_pref r = p >= 0 ? mp_pattern_at(P, p) : (mp_pref){MP_PAT_NONE, -1, 0};
            if (r.kind == kind && r.index == index) continue; /* made inside */
            int s = 0;
            while (s < ns && seen[s] != v) s++;
            if (s < ns) continue; /* read once */
            if (ns < 16) seen[ns++] = v;
            if (param_like(c, v)) *w_io += v_bytes(c, v);
            else *act_io += v_bytes(c, v);
        }
    }
    if (kind == MP_PAT_NORM) *act_io += v_bytes(c, P->norms[index].y);
    else if (kind == MP_PAT_ACT) *act_io += v_bytes(c, P->acts[index].y);
}

/* ---- LoRA adapters and a quantized base (finetune.c; docs/PLANNING.md
 * section 12) ----
 * PEFT's LoRA Linear computes result + lora_B(lora_A(dropout(x))) * scaling
 * (peft/tuners/lora/layer.py, Linear.forward), after casting x to the
 * adapters' type, fp32 (_cast_input_dtype; get_peft_model's
 * autocast_adapter_dtype=True upcasts bf16/fp16 adapters to fp32). What
 * its backward keeps: lora_A's input (x itself when nothing casts it; a
 * copy when PEFT or autocast casts it; with dropout the mask, a byte an
 * element, and the dropped copy) and lora_A's output (tokens x rank) for
 * lora_B's weight gradient; the scaling and the sum keep nothing. */
static void lora_keep(pctx *c, const mp_node *n, int ni, mp_pnode *pn, int stamp) {
    mp_tplan *pl = c->pl;
    const mp_tplan_options *o = &pl->o;
    int x = n->n_in > 0 ? n->in[0] : -1;
    uint64_t fi = pl->lora_in[ni], fo = pl->lora_out[ni], R = (uint64_t)o->lora_rank;
    pn->lora_a = fi * R;
    pn->lora_b = R * fo;
    if (x < 0 || fi == 0) return;
    uint64_t T = mp_tplan_numel(&c->g->values[x]) / fi;
    int cs = dt_size(c->mixed ? c->low_dt : MP_DT_FLOAT); /* lora_A runs in autocast's type, else fp32 */
    uint64_t b = T * R * (uint64_t)cs;                    /* lora_A's output, kept by lora_B */
    bool shared = false;
    if (o->lora_dropout > 0) b += T * fi * (1 + (uint64_t)cs); /* the mask and the dropped copy */
    else if (!c->mixed && c->adt[x] == MP_DT_FLOAT) shared = true;
    else b += T * fi * (uint64_t)cs;                      /* x cast to the adapters' (or autocast's) type */
    uint64_t rep = bscale(c, b), spl = 0;
    if (shared) {
        bool sp;
        uint64_t k = keep(c, x, -1, stamp, &sp, NULL);
        if (sp) spl += k;
        else rep += k;
    }
    if (c->mixed) { /* autocast's cached low-precision copies of A and B */
        uint64_t w = R * (fi + fo) * (uint64_t)dt_size(c->low_dt);
        rep += w;
        pn->cast_rep += w;
        pl->cast_param_bytes += w;
    }
    pn->saved_rep += rep;
    pn->saved_split += spl;
}

/* The adapters' work: forward x.A (2 T in r), h.B (2 T r out), the scaling
 * and the sum; backward dB and dh (2 T r out each), dA (2 T in r), dx
 * through A when x needs a gradient (2 T in r), the scaling's gradient. A
 * quantized weight is dequantized to the compute type before its product
 * in the forward and again in the backward (bitsandbytes' dequantize_4bit
 * in MatMul4Bit): a transient of the weight's size, read and written. */
static void lora_work(pctx *c, const mp_node *n, int ni, mp_pnode *pn) {
    mp_tplan *pl = c->pl;
    const mp_graph *g = c->g;
    int x = n->n_in > 0 ? n->in[0] : -1;
    int cs = dt_size(c->mixed ? c->low_dt : c->base_dt);
    if (pl->adapted && pl->adapted[ni] && x >= 0 && pl->lora_in[ni]) {
        uint64_t fi = pl->lora_in[ni], fo = pl->lora_out[ni], R = (uint64_t)pl->o.lora_rank;
        uint64_t T = bscale(c, mp_tplan_numel(&g->values[x]) / fi);
        int as = dt_size(c->mixed ? c->low_dt : MP_DT_FLOAT);
        uint64_t fwd = 2 * T * R * (fi + fo) + 2 * T * fo;
        uint64_t bwd = 4 * T * R * fo + 2 * T * fi * R + (c->rg[x] ? 2 * T * fi * R : 0) + T * fo;
        pn->fwd_flops += fwd;
        pn->bwd_flops += bwd;
        pl->lora_fwd_flops += fwd;
        pl->lora_bwd_flops += bwd;
        uint64_t io = T * fi * (uint64_t)dt_size(c->adt[x]) + 2 * T * R * (uint64_t)as + 3 * T * fo * (uint64_t)as +
                      R * (fi + fo) * 4;
        pn->aux_fwd += io;
        pn->n_aux_fwd += 4 + (pl->o.lora_dropout > 0);
        pn->aux_bwd += 2 * io;
        pn->n_aux_bwd += 5;
    }
    if (pl->pquant && n->n_in > 1 && n->in[1] >= 0) {
        int w = mp_tplan_weight_of(g, n->in[1]);
        if (w >= 0 && pl->pquant[w]) {
            const mp_value *val = &g->values[w];
            uint64_t e = mp_tplan_numel(val);
            uint64_t q = (uint64_t)mp_tplan_quant_bytes(&pl->o, e, val->rank >= 1 ? (uint64_t)val->dims[0] : 1);
            uint64_t deq = e * (uint64_t)cs;
            if (deq > pn->temp) pn->temp = deq;
            pn->aux_fwd += q + deq;
            pn->n_aux_fwd++;
            if (x >= 0 && c->rg[x]) {
                pn->aux_bwd += q + deq;
                pn->n_aux_bwd++;
            }
        }
    }
}

static mp_status graph_pass(pctx *c) {
    mp_tplan *pl = c->pl;
    mp_graph *g = c->g;
    const mp_tplan_options *o = &pl->o;
    const mp_patterns *P = c->P;
    int nv = g->n_values, nn = g->n_nodes;
    pl->n_nodes = nn;
    pl->nodes = mp_arena_calloc(&pl->arena, (size_t)(nn ? nn : 1), sizeof(mp_pnode));
    pl->default_ops = mp_arena_calloc(&pl->arena, (size_t)(nn ? nn : 1), sizeof(char *));
    pl->default_counts = mp_arena_calloc(&pl->arena, (size_t)(nn ? nn : 1), sizeof(int));
    pl->tp_ops = mp_arena_calloc(&pl->arena, (size_t)(nn ? nn : 1), sizeof(char *));
    pl->tp_split = mp_arena_calloc(&pl->arena, (size_t)(nn ? nn : 1), sizeof(int));
    pl->tp_rep = mp_arena_calloc(&pl->arena, (size_t)(nn ? nn : 1), sizeof(int));
    c->rg = calloc((size_t)nv + 1, 1);
    c->cst = calloc((size_t)nv + 1, 1);
    c->split = calloc((size_t)nv + 1, 1);
    c->pflag = calloc((size_t)nv + 1, 1);
    c->noncontig = calloc((size_t)nv + 1, 1);
    c->charged = calloc((size_t)nv + 1, 1);
    pl->param_split = mp_arena_calloc(&pl->arena, (size_t)nv + 1, 1);
    c->adt = calloc((size_t)nv + 1, sizeof(int));
    c->stor = calloc((size_t)nv + 1, sizeof(int));
    c->seen = calloc((size_t)nv + 1, sizeof(int));
    c->node_repeat = calloc((size_t)nn + 1, sizeof(int));
    c->role = calloc((size_t)nn + 1, 1);
    c->tpc = calloc((size_t)nn + 1, 1);
    c->first_unit = calloc((size_t)nv + 1, sizeof(int));
    size_t all_in = 1;
    for (int ni = 0; ni < nn; ni++) all_in += (size_t)g->nodes[ni].n_in;
    pl->pparams = mp_arena_calloc(&pl->arena, all_in, sizeof(int));
    int n_role = pl->p->role_params ? pl->p->params_by_role_n : 0;
    pl->proles = mp_arena_calloc(&pl->arena, (size_t)n_role + 1, sizeof(int));
    pl->role_split = mp_arena_calloc(&pl->arena, (size_t)n_role + 1, 1);
    /* the role parameters each node took first, in the signature's order:
     * role_head[node], then role_next[r] */
    int *role_head = mp_arena_calloc(&pl->arena, (size_t)nn + 1, sizeof(int));
    int *role_next = mp_arena_calloc(&pl->arena, (size_t)n_role + 1, sizeof(int));
    if (!pl->nodes || !pl->default_ops || !pl->default_counts || !pl->tp_ops || !pl->tp_split || !pl->tp_rep ||
        !c->rg || !c->cst || !c->split || !c->pflag || !c->noncontig || !c->charged || !pl->param_split ||
        !c->adt || !c->stor || !c->seen || !c->node_repeat || !c->role || !c->tpc || !c->first_unit ||
        !pl->pparams || !pl->proles || !pl->role_split || !role_head || !role_next)
        return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int ni = 0; ni < nn; ni++) role_head[ni] = -1;
    for (int r = n_role - 1; r >= 0; r--) {
        int ni = pl->p->role_params[r].node;
        role_next[r] = ni >= 0 && ni < nn ? role_head[ni] : -1;
        if (ni >= 0 && ni < nn) role_head[ni] = r;
    }

    for (int v = 0; v < nv; v++) {
        const mp_value *val = &g->values[v];
        c->stor[v] = v;
        if (val->flags & MP_VAL_PARAM) c->rg[v] = pl->ptrain ? pl->ptrain[v] : 1; /* frozen: no gradient */
        if ((val->flags & (MP_VAL_INIT | MP_VAL_CONST)) && !(val->flags & MP_VAL_PARAM)) c->cst[v] = 1;
    }
    c->model_dt = pl->model_dt;
    for (int v = 0; v < nv; v++) c->adt[v] = map_float(c, g->values[v].dtype);

    /* constants first (the groups ask which inputs are constant). Contents
     * inference knows make a value constant (shape arithmetic), unless it is
     * a float computed from a parameter (a small weight's transpose) */
    for (int k = 0; k < nn; k++) {
        const mp_node *n = &g->nodes[g->order[k]];
        bool all_const = n->n_in > 0 || mp_streq(n->op, "Constant") || mp_streq(n->op, "ConstantOfShape");
        bool any_rg = (pl->adapted && pl->adapted[g->order[k]]) || /* a LoRA adapter's output needs a gradient */
                      (c->input_grads && P && g->order[k] == P->embed);
        for (int i = 0; i < n->n_in; i++) {
            if (n->in[i] >= 0 && !c->cst[n->in[i]]) all_const = false;
            if (n->in[i] >= 0 && c->rg[n->in[i]]) any_rg = true;
        }
        bool buffer_copy = is_buffer_copy(g, n);
        for (int i = 0; i < n->n_out; i++) {
            int v = n->out[i];
            if (v < 0) continue;
            bool fl = mp_dtype_is_float(g->values[v].dtype);
            if (any_rg && fl && !buffer_copy) c->rg[v] = 1;
            if (all_const || (g->values[v].kn >= 0 && !(any_rg && fl))) c->cst[v] = 1;
        }
    }
    plan_roles(c);
    bool by_role = P && P->n_blocks > 0; /* else: the weight products of the blocks alternate */

    int *mrepeat = NULL;
    mp_status st = find_repeats(c);
    if (!st) st = module_repeats(c, &mrepeat);
    if (st) return st;

    int stamp_global = 1, last_unit = -1;
    uint64_t largest_layer = 0;
    for (int k = 0; k < nn; k++) {
        int ni = g->order[k];
        mp_node *n = &g->nodes[ni];
        mp_pnode *pn = &pl->nodes[k];
        int blk = n->module >= 0 && n->module < c->m->n_modules ? mrepeat[n->module] : -1;
        pn->repeat = blk;
        c->node_repeat[ni] = blk;
        /* constants and shape arithmetic: outputs of nodes whose inputs are
         * all constant are constant (folded: no memory, no time) */
        bool all_const = true, any_rg = (pl->adapted && pl->adapted[ni]) || (c->input_grads && P && ni == P->embed);
        uint32_t rg = 0;
        for (int i = 0; i < n->n_in; i++) {
            int v = n->in[i];
            if (v < 0) continue;
            if (!c->cst[v]) all_const = false;
            if (c->rg[v] && i < 32) {
                rg |= 1u << i;
                any_rg = true;
            }
        }
        if (n->n_in == 0) all_const = mp_streq(n->op, "Constant") || mp_streq(n->op, "ConstantOfShape");
        bool buffer_copy = is_buffer_copy(g, n);
        for (int i = 0; i < n->n_out; i++) {
            int v = n->out[i];
            if (v < 0) continue;
            const mp_value *val = &g->values[v];
            bool fl = mp_dtype_is_float(val->dtype);
            if (all_const || (val->kn >= 0 && !(any_rg && fl))) c->cst[v] = 1;
            if (any_rg && fl && !buffer_copy) c->rg[v] = 1;
        }
        if (all_const) {
            pn->repeat = -1; /* folded: no stage's work */
            continue;
        }
        /* the block a node outside the blocks goes with: the one before it */
        if (blk >= 0) last_unit = blk;
        pn->unit = blk >= 0 ? blk : (last_unit >= 0 ? last_unit : 0);
        c->cur_unit = pn->unit;

        /* the node's own rule gives its autocast class and whether it is a
         * view; its role in a pattern may say what is kept instead */
        int role = c->role[ni];
        mp_pref ref = mp_pattern_at(P, ni);
        mp_bwd t;
        memset(&t, 0, sizeof t);
        /* a GroupNorm's on a graph input whose weight trains: as for an
         * input needing a gradient (its input and statistics kept) */
        t.rg = rg ? rg : groupnorm_weight_trains(c, n) ? 1u : 0u;
        t.fwd = &n->cost;
        t.torch_1_13 = o->torch_version == 1;
        if (n->desc && n->desc->train) {
            mp_ctx cx = {c->m, g, n, ni};
            n->desc->train(&cx, &t);
        } else {
            /* the default: every input kept, bwd = 2 x fwd */
            if (role == ROLE_OWN) {
                pn->default_rule = true;
                note_default(pl, n->op);
            }
            if (rg) t.save_in = n->n_in >= 32 ? 0xffffffffu : (1u << n->n_in) - 1u;
            t.bwd_flops = rg ? 2 * n->cost.flops : 0;
        }
        if (!rg) t.bwd_flops = 0;
        if (groupnorm_affine(c, n) || glu_sigmoid(c, n)) t.save_in = t.save_out = 0, t.extra_bytes = 0;
        /* the GLU's product keeps the halves of x, not the Sigmoid's output */
        for (int i = 0; i < n->n_in && i < 32 && mp_streq(n->op, "Mul"); i++)
            if (n->in[i] >= 0 && g->values[n->in[i]].producer >= 0 &&
                glu_sigmoid(c, &g->nodes[g->values[n->in[i]].producer]))
                t.save_in &= ~(1u << i);
        int keep_v[3] = {-1, -1, -1}; /* values a group's head keeps for the group */
        if (role != ROLE_OWN && role != ROLE_GUARD) {
            t.save_in = t.save_out = 0;
            t.extra_bytes = 0;
            t.bwd_flops = 0;
            t.view = false;
        }
        bool ln_w = role == ROLE_LN_HEAD && norm_weights_train(c, &P->norms[ref.index]);
        if (role == ROLE_LN_HEAD && (rg || ln_w)) {
            /* F.layer_norm: its input and a mean and 1/std per row, fp32 */
            const mp_pnorm *nm = &P->norms[ref.index];
            const mp_value *x = &g->values[nm->x];
            uint64_t rows = x->rank >= 1 && x->dims[x->rank - 1] > 0 ? mp_tplan_numel(x) / (uint64_t)x->dims[x->rank - 1] : 0;
            keep_v[0] = nm->x;
            t.extra_bytes = 2 * 4 * rows;
            t.amp = MP_AMP_FP32;
        } else if (role == ROLE_ACT_HEAD && rg) {
            keep_v[0] = P->acts[ref.index].x; /* F.gelu, F.silu, F.mish: the input */
        } else if (role == ROLE_ATTN_HEAD && rg) {
            const mp_pattn *a = &P->attn[ref.index];
            keep_v[0] = attn_source(c, ref.index, a->q);
            keep_v[1] = attn_source(c, ref.index, a->k_kv);
            keep_v[2] = attn_source(c, ref.index, a->v_kv);
        }
        if (role == ROLE_ATTN_OUT && rg) {
            /* the attention's output and a log-sum-exp per query row and head */
            const mp_pattn *a = &P->attn[ref.index];
            t.save_out = 1u;
            int64_t rows = a->batch * a->heads * a->seq_q;
            t.extra_bytes = a->batch > 0 && a->heads > 0 && a->seq_q > 0 ? 4 * (uint64_t)rows : 0;
        }

        /* types under the plan */
        int amp = t.amp;
        if (role == ROLE_ATTN_HEAD || role == ROLE_ATTN_OUT) amp = MP_AMP_LOWER; /* SDPA */
        if (amp == MP_AMP_LOSS) amp = MP_AMP_FP32;
        else if (amp == MP_AMP_FP32 && pl->o.autocast_cpu) amp = MP_AMP_PROMOTE;
        /* CPU autocast in PyTorch 1.13 has conv_transpose1d/2d/3d on its fp32
         * list (it casts a bf16 input up); PyTorch 2's lowers them, as CUDA's */
        if (amp == MP_AMP_LOWER && pl->o.autocast_cpu && o->torch_version == 1 && mp_streq(n->op, "ConvTranspose"))
            amp = MP_AMP_FP32;
        if (!c->mixed && amp != MP_AMP_KEEP) amp = MP_AMP_PROMOTE;
        int act_dt = -1, any_dt = -1;
        for (int i = 0; i < n->n_in; i++) {
            int v = n->in[i];
            if (v < 0 || !mp_dtype_is_float(c->adt[v])) continue;
            any_dt = wider(any_dt, c->adt[v]);
            if ((!c->cst[v] && !param_like(c, v)) || (c->mixed && param_promotes(c, n, i)))
                act_dt = wider(act_dt, c->adt[v]);
        }
        int out_dt = act_dt >= 0 ? act_dt : any_dt >= 0 ? any_dt : c->base_dt;
        if (amp == MP_AMP_LOWER) out_dt = c->low_dt;
        else if (amp == MP_AMP_FP32) out_dt = MP_DT_FLOAT;
        /* softmax(x, dtype=D): the TorchScript exporter writes a Cast to D
         * after the Softmax, PyTorch casts first and keeps D */
        if ((mp_streq(n->op, "Softmax") || mp_streq(n->op, "LogSoftmax")) && n->n_out > 0 && n->out[0] >= 0) {
            int u = mp_sole_use(g, n->out[0]);
            const mp_node *q = u >= 0 ? &g->nodes[u] : NULL;
            if (q && mp_streq(q->op, "Cast") && q->n_out > 0 && q->out[0] >= 0 &&
                mp_dtype_is_float(g->values[q->out[0]].dtype))
                out_dt = c->adt[q->out[0]];
        }
        pn->lower = amp == MP_AMP_LOWER || (!c->mixed && c->base_dt != MP_DT_FLOAT);
        if (role != ROLE_GUARD)
            for (int i = 0; i < n->n_out; i++) {
                int v = n->out[i];
                if (v < 0) continue;
                if (amp != MP_AMP_KEEP && mp_dtype_is_float(g->values[v].dtype)) c->adt[v] = out_dt;
            }
        if (role == ROLE_GUARD) {
            /* eager attention has no NaN guard: IsNaN is nothing, its Where
             * the probabilities themselves */
            t.save_in = t.save_out = 0;
            t.extra_bytes = t.bwd_flops = 0;
            int p = -1;
            for (int i = 0; i < n->n_in; i++)
                if (n->in[i] >= 0 && !c->cst[n->in[i]] && mp_dtype_is_float(g->values[n->in[i]].dtype)) p = n->in[i];
            if (p >= 0 && n->n_out > 0 && n->out[0] >= 0 && mp_dtype_is_float(g->values[n->out[0]].dtype)) {
                c->adt[n->out[0]] = c->adt[p];
                c->stor[n->out[0]] = c->stor[p];
                c->noncontig[n->out[0]] = c->noncontig[p];
            }
        }
        bool copied = false; /* a reshape of a non-contiguous tensor: contiguous() and view */
        /* a Cast to the type it already has is PyTorch's no-op .to() */
        bool same_cast = (mp_streq(n->op, "Cast") || mp_streq(n->op, "CastLike")) && n->n_in > 0 &&
                         n->in[0] >= 0 && n->n_out > 0 && n->out[0] >= 0;
        if ((t.view || same_cast) && role != ROLE_GUARD && n->n_in > 0 && n->in[0] >= 0 && n->n_out > 0 &&
            n->out[0] >= 0 && c->adt[n->out[0]] == c->adt[n->in[0]]) {
            /* PyTorch's transpose is a view with other strides, and so are
             * slices (Slice, Split, a scalar Gather) off the leading dim;
             * reshaping a non-contiguous tensor copies it (reshape,
             * contiguous().view) */
            bool transpose = mp_streq(n->op, "Transpose");
            bool slice = mp_streq(n->op, "Slice") || mp_streq(n->op, "Split") || mp_streq(n->op, "Gather");
            /* expand: a view whose broadcast dims have stride 0 */
            bool expand = mp_streq(n->op, "Expand");
            int x = n->in[0];
            if (!transpose && !slice && !expand && c->noncontig[x] && !mp_streq(n->op, "Identity") && !same_cast) {
                t.view = false; /* a copy: the output is a storage of its own */
                copied = true;
            } else {
                uint8_t nc = c->noncontig[x];
                if (transpose) nc |= perm_moves(n, &g->values[x]);
                if (slice) nc |= slice_strided(c, n, &g->values[x]);
                if (expand && mp_tplan_numel(&g->values[n->out[0]]) > mp_tplan_numel(&g->values[x])) nc |= 1;
                for (int i = 0; i < n->n_out; i++) {
                    int y = n->out[i];
                    if (y < 0) continue;
                    c->stor[y] = c->stor[x];
                    c->noncontig[y] = nc;
                }
                t.view = true;
            }
        }
        /* a Linear's bias added after its MatMul (the TorchScript exporter's
         * form of F.linear for an input of rank 3 or more) writes no tensor
         * of its own: PyTorch runs addmm on the flattened input, or the
         * product then bias.add_ in place (aten/src/ATen/native/Linear.cpp),
         * so the sum is the product's storage */
        if (mp_streq(n->op, "Add") && n->n_out > 0 && n->out[0] >= 0 && role != ROLE_GUARD)
            for (int i = 0; i < 2; i++) {
                int x = n->in[1 - i];
                if (!linear_bias_add(c, n, i) || mp_sole_use(g, x) != ni || c->adt[n->out[0]] != c->adt[x]) continue;
                c->stor[n->out[0]] = c->stor[x];
                c->noncontig[n->out[0]] = c->noncontig[x];
                break;
            }

        /* tensor parallelism (Megatron-LM): column-parallel products split
         * their output, row-parallel ones their input (an all-reduce of the
         * output after); what lies between works on split tensors; norms
         * and residuals stay whole. Split figures always: --tp and --fit's
         * layouts use them. */
        bool split = false;
        int act = n->n_in > 0 ? n->in[0] : -1;
        int cls = c->tpc[ni];
        if (!by_role && blk >= 0 && is_weight_product(c, n, &act)) cls = c->split[act] ? TPC_ROW : TPC_COL;
        if (cls == TPC_COL || cls == TPC_HEAD || cls == TPC_ROW) {
            split = true;
            int w = n->n_in > 1 ? n->in[1] : -1;
            if (w >= 0) split_param(c, w);
            /* a column split's bias is split; a row split adds its bias after the all-reduce */
            if (cls != TPC_ROW && n->n_in > 2 && n->in[2] >= 0) split_param(c, n->in[2]);
            for (int i = 0; i < n->n_out; i++)
                if (n->out[i] >= 0) c->split[n->out[i]] = cls != TPC_ROW;
            if (cls == TPC_ROW) {
                /* forward: an all-reduce of the output */
                pn->tp_comm = bscale(c, n->n_out > 0 && n->out[0] >= 0 ? v_bytes(c, n->out[0]) : 0);
            } else if (act >= 0 && !c->charged[c->stor[act]]) {
                /* backward: an all-reduce of the input's gradient, once for
                 * the products sharing an input (q, k and v; gate and up) */
                c->charged[c->stor[act]] = 1;
                pn->tp_comm = bscale(c, v_bytes(c, act));
            }
        } else if (cls == TPC_EMBED) {
            /* vocabulary-parallel: each rank holds rows of the table, the
             * output is all-reduced in the forward */
            split = true;
            if (n->n_in > 0 && n->in[0] >= 0 && param_like(c, n->in[0])) split_param(c, n->in[0]);
            pn->tp_comm = bscale(c, n->n_out > 0 && n->out[0] >= 0 ? v_bytes(c, n->out[0]) : 0);
        } else if (cls == TPC_NONE) {
            /* a norm of the residual stream reads it whole and stays whole;
             * one on split heads (Qwen3's q_norm, k_norm) is split with them */
            for (int i = 0; i < n->n_in; i++)
                if (n->in[i] >= 0 && c->split[n->in[i]]) split = true;
            for (int i = 0; i < n->n_out && split; i++)
                if (n->out[i] >= 0) c->split[n->out[i]] = 1;
            for (int i = 0; i < n->n_in && split; i++) /* a split product's bias */
                if (n->in[i] >= 0 && param_like(c, n->in[i])) split_param(c, n->in[i]);
        }
        pn->split = split;
        bool shape_only = outputs_const(c, n); /* Shape, Size: outputs known, no work */
        if (shape_only) {
            /* counted nowhere */
        } else if (split) {
            pl->split_nodes++;
        } else if (blk >= 0) {
            pl->replicated_nodes++;
        }
        if ((blk >= 0 || split) && !shape_only) {
            int i = 0;
            while (i < pl->n_tp_ops && !mp_streq(pl->tp_ops[i], n->op)) i++;
            if (i == pl->n_tp_ops) pl->tp_ops[pl->n_tp_ops++] = n->op;
            if (split) pl->tp_split[i]++;
            else pl->tp_rep[i]++;
        }

        /* what the backward keeps */
        int stamp = (pl->o.checkpointing && blk >= 0) ? -(blk + 10) : stamp_global;
        uint64_t cross = 0;
        int cross_unit = -1;
        c->cross = &cross;
        c->cross_unit = &cross_unit;
        uint64_t rep = 0, spl = 0;
        int want = amp == MP_AMP_LOWER ? c->low_dt : amp == MP_AMP_FP32 ? MP_DT_FLOAT : -1;
        for (int i = 0; i < n->n_in + 3 && i < 32 + 3; i++) {
            int v;
            if (i < n->n_in) {
                if (i >= 32 || !(t.save_in & (1u << i))) continue;
                v = n->in[i];
            } else {
                v = keep_v[i - n->n_in];
            }
            if (v < 0) continue;
            bool sp;
            uint64_t cb = 0, b;
            if (i < n->n_in && role == ROLE_OWN && product_copies(c, n, i) &&
                !(want >= 0 && mp_dtype_is_float(c->adt[v]) && want != c->adt[v])) {
                /* matmul's reshape copied it: the copy is kept, a tensor of its own */
                sp = c->split[v];
                b = bscale(c, v_bytes(c, v));
            } else {
                b = keep(c, v, want, stamp, &sp, &cb);
            }
            if (sp) spl += b;
            else rep += b;
            if (cb && (sp || pl->param_split[c->stor[v]])) pn->cast_split += cb;
            else pn->cast_rep += cb;
        }
        for (int i = 0; i < n->n_out && i < 32; i++) {
            if (!(t.save_out & (1u << i)) || n->out[i] < 0) continue;
            bool sp;
            uint64_t b = keep(c, n->out[i], -1, stamp, &sp, NULL);
            if (sp) spl += b;
            else rep += b;
        }
        if (split) spl += bscale(c, t.extra_bytes);
        else rep += bscale(c, t.extra_bytes);
        pn->saved_rep = rep;
        pn->saved_split = spl;
        if (c->training && pl->o.dropout > 0) dropout_keep(c, ni, n, pn);
        if (pl->adapted && pl->adapted[ni] && c->training) lora_keep(c, n, ni, pn, stamp);
        c->cross = NULL;
        pn->cross = cross;
        pn->cross_unit = cross_unit;

        /* parameters first used here; the largest layer (DeepSpeed's L) */
        uint64_t node_params = 0;
        pn->first_param = pl->n_pparams;
        const uint32_t *stand_in = pl->p->param_stand_in;
        for (int i = 0; i < n->n_in; i++) {
            int v = n->in[i];
            if (v < 0 || !(g->values[v].flags & MP_VAL_PARAM)) continue;
            /* a stand-in: the node took another declared parameter (a role
             * parameter, below), not the tensor it reads */
            if (stand_in && i < 32 && (stand_in[ni] >> i & 1)) continue;
            pl->pparams[pl->n_pparams++] = v;
            pn->n_params++;
            uint64_t e = mp_tplan_numel(&g->values[v]);
            node_params += e;
            if (c->pflag[v] & 2) continue;
            c->pflag[v] |= 2;
            if (split) pn->params_split += e;
            else pn->params_rep += e;
        }
        /* the declared parameters the graph does not hold that this node
         * took first (the profile's role_params): a column split's bias is
         * split, as is a norm's on split heads; others stay whole */
        pn->first_role = pl->n_proles;
        for (int r = role_head[ni]; r >= 0; r = role_next[r]) {
            const struct mp_role_param *rp = &pl->p->role_params[r];
            pl->proles[pl->n_proles++] = r;
            pn->n_roles++;
            pl->role_split[r] = split && cls != TPC_ROW;
            node_params += rp->numel;
            if (pl->role_split[r]) pn->params_split += rp->numel;
            else pn->params_rep += rp->numel;
        }
        if (node_params > largest_layer) largest_layer = node_params;

        /* autocast's casts (PyTorch's autocast casts every float input of
         * an operator of its lower-precision list that is not in that type
         * already: a kernel each, reading the input and writing the copy; a
         * weight once per forward, autocast's cache; the backward casts each
         * such gradient back) and the backward's kernels (one per gradient
         * it computes; a view's gradient is a view) */
        if (c->mixed && amp == MP_AMP_LOWER && role != ROLE_MEMBER && role != ROLE_ATTN_OUT) {
            for (int i = 0; i < n->n_in; i++) {
                int v = n->in[i];
                if (v < 0 || c->cst[v] || !mp_dtype_is_float(c->adt[v]) || c->adt[v] == c->low_dt) continue;
                bool w = param_like(c, v);
                if (w) {
                    int s = c->stor[v];
                    if (c->pflag[s] & 4) continue;
                    c->pflag[s] |= 4;
                    uint64_t cb = mp_tplan_numel(&g->values[v]) * (uint64_t)dt_size(c->low_dt);
                    pn->cast_first += pl->param_split[s] && o->tp > 1 ? cb / (uint64_t)o->tp : cb;
                }
                uint64_t b = mp_tplan_numel(&g->values[v]) * (uint64_t)(dt_size(c->adt[v]) + dt_size(c->low_dt));
                if (!w) b = bscale(c, b);
                pn->aux_fwd += b;
                pn->n_aux_fwd++;
                if (c->rg[v]) {
                    pn->aux_bwd += b;
                    pn->n_aux_bwd++;
                }
            }
        }
        /* cuDNN's tensor-core convolutions work channels-last: a 16-bit
         * convolution of PyTorch's default (channels-first, NCHW) tensors
         * transposes its input in and its output back (nchwToNhwc,
         * nhwcToNchw), and its backward the gradients and the input again
         * (--channels-last: none) */
        bool native_dw = role == ROLE_OWN && native_depthwise(c, n, out_dt, rg, pn);
        if (native_dw) pl->native_dw++;
        if (pn->lower && !o->channels_last && !native_dw && (mp_streq(n->op, "Conv") || mp_streq(n->op, "ConvTranspose")) &&
            n->n_in > 0 && n->in[0] >= 0 && g->values[n->in[0]].rank >= 4 && n->n_out > 0 && n->out[0] >= 0) {
            int ldt = c->mixed ? c->low_dt : c->base_dt;
            uint64_t io = (mp_tplan_numel(&g->values[n->in[0]]) + mp_tplan_numel(&g->values[n->out[0]])) *
                          (uint64_t)dt_size(ldt);
            pn->aux_fwd += bscale(c, 2 * io);
            pn->n_aux_fwd += 2;
            if (rg) {
                pn->aux_bwd += bscale(c, 4 * io);
                pn->n_aux_bwd += 4;
            }
        }
        bool diff = false; /* it passes a gradient back: a float output that needs one */
        for (int i = 0; i < n->n_out; i++)
            if (n->out[i] >= 0 && !c->cst[n->out[i]] && c->rg[n->out[i]] && mp_dtype_is_float(g->values[n->out[i]].dtype))
                diff = true;
        if (diff && !t.view && role != ROLE_MEMBER && role != ROLE_ATTN_OUT && role != ROLE_GUARD)
            for (int i = 0; i < n->n_in && i < 32; i++)
                if ((rg & (1u << i)) && !c->cst[n->in[i]]) pn->n_bwd_kernels++;
        if (role == ROLE_LN_HEAD || role == ROLE_ACT_HEAD || role == ROLE_ATTN_HEAD) pn->n_bwd_kernels = rg ? 1 : 0;
        if (role == ROLE_LN_HEAD && (rg || ln_w)) {
            /* F.layer_norm, as the LayerNormalization operator: a kernel per
             * gradient, its scale's and shift's too */
            const mp_pnorm *nm = &P->norms[ref.index];
            pn->n_bwd_kernels += (nm->scale >= 0 && c->rg[nm->scale]) + (nm->shift >= 0 && c->rg[nm->shift]);
        }
        /* a bias the exporter removed (zeros: a role parameter of this
         * product's) is PyTorch's, whose gradient the backward computes: a
         * row sum, a kernel (and for a Linear the sum and view operators,
         * dispatch_ops) */
        bool role_bias = diff && rg && has_role_bias(c, n, pn);
        if (role_bias) {
            pn->n_bwd_kernels++;
            t.bwd_flops += n->n_out > 0 && n->out[0] >= 0 ? mp_tplan_numel(&g->values[n->out[0]]) : 0;
        }
        /* operators PyTorch dispatches (host.c): one per node in the forward,
         * views and casts included, none for a pattern's members (one
         * operator for the group) nor eager attention's NaN guard (absent
         * in PyTorch); in the backward one autograd node per node that
         * passes a gradient, at least one operator (a view's is a view) */
        if (role != ROLE_MEMBER && role != ROLE_ATTN_OUT && role != ROLE_GUARD) {
            bool shape = shape_only;
            pn->n_fwd_ops = shape ? 0 : 1;
            bool one_op = one_op_backward(n) || role == ROLE_LN_HEAD; /* native_layer_norm_backward */
            if (diff && rg && !shape) pn->n_bwd_ops = (uint16_t)(pn->n_bwd_kernels > 1 && !one_op ? pn->n_bwd_kernels : 1);
            if (!shape && role == ROLE_OWN) dispatch_ops(c, n, rg, diff, pn);
            if (!shape && role_bias && !one_op) pn->n_bwd_ops += 2; /* the bias's sum and view */
            if (!shape && copied) pn->n_fwd_ops++; /* contiguous()'s clone before the view */
            if (mp_tplan_param_copy(g, n)) pn->n_fwd_ops = pn->n_bwd_ops = 0; /* a parameter of its own */
            if (linear_weight_view(c, n)) pn->n_fwd_ops = pn->n_bwd_ops = 0; /* F.linear's own t() */
        }
        gathered_bias(c, n, rg, pn);
        /* nn.BatchNorm in training counts its batches first
         * (num_batches_tracked.add_(1)): an operator and a kernel */
        if (c->training && mp_streq(n->op, "BatchNormalization") && (!n->domain || !n->domain[0])) pn->n_aux_fwd++;

        /* work and traffic; a node reading an activation works per sample.
         * A pattern run as one operator is one kernel: its head has the
         * group's FLOPs and traffic, its members none. */
        bool per_sample = false;
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] >= 0 && !c->cst[n->in[i]] && !param_like(c, n->in[i])) per_sample = true;
        uint64_t fwd = n->cost.flops, bwd = t.bwd_flops, recompute = t.recompute_flops, w_io = 0, act_io = 0;
        if (role == ROLE_LN_HEAD || role == ROLE_ACT_HEAD || role == ROLE_ATTN_HEAD) {
            group_figures(c, ref.kind, ref.index, &fwd, &act_io, &w_io);
            if (role == ROLE_ATTN_HEAD) {
                const mp_pattn *a = &P->attn[ref.index];
                /* q, k, v as given to the kernel and its output, in its type */
                int dt = c->mixed ? c->low_dt : -1;
                act_io = 0;
                int io_v[4] = {keep_v[0], keep_v[1], keep_v[2], a->y};
                for (int i = 0; i < 4; i++)
                    if (io_v[i] >= 0)
                        act_io += mp_tplan_numel(&g->values[io_v[i]]) * (uint64_t)dt_size(dt >= 0 ? dt : c->adt[io_v[i]]);
                /* the fused backward (mp_sdpa_flops, the one rule): the
                 * gradient products and the scores recomputed */
                if (rg && a->batch > 0 && a->heads > 0 && a->seq_q > 0 && a->seq_k > 0 && a->head_dim > 0) {
                    mp_sdpa_cost f = mp_sdpa_flops((double)a->batch * (double)a->heads, (double)a->seq_q,
                                                   (double)a->seq_k, (double)a->head_dim,
                                                   (double)(a->v_head_dim > 0 ? a->v_head_dim : a->head_dim));
                    bwd = f.bwd > 0 && f.bwd < 1.8e19 ? (uint64_t)f.bwd : 0;
                    recompute = f.recompute > 0 && f.recompute < 1.8e19 ? (uint64_t)f.recompute : 0;
                } else {
                    bwd = rg ? 2 * fwd : 0;
                }
                causal_skip(c, a, pn);
            } else {
                bwd = rg ? 2 * fwd : 0;
            }
        } else if (role == ROLE_MEMBER || role == ROLE_ATTN_OUT || role == ROLE_GUARD) {
            fwd = bwd = recompute = 0;
        } else if (shape_only) {
            fwd = bwd = recompute = 0; /* outputs known at plan time: no work */
        } else {
            for (int i = 0; i < n->n_in; i++)
                if (n->in[i] >= 0 && !c->cst[n->in[i]]) {
                    uint64_t b = v_bytes(c, n->in[i]);
                    if (c->mixed && amp == MP_AMP_LOWER && mp_dtype_is_float(c->adt[n->in[i]]))
                        b = mp_tplan_numel(&g->values[n->in[i]]) * (uint64_t)dt_size(c->low_dt);
                    if (!param_like(c, n->in[i])) act_io += b;
                    else w_io += b;
                }
            for (int i = 0; i < n->n_out; i++)
                if (n->out[i] >= 0) act_io += v_bytes(c, n->out[i]);
            if (t.view) act_io = w_io = 0;
        }
        /* an attention operator (opset 23's Attention, com.microsoft's):
         * one fused kernel, causal as its flag or mask says */
        if (ref.kind == MP_PAT_ATTN && P->attn[ref.index].op == ni && c->pl->o.attention_fused)
            causal_skip(c, &P->attn[ref.index], pn);
        pn->fwd_flops = per_sample ? bscale(c, fwd) : fwd;
        pn->bwd_flops = per_sample ? bscale(c, bwd) : bwd;
        pn->bwd_recompute = per_sample ? bscale(c, recompute) : recompute;
        if (per_sample) act_io = bscale(c, act_io);
        pn->out_bytes = n->n_out > 0 && n->out[0] >= 0 ? bscale(c, v_bytes(c, n->out[0])) : 0;
        pn->bytes = act_io + w_io;
        pn->temp = act_io;
        if (role == ROLE_OWN && !t.view && !shape_only && rg) {
            /* its backward's transient: the outputs' gradients and the
             * inputs' gradients as the operator computes them, in the wider
             * of the input's type and its own (softmax(x, dtype=float32),
             * an autocast fp32 op: the gradient is fp32 before the cast
             * back, a node of its own) */
            uint64_t tmp = 0;
            int own = mp_dtype_is_float(out_dt) ? dt_size(out_dt) : 0;
            for (int i = 0; i < n->n_in; i++) {
                int v = n->in[i];
                if (v < 0 || c->cst[v] || param_like(c, v) || !mp_dtype_is_float(c->adt[v])) continue;
                int sz = dt_size(c->adt[v]);
                tmp += mp_tplan_numel(&g->values[v]) * (uint64_t)(own > sz ? own : sz);
            }
            for (int i = 0; i < n->n_out; i++)
                if (n->out[i] >= 0) tmp += v_bytes(c, n->out[i]);
            if (per_sample) tmp = bscale(c, tmp);
            if (tmp > pn->temp) pn->temp = tmp;
        }
        if ((pl->adapted && pl->adapted[ni]) || pl->pquant) lora_work(c, n, ni, pn);
        if (mp_node_folded_bn(g, n)) folded_bn(c, n, pn);
    }
    pl->largest_layer = largest_layer;
    free(mrepeat);

    /* gradients accumulated: a value several nodes read, each computing
     * its gradient, gets one add per extra use in the backward (autograd's
     * input buffer), charged to the node that made it (or its first
     * reader: a parameter, a graph input) */
    int *uses = calloc((size_t)nv + 1, sizeof(int)), *first_reader = calloc((size_t)nv + 1, sizeof(int));
    int *pos = calloc((size_t)nn + 1, sizeof(int));
    if (!uses || !first_reader || !pos) {
        free(uses);
        free(first_reader);
        free(pos);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < nn; k++) pos[g->order[k]] = k;
    for (int k = c->training ? 0 : nn; k < nn; k++) {
        int ni = g->order[k];
        const mp_node *n = &g->nodes[ni];
        if (pl->nodes[k].repeat < 0 && pl->nodes[k].fwd_flops == 0 && pl->nodes[k].bytes == 0 &&
            !pl->nodes[k].n_bwd_kernels && c->role[ni] == ROLE_OWN)
            continue; /* folded or free */
        bool diff = false; /* it passes a gradient back: a float output that needs one */
        for (int i = 0; i < n->n_out; i++)
            if (n->out[i] >= 0 && !c->cst[n->out[i]] && c->rg[n->out[i]] && mp_dtype_is_float(g->values[n->out[i]].dtype))
                diff = true;
        if (!diff) continue;
        int role = c->role[ni];
        if (role == ROLE_MEMBER || role == ROLE_ATTN_OUT) continue; /* its group reads for it */
        if (mp_tplan_param_copy(g, n)) continue; /* another parameter: no gradient summed with this one's */
        int ins[64], n_ins = 0;
        if (role == ROLE_LN_HEAD || role == ROLE_ACT_HEAD || role == ROLE_ATTN_HEAD) {
            /* a group: what it reads from outside, once each */
            mp_pref r = mp_pattern_at(P, ni);
            int first = r.kind == MP_PAT_NORM ? P->norms[r.index].first
                        : r.kind == MP_PAT_ACT ? P->acts[r.index].first : P->attn[r.index].first;
            int cnt = r.kind == MP_PAT_NORM ? P->norms[r.index].n
                      : r.kind == MP_PAT_ACT ? P->acts[r.index].n : P->attn[r.index].n;
            for (int q = 0; q < cnt; q++) {
                const mp_node *m = &g->nodes[P->members[first + q].node];
                for (int i = 0; i < m->n_in; i++) {
                    int v = m->in[i], p = v >= 0 ? g->values[v].producer : -1;
                    mp_pref pr = p >= 0 ? mp_pattern_at(P, p) : (mp_pref){MP_PAT_NONE, -1, 0};
                    if (v < 0 || (pr.kind == r.kind && pr.index == r.index)) continue;
                    int s = 0;
                    while (s < n_ins && ins[s] != v) s++;
                    if (s == n_ins && n_ins < 64) ins[n_ins++] = v;
                }
            }
        } else {
            /* a stand-in's gradient is its own parameter's, summed with no other */
            const uint32_t *stand_in = pl->p->param_stand_in;
            for (int i = 0; i < n->n_in && n_ins < 64; i++)
                if (!(stand_in && i < 32 && (stand_in[ni] >> i & 1))) ins[n_ins++] = n->in[i];
        }
        for (int i = 0; i < n_ins; i++) {
            int v = ins[i];
            if (v < 0 || c->cst[v] || !c->rg[v] || !mp_dtype_is_float(g->values[v].dtype)) continue;
            if (!uses[v]++) first_reader[v] = k + 1;
        }
    }
    for (int v = 0; v < nv && c->training; v++) {
        if (uses[v] < 2) continue;
        int p = g->values[v].producer;
        int k = p >= 0 ? pos[p] : first_reader[v] - 1;
        if (k < 0 || k >= nn) continue;
        mp_pnode *pn = &pl->nodes[k];
        uint64_t b = 3 * mp_tplan_numel(&g->values[v]) * (uint64_t)dt_size(c->adt[v]);
        pn->acc_bytes += (c->g->values[v].flags & MP_VAL_PARAM) ? b * (uint64_t)(uses[v] - 1)
                                                                : bscale(c, b) * (uint64_t)(uses[v] - 1);
        pn->n_acc += (uint32_t)(uses[v] - 1);
    }
    free(uses);
    free(first_reader);
    free(pos);

    /* checkpointing: each block keeps its inputs (as given to it) instead
     * of what its nodes keep; the largest block's own set comes back
     * during its backward (a temporary) */
    if (o->checkpointing && pl->n_repeats > 0 && c->training) {
        /* a block none of whose nodes has a backward (frozen, and nothing
         * before it trained: fine-tuning) is not recomputed, and
         * torch.utils.checkpoint keeps nothing for it: its output needs no
         * gradient, so autograd records no node to hold its inputs */
        uint8_t *live = calloc((size_t)pl->n_repeats + 1, 1);
        if (!live) return mp_error(MP_ERR_NOMEM, "out of memory");
        for (int k = 0; k < nn; k++) {
            const mp_pnode *pn = &pl->nodes[k];
            if (pn->repeat >= 0 && pn->repeat < pl->n_repeats && (pn->bwd_flops || pn->n_bwd_kernels)) live[pn->repeat] = 1;
        }
        for (int k = 0; k < nn; k++) {
            int ni = g->order[k];
            mp_node *n = &g->nodes[ni];
            mp_pnode *pn = &pl->nodes[k];
            if (pn->repeat < 0) continue;
            if (pn->repeat < pl->n_repeats && !live[pn->repeat]) {
                pn->ckpt_rep = pn->ckpt_split = 0;
                pn->saved_rep = pn->saved_split = 0;
                continue;
            }
            uint64_t rep = 0, spl = 0, cross = 0;
            int cross_unit = -1;
            c->cur_unit = pn->unit;
            c->cross = &cross;
            c->cross_unit = &cross_unit;
            for (int i = 0; i < n->n_in; i++) {
                int v = n->in[i];
                if (v < 0 || (c->cst[v] && !run_made(c, v)) || param_like(c, v)) continue;
                int prod = g->values[v].producer;
                if (prod >= 0 && c->node_repeat[prod] == pn->repeat) continue;
                bool sp;
                uint64_t b = keep(c, v, -1, stamp_global, &sp, NULL);
                if (sp) spl += b;
                else rep += b;
            }
            /* the node's own set comes back when its block is recomputed */
            c->cross = NULL;
            pn->ckpt_rep = pn->saved_rep;
            pn->ckpt_split = pn->saved_split;
            pn->saved_rep = rep;
            pn->saved_split = spl;
            pn->cross = cross;
            pn->cross_unit = cross_unit;
        }
        free(live);
    }
    return MP_OK;
}


/* The last position of the call of module a that position k is in (see
 * inference_live): the run of positions from k whose nodes lie inside a,
 * through nodes outside every module or computing only constants; at most
 * `last`, a's last node. */
static int call_end(const pctx *c, int a, int k, int last) {
    const mp_graph *g = c->g;
    int end = k;
    for (int j = k + 1; j <= last && j < g->n_nodes; j++) {
        const mp_node *n = &g->nodes[g->order[j]];
        if (n->module < 0 || outputs_const(c, n)) continue;
        if (!module_within(c->m, n->module, a)) break;
        end = j;
    }
    return end;
}

/* The inference forward's live activations, as eager PyTorch holds them
 * under no_grad: each node's outputs are allocated when it runs and freed
 * after their last reader; a view (transpose, reshape of a contiguous
 * tensor, slice) shares its input's storage, and so does a Linear's bias
 * added in place after its product; a pattern run as one operator
 * (a fused attention, F.layer_norm, F.gelu) materialises only what leaves
 * the group: a fused attention never writes its scores (--attention eager:
 * they are written and read as the graph says). Graph inputs are resident
 * (counted apart), outputs live to the end. The peak of that walk, in the
 * plan's types. */
static uint64_t inference_live(const pctx *c) {
    const mp_graph *g = c->g;
    const mp_patterns *P = c->P;
    int nv = g->n_values, nn = g->n_nodes;
    int *last = malloc(sizeof(int) * ((size_t)nv + 1));
    uint8_t *mat = calloc((size_t)nv + 1, 1);
    uint64_t *bytes = calloc((size_t)nv + 1, sizeof(uint64_t));
    if (!last || !mat || !bytes) {
        free(last);
        free(mat);
        free(bytes);
        return c->pl->p->activation_peak_bytes;
    }
    for (int v = 0; v < nv; v++) last[v] = -1;
    for (int k = 0; k < nn; k++) {
        int ni = g->order[k];
        const mp_node *n = &g->nodes[ni];
        mp_pref me = mp_pattern_at(P, ni);
        for (int i = 0; i < n->n_in; i++) {
            int v = n->in[i];
            if (v < 0) continue;
            last[c->stor[v]] = k;
            int p = g->values[v].producer;
            if (p < 0 || c->role[p] == ROLE_OWN || c->role[p] == ROLE_GUARD) continue;
            mp_pref pr = mp_pattern_at(P, p);
            if (pr.kind != me.kind || pr.index != me.index) mat[v] = 1; /* leaves its group */
        }
    }
    /* Python's references: a module's caller holds the tensors it passed
     * in until the call returns (nn.Sequential's loop variable, a block's
     * `residual = hidden_states`), so a value read inside a module it was
     * not made in lives until that call's last node. A module called
     * several times (torchvision's Bottleneck calls its one `relu` three
     * times; the dynamo exporter names every call alike, the TorchScript
     * exporter relu, relu_1, relu_2) has a call per run of its nodes:
     * positions whose nodes lie inside it, a node outside every module or
     * computing constants only between them not ending the run. */
    const mp_model *md = c->m;
    int nm = md->n_modules;
    int *mlast = nm > 0 ? malloc(sizeof(int) * (size_t)nm) : NULL;
    if (mlast) {
        for (int a = 0; a < nm; a++) mlast[a] = -1;
        for (int k = 0; k < nn; k++)
            for (int a = g->nodes[g->order[k]].module, hop = 0; a >= 0 && a < nm && hop < 256;
                 a = md->modules[a].parent, hop++)
                if (k > mlast[a]) mlast[a] = k;
        for (int k = 0; k < nn; k++) {
            const mp_node *n = &g->nodes[g->order[k]];
            for (int i = 0; i < n->n_in; i++) {
                int v = n->in[i];
                if (v < 0 || c->cst[v]) continue;
                int p = g->values[v].producer;
                int mp = p >= 0 ? g->nodes[p].module : -1;
                for (int a = n->module, hop = 0; a >= 0 && a < nm && hop < 256; a = md->modules[a].parent, hop++) {
                    if (module_within(md, mp, a)) break; /* the value was made inside a */
                    int end = call_end(c, a, k, mlast[a]);
                    if (end > last[c->stor[v]]) last[c->stor[v]] = end;
                }
            }
        }
        free(mlast);
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] >= 0) {
            mat[g->outputs[i]] = 1;
            last[c->stor[g->outputs[i]]] = nn;
        }
    /* storages by the position after which they die */
    int *dies_first = malloc(sizeof(int) * ((size_t)nn + 1)), *dies_next = malloc(sizeof(int) * ((size_t)nv + 1));
    if (!dies_first || !dies_next) {
        free(dies_first);
        free(dies_next);
        free(last);
        free(mat);
        free(bytes);
        return c->pl->p->activation_peak_bytes;
    }
    for (int k = 0; k <= nn; k++) dies_first[k] = -1;
    for (int v = 0; v < nv; v++) {
        dies_next[v] = -1;
        if (c->stor[v] == v && last[v] >= 0 && last[v] < nn) {
            dies_next[v] = dies_first[last[v]];
            dies_first[last[v]] = v;
        }
    }
    /* autocast under no_grad caches the low-precision copy of every
     * parameter it casts until its region exits (peak.c): the cache grows
     * through the forward and frees nothing */
    uint64_t live = 0, peak = 0, cache = 0;
    c->pl->infer_cache = 0;
    for (int k = 0; k < nn; k++) {
        int ni = g->order[k];
        const mp_node *n = &g->nodes[ni];
        int role = c->role[ni];
        if (c->pl->nodes && k < c->pl->n_nodes) cache += c->pl->nodes[k].cast_first;
        for (int i = 0; i < n->n_out; i++) {
            int v = n->out[i];
            if (v < 0 || c->stor[v] != v) continue; /* a view: no storage of its own */
            if (c->cst[v] && !run_made(c, v)) continue;
            if (role != ROLE_OWN && role != ROLE_GUARD && !mat[v]) continue; /* inside a group */
            if (last[v] < 0) continue; /* never read: freed at once */
            bytes[v] = bscale(c, v_bytes(c, v));
            live += bytes[v];
        }
        if (live + cache > peak + c->pl->infer_cache) {
            peak = live;
            c->pl->infer_cache = cache;
        }
        for (int q = dies_first[k]; q >= 0; q = dies_next[q])
            if (bytes[q]) {
                live -= bytes[q];
                bytes[q] = 0;
            }
    }
    free(dies_first);
    free(dies_next);
    free(last);
    free(mat);
    free(bytes);
    return peak;
}

static uint64_t inference_peak(mp_tplan *pl, const pctx *c) {
    const mp_graph *g = c->g;
    uint64_t in = 0;
    for (int i = 0; i < g->n_inputs; i++) in += bscale(c, v_bytes(c, g->inputs[i]));
    pl->infer_inputs = in;
    pl->infer_acts = inference_live(c);
    pl->infer_live = pl->infer_acts;
    return in;
}


/* The model's float type: that of most parameter elements (fp32 when it
 * has none). */
int mp_tplan_model_dtype(const mp_graph *g) {
    uint64_t by[MP_DT_COUNT] = {0};
    for (int v = 0; v < g->n_values; v++) {
        const mp_value *val = &g->values[v];
        if ((val->flags & MP_VAL_PARAM) && mp_dtype_is_float(val->dtype) && val->dtype >= 0 &&
            val->dtype < MP_DT_COUNT)
            by[val->dtype] += mp_tplan_numel(val);
    }
    int dt = MP_DT_FLOAT;
    for (int d = 0; d < MP_DT_COUNT; d++)
        if (by[d] > by[dt]) dt = d;
    return dt;
}

/* An attention's batch x query length, at the batch planned; 0 when not
 * known. Batch and heads in one dim ([B x H, S, D]: nn.MultiheadAttention's
 * export) give the batch as the scores' first dim over the heads. */
static uint64_t attn_query_tokens(const pctx *c, const mp_pattn *at) {
    int64_t b = at->batch, sq = at->seq_q;
    const mp_value *sc = at->qk >= 0 ? &c->g->values[c->g->nodes[at->qk].out[0]] : NULL;
    if (b <= 0 && sc && sc->rank == 3 && at->heads > 0 && sc->dims[0] > 0 && sc->dims[0] % at->heads == 0)
        b = sc->dims[0] / at->heads;
    return b > 0 && sq > 0 ? bscale(c, (uint64_t)(b * sq)) : 0;
}

/* The KV cache (--inference --kv-cache): K and V of every attention that
 * keeps them, per token: KV heads x head dim before any repetition of
 * grouped heads (the pattern layer), in the type K and V are computed in.
 * A sliding-window attention (a folded band mask) keeps its window's keys
 * of each sequence, as transformers' sliding-window cache layers do. An
 * encoder-decoder (a cross-attention: K and V projected from another input
 * than Q) keeps, as transformers' EncoderDecoderCache does, its decoder's
 * causal self-attentions' K and V per decoder token and its
 * cross-attentions' of the encoder's tokens, computed once; its encoder's
 * attentions read the whole input at once and keep nothing. */
static void kv_cache(mp_tplan *pl, const pctx *c) {
    const mp_patterns *P = c->P;
    const mp_graph *g = c->g;
    uint64_t es = (uint64_t)dt_size(c->mixed ? c->low_dt : c->base_dt);
    for (int a = 0; P && a < P->n_attn; a++) pl->kv_encdec |= P->attn[a].cross;
    pl->kv_tokens = pl->tokens_per_mb;
    uint64_t per = 0;
    int unknown = 0;
    for (int a = 0; P && a < P->n_attn; a++) {
        const mp_pattn *at = &P->attn[a];
        bool causal = mp_pattn_causal(at);
        uint64_t e = mp_pattn_kv_elems(at);
        if (pl->kv_encdec && at->cross) {
            /* the encoder's tokens: K's elements over one token's */
            int kv = at->k_kv >= 0 ? at->k_kv : at->k;
            uint64_t ke = at->kv_heads > 0 && at->head_dim > 0 ? (uint64_t)(at->kv_heads * at->head_dim) : 0;
            uint64_t t = kv >= 0 && ke ? mp_tplan_numel(&g->values[kv]) / ke : 0;
            if (!e || !t) unknown++;
            pl->kv_cross_bytes += bscale(c, e * es * t);
            if (!pl->kv_cross_tokens) pl->kv_cross_tokens = bscale(c, t);
            continue;
        }
        if (pl->kv_encdec && !causal) continue; /* the encoder's */
        if (!e) unknown++;
        per += e;
        uint64_t qt;
        if (pl->kv_encdec && causal && pl->kv_tokens == pl->tokens_per_mb && (qt = attn_query_tokens(c, at)))
            pl->kv_tokens = qt; /* the decoder's context */
        /* a decoding step given its past: the cache holds every key, the
         * past and the new tokens; the past inputs are that cache */
        if (mp_pattn_past_kv(P, at) && at->batch > 0 && at->seq_k > 0 && pl->kv_tokens == pl->tokens_per_mb)
            pl->kv_tokens = (uint64_t)(at->batch * at->seq_k);
        for (int w = 0; w < 2; w++) {
            int in = mp_pattn_past(P, at, w);
            if (in >= 0) pl->kv_past_inputs += v_bytes(c, in);
        }
    }
    pl->kv_unknown = unknown;
    pl->kv_bytes_per_token = unknown ? 0 : per * es;
    if (unknown) return;
    for (int a = 0; P && a < P->n_attn; a++) {
        const mp_pattn *at = &P->attn[a];
        if (pl->kv_encdec && (at->cross || !mp_pattn_causal(at))) continue;
        uint64_t t = pl->kv_tokens;
        if (at->window > 0 && at->seq_k > at->window && t % (uint64_t)at->seq_k == 0) {
            t = t / (uint64_t)at->seq_k * (uint64_t)at->window;
            pl->kv_windowed++;
        }
        pl->kv_bytes += mp_pattn_kv_elems(at) * es * t;
    }
    pl->kv_bytes += pl->kv_cross_bytes;
    if (!pl->kv_encdec) return;
    /* the encoder's work: every node the cross-attentions' K and V come from */
    uint8_t *enc = calloc((size_t)g->n_nodes + 1, 1);
    int *queue = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    uint8_t *seen = calloc((size_t)g->n_values + 1, 1);
    int n = 0, head = 0;
    for (int a = 0; enc && queue && seen && P && a < P->n_attn; a++) {
        const mp_pattn *at = &P->attn[a];
        int kv[2] = {at->k_kv >= 0 ? at->k_kv : at->k, at->v_kv >= 0 ? at->v_kv : at->v};
        for (int i = 0; i < 2 && at->cross; i++)
            if (kv[i] >= 0 && !seen[kv[i]]) seen[kv[i]] = 1, queue[n++] = kv[i];
    }
    while (enc && queue && seen && head < n) {
        int p = g->values[queue[head++]].producer;
        if (p < 0 || enc[p]) continue;
        enc[p] = 1;
        const mp_node *pn = &g->nodes[p];
        for (int i = 0; i < pn->n_in; i++)
            if (pn->in[i] >= 0 && !seen[pn->in[i]]) seen[pn->in[i]] = 1, queue[n++] = pn->in[i];
    }
    for (int k = 0; enc && queue && seen && k < pl->n_nodes; k++)
        if (enc[g->order[k]]) pl->kv_encoder_flops += pl->nodes[k].fwd_flops;
    free(enc);
    free(queue);
    free(seen);
}

/* The graph pass and what the plan reads off the graph: parameters, heads,
 * tokens, the loss's kept bytes, the inference figures. */
mp_status mp_tplan_graph(mp_tplan *pl) {
    const mp_tplan_options *o = &pl->o;
    mp_model *m = pl->p->m;
    mp_status st;
    pctx c;
    memset(&c, 0, sizeof c);
    c.pl = pl;
    c.m = m;
    c.g = m->graph;
    c.mixed = o->precision == MP_PREC_BF16_MIXED || o->precision == MP_PREC_FP16_MIXED;
    c.training = !o->inference;
    c.base_dt = o->precision == MP_PREC_BF16 ? MP_DT_BFLOAT16 : o->precision == MP_PREC_FP16 ? MP_DT_FLOAT16 : MP_DT_FLOAT;
    c.low_dt = o->precision == MP_PREC_BF16_MIXED ? MP_DT_BFLOAT16
               : o->precision == MP_PREC_FP16_MIXED ? MP_DT_FLOAT16 : c.base_dt;
    c.b_num = pl->batch_scaled ? (uint64_t)pl->batch : 1;
    c.b_den = pl->batch_scaled ? (uint64_t)pl->export_batch : 1;
    if (o->dropout > 0 && !o->inference) {
        int nd = 0;
        for (int i = 0; i < c.g->n_nodes; i++) nd += mp_streq(c.g->nodes[i].op, "Dropout");
        if (nd)
            return mp_error(MP_ERR_USAGE, "--dropout %g: %s has %d Dropout node%s of its own (a train-mode "
                            "export): they are planned as written; --dropout is for an export without them",
                            o->dropout, m->path ? m->path : "the model", nd, nd == 1 ? "" : "s");
    }
    c.P = mp_patterns_of(c.g);
    if (!c.P) return mp_error(MP_ERR_NOMEM, "out of memory finding the model's patterns");
    pl->pats = c.P;
    pl->heads = c.P->heads > 0 ? (int)c.P->heads : 0;
    pl->kv_heads = c.P->kv_heads > 0 ? (int)c.P->kv_heads : 0;
    c.kv_rep = o->tp > 1 && pl->kv_heads > 0 && pl->kv_heads % o->tp != 0;
    pl->kv_replicated = c.kv_rep;
    st = mp_tplan_ft_prepare(pl, c.P);
    /* checkpointing a model with frozen parameters: PEFT (prepare_model_for_kbit_training,
     * get_peft_model with gradient checkpointing) and transformers call
     * enable_input_require_grads, a hook making the embedding's output need a
     * gradient, so that reentrant checkpoints of frozen blocks run their backward */
    c.input_grads = o->checkpointing && pl->ptrain != NULL;
    if (!st) st = graph_pass(&c);
    const mp_graph *g = c.g;
    if (!st) {
        pl->params = pl->p->total.params + pl->lora_params;
        /* the LM head split over the vocabulary: the cross-entropy is too
         * (Megatron's vocab-parallel cross-entropy) */
        pl->vocab_split = c.P->lm_head >= 0;
        /* tokens: an integer input of rank 2 is (batch, seq) ids */
        for (int i = 0; i < g->n_inputs; i++) {
            const mp_value *v = &g->values[g->inputs[i]];
            if (v->rank >= 1 && v->dims[0] > 0 && !pl->samples_per_mb)
                pl->samples_per_mb = bscale(&c, (uint64_t)v->dims[0]);
            if (v->rank == 2 && mp_dtype_is_int(v->dtype) && !pl->has_tokens) {
                pl->has_tokens = true;
                pl->tokens_per_mb = bscale(&c, mp_tplan_numel(v));
            }
        }
        /* a decoder given its embeddings (no ids: nn.MultiheadAttention or
         * nn.TransformerDecoder on float inputs, inputs_embeds): its causal
         * attention's batch x query length */
        for (int a = 0; !pl->has_tokens && c.P && a < c.P->n_attn; a++) {
            const mp_pattn *at = &c.P->attn[a];
            uint64_t qt = mp_pattn_causal(at) ? attn_query_tokens(&c, at) : 0;
            if (qt) {
                pl->has_tokens = true;
                pl->tokens_per_mb = qt;
            }
        }
        /* the loss (loss.c): the form, what it keeps and allocates */
        if (g->n_outputs > 0) {
            int y = g->outputs[0];
            mp_tplan_loss_rule(pl, c.adt[y], c.mixed, c.b_num, c.b_den);
            const mp_tplan_loss *L = &pl->loss;
            if (L->form != MP_LOSS_NONE) {
                pl->loss_bytes = L->kept;
                pl->loss_fwd_io = L->fwd_io;
                pl->loss_bwd_io = L->bwd_io;
                pl->loss_fwd_kernels = L->fwd_kernels;
                pl->loss_bwd_kernels = L->bwd_kernels;
            } else {
                pl->o.loss = 0;
            }
        }
        /* inference */
        if (o->inference) {
            inference_peak(pl, &c);
            /* autocast keeps the parameters in fp32 (their copies are its cache) */
            pl->infer_weights = mp_tplan_dbytes(dt_size(c.base_dt), pl->params);
            if (o->kv_cache) kv_cache(pl, &c);
        }
    }
    free(c.rg);
    free(c.cst);
    free(c.split);
    free(c.pflag);
    free(c.noncontig);
    free(c.adt);
    free(c.stor);
    free(c.seen);
    free(c.node_repeat);
    free(c.first_unit);
    free(c.role);
    free(c.tpc);
    free(c.charged);
    return st;
}
