/* A program with a seccomp filter of its own, for tests/cputrack.rs (issue 44 item 5): what it
 * sees must be the same with and without cputrack. No libseccomp: raw BPF.
 *   trace N:  its filter returns SECCOMP_RET_TRACE|1 for getppid and SECCOMP_RET_TRACE|2 for
 *             getpgrp (getpgid where there is no getpgrp, arm64): both must fail with ENOSYS
 *             (no tracer asked for them); then N fresh pages. Exits 1 if a call did not fail
 *             so, 0 otherwise.
 *   prctl N M: its filter returns SECCOMP_RET_TRACE|7 for every prctl, the private one that
 *             libcpc's cpc_disable/cpc_enable make included; then cpc_disable's prctl, N fresh
 *             pages, cpc_enable's prctl, M fresh pages. Prints each prctl's result; exits 0.
 *   status:   prints its PPid, TracerPid, Seccomp, Seccomp_filters, NoNewPrivs lines and the
 *             result of ptrace(PTRACE_TRACEME) ("PTRACE_TRACEME: 0" or "PTRACE_TRACEME: -1
 *             EPERM"). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "pages.h"

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "x86_64 or aarch64"
#endif

#ifdef SYS_getpgrp
#define PGRP() syscall(SYS_getpgrp)
#define SYS_PGRP SYS_getpgrp
#else
#define PGRP() syscall(SYS_getpgid, 0)
#define SYS_PGRP SYS_getpgid
#endif

/* libcpc's private prctl options (src/api/pctx/hear.rs). */
#define CPC_DISABLE 0x50435444UL
#define CPC_ENABLE 0x50435445UL

static void install(const struct sock_filter *code, unsigned short len) {
    struct sock_fprog prog = { len, (struct sock_filter *)code };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) { perror("PR_SET_NO_NEW_PRIVS"); exit(98); }
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) { perror("PR_SET_SECCOMP"); exit(98); }
}

#define LD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define JEQ(k, t, f) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (k), (t), (f))
#define RET(k) BPF_STMT(BPF_RET | BPF_K, (k))

static int fails_enosys(const char *name, long r) {
    int e = errno;
    printf("%s %ld %s\n", name, r, r == -1 ? strerror(e) : "-");
    return r == -1 && e == ENOSYS;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 2 && strcmp(argv[1], "trace") == 0) {
        static const struct sock_filter f[] = {
            LD(offsetof(struct seccomp_data, arch)),
            JEQ(ARCH, 0, 5),
            LD(offsetof(struct seccomp_data, nr)),
            JEQ(SYS_getppid, 0, 1),
            RET(SECCOMP_RET_TRACE | 1),
            JEQ(SYS_PGRP, 0, 1),
            RET(SECCOMP_RET_TRACE | 2),
            RET(SECCOMP_RET_ALLOW),
        };
        install(f, sizeof f / sizeof f[0]);
        int ok = fails_enosys("getpgrp", PGRP());
        ok &= fails_enosys("getppid", syscall(SYS_getppid));
        touch(atol(argv[2]));
        ok &= fails_enosys("getppid", syscall(SYS_getppid));
        ok &= fails_enosys("getpgrp", PGRP());
        return ok ? 0 : 1;
    }
    if (argc > 3 && strcmp(argv[1], "prctl") == 0) {
        static const struct sock_filter f[] = {
            LD(offsetof(struct seccomp_data, arch)),
            JEQ(ARCH, 0, 3),
            LD(offsetof(struct seccomp_data, nr)),
            JEQ(SYS_prctl, 0, 1),
            RET(SECCOMP_RET_TRACE | 7),
            RET(SECCOMP_RET_ALLOW),
        };
        install(f, sizeof f / sizeof f[0]);
        long r = syscall(SYS_prctl, CPC_DISABLE, 0, 0, 0, 0);
        printf("disable %ld %s\n", r, r == -1 ? strerror(errno) : "-");
        touch(atol(argv[2]));
        r = syscall(SYS_prctl, CPC_ENABLE, 0, 0, 0, 0);
        printf("enable %ld %s\n", r, r == -1 ? strerror(errno) : "-");
        touch(atol(argv[3]));
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "status") == 0) {
        FILE *f = fopen("/proc/self/status", "r");
        if (!f) { perror("/proc/self/status"); return 99; }
        char line[256];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "PPid:", 5) == 0 || strncmp(line, "TracerPid:", 10) == 0 || strncmp(line, "Seccomp:", 8) == 0 ||
                strncmp(line, "Seccomp_filters:", 16) == 0 || strncmp(line, "NoNewPrivs:", 11) == 0)
                fputs(line, stdout);
        }
        fclose(f);
        long r = ptrace(PTRACE_TRACEME, 0, NULL, NULL);
        if (r == 0) printf("PTRACE_TRACEME: 0\n");
        else printf("PTRACE_TRACEME: -1 %s\n", errno == EPERM ? "EPERM" : strerror(errno));
        return 0;
    }
    fprintf(stderr, "usage: cputrack_seccomp trace N | prctl N M | status\n");
    return 2;
}
