/* libperfcompat-preload.so.1: what LD_PRELOAD names to count a program with
 * PERFCOMPAT_PRELOAD_EVENTS so that it reports however it ends (issue 44 item 6). It defines
 * the C library functions through which a process ends without its exit handlers, _exit and
 * _Exit, or replaces its image, execve, execv, execvp, execvpe, execl, execle and execlp, and
 * only dispatches: each calls libperfcompat.so.1's private entry points (capi/src/preload.rs,
 * version PERFCOMPAT_PRIVATE_1), perfcompat_preload_end (the report, in the counting process)
 * or perfcompat_preload_exec (the counts carried into the new image, or reported first), which
 * hold all the logic and the panic boundary, then the C library's own, found with
 * dlsym(RTLD_NEXT) in the constructor. In a process that does not count those entry points do
 * nothing but compare the process id.
 *
 * These functions used to be libperfcompat.so.1's own, so every program linked with -lcpc or
 * -lperfex had them interposed; now that library exports only its ABI and this one is loaded
 * only when named. It needs libperfcompat.so.1 (DT_NEEDED, found next to it through the run
 * path $ORIGIN): the process has one engine, whose constructor starts the counting. The
 * definitions carry no symbol version (preload.map is an anonymous version script): glibc's
 * loader binds a program's versioned reference to an unversioned definition that comes first
 * in the search order, so one build serves every architecture (as libpfcntr's, pfcntr.c).
 * C, because only C defines the variadic execl, execle and execlp. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef int (*exec_fn)(const char *, char *const[], char *const[]);
typedef void (*exit_fn)(int);

/* libperfcompat.so.1's private entry points (capi/src/preload.rs). */
extern void perfcompat_preload_end(int status);
extern int perfcompat_preload_exec(const char *file, int search, char *const argv[],
                                   char *const envp[], exec_fn real);

extern char **environ;

/* The C library's, looked up once in the constructor (so that no dlsym runs in a forked child
 * or a signal handler); NULL when there is none, and the system call serves. */
static exit_fn real_exit;
static exec_fn real_execve, real_execvpe;

/* The next definition of `name` after this library's, the C library's. */
static void *next(const char *name) { return dlsym(RTLD_NEXT, name); }

__attribute__((constructor)) static void resolve(void) {
    void *p;
    p = next("_exit");
    memcpy(&real_exit, &p, sizeof p); /* POSIX: dlsym's result converts to a function pointer */
    p = next("execve");
    memcpy(&real_execve, &p, sizeof p);
    p = next("execvpe");
    memcpy(&real_execvpe, &p, sizeof p);
}

__attribute__((noreturn)) static void end(int status) {
    perfcompat_preload_end(status);
    if (real_exit)
        real_exit(status);
    for (;;)
        syscall(SYS_exit_group, status);
}

void _exit(int status) { end(status); }

void _Exit(int status) { end(status); }

/* execve by the system call, for a C library without one found (never on glibc). */
static int sys_execve(const char *path, char *const argv[], char *const envp[]) {
    return (int)syscall(SYS_execve, path, argv, envp);
}

/* execvpe without the C library's (never on glibc): fail as a missing function would. */
static int no_execvpe(const char *file, char *const argv[], char *const envp[]) {
    (void)file, (void)argv, (void)envp;
    errno = ENOSYS;
    return -1;
}

int execve(const char *path, char *const argv[], char *const envp[]) {
    return perfcompat_preload_exec(path, 0, argv, envp, real_execve ? real_execve : sys_execve);
}

int execvpe(const char *file, char *const argv[], char *const envp[]) {
    return perfcompat_preload_exec(file, 1, argv, envp, real_execvpe ? real_execvpe : no_execvpe);
}

int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }

int execvp(const char *file, char *const argv[]) { return execvpe(file, argv, environ); }

/* The number of arguments from `arg` up to the NULL that ends them, in `ap`'s list. */
static size_t count_args(const char *arg, va_list ap) {
    size_t n = 0;
    while (arg) {
        n++;
        arg = va_arg(ap, const char *);
    }
    return n;
}

/* argv[0] = arg, argv[1..n] from ap (argv[n] is the caller's NULL): ap ends after that NULL.
 * With n = 0 (arg is the NULL) nothing is read. */
static void gather(char **argv, size_t n, const char *arg, va_list *ap) {
    argv[0] = (char *)arg;
    for (size_t i = 1; i <= n; i++)
        argv[i] = va_arg(*ap, char *);
}

/* Declares `char *argv[]` holding `arg` and the variadic arguments after it up to their NULL,
 * and leaves `ap` started after that NULL (the caller ends it). */
#define ARGV_FROM_VARIADIC(argv, arg, ap)                                                      \
    va_list ap;                                                                                \
    size_t argc_;                                                                              \
    va_start(ap, arg);                                                                         \
    argc_ = count_args(arg, ap);                                                               \
    va_end(ap);                                                                                \
    char *argv[argc_ + 1];                                                                     \
    va_start(ap, arg);                                                                         \
    gather(argv, argc_, arg, &ap)

int execl(const char *path, const char *arg, ...) {
    ARGV_FROM_VARIADIC(argv, arg, ap);
    va_end(ap);
    return execv(path, argv);
}

int execlp(const char *file, const char *arg, ...) {
    ARGV_FROM_VARIADIC(argv, arg, ap);
    va_end(ap);
    return execvp(file, argv);
}

int execle(const char *path, const char *arg, ...) {
    ARGV_FROM_VARIADIC(argv, arg, ap);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}
