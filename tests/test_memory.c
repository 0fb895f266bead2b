/* Memory snapshots (issue 32): the safe pickle reader, the replay against
 * the reference replay's figures (tests/snapshots/NAME.ref.json, written by
 * tools/snapshot_ref.py), hostile files, the categories and findings, the
 * command line. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "jsonr.h"
#include "memory/memory.h"
#include "memory/pickle.h"
#include "report/memory_report.h"
#include "tcli.h"
#include "test.h"

/* ---- the pickle reader ---- */

/* protocol 4: {"a": [1, -2, 2**63-1 as LONG1, 2**70 as LONG1, 1.5, None, True, "x"], "b": memo ref to the list} */
static void t_pickle_values(void) {
    static const unsigned char p[] = {
        0x80, 4, '}', 0x94, '(',                                                  /* {  memo 0, MARK */
        0x8c, 1, 'a', 0x94,                                                         /* "a" memo 1 */
        ']', 0x94, '(',                                                             /* [ memo 2, MARK */
        'K', 1,                                                                     /* 1 */
        'J', 0xfe, 0xff, 0xff, 0xff,                                                /* -2 */
        0x8a, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,                    /* 2**63-1 */
        0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0x40,                                      /* 2**70 */
        'G', 0x3f, 0xf8, 0, 0, 0, 0, 0, 0,                                          /* 1.5 */
        'N', 0x88, 0x8c, 1, 'x', 0x94,                                              /* None True "x" */
        'e',                                                                        /* APPENDS */
        0x8c, 1, 'b', 0x94, 'h', 2,                                                 /* "b": memo 2 */
        'u', '.'};
    mpk *k = mpk_new();
    T_CHECK(k != NULL);
    mpk_val root;
    T_OK(mpk_run_memory(k, p, sizeof p, "values", &root));
    T_EQ(mpk_tag(k, root), PK_DICT);
    int32_t ka = mpk_intern(k, "a", 1), kb = mpk_intern(k, "b", 1);
    mpk_val a, b;
    T_CHECK(mpk_dict_get(k, root, ka, &a));
    T_CHECK(mpk_dict_get(k, root, kb, &b));
    T_EQ_U64(a, b); /* the memo hands out the same list, not a copy */
    uint32_t n;
    const mpk_val *it = mpk_items(k, a, &n);
    T_EQ(n, 8);
    int64_t v;
    T_CHECK(mpk_int(k, it[0], &v) && v == 1);
    T_CHECK(mpk_int(k, it[1], &v) && v == -2);
    T_CHECK(mpk_int(k, it[2], &v) && v == INT64_MAX);
    T_EQ(PK_TAG(it[3]), PK_HUGE);
    double d;
    T_CHECK(mpk_float(k, it[4], &d) && d == 1.5);
    T_EQ(PK_TAG(it[5]), PK_NONE);
    T_EQ(PK_TAG(it[6]), PK_BOOL);
    uint32_t len;
    T_EQ_STR(mpk_str(k, mpk_str_id(k, it[7]), &len), "x");
    T_EQ(mpk_memo_len(k), 5);
    mpk_free(k);
}

/* Every opcode that would import or call something is refused, named,
 * with its byte offset. */
