/* The planner and executor (src/run/), driven with a few small kernels
 * defined here (the real ones live beside each operator and in the oneDNN
 * glue): folding, fusion, the arena, data-dependent outputs, threads,
 * inputs, timing and the memory limit. */
#include "pbw.h"
#include "run/run.h"
#include "tbuild.h"
#include "tcli.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- test kernels ---- */
static int t_runs; /* kernel calls, to see what was folded */

static mp_status tk_add(mp_kctx *k) {
    t_runs++;
    const float *a = k->in[0].data, *b = k->in[1].data;
    float *y = k->out[0].data;
    int64_t n = k->out[0].numel, nb = k->in[1].numel;
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i % nb];
    return MP_OK;
}

/* Add that absorbs a following Relu (its state remembers it) */
static mp_status tk_add_fuse_prepare(mp_kctx *k, size_t *scratch) {
    *scratch = 128;
    const mp_graph *g = k->g;
    int v = k->n->out[0];
    for (int j = 0; j < g->n_nodes; j++) {
        const mp_node *c = &g->nodes[j];
        if (c->n_in == 1 && c->in[0] == v && strcmp(c->op, "Relu") == 0 && mp_kfuse(k, j) == MP_OK) {
            int *st = malloc(sizeof *st);
            *st = 1;
            k->state = st;
        }
    }
    return MP_OK;
}

static mp_status tk_add_fuse(mp_kctx *k) {
    mp_status st = tk_add(k);
    T_CHECK(k->scratch != NULL && ((uintptr_t)k->scratch % 64) == 0);
    if (k->state) {
        float *y = k->out[0].data;
        for (int64_t i = 0; i < k->out[0].numel; i++) y[i] = y[i] > 0 ? y[i] : 0;
    }
    return st;
}

static void tk_release(void *s) { free(s); }

static mp_status tk_relu(mp_kctx *k) {
    t_runs++;
    const float *x = k->in[0].data;
    float *y = k->out[0].data;
    for (int64_t i = 0; i < k->out[0].numel; i++) y[i] = x[i] > 0 ? x[i] : 0;
    return MP_OK;
}

static void tk_neg_range(void *arg, int64_t lo, int64_t hi) {
    mp_kctx *k = arg;
    const float *x = k->in[0].data;
    float *y = k->out[0].data;
    for (int64_t i = lo; i < hi; i++) y[i] = -x[i];
}

static mp_status tk_neg(mp_kctx *k) {
    t_runs++;
    mp_kparallel(k, k->out[0].numel, tk_neg_range, k);
    return MP_OK;
}

/* NonZero of a 1-D float: int64 [1, count] */
static mp_status tk_nonzero(mp_kctx *k) {
    t_runs++;
    const float *x = k->in[0].data;
    int64_t c = 0;
    for (int64_t i = 0; i < k->in[0].numel; i++) c += x[i] != 0;
    int64_t dims[2] = {1, c};
    mp_status st = mp_kout_alloc(k, 0, 2, dims);
    if (st) return st;
    int64_t *y = k->out[0].data, j = 0;
    for (int64_t i = 0; i < k->in[0].numel; i++)
        if (x[i] != 0) y[j++] = i;
    return MP_OK;
}

static mp_status tk_transpose2(mp_kctx *k) { /* 2-D int64, output sized by the executor */
    t_runs++;
    if (!k->out[0].data) return mp_error(MP_ERR_SHAPE, "output not sized");
    const int64_t *x = k->in[0].data;
    int64_t *y = k->out[0].data, r = k->in[0].dims[0], c = k->in[0].dims[1];
    T_EQ(k->out[0].dims[0], c);
    T_EQ(k->out[0].dims[1], r);
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) y[j * r + i] = x[i * c + j];
    return MP_OK;
}

static mp_status tk_gather(mp_kctx *k) { /* axis 0 of a 2-D float table */
    t_runs++;
    const float *t = k->in[0].data;
    const int64_t *ix = k->in[1].data;
    int64_t rows = k->in[0].dims[0], w = k->in[0].dims[1];
    float *y = k->out[0].data;
    for (int64_t i = 0; i < k->in[1].numel; i++) {
        if (ix[i] < 0 || ix[i] >= rows) return mp_error(MP_ERR_SHAPE, "index %lld out of range", (long long)ix[i]);
        memcpy(y + i * w, t + ix[i] * w, sizeof(float) * (size_t)w);
    }
    return MP_OK;
}

static float t_f32[8];
static mp_status tk_gather_f16(mp_kctx *k) { /* rows of an fp16 table through mp_kinput_f32 */
    const float *t = mp_kinput_f32(k, 0);
    if (!t) return mp_error(MP_ERR_USAGE, "no fp32 view");
    T_CHECK(mp_kinput_f32(k, 0) == t); /* decoded once */
    T_CHECK(mp_kinput_f32(k, 1) == NULL); /* not a constant float */
    const int64_t *ix = k->in[1].data;
    int64_t w = k->in[0].dims[1];
    for (int64_t i = 0; i < k->in[1].numel && i < 2; i++)
        for (int64_t j = 0; j < w; j++) t_f32[i * w + j] = t[ix[i] * w + j];
    memset(k->out[0].data, 0, (size_t)k->out[0].numel * 2);
    return MP_OK;
}

