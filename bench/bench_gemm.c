/* The per-shape GEMM table (issue 16): C[M,N] = A[M,K] B[K,N] in fp32 on
 * the shapes of the bench models: oneDNN's matmul primitive as modelprof
 * makes it (a one-node plan forced onto it: B a weight, reordered once
 * into the layout the primitive chose), plain dnnl_sgemm and OpenBLAS's
 * cblas_sgemm (Debian libopenblas0-pthread, dlopened; "-" when absent),
 * then modelprof's own MatMul (a one-node plan with the library timed at
 * plan time, named in the last column) and its MatMul+Add with a bias
 * (the fused group of a Linear layer, A as [1, M, K] as exporters write
 * it), GFLOP/s (of the product) of the best call. The engines alternate per round so a shared machine's noise falls
 * on all of them alike. ONEDNN_MAX_CPU_ISA=AVX2 limits oneDNN (ours and
 * dnnl_sgemm) to AVX2, OPENBLAS_CORETYPE=Haswell OpenBLAS (make
 * bench-gemm sets both for its second table).
 *
 *   bench_gemm [--threads N] [--rounds R]
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "modelprof.h"
#include "run/dnnl.h"
#include "run/run.h"
#include "tbuild.h"

/* tbuild's checks report here (a bench has no test runner) */
void mp_t_fail(const char *file, int line, const char *fmt, ...);
void mp_t_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench_gemm: %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

typedef int (*dnnl_sgemm_fn)(char, char, long, long, long, float, const float *, long, const float *,
                             long, float, float *, long);
typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *,
                               int, float, float *, int);
