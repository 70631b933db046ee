/* The floor: the raw perf_event_open system calls each operation needs.
 * usage: raw ITERATIONS [operation...] */
#include "common.h"
#include "rawperf.h"
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

/* Groups read every member at once; a lone event is read without the group format (the
 * cheapest read that still gives the enabled and running times). */
static int open_event(int i, int group) {
    return bench_open_raw(i, group, PERF_FORMAT_GROUP | PERF_FORMAT_ID |
                                        PERF_FORMAT_TOTAL_TIME_ENABLED |
                                        PERF_FORMAT_TOTAL_TIME_RUNNING, 0);
}

static int open_single(void) {
    int fd = bench_open_raw(0, -1, PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING, 0);
    if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) < 0) BENCH_FAIL("enable");
    return fd;
}

static int open_group(int n, int *fds) {
    for (int i = 0; i < n; i++) fds[i] = open_event(i, i ? fds[0] : -1);
    if (ioctl(fds[0], PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP) < 0) BENCH_FAIL("enable");
    return fds[0];
}

static void close_group(int n, int *fds) {
    for (int i = n - 1; i >= 0; i--) close(fds[i]);
}

static uint64_t buf[3 + 2 * 4];

static void group_read(int fd) {
    if (read(fd, buf, sizeof buf) <= 0) BENCH_FAIL("read");
}

/* Reading an inherited event with `threads` live child threads: the kernel sums the counts
 * of every child it copied the event into. The engine's inheriting binding of one request is
 * read the same way (no group format); best of 3 runs of n/10 + 1 reads, as the driver times
 * the engine. */
static pthread_barrier_t inherit_done;
static void *inherit_child(void *arg) {
    (void)arg;
    pthread_barrier_wait(&inherit_done);
    return NULL;
}

static void inherit_read(long n, int threads, const char *op) {
    int fd = bench_open_raw(0, -1, PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING, 1);
    if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) < 0) BENCH_FAIL("enable");
    pthread_t tids[64];
    pthread_barrier_init(&inherit_done, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&tids[i], NULL, inherit_child, NULL) != 0) BENCH_FAIL("pthread_create");
    struct timespec settle = {0, 20 * 1000 * 1000};
    nanosleep(&settle, NULL);
    long reads = n / 10 + 1;
    double best = 1e300;
    for (int r = 0; r < 3; r++) {
        int64_t t0 = bench_now();
        for (long i = 0; i < reads; i++) group_read(fd);
        double ns = (double)(bench_now() - t0) / reads;
        if (ns < best) best = ns;
    }
    bench_report(op, best);
    pthread_barrier_wait(&inherit_done);
    for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
    pthread_barrier_destroy(&inherit_done);
    close(fd);
}

static volatile sig_atomic_t overflows;

/* Overflow: one signal every BENCH_OVF_PERIOD page faults. What the handler asks of the kernel:
 *   OVF_COUNT    nothing (it only counts): the floor of any overflow signal;
 *   OVF_REFRESH  the kernel stops the event at each overflow (an event limit of 1) and the
 *                handler re-enables it with PERF_EVENT_IOC_REFRESH: PAPI's way;
 *   OVF_PRESET   the least a restart from a preset needs: the kernel stops the event at the
 *                overflow (event limit 1, no stop call, no read) and the handler sets the new
 *                distance (IOC_PERIOD) before re-enabling it (IOC_REFRESH);
 *   OVF_FREEZE   libcpc's freeze and restart from a preset as the library made them before
 *                the kernel stopped the group itself: stop (IOC_DISABLE), read the frozen
 *                counts, re-arm the distance (IOC_PERIOD) and start again (IOC_ENABLE);
 *   OVF_LIBCPC   what the kernel does for our libcpc today for an overflow handled with
 *                cpc_set_restart in the SIGEMT handler, and nothing else: the event is never
 *                stopped (no event limit) and has the same overflow record (a ring with the
 *                time and the group's values, read by the handler); SIGEMT's disposition is
 *                read and the handler's mask set (to call the SIGEMT handler as the kernel
 *                would deliver it); the restart reads the count once, where counting resumes
 *                (nothing counted since the overflow: the kernel's period is whole). The
 *                difference to our libcpc is our own user-space work. */
