/* install_pctx.c: a cputrack-like program built as Solaris Makefiles build one, with
 * "-lcpc -lpctx" against the installed prefix (capi/tests/install.rs). It runs FILE ARG...
 * under pctx_create; init_lwp binds a set counting page-faults to each thread with
 * cpc_bind_pctx, fini_lwp samples and unbinds it. Prints "threads=T faults=F" and exits 0,
 * or exits 1 when a call fails.
 * Usage: install_pctx FILE [ARG...] */
#include <inttypes.h>
#include <stdio.h>
#include <libcpc.h>
#include <libpctx.h>

/* Everything the callbacks use, passed as pctx_create's arg. */
struct track {
    cpc_t *cpc;
    cpc_set_t *set;
    cpc_buf_t *buf;
    int threads, errors;
    uint64_t faults;
};

static int started(pctx_t *p, pid_t pid, id_t lwp, void *arg) {
    struct track *t = arg;
    (void)pid;
    t->threads++;
    t->errors += cpc_bind_pctx(t->cpc, p, lwp, t->set, 0) != 0;
    return 0;
}

static int ended(pctx_t *p, pid_t pid, id_t lwp, void *arg) {
    struct track *t = arg;
    uint64_t n = 0;
    (void)p; (void)pid; (void)lwp;
    t->errors += cpc_set_sample(t->cpc, t->set, t->buf) != 0;
    t->errors += cpc_buf_get(t->cpc, t->buf, 0, &n) != 0;
    t->faults += n;
    t->errors += cpc_unbind(t->cpc, t->set) != 0;
    return 0;
}

int main(int argc, char **argv) {
    struct track t = {0};
    pctx_t *p;
    if (argc < 2) return 2;
    t.cpc = cpc_open(CPC_VER_CURRENT);
    if (t.cpc == NULL || (t.set = cpc_set_create(t.cpc)) == NULL) return 1;
    if (cpc_set_add_request(t.cpc, t.set, "page-faults", 0, CPC_COUNT_USER | CPC_COUNT_SYSTEM,
                            0, NULL) != 0 || (t.buf = cpc_buf_create(t.cpc, t.set)) == NULL)
        return 1;
    if ((p = pctx_create(argv[1], argv + 1, &t, 0, NULL)) == NULL) return 1;
    if (pctx_set_events(p, PCTX_INIT_LWP_EVENT, started, PCTX_FINI_LWP_EVENT, ended,
                        PCTX_NULL_EVENT) != 0 || pctx_run(p, 0, 0, NULL) != 0)
        return 1;
    pctx_release(p);
    printf("threads=%d faults=%" PRIu64 "\n", t.threads, t.faults);
    return t.errors != 0 || cpc_close(t.cpc) != 0;
}
