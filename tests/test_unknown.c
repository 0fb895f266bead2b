/* Unknown figures in every format (issue 31 point 2): a cost that needs a
 * dim without a value is "?" in the text, null in the JSON, an empty field
 * in the CSV (and "?" in the HTML: tools/html_check.py); never 0. And the
 * flags that shape the by-module-op table (point 10): --op-top alone is
 * refused, --by-module-op works in html and csv, the doc's example is the
 * command's output. Run from the repository root. */
#include <stdlib.h>

#include "jsonr.h"
#include "tcli.h"
#include "test.h"

#define RUN(secs, ...) t_cli_run((const char *const[]){__VA_ARGS__, NULL}, secs, 0)

/* GPT-2 (TorchScript export) with batch and seq left free: its MatMuls'
 * costs need them. */
static const char *const MODEL = "models/gpt2.onnx";

static bool is_null(const jr *v) { return v && v->type == JR_NULL; }
static bool is_uint(const jr *v) { return v && v->type == JR_NUM && v->is_int && v->i >= 0; }

static bool has_flag(const jr *node, const char *flag) {
    const jr *f = jr_get(node, "flags");
    for (int i = 0; i < jr_len(f); i++)
        if (jr_at(f, i)->type == JR_STR && strcmp(jr_at(f, i)->s, flag) == 0) return true;
    return false;
}

static void t_json(void) {
    t_cli r = RUN(120, "--format", "json", "-q", MODEL);
    T_EQ(r.code, 0);
    if (r.code == 0) t_json_dump("profile", r.out, r.out_len);
    jr *j = r.code == 0 ? jr_parse(r.out, r.out_len, NULL) : NULL;
    t_cli_free(&r);
    T_CHECK(j != NULL);
    if (!j) return;
    T_EQ(jr_path(j, "schema_version")->i, 2);
    const jr *t = jr_get(j, "total");
    T_CHECK(jr_get(t, "unknown_nodes")->i > 0);
    static const char *const figs[] = {"macs", "flops", "bwd_flops_estimate", "bytes_read",
                                       "bytes_written", "act_bytes", "activation_peak_bytes"};
    for (size_t i = 0; i < (sizeof figs / sizeof figs[0]); i++) {
        T_CHECK(is_null(jr_get(t, figs[i])));
        char path[64];
        snprintf(path, sizeof path, "at_least.%s", figs[i]);
        T_CHECK(is_uint(jr_path(t, path))); /* what was counted: a lower bound */
    }
    T_CHECK(jr_path(t, "at_least.activation_peak_bytes")->i > 0);
    T_CHECK(is_null(jr_get(t, "activation_peak_node")));
    T_CHECK(is_uint(jr_get(t, "params")));
    /* the root module, an op type with unknown nodes and one without */
    const jr *root = jr_at(jr_get(j, "modules"), 0);
    T_CHECK(is_null(jr_get(root, "macs")) && is_null(jr_get(root, "act_bytes")));
    T_CHECK(is_uint(jr_get(root, "params")));
    int unk_ops = 0, known_ops = 0;
    const jr *ops = jr_get(j, "ops");
    for (int i = 0; i < jr_len(ops); i++) {
        const jr *o = jr_at(ops, i);
        if (jr_get(o, "unknown_nodes")->i > 0) {
            T_CHECK(is_null(jr_get(o, "macs")) && is_null(jr_get(o, "flops")) &&
                    is_null(jr_get(o, "bytes_read")));
            unk_ops++;
        } else if (jr_get(o, "uncounted")->i == 0) {
            T_CHECK(is_uint(jr_get(o, "macs")) && is_uint(jr_get(o, "bytes_read")));
            known_ops++;
        }
    }
    T_CHECK(unk_ops > 0 && known_ops > 0);
    /* nodes: null exactly where the flags say unknown */
    int unk_nodes = 0;
    const jr *nodes = jr_get(j, "nodes");
    for (int i = 0; i < jr_len(nodes); i++) {
        const jr *n = jr_at(nodes, i);
        bool unk = has_flag(n, "unknown");
        unk_nodes += unk;
        T_EQ(is_null(jr_get(n, "macs")), unk || has_flag(n, "uncounted"));
        T_EQ(is_null(jr_get(n, "act_bytes")), unk);
    }
    T_EQ(unk_nodes, (int)jr_get(t, "unknown_nodes")->i);
    jr_free(j);

    /* every dim given: every figure known, no at_least */
    r = RUN(120, "--format", "json", "-q", "--dim", "batch=2", "--dim", "seq=32", MODEL);
    T_EQ(r.code, 0);
    j = r.code == 0 ? jr_parse(r.out, r.out_len, NULL) : NULL;
    t_cli_free(&r);
    if (!j) return;
    t = jr_get(j, "total");
    for (size_t i = 0; i < (sizeof figs / sizeof figs[0]); i++) T_CHECK(is_uint(jr_get(t, figs[i])));
    T_CHECK(jr_get(t, "at_least") == NULL);
    T_CHECK(jr_get(t, "activation_peak_node")->type == JR_STR);
    jr_free(j);
}

/* Field `col` (0-based) of a CSV line (no quoted commas in these rows). */
static void csv_field(const char *line, int col, char *out, size_t n) {
    const char *p = line;
    for (int c = 0; c < col && p; c++) {
        p = strchr(p, ',');
        if (p) p++;
    }
    size_t len = p ? strcspn(p, ",\r\n") : 0;
    if (len >= n) len = n - 1;
    memcpy(out, p ? p : "", len);
    out[len] = 0;
}