static void t_pickle_refused(void) {
    static const struct {
        unsigned char op;
        const char *name;
    } ops[] = {{'c', "GLOBAL"},  {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"}, {'b', "BUILD"},   {'i', "INST"},
               {'o', "OBJ"},     {0x81, "NEWOBJ"},       {0x92, "NEWOBJ_EX"}, {'P', "PERSID"}, {'Q', "BINPERSID"},
               {0x82, "EXT1"},   {0x83, "EXT2"},         {0x84, "EXT4"},   {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"}};
    for (size_t i = 0; i < MP_ARRAY_LEN(ops); i++) {
        unsigned char p[] = {0x80, 4, 'N', ops[i].op, 'x', 'x', 'x', '.'};
        mpk *k = mpk_new();
        mpk_val root;
        T_EQ(mpk_run_memory(k, p, sizeof p, "refused", &root), MP_ERR_FORMAT);
        char want[64];
        snprintf(want, sizeof want, "byte offset 3: opcode %s: refused", ops[i].name);
        if (!strstr(mp_last_error(), want)) mp_t_fail(__FILE__, __LINE__, "%s: %s", ops[i].name, mp_last_error());
        mpk_free(k);
    }
}

static mp_status run_bytes(const unsigned char *p, size_t n) {
    mpk *k = mpk_new();
    mpk_val root;
    mp_status st = mpk_run_memory(k, p, n, "hostile", &root);
    mpk_free(k);
    return st;
}

static void t_pickle_hostile(void) {
    /* truncated inside a string */
    static const unsigned char trunc[] = {0x80, 4, 0x8c, 10, 'a', 'b'};
    T_EQ(run_bytes(trunc, sizeof trunc), MP_ERR_FORMAT);
    T_CHECK(strstr(mp_last_error(), "byte offset 2: opcode SHORT_BINUNICODE") != NULL);
    /* a memo reference to nothing, and one to itself before it is stored */
    static const unsigned char memo[] = {0x80, 4, 'h', 7, '.'};
    T_EQ(run_bytes(memo, sizeof memo), MP_ERR_FORMAT);
    T_CHECK(strstr(mp_last_error(), "memo index 7") != NULL);
    static const unsigned char self[] = {0x80, 4, ']', 'h', 0, 'a', 0x94, '.'};
    T_EQ(run_bytes(self, sizeof self), MP_ERR_FORMAT);
    /* a huge length */
    static const unsigned char huge[] = {0x80, 4, 0x8d, 0, 0, 0, 0, 0, 0, 0, 0x10, '.'};
    T_EQ(run_bytes(huge, sizeof huge), MP_ERR_FORMAT);
    T_CHECK(strstr(mp_last_error(), "limit") != NULL);
    /* nesting deeper than the limit */
    unsigned char deep[MPK_MAX_MARKS + 8];
    size_t n = 0;
    deep[n++] = 0x80, deep[n++] = 4;
    for (int i = 0; i <= MPK_MAX_MARKS; i++) deep[n++] = '(';
    deep[n++] = '.';
    T_EQ(run_bytes(deep, n), MP_ERR_FORMAT);
    T_CHECK(strstr(mp_last_error(), "nesting") != NULL);
    /* a memo index far past the memo */
    static const unsigned char gap[] = {0x80, 4, 'N', 'r', 0xff, 0xff, 0xff, 0x0f, '.'};
    T_EQ(run_bytes(gap, sizeof gap), MP_ERR_FORMAT);
    /* SETITEMS on a list, APPENDS on a dict */
    static const unsigned char setl[] = {0x80, 4, ']', '(', 'N', 'N', 'u', '.'};
    T_EQ(run_bytes(setl, sizeof setl), MP_ERR_FORMAT);
    static const unsigned char appd[] = {0x80, 4, '}', '(', 'N', 'e', '.'};
    T_EQ(run_bytes(appd, sizeof appd), MP_ERR_FORMAT);
    /* text opcodes of protocol 0 are not snapshot data */
    static const unsigned char text[] = {'I', '1', '\n', '.'};
    T_EQ(run_bytes(text, sizeof text), MP_ERR_FORMAT);
}

/* ---- snapshots ---- */
static mp_snapshot *load(const char *path) {
    mp_snapshot *s = NULL;
    mp_status st = mp_snapshot_read(path, &s);
    if (st) {
        mp_t_fail(__FILE__, __LINE__, "%s: %s", path, mp_last_error());
        return NULL;
    }
    mp_mem_opts o = {-1, 20, false};
    st = mp_snapshot_analyze(s, &o);
    if (st) {
        mp_t_fail(__FILE__, __LINE__, "%s: analyze: %s", path, mp_last_error());
        mp_snapshot_free(s);
        return NULL;
    }
    return s;
}

/* ---- snapshots written by the test (a pickle writer of the opcodes the
 * reader runs, protocol 4, as Python's pickler lays them out) ---- */
typedef struct {
    unsigned char *p;
    size_t n, cap;
    int items[64]; /* items since the MARK, per open list */
    int depth;
} pkw;

static void pkw_put(pkw *w, const void *b, size_t n) {
    if (w->n + n > w->cap) {
        w->cap = (w->n + n) * 2 + 4096;
        w->p = realloc(w->p, w->cap);
    }
    memcpy(w->p + w->n, b, n);
    w->n += n;
}
static void pkw_op(pkw *w, unsigned char op) { pkw_put(w, &op, 1); }
static void pkw_int(pkw *w, int64_t v) {
    unsigned char b[10];
    if (v >= 0 && v < 256) {
        b[0] = 'K', b[1] = (unsigned char)v;
        pkw_put(w, b, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        b[0] = 'J';
        for (int i = 0; i < 4; i++) b[1 + i] = (unsigned char)((uint64_t)v >> (8 * i));
        pkw_put(w, b, 5);
    } else {
        b[0] = 0x8a, b[1] = 8; /* LONG1 of 8 bytes */
        for (int i = 0; i < 8; i++) b[2 + i] = (unsigned char)((uint64_t)v >> (8 * i));
        pkw_put(w, b, 10);
    }
}
static void pkw_str(pkw *w, const char *str) {
    size_t n = strlen(str);
    unsigned char b[2] = {0x8c, (unsigned char)n};
    pkw_put(w, b, 2);
    pkw_put(w, str, n);
}
static void pkw_item(pkw *w) {
    if (w->depth > 0) w->items[w->depth - 1]++;
}
static void pkw_dict(pkw *w) { /* then key, value pairs, then pkw_end_dict */
    pkw_item(w);
    pkw_op(w, '}');
    pkw_op(w, '(');
}
static void pkw_end_dict(pkw *w) { pkw_op(w, 'u'); }
static void pkw_key_int(pkw *w, const char *k, int64_t v) {
    pkw_str(w, k);
    pkw_int(w, v);
}
static void pkw_key_str(pkw *w, const char *k, const char *v) {
    pkw_str(w, k);
    pkw_str(w, v);
}
static void pkw_list(pkw *w) {
    pkw_item(w);
    pkw_op(w, ']');
    pkw_op(w, '(');
    w->items[w->depth++] = 0;
}
static void pkw_end_list(pkw *w) {
    pkw_op(w, 'e');
    w->depth--;
}
/* a list item: APPENDS every 1,000 items, as Python's pickler batches them */
static void pkw_next(pkw *w) {
    if (w->depth > 0 && w->items[w->depth - 1] >= 1000) {
        pkw_op(w, 'e');
        pkw_op(w, '(');
        w->items[w->depth - 1] = 0;
    }
}
static void pkw_frames(pkw *w, const char *file, int line, const char *fn) {
    pkw_str(w, "frames");
    pkw_list(w);
    if (file) {
        pkw_dict(w);
        pkw_key_str(w, "filename", file);
        pkw_key_int(w, "line", line);
        pkw_key_str(w, "name", fn);
        pkw_end_dict(w);
    }
    pkw_end_list(w);
}
/* {"segments": [ ... (pkw_segment), "device_traces": [[ ... (pkw_event) ]]} */
static void pkw_begin(pkw *w) {
    memset(w, 0, sizeof *w);
    unsigned char h[2] = {0x80, 4};
    pkw_put(w, h, 2);
    pkw_dict(w);
    pkw_str(w, "segments");
    pkw_list(w);
}
/* one segment of one active block and, after it, one inactive block */
static void pkw_segment(pkw *w, int device, uint64_t addr, int64_t total, int64_t live) {
    pkw_next(w);
    pkw_dict(w);
    pkw_key_int(w, "device", device);
    pkw_key_int(w, "address", (int64_t)addr);
    pkw_key_int(w, "total_size", total);
    pkw_key_int(w, "stream", 0);
    pkw_str(w, "blocks");
    pkw_list(w);
    for (int b = 0; b < 2; b++) {
        int64_t size = b ? total - live : live;
        if (size <= 0) continue;
        pkw_dict(w);
        pkw_key_int(w, "address", (int64_t)addr + (b ? live : 0));
        pkw_key_int(w, "size", size);
        pkw_key_int(w, "requested_size", b ? 0 : size);
        pkw_key_str(w, "state", b ? "inactive" : "active_allocated");
        pkw_frames(w, b ? NULL : "/home/u/train.py", 10, "main");
        pkw_end_dict(w);
    }
    pkw_end_list(w);
    pkw_end_dict(w);
}
static void pkw_traces(pkw *w) { /* ends the segments, opens the first device's trace */
    pkw_end_list(w);
    pkw_str(w, "device_traces");
    pkw_list(w);
    pkw_list(w);
}
/* an event under the given frame (an optimizer's step: torch/optim/adam.py, "step") */
static void pkw_event_at(pkw *w, const char *action, uint64_t addr, int64_t size, int64_t time_us,
                         const char *file, int line, const char *fn) {
    pkw_next(w);
    pkw_dict(w);
    pkw_key_str(w, "action", action);
    pkw_key_int(w, "addr", (int64_t)addr);
    pkw_key_int(w, "size", size);
    pkw_key_int(w, "stream", 0);
    if (time_us != MP_MEM_NO_TIME) pkw_key_int(w, "time_us", time_us);
    pkw_frames(w, file, line, fn);
    pkw_end_dict(w);
}
static void pkw_event(pkw *w, const char *action, uint64_t addr, int64_t size, int64_t time_us) {
    pkw_event_at(w, action, addr, size, time_us, "/home/u/train.py", 10, "main");
}
static void pkw_event_in(pkw *w, const char *action, uint64_t addr, int64_t size, const char *file,
                         const char *fn) {
    pkw_event_at(w, action, addr, size, MP_MEM_NO_TIME, file, 20, fn);
}
static void pkw_next_device(pkw *w) {
    pkw_end_list(w);
    pkw_list(w);
}
static mp_snapshot *pkw_finish(pkw *w, const char *label) { /* ends the traces and the dict; analyses it */
    pkw_end_list(w);
    pkw_end_list(w);
    pkw_end_dict(w);
    pkw_op(w, '.');
    mp_snapshot *s = NULL;
    mp_status st = mp_snapshot_read_memory(w->p, w->n, label, &s);
    free(w->p);
    w->p = NULL;
    if (st) {
        mp_t_fail(__FILE__, __LINE__, "%s: %s", label, mp_last_error());
        return NULL;
    }
    mp_mem_opts o = {-1, 20, false};
    if (mp_snapshot_analyze(s, &o)) {
        mp_t_fail(__FILE__, __LINE__, "%s: analyze: %s", label, mp_last_error());
        mp_snapshot_free(s);
        return NULL;
    }
    return s;
}
static const mp_mem_finding *finding_of(const mp_mem_device *d, int kind) {
    for (int i = 0; i < d->nfindings; i++)
        if (d->findings[i].kind == kind) return &d->findings[i];
    return NULL;
}

/* The fragmentation finding says what is true at the end: split blocks,
 * none (a segment left, no live block in it), or no segment at all, never
 * "0 inactive block(s) (0 B)". Device 0 keeps its 20 MiB segment empty;
 * device 2 frees its only segment (device 1: an empty trace). */
static void t_fragmentation_end(void) {
    const uint64_t A0 = 0x7f0000000000ull, A2 = 0x7f2000000000ull;
    const int64_t MB = 1 << 20;
    pkw w;
    pkw_begin(&w);
    pkw_segment(&w, 0, A0, 20 * MB, 0);
    pkw_traces(&w);
    pkw_event(&w, "segment_alloc", A0, 20 * MB, 10);
    pkw_event(&w, "alloc", A0, 4 * MB, 20);
    pkw_event(&w, "free_completed", A0, 4 * MB, 30);
    pkw_next_device(&w);
    pkw_next_device(&w);
    pkw_event(&w, "segment_alloc", A2, 40 * MB, 10);
    pkw_event(&w, "alloc", A2, 30 * MB, 20);
    pkw_event(&w, "free_requested", A2, 30 * MB, 30);
    pkw_event(&w, "free_completed", A2, 30 * MB, 40);
    pkw_event(&w, "segment_free", A2, 40 * MB, 50);
    mp_snapshot *s = pkw_finish(&w, "frag_end.pickle");
    if (!s) return;
    T_EQ(s->ndev, 2);
    for (int i = 0; i < s->ndev; i++) {
        const mp_mem_finding *f = finding_of(&s->dev[i], MP_MF_FRAGMENTATION);
        T_CHECK(f != NULL);
        if (!f) continue;
        T_CHECK(!strstr(f->text, "0 inactive block(s)"));
        if (s->dev[i].device == 0)
            T_CHECK(strstr(f->text, "At the peak 16.00 MiB of the 20.00 MiB reserved is not in use (the caching "
                                    "allocator's cache and rounding). At the end no inactive block sits split inside "
                                    "a segment that holds live blocks.") != NULL);
        else
            T_CHECK(strstr(f->text, "At the peak 10.00 MiB of the 40.00 MiB reserved is not in use (the caching "
                                    "allocator's cache and rounding). By the end every segment is released (0 B "
                                    "reserved).") != NULL);
    }
    mp_snapshot_free(s);
    /* blocks split at the end keep their clause */
    s = load("tests/snapshots/v22_pending_free.pickle");
    if (!s) return;
    bool split = false;
    for (int i = 0; i < s->ndev; i++) {
        const mp_mem_finding *f = finding_of(&s->dev[i], MP_MF_FRAGMENTATION);
        if (f && s->dev[i].end_inactive_split_blocks > 0) split = strstr(f->text, "sit split inside segments") != NULL;
    }
    T_CHECK(split);
    mp_snapshot_free(s);
}

/* A report of s as text (json false) or JSON, malloc'd. */
static char *report_of(const mp_snapshot *s, bool json) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mp_mem_report_opts ro = {-1, 20, false, MP_MEM_CSV_HOLDERS, NULL};
    mp_status st = json ? mp_memory_write_json(s, &ro, f) : mp_memory_write_text(s, &ro, f);
    fclose(f);
    T_OK(st);
    return buf;
}

/* time_us running backwards: the span is unknown (null in the JSON, never
 * negative), with a replay warning naming the first event where the clock
 * went back; a clock that only stands still is a span. */
static void t_clock_backwards(void) {
    const uint64_t S = 0x7f0000000000ull;
    const int64_t MB = 1 << 20;
    static const int64_t times[3][5] = {{5000, 4000, 3000, 2000, 1000}, /* backwards from event 1 */
                                        {1000, 3000, 2000, 5000, 6000}, /* back once, at event 2: span 5 ms > 0 */
                                        {1000, 1000, 3000, 3000, 5000}};
    for (int c = 0; c < 3; c++) {
        pkw w;
        pkw_begin(&w);
        pkw_segment(&w, 0, S, 20 * MB, 4 * MB);
        pkw_traces(&w);
        pkw_event(&w, "alloc", S, 4 * MB, times[c][0]);
        pkw_event(&w, "alloc", S + 4 * MB, 8 * MB, times[c][1]);
        pkw_event(&w, "free_requested", S + 4 * MB, 8 * MB, times[c][2]);
        pkw_event(&w, "free_completed", S + 4 * MB, 8 * MB, times[c][3]);
        pkw_event(&w, "alloc", S + 12 * MB, 2 * MB, times[c][4]);
        mp_snapshot *s = pkw_finish(&w, "clock.pickle");
        if (!s) continue;
        const mp_mem_device *d = &s->dev[0];
        char *text = report_of(s, false), *json = report_of(s, true);
        T_CHECK(text && json);
        if (c < 2) {
            int64_t at = c == 0 ? 1 : 2;
            T_EQ(d->clock_back_ev, at);
            T_CHECK(mp_mem_span_us(d) == MP_MEM_NO_TIME);
            char want[200];
            snprintf(want, sizeof want, "span          unknown: time_us runs backwards at event %lld", (long long)at);
            T_CHECK(text && strstr(text, want));
            T_CHECK(json && strstr(json, "\"span_s\": null"));
            snprintf(want, sizeof want, "event %lld: time_us %lld is earlier than event %lld's %lld: the clock runs backwards",
                     (long long)at, (long long)times[c][at], (long long)at - 1, (long long)times[c][at - 1]);
            T_CHECK(d->nwarn == 1 && strstr(d->warnings[0], want));
            T_CHECK(text && strstr(text, want) && json && strstr(json, want));
            /* holders allocated after the peak's time have no age */
            T_CHECK(json && !strstr(json, "\"age_s\": -"));
        } else {
            T_EQ(d->clock_back_ev, -1);
            T_EQ(mp_mem_span_us(d), 4000);
            T_EQ(d->warn_count, 0);
            T_CHECK(text && strstr(text, "span          0.004 s recorded"));
            T_CHECK(json && strstr(json, "\"span_s\": 0.004"));
        }
        T_CHECK(text && !strstr(text, "span          -"));
        free(text);
        free(json);
        mp_snapshot_free(s);
    }
}

/* A trace of one event (old _record_memory_history(True)): the finding says
 * where the peak is, as the report does: after the event when it is an alloc
 * (peak_event 0), before it when it is a free (v20_one_entry, peak_event -1). */
/* The spike is judged against a step (1% of the median step's events), so
 * one pattern gets one verdict whether 2 or 30 steps were recorded. Each
 * step: 50 activations of 1 MiB made and freed in reverse (a forward and a
 * backward), a 64 MiB buffer at the turn living `life` events (1 MiB
 * scratch allocs and frees meanwhile), an optimizer step's alloc and free.
 * A buffer freed at the next event is a spike (1% of a 105-event step: 1
 * event); one living 30 events is not, at 2 or 30 steps (by 1% of the
 * trace's events it was at 30: 40 of 4,050). */
static void t_spike_per_step(void) {
    const uint64_t S = 0x7f0000000000ull, B = S + (256u << 20), O = B + (64u << 20);
    const int64_t MB = 1 << 20;
    for (int life = 1; life <= 30; life += 29)
        for (int steps = 2; steps <= 30; steps += 28) {
            pkw w;
            pkw_begin(&w);
            pkw_segment(&w, 0, S, 512 * MB, 0);
            pkw_traces(&w);
            for (int k = 0; k < steps; k++) {
                for (int i = 0; i < 50; i++) pkw_event(&w, "alloc", S + (uint64_t)i * MB, MB, MP_MEM_NO_TIME);
                /* the buffer, and `life` - 1 events of 1 MiB scratch before its free */
                pkw_event(&w, "alloc", B, 64 * MB, MP_MEM_NO_TIME);
                for (int i = 1; i < life; i++)
                    pkw_event(&w, i % 2 ? "alloc" : "free_completed", S + 200 * MB, MB, MP_MEM_NO_TIME);
                pkw_event(&w, "free_completed", B, 64 * MB, MP_MEM_NO_TIME);
                if (life % 2 == 0) pkw_event(&w, "free_completed", S + 200 * MB, MB, MP_MEM_NO_TIME);
                for (int i = 49; i >= 0; i--)
                    pkw_event(&w, "free_completed", S + (uint64_t)i * MB, MB, MP_MEM_NO_TIME);
                pkw_event_in(&w, "alloc", O, MB, "/usr/lib/python3/torch/optim/adam.py", "step");
                pkw_event_in(&w, "free_completed", O, MB, "/usr/lib/python3/torch/optim/adam.py", "step");
            }
            mp_snapshot *s = pkw_finish(&w, "spike.pickle");
            if (!s) continue;
            const mp_mem_device *d = &s->dev[0];
            T_EQ(d->nsteps, steps);
            const mp_mem_finding *f = finding_of(d, MP_MF_SPIKE);
            if ((f != NULL) != (life == 1))
                mp_t_fail(__FILE__, __LINE__, "a %d-event buffer over %d steps: %s", life, steps,
                          f ? f->text : "no spike finding");
            mp_snapshot_free(s);
        }
}

static void t_one_entry(void) {
    const uint64_t S = 0x7f0000000000ull;
    const int64_t MB = 1 << 20;
    pkw w;
    pkw_begin(&w);
    pkw_segment(&w, 0, S, 20 * MB, 10 * MB);
    pkw_traces(&w);
    pkw_event(&w, "alloc", S + 2 * MB, 8 * MB, 10);
    mp_snapshot *s = pkw_finish(&w, "one_alloc.pickle");
    if (!s) return;
    const mp_mem_device *d = &s->dev[0];
    T_EQ(d->peak_ev, 0);
    const mp_mem_finding *f = finding_of(d, MP_MF_ONE_ENTRY);
    T_CHECK(f && strstr(f->text, "The peak below is the state after that event."));
    mp_snapshot_free(s);
    s = load("tests/snapshots/v20_one_entry.pickle");
    if (!s) return;
    T_EQ(s->dev[0].peak_ev, -1);
    f = finding_of(&s->dev[0], MP_MF_ONE_ENTRY);
    T_CHECK(f && strstr(f->text, "The peak below is the state before that event."));
    mp_snapshot_free(s);
}


/* Append one gzip member of p[0..n) to out (at *len). */
static void gz_member(const unsigned char *p, size_t n, unsigned char *out, size_t cap, size_t *len) {
    z_stream z;
    memset(&z, 0, sizeof z);
    T_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (unsigned char *)p;
    z.avail_in = (uInt)n;
    z.next_out = out + *len;
    z.avail_out = (uInt)(cap - *len);
    T_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
    *len = cap - z.avail_out;
    deflateEnd(&z);
}

/* A gzip file of several members (`cat a.gz b.gz`, what appending with
 * gzip tools makes) is one stream, as zcat and Python's gzip read it; zero
 * bytes after the last member are padding (gzip(1) skips them). The
 * snapshot v22_train_adam cut in three members, read from memory and from a
 * file, reports what the plain file reports. */
static void t_pickle_gzip_members(void) {
    size_t plen = 0;
    unsigned char *plain = (unsigned char *)jr_slurp("tests/snapshots/v22_train_adam.pickle", &plen);
    T_CHECK(plain != NULL && plen > 100);
    if (!plain) return;
    size_t cap = plen + 4096, len = 0;
    unsigned char *gz = malloc(cap);
    size_t a = plen / 3, b = 2 * plen / 3; /* cuts inside opcodes */
    gz_member(plain, a, gz, cap, &len);
    gz_member(plain + a, b - a, gz, cap, &len);
    gz_member(plain + b, plen - b, gz, cap, &len);
    memset(gz + len, 0, 512); /* padding, as a tape block leaves */
    len += 512;
    mp_snapshot *ref = load("tests/snapshots/v22_train_adam.pickle");
    mp_snapshot *m = NULL;
    mp_status st = mp_snapshot_read_memory(gz, len, "members.pickle.gz", &m);
    if (st) mp_t_fail(__FILE__, __LINE__, "in memory: %s", mp_last_error());
    char path[] = "/tmp/modelprof-gzmembers-XXXXXX";
    int fd = mkstemp(path);
    T_CHECK(fd >= 0);
    T_EQ((long)write(fd, gz, len), (long)len);
    close(fd);
    mp_snapshot *f = load(path);
    unlink(path);
    if (ref && m && f) {
        mp_mem_opts o = {-1, 20, false};
        T_OK(mp_snapshot_analyze(m, &o));
        T_CHECK(f->gz && m->gz);   /* from memory as from a file: gzip, the pickle's bytes */
        T_EQ_U64(f->bytes, plen);
        T_EQ_U64(m->bytes, plen);
        T_EQ(f->ndev, ref->ndev);
        T_EQ_U64(f->nev, ref->nev);
        T_EQ_U64(m->nev, ref->nev);
        T_EQ(f->dev[0].peak_requested, ref->dev[0].peak_requested);
        T_EQ(f->dev[0].peak_ev, ref->dev[0].peak_ev);
        T_EQ(m->dev[0].end_requested, ref->dev[0].end_requested);
    }
    mp_snapshot_free(m);
    mp_snapshot_free(f);
    mp_snapshot_free(ref);
    /* a second member cut short is still a truncated stream */
    size_t short_len = 0;
    gz_member(plain, a, gz, cap, &short_len);
    size_t whole = short_len;
    gz_member(plain + a, plen - a, gz, cap, &whole);
    mpk *k = mpk_new();
    mpk_val root;
    T_EQ(mpk_run_memory(k, gz, short_len + (whole - short_len) / 2, "cut.pickle.gz", &root), MP_ERR_FORMAT);
    T_CHECK(strstr(mp_last_error(), "truncated") != NULL);
    mpk_free(k);
    free(gz);
    free(plain);
}

#define HUGEPANDA "tests/memory/HugePandaCoder_octree-nca-groupeq__mem_snapshots_cuda_single_step__55ff68f.pickle.gz"

/* Five events, by hand (docs/MEMORY.md "Worked example"):
 *   0 segment_alloc 20 MiB     reserved 2 MiB -> 22 MiB (the start: 22 MiB final - 20 MiB net)
 *   1 alloc 6,553,600 at A     live 186,240 -> 6,739,840
 *   2 alloc 6,553,600 at B     live -> 13,293,440 (the peak)
 *   3 free_requested A         (A's first free: its free_event)
 *   4 free_completed A         live -> 6,739,840 (the end)
 * 186,240: the 75 active blocks of the final segments the trace never
 * allocates (live before recording); B is the 76th. */
static void t_hugepanda(void) {
    mp_snapshot *s = load(HUGEPANDA);
    if (!s) return;
    T_CHECK(s->gz);
    T_EQ(s->ndev, 1);
    mp_mem_device *d = &s->dev[0];
    T_EQ(d->nev, 5);
    T_EQ(d->action_count[MP_MA_ALLOC], 2);
    T_EQ(d->action_count[MP_MA_SEGMENT_ALLOC], 1);
    T_EQ(d->start_requested, 186240);
    T_EQ(d->start_from_blocks, 186240);
    T_EQ(d->peak_requested, 186240 + 2 * 6553600);
    T_EQ(d->peak_ev, 2);
    T_EQ(d->start_reserved, 2097152);
    T_EQ(d->peak_reserved, 23068672);
    T_EQ(d->peak_reserved_ev, 0);
    T_EQ(d->end_requested, 6739840);
    T_EQ(d->replay_end_requested, 6739840);
    T_EQ(d->end_reserved, 23068672);
    T_EQ(d->nlive, 77); /* 2 from the trace, 75 from before */
    T_EQ(d->live[0].size, 6553600);
    T_EQ(d->live[0].alloc_ev, 1);
    T_EQ(d->live[0].free_ev, 3); /* its first free: the free_requested */
    T_EQ(d->live[1].alloc_ev, 2);
    int64_t sum = 0;
    for (int c = 0; c < MP_MC_COUNT; c++) sum += d->categories[c];
    T_EQ(sum, d->peak_requested);
    /* the first user frame: the notebook cell's line */
    uint32_t fr = mp_mem_user_frame(s, d->live[0].stack);
    T_CHECK(fr != UINT32_MAX);
    char b[256];
    T_CHECK(strstr(mp_mem_frame_text(s, fr, b, sizeof b), "1784485557.py:2") != NULL);
    mp_snapshot_free(s);
}

static bool file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* Each snapshot with a reference: every field of the reference equals
 * the replay's; the refused ones exit 2. */
static void t_references(void) {
    DIR *dir = opendir("tests/snapshots");
    T_CHECK(dir != NULL);
    if (!dir) return;
    struct dirent *e;
    int checked = 0;
    while ((e = readdir(dir))) {
        size_t l = strlen(e->d_name);
        if (l < 9 || strcmp(e->d_name + l - 9, ".ref.json") != 0) continue;
        char base[512], path[600], ref[600];
        snprintf(base, sizeof base, "%.*s", (int)(l - 9), e->d_name);
        snprintf(ref, sizeof ref, "tests/snapshots/%s", e->d_name);
        const char *cands[] = {"tests/snapshots/%s.pickle", "tests/snapshots/%s.pickle.gz", "tests/memory/%s.pickle.gz"};
        path[0] = 0;
        for (size_t c = 0; c < MP_ARRAY_LEN(cands); c++) {
            char p[600];
            snprintf(p, sizeof p, cands[c], base);
            if (file_exists(p)) {
                snprintf(path, sizeof path, "%s", p);
                break;
            }
        }
        if (!path[0]) continue;
        size_t len;
        char *text = jr_slurp(ref, &len);
        jr *j = text ? jr_parse(text, len, NULL) : NULL;
        free(text);
        T_CHECK(j != NULL);
        if (!j) continue;
        mp_snapshot *s = NULL;
        mp_status st = mp_snapshot_read(path, &s);
        if (!st) {
            mp_mem_opts o = {-1, 20, false};
            st = mp_snapshot_analyze(s, &o);
        }
        const jr *ex = jr_get(j, "exit");
        if (ex) {
            if (st != MP_ERR_FORMAT) mp_t_fail(__FILE__, __LINE__, "%s: read, the reference refuses it", path);
        } else if (st) {
            mp_t_fail(__FILE__, __LINE__, "%s: %s", path, mp_last_error());
        } else {
            const jr *devs = jr_get(j, "devices");
            if (jr_len(devs) != s->ndev) mp_t_fail(__FILE__, __LINE__, "%s: %d devices, reference %d", path, s->ndev, jr_len(devs));
            for (int i = 0; i < s->ndev && i < jr_len(devs); i++) {
                const jr *r = jr_at(devs, i);
                const mp_mem_device *d = &s->dev[i];
                struct {
                    const char *k;
                    int64_t v;
                } f[] = {{"device", d->device},
                         {"peak_requested_bytes", d->peak_requested},
                         {"peak_event", d->peak_ev},
                         {"peak_reserved_bytes", d->peak_reserved},
                         {"end_requested_bytes", d->end_requested},
                         {"end_allocated_bytes", d->end_allocated},
                         {"end_reserved_bytes", d->end_reserved}};
                for (size_t q = 0; q < MP_ARRAY_LEN(f); q++) {
                    const jr *x = jr_get(r, f[q].k);
                    if (!x || x->i != f[q].v)
                        mp_t_fail(__FILE__, __LINE__, "%s device %d: %s %lld, reference %lld", path, d->device, f[q].k,
                                  (long long)f[q].v, x ? (long long)x->i : -999LL);
                }
                const jr *evs = jr_get(r, "events");
                int nact = 0;
                for (const jr *m = evs ? evs->child : NULL; m; m = m->next) {
                    nact++;
                    int64_t have = 0;
                    for (int a = 0; a < s->nactions; a++)
                        if (strcmp(mp_mem_action_name(s, a), m->key) == 0) have = d->action_count[a];
                    if (have != m->i) mp_t_fail(__FILE__, __LINE__, "%s: %s %lld, reference %lld", path, m->key, (long long)have, (long long)m->i);
                }
                int have_act = 0;
                for (int a = 0; a < s->nactions; a++) have_act += d->action_count[a] != 0;
                T_EQ(have_act, nact);
                const jr *top = jr_get(r, "top10_at_peak");
                for (int t = 0; t < jr_len(top); t++)
                    if (t >= (int)d->nlive || d->live[t].size != jr_at(top, t)->i)
                        mp_t_fail(__FILE__, __LINE__, "%s: top %d differs", path, t);
                int64_t sum = 0;
                for (int c = 0; c < MP_MC_COUNT; c++) sum += d->categories[c];
                T_EQ(sum, d->peak_requested);
            }
            checked++;
        }
        jr_free(j);
        mp_snapshot_free(s);
    }
    closedir(dir);
    T_CHECK(checked >= 12);
}

/* Hostile files: each is refused with a message, nothing runs. */
static void t_hostile(void) {
    unlink("/tmp/modelprof-hostile-ran");
    DIR *dir = opendir("tests/snapshots/hostile");
    T_CHECK(dir != NULL);
    if (!dir) return;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(dir))) {
        if (!strstr(e->d_name, ".pickle")) continue;
        char p[600];
        snprintf(p, sizeof p, "tests/snapshots/hostile/%s", e->d_name);
        mp_snapshot *s = NULL;
        mp_status st = mp_snapshot_read(p, &s);
        if (!st) {
            mp_mem_opts o = {-1, 20, false};
            st = mp_snapshot_analyze(s, &o);
        }
        if (st != MP_ERR_FORMAT && st != MP_ERR_LIMIT)
            mp_t_fail(__FILE__, __LINE__, "%s: status %d (%s)", p, (int)st, st ? mp_last_error() : "read");
        else if (!strstr(mp_last_error(), "hostile/"))
            mp_t_fail(__FILE__, __LINE__, "%s: the message does not name the file: %s", p, mp_last_error());
        mp_snapshot_free(s);
        n++;
    }
    closedir(dir);
    T_CHECK(n >= 40);
    T_CHECK(!file_exists("/tmp/modelprof-hostile-ran"));
}

/* Categories at the peak against the generator's own labels
 * (tests/snapshots/NAME.truth.json, MEMFIX's tools/make_snapshots.py):
 * equal on every snapshot but the documented ones (docs/MEMORY.md
 * "Categories": a final block without frames is unknown, not guessed; an
 * allocation freed on another stream before any forward read it, or one
 * a forward would have freed had it not run out of memory, cannot be told
 * from the file). Always: the categories sum to the peak. */
static void t_categories(void) {
    static const char *const differ[] = {"v113_bare_list", "v20_one_entry", "v22_bare_list", "v22_ring_truncated",
                                         "v22_zero_events", "v22_pending_free", "v25_multidev_oom"};
    DIR *dir = opendir("tests/snapshots");
    T_CHECK(dir != NULL);
    if (!dir) return;
    struct dirent *e;
    int equal = 0, checked = 0;
    while ((e = readdir(dir))) {
        size_t l = strlen(e->d_name);
        if (l < 11 || strcmp(e->d_name + l - 11, ".truth.json") != 0) continue;
        char base[300], path[600], tp[600];
        snprintf(base, sizeof base, "%.*s", (int)(l - 11), e->d_name);
        snprintf(tp, sizeof tp, "tests/snapshots/%s", e->d_name);
        snprintf(path, sizeof path, "tests/snapshots/%s.pickle", base);
        if (!file_exists(path)) snprintf(path, sizeof path, "tests/snapshots/%s.pickle.gz", base);
        if (!file_exists(path)) continue;
        size_t len;
        char *text = jr_slurp(tp, &len);
        jr *j = text ? jr_parse(text, len, NULL) : NULL;
        free(text);
        mp_snapshot *s = load(path);
        if (!j || !s) {
            jr_free(j);
            mp_snapshot_free(s);
            continue;
        }
        bool expect_equal = true;
        for (size_t q = 0; q < MP_ARRAY_LEN(differ); q++) expect_equal &= strcmp(base, differ[q]) != 0;
        bool all = true;
        const jr *devs = jr_get(j, "devices");
        for (int i = 0; i < s->ndev && i < jr_len(devs); i++) {
            const mp_mem_device *d = &s->dev[i];
            const jr *cats = jr_get(jr_at(devs, i), "categories_at_peak");
            int64_t sum = 0;
            for (int c = 0; c < MP_MC_COUNT; c++) {
                const jr *x = jr_get(cats, mp_mem_category_names[c]);
                if ((x ? x->i : 0) != d->categories[c]) all = false;
                sum += d->categories[c];
            }
            T_EQ(sum, d->peak_requested);
        }
        if (expect_equal && !all) mp_t_fail(__FILE__, __LINE__, "%s: categories differ from the truth", base);
        equal += all;
        checked++;
        jr_free(j);
        mp_snapshot_free(s);
    }
    closedir(dir);
    T_CHECK(checked >= 15);
    T_CHECK(equal >= checked - (int)MP_ARRAY_LEN(differ));
    /* the Adam loop (the peak in the first backward): the parameters, the
     * one gradient made so far, Adam's two states */
    mp_snapshot *s = load("tests/snapshots/v22_train_adam.pickle");
    if (!s) return;
    const mp_mem_device *d = &s->dev[0];
    int64_t layer = 1048576 + 2048;
    T_EQ(d->categories[MP_MC_PARAMETER], 4 * layer);
    T_EQ(d->categories[MP_MC_GRADIENT], layer);
    T_EQ(d->categories[MP_MC_OPTIMIZER_STATE], 8 * layer);
    T_EQ(d->categories[MP_MC_UNKNOWN], 0);
    T_EQ(d->nsteps, 4);
    mp_snapshot_free(s);
    s = load("tests/snapshots/v22_no_frames.pickle");
    if (!s) return;
    T_EQ(s->dev[0].categories[MP_MC_UNKNOWN], s->dev[0].peak_requested);
    mp_snapshot_free(s);
}

static bool has_finding(const mp_mem_device *d, int kind) {
    for (int i = 0; i < d->nfindings; i++)
        if (d->findings[i].kind == kind) return true;
    return false;
}

static void t_findings(void) {
    mp_snapshot *s = load("tests/snapshots/v25_leak_churn.pickle.gz");
    if (!s) return;
    const mp_mem_device *d = &s->dev[0];
    T_EQ(d->nsteps, 5);
    T_CHECK(has_finding(d, MP_MF_LEAK));
    T_CHECK(has_finding(d, MP_MF_CHURN));
    T_CHECK(has_finding(d, MP_MF_GRAD_ALIVE));
    for (int i = 0; i < d->nfindings; i++)
        if (d->findings[i].kind == MP_MF_LEAK)
            T_CHECK(strstr(d->findings[i].text, "12.00 MiB in 4 allocation(s) at /home/user/proj/train.py:66 (main).") != NULL);
    mp_snapshot_free(s);
    /* past 4,096 allocations live at the peak the leak still names its
     * site (the search gave up after one site: "no allocation live") */
    s = load("tests/snapshots/v25_many_live_leak.pickle.gz");
    if (!s) return;
    d = &s->dev[0];
    T_CHECK(d->nlive > 4096);
    bool named = false;
    for (int i = 0; i < d->nfindings; i++)
        if (d->findings[i].kind == MP_MF_LEAK)
            named = strstr(d->findings[i].text, "4.00 MiB in 4 allocation(s) at /home/user/proj/train.py:66 (main).") != NULL;
    T_CHECK(named);
    mp_snapshot_free(s);
    s = load("tests/snapshots/v25_leak_churn.pickle.gz");
    if (!s) return;
    d = &s->dev[0];
    /* module paths from the events' user_metadata */
    int with_module = 0;
    for (uint32_t i = 0; i < d->nlive; i++)
        if (d->live[i].category == MP_MC_PARAMETER && mp_mem_meta(s, d->live[i].meta) &&
            strncmp(mp_mem_meta(s, d->live[i].meta), "model.layers.", 13) == 0)
            with_module++;
    T_EQ(with_module, 8);
    mp_snapshot_free(s);
    /* module paths from 'nn.Module: PATH' ranges in external_annotations */
    s = load("tests/snapshots/v25_module_annotations.pickle");
    if (!s) return;
    int annotated = 0;
    for (uint32_t i = 0; i < s->dev[0].nlive; i++) {
        const char *m = mp_mem_meta(s, s->dev[0].live[i].meta);
        annotated += m && strncmp(m, "model", 5) == 0;
    }
    T_CHECK(annotated > 0);
    mp_snapshot_free(s);
    s = load("tests/snapshots/v22_train_adam.pickle");
    if (!s) return;
    T_CHECK(!has_finding(&s->dev[0], MP_MF_LEAK));
    T_CHECK(!has_finding(&s->dev[0], MP_MF_GRAD_ALIVE));
    mp_snapshot_free(s);
    s = load("tests/snapshots/v25_multidev_oom.pickle");
    if (!s) return;
    T_EQ(s->ndev, 2);
    T_EQ(s->dev[1].device, 2);
    T_CHECK(has_finding(&s->dev[1], MP_MF_OOM));
    for (int i = 0; i < s->dev[1].nfindings; i++)
        if (s->dev[1].findings[i].kind == MP_MF_OOM) {
            T_CHECK(strstr(s->dev[1].findings[i].text, "14.00 MiB free") != NULL);
            /* ten 16 MiB holders tie: the earliest allocated first, as in
             * the peak's top list, not the address map's order */
            T_CHECK(strstr(s->dev[1].findings[i].text,
                           "Largest holders when it failed: 16.00 MiB at /home/user/proj/train.py:57 (main); 16.00 MiB "
                           "at /home/user/proj/model.py:30 (forward); 16.00 MiB at /home/user/proj/model.py:31 "
                           "(forward).") != NULL);
        }
    mp_snapshot_free(s);
    s = load("tests/snapshots/v20_one_entry.pickle");
    if (!s) return;
    T_CHECK(has_finding(&s->dev[0], MP_MF_ONE_ENTRY));
    mp_snapshot_free(s);
}

static void t_nothing(void) {
    mp_snapshot *s = NULL;
    T_EQ(mp_snapshot_read("tests/snapshots/recorded_nothing.pickle", &s), MP_ERR_FORMAT);
    T_CHECK(strstr(mp_last_error(), "recorded nothing") && strstr(mp_last_error(), "_record_memory_history"));
    T_CHECK(s == NULL);
}

static void t_command(void) {
    const char *json[] = {"memory", "--format", "json", "--stack", "full", "tests/snapshots/v25_multidev_oom.pickle", NULL};
    t_cli r = t_cli_run(json, 60, 0);
    T_EQ(r.code, 0);
    T_CHECK(r.out && strstr(r.out, "\"peak_requested_bytes\"") && strstr(r.out, "\"categories_at_peak\""));
    t_cli_free(&r);
    const char *dev[] = {"memory", "--device", "2", "tests/snapshots/v25_multidev_oom.pickle", NULL};
    r = t_cli_run(dev, 60, 0);
    T_EQ(r.code, 0);
    T_CHECK(r.out && strstr(r.out, "Device 2") && !strstr(r.out, "Device 0"));
    t_cli_free(&r);
    const char *nodev[] = {"memory", "--device", "5", "tests/snapshots/v25_multidev_oom.pickle", NULL};
    r = t_cli_run(nodev, 60, 0);
    T_EQ(r.code, 1);
    T_CHECK(r.err && strstr(r.err, "its devices: ") != NULL);
    t_cli_free(&r);
    /* an OOM after the peak: its holders are those live when it failed,
     * the 6 GiB made since, not the 10 GiB temporary freed before */
    const char *oom[] = {"memory", "tests/snapshots/v25_oom_after_peak.pickle", NULL};
    r = t_cli_run(oom, 60, 0);
    T_EQ(r.code, 0);
    T_CHECK(r.out && strstr(r.out, "Largest holders when it failed: 30.00 GiB at /home/u/proj/model.py:20 (__init__); "
                                   "12.00 GiB at /home/u/proj/model.py:30 (forward); 6.00 GiB at "
                                   "/home/u/proj/model.py:32 (forward).") != NULL);
    T_CHECK(r.out && !strstr(r.out, "model.py:31 (forward)."));
    t_cli_free(&r);
    /* inference (no backward, no optimizer step with frames anywhere): a
     * frameless allocation after the forward is unknown, not a gradient,
     * and the user's post-processing is not kept for a backward */
    const char *inf[] = {"memory", "tests/snapshots/v25_inference_frameless.pickle", NULL};
    r = t_cli_run(inf, 60, 0);
    T_EQ(r.code, 0);
    T_CHECK(r.out && strstr(r.out, "unknown              5.00 MiB") && !strstr(r.out, "gradient ") &&
            strstr(r.out, "other                  1000 B"));
    t_cli_free(&r);
    /* recorded on Windows: torch's frames and CPython's ...\Lib\ are not the
     * user's, Module.to makes a parameter, as on Linux */
    const char *win[] = {"memory", "tests/snapshots/v25_windows_paths.pickle", NULL};
    r = t_cli_run(win, 60, 0);
    T_EQ(r.code, 0);
    T_CHECK(r.out && strstr(r.out, "1.00 MiB      0.000  parameter        C:\\Users\\u\\proj\\train.py:41 (main)") &&
            strstr(r.out, "2.00 MiB      0.000  activation       C:\\Users\\u\\proj\\model.py:30 (forward)"));
    t_cli_free(&r);
    /* segments expandable already: no advice to make them so */
    const char *exp[] = {"memory", "tests/snapshots/v25_expandable.pickle", NULL};
    r = t_cli_run(exp, 60, 0);
    T_EQ(r.code, 0);
    T_CHECK(r.out && strstr(r.out, "expandable already") && !strstr(r.out, "PYTORCH_CUDA_ALLOC_CONF=expandable"));
    t_cli_free(&r);
    const char *bad[] = {"memory", "tests/snapshots/hostile/global_reduce.pickle", NULL};
    r = t_cli_run(bad, 60, 0);
    T_EQ(r.code, 2);
    T_CHECK(r.err && strstr(r.err, "GLOBAL") && strstr(r.err, "byte offset"));
    t_cli_free(&r);
    const char *flag[] = {"memory", "--format", "xml", HUGEPANDA, NULL};
    r = t_cli_run(flag, 60, 0);
    T_EQ(r.code, 1);
    t_cli_free(&r);
    static const char *tables[] = {"holders", "sites", "events"};
    for (int i = 0; i < 3; i++) {
        const char *csv[] = {"memory", "--format", "csv", "--csv-table", tables[i], HUGEPANDA, NULL};
        r = t_cli_run(csv, 60, 0);
        T_EQ(r.code, 0);
        int lines = 0, crlf = 0;
        for (const char *p = r.out; p && *p; p++) lines += *p == '\n', crlf += p[0] == '\r' && p[1] == '\n';
        T_EQ(lines, i == 0 ? 78 : i == 1 ? 4 : 6);
        T_EQ(crlf, lines);   /* RFC 4180, as the other CSV tables */
        t_cli_free(&r);
    }
    /* an unknown block size is an empty field, as the JSON's null (not -1) */
    const char *jas[] = {"memory", "--format", "csv", "--csv-table", "holders",
                         "tests/memory/JasperSolt_EoR_NN__snapshot__6720e24.pickle.gz", NULL};
    r = t_cli_run(jas, 60, 0);
    T_EQ(r.code, 0);
    int empty = 0, negative = 0;
    for (const char *p = r.out; p && *p;) {
        const char *c = p;
        for (int f = 0; f < 3 && c; f++) c = strchr(c, ','), c = c ? c + 1 : NULL;
        if (c && *c == ',') empty++;
        if (c && c[0] == '-' && c[1] == '1') negative++;
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    T_CHECK(empty > 0);
    T_EQ(negative, 0);
    t_cli_free(&r);
}

/* A frame named "</script><script>...<!--": the HTML page's data blocks
 * hold their JSON whole, every '<' in them escaped, so the page cannot end
 * a block early (it rendered blank). */
static void t_html_markup(void) {
    const char *h[] = {"memory", "--format", "html", "tests/snapshots/markup_names.pickle", NULL};
    t_cli r = t_cli_run(h, 60, 0);
    T_EQ(r.code, 0);
    int blocks = 0;
    for (const char *p = r.out; p && (p = strstr(p, "type=\"application/json\"")) != NULL; blocks++) {
        const char *start = strchr(p, '>'), *end = start ? strstr(start, "</script>") : NULL;
        T_CHECK(start && end);
        if (!start || !end) break;
        T_CHECK(memchr(start + 1, '<', (size_t)(end - start - 1)) == NULL);
        p = end;
    }
    T_CHECK(blocks >= 1);
    T_CHECK(r.out && strstr(r.out, "\\u003c/script>\\u003cscript>alert") != NULL);
    t_cli_free(&r);
}

static int count_of(const char *text, const char *what) {
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, what)) != NULL; p += strlen(what)) n++;
    return n;
}
static int lines_of(const char *text) { return count_of(text, "\n"); }

