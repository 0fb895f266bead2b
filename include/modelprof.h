/* modelprof: a profiler for neural networks stored as ONNX.
 *
 * One public header. Every name starts with mp_. Functions return an
 * mp_status; on failure mp_last_error() gives a message that names the
 * file, node, tensor or flag concerned. The library never exits or aborts
 * on user input. */
#ifndef MODELPROF_H
#define MODELPROF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MP_VERSION_MAJOR 0
#define MP_VERSION_MINOR 1
#define MP_VERSION_PATCH 0
#define MP_VERSION_STRING "0.1.0"

/* MP_API marks the public API. The shared library is built with
 * -fvisibility=hidden: only what is declared here with MP_API is exported
 * (every other symbol is internal; the tests and the command link the
 * static library). */
#ifndef MP_API
#if defined(__GNUC__) || defined(__clang__)
#define MP_API __attribute__((visibility("default")))
#else
#define MP_API
#endif
#endif

/* Option structs (mp_limits, mp_report_options, mp_train_options,
 * mp_run_options, mp_tplan_options, mp_ort_options) begin with their size, as libuv and
 * SQLite version theirs. Fill one with its mp_X_default(o), a macro over
 * mp_X_init(o, sizeof *o): the library writes the defaults into the
 * caller's `size` bytes only, and every function taking the options
 * refuses (MP_ERR_USAGE) a size it does not know, such as that of a struct
 * never set by mp_X_default or built against another modelprof.h. Fields
 * are only ever appended. */

/* X-macro: status code, name, default message. */
#define MP_STATUS_LIST(X)                                                   \
    X(MP_OK, "ok", "success")                                               \
    X(MP_ERR_USAGE, "usage", "invalid argument")                            \
    X(MP_ERR_IO, "io", "cannot read or write a file")                       \
    X(MP_ERR_FORMAT, "format", "malformed model")                           \
    X(MP_ERR_UNSUPPORTED, "unsupported", "unsupported model feature")       \
    X(MP_ERR_SHAPE, "shape", "shape inference failed")                      \
    X(MP_ERR_NOMEM, "nomem", "out of memory")                               \
    X(MP_ERR_LIMIT, "limit", "a resource limit was exceeded")

typedef enum mp_status {
#define MP__ENUM(code, name, msg) code,
    MP_STATUS_LIST(MP__ENUM)
#undef MP__ENUM
    MP_STATUS_COUNT
} mp_status;

/* Short name of a status ("format", "io", ...). */
/* The library's version ("0.1.0"): MP_VERSION_STRING of the modelprof.h it
 * was built with, which may differ from the one a program was compiled
 * against. */
MP_API const char *mp_version(void);
/* Free what the library allocated for the caller: the strings of
 * mp_report_string, mp_trace_string and mp_train_string, and mp_npy_read's
 * data. Handles (mp_model, mp_profile, ...) have their own mp_X_free. */
MP_API void mp_free(void *p);
/* The older name of mp_free for report strings. */
#define mp_string_free(s) mp_free(s)

MP_API const char *mp_status_name(mp_status st);
/* Message of the last failure in this thread ("" when none). */
MP_API const char *mp_last_error(void);

typedef struct mp_model mp_model;
typedef struct mp_profile mp_profile;

/* Load an ONNX model. The file is memory-mapped; weight bytes are never
 * read for a static profile. Warnings are kept on the model, see
 * mp_model_warning(); weights that are absent (external data not there, as
 * in the bundled models) are not a warning for a static profile, see
 * mp_model_absent_weights(). Uses the default limits. */
MP_API mp_status mp_model_load(const char *path, mp_model **out);

/* Resource limits: a model that needs more fails with MP_ERR_LIMIT and a
 * message naming the limit (docs/SECURITY.md). Zero or negative fields
 * take the default. */
typedef struct mp_limits {
    size_t size;            /* sizeof(mp_limits): set by mp_limits_default */
    int64_t max_nodes;      /* nodes of all graphs after inlining functions (10,000,000) */
    int64_t max_values;     /* named values of all graphs (20,000,000) */
    int64_t max_attr_elems; /* elements of one attribute: ints, floats, ... (64 Mi) */
    int64_t max_memory;     /* bytes of the model's graph structure, its arena (4 GiB,
                             * or half the machine's memory when that is less) */
    int64_t max_depth;      /* nesting of subgraphs and function calls (64, at most 1024) */
} mp_limits;

/* X-macro of the limits: field, name for mp_limits_set and `--limit`,
 * default. */
#define MP_LIMIT_LIST(X)                                  \
    X(max_nodes, "nodes", INT64_C(10000000))              \
    X(max_values, "values", INT64_C(20000000))            \
    X(max_attr_elems, "attr-elems", INT64_C(67108864))    \
    X(max_memory, "memory", INT64_C(4294967296))          \
    X(max_depth, "depth", INT64_C(64))
