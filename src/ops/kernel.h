/* Shared machinery of the portable kernels (kernel_util.c): element access
 * for every dtype (fp16, bf16, fp8 and 4-bit types included), a broadcast
 * row iterator, axis walking for reductions, attribute and input helpers
 * and the one error path. Each family file holds its own ops' kernels
 * beside their shape and cost rules and uses only these. */
#ifndef MP_OPS_KERNEL_H
#define MP_OPS_KERNEL_H

#include "ops/ops.h"

/* ---- errors ---- */
/* Error naming the node and op: returns st. */
mp_status mp_kfail(const mp_kctx *k, mp_status st, const char *fmt, ...) MP_PRINTF(3, 4);

/* MP_OK when every output the node has got a buffer; an error when one's
 * shape was left to run time (a kernel that cannot shape its outputs
 * itself calls this first). */
mp_status mp_kout_known(const mp_kctx *k);

/* Output i of a data-dependent size: its planned buffer when the static
 * inference knew the shape (which must then be rank/dims), else one of
 * that shape (mp_kout_alloc). */
mp_status mp_kout_shape(mp_kctx *k, int i, int rank, const int64_t *dims);

/* ---- dtypes ---- */
/* Bytes of one element (0 for sub-byte types and strings). */
static inline size_t mp_kesize(int dt) { return (size_t)(mp_dtype_bits(dt) / 8); }
static inline bool mp_kis_float(int dt) { return mp_dtype_is_float(dt); }
/* The float / integer dtypes a kernel can read and write element-wise. */
bool mp_kdtype_ok(int dt);

/* fp16, bf16 and fp8 conversions: graph/graph.h (src/graph/convert.c) */

/* Element i of data (dtype dt) as a double / int64, and the reverse.
 * Integer stores wrap to the type's width; bool stores v != 0. */
double mp_kget_f(const void *data, int dt, int64_t i);
int64_t mp_kget_i(const void *data, int dt, int64_t i);
void mp_kset_f(void *data, int dt, int64_t i, double v);
void mp_kset_i(void *data, int dt, int64_t i, int64_t v);
/* n elements from src (dtype sdt) to dst (dtype ddt), converting as Cast
 * does (float to int truncates toward zero). */
void mp_kconvert(void *dst, int ddt, const void *src, int sdt, int64_t n);
/* A double as an int64 without undefined behaviour: NaN is 0, values
 * beyond +-2^62 saturate there, so that a coordinate plus or minus a
 * window still fits. For coordinates and counts computed from data
 * (Resize, GridSample, RoiAlign, OneHot, quantization). */
static inline int64_t mp_kf2i(double v) {
    if (!(v == v)) return 0;
    if (v >= 4611686018427387904.0) return INT64_C(1) << 62;
    if (v <= -4611686018427387904.0) return -(INT64_C(1) << 62);
    return (int64_t)v;
}
/* Element copy for any >= 8-bit dtype: dst[di] = src[si]. */
static inline void mp_kcopy1(void *dst, int64_t di, const void *src, int64_t si, size_t es) {
    memcpy((char *)dst + (size_t)di * es, (const char *)src + (size_t)si * es, es);
}

/* Contents of a small integer input (axes, shape, pads ...) as int64:
 * returns the count (up to cap), -1 when the input is absent. */
int64_t mp_kints(const mp_rtensor *t, int64_t *v, int64_t cap);
/* Input i or NULL when absent (past n_in or omitted). */
static inline const mp_rtensor *mp_kin(const mp_kctx *k, int i) {
    return (i >= 0 && i < k->n_in && k->in[i].data) ? &k->in[i] : NULL;
}

/* Row-major strides of dims. */
void mp_kstrides(int rank, const int64_t *dims, int64_t *strides);

/* n copies of the element at v (es bytes) into dst: memset when its bytes
 * are all one value, else doubling memcpy. */
void mp_kfill(void *dst, int64_t n, const void *v, size_t es);
/* Strided copy: out (contiguous, rank dims) element at index (i0..ir-1)
 * = in[base + sum i_d * istr[d]] (elements of es bytes; istr may hold 0
 * for a broadcast, negative for a reversed axis). */
void mp_kcopy_strided(void *out, const void *in, size_t es, int rank, const int64_t *dims,
                      const int64_t *istr, int64_t base);

/* ---- broadcast row iterator ----
 * Walks an output of rank r in rows: each row is `len` output elements
 * with input k advancing by step[k] (0 or its stride) per element. Dims
 * that are contiguous for every input are merged, so same-shape operands
 * form one long row. */
#define MP_KB_MAX 8
typedef struct mp_kbcast {
    int rank, n;                       /* merged rank without the row dim */
    int64_t dims[MP_MAX_RANK];
    int64_t stride[MP_KB_MAX][MP_MAX_RANK];
    int64_t idx[MP_MAX_RANK];
    int64_t off[MP_KB_MAX];            /* current row start of each input */
    int64_t len, rows;                 /* row length, row count */
    int64_t step[MP_KB_MAX];
} mp_kbcast;
/* n inputs of rank ranks[k] and dims dims[k], broadcast (aligned from the
 * right) to an output of out_rank/out_dims. */
