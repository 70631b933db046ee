/* What interposing read(2) costs a program that never uses the counters: a read of 8 bytes from
 * /dev/zero, ns per call, the best of 5 passes of N calls. benches/driver.rs builds it linked
 * with neither library, with the library (-lcpc, -lperfex) and with libpfcntr (-lpfcntr, whose
 * read is the /dev/pfcntr interposer). Prints "read8 <ns>". usage: readcost [N] */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int fd = open("/dev/zero", O_RDONLY);
    if (fd < 0 || n <= 0) {
        perror("/dev/zero");
        return 1;
    }
    char buf[8];
    double best = -1;
    for (int pass = 0; pass < 5; pass++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < n; i++) {
            if (read(fd, buf, sizeof buf) != (ssize_t)sizeof buf) {
                perror("read");
                return 1;
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / n;
        if (best < 0 || ns < best)
            best = ns;
    }
    printf("read8 %.1f\n", best);
    return close(fd) != 0;
}
