/* Our libcpc doing the same operations.
 * usage: cpc ITERATIONS [operation...]; "first_use" must be alone (a fresh process). */
#include "common.h"
#include <errno.h>
#include <signal.h>
#include <libcpc.h>

static cpc_t *cpc;
static cpc_set_t *ovf_set;
static cpc_buf_t *ovf_buf;
static volatile long overflows;

static void die(const char *what) {
    fprintf(stderr, "cpc: %s failed: %s\n", what, strerror(errno));
    exit(2);
}

static cpc_set_t *make_set(int n, uint64_t preset, uint_t flags) {
    cpc_set_t *set = cpc_set_create(cpc);
    if (!set) die("cpc_set_create");
    for (int i = 0; i < n; i++) {
        const char *ev = i == 0 && (flags & CPC_OVF_NOTIFY_EMT) ? "page-faults"
                                                                  : BENCH_EVENT(BENCH_PERF, i);
        if (cpc_set_add_request(cpc, set, ev, preset, CPC_COUNT_USER | flags, 0, NULL) < 0)
            die("cpc_set_add_request");
    }
    return set;
}

static void on_emt(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)uc;
    if (si->si_code != EMT_CPCOVF) return;
    overflows++;
    cpc_set_restart(cpc, ovf_set);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    if (argc > 2 && strcmp(argv[2], "first_use") == 0) {
        int64_t t0 = bench_now();
        if (!(cpc = cpc_open(CPC_VER_CURRENT))) die("cpc_open");
        cpc_set_t *set = make_set(1, 0, 0);
        if (cpc_bind_curlwp(cpc, set, 0) < 0) die("cpc_bind_curlwp");
        bench_report("first_use", (double)(bench_now() - t0));
        return 0;
    }
    if (!(cpc = cpc_open(CPC_VER_CURRENT))) die("cpc_open");
    for (int k = 1; k <= 4; k++) {
        static const char *ops[5] = {"", "sample1", "sample2", "sample3", "sample4"};
        if (k == 2 || !bench_wanted(argc, argv, ops[k])) continue;
        cpc_set_t *set = make_set(k, 0, 0);
        cpc_buf_t *buf = cpc_buf_create(cpc, set);
        if (!buf) die("cpc_buf_create");
        if (cpc_bind_curlwp(cpc, set, 0) < 0) die("cpc_bind_curlwp");
        if (cpc_set_sample(cpc, set, buf) < 0) die("cpc_set_sample");
        int64_t t0 = bench_now();
        for (long i = 0; i < n; i++) cpc_set_sample(cpc, set, buf);
        bench_report(ops[k], (double)(bench_now() - t0) / n);
        cpc_unbind(cpc, set);
        cpc_buf_destroy(cpc, buf);
        cpc_set_destroy(cpc, set);
    }
    if (bench_wanted(argc, argv, "overflow")) {
        /* Preset so that the request overflows after BENCH_OVF_PERIOD faults; the SIGEMT
         * handler restarts the set from the preset each time. */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_emt;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigaction(SIGEMT, &sa, NULL);
        ovf_set = make_set(1, UINT64_MAX - (BENCH_OVF_PERIOD - 1), CPC_OVF_NOTIFY_EMT);
        ovf_buf = cpc_buf_create(cpc, ovf_set);
        if (cpc_bind_curlwp(cpc, ovf_set, 0) < 0) die("cpc_bind_curlwp (overflow)");
        int64_t t0 = bench_now();
        bench_fault_pages(BENCH_OVF_PAGES);
        int64_t dt = bench_now() - t0;
        cpc_unbind(cpc, ovf_set);
        if (overflows < BENCH_OVF_PAGES / BENCH_OVF_PERIOD) {
            fprintf(stderr, "cpc overflow: %ld signals, expected %d\n", overflows,
                    BENCH_OVF_PAGES / BENCH_OVF_PERIOD);
            return 2;
        }
        bench_report("overflow", (double)dt / overflows);
    }
    cpc_close(cpc);
    return 0;
}
