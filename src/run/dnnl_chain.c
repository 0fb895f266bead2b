/* The oneDNN glue (dnnl_int.h): what every primitive kernel shares: the
 * channels-last registry between kernels, the kernel state (arguments, owned
 * buffers, reorders before and after, running a primitive) and the post-op
 * chains that fuse single consumers into a primitive. */
#include "run/dnnl_int.h"

/* ---- channels-last activations between oneDNN kernels ----
 * oneDNN's fast convolutions work on channels-last (NHWC) or channel-
 * blocked layouts; on plain NCHW they fall back to im2col+GEMM, several
 * times slower, or to reference code. So a kernel whose output is read
 * only by oneDNN kernels that take any layout (Conv, pooling, and the
 * element-wise ops whose own readers do) leaves it channels-last, and
 * records that here, keyed by the plan and value; each reader looks its
 * inputs up at prepare. Channels-last has exactly the plain size, so the
 * planner's buffer fits. Graph outputs and anything a portable kernel
 * reads stay plain. Without a plan (unit tests) only a Conv's own
 * reorders in and out are exercised. */
typedef struct lay_ent {
    const void *ex;
    const mp_graph *g;
    int v;
    dnnl_memory_desc_t md;
} lay_ent;

static pthread_mutex_t g_lay_mu = PTHREAD_MUTEX_INITIALIZER;
static lay_ent *g_lay;
static int g_nlay, g_caplay;

bool dn_lay_find(const mp_kctx *k, int v, dnnl_memory_desc_t *md) {
    if (!k->ex || v < 0) return false;
    bool found = false;
    pthread_mutex_lock(&g_lay_mu);
    for (int i = 0; i < g_nlay; i++)
        if (g_lay[i].ex == k->ex && g_lay[i].g == k->g && g_lay[i].v == v) {
            *md = g_lay[i].md;
            found = true;
            break;
        }
    pthread_mutex_unlock(&g_lay_mu);
    return found;
}

bool dn_lay_add(const mp_kctx *k, dk *s, int v, const dnnl_memory_desc_t *md) {
    bool ok = false;
    pthread_mutex_lock(&g_lay_mu);
    if (g_nlay == g_caplay) {
        int cap = g_caplay ? g_caplay * 2 : 64;
        lay_ent *n = realloc(g_lay, sizeof *n * (size_t)cap);
        if (n) {
            g_lay = n;
            g_caplay = cap;
        }
    }
    if (g_nlay < g_caplay) {
        g_lay[g_nlay++] = (lay_ent){k->ex, k->g, v, *md};
        s->lay_ex = k->ex;
        s->lay_g = k->g;
        s->lay_v = v;
        ok = true;
    }
    pthread_mutex_unlock(&g_lay_mu);
    return ok;
}

static void lay_remove(dk *s) {
    if (s->lay_v < 0) return;
    pthread_mutex_lock(&g_lay_mu);
    for (int i = 0; i < g_nlay; i++)
        if (g_lay[i].ex == s->lay_ex && g_lay[i].g == s->lay_g && g_lay[i].v == s->lay_v) {
            g_lay[i] = g_lay[--g_nlay];
            break;
        }
    if (g_nlay == 0) {
        free(g_lay);
        g_lay = NULL;
        g_caplay = 0;
    }
    pthread_mutex_unlock(&g_lay_mu);
}

void dn_dk_release(void *state) {
    dk *s = state;
    if (!s) return;
    lay_remove(s);
    for (int i = 0; i < s->n; i++)
        if (s->ex[i].memory) dnnl_memory_destroy(s->ex[i].memory);
    if (s->prim) dnnl_primitive_destroy(s->prim);
    if (s->reo) dnnl_primitive_destroy(s->reo);
    if (s->sumr) dnnl_primitive_destroy(s->sumr);
    for (int i = 0; i < 2; i++)
        if (s->sumx[i].memory) dnnl_memory_destroy(s->sumx[i].memory);
    for (int i = 0; i < s->n_pre; i++)
        if (s->pre[i]) dnnl_primitive_destroy(s->pre[i]);
    for (int i = 0; i < 2; i++) {
        if (s->rex[i].memory) dnnl_memory_destroy(s->rex[i].memory);
        for (int j = 0; j < DK_MAXPRE; j++)
            if (s->prex[j][i].memory) dnnl_memory_destroy(s->prex[j][i].memory);
    }
    for (int i = 0; i < s->n_own; i++) free(s->own[i]);
    free(s);
}

void *dn_dk_alloc_own(dk *s, size_t bytes) {
    if (s->n_own >= DK_MAXOWN) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) return NULL;
    s->own[s->n_own++] = p;
    return p;
}

/* Argument `arg` of the primitive, described by md, fed from `from`/idx
 * (FROM_OWN: data is the kernel's own buffer). */
