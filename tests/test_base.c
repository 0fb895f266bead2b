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

/* The one set of dim helpers (graph/graph.h): a symbol survives x * 1,
 * x + 0, x / 1 (whichever side it is on), x * 0 is 0, and anything else with
 * an unknown dim is anonymous; known dims past MP_DIM_MAX are unknown. */
static void t_dim_arith(void) {
    int64_t batch = MP_DIM_OF_SYM(1), seq = MP_DIM_OF_SYM(2);
    T_EQ(mp_dim_mul(1, seq), seq); /* at_mul (ops/attention.c) lost the symbol here */
    T_EQ(mp_dim_mul(seq, 1), seq);
    T_EQ(mp_dim_mul(0, seq), 0);
    T_EQ(mp_dim_mul(seq, 0), 0);
    T_EQ(mp_dim_mul(batch, seq), MP_DIM_ANON);
    T_EQ(mp_dim_mul(2, seq), MP_DIM_ANON);
    T_EQ(mp_dim_mul(12, 64), 768);
    T_EQ(mp_dim_mul(MP_DIM_MAX, 2), MP_DIM_ANON);
    T_EQ(mp_dim_mul(INT64_MAX, INT64_MAX), MP_DIM_ANON);
    T_EQ(mp_dim_add(0, seq), seq);
    T_EQ(mp_dim_add(seq, 0), seq);
    T_EQ(mp_dim_add(seq, 1), MP_DIM_ANON);
    T_EQ(mp_dim_add(seq, seq), MP_DIM_ANON);
    T_EQ(mp_dim_add(3, 4), 7);
    T_EQ(mp_dim_add(MP_DIM_MAX + 1, 1), MP_DIM_ANON);
    bool ok;
    T_EQ(mp_dim_div(seq, 1, &ok), seq);
    T_CHECK(ok);
    T_EQ(mp_dim_div(768, 12, &ok), 64);
    T_CHECK(ok);
    T_EQ(mp_dim_div(770, 12, &ok), MP_DIM_ANON);
    T_CHECK(!ok);
    T_EQ(mp_dim_div(seq, 2, &ok), MP_DIM_ANON);
    T_CHECK(ok);
    int64_t d = 0;
    T_CHECK(mp_dim_merge(seq, 8, &d) && d == 8);
    T_CHECK(mp_dim_merge(MP_DIM_ANON, seq, &d) && d == seq);
    T_CHECK(mp_dim_merge(seq, MP_DIM_ANON, &d) && d == seq);
    T_CHECK(mp_dim_merge(batch, seq, &d) && d == batch);
    T_CHECK(!mp_dim_merge(8, 9, &d));
}

MP_TESTS(base){
    {"dim_arith", t_dim_arith},
    {"arena", t_arena},
    {"strmap", t_strmap},
    {"checked_arithmetic", t_checked},
    {"dtypes", t_dtypes},
    {"errors", t_errors},
};
MP_TESTS_END(base)
