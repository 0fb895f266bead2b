/* The command line: exit codes, messages, report files, golden reports.
 * Runs the binary named by $MP_BIN (default build/modelprof). */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jsonr.h"
#include "tcli.h"
#include "test.h"

typedef t_cli run_result;
static run_result run(const char *const *args) { return t_cli_run(args, 0, 0); }
static void done(run_result *r) { t_cli_free(r); }

#define RUN(...) run((const char *const[]){__VA_ARGS__, NULL})
#define SNAP "tests/snapshots/v22_train_adam.pickle"
#define TRACE1 "tests/traces/cpu/sgd_legacy.trace.json.gz"

static void t_help_version(void) {
    run_result r = RUN("--help");
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "usage: modelprof") && strstr(r.out, "--dim"));
    done(&r);
    r = RUN("--version");
    T_EQ(r.code, 0);
    T_CHECK(strncmp(r.out, "modelprof ", 10) == 0);
    done(&r);
}

static void t_usage_errors(void) {
    run_result r = run((const char *const[]){NULL});
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "usage") != NULL);
    done(&r);
    r = RUN("--frobnicate", "models/resnet18.onnx");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--frobnicate") != NULL);
    done(&r);
    r = RUN("--dim", "batch", "models/resnet18.onnx");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--dim 'batch'") != NULL);
    done(&r);
    r = RUN("--dim", "nosuch=3", "models/resnet18.onnx");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "nosuch") && strstr(r.err, "batch"));
    done(&r);
    r = RUN("--input", "nosuch=1x2", "models/resnet18.onnx");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "nosuch") != NULL);
    done(&r);
    r = RUN("--format", "xml", "models/resnet18.onnx");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "xml") != NULL);
    done(&r);
    r = RUN("--op-top", "-3", "models/resnet18.onnx");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--op-top '-3'") != NULL);
    done(&r);
    r = RUN("--depth", "-3", "models/resnet18.onnx");
    T_EQ(r.code, 1);
    done(&r);
}

static void t_model_errors(void) {
    run_result r = RUN("/nonexistent/dir/m.onnx");
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "/nonexistent/dir/m.onnx") != NULL);
    done(&r);
    r = RUN("README.md");
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "README.md") && strstr(r.err, "ONNX"));
    done(&r);
}

static void t_json_file(void) {
    char dir[] = "/tmp/mp-cli-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    char path[128];
    snprintf(path, sizeof path, "%s/profile.json", dir);
    run_result r = RUN("--input", "input=8x3x224x224", "models/resnet18.onnx", "--format", "json",
                       "-o", path);
    T_EQ(r.code, 0);
    T_EQ(r.out_len, 0);
    done(&r);
    size_t len = 0;
    char *text = jr_slurp(path, &len);
    T_CHECK(text != NULL);
    jr *j = text ? jr_parse(text, len, NULL) : NULL;
    T_CHECK(j != NULL);
    if (j) {
        const jr *macs = jr_path(j, "total.macs");
        T_CHECK(macs && macs->type == JR_NUM && macs->is_int);
        if (macs) T_EQ(macs->i, 8 * 1814073344ll);
        T_CHECK(jr_path(j, "total.params") && jr_path(j, "total.flops") &&
                jr_path(j, "total.param_bytes") && jr_path(j, "total.activation_peak_bytes"));
        const jr *batch = jr_path(j, "dims.batch");
        T_CHECK(batch && batch->i == 8);
        T_CHECK(jr_get(j, "params_by_dtype") && jr_get(j, "ops") && jr_get(j, "modules") &&
                jr_get(j, "nodes") && jr_get(j, "uncounted"));
        const jr *mods = jr_get(j, "modules");
        T_CHECK(jr_len(mods) > 10);
        const jr *m0 = jr_at(mods, 0);
        T_CHECK(jr_get(m0, "path") && jr_get(m0, "depth") && jr_get(m0, "params") &&
                jr_get(m0, "macs") && jr_get(m0, "flops") && jr_get(m0, "param_bytes"));
    }
    jr_free(j);
    free(text);
    /* a folder that does not exist: exit 2, nothing written */
    snprintf(path, sizeof path, "%s/missing/profile.json", dir);
    r = RUN("models/resnet18.onnx", "--dim", "batch=1", "-o", path);
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "missing/profile.json") != NULL);
    done(&r);
    struct stat st;
    T_CHECK(stat(path, &st) != 0);
}

static void t_output_through_symlink(void) {
    /* -o to a symlink replaces the file it points to and keeps the link */
    char dir[] = "/tmp/mp-cli-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    char target[128], link[128];
    snprintf(target, sizeof target, "%s/real.json", dir);
    snprintf(link, sizeof link, "%s/link.json", dir);
    FILE *f = fopen(target, "w");
    fputs("old", f);
    fclose(f);
    T_CHECK(symlink(target, link) == 0);
    run_result r = RUN("models/resnet18.onnx", "--dim", "batch=1", "--format", "json", "-o", link,
                       "-q");
    T_EQ(r.code, 0);
    done(&r);
    struct stat st;
    T_CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    size_t len = 0;
    char *text = jr_slurp(target, &len);
    T_CHECK(text && len > 1000 && text[0] == '{');
    free(text);
}

