/* modelprof command line: flags -> library calls -> report writers.
 * Exit codes: 0 success, 1 usage error, 2 model the tool cannot read. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modelprof.h"
#include "cli/cli.h"

enum { EXIT_USAGE = 1, EXIT_MODEL = 2 };

static void usage(FILE *f) {
    fputs("usage: modelprof [OPTIONS] MODEL.onnx\n"
          "\n"
          "Static profile of an ONNX model: parameters, MACs, FLOPs, bytes and memory,\n"
          "per module, per operator type and per node.\n"
          "\n"
          "options:\n"
          "  --dim NAME=VALUE        give the symbolic dim NAME a value (repeatable)\n"
          "  --input NAME=D0xD1x...  set the shape of graph input NAME (repeatable)\n"
          "  --format text|json|html|csv  report format (default text); html is one\n"
          "                          self-contained page, csv one table (below)\n"
          "  --csv-table nodes|modules|ops|module_ops  the table --format csv writes\n"
          "                          (default nodes; module_ops: one row per module and\n"
          "                          operator type)\n"
          "  -o, --output FILE       write the report to FILE (default stdout)\n"
          "  --depth N               deepest module depth shown (default: all)\n"
          "  --top K                 modules per depth in the aggregated block (default 3; -1 all)\n"
          "  --no-detailed           omit the detailed module tree\n"
          "  --no-ops                omit the by-operator table\n"
          "  --by-module-op          add the table by module and operator type (fvcore's\n"
          "                          flop_count_table layout; rows limited by --depth); in\n"
          "                          html a table too, in csv the module_ops table\n"
          "  --op-top K              its operator columns: the K op types with the most\n"
          "                          FLOPs, the rest summed in \"other\" (default 5; -1 all)\n"
          "  --formula               the costs as exact formulas in the dims left free\n"
          "                          (batch, seq, ...): model and modules, every format\n"
          "  -q, --quiet             do not print warnings on stderr\n"
          "  --limit NAME=VALUE      raise or lower a resource limit (repeatable): nodes,\n"
          "                          values, attr-elems, memory (bytes, K/M/G suffix), depth\n"
          "  --max-nodes N           the same as --limit nodes=N (default 10000000)\n"
          "  --max-memory BYTES      the same as --limit memory=BYTES (default 4G)\n"
          "\n"
          "measured run (runs the model here, on the CPU):\n"
          "  --run                   time the model: warm-up, timed runs, all cores\n"
          "  --warmup N              untimed runs first (default 3)\n"
          "  --iters N               timed runs (default 20)\n"
          "  --threads N             threads (default: all cores)\n"
          "  --no-fuse               time every node alone (no fused groups)\n"
          "  --no-node-timing        time whole runs only (no per-node timer)\n"
          "  --chrome-trace FILE     write the timed runs as a Chrome/Perfetto trace (JSON)\n"
          "  --peak-gflops G         the machine's peak (default: measured by a short GEMM)\n"
          "  --seed N                seed of random inputs and absent weights (default 1)\n"
          "  --input-data NAME=FILE.npy  data of graph input NAME (repeatable; else random;\n"
          "                          a bf16 input: fp32 data, or its bits as uint16)\n"
          "  --save-outputs DIR      write every graph output as DIR/NAME.npy (bf16 as fp32:\n"
          "                          numpy has no bfloat16)\n"
          "  --max-memory BYTES      also bounds the run: refused before it allocates\n"
          "\n"
          "ONNX Runtime's profile (times measured by ONNX Runtime, placed on this model):\n"
          "  --ort-profile FILE      read ONNX Runtime's profiling JSON (SessionOptions.\n"
          "                          enableProfiling) of a session of this model: latency,\n"
          "                          FLOPS and % of peak per node, module and op type; nodes\n"
          "                          ONNX Runtime fused get its time split by FLOPs. Dims not\n"
          "                          given are read from it (the shapes its nodes read from\n"
          "                          the inputs). A profile of another model, or at other\n"
          "                          dims, is refused: its nodes' names and shapes must be\n"
          "                          the model's (docs/JSON.md, \"--ort-profile\"). With it:\n"
          "                          --warmup N (runs to leave out; default the first of\n"
          "                          several), --peak-gflops G (default measured here)\n"
          "  -h, --help              this help\n"
          "  --version               print the version\n"
          "  --                      the options end: a file name after it may begin with '-'\n"
          "\n"
          "exit status: 0 ok, 1 usage error, 2 the model cannot be read or profiled\n",
          f);
}

static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("modelprof: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n(see modelprof --help)\n", stderr);
    return EXIT_USAGE;
}

/* One line on stderr: control bytes of names in the message are escaped. */
static void print_error(const char *prefix, const char *msg) { mp_cli_error(NULL, prefix, msg); }

