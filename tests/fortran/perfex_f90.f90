! libperfex(3F) from free-form Fortran through the `perfex` module (fortran/perfex.f90): the
! compiler checks every call against the module's interfaces. The same calls in the same order
! as perfex_f77.f, so both print the same standard error: the man page's usage pattern (start,
! work, read, compare generations, print counts and costs, load cost tables), then the
! documented error cases, each a negative result.
!
! Arguments: mode good bad
!   mode "sim":  PERFCOMPAT_BACKEND=sim:r10000, counts injected with the test hook (both its
!                Fortran and its C entry point) and checked exactly;
!   mode "perf": PERFCOMPAT_BACKEND=perf, event 25 mapped to page-faults by PERFCOMPAT_EVENTS,
!                pages of an allocatable array really touched, counts checked within bounds.
!   good, bad:   a good partial cost file and a malformed one.
program perfex_f90
  use, intrinsic :: iso_c_binding, only: c_int, c_long_long, c_int64_t, c_null_char
  use perfex
  implicit none

  integer, parameter :: page_words = 512 ! 8-byte words in a 4 KiB page
  integer(c_int) :: e0 = 0, e1 = 25, gen_start, gen_read, g2
  integer(c_long_long) :: c0, c1, x0, x1
  integer(c_long_long), parameter :: one = 1
  character(len=16) :: mode
  character(len=512) :: good, bad
  character(len=8) :: event
  logical :: sim
  integer :: nfail = 0
  ! One column a page; allocated once so that every column the work touches is fresh.
  integer(c_int64_t), allocatable :: buf(:, :)

  call get_command_argument(1, mode)
  call get_command_argument(2, good)
  call get_command_argument(3, bad)
  sim = mode == 'sim'
  allocate (buf(page_words, 802))

  ! The man page's pattern.
  gen_start = start_counters(e0, e1)
  call check(gen_start > 0, 'start_counters')
  call work(123456_c_int64_t, 2, 790)
  gen_read = read_counters(e0, c0, e1, c1)
  call check(gen_read == gen_start, 'generations differ')
  call check(print_counters(e0, c0, e1, c1) == gen_read, 'print_counters')
  call check(print_costs(e0, c0, e1, c1) == gen_read, 'print_costs')
  if (sim) then
    call check(c0 == 123456, 'cycles')
    call check(c1 == 789, 'event 25')
  else
    call check(c0 > 0, 'cycles')
    call check(c1 >= 789 .and. c1 < 789 + 50, 'page faults')
  end if

  ! A second pair counts its own interval, with a new generation.
  g2 = start_counters(e0, e1)
  call check(g2 > 0 .and. g2 /= gen_start, 'second start')
  call work(1000_c_int64_t, 791, 800)
  call check(read_counters(e0, c0, e1, c1) == g2, 'second read')
  if (sim) then
    call check(c0 == 1000 .and. c1 == 10, 'second counts')
  else
    call check(c1 >= 10 .and. c1 < 10 + 50, 'second faults')
  end if

  ! Errors: negative results, the reason on standard error.
  x0 = -7
  x1 = -7
  call check(read_counters(e0, x0, e1, x1) < 0, 'read without start')
  call check(x0 == -7 .and. x1 == -7, 'counts written')
  call check(start_counters(9, 10) < 0, 'conflict 9 10')
  call check(start_counters(e0, 40) < 0, 'event 40')
  call check(start_counters(e0, e1) > 0, 'third start')
  call check(read_counters(e0, c0, 26, c1) < 0, 'read other events')
  call check(read_counters(e0, c0, e1, c1) > 0, 'third read')
  call check(print_counters(e0, one, 99, one) < 0, 'print event 99')

  ! Cost tables: the good file is used by the next print_costs; bad, missing and blank names
  ! are refused and it stays in force.
  call check(load_costs(good) > 0, 'load good costs')
  call check(print_costs(e0, 195000000_c_long_long, 26, 1000000_c_long_long) > 0, &
             'print_costs good')
  call check(load_costs(bad) < 0, 'load bad costs')
  call check(load_costs('/nonexistent/perfex.costs') < 0, 'load missing costs')
  call check(load_costs('    ') < 0, 'load blank name')
  call check(print_costs(e0, 195000000_c_long_long, 26, 1000000_c_long_long) > 0, &
             'print_costs after bad')
  call check(print_costs(e0, one, -1, one) < 0, 'print_costs event -1')

  ! The test hook: an unknown event on the emulation; nothing to advance on perf. Event 21
  ! has no Linux equivalent unless mapped.
  event = 'nonesuch'
  if (sim) then
    call check(perfcompat_sim_advance(event, one) < 0, 'advance unknown')
  else
    call check(perfcompat_sim_advance_c('0'//c_null_char, one) < 0, 'advance on perf')
    call check(start_counters(e0, 21) < 0, 'unmapped 21')
  end if

  deallocate (buf)
  write (*, '(a, a, i0, a)') trim(mode), ': ', nfail, ' failures'
  if (nfail /= 0) error stop 1

contains

  ! The work between start_counters and read_counters. Emulated: the counts happen through
  ! the hook. Real: write one word of each of columns first..last of buf; none shares a page
  ! with other data (both ends are left alone), so each page faults once.
  subroutine work(cycles, first, last)
    integer(c_int64_t), intent(in) :: cycles
    integer, intent(in) :: first, last
    integer(c_int64_t) :: pages
    integer :: j

    pages = last - first + 1
    if (sim) then
      call check(perfcompat_sim_advance_c('0'//c_null_char, cycles) == 1, 'advance cycles')
      event = '25' ! blank-padded: the library trims the trailing blanks
      call check(perfcompat_sim_advance(event, pages) == 1, 'advance 25')
    else
      do j = first, last
        buf(1, j) = j
      end do
      call check(sum(buf(1, first:last)) == (first + last) * pages / 2, 'pages')
    end if
  end subroutine work

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what

    if (.not. ok) then
      write (*, '(2a)') 'FAIL: ', what
      nfail = nfail + 1
    end if
  end subroutine check
end program perfex_f90
