/* Tru64's /dev/pfcntr (pfm(7), <sys/pfcntr.h>) through the interposed open/ioctl/read/close.
 *
 * argv[1] is the mode; the Rust driver (capi/tests/pfm.rs) picks the backend:
 *   ev4    sim:ev4  every EV4 request's success and documented errors, exact counts, the IPL
 *                   histogram, the profile read with read(2), open modes and EBUSY
 *   each   sim:ev4  PCNTOPENEACH: per-CPU counts (the thread pinned to each CPU in turn)
 *   ev5    sim:ev5  the EV5 requests, their errors, exact counts, raw counters
 *   files  any      other paths and descriptors are the C library's: files, pipes, near-miss
 *                   paths, ioctl on ordinary descriptors, dup of a device descriptor
 *   perf   perf     counts on Linux perf (cycles, estimated from CPU time without a PMU)
 *   order  perf     a real client's order: PCNTOPENALL, PCNTRENABLE, then PCNTSETMUX (the
 *                   default selection has no counterpart here); PF_BRANCHMISS counts page faults
 *   unpriv perf     as "perf" with PCNTLOGALL as user nobody (root drops to it first): without
 *                   the privilege to count a CPU the device counts the process
 * Built with -DPFM_PRELOAD it is not linked with the library (LD_PRELOAD provides it); built
 * with -O2 -D_FORTIFY_SOURCE=2 it reaches the device through __open_2 and __read_chk too.
 * It prints "<mode>: N failures". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/pfcntr.h>
#include <unistd.h>

#include "perfcompat.h"
#ifdef PFM_PRELOAD
#include <dlfcn.h>
#endif

static int fails;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s (errno %d)\n", __FILE__, __LINE__, #c, errno); fails++; } } while (0)
/* The call fails with errno e. */
#define FAILS(call, e) do { errno = 0; int r_ = (int)(call); CHECK(r_ == -1 && errno == (e)); } while (0)

/* perfcompat_sim_advance; the preloaded build, not linked with the library, looks it up. */
static int (*sim_advance)(const char *, uint64_t);
static void advance(const char *ev, uint64_t n) {
    CHECK(sim_advance != NULL);
    if (sim_advance)
        CHECK(sim_advance(ev, n) >= 0);
}

static long ncpu(void) {
    long n = sysconf(_SC_NPROCESSORS_CONF);
    return n < 1 ? 1 : n > 4096 ? 4096 : n;
}

static int pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return sched_setaffinity(0, sizeof s, &s);
}

static int unpin(void) {
    cpu_set_t s;
    CPU_ZERO(&s);
    for (long c = 0; c < ncpu(); c++)
        CPU_SET(c, &s);
    return sched_setaffinity(0, sizeof s, &s);
}

/* A page followed by an inaccessible one: `bad_tail(n)` is n bytes before the hole. */
static char *guarded;
static void *bad_tail(size_t n) {
    if (!guarded) {
        long pg = sysconf(_SC_PAGESIZE);
        guarded = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        mprotect(guarded + pg, pg, PROT_NONE);
    }
    return guarded + sysconf(_SC_PAGESIZE) - n;
}

static int set_items(int fd, int items) { return ioctl(fd, PCNTSETITEMS, &items); }

