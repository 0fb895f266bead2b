/* Findings: what stands out in one trace, in plain words, each with its
 * figure, ranked by the share of step time it concerns (docs/DESIGN.md
 * "Findings"). They read only the trace summary (mp_trace: steps, kernels,
 * memory, FLOPs, the job's context), so a trace rebuilt from its digest
 * gets the same findings, and the job analysis can write them again. */
#include "trace/trace.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>

/* A finding: its kind, ranking score (percent of step time here, a
 * fraction once stored), the figure it is about with its unit and share,
 * and the text. */
typedef struct fnd {
    const char *kind;
    double score_pct;
    double value;
    const char *unit;
    double share;
} fnd;

static void add_finding(mp_trace *t, int *cap, fnd k, const char *fmt, ...) MP_PRINTF(4, 5);
static void add_finding(mp_trace *t, int *cap, fnd k, const char *fmt, ...) {
    mp_tfinding *nf = mp_grow(t->findings, sizeof *t->findings, cap, t->n_findings + 1);
    if (!nf) return;
    t->findings = nf;
    mp_tfinding *f = &t->findings[t->n_findings++];
    f->kind = k.kind;
    f->score = k.score_pct / 100;
    f->value = k.value;
    f->unit = k.unit;
    f->share = k.share;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->text, sizeof f->text, fmt, ap);
    va_end(ap);
}

static int finding_cmp(const void *x, const void *y) {
    const mp_tfinding *a = x, *b = y;
    return (a->score < b->score) - (a->score > b->score);
}

static double ms(int64_t ns) { return (double)ns / 1e6; }
static double pct(int64_t a, int64_t b) { return b > 0 ? 100.0 * (double)a / (double)b : 0; }
static double frac(int64_t a, int64_t b) { return b > 0 ? (double)a / (double)b : 0; }
static double secs_of(int64_t ns) { return (double)ns * 1e-9; }

static bool has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

#define JOB_CAUSE_MARK "It is why this rank is the job's straggler"

/* The job's entry of this trace's rank; NULL alone. */
static const mp_tjob_rank *job_rank(const mp_trace *t) {
    const mp_tjob *j = t->job;
    if (!j || !j->one_run) return NULL;
    for (int i = 0; i < j->n_ranks; i++)
        if (j->ranks[i].rank == t->raw.rank) return &j->ranks[i];
    return NULL;
}

/* What the trace did not record, and what that costs: after the others,
 * with a small score. */
static void not_recorded(mp_trace *t, int *cap) {
    if (t->no_device)
        add_finding(t, cap, (fnd){"no_device", 0.3, 0, "s", 0},
                    "No device activity in this trace (a CPU-only run, or a profiler without "
                    "CUDA activities): the times are the host's; device utilisation, idle "
                    "causes, kernels and MFU cannot be given, and no device finding is made.");
    if (t->no_shapes && t->flops_null)
        add_finding(t, cap, (fnd){"no_shapes", 0.2, 0, "s", 0},
                    "%" PRIu64 " operators' FLOPs are unknown (\"flops\": null, the trace's producer "
                    "could not count them): FLOPs, FLOP/s and MFU are unknown (? in the tables, "
                    "null in the JSON), not the sum of the others.",
                    t->flops_null);
    else if (t->no_shapes)
        add_finding(t, cap, (fnd){"no_shapes", 0.2, 0, "s", 0},
                    "Shapes were not recorded (record_shapes=False, or a PyTorch without "
                    "Kineto): no operator's FLOPs can be counted, so FLOPs, FLOP/s and MFU are "
                    "unknown (? in the tables, null in the JSON). Profile with "
                    "record_shapes=True; FlopsProfiler takes FLOPs from the model's static "
                    "profile.");
    if (t->no_modules)
        add_finding(t, cap, (fnd){"no_modules", 0.1, 0, "s", 0},
                    "Module scopes were not recorded (with_stack=True and with_modules=True "
                    "record nn.Module scopes with Kineto; a PyTorch without Kineto records none, "
                    "and FlopsProfiler writes its own module ranges on any): forward and backward "
                    "times per module are unknown; the operator and kernel tables stand alone.");
}

