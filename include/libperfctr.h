/*
 * <libperfctr.h>: perfctr's user library on perfcompat: per-thread virtual counters with
 * 64-bit sums, a virtual TSC and i-mode overflow signals, another thread's counters
 * (rvperfctr_*) and whole CPUs' (gperfctr_*), over Linux perf events or an emulated PMU
 * (PERFCOMPAT_BACKEND=sim:pentium3, sim:ppc750, ...). Link with -lperfctr
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

/* The CPUs: one malloc block with its masks, freed with free(). cpus: the online CPUs;
 * cpus_forbidden: none. */
struct perfctr_cpus_info {
	struct perfctr_cpu_mask *cpus;
	struct perfctr_cpu_mask *cpus_forbidden;
};
struct perfctr_cpus_info *vperfctr_cpus_info(const struct vperfctr *vp);

/* Another thread's counters (pid: its thread id): a-mode counters and the TSC. The caller
 * needs what perf_event_open needs for that thread (same user, or CAP_PERFMON), not a ptrace
 * stop; on an emulated PMU only the calling process's own threads. See libperfctr(3). */
struct rvperfctr;

struct rvperfctr *rvperfctr_open(int pid);
int rvperfctr_pid(const struct rvperfctr *rvp);
int rvperfctr_info(const struct rvperfctr *rvp, struct perfctr_info *info);
int rvperfctr_read_ctrs(const struct rvperfctr *rvp, struct perfctr_sum_ctrs *sum);
int rvperfctr_read_state(const struct rvperfctr *rvp, struct perfctr_sum_ctrs *sum,
			 struct vperfctr_control *control);
int rvperfctr_control(const struct rvperfctr *rvp, struct vperfctr_control *control);
int rvperfctr_stop(const struct rvperfctr *rvp);
int rvperfctr_iresume(const struct rvperfctr *rvp);
int rvperfctr_unlink(const struct rvperfctr *rvp);
void rvperfctr_close(struct rvperfctr *rvp);

/* Global mode: everything that runs on chosen CPUs (a-mode counters and the TSC). On Linux
 * perf events CPU-wide counting needs perf_event_paranoid <= 0 or CAP_PERFMON:
 * gperfctr_start fails with EACCES otherwise. */
struct gperfctr;

struct gperfctr *gperfctr_open(void);
void gperfctr_close(struct gperfctr *gp);
int gperfctr_control(const struct gperfctr *gp, struct gperfctr_cpu_control *control);
int gperfctr_read(const struct gperfctr *gp, struct gperfctr_cpu_state *state);
int gperfctr_stop(const struct gperfctr *gp);
int gperfctr_start(const struct gperfctr *gp, unsigned int interval_usec);
int gperfctr_info(const struct gperfctr *gp, struct perfctr_info *info);
struct perfctr_cpus_info *gperfctr_cpus_info(const struct gperfctr *gp);

/* fd is not used: there is no /dev/perfctr. */
int perfctr_info(int fd, struct perfctr_info *info);
int perfctr_get_info(struct perfctr_info *info);
struct perfctr_cpus_info *perfctr_cpus_info(int fd);
char *perfctr_info_cpu_name(const struct perfctr_info *info);
unsigned int perfctr_info_nrctrs(const struct perfctr_info *info);
void perfctr_info_print(const struct perfctr_info *info);
void perfctr_cpus_info_print(const struct perfctr_cpus_info *info);

#ifdef __cplusplus
}
#endif

#endif
