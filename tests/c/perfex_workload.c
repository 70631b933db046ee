/* A program for the perfex command tests: touches fresh pages (one page fault each) in the
 * ways the tests need. usage: perfex_workload MODE PAGES [EXIT]
 *   touch    touch PAGES pages, exit with EXIT (default 0)
 *   fork     a child touches PAGES pages, then the parent touches PAGES pages and waits
 *   threads  two threads touch PAGES pages each
 *   signals  3*PAGES pages, SIGUSR1 to the parent, PAGES pages, SIGUSR2, 3*PAGES pages
 *   sigint   SIGINT to the whole process group (caught here), then PAGES pages
 *   term     PAGES pages, then kill itself with SIGTERM
 *   stdin    wait for a byte on standard input, then as threads
 *   sleep    sleep PAGES milliseconds, then exit with EXIT */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "pages.h"

static void *thread_main(void *arg) {
    touch(*(long *)arg);
    return NULL;
}

static void on_sigint(int sig) { (void)sig; }

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s MODE PAGES [EXIT]\n", argv[0]); return 99; }
    const char *mode = argv[1];
    long pages = atol(argv[2]);
    if (strcmp(mode, "touch") == 0) {
        touch(pages);
        return argc > 3 ? atoi(argv[3]) : 0;
    } else if (strcmp(mode, "fork") == 0) {
        pid_t pid = fork();
        if (pid == 0) { touch(pages); _exit(0); }
        touch(pages);
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 98;
    } else if (strcmp(mode, "sleep") == 0) {
        usleep((useconds_t)pages * 1000);
        return argc > 3 ? atoi(argv[3]) : 0;
    } else if (strcmp(mode, "threads") == 0 || strcmp(mode, "stdin") == 0) {
        char b;
        if (strcmp(mode, "stdin") == 0 && read(0, &b, 1) != 1) return 96;
        pthread_t t[2];
        for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, thread_main, &pages);
        for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    } else if (strcmp(mode, "signals") == 0) {
        touch(3 * pages);
        kill(getppid(), SIGUSR1);
        usleep(300000);
        touch(pages);
        kill(getppid(), SIGUSR2);
        usleep(300000);
        touch(3 * pages);
    } else if (strcmp(mode, "sigint") == 0) {
        signal(SIGINT, on_sigint);
        kill(0, SIGINT);
        usleep(100000);
        touch(pages);
    } else if (strcmp(mode, "term") == 0) {
        touch(pages);
        signal(SIGTERM, SIG_DFL);
        raise(SIGTERM);
        return 97;
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 99;
    }
    return 0;
}
