/*
 * pfm(7)'s EV4 interface: count cycles on counter 0 (an interrupt every 2^12 cycles) and
 * mispredicted branches on counter 1 (an interrupt every 2^8), for this process, with the IPL
 * histogram, and print what PCNTGETCNT and PCNTGETIPLHIS return.
 *
 *   cc pfm_ev4.c $(pkg-config --cflags --libs libpfcntr) -o pfm_ev4
 *   PERFCOMPAT_BACKEND=sim:ev4 ./pfm_ev4     emulated 21064: exact counts (events injected)
 *   ./pfm_ev4                                Linux perf: cycles (counter 1 off if the host
 *                                            cannot count mispredicted branches)
 *
 * The counts are interrupts, i.e. events in units of each counter's interrupt frequency.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pfcntr.h>
#include <unistd.h>

#include <perfcompat.h>

static volatile unsigned long sink;

/* What is measured: on an emulated PMU nothing happens unless the program says so. */
static void work(int sim) {
    if (sim) {
        perfcompat_sim_advance("PF_CYCLES", 5 * 4096 + 100);
        perfcompat_sim_advance("PF_BRANCHMISS", 3 * 256 + 7);
        return;
    }
    for (unsigned long i = 0; i < 50000000UL; i++)
        sink += i ^ (sink >> 3);
}

int main(void) {
    const char *backend = getenv("PERFCOMPAT_BACKEND");
    int sim = backend && strncmp(backend, "sim:", 4) == 0;

    int fd = open("/dev/pfcntr", O_RDONLY | PCNTOPENALL);
    if (fd < 0) {
        perror("open /dev/pfcntr");
        return 1;
    }
    struct iccsr mux;
    memset(&mux, 0, sizeof mux);
    mux.iccsr_pc0 = 1; /* counter 0: every 2^12 events */
    mux.iccsr_pc1 = 1; /* counter 1: every 2^8 events */
    mux.iccsr_mux0 = PF_CYCLES;
    mux.iccsr_mux1 = PF_BRANCHMISS;
    int items = PFM_COUNTERS | PFM_IPL;
    if (ioctl(fd, PCNTSETMUX, &mux) != 0 || ioctl(fd, PCNTSETITEMS, &items) != 0 ||
        ioctl(fd, PCNTLOGSELECT) != 0 || ioctl(fd, PCNTCLEARCNT) != 0) {
        perror("ioctl");
        return 1;
    }
    if (ioctl(fd, PCNTENABLE) != 0) {
        if (errno != ENOENT) {
            perror("PCNTENABLE");
            return 1;
        }
        /* The host cannot count counter 1's event: disable it, as pfm(7) shows. */
        printf("counter 1 disabled: PF_BRANCHMISS cannot be counted here\n");
        mux.iccsr_disable = 2;
        if (ioctl(fd, PCNTSETMUX, &mux) != 0 || ioctl(fd, PCNTENABLE) != 0) {
            perror("PCNTENABLE");
            return 1;
        }
    }
    work(sim);
    if (ioctl(fd, PCNTDISABLE) != 0) {
        perror("PCNTDISABLE");
        return 1;
    }

    struct pfcntrs cntrs[1];
    struct pfcntrs *pfcntrs = cntrs;
    struct pfipls ipls[1];
    struct pfipls *pfipls = ipls;
    if (ioctl(fd, PCNTGETCNT, &pfcntrs) != 0 || ioctl(fd, PCNTGETIPLHIS, &pfipls) != 0) {
        perror("ioctl");
        return 1;
    }
    printf("counter 0 (PF_CYCLES): %lu interrupts (about %lu cycles)\n", cntrs[0].pf_cntr0,
           cntrs[0].pf_cntr0 << 12);
    printf("counter 1 (PF_BRANCHMISS): %lu interrupts (about %lu mispredicted branches)\n",
           cntrs[0].pf_cntr1, cntrs[0].pf_cntr1 << 8);
    printf("IPL histogram:");
    for (int i = 0; i < PF_NIPL; i++)
        printf(" %lu", ipls[0].pf_ipl[i]);
    printf("\n");
    return close(fd) == 0 ? 0 : 1;
}
