/* onnxruntime's contrib operators (domain "com.microsoft"): the fused
 * transformer ops its optimizer emits (Attention, MultiHeadAttention,
 * GroupQueryAttention, SkipLayerNormalization, BiasGelu, FastGelu, ...),
 * its quantized ops (MatMulNBits, QLinearAdd, QGemm, ...) and the two
 * normalizations it registers in the default domain (LayerNormalization
 * before opset 17, SimplifiedLayerNormalization).
 *
 * Semantics follow onnxruntime's docs/ContribOperators.md. Each op's
 * comment states its shape rule and its cost rule; docs/counting/
 * contrib_quant.md holds the same rules with worked examples.
 *
 * Counting (GUIDE §2): a MAC is one multiply-accumulate of a dot product.
 * A fused op counts what its unfused graph would: the attention ops count
 * the projection (Attention, QAttention), the score and context products
 * as MACs, and the scaling, softmax and bias additions as FLOPs. Integer
 * products (quantized ops) count MACs the same way; their FLOPs are integer
 * operations. Quantization, dequantization and requantization inside a
 * fused quantized op are not counted (as QLinearMatMul in linalg.c). */
#include "ops/kernel.h"
#include "ops/scalar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CT_MS "com.microsoft"
#define CT_BIT(i) (1u << (i))
#define CT_HEADS_MAX ((int64_t)1 << 20)

/* ------------------------------------------------------------------ */
/* helpers                                                             */
/* ------------------------------------------------------------------ */

/* Required input i (named `what` in errors). */
static mp_value *ct_need(mp_ctx *c, int i, const char *what, mp_status *st) {
    mp_value *v = NULL;
    *st = mp_need_in(c, i, what, &v);
    return *st ? NULL : v;
}

/* Input i, when present, must have rank r (or an unknown rank). */
static mp_status ct_rank(mp_ctx *c, int i, const char *what, int r) {
    mp_value *v = mp_in(c, i);
    if (v && v->rank >= 0 && v->rank != r)
        return mp_fail(c, "%s '%s' must have rank %d, got %d", what, v->name, r, v->rank);
    return MP_OK;
}

/* Input i, when present, must be 1-D of length n (n < 0: any length). */
static mp_status ct_vec(mp_ctx *c, int i, const char *what, int64_t n) {
    mp_value *v = mp_in(c, i);
    if (!v || v->rank < 0) return MP_OK;
    if (v->rank != 1) return mp_fail(c, "%s '%s' must be 1-D, got rank %d", what, v->name, v->rank);
    if (v->dims[0] >= 0 && n >= 0 && v->dims[0] != n)
        return mp_fail(c, "%s '%s' has %lld values, expected %lld", what, v->name,
                       (long long)v->dims[0], (long long)n);
    return MP_OK;
}

/* A positive int attribute, at most `max`; def when absent (def <= 0 and
 * absent: an error when `required`). */
static mp_status ct_attr_pos(mp_ctx *c, const char *name, int64_t def, int64_t max,
                             bool required, int64_t *out) {
    const mp_attr *a = mp_node_attr(c->n, name);
    if (!a || a->type != MP_ATTR_INT) {
        if (required) return mp_fail(c, "attribute '%s' is required", name);
        *out = def;
        return MP_OK;
    }
    if (a->i <= 0 || a->i > max)
        return mp_fail(c, "attribute %s = %lld is out of range [1, %lld]", name, (long long)a->i,
                       (long long)max);
    *out = a->i;
    return MP_OK;
}

/* a * b + c for cost figures, flagging overflow. */
static uint64_t ct_madd(mp_cost *k, uint64_t a, uint64_t b, uint64_t c) {
    bool ovf = false;
    uint64_t r = mp_uadd(mp_umul(a, b, &ovf), c, &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
    return r;
}

/* MACs, and FLOPs = 2 * MACs + extra. */
static void ct_set(mp_cost *k, uint64_t macs, uint64_t extra) {
    k->macs = macs;
    k->flops = ct_madd(k, 2, macs, extra);
}

/* FLOPs = per * elements of v (no MACs). */
static void ct_per_elem(mp_cost *k, uint64_t per, const mp_value *v) {
    k->macs = 0;
    k->flops = ct_madd(k, per, mp_cnumel(v, k), 0);
}

/* ------------------------------------------------------------------ */
/* matrix products: FusedMatMul, GemmFastGelu, MatMulNBits, QGemm,     */
/* DynamicQuantizeMatMul, MatMulIntegerToFloat, MatMulInteger16        */
/* ------------------------------------------------------------------ */

/* Dims of input i as the op sees them: FusedMatMul's transBatch moves dim
 * 0 behind the other batch dims (perm [1, ..., r-2, 0, r-1]) and trans
 * swaps the last two, both on rank >= 2 (transBatch on rank >= 3). */
static void ct_mm_view(const mp_value *v, bool trans, bool trans_batch, int64_t *d) {
    int r = v->rank;
    for (int i = 0; i < r; i++) d[i] = v->dims[i];
    if (trans_batch && r >= 3) {
        int64_t d0 = d[0];
        for (int i = 0; i < r - 2; i++) d[i] = d[i + 1];
        d[r - 2] = d0;
    }
    if (trans && r >= 2) {
        int64_t t = d[r - 2];
        d[r - 2] = d[r - 1];
        d[r - 1] = t;
    }
}

/* numpy matmul of a (ra dims) and b (rb dims): a 1-D A [K] is promoted to
 * [1, K] and a 1-D B [K] to [K, 1], the promoted dim removed from the
 * output; batch dims broadcast aligned from the right. Writes the output
 * dims and the contracted extent K. */
static mp_status ct_mm_dims(mp_ctx *c, const mp_value *av, const int64_t *a, int ra,
                            const mp_value *bv, const int64_t *b, int rb, int64_t *od, int *ro,
                            int64_t *kk) {
    if (ra == 0 || rb == 0)
        return mp_fail(c, "matmul of a scalar ('%s' rank %d, '%s' rank %d)", av->name, ra,
                       bv->name, rb);
    int64_t ka = a[ra - 1], kb = rb >= 2 ? b[rb - 2] : b[0];
    if (!mp_dim_merge(ka, kb, kk))
        return mp_fail(c, "inner dims differ: '%s' has K=%lld, '%s' has K=%lld", av->name,
                       (long long)ka, bv->name, (long long)kb);
    mp_value ta = {0}, tb = {0};
    ta.name = av->name;
    ta.rank = ra > 2 ? ra - 2 : 0;
    ta.dims = (int64_t *)a;
    tb.name = bv->name;
    tb.rank = rb > 2 ? rb - 2 : 0;
    tb.dims = (int64_t *)b;
    int r;
    mp_status st = mp_broadcast(c, &ta, &tb, &r, od);
    if (st) return st;
    if (ra >= 2) od[r++] = a[ra - 2];
    if (rb >= 2) od[r++] = b[rb - 1];
    *ro = r;
    return MP_OK;
}

/* matmul of inputs ia and ib (with FusedMatMul's transposes) into output 0
 * of dtype dt; *kk gets K (unknown when a rank is unknown). */
static mp_status ct_mm(mp_ctx *c, int ia, int ib, int dt, bool set, int64_t *kk) {
    mp_status st = MP_OK;
    mp_value *a = ct_need(c, ia, "A", &st), *b;
    if (!a) return st;
    if (!(b = ct_need(c, ib, "B", &st))) return st;
    *kk = MP_DIM_ANON;
    if (a->rank < 0 || b->rank < 0) return set ? mp_set_out(c, 0, dt, -1, NULL) : MP_OK;
    bool fused = strcmp(c->n->op, "FusedMatMul") == 0 || strcmp(c->n->op, "TransposeMatMul") == 0;
    int64_t ad[MP_MAX_RANK], bd[MP_MAX_RANK], od[MP_MAX_RANK + 2];
    ct_mm_view(a, fused && mp_attr_i(c->n, "transA", 0), fused && mp_attr_i(c->n, "transBatchA", 0),
               ad);
    ct_mm_view(b, fused && mp_attr_i(c->n, "transB", 0), fused && mp_attr_i(c->n, "transBatchB", 0),
               bd);
    int ro = 0;
    if ((st = ct_mm_dims(c, a, ad, a->rank, b, bd, b->rank, od, &ro, kk))) return st;
    return set ? mp_set_out(c, 0, dt, ro, od) : MP_OK;
}

/* MACs of a matmul node = output elements * K. */
static uint64_t ct_mm_macs(mp_ctx *c, mp_cost *k, int ia, int ib) {
    int64_t kk = MP_DIM_ANON;
    mp_status st = ct_mm(c, ia, ib, 0, false, &kk);
    if (st) {
        mp_error_clear();
        k->flags |= MP_COST_UNKNOWN;
        return 0;
    }
    int64_t f[1] = {kk};
    uint64_t kf = mp_cost_prod(k, f, 1);
    return ct_madd(k, mp_cnumel(mp_out(c, 0), k), kf, 0);
}

/* FusedMatMul (alias TransposeMatMul): Y = alpha * A' x B' with A' = A
 * after transBatchA and transA, B' likewise; numpy matmul of A' and B',
 * dtype of A. MACs = prod(batch) * M * K * N; FLOPs = 2 * MACs (alpha not
 * counted, as Gemm's). */
static mp_status fused_matmul_infer(mp_ctx *c) {
    mp_value *a = mp_in(c, 0);
    int64_t kk;
    return ct_mm(c, 0, 1, a ? a->dtype : MP_DT_UNDEFINED, true, &kk);
}

static void matmul2_cost(mp_ctx *c, mp_cost *k) { ct_set(k, ct_mm_macs(c, k, 0, 1), 0); }

/* GemmFastGelu: X [..., K], W [K, N], bias [N] optional: matmul, dtype of
 * X. MACs as MatMul; FLOPs = 2 * MACs + (bias ? numel(Y) : 0) + numel(Y)
 * (FastGelu, 1 per element). */
static mp_status gemm_fast_gelu_infer(mp_ctx *c) {
    mp_value *a = mp_in(c, 0);
    int64_t kk;
    mp_status st = ct_mm(c, 0, 1, a ? a->dtype : MP_DT_UNDEFINED, true, &kk);
    return st ? st : ct_vec(c, 2, "bias", mp_value_dim(mp_out(c, 0), -1));
}

static void gemm_fast_gelu_cost(mp_ctx *c, mp_cost *k) {
    uint64_t y = mp_cnumel(mp_out(c, 0), k);
    ct_set(k, ct_mm_macs(c, k, 0, 1), ct_madd(k, mp_in(c, 2) ? 2 : 1, y, 0));
}

/* DynamicQuantizeMatMul: A fp32, B int8/uint8 (the weight), b_scale,
 * b_zero_point, bias [N] -> Y fp32 = matmul(A, B) (+ bias). A is quantized
 * on the fly. MACs as MatMul (integer); FLOPs = 2 * MACs + 4 * numel(A)
 * (DynamicQuantizeLinear's min, max, divide, add) + (bias ? numel(Y) : 0). */
static mp_status dyn_quant_matmul_infer(mp_ctx *c) {
    mp_value *a = mp_in(c, 0);
    int64_t kk;
    mp_status st = ct_mm(c, 0, 1, a && a->dtype ? a->dtype : MP_DT_FLOAT, true, &kk);
    return st ? st : ct_vec(c, 4, "bias", mp_value_dim(mp_out(c, 0), -1));
}

static void dyn_quant_matmul_cost(mp_ctx *c, mp_cost *k) {
    uint64_t macs = ct_mm_macs(c, k, 0, 1);
    uint64_t extra = ct_madd(k, 4, mp_cnumel(mp_in(c, 0), k), 0);
    if (mp_in(c, 4)) extra = ct_madd(k, 1, mp_cnumel(mp_out(c, 0), k), extra);
    ct_set(k, macs, extra);
}

/* MatMulIntegerToFloat: A, B (8-bit; B the weight), a_scale, b_scale,
 * a_zero_point, b_zero_point, bias -> Y of a_scale's dtype (fp32 when
 * unknown). MACs as MatMul (integer); FLOPs = 2 * MACs + (bias ?
 * numel(Y) : 0); the rescaling to float is not counted. */
static mp_status matmul_int_to_float_infer(mp_ctx *c) {
    mp_value *s = mp_in(c, 2);
    int64_t kk;
    mp_status st = ct_mm(c, 0, 1, s && s->dtype ? s->dtype : MP_DT_FLOAT, true, &kk);
    return st ? st : ct_vec(c, 6, "bias", mp_value_dim(mp_out(c, 0), -1));
}

static void matmul_bias_cost(mp_ctx *c, mp_cost *k, int bias_i) {
    uint64_t macs = ct_mm_macs(c, k, 0, 1);
    ct_set(k, macs, mp_in(c, bias_i) ? mp_cnumel(mp_out(c, 0), k) : 0);
}

static void matmul_int_to_float_cost(mp_ctx *c, mp_cost *k) { matmul_bias_cost(c, k, 6); }

/* MatMulInteger16: A, B int16/uint16 -> int32 (uint32 when both are
 * uint16), numpy matmul. MACs as MatMul; FLOPs = 2 * MACs (integer). */
static mp_status matmul_int16_infer(mp_ctx *c) {
    mp_value *a = mp_in(c, 0), *b = mp_in(c, 1);
    int dt = (a && b && a->dtype == MP_DT_UINT16 && b->dtype == MP_DT_UINT16) ? MP_DT_UINT32
                                                                               : MP_DT_INT32;
    int64_t kk;
    return ct_mm(c, 0, 1, dt, true, &kk);
}

/* MatMulNBits: A [..., K] (float), B uint8 [N, k_blocks, blob_size] (the
 * weight: N x K values of `bits` bits packed per block of block_size along
 * K, k_blocks = ceil(K / block_size), blob_size = block_size * bits / 8),
 * scales, zero_points, g_idx, bias [N] -> Y = A[..., :-1] + [N], dtype of
 * A. Attributes K, N, block_size required; bits default 4.
 * MACs = numel(Y) * K = prod(A[:-1]) * K * N; FLOPs = 2 * MACs + (bias ?
 * numel(Y) : 0). The dequantization of the weights (2 per weight) is not
 * counted. B is the parameter slot: it holds N * K weights of `bits` each
 * (see mp_contrib_param_view); scales, zero points and g_idx are buffers. */
typedef struct ct_nbits {
    int64_t k, n, bits, block, k_blocks, blob;
} ct_nbits;

static mp_status ct_nbits_attrs(mp_ctx *c, ct_nbits *q) {
    mp_status st;
    if ((st = ct_attr_pos(c, "K", 0, MP_DIM_MAX, true, &q->k)) ||
        (st = ct_attr_pos(c, "N", 0, MP_DIM_MAX, true, &q->n)) ||
        (st = ct_attr_pos(c, "bits", 4, 8, false, &q->bits)) ||
        (st = ct_attr_pos(c, "block_size", 0, MP_DIM_MAX, true, &q->block)))
        return st;
    if (q->bits < 2) return mp_fail(c, "bits = %lld, expected 2 to 8", (long long)q->bits);
    if (q->block < 16 || (q->block & (q->block - 1)) != 0)
        return mp_fail(c, "block_size = %lld must be a power of two >= 16", (long long)q->block);
    q->k_blocks = (q->k + q->block - 1) / q->block;
    q->blob = q->block * q->bits / 8;
    return MP_OK;
}

static mp_status matmul_nbits_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *a = ct_need(c, 0, "A", &st), *b, *s;
    if (!a) return st;
    if (!(b = ct_need(c, 1, "B", &st)) || !(s = ct_need(c, 2, "scales", &st))) return st;
    ct_nbits q;
    if ((st = ct_nbits_attrs(c, &q))) return st;
    if (b->rank >= 0) {
        if (b->rank != 2 && b->rank != 3)
            return mp_fail(c, "B '%s' must be [N, k_blocks, blob_size], got rank %d", b->name,
                           b->rank);
        int64_t want[3] = {q.n, q.k_blocks, q.blob};
        if (b->rank == 2) want[1] = q.k_blocks * q.blob;
        for (int i = 0; i < b->rank; i++)
            if (b->dims[i] >= 0 && b->dims[i] != want[i])
                return mp_fail(c, "B '%s' dim %d is %lld, expected %lld (N=%lld, K=%lld, bits=%lld, "
                               "block_size=%lld)", b->name, i, (long long)b->dims[i],
                               (long long)want[i], (long long)q.n, (long long)q.k,
                               (long long)q.bits, (long long)q.block);
    }
    if ((st = ct_vec(c, 5, "bias", q.n))) return st;
    if (a->rank < 0) return mp_set_out(c, 0, a->dtype, -1, NULL);
    if (a->rank == 0) return mp_fail(c, "A '%s' is a scalar", a->name);
    int64_t kk;
    if (!mp_dim_merge(a->dims[a->rank - 1], q.k, &kk))
        return mp_fail(c, "A '%s' has K=%lld but the attribute K is %lld", a->name,
                       (long long)a->dims[a->rank - 1], (long long)q.k);
    int64_t od[MP_MAX_RANK];
    for (int i = 0; i < a->rank - 1; i++) od[i] = a->dims[i];
    od[a->rank - 1] = q.n;
    return mp_set_out(c, 0, a->dtype, a->rank, od);
}

static void matmul_nbits_cost(mp_ctx *c, mp_cost *k) {
    int64_t kk = mp_attr_i(c->n, "K", -1);
    int64_t f[1] = {kk > 0 ? kk : MP_DIM_ANON};
    uint64_t y = mp_cnumel(mp_out(c, 0), k);
    ct_set(k, ct_madd(k, y, mp_cost_prod(k, f, 1), 0), mp_in(c, 5) ? y : 0);
}

/* The logical parameter behind a packed quantized initializer. The
 * analysis counts a parameter's elements from its initializer's numel,
 * which for MatMulNBits' B (uint8 [N, k_blocks, blob_size]) is
 * N * K * bits / 8, not the N * K weights it holds; GatherBlockQuantized's
 * uint8 data packs 8 / bits values per byte likewise. Returns true with the
 * weight count and their dtype (4 bits: uint4, onnxruntime's nibbles are
 * unsigned with a default zero point of 8; 8 bits: uint8); false when the
 * initializer's own numel and dtype are right (or no dtype names the width,
 * e.g. 2 bits: the packed uint8 bytes are still exact).
 * The descriptors' param_view hook. */
static bool mp_contrib_param_view(const mp_node *n, int input, const mp_tensor *t, int64_t *count,
                           int *dtype) {
    if (!n || !t || strcmp(n->domain, CT_MS) != 0) return false;
    int64_t bits = mp_attr_i(n, "bits", 4);
    int dt = bits == 4 ? MP_DT_UINT4 : bits == 8 ? MP_DT_UINT8 : MP_DT_UNDEFINED;
    if (dt == MP_DT_UNDEFINED || t->dtype != MP_DT_UINT8) return false;
    if (strcmp(n->op, "MatMulNBits") == 0 && input == 1) {
        int64_t k = mp_attr_i(n, "K", 0), nn = mp_attr_i(n, "N", 0), r;
        if (k <= 0 || nn <= 0 || __builtin_mul_overflow(k, nn, &r)) return false;
        *count = r;
        *dtype = dt;
        return true;
    }
    if (strcmp(n->op, "GatherBlockQuantized") == 0 && input == 0 && t->numel > 0 &&
        t->numel <= INT64_MAX / 8) {
        *count = t->numel * (8 / bits);
        *dtype = dt;
        return true;
    }
    return false;
}

/* Gemm's rule on A = input ia, B = input ib, C = input ic (-1: none):
 * A' = transA ? A^T : A is [M, K], B' is [K, N], Y [M, N] of dtype dt; C
 * must broadcast to [M, N]. */
