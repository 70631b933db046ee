! perfex.f90: explicit interfaces to libperfex(3F) for modern Fortran, on perfcompat.
! SPDX-License-Identifier: MIT OR Apache-2.0
!
! The module holds interfaces only: it compiles to perfex.mod (and an object file with nothing
! in it), so a program needs `-I<dir of perfex.mod>` to compile and the library to link:
!
!     gfortran -c fortran/perfex.f90 -J<moddir>
!     gfortran prog.f90 -I<moddir> -L<libdir> -lperfcompat_capi     (later: -lperfex)
!
! Every interface names an external procedure, so gfortran calls the Fortran entry points the
! library exports (`start_counters_`, ...): arguments by reference, and for CHARACTER arguments
! a hidden trailing length, of which the library trims trailing blanks. Programs written for
! IRIX keep calling `start_counters(e0, e1)` as before; with the module the compiler checks
! the argument kinds (INTEGER(4) events, INTEGER(8) counts), which catches the classic
! `INTEGER c0` mistake and builds made with -fdefault-integer-8.
!
! Results: a positive generation number, or a negative value on error, with the reason on
! standard error (libperfex(3C), DIAGNOSTICS).
module perfex
  use, intrinsic :: iso_c_binding, only: c_int, c_long_long, c_int64_t, c_char
  implicit none
  private
  public :: start_counters, read_counters, print_counters, print_costs, load_costs
  public :: perfcompat_sim_advance, perfcompat_sim_advance_c

  interface
    ! Start counting R10000 events e0 and e1 (0-31; 0-15 count on hardware counter 0, 16-31
    ! on counter 1, so two events of one half conflict) on the calling thread, from zero.
    ! T5_EVENT0 and T5_EVENT1 in the environment override the arguments.
    function start_counters(e0, e1) result(generation)
      import :: c_int
      integer(c_int), intent(in) :: e0, e1
      integer(c_int) :: generation
    end function start_counters

    ! Read the counts of e0 and e1 since the matching start_counters into c0 and c1, and stop.
    ! Correct programs compare the result with the generation start_counters returned.
    function read_counters(e0, c0, e1, c1) result(generation)
      import :: c_int, c_long_long
      integer(c_int), intent(in) :: e0, e1
      integer(c_long_long), intent(out) :: c0, c1
      integer(c_int) :: generation
    end function read_counters

    ! Print the counts to standard error; no effect on the counters.
    function print_counters(e0, c0, e1, c1) result(generation)
      import :: c_int, c_long_long
      integer(c_int), intent(in) :: e0, e1
      integer(c_long_long), intent(in) :: c0, c1
      integer(c_int) :: generation
    end function print_counters

    ! Print the counts with their time estimates under the cost table in force, most costly
    ! first, and the derived statistics, to standard error.
    function print_costs(e0, c0, e1, c1) result(generation)
      import :: c_int, c_long_long
      integer(c_int), intent(in) :: e0, e1
      integer(c_long_long), intent(in) :: c0, c1
      integer(c_int) :: generation
    end function print_costs

    ! Load a (partial) cost table, in the format `perfex -t` prints, over the default one.
    ! All or nothing: on a negative result the table in force is unchanged.
    function load_costs(CostFileName) result(status)
      import :: c_int
      character(len=*), intent(in) :: CostFileName
      integer(c_int) :: status
    end function load_costs

    ! perfcompat extension, for tests on an emulated PMU (PERFCOMPAT_BACKEND=sim:r10000):
    ! n occurrences of event (an event number such as '25' or a name) happen now on this
    ! thread. Returns the number of bound counter sets that counted it, or -1.
    function perfcompat_sim_advance(event, n) result(hits)
      import :: c_int, c_int64_t
      character(len=*), intent(in) :: event
      integer(c_int64_t), intent(in) :: n
      integer(c_int) :: hits
    end function perfcompat_sim_advance

    ! The same hook through its C entry point: event must end with c_null_char.
    function perfcompat_sim_advance_c(event, n) result(hits) &
        bind(C, name="perfcompat_sim_advance")
      import :: c_int, c_int64_t, c_char
      character(kind=c_char), dimension(*), intent(in) :: event
      integer(c_int64_t), value, intent(in) :: n
      integer(c_int) :: hits
    end function perfcompat_sim_advance_c
  end interface
end module perfex