/* -o naming what the command reads (through a link too) is refused, the
 * input left whole; so are --chrome-trace and -o naming one file. */
static void t_output_is_input(void) {
    char dir[] = "/tmp/mp-cli-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    char model[128], link[128], ct[128];
    snprintf(model, sizeof model, "%s/m.onnx", dir);
    snprintf(link, sizeof link, "%s/l.onnx", dir);
    snprintf(ct, sizeof ct, "%s/t.json", dir);
    size_t len = 0;
    char *bytes = jr_slurp("models/alexnet.onnx", &len);
    FILE *f = fopen(model, "wb");
    if (f && bytes) fwrite(bytes, 1, len, f);
    if (f) fclose(f);
    T_CHECK(symlink(model, link) == 0);
    run_result r = RUN(model, "-o", link, "-q");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "names the model") != NULL);
    done(&r);
    r = RUN("plan", link, "-o", model, "-q");
    T_EQ(r.code, 1);
    done(&r);
    r = RUN(model, "--run", "--iters", "1", "--warmup", "0", "--chrome-trace", ct, "-o", ct, "-q");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "one would replace the other") != NULL);
    done(&r);
    size_t len2 = 0;
    char *after = jr_slurp(model, &len2);
    T_CHECK(after && bytes && len2 == len && memcmp(after, bytes, len) == 0);
    free(after);
    free(bytes);
    unlink(link);
    unlink(model);
    rmdir(dir);
}

static void copy_file(const char *from, const char *to) {
    size_t len = 0;
    char *b = jr_slurp(from, &len);
    FILE *f = fopen(to, "wb");
    if (f && b) fwrite(b, 1, len, f);
    if (f) fclose(f);
    free(b);
}

static bool same_bytes(const char *a, const char *b) {
    size_t la = 0, lb = 0;
    char *x = jr_slurp(a, &la), *y = jr_slurp(b, &lb);
    bool same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

/* Every file a command reads is one an output may not replace (one check,
 * mp_cli_output_clash): a trace inside the folder read, --plan-model,
 * --input-data, --chrome-trace's target and a --save-outputs file. Before,
 * each of these was overwritten (exit 0). */
static void t_output_is_any_input(void) {
    char dir[] = "/tmp/mp-clash-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    char tdir[160], t1[200], pm[160], npy[160], sv[160], svm[200];
    snprintf(tdir, sizeof tdir, "%s/traces", dir);
    T_CHECK(mkdir(tdir, 0777) == 0);
    snprintf(t1, sizeof t1, "%s/rank1.trace.json.gz", tdir);
    copy_file("tests/traces/ddp2/rank0.trace.json.gz", t1);
    char t0[200];
    snprintf(t0, sizeof t0, "%s/rank0.trace.json.gz", tdir);
    copy_file("tests/traces/ddp2/rank1.trace.json.gz", t0);
    run_result r = RUN("trace", tdir, "-o", t1);
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "-o") && strstr(r.err, "a trace of the folder"));
    done(&r);
    T_CHECK(same_bytes(t1, "tests/traces/ddp2/rank0.trace.json.gz"));
    snprintf(pm, sizeof pm, "%s/pm.onnx", dir);
    copy_file("models/resnet18.onnx", pm);
    r = RUN("memory", "tests/snapshots/v22_train_adam.pickle", "--plan-model", pm, "--dim", "batch=1", "-o", pm);
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--plan-model") != NULL);
    done(&r);
    T_CHECK(same_bytes(pm, "models/resnet18.onnx"));
    snprintf(npy, sizeof npy, "%s/in.npy", dir);
    copy_file("models/resnet18.onnx", npy);   /* refused before it is read */
    char data[200];
    snprintf(data, sizeof data, "input=%s", npy);
    r = RUN("models/resnet18.onnx", "--run", "--input-data", data, "-o", npy);
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--input-data file") != NULL);
    done(&r);
    r = RUN("models/resnet18.onnx", "--run", "--input-data", data, "--chrome-trace", npy);
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--chrome-trace") && strstr(r.err, "--input-data file"));
    done(&r);
    T_CHECK(same_bytes(npy, "models/resnet18.onnx"));
    /* the model saved over by its own output, logits.npy */
    snprintf(sv, sizeof sv, "%s/sv", dir);
    T_CHECK(mkdir(sv, 0777) == 0);
    snprintf(svm, sizeof svm, "%s/logits.npy", sv);
    copy_file("models/resnet18.onnx", svm);
    r = RUN(svm, "--dim", "batch=1", "--run", "--iters", "1", "--warmup", "0", "--save-outputs", sv, "-q");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--save-outputs") && strstr(r.err, "names the model"));
    done(&r);
    T_CHECK(same_bytes(svm, "models/resnet18.onnx"));
    unlink(svm);
    rmdir(sv);
    unlink(npy);
    unlink(pm);
    unlink(t0);
    unlink(t1);
    rmdir(tdir);
    rmdir(dir);
}

