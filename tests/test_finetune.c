/* Fine-tuning plans (src/plan/finetune.c; docs/PLANNING.md section 12)
 * against their closed forms, on the Llama fixture (models/llama_small.onnx:
 * 4 layers of 512, 8 heads, MLP 1,376, vocabulary 32,000, untied head;
 * Hugging Face's parameter names). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jsonr.h"
#include "tcli.h"
#include "test.h"

#define LLAMA "models/llama_small.onnx", "--dim", "batch=1", "--dim", "seq=64", "--format", "json", "-q"
#define RUN(...) t_cli_run((const char *const[]){"plan", __VA_ARGS__, NULL}, 60, 0)

/* the fixture's sizes */
enum { H = 512, I = 1376, L = 4, V = 32000, T = 64 };
static const double layer_linear = 4.0 * H * H + 3.0 * H * I; /* q k v o, gate up down */

typedef struct fig {
    double params, trainable, weights, grads, optimizer, master, acts, fwd, bwd;
    double quant_params, quant_bytes, host, adapter_params, temp;
    int code;
} fig;

static double num(const jr *j, const char *path) {
    const jr *v = jr_path(j, path);
    T_CHECK(v && v->type == JR_NUM);
    return v && v->type == JR_NUM ? v->num : NAN;
}

static fig plan(const char *const *argv) {
    fig f;
    memset(&f, 0, sizeof f);
    t_cli r = t_cli_run(argv, 60, 0);
    f.code = r.code;
    if (r.code) fprintf(stderr, "    plan: %s", r.err);
    size_t err = 0;
    jr *j = r.code ? NULL : jr_parse(r.out, r.out_len, &err);
    if (j) {
        f.params = num(j, "plan.params");
        f.trainable = num(j, "plan.memory.trainable_params");
        f.weights = num(j, "plan.memory.weights_bytes");
        f.grads = num(j, "plan.memory.grads_bytes");
        f.optimizer = num(j, "plan.memory.optimizer_bytes");
        f.master = num(j, "plan.memory.master_weights_bytes");
        f.acts = num(j, "plan.memory.activations_bytes");
        f.temp = num(j, "plan.memory.temporary_bytes");
        f.fwd = num(j, "plan.flops.fwd_flops");
        f.bwd = num(j, "plan.flops.bwd_flops");
        f.quant_params = num(j, "plan.finetune.quantized_params");
        f.quant_bytes = num(j, "plan.finetune.quantized_bytes");
        f.host = num(j, "plan.finetune.host_bytes");
        const jr *a = jr_path(j, "plan.finetune.lora.adapter_params");
        f.adapter_params = a && a->type == JR_NUM ? a->num : 0;
    }
    jr_free(j);
    t_cli_free(&r);
    return f;
}

#define PLAN(...) plan((const char *const[]){"plan", LLAMA, __VA_ARGS__, NULL})

/* LoRA rank 16 on q and v: A (in x r) and B (r x out) per adapted product,
 * fp32 (PEFT), trainable; the base frozen: gradients and optimizer states
 * of the adapters only; the weights are the base's and the adapters'. */
