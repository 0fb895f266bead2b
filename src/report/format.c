/* The one number formatter: every figure in every report goes through here,
 * so all of them round, scale and trim the same way. */
#include "report/report.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Decimal prefixes, 10^(3k). */
static const char *const fmt_prefix[] = {"", "K", "M", "G", "T", "P", "E"};
#define FMT_MAX_K ((int)MP_ARRAY_LEN(fmt_prefix) - 1)

/* Appends to a mp_fmtbuf cut where snprintf would cut (at MP_FMT_MAX - 1
 * bytes): the formatters below build their text by hand, not with
 * snprintf, which cost most of the text report's time. */
typedef struct fmt_out {
    mp_fmtbuf b;
    size_t n;
} fmt_out;

static void fmt_puts(fmt_out *o, const char *s) {
    size_t len = strlen(s), room = MP_FMT_MAX - 1 - o->n;
    if (len > room) len = room;
    memcpy(o->b.s + o->n, s, len);
    o->n += len;
}

/* Two digits a step from a table; the length comes first, from the bit
 * length (1233 / 4096 < log10(2)). */
static const char fmt_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";
static const uint64_t fmt_pow10[20] = {
    1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
    100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
    10000000000000ull, 100000000000000ull, 1000000000000000ull, 10000000000000000ull,
    100000000000000000ull, 1000000000000000000ull, 10000000000000000000ull,
};

size_t mp_fmt_dec(char *out, uint64_t v) {
    if (v < 10) {
        out[0] = (char)('0' + v);
        return 1;
    }
    int t = ((64 - __builtin_clzll(v)) * 1233) >> 12;
    size_t len = (size_t)t + (v >= fmt_pow10[t]);
    char *e = out + len;
    while (v >= 100) {
        unsigned r = (unsigned)(v % 100);
        v /= 100;
        e -= 2;
        memcpy(e, fmt_pairs + 2 * r, 2);
    }
    if (v >= 10) memcpy(e - 2, fmt_pairs + 2 * v, 2);
    else e[-1] = (char)('0' + v);
    return len;
}

static void fmt_u64(fmt_out *o, uint64_t v) {
    char d[MP_DEC_MAX + 1];
    d[mp_fmt_dec(d, v)] = 0;
    fmt_puts(o, d);
}

/* Print a value given in hundredths: "12", "12.5", "12.34" (trailing zeros
 * trimmed), then " <prefix><unit>" when either is not empty, then `tail`. */
static mp_fmtbuf fmt_hundredths(uint64_t h, const char *prefix, const char *unit,
                                const char *tail) {
    fmt_out o;
    o.n = 0;
    fmt_u64(&o, h / 100);
    unsigned fp = (unsigned)(h % 100);
    if (fp) {
        char frac[4] = {'.', (char)('0' + fp / 10), (char)('0' + fp % 10), 0};
        if (fp % 10 == 0) frac[2] = 0;
        fmt_puts(&o, frac);
    }
    if (prefix[0] || unit[0]) fmt_puts(&o, " ");
    fmt_puts(&o, prefix);
    fmt_puts(&o, unit);
    fmt_puts(&o, tail);
    o.b.s[o.n] = 0;
    return o.b;
}

static mp_fmtbuf fmt_unknown(const char *unit) {
    mp_fmtbuf b;
    snprintf(b.s, sizeof b.s, "%s%s%s", MP_FMT_UNKNOWN, unit[0] ? " " : "", unit);
    return b;
}

mp_fmtbuf mp_fmt_si(uint64_t v, const char *unit) {
    if (!unit) unit = "";
    if (v == UINT64_MAX) { /* a saturated count: more than 2^64 - 1 */
        mp_fmtbuf b;
        snprintf(b.s, sizeof b.s, "overflow (> 18.44 E%s)", unit);
        return b;
    }
    if (v < 1000) return fmt_hundredths(v * 100, "", unit, "");
    /* k: the largest prefix with v / 1000^k >= 1 (capped). */
    int k = 1;
    uint64_t d = 1000;
    while (k < FMT_MAX_K && v / d >= 1000) {
        d *= 1000;
        k++;
    }
    for (;;) {
        /* hundredths of v / d, rounded half up, in integers: d is a power
         * of 1000 >= 1000, so d / 100 and d / 200 are exact. */
        uint64_t q = v / d, r = v % d;
        uint64_t h = q * 100 + (r + d / 200) / (d / 100);
        if (h >= 100000 && k < FMT_MAX_K) { /* rounded up to 1000: next prefix */
            d *= 1000;
            k++;
            continue;
        }
        return fmt_hundredths(h, fmt_prefix[k], unit, "");
    }
}

