/* The planner's options by name: one table from a flag (`--zero`, as the
 * command line writes it, or `zero`, as the Python package's keywords do)
 * to its field of mp_tplan_options, its kind of value and its range. The
 * command (src/cli/plan_cmd.c) and the Python package's modelprof.plan
 * both set options through it, so a flag is parsed in one place. */
#include "plan/plan.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef enum opt_kind {
    OK_SWITCH,   /* int field set to `lo` (no value; "0"/"false" leaves the default) */
    OK_INT,      /* int field in [lo, hi] */
    OK_I64,      /* int64_t field in [lo, hi] */
    OK_NUM,      /* double field >= 0, K/M/G/T/P suffixes, times `scale` */
    OK_PREC,     /* mp_precision by name */
    OK_OPT,      /* mp_optimizer by name */
    OK_CHOICE,   /* int field: the index of the value in `choices` (NULL-separated "a\0b\0") */
    OK_STR,      /* const char * field: the caller's string (it must outlive the options) */
    OK_RULE,     /* char[] field: "<lo>value;" appended (--freeze '-', --unfreeze '+') */
} opt_kind;

typedef struct opt_def {
    const char *name; /* without the leading "--" */
    opt_kind kind;
    size_t off;
    long long lo, hi;
    double scale;
    const char *choices; /* OK_CHOICE: "name\0name\0", value i sets the field to i */
    const char *expect;  /* the message's "expected ..." */
    double min, max;     /* OK_NUM: the range of the value as given (before `scale`; max 0: none) */
    const char *what;    /* OK_NUM: what the number is, for the range's message */
} opt_def;

#define F(field) offsetof(mp_tplan_options, field)

