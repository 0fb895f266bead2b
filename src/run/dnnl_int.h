/* The oneDNN glue's internal header: what its files share (src/run/dnnl.c
 * and dnnl_*.c; docs/DESIGN.md "oneDNN"). The library is loaded at run
 * time (dnnl.c): every oneDNN function is called through a pointer found by
 * dlsym, and the macros below make the calls read as the API's own. Then
 * the kernel state every primitive kernel shares (dnnl_chain.c: layouts,
 * arguments, post-op chains) and the prepare/ok pairs the dispatch table
 * (dnnl.c) names. Nothing here is part of the library's API. */
#ifndef MP_RUN_DNNL_INT_H
#define MP_RUN_DNNL_INT_H

#include "run/dnnl.h"
#include "run/blas.h"
#include "analyze/patterns.h"
#include "load/load.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dlfcn.h>
#include <dnnl.h>
#include <dnnl_debug.h>

/* OpenMP's two calls we need (libgomp, which libdnnl uses). Declared here
 * rather than through <omp.h>, which clang does not ship on Debian. */
extern void omp_set_num_threads(int n);
extern int omp_get_max_threads(void);

/* ----------------------------------------------------- loading oneDNN
 * oneDNN (with libgomp and libstdc++ behind it) is loaded when a run first
 * asks for it, not when the program starts: linked in, the dynamic loader
 * spent about 1.5 ms on it at every start of the command, a third of a
 * static profile of a 7B graph, which never runs a kernel. Each function
 * the glue calls is reached through a pointer found by dlsym; the macros
 * below make the calls read as the API's own. Without the library the glue
 * serves no node and every node runs on its portable kernel. */
#define MP__DL_FNS(X) \
    X(dnnl_batch_normalization_forward_desc_init) \
    X(dnnl_binary_desc_init) \
    X(dnnl_concat_primitive_desc_create) \
    X(dnnl_dilated_convolution_forward_desc_init) \
    X(dnnl_dilated_deconvolution_forward_desc_init) \
    X(dnnl_eltwise_forward_desc_init) \
    X(dnnl_engine_create) \
    X(dnnl_layer_normalization_forward_desc_init) \
    X(dnnl_logsoftmax_forward_desc_init) \
    X(dnnl_matmul_desc_init) \
    X(dnnl_memory_create) \
    X(dnnl_memory_desc_equal) \
    X(dnnl_memory_desc_get_size) \
    X(dnnl_memory_desc_init_by_strides) \
    X(dnnl_memory_desc_init_by_tag) \
    X(dnnl_memory_destroy) \
    X(dnnl_memory_get_memory_desc) \
    X(dnnl_memory_set_data_handle) \
    X(dnnl_pooling_v2_forward_desc_init) \
    X(dnnl_post_ops_append_binary) \
    X(dnnl_post_ops_append_eltwise) \
    X(dnnl_post_ops_append_sum) \
    X(dnnl_post_ops_create) \
    X(dnnl_post_ops_destroy) \
    X(dnnl_primitive_attr_create) \
    X(dnnl_primitive_attr_destroy) \
    X(dnnl_primitive_attr_set_output_scales) \
    X(dnnl_primitive_attr_set_post_ops) \
    X(dnnl_primitive_attr_set_scratchpad_mode) \
    X(dnnl_primitive_create) \
    X(dnnl_primitive_desc_create) \
    X(dnnl_primitive_desc_destroy) \
    X(dnnl_primitive_desc_iterator_create) \
    X(dnnl_primitive_desc_iterator_destroy) \
    X(dnnl_primitive_desc_iterator_fetch) \
    X(dnnl_primitive_desc_iterator_next) \
    X(dnnl_primitive_desc_query) \
    X(dnnl_primitive_desc_query_md) \
    X(dnnl_primitive_destroy) \
    X(dnnl_primitive_execute) \
    X(dnnl_reduction_desc_init) \
    X(dnnl_reorder_primitive_desc_create) \
    X(dnnl_softmax_forward_desc_init) \
    X(dnnl_status2str) \
    X(dnnl_stream_create) \
    X(dnnl_stream_wait) \
    X(dnnl_sgemm) \
    X(omp_get_max_threads) \
    X(omp_set_num_threads)

