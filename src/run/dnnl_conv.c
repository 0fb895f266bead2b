/* The oneDNN glue (dnnl_int.h): Conv and ConvTranspose. */
#include "run/dnnl_int.h"

/* ---------------------------------------------------- Conv, ConvTranspose */

typedef struct convp {
    int sp;                        /* spatial dims */
    int64_t group;
    dnnl_dims_t stride, dil, pl, pr;
} convp;

/* Strides, dilations (oneDNN counts them from 0) and pads of node n with
 * input spatial dims xin, kernel ks, output spatial dims yout. */
static bool conv_params(const mp_node *n, int sp, const int64_t *xin, const int64_t *ks,
                        const int64_t *yout, bool transpose, convp *p) {
    const int64_t *v;
    int cnt;
    p->sp = sp;
    p->group = mp_attr_i(n, "group", 1);
    for (int i = 0; i < sp; i++) {
        p->stride[i] = 1;
        p->dil[i] = 0;
        p->pl[i] = p->pr[i] = 0;
    }
    if ((cnt = mp_attr_ints(n, "strides", &v)) >= 0) {
        if (cnt != sp) return false;
        for (int i = 0; i < sp; i++) p->stride[i] = v[i];
    }
    if ((cnt = mp_attr_ints(n, "dilations", &v)) >= 0) {
        if (cnt != sp) return false;
        for (int i = 0; i < sp; i++) p->dil[i] = v[i] - 1;
    }
    const char *ap = mp_attr_s(n, "auto_pad", "NOTSET");
    bool upper = mp_streq(ap, "SAME_UPPER"), lower = mp_streq(ap, "SAME_LOWER");
    if (!mp_streq(ap, "NOTSET") && !upper && !lower && !mp_streq(ap, "VALID")) return false;
    if (mp_streq(ap, "NOTSET") && (cnt = mp_attr_ints(n, "pads", &v)) >= 0) {
        if (cnt != 2 * sp) return false;
        for (int i = 0; i < sp; i++) {
            p->pl[i] = v[i];
            p->pr[i] = v[sp + i];
        }
    }
    for (int i = 0; i < sp; i++) {
        int64_t ke = (ks[i] - 1) * (p->dil[i] + 1) + 1;
        if (!transpose) {
            if (upper || lower) {
                int64_t tot = (yout[i] - 1) * p->stride[i] + ke - xin[i];
                if (tot < 0) tot = 0;
                p->pl[i] = upper ? tot / 2 : tot - tot / 2;
            }
            /* the right pad that gives exactly the inferred output (a
             * strided window may leave the last rows unread: pad 0) */
            p->pr[i] = (yout[i] - 1) * p->stride[i] + ke - xin[i] - p->pl[i];
            if (p->pr[i] < 0) p->pr[i] = 0;
            int64_t span = xin[i] + p->pl[i] + p->pr[i] - ke;
            if (p->pl[i] < 0 || span < 0 || span / p->stride[i] + 1 != yout[i]) return false;
        } else {
            const int64_t *op = NULL;
            int no = mp_attr_ints(n, "output_padding", &op);
            int64_t opad = (no == sp) ? op[i] : 0;
            if (upper || lower || mp_attr_ints(n, "output_shape", &v) >= 0) {
                int64_t tot = p->stride[i] * (xin[i] - 1) + opad + ke - yout[i];
                p->pl[i] = upper ? tot / 2 : tot - tot / 2;
            }
            p->pr[i] = (xin[i] - 1) * p->stride[i] + ke - p->pl[i] - yout[i];
            if (p->pr[i] < 0 || p->pl[i] < 0) return false;
        }
    }
    return true;
}