static const opt_def defs[] = {
    {"checkpointing", OK_SWITCH, F(checkpointing), 1, 1, 0, NULL, NULL},
    {"fsdp", OK_SWITCH, F(fsdp), 1, 1, 0, NULL, NULL},
    {"sequence-parallel", OK_SWITCH, F(sequence_parallel), 1, 1, 0, NULL, NULL},
    {"channels-last", OK_SWITCH, F(channels_last), 1, 1, 0, NULL, NULL},
    {"inference", OK_SWITCH, F(inference), 1, 1, 0, NULL, NULL},
    {"kv-cache", OK_SWITCH, F(kv_cache), 1, 1, 0, NULL, NULL},
    {"no-loss", OK_SWITCH, F(loss), 0, 0, 0, NULL, NULL},
    {"fit", OK_SWITCH, F(fit), 1, 1, 0, NULL, NULL},
    {"precision", OK_PREC, F(precision), 0, 0, 0, NULL,
     "auto, fp32, bf16, fp16, bf16-mixed or fp16-mixed"},
    {"optimizer", OK_OPT, F(optimizer), 0, 0, 0, NULL, NULL},
    {"loss", OK_CHOICE, F(loss_form), 0, 0, 0, "auto\0causal-lm\0cross-entropy\0none\0",
     "auto, causal-lm, cross-entropy or none"},
    {"optimizer-impl", OK_CHOICE, F(optimizer_impl), 0, 0, 0, "foreach\0fused\0for-loop\0",
     "foreach, fused or for-loop"},
    {"host-us-per-op", OK_NUM, F(host_op_s), 0, 0, 1e-6, NULL, NULL, 0, 1e5, "microseconds of host time per operator"},
    {"attention", OK_CHOICE, F(attention_fused), 0, 0, 0, "eager\0fused\0", "fused or eager"},
    {"autocast-device", OK_CHOICE, F(autocast_cpu), 0, 0, 0, "cuda\0cpu\0", "cuda or cpu"},
    {"zero", OK_INT, F(zero), 0, 3, 0, NULL, "0, 1, 2 or 3"},
    {"batch", OK_I64, F(batch), 1, 1000000000, 0, NULL, "a positive integer"},
    {"dp", OK_INT, F(dp), 1, 1000000, 0, NULL, "a positive integer"},
    {"tp", OK_INT, F(tp), 1, 1000000, 0, NULL, "a positive integer"},
    {"pp", OK_INT, F(pp), 1, 1000000, 0, NULL, "a positive integer"},
    {"micro-batches", OK_INT, F(micro_batches), 1, 1000000, 0, NULL, "a positive integer"},
    {"gpus", OK_INT, F(gpus), 1, 1000000, 0, NULL, "a positive integer"},
    {"gpu", OK_STR, F(gpu), 0, 0, 0, NULL, "a GPU name (modelprof plan --gpu list)"},
    {"peak-tflops", OK_NUM, F(peak_tflops), 0, 0, 1, NULL, NULL, 1e-3, 1e7, "the device's peak in TFLOPS (no device is slower than 1 GFLOP/s)"},
    {"mem-gb", OK_NUM, F(mem_gb), 0, 0, 1, NULL, NULL, 1e-3, 1e6, "GB of memory per GPU"},
    {"bandwidth-gbs", OK_NUM, F(bandwidth_gbs), 0, 0, 1, NULL, NULL, 1e-3, 1e7, "GB/s of memory bandwidth"},
    {"link-gbs", OK_NUM, F(link_gbs), 0, 0, 1, NULL, NULL, 1e-3, 1e7, "GB/s between GPUs"},
    {"tokens", OK_NUM, F(tokens), 0, 0, 1, NULL, NULL, 1, 1e21, "tokens to train on"},
    {"samples", OK_NUM, F(samples), 0, 0, 1, NULL, NULL, 1, 1e21, "samples to train on"},
    {"mfu", OK_NUM, F(mfu), 0, 0, 1, NULL, NULL},
    {"compute-eff", OK_NUM, F(compute_eff), 0, 0, 1, NULL, NULL},
    {"memory-eff", OK_NUM, F(memory_eff), 0, 0, 1, NULL, NULL},
    {"node-overhead-us", OK_NUM, F(node_overhead_s), 0, 0, 1e-6, NULL, NULL, 0, 1e6, "microseconds per node and pass"},
    {"reserve-gb", OK_NUM, F(reserve_gb), 0, 0, 1, NULL, NULL, 0, 1e6, "GB the framework reserves"},
    /* since version 3: fine-tuning (src/plan/finetune.c) */
    {"freeze", OK_RULE, F(trainable), '-', 0, 0, NULL, "a glob over parameter or module paths"},
    {"unfreeze", OK_RULE, F(trainable), '+', 0, 0, NULL, "a glob over parameter or module paths"},
    {"lora-rank", OK_INT, F(lora_rank), 1, 65536, 0, NULL, "a positive integer"},
    {"lora-alpha", OK_NUM, F(lora_alpha), 0, 0, 1, NULL, NULL, 0, 1e6, "the LoRA scale"},
    {"lora-dropout", OK_NUM, F(lora_dropout), 0, 0, 1, NULL, NULL},
    {"lora-targets", OK_STR, F(lora_targets), 0, 0, 0, NULL, "roles or module globs"},
    {"base-dtype", OK_CHOICE, F(base_dtype), 0, 0, 0, "same\0nf4\0int8\0fp8\0", "nf4, int8, fp8 or same"},
    {"no-double-quant", OK_SWITCH, F(no_double_quant), 1, 1, 0, NULL, NULL},
    {"offload", OK_CHOICE, F(offload), 0, 0, 0, "none\0optimizer\0params\0", "optimizer, params or none"},
    {"host-link-gbs", OK_NUM, F(host_link_gbs), 0, 0, 1, NULL, NULL, 1e-3, 1e7, "GB/s of the host link per direction"},
    {"cpu-adam-gps", OK_NUM, F(cpu_adam_gps), 0, 0, 1, NULL, NULL, 1e-6, 1e6, "1e9 parameters per second"},
    {"torch-version", OK_CHOICE, F(torch_version), 0, 0, 0, "2\0" "1.13\0", "2 or 1.13"},
    /* since version 4 */
    {"dropout", OK_NUM, F(dropout), 0, 0, 1, NULL, NULL},
    {"zero-grad", OK_CHOICE, F(zero_grad), 0, 0, 0, "after-forward\0before-forward\0in-place\0",
     "after-forward, before-forward or in-place"},
    {"tf32", OK_CHOICE, F(tf32), 0, 0, 0, "conv\0all\0none\0", "conv, all or none"},
    {"ddp-bucket-view", OK_SWITCH, F(ddp_bucket_view), 1, 1, 0, NULL, NULL},
    /* since version 5 */
    {"clip-grad-norm", OK_NUM, F(clip_grad_norm), 0, 0, 1, NULL, NULL, 0, 1e12, "the gradient norm to clip to"},
};

#undef F

/* "--zero", "zero" and the Python spelling "micro_batches" name one entry. */
static const opt_def *find(const char *flag) {
    if (!flag) return NULL;
    if (flag[0] == '-' && flag[1] == '-') flag += 2;
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        const char *a = defs[i].name, *b = flag;
        while (*a && (*a == *b || (*a == '-' && *b == '_'))) a++, b++;
        if (!*a && !*b) return &defs[i];
    }
    return NULL;
}

const char *mp_tplan_choice_name(const char *flag, int value) {
    const opt_def *d = find(flag);
    if (!d || d->kind != OK_CHOICE || value < 0) return NULL;
    const char *c = d->choices;
    for (int k = 0; *c; c += strlen(c) + 1, k++)
        if (k == value) return c;
    return NULL;
}

int mp_tplan_option_kind(const char *flag) {
    const opt_def *d = find(flag);
    if (!d) return -1;
    return d->kind == OK_SWITCH ? 0 : 1;
}

/* Decimal only: a digit or '.' first (no space, sign, hex, inf or nan). */
static bool decimal(const char *s) {
    if (!((*s >= '0' && *s <= '9') || *s == '.')) return false;
    return !strpbrk(s, "xX");
}

