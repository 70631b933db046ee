/* A small program linked with the library, installed setuid-root by capi/tests/secure_env.rs
 * (issue 36): it says who it runs as and whether the kernel marked it secure (AT_SECURE),
 * which processor libcpc says it counts on (PERFCOMPAT_BACKEND shows there), then counts a
 * little with libperfex and prints the counts and the cost report (which reads the event map,
 * the system cost file and the host calibration cache the environment may name). */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <libcpc.h>
#include <libperfex.h>

int main(void) {
    printf("euid %d uid %d secure %lu\n", (int)geteuid(), (int)getuid(), getauxval(AT_SECURE));
    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    printf("cciname %s\n", cpc ? cpc_cciname(cpc) : "(no cpc)");
    long long c0 = 0, c1 = 0;
    if (start_counters(0, 25) < 0) printf("start_counters failed\n");
    volatile double x = 0;
    for (int i = 0; i < 1000000; i++) x += i;
    if (read_counters(0, &c0, 25, &c1) < 0) printf("read_counters failed\n");
    print_counters(0, c0, 25, c1);
    print_costs(0, c0, 25, c1);
    fflush(NULL);
    return 0;
}
