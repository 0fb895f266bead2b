/* `modelprof memory diff A B`: two snapshots compared (B - A) per device:
 * the peaks, the categories at each peak, and the bytes each source line
 * held at each peak, largest change first (docs/MEMORY.md "Diff"). */
#include "report/memory_report.h"
#include "report/jw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct drow {
    char *site;
    int64_t a, b;
} drow;

static const mp_mem_device *find_dev(const mp_snapshot *s, int device) {
    for (int i = 0; i < s->ndev; i++)
        if (s->dev[i].device == device) return &s->dev[i];
    return NULL;
}

static int drow_cmp(const void *x, const void *y) {
    const drow *a = x, *b = y;
    int64_t da = a->b - a->a, db = b->b - b->a;
    uint64_t ma = da < 0 ? (uint64_t)0 - (uint64_t)da : (uint64_t)da;
    uint64_t mb = db < 0 ? (uint64_t)0 - (uint64_t)db : (uint64_t)db;
    if (ma != mb) return ma > mb ? -1 : 1;
    return strcmp(a->site, b->site);
}

/* The sites of both peaks, matched by their text. */
static drow *site_rows(const mp_snapshot *sa, const mp_mem_device *a, const mp_snapshot *sb, const mp_mem_device *b,
                       int *n) {
    int cap = (a ? (int)a->nsites : 0) + (b ? (int)b->nsites : 0);
    drow *r = calloc(cap ? (size_t)cap : 1, sizeof *r);
    *n = 0;
    if (!r) return NULL;
    const mp_snapshot *ss[2] = {sa, sb};
    const mp_mem_device *dd[2] = {a, b};
    for (int side = 0; side < 2; side++) {
        if (!dd[side]) continue;
        for (uint32_t i = 0; i < dd[side]->nsites; i++) {
            char buf[600];
            const mp_mem_site *S = &dd[side]->sites[i];
            const char *t = S->frame == UINT32_MAX ? "(no user frame)" : mp_mem_frame_text(ss[side], S->frame, buf, sizeof buf);
            int j = 0;
            while (j < *n && strcmp(r[j].site, t) != 0) j++;
            if (j == *n) {
                r[j].site = strdup(t);
                if (!r[j].site) continue;
                (*n)++;
            }
            if (side) r[j].b += S->bytes;
            else r[j].a += S->bytes;
        }
    }
    qsort(r, (size_t)*n, sizeof *r, drow_cmp);
    return r;
}