/* A child writing the file `from` into the FIFO `fifo`; its pid. */
static pid_t fifo_writer(const char *from, const char *fifo) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        size_t len = 0;
        char *b = jr_slurp(from, &len);
        int fd = open(fifo, O_WRONLY);
        if (fd >= 0 && b) {
            for (size_t at = 0; at < len;) {
                ssize_t k = write(fd, b + at, len - at);
                if (k <= 0) break;
                at += (size_t)k;
            }
        }
        _exit(0);
    }
    return pid;
}

/* A FIFO is read once, through one open: a trace (plain or gzipped) or a
 * digest gives the report the file gives. Before, the trace was opened
 * twice (a digest sniffed, then read) and the command hung, or said "not
 * JSON" on the bytes left. What is read twice is refused at once: trace
 * diff of one FIFO, --ort-profile. */
static void t_fifo_inputs(void) {
    char dir[] = "/tmp/mp-fifo-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/f", dir);
    T_CHECK(mkfifo(fifo, 0600) == 0);
    run_result want = t_cli_run((const char *const[]){"trace", TRACE1, "--format", "json", NULL}, 60, 0);
    T_EQ(want.code, 0);
    char plain[160], cmd[400];
    snprintf(plain, sizeof plain, "%s/plain.json", dir);
    snprintf(cmd, sizeof cmd, "zcat %s > %s", TRACE1, plain);
    T_EQ(system(cmd), 0);
    const char *src[2] = {TRACE1, plain};   /* gzipped, plain */
    for (int k = 0; k < 2; k++) {
        pid_t w = fifo_writer(src[k], fifo);
        run_result r = t_cli_run((const char *const[]){"trace", fifo, "--format", "json", NULL}, 30, 0);
        waitpid(w, NULL, 0);
        T_EQ(r.code, 0);
        /* the same report but for the file's name (and gzipped or not) */
        T_CHECK(r.out_len + 60 > want.out_len && r.out_len < want.out_len + 60);
        T_CHECK(strstr(r.out, "\"steps\"") != NULL);
        done(&r);
    }
    unlink(plain);
    done(&want);
    run_result r = t_cli_run((const char *const[]){"trace", "diff", fifo, fifo, NULL}, 10, 0);
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "one pipe") != NULL);
    done(&r);
    r = t_cli_run((const char *const[]){"models/resnet18.onnx", "--ort-profile", fifo, NULL}, 10, 0);
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "not a regular file") != NULL);
    done(&r);
    unlink(fifo);
    rmdir(dir);
}

/* One --dim and --input parser for every subcommand (mp_cli_dim,
 * mp_cli_input): before, memory --plan-model took batch=abc and batch=0 as
 * 0 (exit 0), plan planned batch=0 (0 samples), took a repeated dim (the
 * last) and an --input ending in 'x', and 70 dims were "not integers". */
static void t_one_dim_parser(void) {
    static const char *const pre[][4] = {
        {"models/resnet18.onnx", NULL},
        {"plan", "models/resnet18.onnx", NULL},
        {"memory", SNAP, "--plan-model", "models/resnet18.onnx"},
    };
    static const char *const who[] = {"modelprof: ", "modelprof plan: ", "modelprof memory: "};
    static const struct {
        const char *flag, *val, *says;
    } bad[] = {
        {"--dim", "batch=abc", "expected NAME=VALUE with a positive integer"},
        {"--dim", "batch=0", "a dimension must be at least 1"},
        {"--dim", "batch=-5", "expected NAME=VALUE with a positive integer"},
        {"--dim", "batch= 5", "expected NAME=VALUE with a positive integer"},
    };
    for (int c = 0; c < 3; c++)
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            const char *args[12];
            int n = 0;
            for (int k = 0; k < 4 && pre[c][k]; k++) args[n++] = pre[c][k];
            args[n++] = bad[b].flag;
            args[n++] = bad[b].val;
            args[n] = NULL;
            run_result r = run(args);
            T_EQ(r.code, 1);
            T_CHECK(strncmp(r.err, who[c], strlen(who[c])) == 0 && strstr(r.err, bad[b].says) &&
                    strstr(r.err, bad[b].val));
            done(&r);
        }
    for (int c = 0; c < 3; c++) {
        const char *args[12];
        int n = 0;
        for (int k = 0; k < 4 && pre[c][k]; k++) args[n++] = pre[c][k];
        args[n++] = "--dim", args[n++] = "batch=2", args[n++] = "--dim", args[n++] = "batch=3", args[n] = NULL;
        run_result r = run(args);
        T_EQ(r.code, 1);
        T_CHECK(strstr(r.err, "already given (batch=2)") != NULL);
        done(&r);
    }
    char many[400] = "input=";
    for (int i = 0; i < 70; i++) strcat(many, i ? "x1" : "1");
    for (int c = 0; c < 2; c++) {
        run_result r = c ? RUN("plan", "models/resnet18.onnx", "--input", "input=1x3x224x224x")
                         : RUN("models/resnet18.onnx", "--input", "input=1x3x224x224x");
        T_EQ(r.code, 1);
        T_CHECK(strstr(r.err, "ends in 'x'") != NULL);
        done(&r);
        r = c ? RUN("plan", "models/resnet18.onnx", "--input", many) : RUN("models/resnet18.onnx", "--input", many);
        T_EQ(r.code, 1);
        T_CHECK(strstr(r.err, "more than 64 dims") != NULL);
        done(&r);
    }
}