static void t_lora_states(void) {
    fig base = PLAN("--precision", "fp32");
    fig f = PLAN("--precision", "fp32", "--lora-rank", "16", "--lora-targets", "q,v");
    double want = L * 16.0 * ((H + H) + (H + H)); /* q: 512 -> 512, v: 512 -> 512 (8 KV heads of 64) */
    T_EQ(f.code, 0);
    T_CHECK(f.trainable == want && f.adapter_params == want);
    T_CHECK(f.params == base.params + want);
    T_CHECK(f.grads == 4 * want);                       /* fp32 gradients of the adapters only */
    T_CHECK(f.optimizer == 8 * want);                   /* AdamW: two fp32 states */
    T_CHECK(f.master == 0);
    T_CHECK(fabs(f.weights - (base.weights + 4 * want)) <= 1);
    /* the step: no weight gradient of a frozen product; the backward is
     * about the forward (dX through each product) where full training's is
     * about twice */
    T_CHECK(base.bwd / base.fwd > 1.8 && f.bwd / f.fwd < 1.15 && f.bwd / f.fwd > 0.8);
    /* all-linear: every product but the LM head */
    f = PLAN("--precision", "fp32", "--lora-rank", "16", "--lora-targets", "all-linear");
    want = L * 16.0 * (4 * (H + H) + 2 * (H + I) + (I + H));
    T_CHECK(f.trainable == want);
    /* bf16 autocast: the adapters stay fp32 (4 B weights and gradients) */
    f = PLAN("--precision", "bf16-mixed", "--lora-rank", "16", "--lora-targets", "q,v");
    want = L * 16.0 * 4 * H;
    T_CHECK(f.grads == 4 * want && f.optimizer == 8 * want && f.master == 0);
    /* per optimizer: the trainable count times its state bytes; bitsandbytes'
     * 8-bit AdamW: each adapter tensor has 8,192 elements (>= 4,096): 2 B and
     * an fp32 absmax per 256 per state */
    f = PLAN("--precision", "fp32", "--lora-rank", "16", "--lora-targets", "q,v", "--optimizer", "lion");
    T_CHECK(f.optimizer == 4 * want);
    f = PLAN("--precision", "fp32", "--lora-rank", "16", "--lora-targets", "q,v", "--optimizer", "sgd-momentum");
    T_CHECK(f.optimizer == 4 * want);
    f = PLAN("--precision", "fp32", "--lora-rank", "16", "--lora-targets", "q,v", "--optimizer", "adamw8bit");
    T_CHECK(f.optimizer == 16 * (2.0 * 8192 + 8.0 * 8192 / 256));
    /* rank 4: A and B of 2,048 elements, under min_8bit_size: fp32 states */
    f = PLAN("--precision", "fp32", "--lora-rank", "4", "--lora-targets", "q,v", "--optimizer", "adamw8bit");
    T_CHECK(f.optimizer == 16 * 8.0 * 2048);
}

/* bitsandbytes' 8-bit AdamW on the whole model: 2 + 8/256 B per element of
 * the large tensors (between 2 and 2.04), 8 B for the 9 norms' 512. */
static void t_adamw8bit(void) {
    fig f = PLAN("--precision", "fp32", "--optimizer", "adamw8bit");
    double small = 9.0 * H, large = f.params - small;
    double per = (f.optimizer - 8 * small) / large;
    T_CHECK(per >= 2.0 && per <= 2.04);
    T_CHECK(fabs(per - (2 + 8.0 / 256)) < 1e-6);
    fig p = PLAN("--precision", "fp32", "--optimizer", "paged_adamw8bit");
    T_CHECK(p.optimizer == f.optimizer);
}

/* --freeze / --unfreeze in the order given: the last match decides. */
static void t_freeze(void) {
    double layer = layer_linear + 2.0 * H;
    fig f = PLAN("--precision", "fp32", "--freeze", "*", "--unfreeze", "model.layers.3.*");
    T_EQ(f.code, 0);
    T_CHECK(f.trainable == layer);
    T_CHECK(f.grads == 4 * layer && f.optimizer == 8 * layer);
    /* a module path matches its parameters */
    f = PLAN("--precision", "fp32", "--freeze", "*", "--unfreeze", "model.layers.3.mlp", "--unfreeze", "lm_head");
    T_CHECK(f.trainable == 3.0 * H * I + (double)V * H);
    /* the other order: everything frozen again */
    f = PLAN("--precision", "fp32", "--unfreeze", "model.layers.3.*", "--freeze", "*");
    T_CHECK(f.trainable == 0 && f.grads == 0 && f.optimizer == 0);
    /* the embedding frozen: its gradient and states gone, the rest trained */
    fig all = PLAN("--precision", "fp32");
    f = PLAN("--precision", "fp32", "--freeze", "model.embed_tokens.*");
    T_CHECK(f.trainable == all.params - (double)V * H);
    /* a glob that matches nothing is a usage error naming it */
    t_cli r = RUN(LLAMA, "--freeze", "encoder.*");
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "--freeze 'encoder.*'") && strstr(r.err, "matches no parameter"));
    t_cli_free(&r);
}