static void ev4(void) {
    /* Open modes. */
    FAILS(open("/dev/pfcntr", O_RDONLY | PCNTOPENONE | PCNTOPENALL), EINVAL);
    if (ncpu() > 1) {
        CHECK(unpin() == 0);
        FAILS(open("/dev/pfcntr", O_RDONLY | PCNTOPENONE), EINVAL);
    }
    CHECK(pin(0) == 0);
    int one = open("/dev/pfcntr", O_RDONLY | PCNTOPENONE);
    CHECK(one >= 0);
    FAILS(open("/dev/pfcntr", O_RDONLY | PCNTOPENONE), EBUSY);
    FAILS(open("/dev/pfcntr", O_RDONLY | PCNTOPENALL), EBUSY);
    FAILS(open("/dev/pfcntr", O_RDONLY | PCNTOPENEACH), EBUSY);
    CHECK(close(one) == 0);
    int fd = open("/dev/pfcntr", O_RDONLY | PCNTOPENALL);
    CHECK(fd >= 0);
    FAILS(open("/dev/pfcntr", O_RDWR | PCNTOPENALL), EBUSY);

    /* PCNTSETMUX. */
    struct iccsr m;
    memset(&m, 0, sizeof m);
    m.iccsr_mux0 = PF_CYCLES;
    m.iccsr_mux1 = PF_DCACHE;
    m.iccsr_disable = 3;
    FAILS(ioctl(fd, PCNTSETMUX, &m), EINVAL);
    m.iccsr_disable = 0;
    m.iccsr_mbz = 1;
    FAILS(ioctl(fd, PCNTSETMUX, &m), EINVAL);
    m.iccsr_mbz = 0;
    m.iccsr_mux0 = PF_EXTPIN0 + 1;
    FAILS(ioctl(fd, PCNTSETMUX, &m), EINVAL);
    m.iccsr_mux0 = PF_CYCLES;
    m.iccsr_mux1 = PF_EXTPIN1 + 1;
    FAILS(ioctl(fd, PCNTSETMUX, &m), EINVAL);
    m.iccsr_mux1 = PF_DCACHE;
    FAILS(ioctl(fd, PCNTSETMUX, NULL), EFAULT);
    FAILS(ioctl(fd, PCNTSETMUX, bad_tail(4)), EFAULT);
    m.iccsr_pc1 = 1; /* counter 1 every 2^8; counter 0 every 2^16 */
    CHECK(ioctl(fd, PCNTSETMUX, &m) == 0);

    /* PCNTSETITEMS. */
    FAILS(set_items(fd, 0), EINVAL);
    FAILS(set_items(fd, 8), EINVAL);
    FAILS(ioctl(fd, PCNTSETITEMS, NULL), EFAULT);
    CHECK(set_items(fd, PFM_PROFILING) == 0);
    FAILS(ioctl(fd, PCNTCLEARCNT), EINVAL);
    struct pfcntrs c[1];
    struct pfcntrs *pc = c;
    FAILS(ioctl(fd, PCNTGETCNT, &pc), EINVAL);
    struct pfipls h[1];
    struct pfipls *ph = h;
    FAILS(ioctl(fd, PCNTGETIPLHIS, &ph), EINVAL);
    FAILS(ioctl(fd, PCNTCALLER), EINVAL);
    struct pfaddr ka = {0x1000, 0x2000};
    FAILS(ioctl(fd, PCNTSETKADDR, &ka), ENOTSUP);
    CHECK(set_items(fd, PFM_COUNTERS | PFM_IPL) == 0);
    FAILS(ioctl(fd, PCNTSETKADDR, &ka), EINVAL);
    FAILS(ioctl(fd, PCNTSETUADDR, &ka), EINVAL); /* not open for profiling */
    long rsize = -1;
    CHECK(ioctl(fd, PCNTGETRSIZE, &rsize) == 0 && rsize == 0);
    char buf[64];
    CHECK(read(fd, buf, sizeof buf) == 0);
    FAILS(ioctl(fd, 0x12345678UL), EINVAL);
    FAILS(ioctl(fd, PCNT5MUX, &rsize), EINVAL); /* an EV4 is not an EV5 */

    /* Logging modes. */
    CHECK(ioctl(fd, PCNTLOGALL) == 0);
    CHECK(ioctl(fd, PCNTLOGSELECT) == 0);
    CHECK(ioctl(fd, PCNTLOGUSER) == 0);
    CHECK(ioctl(fd, PCNTLOGSELECT) == 0);

    /* Exact counts, in units of the interrupt frequency. */
    CHECK(ioctl(fd, PCNTCLEARCNT) == 0);
    CHECK(ioctl(fd, PCNTENABLE) == 0);
    advance("PF_CYCLES", 3 * 65536 + 65535);
    advance("PF_DCACHE", 5 * 256 + 1);
    advance("PF_ICACHE", 1000); /* not selected */
    CHECK(ioctl(fd, PCNTGETCNT, &pc) == 0);
    CHECK(c[0].pf_cntr0 == 3 && c[0].pf_cntr1 == 5);
    advance("PF_CYCLES", 1); /* the 4th interrupt */
    CHECK(ioctl(fd, PCNTDISABLE) == 0);
    advance("PF_CYCLES", 1000000); /* disabled: not counted */
    CHECK(ioctl(fd, PCNTGETCNT, &pc) == 0);
    CHECK(c[0].pf_cntr0 == 4 && c[0].pf_cntr1 == 5);
    CHECK(c[0].pf_pcc > 0);
    CHECK(ioctl(fd, PCNTGETIPLHIS, &ph) == 0);
    CHECK(h[0].pf_ipl[8] == 9);
    for (int i = 0; i < 8; i++)
        CHECK(h[0].pf_ipl[i] == 0);
    FAILS(ioctl(fd, PCNTGETCNT, NULL), EFAULT);
    pc = bad_tail(8);
    FAILS(ioctl(fd, PCNTGETCNT, &pc), EFAULT);
    pc = c;
    /* Enabled again: the counts go on; a new frequency applies to what follows. */
    CHECK(ioctl(fd, PCNTENABLE) == 0);
    advance("PF_DCACHE", 255);
    CHECK(ioctl(fd, PCNTGETCNT, &pc) == 0);
    CHECK(c[0].pf_cntr1 == 6);
    /* LOGUSER unmarks the process: LOGSELECT counts nothing then. */
    CHECK(ioctl(fd, PCNTLOGUSER) == 0);
    advance("PF_DCACHE", 10 * 256);
    CHECK(ioctl(fd, PCNTGETCNT, &pc) == 0);
    CHECK(c[0].pf_cntr1 == 6);
    CHECK(ioctl(fd, PCNTLOGALL) == 0);
    advance("PF_DCACHE", 256);
    CHECK(ioctl(fd, PCNTGETCNT, &pc) == 0);
    CHECK(c[0].pf_cntr1 == 7);
    /* Clearing. */
    CHECK(ioctl(fd, PCNTCLEARCNT) == 0);
    CHECK(ioctl(fd, PCNTGETCNT, &pc) == 0);
    CHECK(c[0].pf_cntr0 == 0 && c[0].pf_cntr1 == 0);
    CHECK(ioctl(fd, PCNTGETIPLHIS, &ph) == 0 && h[0].pf_ipl[8] == 0);
    /* Counter 1 disabled by the mux. */
    m.iccsr_disable = 2;
    m.iccsr_pc0 = 1; /* counter 0 every 2^12 */
    CHECK(ioctl(fd, PCNTSETMUX, &m) == 0);
    advance("PF_CYCLES", 4096 * 2);
    advance("PF_DCACHE", 256 * 2);
    CHECK(ioctl(fd, PCNTGETCNT, &pc) == 0);
    CHECK(c[0].pf_cntr0 == 2 && c[0].pf_cntr1 == 0);

    /* Profiling: one bucket for all addresses counts every interrupt (the emulated PMU's
     * interrupts come from inside perfcompat_sim_advance). */
    CHECK(set_items(fd, PFM_COUNTERS | PFM_PROFILING) == 0);
    struct pfrange r = {0x10000, 0x10000 + 4096, 3};
    FAILS(ioctl(fd, PCNTSETURANGE, &r), EINVAL); /* stride not a power of two */
    r.pfr_stride = 4;
    r.pfr_end = r.pfr_start;
    FAILS(ioctl(fd, PCNTSETURANGE, &r), EINVAL); /* empty range */
    r.pfr_end = r.pfr_start + 4096;
    FAILS(ioctl(fd, PCNTSETURANGE, NULL), EFAULT);
    struct pfrange huge = {0, ULONG_MAX, 1}; /* 2^62 buckets */
    FAILS(ioctl(fd, PCNTSETURANGE, &huge), ENOMEM);
    CHECK(ioctl(fd, PCNTSETURANGE, &r) == 0);
    CHECK(ioctl(fd, PCNTGETRSIZE, &rsize) == 0 && rsize == 1024); /* a quarter of the range */
    r.pfr_stride = 1;
    CHECK(ioctl(fd, PCNTSETURANGE, &r) == 0);
    CHECK(ioctl(fd, PCNTGETRSIZE, &rsize) == 0 && rsize == 4096);
    struct pfaddr ua = {0x20000, 0x20000 + 64};
    CHECK(ioctl(fd, PCNTSETUADDR, &ua) == 0); /* stride kept: 1 */
    CHECK(ioctl(fd, PCNTGETRSIZE, &rsize) == 0 && rsize == 64);
    FAILS(ioctl(fd, PCNTSETKRANGE, &r), ENOTSUP);
    r.pfr_start = 0;
    r.pfr_end = ULONG_MAX;
    r.pfr_stride = 0;
    CHECK(ioctl(fd, PCNTSETURANGE, &r) == 0);
    CHECK(ioctl(fd, PCNTGETRSIZE, &rsize) == 0 && rsize == 4);
    unsigned int bucket = 99;
    CHECK(read(fd, &bucket, 4) == 4 && bucket == 0);
    CHECK(read(fd, &bucket, 4) == 0); /* end of the data: rewinds */
    advance("PF_CYCLES", 4096 * 3 + 7);
    volatile size_t four = 4; /* a count unknown at compile time: __read_chk when fortified */
    CHECK(read(fd, &bucket, four) == 4 && bucket == 3);
    CHECK(read(fd, &bucket, 4) == 0);
    /* A read that fails changes nothing: the position stays where it was. */
    FAILS(read(fd, bad_tail(2), 4), EFAULT);
    bucket = 99;
    CHECK(read(fd, &bucket, 4) == 4 && bucket == 3);
    CHECK(read(fd, &bucket, 4) == 0);
    CHECK(ioctl(fd, PCNTGETCNT, &pc) == 0);
    CHECK(c[0].pf_cntr0 == 5);
    /* 40 bytes of profile (10 buckets): failed reads, from the start and from the middle,
     * whole or partly unwritable, consume nothing. */
    struct pfrange forty = {0x10000, 0x10000 + 40, 1};
    CHECK(ioctl(fd, PCNTSETURANGE, &forty) == 0);
    CHECK(ioctl(fd, PCNTGETRSIZE, &rsize) == 0 && rsize == 40);
    unsigned char prof[64];
    void *volatile nowhere = NULL; /* not a constant: no compile-time nonnull error */
    FAILS(read(fd, nowhere, 16), EFAULT);
    CHECK(read(fd, prof, sizeof prof) == 40);
    CHECK(read(fd, prof, sizeof prof) == 0);
    CHECK(read(fd, prof, 8) == 8);
    FAILS(read(fd, bad_tail(8), 16), EFAULT);
    FAILS(read(fd, nowhere, 16), EFAULT);
    CHECK(read(fd, prof, sizeof prof) == 32);
    CHECK(read(fd, prof, sizeof prof) == 0);
    CHECK(ioctl(fd, PCNTSETURANGE, &r) == 0);
    /* Two-byte reads. */
    unsigned char half[2];
    CHECK(read(fd, half, 2) == 2 && read(fd, half, 2) == 2 && read(fd, half, 2) == 0);
    CHECK(ioctl(fd, PCNTDISABLE) == 0);
    CHECK(close(fd) == 0);
    FAILS(close(fd), EBADF);
    FAILS(ioctl(fd, PCNTENABLE), EBADF);
    /* Closed: it can be opened again. */
    fd = open("/dev/pfcntr", O_RDONLY);
    CHECK(fd >= 0);
    CHECK(close(fd) == 0);
    CHECK(unpin() == 0);
}

