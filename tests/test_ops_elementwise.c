/* Tests of src/ops/elementwise.c: broadcasting, costs and the known
 * contents computed for shape arithmetic. Figures are computed by hand in
 * the comments. */
#include "test.h"
#include "tbuild.h"

#define F MP_DT_FLOAT
#define I64 MP_DT_INT64
#define B MP_DT_BOOL

/* ---- costs ---- */

static void t_relu_cost(void) {
    /* Relu on 1x64x56x56: 1 FLOP per element = 200704, no MACs */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 64, 56, 56));
    int k = tb_node(m, "Relu", "x", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x64x56x56");
    T_EQ(tb_val(m, "y")->dtype, MP_DT_FLOAT);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 200704);
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 0);
    tb_done(m, p);
}

static void t_unary_all(void) {
    /* every unary op resolves at opset 21, keeps the 2x3 shape and costs
     * 6 FLOPs (1 per element); IsNaN/IsInf give BOOL */
    static const char *const ops[] = {
        "Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Erf", "Gelu",
        "Softplus", "Softsign", "Elu", "Selu", "Celu", "ThresholdedRelu", "Mish", "Exp",
        "Log", "Sqrt", "Reciprocal", "Neg", "Abs", "Floor", "Ceil", "Round", "Sign", "Sin",
        "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
        "IsNaN", "IsInf", "Clip", "Shrink"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        mp_model *m = tb_new(21);
        tb_input(m, "x", F, 2, TB_DIMS(2, 3));
        int k = tb_node(m, ops[i], "x", "y");
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        if (!tb_nodep(m, k)->desc) mp_t_fail(__FILE__, __LINE__, "%s not resolved", ops[i]);
        T_EQ_STR(tb_shape(m, "y"), "2x3");
        T_EQ_U64(tb_nodep(m, k)->cost.flops, 6);
        bool is_bool = !strcmp(ops[i], "IsNaN") || !strcmp(ops[i], "IsInf");
        T_EQ(tb_val(m, "y")->dtype, is_bool ? MP_DT_BOOL : MP_DT_FLOAT);
        tb_done(m, p);
    }
    /* logic and bit ops on their own types */
    static const char *const iops[] = {"Not", "BitwiseNot"};
    static const int idt[] = {MP_DT_BOOL, MP_DT_INT32};
    for (int i = 0; i < 2; i++) {
        mp_model *m = tb_new(21);
        tb_input(m, "x", idt[i], 2, TB_DIMS(2, 3));
        int k = tb_node(m, iops[i], "x", "y");
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        T_EQ_STR(tb_shape(m, "y"), "2x3");
        T_EQ(tb_val(m, "y")->dtype, idt[i]);
        T_EQ_U64(tb_nodep(m, k)->cost.flops, 6);
        tb_done(m, p);
    }
}

static void t_opset_versions(void) {
    /* Gelu exists from opset 20; Clip takes inputs from 11; ai.onnx is the
     * default domain */
    T_CHECK(mp_op_find("", "Gelu", 17) == NULL);
    T_CHECK(mp_op_find("", "Gelu", 20) != NULL);
    const mp_op *c6 = mp_op_find("", "Clip", 6), *c13 = mp_op_find("", "Clip", 13);
    T_CHECK(c6 && c13 && c6 != c13);
    if (c6) T_EQ(c6->since, 1);
    if (c13) T_EQ(c13->since, 11);
    T_CHECK(mp_op_find("ai.onnx", "Add", 14) == mp_op_find("", "Add", 14));
    T_CHECK(mp_op_find("", "Where", 8) == NULL);
}

static void t_binary_broadcast(void) {
    /* [2,1,4] + [3,1] -> [2,3,4] (aligned from the right): 24 FLOPs */
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 3, TB_DIMS(2, 1, 4));
    tb_input(m, "b", F, 2, TB_DIMS(3, 1));
    int k = tb_node(m, "Add", "a,b", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x3x4");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 24);
    tb_done(m, p);
}

