/* Test runner: runs each test in a child process so that one crash cannot
 * hide the others. Usage: tests [substring-filter]. Prints
 * "N passed, N failed" last. */
#include "test.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "modelprof.h"
#include "run/run.h"

int mp_t_failures;

/* Files a test writes: one folder per test process, removed when it ends. */
static char t_dir[64];

const char *mp_t_path(const char *name) {
    static char buf[256];
    if (!t_dir[0]) {
        snprintf(t_dir, sizeof t_dir, "/tmp/mp-test-XXXXXX");
        if (!mkdtemp(t_dir)) abort();
    }
    snprintf(buf, sizeof buf, "%s/%s", t_dir, name);
    return buf;
}

static int t_remove(const char *p, const struct stat *sb, int flag, struct FTW *f) {
    (void)sb, (void)flag, (void)f;
    remove(p);
    return 0;
}

static void t_dir_remove(void) {
    if (t_dir[0]) nftw(t_dir, t_remove, 16, FTW_DEPTH | FTW_PHYS);
    t_dir[0] = 0;
}

void mp_t_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "    %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    mp_t_failures++;
}

typedef struct {
    const char *file;
    const mp_test *tests;
    const int *count;
} mp_t_suite;

static const mp_t_suite suites[] = {
#define MP__SUITE(f) {#f, mp_tests_##f, &mp_tests_##f##_count},
    MP_TEST_FILES(MP__SUITE)
#undef MP__SUITE
};

/* One test in a child process; its output goes to `out` when given (a
 * parallel run prints it whole, in the table's order, when the test ends). */
static pid_t start_test(const mp_test *t, FILE *out) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (out) {
            dup2(fileno(out), 1);
            dup2(fileno(out), 2);
        }
        mp_t_failures = 0;
        t->fn();
        t_dir_remove();
        fflush(stdout);
        fflush(stderr);
        _exit(mp_t_failures ? 1 : 0);
    }
    return pid;
}

typedef struct job {
    const mp_test *t;
    char full[256];
    FILE *out;
    pid_t pid;
    int status;
    bool done;
} job;

static bool report(job *j) {
    if (j->out) {
        fflush(j->out);
        rewind(j->out);
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, j->out)) > 0) fwrite(buf, 1, n, stdout);
        fclose(j->out);
    }
    bool ok = WIFEXITED(j->status) && WEXITSTATUS(j->status) == 0;
    if (WIFSIGNALED(j->status)) printf("    crashed with signal %d\n", WTERMSIG(j->status));
    printf("%s %s\n", ok ? "ok  " : "FAIL", j->full);
    fflush(stdout);
    return ok;
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    bool inproc = getenv("MP_TEST_INPROC") != NULL; /* for debuggers/sanitizers */
    /* MP_TEST_JOBS=N: N tests at a time (make check); each one's output is
     * held until it ends and printed in the table's order */
    int jobs = getenv("MP_TEST_JOBS") ? atoi(getenv("MP_TEST_JOBS")) : 1;
    if (jobs < 1 || inproc) jobs = 1;
    int passed = 0, failed = 0;
    int n = 0, cap = 0;
    job *js = NULL;
    for (size_t s = 0; s < sizeof suites / sizeof suites[0]; s++) {
        for (int i = 0; i < *suites[s].count; i++) {
            const mp_test *t = &suites[s].tests[i];
            char full[256];
            snprintf(full, sizeof full, "%s.%s", suites[s].file, t->name);
            if (filter && !strstr(full, filter)) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                job *g = realloc(js, (size_t)cap * sizeof *js);
                if (!g) {
                    perror("tests");
                    return 2;
                }
                js = g;
            }
            memset(&js[n], 0, sizeof js[n]);
            js[n].t = t;
            memcpy(js[n].full, full, sizeof full);
            n++;
        }
    }
    if (inproc) {
        for (int i = 0; i < n; i++) {
            mp_t_failures = 0;
            /* every test starts from the library's defaults: a test that
             * forces the portable kernels does not leak it to the next */
            mp_run_portable_only = false;
            js[i].t->fn();
            bool ok = mp_t_failures == 0;
            printf("%s %s\n", ok ? "ok  " : "FAIL", js[i].full);
            if (ok) passed++;
            else failed++;
        }
    } else {
        int next = 0, printed = 0, running = 0;
        while (printed < n) {
            while (running < jobs && next < n) {
                job *j = &js[next++];
                if (jobs > 1 && !(j->out = tmpfile())) {
                    perror("tmpfile");
                    return 2;
                }
                j->pid = start_test(j->t, j->out);
                if (j->pid < 0) {
                    perror("fork");
                    return 2;
                }
                running++;
            }
            int status = 0;
            pid_t pid = waitpid(-1, &status, 0);
            if (pid < 0) {
                perror("waitpid");
                return 2;
            }
            for (int i = printed; i < next; i++)
                if (js[i].pid == pid && !js[i].done) {
                    js[i].status = status;
                    js[i].done = true;
                    running--;
                }
            while (printed < n && js[printed].done) {
                if (report(&js[printed])) passed++;
                else failed++;
                printed++;
            }
        }
    }
    free(js);
    t_dir_remove();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
