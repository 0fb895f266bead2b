/* Multi-rank jobs (src/trace/comm.c, job.c, findings.c, digests, MPI):
 *  - the real two-rank gloo job (tests/traces/ddp2, its cause written
 *    down): rank 1 the straggler, its data range the cause, rank 0's idle
 *    collective_wait, communication time on every rank;
 *  - jobs of 5 and 4 ranks built from it by tools/make_rank_job.py with a
 *    steady straggler, a late step and a clock offset injected (or nothing):
 *    the analysis finds exactly what was injected;
 *  - the same job three ways: from the traces, from their digests and from
 *    mpirun -n 2 modelprof-mpi, byte for byte;
 *  - a hand-made NCCL job (record_param_comms sequence numbers, collective
 *    kernels waiting on the device, a rank late on compute);
 *  - a CPU-only trace gets no device finding; -o files (trace reports,
 *    digests, the profile, the plan) get mode 0644 under umask 022. */
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jsonr.h"
#include "tcli.h"
#include "test.h"
#include "trace/trace.h"

/* ---- helpers ---- */

static jr *run_json(const char *const *args) {
    t_cli r = t_cli_run(args, 120, 0);
    T_EQ(r.code, 0);
    if (r.code) fprintf(stderr, "%s", r.err);
    size_t err = 0;
    jr *j = r.code == 0 ? jr_parse(r.out, r.out_len, &err) : NULL;
    T_CHECK(j != NULL);
    t_cli_free(&r);
    return j;
}

static const jr *rank_obj(const jr *j, int rank) {
    const jr *rs = jr_get(j, "ranks");
    for (int i = 0; i < jr_len(rs); i++)
        if (jr_get(jr_at(rs, i), "rank")->i == rank) return jr_at(rs, i);
    return NULL;
}

static double num(const jr *o, const char *path) {
    const jr *v = jr_path(o, path);
    return v && v->type == JR_NUM ? v->num : NAN;
}

static bool near_ms(double s, double ms, double tol_ms) { return fabs(s * 1e3 - ms) <= tol_ms; }

/* A folder of rank traces made by tools/make_rank_job.py (0 on success). */
static int make_job(const char *dir, int ranks, const char *inject) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 tools/make_rank_job.py --template tests/traces/ddp2/rank1.trace.json.gz "
             "--ranks %d --out %s %s", ranks, dir, inject);
    int rc = system(cmd);
    T_EQ(rc, 0);
    return rc;
}

static void rm_tree(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

static char *slurp_cmd(const char *const *args, int *code) {
    t_cli r = t_cli_run(args, 120, 0);
    *code = r.code;
    char *o = r.out;
    r.out = NULL;
    t_cli_free(&r);
    return o;
}

/* A synthetic NCCL job (tools/make_nccl_job.py, tests/traces/tpdp_sorted/
 * scenario.py): 4 ranks, an all_gather on tp groups {0,1} and {2,3} then an
 * all-reduce on dp groups {0,2} and {1,3} each step, rank 3 with 3 ms more
 * compute in step 2, its events in time order (host and device records
 * interleaved). Every call keeps its process group and sequence number:
 * the side table of collectives was searched as if in (device, index)
 * order, so 28 of 32 calls lost theirs, were matched by order across the
 * wrong groups, and rank 2 was called late. */
static void t_two_groups_interleaved(void) {
    jr *j = run_json((const char *const[]){"trace", "--format", "json", "tests/traces/tpdp_sorted", NULL});
    if (!j) return;
    T_EQ_STR(jr_path(j, "job.match_by")->s, "sequence number");
    T_EQ(jr_path(j, "job.collectives_matched")->i, 16);
    const jr *steps = jr_path(j, "job.steps");
    T_EQ(jr_len(steps), 4);
    for (int k = 0; k < jr_len(steps); k++) {
        const jr *x = jr_at(steps, k);
        if (strcmp(jr_get(x, "name")->s, "ProfilerStep#2") != 0) continue;
        T_EQ(jr_get(x, "critical_rank")->i, 3);
        T_CHECK(near_ms(num(x, "critical_delay_s"), 3, 0.01));
        const jr *ls = jr_get(x, "late_s");
        for (int r = 0; r < 4; r++) T_CHECK(near_ms(jr_at(ls, r)->num, r == 3 ? 3 : 0, 0.01));
    }
    T_CHECK(jr_path(j, "job.warning")->type == JR_NULL);
    jr_free(j);
    /* rank 3's times 7 s off (its ts shifted, baseTimeNanoseconds not): its
     * clock is aligned at the collectives' ends and said, and the figures are
     * the unshifted job's (rank 3 late 3 ms in step 2, the others waiting
     * 3 ms); with rank 1's file missing, said too */
    char dir[] = "/tmp/mp-job-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import gzip,json,sys; d=sys.argv[1]\n"
             "for r in (0, 2, 3):\n"
             "    t = json.load(gzip.open('tests/traces/tpdp_sorted/rank%%d.trace.json.gz' %% r))\n"
             "    for e in t['traceEvents']:\n"
             "        if r == 3 and 'ts' in e and e.get('ph') == 'X': e['ts'] += 7e6\n"
             "    json.dump(t, open('%%s/rank%%d.trace.json' %% (d, r), 'w'))\n\" %s", dir);
    T_EQ(system(cmd), 0);
    j = run_json((const char *const[]){"trace", "--format", "json", dir, NULL});
    if (j) {
        const jr *wn = jr_path(j, "job.warning");
        T_CHECK(wn && wn->type == JR_STR && strstr(wn->s, "1 rank has no trace here (rank 1)") &&
                strstr(wn->s, "aligned at the collectives' ends") && strstr(wn->s, "rank 3 moved -7 s") &&
                !strstr(wn->s, "rank 2 moved") && !strstr(wn->s, "not reliable"));
        const jr *rk = jr_path(j, "job.ranks");
        T_EQ(jr_len(rk), 3);
        for (int r = 0; r < jr_len(rk); r++) {
            const jr *x = jr_at(rk, r);
            T_CHECK(near_ms(num(x, "wait_s"), r < 2 ? 3 : 0, 0.001));
            T_CHECK(near_ms(num(x, "clock_skew_s"), r == 2 ? 7000 : 0, 0.001));
        }
        const jr *sts = jr_path(j, "job.steps");
        for (int k = 0; k < jr_len(sts); k++) {
            const jr *x = jr_at(sts, k);
            bool two = strcmp(jr_get(x, "name")->s, "ProfilerStep#2") == 0;
            const jr *cr = jr_get(x, "critical_rank");
            T_CHECK(two ? cr->type == JR_NUM && cr->i == 3 : cr->type == JR_NULL);
            T_CHECK(near_ms(jr_at(jr_get(x, "late_s"), 2)->num, two ? 3 : 0, 0.001));
        }
        jr_free(j);
    }
    rm_tree(dir);
}

