/* The transformer operators the default domain gained in opsets 23 and 24:
 * Attention (23, 24), RotaryEmbedding (23), RMSNormalization (23),
 * TensorScatter (24) and Swish (24). Shape rules from the operator specs,
 * cost rules in docs/COUNTING.md ("Opsets 23 and 24"). */
#include "ops/kernel.h"
#include "ops/scalar.h"

#include <math.h>
#include <stdlib.h>

/* A dim from a rank-3 packed hidden size: hidden / heads, -1 (unknown)
 * when either is unknown. Fails when it does not divide. */
static mp_status at_split(mp_ctx *c, const mp_value *v, int64_t hidden, int64_t heads,
                          int64_t *out) {
    *out = -1;
    if (hidden < 0 || heads <= 0) return MP_OK;
    if (hidden % heads)
        return mp_fail(c, "'%s' has a last dim of %lld, not a multiple of %lld heads", v->name,
                       (long long)hidden, (long long)heads);
    *out = hidden / heads;
    return MP_OK;
}

/* ---- Attention ----
 * Q [B, Hq, Sq, dh] | [B, Sq, Hq*dh]; K [B, Hkv, Skv, dh] | [B, Skv, Hkv*dh];
 * V [B, Hkv, Skv, dv] | [B, Skv, Hkv*dv]; attn_mask (3), past_key (4)
 * [B, Hkv, P, dh], past_value (5) [B, Hkv, P, dv]; since 24
 * nonpad_kv_seqlen (6) [B]. Outputs Y [B, Hq, Sq, dv] | [B, Sq, Hq*dv],
 * present_key [B, Hkv, T, dh], present_value [B, Hkv, T, dv],
 * qk_matmul_output [B, Hq, Sq, T], with T = P + Skv. */
typedef struct at_dims {
    int64_t b, hq, hkv, sq, skv, dh, dv, past, total;
    bool packed;              /* rank-3 inputs */
} at_dims;

/* Dims are raw (symbols kept) where copied, -1 where unknown. */
static mp_status at_attention_dims(mp_ctx *c, at_dims *d) {
    mp_value *q, *k, *v;
    mp_status st;
    if ((st = mp_need_in(c, 0, "Q", &q)) || (st = mp_need_in(c, 1, "K", &k)) ||
        (st = mp_need_in(c, 2, "V", &v)))
        return st;
    d->b = d->hq = d->hkv = d->sq = d->skv = d->dh = d->dv = d->past = d->total = -1;
    d->packed = false;
    if (q->rank < 0 || k->rank < 0 || v->rank < 0) return MP_OK; /* unknown */
    if (q->rank != 3 && q->rank != 4)
        return mp_fail(c, "Q '%s' must have rank 3 or 4, got %d", q->name, q->rank);
    if (k->rank != q->rank || v->rank != q->rank)
        return mp_fail(c, "Q, K and V must have the same rank (3 or 4), got %d, %d and %d",
                       q->rank, k->rank, v->rank);
    d->b = q->dims[0];
    if (q->rank == 4) {
        d->hq = q->dims[1];
        d->sq = q->dims[2];
        d->dh = q->dims[3];
        d->hkv = k->dims[1];
        d->skv = k->dims[2];
        d->dv = v->dims[3];
        if (MP_DIM_KNOWN(k->dims[3]) && MP_DIM_KNOWN(d->dh) && k->dims[3] != d->dh)
            return mp_fail(c, "K '%s' has head size %lld, Q has %lld", k->name,
                           (long long)k->dims[3], (long long)d->dh);
    } else {
        d->packed = true;
        int64_t hq = mp_attr_i(c->n, "q_num_heads", 0), hkv = mp_attr_i(c->n, "kv_num_heads", 0);
        if (hq <= 0 || hkv <= 0)
            return mp_fail(c, "rank-3 inputs need the q_num_heads and kv_num_heads attributes "
                              "(> 0), got %lld and %lld",
                           (long long)hq, (long long)hkv);
        d->hq = hq;
        d->hkv = hkv;
        d->sq = q->dims[1];
        d->skv = k->dims[1];
        int64_t dk;
        if ((st = at_split(c, q, q->dims[2], hq, &d->dh)) || (st = at_split(c, k, k->dims[2], hkv, &dk)) ||
            (st = at_split(c, v, v->dims[2], hkv, &d->dv)))
            return st;
        if (dk >= 0 && d->dh >= 0 && dk != d->dh)
            return mp_fail(c, "K '%s' has head size %lld, Q has %lld", k->name, (long long)dk,
                           (long long)d->dh);
    }
    if (MP_DIM_KNOWN(d->hq) && MP_DIM_KNOWN(d->hkv) && (d->hkv == 0 || d->hq % d->hkv))
        return mp_fail(c, "%lld query heads cannot be shared by %lld key/value heads",
                       (long long)d->hq, (long long)d->hkv);
    mp_value *pk = mp_in(c, 4);
    d->past = 0;
    if (pk) {
        if (pk->rank >= 0 && pk->rank != 4)
            return mp_fail(c, "past_key '%s' must have rank 4, got %d", pk->name, pk->rank);
        d->past = pk->rank == 4 ? pk->dims[2] : -1;
    }
    d->total = mp_dim_add(d->past, d->skv);
    return MP_OK;
}

