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
 * - PC, SP: the indices of the program counter and stack pointer in uc_mcontext.gregs, for
 *   SIGEMT handlers that print them (x86-64 and i386; other architectures have no gregs).
 * - processor_bind(P_LWPID, P_MYID, cpu, &old), PBIND_NONE, PBIND_QUERY: the calling thread's
 *   processor binding as its affinity (one CPU, or every CPU for PBIND_NONE), which
 *   cpc_shared_bind_event and cpc_bind_cpu go by; P_LWPID with another id names that Linux
 *   thread, and P_PID a process's main thread only. *old (if not NULL) gets the CPU the thread
 *   was bound to, PBIND_NONE if its affinity was not one CPU.
 * - index, rindex: free for the program's own use, as on Solaris, whose <string.h> and
 *   <strings.h> do not declare the BSD functions of those names that glibc's do (libcpc's
 *   Example 2 has a global `int index`); the functions stay reachable as strchr/strrchr.
 * It defines _GNU_SOURCE when nothing has been included yet, for REG_RIP and psiginfo(). */
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

static inline int processor_bind(int idtype, int id, int cpu, int *obind) {
    cpu_set_t set;
    pid_t who = id == P_MYID ? 0 : (pid_t)id;
    int i, n = 0, one = PBIND_NONE;
    (void)idtype;
    if (sched_getaffinity(who, sizeof set, &set) != 0)
        return -1;
    for (i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &set)) {
            n++;
            one = i;
        }
    if (obind != NULL)
        *obind = n == 1 ? one : PBIND_NONE;
    if (cpu == PBIND_QUERY)
        return 0;
    CPU_ZERO(&set);
    if (cpu == PBIND_NONE) {
        long ncpu = sysconf(_SC_NPROCESSORS_CONF);
        for (i = 0; i < ncpu && i < CPU_SETSIZE; i++)
            CPU_SET(i, &set);
    } else if (cpu >= 0 && cpu < CPU_SETSIZE) {
        CPU_SET(cpu, &set);
    } else {
        errno = EINVAL;
        return -1;
    }
    return sched_setaffinity(who, sizeof set, &set);
}

#define index perfcompat_solaris_index
#define rindex perfcompat_solaris_rindex

#if defined(__x86_64__)
#define PC REG_RIP
#define SP REG_RSP
#elif defined(__i386__)
#define PC REG_EIP
#define SP REG_UESP
#endif

#ifdef __cplusplus
}
#endif

#endif /* PERFCOMPAT_SOLARIS_H */
