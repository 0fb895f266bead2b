/* Tests of src/ops/misc.c: losses, NonMaxSuppression, GridSample, random
 * generators, windows, TopK, DFT/STFT/MelWeightMatrix, RoiAlign,
 * MaxUnpool and Det. Every FLOP figure is computed by hand in the comment
 * next to it (docs/counting/misc.md has the same examples). */
#include "test.h"
#include "tbuild.h"

#define F MP_DT_FLOAT
#define D MP_DT_DOUBLE
#define I32 MP_DT_INT32
#define I64 MP_DT_INT64

static const mp_cost *cost(mp_model *m, int k) { return &tb_nodep(m, k)->cost; }

static mp_totals totals(mp_profile *p) {
    mp_totals t;
    mp_profile_totals(p, &t);
    return t;
}

/* ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ---- */

/* input [2,5,3,4], target int64 [2,3,4], class weights [5] */
static mp_model *nll_model(const char *op, const char *reduction, bool weight) {
    mp_model *m = tb_new(13);
    tb_input(m, "x", F, 4, TB_DIMS(2, 5, 3, 4));
    tb_input(m, "t", I64, 3, TB_DIMS(2, 3, 4));
    if (weight) tb_weight(m, "w", F, 1, TB_DIMS(5));
    int k = tb_node(m, op, weight ? "x,t,w" : "x,t", "y");
    tb_attr_s(m, k, "reduction", reduction);
    tb_output(m, "y");
    return m;
}

static void t_nll(void) {
    /* reduction none, weighted: loss [2,3,4]; T = 24 target elements,
     * 1 FLOP each (the weighted pick) = 24. The weights are a buffer: 0
     * params. */
    mp_model *m = nll_model("NegativeLogLikelihoodLoss", "none", true);
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x3x4");
    T_EQ(tb_val(m, "y")->dtype, F);
    T_EQ_U64(cost(m, 0)->flops, 24);
    T_EQ_U64(cost(m, 0)->macs, 0);
    T_EQ_U64(totals(p).params, 0);
    tb_done(m, p);

    /* mean, weighted: scalar; 24 picks + 24 adds + 1 division + 24 adds
     * for the weights' sum = 73 */
    m = nll_model("NegativeLogLikelihoodLoss", "mean", true);
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "scalar");
    T_EQ_U64(cost(m, 0)->flops, 73);
    tb_done(m, p);

    /* sum, unweighted: 24 + 24 = 48; mean unweighted: 24 + 24 + 1 = 49 */
    m = nll_model("NegativeLogLikelihoodLoss", "sum", false);
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "scalar");
    T_EQ_U64(cost(m, 0)->flops, 48);
    tb_done(m, p);
    m = nll_model("NegativeLogLikelihoodLoss", "mean", false);
    p = tb_prof(m);
    T_EQ_U64(cost(m, 0)->flops, 49);
    tb_done(m, p);
}

static void t_nll_symbolic(void) {
    /* input [N,5,d], target [N,d]: none keeps both symbols; the cost
     * waits for them */
    mp_model *m = tb_new(13);
    int64_t n = tb_sym(m, "N"), d = tb_sym(m, "d");
    tb_input(m, "x", F, 3, TB_DIMS(n, 5, d));
    tb_input(m, "t", I64, 2, TB_DIMS(MP_DIM_ANON, d));
    int k = tb_node(m, "NegativeLogLikelihoodLoss", "x,t", "y");
    tb_attr_s(m, k, "reduction", "none");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "Nxd");
    T_CHECK(cost(m, k)->flags & MP_COST_UNKNOWN);
    tb_done(m, p);
}

static void t_nll_errors(void) {
    /* target of rank 2 for an input of rank 4 */
    mp_model *m = tb_new(13);
    tb_input(m, "x", F, 4, TB_DIMS(2, 5, 3, 4));
    tb_input(m, "t", I64, 2, TB_DIMS(2, 3));
    int k = tb_node(m, "NegativeLogLikelihoodLoss", "x,t", "y");
    tb_name(m, k, "nll_rank");
    tb_output(m, "y");
    tb_expect_shape_error(m, "nll_rank");

    /* target dim 2 is 5, input's is 4 */
    m = tb_new(13);
    tb_input(m, "x", F, 4, TB_DIMS(2, 5, 3, 4));
    tb_input(m, "t", I64, 3, TB_DIMS(2, 3, 5));
    k = tb_node(m, "NegativeLogLikelihoodLoss", "x,t", "y");
    tb_name(m, k, "nll_dim");
    tb_output(m, "y");
    tb_expect_shape_error(m, "nll_dim");

    /* 4 weights for 5 classes */
    m = tb_new(13);
    tb_input(m, "x", F, 2, TB_DIMS(3, 5));
    tb_input(m, "t", I64, 1, TB_DIMS(3));
    tb_weight(m, "w", F, 1, TB_DIMS(4));
    k = tb_node(m, "SoftmaxCrossEntropyLoss", "x,t,w", "y");
    tb_name(m, k, "sce_weight");
    tb_output(m, "y");
    tb_expect_shape_error(m, "sce_weight");

    /* a float target; an unknown reduction */
    m = tb_new(13);
    tb_input(m, "x", F, 2, TB_DIMS(3, 5));
    tb_input(m, "t", F, 1, TB_DIMS(3));
    k = tb_node(m, "NegativeLogLikelihoodLoss", "x,t", "y");
    tb_name(m, k, "nll_float");
    tb_output(m, "y");
    tb_expect_shape_error(m, "nll_float");
    m = nll_model("NegativeLogLikelihoodLoss", "max", false);
    tb_name(m, 0, "nll_red");
    tb_expect_shape_error(m, "nll_red");
}