/* Open the device in `mode` counting PF_CYCLES on counter 0 only, an interrupt every 2^12. */
static int open_cycles(int mode) {
    int fd = open("/dev/pfcntr", O_RDONLY | mode);
    CHECK(fd >= 0);
    struct iccsr m;
    memset(&m, 0, sizeof m);
    m.iccsr_pc0 = 1;
    m.iccsr_mux0 = PF_CYCLES;
    m.iccsr_disable = 2;
    CHECK(ioctl(fd, PCNTSETMUX, &m) == 0);
    return fd;
}

static void each(void) {
    size_t n = (size_t)ncpu();
    int fd = open_cycles(PCNTOPENEACH);
    CHECK(ioctl(fd, PCNTENABLE) == 0);
    for (size_t cpu = 0; cpu < n; cpu++) {
        CHECK(pin((int)cpu) == 0);
        advance("PF_CYCLES", 4096 * (uint64_t)(cpu + 1));
    }
    struct pfcntrs *c = calloc(n, sizeof *c);
    CHECK(ioctl(fd, PCNTGETCNT, &c) == 0);
    for (size_t cpu = 0; cpu < n; cpu++)
        CHECK(c[cpu].pf_cntr0 == cpu + 1);
    /* The array must hold every CPU. */
    struct pfcntrs *short_array = bad_tail(sizeof *c * (n - 1) + 8);
    if (n > 1)
        FAILS(ioctl(fd, PCNTGETCNT, &short_array), EFAULT);
    int items = PFM_COUNTERS | PFM_IPL | PFM_PROFILING;
    CHECK(ioctl(fd, PCNTSETITEMS, &items) == 0);
    struct pfrange r = {0, ULONG_MAX, 0};
    CHECK(ioctl(fd, PCNTSETURANGE, &r) == 0);
    long rsize = 0;
    CHECK(ioctl(fd, PCNTGETRSIZE, &rsize) == 0 && rsize == 4 * (long)n);
    CHECK(pin(0) == 0);
    advance("PF_CYCLES", 4096);
    struct pfipls *h = calloc(n, sizeof *h);
    CHECK(ioctl(fd, PCNTGETIPLHIS, &h) == 0);
    CHECK(h[0].pf_ipl[8] == 2);
    unsigned int *b = calloc(n, 4);
    CHECK(read(fd, b, (size_t)rsize) == rsize);
    CHECK(b[0] == 1);
    for (size_t cpu = 1; cpu < n; cpu++)
        CHECK(b[cpu] == 0);
    CHECK(close(fd) == 0);
    free(b);
    free(h);
    free(c);
    CHECK(unpin() == 0);
}

