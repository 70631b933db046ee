/* The overflow row measured in one process: our libcpc and PAPI 7 take turns, in blocks of
 * BENCH_OVF_PAGES / 50 page faults, on the same workload (one overflow every BENCH_OVF_PERIOD
 * faults, the handler restarts: SIGEMT + cpc_set_restart for ours, PAPI_overflow's handler for
 * PAPI). Separate processes differ by a few percent from run to run here, and a page fault's
 * cost drifts within a run; short blocks in one process, alternated ours, PAPI, PAPI, ours,
 * see the same machine state, so each of ours compares closely with the PAPI block next to it.
 * usage: pair PAIRS [nopapi]; prints "overflow_ours NS" and "overflow_papi NS" per block, in
 * pairs. "nopapi" (where PAPI cannot count, see the probe in benches/c/papi.c): PAPI is not
 * initialised and its blocks are skipped; ours alone prints "overflow_ours NS", PAIRS times. */
#include "common.h"
#include <errno.h>
#include <signal.h>
#include <libcpc.h>
#include <papi.h>

#define BLOCK_PAGES (BENCH_OVF_PAGES / 50)

static cpc_t *cpc;
static cpc_set_t *set;
static volatile long overflows;

static void on_emt(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)uc;
    if (si->si_code != EMT_CPCOVF) return;
    overflows++;
    cpc_set_restart(cpc, set);
}

static void on_papi(int es, void *addr, long long ovf, void *ctx) {
    (void)es; (void)addr; (void)ovf; (void)ctx;
    overflows++;
}

static void fail(const char *what) {
    fprintf(stderr, "pair: %s failed (%s)\n", what, strerror(errno));
    exit(2);
}

int main(int argc, char **argv) {
    int blocks = argc > 1 ? atoi(argv[1]) : 20;
    int use_papi = !(argc > 2 && strcmp(argv[2], "nopapi") == 0);
    long long v[1];
    int es = PAPI_NULL, code;
    if (use_papi && (PAPI_library_init(PAPI_VER_CURRENT) != PAPI_VER_CURRENT))
        fail("PAPI_library_init");
    if (use_papi && (PAPI_create_eventset(&es) != PAPI_OK ||
                     PAPI_add_named_event(es, "perf::PAGE-FAULTS") != PAPI_OK ||
                     PAPI_event_name_to_code("perf::PAGE-FAULTS", &code) != PAPI_OK ||
                     PAPI_overflow(es, code, BENCH_OVF_PERIOD, 0, on_papi) != PAPI_OK))
        fail("PAPI_overflow");
    if (!(cpc = cpc_open(CPC_VER_CURRENT))) fail("cpc_open");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_emt;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGEMT, &sa, NULL);
    if (!(set = cpc_set_create(cpc)) ||
        cpc_set_add_request(cpc, set, "page-faults", UINT64_MAX - (BENCH_OVF_PERIOD - 1),
                            CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL) != 0)
        fail("cpc_set_add_request");
    for (int b = 0; b < 2 * blocks; b++) {
        int ours = (b & 1) == (b / 2 & 1); /* ours, PAPI, PAPI, ours, ... */
        if (!ours && !use_papi) continue;
        overflows = 0;
        if (ours ? cpc_bind_curlwp(cpc, set, 0) != 0 : PAPI_start(es) != PAPI_OK)
            fail(ours ? "cpc_bind_curlwp" : "PAPI_start");
        int64_t t0 = bench_now();
        bench_fault_pages(BLOCK_PAGES);
        int64_t dt = bench_now() - t0;
        if (ours ? cpc_unbind(cpc, set) != 0 : PAPI_stop(es, v) != PAPI_OK)
            fail(ours ? "cpc_unbind" : "PAPI_stop");
        if (overflows < BLOCK_PAGES / BENCH_OVF_PERIOD * 9 / 10) {
            fprintf(stderr, "pair: %s: %ld overflows, expected %d\n", ours ? "ours" : "PAPI",
                    overflows, BLOCK_PAGES / BENCH_OVF_PERIOD);
            return 2;
        }
        bench_report(ours ? "overflow_ours" : "overflow_papi", (double)dt / overflows);
    }
    cpc_close(cpc);
    return 0;
}