enum { OVF_COUNT, OVF_REFRESH, OVF_PRESET, OVF_FREEZE, OVF_LIBCPC };
static int ovf_mode, ovf_fd;
static struct perf_event_mmap_page *ovf_ring;
static void on_overflow_kernel(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    overflows++;
    if (ovf_mode == OVF_REFRESH) {
        ioctl(ovf_fd, PERF_EVENT_IOC_REFRESH, 1);
    } else if (ovf_mode == OVF_PRESET) {
        uint64_t period = BENCH_OVF_PERIOD;
        ioctl(ovf_fd, PERF_EVENT_IOC_PERIOD, &period);
        ioctl(ovf_fd, PERF_EVENT_IOC_REFRESH, 1);
    } else if (ovf_mode == OVF_LIBCPC) {
        /* The overflow record: header, time, then the group (nr, enabled, running, value, id). */
        uint64_t head = __atomic_load_n(&ovf_ring->data_head, __ATOMIC_ACQUIRE);
        uint64_t tail = ovf_ring->data_tail, rec[7];
        const volatile uint64_t *data = (const uint64_t *)((char *)ovf_ring + ovf_ring->data_offset);
        for (int k = 0; k < 7; k++) rec[k] = data[(tail / 8 + k) % (ovf_ring->data_size / 8)];
        if (head == tail || rec[2] != 1) overflows = -1000000; /* reported as too few */
        __atomic_store_n(&ovf_ring->data_tail, head, __ATOMIC_RELEASE);
        struct sigaction emt;
        sigset_t handler;
        sigaction(SIGRTMIN + 4, NULL, &emt);
        sigemptyset(&handler);
        sigaddset(&handler, SIGRTMIN + 4);
        pthread_sigmask(SIG_SETMASK, &handler, NULL);
        uint64_t v[5];
        if (read(ovf_fd, v, sizeof v) <= 0) overflows = -1000000; /* reported as too few */
    } else if (ovf_mode == OVF_FREEZE) {
        uint64_t v[3], period = BENCH_OVF_PERIOD;
        ioctl(ovf_fd, PERF_EVENT_IOC_DISABLE, 0);
        if (read(ovf_fd, v, sizeof v) <= 0) overflows = -1000000; /* reported as too few */
        ioctl(ovf_fd, PERF_EVENT_IOC_PERIOD, &period);
        ioctl(ovf_fd, PERF_EVENT_IOC_ENABLE, 0);
    }
}

