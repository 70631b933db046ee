/* exec drops the counters: every perf descriptor the library opened is close-on-exec, so the
 * program exec'd (a shell listing its own descriptors) holds none. Run on perf with event 25
 * mapped to page-faults. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "libcpc.h"
#include "libperfex.h"

int main(void) {
    if (start_counters(0, 25) <= 0) return 2;
    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    cpc_set_t *set = cpc ? cpc_set_create(cpc) : NULL;
    if (!set || cpc_set_add_request(cpc, set, "page-faults", 0, CPC_COUNT_USER, 0, NULL) != 0 ||
        cpc_bind_curlwp(cpc, set, 0) != 0)
        return 2;
    fflush(stdout);
    /* Before the exec: the descriptors are there. */
    if (system("ls -l /proc/$PPID/fd | grep -c perf_event") != 0) return 2;
    execl("/bin/sh", "sh", "-c", "echo after exec:; ls -l /proc/$$/fd", (char *)NULL);
    return 3;
}
