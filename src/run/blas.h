/* A second fp32 GEMM for the measured run: OpenBLAS (Debian
 * libopenblas0-pthread), loaded with dlopen on first use like oneDNN. The
 * oneDNN glue (dnnl.c) times it against its own matmul primitive and
 * dnnl_sgemm once per product shape at plan time and keeps the fastest. */
#ifndef MP_RUN_BLAS_H
#define MP_RUN_BLAS_H

#include <stdbool.h>
#include <stdint.h>

/* Whether libopenblas.so.0 could be loaded (first call loads it). Before
 * the dlopen: OPENBLAS_THREAD_TIMEOUT=4 unless the user set it (its
 * threads would otherwise spin after each call and take the cores from
 * the next kernel), and OPENBLAS_CORETYPE=Haswell when ONEDNN_MAX_CPU_ISA
 * limits the run to AVX2 and the user set no core type (the same ISA for
 * both libraries). */
bool mp_blas_available(void);

/* Row-major C[M,N] = alpha op(A) op(B) + beta C with `threads` threads
 * (OpenBLAS's pthreads). Only when mp_blas_available(). */
void mp_blas_sgemm(int threads, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                   int64_t ldc);

/* The value the loader sets OPENBLAS_CORETYPE to for a user's
 * ONEDNN_MAX_CPU_ISA and OPENBLAS_CORETYPE (NULL: unset): NULL sets
 * nothing. */
const char *mp_blas_coretype_choice(const char *max_isa, const char *coretype);

#endif
