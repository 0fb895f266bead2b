/* Fine-tuning as people run it (docs/PLANNING.md section 12): which
 * parameters train (--freeze / --unfreeze globs, the base frozen under
 * LoRA), LoRA adapters on the pattern layer's roles, a quantized frozen
 * base (QLoRA's NF4, int8, fp8), optimizers whose states are per tensor
 * (bitsandbytes' blockwise 8-bit AdamW, Lion) and offload to the host.
 * The graph pass (graph.c) reads the flags made here: a frozen parameter
 * needs no gradient, so nothing downstream of it alone keeps anything for
 * the backward (the same rule that leaves a graph input's consumers
 * alone); an adapted product's output needs one. The layouts (layout.c)
 * sum the model states per parameter class with mp_tplan_ft_states. */
#include "plan/plan.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/patterns.h"
#include "ops/ops.h"

/* bitsandbytes' 8-bit optimizers (bitsandbytes/optim/optimizer.py,
 * Optimizer2State.init_state and Optimizer1State.init_state): tensors of
 * fewer than min_8bit_size = 4096 elements keep 32-bit states; the others
 * keep uint8 states and one fp32 absmax per block of 256 elements per
 * state. */
#define BNB_MIN_8BIT_SIZE 4096
#define BNB_OPT_BLOCK 256
/* bitsandbytes' 4-bit weights (bitsandbytes/functional.py quantize_4bit,
 * nn/modules.py Params4bit): blocks of 64; double quantization
 * (compress_statistics) quantizes the absmax of each block to 8 bits in
 * blocks of 256, with an fp32 absmax per 256 blocks and one fp32 offset. */
#define NF4_BLOCK 64
#define NF4_DQ_BLOCK 256
/* DeepSpeedCPUAdam (ZeRO-Offload, Ren et al., USENIX ATC 2021, table 3:
 * about 0.22 s for an Adam step over 1 billion parameters on the paper's
 * two-socket Xeon host): parameters a second, --cpu-adam-gps overrides. */
#define CPU_ADAM_PARAMS_S (1e9 / 0.22)

static const char *const role_names[MP_WROLE_COUNT] = {
#define MP__WN(id, name) name,
    MP_WROLE_LIST(MP__WN)
#undef MP__WN
};

mp_status mp_tplan_ft_check(const mp_tplan_options *o) {
    bool lora = o->lora_rank > 0;
    if (o->lora_rank < 0) return mp_error(MP_ERR_USAGE, "--lora-rank %d: expected a positive integer", o->lora_rank);
    if (!(o->lora_dropout >= 0 && o->lora_dropout < 1))
        return mp_error(MP_ERR_USAGE, "--lora-dropout %g: expected a probability in [0, 1)", o->lora_dropout);
    if (!lora && o->lora_targets)
        return mp_error(MP_ERR_USAGE, "--lora-targets needs --lora-rank (the adapters' rank)");
    if (!lora && o->lora_dropout > 0) return mp_error(MP_ERR_USAGE, "--lora-dropout needs --lora-rank");
    if (o->base_dtype < 0 || o->base_dtype > 3) return mp_error(MP_ERR_USAGE, "--base-dtype: expected nf4, int8 or fp8");
    if (o->no_double_quant && o->base_dtype != 1)
        return mp_error(MP_ERR_USAGE, "--no-double-quant applies to --base-dtype nf4");
    if (o->offload < 0 || o->offload > 2) return mp_error(MP_ERR_USAGE, "--offload: expected optimizer or params");
    if (o->offload == 2 && !(o->zero == 3 || o->fsdp))
        return mp_error(MP_ERR_USAGE, "--offload params needs --zero 3 or --fsdp: parameters are offloaded as "
                        "shards (DeepSpeed's offload_param is a ZeRO-3 option, FSDP's CPUOffload(offload_params="
                        "True) shards them)");
    if (o->inference && (lora || o->trainable[0] || o->offload))
        return mp_error(MP_ERR_USAGE, "--inference: %s applies to training only",
                        lora ? "--lora-rank" : o->trainable[0] ? "--freeze/--unfreeze" : "--offload");
    if (memchr(o->trainable, 0, sizeof o->trainable) == NULL)
        return mp_error(MP_ERR_USAGE, "--freeze/--unfreeze: the globs are not terminated");
    return MP_OK;
}

