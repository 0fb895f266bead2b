/* The oneDNN glue (dnnl_int.h): the GEMM chosen per product shape, and the
 * MatMul and Gemm kernels. */
#include "run/dnnl_int.h"
#include "ops/kernel.h"

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
    dn_set_threads(s->threads);
    DN(dnnl_sgemm(s->alt_ta ? 'T' : 'N', s->alt_tb ? 'T' : 'N', s->alt_m, s->alt_n, s->alt_k, s->alt_alpha, A,
                  s->alt_lda, s->alt_b, s->alt_ldb, beta, Y, s->alt_n),
       "sgemm");
    return MP_OK;
}

mp_status dn_gemm_alt_run(mp_kctx *k, dk *s) {
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
 * dn_dk_run sets the run's again: last[] is cleared after). */
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
    DN(dnnl_primitive_execute(s->prim, dn_strm, s->n, s->ex), "execute");
    DN(dnnl_stream_wait(dn_strm), "wait");
    return MP_OK;
}

mp_status dn_time_choose(int ncand, mp_status (*call)(void *ctx, int c), void *ctx, int *choice) {
    double t[DN_MAXCAND][DN_ROUNDS + 1];
    mp_status st = MP_OK;
    *choice = 0;
    if (ncand > DN_MAXCAND) ncand = DN_MAXCAND;
    /* one warm-up call each, then rounds alternating the candidates
     * (the order turned each round) */
    for (int r = 0; !st && r <= DN_ROUNDS; r++)
        for (int c0 = 0; c0 < ncand && !st; c0++) {
            int c = (c0 + r) % ncand;
            double t0 = gemm_now();
            st = call(ctx, c);
            t[c][r] = gemm_now() - t0;
        }
    if (st) return st;
    /* each candidate against the incumbent in the same round (another
     * job slowing a round slows both); another wins only when clearly
     * faster: by 10% (a shared machine's noise between two calls) in 4
     * rounds of 5 */
    double best_ratio = 0.90;
    for (int c = 1; c < ncand; c++) {
        double q[DN_ROUNDS];
        for (int r = 0; r < DN_ROUNDS; r++) q[r] = t[c][r + 1] / (t[0][r + 1] > 0 ? t[0][r + 1] : 1e-9);
        for (int i = 1; i < DN_ROUNDS; i++) /* insertion sort: 5 values */
            for (int j = i; j > 0 && q[j - 1] > q[j]; j--) {
                double x = q[j];
                q[j] = q[j - 1];
                q[j - 1] = x;
            }
        /* faster in 4 rounds of 5 (the 4th smallest ratio): a candidate
         * that wins only while a burst of load lasts stays out */
        if (q[DN_ROUNDS - 2] < best_ratio) {
            best_ratio = q[DN_ROUNDS - 2];
            *choice = c;
        }
    }
    return MP_OK;
}

typedef struct gemm_time_ctx {
    mp_kctx *k;
    dk *s;
    float *A, *Y;
    void *scr;
    void *const *ins;
    const float *const *add;
} gemm_time_ctx;

static mp_status gemm_time_call(void *ctx, int c) {
    gemm_time_ctx *tc = ctx;
    return c == GEMM_PRIM ? gemm_prim_call(tc->k, tc->s, tc->A, tc->Y, tc->scr, tc->ins)
                          : gemm_lib(tc->k, tc->s, c, tc->A, tc->Y, tc->add);
}

