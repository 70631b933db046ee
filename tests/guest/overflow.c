/* Hardware overflow through libcpc on `cycles`, as in cpc_bind_curlwp(3CPC) Example 2: the
 * request is preset PERIOD cycles before the 64-bit wrap with CPC_OVF_NOTIFY_EMT; the SIGEMT
 * handler samples the set (frozen since the overflow), sets the preset again and restarts.
 * A second, plain `cycles` request in the same set (preset 0, so every restart starts it from
 * 0 again) counts each period's cycles independently: one SIGEMT per overflow, none lost (a
 * period of two wraps) or doubled (a period short of the wrap); each frozen value at or just past the wrap (the PMU's skid, stated); the restart
 * counting again from the preset.
 *
 * `overflow exact` runs under icount, where QEMU raises the cycle counter's (PMCCNTR's)
 * overflow interrupt at the wrap to the instruction: every check is exact. `overflow plain`
 * runs without icount, where the cycle counter follows QEMU's virtual clock and the interrupt
 * comes when QEMU's timer fires: the skid is measured and reported, and a host that stalls the
 * guest for milliseconds makes an interrupt late by as much (one SIGEMT for a counter that
 * went on past the wrap): there the checks are that SIGEMTs come, that no set is frozen
 * before its wrap, and that the restart counts from the preset.
 *
 * `overflow exact lone` (and `plain lone`) binds the notifying request alone: a lone leader
 * counting user mode, which the kernel stops at its overflow (the storm guard's limit of one)
 * before the thread is back in user mode, so the library freezes it at the record with no stop
 * and no read, and restarts it without re-arming when the record was at the wrap (the
 * kernel's period is then whole). Without the plain request the checks are the frozen values
 * (exactly at the wrap under icount), the count after each restart, and the number of SIGEMTs:
 * one per period of the loop's cycles (and of the handlers' few). */
#include <errno.h>
#include <libcpc.h>
#include <signal.h>

#include "guest.h"

#define PERIOD 2000000ull /* cycles from the preset to the wrap */
#define PRESET (UINT64_MAX - PERIOD + 1)
#define MAXREC 256

static cpc_t *cpc;
static cpc_set_t *set;
static cpc_buf_t *buf, *again;
static volatile sig_atomic_t noverflows, nunexpected, nfailed;
static uint64_t past[MAXREC];     /* the frozen value: cycles past the wrap (the skid) */
static uint64_t resumed[MAXREC];  /* a sample right after the restart, minus the preset */
static uint64_t period[MAXREC];   /* the plain request's count of the period (frozen with it) */

static void emt(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  if (sig != SIGEMT || si->si_code != EMT_CPCOVF) {
    nunexpected++;
    return;
  }
  uint64_t v = 0, w = 0, t = 0;
  int k = noverflows;
  if (cpc_set_sample(cpc, set, buf) != 0)
    nfailed++;
  cpc_buf_get(cpc, buf, 0, &v);
  cpc_buf_get(cpc, buf, 1, &t);
  if (cpc_request_preset(cpc, 0, PRESET) != 0 || cpc_set_restart(cpc, set) != 0)
    nfailed++;
  if (cpc_set_sample(cpc, set, again) != 0)
    nfailed++;
  cpc_buf_get(cpc, again, 0, &w);
  if (k < MAXREC) {
    past[k] = v;
    period[k] = t;
    resumed[k] = w - PRESET;
  }
  noverflows = k + 1;
}

