/* Sequences (ONNX's sequence type, opset 11): lists of tensors that may
 * differ in shape. torch.tensor_split, torch.split with a list of sizes,
 * torch.unbind and a scripted list that is appended to export as them
 * (torchvision's MViT splits its class token with a Loop that fills one).
 *
 * The inference follows a sequence whose length and elements it can know
 * (graph/graph.h, mp_seq): SequenceEmpty, SequenceConstruct,
 * SequenceInsert and SequenceErase at known positions, SplitToSequence by
 * known sizes, and a Loop of known passes that inserts into one
 * (ops/control.c infers its body pass by pass). SequenceAt at a known
 * position then gives that element's type, shape and contents, so the
 * work after it is counted exactly. Where a position or a length is not
 * known the sequence is unknown, and what reads it has an unknown shape
 * (its cost is flagged, never guessed).
 *
 * Cost: no arithmetic. The driver counts the bytes read and written (a
 * sequence's: its elements'), as ONNX Runtime copies a tensor into and
 * out of a sequence.
 *
 * Run: a sequence is one buffer that describes itself (sq_blob below), a
 * value whose size is known at run time (mp_kout_alloc): its length, each
 * element's shape and place, then the elements. A Loop carries it from
 * pass to pass as it carries any value that changes size. */
#include "ops/kernel.h"

#include <stdlib.h>
#include <string.h>

#define SQ_MAX 4096 /* longer sequences are followed as unknown */

/* An output that is a known sequence of n elements of type dtype (el:
 * scratch the caller fills). */
/* Output o is a sequence of dtype whose elements are not known. */
static mp_status sq_unknown(mp_ctx *c, int o, int dtype) {
    mp_status st = mp_set_out_dtype(c, o, dtype);
    mp_value *v = mp_out(c, o);
    if (v) v->flags |= MP_VAL_SEQUENCE;
    return st;
}

static mp_status sq_set(mp_ctx *c, int o, int dtype, int n, mp_value **el) {
    mp_status st = sq_unknown(c, o, dtype);
    if (st) return st;
    mp_value *v = mp_out(c, o);
    if (!v) return MP_OK;
    mp_seq *s = mp_scratch(c, sizeof *s);
    mp_value *e = n ? mp_scratch(c, sizeof *e * (size_t)n) : NULL;
    if (!s || (n && !e)) return mp_error(MP_ERR_NOMEM, "out of memory");
    memset(s, 0, sizeof *s);
    if (e) memset(e, 0, sizeof *e * (size_t)n);
    s->n = n;
    s->dtype = dtype;
    s->el = e;
    v->seq = s;
    if (el) *el = e;
    return MP_OK;
}

/* An element: the type, shape, contents and (a sequence of sequences)
 * sequence of src, without its name or graph links. */
static void sq_elem(mp_value *dst, const mp_value *src) {
    memset(dst, 0, sizeof *dst);
    mp_value_take(dst, src);
    dst->producer = -1;
    dst->outer = -1;
}

/* Output o takes element e's type, shape and contents. */
static mp_status sq_out_elem(mp_ctx *c, int o, const mp_value *e) {
    mp_status st = mp_set_out(c, o, e->dtype, e->rank, e->dims);
    if (st) return st;
    mp_value *v = mp_out(c, o);
    if (!v) return MP_OK;
    v->seq = e->seq;
    if (e->kn >= 0 && e->rank >= 0 && mp_value_numel(e) == e->kn) {
        v->kn = e->kn;
        v->iv = e->iv;
        v->fv = e->fv;
    }
    return MP_OK;
}

/* ---- SequenceEmpty ---- */

static mp_status sq_empty_infer(mp_ctx *c) {
    return sq_set(c, 0, (int)mp_attr_i(c->n, "dtype", MP_DT_FLOAT), 0, NULL);
}

/* ---- SequenceConstruct ---- */

