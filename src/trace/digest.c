/* Reading a digest (src/report/trace_digest.c writes them;
 * docs/schema/digest.schema.json) back into a trace summary (mp_trace), so
 * the folder analysis, the job and every writer take a digest where they
 * take a trace. A digest is small (kilobytes to a few megabytes: tables,
 * not events), so it is parsed whole into a tree over one arena; the
 * summary's strings live in the trace's own arena. Bad input is an error
 * naming the file and the field. */
#include "trace/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- a small JSON tree ---- */

typedef enum { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ } jv_type;

typedef struct jv {
    jv_type type;
    bool b, is_int;
    int64_t i;
    double d;
    const char *s;            /* JV_STR (decoded), and a member's key */
    const char *key;
    struct jv *kids;          /* JV_ARR / JV_OBJ: n children */
    int n;
} jv;

typedef struct jp {
    const char *p, *e, *start;
    mp_arena *a;
    const char *err;
    int depth;
} jp;

static void jp_ws(jp *x) {
    while (x->p < x->e && (*x->p == ' ' || *x->p == '\n' || *x->p == '\r' || *x->p == '\t')) x->p++;
}

static bool jp_fail(jp *x, const char *what) {
    if (!x->err) x->err = what;
    return false;
}

static int hexv(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void put_utf8(char **o, uint32_t u) {
    char *q = *o;
    if (u < 0x80) *q++ = (char)u;
    else if (u < 0x800) {
        *q++ = (char)(0xc0 | (u >> 6));
        *q++ = (char)(0x80 | (u & 0x3f));
    } else if (u < 0x10000) {
        *q++ = (char)(0xe0 | (u >> 12));
        *q++ = (char)(0x80 | ((u >> 6) & 0x3f));
        *q++ = (char)(0x80 | (u & 0x3f));
    } else {
        *q++ = (char)(0xf0 | (u >> 18));
        *q++ = (char)(0x80 | ((u >> 12) & 0x3f));
        *q++ = (char)(0x80 | ((u >> 6) & 0x3f));
        *q++ = (char)(0x80 | (u & 0x3f));
    }
    *o = q;
}

static bool jp_string(jp *x, const char **out) {
    if (x->p >= x->e || *x->p != '"') return jp_fail(x, "expected a string");
    const char *s = ++x->p;
    while (x->p < x->e && *x->p != '"') x->p += *x->p == '\\' ? 2 : 1;
    if (x->p >= x->e) return jp_fail(x, "a string runs past the end");
    size_t n = (size_t)(x->p - s);
    char *o = mp_arena_alloc(x->a, n + 1), *q = o;
    if (!o) return jp_fail(x, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') {
            *q++ = s[i];
            continue;
        }
        char c = s[++i];
        switch (c) {
        case 'n': *q++ = '\n'; break;
        case 't': *q++ = '\t'; break;
        case 'r': *q++ = '\r'; break;
        case 'b': *q++ = '\b'; break;
        case 'f': *q++ = '\f'; break;
        case 'u': {
            uint32_t u = 0;
            for (int k = 1; k <= 4; k++) {
                int h = i + (size_t)k < n ? hexv(s[i + (size_t)k]) : -1;
                if (h < 0) return jp_fail(x, "a bad \\u escape");
                u = u << 4 | (uint32_t)h;
            }
            i += 4;
            if (u >= 0xd800 && u < 0xdc00 && i + 6 < n + 0 && s[i + 1] == '\\' && s[i + 2] == 'u') {
                uint32_t l = 0;
                for (int k = 3; k <= 6; k++) {
                    int h = hexv(s[i + (size_t)k]);
                    if (h < 0) return jp_fail(x, "a bad \\u escape");
                    l = l << 4 | (uint32_t)h;
                }
                if (l >= 0xdc00 && l < 0xe000) {
                    u = 0x10000 + ((u - 0xd800) << 10) + (l - 0xdc00);
                    i += 6;
                }
            }
            if (u == 0) return jp_fail(x, "a NUL in a string");
            put_utf8(&q, u);
            break;
        }
        default: *q++ = c; break;
        }
    }
    *q = 0;
    x->p++;
    *out = o;
    return true;
}

