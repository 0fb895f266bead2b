/* The planner's step around the graph (docs/PLANNING.md sections "the
 * loss", "the peak as a moment", "host-bound steps"): the loss forms
 * against a hand calculation in fp32, pure bf16 and autocast, softcapping
 * found, the peak's moment on a hand model, the host bound, the inference
 * plan reading its attention, and the plan text of issue 31 item 10. */
#include <math.h>
#include <string.h>

#include "jsonr.h"
#include "plan/plan.h"
#include "tbuild.h"
#include "tcli.h"
#include "test.h"

/* x[4,8] -> MatMul W[8,10] -> y[4,10]: a classifier's logits (4 rows, 10
 * classes), weights of type dt */
static mp_model *head(int dt) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", dt, 2, TB_DIMS(4, 8));
    tb_weight(m, "W", dt, 2, TB_DIMS(8, 10));
    tb_node(m, "MatMul", "x,W", "y");
    tb_output(m, "y");
    return m;
}

static mp_tplan *plan_with(mp_profile *p, const char *const *kv) {
    mp_tplan_options o;
    mp_tplan_options_default(&o);
    for (int i = 0; kv && kv[i]; i += 2) T_OK(mp_tplan_options_set(&o, kv[i], kv[i + 1]));
    mp_tplan *pl = NULL;
    T_OK(mp_tplan_create(p, &o, &pl));
    return pl;
}

/* The static profile of a model file at batch x seq (*m to free after
 * it); NULL, the failure checked, when it cannot be made. */
static mp_profile *profile_at(const char *path, int64_t batch, int64_t seq, mp_model **m) {
    mp_profile *p = NULL;
    *m = NULL;
    T_OK(mp_model_load(path, m));
    if (*m) {
        T_OK(mp_model_set_dim(*m, "batch", batch));
        T_OK(mp_model_set_dim(*m, "seq", seq));
        T_OK(mp_profile_static(*m, &p));
    }
    return p;
}

/* Hand figures, n = 40 logits, 4 rows (int64 targets: 32 B):
 *  kept = n x (loss type) + 32; forward transient = n x (logits type) +
 *  n x 4 when upcast; backward transient = 2 n x (loss type). */
