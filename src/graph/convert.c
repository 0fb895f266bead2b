/* Element conversions between floating-point formats: fp16, bf16 and
 * the four fp8 formats to and from fp32. Below both the loader (tensor
 * contents) and the kernels (element access), so that neither reaches
 * into the other for them. */
#include "graph/graph.h"

#include <math.h>
#include <string.h>

/* ---- 16-bit floats ---- */

static uint32_t cv_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float cv_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float mp_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31, m = h & 0x3ffu;
    if (e == 31) return cv_float(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        float v = (float)m * (1.0f / 16777216.0f); /* m * 2^-24 */
        return sign ? -v : v;
    }
    return cv_float(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t mp_float_to_half(float f) {
    uint32_t u = cv_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);       /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);      /* overflow to inf */
    if (a < 0x38800000u) {                                        /* subnormal or zero */
        float v = cv_float(a) * 16777216.0f;                      /* in units of 2^-24 */
        return (uint16_t)(sign | (uint32_t)nearbyintf(v));
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);                   /* round to nearest even */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

float mp_bf16_to_float(uint16_t h) { return cv_float((uint32_t)h << 16); }

uint16_t mp_float_to_bf16(float f) {
    uint32_t u = cv_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ---- 8-bit floats: e4m3fn, e4m3fnuz, e5m2, e5m2fnuz ---- */

typedef struct cv_fp8 {
    int mbits, bias;
    bool has_inf, uz;       /* uz: no negative zero, 0x80 is NaN */
    float max;
} cv_fp8;

static cv_fp8 cv_fp8_of(int dt) {
    switch (dt) {
    case MP_DT_FLOAT8E4M3FN: return (cv_fp8){3, 7, false, false, 448.0f};
    case MP_DT_FLOAT8E4M3FNUZ: return (cv_fp8){3, 8, false, true, 240.0f};
    case MP_DT_FLOAT8E5M2: return (cv_fp8){2, 15, true, false, 57344.0f};
    default: return (cv_fp8){2, 16, false, true, 57344.0f};
    }
}

float mp_fp8_to_float(uint8_t v, int dt) {
    cv_fp8 t = cv_fp8_of(dt);
    int ebits = 7 - t.mbits;
    unsigned e = (v >> t.mbits) & ((1u << ebits) - 1), m = v & ((1u << t.mbits) - 1);
    bool neg = v & 0x80;
    if (t.uz) {
        if (v == 0x80) return NAN;
    } else if (t.has_inf) {
        if (e == (1u << ebits) - 1) return m ? NAN : (neg ? -INFINITY : INFINITY);
    } else if ((v & 0x7f) == 0x7f) {
        return NAN;
    }
    float r = e ? ldexpf(1.0f + (float)m / (float)(1 << t.mbits), (int)e - t.bias)
                : ldexpf((float)m / (float)(1 << t.mbits), 1 - t.bias);
    return neg ? -r : r;
}

uint8_t mp_float_to_fp8(float f, int dt, bool saturate) {
    cv_fp8 t = cv_fp8_of(dt);
    uint8_t nan = t.uz ? 0x80 : (t.has_inf ? 0x7f : 0x7f);
    uint8_t sign = signbit(f) ? 0x80 : 0;
    if (isnan(f)) return nan;
    float a = fabsf(f);
    int ebits = 7 - t.mbits;
    uint8_t maxcode = (uint8_t)(t.uz ? 0x7f : t.has_inf ? (((1u << ebits) - 2) << t.mbits) | ((1u << t.mbits) - 1) : 0x7e);
    uint8_t over = saturate ? maxcode : (t.has_inf ? (uint8_t)(((1u << ebits) - 1) << t.mbits) : (uint8_t)(nan & 0x7f));
    if (isinf(a)) return t.uz && !saturate ? nan : (uint8_t)(sign | over);
    int e;
    float fr = frexpf(a, &e);                  /* a = fr * 2^e, fr in [0.5, 1) */
    int E = e - 1 + t.bias;
    unsigned code;
    if (a == 0) {
        code = 0;
    } else if (E >= 1) {
        float m = nearbyintf((fr * 2.0f - 1.0f) * (float)(1 << t.mbits));
        unsigned mi = (unsigned)m;
        if (mi == (1u << t.mbits)) E++, mi = 0;
        code = ((unsigned)E << t.mbits) | mi;
    } else {
        float m = nearbyintf(ldexpf(a, t.bias - 1 + t.mbits));
        code = (unsigned)m;                    /* may carry into the exponent: still right */
    }
    if (code > maxcode || a > t.max) {
        if (t.uz && !saturate) return nan;
        return (uint8_t)(sign | over);
    }
    if (code == 0 && t.uz) return 0;
    return (uint8_t)(sign | code);
}

