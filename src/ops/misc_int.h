/* What src/ops/misc.c (miscellaneous operators' rules) and misc_kernels.c
 * (their reference kernels) share: the kernels the descriptor table names
 * and the rule helpers the kernels call. Internal to the two files. */
#ifndef MP_OPS_MISC_INT_H
#define MP_OPS_MISC_INT_H

#include "ops/kernel.h"
#include <math.h>
#include <stdlib.h>
#include <stdio.h>

mp_status msk_nll_run(mp_kctx *k);
mp_status msk_sce(mp_kctx *k);
mp_status msk_topk(mp_kctx *k);
mp_status msk_window(mp_kctx *k);
mp_status msk_det(mp_kctx *k);
mp_status msk_maxunpool(mp_kctx *k);
mp_status msk_dft(mp_kctx *k);
mp_status msk_stft(mp_kctx *k);
mp_status msk_nms(mp_kctx *k);
mp_status msk_gridsample(mp_kctx *k);
mp_status msk_tfidf(mp_kctx *k);
mp_status msk_melweight(mp_kctx *k);
mp_status msk_roialign(mp_kctx *k);
mp_status msk_rng_prep(mp_kctx *k, size_t *scratch);
mp_status msk_random(mp_kctx *k);

#endif
