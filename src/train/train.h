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
    int64_t export_calls;      /* forward calls the static profile covers (the exported pass) */
    double fwd_s, bwd_s;       /* summed over the calls */
    uint64_t params;           /* the module's parameters: the binding's count (model.parameters(),
                                * as DeepSpeed's module.__params__), else the static profile's */
    bool params_declared;      /* the binding gave its count */
    uint64_t macs, flops;      /* forward, over the calls the time covers */
    bool in_trace, in_static;  /* found in the trace's module tree / the export's */
    bool container;            /* never called (ModuleList, ModuleDict): the sum of its children */
    bool ignored;              /* left out by the binding (ignore_list), with its submodules */
} mp_train_row;

/* The binding's plain-clock timing of forward calls (mp_train_set_clock). */
typedef struct mp_train_clock {
    int before_calls, profiled_calls;
    double before_iter_s, before_fwd_s, profiled_iter_s, profiled_fwd_s;
} mp_train_clock;

/* The profiler's own cost (mp_train_set_overhead): the binding's measured
 * costs per record, the trace's counts. */
typedef struct mp_train_overhead {
    bool known;                /* set by the binding */
    double op_s, range_s;      /* one operator record, one module range */
    int64_t ops, ranges;       /* operator records and module ranges in the trace */
    double total_s;            /* what the profiler cost: ops x op_s + ranges x range_s
                                * (0 until the binding gives the costs) */
} mp_train_overhead;

struct mp_train {
    mp_arena arena;
    mp_train_row *rows;        /* named_modules order */
    mp_module *mods;           /* the same modules as a tree (the one walker) */
    int n;
    int max_depth;
    bool cpu_time;             /* module times are CPU wall time (a trace without device rows) */
    bool profiler_steps;       /* ProfilerStep ranges split the trace into steps */
    int n_steps;
    int opt_steps;             /* Optimizer.step ranges in the trace (an optimizer step a
                                * training step, whatever the forwards between them) */
    double wall_s, optimizer_s; /* summed over the steps */
    mp_train_clock clock;
    mp_train_overhead overhead;
    const char *trace_path, *model_path;
    int n_shapes;              /* the input shapes the profiled calls had, each exported
                                * (mp_train_set_shapes); 1: the one export of model_path */
};


#endif
