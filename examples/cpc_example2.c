/*
 * cpc_example2.c: Example 2 of cpc_bind_curlwp(3CPC), "write a signal handler to catch overflow
 * signals", as a complete program.
 *
 * One request counts EVENT0 (default page-faults, a Linux software event every host can count)
 * in user mode, with CPC_OVF_NOTIFY_EMT and the preset UINT64_MAX - 999: the 64-bit counter
 * wraps, and the thread receives SIGEMT, after every 1000 events. The SIGEMT handler checks that
 * the signal is a counter overflow (si_code EMT_CPCOVF), samples the set (frozen since the
 * overflow), notes the value, sets the request's preset again and restarts the counters.
 *
 * The work is 20 iterations of writing to PAGES_PER_ITERATION fresh pages: one page fault per
 * page, 10000 in all. With page-faults, the program must therefore take exactly 10 overflows: any
 * other fault of the thread while it is bound (its first touch of a code or stack page) adds to
 * the count, but there are far fewer than 1000 of those. The program checks this, then prints
 * one line per overflow and a summary; the exit status is 0 only if the count is right.
 *
 * On an emulated PMU (PERFCOMPAT_BACKEND=sim:<model>) nothing is counted unless the program says
 * so: with PERFCOMPAT_EXAMPLE_INJECT set, the work also reports one occurrence of EVENT0 per page
 * through perfcompat's test hook, perfcompat_sim_advance(), so the same count is expected.
 *
 * Output: a line starting with '#' that says what is counted, one line per overflow
 * "overflow <k>: <pages written before it> pages, value <sampled value>, si_addr <pc>", and
 * "<n> overflows in <pages> pages (expected <n>), <events> events after the last one".
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

#define PRESET (UINT64_MAX - 999)
#define PERIOD 1000 /* events from PRESET to the wrap */
#define ITERATIONS 20
#define PAGES_PER_ITERATION 500
#define NPAGES (ITERATIONS * PAGES_PER_ITERATION)
#define MAXRECORDS 64

static cpc_t *cpc;
static cpc_set_t *set;
static cpc_buf_t *buf;
static int ind;

/* What the handler saw, for main to print: async-signal-safe code only writes variables. */
static volatile sig_atomic_t noverflows;  /* EMT_CPCOVF signals */
static volatile sig_atomic_t nunexpected; /* other signals reaching the handler */
static volatile sig_atomic_t touched;     /* pages written so far (by main) */
static struct {
    int pages;     /* touched when the overflow arrived */
    uint64_t val;  /* the sampled (frozen) value */
    void *addr;    /* si_addr: the interrupted program counter */
} rec[MAXRECORDS];

