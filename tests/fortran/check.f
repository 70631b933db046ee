C     CHECK(OK, WHAT): when OK is false, print "FAIL: WHAT" and count it
C     in COMMON /FAILS/. INCLUDEd by the fixed-form test programs.
      SUBROUTINE CHECK(OK, WHAT)
      IMPLICIT NONE
      LOGICAL OK
      CHARACTER*(*) WHAT
      INTEGER NFAIL
      COMMON /FAILS/ NFAIL
      IF (.NOT. OK) THEN
         WRITE (*, '(2A)') 'FAIL: ', WHAT
         NFAIL = NFAIL + 1
      END IF
      END
