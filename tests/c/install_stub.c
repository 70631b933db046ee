/* install_stub.c: another libperfex.so.1, whose every function fails (returns -1). The install
 * tests build it with soname libperfex.so.1, link install_count.c against it, and check that
 * LD_PRELOAD of perfcompat's libperfex.so.1 makes that binary count. */
int start_counters(int e0, int e1) { (void) e0; (void) e1; return -1; }
int read_counters(int e0, long long *c0, int e1, long long *c1)
{
    (void) e0; (void) c0; (void) e1; (void) c1;
    return -1;
}
int print_counters(int e0, long long c0, int e1, long long c1)
{
    (void) e0; (void) c0; (void) e1; (void) c1;
    return -1;
}
/* With -DWITH_CPC: a libcpc.so.1 stand-in too (cpc_open fails). */
#ifdef WITH_CPC
void *cpc_open(int ver) { (void) ver; return 0; }
#endif
#ifdef WITH_CPC
int cpc_close(void *cpc) { (void) cpc; return -1; }
#endif
