/* A pickle reader that never executes the file (internal).
 *
 * A pickle is a program for a small stack machine. This one runs only the
 * opcodes that build plain data, protocols 2 to 5: None, booleans, ints
 * of any width (LONG1/LONG4), floats, str, bytes, lists, tuples, dicts,
 * sets, the memo (PUT/GET/MEMOIZE) and FRAME. Every opcode that names or
 * calls something (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ,
 * NEWOBJ_EX, PERSID, BINPERSID, EXT1/2/4, out-of-band buffers) is refused
 * with an error naming the opcode and its byte offset.
 *
 * Values are 64-bit words (a tag and a payload): small ints inline,
 * strings as ids into one interned table (a string is stored once however
 * often the memo hands it out), containers as slots of a table. A caller
 * may turn an item appended to a list into a record of its own (the
 * snapshot reader turns each trace event into a 32-byte record as soon as
 * its list receives it): the slot is then released, and the memo entry
 * that named the container names the record instead, so nothing of the
 * file is held twice. The input is read through a window (plain files by
 * read(), .gz through zlib), never mapped whole. */
#ifndef MP_MEMORY_PICKLE_H
#define MP_MEMORY_PICKLE_H

#include "base/base.h"

#include <stdbool.h>
#include <stdint.h>

typedef uint64_t mpk_val;

/* Tags (the top 4 bits of a value). */
enum {
    PK_NONE = 0,
    PK_BOOL,   /* payload 0/1 */
    PK_INT,    /* payload: 60-bit two's complement */
    PK_BIGINT, /* payload: index into the int table (fits int64) */
    PK_HUGE,   /* an int beyond int64; payload: its byte offset */
    PK_FLOAT,  /* payload: index into the int table (the double's bits) */
    PK_STR,    /* payload: string id */
    PK_BYTES,  /* payload: string id */
    PK_LIST,   /* payload: slot | generation << 32 */
    PK_TUPLE,
    PK_DICT,
    PK_SET,
    PK_USER1, /* values a caller made from containers (payload its own) */
    PK_USER2,
    PK_USER3,
    PK_BAD /* a stale reference (a container already turned into a record) */
};

#define PK_TAG(v) ((unsigned)((v) >> 60))
#define PK_PAYLOAD(v) ((v) & ((UINT64_C(1) << 60) - 1))
#define PK_MAKE(tag, p) (((uint64_t)(tag) << 60) | ((uint64_t)(p) & ((UINT64_C(1) << 60) - 1)))
#define PK_IS_CONTAINER(t) ((t) >= PK_LIST && (t) <= PK_SET)

typedef struct mpk mpk;

/* Limits (hostile input): nesting of containers being built (MARKs open),
 * values on the stack, one string's bytes, gaps in explicit memo indices. */
#define MPK_MAX_MARKS 1000
#define MPK_MAX_STACK (1 << 22)
#define MPK_MAX_STR (1u << 28)
#define MPK_MAX_MEMO_GAP 65536

/* Called for each item appended to a list (APPEND, APPENDS, LIST), in
 * order, before the list holds it; it may replace *item (and release the
 * container it named with mpk_replace), or take it (*drop = true: the
 * list does not keep it; the caller keeps what it made of it). `list`:
 * the list; `offset`: the appending opcode's byte offset; `index`: the
 * item's index in its list (taken items counted). A non-OK status stops
 * the reader (the message set). */
typedef mp_status (*mpk_item_fn)(void *ud, mpk *k, mpk_val list, mpk_val *item, uint64_t offset, uint64_t index,
                                 bool *drop);

mpk *mpk_new(void);
void mpk_free(mpk *k);
void mpk_set_item_hook(mpk *k, mpk_item_fn fn, void *ud);

/* Run the pickle in `path` (plain, or gzip by its magic bytes) or in
 * memory; *root: the value STOP returns. `label` names the input in
 * messages. Errors name the opcode and the byte offset (of the
 * uncompressed stream). */
mp_status mpk_run_file(mpk *k, const char *path, mpk_val *root);
mp_status mpk_run_memory(mpk *k, const void *buf, size_t len, const char *label, mpk_val *root);
/* The uncompressed bytes read by the last run, and whether it was gzip. */
uint64_t mpk_bytes_read(const mpk *k);
bool mpk_was_gzip(const mpk *k);

/* ---- reading values ---- */
/* A container reference followed through to what it became. */
mpk_val mpk_resolve(const mpk *k, mpk_val v);
unsigned mpk_tag(const mpk *k, mpk_val v);
/* The int (PK_INT, PK_BIGINT, PK_BOOL): false for any other value. */
bool mpk_int(const mpk *k, mpk_val v, int64_t *out);
bool mpk_float(const mpk *k, mpk_val v, double *out); /* ints too */
/* A str/bytes value's id (-1 for anything else) and its text. */
int32_t mpk_str_id(const mpk *k, mpk_val v);
const char *mpk_str(const mpk *k, int32_t id, uint32_t *len);
/* The id of a string, added when absent (-1: out of memory). */
int32_t mpk_intern(mpk *k, const char *s, size_t len);
/* A container's items (a dict: key, value, key, value ...); NULL and 0
 * for anything else. */
const mpk_val *mpk_items(const mpk *k, mpk_val v, uint32_t *n);
/* A dict's value under the key with string id `key`; false when absent
 * or v is not a dict. The last of repeated keys wins, as in Python. */
bool mpk_dict_get(const mpk *k, mpk_val v, int32_t key, mpk_val *out);
/* Turn the container v into `to` (what the memo and later references
 * give from now on). `keep`: the slot stays (other references to it
 * follow it to `to`); else it is freed for reuse and references to it
 * read as PK_BAD. */
void mpk_replace(mpk *k, mpk_val v, mpk_val to, bool keep);
/* A short name of a tag, for messages ("a str", "a list", ...). */
const char *mpk_tag_name(unsigned tag);
/* Free every value but the strings (the memo, the stack, the
 * containers): what a caller keeps after it has read what it needs. */
void mpk_drop_values(mpk *k);
/* Counts for tests and the bench: containers alive, memo entries. */
uint32_t mpk_live_containers(const mpk *k);
uint64_t mpk_memo_len(const mpk *k);

#endif
