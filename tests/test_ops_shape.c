/* Tests of src/ops/shape.c: shape rules, known contents (shape arithmetic
 * evaluated so dynamic axes resolve) and the zero-FLOP cost rule; each
 * expected figure is worked out by hand in the comment next to it. */
#include "test.h"
#include "tbuild.h"

#include <stdlib.h>

#define F MP_DT_FLOAT
#define I64 MP_DT_INT64

/* Scalar int64 constant. */
static void const_scalar(mp_model *m, const char *name, int64_t v) {
    tb_const_i(m, name, I64, 0, NULL, &v);
}

/* 1-D int64 constant. */
static void const_vec(mp_model *m, const char *name, int n, const int64_t *v) {
    int64_t d = n;
    tb_const_i(m, name, I64, 1, &d, v);
}

/* A tensor attribute (int64 or fp32 raw little-endian data) on a node. */
static void attr_tensor(mp_model *m, int node, const char *name, int dtype, int rank,
                        const int64_t *dims, const int64_t *iv, const double *fv) {
    mp_node *n = tb_nodep(m, node);
    mp_attr *na = mp_arena_calloc(&m->arena, (size_t)n->n_attr + 1, sizeof *na);
    if (n->n_attr) memcpy(na, n->attr, sizeof *na * (size_t)n->n_attr);
    n->attr = na;
    mp_attr *a = &na[n->n_attr++];
    a->name = mp_arena_strdup(&m->arena, name);
    a->type = MP_ATTR_TENSOR;
    mp_tensor *t = mp_arena_calloc(&m->arena, 1, sizeof *t);
    t->name = a->name;
    t->dtype = dtype;
    t->rank = rank;
    t->dims = mp_arena_calloc(&m->arena, (size_t)(rank ? rank : 1), sizeof(int64_t));
    if (rank) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
    t->numel = mp_dims_product(dims, rank);
    size_t eb = (size_t)mp_dtype_bits(dtype) / 8;
    uint8_t *raw = mp_arena_calloc(&m->arena, (size_t)t->numel * eb + 1, 1);
    for (int64_t i = 0; i < t->numel; i++) {
        uint64_t u;
        if (dtype == F) {
            float f = (float)fv[i];
            uint32_t b;
            memcpy(&b, &f, 4);
            u = b;
        } else {
            u = (uint64_t)iv[i];
        }
        for (size_t b = 0; b < eb; b++) raw[(size_t)i * eb + b] = (uint8_t)(u >> (8 * b));
    }
    t->loc = MP_DATA_RAW;
    t->data = raw;
    t->size = (size_t)t->numel * eb;
    a->t = t;
}

/* ---- Reshape ---- */

static void t_reshape_infer(void) {
    /* [2,3,4] -> [0,-1]: 0 copies 2, -1 = 24/2 = 12 -> 2x12; 0 FLOPs */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(2, 3, 4));
    const_vec(m, "s", 2, TB_DIMS(0, -1));
    int k = tb_node(m, "Reshape", "x,s", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x12");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 0);
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 0);
    /* bytes: reads x (24*4 = 96) + s (2*8 = 16), writes 96 */
    T_EQ_U64(tb_nodep(m, k)->cost.bytes_read, 112);
    T_EQ_U64(tb_nodep(m, k)->cost.bytes_written, 96);
    tb_done(m, p);
}

static void t_reshape_symbolic(void) {
    /* [batch, seq, 768] -> [0, 0, 12, 64]: copies keep the symbols.
     * [batch, seq, 768] -> [0, -1]: batch cancels, -1 = seq*768 unknown
     * -> batch x ?. [batch, 768] -> [-1, 768]: batch cancels, -1 = batch */
    mp_model *m = tb_new(17);
    int64_t b = tb_sym(m, "batch"), s = tb_sym(m, "seq");
    tb_input(m, "x", F, 3, TB_DIMS(b, s, 768));
    tb_input(m, "z", F, 2, TB_DIMS(b, 768));
    const_vec(m, "s1", 4, TB_DIMS(0, 0, 12, 64));
    const_vec(m, "s2", 2, TB_DIMS(0, -1));
    const_vec(m, "s3", 2, TB_DIMS(-1, 768));
    tb_node(m, "Reshape", "x,s1", "y1");
    tb_node(m, "Reshape", "x,s2", "y2");
    tb_node(m, "Reshape", "z,s3", "y3");
    tb_output(m, "y1");
    tb_output(m, "y2");
    tb_output(m, "y3");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y1"), "batchxseqx12x64");
    T_EQ_STR(tb_shape(m, "y2"), "batchx?");
    T_EQ_STR(tb_shape(m, "y3"), "batchx768");
    tb_done(m, p);
}

static void t_reshape_allowzero(void) {
    /* opset 14 allowzero=1: [0, 3] is a real 0 -> 0x3 from a [0, 3] input */
    mp_model *m = tb_new(14);
    tb_input(m, "x", F, 2, TB_DIMS(0, 3));
    const_vec(m, "s", 2, TB_DIMS(0, 3));
    int k = tb_node(m, "Reshape", "x,s", "y");
    tb_attr_i(m, k, "allowzero", 1);
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "0x3");
    tb_done(m, p);
}

static void t_reshape_v1_attr(void) {
    /* opset 1-4: shape is an attribute: [6] -> [2, 3] */
    mp_model *m = tb_new(4);
    tb_input(m, "x", F, 1, TB_DIMS(6));
    int k = tb_node(m, "Reshape", "x", "y");
    tb_attr_ints(m, k, "shape", 2, TB_DIMS(2, 3));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x3");
    tb_done(m, p);
}

static void t_reshape_error(void) {
    /* [2, 3] (6 elements) -> [4, 2] (8 elements): a contradiction */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 2, TB_DIMS(2, 3));
    const_vec(m, "s", 2, TB_DIMS(4, 2));
    int k = tb_node(m, "Reshape", "x,s", "y");
    tb_name(m, k, "bad_reshape");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bad_reshape");
}

static void t_reshape_two_minus_one(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 2, TB_DIMS(2, 3));
    const_vec(m, "s", 2, TB_DIMS(-1, -1));
    int k = tb_node(m, "Reshape", "x,s", "y");
    tb_name(m, k, "two_infer");
    tb_output(m, "y");
    tb_expect_shape_error(m, "two_infer");
}

/* ---- the dynamic-axes chain ---- */

/* x [batch, seq, 768]; s = Shape(x); b = Gather(s, 0); q = Gather(s, 1);
 * Unsqueeze both (axes input, opset 13); shp = Concat(b1, q1, [12, 64]);
 * y = Reshape(x, shp). */
static mp_model *dyn_chain(void) {
    mp_model *m = tb_new(17);
    int64_t b = tb_sym(m, "batch"), s = tb_sym(m, "seq");
    tb_input(m, "x", F, 3, TB_DIMS(b, s, 768));
    const_scalar(m, "i0", 0);
    const_scalar(m, "i1", 1);
    const_vec(m, "ax0", 1, TB_DIMS(0));
    const_vec(m, "heads", 2, TB_DIMS(12, 64));
    tb_node(m, "Shape", "x", "s");
    tb_node(m, "Gather", "s,i0", "b");
    tb_node(m, "Gather", "s,i1", "q");
    tb_node(m, "Unsqueeze", "b,ax0", "b1");
    tb_node(m, "Unsqueeze", "q,ax0", "q1");
    int k = tb_node(m, "Concat", "b1,q1,heads", "shp");
    tb_attr_i(m, k, "axis", 0);
    tb_node(m, "Reshape", "x,shp", "y");
    tb_output(m, "y");
    return m;
}

