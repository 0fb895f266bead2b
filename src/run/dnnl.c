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
#include "run/dnnl_int.h"

/* the pointers the header declares (loading oneDNN) */
#define MP__DL_PTR(f) __typeof__(mp__dl_##f) mp__dl_##f;
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

/* ---------------------------------------------------------------- engine */

dnnl_engine_t dn_eng;
dnnl_stream_t dn_strm;
dnnl_status_t dn_init_st = dnnl_success;
pthread_once_t dn_once = PTHREAD_ONCE_INIT;

void dn_engine_init(void) {
    dn_init_st = dnnl_engine_create(&dn_eng, dnnl_cpu, 0);
    if (dn_init_st == dnnl_success)
        dn_init_st = dnnl_stream_create(&dn_strm, dn_eng, dnnl_stream_default_flags);
}

/* The calling thread's OpenMP thread count (an ICV read, cheap): set only
 * when it differs, whoever set it last. */
void dn_set_threads(int n) {
    if (n > 0 && omp_get_max_threads() != n) omp_set_num_threads(n);
}

mp_status dn_dfail(const mp_kctx *k, dnnl_status_t s, const char *what) {
    return mp_error(MP_ERR_UNSUPPORTED, "node %s (%s): oneDNN %s: %s",
                    k->n->name ? k->n->name : "?", k->n->op, what, dnnl_status2str(s));
}
/* ------------------------------------------------------------ graph view */

const mp_value *dn_gval(const mp_graph *g, const mp_node *n, int i) {
    if (i < 0 || i >= n->n_in || n->in[i] < 0) return NULL;
    return &g->values[n->in[i]];
}
const mp_value *dn_gout(const mp_graph *g, const mp_node *n, int i) {
    if (i < 0 || i >= n->n_out || n->out[i] < 0) return NULL;
    return &g->values[n->out[i]];
}
/* fp32; or fp16/bf16 while dn_half_mode asks what a 16-bit node would get
 * (dnnl_half.c converts its tensors at the node's boundary). */
bool dn_is_f32(const mp_value *v) {
    return v && mp_shape_known(v) &&
           (v->dtype == MP_DT_FLOAT || (dn_half_mode && (v->dtype == MP_DT_FLOAT16 || v->dtype == MP_DT_BFLOAT16)));
}
/* fp32, or fp16/bf16 that prepare converts once (constant weights). */

bool dn_is_wt(const mp_graph *g, const mp_value *v) {
    return dn_is_f32(v) || (v && mp_shape_known(v) &&
                            (v->dtype == MP_DT_FLOAT16 || v->dtype == MP_DT_BFLOAT16) && dn_is_const_in(g, v));
}
/* Constant at plan time as far as the graph tells: an initializer, a
 * Constant node's output, or contents the inference worked out. */
bool dn_is_const_in(const mp_graph *g, const mp_value *v) {
    return v && mp_value_const(g, (int)(v - g->values));
}
const char *dn_pd_impl(const_dnnl_primitive_desc_t pd) {
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) return "";
    return strncmp(impl, "x64:", 4) == 0 ? impl + 4 : impl; /* "x64:gemm:jit" */
}

bool dn_pd_is_ref(const_dnnl_primitive_desc_t pd) {
    return strncmp(dn_pd_impl(pd), "ref", 3) == 0;
}

bool dn_same_dims(const mp_value *a, int rank, const int64_t *dims) {
    if (a->rank != rank) return false;
    for (int i = 0; i < rank; i++)
        if (a->dims[i] != dims[i]) return false;
    return true;
}
bool dn_is_op(const mp_node *n, const char *op) {
    return (n->domain[0] == 0 || mp_streq(n->domain, "ai.onnx")) && mp_streq(n->op, op);
}
/* The patterns of g (src/analyze/patterns.h) and what node n is in them. */
mp_pref dn_pattern_at(const mp_graph *g, const mp_node *n, const mp_patterns **pp) {
    const mp_patterns *p = mp_patterns_of(g);
    if (pp) *pp = p;
    if (!p) {
        mp_error_clear(); /* out of memory: no pattern runs fused */
        return (mp_pref){MP_PAT_NONE, -1, 0};
    }
    return mp_pattern_at(p, (int)(n - g->nodes));
}