static void ev5(void) {
    int fd = open("/dev/pfcntr", O_RDONLY | PCNTOPENALL);
    CHECK(fd >= 0);
    struct iccsr m;
    memset(&m, 0, sizeof m);
    FAILS(ioctl(fd, PCNTSETMUX, &m), EINVAL); /* an EV5 is not an EV4 */
    long v = 5; /* counter 0 has two events */
    FAILS(ioctl(fd, PCNT5MUX, &v), EINVAL);
    v = 1L << 24;
    FAILS(ioctl(fd, PCNT5MUX, &v), EINVAL);
    FAILS(ioctl(fd, PCNT5MUX, NULL), EFAULT);
    v = PF5_MUX0_ISSUES | PF5_MUX1_FLOWCHANGE | PF5_MUX2_CYCLES;
    CHECK(ioctl(fd, PCNT5MUX, &v) == 0);
    v = 3;
    FAILS(ioctl(fd, PCNT5FREQ, &v), EINVAL);
    v = 1L << 6;
    FAILS(ioctl(fd, PCNT5FREQ, &v), EINVAL);
    v = PF5_C0_INT_EVERY_256 | PF5_C1_INT_EVERY_256 | PF5_C2_INT_EVERY_16384;
    CHECK(ioctl(fd, PCNT5FREQ, &v) == 0);
    v = 0;
    FAILS(ioctl(fd, PCNT5CTXT, &v), EINVAL);
    v = 8;
    FAILS(ioctl(fd, PCNT5CTXT, &v), EINVAL);
    v = PF5_CTXT_USER | PF5_CTXT_KERNEL;
    CHECK(ioctl(fd, PCNT5CTXT, &v) == 0);
    union pmctrs_ev5 u;
    memset(&u, 0, sizeof u);
    u.pmctrs_ev5_cpu = PMCTRS_ALL_CPUS;
    u.pmctrs_ev5_select = 0;
    FAILS(ioctl(fd, PCNT5ENABLE, &u.pmctrs_ev5_long), EINVAL);
    u.pmctrs_ev5_select = 8;
    FAILS(ioctl(fd, PCNT5ENABLE, &u.pmctrs_ev5_long), EINVAL);
    u.pmctrs_ev5_select = PF5_SEL_COUNTER_0 | PF5_SEL_COUNTER_1 | PF5_SEL_COUNTER_2;
    u.pmctrs_ev5_cpu = 9999;
    FAILS(ioctl(fd, PCNT5ENABLE, &u.pmctrs_ev5_long), EINVAL);
    u.pmctrs_ev5_cpu = PMCTRS_ALL_CPUS;
    FAILS(ioctl(fd, PCNT5ENABLE, NULL), EFAULT);
    CHECK(ioctl(fd, PCNT5RESTART, &u.pmctrs_ev5_long) == 0);
    advance("PF5_MUX0_ISSUES", 256 * 3 + 1);
    advance("PF5_MUX1_FLOWCHANGE", 256 * 2 + 2);
    advance("PF5_CYCLES", 16384 * 5 + 3);
    struct pfcntrs_ev5 c[1];
    struct pfcntrs_ev5 *pc = c;
    CHECK(ioctl(fd, PCNT5GETCNT, &pc) == 0);
    CHECK(c[0].pf_cntr0 == 3 && c[0].pf_cntr1 == 2 && c[0].pf_cntr2 == 5);
    CHECK(ioctl(fd, PCNT5GETCNT2, &pc) == 0);
    CHECK(c[0].pf_cntr0 == 769 && c[0].pf_cntr1 == 514 && c[0].pf_cntr2 == 16384 * 5 + 3);
    union pmctrs_ev5 raw;
    memset(&raw, 0, sizeof raw);
    raw.pmctrs_ev5_cpu = PMCTRS_ALL_CPUS;
    CHECK(ioctl(fd, PCNT5READCNTRS, &raw.pmctrs_ev5_long) == 0);
    CHECK(raw.pmctrs_ev5_ctr[0] == 1 && raw.pmctrs_ev5_ctr[1] == 2 && raw.pmctrs_ev5_ctr[2] == 3);
    /* Disable counter 1 only. */
    u.pmctrs_ev5_select = PF5_SEL_COUNTER_1;
    CHECK(ioctl(fd, PCNT5DISABLE, &u.pmctrs_ev5_long) == 0);
    advance("PF5_MUX1_FLOWCHANGE", 256 * 10);
    advance("PF5_MUX0_ISSUES", 255);
    CHECK(ioctl(fd, PCNT5GETCNT, &pc) == 0);
    CHECK(c[0].pf_cntr0 == 4 && c[0].pf_cntr1 == 2);
    /* Write the raw counter 0: the interrupt count stays, the next interrupt comes sooner. */
    u.pmctrs_ev5_select = PF5_SEL_COUNTER_0;
    u.pmctrs_ev5_ctr[0] = 256;
    FAILS(ioctl(fd, PCNT5WRITE, &u.pmctrs_ev5_long), EINVAL); /* a whole period */
    u.pmctrs_ev5_ctr[0] = 250;
    CHECK(ioctl(fd, PCNT5WRITE, &u.pmctrs_ev5_long) == 0);
    CHECK(ioctl(fd, PCNT5READCNTRS, &raw.pmctrs_ev5_long) == 0 && raw.pmctrs_ev5_ctr[0] == 250);
    advance("PF5_MUX0_ISSUES", 6);
    CHECK(ioctl(fd, PCNT5GETCNT, &pc) == 0);
    CHECK(c[0].pf_cntr0 == 5);
    /* RESTART zeroes the selected counters. */
    CHECK(ioctl(fd, PCNT5RESTART, &u.pmctrs_ev5_long) == 0);
    CHECK(ioctl(fd, PCNT5GETCNT, &pc) == 0);
    CHECK(c[0].pf_cntr0 == 0 && c[0].pf_cntr2 == 5);
    /* PCNTGETCNT (EV4's) works on EV5 too: the first two counters. */
    struct pfcntrs c4[1], *p4 = c4;
    CHECK(ioctl(fd, PCNTGETCNT, &p4) == 0 && c4[0].pf_cntr1 == 2);
    CHECK(close(fd) == 0);
}

