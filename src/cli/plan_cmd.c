/* `modelprof plan`: memory per GPU, step time and time to train of a model
 * under a training layout (docs/PLANNING.md).
 * Exit codes: 0 success, 1 usage error, 2 a model or a layout that cannot
 * be planned (the message names the flag). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelprof.h"
#include "cli/cli.h"
#include "report/report.h"

int mp_plan_main(int argc, char **argv);

enum { PL_EXIT_USAGE = 1, PL_EXIT_MODEL = 2 };

static void pl_usage(FILE *f) {
    fputs("usage: modelprof plan [OPTIONS] MODEL.onnx\n"
          "\n"
          "Plan training (or inference) of the model: memory per GPU (weights, gradients,\n"
          "optimizer states, master weights, activations kept for the backward, temporaries),\n"
          "step time by roofline, time to train, and the layouts that fit.\n"
          "The graph's batch dim is one micro-batch on one data-parallel rank.\n"
          "\n"
          "model:\n"
          "  --dim NAME=VALUE        give the symbolic dim NAME a value (repeatable)\n"
          "  --input NAME=D0xD1x...  set the shape of graph input NAME (repeatable)\n"
          "  --batch N               samples per micro-batch of an export whose batch is fixed in its\n"
          "                          shapes (also --dim batch=N or --input at another batch): planned\n"
          "                          at the export's batch, per-sample figures scaled (said in the plan)\n"
          "training:\n"
          "  --precision P           auto (default: the export's dtype), fp32, bf16, fp16 (pure:\n"
          "                          model.to(dtype)), bf16-mixed, fp16-mixed (autocast)\n"
          "  --optimizer O           adamw (default), adam, sgd, sgd-momentum, adafactor, none,\n"
          "                          adamw8bit, paged_adamw8bit, lion\n"
          "  --autocast-device D     cuda (default) or cpu: whose autocast op lists apply\n"
          "  --attention A           fused (default: PyTorch 2's scaled_dot_product_attention\n"
          "                          keeps no scores) or eager (Q.K^T, softmax, P.V as written)\n"
          "  --checkpointing         recompute each repeated block in the backward\n"
          "  --zero 0|1|2|3          ZeRO stage (default 0); --fsdp: FSDP full shard (= ZeRO-3)\n"
          "  --dp N --tp N --pp N    data, tensor (Megatron) and pipeline (1F1B) parallel degrees\n"
          "  --ddp-bucket-view       dp without ZeRO: DDP's gradients are views of its buckets\n"
          "                          (default: the buckets are a second copy, PyTorch's default)\n"
          "  --sequence-parallel     with --tp: Megatron's sequence parallelism (norms, dropouts\n"
          "                          and residuals split along the sequence)\n"
          "  --micro-batches N       micro-batches per step (default 1; 4 x pp with --pp)\n"
          "  --loss L                auto (default: causal-lm when output 0 is an LM head's,\n"
          "                          cross-entropy otherwise), causal-lm (transformers: fp32\n"
          "                          logits in every precision), cross-entropy, none\n"
          "  --no-loss               --loss none\n"
          "  --optimizer-impl I      foreach (default, PyTorch's on CUDA), fused or for-loop:\n"
          "                          the optimizer step's kernels and temporaries\n"
          "  --zero-grad W           where the loop frees the gradients: after-forward (default:\n"
          "                          loss, zero_grad, backward, step, as Lightning; the last\n"
          "                          step's live through the forward), before-forward (Hugging\n"
          "                          Face's Trainer: after step) or in-place (set_to_none=False)\n"
          "  --channels-last         the model runs channels-last (memory_format): 16-bit\n"
          "                          convolutions need no layout transposes (default: NCHW)\n"
          "  --clip-grad-norm X      clip_grad_norm_(max_norm=X) before each step (Hugging Face's\n"
          "                          Trainer: 1.0): the gradients read for the norm, then scaled.\n"
          "                          fp16-mixed plans its loss scaling without a flag:\n"
          "                          GradScaler's unscale (DeepSpeed's scaler under --zero)\n"
          "fine-tuning:\n"
          "  --freeze GLOB --unfreeze GLOB   parameters (by name or module path, fnmatch globs) not\n"
          "                          trained / trained again, in the order given: the last match decides\n"
          "  --lora-rank R           LoRA adapters of rank R (fp32, as PEFT keeps them); the base frozen\n"
          "  --lora-targets T        roles q,k,v,qkv,o,up,gate,gate_up,down, all-linear, or module\n"
          "                          globs, comma-separated (default q,v)\n"
          "  --lora-alpha A          scales the update (default 8): changes no memory\n"
          "  --lora-dropout P        keeps a mask and a dropped copy of each adapted input\n"
          "  --base-dtype D          nf4, int8 or fp8: the blocks' frozen Linear weights (QLoRA)\n"
          "  --no-double-quant       nf4 with an fp32 constant per block of 64\n"
          "  --optimizer adamw8bit|paged_adamw8bit|lion   bitsandbytes' 8-bit AdamW, Lion\n"
          "  --offload optimizer|params   states (and parameters: needs --zero 3 or --fsdp) on the host\n"
          "  --host-link-gbs X       host link per direction (default: the GPU's PCIe generation x16)\n"
          "  --cpu-adam-gps X        offloaded optimizer's rate, 1e9 parameters/s (default 4.55)\n"
          "  --torch-version V       2 (default) or 1.13: whose autograd rules say what is kept\n"
          "  --dropout P             the trainer's dropout where an eval-mode export has none: a\n"
          "                          mask after each block's attention and MLP outputs, on the\n"
          "                          embeddings and on eager attention's probabilities\n"
          "inference:\n"
          "  --inference             weights + activation peak + inputs\n"
          "  --kv-cache              with --inference: KV-cache bytes per token, prefill vs decode\n"
          "GPU:\n"
          "  --gpu NAME              from the built-in table (an id, a short form such as h100,\n"
          "                          or the device's name, in any case); --gpu list prints it\n"
          "                          with sources\n"
          "  --peak-tflops X --mem-gb Y --bandwidth-gbs Z   a GPU of your own (or overrides)\n"
          "  --link-gbs X            GPU-to-GPU bandwidth per direction (default: NVLink/PCIe of\n"
          "                          the GPU inside a node of 8, 50 GB/s InfiniBand across)\n"
          "time to train:\n"
          "  --tokens N | --samples N   data to train on (K, M, G, T suffixes, or 1e12)\n"
          "  --gpus N                GPUs (default dp x tp x pp)\n"
          "  --mfu X                 MFU of the 6ND cross-check (default 0.4)\n"
          "  --fit                   every dp x tp x pp x ZeRO layout of --gpus GPUs (default 8)\n"
          "                          that fits the GPU, best first (memory only without --gpu)\n"
          "assumptions:\n"
          "  --compute-eff X         fraction of the dtype peak a node reaches (default 0.6)\n"
          "  --memory-eff X          fraction of the bandwidth (default 0.8)\n"
          "  --node-overhead-us X    fixed time per node and pass (default 10)\n"
          "  --tf32 W                fp32 products on the tensor cores as TF32: conv (default:\n"
          "                          PyTorch's defaults, cuDNN on, matmul off), all or none\n"
          "  --host-us-per-op X      host time to dispatch one PyTorch operator (default 15 in\n"
          "                          training, 11 in inference: measured on an H200 host): a step\n"
          "                          is the longer of issuing its operators and running them\n"
          "  --reserve-gb X          framework reserve (default 2)\n"
          "output:\n"
          "  --format text|json      report format (default text)\n"
          "  -o, --output FILE       write the plan to FILE (default stdout)\n"
          "  -q, --quiet             do not print warnings on stderr\n"
          "  -h, --help              this help\n"
          "  --                      the options end: a file name after it may begin with '-'\n"
          "\n"
          "exit status: 0 ok, 1 usage error, 2 a model or a layout that cannot be planned\n",
          f);
}

static int pl_usage_error(const char *fmt, const char *arg) {
    fputs("modelprof plan: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n(see modelprof plan --help)\n", stderr);
    return PL_EXIT_USAGE;
}

static void pl_print_error(const char *prefix, const char *msg) { mp_cli_error("modelprof plan", prefix, msg); }

/* The flag of an argument ("--zero" of "--zero=3") into buf: its kind
 * (mp_tplan_option_kind: -1 not a plan option, 0 a switch, 1 a value). */
