/* Tests of src/ops/linalg.c: matrix products, Einsum, quantized ops and
 * recurrent layers; every MAC and FLOP figure is computed by hand in the
 * comment next to it. */
#include "test.h"
#include "modelprof.h"
#include "tbuild.h"

#include <math.h>
#include <stdlib.h>

#define F MP_DT_FLOAT
#define I64 MP_DT_INT64
#define U8 MP_DT_UINT8
#define I8 MP_DT_INT8

static uint64_t total_params(mp_profile *p) {
    mp_totals t;
    mp_profile_totals(p, &t);
    return t.params;
}

/* ---- MatMul ---- */

static void t_matmul_batched(void) {
    /* attention scores: [2,12,128,64] x [2,12,64,128] -> 2x12x128x128
     * MACs = 2*12*128*64*128 = 25165824; FLOPs = 2*MACs = 50331648 */
    mp_model *m = tb_new(17);
    tb_input(m, "q", F, 4, TB_DIMS(2, 12, 128, 64));
    tb_input(m, "k", F, 4, TB_DIMS(2, 12, 64, 128));
    int k = tb_node(m, "MatMul", "q,k", "s");
    tb_output(m, "s");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "s"), "2x12x128x128");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 25165824);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 50331648);
    tb_done(m, p);
}

static void t_matmul_1d(void) {
    /* [64] x [64,32] -> [32]: MACs = 64*32 = 2048
     * [4,8,64] x [64] -> [4,8]: MACs = 4*8*64 = 2048
     * [64] x [64] -> scalar: MACs = 64 */
    mp_model *m = tb_new(17);
    tb_input(m, "v", F, 1, TB_DIMS(64));
    tb_input(m, "w", F, 2, TB_DIMS(64, 32));
    tb_input(m, "x", F, 3, TB_DIMS(4, 8, 64));
    int k1 = tb_node(m, "MatMul", "v,w", "a");
    int k2 = tb_node(m, "MatMul", "x,v", "b");
    int k3 = tb_node(m, "MatMul", "v,v", "c");
    tb_output(m, "a");
    tb_output(m, "b");
    tb_output(m, "c");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "a"), "32");
    T_EQ_STR(tb_shape(m, "b"), "4x8");
    T_EQ_STR(tb_shape(m, "c"), "scalar");
    T_EQ_U64(tb_nodep(m, k1)->cost.macs, 2048);
    T_EQ_U64(tb_nodep(m, k2)->cost.macs, 2048);
    T_EQ_U64(tb_nodep(m, k3)->cost.macs, 64);
    T_EQ_U64(tb_nodep(m, k3)->cost.flops, 128);
    tb_done(m, p);
}

static void t_matmul_broadcast(void) {
    /* [3,1,5,6] x [4,6,7]: batch (3,1) with (4) -> (3,4) -> 3x4x5x7
     * MACs = 3*4*5*6*7 = 2520 */
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 4, TB_DIMS(3, 1, 5, 6));
    tb_input(m, "b", F, 3, TB_DIMS(4, 6, 7));
    int k = tb_node(m, "MatMul", "a,b", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "3x4x5x7");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 2520);
    tb_done(m, p);
}

static mp_model *matmul_sym(void) {
    mp_model *m = tb_new(17);
    int64_t b = tb_sym(m, "batch"), s = tb_sym(m, "seq");
    tb_input(m, "x", F, 3, TB_DIMS(b, s, 768));
    tb_weight(m, "w", F, 2, TB_DIMS(768, 3072));
    tb_node(m, "MatMul", "x,w", "y");
    tb_output(m, "y");
    return m;
}