static void t_sce(void) {
    /* scores [3,5], labels [3], mean: z scalar, log_prob [3,5];
     * FLOPs = 3 x 15 (log-softmax) + 3 + 3 + 1 (NLL, mean) = 52 */
    mp_model *m = tb_new(13);
    tb_input(m, "x", F, 2, TB_DIMS(3, 5));
    tb_input(m, "t", I64, 1, TB_DIMS(3));
    int k = tb_node(m, "SoftmaxCrossEntropyLoss", "x,t", "z,lp");
    tb_output(m, "z");
    tb_output(m, "lp");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "z"), "scalar");
    T_EQ_STR(tb_shape(m, "lp"), "3x5");
    T_EQ(tb_val(m, "lp")->dtype, F);
    T_EQ_U64(cost(m, k)->flops, 52);
    tb_done(m, p);

    /* none, weighted, [2,4,6] scores: z [2,6]; 3 x 48 + 12 = 156 */
    m = tb_new(13);
    tb_input(m, "x", D, 3, TB_DIMS(2, 4, 6));
    tb_input(m, "t", I32, 2, TB_DIMS(2, 6));
    tb_weight(m, "w", D, 1, TB_DIMS(4));
    k = tb_node(m, "SoftmaxCrossEntropyLoss", "x,t,w", "z");
    tb_attr_s(m, k, "reduction", "none");
    tb_output(m, "z");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "z"), "2x6");
    T_EQ(tb_val(m, "z")->dtype, D);
    T_EQ_U64(cost(m, k)->flops, 156);
    T_EQ_U64(totals(p).params, 0);
    tb_done(m, p);
}

/* ---- NonMaxSuppression ---- */

static void t_nms(void) {
    /* boxes [1,6,4], scores [1,2,6], max_output_boxes_per_class = 2:
     * selected [?, 3] int64. Bound per class: sort 6 x ceil(log2 6) = 18;
     * m = 2 selected, pairs = 2*6 - 2*3/2 = 9, 13 each = 117 -> 135;
     * 2 classes -> 270 FLOPs, flagged as a bound */
    mp_model *m = tb_new(11);
    tb_input(m, "b", F, 3, TB_DIMS(1, 6, 4));
    tb_input(m, "s", F, 3, TB_DIMS(1, 2, 6));
    tb_const_i(m, "mo", I64, 1, TB_DIMS(1), TB_DIMS(2));
    tb_const_f(m, "iou", F, 1, TB_DIMS(1), (const double[]){0.5});
    int k = tb_node(m, "NonMaxSuppression", "b,s,mo,iou", "sel");
    tb_output(m, "sel");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "sel"), "?x3");
    T_EQ(tb_val(m, "sel")->dtype, I64);
    T_EQ_U64(cost(m, k)->flops, 270);
    T_CHECK(cost(m, k)->flags & MP_COST_BOUND);
    T_EQ_U64(totals(p).params, 0); /* the threshold is a buffer */
    tb_done(m, p);

    /* the limit unknown (a graph input): m = n = 6, pairs 6*5/2 = 15;
     * per class 18 + 195 = 213; 2 classes: 426 */
    m = tb_new(11);
    tb_input(m, "b", F, 3, TB_DIMS(1, 6, 4));
    tb_input(m, "s", F, 3, TB_DIMS(1, 2, 6));
    tb_input(m, "mo", I64, 1, TB_DIMS(1));
    k = tb_node(m, "NonMaxSuppression", "b,s,mo", "sel");
    tb_output(m, "sel");
    p = tb_prof(m);
    T_EQ_U64(cost(m, k)->flops, 426);
    tb_done(m, p);

    /* no limit: the default 0 selects nothing: [0, 3], 0 FLOPs */
    m = tb_new(11);
    tb_input(m, "b", F, 3, TB_DIMS(1, 6, 4));
    tb_input(m, "s", F, 3, TB_DIMS(1, 2, 6));
    k = tb_node(m, "NonMaxSuppression", "b,s", "sel");
    tb_output(m, "sel");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "sel"), "0x3");
    T_EQ_U64(cost(m, k)->flops, 0);
    tb_done(m, p);

    /* boxes [1,6,4] vs scores for 5 boxes */
    m = tb_new(11);
    tb_input(m, "b", F, 3, TB_DIMS(1, 6, 4));
    tb_input(m, "s", F, 3, TB_DIMS(1, 2, 5));
    k = tb_node(m, "NonMaxSuppression", "b,s", "sel");
    tb_name(m, k, "nms_boxes");
    tb_output(m, "sel");
    tb_expect_shape_error(m, "nms_boxes");
}