/* --top K: the rows of every table in every format when given (-1 all);
 * not given, each format's own default (text and JSON 20, CSV all, HTML 50).
 * v25_many_live_leak holds 4,000+ allocations at the peak. */
static void t_top(void) {
    const char *snap = "tests/snapshots/v25_many_live_leak.pickle.gz";
    mp_snapshot *s = load(snap);
    if (!s) return;
    const int nlive = (int)s->dev[0].nlive, nsites = (int)s->dev[0].nsites, nev = (int)s->dev[0].nev;
    mp_snapshot_free(s);
    T_CHECK(nlive > 50 && nev > 50);
    static const struct {
        const char *fmt, *table, *top, *count; /* count: "lines" (CSV rows + header) or a JSON key per row */
        int rows;                               /* -1 nlive, -2 nsites, -3 nev */
    } cases[] = {
        {"csv", "holders", NULL, "lines", -1},   {"csv", "holders", "3", "lines", 3},
        {"csv", "holders", "-1", "lines", -1},   {"csv", "sites", "1", "lines", 1},
        {"csv", "sites", NULL, "lines", -2},     {"csv", "events", NULL, "lines", -3},
        {"csv", "events", "3", "lines", 3},      {"html", NULL, NULL, "\"origin\"", 50},
        {"html", NULL, "5", "\"origin\"", 5},    {"html", NULL, "-1", "\"origin\"", -1},
        {"html", NULL, "70", "\"origin\"", 70},  {"json", NULL, NULL, "\"origin\"", 20},
        {"json", NULL, "5", "\"origin\"", 5},
    };
    for (size_t c = 0; c < MP_ARRAY_LEN(cases); c++) {
        const char *args[12];
        int n = 0;
        args[n++] = "memory", args[n++] = "--format", args[n++] = cases[c].fmt;
        if (cases[c].table) args[n++] = "--csv-table", args[n++] = cases[c].table;
        if (cases[c].top) args[n++] = "--top", args[n++] = cases[c].top;
        args[n++] = snap, args[n] = NULL;
        t_cli r = t_cli_run(args, 60, 0);
        T_EQ(r.code, 0);
        int want = cases[c].rows == -1 ? nlive : cases[c].rows == -2 ? nsites : cases[c].rows == -3 ? nev : cases[c].rows;
        int got = !r.out ? -1 : strcmp(cases[c].count, "lines") == 0 ? lines_of(r.out) - 1 : count_of(r.out, cases[c].count);
        if (got != want)
            mp_t_fail(__FILE__, __LINE__, "--format %s %s --top %s: %d rows, want %d", cases[c].fmt,
                      cases[c].table ? cases[c].table : "", cases[c].top ? cases[c].top : "(none)", got, want);
        t_cli_free(&r);
    }
    /* the library's default is each format's own too; a top given is honoured */
    mp_memory_options o;
    T_OK(mp_memory_options_default(&o));
    T_EQ(o.top, MP_MEMORY_TOP_DEFAULT);
    o.format = MP_FORMAT_CSV;
    char *out = NULL;
    T_OK(mp_memory_report_file(snap, &o, &out));
    T_EQ(out ? lines_of(out) - 1 : -1, nlive);
    mp_free(out);
    o.top = 3;
    T_OK(mp_memory_report_file(snap, &o, &out));
    T_EQ(out ? lines_of(out) - 1 : -1, 3);
    mp_free(out);
    o.top = -3;
    T_EQ(mp_memory_report_file(snap, &o, &out), MP_ERR_USAGE);
}

