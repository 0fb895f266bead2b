/* Model states per GPU: weights, gradients, master weights and optimizer
 * states, per precision and optimizer, divided as each ZeRO stage and FSDP
 * divide them (docs/PLANNING.md section 1; the ZeRO paper, section 5), and
 * DeepSpeed's own estimators beside them. */
#include "plan/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"


/* ---- model states (docs/PLANNING.md "model states"; ZeRO paper §3) ---- */

void mp_tplan_state_bytes(mp_precision prec, mp_optimizer opt, mp_state_bytes *b) {
    double w = prec == MP_PREC_FP32 ? 4 : 2;
    b->weights = w;
    b->grads = w;
    b->master = mp_tplan_mixed(prec) ? 4 : 0;
    /* optimizer states: fp32 under fp32 and mixed precision, the weights'
     * type in pure bf16/fp16 training */
    double s = mp_tplan_mixed(prec) || prec == MP_PREC_FP32 ? 4 : 2;
    switch (opt) {
    case MP_OPT_ADAM:
    case MP_OPT_ADAMW: b->optimizer = 2 * s; break;      /* m and v */
    case MP_OPT_SGD_MOMENTUM: b->optimizer = s; break;    /* momentum buffer */
    case MP_OPT_ADAFACTOR: b->optimizer = 0; break;       /* factored: per matrix, below */
    default: b->optimizer = 0; break;
    }
}


void mp_tplan_model_states(uint64_t params, mp_precision prec, mp_optimizer opt, int zero, int dp,
                          mp_tplan_mem *m) {
    mp_state_bytes b;
    mp_tplan_state_bytes(prec, opt, &b);
    if (mp_tplan_mixed(prec) && zero == 0) {
        /* PyTorch AMP (torch.autocast + GradScaler) without sharding: the
         * fp32 parameters are the master copy and the gradients are fp32;
         * autocast's low-precision weight copies are kept tensors of the
         * step (counted with the activations). Same 16 B/param for Adam. */
        b.weights = 4;
        b.grads = 4;
        b.master = 0;
    }
    if (dp < 1) dp = 1;
    double d = (double)dp;
    m->weights_bytes = mp_tplan_dbytes(zero >= 3 ? b.weights / d : b.weights, params);
    m->grads_bytes = mp_tplan_dbytes(zero >= 2 ? b.grads / d : b.grads, params);
    m->master_weights_bytes = mp_tplan_dbytes(zero >= 1 ? b.master / d : b.master, params);
    m->optimizer_bytes = mp_tplan_dbytes(zero >= 1 ? b.optimizer / d : b.optimizer, params);
}

uint64_t mp_tplan_deepspeed_zero2(uint64_t params, int gpus) {
    if (gpus < 1) gpus = 1;
    return 4 * params + (uint64_t)(16 * (double)params / gpus);
}

uint64_t mp_tplan_deepspeed_zero3(uint64_t params, uint64_t largest_layer, int gpus) {
    if (gpus < 1) gpus = 1;
    return 4 * largest_layer + (uint64_t)(18 * (double)params / gpus);
}