/* ---- GridSample ---- */

static void t_gridsample(void) {
    /* X [1,3,8,8], grid [1,4,5,2] -> [1,3,4,5] (60 elements):
     * bilinear 3 lerps x 3 = 9 each = 540; bicubic 5 cubic x 7 = 35 each =
     * 2100; nearest 0 */
    static const char *const modes[] = {"bilinear", "bicubic", "nearest"};
    static const uint64_t want[] = {540, 2100, 0};
    for (int i = 0; i < 3; i++) {
        mp_model *m = tb_new(16);
        tb_input(m, "x", F, 4, TB_DIMS(1, 3, 8, 8));
        tb_input(m, "g", F, 4, TB_DIMS(1, 4, 5, 2));
        int k = tb_node(m, "GridSample", "x,g", "y");
        tb_attr_s(m, k, "mode", modes[i]);
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        T_EQ_STR(tb_shape(m, "y"), "1x3x4x5");
        T_EQ_U64(cost(m, k)->flops, want[i]);
        tb_done(m, p);
    }

    /* opset 20, volumetric: X [1,2,4,4,4], grid [1,2,2,2,3] -> [1,2,2,2,2]
     * (16 elements); linear: 7 lerps x 3 = 21 each = 336 */
    mp_model *m = tb_new(20);
    tb_input(m, "x", F, 5, TB_DIMS(1, 2, 4, 4, 4));
    tb_input(m, "g", F, 5, TB_DIMS(1, 2, 2, 2, 3));
    int k = tb_node(m, "GridSample", "x,g", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x2x2x2x2");
    T_EQ_U64(cost(m, k)->flops, 336);
    tb_done(m, p);

    /* the same at opset 16 (4-D only) is an error; so is a grid whose
     * last dim is not the spatial rank, and mode "linear" at opset 16 */
    m = tb_new(16);
    tb_input(m, "x", F, 5, TB_DIMS(1, 2, 4, 4, 4));
    tb_input(m, "g", F, 5, TB_DIMS(1, 2, 2, 2, 3));
    k = tb_node(m, "GridSample", "x,g", "y");
    tb_name(m, k, "gs_5d");
    tb_output(m, "y");
    tb_expect_shape_error(m, "gs_5d");
    m = tb_new(16);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 8, 8));
    tb_input(m, "g", F, 4, TB_DIMS(1, 4, 5, 3));
    k = tb_node(m, "GridSample", "x,g", "y");
    tb_name(m, k, "gs_last");
    tb_output(m, "y");
    tb_expect_shape_error(m, "gs_last");
    m = tb_new(16);
    tb_input(m, "x", F, 4, TB_DIMS(1, 3, 8, 8));
    tb_input(m, "g", F, 4, TB_DIMS(1, 4, 5, 2));
    k = tb_node(m, "GridSample", "x,g", "y");
    tb_attr_s(m, k, "mode", "linear");
    tb_name(m, k, "gs_mode");
    tb_output(m, "y");
    tb_expect_shape_error(m, "gs_mode");
}

/* ---- random generators ---- */

