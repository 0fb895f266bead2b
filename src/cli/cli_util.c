/* What the commands share (cli.h): the one error line on stderr. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"

void mp_cli_error(const char *who, const char *prefix, const char *msg) {
    fputs(who ? who : "modelprof", stderr);
    fputs(": ", stderr);
    if (prefix) fputs(prefix, stderr);
    for (const unsigned char *p = (const unsigned char *)(msg ? msg : ""); *p; p++) {
        if (*p == '\n')
            fputs("\\n", stderr);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(stderr, "\\x%02x", *p);
        else
            fputc(*p, stderr);
    }
    fputc('\n', stderr);
}

bool mp_cli_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (!a || !b || stat(a, &sa) != 0 || stat(b, &sb) != 0) return false;
    return S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

mp_status mp_cli_write(const char *path, mp_status (*write)(void *ud, FILE *f), void *ud) {
    return path ? mp_write_file_atomic(path, write, ud) : mp_write_stream(stdout, "standard output", write, ud);
}

bool mp_cli_output_clash(const char *who, const char *flag, const char *out, const char *const *in,
                         const char *const *what, int n) {
    if (!out) return false;
    for (int i = 0; i < n; i++) {
        if (!in[i] || !mp_cli_same_file(out, in[i])) continue;
        char msg[8400];
        snprintf(msg, sizeof msg, "%s %.4096s: names %s%s%.4096s, which it reads; writing it would replace it", flag,
                 out, what[i], strcmp(in[i], out) ? " " : "", strcmp(in[i], out) ? in[i] : "");
        mp_cli_error(who, NULL, msg);
        fprintf(stderr, "(see %s --help)\n", who ? who : "modelprof");
        return true;
    }
    return false;
}