static void t_binary_all(void) {
    /* every binary op: [4,1] op [3] -> [4,3], 12 FLOPs; comparisons BOOL */
    static const struct { const char *op; int in, out; } ops[] = {
        {"Add", F, F}, {"Sub", F, F}, {"Mul", F, F}, {"Div", F, F}, {"Pow", F, F},
        {"Mod", I64, I64}, {"Equal", F, B}, {"Less", F, B}, {"Greater", F, B},
        {"LessOrEqual", F, B}, {"GreaterOrEqual", F, B}, {"And", B, B}, {"Or", B, B},
        {"Xor", B, B}, {"BitwiseAnd", I64, I64}, {"BitwiseOr", I64, I64},
        {"BitwiseXor", I64, I64}, {"BitShift", MP_DT_UINT8, MP_DT_UINT8}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        mp_model *m = tb_new(21);
        tb_input(m, "a", ops[i].in, 2, TB_DIMS(4, 1));
        tb_input(m, "b", ops[i].in, 1, TB_DIMS(3));
        int k = tb_node(m, ops[i].op, "a,b", "y");
        if (!strcmp(ops[i].op, "BitShift")) tb_attr_s(m, k, "direction", "RIGHT");
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        T_EQ_STR(tb_shape(m, "y"), "4x3");
        if (tb_val(m, "y")->dtype != ops[i].out)
            mp_t_fail(__FILE__, __LINE__, "%s gives dtype %d", ops[i].op, tb_val(m, "y")->dtype);
        T_EQ_U64(tb_nodep(m, k)->cost.flops, 12);
        tb_done(m, p);
    }
}

static void t_broadcast_symbolic(void) {
    /* [N,1,4] * [3,1] -> N x 3 x 4; [N,3] + [1,3] -> N x 3; a symbolic
     * dim against a known one > 1 takes the known one */
    mp_model *m = tb_new(17);
    int64_t n = tb_sym(m, "N"), s = tb_sym(m, "S");
    tb_input(m, "a", F, 3, TB_DIMS(n, 1, 4));
    tb_input(m, "b", F, 2, TB_DIMS(3, 1));
    tb_input(m, "c", F, 2, TB_DIMS(n, 3));
    tb_input(m, "d", F, 2, TB_DIMS(1, 3));
    tb_input(m, "e", F, 1, TB_DIMS(s));
    tb_input(m, "f", F, 1, TB_DIMS(5));
    int k = tb_node(m, "Mul", "a,b", "y");
    tb_node(m, "Add", "c,d", "z");
    tb_node(m, "Add", "e,f", "w");
    tb_output(m, "y");
    tb_output(m, "z");
    tb_output(m, "w");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "Nx3x4");
    T_EQ_STR(tb_shape(m, "z"), "Nx3");
    T_EQ_STR(tb_shape(m, "w"), "5");
    T_CHECK(tb_nodep(m, k)->cost.flags & MP_COST_UNKNOWN);
    tb_done(m, p);
}

static void t_broadcast_error(void) {
    /* [2,3] + [4]: 3 vs 4 cannot broadcast */
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(2, 3));
    tb_input(m, "b", F, 1, TB_DIMS(4));
    int k = tb_node(m, "Add", "a,b", "y");
    tb_name(m, k, "add_bad");
    tb_output(m, "y");
    tb_expect_shape_error(m, "add_bad");

    /* a binary op with one input */
    m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(2, 3));
    k = tb_node(m, "Mul", "a", "y");
    tb_name(m, k, "mul_one");
    tb_output(m, "y");
    tb_expect_shape_error(m, "mul_one");
}

static void t_legacy_broadcast(void) {
    /* opset 6: Add(A 2x3x4x5, B [3], broadcast=1, axis=1) -> A's shape,
     * 120 FLOPs */
    mp_model *m = tb_new(6);
    tb_input(m, "a", F, 4, TB_DIMS(2, 3, 4, 5));
    tb_weight(m, "b", F, 1, TB_DIMS(3));
    int k = tb_node(m, "Add", "a,b", "y");
    tb_attr_i(m, k, "broadcast", 1);
    tb_attr_i(m, k, "axis", 1);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x3x4x5");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 120);
    tb_done(m, p);
}