static mp_status sq_construct_infer(mp_ctx *c) {
    if (c->n->n_in < 1) return mp_fail(c, "needs at least one input");
    const mp_value *x0 = mp_in(c, 0);
    if (!x0) return mp_fail(c, "input 0 is missing");
    for (int i = 1; i < c->n->n_in; i++) {
        const mp_value *x = mp_in(c, i);
        if (!x) return mp_fail(c, "input %d is missing", i);
        if (x->dtype && x0->dtype && x->dtype != x0->dtype)
            return mp_fail(c, "input %d is %s, input 0 %s: a sequence holds one type", i,
                           mp_dtype_name(x->dtype), mp_dtype_name(x0->dtype));
    }
    if (c->n->n_in > SQ_MAX) return sq_unknown(c, 0, x0->dtype);
    mp_value *el;
    mp_status st = sq_set(c, 0, x0->dtype, c->n->n_in, &el);
    if (st) return st;
    for (int i = 0; i < c->n->n_in; i++) sq_elem(&el[i], mp_in(c, i));
    return MP_OK;
}

/* ---- SequenceInsert, SequenceErase ---- */

static mp_status sq_insert_infer(mp_ctx *c) {
    mp_status st = mp_arity(c, 2, 3);
    if (st) return st;
    const mp_value *s = mp_in(c, 0), *t = mp_in(c, 1);
    if (!s || !t) return mp_fail(c, "needs a sequence and a tensor");
    if (s->dtype && t->dtype && s->dtype != t->dtype)
        return mp_fail(c, "inserts a %s tensor into a sequence of %s", mp_dtype_name(t->dtype),
                       mp_dtype_name(s->dtype));
    int dtype = t->dtype ? t->dtype : s->dtype;
    int64_t pos = -1;
    bool at_end = !mp_in(c, 2);
    if (!s->seq || s->seq->n >= SQ_MAX || (!at_end && !mp_int1(c, 2, &pos)))
        return sq_unknown(c, 0, dtype);
    int n = s->seq->n;
    if (at_end) pos = n;
    if (pos < -n || pos > n)
        return mp_fail(c, "position %lld is outside [-%d, %d] of a sequence of %d", (long long)pos, n, n, n);
    if (pos < 0) pos += n;
    mp_value *el;
    if ((st = sq_set(c, 0, dtype, n + 1, &el))) return st;
    for (int i = 0, j = 0; i <= n; i++) {
        if (i == pos)
            sq_elem(&el[i], t);
        else
            el[i] = s->seq->el[j++];
    }
    return MP_OK;
}

static mp_status sq_erase_infer(mp_ctx *c) {
    mp_status st = mp_arity(c, 1, 2);
    if (st) return st;
    const mp_value *s = mp_in(c, 0);
    if (!s) return mp_fail(c, "needs a sequence");
    int64_t pos = -1;
    if (!s->seq || (mp_in(c, 1) && !mp_int1(c, 1, &pos))) return sq_unknown(c, 0, s->dtype);
    int n = s->seq->n;
    if (pos < -n || pos >= n)
        return mp_fail(c, "position %lld is outside [-%d, %d) of a sequence of %d", (long long)pos, n, n, n);
    if (pos < 0) pos += n;
    mp_value *el;
    if ((st = sq_set(c, 0, s->seq->dtype, n - 1, &el))) return st;
    for (int i = 0, j = 0; i < n; i++)
        if (i != pos) el[j++] = s->seq->el[i];
    return MP_OK;
}

/* ---- SequenceAt, SequenceLength ---- */

static mp_status sq_at_infer(mp_ctx *c) {
    mp_status st = mp_arity(c, 2, 2);
    if (st) return st;
    const mp_value *s = mp_in(c, 0);
    if (!s || !mp_in(c, 1)) return mp_fail(c, "needs a sequence and a position");
    if (!s->seq) return mp_set_out_dtype(c, 0, s->dtype);
    int n = s->seq->n;
    int64_t pos;
    if (mp_int1(c, 1, &pos)) {
        if (pos < -n || pos >= n)
            return mp_fail(c, "position %lld is outside [-%d, %d) of a sequence of %d", (long long)pos, n, n,
                           n);
        return sq_out_elem(c, 0, &s->seq->el[pos < 0 ? pos + n : pos]);
    }
    /* an unknown position: the dims every element agrees on */
    if (n == 0) return mp_fail(c, "reads an element of an empty sequence");
    const mp_value *e0 = &s->seq->el[0];
    if (e0->rank < 0 || e0->rank > MP_MAX_RANK) return mp_set_out_dtype(c, 0, s->seq->dtype);
    int64_t dims[MP_MAX_RANK];
    for (int d = 0; d < e0->rank; d++) dims[d] = e0->dims[d];
    for (int i = 1; i < n; i++) {
        const mp_value *e = &s->seq->el[i];
        if (e->rank != e0->rank) return mp_set_out_dtype(c, 0, s->seq->dtype);
        for (int d = 0; d < e->rank; d++)
            if (e->dims[d] != dims[d]) dims[d] = MP_DIM_ANON;
    }
    return mp_set_out(c, 0, s->seq->dtype, e0->rank, dims);
}

