/* The cost of libcpc's steady-state operations in system calls (issue 19): the test
 * (capi/tests/syscalls.rs) runs this under strace and counts the calls between each pair of
 * markers, written to standard output as "BEGIN <what>" and "END <what>".
 *   sample    n cpc_set_sample of a bound 3-request set
 *   restart   n cpc_set_restart of a bound, running set
 *   overflow  n page-fault overflows, each handled by a SIGEMT handler that samples, presets
 *             and restarts (cpc_set_sample, cpc_request_preset, cpc_set_restart)
 * argv[1]: n. Prints "N failures". */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <libcpc.h>

static cpc_t *cpc;
static cpc_set_t *set, *ovf_set;
static cpc_buf_t *buf, *ovf_buf;
static volatile sig_atomic_t nsig, bad;
static int failures;

#define PERIOD 10

static void mark(const char *s) {
    if (write(1, s, strlen(s)) != (ssize_t)strlen(s)) failures++;
}

static void handler(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    if (sig != SIGEMT || si->si_code != EMT_CPCOVF) {
        bad++;
        return;
    }
    nsig++;
    if (cpc_set_sample(cpc, ovf_set, ovf_buf) != 0 ||
        cpc_request_preset(cpc, 0, UINT64_MAX - (PERIOD - 1)) != 0 ||
        cpc_set_restart(cpc, ovf_set) != 0)
        bad++;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    long psz = sysconf(_SC_PAGESIZE);
    struct sigaction act;
    char *p;
    mark("BEGIN open\n");
    if ((cpc = cpc_open(CPC_VER_CURRENT)) == NULL) return 2;
    mark("END open\n");

    /* sample */
    if ((set = cpc_set_create(cpc)) == NULL) return 2;
    if (cpc_set_add_request(cpc, set, "task-clock", 0, CPC_COUNT_USER, 0, NULL) != 0 ||
        cpc_set_add_request(cpc, set, "page-faults", 0, CPC_COUNT_USER, 0, NULL) != 1 ||
        cpc_set_add_request(cpc, set, "context-switches", 0, CPC_COUNT_USER, 0, NULL) != 2)
        return 2;
    if ((buf = cpc_buf_create(cpc, set)) == NULL || cpc_bind_curlwp(cpc, set, 0) != 0) return 2;
    if (cpc_set_sample(cpc, set, buf) != 0) failures++;
    mark("BEGIN sample\n");
    for (int i = 0; i < n; i++)
        if (cpc_set_sample(cpc, set, buf) != 0) failures++;
    mark("END sample\n");

    /* restart */
    mark("BEGIN restart\n");
    for (int i = 0; i < n; i++)
        if (cpc_set_restart(cpc, set) != 0) failures++;
    mark("END restart\n");
    if (cpc_unbind(cpc, set) != 0) failures++;

    /* overflow */
    memset(&act, 0, sizeof act);
    act.sa_sigaction = handler;
    act.sa_flags = SA_RESTART | SA_SIGINFO;
    sigemptyset(&act.sa_mask);
    if (sigaction(SIGEMT, &act, NULL) != 0) return 2;
    if ((ovf_set = cpc_set_create(cpc)) == NULL ||
        cpc_set_add_request(cpc, ovf_set, "page-faults", UINT64_MAX - (PERIOD - 1),
                            CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL) != 0 ||
        (ovf_buf = cpc_buf_create(cpc, ovf_set)) == NULL)
        return 2;
    p = mmap(NULL, (size_t)(n + 3) * PERIOD * (size_t)psz, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 2;
    madvise(p, (size_t)(n + 3) * PERIOD * (size_t)psz, MADV_NOHUGEPAGE);
    if (cpc_bind_curlwp(cpc, ovf_set, 0) != 0) return 2;
    /* Two overflows first: the handler's code and data pages are touched for the first time
     * there (page faults too, counted after an overflow: the restart then re-arms). */
    for (long i = 0; i < 2L * PERIOD; i++)
        ((volatile char *)p)[i * psz] = 1;
    if (nsig != 2) failures++;
    nsig = 0;
    mark("BEGIN overflow\n");
    for (long i = 2L * PERIOD; i < (long)(n + 2) * PERIOD; i++)
        ((volatile char *)p)[i * psz] = 1;
    mark("END overflow\n");
    if (cpc_unbind(cpc, ovf_set) != 0) failures++;
    if (bad != 0) failures++;
    printf("signals %d\n%d failures\n", (int)nsig, failures);
    return failures != 0;
}