int main(int argc, char **argv) {
  int exact = argc < 2 || strcmp(argv[1], "plain") != 0;
  int lone = argc > 2 && strcmp(argv[2], "lone") == 0;
  const char *mode = exact ? (lone ? "exact.lone" : "exact") : (lone ? "plain.lone" : "plain");
  char name[64];
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = emt;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGEMT, &sa, NULL);
  cpc = cpc_open(CPC_VER_CURRENT);
  if (cpc == NULL) {
    perror("cpc_open");
    return 1;
  }
  set = cpc_set_create(cpc);
  if (cpc_set_add_request(cpc, set, "cycles", PRESET, CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0,
                          NULL) != 0 ||
      (!lone && cpc_set_add_request(cpc, set, "cycles", 0, CPC_COUNT_USER, 0, NULL) != 1)) {
    perror("cpc_set_add_request");
    return 1;
  }
  buf = cpc_buf_create(cpc, set);
  again = cpc_buf_create(cpc, set);
  cpc_buf_t *end = cpc_buf_create(cpc, set);
  if (cpc_bind_curlwp(cpc, set, 0) != 0) {
    perror("cpc_bind_curlwp");
    return 1;
  }
  /* About 30 periods of work. */
  for (int i = 0; i < 60; i++)
    known_loop(PERIOD / 4);
  uint64_t rest = 0, rest1 = 0;
  cpc_set_sample(cpc, set, end);
  cpc_buf_get(cpc, end, 0, &rest);
  if (!lone)
    cpc_buf_get(cpc, end, 1, &rest1);
  cpc_unbind(cpc, set);
  rest -= PRESET; /* cycles since the last restart */

  int n = noverflows;
  uint64_t skid_max = 0, skid_sum = 0, resume_max = 0, off_max = 0;
  int before_wrap = 0, wrong_period = 0, late = 0, slow_resume = 0;
  /* Without the restart the counter would go on from past the wrap: PERIOD + more. */
  uint64_t bound = exact ? 2000 : PERIOD;
  for (int k = 0; k < n && k < MAXREC; k++) {
    if (past[k] >= 1ull << 63)
      before_wrap++; /* frozen before reaching the wrap: not an overflow */
    else if (past[k] >= PERIOD)
      late++; /* a whole period or more past the wrap */
    skid_sum += past[k];
    if (past[k] > skid_max)
      skid_max = past[k];
    /* The first handler runs code QEMU translates for the first time, which moves its clock. */
    if (k > 0 && resumed[k] > resume_max)
      resume_max = resumed[k];
    if (k > 0 && resumed[k] >= bound)
      slow_resume++;
    /* The plain request counted the same period: PERIOD + the skid (two counters, enabled a
     * few instructions apart). Two wraps in one period would be a lost overflow. */
    uint64_t want = PERIOD + past[k], off = period[k] > want ? period[k] - want : want - period[k];
    if (lone)
      continue; /* no plain request */
    if (off > off_max)
      off_max = off;
    if (off > 1000)
      wrong_period++;
  }
  if (lone) {
    /* The loop's cycles in whole periods, and the handlers' (a few thousand user cycles
     * each) add at most one more; under icount every period ends at its wrap exactly. */
    uint64_t loop = 60 * (PERIOD / 4) * 2; /* known_loop: 2 instructions an iteration */
    int want = (int)(loop / PERIOD);
    if (exact && (n < want || n > want + 1 || rest >= PERIOD))
      wrong_period = 1;
    printf("lone: %d SIGEMTs for %d periods of the loop\n", n, want);
  }
  snprintf(name, sizeof name, "overflow.%s.one_sigemt_per_overflow", mode);
  check(name,
        n >= 10 && (!exact || (wrong_period == 0 && rest < PERIOD && late == 0)) &&
            nunexpected == 0 && nfailed == 0,
        "%d SIGEMTs, each after one period of %llu cycles + its skid (the plain request "
        "agrees within %llu cycles; %d periods off, %d late by a period or more); %llu cycles "
        "after the last restart, "
        "%llu by the plain request; %d other signals, %d failed calls in the handler",
        n, PERIOD, (unsigned long long)off_max, wrong_period, late, (unsigned long long)rest,
        (unsigned long long)rest1, (int)nunexpected, (int)nfailed);
  /* Skid: QEMU raises the interrupt at the wrap, the kernel takes it a little later. */
  snprintf(name, sizeof name, "overflow.%s.frozen_at_the_wrap", mode);
  check(name, n > 0 && before_wrap == 0 && (!exact || skid_max == 0),
        "frozen values: %d before the wrap; skid (cycles past it) mean %llu, max %llu%s",
        before_wrap, (unsigned long long)(n ? skid_sum / n : 0), (unsigned long long)skid_max,
        exact ? " (want 0: the freeze comes from the kernel's overflow record)" : "");
  snprintf(name, sizeof name, "overflow.%s.restart_from_preset", mode);
  /* Without icount the cycle counter follows the host's clock while the guest runs, so a host
   * that deschedules QEMU for a few milliseconds between a restart and its sample moves that
   * sample past the bound (seen with the host's two CPUs busy: 2 of 28 late, and 5 of 32 with
   * several guests and builds beside it): there fewer than half of the samples may be late. A
   * restart that did not happen leaves every sample past it. */
  check(name, n > 1 && (exact ? resume_max < bound : slow_resume * 2 < n - 1),
        "a sample right after cpc_set_restart: at most %llu cycles past the preset, %d of %d "
        "at or past the bound (%llu; the first overflow's handler not counted)",
        (unsigned long long)resume_max, slow_resume, n - 1, (unsigned long long)bound);
  cpc_close(cpc);
  return guest_exit();
}
