/* Layouts: pipeline stages, memory per GPU and step time of one
 * dp x tp x pp x ZeRO layout from the graph pass's per-node figures,
 * --fit's enumeration and the GPUs-needed search (docs/PLANNING.md
 * sections 3 to 6). */
#include "plan/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* Bandwidth of a collective spanning `ranks` GPUs: the GPU's NVLink (or
 * PCIe) inside one node of 8, else 400 Gb/s InfiniBand per GPU. */
double mp_tplan_link_bw(const mp_tplan *pl, int span) {
    if (pl->o.link_gbs > 0) return pl->o.link_gbs * 1e9;
    if (span <= 8 && pl->link > 0) return pl->link;
    return 50e9;
}

/* ---- a layout: stages, memory, time ---- */

static double roof(double flops, double peak, double bytes, double bw, const mp_tplan_options *o) {
    double tc = peak > 0 ? flops / (peak * o->compute_eff) : 0;
    double tm = bw > 0 ? bytes / (bw * o->memory_eff) : 0;
    return tc > tm ? tc : tm;
}

/* Stage of each block: contiguous runs balanced by the blocks' FLOPs. */
static void stage_cuts(const mp_tplan *pl, int pp, int *first_block) {
    int nb = pl->n_repeats;
    double *cost = calloc((size_t)(nb ? nb : 1), sizeof(double));
    double total = 0;
    /* a node outside the blocks weighs with the block before it (the first
     * block for those before any: the embeddings go to stage 0, the head to
     * the last stage) */
    int last = -1;
    for (int k = 0; cost && k < pl->n_nodes; k++) {
        int b = pl->nodes[k].repeat;
        if (b >= 0) last = b;
        else b = last >= 0 ? last : 0;
        if (b >= nb) continue;
        double w = (double)pl->nodes[k].fwd_flops + (double)pl->nodes[k].bwd_flops + 1;
        cost[b] += w;
        total += w;
    }
    first_block[0] = 0;
    int s = 1;
    double acc = 0;
    for (int b = 0; b < nb && s < pp; b++) {
        acc += cost ? cost[b] : 1;
        double target = total * s / pp;
        /* cut after b when that is nearer the target than after b+1, and
         * enough blocks are left for the remaining stages */
        double next = acc + (cost && b + 1 < nb ? cost[b + 1] : 0);
        if ((acc >= target || fabs(acc - target) <= fabs(next - target)) && nb - (b + 1) >= pp - s)
            first_block[s++] = b + 1;
        else if (nb - (b + 1) == pp - s)
            first_block[s++] = b + 1;
    }
    while (s < pp) { /* never reached when pp <= nb */
        first_block[s] = first_block[s - 1] + 1;
        s++;
    }
    first_block[pp] = nb;
    free(cost);
}

typedef struct layout_out {
    mp_tplan_mem mem;
    double step_s, compute_s, bubble_s, dp_comm_s, tp_comm_s, p2p_s, optimizer_s;
    double optimizer_device_s;   /* its memory time alone (host.c: optimizer_s is the larger) */
    uint64_t dp_comm_bytes;
    int worst;
} layout_out;

