/* perfcompat/solaris.h: the Solaris-only calls that libcpc's man-page examples and programs
 * written for Solaris use beside libcpc, for building them unchanged on Linux with
 *   cc -include perfcompat/solaris.h prog.c -lcpc
 * Optional: libcpc.h never includes it. Written for perfcompat (not generated).
 * SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * - _lwp_self(): the calling thread's id (Linux's thread id, which is what libcpc's pctx
 *   callbacks and cputrack call an LWP id here).
 * - gethrtime(), gethrvtime(), hrtime_t: nanoseconds of CLOCK_MONOTONIC (the clock of
 *   cpc_buf_hrtime) and of the calling thread's CPU time.
 * - PC, SP, USP: the indices of the program counter and (user) stack pointer in
 *   uc_mcontext.gregs, for SIGEMT handlers that print them (cpc_bind_curlwp(3CPC)'s Example 2
 *   reads gregs[PC] and gregs[SP], cpc_bind_event(3CPC)'s gregs[USP]; x86-64 and i386, other
 *   architectures have no gregs). Numbers of the kernel's register layout, so that they do
 *   not need _GNU_SOURCE's REG_RIP.
 * - processor_bind(P_LWPID, P_MYID, cpu, &old), PBIND_NONE, PBIND_QUERY: the calling thread's
 *   processor binding as its affinity (one CPU, or every CPU for PBIND_NONE), which
 *   cpc_shared_bind_event and cpc_bind_cpu go by; P_LWPID with another id names that Linux
 *   thread, and P_PID a process's main thread only. *old (if not NULL) gets the CPU the thread
 *   was bound to, PBIND_NONE if its affinity was not one CPU.
 * - index, rindex: free for the program's own use, as on Solaris, whose <string.h> and
 *   <strings.h> do not declare the BSD functions of those names that glibc's do (libcpc's
 *   Example 2 has a global `int index`); the functions stay reachable as strchr/strrchr.
 * It needs no feature macro: it may come after any C library header (it used to need
 * _GNU_SOURCE for CPU_SETSIZE and REG_RIP, and failed after <stdio.h>), and it defines
 * _GNU_SOURCE when nothing has been included yet, for programs that use psiginfo(). */
#ifndef PERFCOMPAT_SOLARIS_H
#define PERFCOMPAT_SOLARIS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef long long hrtime_t;

static inline int _lwp_self(void) { return (int)syscall(SYS_gettid); }

static inline hrtime_t perfcompat_solaris_clock_ns(clockid_t clock) {
    struct timespec t;
    if (clock_gettime(clock, &t) != 0)
        return 0;
    return (hrtime_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static inline hrtime_t gethrtime(void) { return perfcompat_solaris_clock_ns(CLOCK_MONOTONIC); }

static inline hrtime_t gethrvtime(void) {
    return perfcompat_solaris_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

#ifndef P_LWPID
#define P_LWPID 8
#endif
#ifndef P_MYID
#define P_MYID (-1)
#endif
#define PBIND_NONE (-1)
#define PBIND_QUERY (-2)

/* The affinity masks of processor_bind: 1024 processors, glibc's CPU_SETSIZE, as words of
 * their own so that no _GNU_SOURCE is needed for cpu_set_t. */
#define PERFCOMPAT_SOLARIS_NCPU 1024
#define PERFCOMPAT_SOLARIS_WORD (8 * sizeof(unsigned long))

static inline int processor_bind(int idtype, int id, int cpu, int *obind) {
    unsigned long set[PERFCOMPAT_SOLARIS_NCPU / (8 * sizeof(unsigned long))];
    pid_t who = id == P_MYID ? 0 : (pid_t)id;
    long got;
    int i, n = 0, one = PBIND_NONE;
    (void)idtype;
    memset(set, 0, sizeof set);
    got = syscall(SYS_sched_getaffinity, who, sizeof set, set);
    if (got < 0)
        return -1;
    for (i = 0; i < (int)got * 8 && i < PERFCOMPAT_SOLARIS_NCPU; i++)
        if (set[i / PERFCOMPAT_SOLARIS_WORD] >> (i % PERFCOMPAT_SOLARIS_WORD) & 1UL) {
            n++;
            one = i;
        }
    if (obind != NULL)
        *obind = n == 1 ? one : PBIND_NONE;
    if (cpu == PBIND_QUERY)
        return 0;
    memset(set, 0, sizeof set);
    if (cpu == PBIND_NONE) {
        long ncpu = sysconf(_SC_NPROCESSORS_CONF);
        for (i = 0; i < ncpu && i < PERFCOMPAT_SOLARIS_NCPU; i++)
            set[i / PERFCOMPAT_SOLARIS_WORD] |= 1UL << (i % PERFCOMPAT_SOLARIS_WORD);
    } else if (cpu >= 0 && cpu < PERFCOMPAT_SOLARIS_NCPU) {
        set[cpu / PERFCOMPAT_SOLARIS_WORD] |= 1UL << (cpu % PERFCOMPAT_SOLARIS_WORD);
    } else {
        errno = EINVAL;
        return -1;
    }
    return (int)syscall(SYS_sched_setaffinity, who, sizeof set, set);
}

#define index perfcompat_solaris_index
#define rindex perfcompat_solaris_rindex

/* gregs' order is the kernel's (struct sigcontext): REG_RIP 16 and REG_RSP 15 on x86-64,
 * REG_EIP 14 and REG_UESP 17 on i386. */
#if defined(__x86_64__)
#define PC 16
#define SP 15
#define USP 15
#elif defined(__i386__)
#define PC 14
#define SP 17
#define USP 17
#endif

#ifdef __cplusplus
}
#endif

#endif /* PERFCOMPAT_SOLARIS_H */
