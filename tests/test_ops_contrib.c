/* Tests of src/ops/contrib.c: onnxruntime's com.microsoft operators (and
 * the two normalizations it registers in the default domain). Every MAC
 * and FLOP figure is computed by hand in the comment next to it. */
#include "test.h"
#include "tbuild.h"

#define F MP_DT_FLOAT
#define H MP_DT_FLOAT16
#define I32 MP_DT_INT32
#define I64 MP_DT_INT64
#define U8 MP_DT_UINT8
#define I8 MP_DT_INT8
#define MS "com.microsoft"


/* A model importing the default domain at `opset` and com.microsoft 1. */
static mp_model *ms_new(int opset) {
    mp_model *m = tb_new(opset);
    tb_opset(m, MS, 1);
    return m;
}

static int ms_node(mp_model *m, const char *op, const char *ins, const char *outs) {
    return tb_node_d(m, MS, op, ins, outs);
}

static mp_totals totals(mp_profile *p) {
    mp_totals t;
    mp_profile_totals(p, &t);
    return t;
}

static const mp_cost *cost(mp_model *m, int k) { return &tb_nodep(m, k)->cost; }

static bool is_param(mp_model *m, const char *name) {
    mp_value *v = tb_val(m, name);
    return v && (v->flags & MP_VAL_PARAM);
}

/* ---- Attention ---- */

/* BERT-base self-attention on x [b, s, 768]; symbolic dims when sym. */
static mp_model *bert_attention(int64_t b, int64_t s, bool sym) {
    mp_model *m = ms_new(13);
    if (sym) {
        b = tb_sym(m, "batch");
        s = tb_sym(m, "seq");
    }
    tb_input(m, "x", F, 3, TB_DIMS(b, s, 768));
    tb_weight(m, "w", F, 2, TB_DIMS(768, 2304));
    tb_weight(m, "bias", F, 1, TB_DIMS(2304));
    int k = ms_node(m, "Attention", "x,w,bias", sym ? "y,present" : "y");
    tb_attr_i(m, k, "num_heads", 12);
    tb_output(m, "y");
    if (sym) tb_output(m, "present");
    return m;
}

static void t_attention_bert(void) {
    /* B=2, S=128, H=768, 12 heads (d = 64):
     * QKV projection 2*128*768*2304 = 452,984,832 MACs
     * scores 2*12*128*128*64 = 25,165,824; context the same
     * MACs = 503,316,480; E = 2*12*128*128 = 393,216 score elements
     * FLOPs = 2*MACs 1,006,632,960 + bias 2*128*2304 = 589,824 + scale and
     *   softmax 2*E = 786,432 -> 1,008,009,216
     * params 768*2304 + 2304 = 1,771,776 */
    mp_model *m = bert_attention(2, 128, false);
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x128x768");
    T_EQ(tb_val(m, "y")->dtype, F);
    T_EQ_U64(cost(m, 0)->macs, 503316480);
    T_EQ_U64(cost(m, 0)->flops, 1008009216);
    T_EQ_U64(totals(p).params, 1771776);
    T_EQ(totals(p).uncounted_nodes, 0);
    tb_done(m, p);
}

static void t_attention_symbolic(void) {
    /* x [batch, seq, 768]: y keeps batch x seq; present [2, batch, 12, seq,
     * 64]; the cost waits for values (then as t_attention_bert). */
    mp_model *m = bert_attention(0, 0, true);
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "batchxseqx768");
    T_EQ_STR(tb_shape(m, "present"), "2xbatchx12xseqx64");
    T_CHECK(cost(m, 0)->flags & MP_COST_UNKNOWN);
    mp_profile_free(p);
    T_OK(mp_model_set_dim(m, "batch", 2));
    T_OK(mp_model_set_dim(m, "seq", 128));
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "present"), "2x2x12x128x64");
    T_CHECK(!(cost(m, 0)->flags & MP_COST_UNKNOWN));
    T_EQ_U64(cost(m, 0)->macs, 503316480);
    tb_done(m, p);
}

static void t_attention_past_qkv_sizes(void) {
    /* input [1, 3, 48], weights [48, 160], qkv_hidden_sizes [64, 64, 32],
     * 4 heads: dk = 16, dv = 8; past [2, 1, 4, 10, 16] -> t = 10 + 3 = 13.
     * y [1, 3, 32]; present [2, 1, 4, 13, 16].
     * MACs = 1*3*48*160 = 23,040 + E*(16 + 8) with E = 1*4*3*13 = 156:
     *   3,744 -> 26,784; FLOPs = 53,568 + 2*156 = 53,880 (no bias) */
    mp_model *m = ms_new(13);
    tb_input(m, "x", F, 3, TB_DIMS(1, 3, 48));
    tb_input(m, "past", F, 5, TB_DIMS(2, 1, 4, 10, 16));
    tb_weight(m, "w", F, 2, TB_DIMS(48, 160));
    int k = ms_node(m, "Attention", "x,w,,,past", "y,present");
    tb_attr_i(m, k, "num_heads", 4);
    tb_attr_ints(m, k, "qkv_hidden_sizes", 3, TB_DIMS(64, 64, 32));
    tb_output(m, "y");
    tb_output(m, "present");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x3x32");
    T_EQ_STR(tb_shape(m, "present"), "2x1x4x13x16");
    T_EQ_U64(cost(m, k)->macs, 26784);
    T_EQ_U64(cost(m, k)->flops, 53880);
    tb_done(m, p);
}

static void attention_error(const char *name, int64_t heads, int64_t wcols, int xrank) {
    mp_model *m = ms_new(13);
    tb_input(m, "x", F, xrank, TB_DIMS(2, 128, 768));
    tb_weight(m, "w", F, 2, TB_DIMS(768, wcols));
    int k = ms_node(m, "Attention", "x,w", "y");
    if (heads) tb_attr_i(m, k, "num_heads", heads);
    tb_name(m, k, name);
    tb_output(m, "y");
    tb_expect_shape_error(m, name);
}

static void t_attention_errors(void) {
    attention_error("att_no_heads", 0, 2304, 3);       /* num_heads required */
    attention_error("att_not_thirds", 12, 2303, 3);    /* 2303 columns */
    attention_error("att_heads_divide", 7, 2304, 3);   /* 7 does not divide 768 */
    attention_error("att_rank", 12, 2304, 2);          /* input must be 3-D */

    mp_model *m = ms_new(13); /* weights have 512 rows for hidden 768 */
    tb_input(m, "x", F, 3, TB_DIMS(2, 128, 768));
    tb_weight(m, "w", F, 2, TB_DIMS(512, 2304));
    int k = ms_node(m, "Attention", "x,w", "y");
    tb_attr_i(m, k, "num_heads", 12);
    tb_name(m, k, "att_rows");
    tb_output(m, "y");
    tb_expect_shape_error(m, "att_rows");
}

/* ---- QAttention ---- */

static void t_qattention(void) {
    /* input uint8 [1, 8, 64], weight int8 [64, 192], bias [192], 4 heads
     * (d = 16) -> y fp32 [1, 8, 64].
     * MACs = 8*64*192 = 98,304 + E*(16+16), E = 4*8*8 = 256: 8,192 ->
     * 106,496; FLOPs = 212,992 + bias 8*192 = 1,536 + 2E = 512 -> 215,040
     * params: weight 12,288 (int8, a quantized weight slot) + bias 192 */
    mp_model *m = ms_new(13);
    tb_input(m, "x", U8, 3, TB_DIMS(1, 8, 64));
    tb_weight(m, "w", I8, 2, TB_DIMS(64, 192));
    tb_weight(m, "bias", F, 1, TB_DIMS(192));
    tb_weight(m, "xs", F, 0, NULL);
    tb_weight(m, "ws", F, 1, TB_DIMS(192));
    int k = ms_node(m, "QAttention", "x,w,bias,xs,ws", "y");
    tb_attr_i(m, k, "num_heads", 4);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x8x64");
    T_EQ(tb_val(m, "y")->dtype, F);
    T_EQ_U64(cost(m, k)->macs, 106496);
    T_EQ_U64(cost(m, k)->flops, 215040);
    T_EQ_U64(totals(p).params, 12480);
    T_CHECK(!is_param(m, "ws"));
    tb_done(m, p);
}