static void t_variadic(void) {
    /* Sum of 3 inputs [4,5]: (3-1)*20 = 40; Max of [4,5] and [5]: 20;
     * Mean of 3: 3*20 = 60; Sum of one input: 0 */
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(4, 5));
    tb_input(m, "b", F, 2, TB_DIMS(4, 5));
    tb_input(m, "c", F, 1, TB_DIMS(5));
    int s = tb_node(m, "Sum", "a,b,c", "s");
    int x = tb_node(m, "Max", "a,c", "x");
    int n = tb_node(m, "Min", "a,b", "n");
    int e = tb_node(m, "Mean", "a,b,c", "e");
    int o = tb_node(m, "Sum", "a", "o");
    tb_output(m, "s");
    tb_output(m, "x");
    tb_output(m, "n");
    tb_output(m, "e");
    tb_output(m, "o");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "s"), "4x5");
    T_EQ_STR(tb_shape(m, "x"), "4x5");
    T_EQ_U64(tb_nodep(m, s)->cost.flops, 40);
    T_EQ_U64(tb_nodep(m, x)->cost.flops, 20);
    T_EQ_U64(tb_nodep(m, n)->cost.flops, 20);
    T_EQ_U64(tb_nodep(m, e)->cost.flops, 60);
    T_EQ_U64(tb_nodep(m, o)->cost.flops, 0);
    tb_done(m, p);
}

static void t_where(void) {
    /* Where(cond [3,1] bool, x [1,4] fp16, y scalar) -> [3,4] fp16, 12 FLOPs */
    mp_model *m = tb_new(17);
    tb_input(m, "c", B, 2, TB_DIMS(3, 1));
    tb_input(m, "x", MP_DT_FLOAT16, 2, TB_DIMS(1, 4));
    tb_input(m, "y", MP_DT_FLOAT16, 0, NULL);
    int k = tb_node(m, "Where", "c,x,y", "z");
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "z"), "3x4");
    T_EQ(tb_val(m, "z")->dtype, MP_DT_FLOAT16);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 12);
    tb_done(m, p);
}

static void t_prelu(void) {
    /* X 1x8x4x4, slope [8,1,1]: shape of X, 128 FLOPs, 8 params */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 8, 4, 4));
    tb_weight(m, "s", F, 3, TB_DIMS(8, 1, 1));
    int k = tb_node(m, "PRelu", "x,s", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "1x8x4x4");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 128);
    mp_totals t;
    mp_profile_totals(p, &t);
    T_EQ_U64(t.params, 8);
    tb_done(m, p);

    /* 4 slopes for 8 channels */
    m = tb_new(17);
    tb_input(m, "x", F, 4, TB_DIMS(1, 8, 4, 4));
    tb_weight(m, "s", F, 3, TB_DIMS(4, 1, 1));
    k = tb_node(m, "PRelu", "x,s", "y");
    tb_name(m, k, "prelu_bad");
    tb_output(m, "y");
    tb_expect_shape_error(m, "prelu_bad");
}

