/* The scalar math of activations, softmax rows and dynamic quantization,
 * in one place: every reference kernel (elementwise.c, contrib.c, nn.c,
 * attention.c, linalg.c's recurrent activations) computes these through
 * here, so one formula cannot drift from its copies. oneDNN's eltwise
 * kernels compute their own; tests/test_dnnl.c checks both at extreme
 * inputs (ops.extreme_activations). */
#ifndef MP_OPS_SCALAR_H
#define MP_OPS_SCALAR_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* sqrt(2 / pi), the tanh GELU's constant */
#define MP_S_SQRT_2_PI 0.7978845608028654

static inline double mp_s_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static inline float mp_s_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* log(1 + e^x): x itself past 30, where e^x would overflow at 709 and
 * log1p(e^x) equals x to double precision anyway */
static inline double mp_s_softplus(double x) { return x > 30 ? x : log1p(exp(x)); }

/* GELU, erf form: x * Phi(x) */
static inline double mp_s_gelu_erf(double x) { return 0.5 * x * (1.0 + erf(x / M_SQRT2)); }
/* GELU, tanh form (FastGelu, approximate="tanh") */
static inline double mp_s_gelu_tanh(double x) {
    return 0.5 * x * (1.0 + tanh(MP_S_SQRT_2_PI * (x + 0.044715 * x * x * x)));
}
/* x * sigmoid(alpha * x): QuickGelu, Swish, SiLU (alpha 1) */
static inline double mp_s_swish(double x, double alpha) { return x / (1.0 + exp(-alpha * x)); }

/* One softmax row in place: subtract the maximum, exponentiate, divide by
 * the sum. masked_zero: a row whose maximum is infinite (every key masked
 * with -inf, as attention masks do) becomes zeros instead of NaN (ONNX's
 * Softmax gives NaN there, attention kernels give 0). */
static inline void mp_s_softmax_row(double *w, int64_t n, bool masked_zero) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < n; j++) m = w[j] > m ? w[j] : m;
    if (masked_zero) {
        for (int64_t j = 0; j < n; j++) s += (w[j] = isinf(m) ? 0 : exp(w[j] - m));
        for (int64_t j = 0; j < n; j++) w[j] = s > 0 ? w[j] / s : 0;
        return;
    }
    for (int64_t j = 0; j < n; j++) s += (w[j] = exp(w[j] - m));
    for (int64_t j = 0; j < n; j++) w[j] /= s;
}
/* The same in fp32 from x to y (contiguous rows: Softmax's fast path). */
static inline void mp_s_softmax_rowf(const float *x, float *y, int64_t n) {
    float m = -INFINITY, s = 0;
    for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    for (int64_t j = 0; j < n; j++) s += (y[j] = expf(x[j] - m));
    for (int64_t j = 0; j < n; j++) y[j] /= s;
}
/* LogSoftmax of one row in place: x - max - log(sum(exp(x - max))). */
static inline void mp_s_log_softmax_row(double *w, int64_t n) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < n; j++) m = w[j] > m ? w[j] : m;
    for (int64_t j = 0; j < n; j++) s += exp(w[j] - m);
    double ls = log(s);
    for (int64_t j = 0; j < n; j++) w[j] = w[j] - m - ls;
}

/* DynamicQuantizeLinear's parameters from the range [lo, hi] of the data
 * (the range always holds 0): uint8 scale and zero point, in fp32 as the
 * ONNX reference computes them. The zero point is NaN when the data holds
 * an infinity (the reference's own result); callers that need an integer
 * decide what NaN becomes. */
static inline void mp_s_dynq_params(double lo, double hi, float *scale, double *zp) {
    float s = (float)((float)hi - (float)lo) / 255.0f;
    double z = s != 0 ? nearbyintf(0.0f - (float)lo / s) : 0;
    *zp = z < 0 ? 0 : z > 255 ? 255 : z;
    *scale = s;
}

#endif
