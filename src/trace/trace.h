/* Trace analysis: torch.profiler (Kineto) Chrome traces of GPU training.
 *
 *   trace.json(.gz) --read (streaming)--> compact records --link--> steps,
 *   operators, kernels, modules, memory, findings --report--> text | json
 *
 * read.c   one streaming pass: gzip (zlib inflate) or plain bytes, a
 *          hand-written JSON tokenizer, each event reduced to a compact
 *          record with interned names; nothing else of the file is kept.
 * analyze.c linking: kernel -> operator (External id), operator tree per
 *          thread (PyTorch's EventList rules), backward -> forward operator
 *          (fwdbwd flows, sequence numbers), operator -> nn.Module scope;
 *          then steps, operator and kernel tables, module tree, memory,
 *          FLOPs, efficiency and findings.
 * comm.c   collectives: the calls of each backend, time in collectives
 *          per step and its overlap with compute, each call's segment.
 * findings.c findings from the summary alone.
 * job.c    several ranks: calls matched across ranks, waits, lateness,
 *          the critical rank of each step, stragglers, causes, what-if.
 * digest.c a rank's digest (src/report/trace_digest.c) read back.
 * The writers are src/report/trace_*.c (tree through src/report/tree.c).
 *
 * Times are integer nanoseconds throughout (Kineto writes microseconds
 * with three decimals; a double would lose the last digit at 4.5e12 us).
 * Ids (External id, correlation, Sequence number) are kept as 32-bit
 * values, as Kineto and CUPTI count them; one outside 0..2^31-1 is kept as
 * "none" (the event stays, unlinked). */
#ifndef MP_TRACE_H
#define MP_TRACE_H

#include "base/base.h"
#include "graph/graph.h"

#include <stdio.h>

/* x += y, saturating at the type's bounds (x is int64_t or uint64_t): a
 * hostile trace's sums (durations of deeply nested spans, FLOPs) must not
 * overflow. */
#define MP_SADD(x, y)                                                                   \
    do {                                                                                \
        __typeof__(x) *sadd_p_ = &(x);                                                  \
        __typeof__(x) sadd_y_ = (__typeof__(x))(y), sadd_v_;                            \
        if (__builtin_add_overflow(*sadd_p_, sadd_y_, &sadd_v_))                        \
            sadd_v_ = (__typeof__(x))-1 > 0 ? (__typeof__(x))-1                         \
                    : sadd_y_ > 0 ? (__typeof__(x))INT64_MAX : (__typeof__(x))INT64_MIN; \
        *sadd_p_ = sadd_v_;                                                             \
    } while (0)

/* ---- records kept from the file ---- */

enum { MP_TS_OP, MP_TS_ANNOT, MP_TS_RUNTIME, MP_TS_MODULE };      /* span kinds */
enum { MP_TD_KERNEL, MP_TD_MEMCPY, MP_TD_MEMSET, MP_TD_ANNOT };   /* device kinds */

/* What the records hold per event is what the analysis needs, packed: a
 * 500 MB trace holds about 1.8 million of them, and the reader's memory is
 * at most a tenth of the file (docs/DESIGN.md "Reading"). */
#define MP_TNAME_BITS 23            /* interned names: at most 2^23 */

/* A CPU-side span: ATen operator, user annotation, CUDA runtime/driver
 * call or an nn.Module scope. 30 bytes. Its FLOPs (computed from the
 * recorded shapes, few spans have them) are in mp_trace_raw.flops. */
typedef struct __attribute__((packed, aligned(2))) mp_tspan {
    int64_t ts, end;       /* ns */
    int32_t ext;           /* External id (operators, annotations, launches); -1 */
    union {
        int32_t corr;      /* MP_TS_RUNTIME: correlation; -1 */
        int32_t seq;       /* others: Sequence number; -1 */
    };
    uint32_t name : MP_TNAME_BITS;  /* interned name */
    uint32_t kind : 2;
    uint32_t dtype : 3;    /* MP_TDT_* of the first input, for FLOP-counted ops */
    uint32_t bwd : 1;      /* MP_TS_MODULE: a "nn.Module.backward: " range (legacy.c) */
    uint32_t has_flops : 1;/* FLOPs in mp_trace_raw.flops */
    uint32_t rf : 1;       /* MP_TS_MODULE: a record_function range, a row of key_averages under
                            * its whole name (name); the module tree's name, the name without
                            * its prefix, is interned too (mp_trace_module_name) */
    uint16_t tid;          /* thread index */
} mp_tspan;