#define MP_LIMIT_DEPTH_CAP 1024 /* the stack bounds nesting: depth above this is refused */

MP_API mp_status mp_limits_init(mp_limits *l, size_t size);
#define mp_limits_default(l) mp_limits_init((l), sizeof *(l))
/* Set limit `name` ("nodes", "values", "attr-elems", "memory", "depth");
 * MP_ERR_USAGE on an unknown name or a value below 1. */
MP_API mp_status mp_limits_set(mp_limits *l, const char *name, int64_t value);

/* mp_model_load with limits (NULL: the defaults). */
MP_API mp_status mp_model_load_ex(const char *path, const mp_limits *lim, mp_model **out);
/* Decode a model held in memory. `buf` is not copied: it must stay valid
 * and unchanged until mp_model_free. `name` names the model in messages
 * (NULL: "<memory>"). Such a model has no folder: external data is never
 * opened and counts as absent (a weightless profile). */
MP_API mp_status mp_model_load_memory(const void *buf, size_t len, const char *name,
                               const mp_limits *lim, mp_model **out);
MP_API void mp_model_free(mp_model *m);
MP_API int mp_model_warning_count(const mp_model *m);
MP_API const char *mp_model_warning(const mp_model *m, int i);
/* The first external data file the model names that is not there (the
 * weights are absent: a static profile needs none, a measured run fills
 * them with seeded random values and warns); NULL when every weight is
 * there. A model loaded from memory never opens external data. */
MP_API const char *mp_model_absent_weights(const mp_model *m);

/* Give a symbolic dim (e.g. "batch") a value. Fails with MP_ERR_USAGE when
 * the model has no such dim. */
MP_API mp_status mp_model_set_dim(mp_model *m, const char *name, int64_t value);
/* Override the shape of graph input `name`. */
MP_API mp_status mp_model_set_input_shape(mp_model *m, const char *name,
                                   const int64_t *dims, int rank);
/* Graph inputs (initializers excluded): how many, and the name of input i
 * (NULL out of range). */
MP_API int mp_model_input_count(const mp_model *m);
MP_API const char *mp_model_input_name(const mp_model *m, int i);
/* The shape graph input `name` declares (or was given): *rank dims into
 * dims (room for 64), -1 for a symbolic or unknown dim; *rank -1 when the
 * rank is not declared. MP_ERR_USAGE when the model has no such input. */
MP_API mp_status mp_model_input_shape(const mp_model *m, const char *name, int64_t *dims, int *rank);

/* Name the class of the module at dotted path `path` ("layer1.0.conv1";
 * "" the model), for exports that do not carry classes (the TorchScript
 * exporter): the detailed tree shows "(conv1): Conv2d(...)" and the
 * aggregated block sums modules by class, as DeepSpeed does. A binding that
 * holds the model object (python/modelprof) calls it for every module.
 * MP_ERR_USAGE when the model has no module at that path (nothing of it
 * was exported: it ran no operator). */
MP_API mp_status mp_model_set_module_class(mp_model *m, const char *path, const char *cls);
/* Leave the module at `path` out of the profile (DeepSpeed's
 * ignore_modules): its nodes, and its submodules', count no MACs and no
 * FLOPs, in it, its ancestors or the totals; their parameters still count.
 * MP_ERR_USAGE when the model has no module at that path. Call before
 * mp_profile_static. */
MP_API mp_status mp_model_ignore_module(mp_model *m, const char *path);
/* The weights of an export that carries none (a PyTorch model on the meta
 * device, exported with export_params=False: its parameters and buffers are
 * graph inputs), declared by the binding that holds the model: graph input
 * `name` is a weight of ONNX dtype `dtype` (TensorProto numbering) and
 * shape dims[0..rank), a parameter, a buffer or a constant (a tensor the
 * model keeps but does not save). It becomes an initializer whose data is
 * absent, counted as the same model exported with weights counts it. Ties
 * are the exporter's: PyTorch's exporters take a shared tensor once, by
 * identity. `name` an initializer the export holds instead (an export with
 * its weights): the declaration says what PyTorch holds it as (a registered
 * buffer is no parameter, even where a node reads it as an operand), unless
 * the file declares its kind itself. MP_ERR_USAGE when `name` is neither, or
 * PyTorch's dtype or shape contradicts the export's. Call before
 * mp_profile_static. */
typedef enum mp_weight_kind { MP_WEIGHT_PARAM, MP_WEIGHT_BUFFER, MP_WEIGHT_CONST } mp_weight_kind;
MP_API mp_status mp_model_set_weight(mp_model *m, const char *name, int dtype, const int64_t *dims,
                                     int rank, int kind);

/* Static profile: shapes, params, MACs, FLOPs, bytes, memory, module tree.
 * The profile keeps a reference to the model: free it first. */
MP_API mp_status mp_profile_static(mp_model *m, mp_profile **out);
MP_API void mp_profile_free(mp_profile *p);

