/* Opsets 23 and 24 (src/ops/attention.c) and the dtypes of IR 9-12: shape
 * and cost rules against hand calculations (docs/COUNTING.md, "Opsets 23
 * and 24"). */
#include "tbuild.h"
#include "test.h"

/* GQA with a past: Q [2,8,16,64], K [2,2,32,64], V [2,2,32,32], a float
 * mask, past [2,2,8,*]. T = 8 + 32 = 40. MACs = 2*8*16*40*(64+32) =
 * 983,040; scores 2*8*16*40 = 10,240, each scaled, masked and softmaxed:
 * FLOPs = 2*983,040 + 3*10,240 = 1,996,800. */
static void t_attention_4d_gqa_past(void) {
    mp_model *m = tb_new(23);
    tb_input(m, "q", MP_DT_FLOAT, 4, TB_DIMS(2, 8, 16, 64));
    tb_input(m, "k", MP_DT_FLOAT, 4, TB_DIMS(2, 2, 32, 64));
    tb_input(m, "v", MP_DT_FLOAT, 4, TB_DIMS(2, 2, 32, 32));
    tb_input(m, "mask", MP_DT_FLOAT, 2, TB_DIMS(16, 40));
    tb_input(m, "pk", MP_DT_FLOAT, 4, TB_DIMS(2, 2, 8, 64));
    tb_input(m, "pv", MP_DT_FLOAT, 4, TB_DIMS(2, 2, 8, 32));
    int n = tb_node(m, "Attention", "q,k,v,mask,pk,pv", "y,present_k,present_v,qk");
    mp_profile *p = tb_prof(m);
    if (p) {
        T_EQ_STR(tb_shape(m, "y"), "2x8x16x32");
        T_EQ_STR(tb_shape(m, "present_k"), "2x2x40x64");
        T_EQ_STR(tb_shape(m, "present_v"), "2x2x40x32");
        T_EQ_STR(tb_shape(m, "qk"), "2x8x16x40");
        T_EQ_U64(tb_nodep(m, n)->cost.macs, 983040);
        T_EQ_U64(tb_nodep(m, n)->cost.flops, 1996800);
    }
    tb_done(m, p);
}

/* Rank 3 with heads given: Q [1,10,96] (4 heads of 24), K [1,12,96],
 * V [1,12,128] (4 heads of 32), causal, softcap 30. Y [1,10,128].
 * MACs = 4*10*12*(24+32) = 26,880; scores 480, each scaled, masked,
 * softcapped (3) and softmaxed: FLOPs = 53,760 + 6*480 = 56,640. */
static void t_attention_3d_causal_softcap(void) {
    mp_model *m = tb_new(23);
    tb_input(m, "q", MP_DT_FLOAT16, 3, TB_DIMS(1, 10, 96));
    tb_input(m, "k", MP_DT_FLOAT16, 3, TB_DIMS(1, 12, 96));
    tb_input(m, "v", MP_DT_FLOAT16, 3, TB_DIMS(1, 12, 128));
    int n = tb_node(m, "Attention", "q,k,v", "y");
    tb_attr_i(m, n, "q_num_heads", 4);
    tb_attr_i(m, n, "kv_num_heads", 4);
    tb_attr_i(m, n, "is_causal", 1);
    tb_attr_f(m, n, "softcap", 30.0);
    mp_profile *p = tb_prof(m);
    if (p) {
        T_EQ_STR(tb_shape(m, "y"), "1x10x128");
        T_EQ(tb_val(m, "y")->dtype, MP_DT_FLOAT16);
        T_EQ_U64(tb_nodep(m, n)->cost.macs, 26880);
        T_EQ_U64(tb_nodep(m, n)->cost.flops, 56640);
    }
    tb_done(m, p);
}

/* Symbolic batch and sequence pass through; the cost waits for values,
 * then follows them. */
