# The read-only data of a first use, for tools/install.sh (issue 48, first use): reads
# `objdump -t -r` of the library's archive and, with -v renames=FILE (install.sh's section
# renames, one `old=new` a line), prints a rename `.rodata.X=.text.sorted.<rank>.~.rodata.X` for
# every read-only-data section that a function renamed .text.sorted.<rank>.* reads: named by
# one of its relocations, directly or through a symbol, or through a table of pointers it reads
# (a .data.rel.ro or .data section naming the constants: the perf backend's event names, a
# vtable's strings), up to three tables deep. The lowest rank that reads a section wins: it goes
# right after its first reader, and GNU ld's default script keeps .text.sorted.* in name order.
BEGIN {
  while ((getline line < renames) > 0) {
    eq = index(line, "=")
    to = substr(line, eq + 1)
    if (to ~ /^\.text\.sorted\.[0-9]+\./) {
      split(to, part, ".")
      rank[substr(line, 1, eq - 1)] = part[4]
    }
  }
}
/file format/ { member = $1; next }
/^SYMBOL TABLE:/ { mode = "t"; next }
/^RELOCATION RECORDS FOR \[/ {
  mode = "r"
  sec = substr($4, 2, length($4) - 3)
  next
}
# A symbol: its name is the last field, its section the last field before the tab.
mode == "t" && index($0, "\t") {
  head = substr($0, 1, index($0, "\t") - 1)
  n = split(head, f, " ")
  if (f[n] != "*UND*" && f[n] != "*ABS*" && f[n] != "*COM*") in_sec[$NF] = f[n]
  next
}
mode == "r" && NF == 3 && $1 ~ /^[0-9a-f]+$/ {
  to = $3
  sub(/[-+]0x[0-9a-f]+$/, "", to)
  if (sec in rank) {
    if (!((sec, to) in seen)) { seen[sec, to] = 1; reads[++nreads] = sec SUBSEP to }
  } else if (sec ~ /^\.data/) {
    names[sec] = names[sec] SUBSEP to
  }
}
function section_of(name) {
  if (name ~ /^\.(rodata|data)/) return name
  return (name in in_sec) ? in_sec[name] : ""
}
# Reading `name` from the function of rank `r`, `depth` tables deep.
function take(name, r, depth,   s, n, t, i) {
  s = section_of(name)
  if (s ~ /^\.rodata\./) {
    if (!(s in low) || r + 0 < low[s] + 0) low[s] = r
  } else if (s ~ /^\.data/ && depth < 3 && !((s, r) in walked)) {
    walked[s, r] = 1
    n = split(names[s], t, SUBSEP)
    for (i = 2; i <= n; i++) take(t[i], r, depth + 1)
  }
}
END {
  for (i = 1; i <= nreads; i++) {
    split(reads[i], p, SUBSEP)
    take(p[2], rank[p[1]], 0)
  }
  # With -v strings=<rank>: the merged strings (.rodata.str*: one section of ~30 KB on arm64,
  # every member's strings, which a first use reads a few of) go after the functions of that
  # rank, past the end of libcpc's first use, not before its code: its code then starts
  # ~30 KB lower and lies in one 64 KB window less (issue 48, first use, helper i48u).
  for (s in low) {
    r = low[s]
    if (strings != "" && s ~ /^\.rodata\.str/ && r + 0 < strings + 0) r = strings
    print s "=.text.sorted." r ".~" s
  }
}
