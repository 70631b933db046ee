/* Shared by the programs that call perf_event_open themselves (raw.c, rows.c): event `i` of the
 * benchmark's list, counting the calling thread in user mode. */
#ifndef BENCH_RAWPERF_H
#define BENCH_RAWPERF_H
#include "common.h"
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Event `i` of task `pid` (0: the caller) with `read_format`, in `group` (a leader, disabled
 * until enabled, when `group` < 0), inherited by new threads and processes when `inherit`,
 * enabled by the task's next exec when `on_exec`. */
static inline int bench_open_task(pid_t pid, int i, int group, uint64_t read_format, int inherit,
                                  int on_exec) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    if (bench_hw()) {
        static const uint64_t hw[4] = {PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS,
                                       PERF_COUNT_HW_BRANCH_MISSES, PERF_COUNT_HW_CACHE_MISSES};
        a.type = PERF_TYPE_HARDWARE;
        a.config = hw[i];
    } else {
        static const uint64_t sw[4] = {PERF_COUNT_SW_TASK_CLOCK, PERF_COUNT_SW_PAGE_FAULTS,
                                       PERF_COUNT_SW_CONTEXT_SWITCHES, PERF_COUNT_SW_CPU_MIGRATIONS};
        a.type = PERF_TYPE_SOFTWARE;
        a.config = sw[i];
    }
    a.read_format = read_format;
    a.inherit = (unsigned)inherit;
    a.disabled = group < 0;
    a.enable_on_exec = (unsigned)on_exec;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    int fd = (int)syscall(SYS_perf_event_open, &a, pid, -1, group, 0);
    if (fd < 0) BENCH_FAIL("perf_event_open");
    return fd;
}

/* Event `i` of the calling thread (see bench_open_task). */
static inline int bench_open_raw(int i, int group, uint64_t read_format, int inherit) {
    return bench_open_task(0, i, group, read_format, inherit, 0);
}

#endif
