/* fork() and the counters: the child starts clean (it cannot read, restart or stop the
 * parent's counters, whose descriptors it inherited), can count its own work, and nothing it
 * does reaches the parent's counts. Run on perf with event 25 mapped to page-faults. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "libcpc.h"
#include "libperfex.h"

static int fails;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s (errno %d)\n", __FILE__, __LINE__, #c, errno); fails++; } } while (0)

static void touch(int pages) {
    size_t len = (size_t)pages * 4096;
    volatile char *p = (volatile char *)mmap(NULL, len, PROT_READ | PROT_WRITE,
                                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise((void *)p, len, MADV_NOHUGEPAGE);
    for (int i = 0; i < pages; i++) p[i * 4096] = 1;
    munmap((void *)p, len);
}

static uint64_t sample(cpc_t *cpc, cpc_set_t *set, cpc_buf_t *buf) {
    uint64_t v = 0;
    if (cpc_set_sample(cpc, set, buf) != 0 || cpc_buf_get(cpc, buf, 0, &v) != 0) return UINT64_MAX;
    return v;
}

int main(void) {
    long long c0, c1;
    CHECK(start_counters(0, 25) > 0);
    touch(100);
    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    cpc_set_t *set = cpc ? cpc_set_create(cpc) : NULL;
    CHECK(set && cpc_set_add_request(cpc, set, "page-faults", 0, CPC_COUNT_USER, 0, NULL) == 0);
    cpc_buf_t *buf = cpc_buf_create(cpc, set);
    CHECK(buf && cpc_bind_curlwp(cpc, set, 0) == 0);
    uint64_t bound_at = sample(cpc, set, buf);

    pid_t pid = fork();
    if (pid == 0) {
        /* The child: nothing of the parent's counting is its own. */
        errno = 0;
        CHECK(read_counters(0, &c0, 25, &c1) < 0 && errno == EINVAL);
        errno = 0;
        CHECK(cpc_set_sample(cpc, set, buf) == -1 && errno == EINVAL);
        CHECK(cpc_set_restart(cpc, set) == -1);
        CHECK(cpc_disable(cpc) == 0); /* no set of its own: nothing to do, no error */
        /* It counts its own work from a start of its own. */
        CHECK(start_counters(0, 25) > 0);
        touch(50);
        CHECK(read_counters(0, &c0, 25, &c1) > 0 && c1 >= 50 && c1 < 50 + 40);
        /* Unbinding the inherited set closes the child's copies only; binding again counts
         * the child. */
        cpc_unbind(cpc, set);
        CHECK(cpc_bind_curlwp(cpc, set, 0) == 0);
        uint64_t a = sample(cpc, set, buf);
        touch(30);
        uint64_t b = sample(cpc, set, buf);
        CHECK(a != UINT64_MAX && b - a >= 30 && b - a < 30 + 40);
        printf("child: %d failures\n", fails);
        fflush(stdout);
        _exit(fails != 0);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* The parent's counters kept running through all that, and counted only the parent. */
    touch(200);
    CHECK(read_counters(0, &c0, 25, &c1) > 0 && c1 >= 300 && c1 < 300 + 60);
    uint64_t now = sample(cpc, set, buf);
    CHECK(bound_at != UINT64_MAX && now - bound_at >= 200 && now - bound_at < 200 + 60);
    printf("parent: counts %lld and %llu; %d failures\n", c1,
           (unsigned long long)(now - bound_at), fails);
    return fails != 0;
}
