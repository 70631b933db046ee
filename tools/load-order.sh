#!/usr/bin/env bash
# Regenerate capi/link/first-use-order.txt (issue 48): the functions of libperfcompat.so.1 that a
# first use of the counters runs, which tools/install.sh links together after the load-time
# functions (capi/link/load-order.txt).
#
#   bash tools/load-order.sh [GUEST_FUNCTIONS]
#
# Installs the library into a scratch prefix, builds a program that opens a libcpc handle, binds
# two software events, samples three times and unbinds, then starts and reads libperfex's
# counters, and runs it under valgrind's callgrind: every function of the library it executed is
# listed. GUEST_FUNCTIONS, a file of symbol names one a line in the order they first ran, adds
# the arm64 guest's own (the hardware-event paths the host cannot run) and comes first in the
# list, in its order: the functions a QEMU `-d in_asm` log of the guest
# running `ibench first ours`, `ibench first perfex` and `ibench overflow ours` shows executed in
# the library (issue 48's
# notes keep the harness that wrote it). Names are written without their hashes (the legacy
# hash, `.llvm.N` suffixes, v0 crate disambiguators), which differ between builds and targets;
# the load-time functions are left out (load-order.txt places them).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
guest=${1:-}
command -v valgrind >/dev/null || { echo "load-order.sh: needs valgrind" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$repo/tools/install.sh" --prefix "$work/p" >/dev/null
cat >"$work/fu.c" <<'C'
#include <libcpc.h>
#include <libperfex.h>
int main(void) {
    cpc_t *c = cpc_open(CPC_VER_CURRENT);
    if (!c) return 1;
    cpc_set_t *s = cpc_set_create(c);
    if (cpc_set_add_request(c, s, "task-clock", 0, CPC_COUNT_USER, 0, NULL) < 0 ||
        cpc_set_add_request(c, s, "page-faults", 0, CPC_COUNT_USER, 0, NULL) < 0) return 2;
    cpc_buf_t *b = cpc_buf_create(c, s);
    if (cpc_bind_curlwp(c, s, 0) != 0) return 3;
    uint64_t v;
    for (int i = 0; i < 3; i++) { cpc_set_sample(c, s, b); cpc_buf_get(c, b, 0, &v); }
    cpc_unbind(c, s);
    cpc_buf_destroy(c, b);
    cpc_set_destroy(c, s);
    cpc_close(c);
    long long c0, c1;
    if (start_counters(0, 16) < 0 || read_counters(0, &c0, 16, &c1) < 0) return 4;
    return 0;
}
C
cc -O1 -I"$work/p/include" -o "$work/fu" "$work/fu.c" -L"$work/p/lib" -Wl,-rpath,"$work/p/lib" -lcpc
printf '0 = task-clock\n16 = page-faults\n' >"$work/map"
PERFCOMPAT_EVENTS=$work/map valgrind -q --tool=callgrind --demangle=no \
  --callgrind-out-file="$work/cg.out" "$work/fu"
norm() { sed -E "s/'[0-9]+\$//; s/\.llvm\.[0-9]+\$//; s/17h[0-9a-f]+E\$//; s/Cs[0-9A-Za-z]+_/C_/g"; }
# Not the archive's: the C runtime's start files, libc_nonshared.a's pthread_atfork. LLVM's
# outlined fragments stay (OUTLINED_FUNCTION_<n>: one set of names per object, all renamed
# together; a few dozen bytes each).
keep() { grep -v -E '^(0x|\?\?\?|_init$|_fini$|frame_dummy$|register_tm_clones$|deregister_tm_clones$|__do_global_dtors_aux$|call_weak_fn$|pthread_atfork$)' || true; }
# The guest's functions first, in the order the guest first ran them (its first use of libcpc,
# then libperfex's, then the overflow's: install.sh links them in the list's order, so that a
# first use of libcpc runs through the fewest 64 KiB windows); then the host's others, sorted.
# The guest's names keep their legacy hash (17h...E): install.sh then places only the
# instantiations of a generic function that the guest ran (the others of a function such as
# `ffi_boundary` or an iterator's `fold` are tens of kilobytes), and every instantiation where
# the hash names nothing (the host's build, another compiler).
exact() { sed -E "s/'[0-9]+\$//; s/\.llvm\.[0-9]+\$//; s/Cs[0-9A-Za-z]+_/C_/g"; }
{ [ -z "$guest" ] || cat "$guest"; } | keep | exact | awk '!seen[$0]++' >"$work/names"
callgrind_annotate --threshold=100 "$work/cg.out" 2>/dev/null | grep 'libperfcompat\.so' |
  sed -E 's/^ *[0-9,]+ +\([ 0-9.]+%\) +//; s/ \[.*//; s/^.*://' | keep | norm | sort -u |
  grep -v -x -F -f "$work/names" >>"$work/names" || true
# The load-time functions (their Rust paths, as mangled components) are load-order.txt's.
load=$(awk '!/^[ \t]*(#|$)/ { n = split($0, p, "::"); e = ""; for (i = 1; i <= n; i++) e = e length(p[i]) p[i]; print e }' \
  "$repo/capi/link/load-order.txt")
for e in $load; do grep -v -F "$e" "$work/names" >"$work/n2" || true; mv "$work/n2" "$work/names"; done
out=$repo/capi/link/first-use-order.txt
{ sed -n '/^#/p' "$out"; cat "$work/names"; } >"$work/new"
mv "$work/new" "$out"
echo "load-order.sh: $(grep -vc '^#' "$out") functions in $out" >&2