bool mp_attention_dims(mp_ctx *c, mp_attn_dims *d) {
    const mp_node *n = c->n;
    memset(d, 0, sizeof *d);
    if (!mp_streq(n->op, "Attention") || !(n->domain[0] == 0 || mp_streq(n->domain, "ai.onnx")))
        return mp_contrib_attention_dims(c, d);
    at_dims a;
    if (at_attention_dims(c, &a)) {
        mp_error_clear();
        return false;
    }
    d->b = a.b, d->sq = a.sq, d->skv = a.skv, d->past = a.past, d->t = a.total;
    d->hq = a.hq, d->hkv = a.hkv, d->dk = a.dh, d->dv = a.dv;
    d->packed = a.packed;
    d->causal = mp_attr_i(n, "is_causal", 0) != 0;
    double s = mp_attr_f(n, "scale", 0.0);
    d->scale = s != 0 ? s : a.dh > 0 ? 1.0 / sqrt((double)a.dh) : 0;
    return true;
}

mp_sdpa_cost mp_sdpa_flops(double bh, double sq, double sk, double dq, double dv) {
    double e = 2.0 * bh * sq * sk; /* 2 FLOPs per MAC, per score */
    mp_sdpa_cost f;
    f.fwd = e * (dq + dv);
    f.recompute = e * dq;
    f.bwd = e * (2 * dq + 2 * dv) + f.recompute;
    return f;
}

double mp_sdpa_causal_share(double sq, double sk) {
    if (!(sq > 0) || sq != sk) return 1.0;
    double t = ceil(sq / 128.0);
    return (t + 1.0) / (2.0 * t);
}

static uint64_t at_u64(double x) { return x > 0 && x < 1.8e19 ? (uint64_t)x : 0; }

void mp_bwd_sdpa(const mp_attn_dims *d, mp_bwd *t) {
    t->amp = MP_AMP_LOWER; /* scaled_dot_product_attention is on autocast's lower-precision list */
    if (!t->rg) return;
    t->save_out |= 1u;
    if (d->b < 0 || d->hq < 0 || d->sq < 0 || d->t < 0 || d->dk < 0 || d->dv < 0) return; /* unknown: 0, flagged */
    double bh = (double)d->b * (double)d->hq;
    mp_sdpa_cost f = mp_sdpa_flops(bh, (double)d->sq, (double)d->t, (double)d->dk, (double)d->dv);
    t->bwd_flops = at_u64(f.bwd);
    t->recompute_flops = at_u64(f.recompute);
    t->extra_bytes = at_u64(4.0 * bh * (double)d->sq); /* the log-sum-exp, fp32 */
}

/* Attention (23, 24) keeps Q, K, V (the present key and value when a past
 * is prepended: what the product reads), the mask (a bias of the fused
 * kernel), the output and the log-sum-exp. */
static void at_train_attention(mp_ctx *c, mp_bwd *t) {
    mp_attn_dims d;
    if (!mp_attention_dims(c, &d)) {
        t->amp = MP_AMP_LOWER;
        t->save_in = t->rg ? 7u : 0; /* the dims unknown: its inputs, no FLOPs */
        return;
    }
    mp_bwd_sdpa(&d, t);
    if (!t->rg) return;
    bool past = mp_in(c, 4) && mp_out(c, 1) && mp_out(c, 2);
    t->save_in |= past ? 1u : 7u;
    if (past) t->save_out |= 6u;
    if (mp_in(c, 3)) t->save_in |= 8u;
}