static void t_dyn_chain_set(void) {
    /* batch=2, seq=128: Shape -> [2,128,768]; Gather -> 2, 128;
     * Concat -> [2,128,12,64]; y = 2x128x12x64 */
    mp_model *m = dyn_chain();
    T_OK(mp_model_set_dim(m, "batch", 2));
    T_OK(mp_model_set_dim(m, "seq", 128));
    mp_profile *p = tb_prof(m);
    tb_check_ints(m, "s", 3, TB_DIMS(2, 128, 768));
    tb_check_ints(m, "b", 1, TB_DIMS(2));
    T_EQ_STR(tb_shape(m, "b"), "scalar");
    T_EQ_STR(tb_shape(m, "b1"), "1");
    tb_check_ints(m, "shp", 4, TB_DIMS(2, 128, 12, 64));
    T_EQ_STR(tb_shape(m, "y"), "2x128x12x64");
    /* Shape reads metadata only: 0 bytes read, 3*8 = 24 written */
    T_EQ_U64(tb_nodep(m, 0)->cost.bytes_read, 0);
    T_EQ_U64(tb_nodep(m, 0)->cost.bytes_written, 24);
    mp_totals t;
    mp_profile_totals(p, &t);
    T_EQ_U64(t.flops, 0);
    T_EQ_U64(t.macs, 0);
    tb_done(m, p);
}

/* PyTorch's export of index_fill / index_put on a shape: Shape's output
 * with one entry scattered in (ScatterElements), then read by an Expand:
 * the scatter's contents are followed, so the Expand has its shape (the
 * run refused it as data-dependent). With reduction add, negative and
 * repeated indices: [2, 3, 4] + {2: 1, -3: 10, 0: 5} = [17, 3, 5]. */
static void t_scatter_shape_contents(void) {
    for (int red = 0; red < 2; red++) {
        mp_model *m = tb_new(16);
        tb_input(m, "x", F, 3, TB_DIMS(2, 3, 4));
        tb_node(m, "Shape", "x", "s");
        if (!red) {
            const_vec(m, "i", 1, TB_DIMS(-2));
            const_vec(m, "u", 1, TB_DIMS(7));
        } else {
            const_vec(m, "i", 3, TB_DIMS(2, -3, 0));
            const_vec(m, "u", 3, TB_DIMS(1, 10, 5));
        }
        int k = tb_node(m, "ScatterElements", "s,i,u", "sc");
        if (red) tb_attr_s(m, k, "reduction", "add");
        tb_const_f(m, "one", F, 1, TB_DIMS(1), (const double[]){1.5});
        tb_node(m, "Expand", "one,sc", "y");
        tb_output(m, "y");
        mp_profile *p = tb_prof(m);
        if (!red) {
            tb_check_ints(m, "sc", 3, TB_DIMS(2, 7, 4));
            T_EQ_STR(tb_shape(m, "y"), "2x7x4");
        } else {
            tb_check_ints(m, "sc", 3, TB_DIMS(17, 3, 5));
            T_EQ_STR(tb_shape(m, "y"), "17x3x5");
        }
        tb_done(m, p);
    }
}

static void t_dyn_chain_unset(void) {
    /* no values: Shape's contents are unknown (contents are real numbers
     * only) and no error is raised; Reshape gets rank 4 (shp is [4]) and
     * traces each entry back through Concat -> Unsqueeze -> Gather -> Shape,
     * so the symbols survive: batch x seq x 12 x 64 */
    mp_model *m = dyn_chain();
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "s"), "3");
    T_EQ(tb_val(m, "s")->kn, -1);
    T_EQ_STR(tb_shape(m, "shp"), "4");
    T_EQ(tb_val(m, "shp")->kn, -1);
    T_EQ_STR(tb_shape(m, "y"), "batchxseqx12x64");
    tb_done(m, p);
}

static void t_dyn_shape_untraceable(void) {
    /* the target shape is a graph input [4]: rank 4, dims anonymous; a
     * target of unknown length gives an unknown rank; no error */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 2, TB_DIMS(6, 4));
    tb_input(m, "t", I64, 1, TB_DIMS(4));
    tb_input(m, "u", I64, 1, TB_DIMS(-1));
    tb_node(m, "Reshape", "x,t", "y");
    tb_node(m, "Reshape", "x,u", "z");
    tb_output(m, "y");
    tb_output(m, "z");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "?x?x?x?");
    T_EQ_STR(tb_shape(m, "z"), "?rank");
    tb_done(m, p);
}

static void t_dyn_traced_patterns(void) {
    /* merge heads: x [batch, seq, 12, 64]; shp = Concat(Slice(Shape(x),
     * 0, 2), [-1]) -> entries (batch, seq, -1); batch and seq cancel, so
     * -1 = 12*64 = 768 -> batch x seq x 768.
     * attention mask: m [batch, 1, 1, seq] expanded to
     * Concat(Unsqueeze(b), [12], Unsqueeze(s), Unsqueeze(s)) with b, s
     * gathered from Shape(x) -> batch x 12 x seq x seq.
     * ConstantOfShape(Concat(Unsqueeze(b), [5])) -> batch x 5 */
    mp_model *m = tb_new(17);
    int64_t b = tb_sym(m, "batch"), s = tb_sym(m, "seq");
    tb_input(m, "x", F, 4, TB_DIMS(b, s, 12, 64));
    tb_input(m, "mask", F, 4, TB_DIMS(b, 1, 1, s));
    const_vec(m, "z0", 1, TB_DIMS(0));
    const_vec(m, "two", 1, TB_DIMS(2));
    const_vec(m, "m1", 1, TB_DIMS(-1));
    const_vec(m, "twelve", 1, TB_DIMS(12));
    const_vec(m, "five", 1, TB_DIMS(5));
    const_scalar(m, "i0", 0);
    const_scalar(m, "i1", 1);
    tb_node(m, "Shape", "x", "sx");
    tb_node(m, "Slice", "sx,z0,two", "bs");
    int k = tb_node(m, "Concat", "bs,m1", "shp");
    tb_attr_i(m, k, "axis", 0);
    tb_node(m, "Reshape", "x,shp", "merged");
    tb_node(m, "Gather", "sx,i0", "gb");
    tb_node(m, "Gather", "sx,i1", "gs");
    tb_node(m, "Unsqueeze", "gb,z0", "ub");
    tb_node(m, "Unsqueeze", "gs,z0", "us");
    k = tb_node(m, "Concat", "ub,twelve,us,us", "eshape");
    tb_attr_i(m, k, "axis", 0);
    tb_node(m, "Expand", "mask,eshape", "emask");
    k = tb_node(m, "Concat", "ub,five", "cshape");
    tb_attr_i(m, k, "axis", 0);
    tb_node(m, "ConstantOfShape", "cshape", "cz");
    tb_output(m, "merged");
    tb_output(m, "emask");
    tb_output(m, "cz");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "merged"), "batchxseqx768");
    T_EQ_STR(tb_shape(m, "emask"), "batchx12xseqxseq");
    T_EQ_STR(tb_shape(m, "cz"), "batchx5");
    tb_done(m, p);
}

