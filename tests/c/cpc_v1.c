/* libcpc version 1 against its pages (cpc_version, cpc_getcpuver, cpc_strtoevent, cpc_event,
 * cpc_event_diff, cpc_access, cpc_bind_event, cpc_count_usr_events, cpc_pctx_bind_event,
 * cpc_seterrfn, cpc_shared_open), run by capi/tests/cpc_v1.rs.
 * usage: cpc_v1 BACKEND TEST
 *   BACKEND: us3 (sim:ultrasparc), us2 (sim:ultrasparc2), p4 (sim:pentium4), perf (software
 *            events); on the emulated PMUs every count is exact (perfcompat_sim_advance)
 *   TEST: describe translate count overflow modes errors threads shared pctx inherit
 * cpc_v1 touch N: touch N fresh pages and exit (the pctx test's target).
 * Prints "N failures". */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <libcpc.h>
#include <libpctx.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "perfcompat.h"

static int fails;
#define CHECK(c)                                                                          \
    do {                                                                                  \
        if (!(c)) {                                                                       \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                  \
            fails++;                                                                      \
        }                                                                                 \
    } while (0)

/* What each backend counts with: the cpuver, an event specification, its canonical form,
 * the events to advance on PIC0 and PIC1 (emulated), whether overflows interrupt. */
struct config {
    const char *tag;
    int cpuver;
    const char *cciname;
    const char *spec, *canonical;
    const char *ev0, *ev1;
    int sim, overflow;
} configs[] = {
    {"us3", CPC_ULTRA3_PLUS, "UltraSPARC III+ & IV", "EC_ref,pic1=IC_miss",
     "pic0=EC_ref,pic1=IC_miss", "EC_ref", "IC_miss", 1, 1},
    {"us2", CPC_ULTRA2, "UltraSPARC I&II", "pic0=EC_ref,pic1=EC_hit",
     "pic0=EC_ref,pic1=EC_hit", "EC_ref", "EC_hit", 1, 0},
    {"p4", CPC_PENTIUM4, "Pentium 4", "pic0=instr_retired,emask0=0x3,pic1=branch_retired,emask1=12",
     "pic0=instr_retired,pic1=branch_retired,emask0=0x3,emask1=0xc", "instr_retired",
     "branch_retired", 1, 1},
    {"perf", CPC_PERFCOMPAT_HOST, NULL, "pic0=page-faults,pic1=task-clock",
     "pic0=page-faults,pic1=task-clock", "page-faults", "task-clock", 0, 1},
};
static struct config *cf;

/* The error function: the last call's name and formatted message. */
static char last_fn[64], last_msg[512];
static int errfn_calls;
static void errfn(const char *fn, const char *fmt, va_list ap) {
    snprintf(last_fn, sizeof last_fn, "%s", fn);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    errfn_calls++;
    errno = 12345; /* the library restores errno */
}

/* A failing call: -1 (or NULL), errno, the function and the message (a prefix of it). */
#define FAILS(call, want_errno, fn, msg)                                                  \
    do {                                                                                  \
        int calls = errfn_calls;                                                          \
        errno = 0;                                                                        \
        CHECK((call));                                                                    \
        CHECK(errno == (want_errno));                                                     \
        CHECK(errfn_calls == calls + 1);                                                  \
        CHECK(strcmp(last_fn, (fn)) == 0);                                                \
        if (strncmp(last_msg, (msg), strlen(msg)) != 0) {                                 \
            fprintf(stderr, "FAIL %s:%d: message '%s', want '%s'\n", __FILE__, __LINE__,   \
                    last_msg, (msg));                                                     \
            fails++;                                                                      \
        }                                                                                 \
    } while (0)

/* A call that fails as Solaris's bare system call does: -1 (or the check) and errno, with
 * nothing told to the error function (issue 45 item 5). */
#define QUIET(call, want_errno)                                                           \
    do {                                                                                  \
        int calls = errfn_calls;                                                          \
        errno = 0;                                                                        \
        CHECK((call));                                                                    \
        CHECK(errno == (want_errno));                                                     \
        CHECK(errfn_calls == calls);                                                      \
    } while (0)

/* Fresh pages to touch (page faults on perf). */
static char *pages;
static size_t page_size, next_page, npages = 8192;
static void touch(size_t n) {
    for (size_t i = 0; i < n && next_page < npages; i++) pages[page_size * next_page++] = 1;
}