/* ---- MultiHeadAttention ---- */

static void t_mha_forms(void) {
    /* 4 heads throughout.
     * k1: q [2,16,64], k, v [2,32,64], bias [192]: dk = dv = 16, t = 32;
     *   E = 2*4*16*32 = 4,096; MACs = 4,096*32 = 131,072;
     *   FLOPs = 262,144 + 2E 8,192 + bias (2*16*64 = 2,048 on Q,
     *   2*32*4*32 = 8,192 on K and V) = 280,576
     * k2: the same with past_key/past_value [2,4,8,16]: t = 40;
     *   present [2,4,40,16]; qk [2,4,16,40]; MACs = 2*4*16*40*32 = 163,840
     * k3: packed QKV [2,16,4,3,16]: t = 16, MACs = 2*4*16*16*32 = 65,536
     * k4: q [1,1,64] with cached key/value [1,4,10,16]: MACs = 4*10*32 = 1,280 */
    mp_model *m = ms_new(13);
    tb_input(m, "q", F, 3, TB_DIMS(2, 16, 64));
    tb_input(m, "k", F, 3, TB_DIMS(2, 32, 64));
    tb_input(m, "v", F, 3, TB_DIMS(2, 32, 64));
    tb_input(m, "pk", F, 4, TB_DIMS(2, 4, 8, 16));
    tb_input(m, "pv", F, 4, TB_DIMS(2, 4, 8, 16));
    tb_input(m, "qkv", F, 5, TB_DIMS(2, 16, 4, 3, 16));
    tb_input(m, "q1", F, 3, TB_DIMS(1, 1, 64));
    tb_input(m, "ck", F, 4, TB_DIMS(1, 4, 10, 16));
    tb_input(m, "cv", F, 4, TB_DIMS(1, 4, 10, 16));
    tb_weight(m, "bias", F, 1, TB_DIMS(192));
    int k1 = ms_node(m, "MultiHeadAttention", "q,k,v,bias", "y1");
    int k2 = ms_node(m, "MultiHeadAttention", "q,k,v,,,,pk,pv", "y2,prk,prv,qk");
    int k3 = ms_node(m, "MultiHeadAttention", "qkv", "y3");
    int k4 = ms_node(m, "MultiHeadAttention", "q1,ck,cv", "y4");
    int ks[4] = {k1, k2, k3, k4};
    for (int i = 0; i < 4; i++) tb_attr_i(m, ks[i], "num_heads", 4);
    tb_output(m, "y1");
    tb_output(m, "y2");
    tb_output(m, "prk");
    tb_output(m, "prv");
    tb_output(m, "qk");
    tb_output(m, "y3");
    tb_output(m, "y4");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y1"), "2x16x64");
    T_EQ_U64(cost(m, k1)->macs, 131072);
    T_EQ_U64(cost(m, k1)->flops, 280576);
    T_EQ_STR(tb_shape(m, "prk"), "2x4x40x16");
    T_EQ_STR(tb_shape(m, "prv"), "2x4x40x16");
    T_EQ_STR(tb_shape(m, "qk"), "2x4x16x40");
    T_EQ_U64(cost(m, k2)->macs, 163840);
    T_EQ_STR(tb_shape(m, "y3"), "2x16x64");
    T_EQ_U64(cost(m, k3)->macs, 65536);
    T_EQ_STR(tb_shape(m, "y4"), "1x1x64");
    T_EQ_U64(cost(m, k4)->macs, 1280);
    tb_done(m, p);
}

static void mha_error(const char *name, const char *ins, int64_t heads, int64_t khidden) {
    mp_model *m = ms_new(13);
    tb_input(m, "q", F, 3, TB_DIMS(2, 16, 64));
    tb_input(m, "k", F, 3, TB_DIMS(2, 32, khidden));
    tb_input(m, "v", F, 3, TB_DIMS(2, 32, 64));
    int k = ms_node(m, "MultiHeadAttention", ins, "y");
    tb_attr_i(m, k, "num_heads", heads);
    tb_name(m, k, name);
    tb_output(m, "y");
    tb_expect_shape_error(m, name);
}

static void t_mha_errors(void) {
    mha_error("mha_no_key", "q", 4, 64);       /* a 3-D query needs key */
    mha_error("mha_heads", "q,k,v", 5, 64);    /* 5 does not divide 64 */
    mha_error("mha_key_width", "q,k,v", 4, 32); /* key hidden 32 vs 64 */
    mha_error("mha_no_value", "q,k", 4, 64);   /* a 3-D key needs value */
}

/* ---- GroupQueryAttention ---- */

static mp_model *gqa_model(bool packed, bool total_known, int *node) {
    mp_model *m = ms_new(13);
    if (packed) {
        tb_input(m, "q", F, 3, TB_DIMS(1, 4, 768)); /* (8 + 2*2) * 64 */
    } else {
        tb_input(m, "q", F, 3, TB_DIMS(1, 4, 512));
        tb_input(m, "k", F, 3, TB_DIMS(1, 4, 128));
        tb_input(m, "v", F, 3, TB_DIMS(1, 4, 128));
    }
    tb_input(m, "pk", F, 4, TB_DIMS(1, 2, 12, 64));
    tb_input(m, "pv", F, 4, TB_DIMS(1, 2, 12, 64));
    tb_input(m, "seqlens", I32, 1, TB_DIMS(1));
    if (total_known)
        tb_const_i(m, "total", I32, 0, NULL, TB_DIMS(16));
    else
        tb_input(m, "total", I32, 0, NULL);
    *node = ms_node(m, "GroupQueryAttention", packed ? "q,,,pk,pv,seqlens,total" : "q,k,v,pk,pv,seqlens,total",
                    "y,prk,prv");
    tb_attr_i(m, *node, "num_heads", 8);
    tb_attr_i(m, *node, "kv_num_heads", 2);
    tb_output(m, "y");
    tb_output(m, "prk");
    tb_output(m, "prv");
    return m;
}

static void t_gqa(void) {
    /* 8 query heads, 2 kv heads, h = 64; q [1,4,512], k, v [1,4,128];
     * past [1,2,12,64]; total_sequence_length = 16 -> t = 16,
     * present [1,2,max(12,16)=16,64]. kv heads are broadcast: E = 1*8*4*16
     * = 512; MACs = 512*(64+64) = 65,536; FLOPs = 131,072 + 2E = 132,096 */
    int k;
    mp_model *m = gqa_model(false, true, &k);
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x4x512");
    T_EQ_STR(tb_shape(m, "prk"), "1x2x16x64");
    T_EQ_STR(tb_shape(m, "prv"), "1x2x16x64");
    T_EQ_U64(cost(m, k)->macs, 65536);
    T_EQ_U64(cost(m, k)->flops, 132096);
    tb_done(m, p);

    /* packed QKV [1,4,768] = (8 + 2*2) * 64; total unknown: t = 12 + 4 = 16;
     * with do_rotary: + 3 * 1*4*(8+2)*64 = 7,680 FLOPs -> 139,776 */
    m = gqa_model(true, false, &k);
    tb_attr_i(m, k, "do_rotary", 1);
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x4x512");
    T_EQ_STR(tb_shape(m, "prk"), "1x2x16x64");
    T_EQ_U64(cost(m, k)->macs, 65536);
    T_EQ_U64(cost(m, k)->flops, 139776);
    tb_done(m, p);
}

