/* `modelprof memory`: what held a GPU's memory at its peak, from a CUDA
 * memory snapshot (torch.cuda.memory._dump_snapshot). The file is read,
 * never executed. Exit codes: 0 success, 1 usage error, 2 a snapshot that
 * cannot be read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/memory.h"
#include "report/memory_report.h"
#include "report/report.h"
#include "modelprof.h"
#include "cli/cli.h"

int mp_memory_main(int argc, char **argv);

static void mem_usage(FILE *f) {
    fputs("usage: modelprof memory [OPTIONS] SNAPSHOT.pickle[.gz]\n"
          "       modelprof memory diff [OPTIONS] A.pickle B.pickle\n"
          "\n"
          "What held the GPU's memory at its peak, and why it ran out, from a snapshot written by\n"
          "torch.cuda.memory._record_memory_history(max_entries=N) and\n"
          "torch.cuda.memory._dump_snapshot(\"snapshot.pickle\") (or the list that\n"
          "torch.cuda.memory_snapshot() returns, pickled). The pickle is read, never run: an\n"
          "opcode that would import or call anything is refused.\n"
          "Per device: events by action, the peak (requested bytes, as memory_viz draws them),\n"
          "reserved bytes, the end state, the largest allocations live at the peak, bytes by\n"
          "source line and by category, steps and findings. `memory diff A B` compares two\n"
          "snapshots (B - A): peaks, categories and sites.\n"
          "\n"
          "options:\n"
          "  --format text|json|csv|html  report format (default text)\n"
          "  --csv-table holders|sites|events  the table --format csv writes (default holders)\n"
          "  --device N              one device (default: every device)\n"
          "  --stack full            whole stacks, not the first user frame\n"
          "  --top K                 rows per table, every format, K largest (events: the first K);\n"
          "                          -1 all (default: 20 for text and json, all for csv, 50 for html)\n"
          "  -o, --output FILE       write the report to FILE (default stdout)\n"
          "predicted against measured: the planner's memory rows of the same model beside the\n"
          "categories at the peak (weights/parameter, gradients/gradient, optimizer states and master\n"
          "weights/optimizer_state, activations/activation, temporary/temporary):\n"
          "  --plan-model MODEL.onnx the model the snapshot trained (exported to ONNX)\n"
          "  --dim NAME=VALUE        its symbolic dims (repeatable; batch: the micro-batch)\n"
          "  --precision P, --optimizer O, --checkpointing, --zero N, --dp N, --tp N, --pp N,\n"
          "  --lora-rank R, --freeze PATTERN, ...  any option of modelprof plan (see its --help)\n"
          "  -h, --help              this help\n"
          "  --                      the options end: a file name after it may begin with '-'\n"
          "\n"
          "exit status: 0 ok, 1 usage error, 2 a snapshot that cannot be read, or a --plan-model model or\n"
          "layout that cannot be planned\n",
          f);
}

static int mem_usage_error(const char *what, const char *arg) {
    fprintf(stderr, "modelprof memory: %s '%s'\n(see modelprof memory --help)\n", what, arg);
    return 1;
}

static void mem_print_error(const char *msg) { mp_cli_error(NULL, NULL, msg); }

typedef struct mem_job {
    const mp_snapshot *a, *b;
    const mp_mem_report_opts *o;
    int format; /* 0 text 1 json 2 csv 3 html */
    bool diff;
} mem_job;

static mp_status mem_write(void *ud, FILE *f) {
    const mem_job *j = ud;
    if (j->diff) return mp_memory_write_diff(j->a, j->b, j->o, j->format == 1, f);
    switch (j->format) {
    case 1: return mp_memory_write_json(j->a, j->o, f);
    case 2: return mp_memory_write_csv(j->a, j->o, f);
    case 3: return mp_memory_write_html(j->a, j->o, f);
    default: return mp_memory_write_text(j->a, j->o, f);
    }
}

static int parse_int(const char *s, long lo, long hi, long *out) {
    long long v;
    if (!mp_cli_int(s, lo, hi, &v)) return -1;
    *out = (long)v;
    return 0;
}

/* The planner's rows for --plan-model (docs/MEMORY.md "Predicted against
 * measured"). 0, or the exit status. */
