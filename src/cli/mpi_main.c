/* modelprof-mpi: `modelprof trace` over MPI (Debian's Open MPI).
 *
 *   mpirun -n N modelprof-mpi trace [OPTIONS] FOLDER
 *
 * Process 0 lists the folder's traces and spreads them over the N
 * processes, largest first onto the least loaded (so each reads about the
 * same bytes). Each process reads its traces one at a time, keeping only
 * each one's digest (src/report/trace_digest.c: kilobytes, not the events),
 * and sends the digests to process 0, which rebuilds the summaries, runs the
 * job analysis and writes the report: the same output as `modelprof trace
 * FOLDER`, since the report and the job read only what a digest holds.
 * Memory per process: one trace's analysis at a time plus its digests. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/trace_cmd.h"
#include "trace/trace.h"

enum { TAG_DIGEST = 1 };

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
        if (a.folder) rc = mp_trace_cli_files(a.input, &files, &n);
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
    /* each process: its traces -> digests, kept; then sent to process 0 */
    char **dig = calloc((size_t)n + 1, sizeof *dig);
    size_t *dlen = calloc((size_t)n + 1, sizeof *dlen);
    if (!dig || !dlen) MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < n; i++)
        if (owner[i] == me) dig[i] = digest_of(files[i], &a.o, &dlen[i]);
    if (me != 0) {
        for (int i = 0; i < n; i++)
            if (owner[i] == me) {
                MPI_Send(dig[i], (int)dlen[i], MPI_CHAR, 0, TAG_DIGEST, MPI_COMM_WORLD);
                free(dig[i]);
                dig[i] = NULL;
            }
    } else {
        mp_trace *traces = calloc((size_t)n + 1, sizeof *traces);
        mp_trace **ptr = calloc((size_t)n + 1, sizeof *ptr);
        if (!traces || !ptr) MPI_Abort(MPI_COMM_WORLD, 2);
        int opened = 0;
        for (int i = 0; i < n; i++) {
            if (owner[i] != 0) {   /* in file order: each sender sends its own in order */
                MPI_Status ms;
                MPI_Probe(owner[i], TAG_DIGEST, MPI_COMM_WORLD, &ms);
                int cnt = 0;
                MPI_Get_count(&ms, MPI_CHAR, &cnt);
                dig[i] = malloc((size_t)cnt + 1);
                if (!dig[i]) MPI_Abort(MPI_COMM_WORLD, 2);
                MPI_Recv(dig[i], cnt, MPI_CHAR, owner[i], TAG_DIGEST, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                dlen[i] = (size_t)cnt;
            }
            if (!rc && dlen[i] && dig[i][0] == 1) {
                mp_trace_cli_error(dig[i] + 1);
                rc = TR_EXIT_INPUT;
            } else if (!rc && mp_trace_digest_read(dig[i], dlen[i], files[i], &traces[i]) != MP_OK) {
                mp_trace_cli_error(mp_last_error());
                rc = TR_EXIT_INPUT;
            } else if (!rc) {
                /* the digest names the trace it came from: the same path */
                ptr[opened++] = &traces[i];
            }
            free(dig[i]);
            dig[i] = NULL;
        }
        if (!rc) rc = mp_trace_cli_report(ptr, n, &a);
        for (int i = 0; i < opened; i++) mp_trace_free(ptr[i]);
        free(traces);
        free(ptr);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    free(owner);
    free(dig);
    free(dlen);
    MPI_Finalize();
    return rc;
}