/* memory diff: a snapshot against itself is all zero; against another,
 * the deltas are B - A and the sites come largest change first. */
static void t_diff(void) {
    const char *self[] = {"memory", "diff", "--format", "json", "tests/snapshots/v22_train_adam.pickle",
                          "tests/snapshots/v22_train_adam.pickle", NULL};
    t_cli r = t_cli_run(self, 60, 0);
    T_EQ(r.code, 0);
    jr *j = r.out ? jr_parse(r.out, r.out_len, NULL) : NULL;
    T_CHECK(j != NULL);
    const jr *d0 = j ? jr_at(jr_path(j, "diff.devices"), 0) : NULL;
    T_CHECK(d0 && jr_get(d0, "delta_bytes")->i == 0 && jr_get(d0, "a_peak_requested_bytes")->i == 34637828); /* its .ref.json */
    for (const jr *s = d0 ? jr_get(d0, "sites")->child : NULL; s; s = s->next) T_EQ(jr_get(s, "delta_bytes")->i, 0);
    jr_free(j);
    t_cli_free(&r);
    const char *two[] = {"memory", "diff", "--format", "json", "tests/snapshots/v22_train_adam.pickle",
                         "tests/snapshots/v25_leak_churn.pickle.gz", NULL};
    r = t_cli_run(two, 60, 0);
    T_EQ(r.code, 0);
    j = r.out ? jr_parse(r.out, r.out_len, NULL) : NULL;
    d0 = j ? jr_at(jr_path(j, "diff.devices"), 0) : NULL;
    T_CHECK(d0 != NULL);
    if (d0) {
        T_EQ(jr_get(d0, "delta_bytes")->i, jr_get(d0, "b_peak_requested_bytes")->i - jr_get(d0, "a_peak_requested_bytes")->i);
        const jr *other = jr_path(d0, "categories.other");
        T_EQ(jr_get(other, "delta")->i, 4 * 3145728); /* the leak: 4 x 3 MiB kept by train.py:66 at B's peak */
        const jr *first = jr_at(jr_get(d0, "sites"), 0);
        T_CHECK(strstr(jr_get(first, "site")->s, "train.py:66") != NULL);
    }
    jr_free(j);
    t_cli_free(&r);
}

