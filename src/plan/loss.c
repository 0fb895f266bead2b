/* The loss: what the trainer runs between the graph's output 0 and the
 * scalar it calls backward on (docs/PLANNING.md "the loss"). Two forms
 * cover what people train with:
 *
 *  - causal-lm: transformers' ForCausalLMLoss (also ForMaskedLMLoss and
 *    ForTokenClassification, src/transformers/loss/loss_utils.py): the
 *    logits are upcast with logits.float() in every precision (a copy when
 *    they are bf16 or fp16, the same tensor in fp32), the labels are
 *    shifted by padding them (nn.functional.pad(labels, (0, 1)), no copy
 *    of the logits), and F.cross_entropy runs in fp32;
 *  - cross-entropy: F.cross_entropy on the output itself (torchvision's
 *    and timm's classification recipes, transformers'
 *    ForSequenceClassification): in the output's type, except that CUDA
 *    autocast runs log_softmax in fp32 (its fp32_set_opt_dtype list), a
 *    cast copy of the logits first.
 *
 * F.cross_entropy is log_softmax then nll_loss (ATen's
 * cross_entropy_loss). What autograd keeps and allocates
 * (tools/autograd/derivatives.yaml):
 *  - _log_softmax saves its result (the log-probabilities, rows x classes);
 *  - nll_loss saves its target (rows, int64) and total_weight (a scalar);
 *  - nll_loss_backward allocates a rows x classes gradient (zeros, then the
 *    target column), _log_softmax_backward_data a second one
 *    (grad - exp(out) * sum(grad)); both live while the latter runs, with
 *    the log-probabilities;
 *  - _to_copy (logits.float(), autocast's cast) saves nothing; its backward
 *    casts the gradient back to the logits' type.
 * The logits themselves are not kept: no operator before the loss keeps
 * its output (a softcapping tanh keeps its own, counted by the graph), and
 * the trainer drops the model's output object before calling backward
 * (transformers' Trainer.compute_loss returns the loss alone). */
#include "plan/plan.h"

#include <string.h>

#include "analyze/patterns.h"

static const char *const form_names[MP_LOSS_COUNT] = {"auto", "causal-lm", "cross-entropy", "none"};

const char *mp_tplan_loss_name(int form) {
    return form >= 0 && form < MP_LOSS_COUNT ? form_names[form] : "?";
}

static int dsize(int dt) {
    int b = mp_dtype_bits(dt);
    return b > 0 ? (b + 7) / 8 : 0;
}

/* An initializer or a Constant node's output (the TorchScript exporter
 * writes Python scalars as Constant nodes), never a parameter. */
static bool is_const(const mp_graph *g, int v) {
    if (v < 0 || (g->values[v].flags & MP_VAL_PARAM)) return false;
    if (g->values[v].flags & (MP_VAL_INIT | MP_VAL_CONST)) return true;
    int p = g->values[v].producer;
    return p >= 0 && mp_streq(g->nodes[p].op, "Constant");
}

/* The constant-scalar input of a binary node, or -1 (and its other input). */
static int scalar_side(const mp_graph *g, const mp_node *n, int *other) {
    if (n->n_in != 2 || n->in[0] < 0 || n->in[1] < 0) return -1;
    for (int i = 0; i < 2; i++)
        if (is_const(g, n->in[i]) && mp_value_numel(&g->values[n->in[i]]) == 1) {
            *other = n->in[1 - i];
            return n->in[i];
        }
    return -1;
}

/* Gemma-2's final_logit_softcapping: logits = tanh(logits / c) * c. The
 * node making y is the Mul; returns the Tanh's input's producer chain
 * start (the logits before capping) or -1. */
static int softcap_of(const mp_graph *g, int y) {
    int p = g->values[y].producer, t = -1, x = -1;
    if (p < 0 || !mp_streq(g->nodes[p].op, "Mul") || scalar_side(g, &g->nodes[p], &t) < 0) return -1;
    int tp = g->values[t].producer;
    if (tp < 0 || !mp_streq(g->nodes[tp].op, "Tanh") || g->nodes[tp].n_in < 1) return -1;
    int d = g->values[g->nodes[tp].in[0]].producer;
    if (d < 0 || !(mp_streq(g->nodes[d].op, "Div") || mp_streq(g->nodes[d].op, "Mul")) ||
        scalar_side(g, &g->nodes[d], &x) < 0)
        return -1;
    return x;
}

