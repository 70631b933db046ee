/*
 * The two forms of pfm(7)'s array requests (issue 29 item 6), run by capi/tests/pfm.rs on
 * sim:ev4, linked with libpfcntr. argv[1]:
 *
 *   pfm7      <sys/pfcntr.h> as it comes: PCNTGETCNT takes the address of a pointer to the
 *             array (pfm(7)'s sample) and leaves the pointer alone; _IOR('P', n, struct
 *             pfcntrs) takes the array itself (the original header's number), whatever its
 *             first member holds; _IOR of a pointer is pfm(7)'s form again; the number with
 *             another size or direction is EINVAL and writes nothing.
 *   renable   the device enabled with PCNTRENABLE, the original header's name: the header's
 *             PCNTGETCNT then takes the array itself (PAPI's Alpha code: ioctl(fd,
 *             PCNTGETCNT, &cntrs) with an uninitialised struct pfcntrs), and PCNTRDISABLE
 *             disables.
 *   original  built with -DPFCNTR_ORIGINAL_ARGS (a program written to the original header):
 *             PCNTGETCNT and PCNTGETIPLHIS are the array's numbers, with PCNTENABLE.
 *
 * In every mode a struct pfcntrs whose first member holds the address of another one
 * (`victim`) is passed where the array is the argument: nothing may be written through it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pfcntr.h>
#include <unistd.h>

#include "perfcompat.h"

static int fails;
#define CHECK(c)                                                                                \
    do {                                                                                        \
        if (!(c)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s (errno %d)\n", __FILE__, __LINE__, #c, errno);      \
            fails++;                                                                            \
        }                                                                                       \
    } while (0)
#define FAILS(call, e)                                                                          \
    do {                                                                                        \
        errno = 0;                                                                              \
        int r_ = (int)(call);                                                                   \
        CHECK(r_ == -1 && errno == (e));                                                        \
    } while (0)

#define GETCNT_HERE _IOR('P', 0x88, struct pfcntrs)
#define GETCNT_BEHIND _IOR('P', 0x88, struct pfcntrs *)
#define IPLHIS_HERE _IOR('P', 0x8a, struct pfipls)

/* A struct pfcntrs with guards around it; its first member holds the address of `victim`. */
struct guarded {
    unsigned long before[2];
    struct pfcntrs c;
    unsigned long after[2];
};
static struct pfcntrs victim;

static void fill(struct guarded *g) {
    memset(g, 0x5a, sizeof *g);
    g->c.pf_cntr0 = (unsigned long)(uintptr_t)&victim;
    memset(&victim, 0xa5, sizeof victim);
}

static int guards_intact(const struct guarded *g) {
    struct pfcntrs v;
    memset(&v, 0xa5, sizeof v);
    return g->before[0] == 0x5a5a5a5a5a5a5a5aUL && g->before[1] == g->before[0] &&
           g->after[0] == g->before[0] && g->after[1] == g->before[0] &&
           memcmp(&victim, &v, sizeof v) == 0;
}

static int open_counting(void) {
    int fd = open("/dev/pfcntr", O_RDONLY | PCNTOPENALL);
    CHECK(fd >= 0);
    struct iccsr m;
    memset(&m, 0, sizeof m);
    m.iccsr_mux0 = PF_CYCLES; /* every 2^16 */
    m.iccsr_mux1 = PF_DCACHE;
    m.iccsr_pc1 = 1; /* every 2^8 */
    int items = PFM_COUNTERS | PFM_IPL;
    CHECK(ioctl(fd, PCNTSETMUX, &m) == 0);
    CHECK(ioctl(fd, PCNTSETITEMS, &items) == 0);
    CHECK(ioctl(fd, PCNTLOGSELECT) == 0);
    CHECK(ioctl(fd, PCNTCLEARCNT) == 0);
    return fd;
}

static void count(void) {
    CHECK(perfcompat_sim_advance("PF_CYCLES", 3 * 65536) >= 0);
    CHECK(perfcompat_sim_advance("PF_DCACHE", 5 * 256) >= 0);
}