static int plan_flag(const char *a, char (*buf)[64], size_t size) {
    const char *eq = strchr(a, '=');
    size_t n = eq ? (size_t)(eq - a) : strlen(a);
    if (n >= size) return -1;
    memcpy(*buf, a, n);
    (*buf)[n] = 0;
    return mp_tplan_option_kind(*buf);
}

typedef struct pl_input {
    char *name;
    int64_t dims[64];
    int rank;
} pl_input;

/* The batch of an export whose inputs all have the same number at dim 0
 * (static shapes), else 0. */
static int64_t static_batch_of(const mp_model *m) {
    int64_t b = 0, dims[64];
    int rank;
    for (int i = 0; i < mp_model_input_count(m); i++) {
        if (mp_model_input_shape(m, mp_model_input_name(m, i), dims, &rank) || rank < 1) continue;
        if (dims[0] <= 0 || (b && dims[0] != b)) return 0;
        b = dims[0];
    }
    return b;
}

typedef struct pl_job {
    const mp_tplan *pl;
    mp_format format;
} pl_job;

static mp_status pl_write(void *ud, FILE *f) {
    const pl_job *j = ud;
    return mp_tplan_write(j->pl, j->format, f);
}

static mp_status pl_gpu_list(void *ud, FILE *f) {
    (void)ud;
    return mp_gpu_table_write(f);
}