static void files(void) {
    char path[] = "/tmp/pfm_abi_XXXXXX";
    int w = mkstemp(path);
    CHECK(w >= 0);
    CHECK(write(w, "hello", 5) == 5);
    CHECK(close(w) == 0);
    int f = open(path, O_RDONLY);
    CHECK(f >= 0);
    char buf[16] = {0};
    CHECK(read(f, buf, sizeof buf) == 5 && memcmp(buf, "hello", 5) == 0);
    FAILS(ioctl(f, PCNTENABLE), ENOTTY); /* a pfm request on an ordinary file */
    CHECK(close(f) == 0);
    f = open64(path, O_RDONLY);
    CHECK(f >= 0 && close(f) == 0);
    f = openat(AT_FDCWD, path, O_RDONLY);
    CHECK(f >= 0 && close(f) == 0);
    CHECK(unlink(path) == 0);
    FAILS(open(path, O_RDONLY), ENOENT);
    /* Paths that are not exactly /dev/pfcntr are the system's. */
    FAILS(open("/dev/pfcntrx", O_RDONLY), ENOENT);
    FAILS(open("/dev/pfcntr/", O_RDONLY), ENOENT);
    FAILS(open("/dev//pfcntr", O_RDONLY), ENOENT);
    FAILS(open("/dev/PFCNTR", O_RDONLY), ENOENT);
    CHECK(chdir("/") == 0);
    FAILS(open("dev/pfcntr", O_RDONLY), ENOENT);
    /* Pipes: read, ioctl, close. */
    int p[2];
    CHECK(pipe(p) == 0);
    CHECK(write(p[1], "abc", 3) == 3);
    int avail = 0;
    CHECK(ioctl(p[0], FIONREAD, &avail) == 0 && avail == 3);
    CHECK(read(p[0], buf, 3) == 3);
    CHECK(close(p[0]) == 0 && close(p[1]) == 0);
    /* The device through each open function; a dup of its descriptor is an ordinary empty file. */
    int d = openat(AT_FDCWD, "/dev/pfcntr", O_RDONLY | O_CLOEXEC);
    CHECK(d >= 0);
    CHECK((fcntl(d, F_GETFD) & FD_CLOEXEC) != 0);
    int dd = dup(d);
    CHECK(dd >= 0);
    FAILS(ioctl(dd, PCNTENABLE), ENOTTY);
    CHECK(read(dd, buf, 4) == 0);
    CHECK(close(dd) == 0);
    CHECK(close(d) == 0);
    d = open64("/dev/pfcntr", O_RDONLY);
    CHECK(d >= 0);
    CHECK(close(d) == 0);
    /* The number is reused by an ordinary descriptor, which is the system's. */
    CHECK(pipe(p) == 0);
    CHECK(p[0] == d || p[1] == d);
    CHECK(write(p[1], "z", 1) == 1 && read(p[0], buf, 1) == 1 && buf[0] == 'z');
    CHECK(close(p[0]) == 0 && close(p[1]) == 0);
    FAILS(read(-1, buf, 1), EBADF);
    FAILS(close(-1), EBADF);
}

