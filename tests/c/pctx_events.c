/* libpctx as its documented clients drive it (run by capi/tests/pctx.rs). Every line goes to
 * standard output as "[p] ..." from this process, or "[c] ..." from the copy of it that runs
 * a fork callback; process ids are printed as "#N" for the test to name, LWP ids (libpctx's
 * small per-process numbers) as they are; the exec callback's argument string in quotes.
 * usage: pctx_events MODE ... FILE [ARG...]   (FILE is run with ARG... under pctx_create)
 *   seq [-f] [-x] FILE...     log every callback with its ids; -f registers a fork callback
 *                             (which logs the child's callbacks the same way), -x makes the
 *                             exec callback return -1, -l the lwp_exit callback; then
 *                             "pctx_run RC" and "released"
 *   create FILE [ARG...]      pctx_create only: "pctx_create NULL ERRNO-NAME" or "... handle"
 *   capture PID               pctx_capture only, the same way
 *   ticks MSEC N FILE...      pctx_run(p, MSEC, N, tick): "ticks T elapsed E rc R" (ms)
 *   terminate MSEC N FILE...  the same, with a tick that calls pctx_terminate at its Nth call
 *   track MSEC FILE...        what cputrack does with -e and -f: init_lwp binds a set counting
 *                             page-faults with cpc_bind_pctx, ticks sample it, fini_lwp samples,
 *                             prints and unbinds, the fork callback follows the child */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <libcpc.h>
#include <libpctx.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *who = "p";
static int exec_rc, lwp_exit_rc;

static void say(const char *fmt, ...) {
    char line[512];
    int n = snprintf(line, sizeof line, "[%s] ", who);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    if (write(1, line, (size_t)n) != n) _exit(90);
}

static const char *base(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* ---- seq: log every callback ---- */

static int lg_init(pctx_t *p, pid_t pid, id_t lwp, void *arg) {
    (void)p; (void)arg;
    say("init_lwp #%d %d", (int)pid, (int)lwp);
    return 0;
}
static int lg_fini(pctx_t *p, pid_t pid, id_t lwp, void *arg) {
    (void)p; (void)arg;
    say("fini_lwp #%d %d", (int)pid, (int)lwp);
    return 0;
}
static int lg_lwp_create(pctx_t *p, pid_t pid, id_t lwp, void *arg) {
    (void)p; (void)arg;
    say("lwp_create #%d %d", (int)pid, (int)lwp);
    return 0;
}
static int lg_lwp_exit(pctx_t *p, pid_t pid, id_t lwp, void *arg) {
    (void)p; (void)arg;
    say("lwp_exit #%d %d", (int)pid, (int)lwp);
    return lwp_exit_rc;
}
static int lg_exec(pctx_t *p, pid_t pid, id_t lwp, char *cmd, void *arg) {
    (void)p; (void)arg;
    say("exec #%d %d '%s'", (int)pid, (int)lwp, cmd);
    return exec_rc;
}
static void lg_exit(pctx_t *p, pid_t pid, id_t lwp, int status, void *arg) {
    (void)p; (void)arg;
    say("exit #%d %d %d", (int)pid, (int)lwp, status);
}
static void lg_fork(pctx_t *child, pid_t ppid, id_t a, pid_t b, void *arg);

static int lg_events(pctx_t *p, int with_fork) {
    if (with_fork)
        return pctx_set_events(p, PCTX_INIT_LWP_EVENT, lg_init, PCTX_FINI_LWP_EVENT, lg_fini,
                               PCTX_SYSC_LWP_CREATE_EVENT, lg_lwp_create,
                               PCTX_SYSC_LWP_EXIT_EVENT, lg_lwp_exit, PCTX_SYSC_EXEC_EVENT,
                               lg_exec, PCTX_SYSC_EXIT_EVENT, lg_exit, PCTX_SYSC_FORK_EVENT,
                               lg_fork, PCTX_NULL_EVENT);
    return pctx_set_events(p, PCTX_INIT_LWP_EVENT, lg_init, PCTX_FINI_LWP_EVENT, lg_fini,
                           PCTX_SYSC_LWP_CREATE_EVENT, lg_lwp_create, PCTX_SYSC_LWP_EXIT_EVENT,
                           lg_lwp_exit, PCTX_SYSC_EXEC_EVENT, lg_exec, PCTX_SYSC_EXIT_EVENT,
                           lg_exit, PCTX_NULL_EVENT);
}

/* The fork callback, in the copy: follow the child with the same callbacks. */
static void lg_fork(pctx_t *child, pid_t ppid, id_t a, pid_t b, void *arg) {
    (void)arg;
    who = "c";
    say("fork #%d #%d %d", (int)ppid, (int)a, (int)b);
    if (lg_events(child, 1) != 0) say("pctx_set_events failed: %s", strerror(errno));
    say("pctx_run %d", pctx_run(child, 0, 0, NULL));
}

static int seq(int argc, char **argv) {
    int with_fork = 0, i = 0;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "-f") == 0) with_fork = 1;
        else if (strcmp(argv[i], "-x") == 0) exec_rc = -1;
        else if (strcmp(argv[i], "-l") == 0) lwp_exit_rc = -1;
    }
    pctx_t *p = pctx_create(argv[i], &argv[i], NULL, 0, NULL);
    if (p == NULL || lg_events(p, with_fork) != 0) return 2;
    say("pctx_run %d", pctx_run(p, 0, 0, NULL));
    pctx_release(p);
    say("released");
    return 0;
}

