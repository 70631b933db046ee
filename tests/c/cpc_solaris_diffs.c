/* What a program written from Solaris's libcpc man pages and headers still saw differently
 * here (issue 45; capi/tests/cpc_solaris_diffs.rs runs it), one mode per run (argv[1]):
 *   tick      cpc_buf_tick(3CPC): the virtual tick of a set accumulates from the bind; a
 *             cpc_set_restart never starts it again (item 1)
 *   tick-overflows  the same through a SIGEMT handler's samples and restarts (item 1)
 *   sysonly   CPC_COUNT_SYSTEM alone on an event that cannot count system mode alone (the
 *             clocks, and cycles where it is estimated from the task clock) is refused at
 *             cpc_set_add_request with EINVAL and CPC_REQ_INVALID_FLAGS, the reason in the
 *             handler's text; what can count it is accepted (item 2)
 *   names     <libcpc.h> has what Solaris's <sys/cpc_event.h> gave it: CPC_TICKREG(),
 *             CPC_TICKREG_NAME and the UltraSPARC %pcr fields, which decode the ce_pcr that
 *             cpc_strtoevent(3CPC) makes and encode one that cpc_eventtostr reads (item 3)
 *   handler   a handler set with cpc_seterrhndlr gets the explanation in its one message (item 6)
 *   default   the same error without a handler: one line on standard error (item 6)
 *   siaddr    a SIGEMT handler's si_addr is the PC of its ucontext, on every backend (item 9)
 * Prints "<mode>: <n> failures"; exits 0 when there were none. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <libcpc.h>
#include <perfcompat.h>

static int fails;
#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "FAIL %s:%d: %s (errno %d)\n", __FILE__, __LINE__, #c, \
                    errno);                                                       \
            fails++;                                                              \
        }                                                                         \
    } while (0)

/* The last message the handler got, as vfprintf prints it. */
static char seen[1024];
static int seen_sub = -1;
static void handler(const char *fn, int subcode, const char *fmt, va_list ap) {
    int n = snprintf(seen, sizeof seen, "%s: ", fn);
    vsnprintf(seen + n, sizeof seen - (size_t)n, fmt, ap);
    seen_sub = subcode;
}

/* A handle whose errors go to `handler`, or NULL (a failure counted). */
static cpc_t *open_with_handler(void) {
    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    CHECK(cpc != NULL);
    if (cpc != NULL)
        CHECK(cpc_seterrhndlr(cpc, handler) == 0);
    return cpc;
}

/* A set of one request of `event`, notifying `preset` before the wrap, with SIGEMT taken by
 * `fn`; NULL (a failure counted) if the handle cannot be opened. */
static cpc_set_t *notifying_set(cpc_t **cpc, const char *event, uint64_t preset,
                                void (*fn)(int, siginfo_t *, void *)) {
    struct sigaction act;
    cpc_set_t *set;
    *cpc = cpc_open(CPC_VER_CURRENT);
    CHECK(*cpc != NULL);
    if (*cpc == NULL)
        return NULL;
    memset(&act, 0, sizeof act);
    act.sa_sigaction = fn;
    act.sa_flags = SA_SIGINFO;
    CHECK(sigaction(SIGEMT, &act, NULL) == 0);
    set = cpc_set_create(*cpc);
    CHECK(cpc_set_add_request(*cpc, set, event, preset, CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0,
                              NULL) == 0);
    return set;
}

static volatile uint64_t sink;
static void spin(long n) {
    for (long i = 0; i < n; i++)
        sink += (uint64_t)i;
}

