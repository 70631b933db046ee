/* Two builds of our library in one process, compared call for call: each is loaded with
 * dlopen (RTLD_LOCAL | RTLD_DEEPBIND: two engines side by side), binds its own set of K events
 * on this thread, and the two take turns in blocks of 1000 samples, in cycles A B B A. The
 * ratio B/A of each cycle compares them on the same machine state. One build against a copy of
 * itself gives 0.99-1.01 over 200 cycles (the two copies sit at different addresses), where
 * separate processes move by several percent (see the README's Benchmarks).
 *   usage: ab LIB_A LIB_B K [CYCLES]   (K = 1..4 events; "interval" as K compares
 *          start_counters + read_counters instead, with PERFCOMPAT_EVENTS mapping 0 and 16)
 * prints "sampleK B/A MEDIAN [P25 P75] A NS B NS" (or "interval ..."). LIB_A and LIB_B must be
 * different files: dlopen of one path twice gives one library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include "common.h"

typedef void cpc_t, cpc_set_t, cpc_buf_t;

struct lib {
    cpc_t *cpc;
    cpc_set_t *set;
    cpc_buf_t *buf;
    int (*sample)(cpc_t *, cpc_set_t *, cpc_buf_t *);
    int (*start)(int, int);
    int (*read)(int, long long *, int, long long *);
};

static void *sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (!p) { fprintf(stderr, "ab: %s: %s\n", name, dlerror()); exit(2); }
    return p;
}

static void load(struct lib *l, const char *path, int k) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) { fprintf(stderr, "ab: %s\n", dlerror()); exit(2); }
    l->start = (int (*)(int, int))sym(h, "start_counters");
    l->read = (int (*)(int, long long *, int, long long *))sym(h, "read_counters");
    l->sample = (int (*)(cpc_t *, cpc_set_t *, cpc_buf_t *))sym(h, "cpc_set_sample");
    if (k == 0) return; /* the interval: nothing to bind */
    cpc_t *(*open)(int) = (cpc_t * (*)(int)) sym(h, "cpc_open");
    cpc_set_t *(*create)(cpc_t *) = (cpc_set_t * (*)(cpc_t *)) sym(h, "cpc_set_create");
    int (*add)(cpc_t *, cpc_set_t *, const char *, uint64_t, unsigned, int, void *) =
        (int (*)(cpc_t *, cpc_set_t *, const char *, uint64_t, unsigned, int, void *))sym(
            h, "cpc_set_add_request");
    cpc_buf_t *(*buf_create)(cpc_t *, cpc_set_t *) =
        (cpc_buf_t * (*)(cpc_t *, cpc_set_t *)) sym(h, "cpc_buf_create");
    int (*bind)(cpc_t *, cpc_set_t *, unsigned) =
        (int (*)(cpc_t *, cpc_set_t *, unsigned))sym(h, "cpc_bind_curlwp");
    l->cpc = open(2); /* CPC_VER_CURRENT */
    if (!l->cpc || !(l->set = create(l->cpc))) { fprintf(stderr, "ab: cpc_open\n"); exit(2); }
    for (int i = 0; i < k; i++)
        if (add(l->cpc, l->set, BENCH_EVENT(BENCH_PERF, i), 0, 2 /* CPC_COUNT_USER */, 0,
                NULL) < 0) {
            fprintf(stderr, "ab: cpc_set_add_request\n");
            exit(2);
        }
    if (!(l->buf = buf_create(l->cpc, l->set)) || bind(l->cpc, l->set, 0) != 0) {
        fprintf(stderr, "ab: cpc_bind_curlwp\n");
        exit(2);
    }
}

static double block(struct lib *l, int k, int n) {
    long long c0, c1;
    int64_t t0 = bench_now();
    if (k == 0) {
        for (int i = 0; i < n; i++) {
            int g = l->start(0, 16);
            if (l->read(0, &c0, 16, &c1) != g) { fprintf(stderr, "ab: read_counters\n"); exit(2); }
        }
    } else {
        for (int i = 0; i < n; i++) l->sample(l->cpc, l->set, l->buf);
    }
    return (double)(bench_now() - t0) / n;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: ab LIB_A LIB_B K|interval [CYCLES]\n"); return 2; }
    int k = strcmp(argv[3], "interval") == 0 ? 0 : atoi(argv[3]);
    int cycles = argc > 4 ? atoi(argv[4]) : 200, n = 1000;
    if (k < 0 || k > 4 || cycles < 1) { fprintf(stderr, "ab: K is 1..4 or interval\n"); return 2; }
    struct lib a, b;
    load(&a, argv[1], k);
    load(&b, argv[2], k);
    double *r = malloc(sizeof(double) * (size_t)cycles), *ta = malloc(sizeof(double) * (size_t)cycles),
           *tb = malloc(sizeof(double) * (size_t)cycles);
    for (int c = -1; c < cycles; c++) {
        /* A B B A; the first cycle is untimed (code and data in place). */
        double x = block(&a, k, n), y = block(&b, k, n);
        y += block(&b, k, n);
        x += block(&a, k, n);
        if (c < 0) continue;
        r[c] = y / x;
        ta[c] = x / 2;
        tb[c] = y / 2;
    }
    qsort(r, (size_t)cycles, sizeof(double), cmp);
    qsort(ta, (size_t)cycles, sizeof(double), cmp);
    qsort(tb, (size_t)cycles, sizeof(double), cmp);
    if (k) printf("sample%d", k); else printf("interval");
    printf(" B/A %.4f [%.4f %.4f] A %.0f B %.0f\n", r[cycles / 2], r[cycles / 4],
           r[3 * cycles / 4], ta[cycles / 2], tb[cycles / 2]);
    return 0;
}