static int plan_predict(const char *model, const char **dims, int ndims, const mp_tplan_options *po,
                        mp_mem_predicted *pr) {
    mp_model *m = NULL;
    mp_profile *p = NULL;
    mp_tplan *pl = NULL;
    int rc = 0;
    if (mp_model_load(model, &m)) {
        mem_print_error(mp_last_error());
        return 2;
    }
    for (int i = 0; i < ndims && !rc; i++) {
        char name[128];
        const char *eq = strchr(dims[i], '=');
        size_t nl = eq ? (size_t)(eq - dims[i]) : 0;
        if (nl >= sizeof name) nl = sizeof name - 1;
        memcpy(name, dims[i], nl);
        name[nl] = 0;
        if (mp_model_set_dim(m, name, atoll(eq + 1))) {   /* checked by mp_cli_dim */
            char pre[200];
            snprintf(pre, sizeof pre, "--dim %.150s: ", dims[i]);
            mp_cli_error("modelprof memory", pre, mp_last_error());
            rc = 1;
        }
    }
    if (!rc && mp_profile_static(m, &p)) {
        mem_print_error(mp_last_error());
        rc = 2;
    }
    /* a layout this model cannot take (--tp 5 of 12 heads): 2, as modelprof
     * plan says it ("a model or a layout that cannot be planned") */
    if (!rc && mp_tplan_create(p, po, &pl)) {
        mp_cli_error("modelprof memory", "--plan-model: ", mp_last_error());
        rc = 2;
    }
    mp_tplan_mem mem;
    if (!rc && mp_tplan_memory(pl, -1, &mem)) {
        mem_print_error(mp_last_error());
        rc = 2;
    }
    if (!rc) {
        for (int c = 0; c < MP_MC_COUNT; c++) pr->bytes[c] = -1, pr->rows[c] = "";
        pr->bytes[MP_MC_PARAMETER] = (int64_t)mem.weights_bytes;
        pr->rows[MP_MC_PARAMETER] = "weights";
        pr->bytes[MP_MC_GRADIENT] = (int64_t)mem.grads_bytes;
        pr->rows[MP_MC_GRADIENT] = "gradients";
        pr->bytes[MP_MC_OPTIMIZER_STATE] = (int64_t)(mem.optimizer_bytes + mem.master_weights_bytes);
        pr->rows[MP_MC_OPTIMIZER_STATE] = "optimizer states + master weights";
        pr->bytes[MP_MC_ACTIVATION] = (int64_t)mem.activations_bytes;
        pr->rows[MP_MC_ACTIVATION] = "activations (kept for the backward)";
        pr->bytes[MP_MC_TEMPORARY] = (int64_t)mem.temporary_bytes;
        pr->rows[MP_MC_TEMPORARY] = "temporary (the largest operator's)";
        snprintf(pr->source, sizeof pr->source,
                 "plan of %s: %s, %s%s, ZeRO %d, dp %d x tp %d x pp %d (per GPU; the planner's peak %lld bytes)", model,
                 mp_precision_name(po->precision) ? mp_precision_name(po->precision) : "?",
                 mp_optimizer_name(po->optimizer) ? mp_optimizer_name(po->optimizer) : "?",
                 po->checkpointing ? ", checkpointing" : "", po->zero, po->dp, po->tp, po->pp,
                 (long long)mem.peak_bytes);
    }
    mp_tplan_free(pl);
    mp_profile_free(p);
    mp_model_free(m);
    return rc;
}

