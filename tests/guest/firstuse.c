/* A first use of libcpc in a fresh process (issue 48, first use): cpc_open, a set of cycles and
 * instructions, its first cpc_bind_curlwp, as benches/guest/ibench.c's `first ours` row does.
 * The kernel maps a library's text 64 KiB at a time (its fault-around of 16 pages), at about 14k
 * instructions a window in this guest, so the windows of libperfcompat.so.1's text and
 * read-only data (one mapping) that the first use maps in beyond the load's are most of what a
 * first use costs over the raw perf_event_open + mmap:
 *   firstuse.windows   at most 1 new window (tools/install.sh links the functions a first
 *                      use runs in capi/link/first-use-order.txt's order, the outline atomics
 *                      among them, and the read-only data they read beside them, the ~30 KB
 *                      of merged strings after them: tools/first-use-rodata.awk); 2 while the
 *                      merged strings lay before the code, 3 allowed then; 5 when the
 *                      read-only data lay in .rodata, which GNU ld does not order (3 windows of
 *                      it); 7 (6 of them text) before the text was ordered, with an event map 8.
 * Seen in /proc/self/pagemap (a page's "present" bit) before cpc_open and after the bind. */
#define _GNU_SOURCE
#include "guest.h"
#include <fcntl.h>
#include <libcpc.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAX_WINDOWS 64
static uintptr_t lo, hi;

/* The library's executable mapping (text and read-only data: one segment). */
static int find_text(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    unsigned long a, b;
    char perm[8];
    if (sscanf(line, "%lx-%lx %7s", &a, &b, perm) == 3 && strcmp(perm, "r-xp") == 0 &&
        strstr(line, "libperfcompat.so")) {
      lo = a;
      hi = b;
    }
  }
  if (f)
    fclose(f);
  return lo != 0;
}

/* Which 64 KiB windows of the mapping have a page mapped: bit i for window i. */
static uint64_t windows(void) {
  int fd = open("/proc/self/pagemap", O_RDONLY);
  uint64_t mask = 0;
  for (uintptr_t p = lo; fd >= 0 && p < hi; p += 4096) {
    uint64_t e = 0;
    if (pread(fd, &e, sizeof e, (off_t)(p / 4096 * 8)) == (ssize_t)sizeof e && (e >> 63) & 1) {
      size_t w = (p - (lo & ~(uintptr_t)0xffff)) >> 16;
      if (w < MAX_WINDOWS)
        mask |= 1ull << w;
    }
  }
  if (fd >= 0)
    close(fd);
  return mask;
}

int main(void) {
  if (!find_text()) {
    check("firstuse.windows", 0, "no r-xp mapping of libperfcompat.so in /proc/self/maps");
    return guest_exit();
  }
  uint64_t before = windows();
  struct rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
  cpc_set_t *set = cpc ? cpc_set_create(cpc) : NULL;
  int ok = set && cpc_set_add_request(cpc, set, "cycles", 0, CPC_COUNT_USER, 0, NULL) >= 0 &&
           cpc_set_add_request(cpc, set, "instructions", 0, CPC_COUNT_USER, 0, NULL) >= 0 &&
           cpc_bind_curlwp(cpc, set, 0) == 0;
  getrusage(RUSAGE_SELF, &r1);
  uint64_t after = windows();
  check("firstuse.bound", ok, "cpc_open, cycles and instructions, cpc_bind_curlwp: %s",
        ok ? "counting" : "failed");
  uint64_t fresh = after & ~before;
  char list[MAX_WINDOWS * 10] = "";
  for (int i = 0; i < MAX_WINDOWS; i++)
    if (fresh >> i & 1)
      snprintf(list + strlen(list), sizeof list - strlen(list), " %#x", i << 16);
  check("firstuse.windows", __builtin_popcountll(fresh) <= 1,
        "%d windows of 64 KiB of the library's text mapped by the first use (at most 1), at"
        "%s; %d before it; %ld page faults in all",
        __builtin_popcountll(fresh), list, __builtin_popcountll(before),
        r1.ru_minflt - r0.ru_minflt);
  if (cpc)
    cpc_close(cpc);
  return guest_exit();
}