#define MP__DL_PTR(f) extern __typeof__(f) *mp__dl_##f;
MP__DL_FNS(MP__DL_PTR)
#undef MP__DL_PTR

#define dnnl_batch_normalization_forward_desc_init (*mp__dl_dnnl_batch_normalization_forward_desc_init)
#define dnnl_binary_desc_init (*mp__dl_dnnl_binary_desc_init)
#define dnnl_concat_primitive_desc_create (*mp__dl_dnnl_concat_primitive_desc_create)
#define dnnl_dilated_convolution_forward_desc_init (*mp__dl_dnnl_dilated_convolution_forward_desc_init)
#define dnnl_dilated_deconvolution_forward_desc_init (*mp__dl_dnnl_dilated_deconvolution_forward_desc_init)
#define dnnl_eltwise_forward_desc_init (*mp__dl_dnnl_eltwise_forward_desc_init)
#define dnnl_engine_create (*mp__dl_dnnl_engine_create)
#define dnnl_layer_normalization_forward_desc_init (*mp__dl_dnnl_layer_normalization_forward_desc_init)
#define dnnl_logsoftmax_forward_desc_init (*mp__dl_dnnl_logsoftmax_forward_desc_init)
#define dnnl_matmul_desc_init (*mp__dl_dnnl_matmul_desc_init)
#define dnnl_memory_create (*mp__dl_dnnl_memory_create)
#define dnnl_memory_desc_equal (*mp__dl_dnnl_memory_desc_equal)
#define dnnl_memory_desc_get_size (*mp__dl_dnnl_memory_desc_get_size)
#define dnnl_memory_desc_init_by_strides (*mp__dl_dnnl_memory_desc_init_by_strides)
#define dnnl_memory_desc_init_by_tag (*mp__dl_dnnl_memory_desc_init_by_tag)
#define dnnl_memory_destroy (*mp__dl_dnnl_memory_destroy)
#define dnnl_memory_get_memory_desc (*mp__dl_dnnl_memory_get_memory_desc)
#define dnnl_memory_set_data_handle (*mp__dl_dnnl_memory_set_data_handle)
#define dnnl_pooling_v2_forward_desc_init (*mp__dl_dnnl_pooling_v2_forward_desc_init)
#define dnnl_post_ops_append_binary (*mp__dl_dnnl_post_ops_append_binary)
#define dnnl_post_ops_append_eltwise (*mp__dl_dnnl_post_ops_append_eltwise)
#define dnnl_post_ops_append_sum (*mp__dl_dnnl_post_ops_append_sum)
#define dnnl_post_ops_create (*mp__dl_dnnl_post_ops_create)
#define dnnl_post_ops_destroy (*mp__dl_dnnl_post_ops_destroy)
#define dnnl_primitive_attr_create (*mp__dl_dnnl_primitive_attr_create)
#define dnnl_primitive_attr_destroy (*mp__dl_dnnl_primitive_attr_destroy)
#define dnnl_primitive_attr_set_output_scales (*mp__dl_dnnl_primitive_attr_set_output_scales)
#define dnnl_primitive_attr_set_post_ops (*mp__dl_dnnl_primitive_attr_set_post_ops)
#define dnnl_primitive_attr_set_scratchpad_mode (*mp__dl_dnnl_primitive_attr_set_scratchpad_mode)
#define dnnl_primitive_create (*mp__dl_dnnl_primitive_create)
#define dnnl_primitive_desc_create (*mp__dl_dnnl_primitive_desc_create)
#define dnnl_primitive_desc_destroy (*mp__dl_dnnl_primitive_desc_destroy)
#define dnnl_primitive_desc_iterator_create (*mp__dl_dnnl_primitive_desc_iterator_create)
#define dnnl_primitive_desc_iterator_destroy (*mp__dl_dnnl_primitive_desc_iterator_destroy)
#define dnnl_primitive_desc_iterator_fetch (*mp__dl_dnnl_primitive_desc_iterator_fetch)
#define dnnl_primitive_desc_iterator_next (*mp__dl_dnnl_primitive_desc_iterator_next)
#define dnnl_primitive_desc_query (*mp__dl_dnnl_primitive_desc_query)
#define dnnl_primitive_desc_query_md (*mp__dl_dnnl_primitive_desc_query_md)
#define dnnl_primitive_destroy (*mp__dl_dnnl_primitive_destroy)
#define dnnl_primitive_execute (*mp__dl_dnnl_primitive_execute)
#define dnnl_reduction_desc_init (*mp__dl_dnnl_reduction_desc_init)
#define dnnl_reorder_primitive_desc_create (*mp__dl_dnnl_reorder_primitive_desc_create)
#define dnnl_softmax_forward_desc_init (*mp__dl_dnnl_softmax_forward_desc_init)
#define dnnl_status2str (*mp__dl_dnnl_status2str)
#define dnnl_stream_create (*mp__dl_dnnl_stream_create)
#define dnnl_stream_wait (*mp__dl_dnnl_stream_wait)
#define dnnl_sgemm (*mp__dl_dnnl_sgemm)
#define omp_get_max_threads (*mp__dl_omp_get_max_threads)
#define omp_set_num_threads (*mp__dl_omp_set_num_threads)