static void t_matmul_symbolic(void) {
    /* [batch, seq, 768] x W [768, 3072] -> batch x seq x 3072; cost
     * unknown until the dims have values; W is a parameter: 2359296.
     * With batch=2, seq=128: MACs = 2*128*768*3072 = 603979776 */
    mp_model *m = matmul_sym();
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "batchxseqx3072");
    T_CHECK(tb_nodep(m, 0)->cost.flags & MP_COST_UNKNOWN);
    T_EQ_U64(tb_nodep(m, 0)->cost.macs, 0);
    T_EQ_U64(total_params(p), 2359296);
    tb_done(m, p);

    m = matmul_sym();
    T_OK(mp_model_set_dim(m, "batch", 2));
    T_OK(mp_model_set_dim(m, "seq", 128));
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x128x3072");
    T_CHECK(!(tb_nodep(m, 0)->cost.flags & MP_COST_UNKNOWN));
    T_EQ_U64(tb_nodep(m, 0)->cost.macs, 603979776);
    T_EQ_U64(tb_nodep(m, 0)->cost.flops, 1207959552);
    tb_done(m, p);
}

static void t_matmul_k_mismatch(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(2, 3));
    tb_input(m, "b", F, 2, TB_DIMS(4, 5));
    int k = tb_node(m, "MatMul", "a,b", "y");
    tb_name(m, k, "bad_matmul");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bad_matmul");
}

static void t_matmul_batch_mismatch(void) {
    /* batch dims 3 vs 4 do not broadcast */
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 3, TB_DIMS(3, 2, 3));
    tb_input(m, "b", F, 3, TB_DIMS(4, 3, 5));
    int k = tb_node(m, "MatMul", "a,b", "y");
    tb_name(m, k, "bad_batch");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bad_batch");
}

/* ---- Gemm ---- */

static void t_gemm_transb_c(void) {
    /* Linear: A [8,256], B [512,256] transB, C [512] -> 8x512
     * MACs = 8*256*512 = 1048576; FLOPs = 2*1048576 + 8*512 = 2101248
     * params = 512*256 + 512 = 131584 */
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(8, 256));
    tb_weight(m, "w", F, 2, TB_DIMS(512, 256));
    tb_weight(m, "bias", F, 1, TB_DIMS(512));
    int k = tb_node(m, "Gemm", "a,w,bias", "y");
    tb_attr_i(m, k, "transB", 1);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "8x512");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 1048576);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 2101248);
    T_EQ_U64(total_params(p), 131584);
    tb_done(m, p);
}

static void t_gemm_transa_noc(void) {
    /* A [256,8] transA -> M=8, K=256; B [256,512]; no C (opset 11+)
     * MACs = 8*256*512 = 1048576; FLOPs = 2*MACs = 2097152 */
    mp_model *m = tb_new(13);
    tb_input(m, "a", F, 2, TB_DIMS(256, 8));
    tb_weight(m, "w", F, 2, TB_DIMS(256, 512));
    int k = tb_node(m, "Gemm", "a,w", "y");
    tb_attr_i(m, k, "transA", 1);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "8x512");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 1048576);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 2097152);
    tb_done(m, p);
}

static void t_gemm_errors(void) {
    /* K: 256 vs 255 */
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(8, 256));
    tb_weight(m, "w", F, 2, TB_DIMS(255, 512));
    int k = tb_node(m, "Gemm", "a,w", "y");
    tb_name(m, k, "bad_gemm");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bad_gemm");

    /* C [7] does not broadcast to [8, 512] */
    m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(8, 256));
    tb_weight(m, "w", F, 2, TB_DIMS(256, 512));
    tb_weight(m, "c", F, 1, TB_DIMS(7));
    k = tb_node(m, "Gemm", "a,w,c", "y");
    tb_name(m, k, "bad_gemm_c");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bad_gemm_c");

    /* A of rank 3 */
    m = tb_new(17);
    tb_input(m, "a", F, 3, TB_DIMS(2, 8, 256));
    tb_weight(m, "w", F, 2, TB_DIMS(256, 512));
    k = tb_node(m, "Gemm", "a,w", "y");
    tb_name(m, k, "gemm_rank3");
    tb_output(m, "y");
    tb_expect_shape_error(m, "gemm_rank3");
}

/* ---- Einsum ---- */

