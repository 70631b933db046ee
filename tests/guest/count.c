/* libcpc and libperfex count the instructions of a known loop exactly, on the PMU's hardware
 * `instructions` event (under -icount shift=0, where QEMU counts them exactly). */
#include <errno.h>
#include <libcpc.h>
#include <libperfex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* libperfex: R10000 event 17 (graduated instructions) is `instructions` on Linux, 0 (cycles)
 * `cycles`; under icount every instruction takes one cycle. */
static void perfex_count(uint64_t n, long long *cycles, long long *instructions) {
  if (start_counters(0, 17) < 0) {
    fprintf(stderr, "start_counters(0, 17) failed\n");
    exit(1);
  }
  known_loop(n);
  if (read_counters(0, cycles, 17, instructions) < 0) {
    fprintf(stderr, "read_counters(0, 17) failed\n");
    exit(1);
  }
}

/* Issue 48: libperfex's common start and read (the pair's pages found at its bind, the events
 * one key, the generation kept by a read that answers, a new block of generations drawn by the
 * general start once in 64) over more starts than a block: each read returns its start's
 * generation, and the generations grow. */
static int perfex_generations(char *why, size_t len) {
  int last = 0;
  long long a = 0, b = 0;
  for (int i = 0; i < 200; i++) {
    int g = start_counters(0, 17);
    known_loop(1000);
    int r = read_counters(0, &a, 17, &b);
    if (g <= last || r != g || b < 2000) {
      snprintf(why, len, "pair %d: start %d (the one before %d), read %d, event 17 %lld", i, g,
               last, r, b);
      return 0;
    }
    last = g;
  }
  snprintf(why, len, "200 pairs, the last generation %d", last);
  return 1;
}

/* One event asked for twice is one member: its count read into both places, exactly. */
static long long perfex_twice(uint64_t n, int *same) {
  long long x = 0, y = 0;
  if (start_counters(17, 17) < 0) {
    fprintf(stderr, "start_counters(17, 17) failed\n");
    exit(1);
  }
  known_loop(n);
  if (read_counters(17, &x, 17, &y) < 0) {
    fprintf(stderr, "read_counters(17, 17) failed\n");
    exit(1);
  }
  *same &= x == y;
  return x;
}

static uintptr_t thread_pointer(void) {
  uintptr_t tp;
  __asm__ volatile("mrs %0, tpidr_el0" : "=r"(tp));
  return tp;
}

/* The exact count of event 17 over known_loop(n2) less over known_loop(n1), by two pairs of
 * this thread (the first pair of each binds: the caller made one before), and whether both
 * reads returned their start's generation. */
static long long perfex_difference(uint64_t n1, uint64_t n2, int *gens_ok) {
  long long y1 = 0, p1 = 0, y2 = 0, p2 = 0;
  int g1 = start_counters(0, 17);
  known_loop(n1);
  int r1 = read_counters(0, &y1, 17, &p1);
  int g2 = start_counters(0, 17);
  known_loop(n2);
  int r2 = read_counters(0, &y2, 17, &p2);
  *gens_ok = g1 > 0 && r1 == g1 && g2 > g1 && r2 == g2;
  return p2 - p1;
}

/* Issue 48: the common start and read find a thread's pair by its thread pointer. A thread
 * created after another exited gets the dead thread's stack, and so its thread pointer: it
 * must find nothing of the dead thread's (its read without a start fails; its own pairs count
 * exactly, with fresh generations). Thread A leaves a pair started (and read from user space)
 * when it exits. */
struct reuse {
  uintptr_t tp;
  int last_generation, read_without_start, gens_ok;
  long long difference;
};

static void *reuse_a(void *arg) {
  struct reuse *r = arg;
  r->tp = thread_pointer();
  long long a = 0, b = 0;
  for (int i = 0; i < 3; i++) { /* the first pair binds, the others take the common path */
    start_counters(0, 17);
    known_loop(100);
    read_counters(0, &a, 17, &b);
  }
  r->last_generation = start_counters(0, 17); /* left started */
  return NULL;
}

static void *reuse_b(void *arg) {
  struct reuse *r = arg;
  r->tp = thread_pointer();
  long long a = 0, b = 0;
  r->read_without_start = read_counters(0, &a, 17, &b);
  start_counters(0, 17); /* this thread's bind */
  known_loop(1);
  read_counters(0, &a, 17, &b);
  r->difference = perfex_difference(100000, 1000000, &r->gens_ok);
  return NULL;
}

static int perfex_thread_reuse(char *why, size_t len) {
  struct reuse a = {0}, b = {0};
  pthread_t t;
  if (pthread_create(&t, NULL, reuse_a, &a) != 0 || pthread_join(t, NULL) != 0 ||
      pthread_create(&t, NULL, reuse_b, &b) != 0 || pthread_join(t, NULL) != 0) {
    snprintf(why, len, "pthread_create/join failed");
    return 0;
  }
  snprintf(why, len,
           "thread pointers %#lx, %#lx; the new thread's read without a start %d (want -1), "
           "its pairs' difference %lld (want %d), generations in order %d",
           (unsigned long)a.tp, (unsigned long)b.tp, b.read_without_start, b.difference,
           2 * (1000000 - 100000), b.gens_ok);
  return a.tp == b.tp && b.read_without_start == -1 && b.difference == 2 * (1000000 - 100000) &&
         b.gens_ok;
}

