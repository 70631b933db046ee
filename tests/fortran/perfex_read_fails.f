C     READ_COUNTERS that fails sets both counts to 0 (issue 46 item 2),
C     so a program that misses the -1 does not print garbage.
      PROGRAM RDFAIL
      INTEGER*4 START_COUNTERS, READ_COUNTERS
      EXTERNAL START_COUNTERS, READ_COUNTERS
      INTEGER*4 IGEN, IRET
      INTEGER*8 C0, C1
      C0 = 12345
      C1 = 67890
      IRET = READ_COUNTERS(0, C0, 25, C1)
      PRINT '(A, I3, 2I8)', 'no start:', IRET, C0, C1
      IF (IRET .NE. -1 .OR. C0 .NE. 0 .OR. C1 .NE. 0) STOP 1
      C0 = 12345
      C1 = 67890
      IGEN = START_COUNTERS(0, 99)
      IRET = READ_COUNTERS(0, C0, 99, C1)
      PRINT '(A, 2I3, 2I8)', 'failed start:', IGEN, IRET, C0, C1
      IF (IRET .NE. -1 .OR. C0 .NE. 0 .OR. C1 .NE. 0) STOP 1
      END
