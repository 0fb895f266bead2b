/* The CSV and HTML reports against the JSON report of the same model: every
 * CSV cell equals the JSON field of its column (the same figures, nothing
 * formatted), and the HTML page embeds the JSON unchanged. */
#include "test.h"

#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "jsonr.h"
#include "tbuild.h"
#include "tcli.h"

/* An RFC 4180 reader: rows of fields, CRLF line ends, quoted fields with
 * doubled quotes. Returns the number of rows (at most max), -1 on a syntax
 * error. Fields point into `s`, which it rewrites in place. */
typedef struct csv_row {
    char *f[48];
    int n;
} csv_row;

static int csv_parse(char *s, csv_row *rows, int max) {
    int nr = 0;
    while (*s && nr < max) {
        csv_row *r = &rows[nr++];
        r->n = 0;
        for (;;) {
            if (r->n >= 48) return -1;
            char *out = s;
            r->f[r->n++] = out;
            if (*s == '"') {
                s++;
                for (;;) {
                    if (!*s) return -1;
                    if (*s == '"') {
                        if (s[1] != '"') break;
                        s++;
                    }
                    *out++ = *s++;
                }
                s++; /* closing quote */
                if (*s != ',' && *s != '\r') return -1;
            } else {
                while (*s && *s != ',' && *s != '\r' && *s != '\n' && *s != '"') *out++ = *s++;
                if (*s == '"' || *s == '\n') return -1; /* a bare quote or LF without CR */
            }
            char end = *s;
            *out = '\0';
            if (end == ',') {
                s++;
                continue;
            }
            if (end != '\r' || s[1] != '\n') return -1;
            s += 2;
            break;
        }
    }
    return nr;
}

