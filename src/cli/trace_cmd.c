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

#include "report/report.h"
#include "trace/diff.h"
#include "trace/trace.h"

int mp_trace_main(int argc, char **argv);

enum { TR_EXIT_USAGE = 1, TR_EXIT_INPUT = 2 };

static void tr_usage(FILE *f) {
    fputs("usage: modelprof trace [OPTIONS] TRACE.json[.gz] | FOLDER\n"
          "       modelprof trace diff [OPTIONS] A.json[.gz] B.json[.gz]\n"
          "\n"
          "What a training step spent its time on, from torch.profiler's Chrome trace\n"
          "(export_chrome_trace): steps, idle time by cause, operators (key_averages),\n"
          "kernels, module tree (with_stack/with_modules), memory, efficiency, findings.\n"
          "A folder of traces (one per rank) is analysed side by side.\n"
          "`trace diff A B` compares two runs (B - A): the mean step, and operators (self\n"
          "device time; self CPU time without a device), kernels and modules, per step on\n"
          "average, largest change first (text or json).\n"
          "\n"
          "options:\n"
          "  --format text|json|html|csv  report format (default text; html: one self-contained page)\n"
          "  --csv-table steps|kernels  the table --format csv writes (default steps)\n"
          "  -o, --output FILE       write the report to FILE (default stdout)\n"
          "  --peak-tflops X         device peak for MFU (default: datasheet table)\n"
          "  --depth N               deepest module depth shown (default: all)\n"
          "  --top K                 rows per table (default 20; -1 all)\n"
          "  -h, --help              this help\n"
          "\n"
          "exit status: 0 ok, 1 usage error, 2 a trace that cannot be read\n",
          f);
}

static int tr_usage_error(const char *what, const char *arg) {
    fprintf(stderr, "modelprof trace: %s '%s'\n(see modelprof trace --help)\n", what, arg);
    return TR_EXIT_USAGE;
}

static void tr_print_error(const char *msg) {
    fputs("modelprof: ", stderr);
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) fprintf(stderr, "\\x%02x", *p);
        else fputc(*p, stderr);
    }
    fputc('\n', stderr);
}

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

/* The traces of a folder, by name: *trace.json and *trace.json.gz (what
 * export_chrome_trace and tensorboard_trace_handler are usually given),
 * or, when there are none, every *.json and *.json.gz. */
static bool is_trace_name(const char *s, bool strict) {
    if (strict) return ends_with(s, "trace.json") || ends_with(s, "trace.json.gz");
    return ends_with(s, ".json") || ends_with(s, ".json.gz");
}

static int list_folder(const char *dir, char ***out, int *n) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    bool strict = false;
    struct dirent *e;
    while ((e = readdir(d)))
        if (is_trace_name(e->d_name, true)) strict = true;
    rewinddir(d);
    int cap = 0;
    *n = 0;
    *out = NULL;
    while ((e = readdir(d))) {
        if (!is_trace_name(e->d_name, strict)) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(*out, (size_t)cap * sizeof **out);
            if (!nn) break;
            *out = nn;
        }
        size_t dl = strlen(dir);
        while (dl > 1 && dir[dl - 1] == '/') dl--;
        size_t len = dl + strlen(e->d_name) + 2;
        char *p = malloc(len);
        if (!p) break;
        snprintf(p, len, "%.*s/%s", (int)dl, dir, e->d_name);
        (*out)[(*n)++] = p;
    }
    closedir(d);
    if (*n) qsort(*out, (size_t)*n, sizeof **out, name_cmp);
    return 0;
}

typedef struct diff_job {
    const mp_trace_diff *d;
    const mp_trace_options *o;
    bool json;
} diff_job;

static mp_status diff_write(void *ud, FILE *f) {
    const diff_job *j = ud;
    mp_status st = j->json ? mp_trace_diff_report_json(j->d, j->o, f)
                           : mp_trace_diff_report_text(j->d, j->o, f);
    if (st == MP_OK && (fflush(f) != 0 || ferror(f)))
        st = mp_error(MP_ERR_IO, "cannot write the report: %s", strerror(errno));
    return st;
}

