/* Basics: arena, name map, checked arithmetic, dtype table, errors. */
#include "base/base.h"
#include "graph/graph.h"
#include "test.h"

static void t_arena(void) {
    mp_arena a;
    mp_arena_init(&a);
    char *s = mp_arena_strdup(&a, "hello");
    T_EQ_STR(s, "hello");
    /* a large block beyond the default size */
    char *big = mp_arena_alloc(&a, 1 << 20);
    T_CHECK(big != NULL);
    T_CHECK(((uintptr_t)big & 15) == 0);
    char *f = mp_arena_printf(&a, "%s-%d", "x", 42);
    T_EQ_STR(f, "x-42");
    int cap = 0;
    int *arr = NULL;
    for (int i = 0; i < 1000; i++) {
        arr = mp_arena_grow(&a, arr, sizeof *arr, &cap, i + 1);
        arr[i] = i;
    }
    T_EQ(arr[999], 999);
    mp_arena_free(&a);
}

static void t_strmap(void) {
    mp_strmap m = {0};
    char keys[2000][16];
    for (int i = 0; i < 2000; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        T_OK(mp_strmap_put(&m, keys[i], i));
    }
    T_EQ(mp_strmap_get(&m, "k1234"), 1234);
    T_EQ(mp_strmap_get(&m, "nope"), -1);
    T_EQ(mp_strmap_getn(&m, "k12345", 4), 123);
    T_OK(mp_strmap_put(&m, keys[5], 77));
    T_EQ(mp_strmap_get(&m, "k5"), 77);
    T_EQ(m.n, 2000);
    mp_strmap_free(&m);
}

static void t_checked(void) {
    bool ovf = false;
    T_EQ_U64(mp_umul(1ull << 40, 1ull << 20, &ovf), 1ull << 60);
    T_CHECK(!ovf);
    T_EQ_U64(mp_umul(1ull << 40, 1ull << 30, &ovf), UINT64_MAX);
    T_CHECK(ovf);
    ovf = false;
    T_EQ_U64(mp_uadd(UINT64_MAX - 1, 5, &ovf), UINT64_MAX);
    T_CHECK(ovf);
    int64_t d[3] = {1 << 30, 1 << 30, 1 << 30};
    T_EQ(mp_dims_product(d, 3), -2); /* 2^90 overflows */
    int64_t u[2] = {4, -1};
    T_EQ(mp_dims_product(u, 2), -1);
    T_EQ(mp_dims_product(NULL, 0), 1);
}

static void t_dtypes(void) {
    T_EQ_STR(mp_dtype_name(MP_DT_FLOAT), "fp32");
    T_EQ_STR(mp_dtype_name(MP_DT_BFLOAT16), "bf16");
    T_EQ_STR(mp_dtype_name(MP_DT_INT4), "int4");
    T_EQ(mp_dtype_bits(MP_DT_FLOAT16), 16);
    T_EQ_U64(mp_dtype_bytes(MP_DT_INT4, 3), 2); /* 12 bits round up */
    T_EQ_U64(mp_dtype_bytes(MP_DT_FLOAT, 10), 40);
    T_CHECK(mp_dtype_is_float(MP_DT_BFLOAT16));
    T_CHECK(!mp_dtype_is_float(MP_DT_INT8));
    T_CHECK(mp_dtype_is_int(MP_DT_BOOL));
    T_EQ_STR(mp_dtype_name(999), "?");
}

static void t_errors(void) {
    T_EQ_STR(mp_status_name(MP_ERR_FORMAT), "format");
    T_EQ_STR(mp_status_name((mp_status)99), "unknown");
    T_CHECK(mp_error(MP_ERR_SHAPE, "node '%s' bad", "n1") == MP_ERR_SHAPE);
    T_EQ_STR(mp_last_error(), "node 'n1' bad");
    mp_error_clear();
    T_EQ_STR(mp_last_error(), "");
}

MP_TESTS(base){
    {"arena", t_arena},
    {"strmap", t_strmap},
    {"checked_arithmetic", t_checked},
    {"dtypes", t_dtypes},
    {"errors", t_errors},
};
MP_TESTS_END(base)
