/* Shared by the guest tests (the C files beside this one), which run in the arm64 guest that .ci/arm64
 * boots: each check prints one line that the runner reads back over the serial console,
 *   GUEST ok NAME: what was seen      or      GUEST FAIL NAME: what was seen
 * and the program exits 1 if any check failed. */
#ifndef GUEST_H
#define GUEST_H
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int guest_failures;

/* One check: NAME passes when COND holds; the rest is printf-style detail. */
__attribute__((format(printf, 3, 4), unused)) static void check(const char *name, int cond,
                                                         const char *fmt, ...) {
  va_list ap;
  printf("GUEST %s %s: ", cond ? "ok" : "FAIL", name);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  fflush(stdout);
  if (!cond)
    guest_failures++;
}

__attribute__((unused)) static int guest_exit(void) { return guest_failures ? 1 : 0; }

/* A loop of exactly 2 instructions per iteration (subs, b.ne), N >= 1: its instruction count
 * is known to the instruction. */
static inline void known_loop(uint64_t n) {
  __asm__ volatile("1: subs %0, %0, #1\n\tb.ne 1b" : "+r"(n) : : "cc");
}

#endif
