/* install_count.c: counts R10000 events 0 and 25 (page faults through the tests' event map)
 * around writing to <pages> fresh pages, and says how many copies of perfcompat's library the
 * process has mapped (distinct files in /proc/self/maps named libperfcompat, libperfex or
 * libcpc). Prints "pages=N count=C gen_ok=0|1 copies=K" and exits 0, or exits 1 when a call
 * fails. With -DWITH_CPC it also opens libcpc (so the test can link -lperfex -lcpc).
 * Usage: install_count <pages> */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <libperfex.h>
#ifdef WITH_CPC
#include <libcpc.h>
#endif

static int copies(void)
{
    char line[4096];
    unsigned long inodes[16];
    int n = 0, i;
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long inode = 0;
        char path[4096] = "";
        if (strstr(line, "libperfcompat") == NULL && strstr(line, "libperfex") == NULL &&
            strstr(line, "libcpc") == NULL)
            continue;
        if (sscanf(line, "%*s %*s %*s %*s %lu %4095s", &inode, path) < 1)
            continue;
        for (i = 0; i < n && inodes[i] != inode; i++)
            ;
        if (i == n && n < 16)
            inodes[n++] = inode;
    }
    fclose(f);
    return n;
}

int main(int argc, char **argv)
{
    long pages = argc > 1 ? atol(argv[1]) : 100, pagesize = sysconf(_SC_PAGESIZE), i;
    long long c0 = 0, c1 = 0;
    int gen, gen2;
    char *p;
#ifdef WITH_CPC
    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    if (cpc == NULL) {
        perror("cpc_open");
        return 1;
    }
#endif
    p = mmap(NULL, (size_t) (pages * pagesize), PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 1;
    gen = start_counters(0, 25);
    if (gen < 0) {
        printf("start_counters returned %d\n", gen);
        return 1;
    }
    for (i = 0; i < pages; i++)
        p[i * pagesize] = 1;
    gen2 = read_counters(0, &c0, 25, &c1);
    if (gen2 < 0) {
        printf("read_counters returned %d\n", gen2);
        return 1;
    }
    printf("pages=%ld count=%lld gen_ok=%d copies=%d\n", pages, c1, gen == gen2, copies());
    munmap(p, (size_t) (pages * pagesize));
#ifdef WITH_CPC
    if (cpc_close(cpc) != 0)
        return 1;
#endif
    return 0;
}
