/* The commands on the same known loop: `perfex -e 17` with an event map and `cputrack -c
 * instructions` count /guest/loop's instructions, and their difference between two loop
 * lengths is exactly the loop's 2 instructions per iteration, as libcpc counts it (count.c). */
#include "guest.h"

/* The whole output (stdout and stderr) of a shell command. */
static void run(const char *cmd, char *out, size_t len) {
  FILE *p = popen(cmd, "r");
  size_t n = 0;
  if (p == NULL) {
    perror("popen");
    exit(1);
  }
  while (n + 1 < len) {
    size_t r = fread(out + n, 1, len - 1 - n, p);
    if (r == 0)
      break;
    n += r;
  }
  out[n] = 0;
  pclose(p);
}

/* perfex --json's "count" of the one event. */
static long long perfex(uint64_t n) {
  char cmd[256], out[8192];
  snprintf(cmd, sizeof cmd,
           "PERFCOMPAT_EVENTS=/guest/instructions.map perfex -e 17 --json /guest/loop %llu 2>&1",
           (unsigned long long)n);
  run(cmd, out, sizeof out);
  const char *c = strstr(out, "\"count\":");
  if (c == NULL) {
    printf("perfex said: %s\n", out);
    return -1;
  }
  return atoll(c + 8);
}

/* cputrack's pic0 on its "exit" line. */
static long long cputrack(uint64_t n) {
  char cmd[256], out[8192];
  snprintf(cmd, sizeof cmd, "cputrack -c instructions /guest/loop %llu 2>&1",
           (unsigned long long)n);
  run(cmd, out, sizeof out);
  const char *e = strstr(out, " exit ");
  if (e == NULL) {
    printf("cputrack said: %s\n", out);
    return -1;
  }
  return atoll(e + 6);
}

int main(void) {
  /* Arguments of one length: a longer one costs the program's start and strtoull more. */
  const uint64_t n1 = 1000000, n2 = 2000000;
  long long a1 = perfex(n1), a2 = perfex(n2), a3 = perfex(n2);
  check("commands.perfex_exact", a1 > 0 && a2 - a1 == (long long)(2 * (n2 - n1)) && a3 == a2,
        "perfex -e 17 (instructions): %lld for %llu iterations (twice: %lld), %lld for %llu: "
        "difference %lld, want %llu",
        a2, (unsigned long long)n2, a3, a1, (unsigned long long)n1, a2 - a1,
        (unsigned long long)(2 * (n2 - n1)));
  long long b1 = cputrack(n1), b2 = cputrack(n2), b3 = cputrack(n2);
  /* cputrack stops the program under ptrace (libpctx); its count moved by 4 instructions between
   * two runs before the guest turned address randomisation off: 16 either way. */
  long long d = b2 - b1 - (long long)(2 * (n2 - n1)), r = b3 - b2;
  check("commands.cputrack_exact", b1 > 0 && d >= -16 && d <= 16 && r >= -16 && r <= 16,
        "cputrack -c instructions: %lld for %llu iterations (twice: %lld), %lld for %llu: "
        "difference %lld, want %llu within 16",
        b2, (unsigned long long)n2, b3, b1, (unsigned long long)n1, b2 - b1,
        (unsigned long long)(2 * (n2 - n1)));
  /* Both count the program from its exec to its exit in user mode: the same instructions. */
  check("commands.agree", a2 > 0 && b2 > 0 && (a2 > b2 ? a2 - b2 : b2 - a2) <= a2 / 1000,
        "perfex %lld, cputrack %lld for the same program", a2, b2);
  return guest_exit();
}
