/* The Pentium 4 ESCR conflict of cpc_bind_curlwp(3CPC), NOTES: "the branch_retired event cannot
 * be measured on counters 12 and 13 simultaneously because both counters require the CRU_ESCR2
 * ESCR". Run on sim:pentium4. Two branch_retired requests pinned (attribute picnum) to counters
 * that can only use one ESCR fail at bind with EINVAL and CPC_RESOURCE_UNAVAIL; pinned to a
 * CRU_ESCR2 counter (12, 13, 16) and a CRU_ESCR3 counter (14, 15) they bind and count.
 *
 * The first failing bind runs without an error handler, so the library's own message goes to
 * stderr ("libcpc: cpc_bind_curlwp: ..."), which the test that runs this program checks. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <libcpc.h>
#include <perfcompat.h>

static int fails;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); fails++; } } while (0)

/* What the error handler saw last. */
static int calls, last_subcode;
static char last_fn[64], last_msg[256];

static void handler(const char *fn, int subcode, const char *fmt, va_list ap) {
    calls++;
    last_subcode = subcode;
    snprintf(last_fn, sizeof last_fn, "%s", fn);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    errno = 0; /* the library must give the caller its own errno back */
}

/* A set of two branch_retired requests (every branch: emask 0xf) on counters pic0 and pic1. */
static cpc_set_t *two_branch_requests(cpc_t *cpc, int pic0, int pic1) {
    char picnum[] = "picnum", emask[] = "emask";
    cpc_attr_t a0[2], a1[2];
    cpc_set_t *set = cpc_set_create(cpc);
    CHECK(set != NULL);
    a0[0].ca_name = picnum;
    a0[0].ca_val = (uint64_t)pic0;
    a0[1].ca_name = emask;
    a0[1].ca_val = 0xf;
    a1[0] = a0[0];
    a1[0].ca_val = (uint64_t)pic1;
    a1[1] = a0[1];
    CHECK(cpc_set_add_request(cpc, set, "branch_retired", 0, CPC_COUNT_USER, 2, a0) == 0);
    CHECK(cpc_set_add_request(cpc, set, "branch_retired", 0, CPC_COUNT_USER, 2, a1) == 1);
    return set;
}

/* The pair must fail to bind: EINVAL, and the handler called with CPC_RESOURCE_UNAVAIL. */
static void expect_conflict(cpc_t *cpc, int pic0, int pic1) {
    cpc_set_t *set = two_branch_requests(cpc, pic0, pic1);
    calls = 0;
    last_subcode = -1;
    errno = 0;
    CHECK(cpc_bind_curlwp(cpc, set, 0) == -1);
    CHECK(errno == EINVAL);
    CHECK(calls == 1);
    CHECK(last_subcode == CPC_RESOURCE_UNAVAIL);
    CHECK(strcmp(last_fn, "cpc_bind_curlwp") == 0);
    printf("pic%d+pic%d: errno %d (%s), subcode %d, %s: %s", pic0, pic1, errno, strerror(errno),
           last_subcode, last_fn, last_msg);
    CHECK(cpc_set_destroy(cpc, set) == 0);
}

/* The pair must bind and count what is injected, on both requests. */
static void expect_counting(cpc_t *cpc, int pic0, int pic1) {
    cpc_set_t *set = pic0 < 0 ? NULL : two_branch_requests(cpc, pic0, pic1);
    cpc_buf_t *buf;
    uint64_t v0 = 1, v1 = 1;
    if (set == NULL) { /* unpinned: the library places both */
        CHECK((set = cpc_set_create(cpc)) != NULL);
        CHECK(cpc_set_add_request(cpc, set, "branch_retired", 0, CPC_COUNT_USER, 0, NULL) == 0);
        CHECK(cpc_set_add_request(cpc, set, "branch_retired", 0, CPC_COUNT_USER, 0, NULL) == 1);
    }
    CHECK((buf = cpc_buf_create(cpc, set)) != NULL);
    calls = 0;
    errno = 0;
    if (cpc_bind_curlwp(cpc, set, 0) != 0) {
        fprintf(stderr, "FAIL: pic%d+pic%d (-1: unpinned): bind: %s\n", pic0, pic1,
                strerror(errno));
        fails++;
    } else {
        CHECK(calls == 0);
        CHECK(perfcompat_sim_advance("branch_retired", 12345) == 1);
        CHECK(cpc_set_sample(cpc, set, buf) == 0);
        CHECK(cpc_buf_get(cpc, buf, 0, &v0) == 0);
        CHECK(cpc_buf_get(cpc, buf, 1, &v1) == 0);
        CHECK(v0 == 12345 && v1 == 12345);
        CHECK(cpc_unbind(cpc, set) == 0);
    }
    if (pic0 < 0)
        printf("unpinned: bound, counted %" PRIu64 " and %" PRIu64 "\n", v0, v1);
    else
        printf("pic%d+pic%d: bound, counted %" PRIu64 " and %" PRIu64 "\n", pic0, pic1, v0, v1);
    CHECK(cpc_buf_destroy(cpc, buf) == 0);
    CHECK(cpc_set_destroy(cpc, set) == 0);
}

int main(void) {
    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    cpc_set_t *set;
    if (cpc == NULL) {
        perror("cpc_open");
        return 1;
    }
    CHECK(cpc_npic(cpc) == 18);

    /* No handler yet: the message goes to stderr, errno is EINVAL. */
    set = two_branch_requests(cpc, 12, 13);
    errno = 0;
    CHECK(cpc_bind_curlwp(cpc, set, 0) == -1);
    CHECK(errno == EINVAL);
    CHECK(cpc_set_destroy(cpc, set) == 0);

    CHECK(cpc_seterrhndlr(cpc, handler) == 0);
    expect_conflict(cpc, 12, 13); /* both need CRU_ESCR2 */
    expect_conflict(cpc, 13, 16); /* likewise */
    expect_conflict(cpc, 14, 15); /* both need CRU_ESCR3 */
    expect_counting(cpc, 12, 14); /* CRU_ESCR2 and CRU_ESCR3 */
    expect_counting(cpc, 15, 16);
    expect_counting(cpc, -1, -1); /* unpinned: placed where both fit */

    CHECK(cpc_close(cpc) == 0);
    printf("%d failures\n", fails);
    return fails != 0;
}
