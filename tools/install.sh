#!/usr/bin/env bash
# Build perfcompat (Cargo.toml's `shipped` profile: release, one code generation unit for each
# of our crates) and install it as a system library.
#
#   bash tools/install.sh [--prefix PREFIX] [--destdir DIR] [--libdir DIR] [--target TRIPLE]
#
# PREFIX defaults to /usr/local; DIR (also $DESTDIR) stages the files under DIR/PREFIX for
# packaging, the installed files still refer to PREFIX; --libdir defaults to PREFIX/lib. No root
# is needed for a prefix you can write to (e.g. --prefix "$HOME/.local"). --target cross-builds
# for another Rust target (aarch64-unknown-linux-gnu: CC defaults to aarch64-linux-gnu-gcc, as
# Debian's gcc-aarch64-linux-gnu names it); a cross install skips perfex.mod and the MPI layer,
# which need the target's gfortran and MPI.
#
# The layout (see man/libperfex.3, FILES):
#   lib/libperfcompat.so.1.0.0          the one library: libperfex, libcpc, libpctx, perfcompat_*
#   lib/libperfcompat.so.1              -> libperfcompat.so.1.0.0 (its soname)
#   lib/libperfex.so.1, lib/libcpc.so.1, lib/libpctx.so.1, lib/libperfctr.so.1
#                                       -> libperfcompat.so.1.0.0 (the names legacy binaries need)
#   lib/libperfcompat.so, libperfex.so, libcpc.so, libpctx.so, libperfctr.so
#                                       development links (-lperfex, -lcpc, -lpctx, -lperfctr)
#   lib/libperfex.a, libcpc.a, libpctx.a, libperfctr.a  static archives (Libs.private in the .pc files)
#   lib/libpfcntr.so.1.0.0              Tru64's /dev/pfcntr (pfm(7)): the open/ioctl/read/close
#                                       interposers (capi/pfcntr/pfcntr.c), over libperfcompat.so.1
#   lib/libpfcntr.so.1, libpfcntr.so    -> libpfcntr.so.1.0.0 (soname; -lpfcntr)
#   lib/libperfcompat-preload.so.1.0.0  what LD_PRELOAD names with PERFCOMPAT_PRELOAD_EVENTS: the
#                                       _exit/_Exit/exec functions (capi/preload/preload.c), over
#                                       libperfcompat.so.1, so that the report comes however the
#                                       program ends
#   lib/libperfcompat-preload.so.1      -> libperfcompat-preload.so.1.0.0 (soname)
#   lib/pkgconfig/libperfex.pc, libcpc.pc, libpctx.pc, libpfcntr.pc, libperfctr.pc
#   lib/libperfcompat-mpi.so            the PMPI layer (when an mpicc exists; docs/mpi.md)
#   lib/pkgconfig/perfcompat-mpi.pc     its pkg-config file (same condition)
#   include/libperfex.h libcpc.h libpctx.h perfcompat.h perfcompat_mpi.h,
#   include/perfcompat/solaris.h (optional Solaris compatibility: _lwp_self, gethrtime, PC/SP),
#   include/sys/pfcntr.h (Tru64's /dev/pfcntr, pfm(7): served by libpfcntr's open/ioctl/read),
#   include/libperfctr.h, include/linux/perfctr.h, include/asm/perfctr.h (perfctr, libperfctr(3)),
#   include/perfex.mod (when gfortran exists)
#   share/perfcompat/fortran/perfex.f90 the module's source, for other gfortran versions
#   bin/perfex, bin/cpustat, bin/cputrack, share/man/man1/{perfex,cpustat,cputrack}.1, share/man/man3/{libperfex,libcpc,libpctx,libperfctr}.3 and function links,
#   share/man/man3/pfcntr.h.3 (<sys/pfcntr.h>), share/man/man7/pfm.7, share/man/man7/perfcompat.7 (the overview)
#
# The shared library is linked here from the release staticlib with a version script generated
# from capi/abi.manifest: rustc gives every cdylib its own anonymous version script, which
# overrides (rust-lld) or conflicts with (GNU ld) any other, so a cdylib cannot carry versions.
# Its load-time work is kept small (issue 48): the functions in capi/link/load-order.txt, then
# those in capi/link/first-use-order.txt, first in the text, and on arm64 capi/link/lse_atomics.c
# linked before the archive (both said below).
# libpfcntr and libperfcompat-preload are C, linked here against that library with the
# anonymous version scripts capi/pfcntr/pfcntr.map and capi/preload/preload.map (their
# definitions carry no version) and the run path $ORIGIN (each finds libperfcompat.so.1 next to
# itself, preloaded too); a --target install links them with the cross compiler.
# Environment: CC (default cc), CARGO (default cargo), CARGO_TARGET_DIR, MPICC (default mpicc).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
prefix=/usr/local
destdir=${DESTDIR:-}
libdir=
triple=
while (($#)); do
  case $1 in
    --prefix) prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --destdir) destdir=$2; shift 2 ;;
    --destdir=*) destdir=${1#*=}; shift ;;
    --libdir) libdir=$2; shift 2 ;;
    --libdir=*) libdir=${1#*=}; shift ;;
    --target) triple=$2; shift 2 ;;
    --target=*) triple=${1#*=}; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case $prefix in /*) ;; *) echo "install.sh: --prefix must be absolute: $prefix" >&2; exit 2 ;; esac
libdir=${libdir:-$prefix/lib}
includedir=$prefix/include
bindir=$prefix/bin
mandir=$prefix/share/man
datadir=$prefix/share/perfcompat
cargo=${CARGO:-cargo}
target=${CARGO_TARGET_DIR:-$repo/target}
case $target in /*) ;; *) target=$repo/$target ;; esac
cargo_target=()
rel=$target/shipped
if [ -n "$triple" ]; then
  # Debian's cross compilers drop the vendor: aarch64-unknown-linux-gnu -> aarch64-linux-gnu-gcc.
  cross=$(printf '%s' "$triple" | sed 's/-unknown-/-/')
  cc=${CC:-$cross-gcc}
  cargo_target=(--target "$triple")
  rel=$target/$triple/shipped
  var=$(printf '%s' "$triple" | tr 'a-z-' 'A-Z_')
  export "CARGO_TARGET_${var}_LINKER=$cc" "CC_${triple//-/_}=$cc" "AR_${triple//-/_}=$cross-ar"
else
  cc=${CC:-cc}
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/capi/Cargo.toml" | head -1)
soname=libperfcompat.so.1
real=libperfcompat.so.1.0.0
# What a program linking the static archive needs besides it (rustc --print native-static-libs).
static_libs="-lgcc_s -lutil -lrt -lpthread -lm -ldl"

echo "install.sh: building (profile shipped)" >&2
(cd "$repo" && "$cargo" build --profile shipped --quiet "${cargo_target[@]}" -p perfcompat-capi --lib &&
  "$cargo" build --profile shipped --quiet "${cargo_target[@]}" -p perfcompat --bin perfex --bin cpustat \
    --bin cputrack)
[ -f "$rel/libperfcompat_capi.a" ] || { echo "install.sh: no $rel/libperfcompat_capi.a" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# capi/abi.manifest -> a version script and the symbols to pull from the archive.
awk '
  /^[ \t]*(#|$)/ { next }
  $1 == "version" { node = $2; if (!(node in n)) { order[nodes++] = node; n[node] = 0; parent[node] = $3 }; next }
  node == "" { print "abi.manifest: a symbol before any version line: " $1 > "/dev/stderr"; exit 1 }
  { sym[node, n[node]++] = $1 }
  END {
    for (i = 0; i < nodes; i++) {
      v = order[i]
      if (v == "local") continue
      printf "%s {\n  global:\n", v
      for (j = 0; j < n[v]; j++) printf "    %s;\n", sym[v, j]
      if (!hidden++) {  # the first node hides everything else
        printf "  local:\n"
        for (j = 0; j < n["local"]; j++) printf "    %s;\n", sym["local", j]
        printf "    *;\n"
      }
      printf "}%s;\n", parent[v] == "" ? "" : " " parent[v]
    }
  }' "$repo/capi/abi.manifest" >"$work/perfcompat.map"
undefs=$(awk '/^[ \t]*(#|$)/ || $1 == "version" { next } { printf " -Wl,--undefined=%s", $1 }' \
  "$repo/capi/abi.manifest")

# arm64: the outline atomics' flag defined here (capi/link/lse_atomics.c says why), so that
# the archive's object with __init_cpu_features, a constructor of trapped CPU ID-register reads
# at every load, is never pulled in.
arch_objs=()
case $("$cc" -dumpmachine) in
  aarch64*)
    "$cc" -std=c99 -O2 -fPIC -ffunction-sections -c -o "$work/lse_atomics.o" \
      "$repo/capi/link/lse_atomics.c"
    arch_objs+=("$work/lse_atomics.o") ;;
esac
# The library's DT_FINI (-fini below): a function that does nothing, among the load-time
# functions, instead of the C runtime's _fini, as empty, after the whole text (capi/link/fini.c
# says why).
"$cc" -std=c99 -O2 -fPIC -c -o "$work/fini.o" "$repo/capi/link/fini.c"

# The load-time functions first in the text, then those of a first use (capi/link/load-order.txt
# and first-use-order.txt say why): their sections .text.<symbol> renamed .text.startup.<symbol>
# and .text.sorted.<rank>.<symbol> (rank: the line in first-use-order.txt) in a copy of the
# archive, which GNU ld's default script places at the start of .text in that order, the second
# sorted by name: the first-use functions in the list's order. A line is a Rust path a::b::c, found by its mangled components
# 1a1b1c (legacy and v0 manglings both spell a path so) followed by the legacy hash (17h...E)
# or the name's end (v0); or a mangled name without its hashes (`_ZN...`, `_R...`: the
# legacy hash, an `.llvm.N` suffix and v0 crate disambiguators dropped, as tools/load-order.sh
# writes them). A load-time name that matches nothing fails the install; a first-use name may
# be missing (inlined, or another architecture's).
objdump=objdump objcopy=objcopy
if [ -n "$triple" ]; then objdump=$cross-objdump objcopy=$cross-objcopy; fi
renames=$("$objdump" -h "$rel/libperfcompat_capi.a" 2>/dev/null | awk \
  -v load="$repo/capi/link/load-order.txt" -v first="$repo/capi/link/first-use-order.txt" '
  function exactn(n) { sub(/\.llvm\.[0-9]+$/, "", n); gsub(/Cs[0-9A-Za-z]+_/, "C_", n); return n }
  function norm(n) { n = exactn(n); sub(/17h[0-9a-f]+E$/, "", n); return n }
  function read(file, group,   line, n, part, i, enc) {
    while ((getline line < file) > 0) {
      if (line ~ /^[ \t]*(#|$)/) continue
      rank[line] = ++ranks; lgroup[line] = group
      if (group == "hot" && line ~ /^__aarch64_/ && !lse) lse = ranks
      # A name with its legacy hash (17h...E): that one instantiation of a generic function.
      if (line ~ /17h[0-9a-f]+E$/) { exact[line] = 1; continue }
      if (line ~ /^_[ZR]/ || index(line, "::") == 0) { stem[line] = 1; continue }
      n = split(line, part, "::"); enc = ""
      for (i = 1; i <= n; i++) enc = enc length(part[i]) part[i]
      path[line] = enc
    }
  }
  # The line of the lists that places section name `name`: the first (lowest rank) of those that
  # name it, or "".
  function line_of(name,   best, e, s, p, at, rest) {
    best = ""; e = exactn(name); s = norm(name)
    if (e in exact) best = e
    if (s in stem && (best == "" || rank[s] < rank[best])) best = s
    if (s in fallback && (best == "" || rank[fallback[s]] < rank[best])) best = fallback[s]
    for (p in path) {
      at = index(name, path[p])
      if (at == 0) continue
      rest = substr(name, at + length(path[p]))
      if ((rest == "" || rest ~ /^17h[0-9a-f]+E(\.llvm\.[0-9]+)?$/) && (best == "" || rank[p] < rank[best])) best = p
    }
    return best
  }
  BEGIN { read(load, "startup"); read(first, "hot") }
  $2 ~ /^\.text\./ && !($2 in seen) { seen[$2] = 1; secs[++nsecs] = substr($2, 7); if (exactn(substr($2, 7)) in exact) hit[exactn(substr($2, 7))] = 1 }
  $2 == ".text" { plain = 1 }
  END {
    # A hashed name that names no function of this build (another architecture'"'"'s, or a
    # compiler whose hashes differ) places every instantiation of its function instead.
    for (l in exact) if (!(l in hit)) { s = norm(l); if (!(s in fallback) || rank[l] < rank[fallback[s]]) fallback[s] = l }
    for (i = 1; i <= nsecs; i++) {
      name = secs[i]; l = line_of(name)
      if (l == "") continue
      found[l] = 1
      # The first-use functions go to .text.sorted.<rank>.<name>: GNU ld sorts those sections
      # by name, so the text keeps first-use-order.txt'"'"'s order.
      if (lgroup[l] == "hot") print ".text." name "=" sprintf(".text.sorted.%05d.%s", rank[l], name)
      else print ".text." name "=.text.startup." name
    }
    # The outline atomics (arm64: compiler-builtins'"'"' __aarch64_cas4_acq and the rest, one
    # function per object, the only code of the archive in a plain .text) where the list first
    # names one.
    if (plain && lse) print ".text=.text.sorted." sprintf("%05d", lse) ".lse_atomics"
    for (l in lgroup) if (lgroup[l] == "startup" && !(l in found)) bad = bad " " l
    if (bad != "") { print "install.sh: capi/link/load-order.txt names no function of the archive:" bad > "/dev/stderr"; exit 1 }
  }')
# The read-only data those first-use functions read go beside them, into the text (issue 48,
# first use): tools/first-use-rodata.awk renames each such section (a string or constant, a
# jump table, the strings a table of pointers names) .text.sorted.<rank>.~<section> at the rank
# of its first reader. GNU ld's default script does not sort .rodata, which spread a first use's
# reads over three 64 KB windows of the 160 KB .rodata (a page fault of ~14k instructions each in
# the arm64 guest). The price: those constants are mapped executable, as the text's bytes are.
# The merged strings go after libcpc's first use: at the rank before libperfex's first
# function (start_counters), see the awk.
printf '%s\n' "$renames" >"$work/renames"
strings_rank=$(sed -n 's/^.*=\.text\.sorted\.\([0-9]*\)\.start_counters$/\1/p' "$work/renames" | head -1)
[ -z "$strings_rank" ] || strings_rank=$(printf '%05d' $((10#$strings_rank - 1)))
renames+=$'\n'$("$objdump" -t -r "$rel/libperfcompat_capi.a" 2>/dev/null |
  awk -v renames="$work/renames" -v strings="$strings_rank" -f "$repo/tools/first-use-rodata.awk")
args=()
while IFS= read -r r; do [ -z "$r" ] || args+=(--rename-section "$r"); done <<<"$renames"
"$objcopy" "${args[@]}" "$rel/libperfcompat_capi.a" "$work/libperfcompat_capi.a"

echo "install.sh: linking $real" >&2
# The unwinder (libgcc_eh) goes into the library (-static-libgcc), hidden by the version script,
# instead of a dependency on libgcc_s.so.1 (issue 48): a C program that loads the library would
# otherwise load a second library it never needs, which the dynamic loader looks for along its
# whole search path (twelve failed opens in the arm64 guest). Loading the library into a
# program (LD_PRELOAD, not counting) cost 850k instructions in the guest with it, 671k without.
# The C library's functions are bound lazily (-z lazy, not -z now; issue 48, loading): on arm64
# the Rust code calls them through the PLT, and binding all 120 at load was a quarter of the
# library's loading cost (loading it: -70k instructions in the guest, 0.42 M -> 0.35 M), while a
# first use binds the two dozen it calls (+18k) and a program that never counts binds none. The
# price: the PLT's GOT (.got.plt) stays writable (partial RELRO; the rest of the GOT and the
# relocated data are still read-only after loading); LD_BIND_NOW=1 binds everything at load.
# On x86-64 rustc calls through the GOT already (bound at load): nothing changes there.
# capi/link/relocated-data.ld puts the relocated writable data on the GOT's page (its comment
# says why); capi/link/crt-text.ld puts the C runtime's load-time code in the text's first
# window; -fini names capi/link/fini.c's function as the DT_FINI the loader calls at exit.
# shellcheck disable=SC2086 # $undefs is a list of words
"$cc" -shared -o "$work/$real" -Wl,-soname,$soname -Wl,--version-script="$work/perfcompat.map" \
  -Wl,--gc-sections -Wl,-z,relro,-z,lazy -Wl,-z,noexecstack $undefs -static-libgcc \
  -Wl,-T,"$repo/capi/link/relocated-data.ld" -Wl,-T,"$repo/capi/link/crt-text.ld" \
  -Wl,-fini=perfcompat_fini \
  "${arch_objs[@]}" "$work/fini.o" "$work/libperfcompat_capi.a" ${static_libs#-lgcc_s }

pfcntr=libpfcntr.so.1.0.0
echo "install.sh: linking $pfcntr" >&2
ln -sfn "$real" "$work/libperfcompat.so"
# shellcheck disable=SC2016 # $ORIGIN is for the dynamic loader
"$cc" -std=c99 -O2 -fPIC -shared -o "$work/$pfcntr" "$repo/capi/pfcntr/pfcntr.c" \
  -Wl,-soname,libpfcntr.so.1 -Wl,--version-script="$repo/capi/pfcntr/pfcntr.map" \
  -Wl,--no-undefined -Wl,-z,relro,-z,now -Wl,-z,noexecstack -Wl,-rpath,'$ORIGIN' \
  -L"$work" -lperfcompat -ldl

preload=libperfcompat-preload.so.1.0.0
echo "install.sh: linking $preload" >&2
# shellcheck disable=SC2016 # $ORIGIN is for the dynamic loader
"$cc" -std=c99 -O2 -fPIC -shared -o "$work/$preload" "$repo/capi/preload/preload.c" \
  -Wl,-soname,libperfcompat-preload.so.1 -Wl,--version-script="$repo/capi/preload/preload.map" \
  -Wl,--no-undefined -Wl,-z,relro,-z,now -Wl,-z,noexecstack -Wl,-rpath,'$ORIGIN' \
  -L"$work" -lperfcompat -ldl

dest() { printf '%s%s' "$destdir" "$1"; }
L=$(dest "$libdir")
mkdir -p "$L/pkgconfig" "$(dest "$includedir")" "$(dest "$bindir")" \
  "$(dest "$mandir")/man1" "$(dest "$mandir")/man3" "$(dest "$mandir")/man7" \
  "$(dest "$datadir")/fortran"

install -m 0755 "$work/$real" "$L/$real"
for link in $soname libperfex.so.1 libcpc.so.1 libpctx.so.1 libperfctr.so.1 libperfcompat.so \
  libperfex.so libcpc.so libpctx.so libperfctr.so; do
  ln -sfn "$real" "$L/$link"
done
install -m 0755 "$work/$pfcntr" "$L/$pfcntr"
for link in libpfcntr.so.1 libpfcntr.so; do
  ln -sfn "$pfcntr" "$L/$link"
done
install -m 0755 "$work/$preload" "$L/$preload"
ln -sfn "$preload" "$L/libperfcompat-preload.so.1"
for a in libperfex.a libcpc.a libpctx.a libperfctr.a; do
  install -m 0644 "$rel/libperfcompat_capi.a" "$L/$a"
done

for h in libperfex.h libcpc.h libpctx.h perfcompat.h perfcompat_mpi.h libperfctr.h; do
  install -m 0644 "$repo/include/$h" "$(dest "$includedir")/$h"
done
mkdir -p "$(dest "$includedir")/perfcompat"
install -m 0644 "$repo/include/perfcompat/solaris.h" "$(dest "$includedir")/perfcompat/solaris.h"
mkdir -p "$(dest "$includedir")/sys"
install -m 0644 "$repo/include/sys/pfcntr.h" "$(dest "$includedir")/sys/pfcntr.h"
# perfctr's headers where its programs include them from (<linux/perfctr.h>, <asm/perfctr.h>):
# a prefix's include directory is searched before /usr/include, file by file.
for h in linux/perfctr.h asm/perfctr.h; do
  mkdir -p "$(dest "$includedir")/${h%/*}"
  install -m 0644 "$repo/include/$h" "$(dest "$includedir")/$h"
done
install -m 0644 "$repo/fortran/perfex.f90" "$(dest "$datadir")/fortran/perfex.f90"
if [ -n "$triple" ]; then
  echo "install.sh: cross install: perfex.mod not built (its source is in $datadir/fortran)" >&2
elif command -v gfortran >/dev/null 2>&1; then
  # The module holds interfaces only: checking the syntax writes perfex.mod.
  gfortran -fsyntax-only -J"$(dest "$includedir")" "$repo/fortran/perfex.f90"
else
  echo "install.sh: gfortran not found: perfex.mod not built (its source is in $datadir/fortran)" >&2
fi

pc() { # name description libraries [private libraries]
  cat >"$L/pkgconfig/$1.pc" <<EOF
prefix=$prefix
libdir=$libdir
includedir=$includedir

Name: $1
Description: $2 (perfcompat: Linux perf_event_open)
Version: $version
Libs: -L\${libdir} $3
${4:+Libs.private: $4
}Cflags: -I\${includedir}
EOF
}
pc libperfex "IRIX libperfex hardware counter interface" -lperfex "$static_libs"
pc libcpc "Solaris libcpc v2 hardware counter interface" -lcpc "$static_libs"
pc libpctx "Solaris libpctx process contexts (pctx_capture(3CPC))" -lpctx "$static_libs"
pc libperfctr "perfctr virtual per-thread counters (vperfctr_*)" -lperfctr "$static_libs"
# -lperfcompat too: the perfcompat_* extensions (perfcompat_sim_advance) are libperfcompat's, which
# libpfcntr needs anyway. No static archive: a static program's calls cannot be interposed.
pc libpfcntr "Tru64 UNIX pfm(7) /dev/pfcntr pseudo-device" "-lpfcntr -lperfcompat"

install -m 0755 "$rel/perfex" "$(dest "$bindir")/perfex"
install -m 0755 "$rel/cpustat" "$(dest "$bindir")/cpustat"
install -m 0755 "$rel/cputrack" "$(dest "$bindir")/cputrack"

# The PMPI layer, built with the MPI's own compiler wrapper (MPICC, default mpicc): it is tied
# to that MPI's mpi.h. Without one, it is skipped and said so.
mpicc=${MPICC:-mpicc}
if [ -n "$triple" ]; then
  echo "install.sh: cross install: libperfcompat-mpi.so (the MPI layer) not built" >&2
elif command -v "$mpicc" >/dev/null 2>&1; then
  "$mpicc" -std=c99 -O2 -shared -fPIC -I"$repo/include" -o "$L/libperfcompat-mpi.so" \
    "$repo/mpi/perfcompat_mpi.c" -L"$L" -Wl,-rpath,"$libdir" -lperfcompat
  # `mpicc app.c $(pkg-config --cflags --libs perfcompat-mpi)`: the layer before libperfex, which
  # a program counting for itself also calls (issue 46 item 10: -lperfcompat-mpi alone was not
  # found without a -L).
  pc perfcompat-mpi "PMPI layer: one counter report per MPI job" "-lperfcompat-mpi -lperfex"
else
  echo "install.sh: $mpicc not found: libperfcompat-mpi.so (the MPI layer) not built" >&2
fi

M=$(dest "$mandir")
install -m 0644 "$repo/man/perfex.1" "$M/man1/perfex.1"
install -m 0644 "$repo/man/cpustat.1" "$M/man1/cpustat.1"
install -m 0644 "$repo/man/cputrack.1" "$M/man1/cputrack.1"
for page in libperfex.3 libcpc.3 libpctx.3 libperfctr.3 pfcntr.h.3; do
  install -m 0644 "$repo/man/$page" "$M/man3/$page"
done
for page in pfm.7 perfcompat.7; do
  install -m 0644 "$repo/man/$page" "$M/man7/$page"
done
# One page per library; each function name is a link to its library's page.
for f in start_counters read_counters print_counters print_costs load_costs; do
  printf '.so man3/libperfex.3\n' >"$M/man3/$f.3"
done
for f in $(awk '/^[ \t]*(#|$)/ { next } $1 == "version" { v = $2; next }
    v ~ /^SUNW/ { print $1 }' "$repo/capi/abi.manifest"); do
  case $f in pctx_*) page=libpctx.3 ;; *) page=libcpc.3 ;; esac
  printf '.so man3/%s\n' "$page" >"$M/man3/$f.3"
done
for f in $(awk '/^[ \t]*(#|$)/ { next } $1 == "version" { v = $2; next }
    v == "PERFCTR_1" { print $1 }' "$repo/capi/abi.manifest"); do
  printf '.so man3/libperfctr.3\n' >"$M/man3/$f.3"
done

echo "install.sh: installed under ${destdir}${prefix}" >&2
