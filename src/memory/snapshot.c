/* Snapshot decoding (memory.h): the pickle's values turned into events,
 * segments, blocks, frames and stacks. Events become 32-byte records the
 * moment their list receives them (the pickle reader's item hook), so a
 * million-event trace never exists as a million dicts. */
#include "memory/memory.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    K_SEGMENTS, K_DEVICE_TRACES, K_ACTION, K_ADDR, K_SIZE, K_STREAM, K_TIME_US, K_FRAMES,
    K_DEVICE_FREE, K_NAME, K_FILENAME, K_LINE, K_DEVICE, K_ADDRESS, K_TOTAL_SIZE, K_BLOCKS,
    K_REQUESTED_SIZE, K_STATE, K_HISTORY, K_REAL_SIZE, K_IS_EXPANDABLE, K_USER_METADATA,
    K_EXTERNAL_ANNOTATIONS, K_STAGE,
    K_COUNT
};
static const char *const key_names[K_COUNT] = {
    "segments", "device_traces", "action", "addr", "size", "stream", "time_us", "frames",
    "device_free", "name", "filename", "line", "device", "address", "total_size", "blocks",
    "requested_size", "state", "history", "real_size", "is_expandable", "user_metadata",
    "external_annotations", "stage",
};

_Static_assert(sizeof(mp_mem_event) == 32, "an event record is 32 bytes (docs/MEMORY.md)");

static const char *const known_actions[MP_MA_OTHER] = {
#define MP__MA(e, s) s,
    MP_MEM_ACTIONS(MP__MA)
#undef MP__MA
};

const char *const mp_mem_category_names[MP_MC_COUNT] = {
#define MP__MC(e, s) s,
    MP_MEM_CATEGORIES(MP__MC)
#undef MP__MC
};

#define PK_EVENT PK_USER1
#define PK_STACK PK_USER2
#define PK_FRAME PK_USER3

const char *mp_mem_str(const mp_snapshot *s, int32_t id) { return mpk_str(s->k, id, NULL); }

const char *mp_mem_meta(const mp_snapshot *s, uint16_t meta) {
    if (!meta || meta >= s->nmeta) return NULL;
    return mp_mem_str(s, s->meta[meta]);
}

const char *mp_mem_action_name(const mp_snapshot *s, int action) {
    if (action < 0 || action >= s->nactions) return "?";
    return mp_mem_str(s, s->action_name[action]);
}

const uint32_t *mp_mem_stack(const mp_snapshot *s, uint32_t i, uint32_t *n) {
    if (i >= s->nstacks) {
        *n = 0;
        return NULL;
    }
    *n = (uint32_t)(s->stack_off[i + 1] - s->stack_off[i]);
    return *n ? s->stack_pool + s->stack_off[i] : NULL;
}

/* ---- frames and stacks, interned ---- */
static uint32_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    return (uint32_t)h;
}

static bool grow(void **p, uint32_t *cap, uint64_t need, size_t elem) {
    if (need <= *cap) return true;
    if (need > UINT32_MAX / 2) return false;
    uint32_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

static bool grow64(void **p, uint64_t *cap, uint64_t need, size_t elem) {
    if (need <= *cap) return true;
    uint64_t nc = *cap ? *cap : 256;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)(nc * elem));
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

/* Rehash an id table (ids + 1, 0 empty) to twice its size. */
static bool rehash(uint32_t **tab, uint32_t *cap, uint32_t n, uint32_t (*hash)(const mp_snapshot *, uint32_t),
                   const mp_snapshot *s) {
    uint32_t nc = *cap ? *cap * 2 : 1024;
    uint32_t *t = calloc(nc, sizeof *t);
    if (!t) return false;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t h = hash(s, i) & (nc - 1);
        while (t[h]) h = (h + 1) & (nc - 1);
        t[h] = i + 1;
    }
    free(*tab);
    *tab = t;
    *cap = nc;
    return true;
}

static uint32_t frame_hash_of(const mp_snapshot *s, uint32_t i) {
    const mp_mem_frame *f = &s->frames[i];
    return mix(((uint64_t)(uint32_t)f->name << 32 | (uint32_t)f->file) ^ (uint64_t)f->line * 0x9e3779b97f4a7c15u);
}

