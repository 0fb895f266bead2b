/* The measured run from the command line (--run and its flags), the
 * malformed corpus under --run, and the .npy reader and writer. Runs the
 * binary named by $MP_BIN (default build/modelprof). */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jsonr.h"
#include "graph/graph.h"
#include "tcli.h"
#include "test.h"

typedef t_cli rr;
static void rr_done(rr *r) { t_cli_free(r); }

#define RUN(secs, ...) t_cli_run((const char *const[]){__VA_ARGS__, NULL}, secs, 0)

/* Every file of the malformed corpus, the seeds and the crash regressions
 * under --run: exit 2 or a measured profile; never a crash, a hang or a
 * usage error. One test per folder, so that a parallel run (make check)
 * spreads them; the peak is given (--peak-gflops), not measured by each of
 * the ~80 processes. Returns the files and the runs that succeeded. */
static void corpus_under_run(const char *dirname, int *files, int *ran) {
    DIR *dir = opendir(dirname);
    if (!dir) return;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "EXPECT") == 0) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dirname, e->d_name);
        rr r = RUN(60, "-q", "--run", "--warmup", "0", "--iters", "1", "--threads", "1", "--peak-gflops", "100",
                   "--max-memory", "1G", path);
        if (r.code != 0 && r.code != 2) {
            fprintf(stderr, "    %s: exit %d: %s\n", path, r.code, r.err);
            T_CHECK(r.code == 0 || r.code == 2);
        }
        if (r.code == 0) {
            T_CHECK(strstr(r.out, "modelprof measured profile") != NULL);
            (*ran)++;
        } else {
            T_CHECK(strncmp(r.err, "modelprof: ", 11) == 0);
        }
        (*files)++;
        rr_done(&r);
    }
    closedir(dir);
}

static void t_corpus_under_run(void) {
    int files = 0, ran = 0;
    corpus_under_run("tests/corpus/malformed", &files, &ran);
    corpus_under_run("tests/corpus/seeds", &files, &ran);
    T_CHECK(files >= 40);
    T_CHECK(ran >= 1); /* some seeds are valid models and run */
}

static void t_crashes_under_run(void) {
    int files = 0, ran = 0;
    corpus_under_run("tests/corpus/crashes", &files, &ran);
    T_CHECK(files >= 20);
}

/* A weightless export whose small integer tensors (a ReduceMean's axes,
 * an Expand's shape) are in its absent external data: refused, named (the
 * portable reduction over made-up axes 0, 0 wrote past its output and
 * the process aborted) */
