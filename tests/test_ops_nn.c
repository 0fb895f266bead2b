/* Tests of src/ops/nn.c: shapes of the tricky forms and every cost rule,
 * each figure computed by hand in the comment next to it. */
#include "test.h"
#include "tbuild.h"

#define F MP_DT_FLOAT
#define I64 MP_DT_INT64

/* ---- Conv ---- */

static void t_conv_basic(void) {
    /* ResNet stem: X 1x3x224x224, W 64x3x7x7, stride 2, pad 3
     * out = floor((224 + 6 - 7) / 2) + 1 = 112
     * MACs = 7*7*3*64*112*112 = 118013952; FLOPs = 2*MACs = 236027904 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 224, 224));
    tb_weight(m, "w", F, 4, TB_DIMS(64, 3, 7, 7));
    int k = tb_node(m, "Conv", "x,w", "y");
    tb_attr_ints(m, k, "strides", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, k, "pads", 4, TB_DIMS(3, 3, 3, 3));
    tb_attr_ints(m, k, "kernel_shape", 2, TB_DIMS(7, 7));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x64x112x112");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 118013952);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 236027904);
    tb_done(m, p);
}

static void t_conv_bias(void) {
    /* same conv with B[64]: FLOPs = 2*118013952 + 64*112*112
     * = 236027904 + 802816 = 236830720; params = 64*3*7*7 + 64 = 9472 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 224, 224));
    tb_weight(m, "w", F, 4, TB_DIMS(64, 3, 7, 7));
    tb_weight(m, "b", F, 1, TB_DIMS(64));
    int k = tb_node(m, "Conv", "x,w,b", "y");
    tb_attr_ints(m, k, "strides", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, k, "pads", 4, TB_DIMS(3, 3, 3, 3));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x64x112x112");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 118013952);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 236830720);
    mp_totals t;
    mp_profile_totals(p, &t);
    T_EQ_U64(t.params, 9472);
    tb_done(m, p);
}

static void t_conv_group(void) {
    /* depthwise: X 2x32x56x56, W 32x1x3x3, group 32, pad 1 -> 2x32x56x56
     * MACs = 3*3 * (32/32) * 32 * 2 * 56*56 = 9*64*3136 = 1806336 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(2, 32, 56, 56));
    tb_weight(m, "w", F, 4, TB_DIMS(32, 1, 3, 3));
    int k = tb_node(m, "Conv", "x,w", "y");
    tb_attr_i(m, k, "group", 32);
    tb_attr_ints(m, k, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x32x56x56");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 1806336);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 3612672);
    tb_done(m, p);
}

static void t_conv_1d_dilated(void) {
    /* X 1x16x100, W 8x16x5, dilation 2: extent (5-1)*2+1 = 9,
     * out = 100 - 9 + 1 = 92; MACs = 5*16*8*1*92 = 58880 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(1, 16, 100));
    tb_weight(m, "w", F, 3, TB_DIMS(8, 16, 5));
    int k = tb_node(m, "Conv", "x,w", "y");
    tb_attr_ints(m, k, "dilations", 1, TB_DIMS(2));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x8x92");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 58880);
    tb_done(m, p);
}

static void t_conv_3d(void) {
    /* X 1x4x8x8x8, W 6x4x3x3x3, pads 1 -> 1x6x8x8x8
     * MACs = 27*4*6*1*512 = 331776 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 5, TB_DIMS(1, 4, 8, 8, 8));
    tb_weight(m, "w", F, 5, TB_DIMS(6, 4, 3, 3, 3));
    int k = tb_node(m, "Conv", "x,w", "y");
    tb_attr_ints(m, k, "pads", 6, TB_DIMS(1, 1, 1, 1, 1, 1));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x6x8x8x8");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 331776);
    tb_done(m, p);
}

static void t_conv_auto_pad(void) {
    /* X 1x3x15x15, W 8x3x3x3, stride 2:
     * SAME_UPPER -> ceil(15/2) = 8; SAME_LOWER -> 8; VALID -> floor(12/2)+1 = 7 */
    static const char *const modes[] = {"SAME_UPPER", "SAME_LOWER", "VALID"};
    static const char *const want[] = {"1x8x8x8", "1x8x8x8", "1x8x7x7"};
    for (int i = 0; i < 3; i++) {
        mp_model *m = tb_new(17);
        tb_input(m, "x", F, 4, TB_DIMS(1, 3, 15, 15));
        tb_weight(m, "w", F, 4, TB_DIMS(8, 3, 3, 3));
        int k = tb_node(m, "Conv", "x,w", "y");
        tb_attr_ints(m, k, "strides", 2, TB_DIMS(2, 2));
        tb_attr_s(m, k, "auto_pad", modes[i]);
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        T_EQ_STR(tb_shape(m, "y"), want[i]);
        tb_done(m, p);
    }
}

static void t_conv_symbolic(void) {
    /* X Nx3x32x32, W 16x3x3x3, pad 1: N flows through, 32 stays;
     * the cost is marked unknown */
    mp_model *m = tb_new(17);
    int64_t n = tb_sym(m, "N");
    tb_input(m, "x", F, 4, TB_DIMS(n, 3, 32, 32));
    tb_weight(m, "w", F, 4, TB_DIMS(16, 3, 3, 3));
    int k = tb_node(m, "Conv", "x,w", "y");
    tb_attr_ints(m, k, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "Nx16x32x32");
    T_CHECK(tb_nodep(m, k)->cost.flags & MP_COST_UNKNOWN);
    tb_done(m, p);
}

