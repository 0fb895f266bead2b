/* fp16 and bf16 activations on the fp32 kernels (docs/DESIGN.md, "Ops
 * served"). The glue's kernels compute in fp32; a node whose float
 * activations are 16-bit ran the portable code, twenty times slower on a
 * ConvNet. ONNX Runtime's CPU provider runs such a node in fp32 between
 * Casts it inserts (InsertedPrecisionFreeCast); this file does the same at
 * the node's boundary: the fp32 kernel the node would get with fp32
 * tensors (dn_fp32_kernel asked with dn_half_mode set, which makes
 * dn_is_f32 take 16-bit floats) is prepared on an fp32 view of the node's
 * tensors, each 16-bit activation input is converted into the per-run
 * scratch before it runs, and each 16-bit output is rounded back (to
 * nearest even) after. Constant 16-bit inputs are decoded once, by the
 * plan (mp_kinput_f32).
 *
 * Fusion stays on: the executor's fuse calls are passed through and the
 * view rebuilt after each, so a post-op's constant (a Clip bound, a scalar
 * read at prepare) is read as fp32. A fused group rounds only its last
 * output to 16 bits: its intermediates stay fp32 (one rounding where the
 * unfused nodes round at each). Blocked layouts pass between kernels as they do
 * in fp32 (dn_lay_add): the conversion is element by element and a blocked
 * layout is registered only when its bytes are the plain one's, so the
 * 16-bit buffer holds the same arrangement. */
#include "run/dnnl_int.h"

_Thread_local bool dn_half_mode;

enum { HK_PASS, HK_CONST, HK_ACT };
typedef struct hslot {
    int how;
    int dt;         /* the tensor's 16-bit type (HK_ACT) */
    size_t at;      /* HK_ACT: its fp32 copy's offset in the scratch */
    int64_t cap;    /* HK_ACT: elements that fit there */
} hslot;

typedef struct hk {
    const mp_kernel *inner;
    void *istate;
    mp_kexec exec;             /* the executor's, with fuse passed through */
    const mp_kexec *outer_exec;
    const mp_rtensor *outer_in;  /* the executor's arrays during prepare */
    mp_rtensor *outer_out;
    mp_rtensor *in, *out;      /* what the fp32 kernel sees */
    int cap_in, cap_out;
    hslot *sin, *sout;
    float *own[16];            /* constants decoded here (no plan to keep them) */
    int n_own;
} hk;

static bool is16(int dt) { return dt == MP_DT_FLOAT16 || dt == MP_DT_BFLOAT16; }

/* A float activation of n in 16 bits, and none of unknown shape (the fp32
 * copies are sized at prepare). */
bool dn_half_node(const mp_graph *g, const mp_node *n) {
    bool any = false;
    for (int i = 0; i < n->n_in + n->n_out; i++) {
        const mp_value *v = i < n->n_in ? dn_gval(g, n, i) : dn_gout(g, n, i - n->n_in);
        if (!v || !is16(v->dtype) || (i < n->n_in && dn_is_const_in(g, v))) continue;
        if (!mp_shape_known(v)) return false;
        any = true;
    }
    return any;
}

/* ------------------------------------------------------------- the view */

/* Constant 16-bit input i as fp32 (k->in the executor's array). */
static const float *hk_const(mp_kctx *k, hk *h, int i) {
    const float *f = k->exec ? mp_kinput_f32(k, i) : NULL;
    if (f) return f;
    mp_error_clear();
    const mp_rtensor *t = &k->in[i];
    if (h->n_own == (int)(sizeof h->own / sizeof h->own[0])) return NULL;
    float *o = malloc(sizeof *o * (size_t)(t->numel > 0 ? t->numel : 1));
    if (!o) return NULL;
    const uint16_t *s = t->data;
    for (int64_t j = 0; j < t->numel; j++)
        o[j] = t->dtype == MP_DT_FLOAT16 ? mp_half_to_float(s[j]) : mp_bf16_to_float(s[j]);
    h->own[h->n_own++] = o;
    return o;
}

/* h->in / h->out from the executor's arrays: 16-bit tensors become fp32
 * ones (constants decoded, activations without data until run); then k
 * points at the view. */
static mp_status hk_view(mp_kctx *k, hk *h) {
    if (k->n_in > h->cap_in || k->n_out > h->cap_out) {
        int ci = k->n_in + 8, co = k->n_out + 2;
        mp_rtensor *a = realloc(h->in, sizeof *a * (size_t)ci), *b = NULL;
        if (a) h->in = a;
        if (a && (b = realloc(h->out, sizeof *b * (size_t)co))) h->out = b;
        if (!a || !b) return mp_error(MP_ERR_NOMEM, "out of memory");
        h->cap_in = ci;
        h->cap_out = co;
    }
    k->in = h->outer_in;
    k->out = h->outer_out;
    for (int i = 0; i < k->n_in; i++) {
        h->in[i] = k->in[i];
        if (!is16(k->in[i].dtype)) continue;
        h->in[i].dtype = MP_DT_FLOAT;
        if (k->in[i].data) {
            const float *f = hk_const(k, h, i);
            if (!f) return mp_error(MP_ERR_NOMEM, "node %s: out of memory converting weights", k->n->name);
            h->in[i].data = (void *)f;
        }
    }
    for (int i = 0; i < k->n_out; i++) {
        h->out[i] = k->out[i];
        if (!is16(k->out[i].dtype)) continue;
        h->out[i].dtype = MP_DT_FLOAT;
        h->out[i].data = NULL;
    }
    k->in = h->in;
    k->out = h->out;
    return MP_OK;
}

