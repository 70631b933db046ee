/* The program that capi/tests/engine_signal.rs execs from a libcpc program that blocked every
 * signal (tests/c/cpc_engine_signal.c exec-before and exec-after, issue 44 item 4): an image
 * that never heard of the library. It unblocks every signal (a signal left pending across the
 * exec is delivered at once, at its default action: a real-time signal ends the process),
 * waits a moment, lists what is still pending and prints OK. Not linked with the library. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <time.h>

int main(void) {
    sigset_t none, pending;
    sigemptyset(&none);
    sigpending(&pending);
    for (int s = 1; s < NSIG; s++)
        if (sigismember(&pending, s) == 1) printf("signal %d pending at the start\n", s);
    fflush(stdout);
    sigprocmask(SIG_SETMASK, &none, NULL);
    struct timespec ms = {0, 50000000};
    nanosleep(&ms, NULL);
    printf("OK\n");
    return 0;
}
