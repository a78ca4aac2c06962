// ACCY_CHECK: broken invariants (compiler bugs) abort with a message. User
// mistakes never reach a CHECK; they are absl::Status errors.
#ifndef ACCY_BASE_CHECK_H_
#define ACCY_BASE_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define ACCY_CHECK(cond, ...)                                                   \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                        \
      std::fprintf(stderr, "\n");                                               \
      std::abort();                                                             \
    }                                                                           \
  } while (0)

#endif  // ACCY_BASE_CHECK_H_