static void t_shape_partial(void) {
    /* opset 15 start=-1: Shape of [batch, 7, 768] is [768] (known even
     * though batch is not); start=1,end=2 -> [7] */
    mp_model *m = tb_new(15);
    int64_t b = tb_sym(m, "batch");
    tb_input(m, "x", F, 3, TB_DIMS(b, 7, 768));
    int k = tb_node(m, "Shape", "x", "s");
    tb_attr_i(m, k, "start", -1);
    k = tb_node(m, "Shape", "x", "t");
    tb_attr_i(m, k, "start", 1);
    tb_attr_i(m, k, "end", 2);
    tb_node(m, "Size", "x", "n");
    tb_output(m, "s");
    tb_output(m, "t");
    tb_output(m, "n");
    mp_profile *p = tb_prof(m);
    tb_check_ints(m, "s", 1, TB_DIMS(768));
    tb_check_ints(m, "t", 1, TB_DIMS(7));
    T_EQ_STR(tb_shape(m, "n"), "scalar");
    T_EQ(tb_val(m, "n")->kn, -1); /* batch unknown */
    tb_done(m, p);
}

static void t_symbols_pass_through(void) {
    /* Transpose [batch, seq, 768] perm (1,0,2) -> seq x batch x 768;
     * Unsqueeze axes [0] -> 1 x batch x seq x 768; Concat along axis 2 of
     * two [batch, seq, 4] -> batch x seq x 8 */
    mp_model *m = tb_new(17);
    int64_t b = tb_sym(m, "batch"), s = tb_sym(m, "seq");
    tb_input(m, "x", F, 3, TB_DIMS(b, s, 768));
    tb_input(m, "u", F, 3, TB_DIMS(b, s, 4));
    tb_input(m, "v", F, 3, TB_DIMS(b, s, 4));
    const_vec(m, "ax0", 1, TB_DIMS(0));
    int k = tb_node(m, "Transpose", "x", "t");
    tb_attr_ints(m, k, "perm", 3, TB_DIMS(1, 0, 2));
    tb_node(m, "Unsqueeze", "x,ax0", "e");
    k = tb_node(m, "Concat", "u,v", "c");
    tb_attr_i(m, k, "axis", -1);
    tb_output(m, "t");
    tb_output(m, "e");
    tb_output(m, "c");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "t"), "seqxbatchx768");
    T_EQ_STR(tb_shape(m, "e"), "1xbatchxseqx768");
    T_EQ_STR(tb_shape(m, "c"), "batchxseqx8");
    tb_done(m, p);
}

/* ---- Gather ---- */

static void t_gather(void) {
    /* embedding: table [1000, 64], ids [2, 5] -> 2x5x64; the table is a
     * parameter (64000); the int64 table `data` is not. Gather axis 1 of [3, 4, 5] with scalar -1 ->
     * 3x5. Contents: Gather([10,20,30,40], [-1, 0]) = [40, 10] */
    mp_model *m = tb_new(17);
    tb_weight(m, "emb", F, 2, TB_DIMS(1000, 64));
    tb_input(m, "ids", I64, 2, TB_DIMS(2, 5));
    tb_input(m, "x", F, 3, TB_DIMS(3, 4, 5));
    const_scalar(m, "m1", -1);
    const_vec(m, "data", 4, TB_DIMS(10, 20, 30, 40));
    const_vec(m, "idx", 2, TB_DIMS(-1, 0));
    tb_node(m, "Gather", "emb,ids", "e");
    int k = tb_node(m, "Gather", "x,m1", "g");
    tb_attr_i(m, k, "axis", 1);
    tb_node(m, "Gather", "data,idx", "c");
    tb_output(m, "e");
    tb_output(m, "g");
    tb_output(m, "c");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "e"), "2x5x64");
    T_EQ_STR(tb_shape(m, "g"), "3x5");
    tb_check_ints(m, "c", 2, TB_DIMS(40, 10));
    mp_totals t;
    mp_profile_totals(p, &t);
    T_EQ_U64(t.params, 64000);
    T_EQ_U64(t.flops, 0);
    tb_done(m, p);
}

static void t_gather_out_of_range(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 2, TB_DIMS(3, 4));
    const_scalar(m, "i", 3);
    int k = tb_node(m, "Gather", "x,i", "y");
    tb_name(m, k, "bad_gather");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bad_gather");
}

static void t_gather_elements_nd(void) {
    /* GatherElements: data [[1,2],[3,4]], indices [[0,0],[1,0]] axis 1 ->
     * [[1,1],[4,3]]. GatherND: data [2,3,4], indices [5,2] -> 5x4;
     * batch_dims=1 with indices [2,1] -> 2x4 */
    mp_model *m = tb_new(17);
    tb_const_i(m, "d", I64, 2, TB_DIMS(2, 2), TB_DIMS(1, 2, 3, 4));
    tb_const_i(m, "ix", I64, 2, TB_DIMS(2, 2), TB_DIMS(0, 0, 1, 0));
    tb_input(m, "x", F, 3, TB_DIMS(2, 3, 4));
    tb_input(m, "n1", I64, 2, TB_DIMS(5, 2));
    tb_input(m, "n2", I64, 2, TB_DIMS(2, 1));
    int k = tb_node(m, "GatherElements", "d,ix", "ge");
    tb_attr_i(m, k, "axis", 1);
    tb_node(m, "GatherND", "x,n1", "g1");
    k = tb_node(m, "GatherND", "x,n2", "g2");
    tb_attr_i(m, k, "batch_dims", 1);
    tb_output(m, "ge");
    tb_output(m, "g1");
    tb_output(m, "g2");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "ge"), "2x2");
    tb_check_ints(m, "ge", 4, TB_DIMS(1, 1, 4, 3));
    T_EQ_STR(tb_shape(m, "g1"), "5x4");
    T_EQ_STR(tb_shape(m, "g2"), "2x4");
    tb_done(m, p);
}

/* ---- Concat ---- */

static void t_concat(void) {
    /* [2,3] ++ [2,5] on axis 1 -> 2x8; contents [1,2] ++ [3] -> [1,2,3];
     * 2-D contents [[1],[2]] ++ [[3],[4]] axis 1 -> [[1,3],[2,4]] */
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(2, 3));
    tb_input(m, "b", F, 2, TB_DIMS(2, 5));
    const_vec(m, "p", 2, TB_DIMS(1, 2));
    const_vec(m, "q", 1, TB_DIMS(3));
    tb_const_i(m, "r", I64, 2, TB_DIMS(2, 1), TB_DIMS(1, 2));
    tb_const_i(m, "s", I64, 2, TB_DIMS(2, 1), TB_DIMS(3, 4));
    int k = tb_node(m, "Concat", "a,b", "y");
    tb_attr_i(m, k, "axis", 1);
    k = tb_node(m, "Concat", "p,q", "z");
    tb_attr_i(m, k, "axis", 0);
    k = tb_node(m, "Concat", "r,s", "w");
    tb_attr_i(m, k, "axis", 1);
    tb_output(m, "y");
    tb_output(m, "z");
    tb_output(m, "w");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x8");
    tb_check_ints(m, "z", 3, TB_DIMS(1, 2, 3));
    tb_check_ints(m, "w", 4, TB_DIMS(1, 3, 2, 4));
    tb_done(m, p);
}