mp_status dn_dk_arg(mp_kctx *k, dk *s, int arg, const dnnl_memory_desc_t *md, int from,
                        int idx, void *data) {
    if (s->n >= DK_MAXARG) return mp_error(MP_ERR_LIMIT, "node %s: too many oneDNN arguments", k->n->name);
    dnnl_memory_t mem;
    DN(dnnl_memory_create(&mem, md, dn_eng, from == FROM_OWN ? data : DNNL_MEMORY_NONE),
       "memory");
    s->ex[s->n].arg = arg;
    s->ex[s->n].memory = mem;
    s->from[s->n] = (unsigned char)from;
    s->idx[s->n] = idx;
    s->last[s->n] = from == FROM_OWN ? data : NULL;
    s->n++;
    return MP_OK;
}

/* A reorder from `from` to `to` with its two arguments; a buffer given
 * (from_buf, to_buf) is bound now, one left NULL is set at each run
 * (reorder_run). */
static mp_status reorder_new(mp_kctx *k, const dnnl_memory_desc_t *from, void *from_buf,
                             const dnnl_memory_desc_t *to, void *to_buf, dnnl_primitive_t *prim,
                             dnnl_exec_arg_t x[2]) {
    dnnl_primitive_desc_t rpd;
    DN(dnnl_reorder_primitive_desc_create(&rpd, from, dn_eng, to, dn_eng, NULL), "reorder");
    dnnl_status_t st = dnnl_primitive_create(prim, rpd);
    dnnl_primitive_desc_destroy(rpd);
    if (st) return dn_dfail(k, st, "reorder");
    x[0].arg = DNNL_ARG_FROM;
    x[1].arg = DNNL_ARG_TO;
    DN(dnnl_memory_create(&x[0].memory, from, dn_eng, from_buf ? from_buf : DNNL_MEMORY_NONE), "memory");
    DN(dnnl_memory_create(&x[1].memory, to, dn_eng, to_buf ? to_buf : DNNL_MEMORY_NONE), "memory");
    return MP_OK;
}

/* Run a reorder of reorder_new, first pointing the sides given (not
 * NULL) at these buffers. */
static mp_status reorder_run(mp_kctx *k, dnnl_primitive_t prim, dnnl_exec_arg_t x[2], void *from, void *to) {
    if (from) DN(dnnl_memory_set_data_handle(x[0].memory, from), "set data handle");
    if (to) DN(dnnl_memory_set_data_handle(x[1].memory, to), "set data handle");
    DN(dnnl_primitive_execute(prim, dn_strm, 2, x), "reorder");
    return MP_OK;
}

mp_status dn_dk_run(mp_kctx *k) {
    dk *s = k->state;
    if (s->alt) return dn_gemm_alt_run(k, s);
    dn_set_threads(s->threads);
    for (int i = 0; i < s->n; i++) {
        void *p;
        switch (s->from[i]) {
        case FROM_IN: p = k->in[s->idx[i]].data; break;
        case FROM_OUT: p = k->out[s->idx[i]].data; break;
        case FROM_SCRATCH: p = k->scratch; break;
        case FROM_SCRATCH_AT: p = k->scratch ? (char *)k->scratch + s->scr_at : NULL; break;
        default: continue;
        }
        if (!p) return mp_error(MP_ERR_USAGE, "node %s (%s): a buffer oneDNN needs is missing",
                                k->n->name, k->n->op);
        if (p != s->last[i]) {
            DN(dnnl_memory_set_data_handle(s->ex[i].memory, p), "set data handle");
            s->last[i] = p;
        }
    }
    mp_status st;
    for (int i = 0; i < s->n_pre; i++) {
        void *p = k->in[s->pre_in[i]].data;
        if (!p) return mp_error(MP_ERR_USAGE, "node %s (%s): input buffer missing", k->n->name, k->n->op);
        if ((st = reorder_run(k, s->pre[i], s->prex[i], p, NULL))) return st;
    }
    if (s->sumr) {
        void *from = k->in[s->sum_in].data, *to = s->sum_own ? s->sum_own : k->out[0].data;
        if (!from || !to) return mp_error(MP_ERR_USAGE, "node %s (%s): the residual's buffer is missing",
                                          k->n->name, k->n->op);
        if (from != to && (st = reorder_run(k, s->sumr, s->sumx, from, to))) return st;
    }
    DN(dnnl_primitive_execute(s->prim, dn_strm, s->n, s->ex), "execute");
    if (s->reo) {
        void *p = k->out[0].data;
        if (!p) return mp_error(MP_ERR_USAGE, "node %s (%s): output buffer missing", k->n->name, k->n->op);
        if ((st = reorder_run(k, s->reo, s->rex, NULL, p))) return st;
    }
    DN(dnnl_stream_wait(dn_strm), "wait");
    return MP_OK;
}

/* Input `in` (plain, `from`) is reordered into a buffer of the kernel's
 * laid out as `to` before the primitive runs; bind the primitive's
 * argument to *buf (FROM_OWN). */
