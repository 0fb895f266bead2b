/* `modelprof trace`: analyse torch.profiler (Kineto) traces of GPU runs.
 * One file, or a folder of traces (one per rank) side by side.
 * Exit codes: 0 success, 1 usage error, 2 a trace the tool cannot read. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/trace_cmd.h"
#include "cli/cli.h"
#include "report/report.h"
#include "trace/diff.h"
#include "trace/trace.h"

int mp_trace_main(int argc, char **argv);

static void tr_usage(FILE *f) {
    fputs("usage: modelprof trace [OPTIONS] TRACE.json[.gz] | DIGEST.json | FOLDER\n"
          "       modelprof trace --digest TRACE.json[.gz] [-o FILE]\n"
          "       modelprof trace diff [OPTIONS] A.json[.gz] B.json[.gz]\n"
          "\n"
          "What a training step spent its time on, from torch.profiler's Chrome trace\n"
          "(export_chrome_trace): steps, idle time by cause, collectives, operators\n"
          "(key_averages), kernels, module tree (with_stack/with_modules), memory,\n"
          "efficiency, findings. A folder of traces (one per rank) is one job: its\n"
          "collectives matched across ranks, the critical rank of each step, stragglers\n"
          "and their causes, and the job's time had each run like the median rank.\n"
          "A digest (--digest) is one rank's analysis in a small JSON; a folder of\n"
          "digests gives the same report as the folder of traces (mpirun -n N\n"
          "modelprof-mpi trace FOLDER spreads the ranks over processes).\n"
          "`trace diff A B` compares two runs (B - A): the mean step, and operators (self\n"
          "device time; self CPU time without a device), kernels and modules, per step on\n"
          "average, largest change first (text or json).\n"
          "\n"
          "options:\n"
          "  --format text|json|html|csv  report format (default text; html: one self-contained page)\n"
          "  --csv-table steps|kernels  the table --format csv writes (default steps)\n"
          "  --digest                write the trace's digest (JSON) instead of a report\n"
          "  -o, --output FILE       write the report to FILE (default stdout)\n"
          "  --peak-tflops X         device peak for MFU (default: datasheet table)\n"
          "  --depth N               deepest module depth shown (default: all)\n"
          "  --top K                 rows per table (default 20; -1 all)\n"
          "  --threads N             threads reading and analysing a trace (default: one a core, up to 4; 1: none)\n"
          "  -h, --help              this help\n"
          "  --                      the options end: a file name after it may begin with '-'\n"
          "\n"
          "exit status: 0 ok, 1 usage error, 2 a trace that cannot be read\n",
          f);
}

static int tr_usage_error(const char *what, const char *arg) {
    fprintf(stderr, "modelprof trace: %s '%s'\n(see modelprof trace --help)\n", what, arg);
    return TR_EXIT_USAGE;
}

static void tr_print_error(const char *msg) { mp_cli_error(NULL, NULL, msg); }

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

/* The traces of a folder, by name: *trace.json, *trace.json.gz (what
 * export_chrome_trace and tensorboard_trace_handler are usually given) and
 * *digest.json, or, when there are none, every *.json and *.json.gz. */
static bool is_trace_name(const char *s, bool strict) {
    if (strict)
        return ends_with(s, "trace.json") || ends_with(s, "trace.json.gz") || ends_with(s, "digest.json");
    return ends_with(s, ".json") || ends_with(s, ".json.gz");
}