static void t_random(void) {
    /* RandomUniform shape [2,3]: fp32 2x3, 1 FLOP per draw = 6;
     * RandomNormal dtype fp64 */
    mp_model *m = tb_new(17);
    int k = tb_node(m, "RandomUniform", "", "u");
    tb_attr_ints(m, k, "shape", 2, TB_DIMS(2, 3));
    int k2 = tb_node(m, "RandomNormal", "", "n");
    tb_attr_ints(m, k2, "shape", 1, TB_DIMS(7));
    tb_attr_i(m, k2, "dtype", D);
    tb_output(m, "u");
    tb_output(m, "n");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "u"), "2x3");
    T_EQ(tb_val(m, "u")->dtype, F);
    T_EQ_U64(cost(m, k)->flops, 6);
    T_EQ_STR(tb_shape(m, "n"), "7");
    T_EQ(tb_val(m, "n")->dtype, D);
    T_EQ_U64(cost(m, k2)->flops, 7);
    tb_done(m, p);

    /* -Like forms and Bernoulli: the input's shape; dtype attribute, else
     * the input's. Multinomial [3,10], sample_size 5 -> int32 [3,5], 15 */
    m = tb_new(17);
    tb_input(m, "x", MP_DT_FLOAT16, 2, TB_DIMS(4, 5));
    tb_input(m, "i", I64, 1, TB_DIMS(4));
    tb_input(m, "lg", F, 2, TB_DIMS(3, 10));
    k = tb_node(m, "RandomUniformLike", "i", "a");
    tb_attr_i(m, k, "dtype", F);
    tb_node(m, "RandomNormalLike", "x", "b");
    k2 = tb_node(m, "Bernoulli", "x", "c");
    int k3 = tb_node(m, "Bernoulli", "x", "d");
    tb_attr_i(m, k3, "dtype", MP_DT_BOOL);
    int k4 = tb_node(m, "Multinomial", "lg", "e");
    tb_attr_i(m, k4, "sample_size", 5);
    tb_output(m, "a");
    tb_output(m, "b");
    tb_output(m, "c");
    tb_output(m, "d");
    tb_output(m, "e");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "a"), "4");
    T_EQ(tb_val(m, "a")->dtype, F);
    T_EQ_STR(tb_shape(m, "b"), "4x5");
    T_EQ(tb_val(m, "b")->dtype, MP_DT_FLOAT16);
    T_EQ(tb_val(m, "c")->dtype, MP_DT_FLOAT16);
    T_EQ_U64(cost(m, k2)->flops, 20);
    T_EQ(tb_val(m, "d")->dtype, MP_DT_BOOL);
    T_EQ_STR(tb_shape(m, "e"), "3x5");
    T_EQ(tb_val(m, "e")->dtype, I32);
    T_EQ_U64(cost(m, k4)->flops, 15);
    tb_done(m, p);

    /* errors: no shape; an integer dtype for RandomUniform; a float dtype
     * for Multinomial */
    m = tb_new(17);
    k = tb_node(m, "RandomUniform", "", "u");
    tb_name(m, k, "ru_noshape");
    tb_output(m, "u");
    tb_expect_shape_error(m, "ru_noshape");
    m = tb_new(17);
    k = tb_node(m, "RandomNormal", "", "u");
    tb_attr_ints(m, k, "shape", 1, TB_DIMS(3));
    tb_attr_i(m, k, "dtype", I32);
    tb_name(m, k, "rn_int");
    tb_output(m, "u");
    tb_expect_shape_error(m, "rn_int");
    m = tb_new(17);
    tb_input(m, "lg", F, 2, TB_DIMS(3, 10));
    k = tb_node(m, "Multinomial", "lg", "e");
    tb_attr_i(m, k, "dtype", F);
    tb_name(m, k, "mn_float");
    tb_output(m, "e");
    tb_expect_shape_error(m, "mn_float");
}

/* ---- windows ---- */

static void t_windows(void) {
    /* size = 10 (an int32 scalar): [10] fp32, 1 FLOP per value = 10;
     * output_datatype fp64 */
    static const char *const ops[] = {"BlackmanWindow", "HammingWindow", "HannWindow"};
    for (int i = 0; i < 3; i++) {
        mp_model *m = tb_new(17);
        tb_const_i(m, "n", I32, 0, NULL, TB_DIMS(10));
        int k = tb_node(m, ops[i], "n", "w");
        int k2 = tb_node(m, ops[i], "n", "w64");
        tb_attr_i(m, k2, "output_datatype", D);
        tb_attr_i(m, k2, "periodic", 0);
        tb_output(m, "w");
        tb_output(m, "w64");
        mp_profile *p = tb_prof(m);
        T_EQ_STR(tb_shape(m, "w"), "10");
        T_EQ(tb_val(m, "w")->dtype, F);
        T_EQ(tb_val(m, "w64")->dtype, D);
        T_EQ_U64(cost(m, k)->flops, 10);
        tb_done(m, p);
    }
    /* size unknown: [?]; negative: an error */
    mp_model *m = tb_new(17);
    tb_input(m, "n", I64, 0, NULL);
    tb_node(m, "HannWindow", "n", "w");
    tb_output(m, "w");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "w"), "?");
    tb_done(m, p);
    m = tb_new(17);
    tb_const_i(m, "n", I64, 0, NULL, TB_DIMS(-3));
    int k = tb_node(m, "HannWindow", "n", "w");
    tb_name(m, k, "hann_neg");
    tb_output(m, "w");
    tb_expect_shape_error(m, "hann_neg");
}

/* ---- TopK ---- */

