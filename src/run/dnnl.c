/* The oneDNN glue (see dnnl.h): the one file where modelprof calls oneDNN.
 *
 * Every kernel here follows one pattern. prepare builds one oneDNN
 * primitive for the node's known shapes (plain row-major layouts for
 * activations, "any" for constant weights, which are reordered once into
 * the layout the primitive chose), creates a memory object for each of its
 * arguments and records where each argument's data comes from at run time
 * (a node input, a node output, a buffer the kernel owns, the scratch).
 * run only points those memory objects at this run's buffers and executes:
 * nothing is created or allocated per run. oneDNN's own scratchpad is the
 * per-run scratch the executor gives the kernel (user scratchpad mode), so
 * the executor accounts for it.
 *
 * Fusion (mp_kfuse): Conv, ConvTranspose, MatMul, Gemm and the binary ops
 * absorb the chain of single consumers that oneDNN can apply as post-ops:
 * a BatchNormalization with constant parameters right after a Conv is
 * folded into its weights and bias; activations become eltwise post-ops;
 * Add/Sub/Mul/Div by a constant scalar become a linear eltwise post-op;
 * Add/Sub/Mul/Div by a tensor that broadcasts to the output (a residual, a
 * bias, an attention mask) become binary post-ops.
 *
 * Threads: Debian's oneDNN runs on OpenMP; the run's thread count is set
 * with omp_set_num_threads before primitives are made and before each run
 * (only when it changes). */
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

#define MP__DL_PTR(f) static __typeof__(f) *mp__dl_##f;
MP__DL_FNS(MP__DL_PTR)
#undef MP__DL_PTR

static pthread_once_t mp__dl_once = PTHREAD_ONCE_INIT;
static bool mp__dl_ok;
static void *mp__dl_handle;

/* libgomp reads its spin policy once, when it loads, and it loads with
 * oneDNN here: when the user chose no policy (neither GOMP_SPINCOUNT nor
 * OMP_WAIT_POLICY set, even empty) and no libgomp is in the process yet,
 * the tool's default is a short spin, GOMP_SPINCOUNT=20000
 * (docs/DESIGN.md, "Threads"). Setting either variable overrides it. */
const char *mp_dnnl_spin_choice(const char *spincount, const char *wait_policy,
                                bool gomp_loaded) {
    if (spincount || wait_policy || gomp_loaded) return NULL;
    return "20000";
}

static void mp__spin_default(void) {
    void *g = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (g) dlclose(g);
    const char *v = mp_dnnl_spin_choice(getenv("GOMP_SPINCOUNT"),
                                        getenv("OMP_WAIT_POLICY"), g != NULL);
    if (v) setenv("GOMP_SPINCOUNT", v, 0);
}

static void mp__dl_load(void) {
    mp__spin_default();
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libdnnl.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    mp__dl_handle = h;
    bool ok = true;
    /* dlsym on the handle also searches libdnnl's dependencies (libgomp) */
#define MP__DL_SYM(f) ok = ok && (*(void **)&mp__dl_##f = dlsym(h, #f)) != NULL;
    MP__DL_FNS(MP__DL_SYM)
#undef MP__DL_SYM
    mp__dl_ok = ok;
}

bool mp_dnnl_available(void) {
    pthread_once(&mp__dl_once, mp__dl_load);
    return mp__dl_ok;
}

#define dnnl_batch_normalization_forward_desc_init (*mp__dl_dnnl_batch_normalization_forward_desc_init)
#define dnnl_binary_desc_init (*mp__dl_dnnl_binary_desc_init)
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

/* ---------------------------------------------------------------- engine */

static dnnl_engine_t g_eng;
static dnnl_stream_t g_strm;
static dnnl_status_t g_init_st = dnnl_success;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void engine_init(void) {
    g_init_st = dnnl_engine_create(&g_eng, dnnl_cpu, 0);
    if (g_init_st == dnnl_success)
        g_init_st = dnnl_stream_create(&g_strm, g_eng, dnnl_stream_default_flags);
}

/* The calling thread's OpenMP thread count (an ICV read, cheap): set only
 * when it differs, whoever set it last. */
static void set_threads(int n) {
    if (n > 0 && omp_get_max_threads() != n) omp_set_num_threads(n);
}

static mp_status dfail(const mp_kctx *k, dnnl_status_t s, const char *what) {
    return mp_error(MP_ERR_UNSUPPORTED, "node %s (%s): oneDNN %s: %s",
                    k->n->name ? k->n->name : "?", k->n->op, what, dnnl_status2str(s));
}

#define DN(call, what)                                   \
    do {                                                 \
        dnnl_status_t dn_s_ = (call);                    \
        if (dn_s_ != dnnl_success) return dfail(k, dn_s_, what); \
    } while (0)

/* ------------------------------------------------------------ graph view */

static const mp_value *gval(const mp_graph *g, const mp_node *n, int i) {
    if (i < 0 || i >= n->n_in || n->in[i] < 0) return NULL;
    return &g->values[n->in[i]];
}
static const mp_value *gout(const mp_graph *g, const mp_node *n, int i) {
    if (i < 0 || i >= n->n_out || n->out[i] < 0) return NULL;
    return &g->values[n->out[i]];
}
static bool is_f32(const mp_value *v) {
    return v && v->dtype == MP_DT_FLOAT && mp_shape_known(v);
}
/* fp32, or fp16/bf16 that prepare converts once (constant weights). */
static bool is_const_in(const mp_graph *g, const mp_value *v);
static bool is_wt(const mp_graph *g, const mp_value *v) {
    return v && mp_shape_known(v) &&
           (v->dtype == MP_DT_FLOAT ||
            ((v->dtype == MP_DT_FLOAT16 || v->dtype == MP_DT_BFLOAT16) && is_const_in(g, v)));
}
/* Constant at plan time as far as the graph tells: an initializer, a
 * Constant node's output, or contents the inference worked out. */
static bool is_const_in(const mp_graph *g, const mp_value *v) {
    return v && mp_value_const(g, (int)(v - g->values));
}
static bool same_dims(const mp_value *a, int rank, const int64_t *dims) {
    if (a->rank != rank) return false;
    for (int i = 0; i < rank; i++)
        if (a->dims[i] != dims[i]) return false;
    return true;
}
static bool is_op(const mp_node *n, const char *op) {
    return (n->domain[0] == 0 || mp_streq(n->domain, "ai.onnx")) && mp_streq(n->op, op);
}
/* The patterns of g (src/analyze/patterns.h) and what node n is in them. */
static mp_pref pattern_at(const mp_graph *g, const mp_node *n, const mp_patterns **pp) {
    const mp_patterns *p = mp_patterns_of(g);
    if (pp) *pp = p;
    if (!p) {
        mp_error_clear(); /* out of memory: no pattern runs fused */
        return (mp_pref){MP_PAT_NONE, -1, 0};
    }
    return mp_pattern_at(p, (int)(n - g->nodes));
}

static int64_t numel_of(int rank, const int64_t *dims) {
    int64_t p = 1;
    for (int i = 0; i < rank; i++) p *= dims[i];
    return p;
}

/* Plain row-major memory descriptor (rank 0 is [1]). */
static dnnl_status_t md_plain(dnnl_memory_desc_t *md, int rank, const int64_t *dims) {
    dnnl_dims_t d, s;
    if (rank == 0) {
        d[0] = 1;
        rank = 1;
    } else {
        for (int i = 0; i < rank; i++) d[i] = dims[i];
    }
    int64_t st = 1;
    for (int i = rank - 1; i >= 0; i--) {
        s[i] = st;
        st *= d[i] > 0 ? d[i] : 1;
    }
    return dnnl_memory_desc_init_by_strides(md, rank, d, dnnl_f32, s);
}
/* The same padded with leading 1s to `rank` (numpy broadcast alignment). */
static dnnl_status_t md_plain_pad(dnnl_memory_desc_t *md, int rank, int r0, const int64_t *d0) {
    int64_t d[DNNL_MAX_NDIMS];
    int off = rank - r0;
    for (int i = 0; i < rank; i++) d[i] = i < off ? 1 : d0[i - off];
    return md_plain(md, rank, d);
}
/* Channels-last (NHWC, NDHWC, NWC): the layout activations take between
 * oneDNN kernels. */
static dnnl_status_t md_nhwc(dnnl_memory_desc_t *md, int rank, const int64_t *dims) {
    dnnl_dims_t d = {0}, st = {0};
    for (int i = 0; i < rank && i < DNNL_MAX_NDIMS; i++) d[i] = dims[i];
    st[1] = 1;
    int64_t acc = d[1];
    for (int i = rank - 1; i >= 2; i--) {
        st[i] = acc;
        acc *= d[i];
    }
    st[0] = acc;
    return dnnl_memory_desc_init_by_strides(md, rank, d, dnnl_f32, st);
}
static dnnl_status_t md_any(dnnl_memory_desc_t *md, int rank, const int64_t *dims) {
    dnnl_dims_t d;
    for (int i = 0; i < rank; i++) d[i] = dims[i];
    return dnnl_memory_desc_init_by_tag(md, rank, d, dnnl_f32, dnnl_format_tag_any);
}

/* -------------------------------------------------------- kernel state */

#define DK_MAXARG 20
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

/* ---- channels-last activations between oneDNN kernels ----
 * oneDNN's fast convolutions work on channels-last (NHWC) or channel-
 * blocked layouts; on plain NCHW they fall back to im2col+GEMM, several
 * times slower, or to reference code. So a kernel whose output is read
 * only by oneDNN kernels that take any layout (Conv, pooling, and the
 * element-wise ops whose own readers do) leaves it channels-last, and
 * records that here, keyed by the plan and value; each reader looks its
 * inputs up at prepare. Channels-last has exactly the plain size, so the
 * planner's buffer fits. Graph outputs and anything a portable kernel
 * reads stay plain. Without a plan (unit tests) only a Conv's own
 * reorders in and out are exercised. */
typedef struct lay_ent {
    const void *ex;
    const mp_graph *g;
    int v;
    dnnl_memory_desc_t md;
} lay_ent;

static pthread_mutex_t g_lay_mu = PTHREAD_MUTEX_INITIALIZER;
static lay_ent *g_lay;
static int g_nlay, g_caplay;

static bool lay_find(const mp_kctx *k, int v, dnnl_memory_desc_t *md) {
    if (!k->ex || v < 0) return false;
    bool found = false;
    pthread_mutex_lock(&g_lay_mu);
    for (int i = 0; i < g_nlay; i++)
        if (g_lay[i].ex == k->ex && g_lay[i].g == k->g && g_lay[i].v == v) {
            *md = g_lay[i].md;
            found = true;
            break;
        }
    pthread_mutex_unlock(&g_lay_mu);
    return found;
}

static bool lay_add(const mp_kctx *k, dk *s, int v, const dnnl_memory_desc_t *md) {
    bool ok = false;
    pthread_mutex_lock(&g_lay_mu);
    if (g_nlay == g_caplay) {
        int cap = g_caplay ? g_caplay * 2 : 64;
        lay_ent *n = realloc(g_lay, sizeof *n * (size_t)cap);
        if (n) {
            g_lay = n;
            g_caplay = cap;
        }
    }
    if (g_nlay < g_caplay) {
        g_lay[g_nlay++] = (lay_ent){k->ex, k->g, v, *md};
        s->lay_ex = k->ex;
        s->lay_g = k->g;
        s->lay_v = v;
        ok = true;
    }
    pthread_mutex_unlock(&g_lay_mu);
    return ok;
}

static void lay_remove(dk *s) {
    if (s->lay_v < 0) return;
    pthread_mutex_lock(&g_lay_mu);
    for (int i = 0; i < g_nlay; i++)
        if (g_lay[i].ex == s->lay_ex && g_lay[i].g == s->lay_g && g_lay[i].v == s->lay_v) {
            g_lay[i] = g_lay[--g_nlay];
            break;
        }
    if (g_nlay == 0) {
        free(g_lay);
        g_lay = NULL;
        g_caplay = 0;
    }
    pthread_mutex_unlock(&g_lay_mu);
}

static void dk_release(void *state) {
    dk *s = state;
    if (!s) return;
    lay_remove(s);
    for (int i = 0; i < s->n; i++)
        if (s->ex[i].memory) dnnl_memory_destroy(s->ex[i].memory);
    if (s->prim) dnnl_primitive_destroy(s->prim);
    if (s->reo) dnnl_primitive_destroy(s->reo);
    if (s->sumr) dnnl_primitive_destroy(s->sumr);
    for (int i = 0; i < 2; i++)
        if (s->sumx[i].memory) dnnl_memory_destroy(s->sumx[i].memory);
    for (int i = 0; i < s->n_pre; i++)
        if (s->pre[i]) dnnl_primitive_destroy(s->pre[i]);
    for (int i = 0; i < 2; i++) {
        if (s->rex[i].memory) dnnl_memory_destroy(s->rex[i].memory);
        for (int j = 0; j < DK_MAXPRE; j++)
            if (s->prex[j][i].memory) dnnl_memory_destroy(s->prex[j][i].memory);
    }
    for (int i = 0; i < s->n_own; i++) free(s->own[i]);
    free(s);
}

static void *dk_alloc_own(dk *s, size_t bytes) {
    if (s->n_own >= DK_MAXOWN) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) return NULL;
    s->own[s->n_own++] = p;
    return p;
}

/* Argument `arg` of the primitive, described by md, fed from `from`/idx
 * (FROM_OWN: data is the kernel's own buffer). */
static mp_status dk_arg(mp_kctx *k, dk *s, int arg, const dnnl_memory_desc_t *md, int from,
                        int idx, void *data) {
    if (s->n >= DK_MAXARG) return mp_error(MP_ERR_LIMIT, "node %s: too many oneDNN arguments", k->n->name);
    dnnl_memory_t mem;
    DN(dnnl_memory_create(&mem, md, g_eng, from == FROM_OWN ? data : DNNL_MEMORY_NONE),
       "memory");
    s->ex[s->n].arg = arg;
    s->ex[s->n].memory = mem;
    s->from[s->n] = (unsigned char)from;
    s->idx[s->n] = idx;
    s->last[s->n] = from == FROM_OWN ? data : NULL;
    s->n++;
    return MP_OK;
}

/* A reorder from `from` to `to` with its two arguments; a buffer given
 * (from_buf, to_buf) is bound now, one left NULL is set at each run
 * (reorder_run). */
static mp_status reorder_new(mp_kctx *k, const dnnl_memory_desc_t *from, void *from_buf,
                             const dnnl_memory_desc_t *to, void *to_buf, dnnl_primitive_t *prim,
                             dnnl_exec_arg_t x[2]) {
    dnnl_primitive_desc_t rpd;
    DN(dnnl_reorder_primitive_desc_create(&rpd, from, g_eng, to, g_eng, NULL), "reorder");
    dnnl_status_t st = dnnl_primitive_create(prim, rpd);
    dnnl_primitive_desc_destroy(rpd);
    if (st) return dfail(k, st, "reorder");
    x[0].arg = DNNL_ARG_FROM;
    x[1].arg = DNNL_ARG_TO;
    DN(dnnl_memory_create(&x[0].memory, from, g_eng, from_buf ? from_buf : DNNL_MEMORY_NONE), "memory");
    DN(dnnl_memory_create(&x[1].memory, to, g_eng, to_buf ? to_buf : DNNL_MEMORY_NONE), "memory");
    return MP_OK;
}

/* Run a reorder of reorder_new, first pointing the sides given (not
 * NULL) at these buffers. */
static mp_status reorder_run(mp_kctx *k, dnnl_primitive_t prim, dnnl_exec_arg_t x[2], void *from, void *to) {
    if (from) DN(dnnl_memory_set_data_handle(x[0].memory, from), "set data handle");
    if (to) DN(dnnl_memory_set_data_handle(x[1].memory, to), "set data handle");
    DN(dnnl_primitive_execute(prim, g_strm, 2, x), "reorder");
    return MP_OK;
}

static mp_status gemm_alt_run(mp_kctx *k, dk *s);

static mp_status dk_run(mp_kctx *k) {
    dk *s = k->state;
    if (s->alt) return gemm_alt_run(k, s);
    set_threads(s->threads);
    for (int i = 0; i < s->n; i++) {
        void *p;
        switch (s->from[i]) {
        case FROM_IN: p = k->in[s->idx[i]].data; break;
        case FROM_OUT: p = k->out[s->idx[i]].data; break;
        case FROM_SCRATCH: p = k->scratch; break;
        case FROM_SCRATCH_AT: p = k->scratch ? (char *)k->scratch + s->scr_at : NULL; break;
        default: continue;
        }
        if (!p) return mp_error(MP_ERR_USAGE, "node %s (%s): a buffer oneDNN needs is missing",
                                k->n->name, k->n->op);
        if (p != s->last[i]) {
            DN(dnnl_memory_set_data_handle(s->ex[i].memory, p), "set data handle");
            s->last[i] = p;
        }
    }
    mp_status st;
    for (int i = 0; i < s->n_pre; i++) {
        void *p = k->in[s->pre_in[i]].data;
        if (!p) return mp_error(MP_ERR_USAGE, "node %s (%s): input buffer missing", k->n->name, k->n->op);
        if ((st = reorder_run(k, s->pre[i], s->prex[i], p, NULL))) return st;
    }
    if (s->sumr) {
        void *from = k->in[s->sum_in].data, *to = s->sum_own ? s->sum_own : k->out[0].data;
        if (!from || !to) return mp_error(MP_ERR_USAGE, "node %s (%s): the residual's buffer is missing",
                                          k->n->name, k->n->op);
        if (from != to && (st = reorder_run(k, s->sumr, s->sumx, from, to))) return st;
    }
    DN(dnnl_primitive_execute(s->prim, g_strm, s->n, s->ex), "execute");
    if (s->reo) {
        void *p = k->out[0].data;
        if (!p) return mp_error(MP_ERR_USAGE, "node %s (%s): output buffer missing", k->n->name, k->n->op);
        if ((st = reorder_run(k, s->reo, s->rex, NULL, p))) return st;
    }
    DN(dnnl_stream_wait(g_strm), "wait");
    return MP_OK;
}

/* Input `in` (plain, `from`) is reordered into a buffer of the kernel's
 * laid out as `to` before the primitive runs; bind the primitive's
 * argument to *buf (FROM_OWN). */
static mp_status dk_pre_reorder(mp_kctx *k, dk *s, int in, const dnnl_memory_desc_t *from,
                                const dnnl_memory_desc_t *to, void **buf) {
    if (s->n_pre >= DK_MAXPRE) return mp_error(MP_ERR_LIMIT, "node %s: too many input reorders", k->n->name);
    *buf = dk_alloc_own(s, dnnl_memory_desc_get_size(to));
    if (!*buf) return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
    int j = s->n_pre;
    s->pre_in[j] = in;
    mp_status st = reorder_new(k, from, NULL, to, *buf, &s->pre[j], s->prex[j]);
    if (s->pre[j]) s->n_pre++;
    return st;
}

/* The primitive writes `from` (blocked) into a buffer of the kernel's; a
 * reorder then writes the plain output `to`. Bind DST with dk_arg_dst. */