#define DN(call, what)                                   \
    do {                                                 \
        dnnl_status_t dn_s_ = (call);                    \
        if (dn_s_ != dnnl_success) return dn_dfail(k, dn_s_, what); \
    } while (0)
/* -------------------------------------------------------- kernel state */

#define DK_MAXARG 40
#define DK_MAXOWN 8
#define DK_MAXPRE 4
/* FROM_SCRATCH: the per-run scratch at its start (oneDNN's scratchpad);
 * FROM_SCRATCH_AT: at the kernel's offset scr_at (a buffer of its own there) */
enum { FROM_IN, FROM_OUT, FROM_OWN, FROM_SCRATCH, FROM_SCRATCH_AT };
typedef struct dk {
    dnnl_primitive_t prim;
    int n;
    dnnl_exec_arg_t ex[DK_MAXARG];
    unsigned char from[DK_MAXARG];
    int idx[DK_MAXARG];
    void *last[DK_MAXARG];   /* the handle set last, to skip unchanged ones */
    void *own[DK_MAXOWN];
    int n_own;
    int threads;
    /* a blocked result reordered into the plain output (a Conv reading a
     * blocked input whose own readers want plain) */
    dnnl_primitive_t reo;
    dnnl_exec_arg_t rex[2];
    /* a Conv's residual added as a sum post-op: copied (reordered) into
     * the buffer the primitive writes (sum_own, else the output) before
     * it runs, unless it is that buffer already (sum_in: k->in index) */
    dnnl_primitive_t sumr;
    dnnl_exec_arg_t sumx[2];
    int sum_in;
    void *sum_own;
    /* a plain input reordered to channels-last first (into the kernel's
     * buffer), weights known only at run time reordered into the
     * primitive's layout, a Conv's plain residual reordered to
     * channels-last: input pre_in[i] */
    dnnl_primitive_t pre[DK_MAXPRE];
    dnnl_exec_arg_t prex[DK_MAXPRE][2];
    int pre_in[DK_MAXPRE];
    int n_pre;
    const void *lay_ex;    /* the value this kernel registered a blocked */
    const mp_graph *lay_g;   /* layout for (see below), lay_v -1: none */
    int lay_v;
    /* a matrix product run by a GEMM library instead of the primitive
     * (gemm_choose, below): alt is GEMM_SGEMM or GEMM_BLAS, 0 the primitive */
    int alt;
    bool alt_ta, alt_tb;
    int64_t alt_m, alt_n, alt_k, alt_lda, alt_ldb;
    float alt_alpha;
    const float *alt_b;      /* B as stored (a constant the plan holds) */
    int alt_nadd;            /* tensors added to the product (bias, residual) */
    int alt_add_in[8];       /* k->in index, or -1: alt_add_own */
    const float *alt_add_own[8];
    bool alt_add_row[8];     /* an [N] row broadcast over the M rows, else [M, N] */
    int wown;                /* own[] index of the primitive's weights, -1 */
    size_t scr_at;           /* FROM_SCRATCH_AT's offset into the scratch */
} dk;
/* ------------------------------------------------------ post-op chains */