static void t_loss_forms(void) {
    static const struct {
        int dt;
        const char *loss, *prec;
        const char *form;
        uint64_t kept, fwd, bwd;
        bool upcast;
    } cases[] = {
        /* fp32: no copy; causal-lm and cross-entropy alike */
        {MP_DT_FLOAT, "cross-entropy", NULL, "cross-entropy", 160 + 32, 160, 320, false},
        {MP_DT_FLOAT, "causal-lm", NULL, "causal-lm", 160 + 32, 160, 320, false},
        /* auto on a classifier (no LM head): cross-entropy */
        {MP_DT_FLOAT, "auto", NULL, "cross-entropy", 160 + 32, 160, 320, false},
        /* pure bf16: transformers upcasts (fp32 log-probabilities), plain
         * F.cross_entropy stays bf16 */
        {MP_DT_BFLOAT16, "causal-lm", NULL, "causal-lm", 160 + 32, 80 + 160, 320, true},
        {MP_DT_BFLOAT16, "cross-entropy", NULL, "cross-entropy", 80 + 32, 80, 160, false},
        /* autocast: the product runs in bf16, log_softmax in fp32 (a cast copy) */
        {MP_DT_FLOAT, "cross-entropy", "bf16-mixed", "cross-entropy", 160 + 32, 80 + 160, 320, true},
        {MP_DT_FLOAT, "causal-lm", "fp16-mixed", "causal-lm", 160 + 32, 80 + 160, 320, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mp_model *m = head(cases[i].dt);
        mp_profile *p = tb_prof(m);
        const char *kv[] = {"loss", cases[i].loss, cases[i].prec ? "precision" : NULL, cases[i].prec, NULL};
        mp_tplan *pl = plan_with(p, kv);
        if (pl) {
            T_EQ_STR(mp_tplan_loss_name(pl->loss.form), cases[i].form);
            T_EQ_U64(pl->loss.kept, cases[i].kept);
            T_EQ_U64(pl->loss.fwd_transient, cases[i].fwd);
            T_EQ_U64(pl->loss.bwd_transient, cases[i].bwd);
            T_EQ(pl->loss.upcast, cases[i].upcast);
            T_EQ_U64(pl->loss.rows, 4);
            T_EQ_U64(pl->loss_bytes, cases[i].kept);
        }
        mp_tplan_free(pl);
        /* --loss none and --no-loss: nothing kept */
        const char *none[] = {"loss", "none", NULL};
        pl = plan_with(p, none);
        if (pl) {
            T_EQ(pl->loss.form, MP_LOSS_NONE);
            T_EQ_U64(pl->loss_bytes, 0);
        }
        mp_tplan_free(pl);
        tb_done(m, p);
    }
    /* --no-loss with another form conflicts; an unknown form is named */
    mp_tplan_options o;
    mp_tplan_options_default(&o);
    T_OK(mp_tplan_options_set(&o, "no-loss", NULL));
    T_OK(mp_tplan_options_set(&o, "loss", "causal-lm"));
    T_CHECK(mp_tplan_options_check(&o) == MP_ERR_USAGE);
    T_CHECK(strstr(mp_last_error(), "--no-loss") != NULL);
    mp_tplan_options_default(&o);
    T_CHECK(mp_tplan_options_set(&o, "loss", "mse") == MP_ERR_USAGE);
    T_CHECK(strstr(mp_last_error(), "--loss 'mse'") != NULL);
}

/* matmul's reshape (at::matmul: a batched operand to [batch, n, m]) copies
 * a view it cannot flatten, and bmm keeps the copy: heads split off a
 * fused QKV output [2, 4, 24] as GPT-NeoX does (view [2, 4, 2, 12],
 * transpose to [2, 2, 4, 12], split into three [2, 2, 4, 4] strided by
 * (96, 12, 24, 1)), q scaled into a tensor of its own (the rotary's place),
 * then q.k^T, softmax and p.v. By hand, fp32, 256 B a head tensor (64
 * elements): x for W's gradient (256 B), the scaled q, k^T's copy and v's
 * copy (batch and heads do not merge: 96 != 2 x 12), the probabilities =
 * 5 x 256 = 1,280 B; the view rule alone kept the whole QKV output for
 * both (768 B): 1,536 B. */
static void t_matmul_copies(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 3, TB_DIMS(2, 4, 8));
    tb_weight(m, "W", MP_DT_FLOAT, 2, TB_DIMS(8, 24));
    const int64_t shp[4] = {2, 4, 2, 12}, split[3] = {4, 4, 4};
    tb_const_i(m, "shp", MP_DT_INT64, 1, TB_DIMS(4), shp);
    tb_const_i(m, "sp", MP_DT_INT64, 1, TB_DIMS(3), split);
    const double half = 0.5;
    tb_const_f(m, "c", MP_DT_FLOAT, 0, NULL, &half);
    tb_node(m, "MatMul", "x,W", "qkv");
    tb_node(m, "Reshape", "qkv,shp", "r");
    int t = tb_node(m, "Transpose", "r", "h");
    tb_attr_ints(m, t, "perm", 4, (const int64_t[]){0, 2, 1, 3});
    int s = tb_node(m, "Split", "h,sp", "q,k,v");
    tb_attr_i(m, s, "axis", 3);
    tb_node(m, "Mul", "q,c", "q2");
    t = tb_node(m, "Transpose", "k", "kt");
    tb_attr_ints(m, t, "perm", 4, (const int64_t[]){0, 1, 3, 2});
    tb_node(m, "MatMul", "q2,kt", "sc");
    int sm = tb_node(m, "Softmax", "sc", "pr");
    tb_attr_i(m, sm, "axis", -1);
    tb_node(m, "MatMul", "pr,v", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    const char *kv[] = {"loss", "none", "attention", "eager", NULL};
    mp_tplan *pl = plan_with(p, kv);
    if (pl) T_EQ_U64(pl->mem.activations_bytes, 5 * 256);
    mp_tplan_free(pl);
    tb_done(m, p);
}

/* Gemma-2's final_logit_softcapping written out: tanh(y / 30) * 30 */
static void t_loss_softcap(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_BFLOAT16, 2, TB_DIMS(4, 8));
    tb_weight(m, "W", MP_DT_BFLOAT16, 2, TB_DIMS(8, 10));
    const double c = 30;
    tb_const_f(m, "c", MP_DT_BFLOAT16, 0, NULL, &c);
    tb_node(m, "MatMul", "x,W", "a");
    tb_node(m, "Div", "a,c", "d");
    tb_node(m, "Tanh", "d", "t");
    tb_node(m, "Mul", "t,c", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    const char *kv[] = {"loss", "causal-lm", NULL};
    mp_tplan *pl = plan_with(p, kv);
    if (pl) {
        T_CHECK(pl->loss.softcap_in >= 0);
        T_CHECK(pl->loss.upcast);
        /* the tanh keeps its bf16 output (80 B) beside the loss's fp32 192 */
        T_EQ_U64(pl->mem.activations_bytes, 80 + 192 + 64); /* + x for W's gradient (64) */
    }
    mp_tplan_free(pl);
    tb_done(m, p);
}

/* The same softcapping as the TorchScript exporter writes it: the
 * scalars are Constant nodes, not initializers */
static void t_loss_softcap_constant(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_BFLOAT16, 2, TB_DIMS(4, 8));
    tb_weight(m, "W", MP_DT_BFLOAT16, 2, TB_DIMS(8, 10));
    tb_node(m, "MatMul", "x,W", "a");
    int k1 = tb_node(m, "Constant", "", "c1");
    tb_attr_f(m, k1, "value_float", 30);
    tb_node(m, "Div", "a,c1", "d");
    tb_node(m, "Tanh", "d", "t");
    int k2 = tb_node(m, "Constant", "", "c2");
    tb_attr_f(m, k2, "value_float", 30);
    tb_node(m, "Mul", "t,c2", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    mp_tplan *pl = plan_with(p, NULL);
    if (pl) {
        T_CHECK(pl->loss.softcap_in >= 0);
        T_EQ(pl->loss.form, MP_LOSS_CROSS_ENTROPY); /* no LM head recognised: auto's classifier */
    }
    mp_tplan_free(pl);
    tb_done(m, p);
}

/* x[64,8] -> MatMul W1[8,8] -> Relu -> MatMul W2[8,8] -> y, no loss, SGD
 * (no states): the peak is a moment of the backward. Kept: x (2,048 B)
 * and r (2,048 B, Relu's output, which the second product reads too).
 * Backward, in reverse: the second product (live 4,096 kept, no gradient
 * yet, its transient r + y = 4,096) then Relu (4,096 kept, W2's gradient
 * 256 B born, its transient h + r = 4,096): Relu's moment is the peak. */
static void t_peak_moment(void) {
    mp_model *m = tb_mlp2(64, 8, 8, 8);
    int relu = 1; /* the second node */
    mp_profile *p = tb_prof(m);
    const char *kv[] = {"loss", "none", "optimizer", "sgd", NULL};
    mp_tplan *pl = plan_with(p, kv);
    if (pl) {
        const mp_tplan_moment *a = &pl->stages[0].at;
        T_EQ(a->when, MP_MOMENT_BACKWARD);
        T_CHECK(a->node >= 0 && m->graph->order[a->node] == relu);
        T_EQ_U64(a->weights, 512);
        T_EQ_U64(a->grads, 256);
        T_EQ_U64(a->activations, 4096);
        T_EQ_U64(a->transient, 4096);
        T_EQ_U64(a->optimizer, 0);
        T_EQ_U64(a->workspace, 0); /* no GPU named */
        /* W1, W2 (256 B each): weights and gradients rounded to 512 */
        T_EQ_U64(a->rounding, 4 * 256);
        T_EQ_U64(pl->mem.peak_bytes, 512 + 256 + 4096 + 4096 + 1024);
    }
    mp_tplan_free(pl);
    /* the same with a GPU: two cuBLAS workspaces of 32 MiB (sm90) */
    const char *kv2[] = {"loss", "none", "optimizer", "sgd", "gpu", "h100-sxm", NULL};
    pl = plan_with(p, kv2);
    if (pl) T_EQ_U64(pl->stages[0].at.workspace, 2ull * 32 * 1024 * 1024);
    mp_tplan_free(pl);
    tb_done(m, p);
}

/* Where the loop frees the gradients (--zero-grad), by hand on
 * x[2,64] -> MatMul W1[64,64] -> Relu -> MatMul W2[64,64], fp32, SGD, no
 * loss: weights 2 x 16,384 B, gradients as much, kept x and Relu's output
 * (512 B each). After the forward (the default: the classic loop,
 * Lightning's closure) the last step's gradients are live at the end of
 * the forward: 32,768 + 32,768 + 1,024; before it (Hugging Face's Trainer)
 * the optimizer step is the moment, every gradient born: 65,536; in place
 * (set_to_none=False) they are resident at every moment. */
static void t_zero_grad(void) {
    mp_model *m = tb_mlp2(2, 64, 64, 64);
    mp_profile *p = tb_prof(m);
    static const struct {
        const char *where;
        int when;
        uint64_t grads, acts, total, if_freed_first;
    } cases[] = {
        /* after the forward, the plan also says what freeing them first gives:
         * the before-forward peak */
        {NULL, MP_MOMENT_FORWARD, 32768, 1024, 32768 + 32768 + 1024, 32768 + 32768},
        {"after-forward", MP_MOMENT_FORWARD, 32768, 1024, 32768 + 32768 + 1024, 32768 + 32768},
        {"before-forward", MP_MOMENT_OPTIMIZER, 32768, 0, 32768 + 32768, 0},
        /* W2's backward: every gradient, x and r kept, its transient (the
         * gradients of y and r, 512 B each) */
        {"in-place", MP_MOMENT_BACKWARD, 32768, 1024, 32768 + 32768 + 1024 + 1024, 0},
    };
    for (size_t i = 0; p && i < sizeof cases / sizeof cases[0]; i++) {
        const char *kv[] = {"loss", "none", "optimizer", "sgd", cases[i].where ? "zero-grad" : NULL, cases[i].where,
                            NULL};
        mp_tplan *pl = plan_with(p, kv);
        if (!pl) continue;
        const mp_tplan_moment *a = &pl->stages[0].at;
        T_EQ(a->when, cases[i].when);
        T_EQ_U64(a->weights, 32768);
        T_EQ_U64(a->grads, cases[i].grads);
        T_EQ_U64(a->activations, cases[i].acts);
        T_EQ_U64(a->rounding, 0); /* 16,384 B tensors: multiples of 512 */
        T_EQ_U64(pl->mem.peak_bytes, cases[i].total);
        T_EQ_U64(a->if_freed_first, cases[i].if_freed_first);
        mp_tplan_free(pl);
    }
    tb_done(m, p);
    mp_tplan_options o;
    mp_tplan_options_default(&o);
    T_EQ(o.zero_grad, MP_ZEROGRAD_AFTER_FORWARD);
    T_CHECK(mp_tplan_options_set(&o, "--zero-grad", "sometimes") == MP_ERR_USAGE);
    T_CHECK(strstr(mp_last_error(), "after-forward, before-forward or in-place") != NULL);
    o.zero_grad = 7;
    T_CHECK(mp_tplan_options_check(&o) == MP_ERR_USAGE);
}

#define RUN(...) t_cli_run((const char *const[]){"plan", __VA_ARGS__, NULL}, 60, 0)

static jr *json_of(t_cli *r) {
    size_t err;
    if (r->code != 0) return NULL;
    t_json_dump("plan", r->out, r->out_len);
    return jr_parse(r->out, r->out_len, &err);
}

/* A tiny step is bound by the host issuing its operators; with no host
 * cost it is the device's. */
static void t_host_bound(void) {
    for (int k = 0; k < 2; k++) {
        t_cli r = RUN("models/gpt2.onnx", "--dim", "batch=1", "--dim", "seq=8", "--gpu", "h100-sxm", "--format", "json",
                      "-q", "--host-us-per-op", k ? "0" : "10");
        T_EQ(r.code, 0);
        jr *j = json_of(&r);
        const jr *b = j ? jr_path(j, "plan.host.bound") : NULL, *h = j ? jr_path(j, "plan.host.host_s") : NULL;
        const jr *d = j ? jr_path(j, "plan.host.device_s") : NULL, *st = j ? jr_path(j, "plan.step_time_s") : NULL;
        const jr *ops = j ? jr_path(j, "plan.host.ops_per_step") : NULL, *kn = j ? jr_path(j, "plan.host.kernels_per_step") : NULL;
        T_CHECK(b && h && d && st && ops && kn);
        if (b && h && d && st && ops && kn) {
            T_EQ_STR(b->s, k ? "device" : "host");
            T_CHECK(ops->i > kn->i); /* views are dispatched without a kernel */
            if (!k) T_CHECK(st->num >= h->num);
        }
        jr_free(j);
        t_cli_free(&r);
    }
    /* without the flag: the measured defaults, 15 us an operator in a
     * training step and 11 us in inference (MP_HOST_US_TRAIN, _INFER);
     * the host time is the operators times that, the plan's assumption
     * says it */
    for (int k = 0; k < 2; k++) {
        t_cli r = k ? RUN("models/gpt2.onnx", "--dim", "batch=1", "--dim", "seq=8", "--gpu", "h100-sxm", "--format",
                          "json", "-q", "--inference")
                    : RUN("models/gpt2.onnx", "--dim", "batch=1", "--dim", "seq=8", "--gpu", "h100-sxm", "--format",
                          "json", "-q");
        T_EQ(r.code, 0);
        jr *j = json_of(&r);
        const jr *h = j ? jr_path(j, "plan.host.host_s") : NULL, *ops = j ? jr_path(j, "plan.host.ops_per_step") : NULL;
        const jr *a = j ? jr_path(j, "plan.assumptions.host_op_s") : NULL;
        T_CHECK(h && ops && a);
        if (h && ops && a) {
            double us = k ? MP_HOST_US_INFER : MP_HOST_US_TRAIN;
            T_CHECK(fabs(a->num - us * 1e-6) < 1e-12);
            T_CHECK(fabs(h->num - (double)ops->i * us * 1e-6) < 1e-9);
        }
        jr_free(j);
        t_cli_free(&r);
    }
    /* the text names the bound */
    t_cli r = RUN("models/gpt2.onnx", "--dim", "batch=1", "--dim", "seq=8", "--gpu", "h100-sxm");
    T_CHECK(r.code == 0 && strstr(r.out, "bound:") && strstr(r.out, "host: the GPU waits"));
    T_CHECK(strstr(r.out, "loss:                   causal-lm") != NULL);
    T_CHECK(strstr(r.out, "peak's moment:") != NULL);
    t_cli_free(&r);
}

/* A Linear's bias added after its MatMul (the TorchScript exporter's form
 * of F.linear on a rank-3 input) writes no tensor of its own: PyTorch adds
 * it in place (addmm, or matmul then add_). x[2,8,16] -> MatMul W[16,64]
 * -> Add b[64] -> MatMul W2[64,16] -> y (output), fp32, inference: the
 * first product's 2*8*64*4 = 4,096 B is the sum too, so the peak is at the
 * second product, 4,096 + its 1,024 B output = 5,120 (8,192 at the Add when
 * the sum was a tensor of its own). An Add of two activations keeps its
 * own output: the same graph with b an input peaks at 8,192. */
static void t_bias_in_place(void) {
    for (int k = 0; k < 2; k++) {
        mp_model *m = tb_new(17);
        tb_input(m, "x", MP_DT_FLOAT, 3, TB_DIMS(2, 8, 16));
        tb_weight(m, "W", MP_DT_FLOAT, 2, TB_DIMS(16, 64));
        if (k) tb_input(m, "b", MP_DT_FLOAT, 1, TB_DIMS(64));
        else tb_weight(m, "b", MP_DT_FLOAT, 1, TB_DIMS(64));
        tb_weight(m, "W2", MP_DT_FLOAT, 2, TB_DIMS(64, 16));
        tb_node(m, "MatMul", "x,W", "h");
        tb_node(m, "Add", "h,b", "a");
        tb_node(m, "MatMul", "a,W2", "y");
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        const char *kv[] = {"inference", "1", "precision", "fp32", NULL};
        mp_tplan *pl = p ? plan_with(p, kv) : NULL;
        if (pl) T_EQ_U64(pl->infer_acts, k ? 8192 : 5120);
        mp_tplan_free(pl);
        tb_done(m, p);
    }
}

/* The launch queue (layout.c): a kernel starts once the host issued it
 * and the device finished the one before. x[1,1024] -> Reshape (a view:
 * host only) -> Relu (one kernel) -> MatMul W[1024,1024] (t, mm: two
 * operators, one kernel), inference, on a GPU of 1 TFLOP/s and 1 TB/s at
 * full efficiency, no per-node device overhead, 10 us an operator: the
 * host issues for 40 us; the MatMul's kernel (W, 4 MiB, 4.2 us) can start
 * only after its issue, so the forward ends at 40 us + the MatMul's time,
 * past both totals (host 40 us, device the Relu's 8 KiB and the
 * MatMul's). */
static void t_launch_queue(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 2, TB_DIMS(1, 1024));
    tb_weight(m, "W", MP_DT_FLOAT, 2, TB_DIMS(1024, 1024));
    tb_const_i(m, "shape", MP_DT_INT64, 1, TB_DIMS(2), TB_DIMS(1, 1024));
    tb_node(m, "Reshape", "x,shape", "r");
    tb_node(m, "Relu", "r", "h");
    tb_node(m, "MatMul", "h,W", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    const char *kv[] = {"inference", "1", "peak-tflops", "1", "bandwidth-gbs", "1000", "mem-gb", "80",
                        "compute-eff", "1", "memory-eff", "1", "node-overhead-us", "0", "host-us-per-op", "10", NULL};
    mp_tplan *pl = p ? plan_with(p, kv) : NULL;
    if (pl) {
        double mm_s = (1024.0 * 1024 * 4 + 2 * 1024 * 4) / 1e12; /* W, x and y once: memory-bound */
        double relu_s = 2 * 1024 * 4 / 1e12;
        T_EQ_U64(pl->stages[0].host_ops, 4);
        T_CHECK(fabs(pl->host_s - 40e-6) < 1e-12);
        T_CHECK(fabs(pl->device_s - (mm_s + relu_s)) < 1e-12);
        T_CHECK(fabs(pl->step_s - (40e-6 + mm_s)) < 1e-12);
    }
    mp_tplan_free(pl);
    tb_done(m, p);
}

/* --tf32: x[1,64,56,56] -> Conv W[64,64,3,3] (pad 1), fp32 on an H200:
 * 2 x 64 x 56 x 56 x 64 x 9 = 231,211,008 FLOPs against 60% of the dense
 * TF32 rate (494.7 T) by default (cuDNN's allow_tf32), of fp32's (66.9 T)
 * with --tf32 none; a MatMul stays fp32 unless --tf32 all. */
static void t_tf32(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 4, TB_DIMS(1, 64, 56, 56));
    tb_weight(m, "W", MP_DT_FLOAT, 4, TB_DIMS(64, 64, 3, 3));
    tb_weight(m, "M", MP_DT_FLOAT, 2, TB_DIMS(56, 56));
    int c = tb_node(m, "Conv", "x,W", "y");
    tb_attr_ints(m, c, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_node(m, "MatMul", "y,M", "z");
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    static const char *const how[] = {NULL, "none", "all"};
    for (int i = 0; p && i < 3; i++) {
        const char *kv[] = {"loss", "none", "optimizer", "sgd", "gpu", "h200", "precision", "fp32",
                            how[i] ? "tf32" : NULL, how[i], NULL};
        mp_tplan *pl = plan_with(p, kv);
        if (!pl) continue;
        double conv = 231211008.0 / ((i == 1 ? 66.9e12 : 494.7e12) * 0.6);
        double mm_flops = 2.0 * 64 * 56 * 56 * 56;
        double mm = mm_flops / ((i == 2 ? 494.7e12 : 66.9e12) * 0.6);
        double mm_mem = (64.0 * 56 * 56 * 4 * 2 + 56 * 56 * 4) / (4.8e12 * 0.8);
        T_CHECK(fabs(pl->nodes[0].roof_fwd - conv) < 1e-12);
        T_CHECK(fabs(pl->nodes[1].roof_fwd - (mm > mm_mem ? mm : mm_mem)) < 1e-12);
        mp_tplan_free(pl);
    }
    tb_done(m, p);
    mp_tplan_options o;
    mp_tplan_options_default(&o);
    T_EQ(o.tf32, MP_TF32_CONV);
    T_CHECK(mp_tplan_options_set(&o, "tf32", "half") == MP_ERR_USAGE);
}

/* PyTorch's own depthwise kernels (graph.c's native_depthwise), counted
 * by hand on x[2,32,16,16] -> A: Conv W1[32,1,3,3] group 32, stride 2,
 * pad 1 -> a[2,32,8,8] -> B: Conv W2[64,1,5,5] group 32 (a depth
 * multiplier of 2), pad 2 -> b[2,64,8,8] -> C: Conv W3[64,64,1,1] (not
 * depthwise: cuDNN), lane instructions:
 *   A forward  4,096 outputs x (40 + 9 taps x 5, unrolled 3 x 3) = 348,160
 *   A backward x needs no gradient; the weight's 4,096 x 9 x 24  = 884,736
 *   B forward  8,192 x (40 + 25 x 8)                             = 1,966,080
 *   B backward its input's 4,096 x (40 + 2 x 25 x 8) = 1,802,240, the
 *              weight's 8,192 x 25 x 24 = 4,915,200                = 6,717,440
 * in fp32; bf16 adds two conversions per tap (A forward 4,096 x (40 + 9 x
 * 7) = 421,888) and takes no cuDNN layout transposes (A: its two casts
 * only; C: its weight's cast and the two transposes); fp16 is cuDNN's. On
 * an H200 (66.9 T fp32: 33.45 G instructions a millisecond) at 60%, B's
 * forward is 1,966,080 / (33.45e12 x 0.6) s, above its bytes' time. */
static void t_native_depthwise(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 4, TB_DIMS(2, 32, 16, 16));
    tb_weight(m, "W1", MP_DT_FLOAT, 4, TB_DIMS(32, 1, 3, 3));
    tb_weight(m, "W2", MP_DT_FLOAT, 4, TB_DIMS(64, 1, 5, 5));
    tb_weight(m, "W3", MP_DT_FLOAT, 4, TB_DIMS(64, 64, 1, 1));
    int a = tb_node(m, "Conv", "x,W1", "a");
    tb_attr_i(m, a, "group", 32);
    tb_attr_ints(m, a, "strides", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, a, "pads", 4, TB_DIMS(1, 1, 1, 1));
    int b = tb_node(m, "Conv", "a,W2", "b");
    tb_attr_i(m, b, "group", 32);
    tb_attr_ints(m, b, "pads", 4, TB_DIMS(2, 2, 2, 2));
    tb_node(m, "Conv", "b,W3", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    static const char *const prec[] = {"fp32", "bf16-mixed", "fp16-mixed"};
    for (int i = 0; p && i < 3; i++) {
        const char *kv[] = {"loss", "none", "optimizer", "sgd", "gpu", "h200", "precision", prec[i], NULL};
        mp_tplan *pl = plan_with(p, kv);
        if (!pl) continue;
        if (i == 0) {
            T_EQ_U64(pl->nodes[0].simt_fwd, 348160);
            T_EQ_U64(pl->nodes[0].simt_bwd, 884736);
            T_EQ_U64(pl->nodes[1].simt_fwd, 1966080);
            T_EQ_U64(pl->nodes[1].simt_bwd, 6717440);
            T_CHECK(fabs(pl->nodes[1].roof_fwd - 1966080.0 / (66.9e12 / 2 * 0.6)) < 1e-15);
            T_EQ(pl->native_dw, 2);
        } else if (i == 1) {
            T_EQ_U64(pl->nodes[0].simt_fwd, 4096 * (40 + 9 * 7));
            T_EQ_U64(pl->nodes[0].simt_bwd, 4096 * 9 * 26);
            T_EQ(pl->nodes[0].n_aux_fwd, 2);
            T_EQ(pl->nodes[2].n_aux_fwd, 3);
        } else {
            T_EQ_U64(pl->nodes[0].simt_fwd + pl->nodes[1].simt_bwd, 0);
            T_EQ(pl->native_dw, 0);
            T_EQ(pl->nodes[0].n_aux_fwd, 4);
        }
        T_EQ_U64(pl->nodes[2].simt_fwd + pl->nodes[2].simt_bwd, 0);
        mp_tplan_free(pl);
    }
    tb_done(m, p);
}

/* Causal masks the TorchScript exporter folded into an initializer
 * (nn.MultiheadAttention given attn_mask: torch.triu of -inf, and a
 * sliding window of 3 keys), 8 x 8, read from the file's bytes: the
 * attention is causal, so an inference plan has a KV cache; the window is
 * named. 2 heads of 4, fp32: 2 x 2 x 4 x 4 = 64 B a token; the 8 tokens'
 * 512 B, the window's 3 tokens' 192 B. */
static void t_folded_causal_masks(void) {
    static const char *const files[] = {"tests/corpus/seeds/mha_triu_mask.onnx", "tests/corpus/seeds/mha_band_mask.onnx"};
    for (int i = 0; i < 2; i++) {
        t_cli r = RUN(files[i], "--gpu", "h100", "--inference", "--kv-cache");
        T_EQ(r.code, 0);
        T_CHECK(strstr(r.out, "causal additive mask") != NULL);
        T_CHECK((strstr(r.out, "a sliding window of 3 keys") != NULL) == (i == 1));
        T_CHECK(strstr(r.out, "per token:            64 B") != NULL);
        T_CHECK(strstr(r.out, i ? "at this context:      192 B" : "at this context:      512 B") != NULL);
        t_cli_free(&r);
    }
}

/* Softcapped attention (Gemma-2) under the default --attention fused: SDPA
 * takes no softcapping, so it is planned eager, as written, and counted
 * apart. */
static void t_softcap_eager(void) {
    mp_model *m = tb_new(17);
    tb_softcap_attention(m);
    mp_profile *p = tb_prof(m);
    const char *kv[] = {"loss", "none", "optimizer", "none", NULL};
    mp_tplan *pl = p ? plan_with(p, kv) : NULL;
    if (pl) {
        T_EQ(pl->attn_softcap, 1);
        T_EQ(pl->attn_fused + pl->attn_math, 0);
    }
    mp_tplan_free(pl);
    tb_done(m, p);
}

/* A Gemma-2 block as transformers writes it, in plain torch (seed
 * gemma2_tiny.onnx: 16 features, 2 heads of 8 sharing one KV head, 2
 * layers, 2 x 8 tokens, 5,264 parameters): RMSNorm with (1 + w) before and
 * after the attention and the MLP (the sandwich: the post-norms read the
 * products before the residual), GeGLU on tanh-GELU (x^3 as x * (x * x),
 * TorchScript's form), attention logits softcapped at 50, the first
 * layer's mask a sliding window of 4 keys made by Trilu and Where of
 * constants, the final logits softcapped at 30 (the loss's). Every part
 * recognised; the cache 2 x 2 x 8 x 4 = 128 B a token, at the context 16
 * tokens x 64 B + 2 x 4 window tokens x 64 B = 1,536 B; 5,264 parameters
 * counted. */
static void t_gemma2_block(void) {
    t_cli r = RUN("tests/corpus/seeds/gemma2_tiny.onnx", "--inference", "--kv-cache");
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "causal additive mask, a sliding window of 4 keys, logits softcapped at 50, rotary); 4 x "
                          "rmsnorm (decomposed); MLP geglu (decomposed); weights q k v o up gate down") != NULL);
    T_CHECK(strstr(r.out, "not recognised:         none") != NULL);
    T_CHECK(strstr(r.out, "per token:            128 B") != NULL);
    T_CHECK(strstr(r.out, "at this context:      1.54 KB") != NULL);
    t_cli_free(&r);
    r = RUN("tests/corpus/seeds/gemma2_tiny.onnx", "--inference", "--kv-cache", "--format", "json", "-q");
    jr *j = json_of(&r);
    const jr *kb = j ? jr_path(j, "plan.inference.kv_cache_bytes") : NULL;
    T_CHECK(kb && kb->i == 1536);
    jr_free(j);
    t_cli_free(&r);
    /* PyTorch's count: the head tied to the embedding, each (1 + w) folded
     * to a constant counted as its w */
    r = t_cli_run((const char *const[]){"tests/corpus/seeds/gemma2_tiny.onnx", "--format", "json", "-q", NULL}, 60, 0);
    size_t err;
    T_EQ(r.code, 0);
    t_json_dump("profile", r.out, r.out_len);
    j = r.code ? NULL : jr_parse(r.out, r.out_len, &err);
    const jr *pc = j ? jr_path(j, "total.params") : NULL;
    T_CHECK(pc && pc->i == 5264);
    jr_free(j);
    t_cli_free(&r);
}

