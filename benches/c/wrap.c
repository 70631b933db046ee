/* The least a counting command does: the floor under the fixed cost of perfex and cputrack in
 * the disturbance rows. It forks the command, opens the benchmark's first two events on it with
 * raw perf_event_open (inherited by what it creates, enabled at its exec), lets it exec, waits
 * for it, then reads and prints the two counts. Nothing else: no event names to resolve, no
 * cost table, no report.
 *   usage: wrap COMMAND [ARGS...]   (exits with the command's status) */
#include "rawperf.h"
#include <sys/wait.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: wrap COMMAND [ARGS...]\n");
        return 2;
    }
    int go[2];
    if (pipe(go) < 0) BENCH_FAIL("pipe");
    pid_t pid = fork();
    if (pid < 0) BENCH_FAIL("fork");
    if (pid == 0) {
        char c;
        close(go[1]);
        /* Wait until the counters are on this process, then run the command. */
        if (read(go[0], &c, 1) != 1) _exit(127);
        execvp(argv[1], argv + 1);
        _exit(127);
    }
    close(go[0]);
    const uint64_t times = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    int fd[2];
    for (int i = 0; i < 2; i++) fd[i] = bench_open_task(pid, i, -1, times, 1, 1);
    if (write(go[1], "g", 1) != 1) BENCH_FAIL("write");
    close(go[1]);
    int st;
    if (waitpid(pid, &st, 0) < 0) BENCH_FAIL("waitpid");
    for (int i = 0; i < 2; i++) {
        uint64_t v[3];
        if (read(fd[i], v, sizeof v) != (ssize_t)sizeof v) BENCH_FAIL("read");
        printf("%s %llu\n", BENCH_EVENT(BENCH_PERF, i), (unsigned long long)v[0]);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
