/* Trace diff (src/trace/diff.c, src/report/trace_diff.c): two runs
 * compared per step, largest change first. The derived-trace checks on the
 * real traces (a ViT copy with one operator's kernels stretched) are in
 * tests/python/run.py (trace_diff_derived). */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "jsonr.h"
#include "tcli.h"
#include "test.h"
#include "trace/diff.h"

#define ANNOT(name, ts, dur) \
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"" name "\",\"pid\":1,\"tid\":1,\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{}}"
#define OP(name, ts, dur, ext) \
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"" name "\",\"pid\":1,\"tid\":1,\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{\"External id\":" #ext "}}"
#define KERN(name, ts, dur, ext) \
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"" name "\",\"pid\":0,\"tid\":7,\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{\"External id\":" #ext ",\"stream\":7}}"
#define TRACE(...) "{\"traceEvents\":[" __VA_ARGS__ "]}"

/* A: steps of 1000 and 1200 us; aten::mm's gemm takes 100 us a step,
 * aten::add's 10. B: steps of 1500 and 1300 us; the gemm takes 400 us a
 * step, the add the same, and a new aten::gelu launches 50 us a step. */
static const char trace_a[] = TRACE(
    ANNOT("ProfilerStep#1", 0, 1000) "," OP("aten::mm", 10, 50, 1) "," KERN("gemm", 100, 100, 1) ","
    OP("aten::add", 60, 20, 2) "," KERN("add", 300, 10, 2) ","
    ANNOT("ProfilerStep#2", 1000, 1200) "," OP("aten::mm", 1010, 50, 3) "," KERN("gemm", 1100, 100, 3) ","
    OP("aten::add", 1060, 20, 4) "," KERN("add", 1300, 10, 4));
static const char trace_b[] = TRACE(
    ANNOT("ProfilerStep#1", 0, 1500) "," OP("aten::mm", 10, 50, 1) "," KERN("gemm", 100, 400, 1) ","
    OP("aten::add", 60, 20, 2) "," KERN("add", 600, 10, 2) "," OP("aten::gelu", 90, 5, 5) ","
    KERN("gelu", 700, 50, 5) ","
    ANNOT("ProfilerStep#2", 1500, 1300) "," OP("aten::mm", 1510, 50, 3) "," KERN("gemm", 1600, 400, 3) ","
    OP("aten::add", 1560, 20, 4) "," KERN("add", 2100, 10, 4) "," OP("aten::gelu", 1590, 5, 6) ","
    KERN("gelu", 2200, 50, 6));

static const mp_tdiff_row *row(const mp_tdiff_row *r, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(r[i].name, name) == 0) return &r[i];
    return NULL;
}

static bool near(double a, double b) { return fabs(a - b) <= 1e-12 + 1e-9 * fabs(b); }

static void t_synthetic(void) {
    mp_trace a, b;
    T_OK(mp_trace_open_memory(trace_a, strlen(trace_a), "a.json", NULL, &a));
    T_OK(mp_trace_open_memory(trace_b, strlen(trace_b), "b.json", NULL, &b));
    mp_trace_diff d;
    T_OK(mp_trace_diff_make(&a, &b, &d));
    T_CHECK(near(d.a_step, 1100e-6) && near(d.b_step, 1400e-6));
    T_CHECK(d.op_device);
    /* operators by self device time per step: mm +300 us, then gelu +50 us
     * (only in B); the add and the step annotations did not change */
    T_CHECK(d.n_ops == 4);
    T_EQ_STR(d.ops[0].name, "aten::mm");
    T_CHECK(near(d.ops[0].a, 100e-6) && near(d.ops[0].b, 400e-6));
    T_CHECK(near(d.ops[0].a_calls, 1) && near(d.ops[0].b_calls, 1));
    T_EQ_STR(d.ops[1].name, "aten::gelu");
    T_CHECK(d.ops[1].in_b && !d.ops[1].in_a && near(d.ops[1].b, 50e-6) && d.ops[1].a == 0);
    const mp_tdiff_row *add = row(d.ops, d.n_ops, "aten::add");
    T_CHECK(add && near(add->a, 10e-6) && near(add->b, 10e-6) && near(add->a2, 20e-6));
    T_EQ(d.n_kernels, 3);
    T_EQ_STR(d.kernels[0].name, "gemm");
    T_CHECK(near(d.kernels[0].b - d.kernels[0].a, 300e-6));
    T_EQ_STR(d.kernels[1].name, "gelu");
    /* the order is by |delta|, then name */
    for (int i = 1; i < d.n_ops; i++)
        T_CHECK(fabs(d.ops[i - 1].b - d.ops[i - 1].a) >= fabs(d.ops[i].b - d.ops[i].a));
    mp_trace_diff_free(&d);
    /* B against A: every delta changes sign, the order stays */
    T_OK(mp_trace_diff_make(&b, &a, &d));
    T_EQ_STR(d.ops[0].name, "aten::mm");
    T_CHECK(near(d.ops[0].b - d.ops[0].a, -300e-6) && near(d.b_step - d.a_step, -300e-6));
    mp_trace_diff_free(&d);
    mp_trace_free(&a);
    mp_trace_free(&b);
}