int mp_trace_cli_files(const char *dir, const char *report, char ***out, int *n) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "modelprof: %s: cannot read the folder: %s\n", dir, strerror(errno));
        return TR_EXIT_INPUT;
    }
    bool strict = false;
    struct dirent *e;
    while ((e = readdir(d)))
        if (is_trace_name(e->d_name, true)) strict = true;
    rewinddir(d);
    int cap = 0;
    int rc = 0;
    while ((e = readdir(d))) {
        if (!is_trace_name(e->d_name, strict)) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(*out, (size_t)cap * sizeof **out);
            if (!nn) {
                rc = TR_EXIT_INPUT;
                break;
            }
            *out = nn;
        }
        size_t dl = strlen(dir);
        while (dl > 1 && dir[dl - 1] == '/') dl--;
        size_t len = dl + strlen(e->d_name) + 2;
        char *p = malloc(len);
        if (!p) {
            rc = TR_EXIT_INPUT;
            break;
        }
        snprintf(p, len, "%.*s/%s", (int)dl, dir, e->d_name);
        (*out)[(*n)++] = p;
    }
    closedir(d);
    if (rc) fputs("modelprof: out of memory\n", stderr);
    if (*n) qsort(*out, (size_t)*n, sizeof **out, name_cmp);
    if (!rc && *n == 0) {
        fprintf(stderr, "modelprof: %s: no *.json or *.json.gz traces in the folder\n", dir);
        rc = TR_EXIT_INPUT;
    }
    /* -o naming one of the traces read: refused before any is read */
    for (int i = 0; !rc && report && i < *n; i++)
        if (mp_cli_output_clash("modelprof trace", "-o", report, (const char *const *)&(*out)[i],
                                (const char *const[]){"a trace of the folder"}, 1))
            rc = TR_EXIT_USAGE;
    return rc;
}

void mp_trace_cli_files_free(char **files, int n) {
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
}

