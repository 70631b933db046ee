/* Instructions per call on the kernel's real PMU driver: run in the arm64 guest that
 * `.ci/arm64 --bench` boots under `-icount shift=0`, where the guest's clock advances exactly
 * one nanosecond per instruction executed (user and kernel alike), so a call's cost in
 * nanoseconds is its cost in instructions, the same in every run. Each figure is the fewest
 * instructions a batch of calls took over REPS batches (a timer interrupt lands in some
 * batches: the least is a batch without one), less the same loop's with an empty call, divided
 * by the batch's calls.
 *
 * Rows (K hardware events: the first K of cycles, instructions, and the same two again by
 * their raw codes; counting user mode):
 *   sampleK  ours: cpc_set_sample of a bound set (user-space counter reads); stopped: the
 *            same after cpc_disable (the values kept at the stop: no counter read, no clock:
 *            what the handles, the lookups and the bookkeeping cost);
 *            user: the kernel's documented user-space read of the same counters, written here
 *            (the mmap page's seqlock, `mrs` of the counter, sign-extension to pmc_width);
 *            clock: that read and a clock_gettime(CLOCK_MONOTONIC), the least a libcpc
 *            sample needs (cpc_buf_hrtime is the time of the sample);
 *            read: one read() of the open group; papi: PAPI_read of a started event set.
 *   interval ours: start_counters + read_counters (2 events); user: the two user-space reads
 *            of a group of 2; read: two read()s; papi: PAPI_start + PAPI_stop.
 *   first    once per process (`ibench first ours|perfex|raw|papi`): see first_use; the
 *            thread's CPU time (its instructions, user and kernel), and as first-wall the
 *            clock, which also runs while the thread waits (in close(), for the kernel).
 *   fixed    a command's whole run (`ibench fixed LABEL [NAME=VALUE]... COMMAND...`): see fixed.
 *   overflow one overflow handled (`ibench overflow ours|raw|papi`): see overflow.
 *   overflow-part the system calls our overflow makes beyond PAPI's: see sigemt_parts.
 * usage: ibench [first WHO | fixed LABEL [NAME=VALUE]... COMMAND... | overflow WHO [syscalls] |
 *        profile exec [NAME=VALUE]... COMMAND...]; prints "IBENCH <row> <who> <instructions per call>" lines. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <libcpc.h>
#include <libperfex.h>
#include <linux/perf_event.h>
#include <papi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A batch is about BATCH_INSNS instructions (BATCH_MIN to BATCH_MAX calls): a timer tick
 * (every 4 M instructions at HZ 250) then misses most batches, and the clock's 16-instruction
 * step is a small fraction of a call. */
#define BATCH_INSNS 300000
#define BATCH_MIN 64
#define BATCH_MAX 4096
#define REPS 21

/* QEMU's Cortex-A57 PMU offers two events (PMCEID: cpu_cycles, inst_retired); the third and
 * fourth counters count the same two by their raw codes (each a counter of its own). */
static const char *const CPC_EV[4] = {"cycles", "instructions", "r11", "r8"};
static const char *const PAPI_EV[4] = {"perf::CYCLES", "perf::INSTRUCTIONS",
                                       "arm_ac57::CPU_CYCLES",
                                       "arm_ac57::INST_RETIRED"};
static const uint32_t EV_TYPE[4] = {PERF_TYPE_HARDWARE, PERF_TYPE_HARDWARE, PERF_TYPE_RAW,
                                    PERF_TYPE_RAW};
static const uint64_t EV_CONFIG[4] = {PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS,
                                      0x11, 0x08};

/* The results, printed at the end: output on the serial console while a row is measured
 * would interrupt it (the UART's interrupts come when the host has written the bytes out). */
static char results[4096];
static size_t used;

static void fail(const char *what, long code) {
    fputs(results, stdout);
    printf("IBENCH-FAIL %s (%ld, %s)\n", what, code, strerror(errno));
    exit(1);
}