static void t_gqa_errors(void) {
    int k;
    mp_model *m = ms_new(13);
    tb_input(m, "q", F, 3, TB_DIMS(1, 4, 512));
    tb_input(m, "k", F, 3, TB_DIMS(1, 4, 128));
    tb_input(m, "v", F, 3, TB_DIMS(1, 4, 128));
    k = ms_node(m, "GroupQueryAttention", "q,k,v", "y");
    tb_attr_i(m, k, "num_heads", 8);
    tb_attr_i(m, k, "kv_num_heads", 3); /* 3 does not divide 8 */
    tb_name(m, k, "gqa_kv_heads");
    tb_output(m, "y");
    tb_expect_shape_error(m, "gqa_kv_heads");

    m = ms_new(13);
    tb_input(m, "q", F, 3, TB_DIMS(1, 4, 512));
    tb_input(m, "k", F, 3, TB_DIMS(1, 4, 100)); /* not 2 * 64 */
    tb_input(m, "v", F, 3, TB_DIMS(1, 4, 100));
    k = ms_node(m, "GroupQueryAttention", "q,k,v", "y");
    tb_attr_i(m, k, "num_heads", 8);
    tb_attr_i(m, k, "kv_num_heads", 2);
    tb_name(m, k, "gqa_kv_width");
    tb_output(m, "y");
    tb_expect_shape_error(m, "gqa_kv_width");
}

/* ---- matrix products ---- */

static void t_fused_matmul(void) {
    /* k1: A [2,8,16] transA -> [2,16,8]; B [8,32] -> Y [2,16,32];
     *   MACs = 2*16*8*32 = 8,192; FLOPs 16,384
     * k2: A [2,16,8], B [32,8] transB -> Y [2,16,32]; 8,192 MACs
     * k3: A [4,2,16,8] transBatchA -> [2,16,4,8]; B [8,5] -> [2,16,4,5];
     *   MACs = 2*16*4*8*5 = 5,120 */
    mp_model *m = ms_new(13);
    tb_input(m, "a1", F, 3, TB_DIMS(2, 8, 16));
    tb_input(m, "a2", F, 3, TB_DIMS(2, 16, 8));
    tb_input(m, "a3", F, 4, TB_DIMS(4, 2, 16, 8));
    tb_weight(m, "b1", F, 2, TB_DIMS(8, 32));
    tb_weight(m, "b2", F, 2, TB_DIMS(32, 8));
    tb_weight(m, "b3", F, 2, TB_DIMS(8, 5));
    int k1 = ms_node(m, "FusedMatMul", "a1,b1", "y1");
    tb_attr_i(m, k1, "transA", 1);
    tb_attr_f(m, k1, "alpha", 0.125);
    int k2 = ms_node(m, "FusedMatMul", "a2,b2", "y2");
    tb_attr_i(m, k2, "transB", 1);
    int k3 = ms_node(m, "FusedMatMul", "a3,b3", "y3");
    tb_attr_i(m, k3, "transBatchA", 1);
    tb_output(m, "y1");
    tb_output(m, "y2");
    tb_output(m, "y3");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y1"), "2x16x32");
    T_EQ_U64(cost(m, k1)->macs, 8192);
    T_EQ_U64(cost(m, k1)->flops, 16384);
    T_EQ_STR(tb_shape(m, "y2"), "2x16x32");
    T_EQ_U64(cost(m, k2)->macs, 8192);
    T_EQ_STR(tb_shape(m, "y3"), "2x16x4x5");
    T_EQ_U64(cost(m, k3)->macs, 5120);
    tb_done(m, p);

    m = ms_new(13); /* K: 16 (A [2,8,16] untransposed) vs 8 */
    tb_input(m, "a", F, 3, TB_DIMS(2, 8, 16));
    tb_weight(m, "b", F, 2, TB_DIMS(8, 32));
    int k = ms_node(m, "FusedMatMul", "a,b", "y");
    tb_name(m, k, "fmm_k");
    tb_output(m, "y");
    tb_expect_shape_error(m, "fmm_k");
}

static void t_gemm_fusions(void) {
    /* GemmFastGelu X [4,64], W [64,128], bias [128] -> [4,128];
     *   MACs 32,768; FLOPs 65,536 + bias 512 + gelu 512 = 66,560
     * FusedGemm A [8,16], B [16,32], C [32], activation Relu -> [8,32];
     *   MACs 4,096; FLOPs 8,192 + C 256 + activation 256 = 8,704
     * FusedConv X [1,3,32,32], W [16,3,3,3], pads 1, B [16], Relu ->
     *   [1,16,32,32]; MACs = 432 * 1,024 = 442,368;
     *   FLOPs = 884,736 + bias 16,384 + activation 16,384 = 917,504 */
    mp_model *m = ms_new(13);
    tb_input(m, "x", F, 2, TB_DIMS(4, 64));
    tb_weight(m, "w", F, 2, TB_DIMS(64, 128));
    tb_weight(m, "wb", F, 1, TB_DIMS(128));
    tb_input(m, "a", F, 2, TB_DIMS(8, 16));
    tb_weight(m, "b", F, 2, TB_DIMS(16, 32));
    tb_weight(m, "c", F, 1, TB_DIMS(32));
    tb_input(m, "img", F, 4, TB_DIMS(1, 3, 32, 32));
    tb_weight(m, "cw", F, 4, TB_DIMS(16, 3, 3, 3));
    tb_weight(m, "cb", F, 1, TB_DIMS(16));
    int k1 = ms_node(m, "GemmFastGelu", "x,w,wb", "y1");
    int k2 = ms_node(m, "FusedGemm", "a,b,c", "y2");
    tb_attr_s(m, k2, "activation", "Relu");
    int k3 = ms_node(m, "FusedConv", "img,cw,cb", "y3");
    tb_attr_ints(m, k3, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_attr_s(m, k3, "activation", "Relu");
    tb_output(m, "y1");
    tb_output(m, "y2");
    tb_output(m, "y3");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y1"), "4x128");
    T_EQ_U64(cost(m, k1)->macs, 32768);
    T_EQ_U64(cost(m, k1)->flops, 66560);
    T_EQ_STR(tb_shape(m, "y2"), "8x32");
    T_EQ_U64(cost(m, k2)->macs, 4096);
    T_EQ_U64(cost(m, k2)->flops, 8704);
    T_EQ_STR(tb_shape(m, "y3"), "1x16x32x32");
    T_EQ_U64(cost(m, k3)->macs, 442368);
    T_EQ_U64(cost(m, k3)->flops, 917504);
    tb_done(m, p);
}

/* ---- MatMulNBits ---- */

/* Llama-7B's MLP up projection, 4-bit; A [b, s, a_k] (symbolic b, s when
 * sym). */
static mp_model *nbits_model(int64_t b, int64_t s, int64_t blob, int64_t a_k, bool sym) {
    mp_model *m = ms_new(13);
    if (sym) {
        b = tb_sym(m, "batch");
        s = tb_sym(m, "seq");
    }
    tb_input(m, "a", F, 3, TB_DIMS(b, s, a_k));
    tb_weight(m, "bq", U8, 3, TB_DIMS(11008, 128, blob));
    tb_weight(m, "scales", F, 2, TB_DIMS(11008, 128));
    tb_weight(m, "zp", U8, 2, TB_DIMS(11008, 64));
    int k = ms_node(m, "MatMulNBits", "a,bq,scales,zp", "y");
    tb_attr_i(m, k, "K", 4096);
    tb_attr_i(m, k, "N", 11008);
    tb_attr_i(m, k, "bits", 4);
    tb_attr_i(m, k, "block_size", 32);
    tb_output(m, "y");
    return m;
}

static void t_matmul_nbits(void) {
    /* A [1,7,4096], K=4096, N=11008, 4 bits, block 32: B [11008, 128, 16]
     * -> Y [1,7,11008]; MACs = 7*4096*11008 = 315,621,376; FLOPs 631,242,752.
     * B is a parameter (4-bit weights: 11008*4096 = 45,088,768 of uint4 by
     * the param view); scales and zero points are buffers. */
    mp_model *m = nbits_model(1, 7, 16, 4096, false);
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x7x11008");
    T_EQ_U64(cost(m, 0)->macs, 315621376);
    T_EQ_U64(cost(m, 0)->flops, 631242752);
    T_CHECK(is_param(m, "bq"));
    T_CHECK(!is_param(m, "scales"));
    T_CHECK(!is_param(m, "zp"));
    int64_t count = 0;
    int dt = 0;
    mp_param_view_fn view = tb_nodep(m, 0)->desc->param_view;
    T_CHECK(view && view(tb_nodep(m, 0), 1, tb_val(m, "bq")->init, &count, &dt));
    T_EQ(count, 45088768);
    T_EQ(dt, MP_DT_UINT4);
    T_CHECK(view && !view(tb_nodep(m, 0), 2, tb_val(m, "scales")->init, &count, &dt));
    /* the profile counts the 4-bit weights, not the packed bytes */
    T_EQ_U64(p->params_by_dtype[MP_DT_UINT4], 45088768);
    tb_done(m, p);
}

static void t_matmul_nbits_symbolic(void) {
    /* A [batch, seq, 4096] -> batch x seq x 11008; cost unknown until the
     * dims have values; batch=1, seq=7: as t_matmul_nbits */
    mp_model *m = nbits_model(0, 0, 16, 4096, true);
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "batchxseqx11008");
    T_CHECK(cost(m, 0)->flags & MP_COST_UNKNOWN);
    mp_profile_free(p);
    T_OK(mp_model_set_dim(m, "batch", 1));
    T_OK(mp_model_set_dim(m, "seq", 7));
    p = tb_prof(m);
    T_EQ_U64(cost(m, 0)->macs, 315621376);
    tb_done(m, p);
}