/* The dynamo exporter's optimizer merges equal initializers: a fresh GPT-2's
 * 25 LayerNorms' weights (ones) and biases (zeros) become two tensors that
 * 50 nodes read, each node's fx node still naming its own declared
 * parameter (the profile's 48 stand-ins). In PyTorch those are parameters
 * of their own, none of whose gradients is summed with another's: the
 * plan's gradient accumulations are the model's own, 4 a block (the
 * residual stream read by a norm and a sum twice, gelu_new's input read
 * three times), 48 where 96 were counted. Its optimizer steps PyTorch's
 * 148 tensors: the 52 the graph holds and the 96 declared parameters it
 * does not (the profile's role_params: the 48 merged behind the stand-ins
 * and the 48 zero biases the exporter removed from the Gemms; 100 when
 * only the stand-ins were stepped), and the model states are PyTorch's
 * 124,439,808 parameters' (4 B each in fp32: 124,320,000 before, the
 * graph's). */
static void t_merged_parameters(void) {
    mp_model *m;
    mp_profile *p = profile_at("models/dynamo/gpt2_dynamo.onnx", 1, 8, &m);
    T_CHECK(p && p->param_stand_in != NULL);
    const char *kv[] = {"loss", "none", "optimizer", "adamw", NULL};
    mp_tplan *pl = p ? plan_with(p, kv) : NULL;
    if (pl) {
        T_EQ_U64(pl->opt_tensors, 52 + 96);
        T_EQ_U64(pl->mem.weights_bytes, 124439808ull * 4);
        T_EQ_U64(pl->mem.grads_bytes, 124439808ull * 4);
        T_EQ_U64(pl->mem.optimizer_bytes, 124439808ull * 8);
        uint64_t acc = 0;
        for (int k = 0; k < pl->n_nodes; k++) acc += pl->nodes[k].n_acc;
        T_EQ_U64(acc, 48);
    }
    mp_tplan_free(pl);
    /* frozen but the last block, by name: PyTorch's 7,087,872 trainable
     * (its merged norms' and removed biases' 6,912 + 3,072 among them) */
    const char *kf[] = {"loss", "none", "optimizer", "adamw", "freeze", "*", "unfreeze", "transformer.h.11.*", NULL};
    pl = p ? plan_with(p, kf) : NULL;
    if (pl) T_EQ_U64(pl->trainable_params, 7087872);
    mp_tplan_free(pl);
    mp_profile_free(p);
    mp_model_free(m);
}

