/* What src/ops/contrib.c (com.microsoft operators' rules) and contrib_kernels.c
 * (their reference kernels) share: the kernels the descriptor table names
 * and the rule helpers the kernels call. Internal to the two files. */
#ifndef MP_OPS_CONTRIB_INT_H
#define MP_OPS_CONTRIB_INT_H

#include "ops/kernel.h"
#include "ops/scalar.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

mp_status ctk_simplified_ln(mp_kctx *k);
mp_status ctk_skipln(mp_kctx *k);
mp_status ctk_skip_simplified_ln(mp_kctx *k);
mp_status ctk_gelu(mp_kctx *k);
mp_status ctk_quick_gelu(mp_kctx *k);
mp_status ctk_fast_gelu(mp_kctx *k);
mp_status ctk_bias_add(mp_kctx *k);
mp_status ctk_matmul_int_to_float(mp_kctx *k);
mp_status ctk_matmul_integer16(mp_kctx *k);
mp_status ctk_dyn_quant_matmul(mp_kctx *k);
mp_status ctk_matmul_nbits(mp_kctx *k);
mp_status ctk_fused_gemm(mp_kctx *k);
mp_status ctk_fused_conv(mp_kctx *k);
mp_status ctk_gemm_fast_gelu(mp_kctx *k);
mp_status ctk_qlinear_add(mp_kctx *k);
mp_status ctk_qlinear_mul(mp_kctx *k);
mp_status ctk_mul_integer(mp_kctx *k);
mp_status ctk_qunary(mp_kctx *k);
mp_status ctk_inverse(mp_kctx *k);
mp_status ctk_bias_split_gelu(mp_kctx *k);
mp_status ctk_bias_softmax(mp_kctx *k);
mp_status ctk_attention(mp_kctx *k);
mp_status ctk_mha(mp_kctx *k);
mp_status ctk_embed_ln(mp_kctx *k);
mp_status ctk_rope(mp_kctx *k);
mp_status ctk_qlinear_softmax(mp_kctx *k);
mp_status ctk_qlinear_reduce_mean(mp_kctx *k);
mp_status ctk_qlinear_where(mp_kctx *k);
mp_status ctk_qlinear_concat(mp_kctx *k);
mp_status ctk_qlinear_gap(mp_kctx *k);
mp_status ctk_groupnorm(mp_kctx *k);
mp_status ctk_qattention(mp_kctx *k);
mp_status ctk_qgemm(mp_kctx *k);
mp_status ctk_skip_groupnorm(mp_kctx *k);
mp_status ctk_gqa(mp_kctx *k);
mp_status ctk_gather_bq(mp_kctx *k);

#endif
