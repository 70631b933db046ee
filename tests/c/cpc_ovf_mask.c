/* Which requests overflowed, in the SIGEMT handler: perfcompat_cpc_ovf_mask(siginfo), libcpc.h's
 * extension after perfctr's si_pmc_ovf_mask. Built with -Wall -Wextra -Wpedantic -Werror against
 * include/ and the library only (capi/tests/ovf_mask.rs).
 *   sim   sim:ultrasparc  two notifying requests; each overflow's signal names its own request,
 *                         a plain sigqueue()'d SIGEMT reads 0, an inheriting thread's first
 *                         signal names every notifying request
 *   perf  perf            page faults: request 1 notifies every 100 faults, request 0 counts;
 *                         every signal's mask is 2
 * It prints "<mode>: N failures". */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <libcpc.h>
#include <perfcompat.h>

#ifndef PERFCOMPAT_CPC_OVF_MASK
#error "libcpc.h lacks perfcompat_cpc_ovf_mask"
#endif

static int failures;
#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
            failures++;                                                       \
        }                                                                     \
    } while (0)

static cpc_t *cpc;
static cpc_set_t *set;
static volatile sig_atomic_t nsig, bad;
static volatile uint64_t last_mask, mask_or;
static volatile int last_code;

static void handler(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    if (sig != SIGEMT) {
        bad++;
        return;
    }
    nsig++;
    last_code = si->si_code;
    last_mask = perfcompat_cpc_ovf_mask(si);
    mask_or |= last_mask;
    if (si->si_code == EMT_CPCOVF && cpc_set_restart(cpc, set) != 0)
        bad++;
}

static void on_sigemt(void) {
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_sigaction = handler;
    act.sa_flags = SA_RESTART | SA_SIGINFO;
    sigemptyset(&act.sa_mask);
    CHECK(sigaction(SIGEMT, &act, NULL) == 0);
}

static void *child(void *arg) {
    (void)arg;
    return NULL;
}

static int sim(void) {
    const uint64_t notify = CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT;
    union sigval v;
    pthread_t t;
    on_sigemt();
    CHECK((cpc = cpc_open(CPC_VER_CURRENT)) != NULL);
    CHECK((set = cpc_set_create(cpc)) != NULL);
    CHECK(cpc_set_add_request(cpc, set, "EC_ref", UINT64_MAX - 99, notify, 0, NULL) == 0);
    CHECK(cpc_set_add_request(cpc, set, "EC_misses", UINT64_MAX - 9, notify, 0, NULL) == 1);
    CHECK(cpc_bind_curlwp(cpc, set, 0) == 0);

    CHECK(perfcompat_sim_advance("EC_misses", 10) == 1);
    CHECK(nsig == 1 && last_code == EMT_CPCOVF && last_mask == 2);
    CHECK(perfcompat_sim_advance("EC_ref", 100) == 1);
    CHECK(nsig == 2 && last_mask == 1);
    /* 25 overflows of request 1 in one call: 25 signals, each naming request 1 only. */
    mask_or = 0;
    CHECK(perfcompat_sim_advance("EC_misses", 250) == 1);
    CHECK(nsig == 27 && mask_or == 2 && bad == 0);

    /* A SIGEMT that libcpc did not send carries no mask. */
    v.sival_ptr = (void *)~(uintptr_t)0;
    CHECK(sigqueue(getpid(), SIGEMT, v) == 0);
    CHECK(nsig == 28 && last_code == SI_QUEUE && last_mask == 0);

    /* A thread that inherits the set gets a signal naming every notifying request. */
    CHECK(cpc_unbind(cpc, set) == 0);
    CHECK(cpc_bind_curlwp(cpc, set, CPC_BIND_LWP_INHERIT) == 0);
    mask_or = 0;
    CHECK(pthread_create(&t, NULL, child, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(nsig == 29 && last_code == EMT_CPCOVF && mask_or == 3);
    CHECK(cpc_unbind(cpc, set) == 0);
    CHECK(bad == 0);
    printf("signals %d\n", (int)nsig);
    return failures;
}

static int perf(void) {
    const size_t pages = 10000;
    const long psz = sysconf(_SC_PAGESIZE);
    char *p;
    uint64_t faults = 0, counted = 0;
    cpc_buf_t *buf;
    on_sigemt();
    CHECK((cpc = cpc_open(CPC_VER_CURRENT)) != NULL);
    CHECK((set = cpc_set_create(cpc)) != NULL);
    CHECK(cpc_set_add_request(cpc, set, "page-faults", 0, CPC_COUNT_USER, 0, NULL) == 0);
    CHECK(cpc_set_add_request(cpc, set, "page-faults", UINT64_MAX - 99,
                              CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL) == 1);
    CHECK((buf = cpc_buf_create(cpc, set)) != NULL);
    p = mmap(NULL, pages * (size_t)psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    madvise(p, pages * (size_t)psz, MADV_NOHUGEPAGE);
    CHECK(cpc_bind_curlwp(cpc, set, 0) == 0);
    for (size_t i = 0; i < pages; i++)
        ((volatile char *)p)[i * (size_t)psz] = 1;
    CHECK(cpc_set_sample(cpc, set, buf) == 0);
    CHECK(cpc_buf_get(cpc, buf, 0, &faults) == 0);
    CHECK(cpc_buf_get(cpc, buf, 1, &counted) == 0);
    CHECK(cpc_unbind(cpc, set) == 0);
    /* Request 1 restarts at every signal: about pages / 100 of them (a fault the kernel counts
     * between an overflow and the freeze is in no period), every one naming request 1. */
    CHECK(nsig >= (sig_atomic_t)(pages / 100 - 5) && nsig <= (sig_atomic_t)(pages / 100 + 5));
    CHECK(mask_or == 2 && last_mask == 2 && last_code == EMT_CPCOVF && bad == 0);
    printf("signals %d faults %" PRIu64 "\n", (int)nsig, faults);
    return failures;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    int f;
    if (strcmp(mode, "sim") == 0)
        f = sim();
    else if (strcmp(mode, "perf") == 0)
        f = perf();
    else {
        fprintf(stderr, "usage: %s sim|perf\n", argv[0]);
        return 2;
    }
    printf("%s: %d failures\n", mode, f);
    return f != 0;
}