mp_status mp_memory_write_diff(const mp_snapshot *sa, const mp_snapshot *sb, const mp_mem_report_opts *o, bool json,
                               FILE *f) {
    /* devices of either, in order */
    int devs[512], nd = 0;
    const mp_snapshot *both[2] = {sa, sb};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < both[k]->ndev && nd < 512; i++) {
            int d = both[k]->dev[i].device;
            if (o->device >= 0 && d != o->device) continue;
            int j = 0;
            while (j < nd && devs[j] != d) j++;
            if (j == nd) devs[nd++] = d;
        }
    for (int i = 1; i < nd; i++)
        for (int j = i; j > 0 && devs[j - 1] > devs[j]; j--) {
            int t = devs[j];
            devs[j] = devs[j - 1];
            devs[j - 1] = t;
        }
    jw *w = NULL;
    char *tbuf = NULL;
    mp_out to = {0};
    if (json) {
        w = jw_begin(f);
        if (!w) return MP_ERR_NOMEM;
        jw_open(w, '{');
        jw_kstr(w, "modelprof_version", MP_VERSION_STRING);
        jw_kstr(w, "a", sa->path);
        jw_kstr(w, "b", sb->path);
        jw_key(w, "diff");
        jw_open(w, '{');
        jw_key(w, "devices");
        jw_open(w, '[');
    } else {
        tbuf = malloc(JW_BUF);
        if (!tbuf) return mp_error(MP_ERR_NOMEM, "out of memory");
        to = (mp_out){f, 0, JW_BUF, tbuf};
        mp_out_printf(&to, "modelprof memory diff (B - A)\n  A: %s\n  B: %s\n", sa->path, sb->path);
    }
    mp_status st = MP_OK;
    for (int i = 0; i < nd && !st; i++) {
        const mp_mem_device *a = find_dev(sa, devs[i]), *b = find_dev(sb, devs[i]);
        int64_t pa = a ? a->peak_requested : 0, pb = b ? b->peak_requested : 0;
        int64_t ra = a ? a->peak_reserved : 0, rb = b ? b->peak_reserved : 0;
        int ns = 0;
        drow *rows = site_rows(sa, a, sb, b, &ns);
        if (!rows) {
            st = mp_error(MP_ERR_NOMEM, "out of memory");
            break;
        }
        int top = mp_mem_top_rows(o, json ? MP_FORMAT_JSON : MP_FORMAT_TEXT);
        if (top < 0 || top > ns) top = ns;
        if (json) {
            jw_open(w, '{');
            jw_ki64(w, "device", devs[i]);
            jw_ki64(w, "a_peak_requested_bytes", pa);
            jw_ki64(w, "b_peak_requested_bytes", pb);
            jw_ki64(w, "delta_bytes", pb - pa);
            jw_ki64(w, "a_peak_reserved_bytes", ra);
            jw_ki64(w, "b_peak_reserved_bytes", rb);
            jw_key(w, "categories");
            jw_open(w, '{');
            for (int c = 0; c < MP_MC_COUNT; c++) {
                int64_t ca = a ? a->categories[c] : 0, cb = b ? b->categories[c] : 0;
                jw_key_str(w, mp_mem_category_names[c]);
                jw_open(w, '{');
                jw_ki64(w, "a", ca);
                jw_ki64(w, "b", cb);
                jw_ki64(w, "delta", cb - ca);
                jw_close(w, '}');
            }
            jw_close(w, '}');
            jw_key(w, "sites");
            jw_open(w, '[');
            for (int j = 0; j < top; j++) {
                jw_open(w, '{');
                jw_kstr(w, "site", rows[j].site);
                jw_ki64(w, "a_bytes", rows[j].a);
                jw_ki64(w, "b_bytes", rows[j].b);
                jw_ki64(w, "delta_bytes", rows[j].b - rows[j].a);
                jw_close(w, '}');
            }
            jw_close(w, ']');
            jw_close(w, '}');
        } else {
            char b1[32], b2[32], b3[32];
            char title[32];
            snprintf(title, sizeof title, "Device %d", devs[i]);
            mp_out_rule(&to, title, 100);
            mp_out_printf(&to, "%-18s %14s %14s %14s\n", "", "A", "B", "B - A");
            mp_out_printf(&to, "%-18s %14s %14s %14s\n", "peak allocated", mp_mem_fmt_bytes(pa, b1, sizeof b1),
                          mp_mem_fmt_bytes(pb, b2, sizeof b2), mp_mem_fmt_bytes(pb - pa, b3, sizeof b3));
            mp_out_printf(&to, "%-18s %14s %14s %14s\n", "peak reserved", mp_mem_fmt_bytes(ra, b1, sizeof b1),
                          mp_mem_fmt_bytes(rb, b2, sizeof b2), mp_mem_fmt_bytes(rb - ra, b3, sizeof b3));
            for (int c = 0; c < MP_MC_COUNT; c++) {
                int64_t ca = a ? a->categories[c] : 0, cb = b ? b->categories[c] : 0;
                if (!ca && !cb) continue;
                mp_out_printf(&to, "  %-16s %14s %14s %14s\n", mp_mem_category_names[c], mp_mem_fmt_bytes(ca, b1, sizeof b1),
                              mp_mem_fmt_bytes(cb, b2, sizeof b2), mp_mem_fmt_bytes(cb - ca, b3, sizeof b3));
            }
            if (top) mp_out_puts(&to, "sites at the peak, largest change first:\n");
            for (int j = 0; j < top; j++)
                mp_out_printf(&to, "  %14s %14s %14s  %s\n", mp_mem_fmt_bytes(rows[j].a, b1, sizeof b1),
                              mp_mem_fmt_bytes(rows[j].b, b2, sizeof b2), mp_mem_fmt_bytes(rows[j].b - rows[j].a, b3, sizeof b3),
                              rows[j].site);
        }
        for (int j = 0; j < ns; j++) free(rows[j].site);
        free(rows);
    }
    if (json) {
        jw_close(w, ']');
        jw_close(w, '}');
        jw_close(w, '}');
        jw_end(w);
    } else {
        mp_out_flush(&to);
        free(tbuf);
    }
    if (!st && ferror(f)) st = mp_error(MP_ERR_IO, "cannot write the report");
    return st;
}