/* memory diff --device N: a device neither snapshot has is exit 1 naming
 * their devices, as one snapshot's --device is. Before: exit 0, headers
 * only. */
static void t_memory_diff_device(void) {
    run_result r = RUN("memory", "diff", SNAP, SNAP, "--device", "7");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--device 7") && strstr(r.err, "neither snapshot") && strstr(r.err, ": 0;"));
    done(&r);
    r = RUN("memory", "diff", SNAP, SNAP, "--device", "0");
    T_EQ(r.code, 0);
    done(&r);
}

/* -o '' is a usage error in every subcommand ("-o needs a file name",
 * exit 1; before: trace, trace diff and memory exited 2 with "no report
 * file name"). A bad flag value is a usage error (plan --gpu nosuch: was 2);
 * a layout the model cannot take is 2 in plan and in memory --plan-model
 * alike (memory: was 1). */
static void t_usage_exit_codes(void) {
    static const char *const cmds[][6] = {
        {"trace", TRACE1, NULL},
        {"trace", "diff", TRACE1, TRACE1, NULL},
        {"memory", SNAP, NULL},
        {"plan", "models/resnet18.onnx", NULL},
        {"models/resnet18.onnx", NULL},
    };
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
        const char *args[10];
        int n = 0;
        for (; cmds[c][n]; n++) args[n] = cmds[c][n];
        args[n++] = "-o", args[n++] = "", args[n] = NULL;
        run_result r = run(args);
        T_EQ(r.code, 1);
        T_CHECK(strstr(r.err, "-o needs a file name") != NULL);
        done(&r);
    }
    run_result r = RUN("plan", "models/resnet18.onnx", "--dim", "batch=1", "--gpu", "nosuch");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--gpu nosuch: unknown GPU") != NULL);
    done(&r);
    r = RUN("memory", SNAP, "--plan-model", "models/resnet18.onnx", "--dim", "batch=1", "--gpu", "nosuch");
    T_EQ(r.code, 1);
    done(&r);
    r = RUN("plan", "models/gpt2.onnx", "--dim", "batch=1", "--dim", "seq=8", "--tp", "5");
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "--tp 5 does not divide") != NULL);
    done(&r);
    r = RUN("memory", SNAP, "--plan-model", "models/gpt2.onnx", "--dim", "batch=1", "--dim", "seq=8", "--tp", "5");
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "--tp 5 does not divide") != NULL);
    done(&r);
}

/* trace parses its flags with the helpers every subcommand uses
 * (mp_cli_opt, mp_cli_int, mp_cli_num): --flag=value is taken, an empty,
 * spaced or hex number refused. Before: --top '' and --depth '' were 0,
 * --top ' 5' 5, --peak-tflops 0x10 16, and --format=json an "unknown
 * option". */
static void t_trace_flags(void) {
    static const char *const bad[][2] = {
        {"--top", ""}, {"--depth", ""}, {"--top", " 5"}, {"--peak-tflops", "0x10"},
        {"--peak-tflops", "inf"}, {"--threads", "+2"}, {"--top", "5 "},
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        run_result r = RUN("trace", TRACE1, bad[b][0], bad[b][1]);
        T_EQ(r.code, 1);
        T_CHECK(strstr(r.err, bad[b][0]) != NULL);
        done(&r);
    }
    run_result a = RUN("trace", TRACE1, "--format", "json", "--top", "3");
    run_result b = RUN("trace", TRACE1, "--format=json", "--top=3");
    T_EQ(a.code, 0);
    T_EQ(b.code, 0);
    T_CHECK(a.out_len == b.out_len && memcmp(a.out, b.out, a.out_len) == 0);
    done(&a);
    done(&b);
}

/* "--" ends the options in every subcommand (mp_cli_operand): a file
 * whose name begins with '-' is read. Before: "unknown option '--'". */