static void t_matmul_nbits_errors(void) {
    mp_model *m = nbits_model(1, 7, 32, 4096, false); /* blob 32 is 8 bits' */
    tb_name(m, 0, "nbits_blob");
    tb_expect_shape_error(m, "nbits_blob");

    m = nbits_model(1, 7, 16, 4095, false); /* A's K */
    tb_name(m, 0, "nbits_k");
    tb_expect_shape_error(m, "nbits_k");

    m = ms_new(13); /* block_size 24, no N */
    tb_input(m, "a", F, 2, TB_DIMS(1, 64));
    tb_weight(m, "bq", U8, 3, TB_DIMS(8, 2, 16));
    tb_weight(m, "s", F, 2, TB_DIMS(8, 2));
    int k = ms_node(m, "MatMulNBits", "a,bq,s", "y");
    tb_attr_i(m, k, "K", 64);
    tb_attr_i(m, k, "N", 8);
    tb_attr_i(m, k, "block_size", 24);
    tb_name(m, k, "nbits_block");
    tb_output(m, "y");
    tb_expect_shape_error(m, "nbits_block");

    m = ms_new(13);
    tb_input(m, "a", F, 2, TB_DIMS(1, 64));
    tb_weight(m, "bq", U8, 3, TB_DIMS(8, 2, 16));
    tb_weight(m, "s", F, 2, TB_DIMS(8, 2));
    k = ms_node(m, "MatMulNBits", "a,bq,s", "y");
    tb_attr_i(m, k, "K", 64);
    tb_attr_i(m, k, "block_size", 32);
    tb_name(m, k, "nbits_no_n");
    tb_output(m, "y");
    tb_expect_shape_error(m, "nbits_no_n");
}

/* ---- quantized matrix products ---- */

static void t_quant_matmuls(void) {
    /* QGemm A u8 [8,256], B i8 [512,256] transB, C i32 [512], y_zp u8 ->
     *   Y u8 [8,512]; MACs 8*256*512 = 1,048,576; FLOPs 2,097,152 + 4,096
     *   = 2,101,248
     * DynamicQuantizeMatMul A f32 [4,64], B i8 [64,32], bias [32] -> f32
     *   [4,32]; MACs 8,192; FLOPs 16,384 + 4*256 + 128 = 17,536
     * MatMulIntegerToFloat A u8 [4,64], B i8 [64,32], bias -> f32 [4,32];
     *   FLOPs 16,384 + 128 = 16,512
     * params: QGemm B 131,072 + C 512; DQMM B 2,048 + bias 32;
     *   MMITF B' 2,048 + bias' 32 -> 135,744 (scales and zero points,
     *   float or not, are buffers) */
    mp_model *m = ms_new(13);
    tb_input(m, "a", U8, 2, TB_DIMS(8, 256));
    tb_weight(m, "as", F, 0, NULL);
    tb_weight(m, "az", U8, 0, NULL);
    tb_weight(m, "b", I8, 2, TB_DIMS(512, 256));
    tb_weight(m, "bs", F, 1, TB_DIMS(512));
    tb_weight(m, "bz", I8, 1, TB_DIMS(512));
    tb_weight(m, "c", I32, 1, TB_DIMS(512));
    tb_weight(m, "ys", F, 0, NULL);
    tb_weight(m, "yz", U8, 0, NULL);
    int k1 = ms_node(m, "QGemm", "a,as,az,b,bs,bz,c,ys,yz", "y1");
    tb_attr_i(m, k1, "transB", 1);
    tb_input(m, "x", F, 2, TB_DIMS(4, 64));
    tb_weight(m, "w", I8, 2, TB_DIMS(64, 32));
    tb_weight(m, "ws", F, 1, TB_DIMS(32));
    tb_weight(m, "wz", I8, 1, TB_DIMS(32));
    tb_weight(m, "wb", F, 1, TB_DIMS(32));
    int k2 = ms_node(m, "DynamicQuantizeMatMul", "x,w,ws,wz,wb", "y2");
    tb_input(m, "xq", U8, 2, TB_DIMS(4, 64));
    tb_weight(m, "w2", I8, 2, TB_DIMS(64, 32));
    tb_weight(m, "wb2", F, 1, TB_DIMS(32));
    int k3 = ms_node(m, "MatMulIntegerToFloat", "xq,w2,as,ws,az,wz,wb2", "y3");
    tb_output(m, "y1");
    tb_output(m, "y2");
    tb_output(m, "y3");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y1"), "8x512");
    T_EQ(tb_val(m, "y1")->dtype, U8);
    T_EQ_U64(cost(m, k1)->macs, 1048576);
    T_EQ_U64(cost(m, k1)->flops, 2101248);
    T_EQ_STR(tb_shape(m, "y2"), "4x32");
    T_EQ(tb_val(m, "y2")->dtype, F);
    T_EQ_U64(cost(m, k2)->macs, 8192);
    T_EQ_U64(cost(m, k2)->flops, 17536);
    T_EQ_STR(tb_shape(m, "y3"), "4x32");
    T_EQ(tb_val(m, "y3")->dtype, F);
    T_EQ_U64(cost(m, k3)->flops, 16512);
    T_EQ_U64(totals(p).params, 135744);
    T_CHECK(!is_param(m, "bs"));
    T_CHECK(!is_param(m, "ws"));
    tb_done(m, p);
}

/* ---- normalizations ---- */