mp_status dn_dk_pre_reorder(mp_kctx *k, dk *s, int in, const dnnl_memory_desc_t *from,
                                const dnnl_memory_desc_t *to, void **buf) {
    if (s->n_pre >= DK_MAXPRE) return mp_error(MP_ERR_LIMIT, "node %s: too many input reorders", k->n->name);
    *buf = dn_dk_alloc_own(s, dnnl_memory_desc_get_size(to));
    if (!*buf) return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
    int j = s->n_pre;
    s->pre_in[j] = in;
    mp_status st = reorder_new(k, from, NULL, to, *buf, &s->pre[j], s->prex[j]);
    if (s->pre[j]) s->n_pre++;
    return st;
}

/* The primitive writes `from` (blocked) into a buffer of the kernel's; a
 * reorder then writes the plain output `to`. Bind DST with dk_arg_dst. */
mp_status dn_dk_post_reorder(mp_kctx *k, dk *s, const dnnl_memory_desc_t *from,
                                 const dnnl_memory_desc_t *to, void **buf) {
    *buf = dn_dk_alloc_own(s, dnnl_memory_desc_get_size(from));
    if (!*buf) return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
    return reorder_new(k, from, *buf, to, NULL, &s->reo, s->rex);
}

/* The residual (input `in`, stored as `from`) is put into the buffer the
 * primitive writes (`own`, else the output; laid out as `to`) before it
 * runs, for a sum post-op. */
mp_status dn_dk_sum_source(mp_kctx *k, dk *s, int in, const dnnl_memory_desc_t *from,
                               const dnnl_memory_desc_t *to, void *own) {
    s->sum_in = in;
    s->sum_own = own;
    /* the residual's bytes, laid out as the primitive writes: then the
     * output may be them (no copy) when nothing reads the residual after */
    if (!own && dnnl_memory_desc_equal(from, to)) mp_kshare(k, in);
    return reorder_new(k, from, NULL, to, NULL, &s->sumr, s->sumx);
}

/* A fresh state with the engine up and the thread count set. */
mp_status dn_dk_new(mp_kctx *k, dk **out) {
    pthread_once(&dn_once, dn_engine_init);
    if (dn_init_st != dnnl_success) return dn_dfail(k, dn_init_st, "engine");
    dk *s = calloc(1, sizeof *s);
    if (!s) return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
    s->threads = k->threads > 0 ? k->threads : omp_get_max_threads();
    s->lay_v = -1;
    s->wown = -1;
    s->sum_in = -1;
    dn_set_threads(s->threads);
    k->state = s;
    *out = s;
    return MP_OK;
}

/* Attributes with the user scratchpad (the executor's per-run scratch). */
mp_status dn_attr_new(mp_kctx *k, dnnl_primitive_attr_t *attr) {
    DN(dnnl_primitive_attr_create(attr), "attr");
    DN(dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user), "scratchpad");
    return MP_OK;
}

/* Create the primitive from pd, bind its scratchpad, ask for its size. */
static int g_ref_primitives; /* dnnl.h mp_dnnl_reference_primitives */

int mp_dnnl_reference_primitives(void) {
    return __atomic_load_n(&g_ref_primitives, __ATOMIC_RELAXED);
}

mp_status dn_dk_finish(mp_kctx *k, dk *s, const_dnnl_primitive_desc_t pd, size_t *scratch) {
    DN(dnnl_primitive_create(&s->prim, pd), "primitive");
    if (dn_pd_is_ref(pd)) __atomic_add_fetch(&g_ref_primitives, 1, __ATOMIC_RELAXED);
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t sz = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (sz) {
        mp_status st = dn_dk_arg(k, s, DNNL_ARG_SCRATCHPAD, smd, FROM_SCRATCH, 0, NULL);
        if (st) return st;
        if (scratch && *scratch < sz) *scratch = sz;
    }
    return MP_OK;
}

/* Constant input i as fp32: its own data, or a converted copy the kernel
 * owns. NULL when the input has no data at prepare (known at run only). */
mp_status dn_const_f32(mp_kctx *k, dk *s, int i, const float **out) {
    const mp_rtensor *t = &k->in[i];
    *out = NULL;
    if (!t->data) return MP_OK;
    if (t->dtype == MP_DT_FLOAT) {
        *out = t->data;
        return MP_OK;
    }
    if (t->dtype != MP_DT_FLOAT16 && t->dtype != MP_DT_BFLOAT16)
        return mp_error(MP_ERR_UNSUPPORTED, "node %s (%s): input %d is %s, oneDNN kernel wants fp32",
                        k->n->name, k->n->op, i, mp_dtype_name(t->dtype));
    float *f = dn_dk_alloc_own(s, (size_t)t->numel * sizeof(float));
    if (!f) return mp_error(MP_ERR_NOMEM, "node %s: out of memory converting weights", k->n->name);
    const uint16_t *h = t->data;
    for (int64_t j = 0; j < t->numel; j++) {
        f[j] = t->dtype == MP_DT_FLOAT16 ? mp_half_to_float(h[j]) : mp_bf16_to_float(h[j]);
    }
    *out = f;
    return MP_OK;
}

/* Reorder constant data (plain md `from`) into a kernel-owned buffer laid
 * out as `to`; the result is bound as argument `arg`. */
