/* The oneDNN glue: the one file (dnnl.c) where modelprof calls oneDNN.
 * The planner asks it first for each node; NULL leaves the node to its
 * operator's portable kernel. */
#ifndef MP_RUN_DNNL_H
#define MP_RUN_DNNL_H

#include "ops/ops.h"

/* The oneDNN kernel for node n (dtypes and shapes as inferred), or NULL
 * when oneDNN does not serve it. */
const mp_kernel *mp_dnnl_kernel(const mp_graph *g, const mp_node *n);

/* oneDNN is loaded on first use (dlopen): false when it cannot be. */
bool mp_dnnl_available(void);
/* The OpenMP spin count the glue sets before it loads oneDNN (and libgomp
 * with it), given the user's GOMP_SPINCOUNT and OMP_WAIT_POLICY (NULL:
 * unset) and whether libgomp is already loaded: NULL sets nothing. */
const char *mp_dnnl_spin_choice(const char *spincount, const char *wait_policy,
                                bool gomp_loaded);
/* The peak probe: C = A B on s x s row-major fp32 matrices with `threads`
 * threads, which 0 through the matmul primitive (B reordered once into its
 * layout), 1 through dnnl_sgemm, 2 through OpenBLAS (NULL without it). new returns NULL without oneDNN or on
 * failure; A and B must outlive it. */
typedef struct mp_dnnl_probe mp_dnnl_probe;
mp_dnnl_probe *mp_dnnl_probe_new(int which, int threads, int s, const float *a, const float *b, float *c);
bool mp_dnnl_probe_run(mp_dnnl_probe *pr, int threads);
void mp_dnnl_probe_free(mp_dnnl_probe *pr);

/* Matrix products (MatMul, Gemm with constant B) may run on dnnl_sgemm or
 * OpenBLAS when timing at plan time finds one faster than the matmul
 * primitive. Tests and benches force a candidate for the plans made after:
 * 0 the primitive, 1 dnnl_sgemm, 2 OpenBLAS (dnnl_sgemm without it), -1
 * the timed choice (the default). Returns the previous setting. */
int mp_dnnl_gemm_force(int which);

/* Convolutions with constant weights may run on another implementation
 * oneDNN has for their layouts (dnnl_conv.c: timed at plan time, the
 * fastest kept). Tests force the first whose name starts with impl_prefix
 * ("gemm", "jit", "brg"; the default one when none does) for the plans
 * made after; NULL: the timed choice (the default). Returns the previous
 * setting. */
const char *mp_dnnl_conv_force(const char *impl_prefix);

/* How many matmul primitives this process made on weights with padded rows
 * (gemm:jit below AVX-512, dnnl.c gemm_padded_weights): for tests. */
int mp_dnnl_padded_products(void);
/* How many kernel primitives oneDNN made with its reference code (an
 * implementation named "ref..."), this process: a layout mismatch that
 * turns a fast kernel into a slow one. For tests. */
int mp_dnnl_reference_primitives(void);

/* ---- the recurrent layers (dnnl_rnn.c) ----
 * LSTM, GRU and RNN through oneDNN's RNN primitives, or NULL when the node
 * has what the primitives cannot do (mp_dnnl_kernel asks it). */
const mp_kernel *mp_dnnl_rnn_kernel(const mp_graph *g, const mp_node *n);
/* A symbol of the loaded oneDNN (or its libgomp); NULL without it. */
void *mp_dnnl_sym(const char *name);
/* The glue's one CPU engine and stream, written to *(dnnl_engine_t *)eng
 * and *(dnnl_stream_t *)strm (void * so that this header needs no dnnl.h);
 * false without oneDNN. */
bool mp_dnnl_engine(void *eng, void *strm);

#endif