/* What gemm_choose needs from dn_matmul_prepare / dn_gemm_prepare. */
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
    return strncmp(dn_pd_impl(pd), "gemm", 4) == 0;
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
            dn_md_plain(&pl, md->ndims, md->dims) != dnnl_success || !dnnl_memory_desc_equal(&pl, md)) {
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
        gemm_time_ctx tc = {k, s, A, Y, scr, ins, add};
        choice = GEMM_PRIM;
        if (ok) st = dn_time_choose(blas ? 3 : 2, gemm_time_call, &tc, &choice);
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

bool dn_matmul_ok(const mp_graph *g, const mp_node *n) {
    const mp_value *a = dn_gval(g, n, 0), *b = dn_gval(g, n, 1), *y = dn_gout(g, n, 0);
    if (!dn_is_f32(a) || !dn_is_wt(g, b) || !dn_is_f32(y)) return false;
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
    mp_status st = dn_chain_attr(k, ch, attr);
    dnnl_matmul_desc_t md;
    dnnl_status_t ds = st ? dnnl_success : dnnl_matmul_desc_init(&md, amd, bmd, NULL, ymd);
    if (st || ds) {
        dnnl_primitive_attr_destroy(attr);
        return st ? st : dn_dfail(k, ds, "memory descriptor");
    }
    ds = dnnl_primitive_desc_create(pd, &md, attr, dn_eng, NULL);
    dnnl_memory_desc_t bpad;
    if (ds == dnnl_success && bdat && pd_is_gemm(*pd) &&
        gemm_padded_weights(dnnl_primitive_desc_query_md(*pd, dnnl_query_weights_md, 0), &bpad)) {
        /* the same product on weights with padded rows: kept when oneDNN
         * makes it (it has so far), else the plain one stays */
        dnnl_primitive_desc_t pd2 = NULL;
        if (dnnl_matmul_desc_init(&md, amd, &bpad, NULL, ymd) == dnnl_success &&
            dnnl_primitive_desc_create(&pd2, &md, attr, dn_eng, NULL) == dnnl_success) {
            dnnl_primitive_desc_destroy(*pd);
            *pd = pd2;
            __atomic_add_fetch(&g_padded_products, 1, __ATOMIC_RELAXED);
        }
    }
    dn_attr_done(attr, ch);
    if (ds != dnnl_success) {
        *pd = NULL;
        return dn_dfail(k, ds, "primitive descriptor");
    }
    st = dn_dk_arg(k, s, DNNL_ARG_SRC, amd, FROM_IN, 0, NULL);
    if (!st) st = dn_dk_arg(k, s, DNNL_ARG_DST, ymd, FROM_OUT, 0, NULL);
    if (!st) {
        if (bdat) {
            s->wown = s->n_own;
            st = dn_bind_reordered(k, s, DNNL_ARG_WEIGHTS, bplain, bdat,
                                dnnl_primitive_desc_query_md(*pd, dnnl_query_weights_md, 0));
        }
        else st = dn_dk_arg(k, s, DNNL_ARG_WEIGHTS, bplain, FROM_IN, 1, NULL);
    }
    return st;
}

/* The rest MatMul and Gemm share once their descriptors and post-op
 * chain are made: B's layout (any, for a constant bdat; else bplain), the
 * primitive with the output scale alpha (Gemm's; 1: none), the
 * first binary post-op's operand when cmd is set (Gemm's C: from cown,
 * else input 2), the chain's operands, and with d set the choice of a
 * GEMM library for the 2-D product d describes. brank, bdims: B's shape.
 * Consumes ch's post-ops on every path. */
static mp_status matmul_make(mp_kctx *k, dk *s, const dnnl_memory_desc_t *amd,
                             const dnnl_memory_desc_t *bplain, const dnnl_memory_desc_t *ymd, int brank,
                             const int64_t *bdims, const float *bdat, float alpha,
                             const dnnl_memory_desc_t *cmd, const float *cown, chain *ch, gemm_desc *d,
                             size_t *scratch) {
    mp_status st;
    dnnl_memory_desc_t bmd;
    dnnl_status_t ds = dnnl_success;
    if (bdat) ds = dn_md_any(&bmd, brank, bdims);
    else bmd = *bplain;
    if (ds) goto dfail_;
    dnnl_primitive_attr_t attr;
    if ((st = dn_attr_new(k, &attr))) goto fail;
    if (alpha != 1.0f && (ds = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha))) {
        dnnl_primitive_attr_destroy(attr);
        goto dfail_;
    }
    dnnl_primitive_desc_t pd = NULL;
    st = matmul_pd_bind(k, s, amd, &bmd, bplain, ymd, bdat, attr, ch, &pd);
    if (!pd) goto fail;
    if (!st && cmd) {
        int arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1;
        if (cown) st = dn_dk_arg(k, s, arg, cmd, FROM_OWN, 0, (void *)cown);
        else st = dn_dk_arg(k, s, arg, cmd, FROM_IN, 2, NULL);
    }
    if (!st) st = dn_chain_bind(k, s, ch);
    if (!st) st = dn_dk_finish(k, s, pd, scratch);
    bool jit_gemm = pd_is_gemm(pd);
    dnnl_primitive_desc_destroy(pd);
    if (!st && d) {
        d->jit_gemm = jit_gemm;
        gemm_desc_chain(k, ch, d->nadd, d);
        st = gemm_choose(k, s, d, scratch ? *scratch : 0);
    }
    return st;
dfail_:
    st = dn_dfail(k, ds, "memory descriptor");
fail:
    if (ch->po) dnnl_post_ops_destroy(ch->po);
    return st;
}