static void t_conv_symbolic_spatial(void) {
    /* X 1x3xHxW: a 3x3 pad-1 stride-1 window keeps H and W; stride 2
     * makes them unknown */
    mp_model *m = tb_new(17);
    int64_t h = tb_sym(m, "H"), w = tb_sym(m, "W");
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, h, w));
    tb_weight(m, "w1", F, 4, TB_DIMS(8, 3, 3, 3));
    tb_weight(m, "w2", F, 4, TB_DIMS(8, 8, 3, 3));
    int k = tb_node(m, "Conv", "x,w1", "y");
    tb_attr_ints(m, k, "pads", 4, TB_DIMS(1, 1, 1, 1));
    k = tb_node(m, "Conv", "y,w2", "z");
    tb_attr_ints(m, k, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_attr_ints(m, k, "strides", 2, TB_DIMS(2, 2));
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x8xHxW");
    T_EQ_STR(tb_shape(m, "z"), "1x8x?x?");
    tb_done(m, p);
}

static void t_conv_channel_mismatch(void) {
    /* X has 4 channels, W expects 3: an error naming the node */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 4, 8, 8));
    tb_weight(m, "w", F, 4, TB_DIMS(8, 3, 3, 3));
    int k = tb_node(m, "Conv", "x,w", "y");
    tb_name(m, k, "bad_conv");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bad_conv");
}

static void t_conv_bad_attrs(void) {
    /* strides with the wrong length; kernel larger than the input */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 8, 8));
    tb_weight(m, "w", F, 4, TB_DIMS(8, 3, 3, 3));
    int k = tb_node(m, "Conv", "x,w", "y");
    tb_name(m, k, "conv_strides");
    tb_attr_ints(m, k, "strides", 3, TB_DIMS(1, 1, 1));
    tb_output(m, "y");
    tb_expect_shape_error(m, "conv_strides");

    m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 2, 2));
    tb_weight(m, "w", F, 4, TB_DIMS(8, 3, 3, 3));
    k = tb_node(m, "Conv", "x,w", "y");
    tb_name(m, k, "conv_small");
    tb_output(m, "y");
    tb_expect_shape_error(m, "conv_small");

    m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 8, 8));
    k = tb_node(m, "Conv", "x", "y");
    tb_name(m, k, "conv_no_w");
    tb_output(m, "y");
    tb_expect_shape_error(m, "conv_no_w");

    m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 8, 8));
    tb_weight(m, "w", F, 4, TB_DIMS(8, 3, 3, 3));
    tb_weight(m, "b", F, 1, TB_DIMS(7));
    k = tb_node(m, "Conv", "x,w,b", "y");
    tb_name(m, k, "conv_bias");
    tb_output(m, "y");
    tb_expect_shape_error(m, "conv_bias");
}

/* ---- ConvTranspose ---- */

static void t_convtranspose_basic(void) {
    /* X 1x16x14x14, W 16x8x4x4, stride 2, pads 1, B[8]:
     * out = 2*(14-1) + 4 - 2 = 28 -> 1x8x28x28
     * MACs = 4*4 * 16 * 8 * 1 * 14*14 = 401408
     * FLOPs = 2*401408 + 8*28*28 = 802816 + 6272 = 809088 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 16, 14, 14));
    tb_weight(m, "w", F, 4, TB_DIMS(16, 8, 4, 4));
    tb_weight(m, "b", F, 1, TB_DIMS(8));
    int k = tb_node(m, "ConvTranspose", "x,w,b", "y");
    tb_attr_ints(m, k, "strides", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, k, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x8x28x28");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 401408);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 809088);
    tb_done(m, p);
}

static void t_convtranspose_output_padding(void) {
    /* X 1x16x7x7, W 16x4x3x3, group 2, stride 2, pads 1, output_padding 1:
     * out = 2*6 + 1 + 3 - 2 = 14, C_out = 4*2 = 8 -> 1x8x14x14
     * MACs = 3*3 * 16 * (8/2) * 1 * 7*7 = 28224 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 16, 7, 7));
    tb_weight(m, "w", F, 4, TB_DIMS(16, 4, 3, 3));
    int k = tb_node(m, "ConvTranspose", "x,w", "y");
    tb_attr_i(m, k, "group", 2);
    tb_attr_ints(m, k, "strides", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, k, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_attr_ints(m, k, "output_padding", 2, TB_DIMS(1, 1));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x8x14x14");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 28224);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 56448);
    tb_done(m, p);
}

static void t_convtranspose_output_shape(void) {
    /* output_shape [15, 15] sets the spatial dims; SAME_UPPER gives in*stride */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 16, 7, 7));
    tb_weight(m, "w", F, 4, TB_DIMS(16, 4, 3, 3));
    int k = tb_node(m, "ConvTranspose", "x,w", "y");
    tb_attr_ints(m, k, "strides", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, k, "output_shape", 2, TB_DIMS(15, 15));
    k = tb_node(m, "ConvTranspose", "x,w", "z");
    tb_attr_ints(m, k, "strides", 2, TB_DIMS(2, 2));
    tb_attr_s(m, k, "auto_pad", "SAME_UPPER");
    tb_output(m, "y");
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x4x15x15");
    T_EQ_STR(tb_shape(m, "z"), "1x4x14x14");
    tb_done(m, p);
}