/* A parameter a product reads, through views (W.t() of nn.Linear). Not
 * through an Expand: a parameter broadcast (ViT's class token expanded to
 * the batch) is a tensor of the batch, not a weight (autocast does not cast
 * it as one). */
int mp_tplan_weight_of(const mp_graph *g, int v) {
    for (int hop = 0; v >= 0 && hop < 8; hop++) {
        const mp_value *val = &g->values[v];
        if (val->flags & MP_VAL_PARAM) return v;
        if (val->producer < 0) return -1;
        const mp_node *p = &g->nodes[val->producer];
        if (!p->desc || p->desc->train != mp_bwd_view || p->n_in < 1 || mp_streq(p->op, "Expand")) return -1;
        v = p->in[0];
    }
    return -1;
}

/* A weight product: a MatMul or Gemm whose input 1 is a 2-D parameter (or
 * a view of one); its in and out features as the product uses it. */
static int product_weight(const mp_graph *g, const mp_node *n, uint32_t *fin, uint32_t *fout) {
    if (!(mp_streq(n->op, "MatMul") || mp_streq(n->op, "Gemm")) || n->n_in < 2 || n->in[1] < 0) return -1;
    int w = mp_tplan_weight_of(g, n->in[1]);
    const mp_value *b = &g->values[n->in[1]];
    if (w < 0 || b->rank != 2 || b->dims[0] <= 0 || b->dims[1] <= 0) return -1;
    bool t = mp_streq(n->op, "Gemm") && mp_attr_i(n, "transB", 0);
    *fin = (uint32_t)(t ? b->dims[1] : b->dims[0]);
    *fout = (uint32_t)(t ? b->dims[0] : b->dims[1]);
    return w;
}

/* A glob matches a parameter by its name ("layers.0.attention.wq.weight"),
 * by the path of its module or of any module above it ("layers.0.attention"
 * matches every parameter under it) or, for a name the exporter made up
 * ("onnx::MatMul_12"), by the module path of the node reading it. */
static bool glob_match(const char *glob, const char *name, const char *mod) {
    if (fnmatch(glob, name, 0) == 0) return true;
    char buf[512];
    size_t len = strlen(name);
    if (len < sizeof buf) {
        memcpy(buf, name, len + 1);
        for (char *dot = strrchr(buf, '.'); dot && dot > buf; dot = strrchr(buf, '.')) {
            *dot = 0;
            if (fnmatch(glob, buf, 0) == 0) return true;
        }
    }
    return mod && *mod && fnmatch(glob, mod, 0) == 0;
}

double mp_tplan_opt_tensor(mp_optimizer opt, double s, uint64_t n, uint64_t rows, uint64_t cols) {
    double e = (double)n;
    switch (opt) {
    case MP_OPT_ADAM:
    case MP_OPT_ADAMW: return 2 * s * e;
    case MP_OPT_SGD_MOMENTUM:
    case MP_OPT_LION: return s * e; /* one buffer: momentum; Lion's exp_avg */
    case MP_OPT_ADAFACTOR: return s * (rows > 1 && cols > 0 ? (double)rows + (double)cols : e);
    case MP_OPT_ADAMW8BIT:
    case MP_OPT_PAGED_ADAMW8BIT:
        if (n < BNB_MIN_8BIT_SIZE) return 8 * e; /* two fp32 states */
        return 2 * e + 2 * 4 * (double)((n + BNB_OPT_BLOCK - 1) / BNB_OPT_BLOCK);
    default: return 0;
    }
}

double mp_tplan_quant_bytes(const mp_tplan_options *o, uint64_t n, uint64_t rows) {
    switch (o->base_dtype) {
    case 1: {
        uint64_t blocks = (n + NF4_BLOCK - 1) / NF4_BLOCK;
        double b = (double)((n + 1) / 2);
        if (o->no_double_quant) return b + 4.0 * (double)blocks;
        return b + (double)blocks + 4.0 * (double)((blocks + NF4_DQ_BLOCK - 1) / NF4_DQ_BLOCK) + 4;
    }
    case 2: return (double)n + 4.0 * (double)rows; /* LLM.int8(): an fp32 scale per row (SCB) */
    case 3: return (double)n + 4;                  /* fp8 e4m3 and a per-tensor fp32 scale */
    default: return 0;
    }
}