static uint32_t stack_hash_range(const uint32_t *p, uint64_t n) {
    uint64_t h = n * 0x9e3779b97f4a7c15u;
    for (uint64_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3u;
    return mix(h);
}

static uint32_t stack_hash_of(const mp_snapshot *s, uint32_t i) {
    return stack_hash_range(s->stack_pool + s->stack_off[i], s->stack_off[i + 1] - s->stack_off[i]);
}

static mp_status intern_frame(mp_snapshot *s, mp_mem_frame f, uint32_t *out) {
    if ((uint64_t)s->nframes * 2 + 2 >= s->frame_hcap &&
        !rehash(&s->frame_hash, &s->frame_hcap, s->nframes, frame_hash_of, s))
        return mp_error(MP_ERR_NOMEM, "%s: out of memory (frames)", s->path);
    if (!grow((void **)&s->frames, &s->frames_cap, (uint64_t)s->nframes + 1, sizeof *s->frames))
        return mp_error(MP_ERR_NOMEM, "%s: out of memory (frames)", s->path);
    s->frames[s->nframes] = f; /* probe with it in place */
    uint32_t h = frame_hash_of(s, s->nframes) & (s->frame_hcap - 1);
    while (s->frame_hash[h]) {
        const mp_mem_frame *g = &s->frames[s->frame_hash[h] - 1];
        if (g->name == f.name && g->file == f.file && g->line == f.line) {
            *out = s->frame_hash[h] - 1;
            return MP_OK;
        }
        h = (h + 1) & (s->frame_hcap - 1);
    }
    s->frame_hash[h] = s->nframes + 1;
    *out = s->nframes++;
    return MP_OK;
}

/* The frames now at the end of the pool (from `from`) as a stack id:
 * an equal stack already stored is reused (the new copy dropped). */
static mp_status intern_stack(mp_snapshot *s, uint64_t from, uint32_t *out) {
    uint64_t n = s->pool_len - from;
    if (n == 0) {
        *out = 0;
        return MP_OK;
    }
    if ((uint64_t)s->nstacks * 2 + 2 >= s->stack_hcap &&
        !rehash(&s->stack_hash, &s->stack_hcap, s->nstacks, stack_hash_of, s))
        return mp_error(MP_ERR_NOMEM, "%s: out of memory (stacks)", s->path);
    uint32_t h = stack_hash_range(s->stack_pool + from, n) & (s->stack_hcap - 1);
    while (s->stack_hash[h]) {
        uint32_t id = s->stack_hash[h] - 1;
        uint64_t a = s->stack_off[id], m = s->stack_off[id + 1] - a;
        if (m == n && memcmp(s->stack_pool + a, s->stack_pool + from, n * sizeof *s->stack_pool) == 0) {
            s->pool_len = from;
            *out = id;
            return MP_OK;
        }
        h = (h + 1) & (s->stack_hcap - 1);
    }
    if (!grow((void **)&s->stack_off, &s->stacks_cap, (uint64_t)s->nstacks + 2, sizeof *s->stack_off))
        return mp_error(MP_ERR_NOMEM, "%s: out of memory (stacks)", s->path);
    uint32_t id = s->nstacks++;
    s->stack_off[id] = from;
    s->stack_off[id + 1] = s->pool_len;
    s->stack_hash[h] = id + 1;
    *out = id;
    return MP_OK;
}

/* An int where a number belongs: a bool is the wrong type (Python's
 * True is an int, but no snapshot writes one for a size or address). */
static inline bool int_of(const mpk *k, mpk_val v, int64_t *out) {
    unsigned t = PK_TAG(v);
    if (t == PK_INT) { /* inline: sign-extend the 60-bit payload */
        uint64_t p = PK_PAYLOAD(v);
        if (p & (UINT64_C(1) << 59)) p |= UINT64_C(0xf) << 60;
        *out = (int64_t)p;
        return true;
    }
    return t == PK_BIGINT && mpk_int(k, v, out); /* a container never becomes an int */
}

static mp_status bad(mp_snapshot *s, const char *where, const char *key, const char *want, mpk_val got) {
    return mp_error(MP_ERR_FORMAT, "%s: %s: '%s' is %s, not %s", s->path, where, key,
                    mpk_tag_name(mpk_tag(s->k, got)), want);
}

/* A frame dict {name, filename, line} (or a frame already interned). */
static mp_status frame_of(mp_snapshot *s, mpk_val v, const char *where, uint32_t *out) {
    mpk *k = s->k;
    v = mpk_resolve(k, v);
    if (PK_TAG(v) == PK_FRAME) {
        *out = (uint32_t)PK_PAYLOAD(v);
        return MP_OK;
    }
    if (PK_TAG(v) != PK_DICT)
        return mp_error(MP_ERR_FORMAT, "%s: %s: a frame is %s, not a dict", s->path, where,
                        mpk_tag_name(PK_TAG(v)));
    mp_mem_frame f = {-1, -1, 0};
    mpk_val x;
    if (mpk_dict_get(k, v, s->key[K_NAME], &x)) {
        f.name = mpk_str_id(k, x);
        if (f.name < 0 && PK_TAG(mpk_resolve(k, x)) != PK_NONE) return bad(s, where, "name", "a str", x);
    }
    if (mpk_dict_get(k, v, s->key[K_FILENAME], &x)) {
        f.file = mpk_str_id(k, x);
        if (f.file < 0 && PK_TAG(mpk_resolve(k, x)) != PK_NONE) return bad(s, where, "filename", "a str", x);
    }
    if (mpk_dict_get(k, v, s->key[K_LINE], &x) && !mpk_int(k, x, &f.line) && PK_TAG(mpk_resolve(k, x)) != PK_NONE)
        return bad(s, where, "line", "an int", x);
    mp_status st = intern_frame(s, f, out);
    if (st) return st;
    mpk_replace(k, v, PK_MAKE(PK_FRAME, *out), true);
    return MP_OK;
}

/* A list of frames as a stack id (0: none). Converted once per list: the
 * memo then hands out the id. */
static mp_status stack_of(mp_snapshot *s, mpk_val v, const char *where, uint32_t *out) {
    mpk *k = s->k;
    v = mpk_resolve(k, v);
    unsigned t = PK_TAG(v);
    if (t == PK_STACK) {
        *out = (uint32_t)PK_PAYLOAD(v);
        return MP_OK;
    }
    if (t == PK_NONE) {
        *out = 0;
        return MP_OK;
    }
    if (t != PK_LIST && t != PK_TUPLE)
        return mp_error(MP_ERR_FORMAT, "%s: %s: 'frames' is %s, not a list", s->path, where, mpk_tag_name(t));
    uint32_t n;
    const mpk_val *it = mpk_items(k, v, &n);
    uint64_t from = s->pool_len;
    if (!grow64((void **)&s->stack_pool, &s->pool_cap, from + n, sizeof *s->stack_pool))
        return mp_error(MP_ERR_NOMEM, "%s: out of memory (stacks)", s->path);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t f = 0;
        /* `it` stays valid: converting a frame replaces that frame's dict, not this list */
        mp_status st = frame_of(s, it[i], where, &f);
        if (st) {
            s->pool_len = from;
            return st;
        }
        s->stack_pool[s->pool_len++] = f;
    }
    mp_status st = intern_stack(s, from, out);
    if (st) return st;
    if (*out) s->has_frames = true;
    mpk_replace(k, v, PK_MAKE(PK_STACK, *out), true);
    return MP_OK;
}