void mp_kbcast_init(mp_kbcast *it, int out_rank, const int64_t *out_dims, int n,
                    const int *ranks, const int64_t *const *dims);
/* The same over a node's inputs first..first+n-1 and output 0. */
void mp_kbcast_node(mp_kbcast *it, const mp_kctx *k, int first, int n);
void mp_kbcast_next(mp_kbcast *it);
/* Position the iterator at row r (after init). */
void mp_kbcast_seek(mp_kbcast *it, int64_t r);

/* ---- axes ---- */
/* Bit mask of axes (negative counted from the end); false when one is out
 * of range. n < 0 (absent) gives all axes when all_default, else none. */
bool mp_kaxes_mask(const int64_t *axes, int64_t n, int rank, bool all_default, uint64_t *mask);
/* Split dims at axis: outer = prod(dims[:axis]), inner = prod(dims[axis+1:]). */
void mp_kouter_inner(int rank, const int64_t *dims, int axis, int64_t *outer, int64_t *inner);

/* ---- matrix products ----
 * C[M,N] = A[M,K] * B[K,N] (+ C when acc), A element (i,k) at
 * A[i*ars + k*acs], B element (k,j) at B[k*brs + j*bcs], C row stride ldc.
 * Blocked for the caches; the f64 form serves the integer ops exactly. */
void mp_kgemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t ars, int64_t acs,
                  const float *B, int64_t brs, int64_t bcs, float *C, int64_t ldc, bool acc);
void mp_kgemm_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t ars, int64_t acs,
                  const double *B, int64_t brs, int64_t bcs, double *C, int64_t ldc, bool acc);

/* mp_kgemm_f32 (acc false) with its rows split across k's threads
 * (mp_kparallel; k NULL: serial). */
void mp_kgemm_f32_par(mp_kctx *k, int64_t M, int64_t N, int64_t K, const float *A, int64_t ars, int64_t acs,
                      const float *B, int64_t brs, int64_t bcs, float *C, int64_t ldc);

/* numpy matmul y = op(a) @ op(b) over broadcast batch dims on f32 (f32)
 * or f64 buffers laid out as a, b, y; ta/tb: A's/B's last two dims are
 * stored transposed. A 1-D A is [1, K], a 1-D B [K, 1]. */
void mp_kmatmul(const mp_rtensor *a, const mp_rtensor *b, const mp_rtensor *y, bool f32, const void *A,
                const void *B, void *Y, bool ta, bool tb);
/* The same with row blocks split across k's threads (mp_kparallel). */
void mp_kmatmul_par(mp_kctx *k, const mp_rtensor *a, const mp_rtensor *b, const mp_rtensor *y, bool f32,
                    const void *A, const void *B, void *Y, bool ta, bool tb);

/* Kernels shared by the default domain and com.microsoft (linalg.c,
 * nn.c). */
mp_status mp_kquantize(mp_kctx *k);
mp_status mp_kdequantize(mp_kctx *k);
mp_status mp_klayernorm(mp_kctx *k);
mp_status mp_ktrilu(mp_kctx *k);
mp_status mp_kgemm_run(mp_kctx *k);   /* Gemm (transA, transB, alpha, beta) */
mp_status mp_kconv(mp_kctx *k);       /* Conv */
/* The attention reference kernels' two pieces (attention.c), shared by
 * Attention 23/24, RotaryEmbedding (both domains), com.microsoft's
 * Attention, MultiHeadAttention and GroupQueryAttention, in double:
 * mp_krope rotates the first `rot` dims of one head x in place by its
 * position's cos/sin (rot/2 each): pairs (i, i + rot/2), or (2i, 2i + 1)
 * when interleaved, (x1, x2) -> (x1 c - x2 s, x2 c + x1 s). */
void mp_krope(double *x, int64_t rot, bool interleaved, const double *cos, const double *sin);
/* One query row of scaled dot-product attention against T keys:
 *   s_t = scale * q . K[t]; softcap > 0: s_t = softcap * tanh(s_t / softcap);
 *   s_t += add[t] (add NULL: 0); keep[t] false (keep NULL: all kept):
 *   s_t = drop when drop is -inf, else s_t + drop (ONNX Runtime's -10000);
 *   w = softmax(s) (every s_t -inf: w = 0); out = w V.
 * K is [T, dk] and V [T, dv] row-major; raw (NULL or T) gets the scaled
 * scores, masked (NULL or T) the scores after softcap, add and keep; w
 * (T) the probabilities; out (dv). */
void mp_ksdpa_row(const double *q, const double *K, const double *V, int64_t T, int64_t dk, int64_t dv,
                  double scale, double softcap, const double *add, const uint8_t *keep, double drop,
                  double *raw, double *masked, double *w, double *out);

/* An activation by its ONNX name (RNN activations, FusedGemm/FusedConv):
 * Relu, Tanh, Sigmoid, LeakyRelu, HardSigmoid, ...; unknown names are
 * the identity. */
double mp_kact(const char *name, double x, double alpha, double beta);

