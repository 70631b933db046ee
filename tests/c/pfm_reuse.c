/* A descriptor number of /dev/pfcntr reused behind the library's back is never served as the
 * device, and the device opens again (issue 29, item 4). Run on sim:ev4 by capi/tests/pfm.rs.
 *
 * argv[1] is how the device's number d comes to name a 3-byte file ("abc"):
 *   dup2         dup2(file, d)
 *   dup3         dup3(file, d, O_CLOEXEC)
 *   close_range  close_range(d, d, 0), then open(file) returns d
 *   dupfd        close_range(d, d, 0), then fcntl(file, F_DUPFD, d) returns d
 *   syscall      syscall(SYS_close, d), then open(file) returns d
 *   closed       syscall(SYS_close, d) and nothing reuses d: the device opens again
 * The device is open with a 100-byte profile, so that a read served by the device would return
 * 100 bytes. Each mode runs three times: the reused number used first (read, ioctl), then the
 * device opened again; the device opened first, then the number used; and d closed first, then
 * the device opened. Each time d reads the file's 3 bytes, a pfm request on d is the C
 * library's ENOTTY, /dev/pfcntr opens again (no EBUSY) and counts exactly, and close(d) closes
 * the file. Built with -DPFM_PRELOAD it is not linked with the libraries (LD_PRELOAD provides
 * them). Prints what it saw, then "<mode>: N failures"; exits 0 when there are none. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pfcntr.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "perfcompat.h"
#ifdef PFM_PRELOAD
#include <dlfcn.h>
#endif

static int fails;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s (errno %d)\n", __FILE__, __LINE__, #c, errno); fails++; } } while (0)

static char path[] = "/tmp/pfm_reuse_XXXXXX";

/* perfcompat_sim_advance; the preloaded build (-DPFM_PRELOAD), not linked with the library,
 * looks it up. */
static int (*sim_advance)(const char *, uint64_t);

/* The device, with a 100-byte profile (25 buckets of one instruction each). */
static int open_device(void) {
    int fd = open("/dev/pfcntr", O_RDONLY);
    CHECK(fd >= 0);
    int items = PFM_COUNTERS | PFM_PROFILING;
    struct pfrange r = {0x10000, 0x10000 + 100, 1};
    long rsize = 0;
    CHECK(ioctl(fd, PCNTSETITEMS, &items) == 0);
    CHECK(ioctl(fd, PCNTSETURANGE, &r) == 0);
    CHECK(ioctl(fd, PCNTGETRSIZE, &rsize) == 0 && rsize == 100);
    return fd;
}

/* d as the file now: its 3 bytes, the C library's ioctl. */
static void use_number(const char *mode, int d) {
    char buf[128];
    memset(buf, 0, sizeof buf);
    CHECK(lseek(d, 0, SEEK_SET) == 0);
    ssize_t n = read(d, buf, sizeof buf);
    errno = 0;
    int r = ioctl(d, PCNTENABLE);
    int e = errno;
    long rsize = -1;
    errno = 0;
    int r2 = ioctl(d, PCNTGETRSIZE, &rsize);
    int e2 = errno;
    printf("%s: fd %d read %zd bytes \"%.3s\", PCNTENABLE %d (errno %d), PCNTGETRSIZE %d "
           "(errno %d)\n",
           mode, d, n, buf, r, e, r2, e2);
    CHECK(n == 3 && memcmp(buf, "abc", 3) == 0);
    CHECK(r == -1 && e == ENOTTY);
    CHECK(r2 == -1 && e2 == ENOTTY && rsize == -1);
}

/* close(d) closes the file. */
static void close_number(int d) {
    CHECK(close(d) == 0);
    errno = 0;
    CHECK(fcntl(d, F_GETFD) == -1 && errno == EBADF);
}

