/*
 * cpc_example1.c: Example 1 of cpc_bind_curlwp(3CPC), "use hardware performance counters to
 * measure events in a process", as a complete program.
 *
 * Two requests, counting EVENT0 and EVENT1 in user mode, are bound to the calling thread. Each
 * of 20 iterations samples the set before and after a piece of work and prints the difference
 * of the two samples (cpc_buf_sub). The events come from the environment variables EVENT0 and
 * EVENT1; the defaults, page-faults and task-clock, are Linux software events that every host
 * can count, with or without a hardware PMU (the Solaris original defaulted to the UltraSPARC
 * EC_ref and EC_hit). `cpc_events` lists the events of the backend in use.
 *
 * The work of each iteration writes to PAGES_PER_ITERATION fresh pages (one page fault each)
 * and does a little arithmetic. On an emulated PMU (PERFCOMPAT_BACKEND=sim:<model>) nothing is
 * counted unless the program says so: with PERFCOMPAT_EXAMPLE_INJECT=<n> the work of iteration
 * i also reports n * i occurrences of EVENT0 and n * (21 - i) of EVENT1 through perfcompat's
 * test hook, perfcompat_sim_advance(), and the differences printed are exactly those numbers.
 *
 * Output: a line starting with '#' that says what is counted, then one line per iteration,
 * "<iteration>: <EVENT0 difference> <EVENT1 difference>". Errors go to stderr as
 * "cpc_example1: <what failed>: <strerror(errno)>" and the exit status is then 1.
 */
#define _DEFAULT_SOURCE 1 /* MAP_ANONYMOUS, MADV_NOHUGEPAGE, syscall() */

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <libcpc.h>
#include <perfcompat.h>

#define ITERATIONS 20
#define PAGES_PER_ITERATION 64

/* Print the message and exit, like the error() routine the man page assumes. */
static void error(const char *fmt, ...) {
    va_list ap;

    (void) fputs("cpc_example1: ", stderr);
    va_start(ap, fmt);
    (void) vfprintf(stderr, fmt, ap);
    va_end(ap);
    (void) fputc('\n', stderr);
    exit(1);
}

/* The calling thread's id, Linux's counterpart of _lwp_self(). */
static int lwp_self(void) {
    return ((int) syscall(SYS_gettid));
}

/* The memory the work writes to: ITERATIONS * PAGES_PER_ITERATION pages never touched before. */
static volatile char *pages;
static long pagesize;
/* Occurrences to inject per iteration step on an emulated PMU, 0 for none. */
static uint64_t inject;
static volatile double sink;

static void computation(int iter, const char *event0, const char *event1) {
    double x = 1.0;
    int i;

    for (i = 0; i < PAGES_PER_ITERATION; i++) {
        pages[((long) (iter - 1) * PAGES_PER_ITERATION + i) * pagesize] = (char) iter;
        x = x * 1.0001 + (double) i;
    }
    sink = x;
    if (inject != 0) {
        if (perfcompat_sim_advance(event0, inject * (uint64_t) iter) == -1)
            error("cannot inject %s: %s", event0, strerror(errno));
        if (perfcompat_sim_advance(event1,
            inject * (uint64_t) (ITERATIONS + 1 - iter)) == -1)
            error("cannot inject %s: %s", event1, strerror(errno));
    }
}

int main(void) {
    int iter;
    const char *event0 = NULL, *event1 = NULL, *s;
    cpc_t *cpc;
    cpc_set_t *set;
    cpc_buf_t *diff, *after, *before;
    int ind0, ind1;
    uint64_t val0, val1;
    void *map;

    if ((s = getenv("PERFCOMPAT_EXAMPLE_INJECT")) != NULL) {
        char *end;

        errno = 0;
        inject = strtoull(s, &end, 0);
        if (errno != 0 || end == s || *end != '\0' || inject == 0)
            error("PERFCOMPAT_EXAMPLE_INJECT=%s: not a positive number", s);
    }
    pagesize = sysconf(_SC_PAGESIZE);
    map = mmap(NULL, (size_t) ITERATIONS * PAGES_PER_ITERATION * (size_t) pagesize,
        PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        error("mmap: %s", strerror(errno));
    /* One fault per page: no transparent huge page may map several at once. */
    (void) madvise(map, (size_t) ITERATIONS * PAGES_PER_ITERATION * (size_t) pagesize,
        MADV_NOHUGEPAGE);
    pages = (volatile char *) map;

    if ((cpc = cpc_open(CPC_VER_CURRENT)) == NULL)
        error("perf counters unavailable: %s", strerror(errno));

    if ((event0 = getenv("EVENT0")) == NULL)
        event0 = "page-faults";
    if ((event1 = getenv("EVENT1")) == NULL)
        event1 = "task-clock";

    if ((set = cpc_set_create(cpc)) == NULL)
        error("could not create set: %s", strerror(errno));

    if ((ind0 = cpc_set_add_request(cpc, set, event0, 0, CPC_COUNT_USER, 0, NULL)) == -1)
        error("could not add first request: %s", strerror(errno));
    if ((ind1 = cpc_set_add_request(cpc, set, event1, 0, CPC_COUNT_USER, 0, NULL)) == -1)
        error("could not add second request: %s", strerror(errno));

    if ((diff = cpc_buf_create(cpc, set)) == NULL)
        error("could not create buffer: %s", strerror(errno));
    if ((after = cpc_buf_create(cpc, set)) == NULL)
        error("could not create buffer: %s", strerror(errno));
    if ((before = cpc_buf_create(cpc, set)) == NULL)
        error("could not create buffer: %s", strerror(errno));

    (void) printf("# %s: %s %s; work: %d fresh pages per iteration", cpc_cciname(cpc),
        event0, event1, PAGES_PER_ITERATION);
    if (inject != 0)
        (void) printf(", injecting %" PRIu64 "*i and %" PRIu64 "*(%d-i)", inject, inject,
            ITERATIONS + 1);
    (void) printf("\n");
    (void) fflush(stdout);

    if (cpc_bind_curlwp(cpc, set, 0) == -1)
        error("cannot bind lwp%d: %s", lwp_self(), strerror(errno));

    for (iter = 1; iter <= ITERATIONS; iter++) {
        if (cpc_set_sample(cpc, set, before) == -1)
            break;

        computation(iter, event0, event1);

        if (cpc_set_sample(cpc, set, after) == -1)
            break;

        cpc_buf_sub(cpc, diff, after, before);
        (void) cpc_buf_get(cpc, diff, ind0, &val0);
        (void) cpc_buf_get(cpc, diff, ind1, &val1);

        (void) printf("%3d: %" PRId64 " %" PRId64 "\n", iter, (int64_t) val0,
            (int64_t) val1);
    }

    if (iter != ITERATIONS + 1)
        error("cannot sample set: %s", strerror(errno));

    if (cpc_unbind(cpc, set) == -1)
        error("cannot unbind: %s", strerror(errno));
    if (cpc_buf_destroy(cpc, diff) == -1 || cpc_buf_destroy(cpc, after) == -1 ||
        cpc_buf_destroy(cpc, before) == -1)
        error("cannot destroy buffer: %s", strerror(errno));
    if (cpc_set_destroy(cpc, set) == -1)
        error("cannot destroy set: %s", strerror(errno));
    (void) cpc_close(cpc);
    (void) munmap(map, (size_t) ITERATIONS * PAGES_PER_ITERATION * (size_t) pagesize);

    return (0);
}
