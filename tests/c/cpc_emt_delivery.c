/* How SIGEMT reaches the program on perf (capi/tests/emt_delivery.rs): the engine delivers it
 * from its own overflow handler instead of queueing a second signal (issue 19), so everything a
 * program can observe of a kernel delivery is checked here, one mode per run (argv[1]):
 *   handler    SA_SIGINFO handler: siginfo, the interrupted context, the mask during the
 *              handler (interrupted mask + sa_mask + SIGEMT) and after it (restored)
 *   plain      a handler installed with signal(): no siginfo
 *   nodefer    SA_NODEFER: SIGEMT is not blocked in the handler
 *   resethand  SA_RESETHAND: the disposition is SIG_DFL in the handler
 *   wait       SIGEMT handled but blocked, taken with sigtimedwait
 *   signalfd   SIGEMT handled but blocked, read from a signalfd
 *   siglongjmp the handler leaves with siglongjmp (mask saved): the mask comes back
 *   longjmp    the handler leaves with siglongjmp to an env saved without the mask: the mask
 *              stays the handler's, as after a kernel delivery
 *   ignored    SIG_IGN: the set freezes and the program goes on
 *   default    SIG_DFL: the process is killed by SIGEMT
 *   onstack    SA_ONSTACK with an alternate stack: the handler runs on it
 *   pending    an overflow's SIGEMT queued while SIGEMT was blocked is still pending when the
 *              next overflow's signal is taken: the library queues the second behind it, so
 *              the handler sees them in order (told apart by si_addr: the first is its fault
 *              site's, the second the place where the blocked signal was finally taken)
 *   fullqueue  as handler, with RLIMIT_SIGPENDING 0: no signal can be queued, the kernel falls
 *              back to a plain SIGIO, and SIGEMT still reaches the handler
 * Prints "<n> notifications" and "<k> failures"; exits 0 when there were none. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <libcpc.h>

#define PERIOD 20
#define ROUNDS 50

static cpc_t *cpc;
static cpc_set_t *set;
static cpc_buf_t *buf;
static volatile sig_atomic_t notified, failures;
static sigjmp_buf env;
static const char *mode;

#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            failures++;                                                        \
            if (failures < 10) {                                               \
                static const char m[] = "check failed: " #c "\n";              \
                if (write(2, m, sizeof m - 1) < 0) failures++;                 \
            }                                                                  \
        }                                                                      \
    } while (0)

static char *pages;
static long psz, next_page, npages;

/* One page fault per page: a fresh page of a mapping made up front. */
static void fault(long n) {
    for (long i = 0; i < n && next_page < npages; i++)
        ((volatile char *)pages)[next_page++ * psz] = 1;
}

/* Two places that fault, so that a notification's si_addr says which one overflowed. */
static __attribute__((noinline)) void fault_site_a(long n) {
    for (long i = 0; i < n && next_page < npages; i++)
        ((volatile char *)pages)[next_page++ * psz] = 1;
}
static __attribute__((noinline)) void fault_site_b(long n) {
    for (long i = 0; i < n && next_page < npages; i++)
        ((volatile char *)pages)[next_page++ * psz] = 2;
}
static void *seen[8];
static volatile sig_atomic_t nseen;

static int blocked(int sig) {
    sigset_t cur;
    pthread_sigmask(SIG_SETMASK, NULL, &cur);
    return sigismember(&cur, sig);
}

static void restart(void) {
    CHECK(cpc_request_preset(cpc, 0, UINT64_MAX - (PERIOD - 1)) == 0);
    CHECK(cpc_set_restart(cpc, set) == 0);
}

static void check_info(int sig, const siginfo_t *si) {
    CHECK(sig == SIGEMT);
    CHECK(si->si_signo == SIGEMT);
    CHECK(si->si_code == EMT_CPCOVF);
    CHECK(si->si_addr != NULL);
    CHECK(perfcompat_cpc_ovf_mask(si) == 1);
}

static int waits; /* SIGEMT blocked: taken with sigtimedwait or a signalfd, never handled */