/* Cost as exact formulas in the dims the profile left free (its unresolved
 * symbolic dims, e.g. batch and seq): params, MACs, FLOPs, bytes read and
 * written, activation bytes of the model and of each module, and the
 * activation peak, as polynomials with exact coefficients, each checked
 * against static profiles at further points (docs/COUNTING.md,
 * "Formulas"). The reports then show them. It profiles the model again at
 * other dims and leaves it as p found it. MP_ERR_SHAPE when the profile
 * fails wherever it is tried, MP_ERR_UNSUPPORTED past 8 free dims. */
MP_API mp_status mp_profile_formulas(mp_profile *p);

typedef struct mp_totals {
    uint64_t params;                /* learnable parameters, shared counted once */
    uint64_t param_bytes;           /* bytes of those parameters */
    uint64_t macs;                  /* forward multiply-accumulates */
    uint64_t flops;                 /* forward floating-point operations */
    uint64_t bytes_read;            /* sum over nodes of input bytes */
    uint64_t bytes_written;         /* sum over nodes of output bytes */
    uint64_t activation_peak_bytes; /* peak of live activations */
    int nodes;                      /* nodes in the main graph */
    int uncounted_nodes;            /* nodes with no cost rule */
    int unknown_nodes;              /* nodes whose cost depends on unknown dims */
} mp_totals;

MP_API void mp_profile_totals(const mp_profile *p, mp_totals *out);

typedef enum mp_format {
    MP_FORMAT_TEXT = 0,
    MP_FORMAT_JSON = 1,
    MP_FORMAT_HTML = 2, /* self-contained page embedding the JSON */
    MP_FORMAT_CSV = 3   /* one table, chosen by csv_table */
} mp_format;

typedef enum mp_csv_table {
    MP_CSV_NODES = 0,
    MP_CSV_MODULES = 1,
    MP_CSV_OPS = 2,
    MP_CSV_MODULE_OPS = 3   /* one row per module and operator type (modules[].ops) */
} mp_csv_table;

typedef struct mp_report_options {
    size_t size;     /* sizeof(mp_report_options): set by mp_report_options_default */
    mp_format format;
    int depth;       /* deepest module depth shown; -1 = all */
    int top;         /* modules per depth in the aggregated block; -1 = all, 0 = omit */
    int detailed;    /* print the detailed module tree */
    int show_ops;    /* print the by-operator table */
    mp_csv_table csv_table; /* MP_FORMAT_CSV: which table (default nodes) */
    int by_module_op; /* text: print the table by module and operator type (fvcore's
                         flop_count_table layout: module rows, one column per op type) */
    int op_top;       /* its operator columns: the op types with the most FLOPs, the rest
                         summed in "other"; -1 = all (default 5) */
    int tree_depth;   /* deepest depth of the detailed tree; -2 (default): depth. DeepSpeed's
                         module_depth is depth with tree_depth -1 (the whole tree) */
} mp_report_options;
/* JSON always holds the whole tree, every op and every node: depth, top,
 * tree_depth, detailed, show_ops, by_module_op and op_top shape the text
 * report only. mp_report_write returns MP_ERR_USAGE when depth or top is
 * below -1, tree_depth below -2 or the format is unknown. */

MP_API mp_status mp_report_options_init(mp_report_options *o, size_t size);
#define mp_report_options_default(o) mp_report_options_init((o), sizeof *(o))
/* Write a report to `f`. */
MP_API mp_status mp_report_write(const mp_profile *p, const mp_report_options *o,
                          FILE *f);
/* Write a report to `path` atomically (temporary file, then rename). */
MP_API mp_status mp_report_write_file(const mp_profile *p,
                               const mp_report_options *o, const char *path);

/* The report as a NUL-terminated string (free it with mp_free). For
 * bindings that have no FILE *. */
MP_API mp_status mp_report_string(const mp_profile *p, const mp_report_options *o, char **out);
/* Read and analyse a torch.profiler trace (Kineto JSON, gzip or plain, or
 * the bare event array of a PyTorch built without Kineto) and give the
 * trace report (MP_FORMAT_TEXT or MP_FORMAT_JSON) as a string. */
MP_API mp_status mp_trace_string(const char *path, mp_format format, char **out);

/* ---- CUDA memory snapshots (docs/MEMORY.md): what held a GPU's memory at
 * its peak, from torch.cuda.memory._dump_snapshot()'s pickle (read, never
 * executed). ---- */
