/* The memory snapshot report's writers (memory_report.c, memory_html.c). */
#ifndef MP_MEMORY_REPORT_H
#define MP_MEMORY_REPORT_H

#include "memory/memory.h"

#include <stdio.h>

enum { MP_MEM_CSV_HOLDERS, MP_MEM_CSV_SITES, MP_MEM_CSV_EVENTS };

/* The planner's memory rows of the same model (modelprof memory
 * --plan-model), beside the categories at each device's peak. */
typedef struct mp_mem_predicted {
    char source[512];             /* what was planned: model, precision, optimizer, layout */
    int64_t bytes[MP_MC_COUNT];   /* per category; -1: the planner has no row for it */
    const char *rows[MP_MC_COUNT]; /* the planner rows summed into it */
} mp_mem_predicted;

typedef struct mp_mem_report_opts {
    int device;      /* -1: every device */
    int top;         /* rows per table, as the user gave it (-1 all), or MP_MEMORY_TOP_DEFAULT:
                        read it through mp_mem_top_rows */
    bool full_stack; /* whole stacks, not the first user frame */
    int csv_table;   /* MP_MEM_CSV_* */
    const mp_mem_predicted *pred; /* NULL: none */
} mp_mem_report_opts;

/* The rows each table of a report in `fmt` shows (-1 all): o->top when the
 * user gave it (--top K; -1 all), the same rule for every format; else the
 * format's own default, as before --top reached every format: 20 for text
 * and JSON (and memory diff), every row for CSV, 50 for the HTML page. */
int mp_mem_top_rows(const mp_mem_report_opts *o, mp_format fmt);

mp_status mp_memory_write_text(const mp_snapshot *s, const mp_mem_report_opts *o, FILE *f);
mp_status mp_memory_write_json(const mp_snapshot *s, const mp_mem_report_opts *o, FILE *f);
mp_status mp_memory_write_csv(const mp_snapshot *s, const mp_mem_report_opts *o, FILE *f);
mp_status mp_memory_write_html(const mp_snapshot *s, const mp_mem_report_opts *o, FILE *f);
/* `memory diff A B` (B - A): json or text. */
mp_status mp_memory_write_diff(const mp_snapshot *a, const mp_snapshot *b, const mp_mem_report_opts *o, bool json,
                               FILE *f);
/* Bytes in binary units, as memory_viz shows them: "1.50 MiB". */
const char *mp_mem_fmt_bytes(int64_t v, char *buf, size_t n);

#endif