/* Give every node of op `name` a descriptor copy with kernel `run`. */
static mp_op t_ops[16];
static int t_nops;
static void t_kernel(mp_model *m, const char *name, mp_run_fn run, mp_prepare_fn prep, mp_release_fn rel) {
    mp_graph *g = m->graph;
    mp_run_portable_only = true;
    for (int k = 0; k < g->n_nodes; k++) {
        mp_node *n = &g->nodes[k];
        if (strcmp(n->op, name) || !n->desc) continue;
        mp_op *o = NULL;
        for (int i = 0; i < t_nops; i++)
            if (strcmp(t_ops[i].name, name) == 0 && t_ops[i].run == run && t_ops[i].prepare == prep)
                o = &t_ops[i]; /* tests may share a process (MP_TEST_INPROC) */
        if (!o && t_nops < 16) {
            o = &t_ops[t_nops++];
            *o = *n->desc;
            o->run = run;
            o->prepare = prep;
            o->release = rel;
        }
        if (o) n->desc = o;
    }
}

static const float *t_out(mp_exec *pl, int i, int64_t *numel) {
    const char *name;
    int dt, rank;
    const int64_t *dims;
    const void *data;
    T_OK(mp_exec_output(pl, i, &name, &dt, &rank, &dims, &data));
    *numel = mp_dims_product(dims, rank);
    return data;
}

/* A plan of p with default options but for the thread count and, where
 * >= 0, the warm-up and timed runs of mp_profile_run (the failure
 * recorded when it cannot be made). */
static mp_exec *t_plan_runs(mp_profile *p, int threads, int warmup, int iters) {
    mp_run_options o;
    mp_run_options_default(&o);
    o.threads = threads;
    if (warmup >= 0) o.warmup = warmup;
    if (iters >= 0) o.iters = iters;
    mp_exec *pl = NULL;
    T_OK(mp_exec_create(p, &o, &pl));
    return pl;
}

static mp_exec *t_plan(mp_profile *p, int threads) { return t_plan_runs(p, threads, -1, -1); }

/* Add(X, C) -> Relu -> Y, fused; a node whose output is known is folded */
static void test_run_fuse_fold(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "X", MP_DT_FLOAT, 2, TB_DIMS(2, 3));
    tb_const_f(m, "C", MP_DT_FLOAT, 1, TB_DIMS(3), (const double[]){1, -2, 0.5});
    tb_node(m, "Add", "X,C", "A");
    tb_node(m, "Relu", "A", "Y");
    tb_node(m, "Shape", "X", "S"); /* known: folded */
    tb_output(m, "Y");
    tb_output(m, "S");
    mp_profile *p = tb_prof(m);
    t_kernel(m, "Add", tk_add_fuse, tk_add_fuse_prepare, tk_release);
    t_kernel(m, "Relu", tk_relu, NULL, NULL);
    mp_run_options o;
    mp_run_options_default(&o);
    o.threads = 1;
    mp_exec *pl = NULL;
    T_OK(mp_exec_create(p, &o, &pl));
    T_EQ(pl->n_steps, 1);
    T_EQ(pl->n_folded, 1);
    T_EQ_STR(pl->steps[0].group, "Add+Relu");
    float x[6] = {-3, 0, 1, 2, 5, -1};
    T_OK(mp_exec_set_input(pl, "X", MP_DT_FLOAT, 2, TB_DIMS(2, 3), x, sizeof x));
    t_runs = 0;
    T_OK(mp_exec_run(pl));
    T_EQ(t_runs, 1);
    int64_t n;
    const float *y = t_out(pl, 0, &n);
    T_EQ(n, 6);
    const float want[6] = {0, 0, 1.5f, 3, 3, 0};
    for (int i = 0; i < 6; i++) T_CHECK(y[i] == want[i]);
    const char *nm;
    int dt, rank;
    const int64_t *dims;
    const void *data;
    T_OK(mp_exec_output(pl, 1, &nm, &dt, &rank, &dims, &data));
    T_EQ(dt, MP_DT_INT64);
    T_EQ(((const int64_t *)data)[0], 2);
    T_EQ(((const int64_t *)data)[1], 3);
    /* wrong shape, dtype, name */
    T_EQ(mp_exec_set_input(pl, "X", MP_DT_FLOAT, 2, TB_DIMS(3, 2), x, sizeof x), MP_ERR_USAGE);
    T_CHECK(strstr(mp_last_error(), "X") != NULL);
    T_EQ(mp_exec_set_input(pl, "X", MP_DT_INT64, 2, TB_DIMS(2, 3), x, sizeof x), MP_ERR_USAGE);
    /* fp64 data for an fp32 input is converted */
    double x64[6] = {-3, 0, 1, 2, 5, -1};
    T_EQ(mp_exec_set_input(pl, "X", MP_DT_DOUBLE, 2, TB_DIMS(2, 3), x64, sizeof x), MP_ERR_USAGE);
    T_OK(mp_exec_set_input(pl, "X", MP_DT_DOUBLE, 2, TB_DIMS(2, 3), x64, sizeof x64));
    T_OK(mp_exec_run(pl));
    y = t_out(pl, 0, &n);
    for (int i = 0; i < 6; i++) T_CHECK(y[i] == want[i]);
    T_EQ(mp_exec_set_input(pl, "Z", MP_DT_FLOAT, 2, TB_DIMS(2, 3), x, sizeof x), MP_ERR_USAGE);
    /* timed runs fill the profile */
    T_OK(mp_profile_run(pl, p));
    T_CHECK(p->measured);
    T_CHECK(p->total.latency_s > 0);
    T_CHECK(p->run.lat_min_s <= p->run.lat_median_s && p->run.lat_median_s <= p->run.lat_p90_s);
    T_EQ(p->node_state[0], MP_NODE_RUN);
    T_EQ(p->node_state[1], MP_NODE_FUSED);
    T_EQ(p->node_head[1], 0);
    T_EQ(p->node_state[2], MP_NODE_FOLDED);
    T_EQ_STR(p->node_group[0], "Add+Relu");
    T_CHECK(p->node_lat[0] > 0 && p->node_lat[1] == 0);
    T_EQ(p->n_groups, 1);
    T_EQ(p->run.fused, 1);
    T_EQ(p->run.folded, 1);
    T_EQ(p->run.iters, 20);
    /* the measured peak says how it was obtained, once per thread count */
    if (p->run.peak_flops_per_s > 0) {
        T_EQ_STR(p->run.peak_source, "measured");
        T_CHECK(p->run.peak_method && strstr(p->run.peak_method, "1024x1024x1024 fp32 GEMM") &&
                strstr(p->run.peak_method, ", 1 thread, best of "));
        const char *how = NULL;
        T_CHECK(mp_run_peak_flops(1, &how) == p->run.peak_flops_per_s);
        T_CHECK(how == p->run.peak_method);
    }
    mp_exec_free(pl);
    /* without fusion: two steps, the same numbers */
    o.fuse = 0;
    T_OK(mp_exec_create(p, &o, &pl));
    T_EQ(pl->n_steps, 2);
    T_OK(mp_exec_set_input(pl, "X", MP_DT_FLOAT, 2, TB_DIMS(2, 3), x, sizeof x));
    T_OK(mp_exec_run(pl));
    y = t_out(pl, 0, &n);
    for (int i = 0; i < 6; i++) T_CHECK(y[i] == want[i]);
    mp_exec_free(pl);
    tb_done(m, p);
}