/* A device-side interval: kernel, memcpy, memset, device annotation. 32 bytes. */
typedef struct __attribute__((packed, aligned(4))) mp_tdev {
    int64_t ts, end;
    int32_t ext;           /* External id of the launching operator; -1 */
    int32_t corr;          /* correlation of the launch; -1 */
    uint32_t name : MP_TNAME_BITS;
    uint32_t kind : 2;
    int16_t stream;        /* -1 when unknown or outside int16 */
    int16_t device;        /* -1 when unknown or outside int16 */
} mp_tdev;

/* A device [memory] instant event (CPU ones are not kept: nothing reads
 * them; the peak of Total Reserved is kept whole in mp_trace_raw). 24 bytes. */
#define MP_MEM_CURVE 256
#define MP_MEM_MAX (INT64_C(1) << 48)   /* bytes: 281 TB */
typedef struct mp_tmem {
    int64_t ts;
    int64_t bytes;              /* + allocation, - free */
    uint64_t allocated : 48;    /* Total Allocated after it */
    uint64_t tid : 16;
} mp_tmem;

/* A device's Total Reserved where a [memory] event changed it (the
 * caching allocator's cudaMalloc/cudaFree of a segment): few, kept apart
 * from the [memory] records. 24 bytes. */
typedef struct mp_tresv {
    int64_t ts;
    int64_t reserved;
    int32_t device;             /* "Device Id"; -1 */
    int32_t pad_;
} mp_tresv;

/* One end of a fwdbwd flow. 20 bytes. */
typedef struct __attribute__((packed, aligned(4))) mp_tflow {
    int64_t id, ts;
    uint32_t tid : 31;
    uint32_t start : 1;    /* 's' (forward) or 'f' (backward) */
} mp_tflow;

/* A span's FLOPs: span index, FLOPs; sorted by span. 12 bytes. */
typedef struct __attribute__((packed, aligned(4))) mp_tflop {
    uint32_t span;
    uint64_t flops;
} mp_tflop;

/* An event of ONNX Runtime's profile (SessionOptions.enableProfiling: a
 * bare array of complete events, cat "Node" for kernels, "Session" for
 * model_run and the session's own spans): src/import/ort.c places them. */
#define MP_TORT_NONE UINT32_MAX
typedef struct mp_tort {
    int64_t ts, end;       /* ns */
    uint32_t name;         /* interned */
    uint32_t op;           /* args.op_name, interned; MP_TORT_NONE */
    uint32_t provider;     /* args.provider, interned; MP_TORT_NONE */
    uint32_t in_shapes;    /* args.input_type_shape as written ([{"float":[1,3]},...]), interned; MP_TORT_NONE */
    uint32_t out_shapes;   /* args.output_type_shape, the same */
    int16_t threads;       /* 1 + the sub_threads of args.thread_scheduling_stats; 0 not given */
    uint8_t session;       /* cat "Session" (else "Node") */
} mp_tort;

/* MP_TDT_TF32: fp32 operators whose matrix kernels ran on tensor cores */
enum { MP_TDT_NONE, MP_TDT_FP32, MP_TDT_FP16, MP_TDT_BF16, MP_TDT_FP8, MP_TDT_FP64, MP_TDT_TF32,
       MP_TDT_COUNT };
extern const char *const mp_tdtype_names[MP_TDT_COUNT];   /* "?", "fp32", ... "tf32" */

/* The recorded shapes of one operator, as the FLOP rules (flops.c) read
 * them: the first MP_TFL_IN inputs' "Input Dims" (up to 5 dims each), a
 * conv2d's stride, padding, dilation and groups, a convolution_backward's
 * output_mask ("Concrete Inputs"). */
