/* The trace reader: one streaming pass over Kineto's Chrome trace JSON,
 * plain or gzipped, keeping compact records (trace.h) and interned names.
 * Its one job is turning the JSON's bytes into those records; the bytes
 * themselves come from read_src.c (plain file, gzip and its inflater
 * thread, memory: read_int.h).
 *
 * Why it is longer than 1,500 lines: the tokenizer (whitespace, strings,
 * numbers, skipping), the event rules that read each member as it goes
 * by, and the pieces a large mapped file is parsed in at once all work on
 * one window struct (rd) with one set of static, partly always-inline
 * primitives, which the compiler inlines into the event parser: that is
 * where the reader's speed comes from (make bench-trace). Apart, they
 * would need those primitives and the window in a header shared by three
 * files, and a reader of any one of them would still need the other two.
 *
 * Bytes come through a window buffer (4 MB, grown only when one event is
 * larger). The tokenizer works inside the window with bounds checks; when
 * a unit (one top-level member, or one element of traceEvents) runs past
 * the end of the window, the window slides (the unparsed tail moves to the
 * front), more bytes are read, and the unit is parsed again from its
 * start. Memory is the window plus the records, whatever the file's size.
 * Why the tokenizer is hand-written, with measured figures: docs/DESIGN.md. */
#include "trace/trace.h"
#include "base/arrays.h"
#include "trace/read_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define RD_WINDOW ((size_t)4 << 20)
#define RD_MAX_UNIT ((size_t)256 << 20)   /* one event or top-level member */
#define RD_MAX_DEPTH 512
/* Times beyond this (about 106 days in ns, or a year of us since the
 * epoch scaled) are absurd for a profile: ts in us since boot or epoch is
 * below 1e17 ns; a duration above 1e15 ns (11 days) is rejected. */
#define RD_MAX_TS INT64_C(4000000000000000000)
#define RD_MAX_DUR INT64_C(1000000000000000)

int mp__trace_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ---- the window and the tokenizer ---- */

enum { RS_OK = 0, RS_MORE = 1, RS_BAD = 2 };

#define RD_FCACHE_BITS 8
typedef struct rd_fslot {
    uint8_t len;                 /* name length + 1; 0 empty */
    int8_t conc;
    int16_t rule;
    char name[92];
} rd_fslot;

typedef struct rd {
    rsrc src;
    const char *label;
    char *buf;
    size_t cap, len, pos;
    uint64_t base;               /* file offset of buf[0] (uncompressed) */
    bool eof;
    const char *err_at;          /* where a RS_BAD was found */
    const char *err;             /* what */
    mp_trace_raw *t;
    bool mapped;                 /* buf is the whole (plain) file, mapped */
    rd_pipe *pipe;               /* gzip: the inflater's thread; NULL inflates here */
    bool legacy;                 /* a bare event array: PyTorch without Kineto (legacy.c) */
    size_t released;             /* mapped bytes before this were given back */
    int threads;                 /* a mapped file's events: parsed in pieces by this many threads */
    size_t piece_min;            /* the smallest piece, bytes */
    size_t rel_step;             /* mapped pages given back in steps of this; 0: RD_RELEASE */
    char scratch[4096];          /* unescaped names */
    rd_fslot fcache[1 << RD_FCACHE_BITS];   /* flop_rule's cache */
} rd;

/* A mapped file's pages behind the parser are given back every MB (every
 * 256 KB while pieces are parsed at once: up to 16 threads each hold that
 * much), so the mapping never holds more of the file than that in memory. */
#define RD_RELEASE ((size_t)1 << 20)
#define RD_PIECE_RELEASE ((size_t)256 << 10)

/* The mapped pages before file offset upto (page-aligned) go back. */
static void rd_release_to(rd *r, size_t upto) {
    if (upto > r->released) {
        madvise(r->buf + r->released, upto - r->released, MADV_DONTNEED);
        r->released = upto;
    }
}

static void rd_release(rd *r) {
    size_t step = r->rel_step ? r->rel_step : RD_RELEASE;
    rd_release_to(r, r->pos & ~(step - 1));
}

static int rd_bad(rd *r, const char *at, const char *what) {
    r->err_at = at;
    r->err = what;
    return RS_BAD;
}

/* Slide and fill. Returns MP_OK, or an error (I/O, unit too large). */
static mp_status rd_fill(rd *r) {
    if (r->pos > 0) {
        memmove(r->buf, r->buf + r->pos, r->len - r->pos);
        r->base += r->pos;
        r->len -= r->pos;
        r->pos = 0;
    }
    if (r->len == r->cap) {
        if (r->cap >= RD_MAX_UNIT)
            return mp_error(MP_ERR_FORMAT,
                            "%s: byte %llu: one event or member is larger than %zu MB", r->label,
                            (unsigned long long)r->base, RD_MAX_UNIT >> 20);
        char *nb = realloc(r->buf, r->cap * 2);
        if (!nb) return mp_error(MP_ERR_NOMEM, "%s: out of memory", r->label);
        r->buf = nb;
        r->cap *= 2;
    }
    while (r->len < r->cap && !r->eof) {
        ssize_t k = r->pipe ? rd_pipe_read(r->pipe, r->buf + r->len, r->cap - r->len)
                            : rd_src_read(&r->src, r->buf + r->len, r->cap - r->len, r->label);
        if (k < 0) return r->src.err;
        if (k == 0) r->eof = true;
        r->len += (size_t)k;
        r->t->bytes += (uint64_t)k;
        if (k > 0) break;
    }
    return MP_OK;
}

/* ---- scanning primitives ----
 * Strings are scanned 16 bytes a step (SSE2, which every x86-64 has) and
 * skipped containers 64 bytes a step (four SSE2 loads give 64-bit masks of
 * quotes, backslashes, opening and closing brackets; the bytes inside
 * strings are the prefix XOR of the quotes); other machines scan strings 8
 * bytes a step in a 64-bit word and containers byte by byte. */
#if defined(__SSE2__)
#include <emmintrin.h>
#define RD_SSE2 1
#endif

/* The first '"' or '\\' in [p, e); e when none. */
static inline const char *find_quote(const char *p, const char *e) {
#ifdef RD_SSE2
    const __m128i q = _mm_set1_epi8('"'), b = _mm_set1_epi8('\\');
    while (e - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, b)));
        if (m) return p + __builtin_ctz(m);
        p += 16;
    }
#else
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    while (e - p >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
        uint64_t m = ((q - ones) & ~q & high) | ((b - ones) & ~b & high);
        if (m) return p + (__builtin_ctzll(m) >> 3);
        p += 8;
    }
#endif
    while (p < e && *p != '"' && *p != '\\') p++;
    return p;
}

static inline bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* Whitespace: most often none or one space (Kineto indents with runs of
 * spaces after a newline). */
static inline int ws(const char **pp, const char *e) {
    const char *p = *pp;
    if (p < e && (unsigned char)*p > ' ') return RS_OK;
    if (p < e && p[0] == ' ' && p + 1 < e && (unsigned char)p[1] > ' ') {   /* one space */
        *pp = p + 1;
        return RS_OK;
    }
#ifdef RD_SSE2
    /* a newline and an indent: 16 bytes a step */
    const __m128i sp = _mm_set1_epi8(' '), nl = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r'),
                  tb = _mm_set1_epi8('\t');
    while (e - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, sp), _mm_cmpeq_epi8(v, nl)),
                                 _mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, tb)));
        unsigned ws_bits = (unsigned)_mm_movemask_epi8(m);
        if (ws_bits != 0xffff) {
            *pp = p + __builtin_ctz(~ws_bits);
            return RS_OK;
        }
        p += 16;
    }
#endif
    while (p < e && is_ws(*p)) p++;
    *pp = p;
    return p < e ? RS_OK : RS_MORE;
}

#ifdef RD_SSE2
/* 64 bytes at p as bit masks (bit i: byte p[i]). */
typedef struct rd_blk {
    uint64_t quote, bslash, open, close;
} rd_blk;

static inline void rd_classify(const char *p, rd_blk *k) {
    const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), op = _mm_set1_epi8('{'),
                  cl = _mm_set1_epi8('}'), x20 = _mm_set1_epi8(0x20);
    uint64_t mq = 0, mb = 0, mo = 0, mc = 0;
    for (int i = 0; i < 4; i++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * i));
        __m128i lo = _mm_or_si128(v, x20);   /* '[' -> '{', ']' -> '}' */
        mq |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, q)) << (16 * i);
        mb |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, bs)) << (16 * i);
        mo |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(lo, op)) << (16 * i);
        mc |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(lo, cl)) << (16 * i);
    }
    k->quote = mq;
    k->bslash = mb;
    k->open = mo;
    k->close = mc;
}

/* Bit i set when an odd number of bits at or below i are set in x: with x
 * the quotes, the bytes inside strings (the opening quote counted in). */
static inline uint64_t prefix_xor(uint64_t x) {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    return x;
}
#endif

/* The rest of an object or array whose opening bracket is behind p
 * (members not needed), scanned iteratively with a depth count: 64 bytes a
 * step where a block holds no backslash, byte by byte where it does (an
 * escape) and in the last bytes of the window. */
static int skip_rest(rd *r, const char **pp, const char *e) {
    const char *p = *pp;
    int depth = 1;
    bool instr = false;
    for (;;) {
#ifdef RD_SSE2
        while (e - p >= 64) {
            rd_blk k;
            rd_classify(p, &k);
            if (k.bslash) break;
            uint64_t in = prefix_xor(k.quote) ^ (instr ? ~UINT64_C(0) : 0);
            instr = in >> 63;
            uint64_t op = k.open & ~in, cl = k.close & ~in;
            for (uint64_t m = op | cl; m; m &= m - 1) {
                int i = __builtin_ctzll(m);
                if ((cl >> i) & 1) {
                    if (--depth == 0) {
                        *pp = p + i + 1;
                        return RS_OK;
                    }
                } else if (++depth > RD_MAX_DEPTH) {
                    return rd_bad(r, p + i, "nesting too deep");
                }
            }
            p += 64;
        }
#endif
        /* byte by byte: a block with a backslash, or the window's tail */
        const char *stop = e - p > 64 ? p + 64 : e;
        while (p < stop) {
            char c = *p;
            if (instr) {
                if (c == '\\') {
                    if (p + 1 >= e) return RS_MORE;
                    p += 2;
                    continue;
                }
                if (c == '"') instr = false;
                p++;
                continue;
            }
            if (c == '"') {
                instr = true;
            } else if (c == '{' || c == '[') {
                if (++depth > RD_MAX_DEPTH) return rd_bad(r, p, "nesting too deep");
            } else if (c == '}' || c == ']') {
                if (--depth == 0) {
                    *pp = p + 1;
                    return RS_OK;
                }
            }
            p++;
        }
        if (p >= e) return RS_MORE;
    }
}

static inline int expect(rd *r, const char **pp, const char *e, char c) {
    if (ws(pp, e)) return RS_MORE;
    if (**pp != c) {
        static const char *const msg[] = {"expected '{'", "expected '['", "expected ':'",
                                          "expected '\"'"};
        return rd_bad(r, *pp, c == '{' ? msg[0] : c == '[' ? msg[1] : c == ':' ? msg[2] : msg[3]);
    }
    (*pp)++;
    return RS_OK;
}

/* A string: *s..*s+*n is its raw text (escapes not undone), *esc set when
 * it holds a backslash. */
static inline __attribute__((always_inline)) int str(rd *r, const char **pp, const char *e, const char **s, size_t *n,
                      bool *esc) {
    const char *p = *pp;
    if (ws(&p, e)) return RS_MORE;
    if (*p != '"') return rd_bad(r, p, "expected a string");
    p++;
    const char *start = p;
    *esc = false;
    p = find_quote(p, e);
    if (p < e && *p == '"') {
        *s = start;
        *n = (size_t)(p - start);
        *pp = p + 1;
        return RS_OK;
    }
    if (p >= e) return RS_MORE;
    for (;;) {
        const char *q = memchr(p, '"', (size_t)(e - p));
        if (!q) return RS_MORE;
        if (!*esc && memchr(p, '\\', (size_t)(q - p))) *esc = true;
        if (!*esc) {
            p = q;
            break;
        }
        /* slow path: walk escapes */
        while (p < e && *p != '"') {
            if (*p == '\\') {
                if (p + 1 >= e) return RS_MORE;
                p += 2;
            } else {
                p++;
            }
        }
        if (p >= e) return RS_MORE;
        break;
    }
    *s = start;
    *n = (size_t)(p - start);
    *pp = p + 1;
    return RS_OK;
}

