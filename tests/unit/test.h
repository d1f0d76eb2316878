/* A tiny test harness: TAP output, libuv-style asserts that print both values.
 *
 *   TEST(name) { ASSERT_EQ(1 + 1, 2); }
 *   int main(void) { RUN(name); return test_done(); }
 *
 * A failed assert ends the current test and marks it failed; test_done() returns 1 if any
 * failed, 77 if every test skipped, else 0. */
#ifndef MCPBOX_TEST_H
#define MCPBOX_TEST_H

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

static int test_count, test_failed, test_skipped;
static jmp_buf test_jmp;
static const char *test_skip_reason;

#define TEST(name) static void test_##name(void)

#define RUN(name)                                                                                  \
    do {                                                                                           \
        test_count++;                                                                              \
        test_skip_reason = NULL;                                                                   \
        int _r = setjmp(test_jmp);                                                                 \
        if (_r == 0) {                                                                             \
            test_##name();                                                                         \
            printf("ok %d - %s\n", test_count, #name);                                             \
        } else if (_r == 2) {                                                                      \
            test_skipped++;                                                                        \
            printf("ok %d - %s # SKIP %s\n", test_count, #name, test_skip_reason);                 \
        } else {                                                                                   \
            test_failed++;                                                                         \
            printf("not ok %d - %s\n", test_count, #name);                                         \
        }                                                                                          \
        fflush(stdout);                                                                            \
    } while (0)

#define SKIP(reason)                                                                               \
    do {                                                                                           \
        test_skip_reason = (reason);                                                               \
        longjmp(test_jmp, 2);                                                                      \
    } while (0)

#define TEST_FAIL(...)                                                                             \
    do {                                                                                           \
        printf("# %s:%d: ", __FILE__, __LINE__);                                                   \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        longjmp(test_jmp, 1);                                                                      \
    } while (0)

#define ASSERT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond))                                                                               \
            TEST_FAIL("assertion failed: %s", #cond);                                              \
    } while (0)

#define ASSERT_EQ(a, b)                                                                            \
    do {                                                                                           \
        long long _a = (long long)(a), _b = (long long)(b);                                        \
        if (_a != _b)                                                                              \
            TEST_FAIL("%s == %s: %lld != %lld", #a, #b, _a, _b);                                   \
    } while (0)

#define ASSERT_STR_EQ(a, b)                                                                        \
    do {                                                                                           \
        const char *_a = (a), *_b = (b);                                                           \
        if (_a == NULL || _b == NULL || strcmp(_a, _b) != 0)                                       \
            TEST_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, _a ? _a : "(null)",                    \
                      _b ? _b : "(null)");                                                         \
    } while (0)

#define ASSERT_CONTAINS(hay, needle)                                                               \
    do {                                                                                           \
        const char *_h = (hay), *_n = (needle);                                                    \
        if (_h == NULL || strstr(_h, _n) == NULL)                                                  \
            TEST_FAIL("\"%s\" does not contain \"%s\"", _h ? _h : "(null)", _n);                  \
    } while (0)

static inline int test_done(void)
{
    printf("1..%d\n", test_count);
    if (test_failed)
        return 1;
    if (test_count > 0 && test_skipped == test_count)
        return 77;
    return 0;
}

#endif