static uint64_t now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t batch(void (*f)(void), int calls) {
    uint64_t best = UINT64_MAX;
    for (int r = 0; r < REPS; r++) {
        uint64_t t0 = now();
        for (int i = 0; i < calls; i++) f();
        uint64_t t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

static void nothing(void) { __asm__ volatile("" ::: "memory"); }

static void report(const char *row, const char *who, void (*f)(void)) {
    uint64_t guess = batch(f, 16) / 16 + 1;
    int calls = (int)(BATCH_INSNS / guess);
    calls = calls < BATCH_MIN ? BATCH_MIN : calls > BATCH_MAX ? BATCH_MAX : calls;
    uint64_t t = batch(f, calls), empty = batch(nothing, calls);
    int n = snprintf(results + used, sizeof results - used, "IBENCH %s %s %.0f\n", row, who,
                     (double)(t - empty) / calls);
    if (n > 0 && (size_t)n < sizeof results - used) used += (size_t)n;
}

/* ---- ours: libcpc ---- */
static cpc_t *cpc;
static cpc_set_t *set;
static cpc_buf_t *buf;
static void ours_sample(void) { cpc_set_sample(cpc, set, buf); }

static void ours_bind(int k) {
    set = cpc_set_create(cpc);
    for (int i = 0; i < k; i++)
        if (cpc_set_add_request(cpc, set, CPC_EV[i], 0, CPC_COUNT_USER, 0, NULL) < 0)
            fail("cpc_set_add_request", i);
    buf = cpc_buf_create(cpc, set);
    if (cpc_bind_curlwp(cpc, set, 0) != 0) fail("cpc_bind_curlwp", k);
}

static void ours_unbind(void) {
    cpc_unbind(cpc, set);
    cpc_buf_destroy(cpc, buf);
    cpc_set_destroy(cpc, set);
}

/* ---- raw perf_event_open, read() and the documented user-space read ---- */
static int fds[4], nfd;
static struct perf_event_mmap_page *pages[4];
static uint64_t vals[4], rbuf[3 + 2 * 4];

static int raw_open(int i, int group) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = EV_TYPE[i];
    a.config = EV_CONFIG[i];
    a.config1 = 2; /* arm64: let user space read the counter */
    a.disabled = group < 0;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.read_format = PERF_FORMAT_GROUP;
    int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, group, 0);
    if (fd < 0) fail("perf_event_open", i);
    return fd;
}

static void raw_open_group(int k) {
    nfd = k;
    for (int i = 0; i < k; i++) {
        fds[i] = raw_open(i, i ? fds[0] : -1);
        pages[i] = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, fds[i], 0);
        if (pages[i] == MAP_FAILED) fail("mmap", i);
    }
    if (ioctl(fds[0], PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP) < 0) fail("enable", 0);
    if (!pages[0]->cap_user_rdpmc || !pages[0]->index) fail("no user-space read", 0);
}

static void raw_close(void) {
    for (int i = 0; i < nfd; i++) {
        munmap(pages[i], (size_t)sysconf(_SC_PAGESIZE));
        close(fds[i]);
    }
}

