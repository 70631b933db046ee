/* A process's first counting (issue 19), between "BEGIN" and "END" markers on standard output
 * that capi/tests/first_use.rs finds in an strace of this program:
 *   perfex  libperfex's first start_counters(0, 16)
 *   cpc     cpc_open, a set of one request (argv[2]) and its first cpc_bind_curlwp
 * After END, the cpc mode prints cpc_cciname and cpc_cpuref (made on first request) and
 * both modes read their counters. Prints "0 failures" when every call succeeded. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <libcpc.h>
#include <libperfex.h>

static int failures;

static void mark(const char *s) {
    if (write(1, s, strlen(s)) != (ssize_t)strlen(s)) failures++;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "perfex") == 0) {
        long long c0 = 0, c1 = 0;
        mark("BEGIN\n");
        if (start_counters(0, 16) < 0) failures++;
        mark("END\n");
        if (read_counters(0, &c0, 16, &c1) < 0) failures++;
    } else if (argc > 2 && strcmp(argv[1], "cpc") == 0) {
        mark("BEGIN\n");
        cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
        cpc_set_t *set = cpc ? cpc_set_create(cpc) : NULL;
        if (!set || cpc_set_add_request(cpc, set, argv[2], 0, CPC_COUNT_USER, 0, NULL) < 0 ||
            cpc_bind_curlwp(cpc, set, 0) < 0) {
            failures++;
            mark("END\n");
        } else {
            mark("END\n");
            cpc_buf_t *buf = cpc_buf_create(cpc, set);
            if (!buf || cpc_set_sample(cpc, set, buf) < 0) failures++;
            printf("cciname: %s\ncpuref: %s\n", cpc_cciname(cpc), cpc_cpuref(cpc));
            cpc_close(cpc);
        }
    } else {
        fprintf(stderr, "usage: first_use perfex | first_use cpc EVENT\n");
        return 2;
    }
    printf("%d failures\n", failures);
    return failures != 0;
}