static void t_topk(void) {
    /* X [3,4], K = 3 on axis 1: Values fp32 [3,3], Indices int64 [3,3];
     * FLOPs = 12 elements x ceil(log2(3 + 1)) = 12 x 2 = 24 */
    mp_model *m = tb_new(11);
    tb_input(m, "x", F, 2, TB_DIMS(3, 4));
    tb_const_i(m, "k", I64, 1, TB_DIMS(1), TB_DIMS(3));
    int k = tb_node(m, "TopK", "x,k", "v,i");
    tb_attr_i(m, k, "axis", 1);
    tb_output(m, "v");
    tb_output(m, "i");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "v"), "3x3");
    T_EQ_STR(tb_shape(m, "i"), "3x3");
    T_EQ(tb_val(m, "v")->dtype, F);
    T_EQ(tb_val(m, "i")->dtype, I64);
    T_EQ_U64(cost(m, k)->flops, 24);
    tb_done(m, p);

    /* opset 1, attribute k = 1, default axis -1 on [2,5,8]: [2,5,1];
     * a max scan, 80 x ceil(log2 2) = 80 */
    m = tb_new(1);
    tb_input(m, "x", F, 3, TB_DIMS(2, 5, 8));
    k = tb_node(m, "TopK", "x", "v,i");
    tb_attr_i(m, k, "k", 1);
    tb_output(m, "v");
    tb_output(m, "i");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "v"), "2x5x1");
    T_EQ_U64(cost(m, k)->flops, 80);
    tb_done(m, p);

    /* K unknown (a graph input): [3,?]; the FLOPs take K <= 4, the axis
     * dim: 12 x ceil(log2 5) = 36, flagged as a bound (the output's bytes
     * stay unknown) */
    m = tb_new(11);
    tb_input(m, "x", F, 2, TB_DIMS(3, 4));
    tb_input(m, "k", I64, 1, TB_DIMS(1));
    k = tb_node(m, "TopK", "x,k", "v,i");
    tb_output(m, "v");
    tb_output(m, "i");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "v"), "3x?");
    T_EQ_U64(cost(m, k)->flops, 36);
    T_CHECK(cost(m, k)->flags & MP_COST_BOUND);
    tb_done(m, p);

    /* K = 5 on an axis of 4; opset 1 without k */
    m = tb_new(11);
    tb_input(m, "x", F, 2, TB_DIMS(3, 4));
    tb_const_i(m, "k", I64, 1, TB_DIMS(1), TB_DIMS(5));
    k = tb_node(m, "TopK", "x,k", "v,i");
    tb_name(m, k, "topk_big");
    tb_output(m, "v");
    tb_expect_shape_error(m, "topk_big");
    m = tb_new(1);
    tb_input(m, "x", F, 2, TB_DIMS(3, 4));
    k = tb_node(m, "TopK", "x", "v,i");
    tb_name(m, k, "topk_nok");
    tb_output(m, "v");
    tb_expect_shape_error(m, "topk_nok");
}

/* ---- DFT, STFT, MelWeightMatrix ---- */

static void t_dft(void) {
    /* real x [1,8,1], axis 1 -> [1,8,2]; one transform of 8:
     * 5 x 8 x 3 / 2 = 60 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(1, 8, 1));
    int k = tb_node(m, "DFT", "x", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x8x2");
    T_EQ_U64(cost(m, k)->flops, 60);
    tb_done(m, p);

    /* complex x [2,16,2], inverse: two transforms of 16: 2 x 5 x 16 x 4 =
     * 640 */
    m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(2, 16, 2));
    k = tb_node(m, "DFT", "x", "y");
    tb_attr_i(m, k, "inverse", 1);
    tb_output(m, "y");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x16x2");
    T_EQ_U64(cost(m, k)->flops, 640);
    tb_done(m, p);

    /* onesided, dft_length 16 on real [1,10,1]: [1, 16/2 + 1 = 9, 2];
     * 5 x 16 x 4 / 2 = 160 */
    m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(1, 10, 1));
    tb_const_i(m, "n", I64, 0, NULL, TB_DIMS(16));
    k = tb_node(m, "DFT", "x,n", "y");
    tb_attr_i(m, k, "onesided", 1);
    tb_output(m, "y");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x9x2");
    T_EQ_U64(cost(m, k)->flops, 160);
    tb_done(m, p);

    /* opset 20, axis input -2 on real [2,8,6,1]: axis 2 -> [2,8,6,2];
     * 16 transforms of 6: 5 x 6 x ceil(log2 6) / 2 = 45 each = 720 */
    m = tb_new(20);
    tb_input(m, "x", F, 4, TB_DIMS(2, 8, 6, 1));
    tb_const_i(m, "ax", I64, 0, NULL, TB_DIMS(-2));
    k = tb_node(m, "DFT", "x,,ax", "y");
    tb_output(m, "y");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x8x6x2");
    T_EQ_U64(cost(m, k)->flops, 720);
    tb_done(m, p);

    /* opset 20, axis unknown, onesided: which dim changes is unknown */
    m = tb_new(20);
    tb_input(m, "x", F, 4, TB_DIMS(2, 8, 6, 1));
    tb_input(m, "ax", I64, 0, NULL);
    k = tb_node(m, "DFT", "x,,ax", "y");
    tb_attr_i(m, k, "onesided", 1);
    tb_output(m, "y");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "?x?x?x2");
    T_CHECK(cost(m, k)->flags & MP_COST_UNKNOWN);
    tb_done(m, p);

    /* errors: a last dim of 3; axis on the component dim */
    m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(1, 8, 3));
    k = tb_node(m, "DFT", "x", "y");
    tb_name(m, k, "dft_last");
    tb_output(m, "y");
    tb_expect_shape_error(m, "dft_last");
    m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(1, 8, 1));
    k = tb_node(m, "DFT", "x", "y");
    tb_attr_i(m, k, "axis", 2);
    tb_name(m, k, "dft_axis");
    tb_output(m, "y");
    tb_expect_shape_error(m, "dft_axis");
}