static mp_status at_attention_infer(mp_ctx *c) {
    at_dims d;
    mp_status st = at_attention_dims(c, &d);
    if (st) return st;
    int dt = mp_in(c, 0)->dtype;
    if (mp_in(c, 0)->rank < 0 || mp_in(c, 1)->rank < 0 || mp_in(c, 2)->rank < 0) {
        static const int like[4] = {0, 1, 2, 0}; /* whose dtype each output has */
        for (int i = 0; i < c->n->n_out && i < 4; i++)
            if (mp_out(c, i) && (st = mp_set_out(c, i, mp_in(c, like[i])->dtype, -1, NULL)))
                return st;
        return MP_OK;
    }
    int64_t y4[4] = {d.b, d.hq, d.sq, d.dv}, y3[3] = {d.b, d.sq, mp_dim_mul(d.hq, d.dv)};
    if ((st = d.packed ? mp_set_out(c, 0, dt, 3, y3) : mp_set_out(c, 0, dt, 4, y4))) return st;
    int64_t pk[4] = {d.b, d.hkv, d.total, d.dh}, pv[4] = {d.b, d.hkv, d.total, d.dv};
    int64_t qk[4] = {d.b, d.hq, d.sq, d.total};
    if (mp_out(c, 1) && (st = mp_set_out(c, 1, mp_in(c, 1)->dtype, 4, pk))) return st;
    if (mp_out(c, 2) && (st = mp_set_out(c, 2, mp_in(c, 2)->dtype, 4, pv))) return st;
    if (mp_out(c, 3) && (st = mp_set_out(c, 3, dt, 4, qk))) return st;
    return MP_OK;
}

/* MACs: the two products, B*Hq*Sq*T*dh (Q K^T) + B*Hq*Sq*T*dv (P V).
 * FLOPs: 2 per MAC, plus per score: scaling 1, softmax 1, the mask or
 * causal bias 1 when present, softcap 3 (divide, tanh, multiply) when set. */