/* n events of PIC `pic`'s event: injected on the emulated PMUs, page faults on perf. */
static void advance(int pic, uint64_t n) {
    if (cf->sim)
        CHECK(perfcompat_sim_advance(pic == 0 ? cf->ev0 : cf->ev1, n) >= 0);
    else if (pic == 0)
        touch((size_t)n);
}

static cpc_event_t event_of(const char *spec) {
    cpc_event_t ev;
    CHECK(cpc_strtoevent(cf->cpuver, spec, &ev) == 0);
    return ev;
}

/* ---- describe: cpc_version, cpc_getcpuver and friends, cpc_access ---- */

struct walk { int calls, bad_regno; const char *want; int found; uint8_t bits; };
static void walker(void *arg, int regno, const char *name, uint8_t bits) {
    struct walk *w = arg;
    w->calls++;
    if (regno != 0) w->bad_regno++;
    if (strcmp(name, w->want) == 0) { w->found++; w->bits = bits; }
}

static void describe(void) {
    CHECK(cpc_version(CPC_VER_CURRENT) == CPC_VER_CURRENT);
    CHECK(cpc_version(CPC_VER_NONE) == CPC_VER_CURRENT);
    CHECK(cpc_version(1) == 1);
    CHECK(cpc_version(3) == CPC_VER_NONE);
    CHECK(cpc_getcpuver() == cf->cpuver);
    CHECK(cpc_access() == 0);
    CHECK(cpc_getnpic(cf->cpuver) == 2);
    const char *name = cpc_getcciname(cf->cpuver);
    CHECK(name != NULL);
    if (name && cf->cciname) CHECK(strcmp(name, cf->cciname) == 0);
    /* The same name as version 2's. */
    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    CHECK(cpc != NULL);
    if (cpc && name) CHECK(strcmp(name, cpc_cciname(cpc)) == 0);
    if (cpc) cpc_close(cpc);
    const char *ref = cpc_getcpuref(cf->cpuver);
    CHECK(ref != NULL && strlen(ref) > 10);
    const char *usage = cpc_getusage(cf->cpuver);
    CHECK(usage != NULL && strncmp(usage, "pic0=<event0>,pic1=<event1> [,sys", 33) == 0);
    if (strcmp(cf->tag, "p4") == 0) CHECK(strstr(usage, "[,emask[0|1]=<value>]") != NULL);
    struct walk w = {0, 0, cf->ev0, 0, 0};
    cpc_walk_names(cf->cpuver, 0, &w, walker);
    CHECK(w.calls > 1 && w.bad_regno == 0 && w.found == 1);
    /* The %pcr select code of EC_ref on both UltraSPARC models. */
    if (cf->cpuver == CPC_ULTRA2 || cf->cpuver == CPC_ULTRA3_PLUS) CHECK(w.bits == 0xc);
    /* Another model's tables describe it too (translation only). */
    if (cf->cpuver != CPC_ULTRA2) CHECK(strcmp(cpc_getcciname(CPC_ULTRA2), "UltraSPARC I&II") == 0);
    /* An unknown cpuver or PIC: nothing called, silently. */
    struct walk none = {0, 0, "", 0, 0};
    cpc_walk_names(cf->cpuver, 2, &none, walker);
    cpc_walk_names(4242, 0, &none, walker);
    CHECK(none.calls == 0);
}

/* ---- translate: cpc_strtoevent, cpc_eventtostr, cpc_event_accum, cpc_event_diff ---- */