static bool ct_gemm_dims(mp_ctx *c, int ia, int ib, int64_t *m, int64_t *kk, int64_t *n,
                         char *err, size_t en) {
    mp_value *a = mp_in(c, ia), *b = mp_in(c, ib);
    bool ta = mp_attr_i(c->n, "transA", 0) != 0, tb = mp_attr_i(c->n, "transB", 0) != 0;
    *m = *kk = *n = MP_DIM_ANON;
    if (!a || !b) {
        snprintf(err, en, "inputs A (%d) and B (%d) are required", ia, ib);
        return false;
    }
    if ((a->rank >= 0 && a->rank != 2) || (b->rank >= 0 && b->rank != 2)) {
        snprintf(err, en, "A and B must be 2-D (ranks %d and %d)", a->rank, b->rank);
        return false;
    }
    int64_t ka = MP_DIM_ANON, kb = MP_DIM_ANON;
    if (a->rank == 2) {
        *m = a->dims[ta ? 1 : 0];
        ka = a->dims[ta ? 0 : 1];
    }
    if (b->rank == 2) {
        kb = b->dims[tb ? 1 : 0];
        *n = b->dims[tb ? 0 : 1];
    }
    if (!mp_dim_merge(ka, kb, kk)) {
        snprintf(err, en, "inner dims differ: '%s' gives K=%lld, '%s' gives K=%lld", a->name,
                 (long long)ka, b->name, (long long)kb);
        return false;
    }
    return true;
}

static mp_status ct_gemm_infer(mp_ctx *c, int ia, int ib, int ic, int dt) {
    mp_status st = MP_OK;
    if (!ct_need(c, ia, "A", &st) || !ct_need(c, ib, "B", &st)) return st;
    int64_t m, kk, n;
    char err[256];
    if (!ct_gemm_dims(c, ia, ib, &m, &kk, &n, err, sizeof err)) return mp_fail(c, "%s", err);
    int64_t od[2] = {m, n};
    mp_value *cc = ic >= 0 ? mp_in(c, ic) : NULL;
    if (cc && cc->rank >= 0) {
        if (cc->rank > 2) return mp_fail(c, "C '%s' has rank %d, above 2", cc->name, cc->rank);
        for (int i = 0; i < cc->rank; i++) {
            int64_t d = cc->dims[cc->rank - 1 - i], t = od[1 - i];
            if (d >= 0 && d != 1 && t >= 0 && d != t)
                return mp_fail(c, "C '%s' dim %lld does not broadcast to %lld", cc->name,
                               (long long)d, (long long)t);
            if (t < 0 && d > 1) od[1 - i] = d;
        }
    }
    return mp_set_out(c, 0, dt, 2, od);
}

/* MACs = M * K * N; FLOPs = 2 * MACs + per_mn * M * N. */
static void ct_gemm_cost(mp_ctx *c, mp_cost *k, int ia, int ib, uint64_t per_mn) {
    int64_t m, kk, n;
    char err[256];
    if (!ct_gemm_dims(c, ia, ib, &m, &kk, &n, err, sizeof err)) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    mp_value *y = mp_out(c, 0);
    if (y && y->rank == 2) {
        if (m < 0) m = y->dims[0];
        if (n < 0) n = y->dims[1];
    }
    int64_t f[3] = {m, kk, n}, mn[2] = {m, n};
    uint64_t macs = mp_cost_prod(k, f, 3);
    ct_set(k, macs, per_mn ? ct_madd(k, per_mn, mp_cost_prod(k, mn, 2), 0) : 0);
}

/* FusedGemm: Gemm (A, B, C; transA, transB, alpha, beta) followed by an
 * activation (attribute `activation`). Gemm's shape rule. MACs = M * K * N;
 * FLOPs = 2 * MACs + M * N for C + M * N for the activation when one is
 * named. */
static mp_status fused_gemm_infer(mp_ctx *c) {
    mp_value *a = mp_in(c, 0);
    return ct_gemm_infer(c, 0, 1, 2, a ? a->dtype : MP_DT_UNDEFINED);
}

static void fused_gemm_cost(mp_ctx *c, mp_cost *k) {
    const char *act = mp_attr_s(c->n, "activation", "");
    ct_gemm_cost(c, k, 0, 1, (mp_in(c, 2) ? 1u : 0u) + (act[0] ? 1u : 0u));
}

/* QGemm: A, a_scale, a_zero_point, B (the weight), b_scale, b_zero_point,
 * C (int32, optional), y_scale, y_zero_point -> Y [M, N] of
 * y_zero_point's dtype; without y_zero_point, fp32 (with y_scale alone, A's
 * dtype: the output is quantized). MACs = M * K * N (integer); FLOPs = 2 *
 * MACs + (C ? M * N : 0). B and C are parameter slots; scales and zero
 * points are buffers. */
static mp_status qgemm_infer(mp_ctx *c) {
    mp_value *a = mp_in(c, 0), *ys = mp_in(c, 7), *yz = mp_in(c, 8);
    int dt = yz ? yz->dtype : (ys && a) ? a->dtype : MP_DT_FLOAT;
    return ct_gemm_infer(c, 0, 3, 6, dt);
}

static void qgemm_cost(mp_ctx *c, mp_cost *k) { ct_gemm_cost(c, k, 0, 3, mp_in(c, 6) ? 1 : 0); }

/* ------------------------------------------------------------------ */
/* FusedConv                                                           */
/* ------------------------------------------------------------------ */

/* FusedConv: Conv (X, W, B) + optional residual Z + activation. Conv's
 * shape rule (mp_conv_infer). MACs = numel(W) * N * prod(out spatial) (the
 * Conv rule); FLOPs = 2 * MACs + numel(Y) for each of: B, Z (the residual
 * add), the activation when one is named. */
static mp_status fused_conv_infer(mp_ctx *c) {
    /* mp_conv_infer multiplies W's channels by group unchecked */
    int64_t group = mp_attr_i(c->n, "group", 1);
    if (group < 1 || group > ((int64_t)1 << 31))
        return mp_fail(c, "group = %lld is out of range", (long long)group);
    return mp_conv_infer(c, 0, 1, 2, 0);
}