static void t_convtranspose_mismatch(void) {
    /* W's dim 0 must equal X's channels */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 16, 7, 7));
    tb_weight(m, "w", F, 4, TB_DIMS(8, 4, 3, 3));
    int k = tb_node(m, "ConvTranspose", "x,w", "y");
    tb_name(m, k, "deconv");
    tb_output(m, "y");
    tb_expect_shape_error(m, "deconv");
}

/* ---- pooling ---- */

static void t_maxpool_resnet(void) {
    /* X 1x64x112x112, k3 s2 p1 -> floor((112+2-3)/2)+1 = 56
     * FLOPs = input elements = 64*112*112 = 802816; Indices int64 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 64, 112, 112));
    int k = tb_node(m, "MaxPool", "x", "y,idx");
    tb_attr_ints(m, k, "kernel_shape", 2, TB_DIMS(3, 3));
    tb_attr_ints(m, k, "strides", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, k, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x64x56x56");
    T_EQ_STR(tb_shape(m, "idx"), "1x64x56x56");
    T_EQ(tb_val(m, "idx")->dtype, MP_DT_INT64);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 802816);
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 0);
    tb_done(m, p);
}

static void t_pool_ceil_mode(void) {
    /* X 1x1x5x5, k2 s2: floor -> (5-2)/2+1 = 2; ceil -> ceil(3/2)+1 = 3.
     * k2 s3 pads 1: ceil(5/3)+1 = 3, but the third window would start at
     * 2*3 = 6 >= 5+1 (inside the end padding): dropped -> 2 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 1, 5, 5));
    int k = tb_node(m, "MaxPool", "x", "a");
    tb_attr_ints(m, k, "kernel_shape", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, k, "strides", 2, TB_DIMS(2, 2));
    k = tb_node(m, "AveragePool", "x", "b");
    tb_attr_ints(m, k, "kernel_shape", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, k, "strides", 2, TB_DIMS(2, 2));
    tb_attr_i(m, k, "ceil_mode", 1);
    k = tb_node(m, "MaxPool", "x", "c");
    tb_attr_ints(m, k, "kernel_shape", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, k, "strides", 2, TB_DIMS(3, 3));
    tb_attr_ints(m, k, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_attr_i(m, k, "ceil_mode", 1);
    tb_output(m, "a");
    tb_output(m, "b");
    tb_output(m, "c");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "a"), "1x1x2x2");
    T_EQ_STR(tb_shape(m, "b"), "1x1x3x3");
    T_EQ_STR(tb_shape(m, "c"), "1x1x2x2");
    T_EQ_U64(tb_nodep(m, 1)->cost.flops, 25); /* input elements */
    tb_done(m, p);
}

static void t_pool_same_and_dilation(void) {
    /* AveragePool k3 s2 SAME_UPPER on 7 -> ceil(7/2) = 4;
     * MaxPool k3 dilation 2 (extent 5) on 7 -> 3; LpPool 1D k3 on 10 -> 8 */
    mp_model *m = tb_new(19);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 7, 7));
    tb_input(m, "s", F, 3, TB_DIMS(2, 4, 10));
    int k = tb_node(m, "AveragePool", "x", "a");
    tb_attr_ints(m, k, "kernel_shape", 2, TB_DIMS(3, 3));
    tb_attr_ints(m, k, "strides", 2, TB_DIMS(2, 2));
    tb_attr_s(m, k, "auto_pad", "SAME_UPPER");
    k = tb_node(m, "MaxPool", "x", "b");
    tb_attr_ints(m, k, "kernel_shape", 2, TB_DIMS(3, 3));
    tb_attr_ints(m, k, "dilations", 2, TB_DIMS(2, 2));
    int lp = tb_node(m, "LpPool", "s", "c");
    tb_attr_ints(m, lp, "kernel_shape", 1, TB_DIMS(3));
    tb_output(m, "a");
    tb_output(m, "b");
    tb_output(m, "c");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "a"), "1x3x4x4");
    T_EQ_STR(tb_shape(m, "b"), "1x3x3x3");
    T_EQ_STR(tb_shape(m, "c"), "2x4x8");
    T_EQ_U64(tb_nodep(m, lp)->cost.flops, 80); /* 2*4*10 input elements */
    tb_done(m, p);
}

static void t_pool_errors(void) {
    /* MaxPool without kernel_shape; kernel_shape length vs rank */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 7, 7));
    int k = tb_node(m, "MaxPool", "x", "y");
    tb_name(m, k, "pool_nokernel");
    tb_output(m, "y");
    tb_expect_shape_error(m, "pool_nokernel");

    m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 7, 7));
    k = tb_node(m, "AveragePool", "x", "y");
    tb_attr_ints(m, k, "kernel_shape", 3, TB_DIMS(2, 2, 2));
    tb_name(m, k, "pool_rank");
    tb_output(m, "y");
    tb_expect_shape_error(m, "pool_rank");
}