static void t_end_of_options(void) {
    char m[64], sn[64], tr[64];
    snprintf(m, sizeof m, "-mp-eoo-%d.onnx", (int)getpid());
    snprintf(sn, sizeof sn, "-mp-eoo-%d.pickle", (int)getpid());
    snprintf(tr, sizeof tr, "-mp-eoo-%d.trace.json.gz", (int)getpid());
    copy_file("models/resnet18.onnx", m);
    copy_file(SNAP, sn);
    copy_file(TRACE1, tr);
    run_result r = RUN("--dim", "batch=1", "--", m);
    T_EQ(r.code, 0);
    done(&r);
    r = RUN("plan", "--dim", "batch=1", "-q", "--", m);
    T_EQ(r.code, 0);
    done(&r);
    r = RUN("memory", "--", sn);
    T_EQ(r.code, 0);
    done(&r);
    r = RUN("memory", "diff", "--", sn, sn);
    T_EQ(r.code, 0);
    done(&r);
    r = RUN("trace", "--", tr);
    T_EQ(r.code, 0);
    done(&r);
    r = RUN("trace", "diff", "--", tr, tr);
    T_EQ(r.code, 0);
    done(&r);
    /* after "--" an option is a file name */
    r = RUN("models/resnet18.onnx", "--", "--help");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "more than one model") != NULL);
    done(&r);
    unlink(m);
    unlink(sn);
    unlink(tr);
}

/* plan --gpu list reads every flag first: -o is honoured, --format json
 * and a model or plan flag refused, an unknown flag too; --gpu=list is the
 * same. Before: what followed --gpu list was ignored (-o printed to stdout,
 * --bogus exited 0) and 'plan m.onnx --gpu=list' said "unknown GPU". */
static void t_gpu_list_flags(void) {
    run_result want = RUN("plan", "--gpu", "list");
    T_EQ(want.code, 0);
    T_CHECK(strstr(want.out, "h100") != NULL);
    char dir[] = "/tmp/mp-gl-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    char out[128];
    snprintf(out, sizeof out, "%s/gl.txt", dir);
    run_result r = RUN("plan", "--gpu", "list", "-o", out);
    T_EQ(r.code, 0);
    T_EQ((long)r.out_len, 0L);
    done(&r);
    size_t len = 0;
    char *got = jr_slurp(out, &len);
    T_CHECK(got && len == want.out_len && memcmp(got, want.out, len) == 0);
    free(got);
    unlink(out);
    rmdir(dir);
    r = RUN("plan", "--gpu=list");
    T_EQ(r.code, 0);
    T_CHECK(r.out_len == want.out_len);
    done(&r);
    r = RUN("plan", "--gpu", "list", "--format", "json");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--format json") != NULL);
    done(&r);
    r = RUN("plan", "--gpu", "list", "--bogus");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--bogus") != NULL);
    done(&r);
    r = RUN("plan", "models/resnet18.onnx", "--gpu=list");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--gpu list") && strstr(r.err, "models/resnet18.onnx"));
    done(&r);
    done(&want);
}

/* The plan's numbers have ranges (the option table, src/plan/options.c):
 * out of range is exit 1 naming the flag and the range. Before: --mem-gb 0
 * showed no GPU, --bandwidth-gbs 0 --gpu h100 was dropped, --peak-tflops 0
 * with --mem-gb and --bandwidth-gbs gave a contradictory plan,
 * --reserve-gb 1e30 showed 0 B, and --peak-tflops 1e-300 (trace) and
 * --peak-gflops 1e-300 (the profile) gave absurd MFU. */
static void t_number_ranges(void) {
    static const char *const bad[][6] = {
        {"--mem-gb", "0"},
        {"--bandwidth-gbs", "0", "--gpu", "h100"},
        {"--peak-tflops", "0", "--mem-gb", "80", "--bandwidth-gbs", "3000"},
        {"--reserve-gb", "1e30"},
        {"--node-overhead-us", "1e30"},
        {"--peak-tflops", "1e-300", "--bandwidth-gbs", "3000"},
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        const char *args[16] = {"plan", "models/resnet18.onnx", "--dim", "batch=8"};
        int n = 4;
        for (int k = 0; k < 6 && bad[b][k]; k++) args[n++] = bad[b][k];
        args[n] = NULL;
        run_result r = run(args);
        T_EQ(r.code, 1);
        char want[80];
        snprintf(want, sizeof want, "%s '%s': out of range", bad[b][0], bad[b][1]);
        T_CHECK(strstr(r.err, want) && strstr(r.err, " from ") && strstr(r.err, " to "));
        done(&r);
    }
    run_result r = RUN("plan", "models/resnet18.onnx", "--dim", "batch=8", "--mem-gb", "80", "--reserve-gb", "0", "-q");
    T_EQ(r.code, 0);
    done(&r);
    r = RUN("trace", TRACE1, "--peak-tflops", "1e-300");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--peak-tflops '1e-300'") && strstr(r.err, "1 GFLOP/s"));
    done(&r);
    r = RUN("models/resnet18.onnx", "--run", "--peak-gflops", "1e-300");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--peak-gflops '1e-300'") && strstr(r.err, "1 GFLOP/s"));
    done(&r);
}