static void t_einsum_bij_bjk(void) {
    /* [4,8,16] x [4,16,32], "bij,bjk->bik" -> 4x8x32
     * MACs = b*i*j*k = 4*8*16*32 = 16384; FLOPs = 32768 */
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 3, TB_DIMS(4, 8, 16));
    tb_input(m, "b", F, 3, TB_DIMS(4, 16, 32));
    int k = tb_node(m, "Einsum", "a,b", "y");
    tb_attr_s(m, k, "equation", "bij,bjk->bik");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "4x8x32");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 16384);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 32768);
    tb_done(m, p);
}

static void t_einsum_attention(void) {
    /* "bhqd,bhkd->bhqk" on [2,12,128,64] twice -> 2x12x128x128
     * MACs = b*h*q*d*k = 2*12*128*64*128 = 25165824 (= the MatMul form) */
    mp_model *m = tb_new(17);
    tb_input(m, "q", F, 4, TB_DIMS(2, 12, 128, 64));
    tb_input(m, "k", F, 4, TB_DIMS(2, 12, 128, 64));
    int k = tb_node(m, "Einsum", "q,k", "s");
    tb_attr_s(m, k, "equation", "bhqd, bhkd -> bhqk");
    tb_output(m, "s");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "s"), "2x12x128x128");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 25165824);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 50331648);
    tb_done(m, p);
}

static void t_einsum_unit_index(void) {
    /* an index of extent 1 in every operand is 1, not unknown (MaxViT's
     * "B G H I D, B G H J D -> B G H I J" at batch 1, as torchvision
     * exports it): [1,64,2,49,32] twice -> 1x64x2x49x49, MACs =
     * 64*2*49*32*49 = 9834496; and 1 broadcast against 3 is 3 */
    mp_model *m = tb_new(17);
    tb_input(m, "q", F, 5, TB_DIMS(1, 64, 2, 49, 32));
    tb_input(m, "k", F, 5, TB_DIMS(1, 64, 2, 49, 32));
    tb_input(m, "a", F, 2, TB_DIMS(1, 4));
    tb_input(m, "b", F, 2, TB_DIMS(3, 4));
    int k = tb_node(m, "Einsum", "q,k", "s");
    tb_attr_s(m, k, "equation", "B G H I D, B G H J D -> B G H I J");
    int k2 = tb_node(m, "Einsum", "a,b", "y");
    tb_attr_s(m, k2, "equation", "ij,ij->ij");
    tb_output(m, "s");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "s"), "1x64x2x49x49");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 9834496);
    T_CHECK(!(tb_nodep(m, k)->cost.flags & MP_COST_UNKNOWN));
    T_EQ_STR(tb_shape(m, "y"), "3x4");
    tb_done(m, p);
}

/* A naive einsum over the whole index space (letters a-z, A-Z; explicit
 * output; no ellipsis), as a reference for the kernel's GEMM path. */
static void ein_ref(const char *eq, const float *a, const int64_t *da, const float *b, const int64_t *db, float *y,
                    int64_t ny) {
    int64_t ext[128] = {0};
    char ta[16], tb[16], to[16];
    int na = 0, nb = 0, no = 0, part = 0;
    for (const char *q = eq; *q; q++) {
        if (*q == ',') part = 1;
        else if (*q == '>') part = 2;
        else if ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z')) {
            if (part == 0) ext[(int)*q] = da[na], ta[na++] = *q;
            else if (part == 1) ext[(int)*q] = db[nb], tb[nb++] = *q;
            else to[no++] = *q;
        }
    }
    char lets[64];
    int nl = 0;
    for (int l = 0; l < 128; l++)
        if (ext[l]) lets[nl++] = (char)l;
    for (int64_t e = 0; e < ny; e++) y[e] = 0;
    int64_t idx[128] = {0}, total = 1;
    for (int i = 0; i < nl; i++) total *= ext[(int)lets[i]];
    for (int64_t p = 0; p < total; p++) {
        int64_t r = p;
        for (int i = nl - 1; i >= 0; i--) idx[(int)lets[i]] = r % ext[(int)lets[i]], r /= ext[(int)lets[i]];
        int64_t oa = 0, ob = 0, oy = 0;
        for (int i = 0; i < na; i++) oa = oa * ext[(int)ta[i]] + idx[(int)ta[i]];
        for (int i = 0; i < nb; i++) ob = ob * ext[(int)tb[i]] + idx[(int)tb[i]];
        for (int i = 0; i < no; i++) oy = oy * ext[(int)to[i]] + idx[(int)to[i]];
        y[oy] += a[oa] * b[ob];
    }
}

