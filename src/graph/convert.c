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

/* Bulk conversions. The one-element helpers cost about 1.5 ns an element,
 * as much as the small kernels whose 16-bit tensors they convert; fp16
 * goes through the F16C instructions where the CPU has them (every x86-64
 * since 2012: eight elements an instruction, the IEEE conversion, rounding
 * to nearest even), bf16 through inline bit arithmetic the compiler
 * vectorises (mp_float_to_bf16's, NaN kept quiet). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#define CV_F16C 1
__attribute__((target("avx,f16c"))) static int64_t cv_widen_f16c(const uint16_t *s, float *d, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(s + i))));
    return i;
}
__attribute__((target("avx,f16c"))) static int64_t cv_narrow_f16c(const float *s, uint16_t *d, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}
/* F16C and AVX in the CPU (CPUID 1: ECX bits 29, 28) and the YMM state
 * enabled by the OS (OSXSAVE, bit 27, and XCR0's bits 1 and 2); asked by
 * hand, as clang's __builtin_cpu_supports knows no "f16c". */
static bool cv_f16c;
static pthread_once_t cv_f16c_once = PTHREAD_ONCE_INIT;
static void cv_f16c_probe(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || (c & (7u << 27)) != (7u << 27)) return;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    cv_f16c = (lo & 6u) == 6u;
}
static bool cv_has_f16c(void) {
    pthread_once(&cv_f16c_once, cv_f16c_probe);
    return cv_f16c;
}
#else
#define CV_F16C 0
#endif

void mp_f16_widen(int dt, const uint16_t *s, float *d, int64_t n) {
    int64_t i = 0;
    if (dt == MP_DT_BFLOAT16) {
        uint32_t *u = (uint32_t *)(void *)d;
        for (; i < n; i++) u[i] = (uint32_t)s[i] << 16;
        return;
    }
#if CV_F16C
    if (cv_has_f16c()) i = cv_widen_f16c(s, d, n);
#endif
    for (; i < n; i++) d[i] = mp_half_to_float(s[i]);
}

void mp_f16_narrow(int dt, const float *s, uint16_t *d, int64_t n) {
    int64_t i = 0;
    if (dt == MP_DT_BFLOAT16) {
        const uint32_t *u = (const uint32_t *)(const void *)s;
        for (; i < n; i++) {
            uint32_t x = u[i];
            uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16, q = (x >> 16) | 0x40u;
            d[i] = (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? q : r);
        }
        return;
    }
#if CV_F16C
    if (cv_has_f16c()) i = cv_narrow_f16c(s, d, n);
#endif
    for (; i < n; i++) d[i] = mp_float_to_half(s[i]);
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