/* Item 1: bind, sample twice, cpc_set_restart, sample: the tick goes on growing. */
static void tick(const char *event) {
    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    cpc_set_t *set;
    cpc_buf_t *buf;
    uint64_t t1, t2, t3, t4;
    CHECK(cpc != NULL);
    if (cpc == NULL)
        return;
    set = cpc_set_create(cpc);
    CHECK(set != NULL && cpc_set_add_request(cpc, set, event, 0, CPC_COUNT_USER, 0, NULL) == 0);
    buf = cpc_buf_create(cpc, set);
    CHECK(buf != NULL && cpc_bind_curlwp(cpc, set, 0) == 0);
    spin(20000000);
    CHECK(cpc_set_sample(cpc, set, buf) == 0);
    t1 = cpc_buf_tick(cpc, buf);
    spin(20000000);
    CHECK(cpc_set_sample(cpc, set, buf) == 0);
    t2 = cpc_buf_tick(cpc, buf);
    CHECK(cpc_set_restart(cpc, set) == 0);
    spin(2000000);
    CHECK(cpc_set_sample(cpc, set, buf) == 0);
    t3 = cpc_buf_tick(cpc, buf);
    CHECK(cpc_set_restart(cpc, set) == 0);
    CHECK(cpc_set_restart(cpc, set) == 0);
    CHECK(cpc_set_sample(cpc, set, buf) == 0);
    t4 = cpc_buf_tick(cpc, buf);
    printf("ticks %" PRIu64 " %" PRIu64 " restart %" PRIu64 " restart %" PRIu64 "\n", t1, t2, t3, t4);
    CHECK(t1 > 0 && t2 > t1);
    /* "The number of ticks since the bind": a restart does not take it back. */
    CHECK(t3 > t2);
    CHECK(t4 >= t3);
    CHECK(cpc_unbind(cpc, set) == 0);
    CHECK(cpc_close(cpc) == 0);
}

/* Item 1 through overflows: a SIGEMT handler restarts the set every 100 page faults (the
 * unblocked and the blocked restart paths both); the tick sampled in each handler and after
 * never goes back. */
static cpc_t *ovf_cpc;
static cpc_set_t *ovf_set;
static cpc_buf_t *ovf_buf;
static volatile uint64_t last_tick;
static volatile sig_atomic_t ovf_n, ovf_back;
static void tick_emt(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    (void)si;
    (void)uc;
    if (cpc_set_sample(ovf_cpc, ovf_set, ovf_buf) == 0) {
        uint64_t t = cpc_buf_tick(ovf_cpc, ovf_buf);
        if (t < last_tick)
            ovf_back++;
        last_tick = t;
    }
    ovf_n++;
    cpc_set_restart(ovf_cpc, ovf_set);
}

static void tick_overflows(void) {
    size_t psz = (size_t)sysconf(_SC_PAGESIZE);
    const int pages = 5000;
    char *p;
    uint64_t end;
    ovf_set = notifying_set(&ovf_cpc, "page-faults", UINT64_MAX - 99, tick_emt);
    if (ovf_set == NULL)
        return;
    ovf_buf = cpc_buf_create(ovf_cpc, ovf_set);
    CHECK(ovf_buf != NULL && cpc_bind_curlwp(ovf_cpc, ovf_set, 0) == 0);
    p = mmap(NULL, psz * (size_t)pages, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    for (int k = 0; p != MAP_FAILED && k < pages; k++) {
        ((volatile char *)p)[(size_t)k * psz] = 1;
        spin(2000);
    }
    CHECK(cpc_set_sample(ovf_cpc, ovf_set, ovf_buf) == 0);
    end = cpc_buf_tick(ovf_cpc, ovf_buf);
    printf("overflows %d tick in the last handler %" PRIu64 " at the end %" PRIu64 " went back %d\n",
           (int)ovf_n, (uint64_t)last_tick, end, (int)ovf_back);
    CHECK(ovf_n >= pages / 100 - 1 && ovf_back == 0);
    CHECK(last_tick > 0 && end > last_tick);
    if (p != MAP_FAILED)
        munmap(p, psz * (size_t)pages);
    CHECK(cpc_unbind(ovf_cpc, ovf_set) == 0);
    CHECK(cpc_close(ovf_cpc) == 0);
}

/* Item 2: system mode alone is counted only where it can be, else refused with the reason. */
static void sysonly(int argc, char **argv) {
    cpc_t *cpc = open_with_handler();
    cpc_set_t *set;
    if (cpc == NULL)
        return;
    set = cpc_set_create(cpc);
    /* argv: "-" then the events refused, "+" then the events accepted, "?" then the events
     * refused without a PMU (estimated from the task clock) and accepted with one. */
    const char *cci = cpc_cciname(cpc);
    int no_pmu = cci != NULL && strstr(cci, "no PMU") != NULL;
    int refuse = 1;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "-") == 0 || strcmp(argv[i], "+") == 0 || strcmp(argv[i], "?") == 0) {
            refuse = argv[i][0] == '-' || (argv[i][0] == '?' && no_pmu);
            continue;
        }
        seen[0] = 0;
        seen_sub = -1;
        errno = 0;
        int r = cpc_set_add_request(cpc, set, argv[i], 0, CPC_COUNT_SYSTEM, 0, NULL);
        printf("%s system-only: %d %s", argv[i], r, r < 0 ? seen : "accepted\n");
        if (refuse) {
            CHECK(r == -1 && errno == EINVAL);
            CHECK(seen_sub == CPC_REQ_INVALID_FLAGS);
            CHECK(strstr(seen, "user and system time together") != NULL);
            CHECK(strstr(seen, argv[i]) != NULL);
        } else {
            CHECK(r >= 0);
        }
        /* Both modes together are what the clocks count: accepted. */
        CHECK(cpc_set_add_request(cpc, set, argv[i], 0, CPC_COUNT_USER | CPC_COUNT_SYSTEM, 0,
                                  NULL) >= 0);
    }
    CHECK(cpc_close(cpc) == 0);
}

