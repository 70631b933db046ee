/* One event in both arguments, as legacy callers counted cycles: start_counters(0, 0) and
 * read_counters(0, &c0, 0, &c1). The event is counted once and both counts are its count,
 * with the usual generations; print_counters and print_costs list it once; two different
 * events of one counter still conflict. tests/fortran/perfex_same_event.f makes the same
 * calls in the same order, so both print the same standard error.
 * argv[1]: "sim" (PERFCOMPAT_BACKEND=sim:r10000, cycles injected, exact) or "perf" (event 0
 * mapped to page-faults by PERFCOMPAT_EVENTS, pages really touched). */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "libperfex.h"
#include "pages.h"
#include "perfcompat.h"

static int fails;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); fails++; } } while (0)

/* Emulated: `n` cycles through the test hook. Real: `n` fresh pages, one page fault each. */
static void work(int sim, long long n) {
    if (sim) {
        CHECK(perfcompat_sim_advance("0", (uint64_t)n) == 1);
    } else {
        touch((long)n);
    }
}

/* Exact on the emulation; on perf at least the pages touched, plus a little start-up. */
static int about(int sim, long long got, long long want) {
    return sim ? got == want : got >= want && got < want + 50;
}

int main(int argc, char **argv) {
    int sim = argc > 1 && strcmp(argv[1], "sim") == 0;
    long long c0 = -1, c1 = -2, x0 = -7, x1 = -7;

    int g = start_counters(0, 0);
    CHECK(g > 0);
    work(sim, sim ? 123456 : 700);
    int gr = read_counters(0, &c0, 0, &c1);
    CHECK(gr == g);
    CHECK(c0 == c1);
    CHECK(about(sim, c0, sim ? 123456 : 700));
    CHECK(print_counters(0, c0, 0, c1) == gr);
    CHECK(print_costs(0, c0, 0, c1) == gr);

    /* A second pair: a new generation, its own interval. */
    int g2 = start_counters(0, 0);
    CHECK(g2 > 0 && g2 != g);
    work(sim, sim ? 1000 : 10);
    CHECK(read_counters(0, &c0, 0, &c1) == g2);
    CHECK(c0 == c1 && about(sim, c0, sim ? 1000 : 10));

    /* Reading other events than the started ones, or after the read, is still an error. */
    errno = 0;
    CHECK(read_counters(0, &x0, 0, &x1) < 0 && errno == EINVAL);
    CHECK(start_counters(0, 0) > 0);
    errno = 0;
    CHECK(read_counters(0, &x0, 25, &x1) < 0 && errno == EINVAL);
    CHECK(x0 == -7 && x1 == -7);
    CHECK(read_counters(0, &c0, 0, &c1) > 0 && c0 == c1);

    /* Two different events of one counter still conflict. */
    errno = 0;
    CHECK(start_counters(9, 10) < 0 && errno == EINVAL);

    /* One event with two different counts: both are listed. */
    CHECK(print_counters(0, 5, 0, 6) > 0);

    printf("%s: %d failures\n", sim ? "sim" : "perf", fails);
    return fails != 0;
}
