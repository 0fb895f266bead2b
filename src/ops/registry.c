/* The operator registry: joins the family tables into one lookup. */
#include "ops/ops.h"

#include <pthread.h>
#include <stdlib.h>

static mp_strmap mp__ops_by_name;   /* "domain::name" -> first entry index */
static const mp_op **mp__ops;       /* all entries, grouped by name */
static int mp__n_ops;
static pthread_once_t mp__once = PTHREAD_ONCE_INIT;
static char (*mp__keys)[96];
static int *mp__next;               /* next entry with the same name, -1 */

/* "domain::name" into key (cap bytes); false when it does not fit. */
static bool mp__key(char *key, size_t cap, const char *domain, const char *name) {
    size_t d = strlen(domain), n = strlen(name);
    if (d + n + 3 > cap) return false;
    memcpy(key, domain, d);
    memcpy(key + d, "::", 2);
    memcpy(key + d + 2, name, n + 1);
    return true;
}

static void mp__registry_build(void) {
    int total = 0;
#define MP__COUNT(f) total += mp_ops_##f##_count;
    MP_OP_FAMILIES(MP__COUNT)
#undef MP__COUNT
    mp__ops = calloc((size_t)total, sizeof *mp__ops);
    mp__keys = calloc((size_t)total, sizeof *mp__keys);
    mp__next = calloc((size_t)total, sizeof *mp__next);
    if (!mp__ops || !mp__keys || !mp__next) return;
    int k = 0;
#define MP__ADD(f)                                              \
    for (int i = 0; i < mp_ops_##f##_count; i++) mp__ops[k++] = &mp_ops_##f[i];
    MP_OP_FAMILIES(MP__ADD)
#undef MP__ADD
    mp__n_ops = k;
    for (int i = 0; i < k; i++) {
        if (!mp__key(mp__keys[i], sizeof mp__keys[i], mp__ops[i]->domain, mp__ops[i]->name)) {
            mp__next[i] = -1; /* (no registered name is that long) */
            continue;
        }
        mp__next[i] = mp_strmap_get(&mp__ops_by_name, mp__keys[i]);
        mp_strmap_put(&mp__ops_by_name, mp__keys[i], i);
    }
}

const mp_op *mp_op_find(const char *domain, const char *name, int opset) {
    pthread_once(&mp__once, mp__registry_build);
    char key[160];
    if (strcmp(domain, "ai.onnx") == 0) domain = "";
    if (!mp__key(key, sizeof key, domain, name)) return NULL; /* no op has so long a name */
    const mp_op *best = NULL;
    for (int i = mp_strmap_get(&mp__ops_by_name, key); i >= 0; i = mp__next[i]) {
        const mp_op *o = mp__ops[i];
        if (o->since <= opset && (!best || o->since > best->since)) best = o;
    }
    return best;
}

int mp_op_registry_size(void) {
    pthread_once(&mp__once, mp__registry_build);
    return mp__n_ops;
}

const mp_op *mp_op_registry_at(int i) {
    pthread_once(&mp__once, mp__registry_build);
    return (i >= 0 && i < mp__n_ops) ? mp__ops[i] : NULL;
}