/* Item 3: the names of <sys/cpc_event.h>, on an UltraSPARC model's version 1 events. */
static void names(void) {
    int cpuver = cpc_getcpuver();
    uint64_t mask0, mask1;
    cpc_event_t ev;
    char *s;
    CHECK(cpc_version(CPC_VER_CURRENT) == CPC_VER_CURRENT);
    if (cpuver == CPC_ULTRA2) {
        mask0 = CPC_ULTRA2_PCR_PIC0_MASK;
        mask1 = CPC_ULTRA2_PCR_PIC1_MASK;
    } else if (cpuver == CPC_ULTRA3_PLUS) {
        mask0 = CPC_ULTRA3_PCR_PIC0_MASK;
        mask1 = CPC_ULTRA3_PCR_PIC1_MASK;
    } else {
        fprintf(stderr, "FAIL: not an UltraSPARC (cpuver %d)\n", cpuver);
        fails++;
        return;
    }
    CHECK(mask0 == 0xf || mask0 == 0x3f);
    CHECK(strcmp(CPC_TICKREG_NAME, "tsc") == 0);
    /* cpc_strtoevent's %pcr, read with the header's fields: IC_ref is PIC0's select 8,
     * Instr_cnt PIC1's 1 (the UltraSPARC manuals' codes). */
    memset(&ev, 0, sizeof ev);
    CHECK(cpc_strtoevent(cpuver, "pic0=IC_ref,pic1=Instr_cnt,sys", &ev) == 0);
    CHECK((ev.ce_pcr >> CPC_ULTRA_PCR_PIC0_SHIFT & mask0) == 8);
    CHECK((ev.ce_pcr >> CPC_ULTRA_PCR_PIC1_SHIFT & mask1) == 1);
    CHECK((ev.ce_pcr >> CPC_ULTRA_PCR_USR & 1) == 1);
    CHECK((ev.ce_pcr >> CPC_ULTRA_PCR_SYS & 1) == 1);
    CHECK((ev.ce_pcr >> CPC_ULTRA_PCR_PRIVPIC & 1) == 0);
    CHECK(cpc_strtoevent(cpuver, "pic0=Cycle_cnt,pic1=Cycle_cnt,nouser", &ev) == 0);
    CHECK((ev.ce_pcr >> CPC_ULTRA_PCR_USR & 1) == 0);
    CHECK((ev.ce_pcr >> CPC_ULTRA_PCR_SYS & 1) == 0);
    /* A %pcr made with the fields, as PAPI's UltraSPARC substrate made its domains. */
    memset(&ev, 0, sizeof ev);
    ev.ce_cpuver = cpuver;
    ev.ce_pcr = (UINT64_C(8) << CPC_ULTRA_PCR_PIC0_SHIFT) | (UINT64_C(1) << CPC_ULTRA_PCR_PIC1_SHIFT) |
                (UINT64_C(1) << CPC_ULTRA_PCR_USR) | (UINT64_C(1) << CPC_ULTRA_PCR_SYS);
    s = cpc_eventtostr(&ev);
    CHECK(s != NULL);
    if (s != NULL) {
        printf("eventtostr %s\n", s);
        CHECK(strstr(s, "pic0=IC_ref") != NULL && strstr(s, "pic1=Instr_cnt") != NULL);
        CHECK(strstr(s, "sys") != NULL && strstr(s, "nouser") == NULL);
        free(s);
    }
    /* CPC_TICKREG: the tick of a sample, where cputrack -t and cpustat -t read it (0 on the
     * emulated PMUs, which have no clock). */
    CHECK(cpc_strtoevent(cpuver, "pic0=Cycle_cnt,pic1=Instr_cnt", &ev) == 0);
    CHECK(cpc_bind_event(&ev, 0) == 0);
    spin(10000000);
    CHECK(cpc_take_sample(&ev) == 0);
    printf("%s %" PRIu64 "\n", CPC_TICKREG_NAME, (uint64_t)CPC_TICKREG(&ev));
    CHECK(CPC_TICKREG(&ev) == ev.ce_tick);
    CHECK(&CPC_TICKREG(&ev) == &ev.ce_tsc);
    CHECK(cpc_rele() == 0);
}