typedef struct mp_memory_options {
    size_t size;
    mp_format format; /* MP_FORMAT_TEXT (default), _JSON, _CSV, _HTML */
    int device;       /* one device; -1 (default) every device */
    int top;          /* rows per table, -1 all; MP_MEMORY_TOP_DEFAULT (the default): each
                         format's own, 20 for text and JSON, every row for CSV, 50 for HTML */
    int full_stack;   /* 1: whole stacks, not the first user frame */
    int csv_table;    /* MP_FORMAT_CSV: 0 holders at the peak, 1 sites, 2 events */
} mp_memory_options;
#define MP_MEMORY_TOP_DEFAULT (-2)
MP_API mp_status mp_memory_options_init(mp_memory_options *o, size_t size);
#define mp_memory_options_default(o) mp_memory_options_init((o), sizeof *(o))
/* Read the snapshot at `path` (.pickle or .pickle.gz) and give the report
 * as a string (free it with mp_free). o NULL: the defaults.
 * MP_ERR_FORMAT (byte offset or event named) for a file that is not one. */
MP_API mp_status mp_memory_report_file(const char *path, const mp_memory_options *o, char **out);

/* ---- a training profile: a torch.profiler trace of real training steps,
 * its per-module forward and backward times joined with the static profile
 * of the same model (params, MACs, FLOPs per module). What the Python
 * FlopsProfiler prints and returns (docs/JSON.md, "Training profile"). ---- */

/* One module of the PyTorch model, as the binding knows it. */
typedef struct mp_torch_module {
    const char *name;       /* qualified name in named_modules(): "blocks.0.attn"; "" the model */
    const char *class_name; /* type(module).__name__ */
    const char *trace_path; /* its path in the trace's module tree: the labels of its
                               "nn.Module: LABEL" ranges from the model down, joined by '.',
                               as the module ran (a module that is never called, such as a
                               ModuleList, is on no path: its children sit under its caller);
                               several paths separated by '\n' for a module that ran under
                               several callers; "" when it never ran */
    int64_t params;         /* its parameters as model.parameters() counts them (numel,
                               submodules included, each tensor once; DeepSpeed's
                               module.__params__): the row's count; -1 unknown: the static
                               profile's */
    int64_t export_calls;   /* its forward calls in the forward pass that was exported: the
                               static profile's figures cover these calls (0: taken as 1) */
    int ignored;            /* left out (ignore_list): not timed, and its MACs and FLOPs,
                               with its submodules', count nowhere (params still count) */
} mp_torch_module;

typedef struct mp_train mp_train;

/* Read and analyse the trace, profile the ONNX export of the same model
 * (model_path; NULL: no static figures, MACs and FLOPs 0) and join them
 * over the modules (named_modules order: each module after its parent). A
 * module's MACs and FLOPs cover the calls its time covers: the static
 * profile's figures over `export_calls`, times its calls in the trace. A
 * module that was never called (a ModuleList, a ModuleDict) holds the sum
 * of its children, time and counts alike. */
MP_API mp_status mp_train_open(const char *trace_path, const char *model_path,
                        const mp_torch_module *mods, int n, mp_train **out);
MP_API void mp_train_free(mp_train *t);
/* The profiled forward calls had n input shapes (sequence lengths, a KV
 * cache that grows): model_paths[s] is the export of a call of shape s and
 * calls[s] the forward calls of that shape. A module's MACs and FLOPs are
 * then the sum over the shapes of calls[s] x the export's figures for one
 * forward (as DeepSpeed's hooks sum each call's), in place of the one
 * export scaled by its calls. */
MP_API mp_status mp_train_set_shapes(mp_train *t, const char *const *model_paths, const int64_t *calls, int n);
/* The binding's plain-clock timing of the model's forward calls (Python's
 * perf_counter, medians): the interval from one forward call to the next
 * (an iteration: forward, backward, optimizer step, data) and the forward
 * call itself, before profiling started (`before_calls` calls seen) and
 * while it ran (`profiled_calls`). 0 calls: none seen. The report sets the
 * profiled iteration beside the unprofiled one: how much the profiler's own
 * hooks and ranges inflate a step. */
MP_API mp_status mp_train_set_clock(mp_train *t, int before_calls, double before_iter_s,
                                    double before_fwd_s, int profiled_calls,
                                    double profiled_iter_s, double profiled_fwd_s);
/* What the profiler adds to a step, as the binding measured it when
 * profiling started: the cost of one operator record (torch.profiler on
 * against off, a small operator) and of one module range (the module hooks
 * and the record_function range of a module call). The report estimates
 * the profiled step's overhead from the trace's operator records and module
 * ranges, and the step without it. */
MP_API mp_status mp_train_set_overhead(mp_train *t, double op_record_s, double range_s);

typedef struct mp_train_options {
    size_t size;        /* sizeof(mp_train_options): set by mp_train_options_default */
    mp_format format;   /* MP_FORMAT_TEXT (DeepSpeed's FlopsProfiler layout) or MP_FORMAT_JSON */
    int step;           /* the step number in the text's header (default 1) */
    int depth;          /* deepest depth of the aggregated block (DeepSpeed's module_depth;
                           the detailed tree is always whole, as DeepSpeed prints it);
                           -1 all (default) */
    int top;            /* modules per depth in the aggregated block; -1 all (default 1) */
    int detailed;       /* the per-module tree (default 1) */
} mp_train_options;
MP_API mp_status mp_train_options_init(mp_train_options *o, size_t size);
#define mp_train_options_default(o) mp_train_options_init((o), sizeof *(o))
/* The training profile as a string (free it with mp_free). */
MP_API mp_status mp_train_string(const mp_train *t, const mp_train_options *o, char **out);