static mp_status sq_length_infer(mp_ctx *c) {
    mp_status st = mp_arity(c, 1, 1);
    if (st) return st;
    const mp_value *s = mp_in(c, 0);
    if (!s) return mp_fail(c, "needs a sequence");
    if ((st = mp_set_out(c, 0, MP_DT_INT64, 0, NULL))) return st;
    if (!s->seq) return MP_OK;
    int64_t n = s->seq->n;
    return mp_set_ints(c, 0, &n, 1);
}

/* ---- SplitToSequence ---- */

static mp_status sq_split_infer(mp_ctx *c) {
    mp_status st = mp_arity(c, 1, 2);
    if (st) return st;
    mp_value *x;
    if ((st = mp_need_in(c, 0, "input", &x))) return st;
    int64_t keepdims = mp_attr_i(c->n, "keepdims", 1);
    const mp_value *sp = mp_in(c, 1);
    if (x->rank < 0) return sq_unknown(c, 0, x->dtype);
    int ax = mp_axis(mp_attr_i(c->n, "axis", 0), x->rank);
    if (ax < 0) return mp_fail(c, "axis %lld is out of range for rank %d", (long long)mp_attr_i(c->n, "axis", 0),
                               x->rank);
    int64_t len = x->dims[ax];
    const int64_t *sv = NULL;
    int64_t ns = 0;
    if (sp && (!mp_ints(c, 1, &sv, &ns) || len < 0)) return sq_unknown(c, 0, x->dtype);
    if (!sp && len < 0) return sq_unknown(c, 0, x->dtype);
    int64_t n, chunk = 1;
    bool scalar = sp && sp->rank == 0;
    if (!sp) {
        n = len;
    } else if (scalar) {
        chunk = sv[0];
        if (chunk <= 0) return mp_fail(c, "split %lld is not positive", (long long)chunk);
        n = len / chunk + (len % chunk ? 1 : 0);
    } else {
        int64_t sum = 0;
        for (int64_t i = 0; i < ns; i++) {
            if (sv[i] < 0 || sv[i] > len)
                return mp_fail(c, "split %lld is outside [0, %lld]", (long long)sv[i], (long long)len);
            sum += sv[i];
        }
        if (sum != len)
            return mp_fail(c, "splits sum to %lld, the axis has %lld", (long long)sum, (long long)len);
        n = ns;
    }
    if (n > SQ_MAX) return sq_unknown(c, 0, x->dtype);
    mp_value *el;
    if ((st = sq_set(c, 0, x->dtype, (int)n, &el))) return st;
    bool squeeze = !sp && !keepdims;
    for (int64_t i = 0, at = 0; i < n; i++) {
        int64_t size = !sp ? 1 : scalar ? (at + chunk <= len ? chunk : len - at) : sv[i];
        at += size;
        int r = squeeze ? x->rank - 1 : x->rank;
        int64_t *dims = r ? mp_scratch(c, sizeof *dims * (size_t)r) : NULL;
        if (r && !dims) return mp_error(MP_ERR_NOMEM, "out of memory");
        for (int d = 0, k = 0; d < x->rank; d++) {
            if (d == ax && squeeze) continue;
            dims[k++] = d == ax ? size : x->dims[d];
        }
        el[i].dtype = x->dtype;
        el[i].rank = r;
        el[i].dims = dims;
        el[i].kn = -1;
        el[i].producer = el[i].outer = -1;
    }
    return MP_OK;
}

/* ---- ConcatFromSequence ---- */

