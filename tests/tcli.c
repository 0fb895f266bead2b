/* See tcli.h. */
#include "tcli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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

t_cli t_cli_run(const char *const *args, int secs, long fsize) {
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
        dup2(fo, 1);
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
    return r;
}

void t_cli_free(t_cli *r) {
    free(r->out);
    free(r->err);
}