static void t_concat_rank_mismatch(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(2, 3));
    tb_input(m, "b", F, 3, TB_DIMS(2, 3, 1));
    int k = tb_node(m, "Concat", "a,b", "y");
    tb_attr_i(m, k, "axis", 0);
    tb_name(m, k, "bad_concat");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bad_concat");
}

static void t_concat_dim_mismatch(void) {
    /* [2,3] ++ [4,5] on axis 0: dim 1 is 3 vs 5 */
    mp_model *m = tb_new(17);
    tb_input(m, "a", F, 2, TB_DIMS(2, 3));
    tb_input(m, "b", F, 2, TB_DIMS(4, 5));
    int k = tb_node(m, "Concat", "a,b", "y");
    tb_attr_i(m, k, "axis", 0);
    tb_name(m, k, "bad_concat2");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bad_concat2");
}

/* ---- Slice ---- */

static void t_slice_neg_steps(void) {
    /* x [10, 8]: axis 0 from -1 (= 9) to INT64_MIN step -2 -> 9,7,5,3,1
     * (5 rows) -> 5x8. Contents of [0..9] from 8 to 1 step -3 -> 8,5,2.
     * Full reversal of a symbolic dim ([-1, INT64_MIN) step -1) keeps it */
    mp_model *m = tb_new(17);
    int64_t b = tb_sym(m, "batch");
    tb_input(m, "x", F, 2, TB_DIMS(10, 8));
    tb_input(m, "z", F, 2, TB_DIMS(b, 8));
    const_vec(m, "st", 1, TB_DIMS(-1));
    const_vec(m, "en", 1, TB_DIMS(INT64_MIN));
    const_vec(m, "ax", 1, TB_DIMS(0));
    const_vec(m, "sp", 1, TB_DIMS(-2));
    const_vec(m, "sp1", 1, TB_DIMS(-1));
    const_vec(m, "r", 10, TB_DIMS(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
    const_vec(m, "s8", 1, TB_DIMS(8));
    const_vec(m, "e1", 1, TB_DIMS(1));
    const_vec(m, "m3", 1, TB_DIMS(-3));
    tb_node(m, "Slice", "x,st,en,ax,sp", "y");
    tb_node(m, "Slice", "r,s8,e1,ax,m3", "c");
    tb_node(m, "Slice", "z,st,en,ax,sp1", "zr");
    tb_node(m, "Slice", "z,st,en,ax,sp", "zs");
    tb_output(m, "y");
    tb_output(m, "c");
    tb_output(m, "zr");
    tb_output(m, "zs");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "5x8");
    T_EQ_STR(tb_shape(m, "c"), "3");
    tb_check_ints(m, "c", 3, TB_DIMS(8, 5, 2));
    T_EQ_STR(tb_shape(m, "zr"), "batchx8");
    T_EQ_STR(tb_shape(m, "zs"), "?x8");
    tb_done(m, p);
}

static void t_slice_clamp_and_attrs(void) {
    /* opset 9 attrs: x [4, 6, 8], axes (1, -1), starts (-100, 2),
     * ends (4, 1000) -> axis 1 [0, 4) = 4, axis 2 [2, 8) = 6 -> 4x4x6.
     * opset 17 without axes/steps on [5, 7]: starts (1), ends (-1) ->
     * axis 0 [1, 4) = 3 -> 3x7. Empty: start 5 end 2 step 1 -> 0 */
    mp_model *m = tb_new(9);
    tb_input(m, "x", F, 3, TB_DIMS(4, 6, 8));
    int k = tb_node(m, "Slice", "x", "y");
    tb_attr_ints(m, k, "axes", 2, TB_DIMS(1, -1));
    tb_attr_ints(m, k, "starts", 2, TB_DIMS(-100, 2));
    tb_attr_ints(m, k, "ends", 2, TB_DIMS(4, 1000));
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "4x4x6");
    tb_done(m, p);

    m = tb_new(17);
    tb_input(m, "x", F, 2, TB_DIMS(5, 7));
    const_vec(m, "s", 1, TB_DIMS(1));
    const_vec(m, "e", 1, TB_DIMS(-1));
    const_vec(m, "s5", 1, TB_DIMS(5));
    const_vec(m, "e2", 1, TB_DIMS(2));
    tb_node(m, "Slice", "x,s,e", "y");
    tb_node(m, "Slice", "x,s5,e2", "z");
    tb_output(m, "y");
    tb_output(m, "z");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "3x7");
    T_EQ_STR(tb_shape(m, "z"), "0x7");
    tb_done(m, p);
}

static void t_slice_unknown_bounds(void) {
    /* starts from a graph input: the sliced axis (axes known = 1) is
     * anonymous, the others pass through -> 4x?x8 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 3, TB_DIMS(4, 6, 8));
    tb_input(m, "s", I64, 1, TB_DIMS(1));
    const_vec(m, "e", 1, TB_DIMS(5));
    const_vec(m, "a", 1, TB_DIMS(1));
    tb_node(m, "Slice", "x,s,e,a", "y");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "4x?x8");
    tb_done(m, p);
}

static void t_slice_zero_step(void) {
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 1, TB_DIMS(5));
    const_vec(m, "s", 1, TB_DIMS(0));
    const_vec(m, "e", 1, TB_DIMS(5));
    const_vec(m, "a", 1, TB_DIMS(0));
    const_vec(m, "z", 1, TB_DIMS(0));
    int k = tb_node(m, "Slice", "x,s,e,a,z", "y");
    tb_name(m, k, "zero_step");
    tb_output(m, "y");
    tb_expect_shape_error(m, "zero_step");
}

/* ---- Range ---- */

static void t_range_contents(void) {
    /* int: Range(0, 10, 3) = [0, 3, 6, 9] (ceil(10/3) = 4);
     * Range(10, 4, -2) = [10, 8, 6]; Range(5, 5, 1) = [] (0 elements);
     * float: Range(1, 2, 0.25) = [1, 1.25, 1.5, 1.75] */
    mp_model *m = tb_new(17);
    const_scalar(m, "z", 0);
    const_scalar(m, "ten", 10);
    const_scalar(m, "three", 3);
    const_scalar(m, "four", 4);
    const_scalar(m, "m2", -2);
    const_scalar(m, "five", 5);
    const_scalar(m, "one", 1);
    tb_const_f(m, "f1", F, 0, NULL, (const double[]){1.0});
    tb_const_f(m, "f2", F, 0, NULL, (const double[]){2.0});
    tb_const_f(m, "fq", F, 0, NULL, (const double[]){0.25});
    tb_node(m, "Range", "z,ten,three", "a");
    tb_node(m, "Range", "ten,four,m2", "b");
    tb_node(m, "Range", "five,five,one", "c");
    tb_node(m, "Range", "f1,f2,fq", "d");
    tb_output(m, "a");
    tb_output(m, "b");
    tb_output(m, "c");
    tb_output(m, "d");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "a"), "4");
    tb_check_ints(m, "a", 4, TB_DIMS(0, 3, 6, 9));
    tb_check_ints(m, "b", 3, TB_DIMS(10, 8, 6));
    T_EQ_STR(tb_shape(m, "c"), "0");
    T_EQ_STR(tb_shape(m, "d"), "4");
    T_EQ(tb_val(m, "d")->dtype, F);
    tb_check_floats(m, "d", 4, (const double[]){1.0, 1.25, 1.5, 1.75});
    tb_done(m, p);
}

