C     One event in both arguments, from fixed-form Fortran 77 (the
C     functions EXTERNAL INTEGER*4, every argument by reference), as
C     legacy callers counted cycles: START_COUNTERS(0, 0) and
C     READ_COUNTERS(0, C0, 0, C1). The same calls in the same order as
C     tests/c/perfex_same_event.c, so both print the same standard
C     error (one golden file).
C
C     Argument: MODE
C       "sim":  PERFCOMPAT_BACKEND=sim:r10000, cycles injected with
C               PERFCOMPAT_SIM_ADVANCE and checked exactly;
C       "perf": PERFCOMPAT_BACKEND=perf, event 0 mapped to page-faults
C               by PERFCOMPAT_EVENTS, pages really touched.
      PROGRAM PFXSAME
      IMPLICIT NONE
      INTEGER*4 START_COUNTERS, READ_COUNTERS, PRINT_COUNTERS
      INTEGER*4 PRINT_COSTS
      EXTERNAL START_COUNTERS, READ_COUNTERS, PRINT_COUNTERS
      EXTERNAL PRINT_COSTS
      LOGICAL ABOUT
      EXTERNAL ABOUT
      INTEGER E0, E9, E10, E25
      INTEGER G, GR, G2
      INTEGER*8 C0, C1, X0, X1, FIVE, SIX, N1, N2
      CHARACTER*16 MODE
      LOGICAL SIM
      INTEGER NFAIL
      COMMON /FAILS/ NFAIL
      DATA E0, E9, E10, E25 / 0, 9, 10, 25 /
      NFAIL = 0
      FIVE = 5
      SIX = 6
      CALL GET_COMMAND_ARGUMENT(1, MODE)
      SIM = MODE .EQ. 'sim'
      IF (SIM) THEN
         N1 = 123456
         N2 = 1000
      ELSE
         N1 = 700
         N2 = 10
      END IF

      G = START_COUNTERS(E0, E0)
      CALL CHECK(G .GT. 0, 'start_counters(0, 0)')
      CALL WORK(SIM, N1, 1)
      C0 = -1
      C1 = -2
      GR = READ_COUNTERS(E0, C0, E0, C1)
      CALL CHECK(GR .EQ. G, 'generations differ')
      CALL CHECK(C0 .EQ. C1, 'c0 and c1 differ')
      CALL CHECK(ABOUT(SIM, C0, N1), 'first count')
      CALL CHECK(PRINT_COUNTERS(E0, C0, E0, C1) .EQ. GR,
     &           'print_counters')
      CALL CHECK(PRINT_COSTS(E0, C0, E0, C1) .EQ. GR, 'print_costs')

C     A second pair: a new generation, its own interval.
      G2 = START_COUNTERS(E0, E0)
      CALL CHECK(G2 .GT. 0 .AND. G2 .NE. G, 'second start')
      CALL WORK(SIM, N2, 701)
      CALL CHECK(READ_COUNTERS(E0, C0, E0, C1) .EQ. G2, 'second read')
      CALL CHECK(C0 .EQ. C1 .AND. ABOUT(SIM, C0, N2), 'second count')

C     Reading other events than the started ones, or after the read,
C     is still an error.
      X0 = -7
      X1 = -7
      CALL CHECK(READ_COUNTERS(E0, X0, E0, X1) .LT. 0,
     &           'read without start')
      CALL CHECK(START_COUNTERS(E0, E0) .GT. 0, 'third start')
      CALL CHECK(READ_COUNTERS(E0, X0, E25, X1) .LT. 0,
     &           'read other events')
      CALL CHECK(X0 .EQ. -7 .AND. X1 .EQ. -7, 'counts written')
      CALL CHECK(READ_COUNTERS(E0, C0, E0, C1) .GT. 0
     &           .AND. C0 .EQ. C1, 'third read')

C     Two different events of one counter still conflict.
      CALL CHECK(START_COUNTERS(E9, E10) .LT. 0, 'conflict 9 10')

C     One event with two different counts: both are listed.
      CALL CHECK(PRINT_COUNTERS(E0, FIVE, E0, SIX) .GT. 0,
     &           'print two counts')

      WRITE (*, '(A, A, I0, A)') MODE(1:LEN_TRIM(MODE)), ': ', NFAIL,
     &   ' failures'
      IF (NFAIL .NE. 0) STOP 1
      END

C     Exact on the emulation; on perf at least the pages touched, plus
C     a little start-up.
      LOGICAL FUNCTION ABOUT(SIM, GOT, WANT)
      IMPLICIT NONE
      LOGICAL SIM
      INTEGER*8 GOT, WANT
      IF (SIM) THEN
         ABOUT = GOT .EQ. WANT
      ELSE
         ABOUT = GOT .GE. WANT .AND. GOT .LT. WANT + 50
      END IF
      END

C     Emulated: N cycles through the test hook. Real: write one word
C     of each of N fresh 4 KiB columns of a static array from column
C     FIRST on (neither end shares a page with another variable).
      SUBROUTINE WORK(SIM, N, FIRST)
      IMPLICIT NONE
      LOGICAL SIM
      INTEGER*8 N
      INTEGER FIRST
      INTEGER*4 PERFCOMPAT_SIM_ADVANCE
      EXTERNAL PERFCOMPAT_SIM_ADVANCE
      INTEGER*8 BUF(512, 713), TOTAL
      COMMON /PAGES/ BUF
      INTEGER J
      IF (SIM) THEN
         CALL CHECK(PERFCOMPAT_SIM_ADVANCE('0', N) .EQ. 1,
     &              'advance cycles')
      ELSE
         DO 10 J = FIRST + 1, FIRST + INT(N)
            BUF(1, J) = J
   10    CONTINUE
         TOTAL = 0
         DO 20 J = FIRST + 1, FIRST + INT(N)
            TOTAL = TOTAL + BUF(1, J)
   20    CONTINUE
         CALL CHECK(TOTAL .EQ. (2 * FIRST + 1 + N) * N / 2, 'pages')
      END IF
      END

C     CHECK(OK, WHAT): count and report a failed check.
      INCLUDE 'check.f'