static void t_skip_layernorm(void) {
    /* SkipLayerNormalization [2,128,768] with beta and bias: (1 skip + 1
     *   bias + 5) * 196,608 = 1,376,256; mean, inv_std [2,128,1] fp32;
     *   input_skip_bias_sum [2,128,768]
     * without bias: 6 * 196,608 = 1,179,648
     * SkipSimplifiedLayerNormalization [10,64] (2-D), no bias: (1 + 4) *
     *   640 = 3,200; params gamma 768 + beta 768 + bias 768 + gamma2 64 */
    mp_model *m = ms_new(13);
    tb_input(m, "x", H, 3, TB_DIMS(2, 128, 768));
    tb_input(m, "skip", H, 3, TB_DIMS(2, 128, 768));
    tb_weight(m, "gamma", H, 1, TB_DIMS(768));
    tb_weight(m, "beta", H, 1, TB_DIMS(768));
    tb_weight(m, "bias", H, 1, TB_DIMS(768));
    tb_input(m, "t", F, 2, TB_DIMS(10, 64));
    tb_input(m, "ts", F, 2, TB_DIMS(10, 64));
    tb_weight(m, "g2", F, 1, TB_DIMS(64));
    int k1 = ms_node(m, "SkipLayerNormalization", "x,skip,gamma,beta,bias", "y1,mean,istd,sum");
    int k2 = ms_node(m, "SkipLayerNormalization", "x,skip,gamma,beta", "y2");
    int k3 = ms_node(m, "SkipSimplifiedLayerNormalization", "t,ts,g2", "y3");
    tb_output(m, "y1");
    tb_output(m, "mean");
    tb_output(m, "istd");
    tb_output(m, "sum");
    tb_output(m, "y2");
    tb_output(m, "y3");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y1"), "2x128x768");
    T_EQ(tb_val(m, "y1")->dtype, H);
    T_EQ_STR(tb_shape(m, "mean"), "2x128x1");
    T_EQ(tb_val(m, "mean")->dtype, F);
    T_EQ_STR(tb_shape(m, "istd"), "2x128x1");
    T_EQ_STR(tb_shape(m, "sum"), "2x128x768");
    T_EQ_U64(cost(m, k1)->flops, 1376256);
    T_EQ_U64(cost(m, k2)->flops, 1179648);
    T_EQ_STR(tb_shape(m, "y3"), "10x64");
    T_EQ_U64(cost(m, k3)->flops, 3200);
    T_EQ_U64(cost(m, k3)->macs, 0);
    T_EQ_U64(totals(p).params, 768 * 3 + 64);
    tb_done(m, p);

    m = ms_new(13); /* gamma [512] for hidden 768 */
    tb_input(m, "x", F, 3, TB_DIMS(2, 128, 768));
    tb_input(m, "skip", F, 3, TB_DIMS(2, 128, 768));
    tb_weight(m, "gamma", F, 1, TB_DIMS(512));
    int k = ms_node(m, "SkipLayerNormalization", "x,skip,gamma", "y");
    tb_name(m, k, "skipln_gamma");
    tb_output(m, "y");
    tb_expect_shape_error(m, "skipln_gamma");

    m = ms_new(13); /* skip [2,64,768] against [2,128,768] */
    tb_input(m, "x", F, 3, TB_DIMS(2, 128, 768));
    tb_input(m, "skip", F, 3, TB_DIMS(2, 64, 768));
    tb_weight(m, "gamma", F, 1, TB_DIMS(768));
    k = ms_node(m, "SkipLayerNormalization", "x,skip,gamma", "y");
    tb_name(m, k, "skipln_skip");
    tb_output(m, "y");
    tb_expect_shape_error(m, "skipln_skip");
}

static void t_layernorms(void) {
    /* SimplifiedLayerNormalization (default domain, as onnxruntime exports
     *   it) [4,10,64], scale [64]: 4 * 2,560 = 10,240 FLOPs; inv_std_var
     *   [4,10,1]; the com.microsoft spelling: the same
     * LayerNormalization in the default domain at opset 13 (onnxruntime's
     *   contrib registration): [2,10,768] -> 5 * 15,360 = 76,800; Mean
     *   [2,10,1] */
    mp_model *m = ms_new(13);
    tb_input(m, "x", F, 3, TB_DIMS(4, 10, 64));
    tb_weight(m, "s", F, 1, TB_DIMS(64));
    tb_input(m, "z", F, 3, TB_DIMS(2, 10, 768));
    tb_weight(m, "g", F, 1, TB_DIMS(768));
    tb_weight(m, "b", F, 1, TB_DIMS(768));
    int k1 = tb_node(m, "SimplifiedLayerNormalization", "x,s", "y1,inv");
    int k2 = ms_node(m, "SimplifiedLayerNormalization", "x,s", "y2");
    int k3 = tb_node(m, "LayerNormalization", "z,g,b", "y3,mean,istd");
    tb_output(m, "y1");
    tb_output(m, "inv");
    tb_output(m, "y2");
    tb_output(m, "y3");
    tb_output(m, "mean");
    tb_output(m, "istd");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y1"), "4x10x64");
    T_EQ_STR(tb_shape(m, "inv"), "4x10x1");
    T_EQ_U64(cost(m, k1)->flops, 10240);
    T_EQ_U64(cost(m, k2)->flops, 10240);
    T_EQ_STR(tb_shape(m, "y3"), "2x10x768");
    T_EQ_STR(tb_shape(m, "mean"), "2x10x1");
    T_EQ_U64(cost(m, k3)->flops, 76800);
    T_EQ(totals(p).uncounted_nodes, 0);
    tb_done(m, p);

    /* the registry: opset 13 finds onnxruntime's LayerNormalization, 17
     * the standard one (nn.c) */
    T_CHECK(mp_op_find("", "LayerNormalization", 13) != NULL);
    T_CHECK(mp_op_find("", "LayerNormalization", 17) != mp_op_find("", "LayerNormalization", 13));
    T_CHECK(mp_op_find(MS, "Attention", 1) != NULL);

    m = ms_new(13); /* scale [32] for 64 */
    tb_input(m, "x", F, 3, TB_DIMS(4, 10, 64));
    tb_weight(m, "s", F, 1, TB_DIMS(32));
    int k = tb_node(m, "SimplifiedLayerNormalization", "x,s", "y");
    tb_name(m, k, "sln_scale");
    tb_output(m, "y");
    tb_expect_shape_error(m, "sln_scale");
}

static void t_embed_layernorm(void) {
    /* input_ids [2,16], segment_ids [2,16], word [1000,64], position
     * [512,64], segment [2,64], gamma, beta [64] -> [2,16,64], mask_index
     * [2] int32. FLOPs = (2 adds + 5) * 2,048 = 14,336.
     * params 64,000 + 32,768 + 128 + 64 + 64 = 97,024 */
    mp_model *m = ms_new(13);
    tb_input(m, "ids", I32, 2, TB_DIMS(2, 16));
    tb_input(m, "seg", I32, 2, TB_DIMS(2, 16));
    tb_input(m, "mask", I32, 2, TB_DIMS(2, 16));
    tb_weight(m, "we", F, 2, TB_DIMS(1000, 64));
    tb_weight(m, "pe", F, 2, TB_DIMS(512, 64));
    tb_weight(m, "se", F, 2, TB_DIMS(2, 64));
    tb_weight(m, "g", F, 1, TB_DIMS(64));
    tb_weight(m, "b", F, 1, TB_DIMS(64));
    int k = ms_node(m, "EmbedLayerNormalization", "ids,seg,we,pe,se,g,b,mask", "y,mi");
    tb_output(m, "y");
    tb_output(m, "mi");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x16x64");
    T_EQ_STR(tb_shape(m, "mi"), "2");
    T_EQ(tb_val(m, "mi")->dtype, I32);
    T_EQ_U64(cost(m, k)->flops, 14336);
    T_EQ_U64(totals(p).params, 97024);
    tb_done(m, p);

    m = ms_new(13); /* position embedding 32 wide */
    tb_input(m, "ids", I32, 2, TB_DIMS(2, 16));
    tb_weight(m, "we", F, 2, TB_DIMS(1000, 64));
    tb_weight(m, "pe", F, 2, TB_DIMS(512, 32));
    tb_weight(m, "g", F, 1, TB_DIMS(64));
    tb_weight(m, "b", F, 1, TB_DIMS(64));
    k = ms_node(m, "EmbedLayerNormalization", "ids,,we,pe,,g,b", "y");
    tb_name(m, k, "eln_width");
    tb_output(m, "y");
    tb_expect_shape_error(m, "eln_width");
}

static void t_group_norms(void) {
    /* GroupNorm X [2,8,8,32] (channels_last), 8 groups, SiLU: (5 + 1) *
     *   4,096 = 24,576
     * SkipGroupNorm with bias, no activation: (1 + 1 + 5) * 4,096 = 28,672 */
    mp_model *m = ms_new(13);
    tb_input(m, "x", F, 4, TB_DIMS(2, 8, 8, 32));
    tb_input(m, "skip", F, 4, TB_DIMS(2, 8, 8, 32));
    tb_weight(m, "g", F, 1, TB_DIMS(32));
    tb_weight(m, "b", F, 1, TB_DIMS(32));
    tb_weight(m, "bias", F, 1, TB_DIMS(32));
    int k1 = ms_node(m, "GroupNorm", "x,g,b", "y1");
    tb_attr_i(m, k1, "groups", 8);
    tb_attr_i(m, k1, "activation", 1);
    int k2 = ms_node(m, "SkipGroupNorm", "x,g,b,skip,bias", "y2,s2");
    tb_attr_i(m, k2, "groups", 8);
    tb_attr_i(m, k2, "activation", 0);
    tb_output(m, "y1");
    tb_output(m, "y2");
    tb_output(m, "s2");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y1"), "2x8x8x32");
    T_EQ_STR(tb_shape(m, "s2"), "2x8x8x32");
    T_EQ_U64(cost(m, k1)->flops, 24576);
    T_EQ_U64(cost(m, k2)->flops, 28672);
    tb_done(m, p);

    m = ms_new(13); /* 32 channels, 6 groups */
    tb_input(m, "x", F, 4, TB_DIMS(2, 8, 8, 32));
    tb_weight(m, "g", F, 1, TB_DIMS(32));
    tb_weight(m, "b", F, 1, TB_DIMS(32));
    int k = ms_node(m, "GroupNorm", "x,g,b", "y");
    tb_attr_i(m, k, "groups", 6);
    tb_name(m, k, "gn_groups");
    tb_output(m, "y");
    tb_expect_shape_error(m, "gn_groups");
}

