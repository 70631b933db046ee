/* What src/backend/perf/model/ asserts about the kernel, checked against the real
 * armv8_pmuv3 driver with raw perf_event_open (no perfcompat code): the model's arm64
 * configuration (tests/perf_pmu_counters.rs: 6 counters + a cycle counter, 32 bits,
 * GroupCheck::EnabledOnly) must say what this program sees. */
#include <errno.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guest.h"

static int open_event(uint64_t config, int disabled, int group, uint64_t config1) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_HARDWARE;
  a.config = config;
  a.disabled = disabled;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.config1 = config1;
  a.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  return (int)syscall(SYS_perf_event_open, &a, 0, -1, group, PERF_FLAG_FD_CLOEXEC);
}

/* A group: its leader (`spec[0]`: 'c' cycles, 'i' instructions), opened disabled or not, and
 * its members (`spec[1..]`, opened enabled, as the backend opens them): the number of events
 * opened before the first refusal, and that refusal's errno. */
static int group(const char *spec, int disabled, int *fds, int *err) {
  int n = (int)strlen(spec);
  *err = 0;
  for (int i = 0; i < n; i++) {
    uint64_t config = spec[i] == 'c' ? PERF_COUNT_HW_CPU_CYCLES : PERF_COUNT_HW_INSTRUCTIONS;
    fds[i] = open_event(config, i == 0 ? disabled : 0, i == 0 ? -1 : fds[0], 0);
    if (fds[i] < 0) {
      *err = errno;
      return i;
    }
  }
  return n;
}

static void close_all(int *fds, int n) {
  for (int i = 0; i < n; i++)
    close(fds[i]);
}

/* Enable the group, run the loop, read its times. */
static void run_group(int leader, uint64_t *enabled, uint64_t *running) {
  uint64_t v[64] = {0};
  ioctl(leader, PERF_EVENT_IOC_ENABLE, 0);
  known_loop(100000);
  ioctl(leader, PERF_EVENT_IOC_DISABLE, 0);
  if (read(leader, v, sizeof v) < 0)
    perror("read");
  *enabled = v[1];
  *running = v[2];
}

/* The user page of one event (config1 bit 1 asks for user access). */
static void page(uint64_t config, uint64_t config1, int *cap, unsigned *index, int *width) {
  int fd = open_event(config, 0, -1, config1);
  struct perf_event_mmap_page *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
  if (fd < 0 || p == MAP_FAILED) {
    *cap = -1;
    return;
  }
  known_loop(1000);
  *cap = p->cap_user_rdpmc;
  *index = p->index;
  *width = p->pmc_width;
  munmap(p, 4096);
  close(fd);
}

int main(void) {
  int fds[16], err, n;
  uint64_t en = 0, run = 0;

  errno = 0;
  int fd = open_event(PERF_COUNT_HW_BRANCH_INSTRUCTIONS, 1, -1, 0);
  check("facts.missing_event_enoent", fd < 0 && errno == ENOENT,
        "perf_event_open(branches): %d, errno %d (model: a refused event's errno, ENOENT)", fd,
        errno);

  n = group("ciiiiii", 1, fds, &err);
  run_group(fds[0], &en, &run);
  close_all(fds, n);
  check("facts.seven_run", n == 7 && en > 0 && run == en,
        "cycles + 6 instructions: %d opened, time_enabled %llu, time_running %llu", n,
        (unsigned long long)en, (unsigned long long)run);

  /* The driver's group check leaves out a disabled leader: the members alone fit (6
   * instructions on the event counters, cycles on PMCCNTR), the whole group never does. */
  n = group("iiiiiiic", 1, fds, &err);
  run_group(fds[0], &en, &run);
  close_all(fds, n);
  check("facts.eight_open_but_never_run", n == 8 && en > 0 && run == 0,
        "disabled instructions leader + 6 instructions + cycles: %d opened, time_enabled %llu, "
        "time_running %llu (model: GroupCheck::EnabledOnly)",
        n, (unsigned long long)en, (unsigned long long)run);

  /* Members that do not fit by themselves are refused at open. */
  n = group("ciiiiiii", 1, fds, &err);
  close_all(fds, n);
  check("facts.members_over_the_counters_einval", n == 7 && err == EINVAL,
        "disabled cycles leader + 7 instructions: the 8th event fails with errno %d after %d "
        "(want EINVAL after 7: 7 instructions, 6 event counters)",
        err, n);
  n = group("iiiiiiicc", 1, fds, &err);
  close_all(fds, n);
  check("facts.nine_einval", n == 8 && err == EINVAL,
        "disabled instructions leader + 6 instructions + 2 cycles: the 9th event fails with "
        "errno %d after %d (want EINVAL after 8)",
        err, n);
  n = group("iiiiiiic", 0, fds, &err);
  close_all(fds, n);
  check("facts.enabled_leader_counts_in_the_check", n == 6 && err == EINVAL,
        "enabled instructions leader + 6 instructions + cycles: the 7th event (the 7th "
        "instructions) fails with errno %d after %d (want EINVAL after 6)",
        err, n);

  int cap = 0, w = 0;
  unsigned idx = 0;
  page(PERF_COUNT_HW_INSTRUCTIONS, 2, &cap, &idx, &w);
  check("facts.user_page_instructions", cap == 1 && idx >= 1 && idx <= 6 && w == 32,
        "instructions, config1 bit 1: cap_user_rdpmc %d, index %u (an event counter: 1..6), "
        "pmc_width %d",
        cap, idx, w);
  page(PERF_COUNT_HW_CPU_CYCLES, 2, &cap, &idx, &w);
  check("facts.user_page_cycles", cap == 1 && idx == 32 && w == 32,
        "cycles, config1 bit 1: cap_user_rdpmc %d, index %u (32: PMCCNTR), pmc_width %d", cap,
        idx, w);
  page(PERF_COUNT_HW_INSTRUCTIONS, 0, &cap, &idx, &w);
  check("facts.user_page_without_access", cap == 0,
        "instructions, config1 0: cap_user_rdpmc %d, index %u", cap, idx);

  /* Ten separate counters on six event counters: the kernel multiplexes them. */
  int ten[10];
  for (int i = 0; i < 10; i++)
    ten[i] = open_event(PERF_COUNT_HW_INSTRUCTIONS, 0, -1, 0);
  known_loop(20000000);
  int less = 0;
  for (int i = 0; i < 10; i++) {
    uint64_t v[8] = {0};
    if (read(ten[i], v, sizeof v) > 0 && v[2] < v[1])
      less++;
    close(ten[i]);
  }
  check("facts.multiplexed", less > 0,
        "10 separate instructions counters: %d ran less than they were enabled", less);
  return guest_exit();
}