static int action_of(mp_snapshot *s, int32_t id) {
    for (int i = 0; i < s->nactions; i++)
        if (s->action_name[i] == id) return i;
    if (s->nactions == MP_MEM_MAX_ACTIONS) return -1;
    s->action_name[s->nactions] = id;
    return s->nactions++;
}

static uint16_t meta_index(mp_snapshot *s, int32_t mid);

/* The item hook: a dict with an 'action' key appended to a list is a
 * trace event; it becomes a record now. */
static mp_status on_item(void *ud, mpk *k, mpk_val list, mpk_val *item, uint64_t off, uint64_t index, bool *drop) {
    mp_snapshot *s = ud;
    mpk_val v = *item;
    if (PK_TAG(v) != PK_DICT) return MP_OK; /* a dict just built is never a replaced one */
    uint32_t n;
    const mpk_val *it = mpk_items(k, v, &n);
    v = mpk_resolve(k, v);
    /* keys are compared as values: a str key is PK_STR of its id */
    const mpk_val k_action = PK_MAKE(PK_STR, (uint32_t)s->key[K_ACTION]);
    mpk_val a = 0;
    bool has_action = false;
    for (uint32_t i = n; i >= 2; i -= 2)
        if (it[i - 2] == k_action) {
            a = it[i - 1];
            has_action = true;
            break;
        }
    if (!has_action) return MP_OK;
    /* the event's name in messages, written only when one is needed */
    char where[96];
#define WHERE()                                                                                       \
    (snprintf(where, sizeof where, "event %llu of its trace (byte offset %llu)", (unsigned long long)index, \
              (unsigned long long)off),                                                               \
     where)
    int32_t aid = mpk_str_id(k, a);
    if (aid < 0) return bad(s, WHERE(), "action", "a str", a);
    int act = action_of(s, aid);
    if (act < 0) return mp_error(MP_ERR_LIMIT, "%s: %s: more than %d distinct actions", s->path, WHERE(), MP_MEM_MAX_ACTIONS);
    mp_mem_event e = {.addr = 0, .size = 0, .time_us = MP_MEM_NO_TIME, .stack = 0, .meta = 0, .action = (uint8_t)act};
    int64_t device_free = -1;
    bool has_size = false;
    /* the actions that move memory need an address and a size */
    bool memory_action = act >= MP_MA_ALLOC && act <= MP_MA_SEGMENT_UNMAP;
    for (uint32_t i = 0; i + 1 < n; i += 2) {
        mpk_val kv = it[i];
        int32_t key = PK_TAG(kv) == PK_STR ? (int32_t)PK_PAYLOAD(kv) : -1;
        mpk_val x = it[i + 1];
        int64_t iv;
        if (key == s->key[K_ADDR]) {
            if (!memory_action) continue; /* an oom's addr (when any) is not read */
            if (!int_of(k, x, &iv)) return bad(s, WHERE(), "addr", "an int", x);
            if (iv < 0)
                return mp_error(MP_ERR_FORMAT, "%s: %s: negative addr %lld", s->path, WHERE(), (long long)iv);
            e.addr = (uint64_t)iv;
            e.flags |= MP_ME_ADDR;
        } else if (key == s->key[K_SIZE]) {
            if (!int_of(k, x, &iv)) return bad(s, WHERE(), "size", "an int", x);
            if (iv < 0)
                return mp_error(MP_ERR_FORMAT, "%s: %s: negative size %lld", s->path, WHERE(), (long long)iv);
            e.size = iv;
            has_size = true;
        } else if (key == s->key[K_TIME_US]) {
            if (PK_TAG(mpk_resolve(k, x)) == PK_NONE) continue;
            if (!mpk_int(k, x, &iv)) return bad(s, WHERE(), "time_us", "an int", x);
            e.time_us = iv == MP_MEM_NO_TIME ? iv + 1 : iv;
        } else if (key == s->key[K_STREAM]) {
            if (!mpk_int(k, x, &iv)) continue; /* informative only */
            int si = 0;
            while (si < s->nstreams && s->streams[si] != (uint64_t)iv) si++;
            if (si == s->nstreams && s->nstreams < 256) s->streams[s->nstreams++] = (uint64_t)iv;
            e.stream = (uint8_t)(si < 255 ? si : 255);
        } else if (key == s->key[K_FRAMES]) {
            mpk_val xr = mpk_resolve(k, x);
            if (PK_TAG(xr) == PK_STACK) { /* a stack read before: the memo's id */
                e.stack = (uint32_t)PK_PAYLOAD(xr);
            } else {
                mp_status st = stack_of(s, x, WHERE(), &e.stack);
                if (st) return st;
            }
        } else if (key == s->key[K_USER_METADATA]) {
            /* a module path (modelprof.memory.record sets it) or any str; others ignored */
            int32_t mid = mpk_str_id(k, x);
            if (mid < 0 || !mpk_str(k, mid, NULL)[0]) continue;
            e.meta = meta_index(s, mid); /* 0 beyond 65,535 distinct paths: not kept */
        } else if (key == s->key[K_DEVICE_FREE]) {
            if (!mpk_int(k, x, &iv)) return bad(s, WHERE(), "device_free", "an int", x);
            device_free = iv;
        }
    }
    if (memory_action && (!(e.flags & MP_ME_ADDR) || !has_size))
        return mp_error(MP_ERR_FORMAT, "%s: %s: a %s event without %s", s->path, WHERE(), known_actions[act],
                        !(e.flags & MP_ME_ADDR) ? "'addr'" : "'size'");
    if (s->nev >= INT32_MAX) return mp_error(MP_ERR_LIMIT, "%s: %s: more than 2^31 events", s->path, WHERE());
    if (!grow64((void **)&s->ev, &s->ev_cap, s->nev + 1, sizeof *s->ev))
        return mp_error(MP_ERR_NOMEM, "%s: out of memory (events)", s->path);
    if (device_free >= 0) {
        if (!grow64((void **)&s->device_free, &s->device_free_cap, s->ndevice_free * 2 + 2, sizeof *s->device_free))
            return mp_error(MP_ERR_NOMEM, "%s: out of memory", s->path);
        s->device_free[s->ndevice_free * 2] = (int64_t)s->nev;
        s->device_free[s->ndevice_free * 2 + 1] = device_free;
        s->ndevice_free++;
        e.flags |= MP_ME_DEVICE_FREE;
    }
    s->ev[s->nev] = e;
    mpk_val to = PK_MAKE(PK_EVENT, s->nev);
    /* the list does not keep it: runs of consecutive records say which
     * list each went to (one run per trace, for a file Python wrote) */
    list = mpk_resolve(k, list);
    if (s->nruns && s->runs[s->nruns - 1].list == list &&
        s->runs[s->nruns - 1].first + s->runs[s->nruns - 1].count == s->nev) {
        s->runs[s->nruns - 1].count++;
    } else {
        if (!grow64((void **)&s->runs, &s->runs_cap, s->nruns + 1, sizeof *s->runs))
            return mp_error(MP_ERR_NOMEM, "%s: out of memory (events)", s->path);
        s->runs[s->nruns++] = (mp_mem_run){list, (uint32_t)s->nev, 1};
    }
    s->nev++;
    mpk_replace(k, v, to, false);
    *item = to;
    *drop = true;
    return MP_OK;
#undef WHERE
}