static char *write_tmp(const char *body) {
    char *path = strdup("/tmp/mp-tdiff-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return path;
    size_t n = strlen(body);
    T_CHECK(write(fd, body, n) == (ssize_t)n);
    close(fd);
    return path;
}

/* The command: text and JSON (the JSON against its schema in make test). */
static void t_command(void) {
    char *pa = write_tmp(trace_a), *pb = write_tmp(trace_b);
    t_cli r = t_cli_run((const char *const[]){"trace", "diff", "--format", "json", pa, pb, NULL}, 0, 0);
    T_EQ(r.code, 0);
    size_t err;
    jr *j = jr_parse(r.out, r.out_len, &err);
    T_CHECK(j != NULL);
    if (j) {
        const jr *s = jr_path(j, "diff.steps");
        T_CHECK(s && near(jr_get(s, "a_mean_s")->num, 1100e-6) && near(jr_get(s, "b_mean_s")->num, 1400e-6) &&
                near(jr_get(s, "delta_s")->num, 300e-6));
        const jr *o0 = jr_at(jr_path(j, "diff.operators"), 0);
        T_CHECK(o0 && strcmp(jr_get(o0, "name")->s, "aten::mm") == 0 &&
                near(jr_get(o0, "delta_s")->num, 300e-6));
        const jr *k1 = jr_at(jr_path(j, "diff.kernels"), 1);
        T_CHECK(k1 && strcmp(jr_get(k1, "only_in")->s, "b") == 0);
        T_CHECK(jr_len(jr_path(j, "diff.modules")) == 0);
        T_CHECK(strcmp(jr_path(j, "diff.operator_time")->s, "self_device") == 0);
        jr_free(j);
    }
    t_cli_free(&r);
    r = t_cli_run((const char *const[]){"trace", "diff", pa, pb, NULL}, 0, 0);
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "Trace diff") && strstr(r.out, "+300 us") && strstr(r.out, "aten::gelu") &&
            strstr(r.out, "(only in B)"));
    t_cli_free(&r);
    /* usage: two traces, text or json */
    r = t_cli_run((const char *const[]){"trace", "diff", pa, NULL}, 0, 0);
    T_EQ(r.code, 1);
    t_cli_free(&r);
    r = t_cli_run((const char *const[]){"trace", "diff", "--format", "html", pa, pb, NULL}, 0, 0);
    T_EQ(r.code, 1);
    t_cli_free(&r);
    /* a trace that cannot be read names its file, exit 2 */
    r = t_cli_run((const char *const[]){"trace", "diff", pa, "/nonexistent/b.json", NULL}, 0, 0);
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "/nonexistent/b.json") != NULL);
    t_cli_free(&r);
    unlink(pa);
    unlink(pb);
    free(pa);
    free(pb);
}

/* A run against itself: every delta is zero, every row in both. */
static void t_self(void) {
    mp_trace a, b;
    const char *p = "tests/traces/mobilenet_v2_sgd_loader.trace.json.gz";
    T_OK(mp_trace_open(p, NULL, &a));
    T_OK(mp_trace_open(p, NULL, &b));
    mp_trace_diff d;
    T_OK(mp_trace_diff_make(&a, &b, &d));
    T_CHECK(d.a_step == d.b_step && d.a_step > 0);
    int cpu_rows = 0;
    for (int i = 0; i < a.n_ops; i++) cpu_rows += !a.ops[i].device;
    T_EQ(d.n_ops, cpu_rows);
    T_EQ(d.n_kernels, a.n_kernels);
    const mp_tdiff_row *all[3] = {d.ops, d.kernels, d.mods};
    int n[3] = {d.n_ops, d.n_kernels, d.n_mods};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < n[k]; i++) T_CHECK(all[k][i].a == all[k][i].b && all[k][i].in_a && all[k][i].in_b);
    mp_trace_diff_free(&d);
    mp_trace_free(&a);
    mp_trace_free(&b);
}

/* Issue 31 item 10, as a user meets it: a trace against itself says "no
 * difference" (it printed 137 rows of zeros); against a trace with no
 * module scopes the modules are not all "only in" one side but the reason
 * is said; a digest is labelled as the digest it is, with the trace it was
 * made from; --digest --format html is refused (it wrote JSON). */
