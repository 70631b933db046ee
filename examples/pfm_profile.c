/*
 * pfm(7) user-mode PC profiling: sample the program counter at every interrupt of counter 0
 * (cycles, every 2^16) over this program's text, four instructions (16 bytes) per bucket, read
 * the histogram with read(2), and say how many samples fell in the hot loop.
 *
 *   cc -O1 pfm_profile.c $(pkg-config --cflags --libs libpfcntr) -o pfm_profile && ./pfm_profile
 *
 * Prints "samples N hot H" (H of the N samples in the text were in hot()).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pfcntr.h>
#include <unistd.h>

/* GNU ld defines these: the start of the program and the end of its text. */
extern char __executable_start[], etext[];
/* And these for a section whose name is an identifier. */
extern char __start_pfm_hot[], __stop_pfm_hot[];

static volatile unsigned long sink;

__attribute__((noinline, section("pfm_hot"))) static void hot(unsigned long n) {
    for (unsigned long i = 0; i < n; i++)
        sink += i ^ (sink >> 3);
}

int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 0) : 300000000UL;
    int fd = open("/dev/pfcntr", O_RDONLY | PCNTOPENALL);
    if (fd < 0) {
        perror("open /dev/pfcntr");
        return 1;
    }
    struct iccsr mux;
    memset(&mux, 0, sizeof mux);
    mux.iccsr_mux0 = PF_CYCLES; /* every 2^16 */
    mux.iccsr_disable = 2;      /* counter 0 only */
    int items = PFM_COUNTERS | PFM_PROFILING;
    struct pfrange r = {(unsigned long)__executable_start, (unsigned long)etext, 4};
    if (ioctl(fd, PCNTSETMUX, &mux) != 0 || ioctl(fd, PCNTSETITEMS, &items) != 0 ||
        ioctl(fd, PCNTLOGSELECT) != 0 || ioctl(fd, PCNTSETURANGE, &r) != 0 ||
        ioctl(fd, PCNTENABLE) != 0) {
        perror("ioctl");
        return 1;
    }
    hot(n);
    if (ioctl(fd, PCNTDISABLE) != 0) {
        perror("PCNTDISABLE");
        return 1;
    }
    long size = 0;
    if (ioctl(fd, PCNTGETRSIZE, &size) != 0 || size <= 0) {
        perror("PCNTGETRSIZE");
        return 1;
    }
    unsigned int *h = malloc((size_t)size);
    long got = 0;
    while (got < size) {
        ssize_t k = read(fd, (char *)h + got, (size_t)(size - got));
        if (k <= 0)
            break;
        got += k;
    }
    if (got != size) {
        fprintf(stderr, "read %ld of %ld bytes\n", got, size);
        return 1;
    }
    unsigned long total = 0, in_hot = 0;
    unsigned long lo = (unsigned long)__start_pfm_hot, hi = (unsigned long)__stop_pfm_hot;
    for (long i = 0; i < size / 4; i++) {
        unsigned long at = (unsigned long)__executable_start + (unsigned long)i * 16;
        total += h[i];
        if (at + 16 > lo && at < hi)
            in_hot += h[i];
    }
    struct pfcntrs c[1], *p = c;
    if (ioctl(fd, PCNTGETCNT, &p) != 0) {
        perror("PCNTGETCNT");
        return 1;
    }
    printf("samples %lu hot %lu interrupts %lu\n", total, in_hot, c[0].pf_cntr0);
    free(h);
    return close(fd) == 0 ? 0 : 1;
}