static void t_attention_symbolic(void) {
    for (int given = 0; given < 2; given++) {
        mp_model *m = tb_new(24);
        int64_t b = tb_sym(m, "batch"), s = tb_sym(m, "seq");
        const int64_t *d = TB_DIMS(b, 4, s, 16);
        tb_input(m, "q", MP_DT_FLOAT, 4, d);
        tb_input(m, "k", MP_DT_FLOAT, 4, d);
        tb_input(m, "v", MP_DT_FLOAT, 4, d);
        int n = tb_node(m, "Attention", "q,k,v", "y");
        if (given) {
            T_OK(mp_model_set_dim(m, "batch", 3));
            T_OK(mp_model_set_dim(m, "seq", 5));
        }
        mp_profile *p = tb_prof(m);
        if (p && !given) {
            T_EQ_STR(tb_shape(m, "y"), "batchx4xseqx16");
            T_CHECK(tb_nodep(m, n)->cost.flags & MP_COST_UNKNOWN);
        }
        if (p && given) T_EQ_U64(tb_nodep(m, n)->cost.macs, 3ull * 4 * 5 * 5 * (16 + 16));
        tb_done(m, p);
    }
}

static mp_model *att_model(int rank, const int64_t *q, const int64_t *k, const int64_t *v,
                           int64_t heads) {
    mp_model *m = tb_new(23);
    tb_input(m, "q", MP_DT_FLOAT, rank, q);
    tb_input(m, "k", MP_DT_FLOAT, rank, k);
    tb_input(m, "v", MP_DT_FLOAT, rank, v);
    int n = tb_node(m, "Attention", "q,k,v", "y");
    if (heads > 0) {
        tb_attr_i(m, n, "q_num_heads", heads);
        tb_attr_i(m, n, "kv_num_heads", heads);
    }
    return m;
}

static void t_attention_errors(void) {
    /* rank 3 without head counts */
    tb_expect_shape_error(att_model(3, TB_DIMS(1, 10, 96), TB_DIMS(1, 10, 96),
                                    TB_DIMS(1, 10, 96), 0), "q_num_heads");
    /* 6 query heads over 4 key/value heads */
    tb_expect_shape_error(att_model(4, TB_DIMS(1, 6, 10, 8), TB_DIMS(1, 4, 10, 8),
                                    TB_DIMS(1, 4, 10, 8), 0), "heads");
    /* head sizes of Q and K differ */
    tb_expect_shape_error(att_model(4, TB_DIMS(1, 2, 10, 8), TB_DIMS(1, 2, 10, 16),
                                    TB_DIMS(1, 2, 10, 8), 0), "head size");
    /* a packed hidden size that is not a multiple of the heads */
    tb_expect_shape_error(att_model(3, TB_DIMS(1, 10, 100), TB_DIMS(1, 10, 96),
                                    TB_DIMS(1, 10, 96), 3), "multiple");
}

/* X [2,4,10,64] rotating 32 of each head's 64: 2*4*10 rows * 32 rotated
 * elements * 3 = 7,680 FLOPs. Rank 3 [2,10,256] with 4 heads: head 64, all
 * rotated: 2*10*4 * 64 * 3 = 15,360. */
static void t_rotary_embedding(void) {
    mp_model *m = tb_new(23);
    tb_input(m, "x", MP_DT_FLOAT, 4, TB_DIMS(2, 4, 10, 64));
    tb_input(m, "cos", MP_DT_FLOAT, 3, TB_DIMS(2, 10, 16));
    tb_input(m, "sin", MP_DT_FLOAT, 3, TB_DIMS(2, 10, 16));
    int n = tb_node(m, "RotaryEmbedding", "x,cos,sin", "y");
    tb_attr_i(m, n, "rotary_embedding_dim", 32);
    mp_profile *p = tb_prof(m);
    if (p) {
        T_EQ_STR(tb_shape(m, "y"), "2x4x10x64");
        T_EQ_U64(tb_nodep(m, n)->cost.flops, 7680);
        T_EQ_U64(tb_nodep(m, n)->cost.macs, 0);
    }
    tb_done(m, p);

    m = tb_new(23);
    tb_input(m, "x", MP_DT_BFLOAT16, 3, TB_DIMS(2, 10, 256));
    tb_input(m, "cos", MP_DT_BFLOAT16, 2, TB_DIMS(128, 32));
    tb_input(m, "sin", MP_DT_BFLOAT16, 2, TB_DIMS(128, 32));
    tb_input(m, "pos", MP_DT_INT64, 2, TB_DIMS(2, 10));
    n = tb_node(m, "RotaryEmbedding", "x,cos,sin,pos", "y");
    tb_attr_i(m, n, "num_heads", 4);
    p = tb_prof(m);
    if (p) {
        T_EQ_STR(tb_shape(m, "y"), "2x10x256");
        T_EQ_U64(tb_nodep(m, n)->cost.flops, 15360);
    }
    tb_done(m, p);

    /* an odd rotary dim, one larger than the head, a cache of the wrong
     * width (X [1,1,4,8]) */
    static const struct {
        int64_t rot, cache;
        const char *msg;
    } bad[] = {{5, 4, "odd"}, {16, 8, "exceeds"}, {0, 3, "cos_cache"}};
    for (size_t i = 0; i < MP_ARRAY_LEN(bad); i++) {
        m = tb_new(23);
        tb_input(m, "x", MP_DT_FLOAT, 4, TB_DIMS(1, 1, 4, 8));
        tb_input(m, "c", MP_DT_FLOAT, 3, TB_DIMS(1, 4, bad[i].cache));
        n = tb_node(m, "RotaryEmbedding", "x,c,c", "y");
        if (bad[i].rot) tb_attr_i(m, n, "rotary_embedding_dim", bad[i].rot);
        tb_expect_shape_error(m, bad[i].msg);
    }
}

