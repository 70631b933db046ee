/* pfm(7) at its shortest documented periods: counter 0 (PF_CYCLES) interrupting every 2^12
 * events and counter 1 every 2^8, with user PC profiling, on perf's cycles (without a PMU, the
 * CPU-time fallback; counter 1's PF_BRANCHMISS is mapped to `cycles` by the test's event
 * map). The program must get through its work in bounded time, without filling the signal
 * queue (the test samples SigQ while it runs). Prints "samples N interrupts A B"; exit 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pfcntr.h>
#include <unistd.h>

extern char __executable_start[], etext[];
static volatile unsigned long sink;

int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 0) : 100000000UL;
    int fd = open("/dev/pfcntr", O_RDONLY | PCNTOPENALL);
    if (fd < 0) {
        perror("open /dev/pfcntr");
        return 1;
    }
    struct iccsr mux;
    memset(&mux, 0, sizeof mux);
    mux.iccsr_pc0 = 1; /* every 2^12 */
    mux.iccsr_pc1 = 1; /* every 2^8 */
    mux.iccsr_mux0 = PF_CYCLES;
    mux.iccsr_mux1 = PF_BRANCHMISS;
    int items = PFM_COUNTERS | PFM_PROFILING;
    struct pfrange r = {(unsigned long)__executable_start, (unsigned long)etext, 4};
    if (ioctl(fd, PCNTSETMUX, &mux) != 0 || ioctl(fd, PCNTSETITEMS, &items) != 0 ||
        ioctl(fd, PCNTLOGSELECT) != 0 || ioctl(fd, PCNTSETURANGE, &r) != 0 ||
        ioctl(fd, PCNTENABLE) != 0) {
        perror("ioctl");
        return 1;
    }
    for (unsigned long i = 0; i < n; i++)
        sink += i ^ (sink >> 3);
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
    unsigned long total = 0;
    for (long i = 0; i < got / 4; i++)
        total += h[i];
    struct pfcntrs c[64], *p = c; /* one per CPU at most */
    if (ioctl(fd, PCNTGETCNT, &p) != 0) {
        perror("PCNTGETCNT");
        return 1;
    }
    printf("samples %lu interrupts %lu %lu\n", total, (unsigned long)c[0].pf_cntr0,
           (unsigned long)c[0].pf_cntr1);
    close(fd);
    return 0;
}