/* Item 6: the handler's one message says why. */
static void handler_text(void) {
    cpc_t *cpc = open_with_handler();
    cpc_set_t *set;
    if (cpc == NULL)
        return;
    set = cpc_set_create(cpc);
    CHECK(cpc_set_add_request(cpc, set, "No_such_event", 0, CPC_COUNT_USER, 0, NULL) == -1);
    printf("handler: %s", seen);
    CHECK(seen_sub == CPC_INVALID_EVENT);
    /* libcpc's text first, then the explanation, in one line. */
    CHECK(strncmp(seen, "cpc_set_add_request: Unknown event: ", 36) == 0);
    CHECK(strstr(seen, "No_such_event") != NULL);
    CHECK(strchr(seen, '\n') == seen + strlen(seen) - 1);
    CHECK(cpc_close(cpc) == 0);
}

/* Item 6 without a handler: the report on standard error (checked by the driver). */
static void default_text(void) {
    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    CHECK(cpc != NULL);
    if (cpc == NULL)
        return;
    CHECK(cpc_set_add_request(cpc, cpc_set_create(cpc), "No_such_event", 0, CPC_COUNT_USER, 0,
                              NULL) == -1);
    CHECK(cpc_close(cpc) == 0);
}

/* Item 9: si_addr against the handler's context. */
static volatile sig_atomic_t nsig, same, differ;
static volatile uintptr_t last_addr, last_pc;
static void emt(int sig, siginfo_t *si, void *ucv) {
    ucontext_t *uc = ucv;
    uintptr_t pc;
    (void)sig;
#if defined(__x86_64__)
    pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    pc = (uintptr_t)uc->uc_mcontext.pc;
#else
    pc = (uintptr_t)si->si_addr;
    (void)uc;
#endif
    nsig++;
    last_addr = (uintptr_t)si->si_addr;
    last_pc = pc;
    if ((uintptr_t)si->si_addr == pc)
        same++;
    else
        differ++;
}

static void siaddr(const char *event) {
    cpc_t *cpc;
    cpc_set_t *set = notifying_set(&cpc, event, UINT64_MAX - 999, emt);
    if (set == NULL)
        return;
    CHECK(cpc_bind_curlwp(cpc, set, 0) == 0);
    for (int i = 0; i < 20; i++) {
        int before = nsig;
        if (strcmp(event, "page-faults") == 0) {
            size_t psz = (size_t)sysconf(_SC_PAGESIZE);
            char *p = mmap(NULL, psz * 1100, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0);
            CHECK(p != MAP_FAILED);
            for (int k = 0; p != MAP_FAILED && k < 1100; k++)
                ((volatile char *)p)[(size_t)k * psz] = 1;
            if (p != MAP_FAILED)
                munmap(p, psz * 1100);
        } else {
            CHECK(perfcompat_sim_advance(event, 1000) == 1);
        }
        CHECK(nsig == before + 1);
        CHECK(cpc_set_restart(cpc, set) == 0);
    }
    printf("signals %d same %d differ %d (last si_addr %#lx pc %#lx)\n", (int)nsig, (int)same,
           (int)differ, (unsigned long)last_addr, (unsigned long)last_pc);
    CHECK(nsig == 20 && same == 20 && differ == 0);
    CHECK(cpc_unbind(cpc, set) == 0);
    CHECK(cpc_close(cpc) == 0);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    const char *event = argc > 2 ? argv[2] : "";
    if (strcmp(mode, "tick") == 0)
        tick(event);
    else if (strcmp(mode, "tick-overflows") == 0)
        tick_overflows();
    else if (strcmp(mode, "sysonly") == 0)
        sysonly(argc, argv);
    else if (strcmp(mode, "names") == 0)
        names();
    else if (strcmp(mode, "handler") == 0)
        handler_text();
    else if (strcmp(mode, "default") == 0)
        default_text();
    else if (strcmp(mode, "siaddr") == 0)
        siaddr(event);
    else {
        fprintf(stderr, "unknown mode '%s'\n", mode);
        return 2;
    }
    printf("%s: %d failures\n", mode, fails);
    return fails != 0;
}
