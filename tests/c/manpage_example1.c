/* Example 1 of cpc_bind_curlwp(3CPC), as the man page prints it, for capi/tests/solaris_h.rs:
 * it must build with `-include perfcompat/solaris.h` and no other change to the page's code
 * (it calls _lwp_self(), which only that header declares on Linux). Added around the page's
 * code, as the page says a program must: the includes it names, and the user-provided error()
 * routine ("analogous to printf(3C) ... that also performs an exit(2)"). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libcpc.h>

static void error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    (void) vfprintf(stderr, fmt, ap);
    va_end(ap);
    (void) fputc('\n', stderr);
    exit(1);
}

/* The page's code from here on. */
int main(int argc, char *argv[]) {
    int iter;
    char *event0 = NULL, *event1 = NULL;
    cpc_t *cpc;
    cpc_set_t *set;
    cpc_buf_t *diff, *after, *before;
    int ind0, ind1;
    uint64_t val0, val1;
    (void) argc;
    (void) argv;

    if ((cpc = cpc_open(CPC_VER_CURRENT)) == NULL)
        error("perf counters unavailable: %s", strerror(errno));
    if ((event0 = getenv("EVENT0")) == NULL)
        event0 = "EC_ref";
    if ((event1 = getenv("EVENT1")) == NULL)
        event1 = "EC_hit";
    if ((set = cpc_set_create(cpc)) == NULL)
        error("could not create set: %s", strerror(errno));
    if ((ind0 = cpc_set_add_request(cpc, set, event0, 0, CPC_COUNT_USER, 0, NULL)) == -1)
        error("could not add first request: %s", strerror(errno));
    if ((ind1 = cpc_set_add_request(cpc, set, event1, 0, CPC_COUNT_USER, 0, NULL)) == -1)
        error("could not add first request: %s", strerror(errno));
    if ((diff = cpc_buf_create(cpc, set)) == NULL)
        error("could not create buffer: %s", strerror(errno));
    if ((after = cpc_buf_create(cpc, set)) == NULL)
        error("could not create buffer: %s", strerror(errno));
    if ((before = cpc_buf_create(cpc, set)) == NULL)
        error("could not create buffer: %s", strerror(errno));
    if (cpc_bind_curlwp(cpc, set, 0) == -1)
        error("cannot bind lwp%d: %s", _lwp_self(), strerror(errno));
    for (iter = 1; iter <= 20; iter++) {
        if (cpc_set_sample(cpc, set, before) == -1)
            break;
        /* ==> Computation to be measured goes here <== */
        if (cpc_set_sample(cpc, set, after) == -1)
            break;
        cpc_buf_sub(cpc, diff, after, before);
        cpc_buf_get(cpc, diff, ind0, &val0);
        cpc_buf_get(cpc, diff, ind1, &val1);
        (void) printf("%3d: %" PRId64 " %" PRId64 "\n", iter, val0, val1);
    }
    if (iter != 21)
        error("cannot sample set: %s", strerror(errno));
    cpc_close(cpc);
    return (0);
}