/* fp32 two-operand contractions run as batched GEMMs (lak_einsum_gemm):
 * batch letters, several contracted letters, the output's rows and
 * columns in any order, all letters batch; against the naive walk */
static void t_einsum_gemm_run(void) {
    static const struct {
        const char *eq;
        int ra, rb, ro;
        int64_t da[5], db[5], dy[5];
    } cases[] = {
        {"B G H I D, B G H J D -> B G H I J", 5, 5, 5, {1, 2, 3, 4, 5}, {1, 2, 3, 6, 5}, {1, 2, 3, 4, 6}},
        {"bik,bkj->bji", 3, 3, 3, {2, 3, 4}, {2, 4, 5}, {2, 5, 3}},
        {"ijk,jkl->li", 3, 3, 2, {2, 3, 4}, {3, 4, 5}, {5, 2}},
        {"ab,ab->ba", 2, 2, 2, {3, 4}, {3, 4}, {4, 3}},
        {"bhqd,bhkd->bhqk", 4, 4, 4, {2, 3, 17, 8}, {2, 3, 19, 8}, {2, 3, 17, 19}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t na = 1, nb = 1, ny = 1;
        for (int i = 0; i < cases[c].ra; i++) na *= cases[c].da[i];
        for (int i = 0; i < cases[c].rb; i++) nb *= cases[c].db[i];
        for (int i = 0; i < cases[c].ro; i++) ny *= cases[c].dy[i];
        float *a = malloc(sizeof(float) * (size_t)na), *b = malloc(sizeof(float) * (size_t)nb);
        float *want = malloc(sizeof(float) * (size_t)ny);
        for (int64_t i = 0; i < na; i++) a[i] = (float)((i * 7) % 11) - 5.0f;
        for (int64_t i = 0; i < nb; i++) b[i] = (float)((i * 5) % 13) * 0.25f - 1.5f;
        ein_ref(cases[c].eq, a, cases[c].da, b, cases[c].db, want, ny);
        mp_model *m = tb_new(17);
        tb_input(m, "a", F, cases[c].ra, cases[c].da);
        tb_input(m, "b", F, cases[c].rb, cases[c].db);
        int k = tb_node(m, "Einsum", "a,b", "y");
        tb_attr_s(m, k, "equation", cases[c].eq);
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        mp_run_options o;
        mp_run_options_default(&o);
        o.threads = 2;
        mp_exec *pl = NULL;
        T_OK(mp_exec_create(p, &o, &pl));
        if (pl) {
            T_OK(mp_exec_set_input(pl, "a", MP_DT_FLOAT, cases[c].ra, cases[c].da, a, sizeof(float) * (size_t)na));
            T_OK(mp_exec_set_input(pl, "b", MP_DT_FLOAT, cases[c].rb, cases[c].db, b, sizeof(float) * (size_t)nb));
            T_OK(mp_exec_run(pl));
            const char *name;
            int dt, rank;
            const int64_t *dims;
            const void *data;
            T_OK(mp_exec_output(pl, 0, &name, &dt, &rank, &dims, &data));
            T_EQ(rank, cases[c].ro);
            int bad = 0;
            for (int64_t i = 0; data && i < ny; i++)
                if (fabsf(((const float *)data)[i] - want[i]) > 1e-4f * (1 + fabsf(want[i]))) bad++;
            if (bad) fprintf(stderr, "    %s: %d elements differ\n", cases[c].eq, bad);
            T_EQ(bad, 0);
        }
        mp_exec_free(pl);
        tb_done(m, p);
        free(a), free(b), free(want);
    }
}

static void t_einsum_forms(void) {
    /* implicit "ij,jk" -> "ik": [3,4] x [4,5] -> 3x5, MACs = 3*4*5 = 60
     * trace "ii" on [5,5] -> scalar, 0 MACs, FLOPs = 25 (input elements)
     * transpose "ij->ji" on [3,4] -> 4x3, 0 FLOPs
     * ellipsis "...ij,...jk->...ik": [2,3,4,5] x [5,6] -> 2x3x4x6,
     *   MACs = 2*3 (ellipsis) * 4*5*6 = 720
     * implicit with ellipsis "...ij,...jk" -> same 2x3x4x6 */
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(3, 4));
    tb_input(m, "b", F, 2, TB_DIMS(4, 5));
    tb_input(m, "sq", F, 2, TB_DIMS(5, 5));
    tb_input(m, "x", F, 4, TB_DIMS(2, 3, 4, 5));
    tb_input(m, "w", F, 2, TB_DIMS(5, 6));
    int k1 = tb_node(m, "Einsum", "a,b", "y1");
    tb_attr_s(m, k1, "equation", "ij,jk");
    int k2 = tb_node(m, "Einsum", "sq", "y2");
    tb_attr_s(m, k2, "equation", "ii");
    int k3 = tb_node(m, "Einsum", "a", "y3");
    tb_attr_s(m, k3, "equation", "ij->ji");
    int k4 = tb_node(m, "Einsum", "x,w", "y4");
    tb_attr_s(m, k4, "equation", "...ij,...jk->...ik");
    int k5 = tb_node(m, "Einsum", "x,w", "y5");
    tb_attr_s(m, k5, "equation", "...ij,...jk");
    tb_output(m, "y1");
    tb_output(m, "y2");
    tb_output(m, "y3");
    tb_output(m, "y4");
    tb_output(m, "y5");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y1"), "3x5");
    T_EQ_U64(tb_nodep(m, k1)->cost.macs, 60);
    T_EQ_STR(tb_shape(m, "y2"), "scalar");
    T_EQ_U64(tb_nodep(m, k2)->cost.macs, 0);
    T_EQ_U64(tb_nodep(m, k2)->cost.flops, 25);
    T_EQ_STR(tb_shape(m, "y3"), "4x3");
    T_EQ_U64(tb_nodep(m, k3)->cost.flops, 0);
    T_EQ_STR(tb_shape(m, "y4"), "2x3x4x6");
    T_EQ_U64(tb_nodep(m, k4)->cost.macs, 720);
    T_EQ_STR(tb_shape(m, "y5"), "2x3x4x6");
    tb_done(m, p);
}

