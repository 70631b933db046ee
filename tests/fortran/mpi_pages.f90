! A Fortran MPI program for the PMPI layer test (capi/tests/mpi.rs): rank r touches
! 1000 * (r + 1) fresh pages of an allocated array, one REAL(8) every 4096 bytes.
program mpi_pages
  use mpi
  implicit none
  integer :: ierr, rank, n, i
  real(8), allocatable :: a(:)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  n = 1000 * (rank + 1)
  allocate(a(512 * n + 512))
  do i = 1, n
    a(1 + 512 * (i - 1)) = real(i, 8)
  end do
  print '(a,i0,a,f0.0)', 'rank ', rank, ': 0 failures; checksum ', a(1 + 512 * (n - 1))
  deallocate(a)
  call MPI_Finalize(ierr)
end program mpi_pages
