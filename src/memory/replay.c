/* The replay (docs/MEMORY.md "Replay"): per device, the bytes live over
 * the trace in requested bytes, starting from what was live before
 * recording began; the reserved bytes from the segment events; the peak
 * and what was live at it. */
#include "memory/memory.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* addr -> alloc event index (FREED bit once freed). Entries are never
 * removed: a freed address remembers it was allocated (a second free is
 * a double free, not memory from before the recording). */
#define LM_FREED 0x80000000u
#define LM_EARLY 0x7fffffffu /* freed before any alloc: live before recording */
typedef struct lmap {
    uint64_t *key;
    uint32_t *val; /* UINT32_MAX: empty */
    uint32_t cap, n;
} lmap;

static uint32_t lm_hash(uint64_t a) {
    a ^= a >> 29;
    a *= UINT64_C(0xbf58476d1ce4e5b9);
    a ^= a >> 32;
    return (uint32_t)a;
}

static void lm_free(lmap *m) {
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof *m);
}

static uint32_t *lm_find(const lmap *m, uint64_t a) {
    if (!m->cap) return NULL;
    uint32_t h = lm_hash(a) & (m->cap - 1);
    while (m->val[h] != UINT32_MAX) {
        if (m->key[h] == a) return &m->val[h];
        h = (h + 1) & (m->cap - 1);
    }
    return NULL;
}

static bool lm_put(lmap *m, uint64_t a, uint32_t v) {
    if ((m->n + 1) * 2 > m->cap) {
        uint32_t nc = m->cap ? m->cap * 2 : 1024;
        uint64_t *k = malloc((size_t)nc * sizeof *k);
        uint32_t *vv = malloc((size_t)nc * sizeof *vv);
        if (!k || !vv) {
            free(k);
            free(vv);
            return false;
        }
        memset(vv, 0xff, (size_t)nc * sizeof *vv);
        for (uint32_t i = 0; i < m->cap; i++) {
            if (m->val[i] == UINT32_MAX) continue;
            uint32_t h = lm_hash(m->key[i]) & (nc - 1);
            while (vv[h] != UINT32_MAX) h = (h + 1) & (nc - 1);
            k[h] = m->key[i];
            vv[h] = m->val[i];
        }
        free(m->key);
        free(m->val);
        m->key = k;
        m->val = vv;
        m->cap = nc;
    }
    uint32_t h = lm_hash(a) & (m->cap - 1);
    while (m->val[h] != UINT32_MAX) {
        if (m->key[h] == a) {
            m->val[h] = v;
            return true;
        }
        h = (h + 1) & (m->cap - 1);
    }
    m->key[h] = a;
    m->val[h] = v;
    m->n++;
    return true;
}

static void warn(mp_mem_device *d, const char *fmt, ...) MP_PRINTF(2, 3);
static void warn(mp_mem_device *d, const char *fmt, ...) {
    d->warn_count++;
    if (d->nwarn >= (int)MP_ARRAY_LEN(d->warnings)) return;
    va_list ap;
    va_start(ap, fmt);
    char buf[256];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    d->warnings[d->nwarn] = strdup(buf);
    if (d->warnings[d->nwarn]) d->nwarn++;
}

int64_t mp_mem_span_us(const mp_mem_device *d) {
    if (d->first_time_us == MP_MEM_NO_TIME || d->clock_back_ev >= 0) return MP_MEM_NO_TIME;
    return d->last_time_us - d->first_time_us;
}

static int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* ---- the first user frame ---- */
static bool ends(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && memcmp(s + n - k, suf, k) == 0;
}

const char *mp_mem_file_slashed(const char *file, char *buf, size_t n) {
    size_t i = 0;
    for (; file[i] && i + 1 < n; i++) buf[i] = file[i] == '\\' ? '/' : file[i];
    buf[i] = 0;
    return buf;
}

/* Frames of torch, of C/C++ code and of the Python runtime are not the
 * user's (docs/MEMORY.md "First user frame"); a Windows path by its '/'
 * form, its standard library under ...\\Lib\\ (CPython's layout there). */
