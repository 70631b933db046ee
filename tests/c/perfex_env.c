/* T5_EVENT0/T5_EVENT1 (and the T5EVENT0/T5EVENT1 spelling) override start_counters' arguments.
 * With no argument the driver sets T5_EVENT0=2 and T5EVENT1=19: the program asks for 0 and 25
 * but counts events 2 and 19. With "noenv" only an invalid T5_EVENT1 is set: ignored, once. */
#include <stdio.h>
#include <string.h>
#include "libperfex.h"
#include "perfcompat.h"

/* The Fortran entry points (arguments by reference), called as gfortran would. */
int start_counters_(const int *e0, const int *e1);
int read_counters_(const int *e0, long long *c0, const int *e1, long long *c1);
int start_counters__(const int *e0, const int *e1);
int read_counters__(const int *e0, long long *c0, const int *e1, long long *c1);

static int fails;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); fails++; } } while (0)

int main(int argc, char **argv) {
    long long c0, c1;
    int overridden = !(argc > 1 && strcmp(argv[1], "noenv") == 0);
    for (int round = 0; round < 2; round++) {
        int a = 0, b = 25;
        /* Round 0 through the C names, round 1 through the Fortran ones. */
        int g = round == 0 ? start_counters(0, 25) : start_counters_(&a, &b);
        CHECK(g > 0);
        perfcompat_sim_advance("2", 11);
        perfcompat_sim_advance("19", 22);
        perfcompat_sim_advance("0", 33);
        perfcompat_sim_advance("25", 44);
        CHECK((round == 0 ? read_counters(0, &c0, 25, &c1) : read_counters_(&a, &c0, &b, &c1)) == g);
        if (overridden) CHECK(c0 == 11 && c1 == 22);
        else CHECK(c0 == 33 && c1 == 44);
    }
    {
        int a = 3, b = 16;
        int g = start_counters__(&a, &b);
        CHECK(g > 0);
        CHECK(start_counters_(NULL, &b) < 0);
        if (!overridden) {
            perfcompat_sim_advance("3", 5);
            CHECK(read_counters__(&a, &c0, &b, &c1) == g && c0 == 5 && c1 == 0);
        }
    }
    printf("%d failures\n", fails);
    return fails != 0;
}