static mp_status sq_concat_infer(mp_ctx *c) {
    mp_status st = mp_arity(c, 1, 1);
    if (st) return st;
    const mp_value *s = mp_in(c, 0);
    if (!s) return mp_fail(c, "needs a sequence");
    int64_t new_axis = mp_attr_i(c->n, "new_axis", 0);
    if (!s->seq) return mp_set_out_dtype(c, 0, s->dtype);
    int n = s->seq->n;
    if (n == 0) return mp_fail(c, "concatenates an empty sequence");
    const mp_value *e0 = &s->seq->el[0];
    for (int i = 0; i < n; i++)
        if (s->seq->el[i].rank < 0) return mp_set_out_dtype(c, 0, s->seq->dtype);
    int r = e0->rank, ro = new_axis ? r + 1 : r;
    if (ro > MP_MAX_RANK) return mp_fail(c, "rank %d is above %d", ro, MP_MAX_RANK);
    int ax = mp_axis(mp_attr_i(c->n, "axis", 0), ro);
    if (ax < 0 || (!new_axis && r == 0))
        return mp_fail(c, "axis %lld is out of range for rank %d", (long long)mp_attr_i(c->n, "axis", 0), ro);
    int64_t dims[MP_MAX_RANK];
    for (int d = 0, k = 0; d < ro; d++) dims[d] = new_axis && d == ax ? n : e0->dims[k++];
    if (!new_axis) dims[ax] = 0;
    for (int i = 0; i < n; i++) {
        const mp_value *e = &s->seq->el[i];
        if (e->rank != r) return mp_fail(c, "element %d has rank %d, element 0 %d", i, e->rank, r);
        for (int d = 0, k = 0; d < ro; d++) {
            if (new_axis && d == ax) continue;
            int64_t v = e->dims[k++];
            if (!new_axis && d == ax) {
                dims[d] = dims[d] < 0 || v < 0 ? MP_DIM_ANON : dims[d] + v;
            } else if (dims[d] < 0) {
                dims[d] = v;
            } else if (v >= 0 && v != dims[d]) {
                return mp_fail(c, "element %d has %lld in dim %d where element 0 has %lld", i, (long long)v,
                               k - 1, (long long)dims[d]);
            }
        }
    }
    return mp_set_out(c, 0, s->seq->dtype, ro, dims);
}

/* ---- the run ----
 *
 * sq_blob: a sequence as one buffer of its elements' dtype (rank 1, as
 * many elements as cover its bytes): a header (SQ_MAGIC, the length n),
 * n entries (rank, dims, the element's offset and bytes), then the
 * elements, each at a 64-byte boundary. Offsets are from the buffer's
 * start, so a copy of the bytes (a Loop's carried value) is the same
 * sequence. Every read checks the header against the buffer's size: a
 * damaged one is an error naming the node, never a read past the end. */

#define SQ_MAGIC INT64_C(0x514553504d) /* "MPSEQ" */
#define SQ_ALIGN 64

typedef struct {
    int64_t magic, n;
} sq_head;

typedef struct {
    int64_t rank, dims[MP_MAX_RANK], off, bytes;
} sq_ent;

typedef struct {
    const void *data;
    int rank;
    const int64_t *dims;
    int dtype;              /* of its elements: the sequence's, or refused */
} sq_src;

static size_t sq_round(size_t n) { return (n + SQ_ALIGN - 1) & ~(size_t)(SQ_ALIGN - 1); }

/* Sequence input i: its header and entries, checked. */
static mp_status sq_read(const mp_kctx *k, int i, const sq_head **h, const sq_ent **e) {
    const mp_rtensor *t = mp_kin(k, i);
    size_t es = t ? mp_kesize(t->dtype) : 0;
    if (!t || !es || t->rank != 1 || t->numel < 0)
        return mp_kfail(k, MP_ERR_FORMAT, "input %d is not a sequence", i);
    size_t size = (size_t)t->numel * es;
    const sq_head *hd = t->data;
    if (size < sizeof *hd || hd->magic != SQ_MAGIC || hd->n < 0 ||
        (uint64_t)hd->n > (size - sizeof *hd) / sizeof(sq_ent))
        return mp_kfail(k, MP_ERR_FORMAT, "input %d is not a sequence", i);
    const sq_ent *en = (const sq_ent *)(hd + 1);
    for (int64_t j = 0; j < hd->n; j++) {
        int64_t numel = 1;
        bool ok = en[j].rank >= 0 && en[j].rank <= MP_MAX_RANK && en[j].off >= 0 && en[j].bytes >= 0 &&
                  (uint64_t)en[j].off <= size && (uint64_t)en[j].bytes <= size - (uint64_t)en[j].off;
        for (int d = 0; ok && d < en[j].rank; d++)
            ok = en[j].dims[d] >= 0 && !__builtin_mul_overflow(numel, en[j].dims[d], &numel);
        if (!ok || (uint64_t)en[j].bytes != mp_dtype_bytes(t->dtype, numel))
            return mp_kfail(k, MP_ERR_FORMAT, "input %d: element %lld of the sequence is damaged", i,
                            (long long)j);
    }
    *h = hd;
    *e = en;
    return MP_OK;
}

