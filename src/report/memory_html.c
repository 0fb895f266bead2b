/* The memory report as one self-contained HTML page: the JSON report
 * (the one source of every number) and, per device, a timeline of live
 * memory with a level of detail that keeps a million events light.
 *
 * Level of detail (docs/MEMORY.md "HTML timeline"): the trace's states
 * (the start and after each event) are cut into at most MEMH_COLS
 * columns; each column shows the state where its live bytes are highest,
 * so every peak is drawn at its height. The MEMH_BANDS largest
 * allocations are drawn one by one, stacked in the order they were made;
 * every other allocation is in its category's band on top of them, so
 * each column adds up to the exact bytes live in that state. Nothing is
 * left out: the page says how many allocations each band holds. */
#include "report/memory_report.h"
#include "report/jw.h"
#include "memory_html.h" /* build/gen: the template (src/report/html/memory.*) */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEMH_COLS 1200
#define MEMH_BANDS 400

typedef struct memh_alloc {
    int64_t size;
    int64_t alloc_ev, free_ev; /* -1: before recording / never freed */
    uint32_t stack;
    uint8_t cat;
} memh_alloc;

static int alloc_cmp(const void *x, const void *y) {
    const memh_alloc *a = x, *b = y;
    if (a->size != b->size) return a->size > b->size ? -1 : 1;
    return a->alloc_ev < b->alloc_ev ? -1 : a->alloc_ev > b->alloc_ev;
}

static int alloc_order(const void *x, const void *y) {
    const memh_alloc *a = x, *b = y;
    return a->alloc_ev < b->alloc_ev ? -1 : a->alloc_ev > b->alloc_ev;
}

typedef struct amap {
    uint64_t *key;
    int32_t *val; /* alloc event, or -2 freed before any alloc */
    uint8_t *used;
    uint32_t cap, n;
} amap;

static int32_t *am_slot(amap *m, uint64_t a, bool add) {
    if (add && (m->n + 1) * 2 > m->cap) {
        uint32_t nc = m->cap ? m->cap * 2 : 1024;
        uint64_t *k = malloc(nc * sizeof *k);
        int32_t *v = malloc(nc * sizeof *v);
        uint8_t *u = calloc(nc, 1);
        if (!k || !v || !u) {
            free(k), free(v), free(u);
            return NULL;
        }
        for (uint32_t i = 0; i < m->cap; i++)
            if (m->used[i]) {
                uint32_t h = (uint32_t)((m->key[i] * 0x9e3779b97f4a7c15u) >> 32) & (nc - 1);
                while (u[h]) h = (h + 1) & (nc - 1);
                k[h] = m->key[i], v[h] = m->val[i], u[h] = m->used[i];
            }
        free(m->key), free(m->val), free(m->used);
        m->key = k, m->val = v, m->used = u, m->cap = nc;
    }
    if (!m->cap) return NULL;
    uint32_t h = (uint32_t)((a * 0x9e3779b97f4a7c15u) >> 32) & (m->cap - 1);
    while (m->used[h]) {
        if (m->key[h] == a) return &m->val[h];
        h = (h + 1) & (m->cap - 1);
    }
    if (!add) return NULL;
    m->used[h] = 1;
    m->key[h] = a;
    m->n++;
    return &m->val[h];
}

static void am_free(amap *m) {
    free(m->key), free(m->val), free(m->used);
    memset(m, 0, sizeof *m);
}

static void frame_str(jw *w, const mp_snapshot *s, uint32_t fr) {
    char b[600];
    if (fr == UINT32_MAX) jw_str(w, "(no user frame)");
    else jw_str(w, mp_mem_frame_text(s, fr, b, sizeof b));
}