static mp_status dk_post_reorder(mp_kctx *k, dk *s, const dnnl_memory_desc_t *from,
                                 const dnnl_memory_desc_t *to, void **buf) {
    *buf = dk_alloc_own(s, dnnl_memory_desc_get_size(from));
    if (!*buf) return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
    return reorder_new(k, from, *buf, to, NULL, &s->reo, s->rex);
}

/* The residual (input `in`, stored as `from`) is put into the buffer the
 * primitive writes (`own`, else the output; laid out as `to`) before it
 * runs, for a sum post-op. */
static mp_status dk_sum_source(mp_kctx *k, dk *s, int in, const dnnl_memory_desc_t *from,
                               const dnnl_memory_desc_t *to, void *own) {
    s->sum_in = in;
    s->sum_own = own;
    /* the residual's bytes, laid out as the primitive writes: then the
     * output may be them (no copy) when nothing reads the residual after */
    if (!own && dnnl_memory_desc_equal(from, to)) mp_kshare(k, in);
    return reorder_new(k, from, NULL, to, NULL, &s->sumr, s->sumx);
}

/* A fresh state with the engine up and the thread count set. */
static mp_status dk_new(mp_kctx *k, dk **out) {
    pthread_once(&g_once, engine_init);
    if (g_init_st != dnnl_success) return dfail(k, g_init_st, "engine");
    dk *s = calloc(1, sizeof *s);
    if (!s) return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
    s->threads = k->threads > 0 ? k->threads : omp_get_max_threads();
    s->lay_v = -1;
    s->wown = -1;
    s->sum_in = -1;
    set_threads(s->threads);
    k->state = s;
    *out = s;
    return MP_OK;
}

/* Attributes with the user scratchpad (the executor's per-run scratch). */
static mp_status attr_new(mp_kctx *k, dnnl_primitive_attr_t *attr) {
    DN(dnnl_primitive_attr_create(attr), "attr");
    DN(dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user), "scratchpad");
    return MP_OK;
}

/* Create the primitive from pd, bind its scratchpad, ask for its size. */
static int g_ref_primitives; /* dnnl.h mp_dnnl_reference_primitives */

int mp_dnnl_reference_primitives(void) {
    return __atomic_load_n(&g_ref_primitives, __ATOMIC_RELAXED);
}

static mp_status dk_finish(mp_kctx *k, dk *s, const_dnnl_primitive_desc_t pd, size_t *scratch) {
    DN(dnnl_primitive_create(&s->prim, pd), "primitive");
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
        strncmp(impl, "ref", 3) == 0)
        __atomic_add_fetch(&g_ref_primitives, 1, __ATOMIC_RELAXED);
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t sz = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (sz) {
        mp_status st = dk_arg(k, s, DNNL_ARG_SCRATCHPAD, smd, FROM_SCRATCH, 0, NULL);
        if (st) return st;
        if (scratch && *scratch < sz) *scratch = sz;
    }
    return MP_OK;
}

/* Constant input i as fp32: its own data, or a converted copy the kernel
 * owns. NULL when the input has no data at prepare (known at run only). */
static mp_status const_f32(mp_kctx *k, dk *s, int i, const float **out) {
    const mp_rtensor *t = &k->in[i];
    *out = NULL;
    if (!t->data) return MP_OK;
    if (t->dtype == MP_DT_FLOAT) {
        *out = t->data;
        return MP_OK;
    }
    if (t->dtype != MP_DT_FLOAT16 && t->dtype != MP_DT_BFLOAT16)
        return mp_error(MP_ERR_UNSUPPORTED, "node %s (%s): input %d is %s, oneDNN kernel wants fp32",
                        k->n->name, k->n->op, i, mp_dtype_name(t->dtype));
    float *f = dk_alloc_own(s, (size_t)t->numel * sizeof(float));
    if (!f) return mp_error(MP_ERR_NOMEM, "node %s: out of memory converting weights", k->n->name);
    const uint16_t *h = t->data;
    for (int64_t j = 0; j < t->numel; j++) {
        f[j] = t->dtype == MP_DT_FLOAT16 ? mp_half_to_float(h[j]) : mp_bf16_to_float(h[j]);
    }
    *out = f;
    return MP_OK;
}

/* Reorder constant data (plain md `from`) into a kernel-owned buffer laid
 * out as `to`; the result is bound as argument `arg`. */
static mp_status bind_reordered(mp_kctx *k, dk *s, int arg, const dnnl_memory_desc_t *from,
                                const float *data, const dnnl_memory_desc_t *to) {
    size_t sz = dnnl_memory_desc_get_size(to);
    void *buf = dk_alloc_own(s, sz);
    if (!buf) return mp_error(MP_ERR_NOMEM, "node %s: out of memory for weights", k->n->name);
    if (dnnl_memory_desc_equal(from, to)) {
        memcpy(buf, data, sz);
    } else {
        dnnl_memory_t a = NULL, b = NULL;
        dnnl_primitive_desc_t rpd = NULL;
        dnnl_primitive_t r = NULL;
        dnnl_status_t st = dnnl_memory_create(&a, from, g_eng, (void *)data);
        if (st == dnnl_success) st = dnnl_memory_create(&b, to, g_eng, buf);
        if (st == dnnl_success) st = dnnl_reorder_primitive_desc_create(&rpd, from, g_eng, to, g_eng, NULL);
        if (st == dnnl_success) st = dnnl_primitive_create(&r, rpd);
        if (st == dnnl_success) {
            dnnl_exec_arg_t ex[2] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
            st = dnnl_primitive_execute(r, g_strm, 2, ex);
            if (st == dnnl_success) st = dnnl_stream_wait(g_strm);
        }
        if (r) dnnl_primitive_destroy(r);
        if (rpd) dnnl_primitive_desc_destroy(rpd);
        if (a) dnnl_memory_destroy(a);
        if (b) dnnl_memory_destroy(b);
        if (st != dnnl_success) return dfail(k, st, "weights reorder");
    }
    return dk_arg(k, s, arg, to, FROM_OWN, 0, buf);
}

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
    int final_v;             /* the value the kernel writes after fusion */
    dnnl_alg_kind_t used[16]; /* eltwise algorithms in the chain so far */
    int n_used;
} chain;

/* oneDNN 2.6 computes wrong results when one eltwise algorithm appears
 * twice in a post-op chain with different parameters (linear, tanh,
 * linear: tests/test_dnnl.c plan_matmul_chain), so a chain holds each
 * algorithm once. */
static bool chain_has(const chain *ch, dnnl_alg_kind_t alg) {
    for (int i = 0; i < ch->n_used; i++)
        if (ch->used[i] == alg) return true;
    return false;
}

typedef struct eltw {
    dnnl_alg_kind_t alg[2];
    float a[2], b[2];
    int n;
} eltw;

/* Activation `c` as eltwise steps (Clip's bounds read later); false if
 * oneDNN has none. */
static bool eltwise_of(const mp_graph *g, const mp_node *c, eltw *e) {
    e->n = 1;
    e->a[0] = e->b[0] = 0;
    if (is_op(c, "Relu")) e->alg[0] = dnnl_eltwise_relu;
    else if (is_op(c, "LeakyRelu")) { e->alg[0] = dnnl_eltwise_relu; e->a[0] = (float)mp_attr_f(c, "alpha", 0.01); }
    else if (is_op(c, "Elu")) { e->alg[0] = dnnl_eltwise_elu; e->a[0] = (float)mp_attr_f(c, "alpha", 1.0); }
    else if (is_op(c, "Sigmoid")) e->alg[0] = dnnl_eltwise_logistic;
    else if (is_op(c, "Tanh")) e->alg[0] = dnnl_eltwise_tanh;
    else if (is_op(c, "Abs")) e->alg[0] = dnnl_eltwise_abs;
    else if (is_op(c, "Sqrt")) e->alg[0] = dnnl_eltwise_sqrt;
    else if (is_op(c, "Exp")) e->alg[0] = dnnl_eltwise_exp;
    else if (is_op(c, "Log")) e->alg[0] = dnnl_eltwise_log;
    else if (is_op(c, "Neg")) { e->alg[0] = dnnl_eltwise_linear; e->a[0] = -1; }
    else if (is_op(c, "Reciprocal")) { e->alg[0] = dnnl_eltwise_pow; e->a[0] = 1; e->b[0] = -1; }
    else if (is_op(c, "Softplus")) { e->alg[0] = dnnl_eltwise_soft_relu; }
    else if (is_op(c, "Mish")) e->alg[0] = dnnl_eltwise_mish;
    else if (is_op(c, "HardSwish")) e->alg[0] = dnnl_eltwise_hardswish;
    else if (is_op(c, "HardSigmoid")) {
        e->alg[0] = dnnl_eltwise_linear;
        e->a[0] = (float)mp_attr_f(c, "alpha", 0.2);
        e->b[0] = (float)mp_attr_f(c, "beta", 0.5);
        e->alg[1] = dnnl_eltwise_clip_v2;
        e->a[1] = 0;
        e->b[1] = 1;
        e->n = 2;
    } else if (is_op(c, "Gelu")) {
        const char *ap = mp_attr_s(c, "approximate", "none");
        e->alg[0] = mp_streq(ap, "tanh") ? dnnl_eltwise_gelu_tanh : dnnl_eltwise_gelu_erf;
    } else if (is_op(c, "Clip")) {
        /* bounds: attributes before opset 11, constant inputs after */
        e->alg[0] = dnnl_eltwise_clip_v2;
        e->a[0] = (float)mp_attr_f(c, "min", -INFINITY);
        e->b[0] = (float)mp_attr_f(c, "max", INFINITY);
        for (int j = 1; j < c->n_in && j < 3; j++) {
            const mp_value *b = gval(g, c, j);
            if (b && (!is_const_in(g, b) || b->dtype != MP_DT_FLOAT || mp_value_numel(b) != 1)) return false;
        }
    } else {
        return false;
    }
    return true;
}

static mp_status po_eltwise(mp_kctx *k, chain *ch, dnnl_alg_kind_t alg, float a, float b) {
    DN(dnnl_post_ops_append_eltwise(ch->po, 1.0f, alg, a, b), "eltwise post-op");
    if (ch->n_used < 16) ch->used[ch->n_used++] = alg;
    ch->n_po++;
    return MP_OK;
}

/* Which binary algorithm node c is, and whether v (this kernel's output)
 * is its first operand; false when not Add/Sub/Mul/Div. */
static bool binary_of(const mp_node *c, dnnl_alg_kind_t *alg) {
    if (is_op(c, "Add")) *alg = dnnl_binary_add;
    else if (is_op(c, "Sub")) *alg = dnnl_binary_sub;
    else if (is_op(c, "Mul")) *alg = dnnl_binary_mul;
    else if (is_op(c, "Div")) *alg = dnnl_binary_div;
    else return false;
    return c->n_in == 2 && c->n_out >= 1;
}

/* Whether operand o broadcasts into dims (rank) without growing it. */
static bool fits_into(const mp_value *o, int rank, const int64_t *dims) {
    if (!mp_shape_known(o) || o->rank > rank) return false;
    for (int i = 0; i < o->rank; i++) {
        int64_t d = o->dims[o->rank - 1 - i], t = dims[rank - 1 - i];
        if (d != 1 && d != t) return false;
    }
    return true;
}

/* Operand dims as the 2-D view [rows, N] of a MatMul folded to 2-D:
 * possible when all its leading dims are 1, or all equal the output's. */
static bool fold_dims(const mp_value *o, int rank, const int64_t *dims, int64_t *d2) {
    int64_t full[DNNL_MAX_NDIMS];
    int off = rank - o->rank;
    for (int i = 0; i < rank; i++) full[i] = i < off ? 1 : o->dims[i - off];
    bool ones = true, same = true;
    for (int i = 0; i < rank - 1; i++) {
        if (full[i] != 1) ones = false;
        if (full[i] != dims[i]) same = false;
    }
    if (!ones && !same) return false;
    d2[0] = ones ? 1 : numel_of(rank - 1, dims);
    d2[1] = full[rank - 1];
    return true;
}

static const mp_pact *gelu_fusable(const mp_graph *g, const mp_patterns *p, int index);

/* A GELU written out (src/analyze/patterns.c: erf or tanh form) reading
 * value v, every reader of v inside it: its nodes in topological order
 * (*n of them) and its oneDNN algorithm. */
static bool gelu_at(const mp_graph *g, int v, int *nodes, int *n, dnnl_alg_kind_t *alg) {
    const mp_value *val = &g->values[v];
    int nu;
    const int *u = mp_uses(g, v, &nu);
    if ((val->flags & MP_VAL_OUTPUT) || nu < 1) return false;
    const mp_patterns *p;
    mp_pref r = pattern_at(g, &g->nodes[u[0]], &p);
    const mp_pact *a = r.kind == MP_PAT_ACT ? gelu_fusable(g, p, r.index) : NULL;
    if (!a || a->x != v || a->n > 8) return false;
    for (int i = 0; i < nu; i++) {
        mp_pref ri = mp_pattern_at(p, u[i]);
        if (ri.kind != MP_PAT_ACT || ri.index != r.index) return false;
    }
    for (int i = 0; i < a->n; i++) nodes[i] = p->members[a->first + i].node;
    *n = a->n;
    *alg = a->kind == MP_ACT_GELU ? dnnl_eltwise_gelu_erf : dnnl_eltwise_gelu_tanh;
    return true;
}

/* Absorb the chain of single consumers of the node's output value `v`
 * (dims: rank, dims) that oneDNN can apply after the main computation.
 * allow_bn: a BatchNormalization right after may be folded (Conv). */
static mp_status absorb_chain(mp_kctx *k, int v, int rank, const int64_t *dims, bool allow_bn,
                              chain *ch) {
    const mp_graph *g = k->g;
    while (k->fuse) {
        /* a whole GELU (several nodes read v) as one eltwise post-op */
        int gn[8], ng = 0;
        dnnl_alg_kind_t galg;
        if (k->ex && !allow_bn && gelu_at(g, v, gn, &ng, &galg)) {
            if (chain_has(ch, galg) || !same_dims(&g->values[g->nodes[gn[ng - 1]].out[0]], rank, dims)) break;
            if (mp_kfuse_nodes(k, gn, ng) != MP_OK) {
                mp_error_clear();
                break;
            }
            mp_status st = po_eltwise(k, ch, galg, 0, 0);
            if (st) return st;
            v = g->nodes[gn[ng - 1]].out[0];
            continue;
        }
        int ci = mp_sole_use(g, v);
        if (ci < 0) break;
        const mp_node *c = &g->nodes[ci];
        const mp_value *cout = gout(g, c, 0);
        if (!cout || !is_f32(cout) || !same_dims(cout, rank, dims) || c->n_out < 1) break;
        bool extra_out = false;
        for (int j = 1; j < c->n_out; j++)
            if (c->out[j] >= 0) extra_out = true;
        if (extra_out) break;
        int base = k->n_in;  /* where c's other inputs will land */
        eltw e;
        dnnl_alg_kind_t alg;
        if (allow_bn && ch->n_po == 0 && ch->bn_in < 0 && is_op(c, "BatchNormalization")) {
            if (c->n_in != 5 || c->in[0] != v || mp_attr_i(c, "training_mode", 0) != 0) break;
            bool ok = true;
            for (int j = 1; j < 5; j++) {
                const mp_value *p = gval(g, c, j);
                if (!is_const_in(g, p) || !is_wt(g, p) || mp_value_numel(p) != dims[1]) ok = false;
            }
            if (!ok) break;
            if (mp_kfuse(k, ci) != MP_OK) break;
            ch->bn_in = base;
            ch->bn_eps = (float)mp_attr_f(c, "epsilon", 1e-5);
        } else if (c->n_in >= 1 && c->in[0] == v && eltwise_of(g, c, &e)) {
            if (chain_has(ch, e.alg[0]) || (e.n > 1 && chain_has(ch, e.alg[1])) ||
                (e.n > 1 && e.alg[0] == e.alg[1]))
                break;
            if (mp_kfuse(k, ci) != MP_OK) break;
            if (is_op(c, "Clip")) {
                /* c's inputs 1, 2 (min, max) are now k->in[base + 0, 1] */
                for (int j = 1; j < c->n_in && j < 3; j++) {
                    const mp_rtensor *b = &k->in[base + j - 1];
                    if (c->in[j] < 0) continue;
                    if (!b->data)
                        return mp_error(MP_ERR_USAGE, "node %s: Clip bound has no data at plan time", c->name);
                    if (j == 1) e.a[0] = *(const float *)b->data;
                    else e.b[0] = *(const float *)b->data;
                }
            }
            for (int j = 0; j < e.n; j++) {
                mp_status st = po_eltwise(k, ch, e.alg[j], e.a[j], e.b[j]);
                if (st) return st;
            }
        } else if (binary_of(c, &alg)) {
            int oi = c->in[0] == v ? 1 : 0;
            if (c->in[1 - oi] != v || c->in[oi] == v) break;
            const mp_value *o = gval(g, c, oi);
            if (!is_f32(o) || !fits_into(o, rank, dims)) break;
            bool v_first = oi == 1;
            if (mp_value_numel(o) == 1 && is_const_in(g, o)) {
                if (alg == dnnl_binary_div && !v_first) break;
                if (chain_has(ch, dnnl_eltwise_linear)) break;
                if (mp_kfuse(k, ci) != MP_OK) break;
                const mp_rtensor *b = &k->in[base];
                if (!b->data) return mp_error(MP_ERR_USAGE, "node %s: constant has no data at plan time", c->name);
                float x = *(const float *)b->data;
                float a = 1, bb = 0;
                if (alg == dnnl_binary_add) bb = x;
                else if (alg == dnnl_binary_sub) { if (v_first) bb = -x; else { a = -1; bb = x; } }
                else if (alg == dnnl_binary_mul) a = x;
                else a = 1.0f / x;
                mp_status st = po_eltwise(k, ch, dnnl_eltwise_linear, a, bb);
                if (st) return st;
            } else if (alg == dnnl_binary_add && ch->cl_rank == rank && ch->n_po == 0 && ch->sum_in < 0 &&
                       !ch->fold2d && o->rank == rank && same_dims(o, rank, dims)) {
                if (mp_kfuse(k, ci) != MP_OK) break;
                dnnl_memory_desc_t md;
                dnnl_status_t s = md_plain(&md, rank, o->dims);
                if (s != dnnl_success) return dfail(k, s, "residual");
                lay_find(k, c->in[oi], &md);
                DN(dnnl_post_ops_append_sum(ch->po, 1.0f), "sum post-op");
                ch->sum_in = base;
                ch->sum_md = md;
                ch->n_po++;
            } else {
                if (!v_first && (alg == dnnl_binary_sub || alg == dnnl_binary_div)) break;
                if (ch->n_bin >= 8) break;
                int64_t d2[2] = {1, 1};
                if (ch->fold2d && !fold_dims(o, rank, dims, d2)) break;
                if (mp_kfuse(k, ci) != MP_OK) break;
                dnnl_memory_desc_t md;
                dnnl_status_t s = ch->fold2d ? md_plain(&md, 2, d2) : md_plain_pad(&md, rank, o->rank, o->dims);
                if (s != dnnl_success) return dfail(k, s, "binary post-op operand");
                bool laid = !ch->fold2d && o->rank == rank && lay_find(k, c->in[oi], &md);
                ch->bin_cl[ch->n_bin] = !laid && ch->cl_rank == rank && same_dims(o, rank, dims);
                if (ch->bin_cl[ch->n_bin] && (s = md_nhwc(&md, rank, dims)) != dnnl_success)
                    return dfail(k, s, "binary post-op operand");
                DN(dnnl_post_ops_append_binary(ch->po, alg, &md), "binary post-op");
                ch->bin_po[ch->n_bin] = ch->n_po;
                ch->bin_in[ch->n_bin] = base;
                ch->bin_alg[ch->n_bin] = alg;
                ch->bin_md[ch->n_bin] = md;
                ch->n_bin++;
                ch->n_po++;
            }
        } else {
            break;
        }
        v = c->out[0];
    }
    ch->final_v = v;
    return MP_OK;
}