/* A size in bytes: digits with an optional K, M, G or T (binary) suffix. */
static int parse_size(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno || v < 0) return 0;
    int shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: break;
    }
    if (shift && (*end == 'i' || *end == 'I')) end++;
    if (shift && (*end == 'b' || *end == 'B')) end++;
    if (*end || v > (INT64_MAX >> shift)) return 0;
    *out = (int64_t)v << shift;
    return 1;
}

static int parse_int(const char *s, int64_t *out) {
    long long v;
    if (!mp_cli_int(s, 0, INT64_MAX, &v)) return 0;
    *out = v;
    return 1;
}


/* ---- the measured run's flags (--run and the rest) ---- */
typedef struct run_args {
    int run;
    mp_run_options o;
    const char **data_args; /* NAME=FILE.npy, argc entries */
    int n_data;
    const char *save_dir;
    const char *chrome_trace; /* --chrome-trace FILE */
    const char *run_only;     /* the first flag given that only a measured run uses */
    const char *ort;          /* --ort-profile FILE */
    const char *run_or_ort;   /* the first flag given that a measured run or --ort-profile uses */
    bool warmup_given;
    const char **reads, **reads_what; /* the files the command reads, and which each is */
    int n_reads;
    /* the .npy files, read before profiling (their shapes set the inputs') */
    struct run_data {
        char *name;
        int dtype, rank;
        int64_t dims[64];
        void *data;
        size_t bytes;
    } *data;
} run_args;

/* 0: not a run flag; 1: taken; -1: usage error (said). */
static int run_parse(int argc, char **argv, int *i, run_args *ra, int64_t *max_memory) {
    const char *a = argv[*i];
    static const char *const with_value[] = {"--warmup", "--iters", "--threads", "--peak-gflops",
                                             "--seed", "--input-data", "--save-outputs",
                                             "--chrome-trace"};
    if (strcmp(a, "--run") == 0) {
        ra->run = 1;
        return 1;
    }
    if (strcmp(a, "--no-fuse") == 0) {
        ra->o.fuse = 0;
        if (!ra->run_only) ra->run_only = a;
        return 1;
    }
    if (strcmp(a, "--no-node-timing") == 0) {
        ra->o.node_timing = 0;
        if (!ra->run_only) ra->run_only = a;
        return 1;
    }
    const char *flag = NULL, *val = NULL;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) {
        size_t fl = strlen(with_value[k]);
        if (strcmp(a, with_value[k]) == 0) {
            flag = with_value[k];
            val = *i + 1 < argc ? argv[++*i] : NULL;
        } else if (strncmp(a, with_value[k], fl) == 0 && a[fl] == '=') {
            flag = with_value[k];
            val = a + fl + 1;
        }
    }
    if (!flag) return 0;
    if (!val) return usage_error("%s needs a value", flag), -1;
    bool both = strcmp(flag, "--warmup") == 0 || strcmp(flag, "--peak-gflops") == 0;
    if (both && !ra->run_or_ort) ra->run_or_ort = flag;
    if (!both && !ra->run_only) ra->run_only = flag;
    int64_t v = 0;
    if (strcmp(flag, "--input-data") == 0) {
        const char *eq = strchr(val, '=');
        if (!eq || eq == val || !eq[1])
            return usage_error("--input-data '%s': expected NAME=FILE.npy", val), -1;
        ra->data_args[ra->n_data++] = val;
    } else if (strcmp(flag, "--chrome-trace") == 0) {
        if (!*val) return usage_error("--chrome-trace needs a file name", ""), -1;
        ra->chrome_trace = val;
        ra->o.keep_timestamps = 1;
    } else if (strcmp(flag, "--save-outputs") == 0) {
        if (!*val) return usage_error("--save-outputs needs a folder", ""), -1;
        ra->save_dir = val;
    } else if (strcmp(flag, "--peak-gflops") == 0) {
        double g;
        if (!mp_cli_num(val, &g) || !(g > 0) || g > 1e9)
            return usage_error("--peak-gflops '%s': expected a positive number of GFLOP/s", val), -1;
        /* below 1 GFLOP/s no machine runs: the % of peak would be absurd */
        if (g < 1)
            return usage_error("--peak-gflops '%s': below 1 GFLOP/s, no machine's peak: the %% of peak against it "
                               "would be meaningless", val), -1;
        ra->o.peak_gflops = g;
    } else if (!parse_int(val, &v) || v > 1000000000) {
        return usage_error("%s: expected a non-negative integer", a), -1;
    } else if (strcmp(flag, "--warmup") == 0) {
        ra->o.warmup = (int)v;
        ra->warmup_given = true;
    } else if (strcmp(flag, "--iters") == 0) {
        if (v < 1) return usage_error("--iters '%s': at least 1", val), -1;
        ra->o.iters = (int)v;
    } else if (strcmp(flag, "--threads") == 0) {
        if (v < 1)
            return usage_error("--threads '%s': at least 1 (leave --threads out to use every core)", val), -1;
        if (v > 4096) return usage_error("--threads '%s': at most 4096", val), -1;
        ra->o.threads = (int)v;
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        if (cores > 0 && v > cores)
            fprintf(stderr,
                    "modelprof: warning: --threads %lld is more than the %ld cores of this machine: "
                    "the extra threads take turns on the cores and every parallel operator waits "
                    "for the slowest, so the run is slower, not faster (--threads %ld or fewer)\n",
                    (long long)v, cores, cores);
    } else {
        ra->o.seed = (uint64_t)v;
    }
    (void)max_memory;
    return 1;
}