#define MRS(n)                                                                                \
    case n: __asm__ volatile("mrs %0, pmevcntr" #n "_el0" : "=r"(v)); break;
static uint64_t read_counter(uint32_t idx) {
    uint64_t v = 0;
    switch (idx) {
        MRS(0) MRS(1) MRS(2) MRS(3) MRS(4) MRS(5) MRS(6) MRS(7) MRS(8) MRS(9) MRS(10) MRS(11)
        MRS(12) MRS(13) MRS(14) MRS(15) MRS(16) MRS(17) MRS(18) MRS(19) MRS(20) MRS(21)
        MRS(22) MRS(23) MRS(24) MRS(25) MRS(26) MRS(27) MRS(28) MRS(29) MRS(30)
    case 31: __asm__ volatile("mrs %0, pmccntr_el0" : "=r"(v)); break;
    }
    return v;
}

/* The read sequence of include/uapi/linux/perf_event.h's comment on the mmap page. */
static uint64_t user_read(volatile struct perf_event_mmap_page *pc) {
    uint32_t seq, idx;
    uint64_t count;
    do {
        seq = pc->lock;
        __asm__ volatile("" ::: "memory");
        idx = pc->index;
        count = (uint64_t)pc->offset;
        if (pc->cap_user_rdpmc && idx) {
            uint16_t width = pc->pmc_width;
            int64_t pmc = (int64_t)read_counter(idx - 1);
            pmc <<= 64 - width;
            pmc >>= 64 - width;
            count += (uint64_t)pmc;
        }
        __asm__ volatile("" ::: "memory");
    } while (pc->lock != seq);
    return count;
}

static void user_sample(void) {
    for (int i = 0; i < nfd; i++) vals[i] = user_read(pages[i]);
}
static void user_clock(void) {
    user_sample();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
}
static void user_interval(void) {
    user_sample();
    user_sample();
}
static void read_sample(void) {
    if (read(fds[0], rbuf, sizeof rbuf) <= 0) fail("read", 0);
}
static void read_interval(void) {
    read_sample();
    read_sample();
}

/* ---- PAPI ---- */
static int es = PAPI_NULL;
static long long pv[4];
static void papi_sample(void) { PAPI_read(es, pv); }
static void papi_interval(void) {
    PAPI_start(es);
    PAPI_stop(es, pv);
}

static void papi_set(int k, int start) {
    es = PAPI_NULL;
    if (PAPI_create_eventset(&es) != PAPI_OK) fail("PAPI_create_eventset", 0);
    for (int i = 0; i < k; i++) {
        int rc = PAPI_add_named_event(es, (char *)PAPI_EV[i]);
        if (rc != PAPI_OK) fail(PAPI_EV[i], rc);
    }
    if (start && PAPI_start(es) != PAPI_OK) fail("PAPI_start", k);
}

static void papi_drop(int started) {
    if (started) PAPI_stop(es, pv);
    PAPI_cleanup_eventset(es);
    PAPI_destroy_eventset(&es);
}

/* ---- what our overflow adds to PAPI's, piece by piece (the overflow row's floor): both
 * take the kernel's signal and re-enable the event the kernel stopped at its overflow
 * (PERF_EVENT_IOC_REFRESH); libcpc's SIGEMT handler is a signal handler of the program's,
 * called as the kernel would call it (its disposition read, its mask set: `sigemt`) ---- */
static struct sigaction emt_old;
static sigset_t emt_mask;
static void sigemt_parts(void) {
    sigaction(SIGEMT, NULL, &emt_old);
    pthread_sigmask(SIG_SETMASK, &emt_mask, NULL);
}

/* ---- libperfex ---- */
static int e0 = 0, e1 = 16;
static long long c0, c1;
static void ours_interval(void) {
    start_counters(e0, e1);
    read_counters(e0, &c0, e1, &c1);
}

/* ---- overflow handled (`ibench overflow ours|raw|papi`, one process each: a counter another
 * part of the program still held would push `cycles` off the cycle counter, whose overflow
 * interrupt is the one QEMU raises on time under icount; a general counter's comes at the next
 * timer tick). `cycles` (user mode) overflows every OVF_PERIOD over a loop of 2 * OVF_ITER
 * instructions; an overflow's cost is the run's instructions over the bare loop's (user and
 * kernel: the interrupt, the signal, the handler, the restart), divided by the overflows
 * taken ---- */
#define OVF_PERIOD 200000ull
#define OVF_ITER 10000000ull
static volatile long ovf_count;

static void ovf_loop(void) {
    uint64_t n = OVF_ITER;
    __asm__ volatile("1: subs %0, %0, #1\n\tb.ne 1b" : "+r"(n) : : "cc");
}

/* ours: cpc_bind_curlwp(3CPC)'s way: the preset again and a restart in the SIGEMT handler */
static uint64_t ovf_in_preset, ovf_in_restart;
static void on_emt(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    ovf_count++;
    uint64_t t0 = now();
    cpc_request_preset(cpc, 0, UINT64_MAX - OVF_PERIOD + 1);
    uint64_t t1 = now();
    cpc_set_restart(cpc, set);
    uint64_t t2 = now();
    ovf_in_preset += t1 - t0;
    ovf_in_restart += t2 - t1;
}

/* raw: the kernel's own period and signal, a handler that only counts (the floor) */
static void on_signal(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    ovf_count++;
}

static void on_papi(int es_, void *addr, long long vec, void *ctx) {
    (void)es_, (void)addr, (void)vec, (void)ctx;
    ovf_count++;
}

/* An event's attributes, zeroed but for its type and configuration. */
static void attr_of(struct perf_event_attr *a, uint32_t type, uint64_t config) {
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    a->type = type;
    a->config = config;
}

/* A counter of the thread's system calls (the raw_syscalls:sys_enter tracepoint, a software
 * event: it takes no PMU counter), or -1 where the kernel has none. */
static int syscall_counter(void) {
    FILE *f = fopen("/sys/kernel/tracing/events/raw_syscalls/sys_enter/id", "r");
    unsigned long long id;
    if (!f) return -1;
    int ok = fscanf(f, "%llu", &id) == 1;
    fclose(f);
    if (!ok) return -1;
    struct perf_event_attr a;
    attr_of(&a, PERF_TYPE_TRACEPOINT, id);
    a.disabled = 1;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

static int overflow(const char *who, int count_syscalls) {
    uint64_t bare = UINT64_MAX;
    for (int r = 0; r < 3; r++) {
        uint64_t t0 = now();
        ovf_loop();
        uint64_t t = now() - t0;
        if (t < bare) bare = t;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    uint64_t t0 = 0, t = 0;
    /* Counted in a run of its own: the tracepoint, enabled, adds to every system call. */
    int sc = count_syscalls ? syscall_counter() : -1;
    if (strcmp(who, "ours") == 0) {
        cpc = cpc_open(CPC_VER_CURRENT);
        if (!cpc) fail("cpc_open", 0);
        sa.sa_sigaction = on_emt;
        sigaction(SIGEMT, &sa, NULL);
        set = cpc_set_create(cpc);
        if (cpc_set_add_request(cpc, set, "cycles", UINT64_MAX - OVF_PERIOD + 1,
                                CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL) < 0)
            fail("cpc_set_add_request", 0);
        if (cpc_bind_curlwp(cpc, set, 0) != 0) fail("cpc_bind_curlwp", 0);
        if (sc >= 0) ioctl(sc, PERF_EVENT_IOC_ENABLE, 0);
        t0 = now();
        ovf_loop();
        t = now() - t0;
        if (sc >= 0) ioctl(sc, PERF_EVENT_IOC_DISABLE, 0);
        cpc_unbind(cpc, set);
    } else if (strcmp(who, "raw") == 0) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = PERF_TYPE_HARDWARE;
        a.config = PERF_COUNT_HW_CPU_CYCLES;
        a.sample_period = OVF_PERIOD;
        a.wakeup_events = 1;
        a.disabled = 1;
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
        int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
        if (fd < 0) fail("perf_event_open", 0);
        sa.sa_sigaction = on_signal;
        sigaction(SIGUSR1, &sa, NULL);
        fcntl(fd, F_SETFL, O_ASYNC);
        fcntl(fd, F_SETSIG, SIGUSR1);
        struct f_owner_ex own = {F_OWNER_TID, (pid_t)syscall(SYS_gettid)};
        fcntl(fd, F_SETOWN_EX, &own);
        ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
        if (sc >= 0) ioctl(sc, PERF_EVENT_IOC_ENABLE, 0);
        t0 = now();
        ovf_loop();
        t = now() - t0;
        if (sc >= 0) ioctl(sc, PERF_EVENT_IOC_DISABLE, 0);
        ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
        close(fd);
    } else if (strcmp(who, "papi") == 0) {
        int rc = PAPI_library_init(PAPI_VER_CURRENT);
        if (rc != PAPI_VER_CURRENT) fail("PAPI_library_init", rc);
        int code = 0;
        if (PAPI_event_name_to_code((char *)PAPI_EV[0], &code) != PAPI_OK) fail("PAPI_event_name_to_code", 0);
        papi_set(1, 0);
        if (PAPI_overflow(es, code, (int)OVF_PERIOD, 0, on_papi) != PAPI_OK) fail("PAPI_overflow", 0);
        PAPI_start(es);
        if (sc >= 0) ioctl(sc, PERF_EVENT_IOC_ENABLE, 0);
        t0 = now();
        ovf_loop();
        t = now() - t0;
        if (sc >= 0) ioctl(sc, PERF_EVENT_IOC_DISABLE, 0);
        PAPI_stop(es, pv);
    } else {
        fail(who, 0);
    }
    long n = ovf_count;
    /* At least the loop's own overflows (its handlers' user cycles add a few): fewer means the
     * interrupts came late, and the figure would not be the cost of one. */
    if (n < (long)(2 * OVF_ITER / OVF_PERIOD)) fail("overflows signalled late", n);
    if (!count_syscalls) {
        printf("IBENCH overflow %s %.0f\n", who, (double)(t - bare) / n);
        printf("IBENCH overflows %s %ld\n", who, n);
    }
    /* The loop's system calls per overflow: the handlers' and the restarts' (and the clock's
     * and the enable's own few, spread over the overflows). */
    uint64_t calls = 0;
    if (sc >= 0 && read(sc, &calls, sizeof calls) == (ssize_t)sizeof calls)
        printf("IBENCH overflow-syscalls %s %.1f\n", who, (double)calls / n);
    if (ovf_in_preset)
        printf("IBENCH split overflow: preset %llu restart %llu per overflow (each with a clock read)\n",
               (unsigned long long)(ovf_in_preset / n), (unsigned long long)(ovf_in_restart / n));
    return 0;
}

/* First use, once per process (`ibench first WHO`): from nothing to two events counting.
 * ours: cpc_open, a set of cycles and instructions, a buffer, the first bind; libperfex:
 * the first start_counters (alone: a cpc_open and cpc_npic after it are split, not counted);
 * raw: two perf_event_open, their pages mapped, the group enabled; papi: PAPI_library_init,
 * an event set of the two events, PAPI_start. */
static uint64_t cputime(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A PERF_RECORD_SAMPLE of PERF_SAMPLE_IP | PERF_SAMPLE_CALLCHAIN, copied whole into `rec` (`len`
 * bytes): its ip into *pc, and the user-space address the sample stands for: the ip itself in
 * user space, else the first user-space frame of the call chain (after PERF_CONTEXT_USER: the
 * code whose system call or fault the kernel was serving), 0 when there is none. */
static uint64_t sample_user_ip(const unsigned char *rec, size_t len, uint64_t *pc) {
    const size_t hdr = sizeof(struct perf_event_header);
    uint64_t nr, user = 0;
    memcpy(pc, rec + hdr, 8);
    memcpy(&nr, rec + hdr + 8, 8);
    for (uint64_t i = 0, seen_user = 0; i < nr && hdr + 16 + 8 * (i + 1) <= len; i++) {
        uint64_t ip;
        memcpy(&ip, rec + hdr + 16 + 8 * i, 8);
        if (ip == (uint64_t)PERF_CONTEXT_USER) seen_user = 1;
        else if (seen_user && ip < (uint64_t)PERF_CONTEXT_MAX) { user = ip; break; }
    }
    return *pc < 0xffff000000000000ull ? *pc : user;
}

/* The profiler's event while a first use is profiled: stopped at the row's end, before the
 * split and the row are printed. */
static int first_use_profiled = -1;

static int first_use(const char *who) {
    /* The split of ours is printed after the row is measured: a program's first printf starts
     * its stdio (about 74,000 instructions in the guest), which the row once counted. */
    uint64_t split[3] = {0, 0, 0};
    uint64_t c0 = cputime();
    uint64_t t0 = now();
    if (strcmp(who, "ours") == 0) {
        cpc = cpc_open(CPC_VER_CURRENT);
        if (!cpc) fail("cpc_open", 0);
        uint64_t t1 = now();
        set = cpc_set_create(cpc);
        for (int i = 0; i < 2; i++)
            if (cpc_set_add_request(cpc, set, CPC_EV[i], 0, CPC_COUNT_USER, 0, NULL) < 0)
                fail("cpc_set_add_request", i);
        uint64_t t2 = now();
        buf = cpc_buf_create(cpc, set);
        if (cpc_bind_curlwp(cpc, set, 0) != 0) fail("cpc_bind_curlwp", 2);
        split[0] = t1 - t0;
        split[1] = t2 - t1;
        split[2] = now() - t2;
    } else if (strcmp(who, "perfex") == 0) {
        if (start_counters(e0, e1) < 0) fail("start_counters", 0);
        /* The row is the first start_counters alone; what a libcpc handle costs after it, and
         * its cpc_npic (the perf backend measures the PMU's counters for it), is only split. */
        uint64_t t1 = now(), c1 = cputime();
        if (first_use_profiled >= 0) ioctl(first_use_profiled, PERF_EVENT_IOC_DISABLE, 0);
        cpc = cpc_open(CPC_VER_CURRENT);
        uint64_t t2 = now();
        cpc_npic(cpc);
        uint64_t t3 = now();
        printf("IBENCH split perfex %llu then cpc_open %llu npic %llu\n", (unsigned long long)(t1 - t0),
               (unsigned long long)(t2 - t1), (unsigned long long)(t3 - t2));
        printf("IBENCH first perfex %llu\n", (unsigned long long)(c1 - c0));
        printf("IBENCH first-wall perfex %llu\n", (unsigned long long)(t1 - t0));
        return 0;
    } else if (strcmp(who, "raw") == 0) {
        raw_open_group(2);
    } else if (strcmp(who, "papi") == 0) {
        int rc = PAPI_library_init(PAPI_VER_CURRENT);
        if (rc != PAPI_VER_CURRENT) fail("PAPI_library_init", rc);
        papi_set(2, 1);
    } else {
        fail(who, 0);
    }
    uint64_t t = now() - t0, c = cputime() - c0;
    if (first_use_profiled >= 0) ioctl(first_use_profiled, PERF_EVENT_IOC_DISABLE, 0);
    if (split[0])
        printf("IBENCH split open %llu add %llu bind %llu\n", (unsigned long long)split[0],
               (unsigned long long)split[1], (unsigned long long)split[2]);
    printf("IBENCH first %s %llu\n", who, (unsigned long long)c);
    printf("IBENCH first-wall %s %llu\n", who, (unsigned long long)t);
    return 0;
}

/* `ibench profile first WHO`, `ibench profile overflow WHO`, `ibench profile sample1|sample4|
 * stopped1|interval`: the first use, the overflow run or PROF_CALLS calls of a per-call row
 * (stopped1: the one-event sample of a stopped set) under a sampling profiler: the
 * thread's task-clock every 10 us (10000 instructions under icount; an hrtimer, on time in the
 * guest's virtual clock), its program counters written by the kernel to a ring of sample
 * records, user and kernel alike. A profiler driven by a signal of its own saw nothing inside
 * a signal handler (the library's handlers block every signal) nor in the kernel; records are
 * taken there too. Prints "IPROF <library> <offset>" per sample in a library, and
 * "IPROF k:<function> 0" per sample in the kernel (named from /proc/kallsyms); the runner turns
 * offsets into function names. */
#define PROF_PAGES 512
/* Calls profiled by the per-call profiles: about 5000 samples of a 300-instruction call. */
#define PROF_CALLS 200000
static uint64_t prof_period = 10000;

struct ksym {
    uint64_t addr;
    char name[56];
};
static struct ksym *ksyms;
static size_t nksyms;

static int ksym_cmp(const void *a, const void *b) {
    uint64_t x = ((const struct ksym *)a)->addr, y = ((const struct ksym *)b)->addr;
    return x < y ? -1 : x > y;
}

/* The kernel's text symbols, sorted, for naming kernel samples. */
static void load_ksyms(void) {
    FILE *f = fopen("/proc/kallsyms", "r");
    if (!f) return;
    size_t cap = 0;
    char line[256], type, name[200] = {0};
    unsigned long long addr;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%llx %c %199s", &addr, &type, name) != 3) continue;
        if (type != 't' && type != 'T') continue;
        if (nksyms == cap) {
            cap = cap ? cap * 2 : 65536;
            ksyms = realloc(ksyms, cap * sizeof *ksyms);
            if (!ksyms) fail("realloc", 0);
        }
        ksyms[nksyms].addr = addr;
        memcpy(ksyms[nksyms].name, name, sizeof ksyms[nksyms].name - 1);
        ksyms[nksyms].name[sizeof ksyms[nksyms].name - 1] = 0;
        nksyms++;
    }
    fclose(f);
    qsort(ksyms, nksyms, sizeof *ksyms, ksym_cmp);
}

static const char *ksym_name(uint64_t pc) {
    size_t lo = 0, hi = nksyms;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ksyms[mid].addr <= pc) lo = mid + 1;
        else hi = mid;
    }
    return lo ? ksyms[lo - 1].name : "?";
}