/* ---- ticks ---- */

static int nticks, stop_at;
static int tk_tick(pctx_t *p, pid_t pid, id_t lwp, void *arg) {
    (void)pid; (void)lwp; (void)arg;
    if (++nticks == stop_at) pctx_terminate(p);
    return 0;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int ticks(int argc, char **argv, int terminate) {
    if (argc < 3) return 2;
    unsigned msec = (unsigned)atoi(argv[0]), n = (unsigned)atoi(argv[1]);
    if (terminate) {
        stop_at = (int)n;
        n = 0;
    }
    pctx_t *p = pctx_create(argv[2], &argv[2], NULL, 0, NULL);
    if (p == NULL) return 2;
    double t0 = now_ms();
    int rc = pctx_run(p, msec, n, tk_tick);
    say("ticks %d elapsed %.0f rc %d", nticks, now_ms() - t0, rc);
    pctx_release(p);
    return 0;
}

/* ---- track: cputrack's way ---- */

static cpc_t *cpc;
static unsigned tr_msec;
static int tr_ticks;
#define SLOTS 64
static struct slot {
    id_t lwp;
    cpc_set_t *set;
    cpc_buf_t *buf;
} slots[SLOTS];

static struct slot *slot_of(id_t lwp, int make) {
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].set != NULL && slots[i].lwp == lwp) return &slots[i];
    if (make)
        for (int i = 0; i < SLOTS; i++)
            if (slots[i].set == NULL) return &slots[i];
    return NULL;
}

static int tr_init(pctx_t *p, pid_t pid, id_t lwp, void *arg) {
    (void)arg;
    struct slot *s = slot_of(lwp, 1);
    if (s == NULL) return -1;
    s->lwp = lwp;
    if ((s->set = cpc_set_create(cpc)) == NULL ||
        cpc_set_add_request(cpc, s->set, "page-faults", 0, CPC_COUNT_USER, 0, NULL) != 0 ||
        (s->buf = cpc_buf_create(cpc, s->set)) == NULL ||
        cpc_bind_pctx(cpc, p, lwp, s->set, 0) != 0) {
        say("init_lwp #%d #%d: cannot bind: %s", (int)pid, (int)lwp, strerror(errno));
        return -1;
    }
    say("init #%d %d", (int)pid, (int)lwp);
    return 0;
}

static int tr_tick(pctx_t *p, pid_t pid, id_t lwp, void *arg) {
    (void)p; (void)pid; (void)arg;
    struct slot *s = slot_of(lwp, 0);
    if (s == NULL || cpc_set_sample(cpc, s->set, s->buf) != 0) return -1;
    tr_ticks++;
    return 0;
}