typedef struct chain {
    dnnl_post_ops_t po;
    int n_po;
    int n_bin;
    int bin_po[8];           /* post-op index of each binary post-op */
    int bin_in[8];           /* its operand: k->in index */
    dnnl_alg_kind_t bin_alg[8];
    dnnl_memory_desc_t bin_md[8];
    /* channels-last (a Conv's chain; rank, 0: no): a plain operand of the
     * output's size is reordered to channels-last before the primitive
     * runs (bin_cl[i]), as oneDNN's fast convolutions read a residual in
     * the output's layout and fall to the reference code otherwise */
    int cl_rank;
    bool bin_cl[8];
    /* a residual of the output's size added first (a Conv's chain): a sum
     * post-op, the residual (k->in sum_in, stored as sum_md) put in the
     * destination before the primitive runs; -1 none. oneDNN 2.6's
     * brgemm 1x1 convolution takes a sum but not a full-size binary add,
     * which falls to the older jit 1x1 (ResNet-50's 16 Conv+Add+Relu at
     * 171 GFLOPS against the 213 of its Conv+Relu) */
    int sum_in;
    dnnl_memory_desc_t sum_md;
    /* BatchNormalization folded (Conv only): k->in index of scale, else -1 */
    int bn_in;
    float bn_eps;
    /* MatMul folded to 2-D: output dims as the graph has them */
    bool fold2d;
    /* a batched MatMul (rank > 2, not folded): its descriptors, to ask
     * oneDNN whether a binary post-op keeps its fast product. oneDNN 2.6's
     * brgemm matmul takes an operand of the output's dims, one broadcast
     * over the rows (per output column) or over dim 1 (per batch and
     * position), and falls to ref:any for the rest (Swin's relative
     * position bias [1, heads, 49, 49]: 570 ms for a 30 MFLOP product);
     * NULL: no probe */
    const dnnl_memory_desc_t *probe_a, *probe_b, *probe_y;
    int final_v;             /* the value the kernel writes after fusion */
    dnnl_alg_kind_t used[16]; /* eltwise algorithms in the chain so far */
    int n_used;
} chain;
typedef struct eltw {
    dnnl_alg_kind_t alg[2];
    float a[2], b[2];
    int n;
} eltw;
/* LayerNormalization as exporters before opset 17 write it (PyTorch's
 * TorchScript exporter, opset 14): ReduceMean, Sub, Pow, ReduceMean, Add,
 * Sqrt, Div (or Reciprocal and Mul), then Mul(gamma), Add(beta), found by
 * the pattern layer (patterns.c). Runs on its first node, the ReduceMean
 * of x over the last axis: nodes[] gets the rest in topological order,
 * *gamma / *beta the scale and shift (-1: left to run apart). */
