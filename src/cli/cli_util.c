/* What the commands share (cli.h): the one error line on stderr. */
#include "cli/cli.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

int mp_cli_usage(const char *who, const char *fmt, ...) {
    char msg[8400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mp_cli_error(who, NULL, msg);
    fprintf(stderr, "(see %s --help)\n", who ? who : "modelprof");
    return 1;
}

/* A non-negative decimal integer, the whole of s (no sign, no space). */
static bool cli_count(const char *s, const char *end_at, int64_t *out) {
    if (s == end_at || *s < '0' || *s > '9') return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end != end_at) return false;
    *out = v;
    return true;
}

int mp_cli_dim(const char *who, const char *val, const char *const *given, int n, int64_t *value) {
    if (!val) return mp_cli_usage(who, "--dim needs NAME=VALUE");
    const char *eq = strchr(val, '=');
    int64_t v;
    if (!eq || eq == val || !cli_count(eq + 1, eq + 1 + strlen(eq + 1), &v))
        return mp_cli_usage(who, "--dim '%s': expected NAME=VALUE with a positive integer", val);
    if (v == 0) return mp_cli_usage(who, "--dim '%s': a dimension must be at least 1", val);
    for (int k = 0; k < n; k++)
        if (strncmp(given[k], val, (size_t)(eq - val) + 1) == 0)
            return mp_cli_usage(who, "--dim '%s': the dimension is already given (%s)", val, given[k]);
    if (value) *value = v;
    return 0;
}

int mp_cli_input(const char *who, const char *val, char **name, int64_t dims[64], int *rank) {
    *name = NULL;
    *rank = 0;
    if (!val) return mp_cli_usage(who, "--input needs NAME=D0xD1x...");
    const char *eq = strrchr(val, '=');
    if (!eq || eq == val) return mp_cli_usage(who, "--input '%s': expected NAME=D0xD1x... (e.g. x=1x3x224x224)", val);
    for (const char *p = eq + 1; *p;) {
        const char *x = strchr(p, 'x');
        const char *end = x ? x : p + strlen(p);
        if (*rank == 64) return mp_cli_usage(who, "--input '%.200s...': more than 64 dims (a shape has at most 64)", val);
        if (!cli_count(p, end, &dims[*rank]))
            return mp_cli_usage(who, "--input '%s': dims must be non-negative integers separated by 'x'", val);
        (*rank)++;
        if (x && !x[1])
            return mp_cli_usage(who, "--input '%s': ends in 'x': dims are non-negative integers separated by 'x' "
                                "(e.g. 1x3x224x224)", val);
        p = x ? x + 1 : end;
    }
    *name = strndup(val, (size_t)(eq - val));
    if (!*name) {
        mp_cli_error(who, NULL, "out of memory");
        return 2;
    }
    return 0;
}

int mp_cli_operand(const char *a, bool *ended) {
    if (*ended || a[0] != '-' || !a[1]) return 1;
    if (strcmp(a, "--") == 0) {
        *ended = true;
        return -1;
    }
    return 0;
}

bool mp_cli_opt(int argc, char **argv, int *i, const char *flag, const char **val) {
    const char *a = argv[*i];
    size_t n = strlen(flag);
    if (strncmp(a, flag, n) != 0) return false;
    if (a[n] == '=') {
        *val = a + n + 1;
        return true;
    }
    if (a[n]) return false;
    *val = *i + 1 < argc ? argv[++*i] : NULL;
    return true;
}

bool mp_cli_int(const char *s, long long lo, long long hi, long long *out) {
    if (!s) return false;
    const char *p = s[0] == '-' ? s + 1 : s;
    if (!isdigit((unsigned char)*p)) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool mp_cli_num(const char *s, double *out) {
    if (!s) return false;
    const char *p = s[0] == '-' ? s + 1 : s;
    if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1]))) return false;
    for (const char *c = p; *c; c++)
        if (!isdigit((unsigned char)*c) && *c != '.' && *c != 'e' && *c != 'E' && *c != '-' && *c != '+')
            return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}
