/* The PMPI layer's overhead (benches/mpi): rank 0 prints the nanoseconds from before MPI_Init
 * to after MPI_Finalize. Run with and without libperfcompat-mpi.so preloaded. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <time.h>

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    int rank = 0;
    long long t0 = now();
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Finalize();
    long long t1 = now();
    if (rank == 0)
        printf("%lld\n", t1 - t0);
    return 0;
}