static void translate(void) {
    cpc_event_t ev;
    memset(&ev, 0x55, sizeof ev);
    CHECK(cpc_strtoevent(cf->cpuver, cf->spec, &ev) == 0);
    CHECK(ev.ce_cpuver == cf->cpuver && ev.ce_hrt == 0 && ev.ce_tsc == 0);
    CHECK(ev.ce_pic[0] == 0 && ev.ce_pic[1] == 0);
    char *s = cpc_eventtostr(&ev);
    CHECK(s != NULL && strcmp(s, cf->canonical) == 0);
    if (s && strcmp(s, cf->canonical) != 0) fprintf(stderr, "eventtostr: %s\n", s);
    /* The canonical string gives the same event back. */
    cpc_event_t again;
    CHECK(s && cpc_strtoevent(cf->cpuver, s, &again) == 0 && again.ce_pcr == ev.ce_pcr);
    free(s);
    if (cf->cpuver == CPC_ULTRA2) {
        /* A %pcr image: EC_ref and EC_hit are select 0xc on PIC0 (bit 4) and PIC1 (bit 11),
         * user mode (bit 2); the x86 names alias the same bytes. */
        CHECK(ev.ce_pcr == (0xcu << 4 | 0xcu << 11 | 1u << 2));
        CHECK(ev.ce_cesr == (uint32_t)ev.ce_pcr && &ev.ce_tick == &ev.ce_tsc);
        cpc_event_t sys = event_of("EC_hit,EC_ref,nouser,sys");
        CHECK(sys.ce_pcr == (0xcu << 4 | 0xcu << 11 | 1u << 1));
        s = cpc_eventtostr(&sys);
        CHECK(s && strcmp(s, "pic0=EC_ref,pic1=EC_hit,nouser,sys") == 0);
        free(s);
    }
    CHECK(sizeof(cpc_event_t) == 48 && offsetof(cpc_event_t, ce_pic) == 24);
    /* accum: counts and ticks add, the later time wins; diff: after - before. */
    cpc_event_t a = ev, b = ev, d;
    a.ce_hrt = 100; a.ce_tsc = 10; a.ce_pic[0] = 5; a.ce_pic[1] = UINT64_MAX;
    b.ce_hrt = 300; b.ce_tsc = 7; b.ce_pic[0] = 2; b.ce_pic[1] = 2;
    cpc_event_accum(&a, &b);
    CHECK(a.ce_hrt == 300 && a.ce_tsc == 17 && a.ce_pic[0] == 7 && a.ce_pic[1] == 1);
    b.ce_hrt = 50;
    cpc_event_accum(&a, &b);
    CHECK(a.ce_hrt == 300);
    CHECK(a.ce_tsc == 24 && a.ce_pic[0] == 9 && a.ce_pic[1] == 3);
    cpc_event_diff(&d, &a, &b);
    CHECK(d.ce_hrt == 300 && d.ce_tsc == 17 && d.ce_pic[0] == 7 && d.ce_pic[1] == 1);
    b.ce_pic[1] = 4;
    cpc_event_diff(&d, &a, &b);
    CHECK(d.ce_pic[1] == UINT64_MAX);
    cpc_event_diff(&a, &a, &a);
    CHECK(a.ce_pic[0] == 0 && a.ce_pic[1] == 0 && a.ce_tsc == 0);
}

/* ---- count: cpc_bind_event, cpc_take_sample, cpc_rele ---- */

static void count(void) {
    cpc_event_t ev = event_of(cf->spec), before, after, diff;
    ev.ce_pic[0] = 1000;
    ev.ce_pic[1] = 0;
    CHECK(cpc_bind_event(&ev, 0) == 0);
    CHECK(cpc_take_sample(&before) == 0);
    CHECK(before.ce_cpuver == cf->cpuver && before.ce_pcr == ev.ce_pcr);
    if (cf->sim) CHECK(before.ce_pic[0] == 1000 && before.ce_pic[1] == 0);
    advance(0, 100);
    advance(1, 7);
    CHECK(cpc_take_sample(&after) == 0);
    cpc_event_diff(&diff, &after, &before);
    CHECK(after.ce_hrt >= before.ce_hrt && diff.ce_hrt == after.ce_hrt);
    if (cf->sim) {
        CHECK(diff.ce_pic[0] == 100 && diff.ce_pic[1] == 7);
    } else {
        CHECK(diff.ce_pic[0] >= 100 && diff.ce_pic[0] < 200);
        CHECK(diff.ce_pic[1] > 0); /* task-clock: nanoseconds */
        CHECK(diff.ce_tsc > 0);
    }
    /* The page's Example 1 loop: samples around each piece of work. */
    for (int iter = 1; iter <= 5; iter++) {
        CHECK(cpc_take_sample(&before) == 0);
        advance(0, (uint64_t)iter * 10);
        CHECK(cpc_take_sample(&after) == 0);
        uint64_t d0 = after.ce_pic[0] - before.ce_pic[0];
        if (cf->sim) CHECK(d0 == (uint64_t)iter * 10);
        else CHECK(d0 >= (uint64_t)iter * 10);
    }
    /* A second bind starts again from its presets. */
    ev.ce_pic[0] = 5;
    CHECK(cpc_bind_event(&ev, 0) == 0);
    advance(0, 3);
    CHECK(cpc_take_sample(&after) == 0);
    if (cf->sim) CHECK(after.ce_pic[0] == 8);
    CHECK(cpc_rele() == 0);
    errno = 0;
    CHECK(cpc_take_sample(&after) == -1 && errno == EINVAL);
    CHECK(cpc_rele() == 0);
    /* A NULL event releases too. */
    CHECK(cpc_bind_event(&ev, 0) == 0);
    CHECK(cpc_bind_event(NULL, 0) == 0);
    CHECK(cpc_take_sample(&after) == -1);
}

