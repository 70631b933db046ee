/* The README's libperfex example, start_counters(0, 25) (issue 46 item 1), with its failures
 * checked: exit 1 when start_counters fails, as a careful program would. */
#include <libperfex.h>
#include <stdio.h>

static volatile unsigned long sink;

static void work(void) {
    for (unsigned long i = 0; i < 2000000UL; i++)
        sink += i;
}

int main(void) {
    long long c0, c1;
    int gen = start_counters(0, 25);
    if (gen < 0)
        return 1;
    work();
    if (read_counters(0, &c0, 25, &c1) != gen)
        return 1;
    print_counters(0, c0, 25, c1);
    return 0;
}
