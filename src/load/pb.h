/* A zero-copy protobuf wire-format reader: views into the mapped file. */
#ifndef MP_PB_H
#define MP_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

typedef struct pb {
    const uint8_t *p, *end;
} pb;

static inline pb pb_view(const uint8_t *p, size_t n) {
    pb r = {p, p + n};
    return r;
}

static inline bool pb_more(const pb *r) { return r->p < r->end; }

static inline bool pb_varint(pb *r, uint64_t *out) {
    /* most keys and lengths fit one byte */
    if (r->p < r->end && *r->p < 0x80) {
        *out = *r->p++;
        return true;
    }
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end) return false;
        uint8_t b = *r->p++;
        if (shift == 63 && b > 1) return false; /* more than 64 bits */
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false; /* longer than 10 bytes */
}

/* Next field key. */
static inline bool pb_key(pb *r, uint32_t *field, int *wire) {
    uint64_t k;
    if (!pb_varint(r, &k)) return false;
    if ((k >> 3) == 0 || (k >> 3) > 0x1fffffff) return false;
    *field = (uint32_t)(k >> 3);
    *wire = (int)(k & 7);
    return true;
}

static inline bool pb_len(pb *r, pb *sub) {
    uint64_t n;
    if (!pb_varint(r, &n)) return false;
    if (n > (uint64_t)(r->end - r->p)) return false;
    sub->p = r->p;
    sub->end = r->p + n;
    r->p += n;
    return true;
}

static inline bool pb_fixed32(pb *r, uint32_t *v) {
    if (r->end - r->p < 4) return false;
    *v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 |
         (uint32_t)r->p[3] << 24;
    r->p += 4;
    return true;
}

static inline bool pb_fixed64(pb *r, uint64_t *v) {
    uint32_t lo, hi;
    if (!pb_fixed32(r, &lo) || !pb_fixed32(r, &hi)) return false;
    *v = (uint64_t)hi << 32 | lo;
    return true;
}

static inline bool pb_skip(pb *r, int wire) {
    uint64_t v;
    pb sub;
    switch (wire) {
    case PB_VARINT: return pb_varint(r, &v);
    case PB_I64: return pb_fixed64(r, &v);
    case PB_LEN: return pb_len(r, &sub);
    case PB_I32: {
        uint32_t x;
        return pb_fixed32(r, &x);
    }
    default: return false; /* groups are not used by ONNX */
    }
}

static inline float pb_f32(uint32_t bits) {
    union {
        uint32_t u;
        float f;
    } c = {.u = bits};
    return c.f;
}

static inline double pb_f64(uint64_t bits) {
    union {
        uint64_t u;
        double d;
    } c = {.u = bits};
    return c.d;
}

#endif