#define MP_TFL_IN 4
typedef struct mp_tshapes {
    int nin;
    int nd[MP_TFL_IN];
    int64_t dims[MP_TFL_IN][5];
    int64_t conv[3][3];
    int nconv[3];
    int64_t groups;
    int8_t mask[3];        /* 1 true, 0 false, -1 not recorded */
} mp_tshapes;

enum { MP_TFC_NONE, MP_TFC_CONV2D, MP_TFC_CONV_BWD };   /* Concrete Inputs a rule reads */

/* The rule for an operator name (1-based index into the table), 0 when
 * there is none; *concrete says which Concrete Inputs it reads. */
int mp_trace_flop_rule(const char *name, size_t n, int *concrete);
/* FLOPs by a rule; 0 when the shapes do not fit it. */
uint64_t mp_trace_flops(int rule, const mp_tshapes *s);
/* Operators that only move or make data: never reported as uncounted. */
bool mp_trace_flop_free(const char *name);

/* A collective's metadata, kept in a side table beside the span or device
 * record that carries it (the compact records stay as they are): gloo:* and
 * nccl:* annotations, c10d::* operators, record_param_comms, NCCL kernels
 * with collective args. comm.c turns them into calls (mp_tcall). */
typedef struct mp_tcomm {
    uint32_t idx;          /* index into spans (on_dev 0) or devs (on_dev 1) */
    uint8_t on_dev;
    uint8_t elem_bytes;    /* bytes per element (dtype, Input type); 0 unknown */
    int32_t seq;           /* record_param_comms "Seq"; -1 */
    int32_t group_size;    /* "Group size"; -1 */
    int32_t coll;          /* interned "Collective name"; -1: the event's name says */
    int32_t pg;            /* interned "Process Group Name"; -1 */
    int32_t pg_ranks;      /* interned "Process Group Ranks" ("[0, 1, ...]"); -1 */
    int64_t in_elems;      /* "In msg nelems", or the first input's elements; -1 */
    int64_t out_elems;     /* "Out msg nelems"; -1 */
} mp_tcomm;

/* A process group of distributedInfo.pg_config (or seen in
 * record_param_comms): its name, description and size. */
typedef struct mp_tpg {
    int32_t name, desc;    /* interned; desc -1 */
    int32_t size;          /* -1 unknown */
    int32_t ranks;         /* interned ranks list; -1 */
} mp_tpg;

typedef struct mp_trace_raw {
    mp_arena arena;        /* names */
    mp_strmap names_map;
    const char **names;    /* index -> name */
    int n_names, cap_names;
    mp_tspan *spans;  size_t n_spans, cap_spans;
    mp_tdev *devs;    size_t n_devs, cap_devs;
    mp_tmem *mems;    size_t n_mems, cap_mems;
    mp_tflow *flows;  size_t n_flows, cap_flows;
    mp_tflop *flops;  size_t n_flops, cap_flops;
    int64_t mem_reserved_peak;   /* highest Total Reserved of a device [memory] event; -1 */
    mp_tresv *resvs;  size_t n_resvs, cap_resvs;    /* Total Reserved where it changed */
    int64_t resv_last[4];        /* reading: the last kept per device 0-3 (-1) */
    mp_tcomm *comms;  size_t n_comms, cap_comms;   /* collectives' side table */
    mp_tpg *pgs;      int n_pgs, cap_pgs;
    int64_t *threads; int n_threads, cap_threads;  /* index -> (pid << 32 | tid) */
    mp_tort *orts;    size_t n_orts, cap_orts;     /* ONNX Runtime's events */
    uint8_t *kflags;  int n_kflags;  /* analysis: per name, what its kernel name says (mp__trace_kflags) */
    /* top-level fields */
    char device_name[128];
    int64_t device_mem;    /* totalGlobalMem; -1 unknown */
    int64_t device_sms;
    int rank;              /* distributedInfo.rank; -1 */
    int world_size;        /* distributedInfo.world_size; -1 */
    int64_t base_ns;       /* baseTimeNanoseconds: ts + base_ns is the wall clock; 0 */
    char backend[32];      /* distributedInfo.backend ("nccl", "gloo"); "" */
    uint64_t n_shaped;     /* operators with "Input Dims" (record_shapes) */
    uint64_t n_flops_null; /* operators whose args.flops is null: their producer could not count them */
    uint64_t bytes;        /* uncompressed JSON bytes read */
    uint64_t n_events;     /* traceEvents elements */
    int pieces;            /* the events were parsed in this many pieces at once; 1 one pass */
    bool gzipped;
} mp_trace_raw;

