/* Element-wise operators: unary math and activations, binary and variadic
 * arithmetic with numpy broadcasting, comparisons, logic, bit operations,
 * Where and Clip.
 *
 * Shape rules
 *   unary:            the output has the input's shape (IsNaN/IsInf: BOOL).
 *   binary/variadic:  multidirectional (numpy) broadcast of all inputs,
 *                     aligned from the right; comparisons give BOOL.
 *   Where:            broadcast of its three inputs, dtype of input 1.
 *   PRelu:            the slope broadcasts to X (unidirectional); before
 *                     opset 7, one slope or one per channel (X's dim 1).
 *
 * Cost rules (docs/COUNTING.md, "Element-wise")
 *   1 FLOP per output element for every op in this file: activations,
 *   math, binary arithmetic (Pow included), comparisons, logic and bit ops
 *   alike (one operation per element each), Where and Clip. Exceptions:
 *   variadic Sum/Max/Min cost (n_inputs - 1) per output element; Mean
 *   costs n_inputs (the adds and one division).
 *
 * Known contents (shape arithmetic)
 *   When every input's contents are known and the output has at most
 *   MP_KNOWN_MAX elements, the output's contents are computed: integer
 *   types in int64 with C semantics (Div truncates toward zero, results
 *   wrap to the output type's width), float types in double. Division by
 *   zero and other undefined integer cases leave the contents unknown. */
#include "ops/kernel.h"
#include "ops/scalar.h"

#include <math.h>

/* ---- element rules: what one output element is ---- */

typedef enum ew_code {
    /* unary */
    EW_RELU, EW_LEAKYRELU, EW_SIGMOID, EW_HARDSIGMOID, EW_HARDSWISH, EW_TANH, EW_ERF,
    EW_GELU, EW_SOFTPLUS, EW_SOFTSIGN, EW_ELU, EW_SELU, EW_CELU, EW_THRESHOLDEDRELU,
    EW_MISH, EW_EXP, EW_LOG, EW_SQRT, EW_RECIPROCAL, EW_NEG, EW_ABS, EW_FLOOR, EW_CEIL,
    EW_ROUND, EW_SIGN, EW_SIN, EW_COS, EW_TAN, EW_ASIN, EW_ACOS, EW_ATAN, EW_SINH,
    EW_COSH, EW_ASINH, EW_ACOSH, EW_ATANH, EW_NOT, EW_ISNAN, EW_ISINF, EW_SHRINK,
    EW_BITNOT, EW_CLIP,
    /* binary, variadic, ternary */
    EW_ADD, EW_SUB, EW_MUL, EW_DIV, EW_POW, EW_MOD, EW_MAX, EW_MIN, EW_SUM, EW_MEAN,
    EW_EQUAL, EW_LESS, EW_GREATER, EW_LESSEQ, EW_GREATEREQ, EW_AND, EW_OR, EW_XOR,
    EW_BITSHIFT, EW_BITAND, EW_BITOR, EW_BITXOR, EW_PRELU, EW_WHERE
} ew_code;

/* Attributes an element rule needs, read once per node. */
typedef struct ew_attrs {
    double alpha, beta, gamma, lambd, bias;
    bool gelu_tanh;          /* Gelu approximate="tanh" */
    bool fmod;               /* Mod fmod=1: sign of the dividend */
    bool shift_left;         /* BitShift direction="LEFT" */
    bool inf_pos, inf_neg;   /* IsInf detect_positive / detect_negative */
    double lo, hi;           /* Clip bounds */
    int n;                   /* inputs of a variadic op */
} ew_attrs;

static bool ew_is_compare(ew_code op) {
    return op == EW_EQUAL || op == EW_LESS || op == EW_GREATER || op == EW_LESSEQ ||
           op == EW_GREATEREQ;
}

static bool ew_is_bool_out(ew_code op) {
    return ew_is_compare(op) || op == EW_ISNAN || op == EW_ISINF;
}

static void ew_attrs_read(const mp_node *n, ew_code op, ew_attrs *a) {
    memset(a, 0, sizeof *a);
    double alpha_def = 0.0, beta_def = 0.0;
    switch (op) {
    case EW_LEAKYRELU: alpha_def = 0.01; break;
    case EW_HARDSIGMOID: alpha_def = 0.2; beta_def = 0.5; break;
    case EW_ELU: case EW_CELU: case EW_THRESHOLDEDRELU: alpha_def = 1.0; break;
    case EW_SELU: alpha_def = 1.67326319217681884765625; break;
    default: break;
    }
    a->lo = -INFINITY;
    a->hi = INFINITY;
    a->n = n->n_in;
    if (!n->n_attr) { /* most nodes: the defaults, without a lookup each */
        a->alpha = alpha_def;
        a->beta = beta_def;
        a->gamma = 1.05070102214813232421875;
        a->lambd = 0.5;
        a->inf_pos = a->inf_neg = true;
        return;
    }
    a->alpha = mp_attr_f(n, "alpha", alpha_def);
    a->beta = mp_attr_f(n, "beta", beta_def);
    a->gamma = mp_attr_f(n, "gamma", 1.05070102214813232421875);
    a->lambd = mp_attr_f(n, "lambd", 0.5);
    a->bias = mp_attr_f(n, "bias", 0.0);
    a->gelu_tanh = strcmp(mp_attr_s(n, "approximate", "none"), "tanh") == 0;
    a->fmod = mp_attr_i(n, "fmod", 0) != 0;
    a->shift_left = strcmp(mp_attr_s(n, "direction", ""), "LEFT") == 0;
    a->inf_pos = mp_attr_i(n, "detect_positive", 1) != 0;
    a->inf_neg = mp_attr_i(n, "detect_negative", 1) != 0;
}

#define EW_PI 3.14159265358979323846