/* ---- the measured run: execute the profiled graph on the CPU ---- */
typedef struct mp_run_options {
    size_t size;           /* sizeof(mp_run_options): set by mp_run_options_default */
    int warmup;            /* untimed runs before timing (default 3) */
    int iters;             /* timed runs (default 20) */
    int threads;           /* 0: all cores */
    int fuse;              /* 1: fuse where it pays (default); 0: every node alone */
    int node_timing;       /* 1: time every node (default); 0: whole runs only */
    double peak_gflops;    /* > 0: the machine's peak as given; 0: measured */
    uint64_t seed;         /* random inputs and absent weights */
    int64_t max_memory;    /* bytes a run may take; refused before allocating */
    int progress;          /* progress on stderr when it is a terminal */
    int keep_timestamps;   /* 1: keep each timed step's start (mp_report_chrome_trace);
                              0 (default): durations only */
} mp_run_options;
MP_API mp_status mp_run_options_init(mp_run_options *o, size_t size);
#define mp_run_options_default(o) mp_run_options_init((o), sizeof *(o))

typedef struct mp_exec mp_exec;
/* Plan a run of the profiled model (p from mp_profile_static; every dim
 * must be known). Made once: order, buffers, kernels, weights. */
MP_API mp_status mp_exec_create(mp_profile *p, const mp_run_options *o, mp_exec **out);
MP_API void mp_exec_free(mp_exec *pl);
/* Data for graph input `name`: dims must be the planned ones; dtype (ONNX
 * numbering) the planned one, or another of the same kind (integers for an
 * integer input, floats for a float one), converted. Inputs never given
 * get seeded random data. */
MP_API mp_status mp_exec_set_input(mp_exec *pl, const char *name, int dtype, int rank,
                            const int64_t *dims, const void *data, size_t bytes);
/* One untimed run. */
MP_API mp_status mp_exec_run(mp_exec *pl);
/* Graph outputs after a run. */
MP_API int mp_exec_output_count(const mp_exec *pl);
MP_API mp_status mp_exec_output(const mp_exec *pl, int i, const char **name, int *dtype,
                         int *rank, const int64_t **dims, const void **data);
/* Warm-up and timed runs; fills the profile's measured fields. */
MP_API mp_status mp_profile_run(mp_exec *pl, mp_profile *p);

/* This machine's fp32 peak in FLOP/s with `threads` threads (0: all
 * cores), measured as the measured run measures it (the best 1024^3 GEMM
 * of oneDNN's matmul, dnnl_sgemm and OpenBLAS; once per process and thread
 * count); 0 when it cannot be measured. `how` (may be NULL) gets how. */
MP_API double mp_peak_flops(int threads, const char **how);

/* ---- ONNX Runtime's own profile in the module tree (--ort-profile) ---- */
typedef struct mp_ort_options {
    size_t size;           /* sizeof(mp_ort_options): set by mp_ort_options_default */
    int warmup;            /* profiled runs left out first; -1 (default): the first
                              when the profile holds more than one (it pays for ORT's
                              allocations and first-touch of the weights) */
    double peak_gflops;    /* > 0: the peak, as given */
    double (*measure_peak)(int threads, const char **how); /* else this measures it
                              with the profile's thread count (mp_peak_flops: this
                              machine's); NULL: no peak */
} mp_ort_options;
MP_API mp_status mp_ort_options_init(mp_ort_options *o, size_t size);
#define mp_ort_options_default(o) mp_ort_options_init((o), sizeof *(o))
/* Read ONNX Runtime's profiling JSON (SessionOptions.enableProfiling; plain
 * or gzip) of a session of the profiled model, and place its node events
 * on the graph's nodes: p gets the measured fields a measured run fills
 * (per node, module, op type; run.source "onnxruntime"), each event's time
 * averaged per run over the runs kept. Events of nodes ONNX Runtime fused
 * go to the nodes they replaced, split by FLOPs (docs/JSON.md,
 * "--ort-profile"). p: mp_profile_static of the model the session loaded,
 * at the dims it ran with (mp_ort_dims reads them). MP_ERR_FORMAT when the
 * file is not such a profile, naming the file and what is missing;
 * MP_ERR_FORMAT or MP_ERR_SHAPE when it is not of this model at these dims
 * (an event, node, shape or dim that differs, named: docs/JSON.md,
 * "Matching"). */