static t_cli run(const char *model, const char *const *extra) {
    const char *args[24] = {model, "-q"};
    int n = 2;
    if (strstr(model, "resnet18")) {
        args[n++] = "--dim";
        args[n++] = "batch=1";
    }
    for (int i = 0; extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    return t_cli_run(args, 120, 0);
}

/* Every cell of a CSV table equals the JSON array's field of its column:
 * integers exactly, reals to the JSON's 9 digits, null as an empty field,
 * strings as they are; returns the data rows compared. */
static int compare_table(const char *model, const char *const *run_args, const char *table,
                         const char *json_key) {
    const char *ja[12], *ca[12];
    int k = 0;
    for (; run_args[k]; k++) ja[k] = ca[k] = run_args[k];
    ja[k] = "--format", ja[k + 1] = "json", ja[k + 2] = NULL;
    ca[k] = "--format", ca[k + 1] = "csv", ca[k + 2] = "--csv-table", ca[k + 3] = table, ca[k + 4] = NULL;
    t_cli j = run(model, ja), c = run(model, ca);
    T_EQ(j.code, 0);
    T_EQ(c.code, 0);
    size_t err = 0;
    jr *root = jr_parse(j.out, j.out_len, &err);
    T_CHECK(root != NULL);
    const jr *arr = root ? jr_get(root, json_key) : NULL;
    int max = 20000;
    csv_row *rows = calloc((size_t)max, sizeof *rows);
    int nr = rows ? csv_parse(c.out, rows, max) : -1;
    T_CHECK(nr >= 1);
    int compared = 0;
    if (arr && nr >= 1) {
        T_EQ(nr - 1, jr_len(arr));
        for (int r = 1; r < nr && r - 1 < jr_len(arr); r++) {
            const jr *o = jr_at(arr, r - 1);
            T_EQ(rows[r].n, rows[0].n);
            for (int f = 0; f < rows[0].n && f < rows[r].n; f++) {
                const char *col = rows[0].f[f], *cell = rows[r].f[f];
                const jr *v = jr_get(o, col);
                if (!v) {
                    /* absent in the JSON: an empty cell (fused_into of a
                     * node run alone, a module without a class) */
                    if (cell[0]) mp_t_fail(__FILE__, __LINE__, "%s row %d %s: '%s', absent in the JSON", table, r, col, cell);
                    continue;
                }
                bool ok;
                if (v->type == JR_NULL) ok = !cell[0];
                else if (v->type == JR_STR) ok = strcmp(v->s, cell) == 0;
                else if (v->type == JR_NUM && v->is_int) ok = cell[0] && strtoll(cell, NULL, 10) == v->i;
                else if (v->type == JR_NUM) ok = cell[0] && strtod(cell, NULL) == v->num;
                else if (v->type == JR_ARR) {   /* flags: joined by ';' */
                    char buf[256] = "";
                    for (const jr *e = v->child; e; e = e->next) {
                        if (buf[0]) strcat(buf, ";");
                        if (e->type == JR_STR && strlen(buf) + strlen(e->s) < 200) strcat(buf, e->s);
                    }
                    ok = strcmp(buf, cell) == 0;
                } else ok = false;
                if (!ok) mp_t_fail(__FILE__, __LINE__, "%s row %d column %s: csv '%s' differs from the JSON", table, r, col, cell);
            }
            compared++;
        }
    }
    free(rows);
    jr_free(root);
    t_cli_free(&j);
    t_cli_free(&c);
    return compared;
}

static void t_csv_static(void) {
    const char *none[] = {NULL};
    T_CHECK(compare_table("models/resnet18.onnx", none, "nodes", "nodes") > 100);
    T_CHECK(compare_table("models/resnet18.onnx", none, "modules", "modules") > 10);
    T_CHECK(compare_table("models/resnet18.onnx", none, "ops", "ops") >= 5);
}

/* --csv-table module_ops: the JSON's modules[].ops rows, module after
 * module in the JSON's order, each cell equal to the row's field ("module"
 * the module's id, "path" its path). */
static void t_csv_module_ops(void) {
    const char *ja[] = {"--format", "json", NULL}, *ca[] = {"--format", "csv", "--csv-table", "module_ops", NULL};
    t_cli j = run("models/resnet18.onnx", ja), c = run("models/resnet18.onnx", ca);
    T_EQ(j.code, 0);
    T_EQ(c.code, 0);
    size_t err = 0;
    jr *root = jr_parse(j.out, j.out_len, &err);
    const jr *mods = root ? jr_get(root, "modules") : NULL;
    int max = 4000;
    csv_row *rows = calloc((size_t)max, sizeof *rows);
    int nr = rows ? csv_parse(c.out, rows, max) : -1;
    T_CHECK(mods != NULL && nr > 100);
    int r = 1, compared = 0;
    for (int i = 0; mods && i < jr_len(mods); i++) {
        const jr *m = jr_at(mods, i), *ops = jr_get(m, "ops");
        for (int k = 0; ops && k < jr_len(ops); k++, r++) {
            T_CHECK(r < nr);
            if (r >= nr) break;
            const jr *o = jr_at(ops, k);
            for (int f = 0; f < rows[0].n; f++) {
                const char *col = rows[0].f[f], *cell = rows[r].f[f];
                const jr *v = !strcmp(col, "module") ? jr_get(m, "id") : !strcmp(col, "path") ? jr_get(m, "path")
                                                                                           : jr_get(o, col);
                bool ok = v && ((v->type == JR_STR && !strcmp(v->s, cell)) ||
                                (v->type == JR_NUM && v->is_int && cell[0] && strtoll(cell, NULL, 10) == v->i));
                if (!ok) mp_t_fail(__FILE__, __LINE__, "module_ops row %d column %s: '%s' differs from the JSON", r, col, cell);
            }
            compared++;
        }
    }
    T_EQ(r, nr);
    T_CHECK(compared > 100);
    free(rows);
    jr_free(root);
    t_cli_free(&j);
    t_cli_free(&c);
}

/* The measured run: its times differ from run to run, so the CSV of one
 * run is checked against itself: the latency columns are there and
 * achieved_flops_per_s = flops / latency_s (to the 9 digits written). */
static void t_csv_measured_columns(void) {
    const char *args[] = {"models/mobilenet_v2.onnx", "-q", "--dim", "batch=1", "--run", "--warmup", "0",
                          "--iters", "1", "--format", "csv", "--csv-table", "ops", NULL};
    t_cli c = t_cli_run(args, 120, 0);
    T_EQ(c.code, 0);
    csv_row rows[64];
    int nr = csv_parse(c.out, rows, 64);
    T_CHECK(nr > 2);
    int lat = -1, fl = -1, rate = -1;
    for (int f = 0; nr > 0 && f < rows[0].n; f++) {
        if (!strcmp(rows[0].f[f], "latency_s")) lat = f;
        if (!strcmp(rows[0].f[f], "flops")) fl = f;
        if (!strcmp(rows[0].f[f], "achieved_flops_per_s")) rate = f;
    }
    T_CHECK(lat >= 0 && fl >= 0 && rate >= 0);
    for (int r = 1; r < nr && lat >= 0 && fl >= 0 && rate >= 0; r++) {
        double l = strtod(rows[r].f[lat], NULL), flops = strtod(rows[r].f[fl], NULL);
        if (l > 0 && rows[r].f[rate][0]) {
            double want = flops / l, got = strtod(rows[r].f[rate], NULL);
            T_CHECK(got - want <= 1e-7 * want && want - got <= 1e-7 * want); /* %.9g of each */
        }
    }
    t_cli_free(&c);
}

/* RFC 4180 quoting: a node name with a comma, quotes and a line break
 * comes back whole from the CSV, and the row keeps its column count. */
static void t_csv_quoting(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 2, TB_DIMS(2, 3));
    int n = tb_node(m, "Relu", "x", "y");
    const char *name = "relu, \"the\" first\r\nnode";
    tb_name(m, n, name);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mp_report_options o;
    mp_report_options_default(&o);
    o.format = MP_FORMAT_CSV;
    o.csv_table = MP_CSV_NODES;
    T_OK(mp_report_write(p, &o, f));
    fclose(f);
    T_CHECK(strstr(buf, "\"relu, \"\"the\"\" first\r\nnode\"") != NULL);
    csv_row rows[4];
    T_EQ(csv_parse(buf, rows, 4), 2);
    T_EQ_STR(rows[1].f[0], name);
    T_EQ(rows[1].n, rows[0].n);
    T_EQ_STR(rows[1].f[1], "Relu");
    T_EQ_STR(rows[1].f[9], "0"); /* params */
    free(buf);
    tb_done(m, p);
    /* bytes that are no UTF-8 come out as U+FFFD, as the JSON writes them
     * (the CSV was not UTF-8: Python's csv refused it); valid UTF-8 as is */
    m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT, 2, TB_DIMS(2, 3));
    n = tb_node(m, "Relu", "x", "y");
    tb_name(m, n, "r\xc3\xa9lu\xff\xfe");
    tb_output(m, "y");
    p = tb_prof(m);
    buf = NULL;
    f = open_memstream(&buf, &len);
    T_OK(mp_report_write(p, &o, f));
    fclose(f);
    T_CHECK(buf && strstr(buf, "r\xc3\xa9lu\xef\xbf\xbd\xef\xbf\xbd,Relu") != NULL);
    free(buf);
    tb_done(m, p);
}

