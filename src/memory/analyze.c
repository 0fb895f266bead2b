/* What the replay found, read (docs/MEMORY.md): categories of the bytes
 * live at the peak, from each allocation's stack and lifetime; bytes by
 * source line; training steps from optimizer.step frames; findings in
 * plain words. */
#include "memory/memory.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const mp_mem_finding_kinds[MP_MF_KIND_COUNT] = {
    "one_entry_trace", "allocator_churn", "fragmentation", "leak", "gradients_alive",
    "spike", "oom", "replay_end", "no_frames",
};

mp_status mp_mem_add_finding(mp_snapshot *s, mp_mem_device *d, int kind, int64_t bytes, int64_t time_us,
                             int64_t event, const char *fmt, ...) {
    (void)s;
    mp_mem_finding *f = realloc(d->findings, (size_t)(d->nfindings + 1) * sizeof *f);
    if (!f) return mp_error(MP_ERR_NOMEM, "out of memory");
    d->findings = f;
    va_list ap;
    va_start(ap, fmt);
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *t = strdup(buf);
    if (!t) return mp_error(MP_ERR_NOMEM, "out of memory");
    f[d->nfindings++] = (mp_mem_finding){kind, bytes, time_us, event, t};
    return MP_OK;
}

/* ---- what a stack says (docs/MEMORY.md "Categories") ---- */
enum {
    SF_OPT = 1,      /* under an optimizer's step */
    SF_BWD = 2,      /* under autograd's backward */
    SF_ACCGRAD = 4,  /* AccumulateGrad: a .grad being made */
    SF_FWD = 8,      /* under an nn.Module call */
    SF_PARAM = 16,   /* parameters made or moved: Module._apply/.to/.cuda, reset_parameters, nn init */
    SF_DATA = 32,    /* torch.utils.data */
    SF_ZERO = 64,    /* Optimizer.zero_grad */
    SF_DONE = 128
};

static bool has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static uint8_t frame_flags(const mp_snapshot *s, const mp_mem_frame *f) {
    char fb[1024];
    const char *file = mp_mem_file_slashed(mp_mem_str(s, f->file), fb, sizeof fb), *name = mp_mem_str(s, f->name);
    uint8_t fl = 0;
    /* an optimizer's step; zero_grad is not (it runs before the forward) */
    if (strcmp(name, "zero_grad") == 0) fl |= SF_ZERO;
    else if (has(file, "torch/optim/") || (has(file, "optim") && strcmp(name, "step") == 0)) fl |= SF_OPT;
    if ((has(file, "torch/autograd/") && (strcmp(name, "backward") == 0 || has(name, "run_backward"))) ||
        (has(file, "torch/_tensor.py") && strcmp(name, "backward") == 0) || has(name, "autograd::Engine::") ||
        has(name, "torch::autograd::engine") || has(name, "evaluate_function") ||
        has(name, "torch::autograd::generated::") || has(name, "Backward"))
        fl |= SF_BWD;
    if (has(name, "AccumulateGrad") || has(name, "accumulateGrad") || has(name, "accumulate_grad")) fl |= SF_ACCGRAD | SF_BWD;
    if ((has(file, "torch/nn/modules/module.py") &&
         (strcmp(name, "_call_impl") == 0 || strcmp(name, "_wrapped_call_impl") == 0 || strcmp(name, "__call__") == 0)) ||
        strcmp(name, "forward") == 0)
        fl |= SF_FWD;
    if ((has(file, "torch/nn/modules/module.py") &&
         (strcmp(name, "_apply") == 0 || strcmp(name, "to") == 0 || strcmp(name, "cuda") == 0 ||
          strcmp(name, "to_empty") == 0 || strcmp(name, "_load_from_state_dict") == 0)) ||
        strcmp(name, "reset_parameters") == 0 || has(file, "torch/nn/init.py") || has(file, "torch/nn/parameter.py") ||
        (has(file, "torch/nn/modules/") && strcmp(name, "__init__") == 0))
        fl |= SF_PARAM;
    if (has(file, "torch/utils/data/")) fl |= SF_DATA;
    return fl;
}

typedef struct actx {
    mp_snapshot *s;
    uint8_t *sflags;  /* per stack */
    int64_t last_opt; /* the device's last event under an optimizer's step; -1 none */
} actx;

static uint8_t stack_flags_slow(actx *a, uint32_t st);
static inline uint8_t stack_flags(actx *a, uint32_t st) {
    if (st == 0 || st >= a->s->nstacks) return 0;
    uint8_t f = a->sflags[st];
    return (f & SF_DONE) ? (uint8_t)(f & ~SF_DONE) : stack_flags_slow(a, st);
}

static uint8_t stack_flags_slow(actx *a, uint32_t st) {
    uint32_t n;
    const uint32_t *f = mp_mem_stack(a->s, st, &n);
    uint8_t fl = 0;
    for (uint32_t i = 0; i < n; i++) fl |= frame_flags(a->s, &a->s->frames[f[i]]);
    if (fl & SF_ZERO) fl &= (uint8_t)~SF_OPT; /* zero_grad's own frames are in torch/optim */
    a->sflags[st] = fl | SF_DONE;
    return fl;
}

/* Each event's flags (an array of d->nev, to free): its stack's, and for
 * an event without frames in a snapshot that has them, SF_BWD when it
 * falls between a forward and the next optimizer step: the
 * autograd engine runs the backward on threads of its own, whose events
 * carry no Python frames. SF_AFTER_FWD marks every event in that span. */
