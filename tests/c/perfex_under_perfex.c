/* What an MPI profiling layer of the IRIX era did in MPI_Finalize: read_counters and
 * print_counters without ever calling start_counters, relying on being run as
 * `perfex -mp -e N ./app`. usage: perfex_under_perfex MODE N PAGES
 *   MODE "perfex": run by perfex counting event N (mapped to page faults): a second thread
 *        touches PAGES/2 pages and reads its counts (twice: they keep running), the main
 *        thread touches PAGES pages, joins it and reads its own; each thread prints
 *        "tid <tid> pid <pid> count <c0>" on stdout. A child of fork() cannot read the parent's counters
 *        without a start, and counts its own after one. Then the main thread's explicit
 *        start/read pair works as ever, and reading again without a start fails.
 *   MODE "bare": not under perfex: read_counters without start_counters fails. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "libperfex.h"
#include "pages.h"

static int fails, event;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
#define CHECK(c) do { if (!(c)) { pthread_mutex_lock(&lock); fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); fails++; pthread_mutex_unlock(&lock); } } while (0)


/* Read this thread's counts without a start, print them and say whose they are. */
static long long report(void) {
    long long c0 = -1, c1 = -2;
    int g = read_counters(event, &c0, event, &c1);
    if (g < 0) perror("read_counters");
    CHECK(g > 0 && c0 == c1);
    CHECK(print_counters(event, c0, event, c1) > 0);
    pthread_mutex_lock(&lock);
    printf("tid %ld pid %ld count %lld\n", (long)gettid(), (long)getpid(), c0);
    fflush(stdout);
    pthread_mutex_unlock(&lock);
    return c0;
}

static void *thread_main(void *arg) {
    touch(*(long *)arg);
    long long c = report();
    /* The counters perfex handed over keep running: a second read counts on. */
    long long c0 = -1, c1 = -1;
    CHECK(read_counters(event, &c0, event, &c1) > 0 && c0 >= c && c1 == c0);
    /* An event perfex does not count. */
    int other = event == 0 ? 25 : 0;
    errno = 0;
    CHECK(read_counters(other, &c0, event, &c1) < 0 && errno == EINVAL);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s MODE N PAGES\n", argv[0]); return 99; }
    event = atoi(argv[2]);
    long pages = atol(argv[3]), half = pages / 2;
    long long c0 = -7, c1 = -7;
    if (strcmp(argv[1], "bare") == 0) {
        errno = 0;
        CHECK(read_counters(event, &c0, event, &c1) < 0 && errno == EINVAL);
        CHECK(c0 == -7 && c1 == -7);
        printf("bare: %d failures\n", fails);
        return fails != 0;
    }
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_main, &half) == 0);
    touch(pages);
    CHECK(pthread_join(t, NULL) == 0);
    report();

    /* A child of fork() inherits the main thread's state, whose counters count the parent:
     * its read without a start fails; its own start counts its own work. */
    pid_t pid = fork();
    if (pid == 0) {
        errno = 0;
        int ok = read_counters(event, &c0, event, &c1) < 0 && errno == EINVAL;
        int g = start_counters(event, event);
        touch(10);
        ok = ok && g > 0 && read_counters(event, &c0, event, &c1) == g && c0 >= 10 && c0 < 60;
        _exit(ok ? 0 : 1);
    }
    int st = -1;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);

    /* An explicit start takes over, exactly as without perfex. */
    int g = start_counters(event, event);
    CHECK(g > 0);
    touch(100);
    CHECK(read_counters(event, &c0, event, &c1) == g);
    CHECK(c0 == c1 && c0 >= 100 && c0 < 150);
    errno = 0;
    CHECK(read_counters(event, &c0, event, &c1) < 0 && errno == EINVAL);

    printf("perfex: %d failures\n", fails);
    return fails != 0;
}
