/* The timed runs: warm-up, then `iters` runs each timing every step with
 * the monotonic clock (clock_gettime, a vDSO call); medians and minima per
 * node, module, operator type and kernel group; the machine's peak from a
 * short GEMM; the memory the run took. Fills the profile's measured
 * fields. */
#include "run/run.h"
#include "analyze/analyze.h"

#include "run/dnnl.h"
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

double mp_run_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The fp32 peak of this machine with `threads` threads, in FLOP/s (0: no
 * oneDNN). Two candidates multiply 1024x1024x1024 fp32 matrices (large
 * enough for every thread to reach its FMA rate, small enough to stay in
 * cache tiles): the matmul primitive with its weights in the layout it
 * chose (as MatMul, Gemm and the fused groups run), dnnl_sgemm and
 * OpenBLAS (when it loads: a product may run on either). Each is
 * called after one warm-up until its best call has not improved by more
 * than 1% for 8 calls (at least 10 calls, then at most 0.5 s; another job
 * on a core slows some calls, rarely all; a candidate whose best of three
 * calls is under half the best candidate's stops there, one whose warm-up
 * is under a quarter of it after the warm-up), and the peak is
 * the faster candidate's best call. Measured once per process and thread
 * count. `how` (may be NULL) receives a line saying how it was obtained. */
enum { MP__PEAK_S = 1024, MP__PEAK_MAXT = 256 };

static double mp__peak_cache[MP__PEAK_MAXT + 1];
static char mp__peak_how[MP__PEAK_MAXT + 1][192];
static pthread_mutex_t mp__peak_mu = PTHREAD_MUTEX_INITIALIZER;

static double mp__peak(int threads, const char **how, bool again);

static double mp__peak_one(int which, int threads, const float *a, const float *b, float *c, int *calls,
                           double beat) {
    mp_dnnl_probe *pr = mp_dnnl_probe_new(which, threads, MP__PEAK_S, a, b, c);
    *calls = 0;
    double S = MP__PEAK_S, w0 = mp_run_now();
    if (!pr || !mp_dnnl_probe_run(pr, threads)) { /* the warm-up */
        mp_dnnl_probe_free(pr);
        return 0;
    }
    /* a warm-up four times slower than the best candidate's best call:
     * this one cannot win (the warm-up's packing and first touch cost less) */
    if (beat > 0 && 2.0 * S * S * S / (mp_run_now() - w0) < 0.25 * beat) {
        mp_dnnl_probe_free(pr);
        return 0;
    }
    double best = 0, spent = 0;
    int since = 0, n = 0;
    while (n < 10 || (since < 8 && spent < 0.5)) {
        double t0 = mp_run_now();
        if (!mp_dnnl_probe_run(pr, threads)) {
            best = 0;
            break;
        }
        double dt = mp_run_now() - t0;
        spent += dt;
        n++;
        if (best == 0 || dt < best * 0.99) since = 0;
        else since++;
        if (best == 0 || dt < best) best = dt;
        if (n >= 200) break;
        /* a candidate whose best of three calls is under half the best
         * candidate's peak cannot win: stopped (OpenBLAS on a CPU it does
         * not know runs its generic kernel, 2 s of calls for nothing) */
        if (n >= 3 && beat > 0 && 2.0 * S * S * S / best < 0.5 * beat) break;
    }
    mp_dnnl_probe_free(pr);
    *calls = n;
    return best > 0 ? 2.0 * S * S * S / best : 0;
}

double mp_run_peak_flops(int threads, const char **how) { return mp__peak(threads, how, false); }

double mp_run_peak_flops_again(int threads, const char **how) { return mp__peak(threads, how, true); }

double mp_peak_flops(int threads, const char **how) {
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    return mp__peak(threads > 0 ? threads : (int)(nc > 0 ? nc : 1), how, false);
}

/* The physical cores `threads` threads can occupy: distinct (package,
 * core) pairs among the CPUs this process may run on, at most threads
 * (threads when the topology cannot be read). Two threads on the
 * siblings of one core share its FMA units. */