/* Is v the LM head's output, or made from it by elementwise steps? */
static bool from_lm_head(const mp_graph *g, const mp_patterns *P, int v) {
    if (!P || P->lm_head < 0) return false;
    for (int hop = 0; v >= 0 && hop < 8; hop++) {
        int p = g->values[v].producer;
        if (p < 0) return false;
        if (p == P->lm_head) return true;
        const mp_node *n = &g->nodes[p];
        int next = -1;
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] >= 0 && !is_const(g, n->in[i]) && mp_dtype_is_float(g->values[n->in[i]].dtype)) {
                next = n->in[i];
                break;
            }
        v = next;
    }
    return false;
}

void mp_tplan_loss_rule(mp_tplan *pl, int logits_dt, bool mixed, uint64_t b_num, uint64_t b_den) {
    const mp_graph *g = pl->p->m->graph;
    mp_tplan_loss *L = &pl->loss;
    memset(L, 0, sizeof *L);
    L->out = -1;
    L->softcap_in = -1;
    int form = pl->o.loss ? pl->o.loss_form : MP_LOSS_NONE;
    L->asked = form;
    if (pl->o.inference || g->n_outputs < 1) form = MP_LOSS_NONE;
    int y = g->n_outputs > 0 ? g->outputs[0] : -1;
    const mp_value *v = y >= 0 ? &g->values[y] : NULL;
    bool logits = v && mp_dtype_is_float(v->dtype) && v->rank >= 2 && v->dims[v->rank - 1] > 0;
    if (form == MP_LOSS_AUTO) {
        if (!logits) form = MP_LOSS_NONE, L->why = "output 0 is not a float tensor of rank 2 or more";
        else if (from_lm_head(g, pl->pats, y))
            form = MP_LOSS_CAUSAL_LM, L->why = "output 0 is the LM head's (transformers' ForCausalLMLoss)";
        else form = MP_LOSS_CROSS_ENTROPY, L->why = "output 0 is not an LM head's: a classifier's logits";
    } else if (form != MP_LOSS_NONE && !logits) {
        form = MP_LOSS_NONE;
        L->why = "output 0 is not a float tensor of rank 2 or more: no loss planned";
    }
    L->form = form;
    if (form == MP_LOSS_NONE) return;
    L->out = y;
    L->softcap_in = softcap_of(g, y);
    uint64_t C = (uint64_t)v->dims[v->rank - 1];
    uint64_t n = mp_tplan_numel(v);
    /* per-sample figures at the batch planned (exact: n divides by the export's batch) */
    n = n / b_den * b_num + (n % b_den) * b_num / b_den;
    uint64_t rows = C ? n / C : 0;
    L->rows = rows;
    L->classes = C;
    L->logits_dt = logits_dt;
    /* the type the cross-entropy runs in */
    int ce = form == MP_LOSS_CAUSAL_LM || mixed ? MP_DT_FLOAT : logits_dt;
    if (!mp_dtype_is_float(ce) || dsize(ce) == 0) ce = MP_DT_FLOAT;
    L->ce_dt = ce;
    L->upcast = logits_dt != ce;
    uint64_t ys = (uint64_t)dsize(logits_dt), cs = (uint64_t)dsize(ce);
    /* kept: the log-probabilities and the targets */
    L->kept = n * cs + rows * 8;
    /* forward's high point (log_softmax running): the logits, their copy in
     * the loss's type, and the log-probabilities (in kept) */
    L->fwd_transient = n * ys + (L->upcast ? n * cs : 0);
    /* backward's high point (_log_softmax_backward_data running): nll's
     * gradient and its own, beside the log-probabilities (in kept); the cast
     * back after it holds less (one of each) */
    L->bwd_transient = 2 * n * cs;
    if (L->upcast && n * cs + n * ys > L->bwd_transient) L->bwd_transient = n * cs + n * ys;
    /* traffic and kernels: the cast (read ys, write cs), log_softmax (read,
     * write), nll_loss (a gather of rows); backward: nll's gradient (a fill
     * and a scatter), log_softmax's backward (two reads, one write), the
     * cast back */
    L->fwd_io = n * ((L->upcast ? ys + cs : 0) + 2 * cs);
    L->bwd_io = n * (cs + 3 * cs + (L->upcast ? cs + ys : 0));
    L->fwd_kernels = 2 + L->upcast;
    L->bwd_kernels = 3 + L->upcast;
    /* operators dispatched from Python: causal-lm also pads and slices the
     * labels, views the logits and the labels (no kernels for views) */
    L->host_ops = L->fwd_kernels + (form == MP_LOSS_CAUSAL_LM ? 5 : 1);
}
