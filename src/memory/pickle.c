/* The safe pickle reader (pickle.h): a stack machine that runs only the
 * opcodes building plain data. Opcode values and meanings follow CPython's
 * Lib/pickletools.py (the protocol's one reference), protocols 2 to 5. */
#include "memory/pickle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* ---- containers ---- */
typedef struct pk_slot {
    mpk_val *items; /* NULL once replaced */
    mpk_val to;     /* what it became (replaced) */
    uint32_t n, cap;
    uint32_t seen; /* items appended, those the item hook took included */
    uint32_t gen;
    uint32_t memo; /* last memo index naming it; UINT32_MAX none */
    uint8_t kind;  /* PK_LIST .. PK_SET; 0 replaced or free */
} pk_slot;

/* ---- interned strings ---- */
typedef struct pk_str {
    uint32_t off, len; /* into the string pool */
} pk_str;

struct mpk {
    /* input window */
    int fd;
    z_stream z;
    bool gz, z_init, eof, z_end;
    unsigned char *zin; /* compressed input buffer */
    const unsigned char *mem;
    size_t mem_len, mem_pos;
    unsigned char *buf; /* the window (owned unless mem) */
    size_t cap, pos, end;
    uint64_t base;       /* stream offset of buf[0] */
    const char *label;
    bool from_mem;

    /* machine */
    mpk_val *stack;
    size_t sp, stack_cap;
    uint32_t *marks;
    int nmarks;
    mpk_val *memo;
    size_t memo_len, memo_cap;
    pk_slot *slots;
    uint32_t nslots, slots_cap, free_head; /* free list through items==NULL, n=next */
    uint32_t live;
    int64_t *ints;
    size_t nints, ints_cap;
    /* strings */
    char *pool;
    size_t pool_len, pool_cap;
    pk_str *strs;
    uint32_t nstrs, strs_cap;
    uint32_t *htab; /* id + 1; 0 empty */
    uint32_t hcap;

    mpk_item_fn hook;
    void *hook_ud;
};

#define PK_NO_MEMO UINT32_MAX
#define PK_FREE_END UINT32_MAX

mpk *mpk_new(void) {
    mpk *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->fd = -1;
    k->free_head = PK_FREE_END;
    return k;
}

static void pk_input_close(mpk *k) {
    if (k->fd >= 0) close(k->fd);
    k->fd = -1;
    if (k->z_init) inflateEnd(&k->z);
    k->z_init = false;
    free(k->zin);
    k->zin = NULL;
    if (!k->from_mem) free(k->buf);
    k->buf = NULL;
    k->cap = k->pos = k->end = 0;
}

void mpk_free(mpk *k) {
    if (!k) return;
    pk_input_close(k);
    for (uint32_t i = 0; i < k->nslots; i++) free(k->slots[i].items);
    free(k->slots);
    free(k->stack);
    free(k->marks);
    free(k->memo);
    free(k->ints);
    free(k->pool);
    free(k->strs);
    free(k->htab);
    free(k);
}

void mpk_set_item_hook(mpk *k, mpk_item_fn fn, void *ud) {
    k->hook = fn;
    k->hook_ud = ud;
}

/* Grow *p (elements of `elem` bytes, *cap of them) to hold `need`. */
static bool pk_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

/* ---- strings ---- */
static uint32_t pk_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

int32_t mpk_intern(mpk *k, const char *s, size_t len) {
    if (len > MPK_MAX_STR) return -1;
    if ((uint64_t)k->nstrs * 2 + 2 >= k->hcap) {
        uint32_t nc = k->hcap ? k->hcap * 2 : 1024;
        uint32_t *t = calloc(nc, sizeof *t);
        if (!t) return -1;
        for (uint32_t i = 0; i < k->nstrs; i++) {
            uint32_t h = pk_hash(k->pool + k->strs[i].off, k->strs[i].len) & (nc - 1);
            while (t[h]) h = (h + 1) & (nc - 1);
            t[h] = i + 1;
        }
        free(k->htab);
        k->htab = t;
        k->hcap = nc;
    }
    uint32_t h = pk_hash(s, len) & (k->hcap - 1);
    while (k->htab[h]) {
        const pk_str *e = &k->strs[k->htab[h] - 1];
        if (e->len == len && memcmp(k->pool + e->off, s, len) == 0) return (int32_t)(k->htab[h] - 1);
        h = (h + 1) & (k->hcap - 1);
    }
    if (k->pool_len + len + 1 > UINT32_MAX) return -1;
    if (!pk_grow((void **)&k->pool, &k->pool_cap, k->pool_len + len + 1, 1))
        return -1;
    size_t sc = k->strs_cap;
    if (!pk_grow((void **)&k->strs, &sc, (size_t)k->nstrs + 1, sizeof *k->strs)) return -1;
    k->strs_cap = (uint32_t)sc;
    memcpy(k->pool + k->pool_len, s, len);
    k->pool[k->pool_len + len] = 0;
    k->strs[k->nstrs] = (pk_str){(uint32_t)k->pool_len, (uint32_t)len};
    k->pool_len += len + 1;
    k->htab[h] = k->nstrs + 1;
    return (int32_t)k->nstrs++;
}

const char *mpk_str(const mpk *k, int32_t id, uint32_t *len) {
    if (id < 0 || (uint32_t)id >= k->nstrs) {
        if (len) *len = 0;
        return "";
    }
    if (len) *len = k->strs[id].len;
    return k->pool + k->strs[id].off;
}