/* The cores this process may run on (read.c). */
int mp__trace_cores(void);

/* Read a whole trace. `label` names the input in messages. Returns
 * MP_ERR_IO (cannot open/read), MP_ERR_FORMAT (with the byte offset or
 * event) or MP_ERR_NOMEM; on error `t` is freed. */
mp_status mp_trace_read_file(const char *path, mp_trace_raw *t);
/* The same, with a large plain file's events parsed in pieces of at least
 * `piece_min` bytes (up to 16) by `threads` threads at once, each taking
 * the next piece when done; threads 0: one a core up to 4, 1: one pass;
 * piece_min 0: 8 MB (mp_trace_read_file: both 0). */
mp_status mp_trace_read_file_pieces(const char *path, mp_trace_raw *t, int threads, size_t piece_min);
mp_status mp_trace_read_memory(const void *data, size_t size, const char *label,
                               mp_trace_raw *t);
void mp_trace_raw_free(mp_trace_raw *t);
/* Free one of mp_trace_raw's record arrays (each is a mapping of its own:
 * read.c). */
void mp__trace_rec_free(void *arr);
/* The FLOPs of span i (0 when it has none). */
uint64_t mp_trace_span_flops(const mp_trace_raw *t, size_t i);

/* legacy.c: traces without Kineto (a bare event array, no categories) and
 * the module range names. mp_trace_module_range: 1 "nn.Module: ", 2
 * "nn.Module.backward: ", 0 neither (*prefix: its length). */
int mp_trace_module_range(const char *name, size_t n, size_t *prefix);
/* The module tree's name of a MP_TS_MODULE span: its name without the range
 * prefix (interned by the reader); -1 when not found. */
int mp_trace_module_name(const mp_trace_raw *t, const mp_tspan *s);
/* MP_TS_OP, MP_TS_ANNOT or MP_TS_MODULE for an event known by name only. */
int mp_trace_legacy_kind(const char *name, size_t n);
struct mp_trace;
/* Module times of a trace without device rows (legacy.c). */
bool mp_trace_cpu_modules(struct mp_trace *t, const mp_tspan *sp, size_t n, const int32_t *mod,
                          size_t n_dev);

/* ---- the analysis ---- */

enum { MP_TC_GEMM, MP_TC_CONV, MP_TC_ATTN, MP_TC_ELEM, MP_TC_MEM, MP_TC_COMM, MP_TC_OTHER,
       MP_TC_COUNT };
extern const char *const mp_tcat_names[MP_TC_COUNT];      /* "gemm", ... (JSON keys) */
extern const char *const mp_tcat_labels[MP_TC_COUNT];     /* "GEMM", ... (text) */

/* MP_TI_COLL: the device idle while its host waited in a collective (or,
 * once the ranks are matched, while a collective kernel waited for its
 * peers); not launch-bound, not synchronisation. */
enum { MP_TI_LOADER, MP_TI_COLL, MP_TI_RANGE, MP_TI_LAUNCH, MP_TI_SYNC, MP_TI_OTHER, MP_TI_COUNT };
extern const char *const mp_tidle_names[MP_TI_COUNT];
extern const char *const mp_tidle_labels[MP_TI_COUNT];

typedef struct mp_tstep {
    const char *name;
    int64_t ts, wall, busy;
    int64_t idle[MP_TI_COUNT];
    int64_t cat[MP_TC_COUNT];       /* device time by category (streams summed) */
    int64_t loader_wall;            /* CPU time in data loader calls */
    int64_t optimizer;              /* CPU wall time of Optimizer.step */
    int64_t optimizer_dev;          /* device span of Optimizer.step (gpu_user_annotation) */
    uint64_t flops;
    uint64_t flops_bwd;             /* of flops: backward operators' */
    int64_t mem_start, mem_peak, mem_end;   /* allocated bytes; -1 unknown */
    int64_t comm;                   /* time in collectives (union of the calls, device or host) */
    int64_t comm_overlap;           /* of it: while the device ran compute (HTA's overlap) */
    int32_t n_calls;                /* collective calls arriving in the step */
} mp_tstep;

