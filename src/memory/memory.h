/* CUDA memory snapshots (torch.cuda.memory._dump_snapshot): read without
 * executing the file, replayed per device, analysed at the peak.
 *
 *   snapshot.pickle(.gz) --pickle.c (data opcodes only)--> values
 *     --snapshot.c--> events (32-byte records, converted as their list
 *       receives them), segments, blocks, interned frames and stacks
 *     --replay.c--> per device: start, peak, reserved, end, live at peak
 *     --analyze.c--> categories, sites, steps, findings
 *   writers: src/report/memory_*.c (text, json, csv, html).
 *
 * Layouts from PyTorch 1.13 to today (docs/MEMORY.md): a dict with
 * `segments` and `device_traces` (2.1+), blocks with a per-block `history`
 * and no `address` (2.0), the bare segment list of
 * torch.cuda.memory_snapshot(). Unknown keys are skipped. */
#ifndef MP_MEMORY_H
#define MP_MEMORY_H

#include "base/base.h"
#include "memory/pickle.h"

#include <stdint.h>

/* Known actions; others are counted by name (MP_MA_OTHER + index). */
#define MP_MEM_ACTIONS(X)              \
    X(ALLOC, "alloc")                  \
    X(FREE_REQUESTED, "free_requested") \
    X(FREE_COMPLETED, "free_completed") \
    X(SEGMENT_ALLOC, "segment_alloc")  \
    X(SEGMENT_FREE, "segment_free")    \
    X(SEGMENT_MAP, "segment_map")      \
    X(SEGMENT_UNMAP, "segment_unmap")  \
    X(OOM, "oom")                      \
    X(SNAPSHOT, "snapshot")

enum {
#define MP__MA(e, s) MP_MA_##e,
    MP_MEM_ACTIONS(MP__MA)
#undef MP__MA
    MP_MA_OTHER
};
#define MP_MEM_MAX_ACTIONS 64

/* Categories at the peak (docs/MEMORY.md). */
#define MP_MEM_CATEGORIES(X)             \
    X(PARAMETER, "parameter")            \
    X(GRADIENT, "gradient")              \
    X(OPTIMIZER_STATE, "optimizer_state") \
    X(ACTIVATION, "activation")          \
    X(TEMPORARY, "temporary")            \
    X(INPUT, "input")                    \
    X(OTHER, "other")                    \
    X(UNKNOWN, "unknown")

enum {
#define MP__MC(e, s) MP_MC_##e,
    MP_MEM_CATEGORIES(MP__MC)
#undef MP__MC
    MP_MC_COUNT
};
extern const char *const mp_mem_category_names[MP_MC_COUNT];

#define MP_MEM_NO_TIME INT64_MIN

/* One trace event: 32 bytes. */
typedef struct mp_mem_event {
    uint64_t addr;
    int64_t size;
    int64_t time_us;     /* MP_MEM_NO_TIME when absent */
    uint32_t stack;      /* 0: no frames */
    uint16_t meta;       /* its user_metadata (a module path): index into the snapshot's; 0 none */
    uint8_t action : 6;  /* index into the snapshot's action names (< MP_MEM_MAX_ACTIONS) */
    uint8_t flags : 2;   /* MP_ME_* */
    uint8_t stream;      /* index into the snapshot's streams (255: the 255th and later) */
} mp_mem_event;
#define MP_MEM_MAX_META 65535
enum { MP_ME_ADDR = 1, MP_ME_DEVICE_FREE = 2 };

typedef struct mp_mem_frame {
    int32_t name, file; /* string ids (mpk) */
    int64_t line;
} mp_mem_frame;

enum { MP_BS_ACTIVE_ALLOCATED, MP_BS_ACTIVE_PENDING_FREE, MP_BS_INACTIVE, MP_BS_OTHER };

typedef struct mp_mem_block {
    uint64_t addr;
    int64_t size;      /* the rounded block */
    int64_t requested; /* requested_size, else history's real_size, else size */
    uint32_t stack;
    uint8_t state;
    bool early; /* active at the end, not live at the end of the replay: counted at the start */
} mp_mem_block;

typedef struct mp_mem_segment {
    int device;
    uint64_t addr;
    int64_t total;
    bool expandable;
    uint32_t first_block, nblocks;
} mp_mem_segment;