/* A fused group spanning modules: each node's module gets the node's
 * FLOPs' share of the group's time (Add and Relu: 64 FLOPs each, half
 * each); the other module says where it ran */
static void test_run_fused_modules(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "X", MP_DT_FLOAT, 1, TB_DIMS(64));
    tb_const_f(m, "C", MP_DT_FLOAT, 1, TB_DIMS(1), (const double[]){1});
    int a = tb_node(m, "Add", "X,C", "A");
    int r = tb_node(m, "Relu", "A", "Y");
    tb_output(m, "Y");
    m->graph->nodes[a].module = mp_model_module(m, "blk.add", 7);
    m->graph->nodes[r].module = mp_model_module(m, "blk.act", 7);
    mp_profile *p = tb_prof(m);
    t_kernel(m, "Add", tk_add_fuse, tk_add_fuse_prepare, tk_release);
    t_kernel(m, "Relu", tk_relu, NULL, NULL);
    mp_run_options o;
    mp_run_options_default(&o);
    o.threads = 1;
    o.iters = 3;
    o.peak_gflops = 10;
    mp_exec *pl = NULL;
    T_OK(mp_exec_create(p, &o, &pl));
    T_OK(mp_profile_run(pl, p));
    int ma = tb_nodep(m, a)->module, mr = tb_nodep(m, r)->module;
    T_CHECK(ma != mr && ma > 0 && mr > 0);
    T_CHECK(p->mods[ma].latency_s > 0);
    T_CHECK(p->mods[mr].latency_s == p->mods[ma].latency_s);
    T_CHECK(p->mods[0].latency_s == p->mods[ma].latency_s + p->mods[mr].latency_s);
    T_EQ(p->mod_fused[mr], ma + 1);
    /* the op types too: the Relu row holds the Relu's share, and says it ran fused */
    int oa = mp_profile_node_op(p, a), orl = mp_profile_node_op(p, r);
    T_CHECK(p->ops[oa].fig.latency_s == p->ops[orl].fig.latency_s);
    T_EQ(p->ops[orl].fig.fused, 1);
    T_EQ(p->ops[oa].fig.fused, 0);
    T_EQ(p->modops[p->node_modop[r]].fig.fused, 1);
    T_EQ(p->mods[0].fused, 1);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mp_report_options ro;
    mp_report_options_default(&ro);
    T_OK(mp_report_write(p, &ro, f));
    fclose(f);
    T_CHECK(buf && strstr(buf, "fused into blk.add's kernel") != NULL);
    T_CHECK(buf && strstr(buf, "Add+Relu") != NULL);
    free(buf);
    f = open_memstream(&buf, &len);
    ro.format = MP_FORMAT_JSON;
    T_OK(mp_report_write(p, &ro, f));
    fclose(f);
    T_CHECK(buf && strstr(buf, "\"fused_into\": \"blk.add\"") != NULL);
    if (buf) t_json_dump("profile", buf, len);
    free(buf);
    mp_exec_free(pl);
    tb_done(m, p);
}