/* ---- activations ---- */

static void t_activations(void) {
    /* on [2,8,32] (512 elements):
     * BiasGelu 2 * 512 = 1,024; FastGelu with bias 1,024, without 512;
     * Gelu 512; QuickGelu 512; BiasAdd (bias, skip) 1,024;
     * BiasSoftmax [2,4,8,8] + [2,1,1,8]: 2 * 512 = 1,024
     * BiasSplitGelu [2,64,320] + [320] -> [2,64,160]; FLOPs = 40,960 (add)
     *   + 2 * 20,480 (gelu, mul) = 81,920 */
    mp_model *m = ms_new(13);
    tb_input(m, "x", F, 3, TB_DIMS(2, 8, 32));
    tb_input(m, "skip", F, 3, TB_DIMS(2, 8, 32));
    tb_weight(m, "bias", F, 1, TB_DIMS(32));
    tb_input(m, "sc", F, 4, TB_DIMS(2, 4, 8, 8));
    tb_input(m, "mask", F, 4, TB_DIMS(2, 1, 1, 8));
    tb_input(m, "u", F, 3, TB_DIMS(2, 64, 320));
    tb_weight(m, "ub", F, 1, TB_DIMS(320));
    int k[8];
    k[0] = ms_node(m, "BiasGelu", "x,bias", "y0");
    k[1] = ms_node(m, "FastGelu", "x,bias", "y1");
    k[2] = ms_node(m, "FastGelu", "x", "y2");
    k[3] = ms_node(m, "Gelu", "x", "y3");
    k[4] = ms_node(m, "QuickGelu", "x", "y4");
    k[5] = ms_node(m, "BiasAdd", "x,bias,skip", "y5");
    k[6] = ms_node(m, "BiasSoftmax", "sc,mask", "y6");
    k[7] = ms_node(m, "BiasSplitGelu", "u,ub", "y7");
    tb_attr_f(m, k[4], "alpha", 1.702);
    tb_attr_i(m, k[6], "axis", -1);
    tb_attr_i(m, k[6], "is_inner_broadcast", 0);
    const char *outs[8] = {"y0", "y1", "y2", "y3", "y4", "y5", "y6", "y7"};
    for (int i = 0; i < 8; i++) tb_output(m, outs[i]);
    mp_profile *p = tb_prof(m);
    uint64_t want[8] = {1024, 1024, 512, 512, 512, 1024, 1024, 81920};
    for (int i = 0; i < 5; i++) T_EQ_STR(tb_shape(m, outs[i]), "2x8x32");
    T_EQ_STR(tb_shape(m, "y6"), "2x4x8x8");
    T_EQ_STR(tb_shape(m, "y7"), "2x64x160");
    for (int i = 0; i < 8; i++) {
        T_EQ_U64(cost(m, k[i])->flops, want[i]);
        T_EQ_U64(cost(m, k[i])->macs, 0);
    }
    tb_done(m, p);

    m = ms_new(13); /* bias [31] */
    tb_input(m, "x", F, 3, TB_DIMS(2, 8, 32));
    tb_weight(m, "bias", F, 1, TB_DIMS(31));
    int kk = ms_node(m, "BiasGelu", "x,bias", "y");
    tb_name(m, kk, "biasgelu_len");
    tb_output(m, "y");
    tb_expect_shape_error(m, "biasgelu_len");

    m = ms_new(13); /* odd hidden size */
    tb_input(m, "x", F, 3, TB_DIMS(2, 8, 33));
    tb_weight(m, "bias", F, 1, TB_DIMS(33));
    kk = ms_node(m, "BiasSplitGelu", "x,bias", "y");
    tb_name(m, kk, "bsg_odd");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bsg_odd");
}

static void t_rotary_embedding(void) {
    /* k1: [2,16,512], 8 heads (h = 64), rotary_embedding_dim 32, caches
     *   [2048,16]: 16,384 / 64 = 256 rows x 32 rotated x 3 = 24,576 FLOPs
     * k2: [2,8,16,64] (4-D), caches [2048,32]: all rotated, 3 * 16,384 =
     *   49,152 */
    mp_model *m = ms_new(13);
    tb_input(m, "x", F, 3, TB_DIMS(2, 16, 512));
    tb_input(m, "x4", F, 4, TB_DIMS(2, 8, 16, 64));
    tb_input(m, "pos", I64, 2, TB_DIMS(2, 16));
    tb_weight(m, "cos", F, 2, TB_DIMS(2048, 16));
    tb_weight(m, "sin", F, 2, TB_DIMS(2048, 16));
    tb_weight(m, "cos2", F, 2, TB_DIMS(2048, 32));
    tb_weight(m, "sin2", F, 2, TB_DIMS(2048, 32));
    int k1 = ms_node(m, "RotaryEmbedding", "x,pos,cos,sin", "y1");
    tb_attr_i(m, k1, "num_heads", 8);
    tb_attr_i(m, k1, "rotary_embedding_dim", 32);
    int k2 = ms_node(m, "RotaryEmbedding", "x4,pos,cos2,sin2", "y2");
    tb_output(m, "y1");
    tb_output(m, "y2");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y1"), "2x16x512");
    T_EQ_STR(tb_shape(m, "y2"), "2x8x16x64");
    T_EQ_U64(cost(m, k1)->flops, 24576);
    T_EQ_U64(cost(m, k2)->flops, 49152);
    tb_done(m, p);

    m = ms_new(13); /* caches 16 wide for a full 64-wide rotation */
    tb_input(m, "x4", F, 4, TB_DIMS(2, 8, 16, 64));
    tb_input(m, "pos", I64, 2, TB_DIMS(2, 16));
    tb_weight(m, "cos", F, 2, TB_DIMS(2048, 16));
    tb_weight(m, "sin", F, 2, TB_DIMS(2048, 16));
    int k = ms_node(m, "RotaryEmbedding", "x4,pos,cos,sin", "y");
    tb_name(m, k, "rope_cache");
    tb_output(m, "y");
    tb_expect_shape_error(m, "rope_cache");
}

static void t_inverse_trilu(void) {
    /* Inverse [3,4,4]: 2 * 4^3 * 3 = 384 FLOPs; Trilu: 0 */
    mp_model *m = ms_new(13);
    tb_input(m, "x", F, 3, TB_DIMS(3, 4, 4));
    int k1 = ms_node(m, "Inverse", "x", "y1");
    int k2 = ms_node(m, "Trilu", "x", "y2");
    tb_output(m, "y1");
    tb_output(m, "y2");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y1"), "3x4x4");
    T_EQ_U64(cost(m, k1)->flops, 384);
    T_EQ_STR(tb_shape(m, "y2"), "3x4x4");
    T_EQ_U64(cost(m, k2)->flops, 0);
    T_CHECK(!(cost(m, k2)->flags & MP_COST_UNCOUNTED));
    tb_done(m, p);

    m = ms_new(13);
    tb_input(m, "x", F, 3, TB_DIMS(3, 4, 5));
    int k = ms_node(m, "Inverse", "x", "y");
    tb_name(m, k, "inv_square");
    tb_output(m, "y");
    tb_expect_shape_error(m, "inv_square");
}

/* ---- quantized element-wise ops ---- */