/* One allocation live at the peak. */
typedef struct mp_mem_live {
    int64_t size;       /* requested bytes */
    int64_t block_size; /* the final block's size when known, else -1 */
    int64_t alloc_ev;   /* index in the device's trace; -1 live before recording */
    int64_t free_ev;    /* -1: never freed in the trace */
    uint64_t addr;
    uint32_t stack;     /* the alloc's (or the final block's) stack */
    uint32_t free_stack;
    uint16_t meta;      /* the alloc's user_metadata (module path); 0 none */
    uint8_t origin;     /* MP_LO_* */
    uint8_t category;
} mp_mem_live;
enum { MP_LO_TRACE, MP_LO_FINAL_BLOCK, MP_LO_EARLY_FREE };

typedef struct mp_mem_site {
    uint32_t frame; /* first user frame; UINT32_MAX none */
    int64_t bytes;
    int64_t count;
} mp_mem_site;

typedef struct mp_mem_step {
    int64_t first_ev, last_ev; /* [first, last] */
    int64_t start_bytes, end_bytes, peak_bytes, peak_ev;
    int64_t t0_us, t1_us;
} mp_mem_step;

enum {
    MP_MF_ONE_ENTRY,
    MP_MF_CHURN,
    MP_MF_FRAGMENTATION,
    MP_MF_LEAK,
    MP_MF_GRAD_ALIVE,
    MP_MF_SPIKE,
    MP_MF_OOM,
    MP_MF_REPLAY_END,
    MP_MF_NO_FRAMES,
    MP_MF_KIND_COUNT
};
extern const char *const mp_mem_finding_kinds[MP_MF_KIND_COUNT];

typedef struct mp_mem_finding {
    int kind;
    int64_t bytes;
    int64_t time_us; /* MP_MEM_NO_TIME: none */
    int64_t event;   /* -1 none */
    char *text;      /* plain words (owned) */
} mp_mem_finding;

typedef struct mp_mem_device {
    int device;
    const mp_mem_event *ev; /* its trace */
    uint32_t nev;
    bool has_trace;
    int64_t action_count[MP_MEM_MAX_ACTIONS];
    /* replay */
    int64_t start_requested, start_reserved;
    int64_t start_from_blocks, start_from_frees; /* the two parts of start_requested */
    int64_t peak_requested, peak_ev, peak_time_us;
    int64_t peak_reserved, peak_reserved_ev;
    int64_t reserved_at_peak; /* reserved right after peak_ev */
    int64_t replay_end_requested, replay_end_reserved;
    int64_t end_requested, end_allocated, end_reserved;
    int64_t end_inactive_split_bytes, end_inactive_split_blocks;
    int64_t largest_free_block; /* at the end, inactive blocks */
    int64_t first_time_us, last_time_us;
    int64_t clock_back_ev; /* the first event whose time_us is earlier than the one before it; -1 none */
    int64_t warn_count;
    char *warnings[8]; /* the first few, owned */
    int nwarn;
    /* at the peak */
    mp_mem_live *live;
    uint32_t nlive; /* sorted by size, largest first */
    int64_t categories[MP_MC_COUNT];
    mp_mem_site *sites;
    uint32_t nsites; /* largest first */
    mp_mem_step *steps;
    int nsteps;
    const char *steps_from; /* "optimizer.step frames", "none" */
    mp_mem_finding *findings;
    int nfindings;
} mp_mem_device;

/* A module range from external_annotations ('nn.Module: PATH', START/END,
 * as modelprof.memory.record opens them with record_function). */
typedef struct mp_mem_annot {
    int64_t time_us;
    int32_t device;
    uint16_t meta;  /* the path's index in the snapshot's meta */
    uint8_t start;  /* 1 START, 0 END */
} mp_mem_annot;

/* Consecutive records that went to one list (the reader's item hook). */
typedef struct mp_mem_run {
    uint64_t list; /* the list's pickle value */
    uint32_t first, count;
} mp_mem_run;