/* CPU cpu's topology number `leaf` (core_id, physical_package_id); -1
 * when it cannot be read. */
static long mp__topology(int cpu, const char *leaf) {
    char path[128];
    long v = -1;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, leaf);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%ld", &v) != 1) v = -1;
        fclose(f);
    }
    return v;
}

static int mp__cores(int threads) {
    cpu_set_t set;
    if (threads <= 1 || sched_getaffinity(0, sizeof set, &set) != 0) return threads;
    int n = 0;
    long keys[256];
    for (int cpu = 0; cpu < CPU_SETSIZE && n < 256; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        long pkg = mp__topology(cpu, "physical_package_id"), core = mp__topology(cpu, "core_id");
        if (pkg < 0 || core < 0) return threads;
        long key = pkg * 1000000 + core;
        bool seen = false;
        for (int i = 0; i < n && !seen; i++) seen = keys[i] == key;
        if (!seen) keys[n++] = key;
    }
    return n > 0 && n < threads ? n : threads;
}

/* The best of the three libraries at `threads` threads on a, b, c:
 * FLOP/s, and which (*bi) after how many calls (*calls). */
static double mp__peak_libs(int threads, const float *a, const float *b, float *c, int *bi, int *calls) {
    int n[3] = {0, 0, 0};
    double pk[3] = {0, 0, 0};
    *bi = 0;
    for (int i = 0; i < 3; i++) {
        pk[i] = mp__peak_one(i, threads, a, b, c, &n[i], pk[*bi]);
        if (pk[i] > pk[*bi]) *bi = i;
    }
    *calls = n[*bi];
    return pk[*bi];
}

/* The peak from the cache, or measured. Again (`again`: a kernel ran
 * faster than the cached peak): the GEMM at these threads once more, and
 * one thread's best times the cores the threads occupy (a ceiling: on a
 * machine another job keeps busy, a GEMM split over all threads waits for
 * the slowest, while kernels of independent parts, a bidirectional
 * recurrent layer's two directions, do not); the highest of the three is
 * kept. */
static double mp__peak(int threads, const char **how, bool again) {
    if (how) *how = NULL;
    int slot = threads > 0 && threads <= MP__PEAK_MAXT ? threads : 0;
    pthread_mutex_lock(&mp__peak_mu);
    double peak = mp__peak_cache[slot];
    if (peak > 0 && !again) {
        if (how) *how = mp__peak_how[slot];
        pthread_mutex_unlock(&mp__peak_mu);
        return peak;
    }
    size_t nb = sizeof(float) * MP__PEAK_S * MP__PEAK_S;
    float *a = NULL, *b = NULL, *c = NULL;
    if (posix_memalign((void **)&a, 64, nb) || posix_memalign((void **)&b, 64, nb) ||
        posix_memalign((void **)&c, 64, nb)) {
        free(a);
        free(b);
        pthread_mutex_unlock(&mp__peak_mu);
        return 0;
    }
    uint64_t s = 7;
    for (int i = 0; i < MP__PEAK_S * MP__PEAK_S; i++) {
        a[i] = (float)((double)(mp_run_rng(&s) >> 11) / 9007199254740992.0) - 0.5f;
        b[i] = (float)((double)(mp_run_rng(&s) >> 11) / 9007199254740992.0) - 0.5f;
        c[i] = 0;
    }
    /* the libraries a product may run on (dnnl.c's per-shape choice) */
    static const char *const names[3] = {"oneDNN matmul", "dnnl_sgemm", "OpenBLAS sgemm"};
    int bi, calls;
    double multi = mp__peak_libs(threads, a, b, c, &bi, &calls), one = 0;
    int cores = 0, b1 = 0, calls1 = 0;
    if (again && threads > 1) {
        cores = mp__cores(threads);
        one = mp__peak_libs(1, a, b, c, &b1, &calls1) * cores;
    }
    free(a);
    free(b);
    free(c);
    double before = mp__peak_cache[slot];
    peak = multi > one ? multi : one;
    if (before >= peak) {
        peak = before;
        if (how) *how = mp__peak_how[slot];
    } else if (peak > 0) {
        if (peak == multi)
            snprintf(mp__peak_how[slot], sizeof mp__peak_how[slot],
                     "best %dx%dx%d fp32 GEMM, %s, %d thread%s, best of %d calls", MP__PEAK_S, MP__PEAK_S,
                     MP__PEAK_S, names[bi], threads, threads == 1 ? "" : "s", calls);
        else
            snprintf(mp__peak_how[slot], sizeof mp__peak_how[slot],
                     "best %dx%dx%d fp32 GEMM on 1 thread, %s, best of %d calls, x %d cores (the %d-thread GEMM "
                     "was slower: a busy machine)",
                     MP__PEAK_S, MP__PEAK_S, MP__PEAK_S, names[b1], calls1, cores, threads);
        mp__peak_cache[slot] = peak;
        if (how) *how = mp__peak_how[slot];
    }
    pthread_mutex_unlock(&mp__peak_mu);
    return peak;
}

