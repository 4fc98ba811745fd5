/* Assertions for the railyard examples: abort with file:line, the failed
 * expression and the library's last error message. Shared by C and C++. */
#ifndef RY_EXAMPLE_CHECK_H
#define RY_EXAMPLE_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "railyard.h"

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n",          \
              __FILE__, __LINE__, #cond, ry_last_error_message());           \
      abort();                                                               \
    }                                                                        \
  } while (0)

/* A call that must succeed. */
#define OK(call) CHECK((call) == RY_STATUS_OK)

/* A call that must fail with `status` and leave a non-empty message. */
#define FAILS_WITH(call, status)                                             \
  do {                                                                       \
    ry_status st_ = (call);                                                  \
    if (st_ != (status)) {                                                   \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n",           \
              __FILE__, __LINE__, #call, ry_status_name(st_),                \
              ry_status_name(status), ry_last_error_message());              \
      abort();                                                               \
    }                                                                        \
    CHECK(ry_last_error_message()[0] != '\0');                               \
  } while (0)

#endif