mp_fmtbuf mp_fmt_si_d(double v, const char *unit) {
    if (!unit) unit = "";
    if (!(v >= 0) || !isfinite(v)) return fmt_unknown(unit);
    int k = 0;
    double scaled = v;
    while (k < FMT_MAX_K && scaled >= 1000) {
        scaled /= 1000;
        k++;
    }
    for (;;) {
        double hd = round(scaled * 100);
        if (hd >= 100000 && k < FMT_MAX_K) {
            scaled /= 1000;
            k++;
            continue;
        }
        if (hd >= 1.8e19) return fmt_unknown(unit); /* beyond 10^35: not a figure */
        return fmt_hundredths((uint64_t)hd, fmt_prefix[k], unit, "");
    }
}

mp_fmtbuf mp_fmt_count(uint64_t v) { return mp_fmt_si(v, ""); }
mp_fmtbuf mp_fmt_macs(uint64_t v) { return mp_fmt_si(v, "MACs"); }
mp_fmtbuf mp_fmt_flops(uint64_t v) { return mp_fmt_si(v, "FLOPs"); }
mp_fmtbuf mp_fmt_bytes(uint64_t v) { return mp_fmt_si(v, "B"); }

mp_fmtbuf mp_fmt_fig(uint64_t v, bool unknown, const char *unit) {
    if (!unit) unit = "";
    return unknown ? fmt_unknown(unit) : mp_fmt_si(v, unit);
}

mp_fmtbuf mp_fmt_pct_d(double part, double whole) {
    mp_fmtbuf b;
    if (!(whole > 0) || !(part >= 0) || !isfinite(part) || !isfinite(whole)) {
        if (whole == 0 && part == 0) return fmt_hundredths(0, "", "", "%");
        snprintf(b.s, sizeof b.s, "%s", MP_FMT_UNKNOWN);
        return b;
    }
    double hd = round(part / whole * 10000.0); /* hundredths of a percent */
    if (hd == 0 && part > 0) {
        snprintf(b.s, sizeof b.s, "<0.01%%");
        return b;
    }
    /* a share short of the whole never reads as all of it */
    if (hd == 10000 && part < whole) {
        snprintf(b.s, sizeof b.s, ">99.99%%");
        return b;
    }
    if (hd >= 1e15) hd = 1e15; /* absurd ratios stay printable */
    return fmt_hundredths((uint64_t)hd, "", "", "%");
}

mp_fmtbuf mp_fmt_pct(uint64_t part, uint64_t whole) {
    if (whole == 0) return fmt_hundredths(0, "", "", "%");
    if (part == whole) return fmt_hundredths(10000, "", "", "%");
    return mp_fmt_pct_d((double)part, (double)whole);
}

mp_fmtbuf mp_fmt_seconds(double s) {
    static const char *const unit[] = {"s", "ms", "us", "ns"};
    if (!(s >= 0) || !isfinite(s)) return fmt_unknown("");
    if (s == 0) return fmt_hundredths(0, "", "s", "");
    int k = 0;
    double scaled = s;
    while (k < 3 && scaled < 1) {
        scaled *= 1000;
        k++;
    }
    double hd = round(scaled * 100);
    if (hd >= 100000 && k > 0) { /* 999.996 ms -> 1 s */
        hd = round(scaled / 1000 * 100);
        k--;
    }
    if (hd >= 1.8e19) return fmt_unknown("s");
    return fmt_hundredths((uint64_t)hd, "", unit[k], "");
}

char *mp_fmt_signed(char *b, char sign, const char *text) {
    size_t k = 0, n = strlen(text);
    if (sign) b[k++] = sign;
    if (n > MP_FMT_MAX - 1 - k) n = MP_FMT_MAX - 1 - k;
    memcpy(b + k, text, n);
    b[k + n] = 0;
    return b;
}

uint64_t mp_sat_add(uint64_t a, uint64_t b) {
    bool ovf = false;
    return mp_uadd(a, b, &ovf);
}

uint64_t mp_sat_mul(uint64_t a, uint64_t b) {
    bool ovf = false;
    return mp_umul(a, b, &ovf);
}
