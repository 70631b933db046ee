/* perfcompat/solaris.h's processor_bind with libcpc version 1's shared interface
 * (cpc_shared_open(3CPC): "a thread ... that has in turn bound itself to a processor using
 * processor_bind"), run by capi/tests/solaris_h.rs on perf (root or perf_event_paranoid <= 0)
 * with page faults. Built with -include perfcompat/solaris.h. Prints "N failures". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <libcpc.h>

static int fails;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); fails++; } } while (0)

int main(void) {
    cpc_event_t event, before, after;
    int cpu = sched_getcpu(), old = 0, now = 0, fd;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), i;
    char *pages = mmap(NULL, 200 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(pages != MAP_FAILED);
    CHECK(processor_bind(P_LWPID, P_MYID, PBIND_QUERY, &old) == 0);
    CHECK(processor_bind(P_LWPID, P_MYID, cpu, NULL) == 0);
    CHECK(processor_bind(P_LWPID, P_MYID, PBIND_QUERY, &now) == 0 && now == cpu);
    CHECK(sched_getcpu() == cpu);
    CHECK(cpc_strtoevent(cpc_getcpuver(), "pic0=page-faults,pic1=task-clock", &event) == 0);
    fd = cpc_shared_open();
    CHECK(fd >= 0);
    CHECK(cpc_shared_bind_event(fd, &event, 0) == 0);
    CHECK(cpc_shared_take_sample(fd, &before) == 0);
    for (i = 0; i < 200; i++) pages[i * page] = 1;
    CHECK(cpc_shared_take_sample(fd, &after) == 0);
    CHECK(after.ce_pic[0] - before.ce_pic[0] >= 200);
    /* Unbound from the processor: the counters are not available (EAGAIN). */
    CHECK(processor_bind(P_LWPID, P_MYID, PBIND_NONE, &now) == 0 && now == cpu);
    errno = 0;
    CHECK(cpc_shared_take_sample(fd, &after) == -1 && errno == EAGAIN);
    cpc_shared_close(fd);
    errno = 0;
    CHECK(processor_bind(P_LWPID, P_MYID, -5, NULL) == -1 && errno == EINVAL);
    printf("%d failures\n", fails);
    return fails != 0;
}