mp_status dn_bind_reordered(mp_kctx *k, dk *s, int arg, const dnnl_memory_desc_t *from,
                                const float *data, const dnnl_memory_desc_t *to) {
    size_t sz = dnnl_memory_desc_get_size(to);
    void *buf = dn_dk_alloc_own(s, sz);
    if (!buf) return mp_error(MP_ERR_NOMEM, "node %s: out of memory for weights", k->n->name);
    if (dnnl_memory_desc_equal(from, to)) {
        memcpy(buf, data, sz);
    } else {
        dnnl_memory_t a = NULL, b = NULL;
        dnnl_primitive_desc_t rpd = NULL;
        dnnl_primitive_t r = NULL;
        dnnl_status_t st = dnnl_memory_create(&a, from, dn_eng, (void *)data);
        if (st == dnnl_success) st = dnnl_memory_create(&b, to, dn_eng, buf);
        if (st == dnnl_success) st = dnnl_reorder_primitive_desc_create(&rpd, from, dn_eng, to, dn_eng, NULL);
        if (st == dnnl_success) st = dnnl_primitive_create(&r, rpd);
        if (st == dnnl_success) {
            dnnl_exec_arg_t ex[2] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
            st = dnnl_primitive_execute(r, dn_strm, 2, ex);
            if (st == dnnl_success) st = dnnl_stream_wait(dn_strm);
        }
        if (r) dnnl_primitive_destroy(r);
        if (rpd) dnnl_primitive_desc_destroy(rpd);
        if (a) dnnl_memory_destroy(a);
        if (b) dnnl_memory_destroy(b);
        if (st != dnnl_success) return dn_dfail(k, st, "weights reorder");
    }
    return dn_dk_arg(k, s, arg, to, FROM_OWN, 0, buf);
}

/* oneDNN 2.6 computes wrong results when one eltwise algorithm appears
 * twice in a post-op chain with different parameters (linear, tanh,
 * linear: tests/test_dnnl.c plan_matmul_chain), so a chain holds each
 * algorithm once. */
static bool chain_has(const chain *ch, dnnl_alg_kind_t alg) {
    for (int i = 0; i < ch->n_used; i++)
        if (ch->used[i] == alg) return true;
    return false;
}

/* Activation `c` as eltwise steps (Clip's bounds read later); false if
 * oneDNN has none. */
bool dn_eltwise_of(const mp_graph *g, const mp_node *c, eltw *e) {
    e->n = 1;
    e->a[0] = e->b[0] = 0;
    if (dn_is_op(c, "Relu")) e->alg[0] = dnnl_eltwise_relu;
    else if (dn_is_op(c, "LeakyRelu")) { e->alg[0] = dnnl_eltwise_relu; e->a[0] = (float)mp_attr_f(c, "alpha", 0.01); }
    else if (dn_is_op(c, "Elu")) { e->alg[0] = dnnl_eltwise_elu; e->a[0] = (float)mp_attr_f(c, "alpha", 1.0); }
    else if (dn_is_op(c, "Sigmoid")) e->alg[0] = dnnl_eltwise_logistic;
    else if (dn_is_op(c, "Tanh")) e->alg[0] = dnnl_eltwise_tanh;
    else if (dn_is_op(c, "Abs")) e->alg[0] = dnnl_eltwise_abs;
    else if (dn_is_op(c, "Sqrt")) e->alg[0] = dnnl_eltwise_sqrt;
    else if (dn_is_op(c, "Exp")) e->alg[0] = dnnl_eltwise_exp;
    else if (dn_is_op(c, "Log")) e->alg[0] = dnnl_eltwise_log;
    else if (dn_is_op(c, "Neg")) { e->alg[0] = dnnl_eltwise_linear; e->a[0] = -1; }
    else if (dn_is_op(c, "Reciprocal")) { e->alg[0] = dnnl_eltwise_pow; e->a[0] = 1; e->b[0] = -1; }
    else if (dn_is_op(c, "Softplus")) { e->alg[0] = dnnl_eltwise_soft_relu; }
    else if (dn_is_op(c, "Mish")) e->alg[0] = dnnl_eltwise_mish;
    else if (dn_is_op(c, "HardSwish")) e->alg[0] = dnnl_eltwise_hardswish;
    else if (dn_is_op(c, "HardSigmoid")) {
        e->alg[0] = dnnl_eltwise_linear;
        e->a[0] = (float)mp_attr_f(c, "alpha", 0.2);
        e->b[0] = (float)mp_attr_f(c, "beta", 0.5);
        e->alg[1] = dnnl_eltwise_clip_v2;
        e->a[1] = 0;
        e->b[1] = 1;
        e->n = 2;
    } else if (dn_is_op(c, "Gelu")) {
        const char *ap = mp_attr_s(c, "approximate", "none");
        e->alg[0] = mp_streq(ap, "tanh") ? dnnl_eltwise_gelu_tanh : dnnl_eltwise_gelu_erf;
    } else if (dn_is_op(c, "Clip")) {
        /* bounds: attributes before opset 11, constant inputs after */
        e->alg[0] = dnnl_eltwise_clip_v2;
        e->a[0] = (float)mp_attr_f(c, "min", -INFINITY);
        e->b[0] = (float)mp_attr_f(c, "max", INFINITY);
        for (int j = 1; j < c->n_in && j < 3; j++) {
            const mp_value *b = dn_gval(g, c, j);
            /* fp32, or 16-bit for a 16-bit node (dnnl_half.c: read decoded) */
            if (b && (!dn_is_const_in(g, b) || !dn_is_f32(b) || mp_value_numel(b) != 1)) return false;
        }
    } else {
        return false;
    }
    return true;
}