/* ---- input ---- */
#define PK_CHUNK (256 * 1024)

/* After a gzip member's end: true when another member follows (the
 * inflater is reset to read it), as zcat and Python's gzip read `cat a.gz
 * b.gz`. Zero bytes after the last member are padding, skipped to the end of
 * the file as gzip(1) skips them; anything else after it (not a member's
 * magic) ends the stream, as before. False with *err set on a read error. */
/* The next chunk of compressed input from the file: its byte count, 0 at
 * the end, -1 on a read error (the message set). */
static ssize_t pk_gz_read(mpk *k) {
    ssize_t r;
    do r = read(k->fd, k->zin, PK_CHUNK);
    while (r < 0 && errno == EINTR);
    if (r < 0) {
        mp_error(MP_ERR_IO, "%s: read failed: %s", k->label, strerror(errno));
        return -1;
    }
    k->z.next_in = k->zin;
    k->z.avail_in = (uInt)r;
    return r;
}

static bool pk_gz_next_member(mpk *k, bool *err) {
    for (;;) {
        while (k->z.avail_in > 0 && k->z.next_in[0] == 0) {
            k->z.next_in++;
            k->z.avail_in--;
        }
        if (k->z.avail_in > 0) break;
        if (k->fd < 0) return false; /* gzip in memory: all of it was given */
        ssize_t r = pk_gz_read(k);
        if (r < 0) *err = true;
        if (r <= 0) return false;
    }
    if (k->z.next_in[0] != 0x1f) return false;
    if (inflateReset(&k->z) != Z_OK) {
        *err = true;
        mp_error(MP_ERR_FORMAT, "%s: cannot restart inflate for the next gzip member", k->label);
        return false;
    }
    return true;
}

/* Make at least n bytes available at buf[pos]; false at the end of the
 * input (or an error: then the message is set and *err true). */
static bool pk_fill(mpk *k, size_t n, bool *err) {
    if (k->end - k->pos >= n) return true;
    if (k->from_mem) return false;
    /* move what is left to the start */
    if (k->pos) {
        memmove(k->buf, k->buf + k->pos, k->end - k->pos);
        k->base += k->pos;
        k->end -= k->pos;
        k->pos = 0;
    }
    size_t want = n > PK_CHUNK ? n : PK_CHUNK;
    if (k->cap < want) {
        unsigned char *nb = realloc(k->buf, want);
        if (!nb) {
            *err = true;
            mp_error(MP_ERR_NOMEM, "%s: out of memory reading %zu bytes", k->label, n);
            return false;
        }
        k->buf = nb;
        k->cap = want;
    }
    while (k->end < n && !k->eof) {
        if (!k->gz) {
            ssize_t r = read(k->fd, k->buf + k->end, k->cap - k->end);
            if (r < 0) {
                if (errno == EINTR) continue;
                *err = true;
                mp_error(MP_ERR_IO, "%s: read failed: %s", k->label, strerror(errno));
                return false;
            }
            if (r == 0) k->eof = true;
            k->end += (size_t)r;
        } else {
            if (k->z_end) {
                k->eof = true;
                break;
            }
            if (k->z.avail_in == 0 && k->fd < 0) { /* gzip in memory: all of it was given */
                *err = true;
                mp_error(MP_ERR_FORMAT, "%s: the gzip stream is truncated (after %llu uncompressed bytes)", k->label,
                         (unsigned long long)(k->base + k->end));
                return false;
            }
            if (k->z.avail_in == 0) {
                ssize_t r = pk_gz_read(k);
                if (r <= 0) {
                    *err = true;
                    if (r == 0)
                        mp_error(MP_ERR_FORMAT, "%s: the gzip stream is truncated (after %llu uncompressed bytes)",
                                 k->label, (unsigned long long)(k->base + k->end));
                    return false;
                }
            }
            k->z.next_out = k->buf + k->end;
            k->z.avail_out = (uInt)(k->cap - k->end);
            int zr = inflate(&k->z, Z_NO_FLUSH);
            k->end = (size_t)(k->z.next_out - k->buf);
            if (zr == Z_STREAM_END) {
                if (!pk_gz_next_member(k, err)) {
                    if (*err) return false;
                    k->z_end = true;
                }
            } else if (zr != Z_OK && zr != Z_BUF_ERROR) {
                *err = true;
                mp_error(MP_ERR_FORMAT, "%s: gzip data error after %llu uncompressed bytes: %s", k->label,
                         (unsigned long long)(k->base + k->end), k->z.msg ? k->z.msg : "inflate failed");
                return false;
            }
        }
    }
    return k->end - k->pos >= n;
}