static void t_global_pool(void) {
    /* 1x2048x7x7 -> 1x2048x1x1; FLOPs = 2048*49 = 100352 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 2048, 7, 7));
    int k = tb_node(m, "GlobalAveragePool", "x", "y");
    int k2 = tb_node(m, "GlobalMaxPool", "x", "z");
    tb_output(m, "y");
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x2048x1x1");
    T_EQ_STR(tb_shape(m, "z"), "1x2048x1x1");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 100352);
    T_EQ_U64(tb_nodep(m, k2)->cost.flops, 100352);
    tb_done(m, p);
}

/* ---- normalizations ---- */

static void t_batchnorm(void) {
    /* X 2x64x56x56 (401408 elements): inference FLOPs = 2*401408 = 802816.
     * Params: scale 64 + B 64 = 128 (mean and var are buffers). */
    mp_model *m = tb_new(15);
    tb_input(m, "x", F, 4, TB_DIMS(2, 64, 56, 56));
    tb_weight(m, "s", F, 1, TB_DIMS(64));
    tb_weight(m, "b", F, 1, TB_DIMS(64));
    tb_weight(m, "mean", F, 1, TB_DIMS(64));
    tb_weight(m, "var", F, 1, TB_DIMS(64));
    int k = tb_node(m, "BatchNormalization", "x,s,b,mean,var", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x64x56x56");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 802816);
    mp_totals t;
    mp_profile_totals(p, &t);
    T_EQ_U64(t.params, 128);
    tb_done(m, p);
}

static void t_batchnorm_training(void) {
    /* training_mode=1: FLOPs = 5 * 2*64*56*56 = 2007040; running stats [64] */
    mp_model *m = tb_new(15);
    tb_input(m, "x", F, 4, TB_DIMS(2, 64, 56, 56));
    tb_weight(m, "s", F, 1, TB_DIMS(64));
    tb_weight(m, "b", F, 1, TB_DIMS(64));
    tb_weight(m, "mean", F, 1, TB_DIMS(64));
    tb_weight(m, "var", F, 1, TB_DIMS(64));
    int k = tb_node(m, "BatchNormalization", "x,s,b,mean,var", "y,rm,rv");
    tb_attr_i(m, k, "training_mode", 1);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "rm"), "64");
    T_EQ_STR(tb_shape(m, "rv"), "64");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 2007040);
    tb_done(m, p);
}

static void t_batchnorm_mismatch(void) {
    mp_model *m = tb_new(15);
    tb_input(m, "x", F, 4, TB_DIMS(2, 64, 8, 8));
    tb_weight(m, "s", F, 1, TB_DIMS(32));
    tb_weight(m, "b", F, 1, TB_DIMS(64));
    tb_weight(m, "mean", F, 1, TB_DIMS(64));
    tb_weight(m, "var", F, 1, TB_DIMS(64));
    int k = tb_node(m, "BatchNormalization", "x,s,b,mean,var", "y");
    tb_name(m, k, "bn1");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bn1");
}

static void t_layernorm(void) {
    /* X 2x10x768 = 15360 elements, Scale and B [768]:
     * FLOPs = 5 * 15360 = 76800. Mean/InvStdDev: 2x10x1 (axis -1). */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(2, 10, 768));
    tb_weight(m, "g", F, 1, TB_DIMS(768));
    tb_weight(m, "b", F, 1, TB_DIMS(768));
    int k = tb_node(m, "LayerNormalization", "x,g,b", "y,mu,isd");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x10x768");
    T_EQ_STR(tb_shape(m, "mu"), "2x10x1");
    T_EQ_STR(tb_shape(m, "isd"), "2x10x1");
    T_EQ(tb_val(m, "mu")->dtype, MP_DT_FLOAT);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 76800);
    tb_done(m, p);
}

static void t_layernorm_axis(void) {
    /* axis 1 on 2x10x768: Mean 2x1x1; without B still 5 FLOPs/elem
     * (Scale is the affine part); Scale of the wrong size is an error */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(2, 10, 768));
    tb_weight(m, "g", F, 2, TB_DIMS(10, 768));
    int k = tb_node(m, "LayerNormalization", "x,g", "y,mu");
    tb_attr_i(m, k, "axis", 1);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "mu"), "2x1x1");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 76800);
    tb_done(m, p);

    m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(2, 10, 768));
    tb_weight(m, "g", F, 1, TB_DIMS(512));
    k = tb_node(m, "LayerNormalization", "x,g", "y");
    tb_name(m, k, "ln_bad");
    tb_output(m, "y");
    tb_expect_shape_error(m, "ln_bad");
}