static void t_stft(void) {
    /* signal [1,128,1], frame_step 8, window [16]: frames = (128 - 16) / 8
     * + 1 = 15, bins 16/2 + 1 = 9 -> [1,15,9,2]; per frame a real DFT of
     * 16 (5 x 16 x 4 / 2 = 160) + 16 window multiplies = 176; x 15 = 2640.
     * The window is a buffer. */
    mp_model *m = tb_new(17);
    tb_input(m, "s", F, 3, TB_DIMS(1, 128, 1));
    tb_const_i(m, "step", I64, 0, NULL, TB_DIMS(8));
    tb_weight(m, "w", F, 1, TB_DIMS(16));
    int k = tb_node(m, "STFT", "s,step,w", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x15x9x2");
    T_EQ_U64(cost(m, k)->flops, 2640);
    T_EQ_U64(totals(p).params, 0);
    tb_done(m, p);

    /* frame_length 16 without a window, onesided 0: [1,15,16,2];
     * 15 x 160 = 2400 */
    m = tb_new(17);
    tb_input(m, "s", F, 3, TB_DIMS(1, 128, 1));
    tb_const_i(m, "step", I64, 0, NULL, TB_DIMS(8));
    tb_const_i(m, "fl", I64, 0, NULL, TB_DIMS(16));
    k = tb_node(m, "STFT", "s,step,,fl", "y");
    tb_attr_i(m, k, "onesided", 0);
    tb_output(m, "y");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x15x16x2");
    T_EQ_U64(cost(m, k)->flops, 2400);
    tb_done(m, p);

    /* a window of 16 with frame_length 12; neither given */
    m = tb_new(17);
    tb_input(m, "s", F, 3, TB_DIMS(1, 128, 1));
    tb_const_i(m, "step", I64, 0, NULL, TB_DIMS(8));
    tb_weight(m, "w", F, 1, TB_DIMS(16));
    tb_const_i(m, "fl", I64, 0, NULL, TB_DIMS(12));
    k = tb_node(m, "STFT", "s,step,w,fl", "y");
    tb_name(m, k, "stft_len");
    tb_output(m, "y");
    tb_expect_shape_error(m, "stft_len");
    m = tb_new(17);
    tb_input(m, "s", F, 3, TB_DIMS(1, 128, 1));
    tb_const_i(m, "step", I64, 0, NULL, TB_DIMS(8));
    k = tb_node(m, "STFT", "s,step", "y");
    tb_name(m, k, "stft_none");
    tb_output(m, "y");
    tb_expect_shape_error(m, "stft_none");
}

static void t_melweight(void) {
    /* num_mel_bins 8, dft_length 16 -> [16/2 + 1 = 9, 8] fp32, 72 FLOPs */
    mp_model *m = tb_new(17);
    tb_const_i(m, "nb", I32, 0, NULL, TB_DIMS(8));
    tb_const_i(m, "len", I32, 0, NULL, TB_DIMS(16));
    tb_const_i(m, "sr", I32, 0, NULL, TB_DIMS(8192));
    tb_const_f(m, "lo", F, 0, NULL, (const double[]){0});
    tb_const_f(m, "hi", F, 0, NULL, (const double[]){4096});
    int k = tb_node(m, "MelWeightMatrix", "nb,len,sr,lo,hi", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "9x8");
    T_EQ(tb_val(m, "y")->dtype, F);
    T_EQ_U64(cost(m, k)->flops, 72);
    tb_done(m, p);
}

/* ---- RoiAlign ---- */

/* X [1,4,10,10], rois [2,4] (known unless rois_input), 3x3 bins */
static mp_model *roi_model(int opset, int64_t ratio, bool rois_input, const char *mode) {
    mp_model *m = tb_new(opset);
    tb_input(m, "x", F, 4, TB_DIMS(1, 4, 10, 10));
    if (rois_input)
        tb_input(m, "r", F, 2, TB_DIMS(2, 4));
    else
        tb_const_f(m, "r", F, 2, TB_DIMS(2, 4), (const double[]){0, 0, 6, 6, 0, 0, 9, 3});
    tb_const_i(m, "bi", I64, 1, TB_DIMS(2), TB_DIMS(0, 0));
    int k = tb_node(m, "RoiAlign", "x,r,bi", "y");
    tb_attr_i(m, k, "output_height", 3);
    tb_attr_i(m, k, "output_width", 3);
    tb_attr_i(m, k, "sampling_ratio", ratio);
    tb_attr_s(m, k, "mode", mode);
    tb_output(m, "y");
    return m;
}

static void t_roialign(void) {
    /* sampling_ratio 2: Y [2,4,3,3] (72 elements); 4 samples x 10 + 1
     * (avg) = 41 each = 2952. The rois are a buffer. */
    mp_model *m = roi_model(16, 2, false, "avg");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x4x3x3");
    T_EQ_U64(cost(m, 0)->flops, 2952);
    T_EQ_U64(totals(p).params, 0);
    tb_done(m, p);

    /* adaptive (0) with known rois, half_pixel, scale 1:
     * roi 1 (0,0)-(6,6): ceil(6/3) x ceil(6/3) = 4 samples per bin;
     * roi 2 (0,0)-(9,3): ceil(3/3) x ceil(9/3) = 3; 7 x (4 x 3 x 3 = 36
     * bins) = 252 samples x 10 = 2520 + 72 divisions = 2592 */
    m = roi_model(16, 0, false, "avg");
    p = tb_prof(m);
    T_EQ_U64(cost(m, 0)->flops, 2592);
    T_CHECK(!(cost(m, 0)->flags & MP_COST_BOUND));
    tb_done(m, p);

    /* adaptive with unknown rois: bounded by a roi as large as the map,
     * ceil(10/3)^2 = 16 samples per output element: 72 x 160 = 11520;
     * mode max has no division; flagged as a bound */
    m = roi_model(10, 0, true, "max");
    p = tb_prof(m);
    T_EQ_U64(cost(m, 0)->flops, 11520);
    T_CHECK(cost(m, 0)->flags & MP_COST_BOUND);
    tb_done(m, p);

    /* rois [2,4] with 3 batch indices */
    m = tb_new(16);
    tb_input(m, "x", F, 4, TB_DIMS(1, 4, 10, 10));
    tb_input(m, "r", F, 2, TB_DIMS(2, 4));
    tb_input(m, "bi", I64, 1, TB_DIMS(3));
    int k = tb_node(m, "RoiAlign", "x,r,bi", "y");
    tb_name(m, k, "roi_count");
    tb_output(m, "y");
    tb_expect_shape_error(m, "roi_count");
}

/* ---- MaxUnpool ---- */

static void t_maxunpool(void) {
    /* X [1,1,2,2], kernel 2, stride 2: (2 - 1) x 2 + 2 = 4 -> [1,1,4,4];
     * a scatter: 0 FLOPs */
    mp_model *m = tb_new(11);
    tb_input(m, "x", F, 4, TB_DIMS(1, 1, 2, 2));
    tb_input(m, "i", I64, 4, TB_DIMS(1, 1, 2, 2));
    int k = tb_node(m, "MaxUnpool", "x,i", "y");
    tb_attr_ints(m, k, "kernel_shape", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, k, "strides", 2, TB_DIMS(2, 2));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x1x4x4");
    T_EQ_U64(cost(m, k)->flops, 0);
    tb_done(m, p);

    /* output_shape [1,1,5,5] given; pads: X [1,3,4,4], kernel 3, stride 2,
     * pads 1: (4 - 1) x 2 + 3 - 2 = 7 */
    m = tb_new(11);
    tb_input(m, "x", F, 4, TB_DIMS(1, 1, 2, 2));
    tb_input(m, "i", I64, 4, TB_DIMS(1, 1, 2, 2));
    tb_const_i(m, "os", I64, 1, TB_DIMS(4), TB_DIMS(1, 1, 5, 5));
    k = tb_node(m, "MaxUnpool", "x,i,os", "y");
    tb_attr_ints(m, k, "kernel_shape", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, k, "strides", 2, TB_DIMS(2, 2));
    tb_input(m, "x2", F, 4, TB_DIMS(1, 3, 4, 4));
    tb_input(m, "i2", I64, 4, TB_DIMS(1, 3, 4, 4));
    int k2 = tb_node(m, "MaxUnpool", "x2,i2", "y2");
    tb_attr_ints(m, k2, "kernel_shape", 2, TB_DIMS(3, 3));
    tb_attr_ints(m, k2, "strides", 2, TB_DIMS(2, 2));
    tb_attr_ints(m, k2, "pads", 4, TB_DIMS(1, 1, 1, 1));
    tb_output(m, "y");
    tb_output(m, "y2");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x1x5x5");
    T_EQ_STR(tb_shape(m, "y2"), "1x3x7x7");
    tb_done(m, p);

    /* no kernel_shape; I's shape differs from X's */
    m = tb_new(11);
    tb_input(m, "x", F, 4, TB_DIMS(1, 1, 2, 2));
    tb_input(m, "i", I64, 4, TB_DIMS(1, 1, 2, 2));
    k = tb_node(m, "MaxUnpool", "x,i", "y");
    tb_name(m, k, "unpool_nok");
    tb_output(m, "y");
    tb_expect_shape_error(m, "unpool_nok");
    m = tb_new(11);
    tb_input(m, "x", F, 4, TB_DIMS(1, 1, 2, 2));
    tb_input(m, "i", I64, 4, TB_DIMS(1, 1, 2, 3));
    k = tb_node(m, "MaxUnpool", "x,i", "y");
    tb_attr_ints(m, k, "kernel_shape", 2, TB_DIMS(2, 2));
    tb_name(m, k, "unpool_i");
    tb_output(m, "y");
    tb_expect_shape_error(m, "unpool_i");
}

/* ---- Det ---- */

static void t_det(void) {
    /* [3,2,2] -> [3]: floor(2 x 8 / 3) = 5 per matrix, 15; [4,4] -> scalar:
     * floor(2 x 64 / 3) = 42 */
    mp_model *m = tb_new(11);
    tb_input(m, "a", F, 3, TB_DIMS(3, 2, 2));
    tb_input(m, "b", F, 2, TB_DIMS(4, 4));
    int k = tb_node(m, "Det", "a", "da");
    int k2 = tb_node(m, "Det", "b", "db");
    tb_output(m, "da");
    tb_output(m, "db");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "da"), "3");
    T_EQ_STR(tb_shape(m, "db"), "scalar");
    T_EQ_U64(cost(m, k)->flops, 15);
    T_EQ_U64(cost(m, k2)->flops, 42);
    tb_done(m, p);

    m = tb_new(11);
    tb_input(m, "a", F, 3, TB_DIMS(3, 2, 3));
    k = tb_node(m, "Det", "a", "d");
    tb_name(m, k, "det_square");
    tb_output(m, "d");
    tb_expect_shape_error(m, "det_square");
}

