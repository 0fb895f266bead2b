/* What src/ops/nn.c (normalization, pooling, convolution and activation rules) and nn_kernels.c
 * (their reference kernels) share: the kernels the descriptor table names
 * and the rule helpers the kernels call. Internal to the two files. */
#ifndef MP_OPS_NN_INT_H
#define MP_OPS_NN_INT_H

#include "ops/kernel.h"
#include "ops/scalar.h"
#include <math.h>
#include <stdlib.h>

bool nnk_f32(const mp_rtensor *t);
mp_status mp_kconv(mp_kctx *k);
mp_status nnk_conv_transpose(mp_kctx *k);
mp_status nnk_maxpool(mp_kctx *k);
mp_status nnk_avgpool(mp_kctx *k);
mp_status nnk_lppool(mp_kctx *k);
mp_status nnk_gmaxpool(mp_kctx *k);
mp_status nnk_gavgpool(mp_kctx *k);
mp_status nnk_glppool(mp_kctx *k);
mp_status nnk_batchnorm(mp_kctx *k);
mp_status nnk_instancenorm(mp_kctx *k);
mp_status mp_klayernorm(mp_kctx *k);
mp_status nnk_groupnorm(mp_kctx *k);
mp_status nnk_lpnorm(mp_kctx *k);
mp_status nnk_reduce(mp_kctx *k);
mp_status nnk_argminmax(mp_kctx *k);
mp_status nnk_softmax(mp_kctx *k);
mp_status nnk_mvn(mp_kctx *k);
mp_status nnk_lrn(mp_kctx *k);
mp_status nnk_dropout(mp_kctx *k);
mp_status nnk_resize(mp_kctx *k);
void train_conv(mp_ctx *c, mp_bwd *t);
void train_maxpool(mp_ctx *c, mp_bwd *t);
void train_pool(mp_ctx *c, mp_bwd *t);
void train_batchnorm(mp_ctx *c, mp_bwd *t);
void train_layernorm(mp_ctx *c, mp_bwd *t);
void train_groupnorm(mp_ctx *c, mp_bwd *t);
void train_softmax(mp_ctx *c, mp_bwd *t);
void train_reduce(mp_ctx *c, mp_bwd *t);
void train_dropout(mp_ctx *c, mp_bwd *t);
void train_resize(mp_ctx *c, mp_bwd *t);
void train_lrn(mp_ctx *c, mp_bwd *t);

#endif