/* ---- the real job ---- */

static void t_ddp2(void) {
    jr *j = run_json((const char *const[]){"trace", "--format", "json", "tests/traces/ddp2", NULL});
    if (!j) return;
    /* the straggler, its delay a step and its cause (the README: 30 ms of
     * host time in record_function("data") at the start of every step) */
    const jr *st = jr_path(j, "job.stragglers");
    T_EQ(jr_len(st), 1);
    const jr *s0 = jr_at(st, 0);
    T_EQ(jr_get(s0, "rank")->i, 1);
    double d = num(s0, "mean_delay_s");
    T_CHECK(d > 0.028 && d < 0.036);   /* 32.3 ms: the data range and the launches after it */
    T_CHECK(strstr(jr_get(s0, "cause")->s, "`data` range") != NULL);
    T_EQ_STR(jr_get(s0, "cause_kind")->s, "range");
    const jr *steps = jr_path(j, "job.steps");
    T_EQ(jr_len(steps), 4);
    for (int k = 0; k < jr_len(steps); k++) {
        const jr *x = jr_at(steps, k);
        T_EQ(jr_get(x, "critical_rank")->i, 1);
        T_CHECK(num(x, "critical_delay_s") > 0.028 && num(x, "critical_delay_s") < 0.036);
    }
    T_EQ_STR(jr_path(j, "job.match_by")->s, "order");
    T_EQ(jr_path(j, "job.collectives_matched")->i, 20);
    /* rank 0 waited in the collectives: its idle is collective_wait, not
     * launch-bound; every rank spent time in collectives */
    for (int r = 0; r < 2; r++) {
        const jr *ro = rank_obj(j, r);
        T_CHECK(ro != NULL);
        if (!ro) continue;
        T_CHECK(num(ro, "summary.communication_s") > 0.05);
        const jr *ss = jr_get(ro, "steps");
        for (int k = 0; k < jr_len(ss); k++) {
            const jr *x = jr_at(ss, k);
            T_CHECK(num(x, "communication_s") > 0.01);
            T_EQ(jr_get(x, "collective_calls")->i, 5);
            double cw = num(x, "idle_causes_s.collective_wait"), lb = num(x, "idle_causes_s.launch_bound");
            if (r == 0) T_CHECK(cw > 0.04 && cw > 5 * lb);
        }
        bool launch = false, coll = false;
        const jr *fs = jr_get(ro, "findings");
        for (int i = 0; i < jr_len(fs); i++) {
            launch |= strcmp(jr_get(jr_at(fs, i), "kind")->s, "launch_bound") == 0;
            coll |= strcmp(jr_get(jr_at(fs, i), "kind")->s, "collective_wait") == 0;
        }
        if (r == 0) T_CHECK(coll && !launch);
        /* rank 1's own `data` range held the device: a finding names it */
        bool data = false;
        for (int i = 0; i < jr_len(fs); i++)
            data |= strcmp(jr_get(jr_at(fs, i), "kind")->s, "host_range") == 0 &&
                    strstr(jr_get(jr_at(fs, i), "text")->s, "`data`") != NULL;
        T_CHECK(data == (r == 1));
        /* the findings share the rank's time without overlap (their
         * idle causes are disjoint; issue 31 item 7: sync 49.1% + `data`
         * 47.6% + ... made 128.6%), and the straggler's first finding is
         * the job's cause, its `data` range */
        double share = 0;
        for (int i = 0; i < jr_len(fs); i++) {
            const char *k = jr_get(jr_at(fs, i), "kind")->s;
            if (!strcmp(k, "data_loader") || !strcmp(k, "collective_wait") || !strcmp(k, "host_range") ||
                !strcmp(k, "launch_bound") || !strcmp(k, "synchronization"))
                share += num(jr_at(fs, i), "share");
        }
        T_CHECK(share <= 1.0);
        if (r == 1 && jr_len(fs) > 0) {
            T_EQ_STR(jr_get(jr_at(fs, 0), "kind")->s, "host_range");
            T_CHECK(strstr(jr_get(jr_at(fs, 0), "text")->s, "`data`") != NULL);
            T_CHECK(strstr(jr_get(jr_at(fs, 0), "text")->s, "job's straggler") != NULL);
        }
        if (r == 1) {
            const jr *h = jr_at(jr_get(ro, "host_ranges"), 0);
            T_CHECK(h && strcmp(jr_get(h, "name")->s, "data") == 0 && near_ms(num(h, "host_s") / 4, 30.2, 0.5));
        }
    }
    /* a rank's wait is a union of intervals, as idle time is: rank 0's two
     * gloo worker threads wait in concurrent broadcasts (and all-reduces),
     * which count once. No rank waits longer than its steps (issue 31 item
     * 5: 270.9 ms of wait over 256.6 ms of wall when they were added) */
    double jwall = num(j, "job.what_if.step_s") * jr_len(steps);
    for (int r = 0; r < 2; r++) {
        const jr *x = jr_at(jr_path(j, "job.ranks"), r);
        double rwall = 0;
        const jr *ss = jr_get(rank_obj(j, r), "steps");
        for (int k = 0; k < jr_len(ss); k++) rwall += num(jr_at(ss, k), "wall_s");
        T_CHECK(num(x, "wait_s") <= rwall && num(x, "wait_s") <= jwall);
    }
    T_CHECK(num(jr_at(jr_path(j, "job.ranks"), 0), "wait_s") > 0.12);   /* 146.0 ms: ~34 ms a step */
    T_CHECK(num(jr_at(jr_path(j, "job.ranks"), 0), "wait_s") < 0.16);
    /* the cause's figure is the range's own time (30.2 ms a step) */
    T_CHECK(strstr(jr_get(s0, "cause")->s, "30.") != NULL);
    /* what-if: had rank 1 run like rank 0, about half of the job's time */
    T_CHECK(num(j, "job.what_if.share_lost") > 0.4 && num(j, "job.what_if.share_lost") < 0.6);
    T_CHECK(strstr(jr_get(jr_at(jr_path(j, "job.what_if.causes"), 0), "cause")->s, "data") != NULL);
    jr_free(j);
}

