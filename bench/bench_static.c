/* In-process timing of a static profile, the counterpart of the baseline's
 * in-process timing of onnx.load + infer_shapes (no process start in
 * either). usage: bench_static MODEL RUNS [NAME=VALUE dims...]
 * Prints one JSON line: {"profile_s": [...], "report_s": [...]} where
 * profile = load + infer + cost + aggregate, report = the JSON report
 * written to /dev/null, as the command benchmark writes it (an in-memory
 * stream would time its own buffer growth). */
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

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_static MODEL RUNS [NAME=VALUE ...]\n");
        return 1;
    }
    int runs = atoi(argv[2]);
    if (runs < 1) runs = 1;
    double *prof = calloc((size_t)runs, sizeof *prof), *rep = calloc((size_t)runs, sizeof *rep);
    mp_report_options ro;
    mp_report_options_default(&ro);
    ro.format = MP_FORMAT_JSON;
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        mp_model *m = NULL;
        mp_profile *p = NULL;
        if (mp_model_load(argv[1], &m)) goto fail;
        for (int i = 3; i < argc; i++) {
            char name[128];
            const char *eq = strchr(argv[i], '=');
            if (!eq || (size_t)(eq - argv[i]) >= sizeof name) goto fail;
            memcpy(name, argv[i], (size_t)(eq - argv[i]));
            name[eq - argv[i]] = 0;
            if (mp_model_set_dim(m, name, atoll(eq + 1))) goto fail;
        }
        if (mp_profile_static(m, &p)) goto fail;
        double t1 = now();
        FILE *f = fopen("/dev/null", "w");
        if (!f || mp_report_write(p, &ro, f)) goto fail;
        fclose(f);
        double t2 = now();
        prof[r] = t1 - t0;
        rep[r] = t2 - t1;
        mp_profile_free(p);
        mp_model_free(m);
        continue;
    fail:
        fprintf(stderr, "bench_static: %s\n", mp_last_error());
        return 2;
    }
    printf("{\"profile_s\": [");
    for (int r = 0; r < runs; r++) printf("%s%.9f", r ? ", " : "", prof[r]);
    printf("], \"report_s\": [");
    for (int r = 0; r < runs; r++) printf("%s%.9f", r ? ", " : "", rep[r]);
    printf("]}\n");
    free(prof);
    free(rep);
    return 0;
}
