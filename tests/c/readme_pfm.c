/* The README's Tru64 pfm example: PF_CYCLES and PF_BRANCHMISS on /dev/pfcntr (issue 46 item 1). */
#include <fcntl.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/pfcntr.h>
#include <unistd.h>

static volatile unsigned long sink;

static void work(void) {
    for (unsigned long i = 0; i < 20000000UL; i++)
        sink += i ^ (sink >> 3);
}

int main(void) {
    int fd = open("/dev/pfcntr", O_RDONLY | PCNTOPENALL);
    if (fd < 0)
        return 1;
    struct iccsr mux = {.iccsr_mux0 = PF_CYCLES, .iccsr_mux1 = PF_BRANCHMISS};
    int items = PFM_COUNTERS;
    struct pfcntrs cn[1];
    struct pfcntrs *pfcntrs = cn;
    if (ioctl(fd, PCNTSETMUX, &mux) != 0 || ioctl(fd, PCNTSETITEMS, &items) != 0 ||
        ioctl(fd, PCNTENABLE) != 0)
        return 1;
    work();
    if (ioctl(fd, PCNTDISABLE) != 0 || ioctl(fd, PCNTGETCNT, &pfcntrs) != 0)
        return 1;
    printf("cycles %lu branchmiss %lu\n", (unsigned long)cn[0].pf_cntr0,
           (unsigned long)cn[0].pf_cntr1);
    return 0;
}