static void t_einsum_errors(void) {
    /* j is 4 in a but 6 in b */
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(3, 4));
    tb_input(m, "b", F, 2, TB_DIMS(6, 5));
    int k = tb_node(m, "Einsum", "a,b", "y");
    tb_attr_s(m, k, "equation", "ij,jk->ik");
    tb_name(m, k, "bad_einsum");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bad_einsum");

    /* output index z is in no input */
    m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(3, 4));
    k = tb_node(m, "Einsum", "a", "y");
    tb_attr_s(m, k, "equation", "ij->iz");
    tb_name(m, k, "einsum_z");
    tb_output(m, "y");
    tb_expect_shape_error(m, "einsum_z");

    /* rank 2 operand with three indices */
    m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(3, 4));
    k = tb_node(m, "Einsum", "a", "y");
    tb_attr_s(m, k, "equation", "ijk->i");
    tb_name(m, k, "einsum_rank");
    tb_output(m, "y");
    tb_expect_shape_error(m, "einsum_rank");
}

/* ---- recurrent layers ---- */

static void t_lstm_bidirectional(void) {
    /* X [seq 10, batch 4, input 32], hidden 64, bidirectional:
     * W [2, 256, 32], R [2, 256, 64], B [2, 512]
     * MACs = seq*dirs*batch * 4*hidden*(input+hidden)
     *      = 10*2*4 * 4*64*96 = 80 * 24576 = 1966080
     * units = seq*dirs*batch*hidden = 10*2*4*64 = 5120
     * FLOPs = 2*MACs + units * (13 gate work + 2*4 bias adds)
     *       = 3932160 + 5120*21 = 3932160 + 107520 = 4039680
     * params = 2*256*32 + 2*256*64 + 2*512 = 16384 + 32768 + 1024 = 50176 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(10, 4, 32));
    tb_weight(m, "w", F, 3, TB_DIMS(2, 256, 32));
    tb_weight(m, "r", F, 3, TB_DIMS(2, 256, 64));
    tb_weight(m, "b", F, 2, TB_DIMS(2, 512));
    int k = tb_node(m, "LSTM", "x,w,r,b", "y,yh,yc");
    tb_attr_i(m, k, "hidden_size", 64);
    tb_attr_s(m, k, "direction", "bidirectional");
    tb_output(m, "y");
    tb_output(m, "yh");
    tb_output(m, "yc");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "10x2x4x64");
    T_EQ_STR(tb_shape(m, "yh"), "2x4x64");
    T_EQ_STR(tb_shape(m, "yc"), "2x4x64");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 1966080);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 4039680);
    T_EQ_U64(total_params(p), 50176);
    tb_done(m, p);
}

static void t_lstm_layout1(void) {
    /* opset 14 layout=1: X [batch 4, seq 10, 32] -> Y [4, 10, 1, 64],
     * Y_h [4, 1, 64]; forward, no B:
     * MACs = 10*1*4 * 4*64*96 = 983040; FLOPs = 2*MACs + 10*4*64*13
     *      = 1966080 + 33280 = 1999360 */
    mp_model *m = tb_new(14);
    tb_input(m, "x", F, 3, TB_DIMS(4, 10, 32));
    tb_weight(m, "w", F, 3, TB_DIMS(1, 256, 32));
    tb_weight(m, "r", F, 3, TB_DIMS(1, 256, 64));
    int k = tb_node(m, "LSTM", "x,w,r", "y,yh");
    tb_attr_i(m, k, "hidden_size", 64);
    tb_attr_i(m, k, "layout", 1);
    tb_output(m, "y");
    tb_output(m, "yh");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "4x10x1x64");
    T_EQ_STR(tb_shape(m, "yh"), "4x1x64");
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 983040);
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 1999360);
    tb_done(m, p);
}