/* Predicted against measured: the plan of the MLP the Adam loop trains
 * (tests/memory/mlp4.onnx: 4 x Linear(512, 512), weights left out) puts
 * its weights and Adam states on the bytes measured at the peak, byte for
 * byte (fp32: 4 + 8 bytes a parameter); the peak falls in a backward, with
 * one layer's gradient made of the four the plan counts. */
static void t_predicted(void) {
    const char *args[] = {"memory", "--format", "json", "tests/snapshots/v22_train_adam.pickle", "--plan-model",
                          "tests/memory/mlp4.onnx", "--dim", "batch=64", "--precision", "fp32", NULL};
    t_cli r = t_cli_run(args, 60, 0);
    T_EQ(r.code, 0);
    jr *j = r.out ? jr_parse(r.out, r.out_len, NULL) : NULL;
    const jr *rows = j ? jr_path(jr_at(jr_path(j, "memory.devices"), 0), "predicted.rows") : NULL;
    T_EQ(jr_len(rows), 5);
    int exact = 0;
    for (int i = 0; i < jr_len(rows); i++) {
        const jr *row = jr_at(rows, i);
        const char *c = jr_get(row, "category")->s;
        if (strcmp(c, "parameter") == 0 || strcmp(c, "optimizer_state") == 0) {
            T_EQ(jr_get(row, "delta_bytes")->i, 0);
            T_CHECK(jr_get(row, "predicted_bytes")->i > 0);
            exact++;
        }
        if (strcmp(c, "gradient") == 0) { /* the peak falls in the backward: one layer's of four made */
            T_EQ(jr_get(row, "predicted_bytes")->i, 4 * (1048576 + 2048));
            T_EQ(jr_get(row, "measured_bytes")->i, 1048576 + 2048);
        }
    }
    T_EQ(exact, 2);
    jr_free(j);
    t_cli_free(&r);
    const char *bad[] = {"memory", "tests/snapshots/v22_train_adam.pickle", "--dim", "batch=64", NULL};
    r = t_cli_run(bad, 60, 0);
    T_EQ(r.code, 1);
    t_cli_free(&r);
}