mp_status dn_matmul_prepare(mp_kctx *k, size_t *scratch) {
    const mp_graph *g = k->g;
    const mp_node *n = k->n;
    const mp_value *a = dn_gval(g, n, 0), *b = dn_gval(g, n, 1), *y = dn_gout(g, n, 0);
    dk *s;
    mp_status st = dn_dk_new(k, &s);
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
        xa[0] = dn_numel_of(ar - 1, ad);
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
    if ((st = dn_const_f32(k, s, 1, &bdat))) return st;
    chain ch;
    if ((st = dn_chain_init(k, &ch))) return st;
    ch.fold2d = fold && y->rank > 2;
    dnnl_memory_desc_t amd, bplain, ymd, bany;
    dnnl_status_t ds;
    if ((ds = dn_md_plain(&amd, rr, xa)) || (ds = dn_md_plain(&bplain, rr, xb)) || (ds = dn_md_plain(&ymd, rr, xy)))
        goto dfail_;
    if (rr > 2 && y->rank == rr) {
        /* a batched product: each binary post-op asked first (chain.probe_a) */
        if (bdat && (ds = dn_md_any(&bany, rr, xb))) goto dfail_;
        ch.probe_a = &amd, ch.probe_b = bdat ? &bany : &bplain, ch.probe_y = &ymd;
    }
    /* post-ops see the output as the graph has it, unless folded */
    if (y->rank >= 1) {
        if ((st = dn_absorb_chain(k, n->out[0], y->rank, y->dims, false, &ch))) goto fail;
    }
    ch.probe_a = ch.probe_b = ch.probe_y = NULL;
    gemm_desc d = {.m = xa[0], .n = N, .k = K, .alpha = 1.0f, .b = bdat, .ok = true};
    return matmul_make(k, s, &amd, &bplain, &ymd, rr, xb, bdat, 1.0f, NULL, NULL, &ch,
                       rr == 2 && bdat ? &d : NULL, scratch);
dfail_:
    st = dn_dfail(k, ds, "memory descriptor");
fail:
    if (ch.po) dnnl_post_ops_destroy(ch.po);
    return st;
}

bool dn_gemm_ok(const mp_graph *g, const mp_node *n) {
    const mp_value *a = dn_gval(g, n, 0), *b = dn_gval(g, n, 1), *c = dn_gval(g, n, 2), *y = dn_gout(g, n, 0);
    if (!dn_is_f32(a) || !dn_is_wt(g, b) || !dn_is_f32(y) || a->rank != 2 || b->rank != 2 || y->rank != 2) return false;
    if (c) {
        if (!dn_is_wt(g, c) || c->rank > 2 || !dn_fits_into(c, 2, y->dims)) return false;
        double beta = mp_attr_f(n, "beta", 1.0);
        if (beta != 1.0 && !dn_is_const_in(g, c)) return false;
    }
    return mp_value_numel(a) > 0 && mp_value_numel(b) > 0;
}