static void t_range_unknown(void) {
    /* limit from an input: [?] */
    mp_model *m = tb_new(17);
    const_scalar(m, "z", 0);
    const_scalar(m, "one", 1);
    tb_input(m, "n", I64, 0, NULL);
    tb_node(m, "Range", "z,n,one", "r");
    tb_output(m, "r");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "r"), "?");
    tb_done(m, p);
}

/* ---- Expand, Tile, Pad ---- */

static void t_expand(void) {
    /* [3, 1] to shape [2, 1, 4] -> 2x3x4 (both sides broadcast); contents
     * [[1],[2]] expanded to [2, 3] -> [1,1,1,2,2,2]; [batch, 1] to
     * [1, 16] -> batch x 16 */
    mp_model *m = tb_new(17);
    int64_t b = tb_sym(m, "batch");
    tb_input(m, "x", F, 2, TB_DIMS(3, 1));
    tb_input(m, "z", F, 2, TB_DIMS(b, 1));
    const_vec(m, "s", 3, TB_DIMS(2, 1, 4));
    tb_const_i(m, "c", I64, 2, TB_DIMS(2, 1), TB_DIMS(1, 2));
    const_vec(m, "s23", 2, TB_DIMS(2, 3));
    const_vec(m, "s16", 2, TB_DIMS(1, 16));
    int k = tb_node(m, "Expand", "x,s", "y");
    tb_node(m, "Expand", "c,s23", "e");
    tb_node(m, "Expand", "z,s16", "w");
    tb_output(m, "y");
    tb_output(m, "e");
    tb_output(m, "w");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "2x3x4");
    tb_check_ints(m, "e", 6, TB_DIMS(1, 1, 1, 2, 2, 2));
    T_EQ_STR(tb_shape(m, "w"), "batchx16");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 0);
    tb_done(m, p);
}

static void t_expand_error(void) {
    /* [3] cannot broadcast to [4] */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 1, TB_DIMS(3));
    const_vec(m, "s", 1, TB_DIMS(4));
    int k = tb_node(m, "Expand", "x,s", "y");
    tb_name(m, k, "bad_expand");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bad_expand");
}

static void t_tile_pad(void) {
    /* Tile [2, 3] by (2, 1) -> 4x3; contents [1,2] tiled x2 -> [1,2,1,2].
     * Pad opset 11 [1, 3, 4, 4] pads (0,0,1,1, 0,0,1,1) -> 1x3x6x6; opset 2
     * attribute pads with a crop (0,-1, 0,2) on [5, 5] -> 5x6;
     * opset 18 with axes (3) and pads (2, 2) on [1,3,4,4] -> 1x3x4x8 */
    mp_model *m = tb_new(18);
    tb_input(m, "x", F, 2, TB_DIMS(2, 3));
    const_vec(m, "r", 2, TB_DIMS(2, 1));
    const_vec(m, "c", 2, TB_DIMS(1, 2));
    const_vec(m, "r2", 1, TB_DIMS(2));
    tb_input(m, "im", F, 4, TB_DIMS(1, 3, 4, 4));
    const_vec(m, "pads", 8, TB_DIMS(0, 0, 1, 1, 0, 0, 1, 1));
    const_vec(m, "p2", 2, TB_DIMS(2, 2));
    const_vec(m, "a3", 1, TB_DIMS(3));
    tb_node(m, "Tile", "x,r", "t");
    tb_node(m, "Tile", "c,r2", "tc");
    tb_node(m, "Pad", "im,pads", "pd");
    tb_node(m, "Pad", "im,p2,,a3", "pa");
    tb_output(m, "t");
    tb_output(m, "tc");
    tb_output(m, "pd");
    tb_output(m, "pa");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "t"), "4x3");
    tb_check_ints(m, "tc", 4, TB_DIMS(1, 2, 1, 2));
    T_EQ_STR(tb_shape(m, "pd"), "1x3x6x6");
    T_EQ_STR(tb_shape(m, "pa"), "1x3x4x8");
    tb_done(m, p);

    m = tb_new(2);
    tb_input(m, "x", F, 2, TB_DIMS(5, 5));
    int k = tb_node(m, "Pad", "x", "y");
    tb_attr_ints(m, k, "pads", 4, TB_DIMS(0, -1, 0, 2));
    tb_output(m, "y");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "5x6");
    tb_done(m, p);
}

/* ---- Split ---- */

static void t_split_forms(void) {
    /* opset 11, split attr (2, 4) on axis 1 of [3, 6] -> 3x2, 3x4;
     * equal split without sizes into 3 -> 3x2 each */
    mp_model *m = tb_new(11);
    tb_input(m, "x", F, 2, TB_DIMS(3, 6));
    int k = tb_node(m, "Split", "x", "a,b");
    tb_attr_i(m, k, "axis", 1);
    tb_attr_ints(m, k, "split", 2, TB_DIMS(2, 4));
    k = tb_node(m, "Split", "x", "e1,e2,e3");
    tb_attr_i(m, k, "axis", 1);
    tb_output(m, "a");
    tb_output(m, "b");
    tb_output(m, "e3");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "a"), "3x2");
    T_EQ_STR(tb_shape(m, "b"), "3x4");
    T_EQ_STR(tb_shape(m, "e1"), "3x2");
    T_EQ_STR(tb_shape(m, "e3"), "3x2");
    tb_done(m, p);

    /* opset 13, split input (1, 2) on [3, 4] axis 0 -> 1x4, 2x4; contents
     * of [10,20,30] split (1, 2) -> [10], [20, 30] */
    m = tb_new(13);
    tb_input(m, "x", F, 2, TB_DIMS(3, 4));
    const_vec(m, "sp", 2, TB_DIMS(1, 2));
    const_vec(m, "v", 3, TB_DIMS(10, 20, 30));
    tb_node(m, "Split", "x,sp", "a,b");
    tb_node(m, "Split", "v,sp", "va,vb");
    tb_output(m, "a");
    tb_output(m, "b");
    tb_output(m, "va");
    tb_output(m, "vb");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "a"), "1x4");
    T_EQ_STR(tb_shape(m, "b"), "2x4");
    tb_check_ints(m, "va", 1, TB_DIMS(10));
    tb_check_ints(m, "vb", 2, TB_DIMS(20, 30));
    tb_done(m, p);

    /* opset 18, num_outputs 3 on a dim of 10: ceil(10/3) = 4 -> 4, 4, 2 */
    m = tb_new(18);
    tb_input(m, "x", F, 1, TB_DIMS(10));
    k = tb_node(m, "Split", "x", "a,b,c");
    tb_attr_i(m, k, "num_outputs", 3);
    tb_output(m, "a");
    tb_output(m, "c");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "a"), "4");
    T_EQ_STR(tb_shape(m, "b"), "4");
    T_EQ_STR(tb_shape(m, "c"), "2");
    tb_done(m, p);
}

static void t_split_errors(void) {
    /* sizes (2, 2) do not sum to 6 */
    mp_model *m = tb_new(13);
    tb_input(m, "x", F, 1, TB_DIMS(6));
    const_vec(m, "sp", 2, TB_DIMS(2, 2));
    int k = tb_node(m, "Split", "x,sp", "a,b");
    tb_name(m, k, "bad_split");
    tb_output(m, "a");
    tb_expect_shape_error(m, "bad_split");

    /* 7 does not split evenly into 2 */
    m = tb_new(13);
    tb_input(m, "x", F, 1, TB_DIMS(7));
    k = tb_node(m, "Split", "x", "a,b");
    tb_name(m, k, "uneven_split");
    tb_output(m, "a");
    tb_expect_shape_error(m, "uneven_split");
}