static void t_prelu_legacy(void) {
    /* opset 6 (PyTorch's export of nn.PReLU(3)): X [2,3,4], slope [3] is
     * one slope per channel (X's dim 1), no numpy broadcast: Y [2,3,4],
     * 24 FLOPs, 3 params */
    mp_model *m = tb_new(6);
    tb_input(m, "x", F, 3, TB_DIMS(2, 3, 4));
    tb_weight(m, "s", F, 1, TB_DIMS(3));
    int k = tb_node(m, "PRelu", "x,s", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x3x4");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 24);
    mp_totals t;
    mp_profile_totals(p, &t);
    T_EQ_U64(t.params, 3);
    tb_done(m, p);

    /* a single shared slope [1] folds known contents: [-2, 3] -> [-0.5, 3] */
    m = tb_new(6);
    tb_const_f(m, "x", F, 1, TB_DIMS(2), (const double[]){-2, 3});
    tb_const_f(m, "s", F, 1, TB_DIMS(1), (const double[]){0.25});
    tb_node(m, "PRelu", "x,s", "y");
    tb_output(m, "y");
    p = tb_prof(m);
    tb_check_floats(m, "y", 2, (const double[]){-0.5, 3});
    tb_done(m, p);

    /* 5 slopes for 3 channels (and not a numpy broadcast either) */
    m = tb_new(6);
    tb_input(m, "x", F, 3, TB_DIMS(2, 3, 4));
    tb_weight(m, "s", F, 1, TB_DIMS(5));
    k = tb_node(m, "PRelu", "x,s", "y");
    tb_name(m, k, "prelu6_bad");
    tb_output(m, "y");
    tb_expect_shape_error(m, "prelu6_bad");

    /* from opset 7 the same [3] slope broadcasts numpy-style against 4 */
    m = tb_new(7);
    tb_input(m, "x", F, 3, TB_DIMS(2, 3, 4));
    tb_weight(m, "s", F, 1, TB_DIMS(3));
    k = tb_node(m, "PRelu", "x,s", "y");
    tb_name(m, k, "prelu7_bad");
    tb_output(m, "y");
    tb_expect_shape_error(m, "prelu7_bad");
}

/* ---- known contents (shape arithmetic) ---- */

static void t_fold_mul_div(void) {
    /* the exporter's dynamic-axes pattern: shape {6, 8} * 2 = {12, 16};
     * {12, 16} / {5, -3} = {2, -5} (truncation toward zero);
     * {12, 16} - 4 = {8, 12}; + {1} = {9, 13} */
    mp_model *m = tb_new(17);
    tb_const_i(m, "shape", I64, 1, TB_DIMS(2), TB_DIMS(6, 8));
    tb_const_i(m, "two", I64, 0, NULL, TB_DIMS(2));
    tb_const_i(m, "den", I64, 1, TB_DIMS(2), TB_DIMS(5, -3));
    tb_const_i(m, "four", I64, 0, NULL, TB_DIMS(4));
    tb_const_i(m, "one", I64, 1, TB_DIMS(1), TB_DIMS(1));
    tb_node(m, "Mul", "shape,two", "m");
    tb_node(m, "Div", "m,den", "d");
    tb_node(m, "Sub", "m,four", "s");
    tb_node(m, "Add", "s,one", "a");
    tb_output(m, "d");
    tb_output(m, "a");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "m"), "2");
    tb_check_ints(m, "m", 2, TB_DIMS(12, 16));
    tb_check_ints(m, "d", 2, TB_DIMS(2, -5));
    tb_check_ints(m, "s", 2, TB_DIMS(8, 12));
    tb_check_ints(m, "a", 2, TB_DIMS(9, 13));
    tb_done(m, p);
}

