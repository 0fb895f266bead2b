/* modelprof-mpi: `modelprof trace` over MPI (Debian's Open MPI).
 *
 *   mpirun -n N modelprof-mpi trace [OPTIONS] FOLDER
 *
 * Process 0 lists the folder's traces and spreads them over the N
 * processes, largest first onto the least loaded (so each reads about the
 * same bytes). Each process reads its traces one at a time and sends each
 * one's digest (src/report/trace_digest.c: kilobytes, not the events) to
 * process 0 as soon as it is made; process 0 rebuilds the summaries, runs
 * the job analysis and writes the report: the same output as `modelprof
 * trace FOLDER`, since the report and the job read only what a digest holds.
 * Memory: a process that reads traces holds one trace's analysis and at
 * most MPI_OUT digests; process 0 also holds every rank's summary (about
 * 75 KB a rank on the ddp2 job) for the report. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/trace_cmd.h"
#include "trace/trace.h"

enum { TAG_DIGEST = 1 };
#define MPI_OUT 4   /* digests a process has in flight */

static void usage(void) {
    fputs("usage: mpirun -n N modelprof-mpi trace [OPTIONS] FOLDER | TRACE\n"
          "(the options of `modelprof trace`; see modelprof trace --help)\n",
          stderr);
}

/* Broadcast a string from process 0 (NULL on the others until received). */
static char *bcast_str(const char *s, int me) {
    int n = me == 0 ? (int)strlen(s) + 1 : 0;
    MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char *b = malloc((size_t)n);
    if (!b) MPI_Abort(MPI_COMM_WORLD, 2);
    if (me == 0) memcpy(b, s, (size_t)n);
    MPI_Bcast(b, n, MPI_CHAR, 0, MPI_COMM_WORLD);
    return b;
}

/* One trace's digest in memory (error: "\x01message"). */
static char *digest_of(const char *path, const mp_trace_options *o, size_t *len) {
    mp_trace t;
    char *buf = NULL;
    *len = 0;
    FILE *f = NULL;
    mp_status st = mp_trace_open(path, o, &t);
    if (st == MP_OK) {
        f = open_memstream(&buf, len);
        st = f ? mp_trace_digest_write(&t, f) : mp_error(MP_ERR_NOMEM, "out of memory");
        if (f && fclose(f) != 0 && st == MP_OK) st = mp_error(MP_ERR_NOMEM, "out of memory");
        mp_trace_free(&t);
    }
    if (st != MP_OK) {
        free(buf);
        const char *m = mp_last_error();
        *len = strlen(m) + 2;
        buf = malloc(*len);
        if (!buf) MPI_Abort(MPI_COMM_WORLD, 2);
        buf[0] = 1;
        memcpy(buf + 1, m, *len - 1);
    }
    return buf;
}

