/* The counting rows measured in one process: our library, raw perf_event_open and PAPI 7 take
 * turns on the same thread, in blocks of about a millisecond, in cycles of eight blocks (ours,
 * raw, clock, PAPI, PAPI, clock, raw, ours: a cost that drifts steadily within a cycle weighs
 * the same on each). Separate processes differ by several percent from run to run here (where their pages
 * land, what else runs); blocks next to each other in one process see the same machine.
 *   sampleK   K events (1, 3, 4): cpc_set_sample of a bound set; read() of an open group (one
 *             event: no group format, as benches/c/raw.c); PAPI_read of a started event set;
 *             "clock": the same read() and a clock_gettime(CLOCK_MONOTONIC), the least a
 *             sample needs for cpc_buf_hrtime (the time of the sample).
 *   interval  2 events: start_counters + read_counters; two read()s of an open group;
 *             PAPI_start + PAPI_stop; "clock": the two read()s (libperfex reports no time).
 * usage: rows CYCLES [nopapi]; prints, per cycle and row, "<row>_ours NS", "<row>_raw NS",
 * "<row>_clock NS" and "<row>_papi NS" (ns per call, the mean of the cycle's two blocks of each). The driver maps
 * libperfex's events 0 and 16 to the first two events (PERFCOMPAT_EVENTS). "nopapi" (where PAPI
 * cannot count, see the probe in benches/c/papi.c): PAPI is not initialised, its blocks are
 * skipped and no "<row>_papi" line is printed; the other blocks keep their order. */
#include "common.h"
#include "rawperf.h"
#include <errno.h>
#include <sys/ioctl.h>
#include <libcpc.h>
#include <libperfex.h>
#include <papi.h>

static cpc_t *cpc;
static int use_papi = 1;
static uint64_t buf[3 + 2 * 4];
static long long pv[4];

static void fail(const char *what) {
    fprintf(stderr, "rows: %s failed (%s)\n", what, strerror(errno));
    exit(2);
}

/* k events as benches/c/raw.c reads them; returns the leader, enabled. */
static int raw_open(int k, int *fds) {
    const uint64_t times = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    for (int i = 0; i < k; i++)
        fds[i] = bench_open_raw(i, i ? fds[0] : -1,
                          k == 1 ? times : times | PERF_FORMAT_GROUP | PERF_FORMAT_ID, 0);
    if (ioctl(fds[0], PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP) < 0) fail("enable");
    return fds[0];
}

static void raw_read(int fd) {
    if (read(fd, buf, sizeof buf) <= 0) fail("read");
}

static int papi_set(int k) {
    int es = PAPI_NULL;
    if (!use_papi) return es;
    if (PAPI_create_eventset(&es) != PAPI_OK) fail("PAPI_create_eventset");
    for (int i = 0; i < k; i++)
        if (PAPI_add_named_event(es, (char *)BENCH_EVENT(BENCH_PAPI, i)) != PAPI_OK)
            fail("PAPI_add_named_event");
    return es;
}

static void papi_drop(int es) {
    if (!use_papi) return;
    PAPI_cleanup_eventset(es);
    PAPI_destroy_eventset(&es);
}

enum who { OURS, RAW, CLOCK, PAPI };
static const enum who ORDER[8] = {OURS, RAW, CLOCK, PAPI, PAPI, CLOCK, RAW, OURS};
static volatile int64_t clock_sink;

/* One block of `n` calls of `who` for row `k` (1, 3, 4: samples; 2: the interval); ns per call. */
static double block(int k, enum who who, long n, cpc_set_t *set, cpc_buf_t *cbuf, int fd, int es) {
    long long c0, c1;
    int64_t t0 = bench_now();
    if (k == 2) {
        for (long i = 0; i < n; i++) {
            if (who == OURS) {
                int g = start_counters(0, 16);
                if (read_counters(0, &c0, 16, &c1) != g) fail("read_counters");
            } else if (who == RAW || who == CLOCK) {
                raw_read(fd);
                raw_read(fd);
            } else {
                PAPI_start(es);
                PAPI_stop(es, pv);
            }
        }
    } else {
        for (long i = 0; i < n; i++) {
            if (who == OURS) cpc_set_sample(cpc, set, cbuf);
            else if (who == RAW) raw_read(fd);
            else if (who == CLOCK) {
                raw_read(fd);
                clock_sink = bench_now();
            } else PAPI_read(es, pv);
        }
    }
    return (double)(bench_now() - t0) / n;
}

int main(int argc, char **argv) {
    int cycles = argc > 1 ? atoi(argv[1]) : 40;
    use_papi = !(argc > 2 && strcmp(argv[2], "nopapi") == 0);
    if (use_papi && PAPI_library_init(PAPI_VER_CURRENT) != PAPI_VER_CURRENT)
        fail("PAPI_library_init");
    if (!(cpc = cpc_open(CPC_VER_CURRENT))) fail("cpc_open");
    static const int rows[4] = {1, 3, 4, 2};
    for (int r = 0; r < 4; r++) {
        int k = rows[r], fds[4];
        char name[16];
        if (k == 2) snprintf(name, sizeof name, "interval");
        else snprintf(name, sizeof name, "sample%d", k);
        /* About a millisecond a block. */
        long n = k == 2 ? 500 : 1500;
        cpc_set_t *set = NULL;
        cpc_buf_t *cbuf = NULL;
        int fd = raw_open(k, fds);
        int es = papi_set(k);
        if (k != 2) {
            if (!(set = cpc_set_create(cpc))) fail("cpc_set_create");
            for (int i = 0; i < k; i++)
                if (cpc_set_add_request(cpc, set, BENCH_EVENT(BENCH_PERF, i), 0, CPC_COUNT_USER,
                                        0, NULL) < 0)
                    fail("cpc_set_add_request");
            if (!(cbuf = cpc_buf_create(cpc, set))) fail("cpc_buf_create");
            if (cpc_bind_curlwp(cpc, set, 0) < 0) fail("cpc_bind_curlwp");
            if (use_papi && PAPI_start(es) != PAPI_OK) fail("PAPI_start");
        }
        /* A cycle untimed first: every path's code and data in place. */
        for (int c = -1; c < cycles; c++) {
            double sum[4] = {0, 0, 0, 0};
            for (int b = 0; b < 8; b++)
                if (use_papi || ORDER[b] != PAPI)
                    sum[ORDER[b]] += block(k, ORDER[b], n, set, cbuf, fd, es);
            if (c < 0) continue;
            printf("%s_ours %.1f\n%s_raw %.1f\n%s_clock %.1f\n", name, sum[OURS] / 2, name,
                   sum[RAW] / 2, name, sum[CLOCK] / 2);
            if (use_papi) printf("%s_papi %.1f\n", name, sum[PAPI] / 2);
        }
        if (k != 2) {
            if (use_papi) PAPI_stop(es, pv);
            cpc_unbind(cpc, set);
            cpc_buf_destroy(cpc, cbuf);
            cpc_set_destroy(cpc, set);
        }
        papi_drop(es);
        for (int i = k - 1; i >= 0; i--) close(fds[i]);
    }
    fflush(stdout);
    return 0;
}