/* A chain of Relu/Neg: the arena holds two live buffers, not six; threads */
static void test_run_arena_threads(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "X", MP_DT_FLOAT, 1, TB_DIMS(10000));
    tb_node(m, "Neg", "X", "a");
    tb_node(m, "Relu", "a", "b");
    tb_node(m, "Neg", "b", "c");
    tb_node(m, "Relu", "c", "d");
    tb_node(m, "Neg", "d", "e");
    tb_node(m, "Neg", "e", "Y");
    tb_output(m, "Y");
    mp_profile *p = tb_prof(m);
    t_kernel(m, "Neg", tk_neg, NULL, NULL);
    t_kernel(m, "Relu", tk_relu, NULL, NULL);
    mp_exec *pl = t_plan(p, 2);
    T_EQ(pl->n_steps, 6);
    T_CHECK(pl->arena_bytes <= 2 * 40064);
    T_CHECK(pl->arena_bytes >= 2 * 40000);
    float *x = malloc(sizeof(float) * 10000);
    for (int i = 0; i < 10000; i++) x[i] = (float)(i % 7) - 3;
    T_OK(mp_exec_set_input(pl, "X", MP_DT_FLOAT, 1, TB_DIMS(10000), x, sizeof(float) * 10000));
    T_OK(mp_exec_run(pl));
    int64_t n;
    const float *y = t_out(pl, 0, &n);
    /* -relu(-relu(-x)) negated twice more: relu(relu(-x) negated)... computed plainly */
    for (int i = 0; i < 10000; i++) {
        float a = -x[i], b = a > 0 ? a : 0, c = -b, d = c > 0 ? c : 0, e = -d, w = -e;
        T_CHECK(y[i] == w);
    }
    free(x);
    mp_exec_free(pl);
    tb_done(m, p);
}

/* Reshape and Unsqueeze of an activation share its bytes (no copy): the
 * root lives as long as its last view, so values made after its last
 * direct reader (f, h) cannot take its bytes while a view (b, c) is still
 * read; a Reshape of a graph input copies. */
static void test_run_views(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "X", MP_DT_FLOAT, 2, TB_DIMS(100, 100));
    tb_const_i(m, "shape", MP_DT_INT64, 1, TB_DIMS(1), (const int64_t[]){10000});
    tb_const_i(m, "axes", MP_DT_INT64, 1, TB_DIMS(1), (const int64_t[]){0});
    tb_node(m, "Neg", "X", "a");
    tb_node(m, "Reshape", "a,shape", "b");
    tb_node(m, "Neg", "X", "f");
    tb_node(m, "Neg", "f", "h");
    tb_node(m, "Unsqueeze", "b,axes", "c");
    tb_node(m, "Neg", "c", "d");
    tb_node(m, "Reshape", "X,shape", "xi");
    tb_output(m, "d");
    tb_output(m, "h");
    tb_output(m, "b");
    tb_output(m, "xi");
    mp_profile *p = tb_prof(m);
    t_kernel(m, "Neg", tk_neg, NULL, NULL);
    mp_exec *pl = t_plan(p, 1);
    T_EQ(pl->n_views, 2); /* b and c; xi reads a graph input */
    float *x = malloc(sizeof(float) * 10000);
    for (int i = 0; i < 10000; i++) x[i] = (float)(i % 13) - 6;
    T_OK(mp_exec_set_input(pl, "X", MP_DT_FLOAT, 2, TB_DIMS(100, 100), x, sizeof(float) * 10000));
    for (int rep = 0; rep < 2; rep++) {
        T_OK(mp_exec_run(pl));
        int64_t n[4];
        const float *d = t_out(pl, 0, &n[0]), *h = t_out(pl, 1, &n[1]), *b = t_out(pl, 2, &n[2]),
                    *xi = t_out(pl, 3, &n[3]);
        for (int j = 0; j < 4; j++) T_EQ(n[j], 10000);
        int bad = 0;
        for (int i = 0; i < 10000; i++)
            bad += d[i] != x[i] || h[i] != x[i] || b[i] != -x[i] || xi[i] != x[i];
        T_EQ(bad, 0);
        T_CHECK(xi != x);
    }
    free(x);
    mp_exec_free(pl);
    tb_done(m, p);
}

/* An inference Dropout whose mask nobody reads shares its input's bytes
 * (a view: no copy, no mask filled); one whose mask is read copies */
static void test_run_dropout_view(void) {
    for (int read_mask = 0; read_mask < 2; read_mask++) {
        mp_model *m = tb_new(17);
        tb_input(m, "X", MP_DT_FLOAT, 2, TB_DIMS(100, 100));
        tb_node(m, "Neg", "X", "a");
        tb_node(m, "Dropout", "a", "d,mask");
        tb_node(m, "Neg", "d", "y");
        tb_output(m, "y");
        if (read_mask) tb_output(m, "mask");
        mp_profile *p = tb_prof(m);
        t_kernel(m, "Neg", tk_neg, NULL, NULL);
        mp_exec *pl = t_plan(p, 1);
        if (pl) {
            T_EQ(pl->n_views, read_mask ? 0 : 1);
            float *x = malloc(sizeof(float) * 10000);
            for (int i = 0; i < 10000; i++) x[i] = (float)(i % 7) - 3;
            T_OK(mp_exec_set_input(pl, "X", MP_DT_FLOAT, 2, TB_DIMS(100, 100), x, sizeof(float) * 10000));
            T_OK(mp_exec_run(pl));
            int64_t n = 0;
            const float *y = t_out(pl, 0, &n);
            T_EQ(n, 10000);
            int bad = 0;
            for (int i = 0; y && i < 10000; i++) bad += y[i] != x[i];
            T_EQ(bad, 0);
            free(x);
        }
        mp_exec_free(pl);
        tb_done(m, p);
    }
}