static mp_status po_eltwise(mp_kctx *k, chain *ch, dnnl_alg_kind_t alg, float a, float b) {
    DN(dnnl_post_ops_append_eltwise(ch->po, 1.0f, alg, a, b), "eltwise post-op");
    if (ch->n_used < 16) ch->used[ch->n_used++] = alg;
    ch->n_po++;
    return MP_OK;
}

/* Which binary algorithm node c is, and whether v (this kernel's output)
 * is its first operand; false when not Add/Sub/Mul/Div. */
bool dn_binary_of(const mp_node *c, dnnl_alg_kind_t *alg) {
    if (dn_is_op(c, "Add")) *alg = dnnl_binary_add;
    else if (dn_is_op(c, "Sub")) *alg = dnnl_binary_sub;
    else if (dn_is_op(c, "Mul")) *alg = dnnl_binary_mul;
    else if (dn_is_op(c, "Div")) *alg = dnnl_binary_div;
    else return false;
    return c->n_in == 2 && c->n_out >= 1;
}

/* Whether operand o broadcasts into dims (rank) without growing it. */
bool dn_fits_into(const mp_value *o, int rank, const int64_t *dims) {
    if (!mp_shape_known(o) || o->rank > rank) return false;
    for (int i = 0; i < o->rank; i++) {
        int64_t d = o->dims[o->rank - 1 - i], t = dims[rank - 1 - i];
        if (d != 1 && d != t) return false;
    }
    return true;
}

/* Operand dims as the 2-D view [rows, N] of a MatMul folded to 2-D:
 * possible when all its leading dims are 1, or all equal the output's. */
static bool fold_dims(const mp_value *o, int rank, const int64_t *dims, int64_t *d2) {
    int64_t full[DNNL_MAX_NDIMS] = {0};
    if (rank < 1 || rank > DNNL_MAX_NDIMS) return false;
    int off = rank - o->rank;
    for (int i = 0; i < rank; i++) full[i] = i < off ? 1 : o->dims[i - off];
    bool ones = true, same = true;
    for (int i = 0; i < rank - 1; i++) {
        if (full[i] != 1) ones = false;
        if (full[i] != dims[i]) same = false;
    }
    if (!ones && !same) return false;
    d2[0] = ones ? 1 : dn_numel_of(rank - 1, dims);
    d2[1] = full[rank - 1];
    return true;
}

/* A whole activation written out that reads v (several nodes do) and
 * oneDNN applies as one eltwise post-op: GELU (erf or tanh form), SiLU
 * (x * Sigmoid(x): swish with alpha 1, EfficientNet's and Llama's MLP
 * gate), QuickGELU (x * Sigmoid(1.702 x): swish with alpha 1.702). */
static bool act_at(const mp_graph *g, int v, int *nodes, int *n, dnnl_alg_kind_t *alg, float *alpha) {
    const mp_value *val = &g->values[v];
    int nu;
    const int *u = mp_uses(g, v, &nu);
    if ((val->flags & MP_VAL_OUTPUT) || nu < 1) return false;
    const mp_patterns *p;
    mp_pref r = dn_pattern_at(g, &g->nodes[u[0]], &p);
    if (r.kind != MP_PAT_ACT) return false;
    const mp_pact *a = dn_act_decomposed(g, p, r.index);
    if (!a) return false;
    *alpha = a->kind == MP_ACT_SILU ? 1.0f : a->kind == MP_ACT_QUICK_GELU ? 1.702f : 0.0f;
    switch (a->kind) {
    case MP_ACT_GELU: *alg = dnnl_eltwise_gelu_erf; break;
    case MP_ACT_GELU_TANH: *alg = dnnl_eltwise_gelu_tanh; break;
    case MP_ACT_SILU: case MP_ACT_QUICK_GELU: *alg = dnnl_eltwise_swish; break;
    case MP_ACT_MISH: *alg = dnnl_eltwise_mish; break;
    default: return false;
    }
    if (a->x != v || a->n > 8) return false;
    for (int i = 0; i < nu; i++) {
        mp_pref ri = mp_pattern_at(p, u[i]);
        if (ri.kind != MP_PAT_ACT || ri.index != r.index) return false;
    }
    for (int i = 0; i < a->n; i++) nodes[i] = p->members[a->first + i].node;
    *n = a->n;
    return true;
}