/* Print the message and exit, like the error() routine the man page assumes. */
static void error(const char *fmt, ...) {
    va_list ap;

    (void) fputs("cpc_example2: ", stderr);
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

/* error() for the signal handler: write(2) and _exit(2) only; errno as a number. */
static void handler_error(const char *what, int err) {
    char msg[128];
    size_t n = 0;
    const char *p;
    char digits[12];
    int d = 0;

    for (p = "cpc_example2: in the SIGEMT handler: "; *p != '\0' && n < sizeof (msg); p++)
        msg[n++] = *p;
    for (p = what; *p != '\0' && n < sizeof (msg) - 16; p++)
        msg[n++] = *p;
    for (p = " failed, errno "; *p != '\0' && n < sizeof (msg) - 14; p++)
        msg[n++] = *p;
    do {
        digits[d++] = (char) ('0' + err % 10);
        err /= 10;
    } while (err > 0 && d < (int) sizeof (digits));
    while (d > 0)
        msg[n++] = digits[--d];
    msg[n++] = '\n';
    (void) write(2, msg, n);
    _exit(1);
}

static void emt_handler(int sig, siginfo_t *sip, void *arg) {
    uint64_t val;
    int k;

    (void) arg;
    if (sig != SIGEMT || sip->si_code != EMT_CPCOVF) {
        nunexpected++;
        return;
    }

    if (cpc_set_sample(cpc, set, buf) != 0)
        handler_error("cpc_set_sample", errno);
    (void) cpc_buf_get(cpc, buf, ind, &val);

    k = noverflows;
    if (k < MAXRECORDS) {
        rec[k].pages = touched;
        rec[k].val = val;
        rec[k].addr = sip->si_addr;
    }
    noverflows = k + 1;

    /* Count the next PERIOD events from the preset again, and go on counting. */
    if (cpc_request_preset(cpc, ind, PRESET) != 0)
        handler_error("cpc_request_preset", errno);
    if (cpc_set_restart(cpc, set) != 0)
        handler_error("cpc_set_restart", errno);
}

int main(void) {
    const char *event, *s;
    struct sigaction act;
    size_t len;
    long pagesize;
    volatile char *pages;
    void *map;
    int inject = 0, iter, i, k, expected, ok = 1;
    uint64_t val, after;

    if ((s = getenv("PERFCOMPAT_EXAMPLE_INJECT")) != NULL && *s != '\0')
        inject = 1;
    if ((event = getenv("EVENT0")) == NULL)
        event = "page-faults";

    pagesize = sysconf(_SC_PAGESIZE);
    len = (size_t) NPAGES * (size_t) pagesize;
    if ((map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
        0)) == MAP_FAILED)
        error("mmap: %s", strerror(errno));
    /* One fault per page: no transparent huge page may map several at once. */
    (void) madvise(map, len, MADV_NOHUGEPAGE);
    pages = (volatile char *) map;

    if ((cpc = cpc_open(CPC_VER_CURRENT)) == NULL)
        error("perf counters unavailable: %s", strerror(errno));
    if ((set = cpc_set_create(cpc)) == NULL)
        error("could not create set: %s", strerror(errno));

    (void) memset(&act, 0, sizeof (act));
    act.sa_sigaction = emt_handler;
    (void) sigemptyset(&act.sa_mask);
    act.sa_flags = SA_RESTART | SA_SIGINFO;
    if (sigaction(SIGEMT, &act, NULL) == -1)
        error("sigaction: %s", strerror(errno));

    if ((ind = cpc_set_add_request(cpc, set, event, PRESET,
        CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL)) != 0)
        error("cannot add request to set: %s", strerror(errno));

    if ((buf = cpc_buf_create(cpc, set)) == NULL)
        error("cannot create buffer: %s", strerror(errno));

    (void) printf("# %s: %s, preset 0x%" PRIx64 " (an overflow every %d events); work: %d "
        "iterations of %d fresh pages%s\n", cpc_cciname(cpc), event, (uint64_t) PRESET, PERIOD,
        ITERATIONS, PAGES_PER_ITERATION, inject ? ", injecting one event per page" : "");
    (void) fflush(stdout);

    if (cpc_bind_curlwp(cpc, set, 0) == -1)
        error("cannot bind lwp%d: %s", lwp_self(), strerror(errno));

    for (iter = 1; iter <= ITERATIONS; iter++) {
        /* ==> Computation to be measured goes here <== */
        for (i = 0; i < PAGES_PER_ITERATION; i++) {
            pages[(long) touched * pagesize] = 1;
            if (inject && perfcompat_sim_advance(event, 1) == -1)
                error("cannot inject %s: %s", event, strerror(errno));
            touched++;
        }
    }

    /* The events since the last overflow: the counter went on from PRESET. */
    if (cpc_set_sample(cpc, set, buf) == -1)
        error("cannot sample: %s", strerror(errno));
    (void) cpc_buf_get(cpc, buf, ind, &val);
    after = val - PRESET;

    if (cpc_unbind(cpc, set) == -1)
        error("cannot unbind: %s", strerror(errno));

    for (k = 0; k < noverflows && k < MAXRECORDS; k++)
        (void) printf("overflow %d: %d pages, value 0x%" PRIx64 ", si_addr %p\n", k + 1,
            rec[k].pages, rec[k].val, rec[k].addr);
    expected = NPAGES / PERIOD;
    (void) printf("%d overflows in %d pages (expected %d), %" PRIu64
        " events after the last one\n", (int) noverflows, (int) touched, expected, after);

    if (nunexpected != 0) {
        (void) fprintf(stderr, "cpc_example2: %d signals other than EMT_CPCOVF\n",
            (int) nunexpected);
        ok = 0;
    }
    if (noverflows != expected) {
        (void) fprintf(stderr, "cpc_example2: %d overflows, expected %d\n", (int) noverflows,
            expected);
        ok = 0;
    }
    /* Each restart began PERIOD events from the wrap: fewer than PERIOD can follow the last. */
    if (after >= PERIOD) {
        (void) fprintf(stderr, "cpc_example2: %" PRIu64 " events after the last overflow, "
            "which should have been signalled\n", after);
        ok = 0;
    }
    /* Overflow k comes at the (k * PERIOD)-th event, after at most that many pages. */
    for (k = 0; k < noverflows && k < MAXRECORDS; k++) {
        if (rec[k].pages >= (k + 1) * PERIOD || rec[k].val >= PERIOD) {
            (void) fprintf(stderr, "cpc_example2: overflow %d came late: after %d pages, "
                "value 0x%" PRIx64 "\n", k + 1, rec[k].pages, rec[k].val);
            ok = 0;
        }
    }

    if (cpc_buf_destroy(cpc, buf) == -1)
        error("cannot destroy buffer: %s", strerror(errno));
    if (cpc_set_destroy(cpc, set) == -1)
        error("cannot destroy set: %s", strerror(errno));
    (void) cpc_close(cpc);
    (void) munmap(map, len);
    return (ok ? 0 : 1);
}