/* NF4 (QLoRA): 4 bits a weight in blocks of 64, double quantization: a
 * uint8 constant per block and an fp32 constant per 256 blocks (and an fp32
 * offset per tensor): 0.5 + 1/64 + 4/16384 B a weight; without it an fp32
 * constant per block: 0.5625 B. */
static void t_nf4(void) {
    double n = L * layer_linear;
    fig f = PLAN("--precision", "bf16-mixed", "--lora-rank", "16", "--base-dtype", "nf4");
    T_EQ(f.code, 0);
    T_CHECK(f.quant_params == n);
    double closed = n * (0.5 + 1.0 / 64 + 4.0 / (64 * 256));
    T_CHECK(fabs(f.quant_bytes - closed) / closed < 0.01);
    fig s = PLAN("--precision", "bf16-mixed", "--lora-rank", "16");
    /* weights: the quantized products replace their fp32 (AMP) bytes */
    T_CHECK(fabs((s.weights - f.weights) - (4 * n - f.quant_bytes)) <= 2);
    /* the dequantized weight is a transient: the largest, 1,376 x 512 in bf16 */
    T_CHECK(f.temp >= 2.0 * H * I);
    f = PLAN("--precision", "bf16-mixed", "--lora-rank", "16", "--base-dtype", "nf4", "--no-double-quant");
    T_CHECK(fabs(f.quant_bytes - n * 0.5625) / (n * 0.5625) < 0.001);
    f = PLAN("--precision", "bf16-mixed", "--lora-rank", "16", "--base-dtype", "int8");
    T_CHECK(fabs(f.quant_bytes - n) / n < 0.01);
    /* a quantized weight cannot be trained */
    t_cli r = RUN(LLAMA, "--base-dtype", "nf4");
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "--base-dtype nf4") && strstr(r.err, "trainable"));
    t_cli_free(&r);
}

/* LoRA dropout keeps a mask (a byte an element) and the dropped copy per
 * adapter instead of the shared input: 8 adapters x T x 512 x (1 + 4) B
 * more, 4 layers x T x 512 x 4 B (the norm's output q and v read) less. */
static void t_lora_dropout(void) {
    fig a = PLAN("--precision", "fp32", "--lora-rank", "16", "--no-loss");
    fig b = PLAN("--precision", "fp32", "--lora-rank", "16", "--lora-dropout", "0.1", "--no-loss");
    T_CHECK(b.acts - a.acts == 8.0 * T * H * 5 - 4.0 * T * H * 4);
}

/* PyTorch 1.13's MeanBackward1 keeps its input: one more full-width fp32
 * tensor per decomposed RMSNorm (9 here: x.pow(2).mean(-1)). */
static void t_torch_version(void) {
    fig a = PLAN("--precision", "fp32");
    fig b = PLAN("--precision", "fp32", "--torch-version", "1.13");
    T_CHECK(b.acts - a.acts == 9.0 * T * H * 4);
    /* the plan says whose rules, and that the export came from PyTorch 1.13 */
    t_cli r = RUN("models/llama_small.onnx", "--dim", "batch=1", "--dim", "seq=64", "-q");
    T_CHECK(r.code == 0 && strstr(r.out, "the export was made by PyTorch 1.13.0") &&
            strstr(r.out, "--torch-version 1.13"));
    t_cli_free(&r);
}

/* Offload: the optimizer's states and master weights leave the GPU; the
 * host keeps them and fp32 gradients. Parameters need ZeRO-3 or FSDP. */