/* X [2,16,512] normalized over the last axis with a learnable [512]
 * scale: 4 * 16,384 = 65,536 FLOPs, 512 params. */
static void t_rms_normalization(void) {
    mp_model *m = tb_new(23);
    tb_input(m, "x", MP_DT_FLOAT, 3, TB_DIMS(2, 16, 512));
    tb_weight(m, "g", MP_DT_FLOAT, 1, TB_DIMS(512));
    int n = tb_node(m, "RMSNormalization", "x,g", "y");
    mp_profile *p = tb_prof(m);
    if (p) {
        T_EQ_STR(tb_shape(m, "y"), "2x16x512");
        T_EQ_U64(tb_nodep(m, n)->cost.flops, 65536);
        T_EQ_U64(p->total.params, 512);
    }
    tb_done(m, p);
    m = tb_new(23);
    tb_input(m, "x", MP_DT_FLOAT, 2, TB_DIMS(2, 16));
    tb_weight(m, "g", MP_DT_FLOAT, 1, TB_DIMS(16));
    n = tb_node(m, "RMSNormalization", "x,g", "y");
    tb_attr_i(m, n, "axis", 2);
    tb_expect_shape_error(m, "axis");
}

/* A KV cache [2,4,64,16] written with one new step [2,4,1,16]: a copy. */
static void t_tensor_scatter_and_swish(void) {
    mp_model *m = tb_new(24);
    tb_input(m, "past", MP_DT_FLOAT16, 4, TB_DIMS(2, 4, 64, 16));
    tb_input(m, "upd", MP_DT_FLOAT16, 4, TB_DIMS(2, 4, 1, 16));
    tb_input(m, "idx", MP_DT_INT64, 1, TB_DIMS(2));
    int n = tb_node(m, "TensorScatter", "past,upd,idx", "present");
    tb_input(m, "x", MP_DT_FLOAT, 2, TB_DIMS(3, 5));
    int s = tb_node(m, "Swish", "x", "sx");
    mp_profile *p = tb_prof(m);
    if (p) {
        T_EQ_STR(tb_shape(m, "present"), "2x4x64x16");
        T_EQ_U64(tb_nodep(m, n)->cost.flops, 0);
        T_EQ_U64(tb_nodep(m, n)->cost.bytes_written, 2 * 4 * 64 * 16 * 2);
        T_EQ_U64(tb_nodep(m, s)->cost.flops, 15);
    }
    tb_done(m, p);
    m = tb_new(24);
    tb_input(m, "past", MP_DT_FLOAT, 4, TB_DIMS(2, 4, 64, 16));
    tb_input(m, "upd", MP_DT_FLOAT, 4, TB_DIMS(2, 4, 1, 8));
    tb_node(m, "TensorScatter", "past,upd", "present");
    tb_expect_shape_error(m, "update");
    /* before opset 24 neither exists */
    m = tb_new(23);
    tb_input(m, "x", MP_DT_FLOAT, 1, TB_DIMS(3));
    tb_node(m, "Swish", "x", "y");
    p = tb_prof(m);
    if (p) T_EQ(p->total.uncounted, 1);
    tb_done(m, p);
}

/* Parameters and weight memory by dtype for the narrow types: fp8 (four
 * variants and e8m0) one byte per element, int4/uint4/fp4 half a byte,
 * rounded up per tensor. */