/* ---- Squeeze / Unsqueeze ---- */

static void t_squeeze_unsqueeze_versions(void) {
    /* opset 11 (attrs): Unsqueeze [3, 4] axes (0, -1) -> output rank 4:
     * 1x3x4x1; Squeeze [1, 3, 1, 4] axes (0, 2) -> 3x4; Squeeze without
     * axes -> 3x4 */
    mp_model *m = tb_new(11);
    tb_input(m, "x", F, 2, TB_DIMS(3, 4));
    tb_input(m, "z", F, 4, TB_DIMS(1, 3, 1, 4));
    int k = tb_node(m, "Unsqueeze", "x", "u");
    tb_attr_ints(m, k, "axes", 2, TB_DIMS(0, -1));
    k = tb_node(m, "Squeeze", "z", "s");
    tb_attr_ints(m, k, "axes", 2, TB_DIMS(0, 2));
    tb_node(m, "Squeeze", "z", "s2");
    tb_output(m, "u");
    tb_output(m, "s");
    tb_output(m, "s2");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "u"), "1x3x4x1");
    T_EQ_STR(tb_shape(m, "s"), "3x4");
    T_EQ_STR(tb_shape(m, "s2"), "3x4");
    tb_done(m, p);

    /* opset 13 (inputs): same results; contents pass through Unsqueeze */
    m = tb_new(13);
    tb_input(m, "x", F, 2, TB_DIMS(3, 4));
    tb_input(m, "z", F, 4, TB_DIMS(1, 3, 1, 4));
    const_vec(m, "ua", 2, TB_DIMS(0, -1));
    const_vec(m, "sa", 2, TB_DIMS(0, 2));
    const_scalar(m, "seven", 7);
    const_vec(m, "a0", 1, TB_DIMS(0));
    tb_node(m, "Unsqueeze", "x,ua", "u");
    tb_node(m, "Squeeze", "z,sa", "s");
    tb_node(m, "Squeeze", "z", "s2");
    tb_node(m, "Unsqueeze", "seven,a0", "sv");
    tb_output(m, "u");
    tb_output(m, "s");
    tb_output(m, "s2");
    tb_output(m, "sv");
    p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "u"), "1x3x4x1");
    T_EQ_STR(tb_shape(m, "s"), "3x4");
    T_EQ_STR(tb_shape(m, "s2"), "3x4");
    T_EQ_STR(tb_shape(m, "sv"), "1");
    tb_check_ints(m, "sv", 1, TB_DIMS(7));
    tb_done(m, p);
}

static void t_squeeze_error(void) {
    /* axis 1 has size 3: cannot squeeze */
    mp_model *m = tb_new(13);
    tb_input(m, "x", F, 2, TB_DIMS(1, 3));
    const_vec(m, "a", 1, TB_DIMS(1));
    int k = tb_node(m, "Squeeze", "x,a", "y");
    tb_name(m, k, "bad_squeeze");
    tb_output(m, "y");
    tb_expect_shape_error(m, "bad_squeeze");
}

/* ---- Transpose, Flatten, Cast, Identity ---- */

static void t_transpose_flatten(void) {
    /* Transpose default reverses [2, 3, 4] -> 4x3x2; contents of
     * [[1,2,3],[4,5,6]] transposed -> [1,4,2,5,3,6]. Flatten [2,3,4,5]
     * axis 2 -> 6x20; axis 0 -> 1x120; [batch, 3, 4] axis 1 -> batch x 12 */
    mp_model *m = tb_new(17);
    int64_t b = tb_sym(m, "batch");
    tb_input(m, "x", F, 3, TB_DIMS(2, 3, 4));
    tb_input(m, "f", F, 4, TB_DIMS(2, 3, 4, 5));
    tb_input(m, "z", F, 3, TB_DIMS(b, 3, 4));
    tb_const_i(m, "c", I64, 2, TB_DIMS(2, 3), TB_DIMS(1, 2, 3, 4, 5, 6));
    tb_node(m, "Transpose", "x", "t");
    tb_node(m, "Transpose", "c", "ct");
    int k = tb_node(m, "Flatten", "f", "f2");
    tb_attr_i(m, k, "axis", 2);
    k = tb_node(m, "Flatten", "f", "f0");
    tb_attr_i(m, k, "axis", 0);
    tb_node(m, "Flatten", "z", "fz");
    tb_output(m, "t");
    tb_output(m, "ct");
    tb_output(m, "f2");
    tb_output(m, "f0");
    tb_output(m, "fz");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "t"), "4x3x2");
    tb_check_ints(m, "ct", 6, TB_DIMS(1, 4, 2, 5, 3, 6));
    T_EQ_STR(tb_shape(m, "f2"), "6x20");
    T_EQ_STR(tb_shape(m, "f0"), "1x120");
    T_EQ_STR(tb_shape(m, "fz"), "batchx12");
    tb_done(m, p);
}

static void t_cast(void) {
    /* Cast [2.7, -1.5, 0] to int64 -> [2, -1, 0] (truncation); to bool ->
     * [1, 1, 0]; int [3, 300] to uint8 -> [3, 44] (300 mod 256); int to
     * float keeps values; CastLike takes input 1's dtype */
    mp_model *m = tb_new(17);
    tb_const_f(m, "f", F, 1, TB_DIMS(3), (const double[]){2.7, -1.5, 0.0});
    const_vec(m, "i", 2, TB_DIMS(3, 300));
    tb_input(m, "like", F, 1, TB_DIMS(1));
    int k = tb_node(m, "Cast", "f", "a");
    tb_attr_i(m, k, "to", I64);
    k = tb_node(m, "Cast", "f", "b");
    tb_attr_i(m, k, "to", MP_DT_BOOL);
    k = tb_node(m, "Cast", "i", "c");
    tb_attr_i(m, k, "to", MP_DT_UINT8);
    tb_node(m, "CastLike", "i,like", "d");
    tb_node(m, "Identity", "i", "e");
    tb_output(m, "a");
    tb_output(m, "b");
    tb_output(m, "c");
    tb_output(m, "d");
    tb_output(m, "e");
    mp_profile *p = tb_prof(m);
    tb_check_ints(m, "a", 3, TB_DIMS(2, -1, 0));
    T_EQ(tb_val(m, "a")->dtype, I64);
    tb_check_ints(m, "b", 3, TB_DIMS(1, 1, 0));
    tb_check_ints(m, "c", 2, TB_DIMS(3, 44));
    T_EQ(tb_val(m, "d")->dtype, F);
    tb_check_floats(m, "d", 2, (const double[]){3.0, 300.0});
    tb_check_ints(m, "e", 2, TB_DIMS(3, 300));
    tb_done(m, p);

    /* opset 1-5: `to` is a type name */
    m = tb_new(5);
    const_vec(m, "i", 2, TB_DIMS(3, 300));
    k = tb_node(m, "Cast", "i", "a");
    tb_attr_s(m, k, "to", "FLOAT");
    tb_output(m, "a");
    p = tb_prof(m);
    T_EQ(tb_val(m, "a")->dtype, F);
    tb_check_floats(m, "a", 2, (const double[]){3.0, 300.0});
    tb_done(m, p);
}