typedef struct lnpat {
    int nodes[15], n;
    double eps;
    int gamma, beta;
    int64_t rows, d;
} lnpat;
/* ------------------------------------------------------------ attention
 * Scaled dot-product attention as the exporters before opset 23 write it:
 * MatMul(Q, Kt) [-> Mul or Div by a constant scalar] [-> a mask: Add of a
 * tensor, or Where(cond, scores, fill) with fill -inf or float's lowest]
 * -> Softmax over the last axis [-> the NaN guard Where(IsNaN(p), c, p)]
 * [-> Cast to float, twice at most] -> MatMul(., V), each value between
 * read only by the next node (and the guard's IsNaN).
 * Q [..., Sq, D], Kt [..., D, Sk], V [..., Sk, Dv]
 * with the same leading (batch x head) dims; the mask broadcasts to the
 * scores [..., Sq, Sk]. Fused, one kernel runs the chain: the scores by
 * oneDNN's batched matmul with the scale as its output scale and the mask
 * as a binary post-op, into the kernel's scratch; the softmax in place
 * there; the product with V into the output. The scores take the per-run
 * scratch instead of two buffers of the plan's, and the report shows one
 * group (docs/DESIGN.md has the figures: about as fast as the three
 * kernels apart). A per-head version (dnnl_sgemm on blocks of query rows,
 * the softmax in cache) took BERT-base's attention from 4.9 to 10.5 ms a
 * pass: oneDNN 2.6's sgemm is slow on 64 x 64 x 128 products. Unfused
 * (--no-fuse, or the group refused), the head is the plain MatMul kernel.
 * Counting is the nodes' own.
 *
 * The Where mask (PyTorch's TorchScript export of GPT-2's causal mask)
 * becomes the additive mask (cond selects the fill: 0 elsewhere), kept by
 * the kernel: made once when cond is a constant, else each run. The
 * same softmax follows: a fill of -inf gives -inf either way, and float's
 * lowest (-3.4e38) absorbs any score below 1e30 in magnitude, the sum
 * rounding to the fill. The NaN guard (the dynamo exporter's decomposed
 * scaled_dot_product_attention: a row masked whole gives NaN, replaced
 * by c) is a pass over the probabilities in place. */

typedef struct attnpat {
    int nodes[8];            /* after the head: [scale] [mask] softmax [isnan, where] [cast, cast] product */
    int n;
    float alpha;             /* the scale on the scores (1: none) */
    int mask_v;              /* value added to the scores, or Where's condition; -1: none */
    bool where;              /* mask_v is a Where's condition: */
    bool fill_on_true;       /* the fill where it is true (else where false) */
    float fill;
    bool guard;              /* NaN probabilities become guard_c */
    float guard_c;
    int v_v;                 /* V */
} attnpat;

/* ---- shared between the glue's files ---- */
extern dnnl_engine_t dn_eng;
extern dnnl_stream_t dn_strm;
extern dnnl_status_t dn_init_st;
extern pthread_once_t dn_once;
void dn_engine_init(void);
void dn_set_threads(int n);
mp_status dn_dfail(const mp_kctx *k, dnnl_status_t s, const char *what);
const mp_value *dn_gval(const mp_graph *g, const mp_node *n, int i);
const mp_value *dn_gout(const mp_graph *g, const mp_node *n, int i);
/* Set while the glue asks or runs the fp32 kernel of a node whose float
 * activations are 16-bit (dnnl_half.c): dn_is_f32 then takes fp16 and
 * bf16 tensors, which the wrapper converts at the node's boundary. */
extern _Thread_local bool dn_half_mode;
const mp_kernel *dn_fp32_kernel(const mp_graph *g, const mp_node *n);
bool dn_half_node(const mp_graph *g, const mp_node *n);
const mp_kernel *dn_half_kernel(const mp_graph *g, const mp_node *n);
bool dn_is_f32(const mp_value *v);
bool dn_is_wt(const mp_graph *g, const mp_value *v);
bool dn_is_const_in(const mp_graph *g, const mp_value *v);
/* pd's implementation name without oneDNN's "x64:" ("" when not known);
 * whether it is one of the reference ones ("ref:any"), slow everywhere */
