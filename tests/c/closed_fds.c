/* A program that closes the library's counter descriptors (issue 44 item 1): it closes every
 * descriptor from 3 on (close_range(3, ~0U, 0), or a loop closing 3..1023) while it counts,
 * then opens a pipe with its own bytes in it. Every call of the library on the lost counters
 * must fail with EBADF (and its message on standard error, which the test checks), never
 * hang, and never read, write or close the program's pipe.
 *
 * argv[1]: what the program does after the close:
 *   sample   libcpc: cpc_set_sample, then cpc_set_restart, then unbind and destroy
 *   restart  libcpc: cpc_set_restart first (the pipe empty), then cpc_set_sample, ...
 *   perfex   libperfex: read_counters, then start_counters again
 *   dup2     libcpc with an overflow request (the watcher polls it): the pipe put at the
 *            counters' own numbers with dup2; the restart, the watcher's looks and the
 *            unbind must leave it alone (the sample is called only once the restart found
 *            the loss: on its own it trusts the number, see docs/reliability.md)
 *   overflow libcpc with a request that overflows every 10 page faults, restarted from the
 *            SIGEMT handler: 1000 more faults after the close; the handler's restart fails
 *            (no hang in the handler), no more than a few SIGEMTs come, the pipe is intact
 * argv[2]: close_range or loop.
 * Run on perf with event 25 mapped to page-faults. Prints "0 failures". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "libcpc.h"
#include "libperfex.h"
#include "pages.h"

static int fails;
#define CHECK(c) do { if (!(c)) { printf("FAIL %s:%d: %s (errno %d)\n", __FILE__, __LINE__, #c, errno); fflush(stdout); fails++; } } while (0)

static const char DATA[] = "the program's own bytes\n";

/* The numbers of the process's perf descriptors (at most `max`). */
static int perf_fds(int *out, int max) {
    int n = 0;
    for (int fd = 3; fd < 65536 && n < max; fd++) {
        char path[64], link[128];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t r = readlink(path, link, sizeof link - 1);
        if (r < 0) continue;
        link[r] = 0;
        if (strcmp(link, "anon_inode:[perf_event]") == 0) out[n++] = fd;
    }
    return n;
}

static void close_all(const char *how) {
    if (strcmp(how, "close_range") == 0) {
#ifdef SYS_close_range
        if (syscall(SYS_close_range, 3, ~0U, 0) == 0) return;
#endif
        printf("close_range unavailable: a close loop instead\n");
    }
    for (int fd = 3; fd <= 1023; fd++) close(fd);
}

/* A pipe holding DATA, its read end not blocking (so that the check cannot hang). */
static void make_pipe(int p[2], int fill) {
    CHECK(pipe(p) == 0);
    if (fill) CHECK(write(p[1], DATA, sizeof DATA - 1) == (ssize_t)(sizeof DATA - 1));
}

/* The pipe still holds exactly DATA, and both ends are still open and work. */
static void check_pipe(int p[2], int filled, const char *when) {
    int fl = fcntl(p[0], F_GETFL);
    CHECK(fl != -1 && fcntl(p[1], F_GETFD) != -1);
    if (fl == -1) return;
    fcntl(p[0], F_SETFL, fl | O_NONBLOCK);
    char buf[256];
    ssize_t r = read(p[0], buf, sizeof buf);
    if (filled) {
        if (!(r == (ssize_t)(sizeof DATA - 1) && memcmp(buf, DATA, (size_t)r) == 0))
            printf("FAIL %s: the pipe held %zd bytes, not the program's %zu\n", when, r,
                   sizeof DATA - 1);
        fails += !(r == (ssize_t)(sizeof DATA - 1) && memcmp(buf, DATA, (size_t)r) == 0);
        /* Put them back for the next check. */
        CHECK(write(p[1], DATA, sizeof DATA - 1) == (ssize_t)(sizeof DATA - 1));
    } else {
        CHECK(r == -1 && errno == EAGAIN);
    }
    fcntl(p[0], F_SETFL, fl);
}

static void expect_closed(int rc, const char *what) {
    int e = errno;
    if (rc != -1 || e != EBADF) {
        printf("FAIL %s: returned %d, errno %d (%s), not -1 and EBADF\n", what, rc, e, strerror(e));
        fails++;
    }
}

static cpc_t *ovf_cpc;
static cpc_set_t *ovf_set;
static volatile sig_atomic_t emts, restart_fails;

static void on_emt(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    (void)si;
    (void)uc;
    emts++;
    if (cpc_set_restart(ovf_cpc, ovf_set) != 0) restart_fails++;
}

static void run_overflow(const char *how) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_emt;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGEMT, &sa, NULL);
    ovf_cpc = cpc_open(CPC_VER_CURRENT);
    CHECK(ovf_cpc != NULL);
    if (!ovf_cpc) return;
    ovf_set = cpc_set_create(ovf_cpc);
    CHECK(cpc_set_add_request(ovf_cpc, ovf_set, "page-faults", UINT64_MAX - 9,
                              CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL) == 0);
    cpc_buf_t *buf = cpc_buf_create(ovf_cpc, ovf_set);
    CHECK(buf != NULL && cpc_bind_curlwp(ovf_cpc, ovf_set, 0) == 0);
    touch(1000);
    CHECK(emts >= 90 && restart_fails == 0);
    printf("before the close: %d SIGEMT, %d failed restarts\n", (int)emts, (int)restart_fails);
    close_all(how);
    int p[2];
    make_pipe(p, 1);
    printf("pipe: %d %d\n", p[0], p[1]);
    emts = restart_fails = 0;
    touch(1000);
    printf("after the close: %d SIGEMT, %d failed restarts\n", (int)emts, (int)restart_fails);
    /* The set froze at its first overflow after the close and its restart failed: the
     * counter keeps counting in the kernel (its ring mapping holds it) but notifies no more. */
    CHECK(emts <= 2 && restart_fails == emts);
    check_pipe(p, 1, "after the overflows");
    expect_closed(cpc_set_sample(ovf_cpc, ovf_set, buf), "cpc_set_sample");
    CHECK(cpc_unbind(ovf_cpc, ovf_set) == 0);
    check_pipe(p, 1, "after cpc_unbind");
    CHECK(cpc_close(ovf_cpc) == 0);
    check_pipe(p, 1, "after cpc_close");
}