static mp_status pk_open(mpk *k, const char *path) {
    k->label = path;
    k->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (k->fd < 0) return mp_error(MP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    unsigned char magic[2];
    ssize_t r;
    do r = pread(k->fd, magic, 2, 0);
    while (r < 0 && errno == EINTR);
    if (r == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        k->gz = true;
        k->zin = malloc(PK_CHUNK);
        if (!k->zin) return mp_error(MP_ERR_NOMEM, "%s: out of memory", path);
        memset(&k->z, 0, sizeof k->z);
        if (inflateInit2(&k->z, 15 + 16) != Z_OK) return mp_error(MP_ERR_NOMEM, "%s: cannot start inflate", path);
        k->z_init = true;
    }
    return MP_OK;
}

/* ---- the machine ---- */
static const char *const pk_op_names[256] = {
    ['('] = "MARK", ['.'] = "STOP", ['0'] = "POP", ['1'] = "POP_MARK", ['2'] = "DUP",
    ['F'] = "FLOAT", ['I'] = "INT", ['J'] = "BININT", ['K'] = "BININT1", ['L'] = "LONG",
    ['M'] = "BININT2", ['N'] = "NONE", ['P'] = "PERSID", ['Q'] = "BINPERSID", ['R'] = "REDUCE",
    ['S'] = "STRING", ['T'] = "BINSTRING", ['U'] = "SHORT_BINSTRING", ['V'] = "UNICODE",
    ['X'] = "BINUNICODE", ['a'] = "APPEND", ['b'] = "BUILD", ['c'] = "GLOBAL", ['d'] = "DICT",
    ['}'] = "EMPTY_DICT", ['e'] = "APPENDS", ['g'] = "GET", ['h'] = "BINGET", ['i'] = "INST",
    ['j'] = "LONG_BINGET", ['l'] = "LIST", [']'] = "EMPTY_LIST", ['o'] = "OBJ", ['p'] = "PUT",
    ['q'] = "BINPUT", ['r'] = "LONG_BINPUT", ['s'] = "SETITEM", ['t'] = "TUPLE",
    [')'] = "EMPTY_TUPLE", ['u'] = "SETITEMS", ['G'] = "BINFLOAT", [0x80] = "PROTO",
    [0x81] = "NEWOBJ", [0x82] = "EXT1", [0x83] = "EXT2", [0x84] = "EXT4", [0x85] = "TUPLE1",
    [0x86] = "TUPLE2", [0x87] = "TUPLE3", [0x88] = "NEWTRUE", [0x89] = "NEWFALSE",
    [0x8a] = "LONG1", [0x8b] = "LONG4", ['B'] = "BINBYTES", ['C'] = "SHORT_BINBYTES",
    [0x8c] = "SHORT_BINUNICODE", [0x8d] = "BINUNICODE8", [0x8e] = "BINBYTES8",
    [0x8f] = "EMPTY_SET", [0x90] = "ADDITEMS", [0x91] = "FROZENSET", [0x92] = "NEWOBJ_EX",
    [0x93] = "STACK_GLOBAL", [0x94] = "MEMOIZE", [0x95] = "FRAME", [0x96] = "BYTEARRAY8",
    [0x97] = "NEXT_BUFFER", [0x98] = "READONLY_BUFFER",
};

static mp_status pk_fail(mpk *k, uint64_t off, int op, const char *what) {
    const char *name = pk_op_names[op & 0xff];
    if (name)
        return mp_error(MP_ERR_FORMAT, "%s: byte offset %llu: opcode %s: %s", k->label, (unsigned long long)off,
                        name, what);
    return mp_error(MP_ERR_FORMAT, "%s: byte offset %llu: unknown opcode 0x%02x: %s", k->label,
                    (unsigned long long)off, op & 0xff, what);
}

static mpk_val pk_slot_val(const mpk *k, unsigned tag, uint32_t slot) {
    return PK_MAKE(tag, (uint64_t)slot | ((uint64_t)(k->slots[slot].gen & 0xffffff) << 32));
}

/* The slot a container value names; NULL when stale. */
static pk_slot *pk_slot_of(const mpk *k, mpk_val v) {
    uint64_t p = PK_PAYLOAD(v);
    uint32_t s = (uint32_t)p;
    if (s >= k->nslots) return NULL;
    pk_slot *e = &k->slots[s];
    if ((e->gen & 0xffffff) != (uint32_t)(p >> 32)) return NULL;
    return e;
}

static bool pk_new_container(mpk *k, unsigned tag, mpk_val *out) {
    uint32_t s;
    if (k->free_head != PK_FREE_END) {
        s = k->free_head;
        k->free_head = k->slots[s].n;
    } else {
        size_t cap = k->slots_cap;
        if (k->nslots == UINT32_MAX - 1 || !pk_grow((void **)&k->slots, &cap, (size_t)k->nslots + 1, sizeof *k->slots))
            return false;
        k->slots_cap = (uint32_t)cap;
        s = k->nslots++;
        k->slots[s].gen = 0;
        k->slots[s].items = NULL;
        k->slots[s].cap = 0;
        k->slots[s].n = 0;
    }
    pk_slot *e = &k->slots[s];
    e->n = e->seen = 0;
    e->memo = PK_NO_MEMO;
    e->kind = (uint8_t)tag;
    e->to = 0;
    k->live++;
    *out = pk_slot_val(k, tag, s);
    return true;
}

static bool pk_push_items(pk_slot *e, const mpk_val *v, size_t n) {
    if ((uint64_t)e->n + n > UINT32_MAX) return false;
    if (e->n + n > e->cap) {
        size_t nc = e->cap ? e->cap : 4;
        while (nc < e->n + n) nc *= 2;
        if (nc > UINT32_MAX) nc = UINT32_MAX;
        mpk_val *q = realloc(e->items, nc * sizeof *q);
        if (!q) return false;
        e->items = q;
        e->cap = (uint32_t)nc;
    }
    memcpy(e->items + e->n, v, n * sizeof *v);
    e->n += (uint32_t)n;
    return true;
}

void mpk_replace(mpk *k, mpk_val v, mpk_val to, bool keep) {
    unsigned t = PK_TAG(v);
    if (!PK_IS_CONTAINER(t)) return;
    pk_slot *e = pk_slot_of(k, v);
    if (!e || !e->kind) return;
    if (e->memo != PK_NO_MEMO && e->memo < k->memo_len && k->memo[e->memo] == v) k->memo[e->memo] = to;
    /* a kept slot keeps its items until mpk_free: a caller may be walking
     * them (a hostile file can make a list its own frames) */
    e->kind = 0;
    e->to = to;
    k->live--;
    if (!keep) { /* its items' room stays with the slot for the next container */
        uint32_t s = (uint32_t)PK_PAYLOAD(v);
        e->gen++;
        e->n = k->free_head;
        k->free_head = s;
    }
}

mpk_val mpk_resolve(const mpk *k, mpk_val v) {
    for (int hops = 0; hops < 8; hops++) {
        unsigned t = PK_TAG(v);
        if (!PK_IS_CONTAINER(t)) return v;
        pk_slot *e = pk_slot_of(k, v);
        if (!e) return PK_MAKE(PK_BAD, 0);
        if (e->kind) return v;
        v = e->to;
    }
    return PK_MAKE(PK_BAD, 0);
}

unsigned mpk_tag(const mpk *k, mpk_val v) { return PK_TAG(mpk_resolve(k, v)); }

bool mpk_int(const mpk *k, mpk_val v, int64_t *out) {
    switch (PK_TAG(v)) {
    case PK_BOOL: *out = (int64_t)PK_PAYLOAD(v); return true;
    case PK_INT: {
        uint64_t p = PK_PAYLOAD(v);
        if (p & (UINT64_C(1) << 59)) p |= UINT64_C(0xf) << 60;
        *out = (int64_t)p;
        return true;
    }
    case PK_BIGINT: *out = k->ints[PK_PAYLOAD(v)]; return true;
    default: return false;
    }
}

bool mpk_float(const mpk *k, mpk_val v, double *out) {
    if (PK_TAG(v) == PK_FLOAT) {
        memcpy(out, &k->ints[PK_PAYLOAD(v)], sizeof *out);
        return true;
    }
    int64_t i;
    if (!mpk_int(k, v, &i)) return false;
    *out = (double)i;
    return true;
}

int32_t mpk_str_id(const mpk *k, mpk_val v) {
    (void)k;
    unsigned t = PK_TAG(v);
    return t == PK_STR || t == PK_BYTES ? (int32_t)PK_PAYLOAD(v) : -1;
}

const mpk_val *mpk_items(const mpk *k, mpk_val v, uint32_t *n) {
    v = mpk_resolve(k, v);
    *n = 0;
    if (!PK_IS_CONTAINER(PK_TAG(v))) return NULL;
    pk_slot *e = pk_slot_of(k, v);
    if (!e || !e->kind) return NULL;
    *n = e->n;
    return e->items;
}

bool mpk_dict_get(const mpk *k, mpk_val v, int32_t key, mpk_val *out) {
    v = mpk_resolve(k, v);
    if (PK_TAG(v) != PK_DICT || key < 0) return false;
    uint32_t n;
    const mpk_val *it = mpk_items(k, v, &n);
    mpk_val want = PK_MAKE(PK_STR, (uint32_t)key);
    for (uint32_t i = n; i >= 2; i -= 2)
        if (it[i - 2] == want) {
            *out = it[i - 1];
            return true;
        }
    return false;
}

const char *mpk_tag_name(unsigned tag) {
    switch (tag) {
    case PK_NONE: return "None";
    case PK_BOOL: return "a bool";
    case PK_INT: case PK_BIGINT: return "an int";
    case PK_HUGE: return "an int beyond 64 bits";
    case PK_FLOAT: return "a float";
    case PK_STR: return "a str";
    case PK_BYTES: return "bytes";
    case PK_LIST: return "a list";
    case PK_TUPLE: return "a tuple";
    case PK_DICT: return "a dict";
    case PK_SET: return "a set";
    case PK_BAD: return "a reference to an object already consumed";
    default: return "a record";
    }
}

void mpk_drop_values(mpk *k) {
    for (uint32_t i = 0; i < k->nslots; i++) free(k->slots[i].items);
    free(k->slots);
    k->slots = NULL;
    k->nslots = k->slots_cap = k->live = 0;
    k->free_head = PK_FREE_END;
    free(k->stack);
    k->stack = NULL;
    k->sp = k->stack_cap = 0;
    free(k->memo);
    k->memo = NULL;
    k->memo_len = k->memo_cap = 0;
    free(k->marks);
    k->marks = NULL;
    k->nmarks = 0;
    free(k->htab); /* strings stay readable by id; no more are interned */
    k->htab = NULL;
    k->hcap = 0;
}

uint32_t mpk_live_containers(const mpk *k) { return k->live; }
uint64_t mpk_memo_len(const mpk *k) { return k->memo_len; }
uint64_t mpk_bytes_read(const mpk *k) { return k->base + k->end; }
bool mpk_was_gzip(const mpk *k) { return k->gz; }

static inline bool pk_push(mpk *k, mpk_val v) {
    if (__builtin_expect(k->sp == k->stack_cap, 0)) {
        if (k->sp >= MPK_MAX_STACK) return false;
        if (!pk_grow((void **)&k->stack, &k->stack_cap, k->sp + 1, sizeof *k->stack)) return false;
    }
    k->stack[k->sp++] = v;
    return true;
}

static bool pk_int_val(mpk *k, int64_t i, mpk_val *out) {
    if (i >= -(INT64_C(1) << 59) && i < (INT64_C(1) << 59)) {
        *out = PK_MAKE(PK_INT, (uint64_t)i);
        return true;
    }
    if (!pk_grow((void **)&k->ints, &k->ints_cap, k->nints + 1, sizeof *k->ints)) return false;
    k->ints[k->nints] = i;
    *out = PK_MAKE(PK_BIGINT, k->nints++);
    return true;
}

/* The current mark's base (the first stack index above the mark). */
static inline size_t pk_base(const mpk *k) { return k->nmarks ? k->marks[k->nmarks - 1] : 0; }

static mp_status pk_memo_put(mpk *k, uint64_t idx, uint64_t off, int op) {
    if (k->sp <= pk_base(k)) return pk_fail(k, off, op, "the stack is empty");
    if (idx >= k->memo_len + MPK_MAX_MEMO_GAP || idx >= UINT32_MAX)
        return pk_fail(k, off, op, "memo index out of range");
    if (idx >= k->memo_len) {
        if (!pk_grow((void **)&k->memo, &k->memo_cap, idx + 1, sizeof *k->memo))
            return mp_error(MP_ERR_NOMEM, "%s: out of memory (memo)", k->label);
        for (uint64_t i = k->memo_len; i < idx; i++) k->memo[i] = PK_MAKE(PK_BAD, 1);
        k->memo_len = idx + 1;
    }
    mpk_val v = k->stack[k->sp - 1];
    k->memo[idx] = v;
    if (PK_IS_CONTAINER(PK_TAG(v))) {
        pk_slot *e = pk_slot_of(k, v);
        if (e && e->kind) e->memo = (uint32_t)idx;
    }
    return MP_OK;
}

static mp_status pk_memo_get_slow(mpk *k, uint64_t idx, uint64_t off, int op);
/* The common case inline: a stored entry and room on the stack. */
static inline mp_status pk_memo_get(mpk *k, uint64_t idx, uint64_t off, int op) {
    if (__builtin_expect(idx < k->memo_len && k->sp < k->stack_cap, 1)) {
        mpk_val v = k->memo[idx];
        if (__builtin_expect(PK_TAG(v) != PK_BAD, 1)) {
            k->stack[k->sp++] = v;
            return MP_OK;
        }
    }
    return pk_memo_get_slow(k, idx, off, op);
}

static mp_status pk_memo_get_slow(mpk *k, uint64_t idx, uint64_t off, int op) {
    if (idx >= k->memo_len || PK_TAG(k->memo[idx]) == PK_BAD) {
        char m[96];
        snprintf(m, sizeof m, "memo index %llu refers to nothing stored", (unsigned long long)idx);
        return pk_fail(k, off, op, m);
    }
    if (!pk_push(k, k->memo[idx])) return pk_fail(k, off, op, "stack deeper than the limit");
    return MP_OK;
}

static mp_status pk_hook_items(mpk *k, mpk_val list, mpk_val *v, size_t n, uint64_t off, size_t *kept);

/* The items above the current mark go into a new container. */
static mp_status pk_collect(mpk *k, unsigned tag, uint64_t off, int op) {
    if (!k->nmarks) return pk_fail(k, off, op, "no MARK before it");
    size_t b = pk_base(k), n = k->sp - b;
    if (tag == PK_DICT && n % 2) return pk_fail(k, off, op, "an odd number of keys and values");
    mpk_val c;
    if (!pk_new_container(k, tag, &c)) return mp_error(MP_ERR_NOMEM, "%s: out of memory", k->label);
    if (tag == PK_LIST && k->hook && n) {
        mp_status st = pk_hook_items(k, c, k->stack + b, n, off, &n);
        if (st) return st;
    }
    pk_slot *e = pk_slot_of(k, c);
    if (n && !pk_push_items(e, k->stack + b, n)) return mp_error(MP_ERR_NOMEM, "%s: out of memory", k->label);
    k->sp = b;
    k->nmarks--;
    if (!pk_push(k, c)) return pk_fail(k, off, op, "stack deeper than the limit");
    return MP_OK;
}

/* Append the items above the mark (or the top item) to the list or set
 * below them. */
/* Run the item hook on the n values at v (going into `list`), keeping in
 * place those it does not take; *kept: how many stay. */
static mp_status pk_hook_items(mpk *k, mpk_val list, mpk_val *v, size_t n, uint64_t off, size_t *kept) {
    pk_slot *e = pk_slot_of(k, list);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        bool drop = false;
        mp_status st = k->hook(k->hook_ud, k, list, &v[i], off, e ? e->seen : 0, &drop);
        if (st) return st;
        e = pk_slot_of(k, list); /* the hook replaces containers; the list's slot stays */
        if (e) e->seen++;
        if (!drop) v[w++] = v[i];
    }
    *kept = w;
    return MP_OK;
}