/* ---- jobs built from it: exactly what was injected is found ---- */

static void t_injected(void) {
    char dir[] = "/tmp/mp-job-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    /* rank 1: 30 ms more of `data` every step; rank 3: 150 ms late in
     * step 4 in host time no range records; rank 4's clock 250 ms ahead */
    if (make_job(dir, 5, "--straggler 1:30 --late 3:4:150 --clock 4:250")) return;
    jr *j = run_json((const char *const[]){"trace", "--format", "json", dir, NULL});
    if (!j) return;
    const jr *st = jr_path(j, "job.stragglers");
    T_EQ(jr_len(st), 1);
    T_EQ(jr_get(jr_at(st, 0), "rank")->i, 1);
    T_CHECK(near_ms(num(jr_at(st, 0), "mean_delay_s"), 30, 1));
    T_CHECK(strstr(jr_get(jr_at(st, 0), "cause")->s, "`data` range") != NULL);
    const jr *steps = jr_path(j, "job.steps");
    T_EQ(jr_len(steps), 4);
    for (int k = 0; k < jr_len(steps); k++) {
        const jr *x = jr_at(steps, k);
        bool late = strcmp(jr_get(x, "name")->s, "ProfilerStep#4") == 0;
        T_EQ(jr_get(x, "critical_rank")->i, late ? 3 : 1);
        T_CHECK(near_ms(num(x, "critical_delay_s"), late ? 150 : 30, 1.5));
        T_CHECK(strstr(jr_get(x, "cause")->s, late ? "host overhead" : "`data` range") != NULL);
        /* the ranks that waited: collective_wait, not launch-bound */
        const jr *r0 = jr_at(jr_get(rank_obj(j, 0), "steps"), k);
        double cw = num(r0, "idle_causes_s.collective_wait");
        T_CHECK(cw > (late ? 0.15 : 0.03) && num(r0, "idle_causes_s.launch_bound") < 0.01);
        /* each rank's lateness in the step: only the injected ones */
        const jr *ls = jr_get(x, "late_s");
        for (int r = 0; r < 5; r++) {
            double want = r == 1 ? (late ? 30 : 30) : r == 3 && late ? 150 : 0;
            T_CHECK(near_ms(jr_at(ls, r)->num, want, 1.5));
        }
    }
    /* the clock offset is taken from baseTimeNanoseconds, and agrees */
    const jr *jrs = jr_path(j, "job.ranks");
    T_CHECK(near_ms(num(jr_at(jrs, 4), "clock_offset_s"), 250, 0.001));
    T_CHECK(fabs(num(jr_at(jrs, 4), "clock_skew_s")) < 1e-4);
    /* what-if: rank 1 alone 3 x 30 ms (in step 4 rank 3 was later), rank 3
     * alone 150 - 30 ms; every straggler like the median: rank 1's 90 ms */
    double wall = num(j, "job.what_if.step_s") * 4;
    T_CHECK(near_ms(num(jr_at(jrs, 1), "whatif_saved_s"), 90, 3));
    T_CHECK(near_ms(num(jr_at(jrs, 3), "whatif_saved_s"), 120, 3));
    T_CHECK(near_ms(wall - num(j, "job.what_if.ideal_step_s") * 4, 90, 3));
    const jr *cs = jr_path(j, "job.what_if.causes");
    T_EQ(jr_len(cs), 2);
    T_EQ_STR(jr_get(jr_at(cs, 0), "cause")->s, "host overhead");
    T_EQ_STR(jr_get(jr_at(cs, 1), "cause")->s, "range `data`");
    rm_tree(dir);

    jr_free(j);

    /* nothing injected: nobody late, no critical rank, nothing lost */
    char dir2[] = "/tmp/mp-job-XXXXXX";
    T_CHECK(mkdtemp(dir2) != NULL);
    if (make_job(dir2, 4, "")) return;
    j = run_json((const char *const[]){"trace", "--format", "json", dir2, NULL});
    if (!j) return;
    T_EQ(jr_len(jr_path(j, "job.stragglers")), 0);
    steps = jr_path(j, "job.steps");
    for (int k = 0; k < jr_len(steps); k++) T_CHECK(jr_get(jr_at(steps, k), "critical_rank")->type == JR_NULL);
    T_CHECK(num(j, "job.what_if.share_lost") < 0.001);
    jr_free(j);
    rm_tree(dir2);
}