const char *dn_pd_impl(const_dnnl_primitive_desc_t pd);
bool dn_pd_is_ref(const_dnnl_primitive_desc_t pd);
bool dn_same_dims(const mp_value *a, int rank, const int64_t *dims);
bool dn_is_op(const mp_node *n, const char *op);
mp_pref dn_pattern_at(const mp_graph *g, const mp_node *n, const mp_patterns **pp);
int64_t dn_numel_of(int rank, const int64_t *dims);
dnnl_status_t dn_md_plain(dnnl_memory_desc_t *md, int rank, const int64_t *dims);
dnnl_status_t dn_md_plain_pad(dnnl_memory_desc_t *md, int rank, int r0, const int64_t *d0);
dnnl_status_t dn_md_nhwc(dnnl_memory_desc_t *md, int rank, const int64_t *dims);
dnnl_status_t dn_md_any(dnnl_memory_desc_t *md, int rank, const int64_t *dims);
bool dn_lay_find(const mp_kctx *k, int v, dnnl_memory_desc_t *md);
bool dn_lay_add(const mp_kctx *k, dk *s, int v, const dnnl_memory_desc_t *md);
void dn_dk_release(void *state);
void *dn_dk_alloc_own(dk *s, size_t bytes);
mp_status dn_dk_arg(mp_kctx *k, dk *s, int arg, const dnnl_memory_desc_t *md, int from,
                        int idx, void *data);
mp_status dn_dk_run(mp_kctx *k);
mp_status dn_dk_pre_reorder(mp_kctx *k, dk *s, int in, const dnnl_memory_desc_t *from,
                                const dnnl_memory_desc_t *to, void **buf);
mp_status dn_dk_post_reorder(mp_kctx *k, dk *s, const dnnl_memory_desc_t *from,
                                 const dnnl_memory_desc_t *to, void **buf);
mp_status dn_dk_sum_source(mp_kctx *k, dk *s, int in, const dnnl_memory_desc_t *from,
                               const dnnl_memory_desc_t *to, void *own);
mp_status dn_dk_new(mp_kctx *k, dk **out);
mp_status dn_attr_new(mp_kctx *k, dnnl_primitive_attr_t *attr);
mp_status dn_dk_finish(mp_kctx *k, dk *s, const_dnnl_primitive_desc_t pd, size_t *scratch);
mp_status dn_const_f32(mp_kctx *k, dk *s, int i, const float **out);
mp_status dn_bind_reordered(mp_kctx *k, dk *s, int arg, const dnnl_memory_desc_t *from,
                                const float *data, const dnnl_memory_desc_t *to);
bool dn_eltwise_of(const mp_graph *g, const mp_node *c, eltw *e);
bool dn_binary_of(const mp_node *c, dnnl_alg_kind_t *alg);
bool dn_fits_into(const mp_value *o, int rank, const int64_t *dims);
mp_status dn_absorb_chain(mp_kctx *k, int v, int rank, const int64_t *dims, bool allow_bn,
                              chain *ch);
mp_status dn_chain_init(mp_kctx *k, chain *ch);
mp_status dn_chain_attr(mp_kctx *k, chain *ch, dnnl_primitive_attr_t attr);
mp_status dn_chain_bind(mp_kctx *k, dk *s, chain *ch);
void dn_attr_done(dnnl_primitive_attr_t attr, chain *ch);
mp_status dn_make_pd(mp_kctx *k, const void *desc, dnnl_primitive_attr_t attr, chain *ch,
                         dnnl_primitive_desc_t *pd);
mp_status dn_dk_src_dst(mp_kctx *k, dk *s, const void *desc, const dnnl_memory_desc_t *src,
                            const dnnl_memory_desc_t *dst, size_t *scratch);
bool dn_readers_take_blocked(const mp_graph *g, int v, int depth);
bool dn_conv_ok(const mp_graph *g, const mp_node *n, bool transpose);
mp_status dn_conv_prepare(mp_kctx *k, size_t *scratch);
mp_status dn_convt_prepare(mp_kctx *k, size_t *scratch);
mp_status dn_gemm_alt_run(mp_kctx *k, dk *s);
/* The plan-time chooser's timing (dnnl_gemm.c), shared by the GEMM chosen
 * per product shape and the convolution chosen per shape (dnnl_conv.c):
 * call(ctx, c) runs candidate c (0 the incumbent, up to DN_MAXCAND) once;
 * each runs once to warm up, then in DN_ROUNDS rounds alternated, the
 * order turned each round; *choice is the candidate whose time over the
 * incumbent's in the same round is lowest and below 0.9 in 4 rounds of 5,
 * else 0. */