/* Whether a batched MatMul with the binary post-op (alg, md) alone is
 * still one of oneDNN's fast implementations (not "ref"): the chain's
 * probe descriptors (chain.probe_a). An error in the probe says no. */
static bool probe_fast(const chain *ch, dnnl_alg_kind_t alg, const dnnl_memory_desc_t *md) {
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_matmul_desc_t mm;
    bool fast = false;
    if (dnnl_post_ops_create(&po) == dnnl_success && dnnl_post_ops_append_binary(po, alg, md) == dnnl_success &&
        dnnl_primitive_attr_create(&attr) == dnnl_success &&
        dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success &&
        dnnl_matmul_desc_init(&mm, ch->probe_a, ch->probe_b, NULL, ch->probe_y) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &mm, attr, dn_eng, NULL) == dnnl_success)
        fast = *dn_pd_impl(pd) && !dn_pd_is_ref(pd); /* known, and not the reference code */
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (po) dnnl_post_ops_destroy(po);
    return fast;
}

/* Absorb the chain of single consumers of the node's output value `v`
 * (dims: rank, dims) that oneDNN can apply after the main computation.
 * allow_bn: a BatchNormalization right after may be folded (Conv). */
mp_status dn_absorb_chain(mp_kctx *k, int v, int rank, const int64_t *dims, bool allow_bn,
                              chain *ch) {
    const mp_graph *g = k->g;
    while (k->fuse) {
        /* a whole activation (several nodes read v) as one eltwise post-op */
        int gn[8], ng = 0;
        dnnl_alg_kind_t galg;
        float galpha;
        if (k->ex && act_at(g, v, gn, &ng, &galg, &galpha)) {
            if (chain_has(ch, galg) || !dn_same_dims(&g->values[g->nodes[gn[ng - 1]].out[0]], rank, dims)) break;
            if (mp_kfuse_nodes(k, gn, ng) != MP_OK) {
                mp_error_clear();
                break;
            }
            mp_status st = po_eltwise(k, ch, galg, galpha, 0);
            if (st) return st;
            v = g->nodes[gn[ng - 1]].out[0];
            continue;
        }
        int ci = mp_sole_use(g, v);
        if (ci < 0) break;
        const mp_node *c = &g->nodes[ci];
        const mp_value *cout = dn_gout(g, c, 0);
        if (!cout || !dn_is_f32(cout) || !dn_same_dims(cout, rank, dims) || c->n_out < 1) break;
        bool extra_out = false;
        for (int j = 1; j < c->n_out; j++)
            if (c->out[j] >= 0) extra_out = true;
        if (extra_out) break;
        int base = k->n_in;  /* where c's other inputs will land */
        eltw e;
        dnnl_alg_kind_t alg;
        if (allow_bn && ch->n_po == 0 && ch->bn_in < 0 && dn_is_op(c, "BatchNormalization")) {
            if (c->n_in != 5 || c->in[0] != v || mp_attr_i(c, "training_mode", 0) != 0) break;
            bool ok = true;
            for (int j = 1; j < 5; j++) {
                const mp_value *p = dn_gval(g, c, j);
                if (!dn_is_const_in(g, p) || !dn_is_wt(g, p) || mp_value_numel(p) != dims[1]) ok = false;
            }
            if (!ok) break;
            if (mp_kfuse(k, ci) != MP_OK) break;
            ch->bn_in = base;
            ch->bn_eps = (float)mp_attr_f(c, "epsilon", 1e-5);
        } else if (c->n_in >= 1 && c->in[0] == v && dn_eltwise_of(g, c, &e)) {
            if (chain_has(ch, e.alg[0]) || (e.n > 1 && chain_has(ch, e.alg[1])) ||
                (e.n > 1 && e.alg[0] == e.alg[1]))
                break;
            if (mp_kfuse(k, ci) != MP_OK) break;
            if (dn_is_op(c, "Clip")) {
                /* c's inputs 1, 2 (min, max) are now k->in[base + 0, 1] */
                for (int j = 1; j < c->n_in && j < 3; j++) {
                    const mp_rtensor *b = &k->in[base + j - 1];
                    if (c->in[j] < 0) continue;
                    if (!b->data)
                        return mp_error(MP_ERR_USAGE, "node %s: Clip bound has no data at plan time", c->name);
                    if (j == 1) e.a[0] = *(const float *)b->data;
                    else e.b[0] = *(const float *)b->data;
                }
            }
            for (int j = 0; j < e.n; j++) {
                mp_status st = po_eltwise(k, ch, e.alg[j], e.a[j], e.b[j]);
                if (st) return st;
            }
        } else if (dn_binary_of(c, &alg)) {
            int oi = c->in[0] == v ? 1 : 0;
            if (c->in[1 - oi] != v || c->in[oi] == v) break;
            const mp_value *o = dn_gval(g, c, oi);
            if (!dn_is_f32(o) || !dn_fits_into(o, rank, dims)) break;
            bool v_first = oi == 1;
            if (mp_value_numel(o) == 1 && dn_is_const_in(g, o)) {
                if (alg == dnnl_binary_div && !v_first) break;
                if (chain_has(ch, dnnl_eltwise_linear)) break;
                if (mp_kfuse(k, ci) != MP_OK) break;
                const mp_rtensor *b = &k->in[base];
                if (!b->data) return mp_error(MP_ERR_USAGE, "node %s: constant has no data at plan time", c->name);
                float x = *(const float *)b->data;
                float a = 1, bb = 0;
                if (alg == dnnl_binary_add) bb = x;
                else if (alg == dnnl_binary_sub) { if (v_first) bb = -x; else { a = -1; bb = x; } }
                else if (alg == dnnl_binary_mul) a = x;
                else a = 1.0f / x;
                mp_status st = po_eltwise(k, ch, dnnl_eltwise_linear, a, bb);
                if (st) return st;
            } else if (alg == dnnl_binary_add && ch->cl_rank == rank && ch->n_po == 0 && ch->sum_in < 0 &&
                       !ch->fold2d && o->rank == rank && dn_same_dims(o, rank, dims)) {
                if (mp_kfuse(k, ci) != MP_OK) break;
                dnnl_memory_desc_t md;
                dnnl_status_t s = dn_md_plain(&md, rank, o->dims);
                if (s != dnnl_success) return dn_dfail(k, s, "residual");
                dn_lay_find(k, c->in[oi], &md);
                DN(dnnl_post_ops_append_sum(ch->po, 1.0f), "sum post-op");
                ch->sum_in = base;
                ch->sum_md = md;
                ch->n_po++;
            } else {
                if (!v_first && (alg == dnnl_binary_sub || alg == dnnl_binary_div)) break;
                if (ch->n_bin >= 8) break;
                int64_t d2[2] = {1, 1};
                if (ch->fold2d && !fold_dims(o, rank, dims, d2)) break;
                dnnl_memory_desc_t md;
                dnnl_status_t s = ch->fold2d ? dn_md_plain(&md, 2, d2) : dn_md_plain_pad(&md, rank, o->rank, o->dims);
                if (s != dnnl_success) return dn_dfail(k, s, "binary post-op operand");
                if (ch->probe_a && !probe_fast(ch, alg, &md)) break; /* left to run on its own */
                if (mp_kfuse(k, ci) != MP_OK) break;
                bool laid = !ch->fold2d && o->rank == rank && dn_lay_find(k, c->in[oi], &md);
                ch->bin_cl[ch->n_bin] = !laid && ch->cl_rank == rank && dn_same_dims(o, rank, dims);
                if (ch->bin_cl[ch->n_bin] && (s = dn_md_nhwc(&md, rank, dims)) != dnnl_success)
                    return dn_dfail(k, s, "binary post-op operand");
                DN(dnnl_post_ops_append_binary(ch->po, alg, &md), "binary post-op");
                ch->bin_po[ch->n_bin] = ch->n_po;
                ch->bin_in[ch->n_bin] = base;
                ch->bin_alg[ch->n_bin] = alg;
                ch->bin_md[ch->n_bin] = md;
                ch->n_bin++;
                ch->n_po++;
            }
        } else {
            break;
        }
        v = c->out[0];
    }
    ch->final_v = v;
    return MP_OK;
}