static int hexv(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Undo JSON escapes into out (n bytes at most, UTF-8); returns the length.
 * Surrogate pairs join into their character; an unpaired surrogate or \u0000
 * becomes '?'; what is no JSON escape ("\s", "\uZZ") is kept as written. */
static size_t unescape(const char *s, size_t len, char *out, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < len && o + 4 < n; i++) {
        char c = s[i];
        if (c != '\\' || i + 1 >= len) {
            out[o++] = c;
            continue;
        }
        c = s[++i];
        switch (c) {
        case 'n': out[o++] = '\n'; break;
        case 't': out[o++] = '\t'; break;
        case 'r': out[o++] = '\r'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'u': {
            unsigned v = 0;
            bool ok = i + 4 < len;
            for (int k = 1; ok && k <= 4; k++) {
                int h = hexv(s[i + (size_t)k]);
                if (h < 0) ok = false;
                else v = v * 16 + (unsigned)h;
            }
            if (!ok) {   /* not an escape: kept as written */
                out[o++] = '\\';
                out[o++] = 'u';
                break;
            }
            i += 4;
            /* a surrogate pair (a character past the BMP, as json.dump writes it) */
            unsigned lo = 0;
            bool pair = v >= 0xd800 && v <= 0xdbff && i + 6 < len && s[i + 1] == '\\' && s[i + 2] == 'u';
            for (int k = 3; pair && k <= 6; k++) {
                int h = hexv(s[i + (size_t)k]);
                if (h < 0) pair = false;
                else lo = lo * 16 + (unsigned)h;
            }
            if (pair && lo >= 0xdc00 && lo <= 0xdfff) {
                unsigned cp = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
                out[o++] = (char)(0xf0 | (cp >> 18));
                out[o++] = (char)(0x80 | ((cp >> 12) & 0x3f));
                out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[o++] = (char)(0x80 | (cp & 0x3f));
                i += 6;
            } else if (v == 0 || (v >= 0xd800 && v <= 0xdfff)) {
                out[o++] = '?';
            } else if (v < 0x80) {
                out[o++] = (char)v;
            } else if (v < 0x800) {
                out[o++] = (char)(0xc0 | (v >> 6));
                out[o++] = (char)(0x80 | (v & 0x3f));
            } else {
                out[o++] = (char)(0xe0 | (v >> 12));
                out[o++] = (char)(0x80 | ((v >> 6) & 0x3f));
                out[o++] = (char)(0x80 | (v & 0x3f));
            }
            break;
        }
        case '"':
        case '\\':
        case '/': out[o++] = c; break;
        /* not a JSON escape: PyTorch without Kineto writes names as they
         * are ("dir\sub"), so the backslash is the name's */
        default:
            out[o++] = '\\';
            out[o++] = c;
            break;
        }
    }
    return o;
}

/* The value of eight decimal digits, d holding them less '0' (little
 * endian: the first digit in the lowest byte). */
static inline uint64_t eight_digits(uint64_t d) {
    d = d * 10 + (d >> 8);   /* pairs */
    d = (((d & UINT64_C(0x000000FF000000FF)) * UINT64_C(0x000F424000000064)) +
         (((d >> 16) & UINT64_C(0x000000FF000000FF)) * UINT64_C(0x0000271000000001))) >> 32;
    return d;
}

/* A number as fixed point: value * 10^scale rounded to nearest (scale 3:
 * us -> ns). Accepts JSON numbers; exponents go through strtod. *isnull
 * is set for the literal null. */
static inline __attribute__((always_inline)) int num(rd *r, const char **pp, const char *e, int scale, int64_t *out) {
    const char *p = *pp;
    if (ws(&p, e)) return RS_MORE;
    const char *start = p;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    uint64_t v = 0;
    int digits = 0, frac = 0;
    bool big = false, expo = false;
    /* eight digits at a time while they are there (a timestamp has 16) */
    while (e - p >= 8 && digits <= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        /* every byte '0'..'9': high nibble 3, and still 3 after adding 6 */
        if (((x & UINT64_C(0xF0F0F0F0F0F0F0F0)) |
             (((x + UINT64_C(0x0606060606060606)) & UINT64_C(0xF0F0F0F0F0F0F0F0)) >> 4)) !=
            UINT64_C(0x3333333333333333))
            break;
        v = v * 100000000 + eight_digits(x - UINT64_C(0x3030303030303030));
        p += 8;
        digits += 8;
    }
    while (p < e && (unsigned)(*p - '0') < 10) {
        if (v > (UINT64_MAX - 9) / 10) big = true;
        else v = v * 10 + (uint64_t)(*p - '0');
        p++;
        digits++;
    }
    bool up = false;   /* the first digit past the scale rounds to nearest */
    if (p < e && *p == '.') {
        p++;
        while (p < e && (unsigned)(*p - '0') < 10) {
            if (frac < scale) {
                if (v > (UINT64_MAX - 9) / 10) big = true;
                else v = v * 10 + (uint64_t)(*p - '0');
                frac++;
            } else if (frac == scale) {
                up = *p >= '5';
                frac++;
            }
            p++;
        }
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        expo = true;
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        while (p < e && (unsigned)(*p - '0') < 10) p++;
    }
    if (p >= e) return RS_MORE;
    if (!digits) return rd_bad(r, start, "expected a number");
    if (expo || big) {
        char tmp[64];
        size_t k = MP_MIN((size_t)(p - start), sizeof tmp - 1);
        memcpy(tmp, start, k);
        tmp[k] = 0;
        double d = strtod(tmp, NULL);
        for (int i = 0; i < scale; i++) d *= 10;
        if (!(d > -9.2e18 && d < 9.2e18)) return rd_bad(r, start, "number out of range");
        *out = (int64_t)d;
        *pp = p;
        return RS_OK;
    }
    for (; frac < scale; frac++) {
        if (v > UINT64_MAX / 10) return rd_bad(r, start, "number out of range");
        v *= 10;
    }
    v += up;
    if (v > (uint64_t)INT64_MAX) return rd_bad(r, start, "number out of range");
    *out = neg ? -(int64_t)v : (int64_t)v;
    *pp = p;
    return RS_OK;
}