/* A JSON time field in seconds ("wall" -> "wall_s"); -1 when absent. */
static double jsec(const jr *o, const char *base) {
    char k[64];
    snprintf(k, sizeof k, "%s_s", base);
    const jr *v = jr_get(o, k);
    return v && v->type == JR_NUM ? v->num : -1;
}

static bool near(double a, double b) { return a - b <= 1e-9 * (b < 0 ? -b : b) + 1e-12 && b - a <= 1e-9 * (b < 0 ? -b : b) + 1e-12; }

/* The trace tables against the trace JSON: steps (wall, busy, idle by cause,
 * FLOPs, memory) and kernels (count, total, share). */
static void t_csv_trace(void) {
    const char *tr = "tests/traces/mobilenet_v2_sgd_loader.trace.json.gz";
    const char *a[] = {"trace", tr, "--format", "json", NULL};
    const char *b[] = {"trace", tr, "--format", "csv", NULL};
    const char *c[] = {"trace", tr, "--format", "csv", "--csv-table", "kernels", NULL};
    t_cli j = t_cli_run(a, 60, 0), st = t_cli_run(b, 60, 0), kr = t_cli_run(c, 60, 0);
    T_EQ(j.code + st.code + kr.code, 0);
    size_t err = 0;
    jr *root = jr_parse(j.out, j.out_len, &err);
    T_CHECK(root != NULL);
    if (!root) return;
    static csv_row rows[4096];
    const jr *steps = jr_get(root, "steps");
    int nr = csv_parse(st.out, rows, 4096);
    T_EQ(nr - 1, jr_len(steps));
    int c_flops = -1, c_peak = -1, c_comm = -1;   /* columns by name */
    for (int col = 0; nr > 0 && col < rows[0].n; col++) {
        if (strcmp(rows[0].f[col], "flops") == 0) c_flops = col;
        if (strcmp(rows[0].f[col], "peak_allocated_bytes") == 0) c_peak = col;
        if (strcmp(rows[0].f[col], "communication_s") == 0) c_comm = col;
    }
    T_CHECK(c_flops > 0 && c_peak > 0 && c_comm > 0);
    if (c_flops < 0 || c_peak < 0 || c_comm < 0) return;
    for (int r = 1; r < nr; r++) {
        const jr *o = jr_at(steps, r - 1);
        T_EQ_STR(rows[r].f[1], jr_get(o, "name")->s);
        T_CHECK(near(strtod(rows[r].f[3], NULL), jsec(o, "wall")));
        T_CHECK(near(strtod(rows[r].f[4], NULL), jsec(o, "device_busy")));
        T_CHECK(near(strtod(rows[r].f[6], NULL), jsec(o, "idle")));
        const jr *ic = jr_get(o, "idle_causes_s");
        T_CHECK(ic && near(strtod(rows[r].f[7], NULL), jr_get(ic, "data_loader")->num));
        T_EQ(strtoll(rows[r].f[c_flops], NULL, 10), jr_get(o, "flops")->i);
        T_EQ(strtoll(rows[r].f[c_peak], NULL, 10), jr_path(o, "memory.peak_allocated_bytes")->i);
        T_CHECK(near(strtod(rows[r].f[c_comm], NULL), jsec(o, "communication")));
    }
    const jr *ks = jr_get(root, "kernels");
    nr = csv_parse(kr.out, rows, 4096);
    T_EQ(nr - 1, jr_len(ks));
    for (int r = 1; r < nr; r++) {
        const jr *o = jr_at(ks, r - 1);
        T_EQ_STR(rows[r].f[1], jr_get(o, "name")->s);
        T_EQ(strtoll(rows[r].f[5], NULL, 10), jr_get(o, "count")->i);
        T_CHECK(near(strtod(rows[r].f[6], NULL), jsec(o, "total")));
        /* the mean to the nanosecond, rounded as the JSON's (it was cut) */
        double mean = jsec(o, "mean"), csvm = strtod(rows[r].f[7], NULL);
        T_CHECK(mean < 0 || (csvm - mean <= 0.5e-9 + 1e-15 && mean - csvm <= 0.5e-9 + 1e-15));
        double want = jr_get(o, "fraction")->num;
        double got = strtod(rows[r].f[8], NULL);
        T_CHECK(got - want <= 1e-9 && want - got <= 1e-9);
    }
    jr_free(root);
    t_cli_free(&j);
    t_cli_free(&st);
    t_cli_free(&kr);
}