mp_status dn_chain_init(mp_kctx *k, chain *ch) {
    memset(ch, 0, sizeof *ch);
    ch->bn_in = -1;
    ch->sum_in = -1;
    DN(dnnl_post_ops_create(&ch->po), "post-ops");
    return MP_OK;
}

/* Attach the chain's post-ops to attr and bind the binary operands. */
mp_status dn_chain_attr(mp_kctx *k, chain *ch, dnnl_primitive_attr_t attr) {
    if (ch->n_po) DN(dnnl_primitive_attr_set_post_ops(attr, ch->po), "set post-ops");
    return MP_OK;
}
mp_status dn_chain_bind(mp_kctx *k, dk *s, chain *ch) {
    for (int i = 0; i < ch->n_bin; i++) {
        int arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(ch->bin_po[i]) | DNNL_ARG_SRC_1;
        mp_status st;
        if (ch->bin_cl[i]) {
            const mp_rtensor *o = &k->in[ch->bin_in[i]];
            dnnl_memory_desc_t plain;
            void *buf;
            dnnl_status_t ds = dn_md_plain(&plain, o->rank, o->dims);
            if (ds) return dn_dfail(k, ds, "binary post-op operand");
            st = dn_dk_pre_reorder(k, s, ch->bin_in[i], &plain, &ch->bin_md[i], &buf);
            if (!st) st = dn_dk_arg(k, s, arg, &ch->bin_md[i], FROM_OWN, 0, buf);
        } else {
            st = dn_dk_arg(k, s, arg, &ch->bin_md[i], FROM_IN, ch->bin_in[i], NULL);
        }
        if (st) return st;
    }
    return MP_OK;
}