/* ---- sliding windows (Conv, pooling) ---- */
typedef struct mp_kwin {
    int k;                                   /* spatial dims */
    int64_t in[MP_MAX_RANK], out[MP_MAX_RANK];
    int64_t kernel[MP_MAX_RANK], stride[MP_MAX_RANK], dil[MP_MAX_RANK];
    int64_t pad[MP_MAX_RANK];                /* begin pads (end pads follow from out) */
} mp_kwin;
/* Read strides, dilations, pads/auto_pad for input spatial dims in[] and
 * the (known) output's out[], kernel extents given. */
mp_status mp_kwin_read(const mp_kctx *k, int nsp, const int64_t *in, const int64_t *out,
                       const int64_t *kernel, mp_kwin *w);
/* ConvTranspose's geometry (the node's attributes against X, W and Y)
 * and where each column element lands: offsets[kpos * in_n + ipos] in
 * an output plane, -1 outside (malloc'd; NULL out of memory). */
typedef struct mp_kconvt {
    int nsp;
    int64_t N, C, G, mg, M, cg, kn, in_n, on;
    int64_t kernel[MP_MAX_RANK], in[MP_MAX_RANK], out[MP_MAX_RANK];
    int64_t stride[MP_MAX_RANK], dil[MP_MAX_RANK], pad[MP_MAX_RANK];
} mp_kconvt;
mp_status mp_kconvt_geom(mp_kctx *k, mp_kconvt *c);
int64_t *mp_kconvt_offsets(const mp_kconvt *c);
/* im2col of one image x[C][in...] for a window: col[(c*K + kpos)][opos]
 * (K = prod(kernel)); padding reads as pad_value. */
void mp_kim2col_f32(const float *x, int64_t C, const mp_kwin *w, float *col, float pad_value);
void mp_kim2col_f64(const double *x, int64_t C, const mp_kwin *w, double *col, double pad_value);

/* An Einsum of two operands that is a batched matrix product, each
 * operand [batch..., rows, columns] contiguous (A's or B's last two
 * letters maybe swapped: ta, tb), the output [batch..., m, n], the static
 * shapes the letters' (MaxViT's "B G H I D, B G H J D -> B G H I J"). */
typedef struct mp_einsum_bmm {
    int64_t batch, m, n, k;
    bool ta, tb;
} mp_einsum_bmm;
bool mp_einsum_bmm_of(const mp_graph *g, const mp_node *n, mp_einsum_bmm *e);

/* Conv's geometry (the node's attributes against X, W, B (NULL: none)
 * and Y): the window and the per-group sizes every Conv kernel uses. */
typedef struct mp_kconvg {
    mp_kwin win;
    int64_t N, C, M, G, cg, mg, kn, on, in_n;
} mp_kconvg;
mp_status mp_kconv_geom(const mp_kctx *k, const mp_rtensor *x, const mp_rtensor *w, const mp_rtensor *b,
                        const mp_rtensor *y, mp_kconvg *c);
/* fp32 Conv by im2col and a GEMM per image and group, then the bias (b
 * NULL: none): gemm(ctx, M, N, K, A, B, C) writes C = A B, all row-major
 * and contiguous; its non-zero status ends the loop. */
typedef mp_status (*mp_kconv_gemm_fn)(void *ctx, int64_t M, int64_t N, int64_t K, const float *A, const float *B,
                                      float *C);
mp_status mp_kconv_f32(const mp_kctx *k, const mp_kconvg *c, const float *x, const float *w, const float *b,
                       float *y, mp_kconv_gemm_fn gemm, void *ctx);

/* Conv (attributes of k's node: strides, dilations, pads, auto_pad,
 * group) in double: x shaped like xt, w like wt, y like yt; b: bias or
 * NULL. For the integer and quantized convolutions and other dtypes. */
mp_status mp_kconv_f64(const mp_kctx *k, const double *x, const mp_rtensor *xt, const double *w,
                       const mp_rtensor *wt, const double *b, double *y, const mp_rtensor *yt);

/* Store v into element i of a quantized dtype: integers round half to
 * even and saturate; fp8 types convert (saturating). */
void mp_kquant_store(void *y, int dt, int64_t i, double v);
/* DynamicQuantizeLinear's uint8 scale and zero point for x: the range of
 * its values and 0 (NaN values skipped), then ops/scalar.h's
 * mp_s_dynq_params (the zero point NaN when x holds an infinity). */
void mp_kdynq_params(const mp_rtensor *x, float *scale, double *zp);

/* Cubic convolution weight at distance d with coefficient a (Resize's
 * cubic_coeff_a; -0.75 for GridSample). */
double mp_kcubic(double d, double a);

/* A node's portable kernel run once outside a plan: prepare (with
 * scratch), run, release. For kernels that run other operators' kernels
 * (control-flow bodies, the quantized wrappers). */
mp_status mp_krun_node(const mp_op *op, mp_kctx *k);

/* Plan-time state holding a copy of a fixed-size struct (freed by
 * mp_kstate_release). */
void *mp_kstate_new(mp_kctx *k, size_t bytes);
void mp_kstate_release(void *state);

#endif