static int profile(int argc, char **argv) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_TASK_CLOCK;
    /* The overflow run samples ten times as often: an overflow is about 25000 instructions. */
    if (argc > 3 && strcmp(argv[2], "overflow") == 0) prof_period = 1000;
    /* A per-call loop repeats every few hundred instructions: a prime period keeps the samples
     * from landing on the same few places of the call. */
    else if (argc < 4) prof_period = 9973;
    a.sample_period = prof_period;
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_CALLCHAIN;
    a.disabled = 1;
    int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    if (fd < 0) fail("perf_event_open task-clock", 0);
    long page = sysconf(_SC_PAGESIZE);
    size_t len = (size_t)page * (PROF_PAGES + 1);
    struct perf_event_mmap_page *meta = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (meta == MAP_FAILED) fail("mmap of the sample ring", 0);
    if (strcmp(argv[2], "sample1") == 0 || strcmp(argv[2], "sample4") == 0 ||
        strcmp(argv[2], "stopped1") == 0) {
        cpc = cpc_open(CPC_VER_CURRENT);
        ours_bind(argv[2][6] == '4' ? 4 : 1);
        if (argv[2][1] == 't') cpc_disable(cpc);
        ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
        for (int i = 0; i < PROF_CALLS; i++) ours_sample();
    } else if (strcmp(argv[2], "interval") == 0) {
        ours_interval();
        ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
        for (int i = 0; i < PROF_CALLS; i++) ours_interval();
    } else if (argc > 3 && strcmp(argv[2], "first") == 0) {
        /* `first WHO SPIN`: SPIN turns of an empty loop first shift where the samples fall
         * (a first use gives about 25; profiles at several shifts, added, give more). */
        long spin = argc > 4 ? atol(argv[4]) : 0;
        ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
        for (volatile long i = 0; i < spin; i++) {
        }
        first_use_profiled = fd;
        first_use(argv[3]);
    } else if (argc > 3 && strcmp(argv[2], "overflow") == 0) {
        ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
        overflow(argv[3], 0);
    }
    ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    load_ksyms();
    const unsigned char *data = (const unsigned char *)meta + page;
    uint64_t size = (uint64_t)page * PROF_PAGES, head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    if (head > size) printf("IPROF-NOTE the ring wrapped: only the last %llu bytes of samples\n", (unsigned long long)size);
    uint64_t lost = 0;
    for (uint64_t at = head > size ? head - size : 0; at < head;) {
        struct perf_event_header h;
        for (size_t i = 0; i < sizeof h; i++) ((unsigned char *)&h)[i] = data[(at + i) % size];
        if (h.size == 0) break;
        if (h.type == PERF_RECORD_SAMPLE) {
            /* ip, then the call chain: the kernel's frames, then PERF_CONTEXT_USER and the
             * user-space ones; the first user-space address is the code whose system call or
             * fault the kernel was serving ("IUSER", after the sample's "IPROF"). */
            static unsigned char rec[4096];
            for (size_t i = 0; i < h.size && i < sizeof rec; i++) rec[i] = data[(at + i) % size];
            uint64_t pc, user = sample_user_ip(rec, sizeof rec, &pc);
            for (int pass = 0; pass < 2; pass++) {
                uint64_t at_pc = pass ? user : pc;
                const char *tag = pass ? "IUSER" : "IPROF";
                Dl_info d;
                if (pass && !user)
                    printf("IUSER ? 0\n");
                else if (at_pc >= 0xffff000000000000ull)
                    printf("%s k:%s 0\n", tag, ksym_name(at_pc));
                else if (dladdr((void *)at_pc, &d) && d.dli_fname)
                    printf("%s %s %lx\n", tag, d.dli_fname, (unsigned long)(at_pc - (uintptr_t)d.dli_fbase));
                else
                    printf("%s ? %lx\n", tag, (unsigned long)at_pc);
            }
        } else if (h.type == PERF_RECORD_LOST) {
            lost++;
        }
        at += h.size;
    }
    if (lost) printf("IPROF-NOTE %llu lost records\n", (unsigned long long)lost);
    return 0;
}

