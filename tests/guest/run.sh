# The guest side of .ci/arm64: run by the guest's init (busybox sh) in /guest. The boot's mode
# (icount: exact instruction counts; plain: overflow interrupts on time) comes on the kernel
# command line; each test runs in the mode it needs and prints GUEST ok/FAIL lines (guest.h).
# A test that exits non-zero without saying why, or says nothing, is reported as failed here.
mode=$(sed -n 's/.*perfcompat\.mode=\([a-z]*\).*/\1/p' /proc/cmdline)
only=$(cat /guest/only 2>/dev/null)
echo "GUEST START $mode"

# The benchmark boot (.ci/arm64 --bench): only benches/guest/ibench.c runs.
if [ -x /guest/ibench ]; then
  # PAPI refuses to count at Debian's default (3: no perf_event_open for unprivileged users).
  echo 1 >/proc/sys/kernel/perf_event_paranoid
  echo "guest: PMU events: $(ls /sys/bus/event_source/devices/armv8_pmuv3/events | tr '\n' ' ')"
  export PERFCOMPAT_EVENTS=/guest/ibench.map
  if [ -n "$(cat /guest/iprof)" ]; then
    ./ibench profile $(cat /guest/iprof)
    echo "GUEST END $mode"
    exit 0
  fi
  # The boot's first process to open the library waits about 5 ms of the guest's clock in
  # the kernel (once per boot, whichever program it is): a throwaway run takes it.
  ./ibench first raw >/dev/null 2>&1
  ./ibench first ours >/dev/null 2>&1
  for who in ours perfex raw papi; do
    ./ibench first $who 2>&1 | sed '/^IBENCH/!s/^/guest: /'
  done
  ./ibench 2>&1 | sed '/^IBENCH/!s/^/guest: /'
  for who in ours raw papi; do
    ./ibench overflow $who 2>&1 | sed '/^IBENCH/!s/^/guest: /'
    ./ibench overflow $who syscalls 2>&1 | sed '/^IBENCH/!s/^/guest: /'
  done
  # The fixed cost of counting a command: benches/c/workload.c bare, under the raw counting
  # command (benches/c/wrap.c, the floor), perfex, cputrack and the preloaded library.
  w="./workload 5"
  export BENCH_HW=1
  ./ibench fixed bare $w
  ./ibench fixed raw ./wrap $w
  ./ibench fixed perfex perfex -e 0 -e 16 $w
  ./ibench fixed cputrack cputrack -c cycles,instructions $w
  # The environment is set by ibench in the forked child, not through env(1), whose own exec
  # (busybox's start, about 0.6 M instructions) would count as the library's.
  ./ibench fixed preload LD_PRELOAD=/usr/lib/libperfcompat-preload.so.1 PERFCOMPAT_PRELOAD_EVENTS=0,16 $w
  # The library loaded and not counting: the preload's floor (the loader's work on it).
  ./ibench fixed load LD_PRELOAD=/usr/lib/libperfcompat-preload.so.1 $w
  # The library alone (a program linked with -lcpc loads it), and the loading rows' floors:
  # one and two empty libraries preloaded.
  ./ibench fixed lib LD_PRELOAD=/usr/lib/libperfcompat.so.1 $w
  ./ibench fixed empty1 LD_PRELOAD=/guest/empty1.so $w
  ./ibench fixed empty2 "LD_PRELOAD=/guest/empty1.so /guest/empty2.so" $w
  # The commands' own start and exit, a floor of their fixed cost: perfex's usage (-h), and
  # cputrack's usage error (its -h lists the events, which probes the PMU), over true's run.
  ./ibench fixed true true
  ./ibench fixed start-perfex perfex -h
  ./ibench fixed start-cputrack cputrack
  echo "GUEST END $mode"
  exit 0
fi

# Whether test $1 runs in this boot: its mode $2 is this boot's, and its name starts with one
# of the names given to .ci/arm64 --only (if any).
wanted() {
  [ "$2" = "$mode" ] || return 1
  [ -z "$only" ] && return 0
  for o in $only; do
    case $1 in "$o"*) return 0 ;; esac
  done
  return 1
}

t() { # name mode command...
  name=$1
  wanted "$1" "$2" || return 0
  shift 2
  "$@" >/tmp/out 2>&1
  rc=$?
  grep '^GUEST ' /tmp/out
  if ! grep -q '^GUEST ' /tmp/out; then
    echo "GUEST FAIL $name: reported nothing (exit status $rc)"
    sed 's/^/guest: /' /tmp/out | tail -20
  elif [ $rc != 0 ] && ! grep -q '^GUEST FAIL ' /tmp/out; then
    echo "GUEST FAIL $name: exit status $rc"
    sed 's/^/guest: /' /tmp/out | tail -20
  elif [ $rc != 0 ]; then
    grep -v '^GUEST ' /tmp/out | sed 's/^/guest: /' | tail -20
  fi
}

# A program that checks itself and says so only by its exit status (the C examples): ok when it
# exits 0, with its last line.
x() { # name mode command...
  name=$1
  wanted "$1" "$2" || return 0
  shift 2
  "$@" >/tmp/out 2>&1
  rc=$?
  last=$(grep -v '^$' /tmp/out | tail -1)
  if [ $rc = 0 ]; then
    echo "GUEST ok $name: exit status 0; $last"
  else
    echo "GUEST FAIL $name: exit status $rc"
    sed 's/^/guest: /' /tmp/out | tail -20
  fi
}

t facts icount ./facts
t count icount ./count
t commands icount ./commands
t capacity icount ./capacity
t multiplex icount ./multiplex
t userread icount ./userread
t overflow icount ./overflow exact
t overflow plain ./overflow plain
t overflow icount ./overflow exact lone
t overflow plain ./overflow plain lone
t perfctr icount ./perfctr
t loader icount ./loader
t firstuse icount env PERFCOMPAT_EVENTS=/guest/instructions.map ./firstuse
t kept icount ./kept
x perfctr.self icount ./perfctr_self
x examples.cpc_example1 icount env EVENT0=instructions EVENT1=cycles ./examples/cpc_example1
x examples.cpc_example2 icount ./examples/cpc_example2
x examples.cpc_events icount ./examples/cpc_events
x examples.perfex_usage icount env PERFCOMPAT_EVENTS=/guest/instructions.map ./examples/perfex_usage

echo "GUEST END $mode"