/* The dynamo exporter folds each train-mode BatchNorm into the convolution
 * before it (FuseBatchNormIntoConv); the model trains with the norm. So
 * torchvision's ResNet-50 exported that way (batch 2) plans as its
 * TorchScript export with the 53 norms kept, at the same batch: the same
 * kept activations (172,039,504 B, the figure plan-check's ResNet-50 rows
 * hold against PyTorch; 82,915,152 before, every norm's input missing), the
 * same operators (633) and kernels (620). The TorchScript export merged
 * each fresh norm's running statistics with its equal parameters (zeros,
 * ones) behind Identity copies: buffers, which need no gradient, so a
 * norm's backward has 3 kernels (its input's, scale's and shift's
 * gradients), not 5 (726 kernels before). */
static void t_folded_batchnorm(void) {
    t_cli r[2] = {RUN("models/dynamo/resnet50_train_torch211.onnx", "--gpu", "h100", "--format", "json", "-q"),
                  RUN("models/resnet50.onnx", "--input", "input=2x3x224x224", "--gpu", "h100", "--format", "json",
                      "-q")};
    for (int f = 0; f < 2; f++) {
        T_EQ(r[f].code, 0);
        jr *j = json_of(&r[f]);
        const jr *acts = j ? jr_path(j, "plan.memory.activations_bytes") : NULL;
        const jr *ops = j ? jr_path(j, "plan.host.ops_per_step") : NULL;
        const jr *kern = j ? jr_path(j, "plan.host.kernels_per_step") : NULL;
        T_CHECK(acts && acts->i == 172039504);
        T_CHECK(ops && ops->i == 633);
        T_CHECK(kern && kern->i == 620);
        jr_free(j);
        t_cli_free(&r[f]);
    }
    /* inference: the live activations alike too (20,873,216 B). The dynamo
     * export names the three calls of a Bottleneck's one `relu` alike (the
     * TorchScript export relu, relu_1, relu_2): a value the first call reads
     * is held to that call's end, not to the third's (24,084,480 before) */
    t_cli q[2] = {RUN("models/dynamo/resnet50_train_torch211.onnx", "--inference", "--format", "json", "-q"),
                  RUN("models/resnet50.onnx", "--input", "input=2x3x224x224", "--inference", "--format", "json", "-q")};
    for (int f = 0; f < 2; f++) {
        T_EQ(q[f].code, 0);
        jr *j = json_of(&q[f]);
        const jr *acts = j ? jr_path(j, "plan.memory.activations_bytes") : NULL;
        T_CHECK(acts && acts->i == 20873216);
        jr_free(j);
        t_cli_free(&q[f]);
    }
}

/* GPT-2's two exports launch the same norm and product backward kernels,
 * and BERT's dispatch the same transposes. GPT-2's:
 * TorchScript (opset 14) decomposes each of the 25 LayerNorms (planned as
 * F.layer_norm, its first ReduceMean the head); dynamo writes the operator
 * and removes the 48 zero biases of the Conv1D products (role parameters).
 * A norm's backward is one operator with a kernel per gradient (its
 * input's, scale's, shift's): 75 kernels either way (25 before for the
 * decomposed form); the 48 Gemms' bias gradients are PyTorch's either way:
 * their backward kernels are equal (48 fewer in dynamo's plan before). */
static void t_twin_kernels(void) {
    const char *files[2] = {"models/gpt2.onnx", "models/dynamo/gpt2_dynamo.onnx"};
    uint64_t norm_k[2] = {0, 0}, norm_ops[2] = {0, 0}, gemm_k[2] = {0, 0};
    for (int f = 0; f < 2; f++) {
        mp_model *m;
        mp_profile *p = profile_at(files[f], 2, 128, &m);
        const char *kv[] = {"precision", "bf16-mixed", "gpu", "h100", NULL};
        mp_tplan *pl = p ? plan_with(p, kv) : NULL;
        for (int k = 0; pl && k < pl->n_nodes; k++) {
            const mp_node *n = &m->graph->nodes[m->graph->order[k]];
            const mp_pnode *pn = &pl->nodes[k];
            if (mp_streq(n->op, f ? "LayerNormalization" : "ReduceMean")) {
                norm_k[f] += pn->n_bwd_kernels;
                norm_ops[f] += pn->n_bwd_ops;
            }
            if (mp_streq(n->op, "Gemm")) gemm_k[f] += pn->n_bwd_kernels;
        }
        mp_tplan_free(pl);
        mp_profile_free(p);
        mp_model_free(m);
    }
    T_EQ_U64(norm_k[0], 75);
    T_EQ_U64(norm_k[1], 75);
    T_EQ_U64(norm_ops[0], 25);
    T_EQ_U64(norm_ops[1], 25);
    T_CHECK(gemm_k[0] > 0);
    T_EQ_U64(gemm_k[1], gemm_k[0]);
    /* BERT's: the TorchScript fixture writes each Linear's W.t() as a
     * Transpose of the weight (constants not folded), which is F.linear's
     * own t, counted with the product: its Transposes dispatch what
     * dynamo's do, the 4 a layer the attention's heads need (48; 120
     * before, the 72 weights' counted again) */
    const char *bert[2] = {"models/bert_base.onnx", "models/dynamo/bert_base_dynamo.onnx"};
    uint64_t tr_ops[2] = {0, 0};
    for (int f = 0; f < 2; f++) {
        mp_model *m;
        mp_profile *p = profile_at(bert[f], 2, 128, &m);
        const char *kv[] = {"precision", "bf16-mixed", "gpu", "h100", NULL};
        mp_tplan *pl = p ? plan_with(p, kv) : NULL;
        for (int k = 0; pl && k < pl->n_nodes; k++)
            if (mp_streq(m->graph->nodes[m->graph->order[k]].op, "Transpose")) tr_ops[f] += pl->nodes[k].n_fwd_ops;
        mp_tplan_free(pl);
        mp_profile_free(p);
        mp_model_free(m);
    }
    T_EQ_U64(tr_ops[0], 48);
    T_EQ_U64(tr_ops[1], 48);
}

/* GPT-2's two exports of a fresh model hold the same parameters on each
 * GPU of a layout. Pipeline stages: the dynamo export's final norm reads
 * the tensor kept for every merged norm weight (a stand-in), which the
 * stage does not hold; it holds the norm's own (a role parameter): stage 1
 * 59,862,528 as TorchScript's (1,536 more before). Tensor parallelism: the
 * TorchScript export merged the layers' zero biases behind Identity copies,
 * each a parameter of its own that a column-split product splits: 62,641,536
 * a GPU as dynamo's (29,568 more before: 11 layers' c_attn and c_fc biases
 * counted whole). */
