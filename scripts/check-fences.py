#!/usr/bin/env python3
"""Checks that every code fence in the given Markdown files closes.

A fence left open renders the rest of the page as code (issue 50: the README's
`organ layers` example swallowed the whole `organ meta` section). As CommonMark reads
them, a fence closes on a line of the same character, at least as long, with nothing
after it; a line like an opening fence (an info string after the backticks) met while a
block is open is the block's content there, and almost surely a closing fence missing
before it, so it is reported too.

    scripts/check-fences.py FILE.md...    exit 1 and one line per problem, or exit 0
"""
import re
import sys

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def problems(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    found = []
    open_at = None  # (fence, line number) of the block open now
    for number, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if not m:
            continue
        fence, info = m.group(1), m.group(2).strip()
        if open_at is None:
            open_at = (fence, number)
            continue
        same = fence[0] == open_at[0][0] and len(fence) >= len(open_at[0])
        if same and not info:
            open_at = None
        elif same:
            found.append(f"{path}:{number}: a fence opens ({line.strip()}) inside the block opened at line {open_at[1]}, which never closed")
            open_at = (fence, number)
    if open_at is not None:
        found.append(f"{path}:{open_at[1]}: the fence opened here never closes")
    return found


def main(paths):
    found = [p for path in paths for p in problems(path)]
    for p in found:
        print(p)
    if not found:
        print(f"code fences balanced in {len(paths)} files")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