/* One collective call on one rank (comm.c): an NCCL kernel on the device,
 * or a host-side collective (gloo:* / nccl:* annotation, record_param_comms,
 * c10d::* operator) where the trace has no collective kernels. */
#define MP_TCALL_RANGES 3
typedef struct mp_tcall {
    const char *coll;               /* "all_reduce", "broadcast", ... */
    const char *pg;                 /* process group name; NULL: not recorded */
    int64_t ts, end;                /* arrival and end (trace clock, ns) */
    int64_t elems;                  /* message elements; -1 */
    int32_t elem_bytes;             /* 0 unknown */
    int32_t seq;                    /* record_param_comms sequence number; -1 */
    int32_t step;                   /* the step it arrives in; -1 */
    uint8_t device;                 /* a collective kernel (its wait is on the device) */
    int64_t solo;                   /* device calls: its leading time with no other device work */
    /* what the rank did before arriving: from the end of its previous call
     * (or its step's start) to this arrival */
    int64_t seg_start;
    int64_t seg_busy;               /* device compute in it */
    int64_t seg_loader;             /* host inside the data loader in it */
    struct mp_tcall_range {         /* the user ranges (record_function) most of it */
        const char *name;
        int64_t ns;
    } range[MP_TCALL_RANGES];
    /* set by the job analysis (job.c); -1 when not matched */
    int64_t wait;                   /* the last arrival minus its own */
    int32_t match;                  /* index of the matched collective in the job */
} mp_tcall;

typedef struct mp_top {            /* a key_averages row */
    const char *name;
    bool device;                    /* a device-side row (kernel, memcpy, annotation) */
    int64_t count;
    int64_t cpu_total, self_cpu, dev_total, self_dev;   /* ns */
    uint64_t flops;
    int64_t alloc_bytes;            /* device bytes allocated directly inside it */
} mp_top;

typedef struct mp_tkernel {
    const char *name, *short_name, *op;
    uint8_t kind, cat;
    int64_t count, total;
} mp_tkernel;

typedef struct mp_tmod {            /* per module tree node, rolled up */
    int64_t fwd, bwd;               /* device ns */
    uint64_t flops;                 /* forward FLOPs */
    uint64_t bwd_flops;             /* FLOPs of the backward operators tied to its forward ones */
    int64_t calls;
} mp_tmod;

typedef struct mp_tuncounted {      /* operators that launched work but have no FLOP rule */
    const char *name;
    int64_t count;
    int64_t device;                 /* their self device ns */
} mp_tuncounted;

typedef struct mp_tfinding {
    const char *kind;               /* stable snake_case id: "data_loader", "launch_bound", ... */
    double score;                   /* ranking, 0-1: the share of step time it concerns */
    double value;                   /* the figure it is about, in `unit` */
    const char *unit;               /* "s", "bytes" or "fraction" */
    double share;                   /* that figure's share of what it is measured against, 0-1 */
    char text[480];                 /* the finding and the advice, for people */
} mp_tfinding;

