/* Calls the emulated-PMU test hook through the C ABI, built only against include/ and the
 * library. argv[1] says which backend the environment selected: "sim" or "perf". */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "perfcompat.h"

static int fails;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); fails++; } } while (0)

int main(int argc, char **argv) {
    int sim = argc > 1 && strcmp(argv[1], "sim") == 0;
    int r;
    errno = 0;
    r = perfcompat_sim_advance(NULL, 1);
    CHECK(r == -1 && errno == EINVAL);
    if (sim) {
        /* argv[2..]: event names the model knows; no set is bound, so nothing counts them. */
        for (int i = 2; i < argc; i++) {
            r = perfcompat_sim_advance(argv[i], 5);
            CHECK(r == 0);
        }
        errno = 0;
        r = perfcompat_sim_advance("no_such_event", 1);
        CHECK(r == -1 && errno == EINVAL);
    } else {
        errno = 0;
        r = perfcompat_sim_advance("cycles", 1);
        CHECK(r == -1 && errno == ENOTSUP);
    }
    printf("%s: %d failures\n", sim ? "sim" : "perf", fails);
    return fails != 0;
}
