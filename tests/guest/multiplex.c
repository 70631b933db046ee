/* perfex -a over more events than the PMU has counters: each event in its own group, so the
 * kernel time-multiplexes them; the report flags and scales them (and says so). */
#include "guest.h"

int main(void) {
  char out[65536];
  size_t n = 0;
  /* Ten R10000 numbers on the PMU's two events; the others have nothing here. */
  FILE *m = fopen("/tmp/ten.map", "w");
  fprintf(m, "0 = cycles\n");
  for (int e = 1; e <= 9; e++)
    fprintf(m, "%d = instructions\n", e);
  fclose(m);
  FILE *p = popen("PERFCOMPAT_EVENTS=/tmp/ten.map perfex -a --json /guest/loop 50000000 2>&1", "r");
  while (p != NULL && n + 1 < sizeof out) {
    size_t r = fread(out + n, 1, sizeof out - 1 - n, p);
    if (r == 0)
      break;
    n += r;
  }
  out[n] = 0;
  if (p != NULL)
    pclose(p);
  int counted = 0, scaled = 0, close = 0, ran = 0;
  /* Each event object: "event":N,...,"count":C,...,"scaled":B,... */
  for (const char *e = strstr(out, "{\"event\":"); e != NULL; e = strstr(e + 1, "{\"event\":")) {
    const char *lin = strstr(e, "\"linux_event\":\"");
    const char *c = strstr(e, "\"count\":");
    const char *s = strstr(e, "\"scaled\":");
    if (lin == NULL || c == NULL || s == NULL)
      break;
    counted++;
    if (strncmp(s + 9, "true", 4) == 0)
      scaled++;
    const char *run = strstr(e, "\"running_ns\":");
    if (run != NULL && atoll(run + 13) > 0)
      ran++;
    long long v = atoll(c + 8);
    /* The loop is 100,000,000 instructions and cycles: a scaled estimate within 25 %. */
    if (v > 75000000 && v < 125000000)
      close++;
  }
  int flagged = strstr(out, "\"multiplexed\":true") != NULL;
  int ok = counted >= 10 && ran == counted && scaled > 0 && close == counted && flagged;
  check("multiplex.perfex_a", ok,
        "%d events counted (more than the 7 counters), %d ran part of the time, %d scaled, %d "
        "within 25 %% of the loop's 100,000,000, multiplexed flag %d",
        counted, ran, scaled, close, flagged);
  if (!ok)
    printf("%s\n", out);
  return guest_exit();
}
