/* perfctr's self-monitoring program (the one tests/c/perfctr_self.c runs on the emulated CPUs,
 * written from perfctr's documentation) on the kernel's real PMU driver, armv8_pmuv3, under
 * icount: built with -lperfctr, it programs ARMv8 event numbers in evntsel's bits 0-15
 * (0x08 INST_RETIRED, 0x11 CPU_CYCLES), USR (0x10000) for user mode and INT (0x100000) on the
 * i-mode counter, as docs/perfctr.md documents for arm64.
 *
 * 1. a-mode counters and the TSC: the instructions and cycles of known_loop(n) (2 an
 *    iteration), exact: the counts of two loop lengths differ by exactly 2 per iteration, the
 *    same in every run, and cycles equal instructions (one cycle an instruction under icount);
 *    the virtual TSC (the thread's CPU time) within 1 % of them.
 * 2. an a-mode INST_RETIRED counter and an i-mode CPU_CYCLES counter (the kernel gives it the
 *    cycle counter, whose overflow QEMU raises on time under icount) restarting from
 *    ireset = -PERIOD: one signal per overflow with si_code SI_PMC_OVF and the mask naming
 *    counter 1, the handler resumes with vperfctr_iresume, the frozen sum in the handler is
 *    exactly k * PERIOD at the k-th signal, the 64-bit sum at the end gives exactly as many
 *    overflows as signals came, and the a-mode counter stopped and resumed with it. */
#define _GNU_SOURCE
#include <errno.h>
#include <libperfctr.h>
#include <signal.h>

#include "guest.h"

#define USR 0x10000u
#define INT 0x100000u
#define INST_RETIRED 0x08u
#define CPU_CYCLES 0x11u
#define PERIOD 100000
#define MAXSIG 256

static struct vperfctr *vp;
static volatile sig_atomic_t nsignals, bad_code, bad_mask, resume_failed, read_failed;
static unsigned long long frozen[MAXSIG], frozen_insns[MAXSIG];

static void on_overflow(int sig, siginfo_t *si, void *uc) {
  struct perfctr_sum_ctrs s;
  int k = nsignals;
  (void)sig;
  (void)uc;
  if (si->si_code != SI_PMC_OVF)
    bad_code++;
  if (si->si_pmc_ovf_mask != 2)
    bad_mask++;
  if (vperfctr_read_ctrs(vp, &s) != 0)
    read_failed++;
  if (k < MAXSIG) {
    frozen[k] = s.pmc[1];
    frozen_insns[k] = s.pmc[0];
  }
  nsignals = k + 1;
  if (vperfctr_iresume(vp) != 0)
    resume_failed++;
}

static void program(int nrictrs) {
  struct vperfctr_control c;
  memset(&c, 0, sizeof c);
  c.cpu_control.tsc_on = 1;
  c.cpu_control.nractrs = 2 - (unsigned)nrictrs;
  c.cpu_control.nrictrs = (unsigned)nrictrs;
  c.cpu_control.pmc_map[0] = 0;
  c.cpu_control.evntsel[0] = INST_RETIRED | USR;
  c.cpu_control.pmc_map[1] = 1;
  c.cpu_control.evntsel[1] = CPU_CYCLES | USR | (nrictrs ? INT : 0);
  if (nrictrs) {
    c.si_signo = SIGUSR2;
    c.cpu_control.ireset[1] = -PERIOD;
  }
  if (vperfctr_control(vp, &c) != 0) {
    perror("vperfctr_control");
    exit(1);
  }
}

/* What the a-mode counters and the TSC count over known_loop(n). */
static struct perfctr_sum_ctrs amode(uint64_t n) {
  struct perfctr_sum_ctrs a, b;
  program(0);
  vperfctr_read_ctrs(vp, &a);
  known_loop(n);
  vperfctr_read_ctrs(vp, &b);
  /* Stopped, the next control starts on the counters this one had: a control made while
   * counters are running places the new ones beside them, on other hardware counters, whose
   * user-space read takes a few instructions more or less. */
  vperfctr_stop(vp);
  b.tsc -= a.tsc;
  b.pmc[0] -= a.pmc[0];
  b.pmc[1] -= a.pmc[1];
  return b;
}

