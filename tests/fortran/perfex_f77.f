C     libperfex(3F) from fixed-form Fortran 77, as IRIX programs call
C     it: the functions declared EXTERNAL INTEGER*4, no module, every
C     argument by reference, the cost file name a blank-padded
C     CHARACTER variable. The man page's usage pattern (start, work,
C     read, compare generations, print counts and costs, load cost
C     tables), then the documented error cases, each a negative
C     result. perfex_f90.f90 makes the same calls in the same order,
C     so both print the same standard error.
C
C     Arguments: MODE GOOD BAD
C       MODE "sim":  PERFCOMPAT_BACKEND=sim:r10000, counts injected
C                    with PERFCOMPAT_SIM_ADVANCE and checked exactly;
C       MODE "perf": PERFCOMPAT_BACKEND=perf, event 25 mapped to
C                    page-faults by PERFCOMPAT_EVENTS, pages really
C                    touched, counts checked within bounds.
C       GOOD, BAD:   a good partial cost file and a malformed one.
      PROGRAM PFX77
      IMPLICIT NONE
      INTEGER*4 START_COUNTERS, READ_COUNTERS, PRINT_COUNTERS
      INTEGER*4 PRINT_COSTS, LOAD_COSTS, PERFCOMPAT_SIM_ADVANCE
      EXTERNAL START_COUNTERS, READ_COUNTERS, PRINT_COUNTERS
      EXTERNAL PRINT_COSTS, LOAD_COSTS, PERFCOMPAT_SIM_ADVANCE
      INTEGER E0, E1, E9, E10, E26, E40, E99, EM1, E21
      INTEGER GSTART, GREAD, G2
      INTEGER*8 C0, C1, X0, X1, ONE, NCYC1, NCYC2, BIGC, BIGM
      CHARACTER*16 MODE
      CHARACTER*512 GOOD, BAD
      CHARACTER*8 EVENT
      LOGICAL SIM
      INTEGER NFAIL
      COMMON /FAILS/ NFAIL
      DATA E0, E1, E9, E10, E26, E40, E99, EM1, E21
     &     / 0, 25, 9, 10, 26, 40, 99, -1, 21 /
      NFAIL = 0
      ONE = 1
      NCYC1 = 123456
      NCYC2 = 1000
      BIGC = 195000000
      BIGM = 1000000
      CALL GET_COMMAND_ARGUMENT(1, MODE)
      CALL GET_COMMAND_ARGUMENT(2, GOOD)
      CALL GET_COMMAND_ARGUMENT(3, BAD)
      SIM = MODE .EQ. 'sim'

C     The man page's pattern.
      GSTART = START_COUNTERS(E0, E1)
      CALL CHECK(GSTART .GT. 0, 'start_counters')
      CALL WORK(SIM, NCYC1, 2, 790)
      GREAD = READ_COUNTERS(E0, C0, E1, C1)
      CALL CHECK(GREAD .EQ. GSTART, 'generations differ')
      CALL CHECK(PRINT_COUNTERS(E0, C0, E1, C1) .EQ. GREAD,
     &           'print_counters')
      CALL CHECK(PRINT_COSTS(E0, C0, E1, C1) .EQ. GREAD,
     &           'print_costs')
      IF (SIM) THEN
         CALL CHECK(C0 .EQ. 123456, 'cycles')
         CALL CHECK(C1 .EQ. 789, 'event 25')
      ELSE
         CALL CHECK(C0 .GT. 0, 'cycles')
         CALL CHECK(C1 .GE. 789 .AND. C1 .LT. 789 + 50, 'page faults')
      END IF

C     A second pair counts its own interval, with a new generation.
      G2 = START_COUNTERS(E0, E1)
      CALL CHECK(G2 .GT. 0 .AND. G2 .NE. GSTART, 'second start')
      CALL WORK(SIM, NCYC2, 791, 800)
      CALL CHECK(READ_COUNTERS(E0, C0, E1, C1) .EQ. G2, 'second read')
      IF (SIM) THEN
         CALL CHECK(C0 .EQ. 1000 .AND. C1 .EQ. 10, 'second counts')
      ELSE
         CALL CHECK(C1 .GE. 10 .AND. C1 .LT. 10 + 50, 'second faults')
      END IF