/* The figure after `marker` in s (e.g. "range (record_function): " then
 * "30.1 ms"), in ms; NAN when absent. */
static double ms_after(const char *s, const char *marker) {
    const char *p = s ? strstr(s, marker) : NULL;
    return p ? strtod(p + strlen(marker), NULL) : NAN;
}

/* Issue 31 item 6: a rank that waited inside an earlier collective of the
 * step is not late for it. 4 ranks: rank 1 spends 30 ms in `data` every
 * step; in step 4 rank 3 is 150 ms late in host time. Ranks 0 and 2 leave
 * step 4's buffer broadcasts once rank 1 has come (rank 3 does not hold
 * them up) and wait for the others inside the gradient all-reduce; rank 1
 * waits 120 ms inside the broadcast for rank 3 and so reaches the
 * all-reduce with rank 3, 120 ms after ranks 0 and 2. Its lateness in step
 * 4 is still its own 30 ms (measured where it first joins; the broadcast's
 * wait is not its own), and its cause's figure is its `data` range's own
 * time, not the 120 ms it waited. */
static void t_waited_earlier(void) {
    char dir[] = "/tmp/mp-job-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    if (make_job(dir, 4, "--straggler 1:30 --late 3:4:150 --release 0:4 --release 2:4")) return;
    jr *j = run_json((const char *const[]){"trace", "--format", "json", dir, NULL});
    if (!j) return;
    const jr *steps = jr_path(j, "job.steps");
    T_EQ(jr_len(steps), 4);
    for (int k = 0; k < jr_len(steps); k++) {
        const jr *x = jr_at(steps, k);
        bool four = strcmp(jr_get(x, "name")->s, "ProfilerStep#4") == 0;
        T_EQ(jr_get(x, "critical_rank")->i, four ? 3 : 1);
        const jr *ls = jr_get(x, "late_s");
        T_CHECK(near_ms(jr_at(ls, 1)->num, 30, 1.5));       /* was 150 in step 4 */
        /* rank 3: 150 ms behind ranks 0 and 2, less the few ms their device
         * computed meanwhile (they had left the broadcast) */
        if (four) T_CHECK(jr_at(ls, 3)->num > 0.140 && jr_at(ls, 3)->num < 0.1515);
        T_CHECK(near_ms(jr_at(ls, 0)->num, 0, 0.5) && near_ms(jr_at(ls, 2)->num, 0, 0.5));
        const char *cause = jr_get(x, "cause")->s;
        if (!four) {
            double own = ms_after(cause, "range (record_function): ");
            T_CHECK(own > 29 && own < 31.5);
        } else {
            T_CHECK(strstr(cause, "host overhead") != NULL);
        }
    }
    const jr *r1 = rank_obj(jr_path(j, "job"), 1);
    T_CHECK(r1 && near_ms(num(r1, "mean_delay_s"), 30, 1.5));   /* was 60.1 */
    double own = r1 ? ms_after(jr_get(r1, "cause")->s, "range (record_function): ") : NAN;
    T_CHECK(own > 29 && own < 31.5);
    /* the what-if: rank 1 saves its 30 ms in the three steps it is last, none
     * in step 4; rank 3 saves 150 - 30 in step 4 */
    T_CHECK(r1 && near_ms(num(r1, "whatif_saved_s"), 90, 3));
    T_CHECK(near_ms(num(rank_obj(jr_path(j, "job"), 3), "whatif_saved_s"), 120, 3));
    /* no rank waits longer than the job's time */
    double wall = num(j, "job.what_if.step_s") * 4;
    for (int r = 0; r < 4; r++) T_CHECK(num(rank_obj(jr_path(j, "job"), r), "wait_s") <= wall);
    jr_free(j);
    rm_tree(dir);
}