static void fused_conv_cost(mp_ctx *c, mp_cost *k) {
    mp_value *w = mp_in(c, 1), *y = mp_out(c, 0);
    if (!mp_shape_known(w) || !mp_shape_known(y) || y->rank < 2) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    bool ovf = false;
    uint64_t macs = (uint64_t)mp_value_numel(w);
    for (int i = 0; i < y->rank; i++)
        if (i != 1) macs = mp_umul(macs, (uint64_t)y->dims[i], &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
    const char *act = mp_attr_s(c->n, "activation", "");
    uint64_t per = (mp_in(c, 2) ? 1u : 0u) + (mp_in(c, 3) ? 1u : 0u) + (act[0] ? 1u : 0u);
    ct_set(k, macs, ct_madd(k, per, mp_cnumel(y, k), 0));
}

/* ------------------------------------------------------------------ */
/* attention: Attention, QAttention, MultiHeadAttention,               */
/* GroupQueryAttention                                                 */
/* ------------------------------------------------------------------ */

/* The dims an attention op works on. Per batch row and head, the scores
 * are a [s, dk] x [dk, t] product and the context a [s, t] x [t, dv] one:
 *   scores MACs  = b * n * s * t * dk
 *   context MACs = b * n * s * t * dv
 * and with E = b * n * s * t score elements, FLOPs = 2 * MACs + E (scaling)
 * + E (softmax) + E per additive bias on the scores (attention_bias), plus
 * each op's own terms (projection, bias, rotary). Masks select, they are
 * not counted. kv heads of GroupQueryAttention are broadcast to the n query
 * heads, so its products count n heads. */
typedef struct ct_att {
    int64_t b, s;       /* batch, query length */
    int64_t l, past;    /* new key/value length, past length (0 without) */
    int64_t t;          /* attended key length */
    int64_t n, nkv;     /* query heads, key/value heads */
    int64_t dk, dv;     /* head sizes of q/k and of v */
    int64_t hin, width; /* Attention, QAttention: input hidden, projection width */
    int64_t present;    /* sequence dim of the present outputs */
    bool bound;         /* t is a shared buffer's length: an upper bound */
    int dt;             /* dtype of the output */
    int present_dt;
} ct_att;

/* Known scalar contents of input i (a length), or -1. */
static int64_t ct_scalar(mp_ctx *c, int i) {
    const int64_t *v;
    int64_t cnt;
    if (!mp_in(c, i) || !mp_ints(c, i, &v, &cnt) || cnt != 1 || v[0] < 0) return -1;
    return v[0];
}

/* Attention (quant = false) and QAttention (quant = true).
 * Attention: input [B, S, Hin], weights [Hin, Hq + Hk + Hv] (qkv_hidden_sizes,
 * else three equal parts), bias [Hq + Hk + Hv], mask_index, past [2, B, N, P,
 * dk], attention_bias, past_sequence_length. QAttention: input, weight,
 * bias, input_scale, weight_scale, mask_index, input_zero_point,
 * weight_zero_point, past; three equal parts. Hq must equal Hk, N divide Hq
 * and Hv; dk = Hq / N, dv = Hv / N; t = P + S (with
 * past_present_share_buffer: past_sequence_length + S when known, else the
 * buffer length P, an upper bound). */
static bool ct_att_proj(mp_ctx *c, bool quant, ct_att *a, char *err, size_t en) {
    mp_value *x = mp_in(c, 0), *w = mp_in(c, 1), *bias = mp_in(c, 2);
    int past_i = quant ? 8 : 4;
    mp_value *past = mp_in(c, past_i);
    memset(a, 0, sizeof *a);
    if (!x || !w) {
        snprintf(err, en, "inputs 'input' and 'weights' are required");
        return false;
    }
    if ((x->rank >= 0 && x->rank != 3) || (w->rank >= 0 && w->rank != 2) ||
        (bias && bias->rank >= 0 && bias->rank != 1) || (past && past->rank >= 0 && past->rank != 5)) {
        snprintf(err, en, "expected input [B, S, H], weights [H, 3H], bias [3H], past [2, B, N, P, "
                 "h] (ranks %d, %d, %d, %d)", x->rank, w->rank, bias ? bias->rank : 1,
                 past ? past->rank : 5);
        return false;
    }
    int64_t n = mp_attr_i(c->n, "num_heads", 0);
    if (n <= 0 || n > CT_HEADS_MAX) {
        snprintf(err, en, "num_heads = %lld is missing or out of range", (long long)n);
        return false;
    }
    a->n = a->nkv = n;
    int64_t width = MP_DIM_ANON, hq, hk, hv;
    if (!mp_dim_merge(mp_value_dim(w, 1), mp_value_dim(bias, 0), &width)) {
        snprintf(err, en, "weights have %lld columns but bias has %lld values",
                 (long long)mp_value_dim(w, 1), (long long)mp_value_dim(bias, 0));
        return false;
    }
    const int64_t *qkv = NULL;
    int nq = quant ? -1 : mp_attr_ints(c->n, "qkv_hidden_sizes", &qkv);
    if (nq >= 0) {
        if (nq != 3 || qkv[0] <= 0 || qkv[1] <= 0 || qkv[2] <= 0 || qkv[0] > MP_DIM_MAX ||
            qkv[1] > MP_DIM_MAX || qkv[2] > MP_DIM_MAX) {
            snprintf(err, en, "qkv_hidden_sizes must be 3 positive sizes");
            return false;
        }
        hq = qkv[0];
        hk = qkv[1];
        hv = qkv[2];
        if (width >= 0 && width != hq + hk + hv) {
            snprintf(err, en, "weights have %lld columns but qkv_hidden_sizes add up to %lld",
                     (long long)width, (long long)(hq + hk + hv));
            return false;
        }
        width = hq + hk + hv;
    } else if (width >= 0) {
        if (width % 3 != 0) {
            snprintf(err, en, "weights have %lld columns, not 3 equal parts", (long long)width);
            return false;
        }
        hq = hk = hv = width / 3;
    } else {
        hq = hk = hv = MP_DIM_ANON;
    }
    if (hq >= 0 && hk >= 0 && hq != hk) {
        snprintf(err, en, "Q and K hidden sizes differ (%lld, %lld)", (long long)hq, (long long)hk);
        return false;
    }
    bool ok1, ok2;
    a->dk = mp_dim_div(hq, n, &ok1);
    a->dv = mp_dim_div(hv, n, &ok2);
    if (!ok1 || !ok2) {
        snprintf(err, en, "num_heads %lld does not divide the hidden sizes (%lld, %lld)",
                 (long long)n, (long long)hq, (long long)hv);
        return false;
    }
    if (!mp_dim_merge(mp_value_dim(x, 2), mp_value_dim(w, 0), &a->hin)) {
        snprintf(err, en, "input '%s' has hidden size %lld but weights '%s' have %lld rows", x->name,
                 (long long)mp_value_dim(x, 2), w->name, (long long)mp_value_dim(w, 0));
        return false;
    }
    a->width = width;
    a->b = mp_value_dim(x, 0);
    a->s = a->l = mp_value_dim(x, 1);
    a->t = a->present = a->s;
    a->dt = quant ? (mp_in(c, 3) && mp_in(c, 3)->dtype ? mp_in(c, 3)->dtype : MP_DT_FLOAT)
                  : x->dtype;
    a->present_dt = a->dt;
    if (past) {
        int64_t p0 = mp_value_dim(past, 0), pn = mp_value_dim(past, 2), ph = mp_value_dim(past, 4);
        if ((p0 >= 0 && p0 != 2) || (pn >= 0 && pn != n) || (ph >= 0 && a->dk >= 0 && ph != a->dk)) {
            snprintf(err, en, "past '%s' must be [2, B, %lld, P, %lld]", past->name, (long long)n,
                     (long long)a->dk);
            return false;
        }
        a->past = mp_value_dim(past, 3);
        if (mp_attr_i(c->n, "past_present_share_buffer", 0)) {
            int64_t ps = quant ? -1 : ct_scalar(c, 6);
            a->present = a->past;
            a->t = ps >= 0 ? mp_dim_add(ps, a->s) : a->past;
            a->bound = ps < 0;
        } else {
            a->t = a->present = mp_dim_add(a->past, a->s);
        }
    }
    return true;
}

/* MultiHeadAttention: query [B, S, Hq] or packed QKV [B, S, N, 3, h]; key
 * [B, L, Hq], packed KV [B, L, N, 2, h] or a cached key [B, N, L, dk];
 * value [B, L, Hv] or [B, N, L, dv]; bias [Hq + Hq + Hv], key_padding_mask,
 * attention_bias, past_key / past_value [B, N, P, h], past_sequence_length.
 * t = P + L (with past_sequence_length: the shared buffer's length, an
 * upper bound). */
static bool ct_att_mha(mp_ctx *c, ct_att *a, char *err, size_t en) {
    mp_value *q = mp_in(c, 0), *kx = mp_in(c, 1), *v = mp_in(c, 2), *pk = mp_in(c, 6);
    memset(a, 0, sizeof *a);
    if (!q) {
        snprintf(err, en, "input 0 (query) is missing");
        return false;
    }
    int64_t n = mp_attr_i(c->n, "num_heads", 0);
    if (n <= 0 || n > CT_HEADS_MAX) {
        snprintf(err, en, "num_heads = %lld is missing or out of range", (long long)n);
        return false;
    }
    a->n = a->nkv = n;
    a->dt = a->present_dt = q->dtype;
    a->b = mp_value_dim(q, 0);
    a->s = mp_value_dim(q, 1);
    a->dk = a->dv = a->l = MP_DIM_ANON;
    bool ok = true, cached = false;
    if (q->rank == 5) {
        if (mp_value_dim(q, 3) >= 0 && mp_value_dim(q, 3) != 3) {
            snprintf(err, en, "packed QKV '%s' must be [B, S, N, 3, h]", q->name);
            return false;
        }
        if (!mp_dim_merge(mp_value_dim(q, 2), n, &a->n)) {
            snprintf(err, en, "packed QKV '%s' has %lld heads, num_heads is %lld", q->name,
                     (long long)mp_value_dim(q, 2), (long long)n);
            return false;
        }
        a->dk = a->dv = mp_value_dim(q, 4);
        a->l = a->s;
    } else if (q->rank == 3 || q->rank < 0) {
        a->dk = mp_dim_div(mp_value_dim(q, 2), n, &ok);
        if (!ok) {
            snprintf(err, en, "num_heads %lld does not divide the query hidden size %lld",
                     (long long)n, (long long)mp_value_dim(q, 2));
            return false;
        }
        if (!kx) {
            snprintf(err, en, "key is required unless the query is packed QKV");
            return false;
        }
        int64_t d;
        if (kx->rank == 5) { /* packed KV [B, L, N, 2, h] */
            a->l = mp_value_dim(kx, 1);
            ok = mp_dim_merge(mp_value_dim(kx, 2), n, &d) && mp_dim_merge(a->dk, mp_value_dim(kx, 4), &a->dk) &&
                 (mp_value_dim(kx, 3) < 0 || mp_value_dim(kx, 3) == 2);
            a->dv = a->dk;
        } else if (kx->rank == 4) { /* cached key [B, N, L, dk] */
            cached = true;
            a->l = mp_value_dim(kx, 2);
            ok = mp_dim_merge(mp_value_dim(kx, 1), n, &d) && mp_dim_merge(a->dk, mp_value_dim(kx, 3), &a->dk);
            if (ok && v && v->rank >= 0) {
                ok = v->rank == 4 && mp_dim_merge(mp_value_dim(v, 1), n, &d) &&
                     mp_dim_merge(a->l, mp_value_dim(v, 2), &a->l);
                a->dv = mp_value_dim(v, 3);
            }
        } else if (kx->rank == 3 || kx->rank < 0) {
            bool okk;
            int64_t dkk = mp_dim_div(mp_value_dim(kx, 2), n, &okk);
            a->l = mp_value_dim(kx, 1);
            ok = okk && mp_dim_merge(a->dk, dkk, &a->dk);
            if (ok && !v) {
                snprintf(err, en, "value is required with a 3-D key");
                return false;
            }
            if (ok && v->rank >= 0) {
                ok = v->rank == 3 && mp_dim_merge(a->l, mp_value_dim(v, 1), &a->l);
                bool okv;
                a->dv = mp_dim_div(mp_value_dim(v, 2), n, &okv);
                ok = ok && okv;
            }
        } else {
            ok = false;
        }
        if (!ok) {
            snprintf(err, en, "key '%s' and value do not match the query (key rank %d; expected [B, "
                     "L, %lld], [B, L, N, 2, h] or [B, N, L, h])", kx->name, kx->rank,
                     (long long)mp_value_dim(q, 2));
            return false;
        }
    } else {
        snprintf(err, en, "query '%s' must be [B, S, H] or packed [B, S, N, 3, h], got rank %d",
                 q->name, q->rank);
        return false;
    }
    a->t = a->present = a->l;
    if (pk && !cached) {
        if (pk->rank >= 0 && pk->rank != 4) {
            snprintf(err, en, "past_key '%s' must be [B, N, P, h], got rank %d", pk->name, pk->rank);
            return false;
        }
        a->past = mp_value_dim(pk, 2);
        if (mp_in(c, 8)) { /* shared buffer: present is the buffer */
            a->t = a->present = a->past;
            a->bound = true;
        } else {
            a->t = a->present = mp_dim_add(a->past, a->l);
        }
    }
    return true;
}

/* GroupQueryAttention: query [B, S, N * h] or packed QKV [B, S, (N + 2 Nkv)
 * * h] (packed when value is absent); key, value [B, L, Nkv * h];
 * past_key, past_value [B, Nkv, P, h]; seqlens_k; total_sequence_length
 * (scalar); cos_cache, sin_cache, position_ids, attention_bias, ...
 * Attributes num_heads and kv_num_heads (which must divide it) are
 * required. t = total_sequence_length when known, else P + L; present's
 * length is max(P, t) when total_sequence_length is known, else P + L
 * (with a shared buffer P is the buffer: then P + L overstates t). */
static bool ct_att_gqa(mp_ctx *c, ct_att *a, char *err, size_t en) {
    mp_value *q = mp_in(c, 0), *kx = mp_in(c, 1), *v = mp_in(c, 2), *pk = mp_in(c, 3);
    memset(a, 0, sizeof *a);
    if (!q) {
        snprintf(err, en, "input 0 (query) is missing");
        return false;
    }
    int64_t n = mp_attr_i(c->n, "num_heads", 0), nkv = mp_attr_i(c->n, "kv_num_heads", 0);
    if (n <= 0 || n > CT_HEADS_MAX || nkv <= 0 || nkv > CT_HEADS_MAX || n % nkv != 0) {
        snprintf(err, en, "num_heads = %lld and kv_num_heads = %lld must be positive, the second "
                 "dividing the first", (long long)n, (long long)nkv);
        return false;
    }
    a->n = n;
    a->nkv = nkv;
    a->dt = q->dtype;
    a->present_dt = pk && pk->dtype ? pk->dtype : q->dtype;
    if (q->rank >= 0 && q->rank != 3) {
        snprintf(err, en, "query '%s' must be [B, S, H], got rank %d", q->name, q->rank);
        return false;
    }
    a->b = mp_value_dim(q, 0);
    a->s = mp_value_dim(q, 1);
    bool ok;
    if (!v) { /* packed QKV */
        a->dk = mp_dim_div(mp_value_dim(q, 2), n + 2 * nkv, &ok);
        a->l = a->s;
    } else {
        a->dk = mp_dim_div(mp_value_dim(q, 2), n, &ok);
        if (ok && (!kx || (kx->rank >= 0 && kx->rank != 3) || (v->rank >= 0 && v->rank != 3))) {
            snprintf(err, en, "key and value must both be [B, L, Nkv * h]");
            return false;
        }
        int64_t hk = mp_dim_mul(nkv, a->dk);
        a->l = mp_value_dim(kx, 1);
        ok = ok && mp_dim_merge(mp_value_dim(kx, 2), hk, &hk) && mp_dim_merge(mp_value_dim(v, 2), hk, &hk) &&
             mp_dim_merge(a->l, mp_value_dim(v, 1), &a->l);
        if (ok && a->dk < 0 && hk >= 0) a->dk = mp_dim_div(hk, nkv, &ok);
    }
    if (!ok) {
        snprintf(err, en, "hidden sizes do not split into %lld query and %lld key/value heads "
                 "(query %lld, key %lld)", (long long)n, (long long)nkv, (long long)mp_value_dim(q, 2),
                 (long long)mp_value_dim(kx, 2));
        return false;
    }
    a->dv = a->dk;
    int64_t total = ct_scalar(c, 6);
    if (pk) {
        int64_t h;
        if ((pk->rank >= 0 && pk->rank != 4) || !mp_dim_merge(mp_value_dim(pk, 1), nkv, &h) ||
            !mp_dim_merge(mp_value_dim(pk, 3), a->dk, &h)) {
            snprintf(err, en, "past_key '%s' must be [B, %lld, P, %lld]", pk->name, (long long)nkv,
                     (long long)a->dk);
            return false;
        }
        a->past = mp_value_dim(pk, 2);
        a->present = mp_dim_add(a->past, a->l);
        if (total >= 0 && a->past >= 0) a->present = MP_MAX(total, a->past);
    } else {
        a->present = a->l;
    }
    a->t = total >= 0 ? total : pk ? mp_dim_add(a->past, a->l) : a->l;
    return true;
}

bool mp_contrib_attention_dims(mp_ctx *c, mp_attn_dims *d) {
    const mp_node *n = c->n;
    ct_att a;
    char err[320];
    bool ok;
    memset(d, 0, sizeof *d);
    if (!mp_streq(n->domain, CT_MS)) return false;
    if (mp_streq(n->op, "Attention")) ok = ct_att_proj(c, false, &a, err, sizeof err);
    else if (mp_streq(n->op, "MultiHeadAttention")) ok = ct_att_mha(c, &a, err, sizeof err);
    else if (mp_streq(n->op, "GroupQueryAttention")) ok = ct_att_gqa(c, &a, err, sizeof err);
    else return false;
    if (!ok) return false;
    d->b = a.b, d->sq = a.s, d->skv = a.l, d->past = a.past, d->t = a.t;
    d->hq = a.n, d->hkv = a.nkv, d->dk = a.dk, d->dv = a.dv;
    d->causal = mp_streq(n->op, "GroupQueryAttention") || mp_attr_i(n, "unidirectional", 0) != 0;
    const mp_value *q = mp_in(c, 0);
    d->packed = q && q->rank != 4;
    double s = mp_attr_f(n, "scale", 0.0);
    d->scale = s != 0 ? s : a.dk > 0 ? 1.0 / sqrt((double)a.dk) : 0;
    return true;
}

/* Training (mp_bwd_sdpa: autograd's SDPA keeps q, k, v, the output and
 * the log-sum-exp, never the scores). Attention projects Q, K and V
 * inside: it keeps its input for the weights' gradient and Q, K, V (its
 * own, B x S x (Hq + Hk + Hv) elements of the output's type) for the
 * attention's; its backward adds the projection's two products (dX, dW)
 * and the bias's sum. MultiHeadAttention and GroupQueryAttention keep
 * their query, key and value (the present key and value when a past is
 * prepended; one packed input when packed), the masks and biases of the
 * scores. */
static void ct_train_attention(mp_ctx *c, mp_bwd *t) {
    mp_attn_dims d;
    bool ok = mp_contrib_attention_dims(c, &d);
    if (ok) mp_bwd_sdpa(&d, t);
    t->amp = MP_AMP_LOWER;
    if (!t->rg) return;
    const mp_node *n = c->n;
    if (!ok) {
        t->save_in = n->n_in >= 32 ? 0xffffffffu : (1u << n->n_in) - 1u; /* dims unknown: every input */
        return;
    }
    if (mp_streq(n->op, "Attention")) {
        ct_att a;
        char err[320];
        if (!ct_att_proj(c, false, &a, err, sizeof err)) return;
        const mp_value *y = mp_out(c, 0);
        int64_t fq[3] = {a.b, a.s, a.width}, fp[4] = {a.b, a.s, a.hin, a.width};
        mp_cost k = {0};
        uint64_t qkv = mp_cost_prod(&k, fq, 3), proj = mp_cost_prod(&k, fp, 4);
        bool ovf = false;
        t->save_in |= 1u | 2u;
        t->extra_bytes = mp_uadd(t->extra_bytes, mp_dtype_bytes(y ? y->dtype : MP_DT_FLOAT, (int64_t)qkv), &ovf);
        uint64_t pb = 0;
        if (t->rg & 1u) pb = mp_uadd(pb, mp_umul(2, proj, &ovf), &ovf); /* dX = dQKV . W^T */
        if (t->rg & 2u) pb = mp_uadd(pb, mp_umul(2, proj, &ovf), &ovf); /* dW = X^T . dQKV */
        if ((t->rg & 4u) && mp_in(c, 2)) pb = mp_uadd(pb, qkv, &ovf);   /* the bias: a sum over rows */
        t->bwd_flops = mp_uadd(t->bwd_flops, pb, &ovf);
        if (mp_in(c, 3)) t->save_in |= 8u;
        if (mp_in(c, 5)) t->save_in |= 32u;
        return;
    }
    bool gqa = mp_streq(n->op, "GroupQueryAttention");
    int pk = gqa ? 3 : 6;
    bool past = mp_in(c, pk) && mp_out(c, 1) && mp_out(c, 2);
    t->save_in |= 1u;
    if (!past) t->save_in |= (mp_in(c, 1) ? 2u : 0) | (mp_in(c, 2) ? 4u : 0);
    else t->save_out |= 6u;
    if (gqa) {
        if (mp_in(c, 10)) t->save_in |= 1u << 10;
    } else {
        if (mp_in(c, 4)) t->save_in |= 16u;
        if (mp_in(c, 5)) t->save_in |= 32u;
    }
}

/* Core cost of an attention op: the score and context products, scaling
 * and softmax (and `bias_e` more per score element); extra_macs and
 * extra_flops carry the op's own terms. */
static void ct_att_cost(mp_cost *k, const ct_att *a, uint64_t extra_macs, uint64_t extra_flops,
                        uint64_t bias_e) {
    int64_t fe[4] = {a->b, a->n, a->s, a->t};
    uint64_t e = mp_cost_prod(k, fe, 4);
    int64_t fd[2] = {a->dk, a->dv};
    uint64_t dsum = ct_madd(k, 1, mp_cost_prod(k, fd, 1), mp_cost_prod(k, fd + 1, 1));
    uint64_t macs = ct_madd(k, e, dsum, extra_macs);
    ct_set(k, macs, ct_madd(k, 2 + bias_e, e, extra_flops));
    if (a->bound) k->flags |= MP_COST_BOUND;
}

/* Outputs of Attention / QAttention: output [B, S, Hv], present [2, B, N,
 * present, dk]. */
static mp_status ct_att_proj_infer(mp_ctx *c, bool quant) {
    ct_att a;
    char err[320];
    if (!ct_att_proj(c, quant, &a, err, sizeof err)) return mp_fail(c, "%s", err);
    int64_t od[3] = {a.b, a.s, mp_dim_mul(a.n, a.dv)};
    int64_t pd[5] = {2, a.b, a.n, a.present, a.dk};
    mp_status st = mp_set_out(c, 0, a.dt, 3, od);
    return st ? st : mp_set_out(c, 1, a.present_dt, 5, pd);
}

/* Attention cost: projection MACs = B * S * Hin * (Hq + Hk + Hv); bias add
 * B * S * (Hq + Hk + Hv) FLOPs when bias is present; then the core rule
 * (attention_bias: E more). No output projection in this op. */
static void ct_att_proj_cost(mp_ctx *c, mp_cost *k, bool quant) {
    ct_att a;
    char err[320];
    if (!ct_att_proj(c, quant, &a, err, sizeof err)) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    int64_t fp[4] = {a.b, a.s, a.hin, a.width}, fb[3] = {a.b, a.s, a.width};
    uint64_t proj = mp_cost_prod(k, fp, 4);
    uint64_t bias = mp_in(c, 2) ? mp_cost_prod(k, fb, 3) : 0;
    ct_att_cost(k, &a, proj, bias, (!quant && mp_in(c, 5)) ? 1 : 0);
}

static mp_status attention_infer(mp_ctx *c) { return ct_att_proj_infer(c, false); }
static mp_status qattention_infer(mp_ctx *c) { return ct_att_proj_infer(c, true); }
static void attention_cost(mp_ctx *c, mp_cost *k) { ct_att_proj_cost(c, k, false); }
static void qattention_cost(mp_ctx *c, mp_cost *k) { ct_att_proj_cost(c, k, true); }

/* MultiHeadAttention outputs: output [B, S, N * dv], present_key [B, N,
 * present, dk], present_value [B, N, present, dv], qk [B, N, S, t].
 * Cost: the core rule; bias (input 3) adds B * S * N * dk + B * L * N * (dk
 * + dv) FLOPs; attention_bias E more. */
static mp_status mha_infer(mp_ctx *c) {
    ct_att a;
    char err[320];
    if (!ct_att_mha(c, &a, err, sizeof err)) return mp_fail(c, "%s", err);
    mp_status st;
    if ((st = ct_vec(c, 3, "bias", mp_dim_add(mp_dim_mul(2 * a.n, a.dk), mp_dim_mul(a.n, a.dv))))) return st;
    int64_t od[3] = {a.b, a.s, mp_dim_mul(a.n, a.dv)};
    int64_t kd[4] = {a.b, a.n, a.present, a.dk}, vd[4] = {a.b, a.n, a.present, a.dv};
    int64_t qk[4] = {a.b, a.n, a.s, a.t};
    if ((st = mp_set_out(c, 0, a.dt, 3, od)) || (st = mp_set_out(c, 1, a.present_dt, 4, kd)) ||
        (st = mp_set_out(c, 2, a.present_dt, 4, vd)))
        return st;
    return mp_set_out(c, 3, a.dt, 4, qk);
}

static void mha_cost(mp_ctx *c, mp_cost *k) {
    ct_att a;
    char err[320];
    if (!ct_att_mha(c, &a, err, sizeof err)) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    uint64_t bias = 0;
    if (mp_in(c, 3)) {
        int64_t fq[4] = {a.b, a.s, a.n, a.dk}, fk[3] = {a.b, a.l, a.n};
        int64_t d2[1] = {mp_dim_add(a.dk, a.dv)};
        bias = ct_madd(k, mp_cost_prod(k, fk, 3), mp_cost_prod(k, d2, 1), mp_cost_prod(k, fq, 4));
    }
    ct_att_cost(k, &a, 0, bias, mp_in(c, 5) ? 1 : 0);
}

/* GroupQueryAttention outputs: output [B, S, N * h], present_key and
 * present_value [B, Nkv, present, h] (the past's dtype), output_qk [B, N,
 * S, t]. Cost: the core rule with N query heads; attention_bias (input 10)
 * E more; do_rotary adds 3 FLOPs per rotated element of Q and K: 3 * B * S
 * * (N + Nkv) * h. */
static mp_status gqa_infer(mp_ctx *c) {
    ct_att a;
    char err[320];
    if (!ct_att_gqa(c, &a, err, sizeof err)) return mp_fail(c, "%s", err);
    mp_value *q = mp_in(c, 0);
    int64_t od[3] = {a.b, a.s, mp_in(c, 2) ? mp_value_dim(q, 2) : mp_dim_mul(a.n, a.dk)};
    int64_t pd[4] = {a.b, a.nkv, a.present, a.dk};
    int64_t qk[4] = {a.b, a.n, a.s, a.t};
    mp_status st;
    if ((st = mp_set_out(c, 0, a.dt, 3, od)) || (st = mp_set_out(c, 1, a.present_dt, 4, pd)) ||
        (st = mp_set_out(c, 2, a.present_dt, 4, pd)))
        return st;
    return mp_set_out(c, 3, a.dt, 4, qk);
}

static void gqa_cost(mp_ctx *c, mp_cost *k) {
    ct_att a;
    char err[320];
    if (!ct_att_gqa(c, &a, err, sizeof err)) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    uint64_t rot = 0;
    if (mp_attr_i(c->n, "do_rotary", 0)) {
        int64_t f[4] = {a.b, a.s, a.n + a.nkv, a.dk};
        rot = ct_madd(k, 3, mp_cost_prod(k, f, 4), 0);
    }
    ct_att_cost(k, &a, 0, rot, mp_in(c, 10) ? 1 : 0);
}

/* ------------------------------------------------------------------ */
/* normalizations                                                      */
/* ------------------------------------------------------------------ */

/* Statistics shape: X.shape[:axis] + [1] * (rank - axis). */
static mp_status ct_stats_out(mp_ctx *c, int o, int dt, const mp_value *x, int axis) {
    if (x->rank < 0) return mp_set_out(c, o, dt, -1, NULL);
    int64_t d[MP_MAX_RANK];
    for (int i = 0; i < x->rank; i++) d[i] = i < axis ? x->dims[i] : 1;
    return mp_set_out(c, o, dt, x->rank, d);
}

/* Input i, when present, broadcasts to X[axis:] (it has at most rank -
 * axis dims; each is 1 or X's). */
static mp_status ct_norm_param(mp_ctx *c, int i, const char *what, const mp_value *x, int axis) {
    mp_value *p = mp_in(c, i);
    if (!p || p->rank < 0 || x->rank < 0) return MP_OK;
    if (p->rank > x->rank - axis)
        return mp_fail(c, "%s '%s' has rank %d, above the %d normalized dims", what, p->name,
                       p->rank, x->rank - axis);
    for (int d = 0; d < p->rank; d++) {
        int64_t pd = p->dims[d], xd = x->dims[x->rank - p->rank + d];
        if (pd >= 0 && xd >= 0 && pd != 1 && pd != xd)
            return mp_fail(c, "%s '%s' dim %d is %lld, X's is %lld", what, p->name, d,
                           (long long)pd, (long long)xd);
    }
    return MP_OK;
}

/* LayerNormalization (default domain before opset 17, where onnxruntime
 * registers it, and com.microsoft): X, Scale, B optional -> Y like X;
 * Mean and InvStdDev X.shape[:axis] + [1, ...] of stash_type (fp32).
 * FLOPs = 5 * numel(X) with Scale, 4 without (GUIDE, as LayerNormalization-17).
 * SimplifiedLayerNormalization (RMSNorm): X, scale -> Y like X, inv_std_var
 * as InvStdDev. FLOPs = 4 * numel(X): square, accumulate, multiply by the
 * inverse RMS, scale (LayerNorm without the mean subtraction). */
static mp_status ct_layernorm(mp_ctx *c, bool simplified) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "X", &st);
    if (!x || !ct_need(c, 1, "scale", &st)) return st;
    int64_t stash = mp_attr_i(c->n, "stash_type", MP_DT_FLOAT);
    int sdt = (stash > 0 && stash < MP_DT_COUNT) ? (int)stash : MP_DT_FLOAT;
    int axis = 0;
    if (x->rank >= 0) {
        axis = mp_axis(mp_attr_i(c->n, "axis", -1), x->rank);
        if (axis < 0) return mp_fail(c, "axis out of range for rank %d", x->rank);
    }
    if ((st = ct_norm_param(c, 1, "scale", x, axis)) ||
        (!simplified && (st = ct_norm_param(c, 2, "B", x, axis))))
        return st;
    if ((st = mp_set_out_like(c, 0, x))) return st;
    for (int o = 1; o < (simplified ? 2 : 3); o++)
        if ((st = ct_stats_out(c, o, sdt, x, axis))) return st;
    return MP_OK;
}

static mp_status layernorm_infer(mp_ctx *c) { return ct_layernorm(c, false); }
static mp_status simplified_ln_infer(mp_ctx *c) { return ct_layernorm(c, true); }

static void layernorm_cost(mp_ctx *c, mp_cost *k) {
    ct_per_elem(k, mp_in(c, 1) ? 5 : 4, mp_in(c, 0));
}

static void cost4(mp_ctx *c, mp_cost *k) { ct_per_elem(k, 4, mp_in(c, 0)); }

/* SkipLayerNormalization: input [B, S, H] (or [T, H]), skip (input's
 * shape, [1, S, H] or [S, H]), gamma [H], beta [H] optional, bias [H]
 * optional -> output like input; mean and inv_std_var input.shape[:-1] +
 * [1] (fp32); input_skip_bias_sum like input.
 * FLOPs = (1 skip add + 1 bias add when bias is present + 5 LayerNorm) *
 * numel(input).
 * SkipSimplifiedLayerNormalization: input, skip, gamma, bias optional;
 * FLOPs = (1 + bias + 4 RMSNorm) * numel(input). */
static mp_status ct_skipln(mp_ctx *c, bool simplified) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "input", &st), *skip;
    if (!x || !(skip = ct_need(c, 1, "skip", &st)) || !ct_need(c, 2, "gamma", &st)) return st;
    if (x->rank >= 0 && x->rank != 2 && x->rank != 3)
        return mp_fail(c, "input '%s' must be [B, S, H] or [T, H], got rank %d", x->name, x->rank);
    int64_t h = mp_value_dim(x, -1);
    if (skip->rank >= 0 && x->rank >= 0) {
        if (skip->rank > x->rank)
            return mp_fail(c, "skip '%s' has rank %d, above the input's %d", skip->name, skip->rank,
                           x->rank);
        for (int d = 0; d < skip->rank; d++) {
            int64_t sd = skip->dims[skip->rank - 1 - d], xd = x->dims[x->rank - 1 - d];
            if (sd >= 0 && xd >= 0 && sd != xd && !(sd == 1 && d > 0))
                return mp_fail(c, "skip '%s' dim %d is %lld, the input's is %lld", skip->name,
                               skip->rank - 1 - d, (long long)sd, (long long)xd);
        }
    }
    int bias_i = simplified ? 3 : 4;
    if ((st = ct_vec(c, 2, "gamma", h)) || (!simplified && (st = ct_vec(c, 3, "beta", h))) ||
        (st = ct_vec(c, bias_i, "bias", h)))
        return st;
    if ((st = mp_set_out_like(c, 0, x))) return st;
    int axis = x->rank > 0 ? x->rank - 1 : 0;
    if ((st = ct_stats_out(c, 1, MP_DT_FLOAT, x, axis)) ||
        (st = ct_stats_out(c, 2, MP_DT_FLOAT, x, axis)))
        return st;
    return mp_set_out_like(c, 3, x);
}

