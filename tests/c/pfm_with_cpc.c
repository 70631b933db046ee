/* libcpc and Tru64's /dev/pfcntr in one process, on the perf backend: one engine, one overflow
 * signal handler. Linked with -lpfcntr and -lcpc (capi/tests/pfm.rs: the build tree's and the
 * installed libraries), run with the event map "PAPI_br_msp = page-faults", so that the
 * device's counter 1 (PF_BRANCHMISS, an interrupt every 2^8 events) counts page faults as the
 * libcpc set does.
 *
 *   count     a libcpc set counting page-faults (bound to the thread, sampled) and the device
 *             counting the process's page faults (PCNTLOGSELECT), around the writing of PAGES
 *             fresh pages: libcpc's count is PAGES and a few more faults of the program; the
 *             device's is floor(faults / 256), exactly PAGES / 256 (PAGES is 39 * 256 + 16, so
 *             up to 240 other faults do not change it).
 *   overflow  the same with both notifying: libcpc's request with CPC_OVF_NOTIFY_EMT and the
 *             preset UINT64_MAX - 999 (a SIGEMT every 1000 events) and the device profiling
 *             the program's PC at each of its interrupts (PFM_PROFILING over the program's
 *             text): exactly PAGES / 1000 SIGEMTs, each handled in the program's handler, the
 *             device's counts as above and its profile holding samples, all in the text.
 *
 * Also checks that the process maps one copy of perfcompat's library. Prints
 * "<mode>: N failures"; exits 0 when there are none. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pfcntr.h>
#include <unistd.h>

#include <libcpc.h>

#include "pages.h"

static int fails;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s (errno %d)\n", __FILE__, __LINE__, #c, errno); fails++; } } while (0)

#define PAGES (39 * 256 + 16)
#define PRESET (UINT64_MAX - 999)

extern char __executable_start[], etext[];

static cpc_t *cpc;
static cpc_set_t *set;
static cpc_buf_t *buf;
static int ind;
static volatile sig_atomic_t overflows, unexpected, restart_failed;

static void emt(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    if (sig != SIGEMT || si->si_code != EMT_CPCOVF) {
        unexpected++;
        return;
    }
    overflows++;
    if (cpc_request_preset(cpc, ind, PRESET) != 0 || cpc_set_restart(cpc, set) != 0)
        restart_failed++;
}

/* Distinct files of perfcompat's library mapped (libpfcntr is another library). */
static int copies(void) {
    char line[4096];
    unsigned long inodes[16];
    int n = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long inode = 0;
        if (strstr(line, "libperfcompat") == NULL && strstr(line, "libcpc") == NULL)
            continue;
        if (sscanf(line, "%*s %*s %*s %*s %lu", &inode) != 1)
            continue;
        int i = 0;
        while (i < n && inodes[i] != inode)
            i++;
        if (i == n && n < 16)
            inodes[n++] = inode;
    }
    fclose(f);
    return n;
}

/* The device counting the process's page faults on counter 1 only (counter 0 disabled). */
static int open_device(int profile) {
    int fd = open("/dev/pfcntr", O_RDONLY);
    CHECK(fd >= 0);
    struct iccsr m;
    memset(&m, 0, sizeof m);
    m.iccsr_pc1 = 1; /* every 2^8 */
    m.iccsr_mux0 = PF_CYCLES;
    m.iccsr_mux1 = PF_BRANCHMISS; /* page faults, through the event map */
    m.iccsr_disable = 1;
    int items = PFM_COUNTERS | (profile ? PFM_PROFILING : 0);
    struct pfrange r = {(unsigned long)__executable_start, (unsigned long)etext, 4};
    CHECK(ioctl(fd, PCNTSETMUX, &m) == 0);
    CHECK(ioctl(fd, PCNTSETITEMS, &items) == 0);
    CHECK(ioctl(fd, PCNTLOGSELECT) == 0);
    if (profile)
        CHECK(ioctl(fd, PCNTSETURANGE, &r) == 0);
    CHECK(ioctl(fd, PCNTCLEARCNT) == 0);
    return fd;
}