/* NonZero: an output shaped at run time (mp_kout_alloc) */
static void test_run_dynamic(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "X", MP_DT_FLOAT, 1, TB_DIMS(5));
    tb_node(m, "NonZero", "X", "Y");
    tb_output(m, "Y");
    mp_profile *p = tb_prof(m);
    t_kernel(m, "NonZero", tk_nonzero, NULL, NULL);
    mp_exec *pl = t_plan(p, 1);
    float x[5] = {0, 2, 0, 3, 4};
    T_OK(mp_exec_set_input(pl, "X", MP_DT_FLOAT, 1, TB_DIMS(5), x, sizeof x));
    T_OK(mp_exec_run(pl));
    const char *nm;
    int dt, rank;
    const int64_t *dims;
    const void *data;
    T_OK(mp_exec_output(pl, 0, &nm, &dt, &rank, &dims, &data));
    T_EQ(rank, 2);
    T_EQ(dims[1], 3);
    T_EQ(((const int64_t *)data)[2], 4);
    mp_exec_free(pl);
    tb_done(m, p);
}

/* Downstream of a data-dependent shape: sized at run time by the op's
 * own shape rule (the Transpose kernel allocates nothing) */
static void test_run_reinfer(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "X", MP_DT_FLOAT, 1, TB_DIMS(6));
    tb_node(m, "NonZero", "X", "Y");
    tb_node(m, "Transpose", "Y", "Z");
    tb_output(m, "Z");
    mp_profile *p = tb_prof(m);
    T_CHECK(!mp_shape_known(tb_val(m, "Z")));
    t_kernel(m, "NonZero", tk_nonzero, NULL, NULL);
    t_kernel(m, "Transpose", tk_transpose2, NULL, NULL);
    mp_exec *pl = NULL;
    T_OK(mp_exec_create(p, NULL, &pl));
    for (int round = 0; round < 2; round++) { /* the shape changes with the data */
        float x[6] = {0, 1, 0, 2, 3, 0};
        if (round) x[0] = 5;
        T_OK(mp_exec_set_input(pl, "X", MP_DT_FLOAT, 1, TB_DIMS(6), x, sizeof x));
        T_OK(mp_exec_run(pl));
        const char *nm;
        int dt, rank;
        const int64_t *dims;
        const void *data;
        T_OK(mp_exec_output(pl, 0, &nm, &dt, &rank, &dims, &data));
        T_EQ(rank, 2);
        T_EQ(dims[0], round ? 4 : 3);
        T_EQ(dims[1], 1);
        T_EQ(((const int64_t *)data)[round ? 1 : 0], 1);
    }
    /* the graph keeps its static shapes (the report reads them) */
    T_CHECK(!mp_shape_known(tb_val(m, "Z")));
    mp_exec_free(pl);
    tb_done(m, p);
}

/* A measured profile counts what only the data sizes: a token-routing
 * expert (the rows a mask selects, NonZero, gathered and multiplied by the
 * expert's 16 x 32 weight) counted with the rows each run routed: 3 rows,
 * 3 x 16 x 32 = 1,536 MACs; then 5, 2,560. A new plan starts from the
 * static shapes again (the next data may route otherwise). */
static void test_run_sized_by_data(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "ids", MP_DT_INT64, 1, TB_DIMS(8));
    tb_input(m, "H", MP_DT_FLOAT, 2, TB_DIMS(8, 16));
    tb_const_i(m, "one", MP_DT_INT64, 1, TB_DIMS(1), (const int64_t[]){1});
    tb_const_i(m, "ax", MP_DT_INT64, 1, TB_DIMS(1), (const int64_t[]){0});
    tb_weight(m, "W", MP_DT_FLOAT, 2, TB_DIMS(16, 32));
    tb_node(m, "Equal", "ids,one", "mask");
    tb_node(m, "NonZero", "mask", "nz");
    tb_node(m, "Squeeze", "nz,ax", "rows");
    tb_node(m, "Gather", "H,rows", "X");
    int mm = tb_node(m, "MatMul", "X,W", "Y");
    tb_output(m, "Y");
    mp_profile *p = tb_prof(m);
    T_EQ(p->total.unknown, 4);
    T_EQ(p->total.macs, 0);
    for (int round = 0; round < 2; round++) {
        mp_exec *pl = t_plan_runs(p, 1, 0, 2);
        T_CHECK(!mp_shape_known(tb_val(m, "Y")));
        int64_t ids[8] = {1, 0, 1, 2, 1, 0, 0, 0};
        if (round) ids[5] = ids[6] = 1;
        float h[8 * 16] = {0};
        T_OK(mp_exec_set_input(pl, "ids", MP_DT_INT64, 1, TB_DIMS(8), ids, sizeof ids));
        T_OK(mp_exec_set_input(pl, "H", MP_DT_FLOAT, 2, TB_DIMS(8, 16), h, sizeof h));
        T_OK(mp_profile_run(pl, p));
        int rows = round ? 5 : 3;
        T_EQ(p->total.unknown, 0);
        T_EQ(p->total.macs, (uint64_t)rows * 16 * 32);
        T_EQ(p->total.flops, (uint64_t)rows * 16 * 32 * 2 + 8); /* + Equal's 8 comparisons */
        T_EQ(p->run.run_shaped, 4); /* NonZero, Squeeze, Gather, MatMul; not Equal */
        T_CHECK(tb_nodep(m, mm)->cost.flags & MP_COST_RUN);
        T_CHECK(!(tb_nodep(m, 0)->cost.flags & MP_COST_RUN));
        T_EQ_STR(tb_shape(m, "Y"), round ? "5x32" : "3x32");
        T_CHECK(p->measured && p->total.latency_s >= 0);
        mp_exec_free(pl);
    }
    mp_exec *pl = NULL;
    T_OK(mp_exec_create(p, NULL, &pl));
    T_CHECK(!mp_shape_known(tb_val(m, "Y")));
    T_EQ(p->total.unknown, 4);
    mp_exec_free(pl);
    tb_done(m, p);
}