static int csv_col(const char *header, const char *name) {
    int c = 0;
    for (const char *p = header; *p && *p != '\r';) {
        size_t len = strcspn(p, ",\r\n");
        if (len == strlen(name) && strncmp(p, name, len) == 0) return c;
        p += len;
        if (*p == ',') p++;
        c++;
    }
    return -1;
}

static void t_csv(void) {
    /* nodes: a MatMul whose cost needs batch and seq has empty figures */
    t_cli r = RUN(120, "--format", "csv", "--csv-table", "nodes", "-q", MODEL);
    T_EQ(r.code, 0);
    int cm = csv_col(r.out, "macs"), cf = csv_col(r.out, "flags"), cb = csv_col(r.out, "bytes_read");
    T_CHECK(cm >= 0 && cf >= 0 && cb >= 0);
    int unknown_rows = 0;
    for (const char *line = strstr(r.out, "\r\n"); line && line[2]; line = strstr(line + 2, "\r\n")) {
        char flags[64], macs[32], br[32];
        csv_field(line + 2, cf, flags, sizeof flags);
        csv_field(line + 2, cm, macs, sizeof macs);
        csv_field(line + 2, cb, br, sizeof br);
        if (strstr(flags, "unknown")) {
            unknown_rows++;
            T_CHECK(macs[0] == 0 && br[0] == 0);
        } else if (!strstr(flags, "uncounted")) {
            T_CHECK(macs[0] != 0 && br[0] != 0);
        }
    }
    T_CHECK(unknown_rows > 0);
    t_cli_free(&r);
    /* modules: the root row's MACs are empty, its params a number */
    r = RUN(120, "--format", "csv", "--csv-table", "modules", "-q", MODEL);
    T_EQ(r.code, 0);
    const char *row0 = strstr(r.out, "\r\n");
    char v[32];
    if (row0) {
        csv_field(row0 + 2, csv_col(r.out, "macs"), v, sizeof v);
        T_EQ_STR(v, "");
        csv_field(row0 + 2, csv_col(r.out, "params"), v, sizeof v);
        T_CHECK(v[0] >= '1' && v[0] <= '9');
    }
    t_cli_free(&r);
}

/* --op-top shapes the by-module-op table only; that table exists in the
 * text, the HTML and (as module_ops) the CSV. */
static void t_module_op_flags(void) {
    t_cli r = RUN(60, "-q", "--op-top", "3", "models/resnet18.onnx");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--op-top 3") && strstr(r.err, "--by-module-op"));
    t_cli_free(&r);
    r = RUN(60, "-q", "--dim", "batch=1", "--by-module-op", "--format", "csv", "models/resnet18.onnx");
    T_EQ(r.code, 0);
    T_CHECK(strncmp(r.out, "module,path,op,domain,count,", 28) == 0);
    t_cli_free(&r);
    r = RUN(60, "-q", "--by-module-op", "--format", "csv", "--csv-table", "nodes", "models/resnet18.onnx");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "module_ops") != NULL);
    t_cli_free(&r);
    r = RUN(60, "-q", "--by-module-op", "--op-top", "2", "--format", "csv", "models/resnet18.onnx");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--op-top 2") != NULL);
    t_cli_free(&r);
    /* html: the page carries the table's options (report.js draws it;
     * make test-html checks the rendered table) */
    r = RUN(60, "-q", "--dim", "batch=1", "--by-module-op", "--op-top", "3", "--depth", "1", "--format",
            "html", "models/resnet18.onnx");
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "data-by-module-op=\"1\" data-op-top=\"3\" data-depth=\"1\"") != NULL);
    t_cli_free(&r);
    r = RUN(60, "-q", "--dim", "batch=1", "--format", "html", "models/resnet18.onnx");
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "data-by-module-op=\"") == NULL);
    t_cli_free(&r);
}

/* docs/REPORTS.md's --by-module-op example is the output of the command it
 * names, line for line. */
static void t_doc_module_op(void) {
    size_t len = 0;
    char *doc = jr_slurp("docs/REPORTS.md", &len);
    T_CHECK(doc != NULL);
    if (!doc) return;
    const char *sec = strstr(doc, "## `--by-module-op`");
    const char *block = sec ? strstr(sec, "```\n") : NULL;
    const char *end = block ? strstr(block + 4, "```") : NULL;
    T_CHECK(block && end);
    t_cli r = RUN(120, "models/bert_base.onnx", "--dim", "batch=1", "--dim", "seq=128", "--by-module-op",
                  "--depth", "2", "--no-detailed", "--top", "0", "--no-ops", "-q");
    T_EQ(r.code, 0);
    int lines = 0;
    for (const char *l = block ? block + 4 : NULL; l && l < end;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) + 1 : strlen(l);
        char want[512];
        snprintf(want, sizeof want, "%.*s", (int)n, l);
        if (!strstr(r.out, want)) mp_t_fail(__FILE__, __LINE__, "docs/REPORTS.md: not in the output: %s", want);
        lines++;
        l += n;
    }
    T_EQ(lines, 7); /* header, alignment, five modules */
    /* the default --op-top: five op columns and "other" */
    int cols = 0;
    for (const char *c = block ? block + 4 : ""; *c && *c != '\n'; c++) cols += *c == '|';
    T_EQ(cols, 1 + 3 + 5 + 1);
    t_cli_free(&r);
    free(doc);
}

MP_TESTS(unknown){
    {"json", t_json},
    {"csv", t_csv},
    {"module_op_flags", t_module_op_flags},
    {"doc_module_op", t_doc_module_op},
};
MP_TESTS_END(unknown)
