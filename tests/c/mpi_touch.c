/* An MPI program for the perfex --mpi test (tests/perfex_mpi.rs), linked with nothing of
 * perfcompat: rank r touches PAGES * (r + 1) fresh pages (PAGES from argv[1], default 1000)
 * between MPI_Init and MPI_Finalize. Prints "rank R: 0 failures". */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

int main(int argc, char **argv) {
    int rank = 0;
    long pages = argc > 1 ? atol(argv[1]) : 1000;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t n = (size_t)pages * (size_t)(rank + 1);
    char *p = n ? mmap(NULL, n * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                : NULL;
    if (n && p == MAP_FAILED) {
        printf("rank %d: 1 failures (mmap)\n", rank);
        return 1;
    }
    if (n)
        madvise(p, n * 4096, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < n; i++)
        ((volatile char *)p)[i * 4096] = 1;
    printf("rank %d: 0 failures\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
