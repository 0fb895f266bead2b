/* modelprof command line: flags -> library calls -> report writers.
 * Exit codes: 0 success, 1 usage error, 2 model the tool cannot read. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelprof.h"

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
          "  --format text|json      report format (default text)\n"
          "  -o, --output FILE       write the report to FILE (default stdout)\n"
          "  --depth N               deepest module depth shown (default: all)\n"
          "  --top K                 modules per depth in the aggregated block (default 3)\n"
          "  --no-detailed           omit the detailed module tree\n"
          "  --no-ops                omit the by-operator table\n"
          "  -q, --quiet             do not print warnings on stderr\n"
          "  --limit NAME=VALUE      raise or lower a resource limit (repeatable): nodes,\n"
          "                          values, attr-elems, memory (bytes, K/M/G suffix), depth\n"
          "  --max-nodes N           the same as --limit nodes=N (default 10000000)\n"
          "  --max-memory BYTES      the same as --limit memory=BYTES (default 4G)\n"
          "  -h, --help              this help\n"
          "  --version               print the version\n"
          "\n"
          "exit status: 0 ok, 1 usage error, 2 the model cannot be read or profiled\n",
          f);
}

static int usage_error(const char *fmt, const char *arg) {
    fputs("modelprof: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n(see modelprof --help)\n", stderr);
    return EXIT_USAGE;
}

/* One line on stderr: control bytes of names in the message are escaped. */
static void print_error(const char *prefix, const char *msg) {
    fputs("modelprof: ", stderr);
    if (prefix) fputs(prefix, stderr);
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p == '\n')
            fputs("\\n", stderr);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(stderr, "\\x%02x", *p);
        else
            fputc(*p, stderr);
    }
    fputc('\n', stderr);
}

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
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < 0) return 0;
    *out = v;
    return 1;
}

typedef struct {
    const char *name;
    int64_t dims[64];
    int rank;
} input_spec;

/* The command; dim_args and inputs (argc entries each) are the caller's,
 * freed by it whatever path this takes. */
static int run(int argc, char **argv, const char **dim_args, input_spec *inputs,
               int *pn_inputs) {
    const char *model_path = NULL, *out_path = NULL;
    mp_report_options ro;
    mp_report_options_default(&ro);
    mp_limits lim;
    mp_limits_default(&lim);
    int quiet = 0;
    /* dims and inputs are applied after loading */
    int n_dims = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
#define TAKES_VALUE(flag)                                                   \
    (strcmp(a, flag) == 0 ? (i + 1 < argc ? (val = argv[++i], 1)            \
                                          : (val = NULL, 1))                \
     : (strncmp(a, flag "=", sizeof(flag)) == 0 ? (val = a + sizeof(flag), 1) : 0))
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("modelprof %s\n", MP_VERSION_STRING);
            return 0;
        } else if (TAKES_VALUE("--dim")) {
            if (!val) return usage_error("--dim needs NAME=VALUE", "");
            const char *eq = strchr(val, '=');
            int64_t v;
            if (!eq || eq == val || !parse_int(eq + 1, &v))
                return usage_error("--dim '%s': expected NAME=VALUE with a non-negative integer", val);
            dim_args[n_dims++] = val;
        } else if (TAKES_VALUE("--input")) {
            if (!val) return usage_error("--input needs NAME=D0xD1x...", "");
            const char *eq = strrchr(val, '=');
            if (!eq || eq == val)
                return usage_error("--input '%s': expected NAME=D0xD1x... (e.g. x=1x3x224x224)", val);
            input_spec *s = &inputs[(*pn_inputs)++];
            size_t nl = (size_t)(eq - val);
            char *name = malloc(nl + 1);
            if (!name) return EXIT_MODEL;
            memcpy(name, val, nl);
            name[nl] = 0;
            s->name = name;
            const char *p = eq + 1;
            if (*p) {
                for (;;) {
                    char *end;
                    errno = 0;
                    long long d = strtoll(p, &end, 10);
                    if (end == p || errno || d < 0 || s->rank >= 64 || (*end && *end != 'x'))
                        return usage_error("--input '%s': dims must be non-negative integers separated by 'x'", val);
                    s->dims[s->rank++] = d;
                    if (!*end) break;
                    p = end + 1;
                }
            }
        } else if (TAKES_VALUE("--format")) {
            if (!val) return usage_error("--format needs text or json", "");
            if (strcmp(val, "text") == 0)
                ro.format = MP_FORMAT_TEXT;
            else if (strcmp(val, "json") == 0)
                ro.format = MP_FORMAT_JSON;
            else
                return usage_error("--format '%s': expected text or json", val);
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
            if (!val || !parse_int(val, &v) || v > 1000000)
                return usage_error("--top '%s': expected a non-negative integer", val ? val : "");
            ro.top = (int)v;
        } else if (TAKES_VALUE("--limit") || TAKES_VALUE("--max-nodes") ||
                   TAKES_VALUE("--max-memory")) {
            char name[32];
            const char *num = val;
            if (!val) return usage_error("%s needs a value", a);
            if (strncmp(a, "--max-nodes", 11) == 0) {
                snprintf(name, sizeof name, "nodes");
            } else if (strncmp(a, "--max-memory", 12) == 0) {
                snprintf(name, sizeof name, "memory");
            } else {
                const char *eq = strchr(val, '=');
                if (!eq || eq == val || (size_t)(eq - val) >= sizeof name)
                    return usage_error("--limit '%s': expected NAME=VALUE (e.g. nodes=20000000)", val);
                memcpy(name, val, (size_t)(eq - val));
                name[eq - val] = 0;
                num = eq + 1;
            }
            int64_t v;
            if (!parse_size(num, &v))
                return usage_error("limit '%s': expected a positive integer (memory may end in K, M, G or T)",
                                   val);
            if (mp_limits_set(&lim, name, v)) return usage_error("%s", mp_last_error());
        } else if (strcmp(a, "--no-detailed") == 0) {
            ro.detailed = 0;
        } else if (strcmp(a, "--no-ops") == 0) {
            ro.show_ops = 0;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option '%s'", a);
        } else {
            if (model_path) return usage_error("more than one model given ('%s')", a);
            model_path = a;
        }
#undef TAKES_VALUE
    }
    if (!model_path) {
        usage(stderr);
        return EXIT_USAGE;
    }

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
    if (!rc) {
        st = out_path ? mp_report_write_file(p, &ro, out_path) : mp_report_write(p, &ro, stdout);
        if (!st && !out_path && fflush(stdout) != 0)
            st = MP_ERR_IO;
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

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "trace") == 0) return mp_trace_main(argc - 1, argv + 1);
    const char **dim_args = calloc((size_t)argc, sizeof *dim_args);
    input_spec *inputs = calloc((size_t)argc, sizeof *inputs);
    int n_inputs = 0, rc;
    if (!dim_args || !inputs) {
        fputs("modelprof: out of memory\n", stderr);
        rc = EXIT_MODEL;
    } else {
        rc = run(argc, argv, dim_args, inputs, &n_inputs);
    }
    for (int i = 0; inputs && i < n_inputs; i++) free((void *)inputs[i].name);
    free(inputs);
    free(dim_args);
    return rc;
}