int mp_trace_cli_parse(int argc, char **argv, tr_args *a) {
    memset(a, 0, sizeof *a);
    a->o = MP_TRACE_OPTIONS_DEFAULT;
    a->csv_table = "steps";
    /* `trace diff A B` takes the same options, and two traces */
    a->diff = argc > 1 && strcmp(argv[1], "diff") == 0;
    bool ended = false;
    for (int i = a->diff ? 2 : 1; i < argc; i++) {
        const char *x = argv[i], *v = NULL;
        int operand = mp_cli_operand(x, &ended);
        if (operand < 0) continue;
        if (operand) {
            if (a->diff && a->input) {
                if (a->input2) return tr_usage_error("trace diff compares two traces; a third was given:", x);
                a->input2 = x;
            } else {
                if (a->input) return tr_usage_error("more than one input given:", x);
                a->input = x;
            }
            continue;
        }
        long long n;
        if (strcmp(x, "-h") == 0 || strcmp(x, "--help") == 0) {
            tr_usage(stdout);
            a->help = true;
            return 0;
        } else if (mp_cli_opt(argc, argv, &i, "--format", &v)) {
            if (!v) return tr_usage_error("missing value for", x);
            a->format_arg = v;
            if (strcmp(v, "json") == 0) a->format = 1;
            else if (strcmp(v, "text") == 0) a->format = 0;
            else if (strcmp(v, "html") == 0) a->format = 2;
            else if (strcmp(v, "csv") == 0) a->format = 3;
            else return tr_usage_error("unknown format", v);
        } else if (mp_cli_opt(argc, argv, &i, "--csv-table", &v)) {
            if (!v) return tr_usage_error("missing value for", x);
            a->csv_table = v;
            a->csv_given = true;
            if (strcmp(a->csv_table, "steps") != 0 && strcmp(a->csv_table, "kernels") != 0)
                return tr_usage_error("--csv-table wants steps or kernels, not", a->csv_table);
        } else if (strcmp(x, "--digest") == 0) {
            a->digest = true;
        } else if (mp_cli_opt(argc, argv, &i, "-o", &v) || mp_cli_opt(argc, argv, &i, "--output", &v)) {
            if (!v) return tr_usage_error("missing value for", x);
            if (!*v) return mp_cli_usage("modelprof trace", "-o needs a file name");
            a->out_path = v;
        } else if (mp_cli_opt(argc, argv, &i, "--peak-tflops", &v)) {
            if (!v) return tr_usage_error("missing value for", x);
            double t;
            if (!mp_cli_num(v, &t) || !(t > 0 && t < 1e7))
                return tr_usage_error("--peak-tflops wants a positive number, not", v);
            /* below 1 GFLOP/s no device runs: the MFU would be absurd */
            if (t < 1e-3)
                return mp_cli_usage("modelprof trace", "--peak-tflops '%s': below 0.001 TFLOPS (1 GFLOP/s), no "
                                    "device's peak: the MFU against it would be meaningless", v);
            a->o.peak_tflops = t;
        } else if (mp_cli_opt(argc, argv, &i, "--threads", &v)) {
            if (!v) return tr_usage_error("missing value for", x);
            if (!mp_cli_int(v, 1, 1024, &n)) return tr_usage_error("--threads wants 1 to 1024, not", v);
            a->o.threads = (int)n;
        } else if (mp_cli_opt(argc, argv, &i, "--depth", &v)) {
            if (!v) return tr_usage_error("missing value for", x);
            if (!mp_cli_int(v, -1, 1000000, &n))
                return tr_usage_error("--depth wants a depth from 0 (-1: all), not", v);
            a->o.depth = (int)n;
        } else if (mp_cli_opt(argc, argv, &i, "--top", &v)) {
            if (!v) return tr_usage_error("missing value for", x);
            if (!mp_cli_int(v, -1, 1000000, &n))
                return tr_usage_error("--top wants a count of rows from 0 (-1: all), not", v);
            a->o.top = (int)n;
        } else {
            return tr_usage_error("unknown option", x);
        }
    }
    if (a->csv_given && a->format != 3)
        return tr_usage_error("--csv-table chooses the table --format csv writes; add --format csv, or leave "
                              "out", "--csv-table");
    /* -o naming a trace read would replace it */
    if (mp_cli_output_clash("modelprof trace", "-o", a->out_path, (const char *const[]){a->input, a->input2},
                            (const char *const[]){"the trace", "the trace"}, 2))
        return TR_EXIT_USAGE;
    if (a->diff) {
        if (a->format == 2 || a->format == 3)
            return tr_usage_error("trace diff writes text or json, not", a->format == 2 ? "html" : "csv");
        if (a->digest) return tr_usage_error("trace diff compares two traces; it writes no", "--digest");
        if (!a->input2) {
            fputs("modelprof trace diff: give two traces, A (control) and B (test)\n"
                  "(see modelprof trace --help)\n", stderr);
            return TR_EXIT_USAGE;
        }
        /* one pipe or FIFO as A and B: its bytes can be read once */
        struct stat s1, s2;
        if (stat(a->input, &s1) == 0 && stat(a->input2, &s2) == 0 && !S_ISREG(s1.st_mode) &&
            !S_ISDIR(s1.st_mode) && s1.st_dev == s2.st_dev && s1.st_ino == s2.st_ino) {
            fprintf(stderr, "modelprof trace diff: %s and %s: one pipe, not a regular file: its bytes can be "
                            "read once; save it to a file to compare it with itself\n", a->input, a->input2);
            return TR_EXIT_INPUT;
        }
        return 0;
    }
    if (!a->input) {
        tr_usage(stderr);
        return TR_EXIT_USAGE;
    }
    struct stat sb;
    a->folder = stat(a->input, &sb) == 0 && S_ISDIR(sb.st_mode);
    if (a->digest && a->folder)
        return tr_usage_error("--digest takes one trace, not a folder:", a->input);
    if (a->digest && a->format_arg && a->format != 1) {   /* a digest is JSON, always */
        fprintf(stderr, "modelprof trace: --digest writes the trace's digest, which is JSON; it takes no "
                        "--format %s.\nWrite the digest, then report it: modelprof trace DIGEST.json "
                        "--format %s\n", a->format_arg, a->format_arg);
        return TR_EXIT_USAGE;
    }
    return 0;
}

void mp_trace_cli_error(const char *msg) { tr_print_error(msg); }

typedef struct tr_write {
    mp_trace *const *t;
    int n;
    const mp_tjob *job;
    const tr_args *a;
} tr_write;