static void t_twin_layouts(void) {
    const char *files[2] = {"models/gpt2.onnx", "models/dynamo/gpt2_dynamo.onnx"};
    for (int f = 0; f < 2; f++) {
        mp_model *m;
        mp_profile *p = profile_at(files[f], 2, 128, &m);
        const char *pp[] = {"pp", "2", "gpu", "h100", NULL}, *tp[] = {"tp", "2", "gpu", "h100", NULL};
        mp_tplan *pl = p ? plan_with(p, pp) : NULL;
        if (pl) {
            T_EQ(pl->pp, 2);
            T_EQ_U64(pl->stages[0].params, 103174656);
            T_EQ_U64(pl->stages[1].params, 59862528);
        }
        mp_tplan_free(pl);
        pl = p ? plan_with(p, tp) : NULL;
        if (pl) T_EQ_U64(pl->stages[0].params, 62641536);
        mp_tplan_free(pl);
        mp_profile_free(p);
        mp_model_free(m);
    }
}

/* A causal attention planned fused runs as SDPA with is_causal: the tiles
 * wholly above the diagonal are skipped (mp_sdpa_causal_share, 128-token
 * tiles: T (T + 1) / 2 of T^2). By hand: 1 up to 128 tokens; at 256, T = 2,
 * 3 of 4 tiles: 0.75; at 2,048, 136 of 256: 0.53125; queries other than the
 * keys: 1. OPT-125M (dynamo export, 12 causal attentions) at 2 x 1,024 in
 * bf16-mixed on an H100: 12 of 12 causal, T = 8, 36 of 64 tiles: each
 * head's roofline the larger of 0.5625 of its FLOPs' time and its bytes'
 * (the backward compute-bound);
 * the counts keep every score (flop_counter's). Eager, nothing skipped.
 * And opset 23's Attention operator, causal by its flag. */
static void t_causal_tiles(void) {
    T_CHECK(mp_sdpa_causal_share(128, 128) == 1.0);
    T_CHECK(mp_sdpa_causal_share(256, 256) == 0.75);
    T_CHECK(mp_sdpa_causal_share(2048, 2048) == 0.53125);
    T_CHECK(mp_sdpa_causal_share(1, 2048) == 1.0);
    mp_model *m;
    mp_profile *p = profile_at("models/dynamo/opt_125m.onnx", 2, 1024, &m);
    for (int fused = 1; p && fused >= 0; fused--) {
        const char *kv[] = {"precision", "bf16-mixed", "gpu", "h100", "attention", fused ? "fused" : "eager", NULL};
        mp_tplan *pl = plan_with(p, kv);
        if (!pl) continue;
        T_EQ(pl->attn_causal, fused ? 12 : 0);
        if (fused) T_CHECK(pl->attn_causal_share == 0.5625);
        int skipping = 0;
        for (int k = 0; k < pl->n_nodes; k++) {
            const mp_pnode *pn = &pl->nodes[k];
            if (pn->skipped == 0) continue;
            skipping++;
            T_CHECK(pn->skipped == 0.4375);
            double rate = pl->peak_low_flops * pl->o.compute_eff, bw = pl->bw * pl->o.memory_eff;
            double f = fmax(0.5625 * (double)pn->fwd_flops / rate, (double)pn->bytes / bw);
            double b = fmax(0.5625 * (double)pn->bwd_flops / rate, 2.0 * (double)pn->bytes / bw);
            T_CHECK(fabs(pn->roof_fwd - f) <= 1e-9 * f && fabs(pn->roof_bwd - b) <= 1e-9 * b);
            T_CHECK(0.5625 * (double)pn->bwd_flops / rate > 2.0 * (double)pn->bytes / bw); /* compute-bound back */
        }
        T_EQ(skipping, fused ? 12 : 0);
        mp_tplan_free(pl);
    }
    mp_profile_free(p);
    mp_model_free(m);
    /* opset 23's Attention with is_causal, one fused kernel of its own: at
     * 384 tokens T = 3, 6 of 9 tiles; without the flag, all */
    for (int causal = 0; causal < 2; causal++) {
        mp_model *mm = tb_new(23);
        tb_input(mm, "q", MP_DT_FLOAT, 3, TB_DIMS(2, 384, 32));
        tb_input(mm, "k", MP_DT_FLOAT, 3, TB_DIMS(2, 384, 32));
        tb_input(mm, "v", MP_DT_FLOAT, 3, TB_DIMS(2, 384, 32));
        int n = tb_node(mm, "Attention", "q,k,v", "y");
        tb_attr_i(mm, n, "q_num_heads", 4);
        tb_attr_i(mm, n, "kv_num_heads", 4);
        tb_attr_i(mm, n, "is_causal", causal);
        tb_output(mm, "y");
        mp_profile *pp = tb_prof(mm);
        const char *kv[] = {"gpu", "h100", "loss", "none", NULL};
        mp_tplan *pl = pp ? plan_with(pp, kv) : NULL;
        if (pl) {
            T_EQ(pl->attn_causal, causal);
            double skipped = 0;
            for (int k = 0; k < pl->n_nodes; k++) skipped += pl->nodes[k].skipped;
            T_CHECK(fabs(skipped - (causal ? 1.0 / 3.0 : 0.0)) < 1e-12);
        }
        mp_tplan_free(pl);
        tb_done(mm, pp);
    }
}

/* An encoder-decoder (nn.Transformer of 8 features, 2 heads of 4, one
 * layer each side, batch_first; seed encdec_transformer.onnx: source 2 x
 * 6 tokens, target 2 x 4, its causal mask folded): the encoder's
 * self-attention keeps nothing, the decoder's keeps K and V per decoder
 * token, 2 x 8 x 4 B = 64 B, the cross-attention K and V of the encoder's
 * 12 tokens, 2 x 8 x 4 x 12 = 768 B; at the decoder's 8 tokens 512 + 768 =
 * 1,280 B. Its cross-attention's K and V come from one product (in_proj's
 * last rows): 2 KV heads, not 4. A token's decode leaves the encoder out. */
static void t_encdec_kv_cache(void) {
    t_cli r = RUN("tests/corpus/seeds/encdec_transformer.onnx", "--inference", "--kv-cache", "--format", "json", "-q");
    T_EQ(r.code, 0);
    jr *j = json_of(&r);
    const jr *in = j ? jr_path(j, "plan.inference") : NULL;
    T_CHECK(in != NULL);
    if (in) {
        T_EQ_U64((uint64_t)jr_path(in, "kv_cache_bytes_per_token")->i, 64);
        T_EQ_U64((uint64_t)jr_path(in, "kv_cache_cross_bytes")->i, 768);
        T_EQ_U64((uint64_t)jr_path(in, "kv_cache_context_tokens")->i, 8);
        T_EQ_U64((uint64_t)jr_path(in, "kv_cache_bytes")->i, 1280);
        int64_t pre = jr_path(in, "prefill_flops")->i, dec = jr_path(in, "decode_flops_per_token")->i;
        T_CHECK(dec > 0 && dec * 8 < pre);
    }
    jr_free(j);
    t_cli_free(&r);
    r = RUN("tests/corpus/seeds/encdec_transformer.onnx", "--inference");
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "KV heads") == NULL);
    T_CHECK(strstr(r.out, "causal additive mask") != NULL);
    t_cli_free(&r);
}

/* The operators eager PyTorch dispatches, by ATen's decompositions
 * (docs/PLANNING.md "host-bound steps"), counted by hand on
 * x[2,4,8] -> MatMul W[8,8] -> Add b[8] -> Reshape [2,4,2,4] ->
 * Transpose (0,2,1,3) -> MatMul of that by itself [2,2,4,4]:
 *   forward:  Linear on 3-D input t, view, mm, view (4); its bias Add is
 *             addmm's (0); Reshape 1; Transpose 1; batched product
 *             expand x2, reshape x2, bmm, view (6), each reshape of
 *             the transposed heads a copy (clone and _unsafe_view: 2 more,
 *             as TorchDispatchMode lists them)                     = 14
 *   backward: the weight's gradient t, mm, t and TBackward's t (4) and the
 *             views' reshapes (2); the bias's sum and view (2); Reshape 1;
 *             Transpose 1; the product's gradient reshaped (1) and per side
 *             transpose, bmm, reshape (3 + 3)                       = 17
 *   the two gradients of t (used twice) summed                       =  1
 *   AccumulateGrad for W and b                                       =  2 */
static void t_host_ops_decomposed(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 3, TB_DIMS(2, 4, 8));
    tb_weight(m, "W", MP_DT_FLOAT, 2, TB_DIMS(8, 8));
    tb_weight(m, "b", MP_DT_FLOAT, 1, TB_DIMS(8));
    tb_const_i(m, "shape", MP_DT_INT64, 1, TB_DIMS(4), TB_DIMS(2, 4, 2, 4));
    tb_node(m, "MatMul", "x,W", "h");
    tb_node(m, "Add", "h,b", "h2");
    tb_node(m, "Reshape", "h2,shape", "r");
    int t = tb_node(m, "Transpose", "r", "t");
    tb_attr_ints(m, t, "perm", 4, TB_DIMS(0, 2, 1, 3));
    tb_node(m, "MatMul", "t,t", "s");
    tb_output(m, "s");
    mp_profile *p = tb_prof(m);
    const char *kv[] = {"loss", "none", "optimizer", "none", NULL};
    mp_tplan *pl = p ? plan_with(p, kv) : NULL;
    if (pl) T_EQ_U64(pl->stages[0].host_ops, 14 + 17 + 1 + 2);
    mp_tplan_free(pl);
    const char *inf[] = {"loss", "none", "optimizer", "none", "inference", NULL, NULL};
    pl = p ? plan_with(p, inf) : NULL;
    if (pl) T_EQ_U64(pl->stages[0].host_ops, 14);
    mp_tplan_free(pl);
    tb_done(m, p);
}

/* The operators a training step of model m dispatches, without loss and
 * optimizer; m is freed. */
static uint64_t step_ops(mp_model *m) {
    mp_profile *p = tb_prof(m);
    const char *kv[] = {"loss", "none", "optimizer", "none", NULL};
    mp_tplan *pl = p ? plan_with(p, kv) : NULL;
    uint64_t n = pl ? pl->stages[0].host_ops : 0;
    mp_tplan_free(pl);
    tb_done(m, p);
    return n;
}

