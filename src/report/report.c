/* Public report entry points: options, dispatch by format, atomic write. */
#include "report/report.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

void mp_out_flush(mp_out *o) {
    if (o->n) fwrite_unlocked(o->buf, 1, o->n, o->f);
    o->n = 0;
}

void mp_out_write(mp_out *o, const void *p, size_t len) {
    if (len > o->cap - o->n) {
        mp_out_flush(o);
        if (len > o->cap) {
            fwrite_unlocked(p, 1, len, o->f);
            return;
        }
    }
    size_t n = o->n;
    memcpy(o->buf + n, p, len);
    o->n = n + len;
}

void mp_out_printf(mp_out *o, const char *fmt, ...) {
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (len < 0) return;
    if ((size_t)len < sizeof small) {
        mp_out_write(o, small, (size_t)len);
        return;
    }
    char *big = malloc((size_t)len + 1);
    if (!big) return; /* out of memory: the piece is left out */
    va_start(ap, fmt);
    vsnprintf(big, (size_t)len + 1, fmt, ap);
    va_end(ap);
    mp_out_write(o, big, (size_t)len);
    free(big);
}

void mp_report_options_default(mp_report_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->format = MP_FORMAT_TEXT;
    o->depth = -1;
    o->top = 3;
    o->detailed = 1;
    o->show_ops = 1;
}

mp_status mp_report_write(const mp_profile *p, const mp_report_options *o, FILE *f) {
    mp_report_options def;
    if (!p || !p->m || !f) return mp_error(MP_ERR_USAGE, "mp_report_write: no profile or stream");
    if (!o) {
        mp_report_options_default(&def);
        o = &def;
    }
    if (o->depth < -1)
        return mp_error(MP_ERR_USAGE, "report depth %d: use -1 (all) or a depth >= 0", o->depth);
    if (o->top < -1)
        return mp_error(MP_ERR_USAGE, "report top %d: use -1 (all), 0 (none) or a count",
                        o->top);
    mp_status st;
    switch (o->format) {
    case MP_FORMAT_TEXT: st = mp_report_text(p, o, f); break;
    case MP_FORMAT_JSON: st = mp_report_json(p, o, f); break;
    case MP_FORMAT_HTML: st = mp_report_html(p, o, f); break;
    case MP_FORMAT_CSV:
        if ((unsigned)o->csv_table > MP_CSV_OPS)
            return mp_error(MP_ERR_USAGE, "unknown CSV table %d", (int)o->csv_table);
        st = mp_report_csv(p, o, f);
        break;
    default: return mp_error(MP_ERR_USAGE, "unknown report format %d", (int)o->format);
    }
    if (st != MP_OK) return st;
    if (fflush(f) != 0 || ferror(f))
        return mp_error(MP_ERR_IO, "cannot write the report: %s", strerror(errno));
    return MP_OK;
}

/* Create "<dir>/.<base>.tmp-<pid>-<n>" exclusively (mode 0666 less the
 * umask, as a plain fopen would give the final file). */
static int report_tmp_open(const char *path, char *tmp, size_t cap) {
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    const char *base = slash ? slash + 1 : path;
    for (int n = 0; n < 100; n++) {
        int len = snprintf(tmp, cap, "%.*s.%s.tmp-%ld-%d", dirlen, path, base,
                           (long)getpid(), n);
        if (len < 0 || (size_t)len >= cap) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

mp_status mp_report_write_file(const mp_profile *p, const mp_report_options *o,
                               const char *path) {
    if (!path || !path[0]) return mp_error(MP_ERR_USAGE, "no report file name");
    const char *slash = strrchr(path, '/');
    if (slash && !slash[1])
        return mp_error(MP_ERR_USAGE, "report file %s: names a folder", path);
    /* A device or pipe (/dev/null, /dev/stdout, a fifo) is written in
     * place: renaming over it would replace it with a file. */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        if (S_ISDIR(sb.st_mode))
            return mp_error(MP_ERR_IO, "report file %s: is a folder", path);
        FILE *df = fopen(path, "w");
        if (!df) return mp_error(MP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        mp_status dst = mp_report_write(p, o, df);
        if (fclose(df) != 0 && dst == MP_OK)
            dst = mp_error(MP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        return dst;
    }
    /* a symlink to a file: replace the file it points to, not the link */
    char *real = NULL;
    if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) {
        real = realpath(path, NULL);
        if (real) path = real;
    }
    size_t cap = strlen(path) + 64;
    char *tmp = malloc(cap);
    if (!tmp) return mp_error(MP_ERR_NOMEM, "out of memory");
    int fd = report_tmp_open(path, tmp, cap);
    if (fd < 0) {
        mp_status st = mp_error(MP_ERR_IO, "cannot create a temporary file next to %s: %s",
                                path, strerror(errno));
        free(tmp);
        free(real);
        return st;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        mp_status st = mp_error(MP_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        free(real);
        return st;
    }
    mp_status st = mp_report_write(p, o, f);
    if (st == MP_OK && fsync(fileno(f)) != 0 && errno != EINVAL && errno != EROFS)
        st = mp_error(MP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (fclose(f) != 0 && st == MP_OK)
        st = mp_error(MP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (st == MP_OK && rename(tmp, path) != 0)
        st = mp_error(MP_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (st != MP_OK) unlink(tmp);
    free(tmp);
    free(real);
    return st;
}