/* ---- overflow: CPC_BIND_EMT_OVF ---- */

#define PRESET0 (UINT64_MAX - UINT64_C(999))
static volatile sig_atomic_t emts, bad_emts, rebind;
static cpc_event_t in_handler;
static void emt_handler(int sig, siginfo_t *sip, void *uc) {
    (void)uc;
    if (sig != SIGEMT || sip->si_code != EMT_CPCOVF) { bad_emts++; return; }
    emts++;
    if (cpc_take_sample(&in_handler) == -1) bad_emts++;
    if (rebind) {
        cpc_event_t next = in_handler;
        next.ce_pic[0] = PRESET0; /* PIC1 goes on from its value */
        if (cpc_bind_event(&next, CPC_BIND_EMT_OVF) == -1) bad_emts++;
    }
}

static void overflow(void) {
    cpc_event_t ev = event_of(cf->spec), s;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = emt_handler;
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    CHECK(sigaction(SIGEMT, &sa, NULL) == 0);
    ev.ce_pic[0] = PRESET0;
    ev.ce_pic[1] = 0;
    if (!cf->overflow) {
        /* The UltraSPARC I&II cannot interrupt on overflow. */
        errno = 0;
        CHECK(cpc_bind_event(&ev, CPC_BIND_EMT_OVF) == -1 && errno == ENOTSUP);
        return;
    }
    /* One SIGEMT at the 1000th event; the counts stay frozen at the wrap. */
    CHECK(cpc_bind_event(&ev, CPC_BIND_EMT_OVF) == 0);
    if (cf->sim) {
        advance(0, 999);
        advance(1, 4);
        CHECK(emts == 0);
        advance(0, 1);
        CHECK(emts == 1);
        CHECK(in_handler.ce_pic[0] == 0 && in_handler.ce_pic[1] == 4);
        advance(0, 500);
        advance(1, 6);
        CHECK(cpc_take_sample(&s) == 0 && s.ce_pic[0] == 0 && s.ce_pic[1] == 4);
    } else {
        for (int i = 0; i < 1500 && emts == 0; i++) advance(0, 1);
        CHECK(emts == 1);
        CHECK(in_handler.ce_pic[0] == 0);
        advance(0, 300);
        CHECK(cpc_take_sample(&s) == 0 && s.ce_pic[0] == 0 && s.ce_pic[1] == in_handler.ce_pic[1]);
    }
    CHECK(emts == 1 && bad_emts == 0);
    /* A rebind in the handler: counting goes on from the presets it gives. */
    emts = 0;
    rebind = 1;
    CHECK(cpc_bind_event(&ev, CPC_BIND_EMT_OVF) == 0);
    if (cf->sim) {
        advance(1, 3);
        advance(0, 2500); /* SIGEMTs at the 1000th and 2000th events, inside the call */
        CHECK(emts == 2);
        advance(1, 2);
        CHECK(cpc_take_sample(&s) == 0);
        CHECK(s.ce_pic[0] == PRESET0 + 500 && s.ce_pic[1] == 5);
    } else {
        for (int i = 0; i < 3000 && emts < 2; i++) advance(0, 1);
        CHECK(emts == 2);
        CHECK(cpc_take_sample(&s) == 0 && s.ce_pic[0] >= PRESET0 && s.ce_pic[0] < PRESET0 + 100);
    }
    CHECK(bad_emts == 0);
    rebind = 0;
    CHECK(cpc_bind_event(NULL, 0) == 0);
}

/* ---- modes: cpc_count_usr_events, cpc_count_sys_events ---- */