/* The meta index of string id `mid` (added when new); 0 when the table is
 * full (65,535 paths) or out of memory. */
static uint16_t meta_index(mp_snapshot *s, int32_t mid) {
    if (mid < 0) return 0;
    if ((uint32_t)mid >= s->meta_of_cap) {
        uint32_t oc = s->meta_of_cap;
        if (!grow((void **)&s->meta_of, &s->meta_of_cap, (uint64_t)mid + 1, sizeof *s->meta_of)) return 0;
        memset(s->meta_of + oc, 0, (size_t)(s->meta_of_cap - oc) * sizeof *s->meta_of);
    }
    uint16_t m = s->meta_of[mid];
    if (!m) {
        if (s->nmeta >= MP_MEM_MAX_META) return 0;
        if (!grow((void **)&s->meta, &s->meta_cap, (uint64_t)s->nmeta + 1, sizeof *s->meta)) return 0;
        m = (uint16_t)s->nmeta;
        s->meta[s->nmeta++] = mid;
        s->meta_of[mid] = m;
    }
    return m;
}

/* external_annotations: the 'nn.Module: PATH' ranges (others, and entries
 * of another shape, are skipped: the key is informative). */
static mp_status read_annotations(mp_snapshot *s, mpk_val list) {
    mpk *k = s->k;
    uint32_t n;
    const mpk_val *it = mpk_items(k, list, &n);
    for (uint32_t i = 0; i < n; i++) {
        mpk_val a = mpk_resolve(k, it[i]), x;
        if (PK_TAG(a) != PK_DICT) continue;
        int64_t t, dev = 0;
        if (!mpk_dict_get(k, a, s->key[K_TIME_US], &x) || !int_of(k, x, &t)) continue;
        if (mpk_dict_get(k, a, s->key[K_DEVICE], &x) && (!int_of(k, x, &dev) || dev < 0 || dev > 65535)) continue;
        if (!mpk_dict_get(k, a, s->key[K_STAGE], &x)) continue;
        const char *stage = mpk_str_id(k, x) >= 0 ? mpk_str(k, mpk_str_id(k, x), NULL) : "";
        bool start = strcmp(stage, "START") == 0;
        if (!start && strcmp(stage, "END") != 0) continue;
        if (!mpk_dict_get(k, a, s->key[K_NAME], &x) || mpk_str_id(k, x) < 0) continue;
        uint32_t len;
        const char *name = mpk_str(k, mpk_str_id(k, x), &len);
        static const char prefix[] = "nn.Module: ";
        if (len <= sizeof prefix - 1 || memcmp(name, prefix, sizeof prefix - 1) != 0) continue;
        int32_t pid = mpk_intern(k, name + sizeof prefix - 1, len - (sizeof prefix - 1));
        uint16_t m = meta_index(s, pid);
        if (!m) continue;
        if (!grow((void **)&s->annots, &s->annots_cap, (uint64_t)s->nannots + 1, sizeof *s->annots))
            return mp_error(MP_ERR_NOMEM, "%s: out of memory", s->path);
        s->annots[s->nannots++] = (mp_mem_annot){t, (int32_t)dev, m, start};
    }
    return MP_OK;
}