static void t_fold_broadcast(void) {
    /* [2,1] {10,20} + [3] {1,2,3} -> [2,3] {11,12,13,21,22,23} */
    mp_model *m = tb_new(17);
    tb_const_i(m, "a", I64, 2, TB_DIMS(2, 1), TB_DIMS(10, 20));
    tb_const_i(m, "b", I64, 1, TB_DIMS(3), TB_DIMS(1, 2, 3));
    tb_node(m, "Add", "a,b", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x3");
    tb_check_ints(m, "y", 6, TB_DIMS(11, 12, 13, 21, 22, 23));
    tb_done(m, p);
}

static void t_fold_where_compare(void) {
    /* Equal({1,2,3}, 2) = {0,1,0}; Not = {1,0,1};
     * Where({1,0,1}, {1,2,3}, -1) = {1,-1,3}; Less, Greater;
     * Where with float branches and a bool condition */
    mp_model *m = tb_new(17);
    tb_const_i(m, "v", I64, 1, TB_DIMS(3), TB_DIMS(1, 2, 3));
    tb_const_i(m, "two", I64, 0, NULL, TB_DIMS(2));
    tb_const_i(m, "neg", I64, 0, NULL, TB_DIMS(-1));
    tb_const_f(m, "fa", F, 1, TB_DIMS(3), (const double[]){0.5, 1.5, 2.5});
    tb_const_f(m, "fb", F, 0, NULL, (const double[]){-2});
    tb_node(m, "Equal", "v,two", "eq");
    tb_node(m, "Not", "eq", "ne");
    tb_node(m, "Where", "ne,v,neg", "w");
    tb_node(m, "Less", "v,two", "lt");
    tb_node(m, "Greater", "v,two", "gt");
    tb_node(m, "Where", "lt,fa,fb", "wf");
    tb_output(m, "w");
    tb_output(m, "gt");
    tb_output(m, "wf");
    mp_profile *p = tb_prof(m);
    T_EQ(tb_val(m, "eq")->dtype, MP_DT_BOOL);
    tb_check_ints(m, "eq", 3, TB_DIMS(0, 1, 0));
    tb_check_ints(m, "ne", 3, TB_DIMS(1, 0, 1));
    tb_check_ints(m, "w", 3, TB_DIMS(1, -1, 3));
    tb_check_ints(m, "lt", 3, TB_DIMS(1, 0, 0));
    tb_check_ints(m, "gt", 3, TB_DIMS(0, 0, 1));
    T_EQ(tb_val(m, "wf")->dtype, MP_DT_FLOAT);
    tb_check_floats(m, "wf", 3, (const double[]){0.5, -2, -2});
    tb_done(m, p);
}

static void t_fold_unary_minmax(void) {
    /* Neg {3,-4} = {-3,4}; Abs = {3,4}; Sqrt {4.0, 9.0} = {2,3};
     * Max({1,5},{3,2}) = {3,5}; Min = {1,2}; Max of three with broadcast */
    mp_model *m = tb_new(17);
    tb_const_i(m, "a", I64, 1, TB_DIMS(2), TB_DIMS(3, -4));
    tb_const_f(m, "f", F, 1, TB_DIMS(2), (const double[]){4, 9});
    tb_const_i(m, "p", I64, 1, TB_DIMS(2), TB_DIMS(1, 5));
    tb_const_i(m, "q", I64, 1, TB_DIMS(2), TB_DIMS(3, 2));
    tb_const_i(m, "r", I64, 0, NULL, TB_DIMS(4));
    tb_node(m, "Neg", "a", "neg");
    tb_node(m, "Abs", "a", "abs");
    tb_node(m, "Sqrt", "f", "sq");
    tb_node(m, "Max", "p,q", "mx");
    tb_node(m, "Min", "p,q", "mn");
    tb_node(m, "Max", "p,q,r", "mx3");
    tb_output(m, "neg");
    tb_output(m, "abs");
    tb_output(m, "sq");
    tb_output(m, "mx");
    tb_output(m, "mn");
    tb_output(m, "mx3");
    mp_profile *p = tb_prof(m);
    tb_check_ints(m, "neg", 2, TB_DIMS(-3, 4));
    tb_check_ints(m, "abs", 2, TB_DIMS(3, 4));
    tb_check_floats(m, "sq", 2, (const double[]){2, 3});
    tb_check_ints(m, "mx", 2, TB_DIMS(3, 5));
    tb_check_ints(m, "mn", 2, TB_DIMS(1, 2));
    tb_check_ints(m, "mx3", 2, TB_DIMS(4, 5));
    tb_done(m, p);
}

static void t_fold_undefined(void) {
    /* integer division by zero: no error, contents left unknown; an
     * unknown input leaves the result unknown */
    mp_model *m = tb_new(17);
    tb_const_i(m, "a", I64, 1, TB_DIMS(2), TB_DIMS(4, 6));
    tb_const_i(m, "z", I64, 1, TB_DIMS(2), TB_DIMS(2, 0));
    tb_input(m, "u", I64, 1, TB_DIMS(2));
    tb_node(m, "Div", "a,z", "d");
    tb_node(m, "Mul", "a,u", "m");
    tb_output(m, "d");
    tb_output(m, "m");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "d"), "2");
    T_EQ(tb_val(m, "d")->kn, -1);
    T_EQ(tb_val(m, "m")->kn, -1);
    tb_done(m, p);
}

