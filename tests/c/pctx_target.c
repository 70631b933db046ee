/* A program for the libpctx tests (capi/tests/pctx.rs) to be run under pctx_create. It
 * reports the ids it has on standard error ("id NAME=N"), so that the tests can name the ids
 * the callbacks get. usage: pctx_target MODE
 *   threads  create a thread and join it, then a second one
 *   exit     create a thread that waits forever, then exit from the main thread
 *   kill     the same, then SIGKILL itself
 *   main_exit  create a thread that waits a little, then end the main thread alone
 *            (pthread_exit): the thread ends last, with the process
 *   fork     fork a child that exits 0; wait for it
 * (The page-fault workload is perfex_workload.c's touch mode.) */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static void *wait_a_little(void *arg) {
    fprintf(stderr, "id %s=%ld\n", (const char *)arg, tid());
    usleep(100000);
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stderr, NULL, _IONBF, 0);
    fprintf(stderr, "id main=%ld\n", (long)getpid());
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
    } else if (strcmp(mode, "main_exit") == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, wait_a_little, "t1") != 0) return 98;
        pthread_exit(NULL);
    } else if (strcmp(mode, "fork") == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            fprintf(stderr, "id child=%ld\n", (long)getpid());
            _exit(0);
        }
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 97;
    } else {
        fprintf(stderr, "usage: %s threads|exit|kill|fork\n", argv[0]);
        return 99;
    }
    return 0;
}