bool dn_conv_ok(const mp_graph *g, const mp_node *n, bool transpose) {
    const mp_value *x = dn_gval(g, n, 0), *w = dn_gval(g, n, 1), *b = dn_gval(g, n, 2), *y = dn_gout(g, n, 0);
    if (!dn_is_f32(x) || !dn_is_wt(g, w) || !dn_is_f32(y) || (b && !dn_is_wt(g, b))) return false;
    if (x->rank < 3 || x->rank > 5 || w->rank != x->rank || y->rank != x->rank) return false;
    convp p;
    if (!conv_params(n, x->rank - 2, x->dims + 2, w->dims + 2, y->dims + 2, transpose, &p)) return false;
    if (p.group < 1 || x->dims[1] % p.group) return false;
    if (!transpose && (w->dims[0] % p.group || w->dims[1] * p.group != x->dims[1])) return false;
    if (transpose && w->dims[0] != x->dims[1]) return false;
    if (b && mp_value_numel(b) != y->dims[1]) return false;
    return true;
}

/* ------------------------------------------ the convolution chosen per shape
 * oneDNN offers more than one implementation of a convolution on the same
 * layouts (its primitive descriptor iterator, best first by its own
 * ranking): on AVX2 the direct jit kernels (jit:avx2, jit_1x1:avx2) and
 * the GEMM-based one (gemm:jit: im2col, then its sgemm), on AVX-512 also
 * brgemm ones (brgconv). Its ranking is a rule, not a measurement, and
 * which is fastest depends on the CPU's caches and the shape (issue 35:
 * the 3x3 convolutions on 7x7 and 14x14 maps of ResNet-50 on an AVX2 EPYC).
 * So a convolution with constant weights and at least CONV_MIN_FLOPS is
 * timed once at plan time on each implementation the iterator gives for
 * its layouts and post-ops (reference ones left out), with the GEMM
 * chooser's timing (dn_time_choose), and keeps the fastest; the choice is
 * kept per shape, chain and thread count for the process. Source,
 * destination, bias and post-op operands are the same for all: only the
 * weights' layout (reordered once for each) and the scratchpad differ. */

#define CONV_MIN_FLOPS 4e6
#define CONV_KEYLEN 200

typedef struct conv_cand {
    dnnl_primitive_desc_t pd;
    const char *impl;
} conv_cand;

static const char *g_conv_force;   /* tests: an implementation name prefix */

const char *mp_dnnl_conv_force(const char *impl_prefix) {
    const char *old = g_conv_force;
    g_conv_force = impl_prefix;
    return old;
}

typedef struct conv_memo {
    char key[CONV_KEYLEN];
    char impl[48];
} conv_memo;
static pthread_mutex_t g_conv_mu = PTHREAD_MUTEX_INITIALIZER;
static conv_memo g_conv_memo[128];
static int g_conv_nmemo;

/* The kernel name that says which family ran (names outlive the plan:
 * string constants). */
static const char *conv_kname(const char *impl) {
    if (strncmp(impl, "gemm", 4) == 0) return "onednn:conv:gemm";
    if (strncmp(impl, "brgconv_1x1", 11) == 0) return "onednn:conv:brgemm_1x1";
    if (strncmp(impl, "brg", 3) == 0) return "onednn:conv:brgemm";
    if (strncmp(impl, "jit_1x1", 7) == 0) return "onednn:conv:jit_1x1";
    if (strncmp(impl, "jit", 3) == 0) return "onednn:conv:jit";
    return "onednn:conv";
}

/* The implementations oneDNN has for cd with attr, best first, reference
 * ones, SSE4.1 ones (and AVX2 ones when the first is AVX-512) and
 * repeats of a name left out: cands[0] is what
 * dnnl_primitive_desc_create gives. Returns how many (0: none). */