static mp_status pk_append(mpk *k, size_t from, bool mark, uint64_t off, int op, unsigned want) {
    if (from == 0 || from > k->sp) return pk_fail(k, off, op, "nothing to append to");
    mpk_val target = k->stack[from - 1];
    if (PK_TAG(target) != want) {
        char m[96];
        snprintf(m, sizeof m, "appends to %s, not %s", mpk_tag_name(PK_TAG(mpk_resolve(k, target))),
                 mpk_tag_name(want));
        return pk_fail(k, off, op, m);
    }
    pk_slot *e = pk_slot_of(k, target);
    if (!e || !e->kind) return pk_fail(k, off, op, "appends to an object already consumed");
    size_t n = k->sp - from;
    if (want == PK_LIST && k->hook && n) {
        mp_status st = pk_hook_items(k, target, k->stack + from, n, off, &n);
        if (st) return st;
        e = pk_slot_of(k, target);
        if (!e || !e->kind) return pk_fail(k, off, op, "appends to an object already consumed");
    }
    if (n && !pk_push_items(e, k->stack + from, n)) return mp_error(MP_ERR_NOMEM, "%s: out of memory", k->label);
    k->sp = from;
    if (mark) k->nmarks--;
    return MP_OK;
}

static mp_status pk_setitems(mpk *k, size_t from, bool mark, uint64_t off, int op) {
    if (from == 0 || from > k->sp) return pk_fail(k, off, op, "no dict to set items in");
    mpk_val target = k->stack[from - 1];
    if (PK_TAG(target) != PK_DICT) {
        char m[96];
        snprintf(m, sizeof m, "sets items in %s, not a dict", mpk_tag_name(PK_TAG(mpk_resolve(k, target))));
        return pk_fail(k, off, op, m);
    }
    pk_slot *e = pk_slot_of(k, target);
    if (!e || !e->kind) return pk_fail(k, off, op, "sets items in an object already consumed");
    size_t n = k->sp - from;
    if (n % 2) return pk_fail(k, off, op, "an odd number of keys and values");
    if (n && !pk_push_items(e, k->stack + from, n)) return mp_error(MP_ERR_NOMEM, "%s: out of memory", k->label);
    k->sp = from;
    if (mark) k->nmarks--;
    return MP_OK;
}

