/* read_counters that fails sets the counts it can reach to 0 (issue 46 item 2): a program that
 * misses the -1, as `read_counters(...) != gen` does when start_counters failed too, prints
 * zeros, not what its variables held. Prints one line per case; exits 1 on a wrong value. */
#include <stdio.h>
#include <libperfex.h>

static int check(const char *what, int ret, long long c0, long long c1)
{
    printf("%s: %d %lld %lld\n", what, ret, c0, c1);
    return ret == -1 && c0 == 0 && c1 == 0 ? 0 : 1;
}

int main(void)
{
    long long c0 = 12345, c1 = 67890;
    int bad = 0;
    /* Never started on this thread. */
    int got = read_counters(0, &c0, 25, &c1);
    bad |= check("no start", got, c0, c1);
    /* A start that failed (event 99 does not exist), then the idiom's read. */
    c0 = 12345, c1 = 67890;
    int gen = start_counters(0, 99);
    got = read_counters(0, &c0, 99, &c1);
    bad |= check("failed start", got, c0, c1);
    printf("idiom passes: %s\n", got == gen ? "yes" : "no");
    /* One NULL pointer: the other count is still cleared. */
    c0 = 12345;
    got = read_counters(0, &c0, 25, NULL);
    bad |= check("NULL c1", got, c0, 0);
    return bad;
}
