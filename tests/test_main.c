/* Test runner: runs each test in a child process so that one crash cannot
 * hide the others. Usage: tests [substring-filter]. Prints
 * "N passed, N failed" last. */
#include "test.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "modelprof.h"
#include "run/run.h"

int mp_t_failures;

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

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    bool inproc = getenv("MP_TEST_INPROC") != NULL; /* for debuggers/sanitizers */
    int passed = 0, failed = 0;
    for (size_t s = 0; s < sizeof suites / sizeof suites[0]; s++) {
        for (int i = 0; i < *suites[s].count; i++) {
            const mp_test *t = &suites[s].tests[i];
            char full[256];
            snprintf(full, sizeof full, "%s.%s", suites[s].file, t->name);
            if (filter && !strstr(full, filter)) continue;
            int ok;
            fflush(stdout);
            fflush(stderr);
            if (inproc) {
                mp_t_failures = 0;
                /* every test starts from the library's defaults: a test that
                 * forces the portable kernels does not leak it to the next */
                mp_run_portable_only = false;
                t->fn();
                ok = mp_t_failures == 0;
            } else {
                pid_t pid = fork();
                if (pid == 0) {
                    mp_t_failures = 0;
                    t->fn();
                    fflush(stdout);
                    fflush(stderr);
                    _exit(mp_t_failures ? 1 : 0);
                }
                int status = 0;
                if (pid < 0 || waitpid(pid, &status, 0) < 0) {
                    perror("fork");
                    return 2;
                }
                ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
                if (WIFSIGNALED(status))
                    fprintf(stderr, "    crashed with signal %d\n", WTERMSIG(status));
            }
            printf("%s %s\n", ok ? "ok  " : "FAIL", full);
            if (ok)
                passed++;
            else
                failed++;
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