static volatile unsigned long sink;

/* 10^8 iterations of user-mode work: well over 10^7 cycles. */
static void spin(void) {
    for (unsigned long i = 0; i < 100000000UL; i++)
        sink += i;
}

static void perf(void) {
    int fd = open_cycles(PCNTOPENALL);
    int items = PFM_COUNTERS | PFM_IPL;
    CHECK(ioctl(fd, PCNTSETITEMS, &items) == 0);
    CHECK(ioctl(fd, PCNTLOGSELECT) == 0);
    CHECK(ioctl(fd, PCNTCLEARCNT) == 0);
    CHECK(ioctl(fd, PCNTENABLE) == 0);
    spin();
    CHECK(ioctl(fd, PCNTDISABLE) == 0);
    struct pfcntrs c[1], *pc = c;
    struct pfipls h[1], *ph = h;
    CHECK(ioctl(fd, PCNTGETCNT, &pc) == 0);
    CHECK(ioctl(fd, PCNTGETIPLHIS, &ph) == 0);
    /* 10^8 iterations: well over 10^7 cycles, i.e. thousands of 4096-cycle interrupts. */
    CHECK(c[0].pf_cntr0 > 2000);
    CHECK(c[0].pf_cntr1 == 0);
    CHECK(h[0].pf_ipl[8] > 0);
    printf("perf: %lu interrupts, %lu user ticks\n", c[0].pf_cntr0, h[0].pf_ipl[8]);
    /* PCNTLOGALL: the CPUs' ticks (from /proc/stat), or the process's without privilege. */
    CHECK(ioctl(fd, PCNTLOGALL) == 0);
    CHECK(ioctl(fd, PCNTENABLE) == 0);
    CHECK(ioctl(fd, PCNTCLEARCNT) == 0);
    spin();
    CHECK(ioctl(fd, PCNTDISABLE) == 0);
    CHECK(ioctl(fd, PCNTGETIPLHIS, &ph) == 0);
    unsigned long ticks = 0;
    for (int i = 0; i < PF_NIPL; i++)
        ticks += h[0].pf_ipl[i];
    CHECK(ticks > 0 && h[0].pf_ipl[6] == 0);
    CHECK(close(fd) == 0);
}