/* The host link: --host-link-gbs, else the GPU's host interface from its
 * datasheet (PCIe generation x16; per direction, after 128b/130b coding:
 * PCIe 3.0 15.75 GB/s, 4.0 31.5 GB/s, 5.0 63 GB/s, PCI-SIG base
 * specifications; GH200's NVLink-C2C 450 GB/s per direction). */
static void host_link(mp_tplan *pl) {
    const mp_tplan_options *o = &pl->o;
    if (o->host_link_gbs > 0) {
        pl->host_link = o->host_link_gbs * 1e9;
        pl->host_link_source = "--host-link-gbs";
        return;
    }
    const char *id = o->gpu ? o->gpu : "";
    if (strstr(id, "gh200")) {
        pl->host_link = 450e9;
        pl->host_link_source = "NVLink-C2C, 900 GB/s both directions (GH200 datasheet)";
    } else if (strstr(id, "h100") || strstr(id, "h200") || strstr(id, "b200")) {
        pl->host_link = 63e9;
        pl->host_link_source = "PCIe 5.0 x16 (the GPU's datasheet), 63 GB/s per direction";
    } else if (strstr(id, "v100")) {
        pl->host_link = 15.75e9;
        pl->host_link_source = "PCIe 3.0 x16 (the GPU's datasheet), 15.75 GB/s per direction";
    } else {
        pl->host_link = 31.5e9;
        pl->host_link_source = o->gpu ? "PCIe 4.0 x16 (the GPU's datasheet), 31.5 GB/s per direction"
                                      : "assumed PCIe 4.0 x16, 31.5 GB/s per direction (--host-link-gbs)";
    }
}

/* A weight's name, or for a name the exporter made up ("val_17": the
 * dynamo exporter's folded W.t()) the path of the module reading it. */
static const char *display_name(const mp_graph *g, const char *const *mod, int w) {
    const char *name = g->values[w].name;
    if ((!name || !strchr(name, '.')) && mod && mod[w] && *mod[w]) return mod[w];
    return name ? name : "?";
}

/* An adapted product, named as display_name says. */
static mp_status adapt(mp_tplan *pl, const mp_graph *g, int ni, const char *const *mod) {
    if (pl->adapted[ni]) return MP_OK;
    uint32_t fi, fo;
    int w = product_weight(g, &g->nodes[ni], &fi, &fo);
    if (w < 0) return MP_OK;
    pl->adapted[ni] = 1;
    pl->lora_in[ni] = fi;
    pl->lora_out[ni] = fo;
    pl->adapted_names[pl->n_adapted++] = display_name(g, mod, w);
    pl->lora_params += (uint64_t)pl->o.lora_rank * ((uint64_t)fi + fo);
    return MP_OK;
}

