/* Control flow in the measured run: If, Loop and Scan run their bodies
 * through plans of their own (mp_subexec_create), made once when the
 * node is prepared: the body's inputs are buffers the kernel fills before
 * each pass of the body, its outer values are the enclosing plan's. A body
 * whose values change shape from one pass to the next (a loop-carried
 * value that grows) is refused with a message: its plan could not hold
 * it. */
#include "run/run.h"

#include <stdio.h>
#include <stdlib.h>

#define MP__MAX_TRIPS (1 << 20) /* a loop that never stops is an error, not a hang */

static const mp_graph *mp__attr_graph(const mp_node *n, const char *name) {
    const mp_attr *a = mp_node_attr(n, name);
    return a && a->type == MP_ATTR_GRAPH ? a->g : NULL;
}

static const char *mp__nm(const mp_node *n) { return n->name && n->name[0] ? n->name : n->op; }

static mp_rval *mp__body_in(mp_exec *b, int i) { return &b->vals[b->g->inputs[i]]; }
static mp_rval *mp__body_out(mp_exec *b, int i) { return &b->vals[b->g->outputs[i]]; }

static size_t mp__bytes(const mp_rtensor *t) {
    return t->numel > 0 ? (size_t)mp_dtype_bytes(t->dtype, t->numel) : 0;
}

/* Copy tensor src into node output o: into its planned buffer (same
 * element count) or a buffer shaped now (an output shaped at run time). */
static mp_status mp__put_out(mp_kctx *k, int o, const mp_rtensor *src) {
    if (o >= k->n_out || k->n->out[o] < 0) return MP_OK;
    mp_rtensor *dst = &k->out[o];
    if (src->dtype != dst->dtype)
        return mp_error(MP_ERR_SHAPE, "node '%s': output %d: the body gives %s, the node has %s",
                        mp__nm(k->n), o, mp_dtype_name(src->dtype), mp_dtype_name(dst->dtype));
    if (!dst->data) {
        mp_status st = mp_kout_alloc(k, o, src->rank, src->dims);
        if (st) return st;
    } else if (dst->numel != src->numel) {
        return mp_error(MP_ERR_SHAPE, "node '%s': output %d: the body gives %lld elements, the plan has %lld",
                        mp__nm(k->n), o, (long long)src->numel, (long long)dst->numel);
    }
    size_t b = mp__bytes(src);
    if (b && dst->data != src->data) memmove(dst->data, src->data, b);
    return MP_OK;
}

/* Fill body input i from src (same dtype and element count as planned). */
static mp_status mp__put_in(const mp_node *n, mp_exec *b, int i, const mp_rtensor *src) {
    if (i >= b->g->n_inputs) return MP_OK;
    mp_rval *rv = mp__body_in(b, i);
    if (rv->kind == MP_RV_DYN) return mp_subexec_set_input(b, i, src); /* shaped at each pass */
    if (rv->kind != MP_RV_INPUT) return MP_OK; /* unused by the body */
    if (src->dtype != rv->rt.dtype || src->numel != rv->rt.numel)
        return mp_error(MP_ERR_UNSUPPORTED, "node '%s': body input %d is %s with %lld elements here, "
                        "%s with %lld when planned (a value that changes shape between iterations "
                        "cannot run here)", mp__nm(n), i, mp_dtype_name(src->dtype), (long long)src->numel,
                        mp_dtype_name(rv->rt.dtype), (long long)rv->rt.numel);
    size_t by = mp__bytes(src);
    if (by && rv->rt.data != src->data) memmove(rv->rt.data, src->data, by);
    return MP_OK;
}

/* A body input that holds this run's value: a planned one, or one shaped
 * at a pass (DYN) once a pass gave it */
static bool mp__given(const mp_rval *in) {
    return in->kind == MP_RV_INPUT || (in->kind == MP_RV_DYN && in->rt.data);
}

static mp_status mp__body_run(mp_exec *b) {
    mp_subexec_bind_outer(b);
    return mp_exec_run_timed(b, NULL);
}

static void mp__free_bodies(void *state) {
    mp_exec **b = state;
    if (!b) return;
    for (int i = 0; i < 2; i++) mp_exec_free(b[i]);
    free(b);
}