static int parse_num(const char *s, double *out) {
    if (!decimal(s)) return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0) || v > 1e30) return 0;
    double mul = 1;
    switch (*end) {
    case 'K': case 'k': mul = 1e3; end++; break;
    case 'M': mul = 1e6; end++; break;
    case 'G': case 'B': mul = 1e9; end++; break;
    case 'T': mul = 1e12; end++; break;
    case 'P': mul = 1e15; end++; break;
    default: break;
    }
    if (*end) return 0;
    *out = v * mul;
    return 1;
}

static int parse_int(const char *s, long long lo, long long hi, long long *out) {
    if (!((*s >= '0' && *s <= '9') || (*s == '-' && s[1] >= '0' && s[1] <= '9'))) return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

mp_status mp_tplan_options_set(mp_tplan_options *o, const char *flag, const char *value) {
    if (!o || !flag) return mp_error(MP_ERR_USAGE, "mp_tplan_options_set: no options or flag");
    if (o->size != sizeof *o)
        return mp_error(MP_ERR_USAGE, "mp_tplan_options_set: options of size %zu (this library's: %zu); "
                        "fill them with mp_tplan_options_default", o->size, sizeof *o);
    const opt_def *d = find(flag);
    if (!d) return mp_error(MP_ERR_USAGE, "unknown plan option '%s'", flag);
    char *field = (char *)o + d->off;
    if (d->kind == OK_SWITCH) {
        if (value && (strcmp(value, "0") == 0 || strcmp(value, "false") == 0 || strcmp(value, "False") == 0))
            return MP_OK;
        if (value && *value && strcmp(value, "1") && strcmp(value, "true") && strcmp(value, "True"))
            return mp_error(MP_ERR_USAGE, "--%s takes no value (given '%s')", d->name, value);
        *(int *)field = (int)d->lo;
        return MP_OK;
    }
    if (!value || !*value) return mp_error(MP_ERR_USAGE, "--%s needs a value", d->name);
    long long iv;
    double dv;
    int k;
    switch (d->kind) {
    case OK_INT:
        if (!parse_int(value, d->lo, d->hi, &iv)) break;
        *(int *)field = (int)iv;
        return MP_OK;
    case OK_I64:
        if (!parse_int(value, d->lo, d->hi, &iv)) break;
        *(int64_t *)field = iv;
        return MP_OK;
    case OK_NUM:
        if (!parse_num(value, &dv))
            return mp_error(MP_ERR_USAGE, "--%s '%s': expected a non-negative number", d->name, value);
        if (d->max > 0 && !(dv >= d->min && dv <= d->max))
            return mp_error(MP_ERR_USAGE, "--%s '%s': out of range: expected %s, from %g to %g", d->name, value, d->what,
                            d->min, d->max);
        *(double *)field = dv * d->scale;
        return MP_OK;
    case OK_PREC:
        k = mp_precision_parse(value);
        if (k < 0) break;
        *(mp_precision *)field = (mp_precision)k;
        return MP_OK;
    case OK_OPT:
        k = mp_optimizer_parse(value);
        if (k < 0) {
            char names[256];
            size_t n = 0;
            names[0] = 0;
            for (int i = 0; i < MP_OPT_COUNT && n + 32 < sizeof names; i++)
                n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? (i + 1 == MP_OPT_COUNT ? " or " : ", ") : "",
                                      mp_optimizer_name((mp_optimizer)i));
            return mp_error(MP_ERR_USAGE, "--%s '%s': expected %s", d->name, value, names);
        }
        *(mp_optimizer *)field = (mp_optimizer)k;
        return MP_OK;
    case OK_CHOICE:
        k = 0;
        for (const char *c = d->choices; *c; c += strlen(c) + 1, k++)
            if (strcmp(c, value) == 0) {
                *(int *)field = k;
                return MP_OK;
            }
        break;
    case OK_STR:
        *(const char **)field = value;
        return MP_OK;
    case OK_RULE: {
        size_t have = strnlen(field, sizeof o->trainable), add = strlen(value);
        if (strchr(value, ';'))
            return mp_error(MP_ERR_USAGE, "--%s '%s': a glob cannot hold ';'", d->name, value);
        if (have + add + 3 > sizeof o->trainable)
            return mp_error(MP_ERR_USAGE, "--%s '%s': the --freeze/--unfreeze globs exceed %zu characters in all",
                            d->name, value, sizeof o->trainable - 1);
        field[have] = (char)d->lo;
        memcpy(field + have + 1, value, add);
        field[have + 1 + add] = ';';
        field[have + 2 + add] = 0;
        return MP_OK;
    }
    case OK_SWITCH:
        break;
    }
    return mp_error(MP_ERR_USAGE, "--%s '%s': expected %s", d->name, value, d->expect ? d->expect : "a value");
}
