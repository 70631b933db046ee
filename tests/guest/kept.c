/* The counters the perf backend's probe and checks open are kept for the bind that follows
 * (issue 48, first use: src/backend/perf/kept.rs), on the kernel's own PMU driver. Each case
 * runs in a child forked before the library is used (a fresh backend: its checks are made
 * once per process):
 *   kept.taken     cpc_open, cycles and instructions added: two counters open at low numbers
 *                  (the probe's cycles, the check's instructions); the bind takes them: the
 *                  bound counters (moved up past 800) have their event ids, the low numbers
 *                  are free again, and the set counts;
 *   kept.reused    the same, but the program puts pipes at the kept counters' numbers before
 *                  the bind (issue 44): the bind opens its own counters (other ids), counts,
 *                  and the pipes are left open. */
#define _GNU_SOURCE
#include "guest.h"
#include <fcntl.h>
#include <libcpc.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX 8

static int is_perf(int fd) {
  char path[64], link[128];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, link, sizeof link - 1);
  if (n < 0)
    return 0;
  link[n] = 0;
  return strstr(link, "perf_event") != NULL;
}

/* The perf descriptors in [from, to) and their event ids: how many. */
static int perf_fds(int from, int to, int *fds, uint64_t *ids) {
  int n = 0;
  for (int fd = from; fd < to && n < MAX; fd++)
    if (is_perf(fd)) {
      fds[n] = fd;
      ids[n] = 0;
      ioctl(fd, PERF_EVENT_IOC_ID, &ids[n]);
      n++;
    }
  return n;
}

static int has_id(const uint64_t *ids, int n, uint64_t id) {
  for (int i = 0; i < n; i++)
    if (ids[i] == id)
      return 1;
  return 0;
}

static void run(int reuse) {
  const char *name = reuse ? "kept.reused" : "kept.taken";
  cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
  cpc_set_t *set = cpc ? cpc_set_create(cpc) : NULL;
  int added = set && cpc_set_add_request(cpc, set, "cycles", 0, CPC_COUNT_USER, 0, NULL) >= 0 &&
              cpc_set_add_request(cpc, set, "instructions", 0, CPC_COUNT_USER, 0, NULL) >= 0;
  int low[MAX], high[MAX];
  uint64_t low_ids[MAX], high_ids[MAX];
  int nlow = added ? perf_fds(3, 100, low, low_ids) : 0;
  int pipes[MAX][2];
  if (reuse)
    for (int i = 0; i < nlow; i++)
      if (pipe(pipes[i]) != 0 || dup2(pipes[i][0], low[i]) != low[i])
        check(name, 0, "pipe or dup2 failed");
  cpc_buf_t *buf = set ? cpc_buf_create(cpc, set) : NULL;
  int bound = added && buf && cpc_bind_curlwp(cpc, set, 0) == 0;
  known_loop(100000);
  uint64_t cyc = 0, ins = 0;
  int sampled = bound && cpc_set_sample(cpc, set, buf) == 0 && cpc_buf_get(cpc, buf, 0, &cyc) == 0 &&
                cpc_buf_get(cpc, buf, 1, &ins) == 0;
  int nhigh = perf_fds(100, 4096, high, high_ids);
  int taken = nhigh == 2 && nlow == 2 && has_id(high_ids, nhigh, low_ids[0]) &&
              has_id(high_ids, nhigh, low_ids[1]);
  int low_left = 0, pipes_left = 0;
  for (int i = 0; i < nlow; i++) {
    struct stat st;
    if (fstat(low[i], &st) == 0) {
      low_left++;
      if (S_ISFIFO(st.st_mode))
        pipes_left++;
    }
  }
  int counted = sampled && ins >= 200000 && cyc > 0;
  if (!reuse)
    check(name, nlow == 2 && taken && low_left == 0 && counted,
          "%d counters kept at low numbers by the checks, %d bound past 100 (%s), %d low numbers "
          "still open; counted: %s (cycles %llu, instructions %llu)",
          nlow, nhigh, taken ? "the kept ones, by event id" : "NOT the kept ones", low_left,
          counted ? "yes" : "no", (unsigned long long)cyc, (unsigned long long)ins);
  else
    check(name, nlow == 2 && nhigh == 2 && !has_id(high_ids, nhigh, low_ids[0]) &&
                    !has_id(high_ids, nhigh, low_ids[1]) && pipes_left == 2 && counted,
          "%d counters kept, replaced by pipes before the bind; %d bound past 100 (%s), %d of "
          "the pipes still open; counted: %s (cycles %llu, instructions %llu)",
          nlow, nhigh, taken ? "the kept ids: WRONG" : "new ids", pipes_left,
          counted ? "yes" : "no", (unsigned long long)cyc, (unsigned long long)ins);
  if (cpc)
    cpc_close(cpc);
}

int main(void) {
  for (int reuse = 0; reuse < 2; reuse++) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      run(reuse);
      fflush(stdout);
      _exit(guest_exit());
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
      guest_failures++;
  }
  return guest_exit();
}