static bool runtime_frame(const char *file0) {
    char buf[1024];
    const char *file = mp_mem_file_slashed(file0, buf, sizeof buf);
    if (!*file || strcmp(file, "??") == 0 || file[0] == '<') return true;
    const char *lib = strstr(file, "/Lib/");
    if (lib && strchr(file0, '\\') && !strstr(lib, "-packages/")) return true;
    static const char *const cxx[] = {".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".cu", ".cuh"};
    for (size_t i = 0; i < MP_ARRAY_LEN(cxx); i++)
        if (ends(file, cxx[i])) return true;
    if (strstr(file, "/torch/") || strncmp(file, "torch/", 6) == 0) return true;
    /* the standard library: .../lib/python3.X/xxx.py, not site- or dist-packages */
    const char *p = strstr(file, "/lib/python");
    if (p && !strstr(p, "-packages/")) return true;
    return false;
}

uint32_t mp_mem_user_frame(const mp_snapshot *s, uint32_t stack) {
    if (stack == 0 || stack >= s->nstacks) return UINT32_MAX;
    if (s->user_frame && s->user_frame[stack] != UINT32_MAX - 1) return s->user_frame[stack];
    uint32_t n;
    const uint32_t *f = mp_mem_stack(s, stack, &n);
    uint32_t r = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        const mp_mem_frame *fr = &s->frames[f[i]];
        if (!runtime_frame(mp_mem_str(s, fr->file))) {
            r = f[i];
            break;
        }
    }
    if (s->user_frame) s->user_frame[stack] = r;
    return r;
}

const char *mp_mem_frame_text(const mp_snapshot *s, uint32_t frame, char *buf, size_t n) {
    if (frame >= s->nframes) {
        snprintf(buf, n, "?");
        return buf;
    }
    const mp_mem_frame *f = &s->frames[frame];
    snprintf(buf, n, "%s:%lld (%s)", mp_mem_str(s, f->file), (long long)f->line, mp_mem_str(s, f->name));
    return buf;
}