typedef struct mp_trace {
    mp_trace_raw raw;
    const char *path;
    mp_tstep *steps; int n_steps;
    mp_top *ops; int n_ops;
    mp_tkernel *kernels; int n_kernels;
    int64_t kernel_total;           /* sum of device event time */
    /* module tree: the same record as a model's, walked by the tree writer */
    mp_module *mods; mp_tmod *mfig; int n_mods;
    bool cpu_modules;               /* module fwd/bwd are CPU ranges' wall time (no device rows) */
    int64_t mem_peak_alloc, mem_peak_reserved;  /* -1: no memory events */
    /* device memory over the steps' window: at most MP_MEM_CURVE points,
     * each the highest allocation of its slice of time (peaks kept) */
    struct mp_tmempt { int64_t ts, allocated; } *mem_curve; int n_mem_curve;
    int dominant_dtype;
    double peak_tflops;             /* used peak (0: unknown) */
    const char *peak_source;        /* "table: H100 SXM bf16 dense", "--peak-tflops" */
    uint64_t flops_total;
    uint64_t flops_bwd;             /* of flops_total: backward operators' */
    mp_tuncounted *uncounted; int n_uncounted;   /* by device time, largest first */
    int64_t wall_total, busy_total;
    int64_t linked_bwd, bwd_ops;    /* backward operators tied to a forward one */
    int64_t linked_flow;            /* links made by fwdbwd flows (the rest: sequence numbers) */
    mp_tfinding *findings; int n_findings;
    /* collectives (comm.c) */
    mp_tcall *calls; int n_calls;
    int64_t comm_total, comm_overlap_total;
    /* the device's compute (collective kernels left out) over the steps'
     * window, for timelines and the job's waits: at most about MP_TIMELINE
     * intervals (gaps shorter than the window/MP_TIMELINE closed) */
    struct mp_tival { int64_t a, b; } *timeline; int n_timeline;
    /* the user's own host ranges (record_function) the device idled in,
     * most idle first (at most MP_HRANGES) */
    struct mp_thrange {
        const char *name;
        int64_t count;
        int64_t host;               /* host time inside it over the steps (nested calls once) */
        int64_t idle;               /* device idle meanwhile, not waiting on the data loader or a collective */
    } *hranges; int n_hranges;
    /* what the trace did not record (findings.c says what it costs) */
    bool no_device;                 /* no device events at all */
    bool no_shapes;                 /* operators without "Input Dims" (record_shapes off), or
                                     * with FLOPs their producer left unknown (flops_null): the
                                     * FLOPs are unknown */
    uint64_t flops_null;            /* operators whose args.flops is null */
    bool no_modules;                /* no nn.Module scopes (with_stack / with_modules off) */
    /* the caching allocator asking the driver for memory after the first
     * step (churn.c): cudaMalloc/cudaFree (and the cuMem* calls of
     * expandable segments) and Total Reserved moving */
    struct mp_tchurn {
        int steps;                  /* the steps after the first */
        int64_t mallocs, frees;     /* calls in them */
        int64_t ns;                 /* host time inside those calls */
        int64_t changes;            /* Total Reserved changes in them (every device) */
        int64_t lo, hi;             /* Total Reserved's lowest and highest there; -1 unknown */
    } churn;
    int64_t ops_launching;          /* operators that launched device work */
    /* job context for findings (job.c sets it; NULL alone) */
    const struct mp_tjob *job;
} mp_trace;

#define MP_TIMELINE 600
#define MP_HRANGES 8

typedef struct mp_trace_options {
    double peak_tflops;             /* > 0: override */
    int depth;                      /* module tree depth, -1 all */
    int top;                        /* rows per table, -1 all */
    int threads;                    /* threads: the reader's for a large plain file, and
                                     * the analysis' second; 0 one a core (the reader's
                                     * up to 4), 1 none */
} mp_trace_options;

/* The command line's defaults: no peak given, every module depth, 20 rows
 * a table, threads one a core. */
#define MP_TRACE_OPTIONS_DEFAULT ((mp_trace_options){0, -1, 20, 0})

/* Read and analyse one file: a trace, or a digest of one (mp_trace_open
 * tells them apart by their first bytes). */
mp_status mp_trace_open(const char *path, const mp_trace_options *o, mp_trace *t);
mp_status mp_trace_open_memory(const void *data, size_t size, const char *label,
                               const mp_trace_options *o, mp_trace *t);
/* Analyse records already read (takes ownership of raw). */
mp_status mp_trace_analyze(mp_trace_raw *raw, const mp_trace_options *o, mp_trace *t);
void mp_trace_free(mp_trace *t);

/* ---- digests: one rank's analysis as a small JSON (docs/schema/digest.schema.json) ----
 * mp_trace_digest_write (src/report/trace_digest.c) writes the summary a
 * trace's reports and the job read; mp_trace_digest_read builds that
 * summary back (src/trace/digest.c), findings included, so every writer
 * and the job give the same output from digests as from the traces. */