/* ---- segments and blocks ---- */
static mp_status get_int(mp_snapshot *s, mpk_val d, int key, const char *where, int64_t *out, bool *present) {
    mpk_val x;
    *present = false;
    if (!mpk_dict_get(s->k, d, s->key[key], &x)) return MP_OK;
    if (!int_of(s->k, x, out)) return bad(s, where, key_names[key], "an int", x);
    if (*out < 0)
        return mp_error(MP_ERR_FORMAT, "%s: %s: negative %s %lld", s->path, where, key_names[key], (long long)*out);
    *present = true;
    return MP_OK;
}

static mp_status need(mp_snapshot *s, mpk_val d, const int *keys, int n, const char *where) {
    mpk_val x;
    for (int i = 0; i < n; i++)
        if (!mpk_dict_get(s->k, d, s->key[keys[i]], &x))
            return mp_error(MP_ERR_FORMAT, "%s: %s: no '%s'", s->path, where, key_names[keys[i]]);
    return MP_OK;
}

static mp_status read_segments(mp_snapshot *s, mpk_val list) {
    mpk *k = s->k;
    uint32_t n;
    const mpk_val *it = mpk_items(k, list, &n);
    unsigned t = mpk_tag(k, list);
    if (t != PK_LIST && t != PK_TUPLE)
        return mp_error(MP_ERR_FORMAT, "%s: 'segments' is %s, not a list", s->path, mpk_tag_name(t));
    s->segs = calloc(n ? n : 1, sizeof *s->segs);
    if (!s->segs) return mp_error(MP_ERR_NOMEM, "%s: out of memory", s->path);
    uint32_t bcap = 0;
    for (uint32_t i = 0; i < n; i++) {
        char where[64];
        snprintf(where, sizeof where, "segment %u", i);
        mpk_val sg = mpk_resolve(k, it[i]);
        if (PK_TAG(sg) != PK_DICT)
            return mp_error(MP_ERR_FORMAT, "%s: %s is %s, not a dict", s->path, where, mpk_tag_name(PK_TAG(sg)));
        mp_mem_segment *g = &s->segs[s->nsegs++];
        int64_t v;
        bool has;
        static const int seg_keys[] = {K_DEVICE, K_ADDRESS, K_TOTAL_SIZE, K_BLOCKS};
        mp_status st = need(s, sg, seg_keys, 4, where);
        if (st) return st;
        if ((st = get_int(s, sg, K_DEVICE, where, &v, &has))) return st;
        if (has && (v < 0 || v > 65535))
            return mp_error(MP_ERR_FORMAT, "%s: %s: device %lld out of range", s->path, where, (long long)v);
        g->device = has ? (int)v : 0;
        if ((st = get_int(s, sg, K_ADDRESS, where, &v, &has))) return st;
        g->addr = has ? (uint64_t)v : 0;
        if ((st = get_int(s, sg, K_TOTAL_SIZE, where, &v, &has))) return st;
        if (has && v < 0)
            return mp_error(MP_ERR_FORMAT, "%s: %s: negative total_size %lld", s->path, where, (long long)v);
        g->total = has ? v : 0;
        mpk_val x;
        if (mpk_dict_get(k, sg, s->key[K_IS_EXPANDABLE], &x)) {
            int64_t b = 0;
            g->expandable = mpk_int(k, x, &b) && b;
        }
        g->first_block = s->nblocks;
        if (!mpk_dict_get(k, sg, s->key[K_BLOCKS], &x)) continue;
        uint32_t nb;
        const mpk_val *bl = mpk_items(k, x, &nb);
        t = mpk_tag(k, x);
        if (t != PK_LIST && t != PK_TUPLE) return bad(s, where, "blocks", "a list", x);
        if (!grow((void **)&s->blocks, &bcap, (uint64_t)s->nblocks + nb, sizeof *s->blocks))
            return mp_error(MP_ERR_NOMEM, "%s: out of memory", s->path);
        uint64_t at = g->addr;
        for (uint32_t j = 0; j < nb; j++) {
            char bw[96];
            snprintf(bw, sizeof bw, "segment %u block %u", i, j);
            mpk_val b = mpk_resolve(k, bl[j]);
            if (PK_TAG(b) != PK_DICT)
                return mp_error(MP_ERR_FORMAT, "%s: %s is %s, not a dict", s->path, bw, mpk_tag_name(PK_TAG(b)));
            static const int block_keys[] = {K_SIZE, K_STATE};
            if ((st = need(s, b, block_keys, 2, bw))) return st;
            mp_mem_block *B = &s->blocks[s->nblocks++];
            memset(B, 0, sizeof *B);
            if ((st = get_int(s, b, K_SIZE, bw, &v, &has))) return st;
            if (has && v < 0) return mp_error(MP_ERR_FORMAT, "%s: %s: negative size %lld", s->path, bw, (long long)v);
            B->size = has ? v : 0;
            if ((st = get_int(s, b, K_ADDRESS, bw, &v, &has))) return st;
            B->addr = has ? (uint64_t)v : at; /* 2.0: blocks lie in order from the segment's address */
            at = B->addr + (uint64_t)B->size;
            B->requested = -1;
            if ((st = get_int(s, b, K_REQUESTED_SIZE, bw, &v, &has))) return st;
            if (has && v < 0)
                return mp_error(MP_ERR_FORMAT, "%s: %s: negative requested_size %lld", s->path, bw, (long long)v);
            if (has) B->requested = v;
            B->state = MP_BS_OTHER;
            if (mpk_dict_get(k, b, s->key[K_STATE], &x)) {
                int32_t sid = mpk_str_id(k, x);
                if (sid < 0) return bad(s, bw, "state", "a str", x);
                const char *sn = mp_mem_str(s, sid);
                B->state = strcmp(sn, "active_allocated") == 0      ? MP_BS_ACTIVE_ALLOCATED
                           : strcmp(sn, "active_pending_free") == 0 ? MP_BS_ACTIVE_PENDING_FREE
                           : strcmp(sn, "inactive") == 0            ? MP_BS_INACTIVE
                                                                    : MP_BS_OTHER;
            }
            if (mpk_dict_get(k, b, s->key[K_FRAMES], &x) && (st = stack_of(s, x, bw, &B->stack))) return st;
            if (mpk_dict_get(k, b, s->key[K_HISTORY], &x)) {
                uint32_t nh;
                const mpk_val *h = mpk_items(k, x, &nh);
                t = mpk_tag(k, x);
                if (t != PK_LIST && t != PK_TUPLE) return bad(s, bw, "history", "a list", x);
                s->block_history = true;
                if (nh) {
                    /* the head is the newest: 2.0's malloc puts each new
                     * entry first (HistoryChain), as _memory_viz.py reads it */
                    mpk_val last = mpk_resolve(k, h[0]);
                    if (PK_TAG(last) != PK_DICT)
                        return mp_error(MP_ERR_FORMAT, "%s: %s: a history entry is %s, not a dict", s->path, bw,
                                        mpk_tag_name(PK_TAG(last)));
                    if ((st = get_int(s, last, K_REAL_SIZE, bw, &v, &has))) return st;
                    if (has && v < 0)
                        return mp_error(MP_ERR_FORMAT, "%s: %s: negative real_size %lld", s->path, bw, (long long)v);
                    if (has && B->requested < 0) B->requested = v;
                    mpk_val fr;
                    if (!B->stack && mpk_dict_get(k, last, s->key[K_FRAMES], &fr) && (st = stack_of(s, fr, bw, &B->stack)))
                        return st;
                }
            }
            if (B->requested < 0) B->requested = B->size;
        }
        g->nblocks = s->nblocks - g->first_block;
    }
    return MP_OK;
}