/* One element in double. x holds one value per input. */
static double ew_eval_f(ew_code op, const ew_attrs *a, const double *x) {
    double v = x[0];
    switch (op) {
    case EW_RELU: return v > 0 ? v : 0;
    case EW_LEAKYRELU: return v >= 0 ? v : a->alpha * v;
    case EW_SIGMOID: return mp_s_sigmoid(v);
    case EW_HARDSIGMOID: return fmax(0.0, fmin(1.0, a->alpha * v + a->beta));
    case EW_HARDSWISH: return v * fmax(0.0, fmin(1.0, v / 6.0 + 0.5));
    case EW_TANH: return tanh(v);
    case EW_ERF: return erf(v);
    case EW_GELU:
        return a->gelu_tanh ? mp_s_gelu_tanh(v) : mp_s_gelu_erf(v);
    case EW_SOFTPLUS: return mp_s_softplus(v);
    case EW_SOFTSIGN: return v / (1.0 + fabs(v));
    case EW_ELU: return v >= 0 ? v : a->alpha * (exp(v) - 1.0);
    case EW_SELU: return a->gamma * (v > 0 ? v : a->alpha * (exp(v) - 1.0));
    case EW_CELU: return fmax(0.0, v) + fmin(0.0, a->alpha * (exp(v / a->alpha) - 1.0));
    case EW_THRESHOLDEDRELU: return v > a->alpha ? v : 0;
    case EW_MISH: return v * tanh(mp_s_softplus(v));
    case EW_EXP: return exp(v);
    case EW_LOG: return log(v);
    case EW_SQRT: return sqrt(v);
    case EW_RECIPROCAL: return 1.0 / v;
    case EW_NEG: return -v;
    case EW_ABS: return fabs(v);
    case EW_FLOOR: return floor(v);
    case EW_CEIL: return ceil(v);
    case EW_ROUND: return nearbyint(v); /* half to even */
    case EW_SIGN: return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0;
    case EW_SIN: return sin(v);
    case EW_COS: return cos(v);
    case EW_TAN: return tan(v);
    case EW_ASIN: return asin(v);
    case EW_ACOS: return acos(v);
    case EW_ATAN: return atan(v);
    case EW_SINH: return sinh(v);
    case EW_COSH: return cosh(v);
    case EW_ASINH: return asinh(v);
    case EW_ACOSH: return acosh(v);
    case EW_ATANH: return atanh(v);
    case EW_NOT: return v == 0;
    case EW_ISNAN: return isnan(v);
    case EW_ISINF: return isinf(v) && ((v > 0 && a->inf_pos) || (v < 0 && a->inf_neg));
    case EW_SHRINK: return v < -a->lambd ? v + a->bias : v > a->lambd ? v - a->bias : 0;
    case EW_CLIP: return fmin(fmax(v, a->lo), a->hi);
    case EW_ADD: return v + x[1];
    case EW_SUB: return v - x[1];
    case EW_MUL: return v * x[1];
    case EW_DIV: return v / x[1];
    case EW_POW: return pow(v, x[1]);
    case EW_MOD: {
        double r = fmod(v, x[1]);
        if (!a->fmod && r != 0 && ((r < 0) != (x[1] < 0))) r += x[1];
        return r;
    }
    case EW_MAX: case EW_MIN: case EW_SUM: case EW_MEAN: {
        double r = v;
        for (int i = 1; i < a->n; i++) {
            if (op == EW_MAX) r = fmax(r, x[i]);
            else if (op == EW_MIN) r = fmin(r, x[i]);
            else r += x[i];
        }
        return op == EW_MEAN ? r / a->n : r;
    }
    case EW_EQUAL: return v == x[1];
    case EW_LESS: return v < x[1];
    case EW_GREATER: return v > x[1];
    case EW_LESSEQ: return v <= x[1];
    case EW_GREATEREQ: return v >= x[1];
    case EW_AND: return (v != 0) && (x[1] != 0);
    case EW_OR: return (v != 0) || (x[1] != 0);
    case EW_XOR: return (v != 0) != (x[1] != 0);
    case EW_PRELU: return v >= 0 ? v : x[1] * v;
    case EW_WHERE: return v != 0 ? x[1] : x[2];
    default: return NAN; /* bit ops have no float form */
    }
}

/* Wrap an int64 result to the width of the output type. */
static int64_t ew_wrap(int dtype, int64_t v) {
    switch (dtype) {
    case MP_DT_BOOL: return v != 0;
    case MP_DT_INT8: return (int8_t)v;
    case MP_DT_UINT8: return (uint8_t)v;
    case MP_DT_INT16: return (int16_t)v;
    case MP_DT_UINT16: return (uint16_t)v;
    case MP_DT_INT32: return (int32_t)v;
    case MP_DT_UINT32: return (uint32_t)v;
    case MP_DT_UINT4: return v & 15;
    case MP_DT_INT4: return (v & 8) ? (v & 15) - 16 : (v & 15);
    default: return v;
    }
}

/* Wrapping int64 arithmetic (no undefined behaviour on overflow). */
static int64_t ew_iadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t ew_isub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static int64_t ew_imul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* One element in int64. False when undefined (division by zero, an op
 * without an integer form). */
static bool ew_eval_i(ew_code op, const ew_attrs *a, const int64_t *x, int64_t *r) {
    int64_t v = x[0];
    switch (op) {
    case EW_RELU: *r = v > 0 ? v : 0; return true;
    case EW_NEG: *r = ew_isub(0, v); return true;
    case EW_ABS: *r = v < 0 ? ew_isub(0, v) : v; return true;
    case EW_SIGN: *r = v > 0 ? 1 : v < 0 ? -1 : 0; return true;
    case EW_FLOOR: case EW_CEIL: case EW_ROUND: *r = v; return true;
    case EW_NOT: *r = v == 0; return true;
    case EW_ISNAN: case EW_ISINF: *r = 0; return true;
    case EW_BITNOT: *r = ~v; return true;
    case EW_CLIP: {
        /* integer bounds only (opset 12+ allows integer Clip) */
        double d = (double)v, b = d < a->lo ? a->lo : d > a->hi ? a->hi : d;
        if (!(b > -9.2e18 && b < 9.2e18)) return false;
        *r = b == d ? v : (int64_t)b;
        return true;
    }
    case EW_ADD: *r = ew_iadd(v, x[1]); return true;
    case EW_SUB: *r = ew_isub(v, x[1]); return true;
    case EW_MUL: *r = ew_imul(v, x[1]); return true;
    case EW_DIV:
        if (x[1] == 0 || (v == INT64_MIN && x[1] == -1)) return false;
        *r = v / x[1]; /* truncates toward zero */
        return true;
    case EW_MOD:
        if (x[1] == 0 || (v == INT64_MIN && x[1] == -1)) return false;
        *r = v % x[1];
        if (!a->fmod && *r != 0 && ((*r < 0) != (x[1] < 0))) *r += x[1];
        return true;
    case EW_POW: {
        int64_t e = x[1], b = v, p = 1;
        if (e < 0) return false;
        for (; e > 0; e >>= 1) {
            if (e & 1) p = ew_imul(p, b);
            b = ew_imul(b, b);
        }
        *r = p;
        return true;
    }
    case EW_MAX: case EW_MIN: case EW_SUM: case EW_MEAN: {
        int64_t s = v;
        for (int i = 1; i < a->n; i++) {
            if (op == EW_MAX) s = x[i] > s ? x[i] : s;
            else if (op == EW_MIN) s = x[i] < s ? x[i] : s;
            else s = ew_iadd(s, x[i]);
        }
        *r = op == EW_MEAN ? s / a->n : s;
        return true;
    }
    case EW_EQUAL: *r = v == x[1]; return true;
    case EW_LESS: *r = v < x[1]; return true;
    case EW_GREATER: *r = v > x[1]; return true;
    case EW_LESSEQ: *r = v <= x[1]; return true;
    case EW_GREATEREQ: *r = v >= x[1]; return true;
    case EW_AND: *r = (v != 0) && (x[1] != 0); return true;
    case EW_OR: *r = (v != 0) || (x[1] != 0); return true;
    case EW_XOR: *r = (v != 0) != (x[1] != 0); return true;
    case EW_BITAND: *r = v & x[1]; return true;
    case EW_BITOR: *r = v | x[1]; return true;
    case EW_BITXOR: *r = v ^ x[1]; return true;
    case EW_BITSHIFT: {
        /* unsigned types only (ONNX); shifting by >= 64 gives 0 */
        uint64_t u = (uint64_t)v, s = (uint64_t)x[1];
        *r = s >= 64 ? 0 : (int64_t)(a->shift_left ? u << s : u >> s);
        return true;
    }
    case EW_PRELU: *r = v >= 0 ? v : ew_imul(x[1], v); return true;
    case EW_WHERE: *r = v != 0 ? x[1] : x[2]; return true;
    default: return false; /* float-only math */
    }
}