#define SF_AFTER_FWD 128 /* in event flags only (SF_DONE is the stack cache's) */
static uint8_t *event_flags(actx *a, const mp_mem_device *d) {
    uint8_t *f = malloc(d->nev ? d->nev : 1);
    if (!f) return NULL;
    bool after_fwd = false;
    a->last_opt = -1;
    /* a trace that trains shows it somewhere with frames: loss.backward()'s
     * own allocations (its ones_like), an optimizer step, zero_grad. One
     * that shows none (inference: a forward and the code around it) has no
     * backward for frameless events to belong to */
    bool trains = false;
    for (uint32_t i = 0; i < d->nev && !trains; i++)
        if (d->ev[i].stack) trains = (stack_flags(a, d->ev[i].stack) & (SF_BWD | SF_OPT | SF_ACCGRAD)) != 0;
    for (uint32_t i = 0; i < d->nev; i++) {
        uint32_t st = d->ev[i].stack;
        if (st) {
            uint8_t fl = stack_flags(a, st);
            if (fl & SF_OPT) a->last_opt = i;
            if (fl & SF_OPT) after_fwd = false; /* zero_grad may come between forward and backward */
            else if ((fl & SF_FWD) && !(fl & SF_BWD)) after_fwd = true;
            f[i] = (uint8_t)(fl | (after_fwd && trains ? SF_AFTER_FWD : 0));
        } else {
            f[i] = after_fwd && trains && a->s->has_frames ? (uint8_t)(SF_BWD | SF_AFTER_FWD) : 0;
        }
    }
    return f;
}

static int categorize(actx *a, const mp_mem_device *d, const mp_mem_live *L, const int32_t *fwd_after,
                      const uint8_t *eff) {
    if (L->origin == MP_LO_EARLY_FREE) return MP_MC_UNKNOWN;
    uint8_t f = L->stack ? stack_flags(a, L->stack) : 0;
    if (L->alloc_ev >= 0 && eff) f |= eff[L->alloc_ev];
    if (!f && !L->stack) return MP_MC_UNKNOWN; /* no frames, nothing to place it by */
    uint8_t ff = L->free_stack ? stack_flags(a, L->free_stack) : 0;
    if (!L->free_stack && L->free_ev >= 0 && eff) ff = eff[L->free_ev];
    bool freed = L->free_ev >= 0;
    if (f & SF_OPT) return freed && (ff & SF_OPT) ? MP_MC_TEMPORARY : MP_MC_OPTIMIZER_STATE;
    if (f & SF_BWD) {
        if (f & SF_ACCGRAD) return MP_MC_GRADIENT;
        return freed && (ff & SF_BWD) ? MP_MC_TEMPORARY : MP_MC_GRADIENT;
    }
    if (f & SF_PARAM) return MP_MC_PARAMETER;
    if (f & SF_FWD) {
        if (!freed) return MP_MC_ACTIVATION;
        return (ff & SF_BWD) ? MP_MC_ACTIVATION : MP_MC_TEMPORARY;
    }
    if (f & SF_DATA) return MP_MC_INPUT;
    /* made by the user's own code after a forward, before the optimizer
     * step (the loss, what it reads of the outputs): kept for the backward */
    if (f & SF_AFTER_FWD) return MP_MC_ACTIVATION;
    /* made by the user's own code, outside any module, and alive while a
     * module's forward allocated: an input (a batch moved to the device)
     * when it is freed afterwards, or never freed with no optimizer step
     * after it (the trace ends in its step); one kept across steps is not */
    if (L->alloc_ev >= 0 && fwd_after && fwd_after[L->alloc_ev] >= 0 &&
        (freed ? fwd_after[L->alloc_ev] < L->free_ev : L->alloc_ev > a->last_opt))
        return MP_MC_INPUT;
    (void)d;
    return MP_MC_OTHER;
}

static int site_cmp(const void *x, const void *y) {
    const mp_mem_site *a = x, *b = y;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return a->frame < b->frame ? -1 : a->frame > b->frame;
}

static mp_status sites_at_peak(mp_snapshot *s, mp_mem_device *d) {
    d->sites = calloc(d->nlive ? d->nlive : 1, sizeof *d->sites);
    if (!d->sites) return mp_error(MP_ERR_NOMEM, "out of memory");
    /* few distinct sites: a small open table frame -> row */
    uint32_t cap = 64;
    while (cap < d->nlive * 2 + 2) cap *= 2;
    uint32_t *tab = malloc(cap * sizeof *tab);
    if (!tab) return mp_error(MP_ERR_NOMEM, "out of memory");
    memset(tab, 0xff, cap * sizeof *tab);
    for (uint32_t i = 0; i < d->nlive; i++) {
        uint32_t fr = mp_mem_user_frame(s, d->live[i].stack);
        uint32_t h = (fr * 2654435761u) & (cap - 1);
        while (tab[h] != UINT32_MAX && d->sites[tab[h]].frame != fr) h = (h + 1) & (cap - 1);
        if (tab[h] == UINT32_MAX) {
            tab[h] = d->nsites;
            d->sites[d->nsites++] = (mp_mem_site){fr, 0, 0};
        }
        mp_mem_site *S = &d->sites[tab[h]];
        S->bytes += d->live[i].size;
        S->count++;
    }
    free(tab);
    qsort(d->sites, d->nsites, sizeof *d->sites, site_cmp);
    return MP_OK;
}

/* A never-freed allocation of the leak finding: its site, step, size. */
typedef struct leak_row {
    uint32_t fr;
    int step;
    int64_t size;
} leak_row;