static void on_emt(int sig, siginfo_t *si, void *ucv) {
    ucontext_t *uc = ucv;
    CHECK(!waits);
    notified++;
    check_info(sig, si);
#if defined(__x86_64__)
    /* The context is the interrupted one: its program counter is si_addr (not so for a
     * SIGEMT queued while blocked: the kernel delivers it where the thread is then). */
    if (strcmp(mode, "pending") != 0)
        CHECK((void *)uc->uc_mcontext.gregs[REG_RIP] == si->si_addr);
#else
    (void)uc;
#endif
    if (strcmp(mode, "nodefer") == 0) {
        CHECK(!blocked(SIGEMT));
    } else {
        CHECK(blocked(SIGEMT));
        CHECK(blocked(SIGUSR1)); /* sa_mask */
        CHECK(blocked(SIGUSR2)); /* blocked where the overflow interrupted */
        CHECK(!blocked(SIGINT)); /* blocked nowhere */
    }
    if (strcmp(mode, "resethand") == 0) {
        struct sigaction now;
        CHECK(sigaction(SIGEMT, NULL, &now) == 0);
        CHECK(now.sa_handler == SIG_DFL);
        return; /* not restarted: there is no second notification */
    }
    if (strcmp(mode, "siglongjmp") == 0 || strcmp(mode, "longjmp") == 0) siglongjmp(env, 1);
    if (nseen < 8) seen[nseen++] = si->si_addr;
    if (strcmp(mode, "pending") == 0) return; /* main restarts */
    restart();
}

static char altstack[64 * 1024];

static void on_emt_onstack(int sig, siginfo_t *si, void *uc) {
    char here;
    (void)uc;
    notified++;
    check_info(sig, si);
    CHECK(&here >= altstack && &here < altstack + sizeof altstack);
    restart();
}

static void on_emt_plain(int sig) {
    notified++;
    CHECK(sig == SIGEMT);
    CHECK(blocked(SIGEMT));
    restart();
}

static void install(void (*h)(int, siginfo_t *, void *), int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = h;
    sa.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR1);
    if (sigaction(SIGEMT, &sa, NULL) != 0) exit(2);
}

static uint64_t sample(void) {
    uint64_t v = 0;
    CHECK(cpc_set_sample(cpc, set, buf) == 0);
    CHECK(cpc_buf_get(cpc, buf, 0, &v) == 0);
    return v;
}

/* SIGEMT is blocked: take each notification with sigtimedwait or from a signalfd. */
static void take_blocked(int use_fd) {
    sigset_t emt;
    sigemptyset(&emt);
    sigaddset(&emt, SIGEMT);
    int fd = use_fd ? signalfd(-1, &emt, SFD_NONBLOCK) : -1;
    if (use_fd && fd < 0) exit(2);
    for (int r = 0; r < ROUNDS && failures == 0; r++) {
        fault(PERIOD); /* overflows at the last of these faults */
        if (use_fd) {
            struct signalfd_siginfo s;
            struct pollfd pfd = {fd, POLLIN, 0};
            CHECK(poll(&pfd, 1, 5000) == 1);
            if (read(fd, &s, sizeof s) != sizeof s) {
                CHECK(!"no SIGEMT on the signalfd");
                break;
            }
            CHECK(s.ssi_signo == (uint32_t)SIGEMT);
            CHECK(s.ssi_code == EMT_CPCOVF);
            /* signalfd copies the fields of the layout Linux gives a positive si_code on a
             * signal without a fault layout (the SIGPOLL one): the first word of the union,
             * where si_addr is, arrives as ssi_band. */
            CHECK(s.ssi_band != 0);
        } else {
            struct timespec t = {5, 0};
            siginfo_t si;
            int sig = sigtimedwait(&emt, &si, &t);
            CHECK(sig == SIGEMT);
            if (sig != SIGEMT) break;
            check_info(sig, &si);
        }
        notified++;
        restart();
    }
    if (fd >= 0) close(fd);
}

/* Touch the stack the handlers will run on, so that their own frames fault no page that the
 * page-fault request would count. */
static void prefault_stack(void) {
    volatile char b[256 * 1024];
    for (size_t i = 0; i < sizeof b; i += 1024) b[i] = 0;
}

