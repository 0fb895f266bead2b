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
 * out of a sequence. */
#include "ops/ops.h"

#include <string.h>

#define SQ_MAX 4096 /* longer sequences are followed as unknown */

/* An output that is a known sequence of n elements of type dtype (el:
 * scratch the caller fills). */
static mp_status sq_set(mp_ctx *c, int o, int dtype, int n, mp_value **el) {
    mp_status st = mp_set_out_dtype(c, o, dtype);
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
    if (c->n->n_in > SQ_MAX) return mp_set_out_dtype(c, 0, x0->dtype);
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
        return mp_set_out_dtype(c, 0, dtype);
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
    if (!s->seq || (mp_in(c, 1) && !mp_int1(c, 1, &pos))) return mp_set_out_dtype(c, 0, s->dtype);
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
    if (x->rank < 0) return mp_set_out_dtype(c, 0, x->dtype);
    int ax = mp_axis(mp_attr_i(c->n, "axis", 0), x->rank);
    if (ax < 0) return mp_fail(c, "axis %lld is out of range for rank %d", (long long)mp_attr_i(c->n, "axis", 0),
                               x->rank);
    int64_t len = x->dims[ax];
    const int64_t *sv = NULL;
    int64_t ns = 0;
    if (sp && (!mp_ints(c, 1, &sv, &ns) || len < 0)) return mp_set_out_dtype(c, 0, x->dtype);
    if (!sp && len < 0) return mp_set_out_dtype(c, 0, x->dtype);
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
    if (n > SQ_MAX) return mp_set_out_dtype(c, 0, x->dtype);
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

const mp_op mp_ops_sequence[] = {
    {"", "SequenceEmpty", 11, sq_empty_infer, mp_cost_zero, 0, 0},
    {"", "SequenceConstruct", 11, sq_construct_infer, mp_cost_zero, 0, 0},
    {"", "SequenceInsert", 11, sq_insert_infer, mp_cost_zero, 0, 0},
    {"", "SequenceErase", 11, sq_erase_infer, mp_cost_zero, 0, 0},
    {"", "SequenceAt", 11, sq_at_infer, mp_cost_zero, 0, 0},
    {"", "SequenceLength", 11, sq_length_infer, mp_cost_zero, 0, 0},
    {"", "SplitToSequence", 11, sq_split_infer, mp_cost_zero, 0, 0},
    {"", "ConcatFromSequence", 11, sq_concat_infer, mp_cost_zero, 0, 0},
};
const int mp_ops_sequence_count = (int)MP_ARRAY_LEN(mp_ops_sequence);