static void modes(void) {
    cpc_event_t ev = event_of(cf->spec), s;
    errno = 0;
    CHECK(cpc_count_usr_events(1) == -1 && errno == EINVAL); /* no context */
    CHECK(cpc_bind_event(&ev, 0) == 0);
    advance(0, 10);
    CHECK(cpc_count_usr_events(0) == 0);
    CHECK(cpc_take_sample(&s) == 0);
    char *str = cpc_eventtostr(&s);
    CHECK(str && strstr(str, "nouser") != NULL);
    free(str);
    uint64_t at = s.ce_pic[0];
    if (cf->sim) CHECK(at == 10);
    advance(0, 20); /* not counted: the emulation has no kernel mode */
    CHECK(cpc_take_sample(&s) == 0);
    if (cf->sim) CHECK(s.ce_pic[0] == at);
    CHECK(cpc_count_usr_events(1) == 0);
    advance(0, 5);
    CHECK(cpc_take_sample(&s) == 0);
    if (cf->sim) CHECK(s.ce_pic[0] == at + 5);
    else CHECK(s.ce_pic[0] >= at + 5);
    CHECK(cpc_count_sys_events(1) == 0);
    CHECK(cpc_take_sample(&s) == 0);
    str = cpc_eventtostr(&s);
    CHECK(str && strstr(str, "sys") != NULL);
    free(str);
    CHECK(cpc_count_sys_events(0) == 0);
    if (cf->overflow) {
        ev.ce_pic[0] = PRESET0;
        CHECK(cpc_bind_event(&ev, CPC_BIND_EMT_OVF) == 0);
        errno = 0;
        CHECK(cpc_count_sys_events(1) == -1 && errno == EINVAL);
    }
    CHECK(cpc_rele() == 0);
}

/* ---- errors: every call with bad input ---- */

static void errors(void) {
    cpc_event_t ev = event_of(cf->spec), bad;
    char other[256];
    FAILS(cpc_strtoevent(cf->cpuver, NULL, &ev) == -1, EINVAL, "strtoevent", "NULL event specification");
    FAILS(cpc_strtoevent(cf->cpuver, cf->spec, NULL) == -1, EINVAL, "strtoevent", "NULL cpc_event_t");
    FAILS(cpc_strtoevent(cf->cpuver, "pic0=no_such_event,pic1=no_such_event", &bad) == -1, EINVAL,
          "strtoevent", "%pic0 cannot measure event 'no_such_event' on this cpu\n");
    snprintf(other, sizeof other, "pic0=%s", cf->ev0);
    FAILS(cpc_strtoevent(cf->cpuver, other, &bad) == -1, EINVAL, "strtoevent",
          "two events must be specified\n");
    FAILS(cpc_strtoevent(cf->cpuver, "pic0", &bad) == -1, EINVAL, "strtoevent", "missing 'pic0' value\n");
    snprintf(other, sizeof other, "%s,bogus=1", cf->spec);
    FAILS(cpc_strtoevent(cf->cpuver, other, &bad) == -1, EINVAL, "strtoevent", "bad token 'bogus'\n");
    FAILS(cpc_strtoevent(4242, cf->spec, &bad) == -1, EINVAL, "strtoevent",
          "cpuver 4242 is not a processor this library knows");
    FAILS(cpc_getcciname(4242) == NULL, EINVAL, "getcciname", "cpuver 4242");
    FAILS(cpc_getcpuref(4242) == NULL, EINVAL, "getcpuref", "cpuver 4242");
    FAILS(cpc_getusage(4242) == NULL, EINVAL, "getusage", "cpuver 4242");
    FAILS(cpc_getnpic(4242) == 0, EINVAL, "getnpic", "cpuver 4242");
    FAILS(cpc_eventtostr(NULL) == NULL, EINVAL, "eventtostr", "NULL cpc_event_t");
    QUIET(cpc_take_sample(&bad) == -1, EINVAL);
    FAILS(cpc_take_sample(NULL) == -1, EINVAL, "take_sample", "NULL cpc_event_t");
    QUIET(cpc_count_usr_events(1) == -1, EINVAL);
    QUIET(cpc_count_sys_events(0) == -1, EINVAL);
    /* An event of another processor, control fields cpc_strtoevent did not make, bad flags. */
    bad = ev;
    bad.ce_cpuver = cf->cpuver == CPC_ULTRA2 ? CPC_ULTRA3_PLUS : CPC_ULTRA2;
    FAILS(cpc_bind_event(&bad, 0) == -1, EINVAL, "bind_event", "the event is for cpuver");
    if (cf->cpuver != CPC_ULTRA2 && cf->cpuver != CPC_ULTRA3_PLUS) {
        bad = ev;
        bad.ce_pes[0] = 0x1234;
        FAILS(cpc_bind_event(&bad, 0) == -1, EINVAL, "bind_event", "the event's control fields");
        FAILS(cpc_eventtostr(&bad) == NULL, EINVAL, "eventtostr", "the event's control fields");
    }
    FAILS(cpc_bind_event(&ev, 0x100) == -1, EINVAL, "bind_event", "flags 0x100");
    FAILS(cpc_pctx_bind_event(NULL, 1, &ev, 0) == -1, EINVAL, "pctx_bind_event", "");
    FAILS(cpc_pctx_take_sample(NULL, 1, &ev) == -1, EINVAL, "pctx_take_sample", "");
    FAILS(cpc_pctx_rele(NULL, 1) == -1, EINVAL, "pctx_rele", "");
    FAILS(cpc_pctx_invalidate(NULL, 1) == -1, EINVAL, "pctx_invalidate", "");
    FAILS(cpc_shared_bind_event(0, &ev, 0) == -1, EINVAL, "shared_bind_event", "descriptor 0");
    FAILS(cpc_shared_take_sample(-1, &ev) == -1, EINVAL, "shared_take_sample", "descriptor -1");
    FAILS(cpc_shared_rele(12345) == -1, EINVAL, "shared_rele", "descriptor 12345");
    /* NULL arguments of the void functions change nothing. */
    FAILS((cpc_event_accum(NULL, &ev), 1), EINVAL, "event_accum", "NULL accum");
    FAILS((cpc_event_diff(&ev, &ev, NULL), 1), EINVAL, "event_diff", "NULL before");
    /* The default report (no error function): "libcpc: <fn>: <message>" on standard error,
     * which the test reads. */
    cpc_seterrfn(NULL);
    errno = 0;
    CHECK(cpc_strtoevent(cf->cpuver, "pic0=no_such_event", &bad) == -1 && errno == EINVAL);
    cpc_seterrfn(errfn);
}