/* ---- Constant, ConstantOfShape, EyeLike ---- */

static void t_constant(void) {
    /* value tensor int64 [2] = (4, 5) -> contents read from raw data;
     * value_ints (1, 2, 3) -> [3]; value_float 0.5 -> fp32 scalar;
     * ConstantOfShape([2, 3]) with value int64 7 -> 2x3 of 7s; without
     * value -> fp32 zeros */
    mp_model *m = tb_new(17);
    int k = tb_node(m, "Constant", "", "a");
    attr_tensor(m, k, "value", I64, 1, TB_DIMS(2), TB_DIMS(4, 5), NULL);
    k = tb_node(m, "Constant", "", "b");
    tb_attr_ints(m, k, "value_ints", 3, TB_DIMS(1, 2, 3));
    k = tb_node(m, "Constant", "", "c");
    tb_attr_f(m, k, "value_float", 0.5);
    const_vec(m, "s", 2, TB_DIMS(2, 3));
    k = tb_node(m, "ConstantOfShape", "s", "d");
    attr_tensor(m, k, "value", I64, 1, TB_DIMS(1), TB_DIMS(7), NULL);
    tb_node(m, "ConstantOfShape", "s", "e");
    k = tb_node(m, "Concat", "a,b", "ab");
    tb_attr_i(m, k, "axis", 0);
    tb_output(m, "ab");
    tb_output(m, "c");
    tb_output(m, "d");
    tb_output(m, "e");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "a"), "2");
    tb_check_ints(m, "a", 2, TB_DIMS(4, 5));
    tb_check_ints(m, "b", 3, TB_DIMS(1, 2, 3));
    tb_check_ints(m, "ab", 5, TB_DIMS(4, 5, 1, 2, 3));
    T_EQ_STR(tb_shape(m, "c"), "scalar");
    tb_check_floats(m, "c", 1, (const double[]){0.5});
    T_EQ_STR(tb_shape(m, "d"), "2x3");
    T_EQ(tb_val(m, "d")->dtype, I64);
    tb_check_ints(m, "d", 6, TB_DIMS(7, 7, 7, 7, 7, 7));
    T_EQ(tb_val(m, "e")->dtype, F);
    tb_check_floats(m, "e", 6, (const double[]){0, 0, 0, 0, 0, 0});
    tb_done(m, p);
}

static void t_constant_of_shape_unknown(void) {
    /* shape input from a graph input [3]: rank 3, dims unknown */
    mp_model *m = tb_new(17);
    tb_input(m, "s", I64, 1, TB_DIMS(3));
    tb_input(m, "x", F, 2, TB_DIMS(4, 4));
    tb_node(m, "ConstantOfShape", "s", "y");
    int k = tb_node(m, "EyeLike", "x", "eye");
    tb_attr_i(m, k, "dtype", I64);
    tb_output(m, "y");
    tb_output(m, "eye");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "y"), "?x?x?");
    T_EQ_STR(tb_shape(m, "eye"), "4x4");
    T_EQ(tb_val(m, "eye")->dtype, I64);
    tb_done(m, p);
}

/* ---- the rest ---- */

static void t_cumsum(void) {
    /* CumSum [1,2,3,4] axis 0 -> [1,3,6,10]; exclusive reverse -> [9,7,4,0].
     * Cost: 1 FLOP per element: [8, 16] -> 128 FLOPs */
    mp_model *m = tb_new(17);
    const_vec(m, "v", 4, TB_DIMS(1, 2, 3, 4));
    const_scalar(m, "a", 0);
    tb_input(m, "x", F, 2, TB_DIMS(8, 16));
    tb_node(m, "CumSum", "v,a", "c");
    int k = tb_node(m, "CumSum", "v,a", "r");
    tb_attr_i(m, k, "exclusive", 1);
    tb_attr_i(m, k, "reverse", 1);
    k = tb_node(m, "CumSum", "x,a", "y");
    tb_output(m, "c");
    tb_output(m, "r");
    tb_output(m, "y");
    mp_profile *p = tb_prof(m);
    tb_check_ints(m, "c", 4, TB_DIMS(1, 3, 6, 10));
    tb_check_ints(m, "r", 4, TB_DIMS(9, 7, 4, 0));
    T_EQ_STR(tb_shape(m, "y"), "8x16");
    T_EQ_U64(tb_nodep(m, k)->cost.flops, 128);
    T_EQ_U64(tb_nodep(m, k)->cost.macs, 0);
    tb_done(m, p);
}

static void t_data_dependent(void) {
    /* NonZero [3, 4] -> 2x?; known [0, 5, 0, 7] -> 1x2. Compress [6, 4]
     * axis 0 with an unknown condition -> ?x4; with known (1,0,1) -> 2x4.
     * Unique [10] -> Y ?, inverse 10 */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 2, TB_DIMS(3, 4));
    tb_input(m, "w", F, 2, TB_DIMS(6, 4));
    tb_input(m, "cond", MP_DT_BOOL, 1, TB_DIMS(6));
    tb_input(m, "u", F, 1, TB_DIMS(10));
    const_vec(m, "nz", 4, TB_DIMS(0, 5, 0, 7));
    tb_const_i(m, "cc", MP_DT_BOOL, 1, TB_DIMS(3), TB_DIMS(1, 0, 1));
    tb_node(m, "NonZero", "x", "n");
    tb_node(m, "NonZero", "nz", "n2");
    int k = tb_node(m, "Compress", "w,cond", "c");
    tb_attr_i(m, k, "axis", 0);
    k = tb_node(m, "Compress", "w,cc", "c2");
    tb_attr_i(m, k, "axis", 0);
    tb_node(m, "Unique", "u", "uy,ui,uinv,uc");
    tb_output(m, "n");
    tb_output(m, "n2");
    tb_output(m, "c");
    tb_output(m, "c2");
    tb_output(m, "uy");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "n"), "2x?");
    T_EQ_STR(tb_shape(m, "n2"), "1x2");
    T_EQ_STR(tb_shape(m, "c"), "?x4");
    T_EQ_STR(tb_shape(m, "c2"), "2x4");
    T_EQ_STR(tb_shape(m, "uy"), "?");
    T_EQ_STR(tb_shape(m, "uinv"), "10");
    tb_done(m, p);
}