/* Plan one layout from the per-node figures. stages: pp entries or NULL. */
static void layout(mp_tplan *pl, int dp, int tp, int pp, int m, int zero, mp_pstage *stages,
                   layout_out *out, int *stamp, uint64_t stamp_base) {
    const mp_tplan_options *o = &pl->o;
    const mp_model *mm = pl->p->m;
    const mp_graph *g = mm->graph;
    mp_pstage local[1];
    mp_pstage *st = stages ? stages : NULL;
    int first_block[1025];
    if (pp > 1024) pp = 1024;
    if (pp > 1) stage_cuts(pl, pp, first_block);
    else {
        first_block[0] = 0;
        first_block[1] = pl->n_repeats;
    }
    mp_state_bytes sb;
    mp_tplan_state_bytes(o->precision, o->optimizer, &sb);
    memset(out, 0, sizeof *out);
    int gpus = dp * tp * pp;
    bool sp = o->sequence_parallel && tp > 1;
    double lb_tp = mp_tplan_link_bw(pl, tp), lb_dp = mp_tplan_link_bw(pl, gpus), lb_pp = mp_tplan_link_bw(pl, gpus);
    double worst_mb = 0;
    uint64_t worst_peak = 0;
    int k = 0;
    /* the launch queue (host.c): per node the host's and the device's
     * seconds of its backward (its forward goes through the queue as the
     * nodes are met), per checkpointed block those of its forward again
     * (the recompute). Without memory, the larger of the two totals. */
    double *qs = malloc(((size_t)pl->n_nodes * 2 + (size_t)pl->n_repeats * 2 + 2) * sizeof(double));
    double *qblk = qs ? qs + (size_t)pl->n_nodes * 2 : NULL;
    for (int s = 0; s < pp; s++) {
        mp_pstage *ps = st ? &st[s] : &local[0];
        memset(ps, 0, sizeof *ps);
        ps->first_repeat = first_block[s];
        ps->n_repeats = first_block[s + 1] - first_block[s];
        ps->first = k;
        int in_flight = pp > 1 ? (pp - s < m ? pp - s : m) : 1;
        ps->in_flight = in_flight;
        uint64_t p_rep = 0, p_split = 0, acts = 0, temp = 0;
        uint64_t blk_cur = 0, blk_max = 0;
        int blk_id = -2;
        double fwd_s = 0, bwd_s = 0, rec_s = 0, tpc_s = 0;
        uint64_t hops = 0, kern = 0; /* operators dispatched, kernels launched (host.c) */
        uint64_t cast_cached = 0;    /* checkpointed blocks' weight casts (peak.c) */
        double qh = 0, qd = 0;       /* the queue's host and device clocks */
        if (qblk) memset(qblk, 0, ((size_t)pl->n_repeats * 2 + 2) * sizeof(double));
        uint64_t adafactor = 0;
        mp_ft_acc fa; /* fine-tuning: the stage's parameters by class */
        memset(&fa, 0, sizeof fa);
        double ft_opt_s = 0;
        /* nodes up to the end of this stage's last block; the last stage
         * takes the rest */
        for (; k < pl->n_nodes; k++) {
            const mp_pnode *pn = &pl->nodes[k];
            int b = pn->repeat;
            /* a node of a later stage's block ends this stage; nodes outside
             * the blocks stay with the block before them */
            if (s < pp - 1 && b >= first_block[s + 1]) break;
            double div = pn->split ? (double)tp : 1.0;
            uint64_t hops0 = hops;
            /* parameters held by this stage (a shared one counts once per stage) */
            for (int i = 0; i < pn->n_params; i++) {
                int v = pl->pparams[pn->first_param + i];
                if ((uint64_t)stamp[v] == stamp_base + (uint64_t)s + 1) continue;
                stamp[v] = (int)(stamp_base + (uint64_t)s + 1);
                uint64_t e = mp_tplan_numel(&g->values[v]);
                /* its AccumulateGrad: an autograd node per trainable tensor (host.c) */
                if (!o->inference && (!pl->ptrain || pl->ptrain[v])) hops++;
                if (pl->param_split[v]) p_split += e;
                else p_rep += e;
                if (pl->ft) mp_tplan_ft_param(pl, v, pl->param_split[v], tp, &fa);
                if (o->optimizer == MP_OPT_ADAFACTOR) {
                    const mp_value *val = &g->values[v];
                    /* factored second moment: a row and a column vector per matrix */
                    if (val->rank >= 2) {
                        int64_t r = mp_dims_product(val->dims, val->rank - 1);
                        adafactor += (uint64_t)(r > 0 ? r : 0) + (uint64_t)val->dims[val->rank - 1];
                    } else {
                        adafactor += e;
                    }
                }
            }
            /* the declared parameters the graph does not hold (merged or
             * folded away by the exporter), taken here first: weights,
             * gradients and states as any other */
            for (int i = 0; i < pn->n_roles; i++) {
                int r = pl->proles[pn->first_role + i];
                uint64_t e = pl->p->role_params[r].numel;
                bool trains = mp_tplan_role_trains(pl, r);
                if (!o->inference && trains) hops++; /* its AccumulateGrad */
                if (pl->role_split[r]) p_split += e;
                else p_rep += e;
                if (pl->ft) mp_tplan_ft_elems(pl, e, 0, 0, trains, pl->role_split[r], tp, &fa);
                if (o->optimizer == MP_OPT_ADAFACTOR) adafactor += e; /* a vector: unfactored */
            }
            if (pl->ft) mp_tplan_ft_node(pl, pn, &fa);
            /* sequence parallelism (Korthikanti et al. 2022): inside the
             * blocks what tensor parallelism replicates (norms, residuals,
             * dropouts, a column-split product's input) is split along the
             * sequence: every kept byte of a layer divides by tp */
            uint64_t rdiv = sp && b >= 0 ? (uint64_t)tp : 1;
            acts += pn->saved_rep / rdiv + pn->saved_split / (uint64_t)tp;
            /* mixed precision under ZeRO or FSDP runs on 16-bit weights
             * (section 1: DeepSpeed's layout, FSDP's param_dtype): autocast
             * casts no weight, so neither copy nor cache exists */
            bool ckpt_node = o->checkpointing && b >= 0; /* its copies are in its recomputed set */
            uint64_t casts = zero >= 1 ? mp_tplan_node_casts(pn, rdiv, (uint64_t)tp) : 0;
            if (!ckpt_node) acts = acts > casts ? acts - casts : 0;
            if (pn->cross && pp > 1 && pn->cross_unit >= 0 && pn->cross_unit < first_block[s])
                acts += pn->cross; /* received from an earlier stage and kept here too */
            if (zero >= 1) {
                /* no autocast copies (above) */
            } else if (!ckpt_node) {
                ps->cast_bytes += mp_tplan_node_casts(pn, 1, (uint64_t)tp);
            } else {
                cast_cached += mp_tplan_node_casts(pn, 1, (uint64_t)tp); /* autocast's cache (peak.c) */
            }
            uint64_t tmp = pn->split ? pn->temp / (uint64_t)tp : pn->temp / rdiv;
            if (tmp > temp) temp = tmp;
            if (o->checkpointing && b >= 0) {
                if (b != blk_id) {
                    blk_id = b;
                    blk_cur = 0;
                }
                /* what the node would keep: recomputed during its block's backward */
                blk_cur += mp_tplan_node_ckpt(pn, rdiv, (uint64_t)tp, zero >= 1);
                if (blk_cur > blk_max) blk_max = blk_cur;
            }
            /* roof(f / tp, b / tp) = roof(f, b) / tp: the node's roofline once */
            bool works = pn->fwd_flops > 0 || pn->bytes > 0;
            double bwe = pl->bw > 0 ? pl->bw * o->memory_eff : 0;
            double tf = works ? pn->roof_fwd / div + o->node_overhead_s : 0;
            double tb = pn->bwd_flops > 0 || pn->n_bwd_kernels
                            ? pn->roof_bwd / div + o->node_overhead_s * (pn->n_bwd_kernels ? pn->n_bwd_kernels : 1)
                            : 0;
            /* autocast's casts around it, and gradients accumulated into its output */
            if (bwe > 0) {
                tf += (double)pn->aux_fwd / div / bwe;
                tb += ((double)pn->aux_bwd + (double)pn->acc_bytes) / div / bwe;
            }
            tf += o->node_overhead_s * pn->n_aux_fwd;
            tb += o->node_overhead_s * (pn->n_aux_bwd + pn->n_acc);
            fwd_s += tf;
            bwd_s += tb;
            {
                uint64_t fo = (uint64_t)pn->n_fwd_ops + pn->n_aux_fwd;
                uint64_t fk = (uint64_t)(works ? 1 : 0) + pn->n_aux_fwd;
                uint64_t bo = o->inference ? 0 : (uint64_t)pn->n_bwd_ops + pn->n_aux_bwd + pn->n_acc;
                uint64_t bk = o->inference ? 0 : (uint64_t)pn->n_bwd_kernels + pn->n_aux_bwd + pn->n_acc;
                bool again = o->checkpointing && b >= 0 && !o->inference;
                uint64_t ag = hops - hops0; /* its parameters' AccumulateGrad, in its backward */
                hops += fo + bo + (again ? fo : 0);
                kern += fk + bk + (again ? fk : 0);
                double hf = (double)fo * o->host_op_s, hb = (double)(bo + ag) * o->host_op_s;
                if (o->inference) tb = 0;
                qh += hf;
                qd = (qd > qh ? qd : qh) + tf;
                if (qs) {
                    qs[2 * k] = hb;
                    qs[2 * k + 1] = tb;
                    if (again && b < pl->n_repeats) qblk[2 * b] += hf, qblk[2 * b + 1] += tf;
                }
            }
            if (o->checkpointing && b >= 0) rec_s += tf;
            ps->fwd_flops += (uint64_t)((double)pn->fwd_flops / div);
            ps->bwd_flops += (uint64_t)((double)pn->bwd_flops / div);
            if (o->checkpointing && b >= 0) ps->recompute_flops += (uint64_t)((double)pn->fwd_flops / div);
            if (tp > 1 && pn->tp_comm) tpc_s += 2.0 * (tp - 1) / tp * (double)pn->tp_comm / lb_tp;
        }
        ps->last = k - 1;
        if (s == pp - 1 && o->loss && !o->inference && pl->loss_fwd_io) {
            /* the cross-entropy's kernels (split over the vocabulary with the LM head) */
            double ldiv = pl->vocab_split ? (double)tp : 1.0;
            double bwe = pl->bw > 0 ? pl->bw * o->memory_eff : 0;
            fwd_s += (bwe > 0 ? (double)pl->loss_fwd_io / ldiv / bwe : 0) + o->node_overhead_s * pl->loss_fwd_kernels;
            bwd_s += (bwe > 0 ? (double)pl->loss_bwd_io / ldiv / bwe : 0) + o->node_overhead_s * pl->loss_bwd_kernels;
            hops += (uint64_t)pl->loss.host_ops + (uint64_t)pl->loss_bwd_kernels;
            kern += (uint64_t)pl->loss_fwd_kernels + (uint64_t)pl->loss_bwd_kernels;
            double lf = (bwe > 0 ? (double)pl->loss_fwd_io / ldiv / bwe : 0) + o->node_overhead_s * pl->loss_fwd_kernels;
            double lb = (bwe > 0 ? (double)pl->loss_bwd_io / ldiv / bwe : 0) + o->node_overhead_s * pl->loss_bwd_kernels;
            qh += (double)pl->loss.host_ops * o->host_op_s;
            qd = (qd > qh ? qd : qh) + lf;
            qh += (double)pl->loss_bwd_kernels * o->host_op_s;
            qd = (qd > qh ? qd : qh) + lb;
        }
        ps->queue_fwd_s = qd; /* inference: the forward (no loss) */
        /* the backward in reverse; a checkpointed block's forward runs again
         * when the backward reaches it */
        if (!o->inference) {
            int cur = -2;
            for (int j = k - 1; qs && j >= ps->first; j--) {
                int b = pl->nodes[j].repeat;
                if (o->checkpointing && b >= 0 && b < pl->n_repeats && b != cur) {
                    cur = b;
                    qh += qblk[2 * b];
                    qd = (qd > qh ? qd : qh) + qblk[2 * b + 1];
                }
                qh += qs[2 * j];
                qd = (qd > qh ? qd : qh) + qs[2 * j + 1];
            }
        }
        /* the loss's log-probabilities: split over the vocabulary with the LM head */
        uint64_t loss = pl->vocab_split ? pl->loss_bytes / (uint64_t)tp : pl->loss_bytes;
        if (s == pp - 1 && o->loss && !o->inference) acts += loss;
        uint64_t P = p_rep + p_split / (uint64_t)tp;
        ps->params = P;
        mp_tplan_mem *mem = &ps->mem;
        mp_tplan_model_states(P, o->precision, o->optimizer, zero, dp, mem);
        if (o->optimizer == MP_OPT_ADAFACTOR)
            mem->optimizer_bytes = mp_tplan_dbytes((mp_tplan_mixed(o->precision) || o->precision == MP_PREC_FP32 ? 4.0 : 2.0) /
                                              (zero >= 1 ? dp : 1),
                                          adafactor);
        if (pl->ft) mp_tplan_ft_states(pl, &fa, tp, zero, dp, m, mem, ps, &ft_opt_s);
        mem->activations_bytes = acts * (uint64_t)in_flight;
        if (o->checkpointing) temp += blk_max; /* a block's recomputed set and its transient */
        uint64_t lt = pl->vocab_split ? pl->loss.bwd_transient / (uint64_t)tp : pl->loss.bwd_transient;
        if (s == pp - 1 && o->loss && loss > 0 && lt > temp) temp = lt;
        mem->temporary_bytes = temp;
        mem->reserve_bytes = (uint64_t)(o->reserve_gb * 1e9);
        /* the peak: at the start of the backward every kept activation and
         * the largest transient are live. Gradients freed between steps
         * (zero_grad(set_to_none=True), one rank, no accumulation) are
         * allocated as the backward frees activations: then only the larger
         * of the two counts. */
        uint64_t fixed = mem->weights_bytes + mem->master_weights_bytes + mem->optimizer_bytes;
        bool grads_transient = mp_tplan_grads_born(o, dp, m, zero);
        /* the sum of maxima, replaced by the moment below */
        mem->peak_bytes = fixed + mem->grads_bytes + mem->activations_bytes + mem->temporary_bytes;
        /* the peak as a moment (peak.c) */
        {
            mp_peak_in pin;
            memset(&pin, 0, sizeof pin);
            pin.first = ps->first;
            pin.last = ps->last;
            pin.tp = tp;
            pin.dp = dp;
            pin.zero = zero;
            pin.m = m;
            pin.in_flight = in_flight;
            pin.rdiv = sp ? (uint64_t)tp : 1;
            pin.last_stage = s == pp - 1;
            pin.grads_born = grads_transient;
            pin.grads_in_forward = grads_transient && o->zero_grad == MP_ZEROGRAD_AFTER_FORWARD;
            pin.cast_cached = cast_cached;
            pin.buckets = mp_tplan_ddp_buckets(o, dp, zero, mem->grads_bytes);
            pin.grad_per_param = P ? (double)mem->grads_bytes * (zero >= 2 ? dp : 1) / (double)P : 0;
            pin.opt_per_param = P ? (double)mem->optimizer_bytes * (zero >= 1 ? dp : 1) / (double)P : 0;
            pin.weight_per_param = P ? (double)mem->weights_bytes * (zero >= 3 ? dp : 1) / (double)P : 0;
            pin.mem = mem;
            mp_tplan_moment at;
            mp_tplan_peak_stage(pl, &pin, &at);
            ps->at = at;
            mem->peak_bytes = at.total;
        }
        /* time per micro-batch */
        ps->fwd_s = fwd_s;
        ps->bwd_s = bwd_s;
        ps->recompute_s = rec_s;
        ps->tp_comm_s = tpc_s;
        if (pp > 1 && s < pp - 1) {
            /* the activation crossing to the next stage (the output of this
             * stage's last block node), forward and its gradient back */
            uint64_t boundary = 0;
            for (int q = ps->last; q >= ps->first && q >= 0; q--)
                if (pl->nodes[q].repeat >= 0 && pl->nodes[q].out_bytes) {
                    boundary = pl->nodes[q].out_bytes;
                    break;
                }
            ps->p2p_s = 2.0 * (double)boundary / lb_pp;
        }
        ps->mb_s = fwd_s + bwd_s + rec_s + tpc_s + ps->p2p_s;
        /* the host issuing its operators (host.c) and the device running
         * them through the launch queue: at least the slower of the two,
         * more where they take turns */
        ps->host_ops = hops;
        ps->kernels = kern;
        ps->device_mb_s = ps->mb_s;
        ps->host_mb_s = (double)hops * o->host_op_s;
        if (ps->host_mb_s > ps->mb_s) ps->mb_s = ps->host_mb_s;
        if (qs && !o->inference && qd + tpc_s + ps->p2p_s > ps->mb_s) ps->mb_s = qd + tpc_s + ps->p2p_s;
        if (ps->mb_s > worst_mb) worst_mb = ps->mb_s;
        if (mem->peak_bytes > worst_peak || s == 0) {
            worst_peak = mem->peak_bytes;
            out->worst = s;
            out->mem = *mem;
        }
        /* communication of data parallelism (per stage, its parameters) */
        if (dp > 1) {
            double d = (double)dp, f = (d - 1) / d;
            /* fine-tuning: only the trainable parameters' gradients are reduced */
            double G = sb.grads * (pl->ft ? (double)ps->trainable : (double)P), W = sb.weights * (double)P;
            double bytes = zero >= 3 ? f * G + 2 * f * W : (zero >= 1 ? f * G + f * W : 2 * f * G);
            double tcomm = bytes / lb_dp;
            if (tcomm > out->dp_comm_s) {
                out->dp_comm_s = tcomm;
                out->dp_comm_bytes = (uint64_t)bytes;
            }
        }
        /* the optimizer step: memory-bound, over this rank's partition */
        double upd = (double)(mem->weights_bytes + mem->master_weights_bytes + mem->optimizer_bytes) * 2 +
                     (double)mem->grads_bytes;
        /* before it, loss scaling's unscale and clipping pass over the
         * gradients it steps (host.c): fp32 under autocast, this rank's
         * partition under ZeRO */
        double gpass = (double)pl->grad_passes * (mp_tplan_mixed(o->precision) ? 4.0 : sb.grads) *
                       (pl->ft ? (double)ps->trainable : (double)P) / (zero >= 1 ? (double)dp : 1.0);
        double topt = pl->bw > 0 ? (upd + gpass) / (pl->bw * o->memory_eff) : 0;
        /* trainable states only; offloaded: the host link and the CPU (which clips there) */
        if (pl->ft) topt = ft_opt_s + (o->offload || pl->bw <= 0 ? 0 : gpass / (pl->bw * o->memory_eff));
        /* offloaded, the step runs on the host (the link and the CPU), not the device */
        if (topt > out->optimizer_device_s && !(pl->ft && o->offload)) out->optimizer_device_s = topt;
        if (pl->opt_host_s > topt) topt = pl->opt_host_s; /* the host issuing the optimizer's kernels */
        if (topt > out->optimizer_s) out->optimizer_s = topt;
        if (tpc_s > out->tp_comm_s) out->tp_comm_s = tpc_s;
        if (ps->p2p_s > out->p2p_s) out->p2p_s = ps->p2p_s;
    }
    out->compute_s = (double)m * worst_mb;
    out->bubble_s = (double)(pp - 1) * worst_mb;
    out->step_s = out->compute_s + out->bubble_s + out->dp_comm_s + out->optimizer_s;
    free(qs);
}


