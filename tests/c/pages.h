/* Touch `pages` fresh pages of anonymous memory without huge pages: one page fault each.
 * Shared by the test programs that count page faults. */
#ifndef PERFCOMPAT_TESTS_PAGES_H
#define PERFCOMPAT_TESTS_PAGES_H
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

static void touch(long pages) {
    size_t len = (size_t)pages * 4096;
    volatile char *p = (volatile char *)mmap(NULL, len, PROT_READ | PROT_WRITE,
                                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(99); }
    madvise((void *)p, len, MADV_NOHUGEPAGE);
    for (long i = 0; i < pages; i++) p[i * 4096] = 1;
    munmap((void *)p, len);
}
#endif
