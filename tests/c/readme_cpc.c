/* The README's libcpc example, PAPI_tot_ins counted on the calling LWP (issue 46 item 1). */
#include <libcpc.h>
#include <stdint.h>
#include <stdio.h>

static volatile unsigned long sink;

static void work(void) {
    for (unsigned long i = 0; i < 2000000UL; i++)
        sink += i;
}

int main(void) {
    uint64_t count = 0;
    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    if (cpc == NULL)
        return 1;
    cpc_set_t *set = cpc_set_create(cpc);
    int ind = cpc_set_add_request(cpc, set, "PAPI_tot_ins", 0, CPC_COUNT_USER, 0, NULL);
    if (ind < 0)
        return 1;
    cpc_buf_t *buf = cpc_buf_create(cpc, set);
    if (buf == NULL || cpc_bind_curlwp(cpc, set, 0) != 0)
        return 1;
    work();
    if (cpc_set_sample(cpc, set, buf) != 0 || cpc_buf_get(cpc, buf, ind, &count) != 0)
        return 1;
    printf("PAPI_tot_ins %llu\n", (unsigned long long)count);
    return count > 0 ? 0 : 1;
}