mp_status mp_tplan_ft_prepare(mp_tplan *pl, const mp_patterns *P) {
    const mp_tplan_options *o = &pl->o;
    mp_model *m = pl->p->m;
    const mp_graph *g = m->graph;
    int nv = g->n_values, nn = g->n_nodes;
    int n_role = pl->p->role_params ? pl->p->params_by_role_n : 0;
    bool lora = o->lora_rank > 0;
    pl->ft = o->trainable[0] || lora || o->base_dtype || o->offload || o->optimizer == MP_OPT_ADAMW8BIT ||
             o->optimizer == MP_OPT_PAGED_ADAMW8BIT || o->optimizer == MP_OPT_LION;
    host_link(pl);
    pl->cpu_adam = o->cpu_adam_gps > 0 ? o->cpu_adam_gps * 1e9 : CPU_ADAM_PARAMS_S;
    /* the module path of each value's first reader */
    const char **mod = NULL;
    if (o->trainable[0] || lora || o->base_dtype) {
        mod = calloc((size_t)nv + 1, sizeof *mod);
        if (!mod) return mp_error(MP_ERR_NOMEM, "out of memory");
        for (int ni = 0; ni < nn; ni++) {
            const mp_node *n = &g->nodes[ni];
            const char *path = n->module >= 0 && n->module < m->n_modules ? m->modules[n->module].path : NULL;
            for (int i = 0; i < n->n_in; i++)
                if (n->in[i] >= 0 && !mod[n->in[i]]) mod[n->in[i]] = path;
        }
        /* a weight read through a view: the product's module */
        for (int ni = 0; ni < nn; ni++) {
            const mp_node *n = &g->nodes[ni];
            uint32_t a, b;
            int w = product_weight(g, n, &a, &b);
            if (w >= 0 && n->module >= 0 && n->module < m->n_modules &&
                (!mod[w] || !strstr(g->values[w].name ? g->values[w].name : "", ".")))
                mod[w] = m->modules[n->module].path;
        }
    }
    mp_status st = MP_OK;
    uint64_t all = 0;
    if (o->trainable[0] || lora) {
        pl->ptrain = mp_arena_calloc(&pl->arena, (size_t)nv + 1, 1);
        if (!pl->ptrain) {
            free(mod);
            return mp_error(MP_ERR_NOMEM, "out of memory");
        }
        for (int v = 0; v < nv; v++)
            if (g->values[v].flags & MP_VAL_PARAM) pl->ptrain[v] = !lora; /* LoRA freezes the base, as PEFT */
        /* and the declared parameters the graph does not hold, by their names */
        if (n_role) {
            pl->role_train = mp_arena_calloc(&pl->arena, (size_t)n_role, 1);
            if (!pl->role_train) {
                free(mod);
                return mp_error(MP_ERR_NOMEM, "out of memory");
            }
            memset(pl->role_train, !lora, (size_t)n_role);
        }
        /* the globs in the order given: the last that matches decides */
        const char *r = o->trainable;
        while (*r && !st) {
            char sign = *r++;
            const char *end = strchr(r, ';');
            size_t k = end ? (size_t)(end - r) : strlen(r);
            char glob[512];
            if (k >= sizeof glob) k = sizeof glob - 1;
            memcpy(glob, r, k);
            glob[k] = 0;
            r += k + (end ? 1 : 0);
            int hits = 0;
            const char *example = NULL;
            for (int v = 0; v < nv; v++) {
                const mp_value *val = &g->values[v];
                if (!(val->flags & MP_VAL_PARAM)) continue;
                const char *name = val->name ? val->name : "";
                if (!example) example = name;
                if (!glob_match(glob, name, mod[v])) continue;
                pl->ptrain[v] = sign == '+';
                hits++;
            }
            for (int ri = 0; ri < n_role; ri++) {
                const char *rname = pl->p->role_params[ri].name; /* the signature's target: a module path */
                if (!glob_match(glob, rname ? rname : "", NULL)) continue;
                pl->role_train[ri] = sign == '+';
                hits++;
            }
            if (!hits)
                st = mp_error(MP_ERR_USAGE, "--%s '%s': matches no parameter (names look like '%s'; a glob "
                              "matches a parameter's name or its module's path)", sign == '+' ? "unfreeze" : "freeze",
                              glob, example ? example : "");
        }
    }
    for (int v = 0; v < nv; v++)
        if (g->values[v].flags & MP_VAL_PARAM) {
            uint64_t e = mp_tplan_numel(&g->values[v]);
            all += e;
            if (!pl->ptrain || pl->ptrain[v]) pl->base_trainable += e;
        }
    for (int r = 0; r < n_role; r++)
        if (mp_tplan_role_trains(pl, r)) pl->base_trainable += pl->p->role_params[r].numel;
    (void)all;

    /* LoRA's adapted products */
    if (!st && lora) {
        pl->adapted = mp_arena_calloc(&pl->arena, (size_t)nn + 1, 1);
        pl->lora_in = mp_arena_calloc(&pl->arena, (size_t)nn + 1, sizeof(uint32_t));
        pl->lora_out = mp_arena_calloc(&pl->arena, (size_t)nn + 1, sizeof(uint32_t));
        pl->adapted_names = mp_arena_calloc(&pl->arena, (size_t)nn + 1, sizeof(char *));
        if (!pl->adapted || !pl->lora_in || !pl->lora_out || !pl->adapted_names) st = mp_error(MP_ERR_NOMEM, "out of memory");
        const char *targets = o->lora_targets && *o->lora_targets ? o->lora_targets : "q,v";
        const char *t = targets;
        while (!st && *t) {
            const char *end = strchr(t, ',');
            size_t k = end ? (size_t)(end - t) : strlen(t);
            char tok[256];
            if (k >= sizeof tok) k = sizeof tok - 1;
            memcpy(tok, t, k);
            tok[k] = 0;
            t += k + (end ? 1 : 0);
            if (!*tok) continue;
            int role = -1;
            bool matched = false;
            for (int r = 0; r < MP_WROLE_COUNT; r++)
                if (strcmp(tok, role_names[r]) == 0) role = r;
            if (role >= 0) {
                for (int b = 0; P && b < P->n_blocks && !st; b++) {
                    const mp_pblock *B = &P->blocks[b];
                    int n = B->w[role].node;
                    bool qkv = (role == MP_WROLE_Q || role == MP_WROLE_K || role == MP_WROLE_V) && n < 0 &&
                               B->w[MP_WROLE_QKV].node >= 0;
                    if (qkv) { /* q, k or v on a fused qkv: the whole product */
                        n = B->w[MP_WROLE_QKV].node;
                        if (!pl->adapted[n]) pl->adapted_qkv++;
                    }
                    if (n >= 0) {
                        matched = true;
                        st = adapt(pl, g, n, mod);
                    }
                }
                if (!st && !matched)
                    st = mp_error(MP_ERR_USAGE, "--lora-targets %s: no block has a '%s' product (the pattern "
                                  "layer's roles are in the plan's patterns)", tok, tok);
            } else if (strcmp(tok, "all-linear") == 0) {
                /* PEFT's all-linear: every Linear but the output layer */
                for (int ni = 0; ni < nn && !st; ni++) {
                    uint32_t a, b;
                    if (P && ni == P->lm_head) continue;
                    if (product_weight(g, &g->nodes[ni], &a, &b) >= 0) st = adapt(pl, g, ni, mod);
                }
            } else if (strpbrk(tok, ".*?[")) {
                int hits = 0;
                const char *example = NULL;
                for (int ni = 0; ni < nn && !st; ni++) {
                    uint32_t a, b;
                    int w = product_weight(g, &g->nodes[ni], &a, &b);
                    if (w < 0) continue;
                    if (!example) example = g->values[w].name;
                    if (!glob_match(tok, g->values[w].name ? g->values[w].name : "", mod ? mod[w] : NULL)) continue;
                    hits++;
                    st = adapt(pl, g, ni, mod);
                }
                if (!st && !hits)
                    st = mp_error(MP_ERR_USAGE, "--lora-targets '%s': matches no weight product's parameter or "
                                  "module (names look like '%s'; a glob matches the whole name)", tok,
                                  example ? example : "");
            } else {
                st = mp_error(MP_ERR_USAGE, "--lora-targets '%s': not a role (q, k, v, qkv, o, up, gate, gate_up, "
                              "down, all-linear) nor a module glob (with '.' or '*')", tok);
            }
        }
        if (!st && pl->n_adapted == 0)
            st = mp_error(MP_ERR_USAGE, "--lora-targets %s: no weight product to adapt", targets);
    }

    /* a quantized frozen base: the weights of the blocks' products */
    if (!st && o->base_dtype) {
        pl->pquant = mp_arena_calloc(&pl->arena, (size_t)nv + 1, 1);
        if (!pl->pquant) st = mp_error(MP_ERR_NOMEM, "out of memory");
        int cdt = o->precision == MP_PREC_FP32 ? 4 : 2;
        for (int b = 0; P && b < P->n_blocks && !st; b++)
            for (int r = 0; r < MP_WROLE_COUNT && !st; r++) {
                int n = P->blocks[b].w[r].node;
                uint32_t fi, fo;
                int w = n >= 0 ? product_weight(g, &g->nodes[n], &fi, &fo) : -1;
                if (w < 0 || pl->pquant[w]) continue;
                if (!pl->ptrain || pl->ptrain[w]) {
                    static const char *const dn[] = {"", "nf4", "int8", "fp8"};
                    st = mp_error(MP_ERR_USAGE, "--base-dtype %s: '%s' is trainable, and a quantized weight cannot "
                                  "be trained (freeze it, or train adapters with --lora-rank)", dn[o->base_dtype],
                                  display_name(g, mod, w));
                    break;
                }
                pl->pquant[w] = 1;
                const mp_value *val = &g->values[w];
                uint64_t e = mp_tplan_numel(val);
                pl->quant_params += e;
                pl->quant_bytes += (uint64_t)mp_tplan_quant_bytes(o, e, val->rank >= 1 ? (uint64_t)val->dims[0] : 1);
                if (e * (uint64_t)cdt > pl->dequant_bytes) pl->dequant_bytes = e * (uint64_t)cdt;
            }
        if (!st && pl->quant_params == 0)
            st = mp_error(MP_ERR_USAGE, "--base-dtype: the model has no blocks with weight products to quantize");
    }
    pl->trainable_params = pl->base_trainable + pl->lora_params;
    free(mod);
    return st;
}