static mp_status mp__need_body(mp_kctx *k, const char *attr, mp_exec **out) {
    const mp_graph *g = mp__attr_graph(k->n, attr);
    if (!g) return mp_error(MP_ERR_FORMAT, "node '%s': no '%s' graph", mp__nm(k->n), attr);
    if (!k->ex) return mp_error(MP_ERR_USAGE, "node '%s': control flow runs inside a plan", mp__nm(k->n));
    mp_status st = mp_subexec_create(k->ex, (mp_graph *)g, k->fuse, out);
    if (st) {
        char inner[512];
        snprintf(inner, sizeof inner, "%s", mp_last_error());
        return mp_error(st, "node '%s' (%s): its %s cannot run: %s", mp__nm(k->n), k->n->op, attr, inner);
    }
    return MP_OK;
}

/* ---- If ---- */

static mp_status mp__if_prepare(mp_kctx *k, size_t *scratch) {
    mp_exec **b = calloc(2, sizeof *b);
    if (!b) return mp_error(MP_ERR_NOMEM, "out of memory");
    k->state = b;
    mp_status st = mp__need_body(k, "then_branch", &b[0]);
    if (!st) st = mp__need_body(k, "else_branch", &b[1]);
    for (int i = 0; !st && i < 2; i++)
        if (b[i]->g->n_outputs < k->n_out)
            st = mp_error(MP_ERR_FORMAT, "node '%s': a branch has %d outputs for %d", mp__nm(k->n),
                          b[i]->g->n_outputs, k->n_out);
    return st;
}

static mp_status mp__if_run(mp_kctx *k) {
    mp_exec **b = k->state;
    if (!k->in[0].data || k->in[0].numel < 1)
        return mp_error(MP_ERR_SHAPE, "node '%s': the condition is empty", mp__nm(k->n));
    mp_exec *br = *(const uint8_t *)k->in[0].data ? b[0] : b[1];
    mp_status st = mp__body_run(br);
    for (int o = 0; !st && o < k->n_out; o++) st = mp__put_out(k, o, &mp__body_out(br, o)->rt);
    return st;
}

/* ---- Loop ---- */

typedef struct {
    mp_exec *body[2];   /* [0] the body; [1] unused (freed alike) */
    uint8_t **scan;     /* per scan output: the stacked values so far */
    size_t *scan_cap;
} mp__loop;

static void mp__loop_release(void *state) {
    mp__loop *l = state;
    if (!l) return;
    int ns = 0;
    if (l->body[0]) ns = l->body[0]->g->n_outputs;
    for (int i = 0; l->scan && i < ns; i++) free(l->scan[i]);
    free(l->scan);
    free(l->scan_cap);
    mp_exec_free(l->body[0]);
    free(l);
}

static mp_status mp__loop_prepare(mp_kctx *k, size_t *scratch) {
    mp__loop *l = calloc(1, sizeof *l);
    if (!l) return mp_error(MP_ERR_NOMEM, "out of memory");
    k->state = l;
    mp_status st = mp__need_body(k, "body", &l->body[0]);
    if (st) return st;
    const mp_graph *g = l->body[0]->g;
    int n_carried = k->n->n_in - 2;
    if (n_carried < 0 || g->n_inputs != n_carried + 2 || g->n_outputs < n_carried + 1)
        return mp_error(MP_ERR_FORMAT, "node '%s': the body's inputs and outputs do not match the Loop's",
                        mp__nm(k->n));
    l->scan = calloc((size_t)g->n_outputs + 1, sizeof *l->scan);
    l->scan_cap = calloc((size_t)g->n_outputs + 1, sizeof *l->scan_cap);
    if (!l->scan || !l->scan_cap) return mp_error(MP_ERR_NOMEM, "out of memory");
    return MP_OK;
}