static mp_status chain_init(mp_kctx *k, chain *ch) {
    memset(ch, 0, sizeof *ch);
    ch->bn_in = -1;
    ch->sum_in = -1;
    DN(dnnl_post_ops_create(&ch->po), "post-ops");
    return MP_OK;
}

/* Attach the chain's post-ops to attr and bind the binary operands. */
static mp_status chain_attr(mp_kctx *k, chain *ch, dnnl_primitive_attr_t attr) {
    if (ch->n_po) DN(dnnl_primitive_attr_set_post_ops(attr, ch->po), "set post-ops");
    return MP_OK;
}
static mp_status chain_bind(mp_kctx *k, dk *s, chain *ch) {
    for (int i = 0; i < ch->n_bin; i++) {
        int arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(ch->bin_po[i]) | DNNL_ARG_SRC_1;
        mp_status st;
        if (ch->bin_cl[i]) {
            const mp_rtensor *o = &k->in[ch->bin_in[i]];
            dnnl_memory_desc_t plain;
            void *buf;
            dnnl_status_t ds = md_plain(&plain, o->rank, o->dims);
            if (ds) return dfail(k, ds, "binary post-op operand");
            st = dk_pre_reorder(k, s, ch->bin_in[i], &plain, &ch->bin_md[i], &buf);
            if (!st) st = dk_arg(k, s, arg, &ch->bin_md[i], FROM_OWN, 0, buf);
        } else {
            st = dk_arg(k, s, arg, &ch->bin_md[i], FROM_IN, ch->bin_in[i], NULL);
        }
        if (st) return st;
    }
    return MP_OK;
}

/* The attributes and post-ops a primitive descriptor was made with are
 * consumed: freed here, made or not. */
static void attr_done(dnnl_primitive_attr_t attr, chain *ch) {
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (ch && ch->po) {
        dnnl_post_ops_destroy(ch->po);
        ch->po = NULL;
    }
}

/* One place creating pd (and cleaning up attr, post-ops). */
static mp_status make_pd(mp_kctx *k, const void *desc, dnnl_primitive_attr_t attr, chain *ch,
                         dnnl_primitive_desc_t *pd) {
    dnnl_status_t s = dnnl_primitive_desc_create(pd, desc, attr, g_eng, NULL);
    attr_done(attr, ch);
    if (s != dnnl_success) return dfail(k, s, "primitive descriptor");
    return MP_OK;
}

/* A primitive of one source (input 0) and one destination (output 0):
 * eltwise, reduction. */
static mp_status dk_src_dst(mp_kctx *k, dk *s, const void *desc, const dnnl_memory_desc_t *src,
                            const dnnl_memory_desc_t *dst, size_t *scratch) {
    mp_status st;
    dnnl_primitive_attr_t attr;
    if ((st = attr_new(k, &attr))) return st;
    dnnl_primitive_desc_t pd;
    if ((st = make_pd(k, desc, attr, NULL, &pd))) return st;
    st = dk_arg(k, s, DNNL_ARG_SRC, src, FROM_IN, 0, NULL);
    if (!st) st = dk_arg(k, s, DNNL_ARG_DST, dst, FROM_OUT, 0, NULL);
    if (!st) st = dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return st;
}


/* Whether every reader of value v takes a blocked layout: oneDNN Conv
 * (as its data input), pooling, and the element-wise ops oneDNN serves
 * whose own readers do (an Add joining two blocked branches). */
static bool conv_ok(const mp_graph *g, const mp_node *n, bool transpose);
static bool pool_ok(const mp_graph *g, const mp_node *n);
static bool eltwise_ok(const mp_graph *g, const mp_node *n);
static bool binary_ok(const mp_graph *g, const mp_node *n, bool *swap);

static bool readers_walk(const mp_graph *g, int v, int depth, int *budget);

/* The walk follows residual chains through a whole network (each block's
 * output feeds the next block's Add); a budget of node visits bounds it
 * on odd graphs (past it: plain). */
static bool readers_take_blocked(const mp_graph *g, int v, int depth) {
    int budget = 1 << 22;
    return readers_walk(g, v, depth, &budget);
}

static bool readers_walk(const mp_graph *g, int v, int depth, int *budget) {
    const mp_value *val = &g->values[v];
    *budget -= g->n_nodes;
    if (*budget < 0 || depth > 256 || (val->flags & MP_VAL_OUTPUT) || val->n_consumers <= 0 || val->rank < 3 ||
        !mp_shape_known(val))
        return false;
    int seen = 0, nu;
    const int *u = mp_uses(g, v, &nu);
    for (int i = 0; i < nu; i++) {
        if (i > 0 && u[i] == u[i - 1]) continue; /* a node reading v twice: its slots below */
        const mp_node *c = &g->nodes[u[i]];
        int slots = 0;
        for (int j = 0; j < c->n_in; j++) slots += c->in[j] == v;
        if (!slots) return false; /* a subgraph reads it */
        for (int j = 0; j < c->n_in; j++) {
            if (c->in[j] != v) continue;
            seen++;
            bool swap;
            dnnl_alg_kind_t alg;
            if (is_op(c, "Conv")) {
                if (j != 0 || !conv_ok(g, c, false)) return false;
            } else if (is_op(c, "MaxPool") || is_op(c, "AveragePool") || is_op(c, "GlobalAveragePool") ||
                       is_op(c, "GlobalMaxPool") || is_op(c, "ReduceMean") || is_op(c, "ReduceMax")) {
                if (j != 0 || !pool_ok(g, c)) return false;
            } else if (binary_of(c, &alg)) {
                const mp_value *a = gval(g, c, 0), *b = gval(g, c, 1);
                if (!a || !b || !same_dims(a, b->rank, b->dims) || !binary_ok(g, c, &swap) ||
                    !readers_walk(g, c->out[0], depth + 1, budget))
                    return false;
            } else if (c->n_in == 1 && eltwise_ok(g, c)) {
                if (!readers_walk(g, c->out[0], depth + 1, budget)) return false;
            } else {
                return false;
            }
        }
    }
    return seen > 0;
}

/* ---------------------------------------------------- Conv, ConvTranspose */

typedef struct convp {
    int sp;                        /* spatial dims */
    int64_t group;
    dnnl_dims_t stride, dil, pl, pr;
} convp;

/* Strides, dilations (oneDNN counts them from 0) and pads of node n with
 * input spatial dims xin, kernel ks, output spatial dims yout. */
static bool conv_params(const mp_node *n, int sp, const int64_t *xin, const int64_t *ks,
                        const int64_t *yout, bool transpose, convp *p) {
    const int64_t *v;
    int cnt;
    p->sp = sp;
    p->group = mp_attr_i(n, "group", 1);
    for (int i = 0; i < sp; i++) {
        p->stride[i] = 1;
        p->dil[i] = 0;
        p->pl[i] = p->pr[i] = 0;
    }
    if ((cnt = mp_attr_ints(n, "strides", &v)) >= 0) {
        if (cnt != sp) return false;
        for (int i = 0; i < sp; i++) p->stride[i] = v[i];
    }
    if ((cnt = mp_attr_ints(n, "dilations", &v)) >= 0) {
        if (cnt != sp) return false;
        for (int i = 0; i < sp; i++) p->dil[i] = v[i] - 1;
    }
    const char *ap = mp_attr_s(n, "auto_pad", "NOTSET");
    bool upper = mp_streq(ap, "SAME_UPPER"), lower = mp_streq(ap, "SAME_LOWER");
    if (!mp_streq(ap, "NOTSET") && !upper && !lower && !mp_streq(ap, "VALID")) return false;
    if (mp_streq(ap, "NOTSET") && (cnt = mp_attr_ints(n, "pads", &v)) >= 0) {
        if (cnt != 2 * sp) return false;
        for (int i = 0; i < sp; i++) {
            p->pl[i] = v[i];
            p->pr[i] = v[sp + i];
        }
    }
    for (int i = 0; i < sp; i++) {
        int64_t ke = (ks[i] - 1) * (p->dil[i] + 1) + 1;
        if (!transpose) {
            if (upper || lower) {
                int64_t tot = (yout[i] - 1) * p->stride[i] + ke - xin[i];
                if (tot < 0) tot = 0;
                p->pl[i] = upper ? tot / 2 : tot - tot / 2;
            }
            /* the right pad that gives exactly the inferred output (a
             * strided window may leave the last rows unread: pad 0) */
            p->pr[i] = (yout[i] - 1) * p->stride[i] + ke - xin[i] - p->pl[i];
            if (p->pr[i] < 0) p->pr[i] = 0;
            int64_t span = xin[i] + p->pl[i] + p->pr[i] - ke;
            if (p->pl[i] < 0 || span < 0 || span / p->stride[i] + 1 != yout[i]) return false;
        } else {
            const int64_t *op = NULL;
            int no = mp_attr_ints(n, "output_padding", &op);
            int64_t opad = (no == sp) ? op[i] : 0;
            if (upper || lower || mp_attr_ints(n, "output_shape", &v) >= 0) {
                int64_t tot = p->stride[i] * (xin[i] - 1) + opad + ke - yout[i];
                p->pl[i] = upper ? tot / 2 : tot - tot / 2;
            }
            p->pr[i] = (xin[i] - 1) * p->stride[i] + ke - p->pl[i] - yout[i];
            if (p->pr[i] < 0 || p->pl[i] < 0) return false;
        }
    }
    return true;
}

static bool conv_ok(const mp_graph *g, const mp_node *n, bool transpose) {
    const mp_value *x = gval(g, n, 0), *w = gval(g, n, 1), *b = gval(g, n, 2), *y = gout(g, n, 0);
    if (!is_f32(x) || !is_wt(g, w) || !is_f32(y) || (b && !is_wt(g, b))) return false;
    if (x->rank < 3 || x->rank > 5 || w->rank != x->rank || y->rank != x->rank) return false;
    convp p;
    if (!conv_params(n, x->rank - 2, x->dims + 2, w->dims + 2, y->dims + 2, transpose, &p)) return false;
    if (p.group < 1 || x->dims[1] % p.group) return false;
    if (!transpose && (w->dims[0] % p.group || w->dims[1] * p.group != x->dims[1])) return false;
    if (transpose && w->dims[0] != x->dims[1]) return false;
    if (b && mp_value_numel(b) != y->dims[1]) return false;
    return true;
}

static mp_status conv_prepare_any(mp_kctx *k, size_t *scratch, bool transpose) {
    const mp_graph *g = k->g;
    const mp_node *n = k->n;
    const mp_value *x = gval(g, n, 0), *w = gval(g, n, 1), *y = gout(g, n, 0);
    bool has_b = n->n_in > 2 && n->in[2] >= 0;
    int r = x->rank, sp = r - 2;
    convp p;
    conv_params(n, sp, x->dims + 2, w->dims + 2, y->dims + 2, transpose, &p);
    dk *s;
    mp_status st = dk_new(k, &s);
    if (st) return st;

    const float *wd = NULL, *bd = NULL;
    if ((st = const_f32(k, s, 1, &wd))) return st;
    if (has_b && (st = const_f32(k, s, 2, &bd))) return st;

    chain ch;
    if ((st = chain_init(k, &ch))) return st;
    ch.cl_rank = sp >= 1 ? y->rank : 0; /* the Conv computes channels-last (below) */
    /* BN folds only into constant weights (and a constant bias or none) */
    bool can_fold = !transpose && wd && (!has_b || bd);
    if ((st = absorb_chain(k, n->out[0], y->rank, y->dims, can_fold, &ch))) goto fail;

    int64_t cout = y->dims[1], cin = x->dims[1], G = p.group;
    /* weights as oneDNN sees them: [G,] O, I, k... */
    int64_t wdims[DNNL_MAX_NDIMS];
    int wr = 0;
    if (G > 1) wdims[wr++] = G;
    wdims[wr++] = cout / G;
    wdims[wr++] = cin / G;
    for (int i = 0; i < sp; i++) wdims[wr++] = w->dims[2 + i];
    dnnl_memory_desc_t xmd, wplain, wmd, bmd, ymd;
    dnnl_status_t ds;
    if ((ds = md_plain(&xmd, r, x->dims)) || (ds = md_plain(&ymd, r, y->dims))) goto dfail_;
    if (!transpose) {
        ds = md_plain(&wplain, wr, wdims);     /* ONNX [O, I/G, k] is [G, O/G, I/G, k] */
    } else {
        /* ONNX [I, O/G, k] = [G, I/G, O/G, k]: oneDNN's (g)iohw */
        static const dnnl_format_tag_t t1[] = {dnnl_bac, dnnl_bacd, dnnl_bacde};
        static const dnnl_format_tag_t tg[] = {dnnl_acbd, dnnl_acbde, dnnl_acbdef};
        dnnl_dims_t d;
        for (int i = 0; i < wr; i++) d[i] = wdims[i];
        ds = dnnl_memory_desc_init_by_tag(&wplain, wr, d, dnnl_f32, G > 1 ? tg[sp - 1] : t1[sp - 1]);
    }
    if (ds) goto dfail_;
    /* weights in the primitive's layout: reordered once when constant,
     * at each run when computed (a plain weight would pick oneDNN's
     * reference convolution next to channels-last data) */
    ds = md_any(&wmd, wr, wdims);
    if (ds) goto dfail_;
    bool bias = has_b || ch.bn_in >= 0;
    if ((ds = md_plain(&bmd, 1, &cout))) goto dfail_;

    /* activations: the input as its producer left it; the output blocked
     * when every reader takes it (and the layout is of the plain size) */
    /* oneDNN's fast convolutions are channels-last (or channel-blocked)
     * ones; on plain NCHW it falls back to im2col+GEMM (1x1 convs at a
     * few GFLOPS) or to its reference code when the two sides differ. So
     * a Conv always computes channels-last: a plain input is reordered
     * first (once per run, into the kernel's buffer), and a plain output
     * (one a portable kernel or the caller reads) is reordered after. */
    bool in_blocked = lay_find(k, n->in[0], &xmd);
    bool want_blocked = k->ex && readers_take_blocked(g, ch.final_v, 0);
    void *xown = NULL;
    if (!in_blocked && sp >= 1) {
        dnnl_memory_desc_t xplain = xmd;
        if ((ds = md_nhwc(&xmd, r, x->dims))) goto dfail_;
        if ((st = dk_pre_reorder(k, s, 0, &xplain, &xmd, &xown))) goto fail;
        in_blocked = true;
    }
    /* binary post-op operands are read in the output's layout: a residual
     * of the output's size is channels-last already, or made so (chain) */
    bool reorder_out = in_blocked && !want_blocked;
    if (reorder_out) want_blocked = true;
    dnnl_memory_desc_t yany;
    if (want_blocked && (ds = md_nhwc(&yany, r, y->dims))) goto dfail_;
    dnnl_primitive_desc_t pd = NULL;
    void *yown = NULL;
    for (int attempt = want_blocked ? 0 : 1; attempt < 2; attempt++) {
        const dnnl_memory_desc_t *yd = attempt == 0 ? &yany : &ymd;
        dnnl_primitive_attr_t attr;
        if ((st = attr_new(k, &attr))) goto fail;
        if ((st = chain_attr(k, &ch, attr))) { dnnl_primitive_attr_destroy(attr); goto fail; }
        if (!transpose) {
            dnnl_convolution_desc_t cd;
            ds = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
                                                            &xmd, &wmd, bias ? &bmd : NULL, yd, p.stride,
                                                            p.dil, p.pl, p.pr);
            if (!ds) ds = dnnl_primitive_desc_create(&pd, &cd, attr, g_eng, NULL);
        } else {
            dnnl_deconvolution_desc_t cd;
            ds = dnnl_dilated_deconvolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                              dnnl_deconvolution_direct, &xmd, &wmd,
                                                              bias ? &bmd : NULL, yd, p.stride, p.dil, p.pl, p.pr);
            if (!ds) ds = dnnl_primitive_desc_create(&pd, &cd, attr, g_eng, NULL);
        }
        dnnl_primitive_attr_destroy(attr);
        if (ds) goto dfail_;
        if (attempt == 0) {
            const dnnl_memory_desc_t *got = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
            if (reorder_out) {
                dnnl_memory_desc_t plain = ymd;
                ymd = *got;
                if (!dnnl_memory_desc_equal(&plain, &ymd)) {
                    void *buf;
                    if ((st = dk_post_reorder(k, s, &ymd, &plain, &buf))) {
                        dnnl_primitive_desc_destroy(pd);
                        goto fail;
                    }
                    yown = buf;
                }
                break;
            }
            if (dnnl_memory_desc_get_size(got) == dnnl_memory_desc_get_size(&ymd)) {
                dnnl_memory_desc_t plain = ymd;
                ymd = *got;
                /* a plain choice needs no record */
                if (!dnnl_memory_desc_equal(&plain, &ymd) && !lay_add(k, s, ch.final_v, &ymd)) {
                    st = mp_error(MP_ERR_NOMEM, "node %s: out of memory", n->name);
                    dnnl_primitive_desc_destroy(pd);
                    goto fail;
                }
                break;
            }
            dnnl_primitive_desc_destroy(pd);
            pd = NULL;
        }
    }
    dnnl_post_ops_destroy(ch.po);
    ch.po = NULL;

    /* weights (and bias) with the BatchNormalization folded in */
    const float *wuse = wd, *buse = bd;
    if (ch.bn_in >= 0) {
        const float *sc, *sh, *mean, *var;
        if ((st = const_f32(k, s, ch.bn_in, &sc)) || (st = const_f32(k, s, ch.bn_in + 1, &sh)) ||
            (st = const_f32(k, s, ch.bn_in + 2, &mean)) || (st = const_f32(k, s, ch.bn_in + 3, &var)))
            goto fail_pd;
        if (!sc || !sh || !mean || !var) {
            st = mp_error(MP_ERR_USAGE, "node %s: BatchNormalization parameters have no data at plan time", n->name);
            goto fail_pd;
        }
        int64_t per = w->rank > 0 ? numel_of(w->rank, w->dims) / cout : 0;
        float *wf = dk_alloc_own(s, (size_t)(cout * per) * sizeof(float));
        float *bf = dk_alloc_own(s, (size_t)cout * sizeof(float));
        if (!wf || !bf) { st = mp_error(MP_ERR_NOMEM, "node %s: out of memory folding BatchNormalization", n->name); goto fail_pd; }
        for (int64_t o = 0; o < cout; o++) {
            float f = sc[o] / sqrtf(var[o] + ch.bn_eps);
            for (int64_t j = 0; j < per; j++) wf[o * per + j] = wd[o * per + j] * f;
            bf[o] = ((bd ? bd[o] : 0.0f) - mean[o]) * f + sh[o];
        }
        wuse = wf;
        buse = bf;
    }
    st = dk_arg(k, s, DNNL_ARG_SRC, &xmd, xown ? FROM_OWN : FROM_IN, 0, xown);
    if (!st) st = dk_arg(k, s, DNNL_ARG_DST, &ymd, yown ? FROM_OWN : FROM_OUT, 0, yown);
    if (!st) {
        const dnnl_memory_desc_t *wq = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        if (wuse) {
            st = bind_reordered(k, s, DNNL_ARG_WEIGHTS, &wplain, wuse, wq);
        } else if (dnnl_memory_desc_equal(wq, &wplain)) {
            st = dk_arg(k, s, DNNL_ARG_WEIGHTS, &wplain, FROM_IN, 1, NULL);
        } else {
            void *wbuf;
            st = dk_pre_reorder(k, s, 1, &wplain, wq, &wbuf);
            if (!st) st = dk_arg(k, s, DNNL_ARG_WEIGHTS, wq, FROM_OWN, 0, wbuf);
        }
    }
    if (!st && bias) {
        if (buse) st = dk_arg(k, s, DNNL_ARG_BIAS, &bmd, FROM_OWN, 0, (void *)buse);
        else st = dk_arg(k, s, DNNL_ARG_BIAS, &bmd, FROM_IN, 2, NULL);
    }
    if (!st) st = chain_bind(k, s, &ch);
    if (!st && ch.sum_in >= 0) st = dk_sum_source(k, s, ch.sum_in, &ch.sum_md, &ymd, yown);
    if (!st) st = dk_finish(k, s, pd, scratch);