int64_t dn_numel_of(int rank, const int64_t *dims) {
    int64_t p = 1;
    for (int i = 0; i < rank; i++) p *= dims[i];
    return p;
}

/* Plain row-major memory descriptor (rank 0 is [1]). */
dnnl_status_t dn_md_plain(dnnl_memory_desc_t *md, int rank, const int64_t *dims) {
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
dnnl_status_t dn_md_plain_pad(dnnl_memory_desc_t *md, int rank, int r0, const int64_t *d0) {
    int64_t d[DNNL_MAX_NDIMS];
    int off = rank - r0;
    for (int i = 0; i < rank; i++) d[i] = i < off ? 1 : d0[i - off];
    return dn_md_plain(md, rank, d);
}
/* Channels-last (NHWC, NDHWC, NWC): the layout activations take between
 * oneDNN kernels. */
dnnl_status_t dn_md_nhwc(dnnl_memory_desc_t *md, int rank, const int64_t *dims) {
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
dnnl_status_t dn_md_any(dnnl_memory_desc_t *md, int rank, const int64_t *dims) {
    dnnl_dims_t d;
    for (int i = 0; i < rank; i++) d[i] = dims[i];
    return dnnl_memory_desc_init_by_tag(md, rank, d, dnnl_f32, dnnl_format_tag_any);
}

/* --------------------------------------------------------------- the table */

static const mp_kernel k_conv = {"onednn:conv", dn_conv_prepare, dn_dk_run, dn_dk_release};
static const mp_kernel k_convt = {"onednn:deconv", dn_convt_prepare, dn_dk_run, dn_dk_release};
static const mp_kernel k_matmul = {"onednn:matmul", dn_matmul_prepare, dn_dk_run, dn_dk_release};
static const mp_kernel k_gemm = {"onednn:gemm", dn_gemm_prepare, dn_dk_run, dn_dk_release};
static const mp_kernel k_gemm_dyn = {"onednn:sgemm", dn_gemm_dyn_prepare, dn_gemm_dyn_run, NULL};
static const mp_kernel k_conv_dyn = {"onednn:sgemm-conv", dn_conv_dyn_prepare, dn_conv_dyn_run, NULL};
static const mp_kernel k_convt_dyn = {"onednn:sgemm-convtranspose", dn_convt_dyn_prepare, dn_convt_dyn_run, NULL};
static const mp_kernel k_pool = {"onednn:pool", dn_pool_prepare, dn_dk_run, dn_dk_release};
static const mp_kernel k_concat = {"onednn:concat", dn_concat_prepare, dn_dk_run, dn_dk_release};
static const mp_kernel k_einsum = {"onednn:matmul", dn_einsum_prepare, dn_dk_run, dn_dk_release};
static const mp_kernel k_softmax = {"onednn:softmax", dn_softmax_prepare, dn_dk_run, dn_dk_release};
static const mp_kernel k_layernorm = {"onednn:layernorm", dn_layernorm_prepare, dn_dk_run, dn_dk_release};
static const mp_kernel k_batchnorm = {"onednn:batchnorm", dn_batchnorm_prepare, dn_dk_run, dn_dk_release};
static const mp_kernel k_eltwise = {"onednn:eltwise", dn_eltwise_prepare, dn_dk_run, dn_dk_release};
static const mp_kernel k_binary = {"onednn:binary", dn_binary_prepare, dn_dk_run, dn_dk_release};
static const mp_kernel k_gelu = {"onednn:gelu", dn_gelu_prepare, dn_dk_run, dn_dk_release};
static const mp_kernel k_lnorm = {"onednn:layernorm", dn_lnorm_prepare, dn_dk_run, dn_dk_release};
static const mp_kernel k_attn = {"onednn:attention", dn_attn_prepare, dn_attn_run, dn_attn_release};
static const mp_kernel k_transpose = {"onednn:reorder", dn_transpose_prepare, dn_dk_run, dn_dk_release};

/* A node whose float activations are fp16 or bf16 gets the kernel it would
 * get in fp32, run between conversions (dnnl_half.c). */
const mp_kernel *mp_dnnl_kernel(const mp_graph *g, const mp_node *n) {
    if (!g || !n || !n->op || !n->domain || !mp_dnnl_available()) return NULL;
    if (n->domain[0] && !mp_streq(n->domain, "ai.onnx")) return NULL;
    const mp_kernel *kern = dn_fp32_kernel(g, n);
    return kern ? kern : dn_half_kernel(g, n);
}

/* The kernel for n's dtypes and shapes as they are (fp32 activations, or
 * 16-bit ones under dn_half_mode). */
const mp_kernel *dn_fp32_kernel(const mp_graph *g, const mp_node *n) {
    const char *op = n->op;
    if (mp_streq(op, "LSTM") || mp_streq(op, "GRU") || mp_streq(op, "RNN")) return mp_dnnl_rnn_kernel(g, n);
    bool swap;
    /* a GELU written out runs whole on its first node (patterns.c) */
    if (dn_gelu_head(g, n) && dn_binary_ok(g, n, &swap)) return &k_gelu;
    switch (op[0]) {
    case 'A':
        if (mp_streq(op, "AveragePool")) return dn_pool_ok(g, n) ? &k_pool : NULL;
        break;
    case 'B':
        if (mp_streq(op, "BatchNormalization")) return dn_batchnorm_ok(g, n) ? &k_batchnorm : NULL;
        break;
    case 'C':
        if (mp_streq(op, "Concat")) return dn_concat_ok(g, n) ? &k_concat : NULL;
        if (mp_streq(op, "Conv")) return dn_conv_ok(g, n, false) ? &k_conv : dn_conv_dyn_ok(g, n) ? &k_conv_dyn : NULL;
        if (mp_streq(op, "ConvTranspose"))
            return dn_conv_ok(g, n, true) ? &k_convt : dn_convt_dyn_ok(g, n) ? &k_convt_dyn : NULL;
        break;
    case 'E':
        if (mp_streq(op, "Einsum")) return dn_einsum_ok(g, n) ? &k_einsum : NULL;
        break;
    case 'G':
        if (mp_streq(op, "Gemm")) return dn_gemm_ok(g, n) ? &k_gemm : dn_gemm_dyn_ok(g, n) ? &k_gemm_dyn : NULL;
        if (mp_streq(op, "GlobalAveragePool") || mp_streq(op, "GlobalMaxPool"))
            return dn_pool_ok(g, n) ? &k_pool : NULL;
        break;
    case 'L':
        if (mp_streq(op, "LayerNormalization")) return dn_layernorm_ok(g, n) ? &k_layernorm : NULL;
        if (mp_streq(op, "LogSoftmax")) return dn_softmax_ok(g, n) ? &k_softmax : NULL;
        break;
    case 'M': {
        if (mp_streq(op, "MatMul")) {
            attnpat ap;
            if (!dn_matmul_ok(g, n)) return NULL;
            return dn_attn_pattern(g, n, &ap) ? &k_attn : &k_matmul;
        }
        if (mp_streq(op, "MaxPool")) return dn_pool_ok(g, n) ? &k_pool : NULL;
        break;
    }
    case 'R': {
        lnpat lp;
        if (mp_streq(op, "ReduceMean") && dn_ln_pattern(g, n, &lp)) return &k_lnorm;
        if ((mp_streq(op, "ReduceMean") || mp_streq(op, "ReduceMax")) && dn_pool_ok(g, n)) return &k_pool;
        break;
    }
    case 'S':
        if (mp_streq(op, "Softmax")) return dn_softmax_ok(g, n) ? &k_softmax : NULL;
        break;
    case 'T':
        if (mp_streq(op, "Transpose")) return dn_transpose_ok(g, n) ? &k_transpose : NULL;
        break;
    default:
        break;
    }
    if (dn_binary_ok(g, n, &swap)) return &k_binary;
    if (dn_eltwise_ok(g, n)) return &k_eltwise;
    return NULL;
}

/* ---- for the recurrent layers' glue (dnnl_rnn.c) ---- */

void *mp_dnnl_sym(const char *name) {
    return mp_dnnl_available() ? dlsym(mp__dl_handle, name) : NULL;
}

bool mp_dnnl_engine(void *eng, void *strm) {
    if (!mp_dnnl_available()) return false;
    pthread_once(&dn_once, dn_engine_init);
    if (dn_init_st != dnnl_success) return false;
    *(dnnl_engine_t *)eng = dn_eng;
    *(dnnl_stream_t *)strm = dn_strm;
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
    if ((ds = dn_md_plain(&amd, 2, d)) || (ds = dn_md_plain(&bplain, 2, d)) || (ds = dn_md_any(&bmd, 2, d)) ||
        (ds = dn_md_plain(&cmd, 2, d)))
        return ds;
    dnnl_matmul_desc_t md;
    if ((ds = dnnl_matmul_desc_init(&md, &amd, &bmd, NULL, &cmd))) return ds;
    dnnl_primitive_desc_t pd = NULL, rpd = NULL;
    dnnl_primitive_t rp = NULL;
    dnnl_memory_t braw = NULL;
    if ((ds = dnnl_primitive_desc_create(&pd, &md, NULL, dn_eng, NULL))) return ds;
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (!(ds = dnnl_primitive_create(&pr->p, pd)) &&
        !(ds = dnnl_memory_create(&pr->ma, &amd, dn_eng, (void *)pr->a)) &&
        !(ds = dnnl_memory_create(&pr->mc, &cmd, dn_eng, pr->c)) &&
        !(ds = dnnl_memory_create(&pr->mb, wmd, dn_eng, DNNL_MEMORY_ALLOCATE)) &&
        !(ds = dnnl_memory_create(&braw, &bplain, dn_eng, (void *)pr->b)) &&
        !(ds = dnnl_reorder_primitive_desc_create(&rpd, &bplain, dn_eng, wmd, dn_eng, NULL)) &&
        !(ds = dnnl_primitive_create(&rp, rpd))) {
        dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, braw}, {DNNL_ARG_TO, pr->mb}};
        ds = dnnl_primitive_execute(rp, dn_strm, 2, ra);
        if (!ds) ds = dnnl_stream_wait(dn_strm);
    }
    if (rp) dnnl_primitive_destroy(rp);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (braw) dnnl_memory_destroy(braw);
    dnnl_primitive_desc_destroy(pd);
    return ds;
}

mp_dnnl_probe *mp_dnnl_probe_new(int which, int threads, int s, const float *a, const float *b, float *c) {
    if (!mp_dnnl_available()) return NULL;
    pthread_once(&dn_once, dn_engine_init);
    if (dn_init_st != dnnl_success) return NULL;
    if (which == 2 && !mp_blas_available()) return NULL;
    mp_dnnl_probe *pr = calloc(1, sizeof *pr);
    if (!pr) return NULL;
    pr->which = which;
    pr->s = s;
    pr->a = a;
    pr->b = b;
    pr->c = c;
    dn_set_threads(threads);
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
    dn_set_threads(threads);
    if (pr->which == 1)
        return dnnl_sgemm('N', 'N', s, s, s, 1.0f, pr->a, s, pr->b, s, 0.0f, pr->c, s) == dnnl_success;
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, pr->ma}, {DNNL_ARG_WEIGHTS, pr->mb}, {DNNL_ARG_DST, pr->mc}};
    return dnnl_primitive_execute(pr->p, dn_strm, 3, args) == dnnl_success &&
           dnnl_stream_wait(dn_strm) == dnnl_success;
}
