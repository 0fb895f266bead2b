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
 * fused quantized op are not counted (as QLinearMatMul in linalg.c).
 *
 * This file holds the rules and the descriptor table; the reference
 * kernels are in contrib_kernels.c. The file is over 1,500 lines for one job: the rules of about seventy com.microsoft
 * operators, each beside its rule; they share the attention and
 * quantization shape helpers at the top. */
#include "ops/kernel.h"
#include "ops/scalar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "ops/contrib_int.h"

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
        if ((st = mp_gemm_c_bcast(c, cc, od))) return st;
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