/* ---- the same job three ways ---- */

static void t_three_ways(void) {
    char dir[] = "/tmp/mp-job-XXXXXX", dig[] = "/tmp/mp-dig-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL && mkdtemp(dig) != NULL);
    if (make_job(dir, 4, "--straggler 2:20 --late 1:3:100")) return;
    char in[4][300], out[4][300];
    for (int r = 0; r < 4; r++) {
        snprintf(in[r], sizeof in[r], "%s/rank%d.trace.json", dir, r);
        snprintf(out[r], sizeof out[r], "%s/rank%d.digest.json", dig, r);
        t_cli x = t_cli_run((const char *const[]){"trace", "--digest", in[r], "-o", out[r], NULL}, 60, 0);
        T_EQ(x.code, 0);
        t_cli_free(&x);
        struct stat sb, tb;
        T_CHECK(stat(out[r], &sb) == 0 && stat(in[r], &tb) == 0);
        T_CHECK(sb.st_size * 20 < tb.st_size);   /* small: about 1% of the trace */
    }
    const char *fmts[3] = {"json", "text", "html"};
    for (int f = 0; f < 3; f++) {
        int c1, c2;
        char *a = slurp_cmd((const char *const[]){"trace", "--format", fmts[f], dir, NULL}, &c1);
        char *b = slurp_cmd((const char *const[]){"trace", "--format", fmts[f], dig, NULL}, &c2);
        T_EQ(c1 + c2, 0);
        T_CHECK(a && b && strcmp(a, b) == 0);
        if (f == 0) t_json_dump("trace", a, strlen(a));
        /* mpirun -n 2 modelprof-mpi trace DIR: the same output */
        const char *bin = getenv("MP_BIN") ? getenv("MP_BIN") : "build/modelprof";
        char mpi[600];
        snprintf(mpi, sizeof mpi, "%s-mpi", bin);
        if (access(mpi, X_OK) == 0 && system("command -v mpirun >/dev/null 2>&1") == 0) {
            char cmd[1200], tmp[] = "/tmp/mp-mpi-out-XXXXXX";
            int fd = mkstemp(tmp);
            close(fd);
            snprintf(cmd, sizeof cmd, "mpirun %s--oversubscribe -n 2 %s trace --format %s %s > %s",
                     geteuid() == 0 ? "--allow-run-as-root " : "", mpi, fmts[f], dir, tmp);
            T_EQ(system(cmd), 0);
            size_t len;
            char *m = jr_slurp(tmp, &len);
            T_CHECK(m && a && strcmp(a, m) == 0);
            free(m);
            unlink(tmp);
        } else if (f == 0) {
            fprintf(stderr, "    (no %s or mpirun: the MPI way not checked)\n", mpi);
        }
        free(a);
        free(b);
    }
    rm_tree(dir);
    rm_tree(dig);
}

/* ---- a hand-made NCCL job ---- */

#define STEP(ts, dur) \
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":1,\"tid\":1,\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{}}"
#define OP(name, ts, dur, ext) \
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"" name "\",\"pid\":1,\"tid\":1,\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{\"External id\":" #ext "}}"
#define PARAM_COMMS(ts, dur, ext, seq) \
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"record_param_comms\",\"pid\":1,\"tid\":1,\"ts\":" #ts ",\"dur\":" #dur \
    ",\"args\":{\"External id\":" #ext ",\"Collective name\":\"allreduce\",\"dtype\":\"Float\",\"In msg nelems\":1024," \
    "\"Out msg nelems\":1024,\"Group size\":3,\"Process Group Name\":\"0\",\"Process Group Description\":\"default_pg\"," \
    "\"Process Group Ranks\":\"[0, 1, 2]\",\"Rank\":0,\"Seq\":" #seq "}}"