/* `ibench profile exec [NAME=VALUE]... COMMAND...`: COMMAND's whole run (its exec, the loader,
 * the constructors, main, the exit) under the same sampling profiler, PROF_RUNS times: the
 * task-clock event opened by this process on the child, enabled at its exec, with the
 * executable mappings of the child recorded (PERF_RECORD_MMAP), so that each user-space sample
 * is named by the file it falls in and its offset from that file's first mapping (what dladdr
 * names in the `first` profile). This is how the loader's work on a preloaded library is seen
 * (issue 48, loading the library): `.ci/arm64 --profile 'exec LD_PRELOAD=... ./workload 0'`. */
#define PROF_RUNS 10
struct pmap {
    uint64_t start, len, pgoff;
    char file[128];
};

static int profile_exec(char **argv) {
    int cmd = 0;
    while (argv[cmd] && strchr(argv[cmd], '=') && argv[cmd][0] != '=') cmd++;
    if (!argv[cmd]) fail("profile exec: no command", 0);
    size_t n = 0;
    while (environ[n]) n++;
    char **envp = calloc(n + (size_t)cmd + 1, sizeof *envp);
    if (!envp) fail("calloc", 0);
    memcpy(envp, argv, (size_t)cmd * sizeof *envp);
    memcpy(envp + cmd, environ, n * sizeof *envp);
    long page = sysconf(_SC_PAGESIZE);
    static struct pmap maps[256];
    for (int r = 0; r < PROF_RUNS; r++) {
        int go[2];
        if (pipe(go) != 0) fail("pipe", 0);
        pid_t pid = fork();
        if (pid == 0) {
            char c;
            close(go[1]);
            if (read(go[0], &c, 1) != 1) _exit(126);
            close(go[0]);
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            dup2(null, 2);
            execvpe(argv[cmd], argv + cmd, envp);
            _exit(127);
        }
        close(go[0]);
        struct perf_event_attr a;
        attr_of(&a, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);
        a.sample_period = prof_period; /* the kernel's least for task-clock: 10 us */
        a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_CALLCHAIN;
        a.disabled = 1;
        a.enable_on_exec = 1;
        a.mmap = 1;
        a.mmap_data = 1; /* the libraries' first, read-only mappings too: their bases */
        int fd = (int)syscall(SYS_perf_event_open, &a, pid, -1, -1, 0);
        if (fd < 0) fail("perf_event_open task-clock of the child", 0);
        size_t len = (size_t)page * (PROF_PAGES + 1);
        struct perf_event_mmap_page *meta = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (meta == MAP_FAILED) fail("mmap of the sample ring", 0);
        if (write(go[1], "x", 1) != 1) fail("write", 0);
        close(go[1]);
        int st;
        if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) fail(argv[cmd], pid);
        if (r == 0) load_ksyms();
        const unsigned char *data = (const unsigned char *)meta + page;
        uint64_t size = (uint64_t)page * PROF_PAGES, head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
        if (head > size) printf("IPROF-NOTE the ring wrapped: only the last %llu bytes of samples\n", (unsigned long long)size);
        size_t nmaps = 0;
        static unsigned char rec[4096];
        for (uint64_t at = head > size ? head - size : 0; at < head;) {
            struct perf_event_header h;
            for (size_t i = 0; i < sizeof h; i++) ((unsigned char *)&h)[i] = data[(at + i) % size];
            if (h.size == 0) break;
            for (size_t i = 0; i < h.size && i < sizeof rec; i++) rec[i] = data[(at + i) % size];
            if (h.type == PERF_RECORD_MMAP && nmaps < 256) {
                /* pid, tid, addr, len, pgoff, filename */
                struct pmap *m = &maps[nmaps++];
                memcpy(&m->start, rec + sizeof h + 8, 8);
                memcpy(&m->len, rec + sizeof h + 16, 8);
                memcpy(&m->pgoff, rec + sizeof h + 24, 8);
                const char *f = (const char *)rec + sizeof h + 32, *b = strrchr(f, '/');
                f = b ? b + 1 : f;
                size_t fl = strnlen(f, sizeof m->file - 1);
                memcpy(m->file, f, fl);
                m->file[fl] = 0;
            } else if (h.type == PERF_RECORD_SAMPLE) {
                /* ip, then the call chain: the kernel's frames, then PERF_CONTEXT_USER and the
                 * user-space ones; the first user-space address is the code whose system
                 * call or fault the kernel was serving ("IUSER", beside the sample's place). */
                uint64_t pc, user = sample_user_ip(rec, sizeof rec, &pc);
                for (int pass = 0; pass < 2; pass++) {
                    uint64_t at_pc = pass ? user : pc;
                    const char *tag = pass ? "IUSER" : "IPROF";
                    if (pass && !user) { printf("IUSER ? 0\n"); continue; }
                    if (at_pc >= 0xffff000000000000ull) {
                        printf("%s k:%s 0\n", tag, ksym_name(at_pc));
                        continue;
                    }
                    const struct pmap *in = NULL;
                    for (size_t i = 0; i < nmaps; i++)
                        if (at_pc >= maps[i].start && at_pc - maps[i].start < maps[i].len) in = &maps[i];
                    if (!in) {
                        printf("%s ? %llx\n", tag, (unsigned long long)at_pc);
                        continue;
                    }
                    /* The file's base: its mapping at offset 0 (the loader maps a library's
                     * segments contiguously from there). */
                    uint64_t base = in->start - in->pgoff;
                    for (size_t i = 0; i < nmaps; i++)
                        if (maps[i].pgoff == 0 && strcmp(maps[i].file, in->file) == 0 && maps[i].start <= at_pc)
                            base = maps[i].start;
                    printf("%s %s %llx\n", tag, in->file, (unsigned long long)(at_pc - base));
                }
            }
            at += h.size;
        }
        munmap(meta, len);
        close(fd);
    }
    return 0;
}

