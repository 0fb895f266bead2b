/* The oneDNN glue (dnnl_int.h): pooling, Softmax and LogSoftmax, layer and
 * batch normalization, element-wise unary and binary operators, Transpose. */
#include "run/dnnl_int.h"

/* ----------------------------------------------------------------- pooling */

/* ReduceMean or ReduceMax over exactly the spatial axes of an N, C,
 * spatial... tensor (the dynamo exporter's global pooling: `x.mean((2,
 * 3))`), keeping them or not: a global pooling. */
static bool reduce_global(const mp_graph *g, const mp_node *n) {
    if (!(dn_is_op(n, "ReduceMean") || dn_is_op(n, "ReduceMax")) || n->n_out != 1) return false;
    const mp_value *x = dn_gval(g, n, 0), *y = dn_gout(g, n, 0);
    if (!dn_is_f32(x) || !dn_is_f32(y) || x->rank < 3 || x->rank > 5 || !mp_shape_known(x)) return false;
    int r = x->rank;
    int64_t ax[8];
    int na = -1;
    const int64_t *v;
    if (n->n_in >= 2 && n->in[1] >= 0) {
        const mp_value *a = &g->values[n->in[1]];
        if (a->kn < 1 || a->kn > 8 || !a->iv) return false;
        na = (int)a->kn;
        for (int i = 0; i < na; i++) ax[i] = a->iv[i];
    } else if ((na = mp_attr_ints(n, "axes", &v)) >= 1 && na <= 8) {
        for (int i = 0; i < na; i++) ax[i] = v[i];
    } else {
        return false;
    }
    if (na != r - 2) return false;
    unsigned seen = 0;
    for (int i = 0; i < na; i++) {
        int64_t a = ax[i] < 0 ? ax[i] + r : ax[i];
        if (a < 2 || a >= r || (seen & (1u << a))) return false;
        seen |= 1u << a;
    }
    bool keep = mp_attr_i(n, "keepdims", 1) != 0;
    if (y->rank != (keep ? r : 2) || y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1]) return false;
    for (int i = 2; i < y->rank; i++)
        if (y->dims[i] != 1) return false;
    return true;
}

static bool pool_params(const mp_graph *g, const mp_node *n, dnnl_dims_t ks, dnnl_dims_t st,
                        dnnl_dims_t dil, dnnl_dims_t pl, dnnl_dims_t pr, dnnl_alg_kind_t *alg) {
    const mp_value *x = dn_gval(g, n, 0), *y = dn_gout(g, n, 0);
    bool reduce = reduce_global(g, n);
    if (!dn_is_f32(x) || !dn_is_f32(y) || x->rank < 3 || x->rank > 5 || (y->rank != x->rank && !reduce)) return false;
    for (int j = 1; j < n->n_out; j++)
        if (n->out[j] >= 0) return false;  /* MaxPool's Indices */
    int sp = x->rank - 2;
    bool global = dn_is_op(n, "GlobalAveragePool") || dn_is_op(n, "GlobalMaxPool") || reduce;
    bool avg = dn_is_op(n, "AveragePool") || dn_is_op(n, "GlobalAveragePool") || dn_is_op(n, "ReduceMean");
    if (global) {
        for (int i = 0; i < sp; i++) {
            ks[i] = x->dims[2 + i];
            st[i] = 1;
            dil[i] = pl[i] = pr[i] = 0;
        }
        *alg = avg ? dnnl_pooling_avg_exclude_padding : dnnl_pooling_max;
        return true;
    }
    const int64_t *v;
    if (mp_attr_ints(n, "kernel_shape", &v) != sp) return false;
    if (mp_attr_i(n, "storage_order", 0) != 0) return false;
    int64_t kse[DNNL_MAX_NDIMS];
    for (int i = 0; i < sp; i++) {
        ks[i] = v[i];
        st[i] = 1;
        dil[i] = pl[i] = pr[i] = 0;
    }
    int cnt;
    if ((cnt = mp_attr_ints(n, "strides", &v)) >= 0) {
        if (cnt != sp) return false;
        for (int i = 0; i < sp; i++) st[i] = v[i];
    }
    if ((cnt = mp_attr_ints(n, "dilations", &v)) >= 0) {
        if (cnt != sp) return false;
        for (int i = 0; i < sp; i++) dil[i] = v[i] - 1;
    }
    const char *ap = mp_attr_s(n, "auto_pad", "NOTSET");
    bool upper = mp_streq(ap, "SAME_UPPER"), lower = mp_streq(ap, "SAME_LOWER");
    if ((cnt = mp_attr_ints(n, "pads", &v)) >= 0 && mp_streq(ap, "NOTSET")) {
        if (cnt != 2 * sp) return false;
        for (int i = 0; i < sp; i++) {
            pl[i] = v[i];
            pr[i] = v[sp + i];
        }
    }
    bool incl = avg && mp_attr_i(n, "count_include_pad", 0) != 0;
    for (int i = 0; i < sp; i++) {
        kse[i] = (ks[i] - 1) * (dil[i] + 1) + 1;
        int64_t in = x->dims[2 + i], out = y->dims[2 + i];
        if (upper || lower) {
            int64_t tot = (out - 1) * st[i] + kse[i] - in;
            if (tot < 0) tot = 0;
            pl[i] = upper ? tot / 2 : tot - tot / 2;
            pr[i] = tot - pl[i];
        }
        int64_t need = (out - 1) * st[i] + kse[i] - in - pl[i];
        if (need < 0 && pr[i] == 0 && (in + pl[i] - kse[i]) >= 0 && (in + pl[i] - kse[i]) / st[i] + 1 == out)
            need = 0;  /* a strided window leaves the last rows unread */
        /* ceil_mode's extra window reaches past the pads: counted only
         * when padding is excluded (what ONNX Runtime does) */
        if (need != pr[i] && incl) return false;
        if (need < 0) return false;
        /* a window wholly in the pad gives -inf/NaN in oneDNN */
        if (need >= kse[i] || pl[i] >= kse[i]) return false;
        pr[i] = need;
    }
    *alg = !avg ? dnnl_pooling_max : incl ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding;
    return true;
}

