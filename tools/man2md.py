#!/usr/bin/env python3
"""Render the man pages (man/*.1, *.3, *.7, written in man(7) macros) as Markdown pages under
docs/man/, so that the manual links a readable page, not raw troff.

    python3 tools/man2md.py [OUTDIR]     # default OUTDIR: docs/man

It knows the macros the pages use (.TH .SH .SS .PP .IP .TP .RS .RE .br .nf .fi and the font
macros .B .I .BR .BI .IB .IR .RB .RI) and their escapes; anything else is an error naming the
file and line, so a new macro cannot slip through unrendered. The output depends on nothing
but the input (no groff, no date): `cargo test -p perfcompat-capi --test docs` (man_pages_md)
compares it with docs/man/ and PERFCOMPAT_BLESS=1 rewrites docs/man/.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ESCAPES = {
    "-": "-", "(mu": "\u00d7", "(lq": "\u201c", "(rq": "\u201d", "(dq": '"', "(em": "\u2014",
    "(en": "\u2013", "(mc": "\u00b5", "(bu": "\u2022", "e": "\\", "&": "", "~": " ", " ": " ",
}


class ManError(Exception):
    pass


def md_escape(text):
    """Markdown's special characters in running text."""
    out = []
    for c in text:
        if c in "\\`*_[]#":
            out.append("\\" + c)
        elif c == "<":
            out.append("&lt;")
        elif c == ">":
            out.append("&gt;")
        else:
            out.append(c)
    return "".join(out)


def runs(text, font, where):
    """Split troff text into (font, text) runs, starting in `font`, resolving escapes."""
    out = []
    cur = font
    buf = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            buf.append(c)
            i += 1
            continue
        nxt = text[i + 1 : i + 2]
        if nxt == "f":
            f = text[i + 2 : i + 3]
            if f not in "BIRP" or not f:
                raise ManError(f"{where}: unknown font \\f{f}")
            out.append((cur, "".join(buf)))
            buf = []
            cur = font if f in "RP" else f
            i += 3
            continue
        if nxt == "c" and i + 2 == len(text):
            out.append((cur, "".join(buf)))
            out.append(("join", ""))
            return out
        for k, v in ESCAPES.items():
            if text.startswith(k, i + 1):
                buf.append(v)
                i += 1 + len(k)
                break
        else:
            raise ManError(f"{where}: unknown escape {text[i:i + 4]!r}")
    out.append((cur, "".join(buf)))
    return out


def render_runs(rs, plain):
    """Markdown for runs: bold and italic markers kept off surrounding blanks."""
    s = []
    for font, t in rs:
        if font == "join" or not t:
            continue
        if plain or font == "R" or not t.strip():
            s.append(t if plain else md_escape(t))
            continue
        mark = "**" if font == "B" else "*"
        core = t.strip()
        lead = t[: len(t) - len(t.lstrip())]
        trail = t[len(t.rstrip()) :]
        s.append(f"{lead}{mark}{md_escape(core)}{mark}{trail}")
    return "".join(s)


def args_of(rest):
    """A macro line's arguments: blank-separated, "quoted" (with "" for a quote) kept whole."""
    out = []
    i = 0
    while i < len(rest):
        if rest[i] == " ":
            i += 1
            continue
        if rest[i] == '"':
            j = i + 1
            a = []
            while j < len(rest):
                if rest[j] == '"':
                    if rest[j + 1 : j + 2] == '"':
                        a.append('"')
                        j += 2
                        continue
                    break
                a.append(rest[j])
                j += 1
            out.append("".join(a))
            i = j + 1
        else:
            j = rest.find(" ", i)
            j = len(rest) if j < 0 else j
            out.append(rest[i:j])
            i = j
    return out


FONT_MACROS = {"B": "B", "I": "I", "BR": "BR", "BI": "BI", "IB": "IB", "IR": "IR", "RB": "RB",
               "RI": "RI"}


def font_line(macro, rest, where):
    """The runs of a font macro's line: one font for .B/.I, alternating for the others."""
    args = args_of(rest)
    if macro in ("B", "I"):
        return runs(" ".join(args), macro, where)
    fonts = FONT_MACROS[macro]
    out = []
    for n, a in enumerate(args):
        out.extend(runs(a, fonts[n % 2], where))
    return out