/* An Einsum that is a batched matrix product (mp_einsum_bmm_of: MaxViT's
 * attention written as "B G H I D, B G H J D -> B G H I J"), fp32: one
 * oneDNN matmul over [batch, m, k] x [batch, k, n], a swapped operand read
 * through its strides. The portable kernel packed each operand and ran
 * its own GEMM (MaxViT-T: 44 Einsums, 90 ms of a 190 ms pass). */
bool dn_einsum_ok(const mp_graph *g, const mp_node *n) {
    mp_einsum_bmm e;
    const mp_value *a = dn_gval(g, n, 0), *b = dn_gval(g, n, 1), *y = dn_gout(g, n, 0);
    return dn_is_f32(a) && dn_is_f32(b) && dn_is_f32(y) && mp_einsum_bmm_of(g, n, &e);
}

mp_status dn_einsum_prepare(mp_kctx *k, size_t *scratch) {
    mp_einsum_bmm e;
    if (!mp_einsum_bmm_of(k->g, k->n, &e))
        return mp_error(MP_ERR_UNSUPPORTED, "node %s (Einsum): not a batched matrix product", k->n->name);
    dk *s;
    mp_status st = dn_dk_new(k, &s);
    if (st) return st;
    chain ch;
    if ((st = dn_chain_init(k, &ch))) return st;
    int64_t B = e.batch, M = e.m, N = e.n, K = e.k;
    dnnl_dims_t da = {B, M, K}, db = {B, K, N}, dy = {B, M, N};
    dnnl_dims_t sa = {M * K, e.ta ? 1 : K, e.ta ? M : 1}, sb = {K * N, e.tb ? 1 : N, e.tb ? K : 1};
    dnnl_dims_t sy = {M * N, N, 1};
    dnnl_memory_desc_t amd, bmd, ymd;
    dnnl_status_t ds;
    if ((ds = dnnl_memory_desc_init_by_strides(&amd, 3, da, dnnl_f32, sa)) ||
        (ds = dnnl_memory_desc_init_by_strides(&bmd, 3, db, dnnl_f32, sb)) ||
        (ds = dnnl_memory_desc_init_by_strides(&ymd, 3, dy, dnnl_f32, sy))) {
        if (ch.po) dnnl_post_ops_destroy(ch.po);
        return dn_dfail(k, ds, "memory descriptor");
    }
    return matmul_make(k, s, &amd, &bmd, &ymd, 3, (int64_t[]){B, K, N}, NULL, 1.0f, NULL, NULL, &ch, NULL, scratch);
}

/* A Gemm whose rows are known only at run time (M from the data: the
 * boxes a detector kept before its box head), fp32 with constant fp32 B
 * and C: no primitive can be made at plan time, so each run calls
 * dnnl_sgemm with the run's M (Y = beta C broadcast, then Y += alpha
 * op(A) op(B)). */
bool dn_gemm_dyn_ok(const mp_graph *g, const mp_node *n) {
    const mp_value *a = dn_gval(g, n, 0), *b = dn_gval(g, n, 1), *c = dn_gval(g, n, 2), *y = dn_gout(g, n, 0);
    if (!a || !b || !y || a->dtype != MP_DT_FLOAT || b->dtype != MP_DT_FLOAT || y->dtype != MP_DT_FLOAT) return false;
    if (a->rank != 2 || b->rank != 2 || y->rank != 2 || !dn_is_const_in(g, b) || !mp_shape_known(b)) return false;
    if (c && (c->dtype != MP_DT_FLOAT || !dn_is_const_in(g, c) || !mp_shape_known(c) || c->rank > 2)) return false;
    return mp_value_numel(b) > 0;
}

mp_status dn_gemm_dyn_prepare(mp_kctx *k, size_t *scratch) {
    (void)scratch;
    k->kname = "onednn:sgemm";
    return MP_OK;
}

typedef struct gemm_bias {
    float *y;
    const float *c;
    int64_t n, cr, cc;
    float beta;
} gemm_bias;