static int leak_row_cmp(const void *x, const void *y) {
    const leak_row *a = x, *b = y;
    return (a->fr > b->fr) - (a->fr < b->fr);
}

static void fmt_bytes(int64_t b, char *buf, size_t n) {
    double v = (double)b;
    const char *u = "B";
    if (b >= (INT64_C(1) << 30)) v /= (double)(INT64_C(1) << 30), u = "GiB";
    else if (b >= (1 << 20)) v /= (double)(1 << 20), u = "MiB";
    else if (b >= (1 << 10)) v /= 1024.0, u = "KiB";
    if (*u == 'B') snprintf(buf, n, "%lld B", (long long)b);
    else snprintf(buf, n, "%.2f %s", v, u);
}

/* Steps from optimizer.step frames: a step ends with the last event of
 * each run of events under an optimizer's step (events without frames,
 * such as free_completed, neither start nor end a run). */
static mp_status find_steps(actx *a, mp_mem_device *d, const int64_t *live_after) {
    const mp_mem_event *ev = d->ev;
    int64_t n = d->nev, prev_end = -1;
    bool in_run = false;
    int64_t run_last = -1;
    int cap = 0;
    for (int64_t i = 0; i <= n; i++) {
        bool opt = false, neutral = true;
        if (i < n && ev[i].stack) {
            neutral = false;
            opt = stack_flags(a, ev[i].stack) & SF_OPT;
        }
        if (i < n && opt) {
            in_run = true;
            run_last = i;
            continue;
        }
        if (i < n && neutral) continue;
        if (in_run) { /* the run ended at run_last */
            if (d->nsteps == cap) {
                cap = cap ? cap * 2 : 16;
                mp_mem_step *ns = realloc(d->steps, (size_t)cap * sizeof *ns);
                if (!ns) return mp_error(MP_ERR_NOMEM, "out of memory");
                d->steps = ns;
            }
            mp_mem_step *S = &d->steps[d->nsteps++];
            S->first_ev = prev_end + 1;
            S->last_ev = run_last;
            S->start_bytes = prev_end >= 0 ? live_after[prev_end] : d->start_requested;
            S->end_bytes = live_after[run_last];
            S->peak_bytes = S->start_bytes;
            S->peak_ev = S->first_ev - 1;
            for (int64_t j = S->first_ev; j <= run_last; j++)
                if (live_after[j] > S->peak_bytes) {
                    S->peak_bytes = live_after[j];
                    S->peak_ev = j;
                }
            S->t0_us = ev[S->first_ev].time_us;
            S->t1_us = ev[run_last].time_us;
            prev_end = run_last;
            in_run = false;
        }
    }
    d->steps_from = d->nsteps ? "optimizer.step frames" : "none";
    return MP_OK;
}

static mp_status add_step(mp_mem_device *d, int *cap, int64_t first, int64_t last, const int64_t *live_after) {
    if (d->nsteps == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        mp_mem_step *ns = realloc(d->steps, (size_t)*cap * sizeof *ns);
        if (!ns) return mp_error(MP_ERR_NOMEM, "out of memory");
        d->steps = ns;
    }
    mp_mem_step *S = &d->steps[d->nsteps++];
    S->first_ev = first;
    S->last_ev = last;
    S->start_bytes = first > 0 ? live_after[first - 1] : d->start_requested;
    S->end_bytes = live_after[last];
    S->peak_bytes = S->start_bytes;
    S->peak_ev = first - 1;
    for (int64_t j = first; j <= last; j++)
        if (live_after[j] > S->peak_bytes) S->peak_bytes = live_after[j], S->peak_ev = j;
    S->t0_us = d->ev[first].time_us;
    S->t1_us = d->ev[last].time_us;
    return MP_OK;
}

/* Without optimizer frames: steps from the periodic pattern of the
 * allocations (docs/MEMORY.md "Steps"). The period g: of the 16 most
 * frequent gaps between repeats of a run of three request sizes, the
 * smallest after which the sequence of request sizes repeats itself at
 * 85 % of its places, at least twice over; a step starts at the phase of
 * the period where the bytes live are lowest (the baseline). */