static mp_status mp__loop_run(mp_kctx *k) {
    mp__loop *l = k->state;
    mp_exec *b = l->body[0];
    const mp_node *n = k->n;
    int n_carried = n->n_in - 2, n_scan = b->g->n_outputs - 1 - n_carried;
    int64_t trips = INT64_MAX;
    if (k->in[0].data && k->in[0].numel >= 1 && k->in[0].dtype == MP_DT_INT64)
        trips = *(const int64_t *)k->in[0].data;
    bool cond = true;
    if (k->n_in > 1 && k->in[1].data && k->in[1].numel >= 1) cond = *(const uint8_t *)k->in[1].data != 0;
    mp_status st = MP_OK;
    for (int c = 0; !st && c < n_carried; c++) st = mp__put_in(n, b, c + 2, &k->in[c + 2]);
    int64_t it = 0;
    size_t scan_bytes[64] = {0};
    if (n_scan > 64) return mp_error(MP_ERR_UNSUPPORTED, "node '%s': more than 64 scan outputs", mp__nm(n));
    for (; !st && it < trips && cond; it++) {
        if (it >= MP__MAX_TRIPS)
            return mp_error(MP_ERR_LIMIT, "node '%s': Loop ran %d iterations without stopping", mp__nm(n),
                            MP__MAX_TRIPS);
        mp_rval *iv = mp__body_in(b, 0), *cv = mp__body_in(b, 1);
        if (iv->kind == MP_RV_INPUT && iv->rt.numel >= 1 && iv->rt.dtype == MP_DT_INT64)
            *(int64_t *)iv->rt.data = it;
        if (cv->kind == MP_RV_INPUT && cv->rt.numel >= 1 && cv->rt.dtype == MP_DT_BOOL)
            *(uint8_t *)cv->rt.data = cond;
        if ((st = mp__body_run(b))) break;
        const mp_rtensor *co = &mp__body_out(b, 0)->rt;
        cond = co->data && co->numel >= 1 && co->dtype == MP_DT_BOOL ? *(const uint8_t *)co->data != 0 : false;
        for (int c = 0; !st && c < n_carried; c++) st = mp__put_in(n, b, c + 2, &mp__body_out(b, 1 + c)->rt);
        for (int s = 0; !st && s < n_scan; s++) {
            const mp_rtensor *so = &mp__body_out(b, 1 + n_carried + s)->rt;
            size_t by = mp__bytes(so), need = (size_t)(it + 1) * by;
            if (it > 0 && by != scan_bytes[s] / (size_t)it)
                return mp_error(MP_ERR_UNSUPPORTED, "node '%s': scan output %d changes size between "
                                "iterations", mp__nm(n), s);
            if (need > l->scan_cap[s]) {
                size_t cap = need * 2 > 4096 ? need * 2 : 4096;
                uint8_t *nb = realloc(l->scan[s], cap);
                if (!nb) return mp_error(MP_ERR_NOMEM, "node '%s': out of memory", mp__nm(n));
                l->scan[s] = nb;
                l->scan_cap[s] = cap;
            }
            if (by) memcpy(l->scan[s] + (size_t)it * by, so->data, by);
            scan_bytes[s] = need;
        }
    }
    if (st) return st;
    /* finals: the last carried values (the initial ones when no pass ran) */
    for (int c = 0; !st && c < n_carried; c++) {
        const mp_rval *in = mp__body_in(b, c + 2);
        st = mp__put_out(k, c, mp__given(in) ? &in->rt : &k->in[c + 2]);
    }
    for (int s = 0; !st && s < n_scan; s++) {
        const mp_rtensor *so = &mp__body_out(b, 1 + n_carried + s)->rt;
        int64_t dims[MP_MAX_RANK];
        if (so->rank + 1 > MP_MAX_RANK) return mp_error(MP_ERR_UNSUPPORTED, "node '%s': rank", mp__nm(n));
        dims[0] = it;
        for (int d = 0; d < so->rank; d++) dims[d + 1] = so->dims[d];
        mp_rtensor t = *so;
        t.rank = so->rank + 1;
        t.dims = dims;
        t.numel = it * so->numel;
        t.data = l->scan[s];
        st = mp__put_out(k, n_carried + s, &t);
    }
    return st;
}

/* ---- Scan (opset 9 and later) ---- */

typedef struct {
    mp_exec *body;
    int n_state, n_in_scan, n_out_scan;
    int64_t in_axis[64], in_dir[64], out_axis[64], out_dir[64];
} mp__scan;

static void mp__scan_release(void *state) {
    mp__scan *sc = state;
    if (!sc) return;
    mp_exec_free(sc->body);
    free(sc);
}

static void mp__ints_or(const mp_node *n, const char *name, int count, int64_t *out) {
    const int64_t *v = NULL;
    int c = mp_attr_ints(n, name, &v);
    for (int i = 0; i < count; i++) out[i] = (c > i && v) ? v[i] : 0;
}