static void t_gru_rnn(void) {
    /* GRU: X [5, 3, 10], hidden from R [1, 60, 20] = 20, no B:
     *   MACs = 5*1*3 * 3*20*(10+20) = 15 * 1800 = 27000
     *   FLOPs = 54000 + (5*3*20 = 300 units) * 11 = 54000 + 3300 = 57300
     * RNN: X [7, 2, 8], W [1,16,8], R [1,16,16], B [1,32], hidden 16:
     *   MACs = 7*2 * 16*(8+16) = 14 * 384 = 5376
     *   FLOPs = 10752 + (7*2*16 = 224 units) * (2 + 2*1) = 10752 + 896 = 11648
     * sequence_lens given on the RNN: an upper bound */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(5, 3, 10));
    tb_weight(m, "w", F, 3, TB_DIMS(1, 60, 10));
    tb_weight(m, "r", F, 3, TB_DIMS(1, 60, 20));
    tb_input(m, "x2", F, 3, TB_DIMS(7, 2, 8));
    tb_weight(m, "w2", F, 3, TB_DIMS(1, 16, 8));
    tb_weight(m, "r2", F, 3, TB_DIMS(1, 16, 16));
    tb_weight(m, "b2", F, 2, TB_DIMS(1, 32));
    tb_input(m, "lens", MP_DT_INT32, 1, TB_DIMS(2));
    int k1 = tb_node(m, "GRU", "x,w,r", "y,yh");
    int k2 = tb_node(m, "RNN", "x2,w2,r2,b2,lens", "y2");
    tb_attr_i(m, k2, "hidden_size", 16);
    tb_output(m, "y");
    tb_output(m, "y2");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "5x1x3x20");
    T_EQ_STR(tb_shape(m, "yh"), "1x3x20");
    T_EQ_U64(tb_nodep(m, k1)->cost.macs, 27000);
    T_EQ_U64(tb_nodep(m, k1)->cost.flops, 57300);
    T_EQ_STR(tb_shape(m, "y2"), "7x1x2x16");
    T_EQ_U64(tb_nodep(m, k2)->cost.macs, 5376);
    T_EQ_U64(tb_nodep(m, k2)->cost.flops, 11648);
    T_CHECK(tb_nodep(m, k2)->cost.flags & MP_COST_BOUND);
    tb_done(m, p);
}