static void t_instancenorm(void) {
    /* X 1x8x4x4 = 128 elements: FLOPs = 5*128 = 640 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 8, 4, 4));
    tb_weight(m, "s", F, 1, TB_DIMS(8));
    tb_weight(m, "b", F, 1, TB_DIMS(8));
    int k = tb_node(m, "InstanceNormalization", "x,s,b", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x8x4x4");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 640);
    tb_done(m, p);
}

static void t_groupnorm(void) {
    /* opset 18: X 2x8x4x4 (256), num_groups 4, scale/bias [4]:
     * FLOPs = 5*256 = 1280. Opset 21: scale/bias [C] = [8]. */
    mp_model *m = tb_new(18);
    tb_input(m, "x", F, 4, TB_DIMS(2, 8, 4, 4));
    tb_weight(m, "s", F, 1, TB_DIMS(4));
    tb_weight(m, "b", F, 1, TB_DIMS(4));
    int k = tb_node(m, "GroupNormalization", "x,s,b", "y");
    tb_attr_i(m, k, "num_groups", 4);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x8x4x4");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 1280);
    tb_done(m, p);

    m = tb_new(21);
    tb_input(m, "x", F, 4, TB_DIMS(2, 8, 4, 4));
    tb_weight(m, "s", F, 1, TB_DIMS(8));
    tb_weight(m, "b", F, 1, TB_DIMS(8));
    k = tb_node(m, "GroupNormalization", "x,s,b", "y");
    tb_attr_i(m, k, "num_groups", 4);
    tb_output(m, "y");
    p = tb_prof(m);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 1280);
    tb_done(m, p);

    /* 8 channels in 3 groups */
    m = tb_new(21);
    tb_input(m, "x", F, 4, TB_DIMS(2, 8, 4, 4));
    tb_weight(m, "s", F, 1, TB_DIMS(8));
    tb_weight(m, "b", F, 1, TB_DIMS(8));
    k = tb_node(m, "GroupNormalization", "x,s,b", "y");
    tb_attr_i(m, k, "num_groups", 3);
    tb_name(m, k, "gn_bad");
    tb_output(m, "y");
    tb_expect_shape_error(m, "gn_bad");
}

static void t_other_norms(void) {
    /* X 1x8x4x4 = 128 elements:
     * LpNormalization 3*128 = 384; MeanVarianceNormalization 4*128 = 512;
     * LRN size 5: (2*5 + 4) * 128 = 1792 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 8, 4, 4));
    int a = tb_node(m, "LpNormalization", "x", "a");
    int b = tb_node(m, "MeanVarianceNormalization", "x", "b");
    int c = tb_node(m, "LRN", "x", "c");
    tb_attr_i(m, c, "size", 5);
    tb_output(m, "a");
    tb_output(m, "b");
    tb_output(m, "c");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "c"), "1x8x4x4");
    T_EQ_U64(tb_nodep(m, a)->cost.flops, 384);
    T_EQ_U64(tb_nodep(m, b)->cost.flops, 512);
    T_EQ_U64(tb_nodep(m, c)->cost.flops, 1792);
    tb_done(m, p);
}

/* ---- softmax ---- */

static void t_softmax(void) {
    /* attention scores 2x12x64x64 = 98304 elements: FLOPs = 98304 each */
    mp_model *m = tb_new(13);
    tb_input(m, "x", F, 4, TB_DIMS(2, 12, 64, 64));
    int a = tb_node(m, "Softmax", "x", "a");
    int b = tb_node(m, "LogSoftmax", "x", "b");
    int c = tb_node(m, "Hardmax", "x", "c");
    tb_output(m, "a");
    tb_output(m, "b");
    tb_output(m, "c");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "a"), "2x12x64x64");
    T_EQ_U64(tb_nodep(m, a)->cost.flops, 98304);
    T_EQ_U64(tb_nodep(m, b)->cost.flops, 98304);
    T_EQ_U64(tb_nodep(m, c)->cost.flops, 98304);
    tb_done(m, p);

    m = tb_new(13);
    tb_input(m, "x", F, 2, TB_DIMS(2, 12));
    a = tb_node(m, "Softmax", "x", "a");
    tb_attr_i(m, a, "axis", 2);
    tb_name(m, a, "sm_axis");
    tb_output(m, "a");
    tb_expect_shape_error(m, "sm_axis");
}

/* ---- reductions ---- */

static void t_reduce_axes_attr(void) {
    /* opset 13 ReduceMean axes=[2,3] keepdims=1: 1x64x7x7 -> 1x64x1x1;
     * FLOPs = input elements = 3136. keepdims=0 -> 1x64. */
    mp_model *m = tb_new(13);
    tb_input(m, "x", F, 4, TB_DIMS(1, 64, 7, 7));
    int k = tb_node(m, "ReduceMean", "x", "y");
    tb_attr_ints(m, k, "axes", 2, TB_DIMS(2, 3));
    int k2 = tb_node(m, "ReduceMax", "x", "z");
    tb_attr_ints(m, k2, "axes", 2, TB_DIMS(-1, -2));
    tb_attr_i(m, k2, "keepdims", 0);
    int k3 = tb_node(m, "ReduceL2", "x", "w");
    tb_output(m, "y");
    tb_output(m, "z");
    tb_output(m, "w");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x64x1x1");
    T_EQ_STR(tb_shape(m, "z"), "1x64");
    T_EQ_STR(tb_shape(m, "w"), "1x1x1x1"); /* no axes: all */
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 3136);
    T_EQ_U64(tb_nodep(m, k3)->cost.flops, 3136);
    tb_done(m, p);
}

