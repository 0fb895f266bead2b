/* Speed of the training planner (issue 15 point 7): planning a 70B graph
 * with every option on, and --fit over every layout of 1,024 GPUs, timed
 * in process, in alternation with the static profile of the same graph
 * (load + infer + cost + aggregate: the peer the plan builds on).
 * usage: bench_plan MODEL RUNS [NAME=VALUE dims...]
 * Prints the medians, the ratios to the static profile and the targets
 * (plan < 100 ms, --fit over 1,024 GPUs < 1 s). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "modelprof.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int load(const char *path, int argc, char **argv, mp_model **m, mp_profile **p) {
    if (mp_model_load(path, m)) return -1;
    for (int i = 0; i < argc; i++) {
        char name[128];
        const char *eq = strchr(argv[i], '=');
        if (!eq || (size_t)(eq - argv[i]) >= sizeof name) return -1;
        memcpy(name, argv[i], (size_t)(eq - argv[i]));
        name[eq - argv[i]] = 0;
        if (mp_model_set_dim(*m, name, atoll(eq + 1))) return -1;
    }
    return mp_profile_static(*m, p) ? -1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_plan MODEL RUNS [NAME=VALUE ...]\n");
        return 1;
    }
    int runs = atoi(argv[2]);
    if (runs < 1) runs = 1;
    double *prof = calloc((size_t)runs, sizeof *prof), *plan = calloc((size_t)runs, sizeof *plan);
    double *fit = calloc((size_t)runs, sizeof *fit);
    if (!prof || !plan || !fit) return 1;
    mp_model *m = NULL;
    mp_profile *p = NULL;
    if (load(argv[1], argc - 3, argv + 3, &m, &p)) {
        fprintf(stderr, "bench_plan: %s\n", mp_last_error());
        return 1;
    }
    mp_totals tot;
    mp_profile_totals(p, &tot);
    /* every option on */
    mp_tplan_options all;
    mp_tplan_options_default(&all);
    all.precision = MP_PREC_BF16_MIXED;
    all.optimizer = MP_OPT_ADAMW;
    all.checkpointing = 1;
    all.zero = 1;
    all.dp = 8;
    all.tp = 8;
    all.pp = 8;
    all.micro_batches = 32;
    all.gpu = "h100-sxm";
    all.tokens = 2e12;
    mp_tplan_options fo;
    mp_tplan_options_default(&fo);
    fo.precision = MP_PREC_BF16_MIXED;
    fo.checkpointing = 1;
    fo.gpu = "h100-sxm";
    fo.fit = 1;
    fo.gpus = 1024;
    int n_fit = 0;
    for (int r = 0; r < runs; r++) {
        /* alternate: the static profile (the peer), the plan, the fit */
        double t0 = now();
        mp_model *m2 = NULL;
        mp_profile *p2 = NULL;
        if (load(argv[1], argc - 3, argv + 3, &m2, &p2)) goto fail;
        double t1 = now();
        mp_profile_free(p2);
        mp_model_free(m2);
        double t2 = now();
        mp_tplan *pl = NULL;
        if (mp_tplan_create(p, &all, &pl)) goto fail;
        double t3 = now();
        mp_tplan_free(pl);
        double t4 = now();
        if (mp_tplan_create(p, &fo, &pl)) goto fail;
        double t5 = now();
        if (r == 0) {
            FILE *f = fopen("/dev/null", "w");
            if (f) {
                mp_tplan_write(pl, MP_FORMAT_JSON, f);
                fclose(f);
            }
        }
        mp_tplan_free(pl);
        prof[r] = t1 - t0;
        plan[r] = t3 - t2;
        fit[r] = t5 - t4;
        n_fit++;
    }
    double mp = median(prof, runs), ml = median(plan, runs), mf = median(fit, runs);
    printf("bench_plan: %s, %.2f G params, %d nodes, %d runs (median; machine shared)\n", argv[1],
           (double)tot.params / 1e9, tot.nodes, runs);
    printf("  static profile (load + infer + cost):  %8.1f ms  (the peer)\n", mp * 1e3);
    printf("  plan, every option on:                 %8.1f ms  %.2fx the static profile  target < 100 ms: %s\n",
           ml * 1e3, ml / mp, ml < 0.1 ? "met" : "MISSED");
    printf("  --fit over the layouts of 1,024 GPUs:  %8.1f ms  %.2fx the static profile  target < 1 s: %s\n",
           mf * 1e3, mf / mp, mf < 1.0 ? "met" : "MISSED");
    printf("{\"plan_s\": %.6f, \"fit_s\": %.6f, \"profile_s\": %.6f}\n", ml, mf, mp);
    mp_profile_free(p);
    mp_model_free(m);
    free(prof);
    free(plan);
    free(fit);
    return ml < 0.1 && mf < 1.0 ? 0 : 2;
fail:
    fprintf(stderr, "bench_plan: %s\n", mp_last_error());
    return 1;
}
