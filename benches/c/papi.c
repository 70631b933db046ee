/* PAPI 7 doing the same operations (Debian's libpapi-dev).
 * usage: papi ITERATIONS [operation...]; "first_use" and "probe" must be alone (a fresh
 * process). "probe" reports nothing and times nothing: it exits 0 when PAPI can count the
 * benchmark's events here (the four of BENCH_EVENT in one started event set, and
 * perf::PAGE-FAULTS with PAPI_overflow), else PROBE_CANNOT_COUNT with the cause on stderr
 * (libpfm4 not knowing the CPU disables PAPI's perf_event component, perf:: software events
 * included). */
#include "common.h"
#include <papi.h>

/* The probe's exit status when PAPI cannot count here (benches/driver.rs reads it). */
#define PROBE_CANNOT_COUNT 3

static void check(int rc, const char *what) {
    if (rc != PAPI_OK) {
        fprintf(stderr, "papi: %s: %s\n", what, PAPI_strerror(rc));
        exit(2);
    }
}

static int eventset(int n) {
    int es = PAPI_NULL;
    check(PAPI_create_eventset(&es), "PAPI_create_eventset");
    for (int i = 0; i < n; i++)
        check(PAPI_add_named_event(es, (char *)BENCH_EVENT(BENCH_PAPI, i)), "PAPI_add_named_event");
    return es;
}

static void drop(int es) {
    long long v[4];
    PAPI_stop(es, v);
    PAPI_cleanup_eventset(es);
    PAPI_destroy_eventset(&es);
}

static volatile long overflows;
static void on_overflow(int es, void *addr, long long ovf, void *ctx) {
    (void)es; (void)addr; (void)ovf; (void)ctx;
    overflows++;
}

/* The probe's failure: what failed, PAPI's error and, when PAPI's perf_event component is
 * disabled, its reason; exits PROBE_CANNOT_COUNT. */
static void cannot_count(const char *what, const char *event, int rc) {
    fprintf(stderr, "%s%s%s: %s", what, event ? " " : "", event ? event : "", PAPI_strerror(rc));
    for (int c = 0; c < PAPI_num_components(); c++) {
        const PAPI_component_info_t *ci = PAPI_get_component_info(c);
        if (ci && strcmp(ci->name, "perf_event") == 0 && ci->disabled)
            fprintf(stderr, "; its perf_event component is disabled: %s", ci->disabled_reason);
    }
    fprintf(stderr, "\n");
    exit(PROBE_CANNOT_COUNT);
}

/* Whether PAPI counts what the benchmark asks of it (see the top of the file). */
static int probe(void) {
    int rc = PAPI_library_init(PAPI_VER_CURRENT);
    if (rc != PAPI_VER_CURRENT) cannot_count("PAPI_library_init", NULL, rc);
    long long v[4];
    int es = PAPI_NULL, code;
    if ((rc = PAPI_create_eventset(&es)) != PAPI_OK) cannot_count("PAPI_create_eventset", NULL, rc);
    for (int i = 0; i < 4; i++)
        if ((rc = PAPI_add_named_event(es, BENCH_EVENT(BENCH_PAPI, i))) != PAPI_OK)
            cannot_count("PAPI_add_named_event", BENCH_EVENT(BENCH_PAPI, i), rc);
    if ((rc = PAPI_start(es)) != PAPI_OK) cannot_count("PAPI_start", NULL, rc);
    if ((rc = PAPI_stop(es, v)) != PAPI_OK) cannot_count("PAPI_stop", NULL, rc);
    PAPI_cleanup_eventset(es);
    PAPI_destroy_eventset(&es);
    const char *pf = "perf::PAGE-FAULTS";
    if ((rc = PAPI_create_eventset(&es)) != PAPI_OK) cannot_count("PAPI_create_eventset", NULL, rc);
    if ((rc = PAPI_add_named_event(es, pf)) != PAPI_OK)
        cannot_count("PAPI_add_named_event", pf, rc);
    if ((rc = PAPI_event_name_to_code(pf, &code)) != PAPI_OK)
        cannot_count("PAPI_event_name_to_code", pf, rc);
    if ((rc = PAPI_overflow(es, code, BENCH_OVF_PERIOD, 0, on_overflow)) != PAPI_OK)
        cannot_count("PAPI_overflow", pf, rc);
    if ((rc = PAPI_start(es)) != PAPI_OK) cannot_count("PAPI_start", pf, rc);
    if ((rc = PAPI_stop(es, v)) != PAPI_OK) cannot_count("PAPI_stop", pf, rc);
    return 0;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    long long v[4];
    if (argc > 2 && strcmp(argv[2], "probe") == 0) return probe();
    if (argc > 2 && strcmp(argv[2], "first_use") == 0) {
        int64_t t0 = bench_now();
        if (PAPI_library_init(PAPI_VER_CURRENT) != PAPI_VER_CURRENT) return 2;
        int es = eventset(1);
        check(PAPI_start(es), "PAPI_start");
        bench_report("first_use", (double)(bench_now() - t0));
        return 0;
    }
    if (PAPI_library_init(PAPI_VER_CURRENT) != PAPI_VER_CURRENT) {
        fprintf(stderr, "papi: PAPI_library_init failed\n");
        return 2;
    }
    for (int k = 1; k <= 4; k++) {
        static const char *ops[5] = {"", "sample1", "sample2", "sample3", "sample4"};
        if (k == 2 || !bench_wanted(argc, argv, ops[k])) continue;
        int es = eventset(k);
        check(PAPI_start(es), "PAPI_start");
        check(PAPI_read(es, v), "PAPI_read");
        int64_t t0 = bench_now();
        for (long i = 0; i < n; i++) PAPI_read(es, v);
        bench_report(ops[k], (double)(bench_now() - t0) / n);
        drop(es);
    }
    if (bench_wanted(argc, argv, "interval")) {
        int es = eventset(2);
        int64_t t0 = bench_now();
        for (long i = 0; i < n; i++) {
            PAPI_start(es);
            PAPI_stop(es, v);
        }
        bench_report("interval", (double)(bench_now() - t0) / n);
        PAPI_cleanup_eventset(es);
        PAPI_destroy_eventset(&es);
    }
    if (bench_wanted(argc, argv, "overflow")) {
        int es = PAPI_NULL;
        check(PAPI_create_eventset(&es), "PAPI_create_eventset");
        check(PAPI_add_named_event(es, "perf::PAGE-FAULTS"), "PAPI_add_named_event");
        int code;
        check(PAPI_event_name_to_code("perf::PAGE-FAULTS", &code), "PAPI_event_name_to_code");
        check(PAPI_overflow(es, code, BENCH_OVF_PERIOD, 0, on_overflow), "PAPI_overflow");
        check(PAPI_start(es), "PAPI_start");
        int64_t t0 = bench_now();
        bench_fault_pages(BENCH_OVF_PAGES);
        int64_t dt = bench_now() - t0;
        PAPI_stop(es, v);
        if (overflows < BENCH_OVF_PAGES / BENCH_OVF_PERIOD * 9 / 10) {
            fprintf(stderr, "papi overflow: %ld handler calls, expected about %d\n", overflows,
                    BENCH_OVF_PAGES / BENCH_OVF_PERIOD);
            return 2;
        }
        bench_report("overflow", (double)dt / overflows);
    }
    return 0;
}
