/* A training profile (train.c): the module times of a torch.profiler trace
 * of real training steps joined with the static profile of the same model.
 * The writers (src/report/train.c, json.c) read only this. */
#ifndef MP_TRAIN_H
#define MP_TRAIN_H

#include "base/base.h"
#include "graph/graph.h"
#include "modelprof.h"

typedef struct mp_train_row {
    const char *name;          /* qualified name; "" the model */
    const char *cls;           /* class */
    int64_t calls;             /* forward calls in the trace */
    double fwd_s, bwd_s;       /* summed over the calls */
    uint64_t params;           /* the module's own count (static profile, else the binding's) */
    uint64_t macs, flops;      /* forward, per call x calls */
    bool in_trace, in_static;  /* found in the trace's module tree / the export's */
} mp_train_row;

struct mp_train {
    mp_arena arena;
    mp_train_row *rows;        /* named_modules order */
    mp_module *mods;           /* the same modules as a tree (the one walker) */
    int n;
    int max_depth;
    bool cpu_time;             /* module times are CPU wall time (a trace without device rows) */
    bool profiler_steps;       /* ProfilerStep ranges split the trace into steps */
    int n_steps;
    double wall_s, optimizer_s; /* summed over the steps */
    const char *trace_path, *model_path;
};

/* The defaults of mp_train_options, and its first versioned size. */
void mp_train_defaults(mp_train_options *o);
#define MP_TRAIN_OPTIONS_V1 MP_FIELD_END(mp_train_options, detailed)

#endif
