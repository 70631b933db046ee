#!/usr/bin/env python3
"""Turn "FILE OFFSET" lines (a sampling profiler's program counters, as offsets into the
loaded files) into a count per function, most first: `.ci/arm64 --profile` uses it.

usage: symbolize.py [--nm NM] NAME=PATH... < samples
A sample's FILE is matched by its base name against each NAME (a prefix); its function is the
nearest symbol at or below OFFSET in PATH (nm's full symbol table, else its dynamic one).
Samples in other files count under the file's name."""
import bisect
import collections
import os
import subprocess
import sys


def symbols(nm, path):
    for args in ([nm, "--defined-only", "-C", path], [nm, "-D", "--defined-only", "-C", path]):
        out = subprocess.run(args, capture_output=True, text=True).stdout
        syms = []
        for line in out.splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3 and parts[1].lower() in ("t", "w"):
                syms.append((int(parts[0], 16), parts[2]))
        if syms:
            syms.sort()
            return syms
    return []


def main():
    args = sys.argv[1:]
    nm = "nm"
    if args[:1] == ["--nm"]:
        nm, args = args[1], args[2:]
    files = {}
    for a in args:
        name, path = a.split("=", 1)
        syms = symbols(nm, path)
        files[name] = ([s[0] for s in syms], [s[1] for s in syms])
    counts = collections.Counter()
    total = 0
    for line in sys.stdin:
        parts = line.split()
        if len(parts) != 2:
            continue
        total += 1
        base = os.path.basename(parts[0])
        hit = next((v for k, v in files.items() if base.startswith(k)), None)
        if hit is None or not hit[0]:
            counts[base] += 1
            continue
        i = bisect.bisect_right(hit[0], int(parts[1], 16)) - 1
        counts[f"{base}: {hit[1][i] if i >= 0 else '?'}"] += 1
    print(f"{total} samples")
    for name, n in counts.most_common():
        print(f"{n:7d} {100.0 * n / max(total, 1):5.1f} %  {name}")


if __name__ == "__main__":
    main()
