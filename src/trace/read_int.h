/* The trace reader's byte source (read_src.c) for its tokenizer
 * (read.c): a plain file, a gzip file or memory, read into the window;
 * gzip inflated by ISA-L, on a thread of its own when there is a core for
 * it. */
#ifndef MP_TRACE_READ_INT_H
#define MP_TRACE_READ_INT_H

#include "trace/trace.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct inflate_state;

typedef struct rsrc {
    int fd;                       /* -1: memory */
    mp_status err;                /* of the last failed rd_src_read */
    const uint8_t *mem;
    size_t mem_len, mem_pos;
    bool gz, z_done, raw_eof;
    struct inflate_state *z;      /* ISA-L's inflater (gzip) */
    uint8_t *zin;
    size_t zin_cap;
    uint64_t raw_read;            /* compressed bytes read */
} rsrc;

/* gzip's magic starts the inflater; else the first bytes go to buf. */
mp_status rd_src_open(rsrc *s, char *buf, size_t *len, const char *label);
/* Up to n bytes (decompressed); 0 at the end; -1 with s->err set. */
ssize_t rd_src_read(rsrc *s, char *dst, size_t n, const char *label);
void rd_src_close(rsrc *s);

/* gzip inflated on a thread of its own, a few blocks ahead of the parser. */
typedef struct rd_pipe rd_pipe;
rd_pipe *rd_pipe_start(rsrc *src, const char *label);
ssize_t rd_pipe_read(rd_pipe *p, char *dst, size_t n);
void rd_pipe_free(rd_pipe *p);

#endif
