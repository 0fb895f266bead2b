/* What the commands (main.c, plan_cmd.c, trace_cmd.c, memory_cmd.c,
 * mpi_main.c) share. */
#ifndef MP_CLI_CLI_H
#define MP_CLI_CLI_H

/* One line on stderr: "WHO: PREFIXMSG", the message's control bytes (names
 * from a file may hold them) escaped, a newline as \n, others as \xNN.
 * who NULL: "modelprof". */
void mp_cli_error(const char *who, const char *prefix, const char *msg);

#endif
