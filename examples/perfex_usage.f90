! perfex_usage.f90: the libperfex(3F) usage pattern in modern Fortran with the `perfex` module
! (fortran/perfex.f90), which lets the compiler check every call: start the counters, run the
! user code, read them, compare the generations and abort on a mismatch, print the counts and
! their time estimates on standard error.
!
! Counts cycles (event 0) and secondary data cache misses (event 26) around a loop that streams
! through an array larger than the caches. T5_EVENT0 and T5_EVENT1 pick other events without
! recompiling.
!
! Build against an installed perfcompat (<prefix>/include holds perfex.mod, made by the same
! gfortran version, and <prefix>/lib holds libperfex.so):
!     gfortran perfex_usage.f90 -I<prefix>/include -L<prefix>/lib -Wl,-rpath,<prefix>/lib -lperfex
program perfex_usage
  use, intrinsic :: iso_c_binding, only: c_int, c_long_long
  use, intrinsic :: iso_fortran_env, only: error_unit, real64
  use perfex
  implicit none

  integer, parameter :: n = 4 * 1024 * 1024 ! doubles: 32 MiB
  integer(c_int) :: e0 = 0, e1 = 26, gen_start, gen_read
  integer(c_long_long) :: c0, c1
  real(real64), allocatable :: a(:)
  real(real64) :: s
  integer :: i

  allocate (a(n))

  gen_start = start_counters(e0, e1)
  if (gen_start < 0) error stop 'start_counters failed'

  ! user code
  do i = 1, n
    a(i) = i
  end do
  s = sum(a(::8)) ! one double of each 64-byte line

  gen_read = read_counters(e0, c0, e1, c1)
  if (gen_read < 0) error stop 'read_counters failed'

  if (gen_read /= gen_start) then
    write (error_unit, '(a)') 'lost counters!, aborting...'
    error stop 1
  end if

  ! do something with c0, c1
  if (print_counters(e0, c0, e1, c1) < 0) error stop 'print_counters failed'
  if (print_costs(e0, c0, e1, c1) < 0) error stop 'print_costs failed'
  print '(a, f0.0)', 'sum = ', s
  deallocate (a)
end program perfex_usage