static void t_absent_int_data(void) {
    static const struct {
        const char *path, *tensor, *reader;
    } cases[] = {{"models/dynamo/resnet50_train_torch211.onnx", "'val_484'", "'node_mean'"},
                 {"models/dynamo/bert_cls_train_torch211.onnx", "'val_21'", "'node_expand_1'"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rr r = RUN(120, "-q", "--run", "--warmup", "0", "--iters", "1", "--threads", "1", "--peak-gflops", "100",
                   cases[i].path);
        T_EQ(r.code, 2);
        T_CHECK(strstr(r.err, cases[i].tensor) && strstr(r.err, cases[i].reader) && strstr(r.err, "absent"));
        rr_done(&r);
    }
}

/* A model whose If branches read what the enclosing graph holds
 * (tests/corpus/seeds/if_untaken_branch.onnx: an If inside an If's branch
 * squeezes NonZero's [1, n] when n is 1, else passes it on): the initializer
 * read only inside the branch is loaded (it was a NULL buffer: a crash),
 * and the If's outputs are sized by its kernel from the branch run (the
 * shape rule inferred both branches in place, the model's own values then
 * pointing into freed memory). Both branches, by the data. */
static void t_if_branches(void) {
    char dir[] = "/tmp/mp-run-if-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    static const struct {
        float s[6];
        int rank;
        int64_t want[3];
        int n;
    } cases[] = {{{1, 0, 2, 0, 0, 3}, 2, {0, 2, 5}, 3}, {{0, 0, 7, 0, 0, 0}, 1, {2}, 1}};
    for (int c = 0; c < 2; c++) {
        char in[256], out[256], res[300], arg[300];
        snprintf(in, sizeof in, "%s/s%d.npy", dir, c);
        snprintf(out, sizeof out, "%s/o%d", dir, c);
        int64_t six = 6;
        T_OK(mp_npy_write(in, MP_DT_FLOAT, 1, &six, cases[c].s));
        snprintf(arg, sizeof arg, "s=%s", in);
        rr r = RUN(60, "-q", "--run", "--warmup", "1", "--iters", "2", "--input-data", arg, "--save-outputs", out,
                   "tests/corpus/seeds/if_untaken_branch.onnx");
        T_EQ(r.code, 0);
        if (r.code) fprintf(stderr, "    %s\n", r.err);
        rr_done(&r);
        int dt, rank;
        int64_t d[8];
        void *y = NULL;
        size_t ny = 0;
        snprintf(res, sizeof res, "%s/y.npy", out);
        T_OK(mp_npy_read(res, &dt, &rank, d, &y, &ny));
        T_EQ(dt, MP_DT_INT64);
        T_EQ(rank, cases[c].rank);
        T_EQ(ny, (size_t)cases[c].n * 8);
        for (int i = 0; y && i < cases[c].n && ny == (size_t)cases[c].n * 8; i++) T_EQ(((int64_t *)y)[i], cases[c].want[i]);
        free(y);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    T_EQ(system(cmd), 0);
}

/* A Loop whose carried value grows a row a pass
 * (tests/corpus/seeds/loop_grows.onnx: from [0, 3], Concat of the pass
 * number's row; torchvision's paste_masks_in_image grows its masks so):
 * the body's input is shaped at each pass, its readers sized at run time
 * (the run refused it: "a value that changes shape between iterations
 * cannot run here") */
static void t_loop_grows(void) {
    char dir[] = "/tmp/mp-run-loop-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    rr r = RUN(60, "-q", "--run", "--warmup", "1", "--iters", "2", "--save-outputs", dir,
               "tests/corpus/seeds/loop_grows.onnx");
    T_EQ(r.code, 0);
    if (r.code) fprintf(stderr, "    %s\n", r.err);
    rr_done(&r);
    char res[300];
    snprintf(res, sizeof res, "%s/y.npy", dir);
    int dt, rank;
    int64_t d[8];
    void *y = NULL;
    size_t ny = 0;
    T_OK(mp_npy_read(res, &dt, &rank, d, &y, &ny));
    T_EQ(rank, 2);
    T_CHECK(rank == 2 && d[0] == 4 && d[1] == 3 && ny == 48);
    for (int i = 0; y && ny == 48 && i < 12; i++) T_CHECK(((float *)y)[i] == (float)(i / 3));
    free(y);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    T_EQ(system(cmd), 0);
}

/* JSON of a measured run of a fixture: the run object and the per-set
 * fields are there and consistent. */