MP_API mp_status mp_profile_ort(mp_profile *p, const char *path, const mp_ort_options *o);
/* The dims ONNX Runtime's profile ran with (`path`, as mp_profile_ort):
 * each symbolic dim of the model's inputs that has no value yet takes the
 * one the profile's nodes read from that input (args.input_type_shape of
 * the event placed on a node reading it), as mp_model_set_dim would; *n_set
 * (may be NULL): how many. MP_ERR_SHAPE when the profile's differs from a
 * value given, naming the dim, the input and the node. Call it before
 * mp_profile_static; mp_profile_ort then checks the profile against the
 * model at those dims. */
MP_API mp_status mp_ort_dims(mp_model *m, const char *path, int *n_set);

/* A Chrome/Perfetto trace (JSON, chrome://tracing, ui.perfetto.dev) of the
 * timed runs mp_profile_run filled into the profile, planned with
 * keep_timestamps and node_timing: one complete event per node or fused
 * group (op, module, shapes, MACs, FLOPs in args), module scopes and each
 * run as enclosing slices. `modelprof trace` reads it back. */
MP_API mp_status mp_report_chrome_trace(const mp_profile *p, const char *path);

/* NumPy .npy files (C order, little-endian). mp_npy_read gives the dtype
 * (ONNX numbering), rank, dims (room for 64) and the data (free it with
 * mp_free). mp_npy_write writes one array (bf16, which numpy
 * lacks, as fp32). */
MP_API mp_status mp_npy_read(const char *path, int *dtype, int *rank, int64_t *dims, void **data,
                      size_t *bytes);
MP_API mp_status mp_npy_write(const char *path, int dtype, int rank, const int64_t *dims,
                       const void *data);


/* ---- the training planner (`modelprof plan`, docs/PLANNING.md) ----
 * Memory per GPU, step time and time to train of the profiled model
 * under a precision, an optimizer, activation checkpointing, ZeRO/FSDP
 * and data, tensor and pipeline parallelism. The graph's batch dim is one
 * micro-batch on one data-parallel rank. */
typedef enum mp_precision {
    MP_PREC_FP32, MP_PREC_BF16, MP_PREC_FP16, MP_PREC_BF16_MIXED, MP_PREC_FP16_MIXED,
    MP_PREC_AUTO, /* the export's own type: fp32, bf16 or fp16 as most weights are stored */
    MP_PREC_COUNT
} mp_precision;
typedef enum mp_optimizer {
    MP_OPT_ADAMW, MP_OPT_ADAM, MP_OPT_SGD, MP_OPT_SGD_MOMENTUM, MP_OPT_ADAFACTOR, MP_OPT_NONE,
    /* since version 3: bitsandbytes' blockwise 8-bit AdamW (and its paged variant), Lion */
    MP_OPT_ADAMW8BIT, MP_OPT_PAGED_ADAMW8BIT, MP_OPT_LION,
    MP_OPT_COUNT
} mp_optimizer;
/* "fp32", "bf16-mixed", ...; "adamw", "sgd-momentum", ... (NULL out of range);
 * the parse functions return -1 for an unknown name. */
MP_API const char *mp_precision_name(mp_precision p);
MP_API const char *mp_optimizer_name(mp_optimizer o);
MP_API int mp_precision_parse(const char *s);
MP_API int mp_optimizer_parse(const char *s);

/* The host's time to dispatch one eager PyTorch operator, microseconds,
 * when --host-us-per-op is not given: measured on an H200 host under
 * PyTorch 2.11 (tools/measure_gpu.py, "host": a chain of small Linear, GELU
 * and LayerNorm operators whose kernels take a tenth of their issue, its
 * time over the operators a TorchDispatchMode counts): 13 to 16 us an
 * operator forward and backward, fp32 and under bf16 autocast; 10 to 11 us
 * forward without autograd (docs/PLANNING.md, "Host-bound steps"). */
#define MP_HOST_US_TRAIN 15.0
#define MP_HOST_US_INFER 11.0

