/*
 * <libperfctr.h>: perfctr's user library on perfcompat: per-thread virtual counters with
 * 64-bit sums, a virtual TSC and i-mode overflow signals, over Linux perf events or an emulated
 * PMU (PERFCOMPAT_BACKEND=sim:pentium3, sim:ppc750, ...). Link with -lperfctr
 * (pkg-config libperfctr). Written by hand from perfctr's documented calls; see
 * libperfctr(3) and docs/perfctr.md for the differences from perfctr's driver.
 *
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#ifndef PERFCOMPAT_LIBPERFCTR_H
#define PERFCOMPAT_LIBPERFCTR_H

#include <linux/perfctr.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A handle on the calling thread's virtual counters. */
struct vperfctr;

struct vperfctr *vperfctr_open(void);
int vperfctr_info(const struct vperfctr *vp, struct perfctr_info *info);
int vperfctr_control(const struct vperfctr *vp, struct vperfctr_control *control);
int vperfctr_read_ctrs(const struct vperfctr *vp, struct perfctr_sum_ctrs *sum);
int vperfctr_read_state(const struct vperfctr *vp, struct perfctr_sum_ctrs *sum,
			struct vperfctr_control *control);
__u64 vperfctr_read_tsc(const struct vperfctr *vp);
__u64 vperfctr_read_pmc(const struct vperfctr *vp, unsigned int i);
int vperfctr_iresume(const struct vperfctr *vp);
int vperfctr_stop(const struct vperfctr *vp);
int vperfctr_is_running(const struct vperfctr *vp);
int vperfctr_unlink(const struct vperfctr *vp);
void vperfctr_close(struct vperfctr *vp);

char *perfctr_info_cpu_name(const struct perfctr_info *info);
unsigned int perfctr_info_nrctrs(const struct perfctr_info *info);
void perfctr_info_print(const struct perfctr_info *info);

#ifdef __cplusplus
}
#endif

#endif