/* One device's timeline as JSON. */
static mp_status timeline_json(jw *w, mp_snapshot *s, const mp_mem_device *d) {
    uint32_t n = d->nev;
    uint8_t *cat = malloc((size_t)(n ? n : 1));
    int32_t *free_of = malloc((size_t)(n ? n : 1) * sizeof *free_of);
    memh_alloc *al = NULL;
    int64_t *rest = NULL, *total = NULL, *col_ev = NULL;
    amap m = {0};
    mp_status st = MP_OK;
    if (!cat || !free_of) goto nomem;
    if ((st = mp_mem_alloc_categories(s, d, cat, free_of))) goto out;
    /* every allocation: the trace's, and those live before recording */
    uint64_t na = 0, acap = 0;
    for (uint32_t i = 0; i < n; i++) acap += d->ev[i].action == MP_MA_ALLOC || d->ev[i].action == MP_MA_FREE_COMPLETED;
    for (uint32_t i = 0; i < d->nlive; i++) acap += d->live[i].origin == MP_LO_FINAL_BLOCK;
    al = malloc((size_t)(acap ? acap : 1) * sizeof *al);
    if (!al) goto nomem;
    int64_t start_cat[MP_MC_COUNT] = {0};
    for (uint32_t i = 0; i < d->nlive; i++)
        if (d->live[i].origin == MP_LO_FINAL_BLOCK) {
            const mp_mem_live *L = &d->live[i];
            al[na++] = (memh_alloc){L->size, -1, -1, L->stack, L->category};
            start_cat[L->category] += L->size;
        }
    start_cat[MP_MC_UNKNOWN] += d->start_from_frees;
    /* the states: 0 the start, j after event j - 1 */
    uint64_t states = (uint64_t)n + 1;
    int cols = states < MEMH_COLS ? (int)states : MEMH_COLS;
    rest = calloc((size_t)cols * MP_MC_COUNT, sizeof *rest);
    total = calloc((size_t)cols, sizeof *total);
    col_ev = malloc((size_t)cols * sizeof *col_ev);
    if (!rest || !total || !col_ev) goto nomem;
    int64_t live[MP_MC_COUNT];
    memcpy(live, start_cat, sizeof live);
    int64_t cur = d->start_requested;
    for (int c = 0; c < cols; c++) total[c] = INT64_MIN;
    for (uint64_t j = 0; j < states; j++) {
        if (j > 0) {
            uint32_t i = (uint32_t)(j - 1);
            const mp_mem_event *e = &d->ev[i];
            if (e->action == MP_MA_ALLOC && (e->flags & MP_ME_ADDR)) {
                int32_t *v = am_slot(&m, e->addr, true);
                if (!v) goto nomem;
                /* an allocation still live at the address counts as freed here (the replay's rule) */
                uint8_t *u = &m.used[v - m.val];
                if (*u == 2 && *v >= 0 && d->ev[*v].action == MP_MA_ALLOC && free_of[*v] < 0) {
                    live[cat[*v]] -= d->ev[*v].size;
                    cur -= d->ev[*v].size;
                }
                *v = (int32_t)i;
                *u = 2; /* 2: a live allocation; 1: freed */
                live[cat[i]] += e->size;
                cur += e->size;
                al[na++] = (memh_alloc){e->size, i, free_of[i], e->stack, cat[i]};
            } else if (e->action == MP_MA_FREE_COMPLETED && (e->flags & MP_ME_ADDR)) {
                int32_t *v = am_slot(&m, e->addr, false);
                if (v && m.used[v - m.val] == 2 && free_of[*v] == (int32_t)i) {
                    live[cat[*v]] -= d->ev[*v].size;
                    cur -= d->ev[*v].size;
                    m.used[v - m.val] = 1;
                } else if (!v) { /* never allocated before: live before recording */
                    v = am_slot(&m, e->addr, true);
                    if (!v) goto nomem;
                    *v = (int32_t)i;
                    live[MP_MC_UNKNOWN] -= e->size;
                    cur -= e->size;
                    al[na++] = (memh_alloc){e->size, -1, i, e->stack, MP_MC_UNKNOWN};
                }
            }
        }
        int c = (int)(j * (uint64_t)cols / states);
        if (cur > total[c]) {
            total[c] = cur;
            col_ev[c] = (int64_t)j - 1;
            memcpy(&rest[(size_t)c * MP_MC_COUNT], live, sizeof live);
        }
    }
    /* the bands: the largest allocations, drawn in the order made */
    qsort(al, (size_t)na, sizeof *al, alloc_cmp);
    uint64_t nb = na < MEMH_BANDS ? na : MEMH_BANDS;
    int64_t band_min = nb ? al[nb - 1].size : 0;
    qsort(al, (size_t)nb, sizeof *al, alloc_order);
    for (uint64_t b = 0; b < nb; b++)
        for (int c = 0; c < cols; c++) {
            int64_t r = col_ev[c];
            if (al[b].alloc_ev <= r && (al[b].free_ev < 0 || al[b].free_ev > r)) rest[(size_t)c * MP_MC_COUNT + al[b].cat] -= al[b].size;
        }
    /* JSON */
    jw_open(w, '{');
    jw_ki64(w, "device", d->device);
    jw_ki64(w, "events", n);
    jw_ki64(w, "columns", cols);
    jw_ki64(w, "allocations", (int64_t)na);
    jw_ki64(w, "band_min_bytes", band_min);
    jw_key(w, "categories");
    jw_open(w, '[');
    for (int k = 0; k < MP_MC_COUNT; k++) jw_str(w, mp_mem_category_names[k]);
    jw_close(w, ']');
    jw_key(w, "col_event");
    jw_open(w, '[');
    for (int c = 0; c < cols; c++) jw_i64(w, col_ev[c]);
    jw_close(w, ']');
    jw_key(w, "col_time_s");
    jw_open(w, '[');
    for (int c = 0; c < cols; c++) {
        int64_t r = col_ev[c];
        int64_t t = r >= 0 ? d->ev[r].time_us : MP_MEM_NO_TIME;
        if (t == MP_MEM_NO_TIME || d->first_time_us == MP_MEM_NO_TIME) jw_null(w);
        else jw_double(w, (double)(t - d->first_time_us) / 1e6);
    }
    jw_close(w, ']');
    jw_key(w, "total");
    jw_open(w, '[');
    for (int c = 0; c < cols; c++) jw_i64(w, total[c]);
    jw_close(w, ']');
    jw_key(w, "rest");
    jw_open(w, '[');
    for (size_t q = 0; q < (size_t)cols * MP_MC_COUNT; q++) jw_i64(w, rest[q]);
    jw_close(w, ']');
    /* bands: [alloc_event, free_event, size, category, stack index] and the stacks they use */
    uint32_t *smap = calloc(s->nstacks ? s->nstacks : 1, sizeof *smap); /* stack -> index + 1 */
    if (!smap) goto nomem;
    uint32_t nst = 0;
    jw_key(w, "bands");
    jw_open(w, '[');
    for (uint64_t b = 0; b < nb; b++) {
        uint32_t sk = al[b].stack < s->nstacks ? al[b].stack : 0;
        if (!smap[sk]) smap[sk] = ++nst;
        jw_open(w, '[');
        jw_i64(w, al[b].alloc_ev);
        jw_i64(w, al[b].free_ev);
        jw_i64(w, al[b].size);
        jw_i64(w, al[b].cat);
        jw_i64(w, smap[sk] - 1);
        jw_close(w, ']');
    }
    jw_close(w, ']');
    jw_key(w, "stacks");
    jw_open(w, '[');
    for (uint32_t q = 1; q <= nst; q++) {
        uint32_t sk = 0;
        while (sk < s->nstacks && smap[sk] != q) sk++;
        jw_open(w, '{');
        jw_key(w, "site");
        frame_str(w, s, mp_mem_user_frame(s, sk));
        jw_key(w, "frames");
        jw_open(w, '[');
        uint32_t nf;
        const uint32_t *fr = mp_mem_stack(s, sk, &nf);
        for (uint32_t f = 0; f < nf && f < 64; f++) frame_str(w, s, fr[f]);
        if (nf > 64) jw_str(w, "...");
        jw_close(w, ']');
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
    free(smap);
    goto out;
nomem:
    st = mp_error(MP_ERR_NOMEM, "out of memory (HTML timeline)");
out:
    am_free(&m);
    free(cat);
    free(free_of);
    free(al);
    free(rest);
    free(total);
    free(col_ev);
    return st;
}


mp_status mp_memory_write_html(const mp_snapshot *cs, const mp_mem_report_opts *ro, FILE *f) {
    mp_snapshot *s = (mp_snapshot *)cs; /* the user-frame cache fills as frames are read */
    char *rep = NULL, *tl = NULL;
    size_t rlen = 0, tlen = 0;
    FILE *rf = open_memstream(&rep, &rlen);
    if (!rf) return mp_error(MP_ERR_NOMEM, "out of memory");
    mp_mem_report_opts jo = *ro;
    jo.top = mp_mem_top_rows(ro, MP_FORMAT_HTML); /* the JSON inside shows what the page's tables show */
    mp_status st = mp_memory_write_json(s, &jo, rf);
    fclose(rf);
    FILE *tf = st ? NULL : open_memstream(&tl, &tlen);
    if (!st && !tf) st = mp_error(MP_ERR_NOMEM, "out of memory");
    if (!st) {
        jw *w = jw_begin(tf);
        if (!w) {
            st = MP_ERR_NOMEM;
        } else {
            w->multiline = 0; /* one line: the page's data is for the script */
            jw_open(w, '[');
            for (int i = 0; i < s->ndev && !st; i++)
                if (ro->device < 0 || s->dev[i].device == ro->device) st = timeline_json(w, s, &s->dev[i]);
            jw_close(w, ']');
            jw_end(w);
        }
        fclose(tf);
    }
    if (!st) {
        char *buf = malloc(JW_BUF);
        if (!buf) {
            st = mp_error(MP_ERR_NOMEM, "out of memory");
        } else {
            mp_out o = {f, 0, JW_BUF, buf};
            mp_out_puts(&o, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>modelprof memory: ");
            for (const char *p = s->path; *p; p++) {
                if (*p == '<') mp_out_puts(&o, "&lt;");
                else if (*p == '&') mp_out_puts(&o, "&amp;");
                else mp_out_putc(&o, *p);
            }
            mp_out_puts(&o, "</title>\n<style>\n");
            mp_out_puts(&o, mp_memh_memory_css);
            mp_out_puts(&o, "</style></head>\n<body>\n");
            mp_out_puts(&o, mp_memh_memory_html);
            mp_out_puts(&o, "<script id=\"mp-report\" type=\"application/json\">");
            mp_html_json_write(&o, rep, rlen);
            mp_out_puts(&o, "</script>\n<script id=\"mp-timeline\" type=\"application/json\">");
            mp_html_json_write(&o, tl, tlen);
            mp_out_puts(&o, "</script>\n<script>\n");
            mp_out_puts(&o, mp_memh_memory_js);
            mp_out_puts(&o, "</script>\n</body></html>\n");
            mp_out_flush(&o);
            free(buf);
            if (ferror(f)) st = mp_error(MP_ERR_IO, "cannot write the report");
        }
    }
    free(rep);
    free(tl);
    return st;
}