static mp_status skipln_infer(mp_ctx *c) { return ct_skipln(c, false); }
static mp_status skip_simplified_ln_infer(mp_ctx *c) { return ct_skipln(c, true); }

static void skipln_cost(mp_ctx *c, mp_cost *k) {
    ct_per_elem(k, 6u + (mp_in(c, 4) ? 1u : 0u), mp_in(c, 0));
}

static void skip_simplified_ln_cost(mp_ctx *c, mp_cost *k) {
    ct_per_elem(k, 5u + (mp_in(c, 3) ? 1u : 0u), mp_in(c, 0));
}

/* EmbedLayerNormalization: input_ids [B, S] (int32), segment_ids [B, S],
 * word_embedding [V, H], position_embedding [P, H], segment_embedding [G,
 * H], gamma [H], beta [H], mask [B, S], position_ids -> output [B, S, H]
 * (the embeddings' dtype), mask_index [B] (int32), embedding_sum [B, S, H].
 * FLOPs = (adds + 5) * numel(output), adds = 1 (word + position) + 1 when
 * segment_embedding is present; the lookups are data movement. The
 * embedding tables, gamma and beta are parameters (float). */
static mp_status embed_ln_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *ids = ct_need(c, 0, "input_ids", &st), *we, *pe;
    if (!ids || !(we = ct_need(c, 2, "word_embedding", &st)) ||
        !(pe = ct_need(c, 3, "position_embedding", &st)) || !ct_need(c, 5, "gamma", &st) ||
        !ct_need(c, 6, "beta", &st))
        return st;
    if ((st = ct_rank(c, 0, "input_ids", 2)) || (st = ct_rank(c, 1, "segment_ids", 2)) ||
        (st = ct_rank(c, 2, "word_embedding", 2)) || (st = ct_rank(c, 3, "position_embedding", 2)) ||
        (st = ct_rank(c, 4, "segment_embedding", 2)))
        return st;
    int64_t h = mp_value_dim(we, 1);
    for (int i = 3; i <= 4; i++) {
        mp_value *e = mp_in(c, i);
        if (e && !mp_dim_merge(h, mp_value_dim(e, 1), &h))
            return mp_fail(c, "embedding '%s' has width %lld, word_embedding has %lld", e->name,
                           (long long)mp_value_dim(e, 1), (long long)mp_value_dim(we, 1));
    }
    if ((st = ct_vec(c, 5, "gamma", h)) || (st = ct_vec(c, 6, "beta", h))) return st;
    int64_t od[3] = {mp_value_dim(ids, 0), mp_value_dim(ids, 1), h >= 0 ? h : mp_value_dim(mp_in(c, 5), 0)};
    int64_t md[1] = {mp_value_dim(ids, 0)};
    if ((st = mp_set_out(c, 0, we->dtype, 3, od)) || (st = mp_set_out(c, 1, MP_DT_INT32, 1, md)))
        return st;
    return mp_set_out(c, 2, we->dtype, 3, od);
}

static void embed_ln_cost(mp_ctx *c, mp_cost *k) {
    ct_per_elem(k, 6u + (mp_in(c, 4) ? 1u : 0u), mp_out(c, 0));
}

/* GroupNorm (channels_last default 1: X [N, H, W, C]; else [N, C, H, W]),
 * gamma [C], beta [C]; groups must divide C; Y like X. FLOPs = 5 *
 * numel(X) + numel(X) for the SiLU when activation = 1.
 * SkipGroupNorm: X, gamma, beta, skip, bias -> Y and S (x + skip + bias)
 * like X. FLOPs = (1 skip add + 1 when bias + 5 + activation) * numel(X). */
static mp_status ct_groupnorm(mp_ctx *c, bool skip) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "X", &st);
    if (!x || !ct_need(c, 1, "gamma", &st) || !ct_need(c, 2, "beta", &st) ||
        (skip && !ct_need(c, 3, "skip", &st)))
        return st;
    int64_t g;
    if ((st = ct_attr_pos(c, "groups", 0, MP_DIM_MAX, true, &g))) return st;
    if (x->rank >= 0 && x->rank < 2)
        return mp_fail(c, "X '%s' must have rank >= 2, got %d", x->name, x->rank);
    int64_t ch = mp_attr_i(c->n, "channels_last", 1) ? mp_value_dim(x, -1) : mp_value_dim(x, 1);
    if (ch >= 0 && ch % g != 0)
        return mp_fail(c, "%lld channels are not divisible by groups %lld", (long long)ch,
                       (long long)g);
    if ((st = ct_vec(c, 1, "gamma", ch)) || (st = ct_vec(c, 2, "beta", ch)) ||
        (skip && (st = ct_vec(c, 4, "bias", ch))))
        return st;
    if ((st = mp_set_out_like(c, 0, x))) return st;
    return skip ? mp_set_out_like(c, 1, x) : MP_OK;
}

static mp_status groupnorm_infer(mp_ctx *c) { return ct_groupnorm(c, false); }
static mp_status skip_groupnorm_infer(mp_ctx *c) { return ct_groupnorm(c, true); }

static void groupnorm_cost(mp_ctx *c, mp_cost *k) {
    uint64_t per = 5u + (mp_attr_i(c->n, "activation", 0) ? 1u : 0u);
    if (strcmp(c->n->op, "SkipGroupNorm") == 0) per += 1u + (mp_in(c, 4) ? 1u : 0u);
    ct_per_elem(k, per, mp_in(c, 0));
}

/* ------------------------------------------------------------------ */
/* activations and bias fusions                                        */
/* ------------------------------------------------------------------ */

/* Input i (a bias) must be 1-D of X's last dim. */
static mp_status ct_bias_last(mp_ctx *c, int i, const mp_value *x) {
    return ct_vec(c, i, "bias", mp_value_dim(x, -1));
}

/* Gelu, QuickGelu (x * sigmoid(alpha * x)), com.microsoft: Y like X,
 * FLOPs = numel(X) (an activation is 1 FLOP per element, GUIDE). */
static mp_status same_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "X", &st);
    return x ? mp_set_out_like(c, 0, x) : st;
}

static void cost1(mp_ctx *c, mp_cost *k) { ct_per_elem(k, 1, mp_in(c, 0)); }
static void cost2(mp_ctx *c, mp_cost *k) { ct_per_elem(k, 2, mp_in(c, 0)); }

/* BiasGelu: A, B (bias, 1-D of A's last dim) -> Y like A; FLOPs = 2 *
 * numel(A) (bias add + Gelu). FastGelu: X, bias optional: FLOPs = (bias ?
 * 2 : 1) * numel(X). */
static mp_status bias_act_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "X", &st);
    if (!x) return st;
    if (strcmp(c->n->op, "BiasGelu") == 0 && !ct_need(c, 1, "bias", &st)) return st;
    return (st = ct_bias_last(c, 1, x)) ? st : mp_set_out_like(c, 0, x);
}

static void fast_gelu_cost(mp_ctx *c, mp_cost *k) {
    ct_per_elem(k, mp_in(c, 1) ? 2 : 1, mp_in(c, 0));
}

/* BiasAdd: X [N, S, C], bias [C], skip [N, S, C] -> Y like X; FLOPs = 2 *
 * numel(X). */
static mp_status bias_add_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "X", &st), *s;
    if (!x || !ct_need(c, 1, "bias", &st) || !(s = ct_need(c, 2, "skip", &st))) return st;
    if ((st = ct_rank(c, 0, "X", 3)) || (st = ct_bias_last(c, 1, x))) return st;
    int r;
    int64_t d[MP_MAX_RANK];
    if ((st = mp_broadcast(c, x, s, &r, d))) return st;
    return mp_set_out_like(c, 0, x);
}

/* BiasSplitGelu: X [N, S, D], bias [D] -> Y [N, S, D / 2] = left half *
 * Gelu(right half) of X + bias. FLOPs = numel(X) (bias add) + 2 * numel(Y)
 * (Gelu, multiply) = 2 * numel(X). */
static mp_status bias_split_gelu_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "X", &st);
    if (!x || !ct_need(c, 1, "bias", &st)) return st;
    if ((st = ct_rank(c, 0, "X", 3)) || (st = ct_bias_last(c, 1, x))) return st;
    if (x->rank < 0) return mp_set_out(c, 0, x->dtype, -1, NULL);
    bool ok;
    int64_t d[3] = {x->dims[0], x->dims[1], mp_dim_div(x->dims[2], 2, &ok)};
    if (!ok) return mp_fail(c, "hidden size %lld is odd", (long long)x->dims[2]);
    return mp_set_out(c, 0, x->dtype, 3, d);
}

/* BiasSoftmax: softmax(data + bias), bias broadcast onto data -> Y like
 * data; FLOPs = 2 * numel(data) (add, softmax). */
static mp_status bias_softmax_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "data", &st), *b;
    if (!x || !(b = ct_need(c, 1, "bias", &st))) return st;
    int r;
    int64_t d[MP_MAX_RANK];
    if ((st = mp_broadcast(c, x, b, &r, d))) return st;
    return mp_set_out_like(c, 0, x);
}

/* RotaryEmbedding: input [B, S, H] or [B, N, S, h], position_ids, cos_cache
 * and sin_cache [max_seq, rot / 2] -> output like input. rot =
 * rotary_embedding_dim, else the head size (h: dim 3 of a 4-D input, H /
 * num_heads, or 2 * cos_cache's width). Each rotated pair (x1, x2) becomes
 * (x1 cos - x2 sin, x2 cos + x1 sin): 2 multiplies and 1 add per rotated
 * element; the other rot..h elements are copied.
 * FLOPs = 3 * (numel(input) / h) * rot. */
static bool ct_rope(mp_ctx *c, int64_t *head, int64_t *rot, char *err, size_t en) {
    mp_value *x = mp_in(c, 0), *cs = mp_in(c, 2), *sn = mp_in(c, 3);
    int64_t nh = mp_attr_i(c->n, "num_heads", 0), rd = mp_attr_i(c->n, "rotary_embedding_dim", 0);
    *head = *rot = MP_DIM_ANON;
    if (!x || !cs || !sn) {
        snprintf(err, en, "inputs input, position_ids, cos_cache and sin_cache are required");
        return false;
    }
    if (nh < 0 || nh > CT_HEADS_MAX || rd < 0 || rd > MP_DIM_MAX || rd % 2 != 0) {
        snprintf(err, en, "num_heads = %lld or rotary_embedding_dim = %lld is out of range",
                 (long long)nh, (long long)rd);
        return false;
    }
    if ((x->rank >= 0 && x->rank != 3 && x->rank != 4) || (cs->rank >= 0 && cs->rank != 2) ||
        (sn->rank >= 0 && sn->rank != 2)) {
        snprintf(err, en, "expected input [B, S, H] or [B, N, S, h] and 2-D caches (ranks %d, %d, %d)",
                 x->rank, cs->rank, sn->rank);
        return false;
    }
    int64_t half;
    if (!mp_dim_merge(mp_value_dim(cs, 1), mp_value_dim(sn, 1), &half)) {
        snprintf(err, en, "cos_cache and sin_cache widths differ (%lld, %lld)",
                 (long long)mp_value_dim(cs, 1), (long long)mp_value_dim(sn, 1));
        return false;
    }
    bool ok = true;
    if (x->rank == 4) *head = x->dims[3];
    else if (nh > 0) *head = mp_dim_div(mp_value_dim(x, 2), nh, &ok);
    else if (rd == 0 && half >= 0) *head = mp_dim_mul(2, half);
    if (!ok) {
        snprintf(err, en, "num_heads %lld does not divide the hidden size %lld", (long long)nh,
                 (long long)mp_value_dim(x, 2));
        return false;
    }
    if (rd > 0 && x->rank == 3 && nh == 0) {
        snprintf(err, en, "rotary_embedding_dim needs num_heads for a 3-D input");
        return false;
    }
    *rot = rd > 0 ? rd : *head;
    if (*rot < 0 && half >= 0) *rot = mp_dim_mul(2, half);
    if (*rot >= 0 && half >= 0 && *rot != mp_dim_mul(2, half)) {
        snprintf(err, en, "cos_cache width %lld does not match a rotary dim of %lld",
                 (long long)half, (long long)*rot);
        return false;
    }
    if (*rot >= 0 && *head >= 0 && *rot > *head) {
        snprintf(err, en, "rotary dim %lld exceeds the head size %lld", (long long)*rot,
                 (long long)*head);
        return false;
    }
    return true;
}

static mp_status rope_infer(mp_ctx *c) {
    int64_t head, rot;
    char err[256];
    if (!ct_rope(c, &head, &rot, err, sizeof err)) return mp_fail(c, "%s", err);
    return mp_set_out_like(c, 0, mp_in(c, 0));
}

static void rope_cost(mp_ctx *c, mp_cost *k) {
    int64_t head, rot;
    char err[256];
    uint64_t n = mp_cnumel(mp_in(c, 0), k);
    k->macs = 0;
    if (!ct_rope(c, &head, &rot, err, sizeof err) || head < 0 || rot < 0) {
        k->flags |= MP_COST_UNKNOWN;
        return;
    }
    bool ovf = false;
    uint64_t per_row = mp_umul(3, (uint64_t)rot, &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
    k->flops = head > 0 ? ct_madd(k, per_row, n / (uint64_t)head, 0) : 0;
}

/* Inverse: X [..., n, n] -> Y like X. FLOPs = 2 * n^3 per matrix (LU
 * factorisation 2n^3/3 and the 2 n^2-per-column triangular solves 4n^3/3)
 * = 2 * n * numel(X); no MACs. */
static mp_status inverse_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "X", &st);
    if (!x) return st;
    if (x->rank >= 0) {
        if (x->rank < 2) return mp_fail(c, "X '%s' must have rank >= 2, got %d", x->name, x->rank);
        int64_t a = x->dims[x->rank - 2], b = x->dims[x->rank - 1];
        if (a >= 0 && b >= 0 && a != b)
            return mp_fail(c, "X '%s' matrices are %lld x %lld, not square", x->name, (long long)a,
                           (long long)b);
    }
    return mp_set_out_like(c, 0, x);
}

static void inverse_cost(mp_ctx *c, mp_cost *k) {
    mp_value *x = mp_in(c, 0);
    int64_t f[1] = {mp_value_dim(x, -1)};
    ct_per_elem(k, ct_madd(k, 2, mp_cost_prod(k, f, 1), 0), x);
}

/* Trilu (com.microsoft): X [..., N, M], k -> Y like X; 0 FLOPs (a masked
 * copy). */
static mp_status trilu_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "X", &st);
    if (!x) return st;
    if (x->rank >= 0 && x->rank < 2)
        return mp_fail(c, "X '%s' must have rank >= 2, got %d", x->name, x->rank);
    return mp_set_out_like(c, 0, x);
}

/* ------------------------------------------------------------------ */
/* quantized element-wise ops                                          */
/* ------------------------------------------------------------------ */

/* QuantizeLinear (com.microsoft): x, y_scale, y_zero_point -> y like x,
 * dtype of y_zero_point (uint8 without). FLOPs = 2 * numel(x) (divide,
 * add). DequantizeLinear: x, x_scale, x_zero_point -> y like x, dtype of
 * x_scale; FLOPs = 2 * numel(x) (subtract, multiply); x is a quantized
 * weight slot. As the default-domain ops (linalg.c). */
static mp_status quantize_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "x", &st), *zp = mp_in(c, 2);
    if (!x || !ct_need(c, 1, "y_scale", &st)) return st;
    return mp_set_out(c, 0, zp && zp->dtype ? zp->dtype : MP_DT_UINT8, x->rank, x->dims);
}

static mp_status dequantize_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "x", &st), *s;
    if (!x || !(s = ct_need(c, 1, "x_scale", &st))) return st;
    return mp_set_out(c, 0, s->dtype ? s->dtype : MP_DT_FLOAT, x->rank, x->dims);
}

/* Broadcast of inputs ia, ib (and ic >= 0) into output 0 of dtype dt. */
static mp_status ct_bcast(mp_ctx *c, int ia, int ib, int ic, int dt) {
    mp_status st = MP_OK;
    mp_value *a = ct_need(c, ia, NULL, &st), *b;
    if (!a || !(b = ct_need(c, ib, NULL, &st))) return st;
    int r;
    int64_t d[MP_MAX_RANK];
    if ((st = mp_broadcast(c, a, b, &r, d))) return st;
    if (ic >= 0 && r >= 0) {
        mp_value *cc = ct_need(c, ic, NULL, &st), t = {0};
        if (!cc) return st;
        t.name = a->name;
        t.rank = r;
        t.dims = d;
        int64_t d2[MP_MAX_RANK];
        if ((st = mp_broadcast(c, &t, cc, &r, d2))) return st;
        if (r > 0) memcpy(d, d2, sizeof(int64_t) * (size_t)r);
    }
    return mp_set_out(c, 0, dt, r, d);
}

/* QLinearAdd, QLinearMul: A, A_scale, A_zero_point, B, B_scale,
 * B_zero_point, C_scale, C_zero_point -> C = broadcast(A, B), A's dtype.
 * FLOPs = numel(C) (one operation per element, as Add and Mul; the
 * requantization is not counted). MulInteger: A, A_zero_point, B,
 * B_zero_point -> int32 broadcast(A, B); FLOPs = numel(C). */
static mp_status qlinear_binary_infer(mp_ctx *c) {
    mp_value *a = mp_in(c, 0);
    return ct_bcast(c, 0, 3, -1, a ? a->dtype : MP_DT_UNDEFINED);
}

static mp_status mul_integer_infer(mp_ctx *c) { return ct_bcast(c, 0, 2, -1, MP_DT_INT32); }

static void out1_cost(mp_ctx *c, mp_cost *k) { ct_per_elem(k, 1, mp_out(c, 0)); }

/* QLinearWhere: condition, X, x_scale, x_zero_point, Y, y_scale,
 * y_zero_point, z_scale, z_zero_point -> broadcast(condition, X, Y), X's
 * dtype; FLOPs = numel(Z) (one select per element, as Where). */
static mp_status qlinear_where_infer(mp_ctx *c) {
    mp_value *x = mp_in(c, 1);
    return ct_bcast(c, 0, 1, 4, x ? x->dtype : MP_DT_UNDEFINED);
}

/* QLinearSigmoid, QLinearLeakyRelu (X, X_scale, X_zero_point, Y_scale,
 * Y_zero_point) -> Y like X; FLOPs = numel(X) (an activation).
 * QLinearSoftmax (same inputs; axis): FLOPs = numel(X) (Softmax's rule). */
static mp_status qlinear_unary_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "X", &st);
    if (!x || !ct_need(c, 1, "X_scale", &st) || !ct_need(c, 3, "Y_scale", &st)) return st;
    if (strcmp(c->n->op, "QLinearSoftmax") == 0 && x->rank > 0 &&
        mp_axis(mp_attr_i(c->n, "axis", -1), x->rank) < 0)
        return mp_fail(c, "axis %lld out of range for rank %d", (long long)mp_attr_i(c->n, "axis", -1),
                       x->rank);
    return mp_set_out_like(c, 0, x);
}

/* QLinearGlobalAveragePool: X, x_scale, x_zero_point, y_scale,
 * y_zero_point -> [N, C, 1, ...] (channels_last = 1: [N, 1, ..., C]), X's
 * dtype; FLOPs = numel(X) (pooling's rule). */
static mp_status qlinear_gap_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "X", &st);
    if (!x) return st;
    if (x->rank < 0) return mp_set_out(c, 0, x->dtype, -1, NULL);
    if (x->rank < 2) return mp_fail(c, "X '%s' must be [N, C, ...], got rank %d", x->name, x->rank);
    bool last = mp_attr_i(c->n, "channels_last", 0) != 0;
    int64_t d[MP_MAX_RANK];
    for (int i = 0; i < x->rank; i++)
        d[i] = (i == 0 || (!last && i == 1) || (last && i == x->rank - 1)) ? x->dims[i] : 1;
    return mp_set_out(c, 0, x->dtype, x->rank, d);
}

