/* Shared by the benchmark programs: a monotonic clock, a timed loop and the output format
 * ("<operation> <ns per call>" lines, read by benches/driver.rs). */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static inline int64_t bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void bench_report(const char *op, double ns) {
    printf("%s %.1f\n", op, ns);
    fflush(stdout);
}

/* Touch `pages` fresh pages: one page fault each (the overflow benchmarks' work). */
static inline void bench_fault_pages(long pages) {
    size_t len = (size_t)pages * 4096;
    volatile char *p = (volatile char *)mmap(NULL, len, PROT_READ | PROT_WRITE,
                                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(3); }
    madvise((void *)p, len, MADV_NOHUGEPAGE);
    for (long i = 0; i < pages; i++) p[i * 4096] = 1;
    munmap((void *)p, len);
}

/* Whether `op` is selected by the command line (no operations named: all). */
static inline int bench_wanted(int argc, char **argv, const char *op) {
    if (argc < 3) return 1;
    for (int i = 2; i < argc; i++) if (strcmp(argv[i], op) == 0) return 1;
    return 0;
}

#define BENCH_FAIL(what) do { perror(what); exit(2); } while (0)


/* The events every program counts, in the same order: software events everywhere, hardware
 * events where the driver found a PMU (BENCH_HW=1). */
static inline int bench_hw(void) {
    const char *s = getenv("BENCH_HW");
    return s && strcmp(s, "1") == 0;
}
static const char *const BENCH_PERF_SW[4] = {"task-clock", "page-faults", "context-switches", "cpu-migrations"};
static const char *const BENCH_PERF_HW[4] = {"cycles", "instructions", "branch-misses", "cache-misses"};
static const char *const BENCH_PAPI_SW[4] = {"perf::TASK-CLOCK", "perf::PAGE-FAULTS", "perf::CONTEXT-SWITCHES", "perf::CPU-MIGRATIONS"};
static const char *const BENCH_PAPI_HW[4] = {"perf::CYCLES", "perf::INSTRUCTIONS", "perf::BRANCH-MISSES", "perf::CACHE-MISSES"};
#define BENCH_EVENT(table, i) (bench_hw() ? table##_HW[i] : table##_SW[i])

/* Overflow benchmarks: page faults, one overflow every BENCH_OVF_PERIOD faults. */
#define BENCH_OVF_PERIOD 10
#define BENCH_OVF_PAGES 20000

#endif
