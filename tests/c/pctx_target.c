/* A program for the libpctx tests (capi/tests/pctx.rs) to be run under pctx_create. It
 * reports the ids it has on standard error ("id NAME=N"), so that the tests can name the ids
 * the callbacks get (not in touch mode, which runs in several processes at once). usage: pctx_target MODE [PAGES]
 *   threads  create a thread and join it, then a second one
 *   exit     create a thread that waits forever, then exit from the main thread
 *   kill     the same, then SIGKILL itself
 *   fork     fork a child that exits 0; wait for it
 *   touch    touch PAGES fresh pages (one page fault each) */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static long tid(void) { return (long)syscall(SYS_gettid); }

static void *thread_main(void *arg) {
    fprintf(stderr, "id %s=%ld\n", (const char *)arg, tid());
    return NULL;
}

static void *wait_forever(void *arg) {
    fprintf(stderr, "id %s=%ld\n", (const char *)arg, tid());
    for (;;) pause();
    return NULL;
}

static void touch(long pages) {
    size_t len = (size_t)pages * 4096;
    volatile char *p = (volatile char *)mmap(NULL, len, PROT_READ | PROT_WRITE,
                                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(99); }
    madvise((void *)p, len, MADV_NOHUGEPAGE);
    for (long i = 0; i < pages; i++) p[i * 4096] = 1;
    munmap((void *)p, len);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stderr, NULL, _IONBF, 0);
    if (strcmp(mode, "touch") != 0) fprintf(stderr, "id main=%ld\n", (long)getpid());
    if (strcmp(mode, "threads") == 0) {
        static char *names[] = {"t1", "t2"};
        for (int i = 0; i < 2; i++) {
            pthread_t t;
            if (pthread_create(&t, NULL, thread_main, names[i]) != 0) return 98;
            pthread_join(t, NULL);
        }
    } else if (strcmp(mode, "exit") == 0 || strcmp(mode, "kill") == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, wait_forever, "t1") != 0) return 98;
        usleep(100000);
        if (strcmp(mode, "kill") == 0) kill(getpid(), SIGKILL);
        exit(0);
    } else if (strcmp(mode, "fork") == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            fprintf(stderr, "id child=%ld\n", (long)getpid());
            _exit(0);
        }
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 97;
    } else if (strcmp(mode, "touch") == 0 && argc > 2) {
        touch(atol(argv[2]));
    } else {
        fprintf(stderr, "usage: %s threads|exit|kill|fork|touch PAGES\n", argv[0]);
        return 99;
    }
    return 0;
}
