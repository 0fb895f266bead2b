/* The transformer operators the default domain gained in opsets 23 and 24:
 * Attention (23, 24), RotaryEmbedding (23), RMSNormalization (23),
 * TensorScatter (24) and Swish (24). Shape rules from the operator specs,
 * cost rules in docs/COUNTING.md ("Opsets 23 and 24"). */
#include "ops/ops.h"

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

/* a * b when both are known, else the anonymous unknown dim. */
static int64_t at_mul(int64_t a, int64_t b) {
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) return MP_DIM_ANON;
    return r;
}
static int64_t at_add(int64_t a, int64_t b) {
    int64_t r;
    if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) return MP_DIM_ANON;
    return r;
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
    d->total = d->past == 0 ? d->skv : at_add(d->past, d->skv);
    return MP_OK;
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
    int64_t y4[4] = {d.b, d.hq, d.sq, d.dv}, y3[3] = {d.b, d.sq, at_mul(d.hq, d.dv)};
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

const mp_op mp_ops_attention[] = {
    {"", "Attention", 23, at_attention_infer, at_attention_cost, 0, 0, NULL},
    {"", "RotaryEmbedding", 23, at_rope_infer, at_rope_cost, 0, 0, NULL},
    /* scale is learnable */
    {"", "RMSNormalization", 23, at_rms_infer, at_rms_cost, 1u << 1, 0, NULL},
    {"", "TensorScatter", 24, at_tscatter_infer, mp_cost_zero, 0, 0, NULL},
    {"", "Swish", 24, mp_infer_same, mp_cost_out1, 0, 0, NULL},
};
const int mp_ops_attention_count = (int)MP_ARRAY_LEN(mp_ops_attention);
