/* The perfctr test programs' check: a failed condition prints its line and is counted; the
 * program prints "N failures" at its end (capi/tests/perfctr.rs). */
#ifndef PERFCTR_CHECK_H
#define PERFCTR_CHECK_H

#include <stdio.h>

static int failures;
#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            printf("FAILED line %d: %s\n", __LINE__, #c);                     \
            failures++;                                                       \
        }                                                                     \
    } while (0)

#endif