static void mp__progress(const mp_exec *pl, double start, int done, int total, bool *shown) {
    if (!pl->o.progress || !isatty(2)) return;
    double el = mp_run_now() - start;
    if (el < 1.0 && !*shown) return;
    if (done < total)
        fprintf(stderr, "\rmodelprof: run %d/%d (%.1f s)", done, total, el);
    else
        fprintf(stderr, "\r%60s\r", "");
    *shown = true;
}

/* Kernel names outlive the plan: the oneDNN glue's and ours are string
 * constants; the portable kernel's record is the plan's, its name is not. */
static const char *mp__kernel_name(const char *name) {
    return strcmp(name, "portable") == 0 ? "portable" : name;
}

/* What ran the step: the kernel's name, or what its prepare chose */
static const char *mp__step_kernel(const mp_step *sp) {
    if (sp->k.kname) return sp->k.kname;
    return sp->kern && sp->kern->name ? mp__kernel_name(sp->kern->name) : "";
}

static int mp__grp_cmp(const void *a, const void *b) {
    const mp_groupstat *x = a, *y = b;
    if (x->latency_s != y->latency_s) return x->latency_s < y->latency_s ? 1 : -1;
    return strcmp(x->name, y->name);
}

static mp_status mp__fill(mp_exec *pl, mp_profile *p, int iters) {
    mp_graph *g = pl->g;
    mp_model *m = pl->m;
    int ns = pl->n_steps, nm = m->n_modules ? m->n_modules : 1;
    int nn = g->n_nodes;
    mp_status st = mp_profile_alloc_measured(p, ns); /* a profile measured before: freed */
    if (st) return st;
    double *col = malloc(sizeof *col * (size_t)(iters + 1));
    double *grp = calloc((size_t)(ns + 1) * (size_t)iters, sizeof *grp);
    int *step_grp = calloc((size_t)ns + 1, sizeof *step_grp);
    int *node_step = malloc(sizeof *node_step * ((size_t)nn + 1));
    if (!col || !grp || !step_grp || !node_step)
        st = mp_error(MP_ERR_NOMEM, "out of memory");
    if (st) goto done;
    bool timed = pl->o.node_timing != 0;
    for (int k = 0; k < nn; k++) {
        node_step[k] = -1;
        p->node_head[k] = k;
        p->node_lat[k] = timed ? 0 : -1;
        p->node_lat_min[k] = timed ? 0 : -1;
        p->node_state[k] = pl->folded[k] ? MP_NODE_FOLDED : MP_NODE_RUN;
    }
    p->run.fused = 0;
    /* kernel groups */
    for (int s = 0; s < ns; s++) {
        const mp_step *sp = &pl->steps[s];
        const char *key = sp->group ? sp->group : g->nodes[sp->node].op;
        int gi = -1;
        const char *kern = mp__step_kernel(sp);
        for (int j = 0; j < p->n_groups; j++)
            if (strcmp(p->groups[j].name, key) == 0 && strcmp(p->groups[j].kernel, kern) == 0) gi = j;
        if (gi < 0) {
            gi = p->n_groups++;
            p->groups[gi].name = strdup(key);
            if (!p->groups[gi].name) {
                st = mp_error(MP_ERR_NOMEM, "out of memory");
                goto done;
            }
            p->groups[gi].fused = sp->group != NULL;
            p->groups[gi].kernel = mp__step_kernel(sp);
        }
        step_grp[s] = gi;
        p->groups[gi].count++;
        for (int j = 0; j < sp->n_nodes; j++) {
            int k = sp->nodes[j];
            node_step[k] = s;
            p->groups[gi].flops += g->nodes[k].cost.flops;
            if (g->nodes[k].cost.flags & (MP_COST_UNKNOWN | MP_COST_OVERFLOW)) p->groups[gi].flops_unknown = true;
            if (j) {
                p->node_state[k] = MP_NODE_FUSED;
                p->node_head[k] = sp->node;
                p->run.fused++;
                int km = g->nodes[k].module;
                if (km >= 0 && km < nm && km != sp->module) p->mod_fused[km] = sp->module + 1;
            }
        }
        if (sp->group) p->node_group[sp->node] = p->groups[gi].name;
        p->node_kernel[sp->node] = mp__step_kernel(sp);
    }
    if (timed) {
        for (int s = 0; s < ns; s++) {
            const mp_step *sp = &pl->steps[s];
            for (int it = 0; it < iters; it++) col[it] = pl->t_step[(size_t)it * (size_t)ns + (size_t)s];
            p->node_lat_min[sp->node] = mp_min(col, iters);
            p->node_lat[sp->node] = mp_median(col, iters);
            for (int it = 0; it < iters; it++)
                grp[(size_t)step_grp[s] * (size_t)iters + (size_t)it] += pl->t_step[(size_t)it * (size_t)ns + (size_t)s];
        }
        /* modules, op types and their split: each node its share of its
         * kernel's time (by FLOPs) */
        mp_timing tm = {.n_units = ns, .n_passes = iters, .t = pl->t_step, .node_unit = node_step};
        if ((st = mp_profile_set_times(p, &tm))) goto done;
        for (int i = 0; i < p->n_groups; i++) {
            double *r = &grp[(size_t)i * (size_t)iters];
            p->groups[i].latency_min_s = mp_min(r, iters);
            p->groups[i].latency_s = mp_median(r, iters);
        }
        /* node_group points into groups: sort a copy of the order only */
        mp_groupstat *sorted = malloc(sizeof *sorted * (size_t)(p->n_groups + 1));
        if (sorted) {
            memcpy(sorted, p->groups, sizeof *sorted * (size_t)p->n_groups);
            qsort(sorted, (size_t)p->n_groups, sizeof *sorted, mp__grp_cmp);
            free(p->groups);
            p->groups = sorted;
        }
    } else {
        mp_timing tm = {.n_units = ns, .n_passes = iters, .t = NULL, .node_unit = node_step};
        if ((st = mp_profile_set_times(p, &tm))) goto done;
        for (int i = 0; i < p->n_groups; i++) p->groups[i].latency_s = p->groups[i].latency_min_s = -1;
    }
    p->run.kernels_median_s = p->run.kernels_min_s = -1;
    if (timed) {
        for (int it = 0; it < iters; it++) {
            double k = 0;
            for (int s = 0; s < ns; s++) k += pl->t_step[(size_t)it * (size_t)ns + (size_t)s];
            /* the kernels of a pass are inside it: a timer reading that
             * says otherwise is rounding */
            col[it] = MP_MIN(k, pl->t_run[it]);
        }
        p->run.kernels_median_s = mp_median(col, iters);
        p->run.kernels_min_s = mp_min(col, iters);
    }
    for (int it = 0; it < iters; it++) col[it] = pl->t_run[it];
    p->run.lat_min_s = mp_min(col, iters);
    p->run.lat_p90_s = mp_quantile(col, iters, 0.9);
    p->run.lat_median_s = mp_median(col, iters);
    p->total.latency_s = p->run.lat_median_s;
    p->total.latency_min_s = p->run.lat_min_s;
    if (!timed) {
        p->mods[0].latency_s = p->total.latency_s;
        p->mods[0].latency_min_s = p->total.latency_min_s;
    }
done:
    free(col);
    free(grp);
    free(step_grp);
    free(node_step);
    return st;
}