/* Read the --input-data files and give each input the file's shape. */
static int run_read_inputs(run_args *ra, mp_model *m) {
    if (!ra->n_data) return 0;
    ra->data = calloc((size_t)ra->n_data, sizeof *ra->data);
    if (!ra->data) return EXIT_MODEL;
    for (int i = 0; i < ra->n_data; i++) {
        struct run_data *d = &ra->data[i];
        const char *arg = ra->data_args[i], *eq = strchr(arg, '=');
        size_t nl = (size_t)(eq - arg);
        d->name = malloc(nl + 1);
        if (!d->name) return EXIT_MODEL;
        memcpy(d->name, arg, nl);
        d->name[nl] = 0;
        if (mp_npy_read(eq + 1, &d->dtype, &d->rank, d->dims, &d->data, &d->bytes)) {
            print_error("--input-data: ", mp_last_error());
            return EXIT_MODEL;
        }
        if (mp_model_set_input_shape(m, d->name, d->dims, d->rank)) {
            char pre[300];
            snprintf(pre, sizeof pre, "--input-data %.256s: ", d->name);
            print_error(pre, mp_last_error());
            return EXIT_USAGE;
        }
    }
    return 0;
}

static void run_args_free(run_args *ra) {
    for (int i = 0; ra->data && i < ra->n_data; i++) {
        free(ra->data[i].name);
        free(ra->data[i].data);
    }
    free(ra->data);
    free(ra->reads);
    free(ra->reads_what);
}

/* A file name from an output name: path separators and control bytes
 * become '_'. */
static void run_out_path(char *buf, size_t cap, const char *dir, const char *name) {
    int n = snprintf(buf, cap, "%s/", dir);
    size_t k = n > 0 ? (size_t)n : 0;
    size_t first = k;
    for (const char *c = name; *c && k + 5 < cap; c++) {
        bool bad = *c == '/' || *c == '\\' || (unsigned char)*c < 0x20 || (k == first && *c == '.');
        buf[k] = bad ? '_' : *c;
        k++;
    }
    snprintf(buf + k, cap - k, ".npy");
}

