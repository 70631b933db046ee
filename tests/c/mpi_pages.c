/* An MPI program whose ranks do known, different amounts of work, for the PMPI layer and
 * perfex --mpi tests (capi/tests/mpi.rs). Rank r touches 1000 fresh pages on its main thread
 * and starts r threads that touch 1000 fresh pages each: 1000 * (r + 1) page faults, on r + 1
 * threads. Modes (argv[1]):
 *   pages      the above (default);
 *   sim EVENT  injects 1000 * (r + 1) occurrences of EVENT with perfcompat_sim_advance instead
 *              (on an emulated PMU), 1000 on each thread;
 *   abort      as pages, then rank 1 calls MPI_Abort;
 *   die        as pages, then rank 1 kills itself with SIGKILL;
 *   libperfex  as pages, and the main thread also counts itself with start_counters(0, 25)
 *              and read_counters: event 25 (mapped to page faults) must see its 1000 pages.
 * Each rank prints "rank R: N failures". */
#define _GNU_SOURCE
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "libperfex.h"
#include "perfcompat.h"

#define PAGES 1000
static const char *mode = "pages", *event = "0";

static void *work(void *arg) {
    (void)arg;
    if (strcmp(mode, "sim") == 0) {
        perfcompat_sim_advance(event, PAGES);
        return NULL;
    }
    char *p = mmap(NULL, (size_t)PAGES * 4096, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return (void *)1;
    madvise(p, (size_t)PAGES * 4096, MADV_NOHUGEPAGE);
    for (int i = 0; i < PAGES; i++)
        ((volatile char *)p)[(size_t)i * 4096] = 1;
    munmap(p, (size_t)PAGES * 4096);
    return NULL;
}

int main(int argc, char **argv) {
    int rank = 0, fails = 0;
    if (argc > 1)
        mode = argv[1];
    if (argc > 2)
        event = argv[2];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int lp = strcmp(mode, "libperfex") == 0;
    int gen = lp ? start_counters(0, 25) : 0;
    if (gen < 0) {
        fprintf(stderr, "rank %d: start_counters failed\n", rank);
        fails++;
    }
    pthread_t t[64];
    for (int k = 0; k < rank && k < 64; k++)
        if (pthread_create(&t[k], NULL, work, NULL) != 0)
            fails++;
    if (work(NULL))
        fails++;
    for (int k = 0; k < rank && k < 64; k++) {
        void *r;
        pthread_join(t[k], &r);
        if (r)
            fails++;
    }
    if (lp) {
        long long c0 = 0, c1 = 0;
        int g = read_counters(0, &c0, 25, &c1);
        /* Its own thread only: 1000 pages and a few more (stack, libraries). */
        if (g != gen || c1 < PAGES || c1 > PAGES + PAGES / 20) {
            fprintf(stderr, "rank %d: libperfex read generation %d (started %d), %lld faults\n",
                    rank, g, gen, c1);
            fails++;
        }
    }
    printf("rank %d: %d failures\n", rank, fails);
    fflush(stdout);
    if (strcmp(mode, "abort") == 0 && rank == 1)
        MPI_Abort(MPI_COMM_WORLD, 3);
    if (strcmp(mode, "die") == 0 && rank == 1)
        raise(SIGKILL);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return fails != 0;
}
