/* A task-clock request that overflows almost at once (1000 ns from its preset), so the first
 * overflow can come while cpc_bind_curlwp is still returning: it must still be notified, and
 * the set must go on counting after the handler restarts it. Prints "0 failures" on success.
 *
 * The handler restarts with a distance of 1 ms: the kernel arms task-clock at 10 us at the
 * least, and a program that restarts at that distance forever can spend all of it in signal
 * handling (a debug build on a loaded machine did: the program never got past its loop). */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <libcpc.h>

static cpc_t *cpc;
static cpc_set_t *set;
static volatile sig_atomic_t overflows, odd;

static void on_emt(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    (void)uc;
    if (si->si_code != EMT_CPCOVF) {
        odd++;
        return;
    }
    overflows++;
    cpc_request_preset(cpc, 0, UINT64_MAX - 999999);
    cpc_set_restart(cpc, set);
}

int main(void) {
    struct sigaction sa;
    uint64_t before = 0, after = 0;
    int fails = 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_emt;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGEMT, &sa, NULL);
    cpc = cpc_open(CPC_VER_CURRENT);
    set = cpc ? cpc_set_create(cpc) : NULL;
    cpc_buf_t *buf = set ? cpc_buf_create(cpc, set) : NULL;
    if (!buf || cpc_set_add_request(cpc, set, "task-clock", UINT64_MAX - 999,
                                    CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL) != 0) {
        perror("setup");
        return 2;
    }
    /* cpc_set_add_request copies the request; buffers made before it have no room. */
    cpc_buf_destroy(cpc, buf);
    buf = cpc_buf_create(cpc, set);
    if (cpc_bind_curlwp(cpc, set, 0) != 0) {
        perror("cpc_bind_curlwp");
        return 2;
    }
    volatile double x = 0;
    for (long i = 0; i < 3000000; i++) x += 1.0;
    cpc_set_sample(cpc, set, buf);
    cpc_buf_get(cpc, buf, 0, &before);
    for (long i = 0; i < 3000000; i++) x += 1.0;
    cpc_set_sample(cpc, set, buf);
    cpc_buf_get(cpc, buf, 0, &after);
    if (overflows == 0) { fprintf(stderr, "FAIL: no SIGEMT\n"); fails++; }
    if (odd) { fprintf(stderr, "FAIL: %d signals without EMT_CPCOVF\n", (int)odd); fails++; }
    if (after == before) { fprintf(stderr, "FAIL: the set stayed frozen\n"); fails++; }
    printf("%d overflows; %d failures\n", (int)overflows, fails);
    return fails != 0;
}
