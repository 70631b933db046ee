/* preload_ends.c: touches <pages> fresh pages (one page fault each), then ends the way MODE
 * says, for the PERFCOMPAT_PRELOAD_EVENTS report (capi/tests/preload_ends.rs). A program that
 * never calls the counters. Usage: preload_ends MODE PAGES, MODE one of
 *   return, exit, _exit, _Exit      end that way
 *   atexit_exit                     exit, and an exit handler of the program's calls _exit
 *   fork_exit, fork_exit_child      fork; the child touches <pages> more and ends with _exit
 *                                   (fork_exit_child: with exit); the parent waits and returns
 *   pthread_exit                    a thread touches <pages> more; main calls pthread_exit
 *   term                            kill itself with SIGTERM
 *   abort                           abort() (SIGABRT)
 *   exec                            execv itself as "preload_ends return PAGES"
 *   execvp                          execvp "preload_ends_again" (found through PATH) likewise
 *   execl, execle, execlp           likewise with the variadic functions (execle: the program's
 *                                   environment; execlp: through PATH)
 *   exec_fail                       an execv that fails, then <pages> more, then return
 *   exec_unpreloaded                execve itself as "preload_ends return PAGES" with an
 *                                   environment without LD_PRELOAD
 *   execvp_suid, execlp_suid, execvpe_suid
 *                                   exec "preload_ends_suid return PAGES" found through PATH
 *                                   (a set-user-ID copy, capi/tests/preload_hostile.rs) */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pages.h"

static long pages;

static void *worker(void *arg) {
    touch(pages);
    return arg;
}

static void leave(void) { _exit(0); }

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    const char *m = argv[1];
    pages = atol(argv[2]);
    touch(pages);
    if (!strcmp(m, "return"))
        return 0;
    if (!strcmp(m, "exit"))
        exit(0);
    if (!strcmp(m, "_exit"))
        _exit(0);
    if (!strcmp(m, "_Exit"))
        _Exit(0);
    if (!strcmp(m, "atexit_exit")) {
        atexit(leave);
        exit(0);
    }
    if (!strcmp(m, "fork_exit") || !strcmp(m, "fork_exit_child")) {
        pid_t child = fork();
        if (child == 0) {
            touch(pages);
            if (!strcmp(m, "fork_exit"))
                _exit(0);
            exit(0);
        }
        waitpid(child, NULL, 0);
        return 0;
    }
    if (!strcmp(m, "pthread_exit")) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, NULL) != 0)
            return 3;
        pthread_exit(NULL);
    }
    if (!strcmp(m, "term")) {
        kill(getpid(), SIGTERM);
        for (;;)
            pause();
    }
    if (!strcmp(m, "abort"))
        abort();
    if (!strcmp(m, "exec")) {
        char *args[] = {argv[0], "return", argv[2], NULL};
        execv(argv[0], args);
        return 4;
    }
    if (!strcmp(m, "execvp")) {
        char *args[] = {"preload_ends_again", "return", argv[2], NULL};
        execvp("preload_ends_again", args);
        return 4;
    }
    if (!strcmp(m, "execl")) {
        execl(argv[0], argv[0], "return", argv[2], (char *)NULL);
        return 4;
    }
    if (!strcmp(m, "execle")) {
        extern char **environ;
        execle(argv[0], argv[0], "return", argv[2], (char *)NULL, environ);
        return 4;
    }
    if (!strcmp(m, "execlp")) {
        execlp("preload_ends_again", "preload_ends_again", "return", argv[2], (char *)NULL);
        return 4;
    }
    if (!strcmp(m, "execvp_suid") || !strcmp(m, "execvpe_suid")) {
        extern char **environ;
        char *args[] = {"preload_ends_suid", "return", argv[2], NULL};
        if (!strcmp(m, "execvp_suid"))
            execvp(args[0], args);
        else
            execvpe(args[0], args, environ);
        return 4;
    }
    if (!strcmp(m, "execlp_suid")) {
        execlp("preload_ends_suid", "preload_ends_suid", "return", argv[2], (char *)NULL);
        return 4;
    }
    if (!strcmp(m, "exec_unpreloaded")) {
        extern char **environ;
        char *env[256];
        int n = 0;
        for (char **e = environ; *e && n < 255; e++)
            if (strncmp(*e, "LD_PRELOAD=", 11) != 0)
                env[n++] = *e;
        env[n] = NULL;
        char *args[] = {argv[0], "return", argv[2], NULL};
        execve(argv[0], args, env);
        return 4;
    }
    if (!strcmp(m, "exec_fail")) {
        char *args[] = {"/nonexistent/program", NULL};
        execv(args[0], args);
        touch(pages);
        return 0;
    }
    return 2;
}