static int dev_cmp(const void *a, const void *b) {
    return ((const mp_mem_device *)a)->device - ((const mp_mem_device *)b)->device;
}

static mp_mem_device *device_slot(mp_snapshot *s, int device, int *cap) {
    for (int i = 0; i < s->ndev; i++)
        if (s->dev[i].device == device) return &s->dev[i];
    if (s->ndev == *cap) {
        int nc = *cap ? *cap * 2 : 4;
        mp_mem_device *d = realloc(s->dev, (size_t)nc * sizeof *d);
        if (!d) return NULL;
        s->dev = d;
        *cap = nc;
    }
    mp_mem_device *d = &s->dev[s->ndev++];
    memset(d, 0, sizeof *d);
    d->device = device;
    d->first_time_us = d->last_time_us = MP_MEM_NO_TIME; /* until the replay reads the times */
    d->clock_back_ev = -1;
    return d;
}

static int run_cmp(const void *a, const void *b) {
    const mp_mem_run *x = a, *y = b;
    if (x->list != y->list) return x->list < y->list ? -1 : 1;
    return x->first < y->first ? -1 : x->first > y->first;
}

/* The first run of key->list (runs sorted by list, then first). */
static mp_mem_run *bsearch_first(mp_mem_run *runs, uint64_t n, const mp_mem_run *key) {
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (runs[mid].list < key->list) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && runs[lo].list == key->list ? &runs[lo] : NULL;
}

