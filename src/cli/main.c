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

int main(int argc, char **argv) {
    const char *model_path = NULL, *out_path = NULL;
    mp_report_options ro;
    mp_report_options_default(&ro);
    int quiet = 0;
    /* dims and inputs are applied after loading */
    const char **dim_args = calloc((size_t)argc, sizeof *dim_args);
    input_spec *inputs = calloc((size_t)argc, sizeof *inputs);
    int n_dims = 0, n_inputs = 0;
    if (!dim_args || !inputs) {
        fputs("modelprof: out of memory\n", stderr);
        return EXIT_MODEL;
    }
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
            input_spec *s = &inputs[n_inputs++];
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
    mp_status st = mp_model_load(model_path, &m);
    if (st) {
        fprintf(stderr, "modelprof: %s\n", mp_last_error());
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
            fprintf(stderr, "modelprof: --dim %s: %s\n", dim_args[i], mp_last_error());
            rc = EXIT_USAGE;
        }
    }
    for (int i = 0; i < n_inputs && !rc; i++) {
        if (mp_model_set_input_shape(m, inputs[i].name, inputs[i].dims, inputs[i].rank)) {
            fprintf(stderr, "modelprof: --input %s: %s\n", inputs[i].name, mp_last_error());
            rc = EXIT_USAGE;
        }
    }
    mp_profile *p = NULL;
    if (!rc) {
        st = mp_profile_static(m, &p);
        if (st) {
            fprintf(stderr, "modelprof: %s: %s\n", model_path, mp_last_error());
            rc = EXIT_MODEL;
        }
    }
    if (!rc && !quiet)
        for (int i = 0; i < mp_model_warning_count(m); i++)
            fprintf(stderr, "modelprof: warning: %s\n", mp_model_warning(m, i));
    if (!rc) {
        st = out_path ? mp_report_write_file(p, &ro, out_path) : mp_report_write(p, &ro, stdout);
        if (!st && !out_path && fflush(stdout) != 0)
            st = MP_ERR_IO;
        if (st) {
            fprintf(stderr, "modelprof: %s\n", mp_last_error()[0] ? mp_last_error() : "cannot write the report");
            rc = EXIT_MODEL;
        }
    }
    mp_profile_free(p);
    mp_model_free(m);
    for (int i = 0; i < n_inputs; i++) free((void *)inputs[i].name);
    free(inputs);
    free(dim_args);
    return rc;
}