/* QLinearReduceMean: data, data_scale, data_zero_point, reduced_scale,
 * reduced_zero_point; axes (attribute; none: all), keepdims (default 1) ->
 * the reduced shape, data's dtype. FLOPs = numel(data) (reductions' rule). */
static mp_status qlinear_reduce_mean_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "data", &st);
    if (!x) return st;
    if (x->rank < 0) return mp_set_out(c, 0, x->dtype, -1, NULL);
    bool red[MP_MAX_RANK] = {false}, keep = mp_attr_i(c->n, "keepdims", 1) != 0;
    const int64_t *axes;
    int n = mp_attr_ints(c->n, "axes", &axes);
    if (n <= 0) {
        for (int i = 0; i < x->rank; i++) red[i] = true;
    } else {
        for (int i = 0; i < n; i++) {
            int a = mp_axis(axes[i], x->rank);
            if (a < 0 || red[a])
                return mp_fail(c, "axis %lld is out of range or repeated for rank %d",
                               (long long)axes[i], x->rank);
            red[a] = true;
        }
    }
    int64_t d[MP_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++)
        if (!red[i]) d[r++] = x->dims[i];
        else if (keep) d[r++] = 1;
    return mp_set_out(c, 0, x->dtype, r, d);
}

/* QLinearConcat: Y_scale, Y_zero_point, then (tensor, scale, zero_point)
 * triples; axis required -> the tensors concatenated along axis, dtype of
 * Y_zero_point. 0 FLOPs (data movement; requantization not counted). */
static mp_status qlinear_concat_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *yz = ct_need(c, 1, "Y_zero_point", &st);
    if (!yz) return st;
    int nt = c->n->n_in - 2;
    if (nt < 3 || nt % 3 != 0)
        return mp_fail(c, "expects Y_scale, Y_zero_point and (tensor, scale, zero point) triples, "
                       "got %d inputs", c->n->n_in);
    const mp_attr *ax = mp_node_attr(c->n, "axis");
    if (!ax || ax->type != MP_ATTR_INT) return mp_fail(c, "attribute 'axis' is required");
    int rank = -1, axis = -1;
    int64_t d[MP_MAX_RANK];
    for (int i = 2; i < c->n->n_in; i += 3) {
        mp_value *x = ct_need(c, i, "tensor", &st);
        if (!x) return st;
        if (x->rank < 0) return mp_set_out(c, 0, yz->dtype, -1, NULL);
        if (rank < 0) {
            rank = x->rank;
            axis = mp_axis(ax->i, rank);
            if (axis < 0) return mp_fail(c, "axis %lld out of range for rank %d", (long long)ax->i, rank);
            memcpy(d, x->dims, sizeof(int64_t) * (size_t)rank);
            continue;
        }
        if (x->rank != rank)
            return mp_fail(c, "tensor '%s' has rank %d, the first has %d", x->name, x->rank, rank);
        for (int j = 0; j < rank; j++) {
            if (j == axis) {
                d[j] = mp_dim_add(d[j], x->dims[j]);
            } else if (!mp_dim_merge(d[j], x->dims[j], &d[j])) {
                return mp_fail(c, "tensor '%s' dim %d is %lld, expected %lld", x->name, j,
                               (long long)x->dims[j], (long long)d[j]);
            }
        }
    }
    return mp_set_out(c, 0, yz->dtype, rank, d);
}

static void zero_cost(mp_ctx *c, mp_cost *k) { mp_cost_zero(c, k); }

/* GatherBlockQuantized: data (block-quantized table; uint8 packs 8 / bits
 * values per byte along the last dim), indices, scales, zero_points ->
 * data[:axis] + indices.shape + data[axis+1:] (last dim unpacked), the
 * scales' dtype; gather_axis default 0, bits default 4. FLOPs = 2 *
 * numel(output) (dequantize: subtract, multiply). data is a parameter slot
 * (see mp_contrib_param_view for its count). */
static mp_status gather_bq_infer(mp_ctx *c) {
    mp_status st = MP_OK;
    mp_value *x = ct_need(c, 0, "data", &st), *ix, *s;
    if (!x || !(ix = ct_need(c, 1, "indices", &st)) || !(s = ct_need(c, 2, "scales", &st)))
        return st;
    int64_t bits = mp_attr_i(c->n, "bits", 4);
    if (bits != 2 && bits != 4 && bits != 8) return mp_fail(c, "bits = %lld, expected 2, 4 or 8", (long long)bits);
    if (x->rank < 0 || ix->rank < 0) return mp_set_out(c, 0, s->dtype, -1, NULL);
    if (x->rank < 1) return mp_fail(c, "data '%s' is a scalar", x->name);
    int axis = mp_axis(mp_attr_i(c->n, "gather_axis", 0), x->rank);
    if (axis < 0) return mp_fail(c, "gather_axis out of range for rank %d", x->rank);
    if (x->rank - 1 + ix->rank > MP_MAX_RANK) return mp_fail(c, "output rank is above the limit");
    int64_t d[MP_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (i == axis) {
            for (int j = 0; j < ix->rank; j++) d[r++] = ix->dims[j];
            continue;
        }
        int64_t v = x->dims[i];
        if (i == x->rank - 1 && x->dtype == MP_DT_UINT8) v = mp_dim_mul(v, 8 / bits);
        d[r++] = v;
    }
    return mp_set_out(c, 0, s->dtype, r, d);
}

static void out2_cost(mp_ctx *c, mp_cost *k) { ct_per_elem(k, 2, mp_out(c, 0)); }

/* ------------------------------------------------------------------ */
/* kernels (the contrib ops real exported models use, where cheap)     */
/* ------------------------------------------------------------------ */

/* FusedMatMul / TransposeMatMul: alpha * op(A) @ op(B). */
static mp_status ctk_fused_matmul(mp_kctx *k) {
    const mp_rtensor *a = &k->in[0], *b = &k->in[1];
    mp_rtensor *y = &k->out[0];
    bool ta = mp_attr_i(k->n, "transA", 0) != 0, tb = mp_attr_i(k->n, "transB", 0) != 0;
    double alpha = mp_attr_f(k->n, "alpha", 1.0);
    if (a->rank < 2 || b->rank < 2) return mp_kfail(k, MP_ERR_UNSUPPORTED, "1-D operands");
    if (a->dtype == MP_DT_FLOAT && b->dtype == MP_DT_FLOAT && y->dtype == MP_DT_FLOAT) {
        mp_kmatmul(a, b, y, true, a->data, b->data, y->data, ta, tb);
        if (alpha != 1.0)
            for (int64_t e = 0; e < y->numel; e++) ((float *)y->data)[e] *= (float)alpha;
        return MP_OK;
    }
    double *A = malloc(sizeof(double) * (size_t)(a->numel + 1)), *B = malloc(sizeof(double) * (size_t)(b->numel + 1));
    double *Y = malloc(sizeof(double) * (size_t)(y->numel + 1));
    mp_status st = MP_OK;
    if (!A || !B || !Y) {
        st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    } else {
        mp_kconvert(A, MP_DT_DOUBLE, a->data, a->dtype, a->numel);
        mp_kconvert(B, MP_DT_DOUBLE, b->data, b->dtype, b->numel);
        mp_kmatmul(a, b, y, false, A, B, Y, ta, tb);
        for (int64_t e = 0; e < y->numel; e++) mp_kset_f(y->data, y->dtype, e, alpha * Y[e]);
    }
    free(A), free(B), free(Y);
    return st;
}

/* The layer normalizations: each row of the normalized (trailing) dims
 * gets s = x (+ skip) (+ bias), then (s - mean) * inv_std (LayerNorm) or
 * s * inv_rms (simplified), times gamma (+ beta). Optional outputs: mean,
 * inv_std (or inv_rms) per row, and the sum s. */
typedef struct ctk_norm {
    int skip, gamma, beta, bias;   /* input slots, -1: none */
    int mean_out, inv_out, sum_out; /* output slots, -1: none */
    bool simplified;
} ctk_norm;

static const mp_rtensor *ctk_opt_in(const mp_kctx *k, int i) { return i >= 0 ? mp_kin(k, i) : NULL; }

static mp_rtensor *ctk_opt_out(mp_kctx *k, int i) {
    return i >= 0 && i < k->n_out && k->n->out[i] >= 0 && k->out[i].data ? &k->out[i] : NULL;
}

static mp_status ctk_norm_run(mp_kctx *k, const ctk_norm *c) {
    const mp_rtensor *x = &k->in[0];
    mp_rtensor *y = &k->out[0];
    const mp_rtensor *skip = ctk_opt_in(k, c->skip), *g = ctk_opt_in(k, c->gamma);
    const mp_rtensor *be = ctk_opt_in(k, c->beta), *bi = ctk_opt_in(k, c->bias);
    mp_rtensor *mo = ctk_opt_out(k, c->mean_out), *io = ctk_opt_out(k, c->inv_out), *so = ctk_opt_out(k, c->sum_out);
    int axis = c->skip >= 0 ? x->rank - 1 : mp_axis(mp_attr_i(k->n, "axis", -1), x->rank);
    if (axis < 0) return mp_kfail(k, MP_ERR_SHAPE, "axis out of range");
    double eps = mp_attr_f(k->n, "epsilon", 1e-5);
    int64_t rows = 1, len = 1;
    for (int i = 0; i < axis; i++) rows *= x->dims[i];
    for (int i = axis; i < x->rank; i++) len *= x->dims[i];
    double *s = malloc(sizeof(double) * (size_t)(len + 1));
    if (!s) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < len; j++) {
            int64_t e = r * len + j;
            double v = mp_kget_f(x->data, x->dtype, e);
            if (skip) v += mp_kget_f(skip->data, skip->dtype, e % skip->numel);
            if (bi) v += mp_kget_f(bi->data, bi->dtype, j % bi->numel);
            s[j] = v;
            sum += v;
            if (so) mp_kset_f(so->data, so->dtype, e, v);
        }
        double mean = c->simplified ? 0 : sum / (double)len;
        for (int64_t j = 0; j < len; j++) sq += (s[j] - mean) * (s[j] - mean);
        double inv = 1.0 / sqrt(sq / (double)len + eps);
        if (mo) mp_kset_f(mo->data, mo->dtype, r, mean);
        if (io) mp_kset_f(io->data, io->dtype, r, inv);
        for (int64_t j = 0; j < len; j++) {
            double v = (s[j] - mean) * inv;
            if (g) v *= mp_kget_f(g->data, g->dtype, j % g->numel);
            if (be) v += mp_kget_f(be->data, be->dtype, j % be->numel);
            mp_kset_f(y->data, y->dtype, r * len + j, v);
        }
    }
    free(s);
    return MP_OK;
}

static mp_status ctk_simplified_ln(mp_kctx *k) {
    ctk_norm c = {-1, 1, -1, -1, -1, 1, -1, true};
    return ctk_norm_run(k, &c);
}

static mp_status ctk_skipln(mp_kctx *k) {
    ctk_norm c = {1, 2, 3, 4, 1, 2, 3, false};
    return ctk_norm_run(k, &c);
}

static mp_status ctk_skip_simplified_ln(mp_kctx *k) {
    ctk_norm c = {1, 2, -1, 3, 1, 2, 3, true};
    return ctk_norm_run(k, &c);
}

/* Gelu (erf), QuickGelu (x * sigmoid(alpha x)), BiasGelu (erf, after the
 * bias), FastGelu (tanh form, after the optional bias), BiasAdd (x + bias
 * + skip): element-wise with a bias along the last axis. */
typedef enum { CTK_GELU, CTK_QUICK, CTK_FAST, CTK_BIASADD } ctk_act;

static mp_status ctk_act_run(mp_kctx *k, ctk_act op) {
    const mp_rtensor *x = &k->in[0], *b = mp_kin(k, 1), *skip = op == CTK_BIASADD ? mp_kin(k, 2) : NULL;
    mp_rtensor *y = &k->out[0];
    double alpha = mp_attr_f(k->n, "alpha", 1.702);
    for (int64_t e = 0; e < x->numel; e++) {
        double v = mp_kget_f(x->data, x->dtype, e);
        if (b) v += mp_kget_f(b->data, b->dtype, e % b->numel);
        if (skip) v += mp_kget_f(skip->data, skip->dtype, e % skip->numel);
        switch (op) {
        case CTK_GELU: v = mp_s_gelu_erf(v); break;
        case CTK_QUICK: v = mp_s_swish(v, alpha); break;
        case CTK_FAST: v = mp_s_gelu_tanh(v); break;
        default: break;
        }
        mp_kset_f(y->data, y->dtype, e, v);
    }
    return MP_OK;
}

static mp_status ctk_gelu(mp_kctx *k) { return ctk_act_run(k, CTK_GELU); }
static mp_status ctk_quick_gelu(mp_kctx *k) { return ctk_act_run(k, CTK_QUICK); }
static mp_status ctk_fast_gelu(mp_kctx *k) { return ctk_act_run(k, CTK_FAST); }
static mp_status ctk_bias_add(mp_kctx *k) { return ctk_act_run(k, CTK_BIASADD); }

/* Tensor t as doubles, dequantized when scale is given: (t - zp) * scale
 * (scale and zero point scalar, or one per element of the last axis). */
static double *ctk_deq(mp_kctx *k, const mp_rtensor *t, const mp_rtensor *scale, const mp_rtensor *zp, mp_status *st) {
    double *p = malloc(sizeof(double) * (size_t)(t->numel + 1));
    if (!p) {
        *st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
        return NULL;
    }
    int64_t last = t->rank ? t->dims[t->rank - 1] : 1;
    for (int64_t e = 0; e < t->numel; e++) {
        double v = mp_kget_f(t->data, t->dtype, e);
        if (zp && zp->data) v -= mp_kget_f(zp->data, zp->dtype, zp->numel <= 1 ? 0 : e % last);
        if (scale && scale->data) v *= mp_kget_f(scale->data, scale->dtype, scale->numel <= 1 ? 0 : e % last);
        p[e] = v;
    }
    return p;
}

/* Y (doubles) into output 0: + bias along the last axis, then an
 * activation (NULL: none), then stored (quantized with ys/yz when given). */
static void ctk_store(mp_kctx *k, const double *y, const mp_rtensor *bias, const char *act, double alpha,
                      double beta, const mp_rtensor *ys, const mp_rtensor *yz) {
    mp_rtensor *o = &k->out[0];
    int64_t last = o->rank ? o->dims[o->rank - 1] : 1;
    double s = ys ? mp_kget_f(ys->data, ys->dtype, 0) : 1, z = yz ? mp_kget_f(yz->data, yz->dtype, 0) : 0;
    for (int64_t e = 0; e < o->numel; e++) {
        double v = y[e];
        if (bias) v += mp_kget_f(bias->data, bias->dtype, bias->numel <= 1 ? 0 : e % last);
        if (act && act[0]) v = mp_kact(act, v, alpha, beta);
        if (ys) mp_kquant_store(o->data, o->dtype, e, v / s + z);
        else mp_kset_f(o->data, o->dtype, e, v);
    }
}

/* A matrix product of dequantized operands (ctk_deq) into doubles. */
static mp_status ctk_qmatmul(mp_kctx *k, const mp_rtensor *a, const mp_rtensor *as, const mp_rtensor *az,
                             const mp_rtensor *b, const mp_rtensor *bs, const mp_rtensor *bz, double **y) {
    mp_status st = MP_OK;
    double *A = ctk_deq(k, a, as, az, &st), *B = st ? NULL : ctk_deq(k, b, bs, bz, &st);
    *y = st ? NULL : malloc(sizeof(double) * (size_t)(k->out[0].numel + 1));
    if (!st && !*y) st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    if (!st) mp_kmatmul(a, b, &k->out[0], false, A, B, *y, false, false);
    free(A), free(B);
    return st;
}

static mp_status ctk_matmul_int_to_float(mp_kctx *k) {
    double *y = NULL;
    mp_status st = ctk_qmatmul(k, &k->in[0], mp_kin(k, 2), mp_kin(k, 4), &k->in[1], mp_kin(k, 3), mp_kin(k, 5), &y);
    if (!st) ctk_store(k, y, mp_kin(k, 6), NULL, 0, 0, NULL, NULL);
    free(y);
    return st;
}

static mp_status ctk_matmul_integer16(mp_kctx *k) {
    double *y = NULL;
    mp_status st = ctk_qmatmul(k, &k->in[0], NULL, NULL, &k->in[1], NULL, NULL, &y);
    if (!st) ctk_store(k, y, NULL, NULL, 0, 0, NULL, NULL);
    free(y);
    return st;
}

/* DynamicQuantizeMatMul: A quantized to uint8 on the fly (as
 * DynamicQuantizeLinear), then the integer product rescaled. */
static mp_status ctk_dyn_quant_matmul(mp_kctx *k) {
    const mp_rtensor *a = &k->in[0];
    float scale;
    double zp;
    mp_kdynq_params(a, &scale, &zp);
    if (isnan(zp)) zp = 0; /* an infinity in A: the integer product needs a zero point */
    uint8_t *q = malloc((size_t)a->numel + 1);
    if (!q) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t e = 0; e < a->numel; e++)
        mp_kquant_store(q, MP_DT_UINT8, e, scale != 0 ? nearbyintf((float)mp_kget_f(a->data, a->dtype, e) / scale) + zp : zp);
    mp_rtensor qa = {q, MP_DT_UINT8, a->rank, a->dims, a->numel};
    float sc = scale;
    uint8_t zb = (uint8_t)zp;
    mp_rtensor st_s = {&sc, MP_DT_FLOAT, 0, NULL, 1}, st_z = {&zb, MP_DT_UINT8, 0, NULL, 1};
    double *y = NULL;
    mp_status st = ctk_qmatmul(k, &qa, &st_s, &st_z, &k->in[1], mp_kin(k, 2), mp_kin(k, 3), &y);
    if (!st) ctk_store(k, y, mp_kin(k, 4), NULL, 0, 0, NULL, NULL);
    free(y), free(q);
    return st;
}

/* MatMulNBits: B's blocks dequantized ((q - zero point) * scale; zero
 * point 2^(bits-1) when absent), then A @ W^T (+ bias). */
static mp_status ctk_matmul_nbits(mp_kctx *k) {
    const mp_rtensor *a = &k->in[0], *b = &k->in[1], *sc = &k->in[2], *zp = mp_kin(k, 3), *bias = mp_kin(k, 5);
    int64_t K = mp_attr_i(k->n, "K", 0), N = mp_attr_i(k->n, "N", 0), bits = mp_attr_i(k->n, "bits", 4);
    int64_t blk = mp_attr_i(k->n, "block_size", 0);
    if (mp_kin(k, 4)) return mp_kfail(k, MP_ERR_UNSUPPORTED, "g_idx");
    if (K <= 0 || N <= 0 || blk <= 0 || (bits != 2 && bits != 4 && bits != 8))
        return mp_kfail(k, MP_ERR_SHAPE, "bad K, N, bits or block_size");
    int64_t kb = (K + blk - 1) / blk, blob = blk * bits / 8, per = 8 / bits, mask = (1 << bits) - 1;
    int64_t zrow = (kb * bits + 7) / 8;
    if (b->numel != N * kb * blob || sc->numel != N * kb || a->numel % K || (bias && bias->numel != N) ||
        (zp && zp->numel != (zp->dtype == MP_DT_UINT8 ? N * zrow : N * kb)))
        return mp_kfail(k, MP_ERR_SHAPE, "B, scales, zero points or bias do not match K, N, bits and block_size");
    double *W = malloc(sizeof(double) * (size_t)(N * K + 1)), *A = malloc(sizeof(double) * (size_t)(a->numel + 1));
    double *Y = malloc(sizeof(double) * (size_t)(k->out[0].numel + 1));
    mp_status st = MP_OK;
    if (!W || !A || !Y) {
        st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t q = 0; q < kb; q++) {
            double s = mp_kget_f(sc->data, sc->dtype, n * kb + q), z = (double)(1 << (bits - 1));
            if (zp && zp->dtype == MP_DT_UINT8) {
                uint8_t byte = ((const uint8_t *)zp->data)[n * zrow + q / per];
                z = (double)((byte >> ((q % per) * bits)) & mask);
            } else if (zp) {
                z = mp_kget_f(zp->data, zp->dtype, n * kb + q);
            }
            for (int64_t j = 0; j < blk && q * blk + j < K; j++) {
                uint8_t byte = ((const uint8_t *)b->data)[(n * kb + q) * blob + j / per];
                double v = (double)((byte >> ((j % per) * bits)) & mask);
                W[n * K + q * blk + j] = (v - z) * s;
            }
        }
    mp_kconvert(A, MP_DT_DOUBLE, a->data, a->dtype, a->numel);
    int64_t M = a->numel / K;
    mp_kgemm_f64(M, N, K, A, K, 1, W, 1, K, Y, N, false);
    ctk_store(k, Y, bias, NULL, 0, 0, NULL, NULL);
done:
    free(W), free(A), free(Y);
    return st;
}