/* The largest micro-batch that fits: what grows with the batch (the peak
 * less the model states, the workspaces and the reserve: kept activations,
 * the loss, transients) is linear in the samples. */
static int64_t max_batch(const mp_tplan *pl, const mp_tplan_mem *m) {
    if (pl->mem_bytes <= 0 || pl->samples_per_mb == 0) return -1;
    double states = (double)(m->weights_bytes + m->grads_bytes + m->master_weights_bytes + m->optimizer_bytes);
    double per = ((double)m->peak_bytes - states) / (double)pl->samples_per_mb;
    double room = pl->mem_bytes - (double)m->reserve_bytes - states;
    if (per <= 0) return -1;
    if (room < per) return 0;
    double b = floor(room / per);
    return b > 1e9 ? 1000000000 : (int64_t)b;
}

mp_status mp_tplan_ft_answer(mp_tplan *pl) {
    const mp_tplan_options *o = &pl->o;
    if (!o->fit || o->inference || pl->mem_bytes <= 0) return MP_OK;
    pl->answer = true;
    pl->need_bytes = pl->mem.peak_bytes + pl->mem.reserve_bytes;
    pl->max_mb = max_batch(pl, &pl->mem);
    pl->max_mb_ckpt = -1;
    if (o->checkpointing || pl->n_repeats == 0) {
        pl->need_ckpt_bytes = o->checkpointing ? pl->need_bytes : 0;
        pl->max_mb_ckpt = o->checkpointing ? pl->max_mb : -1;
        pl->step_ckpt_s = o->checkpointing ? pl->step_s : -1;
        return MP_OK;
    }
    /* the same layout with each block checkpointed */
    mp_tplan_options c = pl->o;
    c.checkpointing = 1;
    c.fit = 0;
    if (pl->precision_auto) c.precision = MP_PREC_AUTO;
    mp_tplan *q = NULL;
    mp_status st = mp_tplan_create(pl->p, &c, &q);
    if (st) return st;
    pl->need_ckpt_bytes = q->mem.peak_bytes + q->mem.reserve_bytes;
    pl->max_mb_ckpt = max_batch(q, &q->mem);
    pl->step_ckpt_s = q->have_gpu ? q->step_s : -1;
    mp_tplan_free(q);
    return MP_OK;
}

