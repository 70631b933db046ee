/* A program that stops its own counting around work it does not want counted, the way
 * cpc_enable(3CPC)'s first example does, with no set of its own: the counters are bound to it
 * from outside (cputrack, or a libpctx client with cpc_bind_pctx). Run by
 * capi/tests/cpc_enable_outside.rs.
 * usage: cpc_enable_target A B C [thread]
 *   touches A fresh pages, then cpc_disable, B pages, cpc_enable, C pages (one page fault
 *   each); with "thread", a second thread does the same after the main thread's part, with its
 *   own disable and enable. Every libcpc call must return 0 and write nothing. */
#define _GNU_SOURCE
#include <errno.h>
#include <libcpc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pages.h"

static cpc_t *cpc;
static long a, b, c;

static void check(const char *what, int rc) {
    if (rc != 0) {
        fprintf(stderr, "%s returned %d: %s\n", what, rc, strerror(errno));
        exit(1);
    }
}

static void *part(void *arg) {
    (void)arg;
    touch(a);
    check("cpc_disable", cpc_disable(cpc));
    touch(b);
    check("cpc_enable", cpc_enable(cpc));
    touch(c);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: cpc_enable_target A B C [thread]\n");
        return 2;
    }
    a = atol(argv[1]);
    b = atol(argv[2]);
    c = atol(argv[3]);
    if ((cpc = cpc_open(CPC_VER_CURRENT)) == NULL) {
        perror("cpc_open");
        return 1;
    }
    part(NULL);
    if (argc > 4 && strcmp(argv[4], "thread") == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, part, NULL) != 0) return 1;
        pthread_join(t, NULL);
    }
    check("cpc_close", cpc_close(cpc));
    return 0;
}