static void t_reduce_axes_input(void) {
    /* ReduceSum-13 takes axes as input 1: [1], keepdims=0: 2x3x4 -> 2x4.
     * ReduceMean-18 likewise: [-1] -> 2x3. Unknown axes with keepdims=0
     * and a known axes length 1: rank 2, dims unknown. noop_with_empty_axes
     * with no axes: identity. */
    mp_model *m = tb_new(18);
    tb_input(m, "x", F, 3, TB_DIMS(2, 3, 4));
    tb_input(m, "dyn", I64, 1, TB_DIMS(1));
    tb_const_i(m, "a1", I64, 1, TB_DIMS(1), TB_DIMS(1));
    tb_const_i(m, "am1", I64, 1, TB_DIMS(1), TB_DIMS(-1));
    int k = tb_node(m, "ReduceSum", "x,a1", "y");
    tb_attr_i(m, k, "keepdims", 0);
    k = tb_node(m, "ReduceMean", "x,am1", "z");
    tb_attr_i(m, k, "keepdims", 0);
    k = tb_node(m, "ReduceMax", "x,dyn", "u");
    tb_attr_i(m, k, "keepdims", 0);
    k = tb_node(m, "ReduceMin", "x", "v");
    tb_attr_i(m, k, "noop_with_empty_axes", 1);
    k = tb_node(m, "ReduceProd", "x", "w");
    tb_output(m, "y");
    tb_output(m, "z");
    tb_output(m, "u");
    tb_output(m, "v");
    tb_output(m, "w");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x4");
    T_EQ_STR(tb_shape(m, "z"), "2x3");
    T_EQ_STR(tb_shape(m, "u"), "?x?");
    T_EQ_STR(tb_shape(m, "v"), "2x3x4");
    T_EQ_STR(tb_shape(m, "w"), "1x1x1");
    tb_done(m, p);
}

static void t_reduce_fold(void) {
    /* ReduceProd over axis 1 of int64 [[1,2,3],[4,5,6]] -> [6, 120];
     * ReduceSum (opset 11, axes attribute) of [2,3,4] all axes -> [9] */
    mp_model *m = tb_new(11);
    tb_const_i(m, "x", I64, 2, TB_DIMS(2, 3), TB_DIMS(1, 2, 3, 4, 5, 6));
    tb_const_i(m, "s", I64, 1, TB_DIMS(3), TB_DIMS(2, 3, 4));
    int k = tb_node(m, "ReduceProd", "x", "p");
    tb_attr_ints(m, k, "axes", 1, TB_DIMS(1));
    tb_attr_i(m, k, "keepdims", 0);
    k = tb_node(m, "ReduceSum", "s", "t");
    tb_attr_i(m, k, "keepdims", 0);
    tb_output(m, "p");
    tb_output(m, "t");
    mp_profile *p = tb_prof(m);
    mp_value *v = tb_val(m, "p");
    T_EQ_STR(tb_shape(m, "p"), "2");
    T_EQ(v->kn, 2);
    if (v->kn == 2) {
        T_EQ(v->iv[0], 6);
        T_EQ(v->iv[1], 120);
    }
    v = tb_val(m, "t");
    T_EQ_STR(tb_shape(m, "t"), "scalar");
    T_EQ(v->kn, 1);
    if (v->kn == 1) T_EQ(v->iv[0], 9);
    tb_done(m, p);
}

static void t_reduce_bad_axis(void) {
    mp_model *m = tb_new(13);
    tb_input(m, "x", F, 3, TB_DIMS(2, 3, 4));
    int k = tb_node(m, "ReduceMean", "x", "y");
    tb_attr_ints(m, k, "axes", 1, TB_DIMS(3));
    tb_name(m, k, "rm_axis");
    tb_output(m, "y");
    tb_expect_shape_error(m, "rm_axis");

    m = tb_new(13);
    tb_input(m, "x", F, 3, TB_DIMS(2, 3, 4));
    k = tb_node(m, "ReduceMean", "x", "y");
    tb_attr_ints(m, k, "axes", 2, TB_DIMS(1, -2));
    tb_name(m, k, "rm_dup");
    tb_output(m, "y");
    tb_expect_shape_error(m, "rm_dup");
}

static void t_argmax(void) {
    /* ArgMax axis 1 keepdims 0 on 2x3x4 -> 2x4 int64; FLOPs = 24.
     * ArgMin default axis 0, keepdims 1 -> 1x3x4 */
    mp_model *m = tb_new(13);
    tb_input(m, "x", F, 3, TB_DIMS(2, 3, 4));
    int k = tb_node(m, "ArgMax", "x", "y");
    tb_attr_i(m, k, "axis", 1);
    tb_attr_i(m, k, "keepdims", 0);
    tb_node(m, "ArgMin", "x", "z");
    tb_output(m, "y");
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x4");
    T_EQ(tb_val(m, "y")->dtype, MP_DT_INT64);
    T_EQ_STR(tb_shape(m, "z"), "1x3x4");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 24);
    tb_done(m, p);
}

/* ---- Dropout ---- */