static void t_csv_usage(void) {
    const char *args[] = {"models/resnet18.onnx", "--format", "csv", "--csv-table", "steps", NULL};
    t_cli c = t_cli_run(args, 60, 0);
    T_EQ(c.code, 1);
    T_CHECK(strstr(c.err, "--csv-table") != NULL);
    t_cli_free(&c);
}

/* The HTML page holds the JSON report unchanged (each '<' as \u003c) in
 * its data block, and nothing loaded from elsewhere. */
static void t_html_embeds_json(void) {
    const char *h[] = {"--format", "html", NULL}, *js[] = {"--format", "json", NULL};
    t_cli a = run("models/resnet18.onnx", h), b = run("models/resnet18.onnx", js);
    T_EQ(a.code, 0);
    T_EQ(b.code, 0);
    const char *start = strstr(a.out, "id=\"mp-data\" data-kind=\"profile\">");
    T_CHECK(start != NULL);
    if (start) {
        start = strchr(start, '>') + 1;
        const char *end = strstr(start, "</script>");
        T_CHECK(end != NULL);
        T_CHECK(end && (size_t)(end - start) == b.out_len && memcmp(start, b.out, b.out_len) == 0);
    }
    T_CHECK(strstr(a.out, "http://") == NULL || strstr(a.out, "http://www.w3.org/2000/svg") != NULL);
    T_CHECK(strstr(a.out, "https://") == NULL);
    T_CHECK(strstr(a.out, "<script src") == NULL && strstr(a.out, "<link") == NULL);
    t_cli_free(&a);
    t_cli_free(&b);
}