static mp_status decode(mp_snapshot *s, mpk_val root) {
    mpk *k = s->k;
    root = mpk_resolve(k, root);
    mpk_val segs = 0, traces = 0;
    bool has_segs = false, has_traces = false;
    unsigned t = PK_TAG(root);
    if (t == PK_DICT) {
        s->layout = "dict";
        has_segs = mpk_dict_get(k, root, s->key[K_SEGMENTS], &segs);
        has_traces = mpk_dict_get(k, root, s->key[K_DEVICE_TRACES], &traces);
        mpk_val ann;
        if (mpk_dict_get(k, root, s->key[K_EXTERNAL_ANNOTATIONS], &ann)) {
            mp_status ast = read_annotations(s, ann);
            if (ast) return ast;
        }
        if (!has_segs && !has_traces)
            return mp_error(MP_ERR_FORMAT,
                            "%s: not a memory snapshot: a dict without 'segments' or 'device_traces' "
                            "(torch.cuda.memory._dump_snapshot writes both)",
                            s->path);
    } else if (t == PK_LIST) {
        s->layout = "segment_list"; /* torch.cuda.memory_snapshot() */
        segs = root;
        has_segs = true;
    } else {
        return mp_error(MP_ERR_FORMAT, "%s: not a memory snapshot: the pickle holds %s, not a dict or a list of segments",
                        s->path, mpk_tag_name(t));
    }
    mp_status st;
    if (has_segs && (st = read_segments(s, segs))) return st;
    int cap = 0;
    for (uint32_t i = 0; i < s->nsegs; i++)
        if (!device_slot(s, s->segs[i].device, &cap)) return mp_error(MP_ERR_NOMEM, "out of memory");
    s->has_device_traces = has_traces;
    if (has_traces) {
        t = mpk_tag(k, traces);
        if (t != PK_LIST && t != PK_TUPLE)
            return mp_error(MP_ERR_FORMAT, "%s: 'device_traces' is %s, not a list", s->path, mpk_tag_name(t));
        uint32_t nd;
        const mpk_val *dl = mpk_items(k, traces, &nd);
        if (nd > 65536) return mp_error(MP_ERR_FORMAT, "%s: 'device_traces' lists %u devices", s->path, nd);
        if (s->nruns > 1) qsort(s->runs, (size_t)s->nruns, sizeof *s->runs, run_cmp);
        for (uint32_t d = 0; d < nd; d++) {
            mpk_val l = mpk_resolve(k, dl[d]);
            t = PK_TAG(l);
            if (t != PK_LIST && t != PK_TUPLE)
                return mp_error(MP_ERR_FORMAT, "%s: device_traces[%u] is %s, not a list", s->path, d, mpk_tag_name(t));
            uint32_t n;
            const mpk_val *kept = mpk_items(k, l, &n);
            if (n) { /* an item the hook did not take: not an event */
                mpk_val e0 = mpk_resolve(k, kept[0]);
                return mp_error(MP_ERR_FORMAT, "%s: device_traces[%u] holds %s, not an event dict", s->path, d,
                                mpk_tag_name(PK_TAG(e0)));
            }
            /* its runs of records, in order */
            mp_mem_run key = {l, 0, 0};
            mp_mem_run *r = s->nruns ? bsearch_first(s->runs, s->nruns, &key) : NULL;
            if (!r) continue;
            uint64_t total = 0, nr = 0;
            bool contiguous = true;
            for (mp_mem_run *q = r; q < s->runs + s->nruns && q->list == l; q++, nr++) {
                if (q > r && q->first != q[-1].first + q[-1].count) contiguous = false;
                total += q->count;
            }
            if (!total) continue;
            if (total > UINT32_MAX - 1) return mp_error(MP_ERR_LIMIT, "%s: device_traces[%u]: too many events", s->path, d);
            mp_mem_device *D = device_slot(s, (int)d, &cap);
            if (!D) return mp_error(MP_ERR_NOMEM, "out of memory");
            if (D->has_trace) return mp_error(MP_ERR_FORMAT, "%s: device_traces[%u] is listed twice", s->path, d);
            D->has_trace = true;
            D->nev = (uint32_t)total;
            if (contiguous) {
                D->ev = s->ev + r->first;
            } else {
                mp_mem_event *cp = mp_arena_alloc(&s->arena, (size_t)total * sizeof *cp);
                if (!cp) return mp_error(MP_ERR_NOMEM, "out of memory");
                uint64_t at = 0;
                for (uint64_t q = 0; q < nr; q++) {
                    memcpy(cp + at, s->ev + r[q].first, (size_t)r[q].count * sizeof *cp);
                    at += r[q].count;
                }
                D->ev = cp;
            }
        }
    }
    if (s->ndev > 1) qsort(s->dev, (size_t)s->ndev, sizeof *s->dev, dev_cmp);
    if (s->ndev == 0)
        return mp_error(MP_ERR_FORMAT,
                        "%s: the snapshot recorded nothing (no segments, no events): memory history was "
                        "probably not enabled before the allocations (call "
                        "torch.cuda.memory._record_memory_history(max_entries=100000) before the model runs)",
                        s->path);
    return MP_OK;
}