static mp_status tr_write_report(void *ud, FILE *f) {
    const tr_write *x = ud;
    const mp_trace *const *t = (const mp_trace *const *)x->t;
    if (x->a->digest) return mp_trace_digest_write(t[0], f);
    switch (x->a->format) {
    case 1: return mp_trace_report_json(t, x->n, x->job, &x->a->o, f);
    case 2: return mp_trace_report_html(t, x->n, x->job, &x->a->o, f);
    case 3: return mp_trace_report_csv(t, x->n, x->a->csv_table, f);
    default: return mp_trace_report_text(t, x->n, x->job, &x->a->o, f);
    }
}

int mp_trace_cli_report(mp_trace **t, int n, const tr_args *a) {
    mp_tjob job;
    memset(&job, 0, sizeof job);
    if (n > 1 && !a->digest && mp_trace_job(t, n, &job) != MP_OK) {
        tr_print_error(mp_last_error());
        return TR_EXIT_INPUT;
    }
    tr_write x = {t, n, n > 1 ? &job : NULL, a};
    /* -o: written next to the file and renamed over it, mode 0666 less the
     * umask (report.c), as every report file */
    mp_status st = mp_cli_write(a->out_path, tr_write_report, &x);
    mp_tjob_free(&job);
    if (st != MP_OK) {
        tr_print_error(mp_last_error());
        return TR_EXIT_INPUT;
    }
    return 0;
}

typedef struct diff_job {
    const mp_trace_diff *d;
    const mp_trace_options *o;
    bool json;
} diff_job;

static mp_status diff_write(void *ud, FILE *f) {
    const diff_job *j = ud;
    return j->json ? mp_trace_diff_report_json(j->d, j->o, f) : mp_trace_diff_report_text(j->d, j->o, f);
}

/* `modelprof trace diff A B`: two runs compared (src/trace/diff.h). */
static int diff_run(const tr_args *a) {
    const char *in[2] = {a->input, a->input2};
    mp_trace t[2];
    memset(t, 0, sizeof t);
    int rc = 0;
    for (int s = 0; s < 2 && !rc; s++)
        if (mp_trace_open(in[s], &a->o, &t[s]) != MP_OK) {
            tr_print_error(mp_last_error());
            rc = TR_EXIT_INPUT;
        }
    mp_trace_diff d;
    if (!rc && mp_trace_diff_make_files(&t[0], in[0], &t[1], in[1], &d) != MP_OK) {
        tr_print_error(mp_last_error());
        rc = TR_EXIT_INPUT;
    } else if (!rc) {
        diff_job j = {&d, &a->o, a->format == 1};
        mp_status st = mp_cli_write(a->out_path, diff_write, &j);
        if (st != MP_OK) {
            tr_print_error(mp_last_error());
            rc = TR_EXIT_INPUT;
        }
        mp_trace_diff_free(&d);
    }
    mp_trace_free(&t[0]);
    mp_trace_free(&t[1]);
    return rc;
}

int mp_trace_main(int argc, char **argv) {
    tr_args a;
    int rc = mp_trace_cli_parse(argc, argv, &a);
    if (rc || a.help) return rc;
    if (a.diff) return diff_run(&a);
    char **files = NULL;
    int n = 0;
    if (a.folder && (rc = mp_trace_cli_files(a.input, a.out_path, &files, &n))) return rc;
    int count = a.folder ? n : 1;
    mp_trace *traces = calloc((size_t)count, sizeof *traces);
    mp_trace **ptr = calloc((size_t)count, sizeof *ptr);
    if (!traces || !ptr) {
        fputs("modelprof: out of memory\n", stderr);
        rc = TR_EXIT_INPUT;
    }
    int opened = 0;
    for (int i = 0; i < count && !rc; i++) {
        const char *path = a.folder ? files[i] : a.input;
        if (mp_trace_open(path, &a.o, &traces[i]) != MP_OK) {
            tr_print_error(mp_last_error());
            rc = TR_EXIT_INPUT;
            break;
        }
        ptr[i] = &traces[i];
        opened++;
    }
    if (!rc) rc = mp_trace_cli_report(ptr, count, &a);
    for (int i = 0; i < opened; i++) mp_trace_free(&traces[i]);
    free(traces);
    free(ptr);
    mp_trace_cli_files_free(files, n);
    return rc;
}
