#include "pbw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pbw_free(pbw *w) {
    free(w->b);
    w->b = NULL;
    w->n = w->cap = 0;
}

void pbw_raw(pbw *w, const void *p, size_t n) {
    if (w->n + n > w->cap) {
        size_t c = w->cap ? w->cap : 64;
        while (c < w->n + n) c *= 2;
        w->b = realloc(w->b, c);
        w->cap = c;
    }
    if (n) memcpy(w->b + w->n, p, n);
    w->n += n;
}

void pbw_varint_raw(pbw *w, uint64_t v) {
    uint8_t buf[10];
    int n = 0;
    do {
        buf[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) buf[n] |= 0x80;
        n++;
    } while (v);
    pbw_raw(w, buf, (size_t)n);
}

void pbw_key(pbw *w, uint32_t field, int wire) { pbw_varint_raw(w, (uint64_t)field << 3 | (uint64_t)wire); }

void pbw_int(pbw *w, uint32_t field, uint64_t v) {
    pbw_key(w, field, 0);
    pbw_varint_raw(w, v);
}

void pbw_f32(pbw *w, uint32_t field, float v) {
    pbw_key(w, field, 5);
    pbw_raw(w, &v, 4);
}

void pbw_bytes(pbw *w, uint32_t field, const void *p, size_t n) {
    pbw_key(w, field, 2);
    pbw_varint_raw(w, n);
    pbw_raw(w, p, n);
}

void pbw_str(pbw *w, uint32_t field, const char *s) { pbw_bytes(w, field, s, strlen(s)); }

void pbw_msg(pbw *w, uint32_t field, const pbw *sub) {
    pbw_bytes(w, field, sub->b, sub->n);
    pbw_free((pbw *)sub);
}

int pbw_write(const pbw *w, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t ok = fwrite(w->b, 1, w->n, f);
    fclose(f);
    return ok == w->n ? 0 : -1;
}

void onx_value_info(pbw *graph, uint32_t field, const char *name, int dtype, int rank,
                    const int64_t *dims, const char *const *syms) {
    pbw shape = {0}, tt = {0}, type = {0}, vi = {0};
    for (int i = 0; i < rank; i++) {
        pbw d = {0};
        if (dims[i] >= 0)
            pbw_int(&d, 1, (uint64_t)dims[i]);
        else if (syms && syms[i])
            pbw_str(&d, 2, syms[i]);
        pbw_msg(&shape, 1, &d);
    }
    pbw_int(&tt, 1, (uint64_t)dtype);
    if (rank >= 0) pbw_msg(&tt, 2, &shape);
    pbw_msg(&type, 1, &tt);
    pbw_str(&vi, 1, name);
    pbw_msg(&vi, 2, &type);
    pbw_msg(graph, field, &vi);
    pbw_free(&shape);
}

static void onx_names(pbw *node, uint32_t field, const char *list) {
    if (!list) return;
    const char *p = list;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        pbw_bytes(node, field, p, n);
        if (!e) break;
        p = e + 1;
    }
}

void onx_node(pbw *g, uint32_t field, const char *op, const char *name, const char *ins,
              const char *outs, const pbw *attrs) {
    pbw n = {0};
    if (ins && *ins) onx_names(&n, 1, ins);
    if (outs && *outs) onx_names(&n, 2, outs);
    if (name) pbw_str(&n, 3, name);
    pbw_str(&n, 4, op);
    if (attrs) {
        pbw_raw(&n, attrs->b, attrs->n);
        pbw_free((pbw *)attrs);
    }
    pbw_msg(g, field, &n);
}

void onx_attr_int(pbw *attrs, const char *name, int64_t v) {
    pbw a = {0};
    pbw_str(&a, 1, name);
    pbw_int(&a, 3, (uint64_t)v);
    pbw_int(&a, 20, 2);
    pbw_msg(attrs, 5, &a);
}

void onx_attr_ints(pbw *attrs, const char *name, int n, const int64_t *v) {
    pbw a = {0};
    pbw_str(&a, 1, name);
    for (int i = 0; i < n; i++) pbw_int(&a, 8, (uint64_t)v[i]);
    pbw_int(&a, 20, 7);
    pbw_msg(attrs, 5, &a);
}

void onx_attr_graph(pbw *attrs, const char *name, pbw *graph) {
    pbw a = {0};
    pbw_str(&a, 1, name);
    pbw_msg(&a, 6, graph);
    pbw_int(&a, 20, 5);
    pbw_msg(attrs, 5, &a);
}

static void onx_tensor_head(pbw *t, const char *name, int dtype, int rank, const int64_t *dims) {
    for (int i = 0; i < rank; i++) pbw_int(t, 1, (uint64_t)dims[i]);
    pbw_int(t, 2, (uint64_t)dtype);
    pbw_str(t, 8, name);
}

void onx_tensor(pbw *out, uint32_t field, const char *name, int dtype, int rank,
                const int64_t *dims, const void *raw, size_t raw_len) {
    pbw t = {0};
    onx_tensor_head(&t, name, dtype, rank, dims);
    if (raw) pbw_bytes(&t, 9, raw, raw_len);
    pbw_msg(out, field, &t);
}

static void onx_kv(pbw *t, const char *k, const char *v) {
    pbw kv = {0};
    pbw_str(&kv, 1, k);
    pbw_str(&kv, 2, v);
    pbw_msg(t, 13, &kv);
}

void onx_tensor_external(pbw *out, uint32_t field, const char *name, int dtype, int rank,
                         const int64_t *dims, const char *location, const char *offset,
                         const char *length) {
    pbw t = {0};
    onx_tensor_head(&t, name, dtype, rank, dims);
    if (location) onx_kv(&t, "location", location);
    if (offset) onx_kv(&t, "offset", offset);
    if (length) onx_kv(&t, "length", length);
    pbw_int(&t, 14, 1);
    pbw_msg(out, field, &t);
}

void onx_model(pbw *model, int64_t ir, int opset, pbw *graph) {
    pbw os = {0};
    pbw_int(model, 1, (uint64_t)ir);
    pbw_str(model, 2, "modelprof-tests");
    pbw_msg(model, 7, graph);
    pbw_str(&os, 1, "");
    pbw_int(&os, 2, (uint64_t)opset);
    pbw_msg(model, 8, &os);
}