bool dn_pool_ok(const mp_graph *g, const mp_node *n) {
    dnnl_dims_t a, b, c, d, e;
    dnnl_alg_kind_t alg;
    return pool_params(g, n, a, b, c, d, e, &alg);
}

mp_status dn_pool_prepare(mp_kctx *k, size_t *scratch) {
    const mp_value *x = dn_gval(k->g, k->n, 0), *y = dn_gout(k->g, k->n, 0);
    dnnl_dims_t ks, st_, dil, pl, pr;
    dnnl_alg_kind_t alg;
    pool_params(k->g, k->n, ks, st_, dil, pl, pr, &alg);
    dk *s;
    mp_status st = dn_dk_new(k, &s);
    if (st) return st;
    dnnl_memory_desc_t xmd, ymd, yany;
    /* the output as pooled: N, C, 1... (a ReduceMean not keeping its
     * axes writes the same bytes as N, C) */
    int64_t yd[DNNL_MAX_NDIMS];
    for (int i = 0; i < x->rank; i++) yd[i] = i < y->rank ? y->dims[i] : 1;
    DN(dn_md_plain(&xmd, x->rank, x->dims), "memory descriptor");
    DN(dn_md_plain(&ymd, x->rank, yd), "memory descriptor");
    DN(dn_md_nhwc(&yany, x->rank, yd), "memory descriptor");
    /* blocked in as the producer left it; blocked out when the readers take it */
    bool in_blocked = dn_lay_find(k, k->n->in[0], &xmd);
    bool want_blocked = in_blocked && !k->fold && dn_readers_take_blocked(k->g, k->n->out[0], 0);
    /* blocked in, plain out has only a reference version: pool blocked,
     * then reorder (or nothing when the output is one pixel per channel
     * of one sample: both layouts are then the same bytes) */
    bool reorder_out = in_blocked && !want_blocked;
    bool same_bytes = yd[0] == 1 && dn_numel_of(x->rank - 2, yd + 2) == 1;
    void *yown = NULL;
    dnnl_primitive_desc_t pd = NULL;
    for (int attempt = in_blocked ? 0 : 1; attempt < 2; attempt++) {
        dnnl_pooling_v2_desc_t pdsc;
        DN(dnnl_pooling_v2_forward_desc_init(&pdsc, dnnl_forward_inference, alg, &xmd,
                                             attempt == 0 ? &yany : &ymd, st_, ks, dil, pl, pr),
           "pooling");
        dnnl_primitive_attr_t attr;
        if ((st = dn_attr_new(k, &attr))) return st;
        if ((st = dn_make_pd(k, &pdsc, attr, NULL, &pd))) return st;
        if (attempt == 0) {
            const dnnl_memory_desc_t *got = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
            if (reorder_out) {
                dnnl_memory_desc_t plain = ymd;
                ymd = *got;
                if (!dnnl_memory_desc_equal(&plain, &ymd) &&
                    !(same_bytes && dnnl_memory_desc_get_size(&ymd) == dnnl_memory_desc_get_size(&plain)) &&
                    (st = dn_dk_post_reorder(k, s, &ymd, &plain, &yown))) {
                    dnnl_primitive_desc_destroy(pd);
                    return st;
                }
                break;
            }
            if (dnnl_memory_desc_get_size(got) == dnnl_memory_desc_get_size(&ymd)) {
                dnnl_memory_desc_t plain = ymd;
                ymd = *got;
                if (!dnnl_memory_desc_equal(&plain, &ymd) && !dn_lay_add(k, s, k->n->out[0], &ymd)) {
                    dnnl_primitive_desc_destroy(pd);
                    return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
                }
                break;
            }
            dnnl_primitive_desc_destroy(pd);
            pd = NULL;
        }
    }
    st = dn_dk_arg(k, s, DNNL_ARG_SRC, &xmd, FROM_IN, 0, NULL);
    if (!st) st = dn_dk_arg(k, s, DNNL_ARG_DST, &ymd, yown ? FROM_OWN : FROM_OUT, 0, yown);
    if (!st) st = dn_dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

/* ------------------------------------------------------------ Concat
 * Channels (axis 1) of fp32 tensors of rank 3 to 5: SqueezeNet's Fire and
 * GoogLeNet's Inception modules, DenseNet's feature lists. Each input as
 * its producer left it (a Conv's channels-last output, so it is no longer
 * reordered back to plain for a portable Concat), the output channels-
 * last when every reader takes it so, else plain. */
bool dn_concat_ok(const mp_graph *g, const mp_node *n) {
    const mp_value *y = dn_gout(g, n, 0);
    if (!dn_is_f32(y) || y->rank < 3 || y->rank > 5 || n->n_in < 1 || n->n_in > DK_MAXARG - 4) return false;
    int64_t ax = mp_attr_i(n, "axis", 1);
    if (ax < 0) ax += y->rank;
    if (ax != 1) return false;
    for (int i = 0; i < n->n_in; i++) {
        const mp_value *x = dn_gval(g, n, i);
        if (!dn_is_f32(x) || x->rank != y->rank || mp_value_numel(x) <= 0) return false;
        for (int d = 0; d < y->rank; d++)
            if (d != 1 && x->dims[d] != y->dims[d]) return false;
    }
    return true;
}

static mp_status concat_make(mp_kctx *k, dnnl_memory_desc_t *src, dnnl_memory_desc_t *nhwc, size_t *scratch) {
    const mp_graph *g = k->g;
    const mp_node *n = k->n;
    const mp_value *y = dn_gout(g, n, 0);
    dk *s;
    mp_status st = dn_dk_new(k, &s);
    if (st) return st;
    dnnl_memory_desc_t ymd, yplain;
    void *own[DK_MAXARG] = {NULL};
    bool any_blocked = false;
    int differ = 0; /* inputs not channels-last */
    for (int i = 0; i < n->n_in; i++) {
        const mp_value *x = dn_gval(g, n, i);
        DN(dn_md_plain(&src[i], x->rank, x->dims), "memory descriptor");
        DN(dn_md_nhwc(&nhwc[i], x->rank, x->dims), "memory descriptor");
        if (dn_lay_find(k, n->in[i], &src[i])) any_blocked = true;
        differ += !dnnl_memory_desc_equal(&src[i], &nhwc[i]);
    }
    DN(dn_md_plain(&yplain, y->rank, y->dims), "memory descriptor");
    bool want_blocked = any_blocked && !k->fold && dn_readers_take_blocked(g, n->out[0], 0);
    /* one layout for every operand (oneDNN's simple concat; mixed ones get
     * its reference concat): the inputs not channels-last reordered first,
     * the output reordered back to plain when its readers want that */
    bool uniform = any_blocked && differ <= DK_MAXPRE;
    void *yown = NULL;
    if (uniform) {
        for (int i = 0; i < n->n_in; i++) {
            if (dnnl_memory_desc_equal(&src[i], &nhwc[i])) continue;
            if ((st = dn_dk_pre_reorder(k, s, i, &src[i], &nhwc[i], &own[i]))) return st;
            src[i] = nhwc[i];
        }
        DN(dn_md_nhwc(&ymd, y->rank, y->dims), "memory descriptor");
        if (!want_blocked && !dnnl_memory_desc_equal(&ymd, &yplain) &&
            (st = dn_dk_post_reorder(k, s, &ymd, &yplain, &yown)))
            return st;
    } else if (want_blocked) {
        DN(dn_md_nhwc(&ymd, y->rank, y->dims), "memory descriptor");
    } else {
        ymd = yplain;
    }
    if (want_blocked && !dnnl_memory_desc_equal(&yplain, &ymd) && !dn_lay_add(k, s, n->out[0], &ymd))
        return mp_error(MP_ERR_NOMEM, "node %s: out of memory", n->name);
    dnnl_primitive_attr_t attr;
    if ((st = dn_attr_new(k, &attr))) return st;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t ds = dnnl_concat_primitive_desc_create(&pd, &ymd, n->n_in, 1, src, attr, dn_eng);
    dnnl_primitive_attr_destroy(attr);
    if (ds) return dn_dfail(k, ds, "concat");
    for (int i = 0; i < n->n_in && !st; i++)
        st = dn_dk_arg(k, s, DNNL_ARG_MULTIPLE_SRC + i, &src[i], own[i] ? FROM_OWN : FROM_IN, i, own[i]);
    if (!st) st = dn_dk_arg(k, s, DNNL_ARG_DST, &ymd, yown ? FROM_OWN : FROM_OUT, 0, yown);
    if (!st) st = dn_dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

mp_status dn_concat_prepare(mp_kctx *k, size_t *scratch) {
    /* two descriptors an input (large structs: not on the stack), for prepare only */
    dnnl_memory_desc_t *src = malloc(sizeof *src * 2 * (size_t)k->n->n_in);
    if (!src) return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
    mp_status st = concat_make(k, src, src + k->n->n_in, scratch);
    free(src);
    return st;
}

/* ----------------------------------------------- Softmax, LogSoftmax */

bool dn_softmax_axis(const mp_graph *g, const mp_node *n, int64_t *outer, int64_t *inner,
                         int64_t *rest) {
    const mp_value *x = dn_gval(g, n, 0), *y = dn_gout(g, n, 0);
    if (!dn_is_f32(x) || !dn_is_f32(y) || x->rank < 1) return false;
    int r = x->rank;
    int64_t ax = mp_attr_i(n, "axis", n->opset >= 13 ? -1 : 1);
    if (ax < 0) ax += r;
    if (ax < 0 || ax >= r) return false;
    if (n->opset < 13) {
        /* coerced to 2-D [prod(:axis), prod(axis:)] */
        *outer = dn_numel_of((int)ax, x->dims);
        *inner = dn_numel_of(r - (int)ax, x->dims + ax);
        *rest = 1;
    } else {
        *outer = dn_numel_of((int)ax, x->dims);
        *inner = x->dims[ax];
        *rest = dn_numel_of(r - (int)ax - 1, x->dims + ax + 1);
    }
    return *outer * *inner * *rest > 0;
}

bool dn_softmax_ok(const mp_graph *g, const mp_node *n) {
    int64_t a, b, c;
    return dn_softmax_axis(g, n, &a, &b, &c);
}

mp_status dn_softmax_prepare(mp_kctx *k, size_t *scratch) {
    int64_t d[3];
    dn_softmax_axis(k->g, k->n, &d[0], &d[1], &d[2]);
    dk *s;
    mp_status st = dn_dk_new(k, &s);
    if (st) return st;
    dnnl_memory_desc_t md;
    /* [outer, axis, rest]; rest 1 drops to 2-D */
    int r = d[2] == 1 ? 2 : 3;
    DN(dn_md_plain(&md, r, d), "memory descriptor");
    dnnl_primitive_attr_t attr;
    if ((st = dn_attr_new(k, &attr))) return st;
    dnnl_primitive_desc_t pd;
    dnnl_status_t ds;
    if (dn_is_op(k->n, "LogSoftmax")) {
        dnnl_logsoftmax_desc_t sd;
        ds = dnnl_logsoftmax_forward_desc_init(&sd, dnnl_forward_inference, &md, 1);
        if (ds) { dnnl_primitive_attr_destroy(attr); return dn_dfail(k, ds, "logsoftmax"); }
        st = dn_make_pd(k, &sd, attr, NULL, &pd);
    } else {
        dnnl_softmax_desc_t sd;
        ds = dnnl_softmax_forward_desc_init(&sd, dnnl_forward_inference, &md, 1);
        if (ds) { dnnl_primitive_attr_destroy(attr); return dn_dfail(k, ds, "softmax"); }
        st = dn_make_pd(k, &sd, attr, NULL, &pd);
    }
    if (st) return st;
    st = dn_dk_arg(k, s, DNNL_ARG_SRC, &md, FROM_IN, 0, NULL);
    if (!st) st = dn_dk_arg(k, s, DNNL_ARG_DST, &md, FROM_OUT, 0, NULL);
    if (!st) st = dn_dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

/* ------------------------------------ LayerNormalization, BatchNormalization */

bool dn_layernorm_ok(const mp_graph *g, const mp_node *n) {
    const mp_value *x = dn_gval(g, n, 0), *sc = dn_gval(g, n, 1), *b = dn_gval(g, n, 2), *y = dn_gout(g, n, 0);
    if (!dn_is_f32(x) || !dn_is_f32(y) || x->rank < 1 || !sc || !dn_is_wt(g, sc)) return false;
    for (int j = 1; j < n->n_out; j++)
        if (n->out[j] >= 0) return false;   /* Mean, InvStdDev */
    int64_t ax = mp_attr_i(n, "axis", -1);
    if (ax < 0) ax += x->rank;
    if (ax < 0 || ax >= x->rank) return false;
    int64_t inner = dn_numel_of(x->rank - (int)ax, x->dims + ax);
    /* scale and bias of the full normalized shape (no broadcast) */
    if (mp_value_numel(sc) != inner || sc->dtype != MP_DT_FLOAT) return false;
    if (b && (!dn_is_f32(b) || mp_value_numel(b) != inner)) return false;
    return inner > 0 && mp_value_numel(x) > 0;
}

/* oneDNN's layer normalization over [rows, d] in fp32, input 0 to output
 * 0, scale from input si and shift from input bi (-1: none). The node's
 * own LayerNormalization and the fused pattern (dnnl_fused.c) make it. */
mp_status dn_layernorm_make(mp_kctx *k, int64_t rows, int64_t d, float eps, int si, int bi, size_t *scratch) {
    dk *s;
    mp_status st = dn_dk_new(k, &s);
    if (st) return st;
    int64_t d2[2] = {rows, d};
    dnnl_memory_desc_t md, smd;
    DN(dn_md_plain(&md, 2, d2), "memory descriptor");
    DN(dn_md_plain(&smd, 1, &d), "memory descriptor");
    unsigned flags = (si >= 0 ? dnnl_use_scale : 0) | (bi >= 0 ? dnnl_use_shift : 0);
    dnnl_layer_normalization_desc_t ld;
    DN(dnnl_layer_normalization_forward_desc_init(&ld, dnnl_forward_inference, &md, NULL, eps, flags),
       "layer normalization");
    dnnl_primitive_attr_t attr;
    if ((st = dn_attr_new(k, &attr))) return st;
    dnnl_primitive_desc_t pd;
    if ((st = dn_make_pd(k, &ld, attr, NULL, &pd))) return st;
    st = dn_dk_arg(k, s, DNNL_ARG_SRC, &md, FROM_IN, 0, NULL);
    if (!st) st = dn_dk_arg(k, s, DNNL_ARG_DST, &md, FROM_OUT, 0, NULL);
    if (!st && si >= 0) st = dn_dk_arg(k, s, DNNL_ARG_SCALE, &smd, FROM_IN, si, NULL);
    if (!st && bi >= 0) st = dn_dk_arg(k, s, DNNL_ARG_SHIFT, &smd, FROM_IN, bi, NULL);
    if (!st) st = dn_dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

mp_status dn_layernorm_prepare(mp_kctx *k, size_t *scratch) {
    const mp_node *n = k->n;
    const mp_value *x = dn_gval(k->g, n, 0);
    bool has_b = n->n_in > 2 && n->in[2] >= 0;
    int64_t ax = mp_attr_i(n, "axis", -1);
    if (ax < 0) ax += x->rank;
    return dn_layernorm_make(k, dn_numel_of((int)ax, x->dims), dn_numel_of(x->rank - (int)ax, x->dims + ax),
                             (float)mp_attr_f(n, "epsilon", 1e-5), 1, has_b ? 2 : -1, scratch);
}

bool dn_batchnorm_ok(const mp_graph *g, const mp_node *n) {
    const mp_value *x = dn_gval(g, n, 0), *y = dn_gout(g, n, 0);
    if (!dn_is_f32(x) || !dn_is_f32(y) || x->rank < 2 || x->rank > 5 || n->n_in != 5) return false;
    if (mp_attr_i(n, "training_mode", 0) != 0) return false;
    for (int j = 1; j < n->n_out; j++)
        if (n->out[j] >= 0) return false;
    for (int j = 1; j < 5; j++) {
        const mp_value *p = dn_gval(g, n, j);
        if (!dn_is_f32(p) || mp_value_numel(p) != x->dims[1]) return false;
    }
    return mp_value_numel(x) > 0;
}

mp_status dn_batchnorm_prepare(mp_kctx *k, size_t *scratch) {
    const mp_value *x = dn_gval(k->g, k->n, 0);
    dk *s;
    mp_status st = dn_dk_new(k, &s);
    if (st) return st;
    dnnl_memory_desc_t md, cmd, plain;
    DN(dn_md_plain(&md, x->rank, x->dims), "memory descriptor");
    DN(dn_md_plain(&cmd, 1, &x->dims[1]), "memory descriptor");
    plain = md;
    /* a Relu after it (DenseNet's norm and relu before each convolution)
     * is oneDNN's fused ReLU: one pass over the tensor, not two */
    int fv = k->n->out[0];
    unsigned flags = dnnl_use_global_stats | dnnl_use_scale | dnnl_use_shift;
    int ci = k->fuse ? mp_sole_use(k->g, fv) : -1;
    if (ci >= 0 && dn_is_op(&k->g->nodes[ci], "Relu") && k->g->nodes[ci].n_out == 1 &&
        dn_is_f32(dn_gout(k->g, &k->g->nodes[ci], 0))) {
        if (mp_kfuse(k, ci) == MP_OK) {
            flags |= dnnl_fuse_norm_relu;
            fv = k->g->nodes[ci].out[0];
        } else {
            mp_error_clear();
        }
    }
    /* channels-last in as the producer left it (a DenseNet layer's Concat),
     * and out the same when every reader takes it, else reordered back */
    bool in_blocked = dn_lay_find(k, k->n->in[0], &md);
    void *yown = NULL;
    if (in_blocked && !dnnl_memory_desc_equal(&plain, &md)) {
        if (!k->fold && dn_readers_take_blocked(k->g, fv, 0)) {
            if (!dn_lay_add(k, s, fv, &md)) return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
        } else if ((st = dn_dk_post_reorder(k, s, &md, &plain, &yown))) {
            return st;
        }
    }
    dnnl_batch_normalization_desc_t bd;
    DN(dnnl_batch_normalization_forward_desc_init(&bd, dnnl_forward_inference, &md,
                                                  (float)mp_attr_f(k->n, "epsilon", 1e-5), flags),
       "batch normalization");
    dnnl_primitive_attr_t attr;
    if ((st = dn_attr_new(k, &attr))) return st;
    dnnl_primitive_desc_t pd;
    if ((st = dn_make_pd(k, &bd, attr, NULL, &pd))) return st;
    static const int args[] = {DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    st = dn_dk_arg(k, s, DNNL_ARG_SRC, &md, FROM_IN, 0, NULL);
    if (!st) st = dn_dk_arg(k, s, DNNL_ARG_DST, &md, yown ? FROM_OWN : FROM_OUT, 0, yown);
    for (int j = 0; j < 4 && !st; j++) st = dn_dk_arg(k, s, args[j], &cmd, FROM_IN, 1 + j, NULL);
    if (!st) st = dn_dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

/* ----------------------------------------- element-wise: unary and binary */

/* Below this many elements a standalone element-wise op stays with the
 * portable loop: a primitive's call costs more than the work. */
#define SMALL_ELEMS 4096

bool dn_eltwise_ok(const mp_graph *g, const mp_node *n) {
    const mp_value *x = dn_gval(g, n, 0), *y = dn_gout(g, n, 0);
    eltw e;
    if (!dn_is_f32(x) || !dn_is_f32(y) || !dn_same_dims(y, x->rank, x->dims)) return false;
    if (mp_value_numel(x) < SMALL_ELEMS) return false;
    /* two-step ones (HardSigmoid) only as post-ops: oneDNN 2.6's eltwise
     * primitive with an eltwise post-op falls to a reference version that
     * computes garbage */
    return dn_eltwise_of(g, n, &e) && e.n == 1;
}

mp_status dn_eltwise_prepare(mp_kctx *k, size_t *scratch) {
    eltw e;
    dn_eltwise_of(k->g, k->n, &e);
    if (dn_is_op(k->n, "Clip")) {
        for (int j = 1; j < k->n->n_in && j < 3; j++) {
            if (k->n->in[j] < 0) continue;
            if (!k->in[j].data)
                return mp_error(MP_ERR_USAGE, "node %s: Clip bound has no data at plan time", k->n->name);
            if (j == 1) e.a[0] = *(const float *)k->in[j].data;
            else e.b[0] = *(const float *)k->in[j].data;
        }
    }
    return dn_eltwise_make(k, e.alg[0], e.a[0], e.b[0], k->n->out[0], scratch);
}

/* oneDNN's eltwise alg (alpha a, beta b) over input 0 as a flat vector,
 * to output 0. A blocked input (of the plain size) is the same bytes in
 * another order: the flat view computes it, and value out_v (the output,
 * or a fused group's) keeps the layout. The node's own elementwise op and
 * the fused GELU (dnnl_fused.c) make it. */
mp_status dn_eltwise_make(mp_kctx *k, dnnl_alg_kind_t alg, float a, float b, int out_v, size_t *scratch) {
    const mp_value *x = dn_gval(k->g, k->n, 0);
    dk *s;
    mp_status st = dn_dk_new(k, &s);
    if (st) return st;
    int64_t ne = mp_value_numel(x);
    dnnl_memory_desc_t md, blk;
    DN(dn_md_plain(&md, 1, &ne), "memory descriptor");
    if (dn_lay_find(k, k->n->in[0], &blk) && !dn_lay_add(k, s, out_v, &blk))
        return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
    dnnl_eltwise_desc_t ed;
    DN(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, alg, &md, a, b), "eltwise");
    return dn_dk_src_dst(k, s, &ed, &md, &md, scratch);
}

/* Binary ops: the output must have src0's shape (oneDNN broadcasts src1
 * only); Add and Mul swap their operands when the second one is the full
 * one. */

/* Whether oneDNN runs this broadcast with one of its fast binary
 * implementations, the output (and the full operand) plain or, with
 * nhwc, channels-last: oneDNN 2.6's jit:uni takes an operand of the
 * output's dims, a scalar, one per channel (dim 1) and a few more, and
 * runs the rest on ref:any, which is slower than the portable kernel (an
 * RMSNorm's x * rsqrt(mean) [1, 32, 8, 128] by [1, 32, 8, 1]: 2-4 ms; a
 * detector's normalisation [3, 320, 320] by [3, 1, 1]: 16 ms). */
static bool binary_fast(dnnl_alg_kind_t alg, const mp_value *y, const mp_value *o, bool nhwc) {
    dnnl_memory_desc_t ymd, omd;
    dnnl_binary_desc_t bd;
    dnnl_primitive_desc_t pd = NULL;
    pthread_once(&dn_once, dn_engine_init);
    if (!dn_eng || (nhwc ? dn_md_nhwc(&ymd, y->rank, y->dims) : dn_md_plain(&ymd, y->rank, y->dims)) ||
        dn_md_plain_pad(&omd, y->rank > 0 ? y->rank : 1, o->rank, o->dims) ||
        dnnl_binary_desc_init(&bd, alg, &ymd, &omd, &ymd) ||
        dnnl_primitive_desc_create(&pd, &bd, NULL, dn_eng, NULL) != dnnl_success)
        return false;
    bool fast = *dn_pd_impl(pd) && !dn_pd_is_ref(pd); /* known, and not the reference code */
    dnnl_primitive_desc_destroy(pd);
    return fast;
}

/* Whether the broadcast binary node n, its full operand channels-last
 * (what a Conv leaves), still runs on a fast implementation with its
 * output channels-last: EfficientNet's squeeze-and-excitation x * s, s
 * [N, C, 1, 1], between a depthwise and a projection convolution; taking
 * it channels-last spares a reorder of x out and of the product back. */
bool dn_binary_blocked_ok(const mp_graph *g, const mp_node *n) {
    bool swap;
    dnnl_alg_kind_t alg;
    if (!dn_binary_ok(g, n, &swap) || !dn_binary_of(n, &alg)) return false;
    const mp_value *y = dn_gout(g, n, 0);
    return y->rank >= 3 && y->rank <= 5 && binary_fast(alg, y, dn_gval(g, n, swap ? 0 : 1), true);
}

bool dn_binary_ok(const mp_graph *g, const mp_node *n, bool *swap) {
    dnnl_alg_kind_t alg;
    if (!dn_binary_of(n, &alg) || n->n_out != 1) return false;
    const mp_value *a = dn_gval(g, n, 0), *b = dn_gval(g, n, 1), *y = dn_gout(g, n, 0);
    if (!dn_is_f32(a) || !dn_is_f32(b) || !dn_is_f32(y) || y->rank > 12) return false;
    if (mp_value_numel(y) < SMALL_ELEMS) return false;
    if (dn_same_dims(a, y->rank, y->dims) && dn_fits_into(b, y->rank, y->dims)) {
        *swap = false;
        return dn_same_dims(b, y->rank, y->dims) || binary_fast(alg, y, b, false);
    }
    if ((alg == dnnl_binary_add || alg == dnnl_binary_mul) && dn_same_dims(b, y->rank, y->dims) &&
        dn_fits_into(a, y->rank, y->dims)) {
        *swap = true;
        return binary_fast(alg, y, a, false);
    }
    return false;
}

mp_status dn_binary_prepare(mp_kctx *k, size_t *scratch) {
    const mp_node *n = k->n;
    const mp_value *y = dn_gout(k->g, n, 0);
    bool swap = false;
    dnnl_alg_kind_t alg;
    dn_binary_ok(k->g, n, &swap);
    dn_binary_of(n, &alg);
    const mp_value *o = dn_gval(k->g, n, swap ? 0 : 1);
    dk *s;
    mp_status st = dn_dk_new(k, &s);
    if (st) return st;
    chain ch;
    if ((st = dn_chain_init(k, &ch))) return st;
    /* no post-ops here: oneDNN 2.6's binary primitive (jit:uni) computes
     * wrong results with some eltwise post-op chains (a linear step after
     * another eltwise, found on GPT-2's tanh GELU; tests/test_dnnl.c
     * plan_gelu_tanh), so element-wise chains run one op at a time */
    ch.final_v = n->out[0];
    dnnl_memory_desc_t ymd, omd, s0md;
    dnnl_status_t ds;
    if ((ds = dn_md_plain(&ymd, y->rank, y->dims)) || (ds = dn_md_plain_pad(&omd, y->rank > 0 ? y->rank : 1, o->rank, o->dims)))
        goto dfail_;
    /* operands as their producers left them; a blocked first operand
     * makes a blocked output when its readers take it */
    s0md = ymd;
    if (o->rank == y->rank) dn_lay_find(k, n->in[swap ? 0 : 1], &omd);
    if (!k->fold && dn_lay_find(k, n->in[swap ? 1 : 0], &s0md) && dn_readers_take_blocked(k->g, ch.final_v, 0)) {
        ymd = s0md;
        if (!dn_lay_add(k, s, ch.final_v, &ymd)) {
            st = mp_error(MP_ERR_NOMEM, "node %s: out of memory", n->name);
            goto fail;
        }
    }
    dnnl_binary_desc_t bd;
    if ((ds = dnnl_binary_desc_init(&bd, alg, &s0md, &omd, &ymd))) goto dfail_;
    dnnl_primitive_attr_t attr;
    if ((st = dn_attr_new(k, &attr))) goto fail;
    if ((st = dn_chain_attr(k, &ch, attr))) { dnnl_primitive_attr_destroy(attr); goto fail; }
    dnnl_primitive_desc_t pd;
    if ((st = dn_make_pd(k, &bd, attr, &ch, &pd))) goto fail;
    st = dn_dk_arg(k, s, DNNL_ARG_SRC_0, &s0md, FROM_IN, swap ? 1 : 0, NULL);
    if (!st) st = dn_dk_arg(k, s, DNNL_ARG_SRC_1, &omd, FROM_IN, swap ? 0 : 1, NULL);
    if (!st) st = dn_dk_arg(k, s, DNNL_ARG_DST, &ymd, FROM_OUT, 0, NULL);
    if (!st) st = dn_chain_bind(k, s, &ch);
    if (!st) st = dn_dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return st;
dfail_:
    st = dn_dfail(k, ds, "memory descriptor");
fail:
    if (ch.po) dnnl_post_ops_destroy(ch.po);
    return st;
}

/* ------------------------------------------------------------ Transpose
 * An fp32 Transpose as oneDNN's reorder from the input read through
 * permuted strides into the plain output, split over the plan's threads
 * (the portable kernel copies on one thread: in BERT-base the 48 head
 * transposes took 3.2 ms of a 121 ms pass, and 8 ms once the Reshape
 * before them stopped copying, the copy then reading what the two
 * threads' matrix product left in the other core's cache). Small ones
 * stay portable. */

enum { TRANSPOSE_MIN = 1 << 14 };  /* elements: below, oneDNN's call costs more than the copy */

/* The input axis of each output axis (perm, or reversed without it);
 * false when perm is not a permutation of the rank r axes. */
static bool transpose_perm(const mp_node *n, int r, int64_t *p) {
    const int64_t *perm = NULL;
    int np = mp_attr_ints(n, "perm", &perm);
    if (np >= 0 && np != r) return false;
    unsigned seen = 0;
    for (int i = 0; i < r; i++) {
        p[i] = np == r ? perm[i] : r - 1 - i;
        if (p[i] < 0 || p[i] >= r || (seen & (1u << p[i]))) return false;
        seen |= 1u << p[i];
    }
    return true;
}

bool dn_transpose_ok(const mp_graph *g, const mp_node *n) {
    const mp_value *x = dn_gval(g, n, 0), *y = dn_gout(g, n, 0);
    int64_t p[DNNL_MAX_NDIMS];
    if (!dn_is_f32(x) || !dn_is_f32(y) || x->rank < 2 || x->rank > DNNL_MAX_NDIMS || y->rank != x->rank ||
        n->n_out != 1 || mp_value_numel(x) < TRANSPOSE_MIN || !transpose_perm(n, x->rank, p))
        return false;
    for (int i = 0; i < x->rank; i++)
        if (y->dims[i] != x->dims[p[i]]) return false;
    return true;
}

mp_status dn_transpose_prepare(mp_kctx *k, size_t *scratch) {
    const mp_value *x = dn_gval(k->g, k->n, 0), *y = dn_gout(k->g, k->n, 0);
    int r = x->rank;
    int64_t p[DNNL_MAX_NDIMS];
    dk *s;
    mp_status rs = dn_dk_new(k, &s);
    if (rs) return rs;
    k->kname = "onednn:reorder";
    /* the input read through its plain strides, permuted */
    dnnl_memory_desc_t xmd, smd, dmd;
    DN(dn_md_plain(&xmd, r, x->dims), "memory descriptor");
    if (!transpose_perm(k->n, r, p)) return mp_error(MP_ERR_UNSUPPORTED, "node %s: bad perm", k->n->name);
    dnnl_dims_t d, st;
    for (int i = 0; i < r; i++) {
        d[i] = y->dims[i];
        st[i] = xmd.format_desc.blocking.strides[p[i]];
    }
    DN(dnnl_memory_desc_init_by_strides(&smd, r, d, dnnl_f32, st), "memory descriptor");
    DN(dn_md_plain(&dmd, r, y->dims), "memory descriptor");
    dnnl_primitive_desc_t pd;
    DN(dnnl_reorder_primitive_desc_create(&pd, &smd, dn_eng, &dmd, dn_eng, NULL), "reorder");
    rs = dn_dk_arg(k, s, DNNL_ARG_FROM, &smd, FROM_IN, 0, NULL);
    if (!rs) rs = dn_dk_arg(k, s, DNNL_ARG_TO, &dmd, FROM_OUT, 0, NULL);
    if (!rs) rs = dn_dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return rs;
}