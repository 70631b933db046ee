/* The PMU's counters as libcpc sees them (QEMU's PMUv3: 6 event counters + the cycle counter,
 * which only `cycles` can use): cpc_npic and the walkers report them; 7 requests fit and
 * count; an 8th, 7 `instructions`, or 9 requests are refused at bind with a reason, never
 * bound to count nothing; an event the PMU lacks is refused at cpc_set_add_request. */
#include <errno.h>
#include <fcntl.h>
#include <libcpc.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest.h"

static char message[1024];
static int subcode;

static void handler(const char *fn, int code, const char *fmt, va_list ap) {
  int n = snprintf(message, sizeof message, "%s: ", fn);
  vsnprintf(message + n, sizeof message - n, fmt, ap);
  message[strcspn(message, "\n")] = 0;
  subcode = code;
}

static int listed;
static const char *wanted;
static void find(void *arg, unsigned pic, const char *event) {
  (void)arg;
  (void)pic;
  if (strcmp(event, wanted) == 0)
    listed = 1;
}
static int on_pic(cpc_t *cpc, unsigned pic, const char *event) {
  listed = 0;
  wanted = event;
  cpc_walk_events_pic(cpc, pic, NULL, find);
  return listed;
}

/* What the library wrote on standard error while `fn` ran: with no error handler set, libcpc
 * writes the Solaris message and the engine's explanation there. */
static char said[2048];
static int stderr_of(int (*fn)(cpc_t *, int, int), cpc_t *cpc, int a, int b) {
  int saved = dup(2), fd = open("/tmp/stderr", O_RDWR | O_CREAT | O_TRUNC, 0600);
  dup2(fd, 2);
  int r = fn(cpc, a, b), e = errno;
  dup2(saved, 2);
  close(saved);
  ssize_t n = pread(fd, said, sizeof said - 1, 0);
  said[n > 0 ? n : 0] = 0;
  for (char *c = said; *c; c++)
    if (*c == '\n')
      *c = ' ';
  close(fd);
  errno = e;
  return r;
}

/* A set of `ncycles` cycles and `ninstr` instructions requests; binding it returns what
 * cpc_bind_curlwp returned, with errno, the subcode and the message in the globals. */
static int bind(cpc_t *cpc, int ncycles, int ninstr, cpc_set_t **out) {
  cpc_set_t *set = cpc_set_create(cpc);
  for (int i = 0; i < ncycles; i++)
    cpc_set_add_request(cpc, set, "cycles", 0, CPC_COUNT_USER, 0, NULL);
  for (int i = 0; i < ninstr; i++)
    cpc_set_add_request(cpc, set, "instructions", 0, CPC_COUNT_USER, 0, NULL);
  message[0] = 0;
  subcode = -1;
  errno = 0;
  int r = cpc_bind_curlwp(cpc, set, 0);
  int e = errno;
  if (out != NULL && r == 0) {
    *out = set;
  } else {
    cpc_set_destroy(cpc, set);
  }
  errno = e;
  return r;
}

static int bind_only(cpc_t *cpc, int ncycles, int ninstr) { return bind(cpc, ncycles, ninstr, NULL); }

static int add_only(cpc_t *cpc, int a, int b) {
  (void)a;
  (void)b;
  cpc_set_t *set = cpc_set_create(cpc);
  errno = 0;
  int r = cpc_set_add_request(cpc, set, "branches", 0, CPC_COUNT_USER, 0, NULL), e = errno;
  cpc_set_destroy(cpc, set);
  errno = e;
  return r;
}

/* In a child process of its own (nothing measured yet): bind `cycles` and `instructions`
 * (two requests: no measurement needed), then ask cpc_npic for the first time. The PMU's
 * counters are measured then, on a thread of the library's own, so the two the thread's
 * group holds are counted: 7, as when asked before any bind. Exit status: the answer. */