static void t_dropout(void) {
    /* opset 12: ratio is an input; output like X, mask BOOL; 0 FLOPs.
     * Opset 7: mask has X's dtype. */
    mp_model *m = tb_new(12);
    tb_input(m, "x", F, 2, TB_DIMS(4, 16));
    tb_const_f(m, "r", F, 0, NULL, (const double[]){0.1});
    int k = tb_node(m, "Dropout", "x,r", "y,mask");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "4x16");
    T_EQ_STR(tb_shape(m, "mask"), "4x16");
    T_EQ(tb_val(m, "mask")->dtype, MP_DT_BOOL);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 0);
    T_CHECK(!(tb_nodep(m, k)->cost.flags & MP_COST_UNCOUNTED));
    tb_done(m, p);

    m = tb_new(7);
    tb_input(m, "x", F, 2, TB_DIMS(4, 16));
    tb_node(m, "Dropout", "x", "y,mask");
    tb_output(m, "y");
    p = tb_prof(m);
    T_EQ(tb_val(m, "mask")->dtype, MP_DT_FLOAT);
    tb_done(m, p);
}

/* ---- Resize / Upsample ---- */

static void t_resize_scales(void) {
    /* opset 13: X 1x3x32x32, roi omitted, scales [1,1,2,2] -> 1x3x64x64.
     * nearest: 0 FLOPs. linear: 2 resized axes * 3 = 6 per output element
     * -> 6 * 3*64*64 = 73728. */
    mp_model *m = tb_new(13);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 32, 32));
    tb_const_f(m, "sc", F, 1, TB_DIMS(4), (const double[]){1, 1, 2, 2});
    int a = tb_node(m, "Resize", "x,,sc", "y");
    int b = tb_node(m, "Resize", "x,,sc", "z");
    tb_attr_s(m, b, "mode", "linear");
    tb_output(m, "y");
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x3x64x64");
    T_EQ_STR(tb_shape(m, "z"), "1x3x64x64");
    T_EQ_U64(tb_nodep(m, a)->cost.flops, 0);
    T_EQ_U64(tb_nodep(m, b)->cost.flops, 73728);
    /* scales are not parameters */
    mp_totals t;
    mp_profile_totals(p, &t);
    T_EQ_U64(t.params, 0);
    tb_done(m, p);
}

static void t_resize_sizes(void) {
    /* opset 11: roi and scales empty, sizes [1,3,50,60] -> 1x3x50x60;
     * cubic: 2 resized axes * 7 = 14 per output element -> 14*9000 = 126000.
     * Scale 1.5 on 5 -> floor(7.5) = 7 (opset 10, scales at input 1). */
    mp_model *m = tb_new(11);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 32, 32));
    tb_const_f(m, "roi", F, 1, TB_DIMS(0), (const double[]){0});
    tb_const_f(m, "sc", F, 1, TB_DIMS(0), (const double[]){0});
    tb_const_i(m, "sz", I64, 1, TB_DIMS(4), TB_DIMS(1, 3, 50, 60));
    int k = tb_node(m, "Resize", "x,roi,sc,sz", "y");
    tb_attr_s(m, k, "mode", "cubic");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x3x50x60");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 126000);
    tb_done(m, p);

    m = tb_new(10);
    tb_input(m, "x", F, 4, TB_DIMS(1, 1, 5, 5));
    tb_const_f(m, "sc", F, 1, TB_DIMS(4), (const double[]){1, 1, 1.5, 1.5});
    tb_node(m, "Resize", "x,sc", "y");
    tb_output(m, "y");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x1x7x7");
    tb_done(m, p);
}

static void t_resize_unknown_sizes(void) {
    /* sizes computed at run time: rank known, resized dims unknown */
    mp_model *m = tb_new(13);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 32, 32));
    tb_input(m, "sz", I64, 1, TB_DIMS(4));
    tb_node(m, "Resize", "x,,,sz", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "?x?x?x?");
    tb_done(m, p);
}

static void t_resize_axes_policy(void) {
    /* opset 18, axes [2,3], sizes [20,30], not_larger on 40x40:
     * scale = min(20/40, 30/40) = 0.5 -> 20x20 */
    mp_model *m = tb_new(18);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 40, 40));
    tb_const_i(m, "sz", I64, 1, TB_DIMS(2), TB_DIMS(20, 30));
    int k = tb_node(m, "Resize", "x,,,sz", "y");
    tb_attr_ints(m, k, "axes", 2, TB_DIMS(2, 3));
    tb_attr_s(m, k, "keep_aspect_ratio_policy", "not_larger");
    k = tb_node(m, "Resize", "x,,,sz", "z");
    tb_attr_ints(m, k, "axes", 2, TB_DIMS(2, 3));
    tb_output(m, "y");
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x3x20x20");
    T_EQ_STR(tb_shape(m, "z"), "1x3x20x30");
    tb_done(m, p);
}