static void t_rnn_errors(void) {
    /* bidirectional but W has 1 direction */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(5, 3, 10));
    tb_weight(m, "w", F, 3, TB_DIMS(1, 80, 10));
    tb_weight(m, "r", F, 3, TB_DIMS(1, 80, 20));
    int k = tb_node(m, "LSTM", "x,w,r", "y");
    tb_attr_s(m, k, "direction", "bidirectional");
    tb_name(m, k, "bad_lstm");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bad_lstm");

    /* W input size 12 but X has 10 */
    m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(5, 3, 10));
    tb_weight(m, "w", F, 3, TB_DIMS(1, 60, 12));
    tb_weight(m, "r", F, 3, TB_DIMS(1, 60, 20));
    k = tb_node(m, "GRU", "x,w,r", "y");
    tb_name(m, k, "bad_gru");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bad_gru");
}

/* ---- quantized ---- */

static void t_quantized(void) {
    /* QuantizeLinear [2,3] with an int8 zero point -> int8 2x3, FLOPs =
     * 2*6 = 12. DequantizeLinear of an int8 weight [16,8] -> fp32 16x8,
     * FLOPs = 2*128 = 256; the int8 weight is a parameter (128), its scale
     * and zero point are not.
     * MatMulInteger [4,16] x int8 [16,8] -> int32 4x8, MACs = 4*16*8 = 512.
     * QLinearMatMul [4,16] x uint8 [16,8] -> uint8 4x8, MACs = 512; its b
     * is a parameter (128).
     * DynamicQuantizeLinear [10] -> uint8 10, fp32 scalar, uint8 scalar;
     * FLOPs = 4*10 = 40 */
    mp_model *m = tb_new(13);
    tb_input(m, "x", F, 2, TB_DIMS(2, 3));
    tb_const_f(m, "s", F, 0, NULL, (const double[]){0.5});
    tb_const_i(m, "z8", I8, 0, NULL, TB_DIMS(0));
    tb_const_i(m, "zu", U8, 0, NULL, TB_DIMS(0));
    tb_weight(m, "wq", I8, 2, TB_DIMS(16, 8));
    tb_input(m, "xa", U8, 2, TB_DIMS(4, 16));
    tb_weight(m, "wi", I8, 2, TB_DIMS(16, 8));
    tb_weight(m, "wu", U8, 2, TB_DIMS(16, 8));
    tb_input(m, "d", F, 1, TB_DIMS(10));
    int kq = tb_node(m, "QuantizeLinear", "x,s,z8", "q");
    int kd = tb_node(m, "DequantizeLinear", "wq,s,z8", "dq");
    int km = tb_node(m, "MatMulInteger", "xa,wi", "mi");
    int kl = tb_node(m, "QLinearMatMul", "xa,s,zu,wu,s,zu,s,zu", "ql");
    int kdy = tb_node(m, "DynamicQuantizeLinear", "d", "dy,dys,dyz");
    tb_output(m, "q");
    tb_output(m, "dq");
    tb_output(m, "mi");
    tb_output(m, "ql");
    tb_output(m, "dy");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "q"), "2x3");
    T_EQ(tb_val(m, "q")->dtype, I8);
    T_EQ_U64(tb_nodep(m, kq)->cost.flops, 12);
    T_EQ_STR(tb_shape(m, "dq"), "16x8");
    T_EQ(tb_val(m, "dq")->dtype, F);
    T_EQ_U64(tb_nodep(m, kd)->cost.flops, 256);
    T_EQ_STR(tb_shape(m, "mi"), "4x8");
    T_EQ(tb_val(m, "mi")->dtype, MP_DT_INT32);
    T_EQ_U64(tb_nodep(m, km)->cost.macs, 512);
    T_EQ_U64(tb_nodep(m, km)->cost.flops, 1024);
    T_EQ_STR(tb_shape(m, "ql"), "4x8");
    T_EQ(tb_val(m, "ql")->dtype, U8);
    T_EQ_U64(tb_nodep(m, kl)->cost.macs, 512);
    T_EQ_STR(tb_shape(m, "dy"), "10");
    T_EQ_STR(tb_shape(m, "dys"), "scalar");
    T_EQ(tb_val(m, "dyz")->dtype, U8);
    T_EQ_U64(tb_nodep(m, kdy)->cost.flops, 40);
    /* params: wq 128 (DequantizeLinear input 0), wi 128 (MatMulInteger
     * input 1), wu 128 (QLinearMatMul input 3) = 384; scales (fp32
     * scalars) and zero points are not parameters */
    T_EQ_U64(total_params(p), 384);
    tb_done(m, p);
}