typedef struct mp_tplan_options {
    size_t size;              /* sizeof(mp_tplan_options): set by mp_tplan_options_default */
    mp_precision precision;   /* default MP_PREC_AUTO: the export's dtype (pure bf16/fp16
                               * training of a bf16/fp16 export) */
    mp_optimizer optimizer;   /* default adamw */
    int checkpointing;        /* recompute each repeated block in the backward */
    int zero;                 /* ZeRO stage 0-3 */
    int fsdp;                 /* FSDP full shard: the ZeRO-3 layout */
    int dp, tp, pp;           /* parallel degrees (default 1) */
    int micro_batches;        /* per step (gradient accumulation; 1F1B with pp); 0: pp */
    int inference;            /* plan a forward only (weights + activation peak + inputs) */
    int kv_cache;             /* inference of a decoder: KV-cache figures */
    int loss;                 /* training: a cross-entropy on output 0 (default 1) */
    int attention_fused;      /* attention as one fused kernel (PyTorch 2's SDPA): the
                               * scores are never kept (default 1) */
    int autocast_cpu;         /* mixed precision: CPU autocast's op lists (only matmul/conv
                               * lowered, only losses in fp32, and under torch 1.13
                               * conv_transpose too) instead of CUDA's */
    const char *gpu;          /* id in the GPU table ("h100-sxm"); NULL: none */
    double peak_tflops;       /* > 0: dense peak of the training dtype, overrides the table */
    double mem_gb, bandwidth_gbs, link_gbs; /* > 0: override the table */
    double tokens, samples;   /* > 0: time to train this many tokens / samples */
    int gpus;                 /* GPUs for time to train and --fit (0: dp*tp*pp) */
    double mfu;               /* model FLOPs utilisation for the 6ND time (default 0.4) */
    double compute_eff;       /* fraction of the dtype peak a node reaches (default 0.6) */
    double memory_eff;        /* fraction of the bandwidth (default 0.8) */
    double node_overhead_s;   /* fixed time per node and pass (kernel launch; default 10 us) */
    double reserve_gb;        /* framework reserve: CUDA context, allocator slack (default 2) */
    int fit;                  /* list the layouts of `gpus` GPUs that fit the GPU, best first */
    /* since version 2 */
    int channels_last;        /* 16-bit convolutions on channels-last tensors: no layout
                               * transposes around cuDNN's tensor-core kernels */
    int sequence_parallel;    /* with tp > 1: Megatron's sequence parallelism (norms, dropouts
                               * and residuals split along the sequence) */
    int64_t batch;            /* > 0: samples per micro-batch for an export whose batch is fixed
                               * in its shapes (static: the dynamo exporter's default): the graph
                               * is planned at its own batch and every per-sample figure scaled;
                               * 0: the graph's batch */
    /* since version 3: the step around the graph */
    int loss_form;            /* MP_LOSS_*: what runs between output 0 and the scalar loss
                               * (default auto: causal-lm on a model with an LM head,
                               * cross-entropy otherwise; --no-loss is none) */
    int optimizer_impl;       /* MP_OPTIMPL_*: PyTorch's foreach (default), fused or for-loop
                               * optimizer step: how many operators it dispatches */
    double host_op_s;         /* host time to dispatch one eager PyTorch operator (Python,
                               * dispatcher, autograd, launch); negative (the default):
                               * MP_HOST_US_TRAIN us in a training step, MP_HOST_US_INFER
                               * in inference (docs/PLANNING.md, "Host-bound steps") */
    /* since version 3 (h-lora): fine-tuning (docs/PLANNING.md section 12) */
    char trainable[512];      /* --freeze / --unfreeze globs over parameter and module paths in
                               * the order given, each "-GLOB;" or "+GLOB;" (mp_tplan_options_set
                               * appends): the last that matches a parameter decides */
    int lora_rank;            /* > 0: LoRA adapters of this rank; the base is frozen */
    double lora_alpha;        /* LoRA's alpha: scales the update, changes no memory */
    double lora_dropout;      /* LoRA's dropout probability: > 0 keeps a mask and a copy */
    const char *lora_targets; /* roles (q,k,v,qkv,o,up,gate,gate_up,down, all-linear) or module
                               * globs, ','-separated; NULL: q,v (PEFT's default for Llama) */
    int base_dtype;           /* frozen Linear weights of the blocks: 0 the training dtype,
                               * 1 nf4, 2 int8, 3 fp8 */
    int no_double_quant;      /* nf4: an fp32 constant per block (no double quantization) */
    int offload;              /* 0 none, 1 optimizer states (ZeRO-Offload), 2 parameters too */
    double host_link_gbs;     /* > 0: the host-GPU link per direction, GB/s */
    double cpu_adam_gps;      /* > 0: offloaded optimizer's CPU rate, 1e9 parameters a second */
    int torch_version;        /* autograd's rules: 0 PyTorch 2, 1 PyTorch 1.13 */
    /* since version 4 */
    double dropout;           /* > 0: the trainer's dropout probability where an eval-mode export
                               * left its Dropout nodes out: a mask kept after each block's
                               * attention output and MLP output, on the embeddings and on eager
                               * attention's probabilities (docs/PLANNING.md "dropout") */
    int zero_grad;            /* MP_ZEROGRAD_*: where the training loop frees the gradients
                               * (optimizer.zero_grad): after the forward (default: Lightning's
                               * closure, the classic loop: the last step's gradients live through
                               * the forward), before the forward (Hugging Face's Trainer: after
                               * optimizer.step) or in place (set_to_none=False: always resident) */
    int tf32;                 /* MP_TF32_*: which fp32 products run on the tensor cores as TF32
                               * (default conv: PyTorch's defaults, cudnn.allow_tf32 on and
                               * cuda.matmul.allow_tf32 off), all, or none */
    int ddp_bucket_view;      /* dp > 1 without ZeRO: DDP(gradient_as_bucket_view=True), the
                               * gradients are views of the all-reduce buckets; by default (PyTorch's
                               * False) the buckets are a second copy of every gradient */
    /* since version 5 */
    double clip_grad_norm;    /* > 0: torch.nn.utils.clip_grad_norm_(parameters, max_norm) before
                               * each optimizer step (Hugging Face's Trainer and nanoGPT clip at
                               * 1.0): one pass reading the gradients for their norm, one scaling
                               * them (docs/PLANNING.md "loss scaling and clipping") */
} mp_tplan_options;
/* mp_tplan_options.loss_form and .optimizer_impl */
enum { MP_LOSS_AUTO, MP_LOSS_CAUSAL_LM, MP_LOSS_CROSS_ENTROPY, MP_LOSS_NONE, MP_LOSS_COUNT };
enum { MP_OPTIMPL_FOREACH, MP_OPTIMPL_FUSED, MP_OPTIMPL_FOR_LOOP, MP_OPTIMPL_COUNT };
/* mp_tplan_options.zero_grad (since version 4) */
enum { MP_ZEROGRAD_AFTER_FORWARD, MP_ZEROGRAD_BEFORE_FORWARD, MP_ZEROGRAD_IN_PLACE, MP_ZEROGRAD_COUNT };
/* mp_tplan_options.tf32 (since version 4) */
enum { MP_TF32_CONV, MP_TF32_ALL, MP_TF32_NONE, MP_TF32_COUNT };
MP_API mp_status mp_tplan_options_init(mp_tplan_options *o, size_t size);
#define mp_tplan_options_default(o) mp_tplan_options_init((o), sizeof *(o))
/* MP_ERR_USAGE with a message naming the flags when the options conflict
 * or describe an impossible layout, whatever the model (--fsdp with
 * --zero 1 or 2, --gpus not a multiple of dp x tp x pp, ...);
 * mp_tplan_create checks them too. */