/* Issue 48: the child of fork() finds no pair published by the parent (whose pages are not
 * mapped in the child, and whose counters count the parent): its read without a start fails,
 * its own pairs count exactly. The parent's pair was started in the common path. */
static int perfex_fork(char *why, size_t len) {
  long long a = 0, b = 0;
  for (int i = 0; i < 3; i++) {
    start_counters(0, 17);
    known_loop(100);
    read_counters(0, &a, 17, &b);
  }
  int g = start_counters(0, 17);
  pid_t pid = fork();
  if (pid == 0) {
    int gens_ok = 0;
    int r = read_counters(0, &a, 17, &b);
    start_counters(0, 17); /* the child's bind */
    known_loop(1);
    read_counters(0, &a, 17, &b);
    long long d = perfex_difference(100000, 1000000, &gens_ok);
    _exit(r == -1 && d == 2 * (1000000 - 100000) && gens_ok ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) {
    snprintf(why, len, "fork/waitpid failed");
    return 0;
  }
  known_loop(1000);
  int r = read_counters(0, &a, 17, &b);
  snprintf(why, len, "child: %s %d; the parent's read after: generation %d (want %d), %lld",
           WIFEXITED(status) ? "exit status" : "signal",
           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), r, g, b);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 && r == g && b >= 2000;
}

/* Issue 48: a signal handler that calls read_counters while the thread is inside another
 * libperfex call (the common start or read holds the thread's counters) is refused with
 * EAGAIN, and nothing breaks: no crash, no abort (the base aborted on a nested call). */
static volatile sig_atomic_t nested_eagain, nested_ok, nested_other, nested_calls;
static void on_alarm(int sig) {
  (void)sig;
  int saved = errno;
  long long a = 0, b = 0;
  nested_calls++;
  if (read_counters(0, &a, 17, &b) >= 0)
    nested_ok++;
  else if (errno == EAGAIN)
    nested_eagain++;
  else
    nested_other++;
  errno = saved;
}

static int perfex_nested(char *why, size_t len) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval it = {{0, 1000}, {0, 1000}};
  setitimer(ITIMER_REAL, &it, NULL);
  long long a = 0, b = 0;
  int pairs = 0;
  for (int i = 0; i < 200000 && nested_calls < 40; i++) {
    if (start_counters(0, 17) > 0 && read_counters(0, &a, 17, &b) > 0) pairs++;
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  signal(SIGALRM, SIG_DFL);
  snprintf(why, len,
           "%d handler calls: refused with EAGAIN %d, answered %d, other errors %d "
           "(not started); %d whole pairs outside",
           (int)nested_calls, (int)nested_eagain, (int)nested_ok, (int)nested_other, pairs);
  return nested_calls > 0 && nested_eagain > 0 && pairs > 0;
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

  long long p1[5], p2[5], y1[5], y2[5];
  /* The first start_counters of a thread does its one-time set-up: not part of the count. */
  perfex_count(1, &y1[0], &p1[0]);
  same = 1;
  for (int i = 0; i < 5; i++) {
    perfex_count(n1, &y1[i], &p1[i]);
    perfex_count(n2, &y2[i], &p2[i]);
    same &= p1[i] == p1[0] && p2[i] == p2[0] && y2[i] == y2[0];
  }
  check("count.libperfex_repeatable", same, "event 17 over 5 runs: %lld,%lld,%lld,%lld,%lld",
        p2[0], p2[1], p2[2], p2[3], p2[4]);
  check("count.libperfex_exact", p2[0] - p1[0] == (long long)(2 * (n2 - n1)),
        "event 17: %lld for %llu iterations, %lld for %llu: difference %lld, want %llu", p2[0],
        (unsigned long long)n2, p1[0], (unsigned long long)n1, p2[0] - p1[0],
        (unsigned long long)(2 * (n2 - n1)));
  check("count.libperfex_cycles", y2[0] - y1[0] == (long long)(2 * (n2 - n1)),
        "event 0 (cycles, one per instruction under icount): difference %lld, want %llu",
        y2[0] - y1[0], (unsigned long long)(2 * (n2 - n1)));

  char why[400];
  int ok = perfex_generations(why, sizeof why);
  check("count.libperfex_generations", ok, "%s", why);
  int twice = 1;
  perfex_twice(1, &twice); /* the new pair's bind: not part of the count */
  long long t1 = perfex_twice(n1, &twice), t2 = perfex_twice(n2, &twice);
  check("count.libperfex_same_event", twice && t2 - t1 == (long long)(2 * (n2 - n1)),
        "start_counters(17, 17): both counts the same %d, %lld for %llu iterations, %lld for "
        "%llu: difference %lld, want %llu",
        twice, t2, (unsigned long long)n2, t1, (unsigned long long)n1, t2 - t1,
        (unsigned long long)(2 * (n2 - n1)));
  ok = perfex_thread_reuse(why, sizeof why);
  check("count.libperfex_thread_reuse", ok, "%s", why);
  ok = perfex_fork(why, sizeof why);
  check("count.libperfex_fork", ok, "%s", why);
  ok = perfex_nested(why, sizeof why);
  check("count.libperfex_nested", ok, "%s", why);
  return guest_exit();
}