/* Every dp x tp x pp = G (tp a power of two up to 8 dividing the heads,
 * pp up to the block count) and every ZeRO stage: rows[0..n). */
/* prune: for the GPUs-needed search, a (tp, pp) whose most frugal ZeRO
 * stage (3; 0 with one data-parallel rank) does not fit is not tried with
 * the others (memory never drops from stage 3 to stage 0). */
static int enumerate_layouts(mp_tplan *pl, int G, int *stamp, mp_fit_row *rows, int cap, bool prune) {
    const mp_tplan_options *o = &pl->o;
    const mp_graph *g = pl->p->m->graph;
    int n = 0;
    for (int tp = 1; tp <= 8 && tp <= G; tp *= 2) {
        if (G % tp) continue;
        /* Megatron-LM: tp divides the heads and the KV heads (query groups) */
        if (tp > 1 && (pl->split_nodes == 0 || (pl->heads > 0 && pl->heads % tp) ||
                       (pl->kv_heads > 0 && pl->kv_heads % tp) || pl->routed))
            continue;
        for (int pp = 1; pp <= G / tp && pp <= 1024; pp++) {
            if ((G / tp) % pp || (pp > 1 && pp > pl->n_repeats)) continue;
            int dp = G / tp / pp;
            for (int zi = 0; zi <= 3 && n < cap; zi++) {
                int z = prune ? 3 - zi : zi;
                if (dp == 1 && z > 0) {
                    if (prune) continue;
                    break;
                }
                layout_out fo;
                int mm = o->micro_batches > 0 ? o->micro_batches : (pp > 1 ? 4 * pp : 1);
                if (pl->stamp_base + (uint64_t)pp + 1 > (uint64_t)0x3fffffff) { /* stamps wrap */
                    memset(stamp, 0, sizeof(int) * ((size_t)g->n_values + 1));
                    pl->stamp_base = 1;
                }
                layout(pl, dp, tp, pp, mm, z, NULL, &fo, stamp, pl->stamp_base);
                pl->stamp_base += (uint64_t)pp + 1;
                mp_fit_row *r = &rows[n++];
                r->dp = dp;
                r->tp = tp;
                r->pp = pp;
                r->zero = z;
                r->peak_bytes = fo.mem.peak_bytes + fo.mem.reserve_bytes;
                /* without a GPU there is no step time: the layouts are
                 * listed by memory only */
                r->step_s = pl->have_gpu ? fo.step_s : -1;
                double per_step = (pl->has_tokens ? (double)pl->tokens_per_mb : (double)pl->samples_per_mb) * mm * dp;
                r->tokens_per_s = pl->have_gpu && fo.step_s > 0 ? per_step / fo.step_s : -1;
                r->fits = pl->mem_bytes <= 0 || (double)r->peak_bytes <= pl->mem_bytes;
                if (prune && !r->fits) break;
            }
        }
    }
    return n;
}
static int fit_cmp(const void *a, const void *b) {
    const mp_fit_row *x = a, *y = b;
    if (x->fits != y->fits) return x->fits ? -1 : 1;
    if (x->tokens_per_s != y->tokens_per_s) return x->tokens_per_s > y->tokens_per_s ? -1 : 1;
    if (x->peak_bytes != y->peak_bytes) return x->peak_bytes < y->peak_bytes ? -1 : 1;
    return 0;
}