void mp_tplan_ft_elems(const mp_tplan *pl, uint64_t e, uint64_t rows, uint64_t cols, bool trains, bool split, int tp,
                       mp_ft_acc *a) {
    if (trains) {
        const mp_precision pr = pl->o.precision;
        double s = mp_tplan_mixed(pr) || pr == MP_PREC_FP32 ? 4 : 2;
        a->opt_bytes += mp_tplan_opt_tensor(pl->o.optimizer, s, e, rows, cols) / (split ? (double)tp : 1.0);
        if (split) a->train_split += e;
        else a->train_rep += e;
    } else if (split) {
        a->frozen_split += e;
    } else {
        a->frozen_rep += e;
    }
}

void mp_tplan_ft_param(const mp_tplan *pl, int v, bool split, int tp, mp_ft_acc *a) {
    const mp_value *val = &pl->p->m->graph->values[v];
    uint64_t e = mp_tplan_numel(val);
    bool trains = !pl->ptrain || pl->ptrain[v];
    if (!trains && pl->pquant && pl->pquant[v]) {
        double div = split ? (double)tp : 1.0;
        a->quant_bytes += mp_tplan_quant_bytes(&pl->o, e, val->rank >= 1 ? (uint64_t)val->dims[0] : 1) / div;
        return;
    }
    uint64_t rows = 0, cols = 0;
    if (val->rank >= 2) {
        int64_t r = mp_dims_product(val->dims, val->rank - 1);
        rows = r > 0 ? (uint64_t)r : 0;
        cols = (uint64_t)val->dims[val->rank - 1];
    }
    mp_tplan_ft_elems(pl, e, rows, cols, trains, split, tp, a);
}

