/* OpenBLAS for the measured run's matrix products (see blas.h): loaded on
 * first use with dlopen, its two functions reached through pointers, so
 * neither the command nor a static profile ever maps it. */
#include "run/blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef void (*mp__cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *,
                                   int, float, float *, int);
typedef void (*mp__blas_threads_fn)(int);

static pthread_once_t mp__blas_once = PTHREAD_ONCE_INIT;
static mp__cblas_sgemm_fn mp__blas_gemm;
static mp__blas_threads_fn mp__blas_set_threads;
static pthread_mutex_t mp__blas_mu = PTHREAD_MUTEX_INITIALIZER;
static int mp__blas_threads;

const char *mp_blas_coretype_choice(const char *max_isa, const char *coretype) {
    if (coretype) return NULL; /* the user's, even empty */
    if (!max_isa) return NULL;
    /* oneDNN's names: SSE41, AVX, AVX2, AVX2_VNNI, AVX512_CORE... */
    if (strncasecmp(max_isa, "AVX2", 4) == 0) return "Haswell";
    if (strcasecmp(max_isa, "AVX") == 0) return "Sandybridge";
    if (strcasecmp(max_isa, "SSE41") == 0) return "Nehalem";
    return NULL;
}

static void mp__blas_load(void) {
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
    const char *ct = mp_blas_coretype_choice(getenv("ONEDNN_MAX_CPU_ISA"), getenv("OPENBLAS_CORETYPE"));
    if (ct) setenv("OPENBLAS_CORETYPE", ct, 1);
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    mp__cblas_sgemm_fn f = (mp__cblas_sgemm_fn)dlsym(h, "cblas_sgemm");
    mp__blas_threads_fn t = (mp__blas_threads_fn)dlsym(h, "openblas_set_num_threads");
    if (!f || !t) {
        dlclose(h);
        return;
    }
    mp__blas_gemm = f;
    mp__blas_set_threads = t;
}

bool mp_blas_available(void) {
    pthread_once(&mp__blas_once, mp__blas_load);
    return mp__blas_gemm != NULL;
}

void mp_blas_sgemm(int threads, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                   int64_t ldc) {
    if (!mp_blas_available()) return;
    if (threads < 1) threads = 1;
    pthread_mutex_lock(&mp__blas_mu);
    if (mp__blas_threads != threads) {
        mp__blas_set_threads(threads);
        mp__blas_threads = threads;
    }
    pthread_mutex_unlock(&mp__blas_mu);
    /* CblasRowMajor 101, CblasNoTrans 111, CblasTrans 112 */
    mp__blas_gemm(101, ta ? 112 : 111, tb ? 112 : 111, (int)M, (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb,
                  beta, C, (int)ldc);
}