/* What eager PyTorch dispatches that the export shows otherwise, by hand:
 *  - an Identity copy of a parameter (the TorchScript exporter's merge of
 *    equal initializers) is a parameter of its own: x * g0 * g1 (x an
 *    input) with g1 a copy of g0 is 2 Muls, in the backward g0's gradient
 *    and then both of the second Mul's, 2 AccumulateGrads: 7, and no
 *    gradient summed into g0 for the copy (the count was 9: the Identity
 *    dispatched each way);
 *  - a relative position bias folded from a table gathered by an index
 *    (the seed's Swin-style window attention, table [25, 2]) is computed
 *    again each forward: index, view, permute, contiguous, unsqueeze (5
 *    operators, 2 kernels), and back: squeeze, permute, view, new_zeros,
 *    index_put_ (5, 2). The same graph with the bias unread (weightless)
 *    has neither. */
static void t_host_ops_copies_biases(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 2, TB_DIMS(4, 8));
    tb_weight(m, "norm0.weight", MP_DT_FLOAT, 1, TB_DIMS(8));
    tb_node(m, "Identity", "norm0.weight", "norm1.weight");
    tb_node(m, "Mul", "x,norm0.weight", "a");
    tb_node(m, "Mul", "a,norm1.weight", "y");
    tb_output(m, "y");
    T_EQ_U64(step_ops(m), 2 + 3 + 2);
    uint64_t ops[2][2], kern[2][2];
    for (int w = 0; w < 2; w++)
        for (int inf = 0; inf < 2; inf++) {
            t_cli r = RUN(w ? "tests/corpus/seeds/rel_pos_bias_weightless.onnx" : "tests/corpus/seeds/rel_pos_bias.onnx",
                          "--loss", "none", "--optimizer", "none", "--format", "json", "-q", inf ? "--inference" : "-q");
            T_EQ(r.code, 0);
            jr *j = json_of(&r);
            const jr *o = j ? jr_path(j, "plan.host.ops_per_step") : NULL, *k = j ? jr_path(j, "plan.host.kernels_per_step") : NULL;
            T_CHECK(o && k);
            ops[w][inf] = o ? (uint64_t)o->i : 0;
            kern[w][inf] = k ? (uint64_t)k->i : 0;
            jr_free(j);
            t_cli_free(&r);
        }
    T_EQ_U64(ops[0][0] - ops[1][0], 10);
    T_EQ_U64(kern[0][0] - kern[1][0], 4);
    T_EQ_U64(ops[0][1] - ops[1][1], 5);
    T_EQ_U64(kern[0][1] - kern[1][1], 2);
}

/* More of what eager PyTorch dispatches, by hand (TorchDispatchMode lists
 * the same on the CPU, less the CPU's `empty` reserve of batch_norm):
 *  - Conv (input x, no gradient), BatchNormalization, Relu in training:
 *    forward convolution, num_batches_tracked.add_ and the batch norm,
 *    relu (4); backward threshold_backward, native_batch_norm_backward
 *    and convolution_backward, one operator each for all their gradients
 *    (3); AccumulateGrad for the weight, its bias, the norm's scale and
 *    shift (4): 11;
 *  - an Einsum that is one batched product, "bhid,bhjd->bhij", of q * wq
 *    and k * wk (x and k inputs): the 2 Muls, einsum's 12; back its 3 and
 *    6 per side, each Mul's wq or wk gradient (2); 2 AccumulateGrads: 33. */
static void t_host_ops_einsum_norms(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 4, TB_DIMS(2, 3, 8, 8));
    tb_weight(m, "conv.weight", MP_DT_FLOAT, 4, TB_DIMS(4, 3, 3, 3));
    tb_weight(m, "conv.bias", MP_DT_FLOAT, 1, TB_DIMS(4));
    tb_weight(m, "bn.weight", MP_DT_FLOAT, 1, TB_DIMS(4));
    tb_weight(m, "bn.bias", MP_DT_FLOAT, 1, TB_DIMS(4));
    tb_weight(m, "bn.running_mean", MP_DT_FLOAT, 1, TB_DIMS(4));
    tb_weight(m, "bn.running_var", MP_DT_FLOAT, 1, TB_DIMS(4));
    int cv = tb_node(m, "Conv", "x,conv.weight,conv.bias", "c");
    tb_attr_ints(m, cv, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_node(m, "BatchNormalization", "c,bn.weight,bn.bias,bn.running_mean,bn.running_var", "n");
    tb_node(m, "Relu", "n", "y");
    tb_output(m, "y");
    T_EQ_U64(step_ops(m), 4 + 3 + 4);
    m = tb_new(17);
    tb_input(m, "q", MP_DT_FLOAT, 4, TB_DIMS(2, 4, 7, 8));
    tb_input(m, "k", MP_DT_FLOAT, 4, TB_DIMS(2, 4, 7, 8));
    tb_weight(m, "wq", MP_DT_FLOAT, 1, TB_DIMS(8));
    tb_weight(m, "wk", MP_DT_FLOAT, 1, TB_DIMS(8));
    tb_node(m, "Mul", "q,wq", "qs");
    tb_node(m, "Mul", "k,wk", "ks");
    int e = tb_node(m, "Einsum", "qs,ks", "s");
    tb_attr_s(m, e, "equation", "bhid,bhjd->bhij");
    tb_output(m, "s");
    T_EQ_U64(step_ops(m), 14 + 17 + 2);
}

/* --dropout on BERT-base (TorchScript, eval mode: no Dropout nodes) at
 * 1 x 16, by hand: a mask (1 B an element) after each block's O and down
 * projections and on the embeddings, 25 x 16 x 768 = 307,200 B; eager
 * attention's probabilities add 12 x (12 heads x 16 x 16) = 36,864 mask
 * bytes and, in fp32, their dropped copy, 4 B each (147,456); under
 * autocast the product with V keeps its bf16 cast either way: masks only. */
static void t_dropout(void) {
    static const struct {
        const char *att, *prec;
        int sites;
        uint64_t bytes;
    } cases[] = {
        {"fused", "fp32", 25, 307200},
        {"eager", "fp32", 37, 307200 + 36864 + 147456},
        {"eager", "bf16-mixed", 37, 307200 + 36864},
    };
    int64_t acts0 = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int k = 0; k < 2; k++) {
            t_cli r = RUN("models/bert_base.onnx", "--dim", "batch=1", "--dim", "seq=16", "--gpu", "h100-sxm",
                          "--attention", cases[i].att, "--precision", cases[i].prec, "--format", "json", "-q",
                          "--dropout", k ? "0.1" : "0");
            T_EQ(r.code, 0);
            jr *j = json_of(&r);
            const jr *d = j ? jr_path(j, "plan.activations.dropout_bytes") : NULL;
            const jr *a = j ? jr_path(j, "plan.memory.activations_bytes") : NULL;
            const jr *p = j ? jr_path(j, "plan.assumptions.dropout") : NULL;
            T_CHECK(d && a && p);
            if (d && a && p) {
                T_EQ_U64((uint64_t)d->i, k ? cases[i].bytes : 0);
                if (!k) acts0 = a->i;
                else T_EQ_U64((uint64_t)(a->i - acts0), cases[i].bytes);
                T_CHECK(k ? p->num == 0.1 : p->type == JR_NULL);
            }
            jr_free(j);
            t_cli_free(&r);
        }
    }
    /* the text says how many and where */
    t_cli r = RUN("models/bert_base.onnx", "--dim", "batch=1", "--dim", "seq=16", "--gpu", "h100-sxm", "--dropout",
                  "0.1");
    T_CHECK(r.code == 0 && strstr(r.out, "incl. 25 dropouts' masks 307.2 KB (--dropout 0.1"));
    t_cli_free(&r);
    /* refused: a train-mode export has its own; inference has none; out of range */
    r = RUN("models/dynamo/bert_cls_train_torch211.onnx", "--dropout", "0.1");
    T_CHECK(r.code == 2 && strstr(r.err, "26 Dropout nodes of its own"));
    t_cli_free(&r);
    r = RUN("models/bert_base.onnx", "--dim", "batch=1", "--dim", "seq=16", "--inference", "--dropout", "0.1");
    T_CHECK(r.code == 1 && strstr(r.err, "--inference and --dropout conflict")); /* usage: 1 */
    t_cli_free(&r);
    r = RUN("models/bert_base.onnx", "--dim", "batch=1", "--dim", "seq=16", "--dropout", "1");
    T_CHECK(r.code == 1 && strstr(r.err, "--dropout: expected a probability"));
    t_cli_free(&r);
}

/* Inference reads the attention it recognised: eager writes the scores,
 * fused does not, and the plan says which */
/* A causal mask the exporter folded to a constant (nn.MultiheadAttention
 * given attn_mask=torch.triu(...): 0 on and below the diagonal, -inf
 * above) is causal, and a decoder given float embeddings (no token ids)
 * takes its tokens from the attention: batch 3 x 5 positions, nn.MHA's
 * batch and heads in one dim of its scores. Per token K and V of 8 fp32
 * features: 2 x 8 x 4 = 64 B; 15 tokens: 960 B. Before, --kv-cache was
 * refused as an encoder's, and with tokens unknown the cache and the
 * decode FLOPs printed as 0. */
static void t_kv_const_causal(void) {
    t_cli r = RUN("tests/corpus/seeds/mha_causal_const.onnx", "--inference", "--kv-cache", "--gpu", "h100-sxm",
                  "--format", "json", "-q");
    T_EQ(r.code, 0);
    jr *j = json_of(&r);
    const jr *per = j ? jr_path(j, "plan.inference.kv_cache_bytes_per_token") : NULL;
    const jr *kv = j ? jr_path(j, "plan.inference.kv_cache_bytes") : NULL;
    const jr *dec = j ? jr_path(j, "plan.inference.decode_flops_per_token") : NULL;
    const jr *pre = j ? jr_path(j, "plan.inference.prefill_flops") : NULL;
    T_CHECK(per && kv && dec && pre);
    if (per && kv && dec && pre) {
        T_EQ(per->i, 64);
        T_EQ(kv->i, 960);
        T_EQ(dec->i, pre->i / 15);
    }
    jr_free(j);
    t_cli_free(&r);
}

