/* The cost of a libperfex start/read pair in system calls: between the BEGIN and END markers
 * the test (capi/tests/c_abi.rs, under strace) expects nothing but counter reads, at most one
 * per start_counters and one per read_counters. argv[1]: number of pairs. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "libperfex.h"

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100, fails = 0;
    long long c0 = 0, c1 = 0;
    /* The first pair opens the counters: not part of the measured steady state. */
    if (start_counters(0, 25) < 0 || read_counters(0, &c0, 25, &c1) < 0) return 2;
    if (write(1, "BEGIN\n", 6) != 6) return 2;
    for (int i = 0; i < n; i++) {
        int g = start_counters(0, 25);
        if (g <= 0 || read_counters(0, &c0, 25, &c1) != g) fails++;
    }
    if (write(1, "END\n", 4) != 4) return 2;
    printf("%d failures\n", fails);
    return fails != 0;
}