fail_pd:
    dnnl_primitive_desc_destroy(pd);
    return st;
dfail_:
    st = dfail(k, ds, "memory descriptor");
fail:
    if (ch.po) dnnl_post_ops_destroy(ch.po);
    return st;
}

static mp_status conv_prepare(mp_kctx *k, size_t *scratch) { return conv_prepare_any(k, scratch, false); }
static mp_status convt_prepare(mp_kctx *k, size_t *scratch) { return conv_prepare_any(k, scratch, true); }

/* ------------------------------------ the GEMM chosen per product shape
 * On AVX2, oneDNN 2.6's matmul primitive is gemm:jit on plain weights (no
 * brgemm below AVX-512), and which library multiplies fastest depends on
 * the CPU and the shape (the reference note on a 2-core AMD EPYC: OpenBLAS
 * twice dnnl_sgemm on 128x768x3072, dnnl_sgemm ahead on 197x768x2304). So
 * a 2-D product with constant B whose fused chain only adds tensors (a
 * bias row, a residual) is timed once at plan time on each candidate: the
 * primitive with its post-ops, dnnl_sgemm and OpenBLAS's cblas_sgemm (each
 * after a pass writing the summed addends into Y, then beta = 1), and a
 * library replaces the primitive when its time over the primitive's in
 * the same round is below 0.9 in 4 of 5 alternated rounds; kept
 * per (M, K, N, addends, threads) for the process. The report names the
 * choice (the node's `kernel`). */

enum { GEMM_PRIM = 0, GEMM_SGEMM = 1, GEMM_BLAS = 2 };
static const char *const gemm_names[] = {NULL, "onednn:sgemm", "openblas:sgemm"};

static int g_gemm_force = -1;   /* tests and benches: always this candidate */

int mp_dnnl_gemm_force(int which) {
    int old = g_gemm_force;
    g_gemm_force = which;
    return old;
}

typedef struct gemm_key {
    int64_t m, n, k;
    int rows, fulls, threads, tr, prim_kind;
    int choice;
} gemm_key;

static pthread_mutex_t g_gemm_mu = PTHREAD_MUTEX_INITIALIZER;
static gemm_key g_gemm_cache[64];
static int g_gemm_ncache;

static double gemm_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct gemm_fill {
    float *y;
    int64_t n;
    int nadd;
    const float *add[8];
    bool row[8];
} gemm_fill;

/* Rows [lo, hi) of Y = the sum of the addends */
static void gemm_fill_rows(void *arg, int64_t lo, int64_t hi) {
    const gemm_fill *f = arg;
    int64_t n = f->n;
    for (int64_t r = lo; r < hi; r++) {
        float *y = f->y + r * n;
        const float *a0 = f->add[0] + (f->row[0] ? 0 : r * n);
        if (f->nadd == 1) {
            memcpy(y, a0, (size_t)n * sizeof(float));
            continue;
        }
        const float *a1 = f->add[1] + (f->row[1] ? 0 : r * n);
        for (int64_t j = 0; j < n; j++) y[j] = a0[j] + a1[j];
        for (int i = 2; i < f->nadd; i++) {
            const float *ai = f->add[i] + (f->row[i] ? 0 : r * n);
            for (int64_t j = 0; j < n; j++) y[j] += ai[j];
        }
    }
}

/* The product through library `which` (GEMM_SGEMM, GEMM_BLAS): Y = the
 * addends (add[i], NULL: from k->in), then Y += alpha op(A) op(B). */
static mp_status gemm_lib(mp_kctx *k, dk *s, int which, const float *A, float *Y, const float *const *add) {
    float beta = 0.0f;
    if (s->alt_nadd > 0) {
        gemm_fill f = {Y, s->alt_n, s->alt_nadd, {NULL}, {false}};
        for (int i = 0; i < s->alt_nadd; i++) {
            f.add[i] = add[i];
            f.row[i] = s->alt_add_row[i];
            if (!f.add[i]) return mp_error(MP_ERR_USAGE, "node %s (%s): an addend's buffer is missing",
                                           k->n->name, k->n->op);
        }
        /* a few rows per chunk: a chunk is worth a thread only past ~32 KB */
        if (s->threads > 1 && s->alt_m * s->alt_n >= 16384) mp_kparallel(k, s->alt_m, gemm_fill_rows, &f);
        else gemm_fill_rows(&f, 0, s->alt_m);
        beta = 1.0f;
    }
    if (which == GEMM_BLAS) {
        mp_blas_sgemm(s->threads, s->alt_ta, s->alt_tb, s->alt_m, s->alt_n, s->alt_k, s->alt_alpha, A, s->alt_lda,
                      s->alt_b, s->alt_ldb, beta, Y, s->alt_n);
        return MP_OK;
    }
    set_threads(s->threads);
    DN(dnnl_sgemm(s->alt_ta ? 'T' : 'N', s->alt_tb ? 'T' : 'N', s->alt_m, s->alt_n, s->alt_k, s->alt_alpha, A,
                  s->alt_lda, s->alt_b, s->alt_ldb, beta, Y, s->alt_n),
       "sgemm");
    return MP_OK;
}

static mp_status gemm_alt_run(mp_kctx *k, dk *s) {
    const float *A = k->in[0].data;
    float *Y = k->out[0].data;
    if (!A || !Y) return mp_error(MP_ERR_USAGE, "node %s (%s): a buffer the product needs is missing",
                                  k->n->name, k->n->op);
    const float *add[8];
    for (int i = 0; i < s->alt_nadd; i++)
        add[i] = s->alt_add_in[i] >= 0 ? k->in[s->alt_add_in[i]].data : s->alt_add_own[i];
    return gemm_lib(k, s, s->alt, A, Y, add);
}

/* One call of the primitive on the timing buffers (handles set here;
 * dk_run sets the run's again: last[] is cleared after). */
static mp_status gemm_prim_call(mp_kctx *k, dk *s, void *A, void *Y, void *scr, void *const *ins) {
    for (int i = 0; i < s->n; i++) {
        void *p;
        switch (s->from[i]) {
        case FROM_IN: p = s->idx[i] == 0 ? A : ins[s->idx[i]]; break;
        case FROM_OUT: p = Y; break;
        case FROM_SCRATCH: p = scr; break;
        default: continue;
        }
        DN(dnnl_memory_set_data_handle(s->ex[i].memory, p), "set data handle");
        s->last[i] = NULL;
    }
    DN(dnnl_primitive_execute(s->prim, g_strm, s->n, s->ex), "execute");
    DN(dnnl_stream_wait(g_strm), "wait");
    return MP_OK;
}

/* What gemm_choose needs from matmul_prepare / gemm_prepare. */
typedef struct gemm_desc {
    bool ta, tb;
    int64_t m, n, k;
    float alpha;
    const float *b;          /* constant B as stored, NULL: none */
    int nadd;
    int add_in[8];
    const float *add_own[8];
    bool add_row[8];
    bool ok;                 /* false: only the primitive can run it */
    bool jit_gemm;           /* the primitive is oneDNN's gemm:jit (no brgemm) */
} gemm_desc;

/* Whether pd's implementation is oneDNN's GEMM-based one ("gemm:jit"):
 * below AVX-512, oneDNN 2.6 has no brgemm matmul and runs plain weights
 * through its sgemm, where other libraries may be faster on some CPUs;
 * brgemm with weights blocked once leads every library measured. */
static bool pd_is_gemm(const_dnnl_primitive_desc_t pd) {
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) return false;
    return strncmp(impl, "gemm", 4) == 0;
}

/* The chain's binary post-ops as addends of a product Y[m, n] (Gemm's C,
 * when there, is already addend 0); ok false when the chain has anything
 * else (an activation, a scale, a Mul, a column broadcast, a blocked
 * operand). */
static void gemm_desc_chain(const mp_kctx *k, const chain *ch, int first_po, gemm_desc *d) {
    if (ch->bn_in >= 0 || ch->n_po != first_po + ch->n_bin) d->ok = false;
    for (int i = 0; d->ok && i < ch->n_bin; i++) {
        const dnnl_memory_desc_t *md = &ch->bin_md[i];
        int64_t numel = 1;
        for (int j = 0; j < md->ndims; j++) numel *= md->dims[j];
        dnnl_memory_desc_t pl;
        if (ch->bin_alg[i] != dnnl_binary_add || d->nadd >= 8 ||
            md_plain(&pl, md->ndims, md->dims) != dnnl_success || !dnnl_memory_desc_equal(&pl, md)) {
            d->ok = false;
            break;
        }
        bool row = numel == d->n && md->ndims >= 1 && md->dims[md->ndims - 1] == d->n;
        if (!row && numel != d->m * d->n) {
            d->ok = false;
            break;
        }
        d->add_in[d->nadd] = ch->bin_in[i];
        d->add_own[d->nadd] = NULL;
        d->add_row[d->nadd] = row;
        d->nadd++;
    }
}

/* Time the candidates for the product d once (per shape, cached) and keep
 * the fastest in s; the primitive stays when it wins or nothing else can
 * run the product. *scratch: the primitive's scratch bytes. */
static mp_status gemm_choose(mp_kctx *k, dk *s, const gemm_desc *d, size_t scratch) {
    if (!d->ok || !d->b || !s->prim || g_gemm_force == GEMM_PRIM) return MP_OK;
    if (g_gemm_force < 0 && !d->jit_gemm) return MP_OK;
    if (d->m > INT32_MAX / 2 || d->n > INT32_MAX / 2 || d->k > INT32_MAX / 2) return MP_OK;
    /* below ~1 MFLOP a call is dominated by its overheads: keep the primitive */
    double flops = 2.0 * (double)d->m * (double)d->n * (double)d->k;
    if (g_gemm_force < 0 && flops < 4e6) return MP_OK;
    bool blas = mp_blas_available();
    s->alt_ta = d->ta;
    s->alt_tb = d->tb;
    s->alt_m = d->m;
    s->alt_n = d->n;
    s->alt_k = d->k;
    s->alt_lda = d->ta ? d->m : d->k;
    s->alt_ldb = d->tb ? d->k : d->n;
    s->alt_alpha = d->alpha;
    s->alt_b = d->b;
    s->alt_nadd = d->nadd;
    int rows = 0, fulls = 0;
    for (int i = 0; i < d->nadd; i++) {
        s->alt_add_in[i] = d->add_in[i];
        s->alt_add_own[i] = d->add_own[i];
        s->alt_add_row[i] = d->add_row[i];
        if (d->add_row[i]) rows++;
        else fulls++;
    }
    int choice = g_gemm_force;
    if (choice == GEMM_BLAS && !blas) choice = GEMM_SGEMM;
    gemm_key key = {d->m, d->n, d->k, rows, fulls, s->threads, (d->ta ? 1 : 0) | (d->tb ? 2 : 0), 0, -1};
    if (choice < 0) {
        pthread_mutex_lock(&g_gemm_mu);
        for (int i = 0; i < g_gemm_ncache; i++) {
            const gemm_key *c = &g_gemm_cache[i];
            if (c->m == key.m && c->n == key.n && c->k == key.k && c->rows == rows && c->fulls == fulls &&
                c->threads == key.threads && c->tr == key.tr)
                choice = c->choice;
        }
        pthread_mutex_unlock(&g_gemm_mu);
    }
    mp_status st = MP_OK;
    if (choice < 0) {
        /* timing buffers: A, Y, the primitive's scratch, addends known
         * only at run time (values do not matter: no NaN, no denormal) */
        size_t na = (size_t)(d->m * d->k), ny = (size_t)(d->m * d->n);
        float *A = malloc(na * sizeof(float)), *Y = malloc(ny * sizeof(float));
        void *scr = scratch ? malloc(scratch) : NULL;
        void *ins[64] = {NULL};
        float *tmp[8] = {NULL};
        const float *add[8];
        bool ok = A && Y && (!scratch || scr) && k->n_in <= 64;
        for (size_t i = 0; ok && i < na; i++) A[i] = (float)((i * 7) % 13) * 0.01f;
        for (int i = 0; ok && i < k->n_in; i++) ins[i] = k->in[i].data;
        for (int i = 0; ok && i < d->nadd; i++) {
            add[i] = d->add_in[i] >= 0 ? k->in[d->add_in[i]].data : d->add_own[i];
            if (!add[i]) {
                size_t ne = d->add_row[i] ? (size_t)d->n : ny;
                if (!(tmp[i] = calloc(ne, sizeof(float)))) ok = false;
                add[i] = tmp[i];
                if (d->add_in[i] >= 0) ins[d->add_in[i]] = tmp[i];
            }
        }
        for (int i = 0; ok && i < s->n; i++) /* binary operands of the primitive */
            if (s->from[i] == FROM_IN && s->idx[i] > 0 && s->idx[i] < 64 && !ins[s->idx[i]]) ok = false;
        enum { ROUNDS = 5 };
        double t[3][ROUNDS + 1];
        int ncand = blas ? 3 : 2;
        /* one warm-up call each, then rounds alternating the candidates
         * (the order turned each round) */
        for (int r = 0; ok && !st && r <= ROUNDS; r++)
            for (int c0 = 0; c0 < ncand && !st; c0++) {
                int c = (c0 + r) % ncand;
                double t0 = gemm_now();
                st = c == GEMM_PRIM ? gemm_prim_call(k, s, A, Y, scr, ins) : gemm_lib(k, s, c, A, Y, add);
                t[c][r] = gemm_now() - t0;
            }
        /* each library against the primitive in the same round (another
         * job slowing a round slows both); a library wins only when
         * clearly faster: by 10% (a shared machine's noise between two
         * calls) in 4 rounds of 5 */
        choice = GEMM_PRIM;
        double best_ratio = 0.90;
        for (int c = 1; ok && !st && c < ncand; c++) {
            double q[ROUNDS];
            for (int r = 0; r < ROUNDS; r++) q[r] = t[c][r + 1] / (t[GEMM_PRIM][r + 1] > 0 ? t[GEMM_PRIM][r + 1] : 1e-9);
            for (int i = 1; i < ROUNDS; i++) /* insertion sort: 5 values */
                for (int j = i; j > 0 && q[j - 1] > q[j]; j--) {
                    double x = q[j];
                    q[j] = q[j - 1];
                    q[j - 1] = x;
                }
            /* faster in 4 rounds of 5 (the 4th smallest ratio): a
             * library that wins only while a burst of load lasts stays out */
            if (q[ROUNDS - 2] < best_ratio) {
                best_ratio = q[ROUNDS - 2];
                choice = c;
            }
        }
        free(A);
        free(Y);
        free(scr);
        for (int i = 0; i < 8; i++) free(tmp[i]);
        if (st) return st;
        if (ok) {
            key.choice = choice;
            pthread_mutex_lock(&g_gemm_mu);
            if (g_gemm_ncache < (int)(sizeof g_gemm_cache / sizeof g_gemm_cache[0]))
                g_gemm_cache[g_gemm_ncache++] = key;
            pthread_mutex_unlock(&g_gemm_mu);
        }
    }
    if (choice == GEMM_PRIM) {
        s->alt_nadd = 0;
        return MP_OK;
    }
    /* the library runs it: the primitive and its copy of the weights go */
    s->alt = choice;
    k->kname = gemm_names[choice];
    dnnl_primitive_destroy(s->prim);
    s->prim = NULL;
    if (s->wown >= 0 && s->wown < s->n_own) {
        free(s->own[s->wown]);
        s->own[s->wown] = NULL;
    }
    return MP_OK;
}

/* ------------------------------------------------------------ MatMul, Gemm */

static bool matmul_ok(const mp_graph *g, const mp_node *n) {
    const mp_value *a = gval(g, n, 0), *b = gval(g, n, 1), *y = gout(g, n, 0);
    if (!is_f32(a) || !is_wt(g, b) || !is_f32(y)) return false;
    if (a->rank < 1 || b->rank < 1 || a->rank > 12 || b->rank > 12) return false;
    if (mp_value_numel(a) == 0 || mp_value_numel(b) == 0) return false;
    return true;
}

static int g_padded_products;   /* dnnl.h mp_dnnl_padded_products */

int mp_dnnl_padded_products(void) {
    return __atomic_load_n(&g_padded_products, __ATOMIC_RELAXED);
}

/* Constant weights for oneDNN 2.6's gemm:jit (its matmul below AVX-512,
 * on plain weights) get rows padded by 16 floats (64 bytes) when a row is
 * 256 floats or more. On the plain layout the kernel's speed depended on
 * where the weights sat in memory: 197x768x3072 ran at 100-105 GFLOP/s with
 * the copy 64-byte or page aligned and 167-188 GFLOP/s 16 bytes past a
 * page, 211-222 with rows of 3,088 floats at any of those offsets (2-core
 * AMD EPYC, ONEDNN_MAX_CPU_ISA=AVX2, 2 threads; docs/DESIGN.md "Padded
 * weight rows for gemm:jit"). No shape measured was slower padded. w: the
 * weights descriptor oneDNN chose for the plain product. */