/* Plan, feed, time, save: fills p's measured fields. */
static int run_measure(run_args *ra, mp_profile *p) {
    mp_exec *pl = NULL;
    if (mp_exec_create(p, &ra->o, &pl)) {
        print_error("--run: ", mp_last_error());
        return EXIT_MODEL;
    }
    int rc = 0;
    for (int i = 0; i < ra->n_data && !rc; i++) {
        struct run_data *d = &ra->data[i];
        mp_status st = mp_exec_set_input(pl, d->name, d->dtype, d->rank, d->dims, d->data, d->bytes);
        if (st) {
            print_error("--input-data: ", mp_last_error());
            rc = st == MP_ERR_USAGE ? EXIT_USAGE : EXIT_MODEL;
        }
    }
    if (!rc && mp_profile_run(pl, p)) {
        print_error("--run: ", mp_last_error());
        rc = EXIT_MODEL;
    }
    if (!rc && ra->chrome_trace && mp_report_chrome_trace(p, ra->chrome_trace)) {
        print_error("--chrome-trace: ", mp_last_error());
        rc = EXIT_MODEL;
    }
    if (!rc && ra->save_dir) {
        struct stat sb;
        if (stat(ra->save_dir, &sb) != 0 && mkdir(ra->save_dir, 0777) != 0 && errno != EEXIST) {
            char msg[4200];
            snprintf(msg, sizeof msg, "%.4096s: cannot create the folder", ra->save_dir);
            print_error("--save-outputs: ", msg);
            rc = EXIT_MODEL;
        }
        for (int i = 0; !rc && i < mp_exec_output_count(pl); i++) {
            const char *name;
            int dt, rank;
            const int64_t *dims;
            const void *data;
            char path[4400];
            if (mp_exec_output(pl, i, &name, &dt, &rank, &dims, &data)) {
                print_error("--save-outputs: ", mp_last_error());
                rc = EXIT_MODEL;
                break;
            }
            run_out_path(path, sizeof path, ra->save_dir, name);
            if (mp_cli_output_clash(NULL, "--save-outputs", path, ra->reads, ra->reads_what, ra->n_reads)) {
                rc = EXIT_USAGE;
                break;
            }
            if (mp_npy_write(path, dt, rank, dims, data)) {
                print_error("--save-outputs: ", mp_last_error());
                rc = EXIT_MODEL;
            }
        }
    }
    mp_exec_free(pl);
    return rc;
}

typedef struct {
    const char *name;
    int64_t dims[64];
    int rank;
} input_spec;

typedef struct report_job {
    const mp_profile *p;
    const mp_report_options *o;
} report_job;

static mp_status report_put(void *ud, FILE *f) {
    const report_job *j = ud;
    return mp_report_write(j->p, j->o, f);
}

/* The command; dim_args and inputs (argc entries each) are the caller's,
 * freed by it whatever path this takes. */