/* Output o: the sequence of the n elements src (dtype of the output). */
static mp_status sq_write(mp_kctx *k, int o, int n, const sq_src *src) {
    int dt = k->out[o].dtype;
    size_t es = mp_kesize(dt);
    if (!es) return mp_kfail(k, MP_ERR_UNSUPPORTED, "a sequence of %s cannot run here", mp_dtype_name(dt));
    for (int j = 0; j < n; j++)
        if (src[j].dtype != dt)
            return mp_kfail(k, MP_ERR_FORMAT, "element %d is %s, in a sequence of %s", j, mp_dtype_name(src[j].dtype),
                            mp_dtype_name(dt));
    size_t size = sq_round(sizeof(sq_head) + (size_t)n * sizeof(sq_ent));
    for (int j = 0; j < n; j++) {
        int64_t numel = 1;
        for (int d = 0; d < src[j].rank; d++) numel *= src[j].dims[d];
        size += sq_round((size_t)mp_dtype_bytes(dt, numel));
    }
    int64_t count = (int64_t)((size + es - 1) / es);
    mp_status st = mp_kout_alloc(k, o, 1, &count);
    if (st) return st;
    uint8_t *base = k->out[o].data;
    sq_head *h = (sq_head *)base;
    sq_ent *e = (sq_ent *)(h + 1);
    h->magic = SQ_MAGIC;
    h->n = n;
    size_t at = sq_round(sizeof(sq_head) + (size_t)n * sizeof(sq_ent));
    for (int j = 0; j < n; j++) {
        int64_t numel = 1;
        memset(&e[j], 0, sizeof e[j]);
        e[j].rank = src[j].rank;
        for (int d = 0; d < src[j].rank; d++) numel *= (e[j].dims[d] = src[j].dims[d]);
        e[j].off = (int64_t)at;
        e[j].bytes = (int64_t)mp_dtype_bytes(dt, numel);
        if (e[j].bytes) memmove(base + at, src[j].data, (size_t)e[j].bytes);
        at += sq_round((size_t)e[j].bytes);
    }
    return MP_OK;
}

/* Element j of sequence input i as a source. */
static sq_src sq_el(const mp_kctx *k, int i, const sq_ent *e, int64_t j) {
    sq_src r = {(const uint8_t *)k->in[i].data + e[j].off, (int)e[j].rank, e[j].dims, k->in[i].dtype};
    return r;
}

/* A position input (int32 or int64 scalar) in [-n, n + extra), normalised. */
static mp_status sq_kpos(const mp_kctx *k, int i, int64_t n, int64_t extra, int64_t def, int64_t *pos) {
    int64_t p = def;
    if (mp_kin(k, i) && mp_kints(&k->in[i], &p, 1) != 1)
        return mp_kfail(k, MP_ERR_FORMAT, "input %d: a position is one integer", i);
    if (p < -n || p >= n + extra)
        return mp_kfail(k, MP_ERR_SHAPE, "position %lld is outside the sequence of %lld", (long long)p,
                        (long long)n);
    *pos = p < 0 ? p + n : p;
    return MP_OK;
}

static sq_src sq_tensor(const mp_rtensor *t) {
    sq_src r = {t->data, t->rank, t->dims, t->dtype};
    return r;
}

static mp_status sqk_empty(mp_kctx *k) { return sq_write(k, 0, 0, NULL); }

static mp_status sqk_construct(mp_kctx *k) {
    sq_src *src = malloc(sizeof *src * (size_t)(k->n_in ? k->n_in : 1));
    if (!src) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < k->n_in; i++) src[i] = sq_tensor(&k->in[i]);
    mp_status st = sq_write(k, 0, k->n_in, src);
    free(src);
    return st;
}