static int npic_after_a_bind(void) {
  pid_t pid = fork();
  if (pid == 0) {
    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    cpc_set_t *set = NULL;
    if (cpc == NULL || bind(cpc, 1, 1, &set) != 0)
      _exit(100);
    _exit((int)cpc_npic(cpc));
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
    return -1;
  return WEXITSTATUS(status);
}

int main(void) {
  int after = npic_after_a_bind();
  check("capacity.npic_after_bind", after == 7,
        "cpc_npic first asked after binding cycles and instructions: %d, want 7", after);
  cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
  if (cpc == NULL) {
    perror("cpc_open");
    return 1;
  }
  cpc_seterrhndlr(cpc, handler);
  unsigned npic = cpc_npic(cpc);
  check("capacity.npic", npic == 7, "cpc_npic %u, want 7 (6 event counters + the cycle counter)",
        npic);
  int c0 = on_pic(cpc, 0, "cycles"), i0 = on_pic(cpc, 0, "instructions");
  int c6 = on_pic(cpc, 6, "cycles"), i6 = on_pic(cpc, 6, "instructions");
  int c7 = on_pic(cpc, 7, "cycles");
  check("capacity.walkers", c0 && i0 && c6 && !i6 && !c7,
        "pic 0: cycles %d instructions %d; pic 6 (the cycle counter): cycles %d instructions %d; "
        "pic 7: cycles %d",
        c0, i0, c6, i6, c7);

  /* 7 requests that fit: every one counts the loop. */
  cpc_set_t *set = NULL;
  int r = bind(cpc, 1, 6, &set);
  uint64_t v[7] = {0};
  if (r == 0) {
    cpc_buf_t *a = cpc_buf_create(cpc, set), *b = cpc_buf_create(cpc, set);
    cpc_set_sample(cpc, set, a);
    known_loop(1000000);
    cpc_set_sample(cpc, set, b);
    for (int i = 0; i < 7; i++) {
      uint64_t x = 0, y = 0;
      cpc_buf_get(cpc, a, i, &x);
      cpc_buf_get(cpc, b, i, &y);
      v[i] = y - x;
    }
    cpc_unbind(cpc, set);
  }
  int counted = r == 0;
  for (int i = 0; i < 7; i++)
    counted &= v[i] >= 2000000 && v[i] < 2010000;
  check("capacity.seven_count", counted,
        "bind %d (%s); cycles %llu, instructions %llu %llu %llu %llu %llu %llu", r, message,
        (unsigned long long)v[0], (unsigned long long)v[1], (unsigned long long)v[2],
        (unsigned long long)v[3], (unsigned long long)v[4], (unsigned long long)v[5],
        (unsigned long long)v[6]);

  /* Refusals: with the handler, its subcode; without it, the explanation on stderr. */
  r = bind(cpc, 1, 7, NULL);
  int e = errno, code = subcode;
  cpc_seterrhndlr(cpc, NULL);
  stderr_of(bind_only, cpc, 1, 7);
  check("capacity.eighth_refused", r == -1 && e == EINVAL && code == -1 && strstr(said, "7 counters"),
        "8 requests: bind %d, errno %d, subcode %d (none: more requests than cpc_npic), "
        "stderr '%s'", r, e, code, said);
  cpc_seterrhndlr(cpc, handler);
  r = bind(cpc, 0, 7, NULL);
  e = errno;
  code = subcode;
  cpc_seterrhndlr(cpc, NULL);
  stderr_of(bind_only, cpc, 0, 7);
  check("capacity.seven_instructions_refused",
        r == -1 && e == EINVAL && code != -1 && code != CPC_INVALID_EVENT && strstr(said, "counter"),
        "7 instructions (6 counters can hold them): bind %d, errno %d, subcode %d, stderr '%s'",
        r, e, code, said);
  cpc_seterrhndlr(cpc, handler);
  r = bind(cpc, 2, 7, NULL);
  check("capacity.nine_refused", r == -1 && errno == EINVAL && subcode != CPC_INVALID_EVENT,
        "9 requests: bind %d, errno %d, subcode %d, message '%s'", r, errno, subcode, message);

  /* An event the PMU does not have: the kernel answers ENOENT for `branches` here. */
  message[0] = 0;
  subcode = -1;
  r = add_only(cpc, 0, 0);
  e = errno;
  code = subcode;
  cpc_seterrhndlr(cpc, NULL);
  stderr_of(add_only, cpc, 0, 0);
  check("capacity.lacking_event_refused_at_add",
        r == -1 && e == EINVAL && code == CPC_INVALID_EVENT && strstr(said, "branches"),
        "cpc_set_add_request(branches): %d, errno %d, subcode %d, handler '%s', stderr '%s'", r, e,
        code, message, said);
  cpc_close(cpc);
  return guest_exit();
}
