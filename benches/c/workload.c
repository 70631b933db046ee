/* The fixed workload of the disturbance benchmark: integer work and a few thousand page
 * faults, about 0.2 s on the CI VM. usage: workload [MILLIONS] */
#include "common.h"

int main(int argc, char **argv) {
    long m = argc > 1 ? atol(argv[1]) : 300;
    volatile uint64_t x = 1;
    uint64_t acc = 0;
    for (long i = 0; i < m * 1000000; i++) {
        acc = acc * 6364136223846793005ULL + x;
    }
    bench_fault_pages(4096);
    return (int)(acc & 1) * 0;
}