static int pl_run(int argc, char **argv, const char **dims, pl_input *inputs, int *n_inputs) {
    mp_tplan_options o;
    mp_tplan_options_default(&o);
    const char *model_path = NULL, *out_path = NULL;
    mp_format format = MP_FORMAT_TEXT;
    int quiet = 0, n_dims = 0;
    char flag[64];
    bool ended = false;
    const char *other = NULL; /* the first flag given but -o, --format, -q and --gpu */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        int operand = mp_cli_operand(a, &ended);
        if (operand < 0) continue;
        if (operand) {
            if (model_path) return pl_usage_error("more than one model given ('%s')", a);
            model_path = a;
            continue;
        }
#define TAKES(flag) mp_cli_opt(argc, argv, &i, flag, &val)
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            pl_usage(stdout);
            return 0;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (TAKES("--dim")) {
            if (mp_cli_dim("modelprof plan", val, dims, n_dims, NULL)) return PL_EXIT_USAGE;
            dims[n_dims++] = val;
            if (!other) other = a;
        } else if (TAKES("--input")) {
            pl_input *s = &inputs[*n_inputs];
            int irc = mp_cli_input("modelprof plan", val, &s->name, s->dims, &s->rank);
            if (irc) return irc;
            (*n_inputs)++;
            if (!other) other = a;
        } else if (TAKES("--format")) {
            if (val && strcmp(val, "text") == 0) format = MP_FORMAT_TEXT;
            else if (val && strcmp(val, "json") == 0) format = MP_FORMAT_JSON;
            else return pl_usage_error("--format '%s': expected text or json", val ? val : "");
        } else if (TAKES("-o") || TAKES("--output")) {
            if (!val || !*val) return pl_usage_error("%s needs a file name", a);
            out_path = val;
        } else if (a[0] == '-' && a[1] == '-' && plan_flag(a, &flag, sizeof flag) >= 0) {
            /* the planner's own options: one table in the library (src/plan/options.c) */
            int kind = plan_flag(a, &flag, sizeof flag);
            const char *eq = strchr(a, '=');
            if (kind == 1 && !eq) val = i + 1 < argc ? argv[++i] : NULL;
            else if (eq) val = eq + 1;
            if (kind == 1 && !val) return pl_usage_error("%s needs a value", flag);
            if (mp_tplan_options_set(&o, flag, val)) return mp_cli_usage("modelprof plan", "%s", mp_last_error());
            if (!other && strcmp(flag, "--gpu") != 0) other = flag;
        } else if (a[0] == '-' && a[1]) {
            return pl_usage_error("unknown option '%s'", a);
        } else {
            if (model_path) return pl_usage_error("more than one model given ('%s')", a);
            model_path = a;
        }
#undef TAKES
    }
    /* --gpu list (or --gpu=list): the table, once every flag is read */
    if (o.gpu && strcmp(o.gpu, "list") == 0) {
        if (model_path || other)
            return pl_usage_error("--gpu list prints the table of GPUs; it plans nothing (leave out '%s')",
                                  model_path ? model_path : other);
        if (format == MP_FORMAT_JSON)
            return pl_usage_error("--gpu list prints a text table; it has no %s (leave it out)", "--format json");
        if (mp_cli_write(out_path, pl_gpu_list, NULL)) {
            pl_print_error(NULL, mp_last_error());
            return PL_EXIT_MODEL;
        }
        return 0;
    }
    if (!model_path) {
        pl_usage(stderr);
        return PL_EXIT_USAGE;
    }
    if (mp_cli_output_clash("modelprof plan", "-o", out_path, (const char *const[]){model_path},
                            (const char *const[]){"the model"}, 1))
        return PL_EXIT_USAGE;
    /* flags that conflict whatever the model: a usage error */
    if (mp_tplan_options_check(&o)) return mp_cli_usage("modelprof plan", "%s", mp_last_error());
    mp_model *m = NULL;
    if (mp_model_load(model_path, &m)) {
        pl_print_error(NULL, mp_last_error());
        return PL_EXIT_MODEL;
    }
    int rc = 0;
    for (int i = 0; i < n_dims && !rc; i++) {
        const char *eq = strchr(dims[i], '=');
        char name[256];
        size_t nl = (size_t)(eq - dims[i]);
        if (nl >= sizeof name) nl = sizeof name - 1;
        memcpy(name, dims[i], nl);
        name[nl] = 0;
        if (mp_model_set_dim(m, name, atoll(eq + 1))) {
            /* --dim batch=N on an export whose batch is a number in its
             * shapes (no symbol): the planner's --batch */
            if (strcmp(name, "batch") == 0 && static_batch_of(m) > 0) {
                o.batch = atoll(eq + 1);
                continue;
            }
            pl_print_error("--dim: ", mp_last_error());
            rc = PL_EXIT_USAGE;
        }
    }
    for (int i = 0; i < *n_inputs && !rc; i++) {
        /* --input at another batch than a static export's: the plan is made
         * at the export's batch and scaled (--batch); the other dims apply */
        int64_t decl[64];
        int dr = -1;
        if (!mp_model_input_shape(m, inputs[i].name, decl, &dr) && dr == inputs[i].rank && dr >= 1 &&
            decl[0] > 0 && inputs[i].dims[0] != decl[0]) {
            bool rest = true;
            for (int k = 1; k < dr; k++)
                if (decl[k] >= 0 && decl[k] != inputs[i].dims[k]) rest = false;
            if (rest) {
                if (o.batch > 0 && o.batch != inputs[i].dims[0]) {
                    fprintf(stderr, "modelprof plan: --input %s: batch %lld, but another input or --batch gave %lld\n",
                            inputs[i].name, (long long)inputs[i].dims[0], (long long)o.batch);
                    rc = PL_EXIT_USAGE;
                    break;
                }
                o.batch = inputs[i].dims[0];
                inputs[i].dims[0] = decl[0];
            }
        }
        if (mp_model_set_input_shape(m, inputs[i].name, inputs[i].dims, inputs[i].rank)) {
            pl_print_error("--input: ", mp_last_error());
            rc = PL_EXIT_USAGE;
        }
    }
    mp_profile *p = NULL;
    mp_tplan *pl = NULL;
    if (!rc && mp_profile_static(m, &p)) {
        pl_print_error(NULL, mp_last_error());
        rc = PL_EXIT_MODEL;
    }
    if (!rc && mp_tplan_create(p, &o, &pl)) {
        pl_print_error(NULL, mp_last_error());
        rc = PL_EXIT_MODEL;
    }
    if (!rc) {
        pl_job j = {pl, format};
        if (mp_cli_write(out_path, pl_write, &j)) {
            pl_print_error(NULL, mp_last_error());
            rc = PL_EXIT_MODEL;
        }
    }
    if (!rc && !quiet)
        for (int i = 0; i < mp_model_warning_count(m); i++) pl_print_error("warning: ", mp_model_warning(m, i));
    mp_tplan_free(pl);
    mp_profile_free(p);
    mp_model_free(m);
    return rc;
}

int mp_plan_main(int argc, char **argv) {
    const char **dims = calloc((size_t)argc + 1, sizeof *dims);
    pl_input *inputs = calloc((size_t)argc + 1, sizeof *inputs);
    int n_inputs = 0, rc;
    if (!dims || !inputs) {
        fputs("modelprof plan: out of memory\n", stderr);
        rc = PL_EXIT_MODEL;
    } else {
        rc = pl_run(argc, argv, dims, inputs, &n_inputs);
    }
    for (int i = 0; inputs && i < n_inputs; i++) free(inputs[i].name);
    free(inputs);
    free(dims);
    return rc;
}
