/* cpc_count_usr_events(3CPC)'s example, a program with no context of its own run under
 * cputrack(1) (or a libpctx client's cpc_pctx_bind_event): it turns the counting of user
 * events off around the "other application code" and on around the code to be measured.
 * Run by capi/tests/cpc_count_usr_outside.rs (issue 45 items 4 and 5).
 * usage: cpc_count_usr_target A B C traced|alone
 *   cpc_count_usr_events(0), A fresh pages, cpc_count_usr_events(1), B pages,
 *   cpc_count_usr_events(0), C pages (one page fault each). "traced": every call must return
 *   0 (the thread's context is the controller's); "alone": -1 with errno EINVAL (no context).
 *   Nothing is written unless a call returns something else (then the program goes on, and
 *   exits with 1). */
#define _GNU_SOURCE
#include <errno.h>
#include <libcpc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pages.h"

static int traced, failed;

static void count_usr(int enable) {
    errno = 0;
    int rc = cpc_count_usr_events(enable);
    if (traced ? rc != 0 : rc != -1 || errno != EINVAL) {
        fprintf(stderr, "cpc_count_usr_events(%d) returned %d: %s\n", enable, rc,
                strerror(errno));
        failed = 1;
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: cpc_count_usr_target A B C traced|alone\n");
        return 2;
    }
    traced = strcmp(argv[4], "traced") == 0;
    /* The page's test for counters before it uses them. */
    int have_counters = cpc_version(CPC_VER_CURRENT) == CPC_VER_CURRENT &&
                        cpc_getcpuver() != -1 && cpc_access() == 0;
    if (!have_counters) {
        fprintf(stderr, "no counters\n");
        return 1;
    }
    count_usr(0);
    touch(atol(argv[1])); /* other application code */
    count_usr(1);
    touch(atol(argv[2])); /* code to be measured */
    count_usr(0);
    touch(atol(argv[3])); /* other application code */
    return failed;
}