typedef void (*set_threads_fn)(int);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int threads = 2, rounds = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_gemm [--threads N] [--rounds R]\n");
            return 1;
        }
    }
    if (threads < 1 || rounds < 1) {
        fprintf(stderr, "bench_gemm: --threads and --rounds must be >= 1\n");
        return 1;
    }
    /* ViT-B/16 (197 rows), BERT-base seq 128, a square, ResNet-50's 1x1
     * convolutions as products (56x56 and 28x28 maps) */
    static const int shapes[][3] = {{197, 768, 2304}, {197, 768, 3072}, {197, 3072, 768}, {197, 768, 768},
                                    {128, 768, 2304}, {128, 768, 3072}, {128, 3072, 768}, {128, 768, 768},
                                    {1024, 1024, 1024}, {3136, 64, 256}, {784, 512, 128}};
    /* OpenBLAS's pthreads spin after each call (by default for ~2^28
     * cycles) and would steal the cores from the next engine: a short
     * timeout, set before it loads */
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
    void *dn = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    void *ob = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    dnnl_sgemm_fn fd = dn ? (dnnl_sgemm_fn)dlsym(dn, "dnnl_sgemm") : NULL;
    cblas_sgemm_fn fo = ob ? (cblas_sgemm_fn)dlsym(ob, "cblas_sgemm") : NULL;
    set_threads_fn fot = ob ? (set_threads_fn)dlsym(ob, "openblas_set_num_threads") : NULL;
    if (fot) fot(threads);
    const char *isa = getenv("ONEDNN_MAX_CPU_ISA");
    printf("GEMM fp32, %d thread%s, best of %d rounds x 3 calls, GFLOP/s; oneDNN ISA %s\n", threads,
           threads == 1 ? "" : "s", rounds, isa && *isa ? isa : "native");
    printf("%-16s %10s %10s %10s %10s %9s %10s  %s\n", "M x K x N", "primitive", "dnnl_sgemm", "OpenBLAS",
           "modelprof", "ours/best", "+bias", "modelprof's choice");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int M = shapes[si][0], K = shapes[si][1], N = shapes[si][2];
        mp_model *m = tb_new(17);
        tb_input(m, "A", MP_DT_FLOAT, 2, TB_DIMS(M, K));
        tb_weight(m, "B", MP_DT_FLOAT, 2, TB_DIMS(K, N));
        tb_node(m, "MatMul", "A,B", "C");
        tb_output(m, "C");
        mp_profile *p = tb_prof(m);
        /* the same product with a bias Add after it (fused: MatMul+Add) */
        mp_model *m2 = tb_new(17);
        tb_input(m2, "A", MP_DT_FLOAT, 3, TB_DIMS(1, M, K));
        tb_weight(m2, "B", MP_DT_FLOAT, 2, TB_DIMS(K, N));
        tb_weight(m2, "bias", MP_DT_FLOAT, 1, TB_DIMS(N));
        tb_node(m2, "MatMul", "A,B", "P");
        tb_node(m2, "Add", "P,bias", "C");
        tb_output(m2, "C");
        mp_profile *p2 = tb_prof(m2);
        mp_run_options o;
        mp_run_options_default(&o);
        o.threads = threads;
        o.progress = 0;
        o.node_timing = 0;
        mp_exec *pl = NULL, *pl2 = NULL, *plp = NULL;
        int old = mp_dnnl_gemm_force(0);
        mp_status pst = mp_exec_create(p, &o, &plp);
        mp_dnnl_gemm_force(old);
        if (pst || mp_exec_create(p, &o, &pl) || mp_exec_create(p2, &o, &pl2)) {
            fprintf(stderr, "bench_gemm: %s\n", mp_last_error());
            return 2;
        }
        const char *choice = pl->n_steps > 0 && pl->steps[0].k.kname ? pl->steps[0].k.kname : "onednn:matmul";
        float *a = malloc(sizeof(float) * (size_t)M * (size_t)K);
        float *b = malloc(sizeof(float) * (size_t)K * (size_t)N);
        float *c = malloc(sizeof(float) * (size_t)M * (size_t)N);
        if (!a || !b || !c) return 2;
        for (long i = 0; i < (long)M * K; i++) a[i] = (float)(i % 7) * 0.1f - 0.3f;
        for (long i = 0; i < (long)K * N; i++) b[i] = (float)(i % 5) * 0.1f - 0.2f;
        if (mp_exec_set_input(pl, "A", MP_DT_FLOAT, 2, TB_DIMS(M, K), a, sizeof(float) * (size_t)M * (size_t)K) ||
            mp_exec_set_input(plp, "A", MP_DT_FLOAT, 2, TB_DIMS(M, K), a, sizeof(float) * (size_t)M * (size_t)K) ||
            mp_exec_set_input(pl2, "A", MP_DT_FLOAT, 3, TB_DIMS(1, M, K), a,
                              sizeof(float) * (size_t)M * (size_t)K)) {
            fprintf(stderr, "bench_gemm: %s\n", mp_last_error());
            return 2;
        }
        /* engines: 0 the primitive, 1 dnnl_sgemm, 2 OpenBLAS, 3 modelprof,
         * 4 modelprof + bias */
        double best[5] = {1e30, 1e30, 1e30, 1e30, 1e30};
        for (int r = 0; r < rounds + 1; r++)
            for (int e0 = 0; e0 < 5; e0++) {
                int e = r % 2 ? 4 - e0 : e0;
                nanosleep(&(struct timespec){0, 5000000}, NULL); /* the last engine's threads settle */
                for (int k = 0; k < 3; k++) {
                    double t = now();
                    if (e == 0) mp_exec_run(plp);
                    else if (e == 1 && fd) fd('N', 'N', M, N, K, 1.f, a, K, b, N, 0.f, c, N);
                    else if (e == 2 && fo) fo(101, 111, 111, M, N, K, 1.f, a, K, b, N, 0.f, c, N);
                    else if (e == 3) mp_exec_run(pl);
                    else if (e == 4) mp_exec_run(pl2);
                    else break;
                    t = now() - t;
                    if (r > 0 && t < best[e]) best[e] = t; /* round 0 warms up */
                }
            }
        double fl = 2.0 * M * N * K, g[5];
        for (int e = 0; e < 5; e++) g[e] = best[e] < 1e29 ? fl / best[e] / 1e9 : 0;
        double other = g[0] > g[1] ? g[0] : g[1];
        if (g[2] > other) other = g[2];
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%dx%d", M, K, N);
        printf("%-16s %10.1f %10.1f ", shape, g[0], g[1]);
        if (g[2] > 0) printf("%10.1f", g[2]);
        else printf("%10s", "-");
        printf(" %10.1f %8.2fx %10.1f  %s\n", g[3], other > 0 ? g[3] / other : 0, g[4], choice);
        fflush(stdout);
        mp_exec_free(plp);
        mp_exec_free(pl);
        mp_exec_free(pl2);
        tb_done(m, p);
        tb_done(m2, p2);
        free(a), free(b), free(c);
    }
    return 0;
}
