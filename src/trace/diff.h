/* Trace diff: two analysed runs compared, as Holistic Trace Analysis'
 * TraceDiff compares a control and a test trace (counts and time of each
 * operator and kernel), per step on average and largest change first.
 * diff.c builds it from the two trace summaries only (mp_trace); the
 * writers are src/report/trace_diff.c. */
#ifndef MP_TRACE_DIFF_H
#define MP_TRACE_DIFF_H

#include "trace/trace.h"

/* One name in A, in B or in both. Times are seconds per step (the trace's
 * total over its step count); a name missing from one run has 0 there. */
typedef struct mp_tdiff_row {
    const char *name;       /* operator name, kernel name, module path */
    const char *label;      /* kernels: the short name; modules: the class; else NULL */
    double a, b;            /* the compared time, s per step */
    double a_calls, b_calls;/* calls per step */
    double a2, b2;          /* operators: self CPU s per step; modules: backward s per step */
    bool in_a, in_b;
} mp_tdiff_row;

typedef struct mp_trace_diff {
    const mp_trace *a, *b;
    int a_steps, b_steps;
    double a_step, b_step;              /* mean step wall time, s */
    double a_busy, b_busy;              /* mean device busy time per step, s */
    double a_idle[MP_TI_COUNT], b_idle[MP_TI_COUNT];   /* mean idle by cause, s */
    double a_cat[MP_TC_COUNT], b_cat[MP_TC_COUNT];     /* mean device time by category, s */
    bool op_device;         /* operators compared by self device time (else self CPU) */
    bool mod_cpu;           /* module times are CPU range times (a trace without device rows) */
    mp_tdiff_row *ops, *kernels, *mods;
    int n_ops, n_kernels, n_mods;
    /* the files as given (NULL: the traces' own paths); for a digest the
     * trace's path is the original trace's, the file the digest's */
    const char *a_file, *b_file;
    bool same;              /* no figure differs: the steps, every row (time, calls) */
    char mods_note[240];    /* why the modules cannot be compared; "" when they can */
} mp_trace_diff;

/* Whether a row's figures are the same in A and B (in both, same time and calls). */
bool mp_tdiff_row_same(const mp_tdiff_row *r);

/* Compare B (test) against A (control): deltas are B - A. */
mp_status mp_trace_diff_make(const mp_trace *a, const mp_trace *b, mp_trace_diff *d);
/* The same, each side labelled with the file it was read from (a digest's
 * trace path is the original trace's: the label says both). */
mp_status mp_trace_diff_make_files(const mp_trace *a, const char *a_file, const mp_trace *b,
                                   const char *b_file, mp_trace_diff *d);
void mp_trace_diff_free(mp_trace_diff *d);

/* Writers (src/report/trace_diff.c). */
mp_status mp_trace_diff_report_text(const mp_trace_diff *d, const mp_trace_options *o, FILE *f);
mp_status mp_trace_diff_report_json(const mp_trace_diff *d, const mp_trace_options *o, FILE *f);

#endif