static uint64_t pk_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* A little-endian two's complement int of n bytes. */
static mp_status pk_long(mpk *k, const unsigned char *p, uint64_t n, uint64_t off, int op) {
    mpk_val v;
    if (n >= 1 && n <= 7) { /* addresses and times: fits the inline int */
        uint64_t u = pk_le(p, (int)n);
        if (p[n - 1] & 0x80) u |= ~UINT64_C(0) << (8 * n);
        int64_t i = (int64_t)u;
        if (i >= -(INT64_C(1) << 59) && i < (INT64_C(1) << 59)) {
            if (!pk_push(k, PK_MAKE(PK_INT, u))) return pk_fail(k, off, op, "stack deeper than the limit");
            return MP_OK;
        }
    }
    if (n == 0) {
        v = PK_MAKE(PK_INT, 0);
    } else {
        bool neg = p[n - 1] & 0x80;
        /* bytes above the low 8 must be pure sign extension */
        bool fits = true;
        for (uint64_t i = 8; i < n; i++)
            if (p[i] != (neg ? 0xff : 0x00)) {
                fits = false;
                break;
            }
        if (fits && n > 8 && ((p[7] & 0x80) != 0) != neg) fits = false;
        if (!fits) {
            v = PK_MAKE(PK_HUGE, off);
        } else {
            int m = n > 8 ? 8 : (int)n;
            uint64_t u = pk_le(p, m);
            if (m < 8 && neg) u |= ~UINT64_C(0) << (8 * m);
            if (!pk_int_val(k, (int64_t)u, &v)) return mp_error(MP_ERR_NOMEM, "%s: out of memory", k->label);
        }
    }
    if (!pk_push(k, v)) return pk_fail(k, off, op, "stack deeper than the limit");
    return MP_OK;
}