/* The attributes and post-ops a primitive descriptor was made with are
 * consumed: freed here, made or not. */
void dn_attr_done(dnnl_primitive_attr_t attr, chain *ch) {
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (ch && ch->po) {
        dnnl_post_ops_destroy(ch->po);
        ch->po = NULL;
    }
}

/* One place creating pd (and cleaning up attr, post-ops). */
mp_status dn_make_pd(mp_kctx *k, const void *desc, dnnl_primitive_attr_t attr, chain *ch,
                         dnnl_primitive_desc_t *pd) {
    dnnl_status_t s = dnnl_primitive_desc_create(pd, desc, attr, dn_eng, NULL);
    dn_attr_done(attr, ch);
    if (s != dnnl_success) return dn_dfail(k, s, "primitive descriptor");
    return MP_OK;
}

/* A primitive of one source (input 0) and one destination (output 0):
 * eltwise, reduction. */
mp_status dn_dk_src_dst(mp_kctx *k, dk *s, const void *desc, const dnnl_memory_desc_t *src,
                            const dnnl_memory_desc_t *dst, size_t *scratch) {
    mp_status st;
    dnnl_primitive_attr_t attr;
    if ((st = dn_attr_new(k, &attr))) return st;
    dnnl_primitive_desc_t pd;
    if ((st = dn_make_pd(k, desc, attr, NULL, &pd))) return st;
    st = dn_dk_arg(k, s, DNNL_ARG_SRC, src, FROM_IN, 0, NULL);
    if (!st) st = dn_dk_arg(k, s, DNNL_ARG_DST, dst, FROM_OUT, 0, NULL);
    if (!st) st = dn_dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

/* Whether every reader of value v takes a blocked layout: oneDNN Conv
 * (as its data input), pooling, and the element-wise ops oneDNN serves
 * whose own readers do (an Add joining two blocked branches). */

static bool readers_walk(const mp_graph *g, int v, int depth, int *budget);

/* The walk follows residual chains through a whole network (each block's
 * output feeds the next block's Add); a budget of node visits bounds it
 * on odd graphs (past it: plain). */
bool dn_readers_take_blocked(const mp_graph *g, int v, int depth) {
    int budget = 1 << 22;
    return readers_walk(g, v, depth, &budget);
}

static bool readers_walk(const mp_graph *g, int v, int depth, int *budget) {
    const mp_value *val = &g->values[v];
    *budget -= g->n_nodes;
    if (*budget < 0 || depth > 256 || (val->flags & MP_VAL_OUTPUT) || val->n_consumers <= 0 || val->rank < 3 ||
        !mp_shape_known(val))
        return false;
    int seen = 0, nu;
    const int *u = mp_uses(g, v, &nu);
    for (int i = 0; i < nu; i++) {
        if (i > 0 && u[i] == u[i - 1]) continue; /* a node reading v twice: its slots below */
        const mp_node *c = &g->nodes[u[i]];
        int slots = 0;
        for (int j = 0; j < c->n_in; j++) slots += c->in[j] == v;
        if (!slots) return false; /* a subgraph reads it */
        for (int j = 0; j < c->n_in; j++) {
            if (c->in[j] != v) continue;
            seen++;
            bool swap;
            dnnl_alg_kind_t alg;
            if (dn_is_op(c, "Conv")) {
                if (j != 0 || !dn_conv_ok(g, c, false)) return false;
            } else if (dn_is_op(c, "MaxPool") || dn_is_op(c, "AveragePool") || dn_is_op(c, "GlobalAveragePool") ||
                       dn_is_op(c, "GlobalMaxPool") || dn_is_op(c, "ReduceMean") || dn_is_op(c, "ReduceMax")) {
                if (j != 0 || !dn_pool_ok(g, c)) return false;
            } else if (dn_binary_of(c, &alg)) {
                const mp_value *a = dn_gval(g, c, 0), *b = dn_gval(g, c, 1), *y = dn_gout(g, c, 0);
                if (!a || !b || !y) return false;
                /* both of the output's dims, or v the full one and the
                 * other broadcast (a per-channel scale) */
                bool same = dn_same_dims(a, b->rank, b->dims);
                if (!same && !(dn_same_dims(val, y->rank, y->dims) && dn_binary_blocked_ok(g, c))) return false;
                if ((same && !dn_binary_ok(g, c, &swap)) || !readers_walk(g, c->out[0], depth + 1, budget))
                    return false;
            } else if (dn_is_op(c, "BatchNormalization")) { /* out as in: its readers too */
                if (j != 0 || !dn_batchnorm_ok(g, c) || !readers_walk(g, c->out[0], depth + 1, budget)) return false;
            } else if (dn_is_op(c, "Concat")) { /* writes plain itself when its readers want it */
                if (!dn_concat_ok(g, c)) return false;
            } else if (c->n_in == 1 && dn_eltwise_ok(g, c)) {
                if (!readers_walk(g, c->out[0], depth + 1, budget)) return false;
            } else {
                return false;
            }
        }
    }
    return seen > 0;
}