/* The executor's fusion, between the fp32 kernel's prepare and the plan:
 * it grows the executor's arrays; the view follows. */
static _Thread_local hk *hk_cur;

/* A node the group would absorb whose 16-bit inputs all have known
 * shapes (their fp32 copies are sized at prepare): else it is left out. */
static mp_status hk_absorbable(const mp_kctx *k, const int *nodes, int n) {
    for (int j = 0; j < n; j++) {
        if (nodes[j] < 0 || nodes[j] >= k->g->n_nodes) continue; /* the executor says why */
        const mp_node *c = &k->g->nodes[nodes[j]];
        for (int i = 0; i < c->n_in; i++) {
            const mp_value *v = dn_gval(k->g, c, i);
            if (v && is16(v->dtype) && !mp_shape_known(v))
                return mp_error(MP_ERR_USAGE, "node '%s' cannot be absorbed by '%s': a 16-bit input of "
                                "unknown shape", c->name ? c->name : "?", k->n->name ? k->n->name : "?");
        }
    }
    return MP_OK;
}

static mp_status hk_fuse(mp_kctx *k, int node) {
    hk *h = hk_cur;
    mp_status sa = hk_absorbable(k, &node, 1);
    if (sa) return sa;
    k->in = h->outer_in;
    k->out = h->outer_out;
    mp_status st = h->outer_exec->fuse(k, node);
    h->outer_in = k->in;
    h->outer_out = k->out;
    mp_status sv = hk_view(k, h);
    return st ? st : sv;
}

static mp_status hk_fuse_nodes(mp_kctx *k, const int *nodes, int n) {
    hk *h = hk_cur;
    mp_status sa = hk_absorbable(k, nodes, n);
    if (sa) return sa;
    k->in = h->outer_in;
    k->out = h->outer_out;
    mp_status st = h->outer_exec->fuse_nodes(k, nodes, n);
    h->outer_in = k->in;
    h->outer_out = k->out;
    mp_status sv = hk_view(k, h);
    return st ? st : sv;
}

/* --------------------------------------------------------------- kernel */

static void hk_free(hk *h) {
    if (!h) return;
    if (h->inner && h->inner->release && h->istate) h->inner->release(h->istate);
    for (int i = 0; i < h->n_own; i++) free(h->own[i]);
    free(h->in);
    free(h->out);
    free(h->sin);
    free(h->sout);
    free(h);
}

static size_t hk_round(size_t b) { return (b + 63) & ~(size_t)63; }

/* Where each tensor's fp32 copy lives: after the fp32 kernel's own scratch. */
static mp_status hk_slots(mp_kctx *k, hk *h, size_t iscratch, size_t *scratch) {
    h->sin = calloc((size_t)k->n_in + 1, sizeof *h->sin);
    h->sout = calloc((size_t)k->n_out + 1, sizeof *h->sout);
    if (!h->sin || !h->sout) return mp_error(MP_ERR_NOMEM, "out of memory");
    size_t at = hk_round(iscratch);
    for (int i = 0; i < k->n_in + k->n_out; i++) {
        const mp_rtensor *t = i < k->n_in ? &k->in[i] : &k->out[i - k->n_in];
        hslot *sl = i < k->n_in ? &h->sin[i] : &h->sout[i - k->n_in];
        if (!is16(t->dtype)) continue;
        sl->dt = t->dtype;
        if (i < k->n_in && t->data) {
            sl->how = HK_CONST;
            continue;
        }
        if (t->numel < 0)
            return mp_error(MP_ERR_UNSUPPORTED, "node %s (%s): a 16-bit tensor of unknown size", k->n->name,
                            k->n->op);
        sl->how = HK_ACT;
        sl->at = at;
        sl->cap = t->numel;
        at += hk_round(sizeof(float) * (size_t)(t->numel > 0 ? t->numel : 1));
    }
    *scratch = at;
    return MP_OK;
}