#define LAUNCH(ts, ext, corr) \
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":" #ts ",\"dur\":2,\"args\":{\"External id\":" #ext ",\"correlation\":" #corr "}}"
#define KERNEL(name, ts, dur, ext, corr) \
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"" name "\",\"pid\":0,\"tid\":7,\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{\"External id\":" #ext ",\"correlation\":" #corr ",\"stream\":7}}"
#define HEAD(rank) "{\"distributedInfo\":{\"backend\":\"nccl\",\"rank\":" #rank ",\"world_size\":3},\"baseTimeNanoseconds\":1000,\"traceEvents\":["

/* Each rank: a GEMM, then the all-reduce (record_param_comms, Seq 5)
 * whose NCCL kernel waits on the device until the last rank's starts at
 * 300 us; rank 2's GEMM runs 190 us longer (late on compute). */
static const char *const nccl_rank[3] = {
    HEAD(0) STEP(0, 1000) "," OP("aten::mm", 5, 20, 2) "," LAUNCH(6, 2, 1) "," KERNEL("ampere_sgemm_128x64_nn", 10, 80, 2, 1) ","
    PARAM_COMMS(30, 20, 3, 5) "," LAUNCH(35, 3, 2) "," KERNEL("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100, 600, 3, 2) "]}",
    HEAD(1) STEP(0, 1000) "," OP("aten::mm", 5, 20, 2) "," LAUNCH(6, 2, 1) "," KERNEL("ampere_sgemm_128x64_nn", 10, 80, 2, 1) ","
    PARAM_COMMS(30, 20, 3, 5) "," LAUNCH(35, 3, 2) "," KERNEL("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100, 600, 3, 2) "]}",
    HEAD(2) STEP(0, 1000) "," OP("aten::mm", 5, 20, 2) "," LAUNCH(6, 2, 1) "," KERNEL("ampere_sgemm_128x64_nn", 10, 270, 2, 1) ","
    PARAM_COMMS(30, 20, 3, 5) "," LAUNCH(35, 3, 2) "," KERNEL("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 300, 400, 3, 2) "]}"};

static void t_nccl(void) {
    mp_trace t[3];
    mp_trace *p[3];
    for (int r = 0; r < 3; r++) {
        T_OK(mp_trace_open_memory(nccl_rank[r], strlen(nccl_rank[r]), "nccl.json", NULL, &t[r]));
        p[r] = &t[r];
    }
    /* one call each, its metadata from record_param_comms */
    T_EQ(t[0].n_calls, 1);
    const mp_tcall *c = &t[0].calls[0];
    T_EQ_STR(c->coll, "all_reduce");
    T_EQ_STR(c->pg, "0");
    T_EQ(c->seq, 5);
    T_EQ(c->elems, 1024);
    T_EQ(c->elem_bytes, 4);
    T_CHECK(c->device);
    T_EQ(c->solo, 600000);   /* no compute beside it */
    T_EQ(t[0].steps[0].comm, 600000);
    T_EQ(t[0].steps[0].busy, 680000);
    mp_tjob job;
    T_OK(mp_trace_job(p, 3, &job));
    T_EQ_STR(job.match_by, "sequence number");
    T_EQ(job.n_matched, 1);
    T_EQ(t[0].calls[0].wait, 200000);
    T_EQ(t[2].calls[0].wait, 0);
    /* the kernel's wait for its peers is the device idle: collective_wait */
    T_EQ(t[0].steps[0].idle[MP_TI_COLL], 200000);
    T_EQ(t[0].steps[0].busy, 480000);
    T_EQ(t[2].steps[0].idle[MP_TI_COLL], 0);
    T_EQ(job.n_steps, 1);
    T_EQ(job.steps[0].critical, 2);
    T_EQ(job.steps[0].delay, 200000);   /* after the other ranks' median */
    T_EQ(job.ranks[2].late, 200000);
    T_EQ(job.ranks[2].whatif_saved, 200000);
    T_CHECK(job.ranks[2].straggler && job.n_stragglers == 1);
    T_EQ_STR(job.ranks[2].cause_kind, "compute");
    T_CHECK(strstr(job.ranks[2].cause, "device was busy 0.2 ms a step longer") != NULL);
    /* the JSON of the job */
    size_t len = 0;
    const mp_trace *cp[3] = {&t[0], &t[1], &t[2]};
    char *buf = t_trace_report(cp, 3, &job, NULL, 1, &len);
    T_CHECK(buf != NULL);
    size_t err;
    jr *j = jr_parse(buf, len, &err);
    T_CHECK(j != NULL);
    if (j) {
        const jr *col = jr_at(jr_get(jr_at(jr_get(j, "ranks"), 0), "collectives"), 0);
        T_EQ(jr_get(col, "bytes")->i, 4096);
        T_EQ(jr_get(col, "seq")->i, 5);
        T_CHECK(fabs(jr_get(col, "wait_s")->num - 200e-6) < 1e-12);
        T_EQ(jr_path(jr_at(jr_get(j, "ranks"), 0), "distributed.process_groups")->type, JR_ARR);
        jr_free(j);
    }
    free(buf);
    mp_tjob_free(&job);
    for (int r = 0; r < 3; r++) mp_trace_free(&t[r]);
}