static void t_user(void) {
    const char *mob = "tests/traces/mobilenet_v2_sgd_loader.trace.json.gz";
    const char *vit = "tests/traces/vit_b16_adamw_stack.trace.json.gz";
    const char *r0 = "tests/traces/ddp2/rank0.trace.json.gz";
    t_cli r = t_cli_run((const char *const[]){"trace", "diff", mob, mob, NULL}, 0, 0);
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "No difference") != NULL);
    T_CHECK(strstr(r.out, "Operators") == NULL && strstr(r.out, "0 s          0 s") == NULL);
    t_cli_free(&r);
    r = t_cli_run((const char *const[]){"trace", "diff", "--format", "json", mob, mob, NULL}, 0, 0);
    T_EQ(r.code, 0);
    size_t err;
    jr *j = jr_parse(r.out, r.out_len, &err);
    T_CHECK(j && jr_path(j, "diff.no_difference") && jr_path(j, "diff.no_difference")->type == JR_BOOL && jr_path(j, "diff.no_difference")->b);
    if (j) t_json_dump("trace_diff", r.out, r.out_len);
    jr_free(j);
    t_cli_free(&r);
    /* modules on one side only */
    r = t_cli_run((const char *const[]){"trace", "diff", vit, r0, NULL}, 0, 0);
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "B has no module scopes") != NULL && strstr(r.out, "with_modules=True") != NULL);
    T_CHECK(strstr(r.out, "(only in A)") == NULL || strstr(r.out, "(only in A)") < strstr(r.out, "B has no module"));
    t_cli_free(&r);
    r = t_cli_run((const char *const[]){"trace", "diff", "--format", "json", vit, r0, NULL}, 0, 0);
    j = jr_parse(r.out, r.out_len, &err);
    T_CHECK(j && jr_path(j, "diff.modules_note")->type == JR_STR &&
            jr_path(j, "diff.no_difference")->type == JR_BOOL && !jr_path(j, "diff.no_difference")->b);
    if (j) t_json_dump("trace_diff", r.out, r.out_len);
    jr_free(j);
    t_cli_free(&r);
    /* a digest against its trace: no difference, and labelled as a digest */
    char dg[] = "/tmp/mp-diff-digest-XXXXXX";
    int fd = mkstemp(dg);
    close(fd);
    r = t_cli_run((const char *const[]){"trace", "--digest", r0, "-o", dg, NULL}, 0, 0);
    T_EQ(r.code, 0);
    t_cli_free(&r);
    r = t_cli_run((const char *const[]){"trace", "diff", dg, r0, NULL}, 0, 0);
    T_EQ(r.code, 0);
    char want[200];
    snprintf(want, sizeof want, "A (control): %s (digest of %s)", dg, r0);
    T_CHECK(strstr(r.out, want) != NULL && strstr(r.out, "No difference") != NULL);
    t_cli_free(&r);
    unlink(dg);
    /* --digest writes JSON: another --format is refused, with the way */
    r = t_cli_run((const char *const[]){"trace", "--digest", "--format", "html", r0, NULL}, 0, 0);
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--format html") && strstr(r.err, "digest") && r.out_len == 0);
    t_cli_free(&r);
}

/* Two CPU-only traces (PyTorch without Kineto): wall and self CPU time
 * compared, no device rows (every one would be 0 s against 0 s) */
static void t_cpu_only(void) {
    static const char *const body[2] = {
        "[{\"name\": \"ProfilerStep#1\", \"ph\": \"X\", \"ts\": 0, \"dur\": 1000, \"tid\": 1, "
        "\"pid\": \"CPU functions\", \"args\": {}}, {\"name\": \"aten::addmm\", \"ph\": \"X\", \"ts\": 10, "
        "\"dur\": 400, \"tid\": 1, \"pid\": \"CPU functions\", \"args\": {}}]",
        "[{\"name\": \"ProfilerStep#1\", \"ph\": \"X\", \"ts\": 0, \"dur\": 700, \"tid\": 1, "
        "\"pid\": \"CPU functions\", \"args\": {}}, {\"name\": \"aten::addmm\", \"ph\": \"X\", \"ts\": 10, "
        "\"dur\": 100, \"tid\": 1, \"pid\": \"CPU functions\", \"args\": {}}]"};
    char path[2][32];
    for (int i = 0; i < 2; i++) {
        snprintf(path[i], sizeof path[i], "/tmp/mp-diff-cpu-XXXXXX");
        int fd = mkstemp(path[i]);
        T_CHECK(fd >= 0);
        if (fd >= 0) {
            T_CHECK(write(fd, body[i], strlen(body[i])) == (ssize_t)strlen(body[i]));
            close(fd);
        }
    }
    t_cli r = t_cli_run((const char *const[]){"trace", "diff", path[0], path[1], NULL}, 0, 0);
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "wall ") != NULL && strstr(r.out, "self CPU time per step") != NULL);
    T_CHECK(strstr(r.out, "device busy") == NULL && strstr(r.out, "idle: ") == NULL &&
            strstr(r.out, "device time: ") == NULL);
    T_CHECK(strstr(r.out, "aten::addmm") != NULL);
    t_cli_free(&r);
    for (int i = 0; i < 2; i++) unlink(path[i]);
}

MP_TESTS(trace_diff) {
    {"synthetic", t_synthetic},
    {"cli", t_command},
    {"self", t_self},
    {"user", t_user},
    {"cpu_only", t_cpu_only},
};
MP_TESTS_END(trace_diff)