/* ---- broadcast element iterator ----
 * Walks the output in row-major order and keeps, for each input, the flat
 * offset of the element that broadcasts to the current output element. */
#define EW_FOLD_MAX_IN 8

typedef struct ew_iter {
    int rank, n;
    const int64_t *dims;                       /* output dims */
    int64_t stride[EW_FOLD_MAX_IN][MP_MAX_RANK]; /* 0 on broadcast axes */
    int64_t idx[MP_MAX_RANK];
    int64_t off[EW_FOLD_MAX_IN];
} ew_iter;

static void ew_iter_init(ew_iter *it, int rank, const int64_t *dims, int n,
                         const mp_value *const *in) {
    it->rank = rank;
    it->n = n;
    it->dims = dims;
    for (int k = 0; k < n; k++) {
        int64_t s = 1;
        it->off[k] = 0;
        for (int i = rank - 1; i >= 0; i--) {
            int j = i - (rank - in[k]->rank); /* aligned from the right */
            if (j < 0 || in[k]->dims[j] == 1) {
                it->stride[k][i] = 0;
            } else {
                it->stride[k][i] = s;
                s *= in[k]->dims[j];
            }
        }
    }
    for (int i = 0; i < rank; i++) it->idx[i] = 0;
}

static void ew_iter_next(ew_iter *it) {
    for (int i = it->rank - 1; i >= 0; i--) {
        for (int k = 0; k < it->n; k++) it->off[k] += it->stride[k][i];
        if (++it->idx[i] < it->dims[i]) return;
        for (int k = 0; k < it->n; k++) it->off[k] -= it->stride[k][i] * it->dims[i];
        it->idx[i] = 0;
    }
}

/* Compute output 0's contents from inputs 0..n_in-1 when all are known.
 * Never an error: anything unknown or undefined leaves the output's
 * contents unknown. */
static mp_status ew_fold(mp_ctx *c, ew_code op, const ew_attrs *a, int n_in) {
    mp_value *out = mp_out(c, 0);
    if (!out || !mp_shape_known(out) || n_in < 1 || n_in > EW_FOLD_MAX_IN) return MP_OK;
    int64_t numel = mp_value_numel(out);
    if (numel < 0 || numel > MP_KNOWN_MAX) return MP_OK;

    const mp_value *in[EW_FOLD_MAX_IN];
    bool use_f = mp_dtype_is_float(out->dtype);
    for (int k = 0; k < n_in; k++) {
        in[k] = mp_in(c, k);
        if (!in[k] || !mp_shape_known(in[k]) || in[k]->rank > out->rank) return MP_OK;
        bool cond = op == EW_WHERE && k == 0; /* the condition does not pick the type */
        if (!cond && mp_dtype_is_float(in[k]->dtype)) use_f = true;
    }
    const int64_t *iv[EW_FOLD_MAX_IN];
    const double *fv[EW_FOLD_MAX_IN];
    for (int k = 0; k < n_in; k++) {
        int64_t cnt;
        bool ok = use_f ? mp_floats(c, k, &fv[k], &cnt) : mp_ints(c, k, &iv[k], &cnt);
        if (!ok || cnt != mp_value_numel(in[k])) return MP_OK;
    }

    bool out_int = !mp_dtype_is_float(out->dtype);
    int64_t *ri = out_int ? mp_scratch(c, sizeof(int64_t) * (size_t)(numel ? numel : 1)) : NULL;
    double *rf = out_int ? NULL : mp_scratch(c, sizeof(double) * (size_t)(numel ? numel : 1));
    if (!ri && !rf) return mp_error(MP_ERR_NOMEM, "out of memory");

    ew_iter it;
    ew_iter_init(&it, out->rank, out->dims, n_in, in);
    for (int64_t e = 0; e < numel; e++, ew_iter_next(&it)) {
        if (use_f) {
            double x[EW_FOLD_MAX_IN];
            for (int k = 0; k < n_in; k++) x[k] = fv[k][it.off[k]];
            double r = ew_eval_f(op, a, x);
            if (!out_int) {
                rf[e] = out->dtype == MP_DT_FLOAT ? (double)(float)r : r;
            } else {
                /* float compute, integer result (comparisons, Pow with a
                 * float exponent): representable values only */
                if (!(r > -9.2e18 && r < 9.2e18)) return MP_OK;
                ri[e] = ew_wrap(out->dtype, (int64_t)r);
            }
        } else {
            int64_t x[EW_FOLD_MAX_IN], r;
            for (int k = 0; k < n_in; k++) x[k] = iv[k][it.off[k]];
            if (!ew_eval_i(op, a, x, &r)) return MP_OK;
            if (out_int) ri[e] = ew_wrap(out->dtype, r);
            else rf[e] = (double)r;
        }
    }
    /* the results are already in the arena, of the output's kind */
    return out_int ? mp_keep_ints(c, 0, ri, numel) : mp_keep_floats(c, 0, rf, numel);
}

/* ---- shape helpers ---- */

/* Numpy broadcast of inputs first..first+count-1 (all present). */
static mp_status ew_broadcast(mp_ctx *c, int first, int count, int *rank, int64_t *dims) {
    mp_value *x;
    mp_status st = mp_need_in(c, first, NULL, &x);
    if (st) return st;
    int r = x->rank;
    if (r > 0) memcpy(dims, x->dims, sizeof(int64_t) * (size_t)r);
    for (int i = first + 1; i < first + count; i++) {
        mp_value *y;
        if ((st = mp_need_in(c, i, NULL, &y))) return st;
        if (r < 0 || y->rank < 0) {
            r = -1;
            continue; /* keep checking the other inputs are present */
        }
        mp_value acc = {.name = x->name, .rank = r, .dims = dims};
        int64_t d2[MP_MAX_RANK];
        if ((st = mp_broadcast(c, &acc, y, &r, d2))) return st;
        if (r > 0) memcpy(dims, d2, sizeof(int64_t) * (size_t)r);
    }
    *rank = r;
    return MP_OK;
}

/* ---- unary ops: out = f(x), same shape ---- */

static mp_status ew_unary(mp_ctx *c, ew_code op) {
    mp_value *x;
    mp_status st = mp_arity(c, 1, 1);
    if (!st) st = mp_need_in(c, 0, NULL, &x);
    if (st) return st;
    int dt = ew_is_bool_out(op) ? MP_DT_BOOL : x->dtype;
    if ((st = mp_set_out(c, 0, dt, x->rank, x->dims))) return st;
    ew_attrs a;
    ew_attrs_read(c->n, op, &a);
    return ew_fold(c, op, &a, 1);
}