static mp_status mp__scan_prepare(mp_kctx *k, size_t *scratch) {
    mp__scan *sc = calloc(1, sizeof *sc);
    if (!sc) return mp_error(MP_ERR_NOMEM, "out of memory");
    k->state = sc;
    const mp_node *n = k->n;
    sc->n_in_scan = (int)mp_attr_i(n, "num_scan_inputs", 0);
    sc->n_state = n->n_in - sc->n_in_scan;
    sc->n_out_scan = n->n_out - sc->n_state;
    if (sc->n_in_scan < 1 || sc->n_state < 0 || sc->n_out_scan < 0 || sc->n_in_scan > 64 || sc->n_out_scan > 64)
        return mp_error(MP_ERR_FORMAT, "node '%s': num_scan_inputs does not fit the inputs", mp__nm(n));
    mp__ints_or(n, "scan_input_axes", sc->n_in_scan, sc->in_axis);
    mp__ints_or(n, "scan_input_directions", sc->n_in_scan, sc->in_dir);
    mp__ints_or(n, "scan_output_axes", sc->n_out_scan, sc->out_axis);
    mp__ints_or(n, "scan_output_directions", sc->n_out_scan, sc->out_dir);
    mp_status st = mp__need_body(k, "body", &sc->body);
    if (st) return st;
    const mp_graph *g = sc->body->g;
    if (g->n_inputs != n->n_in || g->n_outputs != n->n_out)
        return mp_error(MP_ERR_FORMAT, "node '%s': the body's inputs and outputs do not match the Scan's",
                        mp__nm(n));
    return MP_OK;
}

static mp_status mp__scan_run(mp_kctx *k) {
    mp__scan *sc = k->state;
    mp_exec *b = sc->body;
    const mp_node *n = k->n;
    int ns = sc->n_state;
    mp_status st = MP_OK;
    for (int i = 0; !st && i < ns; i++) st = mp__put_in(n, b, i, &k->in[i]);
    if (st) return st;
    int64_t len = -1;
    for (int j = 0; j < sc->n_in_scan; j++) {
        const mp_rtensor *x = &k->in[ns + j];
        int a = mp_axis(sc->in_axis[j], x->rank);
        if (a < 0 || !x->data) return mp_error(MP_ERR_SHAPE, "node '%s': scan input %d: bad axis", mp__nm(n), j);
        if (len >= 0 && x->dims[a] != len)
            return mp_error(MP_ERR_SHAPE, "node '%s': scan inputs of different lengths", mp__nm(n));
        len = x->dims[a];
    }
    /* scan outputs: planned (shape known), else shaped now from the body's */
    for (int j = 0; j < sc->n_out_scan; j++) {
        const mp_rtensor *so = &mp__body_out(b, ns + j)->rt;
        int o = ns + j, a = mp_axis(sc->out_axis[j], so->rank + 1);
        if (a < 0) return mp_error(MP_ERR_SHAPE, "node '%s': scan output %d: bad axis", mp__nm(n), j);
        if (!k->out[o].data && n->out[o] >= 0) {
            int64_t dims[MP_MAX_RANK];
            if (so->rank + 1 > MP_MAX_RANK) return mp_error(MP_ERR_UNSUPPORTED, "node '%s': rank", mp__nm(n));
            for (int d = 0, s = 0; d < so->rank + 1; d++) dims[d] = d == a ? len : so->dims[s++];
            if ((st = mp_kout_alloc(k, o, so->rank + 1, dims))) return st;
        }
        if (n->out[o] >= 0 && k->out[o].numel != len * so->numel)
            return mp_error(MP_ERR_SHAPE, "node '%s': scan output %d has %lld elements for %lld", mp__nm(n), j,
                            (long long)k->out[o].numel, (long long)(len * so->numel));
    }
    for (int64_t t = 0; t < len; t++) {
        for (int j = 0; j < sc->n_in_scan; j++) {
            const mp_rtensor *x = &k->in[ns + j];
            mp_rval *dst = mp__body_in(b, ns + j);
            if (dst->kind != MP_RV_INPUT) continue;
            int a = mp_axis(sc->in_axis[j], x->rank);
            int64_t ti = sc->in_dir[j] ? len - 1 - t : t, outer = 1, inner = 1;
            for (int d = 0; d < a; d++) outer *= x->dims[d];
            for (int d = a + 1; d < x->rank; d++) inner *= x->dims[d];
            if (dst->rt.numel != outer * inner || dst->rt.dtype != x->dtype)
                return mp_error(MP_ERR_UNSUPPORTED, "node '%s': scan input %d's slice does not match the "
                                "body's planned input", mp__nm(n), j);
            size_t eb = (size_t)mp_dtype_bytes(x->dtype, 1), ib = (size_t)inner * eb;
            for (int64_t o = 0; o < outer; o++)
                memcpy((uint8_t *)dst->rt.data + (size_t)o * ib,
                       (const uint8_t *)x->data + ((size_t)o * (size_t)len + (size_t)ti) * ib, ib);
        }
        if ((st = mp__body_run(b))) return st;
        for (int i = 0; !st && i < ns; i++) st = mp__put_in(n, b, i, &mp__body_out(b, i)->rt);
        if (st) return st;
        for (int j = 0; j < sc->n_out_scan; j++) {
            int o = ns + j;
            if (n->out[o] < 0) continue;
            const mp_rtensor *so = &mp__body_out(b, o)->rt;
            int a = mp_axis(sc->out_axis[j], so->rank + 1);
            int64_t ti = sc->out_dir[j] ? len - 1 - t : t, outer = 1, inner = 1;
            for (int d = 0; d < a; d++) outer *= so->dims[d];
            for (int d = a; d < so->rank; d++) inner *= so->dims[d];
            size_t eb = (size_t)mp_dtype_bytes(so->dtype, 1), ib = (size_t)inner * eb;
            for (int64_t q = 0; q < outer; q++)
                memcpy((uint8_t *)k->out[o].data + ((size_t)q * (size_t)len + (size_t)ti) * ib,
                       (const uint8_t *)so->data + (size_t)q * ib, ib);
        }
    }
    /* final states: the last ones (the initial ones when len is 0) */
    for (int i = 0; !st && i < ns; i++) {
        const mp_rval *in = mp__body_in(b, i);
        st = mp__put_out(k, i, mp__given(in) ? &in->rt : &k->in[i]);
    }
    return st;
}