static void at_attention_cost(mp_ctx *c, mp_cost *k) {
    at_dims d;
    if (at_attention_dims(c, &d)) {
        mp_error_clear();
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    int64_t sc[4] = {d.b, d.hq, d.sq, d.total};
    int64_t f_qk[5] = {d.b, d.hq, d.sq, d.total, d.dh};
    int64_t f_pv[5] = {d.b, d.hq, d.sq, d.total, d.dv};
    uint64_t scores = mp_cost_prod(k, sc, 4);
    bool ovf = false;
    k->macs = mp_uadd(mp_cost_prod(k, f_qk, 5), mp_cost_prod(k, f_pv, 5), &ovf);
    uint64_t per = 2;
    if (mp_in(c, 3) || mp_attr_i(c->n, "is_causal", 0)) per += 1;
    if (mp_attr_f(c->n, "softcap", 0.0) != 0.0) per += 3;
    k->flops = mp_uadd(mp_umul(2, k->macs, &ovf), mp_umul(per, scores, &ovf), &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* ---- RotaryEmbedding ----
 * X [B, H, S, dh] | [B, S, H*dh] (num_heads given), cos_cache, sin_cache
 * [.., rot/2], position_ids (3, optional) -> Y like X. rot is
 * rotary_embedding_dim, or dh when 0; it is even and at most dh. */
static mp_status at_rope_dims(mp_ctx *c, int64_t *head, int64_t *rot) {
    mp_value *x;
    mp_status st = mp_need_in(c, 0, "X", &x);
    if (st) return st;
    *head = *rot = -1;
    if (x->rank < 0) return MP_OK;
    if (x->rank != 3 && x->rank != 4)
        return mp_fail(c, "X '%s' must have rank 3 or 4, got %d", x->name, x->rank);
    int64_t heads = mp_attr_i(c->n, "num_heads", 0);
    if (x->rank == 4) {
        *head = MP_DIM_KNOWN(x->dims[3]) ? x->dims[3] : -1;
    } else {
        if (heads <= 0) return mp_fail(c, "a rank-3 X '%s' needs num_heads (> 0)", x->name);
        if ((st = at_split(c, x, MP_DIM_KNOWN(x->dims[2]) ? x->dims[2] : -1, heads, head))) return st;
    }
    int64_t r = mp_attr_i(c->n, "rotary_embedding_dim", 0);
    if (r < 0) return mp_fail(c, "rotary_embedding_dim must be >= 0, got %lld", (long long)r);
    *rot = r ? r : *head;
    if (*rot >= 0 && *rot % 2) return mp_fail(c, "the rotary dim %lld is odd", (long long)*rot);
    if (*rot >= 0 && *head >= 0 && *rot > *head)
        return mp_fail(c, "rotary_embedding_dim %lld exceeds the head size %lld", (long long)*rot,
                       (long long)*head);
    const mp_value *cs = mp_in(c, 1);
    if (cs && cs->rank >= 1 && *rot >= 0 && MP_DIM_KNOWN(cs->dims[cs->rank - 1]) &&
        cs->dims[cs->rank - 1] != *rot / 2)
        return mp_fail(c, "cos_cache '%s' has a last dim of %lld, the rotary dim %lld needs %lld",
                       cs->name, (long long)cs->dims[cs->rank - 1], (long long)*rot,
                       (long long)(*rot / 2));
    return MP_OK;
}

static mp_status at_rope_infer(mp_ctx *c) {
    int64_t head, rot;
    mp_status st = at_rope_dims(c, &head, &rot);
    if (st) return st;
    return mp_set_out_like(c, 0, mp_in(c, 0));
}

/* Each rotated pair (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin): 4
 * multiplies and 2 adds, 3 FLOPs per rotated element; the rest is copied. */
static void at_rope_cost(mp_ctx *c, mp_cost *k) {
    int64_t head, rot;
    uint64_t n = mp_cnumel(mp_in(c, 0), k);
    if (at_rope_dims(c, &head, &rot) || head <= 0 || rot < 0) {
        mp_error_clear();
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    bool ovf = false;
    k->flops = mp_umul(mp_umul(3, n / (uint64_t)head, &ovf), (uint64_t)rot, &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* ---- RMSNormalization ----
 * X, scale (broadcast to X's dims from axis on) -> Y like X. FLOPs per
 * element: square, sum, scale by the reciprocal root, multiply by scale = 4
 * (the root itself is per row, not counted). */
static mp_status at_rms_infer(mp_ctx *c) {
    mp_value *x, *s;
    mp_status st;
    if ((st = mp_need_in(c, 0, "X", &x)) || (st = mp_need_in(c, 1, "scale", &s))) return st;
    if (x->rank >= 0) {
        int64_t axis = mp_attr_i(c->n, "axis", -1);
        int a = mp_axis(axis, x->rank);
        if (a < 0)
            return mp_fail(c, "axis %lld is out of range for X '%s' of rank %d", (long long)axis,
                           x->name, x->rank);
        if (s->rank > x->rank - a)
            return mp_fail(c, "scale '%s' has rank %d, more than the %d normalized axes", s->name,
                           s->rank, x->rank - a);
    }
    return mp_set_out_like(c, 0, x);
}

static void at_rms_cost(mp_ctx *c, mp_cost *k) {
    bool ovf = false;
    k->flops = mp_umul(4, mp_cnumel(mp_in(c, 0), k), &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* ---- TensorScatter (24) ----
 * past_cache, update, write_indices (optional, [B]) -> present_cache like
 * past_cache; update has past_cache's dims but along `axis` (default -2),
 * where it is at most as long. A copy: no FLOPs. */
static mp_status at_tscatter_infer(mp_ctx *c) {
    mp_value *p, *u;
    mp_status st;
    if ((st = mp_need_in(c, 0, "past_cache", &p)) || (st = mp_need_in(c, 1, "update", &u)))
        return st;
    if (p->rank >= 0 && u->rank >= 0) {
        if (p->rank != u->rank || p->rank < 1)
            return mp_fail(c, "update '%s' has rank %d, past_cache '%s' rank %d: they must agree",
                           u->name, u->rank, p->name, p->rank);
        int64_t axis = mp_attr_i(c->n, "axis", -2);
        int a = mp_axis(axis, p->rank);
        if (a <= 0)
            return mp_fail(c, "axis %lld is out of range (not the batch axis) for rank %d",
                           (long long)axis, p->rank);
        for (int i = 0; i < p->rank; i++) {
            int64_t pd = p->dims[i], ud = u->dims[i];
            if (!MP_DIM_KNOWN(pd) || !MP_DIM_KNOWN(ud)) continue;
            if (i == a ? ud > pd : ud != pd)
                return mp_fail(c, "update '%s' dim %d is %lld, past_cache has %lld", u->name, i,
                               (long long)ud, (long long)pd);
        }
    }
    return mp_set_out_like(c, 0, p);
}

/* ------------------------------------------------------------------ */
/* kernels                                                             */
/* ------------------------------------------------------------------ */
/* In double, as ONNX's reference implementations compute them. */

/* Element (b, h, s, i) of a [B, H, S, d] tensor, or of its [B, S, H*d]
 * packed form. */
static int64_t atk_at(const mp_rtensor *t, int64_t H, int64_t S, int64_t d, int64_t b, int64_t h, int64_t s,
                      int64_t i) {
    return t->rank == 4 ? ((b * H + h) * S + s) * d + i : ((b * S + s) * H + h) * d + i;
}

void mp_krope(double *x, int64_t rot, bool interleaved, const double *cos, const double *sin) {
    int64_t half = rot / 2;
    for (int64_t i = 0; i < half; i++) {
        int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
        double x1 = x[i1], x2 = x[i2];
        x[i1] = x1 * cos[i] - x2 * sin[i];
        x[i2] = x2 * cos[i] + x1 * sin[i];
    }
}

void mp_ksdpa_row(const double *q, const double *K, const double *V, int64_t T, int64_t dk, int64_t dv,
                  double scale, double softcap, const double *add, const uint8_t *keep, double drop,
                  double *raw, double *masked, double *w, double *out) {
    for (int64_t t = 0; t < T; t++) {
        double d = 0;
        const double *kt = K + t * dk;
        for (int64_t i = 0; i < dk; i++) d += q[i] * kt[i];
        d *= scale;
        if (raw) raw[t] = d;
        if (softcap > 0) d = softcap * tanh(d / softcap);
        if (add) d += add[t];
        if (keep && !keep[t]) d = isinf(drop) ? drop : d + drop;
        if (masked) masked[t] = d;
        w[t] = d;
    }
    mp_s_softmax_row(w, T, true);
    for (int64_t i = 0; i < dv; i++) {
        double o = 0;
        for (int64_t t = 0; t < T; t++) o += w[t] * V[t * dv + i];
        out[i] = o;
    }
}

/* Attention (23, 24): scaled dot product with grouped key/value heads,
 * past key/value prepended, a boolean (keep) or additive mask broadcast to
 * [B, Hq, Sq, T], causal top-left aligned as ONNX's reference, softcap
 * applied to the scores before the mask (as ONNX Runtime does: a masked
 * score stays -inf), nonpad_kv_seqlen (24); outputs Y, present_key,
 * present_value and the scores at qk_matmul_output_mode (0 raw, 1 and 2
 * softcapped and masked, 3 softmax). Checked against ONNX Runtime by
 * tools/contrib_check.py. */
static mp_status atk_attention(mp_kctx *k) {
    const mp_rtensor *q = &k->in[0], *kx = &k->in[1], *vx = &k->in[2], *mask = mp_kin(k, 3);
    const mp_rtensor *pk = mp_kin(k, 4), *pv = mp_kin(k, 5), *npad = k->n->opset >= 24 ? mp_kin(k, 6) : NULL;
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    bool packed = q->rank == 3;
    int64_t B = q->dims[0], Hq, Hkv, Sq, Skv, dh, dv;
    if (packed) {
        Hq = mp_attr_i(k->n, "q_num_heads", 0), Hkv = mp_attr_i(k->n, "kv_num_heads", 0);
        if (Hq <= 0 || Hkv <= 0) return mp_kfail(k, MP_ERR_SHAPE, "3-D inputs need q_num_heads and kv_num_heads");
        Sq = q->dims[1], Skv = kx->dims[1], dh = q->dims[2] / Hq, dv = vx->dims[2] / Hkv;
    } else {
        Hq = q->dims[1], Hkv = kx->dims[1], Sq = q->dims[2], Skv = kx->dims[2], dh = q->dims[3], dv = vx->dims[3];
    }
    int64_t P = pk ? pk->dims[2] : 0, T = P + Skv;
    if (Hkv <= 0 || Hq % Hkv || q->numel != B * Hq * Sq * dh || kx->numel != B * Hkv * Skv * dh ||
        vx->numel != B * Hkv * Skv * dv || (pk && (pk->numel != B * Hkv * P * dh || !pv || pv->numel != B * Hkv * P * dv)) ||
        k->out[0].numel != B * Hq * Sq * dv || (npad && npad->numel != B))
        return mp_kfail(k, MP_ERR_SHAPE, "Q, K, V, past and output sizes do not agree");
    int mr = mask ? mask->rank : 0;
    if (mask && (mr < 2 || mr > 4 || mask->dims[mr - 2] != Sq || mask->dims[mr - 1] != T))
        return mp_kfail(k, MP_ERR_SHAPE, "attn_mask must end in [Sq, T] = [%lld, %lld]", (long long)Sq, (long long)T);
    double scale = mp_attr_f(k->n, "scale", 0.0), softcap = mp_attr_f(k->n, "softcap", 0.0);
    if (scale == 0) scale = 1.0 / sqrt((double)dh);
    bool causal = mp_attr_i(k->n, "is_causal", 0) != 0;
    int64_t mode = mp_attr_i(k->n, "qk_matmul_output_mode", 0);
    mp_rtensor *pko = k->n_out > 1 && k->out[1].data ? &k->out[1] : NULL, *pvo = k->n_out > 2 && k->out[2].data ? &k->out[2] : NULL;
    mp_rtensor *qko = k->n_out > 3 && k->out[3].data ? &k->out[3] : NULL;
    double *K = malloc(sizeof(double) * (size_t)(B * Hkv * T * dh + 1)), *V = malloc(sizeof(double) * (size_t)(B * Hkv * T * dv + 1));
    /* per row: the probabilities, the additive mask, the scores out, q, the output */
    double *w = malloc(sizeof(double) * (size_t)(4 * T + dh + dv + 4));
    uint8_t *keep = malloc((size_t)T + 1);
    if (!K || !V || !w || !keep) {
        free(K), free(V), free(w), free(keep);
        return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    }
    double *add = w + T, *raw = add + T, *masked = raw + T, *qr = masked + T, *o = qr + dh;
    for (int64_t b = 0; b < B; b++)
        for (int64_t g = 0; g < Hkv; g++)
            for (int64_t t = 0; t < T; t++) {
                for (int64_t i = 0; i < dh; i++)
                    K[((b * Hkv + g) * T + t) * dh + i] =
                        t < P ? mp_kget_f(pk->data, pk->dtype, ((b * Hkv + g) * P + t) * dh + i)
                              : mp_kget_f(kx->data, kx->dtype, atk_at(kx, Hkv, Skv, dh, b, g, t - P, i));
                for (int64_t i = 0; i < dv; i++)
                    V[((b * Hkv + g) * T + t) * dv + i] =
                        t < P ? mp_kget_f(pv->data, pv->dtype, ((b * Hkv + g) * P + t) * dv + i)
                              : mp_kget_f(vx->data, vx->dtype, atk_at(vx, Hkv, Skv, dv, b, g, t - P, i));
            }
    if (pko) mp_kconvert(pko->data, pko->dtype, K, MP_DT_DOUBLE, B * Hkv * T * dh);
    if (pvo) mp_kconvert(pvo->data, pvo->dtype, V, MP_DT_DOUBLE, B * Hkv * T * dv);
    bool bmask = mask && mask->dtype == MP_DT_BOOL;
    for (int64_t b = 0; b < B; b++) {
        int64_t valid = npad ? mp_kget_i(npad->data, npad->dtype, b) : T;
        for (int64_t h = 0; h < Hq; h++) {
            int64_t g = h / (Hq / Hkv);
            for (int64_t s = 0; s < Sq; s++) {
                for (int64_t i = 0; i < dh; i++) qr[i] = mp_kget_f(q->data, q->dtype, atk_at(q, Hq, Sq, dh, b, h, s, i));
                for (int64_t t = 0; t < T; t++) {
                    keep[t] = !((causal && t > s) || t >= valid);
                    add[t] = 0;
                    if (mask) { /* leading dims broadcast to [B, Hq] */
                        int64_t mb = mr == 4 ? (mask->dims[0] == 1 ? 0 : b) : 0;
                        int64_t mh = mr >= 3 ? (mask->dims[mr - 3] == 1 ? 0 : h) : 0;
                        int64_t mi = ((mr == 4 ? mb * mask->dims[1] : 0) + (mr >= 3 ? mh : 0)) * Sq * T + s * T + t;
                        if (bmask) keep[t] = keep[t] && mp_kget_i(mask->data, mask->dtype, mi) != 0;
                        else add[t] = mp_kget_f(mask->data, mask->dtype, mi);
                    }
                }
                mp_ksdpa_row(qr, K + (b * Hkv + g) * T * dh, V + (b * Hkv + g) * T * dv, T, dh, dv, scale, softcap,
                             mask && !bmask ? add : NULL, keep, -INFINITY, raw, masked, w, o);
                if (qko) {
                    const double *src = mode == 0 ? raw : mode == 3 ? w : masked;
                    for (int64_t t = 0; t < T; t++)
                        mp_kset_f(qko->data, qko->dtype, ((b * Hq + h) * Sq + s) * T + t, src[t]);
                }
                for (int64_t i = 0; i < dv; i++)
                    mp_kset_f(k->out[0].data, k->out[0].dtype, atk_at(&k->out[0], Hq, Sq, dv, b, h, s, i), o[i]);
            }
        }
    }
    free(K), free(V), free(w), free(keep);
    return MP_OK;
}

/* RotaryEmbedding (23): pairs of the first rot dims of each head (halves,
 * or adjacent when interleaved) rotated by cos/sin: caches [max_pos,
 * rot/2] indexed by position_ids [B, S], or [B, S, rot/2] without them. */
static mp_status atk_rope(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *cs = &k->in[1], *sn = &k->in[2], *pos = mp_kin(k, 3);
    mp_rtensor *y = &k->out[0];
    bool four = x->rank == 4, inter = mp_attr_i(k->n, "interleaved", 0) != 0;
    int64_t B = x->dims[0], H = four ? x->dims[1] : mp_attr_i(k->n, "num_heads", 0);
    int64_t S = four ? x->dims[2] : x->dims[1], d = four ? x->dims[3] : (H > 0 ? x->dims[2] / H : 0);
    int64_t rot = mp_attr_i(k->n, "rotary_embedding_dim", 0), half;
    if (rot <= 0) rot = d;
    half = rot / 2;
    if (H <= 0 || d <= 0 || rot > d || cs->numel != sn->numel || cs->dims[cs->rank - 1] != half ||
        (pos && pos->numel != B * S) || (!pos && cs->numel != B * S * half) || y->numel != x->numel)
        return mp_kfail(k, MP_ERR_SHAPE, "X, caches and position_ids sizes do not agree");
    int64_t rows = cs->numel / (half ? half : 1);
    double *row = malloc(sizeof(double) * (size_t)(d + 2 * half + 1));
    if (!row) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    double *c = row + d, *si = c + half;
    mp_status st = MP_OK;
    for (int64_t b = 0; b < B && !st; b++)
        for (int64_t h = 0; h < H && !st; h++)
            for (int64_t s = 0; s < S; s++) {
                int64_t p = pos ? mp_kget_i(pos->data, pos->dtype, b * S + s) : b * S + s;
                if (p < 0 || p >= rows) {
                    st = mp_kfail(k, MP_ERR_USAGE, "position %lld outside the caches", (long long)p);
                    break;
                }
                int64_t base = atk_at(x, H, S, d, b, h, s, 0);
                for (int64_t i = 0; i < d; i++) row[i] = mp_kget_f(x->data, x->dtype, base + i);
                for (int64_t i = 0; i < half; i++)
                    c[i] = mp_kget_f(cs->data, cs->dtype, p * half + i), si[i] = mp_kget_f(sn->data, sn->dtype, p * half + i);
                mp_krope(row, rot, inter, c, si);
                for (int64_t i = 0; i < d; i++) mp_kset_f(y->data, y->dtype, base + i, row[i]);
            }
    free(row);
    return st;
}

/* RMSNormalization (23): x / sqrt(mean(x^2) + epsilon) * scale over the
 * dims from axis on, scale broadcast onto them. */
static mp_status atk_rms(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *sc = &k->in[1];
    mp_rtensor *y = &k->out[0];
    int axis = mp_axis(mp_attr_i(k->n, "axis", -1), x->rank);
    if (axis < 0 || sc->numel < 1) return mp_kfail(k, MP_ERR_SHAPE, "axis or scale");
    double eps = mp_attr_f(k->n, "epsilon", 1e-5);
    int64_t len = 1;
    for (int i = axis; i < x->rank; i++) len *= x->dims[i];
    int64_t rows = len ? x->numel / len : 0;
    /* scale broadcast (right-aligned) onto the normalized dims */
    int64_t sd[MP_MAX_RANK], sst[MP_MAX_RANK];
    int nr = x->rank - axis;
    if (sc->rank > nr) return mp_kfail(k, MP_ERR_SHAPE, "scale has more dims than the normalized ones");
    mp_kstrides(sc->rank, sc->dims, sst);
    for (int i = 0; i < nr; i++) {
        int j = i - (nr - sc->rank);
        sd[i] = j >= 0 && sc->dims[j] != 1 ? sst[j] : 0;
    }
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t j = 0; j < len; j++) {
            double v = mp_kget_f(x->data, x->dtype, r * len + j);
            ss += v * v;
        }
        double inv = 1.0 / sqrt(ss / (double)len + eps);
        for (int64_t j = 0; j < len; j++) {
            int64_t rem = j, so = 0;
            for (int i = nr - 1; i >= 0; i--) so += (rem % x->dims[axis + i]) * sd[i], rem /= x->dims[axis + i];
            mp_kset_f(y->data, y->dtype, r * len + j,
                      mp_kget_f(x->data, x->dtype, r * len + j) * inv * mp_kget_f(sc->data, sc->dtype, so));
        }
    }
    return MP_OK;
}

/* TensorScatter (24): present = past_cache with, for each batch row b,
 * update's rows written along `axis` from write_indices[b] (0 when
 * absent); mode "circular" wraps around the axis. */
static mp_status atk_tscatter(mp_kctx *k) {
    const mp_rtensor *p = &k->in[0], *u = &k->in[1], *wi = mp_kin(k, 2);
    mp_rtensor *y = &k->out[0];
    int a = mp_axis(mp_attr_i(k->n, "axis", -2), p->rank);
    size_t es = mp_kesize(p->dtype);
    if (a <= 0 || u->rank != p->rank || !es || y->numel != p->numel || (wi && wi->numel != p->dims[0]))
        return mp_kfail(k, MP_ERR_SHAPE, "past_cache, update, write_indices or axis");
    bool circ = !strcmp(mp_attr_s(k->n, "mode", "linear"), "circular");
    if (y->data != p->data) memcpy(y->data, p->data, (size_t)p->numel * es);
    int64_t outer, inner, n = p->dims[a], m = u->dims[a], per_b = 1;
    mp_kouter_inner(p->rank, p->dims, a, &outer, &inner);
    for (int i = 1; i < a; i++) per_b *= p->dims[i];
    for (int64_t o = 0; o < outer; o++) {
        int64_t b = per_b ? o / per_b : 0, start = wi ? mp_kget_i(wi->data, wi->dtype, b) : 0;
        for (int64_t j = 0; j < m; j++) {
            int64_t at = circ ? ((start + j) % n + n) % n : start + j;
            if (at < 0 || at >= n)
                return mp_kfail(k, MP_ERR_USAGE, "write index %lld + %lld is past the cache (%lld)", (long long)start,
                                (long long)j, (long long)n);
            memcpy((char *)y->data + (size_t)((o * n + at) * inner) * es,
                   (const char *)u->data + (size_t)((o * m + j) * inner) * es, (size_t)inner * es);
        }
    }
    return MP_OK;
}

/* Swish (24): x * sigmoid(alpha * x). */
static mp_status atk_swish(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    double alpha = mp_attr_f(k->n, "alpha", 1.0);
    for (int64_t e = 0; e < x->numel; e++) {
        double v = mp_kget_f(x->data, x->dtype, e);
        mp_kset_f(k->out[0].data, k->out[0].dtype, e, mp_s_swish(v, alpha));
    }
    return MP_OK;
}

/* RMSNorm keeps its input and one fp32 statistic per row (autocast's
 * fp32 list, as layer norms); Swish keeps its input. */
static void at_train_rms(mp_ctx *c, mp_bwd *t) {
    t->amp = MP_AMP_FP32;
    if (!t->rg) return;
    t->save_in = 1u;
    const mp_value *x = mp_in(c, 0);
    if (x && x->rank >= 1) {
        int ax = mp_axis(mp_attr_i(c->n, "axis", -1), x->rank);
        int64_t r = ax >= 0 ? mp_dims_product(x->dims, ax) : -1;
        t->extra_bytes = r > 0 ? 4 * (uint64_t)r : 0;
    }
    t->bwd_flops = 2 * t->fwd->flops;
}

const mp_op mp_ops_attention[] = {
    {"", "Attention", 23, at_attention_infer, at_attention_cost, 0, 0, NULL, atk_attention,
     .train = at_train_attention},
    {"", "RotaryEmbedding", 23, at_rope_infer, at_rope_cost, 0, 0, NULL, atk_rope},
    /* scale is learnable */
    {"", "RMSNormalization", 23, at_rms_infer, at_rms_cost, 1u << 1, 0, NULL, atk_rms,
     .train = at_train_rms},
    {"", "TensorScatter", 24, at_tscatter_infer, mp_cost_zero, 0, 0, NULL, atk_tscatter},
    {"", "Swish", 24, mp_infer_same, mp_cost_out1, 0, 0, NULL, atk_swish,
     .train = mp_bwd_save_in0},
};
const int mp_ops_attention_count = (int)MP_ARRAY_LEN(mp_ops_attention);
