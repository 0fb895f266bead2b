/* Tests of src/ops/quant.c: QLinearConv, ConvInteger and com.microsoft's
 * QLinearConv (channels_last). Every MAC and FLOP figure is computed by
 * hand in the comment next to it. */
#include "test.h"
#include "tbuild.h"

#define F MP_DT_FLOAT
#define I32 MP_DT_INT32
#define U8 MP_DT_UINT8
#define I8 MP_DT_INT8

static mp_totals totals(mp_profile *p) {
    mp_totals t;
    mp_profile_totals(p, &t);
    return t;
}

static const mp_cost *cost(mp_model *m, int k) { return &tb_nodep(m, k)->cost; }

/* QLinearConv of x u8 [n, 3, 224, 224] by w i8 [64, 3, 7, 7], stride 2,
 * pad 3, per-channel w_scale [64], bias i32 [64]; symbolic n when sym. */
static mp_model *qconv_stem(int64_t n, bool sym, int64_t wscale_len) {
    mp_model *m = tb_new(13);
    if (sym) n = tb_sym(m, "batch");
    tb_input(m, "x", U8, 4, TB_DIMS(n, 3, 224, 224));
    tb_weight(m, "xs", F, 0, NULL);
    tb_weight(m, "xz", U8, 0, NULL);
    tb_weight(m, "w", I8, 4, TB_DIMS(64, 3, 7, 7));
    tb_weight(m, "ws", F, 1, TB_DIMS(wscale_len));
    tb_weight(m, "wz", I8, 1, TB_DIMS(wscale_len));
    tb_weight(m, "ys", F, 0, NULL);
    tb_weight(m, "yz", U8, 0, NULL);
    tb_weight(m, "b", I32, 1, TB_DIMS(64));
    int k = tb_node(m, "QLinearConv", "x,xs,xz,w,ws,wz,ys,yz,b", "y");
    tb_attr_ints(m, k, "strides", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, k, "pads", 4, TB_DIMS(3, 3, 3, 3));
    tb_output(m, "y");
    return m;
}

static void t_qlinear_conv_stem(void) {
    /* ResNet stem, quantized: out = floor((224 + 6 - 7) / 2) + 1 = 112, y u8
     * [1, 64, 112, 112]; MACs = 7*7*3*64*1*112*112 = 118,013,952 (integer);
     * FLOPs = 236,027,904 + bias 64*112*112 = 802,816 -> 236,830,720.
     * params: w 9,408 int8 + b 64 int32 = 9,472 (9,408 + 256 = 9,664 B);
     * the float w_scale is a buffer, not a parameter. */
    mp_model *m = qconv_stem(1, false, 64);
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x64x112x112");
    T_EQ(tb_val(m, "y")->dtype, U8);
    T_EQ_U64(cost(m, 0)->macs, 118013952);
    T_EQ_U64(cost(m, 0)->flops, 236830720);
    T_EQ_U64(totals(p).params, 9472);
    T_EQ_U64(totals(p).param_bytes, 9664);
    T_CHECK(!(tb_val(m, "ws")->flags & MP_VAL_PARAM));
    T_CHECK(tb_val(m, "w")->flags & MP_VAL_PARAM);
    T_EQ(totals(p).uncounted_nodes, 0);
    tb_done(m, p);
}

static void t_qlinear_conv_symbolic(void) {
    /* x [batch, 3, 224, 224] -> batch x 64 x 112 x 112; the cost waits for
     * batch; batch = 2: MACs = 2 * 118,013,952 = 236,027,904 */
    mp_model *m = qconv_stem(0, true, 64);
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "batchx64x112x112");
    T_CHECK(cost(m, 0)->flags & MP_COST_UNKNOWN);
    T_EQ_U64(totals(p).params, 9472); /* params do not depend on dims */
    mp_profile_free(p);
    T_OK(mp_model_set_dim(m, "batch", 2));
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x64x112x112");
    T_CHECK(!(cost(m, 0)->flags & MP_COST_UNKNOWN));
    T_EQ_U64(cost(m, 0)->macs, 236027904);
    tb_done(m, p);
}