static void t_unknown_rank_flows(void) {
    /* unknown-rank inputs: outputs unknown, cost flagged unknown, no error */
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, -1, NULL);
    tb_input(m, "b", F, 2, TB_DIMS(4, 5));
    int k1 = tb_node(m, "MatMul", "a,b", "y");
    int k2 = tb_node(m, "Einsum", "a,b", "z");
    tb_attr_s(m, k2, "equation", "...j,jk->...k");
    tb_output(m, "y");
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "?rank");
    T_EQ_STR(tb_shape(m, "z"), "?rank");
    T_CHECK(tb_nodep(m, k1)->cost.flags & MP_COST_UNKNOWN);
    T_CHECK(tb_nodep(m, k2)->cost.flags & MP_COST_UNKNOWN);
    tb_done(m, p);
}

MP_TESTS(ops_linalg){
    {"matmul_batched", t_matmul_batched},
    {"matmul_1d", t_matmul_1d},
    {"matmul_broadcast", t_matmul_broadcast},
    {"matmul_symbolic", t_matmul_symbolic},
    {"matmul_k_mismatch", t_matmul_k_mismatch},
    {"matmul_batch_mismatch", t_matmul_batch_mismatch},
    {"gemm_transb_c", t_gemm_transb_c},
    {"gemm_transa_noc", t_gemm_transa_noc},
    {"gemm_errors", t_gemm_errors},
    {"einsum_bij_bjk", t_einsum_bij_bjk},
    {"einsum_attention", t_einsum_attention},
    {"einsum_forms", t_einsum_forms},
    {"einsum_unit_index", t_einsum_unit_index},
    {"einsum_gemm_run", t_einsum_gemm_run},
    {"einsum_errors", t_einsum_errors},
    {"lstm_bidirectional", t_lstm_bidirectional},
    {"lstm_layout1", t_lstm_layout1},
    {"gru_rnn", t_gru_rnn},
    {"rnn_errors", t_rnn_errors},
    {"quantized", t_quantized},
    {"unknown_rank_flows", t_unknown_rank_flows},
};
MP_TESTS_END(ops_linalg)