static void t_misc_shapes(void) {
    /* OneHot indices [4, 5], depth 10, axis -1 -> 4x5x10 (dtype of values).
     * DepthToSpace [1, 16, 3, 3] b=2 -> 1x4x6x6; SpaceToDepth [1, 4, 6, 6]
     * b=3 -> 1x36x2x2. Trilu / ReverseSequence keep the shape. ScatterND
     * keeps data's shape, 0 FLOPs; with reduction add, 1 FLOP per update
     * element: updates [2, 4] -> 8 */
    mp_model *m = tb_new(18);
    tb_input(m, "ind", I64, 2, TB_DIMS(4, 5));
    const_scalar(m, "depth", 10);
    tb_const_f(m, "vals", F, 1, TB_DIMS(2), (const double[]){0, 1});
    tb_input(m, "d2s", F, 4, TB_DIMS(1, 16, 3, 3));
    tb_input(m, "s2d", F, 4, TB_DIMS(1, 4, 6, 6));
    tb_input(m, "data", F, 2, TB_DIMS(5, 4));
    tb_input(m, "sidx", I64, 2, TB_DIMS(2, 1));
    tb_input(m, "upd", F, 2, TB_DIMS(2, 4));
    tb_node(m, "OneHot", "ind,depth,vals", "oh");
    int k = tb_node(m, "DepthToSpace", "d2s", "ds");
    tb_attr_i(m, k, "blocksize", 2);
    k = tb_node(m, "SpaceToDepth", "s2d", "sd");
    tb_attr_i(m, k, "blocksize", 3);
    tb_node(m, "Trilu", "data", "tr");
    int k1 = tb_node(m, "ScatterND", "data,sidx,upd", "sc");
    int k2 = tb_node(m, "ScatterND", "data,sidx,upd", "sc2");
    tb_attr_s(m, k2, "reduction", "add");
    tb_output(m, "oh");
    tb_output(m, "ds");
    tb_output(m, "sd");
    tb_output(m, "tr");
    tb_output(m, "sc");
    tb_output(m, "sc2");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "oh"), "4x5x10");
    T_EQ(tb_val(m, "oh")->dtype, F);
    T_EQ_STR(tb_shape(m, "ds"), "1x4x6x6");
    T_EQ_STR(tb_shape(m, "sd"), "1x36x2x2");
    T_EQ_STR(tb_shape(m, "tr"), "5x4");
    T_EQ_STR(tb_shape(m, "sc"), "5x4");
    T_EQ_U64(tb_nodep(m, k1)->cost.flops, 0);
    T_EQ_U64(tb_nodep(m, k2)->cost.flops, 8);
    tb_done(m, p);
}

static void t_unknown_rank_flows(void) {
    /* an input of unknown rank goes through every op without error */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, -1, NULL);
    const_vec(m, "s", 2, TB_DIMS(0, -1));
    const_vec(m, "a", 1, TB_DIMS(0));
    const_vec(m, "st", 1, TB_DIMS(1));
    const_vec(m, "en", 1, TB_DIMS(3));
    tb_node(m, "Reshape", "x,s", "r");
    tb_node(m, "Unsqueeze", "x,a", "u");
    tb_node(m, "Squeeze", "x", "q");
    tb_node(m, "Slice", "x,st,en", "sl");
    tb_node(m, "Transpose", "x", "t");
    tb_node(m, "Shape", "x", "sh");
    int k = tb_node(m, "Concat", "x,x", "c");
    tb_attr_i(m, k, "axis", 0);
    tb_node(m, "Flatten", "x", "f");
    tb_node(m, "Split", "x", "p1,p2");
    tb_output(m, "r");
    tb_output(m, "u");
    tb_output(m, "q");
    tb_output(m, "sl");
    tb_output(m, "t");
    tb_output(m, "sh");
    tb_output(m, "c");
    tb_output(m, "f");
    tb_output(m, "p1");
    mp_profile *p = tb_prof(m);
    T_EQ_STR(tb_shape(m, "r"), "?x?");
    T_EQ_STR(tb_shape(m, "sh"), "?");
    T_EQ_STR(tb_shape(m, "t"), "?rank");
    T_EQ_STR(tb_shape(m, "f"), "?x?");
    tb_done(m, p);
}

static void t_missing_input(void) {
    /* Gather with one input: an error naming the node, no crash */
    mp_model *m = tb_new(17);
    tb_input(m, "x", F, 2, TB_DIMS(3, 4));
    int k = tb_node(m, "Gather", "x", "y");
    tb_name(m, k, "lonely_gather");
    tb_output(m, "y");
    tb_expect_shape_error(m, "lonely_gather");
}

/* Trilu's contents when its input and k are known: lower with k = -1 on
 * 3 x 4 ones (a sliding window's exclusion, j <= i - 1), upper with k = 1
 * on -2 (a causal mask's -inf part, j >= i + 1). */
static void t_trilu_contents(void) {
    mp_model *m = tb_new(14);
    double ones[12], neg[12];
    for (int i = 0; i < 12; i++) ones[i] = 1.0, neg[i] = -2.0;
    tb_const_f(m, "ones", MP_DT_FLOAT, 2, TB_DIMS(3, 4), ones);
    tb_const_f(m, "neg", MP_DT_FLOAT, 2, TB_DIMS(3, 4), neg);
    tb_const_i(m, "km", MP_DT_INT64, 0, NULL, TB_DIMS(-1));
    tb_const_i(m, "kp", MP_DT_INT64, 0, NULL, TB_DIMS(1));
    int lo = tb_node(m, "Trilu", "ones,km", "lo");
    tb_attr_i(m, lo, "upper", 0);
    tb_node(m, "Trilu", "neg,kp", "up");
    tb_output(m, "lo");
    tb_output(m, "up");
    mp_profile *p = tb_prof(m);
    tb_check_floats(m, "lo", 12, (const double[]){0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0});
    tb_check_floats(m, "up", 12, (const double[]){0, -2, -2, -2, 0, 0, -2, -2, 0, 0, 0, -2});
    tb_done(m, p);
}

MP_TESTS(ops_shape){
    {"reshape_infer", t_reshape_infer},
    {"reshape_symbolic", t_reshape_symbolic},
    {"reshape_allowzero", t_reshape_allowzero},
    {"reshape_v1_attr", t_reshape_v1_attr},
    {"reshape_error", t_reshape_error},
    {"reshape_two_minus_one", t_reshape_two_minus_one},
    {"dyn_chain_set", t_dyn_chain_set},
    {"scatter_shape_contents", t_scatter_shape_contents},
    {"dyn_chain_unset", t_dyn_chain_unset},
    {"dyn_shape_untraceable", t_dyn_shape_untraceable},
    {"dyn_traced_patterns", t_dyn_traced_patterns},
    {"shape_partial", t_shape_partial},
    {"symbols_pass_through", t_symbols_pass_through},
    {"gather", t_gather},
    {"gather_out_of_range", t_gather_out_of_range},
    {"gather_elements_nd", t_gather_elements_nd},
    {"concat", t_concat},
    {"concat_rank_mismatch", t_concat_rank_mismatch},
    {"concat_dim_mismatch", t_concat_dim_mismatch},
    {"slice_neg_steps", t_slice_neg_steps},
    {"slice_clamp_and_attrs", t_slice_clamp_and_attrs},
    {"slice_unknown_bounds", t_slice_unknown_bounds},
    {"slice_zero_step", t_slice_zero_step},
    {"range_contents", t_range_contents},
    {"range_unknown", t_range_unknown},
    {"expand", t_expand},
    {"expand_error", t_expand_error},
    {"tile_pad", t_tile_pad},
    {"split_forms", t_split_forms},
    {"split_errors", t_split_errors},
    {"squeeze_unsqueeze_versions", t_squeeze_unsqueeze_versions},
    {"squeeze_error", t_squeeze_error},
    {"transpose_flatten", t_transpose_flatten},
    {"cast", t_cast},
    {"constant", t_constant},
    {"constant_of_shape_unknown", t_constant_of_shape_unknown},
    {"cumsum", t_cumsum},
    {"data_dependent", t_data_dependent},
    {"misc_shapes", t_misc_shapes},
    {"unknown_rank_flows", t_unknown_rank_flows},
    {"missing_input", t_missing_input},
    {"trilu_contents", t_trilu_contents},
};
MP_TESTS_END(ops_shape)