/* Messages name the flag and the real problem. Before: a 40-character
 * --limit name was "expected NAME=VALUE"; --max-memory -1 said "limit
 * '-1'"; --max-nodes 0x10 spoke of memory; plan's and memory's option
 * errors had no "(see ... --help)", memory's not its subcommand. */
static void t_messages_name_the_flag(void) {
    run_result r = RUN("models/resnet18.onnx", "--limit", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=3");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "unknown limit 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'") && strstr(r.err, "nodes"));
    done(&r);
    r = RUN("models/resnet18.onnx", "--max-memory", "-1");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--max-memory '-1'") != NULL);
    done(&r);
    r = RUN("models/resnet18.onnx", "--max-nodes", "0x10");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--max-nodes '0x10'") && !strstr(r.err, "memory"));
    done(&r);
    r = RUN("plan", "models/resnet18.onnx", "--zero", "7");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "modelprof plan: --zero '7'") && strstr(r.err, "(see modelprof plan --help)"));
    done(&r);
    r = RUN("plan", "models/resnet18.onnx", "--fsdp", "--zero", "1");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "(see modelprof plan --help)") != NULL);
    done(&r);
    r = RUN("memory", SNAP, "--plan-model", "models/resnet18.onnx", "--zero", "7");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "modelprof memory: --zero '7'") && strstr(r.err, "(see modelprof memory --help)"));
    done(&r);
}

/* Every subcommand reads a flag's value with the same helpers (mp_cli_opt,
 * mp_cli_int; the plan's option table as strictly): a number with a space,
 * a '+' or hex is refused. Before: the profile took --depth ' 2', plan
 * --zero ' 1' and --mem-gb 0x10 (16), memory --top ' 5'. */
static void t_strict_numbers(void) {
    static const char *const bad[][6] = {
        {"models/resnet18.onnx", "--depth", " 2"},
        {"models/resnet18.onnx", "--top", "+2"},
        {"plan", "models/resnet18.onnx", "--zero", " 1"},
        {"plan", "models/resnet18.onnx", "--mem-gb", "0x10"},
        {"plan", "models/resnet18.onnx", "--mem-gb", "inf"},
        {"memory", SNAP, "--top", " 5"},
        {"memory", SNAP, "--device", "0x0"},
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        run_result r = run(bad[b]);
        T_EQ(r.code, 1);
        done(&r);
    }
    run_result r = RUN("plan", "models/resnet18.onnx", "--dim=batch=1", "--mem-gb=.5", "--zero=1", "-q");
    T_EQ(r.code, 0);
    done(&r);
}

/* Compare the output with tests/golden/NAME; MP_UPDATE_GOLDEN=1 rewrites. */
static void golden(const char *name, const char *const *args) {
    run_result r = run(args);
    T_EQ(r.code, 0);
    char path[256];
    snprintf(path, sizeof path, "tests/golden/%s", name);
    if (getenv("MP_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "wb");
        fwrite(r.out, 1, r.out_len, f);
        fclose(f);
    }
    size_t len = 0;
    char *want = jr_slurp(path, &len);
    if (!want) {
        mp_t_fail(__FILE__, __LINE__, "missing golden %s (MP_UPDATE_GOLDEN=1 creates it)", path);
    } else if (len != r.out_len || memcmp(want, r.out, len) != 0) {
        size_t i = 0;
        while (i < len && i < r.out_len && want[i] == r.out[i]) i++;
        mp_t_fail(__FILE__, __LINE__, "%s differs from the report at byte %zu: ...%.60s", path, i,
                  r.out + (i > 20 ? i - 20 : 0));
    }
    free(want);
    done(&r);
}

static void t_golden_reports(void) {
    golden("resnet18.txt", (const char *const[]){"models/resnet18.onnx", "--dim", "batch=1", NULL});
    golden("bert_base_d3.txt",
           (const char *const[]){"--dim", "batch=80", "--dim", "seq=128", "models/bert_base.onnx",
                                 "--depth", "3", "--top", "3", NULL});
    golden("llama_small.json",
           (const char *const[]){"models/llama_small.onnx", "--dim", "batch=1", "--dim", "seq=64",
                                 "--format", "json", NULL});
    golden("qwen3_2layers_d2.txt",
           (const char *const[]){"models/dynamo/qwen3_2layers.onnx", "--input", "input_ids=2x128",
                                 "--depth", "2", "--top", "2", NULL});
    /* fvcore's flop_count_table layout: module rows to depth 2, FLOPs by
     * the 4 op types with the most, the rest in "other" */
    golden("bert_base_module_ops_d2.txt",
           (const char *const[]){"models/bert_base.onnx", "--dim", "batch=1", "--dim", "seq=128",
                                 "--by-module-op", "--depth", "2", "--op-top", "4", "--no-detailed",
                                 "--top", "0", "--no-ops", "-q", NULL});
    golden("resnet18_functions_d2.txt",
           (const char *const[]){"models/resnet18_functions.onnx", "--dim", "batch=1", "--depth",
                                 "2", "--no-ops", NULL});
}

static void t_unresolved_dims_reported(void) {
    run_result r = RUN("models/bert_base.onnx", "--dim", "batch=1", "-q");
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "seq") && strstr(r.out, "--dim"));
    done(&r);
}