/* `ibench fixed LABEL [NAME=VALUE]... COMMAND...`: COMMAND run to its end (its output to
 * /dev/null), the fewest instructions of three runs, user and kernel, every process included
 * (the guest has one CPU and nothing else runs, so the clock counts them all). The NAME=VALUE
 * words go into the command's environment as env(1) would put them (first: the loader and
 * getenv take the first of a name), by ibench itself: through env(1) the run would also count
 * env's own exec, about 0.6 M instructions (busybox's start), which is none of the command's
 * cost nor the preloaded library's. */
static int fixed(char **argv) {
    uint64_t best = UINT64_MAX;
    int cmd = 1;
    while (argv[cmd] && strchr(argv[cmd], '=') && argv[cmd][0] != '=') cmd++;
    if (!argv[cmd]) fail("fixed: no command", 0);
    /* The command's environment, built before the runs (a putenv in the forked child would
     * count that child's first malloc, about 0.2 M instructions). */
    size_t n = 0;
    while (environ[n]) n++;
    char **envp = calloc(n + (size_t)cmd, sizeof *envp);
    if (!envp) fail("calloc", 0);
    memcpy(envp, argv + 1, (size_t)(cmd - 1) * sizeof *envp);
    memcpy(envp + cmd - 1, environ, n * sizeof *envp);
    for (int r = 0; r < 3; r++) {
        uint64_t t0 = now();
        pid_t pid = fork();
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            dup2(null, 2);
            execvpe(argv[cmd], argv + cmd, envp);
            _exit(127);
        }
        int st;
        /* A `start-` row runs a command for its start and exit alone (its usage): any exit
         * status. */
        int any = strncmp(argv[0], "start-", 6) == 0;
        if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || (!any && WEXITSTATUS(st) != 0))
            fail(argv[cmd], pid);
        uint64_t t = now() - t0;
        if (t < best) best = t;
    }
    printf("IBENCH fixed %s %llu\n", argv[0], (unsigned long long)best);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "first") == 0) return first_use(argv[2]);
    if (argc > 3 && strcmp(argv[1], "fixed") == 0) return fixed(argv + 2);
    if (argc > 2 && strcmp(argv[1], "overflow") == 0)
        return overflow(argv[2], argc > 3 && strcmp(argv[3], "syscalls") == 0);
    if (argc > 3 && strcmp(argv[1], "profile") == 0 && strcmp(argv[2], "exec") == 0)
        return profile_exec(argv + 3);
    if (argc > 2 && strcmp(argv[1], "profile") == 0) return profile(argc, argv);
    cpc = cpc_open(CPC_VER_CURRENT);
    if (!cpc) fail("cpc_open", 0);
    int rc = PAPI_library_init(PAPI_VER_CURRENT);
    if (rc != PAPI_VER_CURRENT) fail("PAPI_library_init", rc);
    for (int c = 0; c < PAPI_num_components(); c++) {
        const PAPI_component_info_t *ci = PAPI_get_component_info(c);
        if (ci) printf("PAPI component %s: %s %s\n", ci->name,
                       ci->disabled ? "disabled:" : "enabled", ci->disabled ? ci->disabled_reason : "");
    }
    fflush(stdout);
    usleep(200000); /* the console's output drains before the first row */
    static const int ks[3] = {1, 3, 4};
    for (int j = 0; j < 3; j++) {
        int k = ks[j];
        char row[16];
        snprintf(row, sizeof row, "sample%d", k);
        ours_bind(k);
        report(row, "ours", ours_sample);
        cpc_disable(cpc);
        report(row, "stopped", ours_sample);
        ours_unbind();
        raw_open_group(k);
        report(row, "user", user_sample);
        report(row, "clock", user_clock);
        report(row, "read", read_sample);
        raw_close();
        papi_set(k, 1);
        report(row, "papi", papi_sample);
        papi_drop(1);
    }
    report("interval", "ours", ours_interval);
    if (start_counters(e0, e1) < 0 || read_counters(e0, &c0, e1, &c1) < 0 || c0 <= 0 || c1 <= 0)
        fail("libperfex counting", (long)c0);
    raw_open_group(2);
    report("interval", "user", user_interval);
    report("interval", "read", read_interval);
    raw_close();
    papi_set(2, 0);
    report("interval", "papi", papi_interval);
    papi_drop(0);
    pthread_sigmask(SIG_SETMASK, NULL, &emt_mask);
    report("overflow-part", "sigemt", sigemt_parts);
    fputs(results, stdout);
    printf("IBENCH END\n");
    return 0;
}