int mp_memory_main(int argc, char **argv) {
    mp_mem_report_opts ro = {-1, MP_MEMORY_TOP_DEFAULT, false, MP_MEM_CSV_HOLDERS, NULL};
    const char *plan_model = NULL;
    const char *dims[64];
    int ndims = 0, plan_flags = 0;
    mp_tplan_options po;
    mp_tplan_options_default(&po);
    mp_mem_predicted pred;
    int format = 0;
    bool csv_given = false;
    const char *out = NULL;
    const char *files[2] = {NULL, NULL};
    int nfiles = 0;
    bool diff = false;
    int i = 1;
    if (argc > 1 && strcmp(argv[1], "diff") == 0) {
        diff = true;
        i = 2;
    }
    bool ended = false;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        int operand = mp_cli_operand(a, &ended);
        if (operand < 0) continue;
        if (operand) {
            if (nfiles == 2) return mem_usage_error("one snapshot (two for diff), not another:", a);
            files[nfiles++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        char flag[64];
        if (a[0] == '-' && a[1] == '-' && eq && (size_t)(eq - a) < sizeof flag) {
            memcpy(flag, a, (size_t)(eq - a));
            flag[eq - a] = 0;
            val = eq + 1;
            a = flag;
        }
#define NEXT()                                                                   \
    do {                                                                         \
        if (!val) {                                                              \
            if (i + 1 >= argc) return mem_usage_error("missing value for", a);   \
            val = argv[++i];                                                     \
        }                                                                        \
    } while (0)
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            mem_usage(stdout);
            return 0;
        } else if (strcmp(a, "--format") == 0) {
            NEXT();
            if (strcmp(val, "text") == 0) format = 0;
            else if (strcmp(val, "json") == 0) format = 1;
            else if (strcmp(val, "csv") == 0) format = 2;
            else if (strcmp(val, "html") == 0) format = 3;
            else return mem_usage_error("--format takes text, json, csv or html, not", val);
        } else if (strcmp(a, "--csv-table") == 0) {
            NEXT();
            if (strcmp(val, "holders") == 0) ro.csv_table = MP_MEM_CSV_HOLDERS;
            else if (strcmp(val, "sites") == 0) ro.csv_table = MP_MEM_CSV_SITES;
            else if (strcmp(val, "events") == 0) ro.csv_table = MP_MEM_CSV_EVENTS;
            else return mem_usage_error("--csv-table takes holders, sites or events, not", val);
            csv_given = true;
        } else if (strcmp(a, "--device") == 0) {
            NEXT();
            long v;
            if (parse_int(val, 0, 65535, &v)) return mem_usage_error("--device takes a device index, not", val);
            ro.device = (int)v;
        } else if (strcmp(a, "--stack") == 0) {
            NEXT();
            if (strcmp(val, "full") == 0) ro.full_stack = true;
            else if (strcmp(val, "user") == 0) ro.full_stack = false;
            else return mem_usage_error("--stack takes full or user, not", val);
        } else if (strcmp(a, "--top") == 0) {
            NEXT();
            long v;
            if (parse_int(val, -1, 1000000000, &v)) return mem_usage_error("--top takes a count (-1: all), not", val);
            ro.top = (int)v;
        } else if (strcmp(a, "--plan-model") == 0) {
            NEXT();
            plan_model = val;
        } else if (strcmp(a, "--dim") == 0) {
            NEXT();
            if (ndims == 64) return mem_usage_error("at most 64 --dim, not another:", val);
            if (mp_cli_dim("modelprof memory", val, dims, ndims, NULL)) return 1;
            dims[ndims++] = val;
        } else if (a[0] == '-' && a[1] == '-' && mp_tplan_option_kind(a) >= 0) {
            /* any of modelprof plan's own options, parsed by the library's one
             * table (src/plan/options.c) */
            if (mp_tplan_option_kind(a) == 1) NEXT();
            if (mp_tplan_options_set(&po, a, val)) return mp_cli_usage("modelprof memory", "%s", mp_last_error());
            plan_flags++;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            NEXT();
            if (!*val) return mp_cli_usage("modelprof memory", "%s needs a file name", a);
            out = val;
        } else if (a[0] == '-' && a[1]) {
            return mem_usage_error("unknown option", a);
        } else {
            if (nfiles == 2) return mem_usage_error("one snapshot (two for diff), not another:", a);
            files[nfiles++] = a;
        }
#undef NEXT
    }
    if (nfiles != (diff ? 2 : 1)) {
        fprintf(stderr, "modelprof memory: %s\n(see modelprof memory --help)\n",
                diff ? "diff needs two snapshots, A and B" : "needs one snapshot file");
        return 1;
    }
    if (diff && format > 1) return mem_usage_error("memory diff writes text or json, not", format == 2 ? "csv" : "html");
    if (csv_given && format != 2)
        return mem_usage_error("--csv-table chooses the table --format csv writes; add --format csv, or leave out",
                               "--csv-table");
    if (mp_cli_output_clash("modelprof memory", "-o", out, (const char *const[]){files[0], files[1], plan_model},
                            (const char *const[]){"the snapshot", "the snapshot", "the --plan-model model"}, 3))
        return 1;
    if (!plan_model && (ndims || plan_flags))
        return mem_usage_error("--dim and the plan flags go with", "--plan-model");
    if (plan_model) {
        if (diff) return mem_usage_error("--plan-model goes with one snapshot, not", "diff");
        if (mp_tplan_options_check(&po)) return mp_cli_usage("modelprof memory", "%s", mp_last_error());
        int prc = plan_predict(plan_model, dims, ndims, &po, &pred);
        if (prc) return prc;
        ro.pred = &pred;
    }
    mp_snapshot *s[2] = {NULL, NULL};
    mp_mem_opts mo = {ro.device, mp_mem_top_rows(&ro, MP_FORMAT_TEXT), ro.full_stack};
    int rc = 0;
    for (int k = 0; k < nfiles && !rc; k++) {
        mp_status st = mp_snapshot_read(files[k], &s[k]);
        if (!st) st = mp_snapshot_analyze(s[k], diff ? NULL : &mo);
        if (st) {
            mem_print_error(mp_last_error());
            rc = st == MP_ERR_USAGE ? 1 : 2;
        }
    }
    /* diff --device N: a device of A or of B, as one snapshot's --device
     * must be one of its devices (mp_snapshot_analyze) */
    if (!rc && diff && ro.device >= 0) {
        bool found = false;
        char list[2][128] = {"", ""};
        for (int k = 0; k < 2; k++)
            for (int d = 0, l = 0; d < s[k]->ndev; d++) {
                found |= s[k]->dev[d].device == ro.device;
                if (l + 12 < (int)sizeof list[k])
                    l += snprintf(list[k] + l, sizeof list[k] - (size_t)l, "%s%d", d ? ", " : "", s[k]->dev[d].device);
            }
        if (!found) {
            char msg[9000];
            snprintf(msg, sizeof msg, "--device %d: neither snapshot has such a device (%.4000s: %s; %.4000s: %s)",
                     ro.device, files[0], list[0][0] ? list[0] : "none", files[1], list[1][0] ? list[1] : "none");
            mp_cli_error("modelprof memory", NULL, msg);
            rc = 1;
        }
    }
    if (!rc) {
        mem_job j = {s[0], s[1], &ro, format, diff};
        mp_status st = mp_cli_write(out, mem_write, &j);
        if (st) {
            mem_print_error(mp_last_error());
            rc = 2;
        }
    }
    mp_snapshot_free(s[0]);
    mp_snapshot_free(s[1]);
    return rc;
}