/* ---- unknown ranks flow through ---- */

static void t_unknown_rank(void) {
    /* rank-unknown inputs: outputs unknown (or of a known rank where the
     * rule fixes it), costs unknown, never an error */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, -1, NULL);
    tb_input(m, "t", I64, -1, NULL);
    tb_input(m, "k", I64, -1, NULL);
    int k1 = tb_node(m, "TopK", "x,k", "v,i");
    int k2 = tb_node(m, "NegativeLogLikelihoodLoss", "x,t", "l");
    tb_attr_s(m, k2, "reduction", "none");
    tb_node(m, "DFT", "x", "f");
    tb_node(m, "Det", "x", "d");
    tb_node(m, "NonMaxSuppression", "x,x,k", "sel");
    tb_output(m, "v");
    tb_output(m, "l");
    tb_output(m, "f");
    tb_output(m, "d");
    tb_output(m, "sel");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "v"), "?rank");
    T_EQ_STR(tb_shape(m, "l"), "?rank");
    T_EQ_STR(tb_shape(m, "sel"), "?x3");
    T_CHECK(cost(m, k1)->flags & MP_COST_UNKNOWN);
    T_CHECK(cost(m, k2)->flags & MP_COST_UNKNOWN);
    tb_done(m, p);
}

static void t_tfidf(void) {
    /* X [2, 6] int32, grams 1..2, skips 0..5, ngram_indexes max 6, TFIDF:
     * Y float [2, 7]; FLOPs = 12 positions x 2 lengths x 6 skips = 144
     * lookups + 14 weight multiplies = 158. */
    mp_model *m = tb_new(17);
    tb_input(m, "x", MP_DT_INT32, 2, TB_DIMS(2, 6));
    int k = tb_node(m, "TfIdfVectorizer", "x", "y");
    tb_attr_i(m, k, "min_gram_length", 1);
    tb_attr_i(m, k, "max_gram_length", 2);
    tb_attr_i(m, k, "max_skip_count", 5);
    tb_attr_s(m, k, "mode", "TFIDF");
    tb_attr_ints(m, k, "ngram_indexes", 4, TB_DIMS(0, 1, 6, 2));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x7");
    T_EQ(tb_val(m, "y")->dtype, MP_DT_FLOAT);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 158);
    tb_done(m, p);
    /* a 1-D input gives a 1-D output; indexes are required */
    m = tb_new(17);
    tb_input(m, "x", MP_DT_INT64, 1, TB_DIMS(9));
    k = tb_node(m, "TfIdfVectorizer", "x", "y");
    tb_attr_ints(m, k, "ngram_indexes", 2, TB_DIMS(3, 1));
    tb_output(m, "y");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "4");
    tb_done(m, p);
    m = tb_new(17);
    tb_input(m, "x", MP_DT_INT64, 1, TB_DIMS(9));
    tb_node(m, "TfIdfVectorizer", "x", "y");
    tb_output(m, "y");
    tb_expect_shape_error(m, "ngram_indexes");
}

MP_TESTS(ops_misc) {
    {"tfidf", t_tfidf},
    {"nll", t_nll},
    {"nll_symbolic", t_nll_symbolic},
    {"nll_errors", t_nll_errors},
    {"sce", t_sce},
    {"nms", t_nms},
    {"gridsample", t_gridsample},
    {"random", t_random},
    {"windows", t_windows},
    {"topk", t_topk},
    {"dft", t_dft},
    {"stft", t_stft},
    {"melweight", t_melweight},
    {"roialign", t_roialign},
    {"maxunpool", t_maxunpool},
    {"det", t_det},
    {"unknown_rank", t_unknown_rank},
};
MP_TESTS_END(ops_misc)
