/* See tcli.h. */
#include "tcli.h"

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trace/trace.h"

static char *t_cli_slurp(int fd, size_t *len) {
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    lseek(fd, 0, SEEK_SET);
    for (;;) {
        if (n + 4096 > cap) b = realloc(b, cap *= 2);
        ssize_t r = read(fd, b + n, cap - n - 1);
        if (r <= 0) break;
        n += (size_t)r;
    }
    b[n] = 0;
    if (len) *len = n;
    return b;
}

void t_json_dump(const char *kind, const char *body, size_t len) {
    const char *dir = getenv("MP_JSON_DUMP");
    if (!dir || !*dir || !kind || !body) return;
    while (len && (*body == ' ' || *body == '\n')) body++, len--;
    if (!len || (body[0] != '{' && body[0] != '[')) return;
    static int seq;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s-%d-%d.json", dir, kind, (int)getpid(), seq++);
    FILE *f = fopen(path, "w");
    if (f) {
        fwrite(body, 1, len, f);
        fclose(f);
    }
}

/* With MP_JSON_DUMP set (make test), every JSON the command writes on
 * success (stdout, or the -o file) is copied into that folder as
 * KIND-PID-N.json, KIND from the subcommand: tools/schema_check.py checks
 * each against docs/schema/KIND.schema.json. */
static void t_cli_dump_json(const char *const *args, const t_cli *r) {
    const char *dir = getenv("MP_JSON_DUMP");
    if (!dir || !*dir || r->code != 0) return;
    bool json = false, digest = false;
    const char *ofile = NULL, *chrome = NULL;
    for (int i = 0; args[i]; i++) {
        if (strcmp(args[i], "--digest") == 0) json = digest = true;
        if (strcmp(args[i], "--format=json") == 0 || (strcmp(args[i], "--format") == 0 && args[i + 1] &&
                                                      strcmp(args[i + 1], "json") == 0))
            json = true;
        if ((strcmp(args[i], "-o") == 0 || strcmp(args[i], "--output") == 0) && args[i + 1])
            ofile = args[i + 1];
        if (strcmp(args[i], "--chrome-trace") == 0 && args[i + 1]) chrome = args[i + 1];
    }
    const char *kind = digest                                      ? "digest"
                       : args[0] && strcmp(args[0], "trace") == 0 && args[1] && strcmp(args[1], "diff") == 0
                           ? "trace_diff"
                       : args[0] && strcmp(args[0], "trace") == 0  ? "trace"
                       : args[0] && strcmp(args[0], "plan") == 0 ? "plan"
                       : args[0] && strcmp(args[0], "memory") == 0 && args[1] && strcmp(args[1], "diff") == 0
                           ? "memory_diff"
                       : args[0] && strcmp(args[0], "memory") == 0 ? "memory"
                                                                 : "profile";
    const char *srcs[2] = {json ? (ofile ? ofile : "") : NULL, chrome};
    const char *kinds[2] = {kind, "chrome_trace"};
    for (int k = 0; k < 2; k++) {
        if (!srcs[k]) continue;
        if (!srcs[k][0]) {
            t_json_dump(kinds[k], r->out, r->out_len);
            continue;
        }
        int fd = open(srcs[k], O_RDONLY);
        if (fd < 0) continue;
        size_t len = 0;
        char *own = t_cli_slurp(fd, &len);
        close(fd);
        t_json_dump(kinds[k], own, len);
        free(own);
    }
}

static t_cli t_cli_exec(const char *const *args, int secs, long fsize, const char *out_path);

t_cli t_cli_run(const char *const *args, int secs, long fsize) { return t_cli_exec(args, secs, fsize, NULL); }

t_cli t_cli_run_to(const char *const *args, const char *out_path) { return t_cli_exec(args, 60, 0, out_path); }

static t_cli t_cli_exec(const char *const *args, int secs, long fsize, const char *out_path) {
    const char *bin = getenv("MP_BIN") ? getenv("MP_BIN") : "build/modelprof";
    char on[] = "/tmp/mp-cli-out-XXXXXX", en[] = "/tmp/mp-cli-err-XXXXXX";
    int fo = mkstemp(on), fe = mkstemp(en);
    unlink(on);
    unlink(en);
    const char *argv[64];
    int n = 0;
    argv[n++] = bin;
    for (int i = 0; args[i] && n < 62; i++) argv[n++] = args[i];
    argv[n] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int to = out_path ? open(out_path, O_WRONLY) : fo;
        dup2(to >= 0 ? to : fo, 1);
        dup2(fe, 2);
        if (fsize > 0) {
            struct rlimit rl = {(rlim_t)fsize, (rlim_t)fsize};
            signal(SIGXFSZ, SIG_IGN);
            setrlimit(RLIMIT_FSIZE, &rl);
        }
        if (secs > 0) alarm((unsigned)secs);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    t_cli r = {0};
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = t_cli_slurp(fo, &r.out_len);
    r.err = t_cli_slurp(fe, NULL);
    close(fo);
    close(fe);
    t_cli_dump_json(args, &r);
    return r;
}

void t_cli_free(t_cli *r) {
    free(r->out);
    free(r->err);
}

char *t_trace_report(const mp_trace *const *t, int n, const mp_tjob *job, const mp_trace_options *o,
                     int json, size_t *len) {
    char *buf = NULL;
    *len = 0;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    mp_status st = json ? mp_trace_report_json(t, n, job, o, f) : mp_trace_report_text(t, n, job, o, f);
    fclose(f);
    if (st != MP_OK) {
        free(buf);
        return NULL;
    }
    if (json) t_json_dump("trace", buf, *len);
    return buf;
}