static mp_status periodic_steps(mp_mem_device *d, const int64_t *live_after) {
    uint32_t m = 0;
    for (uint32_t i = 0; i < d->nev; i++) m += d->ev[i].action == MP_MA_ALLOC;
    if (m < 16) return MP_OK;
    int64_t *sz = malloc((size_t)m * sizeof *sz);
    uint32_t *at = malloc((size_t)m * sizeof *at); /* alloc rank -> event */
    mp_status st = MP_OK;
    if (!sz || !at) {
        st = mp_error(MP_ERR_NOMEM, "out of memory");
        goto out;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < d->nev; i++)
        if (d->ev[i].action == MP_MA_ALLOC) sz[k] = d->ev[i].size, at[k++] = i;
    /* candidate periods: the most frequent gaps between repeats of each
     * run of three request sizes (a hash of the three -> where last seen) */
    uint32_t cand[16];
    int nc = 0;
    {
        uint32_t hcap = 1;
        while (hcap < 2 * m) hcap <<= 1;
        uint64_t *hk = malloc((size_t)hcap * sizeof *hk);
        uint32_t *hv = malloc((size_t)hcap * sizeof *hv);
        uint32_t *hist = calloc((size_t)m / 2 + 1, sizeof *hist);
        if (!hk || !hv || !hist) {
            free(hk), free(hv), free(hist);
            st = mp_error(MP_ERR_NOMEM, "out of memory");
            goto out;
        }
        memset(hv, 0xff, (size_t)hcap * sizeof *hv);
        for (uint32_t i = 0; i + 2 < m; i++) {
            uint64_t key = (uint64_t)sz[i] * 0x9e3779b97f4a7c15u ^ (uint64_t)sz[i + 1] * 0xc2b2ae3d27d4eb4fu ^
                           (uint64_t)sz[i + 2] * 0x165667b19e3779f9u;
            uint32_t h = (uint32_t)(key >> 32) & (hcap - 1);
            while (hv[h] != UINT32_MAX && hk[h] != key) h = (h + 1) & (hcap - 1);
            if (hv[h] != UINT32_MAX) {
                uint32_t gap = i - hv[h];
                if (gap >= 4 && gap <= m / 2) hist[gap]++;
            }
            hk[h] = key;
            hv[h] = i;
        }
        for (int q = 0; q < 16; q++) { /* the 16 most frequent gaps */
            uint32_t bg = 0, bn = 0;
            for (uint32_t gg = 4; gg <= m / 2; gg++)
                if (hist[gg] > bn) bn = hist[gg], bg = gg;
            if (!bn) break;
            cand[nc++] = bg;
            hist[bg] = 0;
        }
        free(hk), free(hv), free(hist);
    }
    uint32_t g = 0;
    for (int c = 0; c < nc; c++) {
        if (g && cand[c] >= g) continue;
        uint32_t same = 0, total = m - cand[c];
        for (uint32_t i = 0; i + cand[c] < m; i++) same += sz[i] == sz[i + cand[c]];
        if ((uint64_t)same * 100 >= (uint64_t)total * 85 && m / cand[c] >= 2) g = cand[c];
    }
    if (!g) goto out;
    /* the phase with the lowest bytes live before its allocation */
    uint32_t phase = 0;
    double best = 0;
    for (uint32_t r = 0; r < g; r++) {
        double sum = 0;
        uint32_t cnt = 0;
        for (uint32_t i = r; i < m; i += g) {
            sum += (double)(at[i] ? live_after[at[i] - 1] : d->start_requested);
            cnt++;
        }
        if (cnt && (r == 0 || sum / cnt < best)) best = sum / cnt, phase = r;
    }
    int cap = 0;
    for (uint32_t i = phase; i + g < m && !st; i += g) st = add_step(d, &cap, at[i], (int64_t)at[i + g] - 1, live_after);
    if (st) goto out;
    /* a step returns near its baseline: a period whose live bytes mostly
     * stay (the layers of one forward, each adding its activations) is
     * not a training step. Kept when most steps end within half their
     * rise above their start. */
    int ok = 0;
    for (int q = 0; q < d->nsteps; q++) {
        const mp_mem_step *S = &d->steps[q];
        int64_t rise = S->peak_bytes - S->start_bytes, kept = S->end_bytes - S->start_bytes;
        if (kept < 0) kept = -kept;
        ok += rise > 0 && kept * 2 <= rise;
    }
    if (d->nsteps >= 2 && ok * 2 > d->nsteps) d->steps_from = "periodic allocations";
    else d->nsteps = 0;
out:
    free(sz);
    free(at);
    return st;
}

/* The live curve again (the replay's rules: a free takes its alloc's
 * size): live bytes after each event into live_after, and the index of
 * each allocation's free into free_of (-1 never freed); either may be
 * NULL. False when out of memory. */
static bool curve(const mp_mem_device *d, int64_t *live_after, int32_t *free_of) {
    const mp_mem_event *ev = d->ev;
    uint32_t cap = 1024, nused = 0;
    uint64_t *key = malloc(cap * sizeof *key);
    int64_t *val = malloc(cap * sizeof *val);
    uint32_t *aix = malloc(cap * sizeof *aix);
    uint8_t *used = calloc(cap, 1); /* 0 empty, 1 live, 2 freed */
    int64_t cur = d->start_requested;
    bool ok = key && val && aix && used;
    for (uint32_t i = 0; ok && free_of && i < d->nev; i++) free_of[i] = -1;
    for (uint32_t i = 0; ok && i < d->nev; i++) {
        const mp_mem_event *e = &ev[i];
        if ((e->action == MP_MA_ALLOC || e->action == MP_MA_FREE_COMPLETED) && (e->flags & MP_ME_ADDR)) {
            if ((nused + 1) * 2 > cap) {
                uint32_t nc = cap * 2;
                uint64_t *k2 = malloc(nc * sizeof *k2);
                int64_t *v2 = malloc(nc * sizeof *v2);
                uint8_t *u2 = calloc(nc, 1);
                uint32_t *a2 = malloc(nc * sizeof *a2);
                if (!k2 || !v2 || !u2 || !a2) {
                    free(k2), free(v2), free(u2), free(a2);
                    ok = false;
                    break;
                }
                for (uint32_t j = 0; j < cap; j++)
                    if (used[j]) {
                        uint32_t h = (uint32_t)((key[j] * 0x9e3779b97f4a7c15u) >> 32) & (nc - 1);
                        while (u2[h]) h = (h + 1) & (nc - 1);
                        k2[h] = key[j], v2[h] = val[j], u2[h] = used[j], a2[h] = aix[j];
                    }
                free(key), free(val), free(used), free(aix);
                key = k2, val = v2, used = u2, aix = a2, cap = nc;
            }
            uint32_t h = (uint32_t)((e->addr * 0x9e3779b97f4a7c15u) >> 32) & (cap - 1);
            while (used[h] && key[h] != e->addr) h = (h + 1) & (cap - 1);
            if (e->action == MP_MA_ALLOC) {
                if (used[h] == 1) cur -= val[h]; /* still live: taken as freed */
                if (!used[h]) nused++;
                key[h] = e->addr, val[h] = e->size, used[h] = 1, aix[h] = i;
                cur += e->size;
            } else if (!used[h]) {
                key[h] = e->addr, val[h] = 0, used[h] = 2, aix[h] = UINT32_MAX, nused++;
                cur -= e->size;
            } else if (used[h] == 1) {
                cur -= val[h];
                used[h] = 2;
                if (free_of) free_of[aix[h]] = (int32_t)i;
            }
        }
        if (live_after) live_after[i] = cur;
    }
    free(key), free(val), free(used), free(aix);
    return ok;
}

