/* libperfex(3C) usage pattern: start, work, read, compare generations, print counts and
 * costs, load cost tables; then the documented error cases. argv[1]: "sim" (counts injected
 * through the emulated PMU, exact) or "perf" (event 25 mapped to page-faults by
 * PERFCOMPAT_EVENTS, pages really touched). argv[2], argv[3]: a good and a malformed cost
 * file. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include "libperfex.h"
#include "perfcompat.h"

static int fails;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); fails++; } } while (0)

static void work(int sim, long long cycles, int pages) {
    if (sim) {
        perfcompat_sim_advance("0", (uint64_t)cycles);
        perfcompat_sim_advance("25", (uint64_t)pages);
    } else {
        volatile char *p = (volatile char *)mmap(NULL, (size_t)pages * 4096, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        madvise((void *)p, (size_t)pages * 4096, MADV_NOHUGEPAGE);
        for (int i = 0; i < pages; i++) p[i * 4096] = 1;
        munmap((void *)p, (size_t)pages * 4096);
    }
}

int main(int argc, char **argv) {
    int sim = argc > 1 && strcmp(argv[1], "sim") == 0;
    int e0 = 0, e1 = 25, gen_start, gen_read;
    long long c0 = -1, c1 = -1;

    if ((gen_start = start_counters(e0, e1)) < 0) perror("start_counters");
    CHECK(gen_start > 0);
    work(sim, 123456, 789);
    if ((gen_read = read_counters(e0, &c0, e1, &c1)) < 0) perror("read_counters");
    CHECK(gen_read == gen_start);
    CHECK(print_counters(e0, c0, e1, c1) == gen_read);
    CHECK(print_costs(e0, c0, e1, c1) == gen_read);
    if (sim) {
        CHECK(c0 == 123456);
        CHECK(c1 == 789);
    } else {
        CHECK(c0 > 0);
        CHECK(c1 >= 789 && c1 < 789 + 50);
    }

    /* A second pair counts only its own interval, with a new generation. */
    int g2 = start_counters(e0, e1);
    CHECK(g2 > 0 && g2 != gen_start);
    work(sim, 1000, 10);
    CHECK(read_counters(e0, &c0, e1, &c1) == g2);
    if (sim) CHECK(c0 == 1000 && c1 == 10);
    else CHECK(c1 >= 10 && c1 < 10 + 50);

    /* Errors: each a negative return with errno and a message on stderr. */
    errno = 0;
    CHECK(read_counters(e0, &c0, e1, &c1) < 0 && errno == EINVAL);      /* read without start */
    errno = 0;
    CHECK(start_counters(9, 10) < 0 && errno == EINVAL);                 /* conflicting counters */
    errno = 0;
    CHECK(start_counters(0, 40) < 0 && errno == EINVAL);                 /* out of range */
    CHECK(start_counters(0, 25) > 0);
    errno = 0;
    CHECK(read_counters(0, &c0, 26, &c1) < 0 && errno == EINVAL);       /* not the started events */
    errno = 0;
    CHECK(read_counters(0, NULL, 25, &c1) < 0 && errno == EFAULT);      /* NULL pointer */
    CHECK(read_counters(0, &c0, 25, &c1) > 0);                          /* still readable */
    errno = 0;
    CHECK(print_counters(0, 1, 99, 2) < 0 && errno == EINVAL);

    /* Cost tables: a good file is used by the next print_costs; a bad or missing one is
     * refused and the loaded table stays in force. */
    if (argc > 3) {
        CHECK(load_costs(argv[2]) > 0);
        CHECK(print_costs(0, 195000000, 26, 1000000) > 0);
        errno = 0;
        CHECK(load_costs(argv[3]) < 0 && errno == EINVAL);
        errno = 0;
        CHECK(load_costs("/nonexistent/perfex.costs") < 0 && errno == ENOENT);
        errno = 0;
        CHECK(load_costs("/") < 0 && errno == EISDIR);           /* unreadable, even for root */
        errno = 0;
        CHECK(load_costs("") < 0 && errno == ENOENT);
        errno = 0;
        CHECK(load_costs(NULL) < 0 && errno == EFAULT);
        CHECK(print_costs(0, 195000000, 26, 1000000) > 0);
    }
    errno = 0;
    CHECK(print_costs(0, 1, -1, 2) < 0 && errno == EINVAL);
    if (!sim) {
        /* Event 21 (graduated FP instructions) has no Linux equivalent unless mapped. */
        errno = 0;
        CHECK(start_counters(0, 21) < 0 && errno == EINVAL);
    }

    printf("%s: %d failures\n", sim ? "sim" : "perf", fails);
    return fails != 0;
}
