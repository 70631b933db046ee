/* perfctr's remote forms, written from perfctr's documented calls: a controller programs and
 * reads another thread's counters with rvperfctr_open / _control / _read_ctrs /
 * _read_state / _stop / _unlink / _close (capi/tests/perfctr.rs).
 *   perf            a forked child process: software page faults, the child touching PAGES
 *                   fresh pages between two pipe messages (so PAGES and a few more)
 *   sim:pentium3    a thread of this process (the emulated PMU counts only its own threads):
 *                   instructions retired (EVNTSEL 0xC0), exact; a child process is refused
 * Then the errors: no such thread (ESRCH), i-mode counters remotely (ENOTSUP), iresume without
 * an overflow (EPERM), a bad handle. It prints its counts and "N failures". */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libperfctr.h>
#include <perfcompat.h>

#include "perfctr_check.h"

#define PAGES 3000
#define INSNS 123457u

static int go[2], done[2];

/* The monitored work, when told to start; then wait to be told to end. */
static void worker(int emulated)
{
    char c;
    if (read(go[0], &c, 1) != 1)
        return;
    if (emulated) {
        perfcompat_sim_advance("PAPI_tot_ins", INSNS);
    } else {
        long page = sysconf(_SC_PAGESIZE);
        char *p = mmap(NULL, PAGES * (size_t)page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        size_t i;
        if (p == MAP_FAILED)
            return;
        for (i = 0; i < PAGES; i++)
            p[i * (size_t)page] = 1;
    }
    if (write(done[1], "d", 1) != 1)
        return;
    (void)read(go[0], &c, 1);
}

static void *worker_thread(void *arg)
{
    pid_t *tid = arg;
    *tid = (pid_t)syscall(SYS_gettid);
    if (write(done[1], "t", 1) != 1)
        return NULL;
    worker(1);
    return NULL;
}

static void tell(void)
{
    CHECK(write(go[1], "g", 1) == 1);
}

static void wait_done(void)
{
    char c;
    CHECK(read(done[0], &c, 1) == 1);
}

int main(void)
{
    struct rvperfctr *rv;
    struct perfctr_info info;
    struct vperfctr_control c, now;
    struct perfctr_sum_ctrs sum, after;
    pthread_t thread;
    pid_t target = 0, child = -1;
    int emulated, status;

    CHECK(pipe(go) == 0 && pipe(done) == 0);
    CHECK(perfctr_get_info(&info) == 0);
    emulated = info.cpu_type == PERFCTR_X86_INTEL_PIII;
    if (!emulated && info.cpu_type != PERFCTR_PERFCOMPAT_PERF) {
        printf("run on perf or sim:pentium3\n");
        return 1;
    }
    if (emulated) {
        CHECK(pthread_create(&thread, NULL, worker_thread, &target) == 0);
        wait_done();
        /* Another process: the emulated counters live in this one. */
        child = fork();
        if (child == 0) {
            pause();
            _exit(0);
        }
        errno = 0;
        CHECK(rvperfctr_open(child) == NULL && errno == ENOTSUP);
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
    } else {
        target = child = fork();
        if (child == 0) {
            worker(0);
            _exit(0);
        }
    }

    rv = rvperfctr_open(target);
    CHECK(rv != NULL);
    if (!rv) {
        printf("%d failures\n", failures);
        return 1;
    }
    CHECK(rvperfctr_pid(rv) == target);
    CHECK(rvperfctr_info(rv, &info) == 0 && perfctr_info_nrctrs(&info) >= 2);

    memset(&c, 0, sizeof c);
    c.cpu_control.tsc_on = 1;
    c.cpu_control.nractrs = 1;
    c.cpu_control.pmc_map[0] = 0;
    c.cpu_control.evntsel[0] =
        emulated ? 0xC0u | 0x30000u | 0x400000u : PERFCTR_EVNTSEL_SOFTWARE(2) | 0x30000u;
    CHECK(rvperfctr_control(rv, &c) == 0);
    if (emulated) /* the controller's own events are not the thread's */
        perfcompat_sim_advance("PAPI_tot_ins", 1000);
    tell();
    wait_done();
    CHECK(rvperfctr_read_ctrs(rv, &sum) == 0);
    printf("remote: pmc0 %" PRIu64 " tsc %s\n", (uint64_t)sum.pmc[0], sum.tsc > 0 ? "> 0" : "0");
    if (emulated)
        CHECK(sum.pmc[0] == INSNS);
    else
        CHECK(sum.pmc[0] >= PAGES && sum.pmc[0] <= PAGES + 64);
    CHECK(rvperfctr_read_state(rv, &after, &now) == 0);
    CHECK(after.pmc[0] == sum.pmc[0] && after.tsc >= sum.tsc);
    CHECK(now.cpu_control.nractrs == 1 && now.cpu_control.evntsel[0] == c.cpu_control.evntsel[0]);
    CHECK(now.cpu_control.tsc_on == 1 && now.preserve == 0);

    /* Errors: i-mode counters remotely, no overflow to resume from, no such thread. */
    c.si_signo = SIGUSR2;
    c.cpu_control.nractrs = 0;
    c.cpu_control.nrictrs = 1;
    c.cpu_control.evntsel[0] |= 0x100000u;
    c.cpu_control.ireset[0] = -100;
    errno = 0;
    CHECK(rvperfctr_control(rv, &c) == -1 && errno == ENOTSUP);
    CHECK(rvperfctr_read_ctrs(rv, &after) == 0 && after.pmc[0] == sum.pmc[0]); /* unchanged */
    errno = 0;
    CHECK(rvperfctr_iresume(rv) == -1 && errno == EPERM);
    errno = 0;
    CHECK(rvperfctr_open(0x3ffffff0) == NULL && errno == ESRCH);
    errno = 0;
    CHECK(rvperfctr_read_ctrs((struct rvperfctr *)&c, &after) == -1 && errno == EINVAL);

    /* Stopped: the sums stay, the control reads as zeros; unlinked: all forgotten. */
    CHECK(rvperfctr_stop(rv) == 0);
    CHECK(rvperfctr_read_state(rv, &after, &now) == 0);
    CHECK(after.pmc[0] == sum.pmc[0] && now.cpu_control.nractrs == 0 && now.cpu_control.tsc_on == 0);
    CHECK(rvperfctr_unlink(rv) == 0);
    CHECK(rvperfctr_read_ctrs(rv, &after) == 0 && after.pmc[0] == 0 && after.tsc == 0);
    rvperfctr_close(rv);

    tell();
    if (emulated)
        CHECK(pthread_join(thread, NULL) == 0);
    else
        CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    printf("%d failures\n", failures);
    return failures != 0;
}