static int run(int argc, char **argv, const char **dim_args, input_spec *inputs,
               int *pn_inputs, run_args *ra) {
    const char *model_path = NULL, *out_path = NULL;
    mp_report_options ro;
    mp_report_options_default(&ro);
    mp_limits lim;
    mp_limits_default(&lim);
    int quiet = 0, run_flag = 0, formula = 0;
    const char *op_top_arg = NULL, *csv_table_arg = NULL; /* given: checked against --by-module-op */
    /* dims and inputs are applied after loading */
    int n_dims = 0;
    bool ended = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        int operand = mp_cli_operand(a, &ended);
        if (operand < 0) continue;
        if (operand) {
            if (model_path) return usage_error("more than one model given ('%s')", a);
            model_path = a;
            continue;
        }
#define TAKES_VALUE(flag) mp_cli_opt(argc, argv, &i, flag, &val)
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("modelprof %s\n", MP_VERSION_STRING);
            return 0;
        } else if (TAKES_VALUE("--dim")) {
            if (mp_cli_dim(NULL, val, dim_args, n_dims, NULL)) return EXIT_USAGE;
            dim_args[n_dims++] = val;
        } else if (TAKES_VALUE("--input")) {
            input_spec *s = &inputs[*pn_inputs];
            char *name = NULL;
            int irc = mp_cli_input(NULL, val, &name, s->dims, &s->rank);
            if (irc) return irc;
            s->name = name;
            (*pn_inputs)++;
        } else if (TAKES_VALUE("--format")) {
            if (!val) return usage_error("--format needs text, json, html or csv", "");
            if (strcmp(val, "text") == 0)
                ro.format = MP_FORMAT_TEXT;
            else if (strcmp(val, "json") == 0)
                ro.format = MP_FORMAT_JSON;
            else if (strcmp(val, "html") == 0)
                ro.format = MP_FORMAT_HTML;
            else if (strcmp(val, "csv") == 0)
                ro.format = MP_FORMAT_CSV;
            else
                return usage_error("--format '%s': expected text, json, html or csv", val);
        } else if (TAKES_VALUE("--csv-table")) {
            if (!val) return usage_error("--csv-table needs nodes, modules, ops or module_ops", "");
            csv_table_arg = val;
            if (strcmp(val, "nodes") == 0)
                ro.csv_table = MP_CSV_NODES;
            else if (strcmp(val, "modules") == 0)
                ro.csv_table = MP_CSV_MODULES;
            else if (strcmp(val, "ops") == 0)
                ro.csv_table = MP_CSV_OPS;
            else if (strcmp(val, "module_ops") == 0)
                ro.csv_table = MP_CSV_MODULE_OPS;
            else
                return usage_error("--csv-table '%s': expected nodes, modules, ops or module_ops", val);
        } else if (TAKES_VALUE("-o") || TAKES_VALUE("--output")) {
            if (!val || !*val) return usage_error("-o needs a file name", "");
            out_path = val;
        } else if (TAKES_VALUE("--depth")) {
            int64_t v;
            if (!val || !parse_int(val, &v) || v > 1000000)
                return usage_error("--depth '%s': expected a non-negative integer", val ? val : "");
            ro.depth = (int)v;
        } else if (TAKES_VALUE("--top")) {
            int64_t v;
            if (val && strcmp(val, "-1") == 0)
                v = -1; /* all */
            else if (!val || !parse_int(val, &v) || v > 1000000)
                return usage_error("--top '%s': expected a non-negative integer, or -1 for all",
                                   val ? val : "");
            ro.top = (int)v;
        } else if (TAKES_VALUE("--limit") || TAKES_VALUE("--max-nodes") ||
                   TAKES_VALUE("--max-memory")) {
            /* the flag as given ("--max-nodes" of "--max-nodes=5") names it in messages */
            char flag[16], name[256];
            snprintf(flag, sizeof flag, "%s", strncmp(a, "--max-nodes", 11) == 0    ? "--max-nodes"
                                              : strncmp(a, "--max-memory", 12) == 0 ? "--max-memory"
                                                                                     : "--limit");
            const char *num = val;
            if (!val) return usage_error("%s needs a value", flag);
            if (flag[2] == 'm') {
                snprintf(name, sizeof name, "%s", flag[6] == 'n' ? "nodes" : "memory");
            } else {
                const char *eq = strchr(val, '=');
                if (!eq || eq == val)
                    return usage_error("--limit '%s': expected NAME=VALUE (e.g. nodes=20000000)", val);
                snprintf(name, sizeof name, "%.*s", (int)(eq - val < 255 ? eq - val : 255), val);
                num = eq + 1;
            }
            int64_t v;
            bool memory = strcmp(name, "memory") == 0;
            if (!parse_size(num, &v))
                return usage_error("%s '%s': expected a non-negative integer%s", flag, val,
                                   memory ? " of bytes (it may end in K, M, G or T)" : " (it may end in K, M, G or T)");
            if (mp_limits_set(&lim, name, v)) return usage_error("%s '%s': %s", flag, val, mp_last_error());
            if (memory) ra->o.max_memory = v;
        } else if (TAKES_VALUE("--ort-profile")) {
            if (!val || !*val) return usage_error("--ort-profile needs a file (ONNX Runtime's profile JSON)", "");
            ra->ort = val;
        } else if (strcmp(a, "--no-detailed") == 0) {
            ro.detailed = 0;
        } else if (strcmp(a, "--no-ops") == 0) {
            ro.show_ops = 0;
        } else if (strcmp(a, "--by-module-op") == 0) {
            ro.by_module_op = 1;
        } else if (TAKES_VALUE("--op-top")) {
            int64_t v;
            if (val && strcmp(val, "-1") == 0)
                v = -1; /* all */
            else if (!val || !parse_int(val, &v) || v > 1000000)
                return usage_error("--op-top '%s': expected a non-negative integer, or -1 for all",
                                   val ? val : "");
            ro.op_top = (int)v;
            op_top_arg = val;
        } else if (strcmp(a, "--formula") == 0) {
            formula = 1;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if ((run_flag = run_parse(argc, argv, &i, ra, NULL)) != 0) {
            if (run_flag < 0) return EXIT_USAGE;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option '%s'", a);
        } else {
            if (model_path) return usage_error("more than one model given ('%s')", a);
            model_path = a;
        }
#undef TAKES_VALUE
    }
    if (ra->run && ra->ort)
        return usage_error("--ort-profile %s with --run: the times come from one or the other", ra->ort);
    if (ra->run_only && ra->ort)
        return usage_error("%s: only a measured run uses it; --ort-profile reads the times ONNX Runtime "
                           "measured (leave the flag out)", ra->run_only);
    if ((ra->run_only || ra->run_or_ort) && !ra->run && !ra->ort)
        return usage_error("%s: only a measured run (or --ort-profile) uses it, and --run is not given "
                           "(add --run, or leave the flag out)", ra->run_only ? ra->run_only : ra->run_or_ort);
    /* --op-top shapes the table of --by-module-op, in the text and the HTML;
     * CSV's module_ops table is that split, one row per module and op type */
    if (op_top_arg && !ro.by_module_op)
        return usage_error("--op-top %s: it sets the op columns of the --by-module-op table (add "
                           "--by-module-op, or leave the flag out)", op_top_arg);
    if (csv_table_arg && ro.format != MP_FORMAT_CSV)
        return usage_error("--csv-table %s: it chooses the table --format csv writes (add --format csv, or "
                           "leave the flag out)", csv_table_arg);
    if (ro.by_module_op && ro.format == MP_FORMAT_CSV) {
        if (csv_table_arg && ro.csv_table != MP_CSV_MODULE_OPS)
            return usage_error("--by-module-op with --csv-table %s: the CSV of the split by module and "
                               "operator type is --csv-table module_ops", csv_table_arg);
        if (op_top_arg)
            return usage_error("--op-top %s with --format csv: the module_ops table has a row for every "
                               "op type of each module (leave the flag out)", op_top_arg);
        ro.csv_table = MP_CSV_MODULE_OPS;
    }
    if (ra->chrome_trace && (!ra->run || !ra->o.node_timing))
        return usage_error("--chrome-trace %s: needs --run with node timing", ra->chrome_trace);
    if (!model_path) {
        usage(stderr);
        return EXIT_USAGE;
    }
    /* an output naming an input (or the other output) would replace it:
     * every file read, for -o, --chrome-trace and --save-outputs' files */
    ra->reads = calloc((size_t)ra->n_data + 2, sizeof *ra->reads);
    ra->reads_what = calloc((size_t)ra->n_data + 2, sizeof *ra->reads_what);
    if (!ra->reads || !ra->reads_what) return EXIT_MODEL;
    ra->reads[0] = model_path, ra->reads_what[0] = "the model";
    ra->reads[1] = ra->ort, ra->reads_what[1] = "the --ort-profile file";
    for (int k = 0; k < ra->n_data; k++)
        ra->reads[2 + k] = strchr(ra->data_args[k], '=') + 1, ra->reads_what[2 + k] = "the --input-data file";
    ra->n_reads = ra->n_data + 2;
    if (mp_cli_output_clash(NULL, "-o", out_path, ra->reads, ra->reads_what, ra->n_reads) ||
        mp_cli_output_clash(NULL, "--chrome-trace", ra->chrome_trace, ra->reads, ra->reads_what, ra->n_reads))
        return EXIT_USAGE;
    if (ra->chrome_trace && out_path &&
        (strcmp(ra->chrome_trace, out_path) == 0 || mp_cli_same_file(ra->chrome_trace, out_path)))
        return usage_error("--chrome-trace %s and -o name one file: one would replace the other", out_path);

    mp_model *m = NULL;
    mp_status st = mp_model_load_ex(model_path, &lim, &m);
    if (st) {
        print_error(NULL, mp_last_error());
        return st == MP_ERR_USAGE ? EXIT_USAGE : EXIT_MODEL;
    }
    int rc = 0;
    for (int i = 0; i < n_dims && !rc; i++) {
        const char *eq = strchr(dim_args[i], '=');
        char name[256];
        size_t nl = (size_t)(eq - dim_args[i]);
        if (nl >= sizeof name) nl = sizeof name - 1;
        memcpy(name, dim_args[i], nl);
        name[nl] = 0;
        int64_t v = 0;
        parse_int(eq + 1, &v);
        if (mp_model_set_dim(m, name, v)) {
            char pre[300];
            snprintf(pre, sizeof pre, "--dim %.256s: ", dim_args[i]);
            print_error(pre, mp_last_error());
            rc = EXIT_USAGE;
        }
    }
    for (int i = 0; i < *pn_inputs && !rc; i++) {
        if (mp_model_set_input_shape(m, inputs[i].name, inputs[i].dims, inputs[i].rank)) {
            char pre[300];
            snprintf(pre, sizeof pre, "--input %.256s: ", inputs[i].name);
            print_error(pre, mp_last_error());
            rc = EXIT_USAGE;
        }
    }
    if (!rc) rc = run_read_inputs(ra, m);
    if (!rc && ra->ort && (st = mp_ort_dims(m, ra->ort, NULL))) { /* the dims it ran with */
        print_error("--ort-profile: ", mp_last_error());
        rc = st == MP_ERR_USAGE ? EXIT_USAGE : EXIT_MODEL;
    }
    mp_profile *p = NULL;
    if (!rc) {
        st = mp_profile_static(m, &p);
        if (st) {
            /* name the file once: loader messages start with it already */
            const char *msg = mp_last_error();
            size_t pl = strlen(model_path);
            char pre[4200];
            pre[0] = 0;
            if (strncmp(msg, model_path, pl) != 0 || msg[pl] != ':')
                snprintf(pre, sizeof pre, "%.4096s: ", model_path);
            print_error(pre, msg);
            rc = EXIT_MODEL;
        }
    }
    if (!rc && formula && (st = mp_profile_formulas(p))) {
        print_error(NULL, mp_last_error());
        rc = EXIT_MODEL;
    }
    if (!rc && ra->run) rc = run_measure(ra, p);
    if (!rc && ra->ort) {
        mp_ort_options oo;
        mp_ort_options_default(&oo);
        if (ra->warmup_given) oo.warmup = ra->o.warmup;
        oo.peak_gflops = ra->o.peak_gflops;
        oo.measure_peak = mp_peak_flops;
        st = mp_profile_ort(p, ra->ort, &oo);
        if (st) {
            print_error("--ort-profile: ", mp_last_error());
            rc = st == MP_ERR_USAGE ? EXIT_USAGE : EXIT_MODEL;
        }
    }
    if (!rc) {
        report_job j = {p, &ro};
        st = mp_cli_write(out_path, report_put, &j);
        if (st) {
            const char *msg = mp_last_error()[0] ? mp_last_error() : "cannot write the report";
            char pre[4200];
            pre[0] = 0;
            if (out_path && !strstr(msg, out_path)) snprintf(pre, sizeof pre, "%.4096s: ", out_path);
            print_error(pre, msg);
            rc = EXIT_MODEL;
        }
    }
    /* warnings last, and only on success: a failure prints one line */
    if (!rc && !quiet)
        for (int i = 0; i < mp_model_warning_count(m); i++)
            print_error("warning: ", mp_model_warning(m, i));
    mp_profile_free(p);
    mp_model_free(m);
    return rc;
}

int mp_trace_main(int argc, char **argv); /* trace_cmd.c */
int mp_plan_main(int argc, char **argv);  /* plan_cmd.c */
int mp_memory_main(int argc, char **argv); /* memory_cmd.c */

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "trace") == 0) return mp_trace_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "plan") == 0) return mp_plan_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "memory") == 0) return mp_memory_main(argc - 1, argv + 1);
    const char **dim_args = calloc((size_t)argc, sizeof *dim_args);
    input_spec *inputs = calloc((size_t)argc, sizeof *inputs);
    run_args ra;
    memset(&ra, 0, sizeof ra);
    mp_run_options_default(&ra.o);
    ra.data_args = calloc((size_t)argc, sizeof *ra.data_args);
    int n_inputs = 0, rc;
    if (!dim_args || !inputs || !ra.data_args) {
        fputs("modelprof: out of memory\n", stderr);
        rc = EXIT_MODEL;
    } else {
        rc = run(argc, argv, dim_args, inputs, &n_inputs, &ra);
    }
    run_args_free(&ra);
    free(ra.data_args);
    for (int i = 0; inputs && i < n_inputs; i++) free((void *)inputs[i].name);
    free(inputs);
    free(dim_args);
    return rc;
}
