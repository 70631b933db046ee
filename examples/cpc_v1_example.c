/*
 * cpc_v1_example.c: a program written to libcpc's first interface (Solaris 8 and 9), as the
 * version 1 pages describe it: cpc_version(3CPC), cpc_getcpuver(3CPC), cpc_strtoevent(3CPC),
 * cpc_access(3CPC), cpc_bind_event(3CPC), cpc_event_diff(3CPC) and cpc_seterrfn(3CPC).
 *
 * Part 1 measures a piece of work 20 times: the events come from the PERFEVENTS environment
 * variable (a cpc_strtoevent specification such as "pic0=EC_ref,pic1=EC_hit"), or a default
 * for the processor cpc_getcpuver names; each iteration is sampled before and after, and the
 * difference of the two samples is printed and added to a total.
 *
 * Part 2 catches counter overflows: PIC0 is preset 1000 events short of wrapping and bound
 * with CPC_BIND_EMT_OVF; each overflow sends SIGEMT, whose handler samples the counters and
 * binds them again with the same preset, so that one signal comes every 1000 events. A
 * processor whose counters cannot interrupt (the UltraSPARC I and II) says so and skips it.
 *
 * The work writes to fresh pages (one page fault each: the default events on Linux are the
 * page-faults and task-clock software events). On an emulated PMU
 * (PERFCOMPAT_BACKEND=sim:<model>) the work also reports its events through perfcompat's test
 * hook, perfcompat_sim_advance(): iteration i counts 10 * i events of PIC0's event and i of
 * PIC1's, and part 2 counts 3500 events of PIC0's, so every number printed is exact.
 *
 * Output: '#' lines saying what is counted, "<iteration>: <pic0> <pic1>" lines, "total: ..."
 * and "overflows: N" (3 for 3500 events). Errors go to standard error and exit with status 1.
 */
#define _DEFAULT_SOURCE 1 /* MAP_ANONYMOUS */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <libcpc.h>
#include <perfcompat.h>

#define ITERATIONS 20
#define OVERFLOW_WORK 3500
#define PRESET (UINT64_MAX - UINT64_C(999))

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    (void)fputs("cpc_v1_example: ", stderr);
    (void)vfprintf(stderr, fmt, ap);
    va_end(ap);
    (void)fputc('\n', stderr);
    exit(1);
}

/* libcpc's messages (a bad PERFEVENTS, say) go through this, prefixed with our name. */
static void report(const char *fn, const char *fmt, va_list ap) {
    (void)fprintf(stderr, "cpc_v1_example: cpc_%s: ", fn);
    (void)vfprintf(stderr, fmt, ap);
}

/* The work: fresh pages written, and events reported on an emulated PMU. */
static char *pages;
static size_t page_size, used, npages;
static int emulated;
static char event0[128], event1[128];

static void work(uint64_t n0, uint64_t n1) {
    uint64_t i;
    for (i = 0; i < n0 && used < npages; i++) pages[page_size * used++] = 1;
    if (emulated) {
        if (perfcompat_sim_advance(event0, n0) < 0 || perfcompat_sim_advance(event1, n1) < 0)
            die("perfcompat_sim_advance: %s", strerror(errno));
    }
}

/* The events of PIC0 and PIC1 in a canonical specification ("pic0=A,pic1=B,..."). */
static void pic_events(const char *spec) {
    const char *p0 = strstr(spec, "pic0="), *p1 = strstr(spec, "pic1=");
    if (p0 == NULL || p1 == NULL) die("unexpected specification '%s'", spec);
    (void)sscanf(p0 + 5, "%127[^,]", event0);
    (void)sscanf(p1 + 5, "%127[^,]", event1);
}

static const char *default_events(int cpuver) {
    switch (cpuver) {
    case CPC_ULTRA1:
    case CPC_ULTRA2:
        return "pic0=EC_ref,pic1=EC_hit";
    case CPC_ULTRA3_PLUS:
        return "pic0=EC_ref,pic1=Instr_cnt";
    case CPC_PENTIUM4:
        return "pic0=instr_retired,emask0=0x1,pic1=branch_retired,emask1=0xf";
    default:
        return "pic0=page-faults,pic1=task-clock";
    }
}