/* X(name, first opset, element rule). Cost: 1 FLOP per output element. */
#define EW_UNARY_OPS(X)                                                           \
    X(Relu, 1, EW_RELU) X(LeakyRelu, 1, EW_LEAKYRELU) X(Sigmoid, 1, EW_SIGMOID)     \
    X(HardSigmoid, 1, EW_HARDSIGMOID) X(HardSwish, 14, EW_HARDSWISH)                \
    X(Tanh, 1, EW_TANH) X(Erf, 9, EW_ERF) X(Gelu, 20, EW_GELU)                       \
    X(Softplus, 1, EW_SOFTPLUS) X(Softsign, 1, EW_SOFTSIGN) X(Elu, 1, EW_ELU)        \
    X(Selu, 1, EW_SELU) X(Celu, 12, EW_CELU) X(ThresholdedRelu, 10, EW_THRESHOLDEDRELU) \
    X(Mish, 18, EW_MISH) X(Exp, 1, EW_EXP) X(Log, 1, EW_LOG) X(Sqrt, 1, EW_SQRT)      \
    X(Reciprocal, 1, EW_RECIPROCAL) X(Neg, 1, EW_NEG) X(Abs, 1, EW_ABS)              \
    X(Floor, 1, EW_FLOOR) X(Ceil, 1, EW_CEIL) X(Round, 11, EW_ROUND)                 \
    X(Sign, 9, EW_SIGN) X(Sin, 7, EW_SIN) X(Cos, 7, EW_COS) X(Tan, 7, EW_TAN)        \
    X(Asin, 7, EW_ASIN) X(Acos, 7, EW_ACOS) X(Atan, 7, EW_ATAN) X(Sinh, 9, EW_SINH)  \
    X(Cosh, 9, EW_COSH) X(Asinh, 9, EW_ASINH) X(Acosh, 9, EW_ACOSH)                  \
    X(Atanh, 9, EW_ATANH) X(Not, 1, EW_NOT) X(IsNaN, 9, EW_ISNAN)                    \
    X(IsInf, 10, EW_ISINF) X(Shrink, 9, EW_SHRINK) X(BitwiseNot, 18, EW_BITNOT)

#define EW_DEF_UNARY(name, since, code) \
    static mp_status infer_##name(mp_ctx *c) { return ew_unary(c, code); }
EW_UNARY_OPS(EW_DEF_UNARY)
#undef EW_DEF_UNARY

/* ---- Clip: out = min(max(x, lo), hi); 1 FLOP per element ----
 * Opsets 1-10: bounds are the attributes min/max. Opset 11+: bounds are
 * the optional scalar inputs 1 and 2 (an omitted one is unbounded). */

static mp_status ew_clip(mp_ctx *c, bool bounds_as_inputs) {
    mp_value *x;
    mp_status st = mp_arity(c, 1, bounds_as_inputs ? 3 : 1);
    if (!st) st = mp_need_in(c, 0, NULL, &x);
    if (st) return st;
    if ((st = mp_set_out(c, 0, x->dtype, x->rank, x->dims))) return st;
    ew_attrs a;
    ew_attrs_read(c->n, EW_CLIP, &a);
    if (!bounds_as_inputs) {
        a.lo = mp_attr_f(c->n, "min", -INFINITY);
        a.hi = mp_attr_f(c->n, "max", INFINITY);
        return ew_fold(c, EW_CLIP, &a, 1);
    }
    for (int i = 1; i <= 2; i++) {
        mp_value *b = mp_in(c, i);
        if (!b) continue;
        if (b->rank > 0 && mp_value_numel(b) > 1)
            return mp_fail(c, "bound input %d must be a scalar", i);
        const double *v;
        int64_t n;
        if (!mp_floats(c, i, &v, &n) || n != 1) return MP_OK; /* bound unknown */
        if (i == 1) a.lo = v[0];
        else a.hi = v[0];
    }
    return ew_fold(c, EW_CLIP, &a, 1);
}

static mp_status infer_clip_attrs(mp_ctx *c) { return ew_clip(c, false); }
static mp_status infer_clip_inputs(mp_ctx *c) { return ew_clip(c, true); }

/* ---- binary ops: numpy broadcast; 1 FLOP per output element ----
 * Before opset 7 the attributes broadcast=1 (and axis) asked for a
 * unidirectional broadcast of B onto A: the output has A's shape. The
 * attribute does not exist from opset 7 on, so its presence selects the
 * legacy rule. */

static mp_status ew_binary(mp_ctx *c, ew_code op) {
    mp_status st = mp_arity(c, 2, 2);
    if (st) return st;
    mp_value *a, *b;
    if ((st = mp_need_in(c, 0, NULL, &a)) || (st = mp_need_in(c, 1, NULL, &b))) return st;
    int dt = ew_is_bool_out(op) ? MP_DT_BOOL : a->dtype;
    ew_attrs at;
    ew_attrs_read(c->n, op, &at);
    if (op == EW_BITSHIFT) {
        const char *dir = mp_attr_s(c->n, "direction", "");
        if (strcmp(dir, "LEFT") != 0 && strcmp(dir, "RIGHT") != 0)
            return mp_fail(c, "direction must be LEFT or RIGHT, got '%s'", dir);
    }
    if (mp_attr_i(c->n, "broadcast", 0) == 1) {
        if (a->rank >= 0 && b->rank > a->rank)
            return mp_fail(c, "legacy broadcast: B has rank %d, above A's rank %d", b->rank,
                           a->rank);
        const mp_attr *ax = mp_node_attr(c->n, "axis");
        if ((st = mp_set_out(c, 0, dt, a->rank, a->dims))) return st;
        /* the right-aligned fold applies when B is a suffix of A */
        if (ax && a->rank >= 0 && b->rank >= 0 && ax->i != a->rank - b->rank) return MP_OK;
        return ew_fold(c, op, &at, 2);
    }
    int rank;
    int64_t dims[MP_MAX_RANK];
    if ((st = ew_broadcast(c, 0, 2, &rank, dims))) return st;
    if ((st = mp_set_out(c, 0, dt, rank, dims))) return st;
    return ew_fold(c, op, &at, 2);
}

/* X(name, first opset, element rule). Cost: 1 FLOP per output element. */
#define EW_BINARY_OPS(X)                                                        \
    X(Add, 1, EW_ADD) X(Sub, 1, EW_SUB) X(Mul, 1, EW_MUL) X(Div, 1, EW_DIV)       \
    X(Pow, 1, EW_POW) X(Mod, 10, EW_MOD) X(Equal, 1, EW_EQUAL) X(Less, 1, EW_LESS) \
    X(Greater, 1, EW_GREATER) X(LessOrEqual, 12, EW_LESSEQ)                       \
    X(GreaterOrEqual, 12, EW_GREATEREQ) X(And, 1, EW_AND) X(Or, 1, EW_OR)         \
    X(Xor, 1, EW_XOR) X(BitShift, 11, EW_BITSHIFT) X(BitwiseAnd, 18, EW_BITAND)   \
    X(BitwiseOr, 18, EW_BITOR) X(BitwiseXor, 18, EW_BITXOR)