static unsigned long device_interrupts(int fd) {
    struct pfcntrs c[1], *pc = c;
    CHECK(ioctl(fd, PCNTGETCNT, &pc) == 0);
    CHECK(c[0].pf_cntr0 == 0);
    return c[0].pf_cntr1;
}

static void count(void) {
    CHECK((ind = cpc_set_add_request(cpc, set, "page-faults", 0, CPC_COUNT_USER, 0, NULL)) == 0);
    CHECK((buf = cpc_buf_create(cpc, set)) != NULL);
    int fd = open_device(0);
    CHECK(cpc_bind_curlwp(cpc, set, 0) == 0);
    CHECK(ioctl(fd, PCNTENABLE) == 0);
    touch(PAGES);
    CHECK(ioctl(fd, PCNTDISABLE) == 0);
    uint64_t v = 0;
    CHECK(cpc_set_sample(cpc, set, buf) == 0);
    CHECK(cpc_buf_get(cpc, buf, ind, &v) == 0);
    CHECK(cpc_unbind(cpc, set) == 0);
    unsigned long n = device_interrupts(fd);
    printf("count: libcpc %llu page faults, device %lu interrupts\n", (unsigned long long)v, n);
    CHECK(v >= PAGES && v < PAGES + 50);
    CHECK(n == PAGES / 256);
    CHECK(close(fd) == 0);
}

static void overflow(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = emt;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGEMT, &sa, NULL) == 0);
    CHECK((ind = cpc_set_add_request(cpc, set, "page-faults", PRESET,
                                     CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL)) == 0);
    CHECK((buf = cpc_buf_create(cpc, set)) != NULL);
    int fd = open_device(1);
    CHECK(ioctl(fd, PCNTENABLE) == 0);
    CHECK(cpc_bind_curlwp(cpc, set, 0) == 0);
    touch(PAGES);
    uint64_t v = 0;
    CHECK(cpc_set_sample(cpc, set, buf) == 0);
    CHECK(cpc_buf_get(cpc, buf, ind, &v) == 0);
    CHECK(cpc_unbind(cpc, set) == 0);
    CHECK(ioctl(fd, PCNTDISABLE) == 0);
    unsigned long n = device_interrupts(fd);
    long size = 0;
    CHECK(ioctl(fd, PCNTGETRSIZE, &size) == 0 && size > 0);
    unsigned int *h = calloc((size_t)size / 4 + 1, 4);
    CHECK(h != NULL && read(fd, h, (size_t)size) == size);
    unsigned long samples = 0;
    for (long i = 0; h && i < size / 4; i++)
        samples += h[i];
    free(h);
    printf("overflow: libcpc %d SIGEMTs, %llu events after the last; device %lu interrupts, "
           "%lu profile samples\n",
           (int)overflows, (unsigned long long)(v - PRESET), n, samples);
    CHECK(overflows == PAGES / 1000);
    CHECK(unexpected == 0 && restart_failed == 0);
    CHECK(v - PRESET < 1000);
    CHECK(n == PAGES / 256);
    /* The profile counter stops from each interrupt until the hook restarts it: some samples,
     * never more than the interrupts. */
    CHECK(samples > 0 && samples <= n);
    CHECK(close(fd) == 0);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    CHECK((cpc = cpc_open(CPC_VER_CURRENT)) != NULL);
    CHECK((set = cpc_set_create(cpc)) != NULL);
    if (cpc == NULL || set == NULL)
        return 1;
    if (!strcmp(mode, "count"))
        count();
    else if (!strcmp(mode, "overflow"))
        overflow();
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    int k = copies();
    CHECK(k == 1);
    printf("%s: %d copies of the library, %d failures\n", mode, k, fails);
    return fails != 0;
}