/* ---- Scan, opset 8: a batch axis 0 before the sequence axis 1, an
 * optional sequence_lens first input, `directions` for the scan inputs ---- */

static mp_status mp__scan8_prepare(mp_kctx *k, size_t *scratch) {
    mp__scan *sc = calloc(1, sizeof *sc);
    if (!sc) return mp_error(MP_ERR_NOMEM, "out of memory");
    k->state = sc;
    const mp_node *n = k->n;
    sc->n_in_scan = (int)mp_attr_i(n, "num_scan_inputs", 0);
    sc->n_state = n->n_in - 1 - sc->n_in_scan;
    sc->n_out_scan = n->n_out - sc->n_state;
    if (sc->n_in_scan < 1 || sc->n_state < 0 || sc->n_out_scan < 0 || sc->n_in_scan > 64)
        return mp_error(MP_ERR_FORMAT, "node '%s': num_scan_inputs does not fit the inputs", mp__nm(n));
    mp__ints_or(n, "directions", sc->n_in_scan, sc->in_dir);
    mp_status st = mp__need_body(k, "body", &sc->body);
    if (st) return st;
    if (sc->body->g->n_inputs != n->n_in - 1 || sc->body->g->n_outputs != n->n_out)
        return mp_error(MP_ERR_FORMAT, "node '%s': the body's inputs and outputs do not match the Scan's",
                        mp__nm(n));
    return MP_OK;
}

