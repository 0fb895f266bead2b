/* What the commands (main.c, plan_cmd.c, trace_cmd.c, memory_cmd.c,
 * mpi_main.c) share. */
#ifndef MP_CLI_CLI_H
#define MP_CLI_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "modelprof.h"

/* One line on stderr: "WHO: PREFIXMSG", the message's control bytes (names
 * from a file may hold them) escaped, a newline as \n, others as \xNN.
 * who NULL: "modelprof". */
void mp_cli_error(const char *who, const char *prefix, const char *msg);

/* Whether paths a and b name one existing regular file (a link or another
 * spelling included): -o naming an input would replace what is read. */
bool mp_cli_same_file(const char *a, const char *b);

/* ---- options: the helpers every subcommand parses its flags with ----
 * mp_cli_operand: whether argument a is an operand (a file): 1 when it is
 * (not an option, "-" alone, or anything after "--"), 0 an option, -1 "--"
 * itself (it ends the options: *ended set; skip it).
 * mp_cli_opt: whether argv[*i] is FLAG, its value the next argument (*i
 * moves past it), or FLAG=VALUE; *val the value, NULL when none is left.
 * mp_cli_int: s, all of it, a decimal integer (an optional '-', digits: no
 * space, sign '+', hex or empty) in [lo, hi].
 * mp_cli_num: s, all of it, a finite decimal number (digits, '.', an
 * exponent: no space, hex, inf or nan). */
int mp_cli_operand(const char *a, bool *ended);
bool mp_cli_opt(int argc, char **argv, int *i, const char *flag, const char **val);
bool mp_cli_int(const char *s, long long lo, long long hi, long long *out);
bool mp_cli_num(const char *s, double *out);

/* A usage error: "WHO: MESSAGE" and "(see WHO --help)" on stderr; returns
 * 1, the exit status of a usage error in every subcommand. */
int mp_cli_usage(const char *who, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The one parser of --dim NAME=VALUE (every subcommand): a name, a value
 * from 1 up (a dimension of 0 is refused), a name not among the n given
 * before. 0, or the usage error said (1). *value: the value. */
int mp_cli_dim(const char *who, const char *val, const char *const *given, int n, int64_t *value);

/* The one parser of --input NAME=D0xD1x... (at most 64 dims, each a
 * non-negative integer; NAME= alone: a scalar). *name: malloc'd, the
 * caller's. 0, or the exit status, the error said (1 usage, 2 out of
 * memory). */
int mp_cli_input(const char *who, const char *val, char **name, int64_t dims[64], int *rank);

/* The one check that an output does not replace what the command reads:
 * whether out (written by FLAG: "-o", "--chrome-trace", "--save-outputs")
 * names one of the n files read, in[i] (NULL entries skipped; what[i] says
 * which: "the model", "the --input-data file"). When it does, one line
 * "WHO: FLAG OUT: names WHAT, which it reads; writing it would replace it"
 * and "(see WHO --help)" on stderr, and true: the caller exits 1. */
bool mp_cli_output_clash(const char *who, const char *flag, const char *out, const char *const *in,
                         const char *const *what, int n);

/* A report, plan or table to path (-o: written whole or not at all) or,
 * path NULL, to stdout: write(ud, f) fills it and the stream is checked
 * (base.h, mp_write_stream), so a failed write is MP_ERR_IO "cannot write
 * PATH: REASON" ("cannot write standard output: REASON"). */
mp_status mp_cli_write(const char *path, mp_status (*write)(void *ud, FILE *f), void *ud);

#endif
