/* NumPy's .npy format, versions 1-3: the magic "\x93NUMPY", two version
 * bytes, a little-endian header length (2 bytes in v1, 4 in v2/v3), then
 * a Python dict literal {'descr': '<f4', 'fortran_order': False,
 * 'shape': (2, 3), } padded with spaces to a multiple of 64 and ending in
 * a newline, then the C-order data. */
#include "run/run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static const struct {
    const char *descr;
    int dtype;
} mp__npy_types[] = {
    {"f4", MP_DT_FLOAT}, {"f8", MP_DT_DOUBLE}, {"f2", MP_DT_FLOAT16}, {"i8", MP_DT_INT64},
    {"i4", MP_DT_INT32}, {"i2", MP_DT_INT16},  {"i1", MP_DT_INT8},    {"u1", MP_DT_UINT8},
    {"u2", MP_DT_UINT16}, {"u4", MP_DT_UINT32}, {"u8", MP_DT_UINT64}, {"b1", MP_DT_BOOL},
};

/* The value after 'key': in the header dict, or NULL. */
static const char *mp__npy_key(const char *h, const char *key) {
    const char *p = strstr(h, key);
    if (!p) return NULL;
    p += strlen(key);
    while (*p == ' ' || *p == ':') p++;
    return p;
}

mp_status mp_npy_read(const char *path, int *dtype, int *rank, int64_t *dims, void **data,
                      size_t *bytes) {
    *data = NULL;
    *bytes = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return mp_error(MP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    unsigned char pre[12];
    char *h = NULL;
    mp_status st = MP_OK;
    size_t hl = 0, n = fread(pre, 1, 10, f);
    if (n < 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        st = mp_error(MP_ERR_FORMAT, "%s: not a .npy file (no \\x93NUMPY magic)", path);
        goto out;
    }
    if (pre[6] == 1) {
        hl = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            st = mp_error(MP_ERR_FORMAT, "%s: truncated .npy header", path);
            goto out;
        }
        hl = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    } else {
        st = mp_error(MP_ERR_FORMAT, "%s: .npy version %d is not supported", path, pre[6]);
        goto out;
    }
    if (hl > (1u << 20)) {
        st = mp_error(MP_ERR_FORMAT, "%s: .npy header of %zu bytes", path, hl);
        goto out;
    }
    h = malloc(hl + 1);
    if (!h) {
        st = mp_error(MP_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (fread(h, 1, hl, f) != hl) {
        st = mp_error(MP_ERR_FORMAT, "%s: truncated .npy header", path);
        goto out;
    }
    h[hl] = 0;
    const char *d = mp__npy_key(h, "'descr'");
    const char *fo = mp__npy_key(h, "'fortran_order'");
    const char *sh = mp__npy_key(h, "'shape'");
    if (!d || !fo || !sh || (*d != '\'' && *d != '"') || *sh != '(') {
        st = mp_error(MP_ERR_FORMAT, "%s: .npy header lacks descr, fortran_order or shape", path);
        goto out;
    }
    if (strncmp(fo, "False", 5) != 0) {
        st = mp_error(MP_ERR_UNSUPPORTED, "%s: Fortran-order arrays are not supported (save C order)", path);
        goto out;
    }
    d++;
    if (*d == '>' && !(d[1] && (d[2] == '1'))) {
        st = mp_error(MP_ERR_UNSUPPORTED, "%s: big-endian data is not supported", path);
        goto out;
    }
    if (*d == '<' || *d == '|' || *d == '=' || *d == '>') d++;
    *dtype = 0;
    for (size_t i = 0; i < MP_ARRAY_LEN(mp__npy_types); i++)
        if (strncmp(d, mp__npy_types[i].descr, 2) == 0 && (d[2] == '\'' || d[2] == '"'))
            *dtype = mp__npy_types[i].dtype;
    if (!*dtype) {
        st = mp_error(MP_ERR_UNSUPPORTED, "%s: .npy dtype '%.8s' is not supported", path, d);
        goto out;
    }
    *rank = 0;
    const char *p = sh + 1;
    int64_t numel = 1;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || *rank >= MP_MAX_RANK || __builtin_mul_overflow(numel, v, &numel)) {
            st = mp_error(MP_ERR_FORMAT, "%s: bad .npy shape", path);
            goto out;
        }
        dims[(*rank)++] = v;
        p = end;
    }
    uint64_t need = mp_dtype_bytes(*dtype, numel);
    if (need > ((uint64_t)1 << 40)) {
        st = mp_error(MP_ERR_LIMIT, "%s: %llu bytes of data", path, (unsigned long long)need);
        goto out;
    }
    void *buf = malloc(need ? (size_t)need : 1);
    if (!buf) {
        st = mp_error(MP_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    if (need && fread(buf, 1, (size_t)need, f) != (size_t)need) {
        free(buf);
        st = mp_error(MP_ERR_FORMAT, "%s: the data is shorter than its shape (%llu bytes)", path,
                      (unsigned long long)need);
        goto out;
    }
    *data = buf;
    *bytes = (size_t)need;
out:
    free(h);
    fclose(f);
    return st;
}

typedef struct npy_job {
    const void *part[3]; /* the magic and version, the header, the data */
    size_t len[3];
} npy_job;

/* The file's bytes into f (mp_write_file_atomic checks the stream). */
static mp_status npy_put(void *ud, FILE *f) {
    const npy_job *j = ud;
    for (int i = 0; i < 3; i++)
        if (j->len[i] && fwrite(j->part[i], 1, j->len[i], f) != j->len[i]) break;
    return MP_OK;
}

mp_status mp_npy_write(const char *path, int dtype, int rank, const int64_t *dims, const void *data) {
    if (dtype == MP_DT_BFLOAT16) { /* numpy has no bfloat16: written as fp32 */
        int64_t n = 1;
        for (int d = 0; d < rank; d++) n *= dims[d];
        float *f = malloc(sizeof *f * (size_t)(n > 0 ? n : 1));
        if (!f) return mp_error(MP_ERR_NOMEM, "%s: out of memory", path);
        mp_run_convert(MP_DT_FLOAT, f, MP_DT_BFLOAT16, data, n);
        mp_status st = mp_npy_write(path, MP_DT_FLOAT, rank, dims, f);
        free(f);
        return st;
    }
    const char *descr = NULL;
    for (size_t i = 0; i < MP_ARRAY_LEN(mp__npy_types); i++)
        if (mp__npy_types[i].dtype == dtype) descr = mp__npy_types[i].descr;
    if (!descr)
        return mp_error(MP_ERR_UNSUPPORTED, "%s: dtype %s has no .npy equivalent", path, mp_dtype_name(dtype));
    char h[4096];
    int len = snprintf(h, sizeof h, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                       descr[1] == '1' ? '|' : '<', descr);
    int64_t numel = 1;
    for (int d = 0; d < rank && len < 3900; d++) {
        len += snprintf(h + len, sizeof h - (size_t)len, "%lld,%s", (long long)dims[d],
                        d + 1 < rank ? " " : "");
        numel *= dims[d];
    }
    if (rank > 1) len--; /* (2, 3) not (2, 3,); a 1-tuple keeps its comma */
    len += snprintf(h + len, sizeof h - (size_t)len, "), }");
    int total = 10 + len + 1, pad = (64 - total % 64) % 64;
    memset(h + len, ' ', (size_t)pad);
    len += pad;
    h[len++] = '\n';
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xff),
                             (unsigned char)(len >> 8)};
    npy_job j = {{pre, h, data}, {10, (size_t)len, (size_t)mp_dtype_bytes(dtype, numel)}};
    return mp_write_file_atomic(path, npy_put, &j);
}