static mp_status snapshot_new(const char *label, mp_snapshot **out) {
    mp_snapshot *s = calloc(1, sizeof *s);
    if (!s) return mp_error(MP_ERR_NOMEM, "out of memory");
    mp_arena_init(&s->arena);
    s->k = mpk_new();
    s->path = mp_arena_strdup(&s->arena, label);
    if (!s->k || !s->path) {
        mp_snapshot_free(s);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < K_COUNT; i++) s->key[i] = mpk_intern(s->k, key_names[i], strlen(key_names[i]));
    for (int i = 0; i < MP_MA_OTHER; i++) s->action_name[i] = mpk_intern(s->k, known_actions[i], strlen(known_actions[i]));
    s->nactions = MP_MA_OTHER;
    s->meta = malloc(64 * sizeof *s->meta);
    if (!s->meta) {
        mp_snapshot_free(s);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    s->meta[0] = -1;
    s->nmeta = 1;
    s->meta_cap = 64;
    /* stack 0: no frames */
    s->stack_off = calloc(64, sizeof *s->stack_off);
    s->stacks_cap = 64;
    s->nstacks = 1;
    mpk_set_item_hook(s->k, on_item, s);
    *out = s;
    return MP_OK;
}

static mp_status finish(mp_snapshot *s, mp_status st, mpk_val root, mp_snapshot **out) {
    if (!st) st = decode(s, root);
    /* what is kept is in the records now; of the pickle's values only the
     * strings stay (names of frames and actions) */
    mpk_drop_values(s->k);
    if (st) {
        mp_snapshot_free(s);
        return st;
    }
    *out = s;
    return MP_OK;
}

mp_status mp_snapshot_read(const char *path, mp_snapshot **out) {
    *out = NULL;
    mp_snapshot *s;
    mp_status st = snapshot_new(path, &s);
    if (st) return st;
    mpk_val root = 0;
    st = mpk_run_file(s->k, path, &root);
    s->gz = mpk_was_gzip(s->k);
    s->bytes = mpk_bytes_read(s->k);
    return finish(s, st, root, out);
}

mp_status mp_snapshot_read_memory(const void *buf, size_t len, const char *label, mp_snapshot **out) {
    *out = NULL;
    mp_snapshot *s;
    mp_status st = snapshot_new(label, &s);
    if (st) return st;
    mpk_val root = 0;
    st = mpk_run_memory(s->k, buf, len, label, &root);
    s->gz = mpk_was_gzip(s->k);   /* as from a file: gzip said, the pickle's bytes counted */
    s->bytes = mpk_bytes_read(s->k);
    return finish(s, st, root, out);
}

void mp_snapshot_free(mp_snapshot *s) {
    if (!s) return;
    for (int i = 0; i < s->ndev; i++) {
        mp_mem_device *d = &s->dev[i];
        for (int w = 0; w < d->nwarn; w++) free(d->warnings[w]);
        for (int f = 0; f < d->nfindings; f++) free(d->findings[f].text);
        free(d->findings);
        free(d->live);
        free(d->sites);
        free(d->steps);
    }
    free(s->dev);
    mpk_free(s->k);
    free(s->ev);
    free(s->device_free);
    free(s->runs);
    free(s->meta);
    free(s->meta_of);
    free(s->annots);
    free(s->frames);
    free(s->stack_pool);
    free(s->stack_off);
    free(s->frame_hash);
    free(s->stack_hash);
    free(s->segs);
    free(s->blocks);
    free(s->user_frame);
    mp_arena_free(&s->arena);
    free(s);
}