/* ---- quiet: without a context, cpc_take_sample, cpc_count_usr_events and
 * cpc_count_sys_events are Solaris's bare system calls: -1 and EINVAL, nothing said, to the
 * error function or (the default) on standard error, which the test reads (issue 45 item 5). */
static void quiet(void) {
    cpc_event_t ev, s;
    CHECK(cpc_strtoevent(cf->cpuver, cf->spec, &ev) == 0);
    for (int round = 0; round < 2; round++) {
        /* Round 0 with the program's error function, round 1 with the default one. */
        if (round == 1) cpc_seterrfn(NULL);
        QUIET(cpc_take_sample(&s) == -1, EINVAL);
        QUIET(cpc_count_usr_events(0) == -1, EINVAL);
        QUIET(cpc_count_usr_events(1) == -1, EINVAL);
        QUIET(cpc_count_sys_events(0) == -1, EINVAL);
        QUIET(cpc_count_sys_events(1) == -1, EINVAL);
        /* After a context is released, the same. */
        CHECK(cpc_bind_event(&ev, 0) == 0);
        CHECK(cpc_count_usr_events(1) == 0);
        CHECK(cpc_take_sample(&s) == 0);
        CHECK(cpc_rele() == 0);
        QUIET(cpc_take_sample(&s) == -1, EINVAL);
        QUIET(cpc_count_usr_events(0) == -1, EINVAL);
    }
    cpc_seterrfn(errfn);
}

/* ---- threads: version 1 and version 2 on different threads of one process ---- */

static pthread_barrier_t barrier;
static void *v2_thread(void *arg) {
    (void)arg;
    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    cpc_set_t *set = cpc ? cpc_set_create(cpc) : NULL;
    int i0 = set ? cpc_set_add_request(cpc, set, cf->ev0, 0, CPC_COUNT_USER, 0, NULL) : -1;
    CHECK(i0 == 0 && cpc_bind_curlwp(cpc, set, 0) == 0);
    cpc_buf_t *buf = cpc_buf_create(cpc, set);
    pthread_barrier_wait(&barrier);
    advance(0, 40);
    pthread_barrier_wait(&barrier);
    uint64_t v = 0;
    CHECK(cpc_set_sample(cpc, set, buf) == 0 && cpc_buf_get(cpc, buf, 0, &v) == 0);
    if (cf->sim) CHECK(v == 40);
    else CHECK(v >= 40);
    cpc_close(cpc);
    return NULL;
}