struct irun {
  int signals;
  struct perfctr_sum_ctrs sum;
  int frozen_exact;    /* every frozen sum was k * PERIOD */
  int moved_together;  /* the a-mode counter froze with it: same instructions per period */
};

static struct irun imode(uint64_t n) {
  struct irun r;
  int k, lim;
  memset(&r, 0, sizeof r);
  nsignals = 0;
  program(1);
  known_loop(n);
  vperfctr_read_ctrs(vp, &r.sum);
  r.signals = nsignals;
  vperfctr_stop(vp);
  r.frozen_exact = 1;
  r.moved_together = 1;
  lim = r.signals < MAXSIG ? r.signals : MAXSIG;
  for (k = 0; k < lim; k++) {
    r.frozen_exact &= frozen[k] == (unsigned long long)(k + 1) * PERIOD;
    /* Between two overflows both counters count the same user instructions. */
    if (k > 1)
      r.moved_together &= frozen_insns[k] - frozen_insns[k - 1] == frozen_insns[1] - frozen_insns[0];
  }
  return r;
}

int main(void) {
  struct perfctr_info info;
  struct sigaction sa;
  const uint64_t n1 = 100000, n2 = 1000000;
  struct perfctr_sum_ctrs a1[3], a2[3];
  int i, same = 1;

  vp = vperfctr_open();
  if (vp == NULL) {
    perror("vperfctr_open");
    return 1;
  }
  check("perfctr.info", vperfctr_info(vp, &info) == 0 && info.cpu_type == PERFCTR_PERFCOMPAT_PERF &&
                            perfctr_info_nrctrs(&info) >= 2,
        "cpu type %#x (%s), %u counters, features %#x, %u kHz", info.cpu_type,
        perfctr_info_cpu_name(&info), perfctr_info_nrctrs(&info), info.cpu_features, info.cpu_khz);

  /* 1. a-mode counters and the TSC. The first control of the process does its one-time
   * set-up: not part of the counts. */
  amode(1);
  for (i = 0; i < 3; i++) {
    a1[i] = amode(n1);
    a2[i] = amode(n2);
    same &= a1[i].pmc[0] == a1[0].pmc[0] && a2[i].pmc[0] == a2[0].pmc[0] &&
            a1[i].pmc[1] == a1[0].pmc[1] && a2[i].pmc[1] == a2[0].pmc[1];
  }
  check("perfctr.amode_repeatable", same,
        "INST_RETIRED %llu,%llu,%llu for %llu iterations; CPU_CYCLES %llu,%llu,%llu",
        (unsigned long long)a2[0].pmc[0], (unsigned long long)a2[1].pmc[0],
        (unsigned long long)a2[2].pmc[0], (unsigned long long)n2, (unsigned long long)a2[0].pmc[1],
        (unsigned long long)a2[1].pmc[1], (unsigned long long)a2[2].pmc[1]);
  check("perfctr.amode_instructions_exact", a2[0].pmc[0] - a1[0].pmc[0] == 2 * (n2 - n1),
        "evntsel 0x08|USR: %llu for %llu iterations, %llu for %llu: difference %llu, want %llu",
        (unsigned long long)a2[0].pmc[0], (unsigned long long)n2, (unsigned long long)a1[0].pmc[0],
        (unsigned long long)n1, (unsigned long long)(a2[0].pmc[0] - a1[0].pmc[0]),
        (unsigned long long)(2 * (n2 - n1)));
  check("perfctr.amode_cycles_exact", a2[0].pmc[1] - a1[0].pmc[1] == 2 * (n2 - n1),
        "evntsel 0x11|USR (one cycle an instruction under icount): difference %llu, want %llu",
        (unsigned long long)(a2[0].pmc[1] - a1[0].pmc[1]), (unsigned long long)(2 * (n2 - n1)));
  {
    /* The TSC is the thread's CPU time (a nanosecond an instruction under icount) at cpu_khz,
     * which also runs in the kernel's interrupts: within 1 % of the loop's instructions. */
    double want = 2.0 * (double)(n2 - n1) * info.cpu_khz / 1e6,
           got = (double)a2[0].tsc - (double)a1[0].tsc;
    check("perfctr.amode_tsc", a1[0].tsc > 0 && got > 0.99 * want && got < 1.01 * want,
          "virtual TSC %llu for %llu iterations, %llu for %llu: difference %.0f, want %.0f "
          "within 1 %% (the thread's CPU time at %u kHz)",
          (unsigned long long)a2[0].tsc, (unsigned long long)n2, (unsigned long long)a1[0].tsc,
          (unsigned long long)n1, got, want, info.cpu_khz);
  }

  /* 2. The i-mode counter. */
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_overflow;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, NULL);
  {
    struct irun r1, r2, r3;
    /* The first overflow of the process does its one-time set-up: not part of the counts. */
    imode(n1);
    r1 = imode(n2);
    r2 = imode(n2);
    r3 = imode(2 * n2);
    check("perfctr.imode_signals", r1.signals >= (int)(2 * n2 / PERIOD) &&
                                       r1.signals == (int)(r1.sum.pmc[1] / PERIOD) &&
                                       r3.signals == (int)(r3.sum.pmc[1] / PERIOD),
          "%d and %d signals for sums of %llu and %llu CPU_CYCLES, ireset -%d: one per overflow",
          r1.signals, r3.signals, (unsigned long long)r1.sum.pmc[1],
          (unsigned long long)r3.sum.pmc[1], PERIOD);
    check("perfctr.imode_siginfo", bad_code == 0 && bad_mask == 0 && resume_failed == 0 &&
                                       read_failed == 0,
          "si_code not SI_PMC_OVF %d, mask not 0x2 %d, vperfctr_iresume failed %d, read failed %d",
          (int)bad_code, (int)bad_mask, (int)resume_failed, (int)read_failed);
    check("perfctr.imode_exact", r1.frozen_exact && r3.frozen_exact,
          "the handler's frozen sums are k * %d: first %llu, %llu, last %llu", PERIOD, frozen[0],
          frozen[1], frozen[(r3.signals < MAXSIG ? r3.signals : MAXSIG) - 1]);
    check("perfctr.imode_repeatable", r1.signals == r2.signals && r1.sum.pmc[0] == r2.sum.pmc[0] &&
                                          r1.sum.pmc[1] == r2.sum.pmc[1],
          "two runs: %d and %d signals, INST_RETIRED %llu and %llu, CPU_CYCLES %llu and %llu",
          r1.signals, r2.signals, (unsigned long long)r1.sum.pmc[0],
          (unsigned long long)r2.sum.pmc[0], (unsigned long long)r1.sum.pmc[1],
          (unsigned long long)r2.sum.pmc[1]);
    check("perfctr.imode_amode_froze_with_it", r3.moved_together,
          "INST_RETIRED between the first overflows: %llu, %llu (CPU_CYCLES: %d)",
          frozen_insns[1] - frozen_insns[0], frozen_insns[2] - frozen_insns[1], PERIOD);
  }
  errno = 0;
  check("perfctr.iresume_without_overflow", vperfctr_iresume(vp) == -1 && errno == EPERM,
        "vperfctr_iresume on stopped counters: errno %d (EPERM %d)", errno, EPERM);
  {
    /* Control data arm64 has no meaning for: the x86 count mask. */
    struct vperfctr_control c;
    memset(&c, 0, sizeof c);
    c.cpu_control.nractrs = 1;
    c.cpu_control.evntsel[0] = INST_RETIRED | USR | 0x01000000u;
    errno = 0;
    check("perfctr.x86_fields_refused", vperfctr_control(vp, &c) == -1 && errno == EINVAL,
          "evntsel 0x1010008: errno %d (EINVAL %d)", errno, EINVAL);
  }
  vperfctr_unlink(vp);
  vperfctr_close(vp);
  return guest_exit();
}