int main(int argc, char **argv) {
    mode = argc > 1 ? argv[1] : "handler";
    prefault_stack();
    if (strcmp(mode, "fullqueue") == 0) {
        struct rlimit none = {0, 0};
        if (setrlimit(RLIMIT_SIGPENDING, &none) != 0) return 2;
    }
    psz = sysconf(_SC_PAGESIZE);
    npages = (long)(ROUNDS + 2) * PERIOD;
    pages = mmap(NULL, (size_t)(npages * psz), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED) return 2;
    madvise(pages, (size_t)(npages * psz), MADV_NOHUGEPAGE);

    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGUSR2);
    waits = strcmp(mode, "wait") == 0 || strcmp(mode, "signalfd") == 0;
    if (waits) sigaddset(&m, SIGEMT);
    pthread_sigmask(SIG_BLOCK, &m, NULL);

    if (strcmp(mode, "plain") == 0) {
        if (signal(SIGEMT, on_emt_plain) == SIG_ERR) return 2;
    } else if (strcmp(mode, "nodefer") == 0) {
        install(on_emt, SA_NODEFER);
    } else if (strcmp(mode, "resethand") == 0) {
        install(on_emt, SA_RESETHAND);
    } else if (strcmp(mode, "onstack") == 0) {
        stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
        if (sigaltstack(&ss, NULL) != 0) return 2;
        install(on_emt_onstack, SA_RESTART | SA_ONSTACK);
    } else if (strcmp(mode, "ignored") == 0) {
        signal(SIGEMT, SIG_IGN);
    } else if (strcmp(mode, "default") == 0) {
        signal(SIGEMT, SIG_DFL);
    } else {
        /* Also for the modes that block it: a blocked signal is not handled. */
        install(on_emt, SA_RESTART);
    }

    if ((cpc = cpc_open(CPC_VER_CURRENT)) == NULL || (set = cpc_set_create(cpc)) == NULL ||
        cpc_set_add_request(cpc, set, "page-faults", UINT64_MAX - (PERIOD - 1),
                            CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL) != 0 ||
        (buf = cpc_buf_create(cpc, set)) == NULL || cpc_bind_curlwp(cpc, set, 0) != 0) {
        perror("cpc setup");
        return 2;
    }

    if (waits) {
        take_blocked(strcmp(mode, "signalfd") == 0);
        CHECK(notified == ROUNDS);
    } else if (strcmp(mode, "siglongjmp") == 0 || strcmp(mode, "longjmp") == 0) {
        int save = strcmp(mode, "siglongjmp") == 0;
        for (volatile int r = 0; r < ROUNDS; r++) {
            if (sigsetjmp(env, save) == 0) {
                fault(PERIOD * 2); /* left at the overflow */
                CHECK(!"no overflow in two periods");
            } else {
                /* After a kernel delivery left this way: the mask saved by sigsetjmp, or
                 * the handler's (SIGEMT and sa_mask blocked) when it was not saved. */
                CHECK(blocked(SIGEMT) == !save);
                CHECK(blocked(SIGUSR1) == !save);
                CHECK(blocked(SIGUSR2));
                if (!save) pthread_sigmask(SIG_SETMASK, &m, NULL);
                restart();
            }
        }
        CHECK(notified == ROUNDS);
    } else if (strcmp(mode, "ignored") == 0 || strcmp(mode, "default") == 0 ||
               strcmp(mode, "resethand") == 0) {
        fault(PERIOD + 5);
        /* Frozen at the overflow: nothing counts until a restart. */
        uint64_t a = sample();
        fault(5);
        CHECK(sample() == a);
        CHECK(notified == (strcmp(mode, "resethand") == 0));
    } else if (strcmp(mode, "pending") == 0) {
        /* Where each site's overflow is notified from, delivered the ordinary way. */
        fault_site_a(PERIOD);
        restart();
        fault_site_b(PERIOD);
        restart();
        CHECK(nseen == 2 && seen[0] != seen[1]);
        void *a = seen[0], *b = seen[1];
        /* Site B's next overflow is taken where the signals are unblocked: its si_addr is
         * neither site's. */
        /* SIGEMT blocked: site A's overflow is queued and stays pending. */
        sigset_t emt, all, old;
        sigemptyset(&emt);
        sigaddset(&emt, SIGEMT);
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &emt, &old);
        fault_site_a(PERIOD);
        restart();
        /* Every signal blocked: site B's overflow waits as the engine's own signal. */
        pthread_sigmask(SIG_BLOCK, &all, NULL);
        fault_site_b(PERIOD);
        /* Both become deliverable at once; the engine's signal is taken first (the lower
         * number) and must not overtake the pending SIGEMT. */
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        CHECK(nseen == 4);
        CHECK(seen[2] == a);
        CHECK(seen[3] != a && seen[3] != b);
        restart();
    } else {
        fault((long)ROUNDS * PERIOD);
        CHECK(notified == ROUNDS);
    }
    /* Whatever the handler's mask was, the program's own is back. */
    CHECK(blocked(SIGUSR2));
    CHECK(blocked(SIGEMT) == waits);
    CHECK(!blocked(SIGUSR1));
    cpc_unbind(cpc, set);
    printf("%d notifications\n%d failures\n", (int)notified, (int)failures);
    return failures != 0;
}