/* FusedGemm: Gemm, then the activation in place. */
static mp_status ctk_fused_gemm(mp_kctx *k) {
    mp_status st = mp_kgemm_run(k);
    const char *act = mp_attr_s(k->n, "activation", "");
    double al = mp_attr_f(k->n, "activation_alpha", 0.01), be = mp_attr_f(k->n, "activation_beta", 0.5);
    mp_rtensor *y = &k->out[0];
    for (int64_t e = 0; !st && act[0] && e < y->numel; e++)
        mp_kset_f(y->data, y->dtype, e, mp_kact(act, mp_kget_f(y->data, y->dtype, e), al, be));
    return st;
}

/* FusedConv: Conv (+ Z), then the activation in place. */
static mp_status ctk_fused_conv(mp_kctx *k) {
    int n_in = k->n_in;
    k->n_in = n_in < 3 ? n_in : 3;
    mp_status st = mp_kconv(k);
    k->n_in = n_in;
    const mp_rtensor *z = mp_kin(k, 3);
    if (!st && z && z->numel != k->out[0].numel) st = mp_kfail(k, MP_ERR_SHAPE, "Z must be shaped like Y");
    const char *act = mp_attr_s(k->n, "activation", "");
    const double *ap;
    int na = mp_attr_floats(k->n, "activation_params", &ap);
    double al = na > 0 ? ap[0] : 0.01, be = na > 1 ? ap[1] : 0.5;
    mp_rtensor *y = &k->out[0];
    for (int64_t e = 0; !st && e < y->numel; e++) {
        double v = mp_kget_f(y->data, y->dtype, e);
        if (z) v += mp_kget_f(z->data, z->dtype, e);
        if (act[0]) v = mp_kact(act, v, al, be);
        mp_kset_f(y->data, y->dtype, e, v);
    }
    return st;
}

/* GemmFastGelu: FastGelu(X @ W + bias). */
static mp_status ctk_gemm_fast_gelu(mp_kctx *k) {
    double *y = NULL;
    mp_status st = ctk_qmatmul(k, &k->in[0], NULL, NULL, &k->in[1], NULL, NULL, &y);
    const mp_rtensor *b = mp_kin(k, 2);
    mp_rtensor *o = &k->out[0];
    int64_t last = o->rank ? o->dims[o->rank - 1] : 1;
    for (int64_t e = 0; !st && e < o->numel; e++) {
        double v = y[e] + (b ? mp_kget_f(b->data, b->dtype, e % last) : 0);
        mp_kset_f(o->data, o->dtype, e, mp_s_gelu_tanh(v));
    }
    free(y);
    return st;
}

/* QLinearAdd / QLinearMul / MulInteger: dequantize, broadcast op,
 * requantize (MulInteger: int32 product of the shifted operands). */
static mp_status ctk_qbinary(mp_kctx *k, int op) {
    bool mi = op == 2;
    const mp_rtensor *a = &k->in[0], *b = &k->in[mi ? 2 : 3];
    mp_status st = MP_OK;
    double *A = ctk_deq(k, a, mi ? NULL : mp_kin(k, 1), mp_kin(k, mi ? 1 : 2), &st);
    double *B = st ? NULL : ctk_deq(k, b, mi ? NULL : mp_kin(k, 4), mp_kin(k, mi ? 3 : 5), &st);
    double *Y = st ? NULL : malloc(sizeof(double) * (size_t)(k->out[0].numel + 1));
    if (!st && !Y) st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    if (!st) {
        int ranks[2] = {a->rank, b->rank};
        const int64_t *dims[2] = {a->dims, b->dims};
        mp_kbcast it;
        mp_kbcast_init(&it, k->out[0].rank, k->out[0].dims, 2, ranks, dims);
        int64_t e = 0;
        for (int64_t r = 0; r < it.rows; r++, mp_kbcast_next(&it))
            for (int64_t j = 0; j < it.len; j++, e++) {
                double x = A[it.off[0] + j * it.step[0]], w = B[it.off[1] + j * it.step[1]];
                Y[e] = op == 0 ? x + w : x * w;
            }
        ctk_store(k, Y, NULL, NULL, 0, 0, mi ? NULL : mp_kin(k, 6), mi ? NULL : mp_kin(k, 7));
    }
    free(A), free(B), free(Y);
    return st;
}

static mp_status ctk_qlinear_add(mp_kctx *k) { return ctk_qbinary(k, 0); }
static mp_status ctk_qlinear_mul(mp_kctx *k) { return ctk_qbinary(k, 1); }
static mp_status ctk_mul_integer(mp_kctx *k) { return ctk_qbinary(k, 2); }

/* QLinearSigmoid / QLinearLeakyRelu: dequantize, activate, requantize. */
static mp_status ctk_qunary(mp_kctx *k) {
    mp_status st = MP_OK;
    double *X = ctk_deq(k, &k->in[0], mp_kin(k, 1), mp_kin(k, 2), &st);
    if (!st) {
        const char *act = !strcmp(k->n->op, "QLinearSigmoid") ? "Sigmoid" : "LeakyRelu";
        ctk_store(k, X, NULL, act, mp_attr_f(k->n, "alpha", 0.01), 0, mp_kin(k, 3), mp_kin(k, 4));
    }
    free(X);
    return st;
}

/* Inverse of [..., n, n]: Gauss-Jordan with partial pivoting in double. */
static mp_status ctk_inverse(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0];
    int64_t n = x->dims[x->rank - 1], mats = n ? x->numel / (n * n) : 0;
    double *a = malloc(sizeof(double) * (size_t)(2 * n * n + 1));
    if (!a) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t q = 0; q < mats; q++) {
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < 2 * n; j++)
                a[i * 2 * n + j] = j < n ? mp_kget_f(x->data, x->dtype, q * n * n + i * n + j) : (j - n == i);
        for (int64_t c = 0; c < n; c++) {
            int64_t p = c;
            for (int64_t r = c + 1; r < n; r++)
                if (fabs(a[r * 2 * n + c]) > fabs(a[p * 2 * n + c])) p = r;
            if (a[p * 2 * n + c] == 0) {
                free(a);
                return mp_kfail(k, MP_ERR_USAGE, "matrix %lld is singular", (long long)q);
            }
            for (int64_t j = 0; j < 2 * n && p != c; j++) {
                double t = a[c * 2 * n + j];
                a[c * 2 * n + j] = a[p * 2 * n + j];
                a[p * 2 * n + j] = t;
            }
            double d = a[c * 2 * n + c];
            for (int64_t j = 0; j < 2 * n; j++) a[c * 2 * n + j] /= d;
            for (int64_t r = 0; r < n; r++) {
                if (r == c) continue;
                double f = a[r * 2 * n + c];
                for (int64_t j = 0; j < 2 * n; j++) a[r * 2 * n + j] -= f * a[c * 2 * n + j];
            }
        }
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) mp_kset_f(k->out[0].data, k->out[0].dtype, q * n * n + i * n + j, a[i * 2 * n + n + j]);
    }
    free(a);
    return MP_OK;
}

/* BiasSplitGelu: s = x + bias; y = s[..., :D/2] * Gelu(s[..., D/2:]). */
static mp_status ctk_bias_split_gelu(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *b = &k->in[1];
    int64_t D = x->dims[x->rank - 1], h = D / 2, rows = D ? x->numel / D : 0;
    if (b->numel < D || k->out[0].numel != rows * h) return mp_kfail(k, MP_ERR_SHAPE, "bias or output size");
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < h; j++) {
            double l = mp_kget_f(x->data, x->dtype, r * D + j) + mp_kget_f(b->data, b->dtype, j);
            double g = mp_kget_f(x->data, x->dtype, r * D + h + j) + mp_kget_f(b->data, b->dtype, h + j);
            mp_kset_f(k->out[0].data, k->out[0].dtype, r * h + j, l * mp_s_gelu_erf(g));
        }
    return MP_OK;
}

/* BiasSoftmax: softmax(data + bias) over the dims from `axis` (default 1)
 * on, the bias broadcast onto data. */
static mp_status ctk_bias_softmax(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *b = &k->in[1];
    mp_rtensor *y = &k->out[0];
    int axis = mp_axis(mp_attr_i(k->n, "axis", 1), x->rank);
    if (axis < 0) return mp_kfail(k, MP_ERR_SHAPE, "axis out of range");
    int ranks[2] = {x->rank, b->rank};
    const int64_t *dims[2] = {x->dims, b->dims};
    mp_kbcast it;
    mp_kbcast_init(&it, x->rank, x->dims, 2, ranks, dims);
    int64_t e = 0;
    for (int64_t r = 0; r < it.rows; r++, mp_kbcast_next(&it))
        for (int64_t j = 0; j < it.len; j++, e++)
            mp_kset_f(y->data, y->dtype, e,
                      mp_kget_f(x->data, x->dtype, it.off[0] + j * it.step[0]) +
                          mp_kget_f(b->data, b->dtype, it.off[1] + j * it.step[1]));
    int64_t len = 1;
    for (int i = axis; i < x->rank; i++) len *= x->dims[i];
    double *row = malloc(sizeof(double) * (size_t)(len > 0 ? len : 1));
    if (!row) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; len && r < y->numel / len; r++) {
        for (int64_t j = 0; j < len; j++) row[j] = mp_kget_f(y->data, y->dtype, r * len + j);
        mp_s_softmax_row(row, len, false);
        for (int64_t j = 0; j < len; j++) mp_kset_f(y->data, y->dtype, r * len + j, row[j]);
    }
    free(row);
    return MP_OK;
}

/* Scaled dot-product attention over heads: q [B, N, S, dk], k [B, N, L,
 * dk], v [B, N, L, dv] (doubles) -> out [B, S, N * dv]. mask(b, s, l)
 * false drops a key; causal drops l > s + (L - S). */
typedef struct ctk_att {
    int64_t B, N, S, L, dk, dv;
    double scale;
    bool causal;
    const mp_rtensor *kpm;     /* key padding: [B] lengths or [B, L] 1/0 */
    const mp_rtensor *bias;    /* additive [B or 1, N or 1, S, L] */
} ctk_att;

static void ctk_sdpa(const ctk_att *a, const double *q, const double *kk, const double *v, double *out) {
    /* per row: the probabilities, the bias, the kept keys, the output */
    double *w = malloc(sizeof(double) * (size_t)(2 * a->L + a->dv + 1));
    uint8_t *keep = malloc((size_t)a->L + 1);
    if (!w || !keep) {
        free(w), free(keep);
        return;
    }
    double *add = w + a->L, *o = add + a->L;
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t h = 0; h < a->N; h++)
            for (int64_t s = 0; s < a->S; s++) {
                for (int64_t l = 0; l < a->L; l++) {
                    if (a->bias) {
                        const mp_rtensor *bt = a->bias;
                        int64_t bb = bt->dims[0] == 1 ? 0 : b, hh = bt->dims[1] == 1 ? 0 : h;
                        add[l] = mp_kget_f(bt->data, bt->dtype, ((bb * bt->dims[1] + hh) * a->S + s) * a->L + l);
                    }
                    bool k1 = !(a->causal && l > s + (a->L - a->S));
                    if (a->kpm && a->kpm->rank == 1) k1 = k1 && l < mp_kget_i(a->kpm->data, a->kpm->dtype, b);
                    else if (a->kpm) k1 = k1 && mp_kget_i(a->kpm->data, a->kpm->dtype, b * a->L + l) != 0;
                    keep[l] = k1;
                }
                /* a dropped key's score biased by -10000, as ONNX Runtime does */
                mp_ksdpa_row(q + ((b * a->N + h) * a->S + s) * a->dk, kk + (b * a->N + h) * a->L * a->dk,
                             v + (b * a->N + h) * a->L * a->dv, a->L, a->dk, a->dv, a->scale, 0,
                             a->bias ? add : NULL, keep, -10000.0, NULL, NULL, w, o);
                memcpy(out + ((b * a->S + s) * a->N + h) * a->dv, o, sizeof(double) * (size_t)a->dv);
            }
    free(w), free(keep);
}

/* [B, T, N * d] (+ bias[off..]) -> [B, N, T, d] as doubles. */
static void ctk_heads(const double *x, int64_t B, int64_t T, int64_t N, int64_t d, int64_t row, int64_t off,
                      const double *bias, double *out) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < N; h++)
                for (int64_t i = 0; i < d; i++)
                    out[((b * N + h) * T + t) * d + i] =
                        x[(b * T + t) * row + off + h * d + i] + (bias ? bias[off + h * d + i] : 0);
}

/* Attention: input @ weights + bias -> Q, K, V; SDPA; mask_index as key
 * padding (lengths [B] or a [B, L] mask); no past state. */
static mp_status ctk_attention(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *w = &k->in[1], *bias = mp_kin(k, 2), *mask = mp_kin(k, 3);
    if (mp_kin(k, 4) || (k->n_out > 1 && k->out[1].data)) return mp_kfail(k, MP_ERR_UNSUPPORTED, "past state");
    if (mask && mask->rank > 2) return mp_kfail(k, MP_ERR_UNSUPPORTED, "mask of rank %d", mask->rank);
    int64_t B = x->dims[0], S = x->dims[1], Hin = x->dims[2], N = mp_attr_i(k->n, "num_heads", 1), tot = w->dims[1];
    const int64_t *qkv;
    int nq = mp_attr_ints(k->n, "qkv_hidden_sizes", &qkv);
    int64_t hq = nq == 3 ? qkv[0] : tot / 3, hk = nq == 3 ? qkv[1] : tot / 3, hv = nq == 3 ? qkv[2] : tot / 3;
    if (x->rank != 3 || w->rank != 2 || w->dims[0] != Hin || N <= 0 || hq % N || hk % N || hv % N || hq != hk ||
        hq + hk + hv != tot || (bias && bias->numel != tot) || k->out[0].numel != B * S * hv ||
        (mask && mask->numel != B && mask->numel != B * S))
        return mp_kfail(k, MP_ERR_SHAPE, "input, weights, bias and mask sizes do not agree");
    mp_status st = MP_OK;
    double *X = ctk_deq(k, x, NULL, NULL, &st), *W = st ? NULL : ctk_deq(k, w, NULL, NULL, &st);
    double *bb = st || !bias ? NULL : ctk_deq(k, bias, NULL, NULL, &st);
    double *P = malloc(sizeof(double) * (size_t)(B * S * tot + 1)), *q = malloc(sizeof(double) * (size_t)(B * S * hq + 1));
    double *kk = malloc(sizeof(double) * (size_t)(B * S * hk + 1)), *v = malloc(sizeof(double) * (size_t)(B * S * hv + 1));
    double *o = malloc(sizeof(double) * (size_t)(B * S * hv + 1));
    if (!st && (!P || !q || !kk || !v || !o)) st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    if (!st) {
        mp_kgemm_f64(B * S, tot, Hin, X, Hin, 1, W, tot, 1, P, tot, false);
        ctk_heads(P, B, S, N, hq / N, tot, 0, bb, q);
        ctk_heads(P, B, S, N, hk / N, tot, hq, bb, kk);
        ctk_heads(P, B, S, N, hv / N, tot, hq + hk, bb, v);
        double sc = mp_attr_f(k->n, "scale", 0);
        ctk_att a = {B, N, S, S, hq / N, hv / N, sc != 0 ? sc : 1.0 / sqrt((double)(hq / N)),
                     mp_attr_i(k->n, "unidirectional", 0) != 0, mask, mp_kin(k, 5)};
        ctk_sdpa(&a, q, kk, v, o);
        ctk_store(k, o, NULL, NULL, 0, 0, NULL, NULL);
    }
    free(X), free(W), free(bb), free(P), free(q), free(kk), free(v), free(o);
    return st;
}

/* MultiHeadAttention with separate 3-D query [B, S, Hq], key [B, L, Hk],
 * value [B, L, Hv]; optional bias [Hq + Hk + Hv], key_padding_mask,
 * attention_bias; no packed forms, no past state. */
static mp_status ctk_mha(mp_kctx *k) {
    const mp_rtensor *q = &k->in[0], *kx = mp_kin(k, 1), *vx = mp_kin(k, 2), *bias = mp_kin(k, 3);
    if (!kx || !vx || q->rank != 3 || kx->rank != 3 || vx->rank != 3 || mp_kin(k, 6))
        return mp_kfail(k, MP_ERR_UNSUPPORTED, "packed, cached or past forms");
    int64_t B = q->dims[0], S = q->dims[1], L = kx->dims[1], N = mp_attr_i(k->n, "num_heads", 1);
    int64_t hq = q->dims[2], hk = kx->dims[2], hv = vx->dims[2];
    const mp_rtensor *kpm = mp_kin(k, 4), *ab = mp_kin(k, 5);
    if (N <= 0 || hq % N || hk % N || hv % N || hq != hk || kx->dims[0] != B || vx->dims[0] != B || vx->dims[1] != L ||
        (bias && bias->numel != hq + hk + hv) || k->out[0].numel != B * S * hv ||
        (kpm && kpm->numel != B && kpm->numel != B * L) ||
        (ab && (ab->rank != 4 || ab->numel != (ab->dims[0] == 1 ? 1 : B) * (ab->dims[1] == 1 ? 1 : N) * S * L)))
        return mp_kfail(k, MP_ERR_SHAPE, "query, key, value, bias and mask sizes do not agree");
    mp_status st = MP_OK;
    double *Q = ctk_deq(k, q, NULL, NULL, &st), *K = st ? NULL : ctk_deq(k, kx, NULL, NULL, &st);
    double *V = st ? NULL : ctk_deq(k, vx, NULL, NULL, &st), *bb = st || !bias ? NULL : ctk_deq(k, bias, NULL, NULL, &st);
    double *qh = malloc(sizeof(double) * (size_t)(B * S * hq + 1)), *kh = malloc(sizeof(double) * (size_t)(B * L * hk + 1));
    double *vh = malloc(sizeof(double) * (size_t)(B * L * hv + 1)), *o = malloc(sizeof(double) * (size_t)(B * S * hv + 1));
    if (!st && (!qh || !kh || !vh || !o)) st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    if (!st) {
        ctk_heads(Q, B, S, N, hq / N, hq, 0, bb, qh);
        ctk_heads(K, B, L, N, hk / N, hk, 0, bb ? bb + hq : NULL, kh);
        ctk_heads(V, B, L, N, hv / N, hv, 0, bb ? bb + hq + hk : NULL, vh);
        double sc = mp_attr_f(k->n, "scale", 0);
        ctk_att a = {B, N, S, L, hq / N, hv / N, sc != 0 ? sc : 1.0 / sqrt((double)(hq / N)),
                     mp_attr_i(k->n, "unidirectional", 0) != 0, mp_kin(k, 4), mp_kin(k, 5)};
        ctk_sdpa(&a, qh, kh, vh, o);
        ctk_store(k, o, NULL, NULL, 0, 0, NULL, NULL);
    }
    free(Q), free(K), free(V), free(bb), free(qh), free(kh), free(vh), free(o);
    return st;
}

/* EmbedLayerNormalization: LayerNorm(word[ids] + position[pos] (+
 * segment[seg])); mask_index = the mask's row sums. */