C     Errors: negative results, the reason on standard error.
      X0 = -7
      X1 = -7
      CALL CHECK(READ_COUNTERS(E0, X0, E1, X1) .LT. 0,
     &           'read without start')
      CALL CHECK(X0 .EQ. -7 .AND. X1 .EQ. -7, 'counts written')
      CALL CHECK(START_COUNTERS(E9, E10) .LT. 0, 'conflict 9 10')
      CALL CHECK(START_COUNTERS(E0, E40) .LT. 0, 'event 40')
      CALL CHECK(START_COUNTERS(E0, E1) .GT. 0, 'third start')
      CALL CHECK(READ_COUNTERS(E0, C0, E26, C1) .LT. 0,
     &           'read other events')
      CALL CHECK(READ_COUNTERS(E0, C0, E1, C1) .GT. 0, 'third read')
      CALL CHECK(PRINT_COUNTERS(E0, ONE, E99, ONE) .LT. 0,
     &           'print event 99')

C     Cost tables: the good file is used by the next PRINT_COSTS; bad,
C     missing and blank names are refused and it stays in force.
      CALL CHECK(LOAD_COSTS(GOOD) .GT. 0, 'load good costs')
      CALL CHECK(PRINT_COSTS(E0, BIGC, E26, BIGM) .GT. 0,
     &           'print_costs good')
      CALL CHECK(LOAD_COSTS(BAD) .LT. 0, 'load bad costs')
      CALL CHECK(LOAD_COSTS('/nonexistent/perfex.costs') .LT. 0,
     &           'load missing costs')
      CALL CHECK(LOAD_COSTS('    ') .LT. 0, 'load blank name')
      CALL CHECK(PRINT_COSTS(E0, BIGC, E26, BIGM) .GT. 0,
     &           'print_costs after bad')
      CALL CHECK(PRINT_COSTS(E0, ONE, EM1, ONE) .LT. 0,
     &           'print_costs event -1')

C     The test hook: an unknown event on the emulation; nothing to
C     advance on perf. Event 21 has no Linux equivalent unless mapped.
      EVENT = 'nonesuch'
      IF (SIM) THEN
         CALL CHECK(PERFCOMPAT_SIM_ADVANCE(EVENT, ONE) .LT. 0,
     &              'advance unknown')
      ELSE
         CALL CHECK(PERFCOMPAT_SIM_ADVANCE('0', ONE) .LT. 0,
     &              'advance on perf')
         CALL CHECK(START_COUNTERS(E0, E21) .LT. 0, 'unmapped 21')
      END IF

      WRITE (*, '(A, A, I0, A)') MODE(1:LEN_TRIM(MODE)), ': ', NFAIL,
     &   ' failures'
      IF (NFAIL .NE. 0) STOP 1
      END

C     The work between START_COUNTERS and READ_COUNTERS. Emulated: the
C     counts happen through the hook (PAGES columns' worth of event
C     25). Real: write one word of each of columns FIRST..LAST of a
C     static array of 4 KiB columns; none shares a page with another
C     variable (both ends are left alone), so each page faults once.
      SUBROUTINE WORK(SIM, CYCLES, FIRST, LAST)
      IMPLICIT NONE
      LOGICAL SIM
      INTEGER*8 CYCLES
      INTEGER FIRST, LAST
      INTEGER*4 PERFCOMPAT_SIM_ADVANCE
      EXTERNAL PERFCOMPAT_SIM_ADVANCE
      INTEGER*8 BUF(512, 802), PAGES, TOTAL
      COMMON /PAGES/ BUF
      CHARACTER*8 EVENT
      INTEGER J
      PAGES = LAST - FIRST + 1
      IF (SIM) THEN
         CALL CHECK(PERFCOMPAT_SIM_ADVANCE('0', CYCLES) .EQ. 1,
     &              'advance cycles')
C        Blank-padded: the library trims the trailing blanks.
         EVENT = '25'
         CALL CHECK(PERFCOMPAT_SIM_ADVANCE(EVENT, PAGES) .EQ. 1,
     &              'advance 25')
      ELSE
         DO 10 J = FIRST, LAST
            BUF(1, J) = J
   10    CONTINUE
         TOTAL = 0
         DO 20 J = FIRST, LAST
            TOTAL = TOTAL + BUF(1, J)
   20    CONTINUE
         CALL CHECK(TOTAL .EQ. (FIRST + LAST) * PAGES / 2, 'pages')
      END IF
      END

C     CHECK(OK, WHAT): count and report a failed check.
      INCLUDE 'check.f'
