/* libcpc counts the instructions of a known loop exactly, on the PMU's hardware
 * `instructions` event (under -icount shift=0, where QEMU counts them exactly). */
#include <libcpc.h>

#include "guest.h"

/* The count of `instructions` between two samples around known_loop(n). */
static uint64_t count(cpc_t *cpc, uint64_t n) {
  cpc_set_t *set = cpc_set_create(cpc);
  if (set == NULL || cpc_set_add_request(cpc, set, "instructions", 0, CPC_COUNT_USER, 0, NULL) != 0) {
    perror("cpc_set_add_request(instructions)");
    exit(1);
  }
  cpc_buf_t *a = cpc_buf_create(cpc, set), *b = cpc_buf_create(cpc, set);
  if (cpc_bind_curlwp(cpc, set, 0) != 0) {
    perror("cpc_bind_curlwp");
    exit(1);
  }
  uint64_t va = 0, vb = 0;
  cpc_set_sample(cpc, set, a);
  known_loop(n);
  cpc_set_sample(cpc, set, b);
  cpc_buf_get(cpc, a, 0, &va);
  cpc_buf_get(cpc, b, 0, &vb);
  cpc_unbind(cpc, set);
  cpc_buf_destroy(cpc, a);
  cpc_buf_destroy(cpc, b);
  cpc_set_destroy(cpc, set);
  return vb - va;
}

int main(void) {
  cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
  if (cpc == NULL) {
    perror("cpc_open");
    return 1;
  }
  const uint64_t n1 = 100000, n2 = 1000000;
  uint64_t c1[5], c2[5];
  int same = 1;
  for (int i = 0; i < 5; i++) {
    c1[i] = count(cpc, n1);
    c2[i] = count(cpc, n2);
    same &= c1[i] == c1[0] && c2[i] == c2[0];
  }
  check("count.libcpc_repeatable", same, "instructions over 5 runs: %llu,%llu,%llu,%llu,%llu",
        (unsigned long long)c2[0], (unsigned long long)c2[1], (unsigned long long)c2[2],
        (unsigned long long)c2[3], (unsigned long long)c2[4]);
  /* The loop is 2 instructions an iteration; what the two samples add is the same each time. */
  check("count.libcpc_exact", c2[0] - c1[0] == 2 * (n2 - n1),
        "%llu for %llu iterations, %llu for %llu: difference %llu, want %llu (sample overhead %lld)",
        (unsigned long long)c2[0], (unsigned long long)n2, (unsigned long long)c1[0],
        (unsigned long long)n1, (unsigned long long)(c2[0] - c1[0]),
        (unsigned long long)(2 * (n2 - n1)), (long long)(c1[0] - 2 * n1));
  cpc_close(cpc);
  return guest_exit();
}
