/*
 * The variadic exec functions of the C library, execl, execle and execlp, for the preload's
 * one report (capi/src/interpose.rs): Rust cannot define C variadic functions on stable, so
 * the exported symbols are naked Rust trampolines that jump here with the caller's registers
 * and stack intact. Each gathers its arguments into an array on the stack, as the C library
 * does, and calls the library's execv, execve or execvp, which carry the counts of a counted
 * process into the new image. Hidden: the library exports only the Rust-declared symbols.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

/* The number of arguments left in *ap before the NULL that ends them, plus one (for the
 * first, named, argument). */
static size_t count_args(va_list *ap)
{
    size_t n = 1;
    while (va_arg(*ap, const char *) != NULL)
        n++;
    return n;
}

/* argv[0] = arg, argv[1..n-1] from *ap, argv[n] = NULL (read from *ap too). */
static void gather(char **argv, size_t n, const char *arg, va_list *ap)
{
    size_t i;
    argv[0] = (char *)arg;
    for (i = 1; i <= n; i++)
        argv[i] = va_arg(*ap, char *);
}

/* Declares `char *argv[]` holding `arg` and the variadic arguments after it up to their NULL,
 * and leaves `ap` started after that NULL (the caller ends it). */
#define ARGV_FROM_VARIADIC(argv, arg, ap)                                                      \
    va_list ap;                                                                                \
    size_t argc_;                                                                              \
    va_start(ap, arg);                                                                         \
    argc_ = count_args(&ap);                                                                   \
    va_end(ap);                                                                                \
    char *argv[argc_ + 1];                                                                     \
    va_start(ap, arg);                                                                         \
    gather(argv, argc_, arg, &ap)

__attribute__((visibility("hidden"))) int
perfcompat_execl_va(const char *path, const char *arg, ...)
{
    ARGV_FROM_VARIADIC(argv, arg, ap);
    va_end(ap);
    return execv(path, argv);
}

__attribute__((visibility("hidden"))) int
perfcompat_execlp_va(const char *file, const char *arg, ...)
{
    ARGV_FROM_VARIADIC(argv, arg, ap);
    va_end(ap);
    return execvp(file, argv);
}

__attribute__((visibility("hidden"))) int
perfcompat_execle_va(const char *path, const char *arg, ...)
{
    ARGV_FROM_VARIADIC(argv, arg, ap);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}
