/*
 * <asm/perfctr.h>: perfctr's per-CPU data structures, for programs written for perfctr's
 * interface, served by perfcompat's libperfctr (-lperfctr) over Linux perf events or an
 * emulated PMU. Written by hand from perfctr's documented field names (no perfctr source);
 * capi/tests/perfctr.rs checks the layouts against the library's.
 *
 * One layout serves every family on every host (a program may run on the emulated Pentium III,
 * Pentium 4 or PowerPC 750/7450 on one machine): the x86 fields in perfctr's x86 order, then
 * the PowerPC ones (cpu_control.ppc). Programs are source compatible; the layout is
 * perfcompat's. See libperfctr(3) and docs/perfctr.md.
 *
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#ifndef PERFCOMPAT_ASM_PERFCTR_H
#define PERFCOMPAT_ASM_PERFCTR_H

#include <linux/types.h>

/* Room in the per-counter arrays. */
#define PERFCTR_MAX_CTRS 18

/* The TSC's and each counter's 64-bit sum. */
struct perfctr_sum_ctrs {
	__u64 tsc;
	__u64 pmc[PERFCTR_MAX_CTRS];
};

/* Pentium 4: each counter's ESCR value, and the replay-tagging MSRs. */
struct perfctr_cpu_control_p4 {
	unsigned int escr[PERFCTR_MAX_CTRS];
	unsigned int pebs_enable;
	unsigned int pebs_matrix_vert;
};

/* PowerPC: MMCR0 (without the PMC1/PMC2 selects, which are in evntsel) and MMCR2. */
struct perfctr_cpu_control_ppc {
	unsigned int mmcr0;
	unsigned int mmcr2;
};

/* What to count. Counters 0 .. nractrs-1 accumulate (a-mode); counters
 * nractrs .. nractrs+nrictrs-1 interrupt on overflow (i-mode) and restart from ireset[]. */
struct perfctr_cpu_control {
	unsigned int tsc_on;
	unsigned int nractrs;
	unsigned int nrictrs;
	unsigned int pmc_map[PERFCTR_MAX_CTRS];
	unsigned int evntsel[PERFCTR_MAX_CTRS];
	struct perfctr_cpu_control_p4 p4;
	int ireset[PERFCTR_MAX_CTRS];
	struct perfctr_cpu_control_ppc ppc;
	unsigned int _reserved1;
	unsigned int _reserved2;
	unsigned int _reserved3;
	unsigned int _reserved4;
};

/* The counter state as perfctr's driver kept it (declared for source compatibility: this
 * library maps no state page; vperfctr_read_ctrs gives the sums, read in user space where the
 * backend can, and vperfctr_read_state the control in force). */
struct perfctr_cpu_state_k1 {
	unsigned int id;
	int isuspend_cpu;
};
struct perfctr_cpu_state_pmc {
	unsigned int map;
	unsigned int start;
	__u64 sum;
};
struct perfctr_cpu_state {
	unsigned int cstatus;
	struct perfctr_cpu_state_k1 k1;
	unsigned int tsc_start;
	__u64 tsc_sum;
	struct perfctr_cpu_state_pmc pmc[PERFCTR_MAX_CTRS];
};

/* cstatus: tsc_on in bit 31, nrictrs in bits 16-22, nractrs + nrictrs in bits 8-14, nractrs in
 * bits 0-6. */
#define perfctr_mk_cstatus(tsc_on, nractrs, nrictrs) \
	((unsigned int)((((unsigned int)(tsc_on) != 0) << 31) | ((unsigned int)(nrictrs) << 16) | \
	 (((unsigned int)(nractrs) + (unsigned int)(nrictrs)) << 8) | (unsigned int)(nractrs)))
#define perfctr_cstatus_enabled(cstatus) ((unsigned int)(cstatus))
#define perfctr_cstatus_has_tsc(cstatus) ((int)(((unsigned int)(cstatus) >> 31) & 1))
#define perfctr_cstatus_nractrs(cstatus) ((unsigned int)(cstatus) & 0x7F)
#define perfctr_cstatus_nrctrs(cstatus) (((unsigned int)(cstatus) >> 8) & 0x7F)
#define perfctr_cstatus_has_ictrs(cstatus) ((unsigned int)(cstatus) & (0x7FU << 16))

/* The overflow signal: si_code SI_PMC_OVF, and the mask of the overflowed counters (bit i =
 * counter i) in the first int of the siginfo's union (glibc names it _sifields._pad). */
#define SI_PMC_OVF ('P')
#define si_pmc_ovf_mask _sifields._pad[0]

#endif