static mp_status pk_string(mpk *k, const unsigned char *p, uint64_t n, unsigned tag, uint64_t off, int op) {
    int32_t id = mpk_intern(k, (const char *)p, (size_t)n);
    if (id < 0) return mp_error(MP_ERR_NOMEM, "%s: out of memory (strings)", k->label);
    if (!pk_push(k, PK_MAKE(tag, (uint32_t)id))) return pk_fail(k, off, op, "stack deeper than the limit");
    return MP_OK;
}

static mp_status pk_run(mpk *k, mpk_val *root) {
    bool err = false;
    uint64_t off = 0;
    int op = 0;
#define NEED(nb)                                                                   \
    do {                                                                           \
        if (k->end - k->pos < (size_t)(nb) && !pk_fill(k, (nb), &err)) {           \
            if (err) return MP_ERR_FORMAT;                                         \
            return pk_fail(k, off, op, "the file ends inside it (truncated?)");    \
        }                                                                          \
    } while (0)
#define ARG (k->buf + k->pos + 1)
#define PUSH(v)                                                                    \
    do {                                                                           \
        if (!pk_push(k, (v))) return pk_fail(k, off, op, "stack deeper than the limit"); \
    } while (0)
#define NEED_ITEMS(c)                                                              \
    do {                                                                           \
        if (k->sp - pk_base(k) < (size_t)(c)) return pk_fail(k, off, op, "the stack holds too few items"); \
    } while (0)
    for (;;) {
        if (k->pos == k->end && !pk_fill(k, 1, &err)) {
            if (err) return MP_ERR_FORMAT;
            off = k->base + k->pos;
            return mp_error(MP_ERR_FORMAT, "%s: byte offset %llu: the pickle ends without STOP (truncated?)",
                            k->label, (unsigned long long)off);
        }
        off = k->base + k->pos;
        op = k->buf[k->pos];
        size_t adv = 1;
        mp_status st = MP_OK;
        switch (op) {
        case 0x80: /* PROTO */
            NEED(2);
            if (ARG[0] > 5) return pk_fail(k, off, op, "protocol above 5");
            adv = 2;
            break;
        case 0x95: /* FRAME: a length; the frames' contents are read as they come */
            NEED(9);
            adv = 9;
            break;
        case '.': { /* STOP */
            if (k->sp <= pk_base(k) || k->sp == 0) return pk_fail(k, off, op, "the stack is empty");
            *root = k->stack[k->sp - 1];
            k->pos += 1;
            return MP_OK;
        }
        case '(': /* MARK */
            if (k->nmarks >= MPK_MAX_MARKS) return pk_fail(k, off, op, "nesting deeper than the limit (1000)");
            if (!k->marks) {
                k->marks = malloc(MPK_MAX_MARKS * sizeof *k->marks);
                if (!k->marks) return mp_error(MP_ERR_NOMEM, "%s: out of memory", k->label);
            }
            k->marks[k->nmarks++] = (uint32_t)k->sp;
            break;
        case '0': /* POP */
            if (k->sp > pk_base(k)) k->sp--;
            else if (k->nmarks) k->nmarks--;
            else return pk_fail(k, off, op, "the stack is empty");
            break;
        case '1': /* POP_MARK */
            if (!k->nmarks) return pk_fail(k, off, op, "no MARK before it");
            k->sp = pk_base(k);
            k->nmarks--;
            break;
        case '2': /* DUP */
            NEED_ITEMS(1);
            PUSH(k->stack[k->sp - 1]);
            break;
        case 'N': PUSH(PK_MAKE(PK_NONE, 0)); break;
        case 0x88: PUSH(PK_MAKE(PK_BOOL, 1)); break;
        case 0x89: PUSH(PK_MAKE(PK_BOOL, 0)); break;
        case 'J': { /* BININT */
            NEED(5);
            int32_t v = (int32_t)(uint32_t)pk_le(ARG, 4);
            PUSH(PK_MAKE(PK_INT, (uint64_t)(int64_t)v));
            adv = 5;
            break;
        }
        case 'K': NEED(2); PUSH(PK_MAKE(PK_INT, ARG[0])); adv = 2; break;
        case 'M': NEED(3); PUSH(PK_MAKE(PK_INT, pk_le(ARG, 2))); adv = 3; break;
        case 0x8a: { /* LONG1 */
            NEED(2);
            uint64_t n = ARG[0];
            NEED(2 + n);
            st = pk_long(k, ARG + 1, n, off, op);
            adv = 2 + n;
            break;
        }
        case 0x8b: { /* LONG4 */
            NEED(5);
            int32_t n = (int32_t)(uint32_t)pk_le(ARG, 4);
            if (n < 0) return pk_fail(k, off, op, "negative length");
            if ((uint32_t)n > MPK_MAX_STR) return pk_fail(k, off, op, "length beyond the limit");
            NEED(5 + (size_t)n);
            st = pk_long(k, ARG + 4, (uint64_t)n, off, op);
            adv = 5 + (size_t)n;
            break;
        }
        case 'G': { /* BINFLOAT: big-endian double */
            NEED(9);
            uint64_t u = 0;
            for (int i = 0; i < 8; i++) u = (u << 8) | ARG[i];
            if (!pk_grow((void **)&k->ints, &k->ints_cap, k->nints + 1, sizeof *k->ints))
                return mp_error(MP_ERR_NOMEM, "%s: out of memory", k->label);
            memcpy(&k->ints[k->nints], &u, 8);
            PUSH(PK_MAKE(PK_FLOAT, k->nints++));
            adv = 9;
            break;
        }
        case 0x8c: case 'U': case 'C': { /* SHORT_BINUNICODE, SHORT_BINSTRING, SHORT_BINBYTES */
            NEED(2);
            size_t n = ARG[0];
            NEED(2 + n);
            st = pk_string(k, ARG + 1, n, op == 'C' ? PK_BYTES : PK_STR, off, op);
            adv = 2 + n;
            break;
        }
        case 'X': case 'T': case 'B': { /* BINUNICODE, BINSTRING, BINBYTES: 4-byte length */
            NEED(5);
            uint64_t n = pk_le(ARG, 4);
            if (op == 'T' && (n & 0x80000000u)) return pk_fail(k, off, op, "negative length");
            if (n > MPK_MAX_STR) return pk_fail(k, off, op, "length beyond the limit (256 MiB)");
            NEED(5 + n);
            st = pk_string(k, ARG + 4, n, op == 'B' ? PK_BYTES : PK_STR, off, op);
            adv = 5 + n;
            break;
        }
        case 0x8d: case 0x8e: case 0x96: { /* BINUNICODE8, BINBYTES8, BYTEARRAY8 */
            NEED(9);
            uint64_t n = pk_le(ARG, 8);
            if (n > MPK_MAX_STR) return pk_fail(k, off, op, "length beyond the limit (256 MiB)");
            NEED(9 + n);
            st = pk_string(k, ARG + 8, n, op == 0x8d ? PK_STR : PK_BYTES, off, op);
            adv = 9 + n;
            break;
        }
        case ']': case ')': case '}': case 0x8f: { /* EMPTY_LIST, EMPTY_TUPLE, EMPTY_DICT, EMPTY_SET */
            mpk_val c;
            unsigned t = op == ']' ? PK_LIST : op == ')' ? PK_TUPLE : op == '}' ? PK_DICT : PK_SET;
            if (!pk_new_container(k, t, &c)) return mp_error(MP_ERR_NOMEM, "%s: out of memory", k->label);
            PUSH(c);
            break;
        }
        case 'l': st = pk_collect(k, PK_LIST, off, op); break;
        case 't': st = pk_collect(k, PK_TUPLE, off, op); break;
        case 'd': st = pk_collect(k, PK_DICT, off, op); break;
        case 0x91: st = pk_collect(k, PK_SET, off, op); break; /* FROZENSET */
        case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
            size_t n = (size_t)(op - 0x84);
            NEED_ITEMS(n);
            mpk_val c;
            if (!pk_new_container(k, PK_TUPLE, &c)) return mp_error(MP_ERR_NOMEM, "%s: out of memory", k->label);
            if (!pk_push_items(pk_slot_of(k, c), k->stack + k->sp - n, n))
                return mp_error(MP_ERR_NOMEM, "%s: out of memory", k->label);
            k->sp -= n;
            k->stack[k->sp++] = c;
            break;
        }
        case 'a': /* APPEND */
            NEED_ITEMS(2);
            st = pk_append(k, k->sp - 1, false, off, op, PK_LIST);
            break;
        case 'e': /* APPENDS */
            if (!k->nmarks) return pk_fail(k, off, op, "no MARK before it");
            st = pk_append(k, pk_base(k), true, off, op, PK_LIST);
            break;
        case 0x90: /* ADDITEMS */
            if (!k->nmarks) return pk_fail(k, off, op, "no MARK before it");
            st = pk_append(k, pk_base(k), true, off, op, PK_SET);
            break;
        case 's': /* SETITEM */
            NEED_ITEMS(3);
            st = pk_setitems(k, k->sp - 2, false, off, op);
            break;
        case 'u': /* SETITEMS */
            if (!k->nmarks) return pk_fail(k, off, op, "no MARK before it");
            st = pk_setitems(k, pk_base(k), true, off, op);
            break;
        case 'h': NEED(2); st = pk_memo_get(k, ARG[0], off, op); adv = 2; break;
        case 'j': NEED(5); st = pk_memo_get(k, pk_le(ARG, 4), off, op); adv = 5; break;
        case 'q': NEED(2); st = pk_memo_put(k, ARG[0], off, op); adv = 2; break;
        case 'r': NEED(5); st = pk_memo_put(k, pk_le(ARG, 4), off, op); adv = 5; break;
        case 0x94: st = pk_memo_put(k, k->memo_len, off, op); break; /* MEMOIZE */
        /* opcodes that name or call something: never run */
        case 'c': case 0x93: case 'R': case 'b': case 'i': case 'o': case 0x81: case 0x92:
        case 'P': case 'Q': case 0x82: case 0x83: case 0x84:
            return pk_fail(k, off, op,
                           "refused: it would import or call code named by the file (a snapshot holds only data)");
        case 0x97: case 0x98:
            return pk_fail(k, off, op, "refused: out-of-band buffers are not snapshot data");
        /* protocol 0/1 text opcodes: snapshots are protocol 2 or later */
        case 'I': case 'L': case 'F': case 'S': case 'V': case 'g': case 'p':
            return pk_fail(k, off, op, "a protocol 0 text opcode (snapshots are pickled with protocol 2 or later)");
        default:
            return pk_fail(k, off, op, "not a pickle opcode");
        }
        if (st) return st;
        k->pos += adv;
    }