/* ---- what a trace lacks ---- */

#define LEV(name, ts, dur) \
    "{\"name\": \"" name "\", \"ph\": \"X\", \"ts\": " #ts ", \"dur\": " #dur ", \"tid\": 1, \"pid\": \"CPU functions\", \"args\": {}}"

static void t_no_device(void) {
    /* torch 1.13 without Kineto: host ranges only, no shapes, no modules */
    static const char legacy[] = "[" LEV("ProfilerStep#1", 0, 1000) "," LEV("aten::linear", 10, 500) ","
                                 LEV("aten::addmm", 20, 400) "," LEV("Optimizer.step#SGD.step", 600, 300) "]";
    mp_trace t;
    T_OK(mp_trace_open_memory(legacy, strlen(legacy), "legacy.json", NULL, &t));
    T_CHECK(t.no_device && t.no_shapes && t.no_modules);
    bool dev = false, nodev = false, shapes = false, mods = false;
    for (int i = 0; i < t.n_findings; i++) {
        const char *k = t.findings[i].kind;
        dev |= strcmp(k, "low_utilization") == 0 || strcmp(k, "launch_bound") == 0 ||
               strcmp(k, "synchronization") == 0 || strcmp(k, "efficiency") == 0;
        nodev |= strcmp(k, "no_device") == 0;
        shapes |= strcmp(k, "no_shapes") == 0 && strstr(t.findings[i].text, "FLOPs") != NULL;
        mods |= strcmp(k, "no_modules") == 0 && strstr(t.findings[i].text, "module") != NULL;
    }
    T_CHECK(!dev && nodev && shapes && mods);
    /* its report: operators by self CPU (addmm 400 us before linear's 100,
     * though linear's total is larger), FLOPs unknown rather than 0, no
     * device idle table, the optimizer finding without device advice */
    const mp_trace *one = &t;
    size_t n = 0;
    char *txt = t_trace_report(&one, 1, NULL, NULL, 0, &n);
    T_CHECK(txt != NULL);
    if (txt) {
        T_CHECK(strstr(txt, "by self CPU time (no device time in this trace)") != NULL);
        const char *a = strstr(txt, "aten::addmm"), *l = strstr(txt, "aten::linear");
        T_CHECK(a && l && a < l);
        T_CHECK(strstr(txt, "device:  none recorded (a CPU-only trace)") != NULL);
        T_CHECK(strstr(txt, "FLOPs: not counted") != NULL && strstr(txt, "0 FLOPs") == NULL);
        T_CHECK(strstr(txt, "Idle time by cause") == NULL && strstr(txt, "foreach=True") != NULL);
        /* key_averages' columns for a CPU run; no kernel or device memory section */
        T_CHECK(strstr(txt, "dev total") == NULL && strstr(txt, "self dev%") == NULL);
        T_CHECK(strstr(txt, "Kernels, by total device time") == NULL && strstr(txt, "Memory (device)") == NULL);
        T_CHECK(strstr(txt, "fused=True)) updates") == NULL);
    }
    free(txt);
    char *js = t_trace_report(&one, 1, NULL, NULL, 1, &n);
    size_t err = 0;
    jr *j = js ? jr_parse(js, n, &err) : NULL;
    T_CHECK(j != NULL);
    if (j) {
        T_EQ(jr_path(j, "summary.flops")->type, JR_NULL);
        T_EQ(jr_path(j, "summary.achieved_flops_per_s")->type, JR_NULL);
        T_EQ(jr_get(jr_at(jr_get(j, "steps"), 0), "flops")->type, JR_NULL);
        T_EQ(jr_get(jr_at(jr_get(j, "operators"), 0), "flops")->type, JR_NULL);
        T_EQ_STR(jr_get(jr_at(jr_get(j, "operators"), 0), "name")->s, "aten::addmm");
        jr_free(j);
    }
    free(js);
    /* the steps CSV leaves FLOPs and FLOP/s empty */
    char *csv = NULL;
    size_t cn = 0;
    FILE *cf = open_memstream(&csv, &cn);
    T_OK(mp_trace_report_csv(&one, 1, "steps", cf));
    fclose(cf);
    const char *row = csv ? strchr(csv, '\n') : NULL;
    int col = 0, fcol = -1;
    for (const char *h = csv, *c = csv; row && c <= row; c++)
        if (*c == ',' || *c == '\n') {
            if (c - h == 5 && strncmp(h, "flops", 5) == 0) fcol = col;
            col++;
            h = c + 1;
        }
    T_CHECK(fcol > 0);
    const char *v = row ? row + 1 : NULL;
    for (int i = 0; v && i < fcol; i++) v = strchr(v, ',') ? strchr(v, ',') + 1 : NULL;
    T_CHECK(v && strncmp(v, ",,", 2) == 0);   /* flops and achieved_flops_per_s empty */
    free(csv);
    mp_trace_free(&t);
    /* a Kineto trace with shapes and modules says nothing of the kind */
    T_OK(mp_trace_open("tests/traces/vit_b16_adamw_stack.trace.json.gz", NULL, &t));
    T_CHECK(!t.no_device && !t.no_shapes && !t.no_modules);
    for (int i = 0; i < t.n_findings; i++) T_CHECK(strncmp(t.findings[i].kind, "no_", 3) != 0);
    mp_trace_free(&t);
}