static int overflow_run(int mode, const char *op) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_overflow_kernel;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGRTMIN + 3, &sa, NULL);
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_PAGE_FAULTS;
    a.sample_period = BENCH_OVF_PERIOD;
    a.wakeup_events = 1;
    a.disabled = 1;
    a.exclude_kernel = 0;
    a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    if (mode == OVF_LIBCPC) {
        /* Our libcpc's notifying leader: the overflow record, in the group format. */
        a.read_format |= PERF_FORMAT_GROUP | PERF_FORMAT_ID;
        a.sample_type = PERF_SAMPLE_TIME | PERF_SAMPLE_READ;
        a.use_clockid = 1;
        a.clockid = CLOCK_MONOTONIC;
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
    }
    int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    if (fd < 0) BENCH_FAIL("perf_event_open");
    void *ring = NULL;
    if (mode == OVF_LIBCPC) {
        ring = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (ring == MAP_FAILED) BENCH_FAIL("mmap of the overflow ring");
        ((volatile char *)ring)[0];
        ((volatile char *)ring)[4096];
        ovf_ring = ring;
    }
    struct f_owner_ex owner = {F_OWNER_TID, (pid_t)syscall(SYS_gettid)};
    fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK);
    fcntl(fd, F_SETSIG, SIGRTMIN + 3);
    fcntl(fd, F_SETOWN_EX, &owner);
    ovf_fd = fd;
    ovf_mode = mode;
    overflows = 0;
    int limited = mode == OVF_REFRESH || mode == OVF_PRESET;
    if (ioctl(fd, limited ? PERF_EVENT_IOC_REFRESH : PERF_EVENT_IOC_ENABLE, limited ? 1 : 0) < 0)
        BENCH_FAIL("enable");
    int64_t t0 = bench_now();
    bench_fault_pages(BENCH_OVF_PAGES);
    int64_t dt = bench_now() - t0;
    ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    if (ring) munmap(ring, 2 * 4096);
    close(fd);
    if (overflows < BENCH_OVF_PAGES / BENCH_OVF_PERIOD) {
        fprintf(stderr, "raw %s: %d signals, expected %d\n", op, (int)overflows,
                BENCH_OVF_PAGES / BENCH_OVF_PERIOD);
        return 2;
    }
    bench_report(op, (double)dt / overflows);
    return 0;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int fds[4];
    if (argc > 2 && strcmp(argv[2], "first_use") == 0) {
        /* The first counter of the process: open one event, enable it, read it once. Run
         * alone in a fresh process (the driver does), like every program's first_use. */
        int64_t t0 = bench_now();
        int fd = open_single();
        group_read(fd);
        bench_report("first_use", (double)(bench_now() - t0));
        return 0;
    }
    if (bench_wanted(argc, argv, "sample1")) {
        int fd = open_single();
        group_read(fd);
        int64_t t0 = bench_now();
        for (long i = 0; i < n; i++) group_read(fd);
        bench_report("sample1", (double)(bench_now() - t0) / n);
        close(fd);
    }
    for (int k = 3; k <= 4; k++) {
        static const char *ops[5] = {"", "sample1", "sample2", "sample3", "sample4"};
        if (!bench_wanted(argc, argv, ops[k])) continue;
        int fd = open_group(k, fds);
        group_read(fd);
        int64_t t0 = bench_now();
        for (long i = 0; i < n; i++) group_read(fd);
        bench_report(ops[k], (double)(bench_now() - t0) / n);
        close_group(k, fds);
    }
    if (bench_wanted(argc, argv, "interval")) {
        /* An interval of two events over an open group: a read at each end. */
        int fd = open_group(2, fds);
        int64_t t0 = bench_now();
        for (long i = 0; i < n; i++) { group_read(fd); group_read(fd); }
        bench_report("interval", (double)(bench_now() - t0) / n);
        close_group(2, fds);
    }
    if (bench_wanted(argc, argv, "interval_ioctl")) {
        /* The classic interval: reset and enable, then disable and read. */
        int fd = open_group(2, fds);
        int64_t t0 = bench_now();
        for (long i = 0; i < n; i++) {
            ioctl(fd, PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP);
            ioctl(fd, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
            ioctl(fd, PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP);
            group_read(fd);
        }
        bench_report("interval_ioctl", (double)(bench_now() - t0) / n);
        close_group(2, fds);
    }
    static const struct { int threads; const char *op; } inherits[3] = {
        {0, "inherit0"}, {8, "inherit8"}, {64, "inherit64"}};
    for (int k = 0; k < 3; k++)
        if (bench_wanted(argc, argv, inherits[k].op)) inherit_read(n, inherits[k].threads, inherits[k].op);
    static const struct { int mode; const char *op; } ovfs[5] = {
        {OVF_COUNT, "overflow"}, {OVF_REFRESH, "overflow_refresh"},
        {OVF_PRESET, "overflow_preset"}, {OVF_FREEZE, "overflow_freeze"},
        {OVF_LIBCPC, "overflow_libcpc"}};
    for (int k = 0; k < 5; k++)
        if (bench_wanted(argc, argv, ovfs[k].op) && overflow_run(ovfs[k].mode, ovfs[k].op) != 0)
            return 2;
    return 0;
}
