/* The page-touching program of tests/cputrack.rs. Modes:
 *   bursts: 100 fresh pages at 150, 250 and 350 ms after its start (the middle of cputrack's
 *           2nd, 3rd and 4th 100 ms intervals), then sleeps until 800 ms and exits 3;
 *   touch N: N fresh pages, then exits 0;
 *   loop:   100 fresh pages every 100 ms, forever (for cputrack -p). */
#define _GNU_SOURCE
#include <string.h>
#include <time.h>
#include "pages.h"

static void at(const struct timespec *t0, long ms) {
    struct timespec t = *t0;
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) { t.tv_sec++; t.tv_nsec -= 1000000000L; }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) != 0) {}
}

int main(int argc, char **argv) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (argc > 1 && strcmp(argv[1], "bursts") == 0) {
        for (long k = 0; k < 3; k++) { at(&t0, 150 + 100 * k); touch(100); }
        at(&t0, 800);
        return 3;
    }
    if (argc > 2 && strcmp(argv[1], "touch") == 0) { touch(atol(argv[2])); return 0; }
    if (argc > 1 && strcmp(argv[1], "loop") == 0) {
        for (long k = 1;; k++) { touch(100); at(&t0, 100 * k); }
    }
    fprintf(stderr, "usage: cputrack_pages bursts | touch N | loop\n");
    return 2;
}