/* Issue 18 point 4: flags that would do nothing are refused, a truncated
 * model or a trace given to the wrong command is said for what it is. */
static void t_flags_that_do_nothing(void) {
    static const char *const run_only[][2] = {
        {"--save-outputs", "/tmp"}, {"--iters", "3"},      {"--warmup", "1"},
        {"--peak-gflops", "100"},   {"--threads", "2"},    {"--input-data", "x=a.npy"},
        {"--seed", "1"},            {"--no-fuse", NULL},   {"--no-node-timing", NULL}};
    for (size_t k = 0; k < sizeof run_only / sizeof run_only[0]; k++) {
        run_result r = run_only[k][1]
                           ? RUN("models/resnet18.onnx", run_only[k][0], run_only[k][1])
                           : RUN("models/resnet18.onnx", run_only[k][0]);
        T_EQ(r.code, 1);
        T_CHECK(strstr(r.err, run_only[k][0]) && strstr(r.err, "--run"));
        T_EQ(r.out_len, 0);
        done(&r);
    }
    run_result r = RUN("models/resnet18.onnx", "--run", "--threads", "0");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--threads '0'") != NULL);
    done(&r);
    /* more threads than cores: a warning, and the run still happens */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char many[32];
    snprintf(many, sizeof many, "%ld", cores + 3);
    r = RUN("models/resnet18.onnx", "--run", "--threads", many, "--iters", "1", "--warmup", "0",
            "--dim", "batch=1", "--format", "json");
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.err, "warning: --threads") && strstr(r.err, "cores"));
    done(&r);
    r = RUN("models/resnet18.onnx", "--dim", "batch=2", "--dim", "batch=3");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "batch=3") && strstr(r.err, "already"));
    done(&r);
    /* --csv-table chooses a CSV table: without --format csv it did nothing */
    r = RUN("models/resnet18.onnx", "--csv-table", "modules");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "--format csv") != NULL);
    done(&r);
    r = RUN("trace", "tests/traces/vit_b16_adamw_stack.trace.json.gz", "--csv-table", "kernels");
    T_EQ(r.code, 1);
    done(&r);
    r = RUN("memory", "tests/snapshots/markup_names.pickle", "--csv-table", "sites");
    T_EQ(r.code, 1);
    done(&r);
    r = RUN("models/resnet18.onnx", "--dim", "batch=0");
    T_EQ(r.code, 1);
    T_CHECK(strstr(r.err, "batch=0") && strstr(r.err, "at least 1"));
    done(&r);
    /* --top -1: every module of each depth in the aggregated block */
    run_result all = RUN("models/resnet18.onnx", "--dim", "batch=1", "--top", "-1");
    run_result three = RUN("models/resnet18.onnx", "--dim", "batch=1");
    T_EQ(all.code, 0);
    T_EQ(three.code, 0);
    T_CHECK(all.out_len > three.out_len);
    done(&all);
    done(&three);
    r = RUN("trace", "--top", "-1", "tests/traces/mobilenet_v2_sgd_loader.trace.json.gz");
    T_EQ(r.code, 0);
    done(&r);
    /* a torch.profiler trace given to the static command */
    r = RUN("tests/traces/mobilenet_v2_sgd_loader.trace.json.gz");
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "modelprof trace") != NULL);
    done(&r);
    r = RUN("tests/corpus/trace/flops_backward.json");
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "torch.profiler") && strstr(r.err, "modelprof trace"));
    done(&r);
    /* and a model given to the trace command */
    r = RUN("trace", "models/resnet18.onnx");
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "ONNX model") && strstr(r.err, "modelprof models/resnet18.onnx"));
    done(&r);
    /* a model cut short */
    char path[] = "/tmp/mp-trunc-XXXXXX";
    int fd = mkstemp(path);
    T_CHECK(fd >= 0);
    FILE *in = fopen("models/resnet18.onnx", "rb");
    T_CHECK(in != NULL);
    char buf[4096];
    size_t n = in ? fread(buf, 1, sizeof buf, in) : 0;
    if (in) fclose(in);
    T_CHECK(n == sizeof buf);
    T_CHECK(write(fd, buf, n) == (ssize_t)n);
    close(fd);
    r = RUN(path);
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, path) && strstr(r.err, "truncated") && strstr(r.err, "4096"));
    done(&r);
    unlink(path);
}