/* Skip any value. Containers are scanned iteratively (depth counted). */
static int skip(rd *r, const char **pp, const char *e) {
    const char *p = *pp;
    if (ws(&p, e)) return RS_MORE;
    char c = *p;
    if (c == '"') {
        const char *s;
        size_t n;
        bool esc;
        int st = str(r, &p, e, &s, &n, &esc);
        if (st) return st;
        *pp = p;
        return RS_OK;
    }
    if (c == '{' || c == '[') {
        const char *q = p + 1;
        int st = skip_rest(r, &q, e);
        if (st == RS_OK) *pp = q;
        return st;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        /* a number we do not keep: its characters are checked, not its value */
        static const uint8_t numc[256] = {['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1,
                                          ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
                                          ['.'] = 1, ['e'] = 1, ['E'] = 1, ['+'] = 1, ['-'] = 1};
        const char *s0 = p;
        p++;
        while (p < e && numc[(unsigned char)*p]) p++;
        if (p >= e) return RS_MORE;
        if (c == '-' && p == s0 + 1) return rd_bad(r, s0, "expected a number");
        *pp = p;
        return RS_OK;
    }
    static const char *const lit[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t k = strlen(lit[i]);
        if (c == lit[i][0]) {
            if ((size_t)(e - p) < k) return RS_MORE;
            if (memcmp(p, lit[i], k) != 0) break;
            *pp = p + k;
            return RS_OK;
        }
    }
    return rd_bad(r, p, "expected a JSON value");
}

/* After a member or element: ',' (returns RS_OK, *more = true) or the
 * closing bracket (RS_OK, *more = false). */
static inline __attribute__((always_inline)) int sep(rd *r, const char **pp, const char *e, char close, bool *more) {
    if (ws(pp, e)) return RS_MORE;
    if (**pp == ',') {
        (*pp)++;
        *more = true;
        return RS_OK;
    }
    if (**pp == close) {
        (*pp)++;
        *more = false;
        return RS_OK;
    }
    return rd_bad(r, *pp, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
}

#define KEY_IS(s, n, lit) ((n) == sizeof(lit) - 1 && memcmp((s), (lit), sizeof(lit) - 1) == 0)
#define TRY(x)                  \
    do {                        \
        int st_ = (x);          \
        if (st_) return st_;    \
    } while (0)

/* ---- records ---- */

/* Record arrays (spans, device events, memory records, ...): each a
 * mapping of its own, grown into a new one (the old unmapped at once:
 * nothing left behind in a heap; the room not yet written takes no
 * memory), with huge pages off (the first record written in a huge page
 * takes all 2 MB of it). From the heap, a thread's pieces grew their arrays by copies and
 * its heap kept the holes: 16 threads read the 523 MB MobileNet trace with
 * a peak of 61-68 MB. Freed with mp__trace_rec_free. */
typedef struct rec_head {
    size_t len;    /* of the mapping, header included */
    size_t pad;    /* records stay 16-byte aligned */
} rec_head;

static void *rec_resize(void *old, size_t used, size_t bytes) {
    const size_t pg = 4096;
    if (bytes > SIZE_MAX - sizeof(rec_head) - pg) return NULL;
    size_t len = (bytes + sizeof(rec_head) + pg - 1) & ~(pg - 1);
    rec_head *h = old ? (rec_head *)old - 1 : NULL;
    if (h && len <= h->len) return old;
    void *p = mp_pages_alloc(len, MP_PAGES_NOHUGE);
    if (!p) return NULL;
    if (h) {   /* copied, not mremap'd: a moved mapping's old addresses, reused
                * by another thread's mapping, read as a race to TSan */
        memcpy((rec_head *)p + 1, h + 1, used);
        mp_pages_free(h, h->len, MP_PAGES_NOHUGE);
    }
    h = p;
    h->len = len;
    return h + 1;
}

void mp__trace_rec_free(void *arr) {
    if (!arr) return;
    rec_head *h = (rec_head *)arr - 1;
    mp_pages_free(h, h->len, MP_PAGES_NOHUGE);
}

static void *grow_arr(void *old, size_t elem, size_t *cap, size_t need) {
    if (need <= *cap) return old;
    size_t nc = *cap ? *cap : 256;
    while (nc < need) nc *= 2;
    if (nc > SIZE_MAX / elem) return NULL;
    void *p = rec_resize(old, *cap * elem, nc * elem);
    if (p) *cap = nc;
    return p;
}

#define PUSH(arr, n, cap, out)                                                   \
    do {                                                                         \
        void *np_ = grow_arr((arr), sizeof *(arr), &(cap), (n) + 1);             \
        if (!np_) return -1;                                                     \
        (arr) = np_;                                                             \
        (out) = &(arr)[(n)++];                                                   \
    } while (0)

/* intern and thread_index: -1 out of memory, -2 past what a record holds */
#define RD_LIMIT (-2)

static int intern_h(mp_trace_raw *t, const char *s, size_t n, uint32_t h) {
    int v = mp_strmap_getn_h(&t->names_map, s, n, h);
    if (v >= 0) return v;
    if (t->n_names >= (1 << MP_TNAME_BITS) - 1) return RD_LIMIT;
    char *copy = mp_arena_strndup(&t->arena, s, n);
    if (!copy) return -1;
    int *cap = &t->cap_names;
    const char **nn = mp_grow(t->names, sizeof *t->names, cap, t->n_names + 1);
    if (!nn) return -1;
    t->names = nn;
    if (mp_strmap_put_h(&t->names_map, copy, n, h, t->n_names) != MP_OK) return -1;
    t->names[t->n_names] = copy;
    return t->n_names++;
}

static int intern(mp_trace_raw *t, const char *s, size_t n) {
    return intern_h(t, s, n, mp_strmap_hash(s, n));
}

static int thread_index(mp_trace_raw *t, int64_t pid, int64_t tid) {
    int64_t key = (int64_t)((uint64_t)pid << 32) ^ (int64_t)(uint32_t)tid;
    for (int i = t->n_threads - 1; i >= 0; i--)
        if (t->threads[i] == key) return i;
    if (t->n_threads > UINT16_MAX) return RD_LIMIT;
    int64_t *nt = mp_grow(t->threads, sizeof *t->threads, &t->cap_threads, t->n_threads + 1);
    if (!nt) return -1;
    t->threads = nt;
    t->threads[t->n_threads] = key;
    return t->n_threads++;
}

/* ---- one event ---- */

enum { C_OTHER, C_CPU_OP, C_ANNOT, C_RUNTIME, C_DRIVER, C_PYTHON, C_KERNEL, C_MEMCPY, C_MEMSET,
       C_GPU_ANNOT, C_FWDBWD, C_INSTANT, C_ORT_NODE, C_ORT_SESSION };

typedef struct ev {
    char ph;
    int cat;
    const char *name;
    size_t name_len;
    bool name_esc;
    int64_t pid, tid, ts, dur, id;
    bool has_pid, has_tid, has_ts, has_dur, has_id;
    int64_t ext, corr, seq, alloc, reserved, bytes, dev_type, device, stream;
    bool has_alloc, has_reserved;
    const char *ort_op, *ort_prov;   /* ONNX Runtime: args.op_name, args.provider */
    size_t ort_op_len, ort_prov_len;
    bool ort_op_esc, ort_prov_esc;
    int ort_threads;            /* 1 + sub_threads of args.thread_scheduling_stats; 0 */
    const char *ort_in, *ort_out; /* args.input_type_shape, output_type_shape: the JSON text */
    size_t ort_in_len, ort_out_len;
    int frule, fconc;           /* FLOP rule (flops.c) and its Concrete Inputs */
    uint8_t dtype;
    bool has_dims;              /* "Input Dims" recorded */
    bool has_aflops, aflops_null; /* args.flops: a count (modelprof's own Chrome trace), or null */
    int64_t aflops;
    /* a collective (comm.c): read into the side table (mp_tcomm) */
    bool comm;
    uint8_t c_bytes;
    int64_t c_in, c_out, c_dims, c_group, c_seq;
    const char *c_coll, *c_pg, *c_ranks;
    size_t c_coll_n, c_pg_n, c_ranks_n;
    /* last: parse_event clears what is above it, and of this only the
     * counts (its arrays are read up to them; clearing all of it took a
     * tenth of the parse) */
    mp_tshapes sh;              /* Input Dims and Concrete Inputs the FLOP rule reads */
} ev;

/* ---- collectives: what the side table (mp_tcomm) keeps ---- */

/* Events that are collectives by name: gloo:* and nccl:* annotations,
 * c10d::* operators, record_param_comms, NCCL kernels. */
static bool comm_name(const char *s, size_t n) {
    return (n > 5 && (memcmp(s, "gloo:", 5) == 0 || memcmp(s, "nccl:", 5) == 0)) ||
           (n > 6 && memcmp(s, "c10d::", 6) == 0) || KEY_IS(s, n, "record_param_comms") ||
           (n > 14 && memcmp(s, "ncclDevKernel_", 14) == 0) ||
           (n > 11 && memcmp(s, "ncclKernel_", 11) == 0);
}

/* Bytes of one element: Input type ("float", "long int", "c10::BFloat16")
 * and record_param_comms' dtype ("Float", "BFloat16", "Long"). 0 unknown. */
static uint8_t comm_elem_bytes(const char *s, size_t n) {
    static const struct { const char *name; uint8_t bytes; } t[] = {
        {"float", 4}, {"Float", 4}, {"double", 8}, {"Double", 8}, {"c10::Half", 2}, {"Half", 2},
        {"c10::BFloat16", 2}, {"BFloat16", 2}, {"long int", 8}, {"Long", 8}, {"int", 4},
        {"Int", 4}, {"short int", 2}, {"Short", 2}, {"bool", 1}, {"Bool", 1},
        {"unsigned char", 1}, {"Byte", 1}, {"signed char", 1}, {"Char", 1}};
    for (size_t i = 0; i < MP_ARRAY_LEN(t); i++)
        if (n == strlen(t[i].name) && memcmp(s, t[i].name, n) == 0) return t[i].bytes;
    if (n > 12 && (memcmp(s, "c10::Float8_", 12) == 0 || memcmp(s, "Float8_", 7) == 0)) return 1;
    return 0;
}


static int cat_of(const char *s, size_t n) {
    switch (n) {
    case 4: if (KEY_IS(s, n, "Node")) return C_ORT_NODE; break;
    case 7: if (KEY_IS(s, n, "Session")) return C_ORT_SESSION; break;
    case 6:
        if (KEY_IS(s, n, "cpu_op")) return C_CPU_OP;
        if (KEY_IS(s, n, "kernel")) return C_KERNEL;
        if (KEY_IS(s, n, "fwdbwd")) return C_FWDBWD;
        break;
    case 10:
        if (KEY_IS(s, n, "gpu_memcpy")) return C_MEMCPY;
        if (KEY_IS(s, n, "gpu_memset")) return C_MEMSET;
        break;
    case 11: if (KEY_IS(s, n, "cuda_driver")) return C_DRIVER; break;
    case 12: if (KEY_IS(s, n, "cuda_runtime")) return C_RUNTIME; break;
    case 15:
        if (KEY_IS(s, n, "user_annotation")) return C_ANNOT;
        if (KEY_IS(s, n, "python_function")) return C_PYTHON;
        break;
    case 17: if (KEY_IS(s, n, "cpu_instant_event")) return C_INSTANT; break;
    case 19: if (KEY_IS(s, n, "gpu_user_annotation")) return C_GPU_ANNOT; break;
    default: break;
    }
    return C_OTHER;
}

static int parse_int_array(rd *r, const char **pp, const char *e, int64_t *out, int max,
                           int *n) {
    const char *p = *pp;
    TRY(expect(r, &p, e, '['));
    *n = 0;
    if (ws(&p, e)) return RS_MORE;
    if (*p == ']') {
        *pp = p + 1;
        return RS_OK;
    }
    for (;;) {
        int64_t v;
        TRY(num(r, &p, e, 0, &v));
        if (*n < max) out[*n] = v;
        (*n)++;
        bool more;
        TRY(sep(r, &p, e, ']', &more));
        if (!more) break;
    }
    if (*n > max) *n = max + 1;   /* too many: marked unusable */
    *pp = p;
    return RS_OK;
}

static int parse_dims(rd *r, const char **pp, const char *e, ev *v) {
    const char *p = *pp;
    TRY(expect(r, &p, e, '['));
    v->sh.nin = 0;
    if (ws(&p, e)) return RS_MORE;
    if (*p == ']') {
        *pp = p + 1;
        return RS_OK;
    }
    for (;;) {
        if (ws(&p, e)) return RS_MORE;
        if (v->sh.nin < MP_TFL_IN && *p == '[') {
            TRY(parse_int_array(r, &p, e, v->sh.dims[v->sh.nin], 5, &v->sh.nd[v->sh.nin]));
            v->sh.nin++;
        } else {
            TRY(skip(r, &p, e));
        }
        bool more;
        TRY(sep(r, &p, e, ']', &more));
        if (!more) break;
    }
    *pp = p;
    return RS_OK;
}

/* "[2, 2]" inside a string of Concrete Inputs. */
static void small_list(const char *s, size_t n, int64_t *out, int *cnt) {
    *cnt = 0;
    size_t i = 0;
    while (i < n && *cnt < 3) {
        while (i < n && (s[i] < '0' || s[i] > '9')) i++;
        if (i >= n) break;
        int64_t v = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9' && v < INT64_C(1) << 40) v = v * 10 + (s[i++] - '0');
        out[(*cnt)++] = v;
    }
}

/* An array whose string elements matter by position (the other elements
 * are skipped): each string goes to take(v, i, s, n). */
typedef void (*str_elem_fn)(ev *v, int i, const char *s, size_t n);

static int parse_str_array(rd *r, const char **pp, const char *e, ev *v, str_elem_fn take) {
    const char *p = *pp;
    TRY(expect(r, &p, e, '['));
    if (ws(&p, e)) return RS_MORE;
    if (*p == ']') {
        *pp = p + 1;
        return RS_OK;
    }
    for (int i = 0;; i++) {
        if (ws(&p, e)) return RS_MORE;
        if (*p == '"') {
            const char *s;
            size_t n;
            bool esc;
            TRY(str(r, &p, e, &s, &n, &esc));
            take(v, i, s, n);
        } else {
            TRY(skip(r, &p, e));
        }
        bool more;
        TRY(sep(r, &p, e, ']', &more));
        if (!more) break;
    }
    *pp = p;
    return RS_OK;
}

/* "Concrete Inputs": a convolution's stride, padding and dilation lists
 * (elements 3-5) and its groups (6). */
static void take_concrete(ev *v, int i, const char *s, size_t n) {
    if (v->fconc == MP_TFC_CONV2D) {
        if (i >= 3 && i <= 5) small_list(s, n, v->sh.conv[i - 3], &v->sh.nconv[i - 3]);
        if (i == 6) {
            int64_t g[3];
            int c;
            small_list(s, n, g, &c);
            if (c == 1) v->sh.groups = g[0];
        }
    } else if (v->fconc == MP_TFC_CONV_BWD && i == 10) {
        /* output_mask: "[True, True, False]" */
        int k = 0;
        for (size_t j = 0; j < n && k < 3; j++)
            if (s[j] == 'T' || s[j] == 'F') {
                v->sh.mask[k++] = s[j] == 'T';
                while (j + 1 < n && s[j + 1] >= 'a' && s[j + 1] <= 'z') j++;
            }
    }
}

static uint8_t dtype_of(const char *s, size_t n) {
    if (KEY_IS(s, n, "float")) return MP_TDT_FP32;
    if (KEY_IS(s, n, "c10::BFloat16")) return MP_TDT_BF16;
    if (KEY_IS(s, n, "c10::Half")) return MP_TDT_FP16;
    if (KEY_IS(s, n, "double")) return MP_TDT_FP64;
    if (n > 14 && memcmp(s, "c10::Float8_", 12) == 0) return MP_TDT_FP8;
    return MP_TDT_NONE;
}

/* "Input type": the first input's dtype. */
static void take_type(ev *v, int i, const char *s, size_t n) {
    if (i == 0) v->dtype = dtype_of(s, n);
    if (i == 0 && v->comm && !v->c_bytes) v->c_bytes = comm_elem_bytes(s, n);
}

static void take_comm_type(ev *v, int i, const char *s, size_t n) {
    if (i == 0 && !v->c_bytes) v->c_bytes = comm_elem_bytes(s, n);
}

/* An array's elements: fn reads (or skips) element i. */
typedef int (*elem_fn)(rd *r, int i, const char **pp, const char *e, void *ud);

static int elements(rd *r, const char **pp, const char *e, elem_fn fn, void *ud) {
    const char *p = *pp;
    TRY(expect(r, &p, e, '['));
    if (ws(&p, e)) return RS_MORE;
    if (*p == ']') {
        *pp = p + 1;
        return RS_OK;
    }
    for (int i = 0;; i++) {
        if (ws(&p, e)) return RS_MORE;
        TRY(fn(r, i, &p, e, ud));
        bool more;
        TRY(sep(r, &p, e, ']', &more));
        if (!more) break;
    }
    *pp = p;
    return RS_OK;
}

/* An object's members: fn reads (or skips) each member's value. */
typedef int (*member_fn)(rd *r, const char *k, size_t kn, const char **pp, const char *e, void *ud);

static int members(rd *r, const char **pp, const char *e, member_fn fn, void *ud) {
    const char *p = *pp;
    TRY(expect(r, &p, e, '{'));
    if (ws(&p, e)) return RS_MORE;
    bool more = *p != '}';
    if (!more) p++;
    while (more) {
        const char *k;
        size_t kn;
        bool esc;
        TRY(str(r, &p, e, &k, &kn, &esc));
        TRY(expect(r, &p, e, ':'));
        if (ws(&p, e)) return RS_MORE;
        TRY(fn(r, k, kn, &p, e, ud));
        TRY(sep(r, &p, e, '}', &more));
    }
    *pp = p;
    return RS_OK;
}

/* The elements of one "Input Dims" entry: a tensor's dims multiply, a
 * tensor list's tensors add up ([[513000]] and [513000] are 513000). */
typedef struct numel_acc {
    int64_t prod, sum;
    bool list, any;
    int depth;
} numel_acc;

static int numel_value(rd *r, const char **pp, const char *e, int64_t *out, int depth);

static int numel_elem(rd *r, int i, const char **pp, const char *e, void *ud) {
    (void)i;
    numel_acc *x = ud;
    x->any = true;
    if (**pp == '[' && x->depth < 3) {
        int64_t v;
        TRY(numel_value(r, pp, e, &v, x->depth + 1));
        x->list = true;
        if (v > 0 && __builtin_add_overflow(x->sum, v, &x->sum)) x->sum = INT64_MAX / 2;
        return RS_OK;
    }
    if (**pp == '-' || (**pp >= '0' && **pp <= '9')) {
        int64_t d;
        TRY(num(r, pp, e, 0, &d));
        if (d < 0 || __builtin_mul_overflow(x->prod, d, &x->prod)) x->prod = INT64_MAX / 2;
        return RS_OK;
    }
    return skip(r, pp, e);
}

static int numel_value(rd *r, const char **pp, const char *e, int64_t *out, int depth) {
    numel_acc x = {1, 0, false, false, depth};
    TRY(elements(r, pp, e, numel_elem, &x));
    *out = !x.any ? -1 : x.list ? x.sum : x.prod;
    return RS_OK;
}

/* "Input Dims" of a collective: the first input's elements. */
static int first_numel(rd *r, int i, const char **pp, const char *e, void *ud) {
    if (i == 0 && **pp == '[') return numel_value(r, pp, e, ud, 0);
    return skip(r, pp, e);
}

static int parse_numel(rd *r, const char **pp, const char *e, int64_t *out) {
    return elements(r, pp, e, first_numel, out);
}

/* A string arg of a collective (record_param_comms). */
static int comm_str(rd *r, const char **pp, const char *e, const char **s, size_t *n) {
    bool esc;
    if (ws(pp, e)) return RS_MORE;
    if (**pp != '"') return skip(r, pp, e);
    return str(r, pp, e, s, n, &esc);
}

/* The FLOP rule of an operator name (flops.c), through a small cache: a
 * trace asks it of every operator, and has a few hundred names. */
static int flop_rule(rd *r, const char *name, size_t n, int *conc) {
    if (n > sizeof r->fcache[0].name) return mp_trace_flop_rule(name, n, conc);
    uint64_t a = 0, b = 0;
    memcpy(&a, name, MP_MIN(n, 8));
    if (n > 8) memcpy(&b, name + n - 8, 8);
    uint64_t h = (a ^ (b * UINT64_C(0x9e3779b97f4a7c15)) ^ n) * UINT64_C(0xff51afd7ed558ccd);
    rd_fslot *f = &r->fcache[h >> (64 - RD_FCACHE_BITS)];
    if (f->len == n + 1 && memcmp(f->name, name, n) == 0) {
        *conc = f->conc;
        return f->rule;
    }
    int rule = mp_trace_flop_rule(name, n, conc);
    f->len = (uint8_t)(n + 1);
    memcpy(f->name, name, n);
    f->rule = (int16_t)rule;
    f->conc = (int8_t)*conc;
    return rule;
}

/* ONNX Runtime's args.thread_scheduling_stats: {"main_thread": {...},
 * "sub_threads": {"<id>": {...}, ...}}; the threads are the main one and
 * the sub_threads' members. */
static int count_member(rd *r, const char *k, size_t kn, const char **pp, const char *e, void *ud) {
    (void)k;
    (void)kn;
    ++*(int *)ud;
    return skip(r, pp, e);
}

static int ort_thread_member(rd *r, const char *k, size_t kn, const char **pp, const char *e, void *ud) {
    if (!KEY_IS(k, kn, "sub_threads") || **pp != '{') return skip(r, pp, e);
    int n = 0;
    TRY(members(r, pp, e, count_member, &n));
    ((ev *)ud)->ort_threads = n < 4096 ? 1 + n : 4096;
    return RS_OK;
}

static int parse_ort_threads(rd *r, const char **pp, const char *e, ev *v) {
    return members(r, pp, e, ort_thread_member, v);
}

static int parse_args(rd *r, const char **pp, const char *e, ev *v) {
    const char *p = *pp;
    TRY(expect(r, &p, e, '{'));
    if (ws(&p, e)) return RS_MORE;
    if (*p == '}') {
        *pp = p + 1;
        return RS_OK;
    }
    /* a bare event array (legacy.c) has no categories: its operators are
     * known by name only once kept, so every name is asked */
    if ((v->cat == C_CPU_OP || (r->legacy && v->cat == C_OTHER)) && v->name)
        v->frule = flop_rule(r, v->name, v->name_len, &v->fconc);
    int fk = v->frule;
    for (;;) {
        const char *k;
        size_t kn;
        bool esc;
        TRY(str(r, &p, e, &k, &kn, &esc));
        TRY(expect(r, &p, e, ':'));
        if (ws(&p, e)) return RS_MORE;
        bool isnum = *p == '-' || (*p >= '0' && *p <= '9');
        int64_t *dst = NULL;
        bool *flag = NULL;
        switch (kn) {
        case 3:
            if (KEY_IS(k, kn, "Seq")) dst = &v->c_seq;
            break;
        case 5:
            if (KEY_IS(k, kn, "Bytes")) dst = &v->bytes;
            else if (KEY_IS(k, kn, "flops")) {
                /* the producer's own count: null where it has none */
                if (*p == 'n') v->aflops_null = true;
                dst = &v->aflops;
                flag = &v->has_aflops;
            } else if (KEY_IS(k, kn, "dtype") && *p == '"') {
                const char *s;
                size_t n;
                TRY(comm_str(r, &p, e, &s, &n));
                v->c_bytes = comm_elem_bytes(s, n);
                goto next;
            }
            break;
        case 13:
            if (KEY_IS(k, kn, "In msg nelems")) dst = &v->c_in;
            break;
        case 18:
            if (KEY_IS(k, kn, "Process Group Name")) {
                TRY(comm_str(r, &p, e, &v->c_pg, &v->c_pg_n));
                goto next;
            }
            break;
        case 19:
            if (KEY_IS(k, kn, "Process Group Ranks")) {
                TRY(comm_str(r, &p, e, &v->c_ranks, &v->c_ranks_n));
                goto next;
            }
            break;
        case 7: /* ONNX Runtime */
            if (*p == '"' && KEY_IS(k, kn, "op_name")) {
                TRY(str(r, &p, e, &v->ort_op, &v->ort_op_len, &v->ort_op_esc));
                goto next;
            }
            break;
        case 8:
            if (*p == '"' && KEY_IS(k, kn, "provider")) {
                TRY(str(r, &p, e, &v->ort_prov, &v->ort_prov_len, &v->ort_prov_esc));
                goto next;
            }
            break;
        case 16:
        case 17:
            if (*p == '[' && (KEY_IS(k, kn, "input_type_shape") || KEY_IS(k, kn, "output_type_shape"))) {
                const char *at = p;
                TRY(skip(r, &p, e));
                if (kn == 16) v->ort_in = at, v->ort_in_len = (size_t)(p - at);
                else v->ort_out = at, v->ort_out_len = (size_t)(p - at);
                goto next;
            }
            break;
        case 23:
            if (*p == '{' && KEY_IS(k, kn, "thread_scheduling_stats")) {
                TRY(parse_ort_threads(r, &p, e, v));
                goto next;
            }
            break;
        case 6:
            if (KEY_IS(k, kn, "stream")) dst = &v->stream;
            else if (KEY_IS(k, kn, "device")) dst = &v->device;
            break;
        case 11:
            if (KEY_IS(k, kn, "External id")) dst = &v->ext;
            else if (KEY_IS(k, kn, "correlation")) dst = &v->corr;
            else if (KEY_IS(k, kn, "Device Type")) dst = &v->dev_type;
            break;
        case 10:
            if (KEY_IS(k, kn, "Input Dims")) {
                v->has_dims = true;
                if (fk) TRY(parse_dims(r, &p, e, v));
                else if (v->comm) TRY(parse_numel(r, &p, e, &v->c_dims));
                else TRY(skip(r, &p, e));
                goto next;
            }
            if ((fk || v->comm) && KEY_IS(k, kn, "Input type")) {
                TRY(parse_str_array(r, &p, e, v, fk ? take_type : take_comm_type));
                goto next;
            }
            if (KEY_IS(k, kn, "Group size")) dst = &v->c_group;
            break;
        case 14:
            if (KEY_IS(k, kn, "Total Reserved")) {
                dst = &v->reserved;
                flag = &v->has_reserved;
            }
            else if (KEY_IS(k, kn, "Out msg nelems")) dst = &v->c_out;
            break;
        case 15:
            if (KEY_IS(k, kn, "Sequence number")) dst = &v->seq;
            else if (KEY_IS(k, kn, "Total Allocated")) {
                dst = &v->alloc;
                flag = &v->has_alloc;
            } else if (v->fconc && KEY_IS(k, kn, "Concrete Inputs")) {
                TRY(parse_str_array(r, &p, e, v, take_concrete));
                goto next;
            } else if (KEY_IS(k, kn, "Collective name")) {
                TRY(comm_str(r, &p, e, &v->c_coll, &v->c_coll_n));
                v->comm = true;
                goto next;
            }
            break;
        default: break;
        }
        if (dst && isnum) {
            TRY(num(r, &p, e, 0, dst));
            if (flag) *flag = true;
        } else {
            TRY(skip(r, &p, e));
        }
    next:;
        bool more;
        TRY(sep(r, &p, e, '}', &more));
        if (!more) break;
    }
    *pp = p;
    return RS_OK;
}

/* An event's name for a message (as written, cut to the buffer, control
 * bytes as '?'); "" when it has none yet. */
static void ev_name(const ev *v, char *nm, size_t cap) {
    size_t nl = v->name ? MP_MIN(v->name_len, cap - 1) : 0;
    if (v->name) memcpy(nm, v->name, nl);
    nm[nl] = 0;
    for (size_t i = 0; i < nl; i++)
        if ((unsigned char)nm[i] < 0x20) nm[i] = '?';
}

static int parse_event(rd *r, const char **pp, const char *e, ev *v) {
    const char *p = *pp;
    memset(v, 0, offsetof(ev, sh));
    v->ext = v->corr = v->seq = v->dev_type = v->device = v->stream = -1;
    v->c_in = v->c_out = v->c_dims = v->c_group = v->c_seq = -1;
    v->sh.nin = 0;
    memset(v->sh.nd, 0, sizeof v->sh.nd);
    memset(v->sh.nconv, 0, sizeof v->sh.nconv);
    v->sh.groups = 1;
    memset(v->sh.mask, 0xff, sizeof v->sh.mask);
    TRY(expect(r, &p, e, '{'));
    if (ws(&p, e)) return RS_MORE;
    if (*p == '}') {
        *pp = p + 1;
        return RS_OK;
    }
    for (;;) {
        const char *k;
        size_t kn;
        bool esc;
        TRY(str(r, &p, e, &k, &kn, &esc));
        TRY(expect(r, &p, e, ':'));
        if (ws(&p, e)) return RS_MORE;
        char c = *p;
        bool isnum = c == '-' || (c >= '0' && c <= '9');
        if (kn > 4) {
            if (KEY_IS(k, kn, "args") && c == '{') TRY(parse_args(r, &p, e, v));
            else TRY(skip(r, &p, e));
        } else if (KEY_IS(k, kn, "ph") && c == '"') {
            const char *s;
            size_t n;
            TRY(str(r, &p, e, &s, &n, &esc));
            v->ph = n == 1 ? s[0] : '?';
        } else if (KEY_IS(k, kn, "cat") && c == '"') {
            const char *s;
            size_t n;
            TRY(str(r, &p, e, &s, &n, &esc));
            v->cat = cat_of(s, n);
        } else if (KEY_IS(k, kn, "name") && c == '"') {
            TRY(str(r, &p, e, &v->name, &v->name_len, &v->name_esc));
            v->comm = comm_name(v->name, v->name_len);
            /* Python frames other than nn.Module scopes are not kept: the
             * rest of the event is only scanned */
            if (v->cat == C_PYTHON && !mp_trace_module_range(v->name, v->name_len, NULL)) {
                TRY(skip_rest(r, &p, e));
                *pp = p;
                return RS_OK;
            }
        } else if (KEY_IS(k, kn, "ts") && isnum) {
            TRY(num(r, &p, e, 3, &v->ts));
            v->has_ts = true;
        } else if (KEY_IS(k, kn, "dur") && isnum) {
            TRY(num(r, &p, e, 3, &v->dur));
            v->has_dur = true;
        } else if (KEY_IS(k, kn, "pid") && c == '"' && r->legacy) {
            TRY(skip(r, &p, e));   /* "CPU functions": one process */
            v->pid = 0;
            v->has_pid = true;
        } else if (KEY_IS(k, kn, "pid") && isnum) {
            TRY(num(r, &p, e, 0, &v->pid));
            v->has_pid = true;
        } else if (KEY_IS(k, kn, "tid") && isnum) {
            TRY(num(r, &p, e, 0, &v->tid));
            v->has_tid = true;
        } else if (KEY_IS(k, kn, "id") && isnum) {
            TRY(num(r, &p, e, 0, &v->id));
            v->has_id = true;
        } else if (KEY_IS(k, kn, "args") && c == '{') {
            TRY(parse_args(r, &p, e, v));
        } else {
            TRY(skip(r, &p, e));
        }
        bool more;
        TRY(sep(r, &p, e, '}', &more));
        if (!more) break;
    }
    *pp = p;
    return RS_OK;
}

/* The names key_averages leaves out (PyTorch's _filter_name). */
static bool filtered(const char *s, size_t n) {
#define RD_NAME(x) {x, sizeof x - 1}
    static const struct {
        const char *s;
        size_t n;
    } names[] = {RD_NAME("[memory]"), RD_NAME("[OutOfMemory]"),
                 RD_NAME("profiler::_record_function_enter"),
                 RD_NAME("profiler::_record_function_enter_new"),
                 RD_NAME("profiler::_record_function_exit"), RD_NAME("aten::is_leaf"),
                 RD_NAME("aten::output_nr"), RD_NAME("aten::_version")};
#undef RD_NAME
    for (size_t i = 0; i < MP_ARRAY_LEN(names); i++)
        if (n == names[i].n && memcmp(s, names[i].s, n) == 0) return true;
    return false;
}

static int32_t id32(int64_t v) { return v >= 0 && v <= INT32_MAX ? (int32_t)v : -1; }

/* keep()'s answer when intern or thread_index failed (r < 0). */
static int limit(int r, const char **why) {
    if (r != RD_LIMIT) return -1;
    *why = "more distinct names (2^23) or threads (2^16) than the reader keeps";
    return 1;
}

/* An arg string interned (unescaped when it has escapes); -1 when absent,
 * -2 out of memory. */
static int intern_arg(rd *r, const char *s, size_t n) {
    if (!s) return -1;
    if (memchr(s, '\\', n)) {
        n = unescape(s, n, r->scratch, sizeof r->scratch);
        s = r->scratch;
    }
    int i = intern(r->t, s, n);
    return i < 0 ? -2 : i;
}

/* The side record of a collective kept as span or device record idx. */
static int keep_comm(rd *r, const ev *v, size_t idx, bool on_dev) {
    mp_trace_raw *t = r->t;
    int coll = intern_arg(r, v->c_coll, v->c_coll_n), pg = intern_arg(r, v->c_pg, v->c_pg_n);
    int ranks = intern_arg(r, v->c_ranks, v->c_ranks_n);
    if (coll == -2 || pg == -2 || ranks == -2 || idx > UINT32_MAX) return -1;
    mp_tcomm *c;
    PUSH(t->comms, t->n_comms, t->cap_comms, c);
    c->idx = (uint32_t)idx;
    c->on_dev = on_dev;
    c->elem_bytes = v->c_bytes;
    c->seq = id32(v->c_seq);
    c->group_size = id32(v->c_group);
    c->coll = coll;
    c->pg = pg;
    c->pg_ranks = ranks;
    c->in_elems = v->c_in >= 0 ? v->c_in : v->c_dims;
    c->out_elems = v->c_out;
    /* a process group seen here for the first time joins the table */
    if (pg >= 0) {
        int i = 0;
        while (i < t->n_pgs && t->pgs[i].name != pg) i++;
        if (i == t->n_pgs) {
            mp_tpg *np = mp_grow(t->pgs, sizeof *t->pgs, &t->cap_pgs, t->n_pgs + 1);
            if (!np) return -1;
            t->pgs = np;
            t->pgs[t->n_pgs++] = (mp_tpg){pg, -1, c->group_size, ranks};
        } else if (t->pgs[i].ranks < 0) {
            t->pgs[i].ranks = ranks;
        }
    }
    return 0;
}

/* A string of the event, interned (unescaped first when it has escapes);
 * MP_TORT_NONE when absent, -1 out of memory. */
static int64_t intern_ev(rd *r, const char *s, size_t n, bool esc) {
    if (!s) return MP_TORT_NONE;
    char buf[1024];
    if (esc) {
        n = unescape(s, n, buf, sizeof buf);
        s = buf;
    }
    int i = intern(r->t, s, n);
    return i < 0 ? -1 : i;
}

/* An ONNX Runtime event: complete ("X") events with a name and times. */
static int keep_ort(rd *r, ev *v, const char **why) {
    if (v->ph != 'X') return 0;
    if (!v->name) return *why = "no \"name\"", 1;
    if (!v->has_ts || !v->has_dur) return *why = "no \"ts\" or \"dur\"", 1;
    if (v->ts < 0 || v->ts > RD_MAX_TS || v->dur < 0 || v->dur > RD_MAX_DUR)
        return *why = "absurd \"ts\" or \"dur\"", 1;
    int64_t nm = intern_ev(r, v->name, v->name_len, v->name_esc);
    int64_t op = intern_ev(r, v->ort_op, v->ort_op_len, v->ort_op_esc);
    int64_t pr = intern_ev(r, v->ort_prov, v->ort_prov_len, v->ort_prov_esc);
    /* the shapes only where they can be read back whole (they have no escapes) */
    int64_t in = intern_ev(r, v->ort_in_len < 4096 ? v->ort_in : NULL, v->ort_in_len, false);
    int64_t out = intern_ev(r, v->ort_out_len < 4096 ? v->ort_out : NULL, v->ort_out_len, false);
    if (nm < 0 || op < 0 || pr < 0 || in < 0 || out < 0) return -1;
    mp_tort *o;
    PUSH(r->t->orts, r->t->n_orts, r->t->cap_orts, o);
    o->ts = v->ts;
    o->end = v->ts + v->dur;
    o->name = (uint32_t)nm;
    o->op = (uint32_t)op;
    o->provider = (uint32_t)pr;
    o->in_shapes = (uint32_t)in;
    o->out_shapes = (uint32_t)out;
    o->threads = (int16_t)v->ort_threads;
    o->session = v->cat == C_ORT_SESSION;
    return 0;
}

/* Keep what the analysis needs of one event. Returns 0, -1 (out of
 * memory) or 1 (a field is missing or absurd: *why says which). */
static int keep(rd *r, ev *v, const char **why) {
    mp_trace_raw *t = r->t;
    bool span = false, dev = false;
    uint8_t kind = 0;
    if (r->legacy && v->cat == C_OTHER && v->ph == 'X') {
        int lk = mp_trace_legacy_kind(v->name, v->name_len);
        v->cat = lk == MP_TS_OP ? C_CPU_OP : C_ANNOT;   /* record_function ranges, all of them */
    }
    switch (v->cat) {
    case C_CPU_OP: span = true; kind = MP_TS_OP; break;
    case C_ANNOT:
        span = true;
        /* FlopsProfiler's module ranges are record_function ranges */
        kind = mp_trace_module_range(v->name, v->name_len, NULL) ? MP_TS_MODULE : MP_TS_ANNOT;
        break;
    case C_RUNTIME:
    case C_DRIVER: span = true; kind = MP_TS_RUNTIME; break;
    case C_PYTHON:
        span = mp_trace_module_range(v->name, v->name_len, NULL) != 0;
        kind = MP_TS_MODULE;
        break;
    case C_KERNEL: dev = true; kind = MP_TD_KERNEL; break;
    case C_MEMCPY: dev = true; kind = MP_TD_MEMCPY; break;
    case C_MEMSET: dev = true; kind = MP_TD_MEMSET; break;
    case C_GPU_ANNOT: dev = true; kind = MP_TD_ANNOT; break;
    default: break;
    }
    if (v->cat == C_ORT_NODE || v->cat == C_ORT_SESSION) return keep_ort(r, v, why);
    bool mem = v->ph == 'i' && v->name && KEY_IS(v->name, v->name_len, "[memory]");
    bool flow = v->cat == C_FWDBWD && (v->ph == 's' || v->ph == 'f');
    if ((span || dev) && v->ph != 'X') return 0;
    if (!span && !dev && !mem && !flow) return 0;
    if (!v->name && (span || dev)) return *why = "no \"name\"", 1;
    if (!v->has_ts) return *why = "no \"ts\"", 1;
    if (v->ts < 0 || v->ts > RD_MAX_TS) return *why = "absurd \"ts\"", 1;
    if ((span || dev) && !v->has_dur) return *why = "no \"dur\"", 1;
    if (v->has_dur && (v->dur < 0 || v->dur > RD_MAX_DUR)) return *why = "absurd \"dur\"", 1;
    if (!v->has_tid || !v->has_pid) return *why = "no numeric \"pid\" and \"tid\"", 1;
    if (v->pid < INT32_MIN || v->pid > INT64_C(0xffffffff) || v->tid < INT32_MIN ||
        v->tid > INT64_C(0xffffffff))
        return *why = "absurd \"pid\" or \"tid\"", 1;

    const char *name = v->name;
    size_t nlen = v->name_len;
    /* PyTorch without Kineto writes names as they are, never escaped: a
     * backslash in a bare array's name is the name's ("C:\new") */
    if (name && v->name_esc && !r->legacy) {
        nlen = unescape(name, nlen, r->scratch, sizeof r->scratch);
        name = r->scratch;
    }
    if (span) {
        size_t pre = 0;
        int range = kind == MP_TS_MODULE ? mp_trace_module_range(name, nlen, &pre) : 0;
        /* a record_function range keeps its whole name (key_averages' row)
         * and has the module tree's interned beside it; Kineto's python
         * scopes are no row: they keep the tree's */
        bool rf = kind == MP_TS_MODULE && v->cat == C_ANNOT;
        if (rf) {
            int mi = intern(t, name + pre, nlen - pre);
            if (mi < 0) return limit(mi, why);
        } else if (kind == MP_TS_MODULE) {
            name += pre;
            nlen -= pre;
        } else if (filtered(name, nlen)) {
            return 0;
        }
        int ni = intern(t, name, nlen);
        int ti = thread_index(t, v->pid, v->tid);
        if (ni < 0 || ti < 0) return limit(ni < 0 ? ni : ti, why);
        if (t->n_spans >= UINT32_MAX) return *why = "more than 2^32 spans", 1;
        if (v->has_aflops && v->aflops < 0) return *why = "negative \"flops\"", 1;
        uint64_t fl = v->has_aflops ? (uint64_t)v->aflops : v->frule ? mp_trace_flops(v->frule, &v->sh) : 0;
        if (kind == MP_TS_OP && v->aflops_null) t->n_flops_null++;
        if (fl) {
            mp_tflop *f;
            PUSH(t->flops, t->n_flops, t->cap_flops, f);
            f->span = (uint32_t)t->n_spans;
            f->flops = fl;
        }
        mp_tspan *s;
        PUSH(t->spans, t->n_spans, t->cap_spans, s);
        memset(s, 0, sizeof *s);
        s->ts = v->ts;
        s->end = v->ts + v->dur;
        s->ext = id32(v->ext);
        if (kind == MP_TS_RUNTIME) s->corr = id32(v->corr);
        else s->seq = id32(v->seq);
        s->name = (uint32_t)ni;
        s->tid = (uint16_t)ti;
        s->kind = kind;
        s->dtype = v->dtype < MP_TDT_COUNT ? v->dtype : MP_TDT_NONE;
        s->bwd = range == 2;
        s->rf = rf;
        s->has_flops = fl != 0;
        if (kind == MP_TS_OP && v->has_dims) t->n_shaped++;
        return v->comm ? keep_comm(r, v, t->n_spans - 1, false) : 0;
    }
    if (dev) {
        int ni = intern(t, name, nlen);
        if (ni < 0) return limit(ni, why);
        mp_tdev *d;
        PUSH(t->devs, t->n_devs, t->cap_devs, d);
        memset(d, 0, sizeof *d);
        d->ts = v->ts;
        d->end = v->ts + v->dur;
        d->ext = id32(v->ext);
        d->corr = id32(v->corr);
        d->name = (uint32_t)ni;
        int64_t stream = v->stream >= 0 ? v->stream : v->tid, device = v->device >= 0 ? v->device : v->pid;
        d->stream = (int16_t)(stream >= 0 && stream <= INT16_MAX ? stream : -1);
        d->device = (int16_t)(device >= 0 && device <= INT16_MAX ? device : -1);
        d->kind = kind;
        return v->comm ? keep_comm(r, v, t->n_devs - 1, true) : 0;
    }
    if (mem) {
        if (!v->has_alloc || !v->has_reserved) return *why = "[memory] without totals", 1;
        const int64_t lim = MP_MEM_MAX - 1;
        if (v->alloc < 0 || v->alloc > lim || v->reserved < -lim || v->reserved > lim ||
            v->bytes < -lim || v->bytes > lim)
            return *why = "absurd [memory] figures", 1;
        if (v->dev_type != 1) return 0;   /* host memory: nothing reads it */
        int ti = thread_index(t, v->pid, v->tid);
        if (ti < 0) return limit(ti, why);
        mp_tmem *m;
        PUSH(t->mems, t->n_mems, t->cap_mems, m);
        m->ts = v->ts;
        m->bytes = v->bytes;
        m->allocated = (uint64_t)v->alloc;
        m->tid = (uint64_t)ti;
        t->mem_reserved_peak = MP_MAX(t->mem_reserved_peak, v->reserved);
        /* Total Reserved where it changed (a piece keeps its first value
         * too: the merged array repeats a value at most once a piece) */
        int64_t dv = v->device;
        if (dv < 0 || dv > 3 || t->resv_last[dv] != v->reserved) {
            mp_tresv *rv;
            PUSH(t->resvs, t->n_resvs, t->cap_resvs, rv);
            rv->ts = v->ts;
            rv->reserved = v->reserved;
            rv->device = dv >= 0 && dv <= INT32_MAX ? (int32_t)dv : -1;
            rv->pad_ = 0;
            if (dv >= 0 && dv <= 3) t->resv_last[dv] = v->reserved;
        }
        return 0;
    }
    if (!v->has_id) return *why = "flow without \"id\"", 1;
    int ti = thread_index(t, v->pid, v->tid);
    if (ti < 0) return limit(ti, why);
    mp_tflow *fl;
    PUSH(t->flows, t->n_flows, t->cap_flows, fl);
    fl->id = v->id;
    fl->ts = v->ts;
    fl->tid = ti;
    fl->start = v->ph == 's';
    return 0;
}

/* ---- the top level ---- */

/* deviceProperties: the first device's name, memory and SM count. */
static int devprop_member(rd *r, const char *k, size_t kn, const char **pp, const char *e, void *ud) {
    (void)ud;
    mp_trace_raw *t = r->t;
    char c = **pp;
    if (KEY_IS(k, kn, "name") && c == '"') {
        const char *s;
        size_t n;
        bool esc;
        TRY(str(r, pp, e, &s, &n, &esc));
        size_t m = unescape(s, n, t->device_name, sizeof t->device_name - 1);
        t->device_name[m] = 0;
        return RS_OK;
    }
    if (KEY_IS(k, kn, "totalGlobalMem") && c >= '0' && c <= '9') return num(r, pp, e, 0, &t->device_mem);
    if (KEY_IS(k, kn, "numSms") && c >= '0' && c <= '9') return num(r, pp, e, 0, &t->device_sms);
    return skip(r, pp, e);
}

static int devprop_elem(rd *r, int i, const char **pp, const char *e, void *ud) {
    return i == 0 && **pp == '{' ? members(r, pp, e, devprop_member, ud) : skip(r, pp, e);
}

static int parse_devprops(rd *r, const char **pp, const char *e) {
    return elements(r, pp, e, devprop_elem, NULL);
}


/* The end of the JSON: a trace must have had events. */
static mp_status rd_finish(rd *r, bool seen_events) {
    if (!seen_events)
        return mp_error(MP_ERR_FORMAT, "%s: not a Kineto trace: no \"traceEvents\" array", r->label);
    if (r->t->n_events == 0)
        return mp_error(MP_ERR_FORMAT,
                        "%s: an empty trace: it holds no events (torch.profiler writes one when "
                        "nothing ran inside the profiler's window, or when its CPU build records "
                        "nothing)",
                        r->label);
    return MP_OK;
}

typedef struct pg_in {
    const char *name, *desc, *ranks;
    size_t name_n, desc_n, ranks_n;
    int64_t size;
} pg_in;

static int pg_member(rd *r, const char *k, size_t kn, const char **pp, const char *e, void *ud) {
    pg_in *g = ud;
    bool esc;
    if (KEY_IS(k, kn, "pg_name") && **pp == '"') return str(r, pp, e, &g->name, &g->name_n, &esc);
    if (KEY_IS(k, kn, "pg_desc") && **pp == '"') return str(r, pp, e, &g->desc, &g->desc_n, &esc);
    if (KEY_IS(k, kn, "pg_size") && **pp >= '0' && **pp <= '9') return num(r, pp, e, 0, &g->size);
    if (KEY_IS(k, kn, "ranks") && **pp == '[') {   /* kept as its JSON text */
        const char *at = *pp;
        TRY(skip(r, pp, e));
        g->ranks = at;
        g->ranks_n = (size_t)(*pp - at);
        return RS_OK;
    }
    return skip(r, pp, e);
}

/* One element of distributedInfo.pg_config: {pg_name, pg_desc, pg_size, ranks}. */
static int pg_elem(rd *r, int i, const char **pp, const char *e, void *ud) {
    (void)i;
    (void)ud;
    if (**pp != '{') return skip(r, pp, e);
    pg_in g = {NULL, NULL, NULL, 0, 0, 0, -1};
    TRY(members(r, pp, e, pg_member, &g));
    int ni = intern_arg(r, g.name, g.name_n), di = intern_arg(r, g.desc, g.desc_n);
    int ri = intern_arg(r, g.ranks, g.ranks_n);
    if (ni == -2 || di == -2 || ri == -2) return rd_bad(r, *pp, "out of memory");
    mp_trace_raw *t = r->t;
    int k = 0;
    while (ni >= 0 && k < t->n_pgs && t->pgs[k].name != ni) k++;
    if (ni >= 0 && k == t->n_pgs) {
        mp_tpg *np = mp_grow(t->pgs, sizeof *t->pgs, &t->cap_pgs, t->n_pgs + 1);
        if (!np) return rd_bad(r, *pp, "out of memory");
        t->pgs = np;
        t->pgs[t->n_pgs++] = (mp_tpg){ni, di, id32(g.size), ri};
    }
    return RS_OK;
}

static int dist_member(rd *r, const char *k, size_t kn, const char **pp, const char *e, void *ud) {
    (void)ud;
    int64_t v;
    if (KEY_IS(k, kn, "rank") && **pp >= '0' && **pp <= '9') {
        TRY(num(r, pp, e, 0, &v));
        if (v >= 0 && v < INT32_MAX) r->t->rank = (int)v;
    } else if (KEY_IS(k, kn, "world_size") && **pp >= '0' && **pp <= '9') {
        TRY(num(r, pp, e, 0, &v));
        if (v > 0 && v < INT32_MAX) r->t->world_size = (int)v;
    } else if (KEY_IS(k, kn, "backend") && **pp == '"') {
        const char *s;
        size_t n;
        bool esc;
        TRY(str(r, pp, e, &s, &n, &esc));
        size_t m = unescape(s, n, r->t->backend, sizeof r->t->backend - 1);
        r->t->backend[m] = 0;
    } else if (KEY_IS(k, kn, "pg_config") && **pp == '[') {
        TRY(elements(r, pp, e, pg_elem, NULL));
    } else {
        TRY(skip(r, pp, e));
    }
    return RS_OK;
}

static int parse_distinfo(rd *r, const char **pp, const char *e) {
    return members(r, pp, e, dist_member, NULL);
}

/* ---- a large mapped file's events, in pieces at once ----
 * The traceEvents array of a plain file of at least 2 x piece_min bytes is
 * cut into pieces (up to RD_PIECES_MAX), parsed by one thread a core (or
 * as asked), each thread taking the next piece when done, each piece into
 * a trace of its own; the kept pieces are placed after the first in file
 * order (names, threads and process groups interned again in the order
 * they first appear) and their records copied there at once, so the
 * result is the same, byte for byte, as one pass
 * (tests/test_trace.c checks it). A cut is made before a '{' that follows
 * "}," (an event's end and the separator); such bytes may stand inside a
 * string or a nested array, so a piece is kept only when the piece before
 * it stopped exactly at its first byte; otherwise the pieces from there on
 * are dropped and the one pass goes on from where the last kept piece
 * stopped (as it does at a piece's bad event, whose message the one pass
 * gives). Figures: docs/DESIGN.md. */
#define RD_PIECES_MAX 16
/* Threads unless asked for more: each holds the part of the file it reads
 * mapped, a whole page-cache folio (2 MB where the kernel caches files in
 * huge folios): 16 threads held 18 MB of the 523 MB MobileNet trace at
 * once, 2 threads 6 MB (docs/DESIGN.md). */
#define RD_THREADS_DEFAULT 4
#define RD_PIECE_MIN ((size_t)8 << 20)
#define RD_CUT_SCAN ((size_t)1 << 20)   /* how far a cut is looked for */

enum { PC_TARGET, PC_CLOSED, PC_STOPPED, PC_NOMEM };

/* mp_trace_raw's record arrays: X(arr) for each (arr, n_arr, cap_arr). */
#define RD_RECORDS(X) X(spans) X(devs) X(mems) X(flows) X(flops) X(orts) X(comms) X(resvs)

/* Where a kept piece's records go in t, and its names and threads as t
 * numbers them (raw_place fills it, raw_copy moves the records). */
typedef struct rd_place {
    int *nm, *th;
#define RD_AT(arr) size_t at_##arr;   /* the piece's first record in t->arr */
    RD_RECORDS(RD_AT)
#undef RD_AT
} rd_place;

typedef struct rd_piece {
    rd r;
    mp_trace_raw t;
    size_t start, target, end;
    int how;
    rd_place pl;   /* kept: where its records go */
} rd_piece;

static void raw_init(mp_trace_raw *t) {
    memset(t, 0, sizeof *t);
    mp_arena_init(&t->arena);
    t->device_mem = -1;
    t->device_sms = -1;
    t->rank = -1;
    t->world_size = -1;
    t->mem_reserved_peak = -1;
    for (int d = 0; d < 4; d++) t->resv_last[d] = -1;
    t->pieces = 1;
}

/* Events from `start` (an event's '{') until the next event would start at
 * or past `target` (PC_TARGET), the array closes (PC_CLOSED), or an event
 * is bad, truncated or cannot be kept (PC_STOPPED, *end at its start: the
 * one pass says why). */
static int piece_parse(rd *r, size_t start, size_t target, size_t *end) {
    const char *buf = r->buf, *e = r->buf + r->len, *p = buf + start;
    int how;
    ev v;
    for (;;) {
        if (ws(&p, e)) {
            how = PC_STOPPED;
            break;
        }
        if ((size_t)(p - buf) >= target) {
            how = PC_TARGET;
            break;
        }
        const char *at = p;
        bool more;
        if (*p != '{' || parse_event(r, &p, e, &v) || sep(r, &p, e, ']', &more)) {
            p = at;
            how = PC_STOPPED;
            break;
        }
        const char *why = NULL;
        int k = keep(r, &v, &why);
        if (k != 0) {
            p = at;
            how = k < 0 ? PC_NOMEM : PC_STOPPED;
            break;
        }
        r->t->n_events++;
        if (!more) {
            how = PC_CLOSED;
            break;
        }
        r->pos = (size_t)(p - buf);
        if (r->pos - r->released >= 2 * r->rel_step) rd_release(r);
    }
    *end = (size_t)(p - buf);
    /* the piece is done: its pages go back whole (another piece or the one
     * pass that reads a page again maps it again) */
    rd_release_to(r, *end & ~(size_t)4095);
    return how;
}

/* The pieces after the first, taken in file order by whichever thread is
 * free (the pieces outnumber the threads: one that runs slow, on a busy
 * core, holds up the others by a small piece at most). */
typedef struct rd_queue {
    rd_piece *pc;
    int n;
    atomic_int next;
    mp_trace_raw *t;   /* copy_worker: where the pieces go */
} rd_queue;

static void *piece_worker(void *arg) {
    rd_queue *q = arg;
    for (int i; (i = atomic_fetch_add(&q->next, 1)) < q->n;) {
        rd_piece *pc = &q->pc[i];
        pc->how = piece_parse(&pc->r, pc->start, pc->target, &pc->end);
    }
    return NULL;
}

/* The first '{' at or after `from` that follows "}," (white space allowed
 * between), within RD_CUT_SCAN bytes; 0 when none. */
static size_t find_cut(const char *buf, size_t len, size_t from) {
    size_t lim = len - from > RD_CUT_SCAN ? from + RD_CUT_SCAN : len;
    const char *p = buf + from, *e = buf + lim;
    while ((p = memchr(p, '{', (size_t)(e - p))) != NULL) {
        const char *q = p - 1;
        while (q > buf && is_ws(*q)) q--;
        if (q > buf && *q == ',') {
            q--;
            while (q > buf && is_ws(*q)) q--;
            if (*q == '}') return (size_t)(p - buf);
        }
        p++;
    }
    return 0;
}

/* arr with room for exactly `want` records (grown, not doubled, unlike
 * grow_arr); NULL when out of memory. An array with room is returned as
 * it is. */
static void *room_exact(void *arr, size_t elem, size_t have, size_t *cap, size_t want) {
    if (want <= *cap) return arr;
    if (want > SIZE_MAX / elem) return NULL;
    void *np = rec_resize(arr, have * elem, want * elem);
    if (np) *cap = want;
    return np;
}

/* The pages of a record array wholly before record `upto` are given back
 * (it is read no further, and freed after): a piece's records are not held
 * twice while they are appended. The first page is kept (the allocator's
 * header may share it). */
static void release_copied(const void *arr, size_t upto, size_t elem) {
    const size_t pg = 4096;
    uintptr_t a = ((uintptr_t)arr + pg - 1) & ~(uintptr_t)(pg - 1);
    uintptr_t b = ((uintptr_t)arr + upto * elem) & ~(uintptr_t)(pg - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

/* Piece w placed after what t holds: names, threads and process groups
 * interned again in w's order, t's counts moved past its records (raw_copy
 * fills them in, once rd_pieces has made the room). In file order, one
 * piece after another.
 * -1 out of memory, 1 past a limit (the one pass then says which), 0 done. */
static int raw_place(mp_trace_raw *t, mp_trace_raw *w, rd_place *pl) {
    if (t->n_spans + w->n_spans >= UINT32_MAX || t->n_devs + w->n_devs >= UINT32_MAX) return 1;
    int rc = -1;
    uint32_t *len = malloc(sizeof *len * (size_t)(w->n_names + 1));
    uint32_t *hash = malloc(sizeof *hash * (size_t)(w->n_names + 1));
    int *nm = malloc(sizeof *nm * (size_t)(w->n_names + 1));
    int *th = malloc(sizeof *th * (size_t)(w->n_threads + 1));
    if (!len || !hash || !nm || !th) goto done;
    for (int i = 0; i < w->names_map.cap; i++) {
        const mp_strmap_slot *sl = &w->names_map.slots[i];
        if (sl->hash && sl->val >= 0 && sl->val < w->n_names) {
            len[sl->val] = sl->len;
            hash[sl->val] = sl->hash;
        }
    }
    for (int i = 0; i < w->n_names; i++) {
        nm[i] = intern_h(t, w->names[i], len[i], hash[i]);
        if (nm[i] < 0) {
            rc = nm[i] == RD_LIMIT ? 1 : -1;
            goto done;
        }
    }
    for (int i = 0; i < w->n_threads; i++) {
        int64_t key = w->threads[i];
        th[i] = thread_index(t, (int64_t)((uint64_t)key >> 32), (int64_t)(uint32_t)key);
        if (th[i] < 0) {
            rc = th[i] == RD_LIMIT ? 1 : -1;
            goto done;
        }
    }
    /* process groups as keep_comm meets them: the first time joins, a later
     * time gives the ranks when they were not known */
    for (int i = 0; i < w->n_pgs; i++) {
        mp_tpg g = w->pgs[i];
        g.name = nm[g.name];
        if (g.ranks >= 0) g.ranks = nm[g.ranks];
        int k = 0;
        while (k < t->n_pgs && t->pgs[k].name != g.name) k++;
        if (k == t->n_pgs) {
            mp_tpg *np = mp_grow(t->pgs, sizeof *t->pgs, &t->cap_pgs, t->n_pgs + 1);
            if (!np) goto done;
            t->pgs = np;
            t->pgs[t->n_pgs++] = g;
        } else if (t->pgs[k].ranks < 0) {
            t->pgs[k].ranks = g.ranks;
        }
    }
    /* the piece's records go after t's (rd_pieces makes the room for all) */
#define RD_AFTER(arr)          \
    pl->at_##arr = t->n_##arr; \
    t->n_##arr += w->n_##arr;
    RD_RECORDS(RD_AFTER)
#undef RD_AFTER
    t->n_events += w->n_events;
    t->n_shaped += w->n_shaped;
    t->n_flops_null += w->n_flops_null;
    t->mem_reserved_peak = MP_MAX(t->mem_reserved_peak, w->mem_reserved_peak);
    pl->nm = nm;
    pl->th = th;
    nm = th = NULL;
    rc = 0;
done:
    free(len);
    free(hash);
    free(nm);
    free(th);
    return rc;
}

/* Piece w's records into the room raw_place made in t, each fixed to t's
 * numbering; w's arrays are given back as they are copied, then freed
 * (the two are not held whole at once). Pieces are copied at once, each
 * into its own part of t. */
static void raw_copy(mp_trace_raw *t, mp_trace_raw *w, const rd_place *pl) {
    const int *nm = pl->nm, *th = pl->th;
    uint32_t s0 = (uint32_t)pl->at_spans, d0 = (uint32_t)pl->at_devs;
#define RD_COPY(arr, FIX)                                                            \
    do {                                                                             \
        for (size_t i = 0; i < w->n_##arr; i++) {                                    \
            __typeof__(*w->arr) x = w->arr[i];                                       \
            FIX;                                                                     \
            t->arr[pl->at_##arr + i] = x;                                            \
            if ((i & 0x3fff) == 0x3fff) release_copied(w->arr, i + 1, sizeof x);     \
        }                                                                            \
        mp__trace_rec_free(w->arr);                                                  \
        w->arr = NULL;                                                               \
        w->n_##arr = w->cap_##arr = 0;                                               \
    } while (0)
    RD_COPY(spans, (x.name = (uint32_t)nm[x.name], x.tid = (uint16_t)th[x.tid]));
    RD_COPY(devs, x.name = (uint32_t)nm[x.name]);
    RD_COPY(mems, x.tid = (uint64_t)th[x.tid]);
    RD_COPY(resvs, (void)0);
    RD_COPY(flows, x.tid = (uint32_t)th[x.tid]);
    RD_COPY(flops, x.span += s0);
    RD_COPY(orts, (x.name = (uint32_t)nm[x.name],
                   x.op = x.op != MP_TORT_NONE ? (uint32_t)nm[x.op] : x.op,
                   x.provider = x.provider != MP_TORT_NONE ? (uint32_t)nm[x.provider] : x.provider,
                   x.in_shapes = x.in_shapes != MP_TORT_NONE ? (uint32_t)nm[x.in_shapes] : x.in_shapes,
                   x.out_shapes = x.out_shapes != MP_TORT_NONE ? (uint32_t)nm[x.out_shapes] : x.out_shapes));
    RD_COPY(comms, (x.idx += x.on_dev ? d0 : s0, x.coll = x.coll >= 0 ? nm[x.coll] : x.coll,
                    x.pg = x.pg >= 0 ? nm[x.pg] : x.pg,
                    x.pg_ranks = x.pg_ranks >= 0 ? nm[x.pg_ranks] : x.pg_ranks));
#undef RD_COPY
}

/* The kept pieces' records copied into t, a piece at a time by whichever
 * thread is free. */
static void *copy_worker(void *arg) {
    rd_queue *q = arg;
    for (int i; (i = atomic_fetch_add(&q->next, 1)) < q->n;) raw_copy(q->t, &q->pc[i].t, &q->pc[i].pl);
    return NULL;
}

/* The events from `first` (the first event's '{') in pieces at once, as far
 * as they agree with one pass: *at is where the one pass goes on, *closed
 * whether the array's ']' was passed. */
static mp_status rd_pieces(rd *r, int threads, size_t first, size_t *at, bool *closed) {
    size_t starts[RD_PIECES_MAX + 1];
    int n = 1;
    starts[0] = first;
    size_t rest = r->len - first;
    size_t fit = r->piece_min ? rest / r->piece_min : RD_PIECES_MAX;
    int want = fit < RD_PIECES_MAX ? (int)fit : RD_PIECES_MAX;
    if (threads > RD_PIECES_MAX) threads = RD_PIECES_MAX;
    for (int i = 1; i < want; i++) {
        size_t c = find_cut(r->buf, r->len, first + rest / (size_t)want * (size_t)i);
        if (c > starts[n - 1]) starts[n++] = c;
    }
    *at = first;
    *closed = false;
    if (n < 2) return MP_OK;
    rd_piece *pc = calloc((size_t)n, sizeof *pc);
    pthread_t tid[RD_PIECES_MAX];
    bool run[RD_PIECES_MAX] = {false};
    if (!pc) return mp_error(MP_ERR_NOMEM, "%s: out of memory", r->label);
    for (int i = 1; i < n; i++) {
        rd *q = &pc[i].r;
        q->buf = r->buf;
        q->len = q->cap = r->len;
        q->eof = q->mapped = true;
        q->legacy = r->legacy;
        q->label = r->label;
        q->src.fd = -1;
        q->rel_step = RD_PIECE_RELEASE;
        q->released = starts[i] & ~(RD_PIECE_RELEASE - 1);
        raw_init(&pc[i].t);
        q->t = &pc[i].t;
        pc[i].start = starts[i];
        pc[i].target = i + 1 < n ? starts[i + 1] : r->len;
    }
    /* this thread parses the first piece (into r), then takes from the
     * queue like the others; a thread that cannot start leaves its
     * pieces to them */
    rd_queue q = {.pc = pc, .n = n};
    atomic_init(&q.next, 1);
    int nt = MP_MIN(threads, n);
    for (int k = 1; k < nt; k++) run[k] = pthread_create(&tid[k], NULL, piece_worker, &q) == 0;
    size_t end;
    r->rel_step = RD_PIECE_RELEASE;
    int how = piece_parse(r, first, starts[1], &end);
    r->rel_step = 0;
    piece_worker(&q);
    for (int k = 1; k < nt; k++)
        if (run[k]) pthread_join(tid[k], NULL);
    mp_status st = MP_OK;
    /* the kept pieces placed in file order, room made for all their
     * records at once (t's arrays are not grown piece by piece), then the
     * records copied at once */
    mp_trace_raw *t = r->t;
#define RD_HAVE(arr) size_t have_##arr = t->n_##arr;
    RD_RECORDS(RD_HAVE)
#undef RD_HAVE
    int kept = 1;
    for (int i = 1; i < n && st == MP_OK; i++) {
        if (how == PC_NOMEM || pc[i].how == PC_NOMEM) {
            st = mp_error(MP_ERR_NOMEM, "%s: out of memory", r->label);
            break;
        }
        if (how != PC_TARGET || end != starts[i]) break;
        int a = raw_place(r->t, &pc[i].t, &pc[i].pl);
        if (a < 0) st = mp_error(MP_ERR_NOMEM, "%s: out of memory", r->label);
        if (a != 0) break;
        end = pc[i].end;
        how = pc[i].how;
        r->t->pieces++;
        kept = i + 1;
    }
#define RD_ROOM(arr)                                                                         \
    if (st == MP_OK && t->n_##arr > t->cap_##arr) {                                          \
        void *np_ = room_exact(t->arr, sizeof *t->arr, have_##arr, &t->cap_##arr, t->n_##arr); \
        if (np_) t->arr = np_;                                                               \
        else st = mp_error(MP_ERR_NOMEM, "%s: out of memory", r->label);                     \
    }
    RD_RECORDS(RD_ROOM)
#undef RD_ROOM
    if (st != MP_OK) kept = 1;   /* nothing copied; t is freed with the error */
    rd_queue cq = {.pc = pc, .n = kept, .t = r->t};
    atomic_init(&cq.next, 1);
    int ct = MP_MIN(threads, kept - 1);
    for (int k = 1; k < ct; k++) run[k] = pthread_create(&tid[k], NULL, copy_worker, &cq) == 0;
    copy_worker(&cq);
    for (int k = 1; k < ct; k++)
        if (run[k]) pthread_join(tid[k], NULL);
    if (st == MP_OK && how == PC_NOMEM) st = mp_error(MP_ERR_NOMEM, "%s: out of memory", r->label);
    for (int i = 1; i < n; i++) {
        free(pc[i].pl.nm);
        free(pc[i].pl.th);
        mp_trace_raw_free(&pc[i].t);
    }
    free(pc);
    mp__trace_trim();   /* the threads' heaps keep what they freed */
    *at = end;
    *closed = how == PC_CLOSED;
    return st;
}

enum { S_BEGIN, S_MEMBER, S_AFTER_MEMBER, S_EVENTS_FIRST, S_EVENT, S_AFTER_EVENT, S_END };

static mp_status rd_run(rd *r) {
    int state = S_BEGIN;
    bool seen_events = false;
    ev v;
    v.name = NULL;   /* a message before the first event names none */
    for (;;) {
        const char *p = r->buf + r->pos, *e = r->buf + r->len;
        const char *unit = p;
        int st = RS_OK;
        bool more;
        switch (state) {
        case S_BEGIN:
            /* a UTF-8 byte-order mark (some editors and tools write one)
             * is skipped, as JSON parsers may (RFC 8259 section 8.1) */
            if (r->base == 0 && p == r->buf && (uint8_t)*p == 0xef) {
                if (e - p < 3 && !r->eof) {
                    st = RS_MORE;
                    break;
                }
                if (e - p >= 3 && (uint8_t)p[1] == 0xbb && (uint8_t)p[2] == 0xbf) p += 3;
            }
            if ((st = ws(&p, e))) break;
            if (*p == '[') {   /* PyTorch without Kineto: the events alone */
                p++;
                r->legacy = true;
                seen_events = true;
                state = S_EVENTS_FIRST;
                break;
            }
            if (*p != '{' && r->base == 0 && p == r->buf && (uint8_t)*p == 0x08)
                /* a ModelProto starts with ir_version, field 1 as a varint */
                return mp_error(MP_ERR_FORMAT,
                                "%s: an ONNX model (or another protobuf), not a torch.profiler "
                                "trace: profile a model with `modelprof %s`",
                                r->label, r->label);
            if (*p != '{') {
                bool json = strchr("[\"-0123456789tfn", *p) != NULL;
                return mp_error(MP_ERR_FORMAT,
                                json ? "%s: byte %llu: not a torch.profiler trace: the top level "
                                       "is neither a JSON object (Kineto) nor an array of "
                                       "events (PyTorch without Kineto)"
                                     : "%s: byte %llu: not JSON (a Kineto trace is a JSON "
                                       "object, plain or gzipped)",
                                r->label, (unsigned long long)(r->base + (size_t)(p - r->buf)));
            }
            p++;
            if ((st = ws(&p, e))) break;
            if (*p == '}') {
                p++;
                state = S_END;
            } else {
                state = S_MEMBER;
            }
            break;
        case S_MEMBER: {
            const char *k;
            size_t kn;
            bool esc;
            if ((st = str(r, &p, e, &k, &kn, &esc))) break;
            if ((st = expect(r, &p, e, ':'))) break;
            if (KEY_IS(k, kn, "traceEvents")) {
                if ((st = expect(r, &p, e, '['))) break;
                seen_events = true;
                state = S_EVENTS_FIRST;
            } else if (KEY_IS(k, kn, "deviceProperties")) {
                if ((st = parse_devprops(r, &p, e))) break;
                state = S_AFTER_MEMBER;
            } else if (KEY_IS(k, kn, "baseTimeNanoseconds")) {
                if ((st = ws(&p, e))) break;
                st = *p >= '0' && *p <= '9' ? num(r, &p, e, 0, &r->t->base_ns) : skip(r, &p, e);
                if (st) break;
                state = S_AFTER_MEMBER;
            } else if (KEY_IS(k, kn, "distributedInfo")) {
                if ((st = ws(&p, e))) break;
                st = *p == '{' ? parse_distinfo(r, &p, e) : skip(r, &p, e);
                if (st) break;
                state = S_AFTER_MEMBER;
            } else {
                if ((st = skip(r, &p, e))) break;
                state = S_AFTER_MEMBER;
            }
            break;
        }
        case S_AFTER_MEMBER:
            if ((st = sep(r, &p, e, '}', &more))) break;
            state = more ? S_MEMBER : S_END;
            break;
        case S_EVENTS_FIRST:
            if ((st = ws(&p, e))) break;
            if (*p == ']') {
                p++;
                state = r->legacy ? S_END : S_AFTER_MEMBER;
            } else {
                state = S_EVENT;
            }
            break;
        case S_EVENT: {
            if ((st = ws(&p, e))) break;
            if (r->threads > 1 && r->mapped) {   /* once, at the first event */
                size_t at;
                bool closed;
                int threads = r->threads;
                r->threads = 0;
                mp_status ms = rd_pieces(r, threads, (size_t)(p - r->buf), &at, &closed);
                if (ms != MP_OK) return ms;
                p = r->buf + at;
                if (closed) {
                    state = r->legacy ? S_END : S_AFTER_MEMBER;
                    break;
                }
                if ((st = ws(&p, e))) break;
            }
            v.name = NULL;   /* no event's name yet: not the last event's, nor garbage */
            if (*p != '{') {
                st = rd_bad(r, p, "an element of traceEvents is not an object");
                break;
            }
            const char *at = p;
            if ((st = parse_event(r, &p, e, &v))) break;
            if ((st = sep(r, &p, e, ']', &more))) break;
            r->t->n_events++;
            const char *why = NULL;
            int k = keep(r, &v, &why);
            if (k < 0) return mp_error(MP_ERR_NOMEM, "%s: out of memory", r->label);
            if (k > 0) {
                char nm[80];
                ev_name(&v, nm, sizeof nm);
                return mp_error(MP_ERR_FORMAT, "%s: byte %llu: event %llu ('%s'): %s", r->label,
                                (unsigned long long)(r->base + (size_t)(at - r->buf)),
                                (unsigned long long)r->t->n_events - 1, v.name ? nm : "?", why);
            }
            state = more ? S_EVENT : r->legacy ? S_END : S_AFTER_MEMBER;
            break;
        }
        case S_END:
            ws(&p, e);
            if (p < e)
                return mp_error(MP_ERR_FORMAT, "%s: byte %llu: data after the end of the JSON",
                                r->label, (unsigned long long)(r->base + (size_t)(p - r->buf)));
            if (r->eof) return rd_finish(r, seen_events);
            st = RS_MORE;
            break;
        default: break;
        }
        if (st == RS_OK) {
            r->pos = (size_t)(p - r->buf);
            if (r->mapped && r->pos - r->released >= 2 * RD_RELEASE) rd_release(r);
            continue;
        }
        if (st == RS_BAD) {
            if (r->base == 0 && r->err_at == r->buf && state == S_BEGIN)
                return mp_error(MP_ERR_FORMAT, "%s: not JSON", r->label);
            unsigned long long at = (unsigned long long)(r->base + (size_t)(r->err_at - r->buf));
            if (state != S_EVENT)
                return mp_error(MP_ERR_FORMAT, "%s: byte %llu: %s", r->label, at, r->err);
            /* inside an event: its index, and its name when read before */
            char nm[80];
            ev_name(&v, nm, sizeof nm);
            return mp_error(MP_ERR_FORMAT, "%s: byte %llu: event %llu%s%s%s: %s%s", r->label, at,
                            (unsigned long long)r->t->n_events, v.name ? " ('" : "", v.name ? nm : "",
                            v.name ? "')" : "", r->err,
                            r->legacy ? " (PyTorch without Kineto writes names as they are: a record_function "
                                        "name holding '\"' or '\\' makes its trace invalid JSON)"
                                      : "");
        }
        /* RS_MORE: the unit continues past the window */
        r->pos = (size_t)(unit - r->buf);
        if (r->eof) {
            if (state == S_END) return rd_finish(r, seen_events);
            return mp_error(MP_ERR_FORMAT,
                            "%s: byte %llu: the file ends inside %s (truncated?)", r->label,
                            (unsigned long long)r->t->bytes,
                            state == S_EVENT ? "an event" : state == S_BEGIN ? "nothing: it is empty" : "the JSON");
        }
        mp_status ms = rd_fill(r);
        if (ms != MP_OK) return ms;
    }
}

static mp_status rd_start(rd *r, mp_trace_raw *t, const char *label) {
    raw_init(t);
    r->t = t;
    r->label = label;
    if (r->mapped) {   /* the whole file is the window */
        t->bytes = r->len;
        return MP_OK;
    }
    r->cap = RD_WINDOW;
    r->buf = malloc(r->cap);
    if (!r->buf) return mp_error(MP_ERR_NOMEM, "%s: out of memory", label);
    /* gzip? look at the first two bytes of the raw source */
    size_t k;
    mp_status st = rd_src_open(&r->src, r->buf, &k, label);
    if (r->src.gz) t->gzipped = true;
    if (st) return st;
    if (r->src.gz) {
        if ((r->threads ? r->threads : mp__trace_cores()) > 1) r->pipe = rd_pipe_start(&r->src, label);
    } else {
        r->len = k;
        t->bytes = (uint64_t)k;
    }
    return MP_OK;
}

static void rd_end(rd *r) {
    rd_pipe_free(r->pipe);   /* first: its thread inflates from src */
    r->pipe = NULL;
    rd_src_close(&r->src);
    if (r->mapped) munmap(r->buf, r->len);
    else free(r->buf);
}

static mp_status rd_all(rd *r, mp_trace_raw *t, const char *label) {
    mp_status st = rd_start(r, t, label);
    if (st == MP_OK) st = rd_run(r);
    rd_end(r);
    if (st != MP_OK) mp_trace_raw_free(t);
    return st;
}


mp_status mp_trace_read_file(const char *path, mp_trace_raw *t) {
    return mp_trace_read_file_pieces(path, t, 0, 0);
}

mp_status mp_trace_read_file_pieces(const char *path, mp_trace_raw *t, int threads, size_t piece_min) {
    rd r;
    memset(&r, 0, sizeof r);
    r.threads = threads > 0 ? threads : MP_MIN(mp__trace_cores(), RD_THREADS_DEFAULT);
    r.piece_min = piece_min > 0 ? piece_min : RD_PIECE_MIN;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        memset(t, 0, sizeof *t);
        return mp_error(MP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat sb;
    bool have_st = fstat(fd, &sb) == 0;
    if (have_st && S_ISDIR(sb.st_mode)) {
        close(fd);
        memset(t, 0, sizeof *t);
        return mp_error(MP_ERR_IO, "%s: is a folder", path);
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    r.src.fd = fd;
    /* a large plain file is mapped and parsed in place (no copy into a
     * window); gzip goes through inflate into the window */
    unsigned char magic[2] = {0, 0};
    if (have_st && S_ISREG(sb.st_mode) && sb.st_size >= (off_t)RD_WINDOW && (uint64_t)sb.st_size < SIZE_MAX &&
        pread(fd, magic, 2, 0) == 2 && !(magic[0] == 0x1f && magic[1] == 0x8b)) {
        void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            madvise(m, (size_t)sb.st_size, MADV_SEQUENTIAL);
            if (getenv("MP_NOHUGE")) madvise(m, (size_t)sb.st_size, MADV_NOHUGEPAGE);
            r.buf = m;
            r.len = r.cap = (size_t)sb.st_size;
            r.eof = true;
            r.mapped = true;
        }
    }
    mp_status st = rd_all(&r, t, path);
    close(fd);
    return st;
}

mp_status mp_trace_read_memory(const void *data, size_t size, const char *label,
                               mp_trace_raw *t) {
    rd r;
    memset(&r, 0, sizeof r);
    r.src.fd = -1;
    r.src.mem = data;
    r.src.mem_len = data ? size : 0;
    return rd_all(&r, t, label ? label : "(memory)");
}

void mp_trace_raw_free(mp_trace_raw *t) {
    if (!t) return;
    mp_arena_free(&t->arena);
    mp_strmap_free(&t->names_map);
    free(t->names);
#define RD_FREE(arr) mp__trace_rec_free(t->arr);
    RD_RECORDS(RD_FREE)
#undef RD_FREE
    free(t->pgs);
    free(t->threads);
    free(t->kflags);
    memset(t, 0, sizeof *t);
}

uint64_t mp_trace_span_flops(const mp_trace_raw *t, size_t i) {
    if (i >= t->n_spans || !t->spans[i].has_flops) return 0;
    size_t lo = 0, hi = t->n_flops;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->flops[mid].span < i) lo = mid + 1;
        else hi = mid;
    }
    return lo < t->n_flops && t->flops[lo].span == i ? t->flops[lo].flops : 0;
}
