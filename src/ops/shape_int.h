/* What src/ops/shape.c (shape and data-movement rules) and shape_kernels.c
 * (their reference kernels) share: the kernels the descriptor table names
 * and the rule helpers the kernels call. Internal to the two files. */
#ifndef MP_OPS_SHAPE_INT_H
#define MP_OPS_SHAPE_INT_H

#include "ops/kernel.h"
#include "load/load.h"
#include <math.h>
#include <stdlib.h>
#include <strings.h>

size_t shk_esize(mp_kctx *k, int dt, mp_status *st);
mp_status shk_copy(mp_kctx *k);
mp_status shk_shape(mp_kctx *k);
mp_status shk_size(mp_kctx *k);
mp_status shk_cast(mp_kctx *k);
mp_status shk_transpose(mp_kctx *k);
mp_status shk_concat(mp_kctx *k);
mp_status shk_split(mp_kctx *k);
mp_status shk_slice(mp_kctx *k);
mp_status shk_expand(mp_kctx *k);
mp_status shk_tile(mp_kctx *k);
mp_status shk_gather(mp_kctx *k);
mp_status shk_gather_elements(mp_kctx *k);
mp_status shk_scatter_elements(mp_kctx *k);
mp_status shk_gather_nd(mp_kctx *k);
mp_status shk_scatter_nd(mp_kctx *k);
mp_status shk_scatter_prepare(mp_kctx *k, size_t *scratch);
mp_status shk_pad(mp_kctx *k);
mp_status shk_range(mp_kctx *k);
mp_status shk_constant_of_shape(mp_kctx *k);
mp_status shk_constant(mp_kctx *k);
mp_status shk_eye_like(mp_kctx *k);
mp_status mp_ktrilu(mp_kctx *k);
mp_status shk_one_hot(mp_kctx *k);
mp_status shk_cumsum(mp_kctx *k);
mp_status shk_depth_to_space(mp_kctx *k);
mp_status shk_space_to_depth(mp_kctx *k);
mp_status shk_reverse_sequence(mp_kctx *k);
mp_status shk_non_zero(mp_kctx *k);
mp_status shk_compress(mp_kctx *k);
mp_status shk_unique(mp_kctx *k);

#endif
