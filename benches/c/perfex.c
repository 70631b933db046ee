/* Our libperfex: a counting interval is start_counters + read_counters of two events.
 * usage: perfex ITERATIONS [interval]; "first_use" (the first start_counters of the process)
 * must be alone (a fresh process). The driver maps events 0 and 16 to the benchmark's first
 * two events through PERFCOMPAT_EVENTS. */
#include "common.h"
#include "libperfex.h"

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    long long c0, c1;
    if (argc > 2 && strcmp(argv[2], "first_use") == 0) {
        int64_t t0 = bench_now();
        if (start_counters(0, 16) < 0) return 2;
        bench_report("first_use", (double)(bench_now() - t0));
        return 0;
    }
    if (bench_wanted(argc, argv, "interval")) {
        /* The first pair opens the counters. */
        if (start_counters(0, 16) < 0 || read_counters(0, &c0, 16, &c1) < 0) return 2;
        int64_t t0 = bench_now();
        for (long i = 0; i < n; i++) {
            int g = start_counters(0, 16);
            if (read_counters(0, &c0, 16, &c1) != g) return 2;
        }
        bench_report("interval", (double)(bench_now() - t0) / n);
    }
    return 0;
}