void mp_tplan_ft_node(const mp_tplan *pl, const mp_pnode *pn, mp_ft_acc *a) {
    if (!pn->lora_a) return;
    /* PEFT keeps adapters in fp32 (autocast_adapter_dtype=True): fp32 states */
    a->adapters += pn->lora_a + pn->lora_b;
    a->opt_bytes += mp_tplan_opt_tensor(pl->o.optimizer, 4, pn->lora_a, pn->lora_a / (uint64_t)pl->o.lora_rank,
                                        (uint64_t)pl->o.lora_rank) +
                    mp_tplan_opt_tensor(pl->o.optimizer, 4, pn->lora_b, (uint64_t)pl->o.lora_rank,
                                        pn->lora_b / (uint64_t)pl->o.lora_rank);
}

void mp_tplan_ft_states(const mp_tplan *pl, const mp_ft_acc *a, int tp, int zero, int dp, int m,
                        mp_tplan_mem *mem, mp_pstage *ps, double *opt_s) {
    const mp_tplan_options *o = &pl->o;
    mp_state_bytes b;
    mp_tplan_state_bytes(o->precision, o->optimizer, &b);
    if (mp_tplan_mixed(o->precision) && zero == 0) { /* AMP: fp32 weights are the master copy */
        b.weights = 4;
        b.grads = 4;
        b.master = 0;
    }
    if (dp < 1) dp = 1;
    if (tp < 1) tp = 1;
    double d = (double)dp;
    double T = (double)a->train_rep + (double)a->train_split / tp;
    double F = (double)a->frozen_rep + (double)a->frozen_split / tp;
    double A = (double)a->adapters;
    double W = (T + F) * b.weights + a->quant_bytes + 4 * A;  /* adapters: fp32 (PEFT) */
    double G = T * b.grads + 4 * A;
    double M = T * b.master;
    double S = a->opt_bytes;
    double w_gpu = zero >= 3 ? W / d : W, g_gpu = zero >= 2 ? G / d : G;
    double m_gpu = zero >= 1 ? M / d : M, s_gpu = zero >= 1 ? S / d : S;
    /* the optimizer step: reads and writes the trainable weights, master
     * copies and states, reads the gradients (memory-bound) */
    double trained_w = (zero >= 3 ? (T * b.weights + 4 * A) / d : T * b.weights + 4 * A);
    double upd = (trained_w + m_gpu + s_gpu) * 2 + g_gpu;
    double t = pl->bw > 0 ? upd / (pl->bw * o->memory_eff) : 0;
    double host = 0, link = 0;
    double part = zero >= 1 ? d : 1; /* each rank steps its partition */
    if (o->offload >= 1) {
        /* ZeRO-Offload: optimizer states and fp32 master weights live on
         * the host, which keeps fp32 gradients for the CPU step; the
         * gradients go down, the updated weights come back */
        host = s_gpu + (zero >= 1 ? M / d : M) + 4 * (T + A) / part;
        link = (T * b.grads + 4 * A) / part + (T * b.weights + 4 * A) / part;
        m_gpu = s_gpu = 0;
        if (o->offload == 2) {
            /* parameters too (ZeRO-3 offload_param, FSDP CPUOffload): the
             * GPU holds the layer being computed, its shard fetched from the
             * host and all-gathered in each forward and backward of every
             * micro-batch */
            host += W / d;
            link += 2.0 * m * W / d;
            double L = (double)pl->largest_layer;
            w_gpu = L * b.weights;
            g_gpu = L * b.grads;
        }
        t = link / (pl->host_link > 0 ? pl->host_link : 31.5e9) + (T + A) / part / pl->cpu_adam;
    }
    mem->weights_bytes = (uint64_t)llround(w_gpu);
    mem->grads_bytes = (uint64_t)llround(g_gpu);
    mem->master_weights_bytes = (uint64_t)llround(m_gpu);
    mem->optimizer_bytes = (uint64_t)llround(s_gpu);
    ps->trainable = (uint64_t)llround(T + A);
    ps->host_bytes = (uint64_t)llround(host);
    ps->link_bytes = link;
    *opt_s = t;
}
