/* A small thread pool for mp_kparallel: threads-1 workers wait on a
 * condition variable; the calling thread takes chunks too, then waits for
 * the last chunk to finish. One job at a time (steps run in order). */
#include "run/run.h"

#include <stdatomic.h>
#include <stdlib.h>

struct mp_pool {
    pthread_t *th;
    int n;             /* workers (threads - 1) */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;      /* bumped for each job */
    bool stop;
    mp_range_fn fn;
    void *arg;
    int64_t total, chunk;
    atomic_llong next;
    int busy;          /* workers still on the current job */
};

static void mp__pool_work(mp_pool *p) {
    for (;;) {
        int64_t lo = (int64_t)atomic_fetch_add(&p->next, p->chunk);
        if (lo >= p->total) break;
        int64_t hi = lo + p->chunk < p->total ? lo + p->chunk : p->total;
        p->fn(p->arg, lo, hi);
    }
}

static void *mp__pool_main(void *arg) {
    mp_pool *p = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen) pthread_cond_wait(&p->go, &p->mu);
        if (p->stop) break;
        seen = p->gen;
        pthread_mutex_unlock(&p->mu);
        mp__pool_work(p);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

mp_status mp_pool_create(int threads, mp_pool **out) {
    *out = NULL;
    if (threads <= 1) return MP_OK;
    mp_pool *p = calloc(1, sizeof *p);
    if (!p) return mp_error(MP_ERR_NOMEM, "out of memory");
    p->th = calloc((size_t)threads, sizeof *p->th);
    if (!p->th) {
        free(p);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->next, 0);
    for (int i = 0; i < threads - 1; i++) {
        if (pthread_create(&p->th[i], NULL, mp__pool_main, p) != 0) break;
        p->n++;
    }
    *out = p;
    return MP_OK;
}

void mp_pool_free(mp_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n; i++) pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->th);
    free(p);
}

void mp_pool_run(mp_pool *p, int64_t n, mp_range_fn fn, void *arg) {
    if (!p || p->n == 0) {
        fn(arg, 0, n);
        return;
    }
    int64_t parts = (int64_t)(p->n + 1) * 4;
    int64_t chunk = (n + parts - 1) / parts;
    if (chunk < 1) chunk = 1;
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->total = n;
    p->chunk = chunk;
    atomic_store(&p->next, 0);
    p->busy = p->n;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    mp__pool_work(p);
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