/* `modelprof trace diff A B`: two runs compared (src/trace/diff.h). */
static int diff_run(const char *const in[2], const mp_trace_options *o, bool json, const char *out_path) {
    mp_trace t[2];
    memset(t, 0, sizeof t);
    int rc = 0;
    for (int s = 0; s < 2 && !rc; s++)
        if (mp_trace_open(in[s], o, &t[s]) != MP_OK) {
            tr_print_error(mp_last_error());
            rc = TR_EXIT_INPUT;
        }
    mp_trace_diff d;
    if (!rc && mp_trace_diff_make(&t[0], &t[1], &d) != MP_OK) {
        tr_print_error(mp_last_error());
        rc = TR_EXIT_INPUT;
    } else if (!rc) {
        diff_job j = {&d, o, json};
        mp_status st = out_path ? mp_write_file_atomic(out_path, diff_write, &j) : diff_write(&j, stdout);
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
    /* `trace diff A B` takes the same options, and two traces */
    bool diff = argc > 1 && strcmp(argv[1], "diff") == 0;
    mp_trace_options o = {0, -1, 20};
    int format = 0; /* 0 text, 1 json, 2 html, 3 csv */
    const char *csv_table = "steps";
    const char *out_path = NULL, *input = NULL, *in[2] = {NULL, NULL};
    for (int i = diff ? 2 : 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            tr_usage(stdout);
            return 0;
        } else if (strcmp(a, "--format") == 0) {
            if (!has_val) return tr_usage_error("missing value for", a);
            const char *v = argv[++i];
            if (strcmp(v, "json") == 0) format = 1;
            else if (strcmp(v, "text") == 0) format = 0;
            else if (strcmp(v, "html") == 0) format = 2;
            else if (strcmp(v, "csv") == 0) format = 3;
            else return tr_usage_error("unknown format", v);
        } else if (strcmp(a, "--csv-table") == 0) {
            if (!has_val) return tr_usage_error("missing value for", a);
            csv_table = argv[++i];
            if (strcmp(csv_table, "steps") != 0 && strcmp(csv_table, "kernels") != 0)
                return tr_usage_error("--csv-table wants steps or kernels, not", csv_table);
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (!has_val) return tr_usage_error("missing value for", a);
            out_path = argv[++i];
        } else if (strcmp(a, "--peak-tflops") == 0) {
            if (!has_val) return tr_usage_error("missing value for", a);
            char *end;
            double v = strtod(argv[++i], &end);
            if (*end || !(v > 0 && v < 1e7)) return tr_usage_error("--peak-tflops wants a positive number, not", argv[i]);
            o.peak_tflops = v;
        } else if (strcmp(a, "--depth") == 0 || strcmp(a, "--top") == 0) {
            if (!has_val) return tr_usage_error("missing value for", a);
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < -1 || v > 1000000) return tr_usage_error("bad number", argv[i]);
            if (a[2] == 'd') o.depth = (int)v;
            else o.top = (int)v;
        } else if (a[0] == '-' && a[1]) {
            return tr_usage_error("unknown option", a);
        } else if (diff) {
            if (in[1]) return tr_usage_error("trace diff compares two traces; a third was given:", a);
            in[in[0] ? 1 : 0] = a;
        } else {
            if (input) return tr_usage_error("more than one input given:", a);
            input = a;
        }
    }
    if (diff) {
        if (format == 2 || format == 3) return tr_usage_error("trace diff writes text or json, not", format == 2 ? "html" : "csv");
        if (!in[1]) {
            fputs("modelprof trace diff: give two traces, A (control) and B (test)\n"
                  "(see modelprof trace --help)\n", stderr);
            return TR_EXIT_USAGE;
        }
        return diff_run(in, &o, format == 1, out_path);
    }
    if (!input) {
        tr_usage(stderr);
        return TR_EXIT_USAGE;
    }
    char **files = NULL;
    int n = 0;
    struct stat sb;
    bool folder = stat(input, &sb) == 0 && S_ISDIR(sb.st_mode);
    if (folder) {
        if (list_folder(input, &files, &n) != 0) {
            fprintf(stderr, "modelprof: %s: cannot read the folder: %s\n", input, strerror(errno));
            return TR_EXIT_INPUT;
        }
        if (n == 0) {
            fprintf(stderr, "modelprof: %s: no *.json or *.json.gz traces in the folder\n", input);
            free(files);
            return TR_EXIT_INPUT;
        }
    }
    int count = folder ? n : 1;
    mp_trace *traces = calloc((size_t)count, sizeof *traces);
    const mp_trace **ptr = calloc((size_t)count, sizeof *ptr);
    int rc = 0;
    if (!traces || !ptr) {
        fputs("modelprof: out of memory\n", stderr);
        rc = TR_EXIT_INPUT;
    }
    int opened = 0;
    for (int i = 0; i < count && !rc; i++) {
        const char *path = folder ? files[i] : input;
        if (mp_trace_open(path, &o, &traces[i]) != MP_OK) {
            tr_print_error(mp_last_error());
            rc = TR_EXIT_INPUT;
            break;
        }
        ptr[i] = &traces[i];
        opened++;
    }
    if (!rc) {
        FILE *f = stdout;
        char *tmp = NULL;
        if (out_path) {
            size_t len = strlen(out_path) + 16;
            tmp = malloc(len);
            int fd = -1;
            if (tmp) {
                snprintf(tmp, len, "%s.tmp-XXXXXX", out_path);
                fd = mkstemp(tmp);
            }
            f = fd >= 0 ? fdopen(fd, "w") : NULL;
            if (!f) {
                fprintf(stderr, "modelprof: %s: cannot write: %s\n", out_path, strerror(errno));
                if (fd >= 0) {
                    close(fd);
                    unlink(tmp);
                }
                free(tmp);
                rc = TR_EXIT_INPUT;
            }
        }
        if (!rc) {
            mp_status st = format == 1   ? mp_trace_report_json(ptr, count, &o, f)
                           : format == 2 ? mp_trace_report_html(ptr, count, &o, f)
                           : format == 3 ? mp_trace_report_csv(ptr, count, csv_table, f)
                                         : mp_trace_report_text(ptr, count, &o, f);
            bool bad = st != MP_OK || fflush(f) != 0 || ferror(f);
            if (out_path) {
                bad |= fclose(f) != 0;
                if (!bad && rename(tmp, out_path) != 0) bad = true;
                if (bad) unlink(tmp);
            }
            if (bad) {
                tr_print_error(st != MP_OK ? mp_last_error() : "cannot write the report");
                rc = TR_EXIT_INPUT;
            }
            free(tmp);
        }
    }
    for (int i = 0; i < opened; i++) mp_trace_free(&traces[i]);
    free(traces);
    free(ptr);
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    return rc;
}
