/* libpfcntr.so.1: Tru64 UNIX's /dev/pfcntr (pfm(7)) for programs that link -lpfcntr or preload
 * the library. It defines the C library functions a pfm(7) program calls on the device --
 * open, open64, openat, ioctl, read, close and the _FORTIFY_SOURCE forms __open_2, __open64_2,
 * __read_chk -- and only dispatches: the device's descriptors go to libperfcompat.so.1's private
 * entry points perfcompat_pfm_* (capi/src/pfm.rs, version PERFCOMPAT_PRIVATE_1), which hold all
 * the logic, the argument copying and the panic boundary; everything else goes to the next
 * definition, the C library's, found with dlsym(RTLD_NEXT) in the constructor.
 *
 * The library is C because only C defines variadic functions (open's mode, ioctl's argument)
 * with the C library's own prototypes. It needs libperfcompat.so.1 (DT_NEEDED): a program that
 * uses libcpc and the device has one engine and one overflow signal handler. The interposers
 * carry no symbol version (pfcntr.map is an anonymous version script): glibc's loader binds a
 * program's versioned reference (open@GLIBC_2.2.5 on x86-64, open@GLIBC_2.17 on arm64) to an
 * unversioned definition that comes first in the search order, so one build serves every
 * architecture.
 *
 * Cost for a program that never opens the device: one atomic load per read, ioctl and close
 * (the engine's count of open devices), one call into libperfcompat per open. */
#undef _FORTIFY_SOURCE /* this file defines what the fortified headers would redirect */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* libperfcompat.so.1's private entry points (capi/src/pfm.rs). Each returns 0 when the call is
 * not the device's (pass it on), else 1 with the result in the last argument and errno set on
 * failure. */
extern const size_t *perfcompat_pfm_open_count(void);
extern int perfcompat_pfm_open(const char *path, int flags, int *fd);
extern int perfcompat_pfm_read(int fd, void *buf, size_t count, ssize_t *n);
extern int perfcompat_pfm_ioctl(int fd, unsigned long request, void *arg, int *r);
extern int perfcompat_pfm_close(int fd);

/* The fortified forms: declared by the C library's headers only under _FORTIFY_SOURCE. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*open2_fn)(const char *, int);
typedef int (*ioctl_fn)(int, unsigned long, ...);
typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*read_chk_fn)(int, void *, size_t, size_t);
typedef int (*close_fn)(int);

enum { OPEN, OPEN64, OPENAT, IOCTL, READ, CLOSE, OPEN_2, OPEN64_2, READ_CHK, NREAL };
static const char *const names[NREAL] = {
    "open", "open64", "openat", "ioctl", "read", "close", "__open_2", "__open64_2", "__read_chk",
};
/* The next definitions, and the engine's count of open devices. */
typedef void (*any_fn)(void);
static any_fn real_fns[NREAL];
static const size_t *open_count;

/* The next definition of function i, looked up once (NULL when there is none: the C library
 * comes before this library in the search order, and the system call serves). */
__attribute__((noinline)) static any_fn lookup(int i) {
    any_fn f;
    void *p = dlsym(RTLD_NEXT, names[i]);
    memcpy(&f, &p, sizeof f); /* POSIX: dlsym's result converts to a function pointer */
    __atomic_store_n(&real_fns[i], f, __ATOMIC_RELAXED);
    return f;
}

static inline any_fn real(int i) {
    any_fn f = __atomic_load_n(&real_fns[i], __ATOMIC_RELAXED);
    return f ? f : lookup(i);
}

__attribute__((noinline)) static const size_t *count_pointer(void) {
    const size_t *c = perfcompat_pfm_open_count();
    __atomic_store_n(&open_count, c, __ATOMIC_RELAXED);
    return c;
}

/* Whether any device is open (before the constructor too: another library's may call here). */
static inline int any_open(void) {
    const size_t *c = __atomic_load_n(&open_count, __ATOMIC_RELAXED);
    if (!c)
        c = count_pointer();
    return __builtin_expect(__atomic_load_n(c, __ATOMIC_ACQUIRE) != 0, 0);
}

/* Look everything up at load time, so that no later call (in a signal handler, say) runs
 * dlsym. */
__attribute__((constructor)) static void resolve(void) {
    for (int i = 0; i < NREAL; i++)
        real(i);
    any_open();
}

/* read, close and ioctl: while no device is open they end in a tail call to the C library's,
 * with no frame of ours left to return through (on the benchmark VM a return of ours after the
 * C library's system call added about 20 ns to every read; benches/c/readcost.c). The device's
 * path is out of line. */

/* open's mode argument, read into `mode` when the flags create a file (in the variadic
 * function itself, whose last named argument is `flags`). */