static bool jp_value(jp *x, jv *v);

static bool jp_list(jp *x, jv *v, char close) {
    bool obj = close == '}';
    x->p++;
    int cap = 0;
    v->kids = NULL;
    v->n = 0;
    jp_ws(x);
    if (x->p < x->e && *x->p == close) {
        x->p++;
        return true;
    }
    for (;;) {
        jp_ws(x);
        if (v->n == cap) {
            int nc = cap ? cap * 2 : 8;
            jv *k = mp_arena_alloc(x->a, (size_t)nc * sizeof *k);
            if (!k) return jp_fail(x, "out of memory");
            if (v->n) memcpy(k, v->kids, (size_t)v->n * sizeof *k);
            v->kids = k;
            cap = nc;
        }
        jv *k = &v->kids[v->n];
        memset(k, 0, sizeof *k);
        if (obj) {
            if (!jp_string(x, &k->key)) return false;
            jp_ws(x);
            if (x->p >= x->e || *x->p != ':') return jp_fail(x, "expected ':'");
            x->p++;
            jp_ws(x);
        }
        if (!jp_value(x, k)) return false;
        v->n++;
        jp_ws(x);
        if (x->p < x->e && *x->p == ',') {
            x->p++;
            continue;
        }
        if (x->p < x->e && *x->p == close) {
            x->p++;
            return true;
        }
        return jp_fail(x, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static bool jp_value(jp *x, jv *v) {
    jp_ws(x);
    if (x->p >= x->e) return jp_fail(x, "the file ends early");
    if (++x->depth > 64) return jp_fail(x, "nested too deeply");
    bool ok = true;
    char c = *x->p;
    if (c == '{') {
        v->type = JV_OBJ;
        ok = jp_list(x, v, '}');
    } else if (c == '[') {
        v->type = JV_ARR;
        ok = jp_list(x, v, ']');
    } else if (c == '"') {
        v->type = JV_STR;
        ok = jp_string(x, &v->s);
    } else if (c == 't' && x->e - x->p >= 4 && memcmp(x->p, "true", 4) == 0) {
        v->type = JV_BOOL;
        v->b = true;
        x->p += 4;
    } else if (c == 'f' && x->e - x->p >= 5 && memcmp(x->p, "false", 5) == 0) {
        v->type = JV_BOOL;
        x->p += 5;
    } else if (c == 'n' && x->e - x->p >= 4 && memcmp(x->p, "null", 4) == 0) {
        v->type = JV_NULL;
        x->p += 4;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        char tmp[64];
        size_t n = 0;
        bool integer = true;
        while (x->p < x->e && n < sizeof tmp - 1 &&
               strchr("+-0123456789.eE", *x->p)) {
            if (*x->p == '.' || *x->p == 'e' || *x->p == 'E') integer = false;
            tmp[n++] = *x->p++;
        }
        tmp[n] = 0;
        v->type = JV_NUM;
        char *end;
        errno = 0;
        if (integer) {
            v->i = strtoll(tmp, &end, 10);
            v->d = (double)v->i;
            v->is_int = errno == 0;
            if (!v->is_int) {   /* beyond int64 (a uint64 figure): exact as unsigned */
                errno = 0;
                unsigned long long u = strtoull(tmp, &end, 10);
                if (errno || tmp[0] == '-') ok = jp_fail(x, "a number out of range");
                v->i = (int64_t)u;
                v->is_int = true;
            }
        } else {
            v->d = strtod(tmp, &end);
            v->i = (int64_t)v->d;
        }
        if (*end) ok = jp_fail(x, "a bad number");
    } else {
        ok = jp_fail(x, "not JSON");
    }
    x->depth--;
    return ok;
}

static const jv *jget(const jv *o, const char *key) {
    if (!o || o->type != JV_OBJ) return NULL;
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->kids[i].key, key) == 0) return &o->kids[i];
    return NULL;
}

/* ---- reading the digest's fields ---- */

typedef struct dg {
    const char *label;
    const char *field;        /* the field being read, for messages */
    const char *bad_field;    /* where the first fault was */
    bool bad;
    mp_arena *a;              /* the trace's arena */
} dg;

static void fail(dg *g) {
    if (!g->bad) g->bad_field = g->field;
    g->bad = true;
}

static const jv *need(dg *g, const jv *o, const char *key, jv_type type) {
    const jv *v = jget(o, key);
    g->field = key;
    if (!v || (v->type != type && !(type == JV_STR && v->type == JV_NULL))) {
        fail(g);
        return NULL;
    }
    return v;
}

static int64_t i64_of(dg *g, const jv *v) {
    if (!v || v->type != JV_NUM || !v->is_int) {
        fail(g);
        return 0;
    }
    return v->i;
}

static int64_t geti(dg *g, const jv *o, const char *key) { return i64_of(g, need(g, o, key, JV_NUM)); }

static bool getb(dg *g, const jv *o, const char *key) {
    const jv *v = need(g, o, key, JV_BOOL);
    return v && v->b;
}

/* A string copied into the trace's arena; NULL for null. */
static const char *str_of(dg *g, const jv *v) {
    if (!v || v->type == JV_NULL) return NULL;
    if (v->type != JV_STR) {
        fail(g);
        return NULL;
    }
    const char *s = mp_arena_strdup(g->a, v->s);
    if (!s) fail(g);
    return s;
}

static const char *gets(dg *g, const jv *o, const char *key) {
    return str_of(g, need(g, o, key, JV_STR));
}

/* Row r of a table: an array of at least n cells. */
static const jv *row(dg *g, const jv *tab, int r, int n) {
    const jv *x = &tab->kids[r];
    if (x->type != JV_ARR || x->n < n) {
        fail(g);
        return NULL;
    }
    return x->kids;
}

static bool boolv(dg *g, const jv *v) {
    if (v->type != JV_BOOL) fail(g);
    return v->type == JV_BOOL && v->b;
}

/* A table's rows into a fresh array of n elements of `size`. */
static void *table(dg *g, const jv *root, const char *key, size_t size, int *n, const jv **tab) {
    *tab = need(g, root, key, JV_ARR);
    *n = 0;
    if (!*tab) return NULL;
    *n = (*tab)->n;
    void *p = calloc((size_t)*n + 1, size);
    if (!p) fail(g);
    return p;
}

static mp_status build(dg *g, const jv *root, mp_trace *t) {
    mp_trace_raw *r = &t->raw;
    g->field = "modelprof_digest";
    if (geti(g, root, "modelprof_digest") != MP_TRACE_DIGEST_VERSION)
        return mp_error(MP_ERR_FORMAT, "%s: a digest of another version (this modelprof reads "
                        "version %d): write it again with `modelprof trace --digest`",
                        g->label, MP_TRACE_DIGEST_VERSION);
    t->path = gets(g, root, "trace");
    r->bytes = (uint64_t)geti(g, root, "json_bytes");
    r->n_events = (uint64_t)geti(g, root, "events");
    r->gzipped = getb(g, root, "gzipped");
    r->rank = (int)geti(g, root, "rank");
    r->world_size = (int)geti(g, root, "world_size");
    r->base_ns = geti(g, root, "base_ns");
    const char *s = gets(g, root, "backend");
    snprintf(r->backend, sizeof r->backend, "%s", s ? s : "");
    s = gets(g, root, "device_name");
    snprintf(r->device_name, sizeof r->device_name, "%s", s ? s : "");
    r->device_mem = geti(g, root, "device_memory_bytes");
    r->device_sms = geti(g, root, "device_sms");
    const jv *tab;
    int n;
    r->pgs = table(g, root, "process_groups", sizeof *r->pgs, &n, &tab);
    for (int i = 0; i < n && !g->bad; i++) {
        const jv *c = row(g, tab, i, 4);
        if (!c) break;
        const char *nm = str_of(g, &c[0]), *desc = str_of(g, &c[1]), *rk = str_of(g, &c[3]);
        r->pgs[i].name = nm ? mp__trace_intern(r, nm) : -1;
        r->pgs[i].desc = desc ? mp__trace_intern(r, desc) : -1;
        r->pgs[i].size = (int32_t)i64_of(g, &c[2]);
        r->pgs[i].ranks = rk ? mp__trace_intern(r, rk) : -1;
        if (r->pgs[i].name < 0) fail(g);
        r->n_pgs = r->cap_pgs = i + 1;
    }
    const jv *rec = need(g, root, "recorded", JV_ARR);
    if (rec && (rec->n == 3 || rec->n == 4)) {   /* 3: a digest of stop 49 or before */
        t->no_device = !boolv(g, &rec->kids[0]);
        t->no_shapes = !boolv(g, &rec->kids[1]);
        t->no_modules = !boolv(g, &rec->kids[2]);
        if (rec->n == 4) {
            int64_t fn = i64_of(g, &rec->kids[3]);
            t->flops_null = fn > 0 ? (uint64_t)fn : 0;
        }
    } else {
        fail(g);
    }
    const jv *sm = need(g, root, "summary", JV_OBJ);
    if (!sm) return MP_OK;
    t->wall_total = geti(g, sm, "wall_ns");
    t->busy_total = geti(g, sm, "busy_ns");
    t->flops_total = (uint64_t)geti(g, sm, "flops");
    t->flops_bwd = (uint64_t)geti(g, sm, "backward_flops");
    const char *dt = gets(g, sm, "dtype");
    for (int d = 0; dt && d < MP_TDT_COUNT; d++)
        if (strcmp(dt, mp_tdtype_names[d]) == 0) t->dominant_dtype = d;
    const jv *pk = need(g, sm, "peak_tflops", JV_NUM);
    t->peak_tflops = pk ? pk->d : 0;
    t->peak_source = gets(g, sm, "peak_source");
    t->kernel_total = geti(g, sm, "kernel_ns");
    t->mem_peak_alloc = geti(g, sm, "peak_allocated_bytes");
    t->mem_peak_reserved = geti(g, sm, "peak_reserved_bytes");
    t->bwd_ops = geti(g, sm, "backward_operators");
    t->linked_bwd = geti(g, sm, "backward_linked");
    t->linked_flow = geti(g, sm, "flows_followed");
    t->cpu_modules = getb(g, sm, "cpu_modules");
    t->comm_total = geti(g, sm, "communication_ns");
    t->comm_overlap_total = geti(g, sm, "comm_overlap_ns");
    const jv *ch = need(g, sm, "allocator_churn", JV_ARR);
    if (ch && ch->n == 7) {
        t->churn.steps = (int)i64_of(g, &ch->kids[0]);
        t->churn.mallocs = i64_of(g, &ch->kids[1]);
        t->churn.frees = i64_of(g, &ch->kids[2]);
        t->churn.ns = i64_of(g, &ch->kids[3]);
        t->churn.changes = i64_of(g, &ch->kids[4]);
        t->churn.lo = i64_of(g, &ch->kids[5]);
        t->churn.hi = i64_of(g, &ch->kids[6]);
    } else {
        fail(g);
    }
    if (g->bad) return MP_OK;

    t->steps = table(g, root, "steps", sizeof *t->steps, &t->n_steps, &tab);
    g->field = "steps";
    for (int k = 0; k < t->n_steps && !g->bad; k++) {
        const jv *c = row(g, tab, k, 17);
        if (!c) break;
        mp_tstep *x = &t->steps[k];
        x->name = str_of(g, &c[0]);
        x->ts = i64_of(g, &c[1]);
        x->wall = i64_of(g, &c[2]);
        x->busy = i64_of(g, &c[3]);
        if (c[4].type != JV_ARR || c[4].n != MP_TI_COUNT || c[5].type != JV_ARR || c[5].n != MP_TC_COUNT) {
            fail(g);
            break;
        }
        for (int q = 0; q < MP_TI_COUNT; q++) x->idle[q] = i64_of(g, &c[4].kids[q]);
        for (int q = 0; q < MP_TC_COUNT; q++) x->cat[q] = i64_of(g, &c[5].kids[q]);
        x->loader_wall = i64_of(g, &c[6]);
        x->optimizer = i64_of(g, &c[7]);
        x->optimizer_dev = i64_of(g, &c[8]);
        x->flops = (uint64_t)i64_of(g, &c[9]);
        x->flops_bwd = (uint64_t)i64_of(g, &c[10]);
        x->mem_start = i64_of(g, &c[11]);
        x->mem_peak = i64_of(g, &c[12]);
        x->mem_end = i64_of(g, &c[13]);
        x->comm = i64_of(g, &c[14]);
        x->comm_overlap = i64_of(g, &c[15]);
        x->n_calls = (int32_t)i64_of(g, &c[16]);
    }
    t->ops = table(g, root, "operators", sizeof *t->ops, &t->n_ops, &tab);
    g->field = "operators";
    for (int i = 0; i < t->n_ops && !g->bad; i++) {
        const jv *c = row(g, tab, i, 9);
        if (!c) break;
        mp_top *o = &t->ops[i];
        o->name = str_of(g, &c[0]);
        o->device = boolv(g, &c[1]);
        o->count = i64_of(g, &c[2]);
        o->cpu_total = i64_of(g, &c[3]);
        o->self_cpu = i64_of(g, &c[4]);
        o->dev_total = i64_of(g, &c[5]);
        o->self_dev = i64_of(g, &c[6]);
        o->flops = (uint64_t)i64_of(g, &c[7]);
        o->alloc_bytes = i64_of(g, &c[8]);
    }
    t->kernels = table(g, root, "kernels", sizeof *t->kernels, &t->n_kernels, &tab);
    g->field = "kernels";
    for (int i = 0; i < t->n_kernels && !g->bad; i++) {
        const jv *c = row(g, tab, i, 7);
        if (!c) break;
        mp_tkernel *k = &t->kernels[i];
        k->name = str_of(g, &c[0]);
        k->short_name = str_of(g, &c[1]);
        k->op = str_of(g, &c[2]);
        int64_t kind = i64_of(g, &c[3]), cat = i64_of(g, &c[4]);
        if (kind < 0 || kind > MP_TD_ANNOT || cat < 0 || cat >= MP_TC_COUNT) fail(g);
        k->kind = (uint8_t)kind;
        k->cat = (uint8_t)cat;
        k->count = i64_of(g, &c[5]);
        k->total = i64_of(g, &c[6]);
    }
    t->mods = table(g, root, "modules", sizeof *t->mods, &t->n_mods, &tab);
    t->mfig = calloc((size_t)t->n_mods + 1, sizeof *t->mfig);
    if (!t->mfig) fail(g);
    g->field = "modules";
    for (int m = 0; m < t->n_mods && !g->bad; m++) {
        const jv *c = row(g, tab, m, 9);
        if (!c) break;
        mp_module *md = &t->mods[m];
        md->name = str_of(g, &c[0]);
        md->cls = str_of(g, &c[1]);
        md->path = str_of(g, &c[2]);
        int64_t p = i64_of(g, &c[3]);
        if (p < -1 || p >= m) {   /* parents come first */
            fail(g);
            break;
        }
        md->parent = (int)p;
        md->first_child = md->last_child = md->next_sibling = -1;
        md->depth = p >= 0 ? t->mods[p].depth + 1 : 0;
        if (p >= 0) {
            mp_module *pm = &t->mods[p];
            if (pm->last_child >= 0) t->mods[pm->last_child].next_sibling = m;
            else pm->first_child = m;
            pm->last_child = m;
        }
        mp_tmod *f = &t->mfig[m];
        f->calls = i64_of(g, &c[4]);
        f->fwd = i64_of(g, &c[5]);
        f->bwd = i64_of(g, &c[6]);
        f->flops = (uint64_t)i64_of(g, &c[7]);
        f->bwd_flops = (uint64_t)i64_of(g, &c[8]);
    }
    t->uncounted = table(g, root, "uncounted", sizeof *t->uncounted, &t->n_uncounted, &tab);
    g->field = "uncounted";
    for (int i = 0; i < t->n_uncounted && !g->bad; i++) {
        const jv *c = row(g, tab, i, 3);
        if (!c) break;
        t->uncounted[i].name = str_of(g, &c[0]);
        t->uncounted[i].count = i64_of(g, &c[1]);
        t->uncounted[i].device = i64_of(g, &c[2]);
    }
    t->hranges = table(g, root, "host_ranges", sizeof *t->hranges, &t->n_hranges, &tab);
    g->field = "host_ranges";
    for (int i = 0; i < t->n_hranges && !g->bad; i++) {
        const jv *c = row(g, tab, i, 4);
        if (!c) break;
        t->hranges[i].name = str_of(g, &c[0]);
        t->hranges[i].count = i64_of(g, &c[1]);
        t->hranges[i].host = i64_of(g, &c[2]);
        t->hranges[i].idle = i64_of(g, &c[3]);
        if (!t->hranges[i].name) fail(g);
    }
    t->mem_curve = table(g, root, "memory_curve", sizeof *t->mem_curve, &t->n_mem_curve, &tab);
    g->field = "memory_curve";
    for (int i = 0; i < t->n_mem_curve && !g->bad; i++) {
        const jv *c = row(g, tab, i, 2);
        if (!c) break;
        t->mem_curve[i].ts = i64_of(g, &c[0]);
        t->mem_curve[i].allocated = i64_of(g, &c[1]);
    }
    if (!t->n_mem_curve) {
        free(t->mem_curve);
        t->mem_curve = NULL;
    }
    t->calls = table(g, root, "calls", sizeof *t->calls, &t->n_calls, &tab);
    g->field = "calls";
    for (int i = 0; i < t->n_calls && !g->bad; i++) {
        const jv *c = row(g, tab, i, 14);
        if (!c) break;
        mp_tcall *x = &t->calls[i];
        x->coll = str_of(g, &c[0]);
        x->pg = str_of(g, &c[1]);
        x->ts = i64_of(g, &c[2]);
        x->end = i64_of(g, &c[3]);
        x->elems = i64_of(g, &c[4]);
        x->elem_bytes = (int32_t)i64_of(g, &c[5]);
        x->seq = (int32_t)i64_of(g, &c[6]);
        int64_t st = i64_of(g, &c[7]);
        if (st < -1 || st >= t->n_steps || !x->coll) fail(g);
        x->step = (int32_t)st;
        x->device = boolv(g, &c[8]);
        x->solo = i64_of(g, &c[9]);
        x->seg_start = i64_of(g, &c[10]);
        x->seg_busy = i64_of(g, &c[11]);
        x->seg_loader = i64_of(g, &c[12]);
        x->wait = -1;
        x->match = -1;
        if (c[13].type != JV_ARR || c[13].n > MP_TCALL_RANGES) {
            fail(g);
            break;
        }
        for (int q = 0; q < c[13].n; q++) {
            const jv *e = &c[13].kids[q];
            if (e->type != JV_ARR || e->n != 2) {
                fail(g);
                break;
            }
            x->range[q].name = str_of(g, &e->kids[0]);
            x->range[q].ns = i64_of(g, &e->kids[1]);
        }
    }
    t->timeline = table(g, root, "timeline", sizeof *t->timeline, &t->n_timeline, &tab);
    g->field = "timeline";
    for (int i = 0; i < t->n_timeline && !g->bad; i++) {
        const jv *c = row(g, tab, i, 2);
        if (!c) break;
        t->timeline[i].a = i64_of(g, &c[0]);
        t->timeline[i].b = i64_of(g, &c[1]);
    }
    return MP_OK;
}

/* The figures within what a trace could give (read.c's limits), so that
 * no sum the analysis and the writers make can overflow: the name of the
 * first that is not, NULL when all are. */
#define T_MAX INT64_C(4000000000000000000)   /* a time (ns since the trace's base) */
#define D_MAX (INT64_C(1) << 53)             /* a duration or a sum of them */
#define C_MAX (INT64_C(1) << 40)             /* a count */
#define B_MAX (INT64_C(1) << 62)             /* bytes */
#define IN(v, lo, hi) ((v) >= (lo) && (v) <= (hi))
static const char *insane(const mp_trace *t) {
    const mp_trace_raw *r = &t->raw;
    if (!IN(r->base_ns, -(INT64_C(1) << 61), INT64_C(1) << 61)) return "base_ns";
    if (!IN((int64_t)(r->bytes >> 1), 0, B_MAX) || !IN((int64_t)(r->n_events >> 1), 0, B_MAX)) return "json_bytes";
    if (!IN(r->device_mem, -1, B_MAX) || !IN(r->device_sms, -1, C_MAX)) return "device_memory_bytes";
    if (!IN(r->rank, -1, INT32_MAX - 1) || !IN(r->world_size, -1, INT32_MAX - 1)) return "rank";
    if (!IN(t->wall_total, 0, D_MAX) || !IN(t->busy_total, 0, D_MAX) || !IN(t->kernel_total, 0, D_MAX) ||
        !IN(t->comm_total, 0, D_MAX) || !IN(t->comm_overlap_total, 0, D_MAX))
        return "summary";
    if (!IN(t->mem_peak_alloc, -1, B_MAX) || !IN(t->mem_peak_reserved, -1, B_MAX)) return "summary";
    if (!IN(t->bwd_ops, 0, C_MAX) || !IN(t->linked_bwd, 0, C_MAX) || !IN(t->linked_flow, 0, C_MAX)) return "summary";
    if (!(t->peak_tflops >= 0 && t->peak_tflops < 1e9)) return "summary";
    if (!IN(t->churn.steps, 0, INT32_MAX - 1) || !IN(t->churn.mallocs, 0, C_MAX) || !IN(t->churn.frees, 0, C_MAX) ||
        !IN(t->churn.ns, 0, D_MAX) || !IN(t->churn.changes, 0, C_MAX) || !IN(t->churn.lo, -1, B_MAX) ||
        !IN(t->churn.hi, -1, B_MAX))
        return "allocator_churn";
    for (int k = 0; k < t->n_steps; k++) {
        const mp_tstep *s = &t->steps[k];
        if (!IN(s->ts, 0, T_MAX) || !IN(s->wall, 0, D_MAX) || !IN(s->busy, 0, D_MAX) ||
            !IN(s->loader_wall, 0, D_MAX) || !IN(s->optimizer, 0, D_MAX) || !IN(s->optimizer_dev, 0, D_MAX) ||
            !IN(s->comm, 0, D_MAX) || !IN(s->comm_overlap, 0, D_MAX) || !IN(s->n_calls, 0, INT32_MAX - 1) ||
            !IN(s->mem_start, -1, B_MAX) || !IN(s->mem_peak, -1, B_MAX) || !IN(s->mem_end, -1, B_MAX))
            return "steps";
        for (int c = 0; c < MP_TI_COUNT; c++)
            if (!IN(s->idle[c], 0, D_MAX)) return "steps";
        for (int c = 0; c < MP_TC_COUNT; c++)
            if (!IN(s->cat[c], 0, D_MAX)) return "steps";
    }
    for (int i = 0; i < t->n_ops; i++) {
        const mp_top *o = &t->ops[i];
        if (!IN(o->count, 0, C_MAX) || !IN(o->cpu_total, 0, D_MAX) || !IN(o->self_cpu, -D_MAX, D_MAX) ||
            !IN(o->dev_total, 0, D_MAX) || !IN(o->self_dev, 0, D_MAX) || !IN(o->alloc_bytes, -B_MAX, B_MAX))
            return "operators";
    }
    for (int i = 0; i < t->n_kernels; i++)
        if (!IN(t->kernels[i].count, 0, C_MAX) || !IN(t->kernels[i].total, 0, D_MAX)) return "kernels";
    for (int m = 0; m < t->n_mods; m++)
        if (!IN(t->mfig[m].calls, 0, C_MAX) || !IN(t->mfig[m].fwd, 0, D_MAX) || !IN(t->mfig[m].bwd, 0, D_MAX))
            return "modules";
    for (int i = 0; i < t->n_uncounted; i++)
        if (!IN(t->uncounted[i].count, 0, C_MAX) || !IN(t->uncounted[i].device, 0, D_MAX)) return "uncounted";
    for (int i = 0; i < t->n_hranges; i++)
        if (!IN(t->hranges[i].count, 0, C_MAX) || !IN(t->hranges[i].host, 0, D_MAX) ||
            !IN(t->hranges[i].idle, 0, D_MAX))
            return "host_ranges";
    for (int i = 0; i < t->n_mem_curve; i++)
        if (!IN(t->mem_curve[i].ts, 0, T_MAX) || !IN(t->mem_curve[i].allocated, -B_MAX, B_MAX)) return "memory_curve";
    for (int i = 0; i < t->n_calls; i++) {
        const mp_tcall *c = &t->calls[i];
        if (!IN(c->ts, 0, T_MAX) || !IN(c->end, c->ts, T_MAX) || !IN(c->seg_start, 0, c->ts) ||
            !IN(c->elems, -1, INT64_C(1) << 48) || !IN(c->elem_bytes, 0, 16) || !IN(c->seq, -1, INT32_MAX - 1) ||
            !IN(c->solo, 0, D_MAX) || !IN(c->seg_busy, 0, D_MAX) || !IN(c->seg_loader, 0, D_MAX))
            return "calls";
        for (int q = 0; q < MP_TCALL_RANGES; q++)
            if (!IN(c->range[q].ns, 0, D_MAX)) return "calls";
    }
    for (int i = 0; i < t->n_timeline; i++)
        if (!IN(t->timeline[i].a, 0, T_MAX) || !IN(t->timeline[i].b, t->timeline[i].a, T_MAX)) return "timeline";
    return NULL;
}

bool mp_trace_is_digest(const void *data, size_t n) {
    static const char key[] = "\"modelprof_digest\"";
    const char *p = data;
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t')) i++;
    if (i >= n || p[i] != '{') return false;
    i++;
    while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t')) i++;
    return n - i >= sizeof key - 1 && memcmp(p + i, key, sizeof key - 1) == 0;
}

mp_status mp_trace_digest_read(const void *data, size_t size, const char *label, mp_trace *t) {
    memset(t, 0, sizeof *t);
    mp_arena_init(&t->raw.arena);
    t->raw.device_mem = t->raw.device_sms = -1;
    t->raw.rank = t->raw.world_size = -1;
    mp_arena tree;
    mp_arena_init(&tree);
    jp x = {data, (const char *)data + size, data, &tree, NULL, 0};
    jv root;
    memset(&root, 0, sizeof root);
    bool ok = jp_value(&x, &root);
    if (ok) {
        jp_ws(&x);
        if (x.p != x.e) ok = jp_fail(&x, "data after the end of the JSON");
    }
    if (!ok) {
        mp_status st = mp_error(MP_ERR_FORMAT, "%s: byte %llu: %s", label,
                                (unsigned long long)(x.p - x.start), x.err);
        mp_arena_free(&tree);
        mp_trace_free(t);
        return st;
    }
    dg g = {label, NULL, NULL, false, &t->raw.arena};
    mp_status st = root.type == JV_OBJ ? build(&g, &root, t)
                                       : mp_error(MP_ERR_FORMAT, "%s: not a digest", label);
    mp_arena_free(&tree);
    if (st == MP_OK && g.bad)
        st = mp_error(MP_ERR_FORMAT, "%s: not a modelprof digest: field \"%s\" is missing or "
                      "malformed (docs/schema/digest.schema.json)", label, g.bad_field ? g.bad_field : "?");
    const char *odd = st == MP_OK ? insane(t) : NULL;
    if (odd)
        st = mp_error(MP_ERR_FORMAT, "%s: a figure of \"%s\" is out of range for a trace (a digest "
                      "written by hand, or damaged)", label, odd);
    if (st != MP_OK) {
        mp_trace_free(t);
        return st;
    }
    if (!t->path) t->path = label;
    mp_trace_findings(t);
    return MP_OK;
}

mp_status mp_trace_digest_file(const char *path, mp_trace *t) {
    memset(t, 0, sizeof *t);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mp_error(MP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > ((off_t)1 << 34)) {
        close(fd);
        return mp_error(MP_ERR_IO, "%s: not a regular file of a sane size", path);
    }
    size_t n = (size_t)sb.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return mp_error(MP_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    mp_status st = got == n ? mp_trace_digest_read(buf, n, path, t)
                            : mp_error(MP_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    free(buf);
    return st;
}