def convert(name, text):
    """Markdown for the man page `name` whose troff source is `text`."""
    lines = []
    for line in text.split("\n"):
        # A backslash at the end of a line continues it on the next.
        if lines and lines[-1].endswith("\\") and not lines[-1].endswith("\\\\"):
            lines[-1] = lines[-1][:-1] + line
        else:
            lines.append(line)
    out = []          # finished Markdown lines
    para = []         # the paragraph being built: rendered text pieces
    state = {"list": False, "nf": False, "tag": False, "join": False}
    title = None

    def flush():
        if para:
            body = "".join(para).strip()
            body = re.sub(r"[ \t]*\n[ \t]*", "\n", body)
            if state["list"]:
                body = body.replace("\n", "\n  ")
            out.append(("  " if state["list"] else "") + body)
            out.append("")
            para.clear()

    def add(piece):
        if state["tag"]:
            # The line after .TP is the item's tag.
            flush()
            out.append("- " + piece.strip())
            out.append("")
            state["tag"] = False
            state["list"] = True
            return
        if para and not state["join"]:
            para.append("\n")
        state["join"] = False
        para.append(piece)

    code = []
    for n, line in enumerate(lines, 1):
        where = f"man/{name}:{n}"
        if line.startswith('.\\"'):
            continue
        if state["nf"]:
            if line == ".fi":
                out.append("```text")
                out.extend(code)
                out.append("```")
                out.append("")
                code = []
                state["nf"] = False
                continue
            if line.startswith("."):
                macro, _, rest = line[1:].partition(" ")
                if macro in FONT_MACROS:
                    code.append(render_runs(font_line(macro, rest, where), True))
                    continue
                if macro in ("br", "PP"):
                    code.append("")
                    continue
                raise ManError(f"{where}: .{macro} inside .nf")
            code.append(render_runs(runs(line, "R", where), True))
            continue
        if not line.startswith("."):
            if not line.strip():
                flush()
                continue
            rs = runs(line, "R", where)
            joined = bool(rs) and rs[-1][0] == "join"
            add(render_runs(rs, False))
            state["join"] = joined
            continue
        macro, _, rest = line[1:].partition(" ")
        if macro == "TH":
            a = args_of(rest)
            title = f"{a[0].lower()}({a[1]})"
        elif macro in ("SH", "SS"):
            flush()
            state["list"] = False
            head = " ".join(args_of(rest))
            out.append(("## " if macro == "SH" else "### ") + md_escape(head))
            out.append("")
        elif macro == "PP":
            flush()
            state["list"] = False
        elif macro == "TP":
            flush()
            state["tag"] = True
        elif macro == "IP":
            flush()
            a = args_of(rest)
            if a and a[0] not in ("\\(bu", "-"):
                out.append("- " + render_runs(runs(a[0], "R", where), False))
                out.append("")
                state["list"] = True
        elif macro in ("RS", "RE"):
            flush()
        elif macro == "br":
            if para:
                para.append("\\")
        elif macro == "nf":
            flush()
            state["nf"] = True
        elif macro == "fi":
            raise ManError(f"{where}: .fi without .nf")
        elif macro in FONT_MACROS:
            rs = font_line(macro, rest, where)
            joined = bool(rs) and rs[-1][0] == "join"
            add(render_runs(rs, False))
            state["join"] = joined
        else:
            raise ManError(f"{where}: macro .{macro} is not rendered (add it to tools/man2md.py)")
    flush()
    if title is None:
        raise ManError(f"man/{name}: no .TH line")
    head = [
        f"# {title}",
        "",
        f"<!-- Generated from man/{name} by tools/man2md.py: edit the man page, then run "
        "PERFCOMPAT_BLESS=1 cargo test -p perfcompat-capi --test docs man_pages -->",
        "",
        f"The manual page `man/{name}` as installed (`man {title.split('(')[0]}`), rendered. "
        "[All man pages](../index.md#man-pages).",
        "",
    ]
    while out and out[-1] == "":
        out.pop()
    return "\n".join(head + out) + "\n"


def pages():
    mandir = os.path.join(ROOT, "man")
    return sorted(f for f in os.listdir(mandir) if re.search(r"\.[137]$", f))


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs", "man")
    os.makedirs(outdir, exist_ok=True)
    try:
        for name in pages():
            with open(os.path.join(ROOT, "man", name), encoding="utf-8") as f:
                md = convert(name, f.read())
            with open(os.path.join(outdir, name + ".md"), "w", encoding="utf-8") as f:
                f.write(md)
    except ManError as e:
        print(f"man2md: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