/* Part 2's handler: count the overflow, sample, and bind again from the preset. */
static volatile sig_atomic_t overflows, handler_errors;
static void on_emt(int sig, siginfo_t *info, void *context) {
    cpc_event_t now;
    (void)context;
    if (sig != SIGEMT || info->si_code != EMT_CPCOVF) {
        handler_errors++;
        return;
    }
    overflows++;
    if (cpc_take_sample(&now) == -1) {
        handler_errors++;
        return;
    }
    /* PIC0 wrapped: it reads 0 (or a few events more on real hardware). */
    now.ce_pic[0] = PRESET;
    if (cpc_bind_event(&now, CPC_BIND_EMT_OVF) == -1) handler_errors++;
}

int main(void) {
    int cpuver, iter;
    const char *spec;
    char *setting;
    cpc_event_t event, total;
    struct sigaction sa;

    page_size = (size_t)sysconf(_SC_PAGESIZE);
    npages = 10 * ITERATIONS * (ITERATIONS + 1) / 2 + OVERFLOW_WORK + 64;
    pages = (char *)mmap(NULL, page_size * npages, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
    if (pages == MAP_FAILED) die("mmap: %s", strerror(errno));

    cpc_seterrfn(report);
    if (cpc_version(CPC_VER_CURRENT) == CPC_VER_NONE) die("libcpc does not speak this version");
    if ((cpuver = cpc_getcpuver()) == -1) die("no performance counters: %s", strerror(errno));
    if (cpc_access() == -1) die("cannot use the counters: %s", strerror(errno));
    emulated = cpuver != CPC_PERFCOMPAT_HOST;

    spec = getenv("PERFEVENTS");
    if (spec == NULL) spec = default_events(cpuver);
    if (cpc_strtoevent(cpuver, spec, &event) != 0) die("cannot count '%s' here", spec);
    if ((setting = cpc_eventtostr(&event)) == NULL) die("cpc_eventtostr: %s", strerror(errno));
    pic_events(setting);
    (void)printf("# %s (cpuver %d), %u counters: %s\n", cpc_getcciname(cpuver), cpuver,
                 cpc_getnpic(cpuver), setting);

    /* Part 1: samples around each iteration. */
    if (cpc_bind_event(&event, 0) == -1) die("cpc_bind_event: %s", strerror(errno));
    memset(&total, 0, sizeof total);
    for (iter = 1; iter <= ITERATIONS; iter++) {
        cpc_event_t before, after, diff;
        if (cpc_take_sample(&before) == -1) die("cpc_take_sample: %s", strerror(errno));
        work(10 * (uint64_t)iter, (uint64_t)iter);
        if (cpc_take_sample(&after) == -1) die("cpc_take_sample: %s", strerror(errno));
        cpc_event_diff(&diff, &after, &before);
        cpc_event_accum(&total, &diff);
        (void)printf("%2d: %" PRIu64 " %" PRIu64 "\n", iter, diff.ce_pic[0], diff.ce_pic[1]);
    }
    (void)printf("total: %" PRIu64 " %" PRIu64 "\n", total.ce_pic[0], total.ce_pic[1]);

    /* Part 2: a SIGEMT every 1000 events of PIC0. */
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_emt;
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    if (sigaction(SIGEMT, &sa, NULL) == -1) die("sigaction: %s", strerror(errno));
    event.ce_pic[0] = PRESET;
    event.ce_pic[1] = 0;
    cpc_seterrfn(NULL);
    if (cpc_bind_event(&event, CPC_BIND_EMT_OVF) == -1) {
        if (errno != ENOTSUP) die("cpc_bind_event(CPC_BIND_EMT_OVF): %s", strerror(errno));
        (void)printf("# no overflow interrupts on this processor\n");
    } else {
        uint64_t done;
        for (done = 0; done < OVERFLOW_WORK; done += 100) work(100, 0);
        if (handler_errors != 0) die("the SIGEMT handler failed");
        (void)printf("overflows: %d\n", (int)overflows);
    }

    (void)cpc_bind_event(NULL, 0);
    free(setting);
    return 0;
}