static void t_run_json(void) {
    rr r = RUN(120, "-q", "--run", "--warmup", "1", "--iters", "4", "--threads", "1", "--dim", "batch=1",
               "--dim", "seq=8", "--format", "json", "--peak-gflops", "50", "models/llama_small.onnx");
    T_EQ(r.code, 0);
    size_t err = 0;
    jr *j = jr_parse(r.out, strlen(r.out), &err);
    T_CHECK(j != NULL);
    if (!j) {
        rr_done(&r);
        return;
    }
    T_CHECK(jr_path(j, "total.measured")->b);
    T_EQ(jr_path(j, "run.iters")->i, 4);
    T_EQ(jr_path(j, "run.warmup")->i, 1);
    T_EQ(jr_path(j, "run.threads")->i, 1);
    double med = jr_path(j, "run.latency.median_s")->num, mn = jr_path(j, "run.latency.min_s")->num;
    double p90 = jr_path(j, "run.latency.p90_s")->num;
    T_CHECK(med > 0 && mn <= med && med <= p90);
    T_CHECK(fabs(jr_path(j, "run.samples_per_s")->num - 1.0 / med) < 1e-6 / med);
    T_EQ_STR(jr_path(j, "run.peak_source")->s, "given");
    T_CHECK(jr_path(j, "run.peak_flops_per_s")->num == 50e9);
    double fl = (double)jr_path(j, "total.flops")->i;
    T_CHECK(fabs(jr_path(j, "run.achieved_flops_per_s")->num - fl / med) <= 1e-6 * fl / med);
    T_CHECK(jr_path(j, "run.peak_memory_bytes")->i >= jr_path(j, "run.arena_bytes")->i);
    T_CHECK(jr_path(j, "run.peak_rss_bytes")->i > 0);
    T_CHECK(jr_len(jr_path(j, "run.kernel_groups")) >= 3);
    /* every op type and node carries the fields; node times add up to at
     * most the whole pass (medians of parts can exceed it on a loaded machine: 2x) */
    const jr *ops = jr_get(j, "ops");
    for (int i = 0; i < jr_len(ops); i++) {
        T_CHECK(jr_get(jr_at(ops, i), "latency_s") != NULL);
        T_CHECK(jr_get(jr_at(ops, i), "achieved_flops_per_s") != NULL);
    }
    const jr *nodes = jr_get(j, "nodes");
    double sum = 0;
    int fused = 0, folded = 0;
    for (int i = 0; i < jr_len(nodes); i++) {
        const jr *n = jr_at(nodes, i);
        const jr *lat = jr_get(n, "latency_s");
        T_CHECK(lat != NULL && lat->type == JR_NUM);
        if (lat && lat->type == JR_NUM) sum += lat->num;
        const char *st = jr_get(n, "run")->s;
        fused += strcmp(st, "fused") == 0;
        folded += strcmp(st, "folded") == 0;
        if (strcmp(st, "fused") == 0) T_CHECK(jr_get(n, "fused_into") != NULL);
    }
    T_CHECK(sum > 0 && sum <= 2 * jr_path(j, "run.latency.p90_s")->num);
    /* each pass's kernels lie inside it: their median and fastest never
     * exceed the pass's (issue 18 point 5) */
    double kmed = jr_path(j, "run.kernel_time.median_s")->num, kmin = jr_path(j, "run.kernel_time.min_s")->num;
    T_CHECK(kmed > 0 && kmed <= med && kmin > 0 && kmin <= mn && kmin <= kmed);
    T_EQ(fused, jr_path(j, "run.fused_nodes")->i);
    T_EQ(folded, jr_path(j, "run.folded_nodes")->i);
    T_CHECK(folded > 0); /* the shape arithmetic of the exported attention */
    const jr *mods = jr_get(j, "modules");
    T_CHECK(jr_get(jr_at(mods, 0), "latency_s")->num > 0);
    jr_free(j);
    rr_done(&r);
    /* the text table names per pass and per call, and its kernels line
     * is never above the whole pass */
    r = RUN(120, "-q", "--run", "--warmup", "0", "--iters", "3", "--threads", "1", "--dim", "batch=1",
            "--dim", "seq=8", "models/llama_small.onnx");
    T_EQ(r.code, 0);
    const char *tab = strstr(r.out, "Measured time by operator");
    T_CHECK(tab && strstr(tab, "per pass") && strstr(tab, "per call") && strstr(tab, "median") &&
            strstr(tab, "fastest"));
    const char *kl = tab ? strstr(tab, "\nkernels ") : NULL, *wl = tab ? strstr(tab, "\nwhole pass ") : NULL;
    T_CHECK(kl && wl);
    if (kl && wl) {
        double kv = 0, wv = 0;
        char ku[8] = "", wu[8] = "";
        int calls = 0;
        T_EQ(sscanf(kl, " kernels %d %lf %7s", &calls, &kv, ku), 3);
        T_EQ(sscanf(wl, " whole pass %lf %7s", &wv, wu), 2);
        double ks = kv * (ku[0] == 'm' ? 1e-3 : ku[0] == 'u' ? 1e-6 : 1);
        double ws = wv * (wu[0] == 'm' ? 1e-3 : wu[0] == 'u' ? 1e-6 : 1);
        T_CHECK(ks > 0 && ks <= ws * 1.0001);
    }
    rr_done(&r);
    /* --no-fuse: no node is fused */
    r = RUN(120, "-q", "--run", "--warmup", "0", "--iters", "1", "--threads", "1", "--dim", "batch=1",
            "--dim", "seq=8", "--format", "json", "--no-fuse", "models/llama_small.onnx");
    T_EQ(r.code, 0);
    j = jr_parse(r.out, strlen(r.out), &err);
    T_CHECK(j && jr_path(j, "run.fused_nodes")->i == 0);
    jr_free(j);
    rr_done(&r);
}