static void t_inference_attention(void) {
    int64_t acts[2] = {0};
    double fwd[2] = {0};
    for (int k = 0; k < 2; k++) {
        t_cli r = RUN("models/bert_base.onnx", "--dim", "batch=8", "--dim", "seq=512", "--inference", "--attention",
                      k ? "eager" : "fused", "--gpu", "h100-sxm", "--format", "json", "-q");
        jr *j = json_of(&r);
        const jr *a = j ? jr_path(j, "plan.memory.activations_bytes") : NULL;
        const jr *f = j ? jr_path(j, "plan.patterns.attention_fused") : NULL;
        const jr *st = j ? jr_path(j, "plan.step_time_s") : NULL;
        T_CHECK(a && f && st);
        if (a && f && st) {
            acts[k] = a->i;
            fwd[k] = st->num;
            T_EQ(f->i, k ? 0 : 12);
        }
        jr_free(j);
        t_cli_free(&r);
    }
    /* BERT-base at 512: the eager scores of one layer, 8 x 12 x 512 x 512
     * x 4 B, are written (the peak is inside an attention) */
    T_CHECK(acts[1] >= acts[0] + 8ll * 12 * 512 * 512 * 4);
    T_CHECK(fwd[0] < fwd[1]); /* one SDPA kernel per attention: the forward is shorter */
    t_cli r = RUN("models/gpt2.onnx", "--dim", "batch=1", "--dim", "seq=64", "--inference");
    T_CHECK(r.code == 0 && strstr(r.out, "12 fused (scaled_dot_product_attention") != NULL);
    t_cli_free(&r);
    /* --kv-cache on a model without attention: refused */
    r = RUN("models/resnet18.onnx", "--dim", "batch=1", "--inference", "--kv-cache");
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "--kv-cache") && strstr(r.err, "no attention"));
    t_cli_free(&r);
    /* an encoder (a padding mask from a [batch, seq] input): refused, both exporters */
    static const char *const enc[] = {"models/bert_base.onnx", "models/dynamo/distilbert_base.onnx"};
    for (int i = 0; i < 2; i++) {
        r = RUN(enc[i], "--dim", "batch=1", "--dim", "seq=16", "--inference", "--kv-cache");
        T_EQ(r.code, 2);
        T_CHECK(strstr(r.err, "--kv-cache") && strstr(r.err, "bidirectional"));
        t_cli_free(&r);
    }
    /* an Attention without a mask is refused; one whose mask is a square
     * table the caller gives (it can be causal), or causal by its
     * attribute, is planned */
    for (int form = 0; form < 3; form++) {
        mp_model *m = tb_new(23);
        tb_input(m, "q", MP_DT_FLOAT, 4, TB_DIMS(1, 4, 7, 8));
        tb_input(m, "k", MP_DT_FLOAT, 4, TB_DIMS(1, 4, 7, 8));
        tb_input(m, "v", MP_DT_FLOAT, 4, TB_DIMS(1, 4, 7, 8));
        if (form == 1) tb_input(m, "mask", MP_DT_BOOL, 2, TB_DIMS(7, 7));
        int n = tb_node(m, "Attention", form == 1 ? "q,k,v,mask" : "q,k,v", "y");
        if (form == 2) tb_attr_i(m, n, "is_causal", 1);
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        mp_tplan_options o;
        mp_tplan_options_default(&o);
        T_OK(mp_tplan_options_set(&o, "inference", "1"));
        T_OK(mp_tplan_options_set(&o, "kv-cache", "1"));
        mp_tplan *pl = NULL;
        mp_status st = p ? mp_tplan_create(p, &o, &pl) : MP_ERR_USAGE;
        if (form == 0) {
            T_EQ(st, MP_ERR_USAGE);
            T_CHECK(strstr(mp_last_error(), "bidirectional") != NULL);
        } else {
            T_OK(st);
        }
        mp_tplan_free(pl);
        tb_done(m, p);
    }
}

/* Under checkpointing the backward's moment holds the block being
 * recomputed: BERT-base at 8 x 512 with SGD (no states) peaks inside a
 * block's backward, with that block's own kept set back (the recompute)
 * beside the other blocks' inputs */
static void t_peak_recompute(void) {
    t_cli r = RUN("models/bert_base.onnx", "--dim", "batch=8", "--dim", "seq=512", "--checkpointing", "--optimizer",
                  "sgd", "--zero-grad", "before-forward", "--format", "json", "-q");
    jr *j = json_of(&r);
    const jr *w = j ? jr_path(j, "plan.peak_moment.when") : NULL, *rc = j ? jr_path(j, "plan.peak_moment.recomputed_bytes") : NULL;
    const jr *tot = j ? jr_path(j, "plan.peak_moment.total_bytes") : NULL, *pk = j ? jr_path(j, "plan.memory.peak_bytes") : NULL;
    T_CHECK(w && rc && tot && pk);
    if (w && rc && tot && pk) {
        T_EQ_STR(w->s, "backward");
        T_CHECK(rc->i > 100000000); /* a BERT-base layer's kept set at 8 x 512: ~200 MB */
        T_EQ(tot->i, pk->i);
    }
    jr_free(j);
    t_cli_free(&r);
}

/* DDP's buckets (dp > 1 without ZeRO), on t_zero_grad's model at dp 2:
 * by default (gradient_as_bucket_view=False) the buckets are a second
 * copy of the 32,768 B of gradients, resident, and the gradients are born
 * in the backward as on one rank: the forward's end holds weights,
 * buckets, the last step's gradients and 1,024 B kept = 99,328 B; with
 * --ddp-bucket-view the gradients are the buckets, resident: W2's backward,
 * 32,768 + 32,768 + 1,024 kept + 1,024 transient = 67,584 B. */
static void t_ddp_buckets(void) {
    mp_model *m = tb_mlp2(2, 64, 64, 64);
    mp_profile *p = tb_prof(m);
    for (int view = 0; p && view < 2; view++) {
        const char *kv[] = {"loss", "none", "optimizer", "sgd", "dp", "2", view ? "ddp-bucket-view" : NULL, NULL, NULL};
        mp_tplan *pl = plan_with(p, kv);
        if (!pl) continue;
        const mp_tplan_moment *a = &pl->stages[0].at;
        T_EQ_U64(a->buckets, view ? 0 : 32768);
        T_EQ_U64(a->grads, 32768);
        T_EQ(a->when, view ? MP_MOMENT_BACKWARD : MP_MOMENT_FORWARD);
        T_EQ_U64(pl->mem.peak_bytes, view ? 67584 : 99328);
        mp_tplan_free(pl);
    }
    /* ZeRO partitions the gradients itself: no DDP buckets */
    const char *z[] = {"loss", "none", "optimizer", "sgd", "dp", "2", "zero", "1", NULL};
    mp_tplan *pl = p ? plan_with(p, z) : NULL;
    if (pl) T_EQ_U64(pl->stages[0].at.buckets, 0);
    mp_tplan_free(pl);
    tb_done(m, p);
}

/* ZeRO-3 / FSDP's working set on llama_small (fp32, dp 4), by hand. The
 * root unit (what lies outside the blocks) is the embedding and the LM
 * head (16,384,000 each) and the final norm (512): 32,768,512 elements; a
 * block is 3,163,136 (its products and two norms: the TorchScript exporter
 * merged the equal norm weights behind Identity nodes before block 0, and
 * each is counted with its block by its name). The forward's end holds the root gathered (x 4 B); the peak,
 * block 3's MLP backward, the root's parameters and its gradient (ready
 * only at the embedding's backward), block 3 and block 2 (prefetched)
 * gathered, and block 3's gradient before its reduce-scatter. */
static void t_zero3_gathered(void) {
    for (int f = 0; f < 2; f++) {
        t_cli r = f ? RUN("models/llama_small.onnx", "--dim", "batch=1", "--dim", "seq=16", "--dp", "4", "--fsdp",
                          "--format", "json", "-q")
                    : RUN("models/llama_small.onnx", "--dim", "batch=1", "--dim", "seq=16", "--dp", "4", "--zero", "3",
                          "--format", "json", "-q");
        T_EQ(r.code, 0);
        jr *j = json_of(&r);
        const jr *w = j ? jr_path(j, "plan.peak_moment.when") : NULL;
        const jr *n = j ? jr_path(j, "plan.peak_moment.node") : NULL;
        const jr *gb = j ? jr_path(j, "plan.peak_moment.gathered_bytes") : NULL;
        T_CHECK(w && n && gb);
        if (w && n && gb) {
            T_EQ_STR(w->s, "backward");
            T_CHECK(n->s && strstr(n->s, "/model/layers.3/") == n->s);
            T_EQ(gb->i, (2 * 32768512ll + 3 * 3163136ll) * 4);
        }
        jr_free(j);
        t_cli_free(&r);
    }
    /* ZeRO-2 gathers nothing */
    t_cli r = RUN("models/llama_small.onnx", "--dim", "batch=1", "--dim", "seq=16", "--dp", "4", "--zero", "2",
                  "--format", "json", "-q");
    jr *j = json_of(&r);
    const jr *gb = j ? jr_path(j, "plan.peak_moment.gathered_bytes") : NULL;
    T_CHECK(gb && gb->i == 0);
    jr_free(j);
    t_cli_free(&r);
}

/* The flag on the command line: the JSON names it, the text says why the
 * gradients are at the moment, inference refuses it. Llama-style decoder
 * in pure bf16 with Adam: the forward's end holds the last step's
 * gradients (after-forward), which the loss's backward does not. */
static void t_zero_grad_cli(void) {
    static const char *const where[] = {"after-forward", "before-forward", "in-place"};
    int64_t peak[3] = {0};
    for (int k = 0; k < 3; k++) {
        t_cli r = RUN("models/llama_small.onnx", "--dim", "batch=2", "--dim", "seq=128", "--precision", "bf16",
                      "--zero-grad", where[k], "--format", "json", "-q");
        T_EQ(r.code, 0);
        jr *j = json_of(&r);
        const jr *z = j ? jr_path(j, "plan.assumptions.zero_grad") : NULL;
        const jr *pk = j ? jr_path(j, "plan.memory.peak_bytes") : NULL;
        const jr *g = j ? jr_path(j, "plan.peak_moment.grads_bytes") : NULL;
        const jr *gm = j ? jr_path(j, "plan.memory.grads_bytes") : NULL;
        const jr *wh = j ? jr_path(j, "plan.peak_moment.when") : NULL;
        T_CHECK(z && pk && g && gm && wh);
        if (z && pk && g && gm && wh) {
            T_EQ_STR(z->s, where[k]);
            peak[k] = pk->i;
            if (k != 1) T_EQ(g->i, gm->i); /* every gradient at the moment */
            if (k == 0) T_EQ_STR(wh->s, "forward");
        }
        jr_free(j);
        t_cli_free(&r);
    }
    T_CHECK(peak[0] > peak[1]);  /* the gradients through the forward */
    T_CHECK(peak[2] >= peak[0]); /* resident at every moment */
    t_cli r = RUN("models/llama_small.onnx", "--dim", "batch=2", "--dim", "seq=128", "--precision", "bf16");
    T_CHECK(r.code == 0 && strstr(r.out, "(the last step's: zero_grad frees them after the forward") != NULL);
    T_CHECK(strstr(r.out, "if freed first:     peak ") != NULL); /* what zero_grad before the forward gives */
    t_cli_free(&r);
    r = RUN("models/llama_small.onnx", "--dim", "batch=2", "--dim", "seq=128", "--inference", "--zero-grad",
            "in-place");
    T_CHECK(r.code == 1 && strstr(r.err, "--inference and --zero-grad conflict"));
    t_cli_free(&r);
}