static int conv_candidates(const dnnl_convolution_desc_t *cd, const_dnnl_primitive_attr_t attr,
                           conv_cand *cands, int max) {
    dnnl_primitive_desc_iterator_t it;
    if (dnnl_primitive_desc_iterator_create(&it, cd, attr, dn_eng, NULL) != dnnl_success) return 0;
    int n = 0;
    do {
        dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
        if (!pd) break;
        const char *impl = dn_pd_impl(pd);
        /* reference code, and SSE4.1 kernels beside AVX ones, never win */
        bool keep = strncmp(impl, "ref", 3) != 0 && !strstr(impl, "sse41") && n < max;
        /* nor AVX2 ones beside AVX-512 ones (a shorter vector on the same
         * core): fewer to time at plan time */
        if (keep && n > 0 && strstr(cands[0].impl, "avx512") && strstr(impl, "avx2")) keep = false;
        for (int i = 0; keep && i < n; i++)
            if (strcmp(cands[i].impl, impl) == 0) keep = false;
        if (keep) {
            cands[n].pd = pd;
            cands[n].impl = impl;
            n++;
        } else {
            dnnl_primitive_desc_destroy(pd);
        }
    } while (n < max && dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    dnnl_primitive_desc_iterator_destroy(it);
    return n;
}

/* One candidate ready to run on the timing buffers: its primitive, its
 * weights in its layout, its arguments. */
typedef struct conv_trial {
    dnnl_primitive_t prim;
    void *wbuf;
    dnnl_memory_t wmem, smem;
    dnnl_exec_arg_t ex[DK_MAXARG];
    int n;
} conv_trial;

typedef struct conv_time_ctx {
    conv_trial *tr;
} conv_time_ctx;

static mp_status conv_time_call(void *ctx, int c) {
    conv_trial *t = &((conv_time_ctx *)ctx)->tr[c];
    if (dnnl_primitive_execute(t->prim, dn_strm, t->n, t->ex) != dnnl_success ||
        dnnl_stream_wait(dn_strm) != dnnl_success)
        return mp_error(MP_ERR_UNSUPPORTED, "a convolution candidate failed to run at plan time");
    return MP_OK;
}

static void conv_trial_free(conv_trial *t, bool keep_prim_and_w) {
    if (!keep_prim_and_w) {
        if (t->prim) dnnl_primitive_destroy(t->prim);
        free(t->wbuf);
        if (t->wmem) dnnl_memory_destroy(t->wmem);
    }
    if (t->smem) dnnl_memory_destroy(t->smem);
    memset(t, 0, sizeof *t);
}

/* Candidate c's primitive, its weights (plain wplain data w reordered into
 * its layout) and its argument list: s's, with the weights and scratchpad
 * its own (scratchpad on scr). */
static mp_status conv_trial_make(mp_kctx *k, dk *s, const conv_cand *c, const dnnl_memory_desc_t *wplain,
                                 const float *w, void *scr, conv_trial *t) {
    memset(t, 0, sizeof *t);
    const dnnl_memory_desc_t *wq = dnnl_primitive_desc_query_md(c->pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *sq = dnnl_primitive_desc_query_md(c->pd, dnnl_query_scratchpad_md, 0);
    size_t wsz = dnnl_memory_desc_get_size(wq);
    if (posix_memalign(&t->wbuf, 64, wsz ? wsz : 64) != 0) {
        t->wbuf = NULL;
        return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
    }
    DN(dnnl_primitive_create(&t->prim, c->pd), "primitive");
    dnnl_memory_t src = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t r = NULL;
    dnnl_status_t ds = dnnl_memory_create(&src, wplain, dn_eng, (void *)w);
    if (!ds) ds = dnnl_memory_create(&t->wmem, wq, dn_eng, t->wbuf);
    if (!ds) ds = dnnl_reorder_primitive_desc_create(&rpd, wplain, dn_eng, wq, dn_eng, NULL);
    if (!ds) ds = dnnl_primitive_create(&r, rpd);
    if (!ds) {
        dnnl_exec_arg_t ex[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, t->wmem}};
        ds = dnnl_primitive_execute(r, dn_strm, 2, ex);
        if (!ds) ds = dnnl_stream_wait(dn_strm);
    }
    if (r) dnnl_primitive_destroy(r);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (src) dnnl_memory_destroy(src);
    if (ds) return dn_dfail(k, ds, "weights reorder");
    if (sq && dnnl_memory_desc_get_size(sq)) DN(dnnl_memory_create(&t->smem, sq, dn_eng, scr), "memory");
    for (int i = 0; i < s->n; i++) {
        if (s->ex[i].arg == DNNL_ARG_SCRATCHPAD) continue;
        t->ex[t->n] = s->ex[i];
        if (s->ex[i].arg == DNNL_ARG_WEIGHTS) t->ex[t->n].memory = t->wmem;
        t->n++;
    }
    if (t->smem && t->n < DK_MAXARG) t->ex[t->n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, t->smem};
    return MP_OK;
}

/* Time cands (cands[0] the one s runs) once per key and make s run the
 * fastest; *scratch grows to its scratchpad. w: the constant weights as
 * the plain layout wplain (BatchNorm folded). */
static mp_status conv_choose(mp_kctx *k, dk *s, conv_cand *cands, int nc, const char *key,
                             const dnnl_memory_desc_t *wplain, const float *w, size_t *scratch) {
    int choice = -1;
    if (g_conv_force) {
        for (int i = 0; i < nc && choice < 0; i++)
            if (strncmp(cands[i].impl, g_conv_force, strlen(g_conv_force)) == 0) choice = i;
        if (choice < 0) choice = 0;
    } else {
        pthread_mutex_lock(&g_conv_mu);
        for (int i = 0; i < g_conv_nmemo && choice < 0; i++)
            if (strcmp(g_conv_memo[i].key, key) == 0)
                for (int j = 0; j < nc; j++)
                    if (strcmp(cands[j].impl, g_conv_memo[i].impl) == 0) choice = j;
        pthread_mutex_unlock(&g_conv_mu);
    }
    size_t smax = 0;
    for (int i = 0; i < nc; i++) {
        const dnnl_memory_desc_t *sq = dnnl_primitive_desc_query_md(cands[i].pd, dnnl_query_scratchpad_md, 0);
        size_t sz = sq ? dnnl_memory_desc_get_size(sq) : 0;
        if (sz > smax) smax = sz;
    }
    conv_trial tr[DN_MAXCAND];
    memset(tr, 0, sizeof tr);
    void *scr = NULL, *bufs[DK_MAXARG] = {NULL};
    mp_status st = MP_OK;
    if (choice < 0) {
        /* timing buffers (zeros: no NaN, no denormal) for what s reads and
         * writes at run time; the kernel's own buffers are used as they are */
        bool ok = !smax || (scr = calloc(1, smax));
        for (int i = 0; ok && i < s->n; i++) {
            int a = s->ex[i].arg;
            if (a == DNNL_ARG_SCRATCHPAD || a == DNNL_ARG_WEIGHTS || a == DNNL_ARG_BIAS) continue;
            const dnnl_memory_desc_t *md = NULL;
            if (dnnl_memory_get_memory_desc(s->ex[i].memory, &md) != dnnl_success || !md) {
                ok = false;
                break;
            }
            size_t sz = dnnl_memory_desc_get_size(md);
            if (!(bufs[i] = calloc(1, sz ? sz : 64)) ||
                dnnl_memory_set_data_handle(s->ex[i].memory, bufs[i]) != dnnl_success)
                ok = false;
            if (s->from[i] != FROM_OWN) s->last[i] = NULL; /* dn_dk_run sets the run's again */
        }
        if (!ok) st = mp_error(MP_ERR_NOMEM, "node %s: out of memory timing convolutions", k->n->name);
        int nt = 0;
        for (; !st && nt < nc; nt++) st = conv_trial_make(k, s, &cands[nt], wplain, w, scr, &tr[nt]);
        /* the residual a sum post-op reads from the destination: put there
         * before each call by the run, here the zeros stay (a sum of zeros
         * keeps them zeros) */
        conv_time_ctx tc = {tr};
        choice = 0;
        if (!st) st = dn_time_choose(nc, conv_time_call, &tc, &choice);
        if (!st) {
            pthread_mutex_lock(&g_conv_mu);
            if (g_conv_nmemo < (int)(sizeof g_conv_memo / sizeof g_conv_memo[0])) {
                conv_memo *mm = &g_conv_memo[g_conv_nmemo++];
                snprintf(mm->key, sizeof mm->key, "%s", key);
                snprintf(mm->impl, sizeof mm->impl, "%s", cands[choice].impl);
            }
            pthread_mutex_unlock(&g_conv_mu);
        }
        for (int i = 0; i < nt; i++) conv_trial_free(&tr[i], false);
        for (int i = 0; i < s->n; i++) /* the kernel's own buffers back in place */
            if (bufs[i] && s->from[i] == FROM_OWN && s->last[i] &&
                dnnl_memory_set_data_handle(s->ex[i].memory, s->last[i]) != dnnl_success && !st)
                st = mp_error(MP_ERR_UNSUPPORTED, "node %s: oneDNN refused a data handle", k->n->name);
        free(scr);
        for (int i = 0; i < DK_MAXARG; i++) free(bufs[i]);
        if (st) return st;
    }
    k->kname = conv_kname(cands[choice].impl);
    if (choice == 0) return MP_OK;
    /* candidate `choice` replaces the primitive s made: its primitive, its
     * weights, its scratchpad */
    conv_trial t;
    if ((st = conv_trial_make(k, s, &cands[choice], wplain, w, NULL, &t))) {
        conv_trial_free(&t, false);
        return st;
    }
    for (int i = 0; i < s->n; i++) {
        if (s->ex[i].arg != DNNL_ARG_WEIGHTS) continue;
        int j = 0;
        while (j < s->n_own && s->own[j] != s->last[i]) j++;
        if (j < s->n_own) free(s->own[j]);
        else if (s->n_own < DK_MAXOWN) s->n_own++;
        else break;
        s->own[j] = t.wbuf;
        dnnl_memory_destroy(s->ex[i].memory);
        s->ex[i].memory = t.wmem;
        s->from[i] = FROM_OWN;
        s->last[i] = t.wbuf;
        t.wbuf = NULL;
        t.wmem = NULL;
    }
    if (t.wbuf) {
        conv_trial_free(&t, false);
        return mp_error(MP_ERR_LIMIT, "node %s: no room for the chosen convolution's weights", k->n->name);
    }
    for (int i = 0; i < s->n; i++) /* the old scratchpad argument goes */
        if (s->ex[i].arg == DNNL_ARG_SCRATCHPAD) {
            dnnl_memory_destroy(s->ex[i].memory);
            s->n--;
            s->ex[i] = s->ex[s->n];
            s->from[i] = s->from[s->n];
            s->idx[i] = s->idx[s->n];
            s->last[i] = s->last[s->n];
            i--;
        }
    dnnl_primitive_destroy(s->prim);
    s->prim = t.prim;
    t.prim = NULL;
    conv_trial_free(&t, false);
    const dnnl_memory_desc_t *sq = dnnl_primitive_desc_query_md(cands[choice].pd, dnnl_query_scratchpad_md, 0);
    size_t sz = sq ? dnnl_memory_desc_get_size(sq) : 0;
    if (sz) {
        if ((st = dn_dk_arg(k, s, DNNL_ARG_SCRATCHPAD, sq, FROM_SCRATCH, 0, NULL))) return st;
        if (scratch && *scratch < sz) *scratch = sz;
    }
    return MP_OK;
}

static mp_status conv_prepare_any(mp_kctx *k, size_t *scratch, bool transpose) {
    const mp_graph *g = k->g;
    const mp_node *n = k->n;
    const mp_value *x = dn_gval(g, n, 0), *w = dn_gval(g, n, 1), *y = dn_gout(g, n, 0);
    bool has_b = n->n_in > 2 && n->in[2] >= 0;
    int r = x->rank, sp = r - 2;
    convp p;
    conv_params(n, sp, x->dims + 2, w->dims + 2, y->dims + 2, transpose, &p);
    /* the implementations to time (the convolution chosen per shape);
     * declared before the first goto to fail, which frees them */
    conv_cand cands[DN_MAXCAND];
    int ncand = 0;
    dk *s;
    mp_status st = dn_dk_new(k, &s);
    if (st) return st;

    const float *wd = NULL, *bd = NULL;
    if ((st = dn_const_f32(k, s, 1, &wd))) return st;
    if (has_b && (st = dn_const_f32(k, s, 2, &bd))) return st;

    chain ch;
    if ((st = dn_chain_init(k, &ch))) return st;
    ch.cl_rank = sp >= 1 ? y->rank : 0; /* the Conv computes channels-last (below) */
    /* BN folds only into constant weights (and a constant bias or none) */
    bool can_fold = !transpose && wd && (!has_b || bd);
    if ((st = dn_absorb_chain(k, n->out[0], y->rank, y->dims, can_fold, &ch))) goto fail;

    int64_t cout = y->dims[1], cin = x->dims[1], G = p.group;
    /* weights as oneDNN sees them: [G,] O, I, k... */
    int64_t wdims[DNNL_MAX_NDIMS];
    int wr = 0;
    if (G > 1) wdims[wr++] = G;
    wdims[wr++] = cout / G;
    wdims[wr++] = cin / G;
    for (int i = 0; i < sp; i++) wdims[wr++] = w->dims[2 + i];
    dnnl_memory_desc_t xmd, wplain, wmd, bmd, ymd;
    dnnl_status_t ds;
    if ((ds = dn_md_plain(&xmd, r, x->dims)) || (ds = dn_md_plain(&ymd, r, y->dims))) goto dfail_;
    if (!transpose) {
        ds = dn_md_plain(&wplain, wr, wdims);     /* ONNX [O, I/G, k] is [G, O/G, I/G, k] */
    } else {
        /* ONNX [I, O/G, k] = [G, I/G, O/G, k]: oneDNN's (g)iohw */
        static const dnnl_format_tag_t t1[] = {dnnl_bac, dnnl_bacd, dnnl_bacde};
        static const dnnl_format_tag_t tg[] = {dnnl_acbd, dnnl_acbde, dnnl_acbdef};
        dnnl_dims_t d;
        for (int i = 0; i < wr; i++) d[i] = wdims[i];
        ds = dnnl_memory_desc_init_by_tag(&wplain, wr, d, dnnl_f32, G > 1 ? tg[sp - 1] : t1[sp - 1]);
    }
    if (ds) goto dfail_;
    /* weights in the primitive's layout: reordered once when constant,
     * at each run when computed (a plain weight would pick oneDNN's
     * reference convolution next to channels-last data) */
    ds = dn_md_any(&wmd, wr, wdims);
    if (ds) goto dfail_;
    bool bias = has_b || ch.bn_in >= 0;
    if ((ds = dn_md_plain(&bmd, 1, &cout))) goto dfail_;

    /* activations: the input as its producer left it; the output blocked
     * when every reader takes it (and the layout is of the plain size) */
    /* oneDNN's fast convolutions are channels-last (or channel-blocked)
     * ones; on plain NCHW it falls back to im2col+GEMM (1x1 convs at a
     * few GFLOPS) or to its reference code when the two sides differ. So
     * a Conv always computes channels-last: a plain input is reordered
     * first (once per run, into the kernel's buffer), and a plain output
     * (one a portable kernel or the caller reads) is reordered after. */
    bool in_blocked = dn_lay_find(k, n->in[0], &xmd);
    bool want_blocked = k->ex && !k->fold && dn_readers_take_blocked(g, ch.final_v, 0);
    void *xown = NULL;
    if (!in_blocked && sp >= 1) {
        dnnl_memory_desc_t xplain = xmd;
        if ((ds = dn_md_nhwc(&xmd, r, x->dims))) goto dfail_;
        if ((st = dn_dk_pre_reorder(k, s, 0, &xplain, &xmd, &xown))) goto fail;
        in_blocked = true;
    }
    /* binary post-op operands are read in the output's layout: a residual
     * of the output's size is channels-last already, or made so (chain) */
    bool reorder_out = in_blocked && !want_blocked;
    if (reorder_out) want_blocked = true;
    dnnl_memory_desc_t yany;
    if (want_blocked && (ds = dn_md_nhwc(&yany, r, y->dims))) goto dfail_;
    dnnl_primitive_desc_t pd = NULL;
    void *yown = NULL;
    double flops = 2.0 * (double)dn_numel_of(y->rank, y->dims) * (double)(cin / G);
    for (int i = 0; i < sp; i++) flops *= (double)w->dims[2 + i];
    bool timed = !transpose && wd && (g_conv_force || flops >= CONV_MIN_FLOPS);
    for (int attempt = want_blocked ? 0 : 1; attempt < 2; attempt++) {
        const dnnl_memory_desc_t *yd = attempt == 0 ? &yany : &ymd;
        dnnl_primitive_attr_t attr;
        if ((st = dn_attr_new(k, &attr))) goto fail;
        if ((st = dn_chain_attr(k, &ch, attr))) { dnnl_primitive_attr_destroy(attr); goto fail; }
        if (!transpose) {
            dnnl_convolution_desc_t cd;
            ds = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
                                                            &xmd, &wmd, bias ? &bmd : NULL, yd, p.stride,
                                                            p.dil, p.pl, p.pr);
            if (!ds) ds = dnnl_primitive_desc_create(&pd, &cd, attr, dn_eng, NULL);
            if (!ds && timed) {
                for (int i = 0; i < ncand; i++) dnnl_primitive_desc_destroy(cands[i].pd);
                ncand = conv_candidates(&cd, attr, cands, DN_MAXCAND);
                /* the iterator's first is the one made above, else no choice */
                if (ncand && strcmp(cands[0].impl, dn_pd_impl(pd)) != 0) {
                    for (int i = 0; i < ncand; i++) dnnl_primitive_desc_destroy(cands[i].pd);
                    ncand = 0;
                }
            }
        } else {
            dnnl_deconvolution_desc_t cd;
            ds = dnnl_dilated_deconvolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                              dnnl_deconvolution_direct, &xmd, &wmd,
                                                              bias ? &bmd : NULL, yd, p.stride, p.dil, p.pl, p.pr);
            if (!ds) ds = dnnl_primitive_desc_create(&pd, &cd, attr, dn_eng, NULL);
        }
        dnnl_primitive_attr_destroy(attr);
        if (ds) goto dfail_;
        if (attempt == 0) {
            const dnnl_memory_desc_t *got = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
            if (reorder_out) {
                dnnl_memory_desc_t plain = ymd;
                ymd = *got;
                if (!dnnl_memory_desc_equal(&plain, &ymd)) {
                    void *buf;
                    if ((st = dn_dk_post_reorder(k, s, &ymd, &plain, &buf))) {
                        dnnl_primitive_desc_destroy(pd);
                        goto fail;
                    }
                    yown = buf;
                }
                break;
            }
            if (dnnl_memory_desc_get_size(got) == dnnl_memory_desc_get_size(&ymd)) {
                dnnl_memory_desc_t plain = ymd;
                ymd = *got;
                /* a plain choice needs no record */
                if (!dnnl_memory_desc_equal(&plain, &ymd) && !dn_lay_add(k, s, ch.final_v, &ymd)) {
                    st = mp_error(MP_ERR_NOMEM, "node %s: out of memory", n->name);
                    dnnl_primitive_desc_destroy(pd);
                    goto fail;
                }
                break;
            }
            dnnl_primitive_desc_destroy(pd);
            pd = NULL;
        }
    }
    dnnl_post_ops_destroy(ch.po);
    ch.po = NULL;

    /* weights (and bias) with the BatchNormalization folded in */
    const float *wuse = wd, *buse = bd;
    if (ch.bn_in >= 0) {
        const float *sc, *sh, *mean, *var;
        if ((st = dn_const_f32(k, s, ch.bn_in, &sc)) || (st = dn_const_f32(k, s, ch.bn_in + 1, &sh)) ||
            (st = dn_const_f32(k, s, ch.bn_in + 2, &mean)) || (st = dn_const_f32(k, s, ch.bn_in + 3, &var)))
            goto fail_pd;
        if (!sc || !sh || !mean || !var) {
            st = mp_error(MP_ERR_USAGE, "node %s: BatchNormalization parameters have no data at plan time", n->name);
            goto fail_pd;
        }
        int64_t per = w->rank > 0 ? dn_numel_of(w->rank, w->dims) / cout : 0;
        float *wf = dn_dk_alloc_own(s, (size_t)(cout * per) * sizeof(float));
        float *bf = dn_dk_alloc_own(s, (size_t)cout * sizeof(float));
        if (!wf || !bf) { st = mp_error(MP_ERR_NOMEM, "node %s: out of memory folding BatchNormalization", n->name); goto fail_pd; }
        for (int64_t o = 0; o < cout; o++) {
            float f = sc[o] / sqrtf(var[o] + ch.bn_eps);
            for (int64_t j = 0; j < per; j++) wf[o * per + j] = wd[o * per + j] * f;
            bf[o] = ((bd ? bd[o] : 0.0f) - mean[o]) * f + sh[o];
        }
        wuse = wf;
        buse = bf;
    }
    st = dn_dk_arg(k, s, DNNL_ARG_SRC, &xmd, xown ? FROM_OWN : FROM_IN, 0, xown);
    if (!st) st = dn_dk_arg(k, s, DNNL_ARG_DST, &ymd, yown ? FROM_OWN : FROM_OUT, 0, yown);
    if (!st) {
        const dnnl_memory_desc_t *wq = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        if (wuse) {
            st = dn_bind_reordered(k, s, DNNL_ARG_WEIGHTS, &wplain, wuse, wq);
        } else if (dnnl_memory_desc_equal(wq, &wplain)) {
            st = dn_dk_arg(k, s, DNNL_ARG_WEIGHTS, &wplain, FROM_IN, 1, NULL);
        } else {
            void *wbuf;
            st = dn_dk_pre_reorder(k, s, 1, &wplain, wq, &wbuf);
            if (!st) st = dn_dk_arg(k, s, DNNL_ARG_WEIGHTS, wq, FROM_OWN, 0, wbuf);
        }
    }
    if (!st && bias) {
        if (buse) st = dn_dk_arg(k, s, DNNL_ARG_BIAS, &bmd, FROM_OWN, 0, (void *)buse);
        else st = dn_dk_arg(k, s, DNNL_ARG_BIAS, &bmd, FROM_IN, 2, NULL);
    }
    if (!st) st = dn_chain_bind(k, s, &ch);
    if (!st && ch.sum_in >= 0) st = dn_dk_sum_source(k, s, ch.sum_in, &ch.sum_md, &ymd, yown);
    if (!st) st = dn_dk_finish(k, s, pd, scratch);
    if (!st && wuse && (ncand >= 2 || (g_conv_force && ncand >= 1))) {
        char key[CONV_KEYLEN];
        snprintf(key, sizeof key,
                 "x%lldx%lldx%lldx%lld w%lldx%lldx%lld s%lld,%lld p%lld,%lld,%lld,%lld d%lld g%lld po%d,%d,%d l%d%d t%d %s",
                 (long long)x->dims[0], (long long)cin, (long long)x->dims[2], (long long)(sp > 1 ? x->dims[3] : 1),
                 (long long)cout, (long long)w->dims[2], (long long)(sp > 1 ? w->dims[3] : 1),
                 (long long)p.stride[0], (long long)(sp > 1 ? p.stride[1] : 1), (long long)p.pl[0],
                 (long long)p.pr[0], (long long)(sp > 1 ? p.pl[1] : 0), (long long)(sp > 1 ? p.pr[1] : 0),
                 (long long)p.dil[0], (long long)G, ch.n_po, ch.n_bin, ch.sum_in >= 0, in_blocked ? 1 : 0,
                 reorder_out ? 1 : 0, s->threads, cands[0].impl);
        if (sp == 2) st = conv_choose(k, s, cands, ncand, key, &wplain, wuse, scratch);
    }
fail_pd:
    for (int i = 0; i < ncand; i++) dnnl_primitive_desc_destroy(cands[i].pd);
    dnnl_primitive_desc_destroy(pd);
    return st;
dfail_:
    st = dn_dfail(k, ds, "memory descriptor");
fail:
    for (int i = 0; i < ncand; i++) dnnl_primitive_desc_destroy(cands[i].pd);
    if (ch.po) dnnl_post_ops_destroy(ch.po);
    return st;
}

mp_status dn_conv_prepare(mp_kctx *k, size_t *scratch) { return conv_prepare_any(k, scratch, false); }
mp_status dn_convt_prepare(mp_kctx *k, size_t *scratch) { return conv_prepare_any(k, scratch, true); }