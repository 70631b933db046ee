/* libperfcompat-mpi.so: the PMPI layer of perfcompat. SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * Linked before the MPI library (mpicc prog.c -lperfcompat-mpi -lperfex) or preloaded
 * (mpirun -x LD_PRELOAD=.../libperfcompat-mpi.so ...), it counts every rank between MPI_Init
 * and MPI_Finalize and prints one report for the whole job on rank 0. Only what needs MPI is
 * here; what is counted and how the report looks is perfcompat's (perfcompat_mpi.h).
 *
 * - MPI_Init / MPI_Init_thread: PMPI first, then perfcompat_mpi_start() on the calling thread;
 *   it counts that thread and every thread and child process created after it (threads MPI
 *   started inside PMPI_Init are MPI's and are not counted).
 * - MPI_Finalize: every rank stops counting and writes its record, PMPI_Gather brings the
 *   records to rank 0 over MPI_COMM_WORLD (so it works wherever the job runs), rank 0 prints
 *   the report, then PMPI_Finalize.
 * - Fortran: Open MPI's Fortran bindings call PMPI_Init themselves, not MPI_Init, so the layer
 *   also defines the Fortran entry points (mpi_init_, mpi_init__, MPI_INIT, the _thread and
 *   Finalize ones, and Open MPI's mpi_f08 names) and forwards them to the MPI's pmpi_*; a
 *   start or a report happens once, whichever way the program comes in.
 * - A rank that cannot count (an event the host lacks) says why on its stderr and sends an
 *   empty record: the report names it as missing. MPI_Abort, or a rank killed by a signal,
 *   ends the job in mpirun before MPI_Finalize: no report is printed (README, "MPI"). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "perfcompat_mpi.h"

static int started;  /* 1 once counting started, 2 once reported */

static void start(void) {
    if (started)
        return;
    started = 1;
    perfcompat_mpi_start();
}

static void report(void) {
    int inited = 0, finalized = 0, rank = 0, size = 0;
    if (started != 1)
        return;
    started = 2;
    PMPI_Initialized(&inited);
    PMPI_Finalized(&finalized);
    if (!inited || finalized)
        return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    char *mine = calloc(1, PERFCOMPAT_MPI_RECORD_BYTES);
    char *all = rank == 0 ? calloc((size_t)size, PERFCOMPAT_MPI_RECORD_BYTES) : NULL;
    if (!mine || (rank == 0 && !all)) {
        fprintf(stderr, "perfcompat-mpi: rank %d: out of memory for the records\n", rank);
        /* Still take part in the gather, with an empty record. */
    }
    static char empty[PERFCOMPAT_MPI_RECORD_BYTES];
    if (mine)
        perfcompat_mpi_finish(rank, mine, PERFCOMPAT_MPI_RECORD_BYTES);
    PMPI_Gather(mine ? mine : empty, PERFCOMPAT_MPI_RECORD_BYTES, MPI_BYTE, all,
                PERFCOMPAT_MPI_RECORD_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 0 && all)
        perfcompat_mpi_report(all, size, PERFCOMPAT_MPI_RECORD_BYTES);
    free(mine);
    free(all);
}

int MPI_Init(int *argc, char ***argv) {
    int r = PMPI_Init(argc, argv);
    if (r == MPI_SUCCESS)
        start();
    return r;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int r = PMPI_Init_thread(argc, argv, required, provided);
    if (r == MPI_SUCCESS)
        start();
    return r;
}

int MPI_Finalize(void) {
    report();
    return PMPI_Finalize();
}

/* Fortran. MPI_Fint is the MPI's Fortran INTEGER. The pmpi_* entry points are weak: a C
 * program that never loads the MPI's Fortran library never calls these. */
#define FORTRAN_INIT(name, pname)                                       \
    extern void pname(MPI_Fint *ierr) __attribute__((weak));            \
    void name(MPI_Fint *ierr) {                                         \
        if (pname)                                                      \
            pname(ierr);                                                \
        if (!ierr || *ierr == MPI_SUCCESS)                              \
            start();                                                    \
    }
#define FORTRAN_INIT_THREAD(name, pname)                                          \
    extern void pname(MPI_Fint *req, MPI_Fint *prov, MPI_Fint *ierr)             \
        __attribute__((weak));                                                    \
    void name(MPI_Fint *req, MPI_Fint *prov, MPI_Fint *ierr) {                    \
        if (pname)                                                                \
            pname(req, prov, ierr);                                               \
        if (!ierr || *ierr == MPI_SUCCESS)                                        \
            start();                                                              \
    }
#define FORTRAN_FINALIZE(name, pname)                                   \
    extern void pname(MPI_Fint *ierr) __attribute__((weak));            \
    void name(MPI_Fint *ierr) {                                         \
        report();                                                       \
        if (pname)                                                      \
            pname(ierr);                                                \
    }

FORTRAN_INIT(mpi_init_, pmpi_init_)
FORTRAN_INIT(mpi_init__, pmpi_init__)
FORTRAN_INIT(MPI_INIT, PMPI_INIT)
FORTRAN_INIT_THREAD(mpi_init_thread_, pmpi_init_thread_)
FORTRAN_INIT_THREAD(mpi_init_thread__, pmpi_init_thread__)
FORTRAN_INIT_THREAD(MPI_INIT_THREAD, PMPI_INIT_THREAD)
FORTRAN_FINALIZE(mpi_finalize_, pmpi_finalize_)
FORTRAN_FINALIZE(mpi_finalize__, pmpi_finalize__)
FORTRAN_FINALIZE(MPI_FINALIZE, PMPI_FINALIZE)
#ifdef OPEN_MPI
/* Open MPI's `use mpi_f08` entry points (their IERROR is optional: NULL when absent). */
FORTRAN_INIT(mpi_init_f08_, pmpi_init_f08_)
FORTRAN_INIT_THREAD(mpi_init_thread_f08_, pmpi_init_thread_f08_)
FORTRAN_FINALIZE(mpi_finalize_f08_, pmpi_finalize_f08_)
#endif