/* The plan's own layout (stages, memory, time), then --fit's layouts and
 * the GPUs-needed search. */
mp_status mp_tplan_layouts(mp_tplan *pl) {
    const mp_tplan_options *o = &pl->o;
    const mp_graph *g = pl->p->m->graph;
    for (int k = 0; k < pl->n_nodes; k++) {
        mp_pnode *pn = &pl->nodes[k];
        double peak = pn->lower ? pl->peak_low_flops : pl->peak_flops;
        /* an fp32 product on the tensor cores as TF32 (--tf32): PyTorch's
         * defaults let cuDNN's convolutions (torch.backends.cudnn.allow_tf32)
         * and not cuBLAS's matmuls (torch.backends.cuda.matmul.allow_tf32) */
        if (!pn->lower && o->tf32 != MP_TF32_NONE && k < g->n_nodes) {
            const char *op = g->nodes[g->order[k]].op;
            bool conv = mp_streq(op, "Conv") || mp_streq(op, "ConvTranspose");
            bool mm = mp_streq(op, "MatMul") || mp_streq(op, "Gemm") || mp_streq(op, "Einsum");
            if (conv || (mm && o->tf32 == MP_TF32_ALL)) peak = pl->peak_tf32_flops;
        }
        double run = 1.0 - pn->skipped; /* a causal kernel's tiles run (graph.c causal_skip) */
        pn->roof_fwd = roof((double)pn->fwd_flops * run, peak, (double)pn->bytes, pl->bw, o);
        pn->roof_bwd = roof((double)pn->bwd_flops * run, peak, 2.0 * (double)pn->bytes, pl->bw, o);
        /* kernels bound by the instructions they issue (graph.c's native_depthwise) */
        if (pl->simt_ips > 0 && (pn->simt_fwd || pn->simt_bwd)) {
            double f = (double)pn->simt_fwd / (pl->simt_ips * o->compute_eff);
            double b = (double)pn->simt_bwd / (pl->simt_ips * o->compute_eff);
            if (f > pn->roof_fwd) pn->roof_fwd = f;
            if (b > pn->roof_bwd) pn->roof_bwd = b;
        }
    }
    pl->stages = mp_arena_calloc(&pl->arena, (size_t)pl->pp, sizeof(mp_pstage));
    int *stamp = calloc((size_t)g->n_values + 1, sizeof(int));
    if (!pl->stages || !stamp) {
        free(stamp);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    layout_out lo;
    layout(pl, pl->dp, pl->tp, pl->pp, pl->m, pl->zero, pl->stages, &lo, stamp, 0);
    pl->stamp_base = (uint64_t)pl->pp + 1;
    pl->mem = lo.mem;
    pl->worst = lo.worst;
    pl->compute_s = lo.compute_s;
    pl->bubble_s = lo.bubble_s;
    pl->dp_comm_s = lo.dp_comm_s;
    pl->dp_comm_bytes = lo.dp_comm_bytes;
    pl->tp_comm_s = lo.tp_comm_s;
    pl->p2p_s = lo.p2p_s;
    pl->optimizer_s = lo.optimizer_s;
    pl->step_s = lo.step_s;
    /* the bound of the step: the slowest stage's micro-batch, host or device */
    {
        double hmax = 0, dmax = 0;
        for (int s = 0; s < pl->pp; s++) {
            if (pl->stages[s].host_mb_s > hmax) hmax = pl->stages[s].host_mb_s;
            if (pl->stages[s].device_mb_s > dmax) dmax = pl->stages[s].device_mb_s;
        }
        pl->host_s = (double)pl->m * hmax + pl->opt_host_s;
        pl->device_s = (double)pl->m * dmax + lo.optimizer_device_s;
        pl->host_bound = hmax > dmax;
    }
    /* --fit: every dp x tp x pp of the GPUs and every ZeRO stage */
    if (o->fit && !o->inference) {
        int cap = 4096;
        pl->fit = mp_arena_calloc(&pl->arena, (size_t)cap, sizeof(mp_fit_row));
        if (!pl->fit) {
            free(stamp);
            return mp_error(MP_ERR_NOMEM, "out of memory");
        }
        pl->n_fit = enumerate_layouts(pl, o->gpus > 0 ? o->gpus : 8, stamp, pl->fit, cap, false);
    }
    /* GPUs needed: the fewest (powers of two) with a layout that fits */
    if (!o->inference && pl->mem_bytes > 0) {
        mp_fit_row rows[512];
        /* no layout of G GPUs holds less than the model states over G
         * (ZeRO-3): start at that bound */
        mp_tplan_mem ms;
        mp_tplan_model_states(pl->params, o->precision, o->optimizer, 0, 1, &ms);
        double states = (double)(ms.weights_bytes + ms.grads_bytes + ms.master_weights_bytes + ms.optimizer_bytes);
        int G = 1;
        while (G < 65536 && states / G > pl->mem_bytes) G *= 2;
        for (; G <= 65536 && !pl->need.dp; G *= 2) {
            int n = enumerate_layouts(pl, G, stamp, rows, (int)MP_ARRAY_LEN(rows), true);
            for (int i = 0; i < n; i++)
                if (rows[i].fits && (!pl->need.dp || rows[i].tokens_per_s > pl->need.tokens_per_s))
                    pl->need = rows[i];
        }
    }
    free(stamp);
    if (pl->n_fit > 1) qsort(pl->fit, (size_t)pl->n_fit, sizeof *pl->fit, fit_cmp);
    return MP_OK;
}