/* Insert (t: the tensor) or erase (t NULL) at the position input. */
static mp_status sq_edit(mp_kctx *k, const mp_rtensor *t, int pos_in) {
    const sq_head *h;
    const sq_ent *e;
    mp_status st = sq_read(k, 0, &h, &e);
    if (st) return st;
    if (!t && h->n == 0) return mp_kfail(k, MP_ERR_SHAPE, "erases from an empty sequence");
    int64_t pos;
    if ((st = sq_kpos(k, pos_in, h->n, t ? 1 : 0, t ? h->n : -1, &pos))) return st;
    int64_t n = t ? h->n + 1 : h->n - 1;
    sq_src *src = malloc(sizeof *src * (size_t)(n ? n : 1));
    if (!src) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t j = 0, w = 0; j <= h->n; j++) {
        if (j == pos && t) src[w++] = sq_tensor(t);
        if (j < h->n && (t || j != pos)) src[w++] = sq_el(k, 0, e, j);
    }
    st = sq_write(k, 0, (int)n, src);
    free(src);
    return st;
}

static mp_status sqk_insert(mp_kctx *k) { return sq_edit(k, &k->in[1], 2); }
static mp_status sqk_erase(mp_kctx *k) { return sq_edit(k, NULL, 1); }

static mp_status sqk_at(mp_kctx *k) {
    const sq_head *h;
    const sq_ent *e;
    mp_status st = sq_read(k, 0, &h, &e);
    int64_t pos;
    if (st || (st = sq_kpos(k, 1, h->n, 0, 0, &pos))) return st;
    if ((st = mp_kout_shape(k, 0, (int)e[pos].rank, e[pos].dims))) return st;
    if (e[pos].bytes) memcpy(k->out[0].data, (const uint8_t *)k->in[0].data + e[pos].off, (size_t)e[pos].bytes);
    return MP_OK;
}

static mp_status sqk_length(mp_kctx *k) {
    const sq_head *h;
    const sq_ent *e;
    mp_status st = sq_read(k, 0, &h, &e);
    if (st || (st = mp_kout_shape(k, 0, 0, NULL))) return st;
    mp_kset_i(k->out[0].data, k->out[0].dtype, 0, h->n);
    return MP_OK;
}

static mp_status sqk_split(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    int ax = mp_axis(mp_attr_i(k->n, "axis", 0), x->rank);
    size_t es = mp_kesize(x->dtype);
    if (ax < 0 || !es) return mp_kfail(k, MP_ERR_SHAPE, "axis or dtype out of range");
    int64_t len = x->dims[ax], outer, inner;
    mp_kouter_inner(x->rank, x->dims, ax, &outer, &inner);
    int64_t sv[SQ_MAX], n;
    const mp_rtensor *sp = mp_kin(k, 1);
    bool squeeze = !sp && !mp_attr_i(k->n, "keepdims", 1);
    if (!sp) {
        n = len;
        for (int64_t i = 0; i < n && i < SQ_MAX; i++) sv[i] = 1;
    } else if (sp->rank == 0) {
        int64_t c = 0;
        mp_kints(sp, &c, 1);
        if (c <= 0) return mp_kfail(k, MP_ERR_SHAPE, "split %lld is not positive", (long long)c);
        n = len / c + (len % c ? 1 : 0);
        for (int64_t i = 0; i < n && i < SQ_MAX; i++) sv[i] = i * c + c <= len ? c : len - i * c;
    } else {
        n = mp_kints(sp, sv, SQ_MAX);
        int64_t sum = 0;
        for (int64_t i = 0; i < n; i++) {
            if (sv[i] < 0 || sv[i] > len) return mp_kfail(k, MP_ERR_SHAPE, "split %lld out of range", (long long)sv[i]);
            sum += sv[i];
        }
        if (sum != len || sp->numel != n) return mp_kfail(k, MP_ERR_SHAPE, "the splits do not sum to the axis");
    }
    if (n > SQ_MAX) return mp_kfail(k, MP_ERR_LIMIT, "a sequence of more than %d elements", SQ_MAX);
    /* the pieces, each copied out contiguous, then written as a sequence */
    sq_src *src = calloc((size_t)(n ? n : 1), sizeof *src);
    int64_t *dims = calloc((size_t)(n ? n : 1) * MP_MAX_RANK, sizeof *dims);
    uint8_t *buf = malloc((size_t)mp_dtype_bytes(x->dtype, x->numel) + 1);
    mp_status st = src && dims && buf ? MP_OK : mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    size_t row = (size_t)inner * es, at = 0;
    for (int64_t i = 0, start = 0; !st && i < n; start += sv[i], i++) {
        int r = 0;
        for (int d = 0; d < x->rank; d++) {
            if (d == ax && squeeze) continue;
            dims[i * MP_MAX_RANK + r++] = d == ax ? sv[i] : x->dims[d];
        }
        src[i] = (sq_src){buf + at, r, &dims[i * MP_MAX_RANK], x->dtype};
        for (int64_t o = 0; o < outer; o++, at += (size_t)sv[i] * row)
            memcpy(buf + at, (const uint8_t *)x->data + ((size_t)(o * len + start)) * row, (size_t)sv[i] * row);
    }
    if (!st) st = sq_write(k, 0, (int)n, src);
    free(src);
    free(dims);
    free(buf);
    return st;
}