static void t_upsample(void) {
    /* Upsample-7 scales attribute [1,1,2,2]; Upsample-9 scales input */
    mp_model *m = tb_new(7);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 8, 8));
    int k = tb_node(m, "Upsample", "x", "y");
    tb_attr_floats(m, k, "scales", 4, (const double[]){1, 1, 2, 2});
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x3x16x16");
    tb_done(m, p);

    m = tb_new(9);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 8, 8));
    tb_const_f(m, "sc", F, 1, TB_DIMS(4), (const double[]){1, 1, 2, 2});
    k = tb_node(m, "Upsample", "x,sc", "y");
    tb_attr_s(m, k, "mode", "linear");
    tb_output(m, "y");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x3x16x16");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 6 * 3 * 16 * 16); /* 4608 */
    tb_done(m, p);

    /* PyTorch's export of F.interpolate(size=(13, 11)) from 7 x 9 at
     * opsets 9-10: scales 13/7 and 11/9 as floats; the products in float
     * are 13 and 11 (ONNX Runtime's; in double 12.9999996 and 10.9999998
     * floored to 12 and 10) */
    m = tb_new(9);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 7, 9));
    tb_const_f(m, "sc", F, 1, TB_DIMS(4), (const double[]){1, 1, 13.0 / 7, 11.0 / 9});
    tb_node(m, "Upsample", "x,sc", "y");
    tb_output(m, "y");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x3x13x11");
    tb_done(m, p);
}

static void t_resize_errors(void) {
    /* scales of the wrong length; neither scales nor sizes */
    mp_model *m = tb_new(13);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 8, 8));
    tb_const_f(m, "sc", F, 1, TB_DIMS(2), (const double[]){2, 2});
    int k = tb_node(m, "Resize", "x,,sc", "y");
    tb_name(m, k, "rs_len");
    tb_output(m, "y");
    tb_expect_shape_error(m, "rs_len");

    m = tb_new(13);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 8, 8));
    k = tb_node(m, "Resize", "x", "y");
    tb_name(m, k, "rs_none");
    tb_output(m, "y");
    tb_expect_shape_error(m, "rs_none");
}

static void t_unknown_rank_flows(void) {
    /* an input of unknown rank: no error. Conv still knows the rank from W
     * (?x8x?x?); Relu on the unknown-rank input stays unknown; a full
     * reduction with keepdims gives 1x1x1x1 again. Costs are unknown. */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, -1, NULL);
    tb_weight(m, "w", F, 4, TB_DIMS(8, 3, 3, 3));
    int k = tb_node(m, "Conv", "x,w", "y");
    int r = tb_node(m, "Relu", "x", "r");
    int q = tb_node(m, "MaxPool", "y", "q");
    tb_attr_ints(m, q, "kernel_shape", 2, TB_DIMS(2, 2));
    tb_node(m, "ReduceMean", "q", "z");
    tb_node(m, "Softmax", "r", "s");
    tb_output(m, "z");
    tb_output(m, "s");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "?x8x?x?");
    T_EQ_STR(tb_shape(m, "q"), "?x8x?x?");
    T_EQ_STR(tb_shape(m, "z"), "1x1x1x1");
    T_EQ_STR(tb_shape(m, "r"), "?rank");
    T_EQ_STR(tb_shape(m, "s"), "?rank");
    T_CHECK(tb_nodep(m, k)->cost.flags & MP_COST_UNKNOWN);
    T_CHECK(tb_nodep(m, r)->cost.flags & MP_COST_UNKNOWN);
    tb_done(m, p);
}

MP_TESTS(ops_nn) {
    {"conv_basic", t_conv_basic},
    {"conv_bias", t_conv_bias},
    {"conv_group", t_conv_group},
    {"conv_1d_dilated", t_conv_1d_dilated},
    {"conv_3d", t_conv_3d},
    {"conv_auto_pad", t_conv_auto_pad},
    {"conv_symbolic", t_conv_symbolic},
    {"conv_symbolic_spatial", t_conv_symbolic_spatial},
    {"conv_channel_mismatch", t_conv_channel_mismatch},
    {"conv_bad_attrs", t_conv_bad_attrs},
    {"convtranspose_basic", t_convtranspose_basic},
    {"convtranspose_output_padding", t_convtranspose_output_padding},
    {"convtranspose_output_shape", t_convtranspose_output_shape},
    {"convtranspose_mismatch", t_convtranspose_mismatch},
    {"maxpool_resnet", t_maxpool_resnet},
    {"pool_ceil_mode", t_pool_ceil_mode},
    {"pool_same_and_dilation", t_pool_same_and_dilation},
    {"pool_errors", t_pool_errors},
    {"global_pool", t_global_pool},
    {"batchnorm", t_batchnorm},
    {"batchnorm_training", t_batchnorm_training},
    {"batchnorm_mismatch", t_batchnorm_mismatch},
    {"layernorm", t_layernorm},
    {"layernorm_axis", t_layernorm_axis},
    {"instancenorm", t_instancenorm},
    {"groupnorm", t_groupnorm},
    {"other_norms", t_other_norms},
    {"softmax", t_softmax},
    {"reduce_axes_attr", t_reduce_axes_attr},
    {"reduce_axes_input", t_reduce_axes_input},
    {"reduce_fold", t_reduce_fold},
    {"reduce_bad_axis", t_reduce_bad_axis},
    {"argmax", t_argmax},
    {"dropout", t_dropout},
    {"resize_scales", t_resize_scales},
    {"resize_sizes", t_resize_sizes},
    {"resize_unknown_sizes", t_resize_unknown_sizes},
    {"resize_axes_policy", t_resize_axes_policy},
    {"upsample", t_upsample},
    {"resize_errors", t_resize_errors},
    {"unknown_rank_flows", t_unknown_rank_flows},
};
MP_TESTS_END(ops_nn)