/* --input-data and --save-outputs: the outputs are a function of the
 * input given (same input, same output; another input, another output) */
static void t_input_output_files(void) {
    char dir[] = "/tmp/mp-run-io-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    char in[256], out1[256], out2[256], res[300];
    snprintf(in, sizeof in, "%s/ids.npy", dir);
    snprintf(out1, sizeof out1, "%s/a", dir);
    snprintf(out2, sizeof out2, "%s/b", dir);
    int64_t ids[8] = {1, 5, 9, 200, 7, 31999, 0, 42}, dims[2] = {1, 8};
    T_OK(mp_npy_write(in, MP_DT_INT64, 2, dims, ids));
    char arg[300];
    snprintf(arg, sizeof arg, "input_ids=%s", in);
    rr r = RUN(120, "-q", "--run", "--warmup", "0", "--iters", "1", "--input-data", arg,
               "--save-outputs", out1, "models/llama_small.onnx");
    T_EQ(r.code, 0);
    rr_done(&r);
    r = RUN(120, "-q", "--run", "--warmup", "0", "--iters", "1", "--input-data", arg, "--threads", "1",
            "--save-outputs", out2, "models/llama_small.onnx");
    T_EQ(r.code, 0);
    rr_done(&r);
    int dt, rank, dt2, rank2;
    int64_t d1[64], d2[64];
    void *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    snprintf(res, sizeof res, "%s/logits.npy", out1);
    T_OK(mp_npy_read(res, &dt, &rank, d1, &a, &na));
    snprintf(res, sizeof res, "%s/logits.npy", out2);
    T_OK(mp_npy_read(res, &dt2, &rank2, d2, &b, &nb));
    T_EQ(dt, MP_DT_FLOAT);
    T_EQ(rank, 3);
    T_EQ(d1[1], 8);
    T_EQ(na, nb);
    /* 2 threads vs 1: the same numbers up to summation order */
    double num = 0, den = 0;
    for (size_t i = 0; a && b && i < na / 4; i++) {
        double x = ((float *)a)[i], y = ((float *)b)[i];
        num += (x - y) * (x - y);
        den += y * y;
    }
    T_CHECK(den > 0 && sqrt(num / den) < 1e-4);
    free(a);
    free(b);
    /* a wrong shape names the input; a missing file is unreadable input */
    int64_t bad[3] = {1, 2, 3};
    T_OK(mp_npy_write(in, MP_DT_INT64, 3, bad, ids));
    r = RUN(60, "-q", "--run", "--input-data", arg, "models/llama_small.onnx");
    T_CHECK(r.code != 0 && r.code < 128);
    T_CHECK(strstr(r.err, "input_ids") != NULL);
    rr_done(&r);
    snprintf(arg, sizeof arg, "input_ids=%s/none.npy", dir);
    r = RUN(60, "-q", "--run", "--input-data", arg, "models/llama_small.onnx");
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "none.npy") != NULL);
    rr_done(&r);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    T_EQ(system(cmd), 0);
}

