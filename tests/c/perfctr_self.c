/* A self-monitoring program written from perfctr's documentation: a-mode counters and the
 * TSC, then an a-mode and an i-mode counter whose overflow handler checks SI_PMC_OVF and the
 * mask and calls vperfctr_iresume; then control data perfctr refused. It picks its events by
 * the CPU type vperfctr_info reports, as perfctr's clients did (capi/tests/perfctr.rs):
 *   Pentium III (sim:pentium3)  EVNTSEL 0x79 cycles, 0xC0 instructions retired
 *   Pentium 4 (sim:pentium4)    counter 0: CCCR with FSB_ESCR0 (select 6), ESCR event 0x13
 *                               (global_power_events, mask 1); counter 12: CRU_ESCR0 (select
 *                               4), event 2 (instr_retired, mask 3); pmc_map with fast RDPMC
 *   PowerPC 750 (sim:ppc750)    PMC1 cycles (1), PMC2 instructions completed (2)
 *   perf                        software page faults (PERFCTR_EVNTSEL_SOFTWARE(2))
 * On the emulated PMUs the work is perfcompat_sim_advance, and every count is checked exactly;
 * on perf it touches a page once for every 10 "instructions". It prints its counts and "N failures". */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libperfctr.h>
#include <perfcompat.h>

#include "perfctr_check.h"

static struct vperfctr *vp;
static volatile sig_atomic_t signals, bad_code, bad_mask, resume_failed;
static volatile unsigned int mask_or;

static void on_overflow(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    signals++;
    if (si->si_code != SI_PMC_OVF)
        bad_code++;
    if ((unsigned int)si->si_pmc_ovf_mask != 2u)
        bad_mask++;
    mask_or |= (unsigned int)si->si_pmc_ovf_mask;
    if (vperfctr_iresume(vp) != 0)
        resume_failed++;
}

enum family { P6, P4, PPC, PERF };

/* Counter i's evntsel for "cycles" (which = 0) or "instructions"/"faults" (which = 1). */
static unsigned int evntsel(enum family f, unsigned int pmc, int which, int imode)
{
    unsigned int usr_os = 0x30000u, en = pmc == 0 ? 0x400000u : 0, intr = imode ? 0x100000u : 0;
    switch (f) {
    case P6:
        return (which ? 0xC0u : 0x79u) | usr_os | en | intr;
    case P4: /* CCCR: ENABLE, ESCR select, ACTIVE_THREAD, OVF_PMI_T0 for i-mode */
        return 0x1000u | (which ? 4u : 6u) << 13 | 0x30000u | (imode ? 0x4000000u : 0);
    case PPC:
        return which ? 2u : 1u;
    default:
        return PERFCTR_EVNTSEL_SOFTWARE(which ? 2 : 3) | usr_os | intr;
    }
}

/* The Pentium 4's ESCR of counter i: event select, event mask, T0_OS and T0_USR. */
static unsigned int escr(int which)
{
    return which ? (0x2u << 25 | 0x3u << 9 | 0xCu) : (0x13u << 25 | 0x1u << 9 | 0xCu);
}

/* The hardware counter of counter i. */
static unsigned int pmc(enum family f, int i)
{
    if (f == P4)
        return 0x80000000u | (i ? 12u : 0u);
    return (unsigned int)i;
}

static char *pages;
static size_t npages, touched;
static long page;

/* The work: cycles and instructions (emulated), or page faults (perf). */
static void work(enum family f, uint64_t cycles, uint64_t insns)
{
    if (f == PERF) {
        size_t i;
        for (i = 0; i < insns / 10 && touched < npages; i++)
            pages[(touched++) * (size_t)page] = 1;
        return;
    }
    CHECK(perfcompat_sim_advance("PAPI_tot_cyc", cycles) >= 0);
    CHECK(perfcompat_sim_advance("PAPI_tot_ins", insns) >= 0);
}

static int control(enum family f, int nractrs, int nrictrs, int ireset_events)
{
    struct vperfctr_control c;
    int i;
    memset(&c, 0, sizeof c);
    c.cpu_control.tsc_on = 1;
    c.cpu_control.nractrs = (unsigned int)nractrs;
    c.cpu_control.nrictrs = (unsigned int)nrictrs;
    for (i = 0; i < nractrs + nrictrs; i++) {
        c.cpu_control.pmc_map[i] = pmc(f, i);
        c.cpu_control.evntsel[i] = evntsel(f, (unsigned int)i, i, i >= nractrs);
        c.cpu_control.p4.escr[i] = escr(i);
    }
    if (nrictrs) {
        c.si_signo = SIGUSR2;
        /* x86 (and perf): overflow after -ireset events; PowerPC: when bit 31 sets. */
        c.cpu_control.ireset[1] =
            f == PPC ? (int)(0x80000000u - (unsigned int)ireset_events) : -ireset_events;
    }
    return vperfctr_control(vp, &c);
}

