/*
 * mcp_test.h - the few assertion macros unit tests share. Each test file is its own
 * program (registered with ctest as unit_<file>); a failed check prints where and why
 * and the program exits non-zero at the end.
 */
#ifndef MCPNET_TEST_H
#define MCPNET_TEST_H

#include <stdio.h>
#include <string.h>

static int mcp_test_failures;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      mcp_test_failures++;                                                     \
    }                                                                          \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                                           \
  do {                                                                                               \
    long long _a = (long long)(a), _b = (long long)(b);                                              \
    if (_a != _b) {                                                                                  \
      fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b, _a, _b); \
      mcp_test_failures++;                                                                           \
    }                                                                                                \
  } while (0)

#define CHECK_EQ_STR(a, b)                                                                      \
  do {                                                                                          \
    const char *_a = (a), *_b = (b);                                                            \
    if (_a == NULL || _b == NULL || strcmp(_a, _b) != 0) {                                      \
      fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__, #a, #b, \
              _a ? _a : "(null)", _b ? _b : "(null)");                                          \
      mcp_test_failures++;                                                                      \
    }                                                                                           \
  } while (0)

#define RUN_TEST(fn)                                                        \
  do {                                                                      \
    int _before = mcp_test_failures;                                        \
    fn();                                                                   \
    printf("%s %s\n", mcp_test_failures == _before ? "ok  " : "FAIL", #fn); \
  } while (0)

#define TEST_EXIT() (mcp_test_failures == 0 ? 0 : 1)

#endif