/* A digest into a summary (the first error is printed, later ones not). */
static void take(const char *d, size_t len, const char *path, mp_trace *t, bool *have, int *rc) {
    if (*rc) return;
    if (len && d[0] == 1) {
        mp_trace_cli_error(d + 1);
        *rc = TR_EXIT_INPUT;
    } else if (mp_trace_digest_read(d, len, path, t) != MP_OK) {
        mp_trace_cli_error(mp_last_error());
        *rc = TR_EXIT_INPUT;
    } else {
        *have = true;
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me = 0, np = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int rc = 0;
    tr_args a;
    if (argc < 2 || strcmp(argv[1], "trace") != 0) {
        if (me == 0) usage();
        rc = TR_EXIT_USAGE;
    } else if (me == 0) {
        rc = mp_trace_cli_parse(argc - 1, argv + 1, &a);
        if (!rc && a.help) rc = -1;
        if (!rc && a.diff) {
            fputs("modelprof-mpi: trace diff compares two traces in one process: run "
                  "modelprof trace diff\n", stderr);
            rc = TR_EXIT_USAGE;
        }
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc) {
        MPI_Finalize();
        return rc < 0 ? 0 : rc;
    }
    /* the same options (process 0 found them good: nothing is printed) */
    if (me != 0) mp_trace_cli_parse(argc - 1, argv + 1, &a);
    /* the traces, and who reads which */
    char **files = NULL;
    int n = 0;
    if (me == 0) {
        if (a.folder) rc = mp_trace_cli_files(a.input, a.out_path, &files, &n);
        else {
            files = malloc(sizeof *files);
            files[0] = strdup(a.input);
            n = files[0] ? 1 : 0;
        }
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc) {
        MPI_Finalize();
        return rc;
    }
    MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (me != 0) files = calloc((size_t)n + 1, sizeof *files);
    int *owner = malloc(((size_t)n + 1) * sizeof *owner);
    if (!files || !owner) MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < n; i++) {
        char *s = bcast_str(me == 0 ? files[i] : "", me);
        if (me != 0) files[i] = s;
        else free(s);
    }
    if (me == 0) {   /* largest first onto the least loaded process */
        long long *load = calloc((size_t)np, sizeof *load), *size = malloc(((size_t)n + 1) * sizeof *size);
        int *order = malloc(((size_t)n + 1) * sizeof *order);
        if (!load || !size || !order) MPI_Abort(MPI_COMM_WORLD, 2);
        for (int i = 0; i < n; i++) {
            struct stat sb;
            size[i] = stat(files[i], &sb) == 0 ? (long long)sb.st_size : 0;
            order[i] = i;
        }
        for (int i = 1; i < n; i++)
            for (int j = i; j > 0 && size[order[j]] > size[order[j - 1]]; j--) {
                int x = order[j];
                order[j] = order[j - 1];
                order[j - 1] = x;
            }
        for (int k = 0; k < n; k++) {
            int best = 0;
            for (int p = 1; p < np; p++)
                if (load[p] < load[best]) best = p;
            owner[order[k]] = best;
            load[best] += size[order[k]] + 1;
        }
        free(load);
        free(size);
        free(order);
    }
    MPI_Bcast(owner, n, MPI_INT, 0, MPI_COMM_WORLD);
    /* Each process reads its traces one at a time. Process 0 turns its
     * own digests straight into summaries and, between its traces, takes
     * in the digests that have come; the others send each digest as soon
     * as it is made, at most MPI_OUT of them in flight: no process holds
     * more than one trace and a few digests. A message is the trace's
     * index (8 bytes) and its digest (or "\x01message"). */
    if (me != 0) {
        MPI_Request req[MPI_OUT];
        char *pending[MPI_OUT];
        int used = 0, next = 0;
        for (int i = 0; i < n; i++) {
            if (owner[i] != me) continue;
            size_t len;
            char *d = digest_of(files[i], &a.o, &len);
            char *msg = malloc(len + 8);
            if (!msg) MPI_Abort(MPI_COMM_WORLD, 2);
            int64_t idx = i;
            memcpy(msg, &idx, 8);
            memcpy(msg + 8, d, len);
            free(d);
            if (used == MPI_OUT) {   /* the oldest (at next) must be delivered first */
                MPI_Wait(&req[next], MPI_STATUS_IGNORE);
                free(pending[next]);
                next = (next + 1) % MPI_OUT;
                used--;
            }
            int slot = (next + used) % MPI_OUT;
            pending[slot] = msg;
            MPI_Isend(msg, (int)(len + 8), MPI_CHAR, 0, TAG_DIGEST, MPI_COMM_WORLD, &req[slot]);
            used++;
        }
        for (int k = 0; k < used; k++) {
            int slot = (next + k) % MPI_OUT;
            MPI_Wait(&req[slot], MPI_STATUS_IGNORE);
            free(pending[slot]);
        }
    } else {
        mp_trace *traces = calloc((size_t)n + 1, sizeof *traces);
        bool *have = calloc((size_t)n + 1, sizeof *have);
        if (!traces || !have) MPI_Abort(MPI_COMM_WORLD, 2);
        int expect = 0, got = 0;
        for (int i = 0; i < n; i++) expect += owner[i] != 0;
        for (int i = 0; i <= n; i++) {
            if (i < n && owner[i] == 0) {
                size_t len;
                char *d = digest_of(files[i], &a.o, &len);
                take(d, len, files[i], &traces[i], &have[i], &rc);
                free(d);
            }
            /* what has come meanwhile; at the end, all that is still to come */
            for (;;) {
                int flag = 0;
                MPI_Status ms;
                if (i == n && got < expect) {
                    MPI_Probe(MPI_ANY_SOURCE, TAG_DIGEST, MPI_COMM_WORLD, &ms);
                    flag = 1;
                } else {
                    MPI_Iprobe(MPI_ANY_SOURCE, TAG_DIGEST, MPI_COMM_WORLD, &flag, &ms);
                }
                if (!flag) break;
                int cnt = 0;
                MPI_Get_count(&ms, MPI_CHAR, &cnt);
                char *msg = malloc((size_t)cnt + 1);
                if (!msg || cnt < 8) MPI_Abort(MPI_COMM_WORLD, 2);
                MPI_Recv(msg, cnt, MPI_CHAR, ms.MPI_SOURCE, TAG_DIGEST, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                int64_t idx;
                memcpy(&idx, msg, 8);
                if (idx < 0 || idx >= n || owner[idx] != ms.MPI_SOURCE) MPI_Abort(MPI_COMM_WORLD, 2);
                take(msg + 8, (size_t)cnt - 8, files[idx], &traces[idx], &have[idx], &rc);
                free(msg);
                got++;
                if (i == n && got == expect) break;
            }
        }
        /* the report, in file order (the digest names the trace it came from) */
        mp_trace **ptr = calloc((size_t)n + 1, sizeof *ptr);
        if (!ptr) MPI_Abort(MPI_COMM_WORLD, 2);
        for (int i = 0; i < n; i++) ptr[i] = &traces[i];
        if (!rc) rc = mp_trace_cli_report(ptr, n, &a);
        for (int i = 0; i < n; i++)
            if (have[i]) mp_trace_free(&traces[i]);
        free(traces);
        free(have);
        free(ptr);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    free(owner);
    MPI_Finalize();
    return rc;
}