static mp_status dn_half_prepare(mp_kctx *k, size_t *scratch) {
    hk *h = calloc(1, sizeof *h);
    if (!h) return mp_error(MP_ERR_NOMEM, "out of memory");
    dn_half_mode = true;
    h->inner = dn_fp32_kernel(k->g, k->n);
    dn_half_mode = false;
    if (!h->inner || !h->inner->run) {
        free(h);
        return mp_error(MP_ERR_UNSUPPORTED, "node %s (%s): no fp32 kernel", k->n->name, k->n->op);
    }
    const mp_kexec *outer_exec = k->exec;
    h->outer_exec = outer_exec;
    h->outer_in = k->in;
    h->outer_out = k->out;
    if (outer_exec) {
        h->exec = *outer_exec;
        h->exec.fuse = hk_fuse;
        h->exec.fuse_nodes = hk_fuse_nodes;
        k->exec = &h->exec;
    }
    mp_status st = hk_view(k, h);
    size_t isc = 0;
    hk *saved = hk_cur;
    hk_cur = h;
    dn_half_mode = true;
    k->state = NULL;
    if (!st && h->inner->prepare) st = h->inner->prepare(k, &isc);
    dn_half_mode = false;
    hk_cur = saved;
    h->istate = k->state;
    k->in = h->outer_in;
    k->out = h->outer_out;
    k->exec = outer_exec;
    k->state = NULL;
    if (!st) st = hk_slots(k, h, isc, scratch);
    if (st) {
        hk_free(h);
        return st;
    }
    if (!k->kname) k->kname = h->inner->name;
    k->state = h;
    return MP_OK;
}

typedef struct hconv {
    const void *src;
    void *dst;
    int dt;
} hconv;

/* The conversions run at every kernel's boundary, so they must cost little
 * beside the kernel: the one-element helpers took about 1.5 ns an element,
 * 20 us of a ConvNet's 25-us kernels; mp_f16_widen and mp_f16_narrow
 * (src/graph/convert.c: F16C for fp16, bit arithmetic for bf16) give the
 * same values for a fraction of that. */
static void hk_widen(void *arg, int64_t lo, int64_t hi) {
    const hconv *c = arg;
    mp_f16_widen(c->dt, (const uint16_t *)c->src + lo, (float *)c->dst + lo, hi - lo);
}

static void hk_narrow(void *arg, int64_t lo, int64_t hi) {
    const hconv *c = arg;
    mp_f16_narrow(c->dt, (const float *)c->src + lo, (uint16_t *)c->dst + lo, hi - lo);
}

/* Conversions below HK_SERIAL elements run on the calling thread: handing
 * a few microseconds of work to the plan's pool, while oneDNN's OpenMP
 * threads still spin after the primitive, cost more than the work (an fp16
 * ConvNet's 30 kernels: about 25 us each, against 2 to 4 us each here). */
#define HK_SERIAL (1 << 16)

static void hk_convert(mp_kctx *k, int64_t n, mp_range_fn fn, hconv *c) {
    if (n < HK_SERIAL) fn(c, 0, n);
    else mp_kparallel(k, n, fn, c);
}

static mp_status dn_half_run(mp_kctx *k) {
    hk *h = k->state;
    char *scr = k->scratch;
    for (int i = 0; i < k->n_in; i++) {
        const hslot *sl = &h->sin[i];
        const void *keep = h->in[i].data;
        h->in[i] = k->in[i];
        if (sl->how == HK_PASS) continue;
        h->in[i].dtype = MP_DT_FLOAT;
        if (sl->how == HK_CONST) {
            h->in[i].data = (void *)keep; /* decoded at prepare */
            continue;
        }
        if (k->in[i].numel > sl->cap || (k->in[i].numel > 0 && !k->in[i].data))
            return mp_error(MP_ERR_UNSUPPORTED, "node %s (%s): input %d larger than planned", k->n->name,
                            k->n->op, i);
        hconv c = {k->in[i].data, scr + sl->at, sl->dt};
        hk_convert(k, k->in[i].numel, hk_widen, &c);
        h->in[i].data = scr + sl->at;
    }
    for (int i = 0; i < k->n_out; i++) {
        const hslot *sl = &h->sout[i];
        h->out[i] = k->out[i];
        if (sl->how != HK_ACT) continue;
        if (k->out[i].numel > sl->cap)
            return mp_error(MP_ERR_UNSUPPORTED, "node %s (%s): output %d larger than planned", k->n->name,
                            k->n->op, i);
        h->out[i].dtype = MP_DT_FLOAT;
        h->out[i].data = scr + sl->at;
    }
    const mp_rtensor *in = k->in;
    mp_rtensor *out = k->out;
    k->in = h->in;
    k->out = h->out;
    k->state = h->istate;
    dn_half_mode = true;
    mp_status st = h->inner->run(k);
    dn_half_mode = false;
    k->in = in;
    k->out = out;
    k->state = h;
    for (int i = 0; !st && i < k->n_out; i++) {
        const hslot *sl = &h->sout[i];
        if (sl->how != HK_ACT || !k->out[i].data) continue;
        hconv c = {scr + sl->at, k->out[i].data, sl->dt};
        hk_convert(k, k->out[i].numel, hk_narrow, &c);
    }
    return st;
}

static void dn_half_release(void *state) { hk_free(state); }

static const mp_kernel k_half = {"onednn:fp32", dn_half_prepare, dn_half_run, dn_half_release};

const mp_kernel *dn_half_kernel(const mp_graph *g, const mp_node *n) {
    /* the recurrent layers' glue checks its own types */
    if (dn_is_op(n, "LSTM") || dn_is_op(n, "GRU") || dn_is_op(n, "RNN") || !dn_half_node(g, n)) return NULL;
    dn_half_mode = true;
    const mp_kernel *kern = dn_fp32_kernel(g, n);
    dn_half_mode = false;
    return kern ? &k_half : NULL;
}