MP_API mp_status mp_tplan_options_check(const mp_tplan_options *o);
/* Set one option by its command-line flag: "--zero" or "zero" (a '_' may
 * stand for a '-': "micro_batches"), value as the command line writes it
 * ("3", "bf16-mixed", "1.5T"); switches ("--checkpointing") take NULL,
 * "1" or "true" ("0" or "false" leaves the default). A string option
 * (--gpu) keeps the caller's pointer. MP_ERR_USAGE with a message naming
 * the flag for an unknown flag or a bad value. mp_tplan_option_kind: -1
 * not a plan option, 0 a switch, 1 takes a value. */
MP_API mp_status mp_tplan_options_set(mp_tplan_options *o, const char *flag, const char *value);
MP_API int mp_tplan_option_kind(const char *flag);

/* Memory per GPU (or of one pipeline stage), bytes. */
typedef struct mp_tplan_mem {
    uint64_t weights_bytes, grads_bytes, optimizer_bytes, master_weights_bytes;
    uint64_t activations_bytes;   /* kept for the backward (x in-flight micro-batches) */
    uint64_t temporary_bytes;     /* the largest operator's transient (and recompute) */
    uint64_t peak_bytes;          /* what the allocator holds at its peak */
    uint64_t reserve_bytes;       /* framework reserve (an assumption) */
} mp_tplan_mem;

typedef struct mp_tplan mp_tplan;
/* Plan the profiled model (p from mp_profile_static). MP_ERR_USAGE with a
 * message naming the flag when the layout cannot be planned (a --tp that
 * does not divide the heads, a --pp larger than the layer count, a
 * precision the GPU lacks). */
MP_API mp_status mp_tplan_create(const mp_profile *p, const mp_tplan_options *o, mp_tplan **out);
MP_API void mp_tplan_free(mp_tplan *pl);
/* stage -1: per GPU (the largest stage); 0..pp-1: that pipeline stage. */
MP_API mp_status mp_tplan_memory(const mp_tplan *pl, int stage, mp_tplan_mem *out);
/* Seconds of one optimizer step (< 0 without a GPU). */
MP_API double mp_tplan_step_time(const mp_tplan *pl);
/* The plan as text or JSON (docs/JSON.md "plan"). */
MP_API mp_status mp_tplan_write(const mp_tplan *pl, mp_format format, FILE *f);
MP_API mp_status mp_tplan_write_file(const mp_tplan *pl, mp_format format, const char *path);
/* The plan as a string (text or JSON) the caller frees with mp_free. */
MP_API mp_status mp_tplan_string(const mp_tplan *pl, mp_format format, char **out);
/* Profile to plan in one call, for bindings (the Python package's
 * modelprof.plan): the options as the command line's flags and values
 * (flags[i] "zero" or "--zero", values[i] "3"; a switch's value NULL or
 * "1"), set through mp_tplan_options_set, then checked, planned and
 * written as text or JSON into a string the caller frees with mp_free.
 * MP_ERR_USAGE naming the flag for an unknown flag or a bad value. */
MP_API mp_status mp_tplan_profile_string(const mp_profile *p, int n, const char *const *flags,
                                         const char *const *values, mp_format format, char **out);

#ifdef __cplusplus
}
#endif
#endif