static void t_fold_mod_wrap_shift(void) {
    /* Mod fmod=0 (sign of the divisor): -7 mod 3 = 2, 7 mod -3 = -2;
     * fmod=1 (sign of the dividend): -1, 1.
     * int32 2147483647 + 1 wraps to -2147483648.
     * uint8 {1,128} << 1 = {2, 0}. */
    mp_model *m = tb_new(17);
    tb_const_i(m, "a", I64, 1, TB_DIMS(2), TB_DIMS(-7, 7));
    tb_const_i(m, "b", I64, 1, TB_DIMS(2), TB_DIMS(3, -3));
    tb_const_i(m, "big", MP_DT_INT32, 1, TB_DIMS(1), TB_DIMS(2147483647));
    tb_const_i(m, "one", MP_DT_INT32, 1, TB_DIMS(1), TB_DIMS(1));
    tb_const_i(m, "u", MP_DT_UINT8, 1, TB_DIMS(2), TB_DIMS(1, 128));
    tb_const_i(m, "s", MP_DT_UINT8, 1, TB_DIMS(2), TB_DIMS(1, 1));
    tb_node(m, "Mod", "a,b", "m0");
    int k = tb_node(m, "Mod", "a,b", "m1");
    tb_attr_i(m, k, "fmod", 1);
    tb_node(m, "Add", "big,one", "w");
    k = tb_node(m, "BitShift", "u,s", "sh");
    tb_attr_s(m, k, "direction", "LEFT");
    tb_output(m, "m0");
    tb_output(m, "m1");
    tb_output(m, "w");
    tb_output(m, "sh");
    mp_profile *p = tb_prof(m);
    tb_check_ints(m, "m0", 2, TB_DIMS(2, -2));
    tb_check_ints(m, "m1", 2, TB_DIMS(-1, 1));
    tb_check_ints(m, "w", 1, TB_DIMS(-2147483648LL));
    tb_check_ints(m, "sh", 2, TB_DIMS(2, 0));
    tb_done(m, p);
}

static void t_clip(void) {
    /* opset 11: Clip(int64 {-5,3,10}, 0, 6) = {0,3,6}, 3 FLOPs;
     * opset 6: min/max attributes on floats {-1, 0.5, 2} -> {0, 0.5, 1} */
    mp_model *m = tb_new(13);
    tb_const_i(m, "x", I64, 1, TB_DIMS(3), TB_DIMS(-5, 3, 10));
    tb_const_i(m, "lo", I64, 0, NULL, TB_DIMS(0));
    tb_const_i(m, "hi", I64, 0, NULL, TB_DIMS(6));
    int k = tb_node(m, "Clip", "x,lo,hi", "y");
    tb_node(m, "Clip", "x,,hi", "z");
    tb_output(m, "y");
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    tb_check_ints(m, "y", 3, TB_DIMS(0, 3, 6));
    tb_check_ints(m, "z", 3, TB_DIMS(-5, 3, 6));
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 3);
    tb_done(m, p);

    m = tb_new(6);
    tb_const_f(m, "x", F, 1, TB_DIMS(3), (const double[]){-1, 0.5, 2});
    k = tb_node(m, "Clip", "x", "y");
    tb_attr_f(m, k, "min", 0);
    tb_attr_f(m, k, "max", 1);
    tb_output(m, "y");
    p = tb_prof(m);
    tb_check_floats(m, "y", 3, (const double[]){0, 0.5, 1});
    tb_done(m, p);
}

static void t_bitshift_bad_direction(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "a", MP_DT_UINT8, 1, TB_DIMS(2));
    tb_input(m, "b", MP_DT_UINT8, 1, TB_DIMS(2));
    int k = tb_node(m, "BitShift", "a,b", "y");
    tb_attr_s(m, k, "direction", "UP");
    tb_name(m, k, "shift_bad");
    tb_output(m, "y");
    tb_expect_shape_error(m, "shift_bad");
}

MP_TESTS(ops_elementwise) {
    {"relu_cost", t_relu_cost},
    {"unary_all", t_unary_all},
    {"opset_versions", t_opset_versions},
    {"binary_broadcast", t_binary_broadcast},
    {"binary_all", t_binary_all},
    {"broadcast_symbolic", t_broadcast_symbolic},
    {"broadcast_error", t_broadcast_error},
    {"legacy_broadcast", t_legacy_broadcast},
    {"variadic", t_variadic},
    {"where", t_where},
    {"prelu", t_prelu},
    {"prelu_legacy", t_prelu_legacy},
    {"fold_mul_div", t_fold_mul_div},
    {"fold_broadcast", t_fold_broadcast},
    {"fold_where_compare", t_fold_where_compare},
    {"fold_unary_minmax", t_fold_unary_minmax},
    {"fold_undefined", t_fold_undefined},
    {"fold_mod_wrap_shift", t_fold_mod_wrap_shift},
    {"clip", t_clip},
    {"bitshift_bad_direction", t_bitshift_bad_direction},
};
MP_TESTS_END(ops_elementwise)
