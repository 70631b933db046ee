/*
 * pfm(7)'s EV5 interface: on the CPU this program binds itself to (PCNTOPENONE), count cycles
 * on counter 0 (an interrupt every 65536), loads on counter 1 and data-cache misses on counter 2
 * (every 256 each), user mode only; print the interrupt counts (PCNT5GETCNT), the events
 * (PCNT5GETCNT2: the counts shifted by the counter width plus the raw counters) and the raw
 * counters (PCNT5READCNTRS).
 *
 *   cc pfm_ev5.c $(pkg-config --cflags --libs libpfcntr) -o pfm_ev5
 *   PERFCOMPAT_BACKEND=sim:ev5 ./pfm_ev5     emulated 21164: exact counts (events injected)
 *   ./pfm_ev5                                Linux perf: cycles (counters 1 and 2 off if the
 *                                            host cannot count loads and cache misses)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pfcntr.h>
#include <unistd.h>

#include <perfcompat.h>

static volatile unsigned long sink;

static void work(int sim) {
    if (sim) {
        perfcompat_sim_advance("PF5_CYCLES", 2 * 65536 + 10);
        perfcompat_sim_advance("PF5_MUX1_LOADI", 7 * 256 + 3);
        perfcompat_sim_advance("PF5_MUX2_DCACHEMISS", 4 * 256 + 255);
        return;
    }
    for (unsigned long i = 0; i < 50000000UL; i++)
        sink += i ^ (sink >> 3);
}

int main(void) {
    const char *backend = getenv("PERFCOMPAT_BACKEND");
    int sim = backend && strncmp(backend, "sim:", 4) == 0;

    /* PCNTOPENONE: the opener must be bound to the CPU it collects on. */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
        perror("sched_setaffinity");
        return 1;
    }
    int fd = open("/dev/pfcntr", O_RDONLY | PCNTOPENONE);
    if (fd < 0) {
        perror("open /dev/pfcntr");
        return 1;
    }
    long mux = PF5_MUX0_CYCLES | PF5_MUX1_LOADI | PF5_MUX2_DCACHEMISS;
    long freq = PF5_C0_INT_EVERY_65536 | PF5_C1_INT_EVERY_256 | PF5_C2_INT_EVERY_256;
    long ctxt = PF5_CTXT_USER;
    int items = PFM_COUNTERS;
    if (ioctl(fd, PCNT5MUX, &mux) != 0 || ioctl(fd, PCNT5FREQ, &freq) != 0 ||
        ioctl(fd, PCNT5CTXT, &ctxt) != 0 || ioctl(fd, PCNTSETITEMS, &items) != 0) {
        perror("ioctl");
        return 1;
    }
    union pmctrs_ev5 sel;
    memset(&sel, 0, sizeof sel);
    sel.pmctrs_ev5_cpu = PMCTRS_ALL_CPUS;
    sel.pmctrs_ev5_select = PF5_SEL_COUNTER_0 | PF5_SEL_COUNTER_1 | PF5_SEL_COUNTER_2;
    if (ioctl(fd, PCNT5RESTART, &sel.pmctrs_ev5_long) != 0) {
        if (errno != ENOENT) {
            perror("PCNT5RESTART");
            return 1;
        }
        printf("counters 1 and 2 disabled: their events cannot be counted here\n");
        sel.pmctrs_ev5_select = PF5_SEL_COUNTER_0;
        if (ioctl(fd, PCNT5RESTART, &sel.pmctrs_ev5_long) != 0) {
            perror("PCNT5RESTART");
            return 1;
        }
    }
    work(sim);
    sel.pmctrs_ev5_select = PF5_SEL_COUNTER_0 | PF5_SEL_COUNTER_1 | PF5_SEL_COUNTER_2;
    if (ioctl(fd, PCNT5DISABLE, &sel.pmctrs_ev5_long) != 0) {
        perror("PCNT5DISABLE");
        return 1;
    }

    struct pfcntrs_ev5 c[1], e[1];
    struct pfcntrs_ev5 *pc = c, *pe = e;
    union pmctrs_ev5 raw;
    memset(&raw, 0, sizeof raw);
    raw.pmctrs_ev5_cpu = PMCTRS_ALL_CPUS;
    if (ioctl(fd, PCNT5GETCNT, &pc) != 0 || ioctl(fd, PCNT5GETCNT2, &pe) != 0 ||
        ioctl(fd, PCNT5READCNTRS, &raw.pmctrs_ev5_long) != 0) {
        perror("ioctl");
        return 1;
    }
    printf("interrupts: %lu %lu %lu\n", c[0].pf_cntr0, c[0].pf_cntr1, c[0].pf_cntr2);
    printf("events: %lu %lu %lu\n", e[0].pf_cntr0, e[0].pf_cntr1, e[0].pf_cntr2);
    printf("raw counters: %lu %lu %lu\n", raw.pmctrs_ev5_ctr[0], raw.pmctrs_ev5_ctr[1],
           raw.pmctrs_ev5_ctr[2]);
    return close(fd) == 0 ? 0 : 1;
}