/* A node folded at plan time whose output the static inference could not
 * size: an Expand to Shape(X) with one entry scattered by ScatterND (whose
 * contents the inference does not follow). Its shape rule runs again on
 * the constants' contents; it was refused ("its shape depends on input
 * values the static inference did not know"). 1.5 over 2 x 7 x 4 = 84. */
static void test_run_fold_reinfer(void) {
    mp_model *m = tb_new(13);
    tb_input(m, "X", MP_DT_FLOAT, 3, TB_DIMS(2, 3, 4));
    tb_const_i(m, "I", MP_DT_INT64, 2, TB_DIMS(1, 1), (const int64_t[]){1});
    tb_const_i(m, "U", MP_DT_INT64, 1, TB_DIMS(1), (const int64_t[]){7});
    tb_const_f(m, "one", MP_DT_FLOAT, 1, TB_DIMS(1), (const double[]){1.5});
    tb_node(m, "Shape", "X", "S");
    tb_node(m, "ScatterND", "S,I,U", "T");
    tb_node(m, "Expand", "one,T", "E");
    tb_attr_i(m, tb_node(m, "ReduceSum", "E", "Y"), "keepdims", 0);
    tb_output(m, "Y");
    mp_profile *p = tb_prof(m);
    T_CHECK(!mp_shape_known(tb_val(m, "E")));
    mp_exec *pl = t_plan(p, 1);
    float x[24] = {0};
    if (pl) {
        T_OK(mp_exec_set_input(pl, "X", MP_DT_FLOAT, 3, TB_DIMS(2, 3, 4), x, sizeof x));
        T_OK(mp_exec_run(pl));
        int64_t n = 0;
        const float *y = t_out(pl, 0, &n);
        T_EQ(n, 1);
        if (y && n == 1) T_CHECK(y[0] == 84.0f);
        mp_exec_free(pl);
    }
    tb_done(m, p);
}

/* Random inputs: token ids within the table; absent weights: seeded */
static void test_run_random_data(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "ids", MP_DT_INT64, 1, TB_DIMS(64));
    tb_weight(m, "table", MP_DT_FLOAT, 2, TB_DIMS(7, 4));
    tb_node(m, "Gather", "table,ids", "Y");
    tb_output(m, "Y");
    mp_profile *p = tb_prof(m);
    t_kernel(m, "Gather", tk_gather, NULL, NULL);
    mp_run_options o;
    mp_run_options_default(&o);
    o.threads = 1;
    mp_exec *pl = NULL;
    int nw = mp_model_warning_count(m);
    T_OK(mp_exec_create(p, &o, &pl));
    T_EQ(mp_model_warning_count(m), nw + 1);
    T_CHECK(strstr(mp_model_warning(m, nw), "random") != NULL);
    T_OK(mp_exec_run(pl)); /* fails if an index is out of range */
    int64_t n;
    const float *y = t_out(pl, 0, &n);
    T_EQ(n, 256);
    float first = y[0];
    bool nonzero = false;
    for (int i = 0; i < 256; i++) nonzero |= y[i] != 0;
    T_CHECK(nonzero);
    mp_exec_free(pl);
    /* the same seed gives the same data; another seed other data */
    T_OK(mp_exec_create(p, &o, &pl));
    T_OK(mp_exec_run(pl));
    T_CHECK(t_out(pl, 0, &n)[0] == first);
    mp_exec_free(pl);
    o.seed = 99;
    T_OK(mp_exec_create(p, &o, &pl));
    T_OK(mp_exec_run(pl));
    const float *y2 = t_out(pl, 0, &n);
    bool differ = false;
    for (int i = 0; i < 256; i++) differ |= y2[i] != first;
    T_CHECK(differ);
    mp_exec_free(pl);
    tb_done(m, p);
}

/* fp16 weights seen as fp32, decoded once */
static void test_run_f16_weights(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "ids", MP_DT_INT64, 1, TB_DIMS(2));
    tb_const_f(m, "table", MP_DT_FLOAT16, 2, TB_DIMS(3, 2), (const double[]){0.5, -2, 1.25, 3, -0.125, 65504});
    tb_node(m, "Gather", "table,ids", "Y");
    tb_output(m, "Y");
    mp_profile *p = tb_prof(m);
    t_kernel(m, "Gather", tk_gather_f16, NULL, NULL);
    mp_exec *pl = NULL;
    T_OK(mp_exec_create(p, NULL, &pl));
    int64_t ids[2] = {2, 0};
    T_OK(mp_exec_set_input(pl, "ids", MP_DT_INT64, 1, TB_DIMS(2), ids, sizeof ids));
    T_OK(mp_exec_run(pl));
    T_CHECK(t_f32[0] == -0.125f && t_f32[1] == 65504.0f && t_f32[2] == 0.5f && t_f32[3] == -2.0f);
    mp_exec_free(pl);
    tb_done(m, p);
}

