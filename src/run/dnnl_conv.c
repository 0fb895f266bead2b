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

static mp_status conv_prepare_any(mp_kctx *k, size_t *scratch, bool transpose) {
    const mp_graph *g = k->g;
    const mp_node *n = k->n;
    const mp_value *x = dn_gval(g, n, 0), *w = dn_gval(g, n, 1), *y = dn_gout(g, n, 0);
    bool has_b = n->n_in > 2 && n->in[2] >= 0;
    int r = x->rank, sp = r - 2;
    convp p;
    conv_params(n, sp, x->dims + 2, w->dims + 2, y->dims + 2, transpose, &p);
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
    bool want_blocked = k->ex && dn_readers_take_blocked(g, ch.final_v, 0);
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
fail_pd:
    dnnl_primitive_desc_destroy(pd);
    return st;
dfail_:
    st = dn_dfail(k, ds, "memory descriptor");
fail:
    if (ch.po) dnnl_post_ops_destroy(ch.po);
    return st;
}

mp_status dn_conv_prepare(mp_kctx *k, size_t *scratch) { return conv_prepare_any(k, scratch, false); }
mp_status dn_convt_prepare(mp_kctx *k, size_t *scratch) { return conv_prepare_any(k, scratch, true); }