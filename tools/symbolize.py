#!/usr/bin/env python3
"""Turn "FILE OFFSET" lines (a sampling profiler's program counters, as offsets into the
loaded files) into a count per function, most first: `.ci/arm64 --profile` uses it.

usage: symbolize.py [--nm NM] [--lines ADDR2LINE] NAME=PATH... < samples
A sample's FILE is matched by its base name against each NAME (a prefix); its function is the
nearest symbol at or below OFFSET in PATH (nm's full symbol table, else its dynamic one).
Samples in other files count under the file's name. With --lines, samples are counted by
source line (ADDR2LINE -i: the line and the functions it was inlined into), for files with
debugging information."""
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
    addr2line = None
    while args[:1] in (["--nm"], ["--lines"]):
        if args[0] == "--nm":
            nm = args[1]
        else:
            addr2line = args[1]
        args = args[2:]
    files = {}
    for a in args:
        name, path = a.split("=", 1)
        syms = symbols(nm, path)
        files[name] = ([s[0] for s in syms], [s[1] for s in syms])
    counts = collections.Counter()
    total = 0
    if addr2line:
        by_file = collections.defaultdict(list)
        for line in sys.stdin:
            parts = line.split()
            if len(parts) == 2:
                by_file[os.path.basename(parts[0])].append(parts[1])
        paths = dict(a.split("=", 1) for a in args)
        for base, offs in by_file.items():
            total += len(offs)
            path = next((p for k, p in paths.items() if base.startswith(k)), None)
            if path is None:
                counts[base] += len(offs)
                continue
            uniq = sorted(set(offs))
            out = subprocess.run([addr2line, "-i", "-e", path] + ["0x" + o for o in uniq],
                                 capture_output=True, text=True).stdout
            # One group of lines per address, the innermost first: addr2line -i prints a
            # variable number, so ask again with a marker address between them.
            where = {}
            for o in uniq:
                r = subprocess.run([addr2line, "-i", "-e", path, "0x" + o], capture_output=True,
                                   text=True).stdout.split()
                short = [x.split("/work/main/")[-1].split("/rustc/")[-1] for x in r]
                where[o] = " < ".join(short[:3])
            del out
            for o in offs:
                counts[f"{base}: {where[o]}"] += 1
        print(f"{total} samples")
        for name, n in counts.most_common():
            print(f"{n:7d} {100.0 * n / max(total, 1):5.1f} %  {name}")
        return
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