static void gemm_bias_rows(void *arg, int64_t lo, int64_t hi) {
    const gemm_bias *b = arg;
    for (int64_t r = lo; r < hi; r++) {
        float *y = b->y + r * b->n;
        const float *c = b->c + (b->cr == 1 ? 0 : r * b->cc);
        for (int64_t j = 0; j < b->n; j++) y[j] = b->beta * c[b->cc == 1 ? 0 : j];
    }
}

mp_status dn_gemm_dyn_run(mp_kctx *k) {
    const mp_rtensor *a = &k->in[0], *b = &k->in[1], *c = k->n_in > 2 && k->in[2].data ? &k->in[2] : NULL;
    mp_rtensor *y = &k->out[0];
    bool ta = mp_attr_i(k->n, "transA", 0) != 0, tb = mp_attr_i(k->n, "transB", 0) != 0;
    float alpha = (float)mp_attr_f(k->n, "alpha", 1.0), beta = (float)mp_attr_f(k->n, "beta", 1.0);
    if (a->rank != 2 || b->rank != 2 || y->rank != 2)
        return mp_error(MP_ERR_SHAPE, "node %s (Gemm): A and B must be 2-D", k->n->name);
    int64_t M = y->dims[0], N = y->dims[1], K = ta ? a->dims[0] : a->dims[1];
    if ((ta ? a->dims[1] : a->dims[0]) != M || (tb ? b->dims[1] : b->dims[0]) != K || (tb ? b->dims[0] : b->dims[1]) != N)
        return mp_error(MP_ERR_SHAPE, "node %s (Gemm): A [%lld, %lld] and B [%lld, %lld] do not multiply to [%lld, %lld]",
                        k->n->name, (long long)a->dims[0], (long long)a->dims[1], (long long)b->dims[0],
                        (long long)b->dims[1], (long long)M, (long long)N);
    if (M == 0 || N == 0) return MP_OK;
    if (!a->data || !b->data || !y->data)
        return mp_error(MP_ERR_USAGE, "node %s (Gemm): a buffer the product needs is missing", k->n->name);
    float gbeta = 0.0f;
    if (c) {
        int64_t cr = c->rank == 2 ? c->dims[0] : 1, cc = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
        if ((cr != 1 && cr != M) || (cc != 1 && cc != N))
            return mp_error(MP_ERR_SHAPE, "node %s (Gemm): C does not broadcast to [%lld, %lld]", k->n->name,
                            (long long)M, (long long)N);
        gemm_bias gb = {y->data, c->data, N, cr, cc, beta};
        if (k->threads != 1 && M * N >= 16384) mp_kparallel(k, M, gemm_bias_rows, &gb);
        else gemm_bias_rows(&gb, 0, M);
        gbeta = 1.0f;
    }
    if (K == 0) {
        if (!c) memset(y->data, 0, (size_t)(M * N) * sizeof(float));
        return MP_OK;
    }
    dn_set_threads(k->threads > 0 ? k->threads : omp_get_max_threads());
    DN(dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, a->data, ta ? M : K, b->data, tb ? K : N, gbeta,
                  y->data, N),
       "sgemm");
    return MP_OK;
}

/* A Conv whose input shape only the run knows (a mask head's batch is the
 * detections kept), fp32 with constant fp32 weights and bias: per image
 * and group, im2col (the portable kernel's) then dnnl_sgemm with the run's
 * dims and the plan's threads, then the bias; the portable kernel ran the
 * same product on one thread with its own GEMM. */
bool dn_conv_dyn_ok(const mp_graph *g, const mp_node *n) {
    const mp_value *x = dn_gval(g, n, 0), *w = dn_gval(g, n, 1), *b = dn_gval(g, n, 2), *y = dn_gout(g, n, 0);
    if (!x || !w || !y || x->dtype != MP_DT_FLOAT || w->dtype != MP_DT_FLOAT || y->dtype != MP_DT_FLOAT) return false;
    if (x->rank < 3 || x->rank > 5 || w->rank != x->rank || !dn_is_const_in(g, w) || !mp_shape_known(w)) return false;
    if (b && (b->dtype != MP_DT_FLOAT || !dn_is_const_in(g, b) || !mp_shape_known(b))) return false;
    return !mp_shape_known(x) || !mp_shape_known(y);
}