static void threads(void) {
    pthread_t t;
    cpc_event_t ev = event_of(cf->spec), s;
    pthread_barrier_init(&barrier, NULL, 2);
    CHECK(pthread_create(&t, NULL, v2_thread, NULL) == 0);
    CHECK(cpc_bind_event(&ev, 0) == 0);
    pthread_barrier_wait(&barrier);
    advance(0, 25);
    pthread_barrier_wait(&barrier);
    CHECK(cpc_take_sample(&s) == 0);
    if (cf->sim) CHECK(s.ce_pic[0] == 25);
    else CHECK(s.ce_pic[0] >= 25 && s.ce_pic[0] < 40);
    pthread_join(t, NULL);
    /* Binding version 2 on this thread releases version 1's context (one per LWP). */
    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    cpc_set_t *set = cpc_set_create(cpc);
    CHECK(cpc_set_add_request(cpc, set, cf->ev0, 0, CPC_COUNT_USER, 0, NULL) == 0);
    CHECK(cpc_bind_curlwp(cpc, set, 0) == 0);
    CHECK(cpc_take_sample(&s) == -1 && errno == EINVAL);
    /* And the other way round. */
    CHECK(cpc_bind_event(&ev, 0) == 0);
    cpc_buf_t *buf = cpc_buf_create(cpc, set);
    CHECK(cpc_set_sample(cpc, set, buf) == -1 && errno == EINVAL);
    CHECK(cpc_take_sample(&s) == 0);
    cpc_close(cpc);
    CHECK(cpc_rele() == 0);
}

/* ---- shared: cpc_shared_open on the CPU this thread is bound to ---- */

static void shared(void) {
    cpc_event_t ev = event_of(cf->spec), s0, s1;
    int fd = cpc_shared_open();
    CHECK(fd >= 0);
    /* Not bound to one processor yet. */
    cpu_set_t all, one;
    CHECK(sched_getaffinity(0, sizeof all, &all) == 0);
    if (CPU_COUNT(&all) > 1)
        FAILS(cpc_shared_bind_event(fd, &ev, 0) == -1, EINVAL, "shared_bind_event", "the calling thread may run on");
    FAILS(cpc_shared_bind_event(fd, &ev, CPC_BIND_EMT_OVF) == -1 || CPU_COUNT(&all) == 1, EINVAL,
          "shared_bind_event", "");
    int cpu = sched_getcpu();
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
    FAILS(cpc_shared_bind_event(fd, &ev, CPC_BIND_EMT_OVF) == -1, EINVAL, "shared_bind_event", "flags 0x2");
    CHECK(cpc_shared_bind_event(fd, &ev, 0) == 0);
    CHECK(cpc_shared_take_sample(fd, &s0) == 0);
    advance(0, 64);
    CHECK(cpc_shared_take_sample(fd, &s1) == 0);
    CHECK(s1.ce_cpuver == cf->cpuver);
    if (cf->sim) CHECK(s1.ce_pic[0] - s0.ce_pic[0] == 64);
    else CHECK(s1.ce_pic[0] - s0.ce_pic[0] >= 64);
    CHECK(cpc_shared_rele(fd) == 0);
    FAILS(cpc_shared_take_sample(fd, &s1) == -1, EINVAL, "shared_take_sample", "");
    cpc_shared_close(fd);
    FAILS(cpc_shared_rele(fd) == -1, EINVAL, "shared_rele", "descriptor");
    CHECK(sched_setaffinity(0, sizeof all, &all) == 0);
}

/* ---- pctx: counting another process's LWP (perf only: the emulated PMUs count their own
 * process's injections) ---- */

static cpc_event_t pctx_ev;
static uint64_t pctx_faults;
static int pctx_calls;
static int on_init(pctx_t *p, pid_t pid, id_t lwp, void *arg) {
    (void)pid; (void)arg;
    CHECK(cpc_pctx_bind_event(p, lwp, &pctx_ev, 1) == -1 && errno == EINVAL);
    CHECK(cpc_pctx_bind_event(p, lwp, &pctx_ev, 0) == 0);
    CHECK(cpc_pctx_bind_event(p, lwp + 100, &pctx_ev, 0) == -1 && errno == ESRCH);
    pctx_calls++;
    return 0;
}
static int on_fini(pctx_t *p, pid_t pid, id_t lwp, void *arg) {
    cpc_event_t s;
    (void)pid; (void)arg;
    CHECK(cpc_pctx_take_sample(p, lwp, &s) == 0);
    pctx_faults = s.ce_pic[0];
    CHECK(s.ce_cpuver == cf->cpuver && s.ce_pcr == pctx_ev.ce_pcr);
    CHECK(cpc_pctx_invalidate(p, lwp) == 0);
    CHECK(cpc_pctx_take_sample(p, lwp, &s) == -1 && errno == EAGAIN);
    CHECK(cpc_pctx_rele(p, lwp) == 0);
    CHECK(cpc_pctx_take_sample(p, lwp, &s) == -1 && errno == EINVAL);
    pctx_calls++;
    return 0;
}