/* The timed passes' step times into the profile (keep_timestamps), with
 * what each step ran, so that writers read the profile alone. */
static mp_status mp__fill_stamps(mp_exec *pl, mp_profile *p) {
    if (!pl->t_start || !pl->t_step || pl->t_iters <= 0) return MP_OK;
    int ns = pl->n_steps, iters = pl->t_iters, nn = 0;
    for (int s = 0; s < ns; s++) nn += pl->steps[s].n_nodes;
    mp_stamps *t = &p->stamps;
    size_t cells = (size_t)iters * (size_t)(ns ? ns : 1);
    t->node = malloc(sizeof *t->node * (size_t)(ns + 1));
    t->module = malloc(sizeof *t->module * (size_t)(ns + 1));
    t->first = malloc(sizeof *t->first * (size_t)(ns + 1));
    t->nodes = malloc(sizeof *t->nodes * (size_t)(nn + 1));
    t->start = malloc(sizeof *t->start * cells);
    t->dur = malloc(sizeof *t->dur * cells);
    if (!t->node || !t->module || !t->first || !t->nodes || !t->start || !t->dur) {
        mp_profile_free_measured(p);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    int k = 0;
    for (int s = 0; s < ns; s++) {
        const mp_step *sp = &pl->steps[s];
        t->node[s] = sp->node;
        t->module[s] = sp->module;
        t->first[s] = k;
        for (int j = 0; j < sp->n_nodes; j++) t->nodes[k++] = sp->nodes[j];
    }
    t->first[ns] = k;
    memcpy(t->start, pl->t_start, sizeof *t->start * cells);
    memcpy(t->dur, pl->t_step, sizeof *t->dur * cells);
    t->n_steps = ns;
    t->iters = iters;
    return MP_OK;
}

/* The shapes the last pass gave the values the inference could not size
 * (data-dependent): the profile counts those nodes with them. */
static mp_status mp__take_shapes(mp_exec *pl, mp_profile *p, int *completed) {
    *completed = 0;
    int nv = pl->g->n_values, n = 0;
    for (int v = 0; v < nv; v++)
        if (pl->vals[v].kind == MP_RV_DYN && pl->vals[v].dyn_dims) n++;
    if (!n) return MP_OK;
    mp_shape_seen *seen = malloc(sizeof *seen * (size_t)n);
    if (!seen) return mp_error(MP_ERR_NOMEM, "out of memory");
    n = 0;
    for (int v = 0; v < nv; v++) {
        const mp_rval *rv = &pl->vals[v];
        if (rv->kind != MP_RV_DYN || !rv->dyn_dims) continue;
        seen[n++] = (mp_shape_seen){.value = v, .rank = rv->rt.rank, .dims = rv->rt.dims};
    }
    mp_status st = mp_profile_take_shapes(p, seen, n, completed);
    free(seen);
    return st;
}

mp_status mp_profile_run(mp_exec *pl, mp_profile *p) {
    if (!pl || !p) return mp_error(MP_ERR_USAGE, "no plan or profile");
    if (p != pl->p) return mp_error(MP_ERR_USAGE, "the profile is not the one the plan was made from");
    int iters = pl->o.iters, ns = pl->n_steps;
    free(pl->t_step);
    free(pl->t_run);
    free(pl->t_start);
    pl->t_start = NULL;
    if (pl->o.keep_timestamps && pl->o.node_timing) {
        pl->t_start = calloc((size_t)iters * (size_t)(ns ? ns : 1), sizeof *pl->t_start);
        if (!pl->t_start) return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    pl->t_step = calloc((size_t)iters * (size_t)(ns ? ns : 1), sizeof *pl->t_step);
    pl->t_run = calloc((size_t)iters, sizeof *pl->t_run);
    if (!pl->t_step || !pl->t_run) return mp_error(MP_ERR_NOMEM, "out of memory");
    pl->t_iters = iters;
    double start = mp_run_now();
    bool shown = false;
    int total = pl->o.warmup + iters;
    for (int i = 0; i < pl->o.warmup; i++) {
        mp_status st = mp_exec_run_timed(pl, NULL);
        if (st) return st;
        mp__progress(pl, start, i + 1, total, &shown);
    }
    for (int it = 0; it < iters; it++) {
        double *row = pl->o.node_timing ? &pl->t_step[(size_t)it * (size_t)ns] : NULL;
        double t0 = mp_run_now();
        mp_status st = mp_exec_run_stamped(pl, row, row && pl->t_start ? &pl->t_start[(size_t)it * (size_t)ns] : NULL);
        pl->t_run[it] = mp_run_now() - t0;
        if (st) return st;
        mp__progress(pl, start, pl->o.warmup + it + 1, total, &shown);
    }
    if (shown) mp__progress(pl, start, total, total, &shown);
    int run_shaped = 0;
    mp_status st = mp__take_shapes(pl, p, &run_shaped);
    if (!st) st = mp__fill(pl, p, iters);
    if (!st) st = mp__fill_stamps(pl, p);
    if (st) return st;
    mp_runinfo *r = &p->run;
    r->iters = iters;
    r->run_shaped = run_shaped;
    r->warmup = pl->o.warmup;
    r->threads = pl->threads;
    r->fuse = pl->o.fuse != 0;
    r->node_timing = pl->o.node_timing != 0;
    r->steps = ns;
    r->portable_steps = 0;
    for (int i = 0; i < ns; i++) r->portable_steps += !strcmp(mp__step_kernel(&pl->steps[i]), "portable");
    r->folded = pl->n_folded;
    r->batch = mp_profile_batch(p);
    r->source = "modelprof";
    r->memory_known = true;
    if (pl->o.peak_gflops > 0) {
        r->peak_flops_per_s = pl->o.peak_gflops * 1e9;
        r->peak_source = "given";
    } else {
        r->peak_flops_per_s = mp_run_peak_flops(pl->threads, &r->peak_method);
        r->peak_source = r->peak_flops_per_s > 0 ? "measured" : NULL;
        /* a kernel faster than the peak means the machine was busier while
         * the peak was measured (another job on a core): measure again */
        if (r->peak_flops_per_s > 0 && mp_profile_groups_above(p, r->peak_flops_per_s) > 0)
            r->peak_flops_per_s = mp_run_peak_flops_again(pl->threads, &r->peak_method);
    }
    r->kernels_above_peak = r->peak_flops_per_s > 0 ? mp_profile_groups_above(p, r->peak_flops_per_s) : 0;
    r->arena_bytes = pl->arena_bytes;
    r->weight_copy_bytes = pl->const_bytes;
    r->weight_bytes = pl->const_bytes + pl->view_bytes;
    r->input_bytes = pl->input_bytes;
    r->scratch_bytes = pl->scratch_bytes;
    r->dynamic_bytes = pl->dyn_bytes;
    r->peak_memory_bytes = r->arena_bytes + r->weight_bytes + r->input_bytes + r->scratch_bytes + r->dynamic_bytes;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) r->peak_rss_bytes = (uint64_t)ru.ru_maxrss * 1024u;
    p->measured = true;
    return MP_OK;
}