static int run_cpc(const char *what, const char *how) {
    int dup = strcmp(what, "dup2") == 0;
    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    CHECK(cpc != NULL);
    if (!cpc) return 1;
    cpc_set_t *set = cpc_set_create(cpc);
    uint64_t flags = CPC_COUNT_USER | (dup ? CPC_OVF_NOTIFY_EMT : 0);
    uint64_t preset = dup ? UINT64_MAX - 1000000000ULL : 0;
    CHECK(cpc_set_add_request(cpc, set, "page-faults", preset, flags, 0, NULL) == 0);
    cpc_buf_t *buf = cpc_buf_create(cpc, set);
    CHECK(buf != NULL && cpc_bind_curlwp(cpc, set, 0) == 0);
    CHECK(cpc_set_sample(cpc, set, buf) == 0);

    int ours[64];
    int n = dup ? perf_fds(ours, 64) : 0;
    if (dup) CHECK(n >= 1);
    close_all(how);
    int p[2];
    make_pipe(p, strcmp(what, "restart") != 0);
    int filled = strcmp(what, "restart") != 0;
    printf("pipe: %d %d\n", p[0], p[1]);
    fflush(stdout);
    if (dup) {
        /* The program puts its pipe at the counters' numbers (raising its limit if they are
         * above it). */
        struct rlimit lim;
        getrlimit(RLIMIT_NOFILE, &lim);
        lim.rlim_cur = lim.rlim_max;
        setrlimit(RLIMIT_NOFILE, &lim);
        for (int i = 0; i < n; i++) CHECK(dup2(p[0], ours[i]) == ours[i]);
        printf("the pipe's read end also at %d (of %d)\n", ours[0], n);
    }

    if (strcmp(what, "sample") == 0) {
        expect_closed(cpc_set_sample(cpc, set, buf), "cpc_set_sample");
        check_pipe(p, filled, "after cpc_set_sample");
        expect_closed(cpc_set_restart(cpc, set), "cpc_set_restart");
    } else if (strcmp(what, "restart") == 0) {
        expect_closed(cpc_set_restart(cpc, set), "cpc_set_restart");
        check_pipe(p, filled, "after cpc_set_restart");
        expect_closed(cpc_set_sample(cpc, set, buf), "cpc_set_sample");
    } else {
        expect_closed(cpc_set_restart(cpc, set), "cpc_set_restart");
        check_pipe(p, filled, "after cpc_set_restart");
        /* The watcher looks every 100 ms: let it see the pipe's data at the counter's
         * number a few times. */
        usleep(400 * 1000);
        check_pipe(p, filled, "after the watcher's looks");
        expect_closed(cpc_set_sample(cpc, set, buf), "cpc_set_sample after the restart found it");
    }
    check_pipe(p, filled, "after the calls");
    CHECK(cpc_unbind(cpc, set) == 0);
    check_pipe(p, filled, "after cpc_unbind");
    if (dup)
        for (int i = 0; i < n; i++) CHECK(fcntl(ours[i], F_GETFD) != -1);
    CHECK(cpc_buf_destroy(cpc, buf) == 0);
    CHECK(cpc_set_destroy(cpc, set) == 0);
    CHECK(cpc_close(cpc) == 0);
    check_pipe(p, filled, "after cpc_close");
    if (dup)
        for (int i = 0; i < n; i++) CHECK(fcntl(ours[i], F_GETFD) != -1);
    return 0;
}

static void run_perfex(const char *how) {
    long long c0 = 0, c1 = 0;
    CHECK(start_counters(0, 25) >= 0);
    close_all(how);
    int p[2];
    make_pipe(p, 1);
    printf("pipe: %d %d\n", p[0], p[1]);
    fflush(stdout);
    errno = 0;
    int rc = read_counters(0, &c0, 25, &c1);
    if (!(rc < 0 && errno == EBADF)) {
        printf("FAIL read_counters: returned %d, errno %d (%s)\n", rc, errno, strerror(errno));
        fails++;
    }
    check_pipe(p, 1, "after read_counters");
    errno = 0;
    rc = start_counters(0, 25);
    if (!(rc < 0 && errno == EBADF)) {
        printf("FAIL start_counters: returned %d, errno %d (%s)\n", rc, errno, strerror(errno));
        fails++;
    }
    check_pipe(p, 1, "after start_counters");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s sample|restart|perfex|dup2|overflow close_range|loop\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(argv[1], "perfex") == 0)
        run_perfex(argv[2]);
    else if (strcmp(argv[1], "overflow") == 0)
        run_overflow(argv[2]);
    else
        run_cpc(argv[1], argv[2]);
    printf("%s %s: %d failures\n", argv[1], argv[2], fails);
    return fails != 0;
}