static void t_narrow_dtypes(void) {
    mp_model *m = tb_new(24);
    tb_input(m, "x", MP_DT_FLOAT, 2, TB_DIMS(4, 16));
    struct {
        const char *name;
        int dt;
        int64_t n;
        uint64_t bytes;
    } w[] = {
        {"w_e4m3", MP_DT_FLOAT8E4M3FN, 16, 16 * 16},   {"w_e4m3uz", MP_DT_FLOAT8E4M3FNUZ, 16, 256},
        {"w_e5m2", MP_DT_FLOAT8E5M2, 16, 256},        {"w_e5m2uz", MP_DT_FLOAT8E5M2FNUZ, 16, 256},
        {"w_e8m0", MP_DT_FLOAT8E8M0, 16, 256},        {"w_fp4", MP_DT_FLOAT4E2M1, 16, 128},
    };
    char ins[64];
    for (size_t i = 0; i < MP_ARRAY_LEN(w); i++) {
        tb_weight(m, w[i].name, w[i].dt, 2, TB_DIMS(16, w[i].n));
        snprintf(ins, sizeof ins, "x,%s", w[i].name);
        char out[16];
        snprintf(out, sizeof out, "y%zu", i);
        tb_node(m, "MatMul", ins, out);
    }
    /* int4 and uint4 weights dequantized on the way: 7 x 3 = 21 each,
     * 11 bytes */
    tb_weight(m, "q4", MP_DT_INT4, 2, TB_DIMS(7, 3));
    tb_weight(m, "u4", MP_DT_UINT4, 2, TB_DIMS(7, 3));
    tb_const_f(m, "sc", MP_DT_FLOAT, 0, NULL, (const double[]){0.5});
    tb_node(m, "DequantizeLinear", "q4,sc", "dq4");
    tb_node(m, "DequantizeLinear", "u4,sc", "du4");
    mp_profile *p = tb_prof(m);
    if (p) {
        for (size_t i = 0; i < MP_ARRAY_LEN(w); i++) {
            T_EQ_U64(p->params_by_dtype[w[i].dt], 256);
            T_EQ_U64(p->param_bytes_by_dtype[w[i].dt], w[i].bytes);
        }
        T_EQ_U64(p->params_by_dtype[MP_DT_INT4], 21);
        T_EQ_U64(p->param_bytes_by_dtype[MP_DT_INT4], 11);
        T_EQ_U64(p->params_by_dtype[MP_DT_UINT4], 21);
        T_EQ_U64(p->param_bytes_by_dtype[MP_DT_UINT4], 11);
        T_EQ_U64(p->total.params, 6 * 256 + 42);
        T_EQ_U64(p->total.param_bytes, 5 * 256 + 128 + 22);
        T_EQ_STR(mp_dtype_name(MP_DT_FLOAT8E8M0), "fp8e8m0");
        T_EQ_STR(mp_dtype_name(MP_DT_FLOAT4E2M1), "fp4e2m1");
    }
    tb_done(m, p);
}

/* Cast (23, 24) to the new dtypes: fp4e2m1 (23), fp8e8m0 (24); activation
 * bytes follow: 10 fp4 elements are 5 bytes, 10 fp8 elements 10. */
static void t_cast_narrow(void) {
    mp_model *m = tb_new(24);
    tb_input(m, "x", MP_DT_FLOAT, 1, TB_DIMS(10));
    int a = tb_node(m, "Cast", "x", "f4");
    tb_attr_i(m, a, "to", MP_DT_FLOAT4E2M1);
    int b = tb_node(m, "Cast", "x", "e8");
    tb_attr_i(m, b, "to", MP_DT_FLOAT8E8M0);
    tb_output(m, "f4");
    tb_output(m, "e8");
    mp_profile *p = tb_prof(m);
    if (p) {
        T_EQ(tb_val(m, "f4")->dtype, MP_DT_FLOAT4E2M1);
        T_EQ(tb_val(m, "e8")->dtype, MP_DT_FLOAT8E8M0);
        T_EQ_U64(tb_nodep(m, a)->cost.bytes_written, 5);
        T_EQ_U64(tb_nodep(m, b)->cost.bytes_written, 10);
    }
    tb_done(m, p);
}

