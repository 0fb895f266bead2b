/* modelprof's side of the speed comparison (bench/run_peers.py): plans a
 * model once through the library API, then serves timing requests on
 * stdin so the driver can alternate engines without counting process
 * start. Protocol: a line "N" runs the plan N times and answers one line
 * with the N wall times in milliseconds; "q" or end of input quits.
 *
 *   bench_run MODEL.onnx [--threads N] [--dim NAME=V]... [--no-fuse] [--portable] [--conv IMPL]
 *
 * --conv IMPL runs every convolution that the plan-time chooser would time
 * on oneDNN's implementation whose name starts with IMPL ("gemm", "jit",
 * "brg"; the default one where there is none), to compare them per shape
 * (with ONEDNN_VERBOSE=1).
 * --portable runs every node on its portable kernel (none on oneDNN), to
 * time the portable kernels themselves.
 *
 * Runs are whole-plan runs without per-node timers (node_timing 0), as
 * ONNX Runtime's and PyTorch's are timed: like with like. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "modelprof.h"

extern bool mp_run_portable_only; /* the library's internal switch (src/run/run.h) */
extern const char *mp_dnnl_conv_force(const char *impl_prefix); /* src/run/dnnl.h */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int die(const char *what) {
    fprintf(stderr, "bench_run: %s: %s\n", what, mp_last_error());
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_run MODEL.onnx [--threads N] [--dim NAME=V]... [--no-fuse] [--portable] [--conv IMPL]\n");
        return 1;
    }
    mp_model *m;
    if (mp_model_load(argv[1], &m)) return die(argv[1]);
    mp_run_options o;
    mp_run_options_default(&o);
    o.node_timing = 0;
    o.progress = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            o.threads = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--no-fuse") == 0) {
            o.fuse = 0;
        } else if (strcmp(argv[i], "--conv") == 0 && i + 1 < argc) {
            mp_dnnl_conv_force(argv[++i]);
        } else if (strcmp(argv[i], "--portable") == 0) {
            mp_run_portable_only = true;
        } else if (strcmp(argv[i], "--dim") == 0 && i + 1 < argc) {
            char name[128];
            const char *a = argv[++i], *eq = strchr(a, '=');
            if (!eq || (size_t)(eq - a) >= sizeof name) return die("--dim wants NAME=V");
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            if (mp_model_set_dim(m, name, atoll(eq + 1))) return die("--dim");
        } else {
            fprintf(stderr, "bench_run: unknown argument %s\n", argv[i]);
            return 1;
        }
    }
    mp_profile *p;
    if (mp_profile_static(m, &p)) return die("profile");
    mp_exec *pl;
    if (mp_exec_create(p, &o, &pl)) return die("plan");
    if (mp_exec_run(pl)) return die("run");
    /* "ready FLOPS PEAK": the model's forward FLOPs (static profile) and the
     * machine's measured fp32 GEMM peak at these threads (FLOP/s), so the
     * harness can print the fraction of the peak each run reaches */
    mp_totals tot;
    mp_profile_totals(p, &tot);
    printf("ready %llu %.6g\n", (unsigned long long)tot.flops, mp_peak_flops(o.threads, NULL));
    fflush(stdout);
    char line[64];
    double *t = NULL;
    while (fgets(line, sizeof line, stdin)) {
        if (line[0] == 'q') break;
        int n = atoi(line);
        if (n <= 0) continue;
        double *nt = realloc(t, (size_t)n * sizeof *t);
        if (!nt) return die("out of memory");
        t = nt;
        for (int i = 0; i < n; i++) {
            double t0 = now_ms();
            if (mp_exec_run(pl)) return die("run");
            t[i] = now_ms() - t0;
        }
        for (int i = 0; i < n; i++) printf(i ? " %.4f" : "%.4f", t[i]);
        printf("\n");
        fflush(stdout);
    }
    free(t);
    mp_exec_free(pl);
    mp_profile_free(p);
    mp_model_free(m);
    return 0;
}