/* A new thread's counters are its own: none until it programs them, and what it does is not
 * in its creator's sums. */
static void *other_thread(void *arg)
{
    struct vperfctr *mine = vperfctr_open();
    struct perfctr_sum_ctrs s;
    int *bad = arg;
    *bad = !mine || vperfctr_is_running(mine) != 0 || vperfctr_read_ctrs(mine, &s) != 0 ||
           s.tsc != 0 || s.pmc[0] != 0 || s.pmc[1] != 0;
    perfcompat_sim_advance("PAPI_tot_ins", 777);
    perfcompat_sim_advance("PAPI_tot_cyc", 777);
    if (mine)
        vperfctr_close(mine);
    return NULL;
}

/* Not inherited: a new thread and a fork child start without counters. */
static void not_inherited(enum family f)
{
    struct perfctr_sum_ctrs before, after;
    pthread_t t;
    pid_t child;
    int bad = 1, status = -1;
    CHECK(vperfctr_read_ctrs(vp, &before) == 0);
    CHECK(pthread_create(&t, NULL, other_thread, &bad) == 0 && pthread_join(t, NULL) == 0);
    CHECK(bad == 0);
    child = fork();
    if (child == 0) {
        struct perfctr_sum_ctrs s;
        _exit(vperfctr_is_running(vp) != 0 || vperfctr_read_ctrs(vp, &s) != 0 || s.tsc != 0 ||
              s.pmc[0] != 0 || s.pmc[1] != 0);
    }
    CHECK(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) &&
          WEXITSTATUS(status) == 0);
    CHECK(vperfctr_read_ctrs(vp, &after) == 0);
    if (f != PERF) /* the thread's and the child's events are not the parent's */
        CHECK(after.pmc[0] == before.pmc[0] && after.pmc[1] == before.pmc[1] &&
              after.tsc == before.tsc);
}

/* Control data perfctr refused: each must fail with EINVAL and change nothing. */
static void bad_controls(enum family f, unsigned int nrctrs)
{
    struct vperfctr_control c;
    memset(&c, 0, sizeof c);
    c.cpu_control.nractrs = nrctrs + 1; /* too many counters */
    errno = 0;
    CHECK(vperfctr_control(vp, &c) == -1 && errno == EINVAL);

    memset(&c, 0, sizeof c);
    c.cpu_control.nractrs = 2; /* a pmc_map collision */
    c.cpu_control.pmc_map[0] = c.cpu_control.pmc_map[1] = 0;
    c.cpu_control.evntsel[0] = c.cpu_control.evntsel[1] = evntsel(f, 0, 0, 0);
    c.cpu_control.p4.escr[0] = c.cpu_control.p4.escr[1] = escr(0);
    errno = 0;
    CHECK(vperfctr_control(vp, &c) == -1 && errno == EINVAL);

    memset(&c, 0, sizeof c);
    c.si_signo = SIGUSR2; /* an ireset out of range */
    c.cpu_control.nrictrs = 1;
    c.cpu_control.pmc_map[0] = pmc(f, 1);
    c.cpu_control.evntsel[0] = evntsel(f, 1, 1, 1);
    c.cpu_control.p4.escr[0] = escr(1);
    c.cpu_control.ireset[0] = f == PPC ? -5 : 5;
    errno = 0;
    CHECK(vperfctr_control(vp, &c) == -1 && errno == EINVAL);

    memset(&c, 0, sizeof c);
    c.cpu_control.nractrs = 1; /* an unknown evntsel */
    c.cpu_control.evntsel[0] = f == PPC ? 99u : (f == P6 ? 0x4300EEu : 0x2300EEu);
    if (f == P4) { /* FSB_ESCR0 with event select 0x3f */
        c.cpu_control.evntsel[0] = evntsel(f, 0, 0, 0);
        c.cpu_control.p4.escr[0] = 0x3Fu << 25 | 0xCu;
    }
    errno = 0;
    CHECK(vperfctr_control(vp, &c) == -1 && errno == EINVAL);

    if (f == P4) { /* counters 12 and 13 both need CRU_ESCR0: the placement refuses it */
        memset(&c, 0, sizeof c);
        c.cpu_control.nractrs = 2;
        c.cpu_control.pmc_map[0] = 12;
        c.cpu_control.pmc_map[1] = 13;
        c.cpu_control.evntsel[0] = c.cpu_control.evntsel[1] = evntsel(f, 0, 1, 0);
        c.cpu_control.p4.escr[0] = c.cpu_control.p4.escr[1] = escr(1);
        errno = 0;
        CHECK(vperfctr_control(vp, &c) == -1 && errno == EINVAL);
    }

    errno = 0;
    CHECK(vperfctr_control(vp, NULL) == -1 && errno == EFAULT);
}