#define EW_DEF_BINARY(name, since, code) \
    static mp_status infer_##name(mp_ctx *c) { return ew_binary(c, code); }
EW_BINARY_OPS(EW_DEF_BINARY)
#undef EW_DEF_BINARY

/* ---- PRelu: y = x < 0 ? slope * x : x; 1 FLOP per output element ----
 * The slope (a learnable parameter) broadcasts to X: the output has X's
 * shape. */

static mp_status infer_prelu(mp_ctx *c) {
    mp_status st = mp_arity(c, 2, 2);
    if (st) return st;
    mp_value *x, *s;
    if ((st = mp_need_in(c, 0, NULL, &x)) || (st = mp_need_in(c, 1, NULL, &s))) return st;
    if (x->rank >= 0 && s->rank >= 0) {
        if (s->rank > x->rank)
            return mp_fail(c, "slope rank %d is above X's rank %d", s->rank, x->rank);
        for (int i = 0; i < s->rank; i++) {
            int64_t ds = s->dims[i], dx = x->dims[i + x->rank - s->rank];
            if (ds >= 0 && dx >= 0 && ds != 1 && ds != dx)
                return mp_fail(c, "slope dim %d is %lld, X's is %lld", i, (long long)ds,
                               (long long)dx);
        }
    }
    if ((st = mp_set_out(c, 0, x->dtype, x->rank, x->dims))) return st;
    ew_attrs a;
    ew_attrs_read(c->n, EW_PRELU, &a);
    return ew_fold(c, EW_PRELU, &a, 2);
}

/* Before opset 7 there was no numpy broadcasting: the slope has one value
 * shared by all channels, or one per channel (X's dim 1), as the PyTorch
 * exporter wrote it (X [N, C, ...], slope [C]). Slopes that broadcast the
 * numpy way ([C, 1, 1]) are accepted too. The output has X's shape. Known
 * contents are computed for a single shared slope only (a per-channel
 * slope does not align from the right). */

static mp_status infer_prelu_legacy(mp_ctx *c) {
    mp_status st = mp_arity(c, 2, 2);
    if (st) return st;
    mp_value *x, *s;
    if ((st = mp_need_in(c, 0, NULL, &x)) || (st = mp_need_in(c, 1, NULL, &s))) return st;
    int64_t sn = mp_value_numel(s);
    bool one = sn == 1;
    if (x->rank >= 0 && s->rank >= 0 && !one) {
        bool numpy = s->rank <= x->rank, per_channel = false;
        for (int i = 0; numpy && i < s->rank; i++) {
            int64_t ds = s->dims[i], dx = x->dims[i + x->rank - s->rank];
            if (ds >= 0 && dx >= 0 && ds != 1 && ds != dx) numpy = false;
        }
        if (s->rank == 1 && x->rank >= 2) {
            int64_t ds = s->dims[0], dc = x->dims[1];
            per_channel = ds < 0 || dc < 0 || ds == dc;
        }
        if (!numpy && !per_channel) {
            if (s->rank == 1 && x->rank >= 2)
                return mp_fail(c, "slope has %lld values for %lld channels", (long long)s->dims[0],
                               (long long)x->dims[1]);
            return mp_fail(c, "slope of rank %d does not fit X of rank %d (one value, one per "
                           "channel, or a numpy broadcast)", s->rank, x->rank);
        }
    }
    if ((st = mp_set_out(c, 0, x->dtype, x->rank, x->dims))) return st;
    if (!one) return MP_OK;
    ew_attrs a;
    ew_attrs_read(c->n, EW_PRELU, &a);
    return ew_fold(c, EW_PRELU, &a, 2);
}

/* ---- variadic ops: Sum, Mean, Max, Min ----
 * Shape: broadcast of all inputs. Cost: (n_inputs - 1) FLOPs per output
 * element for Sum/Max/Min (pairwise reduction); Mean adds one division:
 * n_inputs per output element. */

static mp_status ew_variadic(mp_ctx *c, ew_code op) {
    mp_status st;
    if (c->n->n_in < 1) return mp_fail(c, "expects at least one input");
    int rank;
    int64_t dims[MP_MAX_RANK];
    if ((st = ew_broadcast(c, 0, c->n->n_in, &rank, dims))) return st;
    if ((st = mp_set_out(c, 0, mp_in(c, 0)->dtype, rank, dims))) return st;
    ew_attrs a;
    ew_attrs_read(c->n, op, &a);
    return ew_fold(c, op, &a, c->n->n_in);
}

static mp_status infer_sum(mp_ctx *c) { return ew_variadic(c, EW_SUM); }
static mp_status infer_mean(mp_ctx *c) { return ew_variadic(c, EW_MEAN); }
static mp_status infer_max(mp_ctx *c) { return ew_variadic(c, EW_MAX); }
static mp_status infer_min(mp_ctx *c) { return ew_variadic(c, EW_MIN); }