/* The user's own ranges: one that gave the device no work ("save") holds
 * it; one that launched its work ("forward") does not. */
#define RANGE(name, ts, dur) \
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"" name "\",\"pid\":1,\"tid\":1,\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{}}"

static void t_host_ranges(void) {
    static const char tr[] = "{\"traceEvents\":[" STEP(0, 1000) "," RANGE("forward", 0, 400) ","
        LAUNCH(10, 1, 1) "," KERNEL("ampere_sgemm_128x64_nn", 20, 30, 1, 1) ","
        LAUNCH(200, 2, 2) "," KERNEL("ampere_sgemm_128x64_nn", 300, 50, 2, 2) ","
        RANGE("save", 500, 400) "," LAUNCH(940, 3, 3) "," KERNEL("ampere_sgemm_128x64_nn", 950, 40, 3, 3) "]}";
    mp_trace t;
    T_OK(mp_trace_open_memory(tr, strlen(tr), "ranges.json", NULL, &t));
    T_EQ(t.n_hranges, 1);
    if (t.n_hranges == 1) {
        T_EQ_STR(t.hranges[0].name, "save");
        T_EQ(t.hranges[0].host, 400000);
        T_EQ(t.hranges[0].idle, 400000);
    }
    int found = 0;
    for (int i = 0; i < t.n_findings; i++)
        if (strcmp(t.findings[i].kind, "host_range") == 0) found += strstr(t.findings[i].text, "`save`") != NULL ? 1 : 100;
    T_EQ(found, 1);
    mp_trace_free(&t);
}

/* ---- files ---- */

static void t_file_modes(void) {
    char dir[] = "/tmp/mp-mode-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    mode_t old = umask(022);
    const char *fmts[] = {"text", "json", "html", "csv"};
    for (int f = 0; f < 5; f++) {
        char path[300];
        snprintf(path, sizeof path, "%s/out%d", dir, f);
        t_cli r = f < 4 ? t_cli_run((const char *const[]){"trace", "--format", fmts[f], "-o", path,
                                                          "tests/traces/ddp2/rank0.trace.json.gz", NULL}, 60, 0)
                        : t_cli_run((const char *const[]){"trace", "--digest", "-o", path,
                                                          "tests/traces/ddp2/rank0.trace.json.gz", NULL}, 60, 0);
        T_EQ(r.code, 0);
        t_cli_free(&r);
        struct stat sb;
        T_CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0644);
        unlink(path);
    }
    /* every other writer of -o: the static profile and the plan */
    const char *const *others[] = {
        (const char *const[]){"models/resnet18.onnx", "--dim", "batch=1", "-q", "--format", "json", "-o", NULL, NULL},
        (const char *const[]){"plan", "models/resnet18.onnx", "--dim", "batch=1", "-o", NULL, NULL}};
    const int hole[] = {7, 5};
    for (int k = 0; k < 2; k++) {
        char path[300];
        snprintf(path, sizeof path, "%s/other%d", dir, k);
        const char *args[10];
        for (int i = 0; i < 10; i++) {
            args[i] = i == hole[k] ? path : others[k][i];
            if (!args[i] && i != hole[k]) break;
        }
        t_cli r = t_cli_run(args, 60, 0);
        T_EQ(r.code, 0);
        t_cli_free(&r);
        struct stat sb;
        T_CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0644);
        unlink(path);
    }
    umask(old);
    rmdir(dir);
    /* a digest that is not one: exit 2 naming the file and the field */
    char bad[] = "/tmp/mp-bad-digest-XXXXXX";
    int fd = mkstemp(bad);
    const char body[] = "{\"modelprof_digest\": 2, \"trace\": null}";
    T_CHECK(write(fd, body, sizeof body - 1) == (ssize_t)(sizeof body - 1));
    close(fd);
    t_cli r = t_cli_run((const char *const[]){"trace", bad, NULL}, 60, 0);
    T_EQ(r.code, 2);
    T_CHECK(strstr(r.err, bad) && strstr(r.err, "json_bytes"));
    t_cli_free(&r);
    unlink(bad);
}

MP_TESTS(trace_job) {
    {"ddp2", t_ddp2},
    {"injected", t_injected},
    {"two_groups_interleaved", t_two_groups_interleaved},
    {"waited_earlier", t_waited_earlier},
    {"three_ways", t_three_ways},
    {"nccl", t_nccl},
    {"no_device", t_no_device},
    {"host_ranges", t_host_ranges},
    {"file_modes", t_file_modes},
};
MP_TESTS_END(trace_job)