static bool gemm_padded_weights(const dnnl_memory_desc_t *w, dnnl_memory_desc_t *out) {
    if (!w || w->ndims != 2 || w->format_kind != dnnl_blocked || w->data_type != dnnl_f32) return false;
    const dnnl_blocking_desc_t *b = &w->format_desc.blocking;
    int64_t n = w->dims[1];
    if (b->inner_nblks != 0 || b->strides[1] != 1 || b->strides[0] != n || n < 256) return false;
    dnnl_dims_t strides = {n + 16, 1};
    return dnnl_memory_desc_init_by_strides(out, 2, w->dims, dnnl_f32, strides) == dnnl_success;
}

/* The matmul primitive MatMul and Gemm both make: A from input 0, Y to
 * output 0, B (bmd, as the primitive may lay it out; bplain, as stored)
 * from the constant bdat, reordered once into the primitive's layout, or
 * from input 1. attr (and the chain's post-ops) go into the primitive and
 * are consumed either way. *pd is NULL when no primitive was made; made,
 * the caller binds the rest and destroys it, even after an error here. */
static mp_status matmul_pd_bind(mp_kctx *k, dk *s, const dnnl_memory_desc_t *amd,
                                const dnnl_memory_desc_t *bmd, const dnnl_memory_desc_t *bplain,
                                const dnnl_memory_desc_t *ymd, const float *bdat,
                                dnnl_primitive_attr_t attr, chain *ch, dnnl_primitive_desc_t *pd) {
    *pd = NULL;
    mp_status st = chain_attr(k, ch, attr);
    dnnl_matmul_desc_t md;
    dnnl_status_t ds = st ? dnnl_success : dnnl_matmul_desc_init(&md, amd, bmd, NULL, ymd);
    if (st || ds) {
        dnnl_primitive_attr_destroy(attr);
        return st ? st : dfail(k, ds, "memory descriptor");
    }
    ds = dnnl_primitive_desc_create(pd, &md, attr, g_eng, NULL);
    dnnl_memory_desc_t bpad;
    if (ds == dnnl_success && bdat && pd_is_gemm(*pd) &&
        gemm_padded_weights(dnnl_primitive_desc_query_md(*pd, dnnl_query_weights_md, 0), &bpad)) {
        /* the same product on weights with padded rows: kept when oneDNN
         * makes it (it has so far), else the plain one stays */
        dnnl_primitive_desc_t pd2 = NULL;
        if (dnnl_matmul_desc_init(&md, amd, &bpad, NULL, ymd) == dnnl_success &&
            dnnl_primitive_desc_create(&pd2, &md, attr, g_eng, NULL) == dnnl_success) {
            dnnl_primitive_desc_destroy(*pd);
            *pd = pd2;
            __atomic_add_fetch(&g_padded_products, 1, __ATOMIC_RELAXED);
        }
    }
    attr_done(attr, ch);
    if (ds != dnnl_success) {
        *pd = NULL;
        return dfail(k, ds, "primitive descriptor");
    }
    st = dk_arg(k, s, DNNL_ARG_SRC, amd, FROM_IN, 0, NULL);
    if (!st) st = dk_arg(k, s, DNNL_ARG_DST, ymd, FROM_OUT, 0, NULL);
    if (!st) {
        if (bdat) {
            s->wown = s->n_own;
            st = bind_reordered(k, s, DNNL_ARG_WEIGHTS, bplain, bdat,
                                dnnl_primitive_desc_query_md(*pd, dnnl_query_weights_md, 0));
        }
        else st = dk_arg(k, s, DNNL_ARG_WEIGHTS, bplain, FROM_IN, 1, NULL);
    }
    return st;
}

static mp_status matmul_prepare(mp_kctx *k, size_t *scratch) {
    const mp_graph *g = k->g;
    const mp_node *n = k->n;
    const mp_value *a = gval(g, n, 0), *b = gval(g, n, 1), *y = gout(g, n, 0);
    dk *s;
    mp_status st = dk_new(k, &s);
    if (st) return st;
    /* A as [..., M, K], B as [..., K, N] (1-D operands get their 1) */
    int64_t ad[DNNL_MAX_NDIMS], bd[DNNL_MAX_NDIMS];
    int ar = 0, br = 0;
    if (a->rank == 1) ad[ar++] = 1;
    for (int i = 0; i < a->rank; i++) ad[ar++] = a->dims[i];
    for (int i = 0; i < b->rank; i++) bd[br++] = b->dims[i];
    if (b->rank == 1) bd[br++] = 1;
    int r = ar > br ? ar : br;
    int64_t M = ad[ar - 2], K = ad[ar - 1], N = bd[br - 1];
    bool b_flat = true;
    for (int i = 0; i < br - 2; i++)
        if (bd[i] != 1) b_flat = false;
    /* A's batch dims fold into M when B has none: one 2-D product */
    bool fold = b_flat && y->rank >= 2 && a->rank >= 2 && b->rank >= 2;
    int64_t xa[DNNL_MAX_NDIMS], xb[DNNL_MAX_NDIMS], xy[DNNL_MAX_NDIMS];
    int rr;
    if (fold) {
        rr = 2;
        xa[0] = numel_of(ar - 1, ad);
        xa[1] = K;
        xb[0] = K;
        xb[1] = N;
        xy[0] = xa[0];
        xy[1] = N;
    } else {
        rr = r;
        for (int i = 0; i < r; i++) {
            int ia = i - (r - ar), ib = i - (r - br);
            xa[i] = ia >= 0 ? ad[ia] : 1;
            xb[i] = ib >= 0 ? bd[ib] : 1;
            xy[i] = xa[i] > xb[i] ? xa[i] : xb[i];
        }
        xy[r - 2] = M;
        xy[r - 1] = N;
    }
    const float *bdat = NULL;
    if ((st = const_f32(k, s, 1, &bdat))) return st;
    chain ch;
    if ((st = chain_init(k, &ch))) return st;
    ch.fold2d = fold && y->rank > 2;
    /* post-ops see the output as the graph has it, unless folded */
    if (y->rank >= 1) {
        if ((st = absorb_chain(k, n->out[0], y->rank, y->dims, false, &ch))) goto fail;
    }
    dnnl_memory_desc_t amd, bplain, bmd, ymd;
    dnnl_status_t ds;
    if ((ds = md_plain(&amd, rr, xa)) || (ds = md_plain(&bplain, rr, xb)) || (ds = md_plain(&ymd, rr, xy)))
        goto dfail_;
    if (bdat) ds = md_any(&bmd, rr, xb);
    else bmd = bplain;
    if (ds) goto dfail_;
    dnnl_primitive_attr_t attr;
    if ((st = attr_new(k, &attr))) goto fail;
    dnnl_primitive_desc_t pd = NULL;
    st = matmul_pd_bind(k, s, &amd, &bmd, &bplain, &ymd, bdat, attr, &ch, &pd);
    if (!pd) goto fail;
    if (!st) st = chain_bind(k, s, &ch);
    if (!st) st = dk_finish(k, s, pd, scratch);
    bool jit_gemm = pd_is_gemm(pd);
    dnnl_primitive_desc_destroy(pd);
    if (!st && rr == 2 && bdat) {
        gemm_desc d = {.m = xa[0], .n = N, .k = K, .alpha = 1.0f, .b = bdat, .ok = true, .jit_gemm = jit_gemm};
        gemm_desc_chain(k, &ch, 0, &d);
        st = gemm_choose(k, s, &d, scratch ? *scratch : 0);
    }
    return st;
dfail_:
    st = dfail(k, ds, "memory descriptor");
fail:
    if (ch.po) dnnl_post_ops_destroy(ch.po);
    return st;
}

static bool gemm_ok(const mp_graph *g, const mp_node *n) {
    const mp_value *a = gval(g, n, 0), *b = gval(g, n, 1), *c = gval(g, n, 2), *y = gout(g, n, 0);
    if (!is_f32(a) || !is_wt(g, b) || !is_f32(y) || a->rank != 2 || b->rank != 2 || y->rank != 2) return false;
    if (c) {
        if (!is_wt(g, c) || c->rank > 2 || !fits_into(c, 2, y->dims)) return false;
        double beta = mp_attr_f(n, "beta", 1.0);
        if (beta != 1.0 && !is_const_in(g, c)) return false;
    }
    return mp_value_numel(a) > 0 && mp_value_numel(b) > 0;
}

static mp_status gemm_prepare(mp_kctx *k, size_t *scratch) {
    const mp_graph *g = k->g;
    const mp_node *n = k->n;
    const mp_value *a = gval(g, n, 0), *c = gval(g, n, 2), *y = gout(g, n, 0);
    bool ta = mp_attr_i(n, "transA", 0) != 0, tb = mp_attr_i(n, "transB", 0) != 0;
    float alpha = (float)mp_attr_f(n, "alpha", 1.0), beta = (float)mp_attr_f(n, "beta", 1.0);
    int64_t M = y->dims[0], N = y->dims[1], K = ta ? a->dims[0] : a->dims[1];
    dk *s;
    mp_status st = dk_new(k, &s);
    if (st) return st;
    const float *bdat = NULL, *cdat = NULL;
    if ((st = const_f32(k, s, 1, &bdat))) return st;
    if (c && (st = const_f32(k, s, 2, &cdat))) return st;
    dnnl_memory_desc_t amd, bplain, bmd, ymd, cmd;
    dnnl_dims_t dA = {M, K}, sA = {ta ? 1 : K, ta ? M : 1};
    dnnl_dims_t dB = {K, N}, sB = {tb ? 1 : N, tb ? K : 1};
    dnnl_status_t ds;
    chain ch;
    if ((st = chain_init(k, &ch))) return st;
    /* alpha*A*B, then + beta*C as the first binary post-op */
    float *cs = NULL;
    if (c) {
        if ((ds = md_plain_pad(&cmd, 2, c->rank, c->dims))) goto dfail_;
        if (cdat && beta != 1.0f) {
            cs = dk_alloc_own(s, (size_t)mp_value_numel(c) * sizeof(float));
            if (!cs) { st = mp_error(MP_ERR_NOMEM, "node %s: out of memory", n->name); goto fail; }
            for (int64_t i = 0; i < mp_value_numel(c); i++) cs[i] = beta * cdat[i];
        }
        if (beta != 0.0f) {
            if ((ds = dnnl_post_ops_append_binary(ch.po, dnnl_binary_add, &cmd))) goto dfail_;
            ch.n_po++;
        }
    }
    if ((st = absorb_chain(k, n->out[0], 2, y->dims, false, &ch))) goto fail;
    if ((ds = dnnl_memory_desc_init_by_strides(&amd, 2, dA, dnnl_f32, sA)) ||
        (ds = dnnl_memory_desc_init_by_strides(&bplain, 2, dB, dnnl_f32, sB)) ||
        (ds = md_plain(&ymd, 2, y->dims)))
        goto dfail_;
    if (bdat) ds = md_any(&bmd, 2, (int64_t[]){K, N});
    else bmd = bplain;
    if (ds) goto dfail_;
    dnnl_primitive_attr_t attr;
    if ((st = attr_new(k, &attr))) goto fail;
    if (alpha != 1.0f && (ds = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha))) {
        dnnl_primitive_attr_destroy(attr);
        goto dfail_;
    }
    dnnl_primitive_desc_t pd = NULL;
    st = matmul_pd_bind(k, s, &amd, &bmd, &bplain, &ymd, bdat, attr, &ch, &pd);
    if (!pd) goto fail;
    if (!st && c && beta != 0.0f) {
        int arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1;
        if (cs) st = dk_arg(k, s, arg, &cmd, FROM_OWN, 0, cs);
        else if (cdat) st = dk_arg(k, s, arg, &cmd, FROM_OWN, 0, (void *)cdat);
        else st = dk_arg(k, s, arg, &cmd, FROM_IN, 2, NULL);
    }
    if (!st) st = chain_bind(k, s, &ch);
    if (!st) st = dk_finish(k, s, pd, scratch);
    bool jit_gemm = pd_is_gemm(pd);
    dnnl_primitive_desc_destroy(pd);
    if (!st && bdat) {
        gemm_desc d = {.ta = ta, .tb = tb, .m = M, .n = N, .k = K, .alpha = alpha, .b = bdat, .ok = true,
                       .jit_gemm = jit_gemm};
        if (c && beta != 0.0f) {
            int64_t cn = mp_value_numel(c);
            d.add_row[0] = cn == N && c->rank >= 1 && c->dims[c->rank - 1] == N;
            if (!d.add_row[0] && cn != M * N) d.ok = false;
            d.add_in[0] = cs || cdat ? -1 : 2;
            d.add_own[0] = cs ? cs : cdat;
            d.nadd = 1;
        }
        gemm_desc_chain(k, &ch, d.nadd, &d);
        st = gemm_choose(k, s, &d, scratch ? *scratch : 0);
    }
    return st;
dfail_:
    st = dfail(k, ds, "memory descriptor");
fail:
    if (ch.po) dnnl_post_ops_destroy(ch.po);
    return st;
}

/* ----------------------------------------------------------------- pooling */

/* ReduceMean or ReduceMax over exactly the spatial axes of an N, C,
 * spatial... tensor (the dynamo exporter's global pooling: `x.mean((2,
 * 3))`), keeping them or not: a global pooling. */
static bool reduce_global(const mp_graph *g, const mp_node *n) {
    if (!(is_op(n, "ReduceMean") || is_op(n, "ReduceMax")) || n->n_out != 1) return false;
    const mp_value *x = gval(g, n, 0), *y = gout(g, n, 0);
    if (!is_f32(x) || !is_f32(y) || x->rank < 3 || x->rank > 5 || !mp_shape_known(x)) return false;
    int r = x->rank;
    int64_t ax[8];
    int na = -1;
    const int64_t *v;
    if (n->n_in >= 2 && n->in[1] >= 0) {
        const mp_value *a = &g->values[n->in[1]];
        if (a->kn < 1 || a->kn > 8 || !a->iv) return false;
        na = (int)a->kn;
        for (int i = 0; i < na; i++) ax[i] = a->iv[i];
    } else if ((na = mp_attr_ints(n, "axes", &v)) >= 1 && na <= 8) {
        for (int i = 0; i < na; i++) ax[i] = v[i];
    } else {
        return false;
    }
    if (na != r - 2) return false;
    unsigned seen = 0;
    for (int i = 0; i < na; i++) {
        int64_t a = ax[i] < 0 ? ax[i] + r : ax[i];
        if (a < 2 || a >= r || (seen & (1u << a))) return false;
        seen |= 1u << a;
    }
    bool keep = mp_attr_i(n, "keepdims", 1) != 0;
    if (y->rank != (keep ? r : 2) || y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1]) return false;
    for (int i = 2; i < y->rank; i++)
        if (y->dims[i] != 1) return false;
    return true;
}

static bool pool_params(const mp_graph *g, const mp_node *n, dnnl_dims_t ks, dnnl_dims_t st,
                        dnnl_dims_t dil, dnnl_dims_t pl, dnnl_dims_t pr, dnnl_alg_kind_t *alg) {
    const mp_value *x = gval(g, n, 0), *y = gout(g, n, 0);
    bool reduce = reduce_global(g, n);
    if (!is_f32(x) || !is_f32(y) || x->rank < 3 || x->rank > 5 || (y->rank != x->rank && !reduce)) return false;
    for (int j = 1; j < n->n_out; j++)
        if (n->out[j] >= 0) return false;  /* MaxPool's Indices */
    int sp = x->rank - 2;
    bool global = is_op(n, "GlobalAveragePool") || is_op(n, "GlobalMaxPool") || reduce;
    bool avg = is_op(n, "AveragePool") || is_op(n, "GlobalAveragePool") || is_op(n, "ReduceMean");
    if (global) {
        for (int i = 0; i < sp; i++) {
            ks[i] = x->dims[2 + i];
            st[i] = 1;
            dil[i] = pl[i] = pr[i] = 0;
        }
        *alg = avg ? dnnl_pooling_avg_exclude_padding : dnnl_pooling_max;
        return true;
    }
    const int64_t *v;
    if (mp_attr_ints(n, "kernel_shape", &v) != sp) return false;
    if (mp_attr_i(n, "storage_order", 0) != 0) return false;
    int64_t kse[DNNL_MAX_NDIMS];
    for (int i = 0; i < sp; i++) {
        ks[i] = v[i];
        st[i] = 1;
        dil[i] = pl[i] = pr[i] = 0;
    }
    int cnt;
    if ((cnt = mp_attr_ints(n, "strides", &v)) >= 0) {
        if (cnt != sp) return false;
        for (int i = 0; i < sp; i++) st[i] = v[i];
    }
    if ((cnt = mp_attr_ints(n, "dilations", &v)) >= 0) {
        if (cnt != sp) return false;
        for (int i = 0; i < sp; i++) dil[i] = v[i] - 1;
    }
    const char *ap = mp_attr_s(n, "auto_pad", "NOTSET");
    bool upper = mp_streq(ap, "SAME_UPPER"), lower = mp_streq(ap, "SAME_LOWER");
    if ((cnt = mp_attr_ints(n, "pads", &v)) >= 0 && mp_streq(ap, "NOTSET")) {
        if (cnt != 2 * sp) return false;
        for (int i = 0; i < sp; i++) {
            pl[i] = v[i];
            pr[i] = v[sp + i];
        }
    }
    bool incl = avg && mp_attr_i(n, "count_include_pad", 0) != 0;
    for (int i = 0; i < sp; i++) {
        kse[i] = (ks[i] - 1) * (dil[i] + 1) + 1;
        int64_t in = x->dims[2 + i], out = y->dims[2 + i];
        if (upper || lower) {
            int64_t tot = (out - 1) * st[i] + kse[i] - in;
            if (tot < 0) tot = 0;
            pl[i] = upper ? tot / 2 : tot - tot / 2;
            pr[i] = tot - pl[i];
        }
        int64_t need = (out - 1) * st[i] + kse[i] - in - pl[i];
        if (need < 0 && pr[i] == 0 && (in + pl[i] - kse[i]) >= 0 && (in + pl[i] - kse[i]) / st[i] + 1 == out)
            need = 0;  /* a strided window leaves the last rows unread */
        /* ceil_mode's extra window reaches past the pads: counted only
         * when padding is excluded (what ONNX Runtime does) */
        if (need != pr[i] && incl) return false;
        if (need < 0) return false;
        /* a window wholly in the pad gives -inf/NaN in oneDNN */
        if (need >= kse[i] || pl[i] >= kse[i]) return false;
        pr[i] = need;
    }
    *alg = !avg ? dnnl_pooling_max : incl ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding;
    return true;
}

static bool pool_ok(const mp_graph *g, const mp_node *n) {
    dnnl_dims_t a, b, c, d, e;
    dnnl_alg_kind_t alg;
    return pool_params(g, n, a, b, c, d, e, &alg);
}

