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
 * - index, rindex: free for the program's own use, as on Solaris, whose <string.h> and
 *   <strings.h> do not declare the BSD functions of those names that glibc's do (libcpc's
 *   Example 2 has a global `int index`); the functions stay reachable as strchr/strrchr.
 * It defines _GNU_SOURCE when nothing has been included yet, for REG_RIP and psiginfo(). */
#ifndef PERFCOMPAT_SOLARIS_H
#define PERFCOMPAT_SOLARIS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

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
