/*
 * <linux/perfctr.h>: perfctr's information and virtual-counter control structures, served
 * by perfcompat's libperfctr (-lperfctr). Written by hand from perfctr's documented names;
 * the values are perfcompat's where libperfctr(3) says so. See docs/perfctr.md.
 *
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#ifndef PERFCOMPAT_LINUX_PERFCTR_H
#define PERFCOMPAT_LINUX_PERFCTR_H

#include <asm/perfctr.h>

/* What vperfctr_info reports. */
struct perfctr_info {
	unsigned int abi_version;
	char driver_version[32];
	unsigned int cpu_type;
	unsigned int cpu_features;
	unsigned int cpu_khz;
	unsigned int tsc_to_cpu_mult;
	unsigned int _reserved2;
	unsigned int _reserved3;
	unsigned int _reserved4;
};

/* A set of CPUs: bit i % 32 of mask[i / 32] for CPU i; nrwords words follow. */
struct perfctr_cpu_mask {
	unsigned int nrwords;
	unsigned int mask[1];
};

/* perfcompat's ABI number (not perfctr's). */
#define PERFCTR_ABI_VERSION 0x0500

/* cpu_features bits. */
#define PERFCTR_FEATURE_RDPMC 0x01
#define PERFCTR_FEATURE_RDTSC 0x02
#define PERFCTR_FEATURE_PCINT 0x04

/* cpu_type values this library reports: the x86 ones are perfctr's; the PowerPC ones are
 * perfctr's plus 0x100, so that one header tells them from the x86 ones. */
#define PERFCTR_X86_GENERIC 0
#define PERFCTR_X86_INTEL_PIII 5
#define PERFCTR_X86_INTEL_P4 11
#define PERFCTR_PPC_750 0x103
#define PERFCTR_PPC_7450 0x105
/* perfcompat's: Linux perf events. evntsel is in the P6 layout (USR 0x10000, OS 0x20000,
 * INT 0x100000); PERFCTR_EVNTSEL_SOFTWARE(n) names software event n (PERF_COUNT_SW_*: 0
 * cpu-clock, 1 task-clock, 2 page-faults, 3 context-switches, 4 cpu-migrations, 5 minor
 * faults, 6 major faults, 7 alignment faults, 8 emulation faults); event 0x79 is cycles, 0xC0
 * instructions, 0xC4 branches, 0xC5 branch misses. */
/* Any other evntsel is the CPU's raw event (PERF_TYPE_RAW: on x86 event, unit mask, edge,
 * invert and count mask in their places), USR and OS its modes. On arm64 bits 0-15 are the
 * ARMv8 event number (0x08 instructions retired, 0x11 cycles), with USR, OS and INT as above,
 * EN ignored, and bits 18, 19 and 23-31 clear; the generic x86 codes above are not taken
 * there. On a Pentium 4 host cpu_type is PERFCTR_X86_INTEL_P4 and the control data is the
 * Pentium 4's, counted as Linux's P4 raw events. */
#define PERFCTR_PERFCOMPAT_PERF 0x200
#define PERFCTR_EVNTSEL_SOFTWARE(n) (0x00200000U | ((unsigned int)(n) & 0xFFU))

/* The virtual counters' control. si_signo: the signal an i-mode overflow sends (needed when
 * nrictrs > 0). preserve: non-zero keeps the earlier sums. */
struct vperfctr_control {
	int si_signo;
	struct perfctr_cpu_control cpu_control;
	unsigned int preserve;
	unsigned int flags;
	unsigned int _reserved2;
	unsigned int _reserved3;
	unsigned int _reserved4;
};

/* flags: end the counters at an exec (always so with this library). */
#define VPERFCTR_CONTROL_CLOEXEC 0x01

/* Global mode: one CPU's control data (gperfctr_control). */
struct gperfctr_cpu_control {
	unsigned int cpu;
	struct perfctr_cpu_control cpu_control;
	unsigned int _reserved1;
	unsigned int _reserved2;
	unsigned int _reserved3;
	unsigned int _reserved4;
};

/* Global mode: one CPU's control data and sums (gperfctr_read; the caller sets cpu). */
struct gperfctr_cpu_state {
	unsigned int cpu;
	struct perfctr_cpu_control cpu_control;
	struct perfctr_sum_ctrs sum;
	unsigned int _reserved1;
	unsigned int _reserved2;
	unsigned int _reserved3;
	unsigned int _reserved4;
};

#endif