static void t_qlinear_elementwise(void) {
    /* QLinearAdd/Mul [1,8,4,4] with [1,8,1,1]: 128 FLOPs each, uint8
     * QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax [1,8,4,4]: 128
     * QLinearGlobalAveragePool [1,64,7,7] -> [1,64,1,1]: 3,136; with
     *   channels_last [1,7,7,64] -> [1,1,1,64]: 3,136
     * QLinearConcat [1,8,4,4] ++ [1,16,4,4] on axis 1 -> [1,24,4,4]: 0
     * QLinearReduceMean axes [2,3] keepdims -> [1,8,1,1]: 128
     * QLinearWhere (cond [4,4], x, y [1,8,4,4]) -> [1,8,4,4]: 128
     * MulInteger -> int32 [1,8,4,4]: 128
     * Quantize/DequantizeLinear (com.microsoft) [1,8,4,4]: 2 * 128 = 256 */
    mp_model *m = ms_new(13);
    tb_input(m, "a", U8, 4, TB_DIMS(1, 8, 4, 4));
    tb_input(m, "b", U8, 4, TB_DIMS(1, 8, 1, 1));
    tb_input(m, "c", U8, 4, TB_DIMS(1, 16, 4, 4));
    tb_input(m, "g", U8, 4, TB_DIMS(1, 64, 7, 7));
    tb_input(m, "gl", U8, 4, TB_DIMS(1, 7, 7, 64));
    tb_input(m, "cond", MP_DT_BOOL, 2, TB_DIMS(4, 4));
    tb_input(m, "f", F, 4, TB_DIMS(1, 8, 4, 4));
    tb_weight(m, "s", F, 0, NULL);
    tb_weight(m, "z", U8, 0, NULL);
    int k[12];
    k[0] = ms_node(m, "QLinearAdd", "a,s,z,b,s,z,s,z", "y0");
    k[1] = ms_node(m, "QLinearMul", "a,s,z,b,s,z,s,z", "y1");
    k[2] = ms_node(m, "QLinearSigmoid", "a,s,z,s,z", "y2");
    k[3] = ms_node(m, "QLinearLeakyRelu", "a,s,z,s,z", "y3");
    k[4] = ms_node(m, "QLinearSoftmax", "a,s,z,s,z", "y4");
    k[5] = ms_node(m, "QLinearGlobalAveragePool", "g,s,z,s,z", "y5");
    k[6] = ms_node(m, "QLinearGlobalAveragePool", "gl,s,z,s,z", "y6");
    k[7] = ms_node(m, "QLinearConcat", "s,z,a,s,z,c,s,z", "y7");
    k[8] = ms_node(m, "QLinearReduceMean", "a,s,z,s,z", "y8");
    k[9] = ms_node(m, "QLinearWhere", "cond,a,s,z,a,s,z,s,z", "y9");
    k[10] = ms_node(m, "MulInteger", "a,z,a,z", "y10");
    k[11] = ms_node(m, "QuantizeLinear", "f,s,z", "q");
    tb_attr_i(m, k[4], "opset", 13);
    tb_attr_i(m, k[6], "channels_last", 1);
    tb_attr_i(m, k[7], "axis", 1);
    tb_attr_ints(m, k[8], "axes", 2, TB_DIMS(2, 3));
    tb_attr_i(m, k[8], "keepdims", 1);
    int kd = ms_node(m, "DequantizeLinear", "q,s,z", "dq");
    const char *outs[11] = {"y0", "y1", "y2", "y3", "y4", "y5", "y6", "y7", "y8", "y9", "y10"};
    for (int i = 0; i < 11; i++) tb_output(m, outs[i]);
    tb_output(m, "dq");
    mp_profile *p = tb_prof(m);
    const char *shapes[11] = {"1x8x4x4", "1x8x4x4", "1x8x4x4", "1x8x4x4", "1x8x4x4", "1x64x1x1",
                              "1x1x1x64", "1x24x4x4", "1x8x1x1", "1x8x4x4", "1x8x4x4"};
    uint64_t flops[12] = {128, 128, 128, 128, 128, 3136, 3136, 0, 128, 128, 128, 256};
    for (int i = 0; i < 11; i++) T_EQ_STR(tb_shape(m, outs[i]), shapes[i]);
    for (int i = 0; i < 12; i++) T_EQ_U64(cost(m, k[i])->flops, flops[i]);
    T_EQ(tb_val(m, "y0")->dtype, U8);
    T_EQ(tb_val(m, "y7")->dtype, U8);
    T_EQ(tb_val(m, "y10")->dtype, I32);
    T_EQ(tb_val(m, "q")->dtype, U8);
    T_EQ(tb_val(m, "dq")->dtype, F);
    T_EQ_U64(cost(m, kd)->flops, 256);
    T_EQ(totals(p).uncounted_nodes, 0);
    tb_done(m, p);

    m = ms_new(13); /* broadcast 8 vs 3 */
    tb_input(m, "a", U8, 4, TB_DIMS(1, 8, 4, 4));
    tb_input(m, "b", U8, 4, TB_DIMS(1, 3, 1, 1));
    tb_weight(m, "s", F, 0, NULL);
    int kk = ms_node(m, "QLinearAdd", "a,s,,b,s,,s", "y");
    tb_name(m, kk, "qadd_bcast");
    tb_output(m, "y");
    tb_expect_shape_error(m, "qadd_bcast");

    m = ms_new(13); /* a triple cut short */
    tb_input(m, "a", U8, 4, TB_DIMS(1, 8, 4, 4));
    tb_weight(m, "s", F, 0, NULL);
    tb_weight(m, "z", U8, 0, NULL);
    kk = ms_node(m, "QLinearConcat", "s,z,a,s", "y");
    tb_attr_i(m, kk, "axis", 1);
    tb_name(m, kk, "qcat_triples");
    tb_output(m, "y");
    tb_expect_shape_error(m, "qcat_triples");
}

static void t_gather_block_quantized(void) {
    /* data uint8 [1000,32] (4 bits: 64 values per row), indices [2,5],
     * scales fp16 [1000,2] -> [2,5,64] fp16; FLOPs = 2 * 640 = 1,280;
     * the table holds 64,000 uint4 weights */
    mp_model *m = ms_new(13);
    tb_weight(m, "data", U8, 2, TB_DIMS(1000, 32));
    tb_input(m, "ids", I64, 2, TB_DIMS(2, 5));
    tb_weight(m, "sc", H, 2, TB_DIMS(1000, 2));
    int k = ms_node(m, "GatherBlockQuantized", "data,ids,sc", "y");
    tb_attr_i(m, k, "block_size", 32);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x5x64");
    T_EQ(tb_val(m, "y")->dtype, H);
    T_EQ_U64(cost(m, k)->flops, 1280);
    T_CHECK(is_param(m, "data"));
    T_CHECK(!is_param(m, "sc"));
    int64_t count = 0;
    int dt = 0;
    mp_param_view_fn view = tb_nodep(m, k)->desc->param_view;
    T_CHECK(view && view(tb_nodep(m, k), 0, tb_val(m, "data")->init, &count, &dt));
    T_EQ(count, 64000);
    T_EQ(dt, MP_DT_UINT4);
    tb_done(m, p);
}

/* ---- malformed input never crashes ---- */

static const char *const all_ops[] = {
    "FusedMatMul", "TransposeMatMul", "GemmFastGelu", "FusedGemm", "FusedConv", "MatMulNBits",
    "QGemm", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "MatMulInteger16", "Attention",
    "QAttention", "MultiHeadAttention", "GroupQueryAttention", "RotaryEmbedding",
    "LayerNormalization", "SimplifiedLayerNormalization", "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization", "EmbedLayerNormalization", "GroupNorm", "SkipGroupNorm",
    "Gelu", "QuickGelu", "BiasGelu", "FastGelu", "BiasAdd", "BiasSplitGelu", "BiasSoftmax",
    "Inverse", "Trilu", "QuantizeLinear", "DequantizeLinear", "QLinearAdd", "QLinearMul",
    "MulInteger", "QLinearWhere", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax",
    "QLinearGlobalAveragePool", "QLinearReduceMean", "QLinearConcat", "GatherBlockQuantized",
    "QLinearConv",
};