static mp_status mp__scan8_run(mp_kctx *k) {
    mp__scan *sc = k->state;
    mp_exec *b = sc->body;
    const mp_node *n = k->n;
    int ns = sc->n_state, first = ns + 1;
    if (sc->n_in_scan < 1 || !k->in[first].data || k->in[first].rank < 2)
        return mp_error(MP_ERR_SHAPE, "node '%s': scan inputs need a batch and a sequence axis", mp__nm(n));
    int64_t batch = k->in[first].dims[0], seq = k->in[first].dims[1];
    const int64_t *lens = k->in[0].data && k->in[0].dtype == MP_DT_INT64 && k->in[0].numel == batch
                              ? k->in[0].data : NULL;
    for (int o = 0; o < k->n_out; o++) {
        if (n->out[o] < 0) continue;
        const mp_rtensor *bo = &mp__body_out(b, o)->rt;
        int64_t per = o < ns ? batch : batch * seq;
        if (!k->out[o].data) {
            int64_t dims[MP_MAX_RANK];
            int r = 0;
            if (bo->rank + 2 > MP_MAX_RANK) return mp_error(MP_ERR_UNSUPPORTED, "node '%s': rank", mp__nm(n));
            dims[r++] = batch;
            if (o >= ns) dims[r++] = seq;
            for (int d = 0; d < bo->rank; d++) dims[r++] = bo->dims[d];
            mp_status st = mp_kout_alloc(k, o, r, dims);
            if (st) return st;
        }
        if (k->out[o].numel != per * bo->numel)
            return mp_error(MP_ERR_SHAPE, "node '%s': output %d has %lld elements for %lld", mp__nm(n), o,
                            (long long)k->out[o].numel, (long long)(per * bo->numel));
        if (o >= ns) memset(k->out[o].data, 0, mp__bytes(&k->out[o])); /* past a sequence's length */
    }
    mp_status st = MP_OK;
    for (int64_t bi = 0; bi < batch && !st; bi++) {
        for (int i = 0; i < ns && !st; i++) { /* this batch entry's initial state */
            mp_rtensor t = k->in[1 + i];
            if (t.rank < 1 || t.dims[0] != batch) return mp_error(MP_ERR_SHAPE, "node '%s': state %d", mp__nm(n), i);
            t.numel /= batch;
            t.data = (uint8_t *)t.data + (size_t)bi * mp__bytes(&t);
            st = mp__put_in(n, b, i, &t);
        }
        int64_t len = lens ? lens[bi] : seq;
        if (len < 0 || len > seq) return mp_error(MP_ERR_SHAPE, "node '%s': sequence length %lld", mp__nm(n),
                                                  (long long)len);
        for (int64_t t = 0; t < len && !st; t++) {
            for (int j = 0; j < sc->n_in_scan; j++) {
                const mp_rtensor *x = &k->in[first + j];
                mp_rval *dst = mp__body_in(b, ns + j);
                if (dst->kind != MP_RV_INPUT) continue;
                if (x->rank < 2 || x->dims[0] != batch || x->dims[1] != seq)
                    return mp_error(MP_ERR_SHAPE, "node '%s': scan input %d", mp__nm(n), j);
                int64_t ti = sc->in_dir[j] ? len - 1 - t : t, inner = x->numel / (batch * seq);
                if (dst->rt.numel != inner || dst->rt.dtype != x->dtype)
                    return mp_error(MP_ERR_UNSUPPORTED, "node '%s': scan input %d's slice does not match the "
                                    "body's planned input", mp__nm(n), j);
                size_t ib = mp__bytes(&dst->rt);
                memcpy(dst->rt.data, (const uint8_t *)x->data + ((size_t)bi * (size_t)seq + (size_t)ti) * ib, ib);
            }
            if ((st = mp__body_run(b))) return st;
            for (int i = 0; !st && i < ns; i++) st = mp__put_in(n, b, i, &mp__body_out(b, i)->rt);
            for (int o = ns; !st && o < k->n_out; o++) {
                if (n->out[o] < 0) continue;
                const mp_rtensor *so = &mp__body_out(b, o)->rt;
                size_t ob = mp__bytes(so);
                memcpy((uint8_t *)k->out[o].data + ((size_t)bi * (size_t)seq + (size_t)t) * ob, so->data, ob);
            }
        }
        for (int i = 0; !st && i < ns; i++) { /* this batch entry's final state */
            if (n->out[i] < 0) continue;
            const mp_rval *in = mp__body_in(b, i);
            mp_rtensor src = k->in[1 + i];
            src.numel /= batch;
            src.data = (uint8_t *)src.data + (size_t)bi * mp__bytes(&src);
            const mp_rtensor *from = mp__given(in) ? &in->rt : &src;
            size_t by = mp__bytes(from);
            if (k->out[i].numel != batch * from->numel)
                return mp_error(MP_ERR_SHAPE, "node '%s': state output %d", mp__nm(n), i);
            memcpy((uint8_t *)k->out[i].data + (size_t)bi * by, from->data, by);
        }
    }
    return st;
}

static const mp_kernel mp__if_kernel = {"control:if", mp__if_prepare, mp__if_run, mp__free_bodies};
static const mp_kernel mp__loop_kernel = {"control:loop", mp__loop_prepare, mp__loop_run, mp__loop_release};
static const mp_kernel mp__scan_kernel = {"control:scan", mp__scan_prepare, mp__scan_run, mp__scan_release};
static const mp_kernel mp__scan8_kernel = {"control:scan", mp__scan8_prepare, mp__scan8_run, mp__scan_release};

const mp_kernel *mp_control_kernel(const mp_node *n) {
    if (n->domain[0] && !mp_streq(n->domain, "ai.onnx")) return NULL;
    if (mp_streq(n->op, "If")) return &mp__if_kernel;
    if (mp_streq(n->op, "Loop")) return &mp__loop_kernel;
    if (mp_streq(n->op, "Scan")) return n->opset >= 9 ? &mp__scan_kernel : &mp__scan8_kernel;
    return NULL;
}
