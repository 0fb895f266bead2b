/* The trace reader's byte source (read_int.h): a plain file, a gzip file
 * or memory, and the gzip inflater's thread. The tokenizer and the event
 * rules that read what it gives are in read.c. */
#include "trace/read_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <isa-l/igzip_lib.h>

/* ---- byte source: plain file, gzip file, memory ---- */

static ssize_t src_raw(rsrc *s, void *dst, size_t n) {
    if (s->fd < 0) {
        size_t k = MP_MIN(n, s->mem_len - s->mem_pos);
        if (k == 0) return 0;
        memcpy(dst, s->mem + s->mem_pos, k);
        s->mem_pos += k;
        return (ssize_t)k;
    }
    for (;;) {
        ssize_t k = read(s->fd, dst, n);
        if (k < 0 && errno == EINTR) continue;
        return k;
    }
}

/* More compressed bytes when the inflater has none; false on an I/O error. */
static bool src_refill(rsrc *s, const char *label) {
    if (s->z->avail_in > 0 || s->raw_eof) return true;
    ssize_t k = src_raw(s, s->zin, s->zin_cap);
    if (k < 0) {
        s->err = mp_error(MP_ERR_IO, "%s: cannot read: %s", label, strerror(errno));
        return false;
    }
    if (k == 0) s->raw_eof = true;
    s->raw_read += (uint64_t)k;
    s->z->next_in = s->zin;
    s->z->avail_in = (uint32_t)k;
    return true;
}

static const char *isal_error(int e) {
    switch (e) {
    case ISAL_INVALID_BLOCK: return "invalid deflate block";
    case ISAL_INVALID_SYMBOL: return "invalid deflate symbol";
    case ISAL_INVALID_LOOKBACK: return "invalid back-reference distance";
    case ISAL_INVALID_WRAPPER: return "invalid gzip header";
    case ISAL_UNSUPPORTED_METHOD: return "unsupported compression method";
    case ISAL_INCORRECT_CHECKSUM: return "CRC mismatch";
    default: return "inflate failed";
    }
}

/* Up to n decompressed bytes; 0 at the end; -1 with the error set.
 * gzip goes through ISA-L's inflate (igzip), streaming into the window:
 * measured 2.4-3.0 GB/s against zlib's 0.85-1.1 (docs/DESIGN.md). */
ssize_t rd_src_read(rsrc *s, char *dst, size_t n, const char *label) {
    if (!s->gz) {
        ssize_t k = src_raw(s, dst, n);
        if (k < 0) s->err = mp_error(MP_ERR_IO, "%s: cannot read: %s", label, strerror(errno));
        return k;
    }
    struct inflate_state *z = s->z;
    if (s->z_done) return 0;
    z->next_out = (uint8_t *)dst;
    z->avail_out = (uint32_t)MP_MIN(n, (size_t)UINT32_MAX);
    uint32_t room = z->avail_out;
    while (z->avail_out > 0) {
        if (!src_refill(s, label)) return -1;
        if (z->avail_in == 0 && s->raw_eof) {
            if (z->avail_out < room) break;   /* what came so far first */
            s->err = mp_error(MP_ERR_FORMAT,
                              "%s: the gzip stream is truncated (after %llu compressed bytes)",
                              label, (unsigned long long)s->raw_read);
            return -1;
        }
        int zr = isal_inflate(z);
        if (zr < 0) {
            s->err = mp_error(MP_ERR_FORMAT, "%s: gzip data error near compressed byte %llu: %s", label,
                              (unsigned long long)(s->raw_read - z->avail_in), isal_error(zr));
            return -1;
        }
        if (z->block_state == ISAL_BLOCK_FINISH) {
            /* concatenated members continue; the end of the file or
             * anything but a gzip header (trailing zeros) ends it */
            if (!src_refill(s, label)) return -1;
            if (z->avail_in == 0 || z->next_in[0] != 0x1f) {
                s->z_done = true;
                break;
            }
            uint8_t *in = z->next_in, *out = z->next_out;
            uint32_t avail = z->avail_in, out_avail = z->avail_out;
            isal_inflate_reset(z);
            z->crc_flag = ISAL_GZIP;
            z->next_in = in;
            z->avail_in = avail;
            z->next_out = out;
            z->avail_out = out_avail;
        }
    }
    return (ssize_t)(room - z->avail_out);
}

/* Looks at the first two bytes: gzip's magic sets s->gz and starts the
 * inflater on them; anything else goes to buf (*len bytes, up to 2). */