/* an initializer given back as a graph output has its data */
static void test_run_init_output(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "X", MP_DT_FLOAT, 1, TB_DIMS(2));
    tb_const_f(m, "C", MP_DT_FLOAT, 1, TB_DIMS(3), (const double[]){1, 2, 3});
    tb_node(m, "Relu", "X", "Y");
    tb_output(m, "Y");
    tb_output(m, "C");
    mp_profile *p = tb_prof(m);
    t_kernel(m, "Relu", tk_relu, NULL, NULL);
    mp_exec *pl = NULL;
    T_OK(mp_exec_create(p, NULL, &pl));
    T_OK(mp_exec_run(pl));
    int64_t n = 0;
    const float *c = t_out(pl, 1, &n);
    T_EQ(n, 3);
    T_CHECK(c && c[0] == 1 && c[2] == 3);
    mp_exec_free(pl);
    tb_done(m, p);
}

/* Weights from an external data file: mapped, used in place when aligned
 * for their dtype, copied once when not; with the real kernels */
static void test_run_external_weights(void) {
    char dir[] = "/tmp/mp-run-ext-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL);
    char path[256], bin[256];
    snprintf(bin, sizeof bin, "%s/w.bin", dir);
    snprintf(path, sizeof path, "%s/ext.onnx", dir);
    float w[16], b[4] = {0.5f, -1, 2, 0};
    uint8_t file[200] = {0};
    for (int i = 0; i < 16; i++) w[i] = (float)(i % 5) - 2;
    memcpy(file + 64, w, sizeof w);      /* aligned: used in place */
    memcpy(file + 130, b, sizeof b);     /* misaligned for floats: copied */
    FILE *f = fopen(bin, "wb");
    T_CHECK(f && fwrite(file, 1, sizeof file, f) == sizeof file);
    if (f) fclose(f);
    pbw g = {0}, model = {0};
    onx_node(&g, 1, "MatMul", "mm", "x,W", "y", NULL);
    onx_node(&g, 1, "Add", "add", "y,B", "z", NULL);
    onx_value_info(&g, 11, "x", 1, 2, (const int64_t[]){1, 4}, NULL);
    onx_value_info(&g, 12, "z", 1, 2, (const int64_t[]){1, 4}, NULL);
    onx_tensor_external(&g, 5, "W", 1, 2, (const int64_t[]){4, 4}, "w.bin", "64", "64");
    onx_tensor_external(&g, 5, "B", 1, 1, (const int64_t[]){4}, "w.bin", "130", "16");
    onx_model(&model, 8, 14, &g);
    T_CHECK(pbw_write(&model, path) == 0);
    pbw_free(&model);
    mp_model *m = NULL;
    mp_profile *p = NULL;
    mp_exec *pl = NULL;
    T_OK(mp_model_load(path, &m));
    T_OK(mp_profile_static(m, &p));
    T_OK(mp_exec_create(p, NULL, &pl));
    if (pl) {
        T_CHECK(pl->view_bytes >= sizeof w); /* W in place */
        T_CHECK(pl->const_bytes >= sizeof b); /* B copied */
        T_CHECK(!pl->random_weights);
        float x[4] = {1, 2, -1, 0.5f};
        T_OK(mp_exec_set_input(pl, "x", MP_DT_FLOAT, 2, TB_DIMS(1, 4), x, sizeof x));
        T_OK(mp_exec_run(pl));
        int64_t n = 0;
        const float *z = t_out(pl, 0, &n);
        T_EQ(n, 4);
        for (int j = 0; j < 4 && z; j++) {
            float want = b[j];
            for (int k = 0; k < 4; k++) want += x[k] * w[k * 4 + j];
            T_CHECK(fabsf(z[j] - want) < 1e-5f);
        }
    }
    mp_exec_free(pl);
    mp_profile_free(p);
    mp_model_free(m);
    unlink(bin);
    unlink(path);
    rmdir(dir);
}

/* --max-memory: refused before allocating, with the figures */
static void test_run_max_memory(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "X", MP_DT_FLOAT, 2, TB_DIMS(1000, 1000));
    tb_node(m, "Neg", "X", "Y");
    tb_output(m, "Y");
    mp_profile *p = tb_prof(m);
    t_kernel(m, "Neg", tk_neg, NULL, NULL);
    mp_run_options o;
    mp_run_options_default(&o);
    o.max_memory = 1000000;
    mp_exec *pl = NULL;
    T_EQ(mp_exec_create(p, &o, &pl), MP_ERR_LIMIT);
    T_CHECK(pl == NULL);
    T_CHECK(strstr(mp_last_error(), "max-memory") != NULL);
    o.max_memory = 9000000;
    T_OK(mp_exec_create(p, &o, &pl));
    mp_exec_free(pl);
    tb_done(m, p);
}

/* an op without a kernel: a clear refusal naming the node */
static void test_run_no_kernel(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "X", MP_DT_FLOAT, 1, TB_DIMS(4));
    int k = tb_node(m, "Neg", "X", "Y");
    tb_name(m, k, "the_neg");
    tb_output(m, "Y");
    mp_profile *p = tb_prof(m);
    static mp_op bare;
    bare = *tb_nodep(m, k)->desc;
    bare.run = NULL;
    bare.prepare = NULL;
    tb_nodep(m, k)->desc = &bare;
    mp_exec *pl = NULL;
    T_EQ(mp_exec_create(p, NULL, &pl), MP_ERR_UNSUPPORTED);
    T_CHECK(strstr(mp_last_error(), "the_neg") != NULL);
    tb_done(m, p);
}

/* A bf16 input's data as its bits in uint16 (numpy has no bfloat16):
 * taken as bf16; int16 is still refused. Neg of 1.5 (0x3FC0) and -2
 * (0xC000) in bf16. */