int main(void)
{
    struct perfctr_info info;
    struct perfctr_sum_ctrs sum;
    struct vperfctr_control now;
    struct sigaction sa;
    enum family f;
    uint64_t cycles = 0, insns = 0;
    int round;

    page = sysconf(_SC_PAGESIZE);
    npages = 20000;
    pages = mmap(NULL, npages * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
    CHECK(pages != MAP_FAILED);
    /* One page fault per page touched: no transparent huge pages (the arm64 guest's kernel
     * makes them always). */
    madvise(pages, npages * (size_t)page, MADV_NOHUGEPAGE);

    vp = vperfctr_open();
    if (!vp) {
        perror("vperfctr_open");
        return 1;
    }
    CHECK(vperfctr_info(vp, &info) == 0);
    switch (info.cpu_type) {
    case PERFCTR_X86_INTEL_PIII: f = P6; break;
    case PERFCTR_X86_INTEL_P4: f = P4; break;
    case PERFCTR_PPC_750: f = PPC; break;
    case PERFCTR_PERFCOMPAT_PERF: f = PERF; break;
    default:
        printf("cpu type %u (%s): no events\n", info.cpu_type, perfctr_info_cpu_name(&info));
        return 1;
    }
    printf("cpu %s, %u counters, features %#x\n", perfctr_info_cpu_name(&info),
           perfctr_info_nrctrs(&info), info.cpu_features);
    CHECK(info.cpu_features & PERFCTR_FEATURE_RDTSC);
    CHECK(info.cpu_features & PERFCTR_FEATURE_PCINT);
    CHECK(perfctr_mk_cstatus(1, 2, 1) != 0 && perfctr_cstatus_has_tsc(perfctr_mk_cstatus(1, 2, 1)));
    CHECK(perfctr_cstatus_nrctrs(perfctr_mk_cstatus(1, 2, 1)) == 3);
    CHECK(perfctr_cstatus_has_ictrs(perfctr_mk_cstatus(0, 2, 1)));
    CHECK(!perfctr_cstatus_has_ictrs(perfctr_mk_cstatus(1, 2, 0)));

    /* 1. Two a-mode counters and the TSC. */
    CHECK(vperfctr_is_running(vp) == 0);
    CHECK(control(f, 2, 0, 0) == 0);
    CHECK(vperfctr_is_running(vp) == 1);
    for (round = 1; round <= 20; round++) {
        work(f, 7919u * (unsigned)round, 331u * (unsigned)round + 5);
        cycles += 7919u * (unsigned)round;
        insns += 331u * (unsigned)round + 5;
    }
    CHECK(vperfctr_read_ctrs(vp, &sum) == 0);
    printf("a-mode: tsc %" PRIu64 " pmc0 %" PRIu64 " pmc1 %" PRIu64 "\n", (uint64_t)sum.tsc,
           (uint64_t)sum.pmc[0], (uint64_t)sum.pmc[1]);
    if (f == PERF) {
        CHECK(sum.pmc[1] >= touched && sum.pmc[1] <= touched + 64);
        CHECK(sum.tsc > 0);
    } else {
        CHECK(sum.pmc[0] == cycles && sum.pmc[1] == insns && sum.tsc == cycles);
        CHECK(vperfctr_read_pmc(vp, 1) == insns && vperfctr_read_tsc(vp) == cycles);
    }
    CHECK(vperfctr_read_state(vp, NULL, &now) == 0 && now.cpu_control.nractrs == 2);
    not_inherited(f);
    CHECK(vperfctr_iresume(vp) == -1 && errno == EPERM); /* no overflow to resume from */
    CHECK(vperfctr_stop(vp) == 0 && vperfctr_is_running(vp) == 0);
    /* Stopped as perfctr's library stopped, with an empty control: the control reads as zeros. */
    CHECK(vperfctr_read_state(vp, NULL, &now) == 0 && now.cpu_control.nractrs == 0 &&
          now.cpu_control.tsc_on == 0);
    work(f, 1000, 1000); /* stopped: not counted */
    {
        struct perfctr_sum_ctrs after;
        CHECK(vperfctr_read_ctrs(vp, &after) == 0);
        CHECK(memcmp(&after, &sum, sizeof sum) == 0 || f == PERF);
    }

    /* 2. An a-mode counter and an i-mode counter that overflows every 1000 events (100 page
     * faults on perf); the handler resumes it. */
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_overflow;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR2, &sa, NULL) == 0);
    CHECK(control(f, 1, 1, f == PERF ? 100 : 1000) == 0);
    cycles = insns = 0;
    for (round = 1; round <= 50; round++) {
        unsigned n = f == PERF ? 1730 : 137u * (unsigned)round % 997 + 1;
        work(f, 1000, n);
        cycles += 1000;
        insns += n;
    }
    CHECK(vperfctr_read_ctrs(vp, &sum) == 0);
    printf("i-mode: tsc %" PRIu64 " pmc0 %" PRIu64 " pmc1 %" PRIu64 " signals %d mask %#x\n",
           (uint64_t)sum.tsc, (uint64_t)sum.pmc[0], (uint64_t)sum.pmc[1], (int)signals, mask_or);
    CHECK(bad_code == 0 && bad_mask == 0 && resume_failed == 0 && mask_or == 2);
    if (f == PERF) {
        CHECK(signals == (int)(sum.pmc[1] / 100) && signals >= 50);
    } else {
        CHECK(sum.pmc[0] == cycles && sum.pmc[1] == insns && sum.tsc == cycles);
        CHECK(signals == (int)(insns / 1000));
    }

    /* The overflow comes at the exact event: 999 instructions after a fresh control give no
     * signal, the 1000th one. */
    if (f != PERF) {
        int before;
        CHECK(control(f, 1, 1, 1000) == 0);
        before = signals;
        work(f, 0, 999);
        CHECK(signals == before);
        work(f, 0, 1);
        CHECK(signals == before + 1);
        CHECK(vperfctr_read_pmc(vp, 1) == 1000);
        work(f, 5, 0);
        CHECK(vperfctr_read_ctrs(vp, &sum) == 0 && sum.pmc[0] == 5);
    }

    /* 3. preserve keeps the sums; a new control without it starts from 0. */
    {
        struct vperfctr_control c;
        CHECK(vperfctr_read_state(vp, NULL, &c) == 0);
        c.preserve = 1;
        CHECK(vperfctr_control(vp, &c) == 0);
        {
            /* preserve belongs to the control made, not to the state read back. */
            struct vperfctr_control r;
            CHECK(vperfctr_read_state(vp, NULL, &r) == 0 && r.preserve == 0 &&
                  r.cpu_control.nrictrs == 1);
        }
        /* On perf counter 0 counts context switches, which go on between the two calls. */
        CHECK(vperfctr_read_pmc(vp, 0) == sum.pmc[0] || (f == PERF && vperfctr_read_pmc(vp, 0) > sum.pmc[0]));
        c.preserve = 0;
        CHECK(vperfctr_control(vp, &c) == 0);
        CHECK(vperfctr_read_pmc(vp, 0) == 0 || f == PERF);
    }

    {
        /* Refused control data leaves the earlier counters counting. */
        struct perfctr_sum_ctrs b0, b1;
        CHECK(vperfctr_read_ctrs(vp, &b0) == 0);
        bad_controls(f, perfctr_info_nrctrs(&info));
        CHECK(vperfctr_is_running(vp) == 1);
        work(f, 10, 0);
        CHECK(vperfctr_read_ctrs(vp, &b1) == 0);
        CHECK(b1.pmc[0] == b0.pmc[0] + 10 || f == PERF);
    }
    CHECK(vperfctr_unlink(vp) == 0 && vperfctr_is_running(vp) == 0);
    CHECK(vperfctr_read_pmc(vp, 0) == 0);
    vperfctr_close(vp);
    printf("%d failures\n", failures);
    return failures != 0;
}
