/* A program that defines its own getenv, answering from a table of its own as bash does
 * (capi/tests/cpc.rs, issue 37): here it knows no variable at all. The library must still see
 * PERFCOMPAT_BACKEND from the process's environment: libcpc names the emulated R10000. */
#include <stdio.h>
#include <string.h>

#include <libcpc.h>

char *getenv(const char *name) {
    (void)name;
    return NULL;
}

int main(void) {
    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    const char *name = cpc ? cpc_cciname(cpc) : "(no cpc)";
    printf("cciname %s\n", name);
    printf("%d failures\n", strstr(name, "R10000") == NULL);
    return 0;
}