void mp_trace_findings(mp_trace *t) {
    free(t->findings);
    t->findings = NULL;
    t->n_findings = 0;
    int cap = 0;
    int64_t wall = t->wall_total;
    if (wall <= 0 || t->n_steps == 0) {
        not_recorded(t, &cap);
        return;
    }
    int64_t idle[MP_TI_COUNT] = {0}, opt = 0;
    int worst = 0, ncalls = 0;
    for (int k = 0; k < t->n_steps; k++) {
        const mp_tstep *s = &t->steps[k];
        for (int c = 0; c < MP_TI_COUNT; c++) MP_SADD(idle[c], s->idle[c]);
        MP_SADD(opt, s->optimizer);
        ncalls += s->n_calls;
        if (pct(s->idle[MP_TI_LOADER], s->wall) >
            pct(t->steps[worst].idle[MP_TI_LOADER], t->steps[worst].wall))
            worst = k;
    }
    const mp_tstep *ws = &t->steps[worst];
    bool dev = !t->no_device;
    if (dev && pct(idle[MP_TI_LOADER], wall) >= 5)
        add_finding(t, &cap,
                    (fnd){"data_loader", pct(idle[MP_TI_LOADER], wall), secs_of(idle[MP_TI_LOADER]),
                          "s", frac(idle[MP_TI_LOADER], wall)},
                    "Data loading: the device waited on the data loader for %.1f ms of %.1f ms "
                    "(%.1f%% of step time; %s %.1f%%). Give the DataLoader more workers "
                    "(num_workers), pin_memory=True and persistent_workers=True, prefetch, or "
                    "make per-sample transforms cheaper.",
                    ms(idle[MP_TI_LOADER]), ms(wall), pct(idle[MP_TI_LOADER], wall), ws->name,
                    pct(ws->idle[MP_TI_LOADER], ws->wall));
    if (dev && pct(idle[MP_TI_COLL], wall) >= 5) {
        const mp_tjob_rank *jr = job_rank(t);
        const mp_tjob *j = t->job;
        char who[400] = "";
        if (jr && j->n_stragglers) {
            const mp_tjob_rank *sr = &j->ranks[j->stragglers[0]];
            if (sr->rank == jr->rank)
                snprintf(who, sizeof who, " This rank is the job's straggler (the job section "
                                          "has its cause); the others wait for it.");
            else
                snprintf(who, sizeof who,
                         " It waited for rank %d, the job's straggler (late %.1f ms a step "
                         "on average%s%s).",
                         sr->rank, ms(j->n_steps ? sr->late / j->n_steps : 0),
                         sr->cause[0] ? ": " : "", sr->cause);
        } else if (jr) {
            snprintf(who, sizeof who, " No rank was steadily late: the time is the "
                                      "collectives' own (transfer, or ranks taking turns).");
        }
        add_finding(t, &cap,
                    (fnd){"collective_wait", pct(idle[MP_TI_COLL], wall), secs_of(idle[MP_TI_COLL]),
                          "s", frac(idle[MP_TI_COLL], wall)},
                    "Waiting in collectives: the device sat idle %.1f ms (%.1f%% of step time) "
                    "while its host waited in %d collective calls: not launch overhead, the "
                    "rank waits for its peers or the transfer.%s Make the slow rank fast, or "
                    "overlap communication with compute.",
                    ms(idle[MP_TI_COLL]), pct(idle[MP_TI_COLL], wall), ncalls, who);
    }
    /* the user's own host ranges the device idled in: their idle is its
     * own cause (MP_TI_RANGE), not also synchronisation or launch-bound
     * time; a range that is the job's cause for this straggler says so and
     * leads (its score weighs the time the job lost to it) */
    const mp_tjob_rank *me = job_rank(t);
    for (int i = 0; dev && i < t->n_hranges; i++) {
        const struct mp_thrange *h = &t->hranges[i];
        if (pct(h->idle, wall) < 5) continue;
        char job_cause[200] = "";
        if (me && me->straggler && me->cause_kind && strcmp(me->cause_kind, "range") == 0) {
            char tick[160];
            snprintf(tick, sizeof tick, "`%s` range", h->name);
            if (strstr(me->cause, tick)) {
                snprintf(job_cause, sizeof job_cause,
                         " " JOB_CAUSE_MARK ": the other ranks waited "
                         "%.1f ms a step for it (the job section).",
                         ms(t->job->n_steps ? me->late / t->job->n_steps : 0));
            }
        }
        add_finding(t, &cap,
                    (fnd){"host_range", pct(h->idle, wall), secs_of(h->idle), "s", frac(h->idle, wall)},
                    "Host range `%s` (record_function): the device sat idle %.1f ms (%.1f%% of step "
                    "time) while the host was inside it (%.1f ms a step of host time, %lld calls).%s "
                    "Whatever it does (preparing data, logging, checkpointing) holds the device: "
                    "overlap it with the device's work (a DataLoader worker, a background thread, "
                    "prefetching) or shorten it.",
                    h->name, ms(h->idle), pct(h->idle, wall), ms(h->host) / t->n_steps,
                    (long long)h->count, job_cause);
    }
    int64_t nk = 0;
    for (int i = 0; i < t->n_kernels; i++)
        if (t->kernels[i].kind == MP_TD_KERNEL) nk += t->kernels[i].count;
    if (dev && pct(idle[MP_TI_LAUNCH], wall) >= 10)
        add_finding(t, &cap,
                    (fnd){"launch_bound", pct(idle[MP_TI_LAUNCH], wall), secs_of(idle[MP_TI_LAUNCH]),
                          "s", frac(idle[MP_TI_LAUNCH], wall)},
                    "Launch-bound: the device sat idle %.1f ms (%.1f%% of step time) between "
                    "kernels because the host launched the next one late (%.0f kernels per step, "
                    "%.1f us each on average). CUDA graphs or torch.compile "
                    "(mode=\"reduce-overhead\"), fewer and larger kernels (fusion, a bigger "
                    "batch) cut this.",
                    ms(idle[MP_TI_LAUNCH]), pct(idle[MP_TI_LAUNCH], wall),
                    (double)nk / t->n_steps, nk ? (double)t->busy_total / 1e3 / (double)nk : 0);
    if (dev && pct(idle[MP_TI_SYNC], wall) >= 5)
        add_finding(t, &cap,
                    (fnd){"synchronization", pct(idle[MP_TI_SYNC], wall), secs_of(idle[MP_TI_SYNC]),
                          "s", frac(idle[MP_TI_SYNC], wall)},
                    "Synchronisation: after the host waited on the device (cudaStreamSynchronize, "
                    "cudaDeviceSynchronize: .item(), .cpu(), printing a loss) the device idled "
                    "%.1f ms (%.1f%% of step time) until new work arrived. Avoid per-step "
                    "synchronisation or defer it.",
                    ms(idle[MP_TI_SYNC]), pct(idle[MP_TI_SYNC], wall));
    int64_t optd = 0;
    for (int k = 0; k < t->n_steps; k++) MP_SADD(optd, t->steps[k].optimizer_dev);
    if (!dev && pct(opt, wall) >= 10)
        add_finding(t, &cap, (fnd){"optimizer", pct(opt, wall), secs_of(opt), "s", frac(opt, wall)},
                    "Optimizer: Optimizer.step took %.1f ms of host time (%.1f%% of step time). "
                    "On the CPU PyTorch's optimizers loop over the parameters one tensor at a "
                    "time unless asked otherwise: foreach=True (or fused=True where the "
                    "optimizer and PyTorch version offer it) updates them in a few calls.",
                    ms(opt), pct(opt, wall));
    else if (pct(opt, wall) >= 10 || (dev && pct(optd, t->busy_total) >= 20))
        add_finding(t, &cap,
                    (fnd){"optimizer", MP_MAX(pct(opt, wall), pct(optd, wall)), secs_of(opt), "s",
                          frac(opt, wall)},
                    "Optimizer: Optimizer.step took %.1f ms of host time (%.1f%% of step time) "
                    "and its device span %.1f ms (%.1f%% of device busy time). A fused "
                    "implementation (e.g. torch.optim.AdamW(..., fused=True)) updates all "
                    "parameters in a few kernels.",
                    ms(opt), pct(opt, wall), ms(optd), pct(optd, t->busy_total));
    int64_t pageable = 0, devtot = 0;
    for (int i = 0; i < t->n_kernels; i++) {
        MP_SADD(devtot, t->kernels[i].total);
        if (has(t->kernels[i].name, "HtoD (Pageable")) MP_SADD(pageable, t->kernels[i].total);
    }
    if (dev && pct(pageable, devtot) >= 2)
        add_finding(t, &cap,
                    (fnd){"pageable_copies", pct(pageable, wall), secs_of(pageable), "s",
                          frac(pageable, devtot)},
                    "Host-to-device copies from pageable memory took %.1f ms (%.1f%% of device "
                    "time): pin the host buffers (DataLoader pin_memory=True) and copy with "
                    "non_blocking=True so copies overlap compute.",
                    ms(pageable), pct(pageable, devtot));
    /* the caching allocator going to the driver after the first step */
    const struct mp_tchurn *ch = &t->churn;
    if (dev && ch->steps > 0 && (ch->mallocs + ch->frees > 0 || ch->changes > 0)) {
        char resv[160] = "";
        if (ch->changes > 0 && ch->hi > ch->lo) {
            bool gb = ch->hi >= 1000000000;
            double u = gb ? 1e9 : 1e6;
            snprintf(resv, sizeof resv, "; Total Reserved changed %lld times, between %.*f and %.*f %s",
                     (long long)ch->changes, gb ? 2 : 1, (double)ch->lo / u, gb ? 2 : 1,
                     (double)ch->hi / u, gb ? "GB" : "MB");
        }
        /* ranked by the time the calls took, at least as a minor finding:
         * the reserved curve moving costs time not seen here (cudaFree
         * waits for the device, a new segment's first touch) */
        double p = pct(ch->ns, wall);
        add_finding(t, &cap, (fnd){"allocator_churn", MP_MAX(p, 1.0), secs_of(ch->ns), "s", frac(ch->ns, wall)},
                    "Allocator churn: after the first step the caching allocator called cudaMalloc "
                    "%lld and cudaFree %lld times in %d steps, %.2f ms of host time (%.1f%% of step "
                    "time; cudaFree waits for the device)%s. Shapes that vary, empty_cache() in the "
                    "loop or a nearly full device make it free and ask again: fix shapes (pad, "
                    "bucket), drop empty_cache(), or set "
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
                    (long long)ch->mallocs, (long long)ch->frees, ch->steps, ms(ch->ns), p, resv);
    }
    double util = pct(t->busy_total, wall);
    if (dev && util < 60)
        add_finding(t, &cap, (fnd){"low_utilization", (100 - util) / 2, util / 100, "fraction", 1 - util / 100},
                    "Low device utilisation: the device was busy %.1f%% of step time (%.1f of "
                    "%.1f ms).",
                    util, ms(t->busy_total), ms(wall));
    if (t->mem_peak_reserved >= 0 && t->raw.device_mem > 0) {
        double m = 100.0 * (double)t->mem_peak_reserved / (double)t->raw.device_mem;
        if (m >= 85)
            add_finding(t, &cap,
                        (fnd){"memory_near_capacity", m - 50, (double)t->mem_peak_reserved, "bytes",
                              m / 100},
                        "Memory near capacity: peak reserved %.2f GB of the device's %.2f GB "
                        "(%.1f%%); peak allocated %.2f GB. A larger batch will not fit; "
                        "activation checkpointing or a smaller batch leave headroom.",
                        (double)t->mem_peak_reserved / 1e9, (double)t->raw.device_mem / 1e9, m,
                        (double)t->mem_peak_alloc / 1e9);
    }
    if (dev && t->peak_tflops > 0 && t->flops_total > 0) {
        double mfu = (double)t->flops_total / ((double)wall / 1e9) / (t->peak_tflops * 1e12) * 100;
        add_finding(t, &cap, (fnd){"efficiency", mfu < 30 ? 30 - mfu : 0, mfu / 100, "fraction", mfu / 100},
                    "Efficiency: %.1f TFLOPS achieved over the steps (the counted FLOPs, "
                    "backward included), %.1f%% MFU of the %.1f TFLOPS %s peak (%s).",
                    (double)t->flops_total / ((double)wall / 1e9) / 1e12, mfu, t->peak_tflops,
                    mp_tdtype_names[t->dominant_dtype], t->peak_source ? t->peak_source : "?");
    }
    not_recorded(t, &cap);
    if (t->n_findings > 1) qsort(t->findings, (size_t)t->n_findings, sizeof *t->findings, finding_cmp);
    /* the range that is the job's cause for this straggler leads: the
     * rank's advice agrees with the job's */
    for (int i = 1; i < t->n_findings; i++)
        if (strcmp(t->findings[i].kind, "host_range") == 0 && has(t->findings[i].text, JOB_CAUSE_MARK)) {
            mp_tfinding f = t->findings[i];
            memmove(&t->findings[1], &t->findings[0], (size_t)i * sizeof f);
            t->findings[0] = f;
            break;
        }
}