/* --chrome-trace round trip: `modelprof trace` reads the Chrome trace of a
 * one-pass run back, and its operator table's CPU total per operator type
 * equals the run's kernels headed by a node of that type (the kernel groups
 * named after it, alone or as "Op+..."; one timed pass: the median is that
 * pass; the trace keeps nanoseconds, so within 1 ns per event). */
static void t_chrome_trace_round_trip(void) {
    char dir[] = "/tmp/mp-chrome-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    char ctp[64], runp[64], backp[64];
    snprintf(ctp, sizeof ctp, "%s/run.trace.json", dir);
    snprintf(runp, sizeof runp, "%s/run.json", dir);
    snprintf(backp, sizeof backp, "%s/back.json", dir);
    const char *a[] = {"models/mobilenet_v2.onnx", "-q", "--dim", "batch=1", "--run", "--warmup", "1",
                       "--iters", "1", "--chrome-trace", ctp, "--format", "json", "-o", runp, NULL};
    t_cli r = t_cli_run(a, 120, 0);
    T_EQ(r.code, 0);
    const char *b[] = {"trace", ctp, "--format", "json", "-o", backp, NULL};
    t_cli t = t_cli_run(b, 60, 0);
    T_EQ(t.code, 0);
    size_t n1 = 0, n2 = 0, err = 0;
    char *s1 = jr_slurp(runp, &n1), *s2 = jr_slurp(backp, &n2);
    jr *run = s1 ? jr_parse(s1, n1, &err) : NULL, *back = s2 ? jr_parse(s2, n2, &err) : NULL;
    T_CHECK(run && back);
    const jr *ops = run ? jr_get(run, "ops") : NULL, *tops = back ? jr_get(back, "operators") : NULL;
    const jr *kg = run ? jr_path(run, "run.kernel_groups") : NULL;
    int matched = 0;
    for (int i = 0; ops && tops && kg && i < jr_len(ops); i++) {
        const jr *o = jr_at(ops, i), *cnt = jr_get(o, "count");
        const char *op = jr_get(o, "op")->s;
        size_t ol = strlen(op);
        double want = 0;
        for (int k = 0; k < jr_len(kg); k++) {
            const jr *g = jr_at(kg, k);
            const char *gn = jr_get(g, "name")->s;
            const jr *gl = jr_get(g, "latency_s");
            if (!strncmp(gn, op, ol) && (gn[ol] == 0 || gn[ol] == '+') && gl && gl->type == JR_NUM)
                want += gl->num;
        }
        if (!(want > 0)) continue;
        const jr lat0 = {.type = JR_NUM, .num = want}, *lat = &lat0;
        const jr *hit = NULL;
        for (int k = 0; k < jr_len(tops); k++)
            if (!strcmp(jr_get(jr_at(tops, k), "name")->s, op)) hit = jr_at(tops, k);
        T_CHECK(hit != NULL);
        if (!hit) continue;
        double got = jr_get(hit, "cpu_total_s")->num;
        double tol = 1e-9 * (double)(cnt ? cnt->i : 1) + 1e-9;
        if (got - lat->num > tol || lat->num - got > tol)
            mp_t_fail(__FILE__, __LINE__, "op %s: trace %.9g s, run %.9g s", op, got, lat->num);
        matched++;
    }
    /* MobileNet-V2's groups start with Conv, Gemm, GlobalAveragePool (BatchNormalization,
     * Clip and Add run fused into the convolutions) */
    T_CHECK(matched >= 3);
    /* the steps: one pass, its wall the sum of the run's steps at least */
    T_EQ(back ? jr_path(back, "summary.steps")->i : 0, 1);
    /* FLOPs: each event's args.flops, so the run's total */
    T_EQ(back ? jr_path(back, "summary.flops")->i : 0, run ? jr_path(run, "total.flops")->i : 1);
    T_CHECK(back && jr_path(back, "recorded.shapes")->b);
    jr_free(run);
    jr_free(back);
    free(s1);
    free(s2);
    unlink(ctp);
    unlink(runp);
    unlink(backp);
    rmdir(dir);
    t_cli_free(&r);
    t_cli_free(&t);
}