/* Steps without frames: the JasperSolt snapshot with its stacks removed
 * repeats every 193 allocations; a forward's layers (silmont2000) repeat
 * too but keep their bytes, and are not steps. */
static void t_periodic(void) {
    mp_snapshot *s = load("tests/memory/JasperSolt_no_frames.pickle.gz");
    if (!s) return;
    const mp_mem_device *d = &s->dev[0];
    T_CHECK(!s->has_frames);
    T_EQ_STR(d->steps_from, "periodic allocations");
    T_EQ(d->nsteps, 9);
    for (int i = 1; i < d->nsteps; i++) {
        T_EQ(d->steps[i].start_bytes, 48748928); /* 46.49 MiB: the baseline */
        T_EQ(d->steps[i].end_bytes, 48748928);
        T_EQ(d->steps[i].peak_bytes, d->peak_requested);
    }
    mp_snapshot_free(s);
    s = load("tests/memory/silmont2000_assignment2-systems__memory_forward_bf16_128__d9ecf8b.pickle.gz");
    if (!s) return;
    T_EQ(s->dev[0].nsteps, 0);
    mp_snapshot_free(s);
}

MP_TESTS(memory) {
    {"pickle_values", t_pickle_values},
    {"pickle_refused", t_pickle_refused},
    {"pickle_hostile", t_pickle_hostile},
    {"pickle_gzip_members", t_pickle_gzip_members},
    {"hugepanda", t_hugepanda},
    {"references", t_references},
    {"hostile", t_hostile},
    {"categories", t_categories},
    {"findings", t_findings},
    {"one_entry", t_one_entry},
    {"spike_per_step", t_spike_per_step},
    {"fragmentation_end", t_fragmentation_end},
    {"clock_backwards", t_clock_backwards},
    {"nothing", t_nothing},
    {"cli", t_command},
    {"diff", t_diff},
    {"html_markup", t_html_markup},
    {"top", t_top},
    {"predicted", t_predicted},
    {"periodic", t_periodic},
};
MP_TESTS_END(memory)