static int tr_fini(pctx_t *p, pid_t pid, id_t lwp, void *arg) {
    (void)p; (void)arg;
    struct slot *s = slot_of(lwp, 0);
    uint64_t v = 0;
    if (s == NULL || cpc_set_sample(cpc, s->set, s->buf) != 0 ||
        cpc_buf_get(cpc, s->buf, 0, &v) != 0 || cpc_unbind(cpc, s->set) != 0)
        return -1;
    say("fini #%d %d faults %" PRIu64, (int)pid, (int)lwp, v);
    cpc_buf_destroy(cpc, s->buf);
    cpc_set_destroy(cpc, s->set);
    s->set = NULL;
    return 0;
}

static int tr_exec(pctx_t *p, pid_t pid, id_t lwp, char *cmd, void *arg) {
    (void)p; (void)arg;
    say("exec #%d %d %s", (int)pid, (int)lwp, base(cmd));
    return 0;
}

static void tr_exit(pctx_t *p, pid_t pid, id_t lwp, int status, void *arg) {
    (void)p; (void)lwp; (void)arg;
    say("exit #%d %d ticks %d", (int)pid, status, tr_ticks);
}

static void tr_fork(pctx_t *child, pid_t ppid, id_t cpid, pid_t lwp, void *arg);

static int tr_events(pctx_t *p) {
    return pctx_set_events(p, PCTX_INIT_LWP_EVENT, tr_init, PCTX_FINI_LWP_EVENT, tr_fini,
                           PCTX_SYSC_EXEC_EVENT, tr_exec, PCTX_SYSC_EXIT_EVENT, tr_exit,
                           PCTX_SYSC_FORK_EVENT, tr_fork, PCTX_NULL_EVENT);
}

/* In the copy: the parent's sets belong to the parent's run; start afresh for the child. */
static void tr_fork(pctx_t *child, pid_t ppid, id_t cpid, pid_t lwp, void *arg) {
    (void)arg;
    who = "c";
    memset(slots, 0, sizeof slots);
    tr_ticks = 0;
    say("fork #%d #%d %d", (int)ppid, (int)cpid, (int)lwp);
    if (tr_events(child) != 0) say("pctx_set_events failed");
    say("pctx_run %d", pctx_run(child, tr_msec, 0, tr_tick));
}

static int track(int argc, char **argv) {
    if (argc < 2) return 2;
    tr_msec = (unsigned)atoi(argv[0]);
    if ((cpc = cpc_open(CPC_VER_CURRENT)) == NULL) return 2;
    pctx_t *p = pctx_create(argv[1], &argv[1], NULL, 0, NULL);
    if (p == NULL || tr_events(p) != 0) return 2;
    say("pctx_run %d", pctx_run(p, tr_msec, 0, tr_tick));
    pctx_release(p);
    return 0;
}

/* ---- create, capture: the handle or the errno ---- */

static const char *errno_name(int e) {
    switch (e) {
    case EACCES: return "EACCES";
    case ENOENT: return "ENOENT";
    case ESRCH: return "ESRCH";
    case EPERM: return "EPERM";
    default: return strerror(e);
    }
}

static int create_or_capture(const char *mode, int argc, char **argv) {
    if (argc < 1) return 2;
    errno = 0;
    int create = strcmp(mode, "create") == 0;
    pctx_t *p = create ? pctx_create(argv[0], &argv[0], NULL, 0, NULL)
                       : pctx_capture((pid_t)atoi(argv[0]), NULL, 0, NULL);
    if (p == NULL) {
        say("pctx_%s NULL %s", mode, errno_name(errno));
        return 0;
    }
    say("pctx_%s handle", mode);
    pctx_release(p);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "seq") == 0 && argc > 2) return seq(argc - 2, argv + 2);
    if (strcmp(mode, "ticks") == 0) return ticks(argc - 2, argv + 2, 0);
    if (strcmp(mode, "terminate") == 0) return ticks(argc - 2, argv + 2, 1);
    if (strcmp(mode, "track") == 0) return track(argc - 2, argv + 2);
    if (strcmp(mode, "create") == 0 || strcmp(mode, "capture") == 0)
        return create_or_capture(mode, argc - 2, argv + 2);
    fprintf(stderr, "usage: %s seq|ticks|terminate|track|create|capture ...\n", argv[0]);
    return 2;
}