/* The trace summary's memory curve: at most 256 points in time order
 * inside the steps' window, its highest point the trace's peak allocation
 * (the slice holding the peak keeps it). */
static void t_trace_memory_curve(void) {
    const char *a[] = {"trace", "tests/traces/mobilenet_v2_sgd_loader.trace.json.gz", "--format", "json", NULL};
    t_cli r = t_cli_run(a, 60, 0);
    T_EQ(r.code, 0);
    size_t err = 0;
    jr *j = jr_parse(r.out, r.out_len, &err);
    T_CHECK(j != NULL);
    const jr *c = j ? jr_path(j, "memory.curve") : NULL, *peak = j ? jr_path(j, "memory.peak_allocated_bytes") : NULL;
    T_CHECK(c && c->type == JR_ARR && peak);
    int n = c ? jr_len(c) : 0;
    T_CHECK(n > 10 && n <= 256);
    double prev = -1, wall = 0;
    const jr *steps = jr_get(j, "steps");
    for (int i = 0; steps && i < jr_len(steps); i++) {
        wall += jr_get(jr_at(steps, i), "wall_s")->num;
    }
    int64_t top = -1;
    for (int i = 0; i < n; i++) {
        const jr *pt = jr_at(c, i);
        double ts = jr_at(pt, 0)->num;
        int64_t b = jr_at(pt, 1)->i;
        T_CHECK(ts >= prev && ts >= 0 && ts <= wall * 1.01 + 1e-3);
        prev = ts;
        if (b > top) top = b;
    }
    T_EQ(top, peak ? peak->i : -2);
    jr_free(j);
    t_cli_free(&r);
}

static void t_chrome_trace_needs_run(void) {
    const char *a[] = {"models/resnet18.onnx", "--chrome-trace", "/tmp/never.json", NULL};
    t_cli r = t_cli_run(a, 60, 0);
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--run") != NULL);
    t_cli_free(&r);
}

MP_TESTS(report_formats){
    {"csv_module_ops", t_csv_module_ops},
    {"chrome_trace_round_trip", t_chrome_trace_round_trip},
    {"chrome_trace_needs_run", t_chrome_trace_needs_run},
    {"trace_memory_curve", t_trace_memory_curve},
    {"csv_static", t_csv_static},
    {"csv_measured_columns", t_csv_measured_columns},
    {"csv_usage", t_csv_usage},
    {"csv_quoting", t_csv_quoting},
    {"csv_trace", t_csv_trace},
    {"html_embeds_json", t_html_embeds_json},
};
MP_TESTS_END(report_formats)