/* --max-memory: the run is refused before it allocates, exit 2 */
static void t_max_memory(void) {
    rr r = RUN(60, "-q", "--run", "--dim", "batch=1", "--max-memory", "20M", "models/resnet18.onnx");
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, "max-memory") != NULL);
    T_CHECK(strstr(r.err, "refused before allocating") != NULL);
    rr_done(&r);
    r = RUN(60, "--run", "--iters", "0", "models/resnet18.onnx");
    T_EQ(r.code, 1);
    rr_done(&r);
    r = RUN(60, "--run", "--dim", "batch=1", "--peak-gflops", "-3", "models/resnet18.onnx");
    T_EQ(r.code, 1);
    rr_done(&r);
}

/* .npy: every dtype round-trips; malformed files are errors */
static void t_npy(void) {
    char path[] = "/tmp/mp-npy-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    static const int dts[] = {MP_DT_FLOAT, MP_DT_DOUBLE, MP_DT_FLOAT16, MP_DT_INT64, MP_DT_INT32,
                              MP_DT_INT8, MP_DT_UINT8, MP_DT_BOOL, MP_DT_UINT16, MP_DT_INT16};
    uint8_t data[6 * 8];
    for (int i = 0; i < 48; i++) data[i] = (uint8_t)(i * 7 + 1);
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        int64_t dims[2] = {2, 3};
        for (int i = 0; i < 48; i++) data[i] = (uint8_t)(dts[k] == MP_DT_BOOL ? i & 1 : i * 7 + 1);
        T_OK(mp_npy_write(path, dts[k], 2, dims, data));
        int dt, rank;
        int64_t d[64];
        void *buf = NULL;
        size_t n = 0;
        T_OK(mp_npy_read(path, &dt, &rank, d, &buf, &n));
        T_EQ(dt, dts[k]);
        T_EQ(rank, 2);
        T_EQ(d[0], 2);
        T_EQ(d[1], 3);
        T_CHECK(buf && memcmp(buf, data, n) == 0);
        free(buf);
    }
    /* a scalar and a 1-D array: "()" and "(5,)" */
    int64_t five = 5;
    T_OK(mp_npy_write(path, MP_DT_FLOAT, 1, &five, data));
    int dt, rank;
    int64_t d[64];
    void *buf = NULL;
    size_t n = 0;
    T_OK(mp_npy_read(path, &dt, &rank, d, &buf, &n));
    T_EQ(rank, 1);
    T_EQ(d[0], 5);
    free(buf);
    /* truncated data, bad magic, Fortran order */
    static const char *const bad[] = {
        "\x93NUMPY\x01\x00\x46\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }      "
        "                                   \n\x01\x02",
        "NUMPY",
        "\x93NUMPY\x01\x00\x46\x00{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }       "
        "                                  \n",
        "\x93NUMPY\x01\x00\x46\x00{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }      "
        "                                   \n",
        "\x93NUMPY\x01\x00\x46\x00{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }     "
        "                                    \n",
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        FILE *f = fopen(path, "wb");
        fwrite(bad[k], 1, strlen(bad[k]), f);
        fclose(f);
        buf = NULL;
        T_CHECK(mp_npy_read(path, &dt, &rank, d, &buf, &n) != MP_OK);
        T_CHECK(buf == NULL);
        T_CHECK(strstr(mp_last_error(), path) != NULL);
    }
    unlink(path);
}

/* Issue 24 point 2: in a measured run no by-operator row mixes fused and
 * unfused nodes. MobileNet-V2, one timed pass (its medians are that pass):
 * each node's time is its FLOPs' share of its kernel's (a head's latency_s
 * is its kernel's, its fused nodes' FLOPs are in that kernel), so an op
 * type's latency_s is the sum of its nodes' shares, and no row can run
 * faster than the fastest kernel: a row of fused BatchNormalization or
 * Clip nodes reads the FLOP rate of the kernels they ran in. */