/* Autocast's cache under checkpointing: the checkpointed blocks keep
 * nothing, but the bf16 copies of their weights stay in autocast's cache
 * until the autocast region ends, after the loss. llama_small's blocks, by
 * hand: q, k, v, o 4 x 512 x 512 and gate, up, down 3 x 512 x 1,376 =
 * 3,162,112 weights a layer, 4 layers, 2 B each = 25,296,896 B, live at
 * the forward's end (SGD: no states; the last step's gradients there too);
 * without checkpointing the copies are kept activations instead. */
static void t_autocast_cache(void) {
    for (int ck = 0; ck < 2; ck++) {
        t_cli r = ck ? RUN("models/llama_small.onnx", "--dim", "batch=1", "--dim", "seq=16", "--precision", "bf16-mixed",
                           "--optimizer", "sgd", "--checkpointing", "--format", "json", "-q")
                     : RUN("models/llama_small.onnx", "--dim", "batch=1", "--dim", "seq=16", "--precision", "bf16-mixed",
                           "--optimizer", "sgd", "--format", "json", "-q");
        T_EQ(r.code, 0);
        jr *j = json_of(&r);
        const jr *w = j ? jr_path(j, "plan.peak_moment.when") : NULL;
        const jr *c = j ? jr_path(j, "plan.peak_moment.autocast_cache_bytes") : NULL;
        T_CHECK(w && c);
        if (w && c) {
            T_EQ_STR(w->s, "forward");
            T_EQ(c->i, ck ? 25296896 : 0);
        }
        jr_free(j);
        t_cli_free(&r);
    }
    t_cli r = RUN("models/llama_small.onnx", "--dim", "batch=1", "--dim", "seq=16", "--precision", "bf16-mixed",
                  "--optimizer", "sgd", "--checkpointing");
    T_CHECK(r.code == 0 && strstr(r.out, "autocast cache:     25.3 MB") != NULL);
    t_cli_free(&r);
    /* under ZeRO (or FSDP) mixed precision runs on 16-bit weights: no copies,
     * no cache */
    for (int ck = 0; ck < 2; ck++) {
        r = ck ? RUN("models/llama_small.onnx", "--dim", "batch=1", "--dim", "seq=16", "--precision", "bf16-mixed",
                     "--dp", "2", "--zero", "1", "--checkpointing", "--format", "json", "-q")
               : RUN("models/llama_small.onnx", "--dim", "batch=1", "--dim", "seq=16", "--precision", "bf16-mixed",
                     "--dp", "2", "--zero", "1", "--format", "json", "-q");
        jr *jz = json_of(&r);
        const jr *cc = jz ? jr_path(jz, "plan.peak_moment.autocast_cache_bytes") : NULL;
        const jr *wc = jz ? jr_path(jz, "plan.activations.autocast_weight_copies_bytes") : NULL;
        T_CHECK(cc && wc && cc->i == 0 && wc->i == 0);
        jr_free(jz);
        t_cli_free(&r);
    }
    /* inference under autocast (no_grad): the parameters stay fp32 (45,421,056
     * x 4 B) and by the LM head every Linear weight has its bf16 copy in the
     * cache: the blocks' 12,648,448 and the head's 32,000 x 512, x 2 B */
    r = RUN("models/llama_small.onnx", "--dim", "batch=1", "--dim", "seq=16", "--precision", "bf16-mixed", "--inference",
            "--format", "json", "-q");
    jr *j = json_of(&r);
    const jr *c = j ? jr_path(j, "plan.peak_moment.autocast_cache_bytes") : NULL;
    const jr *wb = j ? jr_path(j, "plan.peak_moment.weights_bytes") : NULL;
    const jr *tot = j ? jr_path(j, "plan.peak_moment.total_bytes") : NULL;
    const jr *a = j ? jr_path(j, "plan.peak_moment.activations_bytes") : NULL;
    T_CHECK(c && wb && tot && a);
    if (c && wb && tot && a) {
        T_EQ(c->i, (12648448ll + 32000ll * 512) * 2);
        T_EQ(wb->i, 45421056ll * 4);
        T_EQ(tot->i, wb->i + c->i + a->i + 128); /* the input ids: 16 x int64 */
    }
    jr_free(j);
    t_cli_free(&r);
}

/* Issue 31 item 10's plan text */
static void t_plan_text(void) {
    t_cli r = RUN("models/resnet18.onnx", "--dim", "batch=1");
    T_CHECK(r.code == 0 && strstr(r.out, "per step:             1 sample\n") != NULL);
    t_cli_free(&r);
    r = RUN("models/gpt2.onnx", "--dim", "batch=4", "--dim", "seq=512", "--gpu", "h100-sxm", "--fit", "--gpus", "8");
    T_CHECK(r.code == 0 && strstr(r.out, "--format json lists all") != NULL);
    t_cli_free(&r);
    r = RUN("models/gpt2.onnx", "--dim", "batch=4", "--dim", "seq=64", "--gpu", "h100-sxm", "--tp", "2",
            "--sequence-parallel");
    T_CHECK(r.code == 0 && strstr(r.out, "all-gathers and reduce-scatters (sequence parallel)") != NULL);
    t_cli_free(&r);
    r = RUN("models/gpt2.onnx", "--dim", "batch=4", "--dim", "seq=64", "--gpu", "h100-sxm", "--tp", "2");
    T_CHECK(r.code == 0 && strstr(r.out, "0 s per micro-batch (all-reduces") == NULL && strstr(r.out, "(all-reduces inside") != NULL);
    t_cli_free(&r);
}

/* Shapes the data decides (NonZero's count) cannot be planned: the error
 * names the node that makes the first one, not --dim (which cannot help);
 * an operator without a shape rule is named as such */
static void t_data_shapes(void) {
    for (int unknown_op = 0; unknown_op < 2; unknown_op++) {
        mp_model *m = tb_new(17);
        tb_input(m, "x", MP_DT_FLOAT, 2, TB_DIMS(6, 16));
        tb_input(m, "s", MP_DT_FLOAT, 1, TB_DIMS(6));
        tb_weight(m, "w", MP_DT_FLOAT, 2, TB_DIMS(16, 8));
        tb_const_i(m, "flat", MP_DT_INT64, 1, TB_DIMS(1), TB_DIMS(-1));
        int src = tb_node_d(m, unknown_op ? "example.org" : "", unknown_op ? "Mystery" : "NonZero", "s", "nz");
        tb_name(m, src, "select");
        if (unknown_op) tb_opset(m, "example.org", 1);
        tb_node(m, "Reshape", "nz,flat", "idx");
        int ga = tb_node(m, "Gather", "x,idx", "a");
        tb_attr_i(m, ga, "axis", 0);
        tb_node(m, "MatMul", "a,w", "y");
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        mp_tplan_options o;
        mp_tplan_options_default(&o);
        mp_tplan *pl = NULL;
        mp_status st = p ? mp_tplan_create(p, &o, &pl) : MP_OK;
        T_EQ(st, MP_ERR_USAGE);
        const char *e = mp_last_error();
        T_CHECK(strstr(e, "'select'") != NULL && strstr(e, "--dim") == NULL);
        T_CHECK(strstr(e, unknown_op ? "does not know" : "its input values decide") != NULL);
        if (!strstr(e, "'select'")) fprintf(stderr, "    %s\n", e);
        mp_tplan_free(pl);
        tb_done(m, p);
    }
    /* every input shaped, the work of a Loop's passes sized by the data
     * (nn.EmbeddingBag's bags at offsets given as an input: PyTorch
     * 1.13's opset-17 export): named, not "give --dim" */
    t_cli r = RUN("tests/corpus/seeds/embedding_bag_offsets.onnx", "--gpu", "h100", "--dim", "n=12", "--dim",
                  "b=4");
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "the first node '/e/Loop' (Loop), whose body's sizes change from one pass to the next") !=
            NULL);
    T_CHECK(strstr(r.err, "--dim") == NULL);
    t_cli_free(&r);
    /* a list a Loop of known passes grows a row a pass (4 passes from
     * [0, 3]): each pass's body is sized, so it plans */
    r = RUN("tests/corpus/seeds/loop_grows.onnx", "--gpu", "h100");
    T_EQ(r.code, 0);
    t_cli_free(&r);
}

MP_TESTS(plan_step) {
    {"loss_forms", t_loss_forms},
    {"loss_softcap", t_loss_softcap},
    {"loss_softcap_constant", t_loss_softcap_constant},
    {"peak_moment", t_peak_moment},
    {"peak_recompute", t_peak_recompute},
    {"zero_grad", t_zero_grad},
    {"zero_grad_cli", t_zero_grad_cli},
    {"autocast_cache", t_autocast_cache},
    {"ddp_buckets", t_ddp_buckets},
    {"zero3_gathered", t_zero3_gathered},
    {"host_bound", t_host_bound},
    {"bias_in_place", t_bias_in_place},
    {"launch_queue", t_launch_queue},
    {"tf32", t_tf32},
    {"native_depthwise", t_native_depthwise},
    {"folded_causal_masks", t_folded_causal_masks},
    {"encdec_kv_cache", t_encdec_kv_cache},
    {"softcap_eager", t_softcap_eager},
    {"gemma2_block", t_gemma2_block},
    {"merged_parameters", t_merged_parameters},
    {"folded_batchnorm", t_folded_batchnorm},
    {"twin_kernels", t_twin_kernels},
    {"twin_layouts", t_twin_layouts},
    {"causal_tiles", t_causal_tiles},
    {"host_ops_decomposed", t_host_ops_decomposed},
    {"host_ops_copies_biases", t_host_ops_copies_biases},
    {"host_ops_einsum_norms", t_host_ops_einsum_norms},
    {"dropout", t_dropout},
    {"inference_attention", t_inference_attention},
    {"kv_const_causal", t_kv_const_causal},
    {"data_shapes", t_data_shapes},
    {"matmul_copies", t_matmul_copies},
    {"plan_text", t_plan_text},
};
MP_TESTS_END(plan_step)
