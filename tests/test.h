/* A small test harness: each test file defines a table of tests; the
 * runner (test_main.c) runs every test in its own process. */
#ifndef MP_TEST_H
#define MP_TEST_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct mp_test {
    const char *name;
    void (*fn)(void);
} mp_test;

extern int mp_t_failures;
void mp_t_fail(const char *file, int line, const char *fmt, ...);
/* A path for file `name` in the test's own temporary folder (removed when
 * the test ends); the buffer is reused by the next call. */
const char *mp_t_path(const char *name);

#define T_CHECK(c)                                                     \
    do {                                                               \
        if (!(c)) mp_t_fail(__FILE__, __LINE__, "check failed: %s", #c); \
    } while (0)
#define T_EQ(a, b)                                                         \
    do {                                                                   \
        long long t_a_ = (long long)(a), t_b_ = (long long)(b);            \
        if (t_a_ != t_b_)                                                  \
            mp_t_fail(__FILE__, __LINE__, "%s == %lld, expected %s == %lld", \
                      #a, t_a_, #b, t_b_);                                 \
    } while (0)
#define T_EQ_U64(a, b)                                                      \
    do {                                                                    \
        uint64_t t_a_ = (uint64_t)(a), t_b_ = (uint64_t)(b);                \
        if (t_a_ != t_b_)                                                   \
            mp_t_fail(__FILE__, __LINE__, "%s == %" PRIu64 ", expected %s == %" PRIu64, \
                      #a, t_a_, #b, t_b_);                                  \
    } while (0)
#define T_EQ_STR(a, b)                                                     \
    do {                                                                   \
        const char *t_a_ = (a), *t_b_ = (b);                               \
        if (!t_a_ || !t_b_ || strcmp(t_a_, t_b_) != 0)                     \
            mp_t_fail(__FILE__, __LINE__, "%s == \"%s\", expected \"%s\"", #a, \
                      t_a_ ? t_a_ : "(null)", t_b_ ? t_b_ : "(null)");       \
    } while (0)
#define T_OK(st)                                                             \
    do {                                                                     \
        int t_st_ = (int)(st);                                               \
        if (t_st_ != 0)                                                      \
            mp_t_fail(__FILE__, __LINE__, "%s failed (%d): %s", #st, t_st_,  \
                      mp_last_error());                                      \
    } while (0)

/* Each test file: MP_TESTS(name) { {"a", test_a}, ... } */
#define MP_TEST_FILES(X) \
    X(base)              \
    X(load)              \
    X(ops_elementwise)   \
    X(ops_nn)            \
    X(ops_linalg)        \
    X(ops_shape)         \
    X(ops_control)       \
    X(ops_contrib)       \
    X(ops_quant)         \
    X(ops_misc)          \
    X(ops_opset23)       \
    X(analyze)           \
    X(report)            \
    X(report_formats)    \
    X(models)            \
    X(dynamo)            \
    X(patterns)          \
    X(formula)           \
    X(unknown)           \
    X(params)            \
    X(cli)               \
    X(malformed)         \
    X(kernels)           \
    X(run)               \
    X(run_cli)           \
    X(dnnl)              \
    X(rnn)               \
    X(trace)             \
    X(trace_legacy)      \
    X(trace_diff)        \
    X(trace_job)         \
    X(ort)               \
    X(plan)              \
    X(finetune)          \
    X(plan_step)         \
    X(memory)

#define MP__DECL_TESTS(f)              \
    extern const mp_test mp_tests_##f[]; \
    extern const int mp_tests_##f##_count;
MP_TEST_FILES(MP__DECL_TESTS)
#undef MP__DECL_TESTS

#define MP_TESTS(f) const mp_test mp_tests_##f[] =
#define MP_TESTS_END(f) \
    const int mp_tests_##f##_count = (int)(sizeof mp_tests_##f / sizeof mp_tests_##f[0]);

#endif