static void test_run_bf16_bits(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "X", MP_DT_BFLOAT16, 1, TB_DIMS(2));
    tb_node(m, "Neg", "X", "Y");
    tb_output(m, "Y");
    mp_profile *p = tb_prof(m);
    mp_exec *pl = NULL;
    if (p) T_OK(mp_exec_create(p, NULL, &pl));
    if (pl) {
        const uint16_t bits[2] = {0x3FC0, 0xC000};
        T_EQ(mp_exec_set_input(pl, "X", MP_DT_INT16, 1, TB_DIMS(2), bits, sizeof bits), MP_ERR_USAGE);
        T_OK(mp_exec_set_input(pl, "X", MP_DT_UINT16, 1, TB_DIMS(2), bits, sizeof bits));
        T_OK(mp_exec_run(pl));
        const char *name;
        int dt, rank;
        const int64_t *dims;
        const void *data;
        T_OK(mp_exec_output(pl, 0, &name, &dt, &rank, &dims, &data));
        const uint16_t *y = data;
        T_EQ(dt, MP_DT_BFLOAT16);
        T_EQ(y[0], 0xBFC0);
        T_EQ(y[1], 0x4000);
        mp_exec_free(pl);
    }
    tb_done(m, p);
}

/* fp16 and bf16 element-wise ops on the portable kernels compute in fp32
 * on converted chunks (elementwise.c): X[3, 1100] + B[1100] (a row longer
 * than a chunk, B broadcast), then Sigmoid, then a Transpose (2-byte
 * strided copy), each rounded to the 16-bit type. Values in [0.5, 1): the
 * sums are exact in fp32, so the Add rounds once, as the double path did;
 * Sigmoid within one 16-bit step of float math's. */
static void test_run_16bit_elementwise(void) {
    for (int k = 0; k < 2; k++) {
        int dt = k ? MP_DT_BFLOAT16 : MP_DT_FLOAT16;
        enum { R = 3, C = 1100 };
        mp_model *m = tb_new(17);
        tb_input(m, "X", dt, 2, TB_DIMS(R, C));
        tb_input(m, "B", dt, 1, TB_DIMS(C));
        tb_node(m, "Add", "X,B", "A");
        tb_node(m, "Sigmoid", "A", "S");
        tb_node(m, "Transpose", "S", "Y");
        tb_output(m, "Y");
        tb_output(m, "A");
        mp_profile *p = tb_prof(m);
        bool was = mp_run_portable_only;
        mp_run_portable_only = true;
        mp_run_options o;
        mp_run_options_default(&o);
        o.threads = 2;
        mp_exec *pl = NULL;
        if (p) T_OK(mp_exec_create(p, &o, &pl));
        mp_run_portable_only = was;
        static uint16_t x[R * C], b[C];
        float (*to_f)(uint16_t) = k ? mp_bf16_to_float : mp_half_to_float;
        uint16_t (*to_h)(float) = k ? mp_float_to_bf16 : mp_float_to_half;
        for (int i = 0; i < R * C; i++) x[i] = to_h(0.5f + (float)((i * 37) % 997) / 2000.0f);
        for (int i = 0; i < C; i++) b[i] = to_h(0.5f + (float)((i * 11) % 499) / 1000.0f);
        if (pl) {
            T_OK(mp_exec_set_input(pl, "X", dt, 2, TB_DIMS(R, C), x, sizeof x));
            T_OK(mp_exec_set_input(pl, "B", dt, 1, TB_DIMS(C), b, sizeof b));
            T_OK(mp_exec_run(pl));
            const char *name;
            int odt, rank;
            const int64_t *dims;
            const void *y, *a;
            T_OK(mp_exec_output(pl, 0, &name, &odt, &rank, &dims, &y));
            T_OK(mp_exec_output(pl, 1, &name, &odt, &rank, &dims, &a));
            int bad_add = 0, bad_sig = 0;
            float step = k ? 1.0f / 128 : 1.0f / 1024;
            for (int r = 0; r < R; r++)
                for (int c = 0; c < C; c++) {
                    float sum = to_f(x[r * C + c]) + to_f(b[c]);
                    uint16_t want_a = to_h(sum);
                    bad_add += ((const uint16_t *)a)[r * C + c] != want_a;
                    float want_s = 1.0f / (1.0f + expf(-to_f(want_a)));
                    float got_s = to_f(((const uint16_t *)y)[c * R + r]);
                    bad_sig += fabsf(got_s - want_s) > step;
                }
            T_EQ(bad_add, 0);
            T_EQ(bad_sig, 0);
            mp_exec_free(pl);
        }
        tb_done(m, p);
    }
}

MP_TESTS(run){
    {"run_16bit_elementwise", test_run_16bit_elementwise},
    {"run_bf16_bits", test_run_bf16_bits},
    {"run_fuse_fold", test_run_fuse_fold},
    {"run_fused_modules", test_run_fused_modules},
    {"run_arena_threads", test_run_arena_threads},
    {"run_views", test_run_views},
    {"run_dropout_view", test_run_dropout_view},
    {"run_dynamic", test_run_dynamic},
    {"run_reinfer", test_run_reinfer},
    {"run_fold_reinfer", test_run_fold_reinfer},
    {"run_sized_by_data", test_run_sized_by_data},
    {"run_random_data", test_run_random_data},
    {"run_max_memory", test_run_max_memory},
    {"run_f16_weights", test_run_f16_weights},
    {"run_init_output", test_run_init_output},
    {"run_external_weights", test_run_external_weights},
    {"run_no_kernel", test_run_no_kernel},
};
MP_TESTS_END(run)
