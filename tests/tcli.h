/* Running the command line from a test: one child process, its output and
 * errors captured. Shared by the CLI, malformed-input and --run tests. */
#ifndef MP_TCLI_H
#define MP_TCLI_H

#include <stddef.h>

typedef struct t_cli {
    int code;         /* exit status; 128 + signal when killed */
    char *out, *err;  /* NUL-terminated */
    size_t out_len;
} t_cli;

/* Run $MP_BIN (default build/modelprof) with args (NULL-terminated).
 * secs > 0: killed after secs (SIGALRM survives exec, code 128 + 14);
 * fsize > 0: files it writes are capped at fsize bytes. */
t_cli t_cli_run(const char *const *args, int secs, long fsize);
/* The same with its stdout opened on out_path (/dev/full: every write
 * fails); r.out is then empty. Killed after 60 s. */
t_cli t_cli_run_to(const char *const *args, const char *out_path);
void t_cli_free(t_cli *r);

/* With MP_JSON_DUMP set (make test), copy a JSON output (body, len bytes)
 * into that folder as KIND-PID-N.json: tools/schema_check.py validates it
 * against docs/schema/KIND.schema.json (KIND: profile, trace, train, plan,
 * chrome_trace). Tests that call the library's JSON writers directly pass
 * their output here, so every JSON the suite produces is validated. */
void t_json_dump(const char *kind, const char *body, size_t len);

/* Traces' report (mp_trace_report_json or _text) in a string to free, NULL
 * when the writer fails; *len its length. The JSON goes to t_json_dump
 * too. */
struct mp_trace;
struct mp_tjob;
struct mp_trace_options;
char *t_trace_report(const struct mp_trace *const *t, int n, const struct mp_tjob *job,
                     const struct mp_trace_options *o, int json, size_t *len);

#endif
