/* install_exit.c: writes to <pages> fresh pages (one page fault each) and ends with exit(0)
 * (argv[1] "exit"), _exit(0) ("_exit") or a return from main ("return"); a program that never
 * calls the counters, for PERFCOMPAT_PRELOAD_EVENTS. Usage: install_exit exit|_exit|return <pages> */
#define _DEFAULT_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long pages = argc > 2 ? atol(argv[2]) : 100, pagesize = sysconf(_SC_PAGESIZE), i;
    char *p = mmap(NULL, (size_t) (pages * pagesize), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (argc < 2 || p == MAP_FAILED)
        return 2;
    for (i = 0; i < pages; i++)
        p[i * pagesize] = 1;
    if (strcmp(argv[1], "_exit") == 0)
        _exit(0);
    if (strcmp(argv[1], "exit") == 0)
        exit(0);
    return 0;
}