mp_status dn_conv_dyn_prepare(mp_kctx *k, size_t *scratch) {
    (void)scratch;
    k->kname = "onednn:sgemm-conv";
    return MP_OK;
}

static mp_status dn_conv_gemm(void *ctx, int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C) {
    dnnl_status_t ds = dnnl_sgemm('N', 'N', M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
    return ds == dnnl_success ? MP_OK : dn_dfail(ctx, ds, "sgemm");
}

mp_status dn_conv_dyn_run(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *w = &k->in[1], *b = mp_kin(k, 2);
    mp_rtensor *y = &k->out[0];
    mp_kconvg c;
    mp_status st = mp_kconv_geom(k, x, w, b, y, &c);
    if (st) return st;
    if (c.N == 0 || c.M == 0 || c.on == 0) return MP_OK;
    if (!x->data || !w->data || !y->data)
        return mp_error(MP_ERR_USAGE, "node %s (Conv): a buffer the product needs is missing", k->n->name);
    dn_set_threads(k->threads > 0 ? k->threads : omp_get_max_threads());
    return mp_kconv_f32(k, &c, x->data, w->data, b ? b->data : NULL, y->data, dn_conv_gemm, k);
}

/* The same for a ConvTranspose whose shapes only the run knows (a mask
 * head's upsampling): per image and group, the columns W^T x by
 * dnnl_sgemm, then scattered into the output (the portable kernel's
 * geometry and offsets, mp_kconvt_*) over the bias. */
bool dn_convt_dyn_ok(const mp_graph *g, const mp_node *n) { return dn_conv_dyn_ok(g, n); }

mp_status dn_convt_dyn_prepare(mp_kctx *k, size_t *scratch) {
    (void)scratch;
    k->kname = "onednn:sgemm-convtranspose";
    return MP_OK;
}

mp_status dn_convt_dyn_run(mp_kctx *k) {
    const mp_rtensor *x = &k->in[0], *w = &k->in[1], *b = mp_kin(k, 2);
    mp_rtensor *y = &k->out[0];
    mp_kconvt c;
    mp_status st = mp_kconvt_geom(k, &c);
    if (st) return st;
    if (c.N == 0 || c.M == 0 || c.on == 0) return MP_OK;
    if (!x->data || !w->data || !y->data)
        return mp_error(MP_ERR_USAGE, "node %s (ConvTranspose): a buffer the product needs is missing", k->n->name);
    int64_t *off = mp_kconvt_offsets(&c);
    float *col = malloc(sizeof(float) * (size_t)(c.mg * c.kn * c.in_n + 1));
    if (!off || !col) {
        free(off), free(col);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    dn_set_threads(k->threads > 0 ? k->threads : omp_get_max_threads());
    int64_t rows = c.mg * c.kn, cols = c.kn * c.in_n;
    for (int64_t n = 0; n < c.N && !st; n++)
        for (int64_t g = 0; g < c.G && !st; g++) {
            const float *xs = (const float *)x->data + (n * c.C + g * c.cg) * c.in_n;
            const float *wg = (const float *)w->data + g * c.cg * rows;
            dnnl_status_t ds = dnnl_sgemm('T', 'N', rows, c.in_n, c.cg, 1.0f, wg, rows, xs, c.in_n, 0.0f, col, c.in_n);
            if (ds != dnnl_success) {
                st = dn_dfail(k, ds, "sgemm");
                break;
            }
            float *ys = (float *)y->data + (n * c.M + g * c.mg) * c.on;
            for (int64_t m = 0; m < c.mg; m++) {
                float bv = b ? ((const float *)b->data)[g * c.mg + m] : 0.0f;
                float *ym = ys + m * c.on;
                const float *cm = col + m * cols;
                for (int64_t j = 0; j < c.on; j++) ym[j] = bv;
                for (int64_t e = 0; e < cols; e++)
                    if (off[e] >= 0) ym[off[e]] += cm[e];
            }
        }
    free(off), free(col);
    return st;
}

mp_status dn_gemm_prepare(mp_kctx *k, size_t *scratch) {
    const mp_graph *g = k->g;
    const mp_node *n = k->n;
    const mp_value *a = dn_gval(g, n, 0), *c = dn_gval(g, n, 2), *y = dn_gout(g, n, 0);
    bool ta = mp_attr_i(n, "transA", 0) != 0, tb = mp_attr_i(n, "transB", 0) != 0;
    float alpha = (float)mp_attr_f(n, "alpha", 1.0), beta = (float)mp_attr_f(n, "beta", 1.0);
    int64_t M = y->dims[0], N = y->dims[1], K = ta ? a->dims[0] : a->dims[1];
    dk *s;
    mp_status st = dn_dk_new(k, &s);
    if (st) return st;
    const float *bdat = NULL, *cdat = NULL;
    if ((st = dn_const_f32(k, s, 1, &bdat))) return st;
    if (c && (st = dn_const_f32(k, s, 2, &cdat))) return st;
    dnnl_memory_desc_t amd, bplain, ymd, cmd;
    dnnl_dims_t dA = {M, K}, sA = {ta ? 1 : K, ta ? M : 1};
    dnnl_dims_t dB = {K, N}, sB = {tb ? 1 : N, tb ? K : 1};
    dnnl_status_t ds;
    chain ch;
    if ((st = dn_chain_init(k, &ch))) return st;
    /* alpha*A*B, then + beta*C as the first binary post-op */
    float *cs = NULL;
    if (c) {
        if ((ds = dn_md_plain_pad(&cmd, 2, c->rank, c->dims))) goto dfail_;
        if (cdat && beta != 1.0f) {
            cs = dn_dk_alloc_own(s, (size_t)mp_value_numel(c) * sizeof(float));
            if (!cs) { st = mp_error(MP_ERR_NOMEM, "node %s: out of memory", n->name); goto fail; }
            for (int64_t i = 0; i < mp_value_numel(c); i++) cs[i] = beta * cdat[i];
        }
        if (beta != 0.0f) {
            if ((ds = dnnl_post_ops_append_binary(ch.po, dnnl_binary_add, &cmd))) goto dfail_;
            ch.n_po++;
        }
    }
    if ((st = dn_absorb_chain(k, n->out[0], 2, y->dims, false, &ch))) goto fail;
    if ((ds = dnnl_memory_desc_init_by_strides(&amd, 2, dA, dnnl_f32, sA)) ||
        (ds = dnnl_memory_desc_init_by_strides(&bplain, 2, dB, dnnl_f32, sB)) ||
        (ds = dn_md_plain(&ymd, 2, y->dims)))
        goto dfail_;
    gemm_desc d = {.ta = ta, .tb = tb, .m = M, .n = N, .k = K, .alpha = alpha, .b = bdat, .ok = true};
    bool add_c = c && beta != 0.0f;
    if (add_c) {
        int64_t cn = mp_value_numel(c);
        d.add_row[0] = cn == N && c->rank >= 1 && c->dims[c->rank - 1] == N;
        if (!d.add_row[0] && cn != M * N) d.ok = false;
        d.add_in[0] = cs || cdat ? -1 : 2;
        d.add_own[0] = cs ? cs : cdat;
        d.nadd = 1;
    }
    return matmul_make(k, s, &amd, &bplain, &ymd, 2, (int64_t[]){K, N}, bdat, alpha,
                       add_c ? &cmd : NULL, cs ? cs : cdat, &ch, bdat ? &d : NULL, scratch);
dfail_:
    st = dn_dfail(k, ds, "memory descriptor");
fail:
    if (ch.po) dnnl_post_ops_destroy(ch.po);
    return st;
}