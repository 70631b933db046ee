/* perfex_usage.c: the libperfex(3C) usage pattern, as the man page shows it ("all correct uses
 * of the interface must check that the generation number returned by read_counters matches the
 * generation number from the corresponding start_counters").
 *
 * Counts cycles (event 0) and secondary data cache misses (event 26) around a loop that
 * streams through an array larger than the caches, then prints the counts and their time
 * estimates on standard error. T5_EVENT0 and T5_EVENT1 pick other events without recompiling:
 * the man page's own example counts secondary instruction and data cache misses,
 * T5_EVENT0=10 T5_EVENT1=26.
 *
 * Build against an installed perfcompat (<prefix> holds include/libperfex.h and
 * lib/libperfex.so):
 *     cc perfex_usage.c -I<prefix>/include -L<prefix>/lib -Wl,-rpath,<prefix>/lib -lperfex
 */
#include <stdio.h>
#include <stdlib.h>
#include <libperfex.h>

#define N (4L * 1024 * 1024) /* doubles: 32 MiB */

int main(void) {
    int e0 = 0, e1 = 26;
    long long c0, c1;
    int gen_start, gen_read;
    double *a = malloc(N * sizeof *a), sum = 0;
    long i;

    if (a == NULL) {
        perror("malloc");
        exit(1);
    }

    if ((gen_start = start_counters(e0, e1)) < 0) {
        perror("start_counters");
        exit(1);
    }

    /* user code */
    for (i = 0; i < N; i++)
        a[i] = (double)i;
    for (i = 0; i < N; i += 8) /* one double of each 64-byte line */
        sum += a[i];

    if ((gen_read = read_counters(e0, &c0, e1, &c1)) < 0) {
        perror("read_counters");
        exit(1);
    }

    if (gen_read != gen_start) {
        fprintf(stderr, "lost counters!, aborting...\n");
        exit(1);
    }

    /* do something with c0, c1 */
    if (print_counters(e0, c0, e1, c1) < 0 || print_costs(e0, c0, e1, c1) < 0) {
        perror("print");
        exit(1);
    }
    printf("sum = %.0f\n", sum);
    free(a);
    return 0;
}