static void t_fused_rows(void) {
    rr r = RUN(120, "-q", "--run", "--warmup", "1", "--iters", "1", "--dim", "batch=1", "--peak-gflops", "100",
               "--format", "json", "models/mobilenet_v2.onnx");
    T_EQ(r.code, 0);
    size_t err = 0;
    jr *root = jr_parse(r.out, r.out_len, &err);
    const jr *nodes = root ? jr_get(root, "nodes") : NULL, *ops = root ? jr_get(root, "ops") : NULL;
    T_CHECK(nodes && ops);
    if (!nodes || !ops) {
        jr_free(root);
        rr_done(&r);
        return;
    }
    int n = jr_len(nodes);
    double *gflops = calloc((size_t)n, sizeof *gflops), *gcount = calloc((size_t)n, sizeof *gcount);
    int *head = calloc((size_t)n, sizeof *head);
    /* each node's kernel: itself, or the node it is fused into */
    for (int i = 0; i < n; i++) {
        const jr *nd = jr_at(nodes, i), *fi = jr_get(nd, "fused_into");
        head[i] = i;
        if (fi) {
            head[i] = -1;
            for (int k = 0; k < n; k++)
                if (!strcmp(jr_get(jr_at(nodes, k), "name")->s, fi->s)) head[i] = k;
            T_CHECK(head[i] >= 0);
            if (head[i] < 0) head[i] = i;
        }
        if (strcmp(jr_get(nd, "run")->s, "folded") == 0) continue;
        gflops[head[i]] += (double)jr_get(nd, "flops")->i;
        gcount[head[i]] += 1;
    }
    double fastest = 0;
    for (int i = 0; i < n; i++) {
        const jr *lat = jr_get(jr_at(nodes, i), "latency_s");
        if (head[i] == i && lat && lat->type == JR_NUM && lat->num > 0 && gflops[i] / lat->num > fastest)
            fastest = gflops[i] / lat->num;
    }
    int fused_total = 0;
    for (int o = 0; o < jr_len(ops); o++) {
        const jr *row = jr_at(ops, o), *lat = jr_get(row, "latency_s");
        const char *op = jr_get(row, "op")->s;
        double want = 0;
        for (int i = 0; i < n; i++) {
            const jr *nd = jr_at(nodes, i);
            if (strcmp(jr_get(nd, "op")->s, op) || !strcmp(jr_get(nd, "run")->s, "folded")) continue;
            double t = jr_get(jr_at(nodes, head[i]), "latency_s")->num;
            want += gflops[head[i]] > 0 ? t * (double)jr_get(nd, "flops")->i / gflops[head[i]] : t / gcount[head[i]];
        }
        double got = lat && lat->type == JR_NUM ? lat->num : 0;
        if (fabs(got - want) > 1e-9 + 1e-6 * want)
            mp_t_fail(__FILE__, __LINE__, "op %s: latency_s %.9g, its nodes' shares add up to %.9g", op, got, want);
        double fl = (double)jr_get(row, "flops")->i;
        if (got > 0 && fl / got > fastest * (1 + 1e-6))
            mp_t_fail(__FILE__, __LINE__, "op %s runs at %.4g FLOP/s, above the fastest kernel's %.4g", op, fl / got, fastest);
        fused_total += (int)jr_get(row, "fused")->i;
    }
    T_EQ(fused_total, jr_path(root, "run.fused_nodes")->i);
    free(gflops);
    free(gcount);
    free(head);
    jr_free(root);
    rr_done(&r);
}

MP_TESTS(run_cli){
    {"crashes_under_run", t_crashes_under_run},
    {"corpus_under_run", t_corpus_under_run},
    {"absent_int_data", t_absent_int_data},
    {"if_branches", t_if_branches},
    {"loop_grows", t_loop_grows},
    {"run_json", t_run_json},
    {"fused_rows", t_fused_rows},
    {"input_output_files", t_input_output_files},
    {"max_memory", t_max_memory},
    {"npy", t_npy},
};
MP_TESTS_END(run_cli)