mp_status mp_mem_alloc_categories(mp_snapshot *s, const mp_mem_device *d, uint8_t *cat, int32_t *free_of) {
    actx a = {s, calloc(s->nstacks ? s->nstacks : 1, 1)};
    int32_t *fwd_after = malloc((size_t)(d->nev ? d->nev : 1) * sizeof *fwd_after);
    uint8_t *eff = NULL;
    mp_status st = MP_OK;
    if (!a.sflags || !fwd_after || !curve(d, NULL, free_of) || !(eff = event_flags(&a, d))) {
        st = mp_error(MP_ERR_NOMEM, "out of memory");
        goto out;
    }
    int64_t next = -1;
    for (int64_t i = (int64_t)d->nev - 1; i >= 0; i--) {
        fwd_after[i] = (int32_t)next;
        if (d->ev[i].action == MP_MA_ALLOC && (eff[i] & SF_FWD) && !(eff[i] & (SF_BWD | SF_OPT))) next = i;
    }
    for (uint32_t i = 0; i < d->nev; i++) {
        const mp_mem_event *e = &d->ev[i];
        if (e->action != MP_MA_ALLOC) {
            cat[i] = MP_MC_UNKNOWN;
            continue;
        }
        mp_mem_live L = {e->size, -1, i, free_of[i], e->addr, e->stack,
                         free_of[i] >= 0 ? d->ev[free_of[i]].stack : 0, e->meta, MP_LO_TRACE, MP_MC_UNKNOWN};
        cat[i] = (uint8_t)categorize(&a, d, &L, fwd_after, eff);
    }
out:
    free(a.sflags);
    free(fwd_after);
    free(eff);
    return st;
}