/* The device opens again and counts exactly. Returns its descriptor. */
static int reopen(const char *mode) {
    errno = 0;
    int fd = open("/dev/pfcntr", O_RDONLY | PCNTOPENALL);
    printf("%s: /dev/pfcntr opened again: %d (errno %d)\n", mode, fd, fd < 0 ? errno : 0);
    CHECK(fd >= 0);
    if (fd < 0)
        return -1;
    struct iccsr m;
    memset(&m, 0, sizeof m);
    m.iccsr_pc0 = 1; /* every 2^12 */
    m.iccsr_mux0 = PF_CYCLES;
    m.iccsr_disable = 2;
    struct pfcntrs c[1], *pc = c;
    CHECK(ioctl(fd, PCNTSETMUX, &m) == 0);
    CHECK(ioctl(fd, PCNTENABLE) == 0);
    CHECK(sim_advance != NULL && sim_advance("PF_CYCLES", 3 * 4096 + 5) >= 0);
    CHECK(ioctl(fd, PCNTGETCNT, &pc) == 0 && c[0].pf_cntr0 == 3);
    return fd;
}

/* What comes first once d names the file. */
enum order { USE_FIRST, OPEN_FIRST, CLOSE_FIRST };

static void scenario(const char *mode, enum order order) {
    int d = open_device();
    int f = open(path, O_RDONLY);
    CHECK(f >= 0);
    int got = -1;
    if (!strcmp(mode, "dup2")) {
        got = dup2(f, d);
    } else if (!strcmp(mode, "dup3")) {
        got = dup3(f, d, O_CLOEXEC);
    } else if (!strcmp(mode, "close_range")) {
        CHECK(close(f) == 0);
        CHECK(close_range((unsigned)d, (unsigned)d, 0) == 0);
        got = f = open(path, O_RDONLY);
    } else if (!strcmp(mode, "dupfd")) {
        CHECK(close_range((unsigned)d, (unsigned)d, 0) == 0);
        got = fcntl(f, F_DUPFD, d);
    } else if (!strcmp(mode, "syscall")) {
        CHECK(close(f) == 0);
        CHECK(syscall(SYS_close, d) == 0);
        got = f = open(path, O_RDONLY);
    } else if (!strcmp(mode, "closed")) {
        CHECK(close(f) == 0);
        f = -1;
        CHECK(syscall(SYS_close, d) == 0);
        int e = reopen(mode); /* may well be number d again: it is the device now */
        CHECK(e >= 0 && close(e) == 0);
        e = reopen(mode);
        CHECK(e >= 0 && close(e) == 0);
        return;
    }
    CHECK(got == d);
    if (f != d)
        CHECK(close(f) == 0);
    int e = -1;
    if (order == USE_FIRST) {
        use_number(mode, d);
        e = reopen(mode);
        close_number(d);
    } else if (order == OPEN_FIRST) {
        e = reopen(mode);
        use_number(mode, d);
        close_number(d);
    } else {
        close_number(d);
        e = reopen(mode);
    }
    CHECK(e >= 0 && close(e) == 0);
    /* And once more from nothing. */
    e = reopen(mode);
    CHECK(e >= 0 && close(e) == 0);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    const char *modes[] = {"dup2", "dup3", "close_range", "dupfd", "syscall", "closed"};
    int known = 0;
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
        known |= !strcmp(mode, modes[i]);
    if (!known) {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
#ifdef PFM_PRELOAD
    *(void **)&sim_advance = dlsym(RTLD_DEFAULT, "perfcompat_sim_advance");
#else
    sim_advance = perfcompat_sim_advance;
#endif
    int w = mkstemp(path);
    CHECK(w >= 0 && write(w, "abc", 3) == 3 && close(w) == 0);
    scenario(mode, USE_FIRST);
    scenario(mode, OPEN_FIRST);
    scenario(mode, CLOSE_FIRST);
    CHECK(unlink(path) == 0);
    printf("%s: %d failures\n", mode, fails);
    return fails != 0;
}
