/* Build small models in code for unit tests (no protobuf involved). */
#ifndef MP_TBUILD_H
#define MP_TBUILD_H

#include "analyze/profile.h"
#include "graph/graph.h"
#include "ops/ops.h"

/* A model with a default-domain opset. */
mp_model *tb_new(int opset);
/* Graph input; dims < 0 are unknown. Symbolic dims: use tb_sym(). */
int tb_input(mp_model *m, const char *name, int dtype, int rank, const int64_t *dims);
int64_t tb_sym(mp_model *m, const char *name);
/* Initializer without data (weightless). */
int tb_weight(mp_model *m, const char *name, int dtype, int rank, const int64_t *dims);
/* Initializer with known integer (or float when fv) contents. */
int tb_const_i(mp_model *m, const char *name, int dtype, int rank, const int64_t *dims,
               const int64_t *iv);
int tb_const_f(mp_model *m, const char *name, int dtype, int rank, const int64_t *dims,
               const double *fv);
/* Node: inputs and outputs are comma-separated value names; an empty name
 * ("a,,c") is an omitted optional input. Returns the node index. */
int tb_node(mp_model *m, const char *op, const char *ins, const char *outs);
int tb_node_d(mp_model *m, const char *domain, const char *op, const char *ins,
              const char *outs);
void tb_name(mp_model *m, int node, const char *name);
void tb_attr_i(mp_model *m, int node, const char *name, int64_t v);
void tb_attr_f(mp_model *m, int node, const char *name, double v);
void tb_attr_s(mp_model *m, int node, const char *name, const char *s);
void tb_attr_ints(mp_model *m, int node, const char *name, int n, const int64_t *v);
void tb_attr_floats(mp_model *m, int node, const char *name, int n, const double *v);
void tb_attr_strings(mp_model *m, int node, const char *name, int n, const char *const *v);
void tb_output(mp_model *m, const char *name);
/* Import `domain` at `version` beside the default domain (com.microsoft
 * operators need it to resolve). */
void tb_opset(mp_model *m, const char *domain, int version);
/* Ask node's train rule (after tb_profile) what its backward keeps and
 * costs with inputs `rg` needing a gradient; false when it has none. */
bool tb_train(mp_model *m, int node, uint32_t rg, mp_bwd *t);
/* Infer and cost: returns the status of mp_profile_static. */
mp_status tb_profile(mp_model *m, mp_profile **p);
mp_value *tb_val(mp_model *m, const char *name);
mp_node *tb_nodep(mp_model *m, int node);
/* Convenience: dims of value as a string "2x3x?", for T_EQ_STR. */
const char *tb_shape(mp_model *m, const char *name);

/* Test conveniences: profile (a failure is reported), free both, expect a
 * shape error whose message names `name`, check known contents. */
mp_profile *tb_prof(mp_model *m);
/* A model file loaded (*m) and profiled statically; a failure is reported
 * and gives NULL (free both with tb_done). */
mp_profile *tb_prof_file(const char *path, mp_model **m);
void tb_done(mp_model *m, mp_profile *p);
/* The planner's hand-count model: x[b,in] -> MatMul W1[in,hid] -> Relu (r)
 * -> MatMul W2[hid,out] -> y, fp32, opset 17. */
mp_model *tb_mlp2(int64_t b, int64_t in, int64_t hid, int64_t out);
/* Gemma-2's softcapped attention on inputs q, k, v [1, 2, 6, 8]: s = q .
 * k^T, s1 = s * 0.25, s2 = s1 / 50, s3 = tanh(s2), s4 = s3 * 50, p =
 * softmax(s4), y = p . v. */
void tb_softcap_attention(mp_model *m);
/* An eager attention's two ends over inputs q, k, v [B, H, S, D]: the
 * scores s = q @ Transpose(k, (0, 1, 3, 2)) (tb_scores), and from what the
 * caller made of them, p = Softmax(in) on the last axis, y = p @ v, the
 * model's output (tb_attend). */
void tb_scores(mp_model *m);
void tb_attend(mp_model *m, const char *in);
void tb_expect_shape_error(mp_model *m, const char *name);
void tb_check_ints(mp_model *m, const char *name, int64_t n, const int64_t *want);
void tb_check_floats(mp_model *m, const char *name, int64_t n, const double *want);

#define TB_DIMS(...) ((const int64_t[]){__VA_ARGS__})

#endif
