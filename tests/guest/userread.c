/* The sample path reads the PMU's counters from user space (arm64 PMEVCNTR<n>_EL0 and
 * PMCCNTR_EL0 through the kernel's user access) without a system call, and the 64-bit virtual
 * counts stay exact across the 32-bit hardware counters' wraps. */
#include <fcntl.h>
#include <libcpc.h>
#include <unistd.h>

#include "guest.h"

/* The calling thread's read system calls so far (/proc/thread-self/io, syscr). */
static long long syscr(void) {
  char b[512];
  int fd = open("/proc/thread-self/io", O_RDONLY);
  ssize_t n = read(fd, b, sizeof b - 1);
  close(fd);
  if (n <= 0)
    return -1;
  b[n] = 0;
  const char *s = strstr(b, "syscr: ");
  return s ? atoll(s + 7) : -1;
}

static void set_user_access(int on) {
  int fd = open("/proc/sys/kernel/perf_user_access", O_WRONLY);
  if (fd < 0 || write(fd, on ? "1" : "0", 1) != 1)
    perror("perf_user_access");
  close(fd);
}

/* Read system calls made by 1000 samples of a set of instructions and cycles. */
static long long reads_per_1000_samples(cpc_t *cpc) {
  cpc_set_t *set = cpc_set_create(cpc);
  cpc_set_add_request(cpc, set, "instructions", 0, CPC_COUNT_USER, 0, NULL);
  cpc_set_add_request(cpc, set, "cycles", 0, CPC_COUNT_USER, 0, NULL);
  cpc_buf_t *buf = cpc_buf_create(cpc, set);
  if (cpc_bind_curlwp(cpc, set, 0) != 0) {
    perror("cpc_bind_curlwp");
    exit(1);
  }
  long long s0 = syscr(), s1 = syscr();
  for (int i = 0; i < 1000; i++)
    cpc_set_sample(cpc, set, buf);
  long long s2 = syscr();
  cpc_unbind(cpc, set);
  cpc_buf_destroy(cpc, buf);
  cpc_set_destroy(cpc, set);
  /* s1 - s0 is what one syscr() call itself adds. */
  return (s2 - s1) - (s1 - s0);
}

int main(void) {
  cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
  if (cpc == NULL) {
    perror("cpc_open");
    return 1;
  }
  long long with = reads_per_1000_samples(cpc);
  set_user_access(0);
  long long without = reads_per_1000_samples(cpc);
  set_user_access(1);
  check("userread.no_system_call", with == 0,
        "read() calls in 1000 samples: %lld with perf_user_access 1", with);
  /* The control: the measurement sees the read() a sample makes without user access. */
  check("userread.control", without >= 1000,
        "read() calls in 1000 samples: %lld with perf_user_access 0", without);

  /* Past 2^32 events: instructions preset near UINT64_MAX, cycles from 0 (under icount one per
   * instruction). The loop runs in chunks of 2^28 iterations (2^29 instructions), sampled
   * between chunks: every step is the same, and the sum crosses each 32-bit counter's wrap. */
  const uint64_t preset = UINT64_MAX - 999;
  cpc_set_t *set = cpc_set_create(cpc);
  cpc_set_add_request(cpc, set, "instructions", preset, CPC_COUNT_USER, 0, NULL);
  cpc_set_add_request(cpc, set, "cycles", 0, CPC_COUNT_USER, 0, NULL);
  cpc_buf_t *buf = cpc_buf_create(cpc, set);
  if (cpc_bind_curlwp(cpc, set, 0) != 0) {
    perror("cpc_bind_curlwp");
    return 1;
  }
  enum { CHUNKS = 9 };
  uint64_t ins[CHUNKS + 1], cyc[CHUNKS + 1];
  for (int k = 0; k <= CHUNKS; k++) {
    if (k > 0)
      known_loop(1ull << 28);
    cpc_set_sample(cpc, set, buf);
    cpc_buf_get(cpc, buf, 0, &ins[k]);
    cpc_buf_get(cpc, buf, 1, &cyc[k]);
  }
  int steady = 1;
  for (int k = 2; k <= CHUNKS; k++)
    steady &= ins[k] - ins[k - 1] == ins[1] - ins[0] && cyc[k] - cyc[k - 1] == ins[1] - ins[0];
  uint64_t total = ins[CHUNKS] - preset;
  check("userread.wrap_exact",
        steady && ins[1] - ins[0] > (1ull << 29) && ins[1] - ins[0] < (1ull << 29) + 5000 &&
            total > (1ull << 32) && cyc[CHUNKS] - cyc[0] == ins[CHUNKS] - ins[0],
        "%d chunks of 2^29 instructions: each step %llu instructions, %llu cycles; "
        "instructions from preset UINT64_MAX-999 to %#llx (%llu counted, over 2^32); cycles %llu",
        CHUNKS, (unsigned long long)(ins[1] - ins[0]), (unsigned long long)(cyc[1] - cyc[0]),
        (unsigned long long)ins[CHUNKS], (unsigned long long)total,
        (unsigned long long)cyc[CHUNKS]);
  if (!steady)
    for (int k = 0; k <= CHUNKS; k++)
      printf("  sample %d: instructions %#llx cycles %#llx\n", k, (unsigned long long)ins[k],
             (unsigned long long)cyc[k]);
  cpc_unbind(cpc, set);
  cpc_close(cpc);
  return guest_exit();
}