static void t_offload(void) {
    fig z = PLAN("--precision", "bf16-mixed", "--zero", "2");
    fig f = PLAN("--precision", "bf16-mixed", "--zero", "2", "--offload", "optimizer");
    T_EQ(f.code, 0);
    T_CHECK(f.optimizer == 0 && f.master == 0 && z.optimizer > 0);
    T_CHECK(fabs(f.host - (z.optimizer + z.master + 4 * z.params)) <= 4);
    t_cli r = RUN(LLAMA, "--offload", "params", "--zero", "2");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--offload params") && strstr(r.err, "--zero 3"));
    t_cli_free(&r);
    f = PLAN("--precision", "bf16-mixed", "--fsdp", "--offload", "params");
    T_EQ(f.code, 0);
    T_CHECK(f.weights < z.weights / 2 && f.host > z.weights); /* the GPU holds the largest layer */
}

/* --fit answers for the plan's own layout: the largest micro-batch that
 * fits, and with checkpointing (which keeps less: more fit). */
static void t_fit_answer(void) {
    t_cli r = RUN("models/llama_small.onnx", "--dim", "batch=1", "--dim", "seq=2048", "--lora-rank", "16",
                  "--base-dtype", "nf4", "--precision", "bf16", "--gpu", "rtx4090", "--fit", "--gpus", "1",
                  "--format", "json", "-q");
    T_EQ(r.code, 0);
    size_t err = 0;
    jr *j = r.code ? NULL : jr_parse(r.out, r.out_len, &err);
    T_CHECK(j != NULL);
    if (j) {
        double mb = num(j, "plan.finetune.fit_answer.max_micro_batch");
        double mbc = num(j, "plan.finetune.fit_answer.max_micro_batch_checkpointing");
        double need = num(j, "plan.finetune.fit_answer.required_bytes");
        double needc = num(j, "plan.finetune.fit_answer.checkpointing_required_bytes");
        T_CHECK(mb >= 1 && mbc > mb && needc < need);
        T_CHECK(need == num(j, "plan.memory.required_bytes"));
    }
    jr_free(j);
    t_cli_free(&r);
    r = RUN("models/llama_small.onnx", "--dim", "batch=1", "--dim", "seq=2048", "--lora-rank", "16", "--gpu",
            "rtx4090", "--fit", "--gpus", "1", "-q");
    T_CHECK(r.code == 0 && strstr(r.out, "with --checkpointing:") && strstr(r.out, "per micro-batch fit"));
    t_cli_free(&r);
}

/* GPT-2's attention is one fused qkv product (Conv1D c_attn): q and v ask
 * for it, and the whole product (768 -> 2,304) is adapted once per block. */
static void t_fused_qkv(void) {
    const char *const argv[] = {"plan", "models/gpt2.onnx", "--dim", "batch=1", "--dim", "seq=64", "--lora-rank", "8",
                                "--lora-targets", "q,v", "--format", "json", "-q", NULL};
    t_cli r = t_cli_run(argv, 60, 0);
    T_EQ(r.code, 0);
    size_t err = 0;
    jr *j = r.code ? NULL : jr_parse(r.out, r.out_len, &err);
    T_CHECK(j != NULL);
    if (j) {
        T_CHECK(num(j, "plan.finetune.lora.fused_qkv_adapted") == 12);
        T_CHECK(num(j, "plan.memory.trainable_params") == 12 * 8.0 * (768 + 2304));
        const jr *ad = jr_path(j, "plan.finetune.lora.adapted");
        T_CHECK(ad && jr_len(ad) == 12);
    }
    jr_free(j);
    t_cli_free(&r);
}

MP_TESTS(finetune) {
    {"fused_qkv", t_fused_qkv},
    {"fit_answer", t_fit_answer},
    {"lora_states", t_lora_states},
    {"adamw8bit", t_adamw8bit},
    {"freeze", t_freeze},
    {"nf4", t_nf4},
    {"lora_dropout", t_lora_dropout},
    {"torch_version", t_torch_version},
    {"offload", t_offload},
};
MP_TESTS_END(finetune)