typedef struct tix {
    int64_t t;
    uint32_t i;
} tix;
static int i64_cmp(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static int tix_cmp(const void *x, const void *y) {
    const tix *a = x, *b = y;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

mp_status mp_mem_analyze_device(mp_snapshot *s, mp_mem_device *d) {
    mp_status st = MP_OK;
    /* two stages, so that the per-event arrays of the first (free_of,
     * fwd_after: 8 bytes an event) are gone before the second's
     * (live_after: 8) exist */
    actx a = {s, calloc(s->nstacks ? s->nstacks : 1, 1)};
    int64_t *live_after = NULL;
    int32_t *fwd_after = malloc((size_t)(d->nev ? d->nev : 1) * sizeof *fwd_after);
    int32_t *free_of = malloc((size_t)(d->nev ? d->nev : 1) * sizeof *free_of);
    int64_t grad_best = 0, grad_fwd = -1, grad_steps = 0;
    uint8_t *eff = NULL;
    if (!a.sflags || !fwd_after || !free_of || !curve(d, NULL, free_of) || !(eff = event_flags(&a, d))) {
        st = mp_error(MP_ERR_NOMEM, "out of memory");
        goto out;
    }
    {
        /* the next event at or after each one allocated under a module's forward */
        const mp_mem_event *ev = d->ev;
        int64_t next = -1;
        for (int64_t i = (int64_t)d->nev - 1; i >= 0; i--) {
            fwd_after[i] = (int32_t)next;
            if (ev[i].action != MP_MA_ALLOC) continue;
            uint8_t f = eff[i];
            if ((f & SF_FWD) && !(f & (SF_BWD | SF_OPT))) next = i;
        }
    }
    /* gradients alive through the next forward: made in a backward, not
     * freed in it, and still live when a later forward allocates (the
     * gradients of one backward share that next forward: grouped by it) */
    {
        int64_t prev_fwd = -2, cur_sum = 0;
        for (uint32_t i = 0; i < d->nev; i++) {
            const mp_mem_event *e = &d->ev[i];
            if (e->action != MP_MA_ALLOC || free_of[i] < 0) continue;
            uint8_t f = eff[i];
            if (!(f & SF_BWD) || (f & SF_OPT)) continue;
            int64_t fw = fwd_after[i];
            if (fw < 0 || fw >= free_of[i]) continue;
            /* freed in the backward (a temporary of it) is not a gradient */
            uint8_t ff = eff[free_of[i]];
            if ((ff & SF_BWD) && !(ff & SF_ZERO)) continue;
            if (fw != prev_fwd) {
                if (cur_sum > grad_best) grad_best = cur_sum, grad_fwd = prev_fwd;
                cur_sum = 0;
                prev_fwd = fw;
                grad_steps++;
            }
            cur_sum += e->size;
        }
        if (cur_sum > grad_best) grad_best = cur_sum, grad_fwd = prev_fwd;
    }
    /* module paths from 'nn.Module: PATH' ranges where the events carry none:
     * the innermost range open on this device when the allocation was made
     * (one sweep: the allocations by time against the ranges in order) */
    if (s->nannots && d->nlive) {
        tix *ord = malloc((size_t)d->nlive * sizeof *ord);
        if (!ord) {
            st = mp_error(MP_ERR_NOMEM, "out of memory");
            goto out;
        }
        uint32_t no = 0;
        for (uint32_t i = 0; i < d->nlive; i++) {
            const mp_mem_live *L = &d->live[i];
            if (!L->meta && L->alloc_ev >= 0 && d->ev[L->alloc_ev].time_us != MP_MEM_NO_TIME)
                ord[no++] = (tix){d->ev[L->alloc_ev].time_us, i};
        }
        qsort(ord, no, sizeof *ord, tix_cmp);
        uint16_t open[64];
        int depth = 0;
        uint32_t q = 0;
        for (uint32_t o = 0; o < no; o++) {
            mp_mem_live *L = &d->live[ord[o].i];
            int64_t t = ord[o].t;
            for (; q < s->nannots && s->annots[q].time_us <= t; q++) {
                const mp_mem_annot *A = &s->annots[q];
                if (A->device != d->device) continue;
                if (A->start) {
                    if (depth < 64) open[depth] = A->meta;
                    depth++;
                } else if (depth > 0) {
                    depth--; /* ranges nest: an END closes the innermost */
                }
            }
            if (depth > 0) L->meta = open[MP_MIN(depth, 64) - 1];
        }
        free(ord);
    }
    bool frames = false;
    for (uint32_t i = 0; i < d->nlive; i++) {
        mp_mem_live *L = &d->live[i];
        L->category = (uint8_t)categorize(&a, d, L, fwd_after, eff);
        d->categories[L->category] += L->size;
        if (L->stack) frames = true;
    }
    for (uint32_t i = 0; !frames && i < d->nev; i++)
        if (d->ev[i].stack) frames = true;
    free(fwd_after);
    free(free_of);
    free(eff);
    fwd_after = NULL;
    free_of = NULL;
    eff = NULL;
    live_after = malloc((size_t)(d->nev ? d->nev : 1) * sizeof *live_after);
    if (!live_after || !curve(d, live_after, NULL)) {
        st = mp_error(MP_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((st = sites_at_peak(s, d))) goto out;
    if ((st = find_steps(&a, d, live_after))) goto out;
    if (!d->nsteps && (st = periodic_steps(d, live_after))) goto out;

    /* ---- findings ---- */
    char b1[32], b2[32], b3[32];
    if (d->has_trace && d->nev == 1)
        st = mp_mem_add_finding(
            s, d, MP_MF_ONE_ENTRY, 0, MP_MEM_NO_TIME, 0,
            "The trace holds a single event: the snapshot was recorded with the old "
            "_record_memory_history(True), whose buffer keeps one event. The peak below is the state "
            "%s that event. Record a history with torch.cuda.memory._record_memory_history(max_entries=100000) "
            "before the model runs, then torch.cuda.memory._dump_snapshot(\"snapshot.pickle\").",
            d->peak_ev < 0 ? "before" : "after"); /* an alloc reaches it after; a free, or nothing, before */
    if (!st && !frames && d->nlive)
        st = mp_mem_add_finding(s, d, MP_MF_NO_FRAMES, d->peak_requested, d->peak_time_us, d->peak_ev,
                                "No allocation carries a stack: categories at the peak are \"unknown\". Record with "
                                "_record_memory_history(max_entries=..., stacks=\"python\") (or \"all\") to tell "
                                "parameters, gradients, optimizer states and activations apart.");
    if (!st && d->replay_end_requested != d->end_requested) {
        fmt_bytes(d->replay_end_requested, b1, sizeof b1);
        fmt_bytes(d->end_requested, b2, sizeof b2);
        st = mp_mem_add_finding(
            s, d, MP_MF_REPLAY_END, d->replay_end_requested - d->end_requested, d->last_time_us, (int64_t)d->nev - 1,
            "The replay ends with %s live, the final segments' active blocks hold %s (difference %lld bytes): "
            "allocations whose free the trace records as completed while their block is still active (or the "
            "reverse) are counted as the trace says; %lld replay warning(s).",
            b1, b2, (long long)(d->replay_end_requested - d->end_requested), (long long)d->warn_count);
    }
    /* OOM */
    for (uint32_t i = 0; !st && i < d->nev; i++) {
        const mp_mem_event *e = &d->ev[i];
        if (e->action != MP_MA_OOM) continue;
        int64_t dfree = -1;
        uint64_t gid = (uint64_t)(e - s->ev);
        for (uint64_t j = 0; j < s->ndevice_free; j++)
            if ((uint64_t)s->device_free[2 * j] == gid) dfree = s->device_free[2 * j + 1];
        int64_t alloc_now = i ? live_after[i - 1] : d->start_requested;
        /* the three largest holders when the request failed (not at the
         * peak: a tensor freed since, or made after it, changes why) */
        mp_mem_holder h[3];
        int nh = 0;
        st = mp_mem_largest_before(d, i, 3, h, &nh);
        if (st) break;
        char top[400] = "";
        size_t tl = 0;
        for (int j = 0; j < nh && tl + 100 < sizeof top; j++) {
            char fb[200];
            uint32_t fr = mp_mem_user_frame(s, h[j].stack);
            fmt_bytes(h[j].size, b3, sizeof b3);
            tl += (size_t)snprintf(top + tl, sizeof top - tl, "%s%s at %s", j ? "; " : "", b3,
                                   fr == UINT32_MAX ? "(no user frame)" : mp_mem_frame_text(s, fr, fb, sizeof fb));
        }
        fmt_bytes(e->size, b1, sizeof b1);
        fmt_bytes(alloc_now, b2, sizeof b2);
        char fb3[32], fb4[32], fb5[32];
        fmt_bytes(d->reserved_at_peak, fb3, sizeof fb3);
        fmt_bytes(dfree, fb4, sizeof fb4);
        fmt_bytes(d->largest_free_block, fb5, sizeof fb5);
        st = mp_mem_add_finding(s, d, MP_MF_OOM, e->size, e->time_us, i,
                                "Out of memory at event %u: a request of %s failed with %s allocated, %s reserved "
                                "(at the peak), %s free on the device%s; the largest inactive cached block at the end "
                                "is %s. Largest holders when it failed: %s.",
                                i, b1, b2, fb3, dfree >= 0 ? fb4 : "unknown", dfree >= 0 ? "" : " (not recorded)", fb5,
                                top[0] ? top : "none");
    }
    /* the segments are expandable already (the run set expandable_segments:True): no advice to set it */
    bool expandable = false;
    for (uint32_t i = 0; i < s->nsegs && !expandable; i++)
        expandable = s->segs[i].device == d->device && s->segs[i].expandable;
    /* fragmentation at the peak */
    if (!st && d->reserved_at_peak > d->peak_requested) {
        int64_t cache = d->reserved_at_peak - d->peak_requested;
        if (cache * 5 > d->reserved_at_peak) { /* more than a fifth of what is reserved */
            fmt_bytes(cache, b1, sizeof b1);
            fmt_bytes(d->reserved_at_peak, b2, sizeof b2);
            fmt_bytes(d->end_inactive_split_bytes, b3, sizeof b3);
            /* what is true at the end: split blocks, or none (every segment
             * released, or none split), never "0 inactive block(s) (0 B)" */
            char end[240];
            if (d->end_inactive_split_blocks > 0)
                snprintf(end, sizeof end,
                         "At the end, %lld inactive block(s) (%s) sit split inside segments that hold live blocks: "
                         "memory the allocator cannot return or hand to a larger request.",
                         (long long)d->end_inactive_split_blocks, b3);
            else if (d->end_reserved == 0)
                snprintf(end, sizeof end, "By the end every segment is released (0 B reserved).");
            else
                snprintf(end, sizeof end, "At the end no inactive block sits split inside a segment that holds "
                                          "live blocks.");
            st = mp_mem_add_finding(
                s, d, MP_MF_FRAGMENTATION, cache, d->peak_time_us, d->peak_ev,
                "At the peak %s of the %s reserved is not in use (the caching allocator's cache and rounding). "
                "%s%s",
                b1, b2, end,
                expandable ? " The segments are expandable already (expandable_segments:True): what remains is "
                             "the cache and the rounding."
                           : " PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True reduces it.");
        }
    }
    /* churn: cudaMalloc/cudaFree after the first step */
    if (!st && d->nsteps >= 2) {
        int64_t cnt = 0, bytes = 0, t0 = MP_MEM_NO_TIME;
        for (int64_t i = d->steps[0].last_ev + 1; i < d->nev; i++) {
            int ac = d->ev[i].action;
            if (ac == MP_MA_SEGMENT_ALLOC || ac == MP_MA_SEGMENT_FREE) {
                cnt++;
                bytes += d->ev[i].size;
                if (t0 == MP_MEM_NO_TIME) t0 = d->ev[i].time_us;
            }
        }
        if (cnt) {
            fmt_bytes(bytes, b1, sizeof b1);
            st = mp_mem_add_finding(s, d, MP_MF_CHURN, bytes, t0, -1,
                                    "Allocator churn: %lld cudaMalloc/cudaFree (segment_alloc/segment_free) after the "
                                    "first step, %s in all. Each is a synchronising driver call. Keep shapes fixed "
                                    "from step to step%s.",
                                    (long long)cnt, b1,
                                    expandable ? "" : ", or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
        }
    }
    /* leak: the baseline rising step after step */
    if (!st && d->nsteps >= 3) {
        bool rising = true;
        for (int i = 1; i < d->nsteps; i++)
            if (d->steps[i].end_bytes <= d->steps[i - 1].end_bytes) rising = false;
        if (rising) {
            int64_t grow = d->steps[d->nsteps - 1].end_bytes - d->steps[0].end_bytes;
            /* the sites whose allocations made after the first step are still live at the peak
             * and never freed, by bytes */
            char sites[400] = "";
            size_t sl = 0;
            uint32_t fr_top[3] = {UINT32_MAX, UINT32_MAX, UINT32_MAX};
            int64_t by_top[3] = {0, 0, 0}, n_top[3] = {0, 0, 0};
            int shown = 0;
            /* the allocations made after step 1 and never freed, grouped by
             * site in one sort (a scan per site was quadratic, and was cut
             * off after one site past 4,096 live allocations) */
            leak_row *rows = malloc(((size_t)d->nlive + 1) * sizeof *rows);
            if (!rows) return mp_error(MP_ERR_NOMEM, "out of memory");
            uint32_t nr = 0;
            for (uint32_t j = 0; j < d->nlive; j++) {
                const mp_mem_live *L = &d->live[j];
                if (L->alloc_ev <= d->steps[0].last_ev || L->free_ev >= 0) continue;
                int k = 0; /* its step (nsteps: after the last) */
                while (k < d->nsteps && d->steps[k].last_ev < L->alloc_ev) k++;
                rows[nr++] = (leak_row){mp_mem_user_frame(s, L->stack), k, L->size};
            }
            qsort(rows, nr, sizeof *rows, leak_row_cmp);
            for (uint32_t ra = 0; ra < nr;) {
                uint32_t rb = ra;
                int64_t sum = 0, cnt = 0;
                int st_min = INT32_MAX, st_max = -1;
                for (; rb < nr && rows[rb].fr == rows[ra].fr; rb++) {
                    sum += rows[rb].size, cnt++;
                    st_min = MP_MIN(st_min, rows[rb].step), st_max = MP_MAX(st_max, rows[rb].step);
                }
                /* a leak's site keeps allocations of several steps (the last
                 * step's gradients, say, are of one); the three largest */
                if (st_min < st_max)
                    for (int q = 0; q < 3; q++)
                        if (sum > by_top[q]) {
                            for (int z = 2; z > q; z--)
                                fr_top[z] = fr_top[z - 1], by_top[z] = by_top[z - 1], n_top[z] = n_top[z - 1];
                            fr_top[q] = rows[ra].fr, by_top[q] = sum, n_top[q] = cnt;
                            break;
                        }
                ra = rb;
            }
            free(rows);
            for (int q = 0; q < 3 && by_top[q] && sl + 120 < sizeof sites; q++) {
                char fb[200];
                fmt_bytes(by_top[q], b3, sizeof b3);
                sl += (size_t)snprintf(sites + sl, sizeof sites - sl, "%s%s in %lld allocation(s) at %s", shown ? "; " : "", b3,
                                       (long long)n_top[q],
                                       fr_top[q] == UINT32_MAX ? "(no user frame)" : mp_mem_frame_text(s, fr_top[q], fb, sizeof fb));
                shown++;
            }
            fmt_bytes(grow, b1, sizeof b1);
            st = mp_mem_add_finding(s, d, MP_MF_LEAK, grow, d->steps[d->nsteps - 1].t1_us, d->steps[d->nsteps - 1].last_ev,
                                    "A leak: the memory left at the end of each step rises every step, by %s from "
                                    "step 1 to step %d. Never freed since: %s.",
                                    b1, d->nsteps, sites[0] ? sites : "(no allocation live at the peak)");
        }
    }
    if (!st && grad_best > 0 && grad_fwd >= 0) {
        fmt_bytes(grad_best, b1, sizeof b1);
        st = mp_mem_add_finding(s, d, MP_MF_GRAD_ALIVE, grad_best, d->ev[grad_fwd].time_us, grad_fwd,
                                "Gradients kept alive through the next forward: up to %s of gradients made in a "
                                "backward are still live when the next forward allocates (event %lld; %lld "
                                "forward pass(es) affected), so they add to that forward's activations. Call "
                                "optimizer.zero_grad(set_to_none=True) before the forward (set_to_none is the "
                                "default since PyTorch 2.0), not after it.",
                                b1, (long long)grad_fwd, (long long)grad_steps);
    }
    /* short-lived spikes that set the peak: live at the peak, allocated
     * and freed within 1% of a step's events around it (the median step's;
     * without steps, the recording's), so the verdict on one pattern does
     * not hang on how many steps were recorded */
    int64_t ref = d->nev;
    if (d->nsteps > 0) {
        int64_t *len = malloc((size_t)d->nsteps * sizeof *len);
        if (!len && !st) st = mp_error(MP_ERR_NOMEM, "out of memory");
        for (int i = 0; len && i < d->nsteps; i++) len[i] = d->steps[i].last_ev - d->steps[i].first_ev + 1;
        if (len) qsort(len, (size_t)d->nsteps, sizeof *len, i64_cmp);
        if (len) ref = len[(d->nsteps - 1) / 2];
        free(len);
    }
    if (!st && d->peak_ev >= 0 && ref >= 100) {
        int64_t win = ref / 100, bytes = 0, cnt = 0;
        uint32_t fr0 = UINT32_MAX;
        for (uint32_t j = 0; j < d->nlive; j++) {
            const mp_mem_live *L = &d->live[j];
            if (L->alloc_ev < 0 || L->free_ev < 0) continue;
            if (d->peak_ev - L->alloc_ev <= win && L->free_ev - d->peak_ev <= win) {
                bytes += L->size;
                cnt++;
                if (fr0 == UINT32_MAX) fr0 = mp_mem_user_frame(s, L->stack);
            }
        }
        if (bytes * 10 > d->peak_requested) {
            char fb[200];
            fmt_bytes(bytes, b1, sizeof b1);
            fmt_bytes(d->peak_requested, b2, sizeof b2);
            st = mp_mem_add_finding(s, d, MP_MF_SPIKE, bytes, d->peak_time_us, d->peak_ev,
                                    "A short-lived spike sets the peak: %lld allocation(s), %s of the %s peak, are "
                                    "made and freed within %lld events of it (1%% of %s; the largest from %s). "
                                    "Freeing or chunking that work lowers the peak by up to that much.",
                                    (long long)cnt, b1, b2, (long long)win,
                                    d->nsteps > 0 ? "the median step" : "the recording",
                                    fr0 == UINT32_MAX ? "(no user frame)" : mp_mem_frame_text(s, fr0, fb, sizeof fb));
        }
    }
out:
    free(a.sflags);
    free(live_after);
    free(fwd_after);
    free(free_of);
    free(eff);
    return st;
}
