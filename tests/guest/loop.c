/* The known loop as a program, for the commands (perfex, cputrack): known_loop(argv[1]). */
#include "guest.h"

int main(int argc, char **argv) {
  uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
  known_loop(n ? n : 1);
  return 0;
}
