/* `modelprof trace` as pieces the command (trace_cmd.c) and its MPI twin
 * (mpi_main.c) share: options, the folder's traces, the report of a set of
 * analysed traces (the job, the writers, -o). */
#ifndef MP_CLI_TRACE_CMD_H
#define MP_CLI_TRACE_CMD_H

#include <stdbool.h>

#include "trace/trace.h"

enum { TR_EXIT_USAGE = 1, TR_EXIT_INPUT = 2 };

typedef struct tr_args {
    mp_trace_options o;
    int format;              /* 0 text, 1 json, 2 html, 3 csv */
    const char *format_arg;  /* --format's value as given; NULL when not given */
    const char *csv_table;
    const char *out_path, *input;
    const char *input2;      /* trace diff: B (input is A) */
    bool digest, folder, help;
    bool csv_given;          /* --csv-table was given */
    bool diff;               /* `trace diff A B` */
} tr_args;

/* 0, or an exit status (the message printed). argv[0] is "trace". */
int mp_trace_cli_parse(int argc, char **argv, tr_args *a);
/* The traces and digests of a folder, sorted by name; 0 or an exit status
 * (1: report, the -o file, is one of them). */
int mp_trace_cli_files(const char *dir, const char *report, char ***files, int *n);
void mp_trace_cli_files_free(char **files, int n);
/* The job (n > 1) and the report (or digest) to -o or stdout; 0 or 2. */
int mp_trace_cli_report(mp_trace **t, int n, const tr_args *a);
/* "modelprof: MSG" on stderr, control bytes escaped. */
void mp_trace_cli_error(const char *msg);

#endif