static mp_status pool_prepare(mp_kctx *k, size_t *scratch) {
    const mp_value *x = gval(k->g, k->n, 0), *y = gout(k->g, k->n, 0);
    dnnl_dims_t ks, st_, dil, pl, pr;
    dnnl_alg_kind_t alg;
    pool_params(k->g, k->n, ks, st_, dil, pl, pr, &alg);
    dk *s;
    mp_status st = dk_new(k, &s);
    if (st) return st;
    dnnl_memory_desc_t xmd, ymd, yany;
    /* the output as pooled: N, C, 1... (a ReduceMean not keeping its
     * axes writes the same bytes as N, C) */
    int64_t yd[DNNL_MAX_NDIMS];
    for (int i = 0; i < x->rank; i++) yd[i] = i < y->rank ? y->dims[i] : 1;
    DN(md_plain(&xmd, x->rank, x->dims), "memory descriptor");
    DN(md_plain(&ymd, x->rank, yd), "memory descriptor");
    DN(md_nhwc(&yany, x->rank, yd), "memory descriptor");
    /* blocked in as the producer left it; blocked out when the readers take it */
    bool in_blocked = lay_find(k, k->n->in[0], &xmd);
    bool want_blocked = in_blocked && readers_take_blocked(k->g, k->n->out[0], 0);
    /* blocked in, plain out has only a reference version: pool blocked,
     * then reorder (or nothing when the output is one pixel per channel
     * of one sample: both layouts are then the same bytes) */
    bool reorder_out = in_blocked && !want_blocked;
    bool same_bytes = yd[0] == 1 && numel_of(x->rank - 2, yd + 2) == 1;
    void *yown = NULL;
    dnnl_primitive_desc_t pd = NULL;
    for (int attempt = in_blocked ? 0 : 1; attempt < 2; attempt++) {
        dnnl_pooling_v2_desc_t pdsc;
        DN(dnnl_pooling_v2_forward_desc_init(&pdsc, dnnl_forward_inference, alg, &xmd,
                                             attempt == 0 ? &yany : &ymd, st_, ks, dil, pl, pr),
           "pooling");
        dnnl_primitive_attr_t attr;
        if ((st = attr_new(k, &attr))) return st;
        if ((st = make_pd(k, &pdsc, attr, NULL, &pd))) return st;
        if (attempt == 0) {
            const dnnl_memory_desc_t *got = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
            if (reorder_out) {
                dnnl_memory_desc_t plain = ymd;
                ymd = *got;
                if (!dnnl_memory_desc_equal(&plain, &ymd) &&
                    !(same_bytes && dnnl_memory_desc_get_size(&ymd) == dnnl_memory_desc_get_size(&plain)) &&
                    (st = dk_post_reorder(k, s, &ymd, &plain, &yown))) {
                    dnnl_primitive_desc_destroy(pd);
                    return st;
                }
                break;
            }
            if (dnnl_memory_desc_get_size(got) == dnnl_memory_desc_get_size(&ymd)) {
                dnnl_memory_desc_t plain = ymd;
                ymd = *got;
                if (!dnnl_memory_desc_equal(&plain, &ymd) && !lay_add(k, s, k->n->out[0], &ymd)) {
                    dnnl_primitive_desc_destroy(pd);
                    return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
                }
                break;
            }
            dnnl_primitive_desc_destroy(pd);
            pd = NULL;
        }
    }
    st = dk_arg(k, s, DNNL_ARG_SRC, &xmd, FROM_IN, 0, NULL);
    if (!st) st = dk_arg(k, s, DNNL_ARG_DST, &ymd, yown ? FROM_OWN : FROM_OUT, 0, yown);
    if (!st) st = dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

/* ----------------------------------------------- Softmax, LogSoftmax */

static bool softmax_axis(const mp_graph *g, const mp_node *n, int64_t *outer, int64_t *inner,
                         int64_t *rest) {
    const mp_value *x = gval(g, n, 0), *y = gout(g, n, 0);
    if (!is_f32(x) || !is_f32(y) || x->rank < 1) return false;
    int r = x->rank;
    int64_t ax = mp_attr_i(n, "axis", n->opset >= 13 ? -1 : 1);
    if (ax < 0) ax += r;
    if (ax < 0 || ax >= r) return false;
    if (n->opset < 13) {
        /* coerced to 2-D [prod(:axis), prod(axis:)] */
        *outer = numel_of((int)ax, x->dims);
        *inner = numel_of(r - (int)ax, x->dims + ax);
        *rest = 1;
    } else {
        *outer = numel_of((int)ax, x->dims);
        *inner = x->dims[ax];
        *rest = numel_of(r - (int)ax - 1, x->dims + ax + 1);
    }
    return *outer * *inner * *rest > 0;
}

static bool softmax_ok(const mp_graph *g, const mp_node *n) {
    int64_t a, b, c;
    return softmax_axis(g, n, &a, &b, &c);
}

static mp_status softmax_prepare(mp_kctx *k, size_t *scratch) {
    int64_t d[3];
    softmax_axis(k->g, k->n, &d[0], &d[1], &d[2]);
    dk *s;
    mp_status st = dk_new(k, &s);
    if (st) return st;
    dnnl_memory_desc_t md;
    /* [outer, axis, rest]; rest 1 drops to 2-D */
    int r = d[2] == 1 ? 2 : 3;
    DN(md_plain(&md, r, d), "memory descriptor");
    dnnl_primitive_attr_t attr;
    if ((st = attr_new(k, &attr))) return st;
    dnnl_primitive_desc_t pd;
    dnnl_status_t ds;
    if (is_op(k->n, "LogSoftmax")) {
        dnnl_logsoftmax_desc_t sd;
        ds = dnnl_logsoftmax_forward_desc_init(&sd, dnnl_forward_inference, &md, 1);
        if (ds) { dnnl_primitive_attr_destroy(attr); return dfail(k, ds, "logsoftmax"); }
        st = make_pd(k, &sd, attr, NULL, &pd);
    } else {
        dnnl_softmax_desc_t sd;
        ds = dnnl_softmax_forward_desc_init(&sd, dnnl_forward_inference, &md, 1);
        if (ds) { dnnl_primitive_attr_destroy(attr); return dfail(k, ds, "softmax"); }
        st = make_pd(k, &sd, attr, NULL, &pd);
    }
    if (st) return st;
    st = dk_arg(k, s, DNNL_ARG_SRC, &md, FROM_IN, 0, NULL);
    if (!st) st = dk_arg(k, s, DNNL_ARG_DST, &md, FROM_OUT, 0, NULL);
    if (!st) st = dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

/* ------------------------------------ LayerNormalization, BatchNormalization */

static bool layernorm_ok(const mp_graph *g, const mp_node *n) {
    const mp_value *x = gval(g, n, 0), *sc = gval(g, n, 1), *b = gval(g, n, 2), *y = gout(g, n, 0);
    if (!is_f32(x) || !is_f32(y) || x->rank < 1 || !sc || !is_wt(g, sc)) return false;
    for (int j = 1; j < n->n_out; j++)
        if (n->out[j] >= 0) return false;   /* Mean, InvStdDev */
    int64_t ax = mp_attr_i(n, "axis", -1);
    if (ax < 0) ax += x->rank;
    if (ax < 0 || ax >= x->rank) return false;
    int64_t inner = numel_of(x->rank - (int)ax, x->dims + ax);
    /* scale and bias of the full normalized shape (no broadcast) */
    if (mp_value_numel(sc) != inner || sc->dtype != MP_DT_FLOAT) return false;
    if (b && (!is_f32(b) || mp_value_numel(b) != inner)) return false;
    return inner > 0 && mp_value_numel(x) > 0;
}

static mp_status layernorm_prepare(mp_kctx *k, size_t *scratch) {
    const mp_node *n = k->n;
    const mp_value *x = gval(k->g, n, 0);
    bool has_b = n->n_in > 2 && n->in[2] >= 0;
    int64_t ax = mp_attr_i(n, "axis", -1);
    if (ax < 0) ax += x->rank;
    int64_t d[2] = {numel_of((int)ax, x->dims), numel_of(x->rank - (int)ax, x->dims + ax)};
    dk *s;
    mp_status st = dk_new(k, &s);
    if (st) return st;
    dnnl_memory_desc_t md, smd;
    DN(md_plain(&md, 2, d), "memory descriptor");
    DN(md_plain(&smd, 1, &d[1]), "memory descriptor");
    dnnl_layer_normalization_desc_t ld;
    unsigned flags = dnnl_use_scale | (has_b ? dnnl_use_shift : 0);
    DN(dnnl_layer_normalization_forward_desc_init(&ld, dnnl_forward_inference, &md, NULL,
                                                  (float)mp_attr_f(n, "epsilon", 1e-5), flags),
       "layer normalization");
    dnnl_primitive_attr_t attr;
    if ((st = attr_new(k, &attr))) return st;
    dnnl_primitive_desc_t pd;
    if ((st = make_pd(k, &ld, attr, NULL, &pd))) return st;
    st = dk_arg(k, s, DNNL_ARG_SRC, &md, FROM_IN, 0, NULL);
    if (!st) st = dk_arg(k, s, DNNL_ARG_DST, &md, FROM_OUT, 0, NULL);
    if (!st) st = dk_arg(k, s, DNNL_ARG_SCALE, &smd, FROM_IN, 1, NULL);
    if (!st && has_b) st = dk_arg(k, s, DNNL_ARG_SHIFT, &smd, FROM_IN, 2, NULL);
    if (!st) st = dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

static bool batchnorm_ok(const mp_graph *g, const mp_node *n) {
    const mp_value *x = gval(g, n, 0), *y = gout(g, n, 0);
    if (!is_f32(x) || !is_f32(y) || x->rank < 2 || x->rank > 5 || n->n_in != 5) return false;
    if (mp_attr_i(n, "training_mode", 0) != 0) return false;
    for (int j = 1; j < n->n_out; j++)
        if (n->out[j] >= 0) return false;
    for (int j = 1; j < 5; j++) {
        const mp_value *p = gval(g, n, j);
        if (!is_f32(p) || mp_value_numel(p) != x->dims[1]) return false;
    }
    return mp_value_numel(x) > 0;
}

static mp_status batchnorm_prepare(mp_kctx *k, size_t *scratch) {
    const mp_value *x = gval(k->g, k->n, 0);
    dk *s;
    mp_status st = dk_new(k, &s);
    if (st) return st;
    dnnl_memory_desc_t md, cmd;
    DN(md_plain(&md, x->rank, x->dims), "memory descriptor");
    DN(md_plain(&cmd, 1, &x->dims[1]), "memory descriptor");
    dnnl_batch_normalization_desc_t bd;
    DN(dnnl_batch_normalization_forward_desc_init(&bd, dnnl_forward_inference, &md,
                                                  (float)mp_attr_f(k->n, "epsilon", 1e-5),
                                                  dnnl_use_global_stats | dnnl_use_scale | dnnl_use_shift),
       "batch normalization");
    dnnl_primitive_attr_t attr;
    if ((st = attr_new(k, &attr))) return st;
    dnnl_primitive_desc_t pd;
    if ((st = make_pd(k, &bd, attr, NULL, &pd))) return st;
    static const int args[] = {DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    st = dk_arg(k, s, DNNL_ARG_SRC, &md, FROM_IN, 0, NULL);
    if (!st) st = dk_arg(k, s, DNNL_ARG_DST, &md, FROM_OUT, 0, NULL);
    for (int j = 0; j < 4 && !st; j++) st = dk_arg(k, s, args[j], &cmd, FROM_IN, 1 + j, NULL);
    if (!st) st = dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

/* ----------------------------------------- element-wise: unary and binary */

/* Below this many elements a standalone element-wise op stays with the
 * portable loop: a primitive's call costs more than the work. */
#define SMALL_ELEMS 4096

static bool eltwise_ok(const mp_graph *g, const mp_node *n) {
    const mp_value *x = gval(g, n, 0), *y = gout(g, n, 0);
    eltw e;
    if (!is_f32(x) || !is_f32(y) || !same_dims(y, x->rank, x->dims)) return false;
    if (mp_value_numel(x) < SMALL_ELEMS) return false;
    /* two-step ones (HardSigmoid) only as post-ops: oneDNN 2.6's eltwise
     * primitive with an eltwise post-op falls to a reference version that
     * computes garbage */
    return eltwise_of(g, n, &e) && e.n == 1;
}

static mp_status eltwise_prepare(mp_kctx *k, size_t *scratch) {
    const mp_value *x = gval(k->g, k->n, 0);
    eltw e;
    eltwise_of(k->g, k->n, &e);
    if (is_op(k->n, "Clip")) {
        for (int j = 1; j < k->n->n_in && j < 3; j++) {
            if (k->n->in[j] < 0) continue;
            if (!k->in[j].data)
                return mp_error(MP_ERR_USAGE, "node %s: Clip bound has no data at plan time", k->n->name);
            if (j == 1) e.a[0] = *(const float *)k->in[j].data;
            else e.b[0] = *(const float *)k->in[j].data;
        }
    }
    dk *s;
    mp_status st = dk_new(k, &s);
    if (st) return st;
    int64_t ne = mp_value_numel(x);
    dnnl_memory_desc_t md, blk;
    DN(md_plain(&md, 1, &ne), "memory descriptor");
    /* a blocked input (of the plain size) is the same bytes in another
     * order: the flat view computes it, and the output keeps the layout */
    if (lay_find(k, k->n->in[0], &blk) && !lay_add(k, s, k->n->out[0], &blk))
        return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
    dnnl_eltwise_desc_t ed;
    DN(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, e.alg[0], &md, e.a[0], e.b[0]), "eltwise");
    return dk_src_dst(k, s, &ed, &md, &md, scratch);
}

/* Binary ops: the output must have src0's shape (oneDNN broadcasts src1
 * only); Add and Mul swap their operands when the second one is the full
 * one. */

static bool binary_ok(const mp_graph *g, const mp_node *n, bool *swap) {
    dnnl_alg_kind_t alg;
    if (!binary_of(n, &alg) || n->n_out != 1) return false;
    const mp_value *a = gval(g, n, 0), *b = gval(g, n, 1), *y = gout(g, n, 0);
    if (!is_f32(a) || !is_f32(b) || !is_f32(y) || y->rank > 12) return false;
    if (mp_value_numel(y) < SMALL_ELEMS) return false;
    if (same_dims(a, y->rank, y->dims) && fits_into(b, y->rank, y->dims)) {
        *swap = false;
        return true;
    }
    if ((alg == dnnl_binary_add || alg == dnnl_binary_mul) && same_dims(b, y->rank, y->dims) &&
        fits_into(a, y->rank, y->dims)) {
        *swap = true;
        return true;
    }
    return false;
}

static mp_status binary_prepare(mp_kctx *k, size_t *scratch) {
    const mp_node *n = k->n;
    const mp_value *y = gout(k->g, n, 0);
    bool swap = false;
    dnnl_alg_kind_t alg;
    binary_ok(k->g, n, &swap);
    binary_of(n, &alg);
    const mp_value *o = gval(k->g, n, swap ? 0 : 1);
    dk *s;
    mp_status st = dk_new(k, &s);
    if (st) return st;
    chain ch;
    if ((st = chain_init(k, &ch))) return st;
    /* no post-ops here: oneDNN 2.6's binary primitive (jit:uni) computes
     * wrong results with some eltwise post-op chains (a linear step after
     * another eltwise, found on GPT-2's tanh GELU; tests/test_dnnl.c
     * plan_gelu_tanh), so element-wise chains run one op at a time */
    ch.final_v = n->out[0];
    dnnl_memory_desc_t ymd, omd, s0md;
    dnnl_status_t ds;
    if ((ds = md_plain(&ymd, y->rank, y->dims)) || (ds = md_plain_pad(&omd, y->rank > 0 ? y->rank : 1, o->rank, o->dims)))
        goto dfail_;
    /* operands as their producers left them; a blocked first operand
     * makes a blocked output when its readers take it */
    s0md = ymd;
    if (o->rank == y->rank) lay_find(k, n->in[swap ? 0 : 1], &omd);
    if (lay_find(k, n->in[swap ? 1 : 0], &s0md) && readers_take_blocked(k->g, ch.final_v, 0)) {
        ymd = s0md;
        if (!lay_add(k, s, ch.final_v, &ymd)) {
            st = mp_error(MP_ERR_NOMEM, "node %s: out of memory", n->name);
            goto fail;
        }
    }
    dnnl_binary_desc_t bd;
    if ((ds = dnnl_binary_desc_init(&bd, alg, &s0md, &omd, &ymd))) goto dfail_;
    dnnl_primitive_attr_t attr;
    if ((st = attr_new(k, &attr))) goto fail;
    if ((st = chain_attr(k, &ch, attr))) { dnnl_primitive_attr_destroy(attr); goto fail; }
    dnnl_primitive_desc_t pd;
    if ((st = make_pd(k, &bd, attr, &ch, &pd))) goto fail;
    st = dk_arg(k, s, DNNL_ARG_SRC_0, &s0md, FROM_IN, swap ? 1 : 0, NULL);
    if (!st) st = dk_arg(k, s, DNNL_ARG_SRC_1, &omd, FROM_IN, swap ? 0 : 1, NULL);
    if (!st) st = dk_arg(k, s, DNNL_ARG_DST, &ymd, FROM_OUT, 0, NULL);
    if (!st) st = chain_bind(k, s, &ch);
    if (!st) st = dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return st;
dfail_:
    st = dfail(k, ds, "memory descriptor");
fail:
    if (ch.po) dnnl_post_ops_destroy(ch.po);
    return st;
}

/* ------------------------------------- GELU as PyTorch exports it
 * Before opset 20 (no Gelu node) PyTorch writes nn.GELU out: x * 0.5 *
 * (1 + erf(x / sqrt 2)), or GPT-2's tanh form 0.5 x (1 + tanh(sqrt(2/pi)
 * (x + 0.044715 x^3))). The pattern layer finds them (patterns.c); here
 * the group runs as one eltwise kernel on x, sitting on the group's first
 * node (which reads x as its input 0). */

/* Act pattern `index` when the glue runs it whole: a GELU (erf or tanh)
 * written out, in fp32, every member's output x's dims. */
static const mp_pact *gelu_fusable(const mp_graph *g, const mp_patterns *p, int index) {
    const mp_pact *a = &p->acts[index];
    if (a->form != MP_FORM_DECOMPOSED || (a->kind != MP_ACT_GELU && a->kind != MP_ACT_GELU_TANH) || a->n < 2 ||
        a->n > 8)
        return NULL;
    const mp_value *x = &g->values[a->x];
    if (!is_f32(x)) return NULL;
    for (int i = 0; i < a->n; i++) {
        const mp_node *m = &g->nodes[p->members[a->first + i].node];
        const mp_value *o = gout(g, m, 0);
        if (m->n_out != 1 || !is_f32(o) || !same_dims(o, x->rank, x->dims)) return NULL;
    }
    return a;
}

/* The GELU whose first node n is (reading x as its input 0), else NULL. */
static const mp_pact *gelu_head(const mp_graph *g, const mp_node *n) {
    const mp_patterns *p;
    mp_pref r = pattern_at(g, n, &p);
    const mp_pact *a = r.kind == MP_PAT_ACT ? gelu_fusable(g, p, r.index) : NULL;
    if (!a || p->members[a->first].node != (int)(n - g->nodes) || n->n_in < 1 || n->in[0] != a->x) return NULL;
    return a;
}

/* The elementwise GELU kernel of a pattern fused whole: x (k->in[0]) to
 * the group's output, laid out as x is. */
static mp_status gelu_kernel(mp_kctx *k, dnnl_alg_kind_t alg, int out_v, size_t *scratch) {
    const mp_value *x = gval(k->g, k->n, 0);
    dk *s;
    mp_status st = dk_new(k, &s);
    if (st) return st;
    int64_t ne = mp_value_numel(x);
    dnnl_memory_desc_t md, blk;
    DN(md_plain(&md, 1, &ne), "memory descriptor");
    if (lay_find(k, k->n->in[0], &blk) && !lay_add(k, s, out_v, &blk))
        return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
    dnnl_eltwise_desc_t ed;
    DN(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, alg, &md, 0, 0), "eltwise");
    return dk_src_dst(k, s, &ed, &md, &md, scratch);
}

static mp_status gelu_prepare(mp_kctx *k, size_t *scratch) {
    const mp_pact *a = gelu_head(k->g, k->n);
    if (!a) return mp_error(MP_ERR_UNSUPPORTED, "node %s: not a GELU pattern", k->n->name);
    const mp_patterns *p = mp_patterns_of(k->g);
    int nodes[8];
    for (int i = 1; i < a->n; i++) nodes[i - 1] = p->members[a->first + i].node;
    /* without fusion (or if the planner declines) the first node runs alone */
    if (!k->fuse || mp_kfuse_nodes(k, nodes, a->n - 1) != MP_OK) {
        mp_error_clear();
        return binary_prepare(k, scratch);
    }
    return gelu_kernel(k, a->kind == MP_ACT_GELU ? dnnl_eltwise_gelu_erf : dnnl_eltwise_gelu_tanh, a->y, scratch);
}

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

/* ReduceMean over the last axis only, keeping it (axes an attribute:
 * before opset 18) */
static bool mean_last(const mp_graph *g, const mp_node *n, const mp_value **x) {
    if (!is_op(n, "ReduceMean") || n->n_in != 1 || n->n_out != 1) return false;
    *x = gval(g, n, 0);
    if (!is_f32(*x) || (*x)->rank < 1 || mp_attr_i(n, "keepdims", 1) != 1) return false;
    const int64_t *ax;
    if (mp_attr_ints(n, "axes", &ax) != 1) return false;
    int64_t a = ax[0] < 0 ? ax[0] + (*x)->rank : ax[0];
    return a == (*x)->rank - 1;
}

/* A per-channel fp32 operand of the normalized axis: [D] (leading 1s) */
static bool chan_f32(const mp_graph *g, int v, int64_t d) {
    const mp_value *c = v >= 0 ? &g->values[v] : NULL;
    return c && is_f32(c) && c->rank >= 1 && mp_value_numel(c) == d && c->dims[c->rank - 1] == d;
}

static bool ln_pattern(const mp_graph *g, const mp_node *n, lnpat *lp) {
    const mp_patterns *p;
    mp_pref r = pattern_at(g, n, &p);
    if (r.kind != MP_PAT_NORM) return false;
    const mp_pnorm *nm = &p->norms[r.index];
    const mp_value *x;
    if (nm->kind != MP_NORM_LAYER || nm->form != MP_FORM_DECOMPOSED || !(nm->eps >= 0) ||
        p->members[nm->first].node != (int)(n - g->nodes) || !mean_last(g, n, &x) ||
        nm->n - 1 > (int)MP_ARRAY_LEN(lp->nodes))
        return false;
    lp->d = x->dims[x->rank - 1];
    lp->rows = mp_value_numel(x) / (lp->d > 0 ? lp->d : 1);
    if (lp->d <= 0 || lp->rows <= 0) return false;
    lp->eps = nm->eps;
    lp->gamma = chan_f32(g, nm->scale, lp->d) ? nm->scale : -1;
    lp->beta = lp->gamma >= 0 && chan_f32(g, nm->shift, lp->d) ? nm->shift : -1;
    lp->n = 0;
    for (int i = 1; i < nm->n; i++) {
        const mp_pmember *mb = &p->members[nm->first + i];
        const mp_node *m = &g->nodes[mb->node];
        const mp_value *o = gout(g, m, 0), *x2;
        if (mb->part == MP_PART_AFFINE) {
            /* the scale, then the shift, each only when fp32 [D]: what is
             * left out runs apart (the Mul's reader of the group's output) */
            bool is_scale = nm->scale >= 0 && m->n_in == 2 && (m->in[0] == nm->scale || m->in[1] == nm->scale);
            if ((is_scale && lp->gamma < 0) || (!is_scale && lp->beta < 0)) break;
        }
        if (m->n_out != 1 || !is_f32(o)) return false;
        if (is_op(m, "ReduceMean") ? !mean_last(g, m, &x2)
                                   : (mp_value_numel(o) == mp_value_numel(x) && !same_dims(o, x->rank, x->dims)))
            return false;
        lp->nodes[lp->n++] = mb->node;
    }
    return lp->n >= 6;
}

/* Where mp_kfuse_nodes put value v among k->in: after the head's own
 * inputs, each node's inputs not made inside the group, in order. */
static int fused_in_index(const mp_graph *g, const mp_node *head, const int *nodes, int n, int v) {
    int at = head->n_in;
    for (int i = 0; i < n; i++) {
        const mp_node *c = &g->nodes[nodes[i]];
        for (int j = 0; j < c->n_in; j++) {
            int u = c->in[j];
            if (u < 0) continue;
            bool inside = u == head->out[0];
            for (int q = 0; q < i && !inside; q++)
                if (g->nodes[nodes[q]].out[0] == u) inside = true;
            if (inside) continue;
            if (u == v) return at;
            at++;
        }
    }
    return -1;
}

/* The head alone (fusion off or declined): the mean over the last axis */
static mp_status mean_last_prepare(mp_kctx *k, const lnpat *p, size_t *scratch) {
    dk *s;
    mp_status st = dk_new(k, &s);
    if (st) return st;
    k->kname = "onednn:reduction";
    int64_t sd[2] = {p->rows, p->d}, dd[2] = {p->rows, 1};
    dnnl_memory_desc_t smd, dmd;
    DN(md_plain(&smd, 2, sd), "memory descriptor");
    DN(md_plain(&dmd, 2, dd), "memory descriptor");
    dnnl_reduction_desc_t rd;
    DN(dnnl_reduction_desc_init(&rd, dnnl_reduction_mean, &smd, &dmd, 0.0f, 0.0f), "reduction");
    return dk_src_dst(k, s, &rd, &smd, &dmd, scratch);
}

static mp_status lnorm_prepare(mp_kctx *k, size_t *scratch) {
    lnpat p;
    if (!ln_pattern(k->g, k->n, &p))
        return mp_error(MP_ERR_UNSUPPORTED, "node %s: not a LayerNormalization pattern", k->n->name);
    if (!k->fuse || mp_kfuse_nodes(k, p.nodes, p.n) != MP_OK) {
        mp_error_clear();
        return mean_last_prepare(k, &p, scratch);
    }
    int gi = p.gamma >= 0 ? fused_in_index(k->g, k->n, p.nodes, p.n, p.gamma) : -1;
    int bi = p.beta >= 0 ? fused_in_index(k->g, k->n, p.nodes, p.n, p.beta) : -1;
    if ((p.gamma >= 0 && (gi < 0 || gi >= k->n_in)) || (p.beta >= 0 && (bi < 0 || bi >= k->n_in)))
        return mp_error(MP_ERR_UNSUPPORTED, "node %s: the LayerNormalization pattern's inputs are not where "
                        "expected", k->n->name);
    dk *s;
    mp_status st = dk_new(k, &s);
    if (st) return st;
    int64_t d2[2] = {p.rows, p.d};
    dnnl_memory_desc_t md, cmd;
    DN(md_plain(&md, 2, d2), "memory descriptor");
    DN(md_plain(&cmd, 1, &p.d), "memory descriptor");
    unsigned flags = (gi >= 0 ? dnnl_use_scale : 0) | (bi >= 0 ? dnnl_use_shift : 0);
    dnnl_layer_normalization_desc_t ld;
    DN(dnnl_layer_normalization_forward_desc_init(&ld, dnnl_forward_inference, &md, NULL, (float)p.eps, flags),
       "layer normalization");
    dnnl_primitive_attr_t attr;
    if ((st = attr_new(k, &attr))) return st;
    dnnl_primitive_desc_t pd;
    if ((st = make_pd(k, &ld, attr, NULL, &pd))) return st;
    st = dk_arg(k, s, DNNL_ARG_SRC, &md, FROM_IN, 0, NULL);
    if (!st) st = dk_arg(k, s, DNNL_ARG_DST, &md, FROM_OUT, 0, NULL);
    if (!st && gi >= 0) st = dk_arg(k, s, DNNL_ARG_SCALE, &cmd, FROM_IN, gi, NULL);
    if (!st && bi >= 0) st = dk_arg(k, s, DNNL_ARG_SHIFT, &cmd, FROM_IN, bi, NULL);
    if (!st) st = dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

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

static bool attn_batch_same(const mp_value *a, const mp_value *b, int r) {
    if (a->rank != r || b->rank != r) return false;
    for (int i = 0; i < r - 2; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

/* The attention the pattern layer found (patterns.c) whose score product
 * is n, when the glue runs it fused: its chain QK [SCALE] [MASK] SOFTMAX
 * [GUARD] [CAST, CAST] PV in this order, in fp32 (the casts to float),
 * with the shapes below. Q's and K's own scales, K's transposition and a
 * GQA repetition run before it as nodes of their own. */
static bool attn_pattern(const mp_graph *g, const mp_node *n, attnpat *p) {
    const mp_patterns *P;
    mp_pref pr = pattern_at(g, n, &P);
    if (pr.kind != MP_PAT_ATTN || pr.part != MP_PART_QK) return false;
    const mp_pattn *a = &P->attn[pr.index];
    if ((a->form != MP_FORM_DECOMPOSED && a->form != MP_FORM_SDPA) || a->dropout) return false;
    if (!is_op(n, "MatMul") || n->n_in != 2 || n->n_out != 1) return false;
    const mp_value *q = gval(g, n, 0), *kt = gval(g, n, 1), *sc = gout(g, n, 0);
    if (!is_f32(q) || !is_f32(kt) || !is_f32(sc)) return false;
    int r = q->rank;
    if (r < 3 || r > DNNL_MAX_NDIMS || !attn_batch_same(q, kt, r) || !attn_batch_same(q, sc, r)) return false;
    int64_t sq = q->dims[r - 2], d = q->dims[r - 1], sk = kt->dims[r - 1];
    if (kt->dims[r - 2] != d || sc->dims[r - 2] != sq || sc->dims[r - 1] != sk) return false;
    if (mp_value_numel(sc) <= 0 || d <= 0) return false;
    p->n = 0;
    p->alpha = (float)a->score_scale;
    p->mask_v = -1;
    p->where = p->guard = false;
    /* stages: 0 the product, 1 scaled, 2 masked, 3 softmax, 4 guard half
     * seen, 5 guarded, 6 .. 7 casts, 8 the product with V */
    int stage = 0, casts = 0, cur = n->out[0];
    for (int i = 0; i < a->n && stage < 8; i++) {
        const mp_pmember *mb = &P->members[a->first + i];
        const mp_node *c = &g->nodes[mb->node];
        const mp_value *o = gout(g, c, 0);
        switch (mb->part) {
        case MP_PART_QK:
            if (c != n || stage != 0) return false;
            stage = 0;
            continue;
        case MP_PART_K_T:
        case MP_PART_Q_SCALE:
        case MP_PART_K_SCALE:
        case MP_PART_REPEAT:
            continue; /* before the product: nodes of their own */
        case MP_PART_SCALE:
            if (stage != 0 || !isfinite(p->alpha) || p->alpha == 0) return false;
            stage = 1;
            break;
        case MP_PART_MASK: {
            if (stage > 1) return false;
            const mp_value *m = a->mask_v >= 0 ? &g->values[a->mask_v] : NULL;
            if (!m) return false;
            if (a->mask == MP_MASK_WHERE) {
                if (m->dtype != MP_DT_BOOL || !mp_shape_known(m) || !(a->mask_fill <= -1e30)) return false;
                p->where = true;
                p->fill_on_true = a->mask_fill_on_true;
                p->fill = (float)a->mask_fill;
            } else if (a->mask != MP_MASK_ADD || !is_f32(m)) {
                return false;
            }
            if (m->rank > r) return false;
            for (int k = 0; k < m->rank; k++) {
                int64_t sd = sc->dims[r - m->rank + k];
                if (m->dims[k] != 1 && m->dims[k] != sd) return false;
            }
            p->mask_v = a->mask_v;
            stage = 2;
            break;
        }
        case MP_PART_SOFTMAX: {
            int64_t outer, inner, rest;
            if (stage > 2 || !softmax_axis(g, c, &outer, &inner, &rest) || rest != 1 || inner != sk) return false;
            stage = 3;
            break;
        }
        case MP_PART_GUARD:
            if ((stage != 3 && stage != 4) || !isfinite(a->guard_value)) return false;
            stage++;
            p->guard = true;
            p->guard_c = (float)a->guard_value;
            if (is_op(c, "IsNaN")) {
                p->nodes[p->n++] = mb->node;
                continue; /* its output is the Where's condition */
            }
            break;
        case MP_PART_CAST:
            /* a Cast to float of the fp32 probabilities does nothing (Hugging
             * Face's Llama has two: softmax in fp32, then to the query's type) */
            if (stage < 3 || stage == 4 || casts >= 2 || mp_attr_i(c, "to", 0) != MP_DT_FLOAT) return false;
            casts++;
            stage = 6;
            break;
        case MP_PART_PV: {
            if (stage < 3 || stage == 4 || c->n_in != 2 || c->in[0] != cur) return false;
            const mp_value *v = gval(g, c, 1), *y = gout(g, c, 0);
            if (!is_f32(v) || !is_f32(y) || !attn_batch_same(q, v, r) || !attn_batch_same(q, y, r)) return false;
            if (v->dims[r - 2] != sk || y->dims[r - 2] != sq || y->dims[r - 1] != v->dims[r - 1]) return false;
            p->v_v = c->in[1];
            p->nodes[p->n++] = mb->node;
            stage = 8;
            continue;
        }
        default:
            return false;
        }
        /* scores, masked scores, probabilities: fp32, the scores' dims */
        if (c->n_out != 1 || !is_f32(o) || !same_dims(o, r, sc->dims) || p->n >= (int)MP_ARRAY_LEN(p->nodes) - 1)
            return false;
        p->nodes[p->n++] = mb->node;
        cur = o == NULL ? cur : c->out[0];
    }
    return stage == 8;
}

typedef struct attnk {
    dk *d[3];                /* scores, softmax, product; d[0] alone: the unfused MatMul */
    int nd;
    /* a Where mask as the additive one (d[0]'s own buffer), made from the
     * condition, input cond_in, each run when that is not a constant */
    float *wmask;
    int64_t wn;
    int cond_in;             /* -1: made once at prepare */
    bool fill_on_true;
    float fill;
    bool guard;              /* NaN probabilities (in the scratch at d[1]->scr_at) become guard_c */
    float guard_c;
    int64_t np;              /* the number of probabilities */
} attnk;

static void attn_where_mask(attnk *a, const uint8_t *cond) {
    for (int64_t i = 0; i < a->wn; i++) a->wmask[i] = (cond[i] != 0) == a->fill_on_true ? a->fill : 0.0f;
}

typedef struct attn_guard_arg {
    float *p;
    float c;
} attn_guard_arg;

static void attn_guard_range(void *arg, int64_t lo, int64_t hi) {
    attn_guard_arg *ga = arg;
    for (int64_t i = lo; i < hi; i++)
        if (isnan(ga->p[i])) ga->p[i] = ga->c;
}

static void attn_release(void *state) {
    attnk *a = state;
    if (!a) return;
    for (int i = 0; i < a->nd; i++) dk_release(a->d[i]);
    free(a);
}

static mp_status attn_run(mp_kctx *k) {
    attnk *a = k->state;
    mp_status st = MP_OK;
    if (a->wmask && a->cond_in >= 0) {
        const void *cond = k->in[a->cond_in].data;
        if (!cond) return mp_error(MP_ERR_USAGE, "node %s (%s): the mask's condition is missing", k->n->name, k->n->op);
        attn_where_mask(a, cond);
    }
    for (int i = 0; i < a->nd && !st; i++) {
        k->state = a->d[i];
        st = dk_run(k);
        if (!st && i == 1 && a->guard) {
            attn_guard_arg ga = {(float *)((char *)k->scratch + a->d[1]->scr_at), a->guard_c};
            mp_kparallel(k, a->np, attn_guard_range, &ga);
        }
    }
    k->state = a;
    return st;
}

/* The three primitive descriptors of a fused attention. */
static mp_status attn_pds(mp_kctx *k, const attnpat *p, int mi, dnnl_primitive_desc_t pd[3],
                          dnnl_memory_desc_t md[7]) {
    const mp_graph *g = k->g;
    const mp_value *q = gval(g, k->n, 0), *kt = gval(g, k->n, 1), *sc = gout(g, k->n, 0);
    const mp_value *v = &g->values[p->v_v], *y = gout(g, &g->nodes[p->nodes[p->n - 1]], 0);
    int r = q->rank;
    int64_t rows[2] = {mp_value_numel(sc) / sc->dims[r - 1], sc->dims[r - 1]};
    /* md: Q, Kt, scores, V, Y, the scores as [rows, Sk], the mask */
    dnnl_status_t ds;
    if ((ds = md_plain(&md[0], r, q->dims)) || (ds = md_plain(&md[1], r, kt->dims)) ||
        (ds = md_plain(&md[2], r, sc->dims)) || (ds = md_plain(&md[3], r, v->dims)) ||
        (ds = md_plain(&md[4], r, y->dims)) || (ds = md_plain(&md[5], 2, rows)))
        return dfail(k, ds, "memory descriptor");
    mp_status st;
    dnnl_primitive_attr_t attr;
    if ((st = attr_new(k, &attr))) return st;
    if (p->alpha != 1.0f && (ds = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &p->alpha))) {
        dnnl_primitive_attr_destroy(attr);
        return dfail(k, ds, "output scale");
    }
    chain ch = {0};
    if (mi >= 0) {
        const mp_value *m = &g->values[p->mask_v];
        int64_t mdims[DNNL_MAX_NDIMS];
        for (int i = 0; i < r; i++) {
            int j = i - (r - m->rank);
            mdims[i] = j >= 0 ? m->dims[j] : 1;
        }
        if ((ds = md_plain(&md[6], r, mdims)) || (ds = dnnl_post_ops_create(&ch.po)) ||
            (ds = dnnl_post_ops_append_binary(ch.po, dnnl_binary_add, &md[6])) ||
            (ds = dnnl_primitive_attr_set_post_ops(attr, ch.po))) {
            attr_done(attr, &ch);
            return dfail(k, ds, "attention mask");
        }
    }
    dnnl_matmul_desc_t mm;
    if ((ds = dnnl_matmul_desc_init(&mm, &md[0], &md[1], NULL, &md[2]))) {
        attr_done(attr, &ch);
        return dfail(k, ds, "attention scores");
    }
    if ((st = make_pd(k, &mm, attr, &ch, &pd[0]))) return st;
    dnnl_softmax_desc_t sd;
    if ((ds = dnnl_softmax_forward_desc_init(&sd, dnnl_forward_inference, &md[5], 1)))
        return dfail(k, ds, "attention softmax");
    if ((st = attr_new(k, &attr)) || (st = make_pd(k, &sd, attr, NULL, &pd[1]))) return st;
    if ((ds = dnnl_matmul_desc_init(&mm, &md[2], &md[3], NULL, &md[4]))) return dfail(k, ds, "attention product");
    if ((st = attr_new(k, &attr)) || (st = make_pd(k, &mm, attr, NULL, &pd[2]))) return st;
    return MP_OK;
}

static mp_status attn_prepare(mp_kctx *k, size_t *scratch) {
    const mp_graph *g = k->g;
    attnpat p;
    if (!attn_pattern(g, k->n, &p))
        return mp_error(MP_ERR_UNSUPPORTED, "node %s: not an attention pattern", k->n->name);
    attnk *a = calloc(1, sizeof *a);
    if (!a) return mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
    /* every operand plain (no blocked layout from a oneDNN producer) */
    dnnl_memory_desc_t lmd;
    bool plain = !lay_find(k, k->n->in[0], &lmd) && !lay_find(k, k->n->in[1], &lmd) && !lay_find(k, p.v_v, &lmd) &&
                 (p.mask_v < 0 || !lay_find(k, p.mask_v, &lmd));
    if (!plain || !k->fuse || mp_kfuse_nodes(k, p.nodes, p.n) != MP_OK) {
        /* the head alone: the plain MatMul kernel (with its own chain) */
        mp_error_clear();
        mp_status st = matmul_prepare(k, scratch);
        a->d[0] = k->state;
        a->nd = a->d[0] ? 1 : 0;
        k->state = a;
        if (!k->kname) k->kname = "onednn:matmul";
        if (st) {
            attn_release(a);
            k->state = NULL;
        }
        return st;
    }
    int vi = fused_in_index(g, k->n, p.nodes, p.n, p.v_v);
    int mi = p.mask_v >= 0 ? fused_in_index(g, k->n, p.nodes, p.n, p.mask_v) : -1;
    if (vi < 0 || vi >= k->n_in || (p.mask_v >= 0 && (mi < 0 || mi >= k->n_in))) {
        free(a);
        return mp_error(MP_ERR_UNSUPPORTED, "node %s: the attention pattern's inputs are not where expected",
                        k->n->name);
    }
    pthread_once(&g_once, engine_init);
    if (g_init_st != dnnl_success) {
        free(a);
        return dfail(k, g_init_st, "engine");
    }
    dnnl_primitive_desc_t pd[3] = {NULL, NULL, NULL};
    dnnl_memory_desc_t md[7];
    mp_status st = attn_pds(k, &p, mi, pd, md);
    /* the scores after the primitives' scratchpads (which share the
     * start of the scratch: the three run one after another) */
    size_t pad = 0;
    for (int i = 0; !st && i < 3; i++) {
        const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd[i], dnnl_query_scratchpad_md, 0);
        size_t sz = smd ? dnnl_memory_desc_get_size(smd) : 0;
        if (sz > pad) pad = sz;
    }
    size_t at = (pad + 63) / 64 * 64;
    for (int i = 0; !st && i < 3; i++) {
        if ((st = dk_new(k, &a->d[i]))) break;
        a->nd = i + 1;
        dk *s = a->d[i];
        s->scr_at = at;
        if (i == 0) {
            st = dk_arg(k, s, DNNL_ARG_SRC, &md[0], FROM_IN, 0, NULL);
            if (!st) st = dk_arg(k, s, DNNL_ARG_WEIGHTS, &md[1], FROM_IN, 1, NULL);
            if (!st) st = dk_arg(k, s, DNNL_ARG_DST, &md[2], FROM_SCRATCH_AT, 0, NULL);
            if (!st && mi >= 0 && p.where) {
                a->wn = mp_value_numel(&g->values[p.mask_v]);
                a->wmask = dk_alloc_own(s, sizeof(float) * (size_t)a->wn);
                if (!a->wmask) st = mp_error(MP_ERR_NOMEM, "node %s: out of memory", k->n->name);
                a->fill = p.fill, a->fill_on_true = p.fill_on_true;
                a->cond_in = k->in[mi].data ? -1 : mi;
                if (!st && a->cond_in < 0) attn_where_mask(a, k->in[mi].data);
            }
            /* the mask: an input, or the additive form of a Where's kept here */
            if (!st && mi >= 0)
                st = dk_arg(k, s, DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, &md[6],
                            a->wmask ? FROM_OWN : FROM_IN, mi, a->wmask);
        } else if (i == 1) {
            st = dk_arg(k, s, DNNL_ARG_SRC, &md[5], FROM_SCRATCH_AT, 0, NULL);
            if (!st) st = dk_arg(k, s, DNNL_ARG_DST, &md[5], FROM_SCRATCH_AT, 0, NULL);
        } else {
            st = dk_arg(k, s, DNNL_ARG_SRC, &md[2], FROM_SCRATCH_AT, 0, NULL);
            if (!st) st = dk_arg(k, s, DNNL_ARG_WEIGHTS, &md[3], FROM_IN, vi, NULL);
            if (!st) st = dk_arg(k, s, DNNL_ARG_DST, &md[4], FROM_OUT, 0, NULL);
        }
        if (!st) st = dk_finish(k, s, pd[i], scratch);
    }
    for (int i = 0; i < 3; i++)
        if (pd[i]) dnnl_primitive_desc_destroy(pd[i]);
    k->state = a;
    if (st) {
        attn_release(a);
        k->state = NULL;
        return st;
    }
    a->guard = p.guard, a->guard_c = p.guard_c;
    a->np = mp_value_numel(gout(g, k->n, 0));
    size_t need = at + dnnl_memory_desc_get_size(&md[2]);
    if (scratch && *scratch < need) *scratch = need;
    return MP_OK;
}

/* ------------------------------------------------------------ Transpose
 * An fp32 Transpose as oneDNN's reorder from the input read through
 * permuted strides into the plain output, split over the plan's threads
 * (the portable kernel copies on one thread: in BERT-base the 48 head
 * transposes took 3.2 ms of a 121 ms pass, and 8 ms once the Reshape
 * before them stopped copying, the copy then reading what the two
 * threads' matrix product left in the other core's cache). Small ones
 * stay portable. */

enum { TRANSPOSE_MIN = 1 << 14 };  /* elements: below, oneDNN's call costs more than the copy */

/* The input axis of each output axis (perm, or reversed without it);
 * false when perm is not a permutation of the rank r axes. */
static bool transpose_perm(const mp_node *n, int r, int64_t *p) {
    const int64_t *perm = NULL;
    int np = mp_attr_ints(n, "perm", &perm);
    if (np >= 0 && np != r) return false;
    unsigned seen = 0;
    for (int i = 0; i < r; i++) {
        p[i] = np == r ? perm[i] : r - 1 - i;
        if (p[i] < 0 || p[i] >= r || (seen & (1u << p[i]))) return false;
        seen |= 1u << p[i];
    }
    return true;
}

static bool transpose_ok(const mp_graph *g, const mp_node *n) {
    const mp_value *x = gval(g, n, 0), *y = gout(g, n, 0);
    int64_t p[DNNL_MAX_NDIMS];
    if (!is_f32(x) || !is_f32(y) || x->rank < 2 || x->rank > DNNL_MAX_NDIMS || y->rank != x->rank ||
        n->n_out != 1 || mp_value_numel(x) < TRANSPOSE_MIN || !transpose_perm(n, x->rank, p))
        return false;
    for (int i = 0; i < x->rank; i++)
        if (y->dims[i] != x->dims[p[i]]) return false;
    return true;
}

static mp_status transpose_prepare(mp_kctx *k, size_t *scratch) {
    const mp_value *x = gval(k->g, k->n, 0), *y = gout(k->g, k->n, 0);
    int r = x->rank;
    int64_t p[DNNL_MAX_NDIMS];
    dk *s;
    mp_status rs = dk_new(k, &s);
    if (rs) return rs;
    k->kname = "onednn:reorder";
    /* the input read through its plain strides, permuted */
    dnnl_memory_desc_t xmd, smd, dmd;
    DN(md_plain(&xmd, r, x->dims), "memory descriptor");
    if (!transpose_perm(k->n, r, p)) return mp_error(MP_ERR_UNSUPPORTED, "node %s: bad perm", k->n->name);
    dnnl_dims_t d, st;
    for (int i = 0; i < r; i++) {
        d[i] = y->dims[i];
        st[i] = xmd.format_desc.blocking.strides[p[i]];
    }
    DN(dnnl_memory_desc_init_by_strides(&smd, r, d, dnnl_f32, st), "memory descriptor");
    DN(md_plain(&dmd, r, y->dims), "memory descriptor");
    dnnl_primitive_desc_t pd;
    DN(dnnl_reorder_primitive_desc_create(&pd, &smd, g_eng, &dmd, g_eng, NULL), "reorder");
    rs = dk_arg(k, s, DNNL_ARG_FROM, &smd, FROM_IN, 0, NULL);
    if (!rs) rs = dk_arg(k, s, DNNL_ARG_TO, &dmd, FROM_OUT, 0, NULL);
    if (!rs) rs = dk_finish(k, s, pd, scratch);
    dnnl_primitive_desc_destroy(pd);
    return rs;
}

/* --------------------------------------------------------------- the table */

static const mp_kernel k_conv = {"onednn:conv", conv_prepare, dk_run, dk_release};
static const mp_kernel k_convt = {"onednn:deconv", convt_prepare, dk_run, dk_release};
static const mp_kernel k_matmul = {"onednn:matmul", matmul_prepare, dk_run, dk_release};
static const mp_kernel k_gemm = {"onednn:gemm", gemm_prepare, dk_run, dk_release};
static const mp_kernel k_pool = {"onednn:pool", pool_prepare, dk_run, dk_release};
static const mp_kernel k_softmax = {"onednn:softmax", softmax_prepare, dk_run, dk_release};
static const mp_kernel k_layernorm = {"onednn:layernorm", layernorm_prepare, dk_run, dk_release};
static const mp_kernel k_batchnorm = {"onednn:batchnorm", batchnorm_prepare, dk_run, dk_release};
static const mp_kernel k_eltwise = {"onednn:eltwise", eltwise_prepare, dk_run, dk_release};
static const mp_kernel k_binary = {"onednn:binary", binary_prepare, dk_run, dk_release};
static const mp_kernel k_gelu = {"onednn:gelu", gelu_prepare, dk_run, dk_release};
static const mp_kernel k_lnorm = {"onednn:layernorm", lnorm_prepare, dk_run, dk_release};
static const mp_kernel k_attn = {"onednn:attention", attn_prepare, attn_run, attn_release};
static const mp_kernel k_transpose = {"onednn:reorder", transpose_prepare, dk_run, dk_release};

const mp_kernel *mp_dnnl_kernel(const mp_graph *g, const mp_node *n) {
    if (!g || !n || !n->op || !n->domain || !mp_dnnl_available()) return NULL;
    if (n->domain[0] && !mp_streq(n->domain, "ai.onnx")) return NULL;
    const char *op = n->op;
    if (mp_streq(op, "LSTM") || mp_streq(op, "GRU") || mp_streq(op, "RNN")) return mp_dnnl_rnn_kernel(g, n);
    bool swap;
    /* a GELU written out runs whole on its first node (patterns.c) */
    if (gelu_head(g, n) && binary_ok(g, n, &swap)) return &k_gelu;
    switch (op[0]) {
    case 'A':
        if (mp_streq(op, "AveragePool")) return pool_ok(g, n) ? &k_pool : NULL;
        break;
    case 'B':
        if (mp_streq(op, "BatchNormalization")) return batchnorm_ok(g, n) ? &k_batchnorm : NULL;
        break;
    case 'C':
        if (mp_streq(op, "Conv")) return conv_ok(g, n, false) ? &k_conv : NULL;
        if (mp_streq(op, "ConvTranspose")) return conv_ok(g, n, true) ? &k_convt : NULL;
        break;
    case 'G':
        if (mp_streq(op, "Gemm")) return gemm_ok(g, n) ? &k_gemm : NULL;
        if (mp_streq(op, "GlobalAveragePool") || mp_streq(op, "GlobalMaxPool"))
            return pool_ok(g, n) ? &k_pool : NULL;
        break;
    case 'L':
        if (mp_streq(op, "LayerNormalization")) return layernorm_ok(g, n) ? &k_layernorm : NULL;
        if (mp_streq(op, "LogSoftmax")) return softmax_ok(g, n) ? &k_softmax : NULL;
        break;
    case 'M': {
        if (mp_streq(op, "MatMul")) {
            attnpat ap;
            if (!matmul_ok(g, n)) return NULL;
            return attn_pattern(g, n, &ap) ? &k_attn : &k_matmul;
        }
        if (mp_streq(op, "MaxPool")) return pool_ok(g, n) ? &k_pool : NULL;
        break;
    }
    case 'R': {
        lnpat lp;
        if (mp_streq(op, "ReduceMean") && ln_pattern(g, n, &lp)) return &k_lnorm;
        if ((mp_streq(op, "ReduceMean") || mp_streq(op, "ReduceMax")) && pool_ok(g, n)) return &k_pool;
        break;
    }
    case 'S':
        if (mp_streq(op, "Softmax")) return softmax_ok(g, n) ? &k_softmax : NULL;
        break;
    case 'T':
        if (mp_streq(op, "Transpose")) return transpose_ok(g, n) ? &k_transpose : NULL;
        break;
    default:
        break;
    }
    if (binary_ok(g, n, &swap)) return &k_binary;
    if (eltwise_ok(g, n)) return &k_eltwise;
    return NULL;
}

/* ---- for the recurrent layers' glue (dnnl_rnn.c) ---- */

void *mp_dnnl_sym(const char *name) {
    return mp_dnnl_available() ? dlsym(mp__dl_handle, name) : NULL;
}

bool mp_dnnl_engine(void *eng, void *strm) {
    if (!mp_dnnl_available()) return false;
    pthread_once(&g_once, engine_init);
    if (g_init_st != dnnl_success) return false;
    *(dnnl_engine_t *)eng = g_eng;
    *(dnnl_stream_t *)strm = g_strm;
    return true;
}

/* The peak probe (measure.c times it): C = A B on s x s x s fp32 through
 * one of the two ways the glue multiplies, the matmul primitive with B
 * reordered once into the layout it chose (as MatMul and Gemm nodes run:
 * a blocked layout and brgemm on AVX-512) or plain dnnl_sgemm. */
struct mp_dnnl_probe {
    int which, s;
    const float *a, *b;
    float *c;
    dnnl_primitive_t p;
    dnnl_memory_t ma, mb, mc;
};

void mp_dnnl_probe_free(mp_dnnl_probe *pr) {
    if (!pr) return;
    if (pr->p) dnnl_primitive_destroy(pr->p);
    if (pr->ma) dnnl_memory_destroy(pr->ma);
    if (pr->mb) dnnl_memory_destroy(pr->mb);
    if (pr->mc) dnnl_memory_destroy(pr->mc);
    free(pr);
}

static dnnl_status_t probe_make(mp_dnnl_probe *pr) {
    int64_t d[2] = {pr->s, pr->s};
    dnnl_memory_desc_t amd, bplain, bmd, cmd;
    dnnl_status_t ds;
    if ((ds = md_plain(&amd, 2, d)) || (ds = md_plain(&bplain, 2, d)) || (ds = md_any(&bmd, 2, d)) ||
        (ds = md_plain(&cmd, 2, d)))
        return ds;
    dnnl_matmul_desc_t md;
    if ((ds = dnnl_matmul_desc_init(&md, &amd, &bmd, NULL, &cmd))) return ds;
    dnnl_primitive_desc_t pd = NULL, rpd = NULL;
    dnnl_primitive_t rp = NULL;
    dnnl_memory_t braw = NULL;
    if ((ds = dnnl_primitive_desc_create(&pd, &md, NULL, g_eng, NULL))) return ds;
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (!(ds = dnnl_primitive_create(&pr->p, pd)) &&
        !(ds = dnnl_memory_create(&pr->ma, &amd, g_eng, (void *)pr->a)) &&
        !(ds = dnnl_memory_create(&pr->mc, &cmd, g_eng, pr->c)) &&
        !(ds = dnnl_memory_create(&pr->mb, wmd, g_eng, DNNL_MEMORY_ALLOCATE)) &&
        !(ds = dnnl_memory_create(&braw, &bplain, g_eng, (void *)pr->b)) &&
        !(ds = dnnl_reorder_primitive_desc_create(&rpd, &bplain, g_eng, wmd, g_eng, NULL)) &&
        !(ds = dnnl_primitive_create(&rp, rpd))) {
        dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, braw}, {DNNL_ARG_TO, pr->mb}};
        ds = dnnl_primitive_execute(rp, g_strm, 2, ra);
        if (!ds) ds = dnnl_stream_wait(g_strm);
    }
    if (rp) dnnl_primitive_destroy(rp);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (braw) dnnl_memory_destroy(braw);
    dnnl_primitive_desc_destroy(pd);
    return ds;
}

mp_dnnl_probe *mp_dnnl_probe_new(int which, int threads, int s, const float *a, const float *b, float *c) {
    if (!mp_dnnl_available()) return NULL;
    pthread_once(&g_once, engine_init);
    if (g_init_st != dnnl_success) return NULL;
    if (which == 2 && !mp_blas_available()) return NULL;
    mp_dnnl_probe *pr = calloc(1, sizeof *pr);
    if (!pr) return NULL;
    pr->which = which;
    pr->s = s;
    pr->a = a;
    pr->b = b;
    pr->c = c;
    set_threads(threads);
    if (which == 0 && probe_make(pr) != dnnl_success) {
        mp_dnnl_probe_free(pr);
        return NULL;
    }
    return pr;
}

bool mp_dnnl_probe_run(mp_dnnl_probe *pr, int threads) {
    int s = pr->s;
    if (pr->which == 2) {
        mp_blas_sgemm(threads, false, false, s, s, s, 1.0f, pr->a, s, pr->b, s, 0.0f, pr->c, s);
        return true;
    }
    set_threads(threads);
    if (pr->which == 1)
        return dnnl_sgemm('N', 'N', s, s, s, 1.0f, pr->a, s, pr->b, s, 0.0f, pr->c, s) == dnnl_success;
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, pr->ma}, {DNNL_ARG_WEIGHTS, pr->mb}, {DNNL_ARG_DST, pr->mc}};
    return dnnl_primitive_execute(pr->p, g_strm, 3, args) == dnnl_success &&
           dnnl_stream_wait(g_strm) == dnnl_success;
}