static void cost_variadic(mp_ctx *c, mp_cost *k) {
    uint64_t n = (uint64_t)(c->n->n_in > 0 ? c->n->n_in - 1 : 0);
    bool ovf = false;
    k->flops = mp_umul(n, mp_cnumel(mp_out(c, 0), k), &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

static void cost_mean(mp_ctx *c, mp_cost *k) {
    bool ovf = false;
    k->flops = mp_umul((uint64_t)c->n->n_in, mp_cnumel(mp_out(c, 0), k), &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

/* ---- Where: out = cond ? x : y ----
 * Shape: broadcast of the three inputs; dtype of x. Cost: 1 FLOP (one
 * select) per output element. */

static mp_status infer_where(mp_ctx *c) {
    mp_status st = mp_arity(c, 3, 3);
    if (st) return st;
    int rank;
    int64_t dims[MP_MAX_RANK];
    if ((st = ew_broadcast(c, 0, 3, &rank, dims))) return st;
    if ((st = mp_set_out(c, 0, mp_in(c, 1)->dtype, rank, dims))) return st;
    ew_attrs a;
    ew_attrs_read(c->n, EW_WHERE, &a);
    return ew_fold(c, EW_WHERE, &a, 3);
}


/* ---- kernels ----
 * One generic kernel runs every op of this file on a broadcast row
 * iterator: elements are read as double (any float input, or a float
 * output) or int64 (integer and bool inputs), evaluated by the same
 * element rules as the known-contents fold above, and stored in the
 * output's dtype. fp32 rows of the common arithmetic ops and fp32 unary
 * ops take typed loops. */

typedef struct ew_state {
    ew_code op;
    ew_attrs a;
    int legacy_axis;          /* binary broadcast=1: B aligned at this axis; -1: numpy */
    bool prelu_channel;       /* legacy PRelu: one slope per channel (X's dim 1) */
} ew_state;

static mp_status ew_prep(mp_kctx *k, ew_code op) {
    ew_state *s = mp_kstate_new(k, sizeof *s);
    if (!s) return mp_kfail(k, MP_ERR_NOMEM, "out of memory");
    s->op = op;
    ew_attrs_read(k->n, op, &s->a);
    s->legacy_axis = -1;
    if (op == EW_CLIP && k->n->opset < 11) {
        s->a.lo = mp_attr_f(k->n, "min", -INFINITY);
        s->a.hi = mp_attr_f(k->n, "max", INFINITY);
    }
    if (k->n_in >= 2 && mp_attr_i(k->n, "broadcast", 0) == 1) {
        const mp_attr *ax = mp_node_attr(k->n, "axis");
        s->legacy_axis = ax ? (int)ax->i : k->in[0].rank - k->in[1].rank;
    }
    if (op == EW_PRELU && k->n->opset < 7 && k->in[1].rank == 1 && k->in[1].numel > 1 &&
        k->in[0].rank >= 2 && k->in[1].dims[0] == k->in[0].dims[1] &&
        k->in[0].dims[k->in[0].rank - 1] != k->in[1].dims[0])
        s->prelu_channel = true;
    return MP_OK;
}

/* fp32 rows of the common binary ops: o[j] = a[j*sa] op b[j*sb]. */
static bool ew_row_f32(ew_code op, float *o, const float *a, int64_t sa, const float *b,
                       int64_t sb, int64_t n) {
#define EW_LOOP(expr)                                                     \
    if (sa && sb) for (int64_t j = 0; j < n; j++) { float x = a[j], y = b[j]; o[j] = (expr); } \
    else if (sa) { float y = b[0]; for (int64_t j = 0; j < n; j++) { float x = a[j]; o[j] = (expr); } } \
    else if (sb) { float x = a[0]; for (int64_t j = 0; j < n; j++) { float y = b[j]; o[j] = (expr); } } \
    else { float x = a[0], y = b[0]; for (int64_t j = 0; j < n; j++) o[j] = (expr); }
    switch (op) {
    case EW_ADD: case EW_SUM: EW_LOOP(x + y) return true;
    case EW_SUB: EW_LOOP(x - y) return true;
    case EW_MUL: EW_LOOP(x * y) return true;
    case EW_DIV: EW_LOOP(x / y) return true;
    case EW_MAX: EW_LOOP(isnan(x) || isnan(y) ? NAN : (x > y ? x : y)) return true;
    case EW_MIN: EW_LOOP(isnan(x) || isnan(y) ? NAN : (x < y ? x : y)) return true;
    case EW_PRELU: EW_LOOP(x >= 0 ? x : y * x) return true;
    case EW_POW: /* small integral exponents (GELU's x^3, variances' x^2) by products */
        EW_LOOP(y == 2.0f ? x * x : y == 3.0f ? x * x * x : y == 1.0f ? x : y == 0.5f ? sqrtf(x) : powf(x, y))
        return true;
    default: return false;
    }
#undef EW_LOOP
}

/* fmax(0, fmin(1, t)) without the calls: fmin(1, NaN) is 1 */
static inline double ew_unit(double t) {
    double m = t < 1.0 ? t : 1.0;
    return m > 0.0 ? m : 0.0;
}

/* fp32 unary ops with float math, the op chosen outside the loop. */
static void ew_unary_f32(ew_code op, const ew_attrs *a, const float *x, float *y, int64_t n) {
#define EW_U(expr) for (int64_t j = 0; j < n; j++) { float v = x[j]; y[j] = (expr); } break;
    switch (op) {
    case EW_RELU: EW_U(v > 0 ? v : 0)
    case EW_SIGMOID: EW_U(mp_s_sigmoidf(v))
    case EW_TANH: EW_U(tanhf(v))
    case EW_ERF: EW_U(erff(v))
    case EW_EXP: EW_U(expf(v))
    case EW_SQRT: EW_U(sqrtf(v))
    case EW_NEG: EW_U(-v)
    case EW_ABS: EW_U(fabsf(v))
    case EW_RECIPROCAL: EW_U(1.0f / v)
    case EW_LEAKYRELU: { float al = (float)a->alpha; EW_U(v >= 0 ? v : al * v) }
    /* in double as ew_eval_f computes them (the same values), without its
     * calls: fmax(0, fmin(1, t)) as compares (GCC calls libm for fmin and
     * fmax); t NaN gives 1 both ways */
    case EW_HARDSIGMOID: {
        double al = a->alpha, be = a->beta;
        EW_U((float)ew_unit(al * (double)v + be))
    }
    case EW_HARDSWISH: EW_U((float)((double)v * ew_unit((double)v / 6.0 + 0.5)))
    default:
        for (int64_t j = 0; j < n; j++) {
            double v = x[j];
            y[j] = (float)ew_eval_f(op, a, &v);
        }
        break;
    }
#undef EW_U
}

/* Work split for mp_kparallel: blocks of EW_BLOCK output elements. */
#define EW_BLOCK 16384

typedef struct ew_par {
    ew_code op;
    ew_attrs a;
    int n_in;
    const mp_kbcast *it;
    const float *x0, *x1;
    float *y;
    int64_t numel;
} ew_par;

static void ew_unary_f32_range(void *arg, int64_t lo, int64_t hi) {
    const ew_par *p = arg;
    int64_t b = lo * EW_BLOCK, e = hi * EW_BLOCK < p->numel ? hi * EW_BLOCK : p->numel;
    ew_unary_f32(p->op, &p->a, p->x0 + b, p->y + b, e - b);
}

static void ew_binary_f32_range(void *arg, int64_t lo, int64_t hi) {
    const ew_par *p = arg;
    mp_kbcast it = *p->it;
    int64_t b = lo * EW_BLOCK, e = hi * EW_BLOCK < p->numel ? hi * EW_BLOCK : p->numel;
    if (b >= e || it.len <= 0) return;
    int64_t r = b / it.len, j = b % it.len;
    mp_kbcast_seek(&it, r);
    while (b < e) {
        int64_t n = it.len - j < e - b ? it.len - j : e - b;
        ew_row_f32(p->op, p->y + b, p->x0 + it.off[0] + j * it.step[0], it.step[0], p->x1 + it.off[1] + j * it.step[1],
                   it.step[1], n);
        b += n;
        j = 0;
        mp_kbcast_next(&it);
    }
}

/* fp16 or bf16 throughout: the fp32 rows on converted chunks (each value
 * widened exactly, each result rounded to nearest even once), where the
 * generic loop reads and writes every element in double through a switch
 * on its type (an fp16 ConvNet's two residual Adds: 30 us, 1 us in fp32). */
#define EW_CHUNK 1024

typedef struct ew_par16 {
    ew_code op;
    ew_attrs a;
    const mp_kbcast *it;
    const uint16_t *x0, *x1;
    uint16_t *y;
    int64_t numel;
    int dt;
} ew_par16;

static void ew_unary_16_range(void *arg, int64_t lo, int64_t hi) {
    const ew_par16 *p = arg;
    float x[EW_CHUNK], y[EW_CHUNK];
    int64_t b = lo * EW_BLOCK, e = hi * EW_BLOCK < p->numel ? hi * EW_BLOCK : p->numel;
    for (; b < e; b += EW_CHUNK) {
        int64_t n = e - b < EW_CHUNK ? e - b : EW_CHUNK;
        mp_f16_widen(p->dt, p->x0 + b, x, n);
        ew_unary_f32(p->op, &p->a, x, y, n);
        mp_f16_narrow(p->dt, y, p->y + b, n);
    }
}

static void ew_binary_16_range(void *arg, int64_t lo, int64_t hi) {
    const ew_par16 *p = arg;
    float x0[EW_CHUNK], x1[EW_CHUNK], y[EW_CHUNK];
    mp_kbcast it = *p->it;
    int64_t b = lo * EW_BLOCK, e = hi * EW_BLOCK < p->numel ? hi * EW_BLOCK : p->numel;
    if (b >= e || it.len <= 0) return;
    int64_t r = b / it.len, j = b % it.len;
    mp_kbcast_seek(&it, r);
    while (b < e) {
        int64_t n = it.len - j < e - b ? it.len - j : e - b;
        if (n > EW_CHUNK) n = EW_CHUNK;
        /* a row's operand steps 1 (its elements) or 0 (one broadcast value) */
        int64_t s0 = it.step[0], s1 = it.step[1];
        mp_f16_widen(p->dt, p->x0 + it.off[0] + j * s0, x0, s0 ? n : 1);
        mp_f16_widen(p->dt, p->x1 + it.off[1] + j * s1, x1, s1 ? n : 1);
        ew_row_f32(p->op, y, x0, s0, x1, s1, n);
        mp_f16_narrow(p->dt, y, p->y + b, n);
        b += n;
        j += n;
        if (j == it.len) {
            j = 0;
            mp_kbcast_next(&it);
        }
    }
}

static mp_status ew_krun(mp_kctx *k) {
    if (mp_kout_known(k)) return MP_ERR_UNSUPPORTED;
    const ew_state *s = k->state;
    if (!s) return mp_kfail(k, MP_ERR_USAGE, "kernel not prepared");
    ew_code op = s->op;
    ew_attrs a = s->a;
    int n_in = k->n_in;
    if (op == EW_CLIP) {
        n_in = 1;
        for (int i = 1; i <= 2 && k->n->opset >= 11; i++) {
            const mp_rtensor *b = mp_kin(k, i);
            if (!b || b->numel < 1) continue;
            double v = mp_kget_f(b->data, b->dtype, 0);
            if (i == 1) a.lo = v;
            else a.hi = v;
        }
    }
    if (n_in > MP_KB_MAX) return mp_kfail(k, MP_ERR_UNSUPPORTED, "more than %d inputs", MP_KB_MAX);
    const mp_rtensor *out = &k->out[0];
    int ranks[MP_KB_MAX] = {0};
    const int64_t *dims[MP_KB_MAX] = {0};
    int64_t bd[MP_MAX_RANK];
    for (int i = 0; i < n_in; i++) {
        ranks[i] = k->in[i].rank;
        dims[i] = k->in[i].dims;
    }
    if (n_in == 2 && (s->legacy_axis >= 0 || s->prelu_channel)) {
        /* B padded with trailing 1s so that it aligns at the axis */
        int axis = s->prelu_channel ? 1 : s->legacy_axis;
        int r = k->in[0].rank - axis;
        if (r < k->in[1].rank || r > MP_MAX_RANK) return mp_kfail(k, MP_ERR_SHAPE, "bad broadcast axis");
        for (int i = 0; i < r; i++) bd[i] = i < k->in[1].rank ? k->in[1].dims[i] : 1;
        ranks[1] = r;
        dims[1] = bd;
    }
    mp_kbcast it;
    mp_kbcast_init(&it, out->rank, out->dims, n_in, ranks, dims);

    bool all_f32 = out->dtype == MP_DT_FLOAT;
    for (int i = 0; i < n_in; i++) all_f32 = all_f32 && k->in[i].dtype == MP_DT_FLOAT;
    if (all_f32 && (n_in == 1 || (n_in == 2 && ew_row_f32(op, NULL, NULL, 1, NULL, 1, 0)))) {
        ew_par par = {op, a, n_in, &it, k->in[0].data, n_in == 2 ? k->in[1].data : NULL, out->data, out->numel};
        mp_kparallel(k, (out->numel + EW_BLOCK - 1) / EW_BLOCK, n_in == 1 ? ew_unary_f32_range : ew_binary_f32_range,
                     &par);
        return MP_OK;
    }
    bool all_16 = out->dtype == MP_DT_FLOAT16 || out->dtype == MP_DT_BFLOAT16;
    for (int i = 0; i < n_in; i++) all_16 = all_16 && k->in[i].dtype == out->dtype;
    if (all_16 && (n_in == 1 || (n_in == 2 && ew_row_f32(op, NULL, NULL, 1, NULL, 1, 0)))) {
        ew_par16 par = {op, a, &it, k->in[0].data, n_in == 2 ? k->in[1].data : NULL, out->data, out->numel,
                        out->dtype};
        mp_kparallel(k, (out->numel + EW_BLOCK - 1) / EW_BLOCK, n_in == 1 ? ew_unary_16_range : ew_binary_16_range,
                     &par);
        return MP_OK;
    }
    if (op == EW_WHERE) {
        size_t es = mp_kesize(out->dtype);
        if (!es) return mp_kfail(k, MP_ERR_UNSUPPORTED, "dtype %s", mp_dtype_name(out->dtype));
        int64_t e = 0;
        for (int64_t r = 0; r < it.rows; r++, mp_kbcast_next(&it))
            for (int64_t j = 0; j < it.len; j++, e++) {
                bool c = ((const uint8_t *)k->in[0].data)[it.off[0] + j * it.step[0]] != 0;
                int w = c ? 1 : 2;
                mp_kcopy1(out->data, e, k->in[w].data, it.off[w] + j * it.step[w], es);
            }
        return MP_OK;
    }

    bool use_f = mp_kis_float(out->dtype);
    for (int i = 0; i < n_in; i++) use_f = use_f || mp_kis_float(k->in[i].dtype);
    for (int i = 0; i < n_in; i++)
        if (!mp_kdtype_ok(k->in[i].dtype))
            return mp_kfail(k, MP_ERR_UNSUPPORTED, "input dtype %s", mp_dtype_name(k->in[i].dtype));
    if (!mp_kdtype_ok(out->dtype))
        return mp_kfail(k, MP_ERR_UNSUPPORTED, "output dtype %s", mp_dtype_name(out->dtype));
    int64_t e = 0;
    for (int64_t r = 0; r < it.rows; r++, mp_kbcast_next(&it)) {
        for (int64_t j = 0; j < it.len; j++, e++) {
            if (use_f) {
                double x[MP_KB_MAX];
                for (int i = 0; i < n_in; i++)
                    x[i] = mp_kget_f(k->in[i].data, k->in[i].dtype, it.off[i] + j * it.step[i]);
                mp_kset_f(out->data, out->dtype, e, ew_eval_f(op, &a, x));
            } else {
                int64_t x[MP_KB_MAX], v;
                for (int i = 0; i < n_in; i++)
                    x[i] = mp_kget_i(k->in[i].data, k->in[i].dtype, it.off[i] + j * it.step[i]);
                if (!ew_eval_i(op, &a, x, &v))
                    return mp_kfail(k, MP_ERR_USAGE, "integer %s undefined at element %lld "
                                    "(division by zero or a negative exponent)", k->n->op,
                                    (long long)e);
                mp_kset_i(out->data, out->dtype, e, v);
            }
        }
    }
    return MP_OK;
}

#define EW_DEF_PREP(name, since, code) \
    static mp_status prep_##name(mp_kctx *k, size_t *scratch) { (void)scratch; return ew_prep(k, code); }
EW_UNARY_OPS(EW_DEF_PREP)
EW_BINARY_OPS(EW_DEF_PREP)
EW_DEF_PREP(clip, 1, EW_CLIP)
EW_DEF_PREP(prelu, 1, EW_PRELU)
EW_DEF_PREP(sum, 1, EW_SUM)
EW_DEF_PREP(mean, 1, EW_MEAN)
EW_DEF_PREP(max, 1, EW_MAX)
EW_DEF_PREP(min, 1, EW_MIN)
EW_DEF_PREP(where, 1, EW_WHERE)
#undef EW_DEF_PREP

#define EW_K(p) ew_krun, prep_##p, mp_kstate_release


/* ---- training: what the backward keeps (ops.h mp_bwd; PyTorch's
 * derivatives.yaml): ---- */
static bool ew_is(const char *op, const char *const *names) {
    for (; *names; names++)
        if (mp_streq(op, *names)) return true;
    return false;
}

static void ew_train(mp_ctx *c, mp_bwd *t) {
    static const char *const keep_out[] = {"Relu", "Sigmoid", "Tanh", "Exp", "Sqrt", "Reciprocal", NULL};
    /* elu (and selu, celu: elu with other constants) keeps its input
     * (derivatives.yaml: elu_backward(grad, ..., is_result=false, self)) */
    static const char *const keep_in[] = {"LeakyRelu", "HardSigmoid", "HardSwish", "Erf", "Gelu", "Elu", "Selu",
                                          "Softplus", "Softsign", "Celu", "ThresholdedRelu", "Mish",
                                          "Log", "Abs", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan",
                                          "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Shrink", "Clip",
                                          NULL};
    static const char *const flow[] = {"Add", "Sub", "Neg", "Sum", "Mean", NULL};
    /* autocast's fp32 list (CUDA): exp, log, pow, reciprocal, rsqrt, erfinv, ... */
    static const char *const fp32[] = {"Exp", "Log", "Pow", "Reciprocal", NULL};
    const char *op = c->n->op;
    const mp_value *y = mp_out(c, 0);
    int64_t ne = y ? mp_value_numel(y) : -1;
    uint64_t out = ne > 0 ? (uint64_t)ne : 0;
    int grads = __builtin_popcount(t->rg);
    t->amp = ew_is(op, fp32) ? MP_AMP_FP32 : MP_AMP_PROMOTE;
    if (!t->rg) return;
    if (ew_is(op, keep_out)) {
        t->save_out = 1u;
        t->bwd_flops = 2 * out;
    } else if (ew_is(op, keep_in)) {
        t->save_in = 1u;
        t->bwd_flops = 3 * out;
    } else if (ew_is(op, flow)) {
        t->bwd_flops = out * (uint64_t)(grads > 1 ? grads - 1 : 0); /* reductions of broadcasts */
    } else if (mp_streq(op, "Mul")) { /* d(a*b) = b.da + a.db */
        if (t->rg & 1u) t->save_in |= 2u;
        if (t->rg & 2u) t->save_in |= 1u;
        t->bwd_flops = out * (uint64_t)grads;
    } else if (mp_streq(op, "Div")) { /* da = g/b; db = -g.a/b^2 */
        t->save_in |= 2u;
        if (t->rg & 2u) t->save_in |= 1u;
        t->bwd_flops = 3 * out * (uint64_t)grads;
    } else if (mp_streq(op, "Pow")) { /* da = g.b.a^(b-1); db = g.out.log(a) */
        t->save_in = 3u;
        if (t->rg & 2u) t->save_out = 1u;
        t->bwd_flops = 3 * out * (uint64_t)grads;
    } else if (mp_streq(op, "Max") || mp_streq(op, "Min") || mp_streq(op, "PRelu")) {
        /* maximum/minimum: where(self == other, grad / 2, grad) masked by
         * self < other: both inputs, not the result */
        t->save_in = (1u << c->n->n_in) - 1u;
        t->bwd_flops = 2 * out * (uint64_t)grads;
    } else if (mp_streq(op, "Where")) { /* the condition routes the gradient */
        t->save_in = 1u;
        t->bwd_flops = out * (uint64_t)grads;
    } else {
        /* comparisons, logic, rounding: no gradient flows through them */
        t->amp = MP_AMP_KEEP;
    }
}

/* ---- the table ---- */

#define EW_ROW(name, since, code) \
    {"", #name, since, infer_##name, mp_cost_out1, 0, 0, NULL, EW_K(name), .train = ew_train},

const mp_op mp_ops_elementwise[] = {
    EW_UNARY_OPS(EW_ROW)
    EW_BINARY_OPS(EW_ROW)
    /* Clip bounds: buffer bits keep float bound tensors out of the params */
    {"", "Clip", 1, infer_clip_attrs, mp_cost_out1, 0, 0, NULL, EW_K(clip), .train = ew_train},
    {"", "Clip", 11, infer_clip_inputs, mp_cost_out1, 0, (1u << 1) | (1u << 2), NULL,
     EW_K(clip), .train = ew_train},
    /* PRelu's slope is a learnable parameter */
    {"", "PRelu", 1, infer_prelu_legacy, mp_cost_out1, 1u << 1, 0, NULL, EW_K(prelu), .train = ew_train},
    {"", "PRelu", 7, infer_prelu, mp_cost_out1, 1u << 1, 0, NULL, EW_K(prelu), .train = ew_train},
    {"", "Sum", 1, infer_sum, cost_variadic, 0, 0, NULL, EW_K(sum), .train = ew_train},
    {"", "Max", 1, infer_max, cost_variadic, 0, 0, NULL, EW_K(max), .train = ew_train},
    {"", "Min", 1, infer_min, cost_variadic, 0, 0, NULL, EW_K(min), .train = ew_train},
    {"", "Mean", 1, infer_mean, cost_mean, 0, 0, NULL, EW_K(mean), .train = ew_train},
    {"", "Where", 9, infer_where, mp_cost_out1, 0, 0, NULL, EW_K(where), .train = ew_train},
};
const int mp_ops_elementwise_count = (int)MP_ARRAY_LEN(mp_ops_elementwise);

#undef EW_ROW
#undef EW_K