#define DN_MAXCAND 6
#define DN_ROUNDS 5
mp_status dn_time_choose(int ncand, mp_status (*call)(void *ctx, int c), void *ctx, int *choice);
bool dn_matmul_ok(const mp_graph *g, const mp_node *n);
mp_status dn_matmul_prepare(mp_kctx *k, size_t *scratch);
bool dn_gemm_ok(const mp_graph *g, const mp_node *n);
mp_status dn_gemm_prepare(mp_kctx *k, size_t *scratch);
bool dn_gemm_dyn_ok(const mp_graph *g, const mp_node *n);
mp_status dn_gemm_dyn_prepare(mp_kctx *k, size_t *scratch);
mp_status dn_gemm_dyn_run(mp_kctx *k);
bool dn_conv_dyn_ok(const mp_graph *g, const mp_node *n);
mp_status dn_conv_dyn_prepare(mp_kctx *k, size_t *scratch);
mp_status dn_conv_dyn_run(mp_kctx *k);
bool dn_convt_dyn_ok(const mp_graph *g, const mp_node *n);
mp_status dn_convt_dyn_prepare(mp_kctx *k, size_t *scratch);
mp_status dn_convt_dyn_run(mp_kctx *k);
bool dn_pool_ok(const mp_graph *g, const mp_node *n);
bool dn_concat_ok(const mp_graph *g, const mp_node *n);
bool dn_einsum_ok(const mp_graph *g, const mp_node *n);
mp_status dn_einsum_prepare(mp_kctx *k, size_t *scratch);
mp_status dn_concat_prepare(mp_kctx *k, size_t *scratch);
mp_status dn_pool_prepare(mp_kctx *k, size_t *scratch);
bool dn_softmax_axis(const mp_graph *g, const mp_node *n, int64_t *outer, int64_t *inner,
                         int64_t *rest);
bool dn_softmax_ok(const mp_graph *g, const mp_node *n);
mp_status dn_softmax_prepare(mp_kctx *k, size_t *scratch);
bool dn_layernorm_ok(const mp_graph *g, const mp_node *n);
mp_status dn_layernorm_prepare(mp_kctx *k, size_t *scratch);
mp_status dn_layernorm_make(mp_kctx *k, int64_t rows, int64_t d, float eps, int si, int bi, size_t *scratch);
bool dn_batchnorm_ok(const mp_graph *g, const mp_node *n);
mp_status dn_batchnorm_prepare(mp_kctx *k, size_t *scratch);
bool dn_eltwise_ok(const mp_graph *g, const mp_node *n);
mp_status dn_eltwise_prepare(mp_kctx *k, size_t *scratch);
mp_status dn_eltwise_make(mp_kctx *k, dnnl_alg_kind_t alg, float a, float b, int out_v, size_t *scratch);
bool dn_binary_blocked_ok(const mp_graph *g, const mp_node *n);
bool dn_binary_ok(const mp_graph *g, const mp_node *n, bool *swap);
mp_status dn_binary_prepare(mp_kctx *k, size_t *scratch);
const mp_pact *dn_act_decomposed(const mp_graph *g, const mp_patterns *p, int index);
const mp_pact *dn_gelu_fusable(const mp_graph *g, const mp_patterns *p, int index);
const mp_pact *dn_gelu_head(const mp_graph *g, const mp_node *n);
mp_status dn_gelu_prepare(mp_kctx *k, size_t *scratch);
bool dn_ln_pattern(const mp_graph *g, const mp_node *n, lnpat *lp);
mp_status dn_lnorm_prepare(mp_kctx *k, size_t *scratch);
bool dn_attn_pattern(const mp_graph *g, const mp_node *n, attnpat *p);
void dn_attn_release(void *state);
mp_status dn_attn_run(mp_kctx *k);
mp_status dn_attn_prepare(mp_kctx *k, size_t *scratch);
bool dn_transpose_ok(const mp_graph *g, const mp_node *n);
mp_status dn_transpose_prepare(mp_kctx *k, size_t *scratch);

#endif