/* A write that fails (a full disk, a file size limit) is exit 2 with one
 * line naming where it wrote, and leaves no file: every subcommand, every
 * format, stdout or -o. Before, trace, memory and plan exited 0 after a
 * failed write, and trace renamed a truncated file into place. */
static void t_write_errors(void) {
    static const char *const cmds[][10] = {
        {"models/resnet18.onnx", NULL},
        {"models/resnet18.onnx", "--format", "json", NULL},
        {"models/resnet18.onnx", "--format", "html", NULL},
        {"trace", "tests/traces/ddp2", NULL},
        {"trace", "tests/traces/ddp2", "--format", "json", NULL},
        {"trace", "tests/traces/ddp2", "--format", "html", NULL},
        {"trace", "tests/traces/ddp2", "--format", "csv", NULL},
        {"trace", "--digest", TRACE1, NULL},
        {"trace", "diff", TRACE1, TRACE1, NULL},
        {"memory", SNAP, NULL},
        {"memory", SNAP, "--format", "csv", NULL},
        {"memory", SNAP, "--format", "json", NULL},
        {"memory", "diff", SNAP, SNAP, NULL},
        {"plan", "models/resnet18.onnx", "--dim", "batch=8", "--format", "json", NULL},
        {"plan", "models/resnet18.onnx", "--dim", "batch=8", NULL},
    };
    char dir[] = "/tmp/mp-wfail-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    char out[128];
    snprintf(out, sizeof out, "%s/report", dir);
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
        const char *args[16];
        int n = 0;
        for (; cmds[c][n]; n++) args[n] = cmds[c][n];
        args[n] = NULL;
        /* stdout on a full device */
        t_cli r = t_cli_run_to(args, "/dev/full");
        T_EQ(r.code, 2);
        T_CHECK(strstr(r.err, "cannot write standard output: No space left on device") != NULL);
        if (r.code != 2) fprintf(stderr, "  stdout full: %s\n", cmds[c][0]);
        t_cli_free(&r);
        /* -o on a full device */
        args[n] = "-o", args[n + 1] = "/dev/full", args[n + 2] = NULL;
        r = t_cli_run(args, 60, 0);
        T_EQ(r.code, 2);
        T_CHECK(strstr(r.err, "cannot write /dev/full: No space left on device") != NULL);
        t_cli_free(&r);
        /* -o a file cut short by the size limit: nothing renamed into place */
        args[n + 1] = out;
        r = t_cli_run(args, 60, 300);
        T_EQ(r.code, 2);
        /* (html: the limit stops its JSON, in a temporary file, first) */
        T_CHECK(strstr(r.err, "cannot write") && (strstr(r.err, out) || strstr(r.err, "HTML report")));
        if (r.code != 2 || !strstr(r.err, "cannot write")) fprintf(stderr, "  -o capped: %s %s: %s\n", cmds[c][0], cmds[c][1], r.err);
        t_cli_free(&r);
        unlink(out);
        DIR *d = opendir(dir);
        int files = 0;
        for (struct dirent *e; d && (e = readdir(d));) files += e->d_name[0] != '.' || strlen(e->d_name) > 2;
        if (d) closedir(d);
        T_EQ(files, 0);
    }
    /* plan --gpu list: its table too */
    t_cli r = t_cli_run_to((const char *const[]){"plan", "--gpu", "list", NULL}, "/dev/full");
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "cannot write standard output") != NULL);
    t_cli_free(&r);
    rmdir(dir);
}

MP_TESTS(cli){
    {"help_version", t_help_version},
    {"usage_errors", t_usage_errors},
    {"flags_that_do_nothing", t_flags_that_do_nothing},
    {"model_errors", t_model_errors},
    {"json_file", t_json_file},
    {"output_through_symlink", t_output_through_symlink},
    {"output_is_input", t_output_is_input},
    {"output_is_any_input", t_output_is_any_input},
    {"golden_reports", t_golden_reports},
    {"unresolved_dims_reported", t_unresolved_dims_reported},
    {"write_errors", t_write_errors},
    {"fifo_inputs", t_fifo_inputs},
    {"one_dim_parser", t_one_dim_parser},
    {"memory_diff_device", t_memory_diff_device},
    {"usage_exit_codes", t_usage_exit_codes},
    {"trace_flags", t_trace_flags},
    {"end_of_options", t_end_of_options},
    {"gpu_list_flags", t_gpu_list_flags},
    {"number_ranges", t_number_ranges},
    {"messages_name_the_flag", t_messages_name_the_flag},
    {"strict_numbers", t_strict_numbers},
};
MP_TESTS_END(cli)