static mp_status ctk_embed_ln(mp_kctx *k) {
    const mp_rtensor *ids = &k->in[0], *seg = mp_kin(k, 1), *we = &k->in[2], *pe = &k->in[3];
    const mp_rtensor *se = mp_kin(k, 4), *g = &k->in[5], *be = &k->in[6], *mask = mp_kin(k, 7), *pid = mp_kin(k, 8);
    mp_rtensor *y = &k->out[0];
    int64_t B = ids->dims[0], S = ids->dims[1], H = we->dims[1];
    if (ids->rank != 2 || we->rank != 2 || pe->rank != 2 || pe->dims[1] != H || (se && (se->rank != 2 || se->dims[1] != H)) ||
        g->numel < H || be->numel < H || (seg && seg->numel != B * S) || (mask && mask->numel != B * S) ||
        (pid && pid->numel != S && pid->numel != B * S) || y->numel != B * S * H)
        return mp_kfail(k, MP_ERR_SHAPE, "ids, embeddings, gamma, beta and mask sizes do not agree");
    double eps = mp_attr_f(k->n, "epsilon", 1e-12);
    double *row = malloc(sizeof(double) * (size_t)(H + 1));
    if (!row) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    mp_rtensor *sum = k->n_out > 2 && k->out[2].data ? &k->out[2] : NULL;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) {
            int64_t t = mp_kget_i(ids->data, ids->dtype, b * S + s), p = s;
            if (pid) p = mp_kget_i(pid->data, pid->dtype, pid->numel == S ? s : b * S + s);
            int64_t sg = seg ? mp_kget_i(seg->data, seg->dtype, b * S + s) : 0;
            if (t < 0 || t >= we->dims[0] || p < 0 || p >= pe->dims[0] || (se && (sg < 0 || sg >= se->dims[0]))) {
                free(row);
                return mp_kfail(k, MP_ERR_USAGE, "an index is out of its table");
            }
            double mean = 0, var = 0;
            for (int64_t j = 0; j < H; j++) {
                row[j] = mp_kget_f(we->data, we->dtype, t * H + j) + mp_kget_f(pe->data, pe->dtype, p * H + j) +
                         (se ? mp_kget_f(se->data, se->dtype, sg * H + j) : 0);
                if (sum) mp_kset_f(sum->data, sum->dtype, (b * S + s) * H + j, row[j]);
                mean += row[j];
            }
            mean /= (double)H;
            for (int64_t j = 0; j < H; j++) var += (row[j] - mean) * (row[j] - mean);
            double inv = 1.0 / sqrt(var / (double)H + eps);
            for (int64_t j = 0; j < H; j++)
                mp_kset_f(y->data, y->dtype, (b * S + s) * H + j,
                          (row[j] - mean) * inv * mp_kget_f(g->data, g->dtype, j) + mp_kget_f(be->data, be->dtype, j));
        }
    if (k->n_out > 1 && k->out[1].data)
        for (int64_t b = 0; b < B; b++) {
            int64_t c = 0;
            for (int64_t s = 0; s < S; s++) c += mask ? mp_kget_i(mask->data, mask->dtype, b * S + s) != 0 : 1;
            mp_kset_i(k->out[1].data, k->out[1].dtype, b, c);
        }
    free(row);
    return MP_OK;
}

/* RotaryEmbedding: input [B, S, N*h] or [B, N, S, h]; each pair of the
 * first rot dims (halves, or adjacent when interleaved) rotated by the
 * cached cos/sin at the token's position (position_ids [B, S], or one
 * offset). */
static mp_status ctk_rope(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *pos = &k->in[1], *cs = &k->in[2], *sn = &k->in[3];
    mp_rtensor *y = &k->out[0];
    bool inter = mp_attr_i(k->n, "interleaved", 0) != 0, four = x->rank == 4;
    int64_t B = x->dims[0], S = four ? x->dims[2] : x->dims[1], N = four ? x->dims[1] : mp_attr_i(k->n, "num_heads", 0);
    int64_t half = cs->dims[cs->rank - 1];
    int64_t h = four ? x->dims[3] : (N > 0 ? x->dims[2] / N : 2 * half);
    if (!four && N <= 0) N = x->dims[2] / h;
    int64_t rot = mp_attr_i(k->n, "rotary_embedding_dim", 0);
    if (rot <= 0) rot = 2 * half;
    if ((x->rank != 3 && x->rank != 4) || cs->rank != 2 || sn->rank != 2 || sn->dims[1] != half || h <= 0 ||
        N <= 0 || (!four && N * h != x->dims[2]) || rot > h || rot / 2 > half || y->numel != x->numel ||
        (pos->numel != 1 && pos->numel != B * S))
        return mp_kfail(k, MP_ERR_SHAPE, "input, position_ids, caches and rotary_embedding_dim do not fit "
                                         "each other");
    double *row = malloc(sizeof(double) * (size_t)(2 * rot + 1));
    if (!row) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    double *c = row + rot, *si = c + rot / 2;
    for (int64_t b = 0; b < B; b++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t p = pos->numel == 1 ? mp_kget_i(pos->data, pos->dtype, 0) + s : mp_kget_i(pos->data, pos->dtype, b * S + s);
                if (p < 0 || p >= cs->dims[0] || p >= sn->dims[0] || rot / 2 > half) {
                    free(row);
                    return mp_kfail(k, MP_ERR_USAGE, "position %lld is outside the cos/sin caches", (long long)p);
                }
                int64_t base = four ? ((b * N + n) * S + s) * h : ((b * S + s) * N + n) * h;
                for (int64_t i = rot; i < h; i++) mp_kcopy1(y->data, base + i, x->data, base + i, mp_kesize(x->dtype));
                for (int64_t i = 0; i < rot; i++) row[i] = mp_kget_f(x->data, x->dtype, base + i);
                for (int64_t i = 0; i < rot / 2; i++)
                    c[i] = mp_kget_f(cs->data, cs->dtype, p * half + i), si[i] = mp_kget_f(sn->data, sn->dtype, p * half + i);
                mp_krope(row, rot, inter, c, si);
                for (int64_t i = 0; i < rot; i++) mp_kset_f(y->data, y->dtype, base + i, row[i]);
            }
    free(row);
    return MP_OK;
}

/* The quantized wrappers: dequantize the operands to fp32, run the
 * default-domain operator's portable kernel (`op` at `opset`, this node's
 * attributes) on them, quantize the result with (ys, yz). */
static mp_status ctk_qwrap(mp_kctx *k, const char *opname, int opset, int n, const mp_rtensor *const *q,
                           const mp_rtensor *const *sc, const mp_rtensor *const *zp, const mp_rtensor *ys,
                           const mp_rtensor *yz) {
    const mp_op *op = mp_op_find("", opname, opset);
    if (!op || !op->run) return mp_kfail(k, MP_ERR_UNSUPPORTED, "no %s kernel", opname);
    mp_rtensor in[16], out = k->out[0];
    void *bufs[16] = {0};
    mp_status st = MP_OK;
    if (n > 16) return mp_kfail(k, MP_ERR_UNSUPPORTED, "more than 16 operands");
    for (int i = 0; !st && i < n; i++) {
        in[i] = *q[i];
        if (!sc[i]) continue; /* a condition: as is */
        float *f = malloc(sizeof(float) * (size_t)(q[i]->numel + 1));
        if (!f) {
            st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
            break;
        }
        double s = mp_kget_f(sc[i]->data, sc[i]->dtype, 0), z = zp[i] ? mp_kget_f(zp[i]->data, zp[i]->dtype, 0) : 0;
        for (int64_t e = 0; e < q[i]->numel; e++) f[e] = (float)((mp_kget_f(q[i]->data, q[i]->dtype, e) - z) * s);
        bufs[i] = f;
        in[i].data = f;
        in[i].dtype = MP_DT_FLOAT;
    }
    float *yf = st ? NULL : malloc(sizeof(float) * (size_t)(out.numel + 1));
    if (!st && !yf) st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    if (!st) {
        mp_node tmp = *k->n;
        int ins[16];
        for (int i = 0; i < n; i++) ins[i] = 0;
        tmp.op = opname, tmp.domain = "", tmp.opset = opset, tmp.n_in = n, tmp.in = ins, tmp.n_out = 1;
        out.data = yf;
        out.dtype = MP_DT_FLOAT;
        mp_kctx kk = {.n = &tmp, .g = k->g, .ex = NULL, .n_in = n, .n_out = 1, .in = in, .out = &out, .threads = 1};
        st = mp_krun_node(op, &kk);
    }
    if (!st) {
        double s = mp_kget_f(ys->data, ys->dtype, 0), z = yz ? mp_kget_f(yz->data, yz->dtype, 0) : 0;
        float fs = (float)s; /* in fp32, as ONNX Runtime quantizes */
        for (int64_t e = 0; e < out.numel; e++)
            mp_kquant_store(k->out[0].data, k->out[0].dtype, e, nearbyintf(yf[e] / fs) + z);
    }
    for (int i = 0; i < n; i++) free(bufs[i]);
    free(yf);
    return st;
}

static mp_status ctk_qlinear_softmax(mp_kctx *k) {
    const mp_rtensor *q[1] = {&k->in[0]}, *s[1] = {&k->in[1]}, *z[1] = {mp_kin(k, 2)};
    int opset = (int)mp_attr_i(k->n, "opset", 13);
    return ctk_qwrap(k, "Softmax", opset >= 13 ? 13 : 11, 1, q, s, z, &k->in[3], mp_kin(k, 4));
}

static mp_status ctk_qlinear_reduce_mean(mp_kctx *k) {
    const mp_rtensor *q[1] = {&k->in[0]}, *s[1] = {&k->in[1]}, *z[1] = {mp_kin(k, 2)};
    return ctk_qwrap(k, "ReduceMean", 13, 1, q, s, z, &k->in[3], mp_kin(k, 4));
}

static mp_status ctk_qlinear_where(mp_kctx *k) {
    const mp_rtensor *q[3] = {&k->in[0], &k->in[1], &k->in[4]}, *s[3] = {NULL, &k->in[2], &k->in[5]};
    const mp_rtensor *z[3] = {NULL, mp_kin(k, 3), mp_kin(k, 6)};
    return ctk_qwrap(k, "Where", 16, 3, q, s, z, &k->in[7], mp_kin(k, 8));
}

static mp_status ctk_qlinear_concat(mp_kctx *k) {
    int n = (k->n_in - 2) / 3;
    const mp_rtensor *q[16], *s[16], *z[16];
    if (n < 1 || n > 16) return mp_kfail(k, MP_ERR_UNSUPPORTED, "%d inputs", n);
    for (int i = 0; i < n; i++) q[i] = &k->in[2 + 3 * i], s[i] = &k->in[3 + 3 * i], z[i] = mp_kin(k, 4 + 3 * i);
    return ctk_qwrap(k, "Concat", 13, n, q, s, z, &k->in[0], mp_kin(k, 1));
}

/* QLinearGlobalAveragePool: NCHW through GlobalAveragePool; channels_last
 * ([N, H, W, C]) averaged here. */
static mp_status ctk_qlinear_gap(mp_kctx *k) {
    const mp_rtensor *q[1] = {&k->in[0]}, *s[1] = {&k->in[1]}, *z[1] = {mp_kin(k, 2)};
    if (!mp_attr_i(k->n, "channels_last", 0))
        return ctk_qwrap(k, "GlobalAveragePool", 1, 1, q, s, z, &k->in[3], mp_kin(k, 4));
    const mp_rtensor *x = &k->in[0];
    int64_t N = x->dims[0], C = x->dims[x->rank - 1], sp = N * C != 0 ? x->numel / (N * C) : 0;
    double xs = mp_kget_f(s[0]->data, s[0]->dtype, 0), xz = z[0] ? mp_kget_f(z[0]->data, z[0]->dtype, 0) : 0;
    double ysv = mp_kget_f(k->in[3].data, k->in[3].dtype, 0), yzv = mp_kin(k, 4) ? mp_kget_f(k->in[4].data, k->in[4].dtype, 0) : 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            double acc = 0;
            for (int64_t p = 0; p < sp; p++) acc += mp_kget_f(x->data, x->dtype, (n * sp + p) * C + c) - xz;
            mp_kquant_store(k->out[0].data, k->out[0].dtype, n * C + c, (sp ? acc / (double)sp : 0) * xs / ysv + yzv);
        }
    return MP_OK;
}

/* GroupNorm (com.microsoft): channels_last (default 1) or NCHW; groups;
 * optional SiLU (activation = 1). */
static mp_status ctk_groupnorm(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *g = &k->in[1], *b = &k->in[2];
    mp_rtensor *y = &k->out[0];
    bool last = mp_attr_i(k->n, "channels_last", 1) != 0, silu = mp_attr_i(k->n, "activation", 0) != 0;
    int64_t G = mp_attr_i(k->n, "groups", 1), N = x->dims[0], C = last ? x->dims[x->rank - 1] : x->dims[1];
    double eps = mp_attr_f(k->n, "epsilon", 1e-5);
    if (G < 1 || C % G) return mp_kfail(k, MP_ERR_SHAPE, "groups does not divide the channels");
    int64_t sp = N * C != 0 ? x->numel / (N * C) : 0, cg = C / G;
    if (g->numel < C || b->numel < C) return mp_kfail(k, MP_ERR_SHAPE, "gamma and beta must hold one value per channel");
    for (int64_t n = 0; n < N; n++)
        for (int64_t gi = 0; gi < G; gi++) {
            double s = 0, s2 = 0, cnt = (double)(cg * sp);
            for (int pass = 0; pass < 3; pass++) {
                double mean = cnt ? s / cnt : 0, inv = 1.0 / sqrt((cnt ? s2 / cnt : 0) + eps);
                for (int64_t c = gi * cg; c < (gi + 1) * cg; c++)
                    for (int64_t p = 0; p < sp; p++) {
                        int64_t at = last ? (n * sp + p) * C + c : (n * C + c) * sp + p;
                        double v = mp_kget_f(x->data, x->dtype, at);
                        if (pass == 0) s += v;
                        else if (pass == 1) s2 += (v - mean) * (v - mean);
                        else {
                            double o = (v - mean) * inv * mp_kget_f(g->data, g->dtype, c) + mp_kget_f(b->data, b->dtype, c);
                            mp_kset_f(y->data, y->dtype, at, silu ? o / (1 + exp(-o)) : o);
                        }
                    }
            }
        }
    return MP_OK;
}

/* An fp32 copy of quantized t: (t - zp) * scale, zero point and scale
 * scalar or one per element of the last axis. */
static mp_rtensor ctk_deq_f32(mp_kctx *k, const mp_rtensor *t, const mp_rtensor *s, const mp_rtensor *z, mp_status *st) {
    mp_rtensor r = *t;
    double *d = *st ? NULL : ctk_deq(k, t, s, z, st);
    float *f = *st ? NULL : malloc(sizeof(float) * (size_t)(t->numel + 1));
    if (!*st && !f) *st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t e = 0; f && e < t->numel; e++) f[e] = (float)d[e];
    free(d);
    r.data = f;
    r.dtype = MP_DT_FLOAT;
    return r;
}

/* QAttention: the input and weights dequantized, then Attention. */
static mp_status ctk_qattention(mp_kctx *k) {
    mp_status st = MP_OK;
    if (mp_kin(k, 8)) return mp_kfail(k, MP_ERR_UNSUPPORTED, "past state");
    mp_rtensor in[6] = {{0}};
    in[0] = ctk_deq_f32(k, &k->in[0], &k->in[3], mp_kin(k, 6), &st);
    in[1] = ctk_deq_f32(k, &k->in[1], &k->in[4], mp_kin(k, 7), &st);
    if (mp_kin(k, 2)) in[2] = k->in[2];
    if (mp_kin(k, 5)) in[3] = k->in[5];
    mp_kctx kk = *k;
    kk.in = in;
    kk.n_in = 4;
    if (!st) st = ctk_attention(&kk);
    free(in[0].data), free(in[1].data);
    return st;
}

/* QGemm: alpha * (A - za)(B - zb) * sa * sb + C * sa * sb (C int32), then
 * quantized with (y_scale, y_zero_point) or left in fp32. */
static mp_status ctk_qgemm(mp_kctx *k) {
    const mp_rtensor *a = &k->in[0], *b = &k->in[3], *c = mp_kin(k, 6), *ys = mp_kin(k, 7), *yz = mp_kin(k, 8);
    bool ta = mp_attr_i(k->n, "transA", 0) != 0, tb = mp_attr_i(k->n, "transB", 0) != 0;
    double alpha = mp_attr_f(k->n, "alpha", 1.0);
    mp_rtensor *y = &k->out[0];
    int64_t M = y->dims[0], N = y->dims[1], K = ta ? a->dims[0] : a->dims[1];
    mp_status st = MP_OK;
    double *A = ctk_deq(k, a, &k->in[1], mp_kin(k, 2), &st);
    double *B = st ? NULL : ctk_deq(k, b, &k->in[4], mp_kin(k, 5), &st);
    double *Y = st ? NULL : malloc(sizeof(double) * (size_t)(M * N + 1));
    if (!st && !Y) st = mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    if (!st) {
        mp_kgemm_f64(M, N, K, A, ta ? 1 : K, ta ? M : 1, B, tb ? 1 : N, tb ? K : 1, Y, N, false);
        double sa = mp_kget_f(k->in[1].data, k->in[1].dtype, 0);
        const mp_rtensor *sb = &k->in[4];
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double v = alpha * Y[i * N + j];
                if (c) {
                    int64_t cr = c->rank == 2 ? c->dims[0] : 1, cc = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
                    double s = sa * mp_kget_f(sb->data, sb->dtype, sb->numel <= 1 ? 0 : j);
                    v += s * mp_kget_f(c->data, c->dtype, (cr == 1 ? 0 : i) * cc + (cc == 1 ? 0 : j));
                }
                Y[i * N + j] = v;
            }
        ctk_store(k, Y, NULL, NULL, 0, 0, ys, yz);
    }
    free(A), free(B), free(Y);
    return st;
}

/* SkipGroupNorm: s = x + skip (+ bias per channel), then GroupNorm (NHWC);
 * output 1 (optional) is s. */
static mp_status ctk_skip_groupnorm(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *skip = &k->in[3], *bias = mp_kin(k, 4);
    int64_t C = x->dims[x->rank - 1];
    float *sum = malloc(sizeof(float) * (size_t)(x->numel + 1));
    if (!sum) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t e = 0; e < x->numel; e++) {
        double v = mp_kget_f(x->data, x->dtype, e);
        v += mp_kget_f(skip->data, skip->dtype, skip->numel == x->numel ? e : e % skip->numel);
        if (bias) v += mp_kget_f(bias->data, bias->dtype, e % C);
        sum[e] = (float)v;
        if (k->n_out > 1 && k->out[1].data) mp_kset_f(k->out[1].data, k->out[1].dtype, e, v);
    }
    mp_rtensor in[3] = {{sum, MP_DT_FLOAT, x->rank, x->dims, x->numel}, k->in[1], k->in[2]};
    mp_kctx kk = *k;
    kk.in = in;
    kk.n_in = 3;
    mp_status st = ctk_groupnorm(&kk);
    free(sum);
    return st;
}

/* GroupQueryAttention: query heads grouped over kv_num_heads key/value
 * heads; the new keys and values appended to past_key/past_value at each
 * row's past length (seqlens_k + 1 - S; 0 for a prompt, total_sequence_length
 * == S); optional rotary embedding of q and k at their positions (cos/sin
 * caches, do_rotary); causal attention (local_window_size limits it when
 * > 0; softcap caps the scores when > 0). Outputs: output, present_key,
 * present_value [B, Nkv, T, h]. */
