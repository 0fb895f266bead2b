/* Writing a file whole or not at all (base.h): every writer of a report,
 * a plan, a trace or an array goes through mp_write_file_atomic, and every
 * stream a writer fills is checked once, here (mp_write_stream). */
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

mp_status mp_write_stream(FILE *f, const char *name, mp_status (*write)(void *ud, FILE *f), void *ud) {
    errno = 0;
    mp_status st = write(ud, f);
    int err = errno;
    /* a write that failed half-way sets the stream's error flag, and the
     * data it dropped is not written again by fflush or fclose: the flag is
     * the one sure sign */
    if (fflush(f) != 0) err = errno;
    else if (!ferror(f)) err = 0;
    if (err == 0 && ferror(f)) err = EIO;
    if (err && (st == MP_OK || st == MP_ERR_IO))
        return mp_error(MP_ERR_IO, "cannot write %s: %s", name, strerror(err));
    return st;
}

/* Create "<dir>/.<base>.tmp-<pid>-<n>" exclusively (mode 0666 less the
 * umask, as a plain fopen would give the final file). */
static int tmp_open(const char *path, char *tmp, size_t cap) {
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    const char *base = slash ? slash + 1 : path;
    for (int n = 0; n < 100; n++) {
        int len = snprintf(tmp, cap, "%.*s.%s.tmp-%ld-%d", dirlen, path, base, (long)getpid(), n);
        if (len < 0 || (size_t)len >= cap) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

mp_status mp_write_file_atomic(const char *path, mp_status (*write)(void *ud, FILE *f), void *ud) {
    if (!path || !path[0]) return mp_error(MP_ERR_USAGE, "no report file name");
    const char *slash = strrchr(path, '/');
    if (slash && !slash[1]) return mp_error(MP_ERR_USAGE, "report file %s: names a folder", path);
    /* A device or pipe (/dev/null, /dev/stdout, a fifo) is written in
     * place: renaming over it would replace it with a file. */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        if (S_ISDIR(sb.st_mode)) return mp_error(MP_ERR_IO, "report file %s: is a folder", path);
        FILE *df = fopen(path, "w");
        if (!df) return mp_error(MP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        mp_status dst = mp_write_stream(df, path, write, ud);
        if (fclose(df) != 0 && dst == MP_OK) dst = mp_error(MP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
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
    if (!tmp) {
        free(real);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    int fd = tmp_open(path, tmp, cap);
    if (fd < 0) {
        int err = errno;
        /* the folder the file goes into: say what is wrong with it */
        const char *sep = strrchr(path, '/');
        char dir[4096];
        snprintf(dir, sizeof dir, "%.*s", sep ? (int)(sep == path ? 1 : sep - path) : 1, sep ? path : ".");
        struct stat db;
        int dst = stat(dir, &db) == 0 ? 0 : errno;
        mp_status st;
        if (dst == ENOENT)
            st = mp_error(MP_ERR_IO, "cannot write %s: the folder %s does not exist", path, dir);
        else if (dst == ENOTDIR || (dst == 0 && !S_ISDIR(db.st_mode)))
            st = mp_error(MP_ERR_IO, "cannot write %s: %s is not a folder", path, dir);
        else
            st = mp_error(MP_ERR_IO, "cannot create a temporary file in the folder %s (to write %s): %s", dir,
                          path, strerror(err));
        free(tmp);
        free(real);
        return st;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        mp_status st = mp_error(MP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        free(real);
        return st;
    }
    /* written, flushed and checked (mp_write_stream), synced, closed, and
     * only then renamed over the file: a failure anywhere leaves the old
     * file as it was and no temporary */
    mp_status st = mp_write_stream(f, path, write, ud);
    if (st == MP_OK && fsync(fileno(f)) != 0 && errno != EINVAL && errno != EROFS)
        st = mp_error(MP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (fclose(f) != 0 && st == MP_OK) st = mp_error(MP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (st == MP_OK && rename(tmp, path) != 0)
        st = mp_error(MP_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (st != MP_OK) unlink(tmp);
    free(tmp);
    free(real);
    return st;
}