#define MODE_ARG(flags, mode) \
    do { \
        if (((flags) & O_CREAT) != 0 || ((flags) & O_TMPFILE) == O_TMPFILE) { \
            va_list ap_; \
            va_start(ap_, flags); \
            (mode) = va_arg(ap_, mode_t); \
            va_end(ap_); \
        } \
    } while (0)

/* open, open64 (i) and openat: the device, else the next definition. The absolute path
 * "/dev/pfcntr" is the device whatever dirfd is. */
static int open_any(int i, int dirfd, const char *path, int flags, mode_t mode) {
    int fd;
    if (perfcompat_pfm_open(path, flags, &fd))
        return fd;
    if (i == OPENAT) {
        openat_fn f = (openat_fn)real(OPENAT);
        return f ? f(dirfd, path, flags, mode) : (int)syscall(SYS_openat, dirfd, path, flags, mode);
    }
    open_fn f = (open_fn)real(i);
    return f ? f(path, flags, mode) : (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

int open(const char *path, int flags, ...) {
    mode_t mode = 0;
    MODE_ARG(flags, mode);
    return open_any(OPEN, AT_FDCWD, path, flags, mode);
}

int open64(const char *path, int flags, ...) {
    mode_t mode = 0;
    MODE_ARG(flags, mode);
    return open_any(OPEN64, AT_FDCWD, path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...) {
    mode_t mode = 0;
    MODE_ARG(flags, mode);
    return open_any(OPENAT, dirfd, path, flags, mode);
}

/* What open without a mode becomes in a program built with _FORTIFY_SOURCE when the flags are
 * not a constant. */
static int open_2(int i, const char *path, int flags) {
    int fd;
    if (perfcompat_pfm_open(path, flags, &fd))
        return fd;
    open2_fn f = (open2_fn)real(i);
    return f ? f(path, flags) : (int)syscall(SYS_openat, AT_FDCWD, path, flags, 0);
}

int __open_2(const char *path, int flags) { return open_2(OPEN_2, path, flags); }

int __open64_2(const char *path, int flags) { return open_2(OPEN64_2, path, flags); }

static ssize_t read_next(int fd, void *buf, size_t count) {
    read_fn f = (read_fn)real(READ);
    return f ? f(fd, buf, count) : syscall(SYS_read, fd, buf, count);
}

__attribute__((noinline)) static ssize_t read_device(int fd, void *buf, size_t count) {
    ssize_t n;
    return perfcompat_pfm_read(fd, buf, count, &n) ? n : read_next(fd, buf, count);
}

ssize_t read(int fd, void *buf, size_t count) {
    return any_open() ? read_device(fd, buf, count) : read_next(fd, buf, count);
}

static ssize_t read_chk_next(int fd, void *buf, size_t nbytes, size_t buflen) {
    read_chk_fn f = (read_chk_fn)real(READ_CHK);
    if (f)
        return f(fd, buf, nbytes, buflen);
    if (nbytes > buflen)
        abort();
    return syscall(SYS_read, fd, buf, nbytes);
}

__attribute__((noinline)) static ssize_t read_chk_device(int fd, void *buf, size_t nbytes,
                                                        size_t buflen) {
    ssize_t n;
    if (nbytes <= buflen && perfcompat_pfm_read(fd, buf, nbytes, &n))
        return n;
    return read_chk_next(fd, buf, nbytes, buflen);
}

/* What read into a buffer of known size becomes under _FORTIFY_SOURCE (the C library's calls
 * its read internally, past ours): the device after the same check; a count over the buffer's
 * size goes to the C library's, which ends the program. */
ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen) {
    return any_open() ? read_chk_device(fd, buf, nbytes, buflen)
                      : read_chk_next(fd, buf, nbytes, buflen);
}

/* The device is disabled and forgotten, then the descriptor closed. */
int close(int fd) {
    if (any_open())
        perfcompat_pfm_close(fd);
    close_fn f = (close_fn)real(CLOSE);
    return f ? f(fd) : (int)syscall(SYS_close, fd);
}

static int ioctl_next(int fd, unsigned long request, void *arg) {
    ioctl_fn f = (ioctl_fn)real(IOCTL);
    return f ? f(fd, request, arg) : (int)syscall(SYS_ioctl, fd, request, arg);
}

__attribute__((noinline)) static int ioctl_device(int fd, unsigned long request, void *arg) {
    int r;
    return perfcompat_pfm_ioctl(fd, request, arg, &r) ? r : ioctl_next(fd, request, arg);
}

/* Every pfm(7) request takes at most one pointer; other requests pass their argument on as the
 * C library's variadic ioctl takes it (one word). */
int ioctl(int fd, unsigned long request, ...) {
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return any_open() ? ioctl_device(fd, request, arg) : ioctl_next(fd, request, arg);
}