/* The array itself as the argument (`request` a number of that form). */
static void array_here(int fd, unsigned long request) {
    struct guarded g;
    fill(&g);
    CHECK(ioctl(fd, request, &g.c) == 0);
    CHECK(g.c.pf_cntr0 == 3 && g.c.pf_cntr1 == 5 && g.c.pf_pcc > 0);
    CHECK(guards_intact(&g));
}

/* The address of a pointer to the array as the argument. */
static void array_behind(int fd, unsigned long request) {
    struct pfcntrs cntrs[1];
    struct pfcntrs *pfcntrs = cntrs;
    memset(cntrs, 0, sizeof cntrs);
    CHECK(ioctl(fd, request, &pfcntrs) == 0);
    CHECK(pfcntrs == cntrs);
    CHECK(cntrs[0].pf_cntr0 == 3 && cntrs[0].pf_cntr1 == 5);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "pfm7";
    CHECK(_IOC_SIZE(GETCNT_HERE) == sizeof(struct pfcntrs));
    CHECK(_IOC_SIZE(GETCNT_BEHIND) == sizeof(void *));
    int fd = open_counting();
#ifdef PFCNTR_ORIGINAL_ARGS
    if (strcmp(mode, "original")) return 2;
    CHECK(PCNTGETCNT == GETCNT_HERE && PCNTGETIPLHIS == IPLHIS_HERE);
    CHECK(ioctl(fd, PCNTENABLE) == 0);
    count();
    array_here(fd, PCNTGETCNT);
    struct pfipls ipls[1];
    memset(ipls, 0, sizeof ipls);
    CHECK(ioctl(fd, PCNTGETIPLHIS, ipls) == 0 && ipls[0].pf_ipl[8] == 8);
    array_behind(fd, GETCNT_BEHIND);
#else
    if (!strcmp(mode, "pfm7")) {
        CHECK(ioctl(fd, PCNTENABLE) == 0);
        count();
        array_behind(fd, PCNTGETCNT);
        array_behind(fd, GETCNT_BEHIND);
        array_here(fd, GETCNT_HERE);
        struct pfipls ipls[1], *pfipls = ipls;
        memset(ipls, 0, sizeof ipls);
        CHECK(ioctl(fd, PCNTGETIPLHIS, &pfipls) == 0 && ipls[0].pf_ipl[8] == 8 && pfipls == ipls);
        memset(ipls, 0, sizeof ipls);
        CHECK(ioctl(fd, IPLHIS_HERE, ipls) == 0 && ipls[0].pf_ipl[8] == 8);
        /* Another size or direction of the number is no request: nothing is written. */
        struct guarded g;
        fill(&g);
        FAILS(ioctl(fd, _IOR('P', 0x88, char[5]), &g.c), EINVAL);
        FAILS(ioctl(fd, _IOW('P', 0x88, struct pfcntrs), &g.c), EINVAL);
        CHECK(g.c.pf_cntr0 == (unsigned long)(uintptr_t)&victim && guards_intact(&g));
        FAILS(ioctl(fd, GETCNT_HERE, NULL), EFAULT);
        FAILS(ioctl(fd, PCNTGETCNT, NULL), EFAULT);
    } else if (!strcmp(mode, "renable")) {
        CHECK(ioctl(fd, PCNTRENABLE) == 0);
        count();
        array_here(fd, PCNTGETCNT);
        array_behind(fd, GETCNT_BEHIND);
        /* PCNTRDISABLE disables as PCNTDISABLE does: nothing more is counted. */
        CHECK(ioctl(fd, PCNTRDISABLE) == 0);
        CHECK(perfcompat_sim_advance("PF_CYCLES", 4 * 65536) >= 0);
        array_here(fd, PCNTGETCNT);
    } else {
        return 2;
    }
#endif
    CHECK(ioctl(fd, PCNTDISABLE) == 0);
    CHECK(close(fd) == 0);
    printf("forms %s: %d failures\n", mode, fails);
    return fails != 0;
}