static void pctx(const char *self) {
    char *argv[] = {(char *)self, "touch", "300", NULL};
    pctx_ev = event_of(cf->spec);
    pctx_t *p = pctx_create(self, argv, NULL, 0, NULL);
    CHECK(p != NULL);
    if (!p) return;
    CHECK(pctx_set_events(p, PCTX_INIT_LWP_EVENT, on_init, PCTX_FINI_LWP_EVENT, on_fini,
                          PCTX_NULL_EVENT) == 0);
    CHECK(pctx_run(p, 0, 0, NULL) == 0);
    pctx_release(p);
    CHECK(pctx_calls == 2);
    CHECK(pctx_faults >= 300 && pctx_faults < 1000);
}

/* ---- inherit: CPC_BIND_LWP_INHERIT with CPC_BIND_EMT_OVF ---- */

static volatile uint64_t child_pic[2];
static volatile int child_emts;
static void child_handler(int sig, siginfo_t *sip, void *uc) {
    cpc_event_t s;
    (void)uc;
    if (sig != SIGEMT || sip->si_code != EMT_CPCOVF) return;
    if (cpc_take_sample(&s) == 0) { child_pic[0] = s.ce_pic[0]; child_pic[1] = s.ce_pic[1]; }
    child_emts++;
    s.ce_pic[0] = 0;
    s.ce_pic[1] = 0;
    CHECK(cpc_bind_event(&s, CPC_BIND_EMT_OVF | CPC_BIND_LWP_INHERIT) == 0);
}
static void *child(void *arg) {
    cpc_event_t s;
    (void)arg;
    /* This LWP took its copy before its start routine; the creator then releases its context
     * (between the two waits): the copy is this LWP's own. */
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    advance(0, 6);
    CHECK(cpc_take_sample(&s) == 0);
    if (cf->sim) CHECK(s.ce_pic[0] == 6);
    return NULL;
}

static void *plain_child(void *arg) {
    cpc_event_t s;
    (void)arg;
    errno = 0;
    CHECK(cpc_take_sample(&s) == -1 && errno == EINVAL);
    return NULL;
}

static void inherit(void) {
    cpc_event_t ev = event_of(cf->spec);
    struct sigaction sa;
    pthread_t t;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = child_handler;
    sa.sa_flags = SA_SIGINFO;
    CHECK(sigaction(SIGEMT, &sa, NULL) == 0);
    ev.ce_pic[0] = PRESET0;
    pthread_barrier_init(&barrier, NULL, 2);
    CHECK(cpc_bind_event(&ev, CPC_BIND_EMT_OVF | CPC_BIND_LWP_INHERIT) == 0);
    CHECK(pthread_create(&t, NULL, child, NULL) == 0);
    pthread_barrier_wait(&barrier);
    CHECK(cpc_rele() == 0);
    pthread_barrier_wait(&barrier);
    pthread_join(t, NULL);
    /* The new LWP's SIGEMT: both counters read UINT64_MAX. */
    CHECK(child_emts == 1 && child_pic[0] == UINT64_MAX && child_pic[1] == UINT64_MAX);
    /* Released before: new threads inherit nothing. */
    child_emts = 0;
    CHECK(pthread_create(&t, NULL, plain_child, NULL) == 0);
    pthread_join(t, NULL);
    CHECK(child_emts == 0);
}

int main(int argc, char **argv) {
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    pages = mmap(NULL, page_size * npages, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED) return 2;
    if (argc == 3 && strcmp(argv[1], "touch") == 0) {
        touch((size_t)atoi(argv[2]));
        return 0;
    }
    if (argc != 3) return 2;
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        if (strcmp(configs[i].tag, argv[1]) == 0) cf = &configs[i];
    if (!cf) return 2;
    cpc_seterrfn(errfn);
    const char *t = argv[2];
    if (strcmp(t, "describe") == 0) describe();
    else if (strcmp(t, "translate") == 0) translate();
    else if (strcmp(t, "count") == 0) count();
    else if (strcmp(t, "overflow") == 0) overflow();
    else if (strcmp(t, "modes") == 0) modes();
    else if (strcmp(t, "errors") == 0) errors();
    else if (strcmp(t, "quiet") == 0) quiet();
    else if (strcmp(t, "threads") == 0) threads();
    else if (strcmp(t, "shared") == 0) shared();
    else if (strcmp(t, "pctx") == 0) pctx(argv[0]);
    else if (strcmp(t, "inherit") == 0) inherit();
    else return 2;
    printf("%s %s: %d failures\n", argv[1], t, fails);
    return fails != 0;
}