typedef struct mp_snapshot {
    mpk *k;
    const char *path;
    bool gz;
    uint64_t bytes;          /* uncompressed pickle bytes */
    const char *layout;      /* "dict", "segment_list" */
    bool has_device_traces;  /* the key is there */
    bool has_frames;         /* any event or block carries a stack */
    bool block_history;      /* PyTorch 2.0: blocks carry a history */
    /* records */
    mp_mem_event *ev;
    uint64_t nev, ev_cap;
    mp_mem_run *runs;
    uint64_t nruns, runs_cap;
    int64_t *device_free; /* per OOM event (MP_ME_DEVICE_FREE): pairs ev index, bytes */
    uint64_t ndevice_free, device_free_cap;
    mp_mem_frame *frames;
    uint32_t nframes, frames_cap;
    uint32_t *stack_pool; /* stack i: stack_pool[stack_off[i] .. stack_off[i+1]) */
    uint64_t pool_len, pool_cap;
    uint64_t *stack_off;
    uint32_t nstacks, stacks_cap; /* stack 0: empty */
    uint32_t *frame_hash, frame_hcap;
    uint32_t *stack_hash, stack_hcap;
    int32_t action_name[MP_MEM_MAX_ACTIONS]; /* string ids */
    int nactions;
    uint64_t streams[256];
    int nstreams;
    int32_t *meta;      /* string ids of the user_metadata values; meta[0] = -1 (none) */
    uint32_t nmeta, meta_cap;
    uint16_t *meta_of; /* string id -> index in meta (0: none yet) */
    mp_mem_annot *annots;
    uint32_t nannots, annots_cap;
    uint32_t meta_of_cap;
    mp_mem_segment *segs;
    uint32_t nsegs;
    mp_mem_block *blocks;
    uint32_t nblocks;
    mp_mem_device *dev;
    int ndev;
    /* keys interned once */
    int32_t key[32];
    /* per-event user frame of each stack (cache): UINT32_MAX none */
    uint32_t *user_frame;
    mp_arena arena;
} mp_snapshot;

typedef struct mp_mem_opts {
    int device;    /* -1 every device */
    int top;       /* rows of the largest allocations (default 20) */
    bool full_stack;
} mp_mem_opts;

/* Read a snapshot (a .pickle or .pickle.gz, or memory for the fuzzer).
 * MP_ERR_FORMAT with the byte offset or the event for bad input. */
mp_status mp_snapshot_read(const char *path, mp_snapshot **out);
mp_status mp_snapshot_read_memory(const void *buf, size_t len, const char *label, mp_snapshot **out);
void mp_snapshot_free(mp_snapshot *s);
/* Replay and analyse every device (or opts->device). */
mp_status mp_snapshot_analyze(mp_snapshot *s, const mp_mem_opts *o);

/* The device's recorded span in microseconds (last time_us - first):
 * MP_MEM_NO_TIME when the trace has no times or its clock runs backwards
 * (d->clock_back_ev >= 0): never negative. */
int64_t mp_mem_span_us(const mp_mem_device *d);

/* Names and frames. */
const char *mp_mem_str(const mp_snapshot *s, int32_t id);
const char *mp_mem_action_name(const mp_snapshot *s, int action);
/* Stack i's frames (innermost first). */
const uint32_t *mp_mem_stack(const mp_snapshot *s, uint32_t i, uint32_t *n);
/* An event's user_metadata (a module path), NULL when none. */
const char *mp_mem_meta(const mp_snapshot *s, uint16_t meta);
/* An allocation holding memory at an OOM: its size, stack and allocation
 * event (-1 a block live before the recording). */
typedef struct mp_mem_holder {
    int64_t size;
    uint32_t stack;
    int64_t alloc_ev;
} mp_mem_holder;
/* The k largest allocations live right before event `at` of device d (an
 * OOM's holders): the trace's, not freed by then, and the blocks live
 * before the recording (d->live's, alloc_ev -1) not freed by then; largest
 * first, equal sizes earliest allocated first, into h[0..*n). */
mp_status mp_mem_largest_before(const mp_mem_device *d, uint32_t at, int k, mp_mem_holder *h, int *n);
/* The first frame outside torch and the Python runtime (UINT32_MAX none). */
uint32_t mp_mem_user_frame(const mp_snapshot *s, uint32_t stack);
/* A frame's file with '\\' as '/' (a snapshot recorded on Windows:
 * C:\\...\\site-packages\\torch\\nn\\...), into buf[n]: the paths the rules
 * read are matched by their '/' form. Returns buf. */
const char *mp_mem_file_slashed(const char *file, char *buf, size_t n);
/* "file:line (function)" of a frame into buf. */
const char *mp_mem_frame_text(const mp_snapshot *s, uint32_t frame, char *buf, size_t n);

/* analyze.c: categories, sites, steps and findings of a replayed device. */
mp_status mp_mem_analyze_device(mp_snapshot *s, mp_mem_device *d);
/* Every allocation of d's trace categorised as the ones at the peak are
 * (cat[i] for an alloc event i; unknown for other events), and the index
 * of each one's free_completed (free_of[i], -1 never freed). Both arrays
 * hold d->nev entries. For the HTML timeline. */
mp_status mp_mem_alloc_categories(mp_snapshot *s, const mp_mem_device *d, uint8_t *cat, int32_t *free_of);
mp_status mp_mem_add_finding(mp_snapshot *s, mp_mem_device *d, int kind, int64_t bytes, int64_t time_us,
                             int64_t event, const char *fmt, ...) MP_PRINTF(7, 8);

#endif