mp_status rd_src_open(rsrc *s, char *buf, size_t *len, const char *label) {
    uint8_t magic[2];
    *len = 0;
    ssize_t k = src_raw(s, magic, 2);
    if (k < 0) return mp_error(MP_ERR_IO, "%s: cannot read: %s", label, strerror(errno));
    if (k == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        s->gz = true;
        s->zin_cap = (size_t)1 << 20;
        s->zin = malloc(s->zin_cap);
        s->z = malloc(sizeof *s->z);
        if (!s->zin || !s->z) return mp_error(MP_ERR_NOMEM, "%s: out of memory", label);
        isal_inflate_init(s->z);
        s->z->crc_flag = ISAL_GZIP;
        memcpy(s->zin, magic, 2);
        s->z->next_in = s->zin;
        s->z->avail_in = 2;
        s->raw_read = 2;
    } else {
        memcpy(buf, magic, (size_t)k);
        *len = (size_t)k;
    }
    return MP_OK;
}

void rd_src_close(rsrc *s) {
    free(s->z);
    free(s->zin);
}

/* ---- gzip inflated on a thread of its own ----
 * A gzipped trace is inflated by a second thread into a few blocks while
 * the parser reads the ones before: inflating is a fifth to a quarter of
 * the time, and the parser of a gzipped file is one pass. An error reaches
 * the parser after the bytes that came before it, with its message, as
 * when the parser inflated them itself. */
#define RD_PIPE_BLOCKS 3
#define RD_PIPE_BLOCK ((size_t)1 << 20)

enum { PB_FREE, PB_FULL, PB_ERROR };

struct rd_pipe {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rsrc *src;
    const char *label;
    char *buf[RD_PIPE_BLOCKS];
    size_t len[RD_PIPE_BLOCKS];     /* PB_FULL: its bytes; 0 the end */
    int state[RD_PIPE_BLOCKS];
    mp_status err[RD_PIPE_BLOCKS];  /* PB_ERROR: the status and message */
    char msg[RD_PIPE_BLOCKS][512];
    int head, tail;                 /* the parser reads head, the inflater fills tail */
    size_t off;                     /* bytes of head already read */
    bool stop;
};

static void *pipe_main(void *arg) {
    rd_pipe *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->state[p->tail] != PB_FREE) pthread_cond_wait(&p->cv, &p->mu);
        bool stop = p->stop;
        int b = p->tail;
        pthread_mutex_unlock(&p->mu);
        if (stop) break;
        ssize_t k = rd_src_read(p->src, p->buf[b], RD_PIPE_BLOCK, p->label);
        pthread_mutex_lock(&p->mu);
        if (k < 0) {
            p->err[b] = p->src->err;
            snprintf(p->msg[b], sizeof p->msg[b], "%s", mp_last_error());
            p->state[b] = PB_ERROR;
        } else {
            p->len[b] = (size_t)k;
            p->state[b] = PB_FULL;
        }
        p->tail = (b + 1) % RD_PIPE_BLOCKS;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        if (k <= 0) break;   /* the end, or an error: nothing follows */
    }
    return NULL;
}

/* What rd_src_read gives, from the inflater's blocks. */
ssize_t rd_pipe_read(rd_pipe *p, char *dst, size_t n) {
    pthread_mutex_lock(&p->mu);
    while (p->state[p->head] == PB_FREE) pthread_cond_wait(&p->cv, &p->mu);
    int b = p->head, st = p->state[b];
    pthread_mutex_unlock(&p->mu);
    if (st == PB_ERROR) {
        p->src->err = mp_error(p->err[b], "%s", p->msg[b]);
        return -1;
    }
    if (p->len[b] == 0) return 0;   /* the end (it stays the end) */
    size_t k = MP_MIN(n, p->len[b] - p->off);
    memcpy(dst, p->buf[b] + p->off, k);
    p->off += k;
    if (p->off == p->len[b]) {
        pthread_mutex_lock(&p->mu);
        p->state[b] = PB_FREE;
        p->head = (b + 1) % RD_PIPE_BLOCKS;
        p->off = 0;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    return (ssize_t)k;
}

void rd_pipe_free(rd_pipe *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    for (int i = 0; i < RD_PIPE_BLOCKS; i++) free(p->buf[i]);
    free(p);
}

/* The inflater's thread for src; NULL when it cannot start (the parser
 * then inflates as it reads). */
rd_pipe *rd_pipe_start(rsrc *src, const char *label) {
    rd_pipe *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->src = src;
    p->label = label;
    bool ok = true;
    for (int i = 0; i < RD_PIPE_BLOCKS; i++) ok = ok && (p->buf[i] = malloc(RD_PIPE_BLOCK)) != NULL;
    if (ok && pthread_mutex_init(&p->mu, NULL) == 0) {
        if (pthread_cond_init(&p->cv, NULL) == 0) {
            if (pthread_create(&p->th, NULL, pipe_main, p) == 0) return p;
            pthread_cond_destroy(&p->cv);
        }
        pthread_mutex_destroy(&p->mu);
    }
    for (int i = 0; i < RD_PIPE_BLOCKS; i++) free(p->buf[i]);
    free(p);
    return NULL;
}