#define MP_TRACE_DIGEST_VERSION 2   /* 2: idle by cause has host_range (third) */
mp_status mp_trace_digest_write(const mp_trace *t, FILE *f);
mp_status mp_trace_digest_read(const void *data, size_t size, const char *label, mp_trace *t);
mp_status mp_trace_digest_file(const char *path, mp_trace *t);
bool mp_trace_is_digest(const void *data, size_t n);

/* A datasheet peak for a device name and dtype (TFLOPS, dense); 0 when
 * unknown. `label` gets the table row's name. */
double mp_trace_peak(const char *device, int dtype, const char **label);
/* "void at::native::foo<...>(...)" -> "foo<...>" shortened for tables. */
void mp_trace_short_name(const char *name, char *out, size_t n);

/* ---- several ranks: the job (job.c) ----
 *
 * The calls of every rank are matched across the ranks of their process
 * group (by sequence number where record_param_comms gives one, else by
 * order: the k-th call of one collective and size in a step), each rank's
 * arrival and wait recorded; per step the critical rank and its delay;
 * stragglers, their causes, and the what-if of "Understanding Stragglers in
 * Large Model Training Using What-if Analysis" (Lin et al., OSDI '25).
 * docs/DESIGN.md "Multi-rank jobs" has the rules. */

#define MP_TJOB_CAUSE 160
typedef struct mp_tjob_rank {
    int index;                      /* into the traces given */
    int rank;                       /* distributedInfo rank */
    int64_t clock;                  /* added to its times to put them on the job's clock */
    int64_t shift;                  /* of that, what aligning the clocks at the collectives'
                                       ends moved it by (0: baseTimeNanoseconds agreed) */
    int64_t skew;                   /* median end-time difference to the other ranks at matched
                                       calls, before the alignment (a clock check: ~0 when
                                       clocks agree) */
    int n_calls, n_matched;
    int64_t wait;                   /* summed over its matched calls */
    int64_t late;                   /* its lateness summed over the steps */
    int critical_steps, late_steps;
    int64_t whatif_saved;           /* job time saved if it ran like the median rank */
    bool straggler;
    char cause[MP_TJOB_CAUSE];      /* what made it late, in plain words; "" */
    const char *cause_kind;         /* "range", "data_loader", "compute", "host"; NULL */
} mp_tjob_rank;

typedef struct mp_tjob_step {
    const char *name;
    int64_t wall;                   /* the longest of the ranks' walls for the step */
    int critical;                   /* index into ranks of the rank the others waited for; -1 */
    int64_t delay;                  /* its lateness (vs the median of the other ranks) */
    int64_t saved;                  /* the step's time saved if it ran like the median rank */
    int64_t ideal;                  /* the step's time if every straggler ran like the median */
    char cause[MP_TJOB_CAUSE];
    int64_t *late;                  /* per rank (index into ranks): its lateness in the step */
} mp_tjob_step;

typedef struct mp_tjob_cause {      /* job time lost, by cause */
    char name[MP_TJOB_CAUSE];
    const char *kind;
    int64_t lost;
} mp_tjob_cause;

typedef struct mp_tjob {
    bool one_run;                   /* the traces are the ranks of one run */
    char why[600];                  /* when not: what differs */
    mp_tjob_rank *ranks; int n_ranks;       /* in rank order */
    mp_tjob_step *steps; int n_steps;
    int *stragglers; int n_stragglers;      /* indices into ranks */
    mp_tjob_cause *causes; int n_causes;    /* largest first */
    const char *match_by;           /* "sequence number", "order" or NULL (no calls) */
    int n_matched;                  /* collectives matched across ranks */
    int n_unmatched;                /* calls seen on one rank only */
    int64_t median_step;            /* the median step's wall time across ranks */
    int64_t threshold;              /* lateness that counts (1% of the median step) */
    int64_t wall;                   /* sum of the job's step times */
    int64_t ideal;                  /* the same if every straggler ran like the median rank */
    char warning[600];              /* what makes the job's figures unreliable (a rank's trace
                                       missing, clocks that disagree); "" none */
} mp_tjob;