static mp_status ctk_gqa(mp_kctx *k) {
    const mp_rtensor *q = &k->in[0], *kx = mp_kin(k, 1), *vx = mp_kin(k, 2), *pk = mp_kin(k, 3), *pv = mp_kin(k, 4);
    const mp_rtensor *sl = mp_kin(k, 5), *tsl = mp_kin(k, 6), *cs = mp_kin(k, 7), *sn = mp_kin(k, 8);
    int64_t N = mp_attr_i(k->n, "num_heads", 0), Nkv = mp_attr_i(k->n, "kv_num_heads", 0);
    bool rotary = mp_attr_i(k->n, "do_rotary", 0) != 0, inter = mp_attr_i(k->n, "rotary_interleaved", 0) != 0;
    int64_t win = mp_attr_i(k->n, "local_window_size", -1);
    double softcap = mp_attr_f(k->n, "softcap", 0.0);
    if (N <= 0 || Nkv <= 0 || N % Nkv || q->rank != 3 || !sl || !tsl || mp_kin(k, 9) || mp_kin(k, 10))
        return mp_kfail(k, MP_ERR_UNSUPPORTED, "this form (position_ids, attention_bias or missing inputs)");
    int64_t B = q->dims[0], S = q->dims[1], packed = !vx;
    int64_t h = packed ? q->dims[2] / (N + 2 * Nkv) : q->dims[2] / N;
    int64_t P = pk ? pk->dims[2] : 0, T = k->out[1].data ? k->out[1].dims[2] : P + S;
    if (h <= 0 || q->numel != B * S * (packed ? (N + 2 * Nkv) * h : N * h) ||
        (!packed && (!kx || kx->numel != B * S * Nkv * h || vx->numel != B * S * Nkv * h)) ||
        (pk && (pk->rank != 4 || pk->numel != B * Nkv * P * h || !pv || pv->numel != pk->numel)) || sl->numel < B ||
        (k->out[1].data && k->out[1].numel != B * Nkv * T * h))
        return mp_kfail(k, MP_ERR_SHAPE, "query, key, value, past and present sizes do not agree");
    int64_t total = mp_kget_i(tsl->data, tsl->dtype, 0);
    double scale = mp_attr_f(k->n, "scale", 0.0);
    if (scale == 0) scale = 1.0 / sqrt((double)h);
    int64_t qw = packed ? (N + 2 * Nkv) * h : N * h, kw = packed ? qw : Nkv * h;
    size_t nq = (size_t)(B * N * S * h), nk = (size_t)(B * Nkv * T * h);
    double *Q = calloc(nq + 1, sizeof(double)), *K = calloc(nk + 1, sizeof(double)), *V = calloc(nk + 1, sizeof(double));
    double *w = malloc(sizeof(double) * (size_t)(T + h + 1)), *orow = w ? w + T : NULL;
    uint8_t *keep = malloc((size_t)T + 1);
    mp_status st = Q && K && V && w && keep ? MP_OK : mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    for (int64_t b = 0; !st && b < B; b++) {
        int64_t past = total == S ? 0 : mp_kget_i(sl->data, sl->dtype, b) + 1 - S;
        if (past < 0 || past + S > T) {
            st = mp_kfail(k, MP_ERR_USAGE, "seqlens_k[%lld] does not fit the present buffer", (long long)b);
            break;
        }
        /* past rows, then the new rows */
        for (int64_t g = 0; g < Nkv; g++)
            for (int64_t t = 0; t < past; t++)
                for (int64_t i = 0; i < h; i++) {
                    int64_t at = ((b * Nkv + g) * T + t) * h + i, src = ((b * Nkv + g) * P + t) * h + i;
                    K[at] = mp_kget_f(pk->data, pk->dtype, src);
                    V[at] = mp_kget_f(pv->data, pv->dtype, src);
                }
        for (int64_t s = 0; s < S; s++) {
            int64_t pos = past + s;
            for (int64_t hh = 0; hh < N + 2 * Nkv; hh++) {
                bool isq = hh < N, isk = hh >= N && hh < N + Nkv;
                int64_t head = isq ? hh : isk ? hh - N : hh - N - Nkv;
                const mp_rtensor *src = packed || isq ? q : isk ? kx : vx;
                int64_t base = (b * S + s) * (packed || isq ? qw : kw) + (packed ? hh * h : head * h);
                double *dst = isq ? &Q[((b * N + head) * S + s) * h] : isk ? &K[((b * Nkv + head) * T + pos) * h]
                                                                           : &V[((b * Nkv + head) * T + pos) * h];
                for (int64_t i = 0; i < h; i++) dst[i] = mp_kget_f(src->data, src->dtype, base + i);
                if (rotary && cs && sn && hh < N + Nkv) {
                    int64_t half = cs->dims[cs->rank - 1];
                    if (pos >= cs->dims[0] || pos >= sn->dims[0] || 2 * half > h || sn->numel != cs->numel) {
                        st = mp_kfail(k, MP_ERR_USAGE, "position %lld is outside the cos/sin caches", (long long)pos);
                        break;
                    }
                    double *c = w, *si = w + half; /* w (T + h >= 2 half) is free until the attention below */
                    for (int64_t i = 0; i < half; i++)
                        c[i] = mp_kget_f(cs->data, cs->dtype, pos * half + i), si[i] = mp_kget_f(sn->data, sn->dtype, pos * half + i);
                    mp_krope(dst, 2 * half, inter, c, si);
                }
            }
        }
        /* attention of each query head on its kv head, causal (within
         * local_window_size when > 0): the keys in [lo, pos] */
        for (int64_t n = 0; n < N && !st; n++) {
            int64_t g = n / (N / Nkv);
            for (int64_t s = 0; s < S; s++) {
                int64_t pos = past + s, lo = win > 0 && pos - win + 1 > 0 ? pos - win + 1 : 0;
                for (int64_t t = 0; t < T; t++) keep[t] = t >= lo && t <= pos;
                mp_ksdpa_row(&Q[((b * N + n) * S + s) * h], &K[(b * Nkv + g) * T * h], &V[(b * Nkv + g) * T * h], T, h,
                             h, scale, softcap, NULL, keep, -INFINITY, NULL, NULL, w, orow);
                for (int64_t i = 0; i < h; i++)
                    mp_kset_f(k->out[0].data, k->out[0].dtype, (b * S + s) * N * h + n * h + i, orow[i]);
            }
        }
    }
    for (int o = 1; !st && o <= 2; o++) {
        if (o >= k->n_out || !k->out[o].data) continue;
        const double *src = o == 1 ? K : V;
        mp_rtensor *y = &k->out[o];
        if ((size_t)y->numel != nk) {
            st = mp_kfail(k, MP_ERR_SHAPE, "present %d is not [B, Nkv, T, h]", o);
            break;
        }
        mp_kconvert(y->data, y->dtype, src, MP_DT_DOUBLE, y->numel);
    }
    free(Q), free(K), free(V), free(w), free(keep);
    return st;
}

/* GatherBlockQuantized: Gather on a block-quantized table, dequantized:
 * (q - zero point) * scale, the scale (and zero point) of q's block of
 * block_size along quantize_axis. uint8 data packs 8 / bits values per byte
 * along the last dim (low bits first); the default zero point is the
 * middle of the unsigned range (0 for signed int4). */
static mp_status ctk_gather_bq(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *ix = &k->in[1], *sc = &k->in[2], *zp = mp_kin(k, 3);
    mp_rtensor *y = &k->out[0];
    int64_t bits = mp_attr_i(k->n, "bits", 4), blk = mp_attr_i(k->n, "block_size", 128);
    bool packed = x->dtype == MP_DT_UINT8 && bits < 8;
    int per = packed ? (int)(8 / bits) : 1, r = x->rank;
    int ga = mp_axis(mp_attr_i(k->n, "gather_axis", 0), r), qa = mp_axis(mp_attr_i(k->n, "quantize_axis", r - 1), r);
    if (ga < 0 || qa < 0 || blk <= 0 || (bits != 4 && bits != 8) || ix->rank + r - 1 != y->rank)
        return mp_kfail(k, MP_ERR_SHAPE, "bad axes, bits, block_size or ranks");
    int64_t ud[MP_MAX_RANK], sd[MP_MAX_RANK], us[MP_MAX_RANK], ss[MP_MAX_RANK], c[MP_MAX_RANK];
    for (int d = 0; d < r; d++) {
        ud[d] = x->dims[d] * (d == r - 1 ? per : 1);
        sd[d] = d == qa ? (ud[d] + blk - 1) / blk : ud[d];
    }
    mp_kstrides(r, ud, us);
    mp_kstrides(r, sd, ss);
    double zdef = x->dtype == MP_DT_INT4 || x->dtype == MP_DT_INT8 ? 0 : (double)(1 << (bits - 1));
    int64_t mask = (1 << bits) - 1;
    for (int64_t e = 0; e < y->numel; e++) {
        /* output coords: data[:ga], indices..., data[ga+1:] */
        int64_t rem = e;
        int64_t oc[MP_MAX_RANK];
        for (int d = y->rank - 1; d >= 0; d--) oc[d] = rem % y->dims[d], rem /= y->dims[d];
        int64_t ioff = 0;
        for (int d = 0; d < ix->rank; d++) ioff = ioff * ix->dims[d] + oc[ga + d];
        int64_t gi = mp_kget_i(ix->data, ix->dtype, ioff);
        if (gi < 0) gi += ud[ga];
        if (gi < 0 || gi >= ud[ga]) return mp_kfail(k, MP_ERR_USAGE, "index %lld out of range", (long long)gi);
        for (int d = 0; d < r; d++) c[d] = d < ga ? oc[d] : d == ga ? gi : oc[d + ix->rank - 1];
        int64_t uo = 0, so = 0;
        for (int d = 0; d < r; d++) {
            uo += c[d] * us[d];
            so += (d == qa ? c[d] / blk : c[d]) * ss[d];
        }
        double q, z = zdef;
        if (packed) {
            q = (double)((((const uint8_t *)x->data)[uo / per] >> ((uo % per) * bits)) & mask);
            if (zp) z = (double)((((const uint8_t *)zp->data)[so / per] >> ((so % per) * bits)) & mask);
        } else {
            q = mp_kget_f(x->data, x->dtype, uo);
            if (zp) z = mp_kget_f(zp->data, zp->dtype, so);
        }
        mp_kset_f(y->data, y->dtype, e, (q - z) * mp_kget_f(sc->data, sc->dtype, so));
    }
    return MP_OK;
}

/* ------------------------------------------------------------------ */
/* the table                                                           */
/* ------------------------------------------------------------------ */

/* Parameter slots: weights (float weights are parameters anyway; the
 * quantized ones are named here). Buffers: quantization scales and zero
 * points, never parameters. mp_contrib_param_view gives the weight count
 * of MatMulNBits' B and GatherBlockQuantized's data once the descriptor
 * has a hook for it. */
const mp_op mp_ops_contrib[] = {
    /* matrix products */
    {CT_MS, "FusedMatMul", 1, fused_matmul_infer, matmul2_cost, CT_BIT(0) | CT_BIT(1), 0, NULL, ctk_fused_matmul},
    {CT_MS, "TransposeMatMul", 1, fused_matmul_infer, matmul2_cost, CT_BIT(0) | CT_BIT(1), 0, NULL, ctk_fused_matmul},
    {CT_MS, "GemmFastGelu", 1, gemm_fast_gelu_infer, gemm_fast_gelu_cost, CT_BIT(1) | CT_BIT(2), 0, NULL, ctk_gemm_fast_gelu},
    {CT_MS, "FusedGemm", 1, fused_gemm_infer, fused_gemm_cost, CT_BIT(1) | CT_BIT(2), 0, NULL, ctk_fused_gemm},
    {CT_MS, "FusedConv", 1, fused_conv_infer, fused_conv_cost, CT_BIT(1) | CT_BIT(2), 0, NULL, ctk_fused_conv},
    {CT_MS, "MatMulNBits", 1, matmul_nbits_infer, matmul_nbits_cost, CT_BIT(1) | CT_BIT(5),
     CT_BIT(2) | CT_BIT(3) | CT_BIT(4), mp_contrib_param_view, ctk_matmul_nbits},
    {CT_MS, "QGemm", 1, qgemm_infer, qgemm_cost, CT_BIT(3) | CT_BIT(6),
     CT_BIT(1) | CT_BIT(2) | CT_BIT(4) | CT_BIT(5) | CT_BIT(7) | CT_BIT(8), NULL, ctk_qgemm},
    {CT_MS, "DynamicQuantizeMatMul", 1, dyn_quant_matmul_infer, dyn_quant_matmul_cost,
     CT_BIT(1) | CT_BIT(4), CT_BIT(2) | CT_BIT(3), NULL, ctk_dyn_quant_matmul},
    {CT_MS, "MatMulIntegerToFloat", 1, matmul_int_to_float_infer, matmul_int_to_float_cost,
     CT_BIT(1) | CT_BIT(6), CT_BIT(2) | CT_BIT(3) | CT_BIT(4) | CT_BIT(5), NULL, ctk_matmul_int_to_float},
    {CT_MS, "MatMulInteger16", 1, matmul_int16_infer, matmul2_cost, CT_BIT(1), 0, NULL, ctk_matmul_integer16},
    /* attention */
    {CT_MS, "Attention", 1, attention_infer, attention_cost, CT_BIT(1) | CT_BIT(2), 0, NULL, ctk_attention,
     .train = ct_train_attention},
    {CT_MS, "QAttention", 1, qattention_infer, qattention_cost, CT_BIT(1) | CT_BIT(2),
     CT_BIT(3) | CT_BIT(4) | CT_BIT(6) | CT_BIT(7), NULL, ctk_qattention},
    {CT_MS, "MultiHeadAttention", 1, mha_infer, mha_cost, CT_BIT(3), 0, NULL, ctk_mha, .train = ct_train_attention},
    {CT_MS, "GroupQueryAttention", 1, gqa_infer, gqa_cost, 0, 0, NULL, ctk_gqa, .train = ct_train_attention},
    {CT_MS, "RotaryEmbedding", 1, rope_infer, rope_cost, 0, 0, NULL, ctk_rope},
    /* normalizations (onnxruntime registers LayerNormalization and
     * SimplifiedLayerNormalization in the default domain, opset 1) */
    {"", "LayerNormalization", 1, layernorm_infer, layernorm_cost, CT_BIT(1) | CT_BIT(2), 0, NULL, mp_klayernorm},
    {CT_MS, "LayerNormalization", 1, layernorm_infer, layernorm_cost, CT_BIT(1) | CT_BIT(2), 0, NULL, mp_klayernorm},
    {"", "SimplifiedLayerNormalization", 1, simplified_ln_infer, cost4, CT_BIT(1), 0, NULL, ctk_simplified_ln},
    {CT_MS, "SimplifiedLayerNormalization", 1, simplified_ln_infer, cost4, CT_BIT(1), 0, NULL, ctk_simplified_ln},
    {CT_MS, "SkipLayerNormalization", 1, skipln_infer, skipln_cost,
     CT_BIT(2) | CT_BIT(3) | CT_BIT(4), 0, NULL, ctk_skipln},
    {CT_MS, "SkipSimplifiedLayerNormalization", 1, skip_simplified_ln_infer,
     skip_simplified_ln_cost, CT_BIT(2) | CT_BIT(3), 0, NULL, ctk_skip_simplified_ln},
    {CT_MS, "EmbedLayerNormalization", 1, embed_ln_infer, embed_ln_cost,
     CT_BIT(2) | CT_BIT(3) | CT_BIT(4) | CT_BIT(5) | CT_BIT(6), 0, NULL, ctk_embed_ln},
    {CT_MS, "GroupNorm", 1, groupnorm_infer, groupnorm_cost, CT_BIT(1) | CT_BIT(2), 0, NULL, ctk_groupnorm},
    {CT_MS, "SkipGroupNorm", 1, skip_groupnorm_infer, groupnorm_cost,
     CT_BIT(1) | CT_BIT(2) | CT_BIT(4), 0, NULL, ctk_skip_groupnorm},
    /* activations and bias fusions */
    {CT_MS, "Gelu", 1, same_infer, cost1, 0, 0, NULL, ctk_gelu},
    {CT_MS, "QuickGelu", 1, same_infer, cost1, 0, 0, NULL, ctk_quick_gelu},
    {CT_MS, "BiasGelu", 1, bias_act_infer, cost2, CT_BIT(1), 0, NULL, ctk_gelu},
    {CT_MS, "FastGelu", 1, bias_act_infer, fast_gelu_cost, CT_BIT(1), 0, NULL, ctk_fast_gelu},
    {CT_MS, "BiasAdd", 1, bias_add_infer, cost2, CT_BIT(1), 0, NULL, ctk_bias_add},
    {CT_MS, "BiasSplitGelu", 1, bias_split_gelu_infer, cost2, CT_BIT(1), 0, NULL, ctk_bias_split_gelu},
    {CT_MS, "BiasSoftmax", 1, bias_softmax_infer, cost2, 0, 0, NULL, ctk_bias_softmax},
    {CT_MS, "Inverse", 1, inverse_infer, inverse_cost, 0, 0, NULL, ctk_inverse},
    {CT_MS, "Trilu", 1, trilu_infer, zero_cost, 0, CT_BIT(1), NULL, mp_ktrilu},
    /* quantization and quantized element-wise ops */
    {CT_MS, "QuantizeLinear", 1, quantize_infer, cost2, 0, CT_BIT(1) | CT_BIT(2), NULL, mp_kquantize},
    {CT_MS, "DequantizeLinear", 1, dequantize_infer, cost2, CT_BIT(0), CT_BIT(1) | CT_BIT(2), NULL, mp_kdequantize},
    {CT_MS, "QLinearAdd", 1, qlinear_binary_infer, out1_cost, 0,
     CT_BIT(1) | CT_BIT(2) | CT_BIT(4) | CT_BIT(5) | CT_BIT(6) | CT_BIT(7), NULL, ctk_qlinear_add},
    {CT_MS, "QLinearMul", 1, qlinear_binary_infer, out1_cost, 0,
     CT_BIT(1) | CT_BIT(2) | CT_BIT(4) | CT_BIT(5) | CT_BIT(6) | CT_BIT(7), NULL, ctk_qlinear_mul},
    {CT_MS, "MulInteger", 1, mul_integer_infer, out1_cost, 0, CT_BIT(1) | CT_BIT(3), NULL, ctk_mul_integer},
    {CT_MS, "QLinearWhere", 1, qlinear_where_infer, out1_cost, 0,
     CT_BIT(2) | CT_BIT(3) | CT_BIT(5) | CT_BIT(6) | CT_BIT(7) | CT_BIT(8), NULL, ctk_qlinear_where},
    {CT_MS, "QLinearSigmoid", 1, qlinear_unary_infer, cost1, 0,
     CT_BIT(1) | CT_BIT(2) | CT_BIT(3) | CT_BIT(4), NULL, ctk_qunary},
    {CT_MS, "QLinearLeakyRelu", 1, qlinear_unary_infer, cost1, 0,
     CT_BIT(1) | CT_BIT(2) | CT_BIT(3) | CT_BIT(4), NULL, ctk_qunary},
    {CT_MS, "QLinearSoftmax", 1, qlinear_unary_infer, cost1, 0,
     CT_BIT(1) | CT_BIT(2) | CT_BIT(3) | CT_BIT(4), NULL, ctk_qlinear_softmax},
    {CT_MS, "QLinearGlobalAveragePool", 1, qlinear_gap_infer, cost1, 0,
     CT_BIT(1) | CT_BIT(2) | CT_BIT(3) | CT_BIT(4), NULL, ctk_qlinear_gap},
    {CT_MS, "QLinearReduceMean", 1, qlinear_reduce_mean_infer, cost1, 0,
     CT_BIT(1) | CT_BIT(2) | CT_BIT(3) | CT_BIT(4), NULL, ctk_qlinear_reduce_mean},
    /* every input but the tensors of the triples (inputs 2, 5, 8, ...) */
    {CT_MS, "QLinearConcat", 1, qlinear_concat_infer, zero_cost, 0, 0xDB6DB6DBu, NULL, ctk_qlinear_concat},
    {CT_MS, "GatherBlockQuantized", 1, gather_bq_infer, out2_cost, CT_BIT(0),
     CT_BIT(2) | CT_BIT(3), mp_contrib_param_view, ctk_gather_bq},
};
const int mp_ops_contrib_count = (int)MP_ARRAY_LEN(mp_ops_contrib);