#undef NEED
#undef ARG
#undef PUSH
#undef NEED_ITEMS
}

static void pk_reset_machine(mpk *k) {
    k->sp = 0;
    k->nmarks = 0;
}

mp_status mpk_run_file(mpk *k, const char *path, mpk_val *root) {
    pk_input_close(k);
    pk_reset_machine(k);
    k->from_mem = false;
    k->eof = k->z_end = k->gz = false;
    k->base = 0;
    mp_status st = pk_open(k, path);
    if (!st) st = pk_run(k, root);
    if (!st && k->gz) {
        /* the rest of the stream must inflate cleanly (a truncated .gz
         * whose pickle happened to end is still said) */
    }
    int fd = k->fd;
    k->fd = -1;
    if (fd >= 0) close(fd);
    if (k->z_init) inflateEnd(&k->z);
    k->z_init = false;
    free(k->zin);
    k->zin = NULL;
    uint64_t read_total = k->base + k->end;
    free(k->buf);
    k->buf = NULL;
    k->base = read_total;
    k->cap = k->pos = k->end = 0;
    return st;
}

mp_status mpk_run_memory(mpk *k, const void *buf, size_t len, const char *label, mpk_val *root) {
    pk_input_close(k);
    pk_reset_machine(k);
    k->label = label;
    const unsigned char *b = buf;
    if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b && len <= UINT32_MAX) {
        /* gzip in memory: inflated through the window as a file is */
        k->from_mem = false;
        k->gz = true;
        k->eof = k->z_end = false;
        k->base = 0;
        memset(&k->z, 0, sizeof k->z);
        if (inflateInit2(&k->z, 15 + 16) != Z_OK) return mp_error(MP_ERR_NOMEM, "%s: cannot start inflate", label);
        k->z_init = true;
        k->z.next_in = (unsigned char *)b;
        k->z.avail_in = (uInt)len;
        mp_status st = pk_run(k, root);
        uint64_t total = k->base + k->end;
        inflateEnd(&k->z);
        k->z_init = false;
        free(k->buf);
        k->buf = NULL;
        k->cap = k->pos = k->end = 0;
        k->base = total;
        return st;
    }
    k->from_mem = true;
    k->gz = false;
    k->buf = (unsigned char *)buf;
    k->cap = k->end = len;
    k->pos = 0;
    k->base = 0;
    k->eof = true;
    mp_status st = pk_run(k, root);
    k->buf = NULL;
    k->base = len;
    k->cap = k->pos = k->end = 0;
    k->from_mem = false;
    return st;
}