/* One rule for scaled dot-product attention's FLOPs (mp_sdpa_flops, docs/COUNTING.md
 * "Attention's backward"), by hand for bh = 2 x 3, Sq 5, Sk 7, D 8: each
 * product 2*6*5*7*8 = 3,360 FLOPs; forward two (6,720); backward the four
 * gradient products (13,440 = 2 x forward) and the scores again (3,360):
 * 16,800 = 2.5 x forward, as torch.utils.flop_counter's
 * sdpa_backward_flop_count. */
static void t_sdpa_flops(void) {
    mp_sdpa_cost f = mp_sdpa_flops(6, 5, 7, 8, 8);
    T_EQ((int64_t)f.fwd, 6720);
    T_EQ((int64_t)f.bwd, 16800);
    T_EQ((int64_t)f.recompute, 3360);
    T_EQ((int64_t)(f.bwd - f.recompute), 2 * 6720);
    /* Dv apart: dP and dV take Dv, dQ, dK and the scores Dq */
    f = mp_sdpa_flops(1, 4, 6, 16, 8);
    T_EQ((int64_t)f.fwd, 2 * 4 * 6 * (16 + 8));
    T_EQ((int64_t)f.bwd, 2 * 4 * 6 * (3 * 16 + 2 * 8));
}

/* Attention's train rule (autograd's SDPA): keeps Q, K, V, the output and
 * an fp32 log-sum-exp per query row and head (2*8*16 rows: 1,024 bytes),
 * never the scores; with a past, the present key and value instead of K
 * and V, and the mask. Backward FLOPs the executed ones of mp_sdpa_flops
 * with bh = 2*8, Sq 16, T 40, Dq 64, Dv 32: 2*16*16*40*(3*64 + 2*32) =
 * 5,242,880, of which the scores again 2*16*16*40*64 = 1,310,720. */
static void t_attention_train(void) {
    for (int past = 0; past < 2; past++) {
        mp_model *m = tb_new(23);
        tb_input(m, "q", MP_DT_FLOAT, 4, TB_DIMS(2, 8, 16, 64));
        tb_input(m, "k", MP_DT_FLOAT, 4, TB_DIMS(2, 2, past ? 32 : 40, 64));
        tb_input(m, "v", MP_DT_FLOAT, 4, TB_DIMS(2, 2, past ? 32 : 40, 32));
        tb_input(m, "mask", MP_DT_FLOAT, 2, TB_DIMS(16, 40));
        tb_input(m, "pk", MP_DT_FLOAT, 4, TB_DIMS(2, 2, 8, 64));
        tb_input(m, "pv", MP_DT_FLOAT, 4, TB_DIMS(2, 2, 8, 32));
        int n = tb_node(m, "Attention", past ? "q,k,v,mask,pk,pv" : "q,k,v", past ? "y,present_k,present_v" : "y");
        mp_profile *p = tb_prof(m);
        mp_bwd t;
        if (p && tb_train(m, n, 7u, &t)) {
            T_EQ(t.save_in, past ? 1u | 8u : 7u);
            T_EQ(t.save_out, past ? 7u : 1u);
            T_EQ_U64(t.extra_bytes, 4 * 2 * 8 * 16);
            T_EQ_U64(t.bwd_flops, UINT64_C(5242880));
            T_EQ_U64(t.recompute_flops, UINT64_C(1310720));
            T_EQ(t.amp, MP_AMP_LOWER);
            /* nothing needs a gradient: nothing kept, nothing done */
            tb_train(m, n, 0, &t);
            T_EQ(t.save_in | t.save_out, 0);
            T_EQ_U64(t.bwd_flops, 0);
        } else {
            mp_t_fail(__FILE__, __LINE__, "Attention has no train rule");
        }
        tb_done(m, p);
    }
}

MP_TESTS(ops_opset23){
    {"sdpa_flops", t_sdpa_flops},
    {"attention_train", t_attention_train},
    {"cast_narrow", t_cast_narrow},
    {"attention_4d_gqa_past", t_attention_4d_gqa_past},
    {"attention_3d_causal_softcap", t_attention_3d_causal_softcap},
    {"attention_symbolic", t_attention_symbolic},
    {"attention_errors", t_attention_errors},
    {"rotary_embedding", t_rotary_embedding},
    {"rms_normalization", t_rms_normalization},
    {"tensor_scatter_and_swish", t_tensor_scatter_and_swish},
    {"narrow_dtypes", t_narrow_dtypes},
};
MP_TESTS_END(ops_opset23)
