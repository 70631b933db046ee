/* perfctr's global mode and CPU lists, written from perfctr's documented calls
 * (capi/tests/perfctr.rs): gperfctr_open, _control (one CPU), _start, _read, _stop, _close,
 * gperfctr_cpus_info, perfctr_cpus_info_print. The program pins itself to the first CPU it may
 * run on and counts that CPU:
 *   perf           software page faults (everything on the CPU: at least PAGES), as root or
 *                  with perf_event_paranoid <= 0
 *   sim:pentium3   instructions retired (EVNTSEL 0xC0), exact
 * With the argument "refused" it only expects gperfctr_start to fail with EACCES (run as an
 * unprivileged user at perf_event_paranoid > 0). It prints its counts and "N failures". */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <libperfctr.h>
#include <perfcompat.h>

#include "perfctr_check.h"

#define PAGES 2000
#define INSNS 98765u

static void work(int emulated)
{
    if (emulated) {
        perfcompat_sim_advance("PAPI_tot_ins", INSNS);
    } else {
        long page = sysconf(_SC_PAGESIZE);
        char *p = mmap(NULL, PAGES * (size_t)page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        size_t i;
        CHECK(p != MAP_FAILED);
        for (i = 0; p != MAP_FAILED && i < PAGES; i++)
            p[i * (size_t)page] = 1;
    }
}

int main(int argc, char **argv)
{
    struct gperfctr *g;
    struct gperfctr_cpu_control c;
    struct gperfctr_cpu_state st;
    struct perfctr_cpus_info *cpus;
    struct perfctr_info info;
    cpu_set_t set;
    int cpu = 0, emulated, refused = argc > 1 && strcmp(argv[1], "refused") == 0;

    CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
    while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &set))
        cpu++;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    CHECK(sched_setaffinity(0, sizeof set, &set) == 0);

    g = gperfctr_open();
    CHECK(g != NULL);
    if (!g) {
        printf("%d failures\n", failures);
        return 1;
    }
    CHECK(gperfctr_info(g, &info) == 0);
    emulated = info.cpu_type == PERFCTR_X86_INTEL_PIII;

    cpus = gperfctr_cpus_info(g);
    CHECK(cpus && cpus->cpus->nrwords > (unsigned int)cpu / 32 &&
          (cpus->cpus->mask[cpu / 32] >> (cpu % 32) & 1u));
    CHECK(cpus && cpus->cpus_forbidden->nrwords == cpus->cpus->nrwords &&
          cpus->cpus_forbidden->mask[0] == 0);
    perfctr_cpus_info_print(cpus);
    free(cpus);

    memset(&c, 0, sizeof c);
    c.cpu = (unsigned int)cpu;
    c.cpu_control.tsc_on = 1;
    c.cpu_control.nractrs = 1;
    c.cpu_control.pmc_map[0] = 0;
    c.cpu_control.evntsel[0] =
        emulated ? 0xC0u | 0x30000u | 0x400000u : PERFCTR_EVNTSEL_SOFTWARE(2) | 0x30000u;
    CHECK(gperfctr_control(g, &c) == 1);

    if (refused) {
        errno = 0;
        CHECK(gperfctr_start(g, 0) == -1 && errno == EACCES);
        st.cpu = (unsigned int)cpu;
        CHECK(gperfctr_read(g, &st) == 0 && st.sum.pmc[0] == 0 && st.sum.tsc == 0);
        gperfctr_close(g);
        printf("%d failures\n", failures);
        return failures != 0;
    }

    /* Errors before the start: no such CPU, i-mode counters, a short interval. */
    c.cpu = 100000;
    errno = 0;
    CHECK(gperfctr_control(g, &c) == -1 && errno == EINVAL);
    c.cpu = (unsigned int)cpu;
    c.cpu_control.nrictrs = 1;
    errno = 0;
    CHECK(gperfctr_control(g, &c) == -1 && errno == EPERM);
    c.cpu_control.nrictrs = 0;
    errno = 0;
    CHECK(gperfctr_start(g, 5000) == -1 && errno == EINVAL);

    CHECK(gperfctr_start(g, 0) == 1);
    work(emulated);
    st.cpu = (unsigned int)cpu;
    CHECK(gperfctr_read(g, &st) == 0);
    printf("global: pmc0 %s tsc %s\n",
           emulated ? (st.sum.pmc[0] == INSNS ? "exact" : "wrong")
                    : (st.sum.pmc[0] >= PAGES ? ">= PAGES" : "< PAGES"),
           st.sum.tsc > 0 ? "> 0" : "0");
    CHECK(emulated ? st.sum.pmc[0] == INSNS : st.sum.pmc[0] >= PAGES);
    CHECK(st.sum.tsc > 0 && st.cpu_control.nractrs == 1 &&
          st.cpu_control.evntsel[0] == c.cpu_control.evntsel[0]);
    errno = 0;
    CHECK(gperfctr_control(g, &c) == -1 && errno == EBUSY); /* stop first */

    CHECK(gperfctr_stop(g) == 0);
    {
        struct gperfctr_cpu_state later;
        work(emulated); /* stopped: not counted */
        later.cpu = (unsigned int)cpu;
        CHECK(gperfctr_read(g, &later) == 0 && later.sum.pmc[0] >= st.sum.pmc[0]);
        CHECK(!emulated || later.sum.pmc[0] == st.sum.pmc[0]);
        CHECK(gperfctr_start(g, 0) == 0); /* the stop forgot the control data */
    }
    gperfctr_close(g);
    printf("%d failures\n", failures);
    return failures != 0;
}