/* ---- the replay of one device ---- */
static int live_cmp(const void *a, const void *b) {
    const mp_mem_live *x = a, *y = b;
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    if (x->alloc_ev != y->alloc_ev) return x->alloc_ev < y->alloc_ev ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static bool block_active(const mp_mem_block *b) {
    return b->state == MP_BS_ACTIVE_ALLOCATED || b->state == MP_BS_ACTIVE_PENDING_FREE;
}

static mp_status replay_device(mp_snapshot *s, mp_mem_device *d) {
    const mp_mem_event *ev = d->ev;
    uint32_t n = d->nev;
    lmap m = {0};
    int64_t rel = 0, best = 0, relr = 0, bestr = 0;
    d->peak_ev = -1;
    d->peak_reserved_ev = -1;
    d->first_time_us = d->last_time_us = MP_MEM_NO_TIME;
    d->clock_back_ev = -1;
    int64_t last_timed = -1; /* the last event with a time */
    for (uint32_t i = 0; i < n; i++) {
        const mp_mem_event *e = &ev[i];
        d->action_count[e->action]++; /* action < MP_MEM_MAX_ACTIONS: a 6-bit field */
        if (e->time_us != MP_MEM_NO_TIME) {
            if (d->first_time_us == MP_MEM_NO_TIME) d->first_time_us = e->time_us;
            if (d->clock_back_ev < 0 && last_timed >= 0 && e->time_us < d->last_time_us) {
                d->clock_back_ev = i; /* the first only: the span is unknown from here on */
                warn(d, "event %u: time_us %lld is earlier than event %lld's %lld: the clock runs backwards, "
                        "so the span recorded is unknown",
                     i, (long long)e->time_us, (long long)last_timed, (long long)d->last_time_us);
            }
            d->last_time_us = e->time_us;
            last_timed = i;
        }
        switch (e->action) {
        case MP_MA_ALLOC: {
            if (!(e->flags & MP_ME_ADDR)) {
                warn(d, "event %u (alloc) has no address: left out", i);
                break;
            }
            uint32_t *v = lm_find(&m, e->addr);
            if (v && !(*v & LM_FREED)) {
                int64_t old = ev[*v].size;
                warn(d, "event %u allocates 0x%llx, still live from event %u (its free is missing): the earlier "
                        "allocation is taken as freed",
                     i, (unsigned long long)e->addr, *v);
                rel = sat_add(rel, -old);
            }
            if (!lm_put(&m, e->addr, i)) {
                lm_free(&m);
                return mp_error(MP_ERR_NOMEM, "out of memory (replay)");
            }
            rel = sat_add(rel, e->size);
            break;
        }
        case MP_MA_FREE_COMPLETED: {
            if (!(e->flags & MP_ME_ADDR)) {
                warn(d, "event %u (free_completed) has no address: left out", i);
                break;
            }
            uint32_t *v = lm_find(&m, e->addr);
            if (!v) { /* never allocated in the trace: live before recording */
                d->start_from_frees = sat_add(d->start_from_frees, e->size);
                rel = sat_add(rel, -e->size);
                if (!lm_put(&m, e->addr, LM_FREED | LM_EARLY)) {
                    lm_free(&m);
                    return mp_error(MP_ERR_NOMEM, "out of memory (replay)");
                }
            } else if (*v & LM_FREED) {
                warn(d, "event %u frees 0x%llx a second time (double free): ignored", i, (unsigned long long)e->addr);
            } else {
                int64_t sz = ev[*v].size;
                if (e->size != sz)
                    warn(d, "event %u frees %lld bytes at 0x%llx, allocated with %lld at event %u: the alloc's size is used",
                         i, (long long)e->size, (unsigned long long)e->addr, (long long)sz, *v);
                rel = sat_add(rel, -sz);
                *v |= LM_FREED;
            }
            break;
        }
        case MP_MA_SEGMENT_ALLOC:
        case MP_MA_SEGMENT_MAP: relr = sat_add(relr, e->size); break;
        case MP_MA_SEGMENT_FREE:
        case MP_MA_SEGMENT_UNMAP: relr = sat_add(relr, -e->size); break;
        default: break;
        }
        if (rel > best) {
            best = rel;
            d->peak_ev = i;
        }
        if (relr > bestr) {
            bestr = relr;
            d->peak_reserved_ev = i;
        }
    }
    /* the final state */
    int64_t total = 0;
    d->largest_free_block = 0;
    for (uint32_t g = 0; g < s->nsegs; g++) {
        const mp_mem_segment *sg = &s->segs[g];
        if (sg->device != d->device) continue;
        total = sat_add(total, sg->total);
        int64_t active_in_seg = 0;
        for (uint32_t b = sg->first_block; b < sg->first_block + sg->nblocks; b++) {
            const mp_mem_block *B = &s->blocks[b];
            s->blocks[b].early = false;
            if (block_active(B)) {
                active_in_seg++;
                d->end_requested = sat_add(d->end_requested, B->requested);
                d->end_allocated = sat_add(d->end_allocated, B->size);
                uint32_t *v = lm_find(&m, B->addr);
                if (!v || (*v & LM_FREED)) {
                    d->start_from_blocks = sat_add(d->start_from_blocks, B->requested);
                    s->blocks[b].early = true;
                }
            } else if (B->state == MP_BS_INACTIVE && B->size > d->largest_free_block) {
                d->largest_free_block = B->size;
            }
        }
        /* an inactive block in a segment that also holds active ones is
         * a split the allocator cannot hand back (fragmentation) */
        if (active_in_seg)
            for (uint32_t b = sg->first_block; b < sg->first_block + sg->nblocks; b++)
                if (s->blocks[b].state == MP_BS_INACTIVE) {
                    d->end_inactive_split_blocks++;
                    d->end_inactive_split_bytes = sat_add(d->end_inactive_split_bytes, s->blocks[b].size);
                }
    }
    d->end_reserved = total;
    d->start_requested = sat_add(d->start_from_blocks, d->start_from_frees);
    d->peak_requested = sat_add(d->start_requested, best);
    d->replay_end_requested = sat_add(d->start_requested, rel);
    d->start_reserved = sat_add(total, -relr);
    d->peak_reserved = sat_add(d->start_reserved, bestr);
    d->replay_end_reserved = total;
    d->peak_time_us = d->peak_ev >= 0 ? ev[d->peak_ev].time_us : MP_MEM_NO_TIME;
    /* each size is below 2^63, but what is live together passed it: no
     * GPU holds that, and no figure of it could be written (the sums
     * saturated) */
    {
        const int64_t sums[] = {d->start_requested, d->peak_requested, d->replay_end_requested, d->start_reserved,
                                d->peak_reserved, d->end_requested, d->end_allocated, total};
        for (size_t k = 0; k < sizeof sums / sizeof sums[0]; k++)
            if (sums[k] == INT64_MAX || sums[k] == INT64_MIN) {
                lm_free(&m);
                return mp_error(MP_ERR_FORMAT,
                                "%s: device %d: the bytes its blocks and events hold together pass 2^63 - 1 (no "
                                "GPU holds that): not a snapshot PyTorch writes",
                                s->path ? s->path : "snapshot", d->device);
            }
    }

    /* what was live right after peak_ev: replay again up to it, then on
     * to find when each of those was freed */
    lm_free(&m);
    lmap at = {0};
    int64_t r2 = 0;
    for (int64_t i = 0; i <= d->peak_ev; i++) {
        const mp_mem_event *e = &ev[i];
        if (!(e->flags & MP_ME_ADDR)) continue;
        if (e->action == MP_MA_ALLOC) {
            if (!lm_put(&at, e->addr, (uint32_t)i)) goto nomem;
        } else if (e->action == MP_MA_FREE_COMPLETED) {
            uint32_t *v = lm_find(&at, e->addr);
            if (!v) {
                if (!lm_put(&at, e->addr, LM_FREED | LM_EARLY)) goto nomem;
            } else {
                *v |= LM_FREED;
            }
        }
        if (e->action == MP_MA_SEGMENT_ALLOC || e->action == MP_MA_SEGMENT_MAP) r2 = sat_add(r2, e->size);
        else if (e->action == MP_MA_SEGMENT_FREE || e->action == MP_MA_SEGMENT_UNMAP) r2 = sat_add(r2, -e->size);
    }
    d->reserved_at_peak = sat_add(d->start_reserved, r2);
    {
        /* count, then fill */
        uint64_t cap = 0;
        for (uint32_t i = 0; i < at.cap; i++)
            if (at.val[i] != UINT32_MAX && !(at.val[i] & LM_FREED)) cap++;
        for (uint32_t g = 0; g < s->nsegs; g++)
            if (s->segs[g].device == d->device) cap += s->segs[g].nblocks;
        for (int64_t i = d->peak_ev + 1; i < n; i++)
            if (ev[i].action == MP_MA_FREE_COMPLETED) cap++;
        d->live = calloc(cap ? cap : 1, sizeof *d->live);
        if (!d->live) goto nomem;
        lmap idx = {0}; /* addr -> row in live */
        for (uint32_t i = 0; i < at.cap; i++) {
            if (at.val[i] == UINT32_MAX || (at.val[i] & LM_FREED)) continue;
            const mp_mem_event *e = &ev[at.val[i]];
            mp_mem_live *L = &d->live[d->nlive];
            *L = (mp_mem_live){e->size, -1, at.val[i], -1, e->addr, e->stack, 0, e->meta, MP_LO_TRACE, MP_MC_UNKNOWN};
            if (!lm_put(&idx, e->addr, d->nlive)) {
                lm_free(&idx);
                goto nomem;
            }
            d->nlive++;
        }
        /* after the peak: the frees of those, and the early frees (live
         * before recording, so live at the peak) */
        lmap seen = {0};
        for (int64_t i = d->peak_ev + 1; i < n; i++) {
            const mp_mem_event *e = &ev[i];
            if (!(e->flags & MP_ME_ADDR)) continue;
            if (e->action == MP_MA_ALLOC) {
                if (!lm_put(&seen, e->addr, (uint32_t)i)) goto nomem2;
                continue;
            }
            if (e->action != MP_MA_FREE_COMPLETED && e->action != MP_MA_FREE_REQUESTED) continue;
            if (lm_find(&seen, e->addr)) continue; /* a later allocation at the address */
            uint32_t *r = lm_find(&idx, e->addr);
            if (r) {
                mp_mem_live *L = &d->live[*r];
                if (e->stack && !L->free_stack) L->free_stack = e->stack;
                /* the first free of it: a free_requested releases it (a block may stay
                 * active_pending_free to the end, its free never completed) */
                if (L->free_ev < 0) L->free_ev = i;
                continue;
            }
            if (e->action == MP_MA_FREE_COMPLETED && !lm_find(&at, e->addr)) {
                /* freed, never allocated before: live from the start */
                mp_mem_live *L = &d->live[d->nlive];
                *L = (mp_mem_live){e->size, -1, -1, i, e->addr, 0, e->stack, 0, MP_LO_EARLY_FREE, MP_MC_UNKNOWN};
                if (!lm_put(&idx, e->addr, d->nlive) || !lm_put(&at, e->addr, LM_FREED | LM_EARLY)) goto nomem2;
                d->nlive++;
            }
        }
        /* final blocks counted at the start (live before recording) */
        for (uint32_t g = 0; g < s->nsegs; g++) {
            const mp_mem_segment *sg = &s->segs[g];
            if (sg->device != d->device) continue;
            for (uint32_t b = sg->first_block; b < sg->first_block + sg->nblocks; b++) {
                const mp_mem_block *B = &s->blocks[b];
                if (!block_active(B)) continue;
                uint32_t *r = lm_find(&idx, B->addr);
                if (r && d->live[*r].block_size < 0 && d->live[*r].free_ev < 0) d->live[*r].block_size = B->size;
                if (!B->early) continue;
                mp_mem_live *L = &d->live[d->nlive++];
                *L = (mp_mem_live){B->requested, B->size, -1, -1, B->addr, B->stack, 0, 0, MP_LO_FINAL_BLOCK, MP_MC_UNKNOWN};
            }
        }
        lm_free(&seen);
        lm_free(&idx);
        lm_free(&at);
        qsort(d->live, d->nlive, sizeof *d->live, live_cmp);
        return MP_OK;
    nomem2:
        lm_free(&seen);
        lm_free(&idx);
    }
nomem:
    lm_free(&at);
    return mp_error(MP_ERR_NOMEM, "out of memory (replay)");
}

/* One candidate into the k largest so far, largest first; equal sizes in
 * allocation order (as the peak's top list), whatever the map's order. */
static void keep_largest(mp_mem_holder *h, int k, int *n, mp_mem_holder c) {
    for (int q = 0; q < k; q++)
        if (q >= *n || c.size > h[q].size || (c.size == h[q].size && c.alloc_ev < h[q].alloc_ev)) {
            for (int z = k - 1; z > q; z--) h[z] = h[z - 1];
            h[q] = c;
            if (*n < k) (*n)++;
            return;
        }
}

mp_status mp_mem_largest_before(const mp_mem_device *d, uint32_t at, int k, mp_mem_holder *h, int *n) {
    *n = 0;
    /* the replay's address map: each address's latest alloc, LM_FREED once freed */
    lmap m = {0};
    for (uint32_t j = 0; j < at && j < d->nev; j++) {
        const mp_mem_event *e = &d->ev[j];
        if (!(e->flags & MP_ME_ADDR)) continue;
        if (e->action == MP_MA_ALLOC) {
            if (!lm_put(&m, e->addr, j)) {
                lm_free(&m);
                return mp_error(MP_ERR_NOMEM, "out of memory (replay)");
            }
        } else if (e->action == MP_MA_FREE_COMPLETED) {
            uint32_t *v = lm_find(&m, e->addr);
            if (v) *v |= LM_FREED;
        }
    }
    for (uint32_t i = 0; i < m.cap; i++)
        if (m.val[i] != UINT32_MAX && !(m.val[i] & LM_FREED)) {
            const mp_mem_event *e = &d->ev[m.val[i]];
            keep_largest(h, k, n, (mp_mem_holder){e->size, e->stack, m.val[i]});
        }
    lm_free(&m);
    for (uint32_t j = 0; j < d->nlive; j++) {
        const mp_mem_live *L = &d->live[j];
        if (L->alloc_ev < 0 && (L->free_ev < 0 || L->free_ev >= (int64_t)at))
            keep_largest(h, k, n, (mp_mem_holder){L->size, L->stack, -1});
    }
    return MP_OK;
}

mp_status mp_snapshot_analyze(mp_snapshot *s, const mp_mem_opts *o) {
    if (!s->user_frame) {
        s->user_frame = malloc((size_t)(s->nstacks ? s->nstacks : 1) * sizeof *s->user_frame);
        if (!s->user_frame) return mp_error(MP_ERR_NOMEM, "out of memory");
        for (uint32_t i = 0; i < s->nstacks; i++) s->user_frame[i] = UINT32_MAX - 1;
    }
    bool any = false;
    for (int i = 0; i < s->ndev; i++) {
        mp_mem_device *d = &s->dev[i];
        if (o && o->device >= 0 && d->device != o->device) continue;
        any = true;
        mp_status st = replay_device(s, d);
        if (!st) st = mp_mem_analyze_device(s, d);
        if (st) return st;
    }
    if (!any && o && o->device >= 0) {
        char list[128] = "";
        size_t l = 0;
        for (int i = 0; i < s->ndev && l + 8 < sizeof list; i++)
            l += (size_t)snprintf(list + l, sizeof list - l, "%s%d", i ? ", " : "", s->dev[i].device);
        return mp_error(MP_ERR_USAGE, "%s: --device %d: the snapshot has no such device (its devices: %s)", s->path, o->device,
                        list);
    }
    return MP_OK;
}
