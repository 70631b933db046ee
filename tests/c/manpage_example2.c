/* Example 2 of cpc_bind_curlwp(3CPC), as the man page prints it, for capi/tests/solaris_h.rs:
 * the signal handler and the setup code build with `-include perfcompat/solaris.h` (for
 * _lwp_self(), and PC and SP in uc_mcontext.gregs) and no other change to the page's code.
 * Added around it, as the page says a program must: the includes, the user-provided error()
 * routine, a main() holding the setup code "after the code that opens the CPC library and
 * creates a set", and the event (EVENT0, default page-faults) with pages touched as "the
 * computation to be measured". The page's handler refers to ind1 and val1, which it never
 * declares, and drops an `if`: here ind1 is the request's index and val1 its preset, and the
 * `if` is back. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <libcpc.h>

static void error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    (void) vfprintf(stderr, fmt, ap);
    va_end(ap);
    (void) fputc('\n', stderr);
    exit(1);
}

#define PRESET (UINT64_MAX - 999ull)
static int ind1;
static uint64_t val1 = PRESET;

/* The page's handler. */
cpc_t *cpc;
cpc_set_t *set;
cpc_buf_t *buf;
int index;

void emt_handler(int sig, siginfo_t *sip, void *arg) {
    ucontext_t *uap = arg;
    uint64_t val;
    if (sig != SIGEMT || sip->si_code != EMT_CPCOVF) {
        psignal(sig, "example");
        psiginfo(sip, "example");
        return;
    }
    (void) printf("lwp%d - si_addr %p ucontext: %%pc %p %%sp %p\n", _lwp_self(),
                  (void *)sip->si_addr, (void *)uap->uc_mcontext.gregs[PC],
                  (void *)uap->uc_mcontext.gregs[SP]);
    if (cpc_set_sample(cpc, set, buf) != 0)
        error("cannot sample: %s", strerror(errno));
    cpc_buf_get(cpc, buf, index, &val);
    (void) printf("0x%" PRIx64 "\n", val);
    (void) fflush(stdout);
    /*
     * Update a request's preset and restart the counters. Counters which
     * have not been preset with cpc_request_preset() will resume counting
     * from their current value.
     */
    if (cpc_request_preset(cpc, ind1, val1) != 0)
        error("cannot set preset for request %d: %s", ind1, strerror(errno));
    if (cpc_set_restart(cpc, set) != 0)
        error("cannot restart lwp%d: %s", _lwp_self(), strerror(errno));
}

int main(void) {
    int iter;
    char *event = getenv("EVENT0") ? getenv("EVENT0") : "page-faults";
    if ((cpc = cpc_open(CPC_VER_CURRENT)) == NULL)
        error("perf counters unavailable: %s", strerror(errno));
    if ((set = cpc_set_create(cpc)) == NULL)
        error("could not create set: %s", strerror(errno));
    char *pages = mmap(NULL, 20 * 1000 * 4096L, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED)
        error("mmap: %s", strerror(errno));

    /* The page's setup code. */
    struct sigaction act;
    act.sa_sigaction = emt_handler;
    bzero(&act.sa_mask, sizeof (act.sa_mask));
    act.sa_flags = SA_RESTART|SA_SIGINFO;
    if (sigaction(SIGEMT, &act, NULL) == -1)
        error("sigaction: %s", strerror(errno));
    if ((index = cpc_set_add_request(cpc, set, event, PRESET,
        CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL)) != 0)
        error("cannot add request to set: %s", strerror(errno));
    ind1 = index;
    if ((buf = cpc_buf_create(cpc, set)) == NULL)
        error("cannot create buffer: %s", strerror(errno));
    if (cpc_bind_curlwp(cpc, set, 0) == -1)
        error("cannot bind lwp%d: %s", _lwp_self(), strerror(errno));
    for (iter = 1; iter <= 20; iter++) {
        /* ==> Computation to be measured goes here <== */
        for (long p = 0; p < 1000; p++)
            pages[((iter - 1) * 1000L + p) * 4096] = 1;
    }
    cpc_unbind(cpc, set);
    /* done */
    return 0;
}