static void t_conv_integer(void) {
    /* depthwise: x u8 [2, 32, 56, 56], w u8 [32, 1, 3, 3], group 32, pad 1
     * -> int32 [2, 32, 56, 56]; MACs = 9 * 1 * 32 * 2 * 3,136 = 1,806,336;
     * FLOPs = 3,612,672. params: w 288 (uint8, the weight slot); the zero
     * points are buffers. */
    mp_model *m = tb_new(13);
    tb_input(m, "x", U8, 4, TB_DIMS(2, 32, 56, 56));
    tb_weight(m, "w", U8, 4, TB_DIMS(32, 1, 3, 3));
    tb_weight(m, "xz", U8, 0, NULL);
    tb_weight(m, "wz", U8, 1, TB_DIMS(32));
    int k = tb_node(m, "ConvInteger", "x,w,xz,wz", "y");
    tb_attr_i(m, k, "group", 32);
    tb_attr_ints(m, k, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x32x56x56");
    T_EQ(tb_val(m, "y")->dtype, I32);
    T_EQ_U64(cost(m, k)->macs, 1806336);
    T_EQ_U64(cost(m, k)->flops, 3612672);
    T_EQ_U64(totals(p).params, 288);
    tb_done(m, p);
}

static void t_qlinear_conv_nhwc(void) {
    /* com.microsoft QLinearConv, channels_last: x [1, 32, 32, 3] (NHWC), w
     * [16, 3, 3, 3], pads 1 -> y [1, 32, 32, 16]; MACs = 432 * 1,024 =
     * 442,368; FLOPs = 884,736 (no bias). Without channels_last the same
     * node reads x as NCHW and fails (C = 32 vs 3). */
    mp_model *m = tb_new(13);
    tb_opset(m, "com.microsoft", 1);
    tb_input(m, "x", U8, 4, TB_DIMS(1, 32, 32, 3));
    tb_weight(m, "s", F, 0, NULL);
    tb_weight(m, "z", U8, 0, NULL);
    tb_weight(m, "w", U8, 4, TB_DIMS(16, 3, 3, 3));
    int k = tb_node_d(m, "com.microsoft", "QLinearConv", "x,s,z,w,s,z,s,z", "y");
    tb_attr_ints(m, k, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_attr_i(m, k, "channels_last", 1);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x32x32x16");
    T_EQ_STR(tb_shape(m, "x"), "1x32x32x3"); /* the input is left as it was */
    T_EQ_U64(cost(m, k)->macs, 442368);
    T_EQ_U64(cost(m, k)->flops, 884736);
    tb_done(m, p);

    m = tb_new(13);
    tb_input(m, "x", U8, 4, TB_DIMS(1, 32, 32, 3));
    tb_weight(m, "s", F, 0, NULL);
    tb_weight(m, "z", U8, 0, NULL);
    tb_weight(m, "w", U8, 4, TB_DIMS(16, 3, 3, 3));
    k = tb_node(m, "QLinearConv", "x,s,z,w,s,z,s,z", "y");
    tb_attr_ints(m, k, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_name(m, k, "qconv_nchw");
    tb_output(m, "y");
    tb_expect_shape_error(m, "qconv_nchw");
}

static void t_quant_conv_errors(void) {
    /* per-channel w_scale of 7 values for 64 output channels */
    mp_model *m = qconv_stem(1, false, 7);
    tb_name(m, 0, "qconv_wscale");
    tb_expect_shape_error(m, "qconv_wscale");

    /* x has 4 channels, w expects 3 */
    m = tb_new(13);
    tb_input(m, "x", U8, 4, TB_DIMS(1, 4, 8, 8));
    tb_weight(m, "w", U8, 4, TB_DIMS(8, 3, 3, 3));
    int k = tb_node(m, "ConvInteger", "x,w", "y");
    tb_name(m, k, "convint_channels");
    tb_output(m, "y");
    tb_expect_shape_error(m, "convint_channels");

    /* bias of 32 values for 64 output channels */
    m = tb_new(13);
    tb_input(m, "x", U8, 4, TB_DIMS(1, 3, 8, 8));
    tb_weight(m, "s", F, 0, NULL);
    tb_weight(m, "z", U8, 0, NULL);
    tb_weight(m, "w", I8, 4, TB_DIMS(64, 3, 3, 3));
    tb_weight(m, "b", I32, 1, TB_DIMS(32));
    k = tb_node(m, "QLinearConv", "x,s,z,w,s,z,s,z,b", "y");
    tb_name(m, k, "qconv_bias");
    tb_output(m, "y");
    tb_expect_shape_error(m, "qconv_bias");

    /* w missing (input 3 omitted) */
    m = tb_new(13);
    tb_input(m, "x", U8, 4, TB_DIMS(1, 3, 8, 8));
    tb_weight(m, "s", F, 0, NULL);
    k = tb_node(m, "QLinearConv", "x,s,s", "y");
    tb_name(m, k, "qconv_no_w");
    tb_output(m, "y");
    tb_expect_shape_error(m, "qconv_no_w");

    /* absurd group */
    m = tb_new(13);
    tb_input(m, "x", U8, 4, TB_DIMS(1, 3, 8, 8));
    tb_weight(m, "w", U8, 4, TB_DIMS(8, 3, 3, 3));
    k = tb_node(m, "ConvInteger", "x,w", "y");
    tb_attr_i(m, k, "group", INT64_MAX);
    tb_name(m, k, "convint_group");
    tb_output(m, "y");
    tb_expect_shape_error(m, "convint_group");
}

static void t_quant_conv_unknown(void) {
    /* unknown ranks flow: y has an unknown shape, the cost is unknown */
    mp_model *m = tb_new(13);
    tb_input(m, "x", U8, -1, NULL);
    tb_input(m, "w", U8, -1, NULL);
    int k = tb_node(m, "ConvInteger", "x,w", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "?rank");
    T_EQ(tb_val(m, "y")->dtype, I32);
    T_CHECK(cost(m, k)->flags & MP_COST_UNKNOWN);
    T_EQ_U64(cost(m, k)->macs, 0);
    tb_done(m, p);
}

MP_TESTS(ops_quant){
    {"qlinear_conv_stem", t_qlinear_conv_stem},
    {"qlinear_conv_symbolic", t_qlinear_conv_symbolic},
    {"conv_integer", t_conv_integer},
    {"qlinear_conv_nhwc", t_qlinear_conv_nhwc},
    {"quant_conv_errors", t_quant_conv_errors},
    {"quant_conv_unknown", t_quant_conv_unknown},
};
MP_TESTS_END(ops_quant)
