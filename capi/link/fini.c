/* The library's DT_FINI (tools/install.sh links it with -fini=perfcompat_fini; issue 48,
   loading the library). The C runtime's own _fini does nothing here (crti's prologue and crtn's
   epilogue, no .fini code between), but it lies in the .fini section after the whole text, in a
   64 KiB window of the text nothing of a load touches: the dynamic loader's call at exit was a
   page fault (about 20k instructions in the arm64 guest) in every process that loaded the
   library and never counted. This one does the same nothing in the window of the functions
   that run at load (.text.startup.*, first in the text), already mapped by then. */
__attribute__((section(".text.startup.perfcompat_fini"), used)) void perfcompat_fini(void) {}