/* One node of `op` fed `ins`; profiling must succeed or fail with a shape
 * error naming the node, never crash. */
static void robust_one(const char *op, const char *ins, int rank, bool absurd) {
    mp_model *m = ms_new(13);
    tb_input(m, "x", F, rank, TB_DIMS(2, 3, 4, 5, 6));
    tb_input(m, "u", F, -1, NULL);
    tb_input(m, "e", F, 1, TB_DIMS(0));
    int k = ms_node(m, op, ins, "y0,y1,y2,y3");
    const char *ints[] = {"num_heads", "kv_num_heads", "K", "N", "bits", "block_size",
                          "rotary_embedding_dim", "groups", "axis", "group", "transA", "transB",
                          "transBatchA", "past_present_share_buffer", "channels_last"};
    for (size_t i = 0; absurd && i < MP_ARRAY_LEN(ints); i++)
        tb_attr_i(m, k, ints[i], (i % 2) ? INT64_MAX : -INT64_MAX);
    if (absurd) tb_attr_ints(m, k, "qkv_hidden_sizes", 3, TB_DIMS(INT64_MAX, 1, -4));
    tb_name(m, k, "robust");
    for (int o = 0; o < 4; o++) tb_output(m, (const char *[]){"y0", "y1", "y2", "y3"}[o]);
    mp_profile *p = NULL;
    mp_status st = tb_profile(m, &p);
    if (st != MP_OK) {
        T_EQ(st, MP_ERR_SHAPE);
        T_CHECK(strstr(mp_last_error(), "robust") != NULL);
    }
    tb_done(m, p);
}

static void t_malformed_never_crash(void) {
    for (size_t i = 0; i < MP_ARRAY_LEN(all_ops); i++) {
        const char *op = all_ops[i];
        robust_one(op, "", 0, false);                      /* no inputs */
        robust_one(op, "u,u,u,u,u,u,u,u,u,u", 0, false);   /* unknown ranks */
        robust_one(op, "x,,x,,x,,x,,x", 0, false);         /* scalars, holes */
        for (int r = 1; r <= 5; r++) {
            robust_one(op, "x,x,x,x,x,x,x,x,x,x", r, false);
            robust_one(op, "x,x,x,x,x,x,x,x,x,x", r, true);
            robust_one(op, "x,e,x,e,x,e,x,e,x", r, true);
        }
    }
}

/* The train rules of com.microsoft's attentions (autograd's SDPA: q, k,
 * v, the output, an fp32 log-sum-exp per query row and head; backward by
 * mp_sdpa_flops, executed: 2 x forward's products plus the scores again).
 *   Attention: input [2,5,32], weights [32,96], bias, 4 heads of 8: e = 2
 *     bh sq sk = 2*8*5*5 = 400; SDPA backward 400*(16+16) + 400*8 = 16,000
 *     (recompute 3,200); the projection's dX and dW 2 * 2*5*32*96 = 61,440
 *     each, its bias 2*5*96 = 960: 139,840. Keeps its input and weights,
 *     Q, K, V of its own (2*5*96 fp32: 3,840 bytes) and the log-sum-exp
 *     (4*8*5 = 160).
 *   MultiHeadAttention: q [2,5,32], k [2,7,32], v [2,7,16], 4 heads (dk 8,
 *     dv 4): e = 560, 560*(16+8) + 560*8 = 17,920 (recompute 4,480).
 *   GroupQueryAttention: q [2,5,32], k, v [2,5,16] (4 heads, 2 KV heads of
 *     8), total 5: 16,000 (3,200); with a past of 3 (total 8): e = 640,
 *     25,600 (5,120), the present key and value kept instead of k and v. */
static void t_attention_train(void) {
    for (int form = 0; form < 4; form++) {
        mp_model *m = ms_new(17);
        tb_input(m, "x", MP_DT_FLOAT, 3, TB_DIMS(2, 5, 32));
        int n;
        if (form == 0) {
            tb_weight(m, "w", MP_DT_FLOAT, 2, TB_DIMS(32, 96));
            tb_weight(m, "b", MP_DT_FLOAT, 1, TB_DIMS(96));
            n = tb_node_d(m, "com.microsoft", "Attention", "x,w,b", "y");
        } else if (form == 1) {
            tb_input(m, "k", MP_DT_FLOAT, 3, TB_DIMS(2, 7, 32));
            tb_input(m, "v", MP_DT_FLOAT, 3, TB_DIMS(2, 7, 16));
            n = tb_node_d(m, "com.microsoft", "MultiHeadAttention", "x,k,v", "y");
        } else {
            tb_input(m, "k", MP_DT_FLOAT, 3, TB_DIMS(2, 5, 16));
            tb_input(m, "v", MP_DT_FLOAT, 3, TB_DIMS(2, 5, 16));
            tb_input(m, "pk", MP_DT_FLOAT, 4, TB_DIMS(2, 2, 3, 8));
            tb_input(m, "pv", MP_DT_FLOAT, 4, TB_DIMS(2, 2, 3, 8));
            tb_const_i(m, "sl", MP_DT_INT32, 1, TB_DIMS(2), (const int64_t[]){form == 3 ? 7 : 4, form == 3 ? 7 : 4});
            tb_const_i(m, "tot", MP_DT_INT32, 0, NULL, (const int64_t[]){form == 3 ? 8 : 5});
            n = tb_node_d(m, "com.microsoft", "GroupQueryAttention", form == 3 ? "x,k,v,pk,pv,sl,tot" : "x,k,v,,,sl,tot",
                          form == 3 ? "y,presk,presv" : "y");
            tb_attr_i(m, n, "kv_num_heads", 2);
        }
        tb_attr_i(m, n, "num_heads", 4);
        mp_profile *p = tb_prof(m);
        mp_bwd t;
        if (!p || !tb_train(m, n, 7u, &t)) {
            mp_t_fail(__FILE__, __LINE__, "form %d: no train rule", form);
            tb_done(m, p);
            continue;
        }
        static const uint64_t bwd[4] = {139840, 17920, 16000, 25600}, rec[4] = {3200, 4480, 3200, 5120};
        static const uint64_t extra[4] = {3840 + 160, 160, 160, 160};
        static const uint32_t sin_[4] = {3, 7, 7, 1}, sout[4] = {1, 1, 1, 7};
        T_EQ_U64(t.bwd_flops, bwd[form]);
        T_EQ_U64(t.recompute_flops, rec[form]);
        T_EQ_U64(t.extra_bytes, extra[form]);
        T_EQ(t.save_in, sin_[form]);
        T_EQ(t.save_out, sout[form]);
        T_EQ(t.amp, MP_AMP_LOWER);
        tb_done(m, p);
    }
}

MP_TESTS(ops_contrib){
    {"attention_train", t_attention_train},
    {"attention_bert", t_attention_bert},
    {"attention_symbolic", t_attention_symbolic},
    {"attention_past_qkv_sizes", t_attention_past_qkv_sizes},
    {"attention_errors", t_attention_errors},
    {"qattention", t_qattention},
    {"mha_forms", t_mha_forms},
    {"mha_errors", t_mha_errors},
    {"gqa", t_gqa},
    {"gqa_errors", t_gqa_errors},
    {"fused_matmul", t_fused_matmul},
    {"gemm_fusions", t_gemm_fusions},
    {"matmul_nbits", t_matmul_nbits},
    {"matmul_nbits_symbolic", t_matmul_nbits_symbolic},
    {"matmul_nbits_errors", t_matmul_nbits_errors},
    {"quant_matmuls", t_quant_matmuls},
    {"skip_layernorm", t_skip_layernorm},
    {"layernorms", t_layernorms},
    {"embed_layernorm", t_embed_layernorm},
    {"group_norms", t_group_norms},
    {"activations", t_activations},
    {"rotary_embedding", t_rotary_embedding},
    {"inverse_trilu", t_inverse_trilu},
    {"qlinear_elementwise", t_qlinear_elementwise},
    {"gather_block_quantized", t_gather_block_quantized},
    {"malformed_never_crash", t_malformed_never_crash},
};
MP_TESTS_END(ops_contrib)
