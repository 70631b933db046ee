/* libcpc at the shortest period a preset can ask for on a clock: `cpu-clock` preset 1 µs
 * before the wrap with CPC_OVF_NOTIFY_EMT, the SIGEMT handler restarting at the same preset,
 * as cpc_bind_curlwp(3CPC) Example 2 does. The program must get through its work in bounded
 * time without filling the signal queue (the test samples SigQ while it runs), and each
 * overflow is seen at or past the wrap. Prints "overflows N work W"; exit 0. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libcpc.h>

#define PRESET (UINT64_MAX - 999)

static cpc_t *cpc;
static cpc_set_t *set;
static cpc_buf_t *buf;
static volatile sig_atomic_t overflows, before_wrap, failed;
static volatile unsigned long sink;

static void on_emt(int sig, siginfo_t *si, void *uc) {
    uint64_t v = 0;
    (void)sig;
    (void)uc;
    if (si->si_code != EMT_CPCOVF)
        return;
    overflows++;
    if (cpc_set_sample(cpc, set, buf) != 0)
        failed++;
    cpc_buf_get(cpc, buf, 0, &v);
    if (v >= PRESET) /* frozen before the wrap: not an overflow */
        before_wrap++;
    if (cpc_request_preset(cpc, 0, PRESET) != 0 || cpc_set_restart(cpc, set) != 0)
        failed++;
}

int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 0) : 200000000UL;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_emt;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGEMT, &sa, NULL);
    if ((cpc = cpc_open(CPC_VER_CURRENT)) == NULL || (set = cpc_set_create(cpc)) == NULL ||
        cpc_set_add_request(cpc, set, "cpu-clock", PRESET, CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT,
                            0, NULL) != 0 ||
        (buf = cpc_buf_create(cpc, set)) == NULL || cpc_bind_curlwp(cpc, set, 0) != 0) {
        perror("libcpc");
        return 1;
    }
    for (unsigned long i = 0; i < n; i++)
        sink += i ^ (sink >> 3);
    cpc_unbind(cpc, set);
    printf("overflows %d work %lu\n", (int)overflows, n);
    if (overflows == 0 || before_wrap != 0 || failed != 0) {
        fprintf(stderr, "storm_cpc: %d overflows, %d frozen before the wrap, %d failed calls\n",
                (int)overflows, (int)before_wrap, (int)failed);
        return 1;
    }
    return 0;
}