static mp_status sqk_concat(mp_kctx *k) {
    const sq_head *h;
    const sq_ent *e;
    mp_status st = sq_read(k, 0, &h, &e);
    if (st) return st;
    if (h->n == 0) return mp_kfail(k, MP_ERR_SHAPE, "concatenates an empty sequence");
    bool stack = mp_attr_i(k->n, "new_axis", 0) != 0;
    int r = (int)e[0].rank, ro = stack ? r + 1 : r;
    int ax = mp_axis(mp_attr_i(k->n, "axis", 0), ro);
    size_t es = mp_kesize(k->in[0].dtype);
    if (ax < 0 || ro > MP_MAX_RANK || (!stack && r == 0)) return mp_kfail(k, MP_ERR_SHAPE, "axis out of range");
    int64_t dims[MP_MAX_RANK], outer, inner;
    for (int d = 0, j = 0; d < ro; d++) dims[d] = stack && d == ax ? 1 : e[0].dims[j++];
    int64_t total = 0;
    for (int64_t i = 0; i < h->n; i++) {
        if (e[i].rank != r) return mp_kfail(k, MP_ERR_SHAPE, "element %lld has another rank", (long long)i);
        for (int d = 0, j = 0; d < ro; d++) {
            int64_t v = stack && d == ax ? 1 : e[i].dims[j++];
            if (d == ax) total += v;
            else if (v != dims[d]) return mp_kfail(k, MP_ERR_SHAPE, "element %lld has another shape", (long long)i);
        }
    }
    mp_kouter_inner(ro, dims, ax, &outer, &inner);
    dims[ax] = total;
    if ((st = mp_kout_shape(k, 0, ro, dims))) return st;
    uint8_t *out = k->out[0].data;
    size_t row = (size_t)inner * es;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < h->n; i++) {
            int64_t len = stack ? 1 : e[i].dims[ax];
            size_t chunk = (size_t)len * row;
            memcpy(out, (const uint8_t *)k->in[0].data + e[i].off + (size_t)o * chunk, chunk);
            out += chunk;
        }
    return MP_OK;
}

const mp_op mp_ops_sequence[] = {
    {"", "SequenceEmpty", 11, sq_empty_infer, mp_cost_zero, 0, 0, NULL, sqk_empty},
    {"", "SequenceConstruct", 11, sq_construct_infer, mp_cost_zero, 0, 0, NULL, sqk_construct},
    {"", "SequenceInsert", 11, sq_insert_infer, mp_cost_zero, 0, 0, NULL, sqk_insert},
    {"", "SequenceErase", 11, sq_erase_infer, mp_cost_zero, 0, 0, NULL, sqk_erase},
    {"", "SequenceAt", 11, sq_at_infer, mp_cost_zero, 0, 0, NULL, sqk_at},
    {"", "SequenceLength", 11, sq_length_infer, mp_cost_zero, 0, 0, NULL, sqk_length},
    {"", "SplitToSequence", 11, sq_split_infer, mp_cost_zero, 0, 0, NULL, sqk_split},
    {"", "ConcatFromSequence", 11, sq_concat_infer, mp_cost_zero, 0, 0, NULL, sqk_concat},
};
const int mp_ops_sequence_count = (int)MP_ARRAY_LEN(mp_ops_sequence);