/* The order a real client uses (issue 45 item 7): open with PCNTOPENALL, PCNTRENABLE, then
 * PCNTSETMUX. The default selection (PF_ISSUES, PF_DCACHE) has no counterpart on this host:
 * enabling with it works, its counters read 0, and the events PCNTSETMUX selects are counted
 * from then on. PCNTRENABLE makes the array requests take the array itself (PAPI's form). */
static void order(void) {
    int fd = open("/dev/pfcntr", O_RDONLY | PCNTOPENALL);
    CHECK(fd >= 0);
    CHECK(ioctl(fd, PCNTRENABLE) == 0);
    struct pfcntrs c[1];
    memset(c, 0xff, sizeof c);
    CHECK(ioctl(fd, PCNTGETCNT, c) == 0);
    CHECK(c[0].pf_cntr0 == 0 && c[0].pf_cntr1 == 0);
    struct iccsr m;
    memset(&m, 0, sizeof m);
    m.iccsr_pc0 = 1; /* every 2^12 events */
    m.iccsr_mux0 = PF_CYCLES;
    m.iccsr_mux1 = PF_BRANCHMISS; /* page faults, through the driver's PERFCOMPAT_EVENTS */
    m.iccsr_pc1 = 1; /* every 2^8 events */
    CHECK(ioctl(fd, PCNTSETMUX, &m) == 0);
    CHECK(ioctl(fd, PCNTCLEARCNT) == 0);
    spin();
    /* 1024 fresh pages: at least 1024 faults, 4 interrupts of counter 1. */
    long pg = sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, 1024 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    CHECK(p != MAP_FAILED);
    if (p != MAP_FAILED) {
        madvise(p, 1024 * (size_t)pg, MADV_NOHUGEPAGE); /* one fault per page */
        for (long i = 0; i < 1024; i++)
            p[i * pg] = 1;
        munmap(p, 1024 * (size_t)pg);
    }
    CHECK(ioctl(fd, PCNTRDISABLE) == 0);
    CHECK(ioctl(fd, PCNTGETCNT, c) == 0);
    CHECK(c[0].pf_cntr0 > 2000);
    CHECK(c[0].pf_cntr1 >= 4);
    printf("order: %lu, %lu interrupts\n", c[0].pf_cntr0, c[0].pf_cntr1);
    /* An event the program selects that the host cannot count still fails the enable. */
    m.iccsr_mux1 = PF_EXTPIN1;
    CHECK(ioctl(fd, PCNTSETMUX, &m) == 0);
    FAILS(ioctl(fd, PCNTRENABLE), ENOENT);
    CHECK(close(fd) == 0);
}

static void unpriv(void) {
    if (getuid() == 0)
        CHECK(setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0);
    int fd = open_cycles(PCNTOPENALL); /* PCNTLOGALL: every CPU */
    CHECK(ioctl(fd, PCNTENABLE) == 0);
    spin();
    struct pfcntrs c[1], *pc = c;
    CHECK(ioctl(fd, PCNTGETCNT, &pc) == 0);
    CHECK(c[0].pf_cntr0 > 2000);
    CHECK(close(fd) == 0);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
#ifdef PFM_PRELOAD
    *(void **)&sim_advance = dlsym(RTLD_DEFAULT, "perfcompat_sim_advance");
#else
    sim_advance = perfcompat_sim_advance;
#endif
    if (!strcmp(mode, "ev4"))
        ev4();
    else if (!strcmp(mode, "each"))
        each();
    else if (!strcmp(mode, "ev5"))
        ev5();
    else if (!strcmp(mode, "files"))
        files();
    else if (!strcmp(mode, "perf"))
        perf();
    else if (!strcmp(mode, "order"))
        order();
    else if (!strcmp(mode, "unpriv"))
        unpriv();
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    printf("%s: %d failures\n", mode, fails);
    return fails != 0;
}