/* Match the ranks' calls and analyse the job. The traces' calls get their
 * waits, steps their collective_wait (collective kernels waiting for
 * peers), and their findings are written again with the job's context.
 * With one trace or traces of separate jobs, job->one_run says so and
 * nothing is changed. */
mp_status mp_trace_job(mp_trace *const *t, int n, mp_tjob *job);
void mp_tjob_free(mp_tjob *job);

/* The findings of a trace from its summary alone (findings.c): what
 * mp_trace_analyze and mp_trace_job write, and what a digest's trace gets. */
void mp_trace_findings(mp_trace *t);

/* Whether several traces are the ranks of one run: each has a distinct
 * distributedInfo rank, and they agree on world_size and device. When not,
 * `why` (may be NULL) says what differs and the writers analyse them apart. */
bool mp_trace_one_run(const mp_trace *const *t, int n, char *why, size_t nwhy);

/* Whether any operator of t has self device time: without, the operators
 * are in key_averages' CPU order (self CPU time first) and the writers
 * say so. */
bool mp_trace_ops_device_time(const mp_trace *t);

/* Writers. Several traces (one per rank) print side by side, with the job
 * (mp_trace_job; NULL when there is none). Options NULL: the CLI's defaults. */
mp_status mp_trace_report_text(const mp_trace *const *t, int n, const mp_tjob *job,
                               const mp_trace_options *o, FILE *f);
mp_status mp_trace_report_json(const mp_trace *const *t, int n, const mp_tjob *job,
                               const mp_trace_options *o, FILE *f);
/* One table ("steps" or "kernels") as CSV (src/report/csv.c; docs/REPORTS.md). */
mp_status mp_trace_report_csv(const mp_trace *const *t, int n, const char *table, FILE *f);
/* The JSON above inside one self-contained HTML page (src/report/html.c). */
mp_status mp_trace_report_html(const mp_trace *const *t, int n, const mp_tjob *job,
                               const mp_trace_options *o, FILE *f);

/* One name per collective whatever the backend: "gloo:all_reduce",
 * "c10d::allreduce_", "ncclDevKernel_AllReduce_Sum_f32_RING_LL" and
 * record_param_comms' "allreduce" are all "all_reduce" (comm.c). Names it
 * does not know are lowercased into the arena. */
const char *mp_trace_coll_name(const char *name, mp_arena *arena);

/* ---- internal to src/trace ---- */

/* analyze.c: a collective kernel (NCCL) by name; a data loader call by
 * name; the step whose window holds ts (-1). */
bool mp__trace_comm_kernel(const char *name);
/* Freed heap memory goes back to the system now (glibc keeps it). */
void mp__trace_trim(void);
/* What name i of a trace says as a kernel's name, asked once per name:
 * MP_TK_COMM an NCCL kernel (mp__trace_comm_kernel), MP_TK_TF32 fp32
 * operands on tensor cores. */
enum { MP_TK_COMM = 1, MP_TK_TF32 = 2, MP_TK_ASKED = 0x80 };
unsigned mp__trace_kflags(mp_trace_raw *raw, uint32_t name);
bool mp__trace_loader(const char *name);
/* A record_function range of the user's own (not a step, the optimizer, a
 * collective, the data loader, a DDP/FSDP wrapper or a module scope). */
bool mp__trace_user_range(const char *name);
int mp__trace_step_at(const mp_trace *t, int64_t ts);
int mp__trace_intern(mp_trace_raw *raw, const char *s);   /* -1 out of memory */
/* comm.c: the calls (before the steps), then per step the time in them,
 * its overlap with compute and each call's segment (after the steps). */
mp_status mp__trace_calls(mp_trace *t, const int32_t *devop, const int32_t *parent);
mp_status mp__trace_comm_steps(mp_trace *t);
/* churn.c: t->churn from the runtime calls and the Total Reserved changes
 * (after the steps); false when out of memory. */
bool mp__trace_churn(mp_trace *t);

#endif
