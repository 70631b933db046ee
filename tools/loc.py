#!/usr/bin/env python3
"""Lines of code of the Rust sources, and the longest `impl` block of each file.

    python3 tools/loc.py [--over N] [--impl-over M] [PATH...]    (default: src capi/src)

A line of code is a line that is not blank and not only a comment (`//`, `///`, `//!`, or
inside `/* ... */`); the `#[cfg(test)]` module at the end of a file (`mod tests { ... }`) is
not counted, and neither are data tables: an item whose body is mostly literal rows
(`const`/`static` arrays of tuples or struct literals, counted as "table lines") is reported
apart. An impl block is an `impl` item that starts at the beginning of a line and ends at the
first `}` back at that indentation; its size is its lines of code.

Prints, for each file: its lines, code lines, table lines, test lines, and the longest impl
block's code lines, its lines and its header; `--over N` keeps the files over N code lines, `--impl-over M` the files
with an impl block over M.
"""

import os
import re
import sys


def strip_comments(lines):
    """Each line with comments removed (block comments spanning lines too)."""
    out = []
    in_block = 0
    for line in lines:
        s = ""
        i = 0
        in_str = False
        while i < len(line):
            if in_block:
                if line.startswith("*/", i):
                    in_block -= 1
                    i += 2
                elif line.startswith("/*", i):
                    in_block += 1
                    i += 2
                else:
                    i += 1
                continue
            c = line[i]
            if in_str:
                s += c
                if c == "\\":
                    s += line[i + 1 : i + 2]
                    i += 2
                    continue
                if c == '"':
                    in_str = False
                i += 1
                continue
            if c == '"':
                in_str = True
                s += c
                i += 1
                continue
            if line.startswith("//", i):
                break
            if line.startswith("/*", i):
                in_block += 1
                i += 2
                continue
            s += c
            i += 1
        out.append(s.rstrip())
    return out


TABLE_START = re.compile(r"^\s*(pub(\([a-z]+\))?\s+)?(const|static)\s+[A-Z_0-9]+\s*:.*(\[|&\[)")


def analyse(path):
    raw = open(path, encoding="utf-8").read().split("\n")
    code = strip_comments(raw)
    kind = ["code"] * len(code)
    # The test module: `#[cfg(test)]` followed by `mod name {` at column 0, to its closing `}`.
    for i, l in enumerate(code):
        if l.strip() == "#[cfg(test)]" and i + 1 < len(code) and re.match(r"^(pub\s+)?mod \w+ \{", code[i + 1]):
            j = i + 1
            while j < len(code) and code[j] != "}":
                j += 1
            for k in range(i, min(j + 1, len(code))):
                kind[k] = "test"
    # Data tables: a const/static array item, to the line closing it at its indentation.
    i = 0
    while i < len(code):
        l = code[i]
        if kind[i] == "code" and TABLE_START.match(l) and not l.rstrip().endswith(";"):
            indent = len(l) - len(l.lstrip())
            j = i + 1
            while j < len(code) and not (
                code[j].strip() and len(code[j]) - len(code[j].lstrip()) == indent and code[j].lstrip()[0] in "];}"
            ):
                j += 1
            if j - i >= 8:
                for k in range(i, min(j + 1, len(code))):
                    kind[k] = "table"
            i = j + 1
            continue
        i += 1
    counts = {"code": 0, "table": 0, "test": 0}
    for l, k in zip(code, kind):
        if l.strip():
            counts[k] += 1
    # impl blocks at column 0.
    best = (0, "", 0)
    for i, l in enumerate(code):
        if kind[i] == "code" and re.match(r"^(unsafe\s+)?impl\b", l):
            j = i
            while j < len(code) and not code[j].startswith("}"):
                if j > i and code[j].startswith("impl"):
                    break
                j += 1
            n = sum(1 for k in range(i, min(j + 1, len(code))) if code[k].strip() and kind[k] == "code")
            if n > best[0]:
                best = (n, l.strip().rstrip("{").strip(), j - i + 1)
    counts["lines"] = len(raw) - (1 if raw and raw[-1] == "" else 0)
    return counts, best


def main():
    args = sys.argv[1:]
    over = impl_over = None
    paths = []
    while args:
        a = args.pop(0)
        if a == "--over":
            over = int(args.pop(0))
        elif a == "--impl-over":
            impl_over = int(args.pop(0))
        else:
            paths.append(a)
    if not paths:
        paths = ["src", "capi/src"]
    files = []
    for p in paths:
        if os.path.isfile(p):
            files.append(p)
        for root, _, names in os.walk(p):
            files += [os.path.join(root, n) for n in names if n.endswith(".rs")]
    rows = []
    for f in sorted(files):
        (c, (impl_n, impl_h, impl_raw)) = analyse(f)
        if over is not None or impl_over is not None:
            keep = (over is not None and c["code"] > over) or (impl_over is not None and impl_n > impl_over)
            if not keep:
                continue
        rows.append((f, c, impl_n, impl_h, impl_raw))
    print(f"{'file':46} {'lines':>6} {'code':>6} {'table':>6} {'test':>6} {'impl':>6} {'(lines)':>7}  longest impl")
    for f, c, n, h, r in rows:
        print(f"{f:46} {c['lines']:6} {c['code']:6} {c['table']:6} {c['test']:6} {n:6} {r:7}  {h}")
    print(f"{'total':46} {sum(r[1]['lines'] for r in rows):6} {sum(r[1]['code'] for r in rows):6}")


if __name__ == "__main__":
    main()
